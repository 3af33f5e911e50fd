/* SPDX-License-Identifier: MIT */
/*
 * gcheap_attack DIR: a hostile runtime for /gcdump (issue 28). Starts tests/support's fake runtime
 * at DIR/dotnet-diagnostic-<own pid>-1-socket; each CollectTracing session is answered with an
 * endless hostile heap walk (tests/events/gcheap_hostile.h), in turn: endless pending edges,
 * edgeless nodes, 30,000-character type names, then again. Prints "ready <socket path>" once it
 * listens; runs until killed. gcheap_attack DIR methods: every session (a /profile's) gets endless
 * ever-new methods named by 30,000 characters instead.
 *
 * gcheap_attack --file PATH edges|nodes|names|methods MB: writes MB MiB of one kind of that stream
 * (an unfinished file: no GCEnd, no end tag) to PATH, for `dotmon convert` (methods: for its
 * speedscope format).
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "fake_runtime.h"
#include "gcheap_hostile.h"

struct attack {
    struct gh h;
    unsigned sessions;
    bool methods; /* gcheap_attack DIR methods: every session gets GH_METHODS */
};

static size_t source(void *ud, uint64_t off, uint8_t *buf, size_t cap)
{
    struct attack *a = ud;
    if (off == 0) {
        static const enum gh_kind order[3] = {GH_EDGES, GH_NODES, GH_NAMES};
        gh_free(&a->h);
        gh_start(&a->h, a->methods ? GH_METHODS : order[a->sessions++ % 3]);
    }
    return gh_next(&a->h, buf, cap);
}

static int write_file(const char *path, const char *kind, uint64_t mb)
{
    enum gh_kind k = strcmp(kind, "edges") == 0     ? GH_EDGES
                     : strcmp(kind, "nodes") == 0   ? GH_NODES
                     : strcmp(kind, "methods") == 0 ? GH_METHODS
                                                    : GH_NAMES;
    FILE *f = fopen(path, "wb");
    if (f == NULL) {
        perror(path);
        return 1;
    }
    struct gh h;
    gh_start(&h, k);
    static uint8_t buf[65536];
    for (uint64_t done = 0; done < (mb << 20);) {
        size_t n = gh_next(&h, buf, sizeof(buf));
        if (fwrite(buf, 1, n, f) != n) {
            perror(path);
            fclose(f);
            gh_free(&h);
            return 1;
        }
        done += n;
    }
    gh_free(&h);
    return fclose(f) == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--file") == 0) {
        return write_file(argv[2], argv[3], strtoull(argv[4], NULL, 10));
    }
    if (argc != 2 && !(argc == 3 && strcmp(argv[2], "methods") == 0)) {
        fprintf(stderr,
                "usage: gcheap_attack DIR [methods] | --file PATH edges|nodes|names|methods MB\n");
        return 2;
    }
    static struct attack a;
    a.methods = argc == 3;
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, (uint64_t)getpid(), 1, 0xa7, "/attacker/heap --hostile", "heap");
    cfg.trace.source = source;
    cfg.trace.source_ud = &a;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        return 1;
    }
    struct fake_runtime *f = NULL;
    int rc = fake_runtime_start(&loop, argv[1], &cfg, &f);
    if (rc != 0) {
        fprintf(stderr, "gcheap_attack: %s\n", uv_strerror(rc));
        return 1;
    }
    printf("ready %s\n", fake_runtime_path(f));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    gh_free(&a.h);
    return 0;
}
