/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_TLS_H
#define AGENT_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * TLS for the HTTP server, as a pure state machine over OpenSSL memory BIOs: no sockets, no
 * libuv, no threads (docs/style.md §1: this file never includes <uv.h>). The connection code feeds
 * the ciphertext it read from the socket, reads plaintext back, hands plaintext to encrypt, and
 * writes whatever ciphertext is pending to the socket with its own write queue. OpenSSL never
 * touches a file descriptor, so a slow or silent client can only cost memory the caller bounds.
 *
 * Policy (fixed, not configurable): TLS 1.2 minimum, 1.3 allowed; ECDHE + AEAD ciphers for 1.2
 * with the server's order preferred; no compression, no renegotiation, no session resumption
 * (no cache, no tickets: nothing to rotate, nothing kept between connections); ALPN
 * "http/1.1" when the client offers it (a client offering only other protocols gets no ALPN
 * answer and is served HTTP/1.1, as nginx does).
 *
 * Errors: 0 or a negative code from common/err.h (AGENT_E_PROTO for a TLS failure, with the
 * reason in http_tls_error) or -ENOMEM (UV_ENOMEM). Key material never appears in any message.
 */

struct http_tls_ctx;
struct http_tls;

/* What went wrong in http_tls_ctx_new, so the caller can name the setting at fault. */
enum http_tls_problem {
    HTTP_TLS_OK = 0,
    HTTP_TLS_CERT,          /* certificate file missing, unreadable, or no PEM certificate */
    HTTP_TLS_KEY,           /* key file missing, unreadable, or no PEM private key */
    HTTP_TLS_KEY_ENCRYPTED, /* the key is encrypted and no password was given */
    HTTP_TLS_PASSWORD,      /* the key is encrypted and the password does not open it */
    HTTP_TLS_MISMATCH,      /* the key does not belong to the (leaf) certificate */
    HTTP_TLS_INTERNAL       /* OpenSSL could not set up a context (out of memory, …) */
};

/* Report of http_tls_ctx_new: the problem on failure, facts about the certificate on success
 * (validity is reported, not enforced: the caller decides what an expired certificate means). */
struct http_tls_info {
    enum http_tls_problem problem;
    char detail[320];   /* one line for the operator: file name and OpenSSL's reason */
    char subject[256];  /* leaf certificate subject, RFC 2253 form */
    char not_after[40]; /* e.g. "Jan  1 00:00:00 2030 GMT" */
    char not_before[40];
    bool expired;       /* notAfter is in the past */
    bool not_yet_valid; /* notBefore is in the future */
    int days_left;      /* whole days until notAfter (negative once expired) */
    size_t chain_certs; /* intermediate certificates sent after the leaf */
};

/*
 * Creates a server context from a PEM certificate file (leaf first, then any intermediates) and
 * a PEM private key file (PKCS#8 or traditional, RSA or EC; encrypted keys need `password`).
 * key_path NULL or "" looks for the key in cert_path. info (required) is always filled.
 * Returns 0 (*out set), AGENT_E_INVAL (info->problem says why) or -ENOMEM (UV_ENOMEM).
 */
int http_tls_ctx_new(const char *cert_path, const char *key_path, const char *password,
                     struct http_tls_ctx **out, struct http_tls_info *info);
/* Frees ctx (NULL is fine). Connections made from it keep their own reference. */
void http_tls_ctx_free(struct http_tls_ctx *ctx);

/* A server-side connection in accept state. Returns 0, -ENOMEM (UV_ENOMEM). */
int http_tls_new(struct http_tls_ctx *ctx, struct http_tls **out);
/* Frees t (NULL is fine); no close_notify is sent (see http_tls_close_notify). */
void http_tls_free(struct http_tls *t);

/* Queues ciphertext read from the socket (copied). Returns 0 or -ENOMEM (UV_ENOMEM). */
int http_tls_feed(struct http_tls *t, const void *data, size_t len);
/* Bytes of fed ciphertext not yet consumed by OpenSSL (for caps on buffered input). */
size_t http_tls_fed_pending(const struct http_tls *t);
/*
 * Runs the handshake as far as the fed bytes allow, then decrypts up to cap bytes into buf.
 * Returns 0 with *got = bytes decrypted (0: more ciphertext is needed), AGENT_E_CLOSED when the
 * peer sent close_notify, or AGENT_E_PROTO (handshake or record failure: the connection is
 * dead; http_tls_error says why, and an alert may be pending to send). After every call the
 * caller must send http_tls_take's bytes: the handshake writes from inside this call.
 */
int http_tls_read(struct http_tls *t, void *buf, size_t cap, size_t *got);
/*
 * Encrypts len plaintext bytes (in records of at most 16 KiB) and appends the ciphertext, with
 * any that was pending before it, to out. Only after the handshake (AGENT_E_INVAL before).
 * Returns 0, AGENT_E_PROTO or a buf error; on error out may hold part of the records.
 */
int http_tls_write(struct http_tls *t, const void *data, size_t len, struct buf *out);
/* One piece of plaintext for http_tls_writev. */
struct http_tls_iov {
    const void *p;
    size_t n;
};
/* http_tls_write for several pieces, packed into full records (a chunk-size line, its data and
 * the CRLF after it go out as records of 16 KiB, not as three records). Same results. */
int http_tls_writev(struct http_tls *t, const struct http_tls_iov *iov, size_t niov,
                    struct buf *out);
/* Ciphertext waiting to be sent (handshake messages, alerts, close_notify). */
size_t http_tls_pending(const struct http_tls *t);
/* Appends every pending ciphertext byte to out. Returns 0 or a buf error. */
int http_tls_take(struct http_tls *t, struct buf *out);
/* Queues a close_notify alert (once; only after a completed handshake). */
void http_tls_close_notify(struct http_tls *t);

bool http_tls_handshake_done(const struct http_tls *t);
/* The last failure's reason (static text or a short copy), "" if none. */
const char *http_tls_error(const struct http_tls *t);
/* True when the failure was a plain-HTTP request sent to the TLS port. */
bool http_tls_saw_plain_http(const struct http_tls *t);
/* Protocol and cipher after the handshake, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384"; "" before. */
const char *http_tls_describe(const struct http_tls *t, char *out, size_t outlen);

#endif
