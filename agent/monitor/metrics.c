/* SPDX-License-Identifier: MIT */
/* Continuous metrics sessions, one per discovered runtime; see metrics.h. */
#include "metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "api.h"
#include "config.h"
#include "err.h"
#include "ev_prom.h"
#include "ev_ring.h"
#include "ev_store.h"
#include "log.h"
#include "membudget.h"
#include "metrics_pace.h"
#include "metrics_session.h"
#include "ring_registry.h"

static const char cat[] = "dotmon.metrics";

/* Each process's series may hold 1/SHARE_DIV of dotmon's memory budget (at least SHARE_MIN), or
 * SHARE_UNLIMITED when there is no budget: one runtime cannot take the memory of the others. */
#define SHARE_DIV       8u
#define SHARE_MIN       (1024u * 1024u)
#define SHARE_UNLIMITED (8u * 1024u * 1024u)

enum mproc_state { MP_STARTING, MP_RUNNING, MP_WAITING };

/* One process: its session (restarted as needed) and its store. */
struct mproc {
    struct mproc *next;
    struct metrics *m;
    uint64_t pid;
    char uid[37];
    char *name;
    struct ipc_identity id; /* who it is: its series' pod, namespace, container labels */
    int major;              /* runtime major version; 0 unknown */
    struct ipc_endpoint ep;
    struct msession *sess;
    struct ev_store *store;
    uv_timer_t timer; /* restart delay (WAITING) */
    enum mproc_state state;
    char reason[256];
    uint64_t backoff_ms;
    bool restarting;       /* a staleness restart is under way */
    bool watching;         /* marked watched in discovery (mproc_watch) */
    bool full_said;        /* the store's series limit was logged */
    bool budget_said;      /* the store's share of the memory budget was logged full */
    struct mb_share share; /* the store's series are charged here (metrics_share_cap) */
    char share_what[48];
};

struct metrics {
    struct agent *a;
    struct metrics_filters f;
    bool all_processes;
    bool served; /* Metrics:Enabled: /metrics shows the stores (else the samples only go to hook) */
    bool exported; /* the exporter wants every process's samples (metrics_new) */
    /* metrics_export_meters added meters for the exporter only: /metrics keeps what served_f
     * (the settings' filters, a shallow view of f's first entries) wants. */
    bool export_only;
    struct metrics_filters served_f;
    metrics_sample_hook hook;
    void *hook_ud;
    struct mproc *procs;
    size_t closing; /* handles closing (mprocs' timers, check) */
    bool closed;    /* metrics_close was called: free when closing reaches 0 */
    /* Every process's staleness check on one tick (a timer per process would wake the loop once
     * per process and interval on its own). */
    uv_timer_t check;
    /* The rendered runtimes' families (metrics_text_get), NULL until first asked; one reference
     * is metrics'. pace says when it is rendered again (metrics_pace.h), render_timer renders it
     * in the background while scrapes keep coming. gen counts the changes; a text found too big
     * at gen is not tried again before the next change. */
    struct metrics_text *text;
    struct metrics_pace pace;
    uv_timer_t render_timer;
    uint64_t gen;
    bool too_big;
    uint64_t too_big_gen;
    uint64_t renders;   /* texts rendered */
    uint64_t render_ns; /* time they took */
};

/* A shared rendering: refs references, len bytes of text, charged to the memory budget. */
struct metrics_text {
    size_t refs;
    size_t len;
    char data[];
};

static void mproc_start(struct mproc *mp);

void metrics_text_release(struct metrics_text *t)
{
    if (t != NULL && --t->refs == 0) {
        mb_release(NULL, sizeof(*t) + t->len);
        free(t);
    }
}

static void metrics_on_render_timer(uv_timer_t *t);

/* Arms the render timer when pace says so. */
static void pace_do(struct metrics *m, enum metrics_pace_do what)
{
    if (what == METRICS_PACE_ARM) {
        uint64_t now = uv_now(m->a->loop);
        uv_timer_start(&m->render_timer, metrics_on_render_timer,
                       m->pace.due > now ? m->pace.due - now : 0, 0);
    }
}

