/* SPDX-License-Identifier: MIT */
/*
 * The metrics store and its Prometheus text (events/ev_store.h): dotnet-monitor's names, HELP,
 * TYPE, values and labels (docs/api.md §7), and dotmon's fixes (one sample per series,
 * one HELP/TYPE per name across processes, unique label names).
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

#include "buf.h"
#include "err.h"
#include "ev_prom.h"
#include "ev_store.h"
#include "membudget.h"

/* An EventCounter sample (Mean -> gauge, Sum -> rate). */
static struct ev_metric_sample counter(const char *name, const char *display, const char *unit,
                                       enum ev_metric_kind kind, double value, int64_t ts)
{
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = "System.Runtime";
    s.name = name;
    s.display_name = display;
    s.unit = unit;
    s.kind = kind;
    s.value = value;
    s.tags = "";
    s.interval_sec = 5;
    s.timestamp_ms = ts;
    return s;
}

static struct ev_metric_sample meter(const char *provider, const char *name, const char *unit,
                                     enum ev_metric_kind kind, double value, const char *tags)
{
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = provider;
    s.name = name;
    s.display_name = "";
    s.unit = unit;
    s.kind = kind;
    s.is_meter = true;
    s.value = value;
    s.tags = tags;
    s.interval_sec = 5;
    s.timestamp_ms = 1700000000000;
    return s;
}

static struct ev_store *store_new(uint32_t max)
{
    struct ev_store_options opt = {.max_series = max, .default_interval = 5};
    struct ev_store *st = NULL;
    assert_int_equal(ev_store_new(&st, &opt), 0);
    return st;
}

/* Renders one store without process labels; the caller frees the text. */
static char *render1(const struct ev_store *st)
{
    struct ev_prom_target t = {.store = st};
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(&t, 1, &out), 0);
    char *text = buf_steal(&out, NULL);
    assert_non_null(text);
    return text;
}

static char *name_of(const char *provider, const char *counter, const char *unit)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_prom_metric_name(&b, provider, counter, unit), 0);
    return buf_steal(&b, NULL);
}

static void assert_name(const char *provider, const char *counter, const char *unit,
                        const char *want)
{
    char *got = name_of(provider, counter, unit);
    assert_string_equal(got, want);
    free(got);
}

static void test_names(void **state)
{
    (void)state;
    /* docs/api.md §7.3 examples. */
    assert_name("System.Runtime", "cpu-usage", "%", "systemruntime_cpu_usage_ratio");
    assert_name("System.Runtime", "working-set", "MB", "systemruntime_working_set_bytes");
    assert_name("System.Runtime", "gen-0-gc-count", "count", "systemruntime_gen_0_gc_count");
    assert_name("System.Runtime", "gen-0-gc-count", "", "systemruntime_gen_0_gc_count");
    assert_name("System.Runtime", "time-in-jit", "ms", "systemruntime_time_in_jit_ms");
    assert_name("Demo.Meter", "demo.requests", "{request}", "demometer_demo_requests__request_");
    assert_name("System.Runtime", "dotnet.gc.heap.total_allocated", "By",
                "systemruntime_dotnet_gc_heap_total_allocated_By");
    /* The rest of dotnet-monitor's own table: unit map case-insensitive, all-invalid provider
     * "_", digits first, non-ASCII as one invalid character per UTF-16 unit. */
    assert_name("Test-Provider", "Test-Metric", "b", "testprovider_Test_Metric_bytes");
    assert_name("!@#", "#@#", "b", "______bytes");
    assert_name("Asp-Net-Provider", "Requests!Received", "0$customs",
                "aspnetprovider_Requests_Received___customs");
    assert_name("a", "b", NULL, "a_b");
    assert_name("Unicode\xce\xac\xce\xae\xce\xb0Letter",
                "Unicode\xe0\xaf\xaf"
                "Digit",
                NULL, "unicodeletter_Unicode_Digit");
    assert_name("Microsoft.AspNetCore.Hosting", "requests-per-second", "COUNT",
                "microsoftaspnetcorehosting_requests_per_second");
    assert_name("p", "x", "Mb", "p_x_bytes");
    assert_name("p", "\xf0\x9f\x98\x80", "", "p___"); /* U+1F600: two UTF-16 units */
    assert_name("9.1p", "9x", "", "p__x");            /* never a leading digit */
    assert_name("p", "bad\xff", "", "p_bad_");        /* malformed UTF-8: one byte each */
}

