/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "err.h"
#include "http_internal.h"
#include "http_proto.h"
#include "log.h"

/*
 * One HTTP/1.x connection: a state machine (enum conn_state) driven by four libuv events (read,
 * write done, timer, close) and by the handler's response calls.
 *
 * Reading follows docs/style.md §5: the pure parser (http_parse.c: llhttp plus the request-head
 * policy) sees every byte we read and stops at each complete request; reading stops and the request
 * goes to the handler. When the response (http_resp.c) has been written in full, the parser is fed
 * the bytes left behind that request (pipelined requests) and reading starts again. So one
 * request at a time is in flight per connection, responses come out in request order, and a
 * client that pipelines without reading can make us buffer at most one input buffer plus one
 * response.
 *
 * Lifetime (docs/style.md §4): the connection is freed only in the last close callback. Everything
 * that runs user code (handler, drain, abort) may start closing it, so code after such a call
 * re-checks c->state and c->req and never frees c directly. The abort callback runs from the close
 * callback only, never from inside a write callback or a handler call, so no frame up the stack
 * can still hold the request when it is freed.
 */

static const char *const state_names[CONN_NSTATES] = {
    [CONN_HEAD] = "head",       [CONN_BODY] = "body", [CONN_HANDLER] = "handler",
    [CONN_FLUSH] = "flush",     [CONN_IDLE] = "idle", [CONN_LINGER] = "linger",
    [CONN_CLOSING] = "closing",
};

#define STATE_BIT(s) (1u << (s))
/* Legal transitions, indexed by the current state (lwan-style table, docs/style.md §5). */
static const unsigned conn_transitions[CONN_NSTATES] = {
    [CONN_HEAD] = STATE_BIT(CONN_BODY) | STATE_BIT(CONN_FLUSH) | STATE_BIT(CONN_CLOSING),
    [CONN_BODY] = STATE_BIT(CONN_HANDLER) | STATE_BIT(CONN_FLUSH) | STATE_BIT(CONN_CLOSING),
    [CONN_HANDLER] = STATE_BIT(CONN_FLUSH) | STATE_BIT(CONN_CLOSING),
    [CONN_FLUSH] = STATE_BIT(CONN_IDLE) | STATE_BIT(CONN_LINGER) | STATE_BIT(CONN_CLOSING),
    [CONN_IDLE] = STATE_BIT(CONN_HEAD) | STATE_BIT(CONN_FLUSH) | STATE_BIT(CONN_CLOSING),
    [CONN_LINGER] = STATE_BIT(CONN_CLOSING),
    [CONN_CLOSING] = 0,
};

/* ---- forward declarations of the statics, grouped by role ---- */
/* state machine */
static void conn_parse(struct http_conn *c);
static void conn_dispatch(struct http_conn *c);
static void conn_fail(struct http_conn *c, int status, const char *detail);
static void conn_after_flush(struct http_conn *c);
static void conn_linger(struct http_conn *c);
static void conn_handle_bytes(struct http_conn *c, size_t n);
static void conn_handle_read_error(struct http_conn *c, int err);
static void conn_handle_timeout(struct http_conn *c);
static void conn_release(struct http_conn *c);
/* libuv callbacks: thin, they only translate the event */
static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out);
static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);
static void conn_on_timer(uv_timer_t *t);
static void conn_on_shutdown(uv_shutdown_t *req, int status);
static void conn_on_close(uv_handle_t *h);
/* TLS glue (http_tls.h holds the OpenSSL state machine) */
static void conn_tls_input(struct http_conn *c, const char *data, size_t n);
static void conn_tls_pump(struct http_conn *c);
static int conn_tls_flush(struct http_conn *c);

/* ---------------------------------------------------------------------------------------------
 * State machine
 * ------------------------------------------------------------------------------------------- */

void http__conn_set_state(struct http_conn *c, enum conn_state next)
{
    /* An illegal transition is a bug in this file; stop loudly even in release builds. */
    if ((conn_transitions[c->state] & STATE_BIT(next)) == 0) {
        log_error("dotmon.http", "illegal connection state transition %d -> %d", (int)c->state,
                  (int)next);
        abort();
    }
    if (c->state == CONN_HANDLER && next != CONN_HANDLER) {
        c->hold_input = false; /* the kept bytes get parsed from now on */
    }
    c->state = next;
    http__conn_arm_timer(c);
    http__conn_update_reading(c);
}

