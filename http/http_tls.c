/* SPDX-License-Identifier: MIT */
#include "http_tls.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "err.h"
#include "tls_bio.h"

/*
 * OpenSSL state machine for one side of the HTTP server: contexts loaded from PEM files, and
 * connections over memory BIOs (tls/tls_bio.h, the piece the egress client shares): OpenSSL never
 * blocks and never sees a descriptor, and all I/O stays with the libuv glue in http_conn.c and
 * http_resp.c.
 *
 * OpenSSL's error queue is per thread and sticky; every SSL_* call that can fail is preceded by
 * ERR_clear_error (SSL_get_error reads the queue) and followed by collecting and clearing it, so
 * one connection's failure never leaks into the next call.
 */

/* One record's worth of plaintext per SSL_write (TLS's maximum fragment). */
#define TLS_RECORD_MAX 16384

/* TLS 1.2 suites: forward secrecy and AEAD only (Mozilla "intermediate" minus DHE, which would
 * need parameters). TLS 1.3 keeps OpenSSL's defaults (all AEAD). */
static const char tls12_ciphers[] = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

struct http_tls_ctx {
    SSL_CTX *ssl_ctx;
};

struct http_tls {
    struct tls_bio b;
    bool failed;
    bool plain_http;
    bool shutdown_sent;
    char err[160];
};

/* ---- errors ---- */

/* Reason of the most recent queued OpenSSL error ("" if none); clears the queue. */
static void take_ssl_error(char *out, size_t outlen)
{
    tls_bio_reason(out, outlen, "");
}

static void info_fail(struct http_tls_info *info, enum http_tls_problem p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void info_fail(struct http_tls_info *info, enum http_tls_problem p, const char *fmt, ...)
{
    char ssl_reason[160];
    take_ssl_error(ssl_reason, sizeof(ssl_reason));
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(info->detail, sizeof(info->detail), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(info->detail) && ssl_reason[0] != '\0') {
        snprintf(info->detail + n, sizeof(info->detail) - (size_t)n, " (%s)", ssl_reason);
    }
    info->problem = p;
}

/* ---- context ---- */

/*
 * ALPN: pick "http/1.1" if the client lists it. Otherwise answer without ALPN rather than with a
 * fatal alert: the client then speaks HTTP/1.1 or gives up by itself.
 */
static int ctx_on_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char http11[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    unsigned char sellen = 0;
    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, &sellen, http11, sizeof(http11) - 1, in, inlen) ==
        OPENSSL_NPN_NEGOTIATED) {
        *out = sel;
        *outlen = sellen;
        return SSL_TLSEXT_ERR_OK;
    }
    return SSL_TLSEXT_ERR_NOACK;
}

struct pw_state {
    const char *password;
    bool asked;
};

/* PEM passphrase callback: hands over the configured password, or fails when there is none. */
static int key_on_password(char *buf, int size, int rwflag, void *u)
{
    struct pw_state *pw = u;
    (void)rwflag;
    pw->asked = true;
    if (pw->password == NULL || size <= 0) {
        return -1;
    }
    size_t n = strlen(pw->password);
    if (n > (size_t)size) {
        return -1;
    }
    memcpy(buf, pw->password, n);
    return (int)n;
}

