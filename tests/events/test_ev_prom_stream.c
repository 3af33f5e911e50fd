/* SPDX-License-Identifier: MIT */
/*
 * /metrics never cut (issue 28 item 3), at the writer (events/ev_prom.h): the runtimes' families
 * written in pieces (ev_prom_render_next) are the one-shot text, whole lines only; a hostile
 * runtime with long counter names, sorted first, leaves every other process's series whole (the
 * old 64 KiB buffer lost them); stores that change between two pieces leave the text valid; a
 * capped buffer (a hard budget) gets whole lines or nothing; dotmon's own lines are escaped by the
 * same writer.
 */
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

#define HOSTILE_SERIES 512 /* names cut at EV_NAME_MAX: enough of them for many pieces */
#define HOSTILE_NAME   1000

static struct ev_metric_sample sample(const char *provider, const char *name, bool is_meter,
                                      enum ev_metric_kind kind, double value, const char *tags)
{
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = provider;
    s.name = name;
    s.display_name = is_meter ? "" : name;
    s.unit = is_meter ? "{request}" : "MB";
    s.kind = kind;
    s.is_meter = is_meter;
    s.value = value;
    s.tags = tags;
    s.interval_sec = 5;
    s.timestamp_ms = 1700000000000;
    return s;
}

/* An ordinary runtime: 30 EventCounters, 10 meter counters with totals and two tag sets each,
 * one histogram: 30 + 10 * 2 * 2 + 3 = 73 lines. */
#define ORDINARY_LINES 73

static struct ev_store *ordinary(double seed)
{
    struct ev_store *st = NULL;
    struct ev_store_options o = {.default_interval = 5};
    assert_int_equal(ev_store_new(&st, &o), 0);
    char name[32];
    for (int i = 0; i < 30; i++) {
        snprintf(name, sizeof(name), "counter-%02d", i);
        struct ev_metric_sample s =
            sample("System.Runtime", name, false, EV_METRIC_GAUGE, seed + i, "");
        assert_int_equal(ev_store_add(st, &s), 0);
    }
    for (int i = 0; i < 10; i++) {
        snprintf(name, sizeof(name), "app.requests.%d", i);
        for (int t = 0; t < 2; t++) {
            struct ev_metric_sample s = sample("TestApp.Meter", name, true, EV_METRIC_RATE, seed,
                                               t ? "route=/b" : "route=/a");
            s.has_total = true;
            s.total = seed * 10;
            assert_int_equal(ev_store_add(st, &s), 0);
        }
    }
    struct ev_metric_sample h =
        sample("TestApp.Meter", "app.latency", true, EV_METRIC_HISTOGRAM, 0, "");
    h.nquantiles = 3;
    h.quantiles[0] = (struct ev_quantile){0.5, 1};
    h.quantiles[1] = (struct ev_quantile){0.95, 2};
    h.quantiles[2] = (struct ev_quantile){0.99, 3};
    assert_int_equal(ev_store_add(st, &h), 0);
    return st;
}

/* A hostile runtime: HOSTILE_SERIES counters whose names are HOSTILE_NAME characters, from a
 * provider whose families sort before everyone else's. */
static struct ev_store *hostile(void)
{
    struct ev_store *st = NULL;
    struct ev_store_options o = {.default_interval = 5};
    assert_int_equal(ev_store_new(&st, &o), 0);
    char *name = malloc(HOSTILE_NAME + 1);
    assert_non_null(name);
    memset(name, 'x', HOSTILE_NAME);
    name[HOSTILE_NAME] = '\0';
    for (int i = 0; i < HOSTILE_SERIES; i++) {
        char head[8];
        snprintf(head, sizeof(head), "%04d", i);
        memcpy(name, head, 4);
        struct ev_metric_sample s = sample("A.Hostile", name, false, EV_METRIC_GAUGE, i, "");
        assert_int_equal(ev_store_add(st, &s), 0);
    }
    free(name);
    return st;
}

static const char *const keys[] = {"pid", "uid", "name"};
static const char *const vals[4][3] = {
    {"666", "u-hostile", "Evil"}, {"101", "u1", "A"}, {"102", "u2", "B"}, {"103", "u3", "C"}};

