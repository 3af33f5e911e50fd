/* SPDX-License-Identifier: MIT */
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
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "trace_config.h"

/*
 * Expected values are written out here independently of collect/trace_config.c, from the sources
 * named in each test (dotnet/diagnostics, dotnet/dotnet-monitor), so a typo in the table shows up.
 */

#define RUNTIME         "Microsoft-Windows-DotNETRuntime"
#define RUNTIME_PRIVATE "Microsoft-Windows-DotNETRuntimePrivate"
#define SAMPLER         "Microsoft-DotNETCore-SampleProfiler"
#define DIAG_SOURCE     "Microsoft-Diagnostics-DiagnosticSource"
#define TPL             "System.Threading.Tasks.TplEventSource"
#define RUNDOWN_DEFAULT 0x80020139ull

/* HttpRequestSourceConfiguration.DiagnosticFilterString, quoted because it holds ';' and '='. */
static const char http_args[] =
    "FilterAndPayloadSpecs=\""
    "Microsoft.AspNetCore/Microsoft.AspNetCore.Hosting.HttpRequestIn.Start@Activity1Start:-"
    "Request.Scheme;Request.Host;Request.PathBase;Request.QueryString;Request.Path;Request.Method;"
    "ActivityStartTime=*Activity.StartTimeUtc.Ticks;ActivityParentId=*Activity.ParentId;"
    "ActivityId=*Activity.Id;ActivitySpanId=*Activity.SpanId;ActivityTraceId=*Activity.TraceId;"
    "ActivityParentSpanId=*Activity.ParentSpanId;ActivityIdFormat=*Activity.IdFormat\r\n"
    "Microsoft.AspNetCore/Microsoft.AspNetCore.Hosting.HttpRequestIn.Stop@Activity1Stop:-"
    "ActivityId=*Activity.Id;Request.Path;Response.StatusCode;"
    "ActivityDuration=*Activity.Duration.Ticks\r\n"
    "HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut@Event:-\r\n"
    "HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut.Start@Activity2Start:-"
    "Request.RequestUri;Request.Method;Request.RequestUri.Host;Request.RequestUri.Port;"
    "ActivityStartTime=*Activity.StartTimeUtc.Ticks;ActivityId=*Activity.Id;"
    "ActivitySpanId=*Activity.SpanId;ActivityTraceId=*Activity.TraceId;"
    "ActivityParentSpanId=*Activity.ParentSpanId;ActivityIdFormat=*Activity.IdFormat;"
    "ActivityId=*Activity.Id\r\n"
    "HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut.Stop@Activity2Stop:-"
    ";ActivityDuration=*Activity.Duration.Ticks;ActivityId=*Activity.Id\r\n"
    "\"";

/* dotnet-trace ListProfilesCommandHandler "database". */
static const char database_args[] =
    "FilterAndPayloadSpecs=\""
    "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandBefore@Activity1Start:-Command;"
    "Command.CommandText;ConnectionId;Operation;Command.Connection.ServerVersion;"
    "Command.CommandTimeout;Command.CommandType;Command.Connection.ConnectionString;"
    "Command.Connection.Database;Command.Connection.DataSource;Command.Connection.PacketSize\r\n"
    "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandAfter@Activity1Stop:\r\n"
    "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuting"
    "@Activity2Start:-Command.CommandText;Command;ConnectionId;IsAsync;"
    "Command.Connection.ClientConnectionId;Command.Connection.ServerVersion;Command.CommandTimeout;"
    "Command.CommandType;Command.Connection.ConnectionString;Command.Connection.Database;"
    "Command.Connection.DataSource;Command.Connection.PacketSize\r\n"
    "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuted"
    "@Activity2Stop:"
    "\"";

struct want {
    const char *name;
    uint64_t keywords;
    uint32_t level;
    const char *arguments;
};

/* Proves the builder takes the config at its minimum version and at version 5. */
static void assert_encodes(const struct ipc_collect_config *c)
{
    uint8_t *msg = malloc(IPC_MESSAGE_MAX);
    assert_non_null(msg);
    const int versions[] = {ipc_collect_min_version(c), 5};
    for (size_t i = 0; i < 2; i++) {
        int v = versions[i];
        struct ipc_wr w;
        ipc_wr_init(&w, msg, IPC_MESSAGE_MAX);
        assert_int_equal(ipc_cmd_collect_tracing(&w, v, c), 0);
        assert_true(w.len > IPC_HEADER_SIZE);
    }
    free(msg);
}

static void assert_config(const struct trace_config *c, const struct want *want, size_t n,
                          uint64_t rundown, uint32_t buffer_mb, const char *names)
{
    assert_int_equal(c->collect.provider_count, n);
    for (size_t i = 0; i < n; i++) {
        const struct ipc_provider *p = &c->collect.providers[i];
        assert_string_equal(p->name, want[i].name);
        assert_int_equal(p->keywords, want[i].keywords);
        assert_int_equal(p->level, want[i].level);
        assert_non_null(p->arguments);
        assert_string_equal(p->arguments, want[i].arguments);
        assert_int_equal(p->event_id_count, 0);
        assert_false(p->filter_enable);
    }
    assert_int_equal(c->collect.rundown_keyword, rundown);
    assert_int_equal(c->collect.buffer_mb, buffer_mb);
    assert_int_equal(c->collect.format, 1);
    assert_false(c->collect.disable_stackwalk);
    assert_string_equal(c->profile_names, names);
    assert_encodes(&c->collect);
}

