/* SPDX-License-Identifier: MIT */
/*
 * A rule applied to a process (rules/rules.h): the states and their reasons, the action count
 * limits (throttled, running again, finished), RuleDuration, the action list as ordered steps
 * with token substitution and outputs, and the /collectionrules JSON in dotnet-monitor's shape.
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
#include "rules.h"
#include "rules_test_util.h"

static const char running[] =
    "This collection rule is active and waiting for its triggering conditions to be satisfied.";
static const char executing[] = "This collection rule has had its triggering conditions satisfied "
                                "and is currently executing its action list.";
static const char throttled[] = "This collection rule is temporarily throttled because the "
                                "ActionCountLimit has been reached within the "
                                "ActionCountSlidingWindowDuration.";

static const struct rules_process proc = {.pid = 4242,
                                          .name = "myapp",
                                          .command_line = "dotnet myapp.dll --port 80",
                                          .runtime_id = "cd4da319-fa9e-4987-ac4e-e57b2aac248b",
                                          .hostname = "node-1"};

static const struct rules_rule *rule(const char *lines)
{
    return &load_strict(lines)->rules[0];
}

static struct rules_inst *inst(const struct rules_rule *r, int64_t now)
{
    struct rules_inst *i = NULL;
    assert_int_equal(rules_inst_new(r, &proc, 5, now, &i), 0);
    return i;
}

static char *json_text(cJSON *j)
{
    assert_non_null(j);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    assert_non_null(s);
    return s;
}

static void expect_detail(const struct rules_inst *i, int64_t now, const char *want)
{
    char *s = json_text(rules_describe_detailed(i, now));
    assert_string_equal(s, want);
    free(s);
}

/* A step that must be START of index k; returns it. */
static struct rules_step start_step(struct rules_inst *i, size_t k)
{
    struct rules_step st;
    assert_int_equal(rules_inst_next_step(i, &st), 1);
    assert_int_equal(st.kind, RULES_STEP_START);
    assert_int_equal(st.index, k);
    return st;
}

/* The step's argv is exactly want[0..) (NULL-terminated). */
static void expect_argv(const struct rules_step *st, const char *const *want)
{
    size_t n = 0;
    while (want[n] != NULL) {
        n++;
    }
    assert_int_equal(st->argc, n);
    for (size_t k = 0; k < n; k++) {
        assert_string_equal(st->argv[k], want[k]);
    }
    assert_null(st->argv[n]);
}

#define ARGV(st, ...) expect_argv((st), (const char *const[]){__VA_ARGS__, NULL})

static void no_step(struct rules_inst *i)
{
    struct rules_step st;
    assert_int_equal(rules_inst_next_step(i, &st), 0);
}

/* ---- Startup ---- */

static void test_rules_inst_startup(void **state)
{
    (void)state;
    const struct rules_rule *r = rule("CollectionRules:S:Trigger:Type=Startup\n"
                                      "CollectionRules:S:Actions:0:Type=SetEnvironmentVariable\n"
                                      "CollectionRules:S:Actions:0:Settings:Name=A\n"
                                      "CollectionRules:S:Actions:0:Settings:Value=$(Process.Name)\n"
                                      "CollectionRules:S:Actions:1:Type=CollectGCDump\n"
                                      "CollectionRules:S:Actions:1:Settings:Egress=e\n");
    struct rules_inst *i = inst(r, 1000);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_string_equal(rules_inst_state_reason(i), executing);
    assert_false(rules_inst_trigger_active(i));
    assert_false(rules_inst_started(i));
    struct rules_step st = start_step(i, 0);
    assert_string_equal(st.env_name, "A");
    assert_string_equal(st.env_value, "myapp");
    assert_false(rules_inst_started(i));
    st = start_step(i, 1);
    assert_string_equal(st.egress, "e");
    assert_true(rules_inst_started(i)); /* every action started: the runtime may resume */
    no_step(i);
    assert_int_equal(rules_inst_action_done(i, 1, true, NULL, 0, 1100), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 1200), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_string_equal(rules_inst_state_reason(i), "The collection rule will no longer trigger "
                                                    "because the Startup trigger only executes "
                                                    "once.");
    assert_int_equal(rules_inst_fire(i, 2000), 0);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 1200), AGENT_E_INVAL);
    expect_detail(
        i, 5000,
        "{\"lifetimeOccurrences\":1,\"slidingWindowOccurrences\":1,\"actionCountLimit\":5,"
        "\"actionCountSlidingWindowDurationLimit\":null,\"slidingWindowDurationCountdown\":"
        "null,\"ruleFinishedCountdown\":null,\"state\":\"Finished\",\"stateReason\":\"The "
        "collection rule will no longer trigger because the Startup trigger only executes "
        "once.\"}");
    rules_inst_free(i);
}

