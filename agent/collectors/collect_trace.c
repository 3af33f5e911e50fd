/* SPDX-License-Identifier: MIT */
/*
 * The trace collector (collectors.h collect_trace; the routes are in api_collect.c): an EventPipe
 * session relayed to the HTTP client as it streams (docs/ipc.md §5), or, with egressProvider, to
 * an egress target (artifact.h: the request is answered 202 at once).
 *
 * One trace_job per request runs on the collection-job core (collect/job.h): the core holds the
 * artifact (the HTTP response, gone when it is finished or the client disconnects; or the upload,
 * handed over to the artifact once the trace ended), the operation, the duration timer and the
 * job's state; this file supplies the producer (the decoded session, collect/dsession.h, gone
 * after its final callback or abort: the job's only hold) and its consumer. Stop, cancel, a client
 * that leaves, the duration and shutdown all go through the core.
 *
 * An egress target is treated as a client: when it is full (egress_full: the store is slower than
 * the runtime), the bytes go to the spool below just as for a slow client, and the relay resumes
 * at its on_ready. A store that fails ends the session as a client that leaves does.
 *
 * A slow client never slows the runtime down: when its connection holds more than
 * TRACE_HIGH_WATER bytes not yet sent, what the runtime sends next goes to a spool
 * (collect/spool.h: 1 MiB in memory, then an unnamed 0600 file in dotmon's temp folder, at most
 * Trace:SpoolLimitMB) and is relayed from there, in order, whenever the connection drains below
 * TRACE_LOW_WATER. So the runtime's buffer, which drops events when full, is read at the runtime's
 * pace. Only when the spool is full (or its file cannot be written) does the session stop reading
 * the runtime's socket until the spool drains: backpressure as the last resort, said in the
 * operation. With Trace:SpoolLimitMB 0 there is no spool and that backpressure applies at once.
 * dotmon's memory stays bounded (HTTP queue + the spool's memory window) whatever the trace size.
 *
 * Every byte the runtime sends also goes through the streaming nettrace checker as it arrives:
 * it decides whether the trace ended complete or truncated, and counts the events the runtime
 * dropped (sequence-number gaps per capture thread, against the sequence points too,
 * docs/nettrace.md §6): `droppedEvents` of the operation, the end-of-trace log line and /metrics.
 * When the runtime ends the stream, the response ends only once the spool has been relayed.
 *
 * The bytes are copied twice in the kernel (the runtime's socket into the session's read buffer,
 * that buffer into the client's socket), as socat does. A client with nothing queued gets each
 * read written at once from the buffer the CPU has just filled (http_stream_write_now; only what
 * the socket does not take is queued as a copy); a client that is behind gets the block itself
 * queued without a copy (sess_data), then the spool. Moving
 * them with splice(2) and tee(2) instead (the checker reading the tee) was measured and costs more
 * CPU per GiB than the copies it saves, on the benchmark's loopback and kernel
 * (BENCHMARKS.md, "splice(2) measured, not adopted"; bench_trace --mechanisms measures it again).
 *
 * With format=ndjson (dotmon's own extension) the same session is answered as
 * application/x-ndjson: each chunk the runtime sends is decoded (events/ev_json.h) and one JSON
 * line per event is queued to the client. There is no spool on that path: when the client's queue
 * passes TRACE_HIGH_WATER the session stops reading the runtime until it drains below
 * TRACE_LOW_WATER. Stop, cancel, abort, duration and the operation behave as for nettrace.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "api.h"
#include "artifact.h"
#include "buf.h"
#include "bufpool.h"
#include "collectors.h"
#include "dsession.h"
#include "err.h"
#include "ev_filter.h"
#include "ev_json.h"
#include "ev_ring.h"
#include "log.h"
#include "membudget.h"
#include "nettrace.h"
#include "operations.h"
#include "otel_proc.h"
#include "spool.h"
#include "trace_config.h"

static const char cat[] = "dotmon.trace";

/* 2 MiB, not 1: fewer pauses of a fast client's relay (bench_trace, 2 x 4 interleaved pairs:
 * median 0.92-0.96x socat against 0.78-0.79x, RSS growth +3.7 MB against +2.8). */
#define TRACE_HIGH_WATER (2048u * 1024u)
#define TRACE_LOW_WATER  (256u * 1024u)
/* Reads at least this big go to the client without a copy. */
#define TRACE_ZERO_COPY_MIN (DSESSION_READ_SIZE / 4)
/*
 * format=ndjson: the converter's schemas are charged to a share of the memory budget of the
 * request's own: 1/8 of the budget, at least 4 MiB; 32 MiB when dotmon has no budget.
 */
#define TRACE_JSON_SHARE_DIV        8u
#define TRACE_JSON_SHARE_MIN        (4ull * 1024 * 1024)
#define TRACE_JSON_SHARE_UNBUDGETED (32ull * 1024 * 1024)
/* format=ndjson: JSON text gathered before it is queued to the client. */
#define TRACE_JSON_FLUSH ((size_t)64 * 1024)
/* Sessions still closing in the background that may exist beyond the trace limit. */
#define TRACE_SESSION_SLACK 8u

