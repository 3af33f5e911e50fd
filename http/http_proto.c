/* SPDX-License-Identifier: MIT */
#include "http_proto.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "err.h"

const char *http__reason_phrase(int status)
{
    /* RFC 9110 §15 phrases, plus RFC 6585 (428/429/431). 413 and 422 use the RFC 9110 names. */
    switch (status) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 203:
        return "Non-Authoritative Information";
    case 204:
        return "No Content";
    case 205:
        return "Reset Content";
    case 206:
        return "Partial Content";
    case 300:
        return "Multiple Choices";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 407:
        return "Proxy Authentication Required";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 421:
        return "Misdirected Request";
    case 422:
        return "Unprocessable Content";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    case 507:
        return "Insufficient Storage"; /* RFC 4918: dotmon's memory budget, agent/api.c */
    default:
        return "Unknown";
    }
}

bool http__is_tchar(unsigned char c)
{
    /* tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|"
     *       / "~" / DIGIT / ALPHA */
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
        return true;
    }
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

bool http__is_token(const char *name, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        if (!http__is_tchar((unsigned char)name[i])) {
            return false;
        }
    }
    return true;
}

bool http__is_field_value(const char *value, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)value[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f) {
            return false;
        }
    }
    return true;
}

int http__format_date(time_t t, char out[30])
{
    /* strftime's %a and %b follow the locale; the wire format must not. */
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || tm.tm_wday < 0 || tm.tm_wday > 6 || tm.tm_mon < 0 ||
        tm.tm_mon > 11 || tm.tm_year + 1900 < 0 || tm.tm_year + 1900 > 9999) {
        return AGENT_E_INVAL;
    }
    int n = snprintf(out, 30, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
                     months[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
    return n == 29 ? 0 : AGENT_E_INVAL;
}

/* Characters RFC 3986 never allows unencoded anywhere in a URI, plus '#': a request target has
 * no fragment (RFC 9112 §3.2). '[' and ']' stay allowed because real clients send them in
 * queries. */
static bool target_char_ok(unsigned char c)
{
    if (c <= 0x20 || c >= 0x7f) {
        return false;
    }
    return strchr("\"#<>\\^`{|}", c) == NULL;
}

int http__split_target(const char *target, size_t len, bool is_options, size_t *path_off,
                       size_t *path_len, size_t *query_off, size_t *query_len)
{
    if (len == 0) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < len; i++) {
        if (!target_char_ok((unsigned char)target[i])) {
            return AGENT_E_INVAL;
        }
    }
    size_t start;
    if (len == 1 && target[0] == '*') {
        /* asterisk-form, RFC 9112 §3.2.4: only for a server-wide OPTIONS. */
        if (!is_options) {
            return AGENT_E_INVAL;
        }
        *path_off = 0;
        *path_len = 1;
        *query_off = 1;
        *query_len = 0;
        return 0;
    }
    if (target[0] == '/') {
        start = 0;
    } else {
        /* absolute-form, RFC 9112 §3.2.2: servers must accept it. Skip scheme and authority. */
        size_t scheme;
        if (len >= 7 && strncasecmp(target, "http://", 7) == 0) {
            scheme = 7;
        } else if (len >= 8 && strncasecmp(target, "https://", 8) == 0) {
            scheme = 8;
        } else {
            return AGENT_E_INVAL;
        }
        start = scheme;
        while (start < len && target[start] != '/' && target[start] != '?') {
            start++;
        }
        if (start == scheme) {
            return AGENT_E_INVAL; /* empty authority */
        }
    }
    size_t q = start;
    while (q < len && target[q] != '?') {
        q++;
    }
    *path_off = start;
    *path_len = q - start;
    *query_off = q < len ? q + 1 : len;
    *query_len = q < len ? len - q - 1 : 0;
    return 0;
}

static int parse_port(const char *s, size_t n, int *port)
{
    if (n == 0 || n > 5) {
        return AGENT_E_INVAL;
    }
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return AGENT_E_INVAL;
        }
        v = v * 10 + (s[i] - '0');
    }
    if (v > 65535) {
        return AGENT_E_INVAL;
    }
    *port = v;
    return 0;
}

static bool is_ipv4_literal(const char *s, size_t n)
{
    int parts = 0;
    size_t i = 0;
    while (i < n) {
        size_t digits = 0;
        int v = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 4) {
            v = v * 10 + (s[i] - '0');
            i++;
            digits++;
        }
        if (digits == 0 || digits > 3 || v > 255) {
            return false;
        }
        parts++;
        if (i < n) {
            if (s[i] != '.' || parts == 4) {
                return false;
            }
            i++;
            if (i == n) {
                return false;
            }
        }
    }
    return parts == 4;
}

