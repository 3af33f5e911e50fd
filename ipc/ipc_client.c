/* SPDX-License-Identifier: MIT */
#include "ipc_client.h"

#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "buf.h"
#include "err.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_internal.h"

/*
 * One exchange = one connection = one command (docs/ipc.md §1.3):
 *
 *   CONNECTING -> AWAIT_HEADER -> AWAIT_PAYLOAD -> [AWAIT_CONTINUATION] -> CLOSING
 *
 * Reading starts as soon as the connection is up, while the request is still being written, so
 * an early Error reply is not missed. Each read asks for at most what the current phase still
 * needs (header, then header.size, then the continuation), and every announced size is checked
 * against max_reply before the buffer grows for it; bytes beyond the reply are never read. One
 * timer covers the whole exchange. Any ending goes through x_finish(), which closes both handles;
 * the user callback runs from the last close callback and the exchange is freed right after it.
 */

#define READ_CHUNK ((size_t)64 * 1024)

enum xstate { X_CONNECTING = 0, X_AWAIT_HEADER, X_AWAIT_PAYLOAD, X_AWAIT_CONTINUATION, X_CLOSING };

struct ipc_exchange {
    uv_pipe_t pipe;
    uv_timer_t timer;
    struct ipc_conn conn; /* path or reverse endpoint (ipc_internal.h) */
    uv_write_t write_req;
    enum xstate state;
    enum ipc_exchange_kind kind;
    size_t max_reply;
    uint8_t *req;
    size_t req_len;
    struct buf in;
    size_t want;      /* bytes `in` must hold to complete the current phase */
    size_t frame_len; /* size of the reply message once its header is known */
    int alloc_err;    /* why on_alloc refused, reported instead of UV_ENOBUFS */
    int open_handles;
    bool notify; /* false once cancelled: cb must not run */
    ipc_exchange_cb cb;
    void *ud;
    struct ipc_result res;
};

static void x_finish(struct ipc_exchange *x, int status);

static void x_free(struct ipc_exchange *x)
{
    buf_fini(&x->in);
    free(x->req);
    free(x);
}

static void x_on_close(uv_handle_t *h)
{
    struct ipc_exchange *x = h->data;
    if (--x->open_handles > 0) {
        return;
    }
    if (x->notify) {
        x->cb(x->ud, &x->res);
    }
    x_free(x);
}

static void x_close_handles(struct ipc_exchange *x)
{
    ipc__conn_close(&x->conn); /* a connect in flight is dropped, a lease given back */
    uv_close((uv_handle_t *)&x->timer, x_on_close);
    uv_close((uv_handle_t *)&x->pipe, x_on_close);
}

/* The single exit: records the outcome once, stops all I/O and closes the handles. */
static void x_finish(struct ipc_exchange *x, int status)
{
    if (x->state == X_CLOSING) {
        return;
    }
    x->state = X_CLOSING;
    x->res.status = status;
    if (status != 0) {
        x->res.ok = 0;
        x->res.payload = NULL;
        x->res.payload_len = 0;
        x->res.continuation = NULL;
        x->res.continuation_len = 0;
    }
    uv_timer_stop(&x->timer);
    uv_read_stop((uv_stream_t *)&x->pipe);
    x_close_handles(x);
}

static void x_on_timeout(uv_timer_t *t)
{
    x_finish(t->data, AGENT_E_TIMEOUT);
}

/*
 * A complete reply frame is in `in`. Error replies end the exchange for every kind; an OK reply
 * to ProcessEnvironment announces the continuation's size, which is checked against max_reply
 * before the buffer grows for it.
 */
