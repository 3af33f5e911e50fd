/* SPDX-License-Identifier: MIT */
/*
 * The MCP endpoint (mcp.h; docs/mcp.md): MCP's Streamable HTTP transport on /mcp, over the pure
 * codec of mcp/ (mcp_rpc.h), running the tools of mcp_tools.h as local requests to dotmon's own
 * REST handler.
 *
 * Why each tool runs over the routes rather than beside them: admission (429), limits, the
 * problem+json words, the memory budget and cancellation are the routes' already, so an agent
 * gets exactly what a script gets, and a cancelled call is a REST client that left, which is what
 * makes a route stop its runtime session.
 *
 * Objects: one struct mcp; sessions (made at initialize, 32 hex digits from RAND_bytes, dropped on
 * DELETE, when idle for Timeouts:McpSessionIdleMs, or to make room); calls (one per tools/call in
 * flight, each with a state of its own, below). One timer serves every deadline: calls' deadlines
 * and progress ticks, sessions' idleness; it is re-armed to the earliest after every change.
 *
 * A call's lifetime is the longer of two: its client (the POST answered as JSON or as an SSE
 * stream; gone when answered, or when the client left) and its REST request (gone at the sink's
 * on_end, which comes on a later loop turn, also after http_local_cancel). A call whose client is
 * answered but whose request was cancelled waits in CALL_DRAINING for on_end before it is freed,
 * and may outlive its session.
 */
#include "mcp.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <openssl/rand.h>
#include <uv.h>

#include "agent.h"
#include "api.h"
#include "buf.h"
#include "err.h"
#include "http_cors.h"
#include "http_server.h"
#include "log.h"
#include "mcp_rpc.h"
#include "mcp_tools.h"
#include "membudget.h"
#include "utf8.h"

static const char cat[] = "dotmon.mcp";

/* A tool that keeps asking for requests is a tool bug: the call ends after this many. */
#define MCP_STEPS_MAX  64
#define MCP_TEXT_MAX   MCP_FETCH_DEFAULT_MAX
#define MCP_TARGET_MAX 8192
#define MCP_BODY_MAX   ((size_t)1024 * 1024)
/* Bytes of the answer's Content-Type kept (what mcp_problem_text needs). */
#define MCP_CTYPE_MAX 128

static const char instructions[] =
    "dotmon watches the .NET processes of this machine or pod from outside them, over the "
    "runtime's diagnostic port, and answers with short summaries rather than files: CPU profiles "
    "(hot methods and paths), allocations, exceptions, lock contention, GC, thread stacks, logs, "
    "metrics, heap summaries. Start with list_processes to see the processes and which one is the "
    "default; process tools take pid, uid or name. A tool that collects for a number of seconds "
    "runs that long; each tool's description says what it costs the app.";

/* One tool of mcp_tools() that is on, with its schemas parsed once. */
struct mcp_entry {
    const struct mcp_tool *tool;
    cJSON *input;  /* owned */
    cJSON *output; /* owned; NULL when the tool has none */
    uint64_t calls;
    uint64_t errors;    /* tool errors (isError) and JSON-RPC errors of its calls */
    uint64_t cancelled; /* by the client (notifications/cancelled, or it left) */
};

/*
 * A call's states (docs/style.md §5: one setter checks every transition against the table):
 *   RUNNING   the tool's step runs (only inside a call of ours: never seen by a callback);
 *   FETCHING  a REST request is out (c->local), the client waits;
 *   DRAINING  the client is answered or gone, the cancelled request's on_end is awaited;
 *   DONE      freed right after.
 */
enum call_state { CALL_RUNNING = 0, CALL_FETCHING, CALL_DRAINING, CALL_DONE, CALL_STATE_COUNT };

static const bool call_moves[CALL_STATE_COUNT][CALL_STATE_COUNT] = {
    [CALL_RUNNING] = {[CALL_FETCHING] = true, [CALL_DONE] = true},
    [CALL_FETCHING] = {[CALL_RUNNING] = true, [CALL_DRAINING] = true},
    [CALL_DRAINING] = {[CALL_DONE] = true},
};

struct mcp_session;

struct mcp_call {
    struct mcp *m;
    struct mcp_session *s; /* NULL once its session went (the call then only drains) */
    struct mcp_call *next; /* m->calls */
    struct mcp_entry *e;
    enum call_state state;
    struct mcp_id id;       /* the tools/call request's */
    struct mcp_id progress; /* its _meta.progressToken, or NONE */
    /* The POST being answered; NULL once it is answered or its client left. */
    struct http_request *client;
    bool sse;                   /* answered as an SSE stream (begun at the start) */
    struct http_request *local; /* the REST request out (FETCHING, DRAINING) */
    char host[256];             /* the client's Host, for the REST requests */
    struct mcp_tool_ctx ctx;
    cJSON *args; /* owned; ctx.args */
    uint64_t started_ms;
    uint64_t deadline_ms;
    uint64_t fetch_started_ms;
    uint64_t next_progress_ms;
    double last_progress;
    /* the answer of the request out */
    int status;
    char ctype[MCP_CTYPE_MAX];
    struct buf body;
    size_t charged; /* of body's bytes, to the endpoint's share of the memory budget */
    uint64_t total;
    bool cut;
    bool over_budget; /* cut because the share refused more */
};

struct mcp_session {
    struct mcp_session *next;
    char id[MCP_SESSION_ID_LEN + 1];
    const char *version; /* negotiated at initialize (static) */
    uint64_t last_ms;    /* its last request or call end */
    uint64_t last_seq;   /* the same in order of use (uv_now is in ms: two uses may share one) */
    size_t ncalls;       /* calls of it in flight (draining ones too) */
};

struct mcp {
    struct agent *a;
    uv_timer_t timer;
    bool timer_open; /* initialized and not closed */
    bool closing;
    size_t max_sessions;
    size_t max_calls;
    uint64_t call_ms;
    uint64_t idle_ms;
    uint64_t progress_ms;
    struct mcp_entry *tools;
    size_t ntools;
    cJSON *tools_result; /* tools/list's result, built once */
    struct mcp_memo *memo;
    /* The answers kept while calls run (each up to its fetch's max_bytes), charged to one share of
     * the memory budget, so that many agents' calls cannot grow dotmon past its limit. */
    struct mb_share share;
    struct mcp_session *sessions;
    size_t nsessions;
    struct mcp_call *calls;
    size_t ncalls;
    uint64_t use_seq; /* sessions' last_seq */
    uint64_t sessions_total;
    uint64_t sessions_replaced; /* dropped to make room for a new one */
    uint64_t sessions_expired;
};

