/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_ROUTER_H
#define AGENT_HTTP_ROUTER_H

#include <stddef.h>

#include "buf.h"

/*
 * Pure helpers for request targets (no libuv).
 */

/*
 * Looks up `name` in a raw query string ("a=1&b=x%20y"), percent- and '+'-decoding both names
 * and values. Names compare case-insensitively (ASP.NET binds query names that way).
 * Returns 1 and writes the decoded value into out (replacing its content) when found,
 * 0 when absent, AGENT_E_INVAL for malformed encoding (bad %XX, NUL byte) anywhere in the query,
 * and AGENT_E_INVAL when the name occurs more than once with different values.
 */
int http_query_get(const char *query, const char *name, struct buf *out);

/* Checks that every parameter name in the query is in the NULL-terminated `allowed` list
 * (case-insensitive). Returns 0, or AGENT_E_INVAL and stores the first unknown name in bad. */
int http_query_check_names(const char *query, const char *const *allowed, struct buf *bad);

/* Percent-decodes a path ("/operations/abc%2Dd") into out. Returns 0 or AGENT_E_INVAL. */
int http_path_decode(const char *path, struct buf *out);

#endif
