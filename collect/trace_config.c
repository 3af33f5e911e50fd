/* SPDX-License-Identifier: MIT */
#include "trace_config.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ascii.h"
#include "err.h"
#include "ev_request_specs.h"
#include "num.h"

/*
 * Trace requests → CollectTracing configuration (docs/ipc.md §4.2, docs/profiles.md).
 *
 * Every provider value below is copied from the source that defines it; the file is named next to
 * each profile. Two facts that docs/profiles.md §6 rounds off:
 *  - A provider built without keywords by the official client (SampleProfiler in Cpu,
 *    cpu-sampling and dotnet-sampled-thread-time) carries 0xF00000000000, the default of
 *    NETCore.Client's EventPipeProvider constructor, not 0. SampleProfiler events have no
 *    keywords, so both select the same events; we send what dotnet-monitor and dotnet-trace send.
 *  - A provider without arguments is sent as the empty string (count 1), not as an absent string,
 *    because the client always writes GetArgumentString().
 */

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define LEVEL_LOGALWAYS     0u
#define LEVEL_INFORMATIONAL 4u
#define LEVEL_VERBOSE       5u

#define PROV_RUNTIME         "Microsoft-Windows-DotNETRuntime"
#define PROV_RUNTIME_PRIVATE "Microsoft-Windows-DotNETRuntimePrivate"
#define PROV_SAMPLE_PROFILER "Microsoft-DotNETCore-SampleProfiler"
#define PROV_DIAG_SOURCE     "Microsoft-Diagnostics-DiagnosticSource"
#define PROV_TPL             "System.Threading.Tasks.TplEventSource"
#define PROV_LOGGING         "Microsoft-Extensions-Logging"

/* NETCore.Client EventPipeProvider(name, level, keywords = 0xF00000000000). */
#define KW_CLIENT_DEFAULT 0xF00000000000ull
/* TraceEvent ClrTraceEventParser.Keywords.Default (GC|Type|GCHeapSurvivalAndMovement|Binder|…). */
#define KW_CLR_DEFAULT 0x14C14FCCBDull
/* ClrTraceEventParser.Keywords.GC; also the gc-collect rundown keyword. */
#define KW_GC 0x1ull
/* dotnet-trace dotnet-common:
 * GC|AssemblyLoader|Loader|Jit|Exception|Threading|ILToNativeMap|Compilation. */
#define KW_DOTNET_COMMON 0x100003801Dull
/* GC|GCHandle|Exception. */
#define KW_GC_VERBOSE 0x8003ull
/* DiagnosticSourceEventSource Messages|Events. */
#define KW_DIAG_MESSAGES_EVENTS 0x3ull
/* TplEtwProviderTraceEventParser.Keywords.TasksFlowActivityIds. */
#define KW_TASKS_FLOW_ACTIVITY_IDS 0x80ull
/* LoggingEventSource FormattedMessage (0x4) | JsonMessage (0x8). */
#define KW_LOG_FORMATTED_JSON 0xCull

/* dotnet-trace ListProfilesCommandHandler, profile "database". */
static const char database_filter_specs[] =
    "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandBefore@Activity1Start:-"
    "Command;Command.CommandText;ConnectionId;Operation;Command.Connection.ServerVersion"
    ";Command.CommandTimeout;Command.CommandType;Command.Connection.ConnectionString"
    ";Command.Connection.Database;Command.Connection.DataSource;Command.Connection.PacketSize\r\n"
    "SqlClientDiagnosticListener/System.Data.SqlClient.WriteCommandAfter@Activity1Stop:\r\n"
    "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuting"
    "@Activity2Start:-Command.CommandText;Command;ConnectionId;IsAsync"
    ";Command.Connection.ClientConnectionId;Command.Connection.ServerVersion;Command.CommandTimeout"
    ";Command.CommandType;Command.Connection.ConnectionString;Command.Connection.Database"
    ";Command.Connection.DataSource;Command.Connection.PacketSize\r\n"
    "Microsoft.EntityFrameworkCore/Microsoft.EntityFrameworkCore.Database.Command.CommandExecuted"
    "@Activity2Stop:";

/*
 * One provider of a profile. Its arguments are a single key/value pair (every profile has at most
 * one), quoted like the client's GetArgumentString; a key with a NULL value stands for the
 * Metrics interval, known only at request time.
 */
struct profile_provider {
    const char *name;
    uint64_t keywords;
    uint32_t level;
    const char *arg_key;   /* NULL: no arguments */
    const char *arg_value; /* NULL with arg_key: the EventCounter interval */
};

struct profile {
    const char *name;
    uint64_t rundown_keyword;
    const struct profile_provider *providers;
    size_t provider_count;
};