/* A Startup rule throttled by its limits still finishes (dotnet-monitor checks Startup after). */
static void test_rules_inst_startup_throttled(void **state)
{
    (void)state;
    const struct rules_rule *r = rule("CollectionRules:S:Trigger:Type=Startup\n"
                                      "CollectionRules:S:Limits:ActionCount=0\n"
                                      "CollectionRules:S:Limits:ActionCountSlidingWindowDuration="
                                      "00:01:00\n");
    struct rules_inst *i = inst(r, 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_true(rules_inst_started(i));
    no_step(i);
    rules_inst_free(i);
}

/* Execute's Path: a process's name with a '/' is not substituted (nothing of the app's runs). */
static void test_rules_inst_execute_path(void **state)
{
    (void)state;
    const struct rules_rule *r =
        rule("CollectionRules:P:Trigger:Type=Startup\n"
             "CollectionRules:P:Actions:0:Type=Execute\n"
             "CollectionRules:P:Actions:0:Settings:Path=/opt/hooks/$(Process.Name).sh\n"
             "CollectionRules:P:Actions:0:Settings:Arguments=$(Process.Name)\n");
    struct rules_inst *i = inst(r, 0);
    struct rules_step st = start_step(i, 0);
    assert_string_equal(st.path, "/opt/hooks/myapp.sh");
    rules_inst_free(i);
    struct rules_process evil = proc;
    evil.name = "../../tmp/evil";
    assert_int_equal(rules_inst_new(r, &evil, 5, 0, &i), 0);
    st = start_step(i, 0);
    assert_string_equal(st.path, "/opt/hooks/$(Process.Name).sh");
    ARGV(&st, "../../tmp/evil"); /* an argument may hold it */
    rules_inst_free(i);
}

/* ---- the action list ---- */

static const char list_rule[] =
    "CollectionRules:R:Trigger:Type=AspNetRequestCount\n"
    "CollectionRules:R:Trigger:Settings:RequestCount=1\n"
    "CollectionRules:R:Actions:0:Name=d\n"
    "CollectionRules:R:Actions:0:Type=CollectDump\n"
    "CollectionRules:R:Actions:0:WaitForCompletion=true\n"
    "CollectionRules:R:Actions:0:Settings:Egress=$(Process.Name)-store\n"
    "CollectionRules:R:Actions:1:Type=Execute\n"
    "CollectionRules:R:Actions:1:Settings:Path=/bin/upload\n"
    "CollectionRules:R:Actions:1:Settings:Arguments=\"$(Actions.d.EgressPath)\" "
    "$(Process.ProcessId)\n"
    "CollectionRules:R:Actions:2:Name=env\n"
    "CollectionRules:R:Actions:2:Type=GetEnvironmentVariable\n"
    "CollectionRules:R:Actions:2:Settings:Name=TOKEN\n"
    "CollectionRules:R:Actions:3:Type=Execute\n"
    "CollectionRules:R:Actions:3:Settings:Path=/bin/notify\n"
    "CollectionRules:R:Actions:3:Settings:Arguments=$(Actions.env.Value) $(Process.Name) "
    "$(Process.RuntimeId) [$(Process.CommandLine)] $(Monitor.HostName) $(Process.Other) "
    "$(Actions.d.EgressPath)\n"
    "CollectionRules:R:Actions:4:Type=CollectGCDump\n"
    "CollectionRules:R:Actions:4:Settings:Egress=gc\n";

static struct rules_request_event request(int64_t t)
{
    struct rules_request_event ev = {RULES_REQUEST_START, t, "id", "/", 0, 0};
    return ev;
}

static void test_rules_inst_plan_order(void **state)
{
    (void)state;
    struct rules_inst *i = inst(rule(list_rule), 0);
    assert_true(rules_inst_started(i));
    assert_true(rules_inst_trigger_active(i));
    no_step(i);
    struct rules_request_event ev = request(100);
    assert_int_equal(rules_inst_on_request(i, &ev, 100), 1);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_false(rules_inst_trigger_active(i));
    assert_int_equal(rules_inst_on_request(i, &ev, 101), 0); /* ignored while actions run */

    struct rules_step st = start_step(i, 0);
    assert_string_equal(st.egress, "myapp-store");
    assert_int_equal(st.action->type, RULES_ACTION_COLLECT_DUMP);
    no_step(i); /* WaitForCompletion */
    no_step(i);
    static const struct rules_kv dump_out[] = {{"EgressPath", "/out/dump_1.dmp"}};
    assert_int_equal(rules_inst_action_done(i, 0, true, dump_out, 1, 200), 0);
    st = start_step(i, 1);
    assert_string_equal(st.path, "/bin/upload");
    ARGV(&st, "/out/dump_1.dmp", "4242");
    st = start_step(i, 2); /* 1 is not awaited */
    assert_string_equal(st.env_name, "TOKEN");
    no_step(i); /* 3 uses env's Value: it waits for 2 */
    assert_int_equal(rules_inst_action_done(i, 1, true, NULL, 0, 300), 0);
    no_step(i);
    /* An output holding blanks, quotes and a token: one argument, never expanded again. */
    static const struct rules_kv env_out[] = {{"Value", "s3 \"cr3t\" $(Process.Name)"}};
    assert_int_equal(rules_inst_action_done(i, 2, true, env_out, 1, 400), 0);
    st = start_step(i, 3);
    /* Split, then substituted: the command line stays one argument. */
    ARGV(&st, "s3 \"cr3t\" $(Process.Name)", "myapp", "cd4da319-fa9e-4987-ac4e-e57b2aac248b",
         "[dotnet myapp.dll --port 80]", "node-1", "$(Process.Other)", "/out/dump_1.dmp");
    st = start_step(i, 4);
    assert_string_equal(st.egress, "gc");
    no_step(i);
    assert_int_equal(rules_inst_action_done(i, 4, true, NULL, 0, 500), 0);
    assert_int_equal(rules_inst_action_done(i, 3, true, NULL, 0, 600), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    assert_string_equal(rules_inst_state_reason(i), running);
    assert_true(rules_inst_trigger_active(i));
    no_step(i);
    /* The next firing runs the list again, with fresh outputs. */
    ev = request(700);
    assert_int_equal(rules_inst_on_request(i, &ev, 700), 1);
    start_step(i, 0);
    static const struct rules_kv dump2[] = {{"EgressPath", "/out/dump_2.dmp"}};
    assert_int_equal(rules_inst_action_done(i, 0, true, dump2, 1, 800), 0);
    st = start_step(i, 1);
    ARGV(&st, "/out/dump_2.dmp", "4242");
    rules_inst_free(i); /* frees a running list too */
}

/* A failure ends the list: nothing else starts, the running actions are cancelled. */
static void test_rules_inst_plan_failure(void **state)
{
    (void)state;
    struct rules_inst *i = inst(rule(list_rule), 0);
    assert_int_equal(rules_inst_fire(i, 10), 1);
    start_step(i, 0);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 20), 0);
    start_step(i, 1);
    start_step(i, 2);
    assert_int_equal(rules_inst_action_done(i, 2, false, NULL, 0, 30), 0);
    struct rules_step st;
    assert_int_equal(rules_inst_next_step(i, &st), 1);
    assert_int_equal(st.kind, RULES_STEP_CANCEL);
    assert_int_equal(st.index, 1);
    no_step(i);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_int_equal(rules_inst_action_done(i, 1, false, NULL, 0, 40), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    assert_true(rules_inst_trigger_active(i));
    /* The reference to d's EgressPath stayed as written: d had no outputs. */
    assert_int_equal(rules_inst_fire(i, 50), 1);
    start_step(i, 0);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 60), 0);
    st = start_step(i, 1);
    ARGV(&st, "$(Actions.d.EgressPath)", "4242");
    assert_int_equal(rules_inst_action_done(i, 5, true, NULL, 0, 60), AGENT_E_INVAL);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 60), AGENT_E_INVAL);
    rules_inst_free(i);
}

