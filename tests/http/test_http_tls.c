/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "http_server.h"
#include "http_test_client.h"
#include "http_test_fixture.h"
#include "http_tls.h"
#include "log.h"

/*
 * HTTPS on the server's own loop (http_tls.c through http_conn.c): certificates and keys made
 * with the openssl CLI at start (RSA and EC), a blocking OpenSSL client on the fixture's client
 * thread. Covers the context loader's error reports, keep-alive and pipelining over one TLS
 * connection, a large streamed body (copying and owned writes) intact, protocol policy (TLS 1.1
 * refused, ALPN), and abuse: plain HTTP, silence, a stalled or aborted handshake, garbage.
 */

#define WATCHDOG_MS 30000
#define IO_MS       5000

#define STREAM_CHUNK ((size_t)64 * 1024)
#define STREAM_TOTAL ((size_t)32 * 1024 * 1024)
#define STREAM_HIGH  ((size_t)1024 * 1024)
#define STREAM_LOW   ((size_t)128 * 1024)

static char dir[64];
static char rsa_cert[128], rsa_key[128], ec_cert[128], ec_key[128], enc_key[128], enc_cert[128],
    combined[128], expired_cert[128], future_cert[128];
static const char password[] = "correct horse battery";

struct results {
    size_t max_pending;
    unsigned aborts;
    unsigned ends;
    unsigned write_errors;
    double client_ms; /* client-side duration of the measured part */
    double handshake_ms;
};

static uint8_t pattern_byte(size_t offset)
{
    return (uint8_t)(offset % 251u);
}

/* ---- files ---- */

static void run(const char *cmd)
{
    int rc = system(cmd);
    if (rc != 0) {
        fail_msg("command failed (%d): %s", rc, cmd);
    }
}

/* A self-signed certificate for key_path with validity shifted by the given days. */
static void make_cert_shifted(const char *key_path, const char *out, long from_days, long to_days)
{
    FILE *f = fopen(key_path, "r");
    assert_non_null(f);
    EVP_PKEY *k = PEM_read_PrivateKey(f, NULL, NULL, NULL);
    fclose(f);
    assert_non_null(k);
    X509 *x = X509_new();
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 7);
    X509_gmtime_adj(X509_getm_notBefore(x), from_days * 86400);
    X509_gmtime_adj(X509_getm_notAfter(x), to_days * 86400);
    X509_set_pubkey(x, k);
    X509_NAME *n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"shifted", -1, -1, 0);
    X509_set_issuer_name(x, n);
    assert_true(X509_sign(x, k, EVP_sha256()) > 0);
    f = fopen(out, "w");
    assert_non_null(f);
    assert_int_equal(PEM_write_X509(f, x), 1);
    fclose(f);
    X509_free(x);
    EVP_PKEY_free(k);
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/tlstestXXXXXX");
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    snprintf(rsa_cert, sizeof(rsa_cert), "%s/rsa.crt", dir);
    snprintf(rsa_key, sizeof(rsa_key), "%s/rsa.key", dir);
    snprintf(ec_cert, sizeof(ec_cert), "%s/ec.crt", dir);
    snprintf(ec_key, sizeof(ec_key), "%s/ec.key", dir);
    snprintf(enc_cert, sizeof(enc_cert), "%s/enc.crt", dir);
    snprintf(enc_key, sizeof(enc_key), "%s/enc.key", dir);
    snprintf(combined, sizeof(combined), "%s/combined.pem", dir);
    snprintf(expired_cert, sizeof(expired_cert), "%s/expired.crt", dir);
    snprintf(future_cert, sizeof(future_cert), "%s/future.crt", dir);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 2 -subj "
             "/CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null",
             rsa_key, rsa_cert);
    run(cmd);
    snprintf(cmd, sizeof(cmd),
             "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s "
             "-out %s -days 30 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2>/dev/null",
             ec_key, ec_cert);
    run(cmd);
    snprintf(cmd, sizeof(cmd),
             "openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -aes256 -pass "
             "'pass:%s' -out %s 2>/dev/null && openssl req -x509 -key %s -passin 'pass:%s' "
             "-out %s -days 30 -subj /CN=encrypted 2>/dev/null",
             password, enc_key, enc_key, password, enc_cert);
    run(cmd);
    snprintf(cmd, sizeof(cmd), "cat %s %s > %s", ec_cert, ec_key, combined);
    run(cmd);
    make_cert_shifted(rsa_key, expired_cert, -10, -1);
    make_cert_shifted(rsa_key, future_cert, 1, 10);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- context loading ---- */