struct trace_job {
    struct job core; /* first: operation, artifact (core.art), timer, state (collect/job.h) */
    struct agent *a;
    struct dsession *ds; /* NULL after its final callback or abort */
    bool paused;
    bool ended;     /* the runtime ended the stream; the response ends once the spool is out */
    int end_status; /* sess_on_end's status, for the deferred end */
    bool backpressure_said; /* the fall-back to backpressure was logged */
    struct spool *spool;    /* NULL until the client first falls behind (or Trace:SpoolLimitMB 0) */
    /* A client that falls behind is first waited for (TraceSpoolGrace, the session paused); only
     * one still behind after that gets the spool, until the spool is empty again. */
    uv_timer_t grace;
    bool grace_armed;
    bool spool_ok;
    bool client_lost;   /* a write failed: the client or the store did not get everything */
    int64_t duration_s; /* -1: until stopped */
    int version;        /* CollectTracing version used */
    uint64_t session_id;
    uint64_t pid;
    bool retried;     /* one new start after the runtime closed the first one unanswered */
    bool otel_joined; /* the session carries the OTel [AS] lines, or shares Microsoft-Extensions-
                       * Logging with OTel (otel_proc.h): relisten at its end */
    char uid[37];
    struct ipc_endpoint ep; /* the runtime's (an owned copy) */
    char filename[64];
    struct trace_config tc;
    struct nettrace_checker checker;
    struct ev_json *json;       /* format=ndjson: the converter; NULL for nettrace */
    struct buf json_out;        /* its lines not yet queued */
    struct mb_share json_share; /* what json holds; finished when the job is freed */
    char json_share_what[48];
    bool json_budget_said;     /* the full share was logged */
    struct ev_filter *stop_on; /* CollectTrace's StoppingEvent, watched by the checker; or NULL */
    bool stop_said;            /* its match or mismatch was logged */
    /* Ring mode (CollectTrace PreTriggerSeconds, collect_trace_ring_start): the stream feeds ring;
     * out and op exist only once triggered. ring_on_end tells the owner (a collection rule) that
     * the untriggered session ended; NULL once triggered or stopped. */
    struct ev_ring *ring;
    bool ring_said; /* the ring's failure was logged */
    collect_trace_ring_end_cb ring_on_end;
    void *ring_ud;
    int64_t post_s;
    /* The trigger's figures (the operation's "ring" results): the ring then, and its drain. */
    uint64_t ring_bytes; /* held at the trigger */
    uint64_t ring_events;
    uint64_t trig_ms;     /* uv_now at the trigger */
    uint64_t drained_ms;  /* the drain's duration once over */
    uint32_t ring_pauses; /* times the drain waited for the store (EV_RING_PAUSED) */
    bool ring_fired;      /* triggered */
    bool ring_drained;
};

static const struct job_vtable trace_vt;

static struct trace_job *trace_of(struct job *core)
{
    return (struct trace_job *)core;
}

/* The session has started (CollectTracing answered): ring buffering, or the artifact begun. */
static bool sess_started(const struct trace_job *job)
{
    return job->version > 0;
}

/*
 * StopTracing to the stream's end (the rundown): Trace:StopTimeoutSeconds. A runtime that never
 * ends the stream is cut off then: the session ends AGENT_E_TIMEOUT, the operation Failed
 * (TraceTruncated, "did not finish the trace within the stop timeout") and its
 * RequestLimits:Trace:MaxConcurrency slot is free; the session drains what is left in the
 * background within its cleanup bound.
 */
static uint64_t stop_timeout_ms(const struct trace_job *job)
{
    return agent_timeout(job->a, TIMEOUT_TRACE_STOP); /* Trace:StopTimeoutSeconds */
}

/* The verdict as the operation status shows it. */
static const char *verdict_word(enum nettrace_verdict v)
{
    return v == NETTRACE_COMPLETE ? "complete" : v == NETTRACE_TRUNCATED ? "truncated" : "invalid";
}

/* The core's fini: what the job holds besides the core. */
static void trace_fini(struct job *core)
{
    struct trace_job *job = trace_of(core);
    trace_config_fini(&job->tc);
    nettrace_checker_fini(&job->checker);
    ev_filter_free(job->stop_on);
    ev_json_free(job->json);
    mb_share_fini(&job->json_share);
    ev_ring_free(job->ring);
    buf_fini(&job->json_out);
    spool_close(job->spool);
    ipc_endpoint_fini(&job->ep);
    /* What the relay held (pool blocks, heap) goes back once the agent is idle (agent.c). */
}

/* The core frees the job once the artifact has ended and the session is gone. */
static bool trace_holds(const struct job *core)
{
    return ((const struct trace_job *)core)->ds != NULL;
}

/* The trace's results for the operation's details, and the totals for /metrics (once a job). */
static cJSON *trace_results(struct job *core)
{
    struct trace_job *job = trace_of(core);
    cJSON *extra = cJSON_CreateObject();
    if (extra != NULL) {
        char sid[24];
        snprintf(sid, sizeof(sid), "0x%016llx", (unsigned long long)job->session_id);
        const struct nettrace_stats *st = nettrace_get_stats(&job->checker);
        cJSON_AddNumberToObject(extra, "bytes", (double)st->bytes);
        cJSON_AddStringToObject(extra, "verdict", verdict_word(nettrace_status(&job->checker)));
        uint64_t offset = 0;
        const char *detail = nettrace_error(&job->checker, &offset);
        if (detail != NULL && *detail != '\0') {
            cJSON_AddStringToObject(extra, "detail", detail);
            cJSON_AddNumberToObject(extra, "offset", (double)offset);
        }
        cJSON_AddNumberToObject(extra, "events", (double)st->events);
        /* Events the runtime dropped (its buffer was full): the file's structure can be
         * complete while events are missing, so this is a number of its own. */
        cJSON_AddNumberToObject(extra, "droppedEvents", (double)st->lost);
        if (job->spool != NULL) {
            cJSON *sp = cJSON_AddObjectToObject(extra, "spool");
            if (sp != NULL) {
                cJSON_AddNumberToObject(sp, "peakBytes", (double)spool_peak(job->spool));
                cJSON_AddNumberToObject(sp, "spilledBytes", (double)spool_spilled(job->spool));
                cJSON_AddNumberToObject(sp, "limitBytes", (double)job->a->trace_spool_limit);
                cJSON_AddBoolToObject(sp, "limitReached", spool_limit_hit(job->spool));
                if (spool_error(job->spool) != 0) {
                    cJSON_AddStringToObject(sp, "error", agent_strerror(spool_error(job->spool)));
                }
            }
            if (spool_limit_hit(job->spool) || spool_error(job->spool) != 0) {
                cJSON_AddStringToObject(
                    extra, "backpressure",
                    spool_error(job->spool) != 0
                        ? "the spool file could not be written: the runtime was then read only as "
                          "fast as the client downloaded, and its buffer may have dropped events"
                        : "the client fell behind by Trace:SpoolLimitMB: the runtime was then read "
                          "only as fast as the client downloaded, and its buffer may have dropped "
                          "events");
            }
        }
        cJSON_AddStringToObject(extra, "profiles", job->tc.profile_names);
        cJSON *rg = job->ring_fired ? cJSON_AddObjectToObject(extra, "ring") : NULL;
        if (rg != NULL) {
            cJSON_AddNumberToObject(rg, "bytesAtTrigger", (double)job->ring_bytes);
            cJSON_AddNumberToObject(rg, "eventsAtTrigger", (double)job->ring_events);
            cJSON_AddNumberToObject(rg, "pauses", (double)job->ring_pauses);
            cJSON_AddBoolToObject(rg, "drained", job->ring_drained);
            if (job->ring_drained) {
                cJSON_AddNumberToObject(rg, "drainMs", (double)job->drained_ms);
            }
        }
        if (job->stop_on != NULL) {
            static const char *const words[] = {
                [EV_FILTER_WATCHING] = "notSeen",
                [EV_FILTER_MATCHED] = "seen",
                [EV_FILTER_MISMATCH] = "payloadFilterMismatch",
            };
            cJSON_AddStringToObject(extra, "stoppingEvent",
                                    words[ev_filter_get_state(job->stop_on)]);
        }
        if (job->version > 0) {
            cJSON_AddNumberToObject(extra, "collectTracingVersion", job->version);
            cJSON_AddStringToObject(extra, "sessionId", sid);
        }
    }
    const struct nettrace_stats *st = nettrace_get_stats(&job->checker);
    struct agent_trace_stats *ts = &job->a->trace_stats;
    ts->traces++;
    ts->events += st->events;
    ts->dropped += st->lost;
    ts->bytes += st->bytes;
    if (job->spool != NULL) {
        ts->spilled += spool_spilled(job->spool);
        ts->spool_limited += spool_limit_hit(job->spool) ? 1 : 0;
    }
    return extra;
}

