/* SPDX-License-Identifier: MIT */
/*
 * GET /profile?pid=|uid=|name=&kind=cpu|alloc|exceptions|contention|gc&durationSeconds=N[&top=N]
 * [&paths=N][&format=json|text|speedscope|flame]: "where does this process spend its CPU /
 * allocate / throw / wait on locks / collect right now" in one call. A session for
 * durationSeconds (default 10, 1..300):
 *  - cpu (the default): the cpu-sampling profile's providers (SampleProfiler, and the runtime's
 *    method/loader keywords) with rundown; top methods exclusive/inclusive, and with paths=N
 *    (0..100, cpu only) the N most sampled stacks (ev_symbols);
 *  - alloc: the runtime's GC keyword at Verbose (GCAllocationTick) with the method keywords
 *    (Loader|Jit|NGen) and rundown; top types by sampled bytes with their allocating sites;
 *  - exceptions: Exception keyword (ExceptionThrown) with the method keywords and rundown; types
 *    by count with their throw sites and a sample message;
 *  - contention: Contention keyword (ContentionStart/Stop) with the method keywords and rundown;
 *    the waiting methods by wait time;
 *  - gc: GC keyword at Informational, no rundown and no stacks; GCs per generation and reason,
 *    pauses p50/p99/max, the last heap sizes, promoted bytes (ev_profile.h for all but cpu).
 * The stream goes into ev_symbols (and ev_profile for the other kinds) as it arrives (nothing is
 * spooled), and once the runtime closed it (rundown names the methods) the answer is the
 * aggregation: JSON by default, an aligned table for Accept: text/plain (or format=text), the
 * speedscope document for format=speedscope, or the folded stacks of a flame graph for
 * format=flame (the /ui page draws them); speedscope and flame are cpu only, the other kinds
 * answer 400. An operation of the trace kind (it shares the trace limit): stop (DELETE
 * ?stop=true) answers early with what was collected, cancel or a client that leaves ends the
 * runtime's session at once.
 */
#include "api.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "agent.h"
#include "artifact.h"
#include "collectors.h"
#include "dsession.h"
#include "err.h"
#include "ev_exc.h"
#include "ev_profile.h"
#include "ev_stacks.h"
#include "ev_symbols.h"
#include "exceptions.h"
#include "http_query.h"
#include "http_server.h"
#include "ipc_node.h"
#include "log.h"
#include "membudget.h"
#include "operations.h"
#include "trace_config.h"

static const char cat[] = "dotmon.profile";

#define PROFILE_DEFAULT_S       10
#define PROFILE_MAX_S           300
#define PROFILE_DEFAULT_TOP     25
#define PROFILE_SESSION_SLACK   8u
#define PROFILE_BUDGET_PCT      50u /* a profile may take this share of the memory budget */
#define PROFILE_SUPPORTED_KINDS "cpu, alloc, exceptions, contention, gc"
#define PROFILE_KIND_CPU        (-1) /* else an enum ev_profile_kind */
#define PROFILE_KIND_STACKS     (-2) /* GET /stacks */
#define PROFILE_KIND_EXCEPTIONS (-3) /* GET/POST /exceptions: a rundown names the history */
#define FOLLOW_POLL_MS          250u /* /exceptions?follow=true: the history looked at this often */
#define FOLLOW_RUNDOWN_MS       1000u /* and a rundown for frames not named, at most this often */
/* The runtime's keywords that name methods: Loader, Jit, NGen (the rundown does the rest). */
#define KW_METHODS    0x38ull
#define KW_GC         0x1ull
#define KW_EXCEPTION  0x8000ull
#define KW_CONTENTION 0x4000ull

enum profile_format { PROFILE_JSON, PROFILE_TEXT, PROFILE_SPEEDSCOPE, PROFILE_FLAME };

#define STACKS_MAX_THREADS 16384u /* thread names read for /stacks at most */
#define STACKS_NAMES_BYTES (STACKS_MAX_THREADS * sizeof(struct ipc_thread_name))

/* What differs, in words and codes, between what the job makes (kind_profile, kind_stacks,
 * kind_exceptions below). */
struct job_kind {
    const char *noun;       /* "profile": logs, the share, a refused session */
    const char *verb;       /* "profile": "cannot <verb> process N" */
    const char *need;       /* "the profile needs": over the share or the limits */
    const char *hint;       /* what to ask for instead then ("" for none) */
    const char *stream;     /* "profile": "the <stream> stream is incomplete" */
    const char *too_large;  /* 507's code */
    const char *incomplete; /* 502's (504's) code */
    const struct artifact_spec *spec;
};

struct profile_job {
    struct job core; /* first: operation, artifact (core.art), duration timer, state */
    const struct job_kind *k;
    struct agent *a;
    struct dsession *ds; /* the profile session; NULL once it ended or was aborted */
    struct ev_symbols *sym;
    struct ev_profile *prof; /* NULL for kind=cpu */
    struct mb_share share;   /* what sym and prof hold (half of dotmon's memory budget at most) */
    struct trace_config tc;
    bool started; /* the runtime accepted the session (a stop may have come first) */
    int feed_rc;
    uint64_t pid;
    uint32_t duration_s;
    size_t top;
    size_t paths; /* kind=cpu's hot paths asked for (0: none) */
    enum profile_format format;
    char filename[64];
    /* GET /stacks: one round of samples, each thread's first stack (ev_stacks) */
    bool stacks;
    /* GET/POST /exceptions: the history of process uid, named by a rundown taken now */
    bool exceptions;
    char uid[37];
    struct ev_exc_filters *filters; /* the request's (owned; NULL: none) */
    enum ev_exc_format exc_format;
    /* ?follow=true: the history so far, then what comes, until the duration, a stop or the
     * client's leaving; a new rundown (a fresh sym) when new frames are not named */
    bool groups; /* ?groups=true: the counts by type and thrower instead (dotmon's) */
    bool follow;
    bool following;           /* the first answer is written: the tail runs */
    uv_timer_t poll;          /* FOLLOW_POLL_MS */
    struct ipc_endpoint ep;   /* the runtime, for the tail's rundowns (owned copy) */
    uint64_t last_id;         /* the newest instance looked at */
    uint64_t missed;          /* instances evicted before the tail wrote them */
    uint64_t rundowns;        /* rundowns taken */
    uint64_t rundown_ms;      /* when the last one started (loop time) */
    uint64_t rundown_added;   /* the history's last id then: older frames it could not name */
    struct ev_symbols *named; /* during a tail's rundown: the names before it (owned), kept if
                                 it fails */
    uint64_t duration_ms;     /* the tail's (0: until stopped) */
    uint64_t host_pid;        /* where its threads' names are read (0: /proc does not show it) */
    uv_work_t names_work;
    bool names_busy; /* the names are being read on the pool */
    bool answer_due; /* the stream ended while they were: stacks_names_done answers */
    int names_rc;
    struct ipc_thread_name *names; /* owned, STACKS_NAMES_BYTES charged to share; sorted by tid
                                      once read */
    size_t nnames;
};

