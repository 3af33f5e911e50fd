/* SPDX-License-Identifier: MIT */
/*
 * The live-metrics collector (collectors.h collect_livemetrics; GET/POST /livemetrics are in
 * api_collect.c): a metrics session of its own with one runtime, its values streamed as
 * application/json-seq records in dotnet-monitor's shape (docs/api.md §7.4) for
 * durationSeconds (default 30, -1 until stopped), or into an egress target with egressProvider
 * (artifact.h; records are dropped, counted, while it is behind). GET collects what the Metrics
 * settings name (as dotnet-monitor 8+), POST what its EventMetricsConfiguration body names. An
 * operation like a trace: stop (DELETE ?stop=true) ends the stream cleanly, cancel cuts it, a
 * client that leaves ends the runtime's session at once; a runtime that exits ends the stream
 * cleanly. The job runs on the collection-job core (collect/job.h): operation, artifact,
 * duration timer, state and the end path are the core's; this file supplies the session.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <uv.h>

#include "agent.h"
#include "api.h"
#include "artifact.h"
#include "collectors.h"
#include "err.h"
#include "ev_prom_name.h"
#include "ev_store.h"
#include "log.h"
#include "metrics_session.h"
#include "num.h"
#include "operations.h"

static const char cat[] = "dotmon.livemetrics";

/* Records wait in the response's queue up to this; past it new ones are dropped (counted), as
 * dotnet-monitor drops past its 1000-payload queue. */
#define LM_HIGH_WATER (1024u * 1024u)

struct lm_job {
    struct job core; /* first: operation, artifact (core.art), duration timer, state */
    struct agent *a;
    struct msession *sess; /* NULL after on_end or abort */
    struct metrics_filters f;
    bool streaming; /* the artifact has begun */
    int64_t duration_s;
    uint64_t pid;
    char uid[37];
    char filename[64];
    uint64_t records;
    uint64_t dropped;
};

static struct lm_job *lm_of(struct job *core)
{
    return (struct lm_job *)core;
}

/* The core's fini, once the timer is closed. */
static void lm_fini(struct job *core)
{
    metrics_filters_fini(&lm_of(core)->f);
}

/* The session keeps the job. */
static bool lm_holds(const struct job *core)
{
    return ((const struct lm_job *)core)->sess != NULL;
}

/* The session's results for the operation's details. */
static cJSON *lm_results(struct job *core)
{
    const struct lm_job *job = lm_of(core);
    cJSON *extra = cJSON_CreateObject();
    if (extra != NULL) {
        cJSON_AddNumberToObject(extra, "records", (double)job->records);
        cJSON_AddNumberToObject(extra, "droppedRecords", (double)job->dropped);
    }
    return extra;
}

/* ISO-8601 round-trip time as .NET writes a local DateTime in a UTC container. */
static void iso_time(int64_t unix_ms, char *out, size_t n)
{
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(out, n, "%04d-%02d-%02dT%02d:%02d:%02d.%03d0000+00:00", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)(unix_ms % 1000));
}

static int json_string_or_null(struct buf *b, const char *s)
{
    if (s == NULL) {
        return buf_append_str(b, "null");
    }
    int rc = buf_append_str(b, "\"");
    rc = rc ? rc : buf_append_json_escaped(b, s);
    return rc ? rc : buf_append_str(b, "\"");
}

/* One json-seq record: RS, the object, LF. */
static int lm_record(struct buf *b, const struct ev_metric_sample *s, const char *display,
                     const char *tags, double value)
{
    char ts[96], num[EV_PROM_DOUBLE_MAX];
    iso_time(s->timestamp_ms, ts, sizeof(ts));
    (void)ev_prom_format_double(isfinite(value) ? value : 0.0, num, sizeof(num));
    int rc = buf_printf(b, "\x1e{\"timestamp\":\"%s\",\"provider\":", ts);
    rc = rc ? rc : json_string_or_null(b, s->provider);
    rc = rc ? rc : buf_append_str(b, ",\"name\":");
    rc = rc ? rc : json_string_or_null(b, s->name);
    rc = rc ? rc : buf_append_str(b, ",\"displayName\":");
    rc = rc ? rc : json_string_or_null(b, display);
    rc = rc ? rc : buf_append_str(b, ",\"unit\":");
    rc = rc ? rc : json_string_or_null(b, s->unit);
    rc = rc ? rc
            : buf_printf(b, ",\"counterType\":\"%s\",\"tags\":",
                         s->kind == EV_METRIC_RATE ? "Rate" : "Metric");
    rc = rc ? rc : json_string_or_null(b, tags);
    rc = rc ? rc : buf_printf(b, ",\"value\":%s,\"meterTags\":", num);
    rc = rc ? rc : json_string_or_null(b, s->meter_tags);
    rc = rc ? rc : buf_append_str(b, ",\"instrumentTags\":");
    rc = rc ? rc : json_string_or_null(b, s->instrument_tags);
    return rc ? rc : buf_append_str(b, "}\n");
}

