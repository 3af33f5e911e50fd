/* SPDX-License-Identifier: MIT */
/*
 * attack_runtime DIR PID KEY: a planted diagnostic socket for test_agent_attacks, run as another
 * user. Starts tests/support's fake runtime at DIR/dotnet-diagnostic-PID-KEY-socket, claiming to
 * be PID (a real app's pid), and answers ProcessInfo with made-up data (command line
 * "/attacker/made-up --planted"). Prints "ready <socket path>" once it listens; runs until
 * killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "fake_runtime.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: attack_runtime DIR PID KEY\n");
        return 2;
    }
    struct fake_runtime_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.pid = strtoull(argv[2], NULL, 10);
    cfg.key = strtoull(argv[3], NULL, 10);
    for (size_t i = 0; i < sizeof(cfg.cookie); i++) {
        cfg.cookie[i] = (uint8_t)(0xa0 + i);
    }
    cfg.command_line = "/attacker/made-up --planted";
    cfg.os = "Linux";
    cfg.arch = "x64";
    cfg.assembly = "made-up";
    cfg.clr_version = "10.0.0";
    cfg.rid = "linux-x64";
    cfg.dump.fault = FAKE_DUMP_OK;
    cfg.dump.file_bytes = 4096;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        return 1;
    }
    struct fake_runtime *f = NULL;
    int rc = fake_runtime_start(&loop, argv[1], &cfg, &f);
    if (rc != 0) {
        fprintf(stderr, "attack_runtime: %s\n", uv_strerror(rc));
        return 1;
    }
    printf("ready %s\n", fake_runtime_path(f));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    return 0;
}
