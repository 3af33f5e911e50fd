/* SPDX-License-Identifier: MIT */
#include "ipc_session.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "bufpool.h"
#include "err.h"
#include "ipc_client.h"
#include "ipc_codec.h"
#include "ipc_internal.h"
#include "log.h"

/*
 * One EventPipe session (docs/ipc.md §4.2, §5). The stream connection goes through
 *
 *   IDLE -> CONNECTING -> AWAIT_REPLY -> STREAMING -> DRAINING -> CLOSED
 *              ^             |
 *              +-- RETRY <---+   (UNKNOWN_COMMAND: close, then the next try on a new connection)
 *
 * (any state can go to CLOSED; DRAINING only follows the end of a live stream, see s_drain).
 * Every transition goes through s_set_state(), which checks it and re-arms the one timer that
 * serves every phase: the start timeout of the current try, the stop timeout once stop was
 * requested, the cleanup bound once the session has ended. arm_timer() derives the deadline from
 * the state and flags, so no code path has to remember a timer.
 *
 * Ending is two-staged. s_end() delivers on_end at once (from a loop callback: the status is
 * known, the user is done) and sets `ended`; ipc_session_abort sets `ended` without a callback.
 * From then on the object only cleans up after itself, silently: it makes sure no session is
 * left running in the runtime (a CollectTracing that was written creates a session even if we
 * stop listening, so its reply is still read and the id stopped), lets the runtime close a live
 * stream after that StopTracing (DRAINING), waits for its StopTracing exchange, closes the timer
 * and frees itself in the timer's close callback.
 * Frees only ever happen in close/exchange callbacks, never below a user callback, so pause,
 * resume, stop and abort are safe from inside on_started and on_data.
 */

#define LOG_CAT                  "dotmon.ipc.session"
#define READ_BUF_SIZE            IPC_SESSION_READ_SIZE
#define NEWEST_VERSION           5
#define DEFAULT_START_TIMEOUT_MS 5000
#define DEFAULT_STOP_TIMEOUT_MS  60000
/* Bound on the background work after on_end or abort (reading a start reply, StopTracing) when
 * the admission sets none. */
#define DEFAULT_CLEANUP_TIMEOUT_MS 10000
_Static_assert(READ_BUF_SIZE == BUFPOOL_BLOCK, "a read buffer is one pool block");
/* A start reply is 24 (Error) or 28 (OK + id) bytes; anything announcing more is not a runtime. */
#define REPLY_CAP 1024

enum sstate {
    S_IDLE = 0,    /* not started */
    S_CONNECTING,  /* connect in progress; nothing written yet */
    S_AWAIT_REPLY, /* request written; reading the reply */
    S_RETRY,       /* the previous try's pipe is closing; its close callback starts the next */
    S_STREAMING,   /* the reply was OK: the connection carries nettrace */
    S_DRAINING,    /* ended, StopTracing out: read and drop until the runtime closes it */
    S_CLOSED       /* the stream connection is closed or closing, for good */
};

struct ipc_session {
    uv_loop_t *loop;
    uv_pipe_t pipe;
    uv_timer_t timer;
    struct ipc_conn conn; /* the stream connection's path or reverse endpoint (ipc_internal.h) */
    uv_write_t write_req;
    enum sstate state;
    bool pipe_open;  /* initialised and its close callback not yet run */
    bool timer_open; /* closed last: its close callback frees the session */
    bool reading;
    bool paused;
    bool stop_requested;
    bool stop_sent;
    bool ended; /* on_end delivered, or aborted: no more user callbacks */
    bool aborted;
    bool have_id;
    bool may_have;   /* a whole request went out and no error reply came: the runtime may hold a
                      * session even when its id never arrived */
    bool downgraded; /* the rundown keyword was dropped to find a known version */
    bool cleanup_expired; /* the cleanup bound ran out: nothing left to time */
    int version;          /* CollectTracing version of the current try */
    int floor;            /* oldest version that can express cfg */
    int pending_status;   /* an error found inside a user call, delivered from the timer */
    uint64_t start_timeout_ms;
    uint64_t try_deadline;
    uint64_t stop_deadline;
    uint64_t cleanup_deadline;
    uint64_t session_id;
    uint64_t bytes;
    uint64_t dropped; /* bytes read and discarded while DRAINING */
    struct ipc_exchange *stop_x;
    struct ipc_collect_config cfg; /* deep copy: points into providers and blob */
    struct ipc_provider *providers;
    uint8_t *blob;
    uint8_t *req; /* the current try's request (lives until the pipe closes) */
    size_t req_cap;
    size_t req_len;
    size_t rlen; /* reply bytes in rbuf (AWAIT_REPLY only) */
    struct ipc_session_callbacks cb;
    void *ud;
    struct ipc_endpoint ep;            /* owned copy */
    struct ipc_session_admission *adm; /* counts this session until it is freed */
    uint64_t cleanup_timeout_ms;       /* adm's at the start, or the default */
    /* The read buffer (READ_BUF_SIZE), handed out whole by on_alloc; allocated again only after
     * on_data took it (ipc_session_take_buffer). */
    uint8_t *rbuf;
    bool in_deliver; /* inside on_data: take_buffer is allowed */
    bool pooled;     /* a buffer was taken: read into pool blocks (bufpool.h) */
    void (*freed_cb)(void *ud, bool had_session); /* ipc_session_when_freed */
    void *freed_ud;
};

