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
/* Hands every process's last metric values to the exporter, ends the sessions, releases the
 * sources; the rest goes in the background (ps is freed once its handles closed). NULL: nothing. */
void otel_procs_close(struct otel_procs *ps);

/*
 * The providers of a process's telemetry session (the seam where the Activity provider of traces
 * joins the logs providers: one EventPipe session per process for logs and spans): the logs
 * session's two (Microsoft-Extensions-Logging with keywords 0xC and the level and FilterSpecs of
 * st; TplEventSource 0x80 for scopes) when logs are exported. args holds the argument strings.
 */
#define OTEL_MAX_PROVIDERS 4
struct otel_providers {
    struct ipc_provider v[OTEL_MAX_PROVIDERS];
    size_t n;
    char mel_args[4096];
};
/* 0, or AGENT_E_TOOBIG (the filter does not fit mel_args). */
int otel_session_providers(const struct otel_settings *st, struct otel_providers *out);

#endif
