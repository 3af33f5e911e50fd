/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "fake_runtime.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_test_loop.h"
#include "timebound.h"

/*
 * ipc_exchange against the scripted fake runtime, one private loop per test. Each test closes
 * what it opened; the fixture's teardown then asserts uv_loop_close() == 0.
 */

static const uint8_t test_cookie[16] = {0xe0, 0x04, 0x25, 0x3f, 0x89, 0x4f, 0xd3, 0x11,
                                        0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01};

static const char *const test_env[] = {"PATH=/usr/bin", "DOTNET_gcServer=1", "LANG=C.UTF-8", NULL};

struct outcome {
    int calls;
    int status;
    int ok;
    uint32_t hresult;
    uint8_t payload[4096];
    size_t payload_len;
    uint8_t continuation[4096];
    size_t continuation_len;
    bool had_continuation;
};

/* Copies the views out: they are only valid during the callback. */
static void on_result(void *ud, const struct ipc_result *res)
{
    struct outcome *o = ud;
    o->calls++;
    o->status = res->status;
    o->ok = res->ok;
    o->hresult = res->hresult;
    if (res->payload != NULL && res->payload_len <= sizeof(o->payload)) {
        memcpy(o->payload, res->payload, res->payload_len);
        o->payload_len = res->payload_len;
    }
    if (res->continuation != NULL && res->continuation_len <= sizeof(o->continuation)) {
        memcpy(o->continuation, res->continuation, res->continuation_len);
        o->continuation_len = res->continuation_len;
        o->had_continuation = true;
    }
}

static bool outcome_done(void *ud)
{
    return ((struct outcome *)ud)->calls > 0;
}

struct fixture {
    struct test_loop *tl;
    char dir[64];
    struct fake_runtime *fake;
    int fake_closed;
};

static void on_fake_closed(void *ud)
{
    ((struct fixture *)ud)->fake_closed++;
}

static bool fake_is_closed(void *ud)
{
    return ((struct fixture *)ud)->fake_closed > 0;
}

static void fixture_fake(struct fixture *fx, struct test_loop *tl, enum fake_mode mode,
                         int max_info, bool split)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    struct fake_runtime_config cfg = {.pid = 4242,
                                      .key = 99,
                                      .command_line = "/x/y/TestApp arg",
                                      .os = "Linux",
                                      .arch = "x64",
                                      .assembly = "TestApp",
                                      .clr_version = "10.0.12",
                                      .rid = "linux-x64",
                                      .max_info = max_info,
                                      .mode = mode,
                                      .split_writes = split,
                                      .env = test_env};
    memcpy(cfg.cookie, test_cookie, 16);
    assert_int_equal(fake_runtime_start(&tl->loop, fx->dir, &cfg, &fx->fake), 0);
}

static void fixture_done(struct fixture *fx)
{
    if (fx->fake != NULL) {
        fake_runtime_close(fx->fake, on_fake_closed, fx);
        assert_true(tl_run_until(fx->tl, fake_is_closed, fx, 2000));
    }
    fake_rmdir(fx->dir);
}

static size_t build(int (*builder)(struct ipc_wr *), uint8_t *out)
{
    struct ipc_wr w;
    ipc_wr_init(&w, out, IPC_HEADER_SIZE);
    assert_int_equal(builder(&w), 0);
    return w.len;
}

/* Starts an exchange, checks the callback is not synchronous, and waits for it. */
static void exchange(struct fixture *fx, int (*builder)(struct ipc_wr *),
                     enum ipc_exchange_kind kind, uint64_t timeout_ms, size_t max_reply,
                     struct outcome *o)
{
    uint8_t req[IPC_HEADER_SIZE];
    size_t len = build(builder, req);
    memset(o, 0, sizeof(*o));
    struct ipc_exchange *x = NULL;
    assert_int_equal(ipc_exchange_start(&fx->tl->loop,
                                        IPC_ENDPOINT_PATH(fake_runtime_path(fx->fake)), req, len,
                                        kind, timeout_ms, max_reply, on_result, o, &x),
                     0);
    assert_non_null(x);
    assert_int_equal(o->calls, 0); /* never from inside start */
    assert_true(tl_run_until(fx->tl, outcome_done, o, 5000));
    tl_run_for(fx->tl, 20); /* a second callback would show up here */
    assert_int_equal(o->calls, 1);
}

static void check_info3_payload(const struct outcome *o)
{
    struct ipc_process_info pi;
    assert_int_equal(ipc_process_info_parse(o->payload, o->payload_len, 3, &pi), 0);
    assert_int_equal(pi.pid, 4242);
    assert_memory_equal(pi.cookie, test_cookie, 16);
    char s[128];
    assert_int_equal(ipc_utf16_to_utf8(&pi.command_line, s, sizeof(s), NULL), 0);
    assert_string_equal(s, "/x/y/TestApp arg");
    assert_int_equal(ipc_utf16_to_utf8(&pi.runtime_identifier, s, sizeof(s), NULL), 0);
    assert_string_equal(s, "linux-x64");
}

