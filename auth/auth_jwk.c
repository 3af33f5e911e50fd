/* SPDX-License-Identifier: MIT */
/*
 * Building a verifier from dotnet-monitor's Authentication:MonitorApiKey:PublicKey, a JSON Web
 * Key (RFC 7517/7518 section 6) serialized to JSON and then base64url-encoded
 * (dotnet-monitor documentation/api-key-format.md, "Providing a Public Key").
 *
 * Compatibility with what dotnet-monitor's own parser (Microsoft.IdentityModel JsonWebKey)
 * accepts, so that a configuration that works there works here:
 *  - member names are matched case-insensitively: IdentityModel does so on purpose because its
 *    6.x Newtonsoft parser did, and old dotnet-monitor versions wrote "Kty", "Crv", "X", "Y";
 *  - members we don't use (key_ops, x5c, KeySize, AdditionalData ...) are ignored, and
 *    generatekey's own output carries an empty "oth": [] that is not private material;
 *  - private members are accepted with a warning (MonitorApiKeyPostConfigure.cs).
 * Stricter than IdentityModel where it costs real users nothing: EC coordinates must have the
 * curve's full width (RFC 7518 6.2.1.2), the point must be on the curve, and RSA moduli must
 * have 2048 to 16384 bits.
 */
#include "auth.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include "ascii.h"
#include "auth_internal.h"
#include "err.h"

/* A JWK is a few hundred bytes; 64 KiB leaves room for a 16384-bit RSA key with every private
 * member and stops a misconfigured multi-megabyte value before any decoding. */
#define AUTH_MAX_KEY_CHARS ((size_t)65536)
#define RSA_MIN_BITS       2048
#define RSA_MAX_BITS       16384 /* OpenSSL's own OPENSSL_RSA_MAX_MODULUS_BITS */
#define RSA_MAX_E_BYTES    8     /* OpenSSL refuses exponents over 64 bits for large moduli too */

static const char private_key_warning[] =
    "the public key JWK contains private key material; only its public part is used, remove the "
    "private members from the configuration";

struct ec_curve {
    const char *jwk_name;     /* RFC 7518 6.2.1.1 */
    const char *openssl_name; /* OSSL_PKEY_PARAM_GROUP_NAME */
    size_t coord_len;
};

static const struct ec_curve ec_curves[] = {
    {"P-256", "prime256v1", 32},
    {"P-384", "secp384r1", 48},
    {"P-521", "secp521r1", 66},
};

/* Copies a static reason into the caller's buffer, truncating if it must. */
static int fail(char *err, size_t errlen, const char *reason)
{
    if (err != NULL && errlen > 0) {
        size_t n = strlen(reason);
        if (n >= errlen) {
            n = errlen - 1;
        }
        memcpy(err, reason, n);
        err[n] = '\0';
    }
    return AGENT_E_INVAL;
}

/* cJSON_GetObjectItem matches names case-insensitively, which is what we want here. */
static const char *member_string(const cJSON *jwk, const char *name)
{
    const cJSON *it = cJSON_GetObjectItem(jwk, name);
    return cJSON_IsString(it) ? it->valuestring : NULL;
}

/* IdentityModel's JsonWebKey.HasPrivateKey: any of the private members present (and not null). */
static bool has_private_members(const cJSON *jwk)
{
    static const char *const names[] = {"d", "p", "q", "dp", "dq", "qi"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const cJSON *it = cJSON_GetObjectItem(jwk, names[i]);
        if (it != NULL && !cJSON_IsNull(it)) {
            return true;
        }
    }
    /* generatekey writes "oth": [] for EC keys; only a non-empty list means extra RSA primes. */
    const cJSON *oth = cJSON_GetObjectItem(jwk, "oth");
    return cJSON_IsArray(oth) && cJSON_GetArraySize(oth) > 0;
}

/* Decodes a base64url member, tolerating padding like IdentityModel's Base64UrlEncoder. */
static int decode_member(const char *s, uint8_t **out, size_t *out_len)
{
    return auth__b64url_decode(s, strlen(s), false, out, out_len);
}

