/* SPDX-License-Identifier: MIT */
/*
 * agent/otel/otel_map: a process's resource from its environment (docs/otel.md §2), container ids
 * from cgroup texts (v1 and v2 layouts of docker, containerd, cri-o), log records as the .NET
 * SDK's OTLP exporter sends them (§3), metric samples as OTLP Sums, Gauges and Summaries exported
 * once per interval, their bytes charged to their share of the memory budget (§4).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "membudget.h"
#include "otel_map.h"

static const struct otlp_kv *attr(const struct otlp_kv *kv, size_t n, const char *key)
{
    const struct otlp_kv *found = NULL;
    for (size_t k = 0; k < n; k++) {
        if (strcmp(kv[k].key, key) == 0) {
            assert_null(found); /* every key once */
            found = &kv[k];
        }
    }
    return found;
}

static const char *res_str(const struct otel_resource *r, const char *key)
{
    const struct otlp_kv *kv = attr(r->attrs, r->nattrs, key);
    return kv != NULL && kv->kind == OTLP_STR ? kv->str : NULL;
}

static void env_set(struct otel_env *e, const char *entry)
{
    const char *eq = strchr(entry, '=');
    assert_non_null(eq);
    assert_int_equal(otel_env_take(e, entry, (size_t)(eq - entry), eq + 1, strlen(eq + 1)), 0);
}

static const struct otel_proc_info info = {.pid = 4242,
                                           .name = "OtelApp",
                                           .uid = "0f8fad5b-d9cb-469f-a165-70867728950e",
                                           .clr_version = "9.0.10",
                                           .host_name = "node-1",
                                           .sdk_version = "1.2.3"};

static void test_resource_default(void **state)
{
    (void)state;
    struct otel_env e = {0};
    env_set(&e, "PATH=/usr/bin");
    env_set(&e, "ConnectionStrings__Db=Password=secret");
    env_set(&e, "HOSTNAME=web-7d9f");
    struct otel_resource r;
    assert_int_equal(otel_resource_build(&e, &info, &r), 0);
    /* the .NET SDK's default resource: unknown_service:<process name> */
    assert_string_equal(res_str(&r, "service.name"), "unknown_service:OtelApp");
    assert_string_equal(res_str(&r, "service.instance.id"), info.uid);
    const struct otlp_kv *pid = attr(r.attrs, r.nattrs, "process.pid");
    assert_non_null(pid);
    assert_int_equal(pid->kind, OTLP_INT);
    assert_int_equal(pid->i, 4242);
    assert_string_equal(res_str(&r, "process.runtime.name"), ".NET");
    assert_string_equal(res_str(&r, "process.runtime.version"), "9.0.10");
    assert_string_equal(res_str(&r, "host.name"), "node-1");
    assert_string_equal(res_str(&r, "telemetry.sdk.name"), "dotmon");
    assert_null(res_str(&r, "container.id"));
    assert_null(res_str(&r, "k8s.pod.name")); /* the environment names no pod here (identity) */
    /* nothing else of the environment is kept */
    for (size_t k = 0; k < r.nattrs; k++) {
        assert_null(strstr(r.attrs[k].kind == OTLP_STR ? r.attrs[k].str : "", "secret"));
    }
    assert_null(e.service_name);
    otel_resource_fini(&r);
    otel_env_fini(&e);
}

