/* SPDX-License-Identifier: MIT */
#include "http_query.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "hex.h"
#include "http_proto.h"

/* Query strings and paths are capped by the server's max_url, so decoded copies stay small. */
#define ROUTER_MAX_DECODED ((size_t)64 * 1024)

/*
 * Percent-decodes s[0..n) and appends the result to out. plus_is_space selects the
 * application/x-www-form-urlencoded rule used in query strings. An encoded NUL is refused
 * because every consumer treats the result as a C string.
 */
static int decode_append(const char *s, size_t n, bool plus_is_space, struct buf *out)
{
    size_t i = 0;
    while (i < n) {
        size_t run = i;
        while (run < n && s[run] != '%' && !(plus_is_space && s[run] == '+')) {
            run++;
        }
        int rc = buf_append(out, s + i, run - i);
        if (rc != 0) {
            return rc;
        }
        i = run;
        if (i == n) {
            break;
        }
        char c;
        if (s[i] == '+') {
            c = ' ';
            i++;
        } else {
            if (n - i < 3) {
                return AGENT_E_INVAL;
            }
            int hi = hex_value(s[i + 1]);
            int lo = hex_value(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                return AGENT_E_INVAL;
            }
            c = (char)(hi * 16 + lo);
            i += 3;
        }
        rc = buf_append(out, &c, 1);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* One "name=value" segment of a query, as views into the raw string. */
struct query_param {
    const char *name;
    size_t name_len;
    const char *value; /* NULL when the segment has no '=' */
    size_t value_len;
};

/* Cursor over the '&'-separated segments; empty segments ("a=1&&b=2") are skipped. */
static bool query_next(const char **cursor, struct query_param *p)
{
    const char *s = *cursor;
    while (*s == '&') {
        s++;
    }
    if (*s == '\0') {
        *cursor = s;
        return false;
    }
    const char *end = strchr(s, '&');
    if (end == NULL) {
        end = s + strlen(s);
    }
    const char *eq = memchr(s, '=', (size_t)(end - s));
    p->name = s;
    p->name_len = (size_t)((eq ? eq : end) - s);
    p->value = eq ? eq + 1 : NULL;
    p->value_len = eq ? (size_t)(end - eq - 1) : 0;
    *cursor = end;
    return true;
}

int http_query_get(const char *query, const char *name, struct buf *out)
{
    struct buf key, val, found;
    buf_init(&key, ROUTER_MAX_DECODED);
    buf_init(&val, ROUTER_MAX_DECODED);
    buf_init(&found, ROUTER_MAX_DECODED);
    int rc = 0;
    bool have = false;
    const char *cur = query ? query : "";
    struct query_param p;
    /* Walk the whole query even after a match: malformed encoding anywhere, or a second
     * occurrence with another value, must be reported rather than silently ignored. */
    while (query_next(&cur, &p)) {
        buf_reset(&key);
        buf_reset(&val);
        rc = decode_append(p.name, p.name_len, true, &key);
        if (rc == 0 && p.value != NULL) {
            rc = decode_append(p.value, p.value_len, true, &val);
        }
        if (rc != 0) {
            goto out;
        }
        if (strcasecmp(buf_cstr(&key), name) != 0) {
            continue;
        }
        if (!have) {
            rc = buf_append(&found, buf_data(&val), buf_size(&val));
            if (rc != 0) {
                goto out;
            }
            have = true;
        } else if (buf_size(&found) != buf_size(&val) ||
                   memcmp(buf_data(&found), buf_data(&val), buf_size(&val)) != 0) {
            rc = AGENT_E_INVAL;
            goto out;
        }
    }
    if (have) {
        buf_reset(out);
        rc = buf_append(out, buf_data(&found), buf_size(&found));
        if (rc == 0) {
            buf_cstr(out);
        }
    }
out:
    buf_fini(&key);
    buf_fini(&val);
    buf_fini(&found);
    if (rc != 0) {
        return rc < 0 ? rc : AGENT_E_INVAL;
    }
    return have ? 1 : 0;
}

int http_query_check_names(const char *query, const char *const *allowed, struct buf *bad)
{
    struct buf key;
    buf_init(&key, ROUTER_MAX_DECODED);
    int rc = 0;
    const char *cur = query ? query : "";
    struct query_param p;
    while (query_next(&cur, &p)) {
        buf_reset(&key);
        rc = decode_append(p.name, p.name_len, true, &key);
        if (rc != 0) {
            /* Report the raw name: the decoded one does not exist. */
            buf_reset(&key);
            if (buf_append(&key, p.name, p.name_len) != 0) {
                buf_reset(&key);
            }
            rc = AGENT_E_INVAL;
            break;
        }
        const char *k = buf_cstr(&key);
        bool ok = false;
        for (size_t i = 0; allowed != NULL && allowed[i] != NULL; i++) {
            if (strcasecmp(k, allowed[i]) == 0) {
                ok = true;
                break;
            }
        }
        if (!ok) {
            rc = AGENT_E_INVAL;
            break;
        }
    }
    if (rc != 0 && bad != NULL) {
        buf_reset(bad);
        if (buf_append(bad, buf_data(&key), buf_size(&key)) == 0) {
            buf_cstr(bad);
        }
    }
    buf_fini(&key);
    return rc;
}

int http_path_decode(const char *path, struct buf *out)
{
    struct buf tmp;
    buf_init(&tmp, ROUTER_MAX_DECODED);
    int rc = decode_append(path ? path : "", path ? strlen(path) : 0, false, &tmp);
    if (rc == 0) {
        buf_reset(out);
        rc = buf_append(out, buf_data(&tmp), buf_size(&tmp));
        if (rc == 0) {
            buf_cstr(out);
        }
    }
    buf_fini(&tmp);
    return rc;
}

/*
 * The "type" of a problem: the section of the RFC that defines the status, like ASP.NET Core's
 * ProblemDetails defaults, so dotnet-monitor clients see the same URIs. 429 and 431 are not in
 * RFC 9110; they come from RFC 6585 §4 and §5.
 */
static const char *problem_type(int status)
{
    switch (status) {
    case 400:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.1";
    case 401:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.2";
    case 403:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.4";
    case 404:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.5";
    case 405:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.6";
    case 406:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.7";
    case 408:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.9";
    case 409:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.10";
    case 411:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.12";
    case 412:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.13";
    case 413:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.14";
    case 414:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.15";
    case 415:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.16";
    case 417:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.18";
    case 422:
        return "https://tools.ietf.org/html/rfc9110#section-15.5.21";
    case 429:
        return "https://tools.ietf.org/html/rfc6585#section-4";
    case 431:
        return "https://tools.ietf.org/html/rfc6585#section-5";
    case 500:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.1";
    case 501:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.2";
    case 502:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.3";
    case 503:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.4";
    case 504:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.5";
    case 505:
        return "https://tools.ietf.org/html/rfc9110#section-15.6.6";
    default:
        return "about:blank";
    }
}

int http_problem_json(struct buf *out, int status, const char *title, const char *detail)
{
    if (status < 100 || status > 599) {
        return AGENT_E_INVAL;
    }
    struct buf tmp;
    buf_init(&tmp, out->max);
    int rc = buf_printf(&tmp, "{\"type\":\"%s\",\"title\":\"", problem_type(status));
    rc = rc ? rc : buf_append_json_escaped(&tmp, title ? title : http__reason_phrase(status));
    rc = rc ? rc : buf_printf(&tmp, "\",\"status\":%d", status);
    if (rc == 0 && detail != NULL) {
        rc = buf_append_str(&tmp, ",\"detail\":\"");
        rc = rc ? rc : buf_append_json_escaped(&tmp, detail);
        rc = rc ? rc : buf_append_str(&tmp, "\"");
    }
    rc = rc ? rc : buf_append_str(&tmp, "}");
    if (rc == 0) {
        rc = buf_append(out, buf_data(&tmp), buf_size(&tmp));
    }
    buf_fini(&tmp);
    return rc;
}
