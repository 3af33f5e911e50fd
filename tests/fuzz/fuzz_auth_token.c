/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the Authorization header of an API request (auth_verify, and
 * auth_verify_cached, which must agree with it). Each input is
 * checked three ways against a verifier built from a fixed P-256 JWK (fuzz_jws.h):
 *   1. as the whole header value ("Bearer eyJ…" seeds, schemes, spacing);
 *   2. as the token after "Bearer ";
 *   3. when it holds a '\n': the text before it as the JOSE header JSON and the rest as the claims
 *      JSON, base64url-encoded and validly signed with the test key here, so the claim checks that
 *      only run after a good signature (aud, iss, exp, nbf, sub) see mutated JSON too.
 * "Now" is the fixed FUZZ_NOW, so results do not depend on the clock.
 */
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "err.h"
#include "fuzz_jws.h"

static struct auth_verifier *verifier;
static EVP_PKEY *key;

/* A key pair fresh from auth_generate (what `dotmon generatekey` prints) accepts its own token. */
static void check_generatekey(void)
{
    struct auth_generated g;
    CHECK(auth_generate(FUZZ_NOW, 3600, NULL, &g) == 0);
    struct auth_verifier *v = NULL;
    char err[256];
    CHECK(auth_verifier_new(g.public_key_b64, g.subject, g.issuer, &v, NULL, err, sizeof(err)) ==
          0);
    size_t n = strlen(g.token);
    char *h = malloc(n + 8);
    CHECK(h != NULL);
    memcpy(h, "Bearer ", 7);
    memcpy(h + 7, g.token, n + 1);
    const char *reason = NULL;
    CHECK(auth_verify(v, h, FUZZ_NOW, &reason) == AUTH_OK);
    CHECK(auth_verify(verifier, h, FUZZ_NOW, &reason) == AUTH_UNAUTHORIZED); /* other key */
    free(h);
    auth_verifier_free(v);
    auth_generated_fini(&g);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    char err[256];
    const char *warning = NULL;
    CHECK(auth_verifier_new(fuzz_jwk_b64, FUZZ_SUBJECT, NULL, &verifier, &warning, err,
                            sizeof(err)) == 0);
    CHECK(warning == NULL);
    key = fuzz_jws_key();
    CHECK(key != NULL);
    check_generatekey();
    CHECK(auth_verify(NULL, "Bearer x", FUZZ_NOW, NULL) == AUTH_UNAUTHORIZED);
    CHECK(auth_verify(verifier, NULL, FUZZ_NOW, NULL) == AUTH_UNAUTHORIZED);
    return 0;
}

static enum auth_result verify(const char *header)
{
    const char *reason = NULL;
    enum auth_result r = auth_verify(verifier, header, FUZZ_NOW, &reason);
    CHECK(r == AUTH_OK || r == AUTH_UNAUTHORIZED || r == AUTH_FORBIDDEN);
    CHECK(reason != NULL && reason[0] != '\0');
    /* The memory of accepted tokens never changes an answer: twice, the second maybe a hit. */
    for (int i = 0; i < 2; i++) {
        const char *why = NULL;
        CHECK(auth_verify_cached(verifier, header, FUZZ_NOW, &why) == r);
        CHECK(why != NULL && (r != AUTH_OK || strcmp(why, reason) == 0));
    }
    return r;
}

static char *concat(const char *a, const void *b, size_t blen)
{
    size_t alen = strlen(a);
    char *s = malloc(alen + blen + 1);
    CHECK(s != NULL);
    memcpy(s, a, alen);
    memcpy(s + alen, b, blen);
    s[alen + blen] = '\0';
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *raw = concat("", data, size);
    (void)verify(raw);
    char *bearer = concat("Bearer ", data, size);
    enum auth_result r = verify(bearer);
    /* The scheme is case-insensitive and spaces around the token do not matter. */
    char *spaced = concat("  bEaReR   ", raw, strlen(raw));
    CHECK(verify(spaced) == r);
    free(spaced);
    free(bearer);
    free(raw);

    const uint8_t *nl = memchr(data, '\n', size);
    if (nl != NULL) {
        size_t hlen = (size_t)(nl - data);
        char *tok = fuzz_jws_sign(key, data, hlen, nl + 1, size - hlen - 1);
        CHECK(tok != NULL);
        char *h = concat("Bearer ", tok, strlen(tok));
        (void)verify(h);
        free(h);
        free(tok);
    }
    return 0;
}
