/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_INTERNAL_H
#define AGENT_IPC_INTERNAL_H

/* Declarations shared between the files of the ipc module only (docs/style.md §1). */

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_discovery.h"

/*
 * Like ipc_exchange_cancel, except that cb still runs exactly once, with status UV_ECANCELED (or
 * the real result if the exchange had already finished), after every handle of the exchange has
 * closed. Owners that must know when the exchange's loop resources are gone (discovery's close)
 * use this instead of ipc_exchange_cancel.
 */
void ipc__exchange_abort(struct ipc_exchange *x);

/* ---- connecting to a runtime (ipc_conn.c) ---------------------------------------------------- */

/*
 * An endpoint is either the path of a runtime's listening socket (connect mode), or a runtime
 * that connected to dotmon's own socket (listen mode, ipc_listen.c): that runtime's idle
 * advertised connection is handed over instead of connecting anywhere. The endpoint's transport
 * says which; the listen-mode name "reverse:<uid>" is for logs only, never parsed.
 */
#define IPC_REVERSE_PREFIX "reverse:"

struct ipc_conn;
struct ipc__rt;

/*
 * How an endpoint is reached, in the manner of the runtime's IpcStreamVtable: one table per kind
 * of endpoint, chosen by the endpoint itself (ipc_endpoint.transport; NULL means
 * ipc__transport_path). Only the loop thread calls these.
 */
struct ipc_transport {
    const char *name;
    /* Starts connecting c (prepared by ipc__connect: pipe, cb, want_uid) to ep; as ipc__connect. */
    int (*connect)(struct ipc_conn *c, uv_loop_t *loop, const struct ipc_endpoint *ep);
    /* c's user closes its pipe: cancel what is in flight, give back what c holds. */
    void (*conn_close)(struct ipc_conn *c);
    /* An endpoint copy was made (ipc_endpoint_copy) / is released: count the state it shares. */
    void (*ref)(struct ipc_endpoint *ep);
    void (*unref)(struct ipc_endpoint *ep);
};

/* uv_pipe_connect to ep->path (ipc_conn.c). */
extern const struct ipc_transport ipc__transport_path;
/* A runtime connected to a listener (ipc_listen.c): its next idle connection. */
extern const struct ipc_transport ipc__transport_reverse;

/* status 0: c's pipe is connected and open; else a negative code and the pipe is unusable. */
typedef void (*ipc__conn_cb)(struct ipc_conn *c, int status);

enum ipc__conn_state {
    IPC_CONN_IDLE = 0, /* nothing started, or done */
    IPC_CONN_PATH,     /* uv_pipe_connect in flight */
    IPC_CONN_WAITING,  /* queued at a reverse runtime for its next idle connection */
    IPC_CONN_READY     /* dispatched: the callback runs (or ran) */
};

/*
 * One connection attempt, embedded in its user (an exchange, a session) and valid from
 * ipc__connect until ipc__conn_close. The fields below `data` belong to ipc_conn.c/ipc_listen.c.
 */
struct ipc_conn {
    void *data;                            /* the user's; read it in the callback */
    const struct ipc_transport *transport; /* of the endpoint; NULL before ipc__connect */
    uv_pipe_t *pipe;
    ipc__conn_cb cb;
    enum ipc__conn_state state;
    uv_connect_t req;      /* path endpoints */
    struct ipc__rt *rt;    /* reverse: the runtime waited for, then the one holding our lease */
    struct ipc_conn *next; /* reverse: in the runtime's waiter queue or lease list */
    struct ipc_conn **pprev;
    int status;        /* reverse: a failure to deliver from the dispatcher */
    int64_t want_uid;  /* path: the listener must run as this uid (IPC_ANY_PEER: any) */
    uint64_t want_pid; /* path, node mode: the listener must be this process's (SO_PEERCRED's pid,
                          as of its listen()); 0: not checked */
    int64_t peer_uid;  /* path: the listener's uid once connected (SO_PEERCRED), else -1 */
};

/*
 * Connects `pipe` (uv_pipe_init'ed, not open) to endpoint and calls cb exactly once from a later
 * loop callback, never from inside this call, unless ipc__conn_close comes first. Returns 0, or
 * a negative code and cb never runs: UV_ECONNREFUSED for a reverse endpoint whose runtime is not
 * (or no longer) connected to any listener on this loop. A path endpoint with a peer_uid whose
 * listener runs as another user gets status AGENT_E_UNTRUSTED (the pipe is open, nothing was
 * written; c->peer_uid says who it was).
 *
 * With a reverse endpoint the runtime's next idle connection is taken (waiting for the runtime
 * to reconnect if another command consumed the last one): its descriptor is opened in `pipe` with
 * uv_pipe_open, and from then on belongs to `pipe` alone. While `pipe` is open the runtime is
 * known to be busy with this command, so listen mode does not forget it (a lease).
 */
int ipc__connect(struct ipc_conn *c, uv_loop_t *loop, uv_pipe_t *pipe,
                 const struct ipc_endpoint *ep, ipc__conn_cb cb, void *data);

/* The uid of the process at the other end of a connected Unix socket (SO_PEERCRED), or -errno. */
int64_t ipc__peer_uid(const uv_pipe_t *pipe);

/*
 * The user is closing (or has closed) c's pipe: cancels a connect in flight (cb will not run) and
 * gives back the lease. Idempotent; call it whenever the pipe is closed.
 */
