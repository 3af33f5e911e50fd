/* SPDX-License-Identifier: MIT */
/*
 * MCP's wire pieces (mcp_rpc.h; docs/mcp.md, "Transport"): JSON-RPC 2.0 as the Streamable HTTP
 * transport carries it.
 *
 * The parser is strict where a lenient one would hand trouble to later code: the body must be
 * UTF-8 as a whole (RFC 8259 §8.1) before cJSON sees it, because cJSON copies bytes as they come
 * and dotmon echoes ids and passes arguments on into REST targets; ids are kept as values of
 * their own (a string or a whole number) so that they can be compared and echoed without the
 * tree they came from.
 */
#include "mcp_rpc.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "hex.h"
#include "utf8.h"

/* ---- ids ---- */

int mcp_id_read(const cJSON *v, struct mcp_id *out)
{
    if (cJSON_IsString(v) && v->valuestring != NULL) {
        size_t n = strlen(v->valuestring);
        if (n > MCP_RPC_ID_MAX) {
            return AGENT_E_PROTO;
        }
        out->kind = MCP_ID_STR;
        out->num = 0;
        memcpy(out->str, v->valuestring, n + 1);
        return 0;
    }
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        /* JSON-RPC discourages fractions; a whole number beyond 2^53 is not one a JSON number
         * holds exactly, so it could not be echoed as it was sent. */
        if (!isfinite(d) || d != floor(d) || fabs(d) > (double)MCP_RPC_INT_MAX) {
            return AGENT_E_PROTO;
        }
        out->kind = MCP_ID_INT;
        out->num = (int64_t)d;
        out->str[0] = '\0';
        return 0;
    }
    return AGENT_E_PROTO;
}

bool mcp_id_equal(const struct mcp_id *a, const struct mcp_id *b)
{
    if (a->kind != b->kind) {
        return false;
    }
    switch (a->kind) {
    case MCP_ID_INT:
        return a->num == b->num;
    case MCP_ID_STR:
        return strcmp(a->str, b->str) == 0;
    default:
        return true;
    }
}

cJSON *mcp_id_json(const struct mcp_id *id)
{
    switch (id != NULL ? id->kind : MCP_ID_NONE) {
    case MCP_ID_INT:
        if (id->num >= INT32_MIN && id->num <= INT32_MAX) {
            return cJSON_CreateNumber((double)id->num);
        }
        /* cJSON prints a large double with 15 significant digits when that reads back within
         * its tolerance (9007199254740991 as 9.00719925474099e+15): write the digits ourselves. */
        char digits[24];
        snprintf(digits, sizeof(digits), "%lld", (long long)id->num);
        return cJSON_CreateRaw(digits);
    case MCP_ID_STR:
        return cJSON_CreateString(id->str);
    default:
        return cJSON_CreateNull();
    }
}

/* ---- parsing ---- */

static bool valid_utf8(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l;
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        if (!utf8_decode(p + i, n - i, &cp, &l)) {
            return false;
        }
        i += l;
    }
    return true;
}

static int refuse(struct mcp_rpc_err *err, int code, const char *message)
{
    err->code = code;
    err->message = message;
    return AGENT_E_PROTO;
}

/* A response: exactly one of result and error, no method; the id may be null only in an error
 * (JSON-RPC 2.0 §5: the server could not tell the id). */
static int read_response(const cJSON *doc, const cJSON *id, struct mcp_msg *out,
                         struct mcp_rpc_err *err)
{
    const cJSON *result = cJSON_GetObjectItemCaseSensitive(doc, "result");
    const cJSON *error = cJSON_GetObjectItemCaseSensitive(doc, "error");
    if ((result == NULL) == (error == NULL)) {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: a message needs a method, or one of result and error");
    }
    if (error != NULL && !cJSON_IsObject(error)) {
        return refuse(err, MCP_RPC_INVALID_REQUEST, "Invalid Request: error is not an object");
    }
    if (cJSON_IsNull(id) && error != NULL) {
        out->id.kind = MCP_ID_NONE;
    } else if (id == NULL || mcp_id_read(id, &out->id) != 0) {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: a response's id must be a string or an integer");
    }
    out->kind = MCP_MSG_RESPONSE;
    return 0;
}

