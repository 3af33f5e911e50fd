/* SPDX-License-Identifier: MIT */
#include "ev_store.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_prom_name.h"
#include "ev_store_internal.h"

/*
 * The series table: an array of series (each one allocation, see ev_store_internal.h) and a
 * chained hash index over it. dotnet-monitor keeps a FIFO of MetricCount payloads per counter
 * name (docs/api.md §7.2); we keep the newest sample per series instead, so a scrape never shows
 * one series twice.
 */

#define EV_STORE_DEFAULT_MAX 1024u

struct ev_store {
    struct ev_series **v; /* count used, cap allocated */
    size_t count;
    size_t cap;
    uint32_t *buckets; /* index + 1 into v; 0 = empty; nbuckets is a power of two */
    size_t nbuckets;
    uint32_t max_series;
    double default_interval;
    uint64_t seq;
    struct mb_share *share; /* borrowed; NULL: nothing charged */
    uint64_t bytes;         /* the series' allocations, all charged to share */
    uint64_t dropped;       /* new series refused */
};

const char *ev_name_cut(const char *s, size_t max, char *out, size_t cap)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strnlen(s, max + 1);
    if (n <= max) {
        return s;
    }
    if (cap < sizeof(EV_CUT_MARKER)) {
        return "";
    }
    n = max < cap - sizeof(EV_CUT_MARKER) ? max : cap - sizeof(EV_CUT_MARKER);
    /* Back up to the start of a UTF-8 sequence: s[n] is the first byte left out. */
    while (n > 0 && ((unsigned char)s[n] & 0xC0u) == 0x80u) {
        n--;
    }
    memcpy(out, s, n);
    memcpy(out + n, EV_CUT_MARKER, sizeof(EV_CUT_MARKER));
    return out;
}

const struct ev_metric_sample *ev_sample_cut(const struct ev_metric_sample *in,
                                             struct ev_sample_cut *buf)
{
    buf->s = *in;
    buf->s.provider = ev_name_cut(in->provider, EV_NAME_MAX, buf->provider, sizeof(buf->provider));
    buf->s.name = ev_name_cut(in->name, EV_NAME_MAX, buf->name, sizeof(buf->name));
    buf->s.display_name =
        ev_name_cut(in->display_name, EV_NAME_MAX, buf->display_name, sizeof(buf->display_name));
    buf->s.unit = ev_name_cut(in->unit, EV_NAME_MAX, buf->unit, sizeof(buf->unit));
    buf->s.tags = ev_name_cut(in->tags, EV_TAGS_MAX, buf->tags, sizeof(buf->tags));
    buf->s.meter_tags =
        ev_name_cut(in->meter_tags, EV_TAGS_MAX, buf->meter_tags, sizeof(buf->meter_tags));
    buf->s.instrument_tags = ev_name_cut(in->instrument_tags, EV_TAGS_MAX, buf->instrument_tags,
                                         sizeof(buf->instrument_tags));
    return &buf->s;
}

static const char *nz(const char *s)
{
    return s ? s : "";
}

/* FNV-1a over the identity strings, each followed by a 0xff separator (never in UTF-8). */
static uint32_t hash_str(uint32_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h = (h ^ *p) * 16777619u;
    }
    return (h ^ 0xffu) * 16777619u;
}

static uint32_t identity_hash(const char *provider, const char *name, const char *meter_tags,
                              const char *instrument_tags, const char *tags)
{
    uint32_t h = 2166136261u;
    h = hash_str(h, provider);
    h = hash_str(h, name);
    h = hash_str(h, meter_tags);
    h = hash_str(h, instrument_tags);
    return hash_str(h, tags);
}

static bool same_identity(const struct ev_series *a, const struct ev_metric_sample *s)
{
    return strcmp(a->provider, nz(s->provider)) == 0 && strcmp(a->name, nz(s->name)) == 0 &&
           strcmp(a->meter_tags, nz(s->meter_tags)) == 0 &&
           strcmp(a->instrument_tags, nz(s->instrument_tags)) == 0 &&
           strcmp(a->tags, nz(s->tags)) == 0;
}

/* Copies one string into the block after the struct; returns the copy. */
static const char *put_str(char **cursor, const char *s)
{
    size_t n = strlen(s) + 1;
    char *dst = *cursor;
    memcpy(dst, s, n);
    *cursor += n;
    return dst;
}

static void series_set(struct ev_series *se, const struct ev_metric_sample *s);

