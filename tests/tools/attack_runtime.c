/* SPDX-License-Identifier: MIT */
/*
 * attack_runtime DIR PID KEY: a planted diagnostic socket for test_agent_attacks, run as another
 * user. Starts tests/support's fake runtime at DIR/dotnet-diagnostic-PID-KEY-socket, claiming to
 * be PID (a real app's pid), and answers ProcessInfo with made-up data (command line
 * "/attacker/made-up --planted"). Prints "ready <socket path>" once it listens; runs until
 * killed.
 *
 * attack_runtime --reverse SOCKET PID: the same runtime connecting to a listen-mode dotmon's
 * SOCKET (as DOTNET_DiagnosticPorts would), advertising PID; prints "ready" at once.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include "fake_runtime.h"

int main(int argc, char **argv)
{
    bool reverse = argc == 4 && strcmp(argv[1], "--reverse") == 0;
    if (argc != 4) {
        fprintf(stderr, "usage: attack_runtime DIR PID KEY | --reverse SOCKET PID\n");
        return 2;
    }
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, strtoull(argv[reverse ? 3 : 2], NULL, 10),
                             reverse ? 0 : strtoull(argv[3], NULL, 10), 0xa5,
                             "/attacker/made-up --planted", "made-up");
    cfg.dump.fault = FAKE_DUMP_OK;
    cfg.dump.file_bytes = 4096;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        return 1;
    }
    struct fake_runtime *f = NULL;
    int rc = reverse ? fake_runtime_start_reverse(&loop, argv[2], &cfg, &f)
                     : fake_runtime_start(&loop, argv[1], &cfg, &f);
    if (rc != 0) {
        fprintf(stderr, "attack_runtime: %s\n", uv_strerror(rc));
        return 1;
    }
    printf("ready %s\n", reverse ? argv[2] : fake_runtime_path(f));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    return 0;
}
