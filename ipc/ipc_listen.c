/* SPDX-License-Identifier: MIT */
#include "ipc_listen.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "err.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_internal.h"
#include "ipc_proclist.h"
#include "log.h"
#include "shdir.h"

/*
 * How listen mode works (docs/ipc.md §2.1-2.2):
 *
 * Connections. Every accepted connection is a `struct rconn`: PENDING until its 34 advertise
 * bytes are in (bounded by advertise_timeout_ms), then a SPARE of the runtime whose cookie it
 * carried. A spare is idle: the runtime waits for one command on it. The listener keeps reading
 * spares (one byte at a time, into a scratch byte) only to see them end: EOF means the runtime
 * closed it (it died, or exits), stray bytes are a protocol violation; either way it is closed.
 *
 * Hand-over. A command for a runtime's endpoint (ipc__connect, through ipc__transport_reverse:
 * the listener's counted reference, and the uid looked up there) queues a waiter on it. The
 * dispatcher (an idle handle, so callbacks never run inside the caller's start call) gives the
 * oldest waiter the newest spare: it duplicates the spare's descriptor, closes the listener's
 * handle (the socket lives on in the duplicate), and opens the duplicate in the waiter's pipe with
 * uv_pipe_open. From then on the descriptor belongs to the waiter's pipe; the listener only
 * remembers a lease until the waiter's pipe closes. The runtime reconnects as soon as the command
 * has consumed the connection (ipc.md §2.1 item 4), so a second command waits for that next spare.
 *
 * Runtimes. A `struct ipc__rt` per cookie: on its first advertise it gets ResumeRuntime (unless
 * held), then ProcessInfo3 -> 2 -> 1 (each on a new connection, like every command), and is
 * listed once its command line is whole (settle_ms); its progress is one enum ipc__rt_state
 * (ipc_internal.h), changed only by rt_set_state. The list itself is an ipc_proclist. Failed
 * exchanges are retried with a backoff (a runtime busy with a dump answers nothing for a while). A
 * runtime with no spare and no lease (no connection to dotmon at all) since idle_since is forgotten
 * after forget_after_ms, unless it is marked busy. A dump or a StopTracing with rundown holds its
 * connection, hence its lease, for as long as it runs, so the runtime's single server thread being
 * occupied never looks like death.
 *
 * Closing stops accepting and queuing at once, but commands already queued (a trace's StopTracing
 * at shutdown) still get the spares there are, on one last dispatch, before the connections close.
 *
 * pump() is the scheduler: it expires late advertises, forgets runtimes, starts due exchanges and
 * arms the one wake timer for the next deadline. It runs after every event, from loop callbacks
 * only; code that may run below a user's call (lease release, busy marks) schedules it through
 * the wake timer instead.
 */

#define LOG_CAT                      "dotmon.ipc.listen"
#define SPARES_MAX                   2 /* idle connections kept per runtime (one per port) */
#define DEFAULT_PENDING_MAX          64
#define DEFAULT_RUNTIMES_MAX         256
#define REFUSED_UIDS_LOGGED          16 /* distinct refused peer uids logged once each */
#define DEFAULT_PROBE_TIMEOUT_MS     3000
#define DEFAULT_ADVERTISE_TIMEOUT_MS 5000
#define DEFAULT_FORGET_MS            3000
#define DEFAULT_MODE                 0600u
#define BACKLOG                      255 /* the runtime's own listen backlog (ipc.md §1.1) */
#define DEFAULT_RETRY_FIRST_MS       500
#define DEFAULT_RETRY_MAX_MS         30000
#define TURNED_AWAY_LOG_MS           60000
#define DEFAULT_PARK_MS              10000
#define PROBE_MAX_REPLY              IPC_MESSAGE_MAX
/*
 * ProcessInfo asked again this long after the previous answer, twice: a runtime that connects
 * early in its start-up (always, in listen mode) may report only the host's path as its command
 * line, and on older runtimes no entry-point assembly, until the host has loaded the app
 * (dotnet/runtime#59439); the struct is updated in place.
 */
static const uint64_t refresh_after_ms[] = {1000, 4000};
#define REFRESHES (sizeof(refresh_after_ms) / sizeof(refresh_after_ms[0]))
/*
 * Right after ResumeRuntime the command line is only the host's path (one word) until the host
 * has set it, a few hundred ms later. A runtime that answers so is not listed yet but asked again
 * every settle_step_ms, for at most settle_ms (an app without arguments, single-file, really has
 * a one-word command line), so that /processes and the default-process filters never see the
 * half-known process. Runtimes held suspended are listed at once: nothing would change.
 */
#define DEFAULT_SETTLE_MS      2000
#define DEFAULT_SETTLE_STEP_MS 100

/*
 * PARKED: a runtime turned away (MaxConnections). Closing its connection at once would make it
 * reconnect within milliseconds, over and over (ipc.md §2.1 item 5); held idle for park_ms, it
 * costs one reconnect per park_ms instead.
 */
enum rconn_state { RC_PENDING = 0, RC_SPARE, RC_PARKED, RC_CLOSED };

/* One connection the listener holds: waiting for its advertise, or idle (a spare). */
struct rconn {
    uv_pipe_t pipe;
    struct ipc_listen *l;
    struct ipc__rt *rt; /* RC_SPARE: whose spare it is */
    struct rconn *next; /* in l->pending or rt->spares (newest first) */
    enum rconn_state state;
    uint64_t deadline; /* RC_PENDING: when the advertise is overdue; RC_PARKED: when to close */
    size_t n;          /* advertise bytes received */
    uint8_t adv[IPC_ADVERTISE_SIZE];
    uint8_t scratch;   /* RC_SPARE, RC_PARKED: reads only detect EOF or stray bytes */
    uint32_t peer_uid; /* SO_PEERCRED at accept */
};

enum rt_op { RT_OP_NONE = 0, RT_OP_RESUME, RT_OP_PROBE };

struct ipc__rt {
    struct ipc__rt *next;
    struct ipc_listen *l;
    uint8_t cookie[IPC_GUID_SIZE];
    char uid[IPC_GUID_STR_SIZE];
    char endpoint[sizeof(IPC_REVERSE_PREFIX) + IPC_GUID_STR_SIZE];
    uint64_t pid;         /* advertised */
    uint32_t peer_uid;    /* the user of the connection that first advertised the cookie */
    struct rconn *spares; /* newest first */
    size_t nspares;
    struct ipc_conn *waiters; /* newest first; served oldest first */
    struct ipc_conn *leases;  /* handed out, pipe still open */
    size_t nleases;
    uint64_t idle_since; /* uv_now() since it has had no connection at all; 0 while it has one */
    enum ipc__rt_state state; /* changed by rt_set_state only */
    int probe_level;          /* 3, 2 or 1: the ProcessInfo version to try next */
    int failures;             /* consecutive failed exchanges, for the backoff */
    uint64_t retry_at;
    uint64_t refresh_at;   /* when to ask ProcessInfo again (0: not planned) */
    uint64_t settle_until; /* *_SETTLING: when to list it anyway (settle_ms) */
    size_t refreshes;      /* refreshes planned so far */
    enum rt_op op;
    struct ipc_exchange *x;          /* ResumeRuntime in flight */
    struct ipc__probe *probe;        /* ProcessInfo in flight */
    struct ipc_proclist_entry *proc; /* once probed */
};

struct ipc_listen {
    uv_loop_t *loop;
    struct ipc_listen_ref *ref; /* shared with the endpoints of its runtimes */
    char *path;
    unsigned mode;
    uint64_t probe_timeout_ms;
    uint64_t advertise_timeout_ms;
    uint64_t forget_ms;
    uint64_t retry_first_ms;
    uint64_t retry_max_ms;
    uint64_t park_ms;
    uint64_t settle_ms;
    uint64_t settle_step_ms;
    size_t pending_max;
    size_t runtimes_max;
    bool hold;
    struct ipc_trust trust;
    uint32_t refused_uids[REFUSED_UIDS_LOGGED]; /* peers refused and logged so far */
    size_t nrefused_uids;

