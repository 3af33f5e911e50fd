/* SPDX-License-Identifier: MIT */
/*
 * Collection rule configuration (rules/rules.h): dotnet-monitor's documentation examples
 * (collection-rule-configuration.md, collectionruleexamples.md, templates.md) as inputs, the
 * defaults they rely on, and every error the parser names, one line each with its full key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "rules.h"
#include "rules_test_util.h"

#define SEC RULES_TICKS_PER_SECOND
#define ERROR(c, line)                                                                             \
    do {                                                                                           \
        if (!has_error(c, line)) {                                                                 \
            dump_errors(c);                                                                        \
            fail_msg("missing error: %s", line);                                                   \
        }                                                                                          \
    } while (0)
#define NO_ERRORS(c)                                                                               \
    do {                                                                                           \
        if ((c)->nerrors != 0) {                                                                   \
            dump_errors(c);                                                                        \
            fail_msg("unexpected errors");                                                         \
        }                                                                                          \
    } while (0)

/* One rule "R" from lines below "CollectionRules:R:"; returns the config (errors allowed). */
static struct rules_config *rule_lines(const char *lines)
{
    static const char *const egress[] = {"artifacts", "TmpDir"};
    struct kvset s = {0};
    kv_lines(&s, lines);
    struct rules_config *c = load(&s, egress, 2);
    kv_free(&s);
    return c;
}

/* ---- TimeSpan ---- */

static void test_rules_timespan_parse(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        int64_t ticks;
    } ok[] = {
        {"00:00:30", 30 * SEC},
        {"1:00:00", 3600 * SEC},
        {"1.00:00:00", 86400 * SEC},
        {"365.00:00:00", 365LL * 86400 * SEC},
        {"00:00:00.5", SEC / 2},
        {"00:00:01.0000001", SEC + 1},
        {"1", 86400 * SEC}, /* a lone number is days, as TimeSpan.Parse reads it */
        {" 00:01:00 ", 60 * SEC},
        {"00:30", 1800 * SEC},
        {"1:02:03:04", 86400 * SEC + 2 * 3600 * SEC + 3 * 60 * SEC + 4 * SEC},
        {"2.03:04", 2 * 86400 * SEC + 3 * 3600 * SEC + 4 * 60 * SEC},
        {"-00:00:01", -SEC},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int64_t t = 0;
        assert_int_equal(rules_timespan_parse(ok[i].s, &t), 0);
        assert_int_equal(t, ok[i].ticks);
    }
    static const char *const bad[] = {"",
                                      "abc",
                                      "24:00:00",
                                      "00:60:00",
                                      "00:00:60",
                                      "1.5",
                                      "00:00:01.12345678",
                                      "1:2:3:4:5",
                                      "00:00:30s",
                                      "10675200.00:00:00",
                                      ":00:00",
                                      "00::00"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int64_t t = 0;
        assert_int_equal(rules_timespan_parse(bad[i], &t), AGENT_E_INVAL);
    }
}

static void test_rules_timespan_format(void **state)
{
    (void)state;
    char out[40];
    rules_timespan_format(30 * SEC, out, sizeof(out));
    assert_string_equal(out, "00:00:30");
    rules_timespan_format(86400 * SEC, out, sizeof(out));
    assert_string_equal(out, "1.00:00:00");
    rules_timespan_format(SEC / 2, out, sizeof(out));
    assert_string_equal(out, "00:00:00.5000000");
    rules_timespan_format(-(3600 * SEC + 1), out, sizeof(out));
    assert_string_equal(out, "-01:00:00.0000001");
    rules_timespan_format(0, out, sizeof(out));
    assert_string_equal(out, "00:00:00");
}

/* ---- documentation examples ---- */

/* collection-rule-configuration.md "Example". */
static void test_rules_config_doc_high_cpu(void **state)
{
    (void)state;
    struct rules_config *c = load_json(
        "{\"CollectionRules\":{\"HighCpuRule\":{"
        "\"Filters\":[{\"Key\":\"ProcessName\",\"Value\":\"dotnet\",\"MatchType\":\"Exact\"}],"
        "\"Trigger\":{\"Type\":\"EventCounter\",\"Settings\":{\"ProviderName\":\"System.Runtime\","
        "\"CounterName\":\"cpu-usage\",\"GreaterThan\":70,\"SlidingWindowDuration\":\"00:00:10\"}},"
        "\"Actions\":[{\"Type\":\"CollectTrace\",\"Settings\":{\"Profile\":\"Cpu\","
        "\"Duration\":\"00:01:00\",\"Egress\":\"TmpDir\"}}],"
        "\"Limits\":{\"ActionCount\":2,\"ActionCountSlidingWindowDuration\":\"1:00:00\"}}}}");
    NO_ERRORS(c);
    assert_int_equal(c->nrules, 1);
    const struct rules_rule *r = rules_config_find(c, "highcpurule");
    assert_non_null(r);
    assert_true(r->valid);
    assert_int_equal(r->nfilters, 1);
    assert_int_equal(r->filters[0].key, RULES_FILTER_PROCESS_NAME);
    assert_string_equal(r->filters[0].value, "dotnet");
    assert_false(r->filters[0].contains);
    const struct rules_trigger *t = &r->trigger;
    assert_int_equal(t->type, RULES_TRIGGER_EVENT_COUNTER);
    assert_string_equal(t->type_name, "EventCounter");
    assert_string_equal(t->provider, "System.Runtime");
    assert_string_equal(t->name, "cpu-usage");
    assert_true(t->has_greater_than);
    assert_false(t->has_less_than);
    assert_true(t->greater_than == 70);
    assert_int_equal(t->window_ticks, 10 * SEC);
    assert_int_equal(r->nactions, 1);
    const struct rules_action *a = &r->actions[0];
    assert_int_equal(a->type, RULES_ACTION_COLLECT_TRACE);
    assert_string_equal(a->profile, "Cpu");
    assert_int_equal(a->duration_ticks, 60 * SEC);
    assert_string_equal(a->egress, "TmpDir");
    assert_null(a->artifact_name); /* dotmon names the file */
    assert_true(a->request_rundown);
    assert_int_equal(a->buffer_mb, 256);
    assert_null(a->name);
    assert_false(a->wait_for_completion);
    assert_int_equal(r->limits.action_count, 2);
    assert_int_equal(r->limits.window_ticks, 3600 * SEC);
    assert_int_equal(r->limits.duration_ticks, 0);
    rules_config_free(c);
}

/* The Collect* actions' ArtifactName (the file's name at the provider), as given: no tokens are
 * substituted in it; an empty one leaves dotmon's name. */
static void test_rules_config_artifact_name(void **state)
{
    (void)state;
    struct rules_config *c = load_json(
        "{\"CollectionRules\":{\"R\":{\"Trigger\":{\"Type\":\"Startup\"},\"Actions\":["
        "{\"Type\":\"CollectDump\",\"Settings\":{\"Egress\":\"artifacts\",\"ArtifactName\":\"app."
        "dmp\"}},"
        "{\"Type\":\"CollectGCDump\",\"Settings\":{\"Egress\":\"artifacts\",\"ArtifactName\":\"\"}}"
        ","
        "{\"Type\":\"CollectLogs\",\"Settings\":{\"Egress\":\"artifacts\","
        "\"ArtifactName\":\"$(Process.ProcessId).txt\"}},"
        "{\"Type\":\"CollectTrace\",\"Settings\":{\"Egress\":\"artifacts\",\"Profile\":\"Cpu\","
        "\"ArtifactName\":\"cpu.nettrace\"}},"
        "{\"Type\":\"CollectLiveMetrics\",\"Settings\":{\"Egress\":\"artifacts\","
        "\"ArtifactName\":\"m.json\"}}]}}}");
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "R");
    assert_non_null(r);
    assert_int_equal(r->nactions, 5);
    assert_string_equal(r->actions[0].artifact_name, "app.dmp");
    assert_null(r->actions[1].artifact_name);
    assert_string_equal(r->actions[2].artifact_name, "$(Process.ProcessId).txt");
    assert_string_equal(r->actions[3].artifact_name, "cpu.nettrace");
    assert_string_equal(r->actions[4].artifact_name, "m.json");
    rules_config_free(c);
}

/* CollectStacks (dotnet-monitor's CallStackFormat: Json by default, PlainText, Speedscope;
 * another value refused naming the setting). */
static void test_rules_config_stacks(void **state)
{
    (void)state;
    struct rules_config *c =
        load_json("{\"CollectionRules\":{\"R\":{\"Trigger\":{\"Type\":\"Startup\"},\"Actions\":["
                  "{\"Type\":\"CollectStacks\",\"Settings\":{\"Egress\":\"artifacts\"}},"
                  "{\"Type\":\"CollectStacks\",\"Settings\":{\"Egress\":\"artifacts\",\"Format\":"
                  "\"PlainText\"}},"
                  "{\"Type\":\"CollectStacks\",\"Settings\":{\"Egress\":\"artifacts\",\"Format\":"
                  "\"Speedscope\",\"ArtifactName\":\"s.json\"}}]}}}");
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "R");
    assert_non_null(r);
    assert_int_equal(r->nactions, 3);
    assert_int_equal(r->actions[0].type, RULES_ACTION_COLLECT_STACKS);
    assert_int_equal(r->actions[0].stacks_format, RULES_STACKS_JSON);
    assert_string_equal(r->actions[0].egress, "artifacts");
    assert_int_equal(r->actions[1].stacks_format, RULES_STACKS_PLAIN_TEXT);
    assert_int_equal(r->actions[2].stacks_format, RULES_STACKS_SPEEDSCOPE);
    assert_string_equal(r->actions[2].artifact_name, "s.json");
    rules_config_free(c);
    c = load_json("{\"CollectionRules\":{\"R\":{\"Trigger\":{\"Type\":\"Startup\"},"
                  "\"Actions\":[{\"Type\":\"CollectStacks\",\"Settings\":{\"Egress\":"
                  "\"artifacts\",\"Format\":\"Xml\"}}]}}}");
    assert_true(c->nerrors >= 1);
    assert_non_null(strstr(c->errors[0], "CollectionRules:R:Actions:0:Settings:Format"));
    rules_config_free(c);
}

