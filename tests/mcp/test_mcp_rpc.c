/* SPDX-License-Identifier: MIT */
/*
 * mcp/mcp_rpc.c: MCP's wire pieces. Messages are the shapes of the JSON-RPC 2.0 specification's
 * own examples and of MCP's (initialize, tools/call, notifications/cancelled, a client's
 * response), refused ones one rule at a time; answers are compared as exact text (cJSON prints
 * members in the order they were added); SSE events are read back line by line as the WHATWG
 * rules have a reader do it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "mcp_rpc.h"

static int parse(const char *text, struct mcp_msg *m, struct mcp_rpc_err *e)
{
    return mcp_msg_parse(text, strlen(text), m, e);
}

/* The text of v (deleted here). */
static char *print(cJSON *v)
{
    assert_non_null(v);
    char *s = cJSON_PrintUnformatted(v);
    cJSON_Delete(v);
    assert_non_null(s);
    return s;
}

static void expect_json(cJSON *v, const char *want)
{
    char *got = print(v);
    assert_string_equal(got, want);
    free(got);
}

/* Refused with code, nothing kept. */
static void expect_refused(const char *text, int code)
{
    struct mcp_msg m;
    struct mcp_rpc_err e;
    memset(&m, 0, sizeof(m));
    if (parse(text, &m, &e) != AGENT_E_PROTO) {
        fail_msg("accepted: %s", text);
    }
    if (e.code != code) {
        fail_msg("%s: code %d, want %d (%s)", text, e.code, code, e.message);
    }
    assert_non_null(e.message);
    assert_null(m.doc);
}

static void test_mcp_rpc_request(void **state)
{
    (void)state;
    struct mcp_msg m;
    struct mcp_rpc_err e;
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                           "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                           "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}",
                           &m, &e),
                     0);
    assert_int_equal(m.kind, MCP_MSG_REQUEST);
    assert_int_equal(m.id.kind, MCP_ID_INT);
    assert_int_equal(m.id.num, 1);
    assert_string_equal(m.method, "initialize");
    assert_non_null(m.params);
    const char *v = NULL, *why = NULL;
    assert_int_equal(mcp_initialize_params(m.params, &v, &why), 0);
    assert_string_equal(v, "2025-06-18");
    mcp_msg_fini(&m);
    assert_null(m.doc);
    mcp_msg_fini(&m); /* twice is fine */

    /* a string id, no params, blanks around the value */
    assert_int_equal(
        parse(" \r\n{\"id\":\"a-1\",\"method\":\"ping\",\"jsonrpc\":\"2.0\"}\n\t ", &m, &e), 0);
    assert_int_equal(m.kind, MCP_MSG_REQUEST);
    assert_int_equal(m.id.kind, MCP_ID_STR);
    assert_string_equal(m.id.str, "a-1");
    assert_null(m.params);
    mcp_msg_fini(&m);

    /* the extremes of an integer id; a whole number written as a float; negative */
    assert_int_equal(
        parse("{\"jsonrpc\":\"2.0\",\"id\":9007199254740991,\"method\":\"x\"}", &m, &e), 0);
    assert_int_equal(m.id.num, 9007199254740991LL);
    mcp_msg_fini(&m);
    assert_int_equal(
        parse("{\"jsonrpc\":\"2.0\",\"id\":-9007199254740991,\"method\":\"x\"}", &m, &e), 0);
    assert_int_equal(m.id.num, -9007199254740991LL);
    mcp_msg_fini(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1e3,\"method\":\"x\"}", &m, &e), 0);
    assert_int_equal(m.id.num, 1000);
    mcp_msg_fini(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"x\"}", &m, &e), 0);
    assert_int_equal(m.id.kind, MCP_ID_INT);
    assert_int_equal(m.id.num, 0);
    mcp_msg_fini(&m);

    /* a string id of MCP_RPC_ID_MAX bytes, and a method of MCP_RPC_METHOD_MAX */
    char text[1024];
    char id[MCP_RPC_ID_MAX + 2];
    memset(id, 'i', MCP_RPC_ID_MAX);
    id[MCP_RPC_ID_MAX] = '\0';
    char method[MCP_RPC_METHOD_MAX + 2];
    memset(method, 'm', MCP_RPC_METHOD_MAX);
    method[MCP_RPC_METHOD_MAX] = '\0';
    snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"%s\"}", id,
             method);
    assert_int_equal(parse(text, &m, &e), 0);
    assert_string_equal(m.id.str, id);
    mcp_msg_fini(&m);
    /* one byte more of each */
    id[MCP_RPC_ID_MAX] = 'i';
    id[MCP_RPC_ID_MAX + 1] = '\0';
    snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"x\"}", id);
    expect_refused(text, MCP_RPC_INVALID_REQUEST);
    method[MCP_RPC_METHOD_MAX] = 'm';
    method[MCP_RPC_METHOD_MAX + 1] = '\0';
    snprintf(text, sizeof(text), "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"%s\"}", method);
    expect_refused(text, MCP_RPC_INVALID_REQUEST);
}

