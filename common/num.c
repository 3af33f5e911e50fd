/* SPDX-License-Identifier: MIT */
#include "num.h"

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

uint32_t num_mix_u32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}