void ipc__conn_close(struct ipc_conn *c);

/*
 * The life of a runtime known to the listener (ipc_listen.c, one per advertised cookie). Two
 * things progress independently: whether ResumeRuntime is still owed (held suspended until
 * ipc_listen_resume, or to be sent), and whether the runtime is listed (not probed yet, probed but
 * its command line still settling, listed). A held runtime is probed and listed at once, so it
 * never settles; a ResumeRuntime owed while probed (a runtime released while its ProcessInfo was
 * in flight, or after it was listed) still goes out before any further ProcessInfo. Every state
 * may end in GONE (forgotten); GONE is final.
 *
 *   HELD --probed--> HELD_LISTED                      HELD* --ipc_listen_resume--> RESUMING*
 *   RESUMING --probed--> RESUMING_SETTLING --settled--> RESUMING_LISTED
 *            \--------------------------------------------^
 *   RESUMING* --resumed--> PROBING / SETTLING / LISTED (same listing phase)
 *   PROBING --probed--> SETTLING --settled--> LISTED;  PROBING --probed--> LISTED
 */
enum ipc__rt_state {
    IPC_RT_HELD = 0,          /* hold_suspended: waits for ipc_listen_resume; not probed yet */
    IPC_RT_HELD_LISTED,       /* held, probed and listed */
    IPC_RT_RESUMING,          /* ResumeRuntime owed (in flight, or retried with a backoff) */
    IPC_RT_RESUMING_SETTLING, /* ResumeRuntime owed; probed, command line not whole yet */
    IPC_RT_RESUMING_LISTED,   /* ResumeRuntime owed; listed */
    IPC_RT_PROBING,           /* resumed; ProcessInfo owed */
    IPC_RT_SETTLING,          /* probed; not listed until its command line is whole (or timeout) */
    IPC_RT_LISTED,            /* listed; ProcessInfo asked again a few times (refreshes) */
    IPC_RT_GONE,              /* forgotten; freed once its exchange in flight has reported */
    IPC_RT_NSTATES
};

/* True when the listener may move a runtime from `from` to `to` (the graph above). */
bool ipc__rt_transition_ok(enum ipc__rt_state from, enum ipc__rt_state to);
/* "HELD", "LISTED"...; "?" for a value out of range. */
const char *ipc__rt_state_name(enum ipc__rt_state s);

/* ---- the process struct (ipc_process.c) ------------------------------------------------------ */

/*
 * Fills p (zeroed by the caller) from a parsed ProcessInfo of version level (1, 2 or 3), takes an
 * owned copy of ep (p->ep; p->endpoint is its name) and records the runtime's user (peer_uid, -1
 * when unknown). Returns 0 or UV_ENOMEM (p is then cleared again).
 */
int ipc__process_init(struct ipc_process *p, const struct ipc_process_info *pi, int level,
                      const struct ipc_endpoint *ep, int64_t peer_uid);
/*
 * Takes the command line of a later ProcessInfo of the same runtime (and the name derived from
 * it) when it differs: a runtime answers its first ProcessInfo before the host has finished
 * starting, with the host's path alone ("/usr/share/dotnet/dotnet" for "dotnet app.dll").
 * Returns 1 when p changed, 0 when it was the same, UV_ENOMEM (p unchanged).
 */
int ipc__process_update_cmdline(struct ipc_process *p, const struct ipc_utf16 *command_line);
/* A malloc'd UTF-8 copy of a wire string ("" for an absent one), or NULL (out of memory). */
char *ipc__utf16_dup(const struct ipc_utf16 *s);
/* Frees what ipc__process_init allocated; safe on a zeroed struct and twice. */
void ipc__process_fini(struct ipc_process *p);

/* ---- ProcessInfo probes (ipc_process.c) ------------------------------------------------------ */

struct ipc__probe;

struct ipc__probe_result {
    int status;       /* the exchange's status (0: a reply came), UV_ECANCELED after an abort */
    int ok;           /* Server/OK */
    uint32_t hresult; /* Error replies */
    int64_t peer_uid; /* as ipc_result.peer_uid */
    int level;        /* the ProcessInfo version (3, 2 or 1) that the reply answered */
    /* OK replies: 0 and info set, or the payload parser's error (info NULL). */
    int parse_status;
    const struct ipc_process_info *info; /* views into the reply, valid during the callback */
};

typedef void (*ipc__probe_cb)(void *ud, const struct ipc__probe_result *res);

/*
 * Sends ProcessInfo<level> (3 = ProcessInfo3, 2 = ProcessInfo2, 1 = ProcessInfo) to ep (copied)
 * and, with fallback, steps down to the previous version on a new connection while the runtime
 * answers UNKNOWN_COMMAND. The reply is parsed for the version that produced it. Each try has
 * timeout_ms and a reply cap of one message. Returns 0 (cb runs exactly once, from the loop), or
 * the error of ipc_exchange_start and cb never runs.
 */
int ipc__probe_start(uv_loop_t *loop, const struct ipc_endpoint *ep, int level, bool fallback,
                     uint64_t timeout_ms, ipc__probe_cb cb, void *ud, struct ipc__probe **out);
/* As ipc__exchange_abort: no further try; cb still runs once, after the handles have closed. */
void ipc__probe_abort(struct ipc__probe *p);

#endif
