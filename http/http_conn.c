/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* sendfile; before the first system header */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "http_internal.h"
#include "http_proto.h"
#include "http_router.h"
#include "log.h"

/*
 * One HTTP/1.x connection: a state machine (enum conn_state) driven by four libuv events (read,
 * write done, timer, close) and by the handler's response calls.
 *
 * Reading follows STYLE §2.5: llhttp parses every byte we read; on_message_complete returns
 * HPE_PAUSED, reading stops and the request goes to the handler. When the response has been
 * written in full, the parser is resumed on the bytes left after llhttp_get_error_pos (pipelined
 * requests) and reading starts again. So one request at a time is in flight per connection,
 * responses come out in request order, and a client that pipelines without reading can make us
 * buffer at most one input buffer plus one response.
 *
 * Lifetime (STYLE §2.4): the connection is freed only in the last close callback. Everything
 * that runs user code (handler, drain, abort) may start closing it, so code after such a call
 * re-checks c->state and c->req and never frees c directly. The abort callback runs from the close
 * callback only, never from inside a write callback or a handler call, so no frame up the stack
 * can still hold the request when it is freed.
 */

struct http_write {
    uv_write_t req;
    struct http_conn *c;
    char *data; /* malloc'd, freed in the write callback (libuv needs it until then) */
    size_t len; /* bytes on the wire */
    char frame[24]; /* chunk size line of an owned write (the "\r\n" after it is static) */
};

static const char *const state_names[CONN_NSTATES] = {
    [CONN_HEAD] = "head",       [CONN_BODY] = "body", [CONN_HANDLER] = "handler",
    [CONN_FLUSH] = "flush",     [CONN_IDLE] = "idle", [CONN_LINGER] = "linger",
    [CONN_CLOSING] = "closing",
};

#define STATE_BIT(s) (1u << (s))
/* Legal transitions, indexed by the current state (lwan-style table, STYLE §2.5). */
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
static void conn_set_state(struct http_conn *c, enum conn_state next);
static void conn_arm_timer(struct http_conn *c);
static void conn_update_reading(struct http_conn *c);
static void conn_parse(struct http_conn *c);
static void conn_dispatch(struct http_conn *c);
static void conn_fail(struct http_conn *c, int status, const char *detail);
static void conn_after_flush(struct http_conn *c);
static void conn_linger(struct http_conn *c);
static void conn_handle_bytes(struct http_conn *c, size_t n);
static void conn_handle_read_error(struct http_conn *c, int err);
static void conn_handle_timeout(struct http_conn *c);
static void conn_handle_write_done(struct http_conn *c, int status);
static void conn_release(struct http_conn *c);
/* sendfile (http_stream_sendfile) */
static void sf_start(struct http_conn *c);
/* libuv callbacks: thin, they only translate the event */
static void conn_on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *out);
static void conn_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);
static void conn_on_write(uv_write_t *req, int status);
static void conn_on_timer(uv_timer_t *t);
static void conn_on_shutdown(uv_shutdown_t *req, int status);
static void conn_on_close(uv_handle_t *h);
/* output */
static int conn_write(struct http_conn *c, struct buf *b);
static int conn_write_wire(struct http_conn *c, struct buf *b);
static int conn_send_problem(struct http_conn *c, int status, const char *detail, bool is_head);
/* TLS glue (http_tls.h holds the OpenSSL state machine) */
static void conn_tls_input(struct http_conn *c, const char *data, size_t n);
static void conn_tls_pump(struct http_conn *c);
static int conn_tls_flush(struct http_conn *c);
/* parsing */
static bool gap_scan(const struct http_conn *c, const char *end, bool *ends_lf);
/* requests */
static struct http_request *request_new(struct http_conn *c);
static void request_free(struct http_request *r);
static void request_complete(struct http_request *r, bool close);

/* ---------------------------------------------------------------------------------------------
 * State machine
 * ------------------------------------------------------------------------------------------- */

static void conn_set_state(struct http_conn *c, enum conn_state next)
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
    conn_arm_timer(c);
    conn_update_reading(c);
}

/*
 * One timer per connection; what it guards depends on the state (h2o's per-phase timers).
 * HEAD is armed only on entry, so a client dribbling its head cannot keep extending the
 * deadline; BODY is re-armed on every read (an inactivity limit, not a total one).
 */