    uv_pipe_t server;
    uv_timer_t wake;
    uv_idle_t dispatch;
    int open_handles;
    bool server_init;
    bool bound;
    bool accept_deferred; /* libuv holds an accepted descriptor we have not taken yet */
    bool dispatch_active;
    dev_t dev; /* the socket file we bound, to remove only that one on close */
    ino_t ino;
    int dirfd; /* the socket's folder, open while bound (-1: not open) */
    char base[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* the socket's name in it */

    struct rconn *pending;
    size_t npending;
    struct rconn *parked; /* turned away, closed at their deadline */
    size_t nrconns;       /* rconn handles not yet closed */
    struct ipc__rt *rts;
    size_t nrts;             /* including removed ones not yet freed */
    size_t nlive;            /* not removed */
    struct ipc_conn *failed; /* waiters to fail from the dispatcher (their runtime is gone) */
    size_t in_flight;        /* our own exchanges */
    uint64_t turned_away_at;
    struct ipc_listen_stats stats;

    struct ipc_proclist procs; /* published; capacity >= nrts */

    bool closing;
    bool finished;
    bool fs_busy;
    uv_work_t unlink_work;
    int unlink_rc;
    void (*close_cb)(void *ud);
    void *close_ud;
};

static void pump(struct ipc_listen *l);
static void publish(struct ipc_listen *l);
static void maybe_finish_close(struct ipc_listen *l);

/* ---- the listener's reference, shared by listen-mode endpoints ------------------------------ */

/*
 * What a listen-mode endpoint holds (ipc_client.h): counted, so that an endpoint copied by a
 * trace or dump job may outlive the runtime and the listener itself. The listener owns one
 * reference and clears `l` when it starts closing; from then on, as once the runtime is gone,
 * connecting through the endpoint fails with UV_ECONNREFUSED. The loop thread only.
 */
struct ipc_listen_ref {
    size_t refs;
    struct ipc_listen *l; /* NULL once the listener is closing */
};

static void lref_unref(struct ipc_listen_ref *r)
{
    assert(r->refs > 0);
    if (--r->refs == 0) {
        free(r);
    }
}

static void ep_ref(struct ipc_endpoint *ep)
{
    if (ep->listener != NULL) {
        ep->listener->refs++;
    }
}

static void ep_unref(struct ipc_endpoint *ep)
{
    if (ep->listener != NULL) {
        lref_unref(ep->listener);
        ep->listener = NULL;
    }
}

static int reverse_connect(struct ipc_conn *c, uv_loop_t *loop, const struct ipc_endpoint *ep);
static void reverse_conn_close(struct ipc_conn *c);

const struct ipc_transport ipc__transport_reverse = {
    .name = "reverse",
    .connect = reverse_connect,
    .conn_close = reverse_conn_close,
    .ref = ep_ref,
    .unref = ep_unref,
};

/* ---- intrusive lists of struct ipc_conn (next/pprev) ----------------------------------------- */

static void conn_push(struct ipc_conn **head, struct ipc_conn *c)
{
    c->next = *head;
    c->pprev = head;
    if (*head != NULL) {
        (*head)->pprev = &c->next;
    }
    *head = c;
}

static void conn_unlink(struct ipc_conn *c)
{
    if (c->pprev == NULL) {
        return;
    }
    *c->pprev = c->next;
    if (c->next != NULL) {
        c->next->pprev = c->pprev;
    }
    c->next = NULL;
    c->pprev = NULL;
}

/* The oldest element of a newest-first list. */
static struct ipc_conn *conn_oldest(struct ipc_conn *head)
{
    while (head != NULL && head->next != NULL) {
        head = head->next;
    }
    return head;
}

/* ---- small helpers --------------------------------------------------------------------------- */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void on_wake(uv_timer_t *t);

/*
 * Runs pump() from a clean stack, on the next loop turn (never from the wake timer's own callback:
 * pump() re-arms it with a delay of at least 1 ms).
 */
static void schedule_pump(struct ipc_listen *l)
{
    if (!l->closing) {
        (void)uv_timer_start(&l->wake, on_wake, 0, 0);
    }
}

static void schedule_dispatch(struct ipc_listen *l);

/* ---- runtime states (ipc_internal.h, enum ipc__rt_state) ------------------------------------ */

#define RT_BIT(s) (1u << (unsigned)(s))

/* The states each state may move to (besides GONE, open to all but GONE itself). */
static const unsigned rt_next_states[IPC_RT_NSTATES] = {
    [IPC_RT_HELD] = RT_BIT(IPC_RT_HELD_LISTED) | RT_BIT(IPC_RT_RESUMING),
    [IPC_RT_HELD_LISTED] = RT_BIT(IPC_RT_RESUMING_LISTED),
    [IPC_RT_RESUMING] =
        RT_BIT(IPC_RT_PROBING) | RT_BIT(IPC_RT_RESUMING_SETTLING) | RT_BIT(IPC_RT_RESUMING_LISTED),
    [IPC_RT_RESUMING_SETTLING] = RT_BIT(IPC_RT_SETTLING) | RT_BIT(IPC_RT_RESUMING_LISTED),
    [IPC_RT_RESUMING_LISTED] = RT_BIT(IPC_RT_LISTED),
    [IPC_RT_PROBING] = RT_BIT(IPC_RT_SETTLING) | RT_BIT(IPC_RT_LISTED),
    [IPC_RT_SETTLING] = RT_BIT(IPC_RT_LISTED),
    [IPC_RT_LISTED] = 0,
    [IPC_RT_GONE] = 0,
};

bool ipc__rt_transition_ok(enum ipc__rt_state from, enum ipc__rt_state to)
{
    if ((unsigned)from >= IPC_RT_NSTATES || (unsigned)to >= IPC_RT_NSTATES) {
        return false;
    }
    if (to == IPC_RT_GONE) {
        return from != IPC_RT_GONE;
    }
    return (rt_next_states[from] & RT_BIT(to)) != 0;
}

const char *ipc__rt_state_name(enum ipc__rt_state s)
{
    static const char *const names[IPC_RT_NSTATES] = {
        [IPC_RT_HELD] = "HELD",
        [IPC_RT_HELD_LISTED] = "HELD_LISTED",
        [IPC_RT_RESUMING] = "RESUMING",
        [IPC_RT_RESUMING_SETTLING] = "RESUMING_SETTLING",
        [IPC_RT_RESUMING_LISTED] = "RESUMING_LISTED",
        [IPC_RT_PROBING] = "PROBING",
        [IPC_RT_SETTLING] = "SETTLING",
        [IPC_RT_LISTED] = "LISTED",
        [IPC_RT_GONE] = "GONE",
    };
    return (unsigned)s < IPC_RT_NSTATES ? names[s] : "?";
}

/*
 * The one place a runtime changes state. A move outside the graph is a bug in this file: it
 * asserts in debug builds; release builds log it and keep the state.
 */
static void rt_set_state(struct ipc__rt *rt, enum ipc__rt_state to)
{
    if (!ipc__rt_transition_ok(rt->state, to)) {
        log_error(LOG_CAT, "runtime pid %llu (uid %s): refused state change %s -> %s",
                  (unsigned long long)rt->pid, rt->uid, ipc__rt_state_name(rt->state),
                  ipc__rt_state_name(to));
        assert(!"invalid runtime state transition");
        return;
    }
    rt->state = to;
}

static bool rt_gone(const struct ipc__rt *rt)
{
    return rt->state == IPC_RT_GONE;
}

/* Held suspended: ResumeRuntime waits for ipc_listen_resume. */
static bool rt_held(const struct ipc__rt *rt)
{
    return rt->state == IPC_RT_HELD || rt->state == IPC_RT_HELD_LISTED;
}

/* ResumeRuntime is to be sent (and goes before any ProcessInfo). */
static bool rt_owes_resume(const struct ipc__rt *rt)
{
    return rt->state == IPC_RT_RESUMING || rt->state == IPC_RT_RESUMING_SETTLING ||
           rt->state == IPC_RT_RESUMING_LISTED;
}

static bool rt_settling(const struct ipc__rt *rt)
{
    return rt->state == IPC_RT_RESUMING_SETTLING || rt->state == IPC_RT_SETTLING;
}

static bool rt_listed(const struct ipc__rt *rt)
{
    return rt->state == IPC_RT_HELD_LISTED || rt->state == IPC_RT_RESUMING_LISTED ||
           rt->state == IPC_RT_LISTED;
}

/* Its first ProcessInfo answered: listed at once, or (settle) once its command line is whole. */
static void rt_probed(struct ipc__rt *rt, bool settle)
{
    switch (rt->state) {
    case IPC_RT_HELD:
        rt_set_state(rt, IPC_RT_HELD_LISTED); /* held runtimes never settle */
        break;
    case IPC_RT_RESUMING:
        rt_set_state(rt, settle ? IPC_RT_RESUMING_SETTLING : IPC_RT_RESUMING_LISTED);
        break;
    default:
        rt_set_state(rt, settle ? IPC_RT_SETTLING : IPC_RT_LISTED);
        break;
    }
}

/* The command line is whole (or the time is up): listed from now on. */
static void rt_settled(struct ipc__rt *rt)
{
    rt_set_state(rt,
                 rt->state == IPC_RT_RESUMING_SETTLING ? IPC_RT_RESUMING_LISTED : IPC_RT_LISTED);
}

/* ResumeRuntime answered: the listing phase stays. */
static void rt_resumed(struct ipc__rt *rt)
{
    rt_set_state(rt, rt->state == IPC_RT_RESUMING_SETTLING ? IPC_RT_SETTLING
                     : rt->state == IPC_RT_RESUMING_LISTED ? IPC_RT_LISTED
                                                           : IPC_RT_PROBING);
}

static struct ipc__rt *rt_find_cookie(struct ipc_listen *l, const uint8_t *cookie)
{
    for (struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        if (!rt_gone(rt) && memcmp(rt->cookie, cookie, IPC_GUID_SIZE) == 0) {
            return rt;
        }
    }
    return NULL;
}

static struct ipc__rt *rt_find_uid(struct ipc_listen *l, const char *uid)
{
    for (struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        if (!rt_gone(rt) && strcmp(rt->uid, uid) == 0) {
            return rt;
        }
    }
    return NULL;
}

_Static_assert(IPC_ENDPOINT_UID_SIZE == IPC_GUID_STR_SIZE, "an endpoint holds a runtime uid");

/* The endpoint of rt (a view: its listener reference is the listener's own). */
static struct ipc_endpoint rt_endpoint(const struct ipc__rt *rt)
{
    struct ipc_endpoint ep = {.path = rt->endpoint,
                              .peer_uid = IPC_ANY_PEER,
                              .transport = &ipc__transport_reverse,
                              .listener = rt->l->ref};
    memcpy(ep.uid, rt->uid, sizeof(ep.uid));
    return ep;
}

/* ---- connections ----------------------------------------------------------------------------- */

static void rconn_on_close(uv_handle_t *h)
{
    struct rconn *c = h->data;
    struct ipc_listen *l = c->l;
    free(c);
    l->nrconns--;
    maybe_finish_close(l);
}

/* Takes c out of its list and closes the listener's handle of it. Idempotent. */
static void rconn_close(struct rconn *c)
{
    struct ipc_listen *l = c->l;
    if (c->state == RC_CLOSED) {
        return;
    }
    struct rconn **head = c->state == RC_PENDING  ? &l->pending
                          : c->state == RC_PARKED ? &l->parked
                                                  : &c->rt->spares;
    for (struct rconn **pp = head; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    if (c->state == RC_PENDING) {
        l->npending--;
    } else if (c->state == RC_SPARE) {
        c->rt->nspares--;
    }
    l->stats.pending = l->npending;
    c->state = RC_CLOSED;
    c->rt = NULL;
    c->next = NULL;
    uv_close((uv_handle_t *)&c->pipe, rconn_on_close);
}

static void rt_log_gone_spare(const struct rconn *c, const char *why)
{
    log_debug(LOG_CAT, "runtime pid %llu (uid %s): idle connection %s",
              (unsigned long long)c->rt->pid, c->rt->uid, why);
}

static void rconn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct rconn *c = h->data;
    (void)suggested;
    if (c->state == RC_PENDING) {
        /* Never more than the advertise: a runtime sends nothing else before a command. */
        *b = uv_buf_init((char *)c->adv + c->n, (unsigned int)(sizeof(c->adv) - c->n));
    } else {
        *b = uv_buf_init((char *)&c->scratch, 1);
    }
}

static struct ipc__rt *rt_new(struct ipc_listen *l, const uint8_t *cookie, uint64_t pid,
                              uint32_t peer_uid)
{
    if (ipc_proclist_reserve(&l->procs, l->nrts + 1) != 0) {
        return NULL;
    }
    struct ipc__rt *rt = calloc(1, sizeof(*rt));
    if (rt == NULL) {
        return NULL;
    }
    rt->l = l;
    memcpy(rt->cookie, cookie, IPC_GUID_SIZE);
    ipc_guid_format(cookie, rt->uid);
    /* "reverse:<uid>": the buffer is sized for exactly that (both sizes count one NUL). */
    memcpy(rt->endpoint, IPC_REVERSE_PREFIX, sizeof(IPC_REVERSE_PREFIX) - 1);
    memcpy(rt->endpoint + sizeof(IPC_REVERSE_PREFIX) - 1, rt->uid, sizeof(rt->uid));
    rt->pid = pid;
    rt->peer_uid = peer_uid;
    rt->state = l->hold ? IPC_RT_HELD : IPC_RT_RESUMING;
    rt->probe_level = 3;
    rt->next = l->rts;
    l->rts = rt;
    l->nrts++;
    l->nlive++;
    log_info(LOG_CAT, "runtime pid %llu (uid %s) connected to %s%s", (unsigned long long)pid,
             rt->uid, l->path,
             rt_held(rt) ? "; held suspended until a trace starts (DiagnosticPort:HoldSuspended)"
                         : "");
    return rt;
}

/* From pending to parked: not a runtime of ours, but held a while so it does not reconnect. */
static void rconn_park(struct rconn *c, uint64_t now)
{
    struct ipc_listen *l = c->l;
    for (struct rconn **pp = &l->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    l->npending--;
    l->stats.pending = l->npending;
    c->state = RC_PARKED;
    c->deadline = now + l->park_ms;
    c->next = l->parked;
    l->parked = c;
    /* Real runtimes park one connection each; a peer advertising new cookies in a loop must not
     * pile up descriptors: beyond the cap, the oldest parked connections go. */
    size_t n = 0;
    for (struct rconn *p = l->parked, *next; p != NULL; p = next) {
        next = p->next;
        if (++n > l->pending_max) {
            rconn_close(p);
        }
    }
}

/* The 34 advertise bytes are in: the connection becomes its runtime's newest spare. */
static void rconn_on_advertise(struct rconn *c)
{
    struct ipc_listen *l = c->l;
    uint8_t cookie[IPC_GUID_SIZE];
    uint64_t pid = 0;
    if (ipc_advertise_parse(c->adv, c->n, cookie, &pid) != 0) {
        log_warn(LOG_CAT,
                 "a connection to %s sent %zu bytes that are not an ADVR_V1 advertise "
                 "(docs/ipc.md §2.2); closed it",
                 l->path, c->n);
        l->stats.rejected++;
        rconn_close(c);
        return;
    }
    struct ipc__rt *rt = rt_find_cookie(l, cookie);
    if (rt == NULL) {
        if (l->runtimes_max > 0 && l->nlive >= l->runtimes_max) {
            uint64_t now = uv_now(l->loop);
            if (l->turned_away_at == 0 || now - l->turned_away_at >= TURNED_AWAY_LOG_MS) {
                l->turned_away_at = now;
                log_warn(LOG_CAT,
                         "runtime pid %llu turned away: %zu runtimes are connected, the "
                         "most DiagnosticPort:MaxConnections allows",
                         (unsigned long long)pid, l->nlive);
            }
            l->stats.rejected++;
            rconn_park(c, now);
            return;
        }
        rt = rt_new(l, cookie, pid, c->peer_uid);
        if (rt == NULL) {
            log_warn(LOG_CAT, "out of memory tracking runtime pid %llu", (unsigned long long)pid);
            rconn_close(c);
            return;
        }
    } else if (rt->peer_uid != c->peer_uid) {
        /* Someone else advertising a known runtime's cookie: never hand it that runtime's
         * commands. */
        log_warn(LOG_CAT,
                 "a connection from uid %u advertised the cookie of runtime pid %llu (uid %s), "
                 "which runs as uid %u; closed it",
                 (unsigned)c->peer_uid, (unsigned long long)rt->pid, rt->uid,
                 (unsigned)rt->peer_uid);
        l->stats.rejected++;
        rconn_close(c);
        return;
    } else if (rt->pid != pid) {
        log_debug(LOG_CAT, "runtime uid %s advertised pid %llu, before %llu", rt->uid,
                  (unsigned long long)pid, (unsigned long long)rt->pid);
    }
    for (struct rconn **pp = &l->pending; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    l->npending--;
    l->stats.pending = l->npending;
    l->stats.advertised++;
    c->state = RC_SPARE;
    c->rt = rt;
    c->next = rt->spares;
    rt->spares = c;
    rt->nspares++;
    rt->idle_since = 0;
    if (rt->nspares > SPARES_MAX) {
        /* Keep the newest: the oldest is the likeliest to be stale. */
        struct rconn *old = rt->spares;
        while (old->next != NULL) {
            old = old->next;
        }
        rt_log_gone_spare(old, "closed (more than two idle connections)");
        rconn_close(old);
    }
    if (rt->waiters != NULL) {
        schedule_dispatch(l);
    }
}

static void rconn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct rconn *c = s->data;
    struct ipc_listen *l = c->l;
    (void)b;
    if (nread == 0 || c->state == RC_CLOSED) {
        return;
    }
    if (c->state == RC_PENDING) {
        if (nread < 0) {
            if (c->n > 0) {
                log_warn(LOG_CAT,
                         "a connection to %s ended after %zu of the %d advertise bytes "
                         "(%s); closed it",
                         l->path, c->n, IPC_ADVERTISE_SIZE, agent_strerror((int)nread));
                l->stats.rejected++;
            } else {
                log_debug(LOG_CAT, "a connection to %s ended before its advertise", l->path);
            }
            rconn_close(c);
        } else {
            c->n += (size_t)nread;
            if (c->n == sizeof(c->adv)) {
                rconn_on_advertise(c);
            }
        }
    } else if (c->state == RC_PARKED) {
        rconn_close(c); /* the turned-away runtime went, or spoke: either way, done */
    } else if (nread < 0) {
        rt_log_gone_spare(c,
                          nread == UV_EOF ? "closed by the runtime" : agent_strerror((int)nread));
        rconn_close(c);
    } else {
        log_warn(LOG_CAT, "runtime pid %llu (uid %s) sent bytes on an idle connection; closed it",
                 (unsigned long long)c->rt->pid, c->rt->uid);
        rconn_close(c);
    }
    pump(l);
}

/* A connection from a user dotmon does not trust: said once per uid. */
static void refuse_peer(struct ipc_listen *l, int64_t uid)
{
    l->stats.rejected++;
    if (uid < 0) {
        log_warn(LOG_CAT, "a connection to %s was closed: cannot tell who made it (%s)", l->path,
                 agent_strerror((int)uid));
        return;
    }
    for (size_t i = 0; i < l->nrefused_uids; i++) {
        if (l->refused_uids[i] == (uint32_t)uid) {
            return;
        }
    }
    if (l->nrefused_uids < REFUSED_UIDS_LOGGED) {
        l->refused_uids[l->nrefused_uids++] = (uint32_t)uid;
    }
    log_warn(LOG_CAT,
             "refused a connection to %s from uid %u: runtimes must run as dotmon's uid %u or a "
             "uid in DiagnosticPort:TrustedUids (said once per uid)",
             l->path, (unsigned)uid, (unsigned)geteuid());
}

static void accept_one(struct ipc_listen *l)
{
    struct rconn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        /* libuv keeps the connection for us and stops accepting; pump() tries again. */
        l->accept_deferred = true;
        return;
    }
    l->accept_deferred = false;
    (void)uv_pipe_init(l->loop, &c->pipe, 0); /* cannot fail on Unix */
    c->pipe.data = c;
    c->l = l;
    l->nrconns++;
    int rc = uv_accept((uv_stream_t *)&l->server, (uv_stream_t *)&c->pipe);
    if (rc != 0) {
        log_warn(LOG_CAT, "cannot accept a connection on %s: %s", l->path, agent_strerror(rc));
        c->state = RC_CLOSED;
        uv_close((uv_handle_t *)&c->pipe, rconn_on_close);
        return;
    }
    int64_t uid = ipc__peer_uid(&c->pipe);
    if (uid < 0 || !ipc_trust_allows(&l->trust, (uint32_t)uid, 0)) {
        refuse_peer(l, uid);
        c->state = RC_CLOSED;
        uv_close((uv_handle_t *)&c->pipe, rconn_on_close);
        return;
    }
    c->peer_uid = (uint32_t)uid;
    c->state = RC_PENDING;
    c->deadline = uv_now(l->loop) + l->advertise_timeout_ms;
    c->next = l->pending;
    l->pending = c;
    l->npending++;
    l->stats.pending = l->npending;
    l->stats.accepted++;
    rc = uv_read_start((uv_stream_t *)&c->pipe, rconn_on_alloc, rconn_on_read);
    if (rc != 0) {
        rconn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    struct ipc_listen *l = server->data;
    if (l->closing) {
        return;
    }
    if (status < 0) {
        log_warn(LOG_CAT, "accepting on %s: %s", l->path, agent_strerror(status));
        return;
    }
    if (l->npending >= l->pending_max) {
        /*
         * Not taking it makes libuv stop accepting: the rest waits in the kernel's backlog (the
         * runtime's connect times out and it retries), until an advertise completes.
         */
        l->accept_deferred = true;
        return;
    }
    accept_one(l);
    pump(l);
}

/* ---- hand-over ------------------------------------------------------------------------------- */

/*
 * Moves the spare's socket into `to`: a duplicate descriptor is opened there, and the listener's
 * own handle is closed (which removes the original from the loop's poll set before closing it).
 * On failure the spare is still closed unless the duplicate could not be made.
 */
static int rconn_hand_over(struct rconn *c, uv_pipe_t *to)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)&c->pipe, &fd);
    if (rc != 0) {
        return rc;
    }
    int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (dup_fd < 0) {
        return -errno;
    }
    (void)uv_read_stop((uv_stream_t *)&c->pipe);
    rconn_close(c);
    rc = uv_pipe_open(to, dup_fd);
    if (rc != 0) {
        (void)close(dup_fd);
    }
    return rc;
}

