/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_DISCOVERY_H
#define AGENT_IPC_DISCOVERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_client.h"
#include "ipc_identity.h"

/*
 * Discovery of .NET runtimes in connect mode (docs/ipc.md §1.1-1.3), or in listen mode (ipc.md
 * §2.1-2.2, when the config names a listen socket: then this is a thin front for ipc_listen.h, and
 * the directory is not watched).
 *
 * Watches a directory (normally $TMPDIR or /tmp) for `dotnet-diagnostic-<pid>-<key>-socket`
 * files with uv_fs_event, plus a slow rescan timer as a safety net. Each new socket is probed
 * once with ProcessInfo3 (falling back to ProcessInfo2 and ProcessInfo on UNKNOWN_COMMAND) and
 * the answer is cached. A liveness check runs in the background so that a runtime that dies
 * (even by SIGKILL, which leaves its socket file behind) is dropped within about a second;
 * sockets that refuse connections (stale files) are never listed. When several sockets share
 * one pid, the newest (highest disambiguation key, then mtime) wins.
 *
 * Node mode (cfg->node, docs/ipc.md §6): instead of a directory, a walk of /proc on the thread pool
 * (at start and every rescan_ms) names each process's sockets in /proc/<pid>/root/<its TMPDIR>;
 * each is checked to be that process's own listener (net/unix and fd inodes, start time) before
 * the same probing, liveness and publication. pid is then the host pid.
 *
 * Requests are served from the cache: lookups never touch the network.
 * Everything runs on the loop given at creation; nothing here blocks.
 */

struct ipc_process {
    uint64_t
        pid; /* the name dotmon uses: connect and listen modes, as the target sees itself (its
                own pid namespace); node mode, its pid in dotmon's /proc (unique on the node) */
    uint64_t ns_pid;           /* the pid the runtime reports for itself, 0 when the same as pid */
    uint64_t host_pid;         /* its pid in dotmon's /proc, 0 when unknown (listen mode, or
                                  another pid namespace); node mode: pid; connect mode: pid when
                                  /proc/<pid> is this runtime (its NSpid's last field is pid and
                                  its start time the socket's key: ipc_identity.h) */
    char node_tmpdir[256];     /* node mode: its TMPDIR as it has it, trailing '/' kept (dumps
                                  are written there and read through /proc/<host_pid>/root); ""
                                  otherwise */
    uint8_t cookie[16];        /* runtime instance cookie, wire layout */
    char uid[37];              /* cookie as a lowercase GUID string, .NET layout */
    char *name;                /* process name: basename of the first command-line token */
    char *command_line;        /* never NULL (may be "") */
    char *os;                  /* never NULL */
    char *arch;                /* never NULL */
    char *entrypoint_assembly; /* NULL when the runtime lacks ProcessInfo2 */
    char *clr_version;         /* NULL when the runtime lacks ProcessInfo2 */
    char *runtime_identifier;  /* NULL when the runtime lacks ProcessInfo3 */
    const char *endpoint;      /* the name of ep, for logs: the full socket path used to talk to
                                  this runtime, or (listen mode) "reverse:<uid>" */
    struct ipc_endpoint ep;    /* owned; see ipc_process_endpoint */
    int64_t peer_uid;          /* the user the runtime runs as: its socket's owner, checked with
                                  SO_PEERCRED (listen mode: its connections' peer); -1 unknown */
    uint64_t key;              /* disambiguation key from the socket name (listen mode: 0) */
    uint64_t seen_ms;          /* uv_now() when first probed successfully */
    int busy;    /* > 0 while a long command (dump) is in flight: liveness checks skip it */
    int watched; /* > 0 while a session's stream tells this runtime's exit
                    (ipc_discovery_watch) */
    bool cmdline_settled;         /* discovery's: the command line is final (ipc_discovery_watch) */
    struct ipc_identity identity; /* who it is (ipc_identity.h), read before it is first listed;
                                     all "" when unknown */
};

/*
 * What to pass to ipc_exchange_start / ipc_session_start for p: a view valid while p is (copy it
 * with ipc_endpoint_copy to keep it longer).
 */
static inline struct ipc_endpoint ipc_process_endpoint(const struct ipc_process *p)
{
    return p->ep;
}

/*
 * Whose runtimes dotmon talks to. A runtime creates its socket 0600 under its own uid, and
 * anyone can create a socket named like a runtime's in a shared /tmp; so a socket (connect mode)
 * or a connection to dotmon's socket (listen mode) is used only when its user is dotmon's own
 * effective uid, one of `uids` (DiagnosticPort:TrustedUids), or (connect mode, when
 * proc_owner is set) the owner of /proc/<pid> for the pid in the socket's name, when that pid is
 * visible. Refusals are logged once per socket (Warning, with path and owner).
 */
#define IPC_TRUST_MAX_UIDS 32
struct ipc_trust {
    uint32_t uids[IPC_TRUST_MAX_UIDS];
    size_t nuids;
    bool no_proc_owner; /* do not trust the owner of /proc/<pid> */
};
/* True when uid may serve a runtime claiming pid (0: no pid claimed, the /proc rule is off). */
bool ipc_trust_allows(const struct ipc_trust *t, uint32_t uid, uint64_t pid);