/* The checks of one message object; out->doc is set by the caller. */
static int read_message(const cJSON *doc, struct mcp_msg *out, struct mcp_rpc_err *err)
{
    if (cJSON_IsArray(doc)) {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: batches are not supported (MCP 2025-06-18 and later); "
                      "send one message per request");
    }
    if (!cJSON_IsObject(doc)) {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: a JSON-RPC message is a JSON object");
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(doc, "id");
    /* The id first: an invalid request whose id could be read is answered with that id. */
    if (id != NULL && !cJSON_IsNull(id) && mcp_id_read(id, &err->id) != 0) {
        err->id.kind = MCP_ID_NONE;
    }
    const cJSON *version = cJSON_GetObjectItemCaseSensitive(doc, "jsonrpc");
    if (!cJSON_IsString(version) || strcmp(version->valuestring, "2.0") != 0) {
        return refuse(err, MCP_RPC_INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"");
    }
    const cJSON *method = cJSON_GetObjectItemCaseSensitive(doc, "method");
    if (method == NULL) {
        return read_response(doc, id, out, err);
    }
    if (!cJSON_IsString(method) || method->valuestring[0] == '\0' ||
        strlen(method->valuestring) > MCP_RPC_METHOD_MAX) {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: method must be a non-empty string of at most 128 bytes");
    }
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(doc, "params");
    if (params != NULL && !cJSON_IsObject(params)) {
        return refuse(err, MCP_RPC_INVALID_REQUEST, "Invalid Request: params must be an object");
    }
    if (id == NULL) {
        out->kind = MCP_MSG_NOTIFICATION;
        out->id.kind = MCP_ID_NONE;
    } else if (mcp_id_read(id, &out->id) == 0) {
        out->kind = MCP_MSG_REQUEST;
    } else {
        return refuse(err, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: id must be a string (at most 256 bytes) or an integer, "
                      "never null");
    }
    out->method = method->valuestring;
    out->params = params;
    return 0;
}

int mcp_msg_parse(const void *text, size_t len, struct mcp_msg *out, struct mcp_rpc_err *err)
{
    memset(err, 0, sizeof(*err));
    if (len > MCP_RPC_MESSAGE_MAX) {
        return refuse(err, MCP_RPC_INVALID_REQUEST, "Invalid Request: the message is too large");
    }
    if (text == NULL || len == 0 || !valid_utf8(text, len)) {
        return refuse(err, MCP_RPC_PARSE_ERROR, "Parse error: the body is not JSON in UTF-8");
    }
    const char *end = NULL;
    cJSON *doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (doc == NULL) {
        return refuse(err, MCP_RPC_PARSE_ERROR, "Parse error: the body is not JSON");
    }
    const char *stop = (const char *)text + len;
    while (end != NULL && end < stop &&
           (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) {
        end++;
    }
    if (end != stop) {
        cJSON_Delete(doc);
        return refuse(err, MCP_RPC_PARSE_ERROR,
                      "Parse error: more than one JSON value in the body");
    }
    struct mcp_msg m;
    memset(&m, 0, sizeof(m));
    int rc = read_message(doc, &m, err);
    if (rc != 0) {
        cJSON_Delete(doc);
        return rc;
    }
    m.doc = doc;
    *out = m;
    return 0;
}

void mcp_msg_fini(struct mcp_msg *m)
{
    if (m == NULL) {
        return;
    }
    cJSON_Delete(m->doc);
    memset(m, 0, sizeof(*m));
}

/* ---- builders ---- */

/* Adds item to o under name; on failure item is deleted. */
static bool add(cJSON *o, const char *name, cJSON *item)
{
    if (item == NULL) {
        return false;
    }
    if (!cJSON_AddItemToObject(o, name, item)) {
        cJSON_Delete(item);
        return false;
    }
    return true;
}

static cJSON *envelope(const struct mcp_id *id, bool with_id)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL || !add(o, "jsonrpc", cJSON_CreateString("2.0")) ||
        (with_id && !add(o, "id", mcp_id_json(id)))) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *mcp_rpc_result(const struct mcp_id *id, cJSON *result)
{
    cJSON *o = result != NULL ? envelope(id, true) : NULL;
    if (o == NULL || !add(o, "result", result)) {
        cJSON_Delete(o);
        if (o == NULL) {
            cJSON_Delete(result);
        }
        return NULL;
    }
    return o;
}

