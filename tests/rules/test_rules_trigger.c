/* SPDX-License-Identifier: MIT */
/*
 * The trigger engines (rules/rules.h, docs/rules.md) on synthetic sample sequences: the threshold
 * engine's window, gap restart and percentiles; the ASP.NET sliding windows, path globs, status
 * ranges and slow in-flight requests; the ASP.NET events read from decoded records; and the
 * session each trigger asks for.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "err.h"
#include "ev_payload.h"
#include "rules.h"
#include "rules_test_util.h"

#define SEC 1000 /* ms */

/* An EventCounters sample of System.Runtime at t ms, measured interval 5 s. */
static struct ev_metric_sample counter(const char *name, double value, int64_t t)
{
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = "System.Runtime";
    s.name = name;
    s.value = value;
    s.interval_sec = 5;
    s.timestamp_ms = t;
    return s;
}

static struct ev_metric_sample meter(const char *meter_name, const char *instrument, double value,
                                     int64_t t)
{
    struct ev_metric_sample s = counter(instrument, value, t);
    s.provider = meter_name;
    s.is_meter = true;
    return s;
}

static bool feed(struct rules_engine *e, const char *name, double v, int64_t t)
{
    struct ev_metric_sample s = counter(name, v, t);
    return rules_engine_on_metric(e, &s);
}

/* ---- threshold engine ---- */

static void test_rules_threshold_window(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("EventCounter", "ProviderName=system.runtime\nCounterName=cpu-usage\n"
                                "GreaterThan=50\nSlidingWindowDuration=00:00:10");
    struct rules_engine *e = engine(t, 5);
    /* target = ts - interval + window: the first passing interval began at 95 s. */
    assert_false(feed(e, "cpu-usage", 60, 100 * SEC));
    assert_true(feed(e, "cpu-usage", 70, 105 * SEC));
    rules_engine_reset(e);
    /* Below or at the threshold breaks the series (the filter is strict). */
    assert_false(feed(e, "cpu-usage", 60, 200 * SEC));
    assert_false(feed(e, "cpu-usage", 50, 205 * SEC));
    assert_false(feed(e, "cpu-usage", 60, 210 * SEC));
    assert_true(feed(e, "cpu-usage", 60, 215 * SEC));
    /* Once satisfied it stays satisfied while the values pass. */
    assert_true(feed(e, "cpu-usage", 60, 220 * SEC));
    /* Other counters, other providers, meters and NaN change nothing. */
    rules_engine_reset(e);
    assert_false(feed(e, "cpu-usage", 60, 300 * SEC));
    assert_false(feed(e, "CPU-usage", 0, 302 * SEC));
    struct ev_metric_sample s = counter("cpu-usage", 0, 303 * SEC);
    s.provider = "Other";
    assert_false(rules_engine_on_metric(e, &s));
    s = meter("System.Runtime", "cpu-usage", 0, 303 * SEC);
    assert_false(rules_engine_on_metric(e, &s));
    assert_false(feed(e, "cpu-usage", (double)NAN, 304 * SEC));
    assert_true(feed(e, "cpu-usage", 60, 305 * SEC));
    rules_engine_free(e);
}

/* rules.md §3: a sample later than latest + 1.5 × the requested interval restarts the window. */
static void test_rules_threshold_gap_restart(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("EventCounter", "ProviderName=System.Runtime\nCounterName=gc-heap-size\n"
                                "GreaterThan=10\nSlidingWindowDuration=00:00:20");
    struct rules_engine *e = engine(t, 5);
    assert_false(feed(e, "gc-heap-size", 20, 100 * SEC)); /* target 115 */
    assert_false(feed(e, "gc-heap-size", 20, 105 * SEC));
    assert_false(feed(e, "gc-heap-size", 20, 110 * SEC));
    assert_false(feed(e, "gc-heap-size", 20, 118 * SEC)); /* 110 + 7.5 < 118: restart, 133 */
    assert_false(feed(e, "gc-heap-size", 20, 123 * SEC));
    assert_false(feed(e, "gc-heap-size", 20, 128 * SEC));
    assert_true(feed(e, "gc-heap-size", 20, 133 * SEC));
    rules_engine_reset(e);
    assert_false(feed(e, "gc-heap-size", 20, 100 * SEC));
    assert_false(feed(e, "gc-heap-size", 20, 105 * SEC));
    assert_false(feed(e, "gc-heap-size", 20, 110 * SEC));
    assert_true(feed(e, "gc-heap-size", 20, 117500)); /* exactly 110 + 7.5: no gap */
    /* The requested interval decides, not the measured one. */
    struct rules_engine *slow = engine(t, 10);
    assert_false(feed(slow, "gc-heap-size", 20, 100 * SEC));
    assert_true(feed(slow, "gc-heap-size", 20, 115 * SEC));
    rules_engine_free(slow);
    rules_engine_free(e);
}

