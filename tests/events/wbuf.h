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
/* Little-endian fields, {value, bytes} each: WB_PUT(&w, {1, 4}, {0, 2}, {x, 8}). */
void wb_fields(struct wb *w, const uint64_t (*f)[2], size_t n);
#define WB_PUT(w, ...)                                                                             \
    do {                                                                                           \
        const uint64_t wb_f_[][2] = {__VA_ARGS__};                                                 \
        wb_fields(w, wb_f_, sizeof(wb_f_) / sizeof(wb_f_[0]));                                     \
    } while (0)

#endif
