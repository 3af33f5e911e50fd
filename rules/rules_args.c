/* SPDX-License-Identifier: MIT */
/* The Execute action's argument string split into argv; see rules.h. */
#include "rules.h"

#include <stdbool.h>
#include <string.h>

/* Copies one argument from *ps into *po: up to an unquoted blank or the end. */
static void next_argument(const char **ps, char **po)
{
    const char *s = *ps;
    char *out = *po;
    bool quoted = false;
    while (*s != '\0') {
        size_t bs = 0;
        while (*s == '\\') {
            s++;
            bs++;
        }
        if (bs > 0) {
            /* Before a quote: half of them, and an odd one makes the quote literal. */
            size_t lit = *s == '"' ? bs / 2 : bs;
            memset(out, '\\', lit);
            out += lit;
            if (*s == '"' && bs % 2 != 0) {
                *out++ = '"';
                s++;
            }
            continue;
        }
        if (*s == '"') {
            if (quoted && s[1] == '"') {
                *out++ = '"'; /* "" inside quotes: a quote, still quoted */
                s++;
            } else {
                quoted = !quoted;
            }
            s++;
            continue;
        }
        if ((*s == ' ' || *s == '\t') && !quoted) {
            break;
        }
        *out++ = *s++;
    }
    *out++ = '\0';
    *ps = s;
    *po = out;
}

size_t rules_split_arguments(const char *s, char *out, char **argv, size_t max)
{
    size_t n = 0;
    while (*s != '\0' && n < max) {
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        if (*s == '\0') {
            break;
        }
        argv[n++] = out;
        next_argument(&s, &out);
    }
    return n;
}
