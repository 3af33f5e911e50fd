/* SPDX-License-Identifier: MIT */
/*
 * flood_runtime DIR [NAME_CHARS [EVENTS_PER_BLOCK]]: a hostile runtime for the memory-budget test
 * (tests/metrics/check_memory_budget.py). tests/support's fake runtime, listening at
 * DIR/dotnet-diagnostic-<own pid>-<key>-socket, whose every EventPipe session streams
 * System.Runtime EventCounters (docs/events.md §2.2, Mean shape) without end: each event a counter
 * never seen before, its Name and DisplayName NAME_CHARS characters long (default 30,000), 4 events
 * every 20 ms (EVENTS_PER_BLOCK: that many in one nettrace block instead). The names start
 * "zz-flood-", so their families sort after a real runtime's System.Runtime ones. Prints "ready
 * <socket path>" once it listens; runs until killed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "fake_runtime.h"
#include "ntw.h"
#include "wbuf.h"

#define MD_MEAN          1
#define EVENTS_PER_PIECE 4 /* per block, unless the third argument says otherwise */

struct flood {
    size_t name_chars;
    unsigned events; /* per block */
    char *name;      /* NAME_CHARS characters; its head changes per event */
    uint64_t next;
    struct nt nt[FAKE_MAX_SESSIONS];
    bool md_sent[FAKE_MAX_SESSIONS];
};

struct fdesc {
    uint32_t code;
    const char *name;
};

static const struct fdesc mean_fields[] = {
    {18, "Name"},   {18, "DisplayName"}, {14, "Mean"},     {14, "StandardDeviation"},
    {9, "Count"},   {14, "Min"},         {14, "Max"},      {13, "IntervalSec"},
    {18, "Series"}, {18, "CounterType"}, {18, "Metadata"}, {18, "DisplayUnits"},
};

/* The metadata record of System.Runtime's EventCounters event: "" { Payload { fields } }. */
static void md_counters(struct nt *t)
{
    struct wb w = {0};
    wb_u32(&w, MD_MEAN);
    wb_wstr(&w, "System.Runtime");
    wb_u32(&w, 101);
    wb_wstr(&w, "EventCounters");
    wb_le(&w, 0xF00000000002ull, 8);
    wb_u32(&w, 2);
    wb_u32(&w, 4);
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    size_t n = sizeof(mean_fields) / sizeof(mean_fields[0]);
    wb_u32(&w, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        wb_u32(&w, mean_fields[k].code);
        wb_wstr(&w, mean_fields[k].name);
    }
    wb_wstr(&w, "Payload");
    wb_wstr(&w, "");
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static void gen(void *ud, unsigned sess, uint64_t off, uint8_t **out, size_t *len)
{
    struct flood *fl = ud;
    struct nt *t = &fl->nt[sess];
    /* Blocks are padded by their absolute offset: start t->out at the same offset modulo 4. */
    t->out.n = 0;
    size_t skip = (size_t)(off % 4);
    wb_le(&t->out, 0, skip);
    if (!fl->md_sent[sess]) {
        fl->md_sent[sess] = true;
        md_counters(t);
        nt_block(t, "MetadataBlock", false);
    }
    struct wb p = {0};
    for (unsigned k = 0; k < fl->events; k++) {
        char head[32];
        int hn = snprintf(head, sizeof(head), "zz-flood-%llu-", (unsigned long long)fl->next++);
        memcpy(fl->name, head, (size_t)hn < fl->name_chars ? (size_t)hn : fl->name_chars);
        wb_wstr(&p, fl->name); /* Name */
        wb_wstr(&p, fl->name); /* DisplayName */
        wb_f64(&p, 1.0);
        wb_f64(&p, 0);
        wb_u32(&p, 1);
        wb_f64(&p, 1.0);
        wb_f64(&p, 1.0);
        wb_f32(&p, 5.0f);
        wb_wstr(&p, "Interval=5000");
        wb_wstr(&p, "Mean");
        wb_wstr(&p, "k:v"); /* Metadata (the decoder holds 64 KiB of text per event) */
        wb_wstr(&p, "B");
        nt_blob(t, MD_MEAN, SYNC_QPC + (int64_t)fl->next * 1000000, 0, 0, &p);
        p.n = 0;
    }
    free(p.b);
    nt_block(t, "EventBlock", false);
    *len = t->out.n - skip;
    *out = malloc(*len);
    if (*out == NULL) {
        abort();
    }
    memcpy(*out, t->out.b + skip, *len);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 4) {
        fprintf(stderr, "usage: flood_runtime DIR [NAME_CHARS [EVENTS_PER_BLOCK]]\n");
        return 2;
    }
    static struct flood fl;
    fl.name_chars = argc >= 3 ? strtoull(argv[2], NULL, 10) : 30000;
    fl.events = argc == 4 ? (unsigned)strtoul(argv[3], NULL, 10) : EVENTS_PER_PIECE;
    fl.events = fl.events == 0 ? 1 : fl.events;
    if (fl.name_chars < 16) {
        fl.name_chars = 16;
    }
    fl.name = malloc(fl.name_chars + 1);
    if (fl.name == NULL) {
        return 1;
    }
    memset(fl.name, 'x', fl.name_chars);
    fl.name[fl.name_chars] = '\0';
    struct fake_runtime_config cfg;
    uint64_t pid = (uint64_t)getpid();
    fake_runtime_config_init(&cfg, pid, pid * 7 + 1, 0x5a, "/flood/hostile --counters", "hostile");
    cfg.trace.gen = gen;
    cfg.trace.gen_ud = &fl;
    cfg.trace.interval_ms = 20;
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        return 1;
    }
    struct fake_runtime *f = NULL;
    int rc = fake_runtime_start(&loop, argv[1], &cfg, &f);
    if (rc != 0) {
        fprintf(stderr, "flood_runtime: %s\n", uv_strerror(rc));
        return 1;
    }
    printf("ready %s\n", fake_runtime_path(f));
    fflush(stdout);
    uv_run(&loop, UV_RUN_DEFAULT);
    return 0;
}