static int s_try(struct ipc_session *s);
static void s_end(struct ipc_session *s, int status, uint32_t hresult, bool need_stop);
static void s_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b);
static void s_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b);

/* ---- configuration copy ------------------------------------------------------------------ */

/*
 * "cfg and everything it points to is copied": the caller's config may die right after start.
 * The providers array and one blob (event ids first, for alignment, then the strings) are owned
 * by the session; s->cfg points into them.
 */
static int cfg_copy(struct ipc_session *s, const struct ipc_collect_config *src)
{
    s->cfg = *src;
    s->cfg.providers = NULL;
    s->cfg.provider_count = 0;
    if (src->provider_count == 0 || src->providers == NULL) {
        return 0; /* ipc_cmd_collect_tracing rejects it right after */
    }
    size_t ids = 0;
    size_t chars = 0;
    for (size_t i = 0; i < src->provider_count; i++) {
        const struct ipc_provider *p = &src->providers[i];
        ids += p->event_ids != NULL ? p->event_id_count : 0;
        chars += p->name != NULL ? strlen(p->name) + 1 : 0;
        chars += p->arguments != NULL ? strlen(p->arguments) + 1 : 0;
    }
    s->providers = calloc(src->provider_count, sizeof(*s->providers));
    s->blob = malloc(ids * sizeof(uint32_t) + chars + 1);
    if (s->providers == NULL || s->blob == NULL) {
        return UV_ENOMEM;
    }
    uint32_t *id_out = (uint32_t *)(void *)s->blob;
    char *str_out = (char *)s->blob + ids * sizeof(uint32_t);
    for (size_t i = 0; i < src->provider_count; i++) {
        const struct ipc_provider *sp = &src->providers[i];
        struct ipc_provider *p = &s->providers[i];
        *p = *sp;
        if (sp->event_ids != NULL && sp->event_id_count > 0) {
            memcpy(id_out, sp->event_ids, sp->event_id_count * sizeof(*id_out));
            p->event_ids = id_out;
            id_out += sp->event_id_count;
        }
        if (sp->name != NULL) {
            size_t n = strlen(sp->name) + 1;
            memcpy(str_out, sp->name, n);
            p->name = str_out;
            str_out += n;
        }
        if (sp->arguments != NULL) {
            size_t n = strlen(sp->arguments) + 1;
            memcpy(str_out, sp->arguments, n);
            p->arguments = str_out;
            str_out += n;
        }
    }
    s->cfg.providers = s->providers;
    s->cfg.provider_count = src->provider_count;
    return 0;
}

static void s_free(struct ipc_session *s)
{
    ipc_endpoint_fini(&s->ep);
    free(s->providers);
    free(s->blob);
    free(s->req);
    bufpool_release(s->rbuf);
    free(s);
}

/* ---- lifetime ---------------------------------------------------------------------------- */

static void s_on_timer_close(uv_handle_t *h)
{
    struct ipc_session *s = h->data;
    struct ipc_session_admission *adm = s->adm;
    bool started = s->have_id;
    bool may_have = started || s->may_have;
    void (*freed_cb)(void *, bool) = s->freed_cb;
    void *freed_ud = s->freed_ud;
    s_free(s);
    adm->live--;
    if (started) {
        adm->started--;
    }
    if (freed_cb != NULL) {
        freed_cb(freed_ud, may_have);
    }
}