/* Prints a name or a time through a memory BIO into out; "" on failure. */
static void print_name(const X509_NAME *name, char *out, size_t outlen)
{
    out[0] = '\0';
    BIO *b = BIO_new(BIO_s_mem());
    if (b == NULL) {
        return;
    }
    if (X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253) >= 0) {
        int n = BIO_read(b, out, (int)(outlen - 1));
        out[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

static void print_time(const ASN1_TIME *t, char *out, size_t outlen)
{
    out[0] = '\0';
    BIO *b = BIO_new(BIO_s_mem());
    if (b == NULL) {
        return;
    }
    if (ASN1_TIME_print(b, t) == 1) {
        int n = BIO_read(b, out, (int)(outlen - 1));
        out[n > 0 ? n : 0] = '\0';
    }
    BIO_free(b);
}

/* Fills the certificate facts of info from the leaf. */
static void describe_leaf(SSL_CTX *sc, struct http_tls_info *info)
{
    X509 *leaf = SSL_CTX_get0_certificate(sc);
    if (leaf == NULL) {
        return;
    }
    print_name(X509_get_subject_name(leaf), info->subject, sizeof(info->subject));
    const ASN1_TIME *nb = X509_get0_notBefore(leaf);
    const ASN1_TIME *na = X509_get0_notAfter(leaf);
    print_time(nb, info->not_before, sizeof(info->not_before));
    print_time(na, info->not_after, sizeof(info->not_after));
    info->not_yet_valid = X509_cmp_current_time(nb) > 0;
    info->expired = X509_cmp_current_time(na) < 0;
    int days = 0, secs = 0;
    if (ASN1_TIME_diff(&days, &secs, NULL, na) == 1) {
        info->days_left = days;
    }
    STACK_OF(X509) *chain = NULL;
    if (SSL_CTX_get0_chain_certs(sc, &chain) == 1 && chain != NULL) {
        info->chain_certs = (size_t)sk_X509_num(chain);
    }
    ERR_clear_error();
}

/* Opens path for reading, with errno's reason on failure (fopen's message beats OpenSSL's). */
static bool readable(const char *path, char *why, size_t whylen)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        snprintf(why, whylen, "%s", strerror(errno));
        return false;
    }
    fclose(f);
    return true;
}

/* Whether the PEM file announces an encrypted key (PKCS#8 or traditional "Proc-Type"). Only
 * used to word the error message, so a read failure just says no. */
static bool file_mentions_encrypted(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    char line[256];
    bool found = false;
    while (!found && fgets(line, sizeof(line), f) != NULL) {
        found = strstr(line, "ENCRYPTED") != NULL;
    }
    fclose(f);
    return found;
}

