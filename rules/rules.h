/* SPDX-License-Identifier: MIT */
#ifndef AGENT_RULES_H
#define AGENT_RULES_H

/*
 * Collection rules (docs/rules.md) as pure C: the configuration,
 * the trigger engines, the per-process rule state and the /collectionrules JSON. No libuv, no
 * I/O, no clock: the agent owns the EventPipe sessions, feeds the decoded samples and events
 * with the current time (monotonic milliseconds), and executes the actions this module asks for.
 *
 * Lifetimes: a struct rules_config owns every string and array it hands out (rules, triggers,
 * actions); they stay valid until rules_config_free. A struct rules_inst points at its rule, so
 * the config must outlive the instances made from it. Strings handed over by a callback or a
 * step are valid as documented at each function.
 *
 * Errors: 0 or a negative code (common/err.h): -ENOMEM (libuv's UV_ENOMEM), AGENT_E_INVAL for a
 * misuse (an invalid rule, an unknown action index), AGENT_E_NOSPACE for an output buffer too
 * small. Configuration problems are not return codes: they are lines in rules_config.errors.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_metric.h" /* struct ev_metric_sample */

struct cJSON;
struct ev_native_record;
struct ev_record;

/* .NET TimeSpan ticks (100 ns): configured durations keep their exact value. */
#define RULES_TICKS_PER_MS     10000LL
#define RULES_TICKS_PER_SECOND 10000000LL

/* One configuration entry as the agent's configuration holds it: ':'-separated, case-insensitive
 * keys, array elements by index ("CollectionRules:R:Actions:0:Type"). */
struct rules_kv {
    const char *key;
    const char *value;
};

/* ---- configuration ------------------------------------------------------------------------- */

enum rules_trigger_type {
    RULES_TRIGGER_STARTUP = 0,
    RULES_TRIGGER_EVENT_COUNTER,
    RULES_TRIGGER_EVENT_METER,
    RULES_TRIGGER_CPU_USAGE,               /* System.Runtime / cpu-usage */
    RULES_TRIGGER_GC_HEAP_SIZE,            /* System.Runtime / gc-heap-size */
    RULES_TRIGGER_THREADPOOL_QUEUE_LENGTH, /* System.Runtime / threadpool-queue-length */
    RULES_TRIGGER_ASPNET_REQUEST_COUNT,
    RULES_TRIGGER_ASPNET_REQUEST_DURATION,
    RULES_TRIGGER_ASPNET_RESPONSE_STATUS,
    /* dotmon's own, from the runtime's events (Microsoft-Windows-DotNETRuntime) */
    RULES_TRIGGER_GC_PAUSE,       /* GCSuspendEEBegin .. GCRestartEEEnd longer than ThresholdMs */
    RULES_TRIGGER_GC_COUNT,       /* GCStart of Generation or older (of Reasons) */
    RULES_TRIGGER_EXCEPTION_COUNT /* ExceptionThrown (of ExceptionTypes) */
};

/* What feeds a trigger's engine. */
enum rules_trigger_source {
    RULES_SOURCE_NONE = 0, /* Startup */
    RULES_SOURCE_METRICS,  /* EventCounter, EventMeter, the shortcuts: rules_inst_on_metric */
    RULES_SOURCE_HTTP,     /* the ASP.NET triggers: rules_inst_on_request */
    RULES_SOURCE_RUNTIME   /* GCPause, GCCount, ExceptionCount: rules_inst_on_runtime */
};

/* GCStart's Reason (docs/events.md §5; TraceEvent's GCReason), as GCCount's Reasons names them. */
#define RULES_GC_REASONS 14

enum rules_action_type {
    RULES_ACTION_COLLECT_DUMP = 0,
    RULES_ACTION_COLLECT_GCDUMP,
    RULES_ACTION_COLLECT_TRACE,
    RULES_ACTION_COLLECT_LOGS,
    RULES_ACTION_COLLECT_LIVE_METRICS,
    RULES_ACTION_EXECUTE,
    RULES_ACTION_GET_ENVIRONMENT_VARIABLE,
    RULES_ACTION_SET_ENVIRONMENT_VARIABLE,
    RULES_ACTION_LOAD_PROFILER, /* parsed, then reported as unsupported */
    RULES_ACTION_COLLECT_STACKS,
    RULES_ACTION_COLLECT_EXCEPTIONS
};