static void test_resource_env(void **state)
{
    (void)state;
    struct otel_env e = {0};
    env_set(&e, "OTEL_RESOURCE_ATTRIBUTES= service.name = from-attrs ,deployment.environment=st%20"
                "age,bad,=novalue,team=a%2Cb,host.name=override,team=c%2Cd,pct=100%");
    struct otel_resource r;
    assert_int_equal(otel_resource_build(&e, &info, &r), 0);
    assert_string_equal(res_str(&r, "service.name"), "from-attrs");
    assert_string_equal(res_str(&r, "deployment.environment"), "st age");
    assert_string_equal(res_str(&r, "team"), "c,d"); /* the later pair wins */
    assert_string_equal(res_str(&r, "host.name"), "override");
    assert_string_equal(res_str(&r, "pct"), "100%"); /* a malformed escape stays */
    assert_null(res_str(&r, "bad"));
    otel_resource_fini(&r);
    /* OTEL_SERVICE_NAME wins over the attribute; Kubernetes names from the identity */
    env_set(&e, "OTEL_SERVICE_NAME=orders");
    env_set(&e, "POD_NAME=not-read-here"); /* the identity's business, not the resource's */
    struct otel_proc_info pi = info;
    pi.container_id = "abc";
    pi.pod_name = "orders-5c7b-x2";
    pi.pod_namespace = "shop";
    pi.pod_uid = "5c0e9a8e-3b1d-4f62-9c7a-2d4e6f8a0b1c";
    pi.container_name = ""; /* unknown */
    assert_int_equal(otel_resource_build(&e, &pi, &r), 0);
    assert_string_equal(res_str(&r, "service.name"), "orders");
    assert_string_equal(res_str(&r, "k8s.pod.name"), "orders-5c7b-x2");
    assert_string_equal(res_str(&r, "k8s.namespace.name"), "shop");
    assert_string_equal(res_str(&r, "k8s.pod.uid"), "5c0e9a8e-3b1d-4f62-9c7a-2d4e6f8a0b1c");
    assert_null(res_str(&r, "k8s.container.name"));
    assert_string_equal(res_str(&r, "container.id"), "abc");
    otel_resource_fini(&r);
    /* OTEL_RESOURCE_ATTRIBUTES still wins over what dotmon detects */
    env_set(&e, "OTEL_RESOURCE_ATTRIBUTES=k8s.pod.name=orders-explicit");
    assert_int_equal(otel_resource_build(&e, &pi, &r), 0);
    assert_string_equal(res_str(&r, "k8s.pod.name"), "orders-explicit");
    struct otlp_resource view = otel_resource_view(&r);
    assert_ptr_equal(view.attrs, r.attrs);
    assert_int_equal(view.nattrs, r.nattrs);
    otel_resource_fini(&r);
    otel_env_fini(&e);
}

