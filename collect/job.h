/* SPDX-License-Identifier: MIT */
#ifndef COLLECT_JOB_H
#define COLLECT_JOB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>
#include <uv.h>

#include "operations.h"

/*
 * The collection-job core: the one lifecycle every collector (trace, dump, gcdump, logs,
 * livemetrics, profile) runs on. A job ties together its operation (the registry's entry), its
 * artifact (the HTTP response or the egress upload), the collector's session or exchange with the
 * runtime, and a timer; it has one state, moved only through job_set_state, which refuses (aborts
 * the process with a message) any move its table does not allow:
 *
 *     STARTING -> RUNNING | STOPPING | ENDED
 *     RUNNING  -> STOPPING | ENDED
 *     STOPPING -> ENDED
 *     ENDED    -> FREED
 *
 * STARTING: admitted, the runtime has not accepted the session yet. RUNNING: collecting.
 * STOPPING: a graceful stop was asked (DELETE ?stop=true, the duration, shutdown), or the
 * producer ends on its own (a gcdump's heap walk is complete); the rundown follows. ENDED: the
 * artifact has been ended (or, for a job without one, the job is going away); the collector may
 * still hold a session that is closing. FREED: its handles are closing; the memory goes once they
 * are closed.
 *
 * Every way a job ends goes through the same few calls, driven by the operation registry's
 * control hooks (DELETE), the artifact's on_lost, the timer and collect_shutdown:
 *   job_stop     graceful stop: STOPPING, the operation Stopping, then the collector's stop();
 *                a second stop (or a stop once ended) does nothing;
 *   job_cancel   DELETE without stop, or a client that left (job_lost): the collector's abort(),
 *                then the artifact ends Cancelled;
 *   job_end      the collector's outcome (complete, partial, failed, cancelled) to the artifact,
 *                with the collector's results();
 *   job_release  the collector let go of something: once the artifact has ended and the
 *                collector's holds() is false, the job is freed (exactly once: its handles close,
 *                then fini(), then the memory).
 *
 * collect/ knows no agent/ header: what the job needs of the application (the loop, the
 * operation registry, how to end an artifact) comes in a struct collect_ctx. Everything runs on
 * the loop thread.
 *
 * Ownership: a collector embeds struct job as the first member of its own job struct, which
 * job_new allocates (zeroed) and the core frees after vt->fini. The job owns the artifact pointer
 * until job_end hands it to ctx->end_artifact (the artifact settles the operation from then on:
 * job->op becomes NULL too); it never owns the operation (the registry does), only points at it
 * while the operation is not finished. The handles registered with job_add_timer or
 * job_add_handle are the collector's memory (inside its job struct) but the core closes them. The
 * collector owns its session: holds() says whether it still has one.
 */

enum job_state {
    JOB_STARTING = 0,
    JOB_RUNNING,
    JOB_STOPPING,
    JOB_ENDED,
    JOB_FREED,
    JOB_STATE_COUNT
};

/* How the artifact ends (the application's end_artifact maps these onto artifact_end_*). */
enum job_end { JOB_END_COMPLETE, JOB_END_PARTIAL, JOB_END_FAIL, JOB_END_CANCEL };

/* Why the collector's abort() is called. */
enum job_why {
    JOB_WHY_CANCEL,  /* DELETE /operations/{id} without stop */
    JOB_WHY_LOST,    /* the client left, or the egress store failed (the artifact's on_lost) */
    JOB_WHY_SHUTDOWN /* collect_shutdown, for a collector without a shutdown() of its own */
};

struct job;
struct artifact;

/* The application side of every job (owned by the application; outlives every job). */
struct collect_ctx {
    uv_loop_t *loop;
    struct op_registry *ops;
    /*
     * Ends the artifact art with how (taking extra, which may be NULL); http_status and detail
     * are for a request not yet answered, code and message for a failed operation. Settles the
     * operation (possibly later, for an upload).
     */
    void (*end_artifact)(struct artifact *art, enum job_end how, int http_status, const char *code,
                         const char *message, const char *detail, cJSON *extra);
    struct job *jobs; /* every job not yet freed, newest first (collect_shutdown, lookups) */
    size_t live;      /* how many */
    size_t closing;   /* jobs past FREED whose handles are still closing (memory not yet freed) */
    /*
     * The agent went idle: called on the loop once the last job's memory has been freed (no job
     * live, none closing), after its fini. May be NULL. The place to give memory back to the
     * system, off the hot path.
     */
    void (*on_idle)(struct collect_ctx *ctx);
};

/*
 * What a collector supplies: its producer callbacks (const, one per collector). Every callback
 * but holds may be NULL.
 */
