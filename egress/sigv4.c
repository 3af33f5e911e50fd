/* SPDX-License-Identifier: MIT */
#include "sigv4.h"

#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "ascii.h"
#include "err.h"
#include "hex.h"

/*
 * Signature Version 4 in four steps (AWS General Reference, "Create a signed AWS API request"):
 * canonical request, string to sign, signing key, signature. Every intermediate string is built
 * in a struct buf; the only secrets are the "AWS4"+secret key material and the derived keys,
 * which live in stack arrays wiped with OPENSSL_cleanse before returning.
 */

#define SCRATCH_MAX (1u << 20) /* canonical strings of our own requests are far smaller */

void sigv4_amz_date(time_t t, char out[SIGV4_DATE_SIZE])
{
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL ||
        strftime(out, SIGV4_DATE_SIZE, "%Y%m%dT%H%M%SZ", &tm) != SIGV4_DATE_SIZE - 1) {
        out[0] = '\0';
    }
}

void sigv4_sha256_hex(const void *p, size_t n, char out[SIGV4_HEX_SIZE])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    if (EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1 || mdlen != 32) {
        out[0] = '\0';
        return;
    }
    hex_encode(md, 32, out);
    out[64] = '\0';
}

int sigv4_uri_encode(struct buf *out, const char *s, size_t n, bool keep_slash)
{
    return buf_append_pct(out, s, n, keep_slash); /* SigV4's URI encoding is RFC 3986's */
}

static bool valid_amz_date(const char *d)
{
    if (d == NULL || strlen(d) != SIGV4_DATE_SIZE - 1 || d[8] != 'T' || d[15] != 'Z') {
        return false;
    }
    for (size_t i = 0; i < 15; i++) {
        if (i != 8 && (d[i] < '0' || d[i] > '9')) {
            return false;
        }
    }
    return true;
}

/* HTTP token characters (RFC 9110 §5.6.2), the only ones a header name may hold. */
static bool token_char(unsigned char c)
{
    return c > 32 && c < 127 && strchr("\"(),/:;<=>?@[\\]{}", c) == NULL;
}

/* ---- canonical query ---- */

struct span {
    size_t off, len;
};

struct qparam {
    struct span name, value;
};

static int span_cmp(const struct buf *b, struct span x, struct span y)
{
    size_t n = x.len < y.len ? x.len : y.len;
    int c = memcmp(b->p + x.off, b->p + y.off, n);
    if (c != 0) {
        return c;
    }
    return x.len < y.len ? -1 : (x.len > y.len ? 1 : 0);
}

static int encode_span(struct buf *scratch, const char *s, struct span *out)
{
    out->off = scratch->len;
    int rc = sigv4_uri_encode(scratch, s, strlen(s), false);
    out->len = scratch->len - out->off;
    return rc;
}

/* Appends "n1=v1&n2=v2…" sorted by encoded name, then encoded value. */
static int canonical_query(const struct sigv4_kv *q, size_t n, struct buf *out)
{
    if (n > SIGV4_MAX_PARAMS) {
        return AGENT_E_INVAL;
    }
    struct qparam p[SIGV4_MAX_PARAMS];
    struct buf scratch;
    buf_init(&scratch, SCRATCH_MAX);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (q[i].name == NULL) {
            rc = AGENT_E_INVAL;
            break;
        }
        rc = encode_span(&scratch, q[i].name, &p[i].name);
        if (rc == 0) {
            rc = encode_span(&scratch, q[i].value != NULL ? q[i].value : "", &p[i].value);
        }
    }
    /* Insertion sort: a handful of parameters, and stable. */
    for (size_t i = 1; i < n && rc == 0; i++) {
        struct qparam x = p[i];
        size_t j = i;
        while (j > 0) {
            int c = span_cmp(&scratch, p[j - 1].name, x.name);
            if (c < 0 || (c == 0 && span_cmp(&scratch, p[j - 1].value, x.value) <= 0)) {
                break;
            }
            p[j] = p[j - 1];
            j--;
        }
        p[j] = x;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (i > 0) {
            rc = buf_append(out, "&", 1);
        }
        if (rc == 0) {
            rc = buf_append(out, scratch.p + p[i].name.off, p[i].name.len);
        }
        if (rc == 0) {
            rc = buf_append(out, "=", 1);
        }
        if (rc == 0) {
            rc = buf_append(out, scratch.p + p[i].value.off, p[i].value.len);
        }
    }
    buf_fini(&scratch);
    return rc;
}

/* ---- canonical headers ---- */

