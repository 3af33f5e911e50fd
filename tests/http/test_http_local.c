/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "http_server.h"

/*
 * Local requests (http_server.h): a handler answers a request made inside dotmon, and the
 * response goes to a sink. No socket: each test runs its own loop until the request is over, and
 * teardown asserts uv_loop_close() == 0, so a request that is never freed (its idle handle) fails.
 *
 * Every sink callback appends a letter to tc->seq, and so do the handler's drain and abort
 * callbacks, so a test states the whole order of what happened: H head, B body, E on_end(true),
 * e on_end(false), D drain, A abort. g_in_http is set while test code makes http_* calls (the
 * handler, its callbacks, the caller's cancel): a sink callback that runs then is re-entrant.
 */

#define WATCHDOG_MS 10000

static int g_in_http;     /* inside an http_* call made by a handler or a caller */
static int g_in_callback; /* inside a sink callback */

struct tcase;
typedef void (*handler_fn)(struct tcase *tc, struct http_request *r);

struct tcase {
    uv_loop_t loop;
    uv_timer_t watchdog;
    uv_check_t check; /* optional: runs after the turn's idle callbacks */
    bool check_on;
    bool timed_out;
    struct http_request *r;  /* the caller's pointer, until on_end */
    struct http_request *hr; /* the handler's, until it finishes or its abort callback ran */
    char seq[128];
    size_t nseq;
    /* what the sink saw */
    int status;
    char ctype[128];
    bool ctype_null;
    struct buf hdrs; /* "Name: value\n" per header */
    struct buf body;
    unsigned refuse_at; /* refuse the n-th on_body (1-based); 0: never */
    unsigned bodies;
    unsigned ends;
    bool cancel_in_head; /* the sink cancels from on_head */
    /* handler side */
    unsigned drains;
    unsigned aborts;
    int rc_in_abort[3]; /* write, respond, end from inside the abort callback */
    int rc_after_lost[3];
    bool tried_after_lost;
    void (*on_end_hook)(struct tcase *tc);
    struct tcase *nested; /* a second request made from on_end (test_http_local_nested) */
};

static void note(struct tcase *tc, char c)
{
    assert_true(tc->nseq + 1 < sizeof(tc->seq));
    tc->seq[tc->nseq++] = c;
    tc->seq[tc->nseq] = '\0';
}

/* ---- sink ---- */

static void sink_on_head(void *ud, int status, const char *content_type,
                         const struct http_header *h, size_t n)
{
    struct tcase *tc = ud;
    assert_int_equal(g_in_http, 0);
    g_in_callback++;
    note(tc, 'H');
    tc->status = status;
    tc->ctype_null = content_type == NULL;
    snprintf(tc->ctype, sizeof(tc->ctype), "%s", content_type != NULL ? content_type : "");
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(buf_printf(&tc->hdrs, "%s: %s\n", h[i].name, h[i].value), 0);
    }
    if (tc->cancel_in_head) {
        http_local_cancel(tc->r);
    }
    g_in_callback--;
}

static int sink_on_body(void *ud, const void *data, size_t len)
{
    struct tcase *tc = ud;
    assert_int_equal(g_in_http, 0);
    assert_true(len > 0);
    note(tc, 'B');
    tc->bodies++;
    if (tc->refuse_at != 0 && tc->bodies == tc->refuse_at) {
        return 1;
    }
    g_in_callback++;
    assert_int_equal(buf_append(&tc->body, data, len), 0);
    g_in_callback--;
    return 0;
}

static void sink_on_end(void *ud, bool complete)
{
    struct tcase *tc = ud;
    assert_int_equal(g_in_http, 0);
    note(tc, complete ? 'E' : 'e');
    tc->ends++;
    g_in_callback++;
    http_local_cancel(tc->r); /* during on_end: nothing happens */
    g_in_callback--;
    tc->r = NULL;
    if (tc->on_end_hook != NULL) {
        tc->on_end_hook(tc);
    }
}

static const struct http_local_sink sink = {sink_on_head, sink_on_body, sink_on_end};

