/* SPDX-License-Identifier: MIT */
/*
 * GET/POST /trace: an EventPipe session relayed to the HTTP client as it streams (PROTOCOL.md §4).
 *
 * One trace_job per request ties three lifetimes together: the HTTP request (gone when the
 * response is finished or the client disconnects), the IPC session (gone after on_end or abort)
 * and the duration timer. The job is freed once all three are gone.
 *
 * A slow client never slows the runtime down: when its connection holds more than
 * TRACE_HIGH_WATER bytes not yet sent, what the runtime sends next goes to a spool (agent/spool.h:
 * 1 MiB in memory, then an unnamed 0600 file in dotmon's temp folder, at most Trace:SpoolLimitMB)
 * and is relayed from there, in order, whenever the connection drains below TRACE_LOW_WATER. So
 * the runtime's buffer, which drops events when full, is read at the runtime's pace. Only when the
 * spool is full (or its file cannot be written) does the session stop reading the runtime's
 * socket until the spool drains: backpressure as the last resort, said in the operation. With
 * Trace:SpoolLimitMB 0 there is no spool and that backpressure applies at once. dotmon's memory
 * stays bounded (HTTP queue + the spool's memory window) whatever the trace size.
 *
 * Every byte the runtime sends also goes through the streaming nettrace checker as it arrives:
 * it decides whether the trace ended complete or truncated, and counts the events the runtime
 * dropped (sequence-number gaps per capture thread, against the sequence points too, PROTOCOL.md
 * §5.7): `droppedEvents` of the operation, the end-of-trace log line and /metrics. When the
 * runtime ends the stream, the response ends only once the spool has been relayed.
 *
 * With format=ndjson (dotmon's own extension) the same session is answered as
 * application/x-ndjson: each chunk the runtime sends is decoded (events/ev_json.h) and one JSON
 * line per event is queued to the client. There is no spool on that path: when the client's queue
 * passes TRACE_HIGH_WATER the session stops reading the runtime until it drains below
 * TRACE_LOW_WATER. Stop, cancel, abort, duration and the operation behave as for nettrace.
 */
#include "api.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "buf.h"
#include "err.h"
#include "ev_json.h"
#include "http_query.h"
#include "ipc_session.h"
#include "log.h"
#include "nettrace.h"
#include "operations.h"
#include "spool.h"
#include "trace_config.h"

static const char cat[] = "dotmon.trace";

#define TRACE_HIGH_WATER (1024u * 1024u)
#define TRACE_LOW_WATER  (256u * 1024u)
/* Reads at least this big go to the client without a copy. */
#define TRACE_ZERO_COPY_MIN    ((size_t)16 * 1024)
#define TRACE_START_TIMEOUT_MS 5000
#define TRACE_STOP_TIMEOUT_MS  120000
/* format=ndjson: JSON text gathered before it is queued to the client. */
#define TRACE_JSON_FLUSH ((size_t)64 * 1024)
/* Sessions still closing in the background that may exist beyond the trace limit. */
#define TRACE_SESSION_SLACK 8u

struct trace_job {
    struct agent *a;
    struct operation *op;     /* NULL once the operation has finished */
    struct http_request *req; /* NULL once the response is finished or the client left */
    struct ipc_session *sess; /* NULL after on_end or abort */
    uv_timer_t timer;
    bool timer_closing;
    bool streaming; /* response headers sent */
    bool paused;
    bool stopping;
    bool ended;     /* the runtime ended the stream; the response ends once the spool is out */
    int end_status; /* sess_on_end's status, for the deferred end */
    bool backpressure_said; /* the fall-back to backpressure was logged */
    struct spool *spool;    /* NULL until the client first falls behind (or Trace:SpoolLimitMB 0) */
    bool client_lost;       /* a write to the client failed: it did not get the whole file */
    int64_t duration_s;     /* -1: until stopped */
    int version;            /* CollectTracing version used */
    uint64_t session_id;
    uint64_t pid;
    bool retried; /* one new start after the runtime closed the first one unanswered */
    char uid[37];
    struct ipc_endpoint ep; /* the runtime's (an owned copy) */
    char filename[64];
    char location[512];
    struct trace_config tc;
    struct nettrace_checker checker;
    struct ev_json *json; /* format=ndjson: the converter; NULL for nettrace */
    struct buf json_out;  /* its lines not yet queued */
};

