/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_EXPHIST_H
#define AGENT_EV_EXPHIST_H

/*
 * Base-2 exponential histograms as .NET 10's System.Diagnostics.Metrics publishes them
 * (Base2ExponentialHistogramValuePublished, docs/events.md §3.7): the bucket string parser, the
 * value-to-bucket mapping, the bucket offset the event leaves out (recovered from the maximum),
 * quantiles estimated from the buckets, and an accumulator that adds histograms of any scales
 * (for a cumulative OTLP point, docs/otel.md §4). Pure: no libuv, no I/O, no globals.
 *
 * Bucket `index` at scale s holds the values in (base^index, base^(index+1)], base = 2^(2^-s);
 * zeros are counted apart; negative values are not recorded by the runtime.
 */

#include <stdbool.h>
#include <stdint.h>

#define EV_EXPHIST_MIN_SCALE   (-11)
#define EV_EXPHIST_MAX_SCALE   20
#define EV_EXPHIST_MAX_BUCKETS 1024u /* counts accepted in one event; more = malformed */

/* One histogram point (ev_metric.h's optional bucket part of a histogram sample). */
struct ev_exphist {
    int32_t scale;
    int32_t offset; /* index of counts[0] */
    uint64_t zero_count;
    double min, max; /* of every value recorded, zeros included; meaningful when count > 0 */
    bool cumulative; /* false: the interval's values only (reportDeltas=true, dotmon's ask) */
    const uint64_t *counts; /* positive buckets, ascending; not owned */
    uint32_t ncounts;
};

/*
 * "n, n, n" (the runtime's bucket string; "" = no bucket) into out[0..max). Each count is
 * decimal digits below 2^63, items separated by ',' with optional spaces. 0, or AGENT_E_INVAL
 * (not that shape, a count too large) or AGENT_E_TOOBIG (more than max counts); *n is the count.
 */
int ev_exphist_parse_counts(const char *s, uint64_t *out, uint32_t max, uint32_t *n);

/* The bucket index of v (finite, > 0) at scale (EV_EXPHIST_MIN_SCALE..MAX_SCALE). */
int64_t ev_exphist_index(double v, int32_t scale);

/* base^index at scale: the lower bound of bucket index (0 or +Inf past the double range). */
double ev_exphist_lower(int64_t index, int32_t scale);

/*
 * Sets h->offset, which the event leaves out (docs/events.md §3.7): the last bucket is the one of
 * h->max, or, when that count is 0, the runtime's stale window end of bucket -1. Empty buckets at
 * either end are then dropped (h->counts and h->ncounts move). False when the buckets cannot be
 * placed: counts without a positive finite max, the max's (or a positive min's) bucket outside the
 * window or empty, a scale out of range, an offset outside int32.
 */
bool ev_exphist_locate(struct ev_exphist *h);

/*
 * The q-quantile (0 < q <= 1) estimated from the buckets: the bucket holding rank q * total,
 * interpolated linearly inside it and kept within [min, max]. False when h holds no value.
 */
bool ev_exphist_quantile(const struct ev_exphist *h, double q, double *out);

/* Histograms added up; the scale only goes down, to keep at most max_buckets (>= 2) buckets. */
struct ev_exphist_acc {
    struct ev_exphist h; /* h.counts is acc's own array (counts) */
    uint64_t count;
    double sum;
    uint64_t *counts; /* owned */
    bool any;         /* a value was added (h.min, h.max valid) */
};

/* Adds h (count and sum of its point). 0, -ENOMEM or -EOVERFLOW (a total would reach 2^63): acc
 * unchanged. */
int ev_exphist_acc_add(struct ev_exphist_acc *acc, const struct ev_exphist *h, uint64_t count,
                       double sum, uint32_t max_buckets);
void ev_exphist_acc_fini(struct ev_exphist_acc *acc);

#endif