/* ---- fixture ---- */

static void watchdog_on_timer(uv_timer_t *t)
{
    struct tcase *tc = t->data;
    tc->timed_out = true;
    uv_stop(&tc->loop);
}

static int setup(void **state)
{
    struct tcase *tc = calloc(1, sizeof(*tc));
    assert_non_null(tc);
    assert_int_equal(uv_loop_init(&tc->loop), 0);
    assert_int_equal(uv_timer_init(&tc->loop, &tc->watchdog), 0);
    tc->watchdog.data = tc;
    assert_int_equal(uv_timer_start(&tc->watchdog, watchdog_on_timer, WATCHDOG_MS, 0), 0);
    uv_unref((uv_handle_t *)&tc->watchdog); /* the loop ends when the requests are over */
    buf_init(&tc->hdrs, 0);
    buf_init(&tc->body, 0);
    *state = tc;
    return 0;
}

static int teardown(void **state)
{
    struct tcase *tc = *state;
    uv_close((uv_handle_t *)&tc->watchdog, NULL);
    if (tc->check_on) {
        uv_close((uv_handle_t *)&tc->check, NULL);
    }
    uv_run(&tc->loop, UV_RUN_DEFAULT);
    /* Every local request closed its handle: none was left behind. */
    assert_int_equal(uv_loop_close(&tc->loop), 0);
    buf_fini(&tc->hdrs);
    buf_fini(&tc->body);
    free(tc->nested);
    free(tc);
    return 0;
}

static void run(struct tcase *tc)
{
    uv_run(&tc->loop, UV_RUN_DEFAULT);
    assert_false(tc->timed_out);
}

/* Makes a local request and hands it to handler, as the MCP endpoint will. */
static void start_on(struct tcase *tc, uv_loop_t *loop, const char *method, const char *target,
                     handler_fn handler)
{
    static const struct http_header hdrs[] = {
        {"Host", "localhost"}, {"Authorization", "Bearer x"}, {"X-Two", "1"}, {"x-two", "2"}};
    struct http_request *r = NULL;
    assert_int_equal(http_local_new(loop, method, target, hdrs, 4, "req-body", 8, 7, &sink, tc, &r),
                     0);
    assert_non_null(r);
    tc->r = r;
    tc->hr = r;
    g_in_http++;
    handler(tc, r);
    g_in_http--;
    assert_int_equal(tc->nseq, 0); /* nothing reached the sink inside the handler call */
}

static void start(struct tcase *tc, const char *method, const char *target, handler_fn handler)
{
    start_on(tc, &tc->loop, method, target, handler);
}

static void cancel(struct tcase *tc)
{
    g_in_http++;
    http_local_cancel(tc->r);
    g_in_http--;
}

/* ---- handlers ---- */

static void h_respond(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    const struct http_header extra[] = {{"X-A", "1"}};
    assert_int_equal(http_respond(r, 200, "text/plain", extra, 1, "hello", 5), 0);
}

static void h_keep(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    (void)r; /* answers later, or never */
}

static void on_abort(void *ud, struct http_request *r)
{
    struct tcase *tc = ud;
    assert_int_equal(g_in_callback, 0);
    assert_ptr_equal(r, tc->hr);
    g_in_http++;
    note(tc, 'A');
    tc->aborts++;
    tc->rc_in_abort[0] = http_stream_write(r, "x", 1);
    tc->rc_in_abort[1] = http_respond(r, 200, NULL, NULL, 0, NULL, 0);
    tc->rc_in_abort[2] = http_stream_end(r);
    http_stream_abort(r); /* does nothing inside */
    tc->hr = NULL;
    g_in_http--;
}

static void h_keep_abortable(struct tcase *tc, struct http_request *r)
{
    http_request_on_abort(r, on_abort, tc);
}