/* ---- limits ---- */

static void test_rules_inst_throttle(void **state)
{
    (void)state;
    const struct rules_rule *r = rule("CollectionRules:T:Trigger:Type=CPUUsage\n"
                                      "CollectionRules:T:Limits:ActionCount=2\n"
                                      "CollectionRules:T:Limits:ActionCountSlidingWindowDuration="
                                      "00:00:10\n");
    struct rules_inst *i = inst(r, 0);
    assert_int_equal(rules_inst_fire(i, 0), 1); /* no actions: over at once */
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    assert_int_equal(rules_inst_fire(i, 1000), 1);
    assert_int_equal(rules_inst_fire(i, 2000), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_THROTTLED);
    assert_string_equal(rules_inst_state_reason(i), throttled);
    assert_true(rules_inst_trigger_active(i)); /* the trigger runs again while throttled */
    assert_int_equal(rules_inst_fire(i, 3000), 0);
    expect_detail(
        i, 5500,
        "{\"lifetimeOccurrences\":2,\"slidingWindowOccurrences\":2,\"actionCountLimit\":2,"
        "\"actionCountSlidingWindowDurationLimit\":\"00:00:10\","
        "\"slidingWindowDurationCountdown\":\"00:00:04\",\"ruleFinishedCountdown\":null,"
        "\"state\":\"Throttled\",\"stateReason\":\"This collection rule is temporarily "
        "throttled because the ActionCountLimit has been reached within the "
        "ActionCountSlidingWindowDuration.\"}");
    /* At 10 s the first execution (0 s) is still inside; at 10.001 s it is out: Running. */
    expect_detail(
        i, 10000,
        "{\"lifetimeOccurrences\":2,\"slidingWindowOccurrences\":2,\"actionCountLimit\":2,"
        "\"actionCountSlidingWindowDurationLimit\":\"00:00:10\","
        "\"slidingWindowDurationCountdown\":null,\"ruleFinishedCountdown\":null,"
        "\"state\":\"Throttled\",\"stateReason\":\"This collection rule is temporarily "
        "throttled because the ActionCountLimit has been reached within the "
        "ActionCountSlidingWindowDuration.\"}");
    char *s = json_text(rules_describe((const struct rules_inst *const *)&i, 1, 10001));
    assert_string_equal(s,
                        "{\"T\":{\"state\":\"Running\",\"stateReason\":\"This collection rule is "
                        "active and waiting for its triggering conditions to be satisfied.\"}}");
    free(s);
    assert_int_equal(rules_inst_fire(i, 10500), 1);
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    expect_detail(
        i, 10600,
        "{\"lifetimeOccurrences\":3,\"slidingWindowOccurrences\":2,\"actionCountLimit\":2,"
        "\"actionCountSlidingWindowDurationLimit\":\"00:00:10\","
        "\"slidingWindowDurationCountdown\":\"00:00:00\",\"ruleFinishedCountdown\":null,"
        "\"state\":\"Throttled\",\"stateReason\":\"This collection rule is temporarily "
        "throttled because the ActionCountLimit has been reached within the "
        "ActionCountSlidingWindowDuration.\"}");
    rules_inst_free(i);
}

