/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STORE_H
#define AGENT_EV_STORE_H

/*
 * The metrics of one process (../shared/EVENTS.md §5.1) and their Prometheus text (§5.2). Pure:
 * no libuv, no I/O. Samples are copied in (ev_metric.h); the store keeps the newest sample of
 * every series (counter name + its tags), and drops what dotnet-monitor drops (histograms without
 * quantiles, values that are not numbers where dotnet-monitor ends the counter).
 */

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ev_metric.h"

struct ev_store;

struct ev_store_options {
    uint32_t max_series;       /* series kept; 0 = a default (1024); past it new series drop */
    uint32_t default_interval; /* GlobalCounter:IntervalSeconds, for meter rate HELP text */
};

int ev_store_new(struct ev_store **out, const struct ev_store_options *opt);
void ev_store_free(struct ev_store *st);
/* Copies s in. 0, or -ENOMEM / AGENT_E_TOOBIG (max_series reached: the sample is dropped). */
int ev_store_add(struct ev_store *st, const struct ev_metric_sample *s);
void ev_store_clear(struct ev_store *st);
size_t ev_store_series(const struct ev_store *st);

/* Labels added to every line of one process (dotmon's: pid, uid, name); n = 0 for none. */
struct ev_prom_labels {
    const char *const *keys;
    const char *const *values;
    size_t n;
};

/* One process's store and its labels, for ev_prom_render. */
struct ev_prom_target {
    const struct ev_store *store;
    struct ev_prom_labels labels;
};

/*
 * Appends the Prometheus text exposition 0.0.4 of every target to out, grouped by metric name
 * across targets (one `# HELP` and one `# TYPE` per name, then every process's lines), names,
 * HELP, TYPE, values and labels as dotnet-monitor writes them (EVENTS.md §5.2), but one sample
 * per series (the newest) rather than MetricCount duplicates. Text that promtool accepts.
 * 0 or -ENOMEM / AGENT_E_TOOBIG (out's cap).
 */
int ev_prom_render(const struct ev_prom_target *targets, size_t n, struct buf *out);

#endif
