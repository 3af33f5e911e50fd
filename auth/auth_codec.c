/* SPDX-License-Identifier: MIT */
/*
 * Encodings the JOSE specs use: base64url without padding (RFC 7515 section 2) and ECDSA
 * signatures as fixed-width R || S (RFC 7518 section 3.4), which OpenSSL only speaks as DER.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>

#include "auth_internal.h"
#include "err.h"

static const char b64url_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

size_t auth__b64url_encoded_len(size_t n)
{
    /* 4 characters per full 3-byte group, then 2 or 3 for a 1- or 2-byte tail. */
    return n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

void auth__b64url_encode(const uint8_t *in, size_t n, char *out)
{
    size_t i = 0;
    char *o = out;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
        *o++ = b64url_alphabet[v >> 18 & 63];
        *o++ = b64url_alphabet[v >> 12 & 63];
        *o++ = b64url_alphabet[v >> 6 & 63];
        *o++ = b64url_alphabet[v & 63];
    }
    if (n - i == 1) {
        uint32_t v = (uint32_t)in[i] << 16;
        *o++ = b64url_alphabet[v >> 18 & 63];
        *o++ = b64url_alphabet[v >> 12 & 63];
    } else if (n - i == 2) {
        uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
        *o++ = b64url_alphabet[v >> 18 & 63];
        *o++ = b64url_alphabet[v >> 12 & 63];
        *o++ = b64url_alphabet[v >> 6 & 63];
    }
    *o = '\0';
}

/* Value of one base64url character, or -1. Only the URL-safe alphabet: '+' and '/' are bad. */
static int b64url_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '-') {
        return 62;
    }
    if (c == '_') {
        return 63;
    }
    return -1;
}

int auth__b64url_decode(const char *in, size_t n, bool strict, uint8_t **out, size_t *out_len)
{
    if (!strict) {
        /* Configuration tools sometimes keep the padding; it carries no information. At most
         * two '=' can be padding, and only when the total is a multiple of four. */
        size_t pad = 0;
        while (pad < 2 && n > pad && in[n - 1 - pad] == '=') {
            pad++;
        }
        if (pad > 0 && n % 4 != 0) {
            return AGENT_E_INVAL;
        }
        n -= pad;
    }
    /* A single leftover character can't encode a whole byte. */
    if (n % 4 == 1) {
        return AGENT_E_INVAL;
    }
    size_t len = n / 4 * 3 + (n % 4 ? n % 4 - 1 : 0);
    uint8_t *p = malloc(len + 1);
    if (p == NULL) {
        return -ENOMEM;
    }
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64url_value((unsigned char)in[i]);
        if (v < 0) {
            free(p);
            return AGENT_E_INVAL;
        }
        acc = (acc << 6 | (uint32_t)v) & 0xffffff;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            p[o++] = (uint8_t)(acc >> bits);
        }
    }
    /* The leftover bits (2 or 4) must be zero, or two spellings would decode to the same bytes
     * and a token could be altered without touching its signature's input semantics. */
    if (strict && bits > 0 && (acc & ((1u << bits) - 1)) != 0) {
        free(p);
        return AGENT_E_INVAL;
    }
    p[o] = 0;
    *out = p;
    *out_len = o;
    return 0;
}

int auth__ecdsa_raw_to_der(const uint8_t *sig, size_t sig_len, size_t coord_len, uint8_t **der,
                           size_t *der_len)
{
    int rc = -ENOMEM;
    BIGNUM *r = NULL;
    BIGNUM *s = NULL;
    ECDSA_SIG *es = NULL;

    if (coord_len == 0 || coord_len > AUTH__EC_MAX_COORD || sig_len != 2 * coord_len) {
        return AGENT_E_INVAL;
    }
    r = BN_bin2bn(sig, (int)coord_len, NULL);
    s = BN_bin2bn(sig + coord_len, (int)coord_len, NULL);
    es = ECDSA_SIG_new();
    if (r == NULL || s == NULL || es == NULL) {
        goto out;
    }
    if (ECDSA_SIG_set0(es, r, s) != 1) {
        goto out;
    }
    r = s = NULL; /* owned by es now */
    unsigned char *p = NULL;
    int n = i2d_ECDSA_SIG(es, &p);
    if (n <= 0) {
        goto out;
    }
    *der = p;
    *der_len = (size_t)n;
    rc = 0;
out:
    BN_free(r);
    BN_free(s);
    ECDSA_SIG_free(es);
    return rc;
}

int auth__ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t coord_len, uint8_t *raw)
{
    int rc = AGENT_E_INVAL;
    if (der_len > LONG_MAX || coord_len == 0 || coord_len > AUTH__EC_MAX_COORD) {
        return rc;
    }
    const unsigned char *p = der;
    ECDSA_SIG *es = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (es == NULL) {
        return rc;
    }
    if (p != der + der_len) {
        goto out;
    }
    const BIGNUM *r = ECDSA_SIG_get0_r(es);
    const BIGNUM *s = ECDSA_SIG_get0_s(es);
    /* BN_bn2binpad fails (-1) when the value needs more than coord_len bytes. */
    if (BN_bn2binpad(r, raw, (int)coord_len) < 0 ||
        BN_bn2binpad(s, raw + coord_len, (int)coord_len) < 0) {
        goto out;
    }
    rc = 0;
out:
    ECDSA_SIG_free(es);
    return rc;
}
