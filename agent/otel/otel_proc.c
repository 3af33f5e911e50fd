/* SPDX-License-Identifier: MIT */
/* One OpenTelemetry producer per watched process; see otel_proc.h and docs/otel.md. */
#include "otel_proc.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "agent.h"
#include "buf.h"
#include "dsession.h"
#include "err.h"
#include "ev_activity.h"
#include "ev_logs.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_discovery.h"
#include "log.h"
#include "membudget.h"
#include "metrics.h"
#include "otel_map.h"
#include "otel_span.h"
#include "standing.h"

static const char cat[] = "dotmon.otel";

#define MEL_PROVIDER   "Microsoft-Extensions-Logging"
#define TPL_PROVIDER   "System.Threading.Tasks.TplEventSource"
#define OTEL_BUFFER_MB 16
#define MAX_SERIES     2000u /* per process, as /metrics' stores bound theirs */
#define RETRY_MIN_MS   1000u
#define RETRY_MAX_MS   60000u
#define LOST_WARN_MS   60000u /* at most one warning of the runtime's drops this often */
#define LOGS_SHARE     (8ull * 1024 * 1024)
#define SPAN_ATTRS     EV_ACTIVITY_MAX_TAGS

/* One process. */
struct oproc {
    struct oproc *next;
    struct otel_procs *ps;
    uint64_t pid;
    char uid[37];
    char *name;
    char *clr_version;
    struct ipc_identity id; /* discovery's: container.id, k8s.* */
    struct ipc_endpoint ep;
    struct ipc_env *env_req; /* the environment being read */
    struct otel_env env;
    struct otel_resource res;
    struct otel_source *src; /* NULL until the resource is known */
    struct otel_series_table *series;
    struct mb_share series_share; /* the series' bytes (cap: metrics_share_cap, as /metrics') */
    char series_what[48];
    uint64_t series_warned_ms; /* the last left-out series told (loop time; 0: never) */
    /* the telemetry session (logs and spans), kept open and restarted by collect/standing;
     * NULL until the resource is known, or when neither logs nor traces are exported */
    struct standing *sess;
    struct ev_logs *logs; /* the decoders of the session's current attempt */
    struct ev_activity *spans;
    bool no_sampler;   /* its DiagnosticSource is older than 9: ask without the sampler */
    bool version_seen; /* the session's Version event was looked at */
    struct mb_share share;
    char share_what[48];
    bool gone;
    uint64_t lost_seen;    /* the session's events the runtime dropped, already counted */
    uint64_t lost_warn_ms; /* the last such loss told (loop time; 0: never) */
    struct otel_log_view view;
    struct otlp_kv span_attrs[SPAN_ATTRS];
};

struct otel_procs {
    struct agent *a;
    struct otel *o;
    const struct otel_settings *st;
    struct oproc *procs;
    uv_timer_t flush; /* metric_interval_ms */
    uv_timer_t order; /* the logs decoders' tick (Timeouts:LogsOrderMs) */
    uv_timer_t stop;  /* the sessions' drain at shutdown: the rest is aborted then */
    size_t closing;   /* handles closing */
    bool closed;
    bool draining; /* closed, some sessions still ending; done not called yet */
    uint64_t stop_ms;
    void (*done)(void *ud);
    void *done_ud;
    struct otel_providers prov;
    struct otel_providers prov_unsampled; /* the same without the sampler */
    char host[256];
    struct dsession_keeper keeper; /* the one-spec-set rule, while traces are exported */
};

static uint64_t unix_nano_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the session's providers (the seam for traces) ---------------------------------------- */

