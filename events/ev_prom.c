/* SPDX-License-Identifier: MIT */
/*
 * Prometheus text exposition 0.0.4 of the metrics stores (docs/api.md §7.3): dotnet-monitor's
 * names, HELP, TYPE, values and labels, with the departures listed in ev_prom.h that keep the
 * text valid (one sample per series, contiguous families, unique label names).
 */
#include "ev_prom.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "ev_prom_name.h"
#include "ev_store.h"
#include "ev_store_internal.h"
#include "num.h"
#include "utf8.h"

/* Length of the well-formed UTF-8 sequence at p[0..n) (1..4), or 0 if the bytes there are not
 * one (utf8.h's strict rules). */
static size_t utf8_len(const unsigned char *p, size_t n)
{
    uint32_t cp;
    size_t len;
    return utf8_decode(p, n, &cp, &len) ? len : 0;
}

/* Decimal text of v, without printf. */
static int append_i64(struct buf *b, int64_t v)
{
    char s[24];
    size_t i = sizeof(s);
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do {
        s[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u != 0);
    if (v < 0) {
        s[--i] = '-';
    }
    return buf_append(b, s + i, sizeof(s) - i);
}

static int append_double(struct buf *b, double v)
{
    char s[EV_PROM_DOUBLE_MAX];
    size_t n = ev_prom_format_double(v, s, sizeof(s));
    return buf_append(b, s, n);
}

/* ---- text escapes --------------------------------------------------------------------------- */

/* Label values escape \ " and newline; HELP text escapes \ and newline. Malformed UTF-8 (which
 * Prometheus rejects in label values) becomes U+FFFD. s[0..n). Bytes that stay as they are go
 * out in runs, one append per run. */
static int append_escaped(struct buf *b, const char *s, size_t n, bool quote)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + n;
    int rc = 0;
    while (p < end && rc == 0) {
        const unsigned char *run = p;
        while (p < end) {
            size_t len = *p < 0x80 ? 1 : utf8_len(p, (size_t)(end - p));
            if (len == 0 || *p == '\\' || *p == '\n' || (*p == '"' && quote)) {
                break;
            }
            p += len;
        }
        if (p > run) {
            rc = buf_append(b, run, (size_t)(p - run));
        }
        if (rc != 0 || p == end) {
            break;
        }
        if (*p == '\\') {
            rc = buf_append(b, "\\\\", 2);
        } else if (*p == '\n') {
            rc = buf_append(b, "\\n", 2);
        } else if (*p == '"') {
            rc = buf_append(b, "\\\"", 2);
        } else { /* not the start of well-formed UTF-8 */
            rc = buf_append(b, "\xef\xbf\xbd", 3);
        }
        p++;
    }
    return rc;
}

/* ---- labels --------------------------------------------------------------------------------- */

/* The combined tag string (meter tags, instrument tags, value tags; the non-empty ones) is
 * walked item by item without joining it: item k of part j. */
struct tag_iter {
    const char *parts[3];
    size_t part;
    const char *pos; /* start of the next item in parts[part], NULL before the first */
};

/* Next item as [*item, *item + *len); false at the end. */
static bool tag_next(struct tag_iter *it, const char **item, size_t *len)
{
    while (it->part < 3) {
        const char *s = it->parts[it->part];
        if (s == NULL || s[0] == '\0') {
            it->part++;
            continue;
        }
        if (it->pos == NULL) {
            it->pos = s;
        }
        const char *comma = strchr(it->pos, ',');
        *item = it->pos;
        if (comma) {
            *len = (size_t)(comma - it->pos);
            it->pos = comma + 1;
        } else {
            *len = strlen(it->pos);
            it->pos = NULL;
            it->part++;
        }
        return true;
    }
    return false;
}

static void tag_iter_init(struct tag_iter *it, const struct ev_series *s)
{
    memset(it, 0, sizeof(*it));
    it->parts[0] = s->meter_tags;
    it->parts[1] = s->instrument_tags;
    it->parts[2] = s->tags;
}