/* dotnet/diagnostics Monitoring.EventPipe/Configuration/CpuProfileConfiguration.cs. */
static const struct profile_provider cpu_providers[] = {
    {PROV_SAMPLE_PROFILER, KW_CLIENT_DEFAULT, LEVEL_INFORMATIONAL, NULL, NULL},
    {PROV_RUNTIME, KW_CLR_DEFAULT, LEVEL_INFORMATIONAL, NULL, NULL},
};

/* HttpRequestSourceConfiguration.cs. */
static const struct profile_provider http_providers[] = {
    {PROV_DIAG_SOURCE, KW_DIAG_MESSAGES_EVENTS, LEVEL_VERBOSE, "FilterAndPayloadSpecs",
     ev_request_filter_specs},
};

/*
 * LoggingSourceConfiguration.cs as dotnet-monitor's TraceUtilities.cs builds it: LogLevel.Trace
 * (→ LogAlways), FormattedMessage|JsonMessage, no filter specs, useAppFilters and collectScopes.
 */
static const struct profile_provider logs_providers[] = {
    {PROV_LOGGING, KW_LOG_FORMATTED_JSON, LEVEL_LOGALWAYS, "FilterSpecs", "UseAppFilters"},
    {PROV_TPL, KW_TASKS_FLOW_ACTIVITY_IDS, LEVEL_INFORMATIONAL, NULL, NULL},
};

/*
 * MetricSourceConfiguration.cs with MonitoringSourceConfiguration.DefaultMetricProviders, all of
 * MetricType.EventCounter (TraceUtilities.cs), so no System.Diagnostics.Metrics provider.
 */
static const struct profile_provider metrics_providers[] = {
    {"System.Runtime", 0, LEVEL_INFORMATIONAL, "EventCounterIntervalSec", NULL},
    {"Microsoft.AspNetCore.Hosting", 0, LEVEL_INFORMATIONAL, "EventCounterIntervalSec", NULL},
    {"Grpc.AspNetCore.Server", 0, LEVEL_INFORMATIONAL, "EventCounterIntervalSec", NULL},
};

/* GcCollectConfiguration.cs and dotnet-trace's gc-collect (identical providers). */
static const struct profile_provider gc_collect_providers[] = {
    {PROV_RUNTIME, KW_GC, LEVEL_INFORMATIONAL, NULL, NULL},
    {PROV_RUNTIME_PRIVATE, KW_GC, LEVEL_INFORMATIONAL, NULL, NULL},
};

/* dotnet-trace CommandLine/Commands/ListProfilesCommandHandler.cs (current). */
static const struct profile_provider dotnet_common_providers[] = {
    {PROV_RUNTIME, KW_DOTNET_COMMON, LEVEL_INFORMATIONAL, NULL, NULL},
};

static const struct profile_provider sampled_thread_time_providers[] = {
    {PROV_SAMPLE_PROFILER, KW_CLIENT_DEFAULT, LEVEL_INFORMATIONAL, NULL, NULL},
};

static const struct profile_provider gc_verbose_providers[] = {
    {PROV_RUNTIME, KW_GC_VERBOSE, LEVEL_VERBOSE, NULL, NULL},
};

static const struct profile_provider database_providers[] = {
    {PROV_TPL, KW_TASKS_FLOW_ACTIVITY_IDS, LEVEL_INFORMATIONAL, NULL, NULL},
    {PROV_DIAG_SOURCE, KW_DIAG_MESSAGES_EVENTS, LEVEL_VERBOSE, "FilterAndPayloadSpecs",
     database_filter_specs},
};

#define PROFILE(n, rundown, list)                                                                  \
    {                                                                                              \
        n, rundown, list, ARRAY_SIZE(list)                                                         \
    }

/*
 * Rundown keywords: MonitoringSourceConfiguration defaults to
 * EventPipeSession.DefaultRundownKeyword (Cpu, and Http which sets RequestRundown = true); Logging
 * and Metric configurations set RequestRundown = false (0); GcCollectConfiguration sets
 * RundownKeyword = GC. dotnet-trace's Profile defaults to DefaultRundownKeyword and gc-collect sets
 * GC. The pre-2025 cpu-sampling is ListProfilesCommandHandler.cs before the collect-linux rework
 * (same providers as Cpu).
 */
static const struct profile profile_table[] = {
    PROFILE("Cpu", IPC_RUNDOWN_DEFAULT, cpu_providers),
    PROFILE("Http", IPC_RUNDOWN_DEFAULT, http_providers),
    PROFILE("Logs", 0, logs_providers),
    PROFILE("Metrics", 0, metrics_providers),
    PROFILE("GcCollect", KW_GC, gc_collect_providers),
    PROFILE("dotnet-common", IPC_RUNDOWN_DEFAULT, dotnet_common_providers),
    PROFILE("dotnet-sampled-thread-time", IPC_RUNDOWN_DEFAULT, sampled_thread_time_providers),
    PROFILE("gc-verbose", IPC_RUNDOWN_DEFAULT, gc_verbose_providers),
    PROFILE("gc-collect", KW_GC, gc_collect_providers),
    PROFILE("database", IPC_RUNDOWN_DEFAULT, database_providers),
    PROFILE("cpu-sampling", IPC_RUNDOWN_DEFAULT, cpu_providers),
};

