/* SPDX-License-Identifier: MIT */
/*
 * The collection-job core (collect/job.h): the state table (every legal move works, every other
 * one aborts the process, checked in a child) and the one end path (stop, cancel, client loss,
 * timeout and shutdown each end the artifact once and free the job once).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "job.h"
#include "log.h"
#include "operations.h"

/* A fake artifact: what end_artifact saw. */
struct artifact {
    struct operation *op;
    int ends;
    enum job_end how;
};

/* A fake collector: a "session" that stop() or the test ends. */
struct fake_job {
    struct job job;
    bool session;     /* held: the job may not go */
    bool end_on_stop; /* stop() ends the session at once (the runtime's rundown) */
};

/* What the callbacks saw (outside the job: it is freed by the time the test looks). */
static struct {
    int stops;
    int aborts;
    enum job_why why;
    int timeouts;
    int shutdowns;
    int results;
} calls;

/* Reachable from globals, so a child that exits holds no leak. */
static struct collect_ctx ctx;
static struct op_registry ops;
static uv_loop_t loop;
static struct artifact art;
static int finis;

static void fake_end(struct artifact *a, enum job_end how, int http_status, const char *code,
                     const char *message, const char *detail, cJSON *extra)
{
    (void)http_status;
    (void)detail;
    a->ends++;
    a->how = how;
    enum op_state st = how == JOB_END_COMPLETE ? OP_SUCCEEDED
                       : how == JOB_END_CANCEL ? OP_CANCELLED
                                               : OP_FAILED;
    op_set_state(&ops, a->op, st, code, message);
    cJSON_Delete(extra);
}

/* The runtime ended the session: the outcome, then the session is gone. */
static void fake_session_end(struct fake_job *f)
{
    job_end(&f->job, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    f->session = false;
    job_release(&f->job);
}

static void fake_stop(struct job *job)
{
    struct fake_job *f = (struct fake_job *)job;
    calls.stops++;
    if (f->end_on_stop) {
        fake_session_end(f);
    }
}

static void fake_abort(struct job *job, enum job_why why)
{
    struct fake_job *f = (struct fake_job *)job;
    calls.aborts++;
    calls.why = why;
    f->session = false; /* aborted in the background */
}

static cJSON *fake_results(struct job *job)
{
    (void)job;
    calls.results++;
    return cJSON_CreateObject();
}

static bool fake_holds(const struct job *job)
{
    return ((const struct fake_job *)job)->session;
}

static void fake_fini(struct job *job)
{
    (void)job;
    finis++;
}

static const struct job_vtable fake_vt = {.kind = OP_KIND_TRACE,
                                          .noun = "fake",
                                          .stop = fake_stop,
                                          .abort = fake_abort,
                                          .results = fake_results,
                                          .holds = fake_holds,
                                          .fini = fake_fini};

/* No stop: a dump-like collector. */
static const struct job_vtable nostop_vt = {.kind = OP_KIND_DUMP,
                                            .noun = "nostop",
                                            .abort = fake_abort,
                                            .results = fake_results,
                                            .holds = fake_holds,
                                            .fini = fake_fini};

static int setup(void **state)
{
    (void)state;
    log_set_level(LOG_ERROR);
    uv_loop_init(&loop);
    op_registry_init(&ops, 16, 3, 1);
    memset(&ctx, 0, sizeof(ctx));
    ctx.loop = &loop;
    ctx.ops = &ops;
    ctx.end_artifact = fake_end;
    memset(&art, 0, sizeof(art));
    finis = 0;
    memset(&calls, 0, sizeof(calls));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&loop), 0);
    op_registry_fini(&ops);
    return 0;
}

/* A job admitted with the fake artifact and an operation of vt's kind, holding a session. */
static struct fake_job *admitted(const struct job_vtable *vt)
{
    struct fake_job *f = (struct fake_job *)job_new(&ctx, vt, sizeof(struct fake_job));
    assert_non_null(f);
    struct operation *op = NULL;
    assert_int_equal(op_registry_add(&ops, vt->kind, 42, "uid", "app", NULL, &op), 0);
    art.op = op;
    f->job.art = &art;
    job_admitted(&f->job, op);
    f->session = true;
    return f;
}

/* ---- the state table ------------------------------------------------------------------------ */

/* The moves the lifecycle needs, written out independently of job.c's table. */
static bool expected_legal(enum job_state from, enum job_state to)
{
    static const enum job_state legal[][2] = {
        {JOB_STARTING, JOB_RUNNING}, {JOB_STARTING, JOB_STOPPING}, {JOB_STARTING, JOB_ENDED},
        {JOB_RUNNING, JOB_STOPPING}, {JOB_RUNNING, JOB_ENDED},     {JOB_STOPPING, JOB_ENDED},
        {JOB_ENDED, JOB_FREED},
    };
    for (size_t i = 0; i < sizeof(legal) / sizeof(legal[0]); i++) {
        if (legal[i][0] == from && legal[i][1] == to) {
            return true;
        }
    }
    return false;
}

