/* SPDX-License-Identifier: MIT */
#include "s3.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ascii.h"
#include "egress_internal.h"
#include "err.h"
#include "log.h"
#include "num.h"

/*
 * The S3Storage provider's settings (docs/api.md §10, dotnet-monitor's
 * S3StorageEgressProviderOptions) and the pure parts of addressing an object. No I/O but the
 * readability check of CertificateAuthorityPath; never a secret's value in a message.
 */

#define LOG_CAT "Egress"

/* ---- small parsers ---- */

int s3__bool(const char *v, bool *out)
{
    if (ascii_ieq(v, "true")) {
        *out = true;
        return 0;
    }
    if (ascii_ieq(v, "false")) {
        *out = false;
        return 0;
    }
    return AGENT_E_INVAL;
}

/* Digits at *p (at most 9), advancing *p. */
static bool digits(const char **p, uint64_t *out)
{
    size_t len = strspn(*p, "0123456789");
    if (len == 0 || len > 9 || num_parse_u64(*p, len, 10, UINT64_MAX, out) != 0) {
        return false;
    }
    *p += len;
    return true;
}

int s3__timespan_s(const char *v, uint64_t *out)
{
    const char *p = v;
    uint64_t first = 0;
    if (!digits(&p, &first)) {
        return AGENT_E_INVAL;
    }
    if (*p == '\0') {
        *out = first; /* whole seconds */
        return 0;
    }
    uint64_t days = 0, h = first, m = 0, s = 0;
    if (*p == '.') { /* "d.hh:mm:ss" */
        p++;
        days = first;
        if (!digits(&p, &h)) {
            return AGENT_E_INVAL;
        }
    }
    if (*p++ != ':' || !digits(&p, &m) || *p++ != ':' || !digits(&p, &s)) {
        return AGENT_E_INVAL;
    }
    if (*p == '.') { /* a fraction of a second: allowed, dropped */
        p++;
        uint64_t frac = 0;
        if (!digits(&p, &frac)) {
            return AGENT_E_INVAL;
        }
    }
    if (*p != '\0' || h > 23 || m > 59 || s > 59 || days > 10000) {
        return AGENT_E_INVAL;
    }
    *out = ((days * 24 + h) * 60 + m) * 60 + s;
    return 0;
}

uint64_t s3__part_size(uint64_t base, uint32_t n)
{
    unsigned doublings = n > 0 ? (n - 1) / 1000 : 0;
    uint64_t size = base;
    for (unsigned i = 0; i < doublings && size < S3_MAX_PART; i++) {
        size *= 2;
    }
    return size < S3_MAX_PART ? size : S3_MAX_PART;
}

uint64_t s3__backoff_ms(unsigned attempt)
{
    uint64_t ms = 250;
    for (unsigned i = 1; i < attempt && ms < 8000; i++) {
        ms *= 2;
    }
    return ms < 8000 ? ms : 8000;
}

bool s3__retryable(int err, int http_status)
{
    if (err != 0) {
        /* Nothing the store said: a connection that failed, broke or stalled. A certificate that
         * does not verify or a malformed answer will not get better by asking again. */
        return err != AGENT_E_UNTRUSTED && err != AGENT_E_PROTO && err != AGENT_E_TOOBIG &&
               err != AGENT_E_INVAL && err != UV_ENOMEM;
    }
    return http_status >= 500 || http_status == 429;
}

/* ---- endpoint and addressing ---- */

static bool is_ip4(const char *h)
{
    unsigned char a[4];
    return inet_pton(AF_INET, h, a) == 1;
}

static bool is_ip6(const char *h)
{
    unsigned char a[16];
    return inet_pton(AF_INET6, h, a) == 1;
}

int s3__endpoint_parse(const char *url, struct url_origin *out, const char **why)
{
    const char *rest;
    int rc = url_origin_parse(url, out, &rest, why);
    if (rc == 0 && rest[0] != '\0' && strcmp(rest, "/") != 0) {
        *why = "only scheme://host[:port] is allowed (no user, path, query or fragment)";
        rc = AGENT_E_INVAL;
    }
    return rc;
}

/* A bucket name that can be a DNS label sequence under the endpoint (and match a wildcard
 * certificate over HTTPS: no dots then). */
static bool dns_bucket(const char *b, bool https)
{
    size_t n = strlen(b);
    if (n < 3 || n > 63 || is_ip4(b)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = b[i];
        bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!alnum && c != '-' && !(c == '.' && !https)) {
            return false;
        }
        if (!alnum && (i == 0 || i == n - 1 || b[i - 1] == '.' || b[i + 1] == '.')) {
            return false;
        }
    }
    return true;
}