/*
 * Delivers failures, and gives each runtime's oldest waiter its newest spare, one at a time (a
 * callback may change any list), until nothing is left to do or the listener starts closing
 * (unless `final`: the last round, see ipc_listen_close).
 */
static void dispatch(struct ipc_listen *l, bool final)
{
    while (final || !l->closing) {
        struct ipc_conn *c = final ? NULL : conn_oldest(l->failed);
        int status = 0;
        if (c != NULL) {
            conn_unlink(c);
            status = c->status;
        } else {
            for (struct ipc__rt *rt = l->rts; rt != NULL && c == NULL; rt = rt->next) {
                if (rt_gone(rt) || rt->waiters == NULL || rt->spares == NULL) {
                    continue;
                }
                c = conn_oldest(rt->waiters);
                conn_unlink(c);
                c->rt = NULL;
                status = rconn_hand_over(rt->spares, c->pipe);
                if (status == 0) {
                    c->rt = rt;
                    conn_push(&rt->leases, c);
                    rt->nleases++;
                    l->stats.handed_out++;
                    log_debug(LOG_CAT, "runtime pid %llu: idle connection handed to a command",
                              (unsigned long long)rt->pid);
                } else {
                    log_warn(LOG_CAT, "cannot hand runtime pid %llu's connection over: %s",
                             (unsigned long long)rt->pid, agent_strerror(status));
                }
            }
        }
        if (c == NULL) {
            break;
        }
        c->state = IPC_CONN_READY;
        c->cb(c, status);
    }
}

