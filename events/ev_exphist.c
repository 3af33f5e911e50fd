/* SPDX-License-Identifier: MIT */
#include "ev_exphist.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

int ev_exphist_parse_counts(const char *s, uint64_t *out, uint32_t max, uint32_t *n)
{
    *n = 0;
    const char *p = s;
    while (*p == ' ') {
        p++;
    }
    if (*p == '\0') {
        return 0;
    }
    for (;;) {
        uint64_t v = 0;
        unsigned digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (v > (UINT64_C(0x7fffffffffffffff) - (uint64_t)(*p - '0')) / 10u) {
                return AGENT_E_INVAL; /* not a long */
            }
            v = v * 10u + (uint64_t)(*p - '0');
            p++;
            digits++;
        }
        if (digits == 0) {
            return AGENT_E_INVAL;
        }
        if (*n == max) {
            return AGENT_E_TOOBIG;
        }
        out[(*n)++] = v;
        while (*p == ' ') {
            p++;
        }
        if (*p == '\0') {
            return 0;
        }
        if (*p != ',') {
            return AGENT_E_INVAL;
        }
        p++;
        while (*p == ' ') {
            p++;
        }
    }
}

/* v / 2^k rounded down, for any sign (a plain >> of a negative value is the compiler's choice). */
static int64_t floor_shift(int64_t v, unsigned k)
{
    if (k >= 63) {
        return v < 0 ? -1 : 0;
    }
    if (v >= 0) {
        return (int64_t)((uint64_t)v >> k);
    }
    uint64_t m = (uint64_t)(-(v + 1)); /* |v| - 1, no overflow at INT64_MIN */
    return -(int64_t)(m >> k) - 1;
}

int64_t ev_exphist_index(double v, int32_t scale)
{
    int exp = 0;
    double frac = frexp(v, &exp); /* v = frac * 2^exp, frac in [0.5, 1) */
    bool pow2 = frac == 0.5;
    int64_t e = (int64_t)exp - 1; /* v = m * 2^e, m in [1, 2) */
    if (scale <= 0) {
        /* Buckets hold (2^(k*2^-scale), ...]: an exact power of two belongs below. */
        return floor_shift(pow2 ? e - 1 : e, (unsigned)-scale);
    }
    if (pow2) {
        return e * ((int64_t)1 << scale) - 1;
    }
    /* The runtime's way, to land on the same bucket at the edges: ceil(ln v * 2^scale / ln 2) - 1,
     * with 2^scale / ln 2 built as the same double. */
    double factor = ldexp(1.4426950408889634, scale);
    return (int64_t)ceil(log(v) * factor) - 1;
}

double ev_exphist_lower(int64_t index, int32_t scale)
{
    if (scale <= 0) {
        double e = ldexp((double)index, -scale);
        return e > 2000 ? (double)INFINITY : e < -2000 ? 0 : ldexp(1.0, (int)e);
    }
    return exp2(ldexp((double)index, -scale));
}

/* Whether v (> 0) falls in a non-empty bucket of h. */
static bool counted(const struct ev_exphist *h, double v)
{
    int64_t at = ev_exphist_index(v, h->scale) - h->offset;
    return at >= 0 && at < (int64_t)h->ncounts && h->counts[at] != 0;
}

bool ev_exphist_locate(struct ev_exphist *h)
{
    if (h->scale < EV_EXPHIST_MIN_SCALE || h->scale > EV_EXPHIST_MAX_SCALE) {
        return false;
    }
    h->offset = 0;
    if (h->ncounts == 0) {
        return true;
    }
    if (!isfinite(h->max) || !(h->max > 0)) {
        return false;
    }
    /* The runtime's window ends at the largest value's bucket, except after a reset (reportDeltas)
     * when a stale end of -1 stays while every value is below it: the last count is then 0. */
    int64_t off = h->counts[h->ncounts - 1] != 0
                      ? ev_exphist_index(h->max, h->scale) - (int64_t)(h->ncounts - 1)
                      : -(int64_t)h->ncounts;
    if (off < INT32_MIN || off > INT32_MAX) {
        return false;
    }
    h->offset = (int32_t)off;
    if (!counted(h, h->max) || (isfinite(h->min) && h->min > 0 && !counted(h, h->min))) {
        return false;
    }
    /* A stale start of 0 (after a reset too) leaves empty buckets in front: trimmed, as are any
     * at the end. */
    uint32_t lead = 0;
    while (h->counts[lead] == 0) {
        lead++; /* stops: the max's bucket is not empty */
    }
    h->counts += lead;
    h->ncounts -= lead;
    h->offset += (int32_t)lead;
    while (h->counts[h->ncounts - 1] == 0) {
        h->ncounts--;
    }
    return true;
}

