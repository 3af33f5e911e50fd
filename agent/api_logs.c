/* SPDX-License-Identifier: MIT */
/*
 * GET/POST /logs: an EventPipe session of its own with one runtime (Microsoft-Extensions-Logging
 * keywords 0xC with dotnet-monitor's FilterSpecs, TplEventSource 0x80 for scopes; docs/events.md
 * §4.1, §4.3), its records built by events/ev_logs and streamed in the format the Accept header
 * picks (text/plain, application/x-ndjson, application/json-seq, in dotnet-monitor's order; a
 * missing Accept counts as any type, so text/plain, where dotnet-monitor answers 406) for
 * durationSeconds (default 30, -1 until stopped), or into an egress target with egressProvider
 * (artifact.h). An operation like /livemetrics: stop (DELETE
 * ?stop=true) ends the stream cleanly, cancel cuts it, a client that leaves ends the runtime's
 * session at once, a runtime that exits ends the stream cleanly.
 *
 * The Microsoft-Extensions-Logging EventSource exists only in an app whose logging pipeline has
 * the EventSourceLoggerProvider (README, "/logs"); enabling the provider cannot create it, and
 * the source itself is not visible from outside before events arrive (EventSource metadata is
 * sent lazily, with the first event). So before the logs session, before any response header,
 * a loader-rundown probe (logs_probe.h) lists the modules the app has loaded: without
 * Microsoft.Extensions.Logging.EventSource.dll it cannot have that provider, and the answer is a
 * 400 problem saying so and how to fix it. When the probe cannot tell (.NET 8 and older, a
 * timeout, a failure), or the assembly is loaded but no such provider logs (ClearProviders after
 * a default host builder), the session streams nothing until its duration ends; dotmon logs a
 * warning when no logging event has arrived after Timeouts:LogsQuietMs.
 */
#include "api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "artifact.h"
#include "dsession.h"
#include "err.h"
#include "ev_logs.h"
#include "http_query.h"
#include "http_server.h"
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
    struct agent *a;
    struct operation *op;     /* NULL once the artifact has ended (it settles the operation) */
    struct artifact *out;     /* the response or the egress target; NULL once ended */
    struct dsession *ds;      /* the logs session; NULL once it ended or was aborted */
    struct logs_probe *probe; /* the loader-rundown probe; NULL once it answered or was aborted */
    struct ipc_endpoint ep;   /* owned: the session starts after the probe */
    struct ev_logs *logs;
    struct mb_share share; /* what logs holds; finished when the job is freed */
    char share_what[48];
    bool budget_logged; /* the full share was logged (once per session) */
    struct logs_spec spec;
    enum ev_logs_format format;
    uv_timer_t timer;
    uv_timer_t quiet;
    int closing; /* timers being closed */
    bool streaming;
    bool stopping;
    bool paused;
    int64_t duration_s;
    uint64_t pid;
    char filename[64];
    uint64_t records;
    struct buf text; /* records of one read, written at once */
};

static void logs_on_closed(uv_handle_t *h)
{
    struct logs_job *job = h->data;
    if (--job->closing > 0) {
        return;
    }
    ev_logs_free(job->logs);
    mb_share_fini(&job->share);
    ipc_endpoint_fini(&job->ep);
    buf_fini(&job->spec.specs);
    buf_fini(&job->text);
    free(job);
}

static void logs_maybe_free(struct logs_job *job)
{
    if (job->out != NULL || job->ds != NULL || job->probe != NULL || job->closing > 0) {
        return;
    }
    job->closing = 2;
    uv_close((uv_handle_t *)&job->timer, logs_on_closed);
    uv_close((uv_handle_t *)&job->quiet, logs_on_closed);
}

/* The session's results for the operation's details. */
static cJSON *logs_results(const struct logs_job *job)
{
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
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        artifact_end_fail(out, http_status, code, message, detail, logs_results(job));
    }
}

/* Cancelled; a request not yet answered gets a problem (http_status, detail or the default). */
static void logs_end_cancel(struct logs_job *job, int http_status, const char *detail)
{
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        artifact_end_cancel(out, http_status, detail, logs_results(job));
    }
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

static int logs_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct logs_job *job = ctx;
    buf_reset(&job->text);
    int rc = ev_logs_feed(job->logs, p, n);
    if (rc != 0) {
        return rc; /* the session ends with error(AGENT_E_PROTO) */
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
    if (job->out == NULL || !job->streaming || buf_size(&job->text) == 0) {
        return 0;
    }
    if (artifact_write(job->out, buf_data(&job->text), buf_size(&job->text)) != 0) {
        return 0; /* the consumer is gone: on_lost follows */
    }
    if (artifact_full(job->out) && job->ds != NULL) {
        job->paused = true; /* until on_ready */
        dsession_pause(job->ds);
    }
    return 0;
}