static void assert_double(double v, const char *want)
{
    char s[EV_PROM_DOUBLE_MAX];
    size_t n = ev_prom_format_double(v, s, sizeof(s));
    assert_string_equal(s, want);
    assert_int_equal(n, strlen(want));
}

static void test_double_format(void **state)
{
    (void)state;
    /* .NET's invariant double.ToString() (shortest round-trip) for finite values. */
    assert_double(5, "5");
    assert_double(0.690005, "0.690005");
    assert_double(0.691783039570667, "0.691783039570667");
    assert_double(42.5, "42.5");
    assert_double(-60, "-60");
    assert_double(0, "0");
    assert_double(-0.0, "-0");
    assert_double(9000000, "9000000");
    assert_double(1e14, "100000000000000");
    assert_double(1e15, "1000000000000000"); /* .NET 10 writes it so; E notation from 1E+17 */
    assert_double(1e16, "10000000000000000");
    assert_double(1e17, "1E+17");
    assert_double(123456789012345678.0, "1.2345678901234568E+17");
    assert_double(12345678901234567.0, "12345678901234568");
    assert_double(0.0001, "0.0001");
    assert_double(0.00001, "1E-05");
    assert_double(1.5e-7, "1.5E-07");
    assert_double(0.1 + 0.2, "0.30000000000000004");
    assert_double(1.7976931348623157e308, "1.7976931348623157E+308");
    assert_double(-2.2250738585072014e-308, "-2.2250738585072014E-308");
    assert_double(4.9e-324, "5E-324");
    assert_double(1e100, "1E+100");
    /* Prometheus spellings (.NET would write "NaN", "Infinity", "-Infinity"). */
    assert_double(NAN, "NaN");
    assert_double(INFINITY, "+Inf");
    assert_double(-INFINITY, "-Inf");
    char small[3];
    assert_int_equal(ev_prom_format_double(12345, small, sizeof(small)), 0);
}

static void test_event_counters(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s =
        counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, 5, 1700000000123);
    assert_int_equal(ev_store_add(st, &s), 0);
    s = counter("working-set", "Working Set", "MB", EV_METRIC_GAUGE, 9.5, 1700000000123);
    assert_int_equal(ev_store_add(st, &s), 0);
    s = counter("gen-0-gc-count", "Gen 0 GC Count", "count", EV_METRIC_RATE, 2, 1700000000123);
    assert_int_equal(ev_store_add(st, &s), 0);
    s = counter("time-in-jit", "Time spent in JIT", "ms", EV_METRIC_RATE, 0.690005, 1700000000123);
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 4);
    char *text = render1(st);
    assert_string_equal(text, "# HELP systemruntime_cpu_usage_ratio CPU Usage\n"
                              "# TYPE systemruntime_cpu_usage_ratio gauge\n"
                              "systemruntime_cpu_usage_ratio 5 1700000000123\n"
                              "# HELP systemruntime_gen_0_gc_count Gen 0 GC Count\n"
                              "# TYPE systemruntime_gen_0_gc_count gauge\n"
                              "systemruntime_gen_0_gc_count 2 1700000000123\n"
                              "# HELP systemruntime_time_in_jit_ms Time spent in JIT\n"
                              "# TYPE systemruntime_time_in_jit_ms gauge\n"
                              "systemruntime_time_in_jit_ms 0.690005 1700000000123\n"
                              "# HELP systemruntime_working_set_bytes Working Set\n"
                              "# TYPE systemruntime_working_set_bytes gauge\n"
                              "systemruntime_working_set_bytes 9500000 1700000000123\n");
    free(text);
    ev_store_free(st);
}

