/* SPDX-License-Identifier: MIT */
/*
 * bench_decode FILE [ROUNDS]: decoder throughput on a nettrace file held in memory (issue 15).
 * Three passes, each the best of ROUNDS (default 5):
 *   nettrace   the block reader alone (events/nettrace.c: every block, blob header and metadata
 *              record checked, each event handed to a callback);
 *   payload    the same, plus every event with a described field list decoded by it
 *              (events/ev_payload.c) and each of its numbers and strings read (UTF-16 → UTF-8);
 *   metrics    ev_stream (the metrics decoder dotmon runs per process: nettrace, payloads,
 *              EventCounters and meter samples).
 * Prints MB/s for each (MB = 10^6 bytes of file), events, decoded events and samples. Compare with
 * TraceEvent reading the same file (tests/tools/tracecheck) in bench/bench_decode.sh.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ev_payload.h"
#include "ev_stream.h"
#include "nettrace.h"

#define MAX_IDS 65536

struct pass {
    struct ev_schema *schemas[MAX_IDS];
    uint64_t events;
    uint64_t decoded;
    uint64_t values;
    uint64_t samples;
    double sink;
    bool decode;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_metadata(void *ud, const struct nettrace_metadata *md, const uint8_t *p, size_t n)
{
    struct pass *ps = ud;
    struct ev_schema *s = NULL;
    if (md->metadata_id < MAX_IDS && ev_schema_parse(p, n, &s) == 0) {
        ev_schema_free(ps->schemas[md->metadata_id]);
        ps->schemas[md->metadata_id] = s;
    }
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct pass *ps = ud;
    ps->events++;
    if (!ps->decode || ev->metadata_id >= MAX_IDS || ps->schemas[ev->metadata_id] == NULL) {
        return;
    }
    const struct ev_schema *s = ps->schemas[ev->metadata_id];
    static struct ev_record rec;
    if (s->nfields <= 1 || ev_record_decode(&rec, s, ev->payload, ev->payload_len) != 0) {
        return;
    }
    ps->decoded++;
    char text[512];
    for (int k = 1; k < s->nfields; k++) {
        double d = 0;
        size_t len = 0;
        if (s->fields[k].code == EV_TYPE_STRING) {
            if (ev_record_str(&rec, k, text, sizeof(text), &len) == 0) {
                ps->values++;
                ps->sink += (double)len;
            }
        } else if (ev_record_f64(&rec, k, &d) == 0) {
            ps->values++;
            ps->sink += d;
        }
    }
}

static void on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct pass *ps = ud;
    ps->samples++;
    ps->sink += s->value;
}

static double run_nettrace(const uint8_t *buf, size_t n, bool decode, struct pass *ps)
{
    memset(ps, 0, sizeof(*ps));
    ps->decode = decode;
    struct nettrace_checker ck;
    if (nettrace_checker_init(&ck, NULL) != 0) {
        return -1;
    }
    nettrace_set_event_cb(&ck, on_event, ps);
    if (decode) {
        nettrace_set_metadata_cb(&ck, on_metadata, ps);
    }
    double t = now_s();
    int rc = nettrace_feed(&ck, buf, n);
    enum nettrace_verdict v = nettrace_finish(&ck);
    t = now_s() - t;
    if (rc != 0 || v == NETTRACE_INVALID) {
        fprintf(stderr, "bench_decode: the file is not a valid nettrace: %s\n",
                nettrace_error(&ck, NULL));
        t = -1;
    }
    nettrace_checker_fini(&ck);
    for (size_t i = 0; i < MAX_IDS; i++) {
        ev_schema_free(ps->schemas[i]);
    }
    return t;
}

static double run_metrics(const uint8_t *buf, size_t n, struct pass *ps)
{
    memset(ps, 0, sizeof(*ps));
    struct ev_stream *st = NULL;
    if (ev_stream_new(&st, NULL, on_sample, NULL, ps) != 0) {
        return -1;
    }
    double t = now_s();
    int rc = ev_stream_feed(st, buf, n);
    t = now_s() - t;
    struct ev_stream_stats stats;
    ev_stream_get_stats(st, &stats);
    ps->events = stats.events;
    if (rc != 0) {
        fprintf(stderr, "bench_decode: ev_stream: %s\n", ev_stream_error(st));
        t = -1;
    }
    ev_stream_free(st);
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_decode FILE [ROUNDS]\n");
        return 2;
    }
    int rounds = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 5;
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 2;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(size > 0 ? (size_t)size : 1);
    if (buf == NULL || fread(buf, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "bench_decode: cannot read %s\n", argv[1]);
        fclose(f);
        free(buf);
        return 2;
    }
    fclose(f);
    static struct pass ps;
    const char *names[] = {"nettrace", "payload", "metrics"};
    for (int kind = 0; kind < 3; kind++) {
        double best = -1;
        for (int r = 0; r < (rounds > 0 ? rounds : 1); r++) {
            double t = kind == 2 ? run_metrics(buf, (size_t)size, &ps)
                                 : run_nettrace(buf, (size_t)size, kind == 1, &ps);
            if (t < 0) {
                free(buf);
                return 1;
            }
            best = (best < 0 || t < best) ? t : best;
        }
        printf("%-9s %8.1f MB/s  (%.3f s for %.1f MB; %llu events, %llu decoded, %llu values, "
               "%llu samples)\n",
               names[kind], (double)size / 1e6 / best, best, (double)size / 1e6,
               (unsigned long long)ps.events, (unsigned long long)ps.decoded,
               (unsigned long long)ps.values, (unsigned long long)ps.samples);
    }
    free(buf);
    return 0;
}