static void conn_arm_timer(struct http_conn *c)
{
    const struct http_server_config *cfg = &c->srv->cfg;
    uint64_t ms;
    switch (c->state) {
    case CONN_HEAD:
        ms = cfg->header_timeout_ms;
        if (c->srv->nconns * 4 >= cfg->max_connections * 3 && ms > HTTP_PRESSURE_HEAD_MS) {
            ms = HTTP_PRESSURE_HEAD_MS;
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
        ms = HTTP_LINGER_MS;
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
static void conn_update_reading(struct http_conn *c)
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

/* Maps a parse failure to a status: 505 for versions we do not speak, 400 for the rest. */
static int status_for_parse_error(const struct http_conn *c, llhttp_errno_t err)
{
    if (err == HPE_PAUSED_H2_UPGRADE) {
        return 505; /* the HTTP/2 connection preface, "PRI * HTTP/2.0" */
    }
    if (err == HPE_INVALID_VERSION && c->version_len == 3 && c->version[0] >= '0' &&
        c->version[0] <= '9' && c->version[1] == '.' && c->version[2] >= '0' &&
        c->version[2] <= '9') {
        return 505; /* well-formed, just not one llhttp accepts (HTTP/1.2, HTTP/3.0) */
    }
    return 400;
}

/*
 * Feeds the unparsed input to llhttp. It stops after one of: every byte consumed (wait for more),
 * a complete request (the parser pauses at its end; dispatch it and keep the rest for later), or
 * a parse error (answer it and close).
 */
static void conn_parse(struct http_conn *c)
{
    const char *data = (const char *)buf_data(&c->in);
    size_t n = buf_size(&c->in);
    if (n == 0) {
        return;
    }
    c->exec_start = data;
    c->exec_end = data + n;
    llhttp_errno_t err = llhttp_execute(&c->parser, data, n);
    if (c->line == LINE_VALUE && c->value_spans == 0) {
        /* The input ended between a header name and its value: carry what the skipped bytes
         * held over to the next input (see gap_scan). */
        bool lf = false;
        c->gap_fold = gap_scan(c, c->exec_end, &lf);
        c->gap_lf = lf;
    }
    c->gap_from = NULL; /* points into this input only */
    c->exec_start = c->exec_end = NULL;

    if (c->state == CONN_CLOSING) {
        /* A callback's write failed (e.g. 100 Continue) and closed the connection already. */
        buf_reset(&c->in);
        return;
    }
    if (err == HPE_OK) {
        buf_reset(&c->in);
        if (c->state == CONN_HEAD || c->state == CONN_IDLE) {
            /* Bytes llhttp skips without a callback (leading CRLFs, whitespace) would escape
             * max_header_bytes; bound the raw size of an incomplete head as well. */
            const struct http_server_config *cfg = &c->srv->cfg;
            c->raw_head += n;
            if (c->raw_head > cfg->max_url + cfg->max_header_bytes + 4096) {
                conn_fail(c, 431, "request head too large");
            }
        }
        return;
    }
    if (err == HPE_PAUSED && c->err_status == 0) {
        const char *pos = llhttp_get_error_pos(&c->parser);
        buf_consume(&c->in, (size_t)(pos - data));
        conn_dispatch(c);
        return;
    }
    int status = c->err_status ? c->err_status : status_for_parse_error(c, err);
    const char *detail = c->err_detail;
    if (detail == NULL) {
        detail = llhttp_get_error_reason(&c->parser); /* static text, never request bytes */
    }
    buf_reset(&c->in);
    conn_fail(c, status, detail ? detail : "malformed request");
}

static void conn_dispatch(struct http_conn *c)
{
    struct http_request *r = c->req;
    assert(r != NULL && c->state == CONN_BODY);
    conn_set_state(c, CONN_HANDLER);
    conn_update_reading(c);
    r->dispatched = true;
    log_debug(HTTP_LOG_CAT, "connection %llu: request %llu %s", (unsigned long long)c->id,
              (unsigned long long)r->id, r->method);
    /* From here the handler owns r; it may answer (and free r) before returning. */
    c->srv->handler(c->srv->ud, r);
}

/* Answers a request the server refuses by itself (limits, malformed input), then closes. */
static void conn_fail(struct http_conn *c, int status, const char *detail)
{
    bool is_head = c->req != NULL && c->req->is_head;
    log_warn(HTTP_LOG_CAT, "connection %llu: %d %s: %s", (unsigned long long)c->id, status,
             http__reason_phrase(status), detail);
    if (c->req != NULL) {
        assert(!c->req->dispatched);
        request_free(c->req);
        c->req = NULL;
    }
    c->close_after = true;
    conn_set_state(c, CONN_FLUSH);
    conn_update_reading(c);
    conn_send_problem(c, status, detail, is_head);
}

/* The response is on the wire: close, or go back to reading the next request. */
static void conn_after_flush(struct http_conn *c)
{
    assert(c->state == CONN_FLUSH && c->writes_in_flight == 0);
    if (c->close_after || c->srv->closing) {
        conn_linger(c);
        return;
    }
    llhttp_resume(&c->parser);
    c->raw_head = 0;
    conn_set_state(c, CONN_IDLE);
    conn_parse(c); /* requests that were pipelined behind the one just answered */
    if (c->tls != NULL) {
        conn_tls_pump(c); /* plaintext OpenSSL held back while the input buffer was full */
    }
    conn_update_reading(c);
}

/*
 * Lingering close: send FIN after the response, then read and drop whatever the client still
 * sends until it closes too (or HTTP_LINGER_MS passes). Closing at once with unread input makes
 * the kernel send RST, and the client may lose our response (typically a 413 or 400 sent before
 * it finished sending).
 */
static void conn_linger(struct http_conn *c)
{
    if (c->saw_eof) {
        http__conn_close(c);
        return;
    }
    conn_set_state(c, CONN_LINGER);
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
    conn_update_reading(c);
}

static void conn_handle_bytes(struct http_conn *c, size_t n)
{
    /* libuv filled the free tail that conn_on_alloc handed out. */
    c->in.len += n;
    switch (c->state) {
    case CONN_BODY:
        conn_arm_timer(c); /* inactivity limit: progress re-arms it */
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
    conn_update_reading(c);
}

static void conn_handle_read_error(struct http_conn *c, int err)
{
    if (c->state == CONN_CLOSING) {
        return;
    }
    if (err == UV_ENOBUFS && c->state == CONN_HANDLER) {
        /* A pipelining client filled the buffer while we answer: keep its bytes, stop reading. */
        c->hold_input = true;
        conn_update_reading(c);
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

static void conn_handle_write_done(struct http_conn *c, int status)
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
        conn_arm_timer(c);
        if (c->sf.queued && c->writes_in_flight == 0) {
            sf_start(c); /* the piece waited for the writes before it */
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
            conn_arm_timer(c);
        }
    }
}

void http__conn_close(struct http_conn *c)
{
    if (c->state == CONN_CLOSING) {
        return;
    }
    conn_set_state(c, CONN_CLOSING);
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

bool http__conn_is_idle(const struct http_conn *c)
{
    return c->state == CONN_IDLE || c->state == CONN_LINGER ||
           (c->state == CONN_HEAD && c->req == NULL && c->raw_head == 0 && buf_size(&c->in) == 0);
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
        request_free(r);
    }
    log_debug(HTTP_LOG_CAT, "connection %llu closed", (unsigned long long)c->id);
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
        bool full = in->max - buf_size(in) == 0 ||
                    http_tls_fed_pending(c->tls) >= HTTP_TLS_RBUF;
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

static void conn_on_write(uv_write_t *req, int status)
{
    struct http_write *w = req->data;
    struct http_conn *c = w->c;
    c->writes_in_flight--;
    c->pending -= w->len;
    free(w->data);
    free(w);
    conn_handle_write_done(c, status);
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
    return conn_write_wire(c, &out);
}

/*
 * The handshake or a record failed: the connection is dead. One case gets an answer: a plain
 * HTTP request on the TLS port (a client that forgot the "s") gets a plain-text 400 saying so,
 * as Go's net/http does, instead of a connection closed without a word.
 */
static void conn_tls_failed(struct http_conn *c)
{
    if (http_tls_saw_plain_http(c->tls) && c->state == CONN_HEAD && c->req == NULL) {
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
 * Output
 * ------------------------------------------------------------------------------------------- */

/*
 * Submits w (w->data and w->len set; both taken) with its buffers. On failure w and its data are
 * freed and the connection is closed.
 */
static int conn_submit(struct http_conn *c, struct http_write *w, const uv_buf_t *ub,
                       unsigned int nb)
{
    w->req.data = w;
    w->c = c;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, ub, nb, conn_on_write);
    if (rc != 0) {
        free(w->data);
        free(w);
        log_debug(HTTP_LOG_CAT, "connection %llu: cannot write: %s", (unsigned long long)c->id,
                  agent_strerror(rc));
        http__conn_close(c);
        return rc;
    }
    c->writes_in_flight++;
    c->pending += w->len;
    if (c->state == CONN_HANDLER || c->state == CONN_FLUSH) {
        conn_arm_timer(c);
    }
    return 0;
}

/* Queues b's bytes for the socket as they are (taking its storage): plaintext on plain HTTP,
 * ciphertext on TLS. On failure the connection is closed. */
static int conn_write_wire(struct http_conn *c, struct buf *b)
{
    size_t len = 0;
    if (buf_size(b) > UINT_MAX) {
        buf_fini(b);
        http__conn_close(c);
        return AGENT_E_TOOBIG;
    }
    char *data = buf_steal(b, &len);
    struct http_write *w = data ? malloc(sizeof(*w)) : NULL;
    if (w == NULL) {
        free(data);
        http__conn_close(c);
        return UV_ENOMEM;
    }
    w->data = data;
    w->len = len;
    uv_buf_t ub = uv_buf_init(data, (unsigned int)len);
    return conn_submit(c, w, &ub, 1);
}

/*
 * Encrypts the pieces into one ciphertext write. The write queue (c->pending, the stream limits)
 * then counts ciphertext bytes, what really waits in the kernel and in libuv. On failure the
 * connection is closed: a lost record would corrupt the stream.
 */
static int conn_write_tls(struct http_conn *c, const struct http_tls_iov *iov, size_t niov)
{
    size_t total = 0;
    for (size_t i = 0; i < niov; i++) {
        total += iov[i].n;
    }
    struct buf enc;
    buf_init(&enc, 0);
    /* Room for the records' headers and tags (at most 29 bytes per 16 KiB record) and for any
     * ciphertext already pending, so that appending rarely reallocates. */
    int rc = buf_reserve(&enc, total + (total / 16384 + 1) * 32 + http_tls_pending(c->tls));
    rc = rc ? rc : http_tls_writev(c->tls, iov, niov, &enc);
    if (rc != 0) {
        buf_fini(&enc);
        log_warn(HTTP_LOG_CAT, "connection %llu: cannot encrypt the response: %s",
                 (unsigned long long)c->id,
                 rc == AGENT_E_PROTO ? http_tls_error(c->tls) : agent_strerror(rc));
        http__conn_close(c);
        return rc;
    }
    return conn_write_wire(c, &enc);
}

/* Queues b's bytes (taking its storage), through TLS on an https connection. On failure the
 * connection is closed. */
static int conn_write(struct http_conn *c, struct buf *b)
{
    if (c->tls == NULL) {
        return conn_write_wire(c, b);
    }
    struct http_tls_iov iov = {.p = buf_data(b), .n = buf_size(b)};
    int rc = conn_write_tls(c, &iov, 1);
    buf_fini(b);
    return rc;
}

/*
 * Queues len bytes at data, which lie inside the malloc'd block base (taken: freed once written,
 * or now on failure), framed as one chunk when chunked: no copy of the payload on plain HTTP.
 * Over TLS the bytes are encrypted at once and base is freed right away.
 * On failure the connection is closed.
 */
static int conn_write_owned(struct http_conn *c, void *base, const void *data, size_t len,
                            bool chunked)
{
    static char crlf[] = "\r\n";
    if (c->tls != NULL) {
        char frame[24];
        struct http_tls_iov iov[3];
        size_t n = 0;
        if (chunked) {
            int k = snprintf(frame, sizeof(frame), "%zx\r\n", len);
            iov[n++] = (struct http_tls_iov){.p = frame, .n = (size_t)k};
        }
        iov[n++] = (struct http_tls_iov){.p = data, .n = len};
        if (chunked) {
            iov[n++] = (struct http_tls_iov){.p = crlf, .n = 2};
        }
        int rc = conn_write_tls(c, iov, n);
        free(base);
        return rc;
    }
    struct http_write *w = len <= UINT_MAX ? malloc(sizeof(*w)) : NULL;
    if (w == NULL) {
        free(base);
        http__conn_close(c);
        return len <= UINT_MAX ? UV_ENOMEM : AGENT_E_TOOBIG;
    }
    uv_buf_t ub[3];
    unsigned int nb = 0;
    w->len = len;
    if (chunked) {
        int k = snprintf(w->frame, sizeof(w->frame), "%zx\r\n", len);
        ub[nb++] = uv_buf_init(w->frame, (unsigned int)k);
        w->len += (size_t)k + 2;
    }
    ub[nb++] = uv_buf_init((char *)(uintptr_t)data, (unsigned int)len);
    if (chunked) {
        ub[nb++] = uv_buf_init(crlf, 2);
    }
    w->data = base;
    return conn_submit(c, w, ub, nb);
}

/* Writes an RFC 7807 response with Connection: close (the caller closes after the flush). */
static int conn_send_problem(struct http_conn *c, int status, const char *detail, bool is_head)
{
    struct buf body, out;
    buf_init(&body, 0);
    buf_init(&out, 0);
    int rc = http_problem_json(&body, status, NULL, detail);
    rc = rc ? rc
            : http__head_begin(&out, status, http__server_date(c->srv), "application/problem+json");
    if (rc == 0 && status == 503) {
        rc = http__head_field(&out, "Retry-After", "1"); /* over the limit: a moment is enough */
    }
    rc = rc ? rc : http__head_end(&out, HTTP_FRAME_LENGTH, buf_size(&body), HTTP_CONN_CLOSE);
    if (rc == 0 && !is_head) {
        rc = buf_append(&out, buf_data(&body), buf_size(&body));
    }
    buf_fini(&body);
    if (rc != 0) {
        buf_fini(&out);
        http__conn_close(c);
        return rc;
    }
    return conn_write(c, &out);
}

/* ---------------------------------------------------------------------------------------------
 * llhttp callbacks: they only copy bytes and record decisions; conn_parse acts on them.
 * ------------------------------------------------------------------------------------------- */

/* Refuses the request from inside a callback: llhttp stops with an error and conn_parse
 * answers with this status. */
static int refuse(struct http_conn *c, int status, const char *detail)
{
    c->err_status = status;
    c->err_detail = detail;
    return HPE_USER;
}

static void head_append(struct http_conn *c, const char *at, size_t n, int *rc)
{
    if (*rc == 0 && !c->head_done) {
        *rc = buf_append(&c->req->head, at, n);
    }
}

/* The URL is the first string in the head buffer; terminate it before the first header. */
static int url_finish(struct http_conn *c)
{
    struct http_request *r = c->req;
    if (r->url_done) {
        return 0;
    }
    r->url_done = true;
    return buf_append(&r->head, "", 1);
}

/* Ends the current header line: terminates the name (if the value never started) and the
 * value, dropping trailing whitespace (llhttp keeps it; RFC 9110 §5.5 excludes it). */
static int line_finish(struct http_conn *c)
{
    int rc = 0;
    if (c->line == LINE_NAME) {
        head_append(c, "", 1, &rc);
        c->value_off = c->req->head.len;
        c->line = LINE_VALUE;
    }
    if (c->line == LINE_VALUE) {
        if (!c->head_done) {
            struct buf *h = &c->req->head;
            while (h->len > c->value_off && (h->p[h->len - 1] == ' ' || h->p[h->len - 1] == '\t')) {
                h->len--;
            }
        }
        head_append(c, "", 1, &rc);
        c->line = LINE_NONE;
    }
    return rc;
}

/*
 * Whether the bytes llhttp skipped between the end of the current header name and `end` hold an
 * obs-fold: a line break followed by SP or HTAB. (A line break alone is fine: the empty span of
 * an empty value starts after its own CRLF.) The skipped bytes may straddle reads: conn_parse
 * carries the state of earlier reads in gap_lf / gap_fold, since their buffer is gone by then.
 */
static bool gap_scan(const struct http_conn *c, const char *end, bool *ends_lf)
{
    const char *from = c->gap_from != NULL ? c->gap_from : c->exec_start;
    bool lf = c->gap_lf;
    bool fold = c->gap_fold;
    for (const char *q = from; q != NULL && q < end && !fold; q++) {
        fold = lf && (*q == ' ' || *q == '\t');
        lf = *q == '\n';
    }
    *ends_lf = lf;
    return fold;
}

static int conn_on_message_begin(llhttp_t *p)
{
    struct http_conn *c = p->data;
    if (c->state == CONN_IDLE) {
        conn_set_state(c, CONN_HEAD); /* the header timeout starts at the first byte */
    }
    c->err_status = 0;
    c->err_detail = NULL;
    c->header_bytes = 0;
    c->chunk_ext_bytes = 0;
    c->nheaders = 0;
    c->line = LINE_NONE;
    c->value_spans = 0;
    c->gap_from = NULL;
    c->gap_lf = false;
    c->gap_fold = false;
    c->head_done = false;
    c->version_len = 0;
    assert(c->req == NULL);
    c->req = request_new(c);
    if (c->req == NULL) {
        return refuse(c, 503, "out of memory");
    }
    return 0;
}

static int conn_on_url(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    struct http_request *r = c->req;
    r->is_head = llhttp_get_method(p) == HTTP_HEAD;
    if (n > c->srv->cfg.max_url - r->url_len) {
        return refuse(c, 414, "request target too long");
    }
    r->url_len += n;
    if (buf_append(&r->head, at, n) != 0) {
        return refuse(c, 503, "out of memory");
    }
    return 0;
}

static int conn_on_url_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    return url_finish(c) == 0 ? 0 : refuse(c, 503, "out of memory");
}

static int conn_on_version(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    for (size_t i = 0; i < n && c->version_len < sizeof(c->version) - 1; i++) {
        c->version[c->version_len++] = at[i];
    }
    c->version[c->version_len] = '\0';
    return 0;
}

/* Counts a piece of the header section against max_header_bytes (trailers count too). */
static int count_header_bytes(struct http_conn *c, size_t n)
{
    if (n > c->srv->cfg.max_header_bytes - c->header_bytes) {
        return refuse(c, 431, "request header section too large");
    }
    c->header_bytes += n;
    return 0;
}

static int conn_on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    int rc = 0;
    if (c->line == LINE_VALUE) {
        rc = line_finish(c); /* llhttp did not report the previous value as complete */
    }
    if (c->line == LINE_NONE) {
        if (++c->nheaders > c->srv->cfg.max_headers) {
            return refuse(c, 431, "too many header fields");
        }
        if (count_header_bytes(c, 4) != 0) { /* ": " and CRLF */
            return HPE_USER;
        }
        if (rc == 0 && !c->head_done) {
            rc = url_finish(c);
        }
        c->line = LINE_NAME;
        c->name_len = 0;
    }
    if (count_header_bytes(c, n) != 0) {
        return HPE_USER;
    }
    /* llhttp 8 lets "Name :" (and, in trailers, "Na me") through; RFC 9112 §5.1 says 400. */
    if (n > 0 && !http__is_token(at, n)) {
        return refuse(c, 400, "invalid header field name");
    }
    c->name_len += n;
    c->gap_from = at + n;
    c->gap_lf = false;
    c->gap_fold = false;
    head_append(c, at, n, &rc);
    return rc == 0 ? 0 : refuse(c, 503, "out of memory");
}

static int conn_on_header_field_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    int rc = 0;
    if (c->line == LINE_NAME && c->name_len == 0) {
        return refuse(c, 400, "empty header field name");
    }
    if (c->line == LINE_NAME) {
        head_append(c, "", 1, &rc);
        c->value_off = c->req->head.len;
        c->line = LINE_VALUE;
        c->value_spans = 0;
    }
    return rc == 0 ? 0 : refuse(c, 503, "out of memory");
}

static int conn_on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    if (c->line == LINE_NAME && conn_on_header_field_complete(p) != 0) {
        return HPE_USER;
    }
    bool lf;
    if (c->value_spans == 0 &&
        (gap_scan(c, at, &lf) || (n > 0 && (at[0] == ' ' || at[0] == '\t')))) {
        /* llhttp's skip of the whitespace before a value also swallows an obs-fold right after
         * the colon ("X:\r\n b"): look at the skipped bytes themselves. */
        return refuse(c, 400, "obsolete line folding in a header field");
    }
    if (c->value_spans > 0) {
        /*
         * llhttp reports one value in several spans in two cases: the value straddles two reads,
         * or an obs-fold (CRLF then SP/HTAB) continues it, which llhttp 8 accepts. Spans of a
         * straddling value touch the ends of their inputs; a fold leaves its CRLF between them.
         * RFC 9112 §5.2: reject obs-fold with 400.
         */
        if (!c->last_value_at_end || at != c->exec_start) {
            return refuse(c, 400, "obsolete line folding in a header field");
        }
    }
    c->value_spans++;
    c->last_value_at_end = at + n == c->exec_end;
    if (count_header_bytes(c, n) != 0) {
        return HPE_USER;
    }
    int rc = 0;
    head_append(c, at, n, &rc);
    return rc == 0 ? 0 : refuse(c, 503, "out of memory");
}

static int conn_on_header_value_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    return line_finish(c) == 0 ? 0 : refuse(c, 503, "out of memory");
}

/*
 * Walks url\0 (name\0value\0)* in the head buffer: header names, Host count, framing headers
 * llhttp ignored, and the Expect value. Returns 0 or an HTTP status.
 */
static int check_fields(const struct http_conn *c, const struct http_request *r,
                        const char **expect, const char **detail)
{
    const llhttp_t *p = &c->parser;
    const char *h = (const char *)buf_data(&r->head);
    size_t len = buf_size(&r->head);
    size_t off = r->url_len + 1;
    size_t hosts = 0;
    for (size_t i = 0; i < c->nheaders; i++) {
        const char *name = h + off;
        size_t nl = strnlen(name, len - off);
        const char *value = name + nl + 1;
        size_t vl = strnlen(value, len - off - nl - 1);
        if (!http__is_token(name, nl)) {
            /* llhttp 8 lets "Name :" and ": value" through; RFC 9112 §5.1 says 400. */
            *detail = "invalid header field name";
            return 400;
        }
        if (strcasecmp(name, "host") == 0) {
            hosts++;
        } else if (strcasecmp(name, "expect") == 0) {
            *expect = value;
        } else if ((strcasecmp(name, "transfer-encoding") == 0 &&
                    !(p->flags & F_TRANSFER_ENCODING)) ||
                   (strcasecmp(name, "content-length") == 0 && !(p->flags & F_CONTENT_LENGTH))) {
            /* llhttp ignores an empty Transfer-Encoding (or Content-Length): framing that a
             * proxy in front of us may read differently. RFC 9112 §6.3: refuse. */
            *detail = "invalid message framing header";
            return 400;
        }
        off += nl + 1 + vl + 1;
    }
    if (hosts > 1 || (hosts == 0 && r->http_minor == 1)) {
        /* RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one otherwise. */
        *detail = hosts ? "more than one Host header" : "missing Host header";
        return 400;
    }
    return 0;
}

/*
 * Appends path\0 and query\0 after the headers, then points the request's strings into the head
 * buffer, which does not change any more. Returns 0 or a buf error.
 */
static int request_set_strings(struct http_request *r, size_t nheaders, size_t path_off,
                               size_t path_len, size_t query_off, size_t query_len)
{
    /* Reserve first: appending from the buffer's own bytes must not move them mid-copy. */
    int rc = buf_reserve(&r->head, path_len + query_len + 3);
    const char *h = (const char *)buf_data(&r->head);
    size_t path_at = buf_size(&r->head);
    if (path_len > 0) {
        rc = rc ? rc : buf_append(&r->head, h + path_off, path_len);
    } else {
        rc = rc ? rc : buf_append(&r->head, "/", 1); /* "http://host" means "/" */
    }
    rc = rc ? rc : buf_append(&r->head, "", 1);
    size_t query_at = buf_size(&r->head);
    rc = rc ? rc : buf_append(&r->head, h + query_off, query_len);
    rc = rc ? rc : buf_append(&r->head, "", 1);
    if (rc == 0 && nheaders > 0) {
        r->headers = calloc(nheaders, sizeof(*r->headers));
        rc = r->headers ? 0 : UV_ENOMEM;
    }
    if (rc != 0) {
        return rc;
    }
    h = (const char *)buf_data(&r->head);
    r->target = h;
    r->path = h + path_at;
    r->query = h + query_at;
    size_t off = r->url_len + 1;
    for (size_t i = 0; i < nheaders; i++) {
        r->headers[i].name = h + off;
        off += strlen(h + off) + 1;
        r->headers[i].value = h + off;
        off += strlen(h + off) + 1;
    }
    r->nheaders = nheaders;
    return 0;
}

/*
 * The head is complete: check what llhttp leaves to us (RFC 9112 rules it does not enforce in
 * its default mode), then turn the head buffer into the request's strings.
 * Returns 0 or an HTTP status.
 */
static int request_finish_head(struct http_conn *c, struct http_request *r, const char **detail)
{
    llhttp_t *p = &c->parser;
    r->http_major = llhttp_get_http_major(p);
    r->http_minor = llhttp_get_http_minor(p);
    uint8_t method = llhttp_get_method(p);
    r->method = llhttp_method_name((llhttp_method_t)method);
    r->is_head = method == HTTP_HEAD;
    if (r->http_major != 1) {
        *detail = "only HTTP/1.0 and HTTP/1.1 are supported";
        return 505;
    }
    if (method == HTTP_CONNECT) {
        *detail = "CONNECT is not supported";
        return 405;
    }
    if (r->http_minor == 0 && (p->flags & F_TRANSFER_ENCODING)) {
        /* RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing. */
        *detail = "Transfer-Encoding in an HTTP/1.0 request";
        return 400;
    }
    const char *expect = NULL;
    int status = check_fields(c, r, &expect, detail);
    if (status != 0) {
        return status;
    }
    size_t path_off, path_len, query_off, query_len;
    if (http__split_target((const char *)buf_data(&r->head), r->url_len, method == HTTP_OPTIONS,
                           &path_off, &path_len, &query_off, &query_len) != 0) {
        *detail = "invalid request target";
        return 400;
    }
    if ((p->flags & F_CONTENT_LENGTH) && p->content_length > c->srv->cfg.max_body) {
        *detail = "request body too large";
        return 413; /* answered before a single body byte is read */
    }
    if (expect != NULL) {
        if (strcasecmp(expect, "100-continue") != 0) {
            *detail = "unsupported expectation";
            return 417;
        }
        bool has_body = (p->flags & F_CHUNKED) || p->content_length > 0;
        r->expect_continue = has_body && r->http_minor == 1;
    }
    if (request_set_strings(r, c->nheaders, path_off, path_len, query_off, query_len) != 0) {
        *detail = "out of memory";
        return 503;
    }
    return 0;
}

static int conn_on_headers_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    struct http_request *r = c->req;
    if (line_finish(c) != 0 || url_finish(c) != 0) {
        refuse(c, 503, "out of memory");
        return -1;
    }
    c->head_done = true;
    c->raw_head = 0;
    const char *detail = NULL;
    int status = request_finish_head(c, r, &detail);
    if (status != 0) {
        refuse(c, status, detail);
        return -1;
    }
    /* We never switch protocols: serve "Upgrade: websocket" requests as plain HTTP, and keep
     * parsing what follows as HTTP instead of pausing for an upgrade (CONNECT is refused above). */
    p->upgrade = 0;
    conn_set_state(c, CONN_BODY);
    if (r->expect_continue) {
        /* RFC 9110 §10.1.1: the client waits for this before sending the body. */
        struct buf out;
        buf_init(&out, 0);
        if (buf_append_str(&out, "HTTP/1.1 100 Continue\r\n\r\n") != 0 ||
            conn_write(c, &out) != 0) {
            buf_fini(&out);
            refuse(c, 503, "cannot write 100 Continue");
            return -1;
        }
    }
    return 0;
}