static void test_meters_help_and_types(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s =
        meter("Demo.Meter", "demo.requests", "{request}", EV_METRIC_RATE, 3, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("Demo.Meter", "demo.plain", "", EV_METRIC_RATE, 1, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("Demo.Meter", "demo.temp", "Cel", EV_METRIC_GAUGE, 21.5, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("Demo.Meter", "demo.queue", "", EV_METRIC_UPDOWN, -2, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("System.Runtime", "dotnet.gc.heap.total_allocated", "By", EV_METRIC_RATE, 1024, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    char *text = render1(st);
    assert_string_equal(text,
                        "# HELP demometer_demo_plain demo.plain (Count / 5 sec)\n"
                        "# TYPE demometer_demo_plain gauge\n"
                        "demometer_demo_plain 1 1700000000000\n"
                        "# HELP demometer_demo_queue demo.queue\n"
                        "# TYPE demometer_demo_queue gauge\n"
                        "demometer_demo_queue -2 1700000000000\n"
                        "# HELP demometer_demo_requests__request_ demo.requests ({request} / 5 "
                        "sec)\n"
                        "# TYPE demometer_demo_requests__request_ gauge\n"
                        "demometer_demo_requests__request_ 3 1700000000000\n"
                        "# HELP demometer_demo_temp_Cel demo.temp (Cel)\n"
                        "# TYPE demometer_demo_temp_Cel gauge\n"
                        "demometer_demo_temp_Cel 21.5 1700000000000\n"
                        "# HELP systemruntime_dotnet_gc_heap_total_allocated_By "
                        "dotnet.gc.heap.total_allocated (By / 5 sec)\n"
                        "# TYPE systemruntime_dotnet_gc_heap_total_allocated_By gauge\n"
                        "systemruntime_dotnet_gc_heap_total_allocated_By 1024 1700000000000\n");
    free(text);
    ev_store_free(st);
}

static void test_labels(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    /* Meter: meter tags, instrument tags, value tags, split on the first '='. */
    struct ev_metric_sample s =
        meter("M", "req", "", EV_METRIC_GAUGE, 1, "code=200,route=/a=b,b.c=x");
    s.meter_tags = "env=prod";
    s.instrument_tags = "";
    assert_int_equal(ev_store_add(st, &s), 0);
    /* EventCounter metadata: k:v, split on the first ':'. */
    s = counter("ctr", "Ctr", "", EV_METRIC_GAUGE, 2, 1);
    s.provider = "E";
    s.tags = "host:a:b,1st:x";
    assert_int_equal(ev_store_add(st, &s), 0);
    /* Escapes in values. */
    s = meter("M", "esc", "", EV_METRIC_GAUGE, 3, "k=a\\b\"c\nd");
    assert_int_equal(ev_store_add(st, &s), 0);
    char *text = render1(st);
    assert_string_equal(text, "# HELP e_ctr Ctr\n"
                              "# TYPE e_ctr gauge\n"
                              "e_ctr{host=\"a:b\", _st=\"x\"} 2 1\n"
                              "# HELP m_esc esc\n"
                              "# TYPE m_esc gauge\n"
                              "m_esc{k=\"a\\\\b\\\"c\\nd\"} 3 1700000000000\n"
                              "# HELP m_req req\n"
                              "# TYPE m_req gauge\n"
                              "m_req{env=\"prod\", code=\"200\", route=\"/a=b\", b_c=\"x\"} 1 "
                              "1700000000000\n");
    free(text);
    ev_store_free(st);
}

static void test_label_discard(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    /* One item without '=' (an unescaped ',' inside a value, .NET 10) drops every tag label. */
    struct ev_metric_sample s = meter("M", "req", "", EV_METRIC_GAUGE, 1, "a=1,route=/x,y");
    assert_int_equal(ev_store_add(st, &s), 0);
    /* An EventCounter with meter-style tags: no ':' so no labels either. */
    s = counter("ctr", "Ctr", "", EV_METRIC_GAUGE, 2, 1);
    s.tags = "a=1";
    assert_int_equal(ev_store_add(st, &s), 0);
    const char *keys[] = {"pid"};
    const char *vals[] = {"42"};
    struct ev_prom_target t = {.store = st, .labels = {.keys = keys, .values = vals, .n = 1}};
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(&t, 1, &out), 0);
    assert_string_equal(buf_cstr(&out), "# HELP m_req req\n"
                                        "# TYPE m_req gauge\n"
                                        "m_req{pid=\"42\"} 1 1700000000000\n"
                                        "# HELP systemruntime_ctr Ctr\n"
                                        "# TYPE systemruntime_ctr gauge\n"
                                        "systemruntime_ctr{pid=\"42\"} 2 1\n");
    buf_fini(&out);
    ev_store_free(st);
}

static void test_label_collisions(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    /* pid collides with a process label, a repeated key with the first, __x is reserved, an
     * empty key has no name, quantile is the summary's. */
    struct ev_metric_sample s =
        meter("M", "g", "", EV_METRIC_GAUGE, 1, "pid=7,a=1,a=2,__x=3,=4,quantile=5,tag_a=6");
    assert_int_equal(ev_store_add(st, &s), 0);
    const char *keys[] = {"pid", "uid", "name"};
    const char *vals[] = {"42", "1000", "my \"app\""};
    struct ev_prom_target t = {.store = st, .labels = {.keys = keys, .values = vals, .n = 3}};
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(&t, 1, &out), 0);
    assert_string_equal(buf_cstr(&out),
                        "# HELP m_g g\n"
                        "# TYPE m_g gauge\n"
                        "m_g{tag_pid=\"7\", a=\"1\", tag_a=\"2\", tag___x=\"3\", tag_=\"4\", "
                        "tag_quantile=\"5\", tag_tag_a=\"6\", pid=\"42\", uid=\"1000\", "
                        "name=\"my \\\"app\\\"\"} 1 1700000000000\n");
    buf_fini(&out);
    ev_store_free(st);
}

static void test_two_processes(void **state)
{
    (void)state;
    struct ev_store *a = store_new(0);
    struct ev_store *b = store_new(0);
    struct ev_metric_sample s = counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, 5, 10);
    assert_int_equal(ev_store_add(a, &s), 0);
    s = counter("working-set", "Working Set", "MB", EV_METRIC_GAUGE, 1, 10);
    assert_int_equal(ev_store_add(a, &s), 0);
    s = counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, 7, 20);
    assert_int_equal(ev_store_add(b, &s), 0);
    const char *keys[] = {"pid", "uid", "name"};
    const char *va[] = {"100", "0", "a"};
    const char *vb[] = {"200", "0", "b"};
    struct ev_prom_target t[2] = {{.store = a, .labels = {.keys = keys, .values = va, .n = 3}},
                                  {.store = b, .labels = {.keys = keys, .values = vb, .n = 3}}};
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(t, 2, &out), 0);
    assert_string_equal(
        buf_cstr(&out),
        "# HELP systemruntime_cpu_usage_ratio CPU Usage\n"
        "# TYPE systemruntime_cpu_usage_ratio gauge\n"
        "systemruntime_cpu_usage_ratio{pid=\"100\", uid=\"0\", name=\"a\"} 5 10\n"
        "systemruntime_cpu_usage_ratio{pid=\"200\", uid=\"0\", name=\"b\"} 7 20\n"
        "# HELP systemruntime_working_set_bytes Working Set\n"
        "# TYPE systemruntime_working_set_bytes gauge\n"
        "systemruntime_working_set_bytes{pid=\"100\", uid=\"0\", name=\"a\"} 1000000 10\n");
    buf_fini(&out);
    ev_store_free(a);
    ev_store_free(b);
}

