/* SPDX-License-Identifier: MIT */
/*
 * TLS over memory BIOs (tls/tls_bio.h): a server and a client wired back to back in memory, no
 * socket: the handshake runs by moving each side's pending ciphertext to the other, plaintext
 * crosses both ways, close_notify reads as AGENT_E_CLOSED, bytes that are not TLS fail the
 * handshake with a reason, and a client that does not trust the server's certificate fails too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "tls_bio.h"

struct pair {
    SSL_CTX *server_ctx;
    SSL_CTX *client_ctx;
    struct tls_bio server;
    struct tls_bio client;
};

/* A server context with a fresh P-256 key and a self-signed certificate for "localhost"; the
 * certificate is returned (owned by the caller) so a client can trust it. */
static SSL_CTX *server_ctx(X509 **cert_out)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *cert = X509_new();
    assert_non_null(key);
    assert_non_null(cert);
    assert_int_equal(X509_set_version(cert, 2), 1);
    assert_int_equal(ASN1_INTEGER_set(X509_get_serialNumber(cert), 1), 1);
    X509_gmtime_adj(X509_getm_notBefore(cert), -60);
    X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
    X509_NAME *name = X509_get_subject_name(cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1,
                               0);
    assert_int_equal(X509_set_issuer_name(cert, name), 1);
    assert_int_equal(X509_set_pubkey(cert, key), 1);
    assert_true(X509_sign(cert, key, EVP_sha256()) > 0);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(ctx);
    assert_int_equal(SSL_CTX_use_certificate(ctx, cert), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, key), 1);
    EVP_PKEY_free(key);
    *cert_out = cert;
    return ctx;
}

/* A client context that trusts `trust` (NULL: nothing) and verifies the peer. */
static SSL_CTX *client_ctx(X509 *trust)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(ctx);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (trust != NULL) {
        assert_int_equal(X509_STORE_add_cert(SSL_CTX_get_cert_store(ctx), trust), 1);
    }
    return ctx;
}

static void pair_open(struct pair *p, bool trusted)
{
    X509 *cert = NULL;
    p->server_ctx = server_ctx(&cert);
    p->client_ctx = client_ctx(trusted ? cert : NULL);
    X509_free(cert);
    assert_int_equal(tls_bio_init(&p->server, p->server_ctx, true), 0);
    assert_int_equal(tls_bio_init(&p->client, p->client_ctx, false), 0);
}

static void pair_close(struct pair *p)
{
    tls_bio_fini(&p->server);
    tls_bio_fini(&p->client);
    tls_bio_fini(&p->client); /* twice: harmless */
    SSL_CTX_free(p->server_ctx);
    SSL_CTX_free(p->client_ctx);
}

/* Moves what `from` has pending to `to`; the number of bytes moved. */
static size_t move(struct tls_bio *from, struct tls_bio *to)
{
    size_t n = tls_bio_pending(from);
    if (n == 0) {
        return 0;
    }
    uint8_t *tmp = malloc(n);
    assert_non_null(tmp);
    assert_int_equal(tls_bio_take_to(from, tmp, n), 0);
    assert_int_equal(tls_bio_pending(from), 0);
    assert_int_equal(tls_bio_feed(to, tmp, n), 0);
    free(tmp);
    return n;
}

/* Runs both handshakes to their end (or the first failure): the client's result. */
static int handshake(struct pair *p)
{
    int crc = 0, src = 0;
    for (int round = 0; round < 10; round++) {
        crc = tls_bio_handshake(&p->client);
        move(&p->client, &p->server);
        src = tls_bio_handshake(&p->server);
        move(&p->server, &p->client);
        if (crc < 0 || src < 0 || (crc == 1 && src == 1)) {
            break;
        }
    }
    return crc < 0 ? crc : src < 0 ? src : crc;
}

