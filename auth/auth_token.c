/* SPDX-License-Identifier: MIT */
/*
 * Verifying a MonitorApiKey bearer token: a JWS in compact serialization (RFC 7515 section 7.1)
 * carrying JWT claims (RFC 7519), checked the way dotnet-monitor does (docs/api.md §9,
 * dotnet-monitor documentation/api-key-format.md).
 *
 * The order of the checks matters:
 *  1. Everything that needs no key (size, shape, header, algorithm) is checked first, so junk
 *     costs almost nothing.
 *  2. The signature is checked before a single claim is read: claims of an unsigned or forged
 *     token are never interpreted.
 *  3. aud, iss and the lifetime come before sub, so AUTH_FORBIDDEN (403) can only be reached by
 *     a token that is genuine and current but made for another subject.
 * Every failure is reported with a static reason that never quotes the token.
 */
#include "auth.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "ascii.h"
#include "auth_internal.h"
#include "err.h"
#include "num.h"

/* The JWS algorithms dotnet-monitor allows (JwtAlgorithmChecker.cs): asymmetric only, so the
 * configuration never has to hold a secret. */
struct jws_alg {
    const char *name;
    enum auth__key_kind kind;
    size_t ec_coord_len; /* EC: the curve the algorithm is defined on (RFC 7518 3.4) */
    const char *digest;
};

static const struct jws_alg jws_algs[] = {
    {"ES256", AUTH__KEY_EC, 32, "SHA256"}, {"ES384", AUTH__KEY_EC, 48, "SHA384"},
    {"ES512", AUTH__KEY_EC, 66, "SHA512"}, {"RS256", AUTH__KEY_RSA, 0, "SHA256"},
    {"RS384", AUTH__KEY_RSA, 0, "SHA384"}, {"RS512", AUTH__KEY_RSA, 0, "SHA512"},
};

/* Algorithms people actually try, named in the reason so the fix is obvious. Reasons must be
 * static strings, so the name can't be formatted in. */
struct rejected_alg {
    const char *name;
    const char *reason;
};

static const struct rejected_alg rejected_algs[] = {
    {"none", "unsupported algorithm 'none'"},   {"HS256", "unsupported algorithm 'HS256'"},
    {"HS384", "unsupported algorithm 'HS384'"}, {"HS512", "unsupported algorithm 'HS512'"},
    {"PS256", "unsupported algorithm 'PS256'"}, {"PS384", "unsupported algorithm 'PS384'"},
    {"PS512", "unsupported algorithm 'PS512'"}, {"EdDSA", "unsupported algorithm 'EdDSA'"},
};

int auth_str_equal(const char *a, const char *b)
{
    if (a == NULL || b == NULL) {
        return 0;
    }
    size_t na = strlen(a);
    size_t nb = strlen(b);
    if (na != nb) {
        return 0;
    }
    return CRYPTO_memcmp(a, b, na) == 0;
}

/*
 * Parses decoded JSON that must be an object. cJSON keeps duplicate member names and returns
 * the first, while other JWT libraries take the last; RFC 7515 4 and RFC 7519 4 allow a
 * recipient to reject duplicates, which removes the ambiguity for the names we act on.
 */
/*
 * True when a string in the JSON text holds the escape \u0000. cJSON turns it into a NUL inside
 * its C string, and every comparison after that (strlen, strcmp) would see only the part before
 * it: a "sub" of "<subject>\u0000x" would match the subject.
 */
static bool has_escaped_nul(const uint8_t *json, size_t len)
{
    bool in_string = false;
    for (size_t i = 0; i < len; i++) {
        if (!in_string) {
            in_string = json[i] == '"';
        } else if (json[i] == '"') {
            in_string = false;
        } else if (json[i] == '\\' && i + 1 < len) {
            if (json[i + 1] == 'u' && i + 5 < len && json[i + 2] == '0' && json[i + 3] == '0' &&
                json[i + 4] == '0' && json[i + 5] == '0') {
                return true;
            }
            i++; /* the escaped character, whatever it is, cannot end the string */
        }
    }
    return false;
}

static cJSON *parse_object(const uint8_t *json, size_t len, const char *const *names, size_t nnames)
{
    /* An embedded NUL would make cJSON stop early and ignore what follows; an escaped one would
     * cut a value short. */
    if (memchr(json, 0, len) != NULL || has_escaped_nul(json, len)) {
        return NULL;
    }
    cJSON *obj = cJSON_ParseWithOpts((const char *)json, NULL, 1);
    if (obj == NULL) {
        return NULL;
    }
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(obj);
        return NULL;
    }
    for (size_t i = 0; i < nnames; i++) {
        int seen = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, obj)
        {
            if (it->string != NULL && strcmp(it->string, names[i]) == 0) {
                seen++;
            }
        }
        if (seen > 1) {
            cJSON_Delete(obj);
            return NULL;
        }
    }
    return obj;
}