static void job_maybe_free(struct trace_job *job);

/* The verdict as the operation status shows it. */
static const char *verdict_word(enum nettrace_verdict v)
{
    return v == NETTRACE_COMPLETE ? "complete" : v == NETTRACE_TRUNCATED ? "truncated" : "invalid";
}

static void job_on_timer_closed(uv_handle_t *h)
{
    struct trace_job *job = h->data;
    struct agent *a = job->a;
    trace_config_fini(&job->tc);
    nettrace_checker_fini(&job->checker);
    ev_json_free(job->json);
    buf_fini(&job->json_out);
    spool_close(job->spool);
    ipc_endpoint_fini(&job->ep);
    free(job);
    /* A relay churns through large chunk buffers; once no trace is running, hand the freed heap
     * back to the system so an idle sidecar returns to its idle footprint. */
    if (op_registry_active(&a->ops, OP_KIND_TRACE) == 0) {
        malloc_trim(0);
    }
}

/* Frees the job once the request, the session and the timer are all gone. */
static void job_maybe_free(struct trace_job *job)
{
    if (job->req != NULL || job->sess != NULL || job->timer_closing) {
        return;
    }
    job->timer_closing = true;
    uv_close((uv_handle_t *)&job->timer, job_on_timer_closed);
}

/* Records the trace result on the operation and moves it to its final state. */
static void job_finish_op(struct trace_job *job, enum op_state state, const char *code,
                          const char *message)
{
    struct operation *op = job->op;
    if (op == NULL) {
        return;
    }
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
        if (job->version > 0) {
            cJSON_AddNumberToObject(extra, "collectTracingVersion", job->version);
            cJSON_AddStringToObject(extra, "sessionId", sid);
        }
    }
    op_set_extra(op, extra);
    op_set_state(&job->a->ops, op, state, code, message); /* clears the control hooks */
    job->op = NULL;
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
}

static void job_on_abort(void *ud, struct http_request *r)
{
    struct trace_job *job = ud;
    (void)r;
    job->req = NULL;
    log_info(cat, "trace of %llu: client disconnected after %llu bytes",
             (unsigned long long)job->pid,
             (unsigned long long)nettrace_get_stats(&job->checker)->bytes);
    if (job->sess != NULL) {
        /* Abort sends StopTracing in the background: no session is left in the runtime. */
        ipc_session_abort(job->sess);
        job->sess = NULL;
    }
    uv_timer_stop(&job->timer);
    job_finish_op(job, OP_CANCELLED, NULL, NULL);
    spool_close(job->spool); /* its file goes with it */
    job->spool = NULL;
    job_maybe_free(job);
}

/*
 * Graceful stop. Recorded even while a start retry is pending (no session yet): the retry then
 * stops its session as soon as it exists.
 */
static void job_stop(void *ctx)
{
    struct trace_job *job = ctx;
    if (job->stopping || job->req == NULL) {
        return;
    }
    job->stopping = true;
    if (job->op != NULL && job->op->state == OP_RUNNING) {
        op_set_state(&job->a->ops, job->op, OP_STOPPING, NULL, NULL);
    }
    if (job->sess == NULL) {
        return; /* the retry timer is armed: keep it */
    }
    uv_timer_stop(&job->timer);
    log_info(cat, "trace of %llu: stopping (StopTracing; rundown follows)",
             (unsigned long long)job->pid);
    ipc_session_stop(job->sess, TRACE_STOP_TIMEOUT_MS);
}

static void job_cancel(void *ctx)
{
    struct trace_job *job = ctx;
    if (job->sess != NULL) {
        ipc_session_abort(job->sess);
        job->sess = NULL;
    }
    uv_timer_stop(&job->timer);
    if (job->req != NULL) {
        struct http_request *req = job->req;
        job->req = NULL;
        http_request_on_abort(req, NULL, NULL);
        if (job->streaming) {
            http_stream_abort(req); /* the client sees a truncated transfer */
        } else {
            api_problem(req, 400, "the trace operation was cancelled before it started");
        }
    }
    job_finish_op(job, OP_CANCELLED, NULL, NULL);
    spool_close(job->spool);
    job->spool = NULL;
    job_maybe_free(job);
}