/* Frees the session once it has ended and nothing of it is left on the loop but the timer. */
static void s_reap(struct ipc_session *s)
{
    if (!s->ended || s->pipe_open || s->stop_x != NULL || !s->timer_open) {
        return;
    }
    s->timer_open = false;
    uv_close((uv_handle_t *)&s->timer, s_on_timer_close);
}

static void s_on_pipe_close(uv_handle_t *h)
{
    struct ipc_session *s = h->data;
    s->pipe_open = false;
    if (s->state == S_RETRY && !s->ended) {
        int rc = s_try(s);
        if (rc != 0) {
            s_end(s, rc, 0, false);
        }
        return;
    }
    s_reap(s);
}

/* ---- timer ------------------------------------------------------------------------------- */

static void s_on_timer(uv_timer_t *t);

static uint64_t earliest(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* One timer, many phases: the deadline that matters now follows from the state. */
static void arm_timer(struct ipc_session *s)
{
    if (!s->timer_open) {
        return;
    }
    uint64_t deadline = UINT64_MAX;
    if (s->ended) {
        /*
         * Never re-armed at 0 once expired: libuv (1.44) runs a timer restarted with 0 from its
         * own callback again in the same pass, forever.
         */
        deadline = s->cleanup_expired ? UINT64_MAX : s->cleanup_deadline;
    } else if (s->pending_status != 0) {
        deadline = 0;
    } else {
        if (s->state == S_CONNECTING || s->state == S_AWAIT_REPLY) {
            deadline = s->try_deadline;
        }
        if (s->stop_requested) {
            deadline = earliest(deadline, s->stop_deadline);
        }
    }
    if (deadline == UINT64_MAX) {
        uv_timer_stop(&s->timer);
        return;
    }
    uint64_t now = uv_now(s->loop);
    (void)uv_timer_start(&s->timer, s_on_timer, deadline > now ? deadline - now : 0, 0);
}

static uint64_t deadline_after(const struct ipc_session *s, uint64_t ms)
{
    return uv_now(s->loop) + ms;
}

static bool transition_ok(enum sstate from, enum sstate to)
{
    switch (to) {
    case S_CONNECTING:
        return from == S_IDLE || from == S_RETRY;
    case S_AWAIT_REPLY:
        return from == S_CONNECTING;
    case S_STREAMING:
        return from == S_AWAIT_REPLY;
    case S_DRAINING:
        return from == S_STREAMING;
    case S_RETRY:
        return from == S_CLOSED; /* the failed try's pipe is closing */
    case S_CLOSED:
        return true;
    case S_IDLE:
    default:
        return false;
    }
}

/* The one place the state changes: checks the transition, then re-arms the timer for it. */
static void s_set_state(struct ipc_session *s, enum sstate next)
{
    /* An illegal transition is a bug here; stop loudly in release builds too (NDEBUG). */
    if (!transition_ok(s->state, next)) {
        log_error(LOG_CAT, "illegal session state transition %d -> %d", (int)s->state, (int)next);
        abort();
    }
    s->state = next;
    arm_timer(s);
}

/* Closes the stream connection for good (S_CLOSED); callers that retry set S_RETRY after. */
static void s_close_pipe(struct ipc_session *s)
{
    s->reading = false;
    ipc__conn_close(&s->conn); /* a connect in flight is dropped, a lease given back */
    if (s->pipe_open && !uv_is_closing((uv_handle_t *)&s->pipe)) {
        uv_close((uv_handle_t *)&s->pipe, s_on_pipe_close);
    }
    s_set_state(s, S_CLOSED);
}

/* ---- StopTracing ------------------------------------------------------------------------- */

static void s_on_stop_reply(void *ud, const struct ipc_result *res)
{
    struct ipc_session *s = ud;
    s->stop_x = NULL;
    if (res->status != 0 || !res->ok) {
        /*
         * Not fatal for the stream: a runtime that died refuses the connection and the stream
         * sees EOF; anything else runs into the stop timeout.
         */
        log_debug(LOG_CAT, "StopTracing for session 0x%llx: %s (hresult 0x%08x)",
                  (unsigned long long)s->session_id,
                  res->status != 0 ? agent_strerror(res->status) : "error reply", res->hresult);
    }
    s_reap(s);
}

/*
 * StopTracing goes on a new connection (deviations.md §1.10). Its reply only comes once the runtime
 * has run rundown and closed the stream (ipc.md §5.3), so nothing waits for it but cleanup.
 */
static int s_send_stop(struct ipc_session *s, uint64_t timeout_ms)
{
    uint8_t req[IPC_HEADER_SIZE + 8];
    struct ipc_wr w;
    ipc_wr_init(&w, req, sizeof(req));
    int rc = ipc_cmd_stop_tracing(&w, s->session_id);
    if (rc != 0) {
        return rc;
    }
    rc = ipc_exchange_start(s->loop, &s->ep, req, w.len, IPC_EXCHANGE_SIMPLE,
                            timeout_ms > 0 ? timeout_ms : 1, 0, s_on_stop_reply, s, &s->stop_x);
    if (rc == 0) {
        s->stop_sent = true;
    }
    return rc;
}

/* ---- ending ------------------------------------------------------------------------------ */

/*
 * Ended while the runtime still streams, with our StopTracing out: keep reading and drop the
 * bytes until the runtime closes the stream, which it does once it has handled that StopTracing
 * (ipc.md §5.3). Closing first would let the runtime end the session by itself on its next write
 * (ipc.md §5.4) and free it; its id is the session's address, so a session created next may get the
 * same id, and our StopTracing, still on its way, would stop that one. The cleanup bound still
 * applies (s_on_timer closes the stream when it runs out).
 */
static void s_drain(struct ipc_session *s)
{
    if (!s->reading) {
        /* Paused by the user's backpressure: the runtime's writer is blocked, unblock it. */
        int rc = uv_read_start((uv_stream_t *)&s->pipe, s_on_alloc, s_on_read);
        if (rc != 0) {
            log_warn(LOG_CAT, "cannot drain session 0x%llx: %s; closing its stream",
                     (unsigned long long)s->session_id, agent_strerror(rc));
            s_close_pipe(s);
            return;
        }
        s->reading = true;
    }
    s_set_state(s, S_DRAINING);
}

/* A read while DRAINING: the bytes are dropped; any end of the stream closes our side. */
static void s_on_drain_read(struct ipc_session *s, ssize_t nread)
{
    if (nread > 0) {
        s->dropped += (uint64_t)nread;
        return;
    }
    log_debug(LOG_CAT, "session 0x%llx: stream ended (%s) after StopTracing, %llu bytes dropped",
              (unsigned long long)s->session_id,
              nread == UV_EOF ? "EOF" : agent_strerror((int)nread), (unsigned long long)s->dropped);
    s_close_pipe(s);
    s_reap(s);
}

/*
 * After the session ended for the user: leave nothing behind in the runtime. need_stop says
 * whether a live stream still needs a StopTracing (not after EOF: the runtime is done with it).
 */
static void s_cleanup(struct ipc_session *s, bool need_stop)
{
    switch (s->state) {
    case S_CONNECTING:
        /* Nothing was written, so the runtime has nothing to undo. */
        s_close_pipe(s);
        break;
    case S_RETRY:
        s_set_state(s, S_CLOSED); /* the pipe is already closing; no next try */
        break;
    case S_AWAIT_REPLY:
        /*
         * The request is out: the runtime will create the session whether or not we listen.
         * Keep reading for the reply; s_on_reply stops the session once its id is known.
         */
        break;
    case S_STREAMING:
        if (need_stop && !s->stop_sent) {
            /* A fresh bound: the id may have come late in the previous one (a slow reply). */
            s->cleanup_deadline = deadline_after(s, s->cleanup_timeout_ms);
            s->cleanup_expired = false;
            int rc = s_send_stop(s, s->cleanup_timeout_ms);
            if (rc != 0) {
                log_warn(LOG_CAT, "cannot send StopTracing for session 0x%llx: %s",
                         (unsigned long long)s->session_id, agent_strerror(rc));
            }
        }
        if (need_stop && s->stop_sent) {
            s_drain(s); /* the stream closes after the runtime handled the stop, not before */
        } else {
            /* No StopTracing out: closing is the only way left to end it (ipc.md §5.4). */
            s_close_pipe(s);
        }
        break;
    case S_DRAINING: /* already waiting for the runtime to close the stream */
    case S_IDLE:
    case S_CLOSED:
    default:
        break;
    }
    arm_timer(s);
    s_reap(s);
}

/* The one way the session ends for its user. Only called from loop callbacks. */
static void s_end(struct ipc_session *s, int status, uint32_t hresult, bool need_stop)
{
    if (s->ended) {
        s_cleanup(s, need_stop);
        return;
    }
    s->ended = true;
    s->cleanup_deadline = deadline_after(s, s->cleanup_timeout_ms);
    s->cb.on_end(s->ud, status, hresult);
    s_cleanup(s, need_stop);
}

static void s_on_timer(uv_timer_t *t)
{
    struct ipc_session *s = t->data;
    uint64_t now = uv_now(s->loop);
    if (s->ended) {
        if (now < s->cleanup_deadline) {
            arm_timer(s);
            return;
        }
        /* Cleanup ran out of time: drop the stream and whatever StopTracing still waits. */
        s->cleanup_expired = true;
        if (s->state == S_DRAINING) {
            log_warn(LOG_CAT,
                     "session 0x%llx: the runtime did not close the stream within %llu ms "
                     "of StopTracing; closing it",
                     (unsigned long long)s->session_id, (unsigned long long)s->cleanup_timeout_ms);
        }
        s_close_pipe(s);
        if (s->stop_x != NULL) {
            ipc__exchange_abort(s->stop_x); /* its callback still comes, then we are reaped */
        }
        s_reap(s);
        return;
    }
    if (s->pending_status != 0) {
        int status = s->pending_status;
        s->pending_status = 0;
        s_end(s, status, 0, true);
        return;
    }
    bool starting = s->state == S_CONNECTING || s->state == S_AWAIT_REPLY;
    if ((s->stop_requested && now >= s->stop_deadline) || (starting && now >= s->try_deadline)) {
        /* In AWAIT_REPLY the pipe stays open: cleanup still reads the reply (see s_cleanup). */
        s_end(s, AGENT_E_TIMEOUT, 0, true);
        return;
    }
    arm_timer(s);
}

/* ---- start ------------------------------------------------------------------------------- */

static void s_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct ipc_session *s = h->data;
    (void)suggested;
    /* While waiting for the reply, keep what came so far; afterwards every read starts over. */
    size_t off = s->state == S_AWAIT_REPLY ? s->rlen : 0;
    /* A session that hands its buffers on reads into pool blocks from then on (bufpool.h); one
     * that keeps its buffer keeps the one malloc'd block it started with. */
    if (s->rbuf == NULL && s->pooled) {
        s->rbuf = bufpool_get();
    }
    if (s->rbuf == NULL && (s->rbuf = malloc(READ_BUF_SIZE)) == NULL) {
        *b = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS: the stream ends with an error */
        return;
    }
    *b = uv_buf_init((char *)s->rbuf + off, (unsigned int)(READ_BUF_SIZE - off));
}