static int conn_on_body(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    int rc = buf_append(&c->req->body, at, n);
    if (rc == AGENT_E_TOOBIG) {
        return refuse(c, 413, "request body too large"); /* chunked bodies end up here */
    }
    return rc == 0 ? 0 : refuse(c, 503, "out of memory");
}

/* Chunk extensions are dropped, but bounded: otherwise a client could stream them forever
 * inside one chunk-size line. */
static int conn_on_chunk_extension(llhttp_t *p, const char *at, size_t n)
{
    struct http_conn *c = p->data;
    (void)at;
    if (n > HTTP_MAX_CHUNK_EXT - c->chunk_ext_bytes) {
        return refuse(c, 400, "chunk extensions too large");
    }
    c->chunk_ext_bytes += n;
    return 0;
}

static int conn_on_message_complete(llhttp_t *p)
{
    struct http_conn *c = p->data;
    c->req->keep_alive = llhttp_should_keep_alive(p) != 0;
    return HPE_PAUSED; /* conn_parse dispatches; the rest of the input waits */
}

void http__conn_settings_init(llhttp_settings_t *s)
{
    llhttp_settings_init(s);
    s->on_message_begin = conn_on_message_begin;
    s->on_url = conn_on_url;
    s->on_url_complete = conn_on_url_complete;
    s->on_version = conn_on_version;
    s->on_header_field = conn_on_header_field;
    s->on_header_field_complete = conn_on_header_field_complete;
    s->on_header_value = conn_on_header_value;
    s->on_header_value_complete = conn_on_header_value_complete;
    s->on_headers_complete = conn_on_headers_complete;
    s->on_body = conn_on_body;
    s->on_chunk_extension_name = conn_on_chunk_extension;
    s->on_chunk_extension_value = conn_on_chunk_extension;
    s->on_message_complete = conn_on_message_complete;
}

