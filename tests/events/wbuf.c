/* SPDX-License-Identifier: MIT */
#include "wbuf.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

void wb_raw(struct wb *w, const void *p, size_t n)
{
    if (w->n + n > w->cap) {
        size_t cap = w->cap ? w->cap : 256;
        while (cap < w->n + n) {
            cap *= 2;
        }
        w->b = realloc(w->b, cap);
        assert_non_null(w->b);
        w->cap = cap;
    }
    if (n > 0) {
        memcpy(w->b + w->n, p, n);
    }
    w->n += n;
}

void wb_le(struct wb *w, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t k = 0; k < bytes; k++) {
        b[k] = (uint8_t)(v >> (8 * k));
    }
    wb_raw(w, b, bytes);
}

void wb_fields(struct wb *w, const uint64_t (*f)[2], size_t n)
{
    for (size_t k = 0; k < n; k++) {
        wb_le(w, f[k][0], (size_t)f[k][1]);
    }
}

void wb_u8(struct wb *w, unsigned v)
{
    wb_le(w, v, 1);
}

void wb_u16(struct wb *w, unsigned v)
{
    wb_le(w, v, 2);
}

void wb_u32(struct wb *w, uint32_t v)
{
    wb_le(w, v, 4);
}

void wb_u64(struct wb *w, uint64_t v)
{
    wb_le(w, v, 8);
}

void wb_varu(struct wb *w, uint64_t v)
{
    do {
        uint8_t b = (uint8_t)(v & 0x7F);
        v >>= 7;
        wb_u8(w, b | (v != 0 ? 0x80u : 0u));
    } while (v != 0);
}

/* V6 string: varuint32 length + UTF-8. */
void wb_str(struct wb *w, const char *s)
{
    wb_varu(w, strlen(s));
    wb_raw(w, s, strlen(s));
}

/* Payload string: UTF-16LE + NUL (ASCII input). */
void wb_wstr(struct wb *w, const char *s)
{
    for (; *s != '\0'; s++) {
        wb_u16(w, (uint8_t)*s);
    }
    wb_u16(w, 0);
}

void wb_f64(struct wb *w, double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    wb_u64(w, u);
}

void wb_f32(struct wb *w, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof(u));
    wb_u32(w, u);
}

/* Appends sub with a u16 size prefix (metadata rows, field descriptions, thread rows). */
void wb_sized16(struct wb *w, const struct wb *sub)
{
    wb_u16(w, (unsigned)sub->n);
    wb_raw(w, sub->b, sub->n);
}