static void test_log_map(void **state)
{
    (void)state;
    const struct ev_log_kv st[] = {
        {.key = "Name", .kind = EV_LOG_STR, .str = "world"},
        {.key = "N", .kind = EV_LOG_INT, .num = 31},
        {.key = "{OriginalFormat}", .kind = EV_LOG_STR, .str = "Hello {Name} #{N}"},
    };
    const struct ev_log_kv outer[] = {
        {.key = "RequestId", .kind = EV_LOG_STR, .str = "r-1"},
        {.key = "{OriginalFormat}", .kind = EV_LOG_STR, .str = "Request {RequestId}"},
    };
    const struct ev_log_kv inner[] = {{.key = "Ok", .kind = EV_LOG_BOOL, .num = 1},
                                      {.key = "Nothing", .kind = EV_LOG_NULL}};
    const struct ev_log_scope scopes[] = {{.npairs = 2, .pairs = outer},
                                          {.npairs = 2, .pairs = inner}};
    struct ev_log_record r = {.unix_ms = 1700000000123,
                              .time_known = true,
                              .level = EV_LOG_ERROR,
                              .event_id = 7,
                              .event_name = "Greeted",
                              .category = "Demo.Greeter",
                              .message = "Hello world #31",
                              .exception = "System.InvalidOperationException: bad\n   at X.Y()",
                              .exception_type = "System.InvalidOperationException",
                              .exception_message = "bad",
                              .has_trace = true,
                              .trace_id = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16},
                              .span_id = {9, 8, 7, 6, 5, 4, 3, 2},
                              .trace_flags = 1,
                              .has_state = true,
                              .nstate = 3,
                              .state = st,
                              .nscopes = 2,
                              .scopes = scopes};
    static struct otel_log_view v;
    otel_log_map(&r, 42, &v);
    assert_int_equal(v.log.time_unix_nano, 1700000000123000000ull);
    assert_int_equal(v.log.observed_unix_nano, 42);
    assert_int_equal(v.log.severity_number, 17);
    assert_string_equal(v.log.severity_text, "Error");
    assert_string_equal(v.log.body, "Hello {Name} #{N}"); /* the template, as the SDK */
    assert_string_equal(v.scope.name, "Demo.Greeter");
    assert_string_equal(v.log.event_name, "Greeted");
    assert_true(v.log.has_trace);
    assert_memory_equal(v.log.trace_id, r.trace_id, 16);
    assert_memory_equal(v.log.span_id, r.span_id, 8);
    assert_int_equal(v.log.flags, 1);
    const struct otlp_kv *a = v.log.attrs;
    size_t n = v.log.nattrs;
    assert_string_equal(attr(a, n, "Name")->str, "world");
    assert_int_equal(attr(a, n, "N")->kind, OTLP_INT);
    assert_int_equal(attr(a, n, "N")->i, 31);
    assert_null(attr(a, n, "{OriginalFormat}"));
    assert_string_equal(attr(a, n, "RequestId")->str, "r-1");
    assert_int_equal(attr(a, n, "Ok")->kind, OTLP_BOOL);
    assert_true(attr(a, n, "Ok")->b);
    assert_null(attr(a, n, "Nothing"));
    assert_int_equal(attr(a, n, "logrecord.event.id")->i, 7);
    assert_string_equal(attr(a, n, "exception.type")->str, "InvalidOperationException");
    assert_string_equal(attr(a, n, "exception.message")->str, "bad");
    assert_string_equal(attr(a, n, "exception.stacktrace")->str, r.exception);
    assert_int_equal(n, 8);

    /* no template: the formatted message; no trace, no event, no exception */
    struct ev_log_record plain = {
        .level = EV_LOG_TRACE, .event_name = "", .category = "C", .message = "formatted"};
    otel_log_map(&plain, 1, &v);
    assert_string_equal(v.log.body, "formatted");
    assert_int_equal(v.log.severity_number, 1);
    assert_int_equal(v.log.time_unix_nano, 0);
    assert_null(v.log.event_name);
    assert_false(v.log.has_trace);
    assert_int_equal(v.log.nattrs, 0);
    assert_int_equal(otel_log_severity(EV_LOG_DEBUG), 5);
    assert_int_equal(otel_log_severity(EV_LOG_INFORMATION), 9);
    assert_int_equal(otel_log_severity(EV_LOG_WARNING), 13);
    assert_int_equal(otel_log_severity(EV_LOG_CRITICAL), 21);
    assert_int_equal(otel_log_severity(EV_LOG_NONE), 0);
}

static void test_log_map_bound(void **state)
{
    (void)state;
    static struct ev_log_kv pairs[EV_LOGS_MAX_PAIRS];
    static struct ev_log_scope scopes[4];
    for (size_t k = 0; k < EV_LOGS_MAX_PAIRS; k++) {
        pairs[k] = (struct ev_log_kv){.key = "K", .kind = EV_LOG_STR, .str = "v"};
    }
    for (size_t k = 0; k < 4; k++) {
        scopes[k] = (struct ev_log_scope){.npairs = EV_LOGS_MAX_PAIRS, .pairs = pairs};
    }
    struct ev_log_record r = {.level = EV_LOG_INFORMATION,
                              .category = "C",
                              .message = "m",
                              .event_id = 3,
                              .nstate = EV_LOGS_MAX_PAIRS,
                              .state = pairs,
                              .nscopes = 4,
                              .scopes = scopes};
    static struct otel_log_view v;
    otel_log_map(&r, 1, &v);
    assert_int_equal(v.log.nattrs, OTEL_LOG_MAX_ATTRS);
    assert_int_equal(v.dropped, 5 * EV_LOGS_MAX_PAIRS - OTEL_LOG_MAX_ATTRS);
}

/* A recording consumer of otel_series_flush. */
struct got {
    int n;
    char scope[8][64];
    char name[8][64];
    char unit[8][32];
    struct otlp_metric m[8];
    struct otlp_point p[8];
    char attrs[8][128];
    struct otlp_quantile q[8][4];
};

