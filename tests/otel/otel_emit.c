/* SPDX-License-Identifier: MIT */
/*
 * The OpenTelemetry exporter (agent/otel/otel.c) driven from the command line, for
 * check_otel_export.py: builds a struct otel from the environment (OTEL_*) and the settings given
 * as Key=Value arguments (the OpenTelemetry section), emits synthetic log records, spans and
 * metrics from --pids sources through the real exporter on a real loop, spread over --run-ms,
 * then shuts it down with --deadline-ms and prints its counts. --release-early: the sources are
 * released as soon as their last item is emitted (an app that exits with items still queued).
 * --budget-mb: dotmon's memory budget (Memory:LimitMB), unlimited when not given.
 * Output:
 *   status=<otel_status_json>        one line
 *   prom=<line>                      one per line of otel_render_prom
 *   emit=<0|rc> counts of what emit answered: queued=… refused=…
 * Exit status: 0 (the loop closed clean), 3 (settings refused: the reason on stderr), 1 (other).
 */
#define _GNU_SOURCE
#include "otel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "buf.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "membudget.h"
#include "num.h"

struct run {
    struct otel *o;
    struct otel_source *src[8];
    size_t npids;
    uint64_t logs, spans, metrics; /* to emit in all */
    uint64_t sent;                 /* emitted so far (all kinds) */
    uint64_t ticks, tick;          /* emission rounds */
    uint64_t queued, refused;
    uint64_t deadline_ms;
    bool release_early; /* the sources go before their items are sent (an app that exits) */
    uv_timer_t timer;
    bool done;
};

static uint64_t arg_u64(const char *s)
{
    uint64_t v = 0;
    if (num_parse_u64_str(s, 10, UINT64_MAX, &v) != 0) {
        fprintf(stderr, "not a number: %s\n", s);
        exit(1);
    }
    return v;
}

static void note(struct run *r, int rc)
{
    if (rc == 0) {
        r->queued++;
    } else {
        r->refused++;
    }
}

/* The i-th item of each kind: distinct names and ids so the receiver can tell them apart. */
static void emit_one(struct run *r, uint64_t i)
{
    struct otel_source *s = r->src[i % r->npids];
    char name[64];
    (void)snprintf(name, sizeof(name), "item-%llu", (unsigned long long)i);
    const struct otlp_kv attrs[] = {{.key = "n", .kind = OTLP_INT, .i = (int64_t)i},
                                    {.key = "name", .kind = OTLP_STR, .str = name}};
    uint64_t now = uv_hrtime(); /* not wall time, but increasing: enough for a receiver */
    if (i < r->logs) {
        const struct otlp_scope sc = {.name = "Test.Category"};
        const struct otlp_log l = {.time_unix_nano = now,
                                   .observed_unix_nano = now,
                                   .severity_number = 9,
                                   .severity_text = "Information",
                                   .body = name,
                                   .attrs = attrs,
                                   .nattrs = 2};
        note(r, otel_emit_log(s, &sc, &l));
    }
    if (i < r->spans) {
        const struct otlp_scope sc = {.name = "Test.Source", .version = "1.0"};
        struct otlp_span sp = {.name = name,
                               .kind = OTLP_SPAN_INTERNAL,
                               .start_unix_nano = now,
                               .end_unix_nano = now + 1000,
                               .attrs = attrs,
                               .nattrs = 2,
                               .flags = 1};
        for (int k = 0; k < 8; k++) {
            sp.trace_id[k] = (uint8_t)(i >> (8 * k));
            sp.trace_id[8 + k] = 0xab;
            sp.span_id[k] = (uint8_t)((i + 1) >> (8 * k));
        }
        note(r, otel_emit_span(s, &sc, &sp));
    }
    if (i < r->metrics) {
        const struct otlp_scope sc = {.name = "Test.Meter"};
        const struct otlp_point pt = {.attrs = attrs,
                                      .nattrs = 2,
                                      .time_unix_nano = now,
                                      .is_int = true,
                                      .as_int = (int64_t)i};
        const struct otlp_metric m = {.name = "test.gauge",
                                      .unit = "{item}",
                                      .type = OTLP_GAUGE,
                                      .points = &pt,
                                      .npoints = 1};
        note(r, otel_emit_metric(s, &sc, &m));
    }
}

static void on_flushed(void *ud)
{
    struct run *r = ud;
    r->done = true;
    cJSON *j = otel_status_json(r->o);
    char *text = j != NULL ? cJSON_PrintUnformatted(j) : NULL;
    printf("status=%s\n", text != NULL ? text : "null");
    free(text);
    cJSON_Delete(j);
    struct buf prom;
    buf_init(&prom, 0);
    if (otel_render_prom(r->o, &prom) == 0) {
        const char *p = buf_cstr(&prom);
        while (p != NULL && *p != '\0') {
            const char *nl = strchr(p, '\n');
            size_t n = nl != NULL ? (size_t)(nl - p) : strlen(p);
            printf("prom=%.*s\n", (int)n, p);
            p = nl != NULL ? nl + 1 : NULL;
        }
    }
    buf_fini(&prom);
    printf("emit queued=%llu refused=%llu\n", (unsigned long long)r->queued,
           (unsigned long long)r->refused);
    fflush(stdout);
    for (size_t i = 0; i < r->npids; i++) {
        otel_source_release(r->src[i]); /* NULL after --release-early */
    }
    otel_free(r->o);
    r->o = NULL;
}

