/* SPDX-License-Identifier: MIT */
#ifndef AGENT_AGENT_H
#define AGENT_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "cli.h"
#include "config.h"
#include "ev_prom.h"
#include "ipc_discovery.h"
#include "ipc_session.h"
#include "job.h"
#include "operations.h"
#include "ring_registry.h"
#include "rules.h"
#include "timeouts.h"

/*
 * The composition root: owns the loop's long-lived objects (HTTP server, discovery, auth
 * verifier, signal handlers) and wires REST routes to IPC commands. Only agent/ knows both
 * sides (docs/style.md §1).
 */

enum agent_listener_tag { AGENT_TAG_ARTIFACTS = 1, AGENT_TAG_METRICS = 2 };

/* The artifact URL without Urls or --urls (dotnet-monitor's default). */
#define AGENT_DEFAULT_URL "http://localhost:52323"

struct apikey_token_file;
struct rules_filter;
struct rules_filter_list;
struct artifact;
struct buf;
struct egress_set;

struct agent {
    uv_loop_t *loop;
    const struct cli_options *opts;
    const struct config *cfg;

    struct http_server *http;
    struct http_tls_ctx *tls; /* https:// listeners (agent_tls.c); NULL without one */
    struct ipc_discovery *disc;
    /* Every trace session alive, aborted ones still closing included (collect_trace.c admits new
     * ones against it); sessions count themselves here until they are freed, so it lives as
     * long as the loop runs (struct agent outlives the loop in main.c). */
    struct ipc_session_admission sessions;
    /* Metrics and live-metrics sessions (metrics_session.c), counted apart: they are long-lived
     * (one per process) and must never make /trace answer 429. */
    struct ipc_session_admission metric_sessions;
    struct auth_verifier *verifier; /* NULL: no key (every request 401) unless no_auth */
    bool no_auth;
    char *key_settings;                   /* the key settings in effect (apikey.c) */
    struct apikey_token_file *token_file; /* --token-file written (apikey.c), or NULL */
    struct apikey_watch *keywatch;        /* configuration file watcher (apikey.c), or NULL */

    /* DefaultProcess:Filters (rules.h's reader and matcher; every filter must match): the list,
     * owned, and its filters. */
    struct rules_filter_list *filter_list;
    const struct rules_filter *filters;
    size_t nfilters;

    char *diag_dir; /* directory watched for runtime sockets (connect mode) */
    /* Every timeout in effect (timeouts.h), loaded by agent_init; read with agent_timeout. */
    struct timeouts timeouts;
    struct ipc_trust trust; /* DiagnosticPort:TrustedUids: whose runtimes dotmon talks to */
    struct ipc_identity_vars identity_vars; /* Identity:*Variables (ipc_identity.h) */

    /* Listen mode (DiagnosticPort, see setup_listen in agent.c); listen_path NULL: connect mode. */
    char *listen_path; /* the socket dotmon binds */
    bool node_mode; /* DiagnosticPort:ConnectionMode=Node (docs/ipc.md §6): runtimes found through
                       /proc; listen_path is NULL */
    unsigned listen_socket_mode;   /* DiagnosticPort:SocketMode (default 0600) */
    bool listen_hold;              /* DiagnosticPort:HoldSuspended */
    size_t listen_max_connections; /* DiagnosticPort:MaxConnections (0: default) */

    uv_signal_t sig_int;
    uv_signal_t sig_term;
    uv_timer_t shutdown_deadline; /* armed by agent_stop (unreferenced) */
    uint64_t stop_started_ms;     /* uv_now when agent_stop began */
    uv_timer_t idle_trim;         /* the last job went: agent_went_idle soon (unreferenced) */
    bool idle_trim_on;            /* idle_trim is initialized and not closed */
    int open_handles;             /* signal handles + http server + discovery still open */
    bool stopping;
    int exit_code;

    struct op_registry ops;      /* traces and dumps */
    struct collect_ctx collect;  /* the collection jobs (collect/job.h): loop, ops, artifacts */
    char *dump_dir;              /* Storage:DumpTempFolder: where dotmon reads dumps */
    char *dump_target_dir;       /* Storage:DumpTargetFolder: the same folder as apps see it */
    char *dump_refused;          /* why dump_dir failed StrictModes at start-up, or NULL */
    uint64_t gcdump_max_nodes;   /* GCDump:MaxNodes: the biggest graph a gcdump builds */
    uint32_t gcdump_buffer_mb;   /* GCDump:BufferSizeMB: the runtime's buffer for the heap walk */
    double metrics_interval_sec; /* GlobalCounter:IntervalSeconds: 1-86400, a float as .NET */
    /* GlobalCounter:MaxHistograms and :MaxTimeSeries (20 and 1000): the limits every
     * System.Diagnostics.Metrics session dotmon starts asks the runtime for. */
    uint32_t metrics_max_histograms;
    uint32_t metrics_max_time_series;
    uint64_t mem_cgroup_limit; /* the cgroup's memory limit at start-up, bytes; 0: none */

