/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTEL_H
#define DOTMON_OTEL_H
/*
 * OpenTelemetry export (issue 33): dotmon forwards every watched app's logs, metrics and spans to
 * an OTLP/HTTP endpoint. This is the exporter: settings (OTel's OTEL_* environment variables as
 * the SDKs read them, and dotmon's `OpenTelemetry` settings section), one bounded queue per signal,
 * batching by size and time, OTLP/HTTP POSTs on the loop (egress/ehttp: TLS with the egress
 * client's verification rules), gzip, retries with exponential backoff on 429/502/503/504 and
 * connection errors honouring Retry-After, partial-success answers logged, counts of what was
 * exported, dropped and failed per process and per signal, and a flush with a deadline at
 * shutdown.
 *
 * Producers (agent/otel/otel_proc.c: one per watched process) hand items over as they decode
 * them; each item is encoded at once (otlp/otlp.h) and queued as bytes, charged to dotmon's memory
 * budget; a full queue drops the item and counts it (never unbounded memory, never a wait).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "otlp.h"

struct agent;
struct buf;
struct cJSON;
struct otel;
struct otel_source;

/* What the producers need to know of the settings (owned by struct otel). */
/* The most often one kind of trouble (drops, partial successes, series left out) is warned of,
 * per signal or per process; the counts tell the rest. */
#define OTEL_WARN_EVERY_MS 60000u

struct otel_settings {
    bool signal[3]; /* by enum otlp_signal: exported at all */
    int log_level;  /* enum ev_log_level: the lowest level forwarded (default Information) */
    /* The records' scope pairs as attributes (OpenTelemetry:IncludeScopes, default true): the
     * session then also asks TplEventSource to flow activity ids through the app's awaits, which
     * is what ties a record to its scopes and what the app pays for them. */
    bool include_scopes;
    const char *log_filter; /* the logs session's FilterSpecs ("" for the default), see /logs */
    const char *meters;     /* ';'-separated meter names (NULL: dotmon's /metrics set) */
    const char *activity_sources; /* ';'-separated ActivitySource names ("*": every source) */
    double sampling_ratio; /* traces: 1.0 every trace; (0,1) the runtime's parent-ratio sampler */
    uint64_t metric_interval_ms; /* OTEL_METRIC_EXPORT_INTERVAL (default 60000) */
    /* Histograms as OTLP ExponentialHistograms on .NET 10+ (OpenTelemetry:HistogramAggregation /
     * OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION, default true), else Summaries. */
    bool exp_histograms;
};

/*
 * Reads the settings from the agent's configuration and environment. *out is NULL (and 0 is
 * returned) when no signal is enabled: nothing runs and nothing is spent. AGENT_E_INVAL: a
 * setting is wrong (why names it; start-up stops, as for any other setting).
 */
int otel_new(struct agent *a, struct otel **out, char *why, size_t whylen);
const struct otel_settings *otel_settings(const struct otel *o);

/* Whether p's telemetry is exported (the `OpenTelemetry:Filters` process filters; all if none). */
struct ipc_process;
bool otel_wants_process(const struct otel *o, const struct ipc_process *p);

/*
 * One producer: a process's resource (encoded now, in each signal's format). The source is
 * reference counted by the items queued from it: otel_source_release may come while some are
 * still waiting to be sent. NULL on ENOMEM.
 */
struct otel_source *otel_source_new(struct otel *o, uint64_t pid, const struct otlp_resource *res);
void otel_source_release(struct otel_source *s);

/*
 * Queues one item of s under scope. 0: queued; AGENT_E_BUDGET: dropped, the signal's queue is
 * full or the queues' memory budget is spent (counted as dropped); AGENT_E_INVAL: the signal is
 * off or the item does not encode (counted as failed); -ENOMEM (counted as dropped). Never
 * blocks, never calls back.
 */
int otel_emit_log(struct otel_source *s, const struct otlp_scope *scope, const struct otlp_log *l);
int otel_emit_span(struct otel_source *s, const struct otlp_scope *scope,
                   const struct otlp_span *sp);
int otel_emit_metric(struct otel_source *s, const struct otlp_scope *scope,
                     const struct otlp_metric *m);

/*
 * Counts n items of s (NULL: of no known process) that its producer left out before emitting
 * them (metric samples whose series the memory budget refused): shown as dropped.
 */
void otel_count_dropped(struct otel *o, const struct otel_source *s, enum otlp_signal sig,
                        uint64_t n);

/*
 * Counts n events of s's telemetry session that its runtime dropped before dotmon read them
 * (its session buffer was full): which signal they carried is unknown, so they are counted
 * apart from the items (dotmon_otel_lost_events_total).
 */
void otel_count_lost(struct otel *o, const struct otel_source *s, uint64_t n);

/* Counts for /metrics/dotmon (Prometheus text) and /info?extras=true. */
int otel_render_prom(const struct otel *o, struct buf *out);
struct cJSON *otel_status_json(const struct otel *o);

/*
 * Sends what is queued, then calls done(ud) (once, from the loop) when everything was sent or
 * deadline_ms passed; what is left then is counted as dropped. After it, otel_free (which may
 * also come before done: nothing is called then). Producers emit nothing after otel_shutdown.
 * otel_free releases the exporter's handles on later loop turns (the loop must run to free it);
 * sources still held by producers stay valid until otel_source_release, which never touches o.
 */
void otel_shutdown(struct otel *o, uint64_t deadline_ms, void (*done)(void *ud), void *ud);
void otel_free(struct otel *o);

#endif
