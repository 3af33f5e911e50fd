/* SPDX-License-Identifier: MIT */
/* A standing session; see standing.h. */
#include "standing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

#define STANDING_REASON_MAX 320

struct standing {
    struct standing_config cfg;
    struct ipc_endpoint ep; /* owned copy (ipc_endpoint_copy) */
    const struct standing_ops *ops;
    void *ud;
    struct dsession *ds; /* NULL between attempts */
    uv_timer_t timer;    /* the next attempt (or a failed prepare's end) */
    enum standing_state state;
    uint64_t backoff_ms;
    bool restart_now; /* standing_restart asked while a session ran */
    bool freed;       /* standing_free: the timer is closing */
    int pending_code; /* a refused attempt, told from the timer */
    uint64_t attempts, ends;
    char reason[STANDING_REASON_MAX];
};

static void on_timer(uv_timer_t *t);

static uint64_t next_wait(const struct standing *s)
{
    uint64_t max = s->cfg.backoff_max_ms;
    uint64_t cur = s->backoff_ms;
    uint64_t next = cur == 0 ? s->cfg.backoff_min_ms : (cur > max / 2 ? max : cur * 2);
    return next > max ? max : next;
}

/* Every end of an attempt: tell the owner, then wait (or not) for the next. */
static void attempt_over(struct standing *s, int code, const char *how)
{
    s->ds = NULL;
    s->ends++;
    snprintf(s->reason, sizeof(s->reason), "%s", how != NULL ? how : "");
    bool again = s->state != STANDING_STOPPING;
    uint64_t wait = 0;
    if (again && !s->restart_now) {
        wait = next_wait(s);
        s->backoff_ms = wait;
    }
    bool asked = again && s->restart_now;
    s->restart_now = false;
    s->state = again ? STANDING_WAITING : STANDING_STOPPED;
    s->ops->ended(s->ud, code, s->reason, again, asked);
    /* ended() may have freed it (the memory stays until the timer closed), stopped it, or
     * restarted it (the timer then runs already, with 0) */
    if (again && !s->freed && s->state == STANDING_WAITING &&
        !uv_is_active((uv_handle_t *)&s->timer)) {
        uv_timer_start(&s->timer, on_timer, wait, 0);
    }
}

static void c_started(void *ctx, uint64_t session_id, int version)
{
    struct standing *s = ctx;
    s->backoff_ms = 0;
    if (s->state == STANDING_STARTING) {
        s->state = STANDING_RUNNING;
    }
    if (s->ops->started != NULL) {
        s->ops->started(s->ud, session_id, version);
    }
}

static int c_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct standing *s = ctx;
    return s->ops->feed(s->ud, p, n);
}

static void c_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct standing *s = ctx;
    if (s->ops->describe != NULL) {
        s->ops->describe(s->ud, rc, out, cap);
    } else if (cap > 0) {
        out[0] = '\0';
    }
}

static void c_finish(void *ctx, const char *how)
{
    attempt_over(ctx, 0, how);
}

static void c_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    (void)hresult;
    attempt_over(ctx, code, reason);
}

static const struct dsession_consumer consumer = {.started = c_started,
                                                  .feed = c_feed,
                                                  .describe = c_describe,
                                                  .finish = c_finish,
                                                  .error = c_error};

/* One attempt; a refusal ends it from a zero timer (no callback inside the caller's call). */
static void attempt(struct standing *s)
{
    struct ipc_collect_config collect;
    memset(&collect, 0, sizeof(collect));
    s->attempts++;
    s->state = STANDING_STARTING;
    int rc = s->ops->prepare(s->ud, &collect);
    if (rc == 0) {
        struct dsession_config dc = {.collect = &collect,
                                     .admission = s->cfg.admission,
                                     .start_timeout_ms = s->cfg.start_timeout_ms,
                                     .stop_timeout_ms = s->cfg.stop_timeout_ms,
                                     .keeper_own = s->cfg.keeper_own};
        rc = dsession_start(s->cfg.loop, &s->ep, &dc, &consumer, s, &s->ds);
    }
    if (rc != 0) {
        s->ds = NULL;
        s->pending_code = rc;
        uv_timer_start(&s->timer, on_timer, 0, 0);
    }
}