static void s_deliver(struct ipc_session *s, const uint8_t *p, size_t n)
{
    s->bytes += n;
    if (!s->ended && n > 0) {
        s->in_deliver = true;
        s->cb.on_data(s->ud, p, n);
        s->in_deliver = false;
    }
}

uint8_t *ipc_session_take_buffer(struct ipc_session *s)
{
    if (s == NULL || !s->in_deliver) {
        return NULL;
    }
    uint8_t *b = s->rbuf;
    s->rbuf = NULL;
    s->pooled = true;
    return b;
}

/*
 * UNKNOWN_COMMAND: the next older version, never below the floor (ipc_cmd.h). If the floor is
 * only there because of a non-default rundown keyword, drop the keyword (what dotnet-monitor and
 * dotnet-trace do for gc-collect: RetryStrategy.DropKeywordDropRundown) and go on stepping down
 * with the floor of the reduced config; not when the config says the keyword is the point
 * (keep_rundown).
 */
static void s_step_down(struct ipc_session *s)
{
    if (s->version - 1 >= s->floor) {
        s->version--;
    } else if (!s->downgraded && s->floor == 4 && !s->cfg.keep_rundown) {
        s->downgraded = true;
        log_debug(LOG_CAT, "CollectTracing4 unknown: retrying without rundown keyword 0x%llx",
                  (unsigned long long)s->cfg.rundown_keyword);
        s->cfg.rundown_keyword = 0;
        s->floor = ipc_collect_min_version(&s->cfg);
        s->version--;
    } else {
        s_end(s, AGENT_E_RUNTIME, IPC_HR_UNKNOWN_COMMAND, false);
        return;
    }
    log_debug(LOG_CAT, "CollectTracing unknown: trying version %d", s->version);
    s_set_state(s, S_RETRY); /* s_on_pipe_close starts the next try */
}

