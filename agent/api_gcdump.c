/* SPDX-License-Identifier: MIT */
/*
 * GET /gcdump: a GC heap snapshot (dotnet-gcdump's, dotnet-monitor's /gcdump). An EventPipe session
 * on Microsoft-Windows-DotNETRuntime with the heap-dump keywords (EV_GCHEAP_KEYWORDS, Verbose, no
 * rundown, a 256 MB buffer, as dotnet-gcdump asks) makes the runtime run an induced blocking gen-2
 * GC and stream its heap walk. The bytes go straight into the graph builder (events/ev_gcheap.h):
 * nothing of the stream is kept. Once the builder has read the induced GC's end, the session is
 * stopped; when the runtime has closed the stream the graph is written as a `.gcdump` to the
 * response (or the egress target), and freed at once.
 *
 * One gcdump_job per request ties the lifetimes together: the artifact (the response, or the
 * upload), the session (gone after on_end or abort) and the deadline timer. The job is freed once
 * all are gone.
 *
 * Every path ends the session: the heap walk done (StopTracing), GCDump:TimeoutSeconds without the
 * GC's end (StopTracing, then 504), a heap over GCDump:MaxNodes or a broken stream (abort, which
 * sends StopTracing in the background), the client gone or DELETE (abort), shutdown (abort). A
 * runtime that dies ends the stream itself.
 *
 * The file is written in one go once the graph is whole. Its bytes go to the client (or the
 * store) while it has room, the rest to a spool (agent/spool.h: memory, then an unnamed file in
 * dotmon's temp folder) relayed as the consumer drains; the graph is freed as soon as the file is
 * written, before the relay ends.
 */
#include "api.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "artifact.h"
#include "err.h"
#include "ev_gcheap.h"
#include "ipc_session.h"
#include "log.h"
#include "operations.h"
#include "spool.h"

static const char cat[] = "dotmon.gcdump";

#define GCDUMP_PROVIDER         "Microsoft-Windows-DotNETRuntime"
#define GCDUMP_START_TIMEOUT_MS 5000
/* After StopTracing the runtime flushes what its buffer holds: bounded like a trace's rundown. */
#define GCDUMP_STOP_TIMEOUT_MS 60000
/* Sessions still closing in the background that may exist beyond the limits (api_trace.c). */
#define GCDUMP_SESSION_SLACK 8u
#define GCDUMP_HIGH_WATER    ((size_t)1024 * 1024)
#define GCDUMP_LOW_WATER     ((size_t)256 * 1024)
/* The spool behind a slow consumer: the file is bounded by the graph, this only by the disk. */
#define GCDUMP_SPOOL_LIMIT ((uint64_t)64 << 30)

struct gcdump_job {
    struct agent *a;
    struct operation *op;     /* NULL once the artifact has ended (it settles the operation) */
    struct artifact *out;     /* the response or the egress target; NULL once ended */
    struct ipc_session *sess; /* NULL after on_end or abort */
    struct ev_gcheap *g;      /* the graph; NULL once written or failed */
    uv_timer_t timer;         /* GCDump:TimeoutSeconds from the session's start */
    bool timer_closing;
    bool started;   /* the runtime accepted the session */
    bool stopping;  /* StopTracing sent */
    bool timed_out; /* the deadline passed before the GC's end */
    int version;
    uint64_t session_id;
    uint64_t pid;
    uint64_t written;    /* bytes of the file */
    struct spool *spool; /* the file's bytes the consumer has not taken yet, or NULL */
    bool file_done;      /* the file is written (the spool may still hold some) */
    struct ev_gcheap_stats st;
    char uid[37];
    struct ipc_endpoint ep; /* the runtime's (an owned copy) */
    char filename[64];
};

static void job_on_timer_closed(uv_handle_t *h)
{
    struct gcdump_job *job = h->data;
    struct agent *a = job->a;
    ev_gcheap_free(job->g);
    spool_close(job->spool);
    ipc_endpoint_fini(&job->ep);
    free(job);
    /* The graph's memory goes back to the system once no snapshot is running. */
    if (op_registry_active(&a->ops, OP_KIND_GCDUMP) == 0) {
        malloc_trim(0);
    }
}

static void job_maybe_free(struct gcdump_job *job)
{
    if (job->out != NULL || job->sess != NULL || job->timer_closing) {
        return;
    }
    job->timer_closing = true;
    uv_close((uv_handle_t *)&job->timer, job_on_timer_closed);
}