static void expect_problem(const char *cert, const char *key, const char *pw,
                           enum http_tls_problem want)
{
    struct http_tls_ctx *ctx = NULL;
    struct http_tls_info info;
    int rc = http_tls_ctx_new(cert, key, pw, &ctx, &info);
    if (want == HTTP_TLS_OK) {
        if (rc != 0) {
            fail_msg("%s / %s: %s", cert, key ? key : "-", info.detail);
        }
        assert_non_null(ctx);
        http_tls_ctx_free(ctx);
        return;
    }
    assert_int_equal(rc, AGENT_E_INVAL);
    assert_null(ctx);
    if (info.problem != want) {
        fail_msg("%s / %s: problem %d, want %d (%s)", cert, key ? key : "-", (int)info.problem,
                 (int)want, info.detail);
    }
    assert_true(info.detail[0] != '\0');
    assert_null(strstr(info.detail, password)); /* never a secret in a message */
    print_message("    %s\n", info.detail);
}

static void test_http_tls_ctx_errors(void **state)
{
    (void)state;
    char missing[160];
    snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
    expect_problem(rsa_cert, rsa_key, NULL, HTTP_TLS_OK);
    expect_problem(ec_cert, ec_key, NULL, HTTP_TLS_OK);
    expect_problem(combined, NULL, NULL, HTTP_TLS_OK);        /* key inside the cert file */
    expect_problem(enc_cert, enc_key, password, HTTP_TLS_OK); /* encrypted key + password */
    expect_problem(missing, rsa_key, NULL, HTTP_TLS_CERT);
    expect_problem(rsa_key, rsa_key, NULL, HTTP_TLS_CERT); /* a key is no certificate */
    expect_problem(NULL, rsa_key, NULL, HTTP_TLS_CERT);
    expect_problem(rsa_cert, missing, NULL, HTTP_TLS_KEY);
    expect_problem(rsa_cert, rsa_cert, NULL, HTTP_TLS_KEY); /* a certificate is no key */
    expect_problem(rsa_cert, NULL, NULL, HTTP_TLS_KEY);     /* no key in the cert file */
    expect_problem(rsa_cert, ec_key, NULL, HTTP_TLS_MISMATCH);
    expect_problem(ec_cert, rsa_key, NULL, HTTP_TLS_MISMATCH);
    expect_problem(enc_cert, rsa_key, NULL, HTTP_TLS_MISMATCH);
    expect_problem(enc_cert, enc_key, NULL, HTTP_TLS_KEY_ENCRYPTED);
    expect_problem(enc_cert, enc_key, "wrong password", HTTP_TLS_PASSWORD);

    /* Validity is reported, not enforced. */
    struct http_tls_ctx *ctx = NULL;
    struct http_tls_info info;
    assert_int_equal(http_tls_ctx_new(expired_cert, rsa_key, NULL, &ctx, &info), 0);
    assert_true(info.expired);
    assert_false(info.not_yet_valid);
    assert_true(info.days_left < 0);
    assert_string_equal(info.subject, "CN=shifted");
    http_tls_ctx_free(ctx);
    assert_int_equal(http_tls_ctx_new(future_cert, rsa_key, NULL, &ctx, &info), 0);
    assert_true(info.not_yet_valid);
    assert_false(info.expired);
    http_tls_ctx_free(ctx);
    assert_int_equal(http_tls_ctx_new(rsa_cert, rsa_key, NULL, &ctx, &info), 0);
    assert_false(info.expired);
    assert_true(info.days_left >= 1 && info.days_left <= 2);
    http_tls_ctx_free(ctx);
    http_tls_ctx_free(NULL);
}

/* ---- server side ---- */

struct delayed {
    uv_timer_t timer;
    struct http_request *r;
};

static void delayed_on_close(uv_handle_t *h)
{
    free(h->data);
}

static void delayed_on_timer(uv_timer_t *t)
{
    struct delayed *d = t->data;
    if (d->r != NULL) {
        http_request_on_abort(d->r, NULL, NULL);
        char body[64];
        int n = snprintf(body, sizeof(body), "late %s", http_request_query(d->r));
        http_respond(d->r, 200, "text/plain", NULL, 0, body, (size_t)n);
    }
    uv_close((uv_handle_t *)&d->timer, delayed_on_close);
}