static void rearm(struct mcp *m);

/* ---- answers ---- */

static void respond_json(struct http_request *req, int status, cJSON *msg,
                         const struct http_header *extra, size_t nextra)
{
    char *text = msg != NULL ? cJSON_PrintUnformatted(msg) : NULL;
    cJSON_Delete(msg);
    if (text == NULL) {
        api_problem(req, 500, "out of memory while formatting the MCP answer");
        return;
    }
    http_respond(req, status, "application/json", extra, nextra, text, strlen(text));
    free(text);
}

/* A refusal of the transport: HTTP status and a JSON-RPC error (id null unless known). */
static void respond_error(struct http_request *req, int status, const struct mcp_id *id, int code,
                          const char *message)
{
    respond_json(req, status, mcp_rpc_error(id, code, message), NULL, 0);
}

/* ---- sessions ---- */

static struct mcp_session *session_find(struct mcp *m, const char *id)
{
    for (struct mcp_session *s = m->sessions; s != NULL; s = s->next) {
        if (strcasecmp(s->id, id) == 0) {
            return s;
        }
    }
    return NULL;
}

static void call_abandon(struct mcp_call *c, const char *why);

/* Drops s: its calls are answered with why and cancelled (they drain without it). */
static void session_drop(struct mcp *m, struct mcp_session *s, const char *why)
{
    for (struct mcp_call *c = m->calls, *next = NULL; c != NULL; c = next) {
        next = c->next;
        if (c->s == s) {
            call_abandon(c, why);
            c->s = NULL; /* still draining its request: the call goes at on_end */
        }
    }
    for (struct mcp_session **pp = &m->sessions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            m->nsessions--;
            break;
        }
    }
    log_debug(cat, "session %.8s… dropped: %s", s->id, why);
    free(s);
}

/*
 * A new session. At Mcp:MaxSessions the one idle the longest (no call in flight) makes room, as
 * its client can initialize again at once (404 tells it to); with every session busy the new one
 * is refused (NULL, *status 503), since dropping one would cancel someone's call.
 */
static struct mcp_session *session_new(struct mcp *m, const char *version, int *status)
{
    if (m->nsessions >= m->max_sessions) {
        struct mcp_session *oldest = NULL;
        for (struct mcp_session *s = m->sessions; s != NULL; s = s->next) {
            if (s->ncalls == 0 && (oldest == NULL || s->last_seq < oldest->last_seq)) {
                oldest = s;
            }
        }
        if (oldest == NULL) {
            *status = 503;
            return NULL;
        }
        m->sessions_replaced++;
        session_drop(m, oldest, "replaced by a new session (Mcp:MaxSessions)");
    }
    uint8_t bytes[16];
    struct mcp_session *s = calloc(1, sizeof(*s));
    if (s == NULL || RAND_bytes(bytes, sizeof(bytes)) != 1) {
        free(s);
        *status = 500;
        return NULL;
    }
    mcp_session_id_format(bytes, s->id);
    s->version = version;
    s->last_ms = uv_now(m->a->loop);
    s->last_seq = ++m->use_seq;
    s->next = m->sessions;
    m->sessions = s;
    m->nsessions++;
    m->sessions_total++;
    return s;
}

/* ---- calls ---- */

static void call_set_state(struct mcp_call *c, enum call_state next)
{
    if (!call_moves[c->state][next]) {
        log_error(cat, "call: illegal transition %d -> %d", (int)c->state, (int)next);
        abort();
    }
    c->state = next;
}

static void call_free(struct mcp_call *c)
{
    struct mcp *m = c->m;
    call_set_state(c, CALL_DONE);
    for (struct mcp_call **pp = &m->calls; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            m->ncalls--;
            break;
        }
    }
    if (c->s != NULL) {
        c->s->ncalls--;
        c->s->last_ms = uv_now(m->a->loop);
        c->s->last_seq = ++m->use_seq;
    }
    if (c->e->tool->fini != NULL) {
        c->e->tool->fini(&c->ctx);
    }
    cJSON_Delete(c->ctx.structured);
    buf_fini(&c->ctx.text);
    buf_fini(&c->ctx.fetch.target);
    buf_fini(&c->ctx.fetch.body);
    mb_release(&m->share, c->charged);
    buf_fini(&c->body);
    cJSON_Delete(c->args);
    free(c);
}

/* Sends one JSON-RPC message (taken) as an event of req's SSE stream (a write that fails means
 * the client left: its abort callback follows). */
static void send_event(struct http_request *req, cJSON *msg)
{
    struct buf json, ev;
    buf_init(&json, 0);
    buf_init(&ev, 0);
    if (msg != NULL && mcp_json_append(&json, msg) == 0 &&
        mcp_sse_event(&ev, NULL, (const char *)buf_data(&json), buf_size(&json)) == 0) {
        http_stream_write(req, buf_data(&ev), buf_size(&ev));
    }
    cJSON_Delete(msg);
    buf_fini(&json);
    buf_fini(&ev);
}

/* Answers the client with the JSON-RPC message msg (taken), as an SSE event that ends the
 * stream, or as the JSON body; the client is finished either way. */
static void call_reply(struct mcp_call *c, cJSON *msg)
{
    struct http_request *req = c->client;
    c->client = NULL;
    if (req == NULL) {
        cJSON_Delete(msg);
        return;
    }
    if (c->sse) {
        send_event(req, msg);
        http_stream_end(req);
    } else {
        respond_json(req, 200, msg, NULL, 0);
    }
}

/* Ends the client's side with a tool result: structuredContent (taken) with the text, or a tool
 * error (isError, no structuredContent) with the text. */
static void call_reply_result(struct mcp_call *c, const char *text, cJSON *structured,
                              bool is_error)
{
    if (is_error) {
        c->e->errors++;
        cJSON_Delete(structured);
        structured = NULL;
    }
    cJSON *result = mcp_tool_result(text, structured, is_error);
    cJSON *msg = result != NULL ? mcp_rpc_result(&c->id, result)
                                : mcp_rpc_error(&c->id, MCP_RPC_INTERNAL_ERROR, "out of memory");
    call_reply(c, msg);
}