static struct profile_job *profile_of(struct job *core)
{
    return (struct profile_job *)core;
}

/* What the job makes, in words. */
static const char *job_noun(const struct profile_job *job)
{
    return job->k->noun;
}

/* The core's fini, once the timer is closed. */
static void profile_fini(struct job *core)
{
    struct profile_job *job = profile_of(core);
    ev_profile_free(job->prof);
    ev_symbols_free(job->sym); /* both give their bytes back to the share: before its fini */
    ev_symbols_free(job->named);
    if (job->names != NULL) {
        free(job->names);
        mb_release(&job->share, STACKS_NAMES_BYTES);
    }
    mb_share_fini(&job->share);
    trace_config_fini(&job->tc);
    ev_exc_filters_free(job->filters);
    ipc_endpoint_fini(&job->ep); /* zeroed unless following */
}

/* The session keeps the job. */
static bool profile_holds(const struct job *core)
{
    const struct profile_job *job = (const struct profile_job *)core;
    return job->ds != NULL || job->names_busy;
}

/* The operation's results. */
static cJSON *profile_results(struct job *core)
{
    const struct profile_job *job = profile_of(core);
    struct ev_symbols_stats st;
    ev_symbols_get_stats(job->sym, &st);
    cJSON *extra = cJSON_CreateObject();
    if (extra != NULL) {
        if (job->prof != NULL) {
            struct ev_profile_stats ps;
            ev_profile_get_stats(job->prof, &ps);
            cJSON_AddNumberToObject(extra, "events", (double)ps.events);
        } else {
            cJSON_AddNumberToObject(extra, "samples", (double)st.samples);
        }
        cJSON_AddNumberToObject(extra, "bytes", (double)st.bytes);
        cJSON_AddNumberToObject(extra, "droppedEvents", (double)st.lost);
        if (job->follow) {
            cJSON_AddNumberToObject(extra, "lastId", (double)job->last_id);
            cJSON_AddNumberToObject(extra, "missed", (double)job->missed);
            cJSON_AddNumberToObject(extra, "rundowns", (double)job->rundowns);
        }
    }
    return extra;
}

/* The core's graceful stop (DELETE ?stop=true, the duration, shutdown). */
static void profile_stop(struct job *core)
{
    struct profile_job *job = profile_of(core);
    uv_timer_stop(&core->timer);
    if (job->ds != NULL) {
        dsession_stop(job->ds);
    }
}

/* The core's abort: DELETE, the client disconnected, or the egress store failed. */
static void profile_abort(struct job *core, enum job_why why)
{
    struct profile_job *job = profile_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "%s of %" PRIu64 ": %s", job_noun(job), job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed"
                                               : "client disconnected");
    }
    dsession_abort(job->ds); /* StopTracing in the background; accepts NULL */
    job->ds = NULL;
    uv_timer_stop(&core->timer);
    if (job->following) {
        uv_timer_stop(&job->poll);
    }
}

/* ---- the consumer of the decoded session: ev_symbols (and ev_profile) ---- */

static int stacks_read_names(struct profile_job *job);

static void profile_started(void *ctx, uint64_t session_id, int version)
{
    struct profile_job *job = ctx;
    job->started = true;
    uint64_t ms = job->stacks ? agent_timeout(job->a, TIMEOUT_STACKS_SAMPLE)
                              : (uint64_t)job->duration_s * 1000;
    log_info(cat, "%s of %" PRIu64 ": session %" PRIx64 " (CollectTracing v%d) for %" PRIu64 " ms",
             job_noun(job), job->pid, session_id, version, job->exceptions ? 0 : ms);
    job_running(&job->core); /* the operation Running (Stopping when a stop came first) */
    if (job->core.state != JOB_STOPPING && !job->exceptions) { /* a rundown stops at once */
        job_arm_timeout(&job->core, ms);
    }
    if (job->stacks && job->host_pid != 0) {
        (void)stacks_read_names(job); /* while the sampler walks them: those threads exist */
    }
}

/* A piece the decoder refuses ends the session (error(AGENT_E_PROTO) follows; the runtime's
 * session is stopped in the background) and the answer says the stream is incomplete. */
static int profile_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct profile_job *job = ctx;
    job->feed_rc = ev_symbols_feed(job->sym, p, n);
    if (job->feed_rc != 0) {
        log_warn(cat, "profile of %" PRIu64 ": %s", job->pid,
                 ev_symbols_error(job->sym) != NULL ? ev_symbols_error(job->sym)
                                                    : agent_strerror(job->feed_rc));
    }
    return job->feed_rc;
}

/* The decoder's words for a stream it refused. */
static void profile_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct profile_job *job = ctx;
    const char *why = ev_symbols_error(job->sym);
    (void)rc;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

/* The answer as it is written: its bytes charged to the job's share (a hostile stream can make
 * a long answer of a small profile: every thread on one deep stack). */
struct body {
    struct buf b;
    struct mb_share *share;
    size_t charged;
};

static int body_sink(void *ud, const uint8_t *p, size_t n)
{
    struct body *o = ud;
    if (mb_charge(o->share, n) != 0) {
        return AGENT_E_BUDGET;
    }
    o->charged += n;
    return buf_append(&o->b, p, n);
}