/*
 * The core's abort: DELETE, the client disconnected or the egress store failed. The session is
 * aborted (StopTracing in the background: no session is left in the runtime); the core then ends
 * the artifact Cancelled (the client sees a truncated transfer; an upload is aborted). The spool
 * (and its file) goes with the job.
 */
static void job_otel_relisten(struct trace_job *job);

/* Ends the job's session at once (StopTracing in the background, nothing left in the runtime);
 * a session that carried OTel's lines has the process's OTel session ask again, as when a
 * session ends by itself (sess_on_end). */
static void job_abort_session(struct trace_job *job)
{
    dsession_abort(job->ds); /* accepts NULL */
    job->ds = NULL;
    job_otel_relisten(job);
}

static void trace_abort(struct job *core, enum job_why why)
{
    struct trace_job *job = trace_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "trace of %llu: %s after %llu bytes", (unsigned long long)job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed" : "client disconnected",
                 (unsigned long long)nettrace_get_stats(&job->checker)->bytes);
    }
    job_abort_session(job);
    uv_timer_stop(&core->timer);
}

/*
 * The core's graceful stop (the job is STOPPING now). While a start retry is pending (no session
 * yet) the retry timer is kept: the retry then stops its session as soon as it exists.
 */
static void trace_stop_session(struct job *core)
{
    struct trace_job *job = trace_of(core);
    if (job->ds == NULL) {
        return;
    }
    uv_timer_stop(&core->timer);
    log_info(cat, "trace of %llu: stopping (StopTracing; rundown follows)",
             (unsigned long long)job->pid);
    dsession_stop(job->ds); /* with stop_timeout_ms, from the session's configuration */
}

/*
 * After each chunk the checker read: the StoppingEvent seen stops the trace as its duration
 * would (StopTracing: the rundown and the end tag follow, the file stays whole). A PayloadFilter
 * naming a field the event lacks can never match: said once, and the trace runs its duration,
 * as in dotnet-monitor.
 */
static void job_watch_stopping_event(struct trace_job *job)
{
    enum ev_filter_state st = ev_filter_get_state(job->stop_on);
    if (st == EV_FILTER_WATCHING || job->stop_said) {
        return;
    }
    job->stop_said = true;
    if (st == EV_FILTER_MISMATCH) {
        log_warn(cat,
                 "trace of %llu: the StoppingEvent's PayloadFilter cannot match (%s); the trace "
                 "runs until its duration",
                 (unsigned long long)job->pid, ev_filter_detail(job->stop_on));
        return;
    }
    log_info(cat, "trace of %llu: the StoppingEvent was seen (%s)", (unsigned long long)job->pid,
             ev_filter_detail(job->stop_on));
    job_stop(&job->core);
}

static void job_relay(struct trace_job *job);

static void job_on_ready(void *ud)
{
    job_relay(ud);
}

/* The client is still behind after the grace: from now on the stream goes to the spool. */
static void job_on_grace(uv_timer_t *t)
{
    struct trace_job *job = t->data;
    job->grace_armed = false;
    if (job->core.art != NULL && artifact_full(job->core.art)) {
        job->spool_ok = true;
    }
    job_relay(job);
}

static void sess_on_started(void *ud, uint64_t session_id, int version)
{
    struct trace_job *job = ud;
    job->version = version;
    job->session_id = session_id;
    log_info(cat, "trace of %llu started: session 0x%llx (CollectTracing%d), profiles %s",
             (unsigned long long)job->pid, (unsigned long long)session_id, version,
             job->tc.profile_names);
    job_running(&job->core); /* the operation Running (Stopping when a stop came first) */
    /* Listen mode with DiagnosticPort:HoldSuspended: the session that waited for the start-up
     * events now runs, so the runtime may go on (a no-op for a runtime already resumed). */
    if (job->a->disc != NULL) {
        (void)ipc_discovery_resume(job->a->disc, job->uid);
    }
    if (job->ring != NULL) {
        return; /* buffering; the artifact begins at the trigger */
    }
    if (job->core.art == NULL) {
        return;
    }
    const char *type = job->json != NULL ? "application/x-ndjson" : "application/octet-stream";
    if (artifact_begin(job->core.art, type, job->filename) != 0) {
        job_cancel(
            &job->core); /* the client is gone, or the upload cannot start (said in the op) */
        return;
    }
    if (job->duration_s >= 0 && job->core.state != JOB_STOPPING) {
        job_arm_timeout(&job->core, (uint64_t)job->duration_s * 1000);
    }
}

/* format=ndjson: queues the gathered lines to the client. */
static int job_json_flush(struct trace_job *job)
{
    if (job->core.art == NULL || buf_size(&job->json_out) == 0) {
        buf_reset(&job->json_out);
        return 0;
    }
    int rc = artifact_write(job->core.art, buf_data(&job->json_out), buf_size(&job->json_out));
    buf_reset(&job->json_out);
    if (rc != 0) {
        job->client_lost = true; /* the consumer is gone; on_lost follows */
    }
    return rc;
}

