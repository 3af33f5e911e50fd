/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* sendfile; before the first system header */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "bufpool.h"
#include "err.h"
#include "http_internal.h"
#include "http_proto.h"
#include "http_query.h"
#include "log.h"

/*
 * The response side of a connection: the requests handed to the handler and the public
 * respond/stream API (http_server.h), the writes that carry responses to the socket (through
 * TLS on https connections), and sendfile pieces on the thread pool. http_conn.c owns the state
 * machine; this file asks it to move on (http__conn_set_state) and hears back from it. A local
 * request (conn NULL) has no socket: the response calls hand it to http_local.c once the checks
 * both kinds share are made, and the accessors serve both from the same struct http_msg.
 */

/* Room for a chunk's size line: 16 hex digits and its CRLF. */
#define CHUNK_FRAME 24

struct http_write {
    uv_write_t req;
    struct http_conn *c;
    char *data;              /* malloc'd, freed in the write callback (libuv needs it until then) */
    size_t len;              /* bytes on the wire */
    char frame[CHUNK_FRAME]; /* chunk size line of an owned write (chunk_bufs) */
};

static void resp_on_write(uv_write_t *req, int status);

/* ---------------------------------------------------------------------------------------------
 * Output
 * ------------------------------------------------------------------------------------------- */

/*
 * Submits w (w->data and w->len set; both taken) with its buffers. On failure w and its data are
 * freed and the connection is closed.
 */
static int resp_submit(struct http_conn *c, struct http_write *w, const uv_buf_t *ub,
                       unsigned int nb)
{
    w->req.data = w;
    w->c = c;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, ub, nb, resp_on_write);
    if (rc != 0) {
        bufpool_release(w->data);
        free(w);
        log_debug(HTTP_LOG_CAT, "connection %llu: cannot write: %s", (unsigned long long)c->id,
                  agent_strerror(rc));
        http__conn_close(c);
        return rc;
    }
    c->writes_in_flight++;
    c->pending += w->len;
    if (c->state == CONN_HANDLER || c->state == CONN_FLUSH) {
        http__conn_arm_timer(c);
    }
    return 0;
}

/* Queues b's bytes for the socket as they are (taking its storage): plaintext on plain HTTP,
 * ciphertext on TLS. On failure the connection is closed. */
int http__resp_write_wire(struct http_conn *c, struct buf *b)
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
    return resp_submit(c, w, &ub, 1);
}

/*
 * Encrypts the pieces into one ciphertext write. The write queue (c->pending, the stream limits)
 * then counts ciphertext bytes, what really waits in the kernel and in libuv. On failure the
 * connection is closed: a lost record would corrupt the stream.
 */
static int resp_write_tls(struct http_conn *c, const struct http_tls_iov *iov, size_t niov)
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
    return http__resp_write_wire(c, &enc);
}

/* Queues b's bytes (taking its storage), through TLS on an https connection. On failure the
 * connection is closed. */
int http__resp_write(struct http_conn *c, struct buf *b)
{
    if (c->tls == NULL) {
        return http__resp_write_wire(c, b);
    }
    struct http_tls_iov iov = {.p = buf_data(b), .n = buf_size(b)};
    int rc = resp_write_tls(c, &iov, 1);
    buf_fini(b);
    return rc;
}

/*
 * The pieces one write puts on the wire for len bytes at data, without copying them: when
 * chunked, the chunk's size line (written into frame), the bytes, and the CRLF that ends the
 * chunk; else the bytes alone. Returns how many pieces (3 or 1) went into ub; *total is their
 * bytes. frame must live as long as the write does.
 */
static unsigned int chunk_bufs(bool chunked, const void *data, size_t len, char frame[CHUNK_FRAME],
                               uv_buf_t ub[3], size_t *total)
{
    static char crlf[] = "\r\n";
    unsigned int nb = 0;
    *total = len;
    if (chunked) {
        int k = snprintf(frame, CHUNK_FRAME, "%zx\r\n", len);
        ub[nb++] = uv_buf_init(frame, (unsigned int)k);
        *total += (size_t)k + 2;
    }
    ub[nb++] = uv_buf_init((char *)(uintptr_t)data, (unsigned int)len);
    if (chunked) {
        ub[nb++] = uv_buf_init(crlf, 2);
    }
    return nb;
}