static void delayed_on_abort(void *ud, struct http_request *r)
{
    struct delayed *d = ud;
    (void)r;
    d->r = NULL;
}

struct streamer {
    struct hfx *fx;
    struct http_request *r;
    size_t sent;
    size_t total;
    unsigned nwrites;
};

static void stream_pump(struct streamer *st);

static void stream_on_drain(void *ud, struct http_request *r)
{
    (void)r;
    stream_pump(ud);
}

static void stream_on_abort(void *ud, struct http_request *r)
{
    struct streamer *st = ud;
    struct results *res = st->fx->user;
    (void)r;
    res->aborts++;
    free(st);
}

/* Half the chunks go through http_stream_write_owned (the relays' zero-copy path), half are
 * copied: both must come out encrypted and in order. */
static void stream_pump(struct streamer *st)
{
    struct results *res = st->fx->user;
    static uint8_t chunk[STREAM_CHUNK];
    while (st->sent < st->total) {
        size_t pending = http_stream_pending(st->r);
        if (pending > res->max_pending) {
            res->max_pending = pending;
        }
        if (pending >= STREAM_HIGH) {
            return;
        }
        size_t n = st->total - st->sent < STREAM_CHUNK ? st->total - st->sent : STREAM_CHUNK;
        uint8_t *base = NULL;
        uint8_t *dst = chunk;
        if (st->nwrites++ % 2 == 0) {
            base = malloc(n + 13);
            assert_non_null(base);
            dst = base + 13;
        }
        for (size_t i = 0; i < n; i++) {
            dst[i] = pattern_byte(st->sent + i);
        }
        int rc = base != NULL ? http_stream_write_owned(st->r, base, dst, n)
                              : http_stream_write(st->r, chunk, n);
        if (rc != 0) {
            res->write_errors++;
            return;
        }
        st->sent += n;
    }
    http_stream_end(st->r);
    res->ends++;
    free(st);
}

static void handler(struct hfx *fx, struct http_request *r)
{
    const char *path = http_request_path(r);
    if (strcmp(path, "/stream") == 0) {
        struct streamer *st = calloc(1, sizeof(*st));
        assert_non_null(st);
        st->fx = fx;
        st->r = r;
        st->total = STREAM_TOTAL;
        http_request_on_abort(r, stream_on_abort, st);
        http_stream_on_drain(r, STREAM_LOW, stream_on_drain, st);
        assert_int_equal(http_stream_begin(r, 200, "application/octet-stream", NULL, 0), 0);
        stream_pump(st);
        return;
    }
    if (strcmp(path, "/slow") == 0) {
        struct delayed *d = calloc(1, sizeof(*d));
        assert_non_null(d);
        d->r = r;
        uv_timer_init(&fx->loop, &d->timer);
        d->timer.data = d;
        http_request_on_abort(r, delayed_on_abort, d);
        uv_timer_start(&d->timer, delayed_on_timer, 20, 0);
        return;
    }
    char body[128];
    int n = snprintf(body, sizeof(body), "hello %s", http_request_query(r));
    http_respond(r, 200, "text/plain", NULL, 0, body, (size_t)n);
}

/* ---- client side ---- */

static SSL_CTX *client_ctx(const char *ca, int max_version)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (ctx == NULL) {
        return NULL;
    }
    if (ca != NULL) {
        SSL_CTX_load_verify_locations(ctx, ca, NULL);
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    }
    if (max_version != 0) {
        SSL_CTX_set_min_proto_version(ctx, 0);
        SSL_CTX_set_max_proto_version(ctx, max_version);
        SSL_CTX_set_security_level(ctx, 0); /* let an old client offer old protocols */
        SSL_CTX_set_cipher_list(ctx, "DEFAULT:@SECLEVEL=0");
    }
    return ctx;
}

static const unsigned char alpn_h2_h11[] = "\x02h2\x08http/1.1";

/* A verified TLS connection, or a recorded failure (returns false). */
static bool tls_connect(struct hfx *fx, struct tc_conn *c, SSL_CTX *ctx)
{
    if (tc_connect(c, fx->port) != 0) {
        hfx_failf(fx, "connect failed");
        return false;
    }
    char why[160];
    if (tc_tls_handshake(c, ctx, alpn_h2_h11, sizeof(alpn_h2_h11) - 1, IO_MS, why, sizeof(why)) !=
        0) {
        hfx_failf(fx, "handshake failed: %s", why);
        tc_close(c);
        return false;
    }
    return true;
}

