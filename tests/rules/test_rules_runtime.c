/* SPDX-License-Identifier: MIT */
/*
 * dotmon's runtime triggers (rules/rules.h): GCPause, GCCount and ExceptionCount fed synthetic
 * runtime events (pause pairing, lost and foreign events, the sliding window, filters); the
 * runtime events read from payloads written here byte by byte after docs/events.md §5's layouts
 * and decoded by events/ev_native; the session each trigger asks for; a rule instance firing.
 */
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
#include "ev_native.h"
#include "rules.h"
#include "rules_test_util.h"

#define MS  10000LL /* ticks */
#define SEC (1000 * MS)

static bool feed(struct rules_engine *e, enum rules_runtime_kind kind, int64_t ts, uint32_t reason)
{
    struct rules_runtime_event ev = {.kind = kind, .timestamp_ticks = ts, .reason = reason};
    return rules_engine_on_runtime(e, &ev);
}

/* A GC suspension of reason ForGC from `from` to `to` (ticks): true when the trigger fired. */
static bool pause(struct rules_engine *e, int64_t from, int64_t to)
{
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, from, RULES_SUSPEND_FOR_GC));
    return feed(e, RULES_RUNTIME_RESTART_END, to, 0);
}

static bool gc(struct rules_engine *e, int64_t ts, uint32_t depth, uint32_t reason)
{
    struct rules_runtime_event ev = {
        .kind = RULES_RUNTIME_GC_START, .timestamp_ticks = ts, .depth = depth, .reason = reason};
    return rules_engine_on_runtime(e, &ev);
}

static bool thrown(struct rules_engine *e, int64_t ts, const char *type)
{
    struct rules_runtime_event ev = {
        .kind = RULES_RUNTIME_EXCEPTION, .timestamp_ticks = ts, .exception_type = type};
    return rules_engine_on_runtime(e, &ev);
}

/* ---- GCPause ---- */

static void test_rules_gc_pause_threshold(void **state)
{
    (void)state;
    const struct rules_trigger *t = trigger("GCPause", "ThresholdMs=100");
    assert_int_equal(t->threshold_ms, 100);
    assert_int_equal(t->count, 1);
    assert_int_equal(t->window_ticks, 60 * SEC);
    struct rules_engine *e = engine(t, 5);
    assert_false(pause(e, 10 * SEC, 10 * SEC + 50 * MS));
    /* Exactly the threshold is not longer than it. */
    assert_false(pause(e, 11 * SEC, 11 * SEC + 100 * MS));
    assert_true(pause(e, 12 * SEC, 12 * SEC + 100 * MS + 1));
    rules_engine_reset(e);
    /* A background GC's preparation (ForGCPrep) is a GC pause too. */
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 20 * SEC, RULES_SUSPEND_FOR_GC_PREP));
    assert_true(feed(e, RULES_RUNTIME_RESTART_END, 20 * SEC + 300 * MS, 0));
    /* GCStart and exceptions say nothing to it. */
    rules_engine_reset(e);
    assert_false(gc(e, 30 * SEC, 2, 1));
    assert_false(thrown(e, 30 * SEC, "System.Exception"));
    rules_engine_free(e);
}

/* Begins and restarts that do not pair: nothing is counted that was not measured. */
static void test_rules_gc_pause_lost_events(void **state)
{
    (void)state;
    struct rules_engine *e = engine(trigger("GCPause", "ThresholdMs=100"), 5);
    /* A restart without a begin (the session began during the pause). */
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 5 * SEC, 0));
    /* A second begin replaces the first, whose restart was lost: 50 ms, not 1.05 s. */
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 6 * SEC, RULES_SUSPEND_FOR_GC));
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 7 * SEC, RULES_SUSPEND_FOR_GC));
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 7 * SEC + 50 * MS, 0));
    /* The restart closed it: a second restart pairs with nothing. */
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 9 * SEC, 0));
    /* Another suspension (for the debugger) closes an open GC suspension: its restart is its own.
     */
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 10 * SEC, RULES_SUSPEND_FOR_GC));
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 10 * SEC + 10 * MS, 5));
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 11 * SEC, 0));
    /* A new session forgets the suspension of the one before. */
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 12 * SEC, RULES_SUSPEND_FOR_GC));
    assert_false(feed(e, RULES_RUNTIME_SESSION_START, 0, 0));
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 15 * SEC, 0));
    /* A restart before its begin (clocks that went back) is no pause. */
    assert_false(pause(e, 20 * SEC, 19 * SEC));
    /* And a reset forgets an open suspension too. */
    assert_false(feed(e, RULES_RUNTIME_SUSPEND_BEGIN, 30 * SEC, RULES_SUSPEND_FOR_GC));
    rules_engine_reset(e);
    assert_false(feed(e, RULES_RUNTIME_RESTART_END, 31 * SEC, 0));
    assert_true(pause(e, 40 * SEC, 41 * SEC));
    rules_engine_free(e);
}

