/* SPDX-License-Identifier: MIT */
/* The exceptions history of every watched process; see exceptions.h. */
#include "exceptions.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "err.h"
#include "ev_exc.h"
#include "ev_rd.h"
#include "ipc_discovery.h"
#include "log.h"
#include "membudget.h"
#include "metrics.h"
#include "nettrace.h"
#include "standing.h"

static const char cat[] = "dotmon.exceptions";

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define KW_EXCEPTION     0x8000ull
#define LEVEL_ERROR      2u  /* ExceptionThrown_V1's level: no catch/finally/filter events */
#define EV_THROWN        80u /* ExceptionThrown_V1 */
#define XP_BUFFER_MB     16u /* the runtime's buffer (the app's memory): a flood of throws */
#define MAX_FILTERS      64u /* collection filter entries per list */

/* One process. */
struct xproc {
    struct xproc *next;
    struct exceptions *x;
    uint64_t pid;
    char uid[37];
    char *name;
    struct standing *st;
    struct nettrace_checker ck; /* this attempt's stream */
    bool ck_live;
    struct ev_exc *hist;
    struct mb_share share;
    char share_what[48];
    uint64_t lost;         /* events the runtime dropped, over every attempt */
    uint64_t lost_attempt; /* this attempt's, already counted */
    uint64_t ips[EV_EXC_MAX_FRAMES];
};

struct exceptions {
    struct agent *a;
    size_t top_level_limit;
    struct ev_exc_filters *filters; /* CollectionFilters (owned) */
    struct xproc *procs;
};

/* ---- settings ---- */

/* CollectionFilters:<list>:<entry>:<member>, every entry in .NET's order (config_children), as
 * the JSON list of an ExceptionsConfiguration (the one parser reads both). An entry naming none of
 * the four members is left out with a warning: as {} it would match every exception. */
static int read_list(const struct config *cfg, const char *list, cJSON *doc)
{
    static const char *const members[] = {"ExceptionType", "TypeName", "MethodName", "ModuleName"};
    static const char *const json[] = {"exceptionType", "typeName", "methodName", "moduleName"};
    char prefix[96];
    snprintf(prefix, sizeof(prefix), "InProcessFeatures:Exceptions:CollectionFilters:%s", list);
    struct config_child ent[MAX_FILTERS];
    size_t n = 0;
    if (config_children(cfg, prefix, ent, MAX_FILTERS, &n) != 0) {
        log_error(cat, "%s: at most %u entries", prefix, MAX_FILTERS);
        return AGENT_E_TOOBIG;
    }
    cJSON *arr = cJSON_AddArrayToObject(doc, list);
    if (arr == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *e = cJSON_CreateObject();
        if (e == NULL) {
            return -ENOMEM;
        }
        for (size_t m = 0; m < 4; m++) {
            char key[256];
            snprintf(key, sizeof(key), "%s:%.*s:%s", prefix, (int)ent[i].len, ent[i].name,
                     members[m]);
            const char *v = config_get(cfg, key);
            if (v != NULL && v[0] != '\0' && cJSON_AddStringToObject(e, json[m], v) == NULL) {
                cJSON_Delete(e);
                return -ENOMEM;
            }
        }
        if (cJSON_GetArraySize(e) == 0) {
            log_warn(cat,
                     "%s:%.*s names none of ExceptionType, TypeName, MethodName, ModuleName: "
                     "left out",
                     prefix, (int)ent[i].len, ent[i].name);
            cJSON_Delete(e);
        } else if (!cJSON_AddItemToArray(arr, e)) {
            cJSON_Delete(e);
            return -ENOMEM;
        }
    }
    return 0;
}

static int read_filters(const struct config *cfg, struct ev_exc_filters **out)
{
    cJSON *doc = cJSON_CreateObject();
    int rc = doc == NULL ? -ENOMEM : read_list(cfg, "Include", doc);
    rc = rc != 0 ? rc : read_list(cfg, "Exclude", doc);
    char *text = rc == 0 ? cJSON_PrintUnformatted(doc) : NULL;
    cJSON_Delete(doc);
    if (rc == 0 && text == NULL) {
        rc = -ENOMEM;
    }
    char err[256] = "";
    if (rc == 0) {
        rc = ev_exc_filters_parse(text, strlen(text), out, err, sizeof(err));
        if (rc == AGENT_E_INVAL) {
            log_error(cat, "InProcessFeatures:Exceptions:CollectionFilters: %s", err);
        }
    }
    free(text);
    return rc;
}