static void check_profiles(const char *list, double interval, const struct want *want, size_t n,
                           uint64_t rundown, const char *names)
{
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    int rc = trace_config_from_profiles(list, interval, &c, &err);
    if (rc != 0) {
        fail_msg("%s: %s", list ? list : "(null)", buf_cstr(&err));
    }
    assert_int_equal(buf_size(&err), 0);
    assert_config(&c, want, n, rundown, 256, names);
    trace_config_fini(&c);
    trace_config_fini(&c); /* idempotent */
    buf_fini(&err);
}

#define CHECK_PROFILES(list, interval, want, rundown, names)                                       \
    check_profiles(list, interval, want, sizeof(want) / sizeof((want)[0]), rundown, names)

/* ---- dotnet-monitor profiles ------------------------------------------------------------- */

/* CpuProfileConfiguration.cs; SampleProfiler gets the client's default keywords 0xF00000000000. */
static void test_trace_config_profile_cpu(void **state)
{
    (void)state;
    const struct want w[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                             {RUNTIME, 0x14C14FCCBDull, 4, ""}};
    CHECK_PROFILES("Cpu", 0, w, RUNDOWN_DEFAULT, "Cpu");
}

/* HttpRequestSourceConfiguration.cs: RequestRundown = true. */
static void test_trace_config_profile_http(void **state)
{
    (void)state;
    const struct want w[] = {{DIAG_SOURCE, 0x3, 5, http_args}};
    CHECK_PROFILES("Http", 0, w, RUNDOWN_DEFAULT, "Http");
}

/* LoggingSourceConfiguration.cs via TraceUtilities.cs (Trace, Formatted|Json, app filters, scopes).
 */
static void test_trace_config_profile_logs(void **state)
{
    (void)state;
    const struct want w[] = {{"Microsoft-Extensions-Logging", 0xC, 0, "FilterSpecs=UseAppFilters"},
                             {TPL, 0x80, 4, ""}};
    CHECK_PROFILES("Logs", 0, w, 0, "Logs");
}

/* MetricSourceConfiguration.cs: DefaultMetricProviders, keywords None, Informational. */
static void test_trace_config_profile_metrics(void **state)
{
    (void)state;
    const struct want w5[] = {{"System.Runtime", 0, 4, "EventCounterIntervalSec=5"},
                              {"Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=5"},
                              {"Grpc.AspNetCore.Server", 0, 4, "EventCounterIntervalSec=5"}};
    CHECK_PROFILES("Metrics", 0, w5, 0, "Metrics");
    const struct want w10[] = {{"System.Runtime", 0, 4, "EventCounterIntervalSec=10"},
                               {"Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=10"},
                               {"Grpc.AspNetCore.Server", 0, 4, "EventCounterIntervalSec=10"}};
    CHECK_PROFILES("metrics", 10, w10, 0, "Metrics");
    /* GlobalCounter:IntervalSeconds is a float: written as dotnet-monitor's float.ToString. */
    const struct want w15[] = {
        {"System.Runtime", 0, 4, "EventCounterIntervalSec=1.5"},
        {"Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=1.5"},
        {"Grpc.AspNetCore.Server", 0, 4, "EventCounterIntervalSec=1.5"}};
    CHECK_PROFILES("Metrics", 1.5, w15, 0, "Metrics");
}

/* The test's GlobalCounter:Providers: System.Runtime has 2.5 s of its own. */
static double own_interval(const void *ud, const char *provider)
{
    (void)ud;
    return strcmp(provider, "System.Runtime") == 0 ? 2.5 : 0;
}

/* TraceUtilities.cs: the Metrics profile's providers at GetProviderSpecificInterval. */
static void test_trace_config_profile_metrics_own_interval(void **state)
{
    (void)state;
    const struct want w[] = {{"System.Runtime", 0, 4, "EventCounterIntervalSec=2.5"},
                             {"Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=1.5"},
                             {"Grpc.AspNetCore.Server", 0, 4, "EventCounterIntervalSec=1.5"}};
    struct trace_config c;
    assert_int_equal(trace_config_from_profiles_with("Metrics", 1.5, own_interval, NULL, &c, NULL),
                     0);
    assert_config(&c, w, sizeof(w) / sizeof(w[0]), 0, 256, "Metrics");
    trace_config_fini(&c);
}

/* GcCollectConfiguration.cs: RundownKeyword = GC, which needs CollectTracing4. */
static void test_trace_config_profile_gccollect(void **state)
{
    (void)state;
    const struct want w[] = {{RUNTIME, 0x1, 4, ""}, {RUNTIME_PRIVATE, 0x1, 4, ""}};
    CHECK_PROFILES("GcCollect", 0, w, 0x1, "GcCollect");

    struct trace_config c;
    assert_int_equal(trace_config_from_profiles("GcCollect", 0, &c, NULL), 0);
    assert_int_equal(ipc_collect_min_version(&c.collect), 4);
    trace_config_fini(&c);
}

/* ---- dotnet-trace profiles (ListProfilesCommandHandler.cs) -------------------------------- */