static void logs_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct logs_job *job = ctx;
    const char *why = ev_logs_error(job->logs);
    (void)rc;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

static void logs_on_timer(uv_timer_t *t);

static void logs_on_quiet(uv_timer_t *t)
{
    struct logs_job *job = t->data;
    struct ev_logs_stats st;
    ev_logs_get_stats(job->logs, &st);
    if (st.mel_events == 0) {
        log_warn(cat,
                 "logs of %" PRIu64 ": no Microsoft-Extensions-Logging event in %llu ms; the app "
                 "may have no EventSource logger (see the README, /logs)",
                 job->pid, (unsigned long long)agent_timeout(job->a, TIMEOUT_LOGS_QUIET));
    }
}

static void logs_started(void *ctx, uint64_t session_id, int version)
{
    struct logs_job *job = ctx;
    log_debug(cat, "logs session 0x%" PRIx64 " (CollectTracing%d) started", session_id, version);
    if (job->op != NULL) {
        op_set_state(&job->a->ops, job->op, job->stopping ? OP_STOPPING : OP_RUNNING, NULL, NULL);
    }
    if (job->out == NULL) {
        return;
    }
    static const char *const types[] = {"application/x-ndjson", "application/json-seq",
                                        "text/plain"};
    if (artifact_begin(job->out, types[job->format], job->filename) != 0) {
        /* The client left (its on_lost follows), or the upload cannot start: on_end ends the
         * artifact, which says why. */
        if (job->ds != NULL && !job->stopping) {
            job->stopping = true;
            dsession_stop(job->ds);
        }
        return;
    }
    job->streaming = true;
    if (job->duration_s >= 0 && !job->stopping) {
        uv_timer_start(&job->timer, logs_on_timer, (uint64_t)job->duration_s * 1000, 0);
    }
    uv_timer_start(&job->quiet, logs_on_quiet, agent_timeout(job->a, TIMEOUT_LOGS_QUIET), 0);
}

/* Ends the artifact: complete when the records are all valid, else failed (the response cut, or
 * a problem; an upload aborted). */
