/* SPDX-License-Identifier: MIT */
#ifndef TEST_HTTPC_H
#define TEST_HTTPC_H

/*
 * A small blocking HTTP/1.1 client for integration tests, talking to dotmon over loopback.
 *
 * It is deliberately strict and independent of the server's parser (llhttp): it demands CRLF line
 * ends, a well-formed status line and header lines, at most one of Content-Length and
 * Transfer-Encoding, and valid chunk framing, and reports a violation as AGENT_E_PROTO with a
 * readable reason in resp->error. So a response that llhttp-based code would accept but a real
 * client could choke on still fails a test.
 *
 * Every call has one deadline (timeout_ms from its start) covering connect, send and receive.
 * Errors: 0; -errno from the socket layer (-ECONNREFUSED ...); AGENT_E_TIMEOUT; AGENT_E_CLOSED
 * (peer closed before a complete response; if the head had arrived, resp keeps it and body /
 * body_len hold the body bytes received before the close); AGENT_E_PROTO (malformed response);
 * AGENT_E_TOOBIG (head over 64 KiB or body over max_body).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

struct httpc_header {
    char *name;
    char *value; /* surrounding whitespace removed */
};

struct httpc_resp {
    int status;        /* 200, 404 ... (0 when no response was parsed) */
    int minor_version; /* HTTP/1.<minor_version> */
    char *reason;
    struct httpc_header *headers; /* in arrival order, duplicates kept */
    size_t n_headers;
    char *body;        /* decoded (de-chunked) body, NUL-terminated; never NULL after success */
    size_t body_len;   /* without the terminating NUL */
    bool chunked;      /* the body came with Transfer-Encoding: chunked */
    bool until_close;  /* the body had no length and ended with the connection */
    bool keep_alive;   /* the connection may be reused after this response */
    double ttfb_ms;    /* request start (incl. connect) to the end of the response head */
    double latency_ms; /* request start (incl. connect) to the last body byte */
    char error[200];   /* why the call failed, for assertion messages ("" on success) */
};

/* One connection, reused across requests while the server keeps it alive. */
struct httpc {
    int fd; /* -1 when not connected */
    char host[64];
    uint16_t port;
    int timeout_ms;            /* per request */
    size_t max_body;           /* body cap; default 512 MiB */
    struct buf in;             /* received bytes not yet consumed */
    unsigned requests_on_conn; /* requests sent on the current connection */
};

/* Prepares c for host (a numeric IPv4 or IPv6 address) and port; connects lazily. */
void httpc_init(struct httpc *c, const char *host, uint16_t port, int timeout_ms);
/* Closes the connection and frees buffers; c can be reused after httpc_init. Idempotent. */
void httpc_fini(struct httpc *c);
/* Drops the current connection (the next request opens a new one). */
void httpc_disconnect(struct httpc *c);

/*
 * Sends one request and reads its response into *resp (initialised here; release it with
 * httpc_resp_fini, also after a failure). headers: NULL-terminated "Name: value" strings, or
 * NULL. Host is added unless given; Content-Length is added when body is not NULL (or the method
 * is POST/PUT/PATCH) unless Content-Length or Transfer-Encoding is given. If a reused keep-alive
 * connection turns out to be closed before any response byte, the request is retried once on a
 * new connection.
 */
int httpc_request(struct httpc *c, const char *method, const char *target,
                  const char *const *headers, const void *body, size_t body_len,
                  struct httpc_resp *resp);

/* One request on a fresh connection to 127.0.0.1:port, closed afterwards. */
int httpc_fetch(uint16_t port, const char *method, const char *target, const char *const *headers,
                const void *body, size_t body_len, int timeout_ms, struct httpc_resp *resp);
/* httpc_fetch for GET without a body. */
int httpc_get(uint16_t port, const char *target, const char *const *headers, int timeout_ms,
              struct httpc_resp *resp);

/* The first header called name (case-insensitive), or NULL. */
const char *httpc_header(const struct httpc_resp *r, const char *name);
/* How many headers are called name. */
size_t httpc_header_count(const struct httpc_resp *r, const char *name);
/* True when Content-Type's media type (before any ';') equals type, case-insensitively. */
bool httpc_content_type_is(const struct httpc_resp *r, const char *type);
/* Frees what a response holds and zeroes it. Idempotent; accepts a zeroed resp. */
void httpc_resp_fini(struct httpc_resp *r);

/*
 * Raw mode, for malformed-HTTP tests: connects to 127.0.0.1:port, sends n bytes as they are
 * (stopping quietly if the peer resets), optionally half-closes (shutdown SHUT_WR), then reads
 * everything until the peer closes or the deadline passes, appending to *out (buf_init'ed by the
 * caller). Returns 0 when the peer closed (EOF or reset), AGENT_E_TIMEOUT when it was still open
 * at the deadline (*out holds what arrived), or -errno if the connect failed.
 */
int httpc_raw(uint16_t port, const void *data, size_t n, bool half_close, int timeout_ms,
              struct buf *out);

/*
 * Parses the first response in data[0..n) as if the connection had then closed (for raw-mode
 * output). head_only_method: "HEAD" if the request was a HEAD, else NULL. Returns 0,
 * AGENT_E_PROTO, AGENT_E_CLOSED (incomplete) or AGENT_E_TOOBIG; *consumed gets the bytes used.
 */
int httpc_parse(const void *data, size_t n, const char *head_only_method, struct httpc_resp *resp,
                size_t *consumed);

#endif
