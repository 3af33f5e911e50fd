/* SPDX-License-Identifier: MIT */
#include "ev_rd.h"

#include <string.h>

#include "err.h"

int ev_rd_skip(struct ev_rd *r, size_t len)
{
    if (ev_rd_left(r) < len) {
        return AGENT_E_TRUNC;
    }
    r->i += len;
    return 0;
}

int ev_rd_varuint(struct ev_rd *r, unsigned bits, uint64_t *out)
{
    unsigned max_bytes = (bits + 6) / 7;
    uint64_t value = 0;
    for (unsigned k = 0; k < max_bytes; k++) {
        if (r->i + k >= r->n) {
            return AGENT_E_TRUNC;
        }
        uint8_t b = r->p[r->i + k];
        unsigned shift = 7 * k;
        if (k == max_bytes - 1) {
            unsigned room = bits - shift; /* bits the last byte may still carry */
            if ((b & 0x80) != 0 || (room < 7 && (b >> room) != 0)) {
                return AGENT_E_PROTO;
            }
        }
        value |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            *out = value;
            r->i += k + 1;
            return 0;
        }
    }
    return AGENT_E_PROTO; /* not reached: the last byte returns above */
}

int ev_rd_utf8(struct ev_rd *r, const uint8_t **s, size_t *len)
{
    struct ev_rd t = *r;
    uint64_t n;
    int rc = ev_rd_varuint(&t, 32, &n);
    if (rc != 0) {
        return rc;
    }
    if (ev_rd_left(&t) < n) {
        return AGENT_E_TRUNC;
    }
    *s = t.p + t.i;
    *len = (size_t)n;
    r->i = t.i + (size_t)n;
    return 0;
}

int ev_rd_u8(struct ev_rd *r, uint8_t *out)
{
    if (ev_rd_left(r) < 1) {
        return AGENT_E_TRUNC;
    }
    *out = r->p[r->i];
    r->i += 1;
    return 0;
}

int ev_rd_u16(struct ev_rd *r, uint16_t *out)
{
    if (ev_rd_left(r) < 2) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u16(r->p + r->i);
    r->i += 2;
    return 0;
}

int ev_rd_u32(struct ev_rd *r, uint32_t *out)
{
    if (ev_rd_left(r) < 4) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u32(r->p + r->i);
    r->i += 4;
    return 0;
}

int ev_rd_u64(struct ev_rd *r, uint64_t *out)
{
    if (ev_rd_left(r) < 8) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u64(r->p + r->i);
    r->i += 8;
    return 0;
}

bool ev_rd_utf16z(struct ev_rd *r, const uint8_t **s, size_t *units)
{
    size_t start = r->i;
    size_t j = start;
    /* Four units at a time while none is zero (a 16-bit lane is zero when subtracting 1 borrows
     * out of it without its top bit having been set). */
    const uint64_t ones = 0x0001000100010001ull, tops = 0x8000800080008000ull;
    for (; j + 8 <= r->n; j += 8) {
        uint64_t x;
        memcpy(&x, r->p + j, 8);
        if (((x - ones) & ~x & tops) != 0) {
            break;
        }
    }
    for (; j + 2 <= r->n; j += 2) {
        if (r->p[j] == 0 && r->p[j + 1] == 0) {
            *s = r->p + start;
            *units = (j - start) / 2;
            r->i = j + 2;
            return true;
        }
    }
    return false;
}

/* ---- UTF-16LE <-> UTF-8 ------------------------------------------------------------------ */

#define REPLACEMENT_CHAR 0xFFFDu

/*
 * The code point at unit *i, advancing *i. Lone surrogates and U+0000 map to U+FFFD: the output
 * must be valid UTF-8 and a C string whose strlen is its real length.
 */
