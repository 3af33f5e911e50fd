/* SPDX-License-Identifier: MIT */
/*
 * Test driver of the S3 store: one upload through the egress target API on a private libuv loop,
 * as a producer would do it (write while !full, wait for on_ready, finish), of deterministic
 * pseudo-random bytes that are also written to --out for the byte-for-byte comparison.
 *
 *   s3_upload --key K --size N [--chunk C] [--out FILE] [--abort-after BYTES]
 *             [--stall-after BYTES --stall-ms MS] Setting=Value...
 *
 * --stall-after: the producer stops once for MS milliseconds after BYTES (an artifact that comes
 * slowly: temporary credentials may go stale meanwhile).
 *
 * Settings are those of Egress:S3Storage:<name>:… (BucketName=…, Endpoint=…). Prints one line
 * "status=<n> location=<url>" or "status=<n> error=<message>", then "maxrss_kb=<n>", and exits
 * 0 when on_done came exactly once and the loop closed clean (uv_loop_close() == 0), 1 otherwise
 * (the status is the tests' to judge).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <uv.h>

#include "buf.h"
#include "egress_internal.h"

struct producer {
    struct egress_target *t;
    uint64_t size, sent, abort_after, stall_after, stall_ms;
    bool stalled, stalling;
    uv_timer_t stall;
    size_t chunk;
    uint64_t rng;
    FILE *out;
    bool finished, aborted;
    int done_calls;
    int status;
    unsigned ready_calls;
};

static void pump(struct producer *p);

static void on_stall_end(uv_timer_t *h)
{
    struct producer *p = h->data;
    p->stalling = false;
    if (!uv_is_closing((uv_handle_t *)h)) {
        uv_close((uv_handle_t *)h, NULL);
    }
    pump(p);
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Writes while the target has room; finishes (or aborts) at the end. */
static void pump(struct producer *p)
{
    while (!p->finished && !p->aborted && p->done_calls == 0 && !p->stalling) {
        if (p->abort_after != 0 && p->sent >= p->abort_after) {
            p->aborted = true;
            p->t->ops->abort(p->t);
            return;
        }
        if (p->stall_after != 0 && p->sent >= p->stall_after && !p->stalled) {
            p->stalled = true;
            p->stalling = true;
            uv_timer_start(&p->stall, on_stall_end, p->stall_ms, 0);
            return;
        }
        if (p->sent == p->size) {
            p->finished = true;
            p->t->ops->finish(p->t);
            return;
        }
        if (p->t->ops->full(p->t)) {
            return; /* on_ready will call again */
        }
        size_t n = p->size - p->sent < p->chunk ? (size_t)(p->size - p->sent) : p->chunk;
        uint8_t *b = malloc(n + 8);
        if (b == NULL) {
            abort();
        }
        for (size_t i = 0; i < n; i += 8) {
            uint64_t r = next_rand(&p->rng);
            memcpy(b + i, &r, 8);
        }
        if (p->out != NULL && fwrite(b, 1, n, p->out) != n) {
            abort();
        }
        int rc;
        /* Alternate the two ways of handing bytes over: owned block, and copied. */
        if ((p->sent / p->chunk) % 2 == 0) {
            rc = p->t->ops->write(p->t, b, b, n);
        } else {
            rc = p->t->ops->write(p->t, NULL, b, n);
            free(b);
        }
        p->sent += n;
        if (rc != 0) {
            fprintf(stderr, "write: %d\n", rc);
            return; /* on_done follows */
        }
    }
}

static void on_ready(void *ud)
{
    struct producer *p = ud;
    p->ready_calls++;
    pump(p);
}

static void on_done(void *ud, int status, const char *location, const char *error_message)
{
    struct producer *p = ud;
    p->done_calls++;
    if (p->stall_after != 0 && !uv_is_closing((uv_handle_t *)&p->stall)) {
        uv_close((uv_handle_t *)&p->stall, NULL); /* the stall, if it is still to come */
    }
    p->status = status;
    if (status == 0) {
        printf("status=0 location=%s\n", location);
    } else {
        printf("status=%d error=%s\n", status, error_message != NULL ? error_message : "");
    }
    fflush(stdout);
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    fprintf(stderr, "leaked handle type %d\n", (int)h->type);
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

int main(int argc, char **argv)
{
    struct producer p;
    memset(&p, 0, sizeof(p));
    p.chunk = 65536;
    p.rng = 0x9E3779B97F4A7C15ull;
    const char *key = "artifact.bin", *out = NULL;
    struct egress_s3_options o;
    memset(&o, 0, sizeof(o));
    struct buf errors;
    buf_init(&errors, 0);
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--key") == 0 && i + 1 < argc) {
            key = argv[++i];
        } else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
            p.size = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--chunk") == 0 && i + 1 < argc) {
            p.chunk = (size_t)strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            out = argv[++i];
        } else if (strcmp(argv[i], "--stall-after") == 0 && i + 1 < argc) {
            p.stall_after = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--stall-ms") == 0 && i + 1 < argc) {
            p.stall_ms = strtoull(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--abort-after") == 0 && i + 1 < argc) {
            p.abort_after = strtoull(argv[++i], NULL, 10);
        } else {
            char *eq = strchr(argv[i], '=');
            if (eq == NULL) {
                fprintf(stderr, "usage: see the file's header\n");
                return 2;
            }
            *eq = '\0';
            char full[256];
            snprintf(full, sizeof(full), "Egress:S3Storage:test:%s", argv[i]);
            bad |= egress_s3_set(&o, full, argv[i], eq + 1, &errors) != 0;
        }
    }
    if (bad || egress_s3_check(&o, "test", &errors) != 0) {
        printf("config=%s", buf_cstr(&errors));
        egress_s3_options_fini(&o);
        buf_fini(&errors);
        return 3;
    }
    if (out != NULL && (p.out = fopen(out, "wb")) == NULL) {
        perror(out);
        return 2;
    }
    uv_loop_t loop;
    uv_loop_init(&loop);
    uv_timer_init(&loop, &p.stall);
    p.stall.data = &p;
    if (p.stall_after == 0) {
        uv_close((uv_handle_t *)&p.stall, NULL);
    }
    struct egress_request rq = {key, "application/octet-stream", on_ready, on_done, &p, 0, 0};
    int rc = egress_s3_open(&loop, &o, &rq, &p.t);
    if (rc != 0) {
        printf("status=%d error=open failed\n", rc);
    } else {
        pump(&p);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    int closed = uv_loop_close(&loop);
    if (closed != 0) {
        uv_walk(&loop, close_walk, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        closed = uv_loop_close(&loop);
        fprintf(stderr, "loop was not clean\n");
        closed = closed == 0 ? 1 : closed;
    }
    if (p.out != NULL) {
        fclose(p.out);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("maxrss_kb=%ld ready_calls=%u\n", ru.ru_maxrss, p.ready_calls);
    egress_s3_options_fini(&o);
    buf_fini(&errors);
    bool ok = rc != 0 || p.done_calls == 1;
    if (!ok) {
        fprintf(stderr, "on_done called %d times\n", p.done_calls);
    }
    return ok && closed == 0 ? 0 : 1;
}
