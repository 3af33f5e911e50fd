/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_QUERY_H
#define AGENT_HTTP_QUERY_H

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

/*
 * Percent-decodes a path ("/operations/abc%2Dd") into out (replacing its content). '+' stays '+'
 * in paths. Returns 0, or AGENT_E_INVAL for a bad %XX or an encoded NUL (out unchanged then).
 * Note that %2F decodes to '/': callers that give '/' a meaning inside a segment must split
 * before decoding.
 */
int http_path_decode(const char *path, struct buf *out);

/*
 * Appends an RFC 7807 problem body to out:
 *   {"type":"<RFC 9110/6585 section URL>","title":"…","status":N,"detail":"…"}
 * title and detail are JSON-escaped; a NULL title becomes the standard reason phrase, a NULL
 * detail omits the member. type is "about:blank" for statuses without a section anchor.
 * Returns 0, AGENT_E_INVAL when status is not 100..599, or a buf error (out unchanged then).
 */
int http_problem_json(struct buf *out, int status, const char *title, const char *detail);

#endif
