/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "http_proto.h"
#include "http_query.h"

/* Pure helpers: query/path decoding, problem+json, and the module-private wire helpers. */

static void test_http_query_get_decodes(void **state)
{
    (void)state;
    struct buf v;
    buf_init(&v, 0);
    assert_int_equal(http_query_get("pid=42&name=my+app%21", "pid", &v), 1);
    assert_string_equal(buf_cstr(&v), "42");
    assert_int_equal(http_query_get("pid=42&name=my+app%21", "name", &v), 1);
    assert_string_equal(buf_cstr(&v), "my app!");
    /* Names are decoded too, and compared case-insensitively. */
    assert_int_equal(http_query_get("%50ID=7", "pid", &v), 1);
    assert_string_equal(buf_cstr(&v), "7");
    assert_int_equal(http_query_get("egress+Provider=x", "EGRESS PROVIDER", &v), 1);
    assert_string_equal(buf_cstr(&v), "x");
    /* Absent: 0 and out untouched. */
    assert_int_equal(http_query_get("a=1&b=2", "c", &v), 0);
    assert_string_equal(buf_cstr(&v), "x");
    assert_int_equal(http_query_get("", "a", &v), 0);
    assert_int_equal(http_query_get(NULL, "a", &v), 0);
    /* A name without '=' has an empty value; empty segments are skipped. */
    assert_int_equal(http_query_get("&&flag&&x=1", "flag", &v), 1);
    assert_string_equal(buf_cstr(&v), "");
    assert_int_equal(http_query_get("x=a=b", "x", &v), 1);
    assert_string_equal(buf_cstr(&v), "a=b");
    /* UTF-8 passes through byte for byte. */
    assert_int_equal(http_query_get("n=%C3%A9t%C3%A9", "n", &v), 1);
    assert_string_equal(buf_cstr(&v), "\xc3\xa9t\xc3\xa9");
    buf_fini(&v);
}

static void test_http_query_get_malformed(void **state)
{
    (void)state;
    struct buf v;
    buf_init(&v, 0);
    buf_append_str(&v, "keep");
    assert_int_equal(http_query_get("a=%zz", "a", &v), AGENT_E_INVAL);
    assert_int_equal(http_query_get("a=%2", "a", &v), AGENT_E_INVAL);
    assert_int_equal(http_query_get("a=%", "a", &v), AGENT_E_INVAL);
    assert_int_equal(http_query_get("a=%00", "a", &v), AGENT_E_INVAL);
    /* Malformed anywhere in the query, even in another parameter. */
    assert_int_equal(http_query_get("a=1&b=%G1", "a", &v), AGENT_E_INVAL);
    assert_int_equal(http_query_get("%zz=1&a=1", "a", &v), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&v), "keep"); /* out written only on success */
    buf_fini(&v);
}

static void test_http_query_get_duplicates(void **state)
{
    (void)state;
    struct buf v;
    buf_init(&v, 0);
    /* The same value twice is fine (even spelled differently); different values are not. */
    assert_int_equal(http_query_get("pid=1&PID=1&pid=%31", "pid", &v), 1);
    assert_string_equal(buf_cstr(&v), "1");
    assert_int_equal(http_query_get("pid=1&Pid=2", "pid", &v), AGENT_E_INVAL);
    assert_int_equal(http_query_get("pid=1&pid", "pid", &v), AGENT_E_INVAL);
    buf_fini(&v);
}

static void test_http_query_check_names(void **state)
{
    (void)state;
    static const char *const allowed[] = {"pid", "uid", "name", NULL};
    struct buf bad;
    buf_init(&bad, 0);
    assert_int_equal(http_query_check_names("PID=1&Name=x&uid=2", allowed, &bad), 0);
    assert_int_equal(http_query_check_names("", allowed, &bad), 0);
    assert_int_equal(http_query_check_names("pid=1&durationSeconds=3", allowed, &bad),
                     AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&bad), "durationSeconds");
    assert_int_equal(http_query_check_names("na%6De=1&x+y=2", allowed, &bad), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&bad), "x y");
    assert_int_equal(http_query_check_names("p%zz=1", allowed, &bad), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&bad), "p%zz");
    assert_int_equal(http_query_check_names("=1", allowed, &bad), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&bad), "");
    buf_fini(&bad);
}

static void test_http_query_path_decode(void **state)
{
    (void)state;
    struct buf p;
    buf_init(&p, 0);
    assert_int_equal(http_path_decode("/operations/abc%2Dd", &p), 0);
    assert_string_equal(buf_cstr(&p), "/operations/abc-d");
    assert_int_equal(http_path_decode("/a+b%20c", &p), 0);
    assert_string_equal(buf_cstr(&p), "/a+b c"); /* '+' is literal in paths */
    assert_int_equal(http_path_decode("/%e2%82%AC", &p), 0);
    assert_string_equal(buf_cstr(&p), "/\xe2\x82\xac");
    assert_int_equal(http_path_decode("/bad%2", &p), AGENT_E_INVAL);
    assert_int_equal(http_path_decode("/bad%g0", &p), AGENT_E_INVAL);
    assert_int_equal(http_path_decode("/nul%00", &p), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&p), "/\xe2\x82\xac");
    assert_int_equal(http_path_decode("", &p), 0);
    assert_string_equal(buf_cstr(&p), "");
    buf_fini(&p);
}