/* Whether key[0..n) is in the NUL-separated list used[0..used_len). */
static bool key_used(const char *key, size_t n, const char *used, size_t used_len)
{
    for (size_t off = 0; off < used_len;) {
        size_t l = strlen(used + off);
        if (l == n && memcmp(used + off, key, n) == 0) {
            return true;
        }
        off += l + 1;
    }
    return false;
}

/* Tag labels per line, and "tag_" prefixes per key, beyond which a tag is left out: an app's
 * pathological tag list must not make a scrape quadratic (or worse). */
#define MAX_TAG_LABELS 64
#define MAX_PREFIXES   8

/*
 * Appends the normalized key[0..n) to scratch, after the NUL-separated list of keys in use,
 * prefixed with "tag_" as often as needed to make it unique and not reserved (empty or "__").
 * AGENT_E_NOTFOUND (scratch unchanged) when MAX_PREFIXES prefixes are not enough.
 */
static int unique_key(struct buf *scratch, const char *key, size_t n)
{
    size_t mark = buf_size(scratch);
    for (size_t prefixes = 0; prefixes <= MAX_PREFIXES; prefixes++) {
        buf_truncate(scratch, mark);
        int rc = 0;
        for (size_t i = 0; i < prefixes && rc == 0; i++) {
            rc = buf_append(scratch, "tag_", 4);
        }
        if (rc == 0) {
            rc = ev_prom_name_part(scratch, key, n);
        }
        if (rc < 0) {
            return rc;
        }
        const char *k = (const char *)buf_data(scratch) + mark;
        size_t kn = buf_size(scratch) - mark;
        bool reserved = kn == 0 || (kn >= 2 && k[0] == '_' && k[1] == '_');
        if (!reserved && !key_used(k, kn, (const char *)buf_data(scratch), mark)) {
            return 0;
        }
    }
    buf_truncate(scratch, mark);
    return AGENT_E_NOTFOUND;
}

/* Appends [", "]key="value" with the value escaped. */
static int append_label(struct buf *out, bool first, const char *key, size_t kn, const char *value,
                        size_t vn)
{
    int rc = buf_append(out, first ? "" : ", ", first ? 0 : 2);
    if (rc == 0) {
        rc = buf_append(out, key, kn);
    }
    if (rc == 0) {
        rc = buf_append(out, "=\"", 2);
    }
    if (rc == 0) {
        rc = append_escaped(out, value, vn, true);
    }
    if (rc == 0) {
        rc = buf_append(out, "\"", 1);
    }
    return rc;
}

/* One target's labels as every line of it writes them, made once per rendering: the label keys
 * a tag must not take (quantile and the normalized process keys, NUL-separated) and the text of
 * the process labels (key="value", ...). */
struct proc_labels {
    const char *keys;
    size_t keys_len;
    const char *text;
    size_t text_len;
};

/* *out: one proc_labels per target, pointing into store (which must not change afterwards);
 * the caller frees *out. 0 or -ENOMEM. */
