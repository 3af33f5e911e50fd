/* SPDX-License-Identifier: MIT */
#include <assert.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "bufpool.h"
#include "err.h"
#include "http_internal.h"
#include "http_proto.h"
#include "http_query.h"
#include "http_server.h"
#include "log.h"

/*
 * Local requests (http_server.h, "local requests"): a struct http_request with no connection,
 * whose response goes to a sink inside dotmon (the MCP endpoint calling a REST route).
 *
 * The handler sees the same calls and the same return values as for a network request. What a
 * network request would write is queued here as events (head, body pieces) and handed to the sink
 * from an idle handle, on a later loop turn: a sink callback never runs inside an http_* call the
 * handler made, so neither side can be re-entered (the handler frees its state after a response
 * call; the sink may free its own, or start another local request, from its callbacks). Each turn
 * delivers the events queued before it began, so a route that writes again from its drain callback
 * gets one delivery per turn, as a network route gets one per completed write.
 *
 * Lifetime (docs/style.md §4): the request and its idle handle are one allocation (the queued
 * events hang off it), freed in the handle's close callback, requested right after on_end. Until
 * then neither the handler's pointer (valid until it finishes or its abort callback returns) nor
 * the caller's (valid until on_end) can dangle. The state machine below says who may still act.
 *
 * Drain: http_stream_pending is always 0 here, so a route never waits for room; but some routes
 * write their next piece only from the drain callback (GET /metrics renders piece by piece), so it
 * is called, level-triggered as documented, once per turn that delivered head or body bytes while
 * the handler still streams. A route that registers it without writing is never called, as on the
 * network when no write is in flight.
 *
 * Ids: local requests number themselves from their own process-wide counter (from 1), apart from
 * each server's: a local id is unique among local requests, and may equal a network request's.
 */

/*
 * States (docs/style.md §5: one transition function):
 *   HANDLER  the handler owns the request and the sink takes its events
 *   LOST     the handler owns it, the sink is gone (refused a body, cancelled, out of memory):
 *            response calls fail with AGENT_E_CLOSED; the next turn runs the abort callback, then
 *            on_end(false)
 *   FLUSH    the handler has finished: the queued events and on_end(end_complete) to deliver
 *   CUT      the handler has finished and the sink is gone: on_end(false) on the next turn
 *   CLOSING  on_end has run; the idle handle is closing and frees the request
 */
enum local_state {
    LOCAL_HANDLER = 0,
    LOCAL_LOST,
    LOCAL_FLUSH,
    LOCAL_CUT,
    LOCAL_CLOSING,
    LOCAL_NSTATES
};

#define STATE_BIT(s) (1u << (s))
/* Legal transitions, indexed by the current state (as http_conn.c's table). */
static const unsigned local_transitions[LOCAL_NSTATES] = {
    [LOCAL_HANDLER] = STATE_BIT(LOCAL_LOST) | STATE_BIT(LOCAL_FLUSH),
    [LOCAL_LOST] = STATE_BIT(LOCAL_CUT) | STATE_BIT(LOCAL_CLOSING),
    [LOCAL_FLUSH] = STATE_BIT(LOCAL_CUT) | STATE_BIT(LOCAL_CLOSING),
    [LOCAL_CUT] = STATE_BIT(LOCAL_CLOSING),
    [LOCAL_CLOSING] = 0,
};

enum local_ev_kind { LOCAL_EV_HEAD = 0, LOCAL_EV_BODY };

/* One queued sink event. A head's content type, names and values live in the same block, after
 * its header array; a body's bytes in base (owned, released once delivered). */
struct local_ev {
    struct local_ev *next;
    enum local_ev_kind kind;
    int status;               /* head */
    const char *content_type; /* head: NULL when none */
    void *base;               /* body: the block the bytes lie in (bufpool_release) */
    const uint8_t *data;      /* body */
    size_t len;               /* body */
    size_t n;                 /* head: entries of h */
    struct http_header h[];   /* head */
};

struct http_local {
    struct http_request req; /* what the handler and the caller hold */
    uv_idle_t idle;          /* delivers the events on later loop turns */
    enum local_state state;
    struct http_local_sink sink;
    void *ud;
    struct local_ev *head; /* queued events, oldest first */
    struct local_ev *tail;
    bool end_complete; /* FLUSH: what on_end will say */
};