static void test_http_query_problem_json(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(http_problem_json(&b, 404, "Not Found", "no process \"x\"\n\x01"), 0);
    assert_string_equal(buf_cstr(&b),
                        "{\"type\":\"https://tools.ietf.org/html/rfc9110#section-15.5.5\","
                        "\"title\":\"Not Found\",\"status\":404,"
                        "\"detail\":\"no process \\\"x\\\"\\n\\u0001\"}");
    /* Appends; NULL title → reason phrase; NULL detail → no member. */
    assert_int_equal(http_problem_json(&b, 431, NULL, NULL), 0);
    assert_non_null(strstr(buf_cstr(&b),
                           "}{\"type\":\"https://tools.ietf.org/html/rfc6585#section-5\","
                           "\"title\":\"Request Header Fields Too Large\",\"status\":431}"));
    struct {
        int status;
        const char *type;
    } const anchors[] = {
        {400, "rfc9110#section-15.5.1"},
        {401, "rfc9110#section-15.5.2"},
        {403, "rfc9110#section-15.5.4"},
        {404, "rfc9110#section-15.5.5"},
        {405, "rfc9110#section-15.5.6"},
        {406, "rfc9110#section-15.5.7"},
        {413, "rfc9110#section-15.5.14"},
        {414, "rfc9110#section-15.5.15"},
        {415, "rfc9110#section-15.5.16"},
        {429, "rfc6585#section-4"},
        {431, "rfc6585#section-5"},
        {500, "rfc9110#section-15.6.1"},
        {503, "rfc9110#section-15.6.4"},
        {505, "rfc9110#section-15.6.6"},
        {299, "about:blank"},
    };
    for (size_t i = 0; i < sizeof(anchors) / sizeof(anchors[0]); i++) {
        buf_reset(&b);
        assert_int_equal(http_problem_json(&b, anchors[i].status, "t", "d"), 0);
        assert_non_null(strstr(buf_cstr(&b), anchors[i].type));
    }
    buf_reset(&b);
    assert_int_equal(http_problem_json(&b, 99, "t", "d"), AGENT_E_INVAL);
    assert_int_equal(http_problem_json(&b, 600, "t", "d"), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);
    /* A capped buffer fails cleanly and stays unchanged. */
    struct buf small;
    buf_init(&small, 16);
    assert_int_equal(http_problem_json(&small, 400, "t", "d"), AGENT_E_TOOBIG);
    assert_int_equal(buf_size(&small), 0);
    buf_fini(&small);
    buf_fini(&b);
}