/*
 * One timer per connection; what it guards depends on the state (h2o's per-phase timers).
 * HEAD is armed only on entry, so a client dribbling its head cannot keep extending the
 * deadline; BODY is re-armed on every read (an inactivity limit, not a total one).
 */
void http__conn_arm_timer(struct http_conn *c)
{
    const struct http_server_config *cfg = &c->srv->cfg;
    uint64_t ms;
    switch (c->state) {
    case CONN_HEAD:
        ms = cfg->header_timeout_ms;
        if (c->srv->nconns * 4 >= cfg->max_connections * 3 && ms > cfg->pressure_head_ms) {
            ms = cfg->pressure_head_ms;
        }
        break;
    case CONN_BODY:
    case CONN_IDLE:
        ms = cfg->idle_timeout_ms;
        break;
    case CONN_HANDLER:
        if (c->writes_in_flight == 0) {
            uv_timer_stop(&c->timer); /* the handler may think as long as it likes */
            return;
        }
        ms = cfg->write_timeout_ms;
        break;
    case CONN_FLUSH:
        /* With nothing left to write, fire at once: the next loop turn continues the
         * connection, so finishing a response never re-enters the handler synchronously. */
        ms = c->writes_in_flight ? cfg->write_timeout_ms : 0;
        break;
    case CONN_LINGER:
        ms = cfg->linger_ms;
        break;
    case CONN_CLOSING:
    case CONN_NSTATES:
    default:
        uv_timer_stop(&c->timer);
        return;
    }
    uv_timer_start(&c->timer, conn_on_timer, ms, 0);
}

/*
 * Reading is on in the states that consume input, and also while the handler owns a request:
 * then bytes are only kept (a pipelined next request) and the point is to see the client go
 * away at once, so that a long response (a trace) is abandoned without waiting for a write to
 * fail. If the kept bytes fill the buffer, reading pauses until the request is finished.
 */