/* One allocation holding the series and copies of all its strings. */
/* credit: bytes already charged for the series this one replaces (only the growth is charged). */
static int series_make(struct ev_series **out, const struct ev_metric_sample *s, uint32_t hash,
                       struct mb_share *share, size_t credit)
{
    struct buf name;
    buf_init(&name, 0);
    int rc = ev_prom_metric_name(&name, nz(s->provider), nz(s->name), nz(s->unit));
    if (rc < 0) {
        buf_fini(&name);
        return rc;
    }
    struct buf tname;
    buf_init(&tname, 0);
    rc = buf_append(&tname, buf_data(&name), buf_size(&name));
    rc = rc < 0 ? rc : buf_append_str(&tname, "_total");
    if (rc < 0) {
        buf_fini(&name);
        buf_fini(&tname);
        return rc;
    }
    const char *strs[] = {
        nz(s->provider), nz(s->name),       nz(s->display_name),    nz(s->unit),
        nz(s->tags),     nz(s->meter_tags), nz(s->instrument_tags), buf_cstr(&name),
        buf_cstr(&tname)};
    size_t total = sizeof(struct ev_series);
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        total += strlen(strs[i]) + 1;
    }
    struct ev_series *se = malloc(total);
    if (se != NULL && total > credit && mb_charge(share, total - credit) != 0) {
        free(se);
        buf_fini(&name);
        buf_fini(&tname);
        return AGENT_E_BUDGET;
    }
    if (se == NULL) {
        buf_fini(&name);
        buf_fini(&tname);
        return -ENOMEM;
    }
    memset(se, 0, sizeof(*se));
    se->bytes = total;
    char *cursor = (char *)(se + 1);
    se->provider = put_str(&cursor, strs[0]);
    se->name = put_str(&cursor, strs[1]);
    se->display_name = put_str(&cursor, strs[2]);
    se->unit = put_str(&cursor, strs[3]);
    se->tags = put_str(&cursor, strs[4]);
    se->meter_tags = put_str(&cursor, strs[5]);
    se->instrument_tags = put_str(&cursor, strs[6]);
    se->prom_name = put_str(&cursor, strs[7]);
    se->total_name = put_str(&cursor, strs[8]);
    buf_fini(&name);
    buf_fini(&tname);

    series_set(se, s);
    se->hash = hash;
    *out = se;
    return 0;
}

/* The sample's kind and figures into se (its strings stay). */
static void series_set(struct ev_series *se, const struct ev_metric_sample *s)
{
    se->kind = s->kind;
    se->is_meter = s->is_meter;
    se->value = s->value;
    se->has_total = s->has_total && s->kind == EV_METRIC_RATE && s->is_meter && !isnan(s->total);
    se->total = s->total;
    se->interval_sec = s->interval_sec;
    se->timestamp_ms = s->timestamp_ms;
    se->nquantiles = s->nquantiles;
    if (se->nquantiles > EV_METRIC_MAX_QUANTILES) {
        se->nquantiles = EV_METRIC_MAX_QUANTILES;
    }
    memcpy(se->quantiles, s->quantiles, se->nquantiles * sizeof(se->quantiles[0]));
    /* Summary quantiles must be ascending (promtool does not check it, Prometheus relies on
     * it); the decoder promises ascending order, insertion sort makes sure. */
    for (uint32_t i = 1; i < se->nquantiles; i++) {
        struct ev_quantile q = se->quantiles[i];
        uint32_t j = i;
        while (j > 0 && se->quantiles[j - 1].quantile > q.quantile) {
            se->quantiles[j] = se->quantiles[j - 1];
            j--;
        }
        se->quantiles[j] = q;
    }
    se->hist_count = s->hist_count;
    se->hist_sum = s->hist_sum;
}

static void series_free(struct ev_store *st, struct ev_series *se)
{
    mb_release(st->share, se->bytes);
    st->bytes -= se->bytes;
    free(se);
}

int ev_store_new(struct ev_store **out, const struct ev_store_options *opt)
{
    struct ev_store *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return -ENOMEM;
    }
    st->max_series = opt && opt->max_series ? opt->max_series : EV_STORE_DEFAULT_MAX;
    st->default_interval = opt ? opt->default_interval : 0;
    st->share = opt ? opt->share : NULL;
    *out = st;
    return 0;
}

void ev_store_clear(struct ev_store *st)
{
    if (st == NULL) {
        return;
    }
    for (size_t i = 0; i < st->count; i++) {
        series_free(st, st->v[i]);
    }
    st->count = 0;
    if (st->buckets) {
        memset(st->buckets, 0, st->nbuckets * sizeof(st->buckets[0]));
    }
}

void ev_store_free(struct ev_store *st)
{
    if (st == NULL) {
        return;
    }
    ev_store_clear(st);
    free(st->v);
    free(st->buckets);
    free(st);
}

size_t ev_store_series(const struct ev_store *st)
{
    return st ? st->count : 0;
}

uint64_t ev_store_dropped(const struct ev_store *st)
{
    return st ? st->dropped : 0;
}

uint64_t ev_store_bytes(const struct ev_store *st)
{
    return st ? st->bytes : 0;
}