static void test_exchange(void **state)
{
    (void)state;
    struct pair p;
    pair_open(&p, true);
    assert_false(tls_bio_handshake_done(&p.client));
    /* before anything is fed, the client's first flight is pending and the server needs more */
    assert_int_equal(tls_bio_handshake(&p.client), 0);
    assert_true(tls_bio_pending(&p.client) > 0);
    size_t dummy = 0;
    uint8_t none[8];
    assert_int_equal(tls_bio_read(&p.server, none, sizeof(none), &dummy), 0);
    assert_int_equal(dummy, 0);
    assert_int_equal(handshake(&p), 1);
    assert_true(tls_bio_handshake_done(&p.client));
    assert_true(tls_bio_handshake_done(&p.server));

    const char msg[] = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
    size_t done = 0;
    assert_int_equal(tls_bio_write(&p.client, msg, sizeof(msg) - 1, &done), 0);
    assert_int_equal(done, sizeof(msg) - 1);
    struct buf wire;
    buf_init(&wire, 0);
    assert_int_equal(tls_bio_take(&p.client, &wire), 0);
    assert_true(buf_size(&wire) > sizeof(msg)); /* a record: header and tag around the text */
    assert_int_equal(tls_bio_pending(&p.client), 0);
    /* fed in two pieces, the server reads the whole text once the record is complete */
    assert_int_equal(tls_bio_feed(&p.server, buf_data(&wire), 3), 0);
    assert_int_equal(tls_bio_fed_pending(&p.server), 3);
    char got[128];
    size_t n = 0;
    assert_int_equal(tls_bio_read(&p.server, got, sizeof(got), &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(tls_bio_feed(&p.server, buf_data(&wire) + 3, buf_size(&wire) - 3), 0);
    size_t total = 0;
    while (total < sizeof(msg) - 1) {
        assert_int_equal(tls_bio_read(&p.server, got + total, sizeof(got) - total, &n), 0);
        assert_true(n > 0);
        total += n;
    }
    assert_memory_equal(got, msg, sizeof(msg) - 1);
    move(&p.server, &p.client); /* TLS 1.3 tickets the server may have sent */

    /* the other way, and then the server's close_notify */
    assert_int_equal(tls_bio_write(&p.server, "ok", 2, &done), 0);
    assert_int_equal(SSL_shutdown(p.server.ssl), 0);
    move(&p.server, &p.client);
    assert_int_equal(tls_bio_read(&p.client, got, sizeof(got), &n), 0);
    assert_int_equal(n, 2);
    assert_memory_equal(got, "ok", 2);
    assert_int_equal(tls_bio_read(&p.client, got, sizeof(got), &n), AGENT_E_CLOSED);
    buf_fini(&wire);
    pair_close(&p);
}

static void test_failures(void **state)
{
    (void)state;
    struct pair p;
    /* plain text to a server: the handshake fails and OpenSSL's reason stays for the caller */
    pair_open(&p, true);
    const char plain[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    assert_int_equal(tls_bio_feed(&p.server, plain, sizeof(plain) - 1), 0);
    assert_int_equal(tls_bio_handshake(&p.server), AGENT_E_PROTO);
    char why[160];
    tls_bio_reason(why, sizeof(why), "none");
    assert_string_not_equal(why, "none");
    tls_bio_reason(why, sizeof(why), "none"); /* taken: the queue is empty now */
    assert_string_equal(why, "none");
    pair_close(&p);

    /* a client that does not trust the certificate */
    pair_open(&p, false);
    assert_int_equal(handshake(&p), AGENT_E_PROTO);
    assert_int_not_equal(SSL_get_verify_result(p.client.ssl), X509_V_OK);
    tls_bio_reason(why, sizeof(why), "none");
    assert_string_not_equal(why, "none");
    pair_close(&p);

    /* a zeroed tls_bio (an init that failed): fini is harmless */
    struct tls_bio zero;
    memset(&zero, 0, sizeof(zero));
    tls_bio_fini(&zero);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exchange),
        cmocka_unit_test(test_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
