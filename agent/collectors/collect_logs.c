/* SPDX-License-Identifier: MIT */
/*
 * The logs collector (collectors.h collect_logs, collect_logs_level; GET/POST /logs are in
 * api_collect.c): an EventPipe session of its own with one runtime (Microsoft-Extensions-Logging
 * keywords 0xC with dotnet-monitor's FilterSpecs, TplEventSource 0x80 for scopes; docs/events.md
 * §4.1, §4.3), its records built by events/ev_logs and streamed in the format the Accept header
 * picks (text/plain, application/x-ndjson, application/json-seq, in dotnet-monitor's order; a
 * missing Accept counts as any type, so text/plain, where dotnet-monitor answers 406) for
 * durationSeconds (default 30, -1 until stopped), or into an egress target with egressProvider
 * (artifact.h). An operation like /livemetrics: stop (DELETE
 * ?stop=true) ends the stream cleanly, cancel cuts it, a client that leaves ends the runtime's
 * session at once, a runtime that exits ends the stream cleanly. The job runs on the
 * collection-job core (collect/job.h): operation, artifact, duration timer, state and the end path
 * are the core's; this file supplies the probe and the session.
 *
 * The Microsoft-Extensions-Logging EventSource exists only in an app whose logging pipeline has
 * the EventSourceLoggerProvider (docs/routes.md, "Logs"); enabling the provider cannot create it,
 * and the source itself is not visible from outside before events arrive (EventSource metadata is
 * sent lazily, with the first event). So before the logs session, before any response header,
 * a loader-rundown probe (logs_probe.h) lists the modules the app has loaded: without
 * Microsoft.Extensions.Logging.EventSource.dll it cannot have that provider, and the answer is a
 * 400 problem saying so and how to fix it. When the probe cannot tell (.NET 8 and older, a
 * timeout, a failure), or the assembly is loaded but no such provider logs (ClearProviders after
 * a default host builder), the session streams nothing until its duration ends; dotmon logs a
 * warning when no logging event has arrived after Timeouts:LogsQuietMs.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "api.h"
#include "artifact.h"
#include "collectors.h"
#include "dsession.h"
#include "err.h"
#include "ev_logs.h"
#include "http_query.h"
#include "http_server.h"
#include "ipc_cmd.h"
#include "log.h"
#include "logs_probe.h"
#include "membudget.h"
#include "operations.h"

static const char cat[] = "dotmon.logs";

#define MEL_PROVIDER    "Microsoft-Extensions-Logging"
#define TPL_PROVIDER    "System.Threading.Tasks.TplEventSource"
#define LOGS_BUFFER_MB  16
#define SPECS_MAX       (16u * 1024u)
#define LOGS_HIGH_WATER (1024u * 1024u) /* pause the runtime's stream above this */
#define LOGS_LOW_WATER  (256u * 1024u)
/* Sessions still closing in the background (clients that left) beyond the running ones. */
#define LOGS_SESSION_SLACK 8u
/*
 * Each logs session's share of dotmon's memory budget (the decoder, its scopes and metadata):
 * 1/8 of the budget, at least LOGS_SHARE_MIN; LOGS_SHARE_UNBUDGETED when dotmon has no budget.
 */
#define LOGS_SHARE_DIV        8u
#define LOGS_SHARE_MIN        (4ull * 1024 * 1024)
#define LOGS_SHARE_UNBUDGETED (32ull * 1024 * 1024)

struct logs_spec {
    int level;         /* the default level (LogLevel) */
    bool app_filters;  /* UseAppFilters */
    bool client_level; /* drop records under `level` here too (GET with level) */
    struct buf specs;  /* the FilterSpecs argument value */
};

struct logs_job {
    struct job core; /* first: operation, artifact (core.art), duration timer, state */
    struct agent *a;
    struct dsession *ds;      /* the logs session; NULL once it ended or was aborted */
    struct logs_probe *probe; /* the loader-rundown probe; NULL once it answered or was aborted */
    struct ipc_endpoint ep;   /* owned: the session starts after the probe */
    struct ev_logs *logs;
    struct mb_share share; /* what logs holds; finished when the job is freed */
    char share_what[48];
    bool budget_logged; /* the full share was logged (once per session) */
    struct logs_spec spec;
    enum ev_logs_format format;
    uv_timer_t quiet;
    uv_timer_t order; /* the decoder's tick (Timeouts:LogsOrderMs; events.md §4.4) */
    bool streaming;   /* the artifact has begun */
    bool paused;
    int64_t duration_s;
    uint64_t pid;
    bool no_stacks; /* the runtime can be asked for no stack walks (nothing here reads them) */
    char filename[64];
    uint64_t records;
    struct buf text; /* records of one read, written at once */
};