/* The reply frame is complete: rbuf[0..consumed) is the reply, the rest is already stream. */
static void s_on_reply(struct ipc_session *s, const struct ipc_frame *f, size_t consumed)
{
    struct ipc_reply r;
    int rc = ipc_reply_parse(f, IPC_EXPECT_SESSION, &r);
    if (rc != 0 || !r.ok) {
        s->may_have = rc != 0; /* an error reply: refused, nothing created (this try) */
        s_close_pipe(s);
        if (rc != 0) {
            s_end(s, rc, 0, false);
        } else if (s->ended) {
            s_reap(s); /* an abandoned start that failed: no session to stop */
        } else if (r.hresult == IPC_HR_UNKNOWN_COMMAND) {
            s_step_down(s);
        } else {
            s_end(s, AGENT_E_RUNTIME, r.hresult, false);
        }
        return;
    }
    s->session_id = r.session_id;
    s->have_id = true;
    s->adm->started++;
    size_t extra = s->rlen - consumed;
    s->rlen = 0;
    s_set_state(s, S_STREAMING);
    if (s->ended) {
        /* Aborted or timed out while the request was out: stop what the runtime created. */
        s_cleanup(s, true);
        return;
    }
    log_debug(LOG_CAT, "session 0x%llx started with CollectTracing%d",
              (unsigned long long)s->session_id, s->version);
    if (s->paused) {
        uv_read_stop((uv_stream_t *)&s->pipe);
        s->reading = false;
    }
    if (s->cb.on_started != NULL) {
        s->cb.on_started(s->ud, s->session_id, s->version);
    }
    if (s->ended) {
        return; /* aborted inside on_started */
    }
    if (s->stop_requested && !s->stop_sent) {
        uint64_t now = uv_now(s->loop);
        rc = s_send_stop(s, s->stop_deadline > now ? s->stop_deadline - now : 1);
        if (rc != 0) {
            s_end(s, rc, 0, true);
            return;
        }
    }
    /*
     * Bytes that came in the same read as the reply (the runtime writes the nettrace preamble
     * right after it, ipc.md §5.2). They belong to the read that is being delivered, so they go out
     * even if on_started paused.
     */
    s_deliver(s, s->rbuf + consumed, extra);
}

