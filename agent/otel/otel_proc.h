/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTEL_PROC_H
#define DOTMON_OTEL_PROC_H
/*
 * The OpenTelemetry producers (issue 33 items 2, 3, 4; docs/otel.md): for every watched process
 * that otel_wants_process accepts, its resource (read once from its environment through the IPC
 * ProcessEnvironment command, bounded by Timeouts:IpcExchange, and its cgroup), a continuous logs
 * session whose ILogger records become LogRecords, and its metric samples (taken from the
 * continuous metrics pipeline through metrics_set_hook) exported every metric_interval_ms as OTLP
 * metrics. Items go to the exporter (otel.h) as they are made; the exporter owns queues and
 * sending. libuv glue, loop thread only; the mapping itself is otel_map.h's.
 *
 * Wiring (agent.c): otel_procs_new after otel_new; otel_procs_on_process from the discovery's
 * change hook beside metrics_on_process; metrics_new(a, <OTLP metrics on>, …) then
 * metrics_export_meters(a->metrics, otel_settings(o)->meters) and
 * metrics_set_hook(a->metrics, otel_procs_on_sample, procs); otel_procs_close before
 * otel_shutdown (the last metric values are handed over first).
 *
 * Secrets: of a process's environment only the variables otel_env_take names are kept; the rest
 * is dropped as it is read and never logged.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_metric.h"
#include "ipc_cmd.h"
#include "otel.h"

struct agent;
struct ipc_process;
struct otel_procs;

/* *out NULL (and 0) when o is NULL or exports neither logs nor metrics. 0 or -ENOMEM. */
int otel_procs_new(struct agent *a, struct otel *o, struct otel_procs **out);
/* A process was discovered (added) or is gone. ps may be NULL. */
void otel_procs_on_process(struct otel_procs *ps, const struct ipc_process *p, bool added);
/* A metrics_sample_hook (metrics.h): s is taken into the process's series (ud: the otel_procs). */
void otel_procs_on_sample(void *ud, const char *uid, const struct ev_metric_sample *s);
/*
 * Shutdown: hands every process's last metric values to the exporter, then stops every telemetry
 * session gracefully (StopTracing; what the runtime still had buffered is read to the end of the
 * stream and fed to the decoders, so its records and spans reach the exporter), at most drain_ms;
 * a session not ended by then is aborted (a warning counts them). done(ud) once every process is
 * removed and its source released: then the exporter may be shut down (otel_shutdown). done may
 * run inside this call (nothing to wait for, or ps NULL). The rest goes in the background (ps is
 * freed once its handles closed).
 */
void otel_procs_close(struct otel_procs *ps, uint64_t drain_ms, void (*done)(void *ud), void *ud);

/*
 * The providers of a process's telemetry session (one EventPipe session per process for logs and
 * spans): the logs session's two (Microsoft-Extensions-Logging with keyword 0x8 and the level and
 * FilterSpecs of st; TplEventSource 0x80 for scopes) when logs are exported, and when traces are,
 * Microsoft-Diagnostics-DiagnosticSource (EV_ACTIVITY_KEYWORDS, EV_ACTIVITY_LEVEL) with the
 * FilterAndPayloadSpecs of ev_activity_filter_specs(st->activity_sources or "*", ratio): ratio is
 * st->sampling_ratio with sampler, 1 without (runtimes whose DiagnosticSource is older than 9 drop
 * a line with a sampler). *_args hold the argument strings.
 */
#define OTEL_MAX_PROVIDERS 4
#define OTEL_AS_ARGS_MAX   16384
struct otel_providers {
    struct ipc_provider v[OTEL_MAX_PROVIDERS];
    size_t n;
    char mel_args[4096];
    char as_args[OTEL_AS_ARGS_MAX];
};
/* 0, AGENT_E_TOOBIG (the filter or the sources do not fit), AGENT_E_INVAL (a source name the
 * spec syntax cannot carry, a ratio outside [0, 1]). */
int otel_session_providers(const struct otel_settings *st, struct otel_providers *out);
int otel_session_providers_sampled(const struct otel_settings *st, bool sampler,
                                   struct otel_providers *out);

/*
 * One filter per process (docs/events.md §4.1): while logs are exported, otel_procs is the keeper
 * of collect/dsession.h, and restarts a process's OTel session after another session with
 * Microsoft-Extensions-Logging ended (the runtime left every record filtered out). The
 * OTel session's DiagnosticSource lines are kept by collect/dsession.c, as every session's are.
 */

#endif