/* Writes "g", then "h" from the drain callback, then ends (as GET /metrics renders). */
static void on_drain(void *ud, struct http_request *r)
{
    struct tcase *tc = ud;
    assert_int_equal(g_in_callback, 0);
    assert_ptr_equal(r, tc->hr);
    g_in_http++;
    note(tc, 'D');
    tc->drains++;
    if (tc->drains == 1) {
        assert_int_equal(http_stream_write(r, "g", 1), 0);
    } else if (tc->drains == 2) {
        char *owned = malloc(1);
        assert_non_null(owned);
        owned[0] = 'h';
        assert_int_equal(http_stream_write_owned(r, owned, owned, 1), 0);
    } else {
        http_request_on_abort(r, NULL, NULL);
        assert_int_equal(http_stream_end(r), 0);
        tc->hr = NULL;
    }
    g_in_http--;
}

static void h_stream(struct tcase *tc, struct http_request *r)
{
    const struct http_header extra[] = {{"Content-Disposition", "attachment"}};
    assert_int_equal(http_request_add_header(r, "Vary", "Origin"), 0);
    assert_int_equal(http_stream_begin(r, 200, "application/octet-stream", extra, 1), 0);
    assert_int_equal(http_request_add_header(r, "X-Late", "1"), AGENT_E_INVAL);
    assert_int_equal(http_stream_begin(r, 200, NULL, NULL, 0), AGENT_E_INVAL);
    assert_false(http_stream_can_sendfile(r));
    assert_int_equal(http_stream_sendfile(r, 0, 0, 10, NULL, NULL), AGENT_E_INVAL);
    assert_int_equal(http_stream_pending(r), 0);
    assert_int_equal(http_stream_write_now(r, "zz", 2), 0); /* the caller queues instead */
    assert_int_equal(http_stream_write(r, "abc", 3), 0);
    assert_int_equal(http_stream_write(r, "", 0), 0);
    char *owned = malloc(8);
    assert_non_null(owned);
    memcpy(owned, "xdefx", 5);
    assert_int_equal(http_stream_write_owned(r, owned, owned + 1, 3), 0);
    assert_int_equal(http_stream_pending(r), 0);
    http_request_on_abort(r, on_abort, tc);
    http_stream_on_drain(r, 0, on_drain, tc);
}

static void h_stream_abort(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_stream_begin(r, 200, "text/plain", NULL, 0), 0);
    assert_int_equal(http_stream_write(r, "part", 4), 0);
    http_stream_abort(r);
}

static void h_head_stream(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_stream_begin(r, 200, "text/plain", NULL, 0), 0);
    assert_int_equal(http_stream_write(r, "abc", 3), 0);
    char *owned = malloc(3);
    assert_non_null(owned);
    assert_int_equal(http_stream_write_owned(r, owned, owned, 3), 0); /* released */
    assert_int_equal(http_stream_end(r), 0);
}

static void h_add_header(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_request_add_header(r, "Vary", "Origin"), 0);
    assert_int_equal(http_request_add_header(r, "Access-Control-Allow-Origin", "*"), 0);
    assert_int_equal(http_request_add_header(r, "X-Empty", ""), 0);
    assert_int_equal(http_request_add_header(r, "Content-Length", "3"), AGENT_E_INVAL);
    assert_int_equal(http_request_add_header(r, "X-Bad", "a\r\nb: c"), AGENT_E_INVAL);
    assert_int_equal(http_request_add_header(r, "Bad Name", "x"), AGENT_E_INVAL);
    const struct http_header extra[] = {{"X-A", "1"}};
    assert_int_equal(http_respond(r, 201, NULL, extra, 1, "{}", 2), 0);
}

static void h_bad_managed(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    const struct http_header extra[] = {{"Content-Length", "5"}};
    assert_int_equal(http_respond(r, 200, "text/plain", extra, 1, "hello", 5), AGENT_E_INVAL);
}

static void h_bad_crlf(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_request_add_header(r, "Vary", "Origin"), 0);
    const struct http_header extra[] = {{"X-A", "a\r\nSet-Cookie: x"}};
    assert_int_equal(http_respond(r, 200, NULL, extra, 1, "hello", 5), AGENT_E_INVAL);
}