static int span_provider(const struct otel_settings *st, bool sampler, struct otel_providers *out)
{
    struct buf specs;
    buf_init(&specs, sizeof(out->as_args));
    const char *sources = st->activity_sources != NULL && st->activity_sources[0] != '\0'
                              ? st->activity_sources
                              : "*";
    int rc = buf_append_str(&specs, "FilterAndPayloadSpecs=\"");
    rc = rc != 0 ? rc
                 : ev_activity_filter_specs(sources, sampler ? st->sampling_ratio : 1.0, &specs);
    rc = rc != 0 ? rc : buf_append(&specs, "\"", 1);
    if (rc == 0 && buf_size(&specs) < sizeof(out->as_args)) {
        memcpy(out->as_args, buf_data(&specs), buf_size(&specs));
        out->as_args[buf_size(&specs)] = '\0';
        out->v[out->n++] = (struct ipc_provider){.name = EV_ACTIVITY_PROVIDER,
                                                 .keywords = EV_ACTIVITY_KEYWORDS,
                                                 .level = EV_ACTIVITY_LEVEL,
                                                 .arguments = out->as_args};
    } else if (rc == 0) {
        rc = AGENT_E_TOOBIG;
    }
    buf_fini(&specs);
    return rc;
}

int otel_session_providers(const struct otel_settings *st, struct otel_providers *out)
{
    return otel_session_providers_sampled(st, true, out);
}

int otel_session_providers_sampled(const struct otel_settings *st, bool sampler,
                                   struct otel_providers *out)
{
    memset(out, 0, sizeof(*out));
    int rc = st->signal[OTLP_TRACES] ? span_provider(st, sampler, out) : 0;
    if (rc != 0 || !st->signal[OTLP_LOGS]) {
        return rc;
    }
    /* The app's own logging filters first (as /logs does by default, and as the in-process SDK
     * sees records: only what the app's LoggerFilterOptions let through), then LogCategories. */
    const char *filter = st->log_filter != NULL ? st->log_filter : "";
    int n = snprintf(out->mel_args, sizeof(out->mel_args), "FilterSpecs=\"UseAppFilters%s%s\"",
                     filter[0] != '\0' ? ";" : "", filter);
    if (n < 0 || (size_t)n >= sizeof(out->mel_args)) {
        return AGENT_E_TOOBIG;
    }
    /* LogLevel → EventLevel: Trace and Debug are Verbose (5), then 4 Informational … 1 Critical */
    int level = st->log_level;
    uint32_t ev_level = level <= EV_LOG_DEBUG ? 5u : level >= EV_LOG_CRITICAL ? 1u : 6u - level;
    /* Keyword 0x8 (JsonMessage) alone: MessageJson carries the template, the arguments, the
     * exception, the trace context and the formatted text; 0x4 would make the app format and
     * write every record a second time as a FormattedMessage event (docs/otel.md §3). */
    out->v[out->n++] = (struct ipc_provider){
        .name = MEL_PROVIDER, .keywords = 0x8, .level = ev_level, .arguments = out->mel_args};
    /* Scopes are tied to records by activity ids, which only flow through awaits with
     * TasksFlowActivityIds: without scopes the app is spared that flow (docs/otel.md §3). */
    if (st->include_scopes) {
        out->v[out->n++] =
            (struct ipc_provider){.name = TPL_PROVIDER, .keywords = 0x80, .level = 4};
    }
    return 0;
}

/* ---- logs ----------------------------------------------------------------------------------- */

static void op_on_record(void *ud, const struct ev_log_record *r)
{
    struct oproc *op = ud;
    if (op->src == NULL || r->level < op->ps->st->log_level || r->level >= EV_LOG_NONE) {
        return;
    }
    if (!op->ps->st->include_scopes && r->nscopes > 0) {
        struct ev_log_record bare = *r;
        bare.nscopes = 0;
        otel_log_map(&bare, unix_nano_now(), &op->view);
    } else {
        otel_log_map(r, unix_nano_now(), &op->view);
    }
    (void)otel_emit_log(op->src, &op->view.scope, &op->view.log); /* drops are the exporter's */
}

/* ---- spans ---------------------------------------------------------------------------------- */

static void op_on_span(void *ud, const struct ev_span *sp)
{
    struct oproc *op = ud;
    if (op->src == NULL) {
        return;
    }
    struct otlp_span span;
    struct otlp_scope scope;
    if (otel_span_from_activity(sp, &span, &scope, op->span_attrs, SPAN_ATTRS) == 0) {
        (void)otel_emit_span(op->src, &scope, &span); /* drops are the exporter's */
    }
}

