/* SPDX-License-Identifier: MIT */
/*
 * GET/POST /livemetrics: a metrics session of its own with one runtime, its values streamed as
 * application/json-seq records in dotnet-monitor's shape (docs/api.md §7.4) for
 * durationSeconds (default 30, -1 until stopped), or into an egress target with egressProvider
 * (artifact.h; records are dropped, counted, while it is behind). GET collects what the Metrics
 * settings name (as dotnet-monitor 8+), POST what its EventMetricsConfiguration body names. An
 * operation like a trace: stop (DELETE ?stop=true) ends the stream cleanly, cancel cuts it, a
 * client that leaves ends the runtime's session at once; a runtime that exits ends the stream
 * cleanly.
 */
#include "api.h"

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
#include "artifact.h"
#include "err.h"
#include "ev_prom_name.h"
#include "ev_store.h"
#include "http_server.h"
#include "log.h"
#include "metrics_session.h"
#include "operations.h"

static const char cat[] = "dotmon.livemetrics";

/* Records wait in the response's queue up to this; past it new ones are dropped (counted), as
 * dotnet-monitor drops past its 1000-payload queue. */
#define LM_HIGH_WATER (1024u * 1024u)

struct lm_job {
    struct agent *a;
    struct operation *op;  /* NULL once the artifact has ended (it settles the operation) */
    struct artifact *out;  /* the response or the egress target; NULL once ended */
    struct msession *sess; /* NULL after on_end or abort */
    struct metrics_filters f;
    uv_timer_t timer;
    bool timer_closing;
    bool streaming;
    bool stopping;
    int64_t duration_s;
    uint64_t pid;
    char uid[37];
    char filename[64];
    uint64_t records;
    uint64_t dropped;
};

static void lm_on_closed(uv_handle_t *h)
{
    struct lm_job *job = h->data;
    metrics_filters_fini(&job->f);
    free(job);
}

static void lm_maybe_free(struct lm_job *job)
{
    if (job->out != NULL || job->sess != NULL || job->timer_closing) {
        return;
    }
    job->timer_closing = true;
    uv_close((uv_handle_t *)&job->timer, lm_on_closed);
}

/* The session's results for the operation's details. */
static cJSON *lm_results(const struct lm_job *job)
{
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
        snprintf(display, sizeof(display), "%s (%s / %u sec)", s->name,
                 s->unit[0] != '\0' ? s->unit : "Count", job->f.interval_s);
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
    if (job->out == NULL || !job->streaming) {
        return;
    }
    if (artifact_full(job->out)) {
        job->dropped++;
        return;
    }
    struct buf b;
    buf_init(&b, 64 * 1024);
    if (lm_format(job, s, &b) == 0 && buf_size(&b) > 0 &&
        artifact_write(job->out, buf_data(&b), buf_size(&b)) == 0) {
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

static void lm_on_timer(uv_timer_t *t);

static void lm_on_started(void *ud)
{
    struct lm_job *job = ud;
    if (job->op != NULL) {
        op_set_state(&job->a->ops, job->op, job->stopping ? OP_STOPPING : OP_RUNNING, NULL, NULL);
    }
    if (job->out == NULL) {
        return;
    }
    if (artifact_begin(job->out, "application/json-seq", job->filename) != 0) {
        /* The client left (its on_lost follows), or the upload cannot start: on_end ends the
         * artifact, which says why. */
        msession_stop(job->sess);
        return;
    }
    job->streaming = true;
    if (job->duration_s >= 0 && !job->stopping) {
        uv_timer_start(&job->timer, lm_on_timer, (uint64_t)job->duration_s * 1000, 0);
    }
}

static void lm_on_end(void *ud, int status, const char *reason)
{
    struct lm_job *job = ud;
    job->sess = NULL;
    uv_timer_stop(&job->timer);
    log_info(cat, "live metrics of %" PRIu64 ": %s; %" PRIu64 " records, %" PRIu64 " dropped",
             job->pid, reason, job->records, job->dropped);
    /* A runtime that exits (EOF or a reset) ends the records cleanly: they are all valid. A
     * stream dotmon could not read, or a stop that never finished, is a failure: the client
     * sees the transfer cut, the operation says why. */
    bool failed = status == AGENT_E_PROTO || status == AGENT_E_TIMEOUT;
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL && job->streaming && !failed) {
        artifact_end_complete(out, lm_results(job));
    } else if (out != NULL) {
        char detail[400];
        snprintf(detail, sizeof(detail), "cannot collect live metrics from process %" PRIu64 ": %s",
                 job->pid, reason);
        artifact_end_fail(out,
                          status == AGENT_E_RUNTIME   ? 400
                          : status == AGENT_E_TIMEOUT ? 504
                                                      : 502,
                          job->streaming ? "StreamFailed" : "RuntimeUnreachable", reason, detail,
                          lm_results(job));
    }
    lm_maybe_free(job);
}

static const struct msession_callbacks lm_callbacks = {.on_started = lm_on_started,
                                                       .on_sample = lm_on_sample,
                                                       .on_warning = lm_on_warning,
                                                       .on_end = lm_on_end};

static void lm_stop(void *ctx)
{
    struct lm_job *job = ctx;
    if (job->stopping) {
        return;
    }
    job->stopping = true;
    if (job->op != NULL && job->op->state == OP_RUNNING) {
        op_set_state(&job->a->ops, job->op, OP_STOPPING, NULL, NULL);
    }
    uv_timer_stop(&job->timer);
    if (job->sess != NULL) {
        msession_stop(job->sess);
    }
}

static void lm_on_timer(uv_timer_t *t)
{
    lm_stop(t->data);
}

static void lm_cancel(void *ctx)
{
    struct lm_job *job = ctx;
    if (job->sess != NULL) {
        msession_abort(job->sess);
        job->sess = NULL;
    }
    uv_timer_stop(&job->timer);
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        artifact_end_cancel(out, 400, NULL, lm_results(job));
    }
    lm_maybe_free(job);
}

