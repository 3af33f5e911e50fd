/* SPDX-License-Identifier: MIT */
/*
 * bench_decode FILE [ROUNDS]: decoder throughput on a nettrace file held in memory (issue 15).
 * Three passes, each run ROUNDS times (default 5, at most 64):
 *   nettrace   the block reader alone (events/nettrace.c: every block, blob header and metadata
 *              record checked, each event handed to a callback);
 *   payload    the same, plus every event with a described field list decoded by it
 *              (events/ev_payload.c) and each of its numbers and strings read (UTF-16 → UTF-8);
 *   metrics    ev_stream (the metrics decoder dotmon runs per process: nettrace, payloads,
 *              EventCounters and meter samples).
 * Prints a markdown table: for each pass the median MB/s (MB = 10^6 bytes of file), the min-max,
 * every round's MB/s, events, decoded events, values and samples. Compare with TraceEvent reading
 * the same file (tests/tools/tracecheck) in bench/bench_decode.sh.
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

#define MAX_IDS    65536
#define MAX_ROUNDS 64

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

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* " median | min-max | r1, r2, ... |" of the n rounds' MB/s (n >= 1), rounds in their order. */
static void print_stats(const double *v, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, v, (size_t)n * sizeof(s[0]));
    qsort(s, (size_t)n, sizeof(s[0]), cmp_double);
    double med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    printf(" %.1f | %.1f-%.1f |", med, s[0], s[n - 1]);
    for (int i = 0; i < n; i++) {
        printf("%s%.1f", i ? ", " : " ", v[i]);
    }
    printf(" |");
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
    if (rounds < 1 || rounds > MAX_ROUNDS) {
        rounds = rounds < 1 ? 1 : MAX_ROUNDS;
    }
    printf("| pass | MB/s, median of %d | min-max | each round (MB/s) | events | decoded | values "
           "| samples |\n|---|---|---|---|---|---|---|---|\n",
           rounds);
    for (int kind = 0; kind < 3; kind++) {
        double mbs[MAX_ROUNDS];
        for (int r = 0; r < rounds; r++) {
            double t = kind == 2 ? run_metrics(buf, (size_t)size, &ps)
                                 : run_nettrace(buf, (size_t)size, kind == 1, &ps);
            if (t < 0) {
                free(buf);
                return 1;
            }
            mbs[r] = (double)size / 1e6 / t;
        }
        printf("| %s |", names[kind]);
        print_stats(mbs, rounds);
        printf(" %llu | %llu | %llu | %llu |\n", (unsigned long long)ps.events,
               (unsigned long long)ps.decoded, (unsigned long long)ps.values,
               (unsigned long long)ps.samples);
    }
    free(buf);
    return 0;
}
