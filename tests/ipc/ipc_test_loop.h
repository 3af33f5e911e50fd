/* SPDX-License-Identifier: MIT */
#ifndef TEST_IPC_TEST_LOOP_H
#define TEST_IPC_TEST_LOOP_H

/*
 * Per-test loop fixture for the ipc loop tests: a private uv_loop_t, a 5 ms tick so that
 * UV_RUN_ONCE always returns, and a watchdog that stops everything after TL_WATCHDOG_MS. The
 * teardown asserts uv_loop_close() == 0, which catches any handle or request a test leaked.
 */

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#define TL_WATCHDOG_MS 20000

struct test_loop {
    uv_loop_t loop;
    uv_timer_t tick;
    uv_timer_t watchdog;
    bool expired;
};

/* cmocka setup/teardown: *state becomes a struct test_loop *. */
int tl_setup(void **state);
int tl_teardown(void **state);

/* Runs the loop until pred(ud) is true (returns true) or max_ms / the watchdog ran out (false). */
bool tl_run_until(struct test_loop *t, bool (*pred)(void *ud), void *ud, uint64_t max_ms);
/* Runs the loop for ms milliseconds. */
void tl_run_for(struct test_loop *t, uint64_t ms);
struct fake_runtime;
/* fake_runtime_close, then runs the loop until it has closed (asserts it does within 2 s). */
void tl_close_fake(struct test_loop *t, struct fake_runtime *f);
/* Milliseconds since some fixed point, for measuring latencies. */
uint64_t tl_ms(void);

#endif