/*
 * The session's first Version event says which DiagnosticSource the app has: before 9, a line with
 * ParentRatioSampler is dropped by the runtime, so the session is asked again without it. true
 * when the session is being stopped for that.
 */
static bool op_check_version(struct oproc *op)
{
    int major = 0;
    int minor = 0;
    int patch = 0;
    if (op->version_seen || op->spans == NULL ||
        ev_activity_source_version(op->spans, &major, &minor, &patch) != 0) {
        return false;
    }
    op->version_seen = true;
    if (major >= 9 || op->no_sampler || op->ps->st->sampling_ratio >= 1.0) {
        return false;
    }
    log_warn(cat,
             "process %" PRIu64 ": System.Diagnostics.DiagnosticSource %d.%d.%d has no trace "
             "sampler (9 or later has): every trace of it is exported",
             op->pid, major, minor, patch);
    op->no_sampler = true;
    standing_restart(op->sess); /* at once, without the sampler (op_prepare) */
    return true;
}

/*
 * Events of the session the runtime dropped (its buffer was full: the app wrote faster than
 * dotmon read), from the stream's sequence numbers (docs/nettrace.md): counted for the process
 * and told at most every LOST_WARN_MS. Both decoders read the same stream, so either one's count
 * is the session's; which signal the lost events carried cannot be known.
 */
static void op_count_lost(struct oproc *op)
{
    uint64_t lost = 0;
    if (op->spans != NULL) {
        struct ev_activity_stats st;
        ev_activity_get_stats(op->spans, &st);
        lost = st.lost;
    } else if (op->logs != NULL) {
        struct ev_logs_stats st;
        ev_logs_get_stats(op->logs, &st);
        lost = st.lost;
    }
    if (lost <= op->lost_seen) {
        return;
    }
    otel_count_lost(op->ps->o, op->src, lost - op->lost_seen);
    op->lost_seen = lost;
    uint64_t now = uv_now(op->ps->a->loop);
    if (op->lost_warn_ms == 0 || now - op->lost_warn_ms >= LOST_WARN_MS) {
        op->lost_warn_ms = now;
        log_warn(cat,
                 "process %" PRIu64 ": the runtime dropped %" PRIu64 " event(s) of the "
                 "OpenTelemetry session so far: it wrote faster than dotmon read "
                 "(dotmon_otel_lost_events_total counts them)",
                 op->pid, lost);
    }
}

static int op_feed(void *ud, const uint8_t *p, size_t n)
{
    struct oproc *op = ud;
    int rc = op->logs != NULL ? ev_logs_feed(op->logs, p, n) : 0;
    if (rc == 0 && op->spans != NULL) {
        rc = ev_activity_feed(op->spans, p, n);
        if (rc == 0) {
            (void)op_check_version(op);
        }
    }
    if (rc == 0) {
        op_count_lost(op);
    }
    return rc;
}