static int cmp_name(const void *a, const void *b)
{
    const struct ipc_thread_name *x = a, *y = b;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static const char *thread_name_of(void *ud, uint64_t thread)
{
    const struct profile_job *job = ud;
    struct ipc_thread_name key = {.tid = thread};
    const struct ipc_thread_name *n =
        job->nnames > 0 ? bsearch(&key, job->names, job->nnames, sizeof(key), cmp_name) : NULL;
    return n != NULL ? n->name : NULL;
}

/* /stacks' answer: each thread's first sample, in the format asked. */
static int stacks_body(struct profile_job *job, struct body *b, const char **ctype)
{
    struct ev_stacks_opts o = {.thread_name = thread_name_of, .name_ud = job};
    o.format = job->format == PROFILE_SPEEDSCOPE ? EV_STACKS_SPEEDSCOPE
               : job->format == PROFILE_TEXT     ? EV_STACKS_TEXT
                                                 : EV_STACKS_JSON;
    *ctype = job->format == PROFILE_SPEEDSCOPE ? "application/speedscope+json"
             : job->format == PROFILE_TEXT     ? "text/plain; charset=utf-8"
                                               : "application/json";
    struct ev_stacks_counts n = {0};
    int rc = ev_stacks_write(job->sym, &o, &n, body_sink, b);
    log_info(cat, "stacks of %" PRIu64 ": %" PRIu64 " threads, %" PRIu64 " frames, %zu names",
             job->pid, n.threads, n.frames, job->nnames);
    return rc;
}

/* /exceptions' answer: the process's history as it is now, its frames named by the rundown. */
static int exceptions_body(struct profile_job *job, struct body *b, const char **ctype)
{
    struct ev_exc *h = exceptions_history(job->a->exceptions, job->uid);
    if (h == NULL) {
        return AGENT_E_NOTFOUND; /* the process went away meanwhile, and its history with it */
    }
    if (job->groups) {
        *ctype = "application/x-ndjson";
        return ev_exc_write_groups(h, job->sym, body_sink, b);
    }
    *ctype = job->exc_format == EV_EXC_NDJSON     ? "application/x-ndjson"
             : job->exc_format == EV_EXC_JSON_SEQ ? "application/json-seq"
                                                  : "text/plain; charset=utf-8";
    const struct ev_exc_filters *f = job->filters;
    uint64_t last = 0;
    int rc = ev_exc_write(h, job->sym, f != NULL ? f->include : NULL, f != NULL ? f->ninclude : 0,
                          f != NULL ? f->exclude : NULL, f != NULL ? f->nexclude : 0,
                          job->exc_format, 0, &last, NULL, NULL, body_sink, b);
    job->last_id = last;
    log_info(cat, "exceptions of %" PRIu64 ": %" PRIu64 " looked at, %zu bytes", job->pid, last,
             buf_size(&b->b));
    return rc;
}

/* The answer in b, and its content type. */
static int job_body(struct profile_job *job, struct body *b, const char **ctype)
{
    if (job->stacks) {
        return stacks_body(job, b, ctype);
    }
    if (job->exceptions) {
        return exceptions_body(job, b, ctype);
    }
    if (job->format == PROFILE_SPEEDSCOPE) {
        char name[64];
        snprintf(name, sizeof(name), "dotmon cpu profile of pid %" PRIu64, job->pid);
        *ctype = "application/json";
        return ev_symbols_write_speedscope(job->sym, name, body_sink, b);
    }
    if (job->format == PROFILE_FLAME) {
        *ctype = "application/json";
        return ev_symbols_write_flame(job->sym, job->pid, job->duration_s, body_sink, b);
    }
    if (job->prof != NULL) {
        bool text = job->format == PROFILE_TEXT;
        *ctype = text ? "text/plain; charset=utf-8" : "application/json";
        return text ? ev_profile_write_text(job->prof, job->pid, job->duration_s, job->top,
                                            body_sink, b)
                    : ev_profile_write_json(job->prof, job->pid, job->duration_s, job->top,
                                            body_sink, b);
    }
    struct ev_symbols_profile prof;
    int rc = ev_symbols_aggregate(job->sym, job->top, job->paths, &prof);
    if (rc != 0) {
        return rc;
    }
    if (job->format == PROFILE_TEXT) {
        *ctype = "text/plain; charset=utf-8";
        rc = ev_symbols_write_profile_text(&prof, job->pid, job->duration_s, body_sink, b);
    } else {
        *ctype = "application/json";
        rc = ev_symbols_write_profile_json(&prof, job->pid, job->duration_s, body_sink, b);
    }
    ev_symbols_profile_fini(&prof);
    return rc;
}

/* The body handed to the artifact without a copy (a speedscope document can be tens of MB). */
static int write_body(struct artifact *out, struct buf *b)
{
    size_t n = 0;
    char *p = buf_steal(b, &n);
    if (p == NULL) {
        return -ENOMEM;
    }
    return artifact_write_owned(out, p, p, n);
}

static void job_fail(struct profile_job *job, int http_status, const char *code, const char *msg)
{
    char detail[512];
    snprintf(detail, sizeof(detail), "cannot %s process %" PRIu64 ": %s", job->k->verb, job->pid,
             msg);
    job_end(&job->core, JOB_END_FAIL, http_status, code, msg, detail);
}

/* More names (count or bytes) than a profile keeps, or over its share of the memory budget. */
static void job_too_large(struct profile_job *job, int rc)
{
    char msg[320];
    const char *what = job->k->need;
    const char *shorter = job->k->hint;
    if (rc == AGENT_E_BUDGET) {
        snprintf(msg, sizeof(msg),
                 "%s more than their share of dotmon's memory budget (%llu MiB of %llu MiB); "
                 "raise Memory:LimitMB%s",
                 what, (unsigned long long)(job->share.cap >> 20),
                 (unsigned long long)(membudget_total() >> 20), shorter);
    } else {
        snprintf(msg, sizeof(msg),
                 "%s more distinct names than dotmon keeps (%u, or %llu MiB of names)%s", what,
                 EV_PROFILE_MAX_KEYS, (unsigned long long)(EV_PROFILE_MAX_NAME_BYTES >> 20),
                 shorter);
    }
    job_fail(job, 507, job->k->too_large, msg);
}

static void job_write_answer(struct profile_job *job);

/* Pool: the names of the process's threads (/proc/<host_pid>/task). */
static void stacks_names_work(uv_work_t *w)
{
    struct profile_job *job = w->data;
    job->names_rc =
        ipc_node_thread_names(job->host_pid, job->names, STACKS_MAX_THREADS, &job->nnames);
    if (job->names_rc == 0) {
        qsort(job->names, job->nnames, sizeof(*job->names), cmp_name);
    }
}

static void stacks_names_done(uv_work_t *w, int status)
{
    struct profile_job *job = w->data;
    job->names_busy = false;
    if (status != 0 || job->names_rc != 0) {
        log_debug(cat, "stacks of %" PRIu64 ": thread names not read (%s)", job->pid,
                  agent_strerror(status != 0 ? status : job->names_rc));
        job->nnames = 0;
    }
    if (job->answer_due && job->core.state < JOB_ENDED) { /* else not yet, or cancelled */
        job_write_answer(job);
    }
    job_release(&job->core);
}

/* Reads the thread names off the loop: 0 when queued (the answer follows). */
static int stacks_read_names(struct profile_job *job)
{
    if (mb_charge(&job->share, STACKS_NAMES_BYTES) != 0) {
        return AGENT_E_BUDGET; /* answered without names */
    }
    job->names = calloc(STACKS_MAX_THREADS, sizeof(*job->names));
    if (job->names == NULL) {
        mb_release(&job->share, STACKS_NAMES_BYTES);
        return -ENOMEM;
    }
    job->names_work.data = job;
    int rc = uv_queue_work(job->a->loop, &job->names_work, stacks_names_work, stacks_names_done);
    job->names_busy = rc == 0;
    return rc;
}

/* The session ended (status 0: the runtime closed the stream): the answer from what came. */
static void job_answer(struct profile_job *job, int status)
{
    int rc = job->feed_rc != 0 ? job->feed_rc : ev_symbols_finish(job->sym);
    if (rc == 0 && job->prof != NULL) {
        rc = ev_profile_status(job->prof); /* an event it could not keep: not a whole answer */
    }
    struct ev_symbols_stats st;
    ev_symbols_get_stats(job->sym, &st);
    log_info(cat,
             "%s of %" PRIu64 " ended: %" PRIu64 " bytes, %" PRIu64 " samples, %" PRIu64
             " methods%s%s",
             job_noun(job), job->pid, st.bytes, st.samples, st.methods, rc != 0 ? "; " : "",
             rc != 0 ? agent_strerror(rc) : "");
    if (rc == AGENT_E_TOOBIG || rc == AGENT_E_BUDGET) {
        job_too_large(job, rc);
        return;
    }
    if (rc != 0) {
        /* Without the rundown at the end (the runtime died, the stop timed out) the stacks cannot
         * be named: no answer rather than a wrong one. */
        const char *why = ev_symbols_error(job->sym);
        char kept[160];
        if (why == NULL && job->prof != NULL && ev_profile_status(job->prof) != 0) {
            snprintf(kept, sizeof(kept), "the profile could not be kept whole: %s",
                     agent_strerror(rc));
            why = kept;
        }
        char msg[400];
        snprintf(msg, sizeof(msg), "the %s stream is incomplete (%s)%s%s", job->k->stream,
                 why != NULL ? why : agent_strerror(rc), status != 0 ? ": " : "",
                 status != 0 ? agent_strerror(status) : "");
        job_fail(job, status == AGENT_E_TIMEOUT ? 504 : 502, job->k->incomplete, msg);
        return;
    }
    if (job->stacks && st.samples == 0) {
        /* The sampler had not walked the threads yet when the session ended: no answer rather
         * than an empty one (every .NET process has a thread with a managed stack). */
        char msg[200];
        snprintf(msg, sizeof(msg),
                 "the runtime's sampler took no stack in %llu ms; retry, or raise "
                 "Timeouts:StacksSampleMs",
                 (unsigned long long)agent_timeout(job->a, TIMEOUT_STACKS_SAMPLE));
        job_fail(job, 502, "StacksEmpty", msg);
        return;
    }
    if (job->names_busy) {
        job->answer_due = true; /* answered once the names are in (stacks_names_done) */
        return;
    }
    job_write_answer(job);
}

static void follow_start(struct profile_job *job);

/* The answer from the finished stream, to the artifact. */
static void job_write_answer(struct profile_job *job)
{
    struct body b = {.share = &job->share};
    buf_init(&b.b, 0);
    const char *ctype = NULL;
    int rc = job_body(job, &b, &ctype);
    if (rc == AGENT_E_TOOBIG || rc == AGENT_E_BUDGET) {
        job_too_large(job, rc);
    } else if (rc == AGENT_E_NOTFOUND && job->exceptions) {
        job_fail(job, 502, "ProcessExited",
                 "the process exited while its exceptions were named; its history went with it");
    } else if (rc != 0) {
        job_fail(job, 500, rc == -ENOMEM ? "OutOfMemory" : "ProfileFailed", agent_strerror(rc));
    } else if (job->core.art != NULL &&
               (artifact_begin(job->core.art, ctype, job->filename) != 0 ||
                (buf_size(&b.b) > 0 && write_body(job->core.art, &b.b) != 0))) {
        /* The consumer is gone (on_lost may have ended the artifact already). */
        job_end(&job->core, JOB_END_CANCEL, 400, NULL, NULL, NULL);
    } else if (job->follow) {
        follow_start(job); /* the history so far is out: the tail from here */
    } else {
        job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    }
    buf_fini(&b.b);
    mb_release(&job->share, b.charged); /* handed to the artifact whole, as every answer here */
}

/* The session's one end: a refusal, or the answer from what came; then the job released. */
static void follow_rundown_done(struct profile_job *job, int code);

static void profile_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct profile_job *job = ctx;
    (void)reason; /* the answer says it in its own words */
    job->ds = NULL;
    if (job->following) { /* a rundown of the tail */
        follow_rundown_done(job, code);
        job_release(&job->core);
        return;
    }
    uv_timer_stop(&job->core.timer);
    if (!job->started) {
        char msg[256];
        const char *pcode = NULL;
        int http_status =
            api_session_refused(code, hresult, job_noun(job), msg, sizeof(msg), &pcode);
        log_warn(cat, "profile of %" PRIu64 " failed to start: %s", job->pid, msg);
        job_fail(job, http_status, pcode, msg);
    } else {
        job_answer(job, code);
    }
    job_release(&job->core);
}