/* Enough for every provider of every profile, each profile taken once. */
#define MAX_PROFILE_PROVIDERS 32

/* A provider while a config is being built; its arguments live in a scratch buffer. */
struct pending {
    const char *name; /* outlives the build: static, or inside the parsed JSON */
    uint64_t keywords;
    uint32_t level;
    bool has_args;
    size_t args_off; /* NUL-terminated string at this offset of the scratch buffer */
};

/* ---- small helpers ----------------------------------------------------------------------- */

static void errorf(struct buf *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void errorf(struct buf *err, const char *fmt, ...)
{
    if (err != NULL) {
        va_list ap;
        va_start(ap, fmt);
        (void)buf_vprintf(err, fmt, ap); /* a lost message must not hide the 400 itself */
        va_end(ap);
    }
}

/*
 * Appends a message for the 400 detail and yields AGENT_E_INVAL. A macro, so that the constant
 * result is visible at each use (the static analyzer does not follow variadic calls).
 */
#define FAIL(err, ...) (errorf((err), __VA_ARGS__), AGENT_E_INVAL)

static bool is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static bool all_blank_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_blank(s[i])) {
            return false;
        }
    }
    return true;
}

static bool all_blank(const char *s)
{
    for (; *s != '\0'; s++) {
        if (!is_blank(*s)) {
            return false;
        }
    }
    return true;
}

/*
 * Copies user text for an error message: at most 64 bytes, printable ASCII kept and anything else
 * shown as '?', so the message stays short, valid UTF-8 and free of control characters.
 */
#define SHOW_MAX 64
static const char *show(char out[SHOW_MAX + 4], const char *s, size_t n)
{
    size_t k = 0;
    for (; k < n && k < SHOW_MAX; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c >= 0x20 && c < 0x7F) {
            out[k] = s[k];
        } else {
            out[k] = '?';
        }
    }
    if (k < n) {
        out[k++] = '.';
        out[k++] = '.';
        out[k++] = '.';
    }
    out[k] = '\0';
    return out;
}

/* Appends s to b, in double quotes if it holds ';' or '=' (EventPipeProvider.GetArgumentString). */
static int append_arg_token(struct buf *b, const char *s)
{
    bool quote = strpbrk(s, ";=") != NULL;
    int rc = quote ? buf_append(b, "\"", 1) : 0;
    rc = rc ? rc : buf_append_str(b, s);
    rc = rc ? rc : (quote ? buf_append(b, "\"", 1) : 0);
    return rc;
}

static int append_arg_pair(struct buf *b, const char *key, const char *value, bool first)
{
    int rc = first ? 0 : buf_append(b, ";", 1);
    rc = rc ? rc : append_arg_token(b, key);
    rc = rc ? rc : buf_append(b, "=", 1);
    rc = rc ? rc : append_arg_token(b, value);
    return rc;
}

/* ---- building the owned config ----------------------------------------------------------- */

/*
 * Proves that the runtime can be sent this config: accepted by the real builder (which applies the
 * ipc.md §4.2 limits: 1..1000 providers, level <= 5, non-empty names, valid UTF-8) and at most
 * 65535 bytes as CollectTracing5, the largest form of the message (a u32 session type, a u64
 * rundown keyword and an event filter per provider). A caller that falls back from version 5 to the
 * oldest version that can express c only sends fewer bytes, so this covers every version it may
 * try.
 */
static int check_encodable(const struct ipc_collect_config *c, struct buf *err)
{
    size_t size;
    int rc = ipc_collect_encoded_size(5, c, &size);
    if (rc != 0) {
        return FAIL(err, "the trace configuration cannot be encoded: %s", agent_strerror(rc));
    }
    if (size > IPC_MESSAGE_MAX) {
        return FAIL(err,
                    "the providers and arguments encode to %zu bytes; the runtime accepts at "
                    "most %u",
                    size, IPC_MESSAGE_MAX);
    }
    return 0;
}

/*
 * Copies the pending providers (names, and arguments from scratch) into storage owned by out and
 * fills out->collect. On failure out holds nothing.
 */