static void targets_of(struct ev_store *const *st, struct ev_prom_target *t)
{
    for (size_t i = 0; i < 4; i++) {
        t[i].store = st[i];
        t[i].labels = (struct ev_prom_labels){.keys = keys, .values = vals[i], .n = 3};
    }
}

/* Sample lines of text labelled pid="pid"; fails on a line that is not whole. */
static size_t lines_of(const char *text, const char *pid)
{
    char want[32];
    snprintf(want, sizeof(want), "pid=\"%s\"", pid);
    size_t n = 0;
    for (const char *p = text; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl); /* every line ends with a newline */
        if (p[0] != '#') {
            const char *hit = strstr(p, want);
            if (hit != NULL && hit < nl) {
                n++;
            }
        }
        p = nl + 1;
    }
    return n;
}

/* Each HELP name once. */
static void assert_help_once(const char *text)
{
    size_t n = 0;
    for (const char *p = strstr(text, "# HELP "); p != NULL; p = strstr(p + 1, "# HELP ")) {
        n++;
    }
    const char **names = calloc(n ? n : 1, sizeof(*names));
    size_t k = 0;
    for (const char *p = strstr(text, "# HELP "); p != NULL; p = strstr(p + 1, "# HELP ")) {
        names[k++] = p + 7;
    }
    for (size_t i = 0; i < k; i++) {
        size_t li = strcspn(names[i], " ");
        for (size_t j = i + 1; j < k; j++) {
            size_t lj = strcspn(names[j], " ");
            assert_false(li == lj && memcmp(names[i], names[j], li) == 0);
        }
    }
    free(names);
}

static void test_hostile_neighbours(void **state)
{
    (void)state;
    struct ev_store *st[4] = {hostile(), ordinary(1), ordinary(2), ordinary(3)};
    struct ev_prom_target t[4];
    targets_of(st, t);

    struct buf whole;
    buf_init(&whole, 0);
    assert_int_equal(ev_prom_render(t, 4, &whole), 0);
    const char *one = buf_cstr(&whole);
    /* Far more than the old 64 KiB buffer, most of it the hostile runtime's, sorted first (its
     * names cut at EV_NAME_MAX bytes by the store, each in a HELP, a TYPE and a sample line). */
    assert_true(buf_size(&whole) > 3 * HOSTILE_SERIES * EV_NAME_MAX);
    assert_true(buf_size(&whole) > 65536);
    assert_true(strstr(one, "ahostile_") < strstr(one, "systemruntime_"));
    assert_int_equal(lines_of(one, "666"), HOSTILE_SERIES);
    for (size_t i = 1; i < 4; i++) {
        assert_int_equal(lines_of(one, vals[i][0]), ORDINARY_LINES);
    }

    /* In pieces: each piece whole lines, the pieces together the same text. */
    struct ev_prom_cursor c;
    ev_prom_cursor_init(&c);
    struct buf all, piece;
    buf_init(&all, 0);
    buf_init(&piece, 0);
    size_t pieces = 0;
    while (!c.done) {
        buf_reset(&piece);
        assert_int_equal(ev_prom_render_next(t, 4, &c, 4096, &piece), 0);
        assert_true(buf_size(&piece) > 0);
        assert_int_equal(buf_data(&piece)[buf_size(&piece) - 1], '\n');
        assert_int_equal(buf_append(&all, buf_data(&piece), buf_size(&piece)), 0);
        pieces++;
    }
    assert_true(pieces > 10);
    assert_int_equal(buf_size(&all), buf_size(&whole));
    assert_memory_equal(buf_data(&all), buf_data(&whole), buf_size(&whole));
    /* Done stays done. */
    buf_reset(&piece);
    assert_int_equal(ev_prom_render_next(t, 4, &c, 4096, &piece), 0);
    assert_int_equal(buf_size(&piece), 0);

    ev_prom_cursor_fini(&c);
    buf_fini(&all);
    buf_fini(&piece);
    buf_fini(&whole);
    for (size_t i = 0; i < 4; i++) {
        ev_store_free(st[i]);
    }
}