static int x_on_frame(struct ipc_exchange *x, const struct ipc_frame *f, bool *done)
{
    if (f->hdr.command_set != IPC_SET_SERVER ||
        (f->hdr.command_id != IPC_SERVER_OK && f->hdr.command_id != IPC_SERVER_ERROR)) {
        return AGENT_E_PROTO;
    }
    struct ipc_rd rd;
    ipc_rd_init(&rd, f->payload, f->payload_len);
    x->res.payload = f->payload;
    x->res.payload_len = f->payload_len;
    if (f->hdr.command_id == IPC_SERVER_ERROR) {
        if (ipc_rd_u32(&rd, &x->res.hresult) != 0) {
            return AGENT_E_PROTO;
        }
        x->res.ok = 0;
        *done = true;
        return 0;
    }
    x->res.ok = 1;
    if (x->kind != IPC_EXCHANGE_ENVIRONMENT) {
        if (f->payload_len == 4) {
            (void)ipc_rd_u32(&rd, &x->res.hresult);
        }
        *done = true;
        return 0;
    }
    uint32_t incoming;
    if (ipc_env_reply_parse(f->payload, f->payload_len, &incoming) != 0) {
        return AGENT_E_PROTO;
    }
    if (incoming > x->max_reply - x->frame_len) {
        return AGENT_E_TOOBIG;
    }
    x->want = x->frame_len + incoming;
    x->state = X_AWAIT_CONTINUATION;
    *done = false;
    return 0;
}

/* Advances the state machine over whatever `in` holds now. */
static void x_process(struct ipc_exchange *x)
{
    const uint8_t *data = buf_data(&x->in);
    size_t have = buf_size(&x->in);
    size_t cap = x->max_reply < IPC_MESSAGE_MAX ? x->max_reply : IPC_MESSAGE_MAX;

    if (x->state == X_AWAIT_HEADER || x->state == X_AWAIT_PAYLOAD) {
        struct ipc_frame f;
        size_t consumed = 0;
        int rc = ipc_decode(data, have, cap, &f, &consumed);
        if (rc < 0) {
            x_finish(x, rc);
            return;
        }
        if (rc == IPC_NEED_MORE) {
            if (have >= IPC_HEADER_SIZE) {
                struct ipc_header h;
                (void)ipc_header_decode(data, have, cap, &h); /* validated by ipc_decode */
                x->frame_len = h.size;
                x->want = h.size;
                x->state = X_AWAIT_PAYLOAD;
            }
            return;
        }
        x->frame_len = consumed;
        bool done = false;
        rc = x_on_frame(x, &f, &done);
        if (rc != 0 || done) {
            x_finish(x, rc);
            return;
        }
    }
    if (x->state == X_AWAIT_CONTINUATION && have >= x->want) {
        x->res.continuation = data + x->frame_len;
        x->res.continuation_len = x->want - x->frame_len;
        x_finish(x, 0);
    }
}

static void x_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct ipc_exchange *x = h->data;
    (void)suggested;
    size_t have = buf_size(&x->in);
    size_t need = x->want > have ? x->want - have : 0;
    /*
     * Grow with the data, not with the announced size: a continuation announced at the cap but
     * never sent costs at most one chunk.
     */
    if (need > READ_CHUNK) {
        need = READ_CHUNK;
    }
    int rc = need > 0 ? buf_reserve(&x->in, need) : AGENT_E_PROTO;
    if (rc != 0) {
        x->alloc_err = rc;
        *b = uv_buf_init(NULL, 0); /* read_cb then gets UV_ENOBUFS */
        return;
    }
    *b = uv_buf_init((char *)x->in.p + x->in.len, (unsigned int)need);
}

static void x_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct ipc_exchange *x = s->data;
    (void)b;
    if (x->state == X_CLOSING) {
        return;
    }
    if (nread < 0) {
        int rc = (int)nread;
        if (rc == UV_EOF) {
            rc = AGENT_E_CLOSED;
        } else if (rc == UV_ENOBUFS && x->alloc_err != 0) {
            rc = x->alloc_err;
        }
        x_finish(x, rc);
        return;
    }
    if (nread == 0) {
        return; /* EAGAIN */
    }
    x->in.len += (size_t)nread;
    x_process(x);
}

static void x_on_write(uv_write_t *w, int status)
{
    struct ipc_exchange *x = w->data;
    if (x->state == X_CLOSING || status == 0) {
        return;
    }
    x_finish(x, status);
}