static int config_commit(struct trace_config *out, const struct pending *list, size_t n,
                         const struct buf *scratch, uint32_t buffer_mb, uint64_t rundown_keyword,
                         struct buf *err)
{
    assert(n > 0 && n <= TRACE_MAX_PROVIDERS);
    const char *args_base = (const char *)buf_data(scratch);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        total += strlen(list[i].name) + 1;
        total += (list[i].has_args ? strlen(args_base + list[i].args_off) : 0) + 1;
    }
    struct ipc_provider *providers = calloc(n, sizeof(*providers));
    char *strings = malloc(total);
    if (providers == NULL || strings == NULL) {
        free(providers);
        free(strings);
        return -ENOMEM;
    }
    char *o = strings;
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(list[i].name) + 1;
        memcpy(o, list[i].name, len);
        providers[i].name = o;
        o += len;
        const char *args = list[i].has_args ? args_base + list[i].args_off : "";
        len = strlen(args) + 1;
        memcpy(o, args, len);
        providers[i].arguments = o;
        o += len;
        providers[i].keywords = list[i].keywords;
        providers[i].level = list[i].level;
    }
    out->collect.buffer_mb = buffer_mb;
    out->collect.format = 1; /* NetTrace */
    out->collect.rundown_keyword = rundown_keyword;
    out->collect.disable_stackwalk = false;
    out->collect.providers = providers;
    out->collect.provider_count = n;
    out->providers_storage = providers;
    out->strings = strings;
    out->nstrings = total;
    int rc = check_encodable(&out->collect, err);
    if (rc != 0) {
        trace_config_fini(out);
    }
    return rc;
}

void trace_config_fini(struct trace_config *c)
{
    if (c == NULL) {
        return;
    }
    free(c->providers_storage);
    free(c->strings);
    memset(c, 0, sizeof(*c));
}

/* ---- profiles ---------------------------------------------------------------------------- */

/* LogAlways (0) enables every level, so it ranks above Verbose (5). */
static uint32_t level_rank(uint32_t level)
{
    return level == LEVEL_LOGALWAYS ? LEVEL_VERBOSE + 1 : level;
}

/*
 * Adds p to list, merging it into an earlier entry for the same provider (names compared
 * case-insensitively, like dotnet-trace's OrdinalIgnoreCase dictionary). Keywords are OR-ed and
 * the more verbose level wins, as dotnet-trace's MergeProviderConfigs does. For arguments the
 * first entry that has any keeps them: dotnet-trace throws when both have arguments, and
 * dotnet-monitor does not merge at all; keeping the first (e.g. Http's DiagnosticSource filter
 * over database's) means a profile list never fails because of a combination.
 */
static void pending_add(struct pending *list, size_t *n, const struct pending *p)
{
    for (size_t i = 0; i < *n; i++) {
        if (ascii_ieq(list[i].name, p->name)) {
            list[i].keywords |= p->keywords;
            if (level_rank(p->level) > level_rank(list[i].level)) {
                list[i].level = p->level;
            }
            if (!list[i].has_args && p->has_args) {
                list[i].has_args = true;
                list[i].args_off = p->args_off;
            }
            return;
        }
    }
    assert(*n < MAX_PROFILE_PROVIDERS);
    list[(*n)++] = *p;
}

static const struct profile *profile_find(const char *s, size_t n)
{
    for (size_t i = 0; i < ARRAY_SIZE(profile_table); i++) {
        if (ascii_ieq_n(s, n, profile_table[i].name)) {
            return &profile_table[i];
        }
    }
    return NULL;
}

static int fail_unknown_profile(struct buf *err, const char *s, size_t n)
{
    char shown[SHOW_MAX + 4];
    int rc = FAIL(err, "unknown trace profile '%s'; valid profiles: ", show(shown, s, n));
    for (size_t i = 0; err != NULL && i < ARRAY_SIZE(profile_table); i++) {
        (void)buf_printf(err, "%s%s", i ? ", " : "", profile_table[i].name);
    }
    return rc;
}

/*
 * Splits the list, trims each item and resolves it; a repeated profile is taken once (as .NET's
 * flags enum parses "Cpu,Cpu"), an empty item is rejected because it usually hides a typo.
 */
static int parse_profile_list(const char *list, const struct profile **chosen, size_t *nchosen,
                              struct buf *err)
{
    *nchosen = 0;
    const char *p = list;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *s = p;
        while (len > 0 && is_blank(*s)) {
            s++;
            len--;
        }
        while (len > 0 && is_blank(s[len - 1])) {
            len--;
        }
        if (len == 0) {
            char shown[SHOW_MAX + 4];
            return FAIL(err, "empty item in the trace profile list '%s'",
                        show(shown, list, strlen(list)));
        }
        const struct profile *prof = profile_find(s, len);
        if (prof == NULL) {
            return fail_unknown_profile(err, s, len);
        }
        bool seen = false;
        for (size_t i = 0; i < *nchosen; i++) {
            seen = seen || chosen[i] == prof;
        }
        if (!seen) {
            assert(*nchosen < ARRAY_SIZE(profile_table));
            chosen[(*nchosen)++] = prof;
        }
        if (comma == NULL) {
            return 0;
        }
        p = comma + 1;
    }
}

int trace_config_from_profiles(const char *profiles, double metrics_interval_s,
                               struct trace_config *out, struct buf *err)
{
    return trace_config_from_profiles_with(profiles, metrics_interval_s, NULL, NULL, out, err);
}

