/* SPDX-License-Identifier: MIT */
#include "api.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "auth.h"
#include "buf.h"
#include "err.h"
#include "http_cors.h"
#include "http_query.h"
#include "log.h"
#include "mcp.h"
#include "membudget.h"
#include "num.h"
#include "rules.h"

static const char cat[] = "dotmon.api";

typedef void (*api_route_fn)(struct agent *a, struct http_request *req);
typedef void (*api_item_fn)(struct agent *a, struct http_request *req, const char *id);

/*
 * Routes. A path may appear once per method; `item` routes take one more path segment, written
 * "{name}" at the end of their path ("/operations/{operationId}"), that is passed to the handler
 * decoded, followed by `suffix` when the route has one ("/operations/{operationId}/details").
 */
struct api_route {
    const char *path;
    const char *method; /* a GET route also answers HEAD */
    api_route_fn fn;
    api_item_fn item;
    bool anonymous;     /* no authentication (metrics, probes, the /ui page's static files) */
    bool metrics_port;  /* also served on the metrics URLs */
    bool no_head;       /* GET with side effects (starts an artifact): HEAD is not allowed */
    const char *suffix; /* item routes: what follows the item ("/details"), or NULL */
};

static void api_root(struct agent *a, struct http_request *req);
static void api_parameters(struct agent *a, struct http_request *req);
static void api_exceptions(struct agent *a, struct http_request *req);
static void api_mcp(struct agent *a, struct http_request *req);

static const struct api_route routes[] = {
    /* dotnet-monitor answers / with its OpenAPI document, without authentication, on every URL. */
    {"/", "GET", api_root, NULL, true, true, false, NULL},
    {"/processes", "GET", api_processes, NULL, false, false, false, NULL},
    {"/process", "GET", api_process, NULL, false, false, false, NULL},
    {"/env", "GET", api_env, NULL, false, false, false, NULL},
    {"/info", "GET", api_info, NULL, false, false, false, NULL},
    {"/dump", "GET", api_dump_get, NULL, false, false, true, NULL},
    {"/gcdump", "GET", api_gcdump_get, NULL, false, false, true, NULL},
    {"/trace", "GET", api_trace_get, NULL, false, false, true, NULL},
    {"/trace", "POST", api_trace_post, NULL, false, false, false, NULL},
    {"/trace/snapshot", "GET", api_trace_snapshot, NULL, false, false, true, NULL},
    {"/profile", "GET", api_profile_get, NULL, false, false, true, NULL},
    {"/stacks", "GET", api_stacks_get, NULL, false, false, true, NULL},
    {"/exceptions", "GET", api_exceptions, NULL, false, false, true, NULL},
    {"/exceptions", "POST", api_exceptions, NULL, false, false, false, NULL},
    {"/parameters", "POST", api_parameters, NULL, false, false, false, NULL},
    /* The MCP endpoint (agent/mcp/mcp.h): authenticated as every route; GET answers 405. */
    {"/mcp", "POST", api_mcp, NULL, false, false, false, NULL},
    {"/mcp", "GET", api_mcp, NULL, false, false, true, NULL},
    {"/mcp", "DELETE", api_mcp, NULL, false, false, false, NULL},
    {"/livemetrics", "GET", api_livemetrics_get, NULL, false, false, true, NULL},
    {"/livemetrics", "POST", api_livemetrics_post, NULL, false, false, false, NULL},
    {"/logs", "GET", api_logs_get, NULL, false, false, true, NULL},
    {"/logs", "POST", api_logs_post, NULL, false, false, false, NULL},
    {"/operations", "GET", api_operations_list, NULL, false, false, false, NULL},
    {"/operations/{operationId}", "GET", NULL, api_operation_get, false, false, false, NULL},
    {"/operations/{operationId}", "GET", NULL, api_operation_details, false, false, false,
     "/details"},
    {"/operations/{operationId}", "DELETE", NULL, api_operation_delete, false, false, false, NULL},
    {"/collectionrules", "GET", api_collectionrules, NULL, false, false, false, NULL},
    {"/collectionrules/{collectionRuleName}", "GET", NULL, api_collectionrule, false, false, false,
     NULL},
    {"/metrics", "GET", api_metrics, NULL, true, true, false, NULL},
    {"/metrics/dotmon", "GET", api_metrics_dotmon, NULL, false, false, false, NULL},
    {"/healthz", "GET", api_healthz, NULL, true, false, false, NULL},
    {"/readyz", "GET", api_readyz, NULL, true, false, false, NULL},
    /* The page's static files carry no data and a browser navigating to /ui cannot send a
     * token: anonymous. Every request the page makes for data is authorized (api_ui.c). */
    {"/ui", "GET", api_ui_get, NULL, true, false, false, NULL},
    {"/ui/{file}", "GET", NULL, api_ui_file, true, false, false, NULL},
};