static void test_rules_threshold_less_and_between(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("CPUUsage", "LessThan=5\nSlidingWindowDuration=00:00:05");
    struct rules_engine *e = engine(t, 5);
    assert_true(feed(e, "cpu-usage", 1, 100 * SEC)); /* 100 - 5 + 5 */
    assert_false(feed(e, "cpu-usage", 60, 105 * SEC));
    rules_engine_free(e);
    t = trigger("ThreadpoolQueueLength", "GreaterThan=10\nLessThan=20\n"
                                         "SlidingWindowDuration=00:00:05");
    e = engine(t, 5);
    assert_false(feed(e, "threadpool-queue-length", 20, 100 * SEC));
    assert_false(feed(e, "threadpool-queue-length", 10, 105 * SEC));
    assert_true(feed(e, "threadpool-queue-length", 15, 110 * SEC));
    rules_engine_free(e);
    /* The shortcut default: GreaterThan 50. */
    t = trigger("CPUUsage", "SlidingWindowDuration=00:00:05");
    e = engine(t, 5);
    assert_false(feed(e, "cpu-usage", 50, 100 * SEC));
    assert_true(feed(e, "cpu-usage", 51, 105 * SEC));
    rules_engine_free(e);
}

/* Meter payloads: interval 0, so the window starts at the first sample's time. */
static void test_rules_threshold_meter(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("EventMeter", "MeterName=MyMeter\nInstrumentName=queue\nGreaterThan=20\n"
                              "SlidingWindowDuration=00:00:10");
    struct rules_engine *e = engine(t, 5);
    struct ev_metric_sample s = meter("mymeter", "queue", 30, 100 * SEC);
    assert_false(rules_engine_on_metric(e, &s));
    s.timestamp_ms = 105 * SEC;
    assert_false(rules_engine_on_metric(e, &s));
    s.timestamp_ms = 110 * SEC;
    assert_true(rules_engine_on_metric(e, &s));
    s = meter("MyMeter", "Queue", 30, 115 * SEC); /* instrument names are case-sensitive */
    assert_false(rules_engine_on_metric(e, &s));
    s = counter("queue", 30, 115 * SEC); /* an EventCounter of that name is not the meter's */
    s.provider = "MyMeter";
    assert_false(rules_engine_on_metric(e, &s));
    rules_engine_free(e);
}

static struct ev_metric_sample histogram(double p50, double p95, double p99, int64_t t)
{
    struct ev_metric_sample s = meter("M", "latency", 0, t);
    s.kind = EV_METRIC_HISTOGRAM;
    s.nquantiles = 3;
    s.quantiles[0] = (struct ev_quantile){0.5, p50};
    s.quantiles[1] = (struct ev_quantile){0.95, p95};
    s.quantiles[2] = (struct ev_quantile){0.99, p99};
    return s;
}