enum rules_filter_key {
    RULES_FILTER_PROCESS_ID = 0,
    RULES_FILTER_PROCESS_NAME,
    RULES_FILTER_COMMAND_LINE,
    RULES_FILTER_ENTRYPOINT_ASSEMBLY, /* ManagedEntryPointAssemblyName */
    /* dotmon's (issue 34): who the process is (ipc_identity.h) */
    RULES_FILTER_POD_NAME,       /* PodName */
    RULES_FILTER_POD_NAMESPACE,  /* PodNamespace */
    RULES_FILTER_CONTAINER_ID,   /* ContainerId */
    RULES_FILTER_CONTAINER_NAME, /* ContainerName */
    RULES_FILTER_NKEYS
};

/* dotnet-monitor's DumpType, LogLevel (Microsoft.Extensions.Logging values) and LogFormat. */
enum rules_dump_type {
    RULES_DUMP_MINI = 0,
    RULES_DUMP_FULL,
    RULES_DUMP_TRIAGE,
    RULES_DUMP_WITH_HEAP
};
enum rules_log_level {
    RULES_LOG_TRACE = 0,
    RULES_LOG_DEBUG,
    RULES_LOG_INFORMATION,
    RULES_LOG_WARNING,
    RULES_LOG_ERROR,
    RULES_LOG_CRITICAL,
    RULES_LOG_NONE
};
enum rules_log_format { RULES_LOGS_PLAIN_TEXT = 0, RULES_LOGS_NDJSON, RULES_LOGS_JSON_SEQUENCE };

/* CollectStacks' Format (dotnet-monitor's CallStackFormat). */
enum rules_stacks_format {
    RULES_STACKS_JSON = 0,
    RULES_STACKS_PLAIN_TEXT,
    RULES_STACKS_SPEEDSCOPE
};

/* Every filter must match (Exact and Contains are case-insensitive; ProcessId compares numbers). */
struct rules_filter {
    enum rules_filter_key key;
    bool contains; /* MatchType Contains (else Exact) */
    const char *value;
    uint32_t pid; /* RULES_FILTER_PROCESS_ID: the value as a number */
};

struct rules_status_range {
    int min, max; /* inclusive, 100..599 */
};

/*
 * A trigger after defaults (CollectionRuleDefaults, shortcut thresholds, 1 min window, 5 s
 * request duration). Fields not used by the type are zero.
 */
struct rules_trigger {
    enum rules_trigger_type type;
    const char *type_name; /* canonical spelling, e.g. "EventCounter" */
    /* EventCounter: ProviderName / CounterName; shortcuts: System.Runtime / the counter;
     * EventMeter: MeterName / InstrumentName. */
    const char *provider;
    const char *name;
    bool has_greater_than, has_less_than;
    double greater_than, less_than;
    int histogram_percentile; /* EventMeter HistogramPercentile, -1 when not set */
    int64_t window_ticks;     /* SlidingWindowDuration */
    int32_t count;            /* RequestCount (RequestCount/Duration) or ResponseCount */
    int64_t request_duration_ticks;
    const char *const *include_paths;
    size_t n_include_paths;
    const char *const *exclude_paths;
    size_t n_exclude_paths;
    const struct rules_status_range *status_codes;
    size_t n_status_codes;
    /* GCPause: ThresholdMs (count and window above: Count, SlidingWindowDuration) */
    int32_t threshold_ms;
    /* GCCount: Generation (default 2) and Reasons (bit r for GCReason r; 0 = every reason) */
    int32_t generation;
    uint32_t reason_mask;
    /* ExceptionCount: ExceptionTypes (full names, ordinal; none = every exception) */
    const char *const *exception_types;
    size_t n_exception_types;
    /* set by the parser: which settings were given */
    bool has_window, has_count, has_request_duration, has_generation;
};

/* The engine input trigger t takes (RULES_SOURCE_NONE for Startup). */
enum rules_trigger_source rules_trigger_source(const struct rules_trigger *t);

/* CollectTrace Providers[i] (dotnet-monitor's EventProvider). */
struct rules_provider {
    const char *name;
    uint64_t keywords;           /* all bits when not given */
    uint32_t level;              /* 0 LogAlways .. 5 Verbose; Verbose when not given */
    const struct rules_kv *args; /* Arguments, in configuration order */
    size_t nargs;
};

/* CollectLiveMetrics Providers[i] {ProviderName, CounterNames} and Meters[i] {MeterName,
 * InstrumentNames}. */