/* CollectExceptions: Format (ExceptionFormat, default PlainText) and Filters' two lists. */
static void test_rules_config_exceptions(void **state)
{
    (void)state;
    struct rules_config *c = load_json(
        "{\"CollectionRules\":{\"R\":{\"Trigger\":{\"Type\":\"Startup\"},\"Actions\":["
        "{\"Type\":\"CollectExceptions\",\"Settings\":{\"Egress\":\"artifacts\"}},"
        "{\"Type\":\"CollectExceptions\",\"Settings\":{\"Egress\":\"artifacts\",\"Format\":"
        "\"NewlineDelimitedJson\",\"ArtifactName\":\"x.json\",\"Filters\":{\"Include\":["
        "{\"ExceptionType\":\"System.FormatException\"},{\"MethodName\":\"ThrowOne\","
        "\"ModuleName\":\"TestApp.dll\"}],\"Exclude\":[{\"TypeName\":\"A.B\"}]}}}]}}}");
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "R");
    assert_non_null(r);
    assert_int_equal(r->nactions, 2);
    assert_int_equal(r->actions[0].type, RULES_ACTION_COLLECT_EXCEPTIONS);
    assert_int_equal(r->actions[0].exc_format, RULES_LOGS_PLAIN_TEXT);
    assert_int_equal(r->actions[0].nexc_include + r->actions[0].nexc_exclude, 0);
    const struct rules_action *a = &r->actions[1];
    assert_int_equal(a->exc_format, RULES_LOGS_NDJSON);
    assert_string_equal(a->artifact_name, "x.json");
    assert_int_equal(a->nexc_include, 2);
    assert_string_equal(a->exc_include[0].exception_type, "System.FormatException");
    assert_null(a->exc_include[0].method_name);
    assert_string_equal(a->exc_include[1].method_name, "ThrowOne");
    assert_string_equal(a->exc_include[1].module_name, "TestApp.dll");
    assert_int_equal(a->nexc_exclude, 1);
    assert_string_equal(a->exc_exclude[0].type_name, "A.B");
    rules_config_free(c);
}

/* collectionruleexamples.md: every example rule, in one configuration. */
static const char examples_json[] =
    "{\"CollectionRules\":{"
    "\"AssemblyLoadTraceOnStartup\":{\"Trigger\":{\"Type\":\"Startup\"},\"Actions\":[{"
    "\"Type\":\"CollectTrace\",\"Settings\":{\"Providers\":[{\"Name\":"
    "\"Microsoft-Windows-DotNETRuntime\",\"EventLevel\":\"Informational\",\"Keywords\":\"0xC\"}],"
    "\"Duration\":\"00:00:15\",\"Egress\":\"artifacts\"}}]},"
    "\"LargeGCHeapSize\":{\"Trigger\":{\"Type\":\"EventCounter\",\"Settings\":{\"ProviderName\":"
    "\"System.Runtime\",\"CounterName\":\"gc-heap-size\",\"GreaterThan\":10}},\"Actions\":[{"
    "\"Type\":\"CollectGCDump\",\"Settings\":{\"Egress\":\"artifacts\"}}]},"
    "\"BadResponseStatus\":{\"Trigger\":{\"Type\":\"AspNetResponseStatus\",\"Settings\":{"
    "\"ResponseCount\":5,\"StatusCodes\":[\"400-499\"]}},\"Actions\":[{\"Type\":\"CollectDump\","
    "\"Settings\":{\"Egress\":\"artifacts\",\"Type\":\"Full\"}}],\"Limits\":{\"ActionCount\":3,"
    "\"ActionCountSlidingWindowDuration\":\"00:30:00\"}},"
    "\"HighRequestCount\":{\"Filters\":[{\"Key\":\"ProcessId\",\"Value\":\"12345\",\"MatchType\":"
    "\"Exact\"}],\"Trigger\":{\"Type\":\"AspNetRequestCount\",\"Settings\":{\"RequestCount\":10,"
    "\"SlidingWindowDuration\":\"00:01:00\"}},\"Actions\":[{\"Type\":\"CollectLogs\",\"Settings\":{"
    "\"Egress\":\"artifacts\",\"DefaultLevel\":\"Error\",\"UseAppFilters\":false,\"Duration\":"
    "\"00:01:00\"}}],\"Limits\":{\"RuleDuration\":\"01:00:00\"}},"
    "\"LongRequestDuration\":{\"Trigger\":{\"Type\":\"AspNetRequestDuration\",\"Settings\":{"
    "\"RequestCount\":5,\"RequestDuration\":\"00:00:08\",\"SlidingWindowDuration\":\"00:02:00\","
    "\"IncludePaths\":[\"/api/**/*\"]}},\"Actions\":[{\"Type\":\"CollectTrace\",\"Settings\":{"
    "\"Profile\":\"Http\",\"Egress\":\"artifacts\",\"Duration\":\"00:01:00\"}}]},"
    "\"CollectDumpAndExecute\":{\"Trigger\":{\"Type\":\"AspNetResponseStatus\",\"Settings\":{"
    "\"ResponseCount\":3,\"StatusCodes\":[\"400\"]}},\"Actions\":[{\"Name\":\"MyDump\",\"Type\":"
    "\"CollectDump\",\"Settings\":{\"Egress\":\"artifacts\",\"Type\":\"Mini\"},"
    "\"WaitForCompletion\":true},{\"Type\":\"Execute\",\"Settings\":{\"Path\":"
    "\"C:\\\\Program Files\\\\Microsoft Visual "
    "Studio\\\\2022\\\\Preview\\\\Common7\\\\IDE\\\\devenv.exe\","
    "\"Arguments\":\"\\\"$(Actions.MyDump.EgressPath)\\\"\"}}]}"
    "}}";

static void test_rules_config_doc_examples(void **state)
{
    (void)state;
    struct rules_config *c = load_json(examples_json);
    NO_ERRORS(c);
    assert_int_equal(c->nrules, 6);
    /* ConfigurationKeyComparer order: case-insensitive names. */
    assert_string_equal(c->rules[0].name, "AssemblyLoadTraceOnStartup");
    assert_string_equal(c->rules[1].name, "BadResponseStatus");
    assert_string_equal(c->rules[5].name, "LongRequestDuration");

    const struct rules_rule *r = rules_config_find(c, "AssemblyLoadTraceOnStartup");
    assert_int_equal(r->trigger.type, RULES_TRIGGER_STARTUP);
    const struct rules_action *a = &r->actions[0];
    assert_null(a->profile);
    assert_int_equal(a->nproviders, 1);
    assert_string_equal(a->providers[0].name, "Microsoft-Windows-DotNETRuntime");
    assert_int_equal(a->providers[0].level, 4);
    assert_int_equal(a->providers[0].keywords, 0xC);
    assert_int_equal(a->duration_ticks, 15 * SEC);
    assert_int_equal(r->limits.action_count, 5); /* the default ActionCount */

    r = rules_config_find(c, "LargeGCHeapSize");
    assert_int_equal(r->trigger.window_ticks, 60 * SEC); /* the default window */
    assert_int_equal(r->actions[0].type, RULES_ACTION_COLLECT_GCDUMP);

    r = rules_config_find(c, "BadResponseStatus");
    assert_int_equal(r->trigger.count, 5);
    assert_int_equal(r->trigger.n_status_codes, 1);
    assert_int_equal(r->trigger.status_codes[0].min, 400);
    assert_int_equal(r->trigger.status_codes[0].max, 499);
    assert_int_equal(r->actions[0].dump_type, RULES_DUMP_FULL);
    assert_int_equal(r->limits.window_ticks, 1800 * SEC);

    r = rules_config_find(c, "HighRequestCount");
    assert_int_equal(r->filters[0].key, RULES_FILTER_PROCESS_ID);
    assert_int_equal(r->filters[0].pid, 12345);
    assert_int_equal(r->actions[0].default_level, RULES_LOG_ERROR);
    assert_false(r->actions[0].use_app_filters);
    assert_int_equal(r->actions[0].format, RULES_LOGS_PLAIN_TEXT);
    assert_int_equal(r->limits.duration_ticks, 3600 * SEC);

    r = rules_config_find(c, "LongRequestDuration");
    assert_int_equal(r->trigger.request_duration_ticks, 8 * SEC);
    assert_int_equal(r->trigger.window_ticks, 120 * SEC);
    assert_int_equal(r->trigger.n_include_paths, 1);
    assert_string_equal(r->trigger.include_paths[0], "/api/**/*");

    r = rules_config_find(c, "CollectDumpAndExecute");
    assert_string_equal(r->actions[0].name, "MyDump");
    assert_true(r->actions[0].wait_for_completion);
    assert_int_equal(r->actions[0].dump_type, RULES_DUMP_MINI);
    assert_string_equal(r->actions[1].arguments, "\"$(Actions.MyDump.EgressPath)\"");
    assert_int_equal(r->actions[1].ndeps, 1);
    assert_int_equal(r->actions[1].deps[0], 0);
    rules_config_free(c);
}

/* collection-rule-configuration.md GetEnvironmentVariable (an action list), Filters (short form),
 * and the documentation's AspNetResponseStatus example, whose "RequestCount" is not a setting
 * of that trigger: dotnet-monitor rejects it the same way. */
