/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* O_PATH */
#include "ipc_discovery.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "err.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_internal.h"
#include "ipc_listen.h"
#include "ipc_node.h"
#include "ipc_proclist.h"
#include "ipc_sockname.h"
#include "log.h"
#include "shdir.h"

/*
 * How discovery works (docs/ipc.md §1.1-1.3):
 *
 * Every `dotnet-diagnostic-<pid>-<key>-socket` file in the directory gets a `struct sock`. Its
 * life: STAT (async lstat for the mtime) -> PROBE_WAIT -> PROBING (ProcessInfo3, then 2, then 1
 * on UNKNOWN_COMMAND) -> LISTED, or STALE (connection refused: a socket file left by a dead
 * process), REFUSED (owned or served by a user dotmon does not trust: ipc_trust_allows on the
 * lstat owner, then SO_PEERCRED on every connection, ipc_endpoint) or FAILED (timeout, garbage,
 * error HRESULT; retried with backoff, since a runtime that is busy with a dump answers nothing for
 * a while). LISTED socks get a liveness check (a full ProcessInfo request, because a silent client
 * would block the runtime's single server thread, deviations.md §1.8) every liveness_ms; a refused
 * or vanished socket means the process died and the sock turns STALE. Socks whose file disappears
 * are dropped.
 *
 * All directory access goes through the libuv threadpool (scandir, lstat), all socket access
 * through ipc_exchange with a timeout, and at most MAX_IN_FLIGHT exchanges run at once, so the
 * loop never blocks and a directory full of stale files costs one refused connect each.
 *
 * Node mode (docs/ipc.md §6) feeds the same machinery from a walk of /proc (ipc_node.c, on the
 * pool) instead of a scandir: a sock is named by its full /proc/<pid>/root path, is checked on the
 * pool (ipc_node_verify, then its lstat) instead of the plain lstat, and is replaced when the walk
 * sees its pid with another start time, and a probed sock is checked once more on the pool
 * (S_VERIFY: the start time). A node sock that turned STALE while the walk still sees its process
 * is checked again, with a backoff (node_merge); at most MAX_IN_FLIGHT checks are queued at once.
 * In both modes a probed sock's identity is read (S_IDENT, ipc_identity.h) before it is listed.
 *
 * The published list (what ipc_discovery_at returns) holds one process per pid: the LISTED sock
 * with the highest key, then the newest mtime. It is rebuilt by publish() after every change,
 * which also reports additions and removals and frees the retired process structs.
 */

#define LOG_CAT       "dotmon.ipc.discovery"
#define MAX_IN_FLIGHT 16
#define MAX_REFUSALS  3 /* connects refused before a new socket counts as stale */
/* Node mode: folders watched at most, and the least time between walks an event there starts. */
#define NODE_WATCH_MAX    1024
#define NODE_WATCH_GAP_MS 250

/* S_VERIFY: probed, node mode's process being checked again (its start time) before it is
 * listed; S_IDENT: its identity being read (ipc_identity.h), listed once known. */
enum sock_state {
    S_STAT = 0,
    S_PROBE_WAIT,
    S_PROBING,
    S_VERIFY,
    S_IDENT,
    S_LISTED,
    S_STALE,
    S_FAILED,
    S_REFUSED
};

enum sock_op { OP_NONE = 0, OP_PROBE, OP_LIVENESS };

struct sock {
    struct sock *next;
    struct ipc_discovery *d;
    char *name;
    char *path;
    uint64_t pid; /* from the name */
    uint64_t key;
    uint64_t mtime_ns;
    uint32_t owner_uid;   /* from lstat; connections must be accepted by this uid */
    uint64_t ino;         /* from lstat: which file the name held when last looked at */
    uint64_t dev;         /* node mode: its device (connections check both, ipc_endpoint) */
    uint64_t refused_ino; /* the file last refused and logged (once per file and owner) */
    int64_t refused_uid;
    enum sock_state state;
    enum sock_op op;
    int probe_level;      /* 3, 2 or 1: the ProcessInfo version to try next */
    int refusals;         /* refused connects before the first success */
    int failures;         /* consecutive failed probes, for the backoff */
    uint64_t retry_at;    /* uv_now() before which a waiting or failed probe does not start */
    bool live_due;        /* a liveness check is owed */
    bool live_watched;    /* the liveness check in flight was asked while the runtime was watched */
    bool in_scan;         /* present in the scan being processed */
    bool recheck;         /* an fs event named it: re-stat and re-probe even if stale */
    bool settled;         /* its first probe finished (for ipc_discovery_ready) */
    bool removed;         /* file gone; freed once ops reaches 0 */
    int ops;              /* in-flight lstat or exchange that points at this struct */
    struct ipc__probe *x; /* the probe or liveness ProcessInfo in flight */
    uv_fs_t stat_req;
    struct ipc_proclist_entry *proc; /* while VERIFY, IDENT and LISTED (rank: the socket's mtime) */
    struct ipc_identity_req *ident;  /* while IDENT: the identity being read */
    /* Thread-pool work on this sock (node mode's check, or the check after a probe). */
    uv_work_t work;
    bool work_busy;
    int work_rc;
    struct stat work_st;
    bool work_trusted;         /* node mode's check: ipc_trust_allows of the socket's owner */
    bool work_cut;             /* node mode's check: net/unix was longer than its read bound */
    int work_wd;               /* node mode's check: the watch on its folder (-1: none) */
    bool folder_watched;       /* node mode: a check got that watch (the loop writes it) */
    bool check_due;            /* node mode: a check is owed (started by pump, MAX_IN_FLIGHT) */
    int check_fails;           /* node mode: rechecks since it was last probed, for the backoff */
    uint64_t recheck_at;       /* node mode: uv_now() before which a STALE sock is not rechecked */
    struct ipc_node_cand cand; /* node mode: what the walk saw */
};

struct ipc_discovery {
    uv_loop_t *loop;
    char *dir;
    uint64_t probe_timeout_ms;
    uint64_t rescan_ms;
    uint64_t liveness_ms;
    uint64_t retry_max_ms;

    /* Our own inotify watch (uv_fs_event would also wake us for every write to any file in
     * the folder: a dump being written there, hundreds of thousands of times). */
    uv_poll_t watch;
    int inotify_fd; /* -1: no watch (the rescan timer alone) */
    struct ipc_trust trust;
    struct ipc_identity_vars ident_vars;
    bool ident_on; /* read identities (ipc_discovery_config.identity) */
    uv_timer_t rescan_timer;
    uv_timer_t live_timer;
    uv_timer_t wake_timer;
    int open_handles;

    uv_fs_t scan_req;
    bool node; /* node mode: scans walk /proc (scan_work) */
    uv_work_t scan_work;
    struct ipc_node_walk walk;
    size_t node_looked; /* from the last walk */
    size_t node_denied;
    bool denied_logged;
    size_t checks_busy; /* node mode's checks on the pool (at most MAX_IN_FLIGHT) */
    bool unix_cut_logged;
    unsigned cut_logged;    /* IPC_NODE_CUT_* bits last logged */
    uint64_t cut_logged_at; /* uv_now() of that log */
    bool scan_busy;
    bool scan_again;
    uint64_t walk_started_ms; /* node mode: uv_now() of the last walk's start */
    int watch_max_wd;         /* node mode: the highest watch descriptor (the loop's) */
    int watch_live;           /* node mode: folders watched now (the loop writes, the pool reads) */
    int stats_busy;
    size_t in_flight;