static const char *current_cert;

static void client_keepalive(struct hfx *fx)
{
    struct results *res = fx->user;
    SSL_CTX *ctx = client_ctx(current_cert, 0);
    HFX_CHECK(fx, ctx != NULL);
    struct tc_conn c;
    uint64_t t0 = tc_now_ms();
    const int handshakes = 20;
    for (int i = 0; i < handshakes; i++) {
        if (!tls_connect(fx, &c, ctx)) {
            SSL_CTX_free(ctx);
            return;
        }
        tc_close(&c);
    }
    res->handshake_ms = (double)(tc_now_ms() - t0) / handshakes;
    if (!tls_connect(fx, &c, ctx)) {
        SSL_CTX_free(ctx);
        return;
    }
    SSL *ssl = c.ssl;
    const unsigned char *alpn = NULL;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl, &alpn, &alpn_len);
    bool ok = alpn_len == 8 && memcmp(alpn, "http/1.1", 8) == 0;
    ok = ok && SSL_version(ssl) >= TLS1_2_VERSION;
    ok = ok && SSL_get_verify_result(ssl) == X509_V_OK;
    struct tc_response r;
    tc_response_init(&r);
    /* Several requests on one TLS connection, then three pipelined in one record. */
    for (int i = 0; ok && i < 5; i++) {
        char req[128], want[32];
        snprintf(req, sizeof(req), "GET /hello?%d HTTP/1.1\r\nHost: x\r\n\r\n", i);
        snprintf(want, sizeof(want), "hello %d", i);
        ok = tc_request(&c, req, &r, IO_MS) == TC_OK && r.status == 200 &&
             strcmp(tc_body(&r), want) == 0 && r.keep_alive;
    }
    if (ok) {
        ok = tc_send_str(&c, "GET /slow?a HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /hello?b HTTP/1.1\r\nHost: x\r\n\r\n"
                             "GET /slow?c HTTP/1.1\r\nHost: x\r\n\r\n") == 0;
    }
    const char *want3[] = {"late a", "hello b", "late c"};
    for (int i = 0; ok && i < 3; i++) {
        ok = tc_read_response(&c, &r, IO_MS) == TC_OK && strcmp(tc_body(&r), want3[i]) == 0;
    }
    /* Connection: close ends with close_notify, then FIN. */
    if (ok) {
        ok = tc_request(&c, "GET /hello?z HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", &r,
                        IO_MS) == TC_OK &&
             r.status == 200 && tc_wait_closed(&c, IO_MS, NULL) == TC_OK &&
             (SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN) != 0;
    }
    tc_response_fini(&r);
    tc_close(&c);
    SSL_CTX_free(ctx);
    HFX_CHECK(fx, ok);
}

static void run_keepalive(void **state, const char *cert, const char *key, const char *what)
{
    struct hfx *fx = *state;
    struct results res = {0};
    struct http_tls_info info;
    struct http_tls_ctx *ctx = NULL;
    assert_int_equal(http_tls_ctx_new(cert, key, NULL, &ctx, &info), 0);
    current_cert = cert;
    fx->cfg.tls = ctx;
    fx->url = "https://127.0.0.1:0";
    fx->handler = handler;
    fx->user = &res;
    hfx_run(fx, client_keepalive, WATCHDOG_MS);
    http_tls_ctx_free(ctx);
    print_message("    %s: full handshake + connect %.2f ms (mean of 20)\n", what,
                  res.handshake_ms);
}

static void test_http_tls_keepalive_rsa(void **state)
{
    run_keepalive(state, rsa_cert, rsa_key, "RSA-2048");
}

static void test_http_tls_keepalive_ec(void **state)
{
    run_keepalive(state, ec_cert, ec_key, "EC P-256");
}

/* The same client function serves the plain and the TLS run (ssl_ctx NULL: plain). */
static SSL_CTX *stream_ctx;