void http__conn_update_reading(struct http_conn *c)
{
    /* Not while a sendfile worker has the socket in blocking mode: a read would block. */
    bool want = !c->saw_eof && !c->sf.busy &&
                (c->state == CONN_HEAD || c->state == CONN_BODY || c->state == CONN_IDLE ||
                 c->state == CONN_LINGER || (c->state == CONN_HANDLER && !c->hold_input));
    if (want && !c->reading) {
        int rc = uv_read_start((uv_stream_t *)&c->tcp, conn_on_alloc, conn_on_read);
        if (rc != 0) {
            log_warn(HTTP_LOG_CAT, "connection %llu: cannot read: %s", (unsigned long long)c->id,
                     agent_strerror(rc));
            http__conn_close(c);
            return;
        }
        c->reading = true;
    } else if (!want && c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
}

/*
 * The head of a request is complete and accepted: read its body (the idle timer guards the gaps
 * between reads), after "100 Continue" when the client waits for one (RFC 9110 §10.1.1).
 * Returns false when the connection failed (answered or closing).
 */
static bool conn_head_done(struct http_conn *c)
{
    http__conn_set_state(c, CONN_BODY);
    if (!http_parse_msg(&c->parse)->expect_continue) {
        return true;
    }
    struct buf out;
    buf_init(&out, 0);
    if (buf_append_str(&out, "HTTP/1.1 100 Continue\r\n\r\n") != 0 ||
        http__resp_write(c, &out) != 0) {
        buf_fini(&out);
        buf_reset(&c->in);
        if (c->state != CONN_CLOSING) {
            conn_fail(c, 503, "cannot write 100 Continue");
        }
        return false;
    }
    return true;
}

/*
 * Feeds the unparsed input to the parser. It stops after one of: every byte consumed (wait for
 * more), a complete request (dispatch it and keep the rest for later), or a refusal (answer it
 * and close). A complete head on the way moves the connection to CONN_BODY.
 */
static void conn_parse(struct http_conn *c)
{
    struct http_parse *p = &c->parse;
    if (buf_size(&c->in) == 0) {
        return;
    }
    for (;;) {
        size_t used = 0;
        enum http_parse_event ev =
            http_parse_execute(p, (const char *)buf_data(&c->in), buf_size(&c->in), &used);
        if (c->state == CONN_IDLE && http_parse_started(p)) {
            http__conn_set_state(c, CONN_HEAD); /* the header timeout starts at the first byte */
        }
        switch (ev) {
        case HTTP_PARSE_MORE:
            buf_reset(&c->in);
            return;
        case HTTP_PARSE_HEAD:
            buf_consume(&c->in, used);
            if (!conn_head_done(c)) {
                return;
            }
            continue; /* the body, maybe no bytes: a request without one completes */
        case HTTP_PARSE_MESSAGE:
            buf_consume(&c->in, used);
            conn_dispatch(c);
            return;
        case HTTP_PARSE_ERROR:
        default:
            break;
        }
        const char *detail = NULL;
        int status = http_parse_error(p, &detail);
        buf_reset(&c->in);
        conn_fail(c, status, detail);
        return;
    }
}

static void conn_dispatch(struct http_conn *c)
{
    assert(c->req == NULL && c->state == CONN_BODY);
    struct http_request *r = http__request_new(c, http_parse_take(&c->parse));
    if (r == NULL) {
        conn_fail(c, 503, "out of memory");
        return;
    }
    c->req = r;
    http__conn_set_state(c, CONN_HANDLER);
    http__conn_update_reading(c);
    r->dispatched = true;
    log_debug(HTTP_LOG_CAT, "connection %llu: request %llu %s", (unsigned long long)c->id,
              (unsigned long long)r->id, r->msg->method);
    /* From here the handler owns r; it may answer (and free r) before returning. */
    c->srv->handler(c->srv->ud, r);
}

/* Answers a request the server refuses by itself (limits, malformed input), then closes. */
static void conn_fail(struct http_conn *c, int status, const char *detail)
{
    assert(c->req == NULL); /* never once the handler owns a request */
    bool is_head = http_parse_is_head(&c->parse);
    log_warn(HTTP_LOG_CAT, "connection %llu: %d %s: %s", (unsigned long long)c->id, status,
             http__reason_phrase(status), detail);
    http_parse_fini(&c->parse); /* the refused request; nothing is parsed any more */
    c->close_after = true;
    http__conn_set_state(c, CONN_FLUSH);
    http__conn_update_reading(c);
    http__resp_problem(c, status, detail, is_head);
}

/* The response is on the wire: close, or go back to reading the next request. */
static void conn_after_flush(struct http_conn *c)
{
    assert(c->state == CONN_FLUSH && c->writes_in_flight == 0);
    if (c->close_after || c->srv->closing) {
        conn_linger(c);
        return;
    }
    http__conn_set_state(c, CONN_IDLE);
    conn_parse(c); /* requests that were pipelined behind the one just answered */
    if (c->tls != NULL) {
        conn_tls_pump(c); /* plaintext OpenSSL held back while the input buffer was full */
    }
    http__conn_update_reading(c);
}

/*
 * Lingering close: send FIN after the response, then read and drop whatever the client still
 * sends until it closes too (or cfg.linger_ms passes). Closing at once with unread input makes
 * the kernel send RST, and the client may lose our response (typically a 413 or 400 sent before
 * it finished sending).
 */
static void conn_linger(struct http_conn *c)
{
    if (c->saw_eof) {
        http__conn_close(c);
        return;
    }
    http__conn_set_state(c, CONN_LINGER);
    buf_reset(&c->in);
    if (c->tls != NULL) {
        /* close_notify before the FIN: the client can tell our end from a truncation. */
        http_tls_close_notify(c->tls);
        if (conn_tls_flush(c) != 0) {
            return; /* closed */
        }
    }
    int rc = uv_shutdown(&c->shutdown_req, (uv_stream_t *)&c->tcp, conn_on_shutdown);
    if (rc != 0) {
        http__conn_close(c);
        return;
    }
    http__conn_update_reading(c);
}

static void conn_handle_bytes(struct http_conn *c, size_t n)
{
    /* libuv filled the free tail that conn_on_alloc handed out. */
    c->in.len += n;
    switch (c->state) {
    case CONN_BODY:
        http__conn_arm_timer(c); /* inactivity limit: progress re-arms it */
        break;
    case CONN_LINGER:
    case CONN_CLOSING:
        buf_reset(&c->in);
        return;
    case CONN_HANDLER:
    case CONN_FLUSH:
        return; /* not reading in these states; keep the bytes for later */
    case CONN_HEAD:
    case CONN_IDLE:
    case CONN_NSTATES:
    default:
        break;
    }
    conn_parse(c);
    http__conn_update_reading(c);
}

static void conn_handle_read_error(struct http_conn *c, int err)
{
    if (c->state == CONN_CLOSING) {
        return;
    }
    if (err == UV_ENOBUFS && c->state == CONN_HANDLER) {
        /* A pipelining client filled the buffer while we answer: keep its bytes, stop reading. */
        c->hold_input = true;
        http__conn_update_reading(c);
        return;
    }
    c->saw_eof = true;
    if (err == UV_EOF) {
        /* A client may not half-close in the middle of a request and still expect an answer
         * from us; an incomplete request is dropped. */
        log_debug(HTTP_LOG_CAT, "connection %llu: peer closed (%s)", (unsigned long long)c->id,
                  state_names[c->state]);
    } else if (err == UV_ENOBUFS) {
        log_warn(HTTP_LOG_CAT, "connection %llu: input buffer full", (unsigned long long)c->id);
    } else {
        log_debug(HTTP_LOG_CAT, "connection %llu: read failed: %s", (unsigned long long)c->id,
                  agent_strerror(err));
    }
    http__conn_close(c);
}

static void conn_handle_timeout(struct http_conn *c)
{
    if (c->state == CONN_FLUSH && c->writes_in_flight == 0) {
        conn_after_flush(c);
        return;
    }
    log_debug(HTTP_LOG_CAT, "connection %llu: timeout in state %s", (unsigned long long)c->id,
              state_names[c->state]);
    http__conn_close(c);
}

void http__conn_write_done(struct http_conn *c, int status)
{
    if (c->state == CONN_CLOSING) {
        return;
    }
    if (status < 0) {
        log_debug(HTTP_LOG_CAT, "connection %llu: write failed: %s", (unsigned long long)c->id,
                  agent_strerror(status));
        http__conn_close(c); /* the abort callback, if any, runs from the close callback */
        return;
    }
    if (c->state == CONN_HANDLER) {
        http__conn_arm_timer(c);
        if (c->sf.queued && c->writes_in_flight == 0) {
            http__sendfile_start(c); /* the piece waited for the writes before it */
            return;
        }
        struct http_request *r = c->req;
        if (r != NULL && r->resp == RESP_STREAMING && r->drain_cb != NULL &&
            c->pending <= r->low_water) {
            /* The callback may end the response (freeing r) or close c: touch neither after. */
            r->drain_cb(r->drain_ud, r);
        }
        return;
    }
    if (c->state == CONN_FLUSH) {
        if (c->writes_in_flight == 0) {
            conn_after_flush(c);
        } else {
            http__conn_arm_timer(c);
        }
    }
}

void http__conn_close(struct http_conn *c)
{
    if (c->state == CONN_CLOSING) {
        return;
    }
    http__conn_set_state(c, CONN_CLOSING);
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    /* A sendfile worker still uses the descriptor: the socket closes when it returns. */
    if (!c->sf.busy) {
        uv_close((uv_handle_t *)&c->tcp, conn_on_close);
    }
    uv_close((uv_handle_t *)&c->timer, conn_on_close);
}

void http__conn_close_socket(struct http_conn *c)
{
    assert(c->state == CONN_CLOSING && !c->sf.busy);
    uv_close((uv_handle_t *)&c->tcp, conn_on_close);
}

bool http__conn_is_idle(const struct http_conn *c)
{
    return c->state == CONN_IDLE || c->state == CONN_LINGER ||
           (c->state == CONN_HEAD && http_parse_idle(&c->parse) && buf_size(&c->in) == 0);
}

/* Last close callback: libuv has run every write callback by now (with UV_ECANCELED for the
 * unsent ones), so nothing can reach c after this. */
static void conn_release(struct http_conn *c)
{
    struct http_request *r = c->req;
    if (c->sf.queued && c->sf.cb != NULL) {
        /* A piece still waiting for the writes before it: it never started, the file was never
         * used; its owner hears so before the abort callback (the callback runs exactly once). */
        http_sendfile_cb cb = c->sf.cb;
        c->sf.cb = NULL;
        c->sf.queued = false;
        cb(c->sf.ud, r, AGENT_E_CLOSED, 0);
    }
    if (r != NULL) {
        if (r->dispatched && r->abort_cb != NULL) {
            r->in_abort = true;
            r->abort_cb(r->abort_ud, r);
        }
        c->req = NULL;
        http__request_free(r);
    }
    log_debug(HTTP_LOG_CAT, "connection %llu closed", (unsigned long long)c->id);
    http_parse_fini(&c->parse);
    http_tls_free(c->tls);
    c->tls = NULL;
    buf_fini(&c->in);
    http__server_conn_gone(c->srv, c);
    free(c);
}

/* ---------------------------------------------------------------------------------------------
 * libuv callbacks
 * ------------------------------------------------------------------------------------------- */

/* Hands libuv the free tail of the capped input buffer: no allocation per read. An empty
 * buffer makes libuv report UV_ENOBUFS, which closes the connection. */
static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out)
{
    struct http_conn *c = h->data;
    struct buf *in = &c->in;
    (void)hint;
    if (c->state == CONN_LINGER) {
        buf_reset(in);
    }
    if (c->tls != NULL) {
        /* Ciphertext goes to the server's shared buffer and is fed to OpenSSL before the next
         * read. The same cap as plain HTTP applies to the plaintext side: a full input buffer
         * (a pipelining client while the handler works) pauses reading via UV_ENOBUFS. */
        bool full = in->max - buf_size(in) == 0 || http_tls_fed_pending(c->tls) >= HTTP_TLS_RBUF;
        *out = full && c->state != CONN_LINGER
                   ? uv_buf_init(NULL, 0)
                   : uv_buf_init((char *)c->srv->tls_rbuf, (unsigned int)HTTP_TLS_RBUF);
        return;
    }
    size_t want = in->max - buf_size(in);
    /* A connection starts with a small buffer (most request heads fit), grown to the cap only
     * when a read fills it: a thousand idle connections cost a thousand small buffers. */
    if (in->cap == 0 && want > HTTP_INBUF_FIRST) {
        want = HTTP_INBUF_FIRST;
    }
    if (want == 0 || buf_reserve(in, want) != 0) {
        *out = uv_buf_init(NULL, 0);
        return;
    }
    size_t room = in->cap - in->len - 1; /* buf keeps one byte for a NUL */
    *out = uv_buf_init((char *)in->p + in->len, (unsigned int)room);
}