cJSON *mcp_rpc_error(const struct mcp_id *id, int code, const char *message)
{
    cJSON *o = envelope(id, true);
    cJSON *e = cJSON_CreateObject();
    if (o == NULL || e == NULL || !add(e, "code", cJSON_CreateNumber(code)) ||
        !add(e, "message", cJSON_CreateString(message != NULL ? message : ""))) {
        goto fail;
    }
    if (!add(o, "error", e)) {
        e = NULL; /* add() deleted it */
        goto fail;
    }
    return o;
fail:
    cJSON_Delete(e);
    cJSON_Delete(o);
    return NULL;
}

cJSON *mcp_rpc_notification(const char *method, cJSON *params)
{
    cJSON *o = envelope(NULL, false);
    if (o == NULL || !add(o, "method", cJSON_CreateString(method)) ||
        (params != NULL && !add(o, "params", params))) {
        cJSON_Delete(o);
        if (o == NULL) {
            cJSON_Delete(params);
        }
        return NULL;
    }
    return o;
}

cJSON *mcp_tool_result(const char *text, cJSON *structured, bool is_error)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *content = cJSON_CreateArray();
    cJSON *item = cJSON_CreateObject();
    if (o == NULL || content == NULL || item == NULL ||
        !add(item, "type", cJSON_CreateString("text")) ||
        !add(item, "text", cJSON_CreateString(text != NULL ? text : "")) ||
        !cJSON_AddItemToArray(content, item)) {
        goto fail;
    }
    item = NULL; /* content's */
    bool ok = add(o, "content", content);
    content = NULL; /* o's, or deleted by add() */
    if (ok && structured != NULL) {
        ok = add(o, "structuredContent", structured);
    }
    structured = NULL; /* the same */
    if (!ok || (is_error && !add(o, "isError", cJSON_CreateTrue()))) {
        goto fail;
    }
    return o;
fail:
    cJSON_Delete(item);
    cJSON_Delete(content);
    cJSON_Delete(structured);
    cJSON_Delete(o);
    return NULL;
}

cJSON *mcp_progress_params(const struct mcp_id *token, double progress, double total,
                           const char *message)
{
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL && add(o, "progressToken", mcp_id_json(token)) &&
              add(o, "progress", cJSON_CreateNumber(progress));
    if (ok && total >= 0) {
        ok = add(o, "total", cJSON_CreateNumber(total));
    }
    if (ok && message != NULL) {
        ok = add(o, "message", cJSON_CreateString(message));
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

int mcp_json_append(struct buf *out, const cJSON *v)
{
    char *text = cJSON_PrintUnformatted(v);
    if (text == NULL) {
        return -ENOMEM;
    }
    int rc = buf_append(out, text, strlen(text));
    free(text);
    return rc;
}

/* ---- Server-Sent Events ---- */

int mcp_sse_event(struct buf *out, const char *event_id, const char *data, size_t len)
{
    if (event_id != NULL && event_id[strcspn(event_id, "\r\n")] != '\0') {
        return AGENT_E_INVAL;
    }
    size_t was = buf_size(out);
    int rc = buf_append_str(out, "event: message\n");
    if (rc == 0 && event_id != NULL) {
        rc = buf_printf(out, "id: %s\n", event_id);
    }
    /* Each line of data on a "data:" line of its own: the reader joins them with LF again, and
     * a line break inside data cannot end the event (an empty line would). JSON printed by cJSON
     * has none; this holds for any text. */
    size_t i = 0;
    do {
        size_t n = 0;
        while (i + n < len && data[i + n] != '\r' && data[i + n] != '\n') {
            n++;
        }
        rc = rc ? rc : buf_append_str(out, "data: ");
        rc = rc ? rc : buf_append(out, data + i, n);
        rc = rc ? rc : buf_append_str(out, "\n");
        i += n;
        if (i < len) {
            i += (data[i] == '\r' && i + 1 < len && data[i + 1] == '\n') ? 2 : 1;
            if (i == len) { /* a final line break: one more, empty, data line keeps it */
                rc = rc ? rc : buf_append_str(out, "data: \n");
            }
        }
    } while (rc == 0 && i < len);
    rc = rc ? rc : buf_append_str(out, "\n");
    if (rc != 0) {
        buf_truncate(out, was);
    }
    return rc;
}

/* ---- protocol versions ---- */

static const char *const versions[] = {MCP_PROTOCOL_LATEST, MCP_PROTOCOL_PREVIOUS,
                                       MCP_PROTOCOL_OLDEST};

static const char *known_version(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
        if (strlen(versions[i]) == n && memcmp(versions[i], s, n) == 0) {
            return versions[i];
        }
    }
    return NULL;
}

const char *mcp_protocol_negotiate(const char *asked)
{
    const char *v = asked != NULL ? known_version(asked, strlen(asked)) : NULL;
    return v != NULL ? v : MCP_PROTOCOL_LATEST;
}

const char *mcp_protocol_header(const char *value)
{
    if (value == NULL) {
        return NULL;
    }
    value += strspn(value, " \t");
    size_t n = strlen(value);
    while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t')) {
        n--;
    }
    return known_version(value, n);
}

