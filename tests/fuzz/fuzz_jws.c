/* SPDX-License-Identifier: MIT */
#include "fuzz_jws.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/pem.h>

/* Test key only (see fuzz_jws.h). Generated with `openssl genpkey -algorithm EC
 * -pkeyopt ec_paramgen_curve:P-256`. */
static const char fuzz_key_pem[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgORBmn/7ArUCORi7r\n"
    "BlrbH/87D0rOpkzoQXYdiCvfH4ahRANCAAScq6DXGjCu3GkmYgP/AaRB3FM2VSRn\n"
    "2GIgt/eQ5Tu2mpzqoyFPun7dNv9/QvF/w8dHJNTSY56j/SWYDfAEYxDF\n"
    "-----END PRIVATE KEY-----\n";

/* base64url of {"kty":"EC","crv":"P-256","x":"nKug1xowrtxpJmID_wGkQdxTNlUkZ9hiILf3kOU7tpo",
 * "y":"nOqjIU-6ft02_39C8X_Dx0ck1NJjnqP9JZgN8ARjEMU"}, the public half of the key above. */
const char fuzz_jwk_b64[] =
    "eyJrdHkiOiJFQyIsImNydiI6IlAtMjU2IiwieCI6Im5LdWcxeG93cnR4cEptSURfd0drUWR4VE5sVWtaOWhpSUxmM2"
    "tPVTd0cG8iLCJ5Ijoibk9xaklVLTZmdDAyXzM5QzhYX0R4MGNrMU5Kam5xUDlKWmdOOEFSakVNVSJ9";

EVP_PKEY *fuzz_jws_key(void)
{
    BIO *bio = BIO_new_mem_buf(fuzz_key_pem, (int)(sizeof(fuzz_key_pem) - 1));
    if (bio == NULL) {
        return NULL;
    }
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return key;
}

char *fuzz_b64url(const void *p, size_t n)
{
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    const uint8_t *in = p;
    char *out = malloc(n / 3 * 4 + 4 + 1);
    if (out == NULL) {
        return NULL;
    }
    size_t o = 0;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = a[v >> 6 & 63];
        out[o++] = a[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        out[o++] = a[v >> 18 & 63];
        out[o++] = a[v >> 12 & 63];
        out[o++] = a[v >> 6 & 63];
    }
    out[o] = '\0';
    return out;
}

/* ES256 over input: DER from OpenSSL, converted to the 64-byte R || S of RFC 7518 3.4. */
static int sign_es256(EVP_PKEY *key, const char *input, size_t len, uint8_t raw[64])
{
    int rc = -1;
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    unsigned char der[128];
    size_t der_len = sizeof(der);
    ECDSA_SIG *sig = NULL;
    if (md == NULL || EVP_DigestSignInit(md, NULL, EVP_sha256(), NULL, key) != 1 ||
        EVP_DigestSign(md, der, &der_len, (const unsigned char *)input, len) != 1) {
        goto out;
    }
    const unsigned char *p = der;
    sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (sig == NULL || BN_bn2binpad(ECDSA_SIG_get0_r(sig), raw, 32) != 32 ||
        BN_bn2binpad(ECDSA_SIG_get0_s(sig), raw + 32, 32) != 32) {
        goto out;
    }
    rc = 0;
out:
    ECDSA_SIG_free(sig);
    EVP_MD_CTX_free(md);
    return rc;
}

char *fuzz_jws_sign(EVP_PKEY *key, const void *hdr, size_t hdr_len, const void *claims,
                    size_t claims_len)
{
    char *h = fuzz_b64url(hdr, hdr_len);
    char *c = fuzz_b64url(claims, claims_len);
    char *s = NULL;
    char *tok = NULL;
    uint8_t raw[64];
    if (h == NULL || c == NULL) {
        goto out;
    }
    size_t hl = strlen(h);
    size_t cl = strlen(c);
    tok = malloc(hl + 1 + cl + 1 + 86 + 1);
    if (tok == NULL) {
        goto out;
    }
    memcpy(tok, h, hl);
    tok[hl] = '.';
    memcpy(tok + hl + 1, c, cl + 1);
    if (sign_es256(key, tok, hl + 1 + cl, raw) != 0 ||
        (s = fuzz_b64url(raw, sizeof(raw))) == NULL) {
        free(tok);
        tok = NULL;
        goto out;
    }
    tok[hl + 1 + cl] = '.';
    memcpy(tok + hl + 1 + cl + 1, s, strlen(s) + 1);
out:
    free(h);
    free(c);
    free(s);
    return tok;
}