static void test_rules_config_doc_env_and_filters(void **state)
{
    (void)state;
    struct rules_config *c = load_json(
        "{\"CollectionRules\":{\"R\":{\"Filters\":[{\"Key\":\"ProcessName\",\"Value\":\"dotnet\","
        "\"MatchType\":\"Exact\"},{\"CommandLine\":\"myapp.dll\",\"MatchType\":\"Contains\"}],"
        "\"Trigger\":{\"Type\":\"Startup\"},\"Actions\":[{\"Name\":\"A\",\"Type\":\"CollectTrace\","
        "\"Settings\":{\"Profile\":\"Cpu\",\"Egress\":\"TmpDir\"}},{\"Name\":\"GetEnvAction\","
        "\"Type\":\"GetEnvironmentVariable\",\"Settings\":{\"Name\":\"Azure_SASToken\"}},{\"Name\":"
        "\"B\",\"Type\":\"Execute\",\"Settings\":{\"Path\":\"azcopy\",\"Arguments\":"
        "\"$(Actions.A.EgressPath) https://Contoso.blob.core.windows.net/MyTraces/"
        "AwesomeAppTrace.nettrace?$(Actions.GetEnvAction.Value)\"}}]},"
        "\"S\":{\"Trigger\":{\"Type\":\"AspNetResponseStatus\",\"Settings\":{\"StatusCodes\":"
        "[\"500-599\"],\"RequestCount\":10,\"SlidingWindowDuration\":\"00:01:00\",\"IncludePaths\":"
        "[\"/api/**/*\"]}}}}}");
    const struct rules_rule *r = rules_config_find(c, "R");
    assert_true(r->valid);
    assert_int_equal(r->nfilters, 2);
    assert_int_equal(r->filters[1].key, RULES_FILTER_COMMAND_LINE);
    assert_true(r->filters[1].contains);
    assert_string_equal(r->actions[1].env_name, "Azure_SASToken");
    assert_int_equal(r->actions[2].ndeps, 2);
    assert_int_equal(r->actions[2].deps[0], 0);
    assert_int_equal(r->actions[2].deps[1], 1);
    assert_false(rules_config_find(c, "S")->valid);
    ERROR(c, "CollectionRules:S:Trigger:Settings:ResponseCount: A response count must be "
             "specified if there is no default response count.");
    assert_int_equal(c->nerrors, 1);
    rules_config_free(c);
}

/* templates.md "Example" (with TraceWhenHighCPU inside CollectionRules). */
static void test_rules_config_templates(void **state)
{
    (void)state;
    struct rules_config *c = load_json(
        "{\"Templates\":{\"CollectionRuleActions\":{\"CPUTrace\":{\"Type\":\"CollectTrace\","
        "\"Settings\":{\"Egress\":\"artifacts\",\"SlidingWindowDuration\":\"00:00:15\",\"Profile\":"
        "\"Cpu\"}},\"ErrorLogs\":{\"Type\":\"CollectLogs\",\"Settings\":{\"Egress\":\"artifacts\","
        "\"DefaultLevel\":\"Error\",\"UseAppFilters\":false,\"Duration\":\"00:01:00\"}}},"
        "\"CollectionRuleTriggers\":{\"HighRequestCount\":{\"Type\":\"AspNetRequestCount\","
        "\"Settings\":{\"RequestCount\":10,\"SlidingWindowDuration\":\"00:01:00\"}}},"
        "\"CollectionRuleFilters\":{\"AppName\":{\"Key\":\"ProcessName\",\"Value\":"
        "\"MyProcessName\",\"MatchType\":\"Exact\"}},\"CollectionRuleLimits\":{\"ShortDuration\":{"
        "\"RuleDuration\":\"00:05:00\",\"ActionCount\":\"1\",\"ActionCountSlidingWindowDuration\":"
        "\"00:00:30\"}}},"
        "\"CollectionRules\":{\"LogAndDumpWhenHighRequestCount\":{\"Trigger\":\"HighRequestCount\","
        "\"Actions\":[\"ErrorLogs\",{\"Type\":\"CollectDump\",\"Settings\":{\"Egress\":"
        "\"artifacts\",\"Type\":\"Full\"}}],\"Filters\":[\"AppName\"],\"Limits\":\"ShortDuration\"}"
        ","
        "\"TraceWhenHighCPU\":{\"Trigger\":{\"Type\":\"EventCounter\",\"Settings\":{"
        "\"ProviderName\":"
        "\"System.Runtime\",\"CounterName\":\"cpu-usage\",\"GreaterThan\":60,"
        "\"SlidingWindowDuration\":\"00:00:10\"}},\"Actions\":[\"CPUTrace\"],\"Filters\":[{"
        "\"ProcessId\":\"12345\"}]}}}");
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "LogAndDumpWhenHighRequestCount");
    assert_int_equal(r->trigger.type, RULES_TRIGGER_ASPNET_REQUEST_COUNT);
    assert_int_equal(r->trigger.count, 10);
    assert_int_equal(r->nactions, 2);
    assert_int_equal(r->actions[0].type, RULES_ACTION_COLLECT_LOGS);
    assert_string_equal(r->actions[0].key, "Templates:CollectionRuleActions:ErrorLogs");
    assert_int_equal(r->actions[1].dump_type, RULES_DUMP_FULL);
    assert_int_equal(r->nfilters, 1);
    assert_string_equal(r->filters[0].value, "MyProcessName");
    assert_int_equal(r->limits.action_count, 1);
    assert_int_equal(r->limits.duration_ticks, 300 * SEC);
    assert_int_equal(r->limits.window_ticks, 30 * SEC);
    r = rules_config_find(c, "TraceWhenHighCPU");
    assert_string_equal(r->actions[0].profile, "Cpu");
    assert_int_equal(r->filters[0].key, RULES_FILTER_PROCESS_ID);
    assert_int_equal(r->filters[0].pid, 12345);
    rules_config_free(c);
}

/* collection-rule-configuration.md "Collection Rule Defaults", and the trigger/limit defaults. */
static void test_rules_config_defaults(void **state)
{
    (void)state;
    static const char *const egress[] = {"artifacts", "monitorBlob"};
    struct kvset s = {0};
    kv_json(&s, "{\"CollectionRuleDefaults\":{\"Actions\":{\"Egress\":\"artifacts\"},"
                "\"Triggers\":{\"SlidingWindowDuration\":\"00:00:20\",\"RequestCount\":7,"
                "\"ResponseCount\":9},\"Limits\":{\"ActionCount\":2,"
                "\"ActionCountSlidingWindowDuration\":\"00:10:00\",\"RuleDuration\":\"02:00:00\"}},"
                "\"CollectionRules\":{\"HighRequestCount\":{\"Trigger\":{\"Type\":"
                "\"AspNetRequestCount\",\"Settings\":{\"RequestCount\":10}},\"Actions\":[{\"Type\":"
                "\"CollectDump\"},{\"Type\":\"CollectGCDump\",\"Settings\":{\"Egress\":"
                "\"monitorBlob\"}}],\"Limits\":{\"ActionCount\":4}},"
                "\"Status\":{\"Trigger\":{\"Type\":\"AspNetResponseStatus\",\"Settings\":{"
                "\"StatusCodes\":[\"500\"]}}},\"Cpu\":{\"Trigger\":{\"Type\":\"CPUUsage\"}}}}");
    struct rules_config *c = load(&s, egress, 2);
    kv_free(&s);
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "HighRequestCount");
    assert_string_equal(r->actions[0].egress, "artifacts");
    assert_string_equal(r->actions[1].egress, "monitorBlob");
    assert_int_equal(r->trigger.count, 10);
    assert_int_equal(r->trigger.window_ticks, 20 * SEC);
    assert_int_equal(r->limits.action_count, 4);
    assert_int_equal(r->limits.window_ticks, 600 * SEC);
    assert_int_equal(r->limits.duration_ticks, 7200 * SEC);
    r = rules_config_find(c, "Status");
    assert_int_equal(r->trigger.count, 9);
    r = rules_config_find(c, "Cpu");
    assert_int_equal(r->trigger.type, RULES_TRIGGER_CPU_USAGE);
    assert_string_equal(r->trigger.provider, "System.Runtime");
    assert_string_equal(r->trigger.name, "cpu-usage");
    assert_true(r->trigger.has_greater_than);
    assert_true(r->trigger.greater_than == 50);
    assert_int_equal(r->trigger.window_ticks, 20 * SEC);
    assert_int_equal(r->nactions, 0);
    rules_config_free(c);
}

/* docs/rules.md §3: the shortcut default applies only when neither threshold is set. */
static void test_rules_config_shortcuts(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:A:Trigger:Type=GCHeapSize\n"
                                        "CollectionRules:B:Trigger:Type=ThreadpoolQueueLength\n"
                                        "CollectionRules:C:Trigger:Type=CPUUsage\n"
                                        "CollectionRules:C:Trigger:Settings:LessThan=5\n"
                                        "CollectionRules:D:Trigger:Type=CPUUsage\n"
                                        "CollectionRules:D:Trigger:Settings:GreaterThan=20\n"
                                        "CollectionRules:D:Trigger:Settings:LessThan=80\n");
    NO_ERRORS(c);
    const struct rules_trigger *t = &rules_config_find(c, "A")->trigger;
    assert_string_equal(t->name, "gc-heap-size");
    assert_true(t->has_greater_than && t->greater_than == 10);
    t = &rules_config_find(c, "B")->trigger;
    assert_string_equal(t->name, "threadpool-queue-length");
    assert_true(t->has_greater_than && t->greater_than == 200);
    t = &rules_config_find(c, "C")->trigger;
    assert_false(t->has_greater_than);
    assert_true(t->has_less_than && t->less_than == 5);
    t = &rules_config_find(c, "D")->trigger;
    assert_true(t->greater_than == 20 && t->less_than == 80);
    rules_config_free(c);
}