static void on_timer(uv_timer_t *t)
{
    struct standing *s = t->data;
    if (s->pending_code != 0) { /* the attempt that could not start */
        int rc = s->pending_code;
        s->pending_code = 0;
        char how[160];
        snprintf(how, sizeof(how), "the session could not be started: %s", agent_strerror(rc));
        attempt_over(s, rc, how);
        return;
    }
    if (s->state == STANDING_WAITING) {
        attempt(s);
    }
}

int standing_new(const struct standing_config *cfg, const struct ipc_endpoint *ep,
                 const struct standing_ops *ops, void *ud, struct standing **out)
{
    if (cfg == NULL || ep == NULL || ops == NULL || ops->prepare == NULL || ops->feed == NULL ||
        ops->ended == NULL || cfg->loop == NULL || cfg->start_timeout_ms == 0 ||
        cfg->stop_timeout_ms == 0 || cfg->backoff_min_ms == 0 ||
        cfg->backoff_max_ms < cfg->backoff_min_ms || out == NULL) {
        return AGENT_E_INVAL;
    }
    struct standing *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->cfg = *cfg;
    int rc = ipc_endpoint_copy(&s->ep, ep);
    if (rc != 0) {
        ipc_endpoint_fini(&s->ep);
        free(s);
        return rc;
    }
    s->ops = ops;
    s->ud = ud;
    uv_timer_init(cfg->loop, &s->timer);
    uv_unref((uv_handle_t *)&s->timer); /* the loop's end does not wait for a retry */
    s->timer.data = s;
    attempt(s);
    *out = s;
    return 0;
}

void standing_restart(struct standing *s)
{
    if (s == NULL || s->state == STANDING_STOPPING || s->state == STANDING_STOPPED) {
        return;
    }
    if (s->state == STANDING_WAITING && s->pending_code == 0) {
        s->backoff_ms = 0;
        uv_timer_start(&s->timer, on_timer, 0, 0);
        return;
    }
    s->restart_now = true;
    /* the end comes back through attempt_over (no session: a refused attempt's end is pending
     * on the timer) */
    if (s->ds != NULL) {
        dsession_stop(s->ds);
    }
}

void standing_stop(struct standing *s)
{
    if (s == NULL || s->state == STANDING_STOPPING || s->state == STANDING_STOPPED) {
        return;
    }
    if (s->ds == NULL && s->pending_code == 0) { /* waiting: nothing runs */
        uv_timer_stop(&s->timer);
        s->state = STANDING_STOPPED;
        return;
    }
    s->state = STANDING_STOPPING;
    if (s->ds != NULL) {
        dsession_stop(s->ds);
    }
}

static void on_closed(uv_handle_t *h)
{
    struct standing *s = h->data;
    ipc_endpoint_fini(&s->ep);
    free(s);
}

void standing_free(struct standing *s)
{
    if (s == NULL || s->freed) {
        return;
    }
    s->freed = true;
    dsession_abort(s->ds); /* accepts NULL */
    s->ds = NULL;
    uv_close((uv_handle_t *)&s->timer, on_closed);
}

enum standing_state standing_state(const struct standing *s, const char **reason)
{
    if (reason != NULL) {
        *reason = s->reason;
    }
    return s->state;
}

const char *standing_state_name(enum standing_state st)
{
    switch (st) {
    case STANDING_STARTING:
        return "starting";
    case STANDING_RUNNING:
        return "running";
    case STANDING_WAITING:
        return "waiting";
    case STANDING_STOPPING:
        return "stopping";
    case STANDING_STOPPED:
        return "stopped";
    }
    return "unknown";
}

void standing_counts(const struct standing *s, uint64_t *attempts, uint64_t *ends)
{
    *attempts = s->attempts;
    *ends = s->ends;
}