    struct sock *socks;
    size_t nsocks;
    struct ipc_proclist procs; /* capacity >= nsocks */
    ipc_discovery_change_cb on_update;
    void *update_ud;

    struct ipc_listen *lst; /* listen mode: everything below the API is ipc_listen's */
    bool lst_open;          /* lst not yet closed-and-freed */

    bool started;
    bool first_scan_done;
    bool ready;
    bool closing;
    void (*close_cb)(void *ud);
    void *close_ud;
};

static void pump(struct ipc_discovery *d);
static void start_checks(struct ipc_discovery *d);
static void publish(struct ipc_discovery *d);
static void request_scan(struct ipc_discovery *d);
static void maybe_finish_close(struct ipc_discovery *d);
static void on_wake(uv_timer_t *t);
static void on_rescan_timer(uv_timer_t *t);
static void on_walk(uv_work_t *w, int status);
static void walk_work(uv_work_t *w);

/* ---- small helpers ----------------------------------------------------------------------- */

/* Drops the identity read in flight, if any (its callback never comes). */
static void sock_ident_cancel(struct sock *s)
{
    if (s->ident != NULL) {
        ipc_identity_cancel(s->ident);
        s->ident = NULL;
    }
}

/* Moves a sock's process to the retired list; publish() reports and frees it. */
static void sock_retire_proc(struct sock *s)
{
    sock_ident_cancel(s);
    ipc_proclist_retire(&s->d->procs, s->proc);
    s->proc = NULL;
}

static void sock_free(struct sock *s)
{
    sock_ident_cancel(s);
    ipc_proclist_entry_free(s->proc);
    free(s->name);
    free(s->path);
    free(s);
}

/* Unlinks and frees a removed sock once nothing in flight points at it. */
static void sock_reap(struct sock *s)
{
    struct ipc_discovery *d = s->d;
    if (!s->removed || s->ops > 0 || d->closing) {
        return;
    }
    for (struct sock **pp = &d->socks; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    }
    d->nsocks--;
    sock_free(s);
}

static void sock_remove(struct sock *s)
{
    if (s->removed) {
        return;
    }
    log_debug(LOG_CAT, "socket %s removed", s->name);
    s->removed = true;
    s->state = S_STALE;
    sock_retire_proc(s);
    if (s->x != NULL) {
        ipc__probe_abort(s->x); /* the callback still comes, then the sock is reaped */
    }
    if (s->work_busy) {
        (void)uv_cancel((uv_req_t *)&s->work);
    } else if (s->ops > 0 && s->op == OP_NONE) {
        (void)uv_cancel((uv_req_t *)&s->stat_req);
    }
    sock_reap(s);
}

static struct sock *sock_find(struct ipc_discovery *d, const char *name)
{
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        if (!s->removed && strcmp(s->name, name) == 0) {
            return s;
        }
    }
    return NULL;
}

static void update_ready(struct ipc_discovery *d)
{
    if (d->ready || !d->first_scan_done) {
        return;
    }
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        if (!s->removed && !s->settled) {
            return;
        }
    }
    d->ready = true;
}

/* ---- probing and liveness ---------------------------------------------------------------- */

/* How the sock's runtime is reached: node mode's through its process's root (ipc_endpoint). */
static struct ipc_endpoint sock_endpoint(const struct sock *s)
{
    struct ipc_endpoint ep = {.path = s->path, .peer_uid = (int64_t)s->owner_uid};
    if (s->d->node) {
        ep.root_pid = s->cand.host_pid;
        ep.sock_dev = s->dev;
        ep.sock_ino = s->ino;
    }
    return ep;
}

static struct ipc_proclist_entry *proc_from_info(const struct ipc_process_info *pi, int level,
                                                 const struct sock *s, uint64_t now)
{
    struct ipc_proclist_entry *e = ipc_proclist_entry_new();
    if (e == NULL) {
        return NULL;
    }
    struct ipc_endpoint ep = sock_endpoint(s);
    if (ipc__process_init(&e->pub, pi, level, &ep, s->owner_uid) != 0) {
        free(e);
        return NULL;
    }
    e->pub.key = s->key;
    if (s->d->node) {
        e->pub.pid = s->cand.host_pid;
        e->pub.host_pid = s->cand.host_pid;
        e->pub.ns_pid = pi->pid != s->cand.host_pid ? pi->pid : 0;
        snprintf(e->pub.node_tmpdir, sizeof(e->pub.node_tmpdir), "%s", s->cand.tmpdir);
    }
    e->pub.seen_ms = now;
    e->rank = s->mtime_ns;
    return e;
}

/* Never talked to again until its file changes; said once per file and user. */
static void sock_refuse(struct sock *s, uint64_t ino, int64_t uid, const char *why)
{
    s->state = S_REFUSED;
    s->settled = true;
    sock_retire_proc(s);
    if (s->refused_ino == ino && s->refused_uid == uid) {
        return;
    }
    s->refused_ino = ino;
    s->refused_uid = uid;
    log_warn(LOG_CAT,
             "ignoring %s: %s uid %lld, not dotmon's uid %u%s; a runtime of another user is "
             "watched only when DiagnosticPort:TrustedUids names its uid",
             s->path, why, (long long)uid, (unsigned)geteuid(),
             s->d->trust.no_proc_owner ? "" : " nor the owner of the process it names");
}

/* The wait before the n-th retry (n >= 1): the rescan period, doubled each time, up to the max. */
static uint64_t backoff_ms(const struct ipc_discovery *d, int n)
{
    uint64_t delay = d->rescan_ms;
    for (int i = 1; i < n && delay < d->retry_max_ms; i++) {
        delay *= 2;
    }
    return delay > d->retry_max_ms ? d->retry_max_ms : delay;
}

static void probe_failed(struct sock *s, const char *why, int status, uint32_t hresult)
{
    struct ipc_discovery *d = s->d;
    s->failures++;
    uint64_t delay = backoff_ms(d, s->failures);
    s->state = S_FAILED;
    s->retry_at = uv_now(d->loop) + delay;
    log_debug(LOG_CAT, "probe of %s failed (%s: %s, hresult 0x%08x); retry in %llu ms", s->name,
              why, agent_strerror(status), (unsigned)hresult, (unsigned long long)delay);
}

static void sock_verify(struct sock *s);

static void on_identity(void *ud, const struct ipc_identity_result *res)
{
    struct sock *s = ud;
    struct ipc_discovery *d = s->d;
    s->ident = NULL;
    if (s->state != S_IDENT || s->proc == NULL) {
        return;
    }
    if (res->host_pid != 0 || !d->node) { /* node mode: the walk's host pid stays */
        s->proc->pub.host_pid = res->host_pid;
    }
    s->proc->pub.identity = *res->id;
    s->state = S_LISTED;
    s->settled = true;
    const struct ipc_identity *id = res->id;
    log_debug(LOG_CAT, "pid %llu: host pid %llu container '%s' pod '%s/%s' uid '%s' name '%s'",
              (unsigned long long)s->proc->pub.pid, (unsigned long long)res->host_pid,
              id->container_id, id->pod_namespace, id->pod_name, id->pod_uid, id->container_name);
    publish(d);
    update_ready(d);
    pump(d);
}

