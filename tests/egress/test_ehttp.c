/* SPDX-License-Identifier: MIT */
/*
 * egress/ehttp on a private loop against a scripted server on 127.0.0.1:0 in the same loop: what
 * goes out on the wire, response framings (length, chunked, until close), split writes, the
 * failures (timeout, refused, malformed, over the cap, closed early), an answer that comes before
 * the body is through, and cancel. Every test ends with uv_loop_close() == 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <uv.h>

#include <cmocka.h>

#include "buf.h"
#include "ehttp.h"
#include "err.h"

struct srv {
    uv_loop_t *loop;
    uv_tcp_t listener;
    uv_tcp_t conn;
    bool conn_open;
    int port;
    const char *pieces[4]; /* the response, written in these pieces */
    size_t npieces;
    bool early;  /* answer as soon as the head is in */
    bool silent; /* never answer */
    bool answered;
    struct buf req;
};

struct result {
    int calls;
    int err;
    int status;
    char body[256];
    size_t body_len;
    char etag[64];
    char why[256];
};

struct fixture {
    uv_loop_t loop;
    uv_timer_t watchdog;
    struct srv srv;
    struct result res;
};

static void on_watchdog(uv_timer_t *t)
{
    (void)t;
    fail_msg("watchdog: the test did not finish in time");
}

static void on_srv_write(uv_write_t *w, int status)
{
    (void)status;
    free(w);
}

static void on_srv_shutdown(uv_shutdown_t *sd, int status)
{
    (void)status;
    free(sd);
}

static void srv_close_conn(struct srv *s)
{
    if (s->conn_open && !uv_is_closing((uv_handle_t *)&s->conn)) {
        uv_close((uv_handle_t *)&s->conn, NULL);
    }
}

static void srv_answer(struct srv *s)
{
    s->answered = true;
    for (size_t i = 0; i < s->npieces; i++) {
        uv_write_t *w = malloc(sizeof(*w));
        w->data = s;
        uv_buf_t b = uv_buf_init((char *)(uintptr_t)s->pieces[i], (unsigned)strlen(s->pieces[i]));
        assert_int_equal(uv_write(w, (uv_stream_t *)&s->conn, &b, 1, on_srv_write), 0);
    }
    /* uv_close would cancel queued writes: shut the write side down after them instead, and
     * close when the client does. */
    uv_shutdown_t *sd = malloc(sizeof(*sd));
    sd->data = s;
    assert_int_equal(uv_shutdown(sd, (uv_stream_t *)&s->conn, on_srv_shutdown), 0);
}

static void srv_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    (void)h;
    static char space[65536];
    (void)hint;
    *b = uv_buf_init(space, sizeof(space));
}

static void srv_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
    struct srv *s = st->data;
    if (n < 0) {
        srv_close_conn(s);
        return;
    }
    buf_append(&s->req, b->base, (size_t)n);
    const char *head_end = strstr(buf_cstr(&s->req), "\r\n\r\n");
    if (head_end == NULL || s->answered || s->silent) {
        return;
    }
    size_t head = (size_t)(head_end + 4 - buf_cstr(&s->req));
    const char *cl = strstr(buf_cstr(&s->req), "Content-Length: ");
    size_t want = cl != NULL ? strtoul(cl + 16, NULL, 10) : 0;
    if (s->early || buf_size(&s->req) >= head + want) {
        srv_answer(s);
    }
}

static void srv_on_conn(uv_stream_t *l, int status)
{
    struct srv *s = l->data;
    assert_int_equal(status, 0);
    assert_false(s->conn_open);
    uv_tcp_init(s->loop, &s->conn);
    s->conn.data = s;
    s->conn_open = true;
    assert_int_equal(uv_accept(l, (uv_stream_t *)&s->conn), 0);
    uv_read_start((uv_stream_t *)&s->conn, srv_alloc, srv_read);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    uv_loop_init(&f->loop);
    uv_timer_init(&f->loop, &f->watchdog);
    uv_timer_start(&f->watchdog, on_watchdog, 20000, 0);
    uv_unref((uv_handle_t *)&f->watchdog);
    struct srv *s = &f->srv;
    s->loop = &f->loop;
    buf_init(&s->req, 0);
    uv_tcp_init(&f->loop, &s->listener);
    s->listener.data = s;
    struct sockaddr_in a;
    uv_ip4_addr("127.0.0.1", 0, &a);
    assert_int_equal(uv_tcp_bind(&s->listener, (const struct sockaddr *)&a, 0), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&s->listener, 8, srv_on_conn), 0);
    struct sockaddr_storage ss;
    int len = sizeof(ss);
    uv_tcp_getsockname(&s->listener, (struct sockaddr *)&ss, &len);
    s->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
    *state = f;
    return 0;
}

