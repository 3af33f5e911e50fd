/* SPDX-License-Identifier: MIT */
/* One TLS connection over memory BIOs; see tls_bio.h. */
#include "tls_bio.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>

#include "err.h"

int tls_bio_init(struct tls_bio *t, SSL_CTX *ctx, bool server)
{
    memset(t, 0, sizeof(*t));
    ERR_clear_error();
    SSL *ssl = SSL_new(ctx);
    BIO *rbio = BIO_new(BIO_s_mem());
    BIO *wbio = BIO_new(BIO_s_mem());
    if (ssl == NULL || rbio == NULL || wbio == NULL) {
        SSL_free(ssl);
        BIO_free(rbio);
        BIO_free(wbio);
        ERR_clear_error();
        return -ENOMEM;
    }
    /* An empty read BIO means "retry later", not end of file. */
    BIO_set_mem_eof_return(rbio, -1);
    BIO_set_mem_eof_return(wbio, -1);
    SSL_set_bio(ssl, rbio, wbio); /* ssl owns both from here */
    if (server) {
        SSL_set_accept_state(ssl);
    } else {
        SSL_set_connect_state(ssl);
    }
    t->ssl = ssl;
    t->rbio = rbio;
    t->wbio = wbio;
    return 0;
}

void tls_bio_fini(struct tls_bio *t)
{
    SSL_free(t->ssl); /* frees both BIOs */
    memset(t, 0, sizeof(*t));
}

int tls_bio_feed(struct tls_bio *t, const void *p, size_t n)
{
    const char *c = p;
    while (n > 0) {
        int w = BIO_write(t->rbio, c, n > INT_MAX ? INT_MAX : (int)n);
        if (w <= 0) {
            ERR_clear_error();
            return -ENOMEM;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

size_t tls_bio_fed_pending(const struct tls_bio *t)
{
    return BIO_ctrl_pending(t->rbio);
}

size_t tls_bio_pending(const struct tls_bio *t)
{
    return BIO_ctrl_pending(t->wbio);
}

int tls_bio_take_to(struct tls_bio *t, void *dst, size_t n)
{
    /* BIO_read on a memory BIO returns everything asked for, up to what is pending. */
    char *d = dst;
    while (n > 0) {
        int r = BIO_read(t->wbio, d, n > INT_MAX ? INT_MAX : (int)n);
        if (r <= 0) {
            ERR_clear_error();
            return AGENT_E_PROTO;
        }
        d += r;
        n -= (size_t)r;
    }
    return 0;
}

int tls_bio_take(struct tls_bio *t, struct buf *out)
{
    size_t n = tls_bio_pending(t);
    if (n == 0) {
        return 0;
    }
    int rc = buf_reserve(out, n);
    if (rc != 0) {
        return rc;
    }
    rc = tls_bio_take_to(t, out->p + out->len, n);
    if (rc == 0) {
        out->len += n;
    }
    return rc;
}

/* After an SSL_* call returned r <= 0: 0 for "later" (want read / want write: with memory BIOs
 * both only mean more bytes must move), AGENT_E_CLOSED for close_notify, else AGENT_E_PROTO
 * (the reason stays queued). */
static int outcome(struct tls_bio *t, int r)
{
    switch (SSL_get_error(t->ssl, r)) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        ERR_clear_error();
        return 0;
    case SSL_ERROR_ZERO_RETURN:
        ERR_clear_error();
        return AGENT_E_CLOSED;
    default:
        return AGENT_E_PROTO;
    }
}

int tls_bio_handshake(struct tls_bio *t)
{
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        return 1;
    }
    int rc = outcome(t, r);
    return rc == AGENT_E_CLOSED ? AGENT_E_PROTO : rc;
}

bool tls_bio_handshake_done(const struct tls_bio *t)
{
    return SSL_is_init_finished(t->ssl) != 0;
}

int tls_bio_read(struct tls_bio *t, void *buf, size_t cap, size_t *got)
{
    *got = 0;
    if (cap == 0) {
        return 0;
    }
    ERR_clear_error();
    int r = SSL_read(t->ssl, buf, cap > INT_MAX ? INT_MAX : (int)cap);
    if (r > 0) {
        *got = (size_t)r;
        return 0;
    }
    return outcome(t, r);
}

int tls_bio_write(struct tls_bio *t, const void *p, size_t n, size_t *done)
{
    *done = 0;
    if (n == 0) {
        return 0;
    }
    ERR_clear_error();
    int w = SSL_write(t->ssl, p, n > INT_MAX ? INT_MAX : (int)n);
    if (w > 0) {
        *done = (size_t)w;
        return 0;
    }
    int rc = outcome(t, w);
    return rc == AGENT_E_CLOSED ? AGENT_E_PROTO : rc;
}

void tls_bio_reason(char *out, size_t outlen, const char *none)
{
    if (outlen == 0) {
        ERR_clear_error();
        return;
    }
    unsigned long e = ERR_peek_last_error();
    const char *reason = e != 0 ? ERR_reason_error_string(e) : NULL;
    if (e == 0) {
        snprintf(out, outlen, "%s", none);
    } else if (reason != NULL) {
        snprintf(out, outlen, "%s", reason);
    } else {
        ERR_error_string_n(e, out, outlen);
    }
    ERR_clear_error();
}