static int job_on_json_line(void *ud, const char *line, size_t len)
{
    struct trace_job *job = ud;
    int rc = buf_append(&job->json_out, line, len);
    if (rc == 0 && buf_size(&job->json_out) >= TRACE_JSON_FLUSH) {
        rc = job_json_flush(job);
    }
    return rc;
}

/* format=ndjson: one chunk of the stream decoded into lines, with backpressure. */
static void job_json_data(struct trace_job *job, const uint8_t *p, size_t n)
{
    /* A stream error stops the lines; the checker's verdict ends the response as for nettrace. */
    if (ev_json_feed(job->json, p, n) == -ENOMEM) {
        log_warn(cat, "trace of %llu: out of memory converting to NDJSON",
                 (unsigned long long)job->pid);
    }
    if (!job->json_budget_said && ev_json_budget_dropped(job->json) > 0) {
        job->json_budget_said = true;
        log_warn(cat,
                 "trace of %llu: the NDJSON converter's schemas fill %s's share of dotmon's memory "
                 "budget (%llu MiB): events of the metadata not kept go out as payloadHex; raise "
                 "Memory:LimitMB (or the container's memory limit)",
                 (unsigned long long)job->pid, job->json_share_what,
                 (unsigned long long)(job->json_share.cap >> 20));
    }
    if (job_json_flush(job) != 0) {
        return;
    }
    if (!job->paused && job->ds != NULL && artifact_full(job->core.art)) {
        job->paused = true; /* resumed by job_relay once the queue drains */
        dsession_pause(job->ds);
    }
}

/* Ring mode: the stream into the ring (kept, or written through ring_write once triggered). */
static void job_ring_data(struct trace_job *job, const uint8_t *p, size_t n)
{
    int rc = ev_ring_feed(job->ring, p, n);
    if (rc != 0 && !job->ring_said) {
        char why[256];
        job->ring_said = true;
        ev_ring_error(job->ring, why, sizeof(why));
        log_warn(cat, "trace ring of %llu failed: %s%s%s", (unsigned long long)job->pid,
                 agent_strerror(rc), *why != '\0' ? ": " : "", why);
        if (job->ds != NULL && job->core.art == NULL) {
            /* Nothing to keep: end the session; the owner starts a new one later. */
            job_abort_session(job);
            collect_trace_ring_end_cb cb = job->ring_on_end;
            job->ring_on_end = NULL;
            if (cb != NULL) {
                cb(job->ring_ud, rc, "the ring failed");
            }
            job_release(&job->core);
        }
    }
}

/* The ring is writing its kept blocks (at the store's pace). */
static bool job_ring_draining(const struct trace_job *job)
{
    return job->ring != NULL && ev_ring_get_state(job->ring) == EV_RING_DRAINING;
}

/*
 * Triggered: the stream goes through the ring (pass-through) to the artifact while the artifact
 * keeps up. While the ring still drains its kept blocks, or the artifact is full, or bytes wait
 * already, the bytes wait in the spool, as a live trace's do for a slow client (bounded by
 * Trace:SpoolLimitMB, at least its memory window; job_relay pauses the session when it is full),
 * and are fed in order once the drain is over and the artifact has room.
 */
static void job_ring_live(struct trace_job *job, const uint8_t *p, size_t n)
{
    bool behind = job_ring_draining(job) || artifact_full(job->core.art) ||
                  (job->spool != NULL && spool_size(job->spool) > 0);
    if (!behind) {
        job_ring_data(job, p, n);
        return;
    }
    if (job->spool == NULL &&
        spool_new(job->a->loop, job->a->diag_dir, job->a->trace_spool_limit, &job->spool) != 0) {
        job->spool = NULL;
    }
    if (job->spool == NULL || spool_push(job->spool, NULL, p, n) == UV_ENOMEM) {
        log_warn(cat, "trace ring of %llu: out of memory holding the stream while the ring drains",
                 (unsigned long long)job->pid);
        job->client_lost = true;
        job_cancel(&job->core);
        return;
    }
    job_relay(job);
}

/* The next kept blocks of the ring to the artifact, while it has room (job_relay). */
static void job_ring_drain(struct trace_job *job)
{
    int rc = ev_ring_drain(job->ring);
    if (rc == EV_RING_PAUSED) {
        job->ring_pauses++;
        return;
    }
    job->drained_ms = uv_now(job->a->loop) - job->trig_ms;
    if (rc != 0) {
        char why[256];
        ev_ring_error(job->ring, why, sizeof(why));
        log_warn(cat, "trace ring of %llu: writing the ring out failed: %s",
                 (unsigned long long)job->pid, why);
        job->client_lost = true; /* the consumer is gone; on_lost follows */
        return;
    }
    job->ring_drained = true;
    struct ev_ring_stats st;
    ev_ring_get_stats(job->ring, &st);
    log_info(cat,
             "trace ring of %llu: the ring is out: %llu events, %llu bytes held at the trigger, in "
             "%llu ms (%u pauses for the store)",
             (unsigned long long)job->pid, (unsigned long long)st.events_written,
             (unsigned long long)job->ring_bytes, (unsigned long long)job->drained_ms,
             job->ring_pauses);
}