/* What the runtimes' families show has changed: the shared text is out of date (it is kept, and
 * rendered again as metrics_pace says). */
static void metrics_changed(struct metrics *m)
{
    m->gen++;
    if (!m->closed) {
        pace_do(m, metrics_pace_changed(&m->pace, uv_now(m->a->loop)));
    }
}

uint64_t metrics_share_cap(void)
{
    uint64_t total = membudget_total();
    if (total == 0) {
        return SHARE_UNLIMITED;
    }
    return total / SHARE_DIV > SHARE_MIN ? total / SHARE_DIV : SHARE_MIN;
}

uint64_t metrics_series_dropped(struct metrics *m, const char *uid)
{
    for (struct mproc *mp = m != NULL ? m->procs : NULL; mp != NULL; mp = mp->next) {
        if (strcmp(mp->uid, uid) == 0) {
            return ev_store_dropped(mp->store);
        }
    }
    return 0;
}

static void set_reason(struct mproc *mp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void set_reason(struct mproc *mp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(mp->reason, sizeof(mp->reason), fmt, ap);
    va_end(ap);
}

/*
 * From its session's first sample to its end, the process is marked watched in discovery: its
 * managed code runs and the stream's end tells its exit, so discovery's liveness ProcessInfo (a
 * connection a second, most of the CPU of an idle process's metrics) stops once the command line
 * is settled (ipc_discovery_watch says when), and goes on whenever no session runs.
 */
static void mproc_watch(struct mproc *mp, bool on)
{
    if (on != mp->watching) {
        int rc = ipc_discovery_watch(mp->m->a->disc, mp->uid, on ? 1 : -1);
        mp->watching = on && rc == 0;
    }
}

static void mproc_on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct mproc *mp = ud;
    mproc_watch(mp, true);
    if (mp->m->hook != NULL) {
        mp->m->hook(mp->m->hook_ud, mp->uid, s);
    }
    if (!mp->m->served || (mp->m->export_only && !metrics_filters_want(&mp->m->served_f, s))) {
        return; /* for the exporter only: nothing is stored that /metrics would not show */
    }
    int rc = ev_store_add(mp->store, s);
    if (rc == 0) {
        metrics_changed(mp->m);
    }
    if (rc == AGENT_E_TOOBIG && !mp->full_said) {
        mp->full_said = true;
        log_warn(cat,
                 "metrics of %" PRIu64 ": %zu series kept; new series (here %.80s %.80s) are "
                 "left out and counted in dotmon_metrics_series_dropped_total (too many tag "
                 "combinations?)",
                 mp->pid, ev_store_series(mp->store), s->provider, s->name);
    } else if (rc == AGENT_E_BUDGET && !mp->budget_said) {
        mp->budget_said = true;
        log_warn(cat,
                 "metrics of %" PRIu64 ": its %zu series fill its share of dotmon's memory "
                 "budget (%" PRIu64 " KiB); new series (here %.80s %.80s) are left out and "
                 "counted in dotmon_metrics_series_dropped_total (raise Memory:LimitMB?)",
                 mp->pid, ev_store_series(mp->store), mp->share.cap / 1024, s->provider, s->name);
    } else if (rc != 0 && rc != AGENT_E_TOOBIG && rc != AGENT_E_BUDGET) {
        log_warn(cat, "metrics of %" PRIu64 ": %s", mp->pid, agent_strerror(rc));
    }
}

static void mproc_on_warning(void *ud, const char *kind, const char *message)
{
    struct mproc *mp = ud;
    log_warn(cat, "metrics of %" PRIu64 " (uid %s): System.Diagnostics.Metrics says %s: %s",
             mp->pid, mp->uid, kind, message);
    if (strncmp(kind, "MultipleSessions", 16) == 0) {
        set_reason(mp,
                   "meters refused: %s (another tool runs a metrics session with other "
                   "settings); EventCounters still flow",
                   kind);
    }
}