static void test_newest_replaces(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    for (int i = 1; i <= 5; i++) {
        struct ev_metric_sample s =
            counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, i, 1000 * i);
        assert_int_equal(ev_store_add(st, &s), 0);
    }
    /* Another tag set of the same counter is another series. */
    struct ev_metric_sample s = meter("M", "r", "", EV_METRIC_RATE, 1, "route=/a");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("M", "r", "", EV_METRIC_RATE, 2, "route=/b");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("M", "r", "", EV_METRIC_RATE, 3, "route=/a");
    s.timestamp_ms = 1700000000999;
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 3);
    char *text = render1(st);
    assert_string_equal(text, "# HELP m_r r (Count / 5 sec)\n"
                              "# TYPE m_r gauge\n"
                              "m_r{route=\"/a\"} 3 1700000000999\n"
                              "m_r{route=\"/b\"} 2 1700000000000\n"
                              "# HELP systemruntime_cpu_usage_ratio CPU Usage\n"
                              "# TYPE systemruntime_cpu_usage_ratio gauge\n"
                              "systemruntime_cpu_usage_ratio 5 5000\n");
    free(text);
    /* Two tag strings that render the same labels (a.b and a_b) print one line: the newest. */
    ev_store_clear(st);
    assert_int_equal(ev_store_series(st), 0);
    s = meter("M", "d", "", EV_METRIC_GAUGE, 1, "a.b=1");
    s.timestamp_ms = 2;
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("M", "d", "", EV_METRIC_GAUGE, 9, "a_b=1");
    s.timestamp_ms = 1;
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 2);
    text = render1(st);
    assert_string_equal(text, "# HELP m_d d\n# TYPE m_d gauge\nm_d{a_b=\"1\"} 1 2\n");
    free(text);
    /* The same strings again update the series in place (its bytes stay); a new DisplayName
     * replaces the strings too, and HELP follows it. */
    ev_store_clear(st);
    s = counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, 1, 1000);
    assert_int_equal(ev_store_add(st, &s), 0);
    uint64_t bytes = ev_store_bytes(st);
    s = counter("cpu-usage", "CPU Usage", "%", EV_METRIC_GAUGE, 2, 2000);
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_bytes(st), bytes);
    text = render1(st);
    assert_string_equal(text, "# HELP systemruntime_cpu_usage_ratio CPU Usage\n"
                              "# TYPE systemruntime_cpu_usage_ratio gauge\n"
                              "systemruntime_cpu_usage_ratio 2 2000\n");
    free(text);
    s = counter("cpu-usage", "Processor Use", "%", EV_METRIC_GAUGE, 3, 3000);
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 1);
    assert_int_equal(ev_store_bytes(st), bytes + 4);
    text = render1(st);
    assert_string_equal(text, "# HELP systemruntime_cpu_usage_ratio Processor Use\n"
                              "# TYPE systemruntime_cpu_usage_ratio gauge\n"
                              "systemruntime_cpu_usage_ratio 3 3000\n");
    free(text);
    ev_store_free(st);
}