static void test_client_process_info3(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_NORMAL, 3, false);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_info3, IPC_EXCHANGE_SIMPLE, 2000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.ok, 1);
    check_info3_payload(&o);
    assert_false(o.had_continuation);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x04, 0x08), 1);
    fixture_done(&fx);
}

static void test_client_split_writes(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_NORMAL, 3, true);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_info3, IPC_EXCHANGE_SIMPLE, 3000, 0, &o);
    assert_int_equal(o.status, 0);
    check_info3_payload(&o);
    /* ...and the environment, whose continuation also arrives a byte at a time */
    exchange(&fx, ipc_cmd_process_env, IPC_EXCHANGE_ENVIRONMENT, 3000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_true(o.had_continuation);
    fixture_done(&fx);
}

struct env_list {
    int n;
    char line[8][64];
};

static int env_entry(void *ud, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    struct env_list *l = ud;
    (void)name_len;
    (void)value_len;
    assert_true(l->n < 8);
    (void)snprintf(l->line[l->n++], sizeof(l->line[0]), "%s=%s", name, value);
    return 0;
}

static void test_client_environment(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_NORMAL, 3, false);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_env, IPC_EXCHANGE_ENVIRONMENT, 2000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.ok, 1);
    assert_int_equal(o.payload_len, 6);
    uint32_t incoming = 0;
    assert_int_equal(ipc_env_reply_parse(o.payload, o.payload_len, &incoming), 0);
    assert_true(o.had_continuation);
    assert_int_equal(o.continuation_len, incoming);
    char scratch[256];
    struct env_list l = {0};
    assert_int_equal(
        ipc_env_parse(o.continuation, o.continuation_len, scratch, sizeof(scratch), env_entry, &l),
        0);
    assert_int_equal(l.n, 3);
    assert_string_equal(l.line[0], "PATH=/usr/bin");
    assert_string_equal(l.line[1], "DOTNET_gcServer=1");
    assert_string_equal(l.line[2], "LANG=C.UTF-8");

    /* The continuation counts against max_reply: 26 + incoming must fit. */
    exchange(&fx, ipc_cmd_process_env, IPC_EXCHANGE_ENVIRONMENT, 2000, 26 + incoming, &o);
    assert_int_equal(o.status, 0);
    exchange(&fx, ipc_cmd_process_env, IPC_EXCHANGE_ENVIRONMENT, 2000, 26 + incoming - 1, &o);
    assert_int_equal(o.status, AGENT_E_TOOBIG);
    fixture_done(&fx);
}

static void test_client_error_replies(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_NORMAL, 1, false);
    struct outcome o;
    /* a runtime without ProcessInfo3 */
    exchange(&fx, ipc_cmd_process_info3, IPC_EXCHANGE_SIMPLE, 2000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.ok, 0);
    assert_int_equal(o.hresult, IPC_HR_UNKNOWN_COMMAND);
    /* an Error reply ends an environment exchange too: there is no continuation */
    exchange(&fx, ipc_cmd_process_info2, IPC_EXCHANGE_ENVIRONMENT, 2000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.ok, 0);
    assert_false(o.had_continuation);
    /* OK + int32 */
    exchange(&fx, ipc_cmd_resume_runtime, IPC_EXCHANGE_SIMPLE, 2000, 0, &o);
    assert_int_equal(o.status, 0);
    assert_int_equal(o.ok, 1);
    assert_int_equal(o.hresult, 0);
    assert_int_equal(o.payload_len, 4);
    fixture_done(&fx);
}

static void test_client_garbage(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_GARBAGE, 3, false);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_info, IPC_EXCHANGE_SIMPLE, 2000, 0, &o);
    assert_int_equal(o.status, AGENT_E_PROTO);
    assert_int_equal(o.ok, 0);
    fixture_done(&fx);
}

static void test_client_oversized(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_OVERSIZED, 3, false);
    struct outcome o;
    /* The header announces 65535 bytes; the 4 KiB cap rejects it from the header alone. */
    uint64_t t0 = tl_ms();
    exchange(&fx, ipc_cmd_process_info, IPC_EXCHANGE_SIMPLE, 3000, 4096, &o);
    assert_int_equal(o.status, AGENT_E_TOOBIG);
    ASSERT_BELOW_MS(tl_ms() - t0, 1000); /* not a timeout */
    fixture_done(&fx);
}

static void test_client_huge_continuation(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_HUGE_ENV, 3, false);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_env, IPC_EXCHANGE_ENVIRONMENT, 3000, 0, &o);
    assert_int_equal(o.status, AGENT_E_TOOBIG);
    fixture_done(&fx);
}

static void test_client_truncated(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_TRUNCATED, 3, false);
    struct outcome o;
    exchange(&fx, ipc_cmd_process_info, IPC_EXCHANGE_SIMPLE, 3000, 0, &o);
    assert_int_equal(o.status, AGENT_E_CLOSED);
    fixture_done(&fx);
}