static void test_changes_between_pieces(void **state)
{
    (void)state;
    struct ev_store *st[4] = {hostile(), ordinary(1), ordinary(2), ordinary(3)};
    struct ev_prom_target t[4];
    targets_of(st, t);
    struct ev_prom_cursor c;
    ev_prom_cursor_init(&c);
    struct buf all;
    buf_init(&all, 0);
    /* The first piece: part of the hostile families. */
    assert_int_equal(ev_prom_render_next(t, 4, &c, 4096, &all), 0);
    assert_false(c.done);
    assert_non_null(c.after);

    /* Meanwhile: every ordinary series replaced (new blocks), a series in a family already
     * written and one in a family still to come, the hostile runtime gone. */
    for (size_t i = 1; i < 4; i++) {
        ev_store_free(st[i]);
        st[i] = ordinary(10.0 * (double)i);
    }
    struct ev_metric_sample early = sample("A.Hostile", "0000", false, EV_METRIC_GAUGE, 1, "");
    assert_int_equal(ev_store_add(st[1], &early), 0);
    struct ev_metric_sample late = sample("Zz.Late", "late", false, EV_METRIC_GAUGE, 42, "");
    assert_int_equal(ev_store_add(st[2], &late), 0);
    targets_of(st, t);
    while (!c.done) {
        assert_int_equal(ev_prom_render_next(t + 1, 3, &c, 4096, &all), 0);
    }
    const char *text = buf_cstr(&all);
    assert_help_once(text);
    /* pid 101's early series is in a family already written: it waits for the next scrape. */
    assert_non_null(
        strstr(text, "zzlate_late_bytes{pid=\"102\", uid=\"u2\", name=\"B\"} 42000000 "));
    for (size_t i = 1; i < 4; i++) {
        assert_int_equal(lines_of(text, vals[i][0]), ORDINARY_LINES + (i == 2 ? 1 : 0));
    }
    assert_int_equal(text[buf_size(&all) - 1], '\n');
    ev_prom_cursor_fini(&c);
    buf_fini(&all);
    for (size_t i = 0; i < 4; i++) {
        ev_store_free(st[i]);
    }
}

/* Four runtimes with 300 series each of one counter (a tag per route): one family of 1200
 * lines, about 276 KB. */
static void big_family(struct ev_store **st, struct ev_prom_target *t)
{
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(ev_store_new(&st[i], NULL), 0);
        for (int r = 0; r < 300; r++) {
            char tags[200]; /* a long route: lines of about 230 bytes */
            snprintf(tags, sizeof(tags), "route=/r%03d%0150d", r, 0);
            struct ev_metric_sample s =
                sample("M", "requests", true, EV_METRIC_RATE, (double)r, tags);
            assert_int_equal(ev_store_add(st[i], &s), 0);
        }
    }
    targets_of(st, t);
}

/* One family bigger than a piece goes on in the next pieces: HELP and TYPE once, each label set
 * once, each piece about the size asked. */
static void test_family_in_pieces(void **state)
{
    (void)state;
    struct ev_store *st[4];
    struct ev_prom_target t[4];
    big_family(st, t);
    struct buf whole;
    buf_init(&whole, 0);
    assert_int_equal(ev_prom_render(t, 4, &whole), 0);
    assert_int_equal(lines_of(buf_cstr(&whole), "103"), 300);

    struct ev_prom_cursor c;
    ev_prom_cursor_init(&c);
    struct buf all, piece;
    buf_init(&all, 0);
    buf_init(&piece, 0);
    size_t pieces = 0;
    const size_t asked = 64 * 1200; /* 64 bytes per series held */
    while (!c.done) {
        buf_reset(&piece);
        assert_int_equal(ev_prom_render_next(t, 4, &c, 1024, &piece), 0);
        assert_true(buf_size(&piece) > 0 && buf_size(&piece) < asked + 200);
        assert_int_equal(buf_data(&piece)[buf_size(&piece) - 1], '\n');
        assert_int_equal(buf_append(&all, buf_data(&piece), buf_size(&piece)), 0);
        pieces++;
    }
    assert_true(buf_size(&whole) > 2 * asked);
    assert_true(pieces >= 3);
    assert_int_equal(buf_size(&all), buf_size(&whole));
    assert_memory_equal(buf_data(&all), buf_data(&whole), buf_size(&whole));
    ev_prom_cursor_fini(&c);
    buf_fini(&all);
    buf_fini(&piece);
    buf_fini(&whole);
    for (size_t i = 0; i < 4; i++) {
        ev_store_free(st[i]);
    }
}

/* A family open across pieces keeps its TYPE: a summary of the same name that arrives meanwhile
 * is not mixed in; a label set already written is not written again; one after the cursor is. */