struct job_vtable {
    enum op_kind kind;
    const char *noun; /* "trace", for messages */
    /* Graceful stop of the producer (StopTracing): called once, by job_stop, in STOPPING.
     * NULL: the operation is not stoppable (DELETE ?stop=true answers 400; DELETE cancels). */
    void (*stop)(struct job *job);
    /* Stop producing at once (abort the session, drop queued bytes): called once per cancel,
     * client loss or shutdown, before the artifact ends Cancelled. */
    void (*abort)(struct job *job, enum job_why why);
    /* The timer armed by job_arm_timeout fired. NULL: job_stop. */
    void (*on_timeout)(struct job *job);
    /* collect_shutdown. NULL: job_stop when the operation is stoppable, else job_cancel. */
    void (*shutdown)(struct job *job);
    /* The kind-specific results for the operation's details (caller owns), or NULL. Called once,
     * by the job_end that ends the artifact. */
    cJSON *(*results)(struct job *job);
    /* True while the collector still holds something that calls back (a session, a pool work,
     * an open file): the job is not freed before it is false. Must not be NULL. */
    bool (*holds)(const struct job *job);
    /* Releases the collector's private resources (not the job's memory); called once, last,
     * once the job's handles have closed (deferred: never from inside a collector's call). */
    void (*fini)(struct job *job);
};

#define JOB_MAX_HANDLES 4

struct job {
    const struct job_vtable *vt;
    struct collect_ctx *ctx;
    enum job_state state;
    struct operation *op; /* NULL before admission and once the artifact ended */
    struct artifact *art; /* NULL before admission and once ended (job_end) */
    uv_timer_t timer;     /* the core's: duration or deadline (job_arm_timeout); data = job */
    uv_handle_t *handles[JOB_MAX_HANDLES]; /* closed at free: timer, then the collector's */
    int nhandles;
    int closing; /* handles still closing once FREED */
    struct job *next;
    struct job **pprev;
};

/*
 * A job of vt's kind in STARTING, size bytes (>= sizeof(struct job): the collector's struct with
 * struct job first), zeroed, on ctx's list, its timer initialised. NULL when out of memory. From
 * here on it is freed only through job_release (also when admission fails: the artifact is NULL).
 */
struct job *job_new(struct collect_ctx *ctx, const struct job_vtable *vt, size_t size);

/* Registers a timer of the collector's job struct: initialised now (data = job), closed by the
 * core when the job is freed. */
void job_add_timer(struct job *job, uv_timer_t *t);
/* Registers another handle of the collector's job struct, initialised by the collector with
 * data = job; closed by the core when the job is freed. At most JOB_MAX_HANDLES - 1 in all. */
void job_add_handle(struct job *job, uv_handle_t *h);

/*
 * The admitted job's operation: control hooks (stop when vt->stop, cancel) and ctx point at the
 * job. The artifact is job->art, set by the admission.
 */
void job_admitted(struct job *job, struct operation *op);

/* The one checked state change: aborts the process, naming both states, on a move the table
 * refuses. A move to the state the job is in is refused too. */
void job_set_state(struct job *job, enum job_state to);
const char *job_state_name(enum job_state s);
/* True when the table allows from -> to. */
bool job_move_allowed(enum job_state from, enum job_state to);

/* The runtime accepted the session: RUNNING (from STARTING), the operation Running (Stopping
 * when a stop came first). Nothing once ENDED. */
void job_running(struct job *job);

/* Graceful stop; see above. Nothing when not STARTING or RUNNING, or without an artifact. */
void job_stop(struct job *job);
/* Cancel (DELETE): abort(JOB_WHY_CANCEL), end Cancelled, release. */
void job_cancel(struct job *job);
/* The artifact's on_lost (ud is the job): abort(JOB_WHY_LOST), end Cancelled, release. */
void job_lost(void *ud);
/* Arms the core's timer: vt->on_timeout (or job_stop) after ms. */
void job_arm_timeout(struct job *job, uint64_t ms);
/* Ends the artifact (nothing when it has ended already); ENDED. Does not free: job_release. */
void job_end(struct job *job, enum job_end how, int http_status, const char *code,
             const char *message, const char *detail);
/* Frees the job if the artifact has ended and vt->holds is false (ENDED, then FREED). Safe to
 * call any number of times; the job's memory stays valid until the loop closes its handles. */
void job_release(struct job *job);

/* Shutdown (agent_stop): every job's vt->shutdown, or else job_stop / job_cancel (see the
 * vtable). Jobs end as their kind does: traces finish their rundown, dumps being written are
 * abandoned, and so on. */
void collect_shutdown(struct collect_ctx *ctx);

#endif
