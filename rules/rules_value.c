/* SPDX-License-Identifier: MIT */
/*
 * Configuration values as .NET's configuration binder converts them (invariant culture):
 * TimeSpan.Parse, double.Parse (NumberStyles.Float), int.Parse (NumberStyles.Integer),
 * bool.Parse, Enum.Parse(ignoreCase), and the strings .NET prints back (TimeSpan "c", the
 * shortest round-trip double).
 */
#include "rules.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "num.h"
#include "rules_internal.h"

#define TICKS_PER_MINUTE (60 * RULES_TICKS_PER_SECOND)
#define TICKS_PER_HOUR   (60 * TICKS_PER_MINUTE)
#define TICKS_PER_DAY    (24 * TICKS_PER_HOUR)
#define MAX_DAYS         10675199ULL /* TimeSpan.MaxValue.Days */
#define TS_MAX_PARTS     5

static bool is_blank(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n' || ch == '\v' || ch == '\f';
}

static const char *skip_blanks(const char *s)
{
    while (is_blank(*s)) {
        s++;
    }
    return s;
}

/* True when only blanks remain. */
static bool at_end(const char *s)
{
    return *skip_blanks(s) == '\0';
}

/* The numbers of a TimeSpan and the separators between them ("d.hh:mm:ss.f" → ".::."). */
struct ts_parts {
    uint64_t v[TS_MAX_PARTS];
    size_t digits[TS_MAX_PARTS];
    char seps[TS_MAX_PARTS];
    size_t n;
};

static int ts_split(const char *p, struct ts_parts *t)
{
    memset(t, 0, sizeof(*t));
    for (;;) {
        if (t->n == TS_MAX_PARTS || *p < '0' || *p > '9') {
            return AGENT_E_INVAL;
        }
        uint64_t v = 0;
        size_t d = 0;
        for (; *p >= '0' && *p <= '9'; p++, d++) {
            if (v > 1000000000000ULL) {
                return AGENT_E_INVAL;
            }
            v = v * 10 + (uint64_t)(*p - '0');
        }
        t->v[t->n] = v;
        t->digits[t->n] = d;
        t->n++;
        if (*p != ':' && *p != '.') {
            return at_end(p) ? 0 : AGENT_E_INVAL;
        }
        t->seps[t->n - 1] = *p++;
    }
}

/* The shapes TimeSpan.Parse accepts, by separators: which part is days, hours, … (-1: none). */
static const struct {
    const char *seps;
    signed char d, h, m, s, f;
} ts_shapes[] = {
    {"", 0, -1, -1, -1, -1}, {":", -1, 0, 1, -1, -1}, {"::", -1, 0, 1, 2, -1},
    {"::.", -1, 0, 1, 2, 3}, {".:", 0, 1, 2, -1, -1}, {".::", 0, 1, 2, 3, -1},
    {".::.", 0, 1, 2, 3, 4}, {":::", 0, 1, 2, 3, -1}, {":::.", 0, 1, 2, 3, 4},
};

static uint64_t ts_part(const struct ts_parts *t, int idx)
{
    return idx < 0 ? 0 : t->v[idx];
}

int rules_timespan_parse(const char *s, int64_t *ticks)
{
    const char *p = skip_blanks(s);
    bool neg = *p == '-';
    struct ts_parts t;
    if (ts_split(neg ? p + 1 : p, &t) != 0) {
        return AGENT_E_INVAL;
    }
    for (size_t k = 0; k < sizeof(ts_shapes) / sizeof(ts_shapes[0]); k++) {
        if (strlen(ts_shapes[k].seps) != t.n - 1 ||
            memcmp(ts_shapes[k].seps, t.seps, t.n - 1) != 0) {
            continue;
        }
        uint64_t d = ts_part(&t, ts_shapes[k].d), h = ts_part(&t, ts_shapes[k].h);
        uint64_t m = ts_part(&t, ts_shapes[k].m), sec = ts_part(&t, ts_shapes[k].s);
        uint64_t f = ts_part(&t, ts_shapes[k].f);
        size_t fd = ts_shapes[k].f < 0 ? 0 : t.digits[(size_t)ts_shapes[k].f];
        if (d > MAX_DAYS || h > 23 || m > 59 || sec > 59 || fd > 7) {
            return AGENT_E_INVAL;
        }
        for (size_t i = fd; i < 7 && ts_shapes[k].f >= 0; i++) {
            f *= 10;
        }
        uint64_t rest =
            h * TICKS_PER_HOUR + m * TICKS_PER_MINUTE + sec * (uint64_t)RULES_TICKS_PER_SECOND + f;
        if (d * (uint64_t)TICKS_PER_DAY > (uint64_t)INT64_MAX - rest) {
            return AGENT_E_INVAL;
        }
        int64_t v = (int64_t)(d * (uint64_t)TICKS_PER_DAY + rest);
        *ticks = neg ? -v : v;
        return 0;
    }
    return AGENT_E_INVAL;
}