struct rules_metric_source {
    const char *name;
    const char *const *names;
    size_t nnames;
};

/* CollectExceptions Filters:Include|Exclude[i] (dotnet-monitor's ExceptionFilter); NULL members
 * are not compared. */
struct rules_exc_filter {
    const char *exception_type, *type_name, *method_name, *module_name;
};

/* CollectLogs FilterSpecs: category → level, or -1 for "use DefaultLevel" (a null value). */
struct rules_log_filter {
    const char *category;
    int level;
};

/*
 * One action after defaults. Settings of other types are zero. String settings are as configured:
 * tokens are substituted when the action starts (struct rules_step).
 */
struct rules_action {
    const char *name; /* NULL when unnamed */
    enum rules_action_type type;
    const char *type_name;
    const char *key; /* its configuration section, for messages ("CollectionRules:R:Actions:0") */
    bool wait_for_completion;
    const char *egress; /* the Collect* actions (CollectionRuleDefaults:Actions:Egress applied) */
    const char *artifact_name; /* the Collect* actions' ArtifactName: NULL for dotmon's name */
    int64_t duration_ticks;    /* CollectTrace, CollectLogs, CollectLiveMetrics (default 30 s) */
    /* CollectDump */
    enum rules_dump_type dump_type; /* default WithHeap */
    /* CollectTrace: Profile (canonical names joined by ',') xor Providers */
    const char *profile;
    const struct rules_provider *providers;
    size_t nproviders;
    bool request_rundown; /* default true */
    uint32_t buffer_mb;   /* default 256, 1..1024 */
    bool has_stopping_event;
    const char *stop_provider, *stop_event;
    const struct rules_kv *stop_payload; /* PayloadFilter */
    size_t nstop_payload;
    /* CollectTrace ring mode (docs/collection-rules.md, "Pre-trigger ring buffer"): a continuous
     * session kept in an in-memory ring while the rule runs, written out when the action runs. ring
     * is set when PreTriggerSeconds or RingBufferSizeMB is given (Duration is then not allowed). */
    bool ring;
    int32_t pre_trigger_s;  /* PreTriggerSeconds 1..3600; 0 = no age limit (size only) */
    int32_t ring_mb;        /* RingBufferSizeMB 1..1024; default 64 */
    int32_t post_trigger_s; /* PostTriggerSeconds 0..3600; default 5 */
    bool has_pre_trigger, has_ring_mb, has_post_trigger, has_duration;
    /* CollectLogs */
    enum rules_log_level default_level; /* default Warning */
    const struct rules_log_filter *filter_specs;
    size_t nfilter_specs;
    bool use_app_filters; /* default true */
    enum rules_log_format format;
    /* CollectStacks */
    enum rules_stacks_format stacks_format; /* default Json */
    /* CollectExceptions: Format (dotnet-monitor's ExceptionFormat has LogFormat's names; default
     * PlainText) and Filters */
    enum rules_log_format exc_format;
    const struct rules_exc_filter *exc_include, *exc_exclude;
    size_t nexc_include, nexc_exclude;
    /* CollectLiveMetrics */
    bool include_default_providers; /* default true */
    const struct rules_metric_source *metric_providers;
    size_t nmetric_providers;
    const struct rules_metric_source *meters;
    size_t nmeters;
    /* Execute */
    const char *path, *arguments;
    bool ignore_exit_code;
    /* Get/SetEnvironmentVariable: Name, Value */
    const char *env_name, *env_value;
    /* LoadProfiler */
    const char *profiler_path, *clsid;
    /* The earlier actions whose outputs Execute.Arguments references ($(Actions.<n>.<out>)). */
    const size_t *deps;
    size_t ndeps;
};

struct rules_limits {
    int32_t action_count;   /* default 5 */
    int64_t window_ticks;   /* ActionCountSlidingWindowDuration; 0 = counted over the lifetime */
    int64_t duration_ticks; /* RuleDuration; 0 = forever */
};

struct rules_rule {
    const char *name;
    bool valid; /* no error was reported for this rule: only valid rules can be applied */
    const struct rules_filter *filters;
    size_t nfilters;
    struct rules_trigger trigger;
    const struct rules_action *actions;
    size_t nactions;
    struct rules_limits limits;
};

struct rules_arena;