static void x_on_connect(struct ipc_conn *c, int status)
{
    struct ipc_exchange *x = c->data;
    if (x->state == X_CLOSING) {
        return;
    }
    x->res.peer_uid = c->peer_uid;
    if (status < 0) {
        x_finish(x, status);
        return;
    }
    x->state = X_AWAIT_HEADER;
    x->want = IPC_HEADER_SIZE;
    int rc = uv_read_start((uv_stream_t *)&x->pipe, x_on_alloc, x_on_read);
    if (rc != 0) {
        x_finish(x, rc);
        return;
    }
    /*
     * The runtime's server thread blocks until it has the whole request (deviations.md §1.8), so
     * the request goes out in one write right after connect.
     */
    uv_buf_t b = uv_buf_init((char *)x->req, (unsigned int)x->req_len);
    rc = uv_write(&x->write_req, (uv_stream_t *)&x->pipe, &b, 1, x_on_write);
    if (rc != 0) {
        x_finish(x, rc);
    }
}

int ipc_exchange_start(uv_loop_t *loop, const struct ipc_endpoint *ep, const uint8_t *req,
                       size_t req_len, enum ipc_exchange_kind kind, uint64_t timeout_ms,
                       size_t max_reply, ipc_exchange_cb cb, void *ud, struct ipc_exchange **out)
{
    const char *path = ep != NULL ? ep->path : NULL;
    if (loop == NULL || path == NULL || req == NULL || cb == NULL || req_len < IPC_HEADER_SIZE ||
        req_len > IPC_MESSAGE_MAX ||
        (kind != IPC_EXCHANGE_SIMPLE && kind != IPC_EXCHANGE_ENVIRONMENT)) {
        return AGENT_E_INVAL;
    }
    if (max_reply == 0) {
        max_reply = IPC_EXCHANGE_DEFAULT_MAX_REPLY;
    }
    if (max_reply < IPC_HEADER_SIZE) {
        return AGENT_E_INVAL;
    }
    if (timeout_ms == 0) {
        timeout_ms = IPC_EXCHANGE_DEFAULT_TIMEOUT_MS;
    }
    /* libuv would silently truncate a long path and connect somewhere else. */
    struct sockaddr_un sa;
    if (strlen(path) >= sizeof(sa.sun_path) && ep->root_pid == 0) {
        return UV_ENAMETOOLONG;
    }

    struct ipc_exchange *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return UV_ENOMEM;
    }
    x->req = malloc(req_len);
    if (x->req == NULL) {
        free(x);
        return UV_ENOMEM;
    }
    memcpy(x->req, req, req_len);
    x->req_len = req_len;
    x->kind = kind;
    x->max_reply = max_reply;
    x->cb = cb;
    x->ud = ud;
    x->notify = true;
    x->state = X_CONNECTING;
    x->res.peer_uid = -1;
    buf_init(&x->in, max_reply);

    /* Neither init can fail on Unix; the handles are closed together from here on. */
    (void)uv_timer_init(loop, &x->timer);
    int rc = uv_pipe_init(loop, &x->pipe, 0);
    if (rc != 0) {
        x->notify = false;
        x->open_handles = 1;
        x->timer.data = x;
        uv_close((uv_handle_t *)&x->timer, x_on_close);
        return rc;
    }
    x->open_handles = 2;
    x->timer.data = x;
    x->pipe.data = x;
    x->write_req.data = x;
    (void)uv_timer_start(&x->timer, x_on_timeout, timeout_ms, 0);
    /*
     * Connect errors (refused, no such file) arrive through x_on_connect, on a later turn; only a
     * reverse endpoint whose runtime is not connected fails here (UV_ECONNREFUSED).
     */
    rc = ipc__connect(&x->conn, loop, &x->pipe, ep, x_on_connect, x);
    if (rc != 0) {
        x->notify = false;
        x_finish(x, rc); /* closes both handles; the last close callback frees x */
        return rc;
    }
    if (out != NULL) {
        *out = x;
    }
    return 0;
}

void ipc_exchange_cancel(struct ipc_exchange *x)
{
    if (x == NULL) {
        return;
    }
    x->notify = false;
    x_finish(x, UV_ECANCELED);
}

void ipc__exchange_abort(struct ipc_exchange *x)
{
    x_finish(x, UV_ECANCELED);
}