static void test_open_family_changes(void **state)
{
    (void)state;
    struct ev_store *st[4];
    struct ev_prom_target t[4];
    big_family(st, t);
    struct ev_prom_cursor c;
    ev_prom_cursor_init(&c);
    struct buf all;
    buf_init(&all, 0);
    assert_int_equal(ev_prom_render_next(t, 4, &c, 1024, &all), 0);
    assert_non_null(c.open);
    struct ev_metric_sample h = sample("M", "requests", true, EV_METRIC_HISTOGRAM, 0, "");
    h.nquantiles = 1;
    h.quantiles[0] = (struct ev_quantile){0.5, 1};
    assert_int_equal(ev_store_add(st[0], &h), 0);
    char route0[200];
    snprintf(route0, sizeof(route0), "route=/r%03d%0150d", 0, 0);
    struct ev_metric_sample again = sample("M", "requests", true, EV_METRIC_RATE, 9, route0);
    again.timestamp_ms += 1000; /* newer: it replaces pid 666's series, already written */
    assert_int_equal(ev_store_add(st[0], &again), 0);
    struct ev_metric_sample late = sample("M", "requests", true, EV_METRIC_RATE, 7, "route=/zzz");
    assert_int_equal(ev_store_add(st[1], &late), 0);
    while (!c.done) {
        assert_int_equal(ev_prom_render_next(t, 4, &c, 1024, &all), 0);
    }
    const char *text = buf_cstr(&all);
    assert_help_once(text);
    assert_non_null(strstr(text, "# TYPE m_requests__request_ gauge\n"));
    assert_null(strstr(text, "summary"));
    assert_null(strstr(text, "quantile"));
    assert_int_equal(ev_store_series(st[0]), 301); /* 300 replaced in place, and the summary */
    assert_int_equal(lines_of(text, "666"), 300);
    assert_int_equal(lines_of(text, "101"), 301);
    assert_non_null(strstr(text, "{route=\"/zzz\", pid=\"101\", uid=\"u1\", name=\"A\"} 7 "));
    ev_prom_cursor_fini(&c);
    buf_fini(&all);
    for (size_t i = 0; i < 4; i++) {
        ev_store_free(st[i]);
    }
}

/* A capped buffer (a hard budget): whole families or nothing, the cursor kept for a retry. */
static void test_budget_whole_lines(void **state)
{
    (void)state;
    struct ev_store *st[4] = {hostile(), ordinary(1), ordinary(2), ordinary(3)};
    struct ev_prom_target t[4];
    targets_of(st, t);
    struct ev_prom_cursor c;
    ev_prom_cursor_init(&c);
    struct buf out;
    buf_init(&out, 64 * 1024);
    assert_int_equal(ev_prom_render_next(t, 4, &c, 4096, &out), 0);
    size_t size = buf_size(&out);
    char *after = c.after != NULL ? strdup(c.after) : NULL;
    assert_non_null(after);
    int rc = 0;
    while (rc == 0) {
        size = buf_size(&out);
        free(after);
        after = strdup(c.after);
        rc = ev_prom_render_next(t, 4, &c, 4096, &out);
    }
    assert_int_equal(rc, AGENT_E_TOOBIG);
    assert_int_equal(buf_size(&out), size); /* back to its size: no part of a line */
    assert_string_equal(c.after, after);
    assert_int_equal(buf_data(&out)[buf_size(&out) - 1], '\n');
    free(after);
    /* With room again the same cursor goes on to the end. */
    buf_reset(&out);
    while (!c.done) {
        assert_int_equal(ev_prom_render_next(t, 4, &c, 4096, &out), 0);
        assert_int_equal(buf_data(&out)[buf_size(&out) - 1], '\n');
        buf_reset(&out);
    }
    ev_prom_cursor_fini(&c);
    buf_fini(&out);
    for (size_t i = 0; i < 4; i++) {
        ev_store_free(st[i]);
    }
}