static void on_dispatch(uv_idle_t *h)
{
    struct ipc_listen *l = h->data;
    (void)uv_idle_stop(h);
    l->dispatch_active = false;
    dispatch(l, false);
    pump(l);
}

static void schedule_dispatch(struct ipc_listen *l)
{
    if (!l->dispatch_active && !l->closing) {
        l->dispatch_active = true;
        (void)uv_idle_start(&l->dispatch, on_dispatch);
    }
}

/*
 * The transport's connect: queues c at the endpoint's runtime, found by uid in the endpoint's
 * listener (a runtime forgotten and advertising again is the same runtime). A listener that is
 * closing (or gone, or on another loop) or a runtime it does not know refuses, as a socket nobody
 * listens on would.
 */
static int reverse_connect(struct ipc_conn *c, uv_loop_t *loop, const struct ipc_endpoint *ep)
{
    struct ipc_listen *l = ep->listener != NULL ? ep->listener->l : NULL;
    struct ipc__rt *rt = NULL;
    if (l != NULL && l->loop == loop && !l->closing) {
        rt = rt_find_uid(l, ep->uid);
    }
    if (rt == NULL) {
        return UV_ECONNREFUSED;
    }
    c->state = IPC_CONN_WAITING;
    c->rt = rt;
    conn_push(&rt->waiters, c);
    if (rt->spares != NULL) {
        schedule_dispatch(l);
    }
    return 0;
}

static void reverse_conn_close(struct ipc_conn *c)
{
    if (c->state == IPC_CONN_WAITING) {
        conn_unlink(c); /* from its runtime's queue, or the failed list */
        c->rt = NULL;
        return;
    }
    struct ipc__rt *rt = c->rt;
    if (rt == NULL) {
        return;
    }
    conn_unlink(c);
    c->rt = NULL;
    rt->nleases--;
    if (rt->nleases == 0 && rt->nspares == 0) {
        schedule_pump(rt->l); /* starts the forget clock, unless it reconnects first */
    }
}

