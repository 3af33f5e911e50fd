/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STORE_H
#define AGENT_EV_STORE_H

/*
 * The metrics of one process (docs/api.md §7.2); their Prometheus text (docs/api.md §7.3) is
 * ev_prom.h's, which reads the store (never the other way round). Pure: no libuv, no I/O. Samples
 * are copied in (ev_metric.h); the store keeps the newest sample of every series (counter name +
 * its tags), and drops what dotnet-monitor drops (histograms without quantiles, values that are not
 * numbers where dotnet-monitor ends the counter).
 */

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ev_metric.h"
#include "membudget.h"

struct ev_store;

/*
 * Long strings from a runtime are cut before they are stored: names, display names and units at
 * EV_NAME_MAX bytes, tag lists at EV_TAGS_MAX, each cut one followed by EV_CUT_MARKER. The
 * series' identity is the cut text (two names that agree on their first 256 bytes are one
 * series).
 */
#define EV_NAME_MAX   256u
#define EV_TAGS_MAX   1024u
#define EV_CUT_MARKER "...[cut]"

/*
 * s as stored: s itself when it is at most max bytes; else its first bytes (at most max, never
 * splitting a UTF-8 sequence) and EV_CUT_MARKER, written to out (cap at least
 * max + sizeof(EV_CUT_MARKER)). Returns s or out; NULL s gives NULL. Pure, no allocation.
 */
const char *ev_name_cut(const char *s, size_t max, char *out, size_t cap);

/* Room for one sample's cut strings (ev_sample_cut). */
struct ev_sample_cut {
    struct ev_metric_sample s;
    char provider[EV_NAME_MAX + sizeof(EV_CUT_MARKER)];
    char name[EV_NAME_MAX + sizeof(EV_CUT_MARKER)];
    char display_name[EV_NAME_MAX + sizeof(EV_CUT_MARKER)];
    char unit[EV_NAME_MAX + sizeof(EV_CUT_MARKER)];
    char tags[EV_TAGS_MAX + sizeof(EV_CUT_MARKER)];
    char meter_tags[EV_TAGS_MAX + sizeof(EV_CUT_MARKER)];
    char instrument_tags[EV_TAGS_MAX + sizeof(EV_CUT_MARKER)];
};
/*
 * in with every string through ev_name_cut (names, display name, unit at EV_NAME_MAX, tag lists
 * at EV_TAGS_MAX): returns &buf->s, whose strings point into in or buf (valid while both are).
 * Used by the store and by every consumer of a runtime's metrics (/livemetrics, rules).
 */
const struct ev_metric_sample *ev_sample_cut(const struct ev_metric_sample *in,
                                             struct ev_sample_cut *buf);

struct ev_store_options {
    uint32_t max_series;     /* series kept; 0 = a default (1024); past it new series drop */
    double default_interval; /* GlobalCounter:IntervalSeconds, for meter rate HELP text */
    /* Borrowed, may be NULL: every series' bytes (struct and strings) are charged to it; a new
     * series it refuses is dropped like one past max_series. Must outlive the store. */
    struct mb_share *share;
};

int ev_store_new(struct ev_store **out, const struct ev_store_options *opt);
/* Frees the store and gives its bytes back to its share. */
void ev_store_free(struct ev_store *st);
/*
 * Copies s in (its strings cut, ev_name_cut). 0, or -ENOMEM, AGENT_E_TOOBIG (max_series
 * reached) or AGENT_E_BUDGET (the share is full): a new series is then dropped and counted
 * (ev_store_dropped), a newer sample of a kept series that no longer fits keeps the older one.
 */
int ev_store_add(struct ev_store *st, const struct ev_metric_sample *s);
void ev_store_clear(struct ev_store *st);
size_t ev_store_series(const struct ev_store *st);
/* New series dropped so far (max_series or the share's cap), and bytes the series hold now. */
uint64_t ev_store_dropped(const struct ev_store *st);
uint64_t ev_store_bytes(const struct ev_store *st);

#endif
