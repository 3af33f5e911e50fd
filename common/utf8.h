/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_UTF8_H
#define DOTMON_UTF8_H

/*
 * UTF-8 and UTF-16LE, once for the whole tree: the runtime speaks UTF-16LE (Diagnostic IPC
 * strings, nettrace payloads and metadata), everything dotmon writes is UTF-8 (JSON, NDJSON,
 * logs), and the S3 XML parser turns character references into UTF-8. Pure: no libuv, no
 * allocation, no globals. The per-character pieces are inline because the NDJSON converter
 * calls them for every character that is not plain ASCII (bench/bench_convert.sh).
 *
 * Code points are uint32_t. UTF-16LE data is bytes (p[2k] low, p[2k+1] high), never cast to
 * uint16_t pointers (alignment, byte order).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define UTF8_REPLACEMENT 0xFFFDu /* U+FFFD REPLACEMENT CHARACTER */

/* Bytes of the UTF-8 form of cp (cp <= U+10FFFF): 1 to 4. */
static inline size_t utf8_width(uint32_t cp)
{
    return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* The length of s[0..len) cut to at most max bytes without splitting a UTF-8 sequence. */
static inline size_t utf8_cut(const char *s, size_t len, size_t max)
{
    if (len <= max) {
        return len;
    }
    size_t n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0u) == 0x80u) {
        n--;
    }
    return n;
}

/* Writes the UTF-8 form of cp (cp <= U+10FFFF) to out, which has room for 4 bytes; returns its
 * length (utf8_width). Surrogates are not checked: callers map them to U+FFFD first. */
static inline size_t utf8_encode(uint8_t *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * Strict decoding of the UTF-8 sequence at s[0..n) (n >= 1): true with its code point and length
 * (1 to 4); false for a continuation byte or 0xC0, 0xC1, 0xF5-0xFF in lead position, a sequence
 * cut short by n or by a byte that is not a continuation byte, an overlong form, a UTF-16
 * surrogate, a value over U+10FFFF. For a NUL-terminated string n may be SIZE_MAX: the NUL is not
 * a continuation byte, so nothing past it is read.
 */
static inline bool utf8_decode(const uint8_t *s, size_t n, uint32_t *cp, size_t *len)
{
    uint8_t c = s[0];
    if (c < 0x80) {
        *cp = c;
        *len = 1;
        return true;
    }
    size_t l = c >= 0xC2 && c <= 0xDF   ? 2
               : c >= 0xE0 && c <= 0xEF ? 3
               : c >= 0xF0 && c <= 0xF4 ? 4
                                        : 0;
    if (l == 0 || l > n) {
        return false;
    }
    uint32_t v = c & (0x7Fu >> l);
    for (size_t k = 1; k < l; k++) {
        if ((s[k] & 0xC0) != 0x80) {
            return false;
        }
        v = (v << 6) | (s[k] & 0x3Fu);
    }
    static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min[l] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
        return false;
    }
    *cp = v;
    *len = l;
    return true;
}

/* The UTF-16LE unit at p (two bytes, low first). */
static inline uint32_t utf16le_unit(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
}

/*
 * The code point at unit *i of the UTF-16LE units p[0..units) (*i < units), advancing *i past it:
 * a high surrogate followed by a low one is one code point (two units); a lone surrogate is
 * U+FFFD (one unit). U+0000 is returned as it is.
 */
static inline uint32_t utf16le_next(const uint8_t *p, size_t units, size_t *i)
{
    uint32_t u = utf16le_unit(p + 2 * *i);
    *i += 1;
    if (u < 0xD800 || u > 0xDFFF) {
        return u;
    }
    if (u <= 0xDBFF && *i < units) {
        uint32_t lo = utf16le_unit(p + 2 * *i);
        if (lo >= 0xDC00 && lo <= 0xDFFF) {
            *i += 1;
            return 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
        }
    }
    return UTF8_REPLACEMENT;
}

/* Writes cp (cp <= U+10FFFF, not a surrogate) as UTF-16LE to out, which has room for 4 bytes;
 * returns the bytes written: 2, or 4 for a surrogate pair. */
static inline size_t utf16le_encode(uint8_t *out, uint32_t cp)
{
    if (cp < 0x10000) {
        out[0] = (uint8_t)(cp & 0xFF);
        out[1] = (uint8_t)(cp >> 8);
        return 2;
    }
    uint32_t v = cp - 0x10000, hi = 0xD800 + (v >> 10), lo = 0xDC00 + (v & 0x3FF);
    out[0] = (uint8_t)(hi & 0xFF);
    out[1] = (uint8_t)(hi >> 8);
    out[2] = (uint8_t)(lo & 0xFF);
    out[3] = (uint8_t)(lo >> 8);
    return 4;
}

/*
 * The UTF-16LE units p[0..units) as a C string: lone surrogates and U+0000 become U+FFFD, so the
 * result is valid UTF-8 and its strlen is its real length. utf16le_utf8_len is the length
 * utf16le_to_utf8 writes, without the NUL. utf16le_to_utf8 writes it and the NUL to out[0..cap)
 * and returns 0 with *out_len (when not NULL) set to that length, or AGENT_E_NOSPACE (cap too
 * small; out untouched).
 */
size_t utf16le_utf8_len(const uint8_t *p, size_t units);
int utf16le_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len);

#endif