static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct http_conn *c = st->data;
    if (nread > 0 && c->tls != NULL) {
        conn_tls_input(c, b->base, (size_t)nread);
    } else if (nread > 0) {
        conn_handle_bytes(c, (size_t)nread);
    } else if (nread < 0) {
        conn_handle_read_error(c, (int)nread);
    }
}

static void conn_on_timer(uv_timer_t *t)
{
    conn_handle_timeout(t->data);
}

static void conn_on_shutdown(uv_shutdown_t *req, int status)
{
    struct http_conn *c = req->data;
    if (status < 0 && c->state != CONN_CLOSING) {
        http__conn_close(c);
    }
}

static void conn_on_close(uv_handle_t *h)
{
    struct http_conn *c = h->data;
    if (--c->open_handles == 0) {
        conn_release(c);
    }
}

/* ---------------------------------------------------------------------------------------------
 * TLS glue: ciphertext from the socket goes into OpenSSL's read BIO, plaintext comes out into
 * c->in as if libuv had read it; every byte written goes through conn_write_tls; whatever
 * OpenSSL writes by itself (handshake, alerts, close_notify) is flushed after each call.
 * ------------------------------------------------------------------------------------------- */

/* Sends the ciphertext OpenSSL has pending. Returns 0, or an error after closing c. */
static int conn_tls_flush(struct http_conn *c)
{
    if (c->tls == NULL || c->state == CONN_CLOSING || http_tls_pending(c->tls) == 0) {
        return 0;
    }
    struct buf out;
    buf_init(&out, 0);
    int rc = http_tls_take(c->tls, &out);
    if (rc != 0) {
        buf_fini(&out);
        http__conn_close(c);
        return rc;
    }
    return http__resp_write_wire(c, &out);
}

