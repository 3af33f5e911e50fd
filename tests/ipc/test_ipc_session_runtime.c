/* SPDX-License-Identifier: MIT */
/*
 * ipc_session against a real .NET runtime: the TestApp built by the build_testapp ctest fixture
 * (DOTMON_TESTAPP_DIR), started in a private TMPDIR through tests/support/testenv.h. Each test has
 * its own loop (ipc_test_loop.h) next to the app; timings and sizes go to stderr for the record.
 */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ipc_cmd.h"
#include "ipc_session.h"
#include "ipc_sockname.h"
#include "ipc_test_loop.h"
#include "log.h"
#include "proc.h"
#include "testenv.h"

/* The sessions this test file starts (ipc_session.h): counted until freed. */
static struct ipc_session_admission sessions;

struct rt {
    struct test_loop *tl;
    struct testenv env;
};

static int rt_setup(void **state)
{
    struct rt *rt = calloc(1, sizeof(*rt));
    void *tl = NULL;
    if (rt == NULL || tl_setup(&tl) != 0) {
        free(rt);
        return -1;
    }
    rt->tl = tl;
    if (testenv_init(&rt->env) != 0) {
        (void)tl_teardown(&tl);
        free(rt);
        return -1;
    }
    testenv_watchdog(240);
    *state = rt;
    return 0;
}

static int rt_teardown(void **state)
{
    struct rt *rt = *state;
    testenv_fini(&rt->env); /* the app goes first: any stream left sees EOF */
    void *tl = rt->tl;
    int rc = tl_teardown(&tl);
    testenv_watchdog(0);
    free(rt);
    return rc;
}

/* The app's diagnostic socket in the test's TMPDIR. */
static void app_socket(struct rt *rt, const struct test_app *app, char *out, size_t cap)
{
    DIR *d = opendir(rt->env.dir);
    assert_non_null(d);
    out[0] = '\0';
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        uint64_t pid = 0;
        uint64_t key = 0;
        if (ipc_sockname_parse(e->d_name, &pid, &key) == 0 && pid == (uint64_t)app->pid) {
            int n = snprintf(out, cap, "%s/%s", rt->env.dir, e->d_name);
            assert_true(n > 0 && (size_t)n < cap);
        }
    }
    closedir(d);
    assert_true(out[0] != '\0');
}

static struct test_app *start_app(struct rt *rt, char *path, size_t cap)
{
    static const char *const args[] = {"--heartbeat-ms", "200", NULL};
    struct test_app *app = NULL;
    assert_int_equal(testenv_start_app(&rt->env, args, NULL, &app), 0);
    app_socket(rt, app, path, cap);
    return app;
}

/* ---- recorder ---------------------------------------------------------------------------- */

struct rec {
    struct ipc_session *s;
    struct buf data; /* the whole stream */
    int started;
    uint64_t id;
    int version;
    int ended;
    int status;
    uint32_t hresult;
    int data_calls;
    uint64_t t_start;
    uint64_t t_started;
    uint64_t t_end;
    bool abort_in_started;
    bool abort_in_data;
    bool aborted;
    int calls_after_abort;
};

static void on_started(void *ud, uint64_t id, int version)
{
    struct rec *r = ud;
    r->calls_after_abort += r->aborted;
    r->started++;
    r->id = id;
    r->version = version;
    r->t_started = tl_ms();
    if (r->abort_in_started) {
        r->aborted = true;
        ipc_session_abort(r->s);
    }
}

static void on_data(void *ud, const uint8_t *p, size_t n)
{
    struct rec *r = ud;
    r->calls_after_abort += r->aborted;
    r->data_calls++;
    assert_int_equal(buf_append(&r->data, p, n), 0);
    if (r->abort_in_data) {
        r->aborted = true;
        ipc_session_abort(r->s);
    }
}

static void on_end(void *ud, int status, uint32_t hresult)
{
    struct rec *r = ud;
    r->calls_after_abort += r->aborted;
    r->ended++;
    r->status = status;
    r->hresult = hresult;
    r->t_end = tl_ms();
}

static const struct ipc_session_callbacks rec_cb = {on_started, on_data, on_end};

static void rec_start(struct rt *rt, struct rec *r, const char *path,
                      const struct ipc_collect_config *cfg)
{
    buf_fini(&r->data);
    memset(r, 0, sizeof(*r));
    buf_init(&r->data, (size_t)256 * 1024 * 1024);
    r->t_start = tl_ms();
    assert_int_equal(ipc_session_start(&rt->tl->loop, &sessions, IPC_ENDPOINT_PATH(path), cfg, 5000,
                                       &rec_cb, r, &r->s),
                     0);
}

static bool rec_started(void *ud)
{
    struct rec *r = ud;
    return r->started > 0 || r->ended > 0;
}

static bool rec_ended(void *ud)
{
    return ((struct rec *)ud)->ended > 0;
}

static bool no_live_sessions(void *ud)
{
    (void)ud;
    return sessions.live == 0;
}