/* ActionCount without a window: Finished once reached. */
static void test_rules_inst_action_count(void **state)
{
    (void)state;
    const struct rules_rule *r = rule("CollectionRules:C:Trigger:Type=GCHeapSize\n"
                                      "CollectionRules:C:Actions:0:Type=CollectGCDump\n"
                                      "CollectionRules:C:Actions:0:Settings:Egress=e\n"
                                      "CollectionRules:C:Limits:ActionCount=2\n");
    struct rules_inst *i = inst(r, 0);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(rules_inst_fire(i, 100 * k), 1);
        start_step(i, 0);
        assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 100 * k + 50), 0);
    }
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_string_equal(rules_inst_state_reason(i),
                        "The collection rule will no longer trigger because the ActionCount was "
                        "reached.");
    assert_false(rules_inst_trigger_active(i));
    assert_int_equal(rules_inst_fire(i, 1000), 0);
    rules_inst_free(i);
}

static void test_rules_inst_rule_duration(void **state)
{
    (void)state;
    const struct rules_rule *r = rule("CollectionRules:D:Trigger:Type=CPUUsage\n"
                                      "CollectionRules:D:Actions:0:Type=CollectGCDump\n"
                                      "CollectionRules:D:Actions:0:Settings:Egress=e\n"
                                      "CollectionRules:D:Limits:RuleDuration=00:03:00\n"
                                      "CollectionRules:D:Limits:ActionCount=2\n"
                                      "CollectionRules:D:Limits:ActionCountSlidingWindowDuration="
                                      "00:01:00\n");
    struct rules_inst *i = inst(r, 10000);
    assert_int_equal(rules_inst_deadline(i), 190000);
    /* The shape of collectionrules.md's sample response. */
    expect_detail(
        i, 10000,
        "{\"lifetimeOccurrences\":0,\"slidingWindowOccurrences\":0,\"actionCountLimit\":2,"
        "\"actionCountSlidingWindowDurationLimit\":\"00:01:00\","
        "\"slidingWindowDurationCountdown\":null,\"ruleFinishedCountdown\":\"00:03:00\","
        "\"state\":\"Running\",\"stateReason\":\"This collection rule is active and waiting "
        "for its triggering conditions to be satisfied.\"}");
    expect_detail(
        i, 11500,
        "{\"lifetimeOccurrences\":0,\"slidingWindowOccurrences\":0,\"actionCountLimit\":2,"
        "\"actionCountSlidingWindowDurationLimit\":\"00:01:00\","
        "\"slidingWindowDurationCountdown\":null,\"ruleFinishedCountdown\":\"00:02:58\","
        "\"state\":\"Running\",\"stateReason\":\"This collection rule is active and waiting "
        "for its triggering conditions to be satisfied.\"}");
    rules_inst_tick(i, 189999);
    assert_int_equal(rules_inst_state(i), RULES_STATE_RUNNING);
    /* Actions running when the duration passes complete first. */
    assert_int_equal(rules_inst_fire(i, 189999), 1);
    start_step(i, 0);
    rules_inst_tick(i, 190000);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    assert_int_equal(rules_inst_deadline(i), INT64_MAX);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 195000), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_string_equal(rules_inst_state_reason(i), "The collection rule will no longer trigger "
                                                    "because the RuleDuration limit was reached.");
    rules_inst_free(i);
    /* Idle when it passes: Finished at the tick. */
    i = inst(r, 0);
    rules_inst_tick(i, 180000);
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_false(rules_inst_trigger_active(i));
    rules_inst_free(i);
}

