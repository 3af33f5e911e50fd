/* SPDX-License-Identifier: MIT */
/*
 * Tests for auth/: generatekey round trip, every class of bad token and its result, JWK parsing.
 * Tokens for the negative cases are built here with OpenSSL directly (including HS* and
 * "none", which the module can't produce), so the verifier is checked against an independent
 * encoder. Run with --print-generated to print a fresh auth_generate() result (public key,
 * subject, token on three lines) for the .NET cross-check in jwtcheck/.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include <cmocka.h>

#include "auth.h"
#include "auth_internal.h"
#include "err.h"

#define NOW       ((int64_t)1700000000)
#define SUBJ      "ae5473b6-8dad-498d-b915-53b9c684000e"
#define HDR_ES384 "{\"alg\":\"ES384\",\"typ\":\"JWT\"}"

/* ---------- helpers: an encoder independent of the module's ---------- */

static char *b64url(const void *data, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const uint8_t *p = data;
    char *out = malloc(n / 3 * 4 + 5);
    assert_non_null(out);
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16;
        if (i + 1 < n) {
            v |= (uint32_t)p[i + 1] << 8;
        }
        if (i + 2 < n) {
            v |= p[i + 2];
        }
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        if (i + 1 < n) {
            out[o++] = a[v >> 6 & 63];
        }
        if (i + 2 < n) {
            out[o++] = a[v & 63];
        }
    }
    out[o] = '\0';
    return out;
}

static char *b64url_str(const char *s)
{
    return b64url(s, strlen(s));
}

static char *xstrdup(const char *s)
{
    char *p = strdup(s);
    assert_non_null(p);
    return p;
}

static char *fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static char *fmt(const char *f, ...)
{
    va_list ap;
    va_list ap2;
    va_start(ap, f);
    va_copy(ap2, ap);
    /* clang-tidy 14 misreads va_start/va_copy on x86-64's array-typed va_list. */
    int n = vsnprintf(NULL, 0, f, ap); /* NOLINT(clang-analyzer-valist.Uninitialized) */
    va_end(ap);
    assert_true(n >= 0);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    int m = vsnprintf(p, (size_t)n + 1, f, ap2);
    va_end(ap2);
    assert_int_equal(m, n);
    return p;
}

/* Standard claims: right aud and iss, given exp and sub. */
static char *claims(int64_t exp, const char *sub)
{
    return fmt("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", AUTH_AUDIENCE,
               AUTH_DEFAULT_ISSUER, (long long)exp, sub);
}

static size_t ec_coord_len(EVP_PKEY *k)
{
    return (size_t)(EVP_PKEY_get_bits(k) + 7) / 8;
}

/*
 * "Bearer h.c.s" where s is made as sign_as says: ESxxx (raw R||S at the key's width), RSxxx
 * (PKCS #1 v1.5), HSxxx (HMAC with a fixed secret) or "none" (empty). Takes ownership of hdr
 * and cl.
 */
static char *make_token(EVP_PKEY *key, const char *sign_as, char *hdr, char *cl)
{
    char *h = b64url_str(hdr);
    char *c = b64url_str(cl);
    char *input = fmt("%s.%s", h, c);
    uint8_t sig[1024];
    size_t sig_len = 0;
    const char *md = NULL;
    if (strcmp(sign_as, "none") != 0) {
        md = strcmp(sign_as + 2, "256") == 0   ? "SHA256"
             : strcmp(sign_as + 2, "384") == 0 ? "SHA384"
                                               : "SHA512";
    }
    if (strncmp(sign_as, "HS", 2) == 0) {
        static const uint8_t secret[] = "a shared secret that must never be accepted";
        assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, md, NULL, secret, sizeof(secret) - 1,
                                  (const uint8_t *)input, strlen(input), sig, sizeof(sig),
                                  &sig_len));
    } else if (md != NULL) {
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        uint8_t der[1024];
        size_t der_len = sizeof(der);
        assert_int_equal(EVP_DigestSignInit_ex(ctx, NULL, md, NULL, NULL, key, NULL), 1);
        assert_int_equal(EVP_DigestSign(ctx, der, &der_len, (const uint8_t *)input, strlen(input)),
                         1);
        EVP_MD_CTX_free(ctx);
        if (sign_as[0] == 'E') {
            const uint8_t *p = der;
            ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
            assert_non_null(es);
            int w = (int)ec_coord_len(key);
            assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_r(es), sig, w), w);
            assert_int_equal(BN_bn2binpad(ECDSA_SIG_get0_s(es), sig + w, w), w);
            sig_len = 2 * (size_t)w;
            ECDSA_SIG_free(es);
        } else {
            memcpy(sig, der, der_len);
            sig_len = der_len;
        }
    }
    char *s = b64url(sig, sig_len);
    char *tok = fmt("Bearer %s.%s", input, s);
    free(h);
    free(c);
    free(input);
    free(s);
    free(hdr);
    free(cl);
    return tok;
}

/* An ES384 token from the P-384 key with the given claims (owned). */
static char *es384(EVP_PKEY *key, char *cl)
{
    return make_token(key, "ES384", xstrdup(HDR_ES384), cl);
}

static char *bn_b64(EVP_PKEY *k, const char *param, size_t width)
{
    BIGNUM *bn = NULL;
    assert_int_equal(EVP_PKEY_get_bn_param(k, param, &bn), 1);
    uint8_t b[2048];
    int n = width ? BN_bn2binpad(bn, b, (int)width) : BN_bn2bin(bn, b);
    assert_true(n > 0);
    BN_free(bn);
    return b64url(b, (size_t)n);
}

/* JWK JSON for a key. extra is inserted first ("" or members followed by a comma);
 * with_d adds the private part; bad_point damages y so the point leaves the curve. */
static char *jwk_json(EVP_PKEY *k, const char *extra, int with_d, int bad_point)
{
    int ec = EVP_PKEY_is_a(k, "EC");
    char *d = NULL;
    if (with_d) {
        d = ec ? bn_b64(k, OSSL_PKEY_PARAM_PRIV_KEY, ec_coord_len(k))
               : bn_b64(k, OSSL_PKEY_PARAM_RSA_D, 0);
    }
    char *dm = d ? fmt(",\"d\":\"%s\"", d) : xstrdup("");
    char *json;
    if (ec) {
        size_t w = ec_coord_len(k);
        uint8_t pt[1 + 2 * 66];
        size_t len = 0;
        assert_int_equal(
            EVP_PKEY_get_octet_string_param(k, OSSL_PKEY_PARAM_PUB_KEY, pt, sizeof(pt), &len), 1);
        assert_int_equal(len, 1 + 2 * w);
        if (bad_point) {
            pt[1 + 2 * w - 1] ^= 1;
        }
        char *x = b64url(pt + 1, w);
        char *y = b64url(pt + 1 + w, w);
        const char *crv = w == 32 ? "P-256" : w == 48 ? "P-384" : "P-521";
        json = fmt("{%s\"kty\":\"EC\",\"crv\":\"%s\",\"x\":\"%s\",\"y\":\"%s\"%s}", extra, crv, x,
                   y, dm);
        free(x);
        free(y);
    } else {
        char *n = bn_b64(k, OSSL_PKEY_PARAM_RSA_N, 0);
        char *e = bn_b64(k, OSSL_PKEY_PARAM_RSA_E, 0);
        json = fmt("{%s\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"%s\"%s}", extra, n, e, dm);
        free(n);
        free(e);
    }
    free(d);
    free(dm);
    return json;
}

static char *jwk_b64(EVP_PKEY *k)
{
    char *json = jwk_json(k, "", 0, 0);
    char *b = b64url_str(json);
    free(json);
    return b;
}