static void client_stream(struct hfx *fx)
{
    struct results *res = fx->user;
    struct tc_conn c;
    if (stream_ctx != NULL) {
        if (!tls_connect(fx, &c, stream_ctx)) {
            return;
        }
    } else {
        HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    }
    struct tc_response r;
    tc_response_init(&r);
    uint64_t t0 = tc_now_ms();
    enum tc_result tr = tc_request(&c, "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n", &r, 30000);
    res->client_ms = (double)(tc_now_ms() - t0);
    bool ok = tr == TC_OK && r.status == 200 && buf_size(&r.body) == STREAM_TOTAL;
    const uint8_t *b = buf_data(&r.body);
    for (size_t i = 0; ok && i < STREAM_TOTAL; i++) {
        ok = b[i] == pattern_byte(i);
    }
    /* The connection is still good for another request. */
    ok = ok && tc_request(&c, "GET /hello?after HTTP/1.1\r\nHost: x\r\n\r\n", &r, IO_MS) == TC_OK &&
         strcmp(tc_body(&r), "hello after") == 0;
    tc_response_fini(&r);
    tc_close(&c);
    HFX_CHECK(fx, ok);
}

static double run_stream(void **state, bool tls)
{
    struct hfx *fx = *state;
    struct results res = {0};
    struct http_tls_info info;
    struct http_tls_ctx *ctx = NULL;
    if (tls) {
        assert_int_equal(http_tls_ctx_new(ec_cert, ec_key, NULL, &ctx, &info), 0);
        stream_ctx = client_ctx(ec_cert, 0);
        assert_non_null(stream_ctx);
        fx->url = "https://127.0.0.1:0";
    }
    fx->cfg.tls = ctx;
    fx->handler = handler;
    fx->user = &res;
    hfx_run(fx, client_stream, 60000);
    SSL_CTX_free(stream_ctx);
    stream_ctx = NULL;
    http_tls_ctx_free(ctx);
    assert_int_equal(res.ends, 1);
    assert_int_equal(res.aborts, 0);
    /* Backpressure still bounds the queue, now counted in ciphertext bytes. */
    assert_true(res.max_pending < STREAM_HIGH + STREAM_CHUNK + 4096);
    double mbps = (double)STREAM_TOTAL / (1024.0 * 1024.0) / (res.client_ms / 1000.0);
    print_message("    %s: %zu MiB streamed in %.0f ms (%.0f MiB/s), max queued %zu bytes\n",
                  tls ? "https" : "http", STREAM_TOTAL >> 20, res.client_ms, mbps, res.max_pending);
    return mbps;
}

static void test_http_tls_stream_large(void **state)
{
    run_stream(state, true);
}

static void test_http_tls_stream_plain_baseline(void **state)
{
    run_stream(state, false);
}

/* ---- policy and abuse ---- */

static void client_abuse(struct hfx *fx)
{
    struct tc_conn c;
    char why[160];
    /* 1. TLS 1.1 (and 1.0) are refused. */
    SSL_CTX *old = client_ctx(NULL, TLS1_1_VERSION);
    HFX_CHECK(fx, old != NULL);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    int rc = tc_tls_handshake(&c, old, NULL, 0, IO_MS, why, sizeof(why));
    tc_close(&c);
    SSL_CTX_free(old);
    if (rc == 0) {
        hfx_failf(fx, "a TLS 1.1 handshake succeeded");
        return;
    }

    /* 2. Plain HTTP on the TLS port: a plain-text 400 that says so, then close. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    struct tc_response r;
    tc_response_init(&r);
    bool ok = tc_request(&c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n", &r, IO_MS) == TC_OK &&
              r.status == 400 && strstr(tc_body(&r), "HTTPS") != NULL &&
              tc_wait_closed(&c, IO_MS, NULL) == TC_OK;
    tc_response_fini(&r);
    tc_close(&c);
    HFX_CHECK(fx, ok);

    /* 3. Garbage instead of a ClientHello: closed. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    static const char garbage[] = "\x16\x03\x01\x00\x05\xff\xff\xff\xff\xff\x00\x01\x02";
    HFX_CHECK(fx, tc_send(&c, garbage, sizeof(garbage) - 1) == 0);
    ok = tc_wait_closed(&c, IO_MS, NULL) == TC_OK;
    tc_close(&c);
    HFX_CHECK(fx, ok);

    /* 4. Silent client: the header timeout (300 ms here) covers the handshake. */
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    ok = tc_wait_closed(&c, IO_MS, NULL) == TC_OK;
    uint64_t silent_ms = tc_now_ms() - t0;
    tc_close(&c);
    HFX_CHECK(fx, ok && silent_ms >= 250 && silent_ms < 2000);

    /* 5. A ClientHello cut short, then silence: also the header timeout. */
    static const char partial[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_send(&c, partial, sizeof(partial) - 1) == 0);
    t0 = tc_now_ms();
    ok = tc_wait_closed(&c, IO_MS, NULL) == TC_OK && tc_now_ms() - t0 < 2000;
    tc_close(&c);
    HFX_CHECK(fx, ok);

    /* 6. A client that aborts mid-handshake (reset after half a ClientHello). */
    for (int i = 0; i < 20; i++) {
        HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
        HFX_CHECK(fx, tc_send(&c, partial, sizeof(partial) - 1) == 0);
        tc_reset(&c);
    }

    /* 7. After all that, a good client is served. */
    SSL_CTX *good = client_ctx(rsa_cert, 0);
    HFX_CHECK(fx, good != NULL);
    if (!tls_connect(fx, &c, good)) {
        SSL_CTX_free(good);
        return;
    }
    tc_response_init(&r);
    ok = tc_request(&c, "GET /hello?ok HTTP/1.1\r\nHost: x\r\n\r\n", &r, IO_MS) == TC_OK &&
         strcmp(tc_body(&r), "hello ok") == 0;
    tc_response_fini(&r);
    tc_close(&c);
    SSL_CTX_free(good);
    HFX_CHECK(fx, ok);
}