int trace_config_from_profiles_with(const char *profiles, double metrics_interval_s,
                                    trace_provider_interval_fn per_provider, const void *ud,
                                    struct trace_config *out, struct buf *err)
{
    memset(out, 0, sizeof(*out));
    const char *list = profiles;
    if (list == NULL || all_blank(list)) {
        list = TRACE_DEFAULT_PROFILES;
    }
    const struct profile *chosen[ARRAY_SIZE(profile_table)];
    size_t nchosen;
    int rc = parse_profile_list(list, chosen, &nchosen, err);
    if (rc != 0) {
        return rc;
    }

    char interval[32];
    if (num_format_float32(interval, sizeof(interval),
                           metrics_interval_s > 0 ? metrics_interval_s
                                                  : TRACE_DEFAULT_METRICS_INTERVAL_S) != 0) {
        return AGENT_E_INVAL; /* below 1e-9 or over 1e9 s: not a setting dotmon accepts */
    }

    struct buf scratch;
    buf_init(&scratch, 0);
    struct pending pend[MAX_PROFILE_PROVIDERS];
    size_t npend = 0;
    uint64_t rundown = 0;
    char names[sizeof(out->profile_names)] = "";
    size_t names_len = 0;
    for (size_t i = 0; i < nchosen; i++) {
        const struct profile *prof = chosen[i];
        rundown |= prof->rundown_keyword;
        for (size_t j = 0; j < prof->provider_count; j++) {
            const struct profile_provider *pp = &prof->providers[j];
            struct pending p = {pp->name, pp->keywords, pp->level, false, 0};
            if (pp->arg_key != NULL) {
                /* No value of its own: the counter interval, the provider's own if it has one. */
                const char *value = pp->arg_value != NULL ? pp->arg_value : interval;
                char own[32];
                double s =
                    pp->arg_value == NULL && per_provider != NULL ? per_provider(ud, pp->name) : 0;
                if (s > 0 && num_format_float32(own, sizeof(own), s) == 0) {
                    value = own;
                }
                p.has_args = true;
                p.args_off = buf_size(&scratch);
                rc = append_arg_pair(&scratch, pp->arg_key, value, true);
                rc = rc ? rc : buf_append(&scratch, "", 1);
                if (rc != 0) {
                    goto out;
                }
            }
            pending_add(pend, &npend, &p);
        }
        /* Every name fits: all eleven joined take 116 bytes. */
        size_t nlen = strlen(prof->name);
        assert(names_len + nlen + 2 <= sizeof(names));
        if (i > 0) {
            names[names_len++] = ',';
        }
        memcpy(names + names_len, prof->name, nlen + 1);
        names_len += nlen;
    }
    rc = config_commit(out, pend, npend, &scratch, TRACE_DEFAULT_BUFFER_MB, rundown, err);
    if (rc == 0) {
        memcpy(out->profile_names, names, sizeof(names));
    }
out:
    buf_fini(&scratch);
    return rc;
}

/* ---- POST /trace body -------------------------------------------------------------------- */

static const char *const level_names[] = {"LogAlways", "Critical",      "Error",
                                          "Warning",   "Informational", "Verbose"};

/*
 * Finds the members named in names (case-insensitively, as ASP.NET binds them) among obj's
 * children. Other members are ignored, like ASP.NET ignores unknown properties; a known member
 * given twice is an error, because which one ASP.NET would take depends on its version.
 */
static int get_members(const cJSON *obj, const char *const *names, const cJSON **found, size_t n,
                       const char *path, struct buf *err)
{
    for (size_t i = 0; i < n; i++) {
        found[i] = NULL;
    }
    const cJSON *m;
    cJSON_ArrayForEach(m, obj)
    {
        for (size_t i = 0; m->string != NULL && i < n; i++) {
            if (!ascii_ieq(m->string, names[i])) {
                continue;
            }
            if (found[i] != NULL) {
                return FAIL(err, "%s%s%s: given twice", path, *path ? "." : "", names[i]);
            }
            found[i] = m;
        }
    }
    return 0;
}

/* Digits of base 10 or 16, whole string, no sign; false on anything else or overflow. */
static bool parse_u64_digits(const char *s, unsigned base, uint64_t *out)
{
    return num_parse_u64_str(s, base, UINT64_MAX, out) == 0;
}

/*
 * dotnet-monitor's IntegerOrHexStringAttribute: "0x"/"0X" + hex digits, or a decimal with an
 * optional sign ('-' gives the two's complement, as a .NET long cast to the wire's uint64).
 * Decimals up to UINT64_MAX are accepted too, a superset of .NET's long.
 */