/* The client is done with (answered or gone): cancel the request out, or go. */
static void call_release(struct mcp_call *c)
{
    if (c->state == CALL_FETCHING) {
        call_set_state(c, CALL_DRAINING);
        http_local_cancel(c->local); /* on_end follows on a later turn and frees the call */
    } else if (c->state == CALL_RUNNING) {
        call_free(c);
    }
}

/* The call stops for the client's sake (a session dropped, shutdown): answered with why as a
 * tool error, its request cancelled. */
static void call_abandon(struct mcp_call *c, const char *why)
{
    if (c->state != CALL_FETCHING) {
        return; /* draining already: its client is answered */
    }
    call_reply_result(c, why, NULL, true);
    call_release(c);
}

/* The client cancelled the call (notifications/cancelled): "the receiver SHOULD NOT send a
 * response" (MCP, cancellation), so an SSE stream ends with nothing more and a JSON answer is an
 * empty 202; the request is cancelled, which stops its runtime session. */
static void call_cancel(struct mcp_call *c)
{
    if (c->state != CALL_FETCHING) {
        return;
    }
    c->e->cancelled++;
    struct http_request *req = c->client;
    c->client = NULL;
    if (req != NULL && c->sse) {
        http_stream_end(req);
    } else if (req != NULL) {
        http_respond(req, 202, NULL, NULL, 0, NULL, 0);
    }
    call_release(c);
}

/* The MCP client left while its call ran: cancel its request (the route stops its session). */
static void call_on_client_abort(void *ud, struct http_request *req)
{
    (void)req;
    struct mcp_call *c = ud;
    c->client = NULL;
    if (c->state == CALL_FETCHING) {
        c->e->cancelled++;
        log_debug(cat, "tools/call %s: the client left; its request is cancelled",
                  c->e->tool->name);
        call_release(c);
        rearm(c->m);
    }
}

static void call_step(struct mcp_call *c, const struct mcp_answer *ans);

/* ---- the REST request of a step (http_local_new) ---- */

static void sink_on_head(void *ud, int status, const char *content_type,
                         const struct http_header *h, size_t n)
{
    (void)h;
    (void)n;
    struct mcp_call *c = ud;
    c->status = status;
    snprintf(c->ctype, sizeof(c->ctype), "%s", content_type != NULL ? content_type : "");
}

static int sink_on_body(void *ud, const void *data, size_t len)
{
    struct mcp_call *c = ud;
    if (c->state != CALL_FETCHING) {
        return 1; /* cancelled: nothing more is wanted */
    }
    c->total += len;
    /* A refusal (status >= 400) is kept whole even for a streaming tool: its problem+json detail
     * is what the agent reads (a route's 400 "does not use Microsoft.Extensions.Logging …"). */
    bool refused = c->status >= 400 && !c->ctx.fetch.accept_errors;
    if (c->e->tool->chunk != NULL && !refused) {
        if (c->e->tool->chunk(&c->ctx, data, len) != 0) {
            c->cut = true;
            return 1;
        }
        return 0;
    }
    size_t max =
        c->ctx.fetch.max_bytes != 0 && !refused ? c->ctx.fetch.max_bytes : MCP_FETCH_DEFAULT_MAX;
    size_t room = max - buf_size(&c->body);
    size_t keep = len < room ? len : room;
    if (mb_charge(&c->m->share, keep) != 0) {
        c->cut = true;
        c->over_budget = true;
        return 1;
    }
    c->charged += keep;
    if (len > room) {
        /* Past the tool's bound: keep what fits and stop the route (its answer is cut). */
        buf_append(&c->body, data, room);
        c->cut = true;
        return 1;
    }
    if (buf_append(&c->body, data, len) != 0) {
        c->cut = true;
        return 1;
    }
    return 0;
}

static void sink_on_end(void *ud, bool complete)
{
    struct mcp_call *c = ud;
    struct mcp *m = c->m;
    c->local = NULL;
    if (c->state == CALL_DRAINING) {
        call_free(c);
        rearm(m);
        return;
    }
    call_set_state(c, CALL_RUNNING);
    struct mcp_answer ans = {
        .status = c->status,
        .content_type = c->ctype,
        .body = buf_cstr(&c->body),
        .len = buf_size(&c->body),
        .total = c->total,
        .complete = complete && !c->cut,
    };
    c->ctx.step++;
    if (c->over_budget) {
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "the answer of %s did not fit in the MCP endpoint's share of dotmon's memory "
                 "budget (at most %llu bytes for all the calls running at once): ask for less (a "
                 "smaller top "
                 "or seconds), or raise Memory:LimitMB",
                 c->e->tool->name, (unsigned long long)c->m->share.cap);
        call_reply_result(c, msg, NULL, true);
        call_free(c);
    } else if (c->status == 0) {
        call_reply_result(c, "dotmon's route gave no answer", NULL, true);
        call_free(c);
    } else if (c->status >= 400 && !c->ctx.fetch.accept_errors) {
        /* The route's refusal, in its own words (429 admission, 400 a bad argument, …). */
        struct buf text;
        buf_init(&text, 0);
        if (mcp_problem_text(&text, c->status, c->ctype, ans.body, ans.len) != 0) {
            buf_reset(&text);
        }
        call_reply_result(c, buf_size(&text) > 0 ? buf_cstr(&text) : "out of memory", NULL, true);
        buf_fini(&text);
        call_free(c);
    } else {
        call_step(c, &ans);
    }
    rearm(m);
}

static const struct http_local_sink call_sink = {sink_on_head, sink_on_body, sink_on_end};