/* Ids of local requests (see the top of the file); atomic only because tests may run loops on
 * several threads. */
static atomic_uint_fast64_t local_next_id;

static void local_on_idle(uv_idle_t *h);
static void local_on_close(uv_handle_t *h);

/* ---------------------------------------------------------------------------------------------
 * State machine
 * ------------------------------------------------------------------------------------------- */

static void local_events_free(struct http_local *l)
{
    while (l->head != NULL) {
        struct local_ev *ev = l->head;
        l->head = ev->next;
        bufpool_release(ev->base);
        free(ev);
    }
    l->tail = NULL;
}

/*
 * The one transition function: aborts on an illegal transition (a bug in this file), then keeps
 * the idle handle active exactly while a later turn has something to do: events to deliver while
 * the handler streams, and always in the states whose next step is the loop's (an abort callback,
 * on_end). CLOSING closes it; the close callback frees the request.
 */
static void local_set_state(struct http_local *l, enum local_state next)
{
    /* Staying put re-arms the idle handle; closing twice would be a bug. */
    bool same = next == l->state && next != LOCAL_CLOSING;
    if (!same && (local_transitions[l->state] & STATE_BIT(next)) == 0) {
        log_error(HTTP_LOG_CAT, "illegal local request state transition %d -> %d", (int)l->state,
                  (int)next);
        abort();
    }
    l->state = next;
    switch (next) {
    case LOCAL_HANDLER:
        if (l->head != NULL) {
            (void)uv_idle_start(&l->idle, local_on_idle);
        } else {
            (void)uv_idle_stop(&l->idle);
        }
        break;
    case LOCAL_LOST:
    case LOCAL_FLUSH:
    case LOCAL_CUT:
        (void)uv_idle_start(&l->idle, local_on_idle);
        break;
    case LOCAL_CLOSING:
    case LOCAL_NSTATES:
    default:
        local_events_free(l);
        uv_close((uv_handle_t *)&l->idle, local_on_close);
        break;
    }
}

/* The sink is gone (or a piece could not be queued, which loses the response as surely): the
 * queued events go; the handler hears of it from the abort callback, or has finished already. */
static void local_lose(struct http_local *l)
{
    local_events_free(l);
    if (l->state == LOCAL_HANDLER) {
        local_set_state(l, LOCAL_LOST);
    } else if (l->state == LOCAL_FLUSH) {
        local_set_state(l, LOCAL_CUT);
    }
}

/* The handler finished the response (complete or cut): what is queued goes out, then on_end. */
static void local_finish(struct http_local *l, bool complete)
{
    if (l->state == LOCAL_LOST) {
        local_set_state(l, LOCAL_CUT); /* the sink is gone: no abort callback any more */
        return;
    }
    l->end_complete = complete;
    local_set_state(l, LOCAL_FLUSH);
}

static void local_queue(struct http_local *l, struct local_ev *ev)
{
    ev->next = NULL;
    if (l->tail != NULL) {
        l->tail->next = ev;
    } else {
        l->head = ev;
    }
    l->tail = ev;
    local_set_state(l, l->state); /* the idle handle runs while events wait */
}

/* The last step of a request: on_end, then the handle closes and frees it. Nothing after on_end
 * touches the sink; the caller's pointer is dead once it returns. */
static void local_end(struct http_local *l, bool complete)
{
    local_events_free(l);
    l->sink.on_end(l->ud, complete);
    local_set_state(l, LOCAL_CLOSING);
}

/* A turn in LOST: the handler's abort callback (inside it response calls fail), then on_end. */
static void local_handle_lost(struct http_local *l)
{
    struct http_request *r = &l->req;
    if (r->abort_cb != NULL) {
        r->in_abort = true; /* stays set: the handler has let go of r for good */
        r->abort_cb(r->abort_ud, r);
    }
    local_end(l, false);
}