/* A piece of the stream: the checker, then the ring, the NDJSON converter or the relay. */
static void sess_data(struct trace_job *job, const uint8_t *p, size_t n)
{
    nettrace_feed(&job->checker, p, n);
    if (job->stop_on != NULL) {
        job_watch_stopping_event(job);
    }
    if (job->ring != NULL) {
        if (job->core.art == NULL) {
            job_ring_data(job, p, n); /* buffering */
        } else {
            job_ring_live(job, p, n);
        }
        return;
    }
    if (job->core.art == NULL || !sess_started(job)) {
        return;
    }
    if (job->json != NULL) {
        job_json_data(job, p, n);
        return;
    }
    /*
     * Nothing queued for the client: the bytes go to its socket now, from the session's own read
     * buffer, which it reads into again while the bytes are still in the CPU's cache (a copy
     * loop's pattern, socat's; bench_trace --pinned). What the socket does not take is queued.
     */
    bool behind =
        artifact_full(job->core.art) || (job->spool != NULL && spool_size(job->spool) > 0);
    if (!behind) {
        int now = artifact_write_now(job->core.art, p, n);
        if (now < 0) {
            job->client_lost = true;
            return; /* the consumer is gone; on_lost follows */
        }
        if (now > 0) {
            return;
        }
    }
    /*
     * A well-filled read buffer goes to the HTTP write queue as is (no copy, no allocation) and
     * the session reads on into another pool block (common/bufpool.h); a read below a quarter
     * of the buffer is copied instead and the session keeps its buffer, so queued memory stays
     * within 4x the queued bytes.
     */
    uint8_t *base = n >= TRACE_ZERO_COPY_MIN ? dsession_take_buffer(job->ds) : NULL;
    const uint8_t *data = p;
    if (behind && job->a->trace_spool_limit > 0 && !job->spool_ok) {
        /*
         * A client that keeps up most of the time (a local one reads at memory speed) is waited
         * for: the session pauses and the runtime's own buffer holds its events meanwhile, so
         * the bytes make no round trip through the spool file. These bytes are read already:
         * they go to the client now, above the queue's high water (the HTTP limit is far above).
         */
        if (!job->paused) {
            job->paused = true; /* job_relay resumes once the queue drains */
            dsession_pause(job->ds);
        }
        if (!job->grace_armed) {
            job->grace_armed = true;
            uv_timer_start(&job->grace, job_on_grace,
                           agent_timeout(job->a, TIMEOUT_TRACE_SPOOL_GRACE), 0);
        }
        behind = false;
    }
    if (behind && job->a->trace_spool_limit > 0) {
        /* The client is behind: keep reading the runtime, queue in the spool (in order). */
        if (job->spool == NULL && spool_new(job->a->loop, job->a->diag_dir,
                                            job->a->trace_spool_limit, &job->spool) != 0) {
            job->spool = NULL;
        }
        if (job->spool != NULL) {
            if (spool_push(job->spool, base, data, n) == UV_ENOMEM) {
                /* Bytes are gone: the client cannot get the file whole. */
                log_warn(cat, "trace of %llu: out of memory spooling for a slow client",
                         (unsigned long long)job->pid);
                job->client_lost = true;
                job_cancel(&job->core);
                return;
            }
            job_relay(job);
            return;
        }
    }
    int rc = base != NULL ? artifact_write_owned(job->core.art, base, data, n)
                          : artifact_write(job->core.art, p, n);
    if (rc != 0) {
        job->client_lost = true;
        return; /* the consumer is gone; on_lost follows */
    }
    if (!job->paused && job->a->trace_spool_limit == 0 && artifact_full(job->core.art)) {
        job->paused = true; /* no spool: backpressure at once */
        dsession_pause(job->ds);
    }
}

/* The consumer's feed. Nothing here refuses the stream (the checker's verdict ends the artifact
 * once the runtime has closed it): always 0, also after aborting the session from inside. */
static int sess_feed(void *ud, const uint8_t *p, size_t n)
{
    struct trace_job *job = ud;
    sess_data(job, p, n);
    return 0;
}

static const struct dsession_consumer session_consumer;

/* Starts the job's session (the first one, the retry, or a ring's): 0 and job->ds, or the
 * start's error (dsession_start) and no session. */
static int job_start_session(struct trace_job *job)
{
    /* the one-spec-set rule (otel_proc.h): a DiagnosticSource session carries OTel's lines too */
    struct otel_joined j;
    int joined = otel_procs_join(job->a->otel_procs, job->pid, &job->tc.collect, &j);
    bool shares_logs = otel_procs_shares_logs(job->a->otel_procs, job->pid, &job->tc.collect);
    const struct dsession_config dc = {.collect = &j.cfg,
                                       .admission = &job->a->sessions,
                                       .start_timeout_ms =
                                           agent_timeout(job->a, TIMEOUT_TRACE_START),
                                       .stop_timeout_ms = stop_timeout_ms(job)};
    int rc = dsession_start(job->a->loop, &job->ep, &dc, &session_consumer, job, &job->ds);
    otel_joined_fini(&j);
    if (rc != 0) {
        job->ds = NULL;
    }
    if (rc == 0 && joined == 1 && !job->otel_joined) {
        log_info(cat,
                 "trace of %llu: its DiagnosticSource specs also carry OpenTelemetry's "
                 "activities (one set per process)",
                 (unsigned long long)job->pid);
    }
    if (rc == 0 && shares_logs && !job->otel_joined) {
        log_info(cat,
                 "trace of %llu: OpenTelemetry reads its Microsoft-Extensions-Logging records "
                 "too (one filter per process): its session starts again after this one",
                 (unsigned long long)job->pid);
    }
    job->otel_joined = job->otel_joined || (rc == 0 && (joined == 1 || shares_logs));
    return rc;
}

/* The retry timer: starts the session again (the duration timer is not armed before start). */
static void job_on_retry(uv_timer_t *t)
{
    struct trace_job *job = trace_of(t->data);
    if (job->core.art == NULL) {
        job_release(&job->core);
        return;
    }
    int rc = job_start_session(job);
    if (rc == 0 && job->core.state == JOB_STOPPING) {
        dsession_stop(job->ds); /* stopped while the retry waited */
    }
    if (rc != 0) {
        char detail[160];
        snprintf(detail, sizeof(detail), "cannot start a trace session: %s", agent_strerror(rc));
        job_end(&job->core, JOB_END_FAIL, 502, "RuntimeUnreachable", agent_strerror(rc), detail);
        job_release(&job->core);
    }
}

/* The session's end: status 0 when the runtime closed the stream, else the error's code. */
/* After a session that carried OTel's lines ended: the runtime tore the shared listener down,
 * the process's OTel session asks again (otel_proc.h). */
static void job_otel_relisten(struct trace_job *job)
{
    if (job->otel_joined) {
        job->otel_joined = false;
        otel_procs_relisten(job->a->otel_procs, job->pid);
    }
}