static void h_bad_status(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_respond(r, 99, NULL, NULL, 0, "x", 1), AGENT_E_INVAL);
}

static void h_bad_stream_begin(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    const struct http_header extra[] = {{"Transfer-Encoding", "chunked"}};
    assert_int_equal(http_stream_begin(r, 200, NULL, extra, 1), AGENT_E_INVAL);
    assert_int_equal(http_stream_begin(r, 204, NULL, NULL, 0), AGENT_E_INVAL);
    assert_int_equal(http_stream_begin(r, 700, NULL, NULL, 0), AGENT_E_INVAL);
    assert_int_equal(http_stream_write(r, "x", 1), AGENT_E_INVAL); /* not streaming */
    /* The handler still owns r: it answers. */
    assert_int_equal(http_respond(r, 404, "text/plain", NULL, 0, "no", 2), 0);
}

static void h_respond_after_begin(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_stream_begin(r, 200, NULL, NULL, 0), 0);
    assert_int_equal(http_respond(r, 200, NULL, NULL, 0, "x", 1), AGENT_E_INVAL); /* cut */
}

static void h_no_content(struct tcase *tc, struct http_request *r)
{
    (void)tc;
    assert_int_equal(http_respond(r, 204, NULL, NULL, 0, "ignored", 7), 0);
}

static void h_stream_two(struct tcase *tc, struct http_request *r)
{
    assert_int_equal(http_stream_begin(r, 200, NULL, NULL, 0), 0);
    assert_int_equal(http_stream_write(r, "one", 3), 0);
    assert_int_equal(http_stream_write(r, "two", 3), 0);
    http_request_on_abort(r, on_abort, tc);
    http_stream_on_drain(r, 0, on_drain, tc); /* must not run once the sink is gone */
}

/* ---- tests ---- */

static void test_http_local_respond(void **state)
{
    struct tcase *tc = *state;
    struct http_request *r = NULL;
    assert_int_equal(http_local_new(&tc->loop, "GET", "/api/x%20y?pid=1&a=b", NULL, 0, NULL, 0, 3,
                                    &sink, tc, &r),
                     0);
    uint64_t first_id = http_request_id(r);
    http_local_cancel(r); /* ends it: no handler here */
    run(tc);
    assert_string_equal(tc->seq, "e");
    tc->nseq = 0;
    tc->seq[0] = '\0';

    start(tc, "GET", "/api/x%20y?pid=1&a=b", h_respond);
    r = tc->r;
    assert_true(http_request_is_local(r));
    assert_false(http_request_is_tls(r));
    assert_string_equal(http_request_method(r), "GET");
    assert_string_equal(http_request_target(r), "/api/x%20y?pid=1&a=b");
    assert_string_equal(http_request_path(r), "/api/x%20y");
    assert_string_equal(http_request_query(r), "pid=1&a=b");
    assert_string_equal(http_request_header(r, "authorization"), "Bearer x");
    assert_string_equal(http_request_header(r, "X-TWO"), "1");
    assert_int_equal(http_request_header_count(r, "x-two"), 2);
    assert_null(http_request_header(r, "Cookie"));
    size_t len = 0;
    const uint8_t *body = http_request_body(r, &len);
    assert_int_equal(len, 8);
    assert_memory_equal(body, "req-body", 8);
    assert_int_equal(http_request_tag(r), 7);
    assert_true(http_request_id(r) > first_id);
    run(tc);
    assert_string_equal(tc->seq, "HBE");
    assert_int_equal(tc->status, 200);
    assert_string_equal(tc->ctype, "text/plain");
    assert_string_equal(buf_cstr(&tc->hdrs), "X-A: 1\n");
    assert_string_equal(buf_cstr(&tc->body), "hello");
    assert_null(tc->r);
}

static void test_http_local_stream(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/trace", h_stream);
    run(tc);
    /* One turn: head and both pieces, then the drain writes "g"; one turn per piece after. */
    assert_string_equal(tc->seq, "HBBDBDBDE");
    assert_int_equal(tc->status, 200);
    assert_string_equal(tc->ctype, "application/octet-stream");
    assert_string_equal(buf_cstr(&tc->hdrs), "Content-Disposition: attachment\nVary: Origin\n");
    assert_string_equal(buf_cstr(&tc->body), "abcdefgh");
    assert_int_equal(tc->aborts, 0);
}