int s3__where(const struct url_origin *ep, const char *bucket, bool force_path_style,
              const char *key, struct s3_where *w, struct buf *path)
{
    memset(w, 0, sizeof(*w));
    w->https = ep->https;
    w->port = ep->port;
    bool vhost = !force_path_style && !ep->ip && dns_bucket(bucket, ep->https);
    int n = vhost ? snprintf(w->host, sizeof(w->host), "%s.%s", bucket, ep->host)
                  : snprintf(w->host, sizeof(w->host), "%s", ep->host);
    if (n < 0 || (size_t)n >= sizeof(w->host)) {
        return AGENT_E_INVAL;
    }
    bool default_port = ep->port == (ep->https ? 443 : 80);
    bool v6 = is_ip6(w->host);
    n = default_port ? snprintf(w->host_header, sizeof(w->host_header), v6 ? "[%s]" : "%s", w->host)
                     : snprintf(w->host_header, sizeof(w->host_header), v6 ? "[%s]:%u" : "%s:%u",
                                w->host, (unsigned)ep->port);
    if (n < 0 || (size_t)n >= sizeof(w->host_header)) {
        return AGENT_E_INVAL;
    }
    return vhost ? buf_printf(path, "/%s", key) : buf_printf(path, "/%s/%s", bucket, key);
}

/* ---- a request's headers ---- */

size_t s3__headers(const struct s3_head_in *in, struct sigv4_kv *out)
{
    size_t n = 0;
    out[n++] = (struct sigv4_kv){"Host", in->host_header};
    out[n++] = (struct sigv4_kv){"x-amz-content-sha256", in->payload_hash};
    out[n++] = (struct sigv4_kv){"x-amz-date", in->amz_date};
    if (in->content_type != NULL) {
        out[n++] = (struct sigv4_kv){"Content-Type", in->content_type};
    }
    if (in->token != NULL) {
        out[n++] = (struct sigv4_kv){"x-amz-security-token", in->token};
    }
    if (in->creates && in->kms) {
        out[n++] = (struct sigv4_kv){"x-amz-server-side-encryption", "aws:kms"};
        if (in->kms_key != NULL) {
            out[n++] =
                (struct sigv4_kv){"x-amz-server-side-encryption-aws-kms-key-id", in->kms_key};
        }
    }
    return n;
}

/* ---- settings ---- */

static int problem(struct buf *errors, const char *key, const char *what)
{
    if (errors != NULL) {
        buf_printf(errors, "%s: %s\n", key, what);
    }
    return AGENT_E_INVAL;
}

static int set_string(char **dst, const char *value)
{
    char *copy = strdup(value);
    if (copy == NULL) {
        return UV_ENOMEM;
    }
    free(*dst);
    *dst = copy;
    return 0;
}

void s3__free_secret(char **s)
{
    if (*s != NULL) {
        volatile char *p = *s;
        while (*p != '\0') {
            *p++ = '\0';
        }
        free(*s);
        *s = NULL;
    }
}

static int set_secret(char **dst, const char *value)
{
    char *copy = strdup(value);
    if (copy == NULL) {
        return UV_ENOMEM;
    }
    s3__free_secret(dst);
    *dst = copy;
    return 0;
}