static const struct job_vtable logs_vt;

static struct logs_job *logs_of(struct job *core)
{
    return (struct logs_job *)core;
}

static bool logs_stopping(const struct logs_job *job)
{
    return job->core.state == JOB_STOPPING;
}

/* The core's fini, once the timers are closed. */
static void logs_fini(struct job *core)
{
    struct logs_job *job = logs_of(core);
    ev_logs_free(job->logs);
    mb_share_fini(&job->share);
    ipc_endpoint_fini(&job->ep);
    buf_fini(&job->spec.specs);
    buf_fini(&job->text);
}

/* The probe and the session keep the job. */
static bool logs_holds(const struct job *core)
{
    const struct logs_job *job = (const struct logs_job *)core;
    return job->ds != NULL || job->probe != NULL;
}

/* The session's results for the operation's details. */
static cJSON *logs_results(struct job *core)
{
    const struct logs_job *job = logs_of(core);
    cJSON *extra = cJSON_CreateObject();
    if (extra != NULL) {
        struct ev_logs_stats st;
        ev_logs_get_stats(job->logs, &st);
        cJSON_AddNumberToObject(extra, "records", (double)job->records);
        cJSON_AddNumberToObject(extra, "loggingEvents", (double)st.mel_events);
        cJSON_AddNumberToObject(extra, "lostEvents", (double)st.lost);
        cJSON_AddNumberToObject(extra, "scopesDropped", (double)st.scopes_dropped);
    }
    return extra;
}

/* Fails the operation; a request not yet answered gets a problem with detail. */
static void logs_end_fail(struct logs_job *job, int http_status, const char *code,
                          const char *message, const char *detail)
{
    job_end(&job->core, JOB_END_FAIL, http_status, code, message, detail);
}

/* ---- the session's stream ---- */

static void logs_on_record(void *ud, const struct ev_log_record *r)
{
    struct logs_job *job = ud;
    if (job->spec.client_level && r->level < job->spec.level) {
        return;
    }
    size_t mark = buf_size(&job->text);
    if (ev_logs_format_record(r, job->format, &job->text) != 0) {
        buf_truncate(&job->text, mark);
        return;
    }
    job->records++;
}

static void logs_on_ready(void *ud)
{
    struct logs_job *job = ud;
    if (job->paused && job->ds != NULL) {
        job->paused = false;
        dsession_resume(job->ds);
    }
}

/* ---- the consumer of the decoded session: ev_logs, then the artifact ---- */

/* The records formatted since the last call to the artifact (job->text then emptied). */
static void logs_write(struct logs_job *job)
{
    if (job->core.art == NULL || !job->streaming || buf_size(&job->text) == 0) {
        buf_reset(&job->text);
        return;
    }
    int rc = artifact_write(job->core.art, buf_data(&job->text), buf_size(&job->text));
    buf_reset(&job->text);
    if (rc != 0) {
        return; /* the consumer is gone: on_lost follows */
    }
    if (artifact_full(job->core.art) && job->ds != NULL && !job->paused) {
        job->paused = true; /* until on_ready */
        dsession_pause(job->ds);
    }
}

static int logs_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct logs_job *job = ctx;
    buf_reset(&job->text);
    int rc = ev_logs_feed(job->logs, p, n);
    if (rc != 0) {
        logs_write(job); /* what came before the damage */
        return rc;       /* the session ends with error(AGENT_E_PROTO) */
    }
    if (!job->budget_logged && atomic_load(&job->share.refused) > 0) {
        struct ev_logs_stats st;
        ev_logs_get_stats(job->logs, &st);
        job->budget_logged = true;
        char msg[512];
        log_warn(cat,
                 "logs of %" PRIu64 ": %s; new scopes are dropped (%" PRIu64 " so far, "
                 "counted in the operation's scopesDropped), records still streamed",
                 job->pid,
                 api_budget_detail(msg, sizeof(msg), "what the runtime logs", &job->share),
                 st.scopes_dropped);
    }
    logs_write(job);
    return 0;
}