static double clamp(const struct ev_exphist *h, double v)
{
    if (isfinite(h->min) && v < h->min) {
        v = h->min;
    }
    if (isfinite(h->max) && v > h->max) {
        v = h->max;
    }
    return v;
}

bool ev_exphist_quantile(const struct ev_exphist *h, double q, double *out)
{
    uint64_t total = h->zero_count;
    for (uint32_t i = 0; i < h->ncounts; i++) {
        total += h->counts[i];
    }
    if (total == 0 || !(q > 0) || q > 1) {
        return false;
    }
    double rank = q * (double)total;
    double cum = (double)h->zero_count;
    if (rank <= cum) {
        *out = clamp(h, 0);
        return true;
    }
    for (uint32_t i = 0; i < h->ncounts; i++) {
        double c = (double)h->counts[i];
        if (c > 0 && cum + c >= rank) {
            int64_t idx = (int64_t)h->offset + i;
            double lo = ev_exphist_lower(idx, h->scale);
            double hi = ev_exphist_lower(idx + 1, h->scale);
            *out = clamp(h, lo + (hi - lo) * ((rank - cum) / c));
            return true;
        }
        cum += c;
    }
    *out = clamp(h, ev_exphist_lower((int64_t)h->offset + h->ncounts, h->scale));
    return true;
}

/* The index range [*lo, *hi] of h's buckets at scale s (<= h's scale). */
static void range_at(const struct ev_exphist *h, int32_t s, int64_t *lo, int64_t *hi)
{
    unsigned d = (unsigned)(h->scale - s);
    *lo = floor_shift(h->offset, d);
    *hi = floor_shift((int64_t)h->offset + h->ncounts - 1, d);
}

static void spread(uint64_t *dst, int64_t lo, int32_t s, const struct ev_exphist *h)
{
    unsigned d = (unsigned)(h->scale - s);
    for (uint32_t i = 0; i < h->ncounts; i++) {
        dst[floor_shift((int64_t)h->offset + i, d) - lo] += h->counts[i];
    }
}

int ev_exphist_acc_add(struct ev_exphist_acc *acc, const struct ev_exphist *h, uint64_t count,
                       double sum, uint32_t max_buckets)
{
    struct ev_exphist *a = &acc->h;
    bool had = acc->counts != NULL && a->ncounts > 0;
    /* Each point's counts add up to its count (< 2^63, ev_stream): totals kept below 2^63 bound
     * every bucket and the zero count too, so nothing wraps however many points come. */
    if (count > (uint64_t)INT64_MAX - acc->count ||
        h->zero_count > (uint64_t)INT64_MAX - a->zero_count) {
        return -EOVERFLOW;
    }
    if (h->ncounts > 0) {
        int32_t s = had && a->scale < h->scale ? a->scale : h->scale;
        int64_t lo, hi, lo2, hi2;
        for (;;) {
            range_at(h, s, &lo, &hi);
            if (had) {
                range_at(a, s, &lo2, &hi2);
                lo = lo2 < lo ? lo2 : lo;
                hi = hi2 > hi ? hi2 : hi;
            }
            if (hi - lo < (int64_t)(max_buckets < 2 ? 2 : max_buckets) || s <= -64) {
                break;
            }
            s--;
        }
        size_t n = (size_t)(hi - lo + 1);
        uint64_t *c = calloc(n, sizeof(*c));
        if (c == NULL) {
            return -ENOMEM;
        }
        spread(c, lo, s, h);
        if (had) {
            spread(c, lo, s, a);
        }
        free(acc->counts);
        acc->counts = c;
        a->counts = c;
        a->ncounts = (uint32_t)n;
        a->offset = (int32_t)lo;
        a->scale = s;
    } else if (!had) {
        a->scale = h->scale;
    }
    a->zero_count += h->zero_count;
    if (count > 0) {
        a->min = acc->any && a->min < h->min ? a->min : h->min;
        a->max = acc->any && a->max > h->max ? a->max : h->max;
        acc->any = true;
    }
    acc->count += count;
    acc->sum += isfinite(sum) ? sum : 0;
    a->cumulative = true;
    return 0;
}

void ev_exphist_acc_fini(struct ev_exphist_acc *acc)
{
    free(acc->counts);
    memset(acc, 0, sizeof(*acc));
}
