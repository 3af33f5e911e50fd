/* SPDX-License-Identifier: MIT */
/*
 * The gcdump collector (collectors.h collect_gcdump; GET /gcdump is in api_collect.c): a GC heap
 * snapshot (dotnet-gcdump's, dotnet-monitor's /gcdump). An EventPipe session
 * on Microsoft-Windows-DotNETRuntime with the heap-dump keywords (EV_GCHEAP_KEYWORDS, Verbose, a
 * loader-only rundown: GCDUMP_RUNDOWN_KEYWORD; GCDump:BufferSizeMB: 1024 MB by default as
 * dotnet-gcdump 10 asks, where dotnet-monitor asks 256 and a walk of ~9 M objects outgrows that)
 * makes the runtime run an induced
 * blocking gen-2 GC and stream its heap walk. The bytes go straight into the graph builder
 * (events/ev_gcheap.h): nothing of the stream is kept. Once the builder has read the induced GC's
 * end, the session is stopped; when the runtime has closed the stream the graph is written as a
 * `.gcdump` to the response (or the egress target), and freed at once.
 *
 * One gcdump_job per request runs on the collection-job core (collect/job.h), which holds the
 * artifact (the response, or the upload), the operation, the deadline timer and the job's state
 * (STOPPING once StopTracing is sent); this file supplies the producer: the session (gone after
 * its final callback or abort; collect/dsession.h) and the work on the pool. The core frees the job
 * once all are gone.
 *
 * Every path ends the session: the heap walk done (StopTracing), GCDump:TimeoutSeconds without the
 * GC's end (StopTracing, then 504), a heap over GCDump:MaxNodes or a broken stream (abort, which
 * sends StopTracing in the background), the client gone or DELETE (abort), shutdown (abort). A
 * runtime that dies ends the stream itself.
 *
 * The file is written once the graph is whole, on libuv's thread pool (ev_gcheap_write takes
 * seconds for millions of objects; the loop keeps serving meanwhile). The writer hands its chunks
 * to the loop through a queue of at most GCDUMP_QUEUE_MAX bytes and waits while it is full; the
 * loop moves them to the client (or the store) as fast as it takes them. So the file is never
 * held whole: dotmon's memory is the graph plus a few MiB, and the graph is freed the moment the
 * writer is done. A consumer that leaves makes the writer stop at its next chunk.
 *
 * GET /gcdump?format=summary asks for the heap summed per type instead of the file (the same
 * session, limits and operation): the sums are taken from the graph on the pool right after it is
 * built (ev_gcheap_type_stats, so a refusal is still answered with a status), the graph is freed,
 * and the JSON goes the file's way, through the queue, named <time>_<pid>.gcdump.summary.json.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "artifact.h"
#include "collectors.h"
#include "dsession.h"
#include "err.h"
#include "ev_gcheap.h"
#include "log.h"
#include "membudget.h"
#include "operations.h"

static const char cat[] = "dotmon.gcdump";

/*
 * The rundown at StopTracing, Loader | EndRundown (docs/profiles.md §3): one ModuleDCEnd per loaded
 * module, whose IL path names the module of every type in the file, as in dotnet-gcdump's files
 * (its session asks for the default rundown, whose method events a heap snapshot does not use);
 * without it the modules are "Module(0x<id>)" (docs/gcdump.md §3). CollectTracing4 (.NET 9+); an
 * older runtime gets the default rundown (ipc_session.h), as from dotnet-gcdump.
 */
#define GCDUMP_RUNDOWN_KEYWORD 0x108ull
#define GCDUMP_PROVIDER        "Microsoft-Windows-DotNETRuntime"
/* Sessions still closing in the background that may exist beyond the limits (collect_trace.c). */
#define GCDUMP_SESSION_SLACK 8u
#define GCDUMP_HIGH_WATER    ((size_t)1024 * 1024)
#define GCDUMP_LOW_WATER     ((size_t)256 * 1024)
/* The writer's chunks waiting for the loop: the writer waits above this. */
#define GCDUMP_QUEUE_MAX ((size_t)4 * 1024 * 1024)
/* A snapshot's graph may take this share of dotmon's memory budget (when it has one). */
#define GCDUMP_BUDGET_PCT 50u
/* What a graph holds at most per million objects (measured: 44 MiB at 1 M, 453 at 9 M;
 * docs/configuration.md, Memory). */