static void test_mcp_rpc_notification_and_response(void **state)
{
    (void)state;
    struct mcp_msg m;
    struct mcp_rpc_err e;
    assert_int_equal(
        parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &e), 0);
    assert_int_equal(m.kind, MCP_MSG_NOTIFICATION);
    assert_int_equal(m.id.kind, MCP_ID_NONE);
    assert_string_equal(m.method, "notifications/initialized");
    mcp_msg_fini(&m);

    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                           "{\"requestId\":\"r7\",\"reason\":\"user\"}}",
                           &m, &e),
                     0);
    struct mcp_id rid;
    assert_int_equal(mcp_cancel_params_read(m.params, &rid), 0);
    assert_int_equal(rid.kind, MCP_ID_STR);
    assert_string_equal(rid.str, "r7");
    mcp_msg_fini(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":"
                           "{\"reason\":\"no id\"}}",
                           &m, &e),
                     0);
    assert_int_equal(mcp_cancel_params_read(m.params, &rid), AGENT_E_INVAL);
    assert_int_equal(mcp_cancel_params_read(NULL, &rid), AGENT_E_INVAL);
    mcp_msg_fini(&m);

    /* a client's answer to a server request (sampling, elicitation): result, or error */
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}", &m, &e), 0);
    assert_int_equal(m.kind, MCP_MSG_RESPONSE);
    assert_int_equal(m.id.num, 5);
    assert_null(m.method);
    mcp_msg_fini(&m);
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,"
                           "\"message\":\"Parse error\"}}",
                           &m, &e),
                     0);
    assert_int_equal(m.kind, MCP_MSG_RESPONSE);
    assert_int_equal(m.id.kind, MCP_ID_NONE);
    mcp_msg_fini(&m);
}