/* The client disconnected, or the egress store failed (or the upload could not start). */
static void lm_on_lost(void *ud)
{
    struct lm_job *job = ud;
    log_info(cat, "live metrics of %" PRIu64 ": %s after %" PRIu64 " records", job->pid,
             artifact_is_egress(job->out) ? "the egress upload failed" : "client disconnected",
             job->records);
    lm_cancel(job); /* StopTracing in the background */
}

static const struct artifact_spec lm_spec = {.kind = OP_KIND_LIVEMETRICS,
                                             .noun = "livemetrics",
                                             .limit_setting = NULL,
                                             .high_water = LM_HIGH_WATER,
                                             .low_water = LM_HIGH_WATER / 4};
/* No on_ready: records beyond the high-water mark are dropped (counted), never queued. */
static const struct artifact_events lm_events = {.on_ready = NULL, .on_lost = lm_on_lost};

/* Registers the operation and starts the session; takes f. 0, or -1 when refused. */
static int lm_start(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                    struct metrics_filters *f, int64_t duration_s)
{
    struct operation *op = NULL;
    struct lm_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        metrics_filters_fini(f);
        return -1;
    }
    if (artifact_admit_origin(a, o, p, &lm_spec, &lm_events, job, &job->out, &op) != 0) {
        free(job);
        metrics_filters_fini(f);
        return -1;
    }
    job->a = a;
    job->op = op;
    job->pid = p->pid;
    job->duration_s = duration_s;
    job->f = *f;
    memset(f, 0, sizeof(*f)); /* ownership moved to the job */
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".metrics.json", ts, p->pid);
    op->artifact_name = strdup(job->filename);
    uv_timer_init(a->loop, &job->timer);
    job->timer.data = job;
    op->stoppable = true;
    op->control.stop = lm_stop;
    op->control.cancel = lm_cancel;
    op->ctx = job;
    artifact_accept(job->out); /* egress: 202 now; the operation tells the rest */
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = msession_start(a, &ep, metrics_runtime_major(p->clr_version), &job->f, &lm_callbacks,
                            job, &job->sess);
    if (rc != 0) {
        char detail[256];
        snprintf(detail, sizeof(detail),
                 "cannot start a metrics session with process %" PRIu64 ": %s", p->pid,
                 agent_strerror(rc));
        artifact_end_fail(artifact_take(&job->out, &job->op), 502, "RuntimeUnreachable",
                          agent_strerror(rc), detail, lm_results(job));
        lm_maybe_free(job);
    }
    return 0;
}

int api_livemetrics_collect(struct agent *a, const struct artifact_origin *o,
                            const struct ipc_process *p, const char *body, int64_t duration_s)
{
    struct buf err;
    buf_init(&err, 1024);
    struct metrics_filters f;
    int rc = -1;
    if (metrics_filters_from_json(&f, body, strlen(body), a->metrics_interval_s, &err) != 0) {
        artifact_refuse(o, 400, "%s", buf_cstr(&err));
    } else {
        rc = lm_start(a, o, p, &f, duration_s);
    }
    buf_fini(&err);
    return rc;
}

void api_livemetrics_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    int64_t duration = 0;
    if (p == NULL || api_parse_duration(req, &duration) != 0) {
        return;
    }
    struct metrics_filters f;
    if (metrics_filters_from_config(&f, a->cfg, a->metrics_interval_s) != 0) {
        api_problem(req, 500, "the Metrics settings cannot be read (see dotmon's log)");
        return;
    }
    const struct artifact_origin o = {.req = req};
    (void)lm_start(a, &o, p, &f, duration);
}

void api_livemetrics_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415, "POST /livemetrics takes a JSON body, not %s", ct);
        return;
    }
    const struct ipc_process *p = api_select_process(a, req);
    int64_t duration = 0;
    if (p == NULL || api_parse_duration(req, &duration) != 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct buf err;
    buf_init(&err, 4096);
    struct metrics_filters f;
    if (len == 0) {
        api_problem(req, 400, "POST /livemetrics needs a JSON body (EventMetricsConfiguration)");
    } else if (metrics_filters_from_json(&f, (const char *)body, len, a->metrics_interval_s,
                                         &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        const struct artifact_origin o = {.req = req};
        (void)lm_start(a, &o, p, &f, duration);
    }
    buf_fini(&err);
}

void api_livemetrics_shutdown(struct agent *a)
{
    for (size_t i = 0; i < a->ops.n; i++) {
        struct operation *op = a->ops.v[i];
        if (op->kind == OP_KIND_LIVEMETRICS && !op_is_finished(op) && op->control.stop != NULL) {
            op->control.stop(op->ctx);
        }
    }
}