/* A quiet stream lets the records held for their order go (ev_logs_tick). */
static void logs_on_order(uv_timer_t *t)
{
    struct logs_job *job = t->data;
    if (job->ds != NULL && !job->paused) {
        buf_reset(&job->text);
        ev_logs_tick(job->logs);
        logs_write(job);
    }
}

/* The decoder's words for a stream it refused. */
static void logs_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct logs_job *job = ctx;
    const char *why = ev_logs_error(job->logs);
    (void)rc;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

static void logs_on_quiet(uv_timer_t *t)
{
    struct logs_job *job = t->data;
    struct ev_logs_stats st;
    ev_logs_get_stats(job->logs, &st);
    if (st.mel_events == 0) {
        log_warn(cat,
                 "logs of %" PRIu64 ": no Microsoft-Extensions-Logging event in %llu ms; the app "
                 "may have no EventSource logger (see docs/routes.md, Logs)",
                 job->pid, (unsigned long long)agent_timeout(job->a, TIMEOUT_LOGS_QUIET));
    }
}

static void logs_started(void *ctx, uint64_t session_id, int version)
{
    struct logs_job *job = ctx;
    log_debug(cat, "logs session 0x%" PRIx64 " (CollectTracing%d) started", session_id, version);
    job_running(&job->core); /* the operation Running (Stopping when a stop came first) */
    if (job->core.art == NULL) {
        return;
    }
    static const char *const types[] = {"application/x-ndjson", "application/json-seq",
                                        "text/plain"};
    if (artifact_begin(job->core.art, types[job->format], job->filename) != 0) {
        /* The client left (its on_lost follows), or the upload cannot start: on_end ends the
         * artifact, which says why. */
        if (job->ds != NULL && job->core.state == JOB_RUNNING) {
            job_set_state(&job->core, JOB_STOPPING); /* the operation stays as it is */
            dsession_stop(job->ds);
        }
        return;
    }
    job->streaming = true;
    if (job->duration_s >= 0 && !logs_stopping(job)) {
        job_arm_timeout(&job->core, (uint64_t)job->duration_s * 1000);
    }
    uv_timer_start(&job->quiet, logs_on_quiet, agent_timeout(job->a, TIMEOUT_LOGS_QUIET), 0);
    uint64_t every = agent_timeout(job->a, TIMEOUT_LOGS_ORDER);
    uv_timer_start(&job->order, logs_on_order, every, every);
}

/* Ends the artifact: complete when the records are all valid, else failed (the response cut, or
 * a problem; an upload aborted). */
static void logs_end(struct logs_job *job, int status, bool failed, const char *reason)
{
    if (job->streaming && !failed) {
        job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
        return;
    }
    char detail[400];
    snprintf(detail, sizeof(detail), "cannot collect logs from process %" PRIu64 ": %s", job->pid,
             reason);
    logs_end_fail(job,
                  status == AGENT_E_RUNTIME   ? 400
                  : status == AGENT_E_TIMEOUT ? 504
                                              : 502,
                  job->streaming ? "StreamFailed" : "RuntimeUnreachable", reason, detail);
}

/* The session's one end: the artifact ended as the session did, then the job released. */
static void logs_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct logs_job *job = ctx;
    (void)hresult;
    job->ds = NULL;
    uv_timer_stop(&job->core.timer);
    uv_timer_stop(&job->quiet);
    uv_timer_stop(&job->order);
    buf_reset(&job->text); /* the records still held for their order: nothing follows them */
    ev_logs_flush(job->logs);
    logs_write(job);
    log_info(cat, "logs of %" PRIu64 ": %s; %" PRIu64 " records", job->pid, reason, job->records);
    /* A runtime that exits (EOF or a reset) ends the records cleanly: they are all valid. An
     * unreadable stream or a stream that did not end after the stop does not. */
    bool failed =
        code == AGENT_E_TIMEOUT || code == AGENT_E_PROTO || (!job->streaming && code != 0);
    logs_end(job, code, failed, reason);
    job_release(&job->core);
}

static void logs_finish(void *ctx, const char *how)
{
    logs_error(ctx, 0, 0, how);
}

