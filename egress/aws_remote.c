/* SPDX-License-Identifier: MIT */
#include "aws_remote.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "civil.h"
#include "err.h"
#include "s3_xml.h"
#include "sigv4.h"

#define STALE_MARGIN_S 300 /* fetch again this long before the credentials expire */

int aws__url_parse(const char *url, struct aws_url *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    const char *rest;
    int rc = url_origin_parse(url, &out->ep, &rest, why);
    if (rc != 0) {
        return rc;
    }
    if (strchr(rest, '#') != NULL) {
        *why = "a fragment is not allowed";
        return AGENT_E_INVAL;
    }
    int n = snprintf(out->target, sizeof(out->target), "%s%s", rest[0] == '/' ? "" : "/", rest);
    if (n < 0 || (size_t)n >= sizeof(out->target)) {
        *why = "the path is too long";
        return AGENT_E_INVAL;
    }
    for (const char *p = out->target; *p != '\0'; p++) {
        if ((unsigned char)*p <= 32 || *p == 127) {
            *why = "a blank or control character in the path";
            return AGENT_E_INVAL;
        }
    }
    return 0;
}

bool aws__container_host_ok(const struct aws_url *u)
{
    if (u->ep.https) {
        return true;
    }
    const char *h = u->ep.host;
    unsigned char a[16];
    if (inet_pton(AF_INET, h, a) == 1) {
        return a[0] == 127 || strcmp(h, "169.254.170.2") == 0 || strcmp(h, "169.254.170.23") == 0;
    }
    if (inet_pton(AF_INET6, h, a) == 1) {
        unsigned char eks[16];
        unsigned char lo[16];
        (void)inet_pton(AF_INET6, "fd00:ec2::23", eks);
        (void)inet_pton(AF_INET6, "::1", lo);
        return memcmp(a, eks, 16) == 0 || memcmp(a, lo, 16) == 0;
    }
    return ascii_ieq(h, "localhost");
}

int aws__sts_endpoint(const char *endpoint_url, const char *region, const char *sts_regional,
                      struct buf *out)
{
    if (endpoint_url != NULL && endpoint_url[0] != '\0') {
        return buf_append_str(out, endpoint_url);
    }
    bool legacy = sts_regional != NULL && ascii_ieq(sts_regional, "legacy");
    if (region == NULL || region[0] == '\0' || legacy) {
        return buf_append_str(out, "https://sts.amazonaws.com");
    }
    return buf_printf(out, "https://sts.%s.amazonaws.com", region);
}

static int form_pair(struct buf *out, const char *name, const char *value)
{
    int rc = buf_size(out) > 0 ? buf_append_str(out, "&") : 0;
    if (rc == 0) {
        rc = buf_printf(out, "%s=", name);
    }
    if (rc == 0) {
        rc = sigv4_uri_encode(out, value, strlen(value), false);
    }
    return rc;
}

int aws__sts_body(const char *role_arn, const char *session_name, const char *token,
                  struct buf *out)
{
    int rc = form_pair(out, "Action", "AssumeRoleWithWebIdentity");
    if (rc == 0) {
        rc = form_pair(out, "RoleArn", role_arn);
    }
    if (rc == 0) {
        rc = form_pair(out, "RoleSessionName", session_name);
    }
    if (rc == 0) {
        rc = form_pair(out, "Version", "2011-06-15");
    }
    if (rc == 0) {
        rc = form_pair(out, "WebIdentityToken", token);
    }
    return rc;
}