static void job_on_timer(uv_timer_t *t)
{
    job_stop(t->data);
}

static void job_relay(struct trace_job *job);

static void job_on_drain(void *ud, struct http_request *r)
{
    (void)r;
    job_relay(ud);
}

static void sess_on_started(void *ud, uint64_t session_id, int version)
{
    struct trace_job *job = ud;
    job->version = version;
    job->session_id = session_id;
    log_info(cat, "trace of %llu started: session 0x%llx (CollectTracing%d), profiles %s",
             (unsigned long long)job->pid, (unsigned long long)session_id, version,
             job->tc.profile_names);
    if (job->op != NULL) {
        op_set_state(&job->a->ops, job->op, job->stopping ? OP_STOPPING : OP_RUNNING, NULL, NULL);
    }
    /* Listen mode with DiagnosticPort:HoldSuspended: the session that waited for the start-up
     * events now runs, so the runtime may go on (a no-op for a runtime already resumed). */
    if (job->a->disc != NULL) {
        (void)ipc_discovery_resume(job->a->disc, job->uid);
    }
    if (job->req == NULL) {
        return;
    }
    char disposition[128];
    snprintf(disposition, sizeof(disposition), "attachment; filename=\"%s\"", job->filename);
    const struct http_header hdrs[] = {{"Content-Disposition", disposition},
                                       {"Location", job->location}};
    const char *type = job->json != NULL ? "application/x-ndjson" : "application/octet-stream";
    if (http_stream_begin(job->req, 200, type, hdrs, 2) != 0) {
        job_cancel(job);
        return;
    }
    job->streaming = true;
    http_stream_on_drain(job->req, TRACE_LOW_WATER, job_on_drain, job);
    if (job->duration_s >= 0 && !job->stopping) {
        uv_timer_start(&job->timer, job_on_timer, (uint64_t)job->duration_s * 1000, 0);
    }
}

/* format=ndjson: queues the gathered lines to the client. */
static int job_json_flush(struct trace_job *job)
{
    if (job->req == NULL || buf_size(&job->json_out) == 0) {
        buf_reset(&job->json_out);
        return 0;
    }
    int rc = http_stream_write(job->req, buf_data(&job->json_out), buf_size(&job->json_out));
    buf_reset(&job->json_out);
    if (rc != 0) {
        job->client_lost = true; /* the client is gone; the abort callback follows */
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
    if (job_json_flush(job) != 0) {
        return;
    }
    if (!job->paused && job->sess != NULL && http_stream_pending(job->req) > TRACE_HIGH_WATER) {
        job->paused = true; /* resumed by job_relay once the queue drains */
        ipc_session_pause(job->sess);
    }
}

static void sess_on_data(void *ud, const uint8_t *p, size_t n)
{
    struct trace_job *job = ud;
    nettrace_feed(&job->checker, p, n);
    if (job->req == NULL || !job->streaming) {
        return;
    }
    if (job->json != NULL) {
        job_json_data(job, p, n);
        return;
    }
    /*
     * The read buffer is handed to the HTTP write queue as is (no copy, no new chunk
     * allocation). A partly filled one is first shrunk to its bytes (realloc shrinks in place),
     * so queued memory stays close to queued bytes; tiny reads are simply copied.
     */
    uint8_t *base = n >= TRACE_ZERO_COPY_MIN ? ipc_session_take_buffer(job->sess) : NULL;
    const uint8_t *data = p;
    if (base != NULL) {
        size_t off = (size_t)(p - base);
        if (off + n <= IPC_SESSION_READ_SIZE / 2) {
            uint8_t *fit = realloc(base, off + n);
            base = fit != NULL ? fit : base;
        }
        data = base + off;
    }
    bool behind = http_stream_pending(job->req) > TRACE_HIGH_WATER ||
                  (job->spool != NULL && spool_size(job->spool) > 0);
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
                job_cancel(job);
                return;
            }
            job_relay(job);
            return;
        }
    }
    int rc = base != NULL ? http_stream_write_owned(job->req, base, data, n)
                          : http_stream_write(job->req, p, n);
    if (rc != 0) {
        job->client_lost = true;
        return; /* the client is gone; the abort callback follows */
    }
    if (!job->paused && job->a->trace_spool_limit == 0 &&
        http_stream_pending(job->req) > TRACE_HIGH_WATER) {
        job->paused = true; /* no spool: backpressure at once */
        ipc_session_pause(job->sess);
    }
}