static void test_http_local_stream_abort(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/trace", h_stream_abort);
    run(tc);
    assert_string_equal(tc->seq, "HBe"); /* what was queued, then the cut */
    assert_string_equal(buf_cstr(&tc->body), "part");
}

static void test_http_local_head(void **state)
{
    struct tcase *tc = *state;
    start(tc, "HEAD", "/info", h_respond);
    run(tc);
    assert_string_equal(tc->seq, "HE");
    assert_int_equal(tc->status, 200);
    assert_string_equal(buf_cstr(&tc->hdrs), "X-A: 1\n");

    tc->nseq = 0;
    tc->seq[0] = '\0';
    start(tc, "HEAD", "/trace", h_head_stream);
    run(tc);
    assert_string_equal(tc->seq, "HE");
    assert_int_equal(buf_size(&tc->body), 0);
}

static void test_http_local_add_header(void **state)
{
    struct tcase *tc = *state;
    start(tc, "POST", "/x", h_add_header);
    run(tc);
    assert_string_equal(tc->seq, "HBE");
    assert_int_equal(tc->status, 201);
    assert_true(tc->ctype_null);
    assert_string_equal(buf_cstr(&tc->hdrs),
                        "X-A: 1\nVary: Origin\nAccess-Control-Allow-Origin: *\nX-Empty: \n");
}

/* An invalid response: the sink gets the 500 a network client gets instead. */
static void check_500(struct tcase *tc, handler_fn h, const char *method, const char *seq,
                      const char *hdrs)
{
    tc->nseq = 0;
    tc->seq[0] = '\0';
    buf_reset(&tc->hdrs);
    buf_reset(&tc->body);
    start(tc, method, "/x", h);
    run(tc);
    assert_string_equal(tc->seq, seq);
    assert_int_equal(tc->status, 500);
    assert_string_equal(tc->ctype, "application/problem+json");
    assert_string_equal(buf_cstr(&tc->hdrs), hdrs);
    if (strcmp(seq, "HBE") == 0) {
        assert_non_null(strstr(buf_cstr(&tc->body), "invalid response"));
    }
}

static void test_http_local_invalid_response(void **state)
{
    struct tcase *tc = *state;
    check_500(tc, h_bad_managed, "GET", "HBE", "");
    check_500(tc, h_bad_crlf, "GET", "HBE", "Vary: Origin\n");
    check_500(tc, h_bad_status, "GET", "HBE", "");
    check_500(tc, h_bad_status, "HEAD", "HE", "");

    tc->nseq = 0;
    tc->seq[0] = '\0';
    buf_reset(&tc->body);
    start(tc, "GET", "/x", h_bad_stream_begin);
    run(tc);
    assert_string_equal(tc->seq, "HBE");
    assert_int_equal(tc->status, 404);

    tc->nseq = 0;
    tc->seq[0] = '\0';
    start(tc, "GET", "/x", h_respond_after_begin);
    run(tc);
    assert_string_equal(tc->seq, "He");

    tc->nseq = 0;
    tc->seq[0] = '\0';
    buf_reset(&tc->body);
    start(tc, "GET", "/x", h_no_content);
    run(tc);
    assert_string_equal(tc->seq, "HE");
    assert_int_equal(tc->status, 204);
}

/* Runs after the idle callbacks of a turn: the handler writing once the sink has refused, before
 * its abort callback has run. */
static void check_on_turn(uv_check_t *h)
{
    struct tcase *tc = h->data;
    if (tc->tried_after_lost || tc->bodies == 0 || tc->hr == NULL) {
        return;
    }
    tc->tried_after_lost = true;
    g_in_http++;
    tc->rc_after_lost[0] = http_stream_write(tc->hr, "late", 4);
    char *owned = malloc(4);
    assert_non_null(owned);
    tc->rc_after_lost[1] = http_stream_write_owned(tc->hr, owned, owned, 4); /* freed */
    tc->rc_after_lost[2] = http_stream_write_now(tc->hr, "late", 4);
    g_in_http--;
}