/* The sample as dotnet-monitor's records: one per value, a histogram one per quantile. */
static int lm_format(const struct lm_job *job, const struct ev_metric_sample *s, struct buf *b)
{
    char display[512];
    if (!s->is_meter) {
        snprintf(display, sizeof(display), "%s", s->display_name);
    } else if (s->kind == EV_METRIC_RATE) {
        char sec[32];
        if (num_format_float32(sec, sizeof(sec), job->f.interval_s) != 0) {
            snprintf(sec, sizeof(sec), "5");
        }
        snprintf(display, sizeof(display), "%s (%s / %s sec)", s->name,
                 s->unit[0] != '\0' ? s->unit : "Count", sec);
    } else {
        snprintf(display, sizeof(display), "%s (%s)", s->name, s->unit);
    }
    const char *tags = s->tags != NULL ? s->tags : "";
    if (s->kind != EV_METRIC_HISTOGRAM) {
        return lm_record(b, s, display, tags, s->value);
    }
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < s->nquantiles; i++) {
        char qtags[1024];
        snprintf(qtags, sizeof(qtags), "%s%sPercentile=%d", tags, tags[0] != '\0' ? "," : "",
                 (int)(100.0 * s->quantiles[i].quantile));
        rc = lm_record(b, s, display, qtags, s->quantiles[i].value);
    }
    return rc;
}

static void lm_on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct lm_job *job = ud;
    if (job->core.art == NULL || !job->streaming) {
        return;
    }
    if (artifact_full(job->core.art)) {
        job->dropped++;
        return;
    }
    struct buf b;
    buf_init(&b, 64 * 1024);
    if (lm_format(job, s, &b) == 0 && buf_size(&b) > 0 &&
        artifact_write(job->core.art, buf_data(&b), buf_size(&b)) == 0) {
        job->records++;
    } else {
        job->dropped++;
    }
    buf_fini(&b);
}

static void lm_on_warning(void *ud, const char *kind, const char *message)
{
    struct lm_job *job = ud;
    log_warn(cat, "live metrics of %" PRIu64 ": System.Diagnostics.Metrics says %s: %s", job->pid,
             kind, message);
}

static void lm_on_started(void *ud)
{
    struct lm_job *job = ud;
    job_running(&job->core); /* the operation Running (Stopping when a stop came first) */
    if (job->core.art == NULL) {
        return;
    }
    if (artifact_begin(job->core.art, "application/json-seq", job->filename) != 0) {
        /* The client left (its on_lost follows), or the upload cannot start: on_end ends the
         * artifact, which says why. */
        msession_stop(job->sess);
        return;
    }
    job->streaming = true;
    if (job->duration_s >= 0 && job->core.state != JOB_STOPPING) {
        job_arm_timeout(&job->core, (uint64_t)job->duration_s * 1000);
    }
}

static void lm_on_end(void *ud, int status, const char *reason)
{
    struct lm_job *job = ud;
    job->sess = NULL;
    uv_timer_stop(&job->core.timer);
    log_info(cat, "live metrics of %" PRIu64 ": %s; %" PRIu64 " records, %" PRIu64 " dropped",
             job->pid, reason, job->records, job->dropped);
    /* A runtime that exits (EOF or a reset) ends the records cleanly: they are all valid. A
     * stream dotmon could not read, or a stop that never finished, is a failure: the client
     * sees the transfer cut, the operation says why. */
    bool failed = status == AGENT_E_PROTO || status == AGENT_E_TIMEOUT;
    if (job->streaming && !failed) {
        job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    } else {
        char detail[400];
        snprintf(detail, sizeof(detail), "cannot collect live metrics from process %" PRIu64 ": %s",
                 job->pid, reason);
        job_end(&job->core, JOB_END_FAIL,
                status == AGENT_E_RUNTIME   ? 400
                : status == AGENT_E_TIMEOUT ? 504
                                            : 502,
                job->streaming ? "StreamFailed" : "RuntimeUnreachable", reason, detail);
    }
    job_release(&job->core);
}