static void profile_finish(void *ctx, const char *how)
{
    profile_error(ctx, 0, 0, how);
}

static const struct dsession_consumer profile_consumer = {.started = profile_started,
                                                          .feed = profile_feed,
                                                          .describe = profile_describe,
                                                          .finish = profile_finish,
                                                          .error = profile_error};

static const struct artifact_spec profile_spec = {.kind = OP_KIND_TRACE,
                                                  .noun = "profile",
                                                  .limit_setting =
                                                      "RequestLimits:Trace:MaxConcurrency",
                                                  .high_water = 1024u * 1024u,
                                                  .low_water = 256u * 1024u};
static const struct artifact_events profile_events = {.on_ready = NULL, .on_lost = job_lost};

/* Kind TRACE: it counts against the trace limit, and collect_shutdown(TRACE) stops it too. */
static const struct job_vtable profile_vt = {.kind = OP_KIND_TRACE,
                                             .noun = "profile",
                                             .stop = profile_stop,
                                             .abort = profile_abort,
                                             .results = profile_results,
                                             .holds = profile_holds,
                                             .fini = profile_fini};

/* /stacks: the sampling ends (Timeouts:StacksSampleMs): StopTracing, the rundown names them. */
static void stacks_timeout(struct job *core)
{
    profile_stop(core);
}

static const struct artifact_spec stacks_spec = {.kind = OP_KIND_STACKS,
                                                 .noun = "stacks",
                                                 .limit_setting = NULL,
                                                 .high_water = 1024u * 1024u,
                                                 .low_water = 256u * 1024u};

/* Not stoppable (as dotnet-monitor's): DELETE ?stop=true is a 400, DELETE cancels, and so does
 * shutdown. */
static const struct job_vtable stacks_vt = {.kind = OP_KIND_STACKS,
                                            .noun = "stacks",
                                            .stop = NULL,
                                            .abort = profile_abort,
                                            .on_timeout = stacks_timeout,
                                            .results = profile_results,
                                            .holds = profile_holds,
                                            .fini = profile_fini};

/* ---- /exceptions?follow=true: the tail ---- */

static void follow_rundown(struct profile_job *job);

/* The instances after last_id to the artifact; when may_rundown and some frame of theirs is not
 * named, a new rundown first (at most every FOLLOW_RUNDOWN_MS: they wait for it), after which this
 * comes again and writes them, named or not. */