/*
 * Queues len bytes at data, which lie inside the malloc'd block base (taken: freed once written,
 * or now on failure), framed as one chunk when chunked: no copy of the payload on plain HTTP.
 * Over TLS the bytes are encrypted at once and base is freed right away.
 * On failure the connection is closed.
 */
static int resp_write_owned(struct http_conn *c, void *base, const void *data, size_t len,
                            bool chunked)
{
    if (len > UINT_MAX) {
        bufpool_release(base);
        http__conn_close(c);
        return AGENT_E_TOOBIG;
    }
    uv_buf_t ub[3];
    size_t total;
    if (c->tls != NULL) {
        char frame[CHUNK_FRAME];
        unsigned int nb = chunk_bufs(chunked, data, len, frame, ub, &total);
        struct http_tls_iov iov[3];
        for (unsigned int i = 0; i < nb; i++) {
            iov[i] = (struct http_tls_iov){.p = ub[i].base, .n = ub[i].len};
        }
        int rc = resp_write_tls(c, iov, nb);
        bufpool_release(base);
        return rc;
    }
    struct http_write *w = malloc(sizeof(*w));
    if (w == NULL) {
        bufpool_release(base);
        http__conn_close(c);
        return UV_ENOMEM;
    }
    unsigned int nb = chunk_bufs(chunked, data, len, w->frame, ub, &w->len);
    w->data = base;
    return resp_submit(c, w, ub, nb);
}

/* Writes an RFC 7807 response with Connection: close (the caller closes after the flush). */
int http__resp_problem(struct http_conn *c, int status, const char *detail, bool is_head)
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
    return http__resp_write(c, &out);
}

static void resp_on_write(uv_write_t *req, int status)
{
    struct http_write *w = req->data;
    struct http_conn *c = w->c;
    c->writes_in_flight--;
    c->pending -= w->len;
    bufpool_release(w->data);
    free(w);
    http__conn_write_done(c, status);
}

/* ---------------------------------------------------------------------------------------------
 * sendfile: a file piece straight from the page cache to the socket, on the thread pool
 * ------------------------------------------------------------------------------------------- */

#define SF_SEND_TIMEOUT_S 1    /* a blocking send returns after this without progress */
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
        sf->hdr_len =
            sf->chunked ? (size_t)snprintf(sf->hdr, sizeof(sf->hdr), "%zx\r\n", sf->chunk_len) : 0;
    }
    while (sf->hdr_sent < sf->hdr_len) {
        ssize_t n =
            send(sf->sock, sf->hdr + sf->hdr_sent, sf->hdr_len - sf->hdr_sent, MSG_NOSIGNAL);
        if (n < 0) {
            sf->err =
                errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
            return;
        }
        sf->hdr_sent += (size_t)n;
        sf->progress = true;
    }
    while (sf->done < sf->chunk_len) {
        off_t pos = (off_t)(sf->offset + sf->done);
        ssize_t n = sendfile(sf->sock, sf->file, &pos, sf->chunk_len - sf->done);
        if (n < 0) {
            sf->err =
                errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
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
            sf->err =
                errno == EAGAIN || errno == EINTR ? 0 : sf_errno(); /* EAGAIN: the send timeout */
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
    struct http_conn *c =
        (struct http_conn *)(void *)((char *)w - offsetof(struct http_conn, sf.work));
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
        http__conn_close_socket(c);
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
        http__sendfile_start(c); /* timed out once with the piece half out: go on */
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
    http__conn_update_reading(c); /* watch for the client going away again */
    if (cb != NULL) {
        cb(ud, r, 0, sent); /* may end the response or start the next piece */
    }
}

void http__sendfile_start(struct http_conn *c)
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
    /* A local request has no socket to send a file to. */
    return r != NULL && r->conn != NULL && r->resp == RESP_STREAMING && !r->discard_body &&
           r->conn->tls == NULL;
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
        http__sendfile_start(c);
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Requests and the public response API
 * ------------------------------------------------------------------------------------------- */

struct http_request *http__request_new(struct http_conn *c, struct http_msg *msg)
{
    struct http_request *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        http_msg_free(msg);
        return NULL;
    }
    r->conn = c;
    r->id = ++c->srv->next_req_id;
    r->tag = c->tag;
    r->msg = msg;
    buf_init(&r->added, HTTP_ADDED_MAX);
    return r;
}