/* Hands one event to the sink; a refused body loses the request. */
static void local_deliver(struct http_local *l, const struct local_ev *ev)
{
    if (ev->kind == LOCAL_EV_HEAD) {
        l->sink.on_head(l->ud, ev->status, ev->content_type, ev->h, ev->n);
        return;
    }
    if (l->sink.on_body(l->ud, ev->data, ev->len) != 0) {
        log_debug(HTTP_LOG_CAT, "local request %llu: the sink refused the body",
                  (unsigned long long)l->req.id);
        local_lose(l);
    }
}

/*
 * One loop turn: the events queued before it began, in order, then on_end if the handler had
 * finished by then, or the drain callback if it still streams. A request lost meanwhile (a refused
 * body, a cancel from a sink callback) waits for the next turn, so the abort callback never runs
 * from inside a sink callback either.
 */
static void local_handle_turn(struct http_local *l)
{
    struct http_request *r = &l->req;
    if (l->state == LOCAL_LOST) {
        local_handle_lost(l);
        return;
    }
    if (l->state == LOCAL_CUT) {
        local_end(l, false);
        return;
    }
    bool finished = l->state == LOCAL_FLUSH; /* no event can be queued behind the end */
    struct local_ev *batch = l->head;
    l->head = l->tail = NULL;
    bool wrote = batch != NULL;
    while (batch != NULL) {
        struct local_ev *ev = batch;
        batch = ev->next;
        if (l->state == LOCAL_HANDLER || l->state == LOCAL_FLUSH) {
            local_deliver(l, ev);
        }
        bufpool_release(ev->base);
        free(ev);
    }
    if (l->state == LOCAL_LOST || l->state == LOCAL_CUT) {
        return; /* the idle handle stays on: the rest next turn */
    }
    if (finished) {
        local_end(l, l->end_complete);
        return;
    }
    if (wrote && l->state == LOCAL_HANDLER && r->resp == RESP_STREAMING && r->drain_cb != NULL) {
        r->drain_cb(r->drain_ud, r); /* may write, end or abort: all of them only queue */
    }
    if (l->state == LOCAL_HANDLER) {
        local_set_state(l, LOCAL_HANDLER); /* idle again unless the drain queued something */
    }
}

/* ---------------------------------------------------------------------------------------------
 * libuv callbacks
 * ------------------------------------------------------------------------------------------- */

static void local_on_idle(uv_idle_t *h)
{
    local_handle_turn(h->data);
}

static void local_on_close(uv_handle_t *h)
{
    struct http_local *l = h->data;
    local_events_free(l);
    http_msg_free(l->req.msg);
    buf_fini(&l->req.added);
    free(l);
}

/* ---------------------------------------------------------------------------------------------
 * Events
 * ------------------------------------------------------------------------------------------- */

/* Copies s to *p and moves *p past its NUL. */
static const char *put_str(char **p, const char *s, size_t n)
{
    char *at = *p;
    memcpy(at, s, n);
    at[n] = '\0';
    *p = at + n + 1;
    return at;
}

/*
 * A head event: the content type, the extra headers, then those of http_request_add_header (kept
 * as "Name: value\r\n" lines in r->added, as http__head_field wrote them: the name is a token,
 * so the first ':' ends it, and the value holds no CR, so the first CR ends it). Everything was
 * validated by the caller. Returns 0 or UV_ENOMEM.
 */