/* Rebuilds the hash index with nb buckets (a power of two). */
static int rehash(struct ev_store *st, size_t nb)
{
    uint32_t *b = calloc(nb, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    free(st->buckets);
    st->buckets = b;
    st->nbuckets = nb;
    for (size_t i = 0; i < st->count; i++) {
        size_t slot = st->v[i]->hash & (nb - 1);
        st->v[i]->next = b[slot];
        b[slot] = (uint32_t)(i + 1);
    }
    return 0;
}

/* Room for one more series in the array and the index. */
static int grow(struct ev_store *st)
{
    if (st->count == st->cap) {
        size_t ncap = st->cap ? st->cap * 2 : 16;
        if (ncap > st->max_series) {
            ncap = st->max_series;
        }
        struct ev_series **nv = realloc(st->v, ncap * sizeof(struct ev_series *));
        if (nv == NULL) {
            return -ENOMEM;
        }
        st->v = nv;
        st->cap = ncap;
    }
    if (st->nbuckets == 0 || st->count + 1 > st->nbuckets) {
        return rehash(st, st->nbuckets ? st->nbuckets * 2 : 32);
    }
    return 0;
}

/* Whether dotnet-monitor keeps this payload at all (docs/api.md §7.2). */
static bool accepted(const struct ev_metric_sample *s)
{
    if (s->kind == EV_METRIC_HISTOGRAM) {
        return s->nquantiles > 0;
    }
    /* A meter value that is not a number is dotnet-monitor's "counter ended" payload (an empty
     * lastValue/rate string; the decoder hands it over as NaN): dropped. An EventCounter may
     * carry a real NaN (a mean over nothing), which is printed as NaN. */
    return !(s->is_meter && isnan(s->value));
}

int ev_store_add(struct ev_store *st, const struct ev_metric_sample *in)
{
    if (st == NULL || in == NULL || in->name == NULL || in->provider == NULL) {
        return AGENT_E_INVAL;
    }
    /* The stored text of every string: long ones cut (a 30,000-character counter name from a
     * hostile runtime is one series of a few hundred bytes). */
    struct ev_sample_cut cut;
    const struct ev_metric_sample *s = ev_sample_cut(in, &cut);
    if (s->kind != EV_METRIC_GAUGE && s->kind != EV_METRIC_RATE && s->kind != EV_METRIC_UPDOWN &&
        s->kind != EV_METRIC_HISTOGRAM) {
        return AGENT_E_INVAL;
    }
    if (!accepted(s)) {
        return 0;
    }
    uint32_t h = identity_hash(nz(s->provider), nz(s->name), nz(s->meter_tags),
                               nz(s->instrument_tags), nz(s->tags));
    if (st->nbuckets) {
        for (uint32_t i = st->buckets[h & (st->nbuckets - 1)]; i != 0; i = st->v[i - 1]->next) {
            struct ev_series *old = st->v[i - 1];
            if (old->hash != h || !same_identity(old, s)) {
                continue;
            }
            if (strcmp(old->display_name, nz(s->display_name)) == 0 &&
                strcmp(old->unit, nz(s->unit)) == 0) {
                /* The usual case, every interval: the same strings, new figures. In place: no
                 * allocation, no name to normalize again. */
                series_set(old, s);
                old->seq = ++st->seq;
                return 0;
            }
            struct ev_series *se = NULL;
            int rc = series_make(&se, s, h, st->share, old->bytes);
            if (rc < 0) {
                return rc;
            }
            if (old->bytes > se->bytes) {
                mb_release(st->share, old->bytes - se->bytes);
            }
            st->bytes = st->bytes - old->bytes + se->bytes;
            se->next = old->next;
            se->seq = ++st->seq;
            st->v[i - 1] = se;
            free(old);
            return 0;
        }
    }
    if (st->count >= st->max_series) {
        st->dropped++;
        return AGENT_E_TOOBIG;
    }
    int rc = grow(st);
    if (rc < 0) {
        return rc;
    }
    struct ev_series *se = NULL;
    rc = series_make(&se, s, h, st->share, 0);
    if (rc < 0) {
        st->dropped += rc == AGENT_E_BUDGET ? 1 : 0;
        return rc;
    }
    st->bytes += se->bytes;
    se->seq = ++st->seq;
    size_t slot = h & (st->nbuckets - 1);
    se->next = st->buckets[slot];
    st->v[st->count] = se;
    st->count++;
    st->buckets[slot] = (uint32_t)st->count;
    return 0;
}

const struct ev_series *const *ev__store_view(const struct ev_store *st, size_t *n)
{
    *n = st ? st->count : 0;
    return st ? (const struct ev_series *const *)st->v : NULL;
}

double ev__store_default_interval(const struct ev_store *st)
{
    return st->default_interval;
}