/* POST /parameters: dotnet-monitor's answer when the feature is off, with why it always is. */
static void api_parameters(struct agent *a, struct http_request *req)
{
    (void)a;
    api_problem_as_dm(req, 400, API_DM_PARAMETERS_DISABLED,
                      "dotmon does not capture parameters: that needs IL rewriting inside the app "
                      "(dotnet-monitor's in-process features), and dotmon stays outside it");
}

/* GET/POST /exceptions: served when the history is kept (InProcessFeatures:Exceptions:Enabled),
 * else dotnet-monitor's answers for a feature that is off (GET 400, POST 404). */
static void api_exceptions(struct agent *a, struct http_request *req)
{
    bool post = strcmp(http_request_method(req), "POST") == 0;
    if (a->exceptions == NULL) {
        if (post) {
            api_problem(req, 404,
                        "the exceptions history is off: set InProcessFeatures:Exceptions:Enabled "
                        "(dotmon keeps it from the runtime's own events, nothing is loaded into "
                        "the app)");
            return;
        }
        api_problem_as_dm(req, 400, API_DM_EXCEPTIONS_DISABLED,
                          "the exceptions history is off: set InProcessFeatures:Exceptions:Enabled "
                          "(dotmon keeps it from the runtime's own events, nothing is loaded into "
                          "the app)");
        return;
    }
    if (post) {
        api_exceptions_post(a, req);
    } else {
        api_exceptions_get(a, req);
    }
}

/* /mcp: the MCP endpoint when Mcp:Enabled is true, else a 404 that names the setting. */
static void api_mcp(struct agent *a, struct http_request *req)
{
    mcp_handle(a->mcp, req);
}

int api_accept_pick(const char *accept, const char *const *types, size_t n)
{
    if (accept == NULL || accept[strspn(accept, " \t")] == '\0') {
        return 0;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t t = 0; t < n; t++) {
            size_t slash = (size_t)(strchr(types[t], '/') - types[t]);
            for (const char *p = accept; *p != '\0';) {
                p += strspn(p, " \t,");
                size_t len = strcspn(p, ",; \t");
                bool hit = pass == 0
                               ? (len == strlen(types[t]) && strncasecmp(p, types[t], len) == 0)
                               : ((len == 3 && strncmp(p, "*/*", 3) == 0) ||
                                  (len == slash + 2 && strncasecmp(p, types[t], slash) == 0 &&
                                   strncmp(p + slash, "/*", 2) == 0));
                if (hit) {
                    return (int)t;
                }
                p += strcspn(p, ",");
            }
        }
    }
    return -1;
}

/* A problem+json answer: detail, and a "reason" extension member when reason is not NULL. */
static void respond_problem(struct http_request *req, int status, const char *detail,
                            const char *reason)
{
    struct buf body;
    buf_init(&body, 16384);
    int rc = http_problem_json(&body, status, http_status_text(status), detail);
    if (rc == 0 && reason != NULL) {
        /* {…} becomes {…,"reason":"…"} */
        buf_truncate(&body, buf_size(&body) - 1);
        rc = buf_append_str(&body, ",\"reason\":\"");
        rc = rc ? rc : buf_append_json_escaped(&body, reason);
        rc = rc ? rc : buf_append_str(&body, "\"}");
    }
    if (rc != 0) {
        buf_reset(&body);
        buf_append_str(&body, "{\"status\":500}");
    }
    http_respond(req, status, "application/problem+json", NULL, 0, buf_data(&body),
                 buf_size(&body));
    buf_fini(&body);
}