#define GCDUMP_MB_PER_MILLION 50u

/* A chunk of the file on its way from the writer thread to the loop. */
struct gcdump_chunk {
    struct gcdump_chunk *next;
    size_t n;
    uint8_t data[];
};

struct gcdump_job {
    struct job core; /* first: operation, artifact (core.art), the deadline (core.timer: from the
                        session's start, GCDump:TimeoutSeconds), state (STOPPING: StopTracing
                        sent) */
    struct agent *a;
    struct dsession *ds;   /* NULL after its final callback or abort */
    struct ev_gcheap *g;   /* the graph; NULL once written or failed */
    struct mb_share share; /* what the graph holds, charged by ev_gcheap (thread pool too) */
    bool timed_out;        /* the deadline passed before the GC's end */
    int version;           /* > 0 once the runtime accepted the session */
    uint64_t session_id;
    uint64_t pid;
    uint64_t written;     /* bytes of the file given to the artifact */
    char end_reason[160]; /* the session's end in words, for a failure after the build */
    int finish_rc;        /* ev_gcheap_finish's answer (and the summary's), from the pool */
    /* format=summary: the types kept (0: the file instead), and the summary, from the graph's
     * build (finish_on_pool) to its writing (write_on_pool). */
    size_t summary_top;
    struct ev_gcheap_types types;
    /* The writer (write_on_pool) and the loop share these, under mu. */
    uv_work_t work;
    uv_async_t async; /* the writer queued a chunk, or finished */
    pthread_mutex_t mu;
    pthread_cond_t cv;         /* the loop took chunks, or the writer must stop */
    struct gcdump_chunk *head; /* oldest first */
    struct gcdump_chunk *tail;
    size_t queued;
    bool stop_writer; /* the consumer is gone: the writer's next chunk fails */
    bool writer_done; /* ev_gcheap_write returned (writer_rc) */
    int writer_rc;
    /* The loop's own. */
    bool writing;  /* the work item runs or has not been reaped: g belongs to it */
    bool building; /* that work item builds the graph (no byte of the file is out yet) */
    struct ev_gcheap_stats st;
    char uid[37];
    struct ipc_endpoint ep; /* the runtime's (an owned copy) */
    char filename[64];
    char share_what[48];
};

static void queue_free(struct gcdump_job *job)
{
    for (struct gcdump_chunk *c = job->head, *next = NULL; c != NULL; c = next) {
        next = c->next;
        free(c);
    }
    job->head = job->tail = NULL;
    job->queued = 0;
}

static const struct job_vtable gcdump_vt;

static struct gcdump_job *gcdump_of(struct job *core)
{
    return (struct gcdump_job *)core;
}

/* True once StopTracing was sent. */
static bool job_stopping(const struct gcdump_job *job)
{
    return job->core.state == JOB_STOPPING;
}

/* The core's fini, once the timer and the async handle are closed. */
static void gcdump_fini(struct job *core)
{
    struct gcdump_job *job = gcdump_of(core);
    struct agent *a = job->a;
    if (a == NULL) {
        return; /* refused before anything was set up */
    }
    ev_gcheap_free(job->g);
    ev_gcheap_types_fini(&job->types);
    mb_share_fini(&job->share);
    queue_free(job);
    pthread_mutex_destroy(&job->mu);
    pthread_cond_destroy(&job->cv);
    ipc_endpoint_fini(&job->ep);
    /* The graph's memory went back with the graph (job_drop_graph, write_on_pool); the rest goes
     * when the agent goes idle (agent.c agent_went_idle). */
}

/* The session and the work on the pool keep the job. */
static bool gcdump_holds(const struct job *core)
{
    const struct gcdump_job *job = (const struct gcdump_job *)core;
    return job->ds != NULL || job->writing;
}

/* Frees the graph and the summary (its figures are kept for the operation). */
static void job_drop_graph(struct gcdump_job *job)
{
    if (job->g != NULL && !job->writing) {
        ev_gcheap_get_stats(job->g, &job->st);
        ev_gcheap_free(job->g);
        job->g = NULL;
        malloc_trim(0);
    }
    if (!job->writing) {
        ev_gcheap_types_fini(&job->types);
    }
}