static const struct dsession_consumer logs_consumer = {.started = logs_started,
                                                       .feed = logs_feed,
                                                       .describe = logs_describe,
                                                       .finish = logs_finish,
                                                       .error = logs_error};

/* The core's graceful stop (DELETE ?stop=true, the duration, shutdown): StopTracing, or, while
 * the probe runs, once the session exists (logs_begin_session). */
static void logs_stop(struct job *core)
{
    struct logs_job *job = logs_of(core);
    uv_timer_stop(&core->timer);
    if (job->ds != NULL) {
        if (job->paused) {
            job->paused = false;
            dsession_resume(job->ds);
        }
        dsession_stop(job->ds);
    }
}

/* The core's abort: DELETE, the client disconnected, or the egress store failed (or the upload
 * could not start). The probe and the session end in the background. */
static void logs_abort(struct job *core, enum job_why why)
{
    struct logs_job *job = logs_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "logs of %" PRIu64 ": %s after %" PRIu64 " records", job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed" : "client disconnected",
                 job->records);
    }
    logs_probe_abort(job->probe); /* its session is stopped in the background */
    job->probe = NULL;
    dsession_abort(job->ds); /* StopTracing in the background; accepts NULL */
    job->ds = NULL;
    uv_timer_stop(&core->timer);
    uv_timer_stop(&job->quiet);
    uv_timer_stop(&job->order);
}

/* ---- requests ---- */

/* None as the default level: dotnet-monitor's logs pipeline refuses it (a 400 before anything is
 * streamed); None stays valid as a filterSpecs level (that category is left out). */
#define LOGS_NONE_REFUSED "LogLevel None is not supported as the default log level."

/* dotnet-monitor's LogLevel → EventLevel (docs/events.md §4.1). */
static uint32_t event_level(int level)
{
    static const uint32_t map[] = {0, 5, 4, 3, 2, 1, 1};
    return level >= 0 && level <= EV_LOG_NONE ? map[level] : 4;
}

/* Appends ";Cat[:Level]" (no ';' first when the spec is empty). */
static int spec_add(struct buf *b, const char *category, int level)
{
    int rc = buf_printf(b, "%s%s", buf_size(b) > 0 ? ";" : "", category);
    if (rc == 0 && level >= 0) {
        rc = buf_printf(b, ":%s", ev_log_level_name(level));
    }
    return rc;
}

static int spec_from_json(struct logs_spec *s, const char *body, size_t len, struct buf *err)
{
    cJSON *root = cJSON_ParseWithLength(body, len);
    int rc = AGENT_E_INVAL;
    if (root == NULL || !cJSON_IsObject(root)) {
        (void)buf_append_str(err, "the body is not a JSON object (LogsConfiguration)");
        goto out;
    }
    s->level = EV_LOG_WARNING;
    s->app_filters = true;
    cJSON *filters = NULL;
    for (cJSON *m = root->child; m != NULL; m = m->next) {
        if (strcasecmp(m->string, "logLevel") == 0 && !cJSON_IsNull(m)) {
            s->level = cJSON_IsString(m) ? ev_log_level_parse(m->valuestring) : -1;
            if (s->level < 0) {
                (void)buf_append_str(err, "logLevel must be a LogLevel name");
                goto out;
            }
            if (s->level == EV_LOG_NONE) {
                (void)buf_append_str(err, LOGS_NONE_REFUSED);
                goto out;
            }
        } else if (strcasecmp(m->string, "useAppFilters") == 0) {
            if (!cJSON_IsBool(m)) {
                (void)buf_append_str(err, "useAppFilters must be true or false");
                goto out;
            }
            s->app_filters = cJSON_IsTrue(m);
        } else if (strcasecmp(m->string, "filterSpecs") == 0) {
            if (!cJSON_IsNull(m) && !cJSON_IsObject(m)) {
                (void)buf_append_str(err, "filterSpecs must be an object {category: level}");
                goto out;
            }
            filters = m;
        } else {
            (void)buf_printf(err, "unknown member '%s' in LogsConfiguration", m->string);
            goto out;
        }
    }
    if (s->app_filters && buf_append_str(&s->specs, "UseAppFilters") != 0) {
        goto out;
    }
    for (cJSON *f = filters != NULL ? filters->child : NULL; f != NULL; f = f->next) {
        int level = cJSON_IsString(f) ? ev_log_level_parse(f->valuestring) : -1;
        if ((!cJSON_IsNull(f) && level < 0) || f->string[0] == '\0' ||
            strpbrk(f->string, ";:\"\r\n") != NULL) {
            (void)buf_printf(err,
                             "filterSpecs: '%s' needs a category without ';' or ':' and a "
                             "LogLevel name or null",
                             f->string);
            goto out;
        }
        if (spec_add(&s->specs, f->string, cJSON_IsNull(f) ? -1 : level) != 0) {
            (void)buf_append_str(err, "filterSpecs is too long");
            goto out;
        }
    }
    rc = 0;
out:
    cJSON_Delete(root);
    return rc;
}