static bool parse_keywords_string(const char *s, uint64_t *out)
{
    if ((s[0] == '0') && (s[1] == 'x' || s[1] == 'X')) {
        return parse_u64_digits(s + 2, 16, out);
    }
    bool negative = s[0] == '-';
    if (s[0] == '-' || s[0] == '+') {
        s++;
    }
    uint64_t mag;
    if (!parse_u64_digits(s, 10, &mag)) {
        return false;
    }
    if (negative && mag > (1ull << 63)) {
        return false;
    }
    *out = negative ? (uint64_t)0 - mag : mag;
    return true;
}

/* A JSON number that is an integer in [lo, hi] (hi <= 2^53, where doubles are exact). */
static bool json_integer(const cJSON *item, double lo, double hi, int64_t *out)
{
    double v = item->valuedouble;
    if (!(v >= lo && v <= hi)) {
        return false; /* also NaN */
    }
    int64_t i = (int64_t)v;
    if ((double)i != v) {
        return false;
    }
    *out = i;
    return true;
}

#define JSON_EXACT_MAX 9007199254740992.0 /* 2^53 */

static int parse_keywords(const cJSON *item, const char *path, uint64_t *out, struct buf *err)
{
    char shown[SHOW_MAX + 4];
    if (cJSON_IsNumber(item)) {
        int64_t v;
        if (!json_integer(item, 0, JSON_EXACT_MAX, &v)) {
            return FAIL(err,
                        "%s.Keywords: the JSON number %.17g is not an integer in 0..2^53; pass "
                        "the mask as a hex string (\"0x…\")",
                        path, item->valuedouble);
        }
        *out = (uint64_t)v;
        return 0;
    }
    if (!cJSON_IsString(item)) {
        return FAIL(err, "%s.Keywords: must be a hex (\"0x…\") or decimal string", path);
    }
    const char *s = item->valuestring;
    if (all_blank(s)) {
        return FAIL(err, "%s.Keywords: must not be empty", path);
    }
    if (!parse_keywords_string(s, out)) {
        return FAIL(err, "%s.Keywords: '%s' is not a hex or decimal 64-bit number", path,
                    show(shown, s, strlen(s)));
    }
    return 0;
}

static int parse_level(const cJSON *item, const char *path, uint32_t *out, struct buf *err)
{
    char shown[SHOW_MAX + 4];
    if (cJSON_IsNumber(item)) {
        int64_t v;
        if (!json_integer(item, 0, LEVEL_VERBOSE, &v)) {
            return FAIL(err, "%s.EventLevel: %.17g is not an event level (0..5)", path,
                        item->valuedouble);
        }
        *out = (uint32_t)v;
        return 0;
    }
    if (!cJSON_IsString(item)) {
        return FAIL(err, "%s.EventLevel: must be a level name or a number 0..5", path);
    }
    const char *s = item->valuestring;
    uint64_t v;
    if (parse_u64_digits(s, 10, &v)) {
        if (v > LEVEL_VERBOSE) {
            return FAIL(err, "%s.EventLevel: %s is not an event level (0..5)", path,
                        show(shown, s, strlen(s)));
        }
        *out = (uint32_t)v;
        return 0;
    }
    for (size_t i = 0; i < ARRAY_SIZE(level_names); i++) {
        if (ascii_ieq(s, level_names[i])) {
            *out = (uint32_t)i;
            return 0;
        }
    }
    return FAIL(err,
                "%s.EventLevel: '%s' is not an event level (LogAlways, Critical, Error, "
                "Warning, Informational, Verbose or 0..5)",
                path, show(shown, s, strlen(s)));
}

static int fail_utf8(struct buf *err, const char *path, const char *field)
{
    return FAIL(err, "%s%s%s: is not valid UTF-8", path, *path ? "." : "", field);
}

static bool valid_utf8(const char *s)
{
    return ipc_string_encodable(s);
}

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
 * Arguments: an object of string → string, appended to scratch as "k=v;k2=v2" plus a NUL.
 * Repeated keys are found by sorting, so a huge object costs n log n, not n^2.
 */
static int parse_arguments(const cJSON *obj, const char *path, struct buf *scratch, struct buf *err)
{
    char shown[SHOW_MAX + 4];
    int n = cJSON_GetArraySize(obj);
    const char **keys = NULL;
    int rc = 0;
    if (n > 0) {
        keys = calloc((size_t)n, sizeof(*keys));
        if (keys == NULL) {
            return -ENOMEM;
        }
    }
    size_t nkeys = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, obj)
    {
        const char *key = m->string ? m->string : "";
        if (key[0] == '\0') {
            rc = FAIL(err, "%s.Arguments: keys must not be empty", path);
            goto out;
        }
        if (!valid_utf8(key)) {
            rc = FAIL(err, "%s.Arguments: a key is not valid UTF-8", path);
            goto out;
        }
        if (!cJSON_IsString(m)) {
            rc = FAIL(err, "%s.Arguments['%s']: must be a string", path,
                      show(shown, key, strlen(key)));
            goto out;
        }
        if (!valid_utf8(m->valuestring)) {
            rc = FAIL(err, "%s.Arguments['%s']: is not valid UTF-8", path,
                      show(shown, key, strlen(key)));
            goto out;
        }
        assert(keys != NULL && nkeys < (size_t)n);
        keys[nkeys] = key;
        rc = append_arg_pair(scratch, key, m->valuestring, nkeys == 0);
        nkeys++;
        if (rc != 0) {
            goto out;
        }
    }
    if (nkeys > 1) {
        qsort(keys, nkeys, sizeof(*keys), compare_strings);
        for (size_t i = 1; i < nkeys; i++) {
            if (strcmp(keys[i - 1], keys[i]) == 0) {
                rc = FAIL(err, "%s.Arguments: key '%s' is given twice", path,
                          show(shown, keys[i], strlen(keys[i])));
                goto out;
            }
        }
    }
