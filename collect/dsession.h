/* SPDX-License-Identifier: MIT */
#ifndef AGENT_DSESSION_H
#define AGENT_DSESSION_H

/*
 * A decoded session: one EventPipe session with one runtime (ipc/ipc_session) whose stream goes
 * to a consumer (a decoder of events/ and what it reports to), and one way to end it.
 *
 * What it does for every session that decodes its stream (the metrics session, the trigger
 * sessions, the /logs probe):
 *   - starts the session with the caller's provider configuration, admission and start timeout;
 *   - hands each piece of the stream to consumer->feed; a piece the decoder refuses ends the
 *     session at once (the runtime's session is stopped in the background) with AGENT_E_PROTO
 *     and "the event stream cannot be read: <the decoder's words>";
 *   - stops it on dsession_stop with the caller's stop timeout (idempotent; before the session id
 *     is known the StopTracing goes out as soon as it is);
 *   - ends it with exactly one call: consumer->finish when the runtime closed the stream (after
 *     our stop, or because the process went away), consumer->error with a code and one reason
 *     text for every other end (refused, start or stop timeout, transport error, unreadable
 *     stream).
 *
 * Ownership: the dsession owns its ipc_session and frees itself right after the final callback
 * (finish or error) returns, or inside dsession_abort; the caller's handle is dangling from then
 * on. The consumer (vtable and ctx) is borrowed: both must stay valid until that final callback
 * or the abort. cfg and everything it points to is copied by dsession_start. The admission must
 * outlive every session started with it (ipc_session.h). Timeouts are the caller's: nothing here
 * has a default. libuv glue, loop thread only; no callback runs inside a dsession_* call.
 * Inside started and feed the consumer may call dsession_stop, _pause, _resume and _abort (feed
 * then returns 0: the dsession is gone), and inside feed dsession_take_buffer; inside finish and
 * error, none of them.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_session.h"

/* What reads the stream. feed, finish and error are required; the rest may be NULL. */
struct dsession_consumer {
    /* The runtime accepted the session (version: the CollectTracing version it took). */
    void (*started)(void *ctx, uint64_t session_id, int version);
    /* Stream bytes, valid during the call only. 0, or a negative code: the stream cannot be
     * read (the session ends with error(AGENT_E_PROTO, …); nothing more is fed). */
    int (*feed)(void *ctx, const uint8_t *p, size_t n);
    /* After feed returned rc != 0: the decoder's words for it into out[0..cap), NUL-terminated.
     * NULL (or an empty answer): agent_strerror(rc) is used. */
    void (*describe)(void *ctx, int rc, char *out, size_t cap);
    /* Final call, the stream ended normally: how is "stopped" (dsession_stop asked) or "the
     * runtime ended the session" (the process closed it: it exited, or it ended the session). */
    void (*finish)(void *ctx, const char *how);
    /*
     * Final call, any other end. code: AGENT_E_RUNTIME (refused; hresult is the runtime's
     * HRESULT, else 0), AGENT_E_TIMEOUT (no reply within the start timeout, or no end of stream
     * within the stop timeout), AGENT_E_PROTO (feed refused the stream) or a transport error.
     * reason says it in words.
     */
    void (*error)(void *ctx, int code, uint32_t hresult, const char *reason);
};

struct dsession_config {
    const struct ipc_collect_config *collect; /* providers, buffer, rundown (copied) */
    struct ipc_session_admission *admission;  /* counts the session (borrowed) */
    uint64_t start_timeout_ms;                /* connect + reply; > 0 */
    uint64_t stop_timeout_ms;                 /* StopTracing + the rest of the stream; > 0 */
    /* Stop as soon as the session exists: a session whose content is the rundown it writes
     * when stopped (collect->keep_rundown then keeps the rundown the caller asked for). */
    bool stop_at_once;
    /* The spec-set keeper's own session (below): not shown to it. */
    bool keeper_own;
};