static void test_trace_config_profile_dotnet_trace(void **state)
{
    (void)state;
    const struct want common[] = {{RUNTIME, 0x100003801Dull, 4, ""}};
    CHECK_PROFILES("dotnet-common", 0, common, RUNDOWN_DEFAULT, "dotnet-common");

    const struct want sampled[] = {{SAMPLER, 0xF00000000000ull, 4, ""}};
    CHECK_PROFILES("dotnet-sampled-thread-time", 0, sampled, RUNDOWN_DEFAULT,
                   "dotnet-sampled-thread-time");

    const struct want verbose[] = {{RUNTIME, 0x8003, 5, ""}};
    CHECK_PROFILES("gc-verbose", 0, verbose, RUNDOWN_DEFAULT, "gc-verbose");

    const struct want collect[] = {{RUNTIME, 0x1, 4, ""}, {RUNTIME_PRIVATE, 0x1, 4, ""}};
    CHECK_PROFILES("gc-collect", 0, collect, 0x1, "gc-collect");

    const struct want database[] = {{TPL, 0x80, 4, ""}, {DIAG_SOURCE, 0x3, 5, database_args}};
    CHECK_PROFILES("database", 0, database, RUNDOWN_DEFAULT, "database");

    /* The pre-2025 EventPipe definition of cpu-sampling. */
    const struct want cpu[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                               {RUNTIME, 0x14C14FCCBDull, 4, ""}};
    CHECK_PROFILES("cpu-sampling", 0, cpu, RUNDOWN_DEFAULT, "cpu-sampling");
}

/*
 * Default list Cpu,Http,Metrics,GcCollect (DiagController DefaultTraceProfiles): Cpu's and
 * GcCollect's DotNETRuntime merge (GC is already in the default keywords); the rundown keyword
 * 0x80020139 already holds GcCollect's 0x1.
 */
static void test_trace_config_default_list(void **state)
{
    (void)state;
    const struct want w[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                             {RUNTIME, 0x14C14FCCBDull, 4, ""},
                             {DIAG_SOURCE, 0x3, 5, http_args},
                             {"System.Runtime", 0, 4, "EventCounterIntervalSec=5"},
                             {"Microsoft.AspNetCore.Hosting", 0, 4, "EventCounterIntervalSec=5"},
                             {"Grpc.AspNetCore.Server", 0, 4, "EventCounterIntervalSec=5"},
                             {RUNTIME_PRIVATE, 0x1, 4, ""}};
    const char *names = "Cpu,Http,Metrics,GcCollect";
    CHECK_PROFILES(NULL, 0, w, RUNDOWN_DEFAULT, names);
    CHECK_PROFILES("", 0, w, RUNDOWN_DEFAULT, names);
    CHECK_PROFILES(" \t", 0, w, RUNDOWN_DEFAULT, names);
    CHECK_PROFILES(TRACE_DEFAULT_PROFILES, 0, w, RUNDOWN_DEFAULT, names);

    struct trace_config c;
    assert_int_equal(trace_config_from_profiles(NULL, 0, &c, NULL), 0);
    assert_int_equal(ipc_collect_min_version(&c.collect), 2);
    trace_config_fini(&c);
}

static void test_trace_config_merge(void **state)
{
    (void)state;
    /* Cpu + gc-verbose share DotNETRuntime: keywords OR-ed, Verbose beats Informational. */
    const struct want cpu_gc[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                                  {RUNTIME, 0x14C14FCCBDull | 0x8003, 5, ""}};
    CHECK_PROFILES("Cpu,gc-verbose", 0, cpu_gc, RUNDOWN_DEFAULT, "Cpu,gc-verbose");
    /* Order of first appearance. */
    const struct want gc_cpu[] = {{RUNTIME, 0x14C14FCCBDull | 0x8003, 5, ""},
                                  {SAMPLER, 0xF00000000000ull, 4, ""}};
    CHECK_PROFILES("gc-verbose,Cpu", 0, gc_cpu, RUNDOWN_DEFAULT, "gc-verbose,Cpu");
    /* GcCollect's rundown keyword 0x1 alone stays 0x1; with Logs (0) too. */
    const struct want gc_logs[] = {
        {RUNTIME, 0x1, 4, ""},
        {RUNTIME_PRIVATE, 0x1, 4, ""},
        {"Microsoft-Extensions-Logging", 0xC, 0, "FilterSpecs=UseAppFilters"},
        {TPL, 0x80, 4, ""}};
    CHECK_PROFILES("GcCollect,gc-collect,Logs", 0, gc_logs, 0x1, "GcCollect,gc-collect,Logs");
    /* Http and database both filter DiagnosticSource: the first profile's arguments are kept. */
    const struct want http_db[] = {{DIAG_SOURCE, 0x3, 5, http_args}, {TPL, 0x80, 4, ""}};
    CHECK_PROFILES("Http,database", 0, http_db, RUNDOWN_DEFAULT, "Http,database");
    const struct want db_http[] = {{TPL, 0x80, 4, ""}, {DIAG_SOURCE, 0x3, 5, database_args}};
    CHECK_PROFILES("database,Http", 0, db_http, RUNDOWN_DEFAULT, "database,Http");
    /* dotnet-common + gc-collect: 0x100003801D | 0x1, rundown default | 0x1. */
    const struct want common_gc[] = {{RUNTIME, 0x100003801Dull, 4, ""},
                                     {RUNTIME_PRIVATE, 0x1, 4, ""}};
    CHECK_PROFILES("dotnet-common,gc-collect", 0, common_gc, RUNDOWN_DEFAULT,
                   "dotnet-common,gc-collect");
}