/* Builds a verifier for key k with SUBJ and the default issuer; must succeed. */
static struct auth_verifier *verifier_for(EVP_PKEY *k)
{
    char *pk = jwk_b64(k);
    struct auth_verifier *v = NULL;
    const char *warning = "unset";
    char err[256];
    int rc = auth_verifier_new(pk, SUBJ, NULL, &v, &warning, err, sizeof(err));
    if (rc != 0) {
        fail_msg("auth_verifier_new: %s", err);
    }
    assert_null(warning);
    free(pk);
    return v;
}

/* Verifies an owned header value at NOW and checks result and reason. */
static void expect_at(int line, const struct auth_verifier *v, char *authz, enum auth_result want,
                      const char *want_why)
{
    const char *why = NULL;
    enum auth_result got = auth_verify(v, authz, NOW, &why);
    free(authz);
    if (got != want || why == NULL || strcmp(why, want_why) != 0) {
        fail_msg("line %d: got %d '%s', want %d '%s'", line, (int)got, why ? why : "(null)",
                 (int)want, want_why);
    }
}

#define EXPECT(v, authz, res, why) expect_at(__LINE__, (v), (authz), (res), (why))

struct keys {
    EVP_PKEY *p256, *p384, *p384b, *p521, *rsa, *rsa1024;
    struct auth_verifier *v256, *v384, *v521, *vrsa;
};

static struct keys K;

/* A fixed RSA-2048 key, test key only (`openssl genpkey -algorithm RSA -pkeyopt
 * rsa_keygen_bits:2048`), for the runs under valgrind (DOTMON_VALGRIND, tests/CMakeLists.txt):
 * there OpenSSL's RSA-2048 generation takes ~20 s and runs none of auth/'s code. Native runs
 * (normal and sanitizer builds) make a fresh key each time. */
static const char rsa_test_pem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIIEvAIBADANBgkqhkiG9w0BAQEFAASCBKYwggSiAgEAAoIBAQCvp10+i1NUecuN\n"
    "z/WwFmGgDgRnjubH2buni6+jCkPhn14JQYN4JQizHbX6ypQ3t45ZtBiDaK17oAaO\n"
    "Nloj4kuk1a4J99IxxIaYZzWsHj5jbQRSMsF00LtI5iYylSXb4sfhNswehpZG0TQf\n"
    "usVn6v5dbuOHgYx8FTswKcOsVMVQW97O3P2d36jTcASGD+Nuv267ZPbPgpTAId5b\n"
    "/OXAUzvPNFMt45RhF9NN4KysGShtYjnXg3TJlePE2FQ1xrDOlFw/38mJbMpU8gup\n"
    "ymv8rhFcslNqfAl4qJu1RzdRZUPgIy9TTBxMQFbXI4gIcu/4NGbK6Ipo+Ou/Kqsk\n"
    "CKTBOkRpAgMBAAECggEAFzSwYWxtCF/aMAngMVtrmgZwDNxjXytumrkeGEHpa5Ev\n"
    "OQrSMG5iwq3Iq8bVTl0Y2H9YrmJcalTfDi0JEJeQxciYaGcN+mw2b0OnYsNQxmLn\n"
    "K2gwMwYb0ArefgKX+1Tvx4WtRtUiB7NoxE5bo8R3HBHjy7RQ7S2tjEngONAEN1Q2\n"
    "XVfGAq0pz0EYoxAOHUOKRgWCjwtB3Ekp6NoHoQ2WIKdjr3Pu5FrhSwOUcEFp+geu\n"
    "AotR0QaJ8YP9GX2xyzW6FUUFHUIqZSQh3hom+IHdO9qEt62eAUVAHmSpqMpGfKDv\n"
    "eQjOkx/W5ntwpFDu2GpvnQ5likZe3PQAV56ynr5VtwKBgQDgJHvHmsoXCPMmGoJY\n"
    "mvQyujOBM0rJGfOnVy0X0JdJSHFX5aHBzbtO3uhVeXIEjDg+qefevCwDDpIUAIkz\n"
    "L8fPmS2KgkHI1xC4d0brLWs/QQnJ6+yCAusgmNSwwxwjO/6NfrUeMEev/WaCYbaU\n"
    "Sbuz50AQm6O7thVRXtRQzZ/r1wKBgQDInpkSvBAhJrdlWflrOuBTImssN56/TvIp\n"
    "nUr86/AwDx3NgvW17RSrP7NNT/pzEBfAa8YBOWeF7a5QpKWI/KVBZathUCbkM3VD\n"
    "+RaRzmJA8K30p+QYtV3gtyfcfXa1GOmHWolz0cEsMLX59u9volmxBtpabkz3/t3u\n"
    "uQGzi39JvwKBgD1c/5433FfOFXM7ErBbS7uPioY2mqTPvAr2LNw2ORTRBma/8Tbz\n"
    "sfH3yLeN1g80rDlLnrU14v67QHbFZspirFtDXlprKsNnTaaS0RGVj6Tzk1B6jHdT\n"
    "gTedX6083TkwNZJbPA6VvSqLP0M2qRuTzBWGm91wHrVHNjLeuVWd1chlAoGALRHM\n"
    "K7RKH1h2TPOYn+lbKfIKh6V7KVlP999ZUFak3/cVZ+zqzFMVmJ835b948U6FN3o+\n"
    "wlmmEyVhSsaiVZMEgRuZE8SQ6CVTS9DyrBDka9hmDBeHm7FrBKfA8bzR5T9Sf1Ds\n"
    "njNaJVZQG3bJNZgQdD+o4DX1XqVIMHApnK9TCjsCgYBJGL+ZqCmSegp8iIx7aEY5\n"
    "PFzpfmK2rTJv0oDDpMJ3z5DIEM5eyW3+I/f2R4FmNtFB8a034bcZB5UVch39KWmK\n"
    "FaHE8EzorvEsbby0wsQWuxLBbX6Gp3CK3IliwATv6ZrlDHyrj6mnX8yyUu4khOAg\n"
    "xQ5P4kLx7uWe0XlNywoQmQ==\n"
    "-----END PRIVATE KEY-----\n";

static EVP_PKEY *rsa_2048(void)
{
    const char *vg = getenv("DOTMON_VALGRIND");
    if (vg == NULL || *vg == '\0') {
        return EVP_RSA_gen(2048);
    }
    BIO *bio = BIO_new_mem_buf(rsa_test_pem, -1);
    EVP_PKEY *key = bio != NULL ? PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL) : NULL;
    BIO_free(bio); /* (NULL: nothing) */
    return key;
}

static int group_setup(void **state)
{
    (void)state;
    K.p256 = EVP_EC_gen("P-256");
    K.p384 = EVP_EC_gen("P-384");
    K.p384b = EVP_EC_gen("P-384");
    K.p521 = EVP_EC_gen("P-521");
    K.rsa = rsa_2048();
    K.rsa1024 = EVP_RSA_gen(1024);
    if (!K.p256 || !K.p384 || !K.p384b || !K.p521 || !K.rsa || !K.rsa1024) {
        return -1;
    }
    K.v256 = verifier_for(K.p256);
    K.v384 = verifier_for(K.p384);
    K.v521 = verifier_for(K.p521);
    K.vrsa = verifier_for(K.rsa);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    auth_verifier_free(K.v256);
    auth_verifier_free(K.v384);
    auth_verifier_free(K.v521);
    auth_verifier_free(K.vrsa);
    EVP_PKEY_free(K.p256);
    EVP_PKEY_free(K.p384);
    EVP_PKEY_free(K.p384b);
    EVP_PKEY_free(K.p521);
    EVP_PKEY_free(K.rsa);
    EVP_PKEY_free(K.rsa1024);
    return 0;
}