static void test_rules_threshold_percentile(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("EventMeter", "MeterName=M\nInstrumentName=latency\nGreaterThan=100\n"
                              "HistogramPercentile=95\nSlidingWindowDuration=00:00:05");
    struct rules_engine *e = engine(t, 5);
    struct ev_metric_sample s = histogram(10, 150, 500, 100 * SEC);
    assert_false(rules_engine_on_metric(e, &s));
    s = histogram(10, 50, 500, 103 * SEC); /* p95 under: the series breaks */
    assert_false(rules_engine_on_metric(e, &s));
    s = histogram(10, 150, 500, 106 * SEC);
    assert_false(rules_engine_on_metric(e, &s));
    s = histogram(10, 150, 10, 111 * SEC);
    assert_true(rules_engine_on_metric(e, &s));
    rules_engine_free(e);
    /* A percentile that is not published (90) never matches. */
    t = trigger("EventMeter", "MeterName=M\nInstrumentName=latency\nGreaterThan=1\n"
                              "HistogramPercentile=90\nSlidingWindowDuration=00:00:01");
    e = engine(t, 5);
    for (int k = 0; k < 5; k++) {
        s = histogram(500, 500, 500, (100 + k) * SEC);
        assert_false(rules_engine_on_metric(e, &s));
    }
    rules_engine_free(e);
    /* 99 is (int)(100 * 0.99). */
    t = trigger("EventMeter", "MeterName=M\nInstrumentName=latency\nLessThan=20\n"
                              "HistogramPercentile=99\nSlidingWindowDuration=00:00:01");
    e = engine(t, 5);
    s = histogram(500, 500, 10, 100 * SEC);
    assert_false(rules_engine_on_metric(e, &s));
    s = histogram(500, 500, 10, 101 * SEC);
    assert_true(rules_engine_on_metric(e, &s));
    rules_engine_free(e);
}

/* ---- ASP.NET ---- */

static bool http(struct rules_engine *e, enum rules_request_kind kind, int64_t t, const char *id,
                 const char *path, int status, int64_t duration_ms)
{
    struct rules_request_event ev = {kind, t, id, path, status, duration_ms * 10000};
    return rules_engine_on_request(e, &ev);
}

static bool start(struct rules_engine *e, int64_t t, const char *id, const char *path)
{
    return http(e, RULES_REQUEST_START, t, id, path, 0, 0);
}

static bool stop(struct rules_engine *e, int64_t t, const char *id, const char *path, int status,
                 int64_t duration_ms)
{
    return http(e, RULES_REQUEST_STOP, t, id, path, status, duration_ms);
}

static void test_rules_aspnet_request_count(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("AspNetRequestCount", "RequestCount=3\nSlidingWindowDuration=00:00:10");
    struct rules_engine *e = engine(t, 5);
    assert_false(start(e, 0, "a", "/"));
    assert_false(start(e, 500, "b", "/"));        /* merged into the first point */
    assert_false(stop(e, 600, "a", "/", 200, 1)); /* stops do not count */
    assert_true(start(e, 1500, "c", "/"));
    rules_engine_reset(e);
    assert_false(start(e, 0, "a", "/"));
    assert_false(start(e, 900, "b", "/"));   /* merged at 0 */
    assert_false(start(e, 10500, "c", "/")); /* 10.5 s after 0: both dropped */
    assert_false(start(e, 11000, "d", "/"));
    assert_true(start(e, 12000, "e", "/"));
    rules_engine_free(e);
}

/* collection-rule-configuration.md "Wildcards and Globbing" table, case-insensitively. */
static void test_rules_aspnet_globs(void **state)
{
    (void)state;
    static const struct {
        const char *glob, *yes[3], *no[3];
    } cases[] = {
        {"**/*", {"/", "/a/b/c", ""}, {NULL}},
        {"/images/**/*",
         {"/images/logo.png", "/images/products/1.png", "/IMAGES/x"},
         {"/index/header.png", "/images", NULL}},
        {"**/*.js",
         {"/script.js", "/path/script.js", "/path/sub/script.js"},
         {"/script.js/page.html", NULL}},
        {"**/sub/*.html",
         {"/path/sub/page.html", "/sub/page.html", NULL},
         {"/sub/script.js", "/path/doc.txt", NULL}},
        {"/api/*", {"/api/x", "/api/", NULL}, {"/api/x/y", "/apix", NULL}},
        {"/a.b", {"/A.B", NULL}, {"/axb", NULL}},
        {"/api/**", {"/api/x", NULL}, {"/api/x/y", NULL}},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char settings[256];
        snprintf(settings, sizeof(settings), "RequestCount=1\nIncludePaths:0=%s", cases[k].glob);
        struct rules_engine *e = engine(trigger("AspNetRequestCount", settings), 5);
        for (size_t i = 0; i < 3 && cases[k].yes[i] != NULL; i++) {
            if (!start(e, 0, "x", cases[k].yes[i])) {
                fail_msg("'%s' should match '%s'", cases[k].glob, cases[k].yes[i]);
            }
            rules_engine_reset(e);
        }
        for (size_t i = 0; i < 3 && cases[k].no[i] != NULL; i++) {
            if (start(e, 0, "x", cases[k].no[i])) {
                fail_msg("'%s' should not match '%s'", cases[k].glob, cases[k].no[i]);
            }
        }
        rules_engine_free(e);
    }
    /* Exclusion wins over inclusion; no includes means every path. */
    struct rules_engine *e =
        engine(trigger("AspNetRequestCount", "RequestCount=1\nIncludePaths:0=/api/**/*\n"
                                             "ExcludePaths:0=/api/health\nExcludePaths:1=**/*.css"),
               5);
    assert_false(start(e, 0, "x", "/api/health"));
    assert_false(start(e, 0, "x", "/api/site.css"));
    assert_false(start(e, 0, "x", "/home"));
    assert_true(start(e, 0, "x", "/api/users/1"));
    rules_engine_free(e);
    e = engine(trigger("AspNetRequestCount", "RequestCount=1\nExcludePaths:0=/metrics"), 5);
    assert_false(start(e, 0, "x", "/metrics"));
    assert_true(start(e, 0, "x", "/anything/else"));
    rules_engine_free(e);
}