static void test_rules_config_trace_providers(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines(
        "CollectionRules:R:Trigger:Type=Startup\n"
        "CollectionRules:R:Actions:0:Type=CollectTrace\n"
        "CollectionRules:R:Actions:0:Settings:Egress=artifacts\n"
        "CollectionRules:R:Actions:0:Settings:RequestRundown=false\n"
        "CollectionRules:R:Actions:0:Settings:BufferSizeMegabytes=64\n"
        "CollectionRules:R:Actions:0:Settings:Providers:0:Name=Microsoft-Extensions-Logging\n"
        "CollectionRules:R:Actions:0:Settings:Providers:0:Arguments:FilterSpecs=App:Warning\n"
        "CollectionRules:R:Actions:0:Settings:Providers:1:Name=MyProvider\n"
        "CollectionRules:R:Actions:0:Settings:Providers:1:EventLevel=2\n"
        "CollectionRules:R:Actions:0:Settings:Providers:1:Keywords=12\n"
        "CollectionRules:R:Actions:0:Settings:StoppingEvent:ProviderName=MyProvider\n"
        "CollectionRules:R:Actions:0:Settings:StoppingEvent:EventName=Done\n"
        "CollectionRules:R:Actions:0:Settings:StoppingEvent:PayloadFilter:Code=7\n"
        "CollectionRules:R:Actions:1:Type=CollectTrace\n"
        "CollectionRules:R:Actions:1:Settings:Egress=artifacts\n"
        "CollectionRules:R:Actions:1:Settings:Profile=http, cpu,Http\n");
    NO_ERRORS(c);
    const struct rules_action *a = &rules_config_find(c, "R")->actions[0];
    assert_false(a->request_rundown);
    assert_int_equal(a->buffer_mb, 64);
    assert_int_equal(a->nproviders, 2);
    assert_int_equal(a->providers[0].level, 5);
    assert_int_equal(a->providers[0].keywords, UINT64_MAX);
    assert_int_equal(a->providers[0].nargs, 1);
    assert_string_equal(a->providers[0].args[0].key, "FilterSpecs");
    assert_string_equal(a->providers[0].args[0].value, "App:Warning");
    assert_int_equal(a->providers[1].level, 2);
    assert_int_equal(a->providers[1].keywords, 12);
    assert_true(a->has_stopping_event);
    assert_string_equal(a->stop_event, "Done");
    assert_int_equal(a->nstop_payload, 1);
    assert_string_equal(rules_config_find(c, "R")->actions[1].profile, "Http,Cpu");
    rules_config_free(c);
}

static void test_rules_config_logs_and_live_metrics(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Actions:0:Type=CollectLogs\n"
                   "CollectionRules:R:Actions:0:Settings:Egress=TmpDir\n"
                   "CollectionRules:R:Actions:0:Settings:Format=JsonSequence\n"
                   "CollectionRules:R:Actions:0:Settings:FilterSpecs:Microsoft.AspNetCore.Hosting="
                   "Information\n"
                   "CollectionRules:R:Actions:0:Settings:FilterSpecs:App=\n"
                   "CollectionRules:R:Actions:1:Type=CollectLiveMetrics\n"
                   "CollectionRules:R:Actions:1:Settings:Egress=TmpDir\n"
                   "CollectionRules:R:Actions:1:Settings:IncludeDefaultProviders=false\n"
                   "CollectionRules:R:Actions:1:Settings:Duration=00:00:20\n"
                   "CollectionRules:R:Actions:1:Settings:Providers:0:ProviderName=System.Runtime\n"
                   "CollectionRules:R:Actions:1:Settings:Providers:0:CounterNames:0=cpu-usage\n"
                   "CollectionRules:R:Actions:1:Settings:Meters:0:MeterName=MyMeter\n"
                   "CollectionRules:R:Actions:1:Settings:Meters:0:InstrumentNames:0=a\n"
                   "CollectionRules:R:Actions:1:Settings:Meters:0:InstrumentNames:1=b\n"
                   "CollectionRules:R:Actions:2:Type=SetEnvironmentVariable\n"
                   "CollectionRules:R:Actions:2:Settings:Name=MyProfiler_AccountId\n"
                   "CollectionRules:R:Actions:2:Settings:Value=8fb138d2c44e4aea8545cc2df541ed4c\n"
                   "CollectionRules:R:Actions:3:Type=Execute\n"
                   "CollectionRules:R:Actions:3:Settings:Path=/bin/true\n"
                   "CollectionRules:R:Actions:3:Settings:IgnoreExitCode=True\n");
    NO_ERRORS(c);
    const struct rules_rule *r = rules_config_find(c, "R");
    const struct rules_action *a = &r->actions[0];
    assert_int_equal(a->format, RULES_LOGS_JSON_SEQUENCE);
    assert_int_equal(a->default_level, RULES_LOG_WARNING);
    assert_true(a->use_app_filters);
    assert_int_equal(a->nfilter_specs, 2);
    assert_string_equal(a->filter_specs[0].category, "App");
    assert_int_equal(a->filter_specs[0].level, -1);
    assert_int_equal(a->filter_specs[1].level, RULES_LOG_INFORMATION);
    a = &r->actions[1];
    assert_false(a->include_default_providers);
    assert_int_equal(a->duration_ticks, 20 * SEC);
    assert_int_equal(a->nmetric_providers, 1);
    assert_string_equal(a->metric_providers[0].names[0], "cpu-usage");
    assert_int_equal(a->nmeters, 1);
    assert_int_equal(a->meters[0].nnames, 2);
    assert_string_equal(r->actions[2].env_value, "8fb138d2c44e4aea8545cc2df541ed4c");
    assert_true(r->actions[3].ignore_exit_code);
    rules_config_free(c);
}

/* ---- errors ---- */

static void test_rules_config_error_types(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:A:Trigger:Type=HighMemory\n"
                                        "CollectionRules:B:Trigger:Type=Startup\n"
                                        "CollectionRules:B:Actions:0:Type=CollectEverything\n"
                                        "CollectionRules:B:Actions:1:Type=CollectExceptions\n"
                                        "CollectionRules:B:Actions:1:Settings:Format=Html\n"
                                        "CollectionRules:B:Actions:1:Settings:Egress=artifacts\n"
                                        "CollectionRules:C:Actions:0:Settings:Egress=artifacts\n"
                                        "CollectionRules:D:Trigger:Settings:A=1\n"
                                        "CollectionRules:E:Trigger:Type=Startup\n"
                                        "CollectionRules:E:Actions:0:Type=LoadProfiler\n"
                                        "CollectionRules:E:Actions:0:Settings:Path=p.so\n"
                                        "CollectionRules:E:Actions:0:Settings:Clsid="
                                        "55b9554d-6115-45a2-be1e-c80f7fa35369\n"
                                        "CollectionRules:F:Trigger:Type=Startup\n");
    ERROR(c, "CollectionRules:A:Trigger:Type: 'HighMemory' is not a known trigger type.");
    ERROR(c, "CollectionRules:B:Actions:0:Type: 'CollectEverything' is not a known action type.");
    ERROR(c, "CollectionRules:B:Actions:1:Settings:Format: Failed to convert configuration value "
             "'Html' to type 'ExceptionFormat'.");
    ERROR(c, "CollectionRules:C:Trigger: The Trigger field is required.");
    ERROR(c, "CollectionRules:C:Actions:0:Type: The Type field is required.");
    ERROR(c, "CollectionRules:D:Trigger:Type: The Type field is required.");
    ERROR(c, "CollectionRules:E:Actions:0:Type: The 'LoadProfiler' action is not supported by "
             "dotmon (it needs to load a profiler into the target process).");
    assert_int_equal(c->nerrors, 7);
    for (size_t i = 0; i < c->nrules; i++) {
        assert_int_equal(c->rules[i].valid, strcmp(c->rules[i].name, "F") == 0);
    }
    rules_config_free(c);
}