static void on_metric(void *ud, const struct otlp_scope *scope, const struct otlp_metric *m)
{
    struct got *g = ud;
    assert_true(g->n < 8);
    assert_int_equal(m->npoints, 1);
    int i = g->n++;
    snprintf(g->scope[i], sizeof(g->scope[i]), "%s", scope->name);
    snprintf(g->name[i], sizeof(g->name[i]), "%s", m->name);
    snprintf(g->unit[i], sizeof(g->unit[i]), "%s", m->unit != NULL ? m->unit : "");
    g->m[i] = *m;
    g->p[i] = m->points[0];
    size_t len = 0;
    for (size_t k = 0; k < m->points[0].nattrs; k++) {
        len += (size_t)snprintf(g->attrs[i] + len, sizeof(g->attrs[i]) - len, "%s%s=%s",
                                k > 0 ? "," : "", m->points[0].attrs[k].key,
                                m->points[0].attrs[k].str);
    }
    for (size_t k = 0; k < m->points[0].nquantiles && k < 4; k++) {
        g->q[i][k] = m->points[0].quantiles[k];
    }
}

static int find(const struct got *g, const char *name)
{
    for (int k = 0; k < g->n; k++) {
        if (strcmp(g->name[k], name) == 0) {
            return k;
        }
    }
    return -1;
}

static struct ev_metric_sample sample(const char *provider, const char *name,
                                      enum ev_metric_kind kind, bool meter, double value,
                                      int64_t ts_ms)
{
    return (struct ev_metric_sample){.provider = provider,
                                     .name = name,
                                     .display_name = "",
                                     .unit = meter ? "{request}" : "",
                                     .kind = kind,
                                     .is_meter = meter,
                                     .value = value,
                                     .tags = "",
                                     .interval_sec = 1,
                                     .timestamp_ms = ts_ms};
}