static void follow_flush(struct profile_job *job, bool may_rundown)
{
    if (job->core.state >= JOB_ENDED || job->core.art == NULL || job->ds != NULL) {
        return;
    }
    struct ev_exc *h = exceptions_history(job->a->exceptions, job->uid);
    if (h == NULL) { /* the process is gone, and its history: the tail is complete */
        uv_timer_stop(&job->poll);
        job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
        job_release(&job->core); /* nothing else would: no session, no timer left */
        return;
    }
    struct ev_exc_stats xs;
    ev_exc_get_stats(h, &xs);
    if (xs.added <= job->last_id || artifact_full(job->core.art)) {
        return; /* nothing new, or a slow client: later (what the history evicts meanwhile is
                   counted as missed) */
    }
    size_t unnamed = 0;
    uint64_t since = job->last_id > job->rundown_added ? job->last_id : job->rundown_added;
    if (may_rundown && ev_exc_unnamed(h, job->sym, since, &unnamed) == 0 && unnamed > 0) {
        if (uv_now(job->a->loop) - job->rundown_ms >= FOLLOW_RUNDOWN_MS) {
            follow_rundown(job);
        }
        return; /* written once a rundown named what it can (within FOLLOW_RUNDOWN_MS) */
    }
    uint64_t first = xs.added - xs.kept + 1; /* the oldest kept */
    struct body b = {.share = &job->share};
    buf_init(&b.b, 0);
    const struct ev_exc_filters *f = job->filters;
    uint64_t last = job->last_id;
    int rc = ev_exc_write(h, job->sym, f != NULL ? f->include : NULL, f != NULL ? f->ninclude : 0,
                          f != NULL ? f->exclude : NULL, f != NULL ? f->nexclude : 0,
                          job->exc_format, job->last_id, &last, NULL, NULL, body_sink, &b);
    if (rc == 0) {
        if (first > job->last_id + 1) { /* evicted before the tail came to them */
            job->missed += first - job->last_id - 1;
        }
        job->last_id = last > xs.added ? last : xs.added;
        if (buf_size(&b.b) > 0) {
            (void)write_body(job->core.art, &b.b); /* a consumer gone: on_lost ends the job */
        }
    } else {
        log_warn(cat, "exceptions of %" PRIu64 ": the tail cannot be written: %s", job->pid,
                 agent_strerror(rc));
    }
    buf_fini(&b.b);
    mb_release(&job->share, b.charged);
}

static void follow_on_poll(uv_timer_t *t)
{
    follow_flush((struct profile_job *)t->data, true);
}

/* A fresh sym from a new rundown (the old one cannot read a second stream). */
static void follow_rundown(struct profile_job *job)
{
    struct ev_symbols *sym = NULL;
    if (ev_symbols_new(&sym) != 0) {
        follow_flush(job, false);
        return;
    }
    job->named = job->sym; /* kept until the new one is whole */
    job->sym = sym;
    (void)ev_symbols_set_share(job->sym, &job->share);
    job->feed_rc = 0;
    job->rundown_ms = uv_now(job->a->loop);
    struct ev_exc *h = exceptions_history(job->a->exceptions, job->uid);
    if (h != NULL) {
        struct ev_exc_stats xs;
        ev_exc_get_stats(h, &xs);
        job->rundown_added = xs.added;
    }
    job->rundowns++;
    struct dsession_config cfg = {.collect = &job->tc.collect,
                                  .admission = &job->a->sessions,
                                  .start_timeout_ms = agent_timeout(job->a, TIMEOUT_PROFILE_START),
                                  .stop_timeout_ms = agent_timeout(job->a, TIMEOUT_PROFILE_STOP),
                                  .stop_at_once = true};
    if (dsession_start(job->a->loop, &job->ep, &cfg, &profile_consumer, job, &job->ds) != 0) {
        job->ds = NULL;
        follow_rundown_done(job, AGENT_E_RUNTIME);
    }
}

/* The tail's rundown is over: its names replace the old ones when it is whole, else the old
 * ones stay; then what waited is written. */
static void follow_rundown_done(struct profile_job *job, int code)
{
    int rc = code != 0 ? code : job->feed_rc != 0 ? job->feed_rc : ev_symbols_finish(job->sym);
    if (rc != 0) {
        log_info(cat,
                 "exceptions of %" PRIu64 ": a rundown for the tail failed (%s); the names "
                 "known before it are kept",
                 job->pid, agent_strerror(rc));
        ev_symbols_free(job->sym); /* its bytes back to the share */
        job->sym = job->named;
    } else {
        ev_symbols_free(job->named);
    }
    job->named = NULL;
    follow_flush(job, false);
}

static void follow_start(struct profile_job *job)
{
    job->following = true;
    job->rundown_ms = uv_now(job->a->loop);
    job->rundowns = 1;
    job_add_timer(&job->core, &job->poll);
    uv_timer_start(&job->poll, follow_on_poll, FOLLOW_POLL_MS, FOLLOW_POLL_MS);
    if (job->duration_ms > 0) {
        job_arm_timeout(&job->core, job->duration_ms);
    }
    log_info(cat, "exceptions of %" PRIu64 ": following from id %" PRIu64, job->pid, job->last_id);
}

/* The tail's end (DELETE ?stop=true, the duration, shutdown): what is new is written, then the
 * artifact ends complete. Before the first answer is out, it comes as without follow. */
static void follow_stop(struct job *core)
{
    struct profile_job *job = profile_of(core);
    uv_timer_stop(&core->timer);
    if (!job->following) {
        job->follow = false;
        return;
    }
    uv_timer_stop(&job->poll);
    if (job->ds != NULL) { /* a rundown under way: written with the names known before it */
        dsession_abort(job->ds);
        job->ds = NULL;
        ev_symbols_free(job->sym);
        job->sym = job->named;
        job->named = NULL;
    }
    follow_flush(job, false);
    job_end(core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    job_release(core);
}

/* Shutdown: a tail ends as a stop does; before its first answer, the job is cancelled (the
 * histories go with dotmon's shutdown before a rundown could name them). */
static void follow_shutdown(struct job *core)
{
    if (profile_of(core)->following) {
        job_stop(core);
    } else {
        job_cancel(core);
    }
}

static const struct artifact_spec exceptions_spec = {.kind = OP_KIND_EXCEPTIONS,
                                                     .noun = "exceptions",
                                                     .limit_setting = NULL,
                                                     .high_water = 1024u * 1024u,
                                                     .low_water = 256u * 1024u};

/* ?follow=true: stoppable (the tail ends complete), and ended by its duration. */
static const struct job_vtable exceptions_follow_vt = {.kind = OP_KIND_EXCEPTIONS,
                                                       .noun = "exceptions",
                                                       .stop = follow_stop,
                                                       .abort = profile_abort,
                                                       .on_timeout = follow_stop,
                                                       .shutdown = follow_shutdown,
                                                       .results = profile_results,
                                                       .holds = profile_holds,
                                                       .fini = profile_fini};

/* Not stoppable either (dotnet-monitor's ExceptionsOperation): the rundown stops at once. */
static const struct job_vtable exceptions_vt = {.kind = OP_KIND_EXCEPTIONS,
                                                .noun = "exceptions",
                                                .stop = NULL,
                                                .abort = profile_abort,
                                                .results = profile_results,
                                                .holds = profile_holds,
                                                .fini = profile_fini};

static const struct job_kind kind_profile = {.noun = "profile",
                                             .verb = "profile",
                                             .need = "the profile needs",
                                             .hint = ", or profile a shorter durationSeconds",
                                             .stream = "profile",
                                             .too_large = "ProfileTooLarge",
                                             .incomplete = "ProfileIncomplete",
                                             .spec = &profile_spec};
static const struct job_kind kind_stacks = {.noun = "stacks",
                                            .verb = "collect the stacks of",
                                            .need = "the stacks need",
                                            .hint = "",
                                            .stream = "stacks'",
                                            .too_large = "StacksTooLarge",
                                            .incomplete = "StacksIncomplete",
                                            .spec = &stacks_spec};
static const struct job_kind kind_exceptions = {.noun = "exceptions",
                                                .verb = "collect the exceptions of",
                                                .need = "the exceptions need",
                                                .hint = "",
                                                .stream = "rundown",
                                                .too_large = "ExceptionsTooLarge",
                                                .incomplete = "ExceptionsIncomplete",
                                                .spec = &exceptions_spec};

/* kind into *kind (PROFILE_KIND_CPU or an ev_profile kind): 0, or -1 once answered. */
static int query_kind(struct http_request *req, int *kind)
{
    struct buf v;
    buf_init(&v, 64);
    int has = http_query_get(http_request_query(req), "kind", &v);
    enum ev_profile_kind k = EV_PROFILE_ALLOC;
    int rc = 0;
    *kind = PROFILE_KIND_CPU;
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
        rc = -1;
    } else if (has == 1 && ev_profile_kind_parse(buf_cstr(&v), &k) == 0) {
        *kind = (int)k;
    } else if (has == 1 && strcasecmp(buf_cstr(&v), "cpu") != 0) {
        api_problem(req, 400, "unknown kind '%s'; supported: " PROFILE_SUPPORTED_KINDS,
                    buf_cstr(&v));
        rc = -1;
    }
    buf_fini(&v);
    return rc;
}