static void test_trace_config_profile_names_forgiving(void **state)
{
    (void)state;
    const struct want w[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                             {RUNTIME, 0x14C14FCCBDull | 0x8003, 5, ""},
                             {DIAG_SOURCE, 0x3, 5, http_args}};
    CHECK_PROFILES(" cpu ,\tHTTP, GC-Verbose ", 0, w, RUNDOWN_DEFAULT, "Cpu,Http,gc-verbose");
    /* Repeats are taken once. */
    const struct want cpu[] = {{SAMPLER, 0xF00000000000ull, 4, ""},
                               {RUNTIME, 0x14C14FCCBDull, 4, ""}};
    CHECK_PROFILES("Cpu,CPU, cpu", 0, cpu, RUNDOWN_DEFAULT, "Cpu");
    /* Every profile at once fits in profile_names and in one message. */
    struct trace_config c;
    assert_int_equal(trace_config_from_profiles("Cpu,Http,Logs,Metrics,GcCollect,dotnet-common,"
                                                "dotnet-sampled-thread-time,gc-verbose,gc-collect,"
                                                "database,cpu-sampling",
                                                0, &c, NULL),
                     0);
    assert_string_equal(c.profile_names, "Cpu,Http,Logs,Metrics,GcCollect,dotnet-common,"
                                         "dotnet-sampled-thread-time,gc-verbose,gc-collect,"
                                         "database,cpu-sampling");
    assert_int_equal(c.collect.provider_count, 9);
    assert_int_equal(c.collect.rundown_keyword, RUNDOWN_DEFAULT);
    assert_encodes(&c.collect);
    trace_config_fini(&c);
}

static void expect_profile_error(const char *list, const char *msg)
{
    struct trace_config c;
    memset(&c, 0xAB, sizeof(c));
    struct buf err;
    buf_init(&err, 0);
    assert_int_equal(trace_config_from_profiles(list, 0, &c, &err), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&err), msg);
    assert_null(c.collect.providers);
    assert_null(c.strings);
    trace_config_fini(&c); /* safe after a failure */
    buf_fini(&err);
}

static void test_trace_config_profile_errors(void **state)
{
    (void)state;
    const char *valid =
        "valid profiles: Cpu, Http, Logs, Metrics, GcCollect, dotnet-common, "
        "dotnet-sampled-thread-time, gc-verbose, gc-collect, database, cpu-sampling";
    char msg[512];
    (void)snprintf(msg, sizeof(msg), "unknown trace profile 'Foo'; %s", valid);
    expect_profile_error("Cpu, Foo ,Http", msg);
    (void)snprintf(msg, sizeof(msg), "unknown trace profile 'thread-time'; %s", valid);
    expect_profile_error("thread-time", msg); /* collect-linux only: no EventPipe providers */
    (void)snprintf(msg, sizeof(msg), "unknown trace profile 'Cpu Http'; %s", valid);
    expect_profile_error("Cpu Http", msg);
    (void)snprintf(msg, sizeof(msg), "unknown trace profile '\?\?\?'; %s", valid);
    expect_profile_error("\x01\xc3\xa9", msg); /* control and non-ASCII bytes are not echoed */
    expect_profile_error("Cpu,,Http", "empty item in the trace profile list 'Cpu,,Http'");
    expect_profile_error("Cpu,", "empty item in the trace profile list 'Cpu,'");
    expect_profile_error(" , ", "empty item in the trace profile list ' , '");
}

/* The bytes the builder sends for a profile without arguments: "" is count 1 + NUL, like the
 * client. */
static void test_trace_config_profile_wire_bytes(void **state)
{
    (void)state;
    struct trace_config c;
    assert_int_equal(trace_config_from_profiles("dotnet-common", 0, &c, NULL), 0);
    uint8_t msg[256];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    assert_int_equal(ipc_cmd_collect_tracing(&w, ipc_collect_min_version(&c.collect), &c.collect),
                     0);
    /* 20 header + 4 buffer + 4 format + 1 rundown + 4 count + 8 keywords + 4 level
       + name (4 + 2 * 32) + arguments (4 + 2). */
    assert_int_equal(w.len, 119);
    assert_int_equal(msg[17], 0x03); /* CollectTracing2 */
    const uint8_t tail[] = {1, 0, 0, 0, 0, 0};
    assert_memory_equal(msg + w.len - 6, tail, 6);
    trace_config_fini(&c);
}

/* ---- POST /trace bodies ------------------------------------------------------------------ */

static int from_json(const char *body, struct trace_config *c, struct buf *err)
{
    return trace_config_from_json(body, strlen(body), c, err);
}

static void expect_json_error(const char *body, size_t len, const char *msg)
{
    struct trace_config c;
    memset(&c, 0xAB, sizeof(c));
    struct buf err;
    buf_init(&err, 0);
    int rc = trace_config_from_json(body, len, &c, &err);
    if (rc != AGENT_E_INVAL || strcmp(buf_cstr(&err), msg) != 0) {
        fail_msg("body %.80s: rc %d, message '%s', expected '%s'", body, rc, buf_cstr(&err), msg);
    }
    assert_null(c.collect.providers);
    assert_null(c.providers_storage);
    trace_config_fini(&c);
    buf_fini(&err);
}

#define EXPECT_JSON_ERROR(body, msg) expect_json_error(body, strlen(body), msg)

