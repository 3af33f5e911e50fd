/* SPDX-License-Identifier: MIT */
#ifndef AGENT_METRICS_H
#define AGENT_METRICS_H

/*
 * Continuous metrics of every discovered runtime (issue 15): one long-lived EventPipe session per
 * process with its EventCounters providers (System.Runtime and the configured ones) and, on
 * .NET 8+, System.Diagnostics.Metrics in shared mode (the System.Runtime meter of .NET 9+ and the
 * configured meters). The stream goes through events/ev_stream (decoding) into one ev_store per
 * process; GET /metrics renders them all. Sessions restart when they end while the process is
 * still there, and when EventCounters stop ticking (another session's Disable stops an
 * EventSource's counter timer for every session, docs/events.md §2.1).
 *
 * Settings (dotnet-monitor's names, docs/api.md §7): Metrics:Enabled,
 * Metrics:IncludeDefaultProviders (System.Runtime, Microsoft.AspNetCore.Hosting,
 * Grpc.AspNetCore.Server, and the System.Runtime meter), Metrics:Providers:N:ProviderName and
 * :CounterNames:M, Metrics:Meters:N:MeterName and :InstrumentNames:M, Metrics:MetricCount
 * (accepted; /metrics shows the newest sample of each series), GlobalCounter:IntervalSeconds and
 * GlobalCounter:Providers:<name>:IntervalSeconds; dotmon's own Metrics:AllProcesses (default
 * true; false = the default process only, as dotnet-monitor).
 */

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "ev_prom.h"
#include "ipc_discovery.h"

struct agent;
struct metrics;

/*
 * Reads the settings. *out is NULL (and 0 returned) when Metrics:Enabled is false and exported is
 * false. exported: the samples are also wanted by the OpenTelemetry exporter (metrics_set_hook):
 * the sessions then run even with Metrics:Enabled false, for every process (whatever
 * Metrics:AllProcesses says: /metrics still shows only what it says), and /metrics, /info and
 * dotmon's own families behave exactly as with metrics off (nothing is stored for them). Returns
 * 0, AGENT_E_INVAL (a bad setting, logged) or -ENOMEM.
 */
int metrics_new(struct agent *a, bool exported, struct metrics **out);
/*
 * Every wanted sample of every process also goes to hook (uid: the runtime's cookie), on the loop,
 * before it is stored; the views are the sample's (valid during the call). m may be NULL.
 */
struct ev_metric_sample;
typedef void (*metrics_sample_hook)(void *ud, const char *uid, const struct ev_metric_sample *s);
void metrics_set_hook(struct metrics *m, metrics_sample_hook hook, void *ud);
/*
 * Meters the exporter wants beyond the settings' (';'-separated names, every instrument; a meter
 * the settings already name keeps their instrument list): their samples go to the hook only,
 * never to /metrics. Before the first process. 0, AGENT_E_TOOBIG (more than METRICS_MAX_FILTERS
 * meters and providers: the rest are left out, logged), AGENT_E_INVAL (processes already there),
 * -ENOMEM. m or meters NULL: nothing.
 */
int metrics_export_meters(struct metrics *m, const char *meters);
/*
 * Whether the sessions ask .NET 10+ runtimes for base-2 exponential histograms (the exporter's
 * choice, docs/otel.md §4): then every consumer of the shared session gets buckets, with the
 * quantiles estimated from them (docs/events.md §3.7). Before the first process. m may be NULL.
 */
void metrics_export_exp_histograms(struct metrics *m, bool on);
/* A process was discovered (added) or is gone: start or end its session. m may be NULL. */
void metrics_on_process(struct metrics *m, const struct ipc_process *p, bool added);
/*
 * /metrics (api_process.c streams it): dotmon's own per-process families
 * (dotmon_process_metrics_up, and any per-process figure added to proc_families in metrics.c),
 * each family whole; nothing when m is NULL (metrics off). 0 or -ENOMEM (out unchanged past
 * its last whole line).
 */
int metrics_render_own(struct metrics *m, struct buf *out);
/* The next families of every shown process's own metrics (ev_prom_render_next over their
 * stores, labelled pid, uid, name), at least min_bytes of them unless c->done. m NULL or closed:
 * nothing, c->done. */
int metrics_render_next(struct metrics *m, struct ev_prom_cursor *c, size_t min_bytes,
                        struct buf *out);
/*
 * The runtimes' families of every shown process as one text: what metrics_render_next writes over
 * a whole cursor, shared by every scrape, so that a scrape costs a copy rather than a rendering.
 * After a change of the stores (a sample stored, a process come or gone) it is rendered again as
 * metrics_pace.h says: while scrapes keep coming, in the background at most Timeouts:
 * MetricsRenderMs after the change (a scrape meanwhile gets the text before it, out of date by
 * less than that); otherwise by the first scrape, before it is served. The caller gets a
 * reference (metrics_text_release) and the text never changes under it; a new rendering only
 * drops metrics' own reference, so the memory comes back once the last scrape holding it is done.
 * NULL when there is no text to share and the caller streams with metrics_render_next instead:
 * metrics off or closed, Metrics:AllProcesses false (what is shown depends on the discovery),
 * a text over METRICS_TEXT_MAX (rendered in one go it would hold the loop too long; tried once
 * per change), the memory budget refusing it, or no memory.
 */
#define METRICS_TEXT_MAX (1024u * 1024u)
struct metrics_text;
struct metrics_text *metrics_text_get(struct metrics *m);
/* How many texts metrics_text_get has rendered, and the time they took (monotonic clock): the
 * cost of /metrics beyond copying (dotmon_metrics_renders_total and _render_seconds_total). 0s
 * when m is NULL. */
void metrics_text_stats(const struct metrics *m, uint64_t *renders, uint64_t *render_ns);
/* The text's bytes [*data, *data + *len): whole lines, valid while the reference is held. */
const char *metrics_text_data(const struct metrics_text *t, size_t *len);
/* Drops a reference from metrics_text_get (NULL: nothing); the last one frees the text. */
void metrics_text_release(struct metrics_text *t);

/* dotmon's extra /info member (extras=true): each process's metrics state and, when it gets
 * none, why: [{"pid","uid","name","state":"running|starting|waiting","reason"}]. NULL on no
 * memory; an empty array when metrics are off (m NULL). */
struct cJSON *metrics_status_json(struct metrics *m);
/*
 * Memory budget (common/membudget.h): each process's series are charged to a share of their own
 * whose cap is metrics_share_cap() (1/8 of the budget, at least 1 MiB; 8 MiB without a budget).
 * At the cap the process's new series are dropped and counted: metrics_series_dropped (0 for an
 * unknown uid), shown on /metrics as dotmon_metrics_series_dropped_total{pid,uid} and in /info.
 */
uint64_t metrics_share_cap(void);
uint64_t metrics_series_dropped(struct metrics *m, const char *uid);

/* Ends every session (StopTracing in the background) and frees everything once handles close. */
void metrics_close(struct metrics *m);

/* /metrics: the rings of collection rules (dotmon_ring_*), one line per ring and family. */
int metrics_render_rings(struct agent *a, struct buf *out);

#endif