static void test_metrics(void **state)
{
    (void)state;
    struct otel_series_table *t = NULL;
    assert_int_equal(otel_series_new(100, NULL, &t), 0);
    /* a meter counter with a running total: cumulative monotonic Sum of the total */
    struct ev_metric_sample c = sample("Shop", "orders", EV_METRIC_RATE, true, 3, 10000);
    c.has_total = true;
    c.total = 10;
    c.tags = "region=eu,tier=gold";
    assert_int_equal(otel_series_add(t, &c), 0);
    c.value = 4;
    c.total = 14;
    c.timestamp_ms = 11000;
    assert_int_equal(otel_series_add(t, &c), 0);
    /* a counter without a total: a delta Sum of the rates added up */
    struct ev_metric_sample d = sample("Shop", "old", EV_METRIC_RATE, true, 2, 10000);
    assert_int_equal(otel_series_add(t, &d), 0);
    d.value = 5;
    d.timestamp_ms = 11000;
    assert_int_equal(otel_series_add(t, &d), 0);
    struct ev_metric_sample u = sample("Shop", "queue", EV_METRIC_UPDOWN, true, -2, 11000);
    assert_int_equal(otel_series_add(t, &u), 0);
    struct ev_metric_sample gauge = sample("Shop", "temp", EV_METRIC_GAUGE, true, 21.5, 11000);
    assert_int_equal(otel_series_add(t, &gauge), 0);
    struct ev_metric_sample h = sample("Shop", "latency", EV_METRIC_HISTOGRAM, true, 0, 11000);
    h.nquantiles = 3;
    h.quantiles[0] = (struct ev_quantile){0.5, 10};
    h.quantiles[1] = (struct ev_quantile){0.95, 20};
    h.quantiles[2] = (struct ev_quantile){0.99, 30};
    h.hist_count = 5;
    h.hist_sum = 70;
    assert_int_equal(otel_series_add(t, &h), 0);
    h.hist_count = 2;
    h.hist_sum = 30;
    assert_int_equal(otel_series_add(t, &h), 0);
    /* EventCounters: a mean as a Gauge, an increment as a delta Sum; "k:v" metadata */
    struct ev_metric_sample ec =
        sample("System.Runtime", "cpu-usage", EV_METRIC_GAUGE, false, 12.5, 11000);
    ec.display_name = "CPU Usage";
    ec.unit = "%";
    ec.tags = "kind:process";
    assert_int_equal(otel_series_add(t, &ec), 0);
    struct ev_metric_sample inc =
        sample("System.Runtime", "exception-count", EV_METRIC_RATE, false, 3, 11000);
    assert_int_equal(otel_series_add(t, &inc), 0);
    assert_int_equal(otel_series_count(t), 7);

    struct got g = {0};
    otel_series_flush(t, on_metric, &g);
    assert_int_equal(g.n, 7);
    int k = find(&g, "orders");
    assert_true(k >= 0);
    assert_string_equal(g.scope[k], "Shop");
    assert_string_equal(g.unit[k], "{request}");
    assert_int_equal(g.m[k].type, OTLP_SUM);
    assert_int_equal(g.m[k].temporality, OTLP_TEMPORALITY_CUMULATIVE);
    assert_true(g.m[k].monotonic);
    assert_true(g.p[k].as_double == 14);
    assert_int_equal(g.p[k].time_unix_nano, 11000000000ull);
    assert_int_equal(g.p[k].start_unix_nano, 9000000000ull); /* first sample minus its interval */
    assert_string_equal(g.attrs[k], "region=eu,tier=gold");
    k = find(&g, "old");
    assert_int_equal(g.m[k].temporality, OTLP_TEMPORALITY_DELTA);
    assert_true(g.p[k].as_double == 7);
    k = find(&g, "queue");
    assert_int_equal(g.m[k].type, OTLP_SUM);
    assert_false(g.m[k].monotonic);
    assert_int_equal(g.m[k].temporality, OTLP_TEMPORALITY_CUMULATIVE);
    assert_true(g.p[k].as_double == -2);
    k = find(&g, "temp");
    assert_int_equal(g.m[k].type, OTLP_GAUGE);
    assert_true(g.p[k].as_double == 21.5);
    assert_int_equal(g.p[k].start_unix_nano, 0);
    k = find(&g, "latency");
    assert_int_equal(g.m[k].type, OTLP_SUMMARY);
    assert_int_equal(g.p[k].count, 7);
    assert_true(g.p[k].has_sum && g.p[k].sum == 100);
    assert_int_equal(g.p[k].nquantiles, 3);
    assert_true(g.q[k][1].quantile == 0.95 && g.q[k][1].value == 20);
    k = find(&g, "cpu-usage");
    assert_string_equal(g.scope[k], "System.Runtime");
    assert_int_equal(g.m[k].type, OTLP_GAUGE);
    assert_string_equal(g.m[k].description, "CPU Usage");
    assert_string_equal(g.attrs[k], "kind=process");
    k = find(&g, "exception-count");
    assert_int_equal(g.m[k].type, OTLP_SUM);
    assert_int_equal(g.m[k].temporality, OTLP_TEMPORALITY_DELTA);
    assert_true(g.p[k].as_double == 3);

    /* the next export: cumulative series and gauges again, the deltas only when new samples came */
    memset(&g, 0, sizeof(g));
    inc.value = 1;
    inc.timestamp_ms = 12000;
    assert_int_equal(otel_series_add(t, &inc), 0);
    otel_series_flush(t, on_metric, &g);
    assert_int_equal(g.n, 6);
    assert_int_equal(find(&g, "old"), -1);
    k = find(&g, "exception-count");
    assert_true(g.p[k].as_double == 1); /* started again from zero */
    assert_int_equal(g.p[k].start_unix_nano, 11000000000ull);
    otel_series_free(t);
}