void api_problem(struct http_request *req, int status, const char *fmt, ...)
{
    struct buf detail;
    buf_init(&detail, 4096);
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(&detail, fmt, ap);
    va_end(ap);
    respond_problem(req, rc == 0 ? status : 500, rc == 0 ? buf_cstr(&detail) : "out of memory",
                    NULL);
    buf_fini(&detail);
}

void api_problem_as_dm(struct http_request *req, int status, const char *dm_detail, const char *fmt,
                       ...)
{
    struct buf reason;
    buf_init(&reason, 4096);
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(&reason, fmt, ap);
    va_end(ap);
    respond_problem(req, status, dm_detail, rc == 0 ? buf_cstr(&reason) : NULL);
    buf_fini(&reason);
}

const char *api_budget_detail(char *msg, size_t cap, const char *what, const struct mb_share *share)
{
    const double mib = 1024.0 * 1024.0;
    uint64_t total = membudget_total();
    if (share != NULL && share->cap != 0) {
        snprintf(msg, cap,
                 "%s does not fit in dotmon's memory budget (%s: %.1f MiB of %.1f MiB held; "
                 "total %.1f MiB); raise %s (or the container's memory limit)",
                 what, share->what != NULL ? share->what : "this share",
                 (double)atomic_load(&share->used) / mib, (double)share->cap / mib,
                 (double)total / mib, API_BUDGET_SETTING);
    } else {
        snprintf(msg, cap,
                 "%s does not fit in dotmon's memory budget (%.1f MiB of %.1f MiB held); raise "
                 "%s (or the container's memory limit)",
                 what, (double)membudget_used() / mib, (double)total / mib, API_BUDGET_SETTING);
    }
    return msg;
}

void api_send_budget_507(struct http_request *req, const char *what, const struct mb_share *share)
{
    char msg[512];
    api_budget_detail(msg, sizeof(msg), what, share);
    log_warn(cat, "507: %s", msg);
    struct buf body;
    buf_init(&body, 4096);
    int rc = http_problem_json(&body, 507, http_status_text(507), msg);
    if (rc == 0) {
        /* {…} becomes {…,"code":"…","setting":"Memory:LimitMB"} */
        buf_truncate(&body, buf_size(&body) - 1);
        rc = buf_append_str(&body, ",\"code\":\"" API_BUDGET_CODE
                                   "\",\"setting\":\"" API_BUDGET_SETTING "\"}");
    }
    if (rc != 0) {
        buf_reset(&body);
        buf_append_str(&body, "{\"status\":507}");
    }
    http_respond(req, 507, "application/problem+json", NULL, 0, buf_data(&body), buf_size(&body));
    buf_fini(&body);
}

int api_query_bool(struct http_request *req, const char *name, bool *out)
{
    struct buf v;
    buf_init(&v, 64);
    int h = http_query_get(http_request_query(req), name, &v);
    int rc = 0;
    if (h == 1 && strcasecmp(buf_cstr(&v), "true") == 0) {
        *out = true;
    } else if (h == 1 && strcasecmp(buf_cstr(&v), "false") == 0) {
        *out = false;
    } else if (h != 0) {
        api_problem(req, 400, "%s must be true or false", name);
        rc = AGENT_E_INVAL;
    }
    buf_fini(&v);
    return rc;
}

int api_query_int(struct http_request *req, const char *name, long lo, long hi, long def, long *out)
{
    struct buf v;
    buf_init(&v, 64);
    int has = http_query_get(http_request_query(req), name, &v);
    int rc = 0;
    *out = def;
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
        rc = AGENT_E_INVAL;
    } else if (has == 1) {
        const char *s = buf_cstr(&v);
        char *end = NULL;
        errno = 0;
        long n = strtol(s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0 || n < lo || n > hi) {
            api_problem(req, 400, "%s must be an integer from %ld to %ld, not '%s'", name, lo, hi,
                        s);
            rc = AGENT_E_INVAL;
        } else {
            *out = n;
        }
    }
    buf_fini(&v);
    return rc;
}