/* format and Accept into *format, for kind: 0, or -1 once answered with a problem. */
static int query_format(struct http_request *req, int kind, enum profile_format *format)
{
    struct buf fmt;
    buf_init(&fmt, 64);
    int has_fmt = http_query_get(http_request_query(req), "format", &fmt);
    const char *f = has_fmt == 1 ? buf_cstr(&fmt) : "";
    const char *accept = http_request_header(req, "Accept");
    int rc = -1;
    if (has_fmt < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (has_fmt == 1 && strcasecmp(f, "speedscope") != 0 && strcasecmp(f, "json") != 0 &&
               strcasecmp(f, "text") != 0 && strcasecmp(f, "flame") != 0) {
        api_problem(req, 400, "unknown format '%s' (json, text, speedscope or flame)", f);
    } else if (kind != PROFILE_KIND_CPU &&
               (strcasecmp(f, "speedscope") == 0 || strcasecmp(f, "flame") == 0)) {
        api_problem(req, 400, "format=%s is a CPU profile (kind=cpu); kind=%s answers json or text",
                    f, ev_profile_kind_name((enum ev_profile_kind)kind));
    } else {
        *format = PROFILE_JSON;
        if (strcasecmp(f, "speedscope") == 0) {
            *format = PROFILE_SPEEDSCOPE;
        } else if (strcasecmp(f, "flame") == 0) {
            *format = PROFILE_FLAME;
        } else if (strcasecmp(f, "text") == 0 ||
                   (has_fmt != 1 && accept != NULL && strstr(accept, "text/plain") != NULL &&
                    strstr(accept, "application/json") == NULL)) {
            *format = PROFILE_TEXT;
        }
        rc = 0;
    }
    buf_fini(&fmt);
    return rc;
}

/*
 * The session of kind into tc: the cpu-sampling profile, or the runtime provider with the kind's
 * keywords (ev_profile.h). 0 or -ENOMEM.
 */
static int kind_config(int kind, double metrics_interval_s, struct trace_config *tc)
{
    if (kind == PROFILE_KIND_CPU) {
        return trace_config_from_profiles("cpu-sampling", metrics_interval_s, tc, NULL);
    }
    if (kind == PROFILE_KIND_STACKS) { /* as dotnet-stack: the sampler alone, then the rundown */
        static const char body[] =
            "{\"Providers\":[{\"Name\":\"Microsoft-DotNETCore-SampleProfiler\","
            "\"EventLevel\":\"Informational\",\"Keywords\":\"0xF00000000000\"}],"
            "\"RequestRundown\":true}";
        int rc = trace_config_from_json(body, sizeof(body) - 1, tc, NULL);
        return rc == AGENT_E_INVAL ? -ENOMEM : rc;
    }
    if (kind == PROFILE_KIND_EXCEPTIONS) {
        /* The rundown alone (the session is stopped as soon as it exists): the runtime's provider
         * with no keyword at Critical, which a healthy runtime does not write. */
        static const char body[] =
            "{\"Providers\":[{\"Name\":\"Microsoft-Windows-DotNETRuntime\","
            "\"EventLevel\":\"Critical\",\"Keywords\":\"0x0\"}],\"RequestRundown\":true}";
        int rc = trace_config_from_json(body, sizeof(body) - 1, tc, NULL);
        if (rc == 0) {
            tc->collect.disable_stackwalk = true;
        }
        return rc == AGENT_E_INVAL ? -ENOMEM : rc;
    }
    uint64_t kw = kind == EV_PROFILE_ALLOC        ? KW_GC | KW_METHODS
                  : kind == EV_PROFILE_EXCEPTIONS ? KW_EXCEPTION | KW_METHODS
                  : kind == EV_PROFILE_CONTENTION ? KW_CONTENTION | KW_METHODS
                                                  : KW_GC;
    bool gc = kind == EV_PROFILE_GC;
    char body[256];
    int n = snprintf(body, sizeof(body),
                     "{\"Providers\":[{\"Name\":\"Microsoft-Windows-DotNETRuntime\","
                     "\"EventLevel\":\"%s\",\"Keywords\":\"0x%llx\"}],\"RequestRundown\":%s}",
                     kind == EV_PROFILE_ALLOC ? "Verbose" : "Informational", (unsigned long long)kw,
                     gc ? "false" : "true");
    int rc = trace_config_from_json(body, (size_t)n, tc, NULL);
    if (rc == 0 && gc) {
        tc->collect.disable_stackwalk = true; /* GC events are read without their stacks */
    }
    return rc == AGENT_E_INVAL ? -ENOMEM : rc; /* the body is ours: only memory can fail */
}

/* What a request asks for. */
struct profile_ask {
    int kind; /* PROFILE_KIND_CPU, _STACKS, _EXCEPTIONS or an ev_profile kind */
    enum profile_format format;
    enum ev_exc_format exc_format;
    struct ev_exc_filters *filters; /* /exceptions: taken by the job */
    bool follow;                    /* /exceptions?follow=true */
    bool groups;                    /* /exceptions?groups=true */
    int64_t follow_s;               /* its durationSeconds (-1: until stopped) */
    long duration_s;
    long top;
    long paths; /* -1: not asked */
};

/* A job for ask, with its decoders and session configuration; NULL when out of memory. */
static struct profile_job *job_create(struct agent *a, const struct profile_ask *ask)
{
    bool stacks = ask->kind == PROFILE_KIND_STACKS;
    bool exceptions = ask->kind == PROFILE_KIND_EXCEPTIONS;
    struct profile_job *job =
        (struct profile_job *)job_new(&a->collect,
                                      stacks                      ? &stacks_vt
                                      : exceptions && ask->follow ? &exceptions_follow_vt
                                      : exceptions                ? &exceptions_vt
                                                                  : &profile_vt,
                                      sizeof(struct profile_job));
    if (job == NULL || ev_symbols_new(&job->sym) != 0 ||
        (ask->kind >= 0 &&
         ev_profile_new((enum ev_profile_kind)ask->kind, job->sym, &job->prof) != 0) ||
        kind_config(ask->kind, a->metrics_interval_sec, &job->tc) != 0) {
        if (job != NULL) {
            job_release(&job->core);
        }
        return NULL;
    }
    job->k = stacks ? &kind_stacks : exceptions ? &kind_exceptions : &kind_profile;
    mb_share_init(&job->share, job->k->noun, membudget_fraction(PROFILE_BUDGET_PCT, 0));
    (void)ev_symbols_set_share(job->sym, &job->share); /* methods, names, stacks, samples */
    if (job->prof != NULL) {
        (void)ev_profile_set_share(job->prof, &job->share);
    }
    job->a = a;
    job->stacks = stacks;
    job->exceptions = exceptions;
    job->exc_format = ask->exc_format;
    job->follow = exceptions && ask->follow;
    job->groups = exceptions && ask->groups;
    job->duration_ms = ask->follow_s > 0 ? (uint64_t)ask->follow_s * 1000 : 0;
    job->duration_s = (uint32_t)ask->duration_s;
    job->top = (size_t)ask->top;
    job->paths = ask->paths > 0 ? (size_t)ask->paths : 0;
    job->format = ask->format;
    return job;
}

/* The artifact's file name: dotnet-monitor's yyyyMMdd_HHmmss_fff_<pid>.stacks.<txt|json> for
 * /stacks. */
static void job_filename(struct profile_job *job, int kind, uint64_t pid)
{
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    enum profile_format f = job->format;
    if (kind == PROFILE_KIND_STACKS) {
        snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".stacks.%s", ts, pid,
                 f == PROFILE_TEXT ? "txt" : "json");
        return;
    }
    if (kind == PROFILE_KIND_EXCEPTIONS) {
        snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 ".exceptions%s.%s", ts, pid,
                 job->groups ? "-groups" : "",
                 job->exc_format == EV_EXC_TEXT && !job->groups ? "txt" : "json");
        return;
    }
    snprintf(job->filename, sizeof(job->filename), "%s_%" PRIu64 "%s%s.%s", ts, pid,
             kind == PROFILE_KIND_CPU ? "" : ".",
             kind == PROFILE_KIND_CPU ? "" : ev_profile_kind_name((enum ev_profile_kind)kind),
             f == PROFILE_SPEEDSCOPE ? "speedscope.json"
             : f == PROFILE_FLAME    ? "flame.json"
             : f == PROFILE_TEXT     ? "profile.txt"
                                     : "profile.json");
}