static int head_ev_new(const struct http_request *r, int status, const char *content_type,
                       const struct http_header *extra, size_t nextra, struct local_ev **out)
{
    const char *added = (const char *)buf_data(&r->added);
    size_t added_len = buf_size(&r->added);
    size_t nadded = 0;
    for (size_t i = 0; i < added_len; i++) {
        if (added[i] == '\n') {
            nadded++;
        }
    }
    /* Each added line shrinks as it is copied: ": " and CRLF become two NULs. */
    size_t strs = added_len + (content_type != NULL ? strlen(content_type) + 1 : 0);
    for (size_t i = 0; i < nextra; i++) {
        strs += strlen(extra[i].name) + strlen(extra[i].value) + 2;
    }
    size_t n = nextra + nadded;
    struct local_ev *ev = calloc(1, sizeof(*ev) + n * sizeof(ev->h[0]) + strs);
    if (ev == NULL) {
        return UV_ENOMEM;
    }
    ev->kind = LOCAL_EV_HEAD;
    ev->status = status;
    ev->n = n;
    char *p = (char *)&ev->h[n];
    if (content_type != NULL) {
        ev->content_type = put_str(&p, content_type, strlen(content_type));
    }
    for (size_t i = 0; i < nextra; i++) {
        ev->h[i].name = put_str(&p, extra[i].name, strlen(extra[i].name));
        ev->h[i].value = put_str(&p, extra[i].value, strlen(extra[i].value));
    }
    const char *line = added;
    const char *end = added + added_len;
    for (size_t i = nextra; i < n; i++) {
        const char *colon = memchr(line, ':', (size_t)(end - line));
        const char *cr = colon != NULL ? memchr(colon, '\r', (size_t)(end - colon)) : NULL;
        assert(cr != NULL && cr + 2 <= end && colon + 2 <= cr);
        ev->h[i].name = put_str(&p, line, (size_t)(colon - line));
        ev->h[i].value = put_str(&p, colon + 2, (size_t)(cr - colon - 2));
        line = cr + 2;
    }
    *out = ev;
    return 0;
}

static int queue_head(struct http_local *l, int status, const char *content_type,
                      const struct http_header *extra, size_t nextra)
{
    struct local_ev *ev = NULL;
    int rc = head_ev_new(&l->req, status, content_type, extra, nextra, &ev);
    if (rc == 0) {
        local_queue(l, ev);
    }
    return rc;
}

/* Queues len bytes at data: inside base when base is not NULL (taken, whatever the outcome),
 * else copied. Returns 0 or UV_ENOMEM. */
static int queue_body(struct http_local *l, void *base, const void *data, size_t len)
{
    struct local_ev *ev = calloc(1, sizeof(*ev));
    if (ev != NULL && base == NULL) {
        base = malloc(len);
        if (base != NULL) {
            memcpy(base, data, len);
            data = base;
        }
    }
    if (ev == NULL || base == NULL) {
        bufpool_release(base);
        free(ev);
        return UV_ENOMEM;
    }
    ev->kind = LOCAL_EV_BODY;
    ev->base = base;
    ev->data = data;
    ev->len = len;
    local_queue(l, ev);
    return 0;
}

/* The checks a network head passes (http_resp.c build_head): status range, content type, extra
 * headers (tokens, no CR/LF, none the server manages). Returns 0, AGENT_E_INVAL or UV_ENOMEM. */
static int head_check(int status, const char *content_type, const struct http_header *extra,
                      size_t nextra)
{
    struct buf scratch;
    buf_init(&scratch, 0);
    int rc = http__head_begin(&scratch, status, "-", content_type);
    for (size_t i = 0; rc == 0 && i < nextra; i++) {
        rc = http__head_field(&scratch, extra[i].name, extra[i].value);
    }
    buf_fini(&scratch);
    return rc;
}

/* ---------------------------------------------------------------------------------------------
 * Response calls (from http_resp.c)
 * ------------------------------------------------------------------------------------------- */

/* The handler may still answer: it owns the request and its sink takes events. */
static bool local_open(const struct http_local *l)
{
    return !l->req.in_abort && l->state == LOCAL_HANDLER;
}

/* A response call on a lost request: as on a closed connection, it finishes the request (no
 * abort callback any more); the caller returns AGENT_E_CLOSED. */
static void local_finish_lost(struct http_local *l)
{
    if (l->state == LOCAL_LOST) {
        local_finish(l, false);
    }
}

/* The 500 a network client gets for an invalid response (http_respond). */
static int queue_invalid(struct http_local *l)
{
    struct buf problem;
    buf_init(&problem, 0);
    int rc = http_problem_json(&problem, 500, NULL, "invalid response");
    rc = rc ? rc : queue_head(l, 500, "application/problem+json", NULL, 0);
    if (rc == 0 && !l->req.msg->is_head) {
        rc = queue_body(l, NULL, buf_data(&problem), buf_size(&problem));
    }
    buf_fini(&problem);
    return rc;
}