out:
    free(keys);
    return rc;
}

/* One element of Providers (Models/EventPipeProvider.cs). */
static int parse_provider(const cJSON *item, size_t index, struct pending *p, struct buf *scratch,
                          struct buf *err)
{
    char path[32];
    int plen = snprintf(path, sizeof(path), "Providers[%zu]", index);
    if (plen < 0 || (size_t)plen >= sizeof(path)) {
        return AGENT_E_INVAL; /* index < 1000: cannot happen */
    }
    if (!cJSON_IsObject(item)) {
        return FAIL(err, "%s: must be an object", path);
    }
    static const char *const names[] = {"Name", "Keywords", "EventLevel", "Arguments"};
    const cJSON *m[ARRAY_SIZE(names)];
    int rc = get_members(item, names, m, ARRAY_SIZE(names), path, err);
    if (rc != 0) {
        return rc;
    }

    /* [Required]: not null, not empty, not only whitespace. */
    if (m[0] == NULL || cJSON_IsNull(m[0])) {
        return FAIL(err, "%s.Name: is required", path);
    }
    if (!cJSON_IsString(m[0]) || m[0]->valuestring == NULL) {
        return FAIL(err, "%s.Name: must be a string", path);
    }
    if (all_blank(m[0]->valuestring)) {
        return FAIL(err, "%s.Name: must not be empty", path);
    }
    if (!valid_utf8(m[0]->valuestring)) {
        return fail_utf8(err, path, "Name");
    }
    p->name = m[0]->valuestring;

    /* Model defaults: "0x" + EventKeywords.All.ToString("X") and EventLevel.Verbose. */
    p->keywords = UINT64_MAX;
    if (m[1] != NULL && (rc = parse_keywords(m[1], path, &p->keywords, err)) != 0) {
        return rc;
    }
    p->level = LEVEL_VERBOSE;
    if (m[2] != NULL && (rc = parse_level(m[2], path, &p->level, err)) != 0) {
        return rc;
    }

    p->has_args = false;
    if (m[3] != NULL && !cJSON_IsNull(m[3])) {
        if (!cJSON_IsObject(m[3])) {
            return FAIL(err, "%s.Arguments: must be an object of string values", path);
        }
        p->has_args = true;
        p->args_off = buf_size(scratch);
        rc = parse_arguments(m[3], path, scratch, err);
        rc = rc ? rc : buf_append(scratch, "", 1);
    }
    return rc;
}

static int parse_buffer_size(const cJSON *item, uint32_t *out, struct buf *err)
{
    char shown[SHOW_MAX + 4];
    int64_t v = 0;
    if (cJSON_IsNumber(item)) {
        if (!json_integer(item, -JSON_EXACT_MAX, JSON_EXACT_MAX, &v)) {
            return FAIL(err, "BufferSizeInMB: %.17g is not an integer", item->valuedouble);
        }
    } else if (cJSON_IsString(item)) {
        /* ASP.NET's web JSON defaults read numbers from strings too (AllowReadingFromString). */
        const char *s = item->valuestring;
        if (s[0] == '\0' || strspn(s, "0123456789") != strlen(s)) {
            return FAIL(err, "BufferSizeInMB: '%s' is not an integer", show(shown, s, strlen(s)));
        }
        uint64_t u;
        bool fits = parse_u64_digits(s, 10, &u); /* all digits: fails only on overflow */
        v = (!fits || u > TRACE_MAX_BUFFER_MB) ? TRACE_MAX_BUFFER_MB + 1 : (int64_t)u;
    } else {
        return FAIL(err, "BufferSizeInMB: must be an integer");
    }
    if (v < 1 || v > TRACE_MAX_BUFFER_MB) {
        return FAIL(err, "BufferSizeInMB: must be in 1..%d", TRACE_MAX_BUFFER_MB);
    }
    *out = (uint32_t)v;
    return 0;
}

/*
 * cJSON turns "\u0000" into a NUL that silently cuts the string short, and copies raw NULs the
 * same way; a provider name or argument cut short would trace something else than asked, so both
 * are refused. A backslash outside a string is invalid JSON, rejected by the parser before this.
 */