/* The snapshot's figures for the operation's details. */
static cJSON *gcdump_results(struct job *core)
{
    struct gcdump_job *job = gcdump_of(core);
    if (job->g != NULL && !job->writing) {
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
    cJSON_AddNumberToObject(extra, "unnamedTypes", (double)st->unnamed_types);
    cJSON_AddNumberToObject(extra, "heapBytes", (double)st->total_size);
    cJSON_AddNumberToObject(extra, "streamBytes", (double)st->bytes);
    cJSON_AddNumberToObject(extra, "events", (double)st->events);
    cJSON_AddNumberToObject(extra, "droppedEvents", (double)st->lost);
    cJSON_AddNumberToObject(extra, "graphBytes", (double)st->mem_bytes); /* at its biggest */
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
    job_end(&job->core, JOB_END_FAIL, http_status, code, msg, NULL);
    job_drop_graph(job);
}

/* Ends the session at once: StopTracing goes out in the background (no session is left). */
static void job_abort_session(struct gcdump_job *job)
{
    dsession_abort(job->ds); /* accepts NULL */
    job->ds = NULL;
    uv_timer_stop(&job->core.timer);
}

/*
 * The core's abort: the client left, the egress store failed, or DELETE. The session ends, the
 * graph goes (its figures are kept for the results), a writer still running stops at its next
 * chunk; the core then ends the artifact Cancelled.
 */
static void gcdump_abort(struct job *core, enum job_why why)
{
    struct gcdump_job *job = gcdump_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "gcdump of %llu: %s", (unsigned long long)job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed"
                                               : "client disconnected");
    }
    job_abort_session(job);
    job_drop_graph(job);
    pthread_mutex_lock(&job->mu);
    job->stop_writer = true;
    queue_free(job);
    pthread_cond_signal(&job->cv);
    pthread_mutex_unlock(&job->mu);
}

static void job_relay(struct gcdump_job *job);

static void job_on_ready(void *ud)
{
    job_relay(ud);
}

static void job_on_async(uv_async_t *h)
{
    job_relay(h->data);
}

/* ---- the session ----------------------------------------------------------------------------- */

/* StopTracing: the job is STOPPING (a gcdump is not stoppable by DELETE: only the heap walk's
 * end or the deadline stop it). */
static void job_stop_session(struct gcdump_job *job)
{
    if (job->core.state != JOB_RUNNING || job->ds == NULL) {
        return;
    }
    job_set_state(&job->core, JOB_STOPPING);
    uv_timer_stop(&job->core.timer);
    /* After StopTracing the runtime flushes what its buffer holds: bounded like a trace's
     * rundown (TIMEOUT_GCDUMP_STOP, in the session's configuration). */
    dsession_stop(job->ds);
}

/* The core's timeout: GCDump:TimeoutSeconds without the induced GC's end: stop; the session's end
 * answers 504. */
static void gcdump_on_deadline(struct job *core)
{
    struct gcdump_job *job = gcdump_of(core);
    if (job->g == NULL || ev_gcheap_complete(job->g)) {
        return;
    }
    job->timed_out = true;
    log_warn(cat, "gcdump of %llu: no end of the heap walk after %llu s; stopping the session",
             (unsigned long long)job->pid,
             (unsigned long long)(agent_timeout(job->a, TIMEOUT_GCDUMP) / 1000));
    job_stop_session(job);
}

static void sess_started(void *ud, uint64_t session_id, int version)
{
    struct gcdump_job *job = ud;
    job->version = version;
    job->session_id = session_id;
    log_info(cat, "gcdump of %llu started: session 0x%llx (CollectTracing%d)",
             (unsigned long long)job->pid, (unsigned long long)session_id, version);
    if (job->a->disc != NULL) {
        (void)ipc_discovery_resume(job->a->disc, job->uid);
    }
    if (!job_stopping(job)) {
        job_arm_timeout(&job->core, agent_timeout(job->a, TIMEOUT_GCDUMP));
    }
}