/* Count long pauses within SlidingWindowDuration (the ASP.NET triggers' window). */
static void test_rules_gc_pause_window(void **state)
{
    (void)state;
    struct rules_engine *e =
        engine(trigger("GCPause", "ThresholdMs=200\nCount=2\nSlidingWindowDuration=00:00:10"), 5);
    assert_false(pause(e, 0, 250 * MS));
    assert_false(pause(e, 5 * SEC, 5 * SEC + 100 * MS));   /* short: not counted */
    assert_false(pause(e, 20 * SEC, 20 * SEC + 300 * MS)); /* the first has left the window */
    assert_true(pause(e, 25 * SEC, 25 * SEC + 300 * MS));
    rules_engine_free(e);
}

/* ---- GCCount ---- */

static void test_rules_gc_count(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("GCCount", "Count=3\nReasons:0=Induced\nReasons:1=inducednotforced\n"
                           "SlidingWindowDuration=00:00:30");
    assert_int_equal(t->generation, 2);
    assert_int_equal(t->reason_mask, (1u << 1) | (1u << 7));
    struct rules_engine *e = engine(t, 5);
    assert_false(gc(e, 1 * SEC, 2, 1));
    assert_false(gc(e, 2 * SEC, 1, 1)); /* gen1: not counted */
    assert_false(gc(e, 3 * SEC, 2, 0)); /* AllocSmall: not counted */
    assert_false(gc(e, 4 * SEC, 2, 7));
    /* Suspensions and exceptions are not GCs. */
    assert_false(pause(e, 5 * SEC, 6 * SEC));
    assert_false(thrown(e, 6 * SEC, "X"));
    assert_true(gc(e, 7 * SEC, 2, 1));
    rules_engine_reset(e);
    /* The first has left the 30 s window when the third comes. */
    assert_false(gc(e, 100 * SEC, 2, 1));
    assert_false(gc(e, 110 * SEC, 2, 1));
    assert_false(gc(e, 135 * SEC, 2, 1));
    assert_true(gc(e, 136 * SEC, 2, 1));
    rules_engine_free(e);

    /* Generation 0 and no Reasons: every GC; a reason past the names counts too. */
    t = trigger("GCCount", "Count=2\nGeneration=0");
    assert_int_equal(t->reason_mask, 0);
    e = engine(t, 5);
    assert_false(gc(e, 1 * SEC, 0, 0));
    assert_true(gc(e, 2 * SEC, 1, 40));
    rules_engine_free(e);

    /* A single Reasons value, by number. */
    t = trigger("GCCount", "Count=1\nGeneration=1\nReasons=4");
    assert_int_equal(t->reason_mask, 1u << 4);
    e = engine(t, 5);
    assert_false(gc(e, 1 * SEC, 0, 4));
    assert_false(gc(e, 1 * SEC, 2, 40));
    assert_true(gc(e, 2 * SEC, 1, 4));
    rules_engine_free(e);
}

/* ---- ExceptionCount ---- */

static void test_rules_exception_count(void **state)
{
    (void)state;
    const struct rules_trigger *t =
        trigger("ExceptionCount", "Count=2\nExceptionTypes:0=System.ArgumentException\n"
                                  "ExceptionTypes:1=MyApp.Errors+Nested");
    assert_int_equal(t->n_exception_types, 2);
    struct rules_engine *e = engine(t, 5);
    for (int i = 0; i < 5; i++) {
        assert_false(thrown(e, i * SEC, "System.InvalidOperationException"));
    }
    /* Exact, ordinal: no other case, no short name, no derived type. */
    assert_false(thrown(e, 5 * SEC, "system.argumentexception"));
    assert_false(thrown(e, 5 * SEC, "ArgumentException"));
    assert_false(thrown(e, 5 * SEC, "System.ArgumentNullException"));
    assert_false(thrown(e, 5 * SEC, ""));
    assert_false(gc(e, 5 * SEC, 2, 1));
    assert_false(thrown(e, 6 * SEC, "System.ArgumentException"));
    assert_true(thrown(e, 7 * SEC, "MyApp.Errors+Nested"));
    rules_engine_free(e);

    /* No ExceptionTypes: every exception, a V0 event without a type included. */
    e = engine(trigger("ExceptionCount", "Count=3"), 5);
    assert_false(thrown(e, 1 * SEC, "A"));
    assert_false(thrown(e, 1 * SEC, ""));
    assert_true(thrown(e, 1 * SEC, NULL));
    rules_engine_free(e);
}