static void test_trace_config_json_minimal(void **state)
{
    (void)state;
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    /* EventPipeProvider model defaults: all keywords, Verbose; configuration defaults. */
    assert_int_equal(from_json("{\"Providers\":[{\"Name\":\"MyEventSource\"}]}", &c, &err), 0);
    const struct want w[] = {{"MyEventSource", UINT64_MAX, 5, ""}};
    assert_config(&c, w, 1, RUNDOWN_DEFAULT, 256, "custom");
    trace_config_fini(&c);
    /* Whitespace around the value is fine; unknown members are ignored at both levels. */
    assert_int_equal(
        from_json(" \n{\"providers\":[{\"name\":\"X\",\"Other\":[1,{}]}],\"Extra\":null,"
                  "\"durationSeconds\":5}\r\n",
                  &c, &err),
        0);
    assert_string_equal(c.collect.providers[0].name, "X");
    trace_config_fini(&c);
    assert_int_equal(buf_size(&err), 0);
    buf_fini(&err);
}

static void test_trace_config_json_all_fields(void **state)
{
    (void)state;
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    const char *body = "{\"PROVIDERS\":[{\"NAME\":\"Microsoft-Windows-DotNETRuntime\","
                       "\"Keywords\":\"0x14C14FCCBD\",\"EventLevel\":\"informational\","
                       "\"Arguments\":null},"
                       "{\"name\":\"System.Runtime\",\"keywords\":\"0\",\"eventLevel\":4,"
                       "\"arguments\":{\"EventCounterIntervalSec\":\"1\"}},"
                       "{\"Name\":\"Ünïcødé-Søurce\",\"Keywords\":7,\"EventLevel\":\"0\","
                       "\"Arguments\":{}}],"
                       "\"requestrundown\":false,\"BUFFERSIZEINMB\":1024}";
    assert_int_equal(from_json(body, &c, &err), 0);
    const struct want w[] = {{RUNTIME, 0x14C14FCCBDull, 4, ""},
                             {"System.Runtime", 0, 4, "EventCounterIntervalSec=1"},
                             {"Ünïcødé-Søurce", 7, 0, ""}};
    assert_config(&c, w, 3, 0, 1024, "custom");
    trace_config_fini(&c);

    /* RequestRundown true is the default keyword; BufferSizeInMB as a string (web defaults). */
    assert_int_equal(from_json("{\"Providers\":[{\"Name\":\"A\"}],\"RequestRundown\":true,"
                               "\"BufferSizeInMB\":\"1\"}",
                               &c, &err),
                     0);
    assert_int_equal(c.collect.rundown_keyword, RUNDOWN_DEFAULT);
    assert_int_equal(c.collect.buffer_mb, 1);
    trace_config_fini(&c);
    /* Providers are not merged: what the user sends is what the runtime gets. */
    assert_int_equal(from_json("{\"Providers\":[{\"Name\":\"A\",\"Keywords\":\"1\"},"
                               "{\"Name\":\"a\",\"Keywords\":\"2\"}]}",
                               &c, &err),
                     0);
    assert_int_equal(c.collect.provider_count, 2);
    assert_int_equal(c.collect.providers[1].keywords, 2);
    trace_config_fini(&c);
    buf_fini(&err);
}

static uint64_t keywords_of(const char *json_value)
{
    char body[256];
    (void)snprintf(body, sizeof(body), "{\"Providers\":[{\"Name\":\"P\",\"Keywords\":%s}]}",
                   json_value);
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    int rc = from_json(body, &c, &err);
    if (rc != 0) {
        fail_msg("%s: %s", json_value, buf_cstr(&err));
    }
    uint64_t k = c.collect.providers[0].keywords;
    trace_config_fini(&c);
    buf_fini(&err);
    return k;
}

static void test_trace_config_json_keywords(void **state)
{
    (void)state;
    assert_int_equal(keywords_of("\"0x1F\""), 0x1F);
    assert_int_equal(keywords_of("\"0XaBc\""), 0xABC);
    assert_int_equal(keywords_of("\"0xFFFFFFFFFFFFFFFF\""), UINT64_MAX);
    assert_int_equal(keywords_of("\"0x00000000000000000001\""), 1); /* leading zeros */
    assert_int_equal(keywords_of("\"123\""), 123);
    assert_int_equal(keywords_of("\"+5\""), 5);
    assert_int_equal(keywords_of("\"-1\""), UINT64_MAX);                   /* .NET long -1 */
    assert_int_equal(keywords_of("\"-9223372036854775808\""), 1ull << 63); /* long.MinValue */
    assert_int_equal(keywords_of("\"18446744073709551615\""), UINT64_MAX);
    assert_int_equal(keywords_of("0"), 0);
    assert_int_equal(keywords_of("123"), 123);
    assert_int_equal(keywords_of("4096.0"), 4096);
    assert_int_equal(keywords_of("9007199254740992"), 1ull << 53);

    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"},{\"Name\":\"Q\"},{\"Name\":\"R\","
                      "\"Keywords\":\"0xZZ\"}]}",
                      "Providers[2].Keywords: '0xZZ' is not a hex or decimal 64-bit number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"0x\"}]}",
                      "Providers[0].Keywords: '0x' is not a hex or decimal 64-bit number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"0x10000000000000000\"}]}",
                      "Providers[0].Keywords: '0x10000000000000000' is not a hex or decimal 64-bit "
                      "number");
    EXPECT_JSON_ERROR(
        "{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"18446744073709551616\"}]}",
        "Providers[0].Keywords: '18446744073709551616' is not a hex or decimal 64-bit "
        "number");
    EXPECT_JSON_ERROR(
        "{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"-9223372036854775809\"}]}",
        "Providers[0].Keywords: '-9223372036854775809' is not a hex or decimal 64-bit "
        "number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\" 12\"}]}",
                      "Providers[0].Keywords: ' 12' is not a hex or decimal 64-bit number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"1.5\"}]}",
                      "Providers[0].Keywords: '1.5' is not a hex or decimal 64-bit number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"-0x1\"}]}",
                      "Providers[0].Keywords: '-0x1' is not a hex or decimal 64-bit number");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"\"}]}",
                      "Providers[0].Keywords: must not be empty");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":\"  \"}]}",
                      "Providers[0].Keywords: must not be empty");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":null}]}",
                      "Providers[0].Keywords: must be a hex (\"0x…\") or decimal string");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":true}]}",
                      "Providers[0].Keywords: must be a hex (\"0x…\") or decimal string");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":1.5}]}",
                      "Providers[0].Keywords: the JSON number 1.5 is not an integer in 0..2^53; "
                      "pass the mask as a hex string (\"0x…\")");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":-1}]}",
                      "Providers[0].Keywords: the JSON number -1 is not an integer in 0..2^53; "
                      "pass the mask as a hex string (\"0x…\")");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Keywords\":18446744073709551615}]}",
                      "Providers[0].Keywords: the JSON number 1.8446744073709552e+19 is not an "
                      "integer in 0..2^53; pass the mask as a hex string (\"0x…\")");
}