static const struct ipc_session_callbacks session_callbacks;

/* The retry timer: starts the session again (the duration timer is not armed before start). */
static void job_on_retry(uv_timer_t *t)
{
    struct trace_job *job = t->data;
    if (job->req == NULL) {
        job_maybe_free(job);
        return;
    }
    int rc = ipc_session_start(job->a->loop, &job->a->sessions, &job->ep, &job->tc.collect,
                               TRACE_START_TIMEOUT_MS, &session_callbacks, job, &job->sess);
    if (rc == 0 && job->stopping) {
        ipc_session_stop(job->sess, TRACE_STOP_TIMEOUT_MS); /* stopped while the retry waited */
    }
    if (rc != 0) {
        struct http_request *req = job->req;
        job->req = NULL;
        http_request_on_abort(req, NULL, NULL);
        job_finish_op(job, OP_FAILED, "RuntimeUnreachable", agent_strerror(rc));
        api_problem(req, 502, "cannot start a trace session: %s", agent_strerror(rc));
        job_maybe_free(job);
    }
}

/* Ends an incomplete trace's response without its last chunk (see sess_on_end). */
static void job_cut_response(struct trace_job *job)
{
    struct http_request *req = job->req;
    job->req = NULL;
    http_request_on_abort(req, NULL, NULL);
    http_stream_abort(req);
    job_maybe_free(job);
}

static void job_on_truncated_drain(void *ud, struct http_request *r)
{
    struct trace_job *job = ud;
    if (job->req == r && http_stream_pending(r) == 0) {
        job_cut_response(job);
    }
}

static void sess_on_end(void *ud, int status, uint32_t hresult)
{
    struct trace_job *job = ud;
    job->sess = NULL;
    uv_timer_stop(&job->timer);
    struct http_request *req = job->req;

    /* Right after many sessions end, the runtime sometimes closes a new CollectTracing
     * connection without answering (seen on .NET 10.0.12 under load); its next try succeeds. */
    if (!job->streaming && status == AGENT_E_CLOSED && !job->retried && req != NULL) {
        job->retried = true;
        log_info(cat, "trace of %llu: the runtime closed the start unanswered; retrying once",
                 (unsigned long long)job->pid);
        uv_timer_start(&job->timer, job_on_retry, 250, 0);
        return;
    }

    if (!job->streaming) {
        /* The session never started: answer with the reason. */
        char msg[256];
        int http_status = 502;
        const char *code = "RuntimeUnreachable";
        if (status == AGENT_E_RUNTIME) {
            snprintf(msg, sizeof(msg), "the runtime refused the trace session: %s (0x%08x)",
                     ipc_hresult_text(hresult), hresult);
            http_status = 400;
            code = "RuntimeError";
        } else if (status == AGENT_E_TIMEOUT) {
            snprintf(msg, sizeof(msg), "the runtime did not answer CollectTracing in time");
            http_status = 504;
            code = "Timeout";
        } else {
            snprintf(msg, sizeof(msg), "cannot start a trace session: %s", agent_strerror(status));
        }
        log_warn(cat, "trace of %llu failed to start: %s", (unsigned long long)job->pid, msg);
        job_finish_op(job, OP_FAILED, code, msg);
        if (req != NULL) {
            job->req = NULL;
            http_request_on_abort(req, NULL, NULL);
            api_problem(req, http_status, "%s", msg);
        }
        job_maybe_free(job);
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
            spooled > 0 ? "; the client still has the spool to download" : "");
    job->ended = true;
    job->end_status = status;
    job_relay(job); /* the response ends once the spool is out */
}