static void op_describe(void *ud, int rc, char *out, size_t cap)
{
    struct oproc *op = ud;
    (void)rc;
    const char *why = op->logs != NULL ? ev_logs_error(op->logs) : NULL;
    why = why == NULL && op->spans != NULL ? ev_activity_error(op->spans) : why;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

static void op_started(void *ud, uint64_t session_id, int version)
{
    struct oproc *op = ud;
    (void)session_id;
    (void)version;
    log_info(cat, "process %" PRIu64 ": its%s%s go to OpenTelemetry", op->pid,
             op->logs != NULL ? " logs" : "", op->spans != NULL ? " spans" : "");
}

static void op_remove(struct oproc *op);

/* The decoders go with their session (their fixed parts were charged to the share at the start).
 */
static void op_logs_free(struct oproc *op)
{
    if (op->logs != NULL) {
        ev_logs_flush(op->logs); /* the records held for their order (events.md §4.4) */
        ev_logs_free(op->logs);
        op->logs = NULL;
        mb_release(&op->share, ev_logs_footprint());
    }
    if (op->spans != NULL) {
        ev_activity_free(op->spans);
        op->spans = NULL;
        mb_release(&op->share, ev_activity_footprint());
    }
}

/* Every attempt's end (collect/standing): its decoders go; at shutdown, the process with them
 * (everything the runtime still had was fed). A restart follows unless stopped. */
static void op_ended(void *ud, int code, const char *how, bool restarting, bool asked)
{
    struct oproc *op = ud;
    (void)code;
    op_logs_free(op);
    if (!restarting) {
        if (op->ps->closed && !op->gone) { /* drained at shutdown */
            op_remove(op);
        }
        return;
    }
    if (asked) { /* another session's specs ended, or no sampler */
        log_info(cat, "process %" PRIu64 ": its OpenTelemetry session starts again (%s)", op->pid,
                 how);
        return;
    }
    log_warn(cat, "process %" PRIu64 ": the OpenTelemetry session ended (%s); it starts again",
             op->pid, how);
}

/* Each attempt: new decoders, and the providers (without the sampler once the app's
 * DiagnosticSource turned out older than 9). */
static int op_prepare(void *ud, struct ipc_collect_config *out)
{
    struct oproc *op = ud;
    struct otel_procs *ps = op->ps;
    const struct otel_providers *prov = op->no_sampler ? &ps->prov_unsampled : &ps->prov;
    int rc = 0;
    if (ps->st->signal[OTLP_LOGS]) {
        rc = mb_charge(&op->share, ev_logs_footprint()) != 0 ? AGENT_E_BUDGET : 0;
        if (rc == 0 && ev_logs_new(&op->logs, op_on_record, op) != 0) {
            mb_release(&op->share, ev_logs_footprint());
            rc = -ENOMEM;
        }
        rc = rc != 0 ? rc : ev_logs_set_share(op->logs, &op->share);
    }
    if (rc == 0 && ps->st->signal[OTLP_TRACES]) {
        rc = mb_charge(&op->share, ev_activity_footprint()) != 0 ? AGENT_E_BUDGET : 0;
        if (rc == 0 && ev_activity_new(&op->spans, op_on_span, op) != 0) {
            mb_release(&op->share, ev_activity_footprint());
            rc = -ENOMEM;
        }
        rc = rc != 0 ? rc : ev_activity_set_share(op->spans, &op->share);
    }
    op->version_seen = false;
    op->lost_seen = 0; /* new decoders count from 0 */
    /* No stacks: nothing exported carries one, and a stack walk per log record and per Activity
     * is most of what the runtime would spend inside the app (docs/otel.md §6). */
    *out = (struct ipc_collect_config){.buffer_mb = OTEL_BUFFER_MB,
                                       .format = 1,
                                       .disable_stackwalk = ipc_stackwalk_optional(op->clr_version),
                                       .providers = prov->v,
                                       .provider_count = prov->n};
    if (rc != 0) {
        op_logs_free(op); /* ended() follows, as after every attempt */
    }
    return rc;
}

static const struct standing_ops op_standing = {.prepare = op_prepare,
                                                .started = op_started,
                                                .feed = op_feed,
                                                .describe = op_describe,
                                                .ended = op_ended};

/* The session, once the resource is known (a process whose logs and traces are not exported
 * gets none). */
static void op_logs_start(struct oproc *op)
{
    struct otel_procs *ps = op->ps;
    if (ps->prov.n == 0 || op->sess != NULL || op->gone || ps->closed) {
        return;
    }
    struct agent *a = ps->a;
    struct standing_config cfg = {.loop = a->loop,
                                  .admission = &a->metric_sessions,
                                  .start_timeout_ms = agent_timeout(a, TIMEOUT_LOGS_START),
                                  .stop_timeout_ms = agent_timeout(a, TIMEOUT_LOGS_STOP),
                                  .backoff_min_ms = RETRY_MIN_MS,
                                  .backoff_max_ms = RETRY_MAX_MS,
                                  .keeper_own = true};
    int rc = standing_new(&cfg, &op->ep, &op_standing, op, &op->sess);
    if (rc != 0) {
        op->sess = NULL;
        log_warn(cat, "process %" PRIu64 ": no OpenTelemetry session (%s)", op->pid,
                 agent_strerror(rc));
    }
}

/* ---- resource ---------------------------------------------------------------------------------
 */

static int op_on_var(void *ud, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    struct oproc *op = ud;
    return otel_env_take(&op->env, name, name_len, value, value_len);
}

static void op_on_env(void *ud, const struct ipc_env_result *res)
{
    struct oproc *op = ud;
    struct otel_procs *ps = op->ps;
    op->env_req = NULL;
    if (res->status != 0 || !res->ok || res->block_status != 0) {
        log_warn(cat,
                 "process %" PRIu64 ": its environment could not be read (%s); its resource "
                 "has what dotmon sees of it (service.name unknown_service:%s)",
                 op->pid, agent_strerror(res->status != 0 ? res->status : res->block_status),
                 op->name);
        otel_env_fini(&op->env);
    }
    const struct ipc_identity *id = &op->id;
    struct otel_proc_info pi = {.pid = op->pid,
                                .name = op->name,
                                .uid = op->uid,
                                .clr_version = op->clr_version,
                                .host_name = ps->host[0] != '\0' ? ps->host : NULL,
                                .sdk_version = DOTMON_VERSION,
                                .container_id = id->container_id,
                                .container_name = id->container_name,
                                .pod_uid = id->pod_uid,
                                .pod_name = id->pod_name,
                                .pod_namespace = id->pod_namespace};
    int rc = otel_resource_build(&op->env, &pi, &op->res);
    otel_env_fini(&op->env); /* nothing of the environment stays beyond the resource */
    if (rc == 0) {
        struct otlp_resource view = otel_resource_view(&op->res);
        op->src = otel_source_new(ps->o, op->pid, &view);
    }
    if (op->src == NULL) {
        log_warn(cat, "no memory for the OpenTelemetry resource of process %" PRIu64, op->pid);
        return;
    }
    op_logs_start(op);
}

/* ---- metrics -------------------------------------------------------------------------------- */

static void op_on_metric(void *ud, const struct otlp_scope *scope, const struct otlp_metric *m)
{
    struct oproc *op = ud;
    (void)otel_emit_metric(op->src, scope, m); /* drops are the exporter's */
}

static void op_flush_metrics(struct oproc *op)
{
    if (op->src != NULL && op->series != NULL) {
        otel_series_flush(op->series, op_on_metric, op);
    }
}

static void ps_on_order(uv_timer_t *t)
{
    struct otel_procs *ps = t->data;
    for (struct oproc *op = ps->procs; op != NULL; op = op->next) {
        if (op->logs != NULL) {
            ev_logs_tick(op->logs);
        }
    }
}

static void ps_on_flush(uv_timer_t *t)
{
    struct otel_procs *ps = t->data;
    for (struct oproc *op = ps->procs; op != NULL; op = op->next) {
        op_flush_metrics(op);
    }
}

/* A sample left out (its series over the count or its share full): counted as a dropped metric,
 * told at most every OTEL_WARN_EVERY_MS. */
static void op_series_refused(struct oproc *op, const struct ev_metric_sample *s, int rc)
{
    otel_count_dropped(op->ps->o, op->src, OTLP_METRICS, 1);
    uint64_t now = uv_now(op->ps->a->loop);
    if (op->series_warned_ms != 0 && now - op->series_warned_ms < OTEL_WARN_EVERY_MS) {
        return;
    }
    op->series_warned_ms = now != 0 ? now : 1;
    if (rc == AGENT_E_TOOBIG) {
        log_warn(cat,
                 "process %" PRIu64 ": %u metric series exported; new ones (here %.80s %.80s) "
                 "are left out (dotmon_otel_dropped_total counts them)",
                 op->pid, MAX_SERIES, s->provider, s->name);
    } else {
        log_warn(cat,
                 "process %" PRIu64 ": its %zu metric series fill their share of dotmon's memory "
                 "budget (%" PRIu64 " KiB); samples of new or growing series (here %.80s %.80s) "
                 "are left out (dotmon_otel_dropped_total counts them; raise Memory:LimitMB?)",
                 op->pid, otel_series_count(op->series), op->series_share.cap / 1024, s->provider,
                 s->name);
    }
}

void otel_procs_on_sample(void *ud, const char *uid, const struct ev_metric_sample *s)
{
    struct otel_procs *ps = ud;
    for (struct oproc *op = ps != NULL ? ps->procs : NULL; op != NULL; op = op->next) {
        if (strcmp(op->uid, uid) == 0) {
            int rc = op->series != NULL ? otel_series_add(op->series, s) : 0;
            if (rc == AGENT_E_TOOBIG || rc == AGENT_E_BUDGET) {
                op_series_refused(op, s, rc);
            }
            return;
        }
    }
}

/* ---- processes ------------------------------------------------------------------------------ */

static void ps_maybe_free(struct otel_procs *ps)
{
    if (ps->closed && ps->closing == 0) {
        free(ps);
    }
}

static void ps_on_stop_closed(uv_handle_t *h)
{
    struct otel_procs *ps = h->data;
    ps->closing--;
    ps_maybe_free(ps);
}

/* Closing, and the last session ended: the caller's done, once (it may flush the exporter now). */
static void ps_drained(struct otel_procs *ps)
{
    if (!ps->draining || ps->procs != NULL) {
        return;
    }
    ps->draining = false;
    uv_close((uv_handle_t *)&ps->stop, ps_on_stop_closed);
    if (ps->done != NULL) {
        ps->done(ps->done_ud);
    }
}

/* Ends op: its last metric values handed over, its session and request ended, its source
 * released (what is queued from it is still sent). */
static void op_remove(struct oproc *op)
{
    struct otel_procs *ps = op->ps;
    for (struct oproc **pp = &ps->procs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == op) {
            *pp = op->next;
            break;
        }
    }
    op->gone = true;
    if (!ps->closed) { /* closing flushed every process's values already */
        op_flush_metrics(op);
    }
    if (op->env_req != NULL) {
        ipc_env_cancel(op->env_req);
        op->env_req = NULL;
    }
    standing_free(op->sess); /* accepts NULL; no callback follows (also from inside op_ended) */
    op->sess = NULL;
    op_logs_free(op);
    otel_series_free(op->series);
    op->series = NULL;
    if (op->src != NULL) {
        otel_source_release(op->src);
        op->src = NULL;
    }
    otel_resource_fini(&op->res);
    otel_env_fini(&op->env);
    ipc_endpoint_fini(&op->ep);
    free(op->name);
    free(op->clr_version);
    mb_share_fini(&op->share);
    mb_share_fini(&op->series_share);
    free(op);
    ps_drained(ps);
}