static void test_mcp_rpc_refused(void **state)
{
    (void)state;
    /* not JSON, not one value, not UTF-8 */
    expect_refused("", MCP_RPC_PARSE_ERROR);
    expect_refused("{", MCP_RPC_PARSE_ERROR);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"", MCP_RPC_PARSE_ERROR);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"} {}", MCP_RPC_PARSE_ERROR);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}x", MCP_RPC_PARSE_ERROR);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":\"\xC3\x28\",\"method\":\"ping\"}",
                   MCP_RPC_PARSE_ERROR);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":\"\xED\xA0\x80\",\"method\":\"ping\"}",
                   MCP_RPC_PARSE_ERROR); /* a UTF-16 surrogate */
    /* a batch, and other non-objects */
    expect_refused("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", MCP_RPC_INVALID_REQUEST);
    expect_refused("[]", MCP_RPC_INVALID_REQUEST);
    expect_refused("\"ping\"", MCP_RPC_INVALID_REQUEST);
    expect_refused("null", MCP_RPC_INVALID_REQUEST);
    expect_refused("42", MCP_RPC_INVALID_REQUEST);
    /* the envelope */
    expect_refused("{\"id\":1,\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":2.0,\"id\":1,\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":[1]}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":\"p\"}",
                   MCP_RPC_INVALID_REQUEST);
    /* ids: null in a request, a fraction, out of range, of another type */
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":9007199254740992,\"method\":\"ping\"}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1e400,\"method\":\"ping\"}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", MCP_RPC_INVALID_REQUEST);
    /* responses: neither or both of result and error, a null id with a result, error not an
     * object */
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{},\"error\":{}}",
                   MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":null,\"result\":{}}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"result\":{}}", MCP_RPC_INVALID_REQUEST);
    expect_refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":\"bad\"}", MCP_RPC_INVALID_REQUEST);

    /* an invalid request whose id could be read names it; one whose id could not, null */
    struct mcp_msg m;
    struct mcp_rpc_err e;
    assert_int_equal(parse("{\"jsonrpc\":\"1.0\",\"id\":\"q\",\"method\":\"ping\"}", &m, &e),
                     AGENT_E_PROTO);
    assert_int_equal(e.id.kind, MCP_ID_STR);
    assert_string_equal(e.id.str, "q");
    assert_int_equal(parse("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", &m, &e),
                     AGENT_E_PROTO);
    assert_int_equal(e.id.kind, MCP_ID_NONE);
    assert_int_equal(parse("not json", &m, &e), AGENT_E_PROTO);
    assert_int_equal(e.id.kind, MCP_ID_NONE);

    /* too large: refused before it is parsed */
    size_t big = MCP_RPC_MESSAGE_MAX + 1;
    char *text = malloc(big);
    assert_non_null(text);
    memset(text, ' ', big);
    memcpy(text, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}", 30);
    assert_int_equal(mcp_msg_parse(text, big, &m, &e), AGENT_E_PROTO);
    assert_int_equal(e.code, MCP_RPC_INVALID_REQUEST);
    /* the same at the limit is fine (the blanks after the object) */
    assert_int_equal(mcp_msg_parse(text, big - 1, &m, &e), 0);
    mcp_msg_fini(&m);
    free(text);
}

/* Every prefix of a good message is refused, none crashes or leaks (the parser never reads past
 * len: each prefix is copied to a block of its own size for ASan and valgrind to watch). */
static void test_mcp_rpc_prefixes(void **state)
{
    (void)state;
    const char *good = "{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"tools/call\",\"params\":"
                       "{\"name\":\"list_processes\",\"arguments\":{},\"_meta\":"
                       "{\"progressToken\":7}}}";
    size_t n = strlen(good);
    for (size_t i = 0; i < n; i++) {
        char *p = malloc(i + 1);
        assert_non_null(p);
        memcpy(p, good, i);
        struct mcp_msg m;
        struct mcp_rpc_err e;
        assert_int_equal(mcp_msg_parse(i > 0 ? p : NULL, i, &m, &e), AGENT_E_PROTO);
        free(p);
    }
}

