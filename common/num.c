/* SPDX-License-Identifier: MIT */
#include "num.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hex.h"

/* The digit's value, or -1 when c is no digit of base. */
static int digit(char c, unsigned base)
{
    if (base == 16) {
        return hex_value(c);
    }
    return c >= '0' && c <= '9' ? c - '0' : -1;
}

size_t num_prefix_u64(const char *s, size_t n, unsigned base, uint64_t max, uint64_t *out)
{
    if (base != 10 && base != 16) {
        return 0;
    }
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n; i++) {
        int d = digit(s[i], base);
        if (d < 0) {
            break;
        }
        if ((uint64_t)d > max || v > (max - (uint64_t)d) / base) {
            return 0; /* over max (and so never past UINT64_MAX) */
        }
        v = v * base + (uint64_t)d;
    }
    if (i > 0) {
        *out = v;
    }
    return i;
}

int num_parse_u64(const char *s, size_t n, unsigned base, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || num_prefix_u64(s, n, base, max, &v) != n) {
        return AGENT_E_INVAL;
    }
    *out = v;
    return 0;
}

int num_parse_u64_str(const char *s, unsigned base, uint64_t max, uint64_t *out)
{
    return num_parse_u64(s, strlen(s), base, max, out);
}

/* The length of the run of decimal digits at s. */
static size_t digits(const char *s)
{
    size_t n = 0;
    while (s[n] >= '0' && s[n] <= '9') {
        n++;
    }
    return n;
}

int num_parse_float32(const char *s, double *out)
{
    size_t i = digits(s);
    size_t mantissa = i;
    if (s[i] == '.') {
        size_t f = digits(s + i + 1);
        mantissa += f;
        i += 1 + f;
    }
    if (mantissa == 0) {
        return AGENT_E_INVAL;
    }
    if (s[i] == 'e' || s[i] == 'E') {
        i++;
        i += s[i] == '+' || s[i] == '-' ? 1 : 0;
        size_t e = digits(s + i);
        if (e == 0) {
            return AGENT_E_INVAL;
        }
        i += e;
    }
    if (s[i] != '\0') {
        return AGENT_E_INVAL;
    }
    float v = strtof(s, NULL);
    if (!isfinite(v)) {
        return AGENT_E_INVAL;
    }
    *out = (double)v;
    return 0;
}

int num_format_float32(char *out, size_t cap, double v)
{
    float f = (float)v;
    if (!(f >= 1e-9F && f <= 1e9F)) {
        return AGENT_E_INVAL;
    }
    /* A float has at most 9 significant digits; from 1e-9, 18 decimals cover them. */
    for (int decimals = 0; decimals <= 18; decimals++) {
        int n = snprintf(out, cap, "%.*f", decimals, (double)f);
        if (n < 0 || (size_t)n >= cap) {
            return AGENT_E_INVAL;
        }
        if (strtof(out, NULL) == f) {
            return 0;
        }
    }
    return AGENT_E_INVAL;
}

uint32_t num_mix_u32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