static void s_on_reply_bytes(struct ipc_session *s, size_t n)
{
    s->rlen += n;
    struct ipc_frame f;
    size_t consumed = 0;
    int rc = ipc_decode(s->rbuf, s->rlen, REPLY_CAP, &f, &consumed);
    if (rc == IPC_NEED_MORE) {
        return;
    }
    if (rc < 0) {
        /* Not a runtime talking: no session was created. */
        s_close_pipe(s);
        s_end(s, rc, 0, false);
        return;
    }
    s_on_reply(s, &f, consumed);
}

static void s_on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *b)
{
    struct ipc_session *s = st->data;
    (void)b;
    if (nread == 0 || s->state == S_CLOSED) {
        return;
    }
    if (s->state == S_DRAINING) {
        s_on_drain_read(s, nread);
        return;
    }
    if (nread < 0) {
        int err = (int)nread;
        bool streaming = s->state == S_STREAMING;
        if (streaming && err == UV_ENOBUFS) {
            /* Our allocation failed; the stream is intact: stop the session and drain it. */
            s_end(s, err, 0, true);
            return;
        }
        s_close_pipe(s);
        if (!streaming) {
            /* Closed before the reply: the runtime created nothing (it replies first). */
            s_end(s, err == UV_EOF ? AGENT_E_CLOSED : err, 0, false);
        } else {
            /*
             * EOF is the normal end (after StopTracing, or the process exited). A reset means the
             * runtime closed its end too (with bytes of ours unread): its session is over, and a
             * StopTracing now could only hit a new session that reused the id (s_drain).
             */
            s_end(s, err == UV_EOF ? 0 : err, 0, false);
        }
        return;
    }
    if (s->state == S_AWAIT_REPLY) {
        s_on_reply_bytes(s, (size_t)nread);
    } else if (s->state == S_STREAMING) {
        s_deliver(s, s->rbuf, (size_t)nread);
    }
}

