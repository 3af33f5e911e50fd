/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_PROM_H
#define AGENT_EV_PROM_H

/*
 * The one writer of Prometheus text exposition 0.0.4 in dotmon (events/ev_prom.c): the runtimes'
 * families (ev_prom_render, and ev_prom_render_next, which writes them in pieces for a streamed
 * answer) and dotmon's own families (ev_prom_family and
 * ev_prom_sample_*), so that escaping and the rules of the format live in one place. Pure: no
 * libuv, no I/O; the caller owns every buffer.
 *
 * Every call appends whole lines or nothing: when a call fails (-ENOMEM, or AGENT_E_TOOBIG from a
 * capped buffer) out is truncated back to its size on entry, so text cut mid-line never leaves.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ev_prom_name.h"
#include "ev_store.h"

/* Names of dotmon's own families start with this. A runtime family whose name starts with it
 * (provider "dotmon", say) is left out: it would repeat or split one of dotmon's families. */
#define EV_PROM_RESERVED_PREFIX "dotmon_"

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

/* ---- dotmon's own families ------------------------------------------------------------------ */

/* "# HELP name help\n# TYPE name type\n"; help is escaped as HELP text. type: "gauge",
 * "counter". name must be a valid metric name (dotmon's: constants). */
int ev_prom_family(struct buf *out, const char *name, const char *type, const char *help);

/* One sample line without timestamp: name{k="v", ...} value\n, values escaped (malformed UTF-8
 * becomes U+FFFD); labels NULL or n 0: no braces. Keys must be valid label names. */
int ev_prom_sample_u64(struct buf *out, const char *name, const struct ev_prom_labels *labels,
                       uint64_t value);
int ev_prom_sample_double(struct buf *out, const char *name, const struct ev_prom_labels *labels,
                          double value);

/* One of dotmon's families with a single unlabelled line: ev_prom_family, then
 * ev_prom_sample_u64 (both or nothing). */
struct ev_prom_single {
    const char *name;
    const char *type;
    const char *help;
    uint64_t value;
};
int ev_prom_single_u64(struct buf *out, const struct ev_prom_single *f);

/*
 * One of dotmon's own histograms of durations, kept in nanoseconds and shown in seconds, fixed
 * buckets: le_ns[0..n) ascending upper bounds, le_text[i] the same bound in seconds as its le
 * label says it (a plain number, written as it is); each observation is counted in the first bucket
 * it fits (the text's buckets are cumulative, +Inf last). No floating point: a rendering costs
 * integers only. Zero-initialise, set le_ns, le_text and n (n <= EV_PROM_HIST_MAX).
 */
#define EV_PROM_HIST_MAX 16
struct ev_prom_hist {
    const uint64_t *le_ns;
    const char *const *le_text;
    size_t n;
    uint64_t counts[EV_PROM_HIST_MAX + 1]; /* the last one: above every bound */
    uint64_t count;
    uint64_t sum_ns;
};
void ev_prom_hist_add(struct ev_prom_hist *h, uint64_t ns);
/* The family (TYPE histogram): name_bucket{le="..."} for each bound and +Inf, name_sum (seconds,
 * 9 decimals), name_count; all or nothing. */
int ev_prom_histogram(struct buf *out, const char *name, const char *help,
                      const struct ev_prom_hist *h);

/* ---- the runtimes' families, in pieces ------------------------------------------------------- */

/* Where a streamed rendering is: the last family dealt with (written, in part or whole, or left
 * out), and when it was written in part, the labels of its last line. */
struct ev_prom_cursor {
    char *after; /* owned; NULL before the first family */
    char *open;  /* owned; labels of the last line written of family `after` when it goes on */
    int kind;    /* the open family's kind (gauge, summary, counter), kept when it goes on */
    bool done;   /* no family or line is left after the cursor */
};

void ev_prom_cursor_init(struct ev_prom_cursor *c);
void ev_prom_cursor_fini(struct ev_prom_cursor *c);

/*
 * Appends the next lines of targets' families in order (HELP and TYPE once, at a family's start),
 * until out has grown by at least max(min_bytes, 64 bytes per series held, so that a scrape
 * takes a bounded number of passes) or none is left (c->done set). A big family may go on in the
 * next call, after the label set of its last line (lines are sorted by labels), so one call
 * writes about min_bytes plus one line. The text of all the calls of one cursor is what
 * ev_prom_render writes in one go when nothing changes between them.
 *
 * The targets may change between two calls (series added or replaced, processes come and go):
 * each call takes them as they are then. A series that appears meanwhile before the cursor waits
 * for the next scrape; a family goes on with the kind (TYPE) it began with; every family name
 * has one HELP and TYPE and every label set one line per cursor, so the whole text stays valid.
 *
 * 0, or -ENOMEM / AGENT_E_TOOBIG: out is back to its size on entry and c is unchanged.
 */
int ev_prom_render_next(const struct ev_prom_target *targets, size_t n, struct ev_prom_cursor *c,
                        size_t min_bytes, struct buf *out);

#endif