struct rules_config {
    const struct rules_rule *rules; /* in dotnet-monitor's order (configuration key order) */
    size_t nrules;
    /* One line per problem: "<full key>: <message>", worded like dotnet-monitor's validation. */
    const char *const *errors;
    size_t nerrors;
    /* The same for problems that leave the rule valid: an action's Egress provider that is not
     * configured (dotnet-monitor validates a rule's options when it runs, so the action fails
     * then, with its message, and the agent starts). */
    const char *const *warnings;
    size_t nwarnings;
    struct rules_arena *arena; /* owns everything above */
};

/*
 * Reads CollectionRules:*, Templates:CollectionRule{Filters,Triggers,Actions,Limits}:* and
 * CollectionRuleDefaults:* from kv[0..n) (keys compared case-insensitively; for a key given twice
 * the later entry wins). egress[0..negress) are the configured egress provider names an action may
 * name (case-insensitive); egress == NULL skips that check. Every problem becomes one line of
 * (*out)->errors and makes its rule invalid; the other rules are still usable. Unknown settings are
 * ignored, as .NET's binder does. Returns 0 with *out set (free it with rules_config_free), or
 * -ENOMEM with *out NULL.
 */
int rules_config_load(const struct rules_kv *kv, size_t n, const char *const *egress,
                      size_t negress, struct rules_config **out);
void rules_config_free(struct rules_config *c);
/* The rule named name (case-insensitive), or NULL. */
const struct rules_rule *rules_config_find(const struct rules_config *c, const char *name);

/*
 * Parses a .NET TimeSpan the way the configuration binder does (TimeSpan.Parse, invariant culture):
 * "[-]d", "[-][d.]hh:mm[:ss[.fffffff]]" or "[-]d:hh:mm:ss[.fffffff]", blanks around. 0 with *ticks
 * set, or AGENT_E_INVAL.
 */
int rules_timespan_parse(const char *s, int64_t *ticks);
/* Formats ticks as TimeSpan's "c" format ("00:01:00", "1.00:00:00", "00:00:00.5000000"), as
 * System.Text.Json writes it. cap >= 32 always suffices. */
void rules_timespan_format(int64_t ticks, char *out, size_t cap);

/* ---- processes and filters ----------------------------------------------------------------- */

/* What the rules know of a process: for its filters and the $(Process.*) tokens. */
struct rules_process {
    uint32_t pid;
    const char *name;                /* may be NULL (then "") */
    const char *command_line;        /* may be NULL */
    const char *runtime_id;          /* the runtime instance cookie, GUID "D" format; may be NULL */
    const char *entrypoint_assembly; /* may be NULL */
    const char *hostname;            /* $(Monitor.HostName); may be NULL */
    const char *pod_name;            /* the process's identity (ipc_identity.h); each may be */
    const char *pod_namespace;       /* NULL or "" when unknown */
    const char *container_id;
    const char *container_name;
};

/* True when every filter of the rule matches p (a rule without filters matches every process). */
bool rules_filters_match(const struct rules_rule *r, const struct rules_process *p);
/* True when every filter of f[0..n) matches p (true when n is 0). */
bool rules_filter_list_match(const struct rules_filter *f, size_t n, const struct rules_process *p);

/* A list of process filters outside the rules (DefaultProcess:Filters), read as a rule's Filters
 * are (no templates). Owns everything it points at. */
struct rules_filter_list {
    const struct rules_filter *filters;
    size_t nfilters;
    const char *const *errors; /* "<full key>: <message>", as rules_config.errors */
    size_t nerrors;
    struct rules_arena *arena;
};
/* Reads the descriptors below key ("DefaultProcess:Filters") from kv[0..n). 0 with *out set
 * (errors, if any, in (*out)->errors; free with rules_filter_list_free) or -ENOMEM. */
int rules_filter_list_load(const struct rules_kv *kv, size_t n, const char *key,
                           struct rules_filter_list **out);
void rules_filter_list_free(struct rules_filter_list *l);

/*
 * The Execute action's Arguments split as .NET's ProcessStartInfo does on Unix
 * (Process.Unix.cs ParseArgumentsIntoList): blanks (space, tab) separate arguments outside double
 * quotes; a double quote toggles quoting and is dropped, "" inside quotes is one literal quote;
 * 2n backslashes before a quote are n backslashes (the quote then toggles), 2n+1 are n and a
 * literal quote; other backslashes are literal. "" alone is an empty argument. The arguments are
 * written NUL-terminated into out (2 * strlen(s) + 1 bytes is always enough), argv[i] pointing
 * at each; at most max (the rest is ignored). Returns how many.
 */
