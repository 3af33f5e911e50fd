/* SPDX-License-Identifier: MIT */
#include "hex.h"

static const char lower_digits[] = "0123456789abcdef";
static const char upper_digits[] = "0123456789ABCDEF";

char hex_digit(unsigned v)
{
    return lower_digits[v & 15u];
}

char hex_digit_upper(unsigned v)
{
    return upper_digits[v & 15u];
}

int hex_value(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

int hex_pct_decode(char *s, size_t *n, bool lenient)
{
    size_t len = *n;
    size_t w = 0;
    for (size_t k = 0; k < len; k++) {
        int hi = s[k] == '%' && k + 2 < len ? hex_value(s[k + 1]) : -1;
        int lo = hi >= 0 ? hex_value(s[k + 2]) : -1;
        if (lo >= 0) {
            s[w++] = (char)(hi * 16 + lo);
            k += 2;
        } else if (s[k] == '%' && !lenient) {
            return -1;
        } else {
            s[w++] = s[k];
        }
    }
    *n = w;
    return 0;
}

void hex_encode(const void *p, size_t n, char *out)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = lower_digits[b[i] >> 4];
        out[2 * i + 1] = lower_digits[b[i] & 15u];
    }
}

size_t hex_u64(uint64_t v, char out[16])
{
    size_t n = 1;
    while (n < 16 && (v >> (4 * n)) != 0) {
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        out[n - 1 - i] = lower_digits[(v >> (4 * i)) & 15u];
    }
    return n;
}

/* bytes[order[0..15]] in the 8-4-4-4-12 form. */
static void guid_text(const uint8_t bytes[16], const uint8_t order[16], char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[o++] = '-';
        }
        hex_encode(&bytes[order[i]], 1, out + o);
        o += 2;
    }
    out[o] = '\0';
}

void hex_guid_dotnet(const uint8_t bytes[16], char out[HEX_GUID_SIZE])
{
    static const uint8_t order[16] = {3, 2, 1, 0, 5, 4, 7, 6, 8, 9, 10, 11, 12, 13, 14, 15};
    guid_text(bytes, order, out);
}

void hex_guid_bytes(const uint8_t bytes[16], char out[HEX_GUID_SIZE])
{
    static const uint8_t order[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    guid_text(bytes, order, out);
}