/* Decodes one base64url part of a token with OpenSSL's decoder (after mapping the alphabet). */
static char *decode_part(const char *tok, int idx)
{
    const char *p = tok;
    for (int i = 0; i < idx; i++) {
        p = strchr(p, '.') + 1;
    }
    size_t n = strcspn(p, ".");
    char *s = calloc(1, n + 4);
    assert_non_null(s);
    memcpy(s, p, n);
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '-') {
            s[i] = '+';
        } else if (s[i] == '_') {
            s[i] = '/';
        }
    }
    while (n % 4) {
        s[n++] = '=';
    }
    char *out = calloc(1, n);
    assert_non_null(out);
    int m = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    assert_true(m >= 0);
    free(s);
    return out;
}

/* ---------- generatekey ---------- */

static void test_auth_generate_round_trip(void **state)
{
    (void)state;
    struct auth_generated g;
    assert_int_equal(auth_generate(NOW, (int64_t)7 * 86400, NULL, &g), 0);
    assert_int_equal(g.expires, NOW + (int64_t)7 * 86400);
    assert_string_equal(g.issuer, AUTH_DEFAULT_ISSUER);
    assert_int_equal(strlen(g.subject), 36);
    assert_int_equal(g.subject[14], '4'); /* UUID version 4 */

    struct auth_verifier *v = NULL;
    const char *warning = "unset";
    char err[128];
    assert_int_equal(
        auth_verifier_new(g.public_key_b64, g.subject, NULL, &v, &warning, err, sizeof(err)), 0);
    assert_null(warning);
    EXPECT(v, fmt("Bearer %s", g.token), AUTH_OK, "authorized");
    /* Still valid just before exp, expired after exp + skew. */
    const char *why = NULL;
    char *authz = fmt("Bearer %s", g.token);
    assert_int_equal(auth_verify(v, authz, g.expires - 1, &why), AUTH_OK);
    assert_int_equal(auth_verify(v, authz, g.expires + AUTH_CLOCK_SKEW_S, &why), AUTH_UNAUTHORIZED);
    assert_string_equal(why, "token expired");
    free(authz);
    auth_verifier_free(v);

    /* The exact shapes dotnet-monitor's generatekey uses. */
    char *hdr = decode_part(g.token, 0);
    assert_string_equal(hdr, HDR_ES384);
    free(hdr);
    char *cl = decode_part(g.token, 1);
    char *want = fmt("{\"aud\":\"%s\",\"exp\":%lld,\"iss\":\"%s\",\"sub\":\"%s\"}", AUTH_AUDIENCE,
                     (long long)(NOW + (int64_t)7 * 86400), AUTH_DEFAULT_ISSUER, g.subject);
    assert_string_equal(cl, want);
    free(cl);
    free(want);
    assert_int_equal(strlen(strrchr(g.token, '.') + 1), 128); /* 96 bytes R || S */
    char *jwk = decode_part(g.public_key_b64, 0);
    assert_int_equal(strncmp(jwk, "{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"", 31), 0);
    assert_int_equal(strlen(jwk), 31 + 64 + 7 + 64 + 2); /* x and y: 48 bytes = 64 chars */
    free(jwk);
    auth_generated_fini(&g);
    auth_generated_fini(&g); /* twice is harmless */
}

static void test_auth_generate_issuer_and_args(void **state)
{
    (void)state;
    struct auth_generated g, g2;
    assert_int_equal(auth_generate(NOW, 60, "my-issuer", &g), 0);
    assert_int_equal(auth_generate(NOW, 60, NULL, &g2), 0);
    assert_string_not_equal(g.subject, g2.subject);
    assert_string_not_equal(g.public_key_b64, g2.public_key_b64);

    struct auth_verifier *v = NULL;
    struct auth_verifier *vdef = NULL;
    char err[128];
    assert_int_equal(
        auth_verifier_new(g.public_key_b64, g.subject, "my-issuer", &v, NULL, err, sizeof(err)), 0);
    assert_int_equal(
        auth_verifier_new(g.public_key_b64, g.subject, NULL, &vdef, NULL, err, sizeof(err)), 0);
    EXPECT(v, fmt("Bearer %s", g.token), AUTH_OK, "authorized");
    EXPECT(vdef, fmt("Bearer %s", g.token), AUTH_UNAUTHORIZED, "wrong issuer");
    /* Another generated key's token: genuine, but not signed by this key. */
    EXPECT(vdef, fmt("Bearer %s", g2.token), AUTH_UNAUTHORIZED, "invalid signature");
    auth_verifier_free(v);
    auth_verifier_free(vdef);
    auth_generated_fini(&g);
    auth_generated_fini(&g2);

    struct auth_generated bad = {0};
    assert_int_equal(auth_generate(NOW, 0, NULL, &bad), AGENT_E_INVAL);
    assert_int_equal(auth_generate(NOW, -5, NULL, &bad), AGENT_E_INVAL);
    assert_int_equal(auth_generate(INT64_MAX - 10, 11, NULL, &bad), AGENT_E_INVAL);
    assert_null(bad.token);
    assert_int_equal(auth_generate(NOW, 60, NULL, NULL), AGENT_E_INVAL);
}

/* ---------- the Authorization header ---------- */

static void test_auth_verify_header_value(void **state)
{
    (void)state;
    const char *why = NULL;
    assert_int_equal(auth_verify(K.v384, NULL, NOW, &why), AUTH_UNAUTHORIZED);
    assert_string_equal(why, "missing Authorization header");
    EXPECT(K.v384, xstrdup(""), AUTH_UNAUTHORIZED, "missing Authorization header");
    EXPECT(K.v384, xstrdup("   "), AUTH_UNAUTHORIZED, "missing Authorization header");
    EXPECT(K.v384, xstrdup("Basic dXNlcjpwYXNz"), AUTH_UNAUTHORIZED,
           "authorization scheme is not Bearer");
    EXPECT(K.v384, xstrdup("Bearerabc.def.ghi"), AUTH_UNAUTHORIZED,
           "authorization scheme is not Bearer");
    EXPECT(K.v384, xstrdup("Bear"), AUTH_UNAUTHORIZED, "authorization scheme is not Bearer");
    EXPECT(K.v384, xstrdup("Bearer"), AUTH_UNAUTHORIZED, "empty bearer token");
    EXPECT(K.v384, xstrdup("Bearer    "), AUTH_UNAUTHORIZED, "empty bearer token");

    /* Scheme case and the number of spaces don't matter. */
    char *good = es384(K.p384, claims(NOW + 3600, SUBJ));
    const char *jwt = good + strlen("Bearer ");
    EXPECT(K.v384, fmt("bearer %s", jwt), AUTH_OK, "authorized");
    EXPECT(K.v384, fmt("BEARER    %s  ", jwt), AUTH_OK, "authorized");
    EXPECT(K.v384, fmt(" Bearer %s", jwt), AUTH_OK, "authorized");
    /* A NULL verifier (no key configured) rejects everything, like dotnet's reject-all. */
    assert_int_equal(auth_verify(NULL, good, NOW, &why), AUTH_UNAUTHORIZED);
    assert_string_equal(why, "authentication is not configured");
    /* A NULL reason pointer is tolerated. */
    assert_int_equal(auth_verify(K.v384, good, NOW, NULL), AUTH_OK);
    free(good);
}

/* ---------- the compact serialization ---------- */

static void test_auth_verify_token_shape(void **state)
{
    (void)state;
    char *good = es384(K.p384, claims(NOW + 3600, SUBJ));
    const char *jwt = good + strlen("Bearer ");
    const char *sig = strrchr(jwt, '.') + 1;
    size_t input_len = (size_t)(sig - 1 - jwt);

    EXPECT(K.v384, fmt("Bearer %.*s", (int)input_len, jwt), AUTH_UNAUTHORIZED,
           "malformed token: expected three dot-separated parts");
    EXPECT(K.v384, fmt("Bearer %s.%s", jwt, sig), AUTH_UNAUTHORIZED,
           "malformed token: expected three dot-separated parts");
    EXPECT(K.v384, xstrdup("Bearer abc"), AUTH_UNAUTHORIZED,
           "malformed token: expected three dot-separated parts");
    EXPECT(K.v384, fmt("Bearer .%s", strchr(jwt, '.') + 1), AUTH_UNAUTHORIZED,
           "malformed token: empty header or claims");
    EXPECT(K.v384, xstrdup("Bearer .."), AUTH_UNAUTHORIZED,
           "malformed token: empty header or claims");

    /* Bad base64url: standard-alphabet characters, padding, a space, impossible length, and a
     * non-canonical last character (low bits set). */
    char *t = xstrdup(good);
    char *s = strrchr(t, '.') + 1;
    s[5] = '+';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "malformed token: bad base64url");
    t = xstrdup(good);
    s = strrchr(t, '.') + 1;
    s[5] = '/';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "malformed token: bad base64url");
    EXPECT(K.v384, fmt("%s==", good), AUTH_UNAUTHORIZED, "malformed token: bad base64url");
    EXPECT(K.v384, fmt("%s%%", good), AUTH_UNAUTHORIZED, "malformed token: bad base64url");
    EXPECT(K.v384, fmt("Bearer %.*s .%s", (int)input_len, jwt, sig), AUTH_UNAUTHORIZED,
           "malformed token: bad base64url");
    EXPECT(K.v384, fmt("%sA", good), AUTH_UNAUTHORIZED, "malformed token: bad base64url");
    /* {"a":1} is eyJhIjoxfQ; eyJhIjoxfR has the same bytes with non-zero spare bits. */
    EXPECT(K.v384, xstrdup("Bearer eyJhIjoxfR.eyJhIjoxfQ.AAAA"), AUTH_UNAUTHORIZED,
           "malformed token: bad base64url");

    /* Over the cap: refused before any decoding. */
    size_t big = AUTH_MAX_TOKEN_LEN + 1;
    char *huge = malloc(big + 8);
    assert_non_null(huge);
    memcpy(huge, "Bearer ", 7);
    memset(huge + 7, 'A', big);
    huge[7 + 100] = '.';
    huge[7 + 200] = '.';
    huge[7 + big] = '\0';
    EXPECT(K.v384, huge, AUTH_UNAUTHORIZED, "token too large");
    free(good);
}

