/* SPDX-License-Identifier: MIT */
#include "ascii.h"

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
