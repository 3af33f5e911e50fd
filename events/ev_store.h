/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STORE_H
#define AGENT_EV_STORE_H

/*
 * The metrics of one process (docs/api.md §7.2) and their Prometheus text (api.md §7.3). Pure:
 * no libuv, no I/O. Samples are copied in (ev_metric.h); the store keeps the newest sample of
 * every series (counter name + its tags), and drops what dotnet-monitor drops (histograms without
 * quantiles, values that are not numbers where dotnet-monitor ends the counter).
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
    uint32_t max_series;       /* series kept; 0 = a default (1024); past it new series drop */
    uint32_t default_interval; /* GlobalCounter:IntervalSeconds, for meter rate HELP text */
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
 * HELP, TYPE, values and labels as dotnet-monitor writes them (docs/api.md §7.3), but one sample
 * per series (the newest) rather than MetricCount duplicates. Text that promtool accepts.
 * 0 or -ENOMEM / AGENT_E_TOOBIG (out's cap).
 */
int ev_prom_render(const struct ev_prom_target *targets, size_t n, struct buf *out);

/*
 * Where ev_prom_render departs from dotnet-monitor so that the text stays valid Prometheus:
 * - one line per series and scrape (the newest sample), each family's lines together, one HELP
 *   and TYPE per name; if two series of one family render the same label set, the newest wins;
 * - a tag key that would repeat a label of its line (an earlier tag, a process label such as
 *   pid/uid/name, or `quantile`), that is empty or that starts with `__` (reserved) is prefixed
 *   with "tag_" until it is unique: tag pid=7 on a process labelled pid="42" prints
 *   tag_pid="7", pid="42";
 * - a name that is both a summary and a gauge keeps the first kind met (summaries sort first)
 *   and drops the other's lines; a gauge named <summary>_sum or <summary>_count is dropped;
 * - a provider whose first kept character would be a digit drops it (dotnet-monitor checks
 *   "first" against the input position, which can leave a name starting with a digit);
 * - values print NaN, +Inf, -Inf (Prometheus spellings, not .NET's "Infinity"); HELP text
 *   escapes `\` and newlines; EventCounters with an empty DisplayName use the counter name;
 * - and one addition: a meter counter whose sample carries its running total (has_total) also
 *   gets a family <name>_total of TYPE counter with that total, so Prometheus' rate() and
 *   increase() work on it; dotnet-monitor's per-interval rate gauge <name> stays as it is.
 */

/*
 * dotnet-monitor's metric name (docs/api.md §7.3): provider (lower-cased, invalid characters
 * dropped) "_" counter (invalid characters replaced by "_") ["_" unit'], unit' mapping ""/count to
 * nothing, B/MB to bytes and % to ratio (ASCII case-insensitive), any other unit verbatim. A
 * non-ASCII code point counts as one invalid character (two past U+FFFF, as UTF-16 does).
 * Appends to out: 0 or -ENOMEM / AGENT_E_TOOBIG.
 */
int ev_prom_metric_name(struct buf *out, const char *provider, const char *counter,
                        const char *unit);

/* Room for any ev_prom_format_double text and its NUL ("-1.2345678901234567E-308" is 24). */
#define EV_PROM_DOUBLE_MAX 32

/*
 * v as .NET's double.ToString(CultureInfo.InvariantCulture) writes it (ev_fmt.h: shortest text
 * that reads back as v; "1E+17", "1.5E-05" from 17 digits on or below 1E-04), except +Inf and
 * -Inf in Prometheus' spelling. out holds at least EV_PROM_DOUBLE_MAX bytes; returns the length,
 * or 0 when it does not fit.
 */
size_t ev_prom_format_double(double v, char *out, size_t n);

#endif
