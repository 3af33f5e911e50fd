/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "http_server.h"
#include "http_test_client.h"
#include "http_test_fixture.h"
#include "log.h"
#include "timebound.h"

/*
 * HTTP server behaviour over real loopback sockets: each test runs the server on a private loop
 * (main thread) and a blocking client on a second thread (see http_test_fixture.h).
 */

#define WATCHDOG_MS 20000
#define IO_MS       5000 /* client-side wait for a response */

#define STREAM_CHUNK ((size_t)64 * 1024)
#define STREAM_TOTAL ((size_t)8 * 1024 * 1024)
#define STREAM_HIGH  ((size_t)1024 * 1024)
#define STREAM_LOW   ((size_t)128 * 1024)

/* Loop-side observations, read by the test after hfx_run. */
struct results {
    size_t max_pending;
    unsigned drains;
    unsigned aborts;
    unsigned ends;
    unsigned write_errors;
    unsigned now_whole;   /* http_stream_write_now: chunks the socket took whole */
    unsigned now_partial; /* ... chunks the socket took a part of (the rest queued) */
    unsigned now_refused; /* ... it left to http_stream_write (bytes queued ahead) */
    uint64_t abort_at_ms;
    uint64_t client_done_at_ms;
    int respond_rc;
};

static uint8_t pattern_byte(size_t offset)
{
    return (uint8_t)(offset % 251u);
}

/* ---- handler side ---- */

struct delayed {
    uv_timer_t timer;
    struct http_request *r;
    int status;
    const char *body;
};

static void delayed_on_close(uv_handle_t *h)
{
    free(h->data);
}

static void delayed_on_timer(uv_timer_t *t)
{
    struct delayed *d = t->data;
    if (d->r != NULL) {
        http_request_on_abort(d->r, NULL, NULL);
        http_respond(d->r, d->status, "text/plain", NULL, 0, d->body, strlen(d->body));
        d->r = NULL;
    }
    uv_close((uv_handle_t *)&d->timer, delayed_on_close);
}

static void delayed_on_abort(void *ud, struct http_request *r)
{
    struct delayed *d = ud;
    (void)r;
    d->r = NULL; /* the timer still fires and only closes itself */
}

/* Answers r after ms milliseconds from a timer on the same loop. */
static void respond_later(struct hfx *fx, struct http_request *r, uint64_t ms, const char *body)
{
    struct delayed *d = calloc(1, sizeof(*d));
    assert_non_null(d);
    d->r = r;
    d->status = 200;
    d->body = body;
    uv_timer_init(&fx->loop, &d->timer);
    d->timer.data = d;
    http_request_on_abort(r, delayed_on_abort, d);
    uv_timer_start(&d->timer, delayed_on_timer, ms, 0);
}

struct streamer {
    struct hfx *fx;
    struct http_request *r;
    size_t sent;
    size_t total; /* SIZE_MAX: until the client goes away */
    bool owned;   /* every other chunk through http_stream_write_owned (no copy) */
    unsigned nwrites;
};

/* The body must be pattern_byte(0..n-1). */
static void check_pattern(struct hfx *fx, const struct buf *body, size_t n, const char *what)
{
    if (buf_size(body) != n) {
        hfx_failf(fx, "%s: %zu bytes, want %zu", what, buf_size(body), n);
        return;
    }
    const uint8_t *b = buf_data(body);
    for (size_t i = 0; i < n; i++) {
        if (b[i] != pattern_byte(i)) {
            hfx_failf(fx, "%s: byte %zu out of order", what, i);
            return;
        }
    }
}

static void stream_pump(struct streamer *st);

static void stream_on_drain(void *ud, struct http_request *r)
{
    struct streamer *st = ud;
    struct results *res = st->fx->user;
    (void)r;
    res->drains++;
    stream_pump(st);
}

static void stream_on_abort(void *ud, struct http_request *r)
{
    struct streamer *st = ud;
    struct results *res = st->fx->user;
    (void)r;
    res->aborts++;
    res->abort_at_ms = tc_now_ms();
    free(st);
}

/* Writes chunks until the high-water mark, then waits for the drain callback. */
static void stream_pump(struct streamer *st)
{
    struct results *res = st->fx->user;
    static uint8_t chunk[STREAM_CHUNK];
    while (st->sent < st->total) {
        size_t pending = http_stream_pending(st->r);
        if (pending > res->max_pending) {
            res->max_pending = pending;
        }
        if (pending >= STREAM_HIGH) {
            return;
        }
        size_t n = st->total - st->sent < STREAM_CHUNK ? st->total - st->sent : STREAM_CHUNK;
        uint8_t *base = NULL;
        uint8_t *dst = chunk;
        if (st->owned && st->nwrites++ % 2 == 0) {
            /* The bytes sit inside the block at an offset, as in a relay's read buffer. */
            base = malloc(n + 13);
            assert_non_null(base);
            dst = base + 13;
        }
        for (size_t i = 0; i < n; i++) {
            dst[i] = pattern_byte(st->sent + i);
        }
        int rc = base != NULL ? http_stream_write_owned(st->r, base, dst, n)
                              : http_stream_write(st->r, chunk, n);
        if (rc != 0) {
            res->write_errors++; /* the abort callback follows from the loop */
            return;
        }
        st->sent += n;
    }
    http_stream_end(st->r);
    res->ends++;
    free(st);
}

/*
 * A relay's pattern: one chunk per turn of the loop (as a read callback delivers them), each
 * through http_stream_write_now first, then through the queue when it is left there.
 */
struct now_streamer {
    struct hfx *fx;
    struct http_request *r; /* NULL once ended or aborted */
    size_t sent;
    size_t total;
    uv_timer_t tick;
    bool waiting; /* for the drain callback */
};

static void now_on_close(uv_handle_t *h)
{
    free(h->data);
}

static void now_done(struct now_streamer *st)
{
    st->r = NULL;
    uv_timer_stop(&st->tick);
    uv_close((uv_handle_t *)&st->tick, now_on_close);
}