/* A runtime cannot write one of dotmon's families (a second HELP would make the text invalid). */
static void test_reserved_prefix(void **state)
{
    (void)state;
    struct ev_store *st = NULL;
    assert_int_equal(ev_store_new(&st, NULL), 0);
    struct ev_metric_sample s =
        sample("dotmon", "process_metrics_up", true, EV_METRIC_GAUGE, 1, "");
    s.unit = "";
    assert_int_equal(ev_store_add(st, &s), 0);
    s.provider = "dotmonx";
    assert_int_equal(ev_store_add(st, &s), 0);
    struct ev_prom_target t = {.store = st};
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_render(&t, 1, &out), 0);
    assert_string_equal(buf_cstr(&out), "# HELP dotmonx_process_metrics_up process_metrics_up\n"
                                        "# TYPE dotmonx_process_metrics_up gauge\n"
                                        "dotmonx_process_metrics_up 1 1700000000000\n");
    buf_fini(&out);
    ev_store_free(st);
}

/* dotmon's own lines: the same escapes as the runtimes'. */
static void test_own_families(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_family(&out, "dotmon_x", "gauge", "a \\ b\nc"), 0);
    const char *k[] = {"pid", "name"};
    const char *v[] = {"7", "q\"\\\n\xff"};
    struct ev_prom_labels l = {.keys = k, .values = v, .n = 2};
    assert_int_equal(ev_prom_sample_u64(&out, "dotmon_x", &l, UINT64_MAX), 0);
    assert_int_equal(ev_prom_sample_u64(&out, "dotmon_x", NULL, 0), 0);
    assert_int_equal(ev_prom_sample_double(&out, "dotmon_x", NULL, 0.5), 0);
    assert_string_equal(buf_cstr(&out), "# HELP dotmon_x a \\\\ b\\nc\n"
                                        "# TYPE dotmon_x gauge\n"
                                        "dotmon_x{pid=\"7\", name=\"q\\\"\\\\\\n\xef\xbf\xbd\"} "
                                        "18446744073709551615\n"
                                        "dotmon_x 0\n"
                                        "dotmon_x 0.5\n");
    /* A capped buffer: nothing of the line that does not fit. */
    struct buf small;
    buf_init(&small, 24);
    assert_int_equal(ev_prom_sample_u64(&small, "dotmon_x", NULL, 1), 0);
    assert_int_equal(ev_prom_sample_u64(&small, "dotmon_x", &l, 1), AGENT_E_TOOBIG);
    assert_string_equal(buf_cstr(&small), "dotmon_x 1\n");
    buf_fini(&small);
    buf_fini(&out);
}

/* dotmon's own histograms: each observation in the first bucket it fits (a bound is inclusive),
 * cumulative buckets, +Inf, sum and count; a capped buffer gets the family whole or nothing. */
static void test_histogram(void **state)
{
    (void)state;
    static const uint64_t le[] = {1000000, 10000000};
    static const char *const le_text[] = {"0.001", "0.01"};
    struct ev_prom_hist h = {.le_ns = le, .le_text = le_text, .n = 2};
    ev_prom_hist_add(&h, 500000);
    ev_prom_hist_add(&h, 1000000);
    ev_prom_hist_add(&h, 2000000);
    ev_prom_hist_add(&h, 1500000000);
    struct buf out;
    buf_init(&out, 0);
    assert_int_equal(ev_prom_histogram(&out, "dotmon_h_seconds", "Some \\ help", &h), 0);
    assert_string_equal(buf_cstr(&out), "# HELP dotmon_h_seconds Some \\\\ help\n"
                                        "# TYPE dotmon_h_seconds histogram\n"
                                        "dotmon_h_seconds_bucket{le=\"0.001\"} 2\n"
                                        "dotmon_h_seconds_bucket{le=\"0.01\"} 3\n"
                                        "dotmon_h_seconds_bucket{le=\"+Inf\"} 4\n"
                                        "dotmon_h_seconds_sum 1.503500000\n"
                                        "dotmon_h_seconds_count 4\n");
    buf_fini(&out);
    /* A capped buffer: the family whole or nothing. */
    buf_init(&out, 200);
    assert_int_equal(ev_prom_histogram(&out, "dotmon_h_seconds", "help", &h), AGENT_E_TOOBIG);
    assert_int_equal(buf_size(&out), 0);
    buf_fini(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_neighbours), cmocka_unit_test(test_changes_between_pieces),
        cmocka_unit_test(test_family_in_pieces),   cmocka_unit_test(test_open_family_changes),
        cmocka_unit_test(test_budget_whole_lines), cmocka_unit_test(test_reserved_prefix),
        cmocka_unit_test(test_own_families),       cmocka_unit_test(test_histogram),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