/*
 * The handshake or a record failed: the connection is dead. One case gets an answer: a plain
 * HTTP request on the TLS port (a client that forgot the "s") gets a plain-text 400 saying so,
 * as Go's net/http does, instead of a connection closed without a word.
 */
static void conn_tls_failed(struct http_conn *c)
{
    if (http_tls_saw_plain_http(c->tls) && c->state == CONN_HEAD &&
        !http_parse_started(&c->parse)) {
        http_tls_free(c->tls);
        c->tls = NULL; /* from here this connection is plain HTTP: the answer, then linger */
        conn_fail(c, 400, "plain HTTP request sent to an HTTPS port; use https://");
        return;
    }
    log_info(HTTP_LOG_CAT, "connection %llu: TLS %s: %s", (unsigned long long)c->id,
             http_tls_handshake_done(c->tls) ? "error" : "handshake failed",
             http_tls_error(c->tls));
    http__conn_close(c);
}

/*
 * Decrypts into the free tail of c->in and hands each piece to conn_handle_bytes, the way a
 * plain read would, until OpenSSL needs more ciphertext or the input buffer is full (then the
 * rest stays inside OpenSSL until conn_after_flush calls again).
 */
static void conn_tls_pump(struct http_conn *c)
{
    struct buf *in = &c->in;
    for (;;) {
        if (c->tls == NULL || c->state == CONN_CLOSING || c->state == CONN_LINGER) {
            return;
        }
        if (c->state == CONN_FLUSH || (c->state == CONN_HANDLER && c->hold_input)) {
            /* Plain HTTP does not read in these states either: a close_notify that came with
             * the request must not close the connection under its queued response.
             * conn_after_flush pumps the rest. */
            return;
        }
        bool was_done = http_tls_handshake_done(c->tls);
        size_t want = in->max - buf_size(in);
        if (want == 0 || buf_reserve(in, want) != 0) {
            conn_tls_flush(c);
            return;
        }
        size_t got = 0;
        int rc = http_tls_read(c->tls, in->p + in->len, in->cap - in->len - 1, &got);
        if (conn_tls_flush(c) != 0) {
            return; /* closed */
        }
        if (rc == AGENT_E_CLOSED) {
            conn_handle_read_error(c, UV_EOF); /* close_notify: the client is done */
            return;
        }
        if (rc != 0) {
            conn_tls_failed(c);
            return;
        }
        if (!was_done && http_tls_handshake_done(c->tls) && log_get_level() <= LOG_DEBUG) {
            char what[96];
            log_debug(HTTP_LOG_CAT, "connection %llu: %s", (unsigned long long)c->id,
                      http_tls_describe(c->tls, what, sizeof(what)));
        }
        if (got == 0) {
            return;
        }
        conn_handle_bytes(c, got);
    }
}

