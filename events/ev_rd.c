/* SPDX-License-Identifier: MIT */
#include "ev_rd.h"

#include <string.h>

#include "err.h"
#include "utf8.h"

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

/* The conversions are common/utf8's; these names are the events/ API. */

size_t ev_utf16_utf8_len(const uint8_t *p, size_t units)
{
    return utf16le_utf8_len(p, units);
}

int ev_utf16_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len)
{
    return utf16le_to_utf8(p, units, out, cap, out_len);
}

int ev_utf8_to_utf16(const char *s, uint8_t *out, size_t cap, size_t *out_len)
{
    const uint8_t *u = (const uint8_t *)s;
    size_t o = 0;
    for (size_t i = 0; u[i] != '\0';) {
        uint32_t cp;
        size_t len;
        if (!utf8_decode(u + i, SIZE_MAX, &cp, &len)) {
            return AGENT_E_INVAL;
        }
        i += len;
        uint8_t units[4];
        size_t n = utf16le_encode(units, cp);
        if (cap - o < n) {
            return AGENT_E_NOSPACE;
        }
        memcpy(out + o, units, n);
        o += n;
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