size_t rules_split_arguments(const char *s, char *out, char **argv, size_t max);

/* At most this many Execute arguments are passed (the rest is ignored). */
#define RULES_EXECUTE_MAX_ARGS 256

struct buf;

/*
 * A token's value: s starts with '$'; when a known token starts there, its value (borrowed) and
 * *len its length in s, else NULL.
 */
typedef const char *rules_token_fn(void *ud, const char *s, size_t *len);

/* Appends s to b with its tokens (fn) replaced, in one pass: a value is copied as it is, never
 * scanned for tokens again. 0, -ENOMEM or AGENT_E_TOOBIG (b's cap). */
int rules_substitute(const char *s, rules_token_fn *fn, void *ud, struct buf *b);

/*
 * Execute's Arguments as argv: split first (rules_split_arguments, at most max), then the tokens
 * of each argument substituted (rules_substitute). A value (a process's name or command line, an
 * earlier action's output) therefore stays inside the one argument that names it, whatever
 * blanks, quotes or $(...) it holds: deliberately unlike dotnet-monitor, which substitutes into
 * the whole string and then splits it. *argv_out: a new NULL-terminated array of *argc_out new
 * strings (owned by the caller: rules_free_argv). 0 or -ENOMEM.
 */
int rules_execute_argv(const char *arguments, size_t max, rules_token_fn *fn, void *ud,
                       char ***argv_out, size_t *argc_out);
/* Frees what rules_execute_argv made (NULL is fine). */
void rules_free_argv(char **argv);

/* ---- trigger sessions ---------------------------------------------------------------------- */

#define RULES_SESSION_MAX_PROVIDERS 2
#define RULES_SESSION_MAX_ARGS      6

struct rules_session_provider {
    const char *name;
    uint64_t keywords;
    uint32_t level; /* 4 Informational, 5 Verbose */
    size_t nargs;
    struct rules_kv args[RULES_SESSION_MAX_ARGS]; /* in the order dotnet-monitor sends them */
};

/* The EventPipe session a trigger needs (docs/rules.md §3, §4): what CollectTracing carries. */
struct rules_session {
    size_t nproviders;
    struct rules_session_provider providers[RULES_SESSION_MAX_PROVIDERS];
    bool request_rundown; /* false for every trigger */
    uint32_t buffer_mb;   /* 256 */
    /* storage for the formatted numbers the args point at (do not touch) */
    char interval_text[32], max_series_text[16], max_hist_text[16];
};

struct rules_session_options {
    /* The requested counter interval, seconds: GlobalCounter:Providers:<p>:IntervalSeconds for the
     * provider rules_trigger_interval_provider names, else GlobalCounter:IntervalSeconds (5). */
    double counter_interval_s;
    /* EventMeter: the System.Diagnostics.Metrics SessionId ("SHARED" for runtimes >= 8, else a new
     * GUID) and ClientId (a new GUID, or NULL for no ClientId); MaxTimeSeries and MaxHistograms
     * (0 = dotnet-monitor's 1000 and 20). */
    const char *meter_session_id;
    const char *meter_client_id;
    uint32_t max_time_series;
    uint32_t max_histograms;
};

/*
 * The provider whose counter interval the trigger's session and engine use: the EventCounter
 * ProviderName, "System.Runtime" for the shortcuts, "Microsoft.AspNetCore.Hosting" for
 * AspNetRequestDuration (its heartbeat); NULL when the global interval applies (EventMeter) or no
 * counters are involved (Startup, AspNetRequestCount, AspNetResponseStatus, the runtime triggers).
 */
const char *rules_trigger_interval_provider(const struct rules_trigger *t);

/*
 * Fills out with the session of trigger t: the counters or meter of a metric trigger; the
 * DiagnosticSource of the ASP.NET triggers; for GCPause and GCCount Microsoft-Windows-DotNETRuntime
 * with keyword GC (0x1), for ExceptionCount with keyword Exception (0x8000), at Informational (4).
 * The provider names and argument strings point into t,
 * o (the ids) or out itself: keep them alive while out is used. AGENT_E_INVAL for a Startup
 * trigger (it has no session) or an EventMeter trigger without o->meter_session_id.
 */
int rules_trigger_session(const struct rules_trigger *t, const struct rules_session_options *o,
                          struct rules_session *out);