static bool has_nul(const char *p, size_t n)
{
    if (memchr(p, '\0', n) != NULL) {
        return true;
    }
    for (size_t i = 0; i + 1 < n; i++) {
        if (p[i] != '\\') {
            continue;
        }
        if (p[i + 1] == 'u' && i + 5 < n && p[i + 2] == '0' && p[i + 3] == '0' && p[i + 4] == '0' &&
            p[i + 5] == '0') {
            return true;
        }
        i++; /* skip the escaped character, so "\\u0000" (an escaped backslash) is fine */
    }
    return false;
}

/*
 * Parses body into *root: not empty, valid JSON, nothing but whitespace after the value, no
 * U+0000, an object at the top.
 */
static int parse_body(const char *body, size_t len, cJSON **root, struct buf *err)
{
    *root = NULL;
    if (len == 0 || all_blank_n(body, len)) {
        return FAIL(err, "the body is empty; expected a JSON object with Providers");
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (doc == NULL) {
        size_t at = (end != NULL && end >= body) ? (size_t)(end - body) : 0;
        return FAIL(err, "the body is not valid JSON (error near byte %zu)", at);
    }
    int rc = 0;
    for (const char *t = end; rc == 0 && t < body + len; t++) {
        if (!is_blank(*t)) {
            rc = FAIL(err, "unexpected data after the JSON value at byte %zu", (size_t)(t - body));
        }
    }
    if (rc == 0 && has_nul(body, len)) {
        rc = FAIL(err, "the body contains U+0000, which no provider name or argument can carry");
    }
    if (rc == 0 && !cJSON_IsObject(doc)) {
        rc = FAIL(err, "the body must be a JSON object with Providers");
    }
    if (rc != 0) {
        cJSON_Delete(doc);
        return rc;
    }
    *root = doc;
    return 0;
}

/* Providers: [Required, MinLength(1)] in the model, at most 1000 for the runtime (ipc.md §4.2). */
static int parse_providers(const cJSON *arr, struct pending **out, size_t *count_out,
                           struct buf *scratch, struct buf *err)
{
    *out = NULL;
    if (arr == NULL || cJSON_IsNull(arr)) {
        return FAIL(err, "Providers: is required");
    }
    if (!cJSON_IsArray(arr)) {
        return FAIL(err, "Providers: must be an array of providers");
    }
    int count = cJSON_GetArraySize(arr);
    if (count <= 0) {
        return FAIL(err, "Providers: must contain at least one provider");
    }
    if (count > TRACE_MAX_PROVIDERS) {
        return FAIL(err, "Providers: %d providers given; the runtime accepts at most %d", count,
                    TRACE_MAX_PROVIDERS);
    }
    struct pending *list = calloc((size_t)count, sizeof(*list));
    if (list == NULL) {
        return -ENOMEM;
    }
    size_t n = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, arr)
    {
        assert(n < (size_t)count);
        int rc = parse_provider(item, n, &list[n], scratch, err);
        if (rc != 0) {
            free(list);
            return rc;
        }
        n++;
    }
    assert(n == (size_t)count);
    *out = list;
    *count_out = n;
    return 0;
}

int trace_config_from_json(const char *body, size_t len, struct trace_config *out, struct buf *err)
{
    memset(out, 0, sizeof(*out));
    struct buf scratch;
    buf_init(&scratch, 0);
    struct pending *list = NULL;
    cJSON *root = NULL;

    int rc = parse_body(body, len, &root, err);
    if (rc != 0) {
        goto out;
    }
    static const char *const names[] = {"Providers", "RequestRundown", "BufferSizeInMB"};
    const cJSON *m[ARRAY_SIZE(names)];
    rc = get_members(root, names, m, ARRAY_SIZE(names), "", err);
    if (rc != 0) {
        goto out;
    }
    /* EventPipeConfiguration defaults: RequestRundown true, BufferSizeInMB 256. */
    bool rundown = true;
    if (m[1] != NULL) {
        if (!cJSON_IsBool(m[1])) {
            rc = FAIL(err, "RequestRundown: must be true or false");
            goto out;
        }
        rundown = cJSON_IsTrue(m[1]);
    }
    uint32_t buffer_mb = TRACE_DEFAULT_BUFFER_MB;
    if (m[2] != NULL && (rc = parse_buffer_size(m[2], &buffer_mb, err)) != 0) {
        goto out;
    }
    size_t n = 0;
    rc = parse_providers(m[0], &list, &n, &scratch, err);
    if (rc != 0) {
        goto out;
    }
    rc = config_commit(out, list, n, &scratch, buffer_mb, rundown ? IPC_RUNDOWN_DEFAULT : 0, err);
    if (rc == 0) {
        memcpy(out->profile_names, "custom", sizeof("custom"));
    }
out:
    cJSON_Delete(root);
    free(list);
    buf_fini(&scratch);
    return rc;
}