static uint32_t utf16_next(const uint8_t *p, size_t units, size_t *i)
{
    uint32_t u = ev_load_u16(p + 2 * *i);
    *i += 1;
    if (u == 0) {
        return REPLACEMENT_CHAR;
    }
    if (u >= 0xD800 && u <= 0xDBFF) {
        if (*i < units) {
            uint32_t lo = ev_load_u16(p + 2 * *i);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                *i += 1;
                return 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            }
        }
        return REPLACEMENT_CHAR;
    }
    if (u >= 0xDC00 && u <= 0xDFFF) {
        return REPLACEMENT_CHAR;
    }
    return u;
}

static size_t utf8_width(uint32_t cp)
{
    if (cp < 0x80) {
        return 1;
    }
    if (cp < 0x800) {
        return 2;
    }
    return cp < 0x10000 ? 3 : 4;
}

size_t ev_utf16_utf8_len(const uint8_t *p, size_t units)
{
    size_t len = 0;
    for (size_t i = 0; i < units;) {
        len += utf8_width(utf16_next(p, units, &i));
    }
    return len;
}

int ev_utf16_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len)
{
    size_t need = ev_utf16_utf8_len(p, units);
    if (cap == 0 || need > cap - 1) {
        return AGENT_E_NOSPACE;
    }
    size_t o = 0;
    for (size_t i = 0; i < units;) {
        uint32_t cp = utf16_next(p, units, &i);
        size_t w = utf8_width(cp);
        if (w == 1) {
            out[o++] = (char)cp;
            continue;
        }
        /* Lead byte: 110xxxxx, 1110xxxx or 11110xxx, then 10xxxxxx continuation bytes. */
        static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
        out[o++] = (char)(lead[w] | (cp >> (6 * (w - 1))));
        for (size_t k = w - 1; k > 0; k--) {
            out[o++] = (char)(0x80 | ((cp >> (6 * (k - 1))) & 0x3F));
        }
    }
    out[o] = '\0';
    if (out_len != NULL) {
        *out_len = o;
    }
    return 0;
}

/* One code point of s at *i (advanced), or -1 for malformed UTF-8. */
static int32_t utf8_next(const unsigned char *s, size_t *i)
{
    uint32_t c = s[*i];
    size_t extra;
    uint32_t min;
    if (c < 0x80) {
        *i += 1;
        return (int32_t)c;
    }
    if ((c & 0xE0) == 0xC0) {
        extra = 1;
        min = 0x80;
        c &= 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
        extra = 2;
        min = 0x800;
        c &= 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
        extra = 3;
        min = 0x10000;
        c &= 0x07;
    } else {
        return -1;
    }
    for (size_t k = 1; k <= extra; k++) {
        unsigned char b = s[*i + k]; /* a NUL stops here: it is not a continuation byte */
        if ((b & 0xC0) != 0x80) {
            return -1;
        }
        c = (c << 6) | (b & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        return -1;
    }
    *i += 1 + extra;
    return (int32_t)c;
}

int ev_utf8_to_utf16(const char *s, uint8_t *out, size_t cap, size_t *out_len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; u[i] != '\0';) {
        int32_t cp = utf8_next(u, &i);
        if (cp < 0) {
            return AGENT_E_INVAL;
        }
        uint16_t units[2];
        size_t n = 1;
        if (cp >= 0x10000) {
            uint32_t v = (uint32_t)cp - 0x10000;
            units[0] = (uint16_t)(0xD800 + (v >> 10));
            units[1] = (uint16_t)(0xDC00 + (v & 0x3FF));
            n = 2;
        } else {
            units[0] = (uint16_t)cp;
        }
        if (cap - o < 2 * n) {
            return AGENT_E_NOSPACE;
        }
        for (size_t k = 0; k < n; k++) {
            out[o++] = (uint8_t)(units[k] & 0xFF);
            out[o++] = (uint8_t)(units[k] >> 8);
        }
    }
    *out_len = o;
    return 0;
}

bool ev_utf16_eq_ascii(const uint8_t *s, size_t units, const char *a)
{
    size_t k = 0;
    for (; k < units; k++) {
        if (a[k] == '\0' || ev_load_u16(s + 2 * k) != (uint8_t)a[k]) {
            return false;
        }
    }
    return a[k] == '\0';
}