static void mproc_on_started(void *ud)
{
    struct mproc *mp = ud;
    mp->state = MP_RUNNING;
    mp->backoff_ms = 0;
    mp->reason[0] = '\0';
    /* Running, but say what this runtime cannot give. */
    if (mp->major > 0 && mp->major < 6) {
        set_reason(mp, ".NET %d: EventCounters only (meters need .NET 6+)", mp->major);
    } else if (mp->major > 0 && mp->major < 9 && mp->m->f.runtime_meter) {
        set_reason(mp, ".NET %d: no System.Runtime meter (it came with .NET 9)", mp->major);
    }
}

static void mproc_on_timer(uv_timer_t *t);

static void mproc_wait(struct mproc *mp, uint64_t delay_ms)
{
    mp->state = MP_WAITING;
    uv_timer_stop(&mp->timer);
    uv_timer_start(&mp->timer, mproc_on_timer, delay_ms, 0);
}

static void mproc_on_end(void *ud, int status, const char *reason)
{
    struct mproc *mp = ud;
    mp->sess = NULL;
    mproc_watch(mp, false);
    bool restart = mp->restarting && status == 0;
    mp->restarting = false;
    if (restart) { /* our own restart, and the session ended as asked: start again at once */
        mproc_wait(mp, 0);
        return;
    }
    set_reason(mp, "%s", reason);
    mp->backoff_ms = timeouts_backoff_next(&mp->m->a->timeouts, mp->backoff_ms);
    if (status == AGENT_E_PROTO) {
        mp->backoff_ms = agent_timeout(mp->m->a, TIMEOUT_BACKOFF_MAX);
    }
    log_info(cat, "metrics of %" PRIu64 " (uid %s): %s; next try in %" PRIu64 " ms", mp->pid,
             mp->uid, reason, mp->backoff_ms);
    mproc_wait(mp, mp->backoff_ms);
}

static const struct msession_callbacks mproc_callbacks = {.on_started = mproc_on_started,
                                                          .on_sample = mproc_on_sample,
                                                          .on_warning = mproc_on_warning,
                                                          .on_end = mproc_on_end};

static void mproc_on_timer(uv_timer_t *t)
{
    struct mproc *mp = t->data;
    if (mp->state == MP_WAITING) {
        mproc_start(mp);
    }
}

/* EventCounters that stop ticking: another session's Disable of the same EventSource stops its
 * timer for every session (docs/events.md §2.1). Restart the session to turn them on again. */
static void mproc_check_stale(struct mproc *mp, uint64_t interval, uint64_t now)
{
    if (mp->state != MP_RUNNING || interval == 0 || mp->sess == NULL || mp->restarting ||
        !msession_counters_seen(mp->sess)) {
        return;
    }
    uint64_t since = now - msession_last_counter_ms(mp->sess);
    if (since > 3 * interval + 5000) {
        log_info(cat,
                 "metrics of %" PRIu64 ": no EventCounters for %" PRIu64
                 " ms (another session may have disabled them); restarting the session",
                 mp->pid, since);
        set_reason(mp, "EventCounters stopped; session restarting");
        mp->restarting = true;
        msession_stop(mp->sess);
    }
}

static void metrics_on_check(uv_timer_t *t)
{
    struct metrics *m = t->data;
    uint64_t interval = metrics_filters_counter_interval_ms(&m->f);
    uint64_t now = uv_now(m->a->loop);
    for (struct mproc *mp = m->procs; mp != NULL; mp = mp->next) {
        mproc_check_stale(mp, interval, now);
    }
}