/* Ciphertext read from the socket (in the server's shared buffer, so it is fed at once). */
static void conn_tls_input(struct http_conn *c, const char *data, size_t n)
{
    if (c->state == CONN_LINGER || c->state == CONN_CLOSING) {
        return; /* dropped, as plain HTTP input is in these states */
    }
    int rc = http_tls_feed(c->tls, data, n);
    if (rc != 0) {
        log_warn(HTTP_LOG_CAT, "connection %llu: TLS input: %s", (unsigned long long)c->id,
                 agent_strerror(rc));
        http__conn_close(c);
        return;
    }
    conn_tls_pump(c);
}

/* ---------------------------------------------------------------------------------------------
 * Accept
 * ------------------------------------------------------------------------------------------- */

static void log_accept(struct http_conn *c)
{
    if (log_get_level() > LOG_DEBUG) {
        return;
    }
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    char ip[64] = "?";
    int port = 0;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET6) {
            const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
            uv_ip6_name(a, ip, sizeof(ip));
            port = ntohs(a->sin6_port);
        } else {
            const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
            uv_ip4_name(a, ip, sizeof(ip));
            port = ntohs(a->sin_port);
        }
    }
    log_debug(HTTP_LOG_CAT, "connection %llu accepted from %s:%d%s", (unsigned long long)c->id, ip,
              port, c->rejecting ? " (over max_connections: 503)" : "");
}

/*
 * At the connection limit: closes the connection that has waited longest without a complete
 * request, if any, so the new one gets its slot: first one whose answer is done (lingering),
 * then one still reading its head, then a keep-alive idle one, then one still reading its body.
 * Requests being served (a handler owns them: traces, dumps) are never touched.
 */
