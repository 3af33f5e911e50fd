/* SPDX-License-Identifier: MIT */
#ifndef FUZZ_JWS_H
#define FUZZ_JWS_H

/*
 * A fixed P-256 test key for the auth fuzz targets and their seed generator. It is NOT a secret:
 * it exists so that fuzz_auth_token can sign what it is given and reach the claim checks, which
 * only run after a good signature, and so that saved inputs reproduce in any process. (A key from
 * auth_generate would change every run; its P-384 verifies also run at about 1.5k/s here against
 * 17k/s for P-256.)
 */

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

/* The instant the targets pass as "now" to auth_verify (2026-11-22), and the subject of the key. */
#define FUZZ_NOW     ((int64_t)1795300000)
#define FUZZ_SUBJECT "6f1c2a9e-4b7d-4e21-9c3a-5d8e0f7b1a24"

/* The public half as dotmon's configuration takes it: a base64url JWK. */
extern const char fuzz_jwk_b64[];

/* Loads the private key (once per call; free with EVP_PKEY_free). NULL on failure. */
EVP_PKEY *fuzz_jws_key(void);

/* base64url without padding of p[0..n), NUL-terminated, malloc'd. NULL on failure. */
char *fuzz_b64url(const void *p, size_t n);

/*
 * A compact ES256 JWS "b64(hdr).b64(claims).b64(R||S)" signed with key, malloc'd, NULL on
 * failure. The header is taken as given: it may name any algorithm.
 */
char *fuzz_jws_sign(EVP_PKEY *key, const void *hdr, size_t hdr_len, const void *claims,
                    size_t claims_len);

#endif