static uint32_t level_of(const char *json_value)
{
    char body[256];
    (void)snprintf(body, sizeof(body), "{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":%s}]}",
                   json_value);
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    int rc = from_json(body, &c, &err);
    if (rc != 0) {
        fail_msg("%s: %s", json_value, buf_cstr(&err));
    }
    uint32_t l = c.collect.providers[0].level;
    trace_config_fini(&c);
    buf_fini(&err);
    return l;
}

static void test_trace_config_json_level(void **state)
{
    (void)state;
    assert_int_equal(level_of("\"LogAlways\""), 0);
    assert_int_equal(level_of("\"Critical\""), 1);
    assert_int_equal(level_of("\"Error\""), 2);
    assert_int_equal(level_of("\"warning\""), 3);
    assert_int_equal(level_of("\"INFORMATIONAL\""), 4);
    assert_int_equal(level_of("\"Verbose\""), 5);
    for (int i = 0; i <= 5; i++) {
        char v[8];
        (void)snprintf(v, sizeof(v), "%d", i);
        assert_int_equal(level_of(v), (uint32_t)i);
        (void)snprintf(v, sizeof(v), "\"%d\"", i);
        assert_int_equal(level_of(v), (uint32_t)i);
    }
    assert_int_equal(level_of("4.0"), 4);

    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":6}]}",
                      "Providers[0].EventLevel: 6 is not an event level (0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":-1}]}",
                      "Providers[0].EventLevel: -1 is not an event level (0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":2.5}]}",
                      "Providers[0].EventLevel: 2.5 is not an event level (0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":\"7\"}]}",
                      "Providers[0].EventLevel: 7 is not an event level (0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":\"Loud\"}]}",
                      "Providers[0].EventLevel: 'Loud' is not an event level (LogAlways, Critical, "
                      "Error, Warning, Informational, Verbose or 0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":\"\"}]}",
                      "Providers[0].EventLevel: '' is not an event level (LogAlways, Critical, "
                      "Error, Warning, Informational, Verbose or 0..5)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":null}]}",
                      "Providers[0].EventLevel: must be a level name or a number 0..5");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"EventLevel\":[4]}]}",
                      "Providers[0].EventLevel: must be a level name or a number 0..5");
}

static const char *arguments_of(const char *json_object, struct trace_config *c)
{
    char body[512];
    (void)snprintf(body, sizeof(body), "{\"Providers\":[{\"Name\":\"P\",\"Arguments\":%s}]}",
                   json_object);
    struct buf err;
    buf_init(&err, 0);
    int rc = from_json(body, c, &err);
    if (rc != 0) {
        fail_msg("%s: %s", json_object, buf_cstr(&err));
    }
    buf_fini(&err);
    return c->collect.providers[0].arguments;
}

static void test_trace_config_json_arguments(void **state)
{
    (void)state;
    struct trace_config c;
    /* EventPipeProvider.GetArgumentString: a key or value with ';' or '=' goes in double quotes. */
    assert_string_equal(arguments_of("{\"a\":\"1\",\"b\":\"2\"}", &c), "a=1;b=2");
    trace_config_fini(&c);
    assert_string_equal(arguments_of("{\"k;1\":\"v\",\"k=2\":\"x=y\",\"k3\":\"p;q\"}", &c),
                        "\"k;1\"=v;\"k=2\"=\"x=y\";k3=\"p;q\"");
    trace_config_fini(&c);
    /* Quotes inside are not escaped (the client does not either); empty values are kept. */
    assert_string_equal(arguments_of("{\"say\":\"\\\"hi\\\"\",\"empty\":\"\"}", &c),
                        "say=\"hi\";empty=");
    trace_config_fini(&c);
    assert_string_equal(
        arguments_of("{\"FilterAndPayloadSpecs\":\"A/B@Activity1Start:-X;Y\\r\\n\"}", &c),
        "FilterAndPayloadSpecs=\"A/B@Activity1Start:-X;Y\r\n\"");
    trace_config_fini(&c);
    assert_string_equal(arguments_of("{}", &c), "");
    trace_config_fini(&c);
    /* Keys are case-sensitive, like Dictionary<string,string>. */
    assert_string_equal(arguments_of("{\"k\":\"1\",\"K\":\"2\"}", &c), "k=1;K=2");
    trace_config_fini(&c);

    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"k\":\"1\",\"j\":\"2\","
                      "\"k\":\"3\"}}]}",
                      "Providers[0].Arguments: key 'k' is given twice");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"\":\"1\"}}]}",
                      "Providers[0].Arguments: keys must not be empty");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"n\":1}}]}",
                      "Providers[0].Arguments['n']: must be a string");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"n\":null}}]}",
                      "Providers[0].Arguments['n']: must be a string");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":[\"k=v\"]}]}",
                      "Providers[0].Arguments: must be an object of string values");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":\"k=v\"}]}",
                      "Providers[0].Arguments: must be an object of string values");
}