/* A path of legal moves from STARTING to s. */
static void walk_to(struct job *job, enum job_state s)
{
    if (s == JOB_RUNNING || s == JOB_STOPPING || s == JOB_ENDED) {
        job_set_state(job, s);
    } else if (s == JOB_FREED) {
        job_set_state(job, JOB_ENDED);
        job_set_state(job, JOB_FREED);
    }
}

/* In a child: a job walked to from, then moved to to. Its wait status. */
static int try_move(enum job_state from, enum job_state to)
{
    (void)fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct job *job = job_new(&ctx, &fake_vt, sizeof(struct fake_job));
        if (job == NULL) {
            _exit(3);
        }
        walk_to(job, from);
        job_set_state(job, to);
        _exit(job->state == to ? 0 : 2);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return status;
}

static void test_every_move(void **state)
{
    (void)state;
    int legal = 0;
    for (int from = 0; from < JOB_STATE_COUNT; from++) {
        for (int to = 0; to < JOB_STATE_COUNT; to++) {
            int st = try_move((enum job_state)from, (enum job_state)to);
            bool ok = expected_legal((enum job_state)from, (enum job_state)to);
            assert_int_equal(job_move_allowed((enum job_state)from, (enum job_state)to), ok);
            if (ok) {
                legal++;
                assert_true(WIFEXITED(st));
                assert_int_equal(WEXITSTATUS(st), 0);
            } else {
                /* An illegal move aborts: never a silent double free or leak. */
                assert_true(WIFSIGNALED(st));
                assert_int_equal(WTERMSIG(st), SIGABRT);
            }
        }
    }
    assert_int_equal(legal, 7);
}

static void test_unknown_state_refused(void **state)
{
    (void)state;
    assert_false(job_move_allowed(JOB_STATE_COUNT, JOB_RUNNING));
    assert_false(job_move_allowed(JOB_RUNNING, JOB_STATE_COUNT));
    assert_string_equal(job_state_name(JOB_STOPPING), "STOPPING");
}

/* ---- the end path --------------------------------------------------------------------------- */