static void test_mcp_rpc_builders(void **state)
{
    (void)state;
    struct mcp_id i7 = {.kind = MCP_ID_INT, .num = 7};
    struct mcp_id s = {.kind = MCP_ID_STR};
    memcpy(s.str, "a\"b", 4);
    struct mcp_id none = {.kind = MCP_ID_NONE};
    expect_json(mcp_rpc_result(&i7, cJSON_CreateObject()),
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}");
    expect_json(mcp_rpc_result(&s, cJSON_CreateString("r")),
                "{\"jsonrpc\":\"2.0\",\"id\":\"a\\\"b\",\"result\":\"r\"}");
    assert_null(mcp_rpc_result(&i7, NULL));
    expect_json(mcp_rpc_error(&none, MCP_RPC_PARSE_ERROR, "Parse error"),
                "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":"
                "\"Parse error\"}}");
    expect_json(mcp_rpc_error(&i7, MCP_RPC_METHOD_NOT_FOUND, "Method not found: x"),
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"error\":{\"code\":-32601,\"message\":"
                "\"Method not found: x\"}}");
    expect_json(mcp_rpc_notification("notifications/progress", NULL),
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}");
    expect_json(mcp_rpc_notification("notifications/progress",
                                     mcp_progress_params(&s, 1.5, 10, "cpu_profile: 1 of 10 s")),
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":"
                "{\"progressToken\":\"a\\\"b\",\"progress\":1.5,\"total\":10,\"message\":"
                "\"cpu_profile: 1 of 10 s\"}}");
    expect_json(mcp_progress_params(&i7, 3, -1, NULL), "{\"progressToken\":7,\"progress\":3}");

    expect_json(mcp_tool_result("2 processes", NULL, false),
                "{\"content\":[{\"type\":\"text\",\"text\":\"2 processes\"}]}");
    cJSON *sc = cJSON_CreateObject();
    cJSON_AddArrayToObject(sc, "processes");
    expect_json(mcp_tool_result("none", sc, false),
                "{\"content\":[{\"type\":\"text\",\"text\":\"none\"}],\"structuredContent\":"
                "{\"processes\":[]}}");
    expect_json(mcp_tool_result("429 Too Many Requests: busy", NULL, true),
                "{\"content\":[{\"type\":\"text\",\"text\":\"429 Too Many Requests: busy\"}],"
                "\"isError\":true}");
    expect_json(mcp_tool_result(NULL, NULL, false),
                "{\"content\":[{\"type\":\"text\",\"text\":\"\"}]}");

    /* ids round trip; equality */
    struct mcp_id back;
    cJSON *j = mcp_id_json(&s);
    assert_int_equal(mcp_id_read(j, &back), 0);
    assert_true(mcp_id_equal(&s, &back));
    assert_false(mcp_id_equal(&i7, &back));
    cJSON_Delete(j);
    j = mcp_id_json(&i7);
    assert_int_equal(mcp_id_read(j, &back), 0);
    assert_true(mcp_id_equal(&i7, &back));
    struct mcp_id i8 = {.kind = MCP_ID_INT, .num = 8};
    assert_false(mcp_id_equal(&i8, &back));
    cJSON_Delete(j);
    /* the largest ids are echoed digit for digit (cJSON alone would print 15 digits) */
    const int64_t big[] = {9007199254740991LL, -9007199254740991LL, 2147483648LL,
                           -2147483649LL,      2147483647LL,        -2147483648LL};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        struct mcp_id id = {.kind = MCP_ID_INT, .num = big[i]};
        char *text = print(mcp_rpc_result(&id, cJSON_CreateObject()));
        struct mcp_msg m;
        struct mcp_rpc_err e;
        assert_int_equal(mcp_msg_parse(text, strlen(text), &m, &e), 0);
        assert_int_equal(m.kind, MCP_MSG_RESPONSE);
        assert_true(mcp_id_equal(&m.id, &id));
        mcp_msg_fini(&m);
        free(text);
    }
    j = mcp_id_json(&none);
    assert_true(cJSON_IsNull(j));
    assert_int_equal(mcp_id_read(j, &back), AGENT_E_PROTO);
    cJSON_Delete(j);
    assert_true(mcp_id_equal(&none, &none));

    /* mcp_json_append within and over the buffer's cap */
    struct buf b;
    buf_init(&b, 16);
    j = cJSON_CreateString("0123456789");
    assert_int_equal(mcp_json_append(&b, j), 0);
    assert_int_equal(mcp_json_append(&b, j), AGENT_E_TOOBIG);
    assert_string_equal(buf_cstr(&b), "\"0123456789\"");
    cJSON_Delete(j);
    buf_fini(&b);
}

/* Reads one SSE event back as a reader does: the event name, the id (or ""), and the data lines
 * joined with LF; asserts the event is all of text. */