/* ---- session ids ---- */

void mcp_session_id_format(const uint8_t bytes[16], char out[MCP_SESSION_ID_LEN + 1])
{
    hex_encode(bytes, 16, out);
    out[MCP_SESSION_ID_LEN] = '\0';
}

bool mcp_session_id_valid(const char *s)
{
    if (s == NULL) {
        return false;
    }
    size_t i = 0;
    for (; s[i] != '\0'; i++) {
        if (i >= MCP_SESSION_ID_LEN || hex_value(s[i]) < 0) {
            return false;
        }
    }
    return i == MCP_SESSION_ID_LEN;
}

/* ---- headers ---- */

/* The q parameter of one media range's parameters p[0..n) (";q=0.5;level=1"): 0 for q=0 (and
 * 0.0, 0.00, 0.000), else 1: only "not acceptable" matters here. */
static bool q_zero(const char *p, size_t n)
{
    size_t i = 0;
    while (i < n) {
        while (i < n && (p[i] == ';' || p[i] == ' ' || p[i] == '\t')) {
            i++;
        }
        size_t s = i;
        while (i < n && p[i] != ';') {
            i++;
        }
        size_t e = i;
        while (e > s && (p[e - 1] == ' ' || p[e - 1] == '\t')) {
            e--;
        }
        if (e - s >= 2 && (p[s] == 'q' || p[s] == 'Q') && p[s + 1] == '=') {
            const char *v = p + s + 2;
            size_t vn = e - s - 2;
            if (vn >= 1 && v[0] == '0') {
                size_t k = 1;
                if (k < vn && v[k] == '.') {
                    k++;
                    while (k < vn && v[k] == '0') {
                        k++;
                    }
                }
                return k == vn;
            }
            return false;
        }
    }
    return false;
}

static bool range_is(const char *s, size_t n, const char *want)
{
    return strlen(want) == n && strncasecmp(s, want, n) == 0;
}

void mcp_accept_parse(const char *accept, struct mcp_accept *out)
{
    memset(out, 0, sizeof(*out));
    if (accept == NULL || accept[strspn(accept, " \t")] == '\0') {
        out->json = out->sse = true; /* no Accept: any media type (RFC 9110 §12.5.1) */
        return;
    }
    for (const char *p = accept; *p != '\0';) {
        p += strspn(p, " \t,");
        size_t item = strcspn(p, ",");
        size_t type = strcspn(p, ";,");
        size_t tn = type;
        while (tn > 0 && (p[tn - 1] == ' ' || p[tn - 1] == '\t')) {
            tn--;
        }
        if (tn > 0 && !q_zero(p + type, item - type)) {
            bool any = range_is(p, tn, "*/*");
            out->json |=
                any || range_is(p, tn, "application/*") || range_is(p, tn, "application/json");
            out->sse |= any || range_is(p, tn, "text/*") || range_is(p, tn, "text/event-stream");
            out->sse_named |= range_is(p, tn, "text/event-stream");
        }
        p += item;
    }
}

