/* SPDX-License-Identifier: MIT */
#include "http_test_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"

void hfx_failf(struct hfx *fx, const char *fmt, ...)
{
    if (fx->client_error[0] != '\0') {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(fx->client_error, sizeof(fx->client_error), fmt, ap);
    va_end(ap);
    if (n < 0) {
        fx->client_error[0] = '?';
        fx->client_error[1] = '\0';
    }
}

void hfx_fail(struct hfx *fx, const char *file, int line, const char *what)
{
    hfx_failf(fx, "%s:%d: client check failed: %s", file, line, what);
}

int hfx_setup(void **state)
{
    struct hfx *fx = calloc(1, sizeof(*fx));
    if (fx == NULL || uv_loop_init(&fx->loop) != 0) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

int hfx_teardown(void **state)
{
    struct hfx *fx = *state;
    /* Normally nothing is left; after a failure, close what remains so the next test starts
     * clean, then check the loop is empty. */
    uv_walk(&fx->loop, close_walk, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    int rc = uv_loop_close(&fx->loop);
    free(fx);
    assert_int_equal(rc, 0);
    return 0;
}

static void maybe_finish(struct hfx *fx)
{
    if (fx->client_finished && fx->server_closed && !uv_is_closing((uv_handle_t *)&fx->watchdog)) {
        uv_close((uv_handle_t *)&fx->watchdog, NULL);
    }
}

static void on_server_closed(void *ud)
{
    struct hfx *fx = ud;
    fx->server_closed = true;
    maybe_finish(fx);
}

void hfx_close_server(struct hfx *fx, uint64_t grace_ms)
{
    if (fx->srv != NULL) {
        struct http_server *s = fx->srv;
        fx->srv = NULL;
        http_server_close(s, grace_ms, on_server_closed, fx);
    }
}

static void on_client_done(uv_async_t *a)
{
    struct hfx *fx = a->data;
    fx->client_finished = true;
    uv_close((uv_handle_t *)a, NULL);
    hfx_close_server(fx, fx->close_grace_ms);
    maybe_finish(fx);
}

static void on_watchdog(uv_timer_t *t)
{
    struct hfx *fx = t->data;
    fx->timed_out = true;
    uv_stop(&fx->loop);
}

static void on_request(void *ud, struct http_request *r)
{
    struct hfx *fx = ud;
    fx->requests++;
    fx->handler(fx, r);
}

static void *client_main(void *arg)
{
    struct hfx *fx = arg;
    fx->client(fx);
    uv_async_send(&fx->client_done);
    return NULL;
}

void hfx_run(struct hfx *fx, hfx_client_fn client, uint64_t watchdog_ms)
{
    assert_non_null(fx->handler);
    assert_int_equal(http_server_new(&fx->loop, &fx->cfg, on_request, fx, &fx->srv), 0);
    assert_int_equal(
        http_server_listen(fx->srv, fx->url != NULL ? fx->url : "http://127.0.0.1:0", 7), 0);
    fx->port = http_server_port(fx->srv, 0);
    assert_true(fx->port > 0);

    assert_int_equal(uv_async_init(&fx->loop, &fx->client_done, on_client_done), 0);
    fx->client_done.data = fx;
    assert_int_equal(uv_timer_init(&fx->loop, &fx->watchdog), 0);
    fx->watchdog.data = fx;
    assert_int_equal(uv_timer_start(&fx->watchdog, on_watchdog, watchdog_ms, 0), 0);

    fx->client = client;
    assert_int_equal(pthread_create(&fx->thread, NULL, client_main, fx), 0);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    pthread_join(fx->thread, NULL);

    if (fx->timed_out) {
        fail_msg("watchdog fired after %llu ms (client: %s)", (unsigned long long)watchdog_ms,
                 fx->client_error[0] ? fx->client_error : "no failure recorded");
    }
    if (fx->client_error[0] != '\0') {
        fail_msg("%s", fx->client_error);
    }
    assert_true(fx->server_closed);
}