/* Imports key material with EVP_PKEY_fromdata (public part only). */
static int pkey_from_params(const char *type, OSSL_PARAM_BLD *bld, EVP_PKEY **out)
{
    int rc = AGENT_E_INVAL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    EVP_PKEY_CTX *check = NULL;
    EVP_PKEY *pkey = NULL;
    if (params == NULL || ctx == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (EVP_PKEY_fromdata_init(ctx) != 1 ||
        EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) != 1) {
        goto out;
    }
    /* For EC this is the full SP 800-56A public key check: on the curve, not the point at
     * infinity, right order. fromdata already rejects points off the curve, but the explicit
     * check states the requirement instead of relying on an importer detail. */
    check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
    if (check == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (EVP_PKEY_public_check(check) != 1) {
        goto out;
    }
    *out = pkey;
    pkey = NULL;
    rc = 0;
out:
    EVP_PKEY_CTX_free(check);
    EVP_PKEY_CTX_free(ctx);
    EVP_PKEY_free(pkey);
    OSSL_PARAM_free(params);
    return rc;
}

static int load_ec(const cJSON *jwk, struct auth_verifier *v, char *err, size_t errlen)
{
    int rc;
    uint8_t *x = NULL;
    uint8_t *y = NULL;
    size_t x_len = 0;
    size_t y_len = 0;
    OSSL_PARAM_BLD *bld = NULL;
    uint8_t point[1 + 2 * AUTH__EC_MAX_COORD];

    const char *crv = member_string(jwk, "crv");
    if (crv == NULL) {
        return fail(err, errlen, "EC public key has no 'crv'");
    }
    const struct ec_curve *curve = NULL;
    for (size_t i = 0; i < sizeof(ec_curves) / sizeof(ec_curves[0]); i++) {
        if (ascii_ieq(crv, ec_curves[i].jwk_name)) {
            curve = &ec_curves[i];
        }
    }
    if (curve == NULL) {
        return fail(err, errlen, "unsupported EC curve (crv must be P-256, P-384 or P-521)");
    }
    const char *xs = member_string(jwk, "x");
    const char *ys = member_string(jwk, "y");
    if (xs == NULL || ys == NULL) {
        return fail(err, errlen, "EC public key is missing 'x' or 'y'");
    }
    rc = decode_member(xs, &x, &x_len);
    if (rc == 0) {
        rc = decode_member(ys, &y, &y_len);
    }
    if (rc == -ENOMEM) {
        goto out;
    }
    if (rc != 0) {
        rc = fail(err, errlen, "EC public key 'x' or 'y' is not valid base64url");
        goto out;
    }
    if (x_len != curve->coord_len || y_len != curve->coord_len) {
        rc = fail(err, errlen, "EC public key coordinates have the wrong length for the curve");
        goto out;
    }
    /* SEC 1 uncompressed point: 0x04 || X || Y. */
    point[0] = 0x04;
    memcpy(point + 1, x, x_len);
    memcpy(point + 1 + x_len, y, y_len);
    bld = OSSL_PARAM_BLD_new();
    if (bld == NULL ||
        OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, curve->openssl_name, 0) !=
            1 ||
        OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + 2 * x_len) != 1) {
        rc = -ENOMEM;
        goto out;
    }
    rc = pkey_from_params("EC", bld, &v->pkey);
    if (rc == AGENT_E_INVAL) {
        rc = fail(err, errlen, "EC public key point is not on the curve");
        goto out;
    }
    if (rc != 0) {
        goto out;
    }
    v->kind = AUTH__KEY_EC;
    v->ec_coord_len = curve->coord_len;
out:
    OSSL_PARAM_BLD_free(bld);
    free(x);
    free(y);
    return rc;
}

/* Drops leading zero bytes (JWK integers are minimal, but some writers pad them). */
static void strip_leading_zeros(const uint8_t **p, size_t *n)
{
    while (*n > 0 && (*p)[0] == 0) {
        (*p)++;
        (*n)--;
    }
}

static int load_rsa(const cJSON *jwk, struct auth_verifier *v, char *err, size_t errlen)
{
    int rc;
    uint8_t *n_buf = NULL;
    uint8_t *e_buf = NULL;
    size_t n_len = 0;
    size_t e_len = 0;
    BIGNUM *n = NULL;
    BIGNUM *e = NULL;
    OSSL_PARAM_BLD *bld = NULL;

    const char *ns = member_string(jwk, "n");
    const char *es = member_string(jwk, "e");
    if (ns == NULL || es == NULL) {
        return fail(err, errlen, "RSA public key is missing 'n' or 'e'");
    }
    rc = decode_member(ns, &n_buf, &n_len);
    if (rc == 0) {
        rc = decode_member(es, &e_buf, &e_len);
    }
    if (rc == -ENOMEM) {
        goto out;
    }
    if (rc != 0) {
        rc = fail(err, errlen, "RSA public key 'n' or 'e' is not valid base64url");
        goto out;
    }
    const uint8_t *np = n_buf;
    const uint8_t *ep = e_buf;
    strip_leading_zeros(&np, &n_len);
    strip_leading_zeros(&ep, &e_len);
    size_t bits = 0;
    if (n_len > 0) {
        bits = (n_len - 1) * 8;
        for (unsigned top = np[0]; top != 0; top >>= 1) {
            bits++;
        }
    }
    if (bits < RSA_MIN_BITS) {
        rc = fail(err, errlen, "RSA public key is shorter than 2048 bits");
        goto out;
    }
    if (bits > RSA_MAX_BITS) {
        rc = fail(err, errlen, "RSA public key is longer than 16384 bits");
        goto out;
    }
    if ((np[n_len - 1] & 1) == 0) {
        rc = fail(err, errlen, "RSA public key modulus is even");
        goto out;
    }
    /* e = 1 would make every message its own signature; even e is not a valid RSA exponent. */
    if (e_len == 0 || e_len > RSA_MAX_E_BYTES || (ep[e_len - 1] & 1) == 0 ||
        (e_len == 1 && ep[0] < 3)) {
        rc = fail(err, errlen, "RSA public key exponent is invalid");
        goto out;
    }
    n = BN_bin2bn(np, (int)n_len, NULL);
    e = BN_bin2bn(ep, (int)e_len, NULL);
    bld = OSSL_PARAM_BLD_new();
    if (n == NULL || e == NULL || bld == NULL ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, n) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, e) != 1) {
        rc = -ENOMEM;
        goto out;
    }
    rc = pkey_from_params("RSA", bld, &v->pkey);
    if (rc == AGENT_E_INVAL) {
        rc = fail(err, errlen, "RSA public key was rejected by the crypto library");
        goto out;
    }
    if (rc != 0) {
        goto out;
    }
    v->kind = AUTH__KEY_RSA;
