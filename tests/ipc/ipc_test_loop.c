/* SPDX-License-Identifier: MIT */
#include "ipc_test_loop.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "fake_runtime.h"

static void on_tick(uv_timer_t *t)
{
    (void)t;
}

/* Does not fail from inside the loop (a longjmp out of uv_run); the waiting helper reports it. */
static void on_watchdog(uv_timer_t *t)
{
    struct test_loop *tl = t->data;
    tl->expired = true;
    uv_stop(&tl->loop);
}

int tl_setup(void **state)
{
    /* Writes to a runtime that already closed must fail with EPIPE, not kill the test. */
    (void)signal(SIGPIPE, SIG_IGN);
    struct test_loop *t = calloc(1, sizeof(*t));
    if (t == NULL || uv_loop_init(&t->loop) != 0) {
        free(t);
        return -1;
    }
    (void)uv_timer_init(&t->loop, &t->tick);
    (void)uv_timer_init(&t->loop, &t->watchdog);
    t->watchdog.data = t;
    (void)uv_timer_start(&t->tick, on_tick, 5, 5);
    (void)uv_timer_start(&t->watchdog, on_watchdog, TL_WATCHDOG_MS, 0);
    *state = t;
    return 0;
}

int tl_teardown(void **state)
{
    struct test_loop *t = *state;
    uv_close((uv_handle_t *)&t->tick, NULL);
    uv_close((uv_handle_t *)&t->watchdog, NULL);
    /* Bounded drain: a leaked active handle must fail the test below, not hang it. */
    uint64_t start = tl_ms();
    while (uv_loop_alive(&t->loop) && tl_ms() - start < 3000) {
        uv_run(&t->loop, UV_RUN_NOWAIT);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    uv_run(&t->loop, UV_RUN_NOWAIT);
    int rc = uv_loop_close(&t->loop);
    assert_int_equal(rc, 0);
    free(t);
    return 0;
}

bool tl_run_until(struct test_loop *t, bool (*pred)(void *ud), void *ud, uint64_t max_ms)
{
    uv_update_time(&t->loop);
    uint64_t deadline = uv_now(&t->loop) + max_ms;
    while (!pred(ud)) {
        if (t->expired || uv_now(&t->loop) >= deadline) {
            return false;
        }
        uv_run(&t->loop, UV_RUN_ONCE);
        uv_update_time(&t->loop);
    }
    return true;
}

static bool never(void *ud)
{
    (void)ud;
    return false;
}

void tl_run_for(struct test_loop *t, uint64_t ms)
{
    (void)tl_run_until(t, never, NULL, ms);
}

uint64_t tl_ms(void)
{
    return uv_hrtime() / 1000000u;
}

static void on_fake_closed(void *ud)
{
    *(bool *)ud = true;
}

static bool fake_closed(void *ud)
{
    return *(bool *)ud;
}

void tl_close_fake(struct test_loop *t, struct fake_runtime *f)
{
    bool closed = false;
    fake_runtime_close(f, on_fake_closed, &closed);
    assert_true(tl_run_until(t, fake_closed, &closed, 2000));
}