static bool evict_one(struct http_server *s)
{
    static const enum conn_state order[] = {CONN_LINGER, CONN_HEAD, CONN_IDLE, CONN_BODY};
    struct http_conn *victim = NULL;
    for (size_t pass = 0; pass < sizeof(order) / sizeof(order[0]) && victim == NULL; pass++) {
        enum conn_state want = order[pass];
        for (struct http_conn *c = s->conns_tail; c != NULL; c = c->prev) {
            if (c->state == want && !c->rejecting && !c->evicted) {
                victim = c;
                break;
            }
        }
    }
    if (victim == NULL) {
        return false;
    }
    victim->evicted = true;
    s->nconns--;
    s->nevicted++;
    uint64_t now = uv_now(s->loop);
    if (s->evict_logged == 0 || now - s->evict_logged >= HTTP_EVICT_LOG_MS) {
        s->evict_logged = now;
        log_warn(HTTP_LOG_CAT,
                 "connection limit (%zu, Kestrel:Limits:MaxConcurrentConnections) reached: "
                 "closing the connections that have waited longest without sending a request "
                 "(%llu so far); is someone flooding the port?",
                 s->cfg.max_connections, (unsigned long long)s->nevicted);
    }
    log_debug(HTTP_LOG_CAT, "connection %llu evicted (%s)", (unsigned long long)victim->id,
              state_names[victim->state]);
    http__conn_close(victim);
    return true;
}

int http__conn_accept(struct http_server *s, struct http_listener *l)
{
    struct http_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        log_warn(HTTP_LOG_CAT, "cannot accept a connection: out of memory");
        return UV_ENOMEM;
    }
    c->srv = s;
    c->tag = l->tag;
    c->id = ++s->next_conn_id;
    c->state = CONN_HEAD;
    buf_init(&c->in, HTTP_INBUF_SIZE);
    const struct http_parse_limits lim = {.max_url = s->cfg.max_url,
                                          .max_header_bytes = s->cfg.max_header_bytes,
                                          .max_headers = s->cfg.max_headers,
                                          .max_body = s->cfg.max_body,
                                          .max_chunk_ext = HTTP_MAX_CHUNK_EXT};
    http_parse_init(&c->parse, &lim);
    c->tcp.data = c;
    c->timer.data = c;
    c->shutdown_req.data = c;
    int rc = uv_tcp_init(s->loop, &c->tcp);
    if (rc != 0) {
        log_warn(HTTP_LOG_CAT, "cannot accept a connection: %s", agent_strerror(rc));
        free(c);
        return rc;
    }
    uv_timer_init(s->loop, &c->timer); /* cannot fail on Unix */
    c->open_handles = 2;
    /* Linked (and counted) before anything can close it: conn_release unlinks. */
    if (s->nconns >= s->cfg.max_connections) {
        (void)evict_one(s); /* before c is linked: never c itself */
    }
    c->next = s->conns;
    if (s->conns != NULL) {
        s->conns->prev = c;
    } else {
        s->conns_tail = c;
    }
    s->conns = c;
    c->rejecting = s->nconns >= s->cfg.max_connections;
    size_t open_now = s->nconns + s->nrejecting + 1;
    if (open_now > s->peak_conns) {
        s->peak_conns = open_now;
    }
    if (c->rejecting) {
        s->nrejecting++;
    } else {
        s->nconns++;
    }

    rc = uv_accept((uv_stream_t *)&l->tcp, (uv_stream_t *)&c->tcp);
    if (rc != 0) {
        log_warn(HTTP_LOG_CAT, "accept failed: %s", agent_strerror(rc));
        http__conn_close(c);
        return 0;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    log_accept(c);
    if (l->tls && !c->rejecting) {
        rc = http_tls_new(s->cfg.tls, &c->tls);
        if (rc != 0) {
            log_warn(HTTP_LOG_CAT, "cannot accept a connection: TLS: %s", agent_strerror(rc));
            http__conn_close(c);
            return 0;
        }
    }
    if (c->rejecting) {
        /* On a TLS port the 503 would need a whole handshake first: just close. */
        if (s->nrejecting > HTTP_MAX_REJECTING || l->tls) {
            http__conn_close(c);
            return 0;
        }
        c->close_after = true;
        http__conn_set_state(c, CONN_FLUSH);
        http__resp_problem(
            c, 503, "the connection limit was reached (Kestrel:Limits:MaxConcurrentConnections)",
            false);
        return 0;
    }
    http__conn_arm_timer(c); /* header timeout from accept: a silent client is closed */
    http__conn_update_reading(c);
    return 0;
}
