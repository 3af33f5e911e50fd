/* SPDX-License-Identifier: MIT */
/*
 * The equivalent of `dotnet-monitor generatekey` (dotnet-monitor
 * src/Tools/dotnet-monitor/Auth/ApiKey/GeneratedJwtKey.cs): a fresh P-384 key pair, a random
 * GUID subject, and an ES384 JWT with aud, exp, iss and sub signed by the private key, which is
 * then thrown away. Only the public key (as a base64url JWK) and the subject go into the
 * configuration; the token goes to the user. The output is standard JOSE, so a real
 * dotnet-monitor accepts it (tests/auth/jwtcheck checks that independently with .NET).
 */
#include "auth.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "auth_internal.h"
#include "buf.h"
#include "err.h"
#include "hex.h"

#define P384_COORD 48
/* The token is a few hundred bytes; the cap only bounds a pathological issuer string. */
#define GEN_MAX_LEN ((size_t)65536)

/* A version 4 (random) UUID in the "D" form Guid.ToString("D") prints: lowercase 8-4-4-4-12. */
static int random_guid(char out[37])
{
    uint8_t b[16];
    if (RAND_bytes(b, sizeof(b)) != 1) {
        return AGENT_E_INVAL;
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40); /* version 4 */
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    hex_guid_bytes(b, out);
    return 0;
}

/* Appends base64url(data) to b. */
static int append_b64url(struct buf *b, const void *data, size_t n)
{
    size_t m = auth__b64url_encoded_len(n);
    int rc = buf_reserve(b, m);
    if (rc != 0) {
        return rc;
    }
    /* buf_reserve keeps one spare byte, which takes the encoder's NUL. */
    auth__b64url_encode(data, n, (char *)b->p + b->len);
    b->len += m;
    return 0;
}

/* Frees a string that may be a secret (the token), wiping it first. */
static void free_secret(char *s)
{
    if (s != NULL) {
        OPENSSL_cleanse(s, strlen(s));
        free(s);
    }
}

/* ES384 over signing_input, returned as JOSE R || S (96 bytes). */
static int sign_es384(EVP_PKEY *pkey, const void *signing_input, size_t n,
                      uint8_t raw[2 * P384_COORD])
{
    int rc = AGENT_E_INVAL;
    uint8_t der[2 * P384_COORD + 16]; /* SEQUENCE of two INTEGERs of at most 49 bytes */
    size_t der_len = sizeof(der);
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    if (md == NULL) {
        return -ENOMEM;
    }
    if (EVP_DigestSignInit_ex(md, NULL, "SHA384", NULL, NULL, pkey, NULL) != 1 ||
        EVP_DigestSign(md, der, &der_len, signing_input, n) != 1) {
        goto out;
    }
    rc = auth__ecdsa_der_to_raw(der, der_len, P384_COORD, raw);
out:
    EVP_MD_CTX_free(md);
    return rc;
}

/* Claims in the order dotnet-monitor writes them. exp is a JSON number (RFC 7519 2), which every
 * JWT library reads; dotnet-monitor's own tokens happen to carry it as a string. */
static int build_claims(struct buf *b, int64_t exp, const char *iss, const char *sub)
{
    int rc = buf_printf(b, "{\"aud\":\"%s\",\"exp\":%" PRId64 ",\"iss\":\"", AUTH_AUDIENCE, exp);
    if (rc == 0) {
        rc = buf_append_json_escaped(b, iss);
    }
    if (rc == 0) {
        rc = buf_printf(b, "\",\"sub\":\"%s\"}", sub);
    }
    return rc;
}

/* header.claims.signature, all base64url, into tok. */
static int build_token(struct buf *tok, EVP_PKEY *pkey, const struct buf *claims)
{
    static const char header[] = "{\"alg\":\"ES384\",\"typ\":\"JWT\"}";
    uint8_t sig[2 * P384_COORD];
    int rc = append_b64url(tok, header, sizeof(header) - 1);
    if (rc == 0) {
        rc = buf_append(tok, ".", 1);
    }
    if (rc == 0) {
        rc = append_b64url(tok, buf_data(claims), buf_size(claims));
    }
    if (rc == 0) {
        rc = sign_es384(pkey, buf_data(tok), buf_size(tok), sig);
    }
    if (rc == 0) {
        rc = buf_append(tok, ".", 1);
    }
    if (rc == 0) {
        rc = append_b64url(tok, sig, sizeof(sig));
    }
    OPENSSL_cleanse(sig, sizeof(sig));
    return rc;
}

