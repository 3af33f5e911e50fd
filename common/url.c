/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE
#include "url.h"

#include <arpa/inet.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "num.h"

static bool host_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_';
}

/* The authority a[0..n) (no '/', '?' or '#' in it) into out->host and out->port. */
static int authority(const char *a, size_t n, struct url_origin *out, const char **why)
{
    if (memchr(a, '@', n) != NULL) {
        *why = "a user part (user@) is not allowed";
        return AGENT_E_INVAL;
    }
    const char *port = NULL;
    size_t hlen;
    const char *h = a;
    if (n > 0 && a[0] == '[') {
        const char *close = memchr(a, ']', n);
        if (close == NULL) {
            *why = "unclosed '[' in the host";
            return AGENT_E_INVAL;
        }
        h = a + 1;
        hlen = (size_t)(close - h);
        if (close + 1 < a + n) {
            if (close[1] != ':') {
                *why = "junk after the IPv6 address";
                return AGENT_E_INVAL;
            }
            port = close + 2;
        }
    } else {
        const char *colon = memchr(a, ':', n);
        hlen = colon != NULL ? (size_t)(colon - a) : n;
        port = colon != NULL ? colon + 1 : NULL;
    }
    if (hlen == 0 || hlen >= sizeof(out->host)) {
        *why = "no host, or a host name too long";
        return AGENT_E_INVAL;
    }
    memcpy(out->host, h, hlen);
    out->host[hlen] = '\0';
    unsigned char addr[16];
    bool v6 = inet_pton(AF_INET6, out->host, addr) == 1;
    out->ip = v6 || inet_pton(AF_INET, out->host, addr) == 1;
    if (a[0] == '[' && !v6) {
        *why = "not an IPv6 address inside [ ]";
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < hlen && !out->ip; i++) {
        if (!host_char(out->host[i])) {
            *why = "a host name may hold letters, digits, '-', '.' and '_' only";
            return AGENT_E_INVAL;
        }
    }
    out->port = out->https ? 443 : 80;
    if (port != NULL) {
        uint64_t p = 0;
        if (num_parse_u64(port, (size_t)(a + n - port), 10, 65535, &p) != 0 || p == 0) {
            *why = "the port is not a number from 1 to 65535";
            return AGENT_E_INVAL;
        }
        out->port = (uint16_t)p;
    }
    return 0;
}

int url_origin_parse(const char *url, struct url_origin *out, const char **rest, const char **why)
{
    memset(out, 0, sizeof(*out));
    const char *a;
    if (ascii_ieq_n(url, strnlen(url, 8), "https://")) {
        out->https = true;
        a = url + 8;
    } else if (ascii_ieq_n(url, strnlen(url, 7), "http://")) {
        a = url + 7;
    } else {
        *why = "not an http:// or https:// URL";
        return AGENT_E_INVAL;
    }
    size_t n = strcspn(a, "/?#");
    *rest = a + n;
    return authority(a, n, out, why);
}