static void test_http_tls_abuse(void **state)
{
    struct hfx *fx = *state;
    struct results res = {0};
    struct http_tls_info info;
    struct http_tls_ctx *ctx = NULL;
    assert_int_equal(http_tls_ctx_new(rsa_cert, rsa_key, NULL, &ctx, &info), 0);
    fx->cfg.tls = ctx;
    fx->cfg.header_timeout_ms = 300;
    fx->url = "https://127.0.0.1:0";
    fx->handler = handler;
    fx->user = &res;
    hfx_run(fx, client_abuse, WATCHDOG_MS);
    http_tls_ctx_free(ctx);
}

/* Without a context, https:// is refused; with one, http:// and https:// mix on one server. */
static void noop_handler(void *ud, struct http_request *r)
{
    (void)ud;
    http_respond(r, 204, NULL, NULL, 0, NULL, 0);
}

static void on_server_closed(void *ud)
{
    *(bool *)ud = true;
}

static void test_http_tls_listen_rules(void **state)
{
    struct hfx *fx = *state;
    struct http_server *s = NULL;
    assert_int_equal(http_server_new(&fx->loop, NULL, noop_handler, NULL, &s), 0);
    assert_int_equal(http_server_listen(s, "https://127.0.0.1:0", 0), AGENT_E_INVAL);
    bool closed = false;
    http_server_close(s, 0, on_server_closed, &closed);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_true(closed);

    struct http_tls_info info;
    struct http_tls_ctx *ctx = NULL;
    assert_int_equal(http_tls_ctx_new(ec_cert, ec_key, NULL, &ctx, &info), 0);
    struct http_server_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.tls = ctx;
    assert_int_equal(http_server_new(&fx->loop, &cfg, noop_handler, NULL, &s), 0);
    assert_int_equal(http_server_listen(s, "https://127.0.0.1:0", 0), 0);
    assert_int_equal(http_server_listen(s, "http://127.0.0.1:0", 0), 0);
    assert_true(http_server_port(s, 0) > 0 && http_server_port(s, 1) > 0);
    closed = false;
    http_server_close(s, 0, on_server_closed, &closed);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_true(closed);
    http_tls_ctx_free(ctx);

    bool tls = false, lo = false;
    assert_int_equal(http_url_info("https://localhost:1", &tls, &lo), 0);
    assert_true(tls && lo);
    assert_int_equal(http_url_info("http://127.1.2.3:1", &tls, &lo), 0);
    assert_true(!tls && lo);
    assert_int_equal(http_url_info("http://[::1]:1", &tls, &lo), 0);
    assert_true(lo);
    assert_int_equal(http_url_info("http://+:1", &tls, &lo), 0);
    assert_false(lo);
    assert_int_equal(http_url_info("http://0.0.0.0:1", &tls, &lo), 0);
    assert_false(lo);
    assert_int_equal(http_url_info("http://10.0.0.1:1", &tls, &lo), 0);
    assert_false(lo);
    assert_int_equal(http_url_info("ftp://x", &tls, &lo), AGENT_E_INVAL);
}

int main(void)
{
    log_set_level(LOG_WARN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_tls_ctx_errors),
        cmocka_unit_test_setup_teardown(test_http_tls_listen_rules, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_keepalive_rsa, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_keepalive_ec, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_stream_plain_baseline, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_stream_large, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_tls_abuse, hfx_setup, hfx_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