bool mcp_content_type_json(const char *content_type)
{
    if (content_type == NULL) {
        return false;
    }
    const char *p = content_type + strspn(content_type, " \t");
    size_t n = strcspn(p, "; \t");
    if (!range_is(p, n, "application/json")) {
        return false;
    }
    p += n;
    p += strspn(p, " \t");
    return *p == '\0' || *p == ';';
}

/* host[0..n) without a default port of the scheme (":80" for http, ":443" for https). */
static size_t host_len_without_default_port(const char *host, size_t n, bool tls)
{
    const char *port = tls ? ":443" : ":80";
    size_t pn = strlen(port);
    if (n > pn && memcmp(host + n - pn, port, pn) == 0) {
        return n - pn;
    }
    return n;
}

bool mcp_origin_is_own(const char *origin, const char *host, bool tls)
{
    if (origin == NULL || host == NULL || *host == '\0') {
        return false;
    }
    const char *scheme = tls ? "https://" : "http://";
    size_t sn = strlen(scheme);
    if (strncasecmp(origin, scheme, sn) != 0) {
        return false;
    }
    const char *o = origin + sn;
    size_t on = strlen(o);
    size_t hn = strlen(host);
    on = host_len_without_default_port(o, on, tls);
    hn = host_len_without_default_port(host, hn, tls);
    return on == hn && strncasecmp(o, host, on) == 0;
}

/* s[0..n) is a dotted IPv4 address: four numbers of 0-255 of one to three digits. */
static bool is_ipv4(const char *s, size_t n)
{
    size_t i = 0;
    for (int part = 0; part < 4; part++) {
        unsigned v = 0;
        size_t digits = 0;
        while (i < n && s[i] >= '0' && s[i] <= '9' && digits < 3) {
            v = v * 10 + (unsigned)(s[i] - '0');
            i++;
            digits++;
        }
        if (digits == 0 || v > 255 || (part < 3 && (i >= n || s[i++] != '.'))) {
            return false;
        }
    }
    return i == n;
}

bool mcp_host_unspoofable(const char *host)
{
    if (host == NULL || *host == '\0') {
        return false;
    }
    size_t n = strlen(host);
    if (host[0] == '[') { /* an IPv6 literal: "[::1]" or "[::1]:52323" */
        const char *close = strchr(host, ']');
        if (close == NULL || close == host + 1 ||
            strspn(host + 1, "0123456789abcdefABCDEF:.") != (size_t)(close - host - 1)) {
            return false;
        }
        const char *rest = close + 1;
        return *rest == '\0' || (*rest == ':' && rest[1] != '\0' &&
                                 strspn(rest + 1, "0123456789") == strlen(rest + 1));
    }
    const char *colon = strchr(host, ':');
    if (colon != NULL) {
        if (colon[1] == '\0' || strspn(colon + 1, "0123456789") != strlen(colon + 1)) {
            return false;
        }
        n = (size_t)(colon - host);
    }
    static const char local[] = "localhost";
    static const char name_chars[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-";
    size_t ln = sizeof(local) - 1;
    bool name = strspn(host, name_chars) >= n; /* a DNS name's characters up to the port */
    return is_ipv4(host, n) || (n == ln && strncasecmp(host, local, ln) == 0) ||
           (name && n > ln + 1 && host[n - ln - 1] == '.' &&
            strncasecmp(host + n - ln, local, ln) == 0);
}

/* ---- params ---- */

int mcp_initialize_params(const cJSON *params, const char **version, const char **why)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, "protocolVersion");
    if (!cJSON_IsString(v)) {
        *why = "Invalid params: initialize needs params.protocolVersion, a string";
        return AGENT_E_INVAL;
    }
    *version = v->valuestring;
    return 0;
}