/* ---- runtimes: resume, probe, forget --------------------------------------------------------- */

static bool rt_in_flight(const struct ipc__rt *rt)
{
    return rt->x != NULL || rt->probe != NULL;
}

/* Ends what is in flight; its callback still comes (then rt may be reaped). */
static void rt_abort_op(struct ipc__rt *rt)
{
    if (rt->x != NULL) {
        ipc__exchange_abort(rt->x);
    }
    if (rt->probe != NULL) {
        ipc__probe_abort(rt->probe);
    }
}

static void rt_reap(struct ipc__rt *rt)
{
    struct ipc_listen *l = rt->l;
    if (!rt_gone(rt) || rt_in_flight(rt) || l->closing) {
        return;
    }
    for (struct ipc__rt **pp = &l->rts; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == rt) {
            *pp = rt->next;
            break;
        }
    }
    l->nrts--;
    free(rt);
}

/* Closes rt's idle connections and fails the commands waiting for one with status (they are
 * reported by the next dispatch). */
static void rt_drop_idle(struct ipc_listen *l, struct ipc__rt *rt, int status)
{
    while (rt->spares != NULL) {
        rconn_close(rt->spares);
    }
    while (rt->waiters != NULL) {
        struct ipc_conn *c = rt->waiters;
        conn_unlink(c);
        c->rt = NULL;
        c->status = status;
        conn_push(&l->failed, c);
    }
}

static void rt_forget(struct ipc__rt *rt, uint64_t idle_ms)
{
    struct ipc_listen *l = rt->l;
    log_info(LOG_CAT,
             "runtime pid %llu (uid %s) has had no connection to dotmon for %llu ms: "
             "forgotten",
             (unsigned long long)rt->pid, rt->uid, (unsigned long long)idle_ms);
    rt_set_state(rt, IPC_RT_GONE);
    l->nlive--;
    l->stats.forgotten++;
    rt_drop_idle(l, rt, UV_ECONNREFUSED);
    schedule_dispatch(l);
    ipc_proclist_retire(&l->procs, rt->proc);
    rt->proc = NULL;
    rt_abort_op(rt); /* its callback still comes, then rt is reaped */
    rt_reap(rt);
}

static void rt_failed(struct ipc__rt *rt, const char *what, int status, uint32_t hresult)
{
    struct ipc_listen *l = rt->l;
    rt->failures++;
    uint64_t delay = l->retry_first_ms;
    for (int i = 1; i < rt->failures && delay < l->retry_max_ms; i++) {
        delay *= 2;
    }
    delay = min_u64(delay, l->retry_max_ms);
    rt->retry_at = uv_now(l->loop) + delay;
    if (rt_owes_resume(rt)) {
        log_warn(LOG_CAT,
                 "runtime pid %llu (uid %s): %s failed (%s, hresult 0x%08x); it may be "
                 "waiting suspended; retrying in %llu ms",
                 (unsigned long long)rt->pid, rt->uid, what, agent_strerror(status),
                 (unsigned)hresult, (unsigned long long)delay);
    } else {
        log_debug(LOG_CAT,
                  "runtime pid %llu (uid %s): %s failed (%s, hresult 0x%08x); retrying in "
                  "%llu ms",
                  (unsigned long long)rt->pid, rt->uid, what, agent_strerror(status),
                  (unsigned)hresult, (unsigned long long)delay);
    }
}

/* Plans the next ProcessInfo refresh, if any is left (none while held: nothing would change). */
static void rt_plan_refresh(struct ipc__rt *rt)
{
    rt->refresh_at = 0;
    if (!rt_held(rt) && rt->refreshes < REFRESHES) {
        rt->refresh_at = uv_now(rt->l->loop) + refresh_after_ms[rt->refreshes++];
    }
}

/* True while the command line is one word (no space): the host may not have set it yet. */
static bool cmdline_unsettled(const struct ipc__rt *rt)
{
    return !rt_held(rt) && rt->proc != NULL && strchr(rt->proc->pub.command_line, ' ') == NULL;
}

/*
 * After a probe or refresh answered (or failed): a settling runtime is listed once its command
 * line is whole or its time is up; otherwise the next refresh is planned.
 */
static void rt_after_probe(struct ipc__rt *rt)
{
    uint64_t now = uv_now(rt->l->loop);
    if (rt_settling(rt)) {
        if (cmdline_unsettled(rt) && now < rt->settle_until) {
            rt->refresh_at = now + rt->l->settle_step_ms;
            return;
        }
        rt->settle_until = 0;
        rt_settled(rt);
        publish(rt->l);
    }
    rt_plan_refresh(rt);
}

/* Moves a refreshed ProcessInfo's strings into the listed struct, which stays the same object. */
static void proc_refresh(struct ipc_process *p, struct ipc_process *fresh)
{
    char **dst[] = {&p->name,
                    &p->command_line,
                    &p->os,
                    &p->arch,
                    &p->clr_version,
                    &p->entrypoint_assembly,
                    &p->runtime_identifier};
    char **src[] = {&fresh->name,
                    &fresh->command_line,
                    &fresh->os,
                    &fresh->arch,
                    &fresh->clr_version,
                    &fresh->entrypoint_assembly,
                    &fresh->runtime_identifier};
    for (size_t i = 0; i < sizeof(dst) / sizeof(dst[0]); i++) {
        char *old = *dst[i];
        *dst[i] = *src[i];
        *src[i] = old;
    }
    ipc__process_fini(fresh);
}

static void on_resume_result(struct ipc__rt *rt, const struct ipc_result *res)
{
    if (res->status != 0) {
        rt_failed(rt, "ResumeRuntime", res->status, 0);
        return;
    }
    rt_resumed(rt);
    rt->failures = 0;
    rt->l->stats.resumed++;
    if (rt->proc != NULL) {
        /* Listed while held: what it said then was said before its start-up ran. */
        rt->refreshes = 0;
        rt_plan_refresh(rt);
    }
    if (res->ok) {
        log_debug(LOG_CAT, "runtime pid %llu (uid %s) resumed (ResumeRuntime)",
                  (unsigned long long)rt->pid, rt->uid);
    } else {
        /* A runtime without the command was never suspended by it: nothing to wait for. */
        log_warn(LOG_CAT, "runtime pid %llu (uid %s) answered ResumeRuntime with %s (0x%08x)",
                 (unsigned long long)rt->pid, rt->uid, ipc_hresult_name(res->hresult),
                 res->hresult);
    }
}

static void on_probe_result(struct ipc__rt *rt, const struct ipc__probe_result *res)
{
    struct ipc_listen *l = rt->l;
    int level = res->level;
    rt->probe_level = level; /* what this runtime knows: the next probe and refreshes use it */
    if (rt->proc != NULL) {
        /* A refresh: keep what is listed unless the runtime answers in full. */
        struct ipc_process fresh;
        memset(&fresh, 0, sizeof(fresh));
        struct ipc_endpoint ep = rt_endpoint(rt);
        if (res->status == 0 && res->ok && res->info != NULL &&
            ipc__process_init(&fresh, res->info, level, &ep, rt->peer_uid) == 0) {
            if (strcmp(fresh.command_line, rt->proc->pub.command_line) != 0) {
                log_debug(LOG_CAT, "runtime pid %llu: command line now '%s'",
                          (unsigned long long)rt->pid, fresh.command_line);
            }
            proc_refresh(&rt->proc->pub, &fresh);
        }
        rt_after_probe(rt);
        return;
    }
    if (res->status != 0) {
        rt_failed(rt, "ProcessInfo", res->status, 0);
        return;
    }
    if (!res->ok) {
        rt_failed(rt, "ProcessInfo", AGENT_E_RUNTIME, res->hresult);
        return;
    }
    int rc = res->parse_status;
    struct ipc_proclist_entry *p = rc == 0 ? ipc_proclist_entry_new() : NULL;
    struct ipc_endpoint ep = rt_endpoint(rt);
    if (p == NULL || ipc__process_init(&p->pub, res->info, level, &ep, rt->peer_uid) != 0) {
        free(p);
        rt_failed(rt, "ProcessInfo", rc != 0 ? rc : UV_ENOMEM, 0);
        return;
    }
    if (res->info->pid != rt->pid) {
        log_debug(LOG_CAT, "runtime uid %s: ProcessInfo says pid %llu, its advertise %llu", rt->uid,
                  (unsigned long long)res->info->pid, (unsigned long long)rt->pid);
    }
    /* The advertised pid: what the target sees itself as, like the socket name in connect mode. */
    p->pub.pid = rt->pid;
    p->pub.key = 0;
    p->pub.seen_ms = uv_now(l->loop);
    rt->proc = p;
    rt->failures = 0;
    log_debug(LOG_CAT, "runtime pid %llu uid %s name %s (ProcessInfo%s): '%s'",
              (unsigned long long)rt->pid, rt->uid, p->pub.name,
              level == 3   ? "3"
              : level == 2 ? "2"
                           : "",
              p->pub.command_line);
    bool settle = cmdline_unsettled(rt);
    rt_probed(rt, settle);
    if (settle) {
        rt->settle_until = uv_now(l->loop) + l->settle_ms;
    } else {
        publish(l);
    }
    rt_after_probe(rt);
}