static void on_probe_result(struct sock *s, const struct ipc__probe_result *res)
{
    struct ipc_discovery *d = s->d;
    int level = res->level;
    s->probe_level = level;
    if (res->status == AGENT_E_UNTRUSTED) {
        sock_refuse(s, s->ino, res->peer_uid, "its listener runs as");
        return;
    }
    if (res->status == UV_ECONNREFUSED || res->status == UV_ENOENT) {
        /*
         * Nobody listens: a file left by a dead process, or (rarely) a runtime caught between
         * bind() and listen(). Retry a couple of times quickly, then ignore the file.
         */
        s->refusals++;
        s->settled = true;
        if (s->refusals < MAX_REFUSALS) {
            s->state = S_PROBE_WAIT;
            s->retry_at = uv_now(d->loop) + (s->refusals == 1 ? 100u : 400u);
        } else {
            s->state = S_STALE;
            log_debug(LOG_CAT, "socket %s is stale (connection refused)", s->name);
        }
        return;
    }
    if (res->status != 0) {
        s->settled = true;
        probe_failed(s, "exchange", res->status, 0);
        return;
    }
    if (!res->ok) {
        s->settled = true;
        probe_failed(s, ipc_hresult_name(res->hresult), AGENT_E_RUNTIME, res->hresult);
        return;
    }
    s->settled = true;
    if (res->parse_status != 0) {
        probe_failed(s, "ProcessInfo payload", res->parse_status, 0);
        return;
    }
    struct ipc_proclist_entry *e = proc_from_info(res->info, level, s, uv_now(d->loop));
    if (e == NULL) {
        probe_failed(s, "allocation", UV_ENOMEM, 0);
        return;
    }
    s->proc = e;
    s->refusals = 0;
    s->check_fails = 0;
    s->failures = 0;
    log_debug(LOG_CAT, "socket %s: pid %llu uid %s name %s (ProcessInfo%s)", s->name,
              (unsigned long long)e->pub.pid, e->pub.uid, e->pub.name,
              level == 3   ? "3"
              : level == 2 ? "2"
                           : "");
    if (d->node && res->info->pid != s->cand.ns_pid) {
        /* The runtime behind the socket says it is someone else: not this process's. */
        log_warn(LOG_CAT, "ignoring %s: its runtime reports pid %llu, the process has %llu",
                 s->path, (unsigned long long)res->info->pid, (unsigned long long)s->cand.ns_pid);
        s->state = S_STALE;
        sock_retire_proc(s);
        return;
    }
    sock_verify(s);
}

static void on_liveness_result(struct sock *s, const struct ipc__probe_result *res)
{
    /*
     * Only a refused or missing socket proves death. A timeout or a garbled reply may be a busy
     * runtime (the server thread runs dumps and rundowns), so it stays listed.
     */
    if (res->status == AGENT_E_UNTRUSTED) {
        /* The socket at the path is no longer the runtime's: swapped by someone else. */
        sock_refuse(s, s->ino, res->peer_uid, "now served by");
        return;
    }
    if (res->status == UV_ECONNREFUSED || res->status == UV_ENOENT) {
        log_debug(LOG_CAT, "runtime behind %s is gone", s->name);
        s->state = S_STALE;
        sock_retire_proc(s);
        return;
    }
    /* The check is a ProcessInfo: its command line replaces the one of the first probe, taken
     * perhaps before the host had finished starting (dotnet-monitor's CommandLine filter and
     * /process read it). */
    const struct ipc_process_info *pi = res->info;
    if (res->status != 0 || !res->ok || s->proc == NULL || pi == NULL ||
        memcmp(pi->cookie, s->proc->pub.cookie, sizeof(pi->cookie)) != 0) {
        return;
    }
    int changed = ipc__process_update_cmdline(&s->proc->pub, &pi->command_line);
    if (changed == 0 && s->live_watched && s->proc->pub.watched > 0 &&
        !s->proc->pub.cmdline_settled) {
        /* Asked while managed code ran, and the same as the answer before: final (see
         * ipc_discovery_watch); the checks stop while the runtime stays watched. */
        s->proc->pub.cmdline_settled = true;
        log_debug(LOG_CAT, "pid %llu: command line settled; liveness left to its session's stream",
                  (unsigned long long)s->proc->pub.pid);
    }
    if (changed == 1) {
        s->proc->pub.cmdline_settled = false;
        log_debug(LOG_CAT, "pid %llu: command line now '%s'", (unsigned long long)s->proc->pub.pid,
                  s->proc->pub.command_line);
        if (s->d->on_update != NULL && !s->d->closing) {
            s->d->on_update(s->d->update_ud, &s->proc->pub, true);
        }
    }
}

static void on_exchange_done(void *ud, const struct ipc__probe_result *res)
{
    struct sock *s = ud;
    struct ipc_discovery *d = s->d;
    enum sock_op op = s->op;
    s->x = NULL;
    s->op = OP_NONE;
    s->ops--;
    d->in_flight--;
    if (d->closing) {
        maybe_finish_close(d);
        return;
    }
    if (s->removed) {
        sock_reap(s);
    } else if (op == OP_PROBE) {
        on_probe_result(s, res);
    } else {
        on_liveness_result(s, res);
    }
    publish(d);
    update_ready(d);
    pump(d);
}

static int start_exchange(struct sock *s, enum sock_op op)
{
    struct ipc_discovery *d = s->d;
    struct ipc_endpoint ep = sock_endpoint(s);
    /* Liveness: the plain ProcessInfo every runtime knows; a probe steps down from probe_level. */
    int rc = ipc__probe_start(d->loop, &ep, op == OP_LIVENESS ? 1 : s->probe_level, op == OP_PROBE,
                              d->probe_timeout_ms, on_exchange_done, s, &s->x);
    if (rc != 0) {
        return rc;
    }
    s->op = op;
    s->ops++;
    d->in_flight++;
    if (op == OP_PROBE) {
        s->state = S_PROBING;
    } else {
        s->live_due = false;
        s->live_watched = s->proc != NULL && s->proc->pub.watched > 0;
    }
    return 0;
}

/*
 * Starts whatever work is due, up to MAX_IN_FLIGHT exchanges, and arms the wake timer for the
 * earliest delayed probe. Called after every event that can free a slot or create work.
 */
static void pump(struct ipc_discovery *d)
{
    if (d->closing) {
        return;
    }
    if (d->node) {
        start_checks(d);
    }
    uint64_t now = uv_now(d->loop);
    uint64_t wake = UINT64_MAX;
    bool settled_some = false;
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        if (s->removed || s->x != NULL) {
            continue;
        }
        bool probe_due = s->state == S_PROBE_WAIT || s->state == S_FAILED;
        if (probe_due && s->retry_at > now) {
            wake = s->retry_at < wake ? s->retry_at : wake;
            continue;
        }
        bool live_due = s->state == S_LISTED && s->live_due && s->proc != NULL &&
                        s->proc->pub.busy <= 0 &&
                        !(s->proc->pub.watched > 0 && s->proc->pub.cmdline_settled);
        if (!probe_due && !live_due) {
            continue;
        }
        if (d->in_flight >= MAX_IN_FLIGHT) {
            break; /* the next completion pumps again */
        }
        if (probe_due && s->state == S_FAILED) {
            s->probe_level = 3;
        }
        int rc = start_exchange(s, probe_due ? OP_PROBE : OP_LIVENESS);
        if (rc == AGENT_E_CHANGED || rc == UV_ENOENT) {
            /* Node mode: the socket file checked is gone from its path (the runtime exited), or
             * was swapped for something else (ipc_endpoint): never connected to; not listed. */
            if (rc == UV_ENOENT) {
                log_debug(LOG_CAT, "runtime behind %s is gone (its socket file is)", s->name);
            } else {
                log_warn(LOG_CAT,
                         "ignoring %s: its socket file was replaced or its path now has a symlink",
                         s->path);
            }
            s->state = S_STALE;
            s->settled = true;
            sock_retire_proc(s);
            settled_some = true;
        } else if (rc != 0) {
            log_warn(LOG_CAT, "cannot talk to %s: %s", s->path, agent_strerror(rc));
            if (probe_due) {
                s->state = S_STALE;
                s->settled = true;
                settled_some = true;
            } else {
                s->live_due = false;
            }
        }
    }
    uv_timer_stop(&d->wake_timer);
    if (wake != UINT64_MAX) {
        (void)uv_timer_start(&d->wake_timer, on_wake, wake - now, 0);
    }
    if (settled_some) {
        publish(d);
    }
    update_ready(d);
}