    uint64_t requests_total;
    /* /metrics' own timing (api_process.c): each scrape from its request to its last byte
     * queued. */
    struct ev_prom_hist scrape_hist;
    bool metrics_enabled;    /* Metrics:Enabled / --metrics (for /info) */
    struct metrics *metrics; /* continuous metrics sessions (metrics.c); NULL when disabled */
    /* the exceptions history of every process (exceptions.c); NULL when disabled */
    struct exceptions *exceptions;
    struct mcp *mcp;   /* the MCP endpoint /mcp (agent/mcp/mcp.h); NULL when Mcp:Enabled is off */
    struct otel *otel; /* OpenTelemetry export (otel/otel.h); NULL when no signal is exported */
    struct otel_procs *otel_procs; /* its producers (otel/otel_proc.h); NULL with it */
    struct rules_run *rules;    /* collection rules (rules_run.c); NULL when none is configured */
    struct ring_registry rings; /* the rules' trace rings, for their readers (ring_registry.h) */
    char *rules_settings;       /* the rule settings in effect, to notice a change on reload */
    char *rules_refused;        /* the rule settings a reload last refused (errors said once) */

    /* Processes not yet announced at Info: short-lived ones (the SDK's own build processes)
     * are logged at Debug only (agent.c on_process_change). */
    struct agent_newcomer {
        uint64_t pid;
        char uid[37];
        char *name;
        uint64_t since_ms; /* uv_now() when it appeared */
    } * newcomers;
    size_t nnewcomers;
    uv_timer_t announce_timer;

    /* Egress:* (egress/egress.h): the providers egressProvider names; never NULL after agent_init
     * (an empty set without Egress settings). Replaced by a configuration reload (apikey.c). */
    struct egress_set *egress;
    char *egress_settings;      /* the Egress entries in effect, to notice a change on reload */
    struct artifact *artifacts; /* egress artifacts alive (artifact.c) */
    uv_timer_t egress_grace;    /* shutdown: aborts the uploads still running (artifact.c) */
    int egress_grace_state;     /* 0 never started, 1 armed, 2 closed */

    uint64_t trace_spool_limit; /* Trace:SpoolLimitMB in bytes (0: no spool) */
    struct agent_trace_stats {  /* over finished traces, for /metrics */
        uint64_t traces;
        uint64_t events;
        uint64_t dropped; /* events the runtimes dropped */
        uint64_t bytes;
        uint64_t spilled;       /* bytes that went through a spool file */
        uint64_t spool_limited; /* traces whose spool reached Trace:SpoolLimitMB */
    } trace_stats;
};

/* The value in effect of one of timeouts.h's rows, in milliseconds. */
static inline uint64_t agent_timeout(const struct agent *a, enum timeout_id id)
{
    return a->timeouts.ms[id];
}

/*
 * Reads configuration, sets up authentication and the default-process filters. Prints the
 * temporary API key (--temp-apikey) and the next steps on stdout (apikey.h), before any log line.
 * Returns 0 or a negative code after logging the reason (invalid configuration: the caller exits
 * non-zero).
 */
int agent_init(struct agent *a, uv_loop_t *loop, const struct cli_options *opts,
               const struct config *cfg);
/*
 * The egress providers of cfg's Egress:* entries (egress_set_parse): 0 and *out (possibly empty),
 * or AGENT_E_INVAL with one '\n'-terminated line per problem in errors (no secret in them), or
 * UV_ENOMEM. *settings (may be NULL): the Egress entries as one string, to compare on reload.
 */
int agent_egress_parse(const struct config *cfg, struct egress_set **out, char **settings,
                       struct buf *errors);
/* Names each line of agent_egress_parse's errors: logged (log true), or on stderr after
 * "dotmon: " (config show). */
void agent_egress_report(const struct buf *errors, bool log);

/* Binds the URLs, starts discovery and the signal handlers. */
/* p as the process filters see it (rules.h): its names, command line and identity (views of p),
 * for DefaultProcess, collection rules and the OpenTelemetry filters alike. */
struct rules_process agent_rules_process(const struct ipc_process *p);

int agent_start(struct agent *a);
/* Graceful stop: closes everything; the loop then runs out. Idempotent. If it has not within
 * Timeouts:ShutdownDeadlineMs (5 s), the process exits with status 3 (the deadline's timer is left
 * open for main's final uv_walk). */
void agent_stop(struct agent *a);
/* Frees what agent_init allocated; call after the loop has run out. */
void agent_fini(struct agent *a);

#endif