void api_json(struct http_request *req, int status, cJSON *json)
{
    char *text = json ? cJSON_PrintUnformatted(json) : NULL;
    cJSON_Delete(json);
    if (text == NULL) {
        api_problem(req, 500, "out of memory while formatting the response");
        return;
    }
    http_respond(req, status, "application/json; charset=utf-8", NULL, 0, text, strlen(text));
    free(text);
}

/* Returns true when the request may proceed; otherwise it has been answered. */
static bool authorize(struct agent *a, struct http_request *req)
{
    if (a->no_auth || http_request_is_local(req)) { /* local: MCP authorized its caller */
        return true;
    }
    if (http_request_header_count(req, "Authorization") > 1) {
        /* Which one would count? Proxies and servers disagree (first, last, joined): refuse. */
        log_info(cat, "request %llu refused (400): more than one Authorization header",
                 (unsigned long long)http_request_id(req));
        api_problem(req, 400,
                    "the request has more than one Authorization header; send exactly "
                    "one: Authorization: Bearer <token>");
        return false;
    }
    static const struct http_header challenge[] = {{"WWW-Authenticate", "Bearer"}};
    if (a->verifier == NULL) {
        struct buf body;
        buf_init(&body, 4096);
        http_problem_json(&body, 401, "Unauthorized",
                          "no API key is configured on this dotmon: configure "
                          "Authentication:MonitorApiKey or start it with --temp-apikey");
        http_respond(req, 401, "application/problem+json", challenge, 1, buf_data(&body),
                     buf_size(&body));
        buf_fini(&body);
        return false;
    }
    const char *reason = NULL;
    enum auth_result r = auth_verify_cached(a->verifier, http_request_header(req, "Authorization"),
                                            (int64_t)time(NULL), &reason);
    if (r == AUTH_OK) {
        return true;
    }
    int status = r == AUTH_FORBIDDEN ? 403 : 401;
    /* Log before answering: http_respond finishes (frees) the request. */
    log_info(cat, "request %llu refused (%d): %s", (unsigned long long)http_request_id(req), status,
             reason ? reason : "");
    struct buf body;
    buf_init(&body, 4096);
    http_problem_json(&body, status, http_status_text(status), reason ? reason : "not authorized");
    if (status == 401) {
        http_respond(req, 401, "application/problem+json", challenge, 1, buf_data(&body),
                     buf_size(&body));
    } else {
        http_respond(req, 403, "application/problem+json", NULL, 0, buf_data(&body),
                     buf_size(&body));
    }
    buf_fini(&body);
    return false;
}

/*
 * Whether route r serves path p: plain routes by equality (case-insensitive, as ASP.NET), item
 * routes by prefix + one segment (+ suffix), the segment copied into item.
 */
static bool route_matches(const struct api_route *r, const char *p, char *item, size_t item_cap)
{
    if (r->item == NULL) {
        return strcasecmp(p, r->path) == 0;
    }
    size_t n = strcspn(r->path, "{"); /* the prefix before "{name}" */
    if (strncasecmp(p, r->path, n) != 0 || p[n] == '\0') {
        return false;
    }
    const char *rest = p + n;
    size_t rest_len = strlen(rest);
    size_t sn = r->suffix != NULL ? strlen(r->suffix) : 0;
    if (sn > 0) {
        if (rest_len <= sn || strcasecmp(rest + rest_len - sn, r->suffix) != 0) {
            return false;
        }
        rest_len -= sn;
    }
    if (memchr(rest, '/', rest_len) != NULL || rest_len >= item_cap) {
        return false;
    }
    memcpy(item, rest, rest_len);
    item[rest_len] = '\0';
    return true;
}

/*
 * The route for this path and method, its item in item; NULL when none, with the methods the
 * path does have in allowed ("" when the path has no route at all).
 */