struct ipc_listen_config;

struct ipc_discovery_config {
    const char *dir; /* directory to watch; required unless listen or node is set */
    bool node; /* node mode (docs/ipc.md §6): walk /proc and reach every process's runtime through
                  /proc/<pid>/root/<its TMPDIR>; dir is not watched */
    uint64_t probe_timeout_ms; /* per IPC exchange; 0 → 3000 */
    uint64_t rescan_ms;        /* full directory rescan period; 0 → 5000 */
    uint64_t liveness_ms;      /* liveness check period; 0 → 1000 */
    uint64_t retry_max_ms;     /* longest wait before a failed probe is retried; 0 → 60000 */
    /* Listen mode: bind this socket instead of watching dir (copied; ipc_listen.h). */
    const struct ipc_listen_config *listen;
    struct ipc_trust trust; /* zero: dotmon's own uid and the /proc owners only */
    /* Connect and node modes: read each runtime's identity (ipc_identity_read) before listing
     * it; NULL: not read (identity stays empty, and so does connect mode's host_pid). Copied. */
    const struct ipc_identity_vars *identity;
};

struct ipc_discovery;

/* Called after a process was added or removed (for logging / metrics). May be NULL. */
typedef void (*ipc_discovery_change_cb)(void *ud, const struct ipc_process *p, bool added);

/* Allocates; starts nothing. Returns 0 or a negative code. *out is set only on success. */
int ipc_discovery_new(uv_loop_t *loop, const struct ipc_discovery_config *cfg,
                      ipc_discovery_change_cb on_change, void *ud, struct ipc_discovery **out);
/*
 * Connect mode: cb (may be NULL) is called with added = true after a listed process's command line
 * (and the name taken from it) changed. A runtime probed early in its start answers only its host's
 * path; its arguments show a liveness check later (about a second), and filters on the command
 * line must look again then. Not called once ipc_discovery_close has been called.
 */
void ipc_discovery_set_update_cb(struct ipc_discovery *d, ipc_discovery_change_cb cb, void *ud);
/*
 * Starts watching and performs the first scan (asynchronously). Listen mode: binds the socket now
 * and returns its error (see ipc_listen_start).
 */
int ipc_discovery_start(struct ipc_discovery *d);
/* True once the first scan (including its probes) has completed; listen mode: once bound. */
bool ipc_discovery_ready(const struct ipc_discovery *d);
/* True in listen mode. */
bool ipc_discovery_listening(const struct ipc_discovery *d);
/*
 * Node mode, from the last walk of /proc: the processes looked at, and those whose root dotmon may
 * not read (EACCES/EPERM: another user's, without CAP_SYS_PTRACE). Both 0 in other modes.
 */
void ipc_discovery_node_stats(const struct ipc_discovery *d, size_t *looked, size_t *denied);
/*
 * Stops everything, cancels in-flight probes, closes every handle and frees d; cb (may be NULL)
 * is called from the loop once the last handle has closed.
 */
void ipc_discovery_close(struct ipc_discovery *d, void (*cb)(void *ud), void *ud);

/*
 * Marks the listed runtime with this uid as busy (delta +1) or no longer busy (delta -1) while a
 * long command (dump, StopTracing with rundown) occupies its single server thread; liveness
 * checks skip busy runtimes. busy never goes below 0. AGENT_E_NOTFOUND if uid is not listed.
 */
int ipc_discovery_busy(struct ipc_discovery *d, const char *uid, int delta);

/*
 * Marks the listed runtime with this uid as watched (delta +1) or no longer (delta -1) by a
 * session whose stream has delivered the runtime's own managed events (its metrics session's first
 * sample): managed code runs, so the host has finished starting, and the stream's end tells the
 * runtime's exit. Liveness checks (a ProcessInfo per second) skip a watched runtime once its
 * command line is settled: a ProcessInfo asked while it was watched answered the same command line
 * as the answer before it (a runtime found early in its start answers its host's path first and its
 * arguments later, and CommandLine filters need the latter). Until then they go on. watched never
 * goes below 0. AGENT_E_NOTFOUND if uid is not listed; listen mode: nothing to do (0).
 */
int ipc_discovery_watch(struct ipc_discovery *d, const char *uid, int delta);

/*
 * Listen mode with DiagnosticPort:HoldSuspended: sends ResumeRuntime to the runtime with this uid
 * if it is still held (ipc_listen_resume). Connect mode: nothing to do (0).
 */
int ipc_discovery_resume(struct ipc_discovery *d, const char *uid);
/* Listen mode: ipc_listen_set_hold. Connect mode: nothing to do. */
void ipc_discovery_set_hold(struct ipc_discovery *d, bool hold);

/*
 * Cache views: valid until the loop runs again (a later callback may remove entries). The list is
 * sorted by pid. on_change is not called once ipc_discovery_close has been called.
 */
size_t ipc_discovery_count(const struct ipc_discovery *d);
const struct ipc_process *ipc_discovery_at(const struct ipc_discovery *d, size_t i);

#endif