/* The feed failed: the heap over GCDump:MaxNodes, out of memory, or a stream that is invalid. */
static void job_feed_failed(struct gcdump_job *job, int rc)
{
    const char *why = ev_gcheap_error(job->g);
    char msg[1024];
    job_abort_session(job);
    if (rc == AGENT_E_TOOBIG) {
        snprintf(msg, sizeof(msg),
                 "the heap of process %llu has more than %llu objects (GCDump:MaxNodes); raise "
                 "the limit to snapshot it",
                 (unsigned long long)job->pid, (unsigned long long)job->a->gcdump_max_nodes);
        job_fail(job, 507, "HeapTooLarge", msg);
    } else if (rc == AGENT_E_BUDGET) {
        /* Over the request's share of the budget, or the graph's own bound (from MaxNodes). */
        bool own = job->share.refused == 0;
        snprintf(msg, sizeof(msg),
                 "the heap graph of process %llu does not fit in dotmon's memory: %s; raise %s "
                 "(a graph needs about %u MB per million objects)",
                 (unsigned long long)job->pid, why != NULL ? why : "over the budget",
                 own ? "GCDump:MaxNodes" : "Memory:LimitMB (a snapshot may take half of it)",
                 GCDUMP_MB_PER_MILLION);
        job_fail(job, 507, "HeapTooLarge", msg);
    } else if (rc == UV_ENOMEM) {
        snprintf(msg, sizeof(msg), "out of memory building the heap graph of process %llu",
                 (unsigned long long)job->pid);
        job_fail(job, 507, "OutOfMemory", msg);
    } else {
        /* A walk bigger than the runtime's buffer, read more slowly than the runtime writes it,
         * loses events (the runtime drops them when its buffer is full): say what to raise. */
        ev_gcheap_get_stats(job->g, &job->st);
        bool big = job->st.bytes >= (uint64_t)job->a->gcdump_buffer_mb * 1024 * 1024 * 3 / 4 &&
                   job->st.lost == 0; /* with lost events the builder's words say it */
        snprintf(msg, sizeof(msg), "the heap walk of process %llu cannot be read: %s%s%s%s",
                 (unsigned long long)job->pid, agent_strerror(rc), why != NULL ? ": " : "",
                 why != NULL ? why : "",
                 big ? "; the walk outgrew the runtime's buffer, which then drops events: raise "
                       "GCDump:BufferSizeMB"
                     : "");
        job_fail(job, 502, "InvalidHeapWalk", msg);
    }
    job_release(&job->core);
}

/* The consumer's feed: a refused piece is answered here (507, 502…), the session aborted, and 0
 * returned (the dsession is gone then), so dsession's own AGENT_E_PROTO end is never used. */
static int sess_feed(void *ud, const uint8_t *p, size_t n)
{
    struct gcdump_job *job = ud;
    if (job->g == NULL || job->core.art == NULL || job->timed_out) {
        return 0; /* after the deadline the rest is drained unread: the answer is 504 */
    }
    int rc = ev_gcheap_feed(job->g, p, n);
    if (rc != 0) {
        job_feed_failed(job, rc);
        return 0;
    }
    if (!job_stopping(job) && ev_gcheap_complete(job->g)) {
        log_info(cat, "gcdump of %llu: the heap walk is complete; stopping the session",
                 (unsigned long long)job->pid);
        job_stop_session(job);
    }
    return 0;
}

/* ---- the file: written on the pool, relayed by the loop -------------------------------------- */

/* The writer's sink (pool thread): queues a copy, waiting while the queue is full. */
static int writer_sink(void *ud, const uint8_t *p, size_t n)
{
    struct gcdump_job *job = ud;
    struct gcdump_chunk *c = malloc(sizeof(*c) + n);
    if (c == NULL) {
        return UV_ENOMEM;
    }
    c->next = NULL;
    c->n = n;
    memcpy(c->data, p, n);
    pthread_mutex_lock(&job->mu);
    while (job->queued >= GCDUMP_QUEUE_MAX && !job->stop_writer) {
        pthread_cond_wait(&job->cv, &job->mu);
    }
    if (job->stop_writer) {
        pthread_mutex_unlock(&job->mu);
        free(c);
        return UV_ECANCELED;
    }
    if (job->tail != NULL) {
        job->tail->next = c;
    } else {
        job->head = c;
    }
    job->tail = c;
    job->queued += n;
    pthread_mutex_unlock(&job->mu);
    uv_async_send(&job->async);
    return 0;
}

static void write_on_pool(uv_work_t *w)
{
    struct gcdump_job *job = w->data;
    int rc = 0;
    if (job->summary_top == 0) {
        rc = ev_gcheap_write(job->g, "dotmon", writer_sink, job);
    }
    /* The graph goes now, on the pool: freeing millions of blocks is not the loop's work. The
     * summary was taken from it when it was built: it is written without it. */
    ev_gcheap_free(job->g);
    job->g = NULL;
    malloc_trim(0);
    if (job->summary_top > 0) {
        rc = ev_gcheap_write_types_json(&job->types, job->pid, writer_sink, job);
        ev_gcheap_types_fini(&job->types);
    }
    pthread_mutex_lock(&job->mu);
    job->writer_done = true;
    job->writer_rc = rc;
    pthread_mutex_unlock(&job->mu);
}