/* ---------------------------------------------------------------------------------------------
 * sendfile: a file piece straight from the page cache to the socket, on the thread pool
 * ------------------------------------------------------------------------------------------- */

#define SF_SEND_TIMEOUT_S 1 /* a blocking send returns after this without progress */
#define SF_SLICE_MS       1000 /* a work item gives its pool thread back after about this */

static int sf_errno(void)
{
    return errno != 0 ? -errno : UV_EIO;
}

/*
 * On a pool thread, the socket in blocking mode with a send timeout: the chunk's size line, the
 * file's bytes, the "\r\n"; stops at the first timeout (EAGAIN) with whatever went out, so each
 * work item is bounded; the loop queues the next one.
 */
static uint64_t sf_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void sf_work(uv_work_t *w)
{
    struct http_sendfile *sf = w->data;
    sf->progress = false;
    sf->err = 0;
    uint64_t until = sf_now_ms() + SF_SLICE_MS; /* a slow client must not hold the thread */
    /* The loop keeps off the socket while this runs (reading stopped, no writes queued). */
    if (!sf->sized) {
        struct stat st;
        if (fstat(sf->file, &st) != 0) {
            sf->err = sf_errno();
            return;
        }
        uint64_t avail = (uint64_t)st.st_size > sf->offset ? (uint64_t)st.st_size - sf->offset : 0;
        sf->chunk_len = avail < sf->max ? (size_t)avail : sf->max;
        sf->sized = true;
        if (sf->chunk_len == 0) {
            return; /* nothing there yet */
        }
        sf->hdr_len = sf->chunked ? (size_t)snprintf(sf->hdr, sizeof(sf->hdr), "%zx\r\n",
                                                     sf->chunk_len)
                                  : 0;
    }
    while (sf->hdr_sent < sf->hdr_len) {
        ssize_t n = send(sf->sock, sf->hdr + sf->hdr_sent, sf->hdr_len - sf->hdr_sent,
                         MSG_NOSIGNAL);
        if (n < 0) {
            sf->err = errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
            return;
        }
        sf->hdr_sent += (size_t)n;
        sf->progress = true;
    }
    while (sf->done < sf->chunk_len) {
        off_t pos = (off_t)(sf->offset + sf->done);
        ssize_t n = sendfile(sf->sock, sf->file, &pos, sf->chunk_len - sf->done);
        if (n < 0) {
            sf->err = errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
            return;
        }
        if (n == 0) {
            sf->err = UV_EIO; /* the file is shorter than it was: it was truncated */
            return;
        }
        sf->done += (size_t)n;
        sf->progress = true;
        if (sf->done < sf->chunk_len && sf_now_ms() >= until) {
            return; /* the loop queues the rest */
        }
    }
    static const char crlf[] = "\r\n";
    while (sf->chunked && sf->trl_sent < 2) {
        ssize_t n = send(sf->sock, crlf + sf->trl_sent, 2 - sf->trl_sent, MSG_NOSIGNAL);
        if (n < 0) {
            sf->err = errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
            return;
        }
        sf->trl_sent += (size_t)n;
        sf->progress = true;
    }
}