static void test_histogram(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s =
        meter("Demo.Meter", "demo.latency", "ms", EV_METRIC_HISTOGRAM, 0, "route=/a");
    /* Out of order on purpose: the text must be ascending. */
    s.nquantiles = 3;
    s.quantiles[0] = (struct ev_quantile){0.99, 30};
    s.quantiles[1] = (struct ev_quantile){0.5, 10.5};
    s.quantiles[2] = (struct ev_quantile){0.95, 20};
    s.hist_count = 4;
    s.hist_sum = 71;
    assert_int_equal(ev_store_add(st, &s), 0);
    /* No quantiles: dropped, as dotnet-monitor does. */
    s = meter("Demo.Meter", "demo.empty", "ms", EV_METRIC_HISTOGRAM, 0, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 1);
    char *text = render1(st);
    assert_string_equal(text, "# HELP demometer_demo_latency_ms demo.latency (ms)\n"
                              "# TYPE demometer_demo_latency_ms summary\n"
                              "demometer_demo_latency_ms{route=\"/a\", quantile=\"0.5\"} 10.5\n"
                              "demometer_demo_latency_ms{route=\"/a\", quantile=\"0.95\"} 20\n"
                              "demometer_demo_latency_ms{route=\"/a\", quantile=\"0.99\"} 30\n");
    free(text);
    ev_store_free(st);
}

static void test_nan_inf(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s = counter("a", "A", "", EV_METRIC_GAUGE, NAN, 1);
    assert_int_equal(ev_store_add(st, &s), 0);
    s = counter("b", "B", "", EV_METRIC_GAUGE, INFINITY, 1);
    assert_int_equal(ev_store_add(st, &s), 0);
    s = counter("c", "C", "MB", EV_METRIC_GAUGE, -INFINITY, 1);
    assert_int_equal(ev_store_add(st, &s), 0);
    /* A meter gauge without a number is dotnet-monitor's "counter ended": dropped. */
    s = meter("M", "ended", "", EV_METRIC_GAUGE, NAN, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 3);
    char *text = render1(st);
    assert_string_equal(text, "# HELP systemruntime_a A\n# TYPE systemruntime_a gauge\n"
                              "systemruntime_a NaN 1\n"
                              "# HELP systemruntime_b B\n# TYPE systemruntime_b gauge\n"
                              "systemruntime_b +Inf 1\n"
                              "# HELP systemruntime_c_bytes C\n# TYPE systemruntime_c_bytes gauge\n"
                              "systemruntime_c_bytes -Inf 1\n");
    free(text);
    ev_store_free(st);
}