out:
    OSSL_PARAM_BLD_free(bld);
    BN_free(n);
    BN_free(e);
    free(n_buf);
    free(e_buf);
    return rc;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

/*
 * The configuration value to a cJSON object: trim, base64url-decode, parse. Returns 0 with
 * *out set, AGENT_E_INVAL with a reason in err, or -ENOMEM.
 */
static int decode_jwk(const char *public_key_b64, cJSON **out, char *err, size_t errlen)
{
    int rc;
    uint8_t *json = NULL;
    size_t json_len = 0;
    cJSON *jwk = NULL;

    /* Values read from files (a Kubernetes secret volume, key-per-file) often end in a newline;
     * whitespace can never be part of base64url, so trimming it loses nothing. */
    const char *k = public_key_b64;
    size_t klen = strlen(k);
    while (klen > 0 && is_space(k[0])) {
        k++;
        klen--;
    }
    while (klen > 0 && is_space(k[klen - 1])) {
        klen--;
    }
    if (klen == 0) {
        return fail(err, errlen, "the public key is empty");
    }
    if (klen > AUTH_MAX_KEY_CHARS) {
        return fail(err, errlen, "the public key is too long");
    }
    rc = auth__b64url_decode(k, klen, false, &json, &json_len);
    if (rc != 0) {
        return rc == -ENOMEM ? rc : fail(err, errlen, "the public key is not valid base64url");
    }
    /* An embedded NUL would make cJSON stop early and silently ignore the rest. */
    if (memchr(json, 0, json_len) == NULL) {
        jwk = cJSON_ParseWithOpts((const char *)json, NULL, 1);
    }
    if (jwk == NULL) {
        rc = fail(err, errlen, "the public key is not a valid JSON Web Key (bad JSON)");
    } else if (!cJSON_IsObject(jwk)) {
        rc = fail(err, errlen, "the public key is not a valid JSON Web Key (not an object)");
        cJSON_Delete(jwk);
    } else {
        *out = jwk;
    }
    /* The decoded JWK may hold private members; don't leave them in freed memory. */
    OPENSSL_cleanse(json, json_len);
    free(json);
    return rc;
}

int auth_verifier_new(const char *public_key_b64, const char *subject, const char *issuer,
                      struct auth_verifier **out, const char **warning, char *err, size_t errlen)
{
    int rc;
    cJSON *jwk = NULL;
    struct auth_verifier *v = NULL;

    if (out == NULL) {
        return fail(err, errlen, "no output for the verifier");
    }
    if (public_key_b64 == NULL) {
        return fail(err, errlen, "no public key configured");
    }
    if (subject == NULL || subject[0] == '\0') {
        return fail(err, errlen, "the subject must not be empty");
    }
    rc = decode_jwk(public_key_b64, &jwk, err, errlen);
    if (rc != 0) {
        goto out;
    }
    v = calloc(1, sizeof(*v));
    if (v == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    const char *kty = member_string(jwk, "kty");
    if (kty == NULL) {
        rc = fail(err, errlen, "the public key JWK has no 'kty'");
    } else if (ascii_ieq(kty, "EC")) {
        rc = load_ec(jwk, v, err, errlen);
    } else if (ascii_ieq(kty, "RSA")) {
        rc = load_rsa(jwk, v, err, errlen);
    } else {
        rc = fail(err, errlen, "unsupported key type (kty must be EC or RSA)");
    }
    if (rc != 0) {
        goto out;
    }
    const char *iss = issuer != NULL && issuer[0] != '\0' ? issuer : AUTH_DEFAULT_ISSUER;
    v->subject = strdup(subject);
    v->subject_len = v->subject != NULL ? strlen(subject) : 0;
    v->issuer = strdup(iss);
    if (v->subject == NULL || v->issuer == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if (warning != NULL) {
        *warning = has_private_members(jwk) ? private_key_warning : NULL;
    }
    *out = v;
    v = NULL;
out:
    if (rc == -ENOMEM) {
        fail(err, errlen, "out of memory");
    }
    auth_verifier_free(v);
    cJSON_Delete(jwk);
    return rc;
}

void auth_verifier_free(struct auth_verifier *v)
{
    if (v == NULL) {
        return;
    }
    EVP_PKEY_free(v->pkey);
    if (v->subject != NULL) {
        OPENSSL_cleanse(v->subject, v->subject_len);
        free(v->subject);
    }
    free(v->issuer);
    free(v);
}