/* .NET 10's exponential histograms: interval points added into one cumulative OTLP point. */
static void test_metrics_exphist(void **state)
{
    (void)state;
    struct otel_series_table *t = NULL;
    assert_int_equal(otel_series_new(100, NULL, &t), 0);
    const uint64_t fives[] = {97};
    const uint64_t big[] = {3};
    struct ev_exphist e1 = {
        .scale = 3, .offset = 18, .min = 5, .max = 5, .counts = fives, .ncounts = 1};
    struct ev_exphist e2 = {
        .scale = 2, .offset = 49, .min = 5000, .max = 5000, .counts = big, .ncounts = 1};
    struct ev_metric_sample h = sample("Shop", "latency", EV_METRIC_HISTOGRAM, true, 5, 10000);
    h.unit = "ms";
    h.tags = "route=/a";
    h.exphist = &e1;
    h.hist_count = 97;
    h.hist_sum = 485;
    assert_int_equal(otel_series_add(t, &h), 0);
    h.exphist = &e2;
    h.hist_count = 3;
    h.hist_sum = 15000;
    h.timestamp_ms = 11000;
    assert_int_equal(otel_series_add(t, &h), 0);
    /* a runtime that asked for cumulative points itself: the last point is the whole story */
    struct ev_exphist c1 = e1;
    c1.cumulative = true;
    struct ev_metric_sample hc = h;
    hc.name = "size";
    hc.exphist = &c1;
    hc.hist_count = 97;
    hc.hist_sum = 485;
    assert_int_equal(otel_series_add(t, &hc), 0);
    hc.hist_count = 97;
    assert_int_equal(otel_series_add(t, &hc), 0);

    for (int round = 0; round < 2; round++) { /* cumulative: said again at the next export */
        struct got g = {0};
        otel_series_flush(t, on_metric, &g);
        assert_int_equal(g.n, 2);
        int k = find(&g, "latency");
        assert_true(k >= 0);
        assert_int_equal(g.m[k].type, OTLP_EXP_HISTOGRAM);
        assert_int_equal(g.m[k].temporality, OTLP_TEMPORALITY_CUMULATIVE);
        assert_string_equal(g.unit[k], "ms");
        assert_string_equal(g.attrs[k], "route=/a");
        assert_int_equal(g.p[k].count, 100);
        assert_true(g.p[k].has_sum && g.p[k].sum == 15485);
        assert_int_equal(g.p[k].scale, 2);
        assert_int_equal(g.p[k].zero_count, 0);
        assert_int_equal(g.p[k].positive.offset, 9);
        assert_int_equal(g.p[k].positive.ncounts, 41);
        assert_true(g.p[k].positive.counts[0] == 97 && g.p[k].positive.counts[40] == 3);
        assert_int_equal(g.p[k].start_unix_nano, 9000000000ull);
        assert_int_equal(g.p[k].time_unix_nano, 11000000000ull);
        assert_true(g.p[k].has_min_max && g.p[k].min == 5 && g.p[k].max == 5000);
        k = find(&g, "size");
        assert_int_equal(g.p[k].count, 97);
        assert_true(g.p[k].sum == 485);
        assert_int_equal(g.p[k].scale, 3);
    }

    /* the runtime's quantiles again for the same series (its aggregation changed): a Summary
     * that starts over */
    struct ev_metric_sample q = sample("Shop", "latency", EV_METRIC_HISTOGRAM, true, 5, 12000);
    q.tags = "route=/a";
    q.nquantiles = 1;
    q.quantiles[0] = (struct ev_quantile){0.5, 5};
    q.hist_count = 4;
    q.hist_sum = 20;
    assert_int_equal(otel_series_add(t, &q), 0);
    struct got g = {0};
    otel_series_flush(t, on_metric, &g);
    int k = find(&g, "latency");
    assert_int_equal(g.m[k].type, OTLP_SUMMARY);
    assert_int_equal(g.p[k].count, 4);
    assert_int_equal(g.p[k].start_unix_nano, 11000000000ull);
    otel_series_free(t);
}