static void s_on_write(uv_write_t *w, int status)
{
    struct ipc_session *s = w->data;
    if (status == 0) {
        s->may_have = true;
        return;
    }
    if (status == UV_ECANCELED || s->state != S_AWAIT_REPLY) {
        return;
    }
    /* The runtime never got the whole request, so it created no session. */
    s_close_pipe(s);
    s_end(s, status, 0, false);
}

static void s_on_connect(struct ipc_conn *c, int status)
{
    struct ipc_session *s = c->data;
    if (s->state != S_CONNECTING) {
        return;
    }
    if (status < 0) {
        s_close_pipe(s);
        s_end(s, status, 0, false);
        return;
    }
    int rc = uv_read_start((uv_stream_t *)&s->pipe, s_on_alloc, s_on_read);
    if (rc != 0) {
        s_close_pipe(s);
        s_end(s, rc, 0, false);
        return;
    }
    s->reading = true;
    s->rlen = 0;
    /*
     * The whole request goes out right after connect: the runtime's single server thread
     * blocks on a client that has not sent a complete message (ipc.md §1.3, deviations.md §1.8).
     */
    uv_buf_t buf = uv_buf_init((char *)s->req, (unsigned int)s->req_len);
    rc = uv_write(&s->write_req, (uv_stream_t *)&s->pipe, &buf, 1, s_on_write);
    if (rc != 0) {
        s_close_pipe(s);
        s_end(s, rc, 0, false);
        return;
    }
    s_set_state(s, S_AWAIT_REPLY);
}

/*
 * One try: a new connection with the request for s->version; the start timeout covers it.
 * Returns an error for what cannot happen on Unix (an invalid pipe init), a config that start
 * already validated, or a reverse endpoint whose runtime is not connected (UV_ECONNREFUSED); the
 * caller reports it.
 */
static int s_try(struct ipc_session *s)
{
    struct ipc_wr w;
    ipc_wr_init(&w, s->req, s->req_cap);
    int rc = ipc_cmd_collect_tracing(&w, s->version, &s->cfg);
    rc = rc != 0 ? rc : uv_pipe_init(s->loop, &s->pipe, 0);
    if (rc != 0) {
        s_set_state(s, S_CLOSED);
        return rc;
    }
    s->req_len = w.len;
    s->pipe_open = true;
    s->pipe.data = s;
    s->write_req.data = s;
    s->try_deadline = deadline_after(s, s->start_timeout_ms);
    s_set_state(s, S_CONNECTING);
    /*
     * Connect errors (refused, no such file) arrive through s_on_connect, on a later turn; only a
     * reverse endpoint whose runtime is not connected fails here.
     */
    rc = ipc__connect(&s->conn, s->loop, &s->pipe, &s->ep, s_on_connect, s);
    if (rc != 0) {
        s_close_pipe(s); /* its close callback reaps or ends the session */
        return rc;
    }
    return 0;
}

/* ---- public ------------------------------------------------------------------------------ */