static void test_rules_aspnet_response_status(void **state)
{
    (void)state;
    const struct rules_trigger *t = trigger(
        "AspNetResponseStatus", "ResponseCount=3\nStatusCodes:0=500-599\nStatusCodes:1=404\n"
                                "SlidingWindowDuration=00:01:00\nExcludePaths:0=/skip");
    struct rules_engine *e = engine(t, 5);
    assert_false(start(e, 0, "a", "/"));
    assert_false(stop(e, 0, "a", "/", 200, 1));
    assert_false(stop(e, 1000, "b", "/", 404, 1));
    assert_false(stop(e, 2000, "c", "/", 403, 1));
    assert_false(stop(e, 3000, "d", "/skip", 500, 1));
    assert_false(stop(e, 4000, "e", "/", 599, 1));
    assert_true(stop(e, 5000, "f", "/", 500, 1));
    assert_true(stop(e, 6000, "g", "/", 200, 1)); /* still 3 in the window */
    /* SlidingWindow moves only when a point is added: a 200 a minute later still sees 3. */
    assert_true(stop(e, 62000, "h", "/", 200, 1));
    assert_true(stop(e, 62000, "i", "/", 503, 1));  /* drops the 404 of 1 s: 4 s, 5 s, 62 s */
    assert_false(stop(e, 66000, "j", "/", 503, 1)); /* drops 4 s and 5 s: 2 left */
    rules_engine_free(e);
}

static void test_rules_aspnet_request_duration(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("AspNetRequestDuration",
                "RequestCount=2\nRequestDuration=00:00:05\nSlidingWindowDuration=00:01:00");
    struct rules_engine *e = engine(t, 5);
    assert_false(start(e, 0, "a", "/"));
    assert_false(start(e, 1000, "b", "/"));
    assert_false(start(e, 2000, "c", "/"));
    assert_false(stop(e, 3000, "c", "/", 200, 1000));   /* fast */
    assert_false(stop(e, 6000, "a", "/", 200, 6000));   /* slow: 1 */
    assert_false(stop(e, 6500, "zzz", "/", 200, 9000)); /* never started here: ignored */
    /* The first heartbeat is processed: b is open for 9 s >= 5 s: counted, then forgotten. */
    assert_true(http(e, RULES_REQUEST_HEARTBEAT, 10000, NULL, NULL, 0, 0));
    assert_false(stop(e, 20000, "b", "/", 200, 19000)); /* counted by the heartbeat already */
    rules_engine_reset(e);
    /* Heartbeats are looked at once per 9 s at most (strictly more than 9 s apart). */
    assert_false(http(e, RULES_REQUEST_HEARTBEAT, 0, NULL, NULL, 0, 0));
    assert_false(start(e, 1000, "a", "/"));
    assert_false(start(e, 1000, "b", "/"));
    assert_false(http(e, RULES_REQUEST_HEARTBEAT, 9000, NULL, NULL, 0, 0)); /* skipped: 9 s */
    assert_true(http(e, RULES_REQUEST_HEARTBEAT, 9001, NULL, NULL, 0, 0));  /* a and b, 8 s open */
    rules_engine_reset(e);
    /* A request counted by a heartbeat does not count again when it stops. */
    assert_false(start(e, 0, "a", "/"));
    assert_false(http(e, RULES_REQUEST_HEARTBEAT, 6000, NULL, NULL, 0, 0)); /* 1 */
    assert_false(stop(e, 7000, "a", "/", 200, 7000));
    assert_false(start(e, 8000, "b", "/"));
    assert_true(stop(e, 14000, "b", "/", 200, 6000)); /* 2 */
    rules_engine_free(e);
}