static void test_rules_config_error_values(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:A:Trigger:Type=EventCounter\n"
                   "CollectionRules:A:Trigger:Settings:CounterName=cpu-usage\n"
                   "CollectionRules:A:Trigger:Settings:GreaterThan=x\n"
                   "CollectionRules:A:Trigger:Settings:SlidingWindowDuration=abc\n"
                   "CollectionRules:B:Trigger:Type=EventCounter\n"
                   "CollectionRules:B:Trigger:Settings:ProviderName=System.Runtime\n"
                   "CollectionRules:B:Trigger:Settings:CounterName=cpu-usage\n"
                   "CollectionRules:B:Trigger:Settings:LessThan=3\n"
                   "CollectionRules:B:Trigger:Settings:SlidingWindowDuration=00:00:00\n"
                   "CollectionRules:C:Trigger:Type=EventMeter\n"
                   "CollectionRules:C:Trigger:Settings:MeterName=M\n"
                   "CollectionRules:C:Trigger:Settings:InstrumentName=I\n"
                   "CollectionRules:C:Trigger:Settings:GreaterThan=10\n"
                   "CollectionRules:C:Trigger:Settings:LessThan=5\n"
                   "CollectionRules:C:Trigger:Settings:HistogramPercentile=101\n"
                   "CollectionRules:C:Trigger:Settings:SlidingWindowDuration=1.00:00:01\n"
                   "CollectionRules:D:Trigger:Type=CPUUsage\n"
                   "CollectionRules:D:Trigger:Settings:GreaterThan=150\n"
                   "CollectionRules:D:Limits:RuleDuration=366.00:00:00\n"
                   "CollectionRules:D:Limits:ActionCount=many\n"
                   "CollectionRules:D:Limits:ActionCountSlidingWindowDuration=00:00:00.5\n"
                   "CollectionRules:E:Trigger:Type=Startup\n"
                   "CollectionRules:E:Actions:0:Type=CollectTrace\n"
                   "CollectionRules:E:Actions:0:WaitForCompletion=yes\n"
                   "CollectionRules:E:Actions:0:Settings:Egress=artifacts\n"
                   "CollectionRules:E:Actions:0:Settings:Profile=Cpu\n"
                   "CollectionRules:E:Actions:0:Settings:BufferSizeMegabytes=0\n"
                   "CollectionRules:E:Actions:0:Settings:Duration=2.00:00:00\n"
                   "CollectionRules:E:Actions:1:Type=CollectDump\n"
                   "CollectionRules:E:Actions:1:Settings:Egress=artifacts\n"
                   "CollectionRules:E:Actions:1:Settings:Type=Huge\n"
                   "CollectionRules:E:Actions:2:Type=CollectLogs\n"
                   "CollectionRules:E:Actions:2:Settings:Egress=artifacts\n"
                   "CollectionRules:E:Actions:2:Settings:FilterSpecs:App=Loud\n"
                   "CollectionRules:E:Actions:3:Type=CollectTrace\n"
                   "CollectionRules:E:Actions:3:Settings:Egress=artifacts\n"
                   "CollectionRules:E:Actions:3:Settings:Profile=Cpu,Disk\n"
                   "CollectionRules:E:Actions:4:Type=Execute\n"
                   "CollectionRules:E:Actions:5:Type=GetEnvironmentVariable\n"
                   "CollectionRules:F:Trigger:Type=EventMeter\n"
                   "CollectionRules:F:Trigger:Settings:MeterName=M\n"
                   "CollectionRules:F:Trigger:Settings:InstrumentName=I\n");
    ERROR(c, "CollectionRules:A:Trigger:Settings:ProviderName: The ProviderName field is "
             "required.");
    ERROR(c, "CollectionRules:A:Trigger:Settings:GreaterThan: Failed to convert configuration "
             "value 'x' to type 'System.Double'.");
    ERROR(c, "CollectionRules:A:Trigger:Settings:SlidingWindowDuration: Failed to convert "
             "configuration value 'abc' to type 'System.TimeSpan'.");
    ERROR(c, "CollectionRules:B:Trigger:Settings:SlidingWindowDuration: The field "
             "SlidingWindowDuration must be between 00:00:01 and 1.00:00:00.");
    ERROR(c, "CollectionRules:C:Trigger:Settings: The value of field GreaterThan must be less than "
             "the value of field LessThan.");
    ERROR(c,
          "CollectionRules:C:Trigger:Settings:HistogramPercentile: The field HistogramPercentile "
          "must be between 0 and 100.");
    ERROR(c, "CollectionRules:C:Trigger:Settings:SlidingWindowDuration: The field "
             "SlidingWindowDuration must be between 00:00:01 and 1.00:00:00.");
    ERROR(c, "CollectionRules:D:Trigger:Settings:GreaterThan: The field GreaterThan must be "
             "between 0 and 100.");
    ERROR(c, "CollectionRules:D:Limits:RuleDuration: The field RuleDuration must be between "
             "00:00:01 and 365.00:00:00.");
    ERROR(c, "CollectionRules:D:Limits:ActionCount: Failed to convert configuration value 'many' "
             "to type 'System.Int32'.");
    ERROR(c, "CollectionRules:D:Limits:ActionCountSlidingWindowDuration: The field "
             "ActionCountSlidingWindowDuration must be between 00:00:01 and 1.00:00:00.");
    ERROR(c, "CollectionRules:E:Actions:0:WaitForCompletion: Failed to convert configuration value "
             "'yes' to type 'System.Boolean'.");
    ERROR(c, "CollectionRules:E:Actions:0:Settings:BufferSizeMegabytes: The field "
             "BufferSizeMegabytes must be between 1 and 1024.");
    ERROR(c, "CollectionRules:E:Actions:0:Settings:Duration: The field Duration must be between "
             "00:00:01 and 1.00:00:00.");
    ERROR(c, "CollectionRules:E:Actions:1:Settings:Type: Failed to convert configuration value "
             "'Huge' to type 'DumpType'.");
    ERROR(c, "CollectionRules:E:Actions:2:Settings:FilterSpecs:App: Failed to convert "
             "configuration value 'Loud' to type 'LogLevel'.");
    ERROR(c, "CollectionRules:E:Actions:3:Settings:Profile: Failed to convert configuration value "
             "'Cpu,Disk' to type 'TraceProfile'.");
    ERROR(c, "CollectionRules:E:Actions:4:Settings:Path: The Path field is required.");
    ERROR(c, "CollectionRules:E:Actions:5:Settings:Name: The Name field is required.");
    ERROR(c, "CollectionRules:F:Trigger:Settings: The GreaterThan field or the LessThan field is "
             "required.");
    assert_int_equal(c->nerrors, 20);
    rules_config_free(c);
}

static void test_rules_config_error_trace(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Actions:0:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:0:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:0:Settings:Profile=Cpu\n"
                   "CollectionRules:R:Actions:0:Settings:Providers:0:Name=P\n"
                   "CollectionRules:R:Actions:1:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:1:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:2:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:2:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:2:Settings:Profile=Logs\n"
                   "CollectionRules:R:Actions:2:Settings:StoppingEvent:ProviderName=P\n"
                   "CollectionRules:R:Actions:2:Settings:StoppingEvent:EventName=E\n"
                   "CollectionRules:R:Actions:3:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:3:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:3:Settings:Providers:0:Name=P\n"
                   "CollectionRules:R:Actions:3:Settings:Providers:0:EventLevel=Chatty\n"
                   "CollectionRules:R:Actions:3:Settings:Providers:0:Keywords=0xZZ\n"
                   "CollectionRules:R:Actions:3:Settings:Providers:1:Keywords=1\n"
                   "CollectionRules:R:Actions:3:Settings:StoppingEvent:ProviderName=Q\n");
    ERROR(c, "CollectionRules:R:Actions:0:Settings: Both the Profile field and the Providers field "
             "cannot be specified.");
    ERROR(c, "CollectionRules:R:Actions:1:Settings: The Profile field or the Providers field is "
             "required.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings: Both the Profile field and the StoppingEvent "
             "field cannot be specified.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:StoppingEvent: The StoppingEvent field "
             "specified the provider 'P' but it was not found in the Providers field.");
    ERROR(c, "CollectionRules:R:Actions:3:Settings:Providers:0:EventLevel: Failed to convert "
             "configuration value 'Chatty' to type 'EventLevel'.");
    ERROR(c, "CollectionRules:R:Actions:3:Settings:Providers:0:Keywords: Failed to convert "
             "configuration value '0xZZ' to type 'System.Int64'.");
    ERROR(c, "CollectionRules:R:Actions:3:Settings:Providers:1:Name: The Name field is required.");
    ERROR(c, "CollectionRules:R:Actions:3:Settings:StoppingEvent:EventName: The EventName field is "
             "required.");
    ERROR(c, "CollectionRules:R:Actions:3:Settings:StoppingEvent: The StoppingEvent field "
             "specified the provider 'Q' but it was not found in the Providers field.");
    assert_int_equal(c->nerrors, 9);
    rules_config_free(c);
}

/* CollectTrace's ring mode: PreTriggerSeconds, RingBufferSizeMB, PostTriggerSeconds. */
static void test_rules_config_ring(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:R:Trigger:Type=GCPause\n"
                                        "CollectionRules:R:Trigger:Settings:ThresholdMs=200\n"
                                        "CollectionRules:R:Actions:0:Type=CollectTrace\n"
                                        "CollectionRules:R:Actions:0:Settings:Egress=artifacts\n"
                                        "CollectionRules:R:Actions:0:Settings:Profile=Cpu\n"
                                        "CollectionRules:R:Actions:0:Settings:PreTriggerSeconds=4\n"
                                        "CollectionRules:R:Actions:1:Type=CollectTrace\n"
                                        "CollectionRules:R:Actions:1:Settings:Egress=artifacts\n"
                                        "CollectionRules:R:Actions:1:Settings:Profile=Cpu\n");
    assert_int_equal(c->nerrors, 0);
    const struct rules_action *a = &c->rules[0].actions[0];
    assert_true(a->ring);
    assert_int_equal(a->pre_trigger_s, 4);
    assert_int_equal(a->ring_mb, 64);
    assert_int_equal(a->post_trigger_s, 5);
    assert_false(c->rules[0].actions[1].ring);
    rules_config_free(c);

    c = rule_lines("CollectionRules:R:Trigger:Type=GCPause\n"
                   "CollectionRules:R:Trigger:Settings:ThresholdMs=200\n"
                   "CollectionRules:R:Actions:0:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:0:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:0:Settings:Profile=Cpu\n"
                   "CollectionRules:R:Actions:0:Settings:PreTriggerSeconds=0\n"
                   "CollectionRules:R:Actions:0:Settings:RingBufferSizeMB=2000\n"
                   "CollectionRules:R:Actions:0:Settings:PostTriggerSeconds=3601\n"
                   "CollectionRules:R:Actions:1:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:1:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:1:Settings:Profile=Cpu\n"
                   "CollectionRules:R:Actions:1:Settings:RingBufferSizeMB=8\n"
                   "CollectionRules:R:Actions:1:Settings:Duration=00:00:10\n"
                   "CollectionRules:R:Actions:2:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:2:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:2:Settings:Profile=Cpu\n"
                   "CollectionRules:R:Actions:2:Settings:PostTriggerSeconds=2\n");
    ERROR(c, "CollectionRules:R:Actions:0:Settings:PreTriggerSeconds: The field PreTriggerSeconds "
             "must be between 1 and 3600.");
    ERROR(c, "CollectionRules:R:Actions:0:Settings:RingBufferSizeMB: The field RingBufferSizeMB "
             "must be between 1 and 1024.");
    ERROR(c, "CollectionRules:R:Actions:0:Settings:PostTriggerSeconds: The field "
             "PostTriggerSeconds must be between 0 and 3600.");
    ERROR(c, "CollectionRules:R:Actions:1:Settings: Both the Duration field and the "
             "PreTriggerSeconds or RingBufferSizeMB field cannot be specified: a ring trace lasts "
             "PostTriggerSeconds after its trigger.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:PostTriggerSeconds: The PostTriggerSeconds "
             "field needs PreTriggerSeconds or RingBufferSizeMB.");
    assert_int_equal(c->nerrors, 5);
    rules_config_free(c);

    c = rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Actions:0:Type=CollectTrace\n"
                   "CollectionRules:R:Actions:0:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:0:Settings:Profile=Cpu\n"
                   "CollectionRules:R:Actions:0:Settings:RingBufferSizeMB=8\n");
    ERROR(c, "CollectionRules:R:Actions:0:Settings: A CollectTrace with PreTriggerSeconds or "
             "RingBufferSizeMB needs a trigger other than Startup (the ring keeps the time before "
             "the trigger).");
    assert_int_equal(c->nerrors, 1);
    rules_config_free(c);
}

