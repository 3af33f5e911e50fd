/* SPDX-License-Identifier: MIT */
#ifndef AGENT_BUF_H
#define AGENT_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * A growable byte buffer with a hard cap. The cap (max) is checked before every growth, so a
 * size taken from the network can never make the buffer allocate past it. Data lives in
 * p[off .. len); consumed bytes are dropped from the front with buf_consume and compacted lazily.
 * The buffer always keeps one spare byte so buf_cstr can NUL-terminate.
 */
struct buf {
    uint8_t *p;
    size_t off; /* start of unconsumed data */
    size_t len; /* end of data */
    size_t cap; /* allocated bytes */
    size_t max; /* hard cap on cap; 0 means SIZE_MAX */
};

void buf_init(struct buf *b, size_t max);
/* Frees the storage; the buffer may be reused after buf_init. Safe on a zeroed or finished buf. */
void buf_fini(struct buf *b);
/* Makes room for n more bytes after len. Returns 0, -ENOMEM (UV_ENOMEM) or AGENT_E_TOOBIG. */
int buf_reserve(struct buf *b, size_t n);
int buf_append(struct buf *b, const void *data, size_t n);
int buf_append_str(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
/* Appends s as the inside of a JSON string (no quotes), escaping as RFC 8259 requires. */
int buf_append_json_escaped(struct buf *b, const char *s);
/* Appends s[0..n) percent-encoded as RFC 3986 2.1 has it: every byte but the unreserved ones
 * (letters, digits, "-._~") as %XX with upper-case digits; '/' kept when keep_slash (a path). A
 * query value or an AWS SigV4 canonical URI. */
int buf_append_pct(struct buf *b, const char *s, size_t n, bool keep_slash);
/* Drops n bytes from the front of the data. n must not exceed buf_size. */
void buf_consume(struct buf *b, size_t n);
void buf_reset(struct buf *b);
/* Keeps the first n bytes of the data (no-op when n >= buf_size). */
void buf_truncate(struct buf *b, size_t n);
/* Views: valid until the next call that changes b. */
static inline const uint8_t *buf_data(const struct buf *b)
{
    return b->p ? b->p + b->off : (const uint8_t *)"";
}
static inline size_t buf_size(const struct buf *b)
{
    return b->len - b->off;
}
/* NUL-terminates the data (without counting the NUL) and returns it; "" when empty or on ENOMEM. */
const char *buf_cstr(struct buf *b);
/*
 * Hands the storage to the caller (who frees it with free) and leaves b empty. Returns NULL if
 * the buffer is empty and allocation of an empty string fails. The data is NUL-terminated.
 */
char *buf_steal(struct buf *b, size_t *len_out);

#endif
