/* SPDX-License-Identifier: MIT */
/*
 * The pure request parser (http/http_parse.c): good requests, every rule of the request-head
 * policy, pipelining, and the same outcome whatever the input split (whole, one byte at a time,
 * odd chunks). The bad_http corpus is replayed through it too: no record may yield a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bad_http_corpus.h"
#include "buf.h"
#include "http_parse.h"

/* dotmon's defaults (http_server.h), as the corpus expects. */
static const struct http_parse_limits default_limits = {
    .max_url = 8192,
    .max_header_bytes = 32768,
    .max_headers = 100,
    .max_body = 1024 * 1024,
    .max_chunk_ext = 4096,
};

/* What a run saw, in order: one line per event, so two runs compare with one strcmp. */
struct run {
    char log[4096];
    size_t len;
    int status;         /* of the refusal, 0 if none */
    const char *detail; /* of the refusal */
    struct http_msg *msgs[8];
    size_t nmsgs;
    bool more; /* the run ended wanting more bytes */
};

static void run_log(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void run_log(struct run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(r->log + r->len, sizeof(r->log) - r->len, fmt, ap);
    va_end(ap);
    assert_true(k >= 0 && (size_t)k < sizeof(r->log) - r->len);
    r->len += (size_t)k;
}

static void run_fini(struct run *r)
{
    for (size_t i = 0; i < r->nmsgs; i++) {
        http_msg_free(r->msgs[i]);
    }
    r->nmsgs = 0;
}

/* Feeds data[0..n) in pieces of `step` bytes (0: whole), serving every request at once. */
static void run_feed(struct run *r, const struct http_parse_limits *lim, const uint8_t *data,
                     size_t n, size_t step)
{
    memset(r, 0, sizeof(*r));
    struct http_parse p;
    http_parse_init(&p, lim);
    size_t off = 0;
    bool done = false;
    while (!done) {
        size_t end = step == 0 || n - off < step ? n : off + step;
        /* Bytes not consumed (behind a complete request) stay for the next call, as the
         * connection keeps them in its input buffer. */
        size_t pos = off;
        for (;;) {
            size_t used = 0;
            enum http_parse_event ev =
                http_parse_execute(&p, (const char *)data + pos, end - pos, &used);
            if (ev == HTTP_PARSE_ERROR) {
                r->status = http_parse_error(&p, &r->detail);
                run_log(r, "E %d %s\n", r->status, r->detail);
                done = true;
                break;
            }
            pos += used;
            if (ev == HTTP_PARSE_HEAD) {
                const struct http_msg *m = http_parse_msg(&p);
                assert_non_null(m);
                run_log(r, "H %s %s %zu%s\n", m->method, m->target, m->nheaders,
                        m->expect_continue ? " 100" : "");
                continue;
            }
            if (ev == HTTP_PARSE_MESSAGE) {
                struct http_msg *m = http_parse_take(&p);
                assert_non_null(m);
                assert_null(http_parse_take(&p));
                run_log(r, "M %s %zu %d\n", m->method, buf_size(&m->body), m->keep_alive);
                assert_true(r->nmsgs < sizeof(r->msgs) / sizeof(r->msgs[0]));
                r->msgs[r->nmsgs++] = m;
                continue;
            }
            assert_int_equal(pos, end);
            break;
        }
        off = end;
        if (!done && off == n) {
            r->more = true;
            run_log(r, "MORE\n");
            done = true;
        }
    }
    http_parse_fini(&p);
    http_parse_fini(&p); /* twice is fine */
}

/* Runs whole, byte by byte and in 7-byte pieces; all three must agree. Returns the whole run. */
static void run_all(struct run *whole, const struct http_parse_limits *lim, const char *req,
                    size_t n)
{
    run_feed(whole, lim, (const uint8_t *)req, n, 0);
    static const size_t steps[] = {1, 2, 7, 64};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        struct run split;
        run_feed(&split, lim, (const uint8_t *)req, n, steps[i]);
        if (strcmp(whole->log, split.log) != 0) {
            print_error("whole:\n%s\nsplit by %zu:\n%s\n", whole->log, steps[i], split.log);
            fail();
        }
        run_fini(&split);
    }
}