/*
 * The one-spec-set rule (docs/events.md §9.1): a runtime keeps ONE FilterAndPayloadSpecs set per
 * process for Microsoft-Diagnostics-DiagnosticSource, the last session's. The owner of a set that
 * must survive other sessions (agent/otel: the OpenTelemetry sessions' [AS] lines) registers as
 * the keeper, and every session started on its loop (but its own, keeper_own) is shown to it
 * here, whoever starts it:
 *   - join, before the start: 1 when the session goes with the keeper's lines joined, j->cfg
 *     then being what it starts with (pointing into j->mem[], which dsession_start frees with
 *     free() once the config is copied) and j->key what left gets; 0 (or an error) when the
 *     session goes as the caller gave it;
 *   - left, once for every session that joined (even one whose start failed): once the runtime
 *     is done with it, so the keeper can set its lines again (the runtime dropped them with that
 *     session). That is after the session's end or abort AND its StopTracing's answer and the
 *     stream's close (an aborted session is stopped in the background), bounded by the
 *     admission's cleanup timeout (ipc_session_when_freed). had_session is false when the
 *     runtime refused the session or never got its request whole (its set was not replaced); a
 *     session whose start reply was lost counts as had.
 */
struct dsession_joined {
    struct ipc_collect_config cfg;
    uint64_t key;
    /* [0]: a copy of the providers, [1]: the arguments of one of them; nothing else (the
     * DiagnosticSource lines of dsession.c replace both when they join that provider). */
    void *mem[2];
};
struct dsession_keeper {
    uv_loop_t *loop; /* the sessions it sees: those started on this loop */
    void *ud;
    int (*join)(void *ud, const struct ipc_endpoint *ep, const struct ipc_collect_config *in,
                struct dsession_joined *j);
    void (*left)(void *ud, uint64_t key, bool had_session);
};
/* Sets the keeper (NULL: none); it (and its ud) stays valid until replaced or cleared. One per
 * process (dotmon runs one agent); the loop thread only. */
void dsession_set_keeper(const struct dsession_keeper *k);

/*
 * The same rule for every session with Microsoft-Diagnostics-DiagnosticSource, kept here for
 * all of them (dsspec.h): per runtime, the own lines of every live session with the provider are
 * held; a session starts with their union (its FilterAndPayloadSpecs set to it, so it may also
 * get the events the others asked for), and when a session that had the provider is over while
 * others still read it (the runtime emptied its list then), a refresher session sets the union
 * again: the provider with IgnoreShortCutKeywords (0x800) alone, which no event carries, counted
 * by dsession_set_spec_admission's admission and living until the next such end or the last
 * hold's. Sessions the runtime acknowledges in another order than they joined (several
 * connections) get the union set again the same way. dsession_close_specs (shutdown): the
 * refreshers of that loop stop and none starts.
 */
void dsession_close_specs(uv_loop_t *loop);
/* The admission refreshers are counted by (borrowed; NULL: the last held session's). The agent
 * gives its background sessions' so that refreshers never take a trace's place. */
void dsession_set_spec_admission(struct ipc_session_admission *adm);

struct dsession;

/*
 * Starts the session on the runtime at ep (copied). 0 and *out (exactly one final callback
 * follows), or a negative code and nothing follows: AGENT_E_INVAL (a timeout of 0, a missing
 * callback or configuration), AGENT_E_TOOBIG (the admission is full), UV_ENOMEM, or the connect
 * error of a listen-mode runtime that is gone (UV_ECONNREFUSED). A socket nobody listens on any
 * more ends in error() with the transport error instead.
 */
int dsession_start(uv_loop_t *loop, const struct ipc_endpoint *ep,
                   const struct dsession_config *cfg, const struct dsession_consumer *consumer,
                   void *ctx, struct dsession **out);

/* Graceful stop with the configured stop timeout: StopTracing, the rest of the stream still fed,
 * then the final callback. Idempotent. */
void dsession_stop(struct dsession *ds);

/* Stops reading the runtime's stream (its own buffer absorbs the pressure) / reads again. */
void dsession_pause(struct dsession *ds);
void dsession_resume(struct dsession *ds);

/*
 * Inside feed only: takes the read buffer that holds the bytes feed got (the view lies inside
 * it, at most DSESSION_READ_SIZE bytes from its start), so a relay can queue them without
 * copying; the caller releases it with bufpool_release (common/bufpool.h). The session reads into a
 * new buffer from then on. NULL outside feed, when already taken, or once the session was aborted
 * (ipc_session_take_buffer).
 */
uint8_t *dsession_take_buffer(struct dsession *ds);
/* Size of each read buffer (so a relay can take only well-filled ones). */
#define DSESSION_READ_SIZE IPC_SESSION_READ_SIZE

/* No more callbacks; frees ds. The runtime's session is stopped and drained in the background.
 * Accepts NULL. Not from inside finish or error (ds is being freed then). */
void dsession_abort(struct dsession *ds);

#endif