static void test_max_series(void **state)
{
    (void)state;
    struct ev_store *st = store_new(3);
    char tags[32];
    for (int i = 0; i < 3; i++) {
        snprintf(tags, sizeof(tags), "i=%d", i);
        struct ev_metric_sample s = meter("M", "x", "", EV_METRIC_GAUGE, i, tags);
        assert_int_equal(ev_store_add(st, &s), 0);
    }
    struct ev_metric_sample s = meter("M", "x", "", EV_METRIC_GAUGE, 9, "i=9");
    assert_int_equal(ev_store_add(st, &s), AGENT_E_TOOBIG);
    /* Updating a known series is still fine at the cap. */
    s = meter("M", "x", "", EV_METRIC_GAUGE, 7, "i=1");
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 3);
    ev_store_clear(st);
    assert_int_equal(ev_store_add(st, &s), 0);
    assert_int_equal(ev_store_series(st), 1);
    ev_store_free(st);

    /* Many series: the hash index grows and still finds every one. */
    st = store_new(5000);
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 5000; i++) {
            snprintf(tags, sizeof(tags), "i=%d", i);
            s = meter("M", "x", "", EV_METRIC_GAUGE, i + round, tags);
            assert_int_equal(ev_store_add(st, &s), 0);
        }
    }
    assert_int_equal(ev_store_series(st), 5000);
    s = meter("M", "x", "", EV_METRIC_GAUGE, 0, "i=x");
    assert_int_equal(ev_store_add(st, &s), AGENT_E_TOOBIG);
    ev_store_free(st);
}

/* Long strings are cut at EV_NAME_MAX bytes with a marker, never inside a UTF-8 sequence. */
static void test_name_cut(void **state)
{
    (void)state;
    char out[EV_TAGS_MAX + sizeof(EV_CUT_MARKER)];
    const char *shortname = "cpu-usage";
    assert_ptr_equal(ev_name_cut(shortname, EV_NAME_MAX, out, sizeof(out)), shortname);
    assert_null(ev_name_cut(NULL, EV_NAME_MAX, out, sizeof(out)));
    char *lng = malloc(30001);
    assert_non_null(lng);
    memset(lng, 'a', 30000);
    lng[30000] = '\0';
    lng[EV_NAME_MAX] = '\0'; /* exactly the limit: kept whole */
    assert_ptr_equal(ev_name_cut(lng, EV_NAME_MAX, out, sizeof(out)), lng);
    lng[EV_NAME_MAX] = 'a';
    const char *c = ev_name_cut(lng, EV_NAME_MAX, out, sizeof(out));
    assert_ptr_equal(c, out);
    assert_int_equal(strlen(c), EV_NAME_MAX + strlen(EV_CUT_MARKER));
    assert_string_equal(c + EV_NAME_MAX, "...[cut]");
    assert_int_equal(strspn(c, "a"), EV_NAME_MAX);
    /* A two-byte "é" across the limit: the cut goes before it. */
    memcpy(lng + EV_NAME_MAX - 1, "\xc3\xa9", 2);
    c = ev_name_cut(lng, EV_NAME_MAX, out, sizeof(out));
    assert_int_equal(strlen(c), EV_NAME_MAX - 1 + strlen(EV_CUT_MARKER));
    assert_string_equal(c + EV_NAME_MAX - 1, "...[cut]");
    /* A 4-byte sequence ending exactly at the limit is kept whole. */
    lng[EV_NAME_MAX] = 'a';
    memcpy(lng + EV_NAME_MAX - 4, "\xf0\x9f\x98\x80", 4);
    c = ev_name_cut(lng, EV_NAME_MAX, out, sizeof(out));
    assert_int_equal(strlen(c), EV_NAME_MAX + strlen(EV_CUT_MARKER));
    assert_memory_equal(c + EV_NAME_MAX - 4, "\xf0\x9f\x98\x80...[cut]", 12);
    /* A buffer smaller than the limit asks for: the cut fits it. */
    char small[20];
    c = ev_name_cut(lng, EV_NAME_MAX, small, sizeof(small));
    assert_string_equal(c, "aaaaaaaaaaa...[cut]");
    assert_string_equal(ev_name_cut(lng, EV_NAME_MAX, small, 4), "");
    /* A whole sample: names at 256 bytes, tag lists at 1024, short strings untouched. */
    struct ev_sample_cut buf;
    struct ev_metric_sample in = meter(lng, lng, "ms", EV_METRIC_GAUGE, 1, lng);
    in.meter_tags = "a=b";
    const struct ev_metric_sample *cs = ev_sample_cut(&in, &buf);
    assert_int_equal(strlen(cs->provider), EV_NAME_MAX + strlen(EV_CUT_MARKER));
    assert_int_equal(strlen(cs->name), EV_NAME_MAX + strlen(EV_CUT_MARKER));
    assert_int_equal(strlen(cs->tags), EV_TAGS_MAX + strlen(EV_CUT_MARKER));
    assert_ptr_equal(cs->unit, in.unit);
    assert_ptr_equal(cs->meter_tags, in.meter_tags);
    assert_null(cs->instrument_tags);
    assert_true(cs->value == 1.0 && cs->is_meter);
    free(lng);
}