static void mproc_start(struct mproc *mp)
{
    struct metrics *m = mp->m;
    int rc = 0;
    if (mp->store == NULL) {
        struct ev_store_options o = {.default_interval = m->f.interval_s, .share = &mp->share};
        rc = ev_store_new(&mp->store, &o);
    }
    rc = rc ? rc : msession_start(m->a, &mp->ep, mp->major, &m->f, &mproc_callbacks, mp, &mp->sess);
    if (rc != 0) {
        set_reason(mp, "cannot start a session: %s", agent_strerror(rc));
        log_info(cat, "metrics of %" PRIu64 " (uid %s): %s", mp->pid, mp->uid, mp->reason);
        mproc_wait(mp, agent_timeout(m->a, TIMEOUT_BACKOFF_MAX));
        return;
    }
    mp->state = MP_STARTING;
    set_reason(mp, "session starting");
    uv_timer_stop(&mp->timer);
}

/* One handle less closing: m goes once closed and none is left. */
static void metrics_closed_one(struct metrics *m)
{
    m->closing--;
    if (m->closed && m->closing == 0) {
        metrics_filters_fini(&m->f);
        free(m);
    }
}

static void mproc_on_closed(uv_handle_t *h)
{
    struct mproc *mp = h->data;
    struct metrics *m = mp->m;
    ev_store_free(mp->store);
    mb_share_fini(&mp->share);
    ipc_endpoint_fini(&mp->ep);
    free(mp->name);
    free(mp);
    metrics_closed_one(m);
}

static void metrics_on_handle_closed(uv_handle_t *h)
{
    metrics_closed_one(h->data);
}

/* Unlinks mp, abandons its session, and frees it once its timer has closed. */
static void mproc_remove(struct mproc *mp)
{
    struct metrics *m = mp->m;
    for (struct mproc **pp = &m->procs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == mp) {
            *pp = mp->next;
            break;
        }
    }
    if (mp->sess != NULL) {
        msession_abort(mp->sess);
        mp->sess = NULL;
    }
    mproc_watch(mp, false);
    m->closing++;
    uv_close((uv_handle_t *)&mp->timer, mproc_on_closed);
}

void metrics_on_process(struct metrics *m, const struct ipc_process *p, bool added)
{
    if (m == NULL || m->closed) {
        return;
    }
    metrics_changed(m);
    if (!added) {
        for (struct mproc *mp = m->procs; mp != NULL; mp = mp->next) {
            if (strcmp(mp->uid, p->uid) == 0) {
                mproc_remove(mp);
                return;
            }
        }
        return;
    }
    /* The default process only, with DefaultProcess:Filters to say which: no session for the
     * others. (Without filters the default is "the only process", which changes as processes
     * come and go: every process keeps its session and /metrics picks at render time.) */
    if (!m->exported && !m->all_processes && m->a->nfilters > 0 && !api_is_default(m->a, p)) {
        return;
    }
    struct mproc *mp = calloc(1, sizeof(*mp));
    if (mp == NULL) {
        log_warn(cat, "no memory for the metrics of process %" PRIu64, p->pid);
        return;
    }
    mp->m = m;
    mp->pid = p->pid;
    memcpy(mp->uid, p->uid, sizeof(mp->uid));
    mp->id = p->identity;
    mp->name = strdup(p->name != NULL ? p->name : "");
    mp->major = ipc_runtime_major(p->clr_version);
    snprintf(mp->share_what, sizeof(mp->share_what), "metrics of process %" PRIu64, p->pid);
    mb_share_init(&mp->share, mp->share_what, metrics_share_cap());
    if (mp->name == NULL || ipc_endpoint_copy(&mp->ep, &p->ep) != 0) {
        ipc_endpoint_fini(&mp->ep);
        free(mp->name);
        free(mp);
        log_warn(cat, "no memory for the metrics of process %" PRIu64, p->pid);
        return;
    }
    uv_timer_init(m->a->loop, &mp->timer);
    mp->timer.data = mp;
    uv_unref((uv_handle_t *)&mp->timer);
    mp->next = m->procs;
    m->procs = mp;
    mproc_start(mp);
}