static int proc_labels_make(const struct ev_prom_target *t, size_t n, struct buf *store,
                            struct proc_labels **out)
{
    struct proc_labels *pl = calloc(n > 0 ? n : 1, sizeof(*pl));
    size_t *offs = calloc(n > 0 ? 2 * n : 1, sizeof(*offs));
    int rc = pl == NULL || offs == NULL ? -ENOMEM : 0;
    for (size_t k = 0; k < n && rc == 0; k++) {
        const struct ev_prom_labels *l = &t[k].labels;
        offs[2 * k] = buf_size(store);
        rc = buf_append(store, "quantile", sizeof("quantile"));
        for (size_t i = 0; rc == 0 && i < l->n; i++) {
            rc = ev_prom_name_part(store, l->keys[i], strlen(l->keys[i]));
            rc = rc < 0 ? rc : buf_append(store, "", 1);
        }
        pl[k].keys_len = buf_size(store) - offs[2 * k];
        offs[2 * k + 1] = buf_size(store);
        for (size_t i = 0; rc == 0 && i < l->n; i++) {
            const char *v = l->values[i] ? l->values[i] : "";
            rc = buf_append(store, i == 0 ? "" : ", ", i == 0 ? 0 : 2);
            rc = rc < 0 ? rc : ev_prom_name_part(store, l->keys[i], strlen(l->keys[i]));
            rc = rc < 0 ? rc : append_label(store, true, "", 0, v, strlen(v));
        }
        pl[k].text_len = buf_size(store) - offs[2 * k + 1];
    }
    for (size_t k = 0; k < n && rc == 0; k++) {
        pl[k].keys = (const char *)buf_data(store) + offs[2 * k];
        pl[k].text = (const char *)buf_data(store) + offs[2 * k + 1];
    }
    free(offs);
    if (rc < 0) {
        free(pl);
        pl = NULL;
    }
    *out = pl;
    return rc;
}

/*
 * Appends the labels of s (tags, then the process labels pl) without braces and without
 * quantile. scratch is work space. dotnet-monitor discards every tag label of a line when one
 * item has no separator ('=' for meters, ':' for EventCounters).
 */
static int render_labels(struct buf *out, const struct ev_series *s, const struct proc_labels *pl,
                         struct buf *scratch)
{
    char sep = s->is_meter ? '=' : ':';
    struct tag_iter it;
    const char *item;
    size_t len;
    bool with_tags = true;
    bool first = true;
    int rc = 0;

    tag_iter_init(&it, s);
    while (tag_next(&it, &item, &len)) {
        if (memchr(item, sep, len) == NULL) {
            with_tags = false;
            break;
        }
    }

    /* Keys in use on this line, NUL-separated: the reserved ones first. */
    buf_reset(scratch);
    rc = buf_append(scratch, pl->keys, pl->keys_len);
    if (rc < 0) {
        return rc;
    }

    tag_iter_init(&it, s);
    size_t ntags = 0;
    while (with_tags && rc == 0 && ntags < MAX_TAG_LABELS && tag_next(&it, &item, &len)) {
        const char *eq = memchr(item, sep, len);
        size_t klen = (size_t)(eq - item);
        size_t mark = buf_size(scratch);
        rc = unique_key(scratch, item, klen);
        if (rc == AGENT_E_NOTFOUND) {
            rc = 0; /* left out: no unique name within MAX_PREFIXES */
            continue;
        }
        ntags++;
        if (rc == 0) {
            rc = append_label(out, first, (const char *)buf_data(scratch) + mark,
                              buf_size(scratch) - mark, eq + 1, len - klen - 1);
        }
        if (rc == 0) {
            rc = buf_append(scratch, "", 1); /* the key joins the used list */
        }
        first = false;
    }
    if (rc == 0 && pl->text_len > 0) {
        rc = buf_append(out, first ? "" : ", ", first ? 0 : 2);
        rc = rc < 0 ? rc : buf_append(out, pl->text, pl->text_len);
    }
    return rc;
}

/* ---- families ------------------------------------------------------------------------------- */

struct ent {
    const struct ev_series *s;
    bool counter; /* the series' cumulative family (<name>_total), not its own line */
    size_t target;
    const char *labels; /* rendered labels (valid once all are rendered) */
    size_t labels_off;
};

static bool is_summary(const struct ev_series *s)
{
    return s->kind == EV_METRIC_HISTOGRAM;
}

enum fam_kind { FAM_GAUGE = 0, FAM_SUMMARY = 1, FAM_COUNTER = 2 };

static enum fam_kind ent_kind(const struct ent *e)
{
    return e->counter ? FAM_COUNTER : is_summary(e->s) ? FAM_SUMMARY : FAM_GAUGE;
}