/* Makes the step's request (ctx.fetch) and hands it to the REST handler. */
static void call_fetch(struct mcp_call *c)
{
    struct mcp *m = c->m;
    const struct mcp_fetch *f = &c->ctx.fetch;
    const char *method = f->method[0] != '\0' ? f->method : "GET";
    const char *target = buf_cstr(&c->ctx.fetch.target);
    if ((strcmp(method, "GET") != 0 && strcmp(method, "POST") != 0) || target[0] != '/') {
        log_warn(cat, "tool %s asked for %s %s: not a request dotmon makes", c->e->tool->name,
                 method, target);
        call_reply_result(c, "the tool made an invalid request (a bug in dotmon)", NULL, true);
        call_free(c);
        return;
    }
    struct http_header h[3];
    size_t n = 0;
    if (c->host[0] != '\0') {
        h[n++] = (struct http_header){"Host", c->host};
    }
    if (f->accept[0] != '\0') {
        h[n++] = (struct http_header){"Accept", f->accept};
    }
    if (f->content_type[0] != '\0') {
        h[n++] = (struct http_header){"Content-Type", f->content_type};
    }
    c->status = 0;
    c->ctype[0] = '\0';
    c->total = 0;
    c->cut = false;
    c->over_budget = false;
    mb_release(&m->share, c->charged);
    c->charged = 0;
    buf_fini(&c->body); /* (not kept for the next fetch: one big answer would pin its block) */
    buf_init(&c->body, 0);
    int rc = http_local_new(m->a->loop, method, target, h, n, buf_data(&f->body),
                            buf_size(&f->body), AGENT_TAG_ARTIFACTS, &call_sink, c, &c->local);
    if (rc != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "dotmon could not make the request: %s", agent_strerror(rc));
        call_reply_result(c, msg, NULL, true);
        call_free(c);
        return;
    }
    uint64_t now = uv_now(m->a->loop);
    c->fetch_started_ms = now;
    c->deadline_ms += (uint64_t)f->seconds * 1000;
    c->next_progress_ms = now + m->progress_ms;
    c->last_progress = 0;
    call_set_state(c, CALL_FETCHING);
    log_debug(cat, "tools/call %s: %s %s", c->e->tool->name, method, target);
    api_handle(m->a, c->local); /* its answer reaches the sink on later turns */
}

/* Runs the tool's next step (ans NULL for the first) and does what it asks. */
static void call_step(struct mcp_call *c, const struct mcp_answer *ans)
{
    struct mcp_fetch *f = &c->ctx.fetch;
    f->method[0] = '\0';
    buf_reset(&f->target);
    buf_reset(&f->body);
    f->content_type[0] = '\0';
    f->accept[0] = '\0';
    f->max_bytes = 0;
    f->seconds = 0;
    f->accept_errors = false;
    enum mcp_step st =
        c->ctx.step < MCP_STEPS_MAX ? c->e->tool->step(&c->ctx, ans) : MCP_STEP_ERROR;
    if (c->ctx.step >= MCP_STEPS_MAX) {
        buf_reset(&c->ctx.text);
        buf_append_str(&c->ctx.text, "the tool made too many requests (a bug in dotmon)");
    }
    if (st == MCP_STEP_FETCH) {
        call_fetch(c);
        return;
    }
    cJSON *structured = c->ctx.structured;
    c->ctx.structured = NULL;
    call_reply_result(c, buf_cstr(&c->ctx.text), structured, st != MCP_STEP_DONE);
    call_free(c);
}

/* The deadline passed: the request is cancelled and the client told why. */
static void call_timeout(struct mcp_call *c, uint64_t now)
{
    char msg[256];
    snprintf(msg, sizeof(msg),
             "%s did not finish within %.1f s (the seconds it asked for plus "
             "Timeouts:McpCallMs); its request was cancelled",
             c->e->tool->name, (double)(now - c->started_ms) / 1000.0);
    log_info(cat, "tools/call %s: timed out", c->e->tool->name);
    call_reply_result(c, msg, NULL, true);
    call_release(c);
}

/* notifications/progress while a request of a number of seconds runs (the client gave a
 * progress token and reads an SSE stream). progress is the seconds elapsed, which only rises. */
static void call_progress(struct mcp_call *c, uint64_t now)
{
    c->next_progress_ms = now + c->m->progress_ms;
    double elapsed = floor((double)(now - c->fetch_started_ms) / 100.0) / 10.0;
    if (elapsed <= c->last_progress) {
        return;
    }
    c->last_progress = elapsed;
    double total = (double)c->ctx.fetch.seconds;
    char msg[160];
    if (elapsed < total) {
        snprintf(msg, sizeof(msg), "%s: %.1f of %.0f s", c->e->tool->name, elapsed, total);
    } else {
        snprintf(msg, sizeof(msg), "%s: %.0f s collected, finishing", c->e->tool->name, total);
    }
    cJSON *params = mcp_progress_params(&c->progress, elapsed, elapsed < total ? total : -1, msg);
    send_event(c->client, mcp_rpc_notification("notifications/progress", params));
}

static bool call_wants_progress(const struct mcp_call *c)
{
    return c->state == CALL_FETCHING && c->sse && c->client != NULL &&
           c->progress.kind != MCP_ID_NONE && c->ctx.fetch.seconds > 0;
}

/* ---- the timer: deadlines, progress, idle sessions ---- */

static void on_timer(uv_timer_t *t)
{
    struct mcp *m = t->data;
    uint64_t now = uv_now(m->a->loop);
    for (struct mcp_call *c = m->calls, *next = NULL; c != NULL; c = next) {
        next = c->next;
        if (c->state == CALL_FETCHING && now >= c->deadline_ms) {
            call_timeout(c, now);
        } else if (call_wants_progress(c) && now >= c->next_progress_ms) {
            call_progress(c, now);
        }
    }
    for (struct mcp_session *s = m->sessions, *next = NULL; s != NULL; s = next) {
        next = s->next;
        if (s->ncalls == 0 && now - s->last_ms >= m->idle_ms) {
            m->sessions_expired++;
            session_drop(m, s, "idle for Timeouts:McpSessionIdleMs");
        }
    }
    rearm(m);
}

/* Arms the timer for the earliest of every deadline (or stops it when there is none). */
static void rearm(struct mcp *m)
{
    if (!m->timer_open || m->closing) {
        return;
    }
    uint64_t due = UINT64_MAX;
    for (const struct mcp_call *c = m->calls; c != NULL; c = c->next) {
        if (c->state == CALL_FETCHING) {
            due = c->deadline_ms < due ? c->deadline_ms : due;
            if (call_wants_progress(c) && c->next_progress_ms < due) {
                due = c->next_progress_ms;
            }
        }
    }
    for (const struct mcp_session *s = m->sessions; s != NULL; s = s->next) {
        if (s->ncalls == 0 && s->last_ms + m->idle_ms < due) {
            due = s->last_ms + m->idle_ms;
        }
    }
    if (due == UINT64_MAX) {
        uv_timer_stop(&m->timer);
        return;
    }
    uint64_t now = uv_now(m->a->loop);
    uv_timer_start(&m->timer, on_timer, due > now ? due - now : 0, 0);
}