static void read_event(const char *text, char *event, char *id, char *data, size_t cap)
{
    event[0] = id[0] = data[0] = '\0';
    bool first = true;
    const char *p = text;
    for (;;) {
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        size_t n = (size_t)(nl - p);
        assert_null(memchr(p, '\r', n));
        if (n == 0) {
            assert_string_equal(nl + 1, ""); /* the empty line ends the one event */
            return;
        }
        if (strncmp(p, "event: ", 7) == 0) {
            snprintf(event, cap, "%.*s", (int)(n - 7), p + 7);
        } else if (strncmp(p, "id: ", 4) == 0) {
            snprintf(id, cap, "%.*s", (int)(n - 4), p + 4);
        } else {
            assert_int_equal(strncmp(p, "data: ", 6), 0);
            size_t used = strlen(data);
            snprintf(data + used, cap - used, "%s%.*s", first ? "" : "\n", (int)(n - 6), p + 6);
            first = false;
        }
        p = nl + 1;
    }
}

static void test_mcp_rpc_sse(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    const char *msg = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}";
    assert_int_equal(mcp_sse_event(&b, NULL, msg, strlen(msg)), 0);
    assert_string_equal(buf_cstr(&b), "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,"
                                      "\"result\":{}}\n\n");
    buf_reset(&b);
    assert_int_equal(mcp_sse_event(&b, "s1-4", "x", 1), 0);
    assert_string_equal(buf_cstr(&b), "event: message\nid: s1-4\ndata: x\n\n");

    /* line breaks of every kind become data lines that the reader joins with LF again */
    const struct {
        const char *in;
        const char *want;
    } cases[] = {
        {"a\nb", "a\nb"}, {"a\r\nb", "a\nb"}, {"a\rb", "a\nb"}, {"a\n\nb", "a\n\nb"},
        {"a\n", "a\n"},   {"\n", "\n"},       {"", ""},         {"a\r\n\r\nb", "a\n\nb"},
        {"a\r", "a\n"},   {"\r\n", "\n"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        buf_reset(&b);
        assert_int_equal(mcp_sse_event(&b, NULL, cases[i].in, strlen(cases[i].in)), 0);
        char event[64], id[64], data[64];
        read_event(buf_cstr(&b), event, id, data, sizeof(data));
        assert_string_equal(event, "message");
        if (strcmp(data, cases[i].want) != 0) {
            fail_msg("case %zu: %s", i, buf_cstr(&b));
        }
    }

    /* an id that would break the framing; a buffer too small: out left as it was */
    buf_reset(&b);
    assert_int_equal(mcp_sse_event(&b, "a\nb", "x", 1), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
    buf_init(&b, 32);
    assert_int_equal(buf_append_str(&b, "kept"), 0);
    assert_int_equal(mcp_sse_event(&b, NULL, msg, strlen(msg)), AGENT_E_TOOBIG);
    assert_string_equal(buf_cstr(&b), "kept");
    buf_fini(&b);
}

static void test_mcp_rpc_versions(void **state)
{
    (void)state;
    assert_string_equal(mcp_protocol_negotiate("2025-11-25"), "2025-11-25");
    assert_string_equal(mcp_protocol_negotiate("2025-06-18"), "2025-06-18");
    assert_string_equal(mcp_protocol_negotiate("2025-03-26"), "2025-03-26");
    assert_string_equal(mcp_protocol_negotiate("2024-11-05"), MCP_PROTOCOL_LATEST);
    assert_string_equal(mcp_protocol_negotiate("2099-01-01"), MCP_PROTOCOL_LATEST);
    assert_string_equal(mcp_protocol_negotiate(""), MCP_PROTOCOL_LATEST);
    assert_string_equal(mcp_protocol_negotiate(NULL), MCP_PROTOCOL_LATEST);
    assert_string_equal(mcp_protocol_header("2025-11-25"), "2025-11-25");
    assert_string_equal(mcp_protocol_header(" 2025-06-18\t"), "2025-06-18");
    assert_string_equal(mcp_protocol_header("2025-03-26"), "2025-03-26");
    assert_null(mcp_protocol_header("2024-11-05"));
    assert_null(mcp_protocol_header("2025-11-25x"));
    assert_null(mcp_protocol_header("2025-11-2"));
    assert_null(mcp_protocol_header(""));
    assert_null(mcp_protocol_header(NULL));

    const char *v = NULL, *why = NULL;
    cJSON *p = cJSON_Parse("{\"protocolVersion\":7}");
    assert_int_equal(mcp_initialize_params(p, &v, &why), AGENT_E_INVAL);
    assert_non_null(why);
    assert_int_equal(mcp_initialize_params(NULL, &v, &why), AGENT_E_INVAL);
    cJSON_Delete(p);
}

static void test_mcp_rpc_session_ids(void **state)
{
    (void)state;
    const uint8_t bytes[16] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                               0x08, 0x09, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    char id[MCP_SESSION_ID_LEN + 1];
    mcp_session_id_format(bytes, id);
    assert_string_equal(id, "00010203040506070809aabbccddeeff");
    assert_true(mcp_session_id_valid(id));
    assert_true(mcp_session_id_valid("00010203040506070809AABBCCDDEEFF"));
    assert_false(mcp_session_id_valid("00010203040506070809aabbccddeef"));
    assert_false(mcp_session_id_valid("00010203040506070809aabbccddeeff0"));
    assert_false(mcp_session_id_valid("00010203040506070809aabbccddeefg"));
    assert_false(mcp_session_id_valid(""));
    assert_false(mcp_session_id_valid(NULL));
}

static void expect_accept(const char *h, bool json, bool sse, bool named)
{
    struct mcp_accept a;
    mcp_accept_parse(h, &a);
    if (a.json != json || a.sse != sse || a.sse_named != named) {
        fail_msg("Accept: %s: json %d sse %d named %d", h ? h : "(none)", a.json, a.sse,
                 a.sse_named);
    }
}

static void test_mcp_rpc_headers(void **state)
{
    (void)state;
    expect_accept("application/json, text/event-stream", true, true, true);
    expect_accept("text/event-stream,application/json", true, true, true);
    expect_accept("Application/JSON ; charset=utf-8 , TEXT/Event-Stream", true, true, true);
    expect_accept("application/json", true, false, false);
    expect_accept("text/event-stream", false, true, true);
    expect_accept("*/*", true, true, false);
    expect_accept("application/*, text/*", true, true, false);
    expect_accept("application/json, text/event-stream;q=0", true, false, false);
    expect_accept("application/json;q=0.000, text/event-stream", false, true, true);
    expect_accept("application/json;q=0.5, text/event-stream; q=1", true, true, true);
    expect_accept("application/json;level=1;q=0, */*;q=0.1", true, true, false);
    expect_accept("text/html", false, false, false);
    expect_accept("application/jsonx, text/event-streamy", false, false, false);
    expect_accept(NULL, true, true, false);
    expect_accept("  ", true, true, false);
    expect_accept(",,", false, false, false);

    assert_true(mcp_content_type_json("application/json"));
    assert_true(mcp_content_type_json("application/json; charset=utf-8"));
    assert_true(mcp_content_type_json(" Application/JSON;charset=UTF-8"));
    assert_true(mcp_content_type_json("application/json "));
    assert_false(mcp_content_type_json("application/jsonx"));
    assert_false(mcp_content_type_json("application/json x"));
    assert_false(mcp_content_type_json("text/plain"));
    assert_false(mcp_content_type_json("application/x-www-form-urlencoded"));
    assert_false(mcp_content_type_json(""));
    assert_false(mcp_content_type_json(NULL));

    assert_true(mcp_origin_is_own("http://localhost:52323", "localhost:52323", false));
    assert_true(mcp_origin_is_own("HTTP://LocalHost:52323", "localhost:52323", false));
    assert_true(mcp_origin_is_own("http://127.0.0.1", "127.0.0.1:80", false));
    assert_true(mcp_origin_is_own("http://127.0.0.1:80", "127.0.0.1", false));
    assert_true(mcp_origin_is_own("https://dm.example:443", "dm.example", true));
    assert_true(mcp_origin_is_own("http://[::1]:52323", "[::1]:52323", false));
    assert_false(mcp_origin_is_own("https://localhost:52323", "localhost:52323", false));
    assert_false(mcp_origin_is_own("http://localhost:52323", "localhost:52323", true));
    assert_false(mcp_origin_is_own("http://localhost:52324", "localhost:52323", false));
    assert_false(mcp_origin_is_own("http://evil.example", "localhost:52323", false));
    assert_false(mcp_origin_is_own("http://localhost:52323.evil", "localhost:52323", false));
    assert_false(mcp_origin_is_own("null", "localhost:52323", false));
    assert_false(mcp_origin_is_own("http://localhost:52323", NULL, false));
    assert_false(mcp_origin_is_own("http://", "", false));
    assert_false(mcp_origin_is_own(NULL, "localhost", false));

    /* Hosts a rebound DNS name cannot stand for */
    const char *const unspoofable[] = {"127.0.0.1",       "127.0.0.1:52323",    "10.1.2.3:80",
                                       "[::1]",           "[::1]:52323",        "localhost",
                                       "LocalHost:52323", "app.localhost:8080", "255.255.255.255"};
    for (size_t i = 0; i < sizeof(unspoofable) / sizeof(unspoofable[0]); i++) {
        if (!mcp_host_unspoofable(unspoofable[i])) {
            fail_msg("refused: %s", unspoofable[i]);
        }
    }
    const char *const spoofable[] = {"evil.example.com",
                                     "evil.example.com:52323",
                                     "localhost.evil",
                                     "xlocalhost",
                                     "127.0.0.1.evil",
                                     "256.0.0.1",
                                     "1.2.3",
                                     "1.2.3.4.5",
                                     "127.0.0.1:",
                                     "127.0.0.1:x",
                                     "[::1",
                                     "[]",
                                     "[::1]x",
                                     "[::1]:",
                                     "",
                                     "0127.0.0.1",
                                     ".localhost",
                                     "a b.localhost",
                                     "x/y.localhost:1"};
    for (size_t i = 0; i < sizeof(spoofable) / sizeof(spoofable[0]); i++) {
        if (mcp_host_unspoofable(spoofable[i])) {
            fail_msg("accepted: %s", spoofable[i]);
        }
    }
    assert_false(mcp_host_unspoofable(NULL));
    assert_false(mcp_host_unspoofable("[fe80::1%eth0]")); /* a zone: not in a Host header */
}

static void test_mcp_rpc_call_params(void **state)
{
    (void)state;
    struct mcp_call_params c;
    const char *why = NULL;
    cJSON *p = cJSON_Parse("{\"name\":\"cpu_profile\",\"arguments\":{\"seconds\":5},\"_meta\":"
                           "{\"progressToken\":\"tok\"}}");
    assert_int_equal(mcp_call_params_read(p, &c, &why), 0);
    assert_string_equal(c.name, "cpu_profile");
    assert_non_null(c.args);
    assert_int_equal(cJSON_GetObjectItem(c.args, "seconds")->valueint, 5);
    assert_int_equal(c.progress.kind, MCP_ID_STR);
    assert_string_equal(c.progress.str, "tok");
    cJSON_Delete(p);

    p = cJSON_Parse("{\"name\":\"list_processes\",\"arguments\":null,\"_meta\":{}}");
    assert_int_equal(mcp_call_params_read(p, &c, &why), 0);
    assert_null(c.args);
    assert_int_equal(c.progress.kind, MCP_ID_NONE);
    cJSON_Delete(p);
    p = cJSON_Parse("{\"name\":\"x\",\"_meta\":{\"progressToken\":12}}");
    assert_int_equal(mcp_call_params_read(p, &c, &why), 0);
    assert_int_equal(c.progress.kind, MCP_ID_INT);
    assert_int_equal(c.progress.num, 12);
    cJSON_Delete(p);

    const char *bad[] = {
        "{}",
        "{\"name\":\"\"}",
        "{\"name\":7}",
        "{\"name\":\"x\",\"arguments\":[1]}",
        "{\"name\":\"x\",\"arguments\":\"a=1\"}",
        "{\"name\":\"x\",\"_meta\":{\"progressToken\":1.5}}",
        "{\"name\":\"x\",\"_meta\":{\"progressToken\":null}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        p = cJSON_Parse(bad[i]);
        why = NULL;
        if (mcp_call_params_read(p, &c, &why) != AGENT_E_INVAL || why == NULL) {
            fail_msg("accepted: %s", bad[i]);
        }
        cJSON_Delete(p);
    }
    assert_int_equal(mcp_call_params_read(NULL, &c, &why), AGENT_E_INVAL);
}

static void expect_problem(int status, const char *ct, const char *body, const char *want)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(mcp_problem_text(&b, status, ct, body, body != NULL ? strlen(body) : 0), 0);
    assert_string_equal(buf_cstr(&b), want);
    buf_fini(&b);
}