static SSL_CTX *new_ssl_ctx(struct http_tls_info *info)
{
    SSL_CTX *sc = SSL_CTX_new(TLS_server_method());
    if (sc == NULL) {
        info_fail(info, HTTP_TLS_INTERNAL, "cannot create an OpenSSL context");
        return NULL;
    }
    if (SSL_CTX_set_min_proto_version(sc, TLS1_2_VERSION) != 1 ||
        SSL_CTX_set_cipher_list(sc, tls12_ciphers) != 1) {
        info_fail(info, HTTP_TLS_INTERNAL, "cannot set the TLS protocol and cipher policy");
        SSL_CTX_free(sc);
        return NULL;
    }
    SSL_CTX_set_options(sc, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                                SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_NO_TICKET);
    /* Stateless: no session cache, no TLS 1.3 tickets. */
    SSL_CTX_set_session_cache_mode(sc, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(sc, 0);
    /* Idle keep-alive connections give their 16-34 KiB record buffers back. */
    SSL_CTX_set_mode(sc, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_alpn_select_cb(sc, ctx_on_alpn, NULL);
    return sc;
}

static int load_key(SSL_CTX *sc, const char *key_path, bool same_file, const char *password,
                    struct http_tls_info *info)
{
    char why[160];
    if (!readable(key_path, why, sizeof(why))) {
        info_fail(info, HTTP_TLS_KEY, "cannot read the private key %s: %s", key_path, why);
        return AGENT_E_INVAL;
    }
    BIO *b = BIO_new_file(key_path, "r");
    if (b == NULL) {
        info_fail(info, HTTP_TLS_KEY, "cannot read the private key %s", key_path);
        return AGENT_E_INVAL;
    }
    struct pw_state pw = {.password = password, .asked = false};
    ERR_clear_error();
    EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, key_on_password, &pw);
    BIO_free(b);
    if (key == NULL) {
        bool encrypted = pw.asked || file_mentions_encrypted(key_path);
        if (encrypted || same_file) {
            ERR_clear_error(); /* OpenSSL's reasons here ("pkcs12 cipherfinal error") only confuse
                                */
        }
        if (encrypted && password == NULL) {
            info_fail(info, HTTP_TLS_KEY_ENCRYPTED,
                      "the private key %s is encrypted and no "
                      "password is configured",
                      key_path);
        } else if (encrypted) {
            info_fail(info, HTTP_TLS_PASSWORD, "the password does not decrypt the private key %s",
                      key_path);
        } else if (same_file) {
            info_fail(info, HTTP_TLS_KEY, "no private key is configured and %s holds none",
                      key_path);
        } else {
            info_fail(info, HTTP_TLS_KEY, "no PEM private key in %s", key_path);
        }
        return AGENT_E_INVAL;
    }
    int rc = 0;
    X509 *leaf = SSL_CTX_get0_certificate(sc);
    ERR_clear_error();
    if (leaf == NULL || X509_check_private_key(leaf, key) != 1) {
        info_fail(info, HTTP_TLS_MISMATCH, "the private key %s does not belong to the certificate",
                  key_path);
        rc = AGENT_E_INVAL;
    } else if (SSL_CTX_use_PrivateKey(sc, key) != 1 || SSL_CTX_check_private_key(sc) != 1) {
        info_fail(info, HTTP_TLS_MISMATCH, "OpenSSL refuses the private key %s", key_path);
        rc = AGENT_E_INVAL;
    }
    EVP_PKEY_free(key); /* the context holds its own reference */
    return rc;
}

int http_tls_ctx_new(const char *cert_path, const char *key_path, const char *password,
                     struct http_tls_ctx **out, struct http_tls_info *info)
{
    memset(info, 0, sizeof(*info));
    if (out == NULL || cert_path == NULL || *cert_path == '\0') {
        info->problem = HTTP_TLS_CERT;
        snprintf(info->detail, sizeof(info->detail), "no certificate file is configured");
        return AGENT_E_INVAL;
    }
    bool same_file = key_path == NULL || *key_path == '\0';
    if (same_file) {
        key_path = cert_path;
    }
    if (password != NULL && *password == '\0') {
        password = NULL;
    }
    ERR_clear_error();
    int rc = AGENT_E_INVAL;
    struct http_tls_ctx *ctx = calloc(1, sizeof(*ctx));
    SSL_CTX *sc = NULL;
    if (ctx == NULL) {
        info_fail(info, HTTP_TLS_INTERNAL, "out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    sc = new_ssl_ctx(info);
    if (sc == NULL) {
        goto fail;
    }
    char why[160];
    if (!readable(cert_path, why, sizeof(why))) {
        info_fail(info, HTTP_TLS_CERT, "cannot read the certificate %s: %s", cert_path, why);
        goto fail;
    }
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(sc, cert_path) != 1) {
        info_fail(info, HTTP_TLS_CERT, "no usable PEM certificate in %s", cert_path);
        goto fail;
    }
    if (load_key(sc, key_path, same_file, password, info) != 0) {
        goto fail;
    }
    describe_leaf(sc, info);
    ctx->ssl_ctx = sc;
    *out = ctx;
    return 0;
fail:
    SSL_CTX_free(sc);
    free(ctx);
    ERR_clear_error();
    return rc;
}

void http_tls_ctx_free(struct http_tls_ctx *ctx)
{
    if (ctx == NULL) {
        return;
    }
    SSL_CTX_free(ctx->ssl_ctx);
    free(ctx);
}

/* ---- connections ---- */

int http_tls_new(struct http_tls_ctx *ctx, struct http_tls **out)
{
    struct http_tls *t = calloc(1, sizeof(*t));
    if (t == NULL || tls_bio_init(&t->b, ctx->ssl_ctx, true) != 0) {
        free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

void http_tls_free(struct http_tls *t)
{
    if (t == NULL) {
        return;
    }
    tls_bio_fini(&t->b);
    free(t);
}

int http_tls_feed(struct http_tls *t, const void *data, size_t len)
{
    return tls_bio_feed(&t->b, data, len);
}

size_t http_tls_fed_pending(const struct http_tls *t)
{
    return tls_bio_fed_pending(&t->b);
}

/* Records a fatal failure of t with OpenSSL's reason (or `what` when the queue is empty). */
static int conn_failed(struct http_tls *t, const char *what)
{
    unsigned long e = ERR_peek_last_error();
    t->failed = true;
    t->plain_http = ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_HTTP_REQUEST;
    take_ssl_error(t->err, sizeof(t->err));
    if (t->err[0] == '\0') {
        snprintf(t->err, sizeof(t->err), "%s", what);
    }
    return AGENT_E_PROTO;
}

int http_tls_read(struct http_tls *t, void *buf, size_t cap, size_t *got)
{
    *got = 0;
    if (t->failed) {
        return AGENT_E_PROTO;
    }
    if (cap == 0) {
        return 0;
    }
    int rc = tls_bio_read(&t->b, buf, cap, got);
    if (rc == AGENT_E_PROTO) {
        return conn_failed(t, tls_bio_handshake_done(&t->b) ? "TLS record error"
                                                            : "TLS handshake failed");
    }
    return rc;
}

int http_tls_take(struct http_tls *t, struct buf *out)
{
    return tls_bio_take(&t->b, out);
}

/* Encrypts one record's worth (n <= TLS_RECORD_MAX) and moves it to out at once, so the write
 * BIO never holds more than one record. */
static int write_record(struct http_tls *t, const void *p, size_t n, struct buf *out)
{
    size_t done = 0;
    if (tls_bio_write(&t->b, p, n, &done) != 0 || done != n) {
        return conn_failed(t, "TLS write failed");
    }
    return http_tls_take(t, out);
}

int http_tls_writev(struct http_tls *t, const struct http_tls_iov *iov, size_t niov,
                    struct buf *out)
{
    if (t->failed) {
        return AGENT_E_PROTO;
    }
    if (!tls_bio_handshake_done(&t->b)) {
        return AGENT_E_INVAL;
    }
    /* Small pieces are gathered here; a piece with a full record left goes out without a copy. */
    unsigned char stage[TLS_RECORD_MAX];
    size_t staged = 0;
    int rc = http_tls_take(t, out); /* keep the order of earlier records */
    for (size_t i = 0; rc == 0 && i < niov; i++) {
        const unsigned char *p = iov[i].p;
        size_t n = iov[i].n;
        while (rc == 0 && n > 0) {
            if (staged == 0 && n >= TLS_RECORD_MAX) {
                rc = write_record(t, p, TLS_RECORD_MAX, out);
                p += TLS_RECORD_MAX;
                n -= TLS_RECORD_MAX;
                continue;
            }
            size_t k = n < TLS_RECORD_MAX - staged ? n : TLS_RECORD_MAX - staged;
            memcpy(stage + staged, p, k);
            staged += k;
            p += k;
            n -= k;
            if (staged == TLS_RECORD_MAX) {
                rc = write_record(t, stage, staged, out);
                staged = 0;
            }
        }
    }
    if (rc == 0 && staged > 0) {
        rc = write_record(t, stage, staged, out);
    }
    return rc;
}

int http_tls_write(struct http_tls *t, const void *data, size_t len, struct buf *out)
{
    struct http_tls_iov iov = {.p = data, .n = len};
    return http_tls_writev(t, &iov, 1, out);
}

size_t http_tls_pending(const struct http_tls *t)
{
    return tls_bio_pending(&t->b);
}

void http_tls_close_notify(struct http_tls *t)
{
    if (t->failed || t->shutdown_sent || !tls_bio_handshake_done(&t->b)) {
        return;
    }
    t->shutdown_sent = true;
    ERR_clear_error();
    (void)SSL_shutdown(t->b.ssl); /* 0: sent, peer's not seen yet; we do not wait for it */
    ERR_clear_error();
}

bool http_tls_handshake_done(const struct http_tls *t)
{
    return tls_bio_handshake_done(&t->b) != 0;
}

const char *http_tls_error(const struct http_tls *t)
{
    return t->err;
}

bool http_tls_saw_plain_http(const struct http_tls *t)
{
    return t->plain_http;
}

const char *http_tls_describe(const struct http_tls *t, char *out, size_t outlen)
{
    if (outlen == 0) {
        return "";
    }
    out[0] = '\0';
    if (tls_bio_handshake_done(&t->b)) {
        snprintf(out, outlen, "%s %s", SSL_get_version(t->b.ssl),
                 SSL_CIPHER_get_name(SSL_get_current_cipher(t->b.ssl)));
    }
    return out;
}
