/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_RD_H
#define AGENT_EV_RD_H

/*
 * events/' own bounds-checked cursor and the UTF-16LE <-> UTF-8 conversions its readers need
 * (events/ includes nothing of ipc/, docs/style.md §1; the shape is ipc_codec.h's reader). Pure: no
 * libuv, no I/O, no allocation. Reads advance only on success and return 0 or AGENT_E_TRUNC.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* A read cursor over p[0..n); base is the absolute stream offset of p[0], for error reports. */
struct ev_rd {
    const uint8_t *p;
    size_t n;      /* end of the input */
    size_t i;      /* bytes consumed: the next read is at p + i */
    uint64_t base; /* stream offset of p[0] */
};

static inline void ev_rd_init(struct ev_rd *r, const uint8_t *p, size_t n)
{
    r->p = p;
    r->n = n;
    r->i = 0;
    r->base = 0;
}

/* Bytes left to read. */
static inline size_t ev_rd_left(const struct ev_rd *r)
{
    return r->n - r->i;
}

/* Stream offset of the next byte (base + i). */
static inline uint64_t ev_rd_offset(const struct ev_rd *r)
{
    return r->base + r->i;
}

/* Little-endian loads, byte by byte: unaligned input and any host order are fine. */
static inline uint16_t ev_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ev_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t ev_load_u64(const uint8_t *p)
{
    return (uint64_t)ev_load_u32(p) | ((uint64_t)ev_load_u32(p + 4) << 32);
}

/* Fixed-size reads, inline: every decoder's inner loops call them once per field. */
static inline int ev_rd_u8(struct ev_rd *r, uint8_t *out)
{
    if (ev_rd_left(r) < 1) {
        return AGENT_E_TRUNC;
    }
    *out = r->p[r->i];
    r->i += 1;
    return 0;
}

static inline int ev_rd_u16(struct ev_rd *r, uint16_t *out)
{
    if (ev_rd_left(r) < 2) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u16(r->p + r->i);
    r->i += 2;
    return 0;
}

static inline int ev_rd_u32(struct ev_rd *r, uint32_t *out)
{
    if (ev_rd_left(r) < 4) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u32(r->p + r->i);
    r->i += 4;
    return 0;
}

static inline int ev_rd_u64(struct ev_rd *r, uint64_t *out)
{
    if (ev_rd_left(r) < 8) {
        return AGENT_E_TRUNC;
    }
    *out = ev_load_u64(r->p + r->i);
    r->i += 8;
    return 0;
}
/* Steps over len bytes. */
int ev_rd_skip(struct ev_rd *r, size_t len);

/*
 * A LEB128 varuint of at most `bits` bits (32 or 64; docs/nettrace.md §4): 0, AGENT_E_TRUNC, or
 * AGENT_E_PROTO when it needs more than ceil(bits / 7) bytes or sets bits past the width. The
 * cursor moves only on success.
 */
int ev_rd_varuint(struct ev_rd *r, unsigned bits, uint64_t *out);

/*
 * A NetTrace V6 string (docs/nettrace.md §7): varuint32 byte length, then that many UTF-8 bytes.
 * *s and *len describe the bytes (not NUL-terminated). 0, AGENT_E_TRUNC or AGENT_E_PROTO.
 */
int ev_rd_utf8(struct ev_rd *r, const uint8_t **s, size_t *len);

/*
 * A UTF-16LE NUL-terminated string at the cursor: *s and *units (the NUL excluded) describe it and
 * the cursor moves past the NUL. False (cursor unchanged) when no NUL unit lies inside the input.
 */
bool ev_rd_utf16z(struct ev_rd *r, const uint8_t **s, size_t *units);

/*
 * Bytes the UTF-8 form of `units` UTF-16LE units takes, without the NUL. Surrogate pairs become one
 * 4-byte sequence; lone surrogates and embedded U+0000 become U+FFFD, so the result is valid UTF-8
 * and a C string of the advertised length. Never more than 3 * units.
 */
size_t ev_utf16_utf8_len(const uint8_t *p, size_t units);
/*
 * Converts into out (NUL-terminated). cap must be at least the length above + 1, else
 * AGENT_E_NOSPACE and nothing is written. *out_len (may be NULL) gets the length without NUL.
 */
int ev_utf16_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len);
/*
 * Encodes a UTF-8 C string as UTF-16LE units (no NUL) into out[0..cap): *out_len gets the byte
 * count. AGENT_E_INVAL for malformed UTF-8 (overlong, surrogates, > U+10FFFF, truncated),
 * AGENT_E_NOSPACE when it does not fit.
 */
int ev_utf8_to_utf16(const char *s, uint8_t *out, size_t cap, size_t *out_len);
/* True when s[0..units) (UTF-16LE) is exactly the ASCII text a (no conversion, no allocation). */
bool ev_utf16_eq_ascii(const uint8_t *s, size_t units, const char *a);

#endif
