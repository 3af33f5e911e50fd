/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_METRIC_H
#define AGENT_EV_METRIC_H

/*
 * One metric value decoded from a runtime's event stream: the contract between the decoder that
 * turns EventCounters and System.Diagnostics.Metrics events into samples (ev_counters.c) and the
 * consumers that store and render them (ev_store.c, Prometheus text, /livemetrics records).
 * Shapes and semantics: docs/events.md §2.3 (EventCounters), §3.5 (meters), api.md §7 (what
 * dotnet-monitor derives and prints). Pure data: no libuv, no allocation.
 *
 * Every string is UTF-8, NUL-terminated, and valid only during the callback that hands the sample
 * over; a consumer that keeps a sample copies what it needs.
 */

#include <stdbool.h>
#include <stdint.h>

#include "ev_exphist.h"

/* dotnet-monitor's counterType: Metric (EventCounter Mean, gauge, up-down counter, histogram) or
 * Rate (EventCounter Sum, meter counter rate). */
enum ev_metric_kind {
    EV_METRIC_GAUGE = 0,    /* "Metric": EventCounter Mean, ObservableGauge / Gauge */
    EV_METRIC_RATE = 1,     /* "Rate": EventCounter Sum (Increment), meter counter `rate` */
    EV_METRIC_UPDOWN = 2,   /* "Metric": meter up/down counter (`value`, or `rate` when empty) */
    EV_METRIC_HISTOGRAM = 3 /* "Metric": meter histogram, quantiles (and buckets) below */
};

#define EV_METRIC_MAX_QUANTILES 8

struct ev_quantile {
    double quantile; /* 0.5, 0.95, 0.99 */
    double value;
};

struct ev_metric_sample {
    const char *provider;     /* EventSource name (EventCounters) or meter name */
    const char *name;         /* counter name or instrument name */
    const char *display_name; /* EventCounters: DisplayName; meters: "" */
    const char *unit;         /* DisplayUnits ("count" for an empty Sum unit) or instrument unit */
    enum ev_metric_kind kind;
    bool is_meter;          /* from System.Diagnostics.Metrics */
    double value;           /* as dotnet-monitor takes it (events.md §2.3, §3.5); NaN possible */
    const char *tags;       /* EventCounters: Metadata "k:v,..."; meters: value tags "k=v,..." */
    const char *meter_tags; /* meters: from BeginInstrumentReporting; NULL for EventCounters */
    const char *instrument_tags; /* likewise */
    double interval_sec;         /* EventCounters: IntervalSec; meters: the refresh interval */
    int64_t timestamp_ms;        /* the event's time, Unix milliseconds (UTC) */
    uint32_t nquantiles;         /* histograms: ascending by quantile */
    struct ev_quantile quantiles[EV_METRIC_MAX_QUANTILES];
    /* Meter counters (CounterRateValuePublished v2+): the running total since the runtime's
     * aggregation began, shown to Prometheus as a counter (<name>_total) beside the rate. */
    bool has_total;
    double total;
    uint64_t hist_count; /* histograms: count of the interval (0 when the event has none) */
    double hist_sum;     /* histograms: sum of the interval */
    /* Histograms published as base-2 exponential buckets (.NET 10, docs/events.md §3.7): the
     * buckets; the quantiles above are then estimated from them. NULL for the runtime's own
     * quantiles (HistogramValuePublished). Valid during the callback only, like the strings. */
    const struct ev_exphist *exphist;
};

#endif
