/* SPDX-License-Identifier: MIT */
#ifndef AGENT_ASCII_H
#define AGENT_ASCII_H

#include <stdbool.h>
#include <stddef.h>

/*
 * The one case-insensitive comparison: ASCII letters only, whatever the locale (strcasecmp
 * follows LC_CTYPE). For protocol tokens: HTTP schemes, JWT/JWK names, profile and level names.
 */

char ascii_lower(char c);
/* a and b are equal but for ASCII case. */
bool ascii_ieq(const char *a, const char *b);
/* s[0..n) equals the C string lit but for ASCII case (s may hold a NUL before n: then false). */
bool ascii_ieq_n(const char *s, size_t n, const char *lit);

#endif