static const struct ipc_provider gc_provider = {
    .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4};

/*
 * A provider nobody implements: its sessions never write after the preamble, so the runtime
 * cannot notice a closed stream by itself (ipc.md §5.4) and only StopTracing ends them.
 */
static const struct ipc_provider silent_provider = {
    .name = "Dotmon-Test-Silent", .keywords = 0x1, .level = 4};

/* ---- tests ------------------------------------------------------------------------------- */

struct gc_driver {
    struct test_app *app;
    int sent;
};

static void send_gc(uv_timer_t *t)
{
    struct gc_driver *g = t->data;
    if (proc_send_line(g->app->proc, "gc") == 0) {
        g->sent++;
    }
}

/*
 * GC events for ~2 s while the app collects, then a graceful stop: the stream is a nettrace
 * that starts with the magic and the FastSerialization header, carries the app's pid in the
 * Trace object and ends with the end tag, i.e. rundown finished and the runtime closed it.
 */
static void test_runtime_gc_trace(void **state)
{
    struct rt *rt = *state;
    char path[256];
    struct test_app *app = start_app(rt, path, sizeof(path));
    static struct rec r;
    struct ipc_collect_config cfg = {.buffer_mb = 64,
                                     .format = 1,
                                     .rundown_keyword = IPC_RUNDOWN_DEFAULT,
                                     .providers = &gc_provider,
                                     .provider_count = 1};
    rec_start(rt, &r, path, &cfg);
    assert_true(tl_run_until(rt->tl, rec_started, &r, 5000));
    assert_int_equal(r.ended, 0);
    assert_int_equal(r.started, 1);
    assert_int_equal(r.version, 5); /* .NET 10 knows CollectTracing5 */
    assert_true(r.id != 0);
    assert_int_equal(ipc_session_id(r.s), r.id);

    struct gc_driver g = {app, 0};
    uv_timer_t gc_timer;
    assert_int_equal(uv_timer_init(&rt->tl->loop, &gc_timer), 0);
    gc_timer.data = &g;
    assert_int_equal(uv_timer_start(&gc_timer, send_gc, 0, 200), 0);
    tl_run_for(rt->tl, 2000);
    uv_close((uv_handle_t *)&gc_timer, NULL);
    size_t before_stop = buf_size(&r.data);
    uint64_t t_stop = tl_ms();
    ipc_session_stop(r.s, 30000);
    assert_true(tl_run_until(rt->tl, rec_ended, &r, 15000));
    assert_int_equal(r.status, 0);

    const uint8_t *p = buf_data(&r.data);
    size_t n = buf_size(&r.data);
    fprintf(stderr,
            "[runtime] session 0x%llx v%d: on_started after %llu ms; %zu bytes in %d reads "
            "before stop (%d gc commands); stop -> end %llu ms; total %zu bytes, last 0x%02x\n",
            (unsigned long long)r.id, r.version, (unsigned long long)(r.t_started - r.t_start),
            before_stop, r.data_calls, g.sent, (unsigned long long)(r.t_end - t_stop), n,
            n > 0 ? p[n - 1] : 0);
    assert_true(g.sent >= 5);
    assert_true(n > 1000);
    assert_memory_equal(p, "Nettrace", 8);
    assert_memory_equal(p + 8, "\x14\x00\x00\x00!FastSerialization.1", 24);
    /* Trace object: begin, type (version 4, min 4, "Trace"), 48-byte payload (nettrace.md §2.3) */
    assert_memory_equal(
        p + 32, "\x05\x05\x01\x04\x00\x00\x00\x04\x00\x00\x00\x05\x00\x00\x00Trace\x06", 21);
    uint32_t pid = (uint32_t)p[53 + 36] | (uint32_t)p[53 + 37] << 8 | (uint32_t)p[53 + 38] << 16 |
                   (uint32_t)p[53 + 39] << 24;
    assert_int_equal(pid, (uint32_t)app->pid);
    assert_int_equal(p[101], 0x06);
    assert_int_equal(p[n - 1], 0x01); /* end-of-stream tag: a complete trace */
    assert_true(before_stop > 102);   /* events arrived while streaming, not only at rundown */
    assert_true(n > before_stop);     /* rundown came after the stop */
    assert_true(tl_run_until(rt->tl, no_live_sessions, NULL, 5000));
    buf_fini(&r.data);
}

/*
 * Abandoned sessions must not stay in the runtime, which holds at most 64 (ipc.md §5.6): after 20
 * sessions aborted at different points, 64 concurrent sessions must still be accepted (one
 * leaked session would make the 64th fail), the 65th is refused with DS_IPC_E_FAIL, and once
 * those are aborted a new session streams normally. The sessions enable a silent provider, so
 * nothing but our StopTracing can end them in the runtime.
 */
