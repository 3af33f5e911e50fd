/* SPDX-License-Identifier: MIT */
#include "job.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

static const char cat[] = "dotmon.job";

/* The legal moves: moves[from] has bit `to` set. */
static const unsigned moves[JOB_STATE_COUNT] = {
    [JOB_STARTING] = (1u << JOB_RUNNING) | (1u << JOB_STOPPING) | (1u << JOB_ENDED),
    [JOB_RUNNING] = (1u << JOB_STOPPING) | (1u << JOB_ENDED),
    [JOB_STOPPING] = 1u << JOB_ENDED,
    [JOB_ENDED] = 1u << JOB_FREED,
    [JOB_FREED] = 0,
};

const char *job_state_name(enum job_state s)
{
    static const char *const names[JOB_STATE_COUNT] = {"STARTING", "RUNNING", "STOPPING", "ENDED",
                                                       "FREED"};
    return (unsigned)s < JOB_STATE_COUNT ? names[s] : "?";
}

bool job_move_allowed(enum job_state from, enum job_state to)
{
    return (unsigned)from < JOB_STATE_COUNT && (unsigned)to < JOB_STATE_COUNT &&
           (moves[from] & (1u << to)) != 0;
}

void job_set_state(struct job *job, enum job_state to)
{
    if (!job_move_allowed(job->state, to)) {
        /* A broken lifecycle would free twice or leak: stop here, loudly. */
        log_error(cat, "%s job: illegal state change %s -> %s",
                  job->vt != NULL ? job->vt->noun : "?", job_state_name(job->state),
                  job_state_name(to));
        abort();
    }
    job->state = to;
}

static void job_on_timer(uv_timer_t *t)
{
    struct job *job = t->data;
    if (job->vt->on_timeout != NULL) {
        job->vt->on_timeout(job);
    } else {
        job_stop(job);
    }
}

void job_add_handle(struct job *job, uv_handle_t *h)
{
    if (job->nhandles >= JOB_MAX_HANDLES) {
        log_error(cat, "%s job: more than %d handles", job->vt->noun, JOB_MAX_HANDLES);
        abort();
    }
    job->handles[job->nhandles++] = h;
}

void job_add_timer(struct job *job, uv_timer_t *t)
{
    uv_timer_init(job->ctx->loop, t);
    t->data = job;
    job_add_handle(job, (uv_handle_t *)t);
}

struct job *job_new(struct collect_ctx *ctx, const struct job_vtable *vt, size_t size)
{
    if (size < sizeof(struct job)) {
        return NULL;
    }
    struct job *job = calloc(1, size);
    if (job == NULL) {
        return NULL;
    }
    job->vt = vt;
    job->ctx = ctx;
    job->state = JOB_STARTING;
    job_add_timer(job, &job->timer);
    job->next = ctx->jobs;
    if (job->next != NULL) {
        job->next->pprev = &job->next;
    }
    ctx->jobs = job;
    job->pprev = &ctx->jobs;
    ctx->live++;
    return job;
}

static void job_stop_hook(void *ud)
{
    job_stop(ud);
}

static void job_cancel_hook(void *ud)
{
    job_cancel(ud);
}

void job_admitted(struct job *job, struct operation *op)
{
    job->op = op;
    op->stoppable = job->vt->stop != NULL;
    op->control.stop = job->vt->stop != NULL ? job_stop_hook : NULL;
    op->control.cancel = job_cancel_hook;
    op->ctx = job;
}

void job_running(struct job *job)
{
    if (job->state == JOB_STARTING) {
        job_set_state(job, JOB_RUNNING);
    }
    if (job->op != NULL && (job->state == JOB_RUNNING || job->state == JOB_STOPPING)) {
        op_set_state(job->ctx->ops, job->op, job->state == JOB_STOPPING ? OP_STOPPING : OP_RUNNING,
                     NULL, NULL);
    }
}

void job_stop(struct job *job)
{
    if ((job->state != JOB_STARTING && job->state != JOB_RUNNING) || job->art == NULL) {
        return; /* stopping already, or nothing left to deliver: a second stop is harmless */
    }
    job_set_state(job, JOB_STOPPING);
    if (job->op != NULL && job->op->state == OP_RUNNING) {
        op_set_state(job->ctx->ops, job->op, OP_STOPPING, NULL, NULL);
    }
    if (job->vt->stop != NULL) {
        job->vt->stop(job);
    }
}

/* abort(why), then the artifact ends Cancelled and the job goes when nothing is held. */
static void job_abort(struct job *job, enum job_why why)
{
    if (job->state == JOB_FREED) {
        return;
    }
    if (job->vt->abort != NULL) {
        job->vt->abort(job, why);
    }
    job_end(job, JOB_END_CANCEL, 400, NULL, NULL, NULL);
    job_release(job);
}

void job_cancel(struct job *job)
{
    job_abort(job, JOB_WHY_CANCEL);
}

void job_lost(void *ud)
{
    job_abort(ud, JOB_WHY_LOST);
}

void job_arm_timeout(struct job *job, uint64_t ms)
{
    uv_timer_start(&job->timer, job_on_timer, ms, 0);
}

void job_end(struct job *job, enum job_end how, int http_status, const char *code,
             const char *message, const char *detail)
{
    struct artifact *art = job->art;
    if (art == NULL) {
        return;
    }
    job->art = NULL;
    job->op = NULL; /* the artifact settles it from now on */
    if (job->state != JOB_ENDED) {
        job_set_state(job, JOB_ENDED);
    }
    cJSON *extra = job->vt->results != NULL ? job->vt->results(job) : NULL;
    job->ctx->end_artifact(art, how, http_status, code, message, detail, extra);
}

static void job_on_closed(uv_handle_t *h)
{
    struct job *job = h->data;
    if (--job->closing > 0) {
        return;
    }
    struct collect_ctx *ctx = job->ctx;
    if (job->vt->fini != NULL) {
        job->vt->fini(job);
    }
    free(job);
    if (--ctx->closing == 0 && ctx->live == 0 && ctx->on_idle != NULL) {
        ctx->on_idle(ctx);
    }
}

void job_release(struct job *job)
{
    if (job->state == JOB_FREED || job->art != NULL || job->vt->holds(job)) {
        return;
    }
    if (job->state != JOB_ENDED) {
        job_set_state(job, JOB_ENDED); /* a job that never had an artifact (or lost it early) */
    }
    job_set_state(job, JOB_FREED);
    if (job->pprev != NULL) {
        *job->pprev = job->next;
        if (job->next != NULL) {
            job->next->pprev = job->pprev;
        }
        job->pprev = NULL;
        job->ctx->live--;
    }
    job->closing = job->nhandles;
    job->ctx->closing++;
    for (int i = 0; i < job->nhandles; i++) {
        uv_close(job->handles[i], job_on_closed);
    }
}

void collect_shutdown(struct collect_ctx *ctx)
{
    struct job *next = NULL;
    for (struct job *job = ctx->jobs; job != NULL; job = next) {
        next = job->next;
        if (job->vt->shutdown != NULL) {
            job->vt->shutdown(job);
        } else if (job->vt->stop != NULL) {
            job_stop(job);
        } else if (job->art != NULL) {
            job_abort(job, JOB_WHY_SHUTDOWN);
        }
    }
}