void http__request_free(struct http_request *r)
{
    if (r == NULL) {
        return;
    }
    http_msg_free(r->msg);
    buf_fini(&r->added);
    free(r);
}

/* The handler is done with r: free it and wait for the writes to finish. */
static void request_complete(struct http_request *r, bool close)
{
    struct http_conn *c = r->conn;
    c->req = NULL;
    http__request_free(r);
    if (c->state == CONN_CLOSING) {
        return;
    }
    if (close) {
        c->close_after = true;
    }
    http__conn_set_state(c, CONN_FLUSH);
}

/* Whether the response to r keeps the connection, and which Connection header says so. */
static enum http_conn_header response_connection(const struct http_request *r, bool *close)
{
    const struct http_conn *c = r->conn;
    bool keep = r->msg->keep_alive && !c->close_after && !c->srv->closing;
    *close = !keep;
    if (!keep) {
        return HTTP_CONN_CLOSE;
    }
    return r->msg->http_minor == 0 ? HTTP_CONN_KEEP_ALIVE : HTTP_CONN_NONE;
}

static int build_head(const struct http_request *r, struct buf *out, int status,
                      const char *content_type, const struct http_header *extra, size_t nextra,
                      enum http_framing framing, uint64_t length, enum http_conn_header conn)
{
    int rc = http__head_begin(out, status, http__server_date(r->conn->srv), content_type);
    for (size_t i = 0; rc == 0 && i < nextra; i++) {
        rc = http__head_field(out, extra[i].name, extra[i].value);
    }
    if (rc == 0 && buf_size(&r->added) > 0) {
        rc = buf_append(out, buf_data(&r->added), buf_size(&r->added));
    }
    return rc ? rc : http__head_end(out, framing, length, conn);
}

int http_request_add_header(struct http_request *r, const char *name, const char *value)
{
    if (r == NULL || r->resp != RESP_NONE) {
        return AGENT_E_INVAL;
    }
    size_t before = buf_size(&r->added);
    int rc = http__head_field(&r->added, name, value);
    if (rc != 0) {
        buf_truncate(&r->added, before);
    }
    return rc;
}

const char *http_request_method(const struct http_request *r)
{
    return r->msg->method;
}

const char *http_request_target(const struct http_request *r)
{
    return r->msg->target;
}

const char *http_request_path(const struct http_request *r)
{
    return r->msg->path;
}

const char *http_request_query(const struct http_request *r)
{
    return r->msg->query;
}

const char *http_request_header(const struct http_request *r, const char *name)
{
    return http_msg_header(r->msg, name);
}

size_t http_request_header_count(const struct http_request *r, const char *name)
{
    return http_msg_header_count(r->msg, name);
}

const uint8_t *http_request_body(const struct http_request *r, size_t *len)
{
    if (len != NULL) {
        *len = buf_size(&r->msg->body);
    }
    return buf_data(&r->msg->body);
}

int http_request_tag(const struct http_request *r)
{
    return r->tag;
}

uint64_t http_request_id(const struct http_request *r)
{
    return r->id;
}