static void on_wake(uv_timer_t *t)
{
    pump(t->data);
}

/* ---- the published list ------------------------------------------------------------------ */

/* The pid that names a sock's process: node mode, its host pid. */
static uint64_t sock_pid(const struct sock *s)
{
    return s->d->node ? s->cand.host_pid : s->pid;
}

/*
 * True while a newer socket for the same pid has not finished its first probe: listing the older
 * one now would only make the winner flip a moment later.
 */
static bool held_back(const struct ipc_discovery *d, const struct sock *s)
{
    for (const struct sock *t = d->socks; t != NULL; t = t->next) {
        if (t != s && !t->removed && !t->settled && sock_pid(t) == sock_pid(s) && t->key > s->key) {
            return true;
        }
    }
    return false;
}

/*
 * Rebuilds the published list from the LISTED socks, reports what left and what joined, then
 * frees the retired processes (they stayed valid through the removal callbacks).
 */
static void publish(struct ipc_discovery *d)
{
    ipc_proclist_begin(&d->procs);
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        if (!s->removed && s->state == S_LISTED && s->proc != NULL && !held_back(d, s)) {
            ipc_proclist_add(&d->procs, s->proc);
        }
    }
    ipc_proclist_publish(&d->procs);
}

/* ---- directory scanning ------------------------------------------------------------------ */

static void sock_stat_done(struct sock *s, int result, bool is_sock, uint32_t uid, uint64_t ino,
                           uint64_t mtime_ns, int trusted);

static void on_stat(uv_fs_t *req)
{
    struct sock *s = req->data;
    struct ipc_discovery *d = s->d;
    ssize_t result = req->result;
    uv_stat_t st = req->statbuf;
    uv_fs_req_cleanup(req);
    s->ops--;
    d->stats_busy--;
    if (d->closing) {
        maybe_finish_close(d);
        return;
    }
    if (s->removed) {
        sock_reap(s);
        pump(d);
        return;
    }
    sock_stat_done(s, (int)result, S_ISSOCK(st.st_mode), (uint32_t)st.st_uid, st.st_ino,
                   (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec, -1);
}

/* What an lstat of the socket's path (and in node mode, its check) found; trusted: whether uid
 * may serve the runtime, when the check on the pool already asked (it stats /proc/<pid>), else -1.
 */
static void sock_stat_done(struct sock *s, int result, bool is_sock, uint32_t uid, uint64_t ino,
                           uint64_t mtime_ns, int trusted)
{
    struct ipc_discovery *d = s->d;
    if (result == 0) {
        s->ino = ino;
    }
    if (result == UV_ENOENT) {
        sock_remove(s);
    } else if (result < 0 || !is_sock) {
        /* Not something we can talk to: remember it so it is not looked at again. */
        s->state = S_STALE;
        s->settled = true;
    } else if (trusted == 0 || (trusted < 0 && !ipc_trust_allows(&d->trust, uid, sock_pid(s)))) {
        sock_refuse(s, ino, (int64_t)uid, "owned by");
    } else {
        s->owner_uid = uid;
        s->mtime_ns = mtime_ns;
        s->state = S_PROBE_WAIT;
        s->probe_level = 3;
        s->retry_at = 0;
    }
    publish(d); /* a sock that settled here may have held back an older sibling */
    pump(d);
}

static void sock_stat(struct sock *s)
{
    struct ipc_discovery *d = s->d;
    s->state = S_STAT;
    s->stat_req.data = s;
    int rc = uv_fs_lstat(d->loop, &s->stat_req, s->path, on_stat);
    if (rc != 0) {
        log_warn(LOG_CAT, "cannot stat %s: %s", s->path, agent_strerror(rc));
        s->state = S_STALE;
        s->settled = true;
        return;
    }
    s->ops++;
    d->stats_busy++;
}

static struct sock *sock_new(struct ipc_discovery *d, const char *name, uint64_t pid, uint64_t key)
{
    if (ipc_proclist_reserve(&d->procs, d->nsocks + 1) != 0) {
        return NULL;
    }
    struct sock *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    size_t dl = strlen(d->dir);
    size_t nl = strlen(name);
    s->name = strndup(name, nl);
    s->path = malloc(dl + 1 + nl + 1);
    if (s->name == NULL || s->path == NULL) {
        sock_free(s);
        return NULL;
    }
    memcpy(s->path, d->dir, dl);
    s->path[dl] = '/';
    memcpy(s->path + dl + 1, name, nl + 1);
    s->d = d;
    s->pid = pid;
    s->key = key;
    s->next = d->socks;
    d->socks = s;
    d->nsocks++;
    return s;
}

static void on_scan(uv_fs_t *req)
{
    struct ipc_discovery *d = req->data;
    d->scan_busy = false;
    if (d->closing) {
        uv_fs_req_cleanup(req);
        maybe_finish_close(d);
        return;
    }
    if (req->result < 0) {
        /* Keep what we know: a transient error (EMFILE) must not drop every process. */
        log_warn(LOG_CAT, "cannot read %s: %s", d->dir, agent_strerror((int)req->result));
    } else {
        for (struct sock *s = d->socks; s != NULL; s = s->next) {
            s->in_scan = false;
        }
        uv_dirent_t ent;
        while (uv_fs_scandir_next(req, &ent) != UV_EOF) {
            uint64_t pid;
            uint64_t key;
            if ((ent.type != UV_DIRENT_SOCKET && ent.type != UV_DIRENT_UNKNOWN) ||
                ipc_sockname_parse(ent.name, &pid, &key) != 0) {
                continue;
            }
            struct sock *s = sock_find(d, ent.name);
            if (s == NULL) {
                s = sock_new(d, ent.name, pid, key);
                if (s == NULL) {
                    log_warn(LOG_CAT, "out of memory tracking %s", ent.name);
                    continue;
                }
                sock_stat(s);
            } else if (s->recheck && s->ops == 0) {
                /* Re-created under the same name (or touched): give it a fresh start. */
                if (s->state == S_STALE || s->state == S_FAILED || s->state == S_REFUSED) {
                    s->refusals = 0;
                    s->failures = 0;
                    sock_stat(s);
                }
            }
            s->recheck = false;
            s->in_scan = true;
        }
        for (struct sock *s = d->socks, *next; s != NULL; s = next) {
            next = s->next;
            if (!s->removed && !s->in_scan) {
                sock_remove(s);
            }
        }
    }
    uv_fs_req_cleanup(req);
    d->first_scan_done = true;
    publish(d);
    pump(d);
    if (d->scan_again && !d->closing) {
        d->scan_again = false;
        request_scan(d);
    }
}

/* At most one scandir at a time; requests during a scan collapse into one more scan after it. */
static void request_scan(struct ipc_discovery *d)
{
    if (d->closing) {
        return;
    }
    if (d->scan_busy) {
        d->scan_again = true;
        return;
    }
    int rc;
    if (d->node) {
        d->scan_work.data = d;
        d->walk_started_ms = uv_now(d->loop);
        rc = uv_queue_work(d->loop, &d->scan_work, walk_work, on_walk);
    } else {
        d->scan_req.data = d;
        rc = uv_fs_scandir(d->loop, &d->scan_req, d->dir, 0, on_scan);
    }
    if (rc != 0) {
        log_warn(LOG_CAT, "cannot scan %s: %s", d->dir, agent_strerror(rc));
        d->first_scan_done = true;
        update_ready(d);
        return;
    }
    d->scan_busy = true;
}

/* Names appearing, going, renamed or changing owner; never plain writes (IN_MODIFY). */
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF |            \
     IN_MOVE_SELF | IN_ONLYDIR)