/* The session's two providers; args holds the MEL argument string. */
static int logs_session_start(struct logs_job *job)
{
    struct buf args;
    buf_init(&args, SPECS_MAX + 64);
    int rc = 0;
    if (buf_size(&job->spec.specs) > 0) {
        rc = buf_printf(&args, "FilterSpecs=\"%s\"", buf_cstr(&job->spec.specs));
    }
    struct ipc_provider prov[2] = {
        {.name = MEL_PROVIDER,
         .keywords = 0xC,
         .level = event_level(job->spec.level),
         .arguments = buf_size(&args) > 0 ? buf_cstr(&args) : NULL},
        {.name = TPL_PROVIDER, .keywords = 0x80, .level = 4},
    };
    struct ipc_collect_config collect = {.buffer_mb = LOGS_BUFFER_MB,
                                         .format = 1,
                                         .rundown_keyword = 0,
                                         .disable_stackwalk = job->no_stacks,
                                         .providers = prov,
                                         .provider_count = 2};
    struct dsession_config cfg = {.collect = &collect,
                                  .admission = &job->a->sessions,
                                  .start_timeout_ms = agent_timeout(job->a, TIMEOUT_LOGS_START),
                                  .stop_timeout_ms = agent_timeout(job->a, TIMEOUT_LOGS_STOP)};
    if (rc == 0) {
        rc = dsession_start(job->a->loop, &job->ep, &cfg, &logs_consumer, job, &job->ds);
    }
    buf_fini(&args);
    return rc;
}

static uint64_t logs_share_cap(void)
{
    uint64_t total = membudget_total();
    if (total == 0) {
        return LOGS_SHARE_UNBUDGETED;
    }
    return total / LOGS_SHARE_DIV > LOGS_SHARE_MIN ? total / LOGS_SHARE_DIV : LOGS_SHARE_MIN;
}

/*
 * A job for process p: the records' builder, charged to a share of the memory budget of its own
 * (its fixed part first), and the runtime's endpoint (an owned copy). 0, -ENOMEM, or
 * AGENT_E_BUDGET (*out then holds the job, for the 507's detail: discard it after).
 */