static const char *ent_name(const struct ent *e)
{
    return e->counter ? e->s->total_name : e->s->prom_name;
}

/* Name, summaries first, then target, then arrival. */
static int ent_cmp(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    int c = strcmp(ent_name(x), ent_name(y));
    if (c != 0) {
        return c;
    }
    if (ent_kind(x) != ent_kind(y)) { /* summaries first, then gauges, then counters */
        int kx = ent_kind(x) == FAM_SUMMARY ? -1 : (int)ent_kind(x);
        int ky = ent_kind(y) == FAM_SUMMARY ? -1 : (int)ent_kind(y);
        return kx < ky ? -1 : 1;
    }
    if (x->target != y->target) {
        return x->target < y->target ? -1 : 1;
    }
    return x->s->seq < y->s->seq ? -1 : (x->s->seq > y->s->seq ? 1 : 0);
}

/* Labels, then newest first. */
static int line_cmp(const void *a, const void *b)
{
    const struct ent *x = a, *y = b;
    int c = strcmp(x->labels, y->labels);
    if (c != 0) {
        return c;
    }
    if (x->s->timestamp_ms != y->s->timestamp_ms) {
        return x->s->timestamp_ms > y->s->timestamp_ms ? -1 : 1;
    }
    if (x->target != y->target) {
        return x->target > y->target ? -1 : 1;
    }
    return x->s->seq > y->s->seq ? -1 : (x->s->seq < y->s->seq ? 1 : 0);
}