static void test_rules_config_error_templates(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:R:Trigger=NoSuchTrigger\n"
                                        "CollectionRules:R:Actions:0=NoSuchAction\n"
                                        "CollectionRules:R:Filters:0=NoSuchFilter\n"
                                        "CollectionRules:R:Limits=NoSuchLimits\n");
    ERROR(c, "CollectionRules:R:Trigger: Could not find a template with the name: NoSuchTrigger");
    ERROR(c, "CollectionRules:R:Actions:0: Could not find a template with the name: NoSuchAction");
    ERROR(c, "CollectionRules:R:Filters:0: Could not find a template with the name: NoSuchFilter");
    ERROR(c, "CollectionRules:R:Limits: Could not find a template with the name: NoSuchLimits");
    assert_int_equal(c->nerrors, 4);
    rules_config_free(c);
}

static void test_rules_config_error_references(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Actions:0:Name=a0\n"
                   "CollectionRules:R:Actions:0:Type=Execute\n"
                   "CollectionRules:R:Actions:0:Settings:Path=/bin/x\n"
                   "CollectionRules:R:Actions:0:Settings:Arguments=$(Actions.a1.EgressPath)\n"
                   "CollectionRules:R:Actions:1:Name=a1\n"
                   "CollectionRules:R:Actions:1:Type=CollectDump\n"
                   "CollectionRules:R:Actions:1:Settings:Egress=artifacts\n"
                   "CollectionRules:R:Actions:2:Name=a2\n"
                   "CollectionRules:R:Actions:2:Type=Execute\n"
                   "CollectionRules:R:Actions:2:Settings:Path=/bin/x\n"
                   "CollectionRules:R:Actions:2:Settings:Arguments=$(Actions.a1.ExitCode) "
                   "$(actions.a0.ExitCode) $(Actions.nope.Value) $(Actions.a1) $(Actions.x.y.z)\n"
                   "CollectionRules:R:Actions:3:Name=a1\n"
                   "CollectionRules:R:Actions:3:Type=SetEnvironmentVariable\n"
                   "CollectionRules:R:Actions:3:Settings:Name=N\n"
                   "CollectionRules:R:Actions:4:Type=Execute\n"
                   "CollectionRules:R:Actions:4:Settings:Path=/bin/x\n"
                   "CollectionRules:R:Actions:4:Settings:Arguments=$(Actions.a0.ExitCode\n");
    ERROR(c, "CollectionRules:R:Actions:0:Settings:Arguments: Invalid action reference "
             "'a1.EgressPath': no earlier action is named 'a1'.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:Arguments: Invalid result reference "
             "'$(Actions.a1.ExitCode)': a CollectDump action has only the output 'EgressPath'.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:Arguments: Invalid action reference "
             "'nope.Value': no earlier action is named 'nope'.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:Arguments: Invalid action reference 'a1'.");
    ERROR(c, "CollectionRules:R:Actions:2:Settings:Arguments: Invalid action reference 'x.y.z'.");
    ERROR(c, "CollectionRules:R:Actions:3:Name: Duplicate action name 'a1'.");
    ERROR(c, "CollectionRules:R:Actions:4:Settings:Arguments: Action "
             "'CollectionRules:R:Actions:4' with setting 'Arguments' has invalid tokens.");
    assert_int_equal(c->nerrors, 7);
    /* the case-insensitive prefix found a0's ExitCode */
    assert_int_equal(c->rules[0].actions[2].ndeps, 1);
    assert_int_equal(c->rules[0].actions[2].deps[0], 0);
    rules_config_free(c);
}

static void test_rules_config_error_egress(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                                        "CollectionRules:R:Actions:0:Type=CollectGCDump\n"
                                        "CollectionRules:R:Actions:1:Type=CollectDump\n"
                                        "CollectionRules:R:Actions:1:Settings:Egress=s3\n"
                                        "CollectionRules:R:Actions:2:Type=CollectDump\n"
                                        "CollectionRules:R:Actions:2:Settings:Egress=ARTIFACTS\n");
    ERROR(c, "CollectionRules:R:Actions:0:Settings:Egress: An egress provider must be specified if "
             "there is no default egress provider.");
    /* Issue 32 item 3: a provider that is not configured is dotnet-monitor's message, as a warning:
     * its validation runs when the rule runs, so the rule stays valid and the action fails then. */
    assert_int_equal(c->nerrors, 1);
    assert_int_equal(c->nwarnings, 1);
    assert_string_equal(c->warnings[0], "CollectionRules:R:Actions:1:Settings:Egress: Egress "
                                        "provider 's3' does not exist.");
    rules_config_free(c);
    c = rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Actions:0:Type=CollectDump\n"
                   "CollectionRules:R:Actions:0:Settings:Egress=s3\n");
    NO_ERRORS(c);
    assert_true(c->rules[0].valid);
    assert_int_equal(c->nwarnings, 1);
    rules_config_free(c);
    /* Without a list of providers (NULL), names are not checked. */
    struct kvset s = {0};
    kv_lines(&s, "CollectionRules:R:Trigger:Type=Startup\n"
                 "CollectionRules:R:Actions:0:Type=CollectDump\n"
                 "CollectionRules:R:Actions:0:Settings:Egress=s3\n");
    c = load(&s, NULL, 0);
    NO_ERRORS(c);
    kv_free(&s);
    rules_config_free(c);
}

static void test_rules_config_error_aspnet(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:A:Trigger:Type=AspNetRequestCount\n"
                   "CollectionRules:A:Trigger:Settings:IncludePaths:0=/a/***/b\n"
                   "CollectionRules:B:Trigger:Type=AspNetResponseStatus\n"
                   "CollectionRules:B:Trigger:Settings:ResponseCount=0\n"
                   "CollectionRules:B:Trigger:Settings:StatusCodes:0=600\n"
                   "CollectionRules:B:Trigger:Settings:StatusCodes:1=40x\n"
                   "CollectionRules:B:Trigger:Settings:StatusCodes:2=500-400\n"
                   "CollectionRules:B:Trigger:Settings:StatusCodes:3=200-299\n"
                   "CollectionRules:B:Trigger:Settings:ExcludePaths:0=***\n"
                   "CollectionRules:C:Trigger:Type=AspNetResponseStatus\n"
                   "CollectionRules:C:Trigger:Settings:ResponseCount=1\n"
                   "CollectionRules:D:Trigger:Type=AspNetRequestDuration\n"
                   "CollectionRules:D:Trigger:Settings:RequestCount=1\n"
                   "CollectionRules:D:Trigger:Settings:RequestDuration=01:00:01\n");
    ERROR(c, "CollectionRules:A:Trigger:Settings:RequestCount: A request count must be specified "
             "if there is no default request count.");
    ERROR(c, "CollectionRules:A:Trigger:Settings:IncludePaths: Only * or **/ wildcard characters "
             "are allowed.");
    ERROR(c, "CollectionRules:B:Trigger:Settings:ResponseCount: The field ResponseCount must be "
             "between 1 and 2147483647.");
    ERROR(c, "CollectionRules:B:Trigger:Settings:StatusCodes: The field StatusCodes must be a "
             "status code or status code range between 1xx and 5xx. E.g. 200, 400-500. ('600')");
    ERROR(c, "CollectionRules:B:Trigger:Settings:StatusCodes: The field StatusCodes must be a "
             "status code or status code range between 1xx and 5xx. E.g. 200, 400-500. ('40x')");
    ERROR(c, "CollectionRules:B:Trigger:Settings:StatusCodes: The field StatusCodes must be a "
             "status code or status code range between 1xx and 5xx. E.g. 200, 400-500. "
             "('500-400')");
    ERROR(c, "CollectionRules:B:Trigger:Settings:ExcludePaths: Only * or **/ wildcard characters "
             "are allowed.");
    ERROR(c, "CollectionRules:C:Trigger:Settings:StatusCodes: The StatusCodes field is required.");
    ERROR(c,
          "CollectionRules:D:Trigger:Settings:RequestDuration: The field RequestDuration must be "
          "between 00:00:00 and 01:00:00.");
    assert_int_equal(c->nerrors, 9);
    rules_config_free(c);
}

/* dotmon's runtime triggers: defaults (CollectionRuleDefaults' window), and each bad or missing
 * setting named with its key. */