/* Many open requests: the table grows, removes keep every id findable. */
static void test_rules_aspnet_many_inflight(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("AspNetRequestDuration", "RequestCount=1000\nRequestDuration=00:00:01");
    struct rules_engine *e = engine(t, 5);
    char id[32];
    for (int k = 0; k < 3000; k++) {
        snprintf(id, sizeof(id), "req-%d", k);
        assert_false(start(e, 0, id, "/"));
    }
    int counted = 0;
    for (int k = 0; k < 3000; k += 2) {
        snprintf(id, sizeof(id), "req-%d", k);
        counted += stop(e, 100, id, "/", 200, 2000);
    }
    assert_int_equal(counted, 501); /* the 1000th slow stop fires, and the ones after it */
    rules_engine_reset(e);
    for (int k = 0; k < 999; k++) {
        snprintf(id, sizeof(id), "r%d", k);
        assert_false(start(e, 0, id, "/"));
    }
    assert_false(http(e, RULES_REQUEST_HEARTBEAT, 2000, NULL, NULL, 0, 0)); /* 999 */
    assert_false(stop(e, 2100, "r5", "/", 200, 5000));                      /* forgotten already */
    assert_false(start(e, 2200, "late", "/"));
    assert_true(stop(e, 4000, "late", "/", 200, 1800));
    rules_engine_free(e);
}

static void test_rules_engine_startup_invalid(void **state)
{
    (void)state;
    struct rules_engine *e = (struct rules_engine *)1;
    assert_int_equal(rules_engine_new(trigger("Startup", ""), 5, &e), AGENT_E_INVAL);
    assert_null(e);
    /* Engines ignore the other family's input. */
    e = engine(trigger("CPUUsage", ""), 5);
    assert_false(start(e, 0, "a", "/"));
    rules_engine_free(e);
    e = engine(trigger("AspNetRequestCount", "RequestCount=1"), 5);
    assert_false(feed(e, "cpu-usage", 99, 0));
    rules_engine_free(e);
}

/* ---- ASP.NET events from decoded records ---- */

/* A hand-made schema: {SourceName, EventName, Arguments: [{Key, Value}]}. */
static const struct ev_field arg_fields[] = {
    {"", EV_TYPE_OBJECT, 0, 3, 1, 0, false, 0, -1},
    {"SourceName", EV_TYPE_STRING, 1, 0, 0, 0, false, 0, -1},
    {"EventName", EV_TYPE_STRING, 1, 0, 0, 0, false, 0, -1},
    {"Arguments", EV_TYPE_ARRAY, 1, 1, 4, 0, false, 0, -1},
    {"", EV_TYPE_OBJECT, 2, 2, 5, 3, true, 0, -1},
    {"Key", EV_TYPE_STRING, 3, 0, 0, 4, true, 0, -1},
    {"Value", EV_TYPE_STRING, 3, 0, 0, 4, true, 0, -1},
};

