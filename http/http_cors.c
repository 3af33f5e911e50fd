/* SPDX-License-Identifier: MIT */
#include "http_cors.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* [*s, *e) trimmed of blanks on both sides. */
static void trim(const char **s, const char **e)
{
    while (*s < *e && is_blank(**s)) {
        (*s)++;
    }
    while (*e > *s && is_blank((*e)[-1])) {
        (*e)--;
    }
}

/*
 * The next item of a sep-separated list at *p, trimmed, in [*s, *e) (possibly empty); *p moves past
 * it. False once the list is used up (*p NULL).
 */
static bool next_item(const char **p, char sep, const char **s, const char **e)
{
    if (*p == NULL) {
        return false;
    }
    const char *end = strchr(*p, sep);
    *s = *p;
    *e = end != NULL ? end : *p + strlen(*p);
    *p = end != NULL ? end + 1 : NULL;
    trim(s, e);
    return true;
}

/* The configured entry [s, e), lower-cased, equals origin byte for byte. */
static bool entry_equals(const char *s, const char *e, const char *origin)
{
    size_t n = (size_t)(e - s);
    if (strlen(origin) != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if ((char)tolower((unsigned char)s[i]) != origin[i]) {
            return false;
        }
    }
    return true;
}

bool http_cors_origin_allowed(const char *allowed, const char *origin, bool *any)
{
    *any = false;
    if (allowed == NULL || origin == NULL || origin[0] == '\0') {
        return false;
    }
    size_t entries = 0;
    bool star = false;
    bool found = false;
    const char *p = allowed;
    const char *s;
    const char *e;
    while (next_item(&p, ';', &s, &e)) {
        if (s < e) {
            entries++;
            star = star || (e - s == 1 && *s == '*');
            found = found || entry_equals(s, e, origin);
        }
    }
    /* `*` means every origin only when it is the whole list (as ASP.NET Core's policy). */
    if (entries == 1 && star) {
        *any = true;
        return true;
    }
    return found;
}

static bool has_entry(const char *allowed)
{
    if (allowed == NULL) {
        return false;
    }
    for (const char *p = allowed; *p != '\0'; p++) {
        if (*p != ';' && !is_blank(*p)) {
            return true;
        }
    }
    return false;
}

static void add(struct http_cors_headers *out, const char *name, const char *value)
{
    if (out->n < sizeof(out->name) / sizeof(out->name[0])) {
        out->name[out->n] = name;
        out->value[out->n] = value;
        out->n++;
    }
}

/* The requested headers, each trimmed, empty ones dropped, joined with ",": 0 or a buf error. */
static int join_headers(const char *list, struct buf *scratch)
{
    buf_reset(scratch);
    const char *p = list;
    const char *s;
    const char *e;
    while (next_item(&p, ',', &s, &e)) {
        if (s < e) {
            int rc = buf_size(scratch) == 0 ? 0 : buf_append(scratch, ",", 1);
            rc = rc ? rc : buf_append(scratch, s, (size_t)(e - s));
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

enum http_cors_verdict http_cors_evaluate(const char *allowed, const char *method,
                                          const char *origin, const char *request_method,
                                          const char *request_headers, struct buf *scratch,
                                          struct http_cors_headers *out)
{
    out->n = 0;
    if (origin == NULL || !has_entry(allowed)) {
        return HTTP_CORS_PASS;
    }
    bool preflight = strcasecmp(method, "OPTIONS") == 0 && request_method != NULL;
    enum http_cors_verdict v = preflight ? HTTP_CORS_PREFLIGHT : HTTP_CORS_ACTUAL;
    bool any = false;
    if (!http_cors_origin_allowed(allowed, origin, &any)) {
        return v;
    }
    add(out, "Access-Control-Allow-Origin", any ? "*" : origin);
    if (preflight) {
        if (request_headers != NULL) {
            if (join_headers(request_headers, scratch) != 0) {
                out->n = 0;
                return v;
            }
            if (buf_size(scratch) > 0) {
                add(out, "Access-Control-Allow-Headers", buf_cstr(scratch));
            }
        }
        if (request_method[0] != '\0') {
            add(out, "Access-Control-Allow-Methods", request_method);
        }
    }
    if (!any) {
        add(out, "Vary", "Origin");
    }
    return v;
}
