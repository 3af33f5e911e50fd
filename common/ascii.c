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