static void now_on_tick(uv_timer_t *t)
{
    struct now_streamer *st = t->data;
    struct results *res = st->fx->user;
    static uint8_t chunk[STREAM_CHUNK];
    size_t pending = http_stream_pending(st->r);
    res->max_pending = pending > res->max_pending ? pending : res->max_pending;
    if (pending >= STREAM_HIGH) {
        st->waiting = true;
        return;
    }
    size_t n = st->total - st->sent < STREAM_CHUNK ? st->total - st->sent : STREAM_CHUNK;
    for (size_t i = 0; i < n; i++) {
        chunk[i] = pattern_byte(st->sent + i);
    }
    int rc = http_stream_write_now(st->r, chunk, n);
    if (rc == 1) {
        res->now_whole += http_stream_pending(st->r) == pending;
        res->now_partial += http_stream_pending(st->r) > pending;
    } else if (rc == 0) {
        res->now_refused++;
        rc = http_stream_write(st->r, chunk, n);
    }
    if (rc < 0) {
        res->write_errors++; /* the abort callback follows from the loop */
        return;
    }
    st->sent += n;
    if (st->sent == st->total) {
        http_stream_end(st->r);
        res->ends++;
        now_done(st);
        return;
    }
    uv_timer_start(&st->tick, now_on_tick, 0, 0);
}

static void now_on_drain(void *ud, struct http_request *r)
{
    struct now_streamer *st = ud;
    struct results *res = st->fx->user;
    (void)r;
    res->drains++;
    if (st->waiting) {
        st->waiting = false;
        uv_timer_start(&st->tick, now_on_tick, 0, 0);
    }
}

static void now_on_abort(void *ud, struct http_request *r)
{
    struct now_streamer *st = ud;
    struct results *res = st->fx->user;
    (void)r;
    res->aborts++;
    now_done(st);
}

static void start_now_stream(struct hfx *fx, struct http_request *r, size_t total)
{
    struct now_streamer *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    st->fx = fx;
    st->r = r;
    st->total = total;
    uv_timer_init(&fx->loop, &st->tick);
    st->tick.data = st;
    http_request_on_abort(r, now_on_abort, st);
    http_stream_on_drain(r, STREAM_LOW, now_on_drain, st);
    assert_int_equal(http_stream_begin(r, 200, "application/octet-stream", NULL, 0), 0);
    uv_timer_start(&st->tick, now_on_tick, 0, 0);
}

static void start_stream(struct hfx *fx, struct http_request *r, size_t total)
{
    struct streamer *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    st->fx = fx;
    st->r = r;
    st->total = total;
    st->owned = strstr(http_request_query(r), "owned") != NULL;
    http_request_on_abort(r, stream_on_abort, st);
    http_stream_on_drain(r, STREAM_LOW, stream_on_drain, st);
    assert_int_equal(http_stream_begin(r, 200, "application/octet-stream", NULL, 0), 0);
    stream_pump(st);
}

/* ---- sendfile: a file grown while it is sent (as a dump createdump is still writing) ---- */

#define SF_TOTAL ((size_t)6 * 1024 * 1024)
#define SF_PIECE ((size_t)1024 * 1024)

struct sfjob {
    struct hfx *fx;
    struct http_request *r;
    int fd;
    size_t sent;
    size_t written; /* bytes in the file so far */
    unsigned empty; /* pieces that found nothing to send yet */
    unsigned cbs;
    int last_status;
    uv_timer_t grow;
    bool aborted;
};

/* Appends the next MiB of the pattern to the file (the "writer"). */
static void sf_grow(struct sfjob *j)
{
    uint8_t *b = malloc(SF_PIECE);
    assert_non_null(b);
    for (size_t i = 0; i < SF_PIECE; i++) {
        b[i] = pattern_byte(j->written + i);
    }
    assert_int_equal(pwrite(j->fd, b, SF_PIECE, (off_t)j->written), (ssize_t)SF_PIECE);
    j->written += SF_PIECE;
    free(b);
}

static void sf_on_grow_closed(uv_handle_t *h)
{
    struct sfjob *j = h->data;
    close(j->fd);
    free(j);
}

static void sf_next(struct sfjob *j);

static void sf_on_timer(uv_timer_t *t)
{
    struct sfjob *j = t->data;
    if (j->written < SF_TOTAL) {
        sf_grow(j);
    }
    sf_next(j);
}

static void sf_on_sent(void *ud, struct http_request *r, int status, size_t n)
{
    struct sfjob *j = ud;
    struct results *res = j->fx->user;
    j->cbs++;
    j->last_status = status;
    if (status < 0) {
        res->write_errors++; /* the client went away: the abort callback follows */
        return;
    }
    assert_ptr_equal(r, j->r);
    j->sent += n;
    if (n == 0) {
        j->empty++;
        if (j->sent == SF_TOTAL) {
            http_stream_end(j->r);
            res->ends++;
            uv_close((uv_handle_t *)&j->grow, sf_on_grow_closed);
            return;
        }
        uv_timer_start(&j->grow, sf_on_timer, 5, 0); /* nothing yet: the writer goes on */
        return;
    }
    sf_next(j);
}

static void sf_next(struct sfjob *j)
{
    if (j->aborted) {
        return;
    }
    int rc = http_stream_sendfile(j->r, j->fd, j->sent, SF_PIECE / 2, sf_on_sent, j);
    assert_int_equal(rc, 0);
}

static void sf_on_abort(void *ud, struct http_request *r)
{
    struct sfjob *j = ud;
    struct results *res = j->fx->user;
    (void)r;
    res->aborts++;
    j->aborted = true;
    uv_timer_stop(&j->grow);
    uv_close((uv_handle_t *)&j->grow, sf_on_grow_closed);
}

static void start_sendfile(struct hfx *fx, struct http_request *r)
{
    struct sfjob *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    j->fx = fx;
    j->r = r;
    char path[] = "/tmp/httpsfXXXXXX";
    j->fd = mkstemp(path);
    assert_true(j->fd >= 0);
    unlink(path);
    uv_timer_init(&fx->loop, &j->grow);
    j->grow.data = j;
    http_request_on_abort(r, sf_on_abort, j);
    assert_int_equal(http_stream_begin(r, 200, "application/octet-stream", NULL, 0), 0);
    assert_true(http_stream_can_sendfile(r));
    /* A second piece while one is pending is refused. */
    sf_grow(j);
    sf_next(j);
    assert_int_equal(http_stream_sendfile(r, j->fd, 0, 10, sf_on_sent, j), AGENT_E_INVAL);
}

static void hang_on_abort(void *ud, struct http_request *r)
{
    struct hfx *fx = ud;
    struct results *res = fx->user;
    (void)r;
    res->aborts++;
    res->abort_at_ms = tc_now_ms();
}

