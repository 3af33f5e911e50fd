/* SPDX-License-Identifier: MIT */
#include "buf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hex.h"

void buf_init(struct buf *b, size_t max)
{
    memset(b, 0, sizeof(*b));
    b->max = max ? max : SIZE_MAX;
}

void buf_fini(struct buf *b)
{
    free(b->p);
    b->p = NULL;
    b->off = b->len = b->cap = 0;
}

void buf_reset(struct buf *b)
{
    b->off = b->len = 0;
}

int buf_reserve(struct buf *b, size_t n)
{
    if (b->max == 0) {
        b->max = SIZE_MAX;
    }
    /* Compact first: consumed bytes at the front are free room. */
    if (b->off > 0 && b->cap - b->len < n + 1) {
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    if (n > SIZE_MAX - 1 - b->len) {
        return AGENT_E_TOOBIG;
    }
    size_t need = b->len + n + 1; /* +1 keeps room for a terminating NUL */
    if (need <= b->cap) {
        return 0;
    }
    if (need - 1 > b->max) {
        return AGENT_E_TOOBIG;
    }
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap < need) {
        ncap = ncap > SIZE_MAX / 2 ? SIZE_MAX : ncap * 2;
    }
    if (ncap > b->max && b->max < SIZE_MAX) {
        ncap = b->max + 1;
    }
    uint8_t *np = realloc(b->p, ncap);
    if (np == NULL) {
        return -ENOMEM; /* == UV_ENOMEM on Unix */
    }
    b->p = np;
    b->cap = ncap;
    return 0;
}

int buf_append(struct buf *b, const void *data, size_t n)
{
    if (n == 0) {
        return 0;
    }
    if (b->cap - b->len > n) { /* room, and the spare byte kept */
        memcpy(b->p + b->len, data, n);
        b->len += n;
        return 0;
    }
    int rc = buf_reserve(b, n);
    if (rc != 0) {
        return rc;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
    return buf_append(b, s, strlen(s));
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
    /* Formats into the spare room first; only text that does not fit is formatted twice. */
    size_t room = b->p != NULL && b->off == 0 ? b->cap - b->len : 0;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(room > 0 ? (char *)b->p + b->len : NULL, room, fmt, ap2);
    va_end(ap2);
    if (n < 0) {
        return AGENT_E_INVAL;
    }
    if ((size_t)n < room) {
        b->len += (size_t)n;
        return 0;
    }
    int rc = buf_reserve(b, (size_t)n);
    if (rc != 0) {
        return rc;
    }
    int m = vsnprintf((char *)b->p + b->len, b->cap - b->len, fmt, ap);
    if (m != n) {
        return AGENT_E_INVAL;
    }
    b->len += (size_t)n;
    return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

int buf_append_pct(struct buf *b, const char *s, size_t n, bool keep_slash)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/');
        int rc;
        if (keep) {
            rc = buf_append(b, &s[i], 1);
        } else {
            const char esc[3] = {'%', hex_digit_upper(c >> 4), hex_digit_upper(c)};
            rc = buf_append(b, esc, sizeof(esc));
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int buf_append_json_escaped(struct buf *b, const char *s)
{
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        const char *two = NULL; /* a two-character escape */
        switch (*c) {
        case '"':
            two = "\\\"";
            break;
        case '\\':
            two = "\\\\";
            break;
        case '\n':
            two = "\\n";
            break;
        case '\r':
            two = "\\r";
            break;
        case '\t':
            two = "\\t";
            break;
        default:
            break;
        }
        int rc;
        if (two != NULL) {
            rc = buf_append(b, two, 2);
        } else if (*c < 0x20) {
            const char esc[6] = {'\\', 'u', '0', '0', hex_digit(*c >> 4), hex_digit(*c)};
            rc = buf_append(b, esc, sizeof(esc));
        } else {
            rc = buf_append(b, c, 1);
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

void buf_consume(struct buf *b, size_t n)
{
    if (n >= b->len - b->off) {
        b->off = b->len = 0;
        return;
    }
    b->off += n;
}

const char *buf_cstr(struct buf *b)
{
    if (b->p == NULL && buf_reserve(b, 0) != 0) {
        return "";
    }
    b->p[b->len] = '\0';
    return (const char *)b->p + b->off;
}

char *buf_steal(struct buf *b, size_t *len_out)
{
    if (buf_reserve(b, 0) != 0) {
        return NULL;
    }
    if (b->off > 0) {
        memmove(b->p, b->p + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
    }
    b->p[b->len] = '\0';
    char *out = (char *)b->p;
    if (len_out != NULL) {
        *len_out = b->len;
    }
    b->p = NULL;
    b->off = b->len = b->cap = 0;
    return out;
}

void buf_truncate(struct buf *b, size_t n)
{
    if (n < b->len - b->off) {
        b->len = b->off + n;
    }
}