static void test_stop_ends_once(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    job_running(&f->job);
    assert_int_equal(f->job.state, JOB_RUNNING);
    struct operation *op = art.op;
    assert_int_equal(op->state, OP_RUNNING);
    assert_true(op->stoppable);
    op->control.stop(op->ctx); /* DELETE ?stop=true, through the registry */
    assert_int_equal(f->job.state, JOB_STOPPING);
    assert_int_equal(op->state, OP_STOPPING);
    op->control.stop(op->ctx); /* a second stop is harmless */
    job_stop(&f->job);
    assert_int_equal(calls.stops, 1);
    fake_session_end(f); /* the rundown's end */
    assert_int_equal(art.ends, 1);
    assert_int_equal(art.how, JOB_END_COMPLETE);
    assert_int_equal(calls.results, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
    assert_null(ctx.jobs);
    assert_int_equal(ctx.live, 0);
}

static void test_stop_before_started(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    job_stop(&f->job);
    assert_int_equal(f->job.state, JOB_STOPPING);
    job_running(&f->job); /* the session starts after the stop: it stays stopping */
    assert_int_equal(f->job.state, JOB_STOPPING);
    assert_int_equal(art.op->state, OP_STOPPING);
    fake_session_end(f);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
    assert_int_equal(art.ends, 1);
}

static void test_cancel_ends_once(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    job_running(&f->job);
    struct operation *op = art.op;
    op->control.cancel(op->ctx); /* DELETE */
    assert_int_equal(calls.aborts, 1);
    assert_int_equal(calls.why, JOB_WHY_CANCEL);
    assert_int_equal(art.ends, 1);
    assert_int_equal(art.how, JOB_END_CANCEL);
    assert_int_equal(f->job.state, JOB_FREED); /* abort let the session go */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

static void test_held_job_outlives_its_artifact(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    job_running(&f->job);
    job_end(&f->job, JOB_END_FAIL, 502, "RuntimeUnreachable", "gone", NULL);
    job_release(&f->job); /* the session is still closing */
    assert_int_equal(f->job.state, JOB_ENDED);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 0);
    job_stop(&f->job);   /* nothing left to stop */
    job_cancel(&f->job); /* nor to cancel: no second end */
    assert_int_equal(calls.stops, 0);
    assert_int_equal(art.ends, 1);
    assert_int_equal(art.how, JOB_END_FAIL);
    f->session = false;
    job_release(&f->job);
    job_release(&f->job);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

static void test_client_lost(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    job_running(&f->job);
    job_lost(f);
    assert_int_equal(calls.why, JOB_WHY_LOST);
    assert_int_equal(art.how, JOB_END_CANCEL);
    assert_int_equal(art.ends, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

static void test_timeout_stops(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    f->end_on_stop = true;
    job_running(&f->job);
    job_arm_timeout(&f->job, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(calls.stops, 1);
    assert_int_equal(art.ends, 1);
    assert_int_equal(art.how, JOB_END_COMPLETE);
    assert_int_equal(finis, 1);
}

static void fake_timeout_fails(struct job *job)
{
    struct fake_job *f = (struct fake_job *)job;
    calls.timeouts++;
    job_end(job, JOB_END_FAIL, 504, "Timeout", "too slow", NULL);
    f->session = false;
    job_release(job);
}

static void test_timeout_callback(void **state)
{
    (void)state;
    struct job_vtable vt = fake_vt;
    vt.on_timeout = fake_timeout_fails;
    struct fake_job *f = admitted(&vt);
    job_arm_timeout(&f->job, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(calls.timeouts, 1);
    assert_int_equal(calls.stops, 0);
    assert_int_equal(art.how, JOB_END_FAIL);
    assert_int_equal(finis, 1);
}

static void test_shutdown_stops(void **state)
{
    (void)state;
    struct fake_job *f = admitted(&fake_vt);
    f->end_on_stop = true;
    job_running(&f->job);
    collect_shutdown(&ctx);
    collect_shutdown(&ctx); /* a second shutdown stops nothing more */
    assert_int_equal(calls.stops, 1);
    assert_int_equal(art.ends, 1);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

static void test_shutdown_without_stop_cancels(void **state)
{
    (void)state;
    (void)admitted(&nostop_vt);
    assert_false(art.op->stoppable);
    assert_null(art.op->control.stop);
    collect_shutdown(&ctx);
    assert_int_equal(calls.aborts, 1);
    assert_int_equal(calls.why, JOB_WHY_SHUTDOWN);
    assert_int_equal(art.how, JOB_END_CANCEL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

static void fake_shutdown(struct job *job)
{
    calls.shutdowns++;
    fake_timeout_fails(job);
}

static void test_shutdown_callback(void **state)
{
    (void)state;
    struct job_vtable vt = nostop_vt;
    vt.shutdown = fake_shutdown;
    (void)admitted(&vt);
    collect_shutdown(&ctx);
    assert_int_equal(calls.shutdowns, 1);
    assert_int_equal(calls.aborts, 0);
    assert_int_equal(art.how, JOB_END_FAIL);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

/* Refused at admission: no artifact, nothing held; released at once. */
static void test_refused_job(void **state)
{
    (void)state;
    struct job *job = job_new(&ctx, &fake_vt, sizeof(struct fake_job));
    assert_non_null(job);
    assert_int_equal(ctx.live, 1);
    job_release(job);
    assert_int_equal(job->state, JOB_FREED);
    assert_int_equal(ctx.live, 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
    assert_int_equal(art.ends, 0);
}

/* Extra timers of the collector are closed with the job. */
struct timer_job {
    struct fake_job f;
    uv_timer_t extra;
};

static void test_extra_timer_closed(void **state)
{
    (void)state;
    struct job *job = job_new(&ctx, &fake_vt, sizeof(struct timer_job));
    assert_non_null(job);
    struct timer_job *t = (struct timer_job *)job;
    job_add_timer(job, &t->extra);
    assert_ptr_equal(t->extra.data, job);
    job_release(job);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
}

/* on_idle: once, when the last job's memory is gone (after its fini), never while another job
 * is live or still closing. */
static int idles;
static int finis_at_idle;

static void count_idle(struct collect_ctx *c)
{
    assert_ptr_equal(c, &ctx);
    idles++;
    finis_at_idle = finis;
}

static void test_idle_after_last_job(void **state)
{
    (void)state;
    idles = 0;
    ctx.on_idle = count_idle;
    struct job *a = job_new(&ctx, &fake_vt, sizeof(struct fake_job));
    struct job *b = job_new(&ctx, &fake_vt, sizeof(struct timer_job));
    assert_non_null(a);
    assert_non_null(b);
    struct timer_job *t = (struct timer_job *)b;
    job_add_timer(b, &t->extra); /* b closes two handles: its memory goes after the second */
    job_release(a);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 1);
    assert_int_equal(idles, 0); /* b is live */
    job_release(b);
    assert_int_equal(ctx.live, 0);
    assert_int_equal(idles, 0); /* b's handles are still closing */
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 2);
    assert_int_equal(idles, 1);
    assert_int_equal(finis_at_idle, 2);
    /* Both released before the loop runs: one call, after both are gone. */
    a = job_new(&ctx, &fake_vt, sizeof(struct fake_job));
    b = job_new(&ctx, &fake_vt, sizeof(struct fake_job));
    assert_non_null(a);
    assert_non_null(b);
    job_release(a);
    job_release(b);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(finis, 4);
    assert_int_equal(idles, 2);
    assert_int_equal(finis_at_idle, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_every_move, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idle_after_last_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_state_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_ends_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_before_started, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_ends_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_held_job_outlives_its_artifact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_client_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_stops, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_without_stop_cancels, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_callback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_extra_timer_closed, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