static void logs_end(struct logs_job *job, int status, bool failed, const char *reason)
{
    if (job->streaming && !failed) {
        struct artifact *out = artifact_take(&job->out, &job->op);
        if (out != NULL) {
            artifact_end_complete(out, logs_results(job));
        }
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

/* The session's one end: the artifact ended as the session did, then the job freed if done. */
static void logs_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct logs_job *job = ctx;
    (void)hresult;
    job->ds = NULL;
    uv_timer_stop(&job->timer);
    uv_timer_stop(&job->quiet);
    log_info(cat, "logs of %" PRIu64 ": %s; %" PRIu64 " records", job->pid, reason, job->records);
    /* A runtime that exits (EOF or a reset) ends the records cleanly: they are all valid. An
     * unreadable stream or a stream that did not end after the stop does not. */
    bool failed =
        code == AGENT_E_TIMEOUT || code == AGENT_E_PROTO || (!job->streaming && code != 0);
    logs_end(job, code, failed, reason);
    logs_maybe_free(job);
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

static void logs_stop(void *ctx)
{
    struct logs_job *job = ctx;
    if (job->stopping) {
        return;
    }
    job->stopping = true;
    if (job->op != NULL && job->op->state == OP_RUNNING) {
        op_set_state(&job->a->ops, job->op, OP_STOPPING, NULL, NULL);
    }
    uv_timer_stop(&job->timer);
    if (job->ds != NULL) {
        if (job->paused) {
            job->paused = false;
            dsession_resume(job->ds);
        }
        dsession_stop(job->ds);
    }
}

static void logs_on_timer(uv_timer_t *t)
{
    logs_stop(t->data);
}

static void logs_abandon(struct logs_job *job)
{
    logs_probe_abort(job->probe); /* its session is stopped in the background */
    job->probe = NULL;
    dsession_abort(job->ds); /* StopTracing in the background; accepts NULL */
    job->ds = NULL;
    uv_timer_stop(&job->timer);
    uv_timer_stop(&job->quiet);
}

static void logs_cancel(void *ctx)
{
    struct logs_job *job = ctx;
    logs_abandon(job);
    logs_end_cancel(job, 400, NULL);
    logs_maybe_free(job);
}

/* The client disconnected, or the egress store failed (or the upload could not start). */
static void logs_on_lost(void *ud)
{
    struct logs_job *job = ud;
    log_info(cat, "logs of %" PRIu64 ": %s after %" PRIu64 " records", job->pid,
             artifact_is_egress(job->out) ? "the egress upload failed" : "client disconnected",
             job->records);
    logs_abandon(job);
    logs_end_cancel(job, 400, NULL);
    logs_maybe_free(job);
}

/* ---- requests ---- */

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

/*
 * The media type Accept picks, in dotnet-monitor's order (exact types first, then the ranges
 * that cover them); -1 for none. A missing or empty Accept counts as any type.
 */
static int pick_format(const char *accept)
{
    static const char *const types[] = {"text/plain", "application/x-ndjson",
                                        "application/json-seq"};
    static const enum ev_logs_format fmts[] = {EV_LOGS_PLAIN, EV_LOGS_NDJSON, EV_LOGS_JSON_SEQ};
    if (accept == NULL || accept[strspn(accept, " \t")] == '\0') {
        return EV_LOGS_PLAIN;
    }
    for (int pass = 0; pass < 2; pass++) {
        for (size_t t = 0; t < 3; t++) {
            size_t slash = (size_t)(strchr(types[t], '/') - types[t]);
            for (const char *p = accept; *p != '\0';) {
                p += strspn(p, " \t,");
                size_t len = strcspn(p, ",; \t");
                bool hit = pass == 0
                               ? (len == strlen(types[t]) && strncasecmp(p, types[t], len) == 0)
                               : ((len == 3 && strncmp(p, "*/*", 3) == 0) ||
                                  (len == slash + 2 && strncasecmp(p, types[t], slash) == 0 &&
                                   strncmp(p + slash, "/*", 2) == 0));
                if (hit) {
                    return (int)fmts[t];
                }
                p += strcspn(p, ",");
            }
        }
    }
    return -1;
}

/* The POST body (LogsConfiguration; member names in any case). 0, or AGENT_E_INVAL with err. */
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

/* Frees a job that never got its operation (logs_job_new's, before admission). */
static void logs_job_discard(struct logs_job *job)
{
    ev_logs_free(job->logs);
    mb_share_fini(&job->share);
    ipc_endpoint_fini(&job->ep);
    buf_fini(&job->text);
    free(job);
}

/*
 * A job for process p: the records' builder, charged to a share of the memory budget of its own
 * (its fixed part first), and the runtime's endpoint (an owned copy). 0, -ENOMEM, or
 * AGENT_E_BUDGET (*out then holds the job, for the 507's detail: discard it after).
 */
static int logs_job_new(struct agent *a, const struct ipc_process *p, struct logs_job **out)
{
    *out = NULL;
    struct logs_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        return -ENOMEM;
    }
    snprintf(job->share_what, sizeof(job->share_what), "logs of process %" PRIu64, p->pid);
    mb_share_init(&job->share, job->share_what, logs_share_cap());
    buf_init(&job->text, 0);
    job->a = a;
    job->pid = p->pid;
    *out = job;
    if (mb_charge(&job->share, ev_logs_footprint()) != 0) {
        return AGENT_E_BUDGET;
    }
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    if (ev_logs_new(&job->logs, logs_on_record, job) != 0 ||
        ev_logs_set_share(job->logs, &job->share) != 0 || ipc_endpoint_copy(&job->ep, &ep) != 0) {
        logs_job_discard(job);
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
        if (job->stopping) {
            dsession_stop(job->ds); /* stopped while the probe ran */
        }
        return;
    }
    char detail[256];
    snprintf(detail, sizeof(detail), "cannot start a logs session with process %" PRIu64 ": %s",
             job->pid, agent_strerror(rc));
    logs_end_fail(job, rc == AGENT_E_TOOBIG ? 429 : 502, "RuntimeUnreachable", agent_strerror(rc),
                  detail);
    logs_maybe_free(job);
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
    if (job->a->stopping || job->out == NULL) {
        /* Not a new session while dotmon shuts down, nor for nobody (a client that left aborts
         * the probe, so this is only defensive). */
        logs_end_cancel(job, 503, "dotmon is shutting down");
        logs_maybe_free(job);
        return;
    }
    if (r->verdict == LOGS_PROBE_NO_EVENTSOURCE || r->verdict == LOGS_PROBE_NO_LOGGING) {
        logs_answer_no_provider(job, r->verdict);
        logs_maybe_free(job);
        return;
    }
    logs_begin_session(job);
}

static const struct artifact_spec logs_spec = {.kind = OP_KIND_LOGS,
                                               .noun = "logs",
                                               .limit_setting = NULL,
                                               .high_water = LOGS_HIGH_WATER,
                                               .low_water = LOGS_LOW_WATER};
static const struct artifact_events logs_events = {.on_ready = logs_on_ready,
                                                   .on_lost = logs_on_lost};

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
        logs_job_discard(job);
        goto fail;
    }
    if (rc != 0) {
        artifact_refuse(o, 500, "out of memory");
        goto fail;
    }
    if (artifact_admit_origin(a, o, p, &logs_spec, &logs_events, job, &job->out, &op) != 0) {
        logs_job_discard(job);
        goto fail;
    }
    job->op = op;
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".txt", ts, p->pid);
    op->artifact_name = strdup(job->filename);
    uv_timer_init(a->loop, &job->timer);
    uv_timer_init(a->loop, &job->quiet);
    job->timer.data = job;
    job->quiet.data = job;
    job->spec = *spec;
    memset(spec, 0, sizeof(*spec)); /* ownership moved to the job */
    job->duration_s = duration_s;
    job->format = (enum ev_logs_format)format;
    op->stoppable = true;
    op->control.stop = logs_stop;
    op->control.cancel = logs_cancel;
    op->ctx = job;
    artifact_accept(job->out); /* egress: 202 now; the operation tells the rest */
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