/*
 * A NumericDate (RFC 7519 2): a JSON number, or, as Microsoft.IdentityModel also accepts, a
 * string of decimal digits. dotnet-monitor's own generatekey writes "exp":"1795905202" (it
 * builds the claim from a string), so refusing strings would refuse every key it made.
 */
static bool numeric_date(const cJSON *it, double *out)
{
    if (cJSON_IsNumber(it)) {
        if (!isfinite(it->valuedouble)) {
            return false;
        }
        *out = it->valuedouble;
        return true;
    }
    if (cJSON_IsString(it)) {
        const char *s = it->valuestring;
        size_t n = strlen(s);
        /* 15 digits keep the value exact in a double and reach far past year 9999. */
        uint64_t v = 0;
        if (n > 15 || num_parse_u64(s, n, 10, UINT64_MAX, &v) != 0) {
            return false;
        }
        *out = (double)v;
        return true;
    }
    return false;
}

static bool audience_matches(const cJSON *aud)
{
    if (cJSON_IsString(aud)) {
        return strcmp(aud->valuestring, AUTH_AUDIENCE) == 0;
    }
    if (cJSON_IsArray(aud)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, aud)
        {
            if (cJSON_IsString(it) && strcmp(it->valuestring, AUTH_AUDIENCE) == 0) {
                return true;
            }
        }
    }
    return false;
}

/* Returns 1 for a good signature, 0 for a bad one, a negative code on internal failure. */
static int check_signature(const struct auth_verifier *v, const struct jws_alg *alg,
                           const char *signing_input, size_t signing_input_len, const uint8_t *sig,
                           size_t sig_len)
{
    int rc = -ENOMEM;
    uint8_t *der = NULL;
    size_t der_len = 0;
    EVP_MD_CTX *md = NULL;

    if (alg->kind == AUTH__KEY_EC) {
        /* JOSE signatures are R || S of fixed width; anything else is simply invalid. */
        rc = auth__ecdsa_raw_to_der(sig, sig_len, alg->ec_coord_len, &der, &der_len);
        if (rc == AGENT_E_INVAL) {
            return 0;
        }
        if (rc != 0) {
            return rc;
        }
        sig = der;
        sig_len = der_len;
    }
    md = EVP_MD_CTX_new();
    if (md == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    /* For RSA keys the default padding is PKCS #1 v1.5, which is what RS* means. */
    if (EVP_DigestVerifyInit_ex(md, NULL, alg->digest, NULL, NULL, v->pkey, NULL) != 1) {
        rc = AGENT_E_AUTH;
        goto out;
    }
    rc = EVP_DigestVerify(md, sig, sig_len, (const unsigned char *)signing_input,
                          signing_input_len) == 1;
out:
    EVP_MD_CTX_free(md);
    OPENSSL_free(der);
    return rc;
}

/* Splits off "Bearer" and the spaces after it. Returns the token, or NULL with *reason set. */
static const char *bearer_token(const char *h, size_t *len, const char **reason)
{
    static const char scheme[] = "Bearer";
    const size_t scheme_len = sizeof(scheme) - 1;

    while (*h == ' ' || *h == '\t') {
        h++;
    }
    if (*h == '\0') {
        *reason = "missing Authorization header";
        return NULL;
    }
    /* Auth schemes are case-insensitive (RFC 9110 11.1); the token follows after 1*SP. */
    if (!ascii_ieq_n(h, scheme_len, scheme) || (h[scheme_len] != ' ' && h[scheme_len] != '\0')) {
        *reason = "authorization scheme is not Bearer";
        return NULL;
    }
    h += scheme_len;
    while (*h == ' ') {
        h++;
    }
    size_t n = strlen(h);
    while (n > 0 && (h[n - 1] == ' ' || h[n - 1] == '\t')) {
        n--;
    }
    if (n == 0) {
        *reason = "empty bearer token";
        return NULL;
    }
    *len = n;
    return h;
}

/* Header parameters we read; duplicates of them make a header malformed. */
static const char *const header_names[] = {"alg", "typ", "crit"};
/* Claims we read; same rule. */
static const char *const claim_names[] = {"aud", "iss", "exp", "nbf", "sub"};

/* The three decoded parts of a compact JWS. */
struct jws {
    uint8_t *hdr;
    uint8_t *claims;
    uint8_t *sig;
    size_t hdr_len;
    size_t claims_len;
    size_t sig_len;
    size_t signing_input_len; /* "header.claims" as it appears in the token */
};

static void jws_fini(struct jws *j)
{
    free(j->hdr);
    free(j->claims);
    free(j->sig);
}

/*
 * Splits tok (len characters, not NUL-terminated) into exactly three parts and decodes each
 * (RFC 7515 7.1). Returns NULL or a reason. Allocation failure is reported as a failure too
 * ("internal error"): authentication fails closed.
 */
static const char *jws_decode(const char *tok, size_t len, struct jws *j)
{
    const char *end = tok + len;
    const char *dot1 = memchr(tok, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
    if (dot2 == NULL || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)) != NULL) {
        return "malformed token: expected three dot-separated parts";
    }
    if (dot1 == tok || dot2 == dot1 + 1) {
        return "malformed token: empty header or claims";
    }
    int rc = auth__b64url_decode(tok, (size_t)(dot1 - tok), true, &j->hdr, &j->hdr_len);
    if (rc == 0) {
        rc = auth__b64url_decode(dot1 + 1, (size_t)(dot2 - dot1 - 1), true, &j->claims,
                                 &j->claims_len);
    }
    if (rc == 0) {
        rc = auth__b64url_decode(dot2 + 1, (size_t)(end - dot2 - 1), true, &j->sig, &j->sig_len);
    }
    if (rc == AGENT_E_INVAL) {
        return "malformed token: bad base64url";
    }
    if (rc != 0) {
        return "internal error";
    }
    j->signing_input_len = (size_t)(dot2 - tok);
    return NULL;
}