/* Runtime events reach only runtime triggers, and runtime triggers take nothing else. */
static void test_rules_runtime_sources(void **state)
{
    (void)state;
    const struct rules_trigger *t = trigger("AspNetRequestCount", "RequestCount=1");
    assert_int_equal(rules_trigger_source(t), RULES_SOURCE_HTTP);
    struct rules_engine *e = engine(t, 5);
    assert_false(thrown(e, 0, "X"));
    rules_engine_free(e);
    t = trigger("CPUUsage", "");
    assert_int_equal(rules_trigger_source(t), RULES_SOURCE_METRICS);
    e = engine(t, 5);
    assert_false(gc(e, 0, 2, 1));
    rules_engine_free(e);
    t = trigger("ExceptionCount", "Count=1");
    assert_int_equal(rules_trigger_source(t), RULES_SOURCE_RUNTIME);
    e = engine(t, 5);
    struct rules_request_event he = {.kind = RULES_REQUEST_START, .path = "/"};
    assert_false(rules_engine_on_request(e, &he));
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = "System.Runtime";
    s.name = "cpu-usage";
    s.value = 99;
    assert_false(rules_engine_on_metric(e, &s));
    rules_engine_free(e);
    assert_int_equal(
        rules_trigger_source(
            &load_strict("CollectionRules:R:Trigger:Type=Startup\n")->rules[0].trigger),
        RULES_SOURCE_NONE);
}

/* ---- events from payloads ---- */

struct payload {
    uint8_t b[256];
    size_t n;
};

static void u16le(struct payload *p, uint16_t v)
{
    p->b[p->n++] = (uint8_t)v;
    p->b[p->n++] = (uint8_t)(v >> 8);
}

static void u32le(struct payload *p, uint32_t v)
{
    u16le(p, (uint16_t)v);
    u16le(p, (uint16_t)(v >> 16));
}

static void u64le(struct payload *p, uint64_t v)
{
    u32le(p, (uint32_t)v);
    u32le(p, (uint32_t)(v >> 32));
}

/* Decodes p as (Microsoft-Windows-DotNETRuntime, id, version) and reads it. */
static int read_event(const struct payload *p, uint32_t id, uint32_t version, char *scratch,
                      size_t cap, struct rules_runtime_event *ev)
{
    const struct ev_native_event *e =
        ev_native_lookup("Microsoft-Windows-DotNETRuntime", id, version);
    assert_non_null(e);
    struct ev_native_record rec;
    assert_int_equal(ev_native_decode(&rec, e, p->b, p->n, 8), 0);
    return rules_runtime_event_from_native(&rec, 777, scratch, cap, ev);
}