static void test_http_local_sink_refuses(void **state)
{
    struct tcase *tc = *state;
    tc->refuse_at = 1;
    assert_int_equal(uv_check_init(&tc->loop, &tc->check), 0);
    tc->check.data = tc;
    tc->check_on = true;
    assert_int_equal(uv_check_start(&tc->check, check_on_turn), 0);
    uv_unref((uv_handle_t *)&tc->check);
    start(tc, "GET", "/trace", h_stream_two);
    run(tc);
    /* "two" is dropped, no drain; the abort callback on a later turn, then the cut. */
    assert_string_equal(tc->seq, "HBAe");
    assert_int_equal(tc->drains, 0);
    assert_true(tc->tried_after_lost);
    assert_int_equal(tc->rc_after_lost[0], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_after_lost[1], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_after_lost[2], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_in_abort[0], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_in_abort[1], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_in_abort[2], AGENT_E_CLOSED);
}

static void test_http_local_sink_refuses_after_end(void **state)
{
    struct tcase *tc = *state;
    tc->refuse_at = 1;
    start(tc, "GET", "/x", h_respond);
    run(tc);
    assert_string_equal(tc->seq, "HBe"); /* the handler had finished: no abort callback */
    assert_int_equal(tc->aborts, 0);
}

static void test_http_local_cancel_before_answer(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/x", h_keep_abortable);
    cancel(tc);
    cancel(tc); /* again: nothing */
    assert_int_equal(tc->nseq, 0);
    run(tc);
    assert_string_equal(tc->seq, "Ae");
    assert_int_equal(tc->rc_in_abort[0], AGENT_E_INVAL); /* not streaming */
    assert_int_equal(tc->rc_in_abort[1], AGENT_E_CLOSED);
    assert_int_equal(tc->rc_in_abort[2], AGENT_E_INVAL);

    /* Without an abort callback the request just ends. */
    tc->nseq = 0;
    tc->seq[0] = '\0';
    start(tc, "GET", "/x", h_keep);
    cancel(tc);
    run(tc);
    assert_string_equal(tc->seq, "e");
}

static void test_http_local_cancel_then_respond(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/x", h_keep_abortable);
    cancel(tc);
    /* The handler answers before its abort callback ran: as on a closed connection, the call
     * fails and finishes the request, and no abort callback follows. */
    g_in_http++;
    assert_int_equal(http_respond(tc->hr, 200, NULL, NULL, 0, "x", 1), AGENT_E_CLOSED);
    g_in_http--;
    run(tc);
    assert_string_equal(tc->seq, "e");
    assert_int_equal(tc->aborts, 0);
}

static void test_http_local_cancel_streaming(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/x", h_stream_two);
    cancel(tc); /* the queued head and pieces go */
    run(tc);
    assert_string_equal(tc->seq, "Ae");
    assert_int_equal(tc->drains, 0);
}

static void test_http_local_cancel_from_sink(void **state)
{
    struct tcase *tc = *state;
    tc->cancel_in_head = true;
    start(tc, "GET", "/x", h_stream_two);
    run(tc);
    assert_string_equal(tc->seq, "HAe");
    assert_int_equal(tc->drains, 0);
}

static void test_http_local_cancel_after_end(void **state)
{
    struct tcase *tc = *state;
    start(tc, "GET", "/x", h_respond);
    cancel(tc); /* the handler has finished: everything queued is delivered */
    run(tc);
    assert_string_equal(tc->seq, "HBE");
    assert_string_equal(buf_cstr(&tc->body), "hello");

    tc->nseq = 0;
    tc->seq[0] = '\0';
    tc->cancel_in_head = true;
    start(tc, "GET", "/x", h_respond);
    run(tc);
    assert_string_equal(tc->seq, "HBE");
}

