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

/*
 * .NET's ConfigurationKeyComparer on one key segment a[0..alen) against b[0..blen): whole numbers
 * (digits only, as int.TryParse takes an array index) first, by value; then the rest by
 * OrdinalIgnoreCase (upper-cased ASCII). <0, 0 or >0.
 */
int ascii_config_segment_compare(const char *a, size_t alen, const char *b, size_t blen);

/*
 * What an error or log line may quote of a URL given in settings: its scheme and authority
 * ("https://host:4318"), never a user:password@ part (then the scheme alone), a path or a query
 * (either may hold a key). out is "" when url has no "://". out is always NUL-terminated.
 */
void ascii_url_quotable(const char *url, char *out, size_t outlen);

#endif