static void expect_status(const char *req, int status, const char *detail_part)
{
    struct run r;
    run_all(&r, &default_limits, req, strlen(req));
    if (r.status != status || r.nmsgs != 0 ||
        (detail_part != NULL && strstr(r.detail, detail_part) == NULL)) {
        print_error("request %s\nwanted %d (%s), got:\n%s", req, status,
                    detail_part ? detail_part : "", r.log);
        fail();
    }
    run_fini(&r);
}

static void test_http_parse_good_get(void **state)
{
    (void)state;
    const char *req = "GET /a/b%20c?x=1&y=2 HTTP/1.1\r\n"
                      "Host: localhost:52323\r\n"
                      "Accept:  application/json  \r\n"
                      "X-Empty:\r\n"
                      "\r\n";
    struct run r;
    run_all(&r, &default_limits, req, strlen(req));
    assert_string_equal(r.log, "H GET /a/b%20c?x=1&y=2 3\nM GET 0 1\nMORE\n");
    struct http_msg *m = r.msgs[0];
    assert_string_equal(m->method, "GET");
    assert_string_equal(m->target, "/a/b%20c?x=1&y=2");
    assert_string_equal(m->path, "/a/b%20c");
    assert_string_equal(m->query, "x=1&y=2");
    assert_int_equal(m->http_major, 1);
    assert_int_equal(m->http_minor, 1);
    assert_false(m->is_head);
    assert_true(m->keep_alive);
    assert_string_equal(http_msg_header(m, "accept"), "application/json"); /* trimmed */
    assert_string_equal(http_msg_header(m, "HOST"), "localhost:52323");
    assert_string_equal(http_msg_header(m, "x-empty"), "");
    assert_null(http_msg_header(m, "missing"));
    assert_int_equal(http_msg_header_count(m, "host"), 1);
    run_fini(&r);
}

static void test_http_parse_good_bodies(void **state)
{
    (void)state;
    struct run r;
    const char *post = "POST /trace?pid=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n"
                       "Content-Type: application/json\r\n\r\n{\"a\":\"bcd\"}";
    run_all(&r, &default_limits, post, strlen(post));
    assert_string_equal(r.log, "H POST /trace?pid=1 3\nM POST 11 1\nMORE\n");
    assert_memory_equal(buf_data(&r.msgs[0]->body), "{\"a\":\"bcd\"}", 11);
    run_fini(&r);

    const char *chunked = "PUT /x HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
    run_all(&r, &default_limits, chunked, strlen(chunked));
    assert_string_equal(r.log, "H PUT /x 2\nM PUT 11 1\nMORE\n");
    assert_memory_equal(buf_data(&r.msgs[0]->body), "hello world", 11);
    assert_null(http_msg_header(r.msgs[0], "x-trailer")); /* trailers are not headers */
    run_fini(&r);

    const char *head = "HEAD / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n";
    run_all(&r, &default_limits, head, strlen(head));
    assert_string_equal(r.log, "H HEAD / 1\nM HEAD 0 1\nMORE\n");
    assert_true(r.msgs[0]->is_head);
    assert_int_equal(r.msgs[0]->http_minor, 0);
    run_fini(&r);

    /* HTTP/1.0 without keep-alive; absolute-form and asterisk-form targets; Upgrade ignored. */
    const char *old = "GET http://h:1 HTTP/1.0\r\n\r\n";
    run_all(&r, &default_limits, old, strlen(old));
    assert_string_equal(r.log, "H GET http://h:1 0\nM GET 0 0\nMORE\n");
    assert_string_equal(r.msgs[0]->path, "/");
    run_fini(&r);
    const char *star = "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n";
    run_all(&r, &default_limits, star, strlen(star));
    assert_string_equal(r.log, "H OPTIONS * 1\nM OPTIONS 0 1\nMORE\n");
    run_fini(&r);
    const char *up =
        "GET / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n"
        "GET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
    run_all(&r, &default_limits, up, strlen(up));
    assert_string_equal(r.log, "H GET / 3\nM GET 0 1\nH GET /2 1\nM GET 0 1\nMORE\n");
    run_fini(&r);
}