static void on_watch(uv_poll_t *h, int status, int events)
{
    struct ipc_discovery *d = h->data;
    (void)events;
    if (d->closing) {
        return;
    }
    if (status < 0) {
        log_warn(LOG_CAT, "watching %s: %s", d->dir, agent_strerror(status));
        (void)uv_poll_stop(h);
        return;
    }
    bool scan = false;
    char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
        __attribute__((aligned(__alignof__(struct inotify_event))));
    for (int reads = 0; reads < 16; reads++) {
        ssize_t n = read(d->inotify_fd, buf, sizeof(buf));
        if (n <= 0) {
            break; /* EAGAIN: all read */
        }
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;
            p += sizeof(*ev) + ev->len;
            if ((ev->mask & IN_IGNORED) != 0 && d->node) {
                /* its folder went */
                __atomic_store_n(&d->watch_live, d->watch_live > 0 ? d->watch_live - 1 : 0,
                                 __ATOMIC_RELAXED);
                continue;
            }
            if ((ev->mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
                scan = true;
                continue;
            }
            /* /tmp is busy: ignore everything that is not a diagnostic socket. */
            if (ev->len == 0 ||
                strncmp(ev->name, IPC_SOCKNAME_PREFIX, sizeof(IPC_SOCKNAME_PREFIX) - 1) != 0) {
                continue;
            }
            struct sock *s = sock_find(d, ev->name);
            if (s != NULL) {
                s->recheck = true;
            }
            scan = true;
        }
    }
    if (scan && d->node) {
        /* A runtime's socket in a watched folder: walk now, or once NODE_WATCH_GAP_MS have
         * passed since the last walk began (a folder's owner cannot make dotmon walk /proc more
         * often than that by making files). */
        uint64_t now = uv_now(d->loop);
        uint64_t next = d->walk_started_ms + NODE_WATCH_GAP_MS;
        if (next <= now) {
            request_scan(d);
        } else {
            (void)uv_timer_start(&d->rescan_timer, on_rescan_timer, next - now, d->rescan_ms);
        }
    } else if (scan) {
        request_scan(d);
    }
}

static void on_rescan_timer(uv_timer_t *t)
{
    struct ipc_discovery *d = t->data;
    request_scan(d);
    pump(d);
}

static void on_liveness_timer(uv_timer_t *t)
{
    struct ipc_discovery *d = t->data;
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        if (!s->removed && s->state == S_LISTED) {
            s->live_due = true;
        }
    }
    pump(d);
}

/* ---- node mode: walking /proc (docs/ipc.md §6) -------------------------------------------- */

/* A pool job on a sock is over: false when the sock is no longer anyone's concern. */
static bool sock_work_done(struct sock *s, int status)
{
    struct ipc_discovery *d = s->d;
    s->work_busy = false;
    s->ops--;
    d->stats_busy--;
    if (d->closing) {
        maybe_finish_close(d);
        return false;
    }
    if (s->removed || status == UV_ECANCELED) {
        sock_reap(s);
        pump(d);
        return false;
    }
    return true;
}

static int sock_queue(struct sock *s, uv_work_cb work, uv_after_work_cb after)
{
    s->work.data = s;
    int rc = uv_queue_work(s->d->loop, &s->work, work, after);
    if (rc == 0) {
        s->work_busy = true;
        s->ops++;
        s->d->stats_busy++;
    }
    return rc;
}

/* Pool: node mode, is the process still the one the walk saw (its start time). */
static void verify_work(uv_work_t *w)
{
    struct sock *s = w->data;
    uint64_t st = 0;
    s->work_rc = ipc_node_start_time(s->cand.host_pid, &st);
    if (s->work_rc == 0 && st != s->cand.start_time) {
        s->work_rc = AGENT_E_NOTFOUND;
    }
}

/*
 * A probed and verified runtime: its identity is read (on the pool, ipc_identity.h) before it is
 * listed, so that filters, rules and exporters see it from the start; listed at once when
 * identities are off or the read cannot start. Connect mode's check that /proc/<pid> is this
 * runtime (NSpid and the start time its socket's key is) is the identity read's own (host pid 0).
 */
static void sock_identify(struct sock *s)
{
    struct ipc_discovery *d = s->d;
    s->state = S_LISTED;
    s->settled = true;
    if (!d->ident_on || s->proc == NULL) {
        return;
    }
    struct ipc_proclist_entry *e = s->proc;
    sock_ident_cancel(s);
    struct ipc_endpoint ep = ipc_process_endpoint(&e->pub);
    int rc = ipc_identity_read(d->loop, e->pub.pid, e->pub.key, d->node ? s->cand.host_pid : 0,
                               &d->ident_vars, &ep, d->probe_timeout_ms, on_identity, s, &s->ident);
    if (rc == 0) {
        s->state = S_IDENT; /* listed once its identity is known */
        s->settled = false;
    } else {
        log_warn(LOG_CAT, "pid %llu: its identity cannot be read (%s)",
                 (unsigned long long)e->pub.pid, agent_strerror(rc));
    }
}

static void on_verified(uv_work_t *w, int status)
{
    struct sock *s = w->data;
    struct ipc_discovery *d = s->d;
    if (!sock_work_done(s, status)) {
        return;
    }
    s->settled = true;
    if (s->proc == NULL) {
        s->state = S_STALE;
    } else if (s->work_rc != 0) {
        /* The pid's process changed during the probe: whatever answered is not listed here. */
        log_warn(LOG_CAT, "ignoring %s: process %llu changed while it was probed", s->path,
                 (unsigned long long)s->cand.host_pid);
        s->state = S_STALE;
        sock_retire_proc(s);
    } else {
        sock_identify(s);
    }
    publish(d);
    update_ready(d);
    pump(d);
}

/* After a successful probe: node mode checks the process again on the pool before it is
 * listed; then (both modes) its identity is read. */
