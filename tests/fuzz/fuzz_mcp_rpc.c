/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the MCP endpoint's codec (mcp/mcp_rpc.h) on a POST body and on header values.
 * Checks what the header promises: a body is one message of a known kind or refused with -32700
 * or -32600 (nothing kept); a request has a method and an id, which a result built for it echoes
 * so that the answer parses back as a response with the same id; tools/call's params read as
 * promised; the same bytes framed as an SSE event read back whole (data lines only, no CR, one
 * empty line at the end, the data joined with LF equal to the input with its line breaks made
 * LF); the header helpers agree with themselves; a tool error's text from the bytes as a REST
 * answer is UTF-8 without control characters and bounded.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>

#include "buf.h"
#include "err.h"
#include "mcp_rpc.h"
#include "utf8.h"

static void check_message(const uint8_t *data, size_t size)
{
    struct mcp_msg m;
    struct mcp_rpc_err e;
    memset(&m, 0, sizeof(m));
    int rc = mcp_msg_parse(data, size, &m, &e);
    if (rc != 0) {
        CHECK(rc == AGENT_E_PROTO && m.doc == NULL && e.message != NULL);
        CHECK(e.code == MCP_RPC_PARSE_ERROR || e.code == MCP_RPC_INVALID_REQUEST);
        CHECK(e.code != MCP_RPC_PARSE_ERROR || e.id.kind == MCP_ID_NONE);
        return;
    }
    CHECK(m.doc != NULL && (m.params == NULL || cJSON_IsObject(m.params)));
    CHECK(m.kind == MCP_MSG_REQUEST || m.kind == MCP_MSG_NOTIFICATION ||
          m.kind == MCP_MSG_RESPONSE);
    if (m.kind == MCP_MSG_RESPONSE) {
        CHECK(m.method == NULL && m.params == NULL);
    } else {
        CHECK(m.method != NULL && m.method[0] != '\0' && strlen(m.method) <= MCP_RPC_METHOD_MAX);
        CHECK((m.kind == MCP_MSG_REQUEST) == (m.id.kind != MCP_ID_NONE));
    }
    CHECK(m.id.kind != MCP_ID_STR || strlen(m.id.str) <= MCP_RPC_ID_MAX);
    if (m.kind == MCP_MSG_REQUEST) {
        /* the answer echoes the id and parses back as a response to it */
        cJSON *res = mcp_rpc_result(&m.id, mcp_tool_result(m.method, NULL, false));
        if (res != NULL) {
            struct buf b;
            buf_init(&b, 0);
            if (mcp_json_append(&b, res) == 0) {
                struct mcp_msg back;
                CHECK(mcp_msg_parse(buf_data(&b), buf_size(&b), &back, &e) == 0);
                CHECK(back.kind == MCP_MSG_RESPONSE && mcp_id_equal(&back.id, &m.id));
                mcp_msg_fini(&back);
            }
            buf_fini(&b);
            cJSON_Delete(res);
        }
        struct mcp_call_params c;
        const char *why = NULL;
        if (mcp_call_params_read(m.params, &c, &why) == 0) {
            CHECK(c.name != NULL && c.name[0] != '\0');
            CHECK(c.args == NULL || cJSON_IsObject(c.args));
        } else {
            CHECK(why != NULL);
        }
        const char *version = NULL;
        if (mcp_initialize_params(m.params, &version, &why) == 0) {
            const char *v = mcp_protocol_negotiate(version);
            CHECK(mcp_protocol_header(v) == v);
        }
    }
    mcp_msg_fini(&m);
    CHECK(m.doc == NULL);
}

/* The event of data[0..size) read back as an SSE reader does. */
static void check_sse(const uint8_t *data, size_t size)
{
    struct buf b;
    buf_init(&b, 0);
    if (mcp_sse_event(&b, NULL, (const char *)data, size) != 0) {
        buf_fini(&b);
        return;
    }
    const char *p = (const char *)buf_data(&b);
    size_t n = buf_size(&b);
    CHECK(n >= 17 && memcmp(p, "event: message\n", 15) == 0);
    CHECK(p[n - 1] == '\n' && p[n - 2] == '\n' && memchr(p, '\r', n) == NULL);
    /* the data lines, joined with LF, are the input with each CR LF, CR and LF made LF */
    uint8_t *want = malloc(size + 1);
    uint8_t *got = malloc(size + 1);
    CHECK(want != NULL && got != NULL);
    size_t wn = 0;
    for (size_t i = 0; i < size; i++) {
        if (data[i] == '\r' && i + 1 < size && data[i + 1] == '\n') {
            continue;
        }
        want[wn++] = data[i] == '\r' ? '\n' : data[i];
    }
    size_t gn = 0;
    bool first = true;
    for (size_t i = 15; i < n - 1;) {
        const char *nl = memchr(p + i, '\n', n - i);
        CHECK(nl != NULL);
        size_t len = (size_t)(nl - (p + i));
        CHECK(len >= 6 && memcmp(p + i, "data: ", 6) == 0); /* no empty line before the end */
        if (!first) {
            got[gn++] = '\n';
        }
        first = false;
        CHECK(gn + len - 6 <= size);
        memcpy(got + gn, p + i + 6, len - 6);
        gn += len - 6;
        i += len + 1;
    }
    CHECK(gn == wn && memcmp(got, want, gn) == 0);
    free(want);
    free(got);
    buf_fini(&b);
}

static void check_headers(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    CHECK(s != NULL);
    memcpy(s, data, size);
    s[size] = '\0';
    struct mcp_accept a;
    mcp_accept_parse(s, &a);
    CHECK(!a.sse_named || a.sse);
    const char *v = mcp_protocol_header(s);
    CHECK(v == NULL || strcmp(v, MCP_PROTOCOL_LATEST) == 0 ||
          strcmp(v, MCP_PROTOCOL_PREVIOUS) == 0 || strcmp(v, MCP_PROTOCOL_OLDEST) == 0);
    CHECK(!mcp_session_id_valid(s) || strlen(s) == MCP_SESSION_ID_LEN);
    (void)mcp_content_type_json(s);
    /* the origin against the host it names itself, and against the input as a host */
    const char *host = strstr(s, "://");
    if (host != NULL) {
        CHECK(!mcp_origin_is_own(s, host + 3, false) || strncasecmp(s, "http://", 7) == 0);
    }
    (void)mcp_origin_is_own(s, s, true);
    /* an unspoofable host is an address or localhost, never one with a URL delimiter in it */
    if (mcp_host_unspoofable(s)) {
        CHECK(s[0] != '\0' && strpbrk(s, " /@?#") == NULL);
    }
    free(s);
}

static void check_problem(const uint8_t *data, size_t size)
{
    static const char *const types[] = {"application/problem+json", "application/json",
                                        "text/plain", NULL};
    uint64_t h = fuzz_fnv1a(data, size);
    struct buf b;
    buf_init(&b, 0);
    int status = 400 + (int)(h % 200);
    if (mcp_problem_text(&b, status, types[(h >> 8) % 4], (const char *)data, size) == 0) {
        const uint8_t *p = buf_data(&b);
        size_t n = buf_size(&b);
        /* "NNN " + a title, ": " + a detail, " (" + a reason + ")": each at most 4096 bytes */
        CHECK(n <= 4 + 3 * 4096 + 5);
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l;
            CHECK(utf8_decode(p + i, n - i, &cp, &l));
            CHECK(cp >= 0x20 || cp == '\t');
            i += l;
        }
    }
    buf_fini(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_message(data, size);
    check_sse(data, size);
    check_headers(data, size);
    check_problem(data, size);
    return 0;
}
