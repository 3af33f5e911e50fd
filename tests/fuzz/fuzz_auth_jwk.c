/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: Authentication:MonitorApiKey from the configuration (auth_verifier_new). The
 * input is "PublicKey[\nSubject[\nIssuer]]". The public key is tried as given (base64url JWK, the
 * configured form) and base64url-encoded by the target, so the fuzzer also mutates the JWK's JSON
 * directly. A verifier that builds is used once on a fixed ES256 token and a fixed RS256-shaped
 * token, then freed.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth.h"
#include "err.h"
#include "fuzz_jws.h"

static char *es256_token; /* "Bearer " + a token signed by the test key, for FUZZ_SUBJECT */

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char hdr[] = "{\"alg\":\"ES256\",\"typ\":\"JWT\"}";
    static const char claims[] =
        "{\"aud\":\"" AUTH_AUDIENCE "\",\"exp\":\"1795400000\",\"iss\":\"" AUTH_DEFAULT_ISSUER
        "\",\"sub\":\"" FUZZ_SUBJECT "\"}";
    EVP_PKEY *key = fuzz_jws_key();
    CHECK(key != NULL);
    char *tok = fuzz_jws_sign(key, hdr, sizeof(hdr) - 1, claims, sizeof(claims) - 1);
    CHECK(tok != NULL);
    size_t n = strlen(tok);
    es256_token = malloc(n + 8);
    CHECK(es256_token != NULL);
    memcpy(es256_token, "Bearer ", 7);
    memcpy(es256_token + 7, tok, n + 1);
    free(tok);
    EVP_PKEY_free(key);
    return 0;
}

/* Splits off the next '\n'-terminated field of [*p, end) as a malloc'd C string. */
static char *next_field(const uint8_t **p, const uint8_t *end)
{
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl != NULL ? nl : end;
    size_t n = (size_t)(stop - *p);
    char *s = malloc(n + 1);
    CHECK(s != NULL);
    memcpy(s, *p, n);
    s[n] = '\0';
    *p = nl != NULL ? nl + 1 : end;
    return s;
}

static void try_key(const char *key_b64, const char *subject, const char *issuer)
{
    struct auth_verifier *v = NULL;
    const char *warning = NULL;
    char err[128];
    err[0] = '\0';
    int rc = auth_verifier_new(key_b64, subject, issuer, &v, &warning, err, sizeof(err));
    CHECK(rc == 0 || rc == AGENT_E_INVAL || rc == -ENOMEM);
    if (rc != 0) {
        CHECK(v == NULL && err[0] != '\0' && strlen(err) < sizeof(err));
        return;
    }
    CHECK(v != NULL);
    const char *reason = NULL;
    enum auth_result r = auth_verify(v, es256_token, FUZZ_NOW, &reason);
    CHECK(reason != NULL);
    if (r == AUTH_OK) {
        /* Only the test key itself can accept the test key's token. */
        CHECK(strcmp(subject, FUZZ_SUBJECT) == 0);
    }
    (void)auth_verify(
        v,
        "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ4In0."
        "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
        FUZZ_NOW, &reason);
    auth_verifier_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *p = data;
    const uint8_t *end = data + size;
    char *key_text = next_field(&p, end);
    char *subject = p < end ? next_field(&p, end) : NULL;
    char *issuer = p < end ? next_field(&p, end) : NULL;
    const char *sub = subject != NULL ? subject : FUZZ_SUBJECT;

    try_key(key_text, sub, issuer);
    char *encoded = fuzz_b64url(key_text, strlen(key_text));
    CHECK(encoded != NULL);
    try_key(encoded, sub, issuer);

    free(encoded);
    free(issuer);
    free(subject);
    free(key_text);
    return 0;
}
