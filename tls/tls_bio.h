/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TLS_BIO_H
#define AGENT_TLS_BIO_H

/*
 * One TLS connection over two OpenSSL memory BIOs: the piece dotmon's HTTPS server
 * (http/http_tls.c) and its egress client (egress/ehttp.c) share. The read BIO holds ciphertext
 * the caller read from its socket, the write BIO collects ciphertext for the socket; OpenSSL
 * never sees a descriptor and never blocks, so "want read" / "want write" only mean "later".
 * Pure: no libuv, no sockets, no threads, no allocation of its own besides OpenSSL's objects.
 *
 * The caller's loop: feed what the socket gave (tls_bio_feed), drive the handshake
 * (tls_bio_handshake; tls_bio_read does it too on a server), move plaintext (tls_bio_read,
 * tls_bio_write), and after each of those send what is pending (tls_bio_take, tls_bio_take_to):
 * the handshake, alerts and key updates write from inside any of these calls.
 *
 * OpenSSL's error queue is per thread and sticky: every call here that can fail clears it first.
 * After a failure (AGENT_E_PROTO) the queue keeps the reason until tls_bio_reason takes it; after
 * a success or a "later" it is empty.
 *
 * Ownership: struct tls_bio is embedded by its owner; tls_bio_init takes a reference on ctx (the
 * SSL holds it), tls_bio_fini frees the SSL and both BIOs.
 */

#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#include "buf.h"

struct tls_bio {
    SSL *ssl;  /* owned; for the role's own settings (SNI, verification, ALPN, descriptions) */
    BIO *rbio; /* owned by ssl (SSL_set_bio): ciphertext fed, not yet read by OpenSSL */
    BIO *wbio; /* owned by ssl: ciphertext for the socket */
};

/* A connection of ctx in accept (server) or connect (client) state. 0, or -ENOMEM with t zeroed
 * (tls_bio_fini is still fine on it). */
int tls_bio_init(struct tls_bio *t, SSL_CTX *ctx, bool server);
/* Frees t's SSL and BIOs (no close_notify is sent); t zeroed. Accepts a zeroed t. */
void tls_bio_fini(struct tls_bio *t);

/* Queues ciphertext read from the socket (copied). 0 or -ENOMEM. */
int tls_bio_feed(struct tls_bio *t, const void *p, size_t n);
/* Fed ciphertext not yet consumed by OpenSSL, and ciphertext waiting to be sent. */
size_t tls_bio_fed_pending(const struct tls_bio *t);
size_t tls_bio_pending(const struct tls_bio *t);
/* Appends every pending ciphertext byte to out: 0, a buf error, or AGENT_E_PROTO. */
int tls_bio_take(struct tls_bio *t, struct buf *out);
/* Moves exactly n pending bytes (n <= tls_bio_pending) to dst: 0 or AGENT_E_PROTO. */
int tls_bio_take_to(struct tls_bio *t, void *dst, size_t n);

/* Runs the handshake as far as the fed bytes allow: 1 done, 0 more ciphertext needed (send what
 * is pending), AGENT_E_PROTO failed (the reason in the queue; an alert may be pending). */
int tls_bio_handshake(struct tls_bio *t);
bool tls_bio_handshake_done(const struct tls_bio *t);
/*
 * Decrypts up to cap bytes (running the handshake first if it has not finished): 0 with *got
 * (0: more ciphertext needed), AGENT_E_CLOSED when the peer sent close_notify, AGENT_E_PROTO.
 */
int tls_bio_read(struct tls_bio *t, void *buf, size_t cap, size_t *got);
/* Encrypts up to n bytes (n <= INT_MAX): 0 with *done (0: the peer's bytes are needed first, a
 * key update or renegotiation), AGENT_E_PROTO. */
int tls_bio_write(struct tls_bio *t, const void *p, size_t n, size_t *done);

/* The reason of the most recent queued OpenSSL error, or `none` when the queue is empty; clears
 * the queue. */
void tls_bio_reason(char *out, size_t outlen, const char *none);

#endif