static void sess_on_end(struct trace_job *job, int status, uint32_t hresult)
{
    job->ds = NULL;
    uv_timer_stop(&job->core.timer);
    if (job->ring != NULL && job->core.art == NULL) {
        /* An untriggered ring's session ended (the runtime went away, or refused): the ring goes
         * with it; the owner starts a new one when it can. */
        log_info(cat, "trace ring of %llu: the session ended (%s)", (unsigned long long)job->pid,
                 status != 0 ? agent_strerror(status) : "end of stream");
        job_otel_relisten(job);
        collect_trace_ring_end_cb cb = job->ring_on_end;
        job->ring_on_end = NULL;
        if (cb != NULL) {
            cb(job->ring_ud, status != 0 ? status : AGENT_E_CLOSED,
               status == AGENT_E_RUNTIME ? ipc_hresult_text(hresult) : agent_strerror(status));
        }
        job_release(&job->core);
        return;
    }

    /* Right after many sessions end, the runtime sometimes closes a new CollectTracing
     * connection without answering (seen on .NET 10.0.12 under load); its next try succeeds. */
    if (!sess_started(job) && status == AGENT_E_CLOSED && !job->retried && job->core.art != NULL) {
        job->retried = true;
        log_info(cat, "trace of %llu: the runtime closed the start unanswered; retrying once",
                 (unsigned long long)job->pid);
        uv_timer_start(&job->core.timer, job_on_retry, agent_timeout(job->a, TIMEOUT_TRACE_RETRY),
                       0);
        return;
    }
    job_otel_relisten(job); /* no new start of this job follows */

    if (!sess_started(job)) {
        /* The session never started: answer with the reason. */
        char msg[256];
        const char *code = NULL;
        int http_status = api_session_refused(status, hresult, "trace", msg, sizeof(msg), &code);
        log_warn(cat, "trace of %llu failed to start: %s", (unsigned long long)job->pid, msg);
        job_end(&job->core, JOB_END_FAIL, http_status, code, msg, NULL);
        job_release(&job->core);
        return;
    }

    enum nettrace_verdict v = nettrace_finish(&job->checker);
    const struct nettrace_stats *st = nettrace_get_stats(&job->checker);
    uint64_t spooled = job->spool != NULL ? spool_size(job->spool) : 0;
    /* Dropped events are a warning: the file may be whole while the trace is not. */
    log_msg(st->lost > 0 ? LOG_WARN : LOG_INFO, cat,
            "trace of %llu ended: %llu bytes, %llu events, %llu dropped by the runtime, %s%s%s%s",
            (unsigned long long)job->pid, (unsigned long long)st->bytes,
            (unsigned long long)st->events, (unsigned long long)st->lost, verdict_word(v),
            status ? ", " : "", status ? agent_strerror(status) : "",
            spooled > 0 ? "; the consumer still has the spool to take" : "");
    job->ended = true;
    job->end_status = status;
    job_relay(job); /* the artifact ends once the spool is out */
}

/*
 * The runtime ended the stream and every byte of it went to the artifact (or its consumer is
 * gone): end it. A trace without its end marker (the process died, the runtime dropped the
 * stream, the stop timed out) is kept as it is, as a partial artifact: an HTTP client gets the
 * transfer cut once everything received has been written, so every HTTP client reports the
 * download incomplete (and keeps the bytes, the most recent events included); an egress upload
 * is completed, the operation Failed with resourceLocation set. The operation says why.
 */
static void job_deliver_end(struct trace_job *job)
{
    int status = job->end_status;
    if (job->ring != NULL && job->core.art != NULL && !job->client_lost &&
        ev_ring_finish(job->ring, true) != 0) {
        /* Triggered, every spooled byte fed: the end tag (the blocks written are whole even when
         * the stream was cut). */
        job->client_lost = true;
    }
    enum nettrace_verdict v = nettrace_finish(&job->checker);
    if (job->ring != NULL) {
        /* The file is what the ring wrote: whole once it wrote its end tag. */
        v = ev_ring_get_state(job->ring) == EV_RING_FINISHED ? NETTRACE_COMPLETE : v;
    }
    if (job->client_lost || job->core.art == NULL) {
        /* The runtime finished, but the consumer did not receive the whole file. */
        job_end(&job->core, JOB_END_CANCEL, 400, NULL, NULL, NULL);
    } else if (v == NETTRACE_COMPLETE) {
        job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    } else {
        log_warn(cat, "trace of %llu is %s: %s", (unsigned long long)job->pid, verdict_word(v),
                 artifact_is_egress(job->core.art) ? "storing what was received"
                                                   : "ending the response without its last chunk");
        if (v == NETTRACE_TRUNCATED) {
            job_end(&job->core, JOB_END_PARTIAL, 0, "TraceTruncated",
                    status == AGENT_E_TIMEOUT
                        ? "the runtime did not finish the trace within the stop timeout"
                        : "the trace stream ended before its end marker (did the process exit?)",
                    NULL);
        } else {
            job_end(&job->core, JOB_END_PARTIAL, 0, "TraceInvalid",
                    nettrace_error(&job->checker, NULL), NULL);
        }
    }
    job_release(&job->core);
}

/* A chunk from the spool: to the artifact, then the next one. */
static void job_on_spooled(void *ud, int status, void *base, const uint8_t *data, size_t n)
{
    struct trace_job *job = ud;
    if (status != 0) {
        /* The spool lost bytes (its file could not be read back): the consumer's file would have
         * a hole. End it as incomplete and stop the session. */
        log_warn(cat, "trace of %llu: reading the spool failed (%s); ending the artifact",
                 (unsigned long long)job->pid, agent_strerror(status));
        job->client_lost = true;
        job_cancel(&job->core);
        return;
    }
    if (job->core.art == NULL) {
        bufpool_release(base);
        return;
    }
    if (job->ring != NULL) {
        job_ring_data(job, data, n); /* pass-through: through ring_write to the artifact */
        bufpool_release(base);
        if (!job->client_lost) {
            job_relay(job);
        }
        return;
    }
    if (artifact_write_owned(job->core.art, base, data, n) != 0) {
        job->client_lost = true;
        return; /* the consumer is gone; on_lost follows */
    }
    job_relay(job);
}

/*
 * Moves spooled bytes to the artifact while it has room, pauses the runtime's stream when the
 * spool is full (and resumes it once there is room again), and ends the artifact once the
 * runtime has ended the stream and nothing is left in the spool.
 */
/* Whether a paused session may read again: while the stream goes to the spool (a ring's always,
 * a live trace's once its grace ran out), when the spool has room; otherwise when the client's
 * queue has drained. */
static bool job_may_read(const struct trace_job *job)
{
    const struct artifact *out = job->core.art;
    if (job->spool_ok || job->ring != NULL) {
        return job->spool == NULL || spool_has_room(job->spool);
    }
    return out == NULL || artifact_has_room(out);
}