int api_logs_collect(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                     const char *body, int64_t duration_s, int format)
{
    static const enum ev_logs_format fmts[] = {EV_LOGS_PLAIN, EV_LOGS_NDJSON, EV_LOGS_JSON_SEQ};
    struct logs_spec spec = {0};
    buf_init(&spec.specs, SPECS_MAX);
    struct buf err;
    buf_init(&err, 1024);
    int rc = -1;
    if (format < 0 || format > 2) {
        artifact_refuse(o, 400, "unknown logs format %d", format);
        buf_fini(&spec.specs);
    } else if (spec_from_json(&spec, body, strlen(body), &err) != 0) {
        artifact_refuse(o, 400, "%s", buf_cstr(&err));
        buf_fini(&spec.specs);
    } else {
        rc = logs_start(a, o, p, &spec, duration_s, (int)fmts[format]);
    }
    buf_fini(&err);
    return rc;
}

/* Process, duration and format, common to GET and POST; -1 when a problem was answered. */
static int logs_common(struct agent *a, struct http_request *req, const struct ipc_process **p,
                       int64_t *duration)
{
    int format = pick_format(http_request_header(req, "Accept"));
    if (format < 0) {
        api_problem(req, 406,
                    "/logs produces text/plain, application/x-ndjson or application/json-seq");
        return -1;
    }
    *p = api_select_process(a, req);
    if (*p == NULL || api_parse_duration(req, duration) != 0) {
        return -1;
    }
    return format;
}

void api_logs_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = NULL;
    int64_t duration = 0;
    int format = logs_common(a, req, &p, &duration);
    if (format < 0) {
        return;
    }
    struct logs_spec spec = {.level = EV_LOG_TRACE, .app_filters = true};
    buf_init(&spec.specs, SPECS_MAX);
    struct buf level;
    buf_init(&level, 64);
    int has = http_query_get(http_request_query(req), "level", &level);
    if (has == 1) {
        spec.level = ev_log_level_parse(buf_cstr(&level));
        spec.app_filters = false;
        spec.client_level = true;
    }
    buf_fini(&level);
    if (has < 0 || spec.level < 0) {
        api_problem(req, 400,
                    "level must be one of Trace, Debug, Information, Warning, Error, "
                    "Critical, None");
        buf_fini(&spec.specs);
        return;
    }
    if (spec.app_filters && buf_append_str(&spec.specs, "UseAppFilters") != 0) {
        api_problem(req, 500, "out of memory");
        buf_fini(&spec.specs);
        return;
    }
    const struct artifact_origin o = {.req = req};
    (void)logs_start(a, &o, p, &spec, duration, format);
}

void api_logs_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415, "POST /logs takes a JSON body, not %s", ct);
        return;
    }
    const struct ipc_process *p = NULL;
    int64_t duration = 0;
    int format = logs_common(a, req, &p, &duration);
    if (format < 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct buf err;
    buf_init(&err, 4096);
    struct logs_spec spec = {0};
    buf_init(&spec.specs, SPECS_MAX);
    if (len == 0) {
        api_problem(req, 400, "POST /logs needs a JSON body (LogsConfiguration)");
        buf_fini(&spec.specs);
    } else if (spec_from_json(&spec, (const char *)body, len, &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
        buf_fini(&spec.specs);
    } else {
        const struct artifact_origin o = {.req = req};
        (void)logs_start(a, &o, p, &spec, duration, format);
    }
    buf_fini(&err);
}

void api_logs_shutdown(struct agent *a)
{
    for (size_t i = 0; i < a->ops.n; i++) {
        struct operation *op = a->ops.v[i];
        if (op->kind == OP_KIND_LOGS && !op_is_finished(op) && op->control.stop != NULL) {
            op->control.stop(op->ctx);
        }
    }
}
