/* SPDX-License-Identifier: MIT */
#include "ascii.h"

#include <stdio.h>
#include <string.h>

char ascii_lower(char c)
{
    if (c >= 'A' && c <= 'Z') {
        c = (char)(c - 'A' + 'a');
    }
    return c;
}

bool ascii_ieq_n(const char *s, size_t n, const char *lit)
{
    size_t i = 0;
    for (; i < n && lit[i] != '\0'; i++) {
        if (ascii_lower(s[i]) != ascii_lower(lit[i])) {
            return false;
        }
    }
    return i == n && lit[i] == '\0';
}

bool ascii_ieq(const char *a, const char *b)
{
    return ascii_ieq_n(a, strlen(a), b);
}

/* A whole segment of digits as a number (at most 18 digits: what fits a long long). */
static bool segment_number(const char *s, size_t n, long long *out)
{
    if (n == 0 || n > 18) {
        return false;
    }
    long long v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return false;
        }
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

int ascii_config_segment_compare(const char *a, size_t alen, const char *b, size_t blen)
{
    long long x, y;
    bool xn = segment_number(a, alen, &x), yn = segment_number(b, blen, &y);
    if (xn && yn) {
        return (x > y) - (x < y);
    }
    if (xn != yn) {
        return xn ? -1 : 1;
    }
    for (size_t i = 0;; i++) {
        int ca = i < alen ? (unsigned char)a[i] : 0, cb = i < blen ? (unsigned char)b[i] : 0;
        ca = (ca >= 'a' && ca <= 'z') ? ca - 'a' + 'A' : ca;
        cb = (cb >= 'a' && cb <= 'z') ? cb - 'a' + 'A' : cb;
        if (ca != cb || ca == 0) {
            return ca - cb;
        }
    }
}

void ascii_url_quotable(const char *url, char *out, size_t outlen)
{
    if (outlen == 0) {
        return;
    }
    out[0] = '\0';
    const char *sep = strstr(url, "://");
    if (sep == NULL) {
        return;
    }
    size_t auth = strcspn(sep + 3, "/?#");
    if (memchr(sep + 3, '@', auth) != NULL) {
        auth = 0;
    }
    snprintf(out, outlen, "%.*s://%.*s", (int)(sep - url), url, (int)auth, sep + 3);
}