static void test_http_proto_split_target(void **state)
{
    (void)state;
    size_t po, pl, qo, ql;
#define SPLIT(t, opt) http__split_target((t), strlen(t), (opt), &po, &pl, &qo, &ql)
    assert_int_equal(SPLIT("/a/b?x=1&y", false), 0);
    assert_int_equal(po, 0);
    assert_int_equal(pl, 4);
    assert_int_equal(qo, 5);
    assert_int_equal(ql, 5);
    assert_int_equal(SPLIT("/", false), 0);
    assert_int_equal(ql, 0);
    assert_int_equal(SPLIT("/p?", false), 0);
    assert_int_equal(pl, 2);
    assert_int_equal(ql, 0);
    assert_int_equal(SPLIT("http://h:1/p?q", false), 0);
    assert_int_equal(po, 10);
    assert_int_equal(pl, 2);
    assert_int_equal(ql, 1);
    assert_int_equal(SPLIT("HTTPS://h", false), 0);
    assert_int_equal(pl, 0); /* empty: the server hands "/" to handlers */
    assert_int_equal(SPLIT("*", true), 0);
    assert_int_equal(SPLIT("*", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("a/b", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("ftp://h/p", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("http:///p", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a#frag", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a b", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a\"b", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a<b>", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a\\b", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a\x7f", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/a\xc3\xa9", false), AGENT_E_INVAL);
    assert_int_equal(SPLIT("/q?a[0]=1&b=~!$&'()*+,;=:@%20", false), 0);
#undef SPLIT
}

static void test_http_proto_listen_url(void **state)
{
    (void)state;
    struct http_listen_url u;
    assert_int_equal(http__parse_listen_url("http://127.0.0.1:52323", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_LITERAL);
    assert_false(u.ipv6);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 52323);
    assert_int_equal(http__parse_listen_url("http://localhost:0", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_LOOPBACK);
    assert_int_equal(u.port, 0);
    assert_int_equal(http__parse_listen_url("http://+:52325", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_ANY);
    assert_int_equal(http__parse_listen_url("http://*:1/", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_ANY);
    assert_int_equal(http__parse_listen_url("http://my-host.example:8080", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_ANY);
    assert_int_equal(http__parse_listen_url("HTTP://[::1]:0", &u), 0);
    assert_int_equal(u.kind, HTTP_HOST_LITERAL);
    assert_true(u.ipv6);
    assert_string_equal(u.host, "::1");
    assert_int_equal(http__parse_listen_url("http://[::]", &u), 0);
    assert_int_equal(u.port, 80);
    assert_false(u.tls);
    assert_int_equal(http__parse_listen_url("https://localhost:52323", &u), 0);
    assert_true(u.tls);
    assert_int_equal(u.kind, HTTP_HOST_LOOPBACK);
    assert_int_equal(u.port, 52323);
    assert_int_equal(http__parse_listen_url("HTTPS://[::1]", &u), 0);
    assert_true(u.tls);
    assert_int_equal(u.port, 443);
    const char *bad[] = {"https://",    "httpx://h:1",        "https:/h:1",     "localhost:1",
                         "http://",     "http://:80",         "http://h:",      "http://h:65536",
                         "http://h:-1", "http://h:1/x",       "http://[::1",    "http://[::1]x",
                         "http://[]:1", "http://[zz]:1",      "http://a b:1",   "http://u@h:1",
                         "http://h:1a", "http://999.1.1.1:1", "http://1.2.3:1", NULL};
    for (size_t i = 0; bad[i] != NULL; i++) {
        u.port = 4242;
        if (http__parse_listen_url(bad[i], &u) != AGENT_E_INVAL) {
            fail_msg("accepted %s", bad[i]);
        }
        assert_int_equal(u.port, 4242);
    }
    assert_int_equal(http__parse_listen_url(NULL, &u), AGENT_E_INVAL);
}

static void test_http_proto_head(void **state)
{
    (void)state;
    char date[30];
    assert_int_equal(http__format_date((time_t)784111777, date), 0);
    assert_string_equal(date, "Sun, 06 Nov 1994 08:49:37 GMT");
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(http__head_begin(&b, 200, date, "text/plain"), 0);
    assert_int_equal(http__head_field(&b, "X-A", "v\tw"), 0);
    assert_int_equal(http__head_end(&b, HTTP_FRAME_LENGTH, 12, HTTP_CONN_CLOSE), 0);
    assert_string_equal(buf_cstr(&b), "HTTP/1.1 200 OK\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                                      "Content-Type: text/plain\r\nX-A: v\tw\r\n"
                                      "Content-Length: 12\r\nConnection: close\r\n\r\n");
    buf_reset(&b);
    assert_int_equal(http__head_begin(&b, 206, date, NULL), 0);
    assert_int_equal(http__head_end(&b, HTTP_FRAME_CHUNKED, 0, HTTP_CONN_KEEP_ALIVE), 0);
    assert_string_equal(buf_cstr(&b),
                        "HTTP/1.1 206 Partial Content\r\n"
                        "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                        "Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n");
    assert_int_equal(http__head_begin(&b, 99, date, NULL), AGENT_E_INVAL);
    assert_int_equal(http__head_begin(&b, 600, date, NULL), AGENT_E_INVAL);
    assert_int_equal(http__head_begin(&b, 200, date, "text/plain\r\nX: y"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "X-A", "a\r\nInjected: 1"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "X-A", "a\nb"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "Bad Name", "v"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "", "v"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "Content-Length", "1"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "transfer-encoding", "chunked"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, "Connection", "close"), AGENT_E_INVAL);
    assert_int_equal(http__head_field(&b, NULL, "v"), AGENT_E_INVAL);
    buf_reset(&b);
    assert_int_equal(http__chunk_prefix(&b, 500), 0);
    assert_string_equal(buf_cstr(&b), "1f4\r\n");
    assert_string_equal(http__reason_phrase(431), "Request Header Fields Too Large");
    assert_string_equal(http__reason_phrase(42), "Unknown");
    assert_true(http__is_token("X-Custom_1.a~!", 14));
    assert_false(http__is_token("a:b", 3));
    assert_false(http__is_token("", 0));
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_query_get_decodes),
        cmocka_unit_test(test_http_query_get_malformed),
        cmocka_unit_test(test_http_query_get_duplicates),
        cmocka_unit_test(test_http_query_check_names),
        cmocka_unit_test(test_http_query_path_decode),
        cmocka_unit_test(test_http_query_problem_json),
        cmocka_unit_test(test_http_proto_split_target),
        cmocka_unit_test(test_http_proto_listen_url),
        cmocka_unit_test(test_http_proto_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
