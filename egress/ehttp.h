/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_EHTTP_H
#define DOTMON_EHTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/*
 * A minimal HTTP/1.1 client on the loop, for the egress stores: one request per connection
 * ("Connection: close"), the response read with llhttp in response mode, HTTPS through OpenSSL
 * memory BIOs (the socket stays with libuv). Nothing blocks: the name is resolved on libuv's
 * thread pool, the body is encrypted 64 KiB at a time as the socket drains.
 *
 * TLS policy: TLS 1.2 minimum; the peer's chain verified against CertificateAuthorityPath (a PEM
 * file or a hashed directory) or else the system's store; the name checked against the
 * certificate (SubjectAltName DNS or IP); SNI sent for names (not for addresses).
 *
 * Timeouts: the exchange fails with AGENT_E_TIMEOUT when idle_ms pass without progress
 * (resolution, connection, bytes read or written), or when total_ms (0: none) pass in all.
 */

struct ehttp_tls;
struct ehttp_conn;

/*
 * A client TLS context. ca_path: a PEM bundle file or a directory of hashed certificates, or
 * NULL for the system's default store. Returns 0, AGENT_E_INVAL (why says which file and what
 * OpenSSL thinks) or UV_ENOMEM. Connections keep their own reference: the context may be freed
 * while they run.
 */
int ehttp_tls_new(const char *ca_path, struct ehttp_tls **out, char *why, size_t whylen);
void ehttp_tls_free(struct ehttp_tls *t);

struct ehttp_header {
    const char *name;
    const char *value;
};

struct ehttp_request {
    const char *method;
    const char *host; /* to connect to: a DNS name or an IP address (IPv6 without brackets) */
    uint16_t port;
    struct ehttp_tls *tls;              /* NULL: plain HTTP */
    const char *target;                 /* origin-form request target, already encoded */
    const struct ehttp_header *headers; /* sent as given (Host included); copied at start */
    size_t nheaders;
    const uint8_t *body; /* borrowed until the done callback or ehttp_cancel */
    size_t body_len;     /* Content-Length is added for any body and for PUT and POST */
    uint64_t idle_ms;
    uint64_t total_ms;
    size_t max_body; /* cap on the response body (AGENT_E_TOOBIG past it) */
};

/* Views, valid during the done callback only. */
struct ehttp_response {
    int status;
    const struct ehttp_header *headers; /* names as received, in order */
    size_t nheaders;
    const uint8_t *body;
    size_t body_len;
};

/*
 * The exchange ended. err 0: resp is a complete response (any status). Otherwise resp is NULL and
 * err is a UV_E* code (resolution, connection, socket), AGENT_E_TIMEOUT, AGENT_E_CLOSED (the
 * peer closed before a complete response), AGENT_E_PROTO (malformed response or TLS failure),
 * AGENT_E_UNTRUSTED (the certificate did not verify), AGENT_E_TOOBIG; why says it in words.
 * The connection frees itself after the callback returns.
 */
typedef void (*ehttp_done_cb)(void *ud, int err, const struct ehttp_response *resp,
                              const char *why);

/*
 * Starts rq on loop. Returns 0 (cb will be called exactly once, never from inside this call,
 * unless ehttp_cancel comes first) or an error (AGENT_E_INVAL, UV_ENOMEM; nothing called).
 */
int ehttp_start(uv_loop_t *loop, const struct ehttp_request *rq, ehttp_done_cb cb, void *ud,
                struct ehttp_conn **out);
/* Stops the exchange: the callback will not be called, the body is no longer read once this
 * returns, and the connection frees itself on a later loop turn. Not from inside the callback. */
void ehttp_cancel(struct ehttp_conn *c);

/* The first header named name (ASCII case-insensitive), or NULL. */
const char *ehttp_response_header(const struct ehttp_response *r, const char *name);

#endif