static void job_on_written(uv_work_t *w, int status)
{
    struct gcdump_job *job = w->data;
    job->writing = false;
    if (status != 0 && job->writer_rc == 0) {
        job->writer_rc = status; /* never ran (UV_ECANCELED) */
        job->writer_done = true;
    }
    job_relay(job);
    job_release(&job->core);
}

/* The file is out: end the artifact. */
static void job_deliver(struct gcdump_job *job)
{
    log_info(cat,
             "gcdump of %llu: %llu objects, %llu edges, %llu types, %llu heap bytes; %llu bytes "
             "written (%s); the graph held at most %llu KiB",
             (unsigned long long)job->pid, (unsigned long long)job->st.objects,
             (unsigned long long)job->st.edges, (unsigned long long)job->st.types,
             (unsigned long long)job->st.total_size, (unsigned long long)job->written,
             job->filename, (unsigned long long)(atomic_load(&job->share.peak) >> 10));
    job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    job_release(&job->core);
}

/* Moves the writer's chunks to the artifact while it has room; ends it once all are out. */
static void job_relay(struct gcdump_job *job)
{
    while (job->core.art != NULL && !artifact_full(job->core.art)) {
        pthread_mutex_lock(&job->mu);
        struct gcdump_chunk *c = job->head;
        if (c != NULL) {
            job->head = c->next;
            job->tail = job->head != NULL ? job->tail : NULL;
            job->queued -= c->n;
            pthread_cond_signal(&job->cv);
        }
        pthread_mutex_unlock(&job->mu);
        if (c == NULL) {
            break;
        }
        size_t n = c->n;
        if (artifact_write_owned(job->core.art, c, c->data, n) != 0) {
            return; /* the consumer is gone; on_lost follows */
        }
        job->written += n;
    }
    if (job->core.art == NULL || job->writing || job->head != NULL) {
        return;
    }
    if (job->writer_rc != 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "cannot write the gcdump: %s", agent_strerror(job->writer_rc));
        job_fail(job, 500, "WriteFailed", msg);
        job_release(&job->core);
        return;
    }
    job_deliver(job);
}

/* The graph is whole: the file is written on the pool and relayed from there. */
static void job_write(struct gcdump_job *job)
{
    ev_gcheap_get_stats(job->g, &job->st);
    if (job->st.unnamed_types > 0) {
        /* The runtime sends a type's BulkType once until its Type keyword goes off: while
         * another session (another tool's, or one not yet torn down) holds that keyword,
         * the types it was already sent are not sent again (docs/gcdump.md §1). */
        log_warn(cat,
                 "gcdump of %llu: %llu of the heap's types were not named by the runtime and are "
                 "listed as UNKNOWN (%s)",
                 (unsigned long long)job->pid, (unsigned long long)job->st.unnamed_types,
                 job->st.lost > 0 ? "events of the walk were lost"
                                  : "most likely another session holding the Type keyword was "
                                    "sent them");
    }
    const char *ctype = job->summary_top > 0 ? "application/json" : "application/octet-stream";
    if (artifact_begin(job->core.art, ctype, job->filename) != 0) {
        job_cancel(&job->core); /* the client is gone, or the upload cannot start (said in the
                                   op) */
        return;
    }
    job->work.data = job;
    job->writing = true;
    int rc = uv_queue_work(job->a->loop, &job->work, write_on_pool, job_on_written);
    if (rc != 0) {
        job->writing = false;
        char msg[160];
        snprintf(msg, sizeof(msg), "cannot write the gcdump: %s", agent_strerror(rc));
        job_fail(job, 500, "WriteFailed", msg);
        job_release(&job->core);
    }
}