static void test_rules_request_from_record(void **state)
{
    (void)state;
    struct ev_schema schema = {.provider = "Microsoft-Diagnostics-DiagnosticSource",
                               .event_name = "Activity1Stop",
                               .nfields = 7,
                               .fields = arg_fields};
    uint8_t args[512];
    size_t n = 0;
    static const char *const pairs[] = {"activityid",       "00-abc-01", "Path",  "/api/x",
                                        "StatusCode",       "503",       "Other", "z",
                                        "ActivityDuration", "61000000"};
    for (size_t k = 0; k < 10; k++) {
        n += put_wstr(args + n, pairs[k]);
    }
    struct ev_record rec;
    memset(&rec, 0, sizeof(rec));
    rec.schema = &schema;
    rec.v[3] = (struct ev_value){args, (uint32_t)n, 5};
    char scratch[256];
    struct rules_request_event ev;
    assert_int_equal(rules_request_event_from_record(&rec, 1234, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_REQUEST_STOP);
    assert_int_equal(ev.timestamp_ms, 1234);
    assert_string_equal(ev.activity_id, "00-abc-01");
    assert_string_equal(ev.path, "/api/x");
    assert_int_equal(ev.status_code, 503);
    assert_int_equal(ev.duration_ticks, 61000000);
    assert_int_equal(rules_request_event_from_record(&rec, 0, scratch, 8, &ev), AGENT_E_NOSPACE);
    schema.event_name = "Activity1/Start";
    assert_int_equal(rules_request_event_from_record(&rec, 0, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_REQUEST_START);
    rec.v[3].count = 6; /* one element more than the bytes hold */
    assert_int_equal(rules_request_event_from_record(&rec, 0, scratch, sizeof(scratch), &ev),
                     AGENT_E_PROTO);
    schema.event_name = "Activity2Start";
    assert_int_equal(rules_request_event_from_record(&rec, 0, scratch, sizeof(scratch), &ev),
                     AGENT_E_NOTFOUND);
    struct ev_schema hosting = {.provider = "Microsoft.AspNetCore.Hosting",
                                .event_name = "EventCounters",
                                .nfields = 1,
                                .fields = arg_fields};
    rec.schema = &hosting;
    assert_int_equal(rules_request_event_from_record(&rec, 9, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_REQUEST_HEARTBEAT);
    assert_int_equal(ev.timestamp_ms, 9);
}

/* ---- sessions ---- */

static const char *arg(const struct rules_session_provider *p, const char *key)
{
    for (size_t k = 0; k < p->nargs; k++) {
        if (strcmp(p->args[k].key, key) == 0) {
            return p->args[k].value;
        }
    }
    return NULL;
}

static void test_rules_sessions(void **state)
{
    (void)state;
    struct rules_session s;
    struct rules_session_options o = {.counter_interval_s = 5};
    const struct rules_trigger *t =
        trigger("EventCounter", "ProviderName=MyEventSource\nCounterName=c\nGreaterThan=1");
    assert_string_equal(rules_trigger_interval_provider(t), "MyEventSource");
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    assert_int_equal(s.nproviders, 1);
    assert_string_equal(s.providers[0].name, "MyEventSource");
    assert_int_equal(s.providers[0].keywords, 0);
    assert_int_equal(s.providers[0].level, 4);
    assert_string_equal(arg(&s.providers[0], "EventCounterIntervalSec"), "5");
    assert_false(s.request_rundown);
    assert_int_equal(s.buffer_mb, 256);

    t = trigger("GCHeapSize", "");
    assert_string_equal(rules_trigger_interval_provider(t), "System.Runtime");
    o.counter_interval_s = 0.5;
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    assert_string_equal(s.providers[0].name, "System.Runtime");
    assert_string_equal(arg(&s.providers[0], "EventCounterIntervalSec"), "0.5");

    t = trigger("EventMeter", "MeterName=MyMeter\nInstrumentName=i\nGreaterThan=1");
    assert_null(rules_trigger_interval_provider(t));
    assert_int_equal(rules_trigger_session(t, &o, &s), AGENT_E_INVAL); /* no session id */
    o.meter_session_id = "SHARED";
    o.meter_client_id = "b5c3c1a0-0000-4000-8000-000000000001";
    o.counter_interval_s = 1;
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    const struct rules_session_provider *p = &s.providers[0];
    assert_string_equal(p->name, "System.Diagnostics.Metrics");
    assert_int_equal(p->keywords, 0x2);
    static const char *const keys[] = {"SessionId",     "Metrics",       "RefreshInterval",
                                       "MaxTimeSeries", "MaxHistograms", "ClientId"};
    static const char *const values[] = {
        "SHARED", "MyMeter", "1", "1000", "20", "b5c3c1a0-0000-4000-8000-000000000001"};
    assert_int_equal(p->nargs, 6);
    for (size_t k = 0; k < 6; k++) {
        assert_string_equal(p->args[k].key, keys[k]);
        assert_string_equal(p->args[k].value, values[k]);
    }

    t = trigger("AspNetRequestDuration", "RequestCount=1");
    assert_string_equal(rules_trigger_interval_provider(t), "Microsoft.AspNetCore.Hosting");
    o.counter_interval_s = 10;
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    assert_int_equal(s.nproviders, 2);
    assert_string_equal(s.providers[0].name, "Microsoft-Diagnostics-DiagnosticSource");
    assert_int_equal(s.providers[0].keywords, 0x3);
    assert_int_equal(s.providers[0].level, 5);
    const char *specs = arg(&s.providers[0], "FilterAndPayloadSpecs");
    assert_non_null(strstr(specs, "HttpRequestIn.Stop@Activity1Stop:-ActivityId=*Activity.Id;"
                                  "Request.Path;Response.StatusCode;"
                                  "ActivityDuration=*Activity.Duration.Ticks\r\n"));
    assert_string_equal(s.providers[1].name, "Microsoft.AspNetCore.Hosting");
    assert_string_equal(arg(&s.providers[1], "EventCounterIntervalSec"), "10");

    t = trigger("AspNetResponseStatus", "ResponseCount=1\nStatusCodes:0=500");
    assert_null(rules_trigger_interval_provider(t));
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    assert_int_equal(s.nproviders, 1);

    t = trigger("Startup", "");
    assert_int_equal(rules_trigger_session(t, &o, &s), AGENT_E_INVAL);
}

static void test_rules_session_json(void **state)
{
    (void)state;
    struct rules_session s;
    struct rules_session_options o = {.counter_interval_s = 5};
    assert_int_equal(rules_trigger_session(trigger("AspNetRequestCount", "RequestCount=1"), &o, &s),
                     0);
    cJSON *j = rules_session_json(&s);
    assert_non_null(j);
    char *text = cJSON_PrintUnformatted(j);
    assert_non_null(strstr(text, "{\"Providers\":[{\"Name\":\"Microsoft-Diagnostics-"
                                 "DiagnosticSource\",\"Keywords\":\"0x3\",\"EventLevel\":"
                                 "\"Verbose\",\"Arguments\":{\"FilterAndPayloadSpecs\":"));
    assert_non_null(strstr(text, "\"RequestRundown\":false,\"BufferSizeInMB\":256}"));
    free(text);
    cJSON_Delete(j);

    const struct rules_config *cfg =
        load_strict("CollectionRules:R:Trigger:Type=Startup\n"
                    "CollectionRules:R:Actions:0:Type=CollectTrace\n"
                    "CollectionRules:R:Actions:0:Settings:Egress=e\n"
                    "CollectionRules:R:Actions:0:Settings:BufferSizeMegabytes=32\n"
                    "CollectionRules:R:Actions:0:Settings:Providers:0:Name=P\n"
                    "CollectionRules:R:Actions:0:Settings:Providers:0:Keywords=0xC\n"
                    "CollectionRules:R:Actions:0:Settings:Providers:0:EventLevel=Informational\n"
                    "CollectionRules:R:Actions:0:Settings:Providers:0:Arguments:k=v\n"
                    "CollectionRules:R:Actions:1:Type=CollectTrace\n"
                    "CollectionRules:R:Actions:1:Settings:Egress=e\n"
                    "CollectionRules:R:Actions:1:Settings:Profile=Cpu\n");
    j = rules_trace_action_json(&cfg->rules[0].actions[0]);
    text = cJSON_PrintUnformatted(j);
    assert_string_equal(text, "{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"0xC\",\"EventLevel\":"
                              "\"Informational\",\"Arguments\":{\"k\":\"v\"}}],\"RequestRundown\":"
                              "true,\"BufferSizeInMB\":32}");
    free(text);
    cJSON_Delete(j);
    assert_null(rules_trace_action_json(&cfg->rules[0].actions[1]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rules_threshold_window, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_threshold_gap_restart, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_threshold_less_and_between, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_threshold_meter, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_threshold_percentile, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_aspnet_request_count, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_aspnet_globs, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_aspnet_response_status, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_aspnet_request_duration, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_aspnet_many_inflight, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_engine_startup_invalid, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_request_from_record, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_sessions, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_session_json, cfg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