static void test_mcp_rpc_problem_text(void **state)
{
    (void)state;
    expect_problem(429, "application/problem+json",
                   "{\"type\":\"https://tools.ietf.org/html/rfc9110#section-15.5.30\",\"title\":"
                   "\"Too Many Requests\",\"status\":429,\"detail\":\"3 trace operations are "
                   "running; at most 3 may run at once\"}",
                   "429 Too Many Requests: 3 trace operations are running; at most 3 may run at "
                   "once");
    expect_problem(400, "application/problem+json; charset=utf-8",
                   "{\"title\":\"Bad Request\",\"status\":400,\"detail\":\"The 'Exceptions' "
                   "feature is not enabled.\",\"reason\":\"set InProcessFeatures:Exceptions:"
                   "Enabled\"}",
                   "400 Bad Request: The 'Exceptions' feature is not enabled. (set "
                   "InProcessFeatures:Exceptions:Enabled)");
    expect_problem(404, "application/problem+json", "{\"status\":404}", "404 Not Found");
    expect_problem(502, "application/json", "not json", "502 Bad Gateway");
    expect_problem(503, "text/plain; charset=utf-8", "busy\r\nnow",
                   "503 Service Unavailable: busy  now");
    expect_problem(500, NULL, NULL, "500 Internal Server Error");
    expect_problem(499, "application/octet-stream", "\x01\x02", "499 Error");
    expect_problem(400, "text/plain", "bad \xff byte", "400 Bad Request: bad ? byte");
    /* a long detail is cut at 4096 bytes, on a UTF-8 boundary */
    size_t n = 5000;
    char *body = malloc(n + 64);
    assert_non_null(body);
    memcpy(body, "{\"detail\":\"", 11);
    for (size_t i = 0; i < n; i += 2) {
        memcpy(body + 11 + i, "\xC3\xA9", 2); /* é */
    }
    memcpy(body + 11 + n, "\"}", 3);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(mcp_problem_text(&b, 400, "application/problem+json", body, strlen(body)), 0);
    assert_int_equal(buf_size(&b), strlen("400 Bad Request: ") + 4096);
    buf_fini(&b);
    free(body);
    /* the cap of out: nothing written */
    buf_init(&b, 8);
    assert_int_equal(mcp_problem_text(&b, 400, NULL, NULL, 0), AGENT_E_TOOBIG);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mcp_rpc_request),
        cmocka_unit_test(test_mcp_rpc_notification_and_response),
        cmocka_unit_test(test_mcp_rpc_refused),
        cmocka_unit_test(test_mcp_rpc_prefixes),
        cmocka_unit_test(test_mcp_rpc_builders),
        cmocka_unit_test(test_mcp_rpc_sse),
        cmocka_unit_test(test_mcp_rpc_versions),
        cmocka_unit_test(test_mcp_rpc_session_ids),
        cmocka_unit_test(test_mcp_rpc_headers),
        cmocka_unit_test(test_mcp_rpc_call_params),
        cmocka_unit_test(test_mcp_rpc_problem_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