static void test_auth_verify_bad_json(void **state)
{
    (void)state;
    /* Header that is not JSON, not an object, has a trailing garbage or an embedded NUL. */
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\""), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "malformed token header");
    EXPECT(K.v384, make_token(K.p384, "ES384", xstrdup("[\"ES384\"]"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "malformed token header");
    EXPECT(K.v384, make_token(K.p384, "ES384", xstrdup(HDR_ES384 "x"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "malformed token header");
    EXPECT(K.v384, xstrdup("Bearer eyJhbGciOiJFUzM4NCJ9AA.eyJhIjoxfQ.AAAA"), AUTH_UNAUTHORIZED,
           "malformed token header");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\",\"alg\":\"none\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "malformed token header");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"typ\":\"JWT\"}"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "missing algorithm");
    EXPECT(K.v384, make_token(K.p384, "ES384", xstrdup("{\"alg\":384}"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "missing algorithm");

    /* Claims that are signed correctly but are not a JSON object. */
    EXPECT(K.v384, es384(K.p384, xstrdup("{\"aud\":")), AUTH_UNAUTHORIZED,
           "malformed token claims");
    EXPECT(K.v384, es384(K.p384, xstrdup("\"just a string\"")), AUTH_UNAUTHORIZED,
           "malformed token claims");
    EXPECT(K.v384, es384(K.p384, xstrdup("")), AUTH_UNAUTHORIZED,
           "malformed token: empty header or claims");
    /* A duplicated claim is ambiguous (first or last wins depends on the library). */
    char *dup =
        fmt("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"someone-else\",\"sub\":\"%s\"}",
            AUTH_AUDIENCE, AUTH_DEFAULT_ISSUER, (long long)(NOW + 60), SUBJ);
    EXPECT(K.v384, es384(K.p384, dup), AUTH_UNAUTHORIZED, "malformed token claims");
}

/* ---------- algorithms ---------- */

static void test_auth_verify_rejected_algorithms(void **state)
{
    (void)state;
    EXPECT(K.v384,
           make_token(NULL, "none", xstrdup("{\"alg\":\"none\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm 'none'");
    EXPECT(K.v384,
           make_token(NULL, "HS256", xstrdup("{\"alg\":\"HS256\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm 'HS256'");
    EXPECT(K.v384,
           make_token(NULL, "HS384", xstrdup("{\"alg\":\"HS384\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm 'HS384'");
    EXPECT(K.vrsa,
           make_token(NULL, "HS512", xstrdup("{\"alg\":\"HS512\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm 'HS512'");
    EXPECT(K.vrsa,
           make_token(K.rsa, "RS256", xstrdup("{\"alg\":\"PS256\"}"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm 'PS256'");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"es384\"}"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported algorithm");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\",\"crit\":[\"exp\"],\"exp\":1}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported critical header parameter");
}

static void test_auth_verify_algorithm_key_mismatch(void **state)
{
    (void)state;
    /* Genuine tokens for other keys, each presented to a verifier of the wrong type or curve. */
    EXPECT(K.v384,
           make_token(K.p256, "ES256", xstrdup("{\"alg\":\"ES256\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "algorithm does not match the key");
    EXPECT(K.v384,
           make_token(K.rsa, "RS256", xstrdup("{\"alg\":\"RS256\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "algorithm does not match the key");
    EXPECT(K.vrsa, es384(K.p384, claims(NOW + 60, SUBJ)), AUTH_UNAUTHORIZED,
           "algorithm does not match the key");
    EXPECT(K.v521, es384(K.p384, claims(NOW + 60, SUBJ)), AUTH_UNAUTHORIZED,
           "algorithm does not match the key");
    /* ES512 means P-521, not "a P-384 key with SHA-512". */
    EXPECT(K.v384,
           make_token(K.p384, "ES512", xstrdup("{\"alg\":\"ES512\"}"), claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "algorithm does not match the key");
}

static void test_auth_verify_valid_algorithms(void **state)
{
    (void)state;
    EXPECT(K.v256,
           make_token(K.p256, "ES256", xstrdup("{\"alg\":\"ES256\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    EXPECT(K.v384, es384(K.p384, claims(NOW + 60, SUBJ)), AUTH_OK, "authorized");
    EXPECT(K.v521,
           make_token(K.p521, "ES512", xstrdup("{\"alg\":\"ES512\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    EXPECT(K.vrsa,
           make_token(K.rsa, "RS256", xstrdup("{\"alg\":\"RS256\",\"typ\":\"JWT\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    EXPECT(K.vrsa,
           make_token(K.rsa, "RS384", xstrdup("{\"alg\":\"RS384\"}"), claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    EXPECT(K.vrsa,
           make_token(K.rsa, "RS512", xstrdup("{\"typ\":\"JWT\",\"alg\":\"RS512\",\"kid\":\"k1\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    /* typ is optional and case-insensitive; any other type is refused. */
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\",\"typ\":\"jwt\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\",\"typ\":\"JWS\"}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported token type");
    EXPECT(K.v384,
           make_token(K.p384, "ES384", xstrdup("{\"alg\":\"ES384\",\"typ\":1}"),
                      claims(NOW + 60, SUBJ)),
           AUTH_UNAUTHORIZED, "unsupported token type");
}

/* ---------- signature ---------- */

static void test_auth_verify_bad_signature(void **state)
{
    (void)state;
    char *good = es384(K.p384, claims(NOW + 3600, SUBJ));
    /* Change the first signature character: still canonical base64url, different bytes. */
    char *t = xstrdup(good);
    char *s = strrchr(t, '.') + 1;
    s[0] = s[0] == 'A' ? 'B' : 'A';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "invalid signature");
    /* Flip a bit in the middle of S. */
    t = xstrdup(good);
    s = strrchr(t, '.') + 1;
    s[80] = s[80] == 'Q' ? 'R' : 'Q';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "invalid signature");
    /* Missing, short and DER-encoded signatures (a common interop mistake). */
    t = xstrdup(good);
    strrchr(t, '.')[1] = '\0';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "invalid signature");
    t = xstrdup(good);
    strrchr(t, '.')[1 + 64] = '\0';
    EXPECT(K.v384, t, AUTH_UNAUTHORIZED, "invalid signature");
    {
        const char *jwt = good + 7;
        size_t input_len = (size_t)(strrchr(jwt, '.') - jwt);
        uint8_t der[256];
        size_t der_len = sizeof(der);
        EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        assert_int_equal(EVP_DigestSignInit_ex(ctx, NULL, "SHA384", NULL, NULL, K.p384, NULL), 1);
        assert_int_equal(EVP_DigestSign(ctx, der, &der_len, (const uint8_t *)jwt, input_len), 1);
        EVP_MD_CTX_free(ctx);
        char *ds = b64url(der, der_len);
        EXPECT(K.v384, fmt("Bearer %.*s.%s", (int)input_len, jwt, ds), AUTH_UNAUTHORIZED,
               "invalid signature");
        free(ds);
    }
    /* Signed by another P-384 key. */
    EXPECT(K.v384, es384(K.p384b, claims(NOW + 3600, SUBJ)), AUTH_UNAUTHORIZED,
           "invalid signature");
    /* Claims swapped after signing: the signature covers them. */
    {
        char *other = es384(K.p384, claims(NOW + 3600, "someone-else"));
        const char *g1 = strchr(good, '.');
        const char *o1 = strchr(other, '.');
        const char *o2 = strrchr(other, '.');
        EXPECT(K.v384,
               fmt("%.*s%.*s%s", (int)(g1 - good), good, (int)(o2 - o1), o1, strrchr(good, '.')),
               AUTH_UNAUTHORIZED, "invalid signature");
        free(other);
    }
    /* RSA: flipped byte. */
    char *r = make_token(K.rsa, "RS256", xstrdup("{\"alg\":\"RS256\"}"), claims(NOW + 60, SUBJ));
    s = strrchr(r, '.') + 1;
    s[10] = s[10] == 'A' ? 'B' : 'A';
    EXPECT(K.vrsa, r, AUTH_UNAUTHORIZED, "invalid signature");
    free(good);
}

/* ---------- claims ---------- */

static void test_auth_verify_claims(void **state)
{
    (void)state;
    const char *A = AUTH_AUDIENCE;
    const char *I = AUTH_DEFAULT_ISSUER;
    long long e = NOW + 3600;
#define TOK(...) es384(K.p384, fmt(__VA_ARGS__))
    EXPECT(K.v384, TOK("{\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", I, e, SUBJ),
           AUTH_UNAUTHORIZED, "missing audience");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s/x\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", A, I, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong audience");
    EXPECT(K.v384,
           TOK("{\"aud\":[\"a\",\"b\"],\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", I, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong audience");
    EXPECT(K.v384, TOK("{\"aud\":[],\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", I, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong audience");
    EXPECT(K.v384, TOK("{\"aud\":7,\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", I, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong audience");
    EXPECT(K.v384,
           TOK("{\"aud\":[\"other\",\"%s\"],\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", A, I, e,
               SUBJ),
           AUTH_OK, "authorized");

    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", A, e, SUBJ),
           AUTH_UNAUTHORIZED, "missing issuer");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"evil\",\"exp\":%lld,\"sub\":\"%s\"}", A, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong issuer");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":null,\"exp\":%lld,\"sub\":\"%s\"}", A, e, SUBJ),
           AUTH_UNAUTHORIZED, "wrong issuer");

    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"sub\":\"%s\"}", A, I, SUBJ),
           AUTH_UNAUTHORIZED, "missing expiration");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":true,\"sub\":\"%s\"}", A, I, SUBJ),
           AUTH_UNAUTHORIZED, "invalid expiration");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":\"soon\",\"sub\":\"%s\"}", A, I, SUBJ),
           AUTH_UNAUTHORIZED, "invalid expiration");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":\"-5\",\"sub\":\"%s\"}", A, I, SUBJ),
           AUTH_UNAUTHORIZED, "invalid expiration");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":1e999,\"sub\":\"%s\"}", A, I, SUBJ),
           AUTH_UNAUTHORIZED, "invalid expiration");
    /* Expired: beyond the skew; at the edge of the skew still accepted. */
    EXPECT(K.v384, es384(K.p384, claims(NOW - AUTH_CLOCK_SKEW_S, SUBJ)), AUTH_UNAUTHORIZED,
           "token expired");
    EXPECT(K.v384, es384(K.p384, claims(NOW - 86400, SUBJ)), AUTH_UNAUTHORIZED, "token expired");
    EXPECT(K.v384, es384(K.p384, claims(NOW - AUTH_CLOCK_SKEW_S + 1, SUBJ)), AUTH_OK, "authorized");
    /* dotnet-monitor's generatekey writes exp as a string of digits; fractions are allowed. */
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":\"%lld\",\"sub\":\"%s\"}", A, I, e, SUBJ),
           AUTH_OK, "authorized");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":\"%lld\",\"sub\":\"%s\"}", A, I,
               (long long)(NOW - 3600), SUBJ),
           AUTH_UNAUTHORIZED, "token expired");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld.5,\"sub\":\"%s\"}", A, I, e, SUBJ),
           AUTH_OK, "authorized");

    /* nbf: in the future beyond the skew is refused, within it accepted. */
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"nbf\":%lld,\"sub\":\"%s\"}", A, I, e,
               (long long)(NOW + AUTH_CLOCK_SKEW_S + 1), SUBJ),
           AUTH_UNAUTHORIZED, "token not yet valid");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"nbf\":%lld,\"sub\":\"%s\"}", A, I, e,
               (long long)(NOW + 10), SUBJ),
           AUTH_OK, "authorized");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"nbf\":[],\"sub\":\"%s\"}", A, I, e,
               SUBJ),
           AUTH_UNAUTHORIZED, "invalid not-before");

    /* Subject: only a token that is otherwise fully valid reaches 403. */
    EXPECT(K.v384, es384(K.p384, claims(NOW + 60, "someone-else")), AUTH_FORBIDDEN,
           "subject not authorized");
    EXPECT(K.v384, es384(K.p384, claims(NOW + 60, "ae5473b6-8dad-498d-b915-53b9c684000")),
           AUTH_FORBIDDEN, "subject not authorized");
    EXPECT(K.v384, es384(K.p384, claims(NOW + 60, SUBJ "f")), AUTH_FORBIDDEN,
           "subject not authorized");
    EXPECT(K.v384, es384(K.p384, claims(NOW + 60, "AE5473B6-8DAD-498D-B915-53B9C684000E")),
           AUTH_FORBIDDEN, "subject not authorized");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld}", A, I, e), AUTH_FORBIDDEN,
           "subject not authorized");
    EXPECT(K.v384, TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":42}", A, I, e),
           AUTH_FORBIDDEN, "subject not authorized");
    /* A NUL escaped into a claim must not cut it short: "<subject>\u0000x" is not the
     * subject (cJSON would hand back a C string that stops at the NUL), nor is an audience with
     * a NUL before junk the audience. Such claims are malformed. */
    EXPECT(
        K.v384,
        TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\\u0000x\"}", A, I, e, SUBJ),
        AUTH_UNAUTHORIZED, "malformed token claims");
    EXPECT(K.v384,
           TOK("{\"aud\":\"%s\\u0000evil\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\"}", A, I, e,
               SUBJ),
           AUTH_UNAUTHORIZED, "malformed token claims");
    /* An escaped backslash followed by "u0000" is text, not a NUL. */
    EXPECT(
        K.v384,
        TOK("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"%s\\\\u0000\"}", A, I, e, SUBJ),
        AUTH_FORBIDDEN, "subject not authorized");
    EXPECT(K.v384, es384(K.p384, claims(NOW - 86400, "someone-else")), AUTH_UNAUTHORIZED,
           "token expired");
    EXPECT(K.v384, TOK("{\"aud\":\"x\",\"iss\":\"%s\",\"exp\":%lld,\"sub\":\"other\"}", I, e),
           AUTH_UNAUTHORIZED, "wrong audience");
    EXPECT(K.v384, es384(K.p384b, claims(NOW + 60, "someone-else")), AUTH_UNAUTHORIZED,
           "invalid signature");
#undef TOK
}

/*
 * Output of Microsoft.IdentityModel 8 (the library dotnet-monitor uses) running the same steps
 * as GeneratedJwtKey.Create: note "exp" as a string and the JWK's empty key_ops/oth/x5c. The
 * private key was discarded; the token is only valid for this public key, which is why it can
 * live in a test.
 */
static const char dotnet_pk[] =
    "eyJjcnYiOiJQLTM4NCIsImtleV9vcHMiOltdLCJrdHkiOiJFQyIsIm90aCI6W10sIngiOiIzS2xoMFBlM1lrMFhIeERQ"
    "aXhEWjVabFc0aERnOXpRQjdSdHNqS1NEWDd5NE9QdDhhZk9wN0czeFljcDA1dUJ3IiwieDVjIjpbXSwieSI6IkpVMWVl"
    "MVdUczN1ZlM5T2lSUGR2c0FFRUhYbnhhTXk0dW5FT3IycHNGMnc2aVM4Vnl4eWJHTWMyTGNQak5ReWQifQ";
static const char dotnet_sub[] = "a5a10c8e-4e6e-4f6d-8965-bd9b050e6cc9";
static const char dotnet_token[] =
    "eyJhbGciOiJFUzM4NCIsInR5cCI6IkpXVCJ9.eyJhdWQiOiJodHRwczovL2dpdGh1Yi5jb20vZG90bmV0L2RvdG5ldC1t"
    "b25pdG9yIiwiZXhwIjoiMTc5NTkwNTIwMiIsImlzcyI6Imh0dHBzOi8vZ2l0aHViLmNvbS9kb3RuZXQvZG90bmV0LW1v"
    "bml0b3IvZ2VuZXJhdGVrZXkrTW9uaXRvckFwaUtleSIsInN1YiI6ImE1YTEwYzhlLTRlNmUtNGY2ZC04OTY1LWJkOWIw"
    "NTBlNmNjOSJ9.VVZQB4u88ZT3nVOjlh5En6CD17OE3MATw2GxcBwYE7vfl02yICHLR9m1M2LZa7FfknJBVvu6EI5j_wws"
    "Uk4RLwS_1diJkaZlwCX6DLoyDszHqsSLZh5NiwdG0domupEE";

static void test_auth_verify_dotnet_generatekey_output(void **state)
{
    (void)state;
    struct auth_verifier *v = NULL;
    const char *warning = "unset";
    char err[128];
    assert_int_equal(auth_verifier_new(dotnet_pk, dotnet_sub, NULL, &v, &warning, err, sizeof(err)),
                     0);
    assert_null(warning); /* "oth": [] is not private material */
    const char *why = NULL;
    char *authz = fmt("Bearer %s", dotnet_token);
    assert_int_equal(auth_verify(v, authz, 1795905202 - 3600, &why), AUTH_OK);
    assert_int_equal(auth_verify(v, authz, 1795905202 + AUTH_CLOCK_SKEW_S, &why),
                     AUTH_UNAUTHORIZED);
    assert_string_equal(why, "token expired");
    free(authz);
    auth_verifier_free(v);
}

/* ---------- JWK parsing ---------- */

static int new_verifier(const char *pk, const char **warning, char *err, size_t errlen)
{
    struct auth_verifier *v = NULL;
    int rc = auth_verifier_new(pk, SUBJ, NULL, &v, warning, err, errlen);
    if (rc == 0) {
        assert_non_null(v);
    } else {
        assert_null(v);
    }
    auth_verifier_free(v);
    return rc;
}

/* Expects pk (owned) to be rejected with a reason containing `want`. */
static void expect_bad_key_at(int line, char *pk, const char *want)
{
    char err[256] = "";
    int rc = new_verifier(pk, NULL, err, sizeof(err));
    free(pk);
    if (rc != AGENT_E_INVAL || strstr(err, want) == NULL) {
        fail_msg("line %d: rc %d reason '%s', want '%s'", line, rc, err, want);
    }
}

#define EXPECT_BAD_KEY(pk, want) expect_bad_key_at(__LINE__, (pk), (want))

/* Overwrites the start of dst with src, without its NUL: in-place edits of JSON text. */
static void overwrite(char *dst, const char *src)
{
    assert_non_null(dst);
    for (; *src != '\0'; src++, dst++) {
        *dst = *src;
    }
}

static char *b64_json(char *json)
{
    char *b = b64url_str(json);
    free(json);
    return b;
}

static void test_auth_jwk_private_members_warn(void **state)
{
    (void)state;
    const char *warning = NULL;
    char err[128];
    char *pk = b64_json(jwk_json(K.p384, "", 1, 0));
    assert_int_equal(new_verifier(pk, &warning, err, sizeof(err)), 0);
    assert_non_null(warning);
    assert_non_null(strstr(warning, "private"));
    free(pk);
    /* With a private key in the JWK the verifier still only verifies. */
    struct auth_verifier *v = NULL;
    pk = b64_json(jwk_json(K.rsa, "", 1, 0));
    warning = NULL;
    assert_int_equal(auth_verifier_new(pk, SUBJ, NULL, &v, &warning, err, sizeof(err)), 0);
    assert_non_null(warning);
    EXPECT(v, make_token(K.rsa, "RS256", xstrdup("{\"alg\":\"RS256\"}"), claims(NOW + 60, SUBJ)),
           AUTH_OK, "authorized");
    auth_verifier_free(v);
    free(pk);
    /* A non-empty "oth" (extra RSA primes) is private material too; an empty one is not. */
    pk = b64_json(jwk_json(K.rsa, "\"oth\":[{\"r\":\"AQ\"}],", 0, 0));
    warning = NULL;
    assert_int_equal(new_verifier(pk, &warning, err, sizeof(err)), 0);
    assert_non_null(warning);
    free(pk);
    pk = b64_json(jwk_json(K.rsa, "\"oth\":[],\"key_ops\":[],\"x5c\":[],", 0, 0));
    warning = "unset";
    assert_int_equal(new_verifier(pk, &warning, err, sizeof(err)), 0);
    assert_null(warning);
    free(pk);
}

static void test_auth_jwk_accepted_forms(void **state)
{
    (void)state;
    char err[128];
    /* Old dotnet-monitor versions serialized JsonWebKey with PascalCase names. */
    char *json = jwk_json(K.p384,
                          "\"AdditionalData\":{},\"KeyOps\":[],\"X5c\":[],\"KeySize\":384,"
                          "\"HasPrivateKey\":false,",
                          0, 0);
    static const char *const from[] = {"\"kty\"", "\"crv\"", "\"x\"", "\"y\""};
    static const char *const to[] = {"\"Kty\"", "\"Crv\"", "\"X\"", "\"Y\""};
    for (size_t i = 0; i < 4; i++) {
        char *p = strstr(json, from[i]);
        assert_non_null(p);
        overwrite(p, to[i]);
    }
    char *pk = b64_json(json);
    struct auth_verifier *v = NULL;
    assert_int_equal(auth_verifier_new(pk, SUBJ, NULL, &v, NULL, err, sizeof(err)), 0);
    EXPECT(v, es384(K.p384, claims(NOW + 60, SUBJ)), AUTH_OK, "authorized");
    auth_verifier_free(v);
    free(pk);

    /* Padding and surrounding whitespace (a key read from a file) are tolerated. */
    pk = jwk_b64(K.p384);
    size_t n = strlen(pk);
    char *padded = fmt("  %s%s\n", pk, n % 4 == 2 ? "==" : n % 4 == 3 ? "=" : "");
    assert_int_equal(new_verifier(padded, NULL, err, sizeof(err)), 0);
    free(padded);
    free(pk);

    /* An explicit empty issuer means the default one. */
    pk = jwk_b64(K.p384);
    v = NULL;
    assert_int_equal(auth_verifier_new(pk, SUBJ, "", &v, NULL, err, sizeof(err)), 0);
    EXPECT(v, es384(K.p384, claims(NOW + 60, SUBJ)), AUTH_OK, "authorized");
    auth_verifier_free(v);
    free(pk);
}

static void test_auth_jwk_rejected(void **state)
{
    (void)state;
    EXPECT_BAD_KEY(xstrdup("!!!not base64!!!"), "base64url");
    EXPECT_BAD_KEY(xstrdup("abcde"), "base64url");
    EXPECT_BAD_KEY(xstrdup(""), "empty");
    EXPECT_BAD_KEY(b64url_str("not json at all"), "JSON");
    EXPECT_BAD_KEY(b64url_str("[1,2,3]"), "not an object");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"EC\"} trailing"), "JSON");
    EXPECT_BAD_KEY(b64url_str("{\"crv\":\"P-384\"}"), "kty");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"oct\",\"k\":\"c2VjcmV0\"}"), "unsupported key type");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"OKP\",\"crv\":\"Ed25519\",\"x\":\"AAAA\"}"),
                   "unsupported key type");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"EC\",\"x\":\"AAAA\",\"y\":\"AAAA\"}"), "crv");
    {
        /* Wrong curve name for the coordinates, and unsupported curves. */
        char *json = jwk_json(K.p384, "", 0, 0);
        overwrite(strstr(json, "P-384"), "P-256");
        EXPECT_BAD_KEY(b64_json(json), "wrong length");
        json = jwk_json(K.p384, "", 0, 0);
        overwrite(strstr(json, "P-384"), "P-192");
        EXPECT_BAD_KEY(b64_json(json), "unsupported EC curve");
        json = jwk_json(K.p256, "", 0, 0);
        char *json2 = fmt("%.*ssecp256k1%s", (int)(strstr(json, "P-256") - json), json,
                          strstr(json, "P-256") + 5);
        free(json);
        EXPECT_BAD_KEY(b64_json(json2), "unsupported EC curve");
    }
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\"}"), "'x' or 'y'");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"AAAA\",\"y\":7}"),
                   "'x' or 'y'");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"A!\",\"y\":\"AAAA\"}"),
                   "base64url");
    EXPECT_BAD_KEY(b64_json(jwk_json(K.p256, "", 0, 1)), "not on the curve");
    EXPECT_BAD_KEY(b64_json(jwk_json(K.p384, "", 0, 1)), "not on the curve");
    EXPECT_BAD_KEY(b64_json(jwk_json(K.p521, "", 0, 1)), "not on the curve");
    {
        /* The point at infinity can't even be written as 0x04 || 0 || 0 on these curves. */
        char *zero = b64url((const uint8_t[48]){0}, 48);
        EXPECT_BAD_KEY(b64_json(fmt("{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"%s\",\"y\":\"%s\"}",
                                    zero, zero)),
                       "not on the curve");
        free(zero);
    }
    EXPECT_BAD_KEY(b64_json(jwk_json(K.rsa1024, "", 0, 0)), "shorter than 2048 bits");
    EXPECT_BAD_KEY(b64url_str("{\"kty\":\"RSA\",\"n\":\"AQAB\"}"), "'n' or 'e'");
    {
        char *n = bn_b64(K.rsa, OSSL_PKEY_PARAM_RSA_N, 0);
        EXPECT_BAD_KEY(b64_json(fmt("{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQ\"}", n)), "exponent");
        EXPECT_BAD_KEY(b64_json(fmt("{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AAI\"}", n)),
                       "exponent");
        EXPECT_BAD_KEY(b64_json(fmt("{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"\"}", n)), "exponent");
        free(n);
        /* 16385 bits of 0xff..: too long. */
        uint8_t big[2049];
        memset(big, 0xff, sizeof(big));
        big[0] = 1;
        char *bn = b64url(big, sizeof(big));
        EXPECT_BAD_KEY(b64_json(fmt("{\"kty\":\"RSA\",\"n\":\"%s\",\"e\":\"AQAB\"}", bn)),
                       "longer than 16384");
        free(bn);
    }

    /* Empty or missing subject, missing key, missing output. */
    char err[256];
    struct auth_verifier *v = NULL;
    char *pk = jwk_b64(K.p384);
    assert_int_equal(auth_verifier_new(pk, "", NULL, &v, NULL, err, sizeof(err)), AGENT_E_INVAL);
    assert_non_null(strstr(err, "subject"));
    assert_int_equal(auth_verifier_new(pk, NULL, NULL, &v, NULL, err, sizeof(err)), AGENT_E_INVAL);
    assert_int_equal(auth_verifier_new(NULL, SUBJ, NULL, &v, NULL, err, sizeof(err)),
                     AGENT_E_INVAL);
    assert_int_equal(auth_verifier_new(pk, SUBJ, NULL, NULL, NULL, err, sizeof(err)),
                     AGENT_E_INVAL);
    assert_null(v);
    /* A tiny error buffer is truncated, not overrun; a NULL one is fine. */
    char tiny[6];
    assert_int_equal(auth_verifier_new("%%%", SUBJ, NULL, &v, NULL, tiny, sizeof(tiny)),
                     AGENT_E_INVAL);
    assert_int_equal(strlen(tiny), sizeof(tiny) - 1);
    assert_int_equal(auth_verifier_new("%%%", SUBJ, NULL, &v, NULL, NULL, 0), AGENT_E_INVAL);
    free(pk);
}