bool http_request_is_tls(const struct http_request *r)
{
    return r->conn != NULL && r->conn->tls != NULL;
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
    if (r->conn == NULL) {
        return http__local_respond(r, status, content_type, extra, nextra, body, len);
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
        if (rc == 0 && !r->msg->is_head) {
            rc = buf_append(&out, buf_data(&problem), buf_size(&problem));
        }
        buf_fini(&problem);
    } else if (rc == 0 && !no_content && !r->msg->is_head && len > 0) {
        rc = buf_append(&out, body, len);
    }
    if (rc == 0) {
        rc = http__resp_write(c, &out);
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
    if (r->conn == NULL) {
        return http__local_stream_begin(r, status, content_type, extra, nextra);
    }
    struct http_conn *c = r->conn;
    if (r->in_abort || c->state == CONN_CLOSING) {
        return AGENT_E_CLOSED;
    }
    /* HTTP/1.0 has no chunked coding: the body then ends when the connection does. */
    r->chunked = r->msg->http_minor >= 1;
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
    r->discard_body = r->msg->is_head;
    r->resp = RESP_STREAMING;
    return http__resp_write(c, &out);
}

int http_stream_write(struct http_request *r, const void *data, size_t len)
{
    if (r == NULL || r->resp != RESP_STREAMING) {
        return AGENT_E_INVAL;
    }
    if (r->conn == NULL) {
        return http__local_stream_write(r, NULL, data, len);
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
    return http__resp_write(c, &out);
}

int http_stream_write_owned(struct http_request *r, void *base, const void *data, size_t len)
{
    if (r == NULL || r->resp != RESP_STREAMING || r->in_abort) {
        bufpool_release(base);
        return r == NULL || r->resp != RESP_STREAMING ? AGENT_E_INVAL : AGENT_E_CLOSED;
    }
    if (r->conn == NULL) {
        return http__local_stream_write(r, base, data, len);
    }
    struct http_conn *c = r->conn;
    if (c->state == CONN_CLOSING) {
        bufpool_release(base);
        return AGENT_E_CLOSED;
    }
    if (len == 0 || r->discard_body) {
        bufpool_release(base);
        return 0;
    }
    if (c->pending >= c->srv->cfg.max_stream_pending ||
        len > c->srv->cfg.max_stream_pending - c->pending) {
        bufpool_release(base);
        log_warn(HTTP_LOG_CAT, "connection %llu: client too slow, %zu bytes pending",
                 (unsigned long long)c->id, c->pending);
        http__conn_close(c);
        return AGENT_E_TOOBIG;
    }
    return resp_write_owned(c, base, data, len, r->chunked);
}

int http_stream_write_now(struct http_request *r, const void *data, size_t len)
{
    if (r == NULL || r->resp != RESP_STREAMING || r->in_abort) {
        return r == NULL || r->resp != RESP_STREAMING ? AGENT_E_INVAL : AGENT_E_CLOSED;
    }
    if (r->conn == NULL) {
        return http__local_stream_write_now(r); /* the caller queues: the sink takes it all */
    }
    struct http_conn *c = r->conn;
    if (c->state == CONN_CLOSING) {
        return AGENT_E_CLOSED;
    }
    if (len == 0 || r->discard_body || c->tls != NULL || c->writes_in_flight > 0 || c->sf.queued ||
        len > UINT_MAX) {
        return 0;
    }
    char frame[CHUNK_FRAME];
    uv_buf_t ub[3];
    size_t total;
    unsigned int nb = chunk_bufs(r->chunked, data, len, frame, ub, &total);
    int n = uv_try_write((uv_stream_t *)&c->tcp, ub, nb);
    if (n == UV_EAGAIN || n == 0) {
        return 0; /* nothing went out: the caller queues the chunk whole */
    }
    if (n < 0) {
        log_debug(HTTP_LOG_CAT, "connection %llu: cannot write: %s", (unsigned long long)c->id,
                  agent_strerror(n));
        http__conn_close(c);
        return AGENT_E_CLOSED;
    }
    if ((size_t)n == total) {
        return 1;
    }
    /* The rest of the chunk's bytes on the wire, copied, after the part the socket took. */
    struct buf rest;
    buf_init(&rest, total - (size_t)n);
    size_t skip = (size_t)n;
    int rc = 0;
    for (unsigned int i = 0; i < nb && rc == 0; i++) {
        if (skip >= ub[i].len) {
            skip -= ub[i].len;
            continue;
        }
        rc = buf_append(&rest, ub[i].base + skip, ub[i].len - skip);
        skip = 0;
    }
    if (rc != 0) {
        buf_fini(&rest);
        http__conn_close(c); /* a lost piece would corrupt the body */
        return rc;
    }
    rc = http__resp_write_wire(c, &rest);
    return rc == 0 ? 1 : rc;
}

size_t http_stream_pending(const struct http_request *r)
{
    /* A local request's sink takes every byte at once (http_server.h). */
    return r != NULL && r->conn != NULL ? r->conn->pending : 0;
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
    if (r->conn == NULL) {
        return http__local_stream_end(r);
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
        rc = rc ? rc : http__resp_write(c, &out);
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
    if (r->conn == NULL) {
        http__local_stream_abort(r);
        return;
    }
    struct http_conn *c = r->conn;
    c->req = NULL;
    http__request_free(r);
    http__conn_close(c);
}