int http__parse_listen_url(const char *url, struct http_listen_url *out)
{
    struct http_listen_url u;
    memset(&u, 0, sizeof(u));
    u.tls = url != NULL && strncasecmp(url, "https://", 8) == 0;
    if (url == NULL || (!u.tls && strncasecmp(url, "http://", 7) != 0)) {
        return AGENT_E_INVAL;
    }
    const char *h = url + (u.tls ? 8 : 7);
    const char *end = h + strlen(h);
    /* A trailing "/" (Kestrel accepts "http://+:80/") but no other path. */
    if (end > h && end[-1] == '/') {
        end--;
    }
    if (memchr(h, '/', (size_t)(end - h)) != NULL || memchr(h, '@', (size_t)(end - h)) != NULL) {
        return AGENT_E_INVAL;
    }
    const char *host_end;
    const char *port_at = NULL;
    if (*h == '[') {
        const char *rb = memchr(h, ']', (size_t)(end - h));
        if (rb == NULL || rb == h + 1) {
            return AGENT_E_INVAL;
        }
        size_t hl = (size_t)(rb - h - 1);
        if (hl >= sizeof(u.host)) {
            return AGENT_E_INVAL;
        }
        for (size_t i = 0; i < hl; i++) {
            char c = h[1 + i];
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') ||
                  c == ':' || c == '.')) {
                return AGENT_E_INVAL;
            }
        }
        memcpy(u.host, h + 1, hl);
        u.host[hl] = '\0';
        u.ipv6 = true;
        u.kind = HTTP_HOST_LITERAL;
        host_end = rb + 1;
        if (host_end < end) {
            if (*host_end != ':') {
                return AGENT_E_INVAL;
            }
            port_at = host_end + 1;
        }
    } else {
        const char *colon = memchr(h, ':', (size_t)(end - h));
        host_end = colon ? colon : end;
        port_at = colon ? colon + 1 : NULL;
        size_t hl = (size_t)(host_end - h);
        if (hl == 0) {
            return AGENT_E_INVAL;
        }
        if (hl == 9 && strncasecmp(h, "localhost", 9) == 0) {
            u.kind = HTTP_HOST_LOOPBACK;
        } else if (is_ipv4_literal(h, hl)) {
            memcpy(u.host, h, hl);
            u.host[hl] = '\0';
            u.kind = HTTP_HOST_LITERAL;
        } else if (strspn(h, "0123456789.") >= hl) {
            return AGENT_E_INVAL; /* looks like an IPv4 address but is not one: a typo */
        } else {
            /* "+", "*" and host names bind every interface, as dotnet-monitor does. Still refuse
             * bytes no host name can hold, so a typo is not silently widened to 0.0.0.0. */
            for (size_t i = 0; i < hl; i++) {
                char c = h[i];
                if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                      c == '-' || c == '.' || c == '_' || c == '+' || c == '*')) {
                    return AGENT_E_INVAL;
                }
            }
            u.kind = HTTP_HOST_ANY;
        }
    }
    u.port = u.tls ? 443 : 80;
    if (port_at != NULL && parse_port(port_at, (size_t)(end - port_at), &u.port) != 0) {
        return AGENT_E_INVAL;
    }
    *out = u;
    return 0;
}

/* Header names the server writes itself; a handler passing one would corrupt the framing. */
static bool is_managed_header(const char *name)
{
    static const char *const managed[] = {
        "content-length", "transfer-encoding", "connection",   "date",
        "keep-alive",     "upgrade",           "content-type", NULL};
    for (size_t i = 0; managed[i] != NULL; i++) {
        if (strcasecmp(name, managed[i]) == 0) {
            return true;
        }
    }
    return false;
}

int http__head_begin(struct buf *out, int status, const char *date, const char *content_type)
{
    if (status < 100 || status > 599) {
        return AGENT_E_INVAL;
    }
    if (content_type != NULL && !http__is_field_value(content_type, strlen(content_type))) {
        return AGENT_E_INVAL;
    }
    int rc = buf_printf(out, "HTTP/1.1 %d %s\r\nDate: %s\r\n", status, http__reason_phrase(status),
                        date);
    if (rc == 0 && content_type != NULL) {
        rc = buf_printf(out, "Content-Type: %s\r\n", content_type);
    }
    return rc;
}

int http__head_field(struct buf *out, const char *name, const char *value)
{
    if (name == NULL || value == NULL || !http__is_token(name, strlen(name)) ||
        !http__is_field_value(value, strlen(value)) || is_managed_header(name)) {
        return AGENT_E_INVAL;
    }
    return buf_printf(out, "%s: %s\r\n", name, value);
}

int http__head_end(struct buf *out, enum http_framing framing, uint64_t content_length,
                   enum http_conn_header connection)
{
    int rc = 0;
    switch (framing) {
    case HTTP_FRAME_LENGTH:
        rc = buf_printf(out, "Content-Length: %llu\r\n", (unsigned long long)content_length);
        break;
    case HTTP_FRAME_CHUNKED:
        rc = buf_append_str(out, "Transfer-Encoding: chunked\r\n");
        break;
    case HTTP_FRAME_NONE:
        break;
    }
    if (rc == 0 && connection == HTTP_CONN_CLOSE) {
        rc = buf_append_str(out, "Connection: close\r\n");
    } else if (rc == 0 && connection == HTTP_CONN_KEEP_ALIVE) {
        rc = buf_append_str(out, "Connection: keep-alive\r\n");
    }
    return rc ? rc : buf_append_str(out, "\r\n");
}

int http__chunk_prefix(struct buf *out, size_t len)
{
    return buf_printf(out, "%zx\r\n", len);
}