/* Frees the graph (its figures are kept for the operation). */
static void job_drop_graph(struct gcdump_job *job)
{
    if (job->g != NULL) {
        ev_gcheap_get_stats(job->g, &job->st);
        ev_gcheap_free(job->g);
        job->g = NULL;
        malloc_trim(0);
    }
}

/* The snapshot's figures for the operation's details. */
static cJSON *job_results(struct gcdump_job *job)
{
    if (job->g != NULL) {
        ev_gcheap_get_stats(job->g, &job->st);
    }
    const struct ev_gcheap_stats *st = &job->st;
    cJSON *extra = cJSON_CreateObject();
    if (extra == NULL) {
        return NULL;
    }
    cJSON_AddNumberToObject(extra, "bytes", (double)job->written);
    cJSON_AddNumberToObject(extra, "nodes", (double)st->nodes);
    cJSON_AddNumberToObject(extra, "objects", (double)st->objects);
    cJSON_AddNumberToObject(extra, "edges", (double)st->edges);
    cJSON_AddNumberToObject(extra, "roots", (double)st->roots);
    cJSON_AddNumberToObject(extra, "types", (double)st->types);
    cJSON_AddNumberToObject(extra, "heapBytes", (double)st->total_size);
    cJSON_AddNumberToObject(extra, "streamBytes", (double)st->bytes);
    cJSON_AddNumberToObject(extra, "events", (double)st->events);
    cJSON_AddNumberToObject(extra, "droppedEvents", (double)st->lost);
    cJSON_AddBoolToObject(extra, "complete", st->complete);
    if (job->version > 0) {
        char sid[24];
        snprintf(sid, sizeof(sid), "0x%016llx", (unsigned long long)job->session_id);
        cJSON_AddNumberToObject(extra, "collectTracingVersion", job->version);
        cJSON_AddStringToObject(extra, "sessionId", sid);
    }
    return extra;
}

/* Fails the operation, answers the request if not yet answered; the graph goes. */
static void job_fail(struct gcdump_job *job, int http_status, const char *code, const char *msg)
{
    log_warn(cat, "gcdump of %llu failed: %s", (unsigned long long)job->pid, msg);
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        cJSON *extra = job_results(job);
        job_drop_graph(job);
        artifact_end_fail(out, http_status, code, msg, NULL, extra);
    }
    job_drop_graph(job);
}

/* Ends the session at once: StopTracing goes out in the background (no session is left). */
static void job_abort_session(struct gcdump_job *job)
{
    if (job->sess != NULL) {
        ipc_session_abort(job->sess);
        job->sess = NULL;
    }
    uv_timer_stop(&job->timer);
}

/* The client left, the egress store failed, or DELETE. */
static void job_end_cancel(struct gcdump_job *job)
{
    job_abort_session(job);
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        cJSON *extra = job_results(job);
        job_drop_graph(job);
        artifact_end_cancel(out, 400, NULL, extra);
    }
    job_drop_graph(job);
    spool_close(job->spool);
    job->spool = NULL;
    job_maybe_free(job);
}

static void job_on_lost(void *ud)
{
    struct gcdump_job *job = ud;
    log_info(cat, "gcdump of %llu: %s", (unsigned long long)job->pid,
             artifact_is_egress(job->out) ? "the egress upload failed" : "client disconnected");
    job_end_cancel(job);
}

static void job_cancel(void *ctx)
{
    job_end_cancel(ctx);
}

static void job_relay(struct gcdump_job *job);

static void job_on_ready(void *ud)
{
    job_relay(ud);
}

/* ---- the session ----------------------------------------------------------------------------- */

static void job_stop_session(struct gcdump_job *job)
{
    if (job->stopping || job->sess == NULL) {
        return;
    }
    job->stopping = true;
    uv_timer_stop(&job->timer);
    ipc_session_stop(job->sess, GCDUMP_STOP_TIMEOUT_MS);
}

/* GCDump:TimeoutSeconds without the induced GC's end: stop; on_end answers 504. */
static void job_on_deadline(uv_timer_t *t)
{
    struct gcdump_job *job = t->data;
    if (job->g == NULL || ev_gcheap_complete(job->g)) {
        return;
    }
    job->timed_out = true;
    log_warn(cat, "gcdump of %llu: no end of the heap walk after %llu s; stopping the session",
             (unsigned long long)job->pid, (unsigned long long)(job->a->gcdump_timeout_ms / 1000));
    job_stop_session(job);
}