static void close_any(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    uv_walk(&f->loop, close_any, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&f->loop), 0);
    buf_fini(&f->srv.req);
    free(f);
    return 0;
}

static void on_done(void *ud, int err, const struct ehttp_response *r, const char *why)
{
    struct fixture *f = ud;
    f->res.calls++;
    f->res.err = err;
    snprintf(f->res.why, sizeof(f->res.why), "%s", why);
    if (r != NULL) {
        f->res.status = r->status;
        f->res.body_len = r->body_len;
        memcpy(f->res.body, r->body, r->body_len < 255 ? r->body_len : 255);
        const char *e = ehttp_response_header(r, "etag");
        snprintf(f->res.etag, sizeof(f->res.etag), "%s", e != NULL ? e : "");
    }
    /* The exchange is over: stop serving so that the loop can end. */
    if (!uv_is_closing((uv_handle_t *)&f->srv.listener)) {
        uv_close((uv_handle_t *)&f->srv.listener, NULL);
    }
    srv_close_conn(&f->srv);
}

static void run(struct fixture *f, const char *method, const uint8_t *body, size_t n,
                uint64_t idle_ms, size_t max_body)
{
    const struct ehttp_header h[] = {{"Host", "h"}, {"X-Test", "1"}};
    struct ehttp_request rq = {
        method, "127.0.0.1", (uint16_t)f->srv.port, NULL, "/x?a=b", h, 2, body, n, idle_ms,
        0,      max_body};
    struct ehttp_conn *c = NULL;
    assert_int_equal(ehttp_start(&f->loop, &rq, on_done, f, &c), 0);
    assert_int_equal(f->res.calls, 0); /* never from inside ehttp_start */
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->res.calls, 1);
}

static void script(struct fixture *f, const char *a, const char *b, const char *c)
{
    f->srv.pieces[0] = a;
    f->srv.pieces[1] = b;
    f->srv.pieces[2] = c;
    f->srv.npieces = c != NULL ? 3 : (b != NULL ? 2 : 1);
}

static void test_ehttp_request_and_length_response(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 200 OK\r\nETa", "g: \"abc\"\r\nContent-Length: 5\r\n\r\nhe", "llo");
    run(f, "PUT", (const uint8_t *)"hello", 5, 5000, 1024);
    assert_int_equal(f->res.err, 0);
    assert_int_equal(f->res.status, 200);
    assert_int_equal(f->res.body_len, 5);
    assert_memory_equal(f->res.body, "hello", 5);
    assert_string_equal(f->res.etag, "\"abc\"");
    assert_string_equal(buf_cstr(&f->srv.req), "PUT /x?a=b HTTP/1.1\r\nHost: h\r\nX-Test: 1\r\n"
                                               "Content-Length: 5\r\nConnection: close\r\n\r\n"
                                               "hello");
}

static void test_ehttp_chunked_and_close_delimited(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 500 Internal\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n<Er\r\n",
           "4\r\nror>\r\n0\r\n\r\n", NULL);
    run(f, "GET", NULL, 0, 5000, 1024);
    assert_int_equal(f->res.err, 0);
    assert_int_equal(f->res.status, 500);
    assert_int_equal(f->res.body_len, 7);
    assert_memory_equal(f->res.body, "<Error>", 7);
    assert_null(strstr(buf_cstr(&f->srv.req), "Content-Length")); /* GET without body */
}

static void test_ehttp_body_until_close(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nsome", " bytes", NULL);
    run(f, "POST", NULL, 0, 5000, 1024);
    assert_int_equal(f->res.err, 0);
    assert_int_equal(f->res.body_len, 10);
    assert_non_null(strstr(buf_cstr(&f->srv.req), "Content-Length: 0\r\n")); /* POST: always */
}