static void test_trace_config_json_errors(void **state)
{
    (void)state;
    /* The body itself. */
    EXPECT_JSON_ERROR("", "the body is empty; expected a JSON object with Providers");
    EXPECT_JSON_ERROR(" \r\n", "the body is empty; expected a JSON object with Providers");
    EXPECT_JSON_ERROR("{\"Providers\":[", "the body is not valid JSON (error near byte 13)");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}]} x",
                      "unexpected data after the JSON value at byte 29");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}]}{}",
                      "unexpected data after the JSON value at byte 28");
    EXPECT_JSON_ERROR("[{\"Name\":\"P\"}]", "the body must be a JSON object with Providers");
    EXPECT_JSON_ERROR("\"Providers\"", "the body must be a JSON object with Providers");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\\u0000Q\"}]}",
                      "the body contains U+0000, which no provider name or argument can carry");
    static const char raw_nul[] = "{\"Providers\":[{\"Name\":\"P\0Q\"}]}";
    expect_json_error(raw_nul, sizeof(raw_nul) - 1,
                      "the body contains U+0000, which no provider name or argument can carry");
    /* An escaped backslash before "u0000" is not a NUL. */
    struct trace_config c;
    assert_int_equal(from_json("{\"Providers\":[{\"Name\":\"P\\\\u0000\"}]}", &c, NULL), 0);
    assert_string_equal(c.collect.providers[0].name, "P\\u0000");
    trace_config_fini(&c);

    /* Top-level members. */
    EXPECT_JSON_ERROR("{}", "Providers: is required");
    EXPECT_JSON_ERROR("{\"Providers\":null}", "Providers: is required");
    EXPECT_JSON_ERROR("{\"Providers\":{\"Name\":\"P\"}}",
                      "Providers: must be an array of providers");
    EXPECT_JSON_ERROR("{\"Providers\":[]}", "Providers: must contain at least one provider");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"providers\":[{\"Name\":\"Q\"}]}",
                      "Providers: given twice");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"RequestRundown\":\"true\"}",
                      "RequestRundown: must be true or false");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"RequestRundown\":1}",
                      "RequestRundown: must be true or false");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"RequestRundown\":null}",
                      "RequestRundown: must be true or false");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":0}",
                      "BufferSizeInMB: must be in 1..1024");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":1025}",
                      "BufferSizeInMB: must be in 1..1024");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":-5}",
                      "BufferSizeInMB: must be in 1..1024");
    EXPECT_JSON_ERROR(
        "{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":\"99999999999999999999\"}",
        "BufferSizeInMB: must be in 1..1024");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":1e300}",
                      "BufferSizeInMB: 1.0000000000000001e+300 is not an integer");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":2.5}",
                      "BufferSizeInMB: 2.5 is not an integer");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":\"big\"}",
                      "BufferSizeInMB: 'big' is not an integer");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"}],\"BufferSizeInMB\":true}",
                      "BufferSizeInMB: must be an integer");

    /* Providers[i]. */
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\"},null]}", "Providers[1]: must be an object");
    EXPECT_JSON_ERROR("{\"Providers\":[\"P\"]}", "Providers[0]: must be an object");
    EXPECT_JSON_ERROR("{\"Providers\":[{}]}", "Providers[0].Name: is required");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":null}]}", "Providers[0].Name: is required");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":5}]}", "Providers[0].Name: must be a string");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"\"}]}", "Providers[0].Name: must not be empty");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\" \\t\"}]}",
                      "Providers[0].Name: must not be empty");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"name\":\"Q\"}]}",
                      "Providers[0].Name: given twice");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\xff\"}]}",
                      "Providers[0].Name: is not valid UTF-8");
    EXPECT_JSON_ERROR(
        "{\"Providers\":[{\"Name\":\"P\\ud83d\\ude00\",\"Arguments\":{\"k\":\"\xc0\x80\"}}]}",
        "Providers[0].Arguments['k']: is not valid UTF-8");
    EXPECT_JSON_ERROR("{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"\xed\xa0\x80\":\"v\"}}]}",
                      "Providers[0].Arguments: a key is not valid UTF-8");
    /* Long user text is cut in messages. */
    EXPECT_JSON_ERROR(
        "{\"Providers\":[{\"Name\":\"P\",\"Keywords\":"
        "\"0123456789012345678901234567890123456789012345678901234567890123456789\"}]}",
        "Providers[0].Keywords: '0123456789012345678901234567890123456789012345678901"
        "234567890123...' is not a hex or decimal 64-bit number");
}