/* The graph is built (or refused): a whole one is written, else the failure is said. */
static void job_on_graph(struct gcdump_job *job, int rc)
{
    if (rc == 0) {
        job_write(job);
        return;
    }
    char msg[512];
    if (job->timed_out) {
        snprintf(msg, sizeof(msg),
                 "the runtime did not finish the heap walk within %llu s (GCDump:TimeoutSeconds)",
                 (unsigned long long)(agent_timeout(job->a, TIMEOUT_GCDUMP) / 1000));
        job_fail(job, 504, "Timeout", msg);
    } else if (rc == AGENT_E_TRUNC) {
        snprintf(msg, sizeof(msg),
                 "the session of process %llu ended before the heap walk was complete (%s): the "
                 "process exited, or the runtime ended the session",
                 (unsigned long long)job->pid, job->end_reason);
        job_fail(job, 502, "IncompleteHeapWalk", msg);
    } else {
        job_feed_failed(job, rc);
        return;
    }
    job_release(&job->core);
}

/* The graph built, and with format=summary summed per type: 0, or what refused it. */
static int build_graph(struct gcdump_job *job)
{
    int rc = ev_gcheap_finish(job->g);
    if (rc == 0 && job->summary_top > 0) {
        rc = ev_gcheap_type_stats(job->g, job->summary_top, &job->types);
    }
    return rc;
}

/* Building the graph (sorting and indexing millions of nodes: a second for 9M objects) is the
 * pool's work, not the loop's. */
static void finish_on_pool(uv_work_t *w)
{
    struct gcdump_job *job = w->data;
    job->finish_rc = build_graph(job);
}

static void job_on_finished(uv_work_t *w, int status)
{
    struct gcdump_job *job = w->data;
    job->writing = false;
    job->building = false;
    if (job->core.art == NULL) {
        job_release(&job->core); /* the client left while the graph was built */
        return;
    }
    job_on_graph(job, status != 0 ? status : job->finish_rc);
}

/* The session's end (status 0: the runtime closed the stream; reason: its words). */
static void sess_on_end(struct gcdump_job *job, int status, uint32_t hresult, const char *reason)
{
    job->ds = NULL;
    uv_timer_stop(&job->core.timer);
    if (job->core.art == NULL || job->g == NULL) {
        job_release(&job->core);
        return;
    }
    if (job->version == 0) {
        char msg[512];
        const char *code = NULL;
        int http_status = api_session_refused(status, hresult, "gcdump", msg, sizeof(msg), &code);
        job_fail(job, http_status, code, msg);
        job_release(&job->core);
        return;
    }
    snprintf(job->end_reason, sizeof(job->end_reason), "%s", reason);
    job->work.data = job;
    job->writing = true; /* the graph belongs to the pool until job_on_finished */
    job->building = true;
    if (uv_queue_work(job->a->loop, &job->work, finish_on_pool, job_on_finished) != 0) {
        job->writing = false;
        job->building = false;
        job_on_graph(job, build_graph(job));
    }
}

static void sess_finish(void *ud, const char *how)
{
    sess_on_end(ud, 0, 0, how);
}

static void sess_error(void *ud, int code, uint32_t hresult, const char *reason)
{
    sess_on_end(ud, code, hresult, reason);
}

static const struct dsession_consumer session_consumer = {
    .started = sess_started, .feed = sess_feed, .finish = sess_finish, .error = sess_error};

/* ---- the route ------------------------------------------------------------------------------- */

static const struct artifact_spec gcdump_spec = {.kind = OP_KIND_GCDUMP,
                                                 .noun = "gcdump",
                                                 .limit_setting =
                                                     "RequestLimits:GCDump:MaxConcurrency",
                                                 .high_water = GCDUMP_HIGH_WATER,
                                                 .low_water = GCDUMP_LOW_WATER};
static const struct artifact_events gcdump_events = {.on_ready = job_on_ready, .on_lost = job_lost};