static void test_metrics_bound(void **state)
{
    (void)state;
    struct otel_series_table *t = NULL;
    assert_int_equal(otel_series_new(2, NULL, &t), 0);
    struct ev_metric_sample s = sample("M", "a", EV_METRIC_GAUGE, true, 1, 1000);
    assert_int_equal(otel_series_add(t, &s), 0);
    s.tags = "x=1";
    assert_int_equal(otel_series_add(t, &s), 0);
    s.tags = "x=2";
    assert_int_equal(otel_series_add(t, &s), AGENT_E_TOOBIG);
    s.tags = "x=1";
    s.value = NAN; /* a NaN keeps the last value */
    assert_int_equal(otel_series_add(t, &s), 0);
    assert_int_equal(otel_series_dropped(t), 1);
    assert_int_equal(otel_series_count(t), 2);
    struct got g = {0};
    otel_series_flush(t, on_metric, &g);
    assert_int_equal(g.n, 2);
    for (int k = 0; k < 2; k++) {
        assert_true(g.p[k].as_double == 1);
    }
    otel_series_free(t);
}

/* Gauge samples of series "x=<k>" (tags of one length: every series holds as many bytes). */
static int add_gauge(struct otel_series_table *t, int k, double v)
{
    char tags[16];
    snprintf(tags, sizeof(tags), "x=%d", k);
    struct ev_metric_sample s = sample("M", "g", EV_METRIC_GAUGE, true, v, 1000);
    s.tags = tags;
    return otel_series_add(t, &s);
}

/* What the series hold is charged to their share: a full share leaves new series out (counted),
 * freeing gives every byte back, and a histogram's buckets are charged as they grow. */