static void test_ehttp_idle_timeout(void **state)
{
    struct fixture *f = *state;
    f->srv.silent = true;
    uint64_t t0 = uv_now(&f->loop);
    run(f, "GET", NULL, 0, 200, 1024);
    assert_int_equal(f->res.err, AGENT_E_TIMEOUT);
    assert_true(uv_now(&f->loop) - t0 >= 190);
    assert_non_null(strstr(f->res.why, "timed out"));
}

static void test_ehttp_malformed_and_too_big(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 2x0 OK\r\n\r\n", NULL, NULL);
    run(f, "GET", NULL, 0, 5000, 1024);
    assert_int_equal(f->res.err, AGENT_E_PROTO);
}

static void test_ehttp_body_over_cap(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n01234567890123456789", NULL, NULL);
    run(f, "GET", NULL, 0, 5000, 10);
    assert_int_equal(f->res.err, AGENT_E_TOOBIG);
}

static void test_ehttp_closed_early(void **state)
{
    struct fixture *f = *state;
    script(f, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort", NULL, NULL);
    run(f, "GET", NULL, 0, 5000, 1024);
    assert_int_equal(f->res.err, AGENT_E_CLOSED);
}

/* A store that refuses before reading an 8 MiB body: the answer wins over the broken pipe. */
static void test_ehttp_early_answer(void **state)
{
    struct fixture *f = *state;
    f->srv.early = true;
    script(f, "HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\nConnection: close\r\n\r\n<Error>",
           NULL, NULL);
    size_t n = 8u << 20;
    uint8_t *big = calloc(1, n);
    run(f, "PUT", big, n, 5000, 1024);
    free(big);
    assert_int_equal(f->res.err, 0);
    assert_int_equal(f->res.status, 403);
}

static void test_ehttp_refused(void **state)
{
    struct fixture *f = *state;
    uv_close((uv_handle_t *)&f->srv.listener, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT);
    run(f, "GET", NULL, 0, 5000, 1024);
    assert_int_equal(f->res.err, UV_ECONNREFUSED);
    assert_non_null(strstr(f->res.why, "cannot connect"));
}

static void test_ehttp_cancel(void **state)
{
    struct fixture *f = *state;
    f->srv.silent = true;
    struct ehttp_request rq = {
        "GET", "127.0.0.1", (uint16_t)f->srv.port, NULL, "/", NULL, 0, NULL, 0, 5000, 0, 1024};
    struct ehttp_conn *c = NULL;
    assert_int_equal(ehttp_start(&f->loop, &rq, on_done, f, &c), 0);
    ehttp_cancel(c); /* while resolving */
    assert_int_equal(ehttp_start(&f->loop, &rq, on_done, f, &c), 0);
    for (int i = 0; i < 20 && !f->srv.conn_open; i++) {
        uv_run(&f->loop, UV_RUN_ONCE);
    }
    ehttp_cancel(c); /* connected, waiting */
    uv_close((uv_handle_t *)&f->srv.listener, NULL);
    srv_close_conn(&f->srv);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    assert_int_equal(f->res.calls, 0);
}

static void test_ehttp_rejects_bad_requests(void **state)
{
    struct fixture *f = *state;
    const struct ehttp_header evil[] = {{"X", "a\r\nInjected: 1"}};
    struct ehttp_request rq = {
        "GET", "127.0.0.1", (uint16_t)f->srv.port, NULL, "/", evil, 1, NULL, 0, 5000, 0, 1024};
    struct ehttp_conn *c = NULL;
    assert_int_equal(ehttp_start(&f->loop, &rq, on_done, f, &c), AGENT_E_INVAL);
    rq.nheaders = 0;
    rq.target = "/a b";
    assert_int_equal(ehttp_start(&f->loop, &rq, on_done, f, &c), AGENT_E_INVAL);
    char why[200];
    struct ehttp_tls *t = NULL;
    assert_int_equal(ehttp_tls_new("/nonexistent/ca.pem", &t, why, sizeof(why)), AGENT_E_INVAL);
    assert_non_null(strstr(why, "/nonexistent/ca.pem"));
    assert_int_equal(ehttp_tls_new(NULL, &t, why, sizeof(why)), 0);
    ehttp_tls_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ehttp_request_and_length_response, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_chunked_and_close_delimited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_body_until_close, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_idle_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_malformed_and_too_big, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_body_over_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_closed_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_early_answer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ehttp_rejects_bad_requests, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