int exceptions_new(struct agent *a, struct exceptions **out)
{
    *out = NULL;
    int all = config_get_bool(a->cfg, "InProcessFeatures:Enabled", 0);
    int on = config_get_bool(a->cfg, "InProcessFeatures:Exceptions:Enabled", all > 0);
    if (all < 0 || on < 0) {
        log_error(cat, "InProcessFeatures:%sEnabled takes true or false",
                  all < 0 ? "" : "Exceptions:");
        return AGENT_E_INVAL;
    }
    uint64_t limit = EV_EXC_DEFAULT_HISTORY;
    if (config_get_uint(a->cfg, "InProcessFeatures:Exceptions:TopLevelLimit", 1, INT32_MAX,
                        &limit) != 0) {
        return AGENT_E_INVAL;
    }
    if (!on) {
        return 0;
    }
    struct exceptions *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        return -ENOMEM;
    }
    x->a = a;
    x->top_level_limit = (size_t)limit;
    int rc = read_filters(a->cfg, &x->filters);
    if (rc != 0) {
        free(x);
        return rc;
    }
    log_info(cat,
             "first-chance exceptions kept for every process: the last %zu, %zu include and %zu "
             "exclude filters",
             x->top_level_limit, x->filters->ninclude, x->filters->nexclude);
    *out = x;
    return 0;
}

/* ---- one process's session ---- */

static void xp_on_event(void *ud, const struct nettrace_event *ev)
{
    struct xproc *xp = ud;
    if (ev->event_id != EV_THROWN || strcmp(ev->provider, RUNTIME_PROVIDER) != 0) {
        return;
    }
    struct nettrace_trace_info ti = {.pointer_size = 8};
    int64_t unix_ns = 0;
    if (nettrace_trace_info(&xp->ck, &ti) != 0 ||
        nettrace_unix_ns(&ti, ev->timestamp, &unix_ns) != 0) {
        unix_ns = 0; /* no clock in the stream: the epoch, never a guess */
    }
    size_t psize = ti.pointer_size == 4 ? 4 : 8;
    size_t n = ev->stack != NULL ? ev->stack_len / psize : 0;
    n = n > EV_EXC_MAX_FRAMES ? EV_EXC_MAX_FRAMES : n;
    for (size_t i = 0; i < n; i++) {
        xp->ips[i] = psize == 4 ? ev_load_u32(ev->stack + 4 * i) : ev_load_u64(ev->stack + 8 * i);
    }
    struct ev_exc_event e = {.unix_ns = unix_ns,
                             .thread = ev->thread_id,
                             .payload = ev->payload,
                             .len = ev->payload_len,
                             .version = ev->version,
                             .pointer_size = psize,
                             .ips = n > 0 ? xp->ips : NULL,
                             .n_ips = n};
    int rc = ev_exc_add(xp->hist, &e);
    if (rc != 0 && rc != AGENT_E_PROTO && rc != AGENT_E_BUDGET) {
        log_debug(cat, "process %" PRIu64 ": an exception not kept: %s", xp->pid,
                  agent_strerror(rc));
    }
}

static void xp_ck_fini(struct xproc *xp)
{
    if (xp->ck_live) {
        const struct nettrace_stats *ns = nettrace_get_stats(&xp->ck);
        xp->lost += ns->lost - xp->lost_attempt;
        nettrace_checker_fini(&xp->ck);
        xp->ck_live = false;
        xp->lost_attempt = 0;
    }
}

static int xp_prepare(void *ud, struct ipc_collect_config *out)
{
    struct xproc *xp = ud;
    static const struct ipc_provider prov = {
        .name = RUNTIME_PROVIDER, .keywords = KW_EXCEPTION, .level = LEVEL_ERROR};
    xp_ck_fini(xp);
    struct nettrace_options opt = {.flags = NETTRACE_KEEP_STACKS};
    int rc = nettrace_checker_init(&xp->ck, &opt);
    if (rc != 0) {
        return rc;
    }
    xp->ck_live = true;
    nettrace_set_event_cb(&xp->ck, xp_on_event, xp);
    *out = (struct ipc_collect_config){.buffer_mb = XP_BUFFER_MB,
                                       .format = 1,
                                       .rundown_keyword = 0,
                                       .providers = &prov,
                                       .provider_count = 1};
    return 0;
}

static void xp_started(void *ud, uint64_t session_id, int version)
{
    struct xproc *xp = ud;
    log_info(cat, "process %" PRIu64 ": exceptions session %" PRIx64 " (CollectTracing v%d)",
             xp->pid, session_id, version);
}

static int xp_feed(void *ud, const uint8_t *p, size_t n)
{
    struct xproc *xp = ud;
    int rc = nettrace_feed(&xp->ck, p, n);
    const struct nettrace_stats *ns = nettrace_get_stats(&xp->ck);
    if (ns->lost > xp->lost_attempt) { /* a flood outran the runtime's buffer */
        xp->lost += ns->lost - xp->lost_attempt;
        xp->lost_attempt = ns->lost;
    }
    return rc;
}

static void xp_describe(void *ud, int rc, char *out, size_t cap)
{
    struct xproc *xp = ud;
    nettrace_error_line(&xp->ck, rc, out, cap);
}

static void xp_ended(void *ud, int code, const char *how, bool restarting, bool asked)
{
    struct xproc *xp = ud;
    xp_ck_fini(xp);
    if (restarting && !asked) {
        log_warn(cat, "process %" PRIu64 ": the exceptions session ended (%s%s%s); it starts again",
                 xp->pid, how, code != 0 ? ": " : "", code != 0 ? agent_strerror(code) : "");
    }
}