static void test_client_timeout(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_SILENT, 3, false);
    struct outcome o;
    uint64_t t0 = tl_ms();
    exchange(&fx, ipc_cmd_process_info, IPC_EXCHANGE_SIMPLE, 200, 0, &o);
    uint64_t took = tl_ms() - t0;
    assert_int_equal(o.status, AGENT_E_TIMEOUT);
    assert_true(took >= 190);
    ASSERT_BELOW_MS(took, 1500);
    /* the fake did get the complete request: the runtime's thread is not left blocked */
    assert_int_equal(fake_runtime_requests(fx.fake, 0x04, 0x00), 1);
    fixture_done(&fx);
}

static void test_client_refused_and_missing(void **state)
{
    struct test_loop *tl = *state;
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    char stale[128];
    assert_int_equal(fake_stale_socket(dir, 77, 1, stale, sizeof(stale)), 0);
    uint8_t req[IPC_HEADER_SIZE];
    size_t len = build(ipc_cmd_process_info, req);
    struct outcome o;

    memset(&o, 0, sizeof(o));
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH(stale), req, len,
                                        IPC_EXCHANGE_SIMPLE, 2000, 0, on_result, &o, NULL),
                     0);
    assert_int_equal(o.calls, 0);
    assert_true(tl_run_until(tl, outcome_done, &o, 2000));
    assert_int_equal(o.status, UV_ECONNREFUSED);

    char missing[160];
    assert_true(snprintf(missing, sizeof(missing), "%s/dotnet-diagnostic-1-1-socket", dir) > 0);
    memset(&o, 0, sizeof(o));
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH(missing), req, len,
                                        IPC_EXCHANGE_SIMPLE, 2000, 0, on_result, &o, NULL),
                     0);
    assert_int_equal(o.calls, 0);
    assert_true(tl_run_until(tl, outcome_done, &o, 2000));
    assert_int_equal(o.status, UV_ENOENT);
    fake_rmdir(dir);
}

static void test_client_bad_arguments(void **state)
{
    struct test_loop *tl = *state;
    uint8_t req[IPC_HEADER_SIZE];
    size_t len = build(ipc_cmd_process_info, req);
    struct outcome o;
    memset(&o, 0, sizeof(o));
    char long_path[200];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH(long_path), req, len,
                                        IPC_EXCHANGE_SIMPLE, 100, 0, on_result, &o, NULL),
                     UV_ENAMETOOLONG);
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), req, 19,
                                        IPC_EXCHANGE_SIMPLE, 100, 0, on_result, &o, NULL),
                     AGENT_E_INVAL);
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), req, len,
                                        IPC_EXCHANGE_SIMPLE, 100, 19, on_result, &o, NULL),
                     AGENT_E_INVAL);
    assert_int_equal(ipc_exchange_start(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), req, len,
                                        IPC_EXCHANGE_SIMPLE, 100, 0, NULL, &o, NULL),
                     AGENT_E_INVAL);
    tl_run_for(tl, 20);
    assert_int_equal(o.calls, 0); /* a failed start never calls back */
}

static void test_client_cancel(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_SILENT, 3, false);
    uint8_t req[IPC_HEADER_SIZE];
    size_t len = build(ipc_cmd_process_info, req);
    struct outcome o;
    memset(&o, 0, sizeof(o));

    /* cancelled before the connect completed */
    struct ipc_exchange *x = NULL;
    assert_int_equal(ipc_exchange_start(&fx.tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)),
                                        req, len, IPC_EXCHANGE_SIMPLE, 300, 0, on_result, &o, &x),
                     0);
    ipc_exchange_cancel(x);
    /* cancelled while waiting for the reply */
    assert_int_equal(ipc_exchange_start(&fx.tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)),
                                        req, len, IPC_EXCHANGE_SIMPLE, 300, 0, on_result, &o, &x),
                     0);
    tl_run_for(fx.tl, 50);
    ipc_exchange_cancel(x);
    ipc_exchange_cancel(NULL);
    tl_run_for(fx.tl, 500); /* past the timeout: still no callback */
    assert_int_equal(o.calls, 0);
    fixture_done(&fx);
}

static void test_client_many_in_parallel(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, FAKE_NORMAL, 3, false);
    uint8_t req[IPC_HEADER_SIZE];
    size_t len = build(ipc_cmd_process_info3, req);
    enum { N = 32 };
    static struct outcome os[N];
    memset(os, 0, sizeof(os));
    for (int i = 0; i < N; i++) {
        assert_int_equal(ipc_exchange_start(&fx.tl->loop,
                                            IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)), req, len,
                                            IPC_EXCHANGE_SIMPLE, 3000, 0, on_result, &os[i], NULL),
                         0);
    }
    for (int i = 0; i < N; i++) {
        assert_true(tl_run_until(fx.tl, outcome_done, &os[i], 5000));
        assert_int_equal(os[i].status, 0);
        check_info3_payload(&os[i]);
    }
    assert_int_equal(fake_runtime_connections(fx.fake), N);
    fixture_done(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_client_process_info3, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_split_writes, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_environment, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_error_replies, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_garbage, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_oversized, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_huge_continuation, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_truncated, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_timeout, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_refused_and_missing, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_bad_arguments, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_cancel, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_client_many_in_parallel, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
