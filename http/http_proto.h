/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_PROTO_H
#define AGENT_HTTP_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "buf.h"

/*
 * Module-private, pure HTTP/1.1 helpers shared by http_query.c, http_parse.c, http_conn.c,
 * http_resp.c and http_server.c (no libuv, no llhttp, no I/O), so every rule about bytes on the
 * wire is unit-testable. Not part of the public API: only files of http/ and tests/http include
 * this header.
 */

/* RFC 9110 reason phrase for status, or "Unknown" (never NULL, static storage). */
const char *http__reason_phrase(int status);

/* True if c is a tchar (RFC 9110 §5.6.2), the alphabet of header names and methods. */
bool http__is_tchar(unsigned char c);

/* True if name is a non-empty token. */
bool http__is_token(const char *name, size_t len);

/*
 * True if value may be sent as a field value: no CR, LF, NUL or other control byte except HTAB
 * (RFC 9110 §5.5). Guards response headers against header injection by handlers.
 */
bool http__is_field_value(const char *value, size_t len);

/* Writes the IMF-fixdate (RFC 9110 §5.6.7) for t into out[30] ("Sun, 06 Nov 1994 08:49:37 GMT").
 * Locale-independent. Returns 0, or AGENT_E_INVAL if t cannot be converted. */
int http__format_date(time_t t, char out[30]);

/*
 * Checks a request target as received on the request line and splits it.
 * Accepted: origin-form ("/p?q"), absolute-form ("http://host/p?q": the path starts at the first
 * '/' after the authority, "/" if none) and asterisk-form ("*", only when is_options).
 * Rejected (AGENT_E_INVAL): empty targets, bytes outside visible ASCII, and the characters RFC 3986
 * never allows unencoded in a target: SP " # < > \ ^ ` { | }.
 * On success path_off/path_len and query_off/query_len locate the path (without the "?") and the
 * query (after '?', length 0 when absent) inside target.
 */
int http__split_target(const char *target, size_t len, bool is_options, size_t *path_off,
                       size_t *path_len, size_t *query_off, size_t *query_len);

/* Result of http__parse_listen_url. */
enum http_listen_host {
    HTTP_HOST_LITERAL = 0, /* an IPv4 or IPv6 literal, copied into host */
    HTTP_HOST_LOOPBACK,    /* "localhost": 127.0.0.1 and ::1 */
    HTTP_HOST_ANY          /* "+", "*" or any other name: all interfaces */
};

struct http_listen_url {
    enum http_listen_host kind;
    bool ipv6;     /* host is an IPv6 literal (was written in brackets) */
    char host[64]; /* literal address, without brackets; "" unless kind == HTTP_HOST_LITERAL */
    int port;      /* 0..65535; 80 (443 for https) when the URL has no port */
    bool tls;      /* the scheme is https */
};

/*
 * Parses one dotnet-monitor --urls entry: "http://host[:port][/]" where host is an IPv4 literal,
 * "[IPv6 literal]", "localhost", "+", "*" or another name (all interfaces, as Kestrel and
 * dotnet-monitor do), or the same with "https://". The scheme is case-insensitive. Anything
 * malformed: AGENT_E_INVAL. *out is written only on success.
 */
int http__parse_listen_url(const char *url, struct http_listen_url *out);

/*
 * A response head is built in three steps so that this file need not know struct http_header
 * (declared in the libuv-facing http_server.h):
 *   http__head_begin   status line, Date, and Content-Type when content_type != NULL;
 *   http__head_field   one extra header, once per header;
 *   http__head_end     the framing header, Connection, and the blank line.
 * Each returns 0, AGENT_E_INVAL or a buf error; on error the caller discards the whole head.
 */
enum http_framing {
    HTTP_FRAME_NONE = 0, /* no framing header: 1xx/204/304, or a body delimited by close */
    HTTP_FRAME_LENGTH,   /* Content-Length: n */
    HTTP_FRAME_CHUNKED   /* Transfer-Encoding: chunked */
};
enum http_conn_header {
    HTTP_CONN_NONE = 0,  /* persistent by default (HTTP/1.1) */
    HTTP_CONN_CLOSE,     /* Connection: close */
    HTTP_CONN_KEEP_ALIVE /* Connection: keep-alive, for HTTP/1.0 clients that asked for it */
};

/* AGENT_E_INVAL when status is not 100..599 or content_type is not a valid field value. */
int http__head_begin(struct buf *out, int status, const char *date, const char *content_type);
/* AGENT_E_INVAL when name is not a token, value is not a field value, or name is one the server
 * manages itself (Content-Length, Transfer-Encoding, Connection, Date, Keep-Alive, Upgrade,
 * Content-Type: pass that one as content_type). */
int http__head_field(struct buf *out, const char *name, const char *value);
int http__head_end(struct buf *out, enum http_framing framing, uint64_t content_length,
                   enum http_conn_header connection);

/* Appends the chunk-size line of one chunk ("1f4\r\n"). */
int http__chunk_prefix(struct buf *out, size_t len);

#endif