static const struct api_route *find_route(const char *p, const char *method, bool on_metrics,
                                          char *item, size_t item_cap, char *allowed,
                                          size_t allowed_cap)
{
    const struct api_route *route = NULL;
    allowed[0] = '\0';
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct api_route *r = &routes[i];
        char seg[128] = ""; /* stays empty for a route without an item */
        if ((on_metrics && !r->metrics_port) || !route_matches(r, p, seg, sizeof(seg))) {
            continue;
        }
        size_t used = strlen(allowed);
        bool head_ok = strcmp(r->method, "GET") == 0 && !r->no_head;
        snprintf(allowed + used, allowed_cap - used, "%s%s%s", used ? ", " : "", r->method,
                 head_ok ? ", HEAD" : "");
        if (strcmp(method, r->method) == 0 || (head_ok && strcmp(method, "HEAD") == 0)) {
            route = r;
            snprintf(item, item_cap, "%s", seg);
        }
    }
    return route;
}

/*
 * GET / : a description of the routes this URL serves, shaped as an OpenAPI 3 document (what
 * dotnet-monitor serves there), built from the route table: each path and method, and which ones
 * need the bearer token. What each route does is in docs/routes.md.
 */
static void api_root(struct agent *a, struct http_request *req)
{
    bool on_metrics = http_request_tag(req) == AGENT_TAG_METRICS;
    cJSON *doc = cJSON_CreateObject();
    cJSON_AddStringToObject(doc, "openapi", "3.0.4");
    cJSON *info = cJSON_AddObjectToObject(doc, "info");
    cJSON *paths = cJSON_AddObjectToObject(doc, "paths");
    cJSON *schemes =
        cJSON_AddObjectToObject(cJSON_AddObjectToObject(doc, "components"), "securitySchemes");
    cJSON *bearer = cJSON_AddObjectToObject(schemes, "Bearer");
    cJSON_AddStringToObject(info, "title", "dotmon");
    cJSON_AddStringToObject(info, "version", DOTMON_VERSION);
    cJSON_AddStringToObject(bearer, "type", "http");
    cJSON_AddStringToObject(bearer, "scheme", "bearer");
    cJSON_AddStringToObject(bearer, "bearerFormat", "JWT");
    for (size_t i = 0; paths != NULL && i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct api_route *r = &routes[i];
        if (on_metrics && !r->metrics_port) {
            continue;
        }
        char key[128], method[16];
        snprintf(key, sizeof(key), "%s%s", r->path, r->suffix != NULL ? r->suffix : "");
        size_t m = 0;
        for (; r->method[m] != '\0' && m + 1 < sizeof(method); m++) {
            method[m] = (char)tolower((unsigned char)r->method[m]);
        }
        method[m] = '\0';
        cJSON *item = cJSON_GetObjectItemCaseSensitive(paths, key);
        item = item != NULL ? item : cJSON_AddObjectToObject(paths, key);
        cJSON *op = cJSON_AddObjectToObject(item, method);
        cJSON *resp = cJSON_AddObjectToObject(cJSON_AddObjectToObject(op, "responses"), "default");
        cJSON_AddStringToObject(resp, "description", "see docs/routes.md");
        if (!r->anonymous && !a->no_auth) {
            cJSON *req_scheme = cJSON_CreateObject();
            cJSON_AddItemToObject(req_scheme, "Bearer", cJSON_CreateArray());
            if (!cJSON_AddItemToArray(cJSON_AddArrayToObject(op, "security"), req_scheme)) {
                cJSON_Delete(req_scheme);
            }
        }
    }
    if (paths == NULL || bearer == NULL) { /* no memory: 500 rather than half a document */
        cJSON_Delete(doc);
        doc = NULL;
    }
    api_json(req, 200, doc);
}

static void answer_405(struct http_request *req, const char *p, const char *method,
                       const char *allowed)
{
    struct buf body;
    buf_init(&body, 4096);
    char detail[160];
    snprintf(detail, sizeof(detail), "%s does not support %s; allowed: %s", p, method, allowed);
    http_problem_json(&body, 405, "Method Not Allowed", detail);
    const struct http_header allow[] = {{"Allow", allowed}};
    http_respond(req, 405, "application/problem+json", allow, 1, buf_data(&body), buf_size(&body));
    buf_fini(&body);
}

