/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_SIGV4_H
#define DOTMON_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

/*
 * AWS Signature Version 4 (AWS General Reference, "Signature Version 4 signing process"; S3 API
 * Reference, "Authenticating Requests (AWS Signature Version 4)"), header and query (pre-signed
 * URL) forms. Pure: OpenSSL's SHA-256 and HMAC, no libuv, no clock (the caller passes the time).
 *
 * Canonicalisation, as S3 wants it (and as the test suite's "unnormalized" cases do):
 *  - the path is given decoded and URI-encoded here once, byte by byte, everything but the
 *    unreserved set A-Z a-z 0-9 - . _ ~ and '/'; "." and ".." segments and repeated slashes are
 *    kept as they are (S3 object keys may contain them);
 *  - query names and values are given decoded, encoded here ('/' too) and sorted by name, then
 *    value; a parameter without value is "name=";
 *  - header names are lower-cased, values trimmed with inner runs of blanks folded to one space;
 *    headers of one name keep their order and are joined with ','; every header given is signed.
 *
 * Errors: 0, AGENT_E_INVAL (a malformed argument: bad date, header name, too many headers or
 * parameters), or a buf error (UV_ENOMEM, AGENT_E_TOOBIG). The secret key never appears in any
 * output; the derived keys are wiped after use.
 */

#define SIGV4_ALGORITHM        "AWS4-HMAC-SHA256"
#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"
/* SHA-256 of the empty string, the payload hash of a request without body. */
#define SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SIGV4_HEX_SIZE     65 /* 64 hex digits and a NUL */
#define SIGV4_DATE_SIZE    17 /* "YYYYMMDDTHHMMSSZ" and a NUL */
#define SIGV4_MAX_HEADERS  32
#define SIGV4_MAX_PARAMS   32

struct sigv4_kv {
    const char *name;
    const char *value; /* NULL: a query parameter without '=' (signed as "name=") */
};

struct sigv4_key {
    const char *access_key_id;
    const char *secret_access_key;
    const char *region;  /* e.g. us-east-1 */
    const char *service; /* "s3" */
};

struct sigv4_req {
    const char *method;
    const char *path; /* decoded, starting with '/' */
    const struct sigv4_kv *query;
    size_t nquery;
    const struct sigv4_kv *headers; /* every header to sign, host and x-amz-date included */
    size_t nheaders;
    const char *payload_hash; /* 64 lower-case hex digits, or SIGV4_UNSIGNED_PAYLOAD */
};

/* "YYYYMMDDTHHMMSSZ" for t (UTC). */
void sigv4_amz_date(time_t t, char out[SIGV4_DATE_SIZE]);
/* Lower-case hex SHA-256 of p[0..n). */
void sigv4_sha256_hex(const void *p, size_t n, char out[SIGV4_HEX_SIZE]);
/* Appends s[0..n) URI-encoded (upper-case %XX); '/' is kept when keep_slash. */
int sigv4_uri_encode(struct buf *out, const char *s, size_t n, bool keep_slash);

/* The canonical request, appended to out (for tests and diagnostics). */
int sigv4_canonical_request(const struct sigv4_req *r, struct buf *out);
/* The string to sign for amz_date and the key's scope, appended to out. */
int sigv4_string_to_sign(const struct sigv4_key *k, const struct sigv4_req *r, const char *amz_date,
                         struct buf *out);
/*
 * The Authorization header's value, appended to out:
 * "AWS4-HMAC-SHA256 Credential=<id>/<date>/<region>/<service>/aws4_request,
 * SignedHeaders=<names>, Signature=<hex>".
 */
int sigv4_authorization(const struct sigv4_key *k, const struct sigv4_req *r, const char *amz_date,
                        struct buf *out);
/*
 * A pre-signed URL's query string (S3's "Authenticating Requests: Using Query Parameters"),
 * appended to out: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, X-Amz-Expires,
 * X-Amz-Security-Token (when session_token is not NULL), X-Amz-SignedHeaders=host, in canonical
 * order, then X-Amz-Signature. The payload is UNSIGNED-PAYLOAD and host is the only signed
 * header. expires_s: 1..604800.
 */
int sigv4_presign_query(const struct sigv4_key *k, const char *session_token, const char *method,
                        const char *path, const char *host, const char *amz_date,
                        uint64_t expires_s, struct buf *out);

#endif