/* A body of n providers named P0, P1, …. */
static char *providers_body(size_t n)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "{\"Providers\":["), 0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(
            buf_printf(&b, "%s{\"Name\":\"P%zu\",\"Keywords\":\"0x1\"}", i ? "," : "", i), 0);
    }
    assert_int_equal(buf_append_str(&b, "]}"), 0);
    char *s = buf_steal(&b, NULL);
    buf_fini(&b);
    return s;
}

static void test_trace_config_json_provider_limit(void **state)
{
    (void)state;
    char *body = providers_body(1000);
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    assert_int_equal(from_json(body, &c, &err), 0);
    assert_int_equal(c.collect.provider_count, 1000);
    assert_string_equal(c.collect.providers[999].name, "P999");
    assert_encodes(&c.collect);
    trace_config_fini(&c);
    free(body);

    body = providers_body(1001);
    expect_json_error(body, strlen(body),
                      "Providers: 1001 providers given; the runtime accepts at most 1000");
    free(body);
    buf_fini(&err);
}

/* {"Providers":[{"Name":"P","Arguments":{"k":"<len x 'a'>"}}]} */
static char *long_argument_body(size_t len)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"k\":\""),
                     0);
    assert_int_equal(buf_reserve(&b, len), 0);
    for (size_t i = 0; i < len; i++) {
        assert_int_equal(buf_append(&b, "a", 1), 0);
    }
    assert_int_equal(buf_append_str(&b, "\"}}]}"), 0);
    char *s = buf_steal(&b, NULL);
    buf_fini(&b);
    return s;
}

/*
 * CollectTracing5 size with one provider "P" and arguments "k=<L chars>":
 *   20 header + 4 session + 4 buffer + 4 format + 8 rundown + 1 stackwalk + 4 count
 *   + 8 keywords + 4 level + name (4 + 2 * 2) + arguments (4 + 2 * (L + 3)) + 5 filter = 2L + 80.
 */
static void test_trace_config_json_message_limit(void **state)
{
    (void)state;
    struct trace_config c;
    struct buf err;
    buf_init(&err, 0);
    char *body = long_argument_body(32727); /* 65534 bytes */
    assert_int_equal(from_json(body, &c, &err), 0);
    uint8_t *msg = malloc(IPC_MESSAGE_MAX);
    assert_non_null(msg);
    struct ipc_wr w;
    ipc_wr_init(&w, msg, IPC_MESSAGE_MAX);
    assert_int_equal(ipc_cmd_collect_tracing(&w, 5, &c.collect), 0);
    assert_int_equal(w.len, 65534);
    free(msg);
    trace_config_fini(&c);
    free(body);

    /* 65536 bytes as CollectTracing5, although CollectTracing2 would take 65519. */
    body = long_argument_body(32728);
    expect_json_error(body, strlen(body),
                      "the providers and arguments encode to 65536 bytes; the runtime accepts at "
                      "most 65535");
    free(body);
    body = long_argument_body(40000);
    expect_json_error(body, strlen(body),
                      "the providers and arguments encode to 80080 bytes; the runtime accepts at "
                      "most 65535");
    free(body);

    /* Non-ASCII counts in UTF-16 units: "é" is 2 bytes of UTF-8 but one unit. */
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "{\"Providers\":[{\"Name\":\"P\",\"Arguments\":{\"k\":\""),
                     0);
    for (int i = 0; i < 32727; i++) {
        assert_int_equal(buf_append_str(&b, "\xc3\xa9"), 0);
    }
    assert_int_equal(buf_append_str(&b, "\"}}]}"), 0);
    assert_int_equal(trace_config_from_json((const char *)buf_data(&b), buf_size(&b), &c, &err), 0);
    trace_config_fini(&c);
    buf_fini(&b);
    buf_fini(&err);
}

static void test_trace_config_fini_is_safe(void **state)
{
    (void)state;
    trace_config_fini(NULL);
    struct trace_config c;
    memset(&c, 0, sizeof(c));
    trace_config_fini(&c);
    trace_config_fini(&c);
    /* err may be NULL: the code alone tells what went wrong. */
    assert_int_equal(trace_config_from_profiles("nope", 0, &c, NULL), AGENT_E_INVAL);
    assert_int_equal(from_json("{}", &c, NULL), AGENT_E_INVAL);
    trace_config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_config_profile_cpu),
        cmocka_unit_test(test_trace_config_profile_http),
        cmocka_unit_test(test_trace_config_profile_logs),
        cmocka_unit_test(test_trace_config_profile_metrics),
        cmocka_unit_test(test_trace_config_profile_metrics_own_interval),
        cmocka_unit_test(test_trace_config_profile_gccollect),
        cmocka_unit_test(test_trace_config_profile_dotnet_trace),
        cmocka_unit_test(test_trace_config_default_list),
        cmocka_unit_test(test_trace_config_merge),
        cmocka_unit_test(test_trace_config_profile_names_forgiving),
        cmocka_unit_test(test_trace_config_profile_errors),
        cmocka_unit_test(test_trace_config_profile_wire_bytes),
        cmocka_unit_test(test_trace_config_json_minimal),
        cmocka_unit_test(test_trace_config_json_all_fields),
        cmocka_unit_test(test_trace_config_json_keywords),
        cmocka_unit_test(test_trace_config_json_level),
        cmocka_unit_test(test_trace_config_json_arguments),
        cmocka_unit_test(test_trace_config_json_errors),
        cmocka_unit_test(test_trace_config_json_provider_limit),
        cmocka_unit_test(test_trace_config_json_message_limit),
        cmocka_unit_test(test_trace_config_fini_is_safe),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
