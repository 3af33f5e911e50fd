/* SPDX-License-Identifier: MIT */
#ifndef AGENT_AUTH_INTERNAL_H
#define AGENT_AUTH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

/*
 * Declarations shared by the files of the auth module only (docs/style.md §1). Nothing outside
 * auth/ includes this header.
 */

/* Which JWS family a verifier's key can check, and for EC the curve it is on. */
enum auth__key_kind { AUTH__KEY_EC = 1, AUTH__KEY_RSA = 2 };

/* Largest ECDSA coordinate we handle: P-521 uses 66 bytes. */
#define AUTH__EC_MAX_COORD 66

#define AUTH_CACHE_SLOTS 16

struct auth_verifier {
    EVP_PKEY *pkey;
    enum auth__key_kind kind;
    /* EC only: the coordinate size in bytes (32, 48 or 66), which fixes the curve and therefore
     * the only ES* algorithm the key may verify (RFC 7518 3.4). */
    size_t ec_coord_len;
    char *subject;
    size_t subject_len;
    char *issuer;
    /*
     * Tokens this verifier accepted, so a client that sends the same token on every request
     * pays for one signature check (an ES384 verify costs ~0.9 ms of loop time), not one per
     * request: SHA-256 of the token and the time its validity ends (exp + skew). Only
     * auth_verify_cached touches it; a new verifier (key rotation) starts empty.
     */
    struct {
        unsigned char digest[32];
        int64_t until; /* 0: empty slot */
    } accepted[AUTH_CACHE_SLOTS];
    unsigned next_slot;
};

/*
 * base64url without padding (RFC 7515 2, RFC 4648 5).
 * auth__b64url_encoded_len: output length without the NUL.
 * auth__b64url_encode: writes the encoding plus a NUL into out (size >= encoded_len + 1).
 */
size_t auth__b64url_encoded_len(size_t n);
void auth__b64url_encode(const uint8_t *in, size_t n, char *out);

/*
 * Decodes n characters of base64url into a malloc'd buffer (*out, *out_len), NUL-terminated
 * for convenience (the NUL is not counted). strict: no '=' padding and the unused low bits of
 * the last character must be zero, so every byte string has exactly one accepted spelling (a
 * JWS is compared and signed as text). Not strict: trailing '=' padding is tolerated, as
 * Base64UrlEncoder does for configuration values. Returns 0, AGENT_E_INVAL for a bad character
 * or length, or -ENOMEM. *out is written only on success.
 */
int auth__b64url_decode(const char *in, size_t n, bool strict, uint8_t **out, size_t *out_len);

/*
 * Converts a JOSE ECDSA signature (R || S, each exactly coord_len big-endian bytes, RFC 7518
 * 3.4) into the DER ECDSA-Sig-Value OpenSSL expects. Returns 0, AGENT_E_INVAL if sig_len is not
 * 2 * coord_len, or -ENOMEM. *der is OPENSSL_malloc'd (free with OPENSSL_free).
 */
int auth__ecdsa_raw_to_der(const uint8_t *sig, size_t sig_len, size_t coord_len, uint8_t **der,
                           size_t *der_len);

/*
 * The reverse, for signing: DER ECDSA-Sig-Value into R || S, each left-padded to coord_len
 * bytes (raw must hold 2 * coord_len). Returns 0 or AGENT_E_INVAL if the DER is malformed or a
 * value does not fit.
 */
int auth__ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t coord_len, uint8_t *raw);

#endif
