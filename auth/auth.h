/* SPDX-License-Identifier: MIT */
#ifndef AGENT_AUTH_H
#define AGENT_AUTH_H

#include <stddef.h>
#include <stdint.h>

/*
 * dotnet-monitor's MonitorApiKey authentication (docs/api.md §9): a JWT in
 * `Authorization: Bearer <jwt>`, signed with ES256/384/512 or RS256/384/512 (never `none` or
 * HS*), checked against a public key given as a base64url-encoded JWK. Claims: `aud` must be
 * AUTH_AUDIENCE, `iss` the configured issuer (default AUTH_DEFAULT_ISSUER), `exp` present and in
 * the future, `sub` equal to the configured subject (else 403).
 * Pure OpenSSL, no libuv. Nothing here logs; the caller must never log tokens or keys.
 */

#define AUTH_AUDIENCE       "https://github.com/dotnet/dotnet-monitor"
#define AUTH_DEFAULT_ISSUER "https://github.com/dotnet/dotnet-monitor/generatekey+MonitorApiKey"

/*
 * Clock skew tolerated on exp and nbf, in seconds: a token is expired once now >= exp + skew and
 * not yet valid while now < nbf - skew. 300 s is Microsoft.IdentityModel's default
 * (TokenValidationParameters.DefaultClockSkew), so a token dotnet-monitor accepts at a given
 * instant is accepted here too. It only matters when the token was minted on another machine.
 */
#define AUTH_CLOCK_SKEW_S 300

/* Longest bearer token accepted, in characters; longer ones are rejected before any decoding.
 * An ES384 generatekey token is about 400 characters, an RS512 one with a 16384-bit key ~3 KiB. */
#define AUTH_MAX_TOKEN_LEN ((size_t)16384)

struct auth_verifier;

/*
 * Builds a verifier. public_key_b64 is the base64url JWK (kty EC with crv P-256/P-384/P-521, or
 * RSA with at least 2048 bits); a JWK with private parts is accepted and *warning is set to a
 * static message (else NULL). subject must be non-empty. issuer NULL → default.
 * On error returns AGENT_E_INVAL and writes a reason into err (never containing key material).
 */
int auth_verifier_new(const char *public_key_b64, const char *subject, const char *issuer,
                      struct auth_verifier **out, const char **warning, char *err, size_t errlen);
void auth_verifier_free(struct auth_verifier *v);

enum auth_result {
    AUTH_OK = 0,
    AUTH_UNAUTHORIZED = 1, /* 401: missing, malformed, expired, bad signature, wrong aud/iss */
    AUTH_FORBIDDEN = 2     /* 403: valid token, other subject */
};

/*
 * Checks an Authorization header value (may be NULL). now = seconds since the epoch.
 * *reason gets a static description suitable for a problem+json detail (never token content);
 * "authorized" on AUTH_OK. reason may be NULL. Tokens longer than AUTH_MAX_TOKEN_LEN are refused
 * before any decoding. A NULL verifier yields AUTH_UNAUTHORIZED, never a crash.
 */
enum auth_result auth_verify(const struct auth_verifier *v, const char *authorization, int64_t now,
                             const char **reason);
/*
 * auth_verify with a memory of the last AUTH_CACHE_SLOTS accepted tokens: the exact same token
 * (compared by SHA-256, in constant time) is accepted again without a signature check until its
 * exp (+ clock skew) has passed. Only AUTH_OK results are remembered, so refusals always get the
 * full check and reason. Not thread-safe (the verifier belongs to the loop).
 */
enum auth_result auth_verify_cached(struct auth_verifier *v, const char *authorization, int64_t now,
                                    const char **reason);

/* Output of generatekey: a fresh P-384 key pair, a GUID subject and an ES384 token. */
struct auth_generated {
    char *token;          /* compact JWT */
    char *subject;        /* GUID string */
    char *public_key_b64; /* base64url JWK of the public key (for configuration) */
    char *issuer;         /* issuer placed in the token */
    int64_t expires;      /* exp claim, seconds since the epoch */
};

/* lifetime_s > 0. issuer NULL → default. Returns 0 or a negative code. */
int auth_generate(int64_t now, int64_t lifetime_s, const char *issuer, struct auth_generated *out);
void auth_generated_fini(struct auth_generated *g);

/* Constant-time comparison of two NUL-terminated strings (length differences leak only length).
 * Returns 1 if equal, 0 otherwise (also when either is NULL). */
int auth_str_equal(const char *a, const char *b);

#endif