static int logs_job_new(struct agent *a, const struct ipc_process *p, struct logs_job **out)
{
    *out = NULL;
    struct logs_job *job = (struct logs_job *)job_new(&a->collect, &logs_vt, sizeof(*job));
    if (job == NULL) {
        return -ENOMEM;
    }
    job_add_timer(&job->core, &job->quiet);
    job_add_timer(&job->core, &job->order);
    snprintf(job->share_what, sizeof(job->share_what), "logs of process %" PRIu64, p->pid);
    mb_share_init(&job->share, job->share_what, logs_share_cap());
    buf_init(&job->text, 0);
    job->a = a;
    job->pid = p->pid;
    job->no_stacks = ipc_stackwalk_optional(p->clr_version);
    *out = job;
    if (mb_charge(&job->share, ev_logs_footprint()) != 0) {
        return AGENT_E_BUDGET;
    }
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    if (ev_logs_new(&job->logs, logs_on_record, job) != 0 ||
        ev_logs_set_share(job->logs, &job->share) != 0 || ipc_endpoint_copy(&job->ep, &ep) != 0) {
        job_release(&job->core);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* Starts the logs session once the probe let it (or could not tell); a failure ends the job. */
static void logs_begin_session(struct logs_job *job)
{
    int rc = logs_session_start(job);
    if (rc == 0) {
        if (logs_stopping(job)) {
            dsession_stop(job->ds); /* stopped while the probe ran */
        }
        return;
    }
    char detail[256];
    snprintf(detail, sizeof(detail), "cannot start a logs session with process %" PRIu64 ": %s",
             job->pid, agent_strerror(rc));
    logs_end_fail(job, rc == AGENT_E_TOOBIG ? 429 : 502, "RuntimeUnreachable", agent_strerror(rc),
                  detail);
    job_release(&job->core);
}

/* The 400 for an app that cannot give logs: what is missing and how to add it. */
static void logs_answer_no_provider(struct logs_job *job, enum logs_probe_verdict v)
{
    static const char fix[] =
        "Log through ILogger with the EventSource logger provider: a default host builder "
        "(Host.CreateApplicationBuilder, WebApplication.CreateBuilder) adds it unless "
        "ClearProviders() is called, or add it with builder.Logging.AddEventSourceLogger() "
        "(or AddEventSourceLogger() in LoggerFactory.Create).";
    char detail[1024];
    if (v == LOGS_PROBE_NO_LOGGING) {
        snprintf(detail, sizeof(detail),
                 "Process %" PRIu64 " does not use Microsoft.Extensions.Logging (neither "
                 "Microsoft.Extensions.Logging.dll nor Microsoft.Extensions.Logging.EventSource"
                 ".dll is loaded), so it has no logs to stream. %s",
                 job->pid, fix);
    } else {
        snprintf(detail, sizeof(detail),
                 "Process %" PRIu64 " has no EventSource logger provider "
                 "(Microsoft.Extensions.Logging.dll is loaded, "
                 "Microsoft.Extensions.Logging.EventSource.dll is not), so its ILogger records "
                 "cannot be read from outside the process. %s",
                 job->pid, fix);
    }
    logs_end_fail(job, 400, "NoEventSourceLogger",
                  v == LOGS_PROBE_NO_LOGGING
                      ? "the process does not use Microsoft.Extensions.Logging"
                      : "the process has no EventSource logger provider",
                  detail);
}

static const char *verdict_text(enum logs_probe_verdict v)
{
    switch (v) {
    case LOGS_PROBE_EVENTSOURCE:
        return "Microsoft.Extensions.Logging.EventSource is loaded";
    case LOGS_PROBE_NO_EVENTSOURCE:
        return "no EventSource logger provider";
    case LOGS_PROBE_NO_LOGGING:
        return "no Microsoft.Extensions.Logging";
    case LOGS_PROBE_UNKNOWN:
    default:
        return "cannot tell";
    }
}

/* The probe's answer: a 400 when the app cannot give logs, else the logs session. */
static void logs_on_probe(void *ud, const struct logs_probe_result *r)
{
    struct logs_job *job = ud;
    job->probe = NULL;
    log_info(cat,
             "logs of %" PRIu64 ": loader-rundown probe (CollectTracing%d) in %" PRIu64
             " ms, %" PRIu64 " module events: %s%s%s",
             job->pid, r->version, r->elapsed_ms, r->modules, verdict_text(r->verdict),
             r->reason != NULL ? ": " : "", r->reason != NULL ? r->reason : "");
    if (job->a->stopping || job->core.art == NULL) {
        /* Not a new session while dotmon shuts down, nor for nobody (a client that left aborts
         * the probe, so this is only defensive). */
        job_end(&job->core, JOB_END_CANCEL, 503, NULL, NULL, "dotmon is shutting down");
        job_release(&job->core);
        return;
    }
    if (r->verdict == LOGS_PROBE_NO_EVENTSOURCE || r->verdict == LOGS_PROBE_NO_LOGGING) {
        logs_answer_no_provider(job, r->verdict);
        job_release(&job->core);
        return;
    }
    logs_begin_session(job);
}

static const struct artifact_spec logs_spec = {.kind = OP_KIND_LOGS,
                                               .noun = "logs",
                                               .limit_setting = NULL,
                                               .high_water = LOGS_HIGH_WATER,
                                               .low_water = LOGS_LOW_WATER};
static const struct artifact_events logs_events = {.on_ready = logs_on_ready, .on_lost = job_lost};

static const struct job_vtable logs_vt = {.kind = OP_KIND_LOGS,
                                          .noun = "logs",
                                          .stop = logs_stop,
                                          .abort = logs_abort,
                                          .results = logs_results,
                                          .holds = logs_holds,
                                          .fini = logs_fini};

/* Registers the operation and starts the session; takes spec. 0, or -1 when refused. */
static int logs_start(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                      struct logs_spec *spec, int64_t duration_s, int format)
{
    struct operation *op = NULL;
    /* As for traces: a client hanging up in a loop must not pile sessions up in the runtime. */
    if (a->sessions.live >=
        a->ops.limit[OP_KIND_TRACE] + a->ops.limit[OP_KIND_LOGS] + LOGS_SESSION_SLACK) {
        artifact_refuse(o, 429, "%zu sessions are still being closed; retry in a few seconds",
                        a->sessions.live);
        goto fail;
    }
    struct logs_job *job = NULL;
    int rc = logs_job_new(a, p, &job);
    if (rc == AGENT_E_BUDGET) {
        char msg[512];
        artifact_refuse(o, 507, "%s",
                        api_budget_detail(msg, sizeof(msg), "a logs session", &job->share));
        job_release(&job->core);
        goto fail;
    }
    if (rc != 0) {
        artifact_refuse(o, 500, "out of memory");
        goto fail;
    }
    if (artifact_admit_origin(a, o, p, &logs_spec, &logs_events, job, &job->core.art, &op) != 0) {
        job_release(&job->core);
        goto fail;
    }
    job_admitted(&job->core, op); /* DELETE stops or cancels through the core */
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".txt", ts, p->pid);
    op->artifact_name = strdup(job->filename);
    job->spec = *spec;
    memset(spec, 0, sizeof(*spec)); /* ownership moved to the job */
    job->duration_s = duration_s;
    job->format = (enum ev_logs_format)format;
    artifact_accept(job->core.art); /* egress: 202 now; the operation tells the rest */
    rc = logs_probe_start(a, &job->ep, agent_timeout(a, TIMEOUT_LOGS_PROBE), logs_on_probe, job,
                          &job->probe);
    if (rc != 0) {
        log_info(cat, "logs of %" PRIu64 ": no loader-rundown probe (%s); streaming", p->pid,
                 agent_strerror(rc));
        logs_begin_session(job);
    }
    return 0;
fail:
    buf_fini(&spec->specs);
    return -1;
}

static const enum ev_logs_format logs_formats[] = {EV_LOGS_PLAIN, EV_LOGS_NDJSON, EV_LOGS_JSON_SEQ};

int collect_logs(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                 const char *body, size_t len, int64_t duration_s, int format)
{
    struct logs_spec spec = {0};
    buf_init(&spec.specs, SPECS_MAX);
    struct buf err;
    buf_init(&err, 1024);
    int rc = -1;
    if (format < 0 || format > 2) {
        artifact_refuse(o, 400, "unknown logs format %d", format);
        buf_fini(&spec.specs);
    } else if (spec_from_json(&spec, body, len, &err) != 0) {
        artifact_refuse(o, 400, "%s", buf_cstr(&err));
        buf_fini(&spec.specs);
    } else {
        rc = logs_start(a, o, p, &spec, duration_s, (int)logs_formats[format]);
    }
    buf_fini(&err);
    return rc;
}

int collect_logs_level(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p, const char *level, int64_t duration_s,
                       int format)
{
    struct logs_spec spec = {.level = EV_LOG_TRACE, .app_filters = true};
    if (format < 0 || format > 2) {
        artifact_refuse(o, 400, "unknown logs format %d", format);
        return -1;
    }
    if (level != NULL) {
        spec.level = ev_log_level_parse(level);
        spec.app_filters = false;
        spec.client_level = true;
    }
    if (spec.level < 0) {
        artifact_refuse(o, 400,
                        "level must be one of Trace, Debug, Information, Warning, Error, "
                        "Critical, None");
        return -1;
    }
    if (spec.level == EV_LOG_NONE) {
        artifact_refuse(o, 400, "%s", LOGS_NONE_REFUSED);
        return -1;
    }
    buf_init(&spec.specs, SPECS_MAX);
    if (spec.app_filters && buf_append_str(&spec.specs, "UseAppFilters") != 0) {
        artifact_refuse(o, 500, "out of memory");
        buf_fini(&spec.specs);
        return -1;
    }
    return logs_start(a, o, p, &spec, duration_s, (int)logs_formats[format]);
}