static void test_http_parse_expect(void **state)
{
    (void)state;
    struct run r;
    const char *req = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\n"
                      "Content-Length: 2\r\n\r\nok";
    run_all(&r, &default_limits, req, strlen(req));
    assert_string_equal(r.log, "H POST / 3 100\nM POST 2 1\nMORE\n");
    run_fini(&r);
    /* No body, or HTTP/1.0: nothing to wait for. */
    const char *nobody = "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\n\r\n";
    run_all(&r, &default_limits, nobody, strlen(nobody));
    assert_string_equal(r.log, "H POST / 2\nM POST 0 1\nMORE\n");
    run_fini(&r);
    expect_status("GET / HTTP/1.1\r\nHost: h\r\nExpect: something\r\n\r\n", 417,
                  "unsupported expectation");
}

/* The head arrives, then the parser waits for the body: the caller sends 100 Continue. */
static void test_http_parse_head_then_body(void **state)
{
    (void)state;
    struct http_parse p;
    http_parse_init(&p, &default_limits);
    assert_true(http_parse_idle(&p));
    assert_false(http_parse_started(&p));
    const char *head = "POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n";
    size_t used = 0;
    assert_int_equal(http_parse_execute(&p, "\r\n", 2, &used), HTTP_PARSE_MORE);
    assert_false(http_parse_idle(&p)); /* bytes of a head were seen */
    assert_int_equal(http_parse_execute(&p, head, 4, &used), HTTP_PARSE_MORE);
    assert_true(http_parse_started(&p));
    assert_int_equal(http_parse_execute(&p, head + 4, strlen(head) - 4, &used), HTTP_PARSE_HEAD);
    assert_int_equal(used, strlen(head) - 4);
    assert_null(http_parse_take(&p)); /* not complete yet */
    assert_int_equal(http_parse_execute(&p, "", 0, &used), HTTP_PARSE_MORE);
    assert_int_equal(http_parse_execute(&p, "abcGET", 6, &used), HTTP_PARSE_MESSAGE);
    assert_int_equal(used, 3);
    assert_false(http_parse_started(&p));
    struct http_msg *m = http_parse_take(&p);
    assert_non_null(m);
    assert_memory_equal(buf_data(&m->body), "abc", 3);
    http_msg_free(m);
    http_msg_free(NULL);
    assert_true(http_parse_idle(&p));
    /* The next request is not looked at until fed again. */
    assert_int_equal(http_parse_execute(&p, "GET", 3, &used), HTTP_PARSE_MORE);
    assert_true(http_parse_started(&p));
    assert_int_equal(http_parse_execute(&p, " / HTTP/1.1\r\n\r\n", 15, &used), HTTP_PARSE_ERROR);
    const char *detail = NULL;
    assert_int_equal(http_parse_error(&p, &detail), 400);
    assert_string_equal(detail, "missing Host header");
    /* Refused for good. */
    assert_int_equal(http_parse_execute(&p, "GET / HTTP/1.1\r\n", 16, &used), HTTP_PARSE_ERROR);
    assert_int_equal(http_parse_error(&p, NULL), 400);
    http_parse_fini(&p);
}

static void test_http_parse_pipelined(void **state)
{
    (void)state;
    const char *req = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n"
                      "POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx"
                      "HEAD /3 HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
                      "GET /4 HTT";
    struct run r;
    run_all(&r, &default_limits, req, strlen(req));
    assert_string_equal(r.log, "H GET /1 1\nM GET 0 1\nH POST /2 2\nM POST 1 1\n"
                               "H HEAD /3 2\nM HEAD 0 0\nMORE\n");
    assert_string_equal(r.msgs[1]->target, "/2");
    run_fini(&r);
    /* A bad request behind a good one: the good one is served, then the refusal. */
    const char *bad = "GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\n\r\n";
    run_all(&r, &default_limits, bad, strlen(bad));
    assert_string_equal(r.log, "H GET /1 1\nM GET 0 1\nE 400 missing Host header\n");
    run_fini(&r);
}

