/* SPDX-License-Identifier: MIT */
#ifndef AGENT_URL_H
#define AGENT_URL_H

/*
 * The one http(s) URL parser: scheme, host and port. What may follow them (a path, a query, a
 * fragment) differs by user (an S3 endpoint has none, an OTLP endpoint keeps its path and query,
 * a credentials URL keeps its path but no fragment), so each caller judges the rest itself. Pure:
 * no libuv, no I/O, no allocation, no globals.
 */

#include <stdbool.h>
#include <stdint.h>

struct url_origin {
    bool https;
    bool ip;        /* host is an IPv4 or IPv6 address */
    char host[256]; /* without brackets */
    uint16_t port;  /* 80 / 443 when not given */
};

/*
 * Reads "http[s]://host[:port]" from the start of url: the scheme in either case; the host a name
 * of letters, digits, '-', '.' and '_', an IPv4 address, or an IPv6 address in brackets; no user
 * part ("user@"). *rest points into url just past the port: "" or from its '/', '?' or '#'.
 * 0, or AGENT_E_INVAL with *why a constant phrase that quotes nothing of url (it may hold a key).
 */
int url_origin_parse(const char *url, struct url_origin *out, const char **rest, const char **why);

#endif