static bool sf_finished(const struct http_sendfile *sf)
{
    return sf->sized && (sf->chunk_len == 0 ||
                         (sf->done == sf->chunk_len && (!sf->chunked || sf->trl_sent == 2)));
}

static void sf_after(uv_work_t *w, int status)
{
    struct http_conn *c = (struct http_conn *)(void *)((char *)w - offsetof(struct http_conn, sf.work));
    struct http_sendfile *sf = &c->sf;
    int nonblocking = 1;
    (void)ioctl(sf->sock, FIONBIO, &nonblocking);
    sf->busy = false;
    if (c->state == CONN_CLOSING) {
        /* The owner learns that the file is no longer used, then the socket closes (deferred by
         * http__conn_close); the abort callback comes after, from the close callback. */
        http_sendfile_cb cb = sf->cb;
        sf->cb = NULL;
        if (cb != NULL) {
            cb(sf->ud, c->req, AGENT_E_CLOSED, sf->done);
        }
        uv_close((uv_handle_t *)&c->tcp, conn_on_close);
        return;
    }
    int err = status != 0 ? status : sf->err;
    uint64_t now = uv_now(c->srv->loop);
    if (sf->progress) {
        sf->last_progress = now;
    }
    if (err == 0 && !sf_finished(sf) && now - sf->last_progress > c->srv->cfg.write_timeout_ms) {
        err = AGENT_E_TIMEOUT; /* the client reads nothing */
    }
    if (err == 0 && !sf_finished(sf)) {
        sf_start(c); /* timed out once with the piece half out: go on */
        return;
    }
    http_sendfile_cb cb = sf->cb;
    void *ud = sf->ud;
    size_t sent = err == 0 ? sf->chunk_len : sf->done;
    sf->cb = NULL;
    struct http_request *r = c->req;
    if (err != 0) {
        log_debug(HTTP_LOG_CAT, "connection %llu: sendfile failed after %zu bytes: %s",
                  (unsigned long long)c->id, sf->done, agent_strerror(err));
        http__conn_close(c); /* closes the socket at once: no worker any more */
        if (cb != NULL) {
            cb(ud, r, err, sent);
        }
        return;
    }
    conn_update_reading(c); /* watch for the client going away again */
    if (cb != NULL) {
        cb(ud, r, 0, sent); /* may end the response or start the next piece */
    }
}