int http__local_respond(struct http_request *r, int status, const char *content_type,
                        const struct http_header *extra, size_t nextra, const void *body,
                        size_t len)
{
    struct http_local *l = r->local;
    if (!local_open(l)) {
        if (!r->in_abort) {
            local_finish_lost(l);
        }
        return AGENT_E_CLOSED;
    }
    if (r->resp != RESP_NONE) {
        log_warn(HTTP_LOG_CAT, "local request %llu: http_respond after http_stream_begin",
                 (unsigned long long)r->id);
        http__local_stream_abort(r);
        return AGENT_E_INVAL;
    }
    /* RFC 9110 §6.4.1: 204 and 304 have no content. */
    bool no_content = status == 204 || status == 304;
    int ret = status >= 200 ? head_check(status, content_type, extra, nextra) : AGENT_E_INVAL;
    int rc = ret;
    if (ret == AGENT_E_INVAL) {
        log_warn(HTTP_LOG_CAT, "local request %llu: invalid response (status %d or headers)",
                 (unsigned long long)r->id, status);
        rc = queue_invalid(l);
    } else if (rc == 0) {
        rc = queue_head(l, status, content_type, extra, nextra);
        if (rc == 0 && !no_content && !r->msg->is_head && len > 0) {
            rc = queue_body(l, NULL, body, len);
        }
    }
    r->resp = RESP_DONE;
    /* A piece that could not be queued cuts the response, as a write error closes a socket. */
    local_finish(l, rc == 0);
    return ret ? ret : rc;
}

int http__local_stream_begin(struct http_request *r, int status, const char *content_type,
                             const struct http_header *extra, size_t nextra)
{
    struct http_local *l = r->local;
    if (!local_open(l)) {
        return AGENT_E_CLOSED;
    }
    int rc = head_check(status, content_type, extra, nextra);
    if (rc != 0) {
        return rc; /* the handler still owns r and must answer */
    }
    r->discard_body = r->msg->is_head;
    r->resp = RESP_STREAMING;
    rc = queue_head(l, status, content_type, extra, nextra);
    if (rc != 0) {
        local_lose(l); /* as a failed write: the abort callback follows */
    }
    return rc;
}

int http__local_stream_write(struct http_request *r, void *base, const void *data, size_t len)
{
    struct http_local *l = r->local;
    if (!local_open(l)) {
        bufpool_release(base);
        return AGENT_E_CLOSED; /* the abort callback follows from the loop */
    }
    if (len == 0 || r->discard_body) {
        bufpool_release(base);
        return 0;
    }
    int rc = queue_body(l, base, data, len);
    if (rc != 0) {
        local_lose(l); /* a lost chunk would corrupt the body */
    }
    return rc;
}

int http__local_stream_write_now(struct http_request *r)
{
    return local_open(r->local) ? 0 : AGENT_E_CLOSED;
}

int http__local_stream_end(struct http_request *r)
{
    struct http_local *l = r->local;
    if (r->in_abort) {
        return AGENT_E_CLOSED;
    }
    r->resp = RESP_DONE;
    if (l->state != LOCAL_HANDLER) {
        local_finish_lost(l);
        return AGENT_E_CLOSED;
    }
    local_finish(l, true);
    return 0;
}

void http__local_stream_abort(struct http_request *r)
{
    struct http_local *l = r->local;
    r->resp = RESP_DONE;
    if (l->state == LOCAL_HANDLER || l->state == LOCAL_LOST) {
        local_finish(l, false); /* what is queued goes out, then on_end(false) */
    }
}

/* ---------------------------------------------------------------------------------------------
 * Public API
 * ------------------------------------------------------------------------------------------- */

/*
 * Lays the request out as the parser does (http_parse.h: target\0, name\0value\0 pairs, then
 * the method\0 here, then http__msg_set_strings's path\0 query\0, in one buffer), so the
 * accessors of http_resp.c serve both kinds.
 * Everything was validated by the caller. Returns 0 or UV_ENOMEM.
 */