int mcp_call_params_read(const cJSON *params, struct mcp_call_params *out, const char **why)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(params, "name");
    if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
        *why = "Invalid params: tools/call needs params.name, the tool's name";
        return AGENT_E_INVAL;
    }
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(params, "arguments");
    if (args != NULL && !cJSON_IsObject(args) && !cJSON_IsNull(args)) {
        *why = "Invalid params: params.arguments must be an object";
        return AGENT_E_INVAL;
    }
    struct mcp_id progress = {.kind = MCP_ID_NONE};
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(params, "_meta");
    const cJSON *token =
        cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "progressToken") : NULL;
    if (token != NULL && mcp_id_read(token, &progress) != 0) {
        *why = "Invalid params: params._meta.progressToken must be a string or an integer";
        return AGENT_E_INVAL;
    }
    out->name = name->valuestring;
    out->args = cJSON_IsObject(args) ? args : NULL;
    out->progress = progress;
    return 0;
}

int mcp_cancel_params_read(const cJSON *params, struct mcp_id *out)
{
    struct mcp_id id;
    if (mcp_id_read(cJSON_GetObjectItemCaseSensitive(params, "requestId"), &id) != 0) {
        return AGENT_E_INVAL;
    }
    *out = id;
    return 0;
}

/* ---- tool errors from REST answers ---- */

static const char *reason_phrase(int status)
{
    static const struct {
        int status;
        const char *text;
    } phrases[] = {
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {406, "Not Acceptable"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {413, "Content Too Large"},
        {415, "Unsupported Media Type"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
        {507, "Insufficient Storage"},
    };
    for (size_t i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++) {
        if (phrases[i].status == status) {
            return phrases[i].text;
        }
    }
    return "Error";
}

#define PROBLEM_TEXT_MAX 4096

static const char *member_string(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return cJSON_IsString(v) && v->valuestring[0] != '\0' ? v->valuestring : NULL;
}

/* Appends s cut to PROBLEM_TEXT_MAX bytes on a UTF-8 boundary, invalid bytes as '?' (a body
 * that is not UTF-8 must not make the result invalid JSON text later). */
static int append_text(struct buf *out, const char *s, size_t n)
{
    n = utf8_cut(s, n, PROBLEM_TEXT_MAX);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        unsigned char c = (unsigned char)s[i];
        uint32_t cp;
        size_t l = 1;
        if (c < 0x20 && c != '\t') {
            rc = buf_append(out, " ", 1); /* a line break in one line of text */
        } else if (c < 0x80 || utf8_decode((const uint8_t *)s + i, n - i, &cp, &l)) {
            rc = buf_append(out, s + i, l);
        } else {
            rc = buf_append(out, "?", 1);
        }
        i += l;
    }
    return rc;
}

int mcp_problem_text(struct buf *out, int status, const char *content_type, const char *body,
                     size_t len)
{
    size_t was = buf_size(out);
    cJSON *doc = NULL;
    const char *ct = content_type != NULL ? content_type : "";
    bool problem =
        strncasecmp(ct, "application/problem+json", 24) == 0 || mcp_content_type_json(ct);
    if (problem && body != NULL && len > 0 && len <= MCP_RPC_MESSAGE_MAX) {
        doc = cJSON_ParseWithLength(body, len);
    }
    const char *title = member_string(doc, "title");
    const char *detail = member_string(doc, "detail");
    const char *reason = member_string(doc, "reason");
    int rc = buf_printf(out, "%d ", status);
    rc = rc ? rc
            : append_text(out, title ? title : reason_phrase(status),
                          strlen(title ? title : reason_phrase(status)));
    if (detail != NULL) {
        rc = rc ? rc : buf_append_str(out, ": ");
        rc = rc ? rc : append_text(out, detail, strlen(detail));
        if (reason != NULL) {
            rc = rc ? rc : buf_append_str(out, " (");
            rc = rc ? rc : append_text(out, reason, strlen(reason));
            rc = rc ? rc : buf_append_str(out, ")");
        }
    } else if (doc == NULL && body != NULL && len > 0 && strncasecmp(ct, "text/", 5) == 0) {
        rc = rc ? rc : buf_append_str(out, ": ");
        rc = rc ? rc : append_text(out, body, len);
    }
    cJSON_Delete(doc);
    if (rc != 0) {
        buf_truncate(out, was);
    }
    return rc;
}