int metrics_new(struct agent *a, bool exported, struct metrics **out)
{
    *out = NULL;
    if (!a->metrics_enabled && !exported) {
        return 0;
    }
    int all = config_get_bool(a->cfg, "Metrics:AllProcesses", 1);
    if (all < 0) {
        log_error(cat, "Metrics:AllProcesses takes true or false");
        return AGENT_E_INVAL;
    }
    struct metrics *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return UV_ENOMEM;
    }
    m->a = a;
    m->all_processes = all == 1;
    m->served = a->metrics_enabled;
    m->exported = exported;
    int rc = metrics_filters_from_config(&m->f, a->cfg, a->metrics_interval_sec);
    if (rc != 0) {
        free(m);
        return rc;
    }
    uint64_t every = metrics_filters_counter_interval_ms(&m->f);
    every = every == 0 ? 5000 : every;
    uv_timer_init(a->loop, &m->check);
    m->check.data = m;
    uv_unref((uv_handle_t *)&m->check);
    uv_timer_start(&m->check, metrics_on_check, every, every);
    metrics_pace_init(&m->pace, agent_timeout(a, TIMEOUT_METRICS_RENDER));
    uv_timer_init(a->loop, &m->render_timer);
    m->render_timer.data = m;
    uv_unref((uv_handle_t *)&m->render_timer);
    *out = m;
    return 0;
}

void metrics_set_hook(struct metrics *m, metrics_sample_hook hook, void *ud)
{
    if (m != NULL) {
        m->hook = hook;
        m->hook_ud = ud;
    }
}

void metrics_export_exp_histograms(struct metrics *m, bool on)
{
    if (m != NULL) {
        m->f.exp_histograms = on;
    }
}

/* Whether f has a meter named name (case-insensitively, as metrics_filters_want matches). */
static bool has_meter(const struct metrics_filters *f, const char *name, size_t len)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].meter && strlen(f->v[i].name) == len &&
            strncasecmp(f->v[i].name, name, len) == 0) {
            return true;
        }
    }
    return false;
}

int metrics_export_meters(struct metrics *m, const char *meters)
{
    if (m == NULL || meters == NULL || m->procs != NULL) {
        return m != NULL && m->procs != NULL ? AGENT_E_INVAL : 0;
    }
    for (const char *p = meters; *p != '\0';) {
        const char *end = strchr(p, ';');
        size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *name = p;
        p += len + (end != NULL ? 1 : 0);
        while (len > 0 && (*name == ' ' || *name == '\t')) {
            name++;
            len--;
        }
        while (len > 0 && (name[len - 1] == ' ' || name[len - 1] == '\t')) {
            len--;
        }
        if (len == 0 || has_meter(&m->f, name, len)) {
            continue; /* a meter the settings name keeps their instrument list */
        }
        if (m->f.n == METRICS_MAX_FILTERS) {
            log_warn(cat,
                     "more than %d meters and providers: %.*s and later meters are not "
                     "exported",
                     METRICS_MAX_FILTERS, (int)len, name);
            return AGENT_E_TOOBIG;
        }
        if (!m->export_only) {
            m->served_f = m->f; /* a view: the entries are f's, freed with it */
            m->export_only = true;
        }
        char *copy = strndup(name, len);
        if (copy == NULL) {
            return -ENOMEM;
        }
        m->f.v[m->f.n++] = (struct metrics_filter){.name = copy, .meter = true};
    }
    return 0;
}

void metrics_close(struct metrics *m)
{
    if (m == NULL || m->closed) {
        return;
    }
    m->closed = true;
    metrics_changed(m);
    metrics_text_release(m->text);
    m->text = NULL;
    while (m->procs != NULL) {
        mproc_remove(m->procs);
    }
    m->closing += 2;
    uv_close((uv_handle_t *)&m->check, metrics_on_handle_closed);
    uv_close((uv_handle_t *)&m->render_timer, metrics_on_handle_closed);
}

