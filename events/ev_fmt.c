/* SPDX-License-Identifier: MIT */
#include "ev_fmt.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * .NET's "G" layout of the shortest digits d[0..nd) of |v| = 0.d1d2... x 10^scale (number
 * formatting's FormatGeneral): E notation when the point would sit more than `limit` places
 * right, or below 0.0001. Returns the length; text has room for EV_FMT_REAL_MAX bytes.
 */
static size_t layout(char *text, bool neg, const char *digits, size_t nd, long scale, long limit)
{
    size_t t = 0;
    if (neg) {
        text[t++] = '-';
    }
    if (scale > limit || scale < -3) {
        text[t++] = digits[0];
        if (nd > 1) {
            text[t++] = '.';
            memcpy(text + t, digits + 1, nd - 1);
            t += nd - 1;
        }
        long e = scale - 1;
        int w =
            snprintf(text + t, EV_FMT_REAL_MAX - t, "E%c%02ld", e < 0 ? '-' : '+', e < 0 ? -e : e);
        t += w > 0 ? (size_t)w : 0;
    } else if (scale <= 0) {
        text[t++] = '0';
        text[t++] = '.';
        for (long i = 0; i < -scale; i++) {
            text[t++] = '0';
        }
        memcpy(text + t, digits, nd);
        t += nd;
    } else {
        for (size_t i = 0; i < (size_t)scale; i++) {
            char c = '0';
            if (i < nd) {
                c = digits[i];
            }
            text[t++] = c;
        }
        if ((size_t)scale < nd) {
            text[t++] = '.';
            memcpy(text + t, digits + scale, nd - (size_t)scale);
            t += nd - (size_t)scale;
        }
    }
    return t;
}

size_t ev_fmt_real(double v, bool single, char *out, size_t cap)
{
    char text[EV_FMT_REAL_MAX];
    size_t t;
    if (isnan(v) || isinf(v) || v == 0) {
        const char *s = isnan(v)   ? "NaN"
                        : isinf(v) ? (v > 0 ? "Infinity" : "-Infinity")
                                   : (signbit(v) ? "-0" : "0");
        t = strlen(s);
        memcpy(text, s, t);
    } else if (v > -(single ? 16777216.0 : 9007199254740992.0) &&
               v < (single ? 16777216.0 : 9007199254740992.0) && (double)(int64_t)v == v) {
        /* An integer the type holds exactly (below 2^24 or 2^53): its own significant digits are
         * the shortest text that reads back, since any text with fewer lies 1 or more away while
         * the neighbours are at most 1 apart. No printf, no strtod: counters and byte counts are
         * most of /metrics. */
        char all[24];
        size_t na = 0;
        for (uint64_t u = (uint64_t)(v < 0 ? -v : v); u != 0; u /= 10) {
            all[na++] = (char)('0' + u % 10);
        }
        for (size_t i = 0; i < na / 2; i++) {
            char c = all[i];
            all[i] = all[na - 1 - i];
            all[na - 1 - i] = c;
        }
        size_t nd = na;
        while (nd > 1 && all[nd - 1] == '0') {
            nd--;
        }
        t = layout(text, v < 0, all, nd, (long)na, single ? 9 : 17);
    } else {
        /* The fewest significant digits whose %e text reads back as v (as a float for single). */
        char e[48];
        for (int prec = 0; prec < (single ? 9 : 17); prec++) {
            snprintf(e, sizeof(e), "%.*e", prec, v);
            double back = strtod(e, NULL);
            if (single ? strtof(e, NULL) == (float)v : back == v) {
                break;
            }
        }
        char digits[24];
        size_t nd = 0;
        const char *p = e;
        bool neg = *p == '-';
        p += neg ? 1 : 0;
        for (; *p != '\0' && *p != 'e'; p++) {
            if (*p >= '0' && *p <= '9' && nd < sizeof(digits)) {
                digits[nd++] = *p;
            }
        }
        long exp10 = *p != '\0' ? strtol(p + 1, NULL, 10) : 0;
        while (nd > 1 && digits[nd - 1] == '0') {
            nd--;
        }
        /* .NET switches to E notation past its round-trip digit count: 1E+16 is written
         * "10000000000000000", 1E+17 "1E+17" (float: 1E+08 "100000000", 1E+09 "1E+09"). */
        t = layout(text, neg, digits, nd, exp10 + 1, single ? 9 : 17);
    }
    if (cap == 0) {
        return 0;
    }
    t = t < cap ? t : cap - 1;
    memcpy(out, text, t);
    out[t] = '\0';
    return t;
}