/* Whether the sorted entries hold a summary family called name[0..n). */
static bool summary_named(const struct ent *e, size_t count, const char *name, size_t n)
{
    size_t lo = 0, hi = count;
    while (lo < hi) { /* first entry whose name is >= name[0..n) */
        size_t mid = lo + (hi - lo) / 2;
        const char *m = ent_name(&e[mid]);
        int c = strncmp(m, name, n);
        if (c < 0 || (c == 0 && strlen(m) < n)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo < count && strlen(ent_name(&e[lo])) == n && strncmp(ent_name(&e[lo]), name, n) == 0 &&
           ent_kind(&e[lo]) == FAM_SUMMARY;
}

/* A gauge family that the text parser would read as a summary's _sum or _count. */
static bool shadowed(const struct ent *e, size_t count, const char *name)
{
    size_t n = strlen(name);
    static const char *const suffixes[] = {"_sum", "_count"};
    for (size_t i = 0; i < 2; i++) {
        size_t sl = strlen(suffixes[i]);
        if (n > sl && strcmp(name + n - sl, suffixes[i]) == 0 &&
            summary_named(e, count, name, n - sl)) {
            return true;
        }
    }
    return false;
}

static bool unit_is_mb(const char *unit)
{
    return ascii_ieq(unit, "MB");
}

static int write_help(struct buf *out, const struct ent *e, double default_interval)
{
    const struct ev_series *s = e->s;
    const char *cname = s->display_name[0] ? s->display_name : s->name;
    int rc = buf_printf(out, "# HELP %s ", ent_name(e));
    if (rc == 0) {
        rc = append_escaped(out, cname, strlen(cname), false);
    }
    if (rc == 0 && e->counter) { /* dotmon's: the meter counter's running total */
        const char *u = s->unit[0] ? s->unit : "Count";
        rc = buf_append_str(out, " (");
        rc = rc < 0 ? rc : append_escaped(out, u, strlen(u), false);
        return rc < 0 ? rc : buf_append_str(out, ", total since the runtime began counting)");
    }
    if (rc < 0 || !s->is_meter) {
        return rc;
    }
    if (s->kind == EV_METRIC_RATE) {
        const char *u = s->unit[0] ? s->unit : "Count";
        rc = buf_append(out, " (", 2);
        if (rc == 0) {
            rc = append_escaped(out, u, strlen(u), false);
        }
        if (rc == 0) {
            rc = buf_append(out, " / ", 3);
        }
        char sec[32];
        if (rc == 0 && default_interval > 0 &&
            num_format_float32(sec, sizeof(sec), default_interval) == 0) {
            rc = buf_append_str(out, sec);
        } else if (rc == 0) {
            rc = append_double(out, s->interval_sec);
        }
        if (rc == 0) {
            rc = buf_append(out, " sec)", 5);
        }
    } else if (s->unit[0]) {
        rc = buf_append(out, " (", 2);
        if (rc == 0) {
            rc = append_escaped(out, s->unit, strlen(s->unit), false);
        }
        if (rc == 0) {
            rc = buf_append(out, ")", 1);
        }
    }
    return rc;
}

static int write_line(struct buf *out, const struct ent *e)
{
    const struct ev_series *s = e->s;
    double scale = unit_is_mb(s->unit) ? 1000000.0 : 1.0;
    int rc = 0;
    if (!is_summary(s) || e->counter) {
        rc = buf_append_str(out, ent_name(e));
        if (rc == 0 && e->labels[0]) {
            rc = buf_append(out, "{", 1);
            rc = rc < 0 ? rc : buf_append_str(out, e->labels);
            rc = rc < 0 ? rc : buf_append(out, "}", 1);
        }
        if (rc == 0) {
            rc = buf_append(out, " ", 1);
        }
        if (rc == 0) {
            rc = append_double(out, (e->counter ? s->total : s->value) * scale);
        }
        if (rc == 0) {
            rc = buf_append(out, " ", 1);
        }
        if (rc == 0) {
            rc = append_i64(out, s->timestamp_ms);
        }
        return rc < 0 ? rc : buf_append(out, "\n", 1);
    }
    for (uint32_t q = 0; rc == 0 && q < s->nquantiles; q++) {
        rc = buf_append_str(out, s->prom_name);
        rc = rc < 0 ? rc : buf_append(out, "{", 1);
        rc = rc < 0 ? rc : buf_append_str(out, e->labels);
        rc = rc < 0 || !e->labels[0] ? rc : buf_append(out, ", ", 2);
        rc = rc < 0 ? rc : buf_append_str(out, "quantile=\"");
        if (rc == 0) {
            rc = append_double(out, s->quantiles[q].quantile);
        }
        if (rc == 0) {
            rc = buf_append(out, "\"} ", 3);
        }
        if (rc == 0) {
            rc = append_double(out, s->quantiles[q].value * scale);
        }
        if (rc == 0) {
            rc = buf_append(out, "\n", 1);
        }
    }
    return rc;
}

/* Where write_family starts and stops within a family (a family may span pieces). */
struct fam_pos {
    int kind; /* in: the family's kind when resumed, -1 when it begins here; out: its kind */
    const char *after; /* in: labels of the last line written before, NULL: from the start */
    size_t stop;       /* in: stop after a line once out holds this many bytes (SIZE_MAX: never) */
    char *open;        /* out: when stopped before its end, the labels of the last line (owned) */
};

/*
 * One family: e[0..n) share the name; the first entry decides the kind (unless resumed), HELP and
 * TYPE come first when it begins here. Lines with labels after pos->after, until pos->stop.
 */
static int write_family(struct buf *out, struct ent *e, size_t n, const struct ev_prom_target *t,
                        const struct proc_labels *pl, struct buf *labels, struct buf *scratch,
                        struct fam_pos *pos)
{
    enum fam_kind kind = pos->kind >= 0 ? (enum fam_kind)pos->kind : ent_kind(&e[0]);
    size_t kept = 0;
    int rc = 0;

    pos->kind = (int)kind;
    pos->open = NULL;
    buf_reset(labels);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (ent_kind(&e[i]) != kind) {
            continue; /* one name, two kinds: the first kind wins */
        }
        e[kept] = e[i];
        e[kept].labels_off = buf_size(labels);
        rc = render_labels(labels, e[i].s, &pl[e[i].target], scratch);
        if (rc == 0) {
            rc = buf_append(labels, "", 1);
        }
        kept++;
    }
    if (rc < 0 || kept == 0) {
        return rc;
    }
    for (size_t i = 0; i < kept; i++) {
        e[i].labels = (const char *)buf_data(labels) + e[i].labels_off;
    }
    qsort(e, kept, sizeof(e[0]), line_cmp);

    static const char *const types[] = {"gauge", "summary", "counter"};
    if (pos->after == NULL) {
        rc = write_help(out, &e[0], ev__store_default_interval(t[e[0].target].store));
        if (rc == 0) {
            rc = buf_printf(out, "\n# TYPE %s %s\n", ent_name(&e[0]), types[kind]);
        }
    }
    for (size_t i = 0; i < kept && rc == 0; i++) {
        if (i > 0 && strcmp(e[i].labels, e[i - 1].labels) == 0) {
            continue; /* same label set: the newest (sorted first) wins */
        }
        if (pos->after != NULL && strcmp(e[i].labels, pos->after) <= 0) {
            continue; /* written in an earlier piece */
        }
        rc = write_line(out, &e[i]);
        if (rc == 0 && buf_size(out) >= pos->stop) {
            size_t j = i + 1;
            while (j < kept && strcmp(e[j].labels, e[i].labels) == 0) {
                j++;
            }
            if (j < kept) { /* more lines: the family stays open */
                pos->open = strdup(e[i].labels);
                return pos->open == NULL ? -ENOMEM : 0;
            }
        }
    }
    return rc;
}

/* Whether a runtime family's name is one of dotmon's (EV_PROM_RESERVED_PREFIX). */
static bool reserved_name(const char *name)
{
    return strncmp(name, EV_PROM_RESERVED_PREFIX, sizeof(EV_PROM_RESERVED_PREFIX) - 1) == 0;
}

/* Every series of the targets as entries (a line, and a _total line for meter counters), sorted
 * by family; families to leave out (shadowed, reserved) have labels_off SIZE_MAX. *out NULL and
 * *count 0 when there is none. */
static int plan(const struct ev_prom_target *targets, size_t n, struct ent **out, size_t *count)
{
    size_t total = 0;
    *out = NULL;
    *count = 0;
    for (size_t i = 0; i < n; i++) {
        total += 2 * ev_store_series(targets[i].store); /* a line and maybe a _total line */
    }
    if (total == 0) {
        return 0;
    }
    struct ent *e = calloc(total, sizeof(*e));
    if (e == NULL) {
        return -ENOMEM;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        size_t cnt = 0;
        const struct ev_series *const *v = ev__store_view(targets[i].store, &cnt);
        for (size_t j = 0; j < cnt; j++) {
            e[k].s = v[j];
            e[k].target = i;
            k++;
            if (v[j]->has_total) {
                e[k].s = v[j];
                e[k].counter = true;
                e[k].target = i;
                k++;
            }
        }
    }
    total = k;
    qsort(e, total, sizeof(e[0]), ent_cmp);

    /* Decide which families are left out before write_family reorders entries in place. */
    for (size_t i = 0; i < total;) {
        size_t j = i + 1;
        while (j < total && strcmp(ent_name(&e[j]), ent_name(&e[i])) == 0) {
            j++;
        }
        if (reserved_name(ent_name(&e[i])) ||
            (ent_kind(&e[i]) != FAM_SUMMARY && shadowed(e, total, ent_name(&e[i])))) {
            for (size_t x = i; x < j; x++) {
                e[x].labels_off = SIZE_MAX; /* marks the family dropped */
            }
        }
        i = j;
    }
    *out = e;
    *count = total;
    return 0;
}

void ev_prom_cursor_init(struct ev_prom_cursor *c)
{
    memset(c, 0, sizeof(*c));
}

void ev_prom_cursor_fini(struct ev_prom_cursor *c)
{
    free(c->after);
    free(c->open);
    memset(c, 0, sizeof(*c));
}

/* The first entry whose name sorts after name (strict) or, with equal, at or after it. */
static size_t first_after(const struct ent *e, size_t total, const char *name, bool equal)
{
    size_t lo = 0, hi = total;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ent_name(&e[mid]), name);
        if (c < 0 || (c == 0 && !equal)) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

int ev_prom_render_next(const struct ev_prom_target *targets, size_t n, struct ev_prom_cursor *c,
                        size_t min_bytes, struct buf *out)
{
    struct ent *e = NULL;
    struct proc_labels *pl = NULL;
    struct buf labels, scratch, pstore;
    size_t total = 0;
    size_t mark = buf_size(out);
    char *after = NULL;
    struct fam_pos pos = {.kind = c->kind, .after = NULL, .stop = SIZE_MAX, .open = NULL};
    int rc = 0;

    buf_init(&labels, 0);
    buf_init(&scratch, 0);
    buf_init(&pstore, 0);
    if (c->done) {
        goto out;
    }
    rc = plan(targets, n, &e, &total);
    rc = rc < 0 ? rc : proc_labels_make(targets, n, &pstore, &pl);
    if (rc < 0) {
        goto out;
    }
    if (min_bytes < 64 * total) {
        min_bytes = 64 * total;
    }
    min_bytes = min_bytes > 0 ? min_bytes : 1;
    pos.stop = min_bytes > SIZE_MAX - mark ? SIZE_MAX : mark + min_bytes;
    size_t i = c->after != NULL ? first_after(e, total, c->after, false) : 0;
    /* The rest of a family left open by the last call, if it is still there. */
    if (c->open != NULL) {
        size_t from = first_after(e, total, c->after, true);
        if (from < i && e[from].labels_off != SIZE_MAX) {
            pos.after = c->open;
            rc = write_family(out, e + from, i - from, targets, pl, &labels, &scratch, &pos);
        }
    }
    const char *last = NULL;
    while (i < total && rc == 0 && pos.open == NULL && buf_size(out) < pos.stop) {
        size_t j = i + 1;
        while (j < total && strcmp(ent_name(&e[j]), ent_name(&e[i])) == 0) {
            j++;
        }
        last = ent_name(&e[i]);
        if (e[i].labels_off != SIZE_MAX) {
            pos.kind = -1;
            pos.after = NULL;
            rc = write_family(out, e + i, j - i, targets, pl, &labels, &scratch, &pos);
        }
        i = j;
    }
    if (rc == 0 && last != NULL) {
        after = strdup(last);
        rc = after == NULL ? -ENOMEM : 0;
    }
    if (rc == 0) {
        if (after != NULL) {
            free(c->after);
            c->after = after;
            after = NULL;
        }
        free(c->open);
        c->open = pos.open; /* the family c->after stays open, or NULL */
        pos.open = NULL;
        c->kind = pos.kind;
        c->done = i >= total && c->open == NULL;
    }

out:
    if (rc < 0) {
        buf_truncate(out, mark); /* whole lines or nothing */
    }
    free(pos.open);
    free(after);
    free(e);
    free(pl);
    buf_fini(&labels);
    buf_fini(&scratch);
    buf_fini(&pstore);
    return rc;
}

int ev_prom_render(const struct ev_prom_target *targets, size_t n, struct buf *out)
{
    struct ev_prom_cursor c;
    int rc = 0;
    ev_prom_cursor_init(&c);
    while (rc == 0 && !c.done) {
        rc = ev_prom_render_next(targets, n, &c, SIZE_MAX, out);
    }
    ev_prom_cursor_fini(&c);
    return rc;
}

/* ---- dotmon's own families ------------------------------------------------------------------ */

int ev_prom_family(struct buf *out, const char *name, const char *type, const char *help)
{
    size_t mark = buf_size(out);
    int rc = buf_printf(out, "# HELP %s ", name);
    rc = rc < 0 ? rc : append_escaped(out, help, strlen(help), false);
    rc = rc < 0 ? rc : buf_printf(out, "\n# TYPE %s %s\n", name, type);
    if (rc < 0) {
        buf_truncate(out, mark);
    }
    return rc;
}

/* name{labels} and a space. */
static int sample_head(struct buf *out, const char *name, const struct ev_prom_labels *labels)
{
    int rc = buf_append_str(out, name);
    size_t nl = labels != NULL ? labels->n : 0;
    for (size_t i = 0; i < nl && rc == 0; i++) {
        const char *v = labels->values[i] != NULL ? labels->values[i] : "";
        rc = buf_append(out, i == 0 ? "{" : ", ", i == 0 ? 1 : 2);
        rc = rc < 0
                 ? rc
                 : append_label(out, true, labels->keys[i], strlen(labels->keys[i]), v, strlen(v));
    }
    if (rc == 0 && nl > 0) {
        rc = buf_append(out, "}", 1);
    }
    return rc < 0 ? rc : buf_append(out, " ", 1);
}

int ev_prom_sample_u64(struct buf *out, const char *name, const struct ev_prom_labels *labels,
                       uint64_t value)
{
    size_t mark = buf_size(out);
    int rc = sample_head(out, name, labels);
    rc = rc < 0 ? rc : buf_printf(out, "%" PRIu64 "\n", value);
    if (rc < 0) {
        buf_truncate(out, mark);
    }
    return rc;
}

int ev_prom_sample_double(struct buf *out, const char *name, const struct ev_prom_labels *labels,
                          double value)
{
    size_t mark = buf_size(out);
    int rc = sample_head(out, name, labels);
    rc = rc < 0 ? rc : append_double(out, value);
    rc = rc < 0 ? rc : buf_append(out, "\n", 1);
    if (rc < 0) {
        buf_truncate(out, mark);
    }
    return rc;
}

int ev_prom_single_u64(struct buf *out, const struct ev_prom_single *f)
{
    size_t mark = buf_size(out);
    int rc = ev_prom_family(out, f->name, f->type, f->help);
    rc = rc < 0 ? rc : ev_prom_sample_u64(out, f->name, NULL, f->value);
    if (rc < 0) {
        buf_truncate(out, mark);
    }
    return rc;
}

void ev_prom_hist_add(struct ev_prom_hist *h, uint64_t ns)
{
    size_t i = 0;
    while (i < h->n && i < EV_PROM_HIST_MAX && ns > h->le_ns[i]) {
        i++;
    }
    h->counts[i]++;
    h->count++;
    h->sum_ns += ns;
}

int ev_prom_histogram(struct buf *out, const char *name, const char *help,
                      const struct ev_prom_hist *h)
{
    size_t mark = buf_size(out);
    size_t n = h->n < EV_PROM_HIST_MAX ? h->n : EV_PROM_HIST_MAX;
    int rc = ev_prom_family(out, name, "histogram", help);
    uint64_t below = 0;
    for (size_t i = 0; rc == 0 && i <= n; i++) {
        below += h->counts[i];
        rc = buf_printf(out, "%s_bucket{le=\"%s\"} %" PRIu64 "\n", name,
                        i < n ? h->le_text[i] : "+Inf", below);
    }
    rc = rc < 0 ? rc
                : buf_printf(out, "%s_sum %" PRIu64 ".%09" PRIu64 "\n%s_count %" PRIu64 "\n", name,
                             h->sum_ns / 1000000000u, h->sum_ns % 1000000000u, name, h->count);
    if (rc < 0) {
        buf_truncate(out, mark);
    }
    return rc;
}