/* The end of either operation: false when rt's result is not to be looked at (closing, removed). */
static bool rt_op_ended(struct ipc__rt *rt)
{
    struct ipc_listen *l = rt->l;
    rt->op = RT_OP_NONE;
    l->in_flight--;
    if (l->closing) {
        maybe_finish_close(l);
        return false;
    }
    if (rt_gone(rt)) {
        rt_reap(rt);
        pump(l);
        return false;
    }
    return true;
}

static void on_resume_done(void *ud, const struct ipc_result *res)
{
    struct ipc__rt *rt = ud;
    struct ipc_listen *l = rt->l;
    rt->x = NULL;
    if (rt_op_ended(rt)) {
        on_resume_result(rt, res);
        pump(l);
    }
}

static void on_probe_done(void *ud, const struct ipc__probe_result *res)
{
    struct ipc__rt *rt = ud;
    struct ipc_listen *l = rt->l;
    rt->probe = NULL;
    if (rt_op_ended(rt)) {
        on_probe_result(rt, res);
        pump(l);
    }
}

static void rt_start_op(struct ipc__rt *rt, enum rt_op op)
{
    struct ipc_listen *l = rt->l;
    struct ipc_endpoint ep = rt_endpoint(rt);
    int rc;
    if (op == RT_OP_RESUME) {
        uint8_t req[IPC_HEADER_SIZE];
        struct ipc_wr w;
        ipc_wr_init(&w, req, sizeof(req));
        rc = ipc_cmd_resume_runtime(&w);
        rc = rc ? rc
                : ipc_exchange_start(l->loop, &ep, req, w.len, IPC_EXCHANGE_SIMPLE,
                                     l->probe_timeout_ms, PROBE_MAX_REPLY, on_resume_done, rt,
                                     &rt->x);
    } else {
        /* The first probe steps down from ProcessInfo3; a refresh asks what the runtime knew. */
        rc = ipc__probe_start(l->loop, &ep, rt->probe_level, rt->proc == NULL, l->probe_timeout_ms,
                              on_probe_done, rt, &rt->probe);
    }
    if (rc != 0) {
        rt_failed(rt, op == RT_OP_RESUME ? "ResumeRuntime" : "ProcessInfo", rc, 0);
        return;
    }
    rt->op = op;
    l->in_flight++;
}

static void on_wake(uv_timer_t *t)
{
    pump(t->data);
}

/*
 * One runtime's share of pump(): forgets it once it has been without any connection for the
 * grace (true: the list changed), else starts the exchange that is due (ResumeRuntime first,
 * then ProcessInfo, then refreshes) and lowers *wake to its next deadline.
 */
static bool pump_runtime(struct ipc__rt *rt, uint64_t now, uint64_t *wake)
{
    struct ipc_listen *l = rt->l;
    if (rt->nspares == 0 && rt->nleases == 0) {
        bool busy = rt->proc != NULL && rt->proc->pub.busy > 0;
        if (busy || rt->idle_since == 0) {
            rt->idle_since = now; /* a busy runtime's grace starts when it is no longer busy */
        } else if (now - rt->idle_since >= l->forget_ms) {
            rt_forget(rt, now - rt->idle_since);
            return true;
        }
        if (!busy) {
            *wake = min_u64(*wake, rt->idle_since + l->forget_ms);
        }
    } else {
        rt->idle_since = 0;
    }
    if (rt_in_flight(rt)) {
        return false;
    }
    bool resume = rt_owes_resume(rt);
    bool probe = rt->proc == NULL;
    bool refresh = !probe && rt->refresh_at != 0;
    if (!resume && !probe && !refresh) {
        return false;
    }
    uint64_t due = rt->retry_at;
    if (!resume && refresh && rt->refresh_at > due) {
        due = rt->refresh_at;
    }
    if (due > now) {
        *wake = min_u64(*wake, due);
        return false;
    }
    rt_start_op(rt, resume ? RT_OP_RESUME : RT_OP_PROBE);
    if (!rt_in_flight(rt)) {
        *wake = min_u64(*wake, rt->retry_at);
    }
    return false;
}

static void pump(struct ipc_listen *l)
{
    if (l->closing) {
        return;
    }
    uint64_t now = uv_now(l->loop);
    uint64_t wake = UINT64_MAX;
    bool changed = false;
    for (struct rconn *c = l->pending, *next; c != NULL; c = next) {
        next = c->next;
        if (now >= c->deadline) {
            log_warn(LOG_CAT,
                     "a connection to %s sent %zu of the %d advertise bytes within %llu "
                     "ms; closed it",
                     l->path, c->n, IPC_ADVERTISE_SIZE,
                     (unsigned long long)l->advertise_timeout_ms);
            l->stats.rejected++;
            rconn_close(c);
        } else {
            wake = min_u64(wake, c->deadline);
        }
    }
    for (struct rconn *c = l->parked, *next; c != NULL; c = next) {
        next = c->next;
        if (now >= c->deadline) {
            rconn_close(c);
        } else {
            wake = min_u64(wake, c->deadline);
        }
    }
    for (struct ipc__rt *rt = l->rts, *next; rt != NULL; rt = next) {
        next = rt->next;
        if (!rt_gone(rt)) {
            changed |= pump_runtime(rt, now, &wake);
        }
    }
    if (l->accept_deferred && l->npending < l->pending_max) {
        accept_one(l);
        /* Its advertise deadline was not in the loops above. */
        wake = min_u64(wake, now + l->advertise_timeout_ms);
    }
    if (changed) {
        publish(l);
    }
    uv_timer_stop(&l->wake);
    if (wake != UINT64_MAX) {
        (void)uv_timer_start(&l->wake, on_wake, wake > now ? wake - now : 1, 0);
    }
    l->stats.runtimes = l->nlive;
}

/* ---- the published list ---------------------------------------------------------------------- */

/* Rebuilds the list (ipc_proclist.h) from the listed runtimes and reports the changes. */
static void publish(struct ipc_listen *l)
{
    ipc_proclist_begin(&l->procs);
    for (struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        if (rt_listed(rt)) {
            ipc_proclist_add(&l->procs, rt->proc);
        }
    }
    ipc_proclist_publish(&l->procs);
}

/* ---- binding --------------------------------------------------------------------------------- */

/*
 * The folder of the socket may be writable by others (a pod's emptyDir is 0777 without the
 * sticky bit), so nothing here uses the socket's path twice (common/shdir.h): the folder is
 * opened once and kept; the socket is bound inside a private 0700 sub-folder, given its mode
 * there (where nobody else can swap it for a symlink), checked, and renamed into place without
 * replacing anything; what then sits at the name must be that very socket, or dotmon refuses to
 * start. Removal at close captures the file before deleting it (shdir_unlink_exact).
 */

/*
 * A socket file left at the name by an earlier dotmon that died: replace it, but only if it is a
 * socket and nobody accepts on it (a non-blocking connect is refused). Anything else is an error:
 * a live listener (another dotmon) or a file that is not a socket is never deleted.
 */