/*
 * The session as dotnet-monitor's POST /trace body ({"Providers":[{"Name","Keywords":"0x…",
 * "EventLevel","Arguments":{…}}],"RequestRundown","BufferSizeInMB"}), ready for the agent's trace
 * request parser. A new cJSON object (the caller deletes it), or NULL on ENOMEM.
 */
struct cJSON *rules_session_json(const struct rules_session *s);
/* The same body for a CollectTrace action with Providers (RequestRundown, BufferSizeMegabytes);
 * NULL for other actions (a Profile goes to the agent's profile list parser as is) or ENOMEM. */
struct cJSON *rules_trace_action_json(const struct rules_action *a);

/* ---- trigger engines ----------------------------------------------------------------------- */

/* An ASP.NET trigger's input (docs/rules.md §4): Microsoft-Diagnostics-DiagnosticSource
 * Activity1Start / Activity1Stop events, and Microsoft.AspNetCore.Hosting's EventCounters as the
 * heartbeat that lets AspNetRequestDuration count requests that hang. */
enum rules_request_kind { RULES_REQUEST_START = 0, RULES_REQUEST_STOP, RULES_REQUEST_HEARTBEAT };

struct rules_request_event {
    enum rules_request_kind kind;
    int64_t timestamp_ms;    /* the event's time */
    const char *activity_id; /* START and STOP */
    const char *path;        /* START and STOP ("" when the event had none) */
    int status_code;         /* STOP */
    int64_t duration_ticks;  /* STOP: ActivityDuration (100 ns ticks) */
};

/*
 * Reads a decoded event of the ASP.NET trigger session into ev: an Activity1Start/Activity1Stop
 * (also spelled Activity1/Start, Activity1/Stop) of Microsoft-Diagnostics-DiagnosticSource becomes
 * START/STOP with the ActivityId, Path, StatusCode and ActivityDuration of its Arguments array of
 * {Key, Value} (keys case-insensitive); Microsoft.AspNetCore.Hosting's EventCounters a HEARTBEAT.
 * The strings are written into scratch[0..cap) and ev points there. 0; AGENT_E_NOTFOUND for the
 * events the triggers do not look at (other DiagnosticSource events, other providers);
 * AGENT_E_PROTO (a malformed Arguments array or number); AGENT_E_NOSPACE (scratch too small: the
 * UTF-8 of the ActivityId and the Path, plus 2, is enough).
 */
int rules_request_event_from_record(const struct ev_record *rec, int64_t timestamp_ms,
                                    char *scratch, size_t cap, struct rules_request_event *ev);

/*
 * A runtime trigger's input (GCPause, GCCount, ExceptionCount): the runtime's native events,
 * decoded by events/ev_native. Timestamps are the events' own, in 100 ns ticks of the trace's
 * clock (QPC ticks converted with the trace's frequency), so a pause is measured to the tick.
 */
enum rules_runtime_kind {
    RULES_RUNTIME_GC_START = 0,  /* GCStart (1): depth, reason */
    RULES_RUNTIME_SUSPEND_BEGIN, /* GCSuspendEEBegin (9): reason (the SuspendEE reason) */
    RULES_RUNTIME_RESTART_END,   /* GCRestartEEEnd (3) */
    RULES_RUNTIME_EXCEPTION,     /* ExceptionThrown (80): exception_type */
    RULES_RUNTIME_SESSION_START  /* the trigger's session (re)started: a suspension seen before
                                    it is forgotten (its restart may have been missed) */
};

/* SuspendEE reasons that are a GC's (docs/events.md §5): ForGC and ForGCPrep (a background GC). */
#define RULES_SUSPEND_FOR_GC      1
#define RULES_SUSPEND_FOR_GC_PREP 6

struct rules_runtime_event {
    enum rules_runtime_kind kind;
    int64_t timestamp_ticks;
    uint32_t depth;             /* GC_START: Depth (the condemned generation; 0 when absent) */
    uint32_t reason;            /* GC_START: GCReason; SUSPEND_BEGIN: the SuspendEE reason */
    const char *exception_type; /* EXCEPTION: ExceptionType ("" when the event has none) */
};

/*
 * Reads a decoded native event (ev_native_decode) of the runtime trigger session into ev:
 * GCStart, GCSuspendEEBegin, GCRestartEEEnd and ExceptionThrown of Microsoft-Windows-DotNETRuntime,
 * fields by name. ExceptionType's UTF-8 goes into scratch[0..cap) and ev points there. 0;
 * AGENT_E_NOTFOUND for other events; AGENT_E_NOSPACE (scratch too small: 3/2 of the string's
 * UTF-16 bytes, plus 1, is enough).
 */