static void sock_verify(struct sock *s)
{
    if (!s->d->node) {
        sock_identify(s);
        return;
    }
    s->state = S_VERIFY;
    s->settled = false;
    if (sock_queue(s, verify_work, on_verified) != 0) {
        s->settled = true;
        s->state = S_STALE;
        sock_retire_proc(s);
    }
}

/*
 * Pool: node mode watches the folder where a runtime it checked has its socket (the process's
 * TMPDIR beneath its root, opened with no symlink followed, watched through /proc/self/fd), so
 * that the next runtime there (a restart, another process of the container, a folder several
 * share) is walked to at once instead of at the next rescan. The kernel keeps one watch per
 * folder and drops it when the folder's file system goes; at most NODE_WATCH_MAX folders.
 */
static int node_watch_folder(struct ipc_discovery *d, const char *root, const char *tmpdir)
{
    if (d->inotify_fd < 0 || __atomic_load_n(&d->watch_live, __ATOMIC_RELAXED) >= NODE_WATCH_MAX) {
        return -1;
    }
    int fd = -1;
    if (shdir_open_beneath_nolinks(root, tmpdir, O_PATH | O_DIRECTORY, &fd) != 0) {
        return -1;
    }
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(d->inotify_fd, self, IN_CREATE | IN_MOVED_TO | IN_ONLYDIR);
    (void)close(fd);
    return wd;
}

/* Loop: a watch descriptor node_watch_folder got. Descriptors grow: a new folder's is above
 * every earlier one (a folder watched already gets its own back), so the new ones are counted
 * here, where IN_IGNORED (its folder gone) counts them down. */
static void node_watch_count(struct ipc_discovery *d, int wd)
{
    if (wd > d->watch_max_wd) {
        d->watch_max_wd = wd;
        __atomic_store_n(&d->watch_live, d->watch_live + 1, __ATOMIC_RELAXED);
    }
}

/* Pool: node mode's check of a socket (ipc_node_verify), then its stat, taken as every
 * connection will reach it: beneath the process's root, no symlink followed (ipc_endpoint), and
 * whether its owner is trusted (ipc_trust_allows stats /proc/<pid>: not on the loop). d->trust is
 * never written after ipc_discovery_new. */
static void check_work(uv_work_t *w)
{
    struct sock *s = w->data;
    s->work_rc = ipc_node_verify(&s->cand, &s->work_cut);
    char root[64];
    char inner[IPC_NODE_TMPDIR_MAX + IPC_SOCKNAME_MAX + 1];
    snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)s->cand.host_pid);
    int fd = -1;
    if (s->work_rc == 0 &&
        (s->work_rc = ipc_node_sock_path(s->cand.tmpdir, s->cand.name, inner, sizeof(inner))) ==
            0 &&
        (s->work_rc = shdir_open_beneath_nolinks(root, inner, O_PATH, &fd)) == 0) {
        if (fstat(fd, &s->work_st) != 0) {
            s->work_rc = -errno;
        }
        (void)close(fd);
    }
    s->work_trusted =
        s->work_rc == 0 && ipc_trust_allows(&s->d->trust, (uint32_t)s->work_st.st_uid, sock_pid(s));
    s->work_wd = s->work_trusted && !s->folder_watched
                     ? node_watch_folder(s->d, root, s->cand.tmpdir)
                     : -1; /* once per socket: a recheck finds its folder watched already */
}

static void on_checked(uv_work_t *w, int status)
{
    struct sock *s = w->data;
    struct ipc_discovery *d = s->d;
    d->checks_busy--;
    if (status == 0) {
        node_watch_count(d, s->work_wd);
        s->folder_watched = s->folder_watched || s->work_wd >= 0;
    }
    if (!sock_work_done(s, status)) {
        return;
    }
    if (s->work_cut && !d->unix_cut_logged) {
        d->unix_cut_logged = true;
        log_warn(LOG_CAT,
                 "node mode: /proc/%llu/net/unix is longer than %d bytes; sockets listed past "
                 "that are not seen (%s)",
                 (unsigned long long)s->cand.host_pid, IPC_NODE_UNIX_MAX, s->path);
    }
    if (s->work_rc != 0) {
        /* Not (yet) a listening socket of the process: bound but not listening, or a transient
         * error. The walk checks it again later (node_merge) while the process lives. */
        log_debug(LOG_CAT, "%s: not a listening socket of process %llu (%s)", s->path,
                  (unsigned long long)s->cand.host_pid, agent_strerror(s->work_rc));
        s->state = S_STALE;
        s->settled = true;
        publish(d);
        pump(d);
        return;
    }
    const struct stat *st = &s->work_st;
    s->dev = (uint64_t)st->st_dev;
    sock_stat_done(s, 0, S_ISSOCK(st->st_mode), (uint32_t)st->st_uid, st->st_ino,
                   (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec,
                   s->work_trusted ? 1 : 0);
}

/* Starts the node checks that are owed, at most MAX_IN_FLIGHT on the pool at once (a first walk
 * may find thousands of candidates; each check reads net/unix, up to IPC_NODE_UNIX_MAX bytes). */
static void start_checks(struct ipc_discovery *d)
{
    for (struct sock *s = d->socks; s != NULL && d->checks_busy < MAX_IN_FLIGHT; s = s->next) {
        if (!s->check_due || s->removed || s->ops > 0) {
            continue;
        }
        s->check_due = false;
        s->state = S_STAT;
        if (sock_queue(s, check_work, on_checked) != 0) {
            s->state = S_STALE;
            s->settled = true;
            continue;
        }
        d->checks_busy++;
    }
}

#define NODE_PATH_MAX (64 + IPC_NODE_TMPDIR_MAX + IPC_SOCKNAME_MAX)

/* "/proc/<host pid>/root" then the socket's path as the runtime made it (ipc_node_sock_path). */
static int node_path(const struct ipc_node_cand *c, char *out, size_t cap)
{
    int n = snprintf(out, cap, "/proc/%llu/root", (unsigned long long)c->host_pid);
    if (n < 0 || (size_t)n >= cap) {
        return AGENT_E_TOOBIG;
    }
    return ipc_node_sock_path(c->tmpdir, c->name, out + n, cap - (size_t)n);
}

static struct sock *sock_new_node(struct ipc_discovery *d, const struct ipc_node_cand *c)
{
    if (ipc_proclist_reserve(&d->procs, d->nsocks + 1) != 0) {
        return NULL;
    }
    struct sock *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return NULL;
    }
    char path[NODE_PATH_MAX];
    if (node_path(c, path, sizeof(path)) != 0) {
        sock_free(s);
        return NULL;
    }
    s->name = strdup(path);
    s->path = strdup(path);
    if (s->name == NULL || s->path == NULL) {
        sock_free(s);
        return NULL;
    }
    s->d = d;
    s->cand = *c;
    s->pid = c->ns_pid;
    s->key = c->key;
    s->state = S_STAT;
    s->check_due = true; /* started by pump (start_checks) */
    s->next = d->socks;
    d->socks = s;
    d->nsocks++;
    return s;
}

static void walk_work(uv_work_t *w)
{
    struct ipc_discovery *d = w->data;
    ipc_node_walk(&d->walk, (uint64_t)getpid());
}