/* ---- methods ---- */

static cJSON *initialize_result(const char *version)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *v = cJSON_AddStringToObject(r, "protocolVersion", version);
    cJSON *caps = cJSON_AddObjectToObject(r, "capabilities");
    cJSON *tools = cJSON_AddObjectToObject(caps, "tools");
    cJSON *info = cJSON_AddObjectToObject(r, "serverInfo");
    if (v == NULL || tools == NULL || info == NULL ||
        !cJSON_AddFalseToObject(tools, "listChanged") ||
        !cJSON_AddStringToObject(info, "name", "dotmon") ||
        !cJSON_AddStringToObject(info, "title", "dotmon: .NET diagnostics from outside the app") ||
        !cJSON_AddStringToObject(info, "version", DOTMON_VERSION) ||
        !cJSON_AddStringToObject(r, "instructions", instructions)) {
        cJSON_Delete(r);
        return NULL;
    }
    return r;
}

/* initialize: a new session (its id in Mcp-Session-Id), the version negotiated. */
static void do_initialize(struct mcp *m, struct http_request *req, const struct mcp_msg *msg)
{
    const char *asked = NULL;
    const char *why = NULL;
    if (mcp_initialize_params(msg->params, &asked, &why) != 0) {
        respond_error(req, 200, &msg->id, MCP_RPC_INVALID_PARAMS, why);
        return;
    }
    const char *version = mcp_protocol_negotiate(asked);
    int status = 0;
    struct mcp_session *s = session_new(m, version, &status);
    if (s == NULL) {
        char text[200];
        snprintf(text, sizeof(text),
                 status == 503 ? "every one of the %zu sessions has a call in flight "
                                 "(Mcp:MaxSessions); retry when one ends"
                               : "cannot make a session (%zu sessions)",
                 m->max_sessions);
        respond_error(req, status, &msg->id, MCP_RPC_SERVER_ERROR, text);
        return;
    }
    log_info(cat, "session %.8s… started (protocol %s, asked %.*s)", s->id, version,
             (int)utf8_cut(asked, strlen(asked), 32), asked);
    const struct http_header h[] = {{"Mcp-Session-Id", s->id}};
    respond_json(req, 200, mcp_rpc_result(&msg->id, initialize_result(version)), h, 1);
    rearm(m);
}

/* tools/call: the call starts; answered now (a refusal, a tool that needs no request) or later
 * from the sink or the timer. */
static void do_tools_call(struct mcp *m, struct mcp_session *s, struct http_request *req,
                          const struct mcp_msg *msg, bool sse)
{
    struct mcp_call_params p;
    const char *why = NULL;
    if (mcp_call_params_read(msg->params, &p, &why) != 0) {
        respond_json(req, 200, mcp_rpc_error(&msg->id, MCP_RPC_INVALID_PARAMS, why), NULL, 0);
        return;
    }
    struct mcp_entry *e = NULL;
    for (size_t i = 0; i < m->ntools; i++) {
        if (strcmp(m->tools[i].tool->name, p.name) == 0) {
            e = &m->tools[i];
        }
    }
    if (e == NULL) {
        char text[200];
        snprintf(text, sizeof(text), "Unknown tool: %.*s (tools/list names the tools)",
                 (int)utf8_cut(p.name, strlen(p.name), 128), p.name); /* (whole characters) */
        respond_json(req, 200, mcp_rpc_error(&msg->id, MCP_RPC_INVALID_PARAMS, text), NULL, 0);
        return;
    }
    e->calls++;
    if (s->ncalls >= m->max_calls) {
        /* The routes' 429 wording: a tool error the agent reads and may retry after. */
        char text[200];
        snprintf(text, sizeof(text),
                 "429 Too Many Requests: %zu call%s of this session %s running; at most %zu may "
                 "run at once (Mcp:MaxCallsPerSession)",
                 s->ncalls, s->ncalls == 1 ? "" : "s", s->ncalls == 1 ? "is" : "are", m->max_calls);
        e->errors++;
        respond_json(req, 200, mcp_rpc_result(&msg->id, mcp_tool_result(text, NULL, true)), NULL,
                     0);
        return;
    }
    struct mcp_call *c = calloc(1, sizeof(*c));
    cJSON *args = p.args != NULL ? cJSON_Duplicate(p.args, 1) : cJSON_CreateObject();
    if (c == NULL || args == NULL) {
        free(c);
        cJSON_Delete(args);
        respond_json(req, 200, mcp_rpc_error(&msg->id, MCP_RPC_INTERNAL_ERROR, "out of memory"),
                     NULL, 0);
        return;
    }
    c->m = m;
    c->s = s;
    c->e = e;
    c->id = msg->id;
    c->progress = p.progress;
    c->client = req;
    c->sse = sse;
    c->args = args;
    c->ctx.args = args;
    c->ctx.cfg = m->a->cfg;
    c->ctx.memo = m->memo;
    buf_init(&c->ctx.text, MCP_TEXT_MAX);
    buf_init(&c->ctx.fetch.target, MCP_TARGET_MAX);
    buf_init(&c->ctx.fetch.body, MCP_BODY_MAX);
    buf_init(&c->body, 0);
    const char *host = http_request_header(req, "Host");
    snprintf(c->host, sizeof(c->host), "%s", host != NULL ? host : "");
    c->started_ms = uv_now(m->a->loop);
    c->deadline_ms = c->started_ms + m->call_ms;
    c->next = m->calls;
    m->calls = c;
    m->ncalls++;
    s->ncalls++;
    if (sse) {
        static const struct http_header h[] = {{"Cache-Control", "no-cache"}};
        if (http_stream_begin(req, 200, "text/event-stream", h, 1) != 0) {
            c->client = NULL;
            http_stream_abort(req); /* the client is gone already */
            call_free(c);
            return;
        }
    }
    http_request_on_abort(req, call_on_client_abort, c);
    log_debug(cat, "session %.8s…: tools/call %s", s->id, e->tool->name);
    call_step(c, NULL);
    rearm(m);
}

