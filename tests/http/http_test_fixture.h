/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TESTS_HTTP_TEST_FIXTURE_H
#define AGENT_TESTS_HTTP_TEST_FIXTURE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "http_server.h"

/*
 * Loop fixture for HTTP server tests (docs/style.md §9): a private uv_loop_t per test, a watchdog,
 * a server on 127.0.0.1:0, and a client function run on a second thread with blocking sockets.
 *
 * Threads: the loop, the server and the handler run on the test's main thread; the client
 * function runs on its own thread and must touch only its sockets and the client_* fields.
 * cmocka's asserts must not be used on the client thread (they longjmp): use HFX_CHECK, which
 * records the first failure and returns; hfx_run reports it on the main thread.
 */

struct hfx;
typedef void (*hfx_handler_fn)(struct hfx *fx, struct http_request *r);
typedef void (*hfx_client_fn)(struct hfx *fx);

struct hfx {
    uv_loop_t loop;
    uv_timer_t watchdog;
    uv_async_t client_done;
    struct http_server *srv;
    struct http_server_config cfg;
    int port;
    hfx_handler_fn handler;
    uint64_t close_grace_ms; /* grace used when the client is done (default 0) */
    const char *url;         /* what hfx_run listens on; NULL: http://127.0.0.1:0 */
    bool timed_out;
    bool client_finished; /* loop side: the async arrived */
    bool server_closed;
    unsigned requests; /* handler calls */
    void *user;        /* per-test state (loop thread) */
    /* client thread */
    pthread_t thread;
    hfx_client_fn client;
    char client_error[512];
};

#define HFX_CHECK(fx, cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            hfx_fail((fx), __FILE__, __LINE__, #cond);                                             \
            return;                                                                                \
        }                                                                                          \
    } while (0)

/* cmocka setup/teardown: allocate the fixture and init the loop / close every handle left, run
 * the loop, and assert uv_loop_close() == 0 (no leaked handle). */
int hfx_setup(void **state);
int hfx_teardown(void **state);
/* Creates the server (fx->cfg), listens on http://127.0.0.1:0, runs client on a thread and the
 * loop until the client is done and the server closed; fails the test on a client failure or
 * when the watchdog fires. */
void hfx_run(struct hfx *fx, hfx_client_fn client, uint64_t watchdog_ms);
/* Closes the server now (from a handler too). Idempotent. */
void hfx_close_server(struct hfx *fx, uint64_t grace_ms);
/* Records a client-thread failure (first one wins). */
void hfx_fail(struct hfx *fx, const char *file, int line, const char *what);
/* Like hfx_fail with a formatted message. */
void hfx_failf(struct hfx *fx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