static void test_rules_config_runtime_triggers(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRuleDefaults:Triggers:SlidingWindowDuration=00:00:20\n"
                   "CollectionRules:P:Trigger:Type=gcpause\n"
                   "CollectionRules:P:Trigger:Settings:ThresholdMs=250\n"
                   "CollectionRules:G:Trigger:Type=GCCount\n"
                   "CollectionRules:G:Trigger:Settings:Count=4\n"
                   "CollectionRules:G:Trigger:Settings:Reasons:0=Induced\n"
                   "CollectionRules:G:Trigger:Settings:Reasons:1=LowMemoryHostBlocking\n"
                   "CollectionRules:E:Trigger:Type=ExceptionCount\n"
                   "CollectionRules:E:Trigger:Settings:Count=3\n"
                   "CollectionRules:E:Trigger:Settings:SlidingWindowDuration=00:05:00\n"
                   "CollectionRules:E:Trigger:Settings:ExceptionTypes:0=System.TimeoutException\n");
    NO_ERRORS(c);
    const struct rules_trigger *t = &rules_config_find(c, "P")->trigger;
    assert_int_equal(t->type, RULES_TRIGGER_GC_PAUSE);
    assert_string_equal(t->type_name, "GCPause");
    assert_int_equal(t->threshold_ms, 250);
    assert_int_equal(t->count, 1);
    assert_int_equal(t->window_ticks, 20 * SEC);
    t = &rules_config_find(c, "G")->trigger;
    assert_string_equal(t->type_name, "GCCount");
    assert_int_equal(t->count, 4);
    assert_int_equal(t->generation, 2);
    assert_int_equal(t->reason_mask, (1u << 1) | (1u << 13));
    assert_int_equal(t->window_ticks, 20 * SEC);
    t = &rules_config_find(c, "E")->trigger;
    assert_string_equal(t->type_name, "ExceptionCount");
    assert_int_equal(t->count, 3);
    assert_int_equal(t->window_ticks, 300 * SEC);
    assert_int_equal(t->n_exception_types, 1);
    assert_string_equal(t->exception_types[0], "System.TimeoutException");
    rules_config_free(c);

    c = rule_lines("CollectionRules:A:Trigger:Type=GCPause\n"
                   "CollectionRules:A:Trigger:Settings:Count=2\n"
                   "CollectionRules:B:Trigger:Type=GCPause\n"
                   "CollectionRules:B:Trigger:Settings:ThresholdMs=0\n"
                   "CollectionRules:B:Trigger:Settings:SlidingWindowDuration=00:00:00.5\n"
                   "CollectionRules:C:Trigger:Type=GCPause\n"
                   "CollectionRules:C:Trigger:Settings:ThresholdMs=1.5\n"
                   "CollectionRules:D:Trigger:Type=GCCount\n"
                   "CollectionRules:D:Trigger:Settings:Generation=3\n"
                   "CollectionRules:D:Trigger:Settings:Reasons:0=Induced\n"
                   "CollectionRules:D:Trigger:Settings:Reasons:1=Sometimes\n"
                   "CollectionRules:D:Trigger:Settings:Reasons:2=14\n"
                   "CollectionRules:E:Trigger:Type=ExceptionCount\n"
                   "CollectionRules:E:Trigger:Settings:Count=0\n"
                   "CollectionRules:F:Trigger:Type=ExceptionCount\n"
                   "CollectionRules:G:Trigger:Type=GCCount\n"
                   "CollectionRules:G:Trigger:Settings:Count=1\n"
                   "CollectionRules:G:Trigger:Settings:Reasons=Whenever\n");
    ERROR(c, "CollectionRules:A:Trigger:Settings:ThresholdMs: The ThresholdMs field is required.");
    ERROR(c, "CollectionRules:B:Trigger:Settings:ThresholdMs: The field ThresholdMs must be "
             "between 1 and 3600000.");
    ERROR(c, "CollectionRules:B:Trigger:Settings:SlidingWindowDuration: The field "
             "SlidingWindowDuration must be between 00:00:01 and 1.00:00:00.");
    ERROR(c, "CollectionRules:C:Trigger:Settings:ThresholdMs: Failed to convert configuration "
             "value '1.5' to type 'System.Int32'.");
    ERROR(c, "CollectionRules:D:Trigger:Settings:Count: The Count field is required.");
    ERROR(c,
          "CollectionRules:D:Trigger:Settings:Generation: The field Generation must be between 0 "
          "and 2.");
    ERROR(c, "CollectionRules:D:Trigger:Settings:Reasons:1: Failed to convert configuration value "
             "'Sometimes' to type 'GCReason'.");
    ERROR(c, "CollectionRules:D:Trigger:Settings:Reasons:2: Failed to convert configuration value "
             "'14' to type 'GCReason'.");
    ERROR(c, "CollectionRules:E:Trigger:Settings:Count: The field Count must be between 1 and "
             "2147483647.");
    ERROR(c, "CollectionRules:F:Trigger:Settings:Count: The Count field is required.");
    ERROR(c, "CollectionRules:G:Trigger:Settings:Reasons: Failed to convert configuration value "
             "'Whenever' to type 'GCReason'.");
    assert_int_equal(c->nerrors, 11);
    for (size_t i = 0; i < c->nrules; i++) {
        assert_false(c->rules[i].valid);
    }
    rules_config_free(c);
}

static void test_rules_config_error_filters_and_defaults(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRuleDefaults:Triggers:SlidingWindowDuration=forever\n"
                   "CollectionRuleDefaults:Limits:ActionCount=-x\n"
                   "CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Filters:0:Key=ProcessName\n"
                   "CollectionRules:R:Filters:1:Key=Color\n"
                   "CollectionRules:R:Filters:1:Value=red\n"
                   "CollectionRules:R:Filters:2:ProcessName=x\n"
                   "CollectionRules:R:Filters:2:MatchType=Fuzzy\n"
                   "CollectionRules:R:Filters:3:ProcessId=abc\n");
    ERROR(c, "CollectionRuleDefaults:Triggers:SlidingWindowDuration: Failed to convert "
             "configuration value 'forever' to type 'System.TimeSpan'.");
    ERROR(c, "CollectionRuleDefaults:Limits:ActionCount: Failed to convert configuration value "
             "'-x' to type 'System.Int32'.");
    ERROR(c, "CollectionRules:R:Filters:0: A value is required for the process filter.");
    ERROR(c, "CollectionRules:R:Filters:1:Key: Failed to convert configuration value 'Color' to "
             "type 'ProcessFilterKey'.");
    ERROR(c, "CollectionRules:R:Filters:2:MatchType: Failed to convert configuration value 'Fuzzy' "
             "to type 'ProcessFilterType'.");
    ERROR(c, "CollectionRules:R:Filters:3:ProcessId: The value 'abc' is not a valid integer.");
    assert_int_equal(c->nerrors, 6);
    rules_config_free(c);
}

/* Duplicate keys: the later entry wins; keys are case-insensitive. */
static void test_rules_config_case_and_override(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("collectionrules:r:trigger:type=eventcounter\n"
                                        "CollectionRules:R:Trigger:Settings:ProviderName=P\n"
                                        "CollectionRules:R:Trigger:Settings:CounterName=c\n"
                                        "COLLECTIONRULES:R:TRIGGER:SETTINGS:GREATERTHAN=1\n"
                                        "CollectionRules:R:Trigger:Settings:GreaterThan=2.5e1\n");
    NO_ERRORS(c);
    assert_int_equal(c->nrules, 1);
    assert_true(c->rules[0].trigger.greater_than == 25);
    assert_string_equal(c->rules[0].trigger.type_name, "EventCounter");
    rules_config_free(c);
}

/* Arrays come in numeric index order, whatever the entries' order. */
static void test_rules_config_array_order(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                                        "CollectionRules:R:Actions:10:Type=Execute\n"
                                        "CollectionRules:R:Actions:10:Settings:Path=ten\n"
                                        "CollectionRules:R:Actions:2:Type=Execute\n"
                                        "CollectionRules:R:Actions:2:Settings:Path=two\n"
                                        "CollectionRules:R:Actions:0:Type=Execute\n"
                                        "CollectionRules:R:Actions:0:Settings:Path=zero\n");
    NO_ERRORS(c);
    const struct rules_rule *r = &c->rules[0];
    assert_int_equal(r->nactions, 3);
    assert_string_equal(r->actions[0].path, "zero");
    assert_string_equal(r->actions[1].path, "two");
    assert_string_equal(r->actions[2].path, "ten");
    rules_config_free(c);
}

static void test_rules_filters_match(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:R:Trigger:Type=Startup\n"
                   "CollectionRules:R:Filters:0:Key=ProcessName\n"
                   "CollectionRules:R:Filters:0:Value=DOTNET\n"
                   "CollectionRules:R:Filters:1:CommandLine=MyApp.dll\n"
                   "CollectionRules:R:Filters:1:MatchType=Contains\n"
                   "CollectionRules:P:Trigger:Type=Startup\n"
                   "CollectionRules:P:Filters:0:Value=42\n"
                   "CollectionRules:E:Trigger:Type=Startup\n"
                   "CollectionRules:E:Filters:0:Key=ManagedEntryPointAssemblyName\n"
                   "CollectionRules:E:Filters:0:Value=App\n"
                   "CollectionRules:N:Trigger:Type=Startup\n");
    NO_ERRORS(c);
    struct rules_process p = {.pid = 42, .name = "dotnet", .command_line = "dotnet /app/myapp.dll"};
    assert_true(rules_filters_match(rules_config_find(c, "R"), &p));
    assert_true(rules_filters_match(rules_config_find(c, "P"), &p));
    assert_false(rules_filters_match(rules_config_find(c, "E"), &p));
    assert_true(rules_filters_match(rules_config_find(c, "N"), &p));
    p.entrypoint_assembly = "app";
    assert_true(rules_filters_match(rules_config_find(c, "E"), &p));
    p.pid = 43;
    p.command_line = "dotnet other.dll";
    assert_false(rules_filters_match(rules_config_find(c, "R"), &p));
    assert_false(rules_filters_match(rules_config_find(c, "P"), &p));
    p.command_line = NULL;
    assert_false(rules_filters_match(rules_config_find(c, "R"), &p));
    rules_config_free(c);
}