static void op_add(struct otel_procs *ps, const struct ipc_process *p)
{
    struct oproc *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        log_warn(cat, "no memory for the OpenTelemetry producer of process %" PRIu64, p->pid);
        return;
    }
    op->ps = ps;
    op->pid = p->pid;
    memcpy(op->uid, p->uid, sizeof(op->uid));
    op->name = strdup(p->name != NULL ? p->name : "");
    op->clr_version = p->clr_version != NULL ? strdup(p->clr_version) : NULL;
    op->id = p->identity;
    snprintf(op->share_what, sizeof(op->share_what), "OpenTelemetry session of %" PRIu64, p->pid);
    mb_share_init(&op->share, op->share_what, LOGS_SHARE);
    snprintf(op->series_what, sizeof(op->series_what), "OpenTelemetry metrics of %" PRIu64, p->pid);
    mb_share_init(&op->series_share, op->series_what, metrics_share_cap());
    op->next = ps->procs;
    ps->procs = op;
    int rc = op->name == NULL || (p->clr_version != NULL && op->clr_version == NULL) ? -ENOMEM
             : ps->st->signal[OTLP_METRICS]
                 ? otel_series_new(MAX_SERIES, &op->series_share, &op->series)
                 : 0;
    rc = rc != 0 ? rc : ipc_endpoint_copy(&op->ep, &p->ep);
    rc = rc != 0 ? rc
                 : ipc_env_request(ps->a->loop, &op->ep, agent_timeout(ps->a, TIMEOUT_IPC_EXCHANGE),
                                   0, op_on_var, op_on_env, op, &op->env_req);
    if (rc != 0) {
        log_warn(cat, "process %" PRIu64 ": no OpenTelemetry export (%s)", p->pid,
                 agent_strerror(rc));
        op_remove(op);
    }
}