/* Merges a walk's candidates: new ones are checked, gone ones dropped, reused pids replaced. */
static void node_merge(struct ipc_discovery *d, const struct ipc_node_walk *w)
{
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        s->in_scan = false;
    }
    for (size_t i = 0; i < w->n; i++) {
        const struct ipc_node_cand *c = &w->cands[i];
        char path[NODE_PATH_MAX];
        if (node_path(c, path, sizeof(path)) != 0) {
            continue;
        }
        struct sock *s = sock_find(d, path);
        if (s != NULL && s->cand.start_time != c->start_time) {
            /* Another process has the pid now (and a socket of the same name). */
            sock_remove(s);
            s = NULL;
        }
        if (s == NULL && (s = sock_new_node(d, c)) == NULL) {
            log_warn(LOG_CAT, "out of memory tracking %s", path);
            continue;
        }
        uint64_t now = uv_now(d->loop);
        if (s->state == S_STALE && !s->removed && s->ops == 0 && !s->check_due &&
            s->recheck_at <= now) {
            /* The same process, its socket not (yet) usable when last looked at: a runtime seen
             * between bind() and listen(), a transient error (EMFILE), refused connects. Checked
             * again for as long as the process lives: at once the first time, then after the
             * rescan period, doubled each time up to DiscoveryRetryMax, until a probe succeeds. */
            s->check_fails++;
            s->recheck_at = now + backoff_ms(d, s->check_fails);
            s->refusals = 0;
            s->failures = 0;
            s->check_due = true;
        }
        s->in_scan = true;
    }
    for (struct sock *s = d->socks, *next; s != NULL; s = next) {
        next = s->next;
        if (!s->removed && !s->in_scan) {
            sock_remove(s);
        }
    }
}

#define CUT_LOG_MS (10u * 60u * 1000u) /* a walk cut short the same way is logged this often */

/* A walk that a cap cut short: logged when the reason is new, then every CUT_LOG_MS at most. */
static void log_walk_cut(struct ipc_discovery *d, unsigned cut)
{
    uint64_t now = uv_now(d->loop);
    if (cut == 0 || ((cut & ~d->cut_logged) == 0 && d->cut_logged_at != 0 &&
                     now - d->cut_logged_at < CUT_LOG_MS)) {
        return;
    }
    d->cut_logged = cut;
    d->cut_logged_at = now == 0 ? 1 : now;
    log_warn(LOG_CAT,
             "node mode: the walk of /proc was cut short by its caps (at most %d processes, %d "
             "folders, %d socket names per folder and candidates per walk):%s%s%s%s; runtimes past "
             "the cut are not seen",
             IPC_NODE_MAX_PIDS, IPC_NODE_MAX_DIRS, IPC_NODE_MAX_CANDS,
             (cut & IPC_NODE_CUT_PIDS) != 0 ? " processes" : "",
             (cut & IPC_NODE_CUT_DIRS) != 0 ? " folders" : "",
             (cut & IPC_NODE_CUT_NAMES) != 0 ? " names" : "",
             (cut & IPC_NODE_CUT_CANDS) != 0 ? " candidates" : "");
}

static void on_walk(uv_work_t *w, int status)
{
    struct ipc_discovery *d = w->data;
    d->scan_busy = false;
    struct ipc_node_walk walk = d->walk;
    memset(&d->walk, 0, sizeof(d->walk));
    if (d->closing || status != 0) {
        free(walk.cands);
        maybe_finish_close(d);
        return;
    }
    if (walk.rc != 0) {
        log_warn(LOG_CAT, "cannot walk /proc: %s", agent_strerror(walk.rc));
    } else {
        d->node_looked = walk.looked;
        d->node_denied = walk.denied;
        if (walk.denied > 0 && !d->denied_logged) {
            d->denied_logged = true;
            log_error(LOG_CAT,
                      "node mode: the root of %zu of %zu processes cannot be read (permission "
                      "denied): their .NET runtimes are not seen. Reading /proc/<pid>/root of "
                      "another user's process needs CAP_SYS_PTRACE, and connecting to a runtime's "
                      "socket (mode 0600) of another user needs CAP_DAC_OVERRIDE or that user's "
                      "uid (DiagnosticPort:TrustedUids lists whose runtimes are used)",
                      walk.denied, walk.looked);
        }
        log_walk_cut(d, walk.cut);
        node_merge(d, &walk);
    }
    free(walk.cands);
    d->first_scan_done = true;
    publish(d);
    update_ready(d);
    pump(d);
    if (d->scan_again && !d->closing) {
        d->scan_again = false;
        request_scan(d);
    }
}

/* ---- public API -------------------------------------------------------------------------- */

bool ipc_trust_allows(const struct ipc_trust *t, uint32_t uid, uint64_t pid)
{
    if (uid == (uint32_t)geteuid()) {
        return true;
    }
    for (size_t i = 0; i < t->nuids && i < IPC_TRUST_MAX_UIDS; i++) {
        if (t->uids[i] == uid) {
            return true;
        }
    }
    if (pid == 0 || t->no_proc_owner) {
        return false;
    }
    /* The process the socket names, when it is visible here and runs as that user. procfs
     * answers from memory: this never blocks. */
    char path[48];
    snprintf(path, sizeof(path), "/proc/%llu", (unsigned long long)pid);
    struct stat st;
    return stat(path, &st) == 0 && st.st_uid == uid;
}

int ipc_discovery_new(uv_loop_t *loop, const struct ipc_discovery_config *cfg,
                      ipc_discovery_change_cb on_change, void *ud, struct ipc_discovery **out)
{
    bool listen = cfg != NULL && cfg->listen != NULL;
    bool node = cfg != NULL && cfg->node && !listen;
    if (loop == NULL || cfg == NULL || out == NULL ||
        (!listen && !node && (cfg->dir == NULL || cfg->dir[0] == '\0'))) {
        return AGENT_E_INVAL;
    }
    struct ipc_discovery *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return UV_ENOMEM;
    }
    const char *dir = cfg->dir != NULL && cfg->dir[0] != '\0' ? cfg->dir : "/";
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') {
        dl--; /* "/tmp/" and "/tmp" name the same sockets */
    }
    d->dir = strndup(dir, dl);
    if (d->dir == NULL) {
        free(d);
        return UV_ENOMEM;
    }
    if (listen) {
        struct ipc_listen_config lc = *cfg->listen;
        lc.trust = cfg->trust;
        int rc = ipc_listen_new(loop, &lc, on_change, ud, &d->lst);
        if (rc != 0) {
            free(d->dir);
            free(d);
            return rc;
        }
        d->lst_open = true;
    }
    d->loop = loop;
    d->node = node;
    d->trust = cfg->trust;
    if (cfg->identity != NULL && !listen) {
        d->ident_vars = *cfg->identity;
        d->ident_on = true;
    }
    d->probe_timeout_ms = cfg->probe_timeout_ms ? cfg->probe_timeout_ms : 3000;
    d->rescan_ms = cfg->rescan_ms ? cfg->rescan_ms : 5000;
    d->liveness_ms = cfg->liveness_ms ? cfg->liveness_ms : 1000;
    d->retry_max_ms = cfg->retry_max_ms ? cfg->retry_max_ms : 60000;
    ipc_proclist_init(&d->procs, on_change, ud);
    /* None of these inits can fail on Unix; from here on close() must run to release them. */
    d->inotify_fd = -1;
    (void)uv_timer_init(loop, &d->rescan_timer);
    (void)uv_timer_init(loop, &d->live_timer);
    (void)uv_timer_init(loop, &d->wake_timer);
    d->watch.data = NULL;
    d->rescan_timer.data = d;
    d->live_timer.data = d;
    d->wake_timer.data = d;
    d->open_handles = 3;
    *out = d;
    return 0;
}