/* dotmon's identity filter keys (issue 34): PodName, PodNamespace, ContainerId, ContainerName, as
 * Key/Value and as short forms after dotnet-monitor's four; an unknown identity ("" or NULL)
 * matches no value. */
static void test_rules_config_filter_identity(void **state)
{
    (void)state;
    struct rules_config *c = rule_lines("CollectionRules:P:Trigger:Type=Startup\n"
                                        "CollectionRules:P:Filters:0:PodName=orders-7d4f9-x2k8q\n"
                                        "CollectionRules:P:Filters:1:Key=PodNamespace\n"
                                        "CollectionRules:P:Filters:1:Value=SHOP\n"
                                        "CollectionRules:I:Trigger:Type=Startup\n"
                                        "CollectionRules:I:Filters:0:Key=ContainerId\n"
                                        "CollectionRules:I:Filters:0:Value=3f1c0a9b7d2e\n"
                                        "CollectionRules:I:Filters:0:MatchType=Contains\n"
                                        "CollectionRules:N:Trigger:Type=Startup\n"
                                        "CollectionRules:N:Filters:0:ContainerName=api\n"
                                        "CollectionRules:F:Trigger:Type=Startup\n"
                                        "CollectionRules:F:Filters:0:ProcessName=TestApp\n"
                                        "CollectionRules:F:Filters:0:PodName=ignored\n"
                                        "CollectionRules:X:Trigger:Type=Startup\n"
                                        "CollectionRules:X:Filters:0:Key=PodLabel\n"
                                        "CollectionRules:X:Filters:0:Value=x\n");
    assert_int_equal(c->nerrors, 1); /* PodLabel is no key */
    const struct rules_rule *pr = rules_config_find(c, "P");
    assert_int_equal(pr->nfilters, 2);
    assert_int_equal(pr->filters[0].key, RULES_FILTER_POD_NAME);
    assert_int_equal(pr->filters[1].key, RULES_FILTER_POD_NAMESPACE);
    const struct rules_rule *f = rules_config_find(c, "F");
    assert_int_equal(f->nfilters, 1); /* the first short form wins */
    assert_int_equal(f->filters[0].key, RULES_FILTER_PROCESS_NAME);
    struct rules_process p = {.pid = 7, .name = "TestApp"};
    assert_false(rules_filters_match(pr, &p)); /* identity unknown */
    assert_false(rules_filters_match(rules_config_find(c, "I"), &p));
    assert_false(rules_filters_match(rules_config_find(c, "N"), &p));
    p.pod_name = "orders-7d4f9-x2k8q";
    p.pod_namespace = "shop";
    p.container_id = "3f1c0a9b7d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a";
    p.container_name = "";
    assert_true(rules_filters_match(pr, &p));
    assert_true(rules_filters_match(rules_config_find(c, "I"), &p));
    assert_false(rules_filters_match(rules_config_find(c, "N"), &p));
    p.container_name = "api";
    assert_true(rules_filters_match(rules_config_find(c, "N"), &p));
    p.pod_name = "orders-7d4f9-other";
    assert_false(rules_filters_match(pr, &p));
    rules_config_free(c);
}

/* The short forms of ProcessFilterDescriptor (dotnet-monitor's schema: ProcessId, ProcessName,
 * CommandLine, ManagedEntryPointAssemblyName): one filter per descriptor, the first given in that
 * order (blank is not given); ProcessId compares exactly whatever MatchType says; the others take
 * MatchType. The same reader serves DefaultProcess:Filters (rules_filter_list_load). */
static void test_rules_config_filter_short_forms(void **state)
{
    (void)state;
    struct rules_config *c =
        rule_lines("CollectionRules:M:Trigger:Type=Startup\n"
                   "CollectionRules:M:Filters:0:ManagedEntryPointAssemblyName=TestApp\n"
                   "CollectionRules:T:Trigger:Type=Startup\n"
                   "CollectionRules:T:Filters:0:ProcessName= \n"
                   "CollectionRules:T:Filters:0:CommandLine=other.dll\n"
                   "CollectionRules:T:Filters:0:ProcessId=42\n"
                   "CollectionRules:T:Filters:0:MatchType=Contains\n"
                   "CollectionRules:C:Trigger:Type=Startup\n"
                   "CollectionRules:C:Filters:0:ManagedEntryPointAssemblyName=est\n"
                   "CollectionRules:C:Filters:0:MatchType=Contains\n"
                   "CollectionRules:B:Trigger:Type=Startup\n"
                   "CollectionRules:B:Filters:0:ProcessName=  \n");
    ERROR(c, "CollectionRules:B:Filters:0: A value is required for the process filter.");
    assert_int_equal(c->nerrors, 1);
    const struct rules_rule *m = rules_config_find(c, "M");
    assert_int_equal(m->nfilters, 1);
    assert_int_equal(m->filters[0].key, RULES_FILTER_ENTRYPOINT_ASSEMBLY);
    assert_false(m->filters[0].contains);
    const struct rules_rule *t = rules_config_find(c, "T");
    assert_int_equal(t->nfilters, 1); /* ProcessId first; CommandLine is not read */
    assert_int_equal(t->filters[0].key, RULES_FILTER_PROCESS_ID);
    struct rules_process p = {.pid = 42, .name = "TestApp", .command_line = "TestApp"};
    assert_false(rules_filters_match(m, &p)); /* no entry point known */
    p.entrypoint_assembly = "testapp";
    assert_true(rules_filters_match(m, &p));
    assert_true(rules_filters_match(t, &p));
    assert_true(rules_filters_match(rules_config_find(c, "C"), &p));
    p.pid = 421; /* "Contains" does not apply to ProcessId */
    assert_false(rules_filters_match(t, &p));
    rules_config_free(c);

    /* DefaultProcess:Filters, both forms, through the same reader. */
    struct kvset s = {0};
    kv_lines(&s, "DefaultProcess:Filters:0:ProcessName=TestApp\n"
                 "DefaultProcess:Filters:1:Key=CommandLine\n"
                 "DefaultProcess:Filters:1:Value=app\n"
                 "DefaultProcess:Filters:1:MatchType=Contains\n"
                 "CollectionRules:X:Filters:0:ProcessId=1\n");
    struct rules_filter_list *l = NULL;
    assert_int_equal(rules_filter_list_load(s.kv, s.n, "DefaultProcess:Filters", &l), 0);
    assert_int_equal(l->nerrors, 0);
    assert_int_equal(l->nfilters, 2);
    assert_true(rules_filter_list_match(l->filters, l->nfilters, &p));
    p.name = "Other";
    assert_false(rules_filter_list_match(l->filters, l->nfilters, &p));
    rules_filter_list_free(l);
    kv_free(&s);
    s = (struct kvset){0};
    kv_lines(&s, "DefaultProcess:Filters:0:MatchType=Exact\n"
                 "DefaultProcess:Filters:1=TemplateName\n");
    assert_int_equal(rules_filter_list_load(s.kv, s.n, "DefaultProcess:Filters", &l), 0);
    assert_int_equal(l->nerrors, 2);
    assert_string_equal(l->errors[0],
                        "DefaultProcess:Filters:0: A value is required for the process filter.");
    rules_filter_list_free(l);
    kv_free(&s);
}

static void test_rules_config_empty(void **state)
{
    (void)state;
    struct rules_config *c = NULL;
    assert_int_equal(rules_config_load(NULL, 0, NULL, 0, &c), 0);
    assert_int_equal(c->nrules, 0);
    assert_int_equal(c->nerrors, 0);
    assert_null(rules_config_find(c, "x"));
    rules_config_free(c);
    rules_config_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_timespan_parse),
        cmocka_unit_test(test_rules_timespan_format),
        cmocka_unit_test(test_rules_config_doc_high_cpu),
        cmocka_unit_test(test_rules_config_artifact_name),
        cmocka_unit_test(test_rules_config_stacks),
        cmocka_unit_test(test_rules_config_exceptions),
        cmocka_unit_test(test_rules_config_doc_examples),
        cmocka_unit_test(test_rules_config_doc_env_and_filters),
        cmocka_unit_test(test_rules_config_filter_short_forms),
        cmocka_unit_test(test_rules_config_filter_identity),
        cmocka_unit_test(test_rules_config_templates),
        cmocka_unit_test(test_rules_config_defaults),
        cmocka_unit_test(test_rules_config_shortcuts),
        cmocka_unit_test(test_rules_config_trace_providers),
        cmocka_unit_test(test_rules_config_logs_and_live_metrics),
        cmocka_unit_test(test_rules_config_error_types),
        cmocka_unit_test(test_rules_config_error_values),
        cmocka_unit_test(test_rules_config_error_trace),
        cmocka_unit_test(test_rules_config_ring),
        cmocka_unit_test(test_rules_config_error_templates),
        cmocka_unit_test(test_rules_config_error_references),
        cmocka_unit_test(test_rules_config_error_egress),
        cmocka_unit_test(test_rules_config_error_aspnet),
        cmocka_unit_test(test_rules_config_runtime_triggers),
        cmocka_unit_test(test_rules_config_error_filters_and_defaults),
        cmocka_unit_test(test_rules_config_case_and_override),
        cmocka_unit_test(test_rules_config_array_order),
        cmocka_unit_test(test_rules_filters_match),
        cmocka_unit_test(test_rules_config_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