struct cJSON *metrics_status_json(struct metrics *m)
{
    static const char *const states[] = {"starting", "running", "waiting"};
    cJSON *arr = cJSON_CreateArray();
    for (struct mproc *mp = m != NULL && m->served ? m->procs : NULL; arr != NULL && mp != NULL;
         mp = mp->next) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL) {
            break;
        }
        cJSON_AddNumberToObject(o, "pid", (double)mp->pid);
        cJSON_AddStringToObject(o, "uid", mp->uid);
        cJSON_AddStringToObject(o, "name", mp->name);
        cJSON_AddStringToObject(o, "state", states[mp->state]);
        if (mp->reason[0] != '\0') {
            cJSON_AddStringToObject(o, "reason", mp->reason);
        } else {
            cJSON_AddNullToObject(o, "reason");
        }
        cJSON_AddNumberToObject(o, "series", (double)ev_store_series(mp->store));
        cJSON_AddNumberToObject(o, "seriesDropped", (double)ev_store_dropped(mp->store));
        cJSON_AddNumberToObject(o, "bytes", (double)ev_store_bytes(mp->store));
        cJSON_AddNumberToObject(o, "bytesCap", (double)mp->share.cap);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}

/* ---- /metrics ---- */

static bool shown(struct metrics *m, const struct mproc *mp)
{
    if (m->all_processes) {
        return true;
    }
    size_t n = ipc_discovery_count(m->a->disc);
    for (size_t i = 0; i < n; i++) {
        const struct ipc_process *p = ipc_discovery_at(m->a->disc, i);
        if (strcmp(p->uid, mp->uid) == 0) {
            return api_is_default(m->a, p);
        }
    }
    return false;
}

static uint64_t proc_up(const struct mproc *mp)
{
    return mp->state == MP_RUNNING ? 1 : 0;
}

static uint64_t proc_dropped(const struct mproc *mp)
{
    return ev_store_dropped(mp->store);
}

/*
 * The labels of a process's lines: pid, uid, name, then (issue 34) pod, namespace, container
 * (its name) and container_id where known. keys and values get PROC_LABELS_MAX entries; the
 * count is returned. pid: the pid's text (the caller's storage).
 */
#define PROC_LABELS_MAX 7
static size_t proc_labels(const struct mproc *mp, const char *pid, const char **keys,
                          const char **values)
{
    const struct {
        const char *key;
        const char *value;
    } all[PROC_LABELS_MAX] = {{"pid", pid},
                              {"uid", mp->uid},
                              {"name", mp->name},
                              {"pod", mp->id.pod_name},
                              {"namespace", mp->id.pod_namespace},
                              {"container", mp->id.container_name},
                              {"container_id", mp->id.container_id}};
    size_t n = 0;
    for (size_t i = 0; i < PROC_LABELS_MAX; i++) {
        if (i < 3 || all[i].value[0] != '\0') {
            keys[n] = all[i].key;
            values[n++] = all[i].value;
        }
    }
    return n;
}

/*
 * dotmon's own per-process families, one line per shown process in each, labelled pid, uid,
 * name, its identity where known (proc_labels) and reason where said. A new per-process figure (the
 * memory budget's dropped series, say) is one more row here: its family stays whole and written
 * once, before the runtimes' own.
 */
static const struct proc_family {
    const char *name;
    const char *type;
    const char *help;
    bool reason; /* the line also carries reason="..." (mproc.reason) */
    uint64_t (*value)(const struct mproc *mp);
} proc_families[] = {
    {"dotmon_process_metrics_up", "gauge",
     "Whether dotmon receives metrics from the process (1), or not (0, and the reason)", true,
     proc_up},
    {"dotmon_metrics_series_dropped_total", "counter",
     "New series of the process left out (its share of the memory budget or 1024 series full)",
     false, proc_dropped},
};