int ipc_session_start(uv_loop_t *loop, struct ipc_session_admission *adm,
                      const struct ipc_endpoint *ep, const struct ipc_collect_config *cfg,
                      uint64_t start_timeout_ms, const struct ipc_session_callbacks *cb, void *ud,
                      struct ipc_session **out)
{
    const char *path = ep != NULL ? ep->path : NULL;
    if (loop == NULL || adm == NULL || path == NULL || cfg == NULL || cb == NULL ||
        cb->on_data == NULL || cb->on_end == NULL || out == NULL) {
        return AGENT_E_INVAL;
    }
    if (adm->max > 0 && adm->live >= adm->max) {
        return AGENT_E_TOOBIG;
    }
    struct ipc_session *s = NULL;
    uint8_t *msg = NULL;
    int rc = 0;
    /* libuv would silently truncate a long path and connect somewhere else. */
    if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path) && ep->root_pid == 0) {
        return UV_ENAMETOOLONG;
    }
    s = calloc(1, sizeof(*s));
    msg = malloc(IPC_MESSAGE_MAX);
    if (s == NULL || msg == NULL || ipc_endpoint_copy(&s->ep, ep) != 0) {
        rc = UV_ENOMEM;
        goto fail;
    }
    rc = cfg_copy(s, cfg);
    if (rc != 0) {
        goto fail;
    }
    /*
     * Version 5 can express every valid config and is its longest encoding, so building it
     * validates cfg (AGENT_E_INVAL, AGENT_E_TOOBIG) and sizes the request buffer for every try.
     */
    struct ipc_wr w;
    ipc_wr_init(&w, msg, IPC_MESSAGE_MAX);
    rc = ipc_cmd_collect_tracing(&w, NEWEST_VERSION, &s->cfg);
    if (rc != 0) {
        goto fail;
    }
    s->req = realloc(msg, w.len);
    if (s->req == NULL) {
        rc = UV_ENOMEM;
        goto fail;
    }
    msg = NULL;
    s->req_cap = w.len;
    s->loop = loop;
    s->adm = adm;
    s->cleanup_timeout_ms =
        adm->cleanup_timeout_ms > 0 ? adm->cleanup_timeout_ms : DEFAULT_CLEANUP_TIMEOUT_MS;
    s->cb = *cb;
    s->ud = ud;
    s->start_timeout_ms = start_timeout_ms > 0 ? start_timeout_ms : DEFAULT_START_TIMEOUT_MS;
    s->version = NEWEST_VERSION;
    s->floor = ipc_collect_min_version(&s->cfg);

    (void)uv_timer_init(loop, &s->timer); /* cannot fail */
    s->timer.data = s;
    s->timer_open = true;
    adm->live++;
    rc = s_try(s);
    if (rc != 0) {
        s->ended = true; /* nothing follows; the timer's close callback frees */
        s_reap(s);
        return rc;
    }
    *out = s;
    return 0;

fail:
    if (s != NULL) {
        s_free(s);
    }
    free(msg);
    return rc;
}

void ipc_session_pause(struct ipc_session *s)
{
    if (s == NULL || s->ended) {
        return;
    }
    s->paused = true;
    /* Before the reply the connection keeps being read; s_on_reply applies the pause. */
    if (s->state == S_STREAMING && s->reading) {
        uv_read_stop((uv_stream_t *)&s->pipe);
        s->reading = false;
    }
}

void ipc_session_resume(struct ipc_session *s)
{
    if (s == NULL || s->ended) {
        return;
    }
    s->paused = false;
    if (s->state == S_STREAMING && !s->reading) {
        int rc = uv_read_start((uv_stream_t *)&s->pipe, s_on_alloc, s_on_read);
        if (rc != 0) {
            s->pending_status = rc; /* on_end from the timer, not from inside this call */
            arm_timer(s);
            return;
        }
        s->reading = true;
    }
}

void ipc_session_stop(struct ipc_session *s, uint64_t stop_timeout_ms)
{
    if (s == NULL || s->ended || s->stop_requested) {
        return;
    }
    s->stop_requested = true;
    uint64_t timeout = stop_timeout_ms > 0 ? stop_timeout_ms : DEFAULT_STOP_TIMEOUT_MS;
    s->stop_deadline = deadline_after(s, timeout);
    if (s->state == S_STREAMING) {
        int rc = s_send_stop(s, timeout);
        if (rc != 0) {
            s->pending_status = rc;
        }
    }
    /* Otherwise s_on_reply sends it right after on_started. */
    arm_timer(s);
}

void ipc_session_when_freed(struct ipc_session *s, void (*cb)(void *ud, bool had_session), void *ud)
{
    s->freed_cb = cb;
    s->freed_ud = ud;
}

void ipc_session_abort(struct ipc_session *s)
{
    if (s == NULL || s->ended) {
        return;
    }
    s->ended = true;
    s->aborted = true;
    s->cleanup_deadline = deadline_after(s, s->cleanup_timeout_ms);
    s_cleanup(s, true);
}

uint64_t ipc_session_id(const struct ipc_session *s)
{
    return s != NULL && s->have_id ? s->session_id : 0;
}

uint64_t ipc_session_bytes(const struct ipc_session *s)
{
    return s != NULL ? s->bytes : 0;
}

void ipc_session_end_reason(int status, uint32_t hresult, bool stopping, char *out, size_t cap)
{
    if (status == AGENT_E_RUNTIME) {
        snprintf(out, cap, "the runtime refused the session (HRESULT 0x%08x)", hresult);
    } else if (status != 0) {
        snprintf(out, cap, "session failed: %s", agent_strerror(status));
    } else {
        snprintf(out, cap, "%s", stopping ? "stopped" : "the runtime ended the session");
    }
}