/* Starts what ask says on p for o (a request or a rule's action): 0 once its operation
 * exists, -1 when refused (artifact_refuse answered). */
static int profile_launch(struct agent *a, const struct artifact_origin *o,
                          const struct ipc_process *p, const struct profile_ask *ask)
{
    /* Aborted sessions finish their StopTracing in the background; count them too (as /trace). */
    if (a->sessions.live >= a->ops.limit[OP_KIND_TRACE] + PROFILE_SESSION_SLACK) {
        ev_exc_filters_free(ask->filters);
        artifact_refuse(o, 429, "%zu sessions are still being closed; retry in a few seconds",
                        a->sessions.live);
        return -1;
    }
    if (ask->kind == PROFILE_KIND_EXCEPTIONS && exceptions_history(a->exceptions, p->uid) == NULL) {
        ev_exc_filters_free(ask->filters);
        artifact_refuse(o, 503,
                        "the exceptions history of process %" PRIu64 " is not kept (its session "
                        "could not be made: dotmon's log says why)",
                        p->pid);
        return -1;
    }
    struct profile_job *job = job_create(a, ask);
    if (job == NULL) {
        ev_exc_filters_free(ask->filters);
        artifact_refuse(o, 500, "out of memory");
        return -1;
    }
    job->filters = ask->filters;
    struct operation *op = NULL;
    const struct artifact_spec *spec = job->k->spec;
    if (artifact_admit_origin(a, o, p, spec, &profile_events, job, &job->core.art, &op) != 0) {
        job_release(&job->core);
        return -1;
    }
    job_admitted(&job->core, op); /* DELETE stops or cancels through the core */
    job->pid = p->pid;
    memcpy(job->uid, p->uid, sizeof(job->uid));
    if (job->follow && ipc_endpoint_copy(&job->ep, &p->ep) != 0) {
        job_fail(job, 500, "OutOfMemory", "out of memory");
        job_release(&job->core);
        return 0;
    }
    job->host_pid = p->host_pid;
    job_filename(job, ask->kind, p->pid);
    op->artifact_name = strdup(job->filename);
    artifact_accept(job->core.art);
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    struct dsession_config cfg = {.collect = &job->tc.collect,
                                  .admission = &a->sessions,
                                  .start_timeout_ms = agent_timeout(a, TIMEOUT_PROFILE_START),
                                  .stop_timeout_ms = agent_timeout(a, TIMEOUT_PROFILE_STOP),
                                  .stop_at_once = job->exceptions};
    int rc = dsession_start(a->loop, &ep, &cfg, &profile_consumer, job, &job->ds);
    if (rc != 0) {
        job_fail(job, 502, "RuntimeUnreachable", agent_strerror(rc));
        job_release(&job->core);
    }
    return 0; /* the operation exists: its end tells the rest */
}

/* The process the request selects, then profile_launch for it. */
static void launch_for_request(struct agent *a, struct http_request *req,
                               const struct profile_ask *ask)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p != NULL) {
        const struct artifact_origin o = {.req = req};
        (void)profile_launch(a, &o, p, ask);
    } else {
        ev_exc_filters_free(ask->filters);
    }
}

