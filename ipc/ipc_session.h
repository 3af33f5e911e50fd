/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_SESSION_H
#define AGENT_IPC_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_client.h"
#include "ipc_cmd.h"

/*
 * One EventPipe streaming session (docs/ipc.md §4.2, §5), libuv glue.
 *
 * Start: connects and sends the newest CollectTracing this code knows (5), stepping down on
 * UNKNOWN_COMMAND (each try on a new connection) but never below ipc_collect_min_version(cfg);
 * if even that version is unknown and the only reason is a non-default rundown keyword, one
 * more try with that version's default rundown (what dotnet-trace/dotnet-monitor do for
 * gc-collect), unless cfg->keep_rundown. The reply carries the session id; the same connection
 * then streams nettrace.
 *
 * Streaming: on_data gets the bytes as they arrive. ipc_session_pause stops reading the socket
 * (the runtime's own buffer then absorbs the pressure, and its writer blocks); resume starts
 * again. Nothing is buffered here beyond one read.
 *
 * Ending: ipc_session_stop sends StopTracing on a NEW connection (deviations.md §1.10) and keeps
 * relaying until the runtime closes the stream (that is when rundown and the end tag have been
 * written). A runtime that dies ends the stream with EOF or a reset. ipc_session_abort (client went
 * away) sends StopTracing in the background so no session is left running in the runtime, and
 * keeps reading the stream (the bytes are dropped) until the runtime closes it after that stop.
 * Closing the stream first would let the runtime end the session by itself (ipc.md §5.4) and reuse
 * its id, an address, for a new session that the late StopTracing would then stop.
 *
 * All callbacks run on the loop, never synchronously inside an ipc_session_* call.
 */

struct ipc_session;

struct ipc_session_callbacks {
    /* The runtime accepted the session. version = CollectTracing version that was used. */
    void (*on_started)(void *ud, uint64_t session_id, int version);
    /* Stream bytes; the view is valid during the call only. May call pause/stop/abort. */
    void (*on_data)(void *ud, const uint8_t *p, size_t n);
    /*
     * Final callback; the session object is freed right after it returns.
     *  - status 0: the runtime closed the stream (normal end after stop, or the process exited;
     *    whether the trace is complete is for a nettrace checker to say).
     *  - AGENT_E_RUNTIME: the runtime refused the session; hresult is its HRESULT.
     *  - AGENT_E_TIMEOUT: start did not get a reply in time, or the stream did not end within
     *    the stop timeout after StopTracing.
     *  - other negative codes: transport errors (connection refused, reset before start…).
     * Not called after ipc_session_abort.
     */
    void (*on_end)(void *ud, int status, uint32_t hresult);
};

/*
 * Admission: how many sessions one owner (the agent) has alive, and how many it allows. Owned by
 * the caller, passed to every ipc_session_start, and it must outlive every session started with
 * it: a session is counted from its start until it is freed, aborted ones (still sending their
 * StopTracing in the background) included. The loop thread only.
 */
struct ipc_session_admission {
    size_t live; /* sessions counted now (read it; ipc_session.c changes it) */
    /* Of those, the ones the runtime has acknowledged: its session exists (read it). */
    size_t started;
    size_t max; /* ipc_session_start refuses at live >= max (AGENT_E_TOOBIG); 0: no limit */
    /* The bound on what a session does after its end or abort (reading a late start reply,
     * StopTracing and the stream's end), taken at each start; 0 → 10000. */
    uint64_t cleanup_timeout_ms;
};

/*
 * ep: the runtime's endpoint (ipc_client.h) and its user (as for ipc_exchange_start; copied;
 * every try and the StopTracing use a new connection of that runtime, each checked). cfg and
 * everything it points to is copied. start_timeout_ms bounds connect + reply (0 → 5000). Returns
 * 0 (callbacks will follow, adm->live counts the session) or a negative code (nothing will
 * follow): AGENT_E_TOOBIG when adm is full, AGENT_E_INVAL, UV_ENAMETOOLONG, UV_ENOMEM, or the
 * connect error (UV_ECONNREFUSED for a listen-mode runtime that is gone).
 */
int ipc_session_start(uv_loop_t *loop, struct ipc_session_admission *adm,
                      const struct ipc_endpoint *ep, const struct ipc_collect_config *cfg,
                      uint64_t start_timeout_ms, const struct ipc_session_callbacks *cb, void *ud,
                      struct ipc_session **out);

void ipc_session_pause(struct ipc_session *s);
void ipc_session_resume(struct ipc_session *s);

/*
 * Graceful stop (idempotent). Before the session id is known, the stop is sent as soon as it is.
 * stop_timeout_ms bounds StopTracing + the rest of the stream (rundown can take seconds on big
 * apps; 0 → 60000). Data keeps flowing to on_data until on_end.
 */
void ipc_session_stop(struct ipc_session *s, uint64_t stop_timeout_ms);

/* Abandon: no more callbacks. StopTracing goes out in the background, the stream is drained until
 * the runtime closes it, and everything is freed when both are done (bounded by a timeout). */
void ipc_session_abort(struct ipc_session *s);

/*
 * cb(ud, had_session) once s is freed: after its end or abort, when its background work is over
 * too (a late start reply read, the StopTracing answered and the stream closed, or the cleanup
 * bound passed), so the runtime is done with the session. had_session: the runtime had created
 * it (its id was known) or may have (a whole request went out and no error reply came: the reply
 * may have been lost to the start timeout). Set it while the handle is valid (before the end or
 * the abort); called
 * from a close callback, never inside an ipc_session_* call, at most once.
 */
void ipc_session_when_freed(struct ipc_session *s, void (*cb)(void *ud, bool had_session),
                            void *ud);

/*
 * Inside on_data only: takes the read buffer that holds the view on_data got (the view lies
 * inside it), so a relay can queue the bytes without copying them; the caller releases it with
 * bufpool_release (it is a pool block or a malloc'd one, common/bufpool.h). The session reads
 * into a new buffer from then on, a pool block when one is free. NULL outside on_data or if
 * already taken.
 */
uint8_t *ipc_session_take_buffer(struct ipc_session *s);
/* Size of each read buffer (so a relay can take only well-filled ones). */
#define IPC_SESSION_READ_SIZE ((size_t)256 * 1024)

/* The words for on_end's status into out[0..cap): "the runtime refused the session (HRESULT …)",
 * "session failed: <error>", or for status 0 "stopped" (stopping: we asked) or "the runtime ended
 * the session". */
void ipc_session_end_reason(int status, uint32_t hresult, bool stopping, char *out, size_t cap);

/* Session id (0 until on_started) and bytes received so far. */
uint64_t ipc_session_id(const struct ipc_session *s);
uint64_t ipc_session_bytes(const struct ipc_session *s);

#endif