static int replace_stale(struct ipc_listen *l, const struct sockaddr_un *sa)
{
    struct stat st;
    if (fstatat(l->dirfd, l->base, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        int err = errno;
        if (err == ENOENT) {
            return 0;
        }
        log_error(LOG_CAT, "cannot check %s: %s", l->path, strerror(err));
        return -err;
    }
    if (!S_ISSOCK(st.st_mode)) {
        log_error(LOG_CAT, "%s exists and is not a socket (%s); dotmon does not replace it",
                  l->path, S_ISLNK(st.st_mode) ? "a symlink" : "another kind of file");
        return UV_EEXIST;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        int err = errno;
        log_error(LOG_CAT, "cannot create a socket: %s", strerror(err));
        return -err;
    }
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    int err = r == 0 ? 0 : errno;
    (void)close(fd);
    if (r == 0 || err == EAGAIN || err == EINPROGRESS) {
        log_error(LOG_CAT,
                  "another process accepts connections on %s (another dotmon?); not "
                  "replacing it",
                  l->path);
        return UV_EADDRINUSE;
    }
    if (err != ECONNREFUSED) {
        log_error(LOG_CAT, "cannot check whether %s is in use: %s", l->path, strerror(err));
        return -err;
    }
    int rc = shdir_unlink_exact(l->dirfd, l->base, st.st_dev, st.st_ino);
    if (rc != 0 && rc != UV_ENOENT) {
        log_error(LOG_CAT, "cannot remove the stale socket %s: %s", l->path, agent_strerror(rc));
        return rc;
    }
    log_info(LOG_CAT, "replaced the stale socket file %s (owner uid %u)", l->path,
             (unsigned)st.st_uid);
    return 0;
}

/* True when st is the socket dotmon made: a socket, ours, with exactly the configured mode. */
static bool is_our_socket(const struct ipc_listen *l, const struct stat *st)
{
    return S_ISSOCK(st->st_mode) && st->st_uid == geteuid() && (st->st_mode & 07777) == l->mode;
}

/*
 * Checks the path, opens its folder (kept in l->dirfd) and replaces a stale socket file at the
 * name. dir receives the folder's path (sun_path sized).
 */
static int bind_prepare(struct ipc_listen *l, char *dir, size_t dir_size)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    size_t len = strlen(l->path);
    if (len >= sizeof(sa.sun_path)) {
        log_error(LOG_CAT, "%s is too long for a Unix socket path (%zu bytes at most)", l->path,
                  sizeof(sa.sun_path) - 1);
        return UV_ENAMETOOLONG;
    }
    char base[sizeof(sa.sun_path)];
    if (shdir_split(l->path, dir, dir_size, base, sizeof(base)) != 0) {
        log_error(LOG_CAT, "%s is not an absolute path to a file", l->path);
        return AGENT_E_INVAL;
    }
    /* Shared with the app on purpose (it may be writable by others: see above), but walked
     * component by component (StrictModes): no folder another uid owns or can write without the
     * sticky bit on the way, the socket's folder not another uid's, no link of theirs. */
    char why[1024];
    int rc = shdir_open_trusted(dir, SHDIR_TRUST_SHARED, &l->dirfd, why, sizeof(why));
    if (rc == AGENT_E_UNTRUSTED) {
        log_error(LOG_CAT, "refusing to listen on %s: %s", l->path, why);
        return rc;
    }
    if (rc != 0) {
        log_error(LOG_CAT, "cannot open the folder %s: %s", dir, why);
        return rc;
    }
    memcpy(l->base, base, strlen(base) + 1);
    memcpy(sa.sun_path, l->path, len + 1);
    return replace_stale(l, &sa);
}

/*
 * Makes the socket as "s" inside the private folder priv (of dir), with exactly the configured
 * mode, and records its identity in l->dev/ino. *fd is the socket once created (the caller closes
 * it on failure); *step names what failed.
 */
static int bind_in_private(struct ipc_listen *l, const char *dir, const struct shdir_private *priv,
                           int *fd, const char **step)
{
    /* Bind inside the private folder: by its full path when that fits sun_path, else through
     * our descriptor of it. */
    struct sockaddr_un tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.sun_family = AF_UNIX;
    int n = snprintf(tmp.sun_path, sizeof(tmp.sun_path), "%s/%s/s",
                     strcmp(dir, "/") == 0 ? "" : dir, priv->name);
    if (n < 0 || (size_t)n >= sizeof(tmp.sun_path)) {
        (void)snprintf(tmp.sun_path, sizeof(tmp.sun_path), "/proc/self/fd/%d/s", priv->fd);
    }
    *step = "socket";
    *fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*fd < 0) {
        return -errno;
    }
    /* The mode goes on the unbound socket first (the file is created with it, narrowed by the
     * umask), then exactly that mode inside the private folder (a umask of 022 would otherwise
     * take group write from 0660). */
    *step = "fchmod";
    if (fchmod(*fd, (mode_t)l->mode) != 0) {
        return -errno;
    }
    *step = "bind";
    if (bind(*fd, (const struct sockaddr *)&tmp, sizeof(tmp)) != 0) {
        return -errno;
    }
    *step = "chmod";
    if (fchmodat(priv->fd, "s", (mode_t)l->mode, 0) != 0) {
        return -errno;
    }
    *step = "check";
    struct stat st;
    if (fstatat(priv->fd, "s", &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return -errno;
    }
    if (!is_our_socket(l, &st)) {
        return AGENT_E_CHANGED;
    }
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    return 0;
}

/*
 * What is at the name now must be the socket just made; someone who can write the folder may
 * have swapped it already, and then runtimes would not reach us. Logs why it is not.
 */
static int check_placed(const struct ipc_listen *l, const char *dir)
{
    struct stat now;
    if (fstatat(l->dirfd, l->base, &now, AT_SYMLINK_NOFOLLOW) != 0) {
        int rc = -errno;
        log_error(LOG_CAT, "cannot bind %s (final check): %s", l->path, agent_strerror(rc));
        return rc;
    }
    if (now.st_dev != l->dev || now.st_ino != l->ino || !is_our_socket(l, &now)) {
        log_error(LOG_CAT,
                  "%s was replaced right after dotmon bound it (now %s, owner uid %u): someone "
                  "else writes to %s; refusing to start",
                  l->path, S_ISLNK(now.st_mode) ? "a symlink" : "another file",
                  (unsigned)now.st_uid, dir);
        return AGENT_E_CHANGED;
    }
    return 0;
}

static int bind_socket(struct ipc_listen *l, int *fd_out)
{
    char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
    int rc = bind_prepare(l, dir, sizeof(dir));
    if (rc != 0) {
        return rc;
    }
    struct shdir_private priv = {.fd = -1};
    const char *step = "private folder";
    int fd = -1;
    rc = shdir_private_new(l->dirfd, &priv);
    if (rc != 0) {
        goto fail;
    }
    rc = bind_in_private(l, dir, &priv, &fd, &step);
    if (rc != 0) {
        goto fail;
    }
    step = "rename into place";
    rc = shdir_place(priv.fd, "s", l->dirfd, l->base);
    if (rc != 0) {
        (void)unlinkat(priv.fd, "s", 0);
        goto fail;
    }
    shdir_private_remove(l->dirfd, &priv);
    step = NULL; /* check_placed logs its own failures */
    rc = check_placed(l, dir);
    if (rc != 0) {
        goto fail;
    }
    *fd_out = fd;
    return 0;

fail:
    if (step != NULL) {
        log_error(LOG_CAT, "cannot bind %s (%s): %s", l->path, step, agent_strerror(rc));
    }
    shdir_private_remove(l->dirfd, &priv); /* the socket inside was unlinked or moved out */
    if (fd >= 0) {
        (void)close(fd);
    }
    return rc;
}

/* ---- public API ------------------------------------------------------------------------------ */

int ipc_listen_new(uv_loop_t *loop, const struct ipc_listen_config *cfg,
                   ipc_discovery_change_cb on_change, void *ud, struct ipc_listen **out)
{
    if (loop == NULL || cfg == NULL || cfg->path == NULL || cfg->path[0] == '\0' || out == NULL ||
        cfg->socket_mode > 0777) {
        return AGENT_E_INVAL;
    }
    struct ipc_listen *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return UV_ENOMEM;
    }
    l->path = strdup(cfg->path);
    l->ref = calloc(1, sizeof(*l->ref));
    if (l->path == NULL || l->ref == NULL) {
        free(l->path);
        free(l->ref);
        free(l);
        return UV_ENOMEM;
    }
    l->ref->refs = 1; /* the listener's own, dropped when it starts closing */
    l->ref->l = l;
    l->loop = loop;
    l->dirfd = -1;
    l->mode = cfg->socket_mode ? cfg->socket_mode : DEFAULT_MODE;
    l->probe_timeout_ms = cfg->probe_timeout_ms ? cfg->probe_timeout_ms : DEFAULT_PROBE_TIMEOUT_MS;
    l->advertise_timeout_ms =
        cfg->advertise_timeout_ms ? cfg->advertise_timeout_ms : DEFAULT_ADVERTISE_TIMEOUT_MS;
    l->forget_ms = cfg->forget_after_ms ? cfg->forget_after_ms : DEFAULT_FORGET_MS;
    l->retry_first_ms = cfg->retry_first_ms ? cfg->retry_first_ms : DEFAULT_RETRY_FIRST_MS;
    l->retry_max_ms = cfg->retry_max_ms ? cfg->retry_max_ms : DEFAULT_RETRY_MAX_MS;
    l->park_ms = cfg->park_ms ? cfg->park_ms : DEFAULT_PARK_MS;
    l->settle_ms = cfg->settle_ms ? cfg->settle_ms : DEFAULT_SETTLE_MS;
    l->settle_step_ms = cfg->settle_step_ms ? cfg->settle_step_ms : DEFAULT_SETTLE_STEP_MS;
    l->pending_max = cfg->max_connections ? cfg->max_connections : DEFAULT_PENDING_MAX;
    l->runtimes_max = cfg->max_connections ? cfg->max_connections : DEFAULT_RUNTIMES_MAX;
    l->trust = cfg->trust;
    l->hold = cfg->hold_suspended;
    ipc_proclist_init(&l->procs, on_change, ud);
    /* None of these inits can fail on Unix; from here on close() must run to release them. */
    (void)uv_timer_init(loop, &l->wake);
    (void)uv_idle_init(loop, &l->dispatch);
    (void)uv_pipe_init(loop, &l->server, 0);
    l->wake.data = l;
    l->dispatch.data = l;
    l->server.data = l;
    l->server_init = true;
    l->open_handles = 3;
    *out = l;
    return 0;
}

