/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STORE_INTERNAL_H
#define AGENT_EV_STORE_INTERNAL_H

/*
 * Shared between ev_store.c (the series table) and ev_prom.c (the Prometheus text): the layout of
 * one stored series. Not part of the module's API.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_metric.h"

/*
 * One series: the newest sample of (provider, counter name, meter tags, instrument tags, value
 * tags). The struct and all its strings are one allocation (the strings follow the struct), so a
 * newer sample replaces the whole block. Absent strings are stored as "".
 */
struct ev_series {
    const char *provider;
    const char *name;
    const char *display_name;
    const char *unit;
    const char *tags;
    const char *meter_tags;
    const char *instrument_tags;
    const char *prom_name;  /* ev_prom_metric_name of provider, name, unit */
    const char *total_name; /* prom_name + "_total" (meter counters' cumulative family) */
    enum ev_metric_kind kind;
    bool is_meter;
    double value;
    bool has_total;
    double total;
    double interval_sec;
    int64_t timestamp_ms;
    uint32_t nquantiles;
    struct ev_quantile quantiles[EV_METRIC_MAX_QUANTILES];
    uint64_t hist_count;
    double hist_sum;
    uint64_t seq;  /* arrival order of the newest sample, for stable output */
    uint32_t hash; /* of the identity strings */
    uint32_t next; /* hash chain: index + 1 into the series array, 0 ends it */
    size_t bytes;  /* the allocation's size, charged to the store's share */
};

/* The series of a store, in no particular order; *n receives their count. */
const struct ev_series *const *ev__store_view(const struct ev_store *st, size_t *n);
double ev__store_default_interval(const struct ev_store *st);

#endif