/*
 * The configuration value: base64url of the JWK {"kty","crv","x","y"}, public part only, with
 * both coordinates at their fixed 48-byte width (RFC 7518 6.2.1.2). point is SEC 1
 * uncompressed, 0x04 || X || Y.
 */
static int build_public_key(struct buf *out, const uint8_t point[1 + 2 * P384_COORD])
{
    struct buf jwk;
    buf_init(&jwk, GEN_MAX_LEN);
    int rc = buf_append_str(&jwk, "{\"kty\":\"EC\",\"crv\":\"P-384\",\"x\":\"");
    if (rc == 0) {
        rc = append_b64url(&jwk, point + 1, P384_COORD);
    }
    if (rc == 0) {
        rc = buf_append_str(&jwk, "\",\"y\":\"");
    }
    if (rc == 0) {
        rc = append_b64url(&jwk, point + 1 + P384_COORD, P384_COORD);
    }
    if (rc == 0) {
        rc = buf_append_str(&jwk, "\"}");
    }
    if (rc == 0) {
        rc = append_b64url(out, buf_data(&jwk), buf_size(&jwk));
    }
    buf_fini(&jwk);
    return rc;
}

int auth_generate(int64_t now, int64_t lifetime_s, const char *issuer, struct auth_generated *out)
{
    int rc;
    EVP_PKEY *pkey = NULL;
    struct buf tok;
    struct buf claims;
    struct buf pub;
    struct auth_generated g = {0};
    uint8_t point[1 + 2 * P384_COORD];
    size_t point_len = 0;
    char guid[37];

    buf_init(&tok, GEN_MAX_LEN);
    buf_init(&claims, GEN_MAX_LEN);
    buf_init(&pub, GEN_MAX_LEN);
    if (out == NULL || lifetime_s <= 0 || now > INT64_MAX - lifetime_s) {
        rc = AGENT_E_INVAL;
        goto out;
    }
    const char *iss = issuer != NULL && issuer[0] != '\0' ? issuer : AUTH_DEFAULT_ISSUER;
    g.expires = now + lifetime_s;

    pkey = EVP_EC_gen("secp384r1");
    if (pkey == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof(point),
                                        &point_len) != 1 ||
        point_len != sizeof(point) || point[0] != 0x04) {
        rc = AGENT_E_INVAL;
        goto out;
    }
    rc = random_guid(guid);
    if (rc == 0) {
        rc = build_claims(&claims, g.expires, iss, guid);
    }
    if (rc == 0) {
        rc = build_token(&tok, pkey, &claims);
    }
    if (rc == 0) {
        rc = build_public_key(&pub, point);
    }
    if (rc != 0) {
        goto out;
    }
    g.token = buf_steal(&tok, NULL);
    g.public_key_b64 = buf_steal(&pub, NULL);
    g.subject = strdup(guid);
    g.issuer = strdup(iss);
    if (g.token == NULL || g.public_key_b64 == NULL || g.subject == NULL || g.issuer == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    *out = g;
    memset(&g, 0, sizeof(g));
    rc = 0;
out:
    auth_generated_fini(&g);
    /* tok holds the bearer credential if we failed after signing. */
    if (tok.p != NULL) {
        OPENSSL_cleanse(tok.p, tok.cap);
    }
    buf_fini(&tok);
    buf_fini(&claims);
    buf_fini(&pub);
    OPENSSL_cleanse(guid, sizeof(guid));
    EVP_PKEY_free(pkey); /* frees (and clears) the private key: nothing can sign again */
    return rc;
}

void auth_generated_fini(struct auth_generated *g)
{
    if (g == NULL) {
        return;
    }
    free_secret(g->token);
    free_secret(g->subject);
    free_secret(g->public_key_b64);
    free(g->issuer);
    memset(g, 0, sizeof(*g));
}