static void sess_on_started(void *ud, uint64_t session_id, int version)
{
    struct gcdump_job *job = ud;
    job->started = true;
    job->version = version;
    job->session_id = session_id;
    log_info(cat, "gcdump of %llu started: session 0x%llx (CollectTracing%d)",
             (unsigned long long)job->pid, (unsigned long long)session_id, version);
    if (job->a->disc != NULL) {
        (void)ipc_discovery_resume(job->a->disc, job->uid);
    }
    if (!job->stopping) {
        uv_timer_start(&job->timer, job_on_deadline, job->a->gcdump_timeout_ms, 0);
    }
}

/* The feed failed: the heap over GCDump:MaxNodes, out of memory, or a stream that is invalid. */
static void job_feed_failed(struct gcdump_job *job, int rc)
{
    const char *why = ev_gcheap_error(job->g);
    char msg[512];
    job_abort_session(job);
    if (rc == AGENT_E_TOOBIG) {
        snprintf(msg, sizeof(msg),
                 "the heap of process %llu has more than %llu objects (GCDump:MaxNodes); raise "
                 "the limit to snapshot it",
                 (unsigned long long)job->pid, (unsigned long long)job->a->gcdump_max_nodes);
        job_fail(job, 507, "HeapTooLarge", msg);
    } else if (rc == UV_ENOMEM) {
        snprintf(msg, sizeof(msg), "out of memory building the heap graph of process %llu",
                 (unsigned long long)job->pid);
        job_fail(job, 507, "OutOfMemory", msg);
    } else {
        snprintf(msg, sizeof(msg), "the heap walk of process %llu cannot be read: %s%s%s",
                 (unsigned long long)job->pid, agent_strerror(rc), why != NULL ? ": " : "",
                 why != NULL ? why : "");
        job_fail(job, 502, "InvalidHeapWalk", msg);
    }
    job_maybe_free(job);
}

static void sess_on_data(void *ud, const uint8_t *p, size_t n)
{
    struct gcdump_job *job = ud;
    if (job->g == NULL || job->out == NULL) {
        return;
    }
    int rc = ev_gcheap_feed(job->g, p, n);
    if (rc != 0) {
        job_feed_failed(job, rc);
        return;
    }
    if (!job->stopping && ev_gcheap_complete(job->g)) {
        log_info(cat, "gcdump of %llu: the heap walk is complete; stopping the session",
                 (unsigned long long)job->pid);
        job_stop_session(job);
    }
}

/* The file's bytes: to the artifact while it has room, else (and from then on) to the spool. */
static int job_sink(void *ud, const uint8_t *p, size_t n)
{
    struct gcdump_job *job = ud;
    if (job->out == NULL) {
        return UV_EPIPE;
    }
    if (job->spool == NULL && !artifact_full(job->out)) {
        if (artifact_write(job->out, p, n) != 0) {
            return UV_EPIPE; /* the consumer is gone; on_lost follows */
        }
    } else {
        if (job->spool == NULL) {
            int rc = spool_new(job->a->loop, job->a->diag_dir, GCDUMP_SPOOL_LIMIT, &job->spool);
            if (rc != 0) {
                job->spool = NULL;
                return rc;
            }
        }
        int rc = spool_push(job->spool, NULL, p, n);
        if (rc != 0 && rc != AGENT_E_TOOBIG) {
            return rc;
        }
    }
    job->written += n;
    return 0;
}

/* The file is out (or its consumer is gone): end the artifact. */
static void job_deliver(struct gcdump_job *job)
{
    log_info(cat,
             "gcdump of %llu: %llu objects, %llu edges, %llu types, %llu heap bytes; %llu bytes "
             "written (%s)",
             (unsigned long long)job->pid, (unsigned long long)job->st.objects,
             (unsigned long long)job->st.edges, (unsigned long long)job->st.types,
             (unsigned long long)job->st.total_size, (unsigned long long)job->written,
             job->filename);
    struct artifact *out = artifact_take(&job->out, &job->op);
    if (out != NULL) {
        artifact_end_complete(out, job_results(job));
    }
    spool_close(job->spool);
    job->spool = NULL;
    job_maybe_free(job);
}

