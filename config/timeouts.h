/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TIMEOUTS_H
#define AGENT_TIMEOUTS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/*
 * Every timeout, deadline, backoff and grace period of dotmon's application layer, in one table.
 * Each has a setting `Timeouts:<Name>Ms` (whole milliseconds within the row's bounds), so that an
 * operator can tune one and the tests can run the fault cases against short bounds. A few rows
 * also answer to an older, documented setting (Dump:TimeoutSeconds, Trace:StopTimeoutSeconds,
 * Kestrel's limits, …): that one is read first, in its own unit, and `Timeouts:<Name>Ms` overrides
 * it when both are given.
 *
 * The lower layers (ipc/, http/) keep their own defaults for a zero and take these values through
 * their config structs (agent.c passes them in); agent/ reads them with agent_timeout (agent.h).
 *
 * X(id, name, default, min, max, legacy key, legacy unit, what it bounds)
 */
#define TIMEOUTS_TABLE(X)                                                                          \
    X(IPC_EXCHANGE, "IpcExchange", 3000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "one IPC command and its reply: the discovery and liveness ProcessInfo probes, "             \
      "ResumeRuntime, /env's ProcessEnvironment, a rule's SetEnvironmentVariable")                 \
    X(DISCOVERY_RESCAN, "DiscoveryRescan", 5000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,           \
      "connect mode: the period of the full scan of $TMPDIR, and the first retry of a failed "     \
      "probe (doubling up to DiscoveryRetryMax)")                                                  \
    X(DISCOVERY_RETRY_MAX, "DiscoveryRetryMax", 60000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,    \
      "connect mode: the longest wait before a failed probe is tried again")                       \
    X(DISCOVERY_LIVENESS, "DiscoveryLiveness", 1000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,        \
      "how often a listed runtime is checked alive")                                               \
    X(LISTEN_ADVERTISE, "ListenAdvertise", 5000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,            \
      "listen mode: a new connection's advertise must arrive within this")                         \
    X(LISTEN_FORGET, "ListenForget", 3000, 50, 3600000, "DiagnosticPort:ForgetAfterSeconds",       \
      TIMEOUT_LEGACY_SECONDS, "listen mode: a runtime with no connection this long is dropped")    \
    X(LISTEN_RETRY, "ListenRetry", 500, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "listen mode: the first retry of a failed ResumeRuntime or ProcessInfo (doubling)")          \
    X(LISTEN_RETRY_MAX, "ListenRetryMax", 30000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,          \
      "listen mode: the longest wait between those retries")                                       \
    X(LISTEN_PARK, "ListenPark", 10000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "listen mode: a runtime turned away (MaxConnections) has its connection held this long")     \
    X(LISTEN_SETTLE, "ListenSettle", 2000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                  \
      "listen mode: a resumed runtime reporting a one-word command line is listed after this "     \
      "at the latest")                                                                             \
    X(LISTEN_SETTLE_STEP, "ListenSettleStep", 100, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,           \
      "listen mode: meanwhile, its ProcessInfo is asked again this often")                         \
    X(SESSION_CLEANUP, "SessionCleanup", 10000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,             \
      "an abandoned EventPipe session: how long it is still read (a late reply to stop, the "      \
      "stream's end) before dotmon closes it")                                                     \
    X(TRACE_START, "TraceStart", 5000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                      \
      "/trace and trace actions: CollectTracing's reply")                                          \
    X(TRACE_STOP, "TraceStop", 120000, 50, 86400000, "Trace:StopTimeoutSeconds",                   \
      TIMEOUT_LEGACY_SECONDS, "/trace: StopTracing to the end of the stream")                      \
    X(TRACE_RETRY, "TraceRetry", 250, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,                        \
      "/trace: the one retry of a CollectTracing the runtime closed unanswered")                   \
    X(TRACE_SPOOL_GRACE, "TraceSpoolGrace", 100, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,             \
      "/trace: a client that falls behind is waited for this long (the runtime's buffer holding "  \
      "its events) before the stream goes to the spool file (Trace:SpoolLimitMB)")                 \
    X(PROFILE_START, "ProfileStart", 5000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                  \
      "/profile: CollectTracing's reply")                                                          \
    X(PROFILE_STOP, "ProfileStop", 120000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                \
      "/profile: StopTracing to the end of the stream")                                            \
    X(STACKS_SAMPLE, "StacksSample", 10, 1, 60000, NULL, TIMEOUT_LEGACY_NONE,                      \
      "/stacks: how long its SampleProfiler session samples before StopTracing (as dotnet-stack)") \
    X(GCDUMP_START, "GcdumpStart", 5000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "/gcdump: CollectTracing's reply")                                                           \
    X(GCDUMP_STOP, "GcdumpStop", 60000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                   \
      "/gcdump: StopTracing to the end of the stream")                                             \
    X(GCDUMP, "Gcdump", 30000, 50, 86400000, "GCDump:TimeoutSeconds", TIMEOUT_LEGACY_SECONDS,      \
      "/gcdump: the whole heap walk")                                                              \
    X(DUMP, "Dump", 300000, 50, 86400000, "Dump:TimeoutSeconds", TIMEOUT_LEGACY_SECONDS,           \
      "/dump: GenerateCoreDump's reply (the runtime writing the dump)")                            \
    X(DUMP_POLL, "DumpPoll", 10, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,                             \
      "/dump: while the runtime writes, how often dotmon looks for the file")                      \
    X(DUMP_TAIL, "DumpTail", 20, 1, 60000, NULL, TIMEOUT_LEGACY_NONE,                              \
      "/dump: at the end of the bytes written so far, how soon it looks again")                    \
    X(DUMP_STEP, "DumpStep", 30000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                        \
      "/dump: one step on the dump folder (open and delete, one read) on the thread pool")         \
    X(DUMP_PIECE, "DumpPiece", 300000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "/dump: sending one 4 MiB piece of the dump to the client")                                  \
    X(DUMP_LATE_GRACE, "DumpLateGrace", 600000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,           \
      "/dump after a timeout: how long beyond Dump the exchange is kept to delete a late file")    \
    X(LOGS_START, "LogsStart", 10000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                       \
      "/logs: CollectTracing's reply")                                                             \
    X(LOGS_STOP, "LogsStop", 10000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                       \
      "/logs: StopTracing to the end of the stream")                                               \
    X(LOGS_QUIET, "LogsQuiet", 5000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                      \
      "/logs: no logging event this long after the start is worth a warning")                      \
    X(LOGS_PROBE, "LogsProbe", 3000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                        \
      "/logs: the loader-rundown probe before the stream")                                         \
    X(LOGS_ORDER, "LogsOrder", 250, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,                          \
      "/logs and OpenTelemetry logs: records held to be put in order across threads go out "       \
      "once the session's stream has been quiet for one to two of this")                           \
    X(METRICS_START, "MetricsStart", 10000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "metrics and live metrics sessions: CollectTracing's reply")                                 \
    X(METRICS_STOP, "MetricsStop", 10000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "metrics and live metrics sessions: StopTracing to the end of the stream")                   \
    X(METRICS_RENDER, "MetricsRender", 100, 10, 60000, NULL, TIMEOUT_LEGACY_NONE,                  \
      "/metrics while scraped: the processes' text is rendered in the background at most this "    \
      "long after a change, and a scrape may be served a text this much out of date")              \
    X(TRIGGER_START, "TriggerStart", 10000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "a rule's ASP.NET request trigger session: CollectTracing's reply")                          \
    X(TRIGGER_STOP, "TriggerStop", 10000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "a rule's ASP.NET request trigger session: StopTracing to the end of the stream")            \
    X(BACKOFF_MIN, "BackoffMin", 1000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                     \
      "metrics and rule sessions that failed: the first retry (doubling)")                         \
    X(BACKOFF_MAX, "BackoffMax", 60000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                   \
      "metrics and rule sessions that failed: the longest wait between retries")                   \
    X(ANNOUNCE_AFTER, "AnnounceAfter", 1000, 0, 600000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "a new process is logged at Info once it has lived this long")                               \
    X(SHUTDOWN_GRACE, "ShutdownGrace", 4000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                \
      "shutdown: HTTP responses and egress uploads still running then are cut")                    \
    X(SHUTDOWN_DEADLINE, "ShutdownDeadline", 5000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,          \
      "shutdown: dotmon exits with status 3 if it has not stopped by then")                        \
    X(KEY_WATCH_DEBOUNCE, "KeyWatchDebounce", 200, 10, 600000, NULL, TIMEOUT_LEGACY_NONE,          \
      "a configuration reload runs this long after the first change of a burst")                   \
    X(KEY_WATCH_POLL, "KeyWatchPoll", 2000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                 \
      "configuration files polled this often where they cannot be watched")                        \
    X(HTTP_REQUEST_HEADERS, "HttpRequestHeaders", 10000, 50, 86400000,                             \
      "Kestrel:Limits:RequestHeadersTimeout", TIMEOUT_LEGACY_TIMESPAN,                             \
      "HTTP: a request's head must arrive within this")                                            \
    X(HTTP_KEEP_ALIVE, "HttpKeepAlive", 60000, 50, 86400000, "Kestrel:Limits:KeepAliveTimeout",    \
      TIMEOUT_LEGACY_TIMESPAN, "HTTP: an idle keep-alive connection is closed after this")         \
    X(HTTP_PRESSURE_HEAD, "HttpPressureHead", 2000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,       \
      "HTTP: with 3/4 of the connections open, a new one's head must arrive within this (or "      \
      "HttpRequestHeaders, if shorter)")                                                           \
    X(HTTP_WRITE, "HttpWrite", 60000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                     \
      "HTTP: a response write making no progress this long closes the connection")                 \
    X(HTTP_LINGER, "HttpLinger", 2000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                      \
      "HTTP: after an error response or Connection: close, input is read and dropped this long")   \
    X(EGRESS_IDLE, "EgressIdle", 30000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "S3 egress: one request fails when no byte has moved for this long")                         \
    X(EGRESS_REQUEST, "EgressRequest", 900000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,            \
      "S3 egress: one request (a part of the upload) in all")                                      \
    X(IDLE_TRIM, "IdleTrim", 1000, 50, 3600000, NULL, TIMEOUT_LEGACY_NONE,                         \
      "after the last collection job is freed, memory goes back to the system this much later "    \
      "(what its answer still held, HTTP writes and spool reads, is freed by then)")               \
    X(MCP_CALL, "McpCall", 30000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,                         \
      "MCP: a tool call may run this long beyond the seconds its REST requests are asked to run; " \
      "then its request is cancelled and the call answered with a tool error")                     \
    X(MCP_SESSION_IDLE, "McpSessionIdle", 1800000, 50, 86400000, NULL, TIMEOUT_LEGACY_NONE,        \
      "MCP: a session with no call in flight and no request for this long is dropped (its "        \
      "client then gets 404 and initializes again)")                                               \
    X(MCP_PROGRESS, "McpProgress", 1000, 50, 600000, NULL, TIMEOUT_LEGACY_NONE,                    \
      "MCP: while a tool's REST request runs for a number of seconds, a client that gave a "       \
      "progress token gets notifications/progress this often")

/* How an older setting of a row gives its value. */
enum timeout_legacy {
    TIMEOUT_LEGACY_NONE = 0,
    TIMEOUT_LEGACY_SECONDS, /* whole seconds (config_get_uint), 1 s up to the row's max */
    TIMEOUT_LEGACY_TIMESPAN /* a .NET TimeSpan or seconds (config_get_timespan_ms), from 1 s */
};

enum timeout_id {
#define TIMEOUT_ENUM_(id, ...) TIMEOUT_##id,
    TIMEOUTS_TABLE(TIMEOUT_ENUM_)
#undef TIMEOUT_ENUM_
        TIMEOUT_COUNT
};

/* One row of the table (static storage). */
struct timeout_def {
    const char *name; /* the setting is "Timeouts:" name "Ms" */
    uint64_t default_ms;
    uint64_t min_ms;
    uint64_t max_ms;
    const char *legacy_key; /* NULL: none */
    enum timeout_legacy legacy;
    const char *what;
};

/* The row of id; NULL for an id out of range. */
const struct timeout_def *timeout_def(enum timeout_id id);

/* The values in effect, one per row. Plain data: copy it freely. */
struct timeouts {
    uint64_t ms[TIMEOUT_COUNT];
};

/* Every row's default. */
void timeouts_defaults(struct timeouts *t);

/*
 * Defaults, then the older settings, then every Timeouts:<Name>Ms of cfg. A value that is not a
 * whole number within the row's bounds, a key under Timeouts: that names no row, or values that
 * contradict each other (BackoffMin over BackoffMax, ShutdownGrace over ShutdownDeadline) are
 * refused: AGENT_E_INVAL with one line for the operator in err (naming the key, the value and
 * the bounds), and *t is left with the defaults. Returns 0 otherwise.
 */
int timeouts_load(struct timeouts *t, const struct config *cfg, char *err, size_t errlen);

/* The wait after cur (0: none yet) of a doubling backoff from BackoffMin up to BackoffMax. */
uint64_t timeouts_backoff_next(const struct timeouts *t, uint64_t cur);

#endif