int metrics_render_own(struct metrics *m, struct buf *out)
{
    int rc = 0;
    if (m == NULL || !m->served) { /* metrics off: no process, no family */
        return 0;
    }
    for (size_t f = 0; rc == 0 && f < sizeof(proc_families) / sizeof(proc_families[0]); f++) {
        const struct proc_family *pf = &proc_families[f];
        rc = ev_prom_family(out, pf->name, pf->type, pf->help);
        for (struct mproc *mp = m != NULL ? m->procs : NULL; rc == 0 && mp != NULL; mp = mp->next) {
            if (!shown(m, mp)) {
                continue;
            }
            char pid[24];
            snprintf(pid, sizeof(pid), "%" PRIu64, mp->pid);
            const char *keys[PROC_LABELS_MAX + 1];
            const char *values[PROC_LABELS_MAX + 1];
            size_t n = proc_labels(mp, pid, keys, values);
            if (pf->reason) {
                keys[n] = "reason";
                values[n++] = mp->reason;
            }
            struct ev_prom_labels l = {.keys = keys, .values = values, .n = n};
            rc = ev_prom_sample_u64(out, pf->name, &l, pf->value(mp));
        }
    }
    return rc;
}

/* The stores of the shown processes with their labels (proc_labels), for ev_prom. */
struct targets {
    struct ev_prom_target *t;
    char (*pids)[24];
    const char **keys;
    const char **values;
    size_t n;
};

static void targets_fini(struct targets *ts)
{
    free(ts->t);
    free(ts->pids);
    free(ts->keys);
    free(ts->values);
}

/* 0 or -ENOMEM (ts empty); the targets borrow m's processes until the next change. */
static int targets_make(struct metrics *m, struct targets *ts)
{
    size_t n = 0;
    for (struct mproc *mp = m->procs; mp != NULL; mp = mp->next) {
        n++;
    }
    n = n > 0 ? n : 1;
    ts->t = calloc(n, sizeof(*ts->t));
    ts->pids = calloc(n, sizeof(*ts->pids));
    ts->keys = calloc(PROC_LABELS_MAX * n, sizeof(*ts->keys));
    ts->values = calloc(PROC_LABELS_MAX * n, sizeof(*ts->values));
    ts->n = 0;
    if (ts->t == NULL || ts->pids == NULL || ts->keys == NULL || ts->values == NULL) {
        targets_fini(ts);
        return UV_ENOMEM;
    }
    for (struct mproc *mp = m->procs; mp != NULL; mp = mp->next) {
        if (mp->store == NULL || !shown(m, mp)) {
            continue;
        }
        size_t k = ts->n++;
        snprintf(ts->pids[k], sizeof(ts->pids[k]), "%" PRIu64, mp->pid);
        const char **keys = &ts->keys[PROC_LABELS_MAX * k];
        const char **values = &ts->values[PROC_LABELS_MAX * k];
        size_t nl = proc_labels(mp, ts->pids[k], keys, values);
        ts->t[k].store = mp->store;
        ts->t[k].labels = (struct ev_prom_labels){.keys = keys, .values = values, .n = nl};
    }
    return 0;
}

int metrics_render_next(struct metrics *m, struct ev_prom_cursor *c, size_t min_bytes,
                        struct buf *out)
{
    if (m == NULL || m->closed || !m->served) {
        c->done = true;
        return 0;
    }
    struct targets ts;
    int rc = targets_make(m, &ts);
    if (rc == 0) {
        rc = ev_prom_render_next(ts.t, ts.n, c, min_bytes, out);
        targets_fini(&ts);
    }
    return rc;
}

/* Renders the shared text again (metrics' reference replaces the old one). The new text, or
 * NULL (and no text kept): too big or over the budget (streamed until the next change), no
 * memory. */
static struct metrics_text *render_text(struct metrics *m, bool for_scrape)
{
    struct targets ts;
    struct buf b;
    struct metrics_text *t = NULL;
    uint64_t t0 = uv_hrtime();
    uint64_t gen = m->gen;
    buf_init(&b, METRICS_TEXT_MAX);
    int rc = targets_make(m, &ts);
    if (rc == 0) {
        rc = ev_prom_render(ts.t, ts.n, &b);
        targets_fini(&ts);
    }
    size_t len = buf_size(&b);
    if (rc == 0) {
        rc = mb_charge(NULL, sizeof(*t) + len);
    }
    if (rc == 0) {
        t = malloc(sizeof(*t) + len);
        if (t == NULL) {
            mb_release(NULL, sizeof(*t) + len);
        }
    }
    metrics_text_release(m->text);
    m->text = t;
    if (t != NULL) {
        t->refs = 1; /* metrics' */
        t->len = len;
        memcpy(t->data, buf_data(&b), len);
        metrics_pace_rendered(&m->pace, for_scrape);
    } else {
        metrics_pace_dropped(&m->pace);
        if (rc == AGENT_E_TOOBIG || rc == AGENT_E_BUDGET) {
            m->too_big = true; /* streamed until the next change */
            m->too_big_gen = gen;
        }
    }
    buf_fini(&b);
    m->renders++;
    m->render_ns += uv_hrtime() - t0;
    return t;
}