static void test_auth_jwk_reason_has_no_key_material(void **state)
{
    (void)state;
    /* A point off the curve: the reason must not quote x, y or the encoded key. */
    char *json = jwk_json(K.p384, "", 1, 1);
    char *pk = b64url_str(json);
    char err[512] = "";
    assert_int_equal(new_verifier(pk, NULL, err, sizeof(err)), AGENT_E_INVAL);
    const char *x = strstr(json, "\"x\":\"") + 5;
    const char *d = strstr(json, "\"d\":\"") + 5;
    assert_null(strstr(err, "\"x\""));
    const char *secrets[] = {x, d, pk};
    for (size_t i = 0; i < 3; i++) {
        char probe[9] = {0};
        memcpy(probe, secrets[i], sizeof(probe) - 1);
        assert_null(strstr(err, probe));
    }
    free(pk);
    free(json);
}

static void test_auth_str_equal(void **state)
{
    (void)state;
    assert_true(auth_str_equal("", ""));
    assert_true(auth_str_equal("abc", "abc"));
    assert_false(auth_str_equal("abc", "abd"));
    assert_false(auth_str_equal("abc", "abcd"));
    assert_false(auth_str_equal("abcd", "abc"));
    assert_false(auth_str_equal("", "a"));
    assert_false(auth_str_equal(NULL, "a"));
    assert_false(auth_str_equal("a", NULL));
}

