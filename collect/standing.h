/* SPDX-License-Identifier: MIT */
#ifndef COLLECT_STANDING_H
#define COLLECT_STANDING_H

/*
 * A standing session: one decoded session (dsession.h) kept open with one runtime for as long as
 * its owner wants it, the lifecycle of every continuous per-process consumer (the exceptions
 * history, agent/monitor/exceptions.h; the OpenTelemetry sessions, agent/otel/otel_proc.c):
 *   - it starts at once, with the configuration the owner's prepare() gives for each attempt;
 *   - when the session ends while wanted (the runtime ended it: another tool's Disable, a refused
 *     start, a transport error, a stream the consumer refused), ended() is told, and it starts
 *     again after a doubling wait from backoff_min_ms up to backoff_max_ms (reset once a session
 *     was accepted); standing_restart asks for a start again at once after the end;
 *   - standing_stop ends it gracefully (StopTracing, the rest of the stream still fed) and never
 *     starts again; standing_free aborts what runs and frees it.
 * The owner sees the stream through its consumer (started, feed, describe as dsession's) and
 * each end through ended(); the decoders it made in prepare() go in ended(). state() tells where
 * it is, with the last end's reason, for /info.
 *
 * Ownership: the standing owns its dsession and its timer (both closed by standing_free, the
 * memory going once the timer's handle closed). ops and ud are borrowed until standing_free.
 * libuv glue, loop thread only; no callback runs inside a standing_* call but standing_new's
 * first start failing at once (ended() is then called from a zero timer, never inside).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "dsession.h"
#include "ipc_client.h"
#include "ipc_cmd.h"

struct standing;

struct standing_ops {
    /* Before each attempt: the configuration to start with into *out (what it points to must
     * stay valid until the call that started it returns: dsession_start copies it), with the
     * owner's decoders made. 0, or a negative code: no attempt, ended() follows (from a timer)
     * with that code, and the wait before the next. Required. */
    int (*prepare)(void *ud, struct ipc_collect_config *out);
    void (*started)(void *ud, uint64_t session_id, int version); /* may be NULL */
    int (*feed)(void *ud, const uint8_t *p, size_t n);           /* required */
    void (*describe)(void *ud, int rc, char *out, size_t cap);   /* may be NULL */
    /* The attempt is over (every prepare() is followed by exactly one ended()): code 0 when the
     * runtime closed the stream, else dsession's error code; how says it in words. restarting:
     * another attempt follows (after the wait); false once stopped. asked: this end came from
     * standing_restart (the next attempt starts at once), not from the runtime. Required. */
    void (*ended)(void *ud, int code, const char *how, bool restarting, bool asked);
};

struct standing_config {
    uv_loop_t *loop;
    struct ipc_session_admission *admission; /* borrowed; outlives the standing */
    uint64_t start_timeout_ms;               /* > 0 */
    uint64_t stop_timeout_ms;                /* > 0 */
    uint64_t backoff_min_ms;                 /* > 0: the first wait after an end */
    uint64_t backoff_max_ms;                 /* >= backoff_min_ms */
    bool keeper_own;                         /* dsession_config's */
};

enum standing_state {
    STANDING_STARTING, /* asked, not accepted yet */
    STANDING_RUNNING,  /* the runtime accepted it */
    STANDING_WAITING,  /* ended; the next attempt after the wait */
    STANDING_STOPPING, /* standing_stop asked, not ended yet */
    STANDING_STOPPED   /* stopped and ended: nothing more */
};

/*
 * Starts standing on the runtime at ep (copied): 0 with *out, AGENT_E_INVAL (a missing callback,
 * a zero timeout or wait) or UV_ENOMEM (nothing follows).
 */
int standing_new(const struct standing_config *cfg, const struct ipc_endpoint *ep,
                 const struct standing_ops *ops, void *ud, struct standing **out);
/* Starts again as soon as the session ended (now when it is waiting), without the wait. */
void standing_restart(struct standing *s);
/* Graceful stop: StopTracing, the rest of the stream, then ended(restarting false). No attempt
 * after. While waiting for the next attempt nothing runs: it is STOPPED at once and no ended()
 * follows. Idempotent; NULL is fine. */
void standing_stop(struct standing *s);
/* No more callbacks (none, not even ended()); the session is aborted (StopTracing in the
 * background) and s freed once its timer closed. NULL is fine; also from inside ended(). */
void standing_free(struct standing *s);

/* Where it is, and the reason its last attempt ended ("" before any end). */
enum standing_state standing_state(const struct standing *s, const char **reason);
const char *standing_state_name(enum standing_state st);
/* Attempts started (the first included) and ended. */
void standing_counts(const struct standing *s, uint64_t *attempts, uint64_t *ends);

#endif