/* Appends v trimmed, inner runs of blanks folded to one space. */
static int append_trimmed(struct buf *out, const char *v)
{
    bool pending_space = false;
    bool any = false;
    for (const char *c = v; *c != '\0'; c++) {
        if (*c == ' ' || *c == '\t') {
            pending_space = any;
            continue;
        }
        if ((unsigned char)*c < 32 || *c == 127) {
            return AGENT_E_INVAL; /* no CR/LF or other controls in a header value */
        }
        int rc = pending_space ? buf_append(out, " ", 1) : 0;
        pending_space = false;
        any = true;
        if (rc == 0) {
            rc = buf_append(out, c, 1);
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/*
 * Appends the canonical headers ("name:value\n" per distinct name, sorted) to creq and the signed
 * header list ("a;b;c") to names.
 */
static int canonical_headers(const struct sigv4_kv *h, size_t n, struct buf *creq,
                             struct buf *names)
{
    if (n == 0 || n > SIGV4_MAX_HEADERS) {
        return AGENT_E_INVAL;
    }
    struct span lower[SIGV4_MAX_HEADERS];
    size_t order[SIGV4_MAX_HEADERS];
    struct buf scratch;
    buf_init(&scratch, SCRATCH_MAX);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *name = h[i].name;
        if (name == NULL || name[0] == '\0' || h[i].value == NULL) {
            rc = AGENT_E_INVAL;
            break;
        }
        lower[i].off = scratch.len;
        for (const char *c = name; *c != '\0' && rc == 0; c++) {
            char l = ascii_lower(*c);
            rc = token_char((unsigned char)*c) ? buf_append(&scratch, &l, 1) : AGENT_E_INVAL;
        }
        lower[i].len = scratch.len - lower[i].off;
        order[i] = i;
    }
    for (size_t i = 1; i < n && rc == 0; i++) {
        size_t x = order[i];
        size_t j = i;
        while (j > 0 && span_cmp(&scratch, lower[order[j - 1]], lower[x]) > 0) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = x;
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        struct span nm = lower[order[i]];
        bool same = i > 0 && span_cmp(&scratch, lower[order[i - 1]], nm) == 0;
        if (same) {
            rc = buf_append(creq, ",", 1);
        } else {
            if (i > 0) {
                rc = buf_append(creq, "\n", 1);
                if (rc == 0) {
                    rc = buf_append(names, ";", 1);
                }
            }
            if (rc == 0) {
                rc = buf_append(creq, scratch.p + nm.off, nm.len);
            }
            if (rc == 0) {
                rc = buf_append(names, scratch.p + nm.off, nm.len);
            }
            if (rc == 0) {
                rc = buf_append(creq, ":", 1);
            }
        }
        if (rc == 0) {
            rc = append_trimmed(creq, h[order[i]].value);
        }
    }
    if (rc == 0) {
        rc = buf_append(creq, "\n", 1);
    }
    buf_fini(&scratch);
    return rc;
}

/* The canonical request into creq and the signed header names into names. */
static int canonical(const struct sigv4_req *r, struct buf *creq, struct buf *names)
{
    if (r->method == NULL || r->path == NULL || r->path[0] != '/' || r->payload_hash == NULL) {
        return AGENT_E_INVAL;
    }
    int rc = buf_printf(creq, "%s\n", r->method);
    if (rc == 0) {
        rc = sigv4_uri_encode(creq, r->path, strlen(r->path), true);
    }
    if (rc == 0) {
        rc = buf_append(creq, "\n", 1);
    }
    if (rc == 0) {
        rc = canonical_query(r->query, r->nquery, creq);
    }
    if (rc == 0) {
        rc = buf_append(creq, "\n", 1);
    }
    if (rc == 0) {
        rc = canonical_headers(r->headers, r->nheaders, creq, names);
    }
    if (rc == 0) {
        rc = buf_printf(creq, "\n%s\n%s", buf_cstr(names), r->payload_hash);
    }
    return rc;
}

int sigv4_canonical_request(const struct sigv4_req *r, struct buf *out)
{
    struct buf names;
    buf_init(&names, SCRATCH_MAX);
    int rc = canonical(r, out, &names);
    buf_fini(&names);
    return rc;
}

static bool valid_key(const struct sigv4_key *k)
{
    return k->access_key_id != NULL && k->secret_access_key != NULL && k->region != NULL &&
           k->service != NULL && k->region[0] != '\0' && k->service[0] != '\0' &&
           strpbrk(k->region, "/\n") == NULL && strpbrk(k->service, "/\n") == NULL;
}

/* "AWS4-HMAC-SHA256\n<date>\n<scope>\n<hex(sha256(creq))>" */
static int string_to_sign(const struct sigv4_key *k, const char *amz_date, struct buf *creq,
                          struct buf *out)
{
    char h[SIGV4_HEX_SIZE];
    sigv4_sha256_hex(buf_data(creq), buf_size(creq), h);
    return buf_printf(out, SIGV4_ALGORITHM "\n%s\n%.8s/%s/%s/aws4_request\n%s", amz_date, amz_date,
                      k->region, k->service, h);
}

int sigv4_string_to_sign(const struct sigv4_key *k, const struct sigv4_req *r, const char *amz_date,
                         struct buf *out)
{
    if (!valid_key(k) || !valid_amz_date(amz_date)) {
        return AGENT_E_INVAL;
    }
    struct buf creq;
    buf_init(&creq, SCRATCH_MAX);
    int rc = sigv4_canonical_request(r, &creq);
    if (rc == 0) {
        rc = string_to_sign(k, amz_date, &creq, out);
    }
    buf_fini(&creq);
    return rc;
}

static bool hmac(const void *key, size_t keylen, const void *data, size_t n, unsigned char out[32])
{
    unsigned int len = 0;
    return HMAC(EVP_sha256(), key, (int)keylen, data, n, out, &len) != NULL && len == 32;
}

/* hex(HMAC(signing key, sts)): the signing key derived from the secret, date, region, service. */
static int signature(const struct sigv4_key *k, const char *amz_date, const struct buf *sts,
                     char out[SIGV4_HEX_SIZE])
{
    size_t slen = strlen(k->secret_access_key);
    if (slen > 256) {
        return AGENT_E_INVAL;
    }
    unsigned char secret[4 + 256];
    unsigned char a[32], b[32];
    static const unsigned char prefix[4] = {'A', 'W', 'S', '4'};
    memcpy(secret, prefix, sizeof(prefix));
    memcpy(secret + 4, k->secret_access_key, slen);
    bool ok = hmac(secret, 4 + slen, amz_date, 8, a) &&
              hmac(a, 32, k->region, strlen(k->region), b) &&
              hmac(b, 32, k->service, strlen(k->service), a) &&
              hmac(a, 32, "aws4_request", 12, b) && hmac(b, 32, buf_data(sts), buf_size(sts), a);
    if (ok) {
        hex_encode(a, 32, out);
        out[64] = '\0';
    }
    OPENSSL_cleanse(secret, sizeof(secret));
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(b, sizeof(b));
    return ok ? 0 : AGENT_E_INVAL;
}

int sigv4_authorization(const struct sigv4_key *k, const struct sigv4_req *r, const char *amz_date,
                        struct buf *out)
{
    if (!valid_key(k) || !valid_amz_date(amz_date)) {
        return AGENT_E_INVAL;
    }
    struct buf creq, names, sts;
    buf_init(&creq, SCRATCH_MAX);
    buf_init(&names, SCRATCH_MAX);
    buf_init(&sts, SCRATCH_MAX);
    char sig[SIGV4_HEX_SIZE];
    int rc = canonical(r, &creq, &names);
    if (rc == 0) {
        rc = string_to_sign(k, amz_date, &creq, &sts);
    }
    if (rc == 0) {
        rc = signature(k, amz_date, &sts, sig);
    }
    if (rc == 0) {
        rc = buf_printf(out,
                        SIGV4_ALGORITHM " Credential=%s/%.8s/%s/%s/aws4_request, SignedHeaders=%s, "
                                        "Signature=%s",
                        k->access_key_id, amz_date, k->region, k->service, buf_cstr(&names), sig);
    }
    buf_fini(&creq);
    buf_fini(&names);
    buf_fini(&sts);
    return rc;
}

int sigv4_presign_query(const struct sigv4_key *k, const char *session_token, const char *method,
                        const char *path, const char *host, const char *amz_date,
                        uint64_t expires_s, struct buf *out)
{
    if (!valid_key(k) || !valid_amz_date(amz_date) || host == NULL || expires_s == 0 ||
        expires_s > 604800) {
        return AGENT_E_INVAL;
    }
    struct buf cred, creq, names, sts;
    buf_init(&cred, SCRATCH_MAX);
    buf_init(&creq, SCRATCH_MAX);
    buf_init(&names, SCRATCH_MAX);
    buf_init(&sts, SCRATCH_MAX);
    char expires[24], sig[SIGV4_HEX_SIZE];
    snprintf(expires, sizeof(expires), "%llu", (unsigned long long)expires_s);
    int rc = buf_printf(&cred, "%s/%.8s/%s/%s/aws4_request", k->access_key_id, amz_date, k->region,
                        k->service);
    struct sigv4_kv q[6] = {
        {"X-Amz-Algorithm", SIGV4_ALGORITHM},
        {"X-Amz-Credential", buf_cstr(&cred)},
        {"X-Amz-Date", amz_date},
        {"X-Amz-Expires", expires},
        {"X-Amz-SignedHeaders", "host"},
        {"X-Amz-Security-Token", session_token},
    };
    struct sigv4_kv h[1] = {{"host", host}};
    struct sigv4_req r = {
        method, path, q, session_token != NULL ? 6 : 5, h, 1, SIGV4_UNSIGNED_PAYLOAD};
    size_t start = buf_size(out);
    if (rc == 0) {
        rc = canonical(&r, &creq, &names);
    }
    if (rc == 0) {
        rc = string_to_sign(k, amz_date, &creq, &sts);
    }
    if (rc == 0) {
        rc = signature(k, amz_date, &sts, sig);
    }
    if (rc == 0) {
        rc = canonical_query(q, r.nquery, out);
    }
    if (rc == 0) {
        rc = buf_printf(out, "&X-Amz-Signature=%s", sig);
    }
    if (rc != 0) {
        buf_truncate(out, start);
    }
    buf_fini(&cred);
    buf_fini(&creq);
    buf_fini(&names);
    buf_fini(&sts);
    return rc;
}
