/* SPDX-License-Identifier: MIT */
/*
 * GET /ui and /ui/{file}: the browser page (agent/ui, compiled into the binary; docs/ui.md). It
 * lists the processes, profiles one with a click and draws the flame graph, charts its live
 * metrics and downloads its trace, dump and gcdump, all through the REST routes.
 *
 * These two routes are served without authentication, on purpose: the files are the same static
 * shell for everyone and carry no data about the host or its processes, and a browser cannot
 * send an Authorization header when it navigates to a URL, so requiring one would make the page
 * unreachable. Every data request the page makes (fetch to /processes, /profile, /livemetrics,
 * /trace, /dump, /gcdump) carries the token pasted into it and is authorized as usual. The token
 * lives in one JavaScript variable only: never in storage, a cookie or a URL.
 *
 * The strict Content-Security-Policy below allows scripts, styles and requests to this origin
 * only and no inline code, so even a method name crafted to look like markup could not run
 * anything (the page also inserts every name as text, never as HTML).
 */
#include "api.h"

#include <string.h>

#include "ui_assets.h"

#define UI_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "                \
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

static const struct http_header ui_headers[] = {
    {"Content-Security-Policy", UI_CSP}, {"X-Content-Type-Options", "nosniff"},
    {"Referrer-Policy", "no-referrer"},  {"Cache-Control", "no-store"},
    {"X-Frame-Options", "DENY"},
};

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');
    if (dot != NULL && strcmp(dot, ".html") == 0) {
        return "text/html; charset=utf-8";
    }
    if (dot != NULL && strcmp(dot, ".js") == 0) {
        return "text/javascript; charset=utf-8";
    }
    if (dot != NULL && strcmp(dot, ".css") == 0) {
        return "text/css; charset=utf-8";
    }
    return "application/octet-stream";
}

/* Answers the embedded file called name, or 404. */
static void serve(struct http_request *req, const char *name)
{
    for (const struct ui_asset *f = ui_assets; f->name != NULL; f++) {
        if (strcmp(f->name, name) == 0) {
            http_respond(req, 200, content_type(name), ui_headers,
                         sizeof(ui_headers) / sizeof(ui_headers[0]), f->data, f->len);
            return;
        }
    }
    api_problem(req, 404, "no file /ui/%s", name);
}

void api_ui_get(struct agent *a, struct http_request *req)
{
    (void)a;
    serve(req, "index.html");
}

void api_ui_file(struct agent *a, struct http_request *req, const char *name)
{
    (void)a;
    serve(req, name);
}
