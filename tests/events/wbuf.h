/* SPDX-License-Identifier: MIT */
#ifndef TESTS_EVENTS_WBUF_H
#define TESTS_EVENTS_WBUF_H

/* A growing byte buffer for the events tests' nettrace/payload writers (little-endian). */

#include <stddef.h>
#include <stdint.h>

struct wb {
    uint8_t *b;
    size_t n;
    size_t cap;
};

void wb_raw(struct wb *w, const void *p, size_t n);
void wb_le(struct wb *w, uint64_t v, size_t bytes);
void wb_u8(struct wb *w, unsigned v);
void wb_u16(struct wb *w, unsigned v);
void wb_u32(struct wb *w, uint32_t v);
void wb_u64(struct wb *w, uint64_t v);
void wb_varu(struct wb *w, uint64_t v);
void wb_str(struct wb *w, const char *s);
void wb_wstr(struct wb *w, const char *s);
void wb_f64(struct wb *w, double d);
void wb_f32(struct wb *w, float f);
void wb_sized16(struct wb *w, const struct wb *sub);

#endif