/* A chunk from the spool: to the artifact, then the next one. */
static void job_on_spooled(void *ud, int status, void *base, const uint8_t *data, size_t n)
{
    struct gcdump_job *job = ud;
    if (status != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "reading the gcdump back from the spool failed: %s",
                 agent_strerror(status));
        job_fail(job, 500, "SpoolFailed", msg);
        spool_close(job->spool);
        job->spool = NULL;
        job_maybe_free(job);
        return;
    }
    if (job->out == NULL) {
        free(base);
        return;
    }
    if (artifact_write_owned(job->out, base, data, n) != 0) {
        return; /* the consumer is gone; on_lost follows */
    }
    job_relay(job);
}

/* Moves spooled bytes to the artifact while it has room; ends it once everything is out. */
static void job_relay(struct gcdump_job *job)
{
    struct spool *sp = job->spool;
    if (job->out == NULL || !job->file_done) {
        return;
    }
    if (sp != NULL && spool_size(sp) > 0) {
        if (!spool_popping(sp) && !artifact_full(job->out)) {
            (void)spool_pop(sp, job_on_spooled, job);
        }
        return;
    }
    if (sp == NULL || !spool_popping(sp)) {
        job_deliver(job);
    }
}

/* The graph is whole: the file, then the graph goes. */
static void job_write(struct gcdump_job *job)
{
    ev_gcheap_get_stats(job->g, &job->st);
    if (artifact_begin(job->out, "application/octet-stream", job->filename) != 0) {
        job_end_cancel(job); /* the client is gone, or the upload cannot start (said in the op) */
        return;
    }
    int rc = ev_gcheap_write(job->g, "dotmon", job_sink, job);
    job_drop_graph(job);
    if (rc == UV_EPIPE) {
        job_end_cancel(job);
        return;
    }
    if (rc != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "cannot write the gcdump: %s", agent_strerror(rc));
        job_fail(job, 500, "WriteFailed", msg);
        spool_close(job->spool);
        job->spool = NULL;
        job_maybe_free(job);
        return;
    }
    job->file_done = true;
    job_relay(job);
}

static void sess_on_end(void *ud, int status, uint32_t hresult)
{
    struct gcdump_job *job = ud;
    job->sess = NULL;
    uv_timer_stop(&job->timer);
    if (job->out == NULL || job->g == NULL) {
        job_maybe_free(job);
        return;
    }
    char msg[512];
    if (!job->started) {
        int http_status = 502;
        const char *code = "RuntimeUnreachable";
        if (status == AGENT_E_RUNTIME) {
            snprintf(msg, sizeof(msg), "the runtime refused the gcdump session: %s (0x%08x)",
                     ipc_hresult_text(hresult), hresult);
            http_status = 400;
            code = "RuntimeError";
        } else if (status == AGENT_E_TIMEOUT) {
            snprintf(msg, sizeof(msg), "the runtime did not answer CollectTracing in time");
            http_status = 504;
            code = "Timeout";
        } else {
            snprintf(msg, sizeof(msg), "cannot start a gcdump session: %s", agent_strerror(status));
        }
        job_fail(job, http_status, code, msg);
        job_maybe_free(job);
        return;
    }
    int rc = ev_gcheap_finish(job->g);
    if (rc == 0) {
        job_write(job);
        return;
    }
    const char *why = ev_gcheap_error(job->g);
    if (job->timed_out) {
        snprintf(msg, sizeof(msg),
                 "the runtime did not finish the heap walk within %llu s (GCDump:TimeoutSeconds)",
                 (unsigned long long)(job->a->gcdump_timeout_ms / 1000));
        job_fail(job, 504, "Timeout", msg);
    } else if (rc == AGENT_E_TRUNC) {
        char reason[160];
        ipc_session_end_reason(status, hresult, job->stopping, reason, sizeof(reason));
        snprintf(msg, sizeof(msg),
                 "the session of process %llu ended before the heap walk was complete (%s): the "
                 "process exited, or the runtime ended the session",
                 (unsigned long long)job->pid, reason);
        job_fail(job, 502, "IncompleteHeapWalk", msg);
    } else {
        job_feed_failed(job, rc);
        return;
    }
    (void)why;
    job_maybe_free(job);
}

static const struct ipc_session_callbacks session_callbacks = {
    .on_started = sess_on_started, .on_data = sess_on_data, .on_end = sess_on_end};

/* ---- the route ------------------------------------------------------------------------------- */

static const struct artifact_spec gcdump_spec = {.kind = OP_KIND_GCDUMP,
                                                 .noun = "gcdump",
                                                 .limit_setting =
                                                     "RequestLimits:GCDump:MaxConcurrency",
                                                 .high_water = GCDUMP_HIGH_WATER,
                                                 .low_water = GCDUMP_LOW_WATER};