/* --print-generated: one auth_generate() result for the .NET cross-check. */
static int print_generated(void)
{
    struct auth_generated g;
    int rc = auth_generate((int64_t)time(NULL), 3600, NULL, &g);
    if (rc != 0) {
        (void)fprintf(stderr, "auth_generate: %s\n", agent_strerror(rc));
        return 1;
    }
    printf("%s\n%s\n%s\n", g.public_key_b64, g.subject, g.token);
    auth_generated_fini(&g);
    return 0;
}

static size_t cached_slots(const struct auth_verifier *v)
{
    size_t n = 0;
    for (size_t i = 0; i < AUTH_CACHE_SLOTS; i++) {
        n += v->accepted[i].until != 0;
    }
    return n;
}

static void expect_cached_at(int line, struct auth_verifier *v, const char *authz, int64_t now,
                             enum auth_result want, const char *want_why)
{
    const char *why = NULL;
    enum auth_result got = auth_verify_cached(v, authz, now, &why);
    if (got != want || why == NULL || strcmp(why, want_why) != 0) {
        fail_msg("line %d: got %d '%s', want %d '%s'", line, (int)got, why ? why : "(null)",
                 (int)want, want_why);
    }
}
#define EXPECT_CACHED(v, a, now, res, why) expect_cached_at(__LINE__, (v), (a), (now), (res), (why))