void rules_timespan_format(int64_t ticks, char *out, size_t cap)
{
    uint64_t v = ticks < 0 ? (uint64_t)0 - (uint64_t)ticks : (uint64_t)ticks;
    uint64_t days = v / TICKS_PER_DAY;
    uint64_t rem = v % TICKS_PER_DAY;
    unsigned h = (unsigned)(rem / TICKS_PER_HOUR);
    unsigned m = (unsigned)(rem % TICKS_PER_HOUR / TICKS_PER_MINUTE);
    unsigned s = (unsigned)(rem % TICKS_PER_MINUTE / RULES_TICKS_PER_SECOND);
    unsigned f = (unsigned)(rem % RULES_TICKS_PER_SECOND);
    char day[32] = "";
    if (days > 0) {
        (void)snprintf(day, sizeof(day), "%llu.", (unsigned long long)days);
    }
    char frac[16] = "";
    if (f > 0) {
        (void)snprintf(frac, sizeof(frac), ".%07u", f);
    }
    (void)snprintf(out, cap, "%s%s%02u:%02u:%02u%s", ticks < 0 ? "-" : "", day, h, m, s, frac);
}

/* [blanks][sign]digits[.digits][(e|E)[sign]digits][blanks], or digits only after the point. */
static bool float_syntax(const char *p)
{
    p = skip_blanks(p);
    p += (*p == '+' || *p == '-');
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9'; p++) {
        digits++;
    }
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            digits++;
        }
    }
    if (digits == 0) {
        return false;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        p += (*p == '+' || *p == '-');
        if (*p < '0' || *p > '9') {
            return false;
        }
        while (*p >= '0' && *p <= '9') {
            p++;
        }
    }
    return at_end(p);
}

int rules__parse_double(const char *s, double *out)
{
    if (!float_syntax(s)) {
        return AGENT_E_INVAL;
    }
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (!isfinite(v)) {
        return AGENT_E_INVAL; /* over double.MaxValue: an OverflowException in .NET */
    }
    *out = v;
    return 0;
}

int rules__parse_int32(const char *s, int32_t *out)
{
    const char *p = skip_blanks(s);
    bool neg = *p == '-';
    p += (*p == '+' || *p == '-');
    size_t n = 0;
    while (p[n] >= '0' && p[n] <= '9') {
        n++;
    }
    uint64_t v;
    if (n == 0 || !at_end(p + n) || num_parse_u64(p, n, 10, (uint64_t)INT32_MAX + 1, &v) != 0 ||
        (!neg && v > INT32_MAX)) {
        return AGENT_E_INVAL;
    }
    *out = neg ? (int32_t)(-(int64_t)v) : (int32_t)v;
    return 0;
}

/* s without the blanks around it, compared case-insensitively with lit. */
static bool trimmed_ieq(const char *s, const char *lit)
{
    s = skip_blanks(s);
    size_t n = strlen(s);
    while (n > 0 && is_blank(s[n - 1])) {
        n--;
    }
    return ascii_ieq_n(s, n, lit);
}

int rules__parse_bool(const char *s, bool *out)
{
    if (trimmed_ieq(s, "true")) {
        *out = true;
        return 0;
    }
    if (trimmed_ieq(s, "false")) {
        *out = false;
        return 0;
    }
    return AGENT_E_INVAL;
}

int rules__parse_u64_keywords(const char *s, uint64_t *out)
{
    const char *p = skip_blanks(s);
    size_t n = strlen(p);
    while (n > 0 && is_blank(p[n - 1])) {
        n--;
    }
    if (n > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
        return num_parse_u64(p + 2, n - 2, 16, UINT64_MAX, out);
    }
    if (n > 1 && p[0] == '-') {
        uint64_t v;
        int rc = num_parse_u64(p + 1, n - 1, 10, (uint64_t)INT64_MAX + 1, &v);
        if (rc == 0) {
            *out = (uint64_t)0 - v; /* a negative long, as .NET's long.Parse gives it */
        }
        return rc;
    }
    return num_parse_u64(p, n, 10, UINT64_MAX, out);
}

int rules__enum_index(const char *s, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (trimmed_ieq(s, names[i])) {
            return (int)i;
        }
    }
    return -1;
}

void rules__format_double(double v, char *out, size_t cap)
{
    if (v > -1e15 && v < 1e15 && v == (double)(int64_t)v) {
        (void)snprintf(out, cap, "%lld", (long long)(int64_t)v);
        return;
    }
    /* The shortest text that reads back as v, with .NET's upper-case exponent. */
    for (int prec = 1; prec <= 17; prec++) {
        (void)snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v) {
            break;
        }
    }
    char *e = strchr(out, 'e');
    if (e != NULL) {
        *e = 'E';
    }
}
