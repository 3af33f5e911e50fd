/* SPDX-License-Identifier: MIT */
#ifndef AGENT_METRICS_SESSION_H
#define AGENT_METRICS_SESSION_H

/*
 * One metrics session with one runtime: the EventPipe session that enables a set of EventCounters
 * providers and meters, its stream decoded by events/ev_stream into samples, the samples nobody
 * asked for filtered out. Used by the continuous metrics of every process (metrics.c) and by
 * /livemetrics (collect_livemetrics.c). libuv glue; the filters are plain data.
 *
 * Providers get EventCounterIntervalSec (their own interval, GlobalCounter:Providers:<name>:
 * IntervalSeconds, or the global one). Meters (and the runtime's System.Runtime meter, .NET 9+)
 * go through System.Diagnostics.Metrics: in shared mode on .NET 8+ (SessionId SHARED with a
 * ClientId of our own, so other tools' sessions and ours coexist), else with a session id of our
 * own (docs/events.md §3.1-3.2).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "ev_metric.h"
#include "ipc_client.h"

#define METRICS_MAX_FILTERS 64
#define METRICS_MAX_NAMES   256

/* One EventCounters provider or meter whose values are wanted. */
struct metrics_filter {
    char *name;   /* ProviderName or MeterName */
    char **names; /* CounterNames or InstrumentNames; none = all */
    size_t nnames;
    double interval_s; /* EventCounterIntervalSec (providers), single precision */
    bool meter;
};

struct metrics_filters {
    struct metrics_filter v[METRICS_MAX_FILTERS];
    size_t n;
    bool runtime_meter; /* the System.Runtime meter, all instruments (default providers) */
    double interval_s;  /* GlobalCounter:IntervalSeconds: meters' RefreshInterval */
    /* > 0: EventCounters of another interval are dropped (ev_stream_options.counter_interval_s,
     * as dotnet-monitor's CounterFilter does for the triggers of collection rules). */
    double counter_filter_s;
    /* Ask .NET 10+ for base-2 exponential histograms (Base2ExponentialHistogram argument,
     * reportDeltas=true: each point holds its interval, as the quantiles did; docs/events.md
     * §3.7). Set for the exporter's continuous sessions only. */
    bool exp_histograms;
};

/*
 * From the settings (Metrics:IncludeDefaultProviders, Metrics:Providers, Metrics:Meters,
 * GlobalCounter:Providers:<name>:IntervalSeconds). 0, AGENT_E_INVAL (logged) or -ENOMEM.
 */
int metrics_filters_from_config(struct metrics_filters *f, const struct config *cfg,
                                double interval_s);
/*
 * From dotnet-monitor's EventMetricsConfiguration body (POST /livemetrics):
 * {"includeDefaultProviders":bool, "providers":[{"providerName":"…","counterNames":["…"]}],
 *  "meters":[{"meterName":"…","instrumentNames":["…"]}]}; member names case-insensitive.
 * 0, AGENT_E_INVAL with a message appended to err, or -ENOMEM.
 */
int metrics_filters_from_json(struct metrics_filters *f, const char *body, size_t len,
                              double interval_s, struct buf *err);
void metrics_filters_fini(struct metrics_filters *f);
/* True when s is one of the wanted values. */
bool metrics_filters_want(const struct metrics_filters *f, const struct ev_metric_sample *s);
/* GlobalCounter:Providers:<provider>:IntervalSeconds when it is set and valid (1-86400), else
 * global_s. */
double metrics_provider_interval(const struct config *cfg, const char *provider, double global_s);
/* The same as a trace_provider_interval_fn (trace_config.h): ud is the const struct config; 0 when
 * the provider has no interval of its own. */
double metrics_trace_interval(const void *cfg, const char *provider);
/* The shortest EventCounters interval in ms, 0 when no provider is enabled. */
uint64_t metrics_filters_counter_interval_ms(const struct metrics_filters *f);

struct agent;
struct msession;

struct msession_callbacks {
    void (*on_started)(void *ud);
    void (*on_sample)(void *ud, const struct ev_metric_sample *s); /* wanted samples only */
    /* System.Diagnostics.Metrics refused or reported a problem for our session. */
    void (*on_warning)(void *ud, const char *kind, const char *message);
    /* Last call; the session is freed right after. status as ipc_session's on_end, or
     * AGENT_E_PROTO when the stream could not be read; reason says it in words. */
    void (*on_end)(void *ud, int status, const char *reason);
};

/*
 * Starts a session. f must outlive it. major: the runtime's major version (0 unknown). Returns
 * 0 (callbacks follow) or a negative code (none follow).
 */
int msession_start(struct agent *a, const struct ipc_endpoint *ep, int major,
                   const struct metrics_filters *f, const struct msession_callbacks *cb, void *ud,
                   struct msession **out);
/* Graceful stop: StopTracing, the rest of the stream, then on_end. Idempotent. */
void msession_stop(struct msession *s);
/* No more callbacks; the runtime's session is stopped in the background. */
void msession_abort(struct msession *s);
/* uv_now of the last EventCounters event (wanted or not), or of the start. */
uint64_t msession_last_counter_ms(const struct msession *s);
/* Whether any EventCounters event has arrived in this session (a process that has none of the
 * providers never gets a staleness restart). */
bool msession_counters_seen(const struct msession *s);

#endif