/* The runtime ended the stream and every byte of it is queued to the client (or the client is
 * gone): finish the operation and the response. */
static void job_deliver_end(struct trace_job *job)
{
    int status = job->end_status;
    struct http_request *req = job->req;
    enum nettrace_verdict v = nettrace_finish(&job->checker);
    if (job->client_lost || req == NULL) {
        /* The runtime finished, but the client did not receive the whole file. */
        job_finish_op(job, OP_CANCELLED, NULL, NULL);
    } else if (v == NETTRACE_COMPLETE) {
        job_finish_op(job, OP_SUCCEEDED, NULL, NULL);
    } else if (v == NETTRACE_TRUNCATED) {
        job_finish_op(job, OP_FAILED, "TraceTruncated",
                      status == AGENT_E_TIMEOUT
                          ? "the runtime did not finish the trace within the stop timeout"
                          : "the trace stream ended before its end marker (did the process exit?)");
    } else {
        job_finish_op(job, OP_FAILED, "TraceInvalid", nettrace_error(&job->checker, NULL));
    }
    if (req != NULL && v != NETTRACE_COMPLETE && !job->client_lost) {
        /*
         * The stream ended without its end marker (the process died, the runtime dropped the
         * stream, the stop timed out). A clean last chunk would tell the client it has the whole
         * file; instead the transfer is cut once everything received has been written, so every
         * HTTP client reports the download incomplete (and keeps the bytes, the most recent
         * events included). The operation says why.
         */
        log_warn(cat, "trace of %llu is %s: ending the response without its last chunk",
                 (unsigned long long)job->pid, verdict_word(v));
        if (http_stream_pending(req) > 0) {
            http_stream_on_drain(req, 0, job_on_truncated_drain, job); /* abort callback kept */
            return;
        }
        job_cut_response(job);
        return;
    }
    if (req != NULL) {
        job->req = NULL;
        http_request_on_abort(req, NULL, NULL);
        if (http_stream_end(req) != 0 && job->op == NULL) {
            log_info(cat, "trace of %llu: the client left before the end of the response",
                     (unsigned long long)job->pid);
        }
    }
    job_maybe_free(job);
}

/* A chunk from the spool: to the client, then the next one. */
static void job_on_spooled(void *ud, int status, void *base, const uint8_t *data, size_t n)
{
    struct trace_job *job = ud;
    if (status != 0) {
        /* The spool lost bytes (its file could not be read back): the client's file would have a
         * hole. End it as incomplete and stop the session. */
        log_warn(cat, "trace of %llu: reading the spool failed (%s); ending the response",
                 (unsigned long long)job->pid, agent_strerror(status));
        job->client_lost = true;
        job_cancel(job);
        return;
    }
    if (job->req == NULL) {
        free(base);
        return;
    }
    if (http_stream_write_owned(job->req, base, data, n) != 0) {
        job->client_lost = true;
        return; /* the client is gone; the abort callback follows */
    }
    job_relay(job);
}

/*
 * Moves spooled bytes to the client while its queue is short, pauses the runtime's stream when
 * the spool is full (and resumes it once there is room again), and ends the response once the
 * runtime has ended the stream and nothing is left in the spool.
 */
static void job_relay(struct trace_job *job)
{
    struct http_request *req = job->req;
    struct spool *sp = job->spool;
    if (req != NULL && sp != NULL && spool_size(sp) > 0 && !spool_popping(sp) &&
        http_stream_pending(req) < TRACE_HIGH_WATER) {
        (void)spool_pop(sp, job_on_spooled, job);
    }
    if (job->sess != NULL) {
        if (!job->paused && sp != NULL && spool_full(sp)) {
            job->paused = true;
            ipc_session_pause(job->sess);
            if (!job->backpressure_said) {
                job->backpressure_said = true;
                log_warn(cat,
                         "trace of %llu: the client is %llu bytes behind (%s); reading the runtime "
                         "only as fast as the client downloads from now on, and its buffer may "
                         "drop events",
                         (unsigned long long)job->pid, (unsigned long long)spool_size(sp),
                         spool_error(sp) != 0 ? "the spool file cannot be written"
                                              : "Trace:SpoolLimitMB");
            }
        } else if (job->paused &&
                   (sp != NULL ? spool_has_room(sp)
                               : req == NULL || http_stream_pending(req) <= TRACE_LOW_WATER)) {
            job->paused = false;
            ipc_session_resume(job->sess);
        }
    }
    if (job->ended && (req == NULL || sp == NULL || (spool_size(sp) == 0 && !spool_popping(sp)))) {
        job->ended = false;
        job_deliver_end(job);
    }
}