/* notifications/cancelled: the call with that id in this session stops. */
static void on_cancelled(struct mcp *m, struct mcp_session *s, const struct mcp_msg *msg)
{
    struct mcp_id id;
    if (mcp_cancel_params_read(msg->params, &id) != 0) {
        return; /* a notification has no answer; nothing to cancel */
    }
    for (struct mcp_call *c = m->calls; c != NULL; c = c->next) {
        if (c->s == s && c->state == CALL_FETCHING && mcp_id_equal(&c->id, &id)) {
            log_debug(cat, "session %.8s…: tools/call %s cancelled by the client", s->id,
                      c->e->tool->name);
            call_cancel(c);
            rearm(m);
            return;
        }
    }
}

static void do_request(struct mcp *m, struct mcp_session *s, struct http_request *req,
                       const struct mcp_msg *msg, const struct mcp_accept *acc)
{
    if (strcmp(msg->method, "ping") == 0) {
        respond_json(req, 200, mcp_rpc_result(&msg->id, cJSON_CreateObject()), NULL, 0);
    } else if (strcmp(msg->method, "tools/list") == 0) {
        /* One page: params.cursor is accepted and ignored, no nextCursor. */
        respond_json(req, 200, mcp_rpc_result(&msg->id, cJSON_Duplicate(m->tools_result, 1)), NULL,
                     0);
    } else if (strcmp(msg->method, "tools/call") == 0) {
        do_tools_call(m, s, req, msg, acc->sse_named);
    } else if (strcmp(msg->method, "initialize") == 0) {
        respond_error(req, 400, &msg->id, MCP_RPC_INVALID_REQUEST,
                      "Invalid Request: this session is initialized already (initialize is sent "
                      "without Mcp-Session-Id, and makes a new session)");
    } else {
        char text[200];
        snprintf(text, sizeof(text), "Method not found: %s", msg->method);
        respond_json(req, 200, mcp_rpc_error(&msg->id, MCP_RPC_METHOD_NOT_FOUND, text), NULL, 0);
    }
}

/* ---- the transport ---- */

/* Mcp-Session-Id of req: the session, or NULL after answering (400 missing or repeated, 404
 * unknown or expired: the client then initializes again). */
static struct mcp_session *request_session(struct mcp *m, struct http_request *req)
{
    const char *id = http_request_header(req, "Mcp-Session-Id");
    if (id == NULL || http_request_header_count(req, "Mcp-Session-Id") != 1) {
        respond_error(req, 400, NULL, MCP_RPC_SERVER_ERROR,
                      id == NULL ? "Bad Request: Mcp-Session-Id header is required (initialize "
                                   "first)"
                                 : "Bad Request: more than one Mcp-Session-Id header");
        return NULL;
    }
    struct mcp_session *s = mcp_session_id_valid(id) ? session_find(m, id) : NULL;
    if (s == NULL) {
        respond_error(req, 404, NULL, MCP_RPC_SESSION_NOT_FOUND,
                      "Session not found (it ended or expired): initialize again");
        return NULL;
    }
    return s;
}