static const struct artifact_events gcdump_events = {.on_ready = job_on_ready,
                                                     .on_lost = job_on_lost};

int api_gcdump_collect(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p)
{
    size_t session_cap = a->ops.limit[OP_KIND_TRACE] + a->ops.limit[OP_KIND_LOGS] +
                         a->ops.limit[OP_KIND_GCDUMP] + GCDUMP_SESSION_SLACK;
    if (a->sessions.live >= session_cap) {
        artifact_refuse(o, 429, "%zu sessions are still being closed; retry in a few seconds",
                        a->sessions.live);
        return -1;
    }
    struct gcdump_job *job = calloc(1, sizeof(*job));
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        return -1;
    }
    struct operation *op = NULL;
    if (artifact_admit_origin(a, o, p, &gcdump_spec, &gcdump_events, job, &job->out, &op) != 0) {
        free(job);
        return -1;
    }
    job->a = a;
    job->op = op;
    job->pid = p->pid;
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    uv_timer_init(a->loop, &job->timer);
    job->timer.data = job;
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    ts[15] = '\0'; /* yyyyMMdd_HHmmss, as dotnet-monitor and dotnet-gcdump name it */
    snprintf(job->filename, sizeof(job->filename), "%s_%llu.gcdump", ts,
             (unsigned long long)p->pid);
    op->artifact_name = strdup(job->filename);
    op->stoppable = false; /* as in dotnet-monitor; DELETE cancels */
    op->control.cancel = job_cancel;
    op->ctx = job;
    artifact_accept(job->out); /* egress: 202 now; the operation tells the rest */

    const struct ev_gcheap_limits lim = {.max_nodes = a->gcdump_max_nodes};
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ev_gcheap_new(&job->g, &lim);
    rc = rc != 0 ? rc : ipc_endpoint_copy(&job->ep, &ep);
    if (rc != 0) {
        job_fail(job, 500, "OutOfMemory", "out of memory");
        job_maybe_free(job);
        return 0;
    }
    const struct ipc_provider prov = {
        .name = GCDUMP_PROVIDER, .keywords = EV_GCHEAP_KEYWORDS, .level = EV_GCHEAP_LEVEL};
    const struct ipc_collect_config cfg = {.buffer_mb = a->gcdump_buffer_mb,
                                           .format = 1,
                                           .rundown_keyword = 0,
                                           .disable_stackwalk = true,
                                           .providers = &prov,
                                           .provider_count = 1};
    rc = ipc_session_start(a->loop, &a->sessions, &job->ep, &cfg, GCDUMP_START_TIMEOUT_MS,
                           &session_callbacks, job, &job->sess);
    if (rc != 0) {
        job->sess = NULL;
        char msg[200];
        snprintf(msg, sizeof(msg), "cannot start a gcdump session with process %llu: %s",
                 (unsigned long long)p->pid, agent_strerror(rc));
        job_fail(job, rc == AGENT_E_TOOBIG ? 429 : 502,
                 rc == AGENT_E_TOOBIG ? "TooManySessions" : "RuntimeUnreachable", msg);
        job_maybe_free(job);
        return 0;
    }
    log_info(cat, "gcdump of %llu requested (induced gen-2 GC; up to %llu s)",
             (unsigned long long)p->pid, (unsigned long long)(a->gcdump_timeout_ms / 1000));
    op_set_state(&a->ops, op, OP_RUNNING, NULL, NULL);
    return 0;
}

void api_gcdump_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    const struct artifact_origin o = {.req = req};
    (void)api_gcdump_collect(a, &o, p);
}

void api_gcdump_shutdown(struct agent *a)
{
    /* A snapshot cannot be finished within the grace period in general: every running one is
     * abandoned (its session stopped in the background) and answered 503. */
    for (size_t i = 0; i < a->ops.n; i++) {
        struct operation *op = a->ops.v[i];
        if (op->kind != OP_KIND_GCDUMP || op_is_finished(op) || op->ctx == NULL) {
            continue;
        }
        struct gcdump_job *job = op->ctx;
        if (job->file_done || job->out == NULL) {
            continue; /* relaying the file: it ends within the grace period, or is cut */
        }
        job_abort_session(job);
        job_fail(job, 503, "ShuttingDown", "dotmon is shutting down");
        job_maybe_free(job);
        i = (size_t)-1; /* the registry may have changed: scan again */
    }
}