int collect_gcdump(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                   size_t summary_top)
{
    size_t session_cap = a->ops.limit[OP_KIND_TRACE] + a->ops.limit[OP_KIND_LOGS] +
                         a->ops.limit[OP_KIND_GCDUMP] + GCDUMP_SESSION_SLACK;
    if (a->sessions.live >= session_cap) {
        artifact_refuse(o, 429, "%zu sessions are still being closed; retry in a few seconds",
                        a->sessions.live);
        return -1;
    }
    struct gcdump_job *job = (struct gcdump_job *)job_new(&a->collect, &gcdump_vt, sizeof(*job));
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        return -1;
    }
    struct operation *op = NULL;
    if (artifact_admit_origin(a, o, p, &gcdump_spec, &gcdump_events, job, &job->core.art, &op) !=
        0) {
        job_release(&job->core);
        return -1;
    }
    job->a = a;
    job_admitted(&job->core, op); /* not stoppable, as in dotnet-monitor; DELETE cancels */
    job->pid = p->pid;
    job->summary_top = summary_top;
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    uv_async_init(a->loop, &job->async, job_on_async);
    uv_unref((uv_handle_t *)&job->async); /* it must not keep the loop running */
    job->async.data = job;
    job_add_handle(&job->core, (uv_handle_t *)&job->async);
    pthread_mutex_init(&job->mu, NULL);
    pthread_cond_init(&job->cv, NULL);
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    /* yyyyMMdd_HHmmss_fff, as dotnet-monitor names it (its GCDumpOperation) */
    snprintf(job->filename, sizeof(job->filename), "%s_%llu.gcdump%s", ts,
             (unsigned long long)p->pid, summary_top > 0 ? ".summary.json" : "");
    op->artifact_name = strdup(job->filename);
    artifact_accept(job->core.art); /* egress: 202 now; the operation tells the rest */

    snprintf(job->share_what, sizeof(job->share_what), "gcdump of process %llu",
             (unsigned long long)p->pid);
    mb_share_init(&job->share, job->share_what, membudget_fraction(GCDUMP_BUDGET_PCT, 0));
    const struct ev_gcheap_limits lim = {.max_nodes = a->gcdump_max_nodes, .share = &job->share};
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ev_gcheap_new(&job->g, &lim);
    rc = rc != 0 ? rc : ipc_endpoint_copy(&job->ep, &ep);
    if (rc != 0) {
        job_fail(job, 500, "OutOfMemory", "out of memory");
        job_release(&job->core);
        return 0;
    }
    const struct ipc_provider prov = {
        .name = GCDUMP_PROVIDER, .keywords = EV_GCHEAP_KEYWORDS, .level = EV_GCHEAP_LEVEL};
    const struct ipc_collect_config cfg = {.buffer_mb = a->gcdump_buffer_mb,
                                           .format = 1,
                                           .rundown_keyword = GCDUMP_RUNDOWN_KEYWORD,
                                           .disable_stackwalk = true,
                                           .providers = &prov,
                                           .provider_count = 1};
    const struct dsession_config dc = {.collect = &cfg,
                                       .admission = &a->sessions,
                                       .start_timeout_ms = agent_timeout(a, TIMEOUT_GCDUMP_START),
                                       .stop_timeout_ms = agent_timeout(a, TIMEOUT_GCDUMP_STOP)};
    rc = dsession_start(a->loop, &job->ep, &dc, &session_consumer, job, &job->ds);
    if (rc != 0) {
        job->ds = NULL;
        char msg[200];
        snprintf(msg, sizeof(msg), "cannot start a gcdump session with process %llu: %s",
                 (unsigned long long)p->pid, agent_strerror(rc));
        job_fail(job, rc == AGENT_E_TOOBIG ? 429 : 502,
                 rc == AGENT_E_TOOBIG ? "TooManySessions" : "RuntimeUnreachable", msg);
        job_release(&job->core);
        return 0;
    }
    log_info(cat, "gcdump of %llu requested (induced gen-2 GC; up to %llu s)",
             (unsigned long long)p->pid,
             (unsigned long long)(agent_timeout(a, TIMEOUT_GCDUMP) / 1000));
    job_running(&job->core);
    return 0;
}

/*
 * The core's shutdown. A snapshot cannot be finished within the grace period in general: every
 * running one is abandoned (its session stopped in the background) and answered 503; one writing
 * its file ends within the grace period, or is cut.
 */
static void gcdump_shutdown(struct job *core)
{
    struct gcdump_job *job = gcdump_of(core);
    if ((job->writing && !job->building) || core->art == NULL) {
        return;
    }
    job_abort_session(job);
    job_fail(job, 503, "ShuttingDown", "dotmon is shutting down");
    job_release(core);
}

static const struct job_vtable gcdump_vt = {.kind = OP_KIND_GCDUMP,
                                            .noun = "gcdump",
                                            .abort = gcdump_abort,
                                            .on_timeout = gcdump_on_deadline,
                                            .shutdown = gcdump_shutdown,
                                            .results = gcdump_results,
                                            .holds = gcdump_holds,
                                            .fini = gcdump_fini};