static void handle_post(struct mcp *m, struct http_request *req)
{
    struct mcp_accept acc;
    mcp_accept_parse(http_request_header(req, "Accept"), &acc);
    if (!acc.json || !acc.sse) {
        respond_error(req, 406, NULL, MCP_RPC_SERVER_ERROR,
                      "Not Acceptable: Client must accept both application/json and "
                      "text/event-stream");
        return;
    }
    if (!mcp_content_type_json(http_request_header(req, "Content-Type"))) {
        respond_error(req, 415, NULL, MCP_RPC_SERVER_ERROR,
                      "Unsupported Media Type: Content-Type must be application/json");
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct mcp_msg msg;
    struct mcp_rpc_err err;
    if (mcp_msg_parse(body, len, &msg, &err) != 0) {
        respond_error(req, 400, &err.id, err.code, err.message);
        return;
    }
    bool init = msg.kind == MCP_MSG_REQUEST && strcmp(msg.method, "initialize") == 0;
    if (init && http_request_header(req, "Mcp-Session-Id") == NULL) {
        do_initialize(m, req, &msg);
        mcp_msg_fini(&msg);
        return;
    }
    struct mcp_session *s = request_session(m, req); /* NULL: req is answered (and gone) */
    const char *pv = s != NULL ? http_request_header(req, "MCP-Protocol-Version") : NULL;
    if (pv != NULL && mcp_protocol_header(pv) == NULL) {
        respond_error(
            req, 400, NULL, MCP_RPC_SERVER_ERROR,
            "Bad Request: Unsupported protocol version (supported versions: " MCP_PROTOCOL_LATEST
            ", " MCP_PROTOCOL_PREVIOUS ", " MCP_PROTOCOL_OLDEST ")");
    } else if (s != NULL) {
        s->last_ms = uv_now(m->a->loop);
        s->last_seq = ++m->use_seq;
        if (msg.kind == MCP_MSG_REQUEST) {
            do_request(m, s, req, &msg, &acc);
        } else {
            /* Notifications and a client's responses have no answer but 202. */
            if (msg.kind == MCP_MSG_NOTIFICATION &&
                strcmp(msg.method, "notifications/cancelled") == 0) {
                on_cancelled(m, s, &msg);
            }
            http_respond(req, 202, NULL, NULL, 0, NULL, 0);
        }
        rearm(m);
    }
    mcp_msg_fini(&msg);
}

static void handle_delete(struct mcp *m, struct http_request *req)
{
    struct mcp_session *s = request_session(m, req);
    if (s == NULL) {
        return;
    }
    log_info(cat, "session %.8s… ended by its client", s->id);
    session_drop(m, s, "the session was ended (DELETE)");
    http_respond(req, 204, NULL, NULL, 0, NULL, 0);
    rearm(m);
}

/*
 * Origin (MCP, "Security Warning": DNS rebinding): a request that carries one is served only from
 * the request's own origin when its Host is an address or localhost (a page of a rebound name has
 * its own name as both, mcp_host_unspoofable), or from one allowed by Mcp:AllowedOrigins or
 * CorsConfiguration:AllowedOrigins; one Origin header at most.
 */
static bool origin_allowed(struct mcp *m, struct http_request *req)
{
    const char *origin = http_request_header(req, "Origin");
    if (origin == NULL) {
        return true;
    }
    const char *host = http_request_header(req, "Host");
    if (http_request_header_count(req, "Origin") != 1) {
        return false;
    }
    if (mcp_origin_is_own(origin, host, http_request_is_tls(req)) && mcp_host_unspoofable(host)) {
        return true;
    }
    bool any = false;
    if (http_cors_origin_allowed(config_get(m->a->cfg, "Mcp:AllowedOrigins"), origin, &any)) {
        return true; /* listed, or "*" written in dotmon's MCP setting itself */
    }
    /* CORS's "*" lets every page read the REST answers, but MCP's DNS rebinding rule still
     * holds: only an origin CorsConfiguration names counts here. */
    any = false;
    return http_cors_origin_allowed(config_get(m->a->cfg, "CorsConfiguration:AllowedOrigins"),
                                    origin, &any) &&
           !any;
}

void mcp_handle(struct mcp *m, struct http_request *req)
{
    if (m == NULL || http_request_is_local(req)) {
        /* (A tool never calls /mcp: a local request here would be a loop.) */
        api_problem(req, 404,
                    "the MCP endpoint is off: set Mcp:Enabled to true to serve /mcp "
                    "(docs/mcp.md)");
        return;
    }
    if (m->closing) {
        respond_error(req, 503, NULL, MCP_RPC_SERVER_ERROR, "dotmon is shutting down");
        return;
    }
    if (!origin_allowed(m, req)) {
        log_info(cat, "request %llu refused (403): Origin %.128s is not allowed",
                 (unsigned long long)http_request_id(req), http_request_header(req, "Origin"));
        respond_error(req, 403, NULL, MCP_RPC_SERVER_ERROR,
                      "Forbidden: the Origin is not allowed (the request's own origin, "
                      "Mcp:AllowedOrigins and CorsConfiguration:AllowedOrigins are)");
        return;
    }
    if (http_request_header(req, "Origin") != NULL &&
        http_request_add_header(req, "Access-Control-Expose-Headers", "Mcp-Session-Id") != 0) {
        /* a browser client could not read its session id: it would fail at its next request */
        log_warn(cat, "request %llu: Access-Control-Expose-Headers not added",
                 (unsigned long long)http_request_id(req));
    }
    const char *method = http_request_method(req);
    if (strcmp(method, "POST") == 0) {
        handle_post(m, req);
    } else if (strcmp(method, "DELETE") == 0) {
        handle_delete(m, req);
    } else {
        /* GET would open a stream for the server's own messages; dotmon sends none (MCP allows a
         * server to answer 405). */
        const struct http_header h[] = {{"Allow", "POST, DELETE"}};
        respond_json(req, 405,
                     mcp_rpc_error(NULL, MCP_RPC_SERVER_ERROR,
                                   "Method Not Allowed: dotmon opens no stream of its own; POST "
                                   "requests to /mcp"),
                     h, 1);
    }
}

/* ---- start-up ---- */

/* Mcp:Tools:<name>:Enabled for every key under Mcp:Tools: a name that is no tool stops dotmon. */
static int check_tool_names(const struct config *cfg)
{
    int rc = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        const char *k = cfg->v[i].key;
        if (!config_key_under(k, "Mcp:Tools") || strlen(k) <= strlen("Mcp:Tools:")) {
            continue;
        }
        const char *name = k + strlen("Mcp:Tools:");
        size_t n = strcspn(name, ":");
        char tool[128];
        snprintf(tool, sizeof(tool), "%.*s", (int)(n < sizeof(tool) ? n : sizeof(tool) - 1), name);
        if (mcp_tool_find(tool) == NULL) {
            log_error(cat, "%s: there is no MCP tool named %s (docs/mcp.md lists them)", k, tool);
            rc = AGENT_E_INVAL;
        }
    }
    return rc;
}