/*
 * CORS (CorsConfiguration:AllowedOrigins; http_cors.h, docs/security.md "CORS"). A preflight is
 * answered 204 here, before routing and authentication: it carries no credentials and reaches no
 * route, and the answer holds no data (the allow headers only for an allowed origin). Returns true
 * when it answered; otherwise *cors holds the headers (if any) for the request's own answer.
 */
static bool cors_preflight(struct agent *a, struct http_request *req, struct buf *scratch,
                           struct http_cors_headers *cors)
{
    cors->n = 0;
    const char *origin = http_request_header(req, "Origin");
    if (origin == NULL) {
        return false; /* the usual case: not a cross-origin request, no setting looked up */
    }
    enum http_cors_verdict v = http_cors_evaluate(
        config_get(a->cfg, "CorsConfiguration:AllowedOrigins"), http_request_method(req), origin,
        http_request_header(req, "Access-Control-Request-Method"),
        http_request_header(req, "Access-Control-Request-Headers"), scratch, cors);
    if (v != HTTP_CORS_PREFLIGHT) {
        return false;
    }
    struct http_header h[4];
    for (size_t i = 0; i < cors->n; i++) {
        h[i] = (struct http_header){cors->name[i], cors->value[i]};
    }
    http_respond(req, 204, NULL, h, cors->n, NULL, 0);
    return true;
}

/* The CORS headers go on this request's answer (after authentication let it through: a refused
 * request gets none, as dotnet-monitor's CORS middleware runs after its authorization). */
static void cors_add(struct http_request *req, const struct http_cors_headers *cors)
{
    for (size_t i = 0; i < cors->n; i++) {
        if (http_request_add_header(req, cors->name[i], cors->value[i]) != 0) {
            log_warn(cat, "request %llu: CORS header %s not added",
                     (unsigned long long)http_request_id(req), cors->name[i]);
        }
    }
}

static void api_dispatch(struct agent *a, struct http_request *req, const char *method,
                         bool on_metrics, const struct http_cors_headers *cors)
{
    struct buf path;
    buf_init(&path, 8192);
    if (http_path_decode(http_request_path(req), &path) != 0) {
        buf_fini(&path);
        api_problem(req, 400, "the request path is not valid percent-encoding");
        return;
    }
    const char *p = buf_cstr(&path);
    /* ASP.NET routing ignores one trailing slash; so do we. */
    size_t plen = strlen(p);
    if (plen > 1 && p[plen - 1] == '/') {
        path.len--;
        p = buf_cstr(&path);
    }
    char item[128] = "";
    char allowed[64];
    const struct api_route *route =
        find_route(p, method, on_metrics, item, sizeof(item), allowed, sizeof(allowed));
    if (route == NULL) {
        cors_add(req, cors);
        if (allowed[0] == '\0') {
            api_problem(req, 404, "no route %s", p);
        } else {
            answer_405(req, p, method, allowed);
        }
    } else if (route->anonymous || authorize(a, req)) {
        cors_add(req, cors);
        if (route->item != NULL) {
            route->item(a, req, item);
        } else {
            route->fn(a, req);
        }
    }
    buf_fini(&path);
}

void api_handle(void *ud, struct http_request *req)
{
    struct agent *a = ud;
    a->requests_total++;
    const char *method = http_request_method(req);
    bool on_metrics = http_request_tag(req) == AGENT_TAG_METRICS;
    struct buf scratch;
    buf_init(&scratch, 8192);
    struct http_cors_headers cors;
    bool answered = cors_preflight(a, req, &scratch, &cors);
    if (!answered) {
        api_dispatch(a, req, method, on_metrics, &cors);
    }
    buf_fini(&scratch);
}

/* ---- process selection ---- */

/* DefaultProcess:Filters against p (rules.h's matcher, as the collection rules' Filters). */
static bool matches_filters(struct agent *a, const struct ipc_process *p)
{
    const struct rules_process rp = agent_rules_process(p);
    return rules_filter_list_match(a->filters, a->nfilters, &rp);
}

/* The default process, or NULL when there is none (no match, or more than one). */
static const struct ipc_process *default_process(struct agent *a, size_t *nmatch)
{
    const struct ipc_process *found = NULL;
    size_t count = 0;
    size_t n = a->disc ? ipc_discovery_count(a->disc) : 0;
    for (size_t i = 0; i < n; i++) {
        const struct ipc_process *p = ipc_discovery_at(a->disc, i);
        if (matches_filters(a, p)) {
            found = p;
            count++;
        }
    }
    if (nmatch != NULL) {
        *nmatch = count;
    }
    return count == 1 ? found : NULL;
}