/* Checks the JOSE header against the key. Returns NULL with *alg_out set, or a reason. */
static const char *check_header(const struct auth_verifier *v, const cJSON *hdr,
                                const struct jws_alg **alg_out)
{
    /* We implement no JWS extensions, so any critical one must be refused (RFC 7515 4.1.11). */
    if (cJSON_GetObjectItemCaseSensitive(hdr, "crit") != NULL) {
        return "unsupported critical header parameter";
    }
    const cJSON *alg_item = cJSON_GetObjectItemCaseSensitive(hdr, "alg");
    if (!cJSON_IsString(alg_item)) {
        return "missing algorithm";
    }
    const struct jws_alg *alg = NULL;
    for (size_t i = 0; i < sizeof(jws_algs) / sizeof(*jws_algs); i++) {
        if (strcmp(alg_item->valuestring, jws_algs[i].name) == 0) {
            alg = &jws_algs[i];
        }
    }
    if (alg == NULL) {
        for (size_t i = 0; i < sizeof(rejected_algs) / sizeof(*rejected_algs); i++) {
            if (strcmp(alg_item->valuestring, rejected_algs[i].name) == 0) {
                return rejected_algs[i].reason;
            }
        }
        return "unsupported algorithm";
    }
    /* The key decides the algorithm, not the token: ES384 only with a P-384 key and so on
     * (the classic JWT flaw is letting the header pick how the key is used). */
    if (alg->kind != v->kind ||
        (alg->kind == AUTH__KEY_EC && alg->ec_coord_len != v->ec_coord_len)) {
        return "algorithm does not match the key";
    }
    /* RFC 7515 4.1.9: "JWT", or the same media type spelled in full. */
    const cJSON *typ = cJSON_GetObjectItemCaseSensitive(hdr, "typ");
    if (typ != NULL && !(cJSON_IsString(typ) && (ascii_ieq(typ->valuestring, "JWT") ||
                                                 ascii_ieq(typ->valuestring, "application/jwt")))) {
        return "unsupported token type";
    }
    *alg_out = alg;
    return NULL;
}

/* aud, iss, exp and nbf: whether a genuine token is meant for us and current. */
static const char *check_validity(const struct auth_verifier *v, const cJSON *claims, int64_t now,
                                  double *exp_out)
{
    const cJSON *aud = cJSON_GetObjectItemCaseSensitive(claims, "aud");
    if (aud == NULL) {
        return "missing audience";
    }
    if (!audience_matches(aud)) {
        return "wrong audience";
    }
    const cJSON *iss = cJSON_GetObjectItemCaseSensitive(claims, "iss");
    if (iss == NULL) {
        return "missing issuer";
    }
    if (!cJSON_IsString(iss) || strcmp(iss->valuestring, v->issuer) != 0) {
        return "wrong issuer";
    }
    const cJSON *exp_item = cJSON_GetObjectItemCaseSensitive(claims, "exp");
    double exp = 0;
    if (exp_item == NULL) {
        return "missing expiration";
    }
    if (!numeric_date(exp_item, &exp)) {
        return "invalid expiration";
    }
    /* now and the dates are far below 2^53, so the double arithmetic is exact. */
    if ((double)now >= exp + AUTH_CLOCK_SKEW_S) {
        return "token expired";
    }
    *exp_out = exp;
    const cJSON *nbf_item = cJSON_GetObjectItemCaseSensitive(claims, "nbf");
    double nbf = 0;
    if (nbf_item != NULL && !numeric_date(nbf_item, &nbf)) {
        return "invalid not-before";
    }
    if (nbf_item != NULL && (double)now < nbf - AUTH_CLOCK_SKEW_S) {
        return "token not yet valid";
    }
    return NULL;
}