static void metrics_on_render_timer(uv_timer_t *t)
{
    struct metrics *m = t->data;
    if (!m->closed && metrics_pace_timer(&m->pace) == METRICS_PACE_RENDER &&
        !(m->too_big && m->too_big_gen == m->gen)) {
        (void)render_text(m, false);
    }
}

struct metrics_text *metrics_text_get(struct metrics *m)
{
    if (m == NULL || m->closed || !m->served || !m->all_processes) {
        return NULL;
    }
    enum metrics_pace_do what = metrics_pace_scrape(&m->pace, uv_now(m->a->loop));
    pace_do(m, what);
    struct metrics_text *t = m->text;
    if (what == METRICS_PACE_RENDER || t == NULL) {
        if (m->too_big && m->too_big_gen == m->gen) {
            return NULL;
        }
        t = render_text(m, true);
    }
    if (t != NULL) {
        t->refs++; /* the caller's */
    }
    return t;
}

void metrics_text_stats(const struct metrics *m, uint64_t *renders, uint64_t *render_ns)
{
    *renders = m != NULL ? m->renders : 0;
    *render_ns = m != NULL ? m->render_ns : 0;
}

const char *metrics_text_data(const struct metrics_text *t, size_t *len)
{
    *len = t->len;
    return t->data;
}

/* ---- the rings of collection rules (CollectTrace PreTriggerSeconds) ---- */

struct ring_family {
    struct buf *out;
    const char *name;
    size_t which; /* its row in metrics_render_rings's families */
    int rc;
};

static void ring_line(void *ud, uint64_t pid, const char *uid, const char *name, const char *rule,
                      const struct ev_ring *ring, uint64_t limit)
{
    struct ring_family *f = ud;
    struct ev_ring_stats st;
    ev_ring_get_stats(ring, &st);
    const uint64_t values[] = {st.bytes_used, limit, st.events_kept, st.blocks_discarded,
                               st.events_discarded};
    static const char *const keys[] = {"pid", "uid", "name", "rule"};
    char p[24];
    snprintf(p, sizeof(p), "%" PRIu64, pid);
    const char *lv[] = {p, uid, name, rule};
    struct ev_prom_labels l = {.keys = keys, .values = lv, .n = 4};
    if (f->rc == 0) {
        f->rc = ev_prom_sample_u64(f->out, f->name, &l, values[f->which]);
    }
}

int metrics_render_rings(struct agent *a, struct buf *out)
{
    static const char *const families[][3] = {
        {"dotmon_ring_bytes", "gauge", "Memory a collection rule's trace ring holds now"},
        {"dotmon_ring_bytes_limit", "gauge", "The ring's cap (RingBufferSizeMB)"},
        {"dotmon_ring_events", "gauge", "Events the ring holds now"},
        {"dotmon_ring_blocks_discarded_total", "counter",
         "Blocks the ring has dropped (older than PreTriggerSeconds, or no room)"},
        {"dotmon_ring_events_discarded_total", "counter", "Events in the blocks dropped"},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && a->rules != NULL && i < sizeof(families) / sizeof(families[0]);
         i++) {
        rc = ev_prom_family(out, families[i][0], families[i][1], families[i][2]);
        struct ring_family f = {.out = out, .name = families[i][0], .which = i, .rc = rc};
        ring_registry_each(&a->rings, ring_line, &f);
        rc = f.rc;
    }
    return rc;
}