static void sf_start(struct http_conn *c)
{
    struct http_sendfile *sf = &c->sf;
    sf->queued = false;
    if (c->reading) {
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
    }
    int blocking = 0;
    struct timeval tv = {.tv_sec = SF_SEND_TIMEOUT_S, .tv_usec = 0};
    int rc = setsockopt(sf->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0 ||
                     ioctl(sf->sock, FIONBIO, &blocking) != 0
                 ? sf_errno()
                 : 0;
    if (rc == 0) {
        sf->busy = true;
        sf->work.data = sf;
        rc = uv_queue_work(c->srv->loop, &sf->work, sf_work, sf_after);
    }
    if (rc != 0) {
        /* Not reached in practice; fail the piece like a failed write. */
        sf->busy = false;
        int nonblocking = 1;
        (void)ioctl(sf->sock, FIONBIO, &nonblocking);
        http_sendfile_cb cb = sf->cb;
        sf->cb = NULL;
        http__conn_close(c);
        if (cb != NULL) {
            cb(sf->ud, c->req, rc, 0);
        }
    }
}

bool http_stream_can_sendfile(const struct http_request *r)
{
    return r != NULL && r->resp == RESP_STREAMING && !r->discard_body && r->conn->tls == NULL;
}

int http_stream_sendfile(struct http_request *r, int fd, uint64_t offset, size_t max,
                         http_sendfile_cb cb, void *ud)
{
    if (!http_stream_can_sendfile(r) || fd < 0 || max == 0 || cb == NULL) {
        return AGENT_E_INVAL;
    }
    struct http_conn *c = r->conn;
    if (r->in_abort || c->state != CONN_HANDLER) {
        return AGENT_E_CLOSED;
    }
    struct http_sendfile *sf = &c->sf;
    if (sf->busy || sf->queued) {
        return AGENT_E_INVAL;
    }
    uv_os_fd_t sock;
    if (uv_fileno((const uv_handle_t *)&c->tcp, &sock) != 0) {
        return AGENT_E_CLOSED;
    }
    memset(sf, 0, sizeof(*sf));
    sf->cb = cb;
    sf->ud = ud;
    sf->sock = sock;
    sf->file = fd;
    sf->offset = offset;
    sf->max = max;
    sf->chunked = r->chunked;
    sf->last_progress = uv_now(c->srv->loop);
    sf->queued = true;
    if (c->writes_in_flight == 0) {
        sf_start(c);
    }
    return 0;
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
    llhttp_init(&c->parser, HTTP_REQUEST, &s->settings);
    c->parser.data = c;
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
        conn_set_state(c, CONN_FLUSH);
        conn_send_problem(c, 503,
                          "the connection limit was reached (Kestrel:Limits:MaxConcurrentConnections)",
                          false);
        return 0;
    }
    conn_arm_timer(c); /* header timeout from accept: a silent client is closed */
    conn_update_reading(c);
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Requests and the public response API
 * ------------------------------------------------------------------------------------------- */

static struct http_request *request_new(struct http_conn *c)
{
    struct http_request *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    const struct http_server_config *cfg = &c->srv->cfg;
    r->conn = c;
    r->id = ++c->srv->next_req_id;
    r->tag = c->tag;
    r->method = "";
    r->target = r->path = r->query = "";
    /* URL, NULs and header bytes are capped by the parser callbacks; path and query copies add
     * at most one more URL. */
    buf_init(&r->head, 2 * cfg->max_url + cfg->max_header_bytes + 2 * cfg->max_headers + 64);
    buf_init(&r->body, cfg->max_body);
    return r;
}

static void request_free(struct http_request *r)
{
    if (r == NULL) {
        return;
    }
    buf_fini(&r->head);
    buf_fini(&r->body);
    free(r->headers);
    free(r);
}

/* The handler is done with r: free it and wait for the writes to finish. */
static void request_complete(struct http_request *r, bool close)
{
    struct http_conn *c = r->conn;
    c->req = NULL;
    request_free(r);
    if (c->state == CONN_CLOSING) {
        return;
    }
    if (close) {
        c->close_after = true;
    }
    conn_set_state(c, CONN_FLUSH);
}

/* Whether the response to r keeps the connection, and which Connection header says so. */
static enum http_conn_header response_connection(const struct http_request *r, bool *close)
{
    const struct http_conn *c = r->conn;
    bool keep = r->keep_alive && !c->close_after && !c->srv->closing;
    *close = !keep;
    if (!keep) {
        return HTTP_CONN_CLOSE;
    }
    return r->http_minor == 0 ? HTTP_CONN_KEEP_ALIVE : HTTP_CONN_NONE;
}

static int build_head(const struct http_request *r, struct buf *out, int status,
                      const char *content_type, const struct http_header *extra, size_t nextra,
                      enum http_framing framing, uint64_t length, enum http_conn_header conn)
{
    int rc = http__head_begin(out, status, http__server_date(r->conn->srv), content_type);
    for (size_t i = 0; rc == 0 && i < nextra; i++) {
        rc = http__head_field(out, extra[i].name, extra[i].value);
    }
    return rc ? rc : http__head_end(out, framing, length, conn);
}

const char *http_request_method(const struct http_request *r)
{
    return r->method;
}

const char *http_request_target(const struct http_request *r)
{
    return r->target;
}

const char *http_request_path(const struct http_request *r)
{
    return r->path;
}

const char *http_request_query(const struct http_request *r)
{
    return r->query;
}

const char *http_request_header(const struct http_request *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0) {
            return r->headers[i].value;
        }
    }
    return NULL;
}