static void test_metrics_budget(void **state)
{
    (void)state;
    struct mb_share sh;
    mb_share_init(&sh, "series", 0);
    struct otel_series_table *t = NULL;
    assert_int_equal(otel_series_new(100, &sh, &t), 0);
    assert_int_equal(add_gauge(t, 1, 1), 0);
    size_t one = otel_series_bytes(t);
    assert_true(one > sizeof(void *) * 8); /* the entry and its strings */
    assert_int_equal(atomic_load(&sh.used), one);
    otel_series_free(t);
    assert_int_equal(atomic_load(&sh.used), 0);
    mb_share_fini(&sh);

    /* room for two series, not three */
    mb_share_init(&sh, "series", 2 * one + one / 2);
    assert_int_equal(otel_series_new(100, &sh, &t), 0);
    assert_int_equal(add_gauge(t, 1, 1), 0);
    assert_int_equal(add_gauge(t, 2, 2), 0);
    assert_int_equal(add_gauge(t, 3, 3), AGENT_E_BUDGET);
    assert_int_equal(add_gauge(t, 4, 4), AGENT_E_BUDGET);
    assert_int_equal(add_gauge(t, 1, 5), 0); /* the series kept still take their samples */
    assert_int_equal(otel_series_dropped(t), 2);
    assert_int_equal(otel_series_count(t), 2);
    assert_int_equal(atomic_load(&sh.used), 2 * one);
    assert_int_equal(atomic_load(&sh.refused), 2);
    struct got g = {0};
    otel_series_flush(t, on_metric, &g);
    assert_int_equal(g.n, 2);
    for (int k = 0; k < 2; k++) {
        assert_true(g.p[k].as_double == (strcmp(g.attrs[k], "x=1") == 0 ? 5 : 2));
    }
    /* the process goes: its bytes come back, and the next table may hold what this one could not */
    otel_series_free(t);
    assert_int_equal(atomic_load(&sh.used), 0);
    assert_int_equal(otel_series_new(100, &sh, &t), 0);
    assert_int_equal(add_gauge(t, 3, 3), 0);
    assert_int_equal(add_gauge(t, 4, 4), 0);
    otel_series_free(t);
    assert_int_equal(atomic_load(&sh.used), 0);
    mb_share_fini(&sh);

    /* an exponential histogram: its buckets are charged as they are held */
    mb_share_init(&sh, "series", 0);
    assert_int_equal(otel_series_new(100, &sh, &t), 0);
    const uint64_t fives[] = {97};
    const uint64_t big[] = {3};
    struct ev_exphist e1 = {
        .scale = 3, .offset = 18, .min = 5, .max = 5, .counts = fives, .ncounts = 1};
    struct ev_exphist e2 = {
        .scale = 2, .offset = 49, .min = 5000, .max = 5000, .counts = big, .ncounts = 1};
    struct ev_metric_sample h = sample("Shop", "latency", EV_METRIC_HISTOGRAM, true, 5, 10000);
    h.exphist = &e1;
    h.hist_count = 97;
    h.hist_sum = 485;
    assert_int_equal(otel_series_add(t, &h), 0);
    size_t entry = otel_series_bytes(t) - sizeof(uint64_t); /* one bucket */
    h.exphist = &e2;
    h.hist_count = 3;
    h.hist_sum = 15000;
    assert_int_equal(otel_series_add(t, &h), 0);
    assert_int_equal(otel_series_bytes(t), entry + 41 * sizeof(uint64_t)); /* 41 buckets now */
    assert_int_equal(atomic_load(&sh.used), otel_series_bytes(t));
    otel_series_free(t);
    assert_int_equal(atomic_load(&sh.used), 0);
    mb_share_fini(&sh);

    /* a share with no room for the buckets to grow into: the sample is left out, the point kept */
    const size_t room = OTEL_EXP_HIST_MAX_BUCKETS * sizeof(uint64_t);
    mb_share_init(&sh, "series", entry + room + sizeof(uint64_t) / 2);
    assert_int_equal(otel_series_new(100, &sh, &t), 0);
    assert_int_equal(otel_series_add(t, &h), 0); /* e2: one bucket */
    h.exphist = &e1;
    assert_int_equal(otel_series_add(t, &h), AGENT_E_BUDGET);
    assert_int_equal(otel_series_dropped(t), 1);
    assert_int_equal(atomic_load(&sh.used), entry + sizeof(uint64_t));
    g = (struct got){0};
    otel_series_flush(t, on_metric, &g);
    assert_int_equal(g.n, 1);
    assert_int_equal(g.p[0].count, 3);
    /* the runtime's quantiles again: a Summary, its buckets given back */
    struct ev_metric_sample q = sample("Shop", "latency", EV_METRIC_HISTOGRAM, true, 5, 12000);
    q.nquantiles = 1;
    q.quantiles[0] = (struct ev_quantile){0.5, 5};
    q.hist_count = 4;
    assert_int_equal(otel_series_add(t, &q), 0);
    assert_int_equal(atomic_load(&sh.used), entry);
    otel_series_free(t);
    assert_int_equal(atomic_load(&sh.used), 0);
    mb_share_fini(&sh);
}

static void test_tags(void **state)
{
    (void)state;
    char scratch[32];
    struct otlp_kv kv[4];
    assert_int_equal(otel_tags_parse("a=1,=x,b=,noeq,c=3=4", '=', scratch, sizeof(scratch), kv, 4),
                     3);
    assert_string_equal(kv[0].key, "a");
    assert_string_equal(kv[0].str, "1");
    assert_string_equal(kv[1].key, "b");
    assert_string_equal(kv[1].str, "");
    assert_string_equal(kv[2].key, "c");
    assert_string_equal(kv[2].str, "3=4");
    assert_int_equal(otel_tags_parse("a=1,b=2,c=3", '=', scratch, sizeof(scratch), kv, 2), 2);
    assert_int_equal(otel_tags_parse("", '=', scratch, sizeof(scratch), kv, 4), 0);
    assert_int_equal(otel_tags_parse(NULL, '=', scratch, sizeof(scratch), kv, 4), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_default),
        cmocka_unit_test(test_resource_env),
        cmocka_unit_test(test_log_map),
        cmocka_unit_test(test_log_map_bound),
        cmocka_unit_test(test_metrics),
        cmocka_unit_test(test_metrics_exphist),
        cmocka_unit_test(test_metrics_bound),
        cmocka_unit_test(test_metrics_budget),
        cmocka_unit_test(test_tags),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