/* The trigger engine inside the instance. */
static void test_rules_inst_metrics(void **state)
{
    (void)state;
    const struct rules_rule *r =
        rule("CollectionRules:M:Trigger:Type=CPUUsage\n"
             "CollectionRules:M:Trigger:Settings:SlidingWindowDuration=00:00:10\n"
             "CollectionRules:M:Actions:0:Type=CollectGCDump\n"
             "CollectionRules:M:Actions:0:Settings:Egress=e\n");
    struct rules_inst *i = inst(r, 0);
    struct ev_metric_sample s;
    memset(&s, 0, sizeof(s));
    s.provider = "System.Runtime";
    s.name = "cpu-usage";
    s.value = 80;
    s.interval_sec = 5;
    s.timestamp_ms = 100000;
    assert_int_equal(rules_inst_on_metric(i, &s, 1), 0);
    s.timestamp_ms = 105000;
    assert_int_equal(rules_inst_on_metric(i, &s, 2), 1);
    assert_int_equal(rules_inst_state(i), RULES_STATE_ACTION_EXECUTING);
    s.timestamp_ms = 110000;
    assert_int_equal(rules_inst_on_metric(i, &s, 3), 0);
    start_step(i, 0);
    assert_int_equal(rules_inst_action_done(i, 0, true, NULL, 0, 4), 0);
    /* A new trigger after the actions: the window starts over. */
    s.timestamp_ms = 115000;
    assert_int_equal(rules_inst_on_metric(i, &s, 5), 0);
    s.timestamp_ms = 120000;
    assert_int_equal(rules_inst_on_metric(i, &s, 6), 1);
    rules_inst_free(i);
}