/* From on_end: another local request, then the first one's state is gone. */
static void nested_on_end(struct tcase *tc)
{
    struct tcase *n = calloc(1, sizeof(*n));
    assert_non_null(n);
    buf_init(&n->hdrs, 0);
    buf_init(&n->body, 0);
    tc->nested = n;
    tc->on_end_hook = NULL;
    start_on(n, &tc->loop, "GET", "/second", h_respond);
}

static void test_http_local_nested(void **state)
{
    struct tcase *tc = *state;
    tc->on_end_hook = nested_on_end;
    start(tc, "GET", "/first", h_respond);
    run(tc);
    assert_string_equal(tc->seq, "HBE");
    assert_non_null(tc->nested);
    assert_string_equal(tc->nested->seq, "HBE");
    assert_string_equal(buf_cstr(&tc->nested->body), "hello");
    buf_fini(&tc->nested->hdrs);
    buf_fini(&tc->nested->body);
}

static void test_http_local_new_invalid(void **state)
{
    struct tcase *tc = *state;
    uv_loop_t *loop = &tc->loop;
    struct http_request *r = NULL;
    const struct http_header bad_name[] = {{"Bad Name", "x"}};
    const struct http_header bad_value[] = {{"X-A", "a\nb"}};
    const struct http_header null_value[] = {{"X-A", NULL}};
    const struct http_local_sink no_body = {sink_on_head, NULL, sink_on_end};
    int inval = AGENT_E_INVAL;
    assert_int_equal(http_local_new(NULL, "GET", "/", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "G T", "/", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "", "/", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "x", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "/a b", NULL, 0, NULL, 0, 0, &sink, tc, &r),
                     inval);
    assert_int_equal(http_local_new(loop, "GET", "*", NULL, 0, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "/", bad_name, 1, NULL, 0, 0, &sink, tc, &r),
                     inval);
    assert_int_equal(http_local_new(loop, "GET", "/", bad_value, 1, NULL, 0, 0, &sink, tc, &r),
                     inval);
    assert_int_equal(http_local_new(loop, "GET", "/", null_value, 1, NULL, 0, 0, &sink, tc, &r),
                     inval);
    assert_int_equal(http_local_new(loop, "GET", "/", NULL, 1, NULL, 0, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "/", NULL, 0, NULL, 3, 0, &sink, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "/", NULL, 0, NULL, 0, 0, &no_body, tc, &r),
                     inval);
    assert_int_equal(http_local_new(loop, "GET", "/", NULL, 0, NULL, 0, 0, NULL, tc, &r), inval);
    assert_int_equal(http_local_new(loop, "GET", "/", NULL, 0, NULL, 0, 0, &sink, tc, NULL), inval);
    assert_null(r);
    assert_false(http_request_is_local(NULL));
    http_local_cancel(NULL);

    /* The forms a request line may take: absolute-form ("/" when it has no path), asterisk-form
     * for OPTIONS. */
    assert_int_equal(
        http_local_new(loop, "GET", "http://host?q=1", NULL, 0, NULL, 0, 0, &sink, tc, &r), 0);
    assert_string_equal(http_request_path(r), "/");
    assert_string_equal(http_request_query(r), "q=1");
    size_t len = 1;
    http_request_body(r, &len);
    assert_int_equal(len, 0);
    tc->r = r;
    cancel(tc);
    run(tc);
    assert_int_equal(http_local_new(loop, "OPTIONS", "*", NULL, 0, NULL, 0, 0, &sink, tc, &r), 0);
    assert_string_equal(http_request_method(r), "OPTIONS");
    tc->r = r;
    cancel(tc);
    run(tc);
    assert_string_equal(tc->seq, "ee");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_local_respond, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_stream_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_head, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_add_header, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_invalid_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_sink_refuses, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_sink_refuses_after_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_cancel_before_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_cancel_then_respond, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_cancel_streaming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_cancel_from_sink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_cancel_after_end, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_nested, setup, teardown),
        cmocka_unit_test_setup_teardown(test_http_local_new_invalid, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