int rules_runtime_event_from_native(const struct ev_native_record *rec, int64_t timestamp_ticks,
                                    char *scratch, size_t cap, struct rules_runtime_event *ev);

/* At most this many requests are tracked in flight by AspNetRequestDuration; later Starts are not
 * tracked until some finish (dotnet-monitor has no bound). */
#define RULES_MAX_INFLIGHT 65536

struct rules_engine;

/*
 * A trigger's state machine (docs/rules.md): the threshold engine for EventCounter, the shortcuts
 * and EventMeter; the sliding windows of the ASP.NET triggers. counter_interval_s is the requested
 * interval (see rules_trigger_interval_provider). AGENT_E_INVAL for a Startup trigger, -ENOMEM.
 */
int rules_engine_new(const struct rules_trigger *t, double counter_interval_s,
                     struct rules_engine **out);
/*
 * Feeds a metric sample (samples of other counters are ignored). True when the trigger fires.
 * The samples are taken as dotnet-monitor's CounterFilter passes them: EventCounters of the
 * requested interval only (ev_stream_options.counter_interval_s set to the same interval), meter
 * values of this session only (ev_stream_options.session_id).
 */
bool rules_engine_on_metric(struct rules_engine *e, const struct ev_metric_sample *s);
/* Feeds an ASP.NET event (ignored by non-ASP.NET triggers). True when the trigger fires. */
bool rules_engine_on_request(struct rules_engine *e, const struct rules_request_event *ev);
/*
 * Feeds a runtime event (ignored by other triggers; each runtime trigger takes only its own kinds).
 * GCPause: a GC's suspension is a GCSuspendEEBegin with a GC reason and the next GCRestartEEEnd;
 * a suspension longer than ThresholdMs counts, at its restart's time. A second begin before the
 * restart replaces the first (its restart was lost), a restart without a begin (the session began
 * during the pause) and a non-GC suspension count nothing. GCCount: a GCStart with Depth >=
 * Generation (and a reason of Reasons) counts. ExceptionCount: an ExceptionThrown of one of
 * ExceptionTypes (exact, ordinal; every type when none) counts. Counts go into the sliding window
 * of the ASP.NET triggers; true when it holds Count or more.
 */
bool rules_engine_on_runtime(struct rules_engine *e, const struct rules_runtime_event *ev);
/* Back to the state of a new engine (dotnet-monitor starts a new trigger after each firing). */
void rules_engine_reset(struct rules_engine *e);
void rules_engine_free(struct rules_engine *e);

/* ---- a rule applied to a process ----------------------------------------------------------- */

enum rules_state {
    RULES_STATE_RUNNING = 0,
    RULES_STATE_ACTION_EXECUTING,
    RULES_STATE_THROTTLED,
    RULES_STATE_FINISHED
};

/* "Running", "ActionExecuting", "Throttled", "Finished". */
const char *rules_state_name(enum rules_state s);

struct rules_inst;

/*
 * Applies a valid rule to process p at now_ms: state Running, the rule's clock starts. p's strings
 * are copied. A Startup trigger fires at once (the first actions are ready as steps). AGENT_E_INVAL
 * for an invalid rule, -ENOMEM.
 */
int rules_inst_new(const struct rules_rule *rule, const struct rules_process *p,
                   double counter_interval_s, int64_t now_ms, struct rules_inst **out);
void rules_inst_free(struct rules_inst *i);

const struct rules_rule *rules_inst_rule(const struct rules_inst *i);
/* The state and reason as stored (the JSON re-evaluates throttling at the time asked). */
enum rules_state rules_inst_state(const struct rules_inst *i);
const char *rules_inst_state_reason(const struct rules_inst *i);

/* True while the trigger's session should run: not finished, no actions running, not Startup. */
bool rules_inst_trigger_active(const struct rules_inst *i);
/* True once a suspended runtime may be resumed for this rule: at once for a non-Startup trigger;
 * for Startup once every action has started or one must be awaited (collectionrules.md). */
bool rules_inst_started(const struct rules_inst *i);

/*
 * Feed the trigger (ignored unless rules_inst_trigger_active). 1 when it fired: then the actions
 * are ready as steps, or the rule is Throttled (the trigger starts over); 0 when not; -ENOMEM.
 */