static void drain_then_abort(void *ud, struct http_request *r)
{
    struct hfx *fx = ud;
    struct results *res = fx->user;
    res->drains++;
    http_stream_abort(r);
}

/* One handler for every test, routed by path. */
static void handler(struct hfx *fx, struct http_request *r)
{
    struct results *res = fx->user;
    const char *path = http_request_path(r);
    assert_false(http_request_is_local(r)); /* from a socket */
    if (strcmp(path, "/echo") == 0) {
        struct buf b;
        buf_init(&b, 0);
        size_t blen = 0;
        const uint8_t *body = http_request_body(r, &blen);
        buf_printf(&b, "%s|%s|%s|%s|%d|", http_request_method(r), http_request_target(r), path,
                   http_request_query(r), http_request_tag(r));
        buf_append(&b, body, blen);
        res->respond_rc = http_respond(r, 200, "text/plain", NULL, 0, buf_data(&b), buf_size(&b));
        buf_fini(&b);
    } else if (strcmp(path, "/hdr") == 0) {
        struct buf b;
        buf_init(&b, 0);
        const char *x = http_request_header(r, "x-TEST");
        const char *e = http_request_header(r, "X-Empty");
        buf_printf(&b, "[%s][%s][%s][%s]", x ? x : "(null)", http_request_header(r, "HOST"),
                   e ? e : "(null)", http_request_header(r, "x-missing") ? "?" : "(null)");
        const struct http_header extra[] = {{"X-Reply", "yes"}, {"Cache-Control", "no-store"}};
        http_respond(r, 200, "text/plain", extra, 2, buf_data(&b), buf_size(&b));
        buf_fini(&b);
    } else if (strncmp(path, "/async", 6) == 0) {
        respond_later(fx, r, 50, path);
    } else if (strcmp(path, "/bad-header") == 0) {
        const struct http_header extra[] = {{"X-Bad", "a\r\nInjected: 1"}};
        res->respond_rc = http_respond(r, 200, "text/plain", extra, 1, "x", 1);
    } else if (strcmp(path, "/managed-header") == 0) {
        const struct http_header extra[] = {{"content-length", "5"}};
        res->respond_rc = http_respond(r, 200, "text/plain", extra, 1, "x", 1);
    } else if (strcmp(path, "/nocontent") == 0) {
        http_respond(r, 204, NULL, NULL, 0, NULL, 0);
    } else if (strcmp(path, "/stream") == 0) {
        start_stream(fx, r, STREAM_TOTAL);
    } else if (strcmp(path, "/stream-small") == 0) {
        start_stream(fx, r, 100000);
    } else if (strcmp(path, "/stream-now") == 0) {
        start_now_stream(fx, r, STREAM_TOTAL);
    } else if (strcmp(path, "/stream-now-small") == 0) {
        start_now_stream(fx, r, 100000);
    } else if (strcmp(path, "/stream-forever") == 0) {
        start_stream(fx, r, SIZE_MAX);
    } else if (strcmp(path, "/flood") == 0) {
        /* Ignores backpressure: the server must cut the client off at max_stream_pending. */
        static uint8_t chunk[STREAM_CHUNK];
        http_request_on_abort(r, hang_on_abort, fx);
        assert_int_equal(http_stream_begin(r, 200, NULL, NULL, 0), 0);
        int rc = 0;
        for (int i = 0; i < 1000 && rc == 0; i++) {
            rc = http_stream_write(r, chunk, sizeof(chunk));
        }
        res->respond_rc = rc;
        if (rc == 0) {
            http_stream_end(r);
        }
    } else if (strcmp(path, "/drain-abort") == 0) {
        /* Abort from inside the drain callback, i.e. from inside the server's write callback. */
        http_stream_on_drain(r, SIZE_MAX, drain_then_abort, fx);
        assert_int_equal(http_stream_begin(r, 200, "text/plain", NULL, 0), 0);
        assert_int_equal(http_stream_write(r, "first", 5), 0);
    } else if (strcmp(path, "/stream-abort") == 0) {
        assert_int_equal(http_stream_begin(r, 200, "text/plain", NULL, 0), 0);
        assert_int_equal(http_stream_write(r, "partial", 7), 0);
        http_stream_abort(r);
    } else if (strcmp(path, "/slow-close") == 0) {
        /* Shut the server down while this request is in progress; answer within the grace. */
        respond_later(fx, r, 100, "late");
        hfx_close_server(fx, 3000);
    } else if (strcmp(path, "/sendfile") == 0) {
        start_sendfile(fx, r);
    } else if (strcmp(path, "/hold") == 0) {
        http_request_on_abort(r, hang_on_abort, fx); /* owned until the client leaves */
    } else if (strcmp(path, "/hang") == 0) {
        http_request_on_abort(r, hang_on_abort, fx);
        hfx_close_server(fx, 100);
    } else {
        http_respond(r, 200, "text/plain", NULL, 0, "ok", 2);
    }
}

static void prepare(struct hfx *fx, struct results *res)
{
    memset(res, 0, sizeof(*res));
    fx->user = res;
    fx->handler = handler;
}

/* ---- client side helpers ---- */

#define GET(path) "GET " path " HTTP/1.1\r\nHost: t\r\n\r\n"

static bool header_is(const struct tc_response *r, const char *name, const char *value)
{
    const char *v = tc_header(r, name);
    return v != NULL && strcmp(v, value) == 0;
}

/* Every response must carry a Date. */
static bool has_date(const struct tc_response *r)
{
    const char *d = tc_header(r, "Date");
    return d != NULL && strlen(d) == 29 && strcmp(d + 25, " GMT") == 0;
}

/* ---- tests ---- */

static void client_simple_get(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/echo?a=1&b=%20"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200);
    const char *want = "GET|/echo?a=1&b=%20|/echo|a=1&b=%20|7|";
    char len[32];
    HFX_CHECK(fx, snprintf(len, sizeof(len), "%zu", strlen(want)) > 0);
    HFX_CHECK(fx, strcmp(tc_body(&r), want) == 0);
    HFX_CHECK(fx, header_is(&r, "Content-Length", len));
    HFX_CHECK(fx, header_is(&r, "Content-Type", "text/plain"));
    HFX_CHECK(fx, has_date(&r));
    HFX_CHECK(fx, tc_header(&r, "Connection") == NULL);
    HFX_CHECK(fx, r.keep_alive);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_simple_get(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_simple_get, WATCHDOG_MS);
    assert_int_equal(fx->requests, 1);
    assert_int_equal(res.respond_rc, 0);
}