static void job_relay(struct trace_job *job)
{
    struct artifact *out = job->core.art;
    struct spool *sp = job->spool;
    if (out != NULL && job_ring_draining(job) && !artifact_full(out)) {
        job_ring_drain(job);
    }
    bool draining = job_ring_draining(job);
    if (out != NULL && sp != NULL && spool_size(sp) > 0 && !spool_popping(sp) && !draining &&
        !artifact_full(out)) {
        (void)spool_pop(sp, job_on_spooled, job);
    }
    if (job->ds != NULL) {
        if (!job->paused && sp != NULL && spool_full(sp)) {
            job->paused = true;
            dsession_pause(job->ds);
            if (!job->backpressure_said) {
                job->backpressure_said = true;
                bool egress = out != NULL && artifact_is_egress(out);
                log_warn(cat,
                         "trace of %llu: the %s is %llu bytes behind (%s); reading the runtime "
                         "only as fast as the %s from now on, and its buffer may drop events",
                         (unsigned long long)job->pid, egress ? "egress upload" : "client",
                         (unsigned long long)spool_size(sp),
                         spool_error(sp) != 0 ? "the spool file cannot be written"
                                              : "Trace:SpoolLimitMB",
                         egress ? "store takes the bytes" : "client downloads");
            }
        } else if (job->paused && job_may_read(job)) {
            job->paused = false;
            dsession_resume(job->ds);
        }
    }
    if (job->spool_ok && (sp == NULL || (spool_size(sp) == 0 && !spool_popping(sp))) &&
        (out == NULL || artifact_has_room(out))) {
        job->spool_ok = false; /* caught up: the next time it falls behind, wait first */
    }
    if (job->grace_armed && (out == NULL || artifact_has_room(out))) {
        job->grace_armed = false;
        uv_timer_stop(&job->grace);
    }
    bool spooled = sp != NULL && (spool_size(sp) > 0 || spool_popping(sp));
    if (job->ended && (out == NULL || (!spooled && !draining))) {
        job->ended = false;
        job_deliver_end(job);
    }
}

static void sess_finish(void *ud, const char *how)
{
    (void)how;
    sess_on_end(ud, 0, 0);
}

static void sess_error(void *ud, int code, uint32_t hresult, const char *reason)
{
    (void)reason; /* said from the code and the checker's verdict */
    sess_on_end(ud, code, hresult);
}

static const struct dsession_consumer session_consumer = {
    .started = sess_on_started, .feed = sess_feed, .finish = sess_finish, .error = sess_error};

/*
 * Names the job's artifact and operation, and takes its own copy of the runtime's endpoint
 * (released with the job): the process entry may be gone long before the job ends. Returns 0 or
 * the copy's error (UV_ENOMEM).
 */
static int job_set_target(struct trace_job *job, const struct ipc_process *p, bool ndjson)
{
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%llu.%s", ts, (unsigned long long)p->pid,
             ndjson ? "ndjson" : "nettrace");
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ipc_endpoint_copy(&job->ep, &ep);
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    job->core.op->artifact_name = strdup(job->filename);
    return rc;
}

const struct artifact_spec collect_trace_spec = {.kind = OP_KIND_TRACE,
                                                 .noun = "trace",
                                                 .limit_setting =
                                                     "RequestLimits:Trace:MaxConcurrency",
                                                 .high_water = TRACE_HIGH_WATER,
                                                 .low_water = TRACE_LOW_WATER};
static const struct artifact_events trace_events = {.on_ready = job_on_ready, .on_lost = job_lost};

/* GET, POST and collection rules once the configuration is known (collectors.h). */
int collect_trace(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                  struct trace_config *tc, int64_t duration_s, bool ndjson,
                  struct ev_filter *stop_on)
{
    struct trace_job *job = NULL;
    struct operation *op = NULL;

    /* Aborted sessions finish their StopTracing in the background; count them too, so that a
     * client hanging up in a loop cannot pile sessions up in the runtime (it allows 64). */
    if (a->sessions.live >= a->ops.limit[OP_KIND_TRACE] + TRACE_SESSION_SLACK) {
        artifact_refuse(o, 429, "%zu trace sessions are still being closed; retry in a few seconds",
                        a->sessions.live);
        goto fail;
    }
    job = (struct trace_job *)job_new(&a->collect, &trace_vt, sizeof(*job));
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        goto fail;
    }
    job->a = a;
    job_add_timer(&job->core, &job->grace);
    if (artifact_admit_origin(a, o, p, &collect_trace_spec, &trace_events, job, &job->core.art,
                              &op) != 0) {
        job_release(&job->core);
        goto fail;
    }
    job_admitted(&job->core, op); /* DELETE stops or cancels through the core */
    job->pid = p->pid;
    job->duration_s = duration_s;
    job->tc = *tc;
    memset(tc, 0, sizeof(*tc)); /* ownership moved to the job */
    buf_init(&job->json_out, 0);
    snprintf(job->json_share_what, sizeof(job->json_share_what), "the trace of process %llu",
             (unsigned long long)p->pid);
    uint64_t total = membudget_total();
    uint64_t cap = total == 0 ? TRACE_JSON_SHARE_UNBUDGETED
                   : total / TRACE_JSON_SHARE_DIV > TRACE_JSON_SHARE_MIN
                       ? total / TRACE_JSON_SHARE_DIV
                       : TRACE_JSON_SHARE_MIN;
    mb_share_init(&job->json_share, job->json_share_what, cap);
    if (ndjson && (job->json = ev_json_new(job_on_json_line, job)) != NULL) {
        ev_json_set_share(job->json, &job->json_share);
    }
    job->stop_on = stop_on; /* no cost without one: the checker then decodes no payloads */
    if ((ndjson && job->json == NULL) || nettrace_checker_init(&job->checker, NULL) != 0) {
        /* No results to show: the artifact is ended here, not through job_end. */
        artifact_end_fail(artifact_take(&job->core.art, &job->core.op), 500, "OutOfMemory",
                          "out of memory", NULL, NULL);
        job_release(&job->core);
        return 0;
    }
    if (stop_on != NULL) {
        ev_filter_attach(stop_on, &job->checker);
    }
    int rc = job_set_target(job, p, ndjson);
    artifact_accept(job->core.art); /* egress: 202 now; the operation tells the rest */
    rc = rc != 0 ? rc : job_start_session(job);
    if (rc != 0) {
        char detail[160];
        snprintf(detail, sizeof(detail), "cannot start a trace session with process %llu: %s",
                 (unsigned long long)p->pid, agent_strerror(rc));
        job_end(&job->core, JOB_END_FAIL, 502, "RuntimeUnreachable", agent_strerror(rc), detail);
        job_release(&job->core);
    }
    return 0;