static cJSON *tool_json(const struct mcp_entry *e)
{
    const struct mcp_tool *t = e->tool;
    cJSON *o = cJSON_CreateObject();
    cJSON *ann = cJSON_CreateObject();
    bool ok = o != NULL && ann != NULL && cJSON_AddStringToObject(o, "name", t->name) &&
              cJSON_AddStringToObject(o, "title", t->title) &&
              cJSON_AddStringToObject(o, "description", t->description) &&
              cJSON_AddItemToObject(o, "inputSchema", cJSON_Duplicate(e->input, 1)) &&
              (e->output == NULL ||
               cJSON_AddItemToObject(o, "outputSchema", cJSON_Duplicate(e->output, 1))) &&
              cJSON_AddStringToObject(ann, "title", t->title) &&
              cJSON_AddBoolToObject(ann, "readOnlyHint", t->hints.read_only) &&
              cJSON_AddBoolToObject(ann, "destructiveHint", t->hints.destructive) &&
              cJSON_AddBoolToObject(ann, "idempotentHint", t->hints.idempotent) &&
              /* every tool acts on this machine's processes, nothing beyond */
              cJSON_AddBoolToObject(ann, "openWorldHint", false);
    if (!ok || !cJSON_AddItemToObject(o, "annotations", ann)) {
        cJSON_Delete(ann);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* A tool name as MCP 2025-11-25 asks for them ("Tool names"): 1 to 128 of A-Z, a-z, 0-9, '_',
 * '-' and '.'. */
static bool tool_name_ok(const char *name)
{
    size_t n = strlen(name);
    return n >= 1 && n <= 128 &&
           strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.") == n;
}

/* An object schema, as MCP requires of inputSchema and outputSchema. */
static cJSON *parse_schema(const char *tool, const char *what, const char *text)
{
    cJSON *s = text != NULL ? cJSON_Parse(text) : NULL;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (!cJSON_IsObject(s) || !cJSON_IsString(type) || strcmp(type->valuestring, "object") != 0) {
        log_error(cat, "MCP tool %s: its %s is not a JSON Schema of type object", tool, what);
        cJSON_Delete(s);
        return NULL;
    }
    return s;
}

/* The tools that are on, their schemas parsed, and tools/list's answer built from them. */
static int load_tools(struct mcp *m, const struct config *cfg)
{
    size_t n = 0;
    const struct mcp_tool *const *all = mcp_tools(&n);
    m->tools = calloc(n > 0 ? n : 1, sizeof(*m->tools));
    m->tools_result = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(m->tools_result, "tools");
    if (m->tools == NULL || list == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        char key[192];
        snprintf(key, sizeof(key), "Mcp:Tools:%s:Enabled", all[i]->name);
        int on = config_get_bool(cfg, key, all[i]->opt_in ? 0 : 1);
        if (on < 0) {
            log_error(cat, "%s must be true or false", key);
            return AGENT_E_INVAL;
        }
        if (on == 0) {
            continue;
        }
        if (!tool_name_ok(all[i]->name)) {
            log_error(cat, "MCP tool \"%s\": not a tool name MCP allows", all[i]->name);
            return AGENT_E_INVAL;
        }
        struct mcp_entry *e = &m->tools[m->ntools];
        e->tool = all[i];
        e->input = parse_schema(all[i]->name, "inputSchema", all[i]->input_schema);
        e->output = all[i]->output_schema != NULL
                        ? parse_schema(all[i]->name, "outputSchema", all[i]->output_schema)
                        : NULL;
        m->ntools++;
        if (e->input == NULL || (all[i]->output_schema != NULL && e->output == NULL)) {
            return AGENT_E_INVAL;
        }
        cJSON *t = tool_json(e);
        if (t == NULL || !cJSON_AddItemToArray(list, t)) {
            cJSON_Delete(t);
            return -ENOMEM;
        }
    }
    return 0;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct mcp *m = h->data;
    m->timer_open = false;
}

int mcp_new(struct agent *a, struct mcp **out)
{
    *out = NULL;
    const struct config *cfg = a->cfg;
    int on = config_get_bool(cfg, "Mcp:Enabled", 0);
    if (on < 0) {
        log_error(cat, "Mcp:Enabled must be true or false");
        return AGENT_E_INVAL;
    }
    if (on == 0) {
        return 0;
    }
    int rc = check_tool_names(cfg);
    if (rc != 0) {
        return rc;
    }
    uint64_t max_sessions = 16, max_calls = 4;
    if (config_get_uint(cfg, "Mcp:MaxSessions", 1, 1024, &max_sessions) != 0 ||
        config_get_uint(cfg, "Mcp:MaxCallsPerSession", 1, 64, &max_calls) != 0) {
        return AGENT_E_INVAL;
    }
    struct mcp *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return -ENOMEM;
    }
    m->a = a;
    /* A quarter of the budget for the answers being read (none when the budget is unlimited:
     * each call's own bound, MCP_FETCH_DEFAULT_MAX, holds then). */
    mb_share_init(&m->share, "MCP tool answers", membudget_fraction(25, MCP_FETCH_DEFAULT_MAX));
    m->max_sessions = (size_t)max_sessions;
    m->max_calls = (size_t)max_calls;
    m->call_ms = agent_timeout(a, TIMEOUT_MCP_CALL);
    m->idle_ms = agent_timeout(a, TIMEOUT_MCP_SESSION_IDLE);
    m->progress_ms = agent_timeout(a, TIMEOUT_MCP_PROGRESS);
    rc = load_tools(m, cfg);
    rc = rc ? rc : mcp_memo_new(&m->memo);
    if (rc == 0) {
        rc = uv_timer_init(a->loop, &m->timer);
    }
    if (rc != 0) {
        if (rc != AGENT_E_INVAL) {
            log_error(cat, "cannot start the MCP endpoint: %s", agent_strerror(rc));
        }
        mcp_free(m);
        return rc;
    }
    m->timer.data = m;
    m->timer_open = true;
    log_info(cat, "MCP endpoint on /mcp: %zu tool(s), at most %zu sessions of %zu calls each",
             m->ntools, m->max_sessions, m->max_calls);
    *out = m;
    return 0;
}

void mcp_shutdown(struct mcp *m)
{
    if (m == NULL || m->closing) {
        return;
    }
    for (struct mcp_call *c = m->calls, *next = NULL; c != NULL; c = next) {
        next = c->next;
        call_abandon(c, "dotmon is shutting down");
    }
    while (m->sessions != NULL) {
        session_drop(m, m->sessions, "dotmon is shutting down");
    }
    m->closing = true;
    if (m->timer_open && !uv_is_closing((uv_handle_t *)&m->timer)) {
        uv_close((uv_handle_t *)&m->timer, on_timer_closed);
    }
}

void mcp_free(struct mcp *m)
{
    if (m == NULL) {
        return;
    }
    /* Calls still draining when the loop has run out get no on_end any more. */
    while (m->calls != NULL) {
        struct mcp_call *c = m->calls;
        c->state = CALL_RUNNING; /* (its request is gone with the loop: nothing to wait for) */
        call_free(c);
    }
    while (m->sessions != NULL) {
        struct mcp_session *s = m->sessions;
        m->sessions = s->next;
        free(s);
    }
    for (size_t i = 0; i < m->ntools; i++) {
        cJSON_Delete(m->tools[i].input);
        cJSON_Delete(m->tools[i].output);
    }
    free(m->tools);
    cJSON_Delete(m->tools_result);
    mcp_memo_free(m->memo);
    mb_share_fini(&m->share);
    free(m);
}

cJSON *mcp_status_json(const struct mcp *m)
{
    if (m == NULL) {
        return NULL;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON *tools = cJSON_AddArrayToObject(o, "tools");
    if (tools == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    cJSON_AddNumberToObject(o, "sessions", (double)m->nsessions);
    cJSON_AddNumberToObject(o, "maxSessions", (double)m->max_sessions);
    cJSON_AddNumberToObject(o, "sessionsStarted", (double)m->sessions_total);
    cJSON_AddNumberToObject(o, "sessionsReplaced", (double)m->sessions_replaced);
    cJSON_AddNumberToObject(o, "sessionsExpired", (double)m->sessions_expired);
    cJSON_AddNumberToObject(o, "callsInFlight", (double)m->ncalls);
    cJSON_AddNumberToObject(o, "memoBytes", (double)mcp_memo_bytes(m->memo));
    for (size_t i = 0; i < m->ntools; i++) {
        const struct mcp_entry *e = &m->tools[i];
        cJSON *t = cJSON_CreateObject();
        if (t == NULL || !cJSON_AddItemToArray(tools, t)) {
            cJSON_Delete(t);
            break;
        }
        cJSON_AddStringToObject(t, "name", e->tool->name);
        cJSON_AddNumberToObject(t, "calls", (double)e->calls);
        cJSON_AddNumberToObject(t, "errors", (double)e->errors);
        cJSON_AddNumberToObject(t, "cancelled", (double)e->cancelled);
    }
    return o;
}