void otel_procs_on_process(struct otel_procs *ps, const struct ipc_process *p, bool added)
{
    if (ps == NULL || ps->closed) {
        return;
    }
    for (struct oproc *op = ps->procs; op != NULL; op = op->next) {
        if (strcmp(op->uid, p->uid) == 0) {
            if (!added) {
                op_remove(op);
            }
            return;
        }
    }
    if (added && otel_wants_process(ps->o, p)) {
        op_add(ps, p);
    }
}

static int keeper_join(void *ud, const struct ipc_endpoint *ep, const struct ipc_collect_config *in,
                       struct dsession_joined *j);
static void keeper_left(void *ud, uint64_t key, bool had_session);

int otel_procs_new(struct agent *a, struct otel *o, struct otel_procs **out)
{
    *out = NULL;
    const struct otel_settings *st = o != NULL ? otel_settings(o) : NULL;
    if (st == NULL ||
        (!st->signal[OTLP_LOGS] && !st->signal[OTLP_METRICS] && !st->signal[OTLP_TRACES])) {
        return 0;
    }
    struct otel_procs *ps = calloc(1, sizeof(*ps));
    if (ps == NULL) {
        return -ENOMEM;
    }
    ps->a = a;
    ps->o = o;
    ps->st = st;
    int rc = otel_session_providers_sampled(st, true, &ps->prov);
    rc = rc != 0 ? rc : otel_session_providers_sampled(st, false, &ps->prov_unsampled);
    if (rc != 0) {
        log_error(cat, "the OpenTelemetry log filter or activity sources cannot be asked for (%s)",
                  agent_strerror(rc));
        free(ps);
        return AGENT_E_INVAL;
    }
    if (gethostname(ps->host, sizeof(ps->host) - 1) != 0) {
        ps->host[0] = '\0';
    }
    uv_timer_init(a->loop, &ps->flush);
    ps->flush.data = ps;
    uv_unref((uv_handle_t *)&ps->flush);
    uv_timer_init(a->loop, &ps->stop);
    ps->stop.data = ps;
    if (st->signal[OTLP_METRICS]) {
        uint64_t every = st->metric_interval_ms > 0 ? st->metric_interval_ms : 60000;
        uv_timer_start(&ps->flush, ps_on_flush, every, every);
    }
    if (st->signal[OTLP_TRACES] || st->signal[OTLP_LOGS]) {
        ps->keeper = (struct dsession_keeper){
            .loop = a->loop, .ud = ps, .join = keeper_join, .left = keeper_left};
        dsession_set_keeper(&ps->keeper);
    }
    uv_timer_init(a->loop, &ps->order);
    ps->order.data = ps;
    uv_unref((uv_handle_t *)&ps->order);
    if (st->signal[OTLP_LOGS]) {
        uint64_t every = agent_timeout(a, TIMEOUT_LOGS_ORDER);
        uv_timer_start(&ps->order, ps_on_order, every, every);
    }
    *out = ps;
    return 0;
}