int egress_s3_set(struct egress_s3_options *o, const char *key, const char *setting,
                  const char *value, struct buf *errors)
{
    static const struct {
        const char *name;
        size_t off;
        bool secret;
    } strings[] = {
        {"BucketName", offsetof(struct egress_s3_options, bucket), false},
        {"Endpoint", offsetof(struct egress_s3_options, endpoint), false},
        {"RegionName", offsetof(struct egress_s3_options, region), false},
        {"AccessKeyId", offsetof(struct egress_s3_options, access_key_id), false},
        {"SecretAccessKey", offsetof(struct egress_s3_options, secret_access_key), true},
        {"SessionToken", offsetof(struct egress_s3_options, session_token), true},
        {"CertificateAuthorityPath", offsetof(struct egress_s3_options, ca_path), false},
        {"KmsEncryptionKey", offsetof(struct egress_s3_options, kms_key), false},
        {"AwsProfileName", offsetof(struct egress_s3_options, profile), false},
        {"AwsProfilePath", offsetof(struct egress_s3_options, profile_path), false},
    };
    if (value == NULL) {
        value = "";
    }
    for (size_t i = 0; i < sizeof(strings) / sizeof(strings[0]); i++) {
        if (ascii_ieq(setting, strings[i].name)) {
            char **dst = (char **)(void *)((char *)o + strings[i].off);
            if (value[0] == '\0') {
                return 0; /* an empty value leaves the setting unset, as .NET's binder does */
            }
            if (strpbrk(value, "\r\n") != NULL) {
                return problem(errors, key, "must be one line");
            }
            return strings[i].secret ? set_secret(dst, value) : set_string(dst, value);
        }
    }
    if (ascii_ieq(setting, "ForcePathStyle")) {
        return s3__bool(value, &o->force_path_style) == 0
                   ? 0
                   : problem(errors, key, "not a boolean (true or false)");
    }
    if (ascii_ieq(setting, "UseKmsEncryption")) {
        return s3__bool(value, &o->kms) == 0
                   ? 0
                   : problem(errors, key, "not a boolean (true or false)");
    }
    if (ascii_ieq(setting, "PreSignedUrlExpiry")) {
        uint64_t s = 0;
        if (s3__timespan_s(value, &s) != 0 || s < S3_PRESIGN_MIN_S || s > S3_PRESIGN_MAX_S) {
            return problem(errors, key,
                           "not a duration from 00:01:00 to 1.00:00:00 (\"hh:mm:ss\" or seconds)");
        }
        o->presign_s = s;
        return 0;
    }
    if (ascii_ieq(setting, "CopyBufferSize")) {
        /* dotnet-monitor's MultiPartUploadStream takes max(CopyBufferSize, 5 MiB): a smaller
         * value (its documentation's example is 1024) is raised, and egress_s3_check says so. */
        uint64_t n = 0;
        if (num_parse_u64_str(value, 10, S3_MAX_PART, &n) != 0 || n == 0) {
            return problem(errors, key, "not a part size in bytes from 1 to 5368709120");
        }
        o->part_asked = n < S3_MIN_PART ? n : 0;
        o->part_size = n < S3_MIN_PART ? S3_MIN_PART : n;
        return 0;
    }
    return problem(errors, key, "unknown setting of an S3Storage provider");
}

int egress_s3_check(const struct egress_s3_options *o, const char *name, struct buf *errors)
{
    char key[256];
    int rc = 0;
    if (o->bucket == NULL || o->bucket[0] == '\0') {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:BucketName", name);
        rc = problem(errors, key, "required");
    } else if (strlen(o->bucket) > 255 || strpbrk(o->bucket, "/ \t?#%\\") != NULL) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:BucketName", name);
        rc = problem(errors, key, "not a bucket name");
    }
    if (o->endpoint != NULL) {
        struct url_origin ep;
        const char *why = "";
        if (s3__endpoint_parse(o->endpoint, &ep, &why) != 0) {
            snprintf(key, sizeof(key), "Egress:S3Storage:%s:Endpoint", name);
            rc = problem(errors, key, why);
        }
    }
    if (o->region != NULL && strpbrk(o->region, "/ \t") != NULL) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:RegionName", name);
        rc = problem(errors, key, "not a region name");
    }
    if ((o->access_key_id == NULL) != (o->secret_access_key == NULL)) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:%s", name,
                 o->access_key_id == NULL ? "AccessKeyId" : "SecretAccessKey");
        rc = problem(errors, key,
                     "required with the other one (or leave both out to use AwsProfileName or "
                     "AWS's credential chain: default profile, AWS_ACCESS_KEY_ID and "
                     "AWS_SECRET_ACCESS_KEY)");
    }
    if (o->part_asked != 0) {
        log_info(LOG_CAT,
                 "Egress:S3Storage:%s:CopyBufferSize %llu is below S3's minimum part: "
                 "parts of 5242880 bytes (5 MiB) are used",
                 name, (unsigned long long)o->part_asked);
    }
    if (o->kms_key != NULL && !o->kms) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:KmsEncryptionKey", name);
        log_warn(LOG_CAT, "%s is ignored without UseKmsEncryption=true (as in dotnet-monitor)",
                 key);
    }
    if (o->profile_path != NULL && o->profile == NULL) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:AwsProfilePath", name);
        log_warn(LOG_CAT, "%s is ignored without AwsProfileName (as in dotnet-monitor)", key);
    }
    if (o->ca_path != NULL && access(o->ca_path, R_OK) != 0) {
        snprintf(key, sizeof(key), "Egress:S3Storage:%s:CertificateAuthorityPath", name);
        rc = problem(errors, key, "not readable");
    }
    return rc;
}

void egress_s3_options_fini(struct egress_s3_options *o)
{
    free(o->bucket);
    free(o->endpoint);
    free(o->region);
    free(o->access_key_id);
    s3__free_secret(&o->secret_access_key);
    s3__free_secret(&o->session_token);
    free(o->ca_path);
    free(o->kms_key);
    free(o->profile);
    free(o->profile_path);
    memset(o, 0, sizeof(*o));
}