/* A runtime flooding 30,000-character counter names: each series is cut to a few hundred bytes,
 * all bytes are charged to the store's share, at its cap new series are dropped and counted,
 * known series still update, and freeing the store gives every byte back. */
static void test_byte_budget(void **state)
{
    (void)state;
    membudget_set(0);
    struct mb_share share;
    mb_share_init(&share, "metrics of process 1", 64 * 1024);
    struct ev_store_options opt = {.default_interval = 5, .share = &share};
    struct ev_store *st = NULL;
    assert_int_equal(ev_store_new(&st, &opt), 0);
    size_t len = 30000;
    char *name = malloc(len + 1);
    assert_non_null(name);
    memset(name, 'n', len);
    name[len] = '\0';
    int kept = 0, refused = 0;
    for (int i = 0; i < 1000; i++) {
        char head[16];
        int hn = snprintf(head, sizeof(head), "c%d-", i);
        memcpy(name, head, (size_t)hn);
        struct ev_metric_sample s = counter(name, name, name, EV_METRIC_GAUGE, i, 1);
        int rc = ev_store_add(st, &s);
        if (rc == 0) {
            kept++;
        } else {
            assert_int_equal(rc, AGENT_E_BUDGET);
            refused++;
        }
    }
    assert_true(kept >= 10);
    assert_true(refused > 0);
    assert_int_equal(ev_store_series(st), kept);
    assert_int_equal(ev_store_dropped(st), refused);
    assert_int_equal(atomic_load(&share.used), ev_store_bytes(st));
    assert_true(ev_store_bytes(st) <= 64 * 1024);
    /* Each series is a few KiB at most, not the ~150 KB of its uncut strings. */
    assert_true(ev_store_bytes(st) / (uint64_t)kept < 4096);
    /* At the cap, a kept series still takes its newest value. */
    memset(name, 'n', len);
    memcpy(name, "c0-", 3);
    struct ev_metric_sample s = counter(name, name, name, EV_METRIC_GAUGE, 42, 2);
    assert_int_equal(ev_store_add(st, &s), 0);
    char *text = render1(st);
    assert_non_null(strstr(text, "...[cut]"));
    for (char *line = text; *line != '\0';) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(nl - line < 4096);
        line = nl + 1;
    }
    free(text);
    ev_store_free(st);
    assert_int_equal(atomic_load(&share.used), 0);
    assert_int_equal(membudget_used(), 0);

    /* The total bounds a share without a cap of its own. */
    membudget_set(8 * 1024);
    mb_share_init(&share, "metrics of process 2", 0);
    assert_int_equal(ev_store_new(&st, &opt), 0);
    int n = 0;
    for (n = 0; n < 100; n++) {
        char head[16];
        int hn = snprintf(head, sizeof(head), "d%d-", n);
        memcpy(name, head, (size_t)hn);
        s = counter(name, "", "", EV_METRIC_GAUGE, n, 1);
        if (ev_store_add(st, &s) != 0) {
            break;
        }
    }
    assert_true(n > 0 && n < 100);
    assert_true(membudget_used() <= 8 * 1024);
    ev_store_free(st);
    assert_int_equal(membudget_used(), 0);
    membudget_set(0);
    free(name);
}