/* The memory of accepted tokens: exact bytes only, until exp + skew, refusals never kept. */
static void test_auth_verify_cached(void **state)
{
    (void)state;
    struct auth_verifier *v = verifier_for(K.p384);
    char *good = es384(K.p384, claims(NOW + 100, SUBJ));
    EXPECT_CACHED(v, good, NOW, AUTH_OK, "authorized");
    assert_int_equal(cached_slots(v), 1);
    EXPECT_CACHED(v, good, NOW + 1, AUTH_OK, "authorized");
    assert_int_equal(cached_slots(v), 1); /* a hit adds nothing */
    EXPECT_CACHED(v, good, NOW + 100 + AUTH_CLOCK_SKEW_S - 1, AUTH_OK, "authorized");
    /* Past exp + skew the memory does not help: the full check says expired. */
    EXPECT_CACHED(v, good, NOW + 100 + AUTH_CLOCK_SKEW_S, AUTH_UNAUTHORIZED, "token expired");

    /* One byte more, less or different is another token, checked in full. */
    char *longer = fmt("%sx", good);
    assert_int_equal(auth_verify_cached(v, longer, NOW, NULL), AUTH_UNAUTHORIZED);
    char *shorter = xstrdup(good);
    shorter[strlen(shorter) - 1] = '\0';
    assert_int_equal(auth_verify_cached(v, shorter, NOW, NULL), AUTH_UNAUTHORIZED);
    char *tampered = xstrdup(good);
    char *last = tampered + strlen(tampered) - 1;
    *last = *last == 'A' ? 'B' : 'A';
    EXPECT_CACHED(v, tampered, NOW, AUTH_UNAUTHORIZED, "invalid signature");
    free(tampered);
    assert_int_equal(cached_slots(v), 1);

    /* Refusals are not remembered: 403 stays 403 with its reason. */
    char *other = es384(K.p384, claims(NOW + 100, "someone-else"));
    EXPECT_CACHED(v, other, NOW, AUTH_FORBIDDEN, "subject not authorized");
    EXPECT_CACHED(v, other, NOW, AUTH_FORBIDDEN, "subject not authorized");
    assert_int_equal(cached_slots(v), 1);

    /* Another key's verifier (a rotation) does not know the token. */
    struct auth_verifier *rotated = verifier_for(K.p384b);
    EXPECT_CACHED(rotated, good, NOW, AUTH_UNAUTHORIZED, "invalid signature");
    assert_int_equal(cached_slots(rotated), 0);
    auth_verifier_free(rotated);

    /* More tokens than slots: the oldest is forgotten, and still verifies in full. */
    for (int i = 0; i < AUTH_CACHE_SLOTS; i++) {
        char *t = es384(K.p384, claims(NOW + 200 + i, SUBJ));
        EXPECT_CACHED(v, t, NOW, AUTH_OK, "authorized");
        free(t);
    }
    assert_int_equal(cached_slots(v), AUTH_CACHE_SLOTS);
    EXPECT_CACHED(v, good, NOW, AUTH_OK, "authorized");

    /* A far-future exp given as a huge JSON number is clamped, not undefined behaviour. */
    char *far = es384(K.p384, fmt("{\"aud\":\"%s\",\"iss\":\"%s\",\"exp\":1e300,\"sub\":\"%s\"}",
                                  AUTH_AUDIENCE, AUTH_DEFAULT_ISSUER, SUBJ));
    EXPECT_CACHED(v, far, NOW, AUTH_OK, "authorized");
    EXPECT_CACHED(v, far, INT64_MAX - 1, AUTH_OK, "authorized");

    EXPECT_CACHED(v, NULL, NOW, AUTH_UNAUTHORIZED, "missing Authorization header");
    EXPECT_CACHED(NULL, good, NOW, AUTH_UNAUTHORIZED, "authentication is not configured");
    free(far);
    free(other);
    free(shorter);
    free(longer);
    free(good);
    auth_verifier_free(v);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--print-generated") == 0) {
        return print_generated();
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_generate_round_trip),
        cmocka_unit_test(test_auth_generate_issuer_and_args),
        cmocka_unit_test(test_auth_verify_header_value),
        cmocka_unit_test(test_auth_verify_token_shape),
        cmocka_unit_test(test_auth_verify_bad_json),
        cmocka_unit_test(test_auth_verify_rejected_algorithms),
        cmocka_unit_test(test_auth_verify_algorithm_key_mismatch),
        cmocka_unit_test(test_auth_verify_valid_algorithms),
        cmocka_unit_test(test_auth_verify_bad_signature),
        cmocka_unit_test(test_auth_verify_claims),
        cmocka_unit_test(test_auth_verify_dotnet_generatekey_output),
        cmocka_unit_test(test_auth_jwk_private_members_warn),
        cmocka_unit_test(test_auth_jwk_accepted_forms),
        cmocka_unit_test(test_auth_jwk_rejected),
        cmocka_unit_test(test_auth_jwk_reason_has_no_key_material),
        cmocka_unit_test(test_auth_str_equal),
        cmocka_unit_test(test_auth_verify_cached),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
