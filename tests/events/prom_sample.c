/* SPDX-License-Identifier: MIT */
/*
 * Writes the Prometheus text of a rich set of samples to stdout, for promtool_check.sh: two
 * processes, EventCounters of both shapes, meters of every kind with meter/instrument/value tags,
 * histograms, NaN/Inf, tag keys that collide with the process labels, escapes, malformed UTF-8,
 * names that need normalizing, and repeated samples of one series.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "buf.h"
#include "ev_prom.h"
#include "ev_store.h"

static struct ev_metric_sample sample(const char *provider, const char *name, const char *unit,
                                      enum ev_metric_kind kind, bool is_meter, double value,
                                      const char *tags)
{
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = provider;
    s.name = name;
    s.display_name = is_meter ? "" : name;
    s.unit = unit;
    s.kind = kind;
    s.is_meter = is_meter;
    s.value = value;
    s.tags = tags;
    s.interval_sec = 5;
    s.timestamp_ms = 1700000000000;
    return s;
}

static int fill(struct ev_store *st, int seed)
{
    int rc = 0;
    struct ev_metric_sample s;
    const char *ec[][3] = {{"cpu-usage", "%", "CPU Usage"},
                           {"working-set", "MB", "Working Set"},
                           {"gen-0-size", "B", "Gen 0 Size"},
                           {"threadpool-thread-count", "", "ThreadPool Thread Count"},
                           {"time-in-jit", "ms", "Time spent in JIT"}};
    for (size_t i = 0; i < sizeof(ec) / sizeof(ec[0]) && rc == 0; i++) {
        for (int rep = 0; rep < 3 && rc == 0; rep++) {
            s = sample("System.Runtime", ec[i][0], ec[i][1], EV_METRIC_GAUGE, false,
                       seed * 10.0 + rep + 0.25, "");
            s.display_name = ec[i][2];
            s.timestamp_ms += rep * 5000;
            rc = ev_store_add(st, &s);
        }
    }
    const char *sums[] = {"gen-0-gc-count", "alloc-rate", "exception-count"};
    for (size_t i = 0; i < 3 && rc == 0; i++) {
        s = sample("System.Runtime", sums[i], i == 1 ? "B" : "count", EV_METRIC_RATE, false,
                   seed + 1.0 * (double)i, "");
        rc = ev_store_add(st, &s);
    }
    struct ev_metric_sample more[] = {
        sample("System.Runtime", "empty-mean", "", EV_METRIC_GAUGE, false, NAN, ""),
        sample("System.Runtime", "min", "", EV_METRIC_GAUGE, false, INFINITY, ""),
        sample("System.Runtime", "max", "", EV_METRIC_GAUGE, false, -INFINITY, ""),
        sample("My.Source", "with-meta", "", EV_METRIC_GAUGE, false, 1e15, "host:a:b,zone:eu"),
        sample("My.Source", "bad-meta", "", EV_METRIC_GAUGE, false, 1e-7, "nocolon"),
        sample("TestApp.Meter", "testapp.requests", "{request}", EV_METRIC_RATE, true, 3,
               "code=200,route=/a"),
        sample("TestApp.Meter", "testapp.requests", "{request}", EV_METRIC_RATE, true, 4,
               "code=200,route=/b"),
        sample("TestApp.Meter", "testapp.queue.depth", "", EV_METRIC_UPDOWN, true, -2, ""),
        sample("TestApp.Meter", "testapp.temperature", "Cel", EV_METRIC_GAUGE, true, 21.5,
               "pid=1,uid=2,name=x,quantile=q"),
        sample("TestApp.Meter", "odd", "", EV_METRIC_GAUGE, true, 1,
               "k=a\\b\"c\nd,__r=1,=e,9x=bad\xff utf8"),
        sample("System.Runtime", "dotnet.gc.heap.total_allocated", "By", EV_METRIC_RATE, true,
               123456789, ""),
        sample("System.Runtime", "dotnet.gc.collections", "{collection}", EV_METRIC_RATE, true, 1,
               "gc.heap.generation=gen0"),
        sample("System.Runtime", "dotnet.gc.collections", "{collection}", EV_METRIC_RATE, true, 0,
               "gc.heap.generation=gen1"),
        sample("Weird.Provider!", "a b/c", "0$u", EV_METRIC_GAUGE, true, 5, "a.b=1"),
        sample("Weird.Provider!", "a b/c", "0$u", EV_METRIC_GAUGE, true, 6, "a_b=1"),
    };
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]) && rc == 0; i++) {
        more[i].meter_tags = more[i].is_meter ? "meter.version=1.0" : NULL;
        rc = ev_store_add(st, &more[i]);
    }
    s = sample("TestApp.Meter", "testapp.latency", "ms", EV_METRIC_HISTOGRAM, true, 0, "route=/a");
    s.nquantiles = 3;
    s.quantiles[0] = (struct ev_quantile){0.5, 10 + seed};
    s.quantiles[1] = (struct ev_quantile){0.95, 20};
    s.quantiles[2] = (struct ev_quantile){0.99, NAN};
    if (rc == 0) {
        rc = ev_store_add(st, &s);
    }
    s.tags = "route=/b";
    if (rc == 0) {
        rc = ev_store_add(st, &s);
    }
    /* The same name as the histogram, as a gauge: dropped from the text. */
    s = sample("TestApp.Meter", "testapp.latency", "ms", EV_METRIC_GAUGE, true, 1, "");
    if (rc == 0) {
        rc = ev_store_add(st, &s);
    }
    s = sample("TestApp.Meter", "testapp.latency.ms_sum", "", EV_METRIC_GAUGE, true, 1, "");
    if (rc == 0) {
        rc = ev_store_add(st, &s);
    }
    return rc;
}

int main(void)
{
    struct ev_store_options opt = {.max_series = 0, .default_interval = 5};
    struct ev_store *a = NULL, *b = NULL;
    struct buf out;
    int rc = 1;
    buf_init(&out, 0);
    if (ev_store_new(&a, &opt) < 0 || ev_store_new(&b, &opt) < 0 || fill(a, 1) < 0 ||
        fill(b, 2) < 0) {
        goto out;
    }
    const char *keys[] = {"pid", "uid", "name"};
    const char *va[] = {"100", "1000", "testapp"};
    const char *vb[] = {"200", "1000", "other \"app\"\\"};
    struct ev_prom_target t[] = {{.store = a, .labels = {.keys = keys, .values = va, .n = 3}},
                                 {.store = b, .labels = {.keys = keys, .values = vb, .n = 3}}};
    if (ev_prom_render(t, 2, &out) < 0) {
        goto out;
    }
    /* dotmon's own histogram family beside them. */
    static const uint64_t le[] = {100000, 1000000, 100000000};
    static const char *const le_text[] = {"0.0001", "0.001", "0.1"};
    struct ev_prom_hist h = {.le_ns = le, .le_text = le_text, .n = 3};
    ev_prom_hist_add(&h, 50000);
    ev_prom_hist_add(&h, 20000000);
    if (ev_prom_histogram(&out, "dotmon_sample_seconds", "A histogram of durations", &h) < 0) {
        goto out;
    }
    rc = fwrite(buf_data(&out), 1, buf_size(&out), stdout) == buf_size(&out) ? 0 : 1;
out:
    buf_fini(&out);
    ev_store_free(a);
    ev_store_free(b);
    return rc;
}
