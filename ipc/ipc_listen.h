/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_LISTEN_H
#define AGENT_IPC_LISTEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_discovery.h"

/*
 * Listen mode (dotnet-monitor's "reverse server", docs/ipc.md §2.1-2.2): dotmon binds a Unix socket
 * and runtimes started with DOTNET_DiagnosticPorts=<path>[,nosuspend] connect to it. Each
 * connection starts with the 34-byte ADVR_V1 advertise (cookie, pid) and then carries at most one
 * command; the runtime reconnects as soon as a command has consumed its connection.
 *
 * The listener
 *  - binds the socket (mode 0600 unless configured) in a private 0700 folder beside the path,
 *    sets its mode there and renames it into place without replacing anything, so nobody who can
 *    write the folder can make dotmon change another file (common/shdir.h); a stale socket file
 *    left at the path is replaced (only a socket nobody accepts on; any other file, a symlink
 *    included, is an error), and what ends up at the path must be the socket just made;
 *  - accepts connections only from trusted users (SO_PEERCRED, cfg.trust);
 *  - accepts connections and reads each one's advertise within advertise_timeout_ms; a short or
 *    malformed advertise closes that connection only;
 *  - tracks runtimes by cookie and keeps each one's newest idle connections ("spares", at most 2)
 *    for the next command: the endpoint of a listed runtime (ipc_process_endpoint: its transport,
 *    a counted reference to this listener and the runtime's uid) given to ipc_exchange_start or
 *    ipc_session_start takes one (ipc_internal.h, ipc__connect); once the runtime is forgotten or
 *    the listener closes, such an endpoint (kept by a job, say) is refused (UV_ECONNREFUSED);
 *  - on a runtime's first advertise sends ResumeRuntime (unless hold_suspended: then only when
 *    ipc_listen_resume is called), then probes it with ProcessInfo3 -> 2 -> 1 and lists it as a
 *    struct ipc_process whose pid is the advertised pid (the pid the target sees itself as);
 *    ProcessInfo is asked again 1 s and 5 s later (the struct is updated in place): a runtime
 *    connects so early in its start-up that it does not know its full command line and entry
 *    point yet (dotnet/runtime#59439);
 *  - forgets a runtime that has had no connection to dotmon at all (no spare, no command in
 *    progress) for forget_after_ms, unless it is marked busy (ipc_listen_busy): a killed app's
 *    spare ends with EOF, and it never reconnects.
 *
 * Everything runs on the loop given at creation; nothing here blocks, except the start-up work
 * of ipc_listen_start (a few metadata calls in the socket's folder, at most one non-blocking
 * connect); the socket file is removed at close on the thread pool.
 */

struct ipc_listen_config {
    const char *path;              /* socket path; required (fits sun_path) */
    unsigned socket_mode;          /* permission bits of the socket file; 0 -> 0600 */
    uint64_t probe_timeout_ms;     /* per ResumeRuntime / ProcessInfo exchange; 0 -> 3000 */
    uint64_t advertise_timeout_ms; /* for the 34 bytes after accept; 0 -> 5000 */
    uint64_t forget_after_ms;      /* grace without any connection; 0 -> 3000 */
    uint64_t retry_first_ms;       /* a failed probe's first retry (doubling); 0 -> 500 */
    uint64_t retry_max_ms;         /* the longest wait between those retries; 0 -> 30000 */
    uint64_t park_ms;              /* a turned-away runtime's connection held; 0 -> 10000 */
    uint64_t settle_ms;            /* a one-word command line waited on at most; 0 -> 2000 */
    uint64_t settle_step_ms;       /* ... asked again this often meanwhile; 0 -> 100 */
    /*
     * DiagnosticPort:MaxConnections: connections accepted but not yet advertised at once (more
     * wait in the kernel's backlog), and runtimes tracked at once (a new runtime beyond that is
     * turned away, with a warning: its connection is held unused for park_ms, then closed, so it
     * does not reconnect in a tight loop). 0 -> 64 pending, 256 runtimes.
     */
    size_t max_connections;
    bool hold_suspended; /* do not resume at start-up; wait for ipc_listen_resume */
    /* Who may connect (SO_PEERCRED of each accepted connection; ipc_trust_allows without a
     * pid): others are closed at once, logged once per uid. A cookie stays with the uid that
     * first advertised it. */
    struct ipc_trust trust;
};

struct ipc_listen;

/* Allocates and copies cfg; starts nothing. Returns 0, AGENT_E_INVAL or UV_ENOMEM. */
int ipc_listen_new(uv_loop_t *loop, const struct ipc_listen_config *cfg,
                   ipc_discovery_change_cb on_change, void *ud, struct ipc_listen **out);
/*
 * Binds and starts accepting. Returns 0, or (after logging why) UV_EADDRINUSE (someone accepts
 * on the path), UV_EEXIST (the path is not a socket), UV_ENAMETOOLONG, AGENT_E_CHANGED (the
 * socket was swapped right after it was bound), or the errno of a failed
 * lstat/unlink/mkdir/socket/bind/chmod/rename/listen. Call once, before the loop serves requests.
 */
int ipc_listen_start(struct ipc_listen *l);
/* True once the socket is bound and accepting. */
bool ipc_listen_ready(const struct ipc_listen *l);
/*
 * Stops accepting, closes every connection it holds, fails queued connects (UV_ECANCELED),
 * removes the socket file if it is still the one it bound, and frees l; cb (may be NULL) runs
 * from the loop once all of that is done. Commands in progress keep their connections.
 */
void ipc_listen_close(struct ipc_listen *l, void (*cb)(void *ud), void *ud);

/* The listed runtimes (sorted by pid, then uid): views valid until the loop runs again. */
size_t ipc_listen_count(const struct ipc_listen *l);
const struct ipc_process *ipc_listen_at(const struct ipc_listen *l, size_t i);

/* As ipc_discovery_busy: a busy runtime is never forgotten. AGENT_E_NOTFOUND if not listed. */
int ipc_listen_busy(struct ipc_listen *l, const char *uid, int delta);
/*
 * hold_suspended: sends ResumeRuntime to the runtime with this uid now (in the background, over
 * its next idle connection), if it has not been resumed yet. 0 (also when there was nothing to
 * do) or AGENT_E_NOTFOUND.
 */
int ipc_listen_resume(struct ipc_listen *l, const char *uid);
/*
 * Changes hold_suspended for the runtimes that connect from now on; false also resumes every
 * runtime held now (as ipc_listen_resume).
 */
void ipc_listen_set_hold(struct ipc_listen *l, bool hold);

/* Counters for tests and logs. */
struct ipc_listen_stats {
    uint64_t accepted;   /* connections accepted */
    uint64_t advertised; /* valid advertises */
    uint64_t rejected;   /* closed for a bad, short or late advertise */
    uint64_t handed_out; /* spares given to commands */
    uint64_t resumed;    /* ResumeRuntime replies received */
    uint64_t forgotten;  /* runtimes dropped */
    size_t pending;      /* connections waiting for their advertise now */
    size_t runtimes;     /* runtimes tracked now (listed or not) */
    size_t spares;       /* idle connections held now */
};
void ipc_listen_get_stats(const struct ipc_listen *l, struct ipc_listen_stats *out);

#endif