static void test_http_parse_header_rules(void **state)
{
    (void)state;
    expect_status("GET / HTTP/1.1\r\n\r\n", 400, "missing Host");
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", 400, "more than one Host");
    expect_status("GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", 400, "more than one Host");
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nName : v\r\n\r\n", 400, NULL);
    expect_status("GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", 400, NULL);
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400, "obsolete line folding");
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nX:\r\n b\r\n\r\n", 400, "obsolete line folding");
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", 400, NULL);
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", 400,
                  "invalid message framing header");
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", 400, NULL);
    expect_status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400,
                  "Transfer-Encoding in an HTTP/1.0 request");
    expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                  400, NULL);
    expect_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\n"
                  "Transfer-Encoding: chunked\r\n\r\n",
                  400, NULL);
    expect_status("GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", 400, NULL);
    /* Two Authorization headers are both kept: agent/ counts them and refuses with 400. */
    struct run r;
    const char *two = "GET / HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\r\n"
                      "authorization: Bearer y\r\n\r\n";
    run_all(&r, &default_limits, two, strlen(two));
    assert_int_equal(r.nmsgs, 1);
    assert_int_equal(http_msg_header_count(r.msgs[0], "Authorization"), 2);
    assert_string_equal(http_msg_header(r.msgs[0], "authorization"), "Bearer x");
    run_fini(&r);
}

static void test_http_parse_request_line_rules(void **state)
{
    (void)state;
    expect_status("CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", 405, "CONNECT");
    expect_status("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, NULL);
    expect_status("GET / HTTP/1.2\r\nHost: h\r\n\r\n", 505, NULL);
    expect_status("GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505, NULL);
    expect_status("GET / HTTP/1.x\r\nHost: h\r\n\r\n", 400, NULL);
    expect_status("GET /a#frag HTTP/1.1\r\nHost: h\r\n\r\n", 400, NULL);
    expect_status("GET a HTTP/1.1\r\nHost: h\r\n\r\n", 400, NULL);
    expect_status("GET /a{b} HTTP/1.1\r\nHost: h\r\n\r\n", 400, NULL);
    expect_status("G(T / HTTP/1.1\r\nHost: h\r\n\r\n", 400, NULL);
    expect_status("\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03", 400, NULL);
}

static char *repeat(const char *prefix, const char *unit, size_t count, const char *suffix)
{
    size_t pl = strlen(prefix), ul = strlen(unit), sl = strlen(suffix);
    char *s = malloc(pl + ul * count + sl + 1);
    assert_non_null(s);
    memcpy(s, prefix, pl);
    for (size_t i = 0; i < count; i++) {
        memcpy(s + pl + i * ul, unit, ul);
    }
    memcpy(s + pl + ul * count, suffix, sl + 1);
    return s;
}

static void test_http_parse_limits(void **state)
{
    (void)state;
    const struct http_parse_limits small = {
        .max_url = 32, .max_header_bytes = 64, .max_headers = 3, .max_body = 8, .max_chunk_ext = 8};
    struct run r;
    struct {
        const char *req;
        int status;
    } cases[] = {
        {"GET /0123456789012345678901234567890123 HTTP/1.1\r\nHost: h\r\n\r\n", 414},
        {"GET /01234567890123456789012345678 HTTP/1.1\r\nHost: h\r\n\r\n", 0}, /* 32: fits */
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", 431},
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", 0},
        {"GET / HTTP/1.1\r\nHost: h\r\nA: "
         "0123456789012345678901234567890123456789012345678901234\r\n\r\n",
         431},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9\r\n\r\n123456789", 413},
        {"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 8\r\n\r\n12345678", 0},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n12345\r\n"
         "4\r\n1234\r\n0\r\n\r\n",
         413},
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1;abcdefghij\r\n"
         "1\r\n0\r\n\r\n",
         400},
        /* Over a limit inside a token llhttp refuses further on: the limit, whatever the split
         * (fuzz_http_parse/regress-span-limit-before-llhttp-error). */
        {"GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nTransfer-Enc@oding: x\r\n\r\n", 431},
        {"GET /0123456789012345678901234567890123\x7f HTTP/1.1\r\nHost: h\r\n\r\n", 414},
        /* Trailers count against the header section. */
        {"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
         "T: 0123456789012345678901234567890123456789012345678901\r\n\r\n",
         431},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_all(&r, &small, cases[i].req, strlen(cases[i].req));
        if (r.status != cases[i].status || r.nmsgs != (cases[i].status ? 0u : 1u)) {
            print_error("case %zu: wanted %d, got:\n%s", i, cases[i].status, r.log);
            fail();
        }
        run_fini(&r);
    }
    /* Bytes no callback sees (CRLFs before a request) are bounded too, at the same byte
     * whatever the split: here a bad method comes after the limit. */
    char *flood = repeat("", "\r\n", 30000, "G(T / HTTP/1.1\r\n\r\n");
    run_all(&r, &default_limits, flood, strlen(flood));
    assert_int_equal(r.status, 431);
    assert_string_equal(r.detail, "request head too large");
    run_fini(&r);
    free(flood);
    /* Default limits: a URL of 8193 bytes is 414, 101 headers 431. */
    char *url = repeat("GET /", "a", 8192, " HTTP/1.1\r\nHost: h\r\n\r\n");
    expect_status(url, 414, "request target too long");
    free(url);
    char *many = repeat("GET / HTTP/1.1\r\nHost: h\r\n", "X: y\r\n", 100, "\r\n");
    expect_status(many, 431, "too many header fields");
    free(many);
}