bool api_is_default(struct agent *a, const struct ipc_process *p)
{
    return default_process(a, NULL) == p;
}

/* Parses a decimal pid: digits only, no sign, fits in 32 bits as .NET's int. */
static int parse_pid(const char *s, uint64_t *out)
{
    return num_parse_u64_str(s, 10, 2147483647u, out);
}

/* Normalizes a GUID (with or without braces, any case) to lowercase 8-4-4-4-12. */
static int parse_uid(const char *s, char out[37])
{
    size_t n = strlen(s);
    if (n == 38 && s[0] == '{' && s[37] == '}') {
        s++;
        n = 36;
    }
    if (n != 36) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < 36; i++) {
        char c = s[i];
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (c != '-') {
                return AGENT_E_INVAL;
            }
        } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
            return AGENT_E_INVAL;
        }
        out[i] = (char)tolower((unsigned char)c);
    }
    out[36] = '\0';
    return 0;
}

/* container= names a process's container by name, or by id (whole, or its first 12 or more
 * digits, as runtimes print it). */
static bool container_matches(const struct ipc_identity *id, const char *want)
{
    size_t n = strlen(want);
    if (id->container_name[0] != '\0' && strcmp(id->container_name, want) == 0) {
        return true;
    }
    return id->container_id[0] != '\0' && n >= 12 && n <= 64 &&
           strncasecmp(id->container_id, want, n) == 0;
}

/* The process selector's query parameters: dotnet-monitor's pid, uid, name and dotmon's pod,
 * namespace, container (issue 34). */
enum { SEL_PID, SEL_UID, SEL_NAME, SEL_POD, SEL_NAMESPACE, SEL_CONTAINER, SEL_N };
static const char *const sel_names[SEL_N] = {"pid", "uid", "name", "pod", "namespace", "container"};

static bool selected(const struct ipc_process *p, const int *has, struct buf *v, uint64_t pid,
                     const char *uid)
{
    const struct ipc_identity *id = &p->identity;
    return !(
        (has[SEL_PID] == 1 && p->pid != pid) || (has[SEL_UID] == 1 && strcmp(p->uid, uid) != 0) ||
        (has[SEL_NAME] == 1 &&
         (p->name == NULL || strcasecmp(p->name, buf_cstr(&v[SEL_NAME])) != 0)) ||
        (has[SEL_POD] == 1 && strcmp(id->pod_name, buf_cstr(&v[SEL_POD])) != 0) ||
        (has[SEL_NAMESPACE] == 1 && strcmp(id->pod_namespace, buf_cstr(&v[SEL_NAMESPACE])) != 0) ||
        (has[SEL_CONTAINER] == 1 && !container_matches(id, buf_cstr(&v[SEL_CONTAINER]))));
}

