/* SPDX-License-Identifier: MIT */
#ifndef TEST_FAKE_THREAD_H
#define TEST_FAKE_THREAD_H

#include "fake_runtime.h"

/*
 * A fake runtime on its own libuv loop on its own thread, for tests that drive the real dotmon
 * binary from the test thread. The test reaches the fake only through fake_thread_call, which
 * runs a function on the loop thread and waits for it, so the fake's state is touched by that
 * thread alone. Its socket is <dir>/dotnet-diagnostic-<cfg pid>-<cfg key>-socket.
 */
struct fake_thread;

typedef void (*fake_thread_fn)(struct fake_runtime *f, void *arg);

/* Copies cfg (its strings must outlive the fake) and starts the fake in dir. Returns 0 or the
 * error of fake_runtime_start / the loop set-up (nothing is left running then). */
int fake_thread_start(const char *dir, const struct fake_runtime_config *cfg,
                      struct fake_thread **out);
/* Runs fn(f, arg) on the fake's loop thread and returns once it has run. */
void fake_thread_call(struct fake_thread *ft, fake_thread_fn fn, void *arg);
/* Closes the fake, joins its thread and frees ft. NULL is ignored. */
void fake_thread_stop(struct fake_thread *ft);

#endif