static void on_tick(uv_timer_t *t)
{
    struct run *r = t->data;
    uint64_t all = r->logs > r->spans ? r->logs : r->spans;
    all = all > r->metrics ? all : r->metrics;
    r->tick++;
    uint64_t upto = r->ticks == 0 ? all : all * r->tick / r->ticks;
    while (r->sent < upto) {
        emit_one(r, r->sent++);
    }
    if (r->sent >= all) {
        for (size_t i = 0; r->release_early && i < r->npids; i++) {
            otel_source_release(r->src[i]);
            r->src[i] = NULL;
        }
        uv_timer_stop(t);
        uv_close((uv_handle_t *)t, NULL);
        otel_shutdown(r->o, r->deadline_ms, on_flushed, r);
    }
}

int main(int argc, char **argv)
{
    struct run r;
    memset(&r, 0, sizeof(r));
    r.npids = 1;
    r.deadline_ms = 10000;
    uint64_t run_ms = 0;
    struct config cfg;
    config_init(&cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (strcmp(a, "--logs") == 0) {
            r.logs = arg_u64(v);
            i++;
        } else if (strcmp(a, "--spans") == 0) {
            r.spans = arg_u64(v);
            i++;
        } else if (strcmp(a, "--metrics") == 0) {
            r.metrics = arg_u64(v);
            i++;
        } else if (strcmp(a, "--pids") == 0) {
            r.npids = arg_u64(v);
            i++;
        } else if (strcmp(a, "--run-ms") == 0) {
            run_ms = arg_u64(v);
            i++;
        } else if (strcmp(a, "--deadline-ms") == 0) {
            r.deadline_ms = arg_u64(v);
            i++;
        } else if (strcmp(a, "--budget-mb") == 0) {
            membudget_set(arg_u64(v) << 20);
            i++;
        } else if (strcmp(a, "--release-early") == 0) {
            r.release_early = true;
        } else if (strchr(a, '=') != NULL) {
            char *k = strndup(a, (size_t)(strchr(a, '=') - a));
            if (k == NULL || config_set(&cfg, k, strchr(a, '=') + 1, "command line") != 0) {
                free(k);
                return 1;
            }
            free(k);
        } else {
            fprintf(stderr, "unknown argument %s\n", a);
            return 1;
        }
    }
    if (r.npids == 0 || r.npids > 8) {
        fprintf(stderr, "--pids: 1 to 8\n");
        return 1;
    }
    log_set_level(LOG_DEBUG);
    uv_loop_t loop;
    if (uv_loop_init(&loop) != 0) {
        return 1;
    }
    struct agent a;
    memset(&a, 0, sizeof(a));
    a.loop = &loop;
    a.cfg = &cfg;
    char why[256] = "";
    int rc = otel_new(&a, &r.o, why, sizeof(why));
    if (rc != 0 || r.o == NULL) {
        fprintf(stderr, "refused: %s\n", rc != 0 ? why : "no signal is exported");
        config_fini(&cfg);
        uv_loop_close(&loop);
        return 3;
    }
    for (size_t i = 0; i < r.npids; i++) {
        char host[32];
        (void)snprintf(host, sizeof(host), "host-%zu", i);
        const struct otlp_kv res[] = {
            {.key = "service.name", .kind = OTLP_STR, .str = "otel-emit"},
            {.key = "process.pid", .kind = OTLP_INT, .i = (int64_t)(1000 + i)},
            {.key = "host.name", .kind = OTLP_STR, .str = host}};
        const struct otlp_resource rs = {.attrs = res, .nattrs = 3};
        r.src[i] = otel_source_new(r.o, 1000 + i, &rs);
        if (r.src[i] == NULL) {
            return 1;
        }
    }
    /* Emission in rounds of 20 ms over run_ms (all at once when 0). */
    r.ticks = run_ms / 20;
    uv_timer_init(&loop, &r.timer);
    r.timer.data = &r;
    uv_timer_start(&r.timer, on_tick, 0, 20);
    uv_run(&loop, UV_RUN_DEFAULT);
    config_fini(&cfg);
    rc = uv_loop_close(&loop);
    if (rc != 0) {
        fprintf(stderr, "the loop did not close clean: %s\n", uv_strerror(rc));
        return 1;
    }
    return r.done ? 0 : 1;
}