int ipc_listen_start(struct ipc_listen *l)
{
    if (l == NULL || l->bound || l->closing) {
        return AGENT_E_INVAL;
    }
    int fd = -1;
    int rc = bind_socket(l, &fd);
    if (rc != 0) {
        return rc;
    }
    rc = uv_pipe_open(&l->server, fd);
    if (rc != 0) {
        (void)close(fd);
    } else {
        /* From here the handle owns fd (closed with it). */
        rc = uv_listen((uv_stream_t *)&l->server, BACKLOG, on_connection);
    }
    if (rc != 0) {
        log_error(LOG_CAT, "cannot listen on %s: %s", l->path, agent_strerror(rc));
        (void)shdir_unlink_exact(l->dirfd, l->base, l->dev, l->ino);
        return rc;
    }
    l->bound = true;
    log_info(LOG_CAT, "listening for .NET runtimes on %s (mode %04o)", l->path, l->mode);
    return 0;
}

bool ipc_listen_ready(const struct ipc_listen *l)
{
    return l->bound && !l->closing;
}

size_t ipc_listen_count(const struct ipc_listen *l)
{
    return ipc_proclist_count(&l->procs);
}

const struct ipc_process *ipc_listen_at(const struct ipc_listen *l, size_t i)
{
    return ipc_proclist_at(&l->procs, i);
}

int ipc_listen_busy(struct ipc_listen *l, const char *uid, int delta)
{
    struct ipc__rt *rt = rt_find_uid(l, uid);
    if (rt == NULL || !rt_listed(rt)) {
        return AGENT_E_NOTFOUND;
    }
    struct ipc_process *p = &rt->proc->pub;
    p->busy += delta;
    if (p->busy < 0) {
        p->busy = 0;
    }
    /* A runtime without any connection gets its full grace from now on (pump restarts it). */
    rt->idle_since = 0;
    schedule_pump(l);
    return 0;
}

/* A held runtime is to be resumed now (over its next idle connection). */
static void rt_resume(struct ipc_listen *l, struct ipc__rt *rt)
{
    if (rt_held(rt)) {
        rt_set_state(rt, rt->state == IPC_RT_HELD ? IPC_RT_RESUMING : IPC_RT_RESUMING_LISTED);
        rt->retry_at = 0;
        log_info(LOG_CAT, "runtime pid %llu (uid %s): resuming it now", (unsigned long long)rt->pid,
                 rt->uid);
        schedule_pump(l);
    }
}

int ipc_listen_resume(struct ipc_listen *l, const char *uid)
{
    struct ipc__rt *rt = rt_find_uid(l, uid);
    if (rt == NULL) {
        return AGENT_E_NOTFOUND;
    }
    rt_resume(l, rt);
    return 0;
}

void ipc_listen_set_hold(struct ipc_listen *l, bool hold)
{
    l->hold = hold;
    for (struct ipc__rt *rt = hold ? NULL : l->rts; rt != NULL; rt = rt->next) {
        rt_resume(l, rt);
    }
}

void ipc_listen_get_stats(const struct ipc_listen *l, struct ipc_listen_stats *out)
{
    *out = l->stats;
    out->pending = l->npending;
    out->runtimes = l->nlive;
    size_t spares = 0;
    for (const struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        spares += rt->nspares;
    }
    out->spares = spares;
}

/* ---- closing --------------------------------------------------------------------------------- */

static void maybe_finish_close(struct ipc_listen *l)
{
    if (!l->closing || l->finished || l->open_handles > 0 || l->nrconns > 0 || l->in_flight > 0 ||
        l->fs_busy) {
        return;
    }
    l->finished = true;
    /* Commands still waiting for a connection learn that none will come. */
    struct ipc_conn *c;
    while ((c = conn_oldest(l->failed)) != NULL) {
        conn_unlink(c);
        c->state = IPC_CONN_READY;
        c->cb(c, c->status);
    }
    while (l->rts != NULL) {
        struct ipc__rt *rt = l->rts;
        l->rts = rt->next;
        ipc_proclist_entry_free(rt->proc);
        free(rt);
    }
    void (*cb)(void *) = l->close_cb;
    void *ud = l->close_ud;
    if (l->dirfd >= 0) {
        (void)close(l->dirfd);
    }
    ipc_proclist_fini(&l->procs);
    free(l->path);
    free(l);
    if (cb != NULL) {
        cb(ud);
    }
}

static void on_handle_close(uv_handle_t *h)
{
    struct ipc_listen *l = h->data;
    l->open_handles--;
    maybe_finish_close(l);
}

/* Removes the socket file only if it is still the one we bound (not a successor's). */
static void unlink_on_pool(uv_work_t *w)
{
    struct ipc_listen *l = w->data;
    l->unlink_rc = shdir_unlink_exact(l->dirfd, l->base, l->dev, l->ino);
}

static void on_unlinked(uv_work_t *w, int status)
{
    struct ipc_listen *l = w->data;
    int rc = status != 0 ? status : l->unlink_rc;
    if (rc == AGENT_E_CHANGED) {
        log_warn(LOG_CAT, "%s is no longer the socket dotmon bound; left it in place", l->path);
    } else if (rc != 0 && rc != UV_ENOENT) {
        log_warn(LOG_CAT, "cannot remove %s: %s", l->path, agent_strerror(rc));
    }
    l->fs_busy = false;
    maybe_finish_close(l);
}

/*
 * The second half of closing, from the dispatch handle on the next loop turn: commands that were
 * already waiting when close was called (a trace's StopTracing at shutdown, typically) still get
 * the spares there are; then every connection the listener holds is closed, the remaining
 * waiters are failed (from maybe_finish_close) and leases are dropped: commands in progress keep
 * their connections.
 */
static void on_final_dispatch(uv_idle_t *h)
{
    struct ipc_listen *l = h->data;
    (void)uv_idle_stop(h);
    dispatch(l, true);
    for (struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        rt_drop_idle(l, rt, UV_ECANCELED);
        while (rt->leases != NULL) {
            struct ipc_conn *c = rt->leases;
            conn_unlink(c);
            c->rt = NULL;
        }
        rt->nleases = 0;
    }
    uv_close((uv_handle_t *)&l->dispatch, on_handle_close);
}

void ipc_listen_close(struct ipc_listen *l, void (*cb)(void *ud), void *ud)
{
    if (l == NULL || l->closing) {
        return;
    }
    l->closing = true;
    ipc_proclist_mute(&l->procs);
    l->close_cb = cb;
    l->close_ud = ud;
    /* No new command can queue from here on; endpoints still held refuse to connect. */
    l->ref->l = NULL;
    lref_unref(l->ref);
    l->ref = NULL;
    uv_close((uv_handle_t *)&l->server, on_handle_close);
    uv_close((uv_handle_t *)&l->wake, on_handle_close);
    while (l->pending != NULL) {
        rconn_close(l->pending);
    }
    while (l->parked != NULL) {
        rconn_close(l->parked);
    }
    for (struct ipc__rt *rt = l->rts; rt != NULL; rt = rt->next) {
        rt_abort_op(rt); /* leaves the waiter queue; its callback comes later */
    }
    /* Restarted: uv_idle_start keeps the old callback of an active handle. */
    (void)uv_idle_stop(&l->dispatch);
    l->dispatch_active = true;
    (void)uv_idle_start(&l->dispatch, on_final_dispatch);
    if (l->bound) {
        l->fs_busy = true;
        l->unlink_work.data = l;
        if (uv_queue_work(l->loop, &l->unlink_work, unlink_on_pool, on_unlinked) != 0) {
            l->fs_busy = false;
        }
    }
}