static void test_rules_inst_fail_and_invalid(void **state)
{
    (void)state;
    struct rules_inst *i = inst(rule(list_rule), 0);
    assert_int_equal(rules_inst_fire(i, 10), 1);
    start_step(i, 0);
    rules_inst_fail(i, "the process exited");
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    assert_string_equal(rules_inst_state_reason(i),
                        "The collection rule will no longer trigger because a failure occurred "
                        "with message: the process exited.");
    struct rules_step st;
    assert_int_equal(rules_inst_next_step(i, &st), 1);
    assert_int_equal(st.kind, RULES_STEP_CANCEL);
    assert_int_equal(rules_inst_action_done(i, 0, false, NULL, 0, 20), 0);
    assert_int_equal(rules_inst_state(i), RULES_STATE_FINISHED);
    no_step(i);
    rules_inst_fail(i, "again"); /* no effect once finished */
    assert_non_null(strstr(rules_inst_state_reason(i), "process exited"));
    rules_inst_free(i);
    rules_inst_free(NULL);

    struct kvset s = {0};
    kv_lines(&s, "CollectionRules:Bad:Trigger:Type=Nope\n");
    struct rules_config *bad = load(&s, NULL, 0);
    kv_free(&s);
    struct rules_inst *x = (struct rules_inst *)1;
    assert_int_equal(rules_inst_new(&bad->rules[0], &proc, 5, 0, &x), AGENT_E_INVAL);
    assert_null(x);
    rules_config_free(bad);
}

static void test_rules_describe_list(void **state)
{
    (void)state;
    const struct rules_config *cfg = load_strict("CollectionRules:B:Trigger:Type=CPUUsage\n"
                                                 "CollectionRules:A:Trigger:Type=Startup\n"
                                                 "CollectionRules:A:Actions:0:Type=Execute\n"
                                                 "CollectionRules:A:Actions:0:Settings:Path=/x\n");
    struct rules_inst *v[2] = {inst(&cfg->rules[0], 0), inst(&cfg->rules[1], 0)};
    assert_string_equal(rules_inst_rule(v[0])->name, "A");
    char *text = json_text(rules_describe((const struct rules_inst *const *)v, 2, 0));
    char want[1024];
    snprintf(want, sizeof(want),
             "{\"A\":{\"state\":\"ActionExecuting\",\"stateReason\":\"%s\"},"
             "\"B\":{\"state\":\"Running\",\"stateReason\":\"%s\"}}",
             executing, running);
    assert_string_equal(text, want);
    free(text);
    text = json_text(rules_describe(NULL, 0, 0));
    assert_string_equal(text, "{}");
    free(text);
    rules_inst_free(v[0]);
    rules_inst_free(v[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rules_inst_startup, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_execute_path, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_startup_throttled, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_plan_order, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_plan_failure, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_throttle, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_action_count, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_rule_duration, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_metrics, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_inst_fail_and_invalid, cfg_teardown),
        cmocka_unit_test_teardown(test_rules_describe_list, cfg_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