void api_profile_get(struct agent *a, struct http_request *req)
{
    struct profile_ask ask = {.kind = PROFILE_KIND_CPU, .format = PROFILE_JSON};
    if (query_kind(req, &ask.kind) != 0 || query_format(req, ask.kind, &ask.format) != 0 ||
        api_query_int(req, "durationSeconds", 1, PROFILE_MAX_S, PROFILE_DEFAULT_S,
                      &ask.duration_s) != 0 ||
        api_query_int(req, "top", 1, EV_SYMBOLS_TOP_MAX, PROFILE_DEFAULT_TOP, &ask.top) != 0 ||
        api_query_int(req, "paths", 0, EV_SYMBOLS_PATHS_MAX, -1, &ask.paths) != 0) {
        return;
    }
    /* Hot paths rank the CPU samples' stacks; the other kinds' stacks are in their sites. */
    if (ask.paths > 0 && ask.kind != PROFILE_KIND_CPU) {
        api_problem(req, 400, "paths is for a CPU profile (kind=cpu); kind=%s has no hot paths",
                    ev_profile_kind_name((enum ev_profile_kind)ask.kind));
        return;
    }
    launch_for_request(a, req, &ask);
}

/*
 * /stacks' format: dotnet-monitor's content negotiation (text/plain, application/json,
 * application/speedscope+json named exactly, in that order, then the ranges that hold them;
 * text otherwise), or dotmon's format=text|json|speedscope. 0, or -1 once answered.
 */
static int stacks_format(struct http_request *req, enum profile_format *format)
{
    static const char *const types[] = {"text/plain", "application/json",
                                        "application/speedscope+json"};
    static const enum profile_format fmts[] = {PROFILE_TEXT, PROFILE_JSON, PROFILE_SPEEDSCOPE};
    struct buf f;
    buf_init(&f, 64);
    int has = http_query_get(http_request_query(req), "format", &f);
    int rc = 0;
    *format = PROFILE_TEXT;
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
        rc = -1;
    } else if (has == 1) {
        const char *v = buf_cstr(&f);
        bool ok = strcasecmp(v, "text") == 0 || strcasecmp(v, "json") == 0 ||
                  strcasecmp(v, "speedscope") == 0;
        *format = strcasecmp(v, "json") == 0         ? PROFILE_JSON
                  : strcasecmp(v, "speedscope") == 0 ? PROFILE_SPEEDSCOPE
                                                     : PROFILE_TEXT;
        if (!ok) {
            api_problem(req, 400, "unknown format '%s' (text, json or speedscope)", v);
            rc = -1;
        }
    } else {
        int k = api_accept_pick(http_request_header(req, "Accept"), types, 3);
        *format = k >= 0 ? fmts[k] : PROFILE_TEXT; /* none: text, as dotnet-monitor */
    }
    buf_fini(&f);
    return rc;
}

void api_stacks_get(struct agent *a, struct http_request *req)
{
    struct profile_ask ask = {.kind = PROFILE_KIND_STACKS};
    if (stacks_format(req, &ask.format) != 0) {
        return;
    }
    launch_for_request(a, req, &ask);
}

int collect_stacks(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                   const char *format)
{
    struct profile_ask ask = {.kind = PROFILE_KIND_STACKS, .format = PROFILE_JSON};
    if (format != NULL && strcasecmp(format, "PlainText") == 0) {
        ask.format = PROFILE_TEXT;
    } else if (format != NULL && strcasecmp(format, "Speedscope") == 0) {
        ask.format = PROFILE_SPEEDSCOPE;
    } else if (format != NULL && strcasecmp(format, "Json") != 0) {
        artifact_refuse(o, 400, "unknown stacks format '%s' (Json, PlainText or Speedscope)",
                        format);
        return -1;
    }
    return profile_launch(a, o, p, &ask);
}

/*
 * /exceptions' format: dotnet-monitor's ComputeFormat (text/plain, application/x-ndjson,
 * application/json-seq named exactly, in that order, then the ranges that hold them; text
 * otherwise).
 */
static enum ev_exc_format exceptions_format(struct http_request *req)
{
    static const char *const types[] = {"text/plain", "application/x-ndjson",
                                        "application/json-seq"};
    static const enum ev_exc_format fmts[] = {EV_EXC_TEXT, EV_EXC_NDJSON, EV_EXC_JSON_SEQ};
    int k = api_accept_pick(http_request_header(req, "Accept"), types, 3);
    return k >= 0 ? fmts[k] : EV_EXC_TEXT;
}

/* dotmon's follow=true (and then durationSeconds, default 30, -1 until stopped) and
 * groups=true: 0, or -1 once answered. */
static int exceptions_follow(struct http_request *req, struct profile_ask *ask)
{
    if (api_query_bool(req, "follow", &ask->follow) != 0 ||
        api_query_bool(req, "groups", &ask->groups) != 0) {
        return -1;
    }
    if (ask->follow && ask->groups) {
        api_problem(req, 400, "groups=true counts what was thrown so far: it does not follow");
        return -1;
    }
    return ask->follow && api_parse_duration(req, &ask->follow_s) != 0 ? -1 : 0;
}

void api_exceptions_get(struct agent *a, struct http_request *req)
{
    struct profile_ask ask = {.kind = PROFILE_KIND_EXCEPTIONS,
                              .exc_format = exceptions_format(req)};
    if (exceptions_follow(req, &ask) != 0) {
        return;
    }
    launch_for_request(a, req, &ask);
}

void api_exceptions_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415,
                    "POST /exceptions takes a JSON body (ExceptionsConfiguration), not %s", ct);
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct profile_ask ask = {.kind = PROFILE_KIND_EXCEPTIONS,
                              .exc_format = exceptions_format(req)};
    char err[256];
    if (exceptions_follow(req, &ask) != 0) {
        return;
    }
    if (ask.groups) {
        api_problem(req, 400,
                    "groups=true takes no filters (InProcessFeatures:Exceptions:CollectionFilters "
                    "apply to it): use GET");
        return;
    }
    if (len == 0) {
        api_problem(req, 400, "POST /exceptions needs a JSON body (ExceptionsConfiguration)");
        return;
    }
    int rc = ev_exc_filters_parse((const char *)body, len, &ask.filters, err, sizeof(err));
    if (rc == AGENT_E_INVAL) {
        api_problem(req, 400, "%s", err);
        return;
    }
    if (rc != 0) {
        api_problem(req, 500, "%s", agent_strerror(rc));
        return;
    }
    launch_for_request(a, req, &ask);
}

int collect_exceptions(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p, const char *format,
                       struct ev_exc_filters *filters)
{
    struct profile_ask ask = {
        .kind = PROFILE_KIND_EXCEPTIONS, .exc_format = EV_EXC_TEXT, .filters = filters};
    if (format != NULL && strcasecmp(format, "NewlineDelimitedJson") == 0) {
        ask.exc_format = EV_EXC_NDJSON;
    } else if (format != NULL && strcasecmp(format, "JsonSequence") == 0) {
        ask.exc_format = EV_EXC_JSON_SEQ;
    } else if (format != NULL && strcasecmp(format, "PlainText") != 0) {
        ev_exc_filters_free(filters);
        artifact_refuse(o, 400,
                        "unknown exceptions format '%s' (PlainText, NewlineDelimitedJson or "
                        "JsonSequence)",
                        format);
        return -1;
    }
    return profile_launch(a, o, p, &ask);
}