int rules_inst_on_metric(struct rules_inst *i, const struct ev_metric_sample *s, int64_t now_ms);
int rules_inst_on_request(struct rules_inst *i, const struct rules_request_event *ev,
                          int64_t now_ms);
int rules_inst_on_runtime(struct rules_inst *i, const struct rules_runtime_event *ev,
                          int64_t now_ms);
/* The trigger fired at now_ms (what the three above do on a firing; for tests and custom
 * triggers). 1 when the actions will run, 0 when throttled or not active, -ENOMEM. */
int rules_inst_fire(struct rules_inst *i, int64_t now_ms);
/* GCPause: the last GC pause its engine measured, in 100 ns ticks (0 before any, and for other
 * triggers), so that a firing can say how long the pause was. */
int64_t rules_inst_gc_pause_ticks(const struct rules_inst *i);

/* The rule failed (its trigger's session could not start, the process went away): Finished
 * with dotnet-monitor's failure reason quoting message (truncated to fit). Running actions get
 * CANCEL steps. */
void rules_inst_fail(struct rules_inst *i, const char *message);

/* Applies RuleDuration at now_ms (Finished once it has passed, after running actions complete). */
void rules_inst_tick(struct rules_inst *i, int64_t now_ms);
/* When rules_inst_tick next matters (the end of RuleDuration), or INT64_MAX. */
int64_t rules_inst_deadline(const struct rules_inst *i);

enum rules_step_kind {
    RULES_STEP_START = 1, /* start action `index` with the resolved settings below */
    RULES_STEP_CANCEL = 2 /* stop action `index` (another failed); still report it done */
};

/*
 * One thing for the agent to do. START: the action's string settings with $(Process.RuntimeId),
 * $(Process.ProcessId), $(Process.Name), $(Process.CommandLine), $(Monitor.HostName) replaced,
 * and in Execute.Arguments also $(Actions.<Name>.<Output>) of earlier actions, in one pass (a
 * value is never expanded again); NULL where the setting is absent. Execute's Path stays as
 * configured when a value would bring a '/' into it (the file is then not found). Valid until
 * the action is reported done.
 */
struct rules_step {
    enum rules_step_kind kind;
    size_t index;
    const struct rules_action *action;
    const char *egress, *path, *env_name, *env_value, *profiler_path;
    /* Execute: Arguments split, then substituted in each argument (rules_execute_argv);
     * argv[argc] is NULL. NULL and 0 for other actions. */
    char *const *argv;
    size_t argc;
};

/*
 * The next step of the running action list, in order: an action starts once the earlier action
 * it waits for has completed (WaitForCompletion, or an output its Arguments reference). 1 with
 * *out set, 0 when nothing can be done now (waiting for completions, or no list running), -ENOMEM.
 */
int rules_inst_next_step(struct rules_inst *i, struct rules_step *out);

/*
 * Action `index` (started by a step) completed: ok false when it failed (Execute: a non-zero
 * exit code unless IgnoreExitCode), which ends the list (the actions still running are cancelled
 * by CANCEL steps, none starts). outputs[0..n) are its results: EgressPath, ExitCode, Value
 * (copied; kept for $(Actions.<Name>.<Output>) while the list runs). When the list is over the rule
 * goes back to Running, or to Finished (Startup, ActionCount without a window, RuleDuration
 * passed). 0, AGENT_E_INVAL (not a running action), -ENOMEM.
 */
int rules_inst_action_done(struct rules_inst *i, size_t index, bool ok,
                           const struct rules_kv *outputs, size_t n, int64_t now_ms);

/*
 * GET /collectionrules?pid=: {"<rule>":{"state":…,"stateReason":…},…} for the instances of one
 * process (CollectionRuleDescription). GET /collectionrules/{name}: the detailed description of
 * one (CollectionRuleDetailedDescription: occurrences, limits, countdowns in whole seconds, null
 * when absent). Throttling is evaluated at now_ms as dotnet-monitor does on a copy of the state
 * (Running and Throttled follow the window; ActionExecuting and Finished are shown as they are).
 * New cJSON objects, or NULL on ENOMEM. An unknown rule name is the caller's 400.
 */
struct cJSON *rules_describe(const struct rules_inst *const *insts, size_t n, int64_t now_ms);
struct cJSON *rules_describe_detailed(const struct rules_inst *i, int64_t now_ms);

#endif