/* Every record of the bad_http corpus: refused (or left incomplete) the same way whatever the
 * split, never a request, and the status the corpus expects. */
static int corpus_one(void *ud, const struct bad_http_record *rec)
{
    size_t *count = ud;
    struct run whole, split;
    run_feed(&whole, &default_limits, rec->data, rec->len, 0);
    size_t step = rec->len > 256 * 1024 ? 4093 : 1;
    run_feed(&split, &default_limits, rec->data, rec->len, step);
    bool ok = strcmp(whole.log, split.log) == 0 && whole.nmsgs == 0 &&
              bad_http_expect_ok(rec, whole.more ? 0 : whole.status);
    if (!ok) {
        print_error("%s:%d %s: whole:\n%s\nsplit:\n%s\n", rec->file, rec->line, rec->name,
                    whole.log, split.log);
    }
    run_fini(&whole);
    run_fini(&split);
    (*count)++;
    return ok ? 0 : 1;
}

static void test_http_parse_bad_http_corpus(void **state)
{
    (void)state;
    char dirbuf[4096];
    char err[512] = "";
    size_t count = 0;
    const char *dir = bad_http_corpus_dir(BAD_HTTP_DIR, dirbuf, sizeof(dirbuf));
    int rc = bad_http_corpus_foreach(dir, corpus_one, &count, err, sizeof(err));
    if (rc != 0) {
        print_error("corpus: %d %s\n", rc, err);
    }
    assert_int_equal(rc, 0);
    assert_true(count > 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_parse_good_get),
        cmocka_unit_test(test_http_parse_good_bodies),
        cmocka_unit_test(test_http_parse_expect),
        cmocka_unit_test(test_http_parse_head_then_body),
        cmocka_unit_test(test_http_parse_pipelined),
        cmocka_unit_test(test_http_parse_header_rules),
        cmocka_unit_test(test_http_parse_request_line_rules),
        cmocka_unit_test(test_http_parse_limits),
        cmocka_unit_test(test_http_parse_bad_http_corpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