static void client_keep_alive(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    for (int i = 0; i < 3; i++) {
        HFX_CHECK(fx, tc_request(&c, GET("/echo"), &r, IO_MS) == TC_OK);
        HFX_CHECK(fx, r.status == 200 && r.keep_alive);
    }
    /* HEAD: same headers, no body; the next response still parses, so no body bytes leaked. */
    HFX_CHECK(fx, tc_request(&c, "HEAD /echo HTTP/1.1\r\nHost: t\r\n\r\n", &r, IO_MS) == TC_OK);
    HFX_CHECK(fx,
              r.status == 200 && header_is(&r, "Content-Length", "20") && buf_size(&r.body) == 0);
    c.head_request = false;
    HFX_CHECK(fx, tc_request(&c, GET("/nocontent"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 204 && tc_header(&r, "Content-Length") == NULL);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && strcmp(tc_body(&r), "ok") == 0);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_keep_alive(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_keep_alive, WATCHDOG_MS);
    assert_int_equal(fx->requests, 6);
}

static void client_pipelined(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    /* The second one is answered late: the third must still come after it. */
    HFX_CHECK(fx,
              tc_send_str(
                  &c, GET("/echo?1") GET("/async-2") GET(
                          "/echo?3") "POST /echo?4 HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\n"
                                     "abc" GET("/echo?5")) == 0);
    const char *want[] = {"GET|/echo?1|/echo|1|7|", "/async-2", "GET|/echo?3|/echo|3|7|",
                          "POST|/echo?4|/echo|4|7|abc", "GET|/echo?5|/echo|5|7|"};
    for (size_t i = 0; i < 5; i++) {
        HFX_CHECK(fx, tc_read_response(&c, &r, IO_MS) == TC_OK);
        if (strcmp(tc_body(&r), want[i]) != 0) {
            hfx_failf(fx, "pipelined response %zu: got '%s' want '%s'", i, tc_body(&r), want[i]);
            break;
        }
    }
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_pipelined(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_pipelined, WATCHDOG_MS);
    assert_int_equal(fx->requests, 5);
}

static void client_async(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_request(&c, GET("/async"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, tc_now_ms() - t0 >= 40);
    HFX_CHECK(fx, r.status == 200 && strcmp(tc_body(&r), "/async") == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/async-again"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "/async-again") == 0);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_async_response(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_async, WATCHDOG_MS);
    assert_int_equal(fx->requests, 2);
}

static void client_post(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c,
                             "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n"
                             "Content-Type: text/plain\r\n\r\nhello world",
                             &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "POST|/echo|/echo||7|hello world") == 0);
    /* Chunked request body, with an extension and a trailer. */
    HFX_CHECK(fx,
              tc_request(&c,
                         "PUT /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                         "5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n",
                         &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "PUT|/echo|/echo||7|hello world") == 0);
    /* Expect: 100-continue gets the interim response before the body is sent. */
    HFX_CHECK(fx, tc_send_str(&c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n"
                                  "Expect: 100-continue\r\n\r\n") == 0);
    char interim[64];
    size_t got = 0;
    uint64_t deadline = tc_now_ms() + IO_MS;
    while (got < 25 && tc_now_ms() < deadline) {
        ssize_t n = recv(c.fd, interim + got, 25 - got, 0);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    HFX_CHECK(fx, got == 25 && memcmp(interim, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
    HFX_CHECK(fx, tc_send_str(&c, "body") == 0);
    HFX_CHECK(fx, tc_read_response(&c, &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "POST|/echo|/echo||7|body") == 0);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_post_body(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_post, WATCHDOG_MS);
    assert_int_equal(fx->requests, 3);
}

static void client_headers(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx,
              tc_request(&c,
                         "GET /hdr HTTP/1.1\r\nhost: h.example\r\nX-Test:   spaced value \t \r\n"
                         "X-Test: second\r\nX-Empty:\r\n\r\n",
                         &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "[spaced value][h.example][][(null)]") == 0);
    HFX_CHECK(fx, header_is(&r, "X-Reply", "yes") && header_is(&r, "Cache-Control", "no-store"));
    /* The same request one byte per write: values split across reads are not obs-folds. */
    const char *req = "GET /hdr HTTP/1.1\r\nHost: h\r\nX-Test: a b c\r\nConnection: keep-alive\r\n"
                      "Content-Length: 0\r\nX-Empty:  \r\n\r\n";
    for (const char *p = req; *p; p++) {
        HFX_CHECK(fx, tc_send(&c, p, 1) == 0);
        tc_sleep_ms(1);
    }
    HFX_CHECK(fx, tc_read_response(&c, &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && strcmp(tc_body(&r), "[a b c][h][][(null)]") == 0);
    /* Absolute-form target. */
    HFX_CHECK(fx, tc_request(&c, "GET http://h/echo?q=1 HTTP/1.1\r\nHost: h\r\n\r\n", &r, IO_MS) ==
                      TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "GET|http://h/echo?q=1|/echo|q=1|7|") == 0);
    /* Upgrade is ignored: served as plain HTTP and the connection stays HTTP. */
    HFX_CHECK(fx, tc_request(&c,
                             "GET /echo HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\n"
                             "Upgrade: websocket\r\n\r\n",
                             &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    /* A handler passing a header with CRLF (injection) or a managed one gets a 500 instead. */
    HFX_CHECK(fx, tc_request(&c, GET("/bad-header"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 500 && tc_header(&r, "Injected") == NULL);
    HFX_CHECK(fx, tc_request(&c, GET("/managed-header"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 500);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_request_headers(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_headers, WATCHDOG_MS);
    assert_int_equal(res.respond_rc, AGENT_E_INVAL);
}

/* Sends raw bytes on a fresh connection; expects `status` then the connection closed. */
static void expect_error(struct hfx *fx, const char *what, const void *req, size_t len, int status)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    if (tc_connect(&c, fx->port) != 0) {
        hfx_failf(fx, "%s: connect failed", what);
        return;
    }
    tc_send(&c, req, len); /* may fail once the server has answered and closed */
    enum tc_result rc = tc_read_response(&c, &r, IO_MS);
    if (rc != TC_OK || r.status != status) {
        hfx_failf(fx, "%s: got rc %d status %d, want %d", what, (int)rc, r.status, status);
    } else if (!header_is(&r, "Connection", "close") ||
               !header_is(&r, "Content-Type", "application/problem+json") ||
               strstr(tc_body(&r), "\"type\":\"https://tools.ietf.org/html/rfc") == NULL) {
        hfx_failf(fx, "%s: error response lacks Connection: close or problem+json: %s", what,
                  tc_body(&r));
    } else if (tc_wait_closed(&c, IO_MS, NULL) != TC_OK) {
        hfx_failf(fx, "%s: connection not closed after the error", what);
    }
    tc_response_fini(&r);
    tc_close(&c);
}

static void expect_error_str(struct hfx *fx, const char *what, const char *req, int status)
{
    expect_error(fx, what, req, strlen(req), status);
}

static void client_limits(struct hfx *fx)
{
    struct buf b;
    buf_init(&b, 0);
    /* 414: target over max_url (1024 in this test). */
    buf_append_str(&b, "GET /");
    for (int i = 0; i < 1100; i++) {
        buf_append_str(&b, "a");
    }
    buf_append_str(&b, " HTTP/1.1\r\nHost: t\r\n\r\n");
    expect_error(fx, "long url", buf_data(&b), buf_size(&b), 414);
    /* 431: one header over max_header_bytes (2048). */
    buf_reset(&b);
    buf_append_str(&b, "GET / HTTP/1.1\r\nHost: t\r\nX-Big: ");
    for (int i = 0; i < 3000; i++) {
        buf_append_str(&b, "b");
    }
    buf_append_str(&b, "\r\n\r\n");
    expect_error(fx, "big header", buf_data(&b), buf_size(&b), 431);
    /* 431: too many header lines (max_headers 20). */
    buf_reset(&b);
    buf_append_str(&b, "GET / HTTP/1.1\r\nHost: t\r\n");
    for (int i = 0; i < 30; i++) {
        buf_printf(&b, "X-%d: v\r\n", i);
    }
    buf_append_str(&b, "\r\n");
    expect_error(fx, "many headers", buf_data(&b), buf_size(&b), 431);
    /* 413 from Content-Length alone: answered without sending (or reading) any body. */
    expect_error_str(fx, "content-length too large",
                     "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 5000\r\n\r\n", 413);
    /* 413 for a chunked body that grows past max_body (4096). */
    buf_reset(&b);
    buf_append_str(&b, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 5; i++) {
        buf_append_str(&b, "400\r\n");
        for (int j = 0; j < 1024; j++) {
            buf_append_str(&b, "c");
        }
        buf_append_str(&b, "\r\n");
    }
    buf_append_str(&b, "0\r\n\r\n");
    expect_error(fx, "chunked body too large", buf_data(&b), buf_size(&b), 413);
    buf_fini(&b);

    /* 400s and 505s. */
    expect_error_str(fx, "garbage", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 400);
    expect_error_str(fx, "bad method", "G@T / HTTP/1.1\r\nHost: t\r\n\r\n", 400);
    expect_error_str(fx, "no host", "GET / HTTP/1.1\r\n\r\n", 400);
    expect_error_str(fx, "two hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400);
    expect_error_str(fx, "space before colon", "GET / HTTP/1.1\r\nHost : a\r\n\r\n", 400);
    expect_error_str(fx, "obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", 400);
    static const char nul_req[] = "GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n";
    expect_error(fx, "nul in value", nul_req, sizeof(nul_req) - 1, 400);
    expect_error_str(fx, "fragment", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_error_str(fx, "high byte in target", "GET /\xff HTTP/1.1\r\nHost: a\r\n\r\n", 400);
    expect_error_str(fx, "cl+te",
                     "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                     400);
    expect_error_str(fx, "expect", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417);
    expect_error_str(fx, "connect", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 405);
    expect_error_str(fx, "http/2.0", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505);
    expect_error_str(fx, "http/1.2", "GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505);
    expect_error_str(fx, "h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505);
    expect_error_str(fx, "http/0.9", "GET /\r\n\r\n", 505);
    /* HEAD error responses carry no body (checked by the client's HEAD-aware parser). */
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, "HEAD /a#b HTTP/1.1\r\nHost: a\r\n\r\n", &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 400 && buf_size(&r.body) == 0);
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    tc_close(&c);
    /* The server still works. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    c.head_request = false;
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_limits_and_errors(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.max_url = 1024;
    fx->cfg.max_header_bytes = 2048;
    fx->cfg.max_headers = 20;
    fx->cfg.max_body = 4096;
    hfx_run(fx, client_limits, WATCHDOG_MS);
    assert_int_equal(fx->requests, 1);
}

static void client_header_timeout(struct hfx *fx)
{
    struct tc_conn c;
    /* Silent client. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    uint64_t dt = tc_now_ms() - t0;
    HFX_CHECK(fx, dt >= 150 && dt < 2000);
    tc_close(&c);
    /* Dribbling client: bytes keep coming, but the head is not complete in time. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    const char *req =
        "GET / HTTP/1.1\r\nHost: t\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    t0 = tc_now_ms();
    bool closed = false;
    for (const char *p = req; *p; p++) {
        if (tc_send(&c, p, 1) != 0) {
            closed = true;
            break;
        }
        if (tc_wait_closed(&c, 40, NULL) == TC_OK) {
            closed = true;
            break;
        }
    }
    dt = tc_now_ms() - t0;
    HFX_CHECK(fx, closed);
    HFX_CHECK(fx, dt >= 150 && dt < 2000);
    tc_close(&c);
}

static void test_http_server_header_timeout(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.header_timeout_ms = 200;
    hfx_run(fx, client_header_timeout, WATCHDOG_MS);
    assert_int_equal(fx->requests, 0);
}

/*
 * pressure_head_ms: with 3/4 of max_connections (4) open, a new silent connection is closed
 * after it; the two opened before the pressure keep the (longer) header timeout.
 */
static void client_pressure_head(struct hfx *fx)
{
    struct tc_conn a, b, c;
    HFX_CHECK(fx, tc_connect(&a, fx->port) == 0);
    HFX_CHECK(fx, tc_connect(&b, fx->port) == 0);
    tc_sleep_ms(50); /* both accepted before the third */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    uint64_t dt = tc_now_ms() - t0;
    HFX_CHECK(fx, dt >= 150 && dt < 2000);
    HFX_CHECK(fx, tc_wait_closed(&a, 0, NULL) == TC_TIMEOUT);
    HFX_CHECK(fx, tc_wait_closed(&b, 0, NULL) == TC_TIMEOUT);
    tc_close(&a);
    tc_close(&b);
    tc_close(&c);
}

static void test_http_server_pressure_head(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.max_connections = 4;
    fx->cfg.header_timeout_ms = 10000;
    fx->cfg.pressure_head_ms = 300;
    hfx_run(fx, client_pressure_head, WATCHDOG_MS);
    assert_int_equal(fx->requests, 0);
}

/*
 * linger_ms: after an error response the server reads and drops input for linger_ms, then
 * closes; bytes sent after that are refused (a reset), bytes sent before are not.
 */
static void client_linger(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&c, "BOGUS\r\n\r\n") == 0);
    HFX_CHECK(fx, tc_read_response(&c, &r, IO_MS) == TC_OK && r.status == 400);
    uint64_t t0 = tc_now_ms();
    uint64_t dt = 0;
    for (;;) {
        dt = tc_now_ms() - t0;
        if (tc_send_str(&c, "x") != 0 || dt > 3000) {
            break;
        }
        tc_sleep_ms(20);
    }
    tc_response_fini(&r);
    tc_close(&c);
    HFX_CHECK(fx, dt >= 250 && dt < 1500);
}

static void test_http_server_linger_ms(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.linger_ms = 300;
    hfx_run(fx, client_linger, WATCHDOG_MS);
    assert_int_equal(fx->requests, 0);
}

static void client_idle_timeout(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    uint64_t dt = tc_now_ms() - t0;
    HFX_CHECK(fx, dt >= 150 && dt < 2000);
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_idle_timeout(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.idle_timeout_ms = 200;
    hfx_run(fx, client_idle_timeout, WATCHDOG_MS);
    assert_int_equal(fx->requests, 1);
}

static void client_connection_close(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    /* HTTP/1.1 with Connection: close, followed by a request that must not be served. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(
        fx, tc_request(&c, "GET /echo HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n" GET("/no"),
                       &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Connection", "close") && !r.keep_alive);
    size_t extra = 1;
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, &extra) == TC_OK && extra == 0);
    tc_close(&c);
    /* HTTP/1.0 without keep-alive: answered, then closed. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, "GET /echo HTTP/1.0\r\n\r\n", &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Connection", "close"));
    HFX_CHECK(fx, r.http_major == 1 && r.http_minor == 1);
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    tc_close(&c);
    /* HTTP/1.0 with keep-alive: kept, and told so. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, "GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r,
                             IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Connection", "keep-alive"));
    HFX_CHECK(fx, tc_request(&c, "GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r, IO_MS) ==
                      TC_OK);
    HFX_CHECK(fx, strcmp(tc_body(&r), "ok") == 0);
    /* A streamed response to HTTP/1.0 has no chunking: it ends with the connection. */
    HFX_CHECK(fx, tc_request(&c, "GET /stream-small HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", &r,
                             IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && tc_header(&r, "Transfer-Encoding") == NULL &&
                      header_is(&r, "Connection", "close") && buf_size(&r.body) == 100000);
    tc_close(&c);
    tc_response_fini(&r);
}

static void test_http_server_connection_close(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_connection_close, WATCHDOG_MS);
    assert_int_equal(fx->requests, 5);
}

static void client_streaming(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    c.read_size = (size_t)16 * 1024;
    c.read_delay_us = 500; /* slow reader: the server's queue must fill up */
    HFX_CHECK(fx, tc_request(&c, GET("/stream"), &r, 15000) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Transfer-Encoding", "chunked"));
    HFX_CHECK(fx, tc_header(&r, "Content-Length") == NULL);
    HFX_CHECK(fx, r.nchunks == STREAM_TOTAL / STREAM_CHUNK);
    check_pattern(fx, &r.body, STREAM_TOTAL, "stream");
    /* Keep-alive after a chunked response; a HEAD of a stream carries no body. */
    c.read_size = 0;
    c.read_delay_us = 0;
    HFX_CHECK(fx,
              tc_request(&c, "HEAD /stream-small HTTP/1.1\r\nHost: t\r\n\r\n", &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && buf_size(&r.body) == 0);
    c.head_request = false;
    HFX_CHECK(fx, tc_request(&c, GET("/stream-small"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, buf_size(&r.body) == 100000);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    tc_response_fini(&r);
    tc_close(&c);
}

/*
 * sendfile of a file that grows while it is sent: every byte in order, chunked framing, a slow
 * reader (the worker's 1 s send timeout and slices), then a client that leaves mid-file.
 */
static void client_sendfile(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    c.read_size = (size_t)64 * 1024;
    c.read_delay_us = 2000; /* ~30 MB/s at most: the socket fills, sendfile waits */
    HFX_CHECK(fx, tc_request(&c, GET("/sendfile"), &r, 60000) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Transfer-Encoding", "chunked"));
    check_pattern(fx, &r.body, SF_TOTAL, "sendfile");
    HFX_CHECK(fx, r.nchunks >= SF_TOTAL / (SF_PIECE / 2));
    /* Keep-alive after it. */
    c.read_delay_us = 0;
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    tc_close(&c);
    /* A client that leaves after the first bytes. */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&c, GET("/sendfile")) == 0);
    char buf[4096];
    HFX_CHECK(fx, recv(c.fd, buf, sizeof(buf), 0) > 0);
    tc_close(&c);
    tc_sleep_ms(300);
    tc_response_fini(&r);
}

static void test_http_server_sendfile(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_sendfile, 60000);
    assert_int_equal(res.ends, 1);
    assert_int_equal(res.aborts, 1);
}

/*
 * A slow client (16 KiB reads, delay_us between them) reads the big stream at path (chunked,
 * STREAM_TOTAL bytes in STREAM_CHUNK chunks), then the small one at small_path over HTTP/1.0 (no
 * chunk framing, the body ends with the connection): same bytes, same framing whichever way the
 * handler wrote them.
 */
static void client_streams(struct hfx *fx, const char *path, const char *small_path,
                           unsigned delay_us)
{
    char req[128];
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    c.read_size = (size_t)16 * 1024;
    c.read_delay_us = delay_us;
    snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    HFX_CHECK(fx, tc_request(&c, req, &r, 15000) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && header_is(&r, "Transfer-Encoding", "chunked"));
    HFX_CHECK(fx, r.nchunks == STREAM_TOTAL / STREAM_CHUNK);
    check_pattern(fx, &r.body, STREAM_TOTAL, "stream");
    tc_close(&c);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", small_path);
    HFX_CHECK(fx, tc_request(&c, req, &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200);
    check_pattern(fx, &r.body, 100000, "HTTP/1.0 stream");
    tc_response_fini(&r);
    tc_close(&c);
}

/* Owned (zero-copy) chunks interleaved with copied ones. */
static void client_streaming_owned(struct hfx *fx)
{
    client_streams(fx, "/stream?owned", "/stream-small?owned", 200);
}

static void test_http_server_streaming_owned(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_streaming_owned, 60000);
    assert_int_equal(res.ends, 2);
    assert_int_equal(res.aborts, 0);
}

/* Chunks written at once while nothing is queued (a relay's pattern), through a client slower
 * than the writer: written whole, in part (the rest queued) or left to the queue. The client reads
 * 16 KiB every 2 ms (8 MB/s at most), well below what the writer makes even under ASan: at 200 us
 * a sanitized writer was once slower than the client and every write went whole. */
static void client_streaming_now(struct hfx *fx)
{
    client_streams(fx, "/stream-now", "/stream-now-small", 2000);
}

static void test_http_server_streaming_now(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_streaming_now, 60000);
    assert_int_equal(res.ends, 2);
    assert_int_equal(res.aborts, 0);
    assert_int_equal(res.write_errors, 0);
    print_message("now: whole %u partial %u refused %u\n", res.now_whole, res.now_partial,
                  res.now_refused);
    /* The slow client made the socket full: every way was taken. */
    assert_true(res.now_whole > 0);
    assert_true(res.now_partial > 0);
    assert_true(res.now_refused > 0);
}

static void test_http_server_streaming_backpressure(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_streaming, 60000);
    assert_int_equal(res.ends, 3);
    assert_int_equal(res.aborts, 0);
    assert_true(res.max_pending >= STREAM_HIGH); /* the queue filled up */
    assert_true(res.drains > 0);                 /* and drained */
}

static void client_stream_abort(struct hfx *fx)
{
    struct tc_conn c;
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&c, GET("/stream-forever?owned")) == 0);
    /* Read a little, stop reading, go away with unread data (the server sees a reset). */
    char tmp[16384];
    size_t got = 0;
    while (got < (size_t)256 * 1024) {
        ssize_t n = recv(c.fd, tmp, sizeof(tmp), 0);
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    HFX_CHECK(fx, got >= (size_t)256 * 1024);
    tc_sleep_ms(50);
    tc_close(&c);
    /* http_stream_abort: the client sees a truncated transfer. */
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    enum tc_result rc = tc_request(&c, GET("/stream-abort"), &r, IO_MS);
    HFX_CHECK(fx, rc == TC_ERROR || rc == TC_CLOSED);
    tc_close(&c);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    rc = tc_request(&c, GET("/drain-abort"), &r, IO_MS);
    HFX_CHECK(fx, rc == TC_ERROR || rc == TC_CLOSED);
    tc_close(&c);
    tc_response_fini(&r);
    tc_sleep_ms(200); /* let the server notice before the fixture closes it */
}

static void test_http_server_abort_on_disconnect(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->close_grace_ms = 10000; /* an abort caused by the shutdown would come 10 s late */
    uint64_t t0 = tc_now_ms();
    hfx_run(fx, client_stream_abort, WATCHDOG_MS);
    assert_int_equal(res.aborts, 1); /* http_stream_abort by the handler is not an abort */
    ASSERT_BELOW_MS(res.abort_at_ms - t0, 5000);
    assert_true(res.write_errors <= 1);
    assert_true(res.drains >= 1);
}

static void client_write_stall(struct hfx *fx)
{
    struct tc_conn c;
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    int small = 4096;
    setsockopt(c.fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
    HFX_CHECK(fx, tc_send_str(&c, GET("/stream-forever")) == 0);
    /* Never read: once the socket buffers are full, writes make no progress. */
    tc_sleep_ms(3000);
    tc_close(&c);
}

static void test_http_server_write_stall_closes(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.write_timeout_ms = 200;
    fx->close_grace_ms = 10000;
    uint64_t t0 = tc_now_ms();
    hfx_run(fx, client_write_stall, WATCHDOG_MS);
    assert_int_equal(res.aborts, 1);
    ASSERT_BELOW_MS(res.abort_at_ms - t0, 2500); /* the stall timer, not the client's close */
}

static void client_flood(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    c.read_delay_us = 20000;
    HFX_CHECK(fx, tc_request(&c, GET("/flood"), &r, IO_MS) != TC_OK); /* cut off */
    tc_response_fini(&r);
    tc_close(&c);
}

static void test_http_server_stream_hard_cap(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.max_stream_pending = (size_t)1024 * 1024;
    hfx_run(fx, client_flood, WATCHDOG_MS);
    assert_int_equal(res.respond_rc, AGENT_E_TOOBIG);
    assert_int_equal(res.aborts, 1);
}

/* Every slot is serving a request: the next connection gets 503 (nothing to evict). */
static void client_max_connections(struct hfx *fx)
{
    struct tc_conn a, b, c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&a, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&a, GET("/hold")) == 0);
    HFX_CHECK(fx, tc_connect(&b, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&b, GET("/hold")) == 0);
    tc_sleep_ms(100); /* both owned by the handler */
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 503 && header_is(&r, "Connection", "close"));
    HFX_CHECK(fx, tc_wait_closed(&c, IO_MS, NULL) == TC_OK);
    tc_close(&c);
    /* Once one goes away, a new connection is served. */
    tc_close(&a);
    tc_sleep_ms(100);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    tc_close(&c);
    tc_close(&b);
    tc_response_fini(&r);
}

static void test_http_server_max_connections(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.max_connections = 2;
    hfx_run(fx, client_max_connections, WATCHDOG_MS);
    assert_int_equal(fx->requests, 3);
    assert_int_equal(res.aborts, 2); /* the two held requests, when their clients left */
}

/*
 * At the limit, the connection that has waited longest without a request head goes first (one
 * that sent nothing, before an idle keep-alive one), so a new client is served.
 */
static void client_evict(struct hfx *fx)
{
    struct tc_conn a, b, c, d;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&a, fx->port) == 0); /* silent: reading its head */
    HFX_CHECK(fx, tc_send_str(&a, "G") == 0);
    HFX_CHECK(fx, tc_connect(&b, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&b, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200); /* idle */
    tc_sleep_ms(50);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    HFX_CHECK(fx, tc_wait_closed(&a, IO_MS, NULL) == TC_OK); /* a made room */
    /* Now b (keep-alive idle, older) and c (idle): the next one evicts b. */
    HFX_CHECK(fx, tc_connect(&d, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&d, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    HFX_CHECK(fx, tc_wait_closed(&b, IO_MS, NULL) == TC_OK);
    HFX_CHECK(fx, tc_request(&c, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    tc_close(&a);
    tc_close(&b);
    tc_close(&c);
    tc_close(&d);
    tc_response_fini(&r);
}

static void test_http_server_evict(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    fx->cfg.max_connections = 2;
    hfx_run(fx, client_evict, WATCHDOG_MS);
    assert_int_equal(fx->requests, 4);
}

static void client_graceful_close(struct hfx *fx)
{
    struct tc_conn idle, busy;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&idle, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&idle, GET("/x"), &r, IO_MS) == TC_OK && r.status == 200);
    HFX_CHECK(fx, tc_connect(&busy, fx->port) == 0);
    HFX_CHECK(fx, tc_send_str(&busy, GET("/slow-close")) == 0);
    /* The idle keep-alive connection is closed at once... */
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_wait_closed(&idle, IO_MS, NULL) == TC_OK);
    HFX_CHECK(fx, tc_now_ms() - t0 < 1000);
    /* ...the busy one gets its answer, marked close, then EOF. */
    HFX_CHECK(fx, tc_read_response(&busy, &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200 && strcmp(tc_body(&r), "late") == 0);
    HFX_CHECK(fx, header_is(&r, "Connection", "close"));
    HFX_CHECK(fx, tc_wait_closed(&busy, IO_MS, NULL) == TC_OK);
    /* The listener is gone. */
    struct tc_conn late;
    int crc = tc_connect(&late, fx->port);
    HFX_CHECK(fx, crc != 0);
    tc_close(&idle);
    tc_close(&busy);
    tc_response_fini(&r);
}

static void test_http_server_graceful_close(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_graceful_close, WATCHDOG_MS);
    assert_int_equal(fx->requests, 2);
}

static void client_grace_expiry(struct hfx *fx)
{
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    uint64_t t0 = tc_now_ms();
    HFX_CHECK(fx, tc_request(&c, GET("/hang"), &r, IO_MS) == TC_CLOSED);
    uint64_t dt = tc_now_ms() - t0;
    HFX_CHECK(fx, dt >= 80 && dt < 2000);
    tc_close(&c);
    tc_response_fini(&r);
}

static void test_http_server_grace_expiry_aborts(void **state)
{
    struct hfx *fx = *state;
    struct results res;
    prepare(fx, &res);
    hfx_run(fx, client_grace_expiry, WATCHDOG_MS);
    assert_int_equal(res.aborts, 1);
}

static void noop_handler(void *ud, struct http_request *r)
{
    (void)ud;
    http_respond(r, 200, NULL, NULL, 0, NULL, 0);
}

static void on_noop_close(void *ud)
{
    *(int *)ud += 1;
}

/* Listening syntax, ports, and closing a server that never served anything. */
static void test_http_server_listen_urls(void **state)
{
    struct hfx *fx = *state;
    struct http_server *s = NULL;
    struct http_server_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    assert_int_equal(http_server_new(&fx->loop, &cfg, NULL, NULL, &s), AGENT_E_INVAL);
    assert_int_equal(http_server_new(&fx->loop, &cfg, noop_handler, NULL, &s), 0);
    assert_int_equal(http_server_listen(s, "https://127.0.0.1:0", 0), AGENT_E_INVAL);
    assert_int_equal(http_server_listen(s, "ftp://x", 0), AGENT_E_INVAL);
    assert_int_equal(http_server_listen(s, "http://127.0.0.1:99999", 0), AGENT_E_INVAL);
    assert_int_equal(http_server_listen(s, "http://999.1.1.1:0", 0), AGENT_E_INVAL);
    assert_int_equal(http_server_port(s, 0), -1);
    assert_int_equal(http_server_listen(s, "http://127.0.0.1:0", 1), 0);
    assert_int_equal(http_server_listen(s, "http://localhost:0", 2), 0);
    /* IPv6 may be missing in a container: then only the IPv4 listens count. */
    size_t n = 2;
    int rc6 = http_server_listen(s, "HTTP://[::1]:0/", 3);
    if (rc6 == 0) {
        n++;
    } else {
        assert_true(rc6 == UV_EADDRNOTAVAIL || rc6 == UV_EAFNOSUPPORT);
    }
    int p0 = http_server_port(s, 0);
    int p1 = http_server_port(s, 1);
    assert_true(p0 > 0 && p1 > 0 && p0 != p1);
    /* The same port twice is refused, and does not count as a listen. */
    char url[64];
    assert_true(snprintf(url, sizeof(url), "http://127.0.0.1:%d", p0) > 0);
    assert_int_not_equal(http_server_listen(s, url, 4), 0);
    assert_true(http_server_port(s, n - 1) > 0);
    assert_int_equal(http_server_port(s, n), -1);
    /* All interfaces: [::] (dual-stack) or 0.0.0.0. */
    assert_int_equal(http_server_listen(s, "http://+:0", 5), 0);
    assert_int_equal(http_server_listen(s, "http://*:0/", 6), 0);
    assert_true(http_server_port(s, n) > 0 && http_server_port(s, n + 1) > 0);
    assert_int_equal(http_server_connection_count(s), 0);
    int closed = 0;
    http_server_close(s, 1000, on_noop_close, &closed);
    assert_int_equal(closed, 0); /* always from the loop */
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(closed, 1);
    assert_string_equal(http_status_text(404), "Not Found");
    assert_string_equal(http_status_text(413), "Content Too Large");
    assert_string_equal(http_status_text(799), "Unknown");
}

int main(void)
{
    log_set_level(LOG_DEBUG);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_http_server_simple_get, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_keep_alive, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_pipelined, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_async_response, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_post_body, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_request_headers, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_limits_and_errors, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_header_timeout, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_pressure_head, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_linger_ms, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_idle_timeout, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_connection_close, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_streaming_owned, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_streaming_now, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_streaming_backpressure, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_abort_on_disconnect, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_write_stall_closes, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_stream_hard_cap, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_evict, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_sendfile, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_max_connections, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_graceful_close, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_grace_expiry_aborts, hfx_setup,
                                        hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_listen_urls, hfx_setup, hfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