/* n digits at s as a number, or -1. */
static int num(const char *s, int n)
{
    int v = 0;
    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

int aws__iso8601(const char *s, time_t *out)
{
    if (strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
        s[13] != ':' || s[16] != ':') {
        return AGENT_E_INVAL;
    }
    int y = num(s, 4), mo = num(s + 5, 2), d = num(s + 8, 2);
    int h = num(s + 11, 2), mi = num(s + 14, 2), se = num(s + 17, 2);
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > 31 || h < 0 || h > 23 || mi < 0 || mi > 59 ||
        se < 0 || se > 60) {
        return AGENT_E_INVAL;
    }
    const char *p = s + 19;
    if (*p == '.') {
        p++;
        size_t digits = strspn(p, "0123456789");
        if (digits == 0) {
            return AGENT_E_INVAL;
        }
        p += digits;
    }
    if (!((p[0] == 'Z' || p[0] == 'z') && p[1] == '\0') && strcmp(p, "+00:00") != 0) {
        return AGENT_E_INVAL;
    }
    int64_t t = civil_days(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
    *out = (time_t)t;
    return 0;
}

bool aws__creds_stale(time_t obtained, time_t expires, time_t now)
{
    if (expires == 0) {
        return false;
    }
    time_t life = expires - obtained;
    time_t margin = life < 2 * STALE_MARGIN_S ? life / 2 : STALE_MARGIN_S;
    return now >= expires - margin;
}

static int take_text(char **dst, struct buf *b, bool secret)
{
    int rc = aws_profile_set(dst, buf_cstr(b), buf_size(b), secret);
    if (secret) {
        if (b->p != NULL) {
            memset(b->p, 0, b->len); /* the buf held the secret too */
        }
    }
    return rc;
}

int aws__sts_parse(const char *xml, size_t n, struct aws_profile *out, time_t *expires, char *why,
                   size_t whylen)
{
    static const char *const fields[] = {"AccessKeyId", "SecretAccessKey", "SessionToken",
                                         "Expiration"};
    struct buf code, msg, v;
    buf_init(&code, 256);
    buf_init(&msg, 1024);
    buf_init(&v, 8192);
    int rc = 0;
    static const char *const err_code[] = {"ErrorResponse", "Error", "Code"};
    static const char *const err_msg[] = {"ErrorResponse", "Error", "Message"};
    if (s3_xml_find(xml, n, err_code, 3, &code) == 0) {
        (void)s3_xml_find(xml, n, err_msg, 3, &msg);
        snprintf(why, whylen, "STS %s: %s", buf_cstr(&code), buf_cstr(&msg));
        rc = AGENT_E_RUNTIME;
        goto cleanup;
    }
    *expires = 0;
    for (size_t i = 0; i < 4 && rc == 0; i++) {
        const char *path[] = {"AssumeRoleWithWebIdentityResponse",
                              "AssumeRoleWithWebIdentityResult", "Credentials", fields[i]};
        buf_reset(&v);
        rc = s3_xml_find(xml, n, path, 4, &v);
        if (rc != 0 || buf_size(&v) == 0) {
            snprintf(why, whylen, "no Credentials/%s in STS's answer", fields[i]);
            rc = AGENT_E_PROTO;
            break;
        }
        if (i == 0) {
            rc = take_text(&out->access_key_id, &v, false);
        } else if (i == 1) {
            rc = take_text(&out->secret_access_key, &v, true);
        } else if (i == 2) {
            rc = take_text(&out->session_token, &v, true);
        } else if (aws__iso8601(buf_cstr(&v), expires) != 0) {
            snprintf(why, whylen, "%s", "STS's Expiration is not an ISO 8601 UTC time");
            rc = AGENT_E_PROTO;
        }
    }
cleanup:
    buf_fini(&code);
    buf_fini(&msg);
    buf_fini(&v);
    return rc;
}

static int json_string(const cJSON *o, const char *name, char **dst, bool secret, char *why,
                       size_t whylen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    if (!cJSON_IsString(v) || v->valuestring[0] == '\0') {
        snprintf(why, whylen, "no %s string in the container endpoint's answer", name);
        return AGENT_E_PROTO;
    }
    return aws_profile_set(dst, v->valuestring, strlen(v->valuestring), secret);
}

int aws__container_parse(const char *json, size_t n, struct aws_profile *out, time_t *expires,
                         char *why, size_t whylen)
{
    cJSON *root = cJSON_ParseWithLength(json, n);
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        snprintf(why, whylen, "%s", "the container endpoint's answer is not a JSON object");
        rc = AGENT_E_PROTO;
        goto cleanup;
    }
    rc = json_string(root, "AccessKeyId", &out->access_key_id, false, why, whylen);
    if (rc == 0) {
        rc = json_string(root, "SecretAccessKey", &out->secret_access_key, true, why, whylen);
    }
    if (rc == 0 && cJSON_GetObjectItemCaseSensitive(root, "Token") != NULL) {
        rc = json_string(root, "Token", &out->session_token, true, why, whylen);
    }
    *expires = 0;
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(root, "Expiration");
    if (rc == 0 && e != NULL &&
        (!cJSON_IsString(e) || aws__iso8601(e->valuestring, expires) != 0)) {
        snprintf(why, whylen, "%s", "the container endpoint's Expiration is not an ISO 8601 time");
        rc = AGENT_E_PROTO;
    }
cleanup:
    if (root != NULL) {
        /* The parsed tree holds the secret too: wipe its strings before freeing. */
        for (cJSON *c = root->child; c != NULL; c = c->next) {
            if (cJSON_IsString(c)) {
                memset(c->valuestring, 0, strlen(c->valuestring));
            }
        }
        cJSON_Delete(root);
    }
    return rc;
}