static void ps_on_flush_closed(uv_handle_t *h)
{
    struct otel_procs *ps = h->data;
    ps->closing--;
    ps_maybe_free(ps);
}

/* The drain took too long: what has not ended is aborted (the runtime's side is stopped in the
 * background), its buffered events lost. */
static void ps_on_stop(uv_timer_t *t)
{
    struct otel_procs *ps = t->data;
    size_t left = 0;
    for (struct oproc *op = ps->procs; op != NULL; op = op->next) {
        left++;
    }
    log_warn(cat,
             "shutdown: %zu OpenTelemetry session(s) did not end within %" PRIu64
             " ms; what their runtimes still held is not exported",
             left, ps->stop_ms);
    while (ps->procs != NULL) {
        op_remove(ps->procs); /* the last one calls ps_drained */
    }
}

void otel_procs_close(struct otel_procs *ps, uint64_t drain_ms, void (*done)(void *ud), void *ud)
{
    if (ps == NULL || ps->closed) {
        if (done != NULL) {
            done(ud);
        }
        return;
    }
    ps->closed = true;
    if (ps->keeper.join != NULL) {
        dsession_set_keeper(NULL);
    }
    ps->done = done;
    ps->done_ud = ud;
    ps->stop_ms = drain_ms > 0 ? drain_ms : 1;
    ps->closing++; /* the flush timer */
    uv_close((uv_handle_t *)&ps->flush, ps_on_flush_closed);
    ps->closing++; /* the order timer */
    uv_close((uv_handle_t *)&ps->order, ps_on_flush_closed);
    ps->closing++; /* the stop timer, closed by ps_drained; keeps ps alive while draining */
    ps->draining = true;
    /* Every process's last metric values first; then the sessions are stopped gracefully
     * (StopTracing, the rest of the stream fed to the decoders and so to the exporter); a
     * process without a session is removed at once, one with a session once it ended. */
    struct oproc *next = NULL;
    for (struct oproc *op = ps->procs; op != NULL; op = next) {
        next = op->next;
        op_flush_metrics(op);
        enum standing_state state =
            op->sess != NULL ? standing_state(op->sess, NULL) : STANDING_STOPPED;
        if (state == STANDING_STARTING || state == STANDING_RUNNING) {
            standing_stop(op->sess); /* op_ended(restarting false) removes it */
        } else {
            op_remove(op); /* nothing runs: no attempt, or waiting for the next */
        }
    }
    if (ps->procs != NULL) {
        uv_timer_start(&ps->stop, ps_on_stop, ps->stop_ms, 0);
    }
    ps_drained(ps); /* nothing to wait for: done now */
}