static const struct standing_ops xp_ops = {.prepare = xp_prepare,
                                           .started = xp_started,
                                           .feed = xp_feed,
                                           .describe = xp_describe,
                                           .ended = xp_ended};

static void xp_free(struct xproc *xp)
{
    standing_free(xp->st); /* no callback after this */
    xp_ck_fini(xp);
    ev_exc_free(xp->hist);
    mb_share_fini(&xp->share);
    free(xp->name);
    free(xp);
}

static void xp_add(struct exceptions *x, const struct ipc_process *p)
{
    struct xproc *xp = calloc(1, sizeof(*xp));
    if (xp == NULL) {
        log_warn(cat, "no memory for the exceptions of process %" PRIu64, p->pid);
        return;
    }
    xp->x = x;
    xp->pid = p->pid;
    memcpy(xp->uid, p->uid, sizeof(xp->uid));
    xp->name = strdup(p->name != NULL ? p->name : "");
    snprintf(xp->share_what, sizeof(xp->share_what), "exceptions of process %" PRIu64, p->pid);
    uint64_t cap = metrics_share_cap();
    mb_share_init(&xp->share, xp->share_what, cap);
    struct ev_exc_limits lim = {
        .max_instances = x->top_level_limit, .max_bytes = (size_t)cap, .share = &xp->share};
    int rc = xp->name == NULL ? -ENOMEM : ev_exc_new(&lim, &xp->hist);
    if (rc == 0) {
        ev_exc_set_filters(xp->hist, x->filters);
        struct agent *a = x->a;
        struct standing_config sc = {.loop = a->loop,
                                     .admission = &a->metric_sessions,
                                     .start_timeout_ms = agent_timeout(a, TIMEOUT_TRIGGER_START),
                                     .stop_timeout_ms = agent_timeout(a, TIMEOUT_TRIGGER_STOP),
                                     .backoff_min_ms = agent_timeout(a, TIMEOUT_BACKOFF_MIN),
                                     .backoff_max_ms = agent_timeout(a, TIMEOUT_BACKOFF_MAX)};
        struct ipc_endpoint ep = ipc_process_endpoint(p);
        rc = standing_new(&sc, &ep, &xp_ops, xp, &xp->st);
    }
    if (rc != 0) {
        log_warn(cat, "process %" PRIu64 ": its exceptions are not kept: %s", p->pid,
                 agent_strerror(rc));
        xp_free(xp);
        return;
    }
    xp->next = x->procs;
    x->procs = xp;
}

void exceptions_on_process(struct exceptions *x, const struct ipc_process *p, bool added)
{
    if (x == NULL) {
        return;
    }
    if (added) {
        xp_add(x, p);
        return;
    }
    for (struct xproc **pp = &x->procs; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->uid, p->uid) == 0) {
            struct xproc *xp = *pp;
            *pp = xp->next;
            xp_free(xp);
            return;
        }
    }
}

struct ev_exc *exceptions_history(struct exceptions *x, const char *uid)
{
    for (struct xproc *xp = x != NULL ? x->procs : NULL; xp != NULL; xp = xp->next) {
        if (strcmp(xp->uid, uid) == 0) {
            return xp->hist;
        }
    }
    return NULL;
}

struct cJSON *exceptions_status_json(struct exceptions *x)
{
    cJSON *arr = cJSON_CreateArray();
    for (struct xproc *xp = x != NULL ? x->procs : NULL; arr != NULL && xp != NULL; xp = xp->next) {
        cJSON *o = cJSON_CreateObject();
        if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
            cJSON_Delete(o);
            cJSON_Delete(arr);
            return NULL;
        }
        const char *reason = "";
        enum standing_state st = standing_state(xp->st, &reason);
        struct ev_exc_stats s;
        ev_exc_get_stats(xp->hist, &s);
        cJSON_AddNumberToObject(o, "pid", (double)xp->pid);
        cJSON_AddStringToObject(o, "uid", xp->uid);
        cJSON_AddStringToObject(o, "name", xp->name);
        cJSON_AddStringToObject(o, "state", standing_state_name(st));
        cJSON_AddStringToObject(o, "reason", reason);
        cJSON_AddNumberToObject(o, "kept", (double)s.kept);
        cJSON_AddNumberToObject(o, "added", (double)s.added);
        cJSON_AddNumberToObject(o, "evicted", (double)s.evicted);
        cJSON_AddNumberToObject(o, "dropped", (double)s.dropped);
        cJSON_AddNumberToObject(o, "malformed", (double)s.malformed);
        cJSON_AddNumberToObject(o, "lost", (double)xp->lost);
        cJSON_AddNumberToObject(o, "bytes", (double)s.bytes);
    }
    return arr;
}

void exceptions_close(struct exceptions *x)
{
    if (x == NULL) {
        return;
    }
    while (x->procs != NULL) {
        struct xproc *xp = x->procs;
        x->procs = xp->next;
        xp_free(xp);
    }
    ev_exc_filters_free(x->filters);
    free(x);
}