size_t http_request_header_count(const struct http_request *r, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < r->nheaders; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0) {
            n++;
        }
    }
    return n;
}

const uint8_t *http_request_body(const struct http_request *r, size_t *len)
{
    if (len != NULL) {
        *len = buf_size(&r->body);
    }
    return buf_data(&r->body);
}

int http_request_tag(const struct http_request *r)
{
    return r->tag;
}

uint64_t http_request_id(const struct http_request *r)
{
    return r->id;
}

void http_request_on_abort(struct http_request *r, http_abort_cb cb, void *ud)
{
    r->abort_cb = cb;
    r->abort_ud = ud;
}

int http_respond(struct http_request *r, int status, const char *content_type,
                 const struct http_header *extra, size_t nextra, const void *body, size_t len)
{
    if (r == NULL) {
        return AGENT_E_INVAL;
    }
    if (r->in_abort) {
        return AGENT_E_CLOSED; /* freed when the abort callback returns */
    }
    struct http_conn *c = r->conn;
    if (c->state == CONN_CLOSING) {
        request_complete(r, true);
        return AGENT_E_CLOSED;
    }
    if (r->resp != RESP_NONE) {
        log_warn(HTTP_LOG_CAT, "request %llu: http_respond after http_stream_begin",
                 (unsigned long long)r->id);
        http_stream_abort(r);
        return AGENT_E_INVAL;
    }
    /* RFC 9110 §6.4.1: 204 and 304 have no content, and 204 no Content-Length either. */
    bool no_content = status == 204 || status == 304;
    bool close = false;
    enum http_conn_header conn = response_connection(r, &close);
    struct buf out;
    buf_init(&out, 0);
    int ret = status >= 200
                  ? build_head(r, &out, status, content_type, extra, nextra,
                               no_content ? HTTP_FRAME_NONE : HTTP_FRAME_LENGTH, len, conn)
                  : AGENT_E_INVAL;
    int rc = ret;
    if (ret == AGENT_E_INVAL) {
        /* A handler bug (bad status or header): do not send half of it, answer 500. */
        log_warn(HTTP_LOG_CAT, "request %llu: invalid response (status %d or headers)",
                 (unsigned long long)r->id, status);
        buf_reset(&out);
        struct buf problem;
        buf_init(&problem, 0);
        rc = http_problem_json(&problem, 500, NULL, "invalid response");
        rc = rc ? rc
                : build_head(r, &out, 500, "application/problem+json", NULL, 0, HTTP_FRAME_LENGTH,
                             buf_size(&problem), conn);
        if (rc == 0 && !r->is_head) {
            rc = buf_append(&out, buf_data(&problem), buf_size(&problem));
        }
        buf_fini(&problem);
    } else if (rc == 0 && !no_content && !r->is_head && len > 0) {
        rc = buf_append(&out, body, len);
    }
    if (rc == 0) {
        rc = conn_write(c, &out);
    } else {
        buf_fini(&out);
        http__conn_close(c);
    }
    request_complete(r, close);
    return ret ? ret : rc;
}

