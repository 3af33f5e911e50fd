/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_CORS_H
#define AGENT_HTTP_CORS_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

/*
 * Cross-origin resource sharing (pure: no libuv, no allocation but the caller's buf), as
 * dotnet-monitor does it with CorsConfiguration:AllowedOrigins (docs/security.md, "CORS"): the
 * setting is a ';'-separated list of origins; any header and any method are allowed; no
 * credentials, no exposed headers, no max-age. Each entry is trimmed of blanks and compared,
 * lower-cased, with the request's Origin byte for byte (browsers send it in lower case). An
 * entry `*` that is the only one allows every origin (answered with `*`).
 *
 * The policy is evaluated from the setting's text on each request that carries an Origin
 * header, so there is nothing to build or free.
 */

/* What to do with one request. */
enum http_cors_verdict {
    HTTP_CORS_PASS = 0, /* not a CORS request, or no policy: serve it as if CORS did not exist */
    HTTP_CORS_ACTUAL,   /* serve it; add the headers to whatever answer it gets */
    HTTP_CORS_PREFLIGHT /* answer 204 now with the headers (none for an origin not allowed) */
};

/* Up to four response headers (names static; values point into the request's headers, the
 * allowed list, or scratch). Own type: http_server.h brings libuv, which a pure module avoids. */
struct http_cors_headers {
    const char *name[4];
    const char *value[4];
    size_t n;
};

/*
 * Decides for a request: allowed is CorsConfiguration:AllowedOrigins (NULL or blank: no policy),
 * method the request's, origin its Origin header (NULL: none), request_method and
 * request_headers its Access-Control-Request-Method and -Headers (NULL when absent). A preflight
 * is an OPTIONS request with an Origin and an Access-Control-Request-Method header. For an
 * allowed origin out gets Access-Control-Allow-Origin (the origin as sent, or `*`), Vary: Origin
 * (unless `*`) and, on a preflight, Access-Control-Allow-Methods (the requested method) and
 * Access-Control-Allow-Headers (the requested headers, trimmed, joined with ","; built in
 * scratch, which must stay alive while out is used). Returns the verdict; out->n is 0 for an
 * origin not allowed and on an allocation failure of scratch (the headers are then left out).
 */
enum http_cors_verdict http_cors_evaluate(const char *allowed, const char *method,
                                          const char *origin, const char *request_method,
                                          const char *request_headers, struct buf *scratch,
                                          struct http_cors_headers *out);

/* Whether origin is in the ';'-separated list allowed (the rules above); *any is set when the
 * list is `*` alone. False for a NULL or empty origin. */
bool http_cors_origin_allowed(const char *allowed, const char *origin, bool *any);

#endif