static const struct ipc_session_callbacks session_callbacks = {
    .on_started = sess_on_started,
    .on_data = sess_on_data,
    .on_end = sess_on_end,
};

/* Parses durationSeconds: -1 (until stopped) .. INT32_MAX, default 30. */

/*
 * Names the job's artifact and operation, and takes its own copy of the runtime's endpoint
 * (released with the job): the process entry may be gone long before the job ends. Returns 0 or
 * the copy's error (UV_ENOMEM).
 */
static int job_set_target(struct trace_job *job, const struct ipc_process *p,
                          struct http_request *req, bool ndjson)
{
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "%s_%llu.%s", ts, (unsigned long long)p->pid,
             ndjson ? "ndjson" : "nettrace");
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ipc_endpoint_copy(&job->ep, &ep);
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    const char *host = http_request_header(req, "Host");
    snprintf(job->location, sizeof(job->location), "http://%s/operations/%s",
             host != NULL ? host : "localhost", job->op->id);
    job->op->artifact_name = strdup(job->filename);
    return rc;
}

/*
 * The egressProvider and format query parameters: 0 with *ndjson set, or -1 once answered with a
 * problem (a malformed query, an egress provider, an unknown format).
 */
static int trace_query_output(struct http_request *req, bool *ndjson)
{
    struct buf egress, format;
    buf_init(&egress, 256);
    buf_init(&format, 64);
    const char *q = http_request_query(req);
    int has_egress = http_query_get(q, "egressProvider", &egress);
    int has_format = http_query_get(q, "format", &format);
    int rc = -1;
    *ndjson = has_format == 1 && strcasecmp(buf_cstr(&format), "ndjson") == 0;
    if (has_egress < 0 || has_format < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (has_format == 1 && !*ndjson && strcasecmp(buf_cstr(&format), "nettrace") != 0) {
        api_problem(req, 400, "unknown format '%s' (nettrace or ndjson)", buf_cstr(&format));
    } else if (has_egress == 1 && buf_size(&egress) > 0) {
        api_problem(req, 400,
                    "egress provider '%s' is not configured; omit egressProvider to "
                    "receive the trace in this response",
                    buf_cstr(&egress));
    } else {
        rc = 0;
    }
    buf_fini(&egress);
    buf_fini(&format);
    return rc;
}

/* Common part of GET and POST once the configuration is known; takes ownership of tc. */
static void start_trace(struct agent *a, struct http_request *req, const struct ipc_process *p,
                        struct trace_config *tc, int64_t duration_s)
{
    struct buf tags;
    buf_init(&tags, 4096);
    const char *q = http_request_query(req);
    int has_tags = http_query_get(q, "tags", &tags);
    bool ndjson = false;
    struct trace_job *job = NULL;
    struct operation *op = NULL;

    if (has_tags < 0) {
        api_problem(req, 400, "malformed query string");
        goto fail;
    }
    if (trace_query_output(req, &ndjson) != 0) {
        goto fail;
    }
    if (a->stopping) {
        api_problem(req, 503, "dotmon is shutting down");
        goto fail;
    }
    /* Aborted sessions finish their StopTracing in the background; count them too, so that a
     * client hanging up in a loop cannot pile sessions up in the runtime (it allows 64). */
    if (a->sessions.live >= a->ops.limit[OP_KIND_TRACE] + TRACE_SESSION_SLACK) {
        api_problem(req, 429, "%zu trace sessions are still being closed; retry in a few seconds",
                    a->sessions.live);
        goto fail;
    }
    int rc = op_registry_add(&a->ops, OP_KIND_TRACE, p->pid, p->uid, p->name,
                             has_tags == 1 ? buf_cstr(&tags) : NULL, &op);
    if (rc == AGENT_E_TOOBIG) {
        api_problem(req, 429, "%zu traces are already running; at most %zu may run at once",
                    op_registry_active(&a->ops, OP_KIND_TRACE), a->ops.limit[OP_KIND_TRACE]);
        goto fail;
    }
    if (rc != 0) {
        api_problem(req, 500, "cannot register the operation: %s", agent_strerror(rc));
        goto fail;
    }
    job = calloc(1, sizeof(*job));
    if (job == NULL) {
        op_set_state(&a->ops, op, OP_FAILED, "OutOfMemory", "out of memory");
        api_problem(req, 500, "out of memory");
        goto fail;
    }
    job->a = a;
    job->op = op;
    job->req = req;
    job->pid = p->pid;
    job->duration_s = duration_s;
    job->tc = *tc;
    memset(tc, 0, sizeof(*tc)); /* ownership moved to the job */
    buf_init(&job->json_out, 0);
    if (ndjson) {
        job->json = ev_json_new(job_on_json_line, job);
    }
    if ((ndjson && job->json == NULL) || nettrace_checker_init(&job->checker, NULL) != 0) {
        ev_json_free(job->json);
        trace_config_fini(&job->tc);
        free(job);
        op_set_state(&a->ops, op, OP_FAILED, "OutOfMemory", "out of memory");
        api_problem(req, 500, "out of memory");
        goto fail;
    }
    uv_timer_init(a->loop, &job->timer);
    job->timer.data = job;

    int ep_rc = job_set_target(job, p, req, ndjson);

    rc = ep_rc != 0
             ? ep_rc
             : ipc_session_start(a->loop, &a->sessions, &job->ep, &job->tc.collect,
                                 TRACE_START_TIMEOUT_MS, &session_callbacks, job, &job->sess);
    if (rc != 0) {
        job->req = NULL;
        job_finish_op(job, OP_FAILED, "RuntimeUnreachable", agent_strerror(rc));
        api_problem(req, 502, "cannot start a trace session with process %llu: %s",
                    (unsigned long long)p->pid, agent_strerror(rc));
        job_maybe_free(job);
        goto out;
    }
    op->stoppable = true;
    op->control.stop = job_stop;
    op->control.cancel = job_cancel;
    op->ctx = job;
    http_request_on_abort(req, job_on_abort, job);
    goto out;

fail:
    trace_config_fini(tc);
out:
    buf_fini(&tags);
}

void api_trace_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    int64_t duration = 0;
    if (api_parse_duration(req, &duration) != 0) {
        return;
    }
    struct buf profile, err;
    buf_init(&profile, 4096);
    buf_init(&err, 4096);
    int has = http_query_get(http_request_query(req), "profile", &profile);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (trace_config_from_profiles(has == 1 ? buf_cstr(&profile) : NULL,
                                          a->metrics_interval_s, &tc, &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        start_trace(a, req, p, &tc, duration);
    }
    buf_fini(&profile);
    buf_fini(&err);
}

void api_trace_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415,
                    "POST /trace takes a JSON body (Content-Type application/json), not %s", ct);
        return;
    }
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    int64_t duration = 0;
    if (api_parse_duration(req, &duration) != 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct buf err;
    buf_init(&err, 4096);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    if (len == 0) {
        api_problem(req, 400, "POST /trace needs a JSON body with Providers");
    } else if (trace_config_from_json((const char *)body, len, &tc, &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        start_trace(a, req, p, &tc, duration);
    }
    buf_fini(&err);
}

void api_trace_shutdown(struct agent *a)
{
    /* Stop every running trace gracefully so clients get complete files and runtimes keep no
     * session; the HTTP server's grace period lets the rundown finish. */
    for (size_t i = 0; i < a->ops.n; i++) {
        struct operation *op = a->ops.v[i];
        if (op->kind == OP_KIND_TRACE && !op_is_finished(op) && op->control.stop != NULL) {
            op->control.stop(op->ctx);
        }
    }
}