static void test_rules_runtime_from_native(void **state)
{
    (void)state;
    char scratch[128];
    struct rules_runtime_event ev;
    /* GCStart_V2: Count, Depth, Reason, Type, ClrInstanceID, ClientSequenceNumber (26 B). */
    struct payload p = {.n = 0};
    u32le(&p, 17);
    u32le(&p, 2);
    u32le(&p, 1);
    u32le(&p, 0);
    u16le(&p, 0);
    u64le(&p, 0);
    assert_int_equal(p.n, 26);
    assert_int_equal(read_event(&p, 1, 2, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_RUNTIME_GC_START);
    assert_int_equal(ev.timestamp_ticks, 777);
    assert_int_equal(ev.depth, 2);
    assert_int_equal(ev.reason, 1);
    /* GCStart_V1: the first 18 bytes. */
    p.n = 18;
    assert_int_equal(read_event(&p, 1, 1, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.depth, 2);
    /* GCSuspendEEBegin_V1: Reason, Count, ClrInstanceID. */
    p.n = 0;
    u32le(&p, 6);
    u32le(&p, 17);
    u16le(&p, 0);
    assert_int_equal(read_event(&p, 9, 1, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_RUNTIME_SUSPEND_BEGIN);
    assert_int_equal(ev.reason, RULES_SUSPEND_FOR_GC_PREP);
    /* GCRestartEEEnd_V1: ClrInstanceID. */
    p.n = 0;
    u16le(&p, 0);
    assert_int_equal(read_event(&p, 3, 1, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_RUNTIME_RESTART_END);
    /* GCEnd_V1: not a trigger's event. */
    p.n = 0;
    u32le(&p, 17);
    u32le(&p, 2);
    u16le(&p, 0);
    assert_int_equal(read_event(&p, 2, 1, scratch, sizeof(scratch), &ev), AGENT_E_NOTFOUND);
    /* ExceptionThrown_V1: ExceptionType, ExceptionMessage, ExceptionEIP, ExceptionHRESULT,
     * ExceptionFlags, ClrInstanceID. */
    p.n = put_wstr(p.b, "System.ArgumentException");
    p.n += put_wstr(p.b + p.n, "bad argument");
    u64le(&p, 0x7f0012345678);
    u32le(&p, 0x80070057);
    u16le(&p, 0x10);
    u16le(&p, 0);
    assert_int_equal(read_event(&p, 80, 1, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_RUNTIME_EXCEPTION);
    assert_string_equal(ev.exception_type, "System.ArgumentException");
    assert_int_equal(read_event(&p, 80, 1, scratch, 8, &ev), AGENT_E_NOSPACE);
    /* ExceptionThrown_V0 has no fields: an exception of no known type. */
    p.n = 0;
    assert_int_equal(read_event(&p, 80, 0, scratch, sizeof(scratch), &ev), 0);
    assert_int_equal(ev.kind, RULES_RUNTIME_EXCEPTION);
    assert_string_equal(ev.exception_type, "");
    /* Another provider's event with a trigger event's id. */
    static const struct ev_native_event other = {
        .name = "Other", .provider = EV_NATIVE_PRIVATE, .version = 0, .id = 1};
    struct ev_native_record rec = {.event = &other};
    assert_int_equal(rules_runtime_event_from_native(&rec, 0, scratch, sizeof(scratch), &ev),
                     AGENT_E_NOTFOUND);
}

/* ---- sessions, instances ---- */

static void test_rules_runtime_sessions(void **state)
{
    (void)state;
    struct rules_session s;
    struct rules_session_options o = {.counter_interval_s = 5};
    static const struct {
        const char *type, *settings;
        uint64_t keywords;
    } cases[] = {{"GCPause", "ThresholdMs=1", 0x1},
                 {"GCCount", "Count=1", 0x1},
                 {"ExceptionCount", "Count=1", 0x8000}};
    for (size_t k = 0; k < 3; k++) {
        const struct rules_trigger *t = trigger(cases[k].type, cases[k].settings);
        assert_null(rules_trigger_interval_provider(t));
        assert_int_equal(rules_trigger_session(t, &o, &s), 0);
        assert_int_equal(s.nproviders, 1);
        assert_string_equal(s.providers[0].name, "Microsoft-Windows-DotNETRuntime");
        assert_int_equal(s.providers[0].keywords, cases[k].keywords);
        assert_int_equal(s.providers[0].level, 4);
        assert_int_equal(s.providers[0].nargs, 0);
        assert_false(s.request_rundown);
    }
    const struct rules_trigger *t = trigger("ExceptionCount", "Count=1");
    assert_int_equal(rules_trigger_session(t, &o, &s), 0);
    cJSON *j = rules_session_json(&s);
    char *text = cJSON_PrintUnformatted(j);
    assert_string_equal(text,
                        "{\"Providers\":[{\"Name\":\"Microsoft-Windows-DotNETRuntime\","
                        "\"Keywords\":\"0x8000\",\"EventLevel\":\"Informational\","
                        "\"Arguments\":{}}],\"RequestRundown\":false,\"BufferSizeInMB\":256}");
    free(text);
    cJSON_Delete(j);
}

/* A rule with a runtime trigger: it fires, its actions run, it takes events again after. */
static void test_rules_runtime_inst(void **state)
{
    (void)state;
    const struct rules_config *c =
        load_strict("CollectionRules:R:Trigger:Type=GCPause\n"
                    "CollectionRules:R:Trigger:Settings:ThresholdMs=50\n"
                    "CollectionRules:R:Actions:0:Type=Execute\n"
                    "CollectionRules:R:Actions:0:Settings:Path=/bin/true\n");
    struct rules_process p = {.pid = 42, .name = "app"};
    struct rules_inst *i = NULL;
    assert_int_equal(rules_inst_new(&c->rules[0], &p, 5, 1000, &i), 0);
    assert_true(rules_inst_trigger_active(i));
    struct rules_runtime_event ev = {.kind = RULES_RUNTIME_SUSPEND_BEGIN,
                                     .timestamp_ticks = 10 * SEC,
                                     .reason = RULES_SUSPEND_FOR_GC};
    assert_int_equal(rules_inst_on_runtime(i, &ev, 2000), 0);
    ev.kind = RULES_RUNTIME_RESTART_END;
    ev.timestamp_ticks += 60 * MS;
    assert_int_equal(rules_inst_on_runtime(i, &ev, 2000), 1);
    assert_int_equal(rules_inst_gc_pause_ticks(i), 60 * MS);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_false(rules_inst_trigger_active(i));
    /* While the actions run, events are not taken. */
    assert_int_equal(rules_inst_on_runtime(i, &ev, 2001), 0);
    struct rules_step st;
    assert_int_equal(rules_inst_next_step(i, &st), 1);
    assert_int_equal(rules_inst_action_done(i, st.index, true, NULL, 0, 2100), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    assert_true(rules_inst_trigger_active(i));
    rules_inst_free(i);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rules_gc_pause_threshold, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_gc_pause_lost_events, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_gc_pause_window, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_gc_count, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_exception_count, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_runtime_sources, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_runtime_from_native, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_runtime_sessions, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_runtime_inst, cfg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