static const struct msession_callbacks lm_callbacks = {.on_started = lm_on_started,
                                                       .on_sample = lm_on_sample,
                                                       .on_warning = lm_on_warning,
                                                       .on_end = lm_on_end};

/* The core's graceful stop (DELETE ?stop=true, the duration, shutdown). */
static void lm_stop(struct job *core)
{
    struct lm_job *job = lm_of(core);
    uv_timer_stop(&core->timer);
    if (job->sess != NULL) {
        msession_stop(job->sess);
    }
}

/* The core's abort: DELETE, the client disconnected, or the egress store failed (or the upload
 * could not start). StopTracing goes out in the background. */
static void lm_abort(struct job *core, enum job_why why)
{
    struct lm_job *job = lm_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "live metrics of %" PRIu64 ": %s after %" PRIu64 " records", job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed" : "client disconnected",
                 job->records);
    }
    if (job->sess != NULL) {
        msession_abort(job->sess);
        job->sess = NULL;
    }
    uv_timer_stop(&core->timer);
}

static const struct job_vtable lm_vt = {.kind = OP_KIND_LIVEMETRICS,
                                        .noun = "livemetrics",
                                        .stop = lm_stop,
                                        .abort = lm_abort,
                                        .results = lm_results,
                                        .holds = lm_holds,
                                        .fini = lm_fini};

static const struct artifact_spec lm_spec = {.kind = OP_KIND_LIVEMETRICS,
                                             .noun = "livemetrics",
                                             .limit_setting = NULL,
                                             .high_water = LM_HIGH_WATER,
                                             .low_water = LM_HIGH_WATER / 4};
/* No on_ready: records beyond the high-water mark are dropped (counted), never queued. */
static const struct artifact_events lm_events = {.on_ready = NULL, .on_lost = job_lost};

/* Registers the operation and starts the session; takes f (collectors.h). */
int collect_livemetrics_filters(struct agent *a, const struct artifact_origin *o,
                                const struct ipc_process *p, struct metrics_filters *f,
                                int64_t duration_s)
{
    struct operation *op = NULL;
    struct lm_job *job = (struct lm_job *)job_new(&a->collect, &lm_vt, sizeof(*job));
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        metrics_filters_fini(f);
        return -1;
    }
    if (artifact_admit_origin(a, o, p, &lm_spec, &lm_events, job, &job->core.art, &op) != 0) {
        job_release(&job->core);
        metrics_filters_fini(f);
        return -1;
    }
    job->a = a;
    job_admitted(&job->core, op); /* DELETE stops or cancels through the core */
    job->pid = p->pid;
    job->duration_s = duration_s;
    job->f = *f;
    memset(f, 0, sizeof(*f)); /* ownership moved to the job */
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".metrics.json", ts, p->pid);
    op->artifact_name = strdup(job->filename);
    artifact_accept(job->core.art); /* egress: 202 now; the operation tells the rest */
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = msession_start(a, &ep, ipc_runtime_major(p->clr_version), &job->f, &lm_callbacks, job,
                            &job->sess);
    if (rc != 0) {
        char detail[256];
        snprintf(detail, sizeof(detail),
                 "cannot start a metrics session with process %" PRIu64 ": %s", p->pid,
                 agent_strerror(rc));
        job_end(&job->core, JOB_END_FAIL, 502, "RuntimeUnreachable", agent_strerror(rc), detail);
        job_release(&job->core);
    }
    return 0;
}

int collect_livemetrics(struct agent *a, const struct artifact_origin *o,
                        const struct ipc_process *p, const char *body, int64_t duration_s)
{
    struct buf err;
    buf_init(&err, 1024);
    struct metrics_filters f;
    int rc = -1;
    if (metrics_filters_from_json(&f, body, strlen(body), a->metrics_interval_sec, &err) != 0) {
        artifact_refuse(o, 400, "%s", buf_cstr(&err));
    } else {
        rc = collect_livemetrics_filters(a, o, p, &f, duration_s);
    }
    buf_fini(&err);
    return rc;
}