/* Constant time in the content; only a length mismatch returns early. */
static bool subject_matches(const struct auth_verifier *v, const cJSON *claims)
{
    const cJSON *sub = cJSON_GetObjectItemCaseSensitive(claims, "sub");
    if (!cJSON_IsString(sub)) {
        return false;
    }
    /* Length-aware: parse_object refused any \u0000, so strlen is the claim's whole length. */
    return strlen(sub->valuestring) == v->subject_len &&
           CRYPTO_memcmp(sub->valuestring, v->subject, v->subject_len) == 0;
}

/* auth_verify; on AUTH_OK *exp gets the token's exp claim. */
static enum auth_result verify(const struct auth_verifier *v, const char *authorization,
                               int64_t now, const char **reason, double *exp)
{
    enum auth_result res = AUTH_UNAUTHORIZED;
    const char *why = NULL;
    struct jws j = {0};
    cJSON *hdr = NULL;
    cJSON *claims = NULL;
    const struct jws_alg *alg = NULL;
    size_t len = 0;
    const char *tok = NULL;

    if (v == NULL || v->pkey == NULL) {
        /* dotnet-monitor's RejectAllSecurityValidator: no key, no access. */
        why = "authentication is not configured";
        goto out;
    }
    if (authorization == NULL) {
        why = "missing Authorization header";
        goto out;
    }
    tok = bearer_token(authorization, &len, &why);
    if (tok == NULL) {
        goto out;
    }
    if (len > AUTH_MAX_TOKEN_LEN) {
        why = "token too large";
        goto out;
    }
    why = jws_decode(tok, len, &j);
    if (why != NULL) {
        goto out;
    }
    hdr =
        parse_object(j.hdr, j.hdr_len, header_names, sizeof(header_names) / sizeof(*header_names));
    if (hdr == NULL) {
        why = "malformed token header";
        goto out;
    }
    why = check_header(v, hdr, &alg);
    if (why != NULL) {
        goto out;
    }
    int rc = check_signature(v, alg, tok, j.signing_input_len, j.sig, j.sig_len);
    if (rc != 1) {
        why = rc == 0 ? "invalid signature" : "internal error";
        goto out;
    }
    claims = parse_object(j.claims, j.claims_len, claim_names,
                          sizeof(claim_names) / sizeof(*claim_names));
    if (claims == NULL) {
        why = "malformed token claims";
        goto out;
    }
    why = check_validity(v, claims, now, exp);
    if (why != NULL) {
        goto out;
    }
    /* Only now is the token known to be genuine and current: the rest is authorization. */
    if (!subject_matches(v, claims)) {
        res = AUTH_FORBIDDEN;
        why = "subject not authorized";
        goto out;
    }
    res = AUTH_OK;
    why = "authorized";
out:
    cJSON_Delete(hdr);
    cJSON_Delete(claims);
    jws_fini(&j);
    if (reason != NULL) {
        *reason = why;
    }
    return res;
}

enum auth_result auth_verify(const struct auth_verifier *v, const char *authorization, int64_t now,
                             const char **reason)
{
    double exp = 0;
    return verify(v, authorization, now, reason, &exp);
}

enum auth_result auth_verify_cached(struct auth_verifier *v, const char *authorization, int64_t now,
                                    const char **reason)
{
    unsigned char digest[32];
    size_t len = authorization != NULL ? strlen(authorization) : 0;
    bool hashed = v != NULL && authorization != NULL && len <= AUTH_MAX_TOKEN_LEN + 64 &&
                  EVP_Digest(authorization, len, digest, NULL, EVP_sha256(), NULL) == 1;
    if (hashed) {
        for (size_t i = 0; i < AUTH_CACHE_SLOTS; i++) {
            if (v->accepted[i].until != 0 && now < v->accepted[i].until &&
                CRYPTO_memcmp(v->accepted[i].digest, digest, sizeof(digest)) == 0) {
                if (reason != NULL) {
                    *reason = "authorized";
                }
                return AUTH_OK;
            }
        }
    }
    double exp = 0;
    enum auth_result res = verify(v, authorization, now, reason, &exp);
    /* A JSON-number exp may be anything finite: clamp before converting (truncation only
     * ends the memory earlier). exp + skew > now >= 0 here. */
    double until = exp + AUTH_CLOCK_SKEW_S;
    if (res == AUTH_OK && hashed && until >= 1) {
        unsigned slot = v->next_slot++ % AUTH_CACHE_SLOTS;
        memcpy(v->accepted[slot].digest, digest, sizeof(digest));
        v->accepted[slot].until = until >= 9.0e18 ? INT64_MAX : (int64_t)until;
    }
    return res;
}