static void test_kind_conflicts_and_errors(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s = meter("M", "h", "", EV_METRIC_HISTOGRAM, 0, "");
    s.nquantiles = 1;
    s.quantiles[0] = (struct ev_quantile){0.5, 1};
    assert_int_equal(ev_store_add(st, &s), 0);
    /* Same name as a gauge (another provider spelling): the summary wins. */
    s = meter("m", "h", "", EV_METRIC_GAUGE, 2, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    /* A gauge called <summary>_sum would be read as the summary's sum: dropped. */
    s = meter("M", "h_sum", "", EV_METRIC_GAUGE, 3, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    s = meter("M", "h_counted", "", EV_METRIC_GAUGE, 4, "");
    assert_int_equal(ev_store_add(st, &s), 0);
    char *text = render1(st);
    assert_string_equal(text, "# HELP m_h h\n# TYPE m_h summary\nm_h{quantile=\"0.5\"} 1\n"
                              "# HELP m_h_counted h_counted\n# TYPE m_h_counted gauge\n"
                              "m_h_counted 4 1700000000000\n");
    free(text);

    s.name = NULL;
    assert_int_equal(ev_store_add(st, &s), AGENT_E_INVAL);
    s.name = "x";
    s.kind = (enum ev_metric_kind)7;
    assert_int_equal(ev_store_add(st, &s), AGENT_E_INVAL);

    /* The output cap is honoured. */
    struct ev_prom_target t = {.store = st};
    struct buf out;
    buf_init(&out, 16);
    assert_int_equal(ev_prom_render(&t, 1, &out), AGENT_E_TOOBIG);
    buf_fini(&out);
    /* Nothing to render: nothing written. */
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(NULL, 0, &out), 0);
    assert_int_equal(buf_size(&out), 0);
    buf_fini(&out);
    ev_store_free(st);
    ev_store_free(NULL);
}

/* A meter counter with its running total: dotnet-monitor's rate gauge, and beside it a
 * Prometheus counter <name>_total with the total; a later sample replaces both. */
static void test_counter_totals(void **state)
{
    (void)state;
    struct ev_store *st = store_new(0);
    struct ev_metric_sample s =
        meter("Demo.Meter", "demo.requests", "{request}", EV_METRIC_RATE, 3, "route=/a");
    s.has_total = true;
    s.total = 10;
    assert_int_equal(ev_store_add(st, &s), 0);
    s.value = 2;
    s.total = 12;
    s.timestamp_ms += 1000;
    assert_int_equal(ev_store_add(st, &s), 0);
    struct ev_metric_sample g = meter("Demo.Meter", "demo.temp", "Cel", EV_METRIC_GAUGE, 20, "");
    g.has_total = true; /* only counters get a total family */
    g.total = 99;
    assert_int_equal(ev_store_add(st, &g), 0);
    char *text = render1(st);
    assert_non_null(strstr(text,
                           "# TYPE demometer_demo_requests__request_ gauge\n"
                           "demometer_demo_requests__request_{route=\"/a\"} 2 1700000001000\n"));
    assert_non_null(strstr(text, "# TYPE demometer_demo_requests__request__total counter\n"
                                 "demometer_demo_requests__request__total{route=\"/a\"} 12 "
                                 "1700000001000\n"));
    assert_null(strstr(text, "demometer_demo_temp_Cel_total"));
    free(text);
    ev_store_free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_double_format),
        cmocka_unit_test(test_event_counters),
        cmocka_unit_test(test_meters_help_and_types),
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_label_discard),
        cmocka_unit_test(test_label_collisions),
        cmocka_unit_test(test_two_processes),
        cmocka_unit_test(test_newest_replaces),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_nan_inf),
        cmocka_unit_test(test_max_series),
        cmocka_unit_test(test_kind_conflicts_and_errors),
        cmocka_unit_test(test_name_cut),
        cmocka_unit_test(test_byte_budget),
        cmocka_unit_test(test_counter_totals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