int http_stream_begin(struct http_request *r, int status, const char *content_type,
                      const struct http_header *extra, size_t nextra)
{
    if (r == NULL || r->resp != RESP_NONE || status < 200 || status == 204 || status == 304) {
        return AGENT_E_INVAL;
    }
    struct http_conn *c = r->conn;
    if (r->in_abort || c->state == CONN_CLOSING) {
        return AGENT_E_CLOSED;
    }
    /* HTTP/1.0 has no chunked coding: the body then ends when the connection does. */
    r->chunked = r->http_minor >= 1;
    bool close = false;
    enum http_conn_header conn = response_connection(r, &close);
    if (!r->chunked) {
        close = true;
        conn = HTTP_CONN_CLOSE;
    }
    struct buf out;
    buf_init(&out, 0);
    int rc = build_head(r, &out, status, content_type, extra, nextra,
                        r->chunked ? HTTP_FRAME_CHUNKED : HTTP_FRAME_NONE, 0, conn);
    if (rc != 0) {
        buf_fini(&out);
        return rc; /* the handler still owns r and must answer */
    }
    if (close) {
        c->close_after = true;
    }
    r->discard_body = r->is_head;
    r->resp = RESP_STREAMING;
    return conn_write(c, &out);
}

int http_stream_write(struct http_request *r, const void *data, size_t len)
{
    if (r == NULL || r->resp != RESP_STREAMING) {
        return AGENT_E_INVAL;
    }
    struct http_conn *c = r->conn;
    if (r->in_abort || c->state == CONN_CLOSING) {
        return AGENT_E_CLOSED;
    }
    if (len == 0 || r->discard_body) {
        return 0; /* a zero-length chunk would end the body */
    }
    if (c->pending >= c->srv->cfg.max_stream_pending ||
        len > c->srv->cfg.max_stream_pending - c->pending) {
        /* The handler ignored backpressure and the client is not reading (redis's
         * client-output-buffer-limit): drop the client rather than buffer without bound. */
        log_warn(HTTP_LOG_CAT, "connection %llu: client too slow, %zu bytes pending",
                 (unsigned long long)c->id, c->pending);
        http__conn_close(c);
        return AGENT_E_TOOBIG;
    }
    /* Exactly sized (chunk prefix ≤ 20 bytes + CRLF): no doubling, and small enough for the
     * allocator's heap rather than an mmap per chunk. */
    struct buf out;
    buf_init(&out, len + 24);
    int rc = buf_reserve(&out, len + 24);
    if (rc == 0 && r->chunked) {
        rc = http__chunk_prefix(&out, len);
    }
    rc = rc ? rc : buf_append(&out, data, len);
    if (rc == 0 && r->chunked) {
        rc = buf_append(&out, "\r\n", 2);
    }
    if (rc != 0) {
        buf_fini(&out);
        http__conn_close(c); /* a lost chunk would corrupt the body */
        return rc;
    }
    return conn_write(c, &out);
}

int http_stream_write_owned(struct http_request *r, void *base, const void *data, size_t len)
{
    if (r == NULL || r->resp != RESP_STREAMING || r->in_abort) {
        free(base);
        return r == NULL || r->resp != RESP_STREAMING ? AGENT_E_INVAL : AGENT_E_CLOSED;
    }
    struct http_conn *c = r->conn;
    if (c->state == CONN_CLOSING) {
        free(base);
        return AGENT_E_CLOSED;
    }
    if (len == 0 || r->discard_body) {
        free(base);
        return 0;
    }
    if (c->pending >= c->srv->cfg.max_stream_pending ||
        len > c->srv->cfg.max_stream_pending - c->pending) {
        free(base);
        log_warn(HTTP_LOG_CAT, "connection %llu: client too slow, %zu bytes pending",
                 (unsigned long long)c->id, c->pending);
        http__conn_close(c);
        return AGENT_E_TOOBIG;
    }
    return conn_write_owned(c, base, data, len, r->chunked);
}

size_t http_stream_pending(const struct http_request *r)
{
    return r != NULL ? r->conn->pending : 0;
}

void http_stream_on_drain(struct http_request *r, size_t low_water, http_drain_cb cb, void *ud)
{
    r->low_water = low_water;
    r->drain_cb = cb;
    r->drain_ud = ud;
}

int http_stream_end(struct http_request *r)
{
    if (r == NULL || r->resp != RESP_STREAMING) {
        return AGENT_E_INVAL;
    }
    if (r->in_abort) {
        return AGENT_E_CLOSED;
    }
    struct http_conn *c = r->conn;
    int rc = 0;
    if (c->state == CONN_CLOSING) {
        rc = AGENT_E_CLOSED;
    } else if (r->chunked && !r->discard_body) {
        struct buf out;
        buf_init(&out, 0);
        rc = buf_append_str(&out, "0\r\n\r\n");
        rc = rc ? rc : conn_write(c, &out);
        if (rc != 0) {
            buf_fini(&out);
        }
    }
    r->resp = RESP_DONE;
    request_complete(r, false);
    return rc;
}

void http_stream_abort(struct http_request *r)
{
    if (r == NULL || r->in_abort) {
        return;
    }
    struct http_conn *c = r->conn;
    c->req = NULL;
    request_free(r);
    http__conn_close(c);
}
