/* SPDX-License-Identifier: MIT */
#include "aws_profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "s3.h"

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v';
}

/* [*b, *e) without blanks at either end. */
static void trim(const char **b, const char **e)
{
    while (*b < *e && blank(**b)) {
        (*b)++;
    }
    while (*e > *b && blank((*e)[-1])) {
        (*e)--;
    }
}

/* s[0..n) equals the C string lit exactly. */
static bool eq_n(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

/* Whether the section header [b, e) (inside the brackets, trimmed) names profile `name`. */
static bool section_is(const char *b, const char *e, const char *name, bool config_file)
{
    size_t n = (size_t)(e - b);
    if (!config_file) {
        return eq_n(b, n, name);
    }
    if (strcmp(name, "default") == 0 && eq_n(b, n, "default")) {
        return true;
    }
    if (n < 8 || memcmp(b, "profile", 7) != 0 || !blank(b[7])) {
        return false;
    }
    b += 8;
    trim(&b, &e);
    return eq_n(b, (size_t)(e - b), name);
}

int aws_profile_set(char **dst, const char *value, size_t n, bool secret)
{
    char *v = malloc(n + 1);
    if (v == NULL) {
        return -ENOMEM; /* UV_ENOMEM, without <uv.h> */
    }
    memcpy(v, value, n);
    v[n] = '\0';
    if (secret) {
        s3__free_secret(dst);
    } else {
        free(*dst);
    }
    *dst = v;
    return 0;
}

static const char *const unsupported_keys[] = {
    "credential_process", "role_arn",      "web_identity_token_file",
    "sso_session",        "sso_start_url", "credential_source",
};

/* One "key = value" line of the selected section. */
static int apply(struct aws_profile *out, const char *kb, const char *ke, const char *vb,
                 const char *ve)
{
    size_t kn = (size_t)(ke - kb);
    if (ascii_ieq_n(kb, kn, "aws_access_key_id")) {
        return aws_profile_set(&out->access_key_id, vb, (size_t)(ve - vb), false);
    }
    if (ascii_ieq_n(kb, kn, "aws_secret_access_key")) {
        return aws_profile_set(&out->secret_access_key, vb, (size_t)(ve - vb), true);
    }
    if (ascii_ieq_n(kb, kn, "aws_session_token")) {
        return aws_profile_set(&out->session_token, vb, (size_t)(ve - vb), true);
    }
    if (ascii_ieq_n(kb, kn, "region")) {
        return aws_profile_set(&out->region, vb, (size_t)(ve - vb), false);
    }
    for (size_t i = 0; i < sizeof(unsupported_keys) / sizeof(unsupported_keys[0]); i++) {
        if (ascii_ieq_n(kb, kn, unsupported_keys[i]) && out->unsupported[0] == '\0') {
            snprintf(out->unsupported, sizeof(out->unsupported), "%s", unsupported_keys[i]);
        }
    }
    return 0;
}

int aws_profile_parse(const char *text, size_t len, const char *name, bool config_file,
                      struct aws_profile *out, char *why, size_t whylen)
{
    const char *p = text, *end = text + len;
    bool in_section = false, any_section = false;
    unsigned line = 0;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *b = p, *e = nl != NULL ? nl : end;
        p = nl != NULL ? nl + 1 : end;
        line++;
        if (memchr(b, '\0', (size_t)(e - b)) != NULL) {
            snprintf(why, whylen, "line %u: a NUL byte", line);
            return AGENT_E_INVAL;
        }
        bool indented = b < e && blank(*b) && *b != '\r';
        trim(&b, &e);
        if (b == e || *b == '#' || *b == ';') {
            continue;
        }
        if (*b == '[') {
            const char *close = memchr(b, ']', (size_t)(e - b));
            const char *after = close != NULL ? close + 1 : e;
            while (after < e && blank(*after)) {
                after++;
            }
            if (close == NULL || (after < e && *after != '#' && *after != ';')) {
                snprintf(why, whylen, "line %u: a section header must be [name]", line);
                return AGENT_E_INVAL;
            }
            const char *sb = b + 1, *se = close;
            trim(&sb, &se);
            in_section = section_is(sb, se, name, config_file);
            any_section = true;
            out->found = out->found || in_section;
            continue;
        }
        if (indented && any_section) {
            continue; /* a sub-property of the key above */
        }
        const char *eq = memchr(b, '=', (size_t)(e - b));
        if (eq == NULL || eq == b || !any_section) {
            snprintf(why, whylen, "line %u: expected [section] or key = value", line);
            return AGENT_E_INVAL;
        }
        if (!in_section) {
            continue;
        }
        const char *kb = b, *ke = eq, *vb = eq + 1, *ve = e;
        trim(&kb, &ke);
        trim(&vb, &ve);
        int rc = apply(out, kb, ke, vb, ve);
        if (rc != 0) {
            snprintf(why, whylen, "%s", "out of memory");
            return rc;
        }
    }
    return 0;
}

void aws_profile_fini(struct aws_profile *p)
{
    free(p->access_key_id);
    s3__free_secret(&p->secret_access_key);
    s3__free_secret(&p->session_token);
    free(p->region);
    memset(p, 0, sizeof(*p));
}