static int local_msg_new(const char *method, const char *target, size_t path_off, size_t path_len,
                         size_t query_off, size_t query_len, const struct http_header *headers,
                         size_t nheaders, const void *body, size_t len, struct http_msg **out)
{
    int rc = UV_ENOMEM;
    struct http_msg *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        goto fail;
    }
    buf_init(&m->head, 0);
    buf_init(&m->body, 0);
    m->url_len = strlen(target);
    rc = buf_append(&m->head, target, m->url_len + 1);
    for (size_t i = 0; rc == 0 && i < nheaders; i++) {
        rc = buf_append(&m->head, headers[i].name, strlen(headers[i].name) + 1);
        rc = rc ? rc : buf_append(&m->head, headers[i].value, strlen(headers[i].value) + 1);
    }
    /* The method after the pairs (the parser's is a static name): owned by the head too. */
    size_t method_at = buf_size(&m->head);
    rc = rc ? rc : buf_append(&m->head, method, strlen(method) + 1);
    rc = rc ? rc : (len > 0 ? buf_append(&m->body, body, len) : 0);
    /* The target is the head's first bytes: its path and query offsets are the head's. */
    rc = rc ? rc : http__msg_set_strings(m, nheaders, path_off, path_len, query_off, query_len);
    if (rc != 0) {
        goto fail;
    }
    m->url_done = true;
    m->method = (const char *)buf_data(&m->head) + method_at;
    m->http_major = 1;
    m->http_minor = 1;
    m->is_head = strcmp(method, "HEAD") == 0;
    m->keep_alive = true;
    *out = m;
    return 0;
fail:
    http_msg_free(m);
    return rc;
}

static bool sink_valid(const struct http_local_sink *sink)
{
    return sink != NULL && sink->on_head != NULL && sink->on_body != NULL && sink->on_end != NULL;
}

int http_local_new(uv_loop_t *loop, const char *method, const char *target,
                   const struct http_header *headers, size_t nheaders, const void *body, size_t len,
                   int tag, const struct http_local_sink *sink, void *ud, struct http_request **out)
{
    if (loop == NULL || method == NULL || target == NULL || !sink_valid(sink) || out == NULL ||
        (nheaders > 0 && headers == NULL) || (len > 0 && body == NULL) ||
        !http__is_token(method, strlen(method))) {
        return AGENT_E_INVAL;
    }
    /* The rules a network request line and its headers pass (http_parse.h), so that a route
     * never sees a request it could not get from the network. */
    size_t path_off, path_len, query_off, query_len;
    if (http__split_target(target, strlen(target), strcmp(method, "OPTIONS") == 0, &path_off,
                           &path_len, &query_off, &query_len) != 0) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < nheaders; i++) {
        const char *name = headers[i].name;
        const char *value = headers[i].value;
        if (name == NULL || value == NULL || !http__is_token(name, strlen(name)) ||
            !http__is_field_value(value, strlen(value))) {
            return AGENT_E_INVAL;
        }
    }
    struct http_msg *msg = NULL;
    struct http_local *l = calloc(1, sizeof(*l));
    int rc = l != NULL ? 0 : UV_ENOMEM;
    rc = rc ? rc
            : local_msg_new(method, target, path_off, path_len, query_off, query_len, headers,
                            nheaders, body, len, &msg);
    /* Last: once initialised the handle must be closed, and nothing can fail after it. */
    rc = rc ? rc : uv_idle_init(loop, &l->idle);
    if (rc != 0) {
        goto fail;
    }
    l->idle.data = l;
    l->state = LOCAL_HANDLER;
    l->sink = *sink;
    l->ud = ud;
    struct http_request *r = &l->req;
    r->local = l;
    r->id = atomic_fetch_add(&local_next_id, 1) + 1;
    r->tag = tag;
    r->msg = msg;
    r->dispatched = true; /* the caller hands it to the handler itself */
    buf_init(&r->added, HTTP_ADDED_MAX);
    *out = r;
    return 0;
fail:
    http_msg_free(msg);
    free(l);
    return rc;
}

bool http_request_is_local(const struct http_request *r)
{
    return r != NULL && r->conn == NULL;
}

void http_local_cancel(struct http_request *r)
{
    if (!http_request_is_local(r)) {
        return;
    }
    struct http_local *l = r->local;
    /* Once the handler has finished, what it queued is delivered whole; a second cancel, or one
     * while the abort callback is due, changes nothing. */
    if (l->state == LOCAL_HANDLER) {
        log_debug(HTTP_LOG_CAT, "local request %llu cancelled", (unsigned long long)r->id);
        local_lose(l);
    }
}