fail:
    trace_config_fini(tc);
    ev_filter_free(stop_on);
    return -1;
}

/* ---- ring mode (CollectTrace PreTriggerSeconds / RingBufferSizeMB) ------------------------ */

int collect_trace_ring_start(struct agent *a, const struct ipc_process *p, struct trace_config *tc,
                             const struct ev_ring_limits *lim, collect_trace_ring_end_cb on_end,
                             void *ud, struct trace_job **out)
{
    *out = NULL;
    if (a->sessions.live >= a->ops.limit[OP_KIND_TRACE] + TRACE_SESSION_SLACK) {
        trace_config_fini(tc);
        return UV_EBUSY;
    }
    struct trace_job *job = (struct trace_job *)job_new(&a->collect, &trace_vt, sizeof(*job));
    if (job == NULL) {
        trace_config_fini(tc);
        return UV_ENOMEM;
    }
    job->a = a;
    job->pid = p->pid;
    job->duration_s = -1;
    job->tc = *tc;
    memset(tc, 0, sizeof(*tc));
    buf_init(&job->json_out, 0);
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ev_ring_new(&job->ring, lim);
    rc = rc != 0 ? rc : ipc_endpoint_copy(&job->ep, &ep);
    rc = rc != 0 ? rc : nettrace_checker_init(&job->checker, NULL);
    if (rc != 0) {
        job_release(&job->core);
        return rc;
    }
    job->ring_on_end = on_end;
    job->ring_ud = ud;
    rc = job_start_session(job);
    if (rc != 0) {
        job->ring_on_end = NULL;
        job_release(&job->core);
        return rc;
    }
    *out = job;
    return 0;
}

void collect_trace_ring_stop(struct trace_job *job)
{
    if (job == NULL) {
        return;
    }
    job->ring_on_end = NULL;
    /* Abort sends StopTracing in the background: no session is left in the runtime. */
    job_abort_session(job);
    job_release(&job->core);
}

/* The ring's output to the artifact. */
static int ring_write(void *ud, const uint8_t *p, size_t n)
{
    struct trace_job *job = ud;
    if (job->core.art == NULL || artifact_write(job->core.art, p, n) != 0) {
        job->client_lost = true; /* the consumer is gone; on_lost follows */
        return UV_EPIPE;
    }
    /* The store's backpressure: the drain waits for its ready (job_relay via on_ready). */
    return artifact_full(job->core.art) ? EV_RING_PAUSE : 0;
}

int collect_trace_ring_trigger(struct trace_job *job, const struct artifact_origin *o,
                               const struct ipc_process *p, int64_t post_s)
{
    if (!sess_started(job) || job->ds == NULL) {
        if (o->why != NULL) {
            buf_printf(o->why, "the ring's session has not started yet");
        }
        return AGENT_E_NOTFOUND;
    }
    struct operation *op = NULL;
    if (artifact_admit_origin(job->a, o, p, &collect_trace_spec, &trace_events, job, &job->core.art,
                              &op) != 0) {
        return AGENT_E_INVAL;
    }
    job_admitted(&job->core, op);
    job->ring_on_end = NULL; /* the operation owns the job now */
    job->post_s = post_s;
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%llu.nettrace", ts,
             (unsigned long long)job->pid);
    op->artifact_name = strdup(job->filename);
    artifact_accept(job->core.art);
    job_running(&job->core); /* the ring's session runs already: the operation Running */
    if (artifact_begin(job->core.art, "application/octet-stream", job->filename) != 0) {
        job_cancel(&job->core);
        return 0; /* said in the operation */
    }
    struct ev_ring_stats st;
    ev_ring_get_stats(job->ring, &st);
    job->ring_bytes = st.bytes_used;
    job->ring_events = st.events_kept;
    job->trig_ms = uv_now(job->a->loop);
    job->ring_fired = true;
    int rc = ev_ring_trigger(job->ring, ring_write, job);
    if (rc == EV_RING_PAUSED) {
        job->ring_pauses++;
        log_info(cat,
                 "trace ring of %llu triggered: %llu events, %llu bytes in the ring, written at "
                 "the store's pace; %lld s more, then StopTracing",
                 (unsigned long long)job->pid, (unsigned long long)job->ring_events,
                 (unsigned long long)job->ring_bytes, (long long)post_s);
        job_arm_timeout(&job->core, (uint64_t)post_s * 1000);
        return 0;
    }
    if (rc != 0) {
        char why[256];
        ev_ring_error(job->ring, why, sizeof(why));
        log_warn(cat, "trace ring of %llu: the trigger failed: %s %s", (unsigned long long)job->pid,
                 agent_strerror(rc), why);
        job_abort_session(job);
        job_end(&job->core, JOB_END_FAIL, 500, "RingFailed", agent_strerror(rc), why);
        job_release(&job->core);
        return 0;
    }
    job->ring_drained = true;
    job->drained_ms = uv_now(job->a->loop) - job->trig_ms;
    ev_ring_get_stats(job->ring, &st);
    log_info(cat,
             "trace ring of %llu triggered: %llu events written from the ring; %lld s more, then "
             "StopTracing",
             (unsigned long long)job->pid, (unsigned long long)st.events_written,
             (long long)post_s);
    job_arm_timeout(&job->core, (uint64_t)post_s * 1000);
    return 0;
}

int collect_trace_ring_snapshot(struct trace_job *job, ev_ring_write_cb write, void *ud)
{
    return ev_ring_snapshot(job->ring, write, ud);
}

const struct ev_ring *collect_trace_ring_get(const struct trace_job *job)
{
    return job != NULL ? job->ring : NULL;
}

static const struct job_vtable trace_vt = {.kind = OP_KIND_TRACE,
                                           .noun = "trace",
                                           .stop = trace_stop_session,
                                           .abort = trace_abort,
                                           .results = trace_results,
                                           .holds = trace_holds,
                                           .fini = trace_fini};