int ipc_discovery_start(struct ipc_discovery *d)
{
    if (d == NULL || d->started || d->closing) {
        return AGENT_E_INVAL;
    }
    d->started = true;
    if (d->lst != NULL) {
        return ipc_listen_start(d->lst); /* the directory is not watched in listen mode */
    }
    int rc = 0;
    if (d->node) {
        /* New processes make no file event in a folder known beforehand: the rescan walks; the
         * folders of runtimes already checked are watched (node_watch_folder). */
        d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (d->inotify_fd >= 0 && uv_poll_init(d->loop, &d->watch, d->inotify_fd) == 0) {
            d->watch.data = d;
            d->open_handles++;
            (void)uv_poll_start(&d->watch, UV_READABLE, on_watch);
        } else if (d->inotify_fd >= 0) {
            (void)close(d->inotify_fd);
            d->inotify_fd = -1;
        }
        (void)uv_timer_start(&d->rescan_timer, on_rescan_timer, d->rescan_ms, d->rescan_ms);
        (void)uv_timer_start(&d->live_timer, on_liveness_timer, d->liveness_ms, d->liveness_ms);
        request_scan(d);
        return 0;
    }
    d->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (d->inotify_fd < 0 || inotify_add_watch(d->inotify_fd, d->dir, WATCH_MASK) < 0) {
        rc = -errno;
    } else if ((rc = uv_poll_init(d->loop, &d->watch, d->inotify_fd)) == 0) {
        d->watch.data = d;
        d->open_handles++;
        rc = uv_poll_start(&d->watch, UV_READABLE, on_watch);
    }
    if (rc != 0 && d->watch.data == NULL && d->inotify_fd >= 0) {
        (void)close(d->inotify_fd);
        d->inotify_fd = -1;
    }
    if (rc != 0) {
        log_warn(LOG_CAT, "cannot watch %s (%s); relying on the %llu ms rescan", d->dir,
                 agent_strerror(rc), (unsigned long long)d->rescan_ms);
    }
    (void)uv_timer_start(&d->rescan_timer, on_rescan_timer, d->rescan_ms, d->rescan_ms);
    (void)uv_timer_start(&d->live_timer, on_liveness_timer, d->liveness_ms, d->liveness_ms);
    request_scan(d);
    return 0;
}

bool ipc_discovery_ready(const struct ipc_discovery *d)
{
    if (d->lst != NULL) {
        return ipc_listen_ready(d->lst);
    }
    return d->ready;
}

bool ipc_discovery_listening(const struct ipc_discovery *d)
{
    return d->lst != NULL;
}

void ipc_discovery_node_stats(const struct ipc_discovery *d, size_t *looked, size_t *denied)
{
    *looked = d->node ? d->node_looked : 0;
    *denied = d->node ? d->node_denied : 0;
}

size_t ipc_discovery_count(const struct ipc_discovery *d)
{
    if (d->lst != NULL) {
        return ipc_listen_count(d->lst);
    }
    return ipc_proclist_count(&d->procs);
}

const struct ipc_process *ipc_discovery_at(const struct ipc_discovery *d, size_t i)
{
    if (d->lst != NULL) {
        return ipc_listen_at(d->lst, i);
    }
    return ipc_proclist_at(&d->procs, i);
}

int ipc_discovery_resume(struct ipc_discovery *d, const char *uid)
{
    return d->lst != NULL ? ipc_listen_resume(d->lst, uid) : 0;
}

void ipc_discovery_set_hold(struct ipc_discovery *d, bool hold)
{
    if (d->lst != NULL) {
        ipc_listen_set_hold(d->lst, hold);
    }
}

void ipc_discovery_set_update_cb(struct ipc_discovery *d, ipc_discovery_change_cb cb, void *ud)
{
    d->on_update = cb;
    d->update_ud = ud;
}

/* Adds delta to a listed runtime's busy or watched count, which never goes below 0. */
static int add_count(struct ipc_discovery *d, const char *uid, int delta, bool watched)
{
    struct ipc_process *p = ipc_proclist_find_uid(&d->procs, uid);
    if (p == NULL) {
        return AGENT_E_NOTFOUND;
    }
    int *n = watched ? &p->watched : &p->busy;
    *n = *n + delta > 0 ? *n + delta : 0;
    return 0;
}

int ipc_discovery_busy(struct ipc_discovery *d, const char *uid, int delta)
{
    return d->lst != NULL ? ipc_listen_busy(d->lst, uid, delta) : add_count(d, uid, delta, false);
}

int ipc_discovery_watch(struct ipc_discovery *d, const char *uid, int delta)
{
    /* Listen mode: nothing to do, the runtime's own connections tell its life. */
    return d->lst != NULL ? 0 : add_count(d, uid, delta, true);
}

/* Frees everything once every handle, fs request and exchange has reported back. */
static void maybe_finish_close(struct ipc_discovery *d)
{
    if (!d->closing || d->open_handles > 0 || d->scan_busy || d->stats_busy > 0 ||
        d->in_flight > 0 || d->lst_open) {
        return;
    }
    while (d->socks != NULL) {
        struct sock *s = d->socks;
        d->socks = s->next;
        sock_free(s);
    }
    void (*cb)(void *) = d->close_cb;
    void *ud = d->close_ud;
    if (d->inotify_fd >= 0) {
        (void)close(d->inotify_fd); /* its poll handle is closed by now */
    }
    ipc_proclist_fini(&d->procs);
    free(d->dir);
    free(d);
    if (cb != NULL) {
        cb(ud);
    }
}

static void on_handle_close(uv_handle_t *h)
{
    struct ipc_discovery *d = h->data;
    d->open_handles--;
    maybe_finish_close(d);
}

static void on_listen_closed(void *ud)
{
    struct ipc_discovery *d = ud;
    d->lst_open = false;
    d->lst = NULL;
    maybe_finish_close(d);
}

void ipc_discovery_close(struct ipc_discovery *d, void (*cb)(void *ud), void *ud)
{
    if (d == NULL || d->closing) {
        return;
    }
    d->closing = true;
    ipc_proclist_mute(&d->procs);
    d->close_cb = cb;
    d->close_ud = ud;
    if (d->lst != NULL) {
        ipc_listen_close(d->lst, on_listen_closed, d);
    }
    if (d->watch.data != NULL) {
        uv_close((uv_handle_t *)&d->watch, on_handle_close); /* the fd is closed after it */
    }
    uv_close((uv_handle_t *)&d->rescan_timer, on_handle_close);
    uv_close((uv_handle_t *)&d->live_timer, on_handle_close);
    uv_close((uv_handle_t *)&d->wake_timer, on_handle_close);
    if (d->scan_busy) {
        (void)uv_cancel(d->node ? (uv_req_t *)&d->scan_work : (uv_req_t *)&d->scan_req);
    }
    for (struct sock *s = d->socks; s != NULL; s = s->next) {
        sock_ident_cancel(s);
        if (s->x != NULL) {
            ipc__probe_abort(s->x);
        } else if (s->work_busy) {
            (void)uv_cancel((uv_req_t *)&s->work);
        } else if (s->ops > 0) {
            (void)uv_cancel((uv_req_t *)&s->stat_req);
        }
    }
}