/* ---- the one-spec-set rule (otel_proc.h) ----------------------------------------------------- */

static struct oproc *op_by_pid(const struct otel_procs *ps, uint64_t pid)
{
    for (struct oproc *op = ps != NULL && !ps->closed ? ps->procs : NULL; op != NULL;
         op = op->next) {
        if (op->pid == pid) {
            return op;
        }
    }
    return NULL;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* The process whose runtime is at ep (the same socket, or the same reverse connection). */
static struct oproc *op_by_ep(const struct otel_procs *ps, const struct ipc_endpoint *ep)
{
    for (struct oproc *op = ps != NULL && !ps->closed ? ps->procs : NULL; op != NULL;
         op = op->next) {
        if (same_str(op->ep.path, ep->path) && strcmp(op->ep.uid, ep->uid) == 0) {
            return op;
        }
    }
    return NULL;
}

/* The keeper's join (dsession.h), for a session of another tool on a process whose logs are
 * exported: with Microsoft-Extensions-Logging nothing is joined (that source keeps one filter
 * per process: while both run, the last session's applies, docs/events.md §4.1), but the runtime
 * leaves it filtering every record out when that session ends, so it counts as joined and the
 * OTel session asks again once it is over (keeper_left). DiagnosticSource's one list of lines is
 * kept for every session by collect/dsession.c. */
static int keeper_join(void *ud, const struct ipc_endpoint *ep, const struct ipc_collect_config *in,
                       struct dsession_joined *j)
{
    struct otel_procs *ps = ud;
    struct oproc *op = op_by_ep(ps, ep);
    bool mel = false;
    for (size_t k = 0; op != NULL && k < in->provider_count; k++) {
        mel = mel || strcasecmp(in->providers[k].name, MEL_PROVIDER) == 0;
    }
    if (op == NULL || !ps->st->signal[OTLP_LOGS] || !mel) {
        return 0;
    }
    j->key = op->pid;
    log_info(cat,
             "process %" PRIu64 ": another Microsoft-Extensions-Logging session (one filter "
             "per process): its OpenTelemetry session starts again after that one",
             op->pid);
    return 1;
}

/* The keeper's left: that logging session is over; the OTel session asks for its filter again. */
static void keeper_left(void *ud, uint64_t key, bool had_session)
{
    struct otel_procs *ps = ud;
    struct oproc *op = op_by_pid(ps, key);
    if (op == NULL || !had_session) {
        return;
    }
    standing_restart(op->sess); /* at once, running or waiting; NULL: no session yet */
}