static void test_runtime_abort_leaves_nothing(void **state)
{
    enum { CYCLES = 20, LIMIT = 64 };
    struct rt *rt = *state;
    char path[256];
    (void)start_app(rt, path, sizeof(path));
    struct ipc_collect_config cfg = {
        .buffer_mb = 1, .format = 1, .providers = &silent_provider, .provider_count = 1};
    static struct rec r[LIMIT + 1];

    uint64_t t0 = tl_ms();
    int got_id = 0;
    for (int i = 0; i < CYCLES; i++) {
        struct rec *c = &r[0];
        rec_start(rt, c, path, &cfg);
        switch (i % 4) {
        case 0: /* still connecting: nothing was sent */
            c->aborted = true;
            ipc_session_abort(c->s);
            break;
        case 1: /* a few ms in: connecting, awaiting the reply or streaming */
            tl_run_for(rt->tl, (uint64_t)(i % 3));
            c->aborted = true;
            ipc_session_abort(c->s);
            break;
        case 2:
            c->abort_in_started = true;
            break;
        default:
            c->abort_in_data = true; /* the preamble is data too */
            break;
        }
        /*
         * Well inside the 10 s cleanup bound: an aborted session drains its stream until the
         * runtime closes it after our StopTracing; the bound must never be what ends it.
         */
        assert_true(tl_run_until(rt->tl, no_live_sessions, NULL, 5000));
        assert_int_equal(c->ended + c->calls_after_abort, 0);
        got_id += c->started;
    }
    uint64_t t_cycles = tl_ms() - t0;

    t0 = tl_ms();
    for (int i = 0; i < LIMIT; i++) {
        rec_start(rt, &r[i], path, &cfg);
    }
    for (int i = 0; i < LIMIT; i++) {
        assert_true(tl_run_until(rt->tl, rec_started, &r[i], 10000));
        if (r[i].ended) {
            fprintf(stderr, "[runtime] session %d of %d refused: %s, hresult 0x%08x\n", i + 1,
                    LIMIT, agent_strerror(r[i].status), r[i].hresult);
        }
        assert_int_equal(r[i].ended, 0);
        assert_int_equal(r[i].started, 1);
    }
    uint64_t t_64 = tl_ms() - t0;
    rec_start(rt, &r[LIMIT], path, &cfg);
    assert_true(tl_run_until(rt->tl, rec_ended, &r[LIMIT], 10000));
    assert_int_equal(r[LIMIT].status, AGENT_E_RUNTIME);
    assert_int_equal(r[LIMIT].hresult, IPC_HR_FAIL);

    t0 = tl_ms();
    for (int i = 0; i < LIMIT; i++) {
        ipc_session_abort(r[i].s);
    }
    assert_true(tl_run_until(rt->tl, no_live_sessions, NULL, 15000));
    uint64_t t_abort = tl_ms() - t0;

    /*
     * Observed with .NET 10.0.12 on a loaded machine: a CollectTracing that arrives within a few
     * hundred ms of 64 streaming sessions being torn down is sometimes closed by the runtime
     * without any reply (AGENT_E_CLOSED), although every StopTracing was already answered; the
     * next try works, and with a 500 ms pause it never happens. So one retry is allowed for that
     * status only. DS_IPC_E_FAIL here would mean a leaked session and fails at once.
     */
    struct rec *c = &r[0];
    cfg.providers = &gc_provider;
    rec_start(rt, c, path, &cfg);
    assert_true(tl_run_until(rt->tl, rec_started, c, 5000));
    if (c->ended) {
        fprintf(stderr, "[runtime] session after the aborts refused: %s, hresult 0x%08x\n",
                agent_strerror(c->status), c->hresult);
        assert_int_equal(c->status, AGENT_E_CLOSED);
        rec_start(rt, c, path, &cfg);
        assert_true(tl_run_until(rt->tl, rec_started, c, 5000));
    }
    assert_int_equal(c->started, 1);
    ipc_session_stop(c->s, 10000);
    assert_true(tl_run_until(rt->tl, rec_ended, c, 10000));
    assert_int_equal(c->status, 0);
    size_t n = buf_size(&c->data);
    assert_true(n > 102);
    assert_int_equal(buf_data(&c->data)[n - 1], 0x01);
    assert_true(tl_run_until(rt->tl, no_live_sessions, NULL, 5000));
    fprintf(stderr,
            "[runtime] %d start+abort cycles in %llu ms (%d had an id); %d concurrent sessions "
            "started in %llu ms, #%d refused with 0x%08x; aborting %d took %llu ms\n",
            CYCLES, (unsigned long long)t_cycles, got_id, LIMIT, (unsigned long long)t_64,
            LIMIT + 1, r[LIMIT].hresult, LIMIT, (unsigned long long)t_abort);
    for (int i = 0; i <= LIMIT; i++) {
        buf_fini(&r[i].data);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_runtime_gc_trace, rt_setup, rt_teardown),
        cmocka_unit_test_setup_teardown(test_runtime_abort_leaves_nothing, rt_setup, rt_teardown),
    };
    if (getenv("TEST_LOG_DEBUG") != NULL) {
        log_set_level(LOG_DEBUG);
    }
    if (getenv("TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
