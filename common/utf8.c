/* SPDX-License-Identifier: MIT */
/* UTF-16LE strings to C strings; the per-character pieces are inline in utf8.h. */
#include "utf8.h"

#include "err.h"

/* A code point as utf16le_to_utf8 writes it: U+0000 would end the C string early. */
static inline uint32_t c_string_cp(uint32_t cp)
{
    return cp == 0 ? UTF8_REPLACEMENT : cp;
}

size_t utf16le_utf8_len(const uint8_t *p, size_t units)
{
    size_t len = 0;
    for (size_t i = 0; i < units;) {
        len += utf8_width(c_string_cp(utf16le_next(p, units, &i)));
    }
    return len;
}

int utf16le_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len)
{
    size_t need = utf16le_utf8_len(p, units);
    if (cap == 0 || need > cap - 1) {
        return AGENT_E_NOSPACE;
    }
    uint8_t *o = (uint8_t *)out;
    for (size_t i = 0; i < units;) {
        o += utf8_encode(o, c_string_cp(utf16le_next(p, units, &i)));
    }
    *o = '\0';
    if (out_len != NULL) {
        *out_len = (size_t)(o - (uint8_t *)out);
    }
    return 0;
}