const struct ipc_process *api_select_process(struct agent *a, struct http_request *req)
{
    const char *query = http_request_query(req);
    struct buf v[SEL_N];
    int has[SEL_N];
    const struct ipc_process *result = NULL;
    bool any = false;
    bool bad = false;
    for (size_t k = 0; k < SEL_N; k++) {
        buf_init(&v[k], k == SEL_PID || k == SEL_UID ? 256 : 1024);
        has[k] = http_query_get(query, sel_names[k], &v[k]);
        bad = bad || has[k] < 0;
        any = any || has[k] == 1;
    }
    if (bad) {
        api_problem(req, 400,
                    "malformed query string (bad percent-encoding or a repeated parameter)");
        goto out;
    }
    uint64_t pid = 0;
    char uid[37] = "";
    if (has[SEL_PID] == 1 && parse_pid(buf_cstr(&v[SEL_PID]), &pid) != 0) {
        api_problem(req, 400, "pid must be a non-negative 32-bit integer, not '%s'",
                    buf_cstr(&v[SEL_PID]));
        goto out;
    }
    if (has[SEL_UID] == 1 && parse_uid(buf_cstr(&v[SEL_UID]), uid) != 0) {
        api_problem(req, 400, "uid must be a GUID (runtime instance cookie), not '%s'",
                    buf_cstr(&v[SEL_UID]));
        goto out;
    }
    for (size_t k = SEL_NAME; k < SEL_N; k++) {
        if (has[k] == 1 && buf_size(&v[k]) == 0) {
            api_problem(req, 400, "%s must not be empty", sel_names[k]);
            goto out;
        }
    }

    if (!any) {
        size_t nmatch = 0;
        result = default_process(a, &nmatch);
        if (result == NULL && nmatch == 0) {
            api_problem_as_dm(req, 400, API_DM_NO_PROCESS, "%s",
                              a->nfilters ? "no process matches the DefaultProcess filters"
                                          : "no .NET process found; specify pid, uid or name");
        } else if (result == NULL) {
            api_problem_as_dm(req, 400, API_DM_MANY_PROCESSES,
                              "%zu processes could be the default process; specify pid, uid or "
                              "name (see /processes)",
                              nmatch);
        }
        goto out;
    }

    size_t count = 0;
    size_t n = ipc_discovery_count(a->disc);
    for (size_t i = 0; i < n; i++) {
        const struct ipc_process *p = ipc_discovery_at(a->disc, i);
        if (selected(p, has, v, pid, uid) && count++ == 0) {
            result = p;
        }
    }
    if (count == 0) {
        char what[512] = "";
        size_t w = 0;
        for (size_t k = 0; k < SEL_N && w < sizeof(what); k++) {
            if (has[k] == 1) {
                int r = snprintf(what + w, sizeof(what) - w, " %s=%s", sel_names[k],
                                 k == SEL_UID ? uid : buf_cstr(&v[k]));
                w += r > 0 ? (size_t)r : 0;
            }
        }
        api_problem_as_dm(req, 400, API_DM_NO_PROCESS, "no .NET process matches%s", what);
    } else if (count > 1) {
        result = NULL;
        /* Only uid is unique: pid repeats across pid namespaces (every container's app is 1). */
        api_problem_as_dm(req, 400, API_DM_MANY_PROCESSES,
                          "%zu processes match; select one with uid (see /processes)%s", count,
                          has[SEL_PID] == 1 ? ": several runtimes call themselves this pid" : "");
    }
out:
    for (size_t k = 0; k < SEL_N; k++) {
        buf_fini(&v[k]);
    }
    return result;
}

int api_parse_duration(struct http_request *req, int64_t *out)
{
    struct buf v;
    buf_init(&v, 64);
    int rc = http_query_get(http_request_query(req), "durationSeconds", &v);
    *out = 30;
    if (rc == 1) {
        const char *s = buf_cstr(&v);
        char *end = NULL;
        errno = 0;
        long long d = strtoll(s, &end, 10);
        if (*s == '\0' || *end != '\0' || errno != 0 || d < -1 || d > 2147483647LL) {
            api_problem(req, 400,
                        "durationSeconds must be an integer from -1 (until stopped) to "
                        "2147483647, not '%s'",
                        s);
            rc = AGENT_E_INVAL;
        } else {
            *out = d;
            rc = 0;
        }
    } else if (rc < 0) {
        api_problem(req, 400, "malformed query string");
    } else {
        rc = 0;
    }
    buf_fini(&v);
    return rc;
}

int api_session_refused(int status, uint32_t hresult, const char *noun, char *msg, size_t cap,
                        const char **code)
{
    if (status == AGENT_E_RUNTIME) {
        snprintf(msg, cap, "the runtime refused the %s session: %s (0x%08x)", noun,
                 ipc_hresult_text(hresult), hresult);
        *code = "RuntimeError";
        return 400;
    }
    if (status == AGENT_E_TIMEOUT) {
        snprintf(msg, cap, "the runtime did not answer CollectTracing in time");
        *code = "Timeout";
        return 504;
    }
    snprintf(msg, cap, "cannot start a %s session: %s", noun, agent_strerror(status));
    *code = "RuntimeUnreachable";
    return 502;
}
