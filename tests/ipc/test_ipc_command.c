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
#include "ipc_internal.h"
#include "ipc_test_loop.h"

/*
 * The command-level calls of ipc/ (ipc_dump_request, ipc_env_request, the internal ProcessInfo
 * probe) against the scripted fake runtime, and for a malformed environment block against a raw
 * socket that answers bytes written here by hand.
 */

static const char *const test_env[] = {"PATH=/usr/bin", "DOTNET_gcServer=1", "NOVALUE",
                                       "LANG=C.UTF-8", NULL};

struct fixture {
    struct test_loop *tl;
    char dir[64];
    struct fake_runtime *fake;
};

static void fixture_start(struct fixture *fx, struct test_loop *tl, int max_info,
                          const struct fake_dump_config *dump)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, 4242, 99, 0xab, "/x/y/TestApp arg", "TestApp");
    cfg.max_info = max_info;
    cfg.env = test_env;
    if (dump != NULL) {
        cfg.dump = *dump;
    }
    assert_int_equal(fake_runtime_start(&tl->loop, fx->dir, &cfg, &fx->fake), 0);
}

static void fixture_done(struct fixture *fx)
{
    tl_close_fake(fx->tl, fx->fake);
    fake_rmdir(fx->dir);
}

/* ---- GenerateCoreDump ------------------------------------------------------------------------ */

struct dump_outcome {
    int calls;
    struct ipc_dump_result res;
    char message[256];
    int retries_asked;
    int refuse_below; /* the retry callback says no to versions below this one */
};

static void on_dump(void *ud, const struct ipc_dump_result *res)
{
    struct dump_outcome *o = ud;
    o->calls++;
    o->res = *res;
    snprintf(o->message, sizeof(o->message), "%s", res->message);
    o->res.message = o->message;
}

static bool on_dump_retry(void *ud, int next_version)
{
    struct dump_outcome *o = ud;
    o->retries_asked++;
    return next_version >= o->refuse_below;
}

static bool dump_done(void *ud)
{
    return ((struct dump_outcome *)ud)->calls > 0;
}

/* One dump request against a fake answering with dump config `dc`; the outcome in *o. */
static void run_dump(struct test_loop *tl, const struct fake_dump_config *dc, int refuse_below,
                     uint64_t timeout_ms, struct dump_outcome *o, struct fake_dump_info *info)
{
    struct fixture fx;
    fixture_start(&fx, tl, 3, dc);
    char path[128];
    snprintf(path, sizeof(path), "%s/core.dmp", fx.dir);
    memset(o, 0, sizeof(*o));
    o->refuse_below = refuse_below;
    struct ipc_dump_params p = {.path = path,
                                .type = IPC_DUMP_TYPE_WITH_HEAP,
                                .flags = 0,
                                .timeout_ms = timeout_ms,
                                .retry = on_dump_retry};
    assert_int_equal(ipc_dump_request(&tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)), &p,
                                      on_dump, o, NULL),
                     0);
    assert_true(tl_run_until(tl, dump_done, o, 5000));
    tl_run_for(tl, 20);
    assert_int_equal(o->calls, 1);
    fake_runtime_dump_info(fx.fake, info);
    if (info->requests > 0) {
        assert_string_equal(info->path, path);
        assert_int_equal(info->type, IPC_DUMP_TYPE_WITH_HEAP);
    }
    fixture_done(&fx);
}

static void test_dump_fallback_ok(void **state)
{
    struct dump_outcome o;
    struct fake_dump_info info;
    for (int first_known = 3; first_known >= 1; first_known--) {
        struct fake_dump_config dc = {.fault = FAKE_DUMP_OK, .file_bytes = 4096};
        for (int v = first_known + 1; v <= 3; v++) {
            dc.unknown_versions |= 1u << v;
        }
        run_dump(*state, &dc, 1, 3000, &o, &info);
        assert_int_equal(o.res.status, 0);
        assert_int_equal(o.res.ok, 1);
        assert_int_equal(o.res.version, first_known);
        assert_string_equal(o.res.message, "");
        assert_int_equal(o.retries_asked, 3 - first_known);
        assert_int_equal(info.requests, 1);
        assert_int_equal(info.version, first_known);
        assert_int_equal(info.files, 1);
    }
}

static void test_dump_fallback_unsupported(void **state)
{
    struct dump_outcome o;
    struct fake_dump_info info;
    struct fake_dump_config dc = {.fault = FAKE_DUMP_UNSUPPORTED};
    run_dump(*state, &dc, 1, 3000, &o, &info);
    assert_int_equal(o.res.status, 0);
    assert_int_equal(o.res.ok, 0);
    assert_int_equal(o.res.hresult, IPC_HR_UNKNOWN_COMMAND);
    assert_int_equal(o.res.version, 1);
    assert_int_equal(o.retries_asked, 2);
    assert_string_equal(ipc_hresult_text(o.res.hresult), "DS_IPC_E_UNKNOWN_COMMAND");

    /* The caller stops the fallback: the UNKNOWN_COMMAND of the version it refused to leave. */
    run_dump(*state, &dc, 3, 3000, &o, &info);
    assert_int_equal(o.res.ok, 0);
    assert_int_equal(o.res.hresult, IPC_HR_UNKNOWN_COMMAND);
    assert_int_equal(o.res.version, 3);
    assert_int_equal(o.retries_asked, 1);
}

static void test_dump_error_replies(void **state)
{
    struct dump_outcome o;
    struct fake_dump_info info;
    /* GenerateCoreDump3: the runtime's text, on one line, trailing blanks trimmed. */
    struct fake_dump_config dc = {.fault = FAKE_DUMP_ERROR,
                                  .error_hresult = IPC_HR_FAIL,
                                  .error_message = "createdump failed\nerrno 13\r\n"};
    run_dump(*state, &dc, 1, 3000, &o, &info);
    assert_int_equal(o.res.status, 0);
    assert_int_equal(o.res.ok, 0);
    assert_int_equal(o.res.hresult, IPC_HR_FAIL);
    assert_int_equal(o.res.version, 3);
    assert_string_equal(o.res.message, "createdump failed errno 13");

    /* An absent message */
    dc.error_message = NULL;
    run_dump(*state, &dc, 1, 3000, &o, &info);
    assert_int_equal(o.res.ok, 0);
    assert_string_equal(o.res.message, "");

    /* GenerateCoreDump2 and 1 carry no message. */
    dc.error_message = "ignored";
    dc.unknown_versions = 1u << 3;
    run_dump(*state, &dc, 1, 3000, &o, &info);
    assert_int_equal(o.res.ok, 0);
    assert_int_equal(o.res.hresult, IPC_HR_FAIL);
    assert_int_equal(o.res.version, 2);
    assert_string_equal(o.res.message, "");
    dc.unknown_versions = (1u << 3) | (1u << 2);
    run_dump(*state, &dc, 1, 3000, &o, &info);
    assert_int_equal(o.res.version, 1);
    assert_int_equal(o.res.hresult, IPC_HR_FAIL);
}

static void test_dump_timeout_and_cancel(void **state)
{
    struct test_loop *tl = *state;
    struct dump_outcome o;
    struct fake_dump_info info;
    struct fake_dump_config dc = {.fault = FAKE_DUMP_SILENT};
    run_dump(tl, &dc, 1, 200, &o, &info);
    assert_int_equal(o.res.status, AGENT_E_TIMEOUT);
    assert_int_equal(o.res.ok, 0);
    assert_int_equal(o.res.version, 3);

    struct fixture fx;
    fixture_start(&fx, tl, 3, &dc);
    memset(&o, 0, sizeof(o));
    struct ipc_dump_params p = {.path = "/tmp/never.dmp", .type = IPC_DUMP_TYPE_FULL};
    struct ipc_dump *d = NULL;
    assert_int_equal(ipc_dump_request(&tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)), &p,
                                      on_dump, &o, &d),
                     0);
    tl_run_for(tl, 50);
    ipc_dump_cancel(d);
    ipc_dump_cancel(NULL);
    tl_run_for(tl, 50);
    assert_int_equal(o.calls, 0);
    fixture_done(&fx);

    /* Arguments the builder refuses: nothing starts. */
    struct ipc_dump_params bad = {.path = "", .type = IPC_DUMP_TYPE_FULL};
    assert_int_equal(
        ipc_dump_request(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), &bad, on_dump, &o, NULL),
        AGENT_E_INVAL);
    bad.path = "/tmp/x.dmp";
    bad.type = (enum ipc_dump_type)7;
    assert_int_equal(
        ipc_dump_request(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), &bad, on_dump, &o, NULL),
        AGENT_E_INVAL);
    /* A path whose message is over 64 KiB: refused, not truncated. */
    char *longpath = malloc(40000);
    assert_non_null(longpath);
    memset(longpath, 'a', 39999);
    longpath[0] = '/';
    longpath[39999] = '\0';
    bad.path = longpath;
    bad.type = IPC_DUMP_TYPE_FULL;
    assert_int_equal(
        ipc_dump_request(&tl->loop, IPC_ENDPOINT_PATH("/tmp/x"), &bad, on_dump, &o, NULL),
        AGENT_E_TOOBIG);
    free(longpath);
    assert_int_equal(o.calls, 0);
}

/* ---- ProcessEnvironment ---------------------------------------------------------------------- */

struct env_outcome {
    int calls;
    struct ipc_env_result res;
    char lines[8][64];
    int n;
    int stop_after; /* the entry callback returns -1 at this entry (0: never) */
};

static int on_env_var(void *ud, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    struct env_outcome *o = ud;
    assert_int_equal(strlen(name), name_len);
    assert_int_equal(strlen(value), value_len);
    if (o->n < 8) {
        snprintf(o->lines[o->n], sizeof(o->lines[0]), "%s|%s", name, value);
    }
    o->n++;
    return o->stop_after != 0 && o->n == o->stop_after ? -1 : 0;
}

static void on_env_done(void *ud, const struct ipc_env_result *res)
{
    struct env_outcome *o = ud;
    o->calls++;
    o->res = *res;
}

static bool env_done(void *ud)
{
    return ((struct env_outcome *)ud)->calls > 0;
}

static void run_env(struct test_loop *tl, const char *path, size_t max_reply, struct env_outcome *o)
{
    int stop_after = o->stop_after;
    memset(o, 0, sizeof(*o));
    o->stop_after = stop_after;
    assert_int_equal(ipc_env_request(&tl->loop, IPC_ENDPOINT_PATH(path), 2000, max_reply,
                                     on_env_var, on_env_done, o, NULL),
                     0);
    assert_true(tl_run_until(tl, env_done, o, 5000));
    tl_run_for(tl, 10);
    assert_int_equal(o->calls, 1);
}

static void test_env_normal(void **state)
{
    struct fixture fx;
    fixture_start(&fx, *state, 3, NULL);
    struct env_outcome o = {0};
    run_env(fx.tl, fake_runtime_path(fx.fake), 0, &o);
    assert_int_equal(o.res.status, 0);
    assert_int_equal(o.res.ok, 1);
    assert_int_equal(o.res.block_status, 0);
    assert_int_equal(o.n, 4);
    assert_string_equal(o.lines[0], "PATH|/usr/bin");
    assert_string_equal(o.lines[1], "DOTNET_gcServer|1");
    assert_string_equal(o.lines[2], "NOVALUE|");
    assert_string_equal(o.lines[3], "LANG|C.UTF-8");

    /* The entry callback stops the walk: its code comes back. */
    o.stop_after = 2;
    run_env(fx.tl, fake_runtime_path(fx.fake), 0, &o);
    assert_int_equal(o.res.block_status, -1);
    assert_int_equal(o.n, 2);

    /* A block bigger than max_reply: refused before it is read, no entry delivered. */
    run_env(fx.tl, fake_runtime_path(fx.fake), 30, &o);
    assert_int_equal(o.res.status, AGENT_E_TOOBIG);
    assert_int_equal(o.n, 0);
    fixture_done(&fx);
}

static void test_env_too_big(void **state)
{
    struct test_loop *tl = *state;
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, 4243, 1, 0xcd, "/x/App", "App");
    cfg.mode = FAKE_HUGE_ENV;
    struct fake_runtime *f = NULL;
    assert_int_equal(fake_runtime_start(&tl->loop, dir, &cfg, &f), 0);
    struct env_outcome o = {0};
    run_env(tl, fake_runtime_path(f), 4096, &o);
    assert_int_equal(o.res.status, AGENT_E_TOOBIG);
    assert_int_equal(o.n, 0);
    tl_close_fake(tl, f);
    fake_rmdir(dir);
}

/* A one-shot server that answers whatever comes with `reply`, then closes. */
struct raw_server {
    uv_pipe_t server;
    uv_pipe_t conn;
    bool conn_open;
    uint8_t reply[64];
    size_t reply_len;
    uv_write_t wr;
    int closed;
};

static void raw_on_close(uv_handle_t *h)
{
    struct raw_server *r = h->data;
    r->closed++;
}

static void raw_on_write(uv_write_t *w, int status)
{
    struct raw_server *r = w->data;
    (void)status;
    uv_close((uv_handle_t *)&r->conn, raw_on_close);
}

static void raw_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    static char sink[256];
    (void)h;
    (void)suggested;
    *b = uv_buf_init(sink, sizeof(sink));
}

static void raw_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct raw_server *r = s->data;
    (void)b;
    if (nread <= 0) {
        return;
    }
    uv_read_stop(s);
    uv_buf_t out = uv_buf_init((char *)r->reply, (unsigned int)r->reply_len);
    r->wr.data = r;
    assert_int_equal(uv_write(&r->wr, s, &out, 1, raw_on_write), 0);
}

static void raw_on_connection(uv_stream_t *s, int status)
{
    struct raw_server *r = s->data;
    assert_int_equal(status, 0);
    assert_false(r->conn_open);
    uv_pipe_init(s->loop, &r->conn, 0);
    r->conn.data = r;
    r->conn_open = true;
    assert_int_equal(uv_accept(s, (uv_stream_t *)&r->conn), 0);
    uv_read_start((uv_stream_t *)&r->conn, raw_on_alloc, raw_on_read);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static bool raw_all_closed(void *ud)
{
    struct raw_server *r = ud;
    return r->closed == (r->conn_open ? 2 : 1);
}

static void raw_start(struct test_loop *tl, struct raw_server *r, const char *path,
                      const uint8_t *reply, size_t len)
{
    memset(r, 0, sizeof(*r));
    assert_true(len <= sizeof(r->reply));
    memcpy(r->reply, reply, len);
    r->reply_len = len;
    assert_int_equal(uv_pipe_init(&tl->loop, &r->server, 0), 0);
    r->server.data = r->conn.data = r;
    assert_int_equal(uv_pipe_bind(&r->server, path), 0);
    assert_int_equal(uv_listen((uv_stream_t *)&r->server, 4, raw_on_connection), 0);
}

static void raw_stop(struct test_loop *tl, struct raw_server *r)
{
    uv_close((uv_handle_t *)&r->server, raw_on_close);
    assert_true(tl_run_until(tl, raw_all_closed, r, 2000));
}

/* A Server/OK header for a payload of n bytes. */
static void ok_header(uint8_t *p, size_t n)
{
    memset(p, 0, 20);
    memcpy(p, "DOTNET_IPC_V1", 14);
    p[14] = (uint8_t)(20 + n);
    p[15] = (uint8_t)((20 + n) >> 8);
    p[16] = 0xFF; /* Server */
    p[17] = 0x00; /* OK */
}

static void test_env_malformed(void **state)
{
    struct test_loop *tl = *state;
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    char path[128];
    snprintf(path, sizeof(path), "%s/raw.sock", dir);

    /* OK + nIncomingBytes 16, then a block that says 2 entries but holds one ("A=1"). */
    uint8_t reply[26 + 16];
    memset(reply, 0, sizeof(reply));
    ok_header(reply, 6);
    put32(reply + 20, 16);
    put32(reply + 26, 2);
    put32(reply + 30, 4);
    reply[34] = 'A';
    reply[36] = '=';
    reply[38] = '1';

    struct raw_server r;
    raw_start(tl, &r, path, reply, sizeof(reply));

    struct env_outcome o = {0};
    run_env(tl, path, 0, &o);
    assert_int_equal(o.res.status, 0);
    assert_int_equal(o.res.ok, 1);
    assert_int_equal(o.res.block_status, AGENT_E_TRUNC);
    assert_int_equal(o.n, 0); /* nothing of a corrupt block is delivered */

    raw_stop(tl, &r);
    fake_rmdir(dir);
}

static void test_env_cancel(void **state)
{
    struct test_loop *tl = *state;
    struct fixture fx;
    fixture_start(&fx, tl, 3, NULL);
    struct env_outcome o = {0};
    struct ipc_env *e = NULL;
    assert_int_equal(ipc_env_request(&tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)), 2000,
                                     0, on_env_var, on_env_done, &o, &e),
                     0);
    ipc_env_cancel(e);
    ipc_env_cancel(NULL);
    tl_run_for(tl, 100);
    assert_int_equal(o.calls, 0);
    fixture_done(&fx);
}

/* ---- ProcessInfo probe ----------------------------------------------------------------------- */

struct probe_outcome {
    int calls;
    struct ipc__probe_result res;
    uint64_t pid;
    bool has_info;
    char cmdline[64];
};

static void on_probe(void *ud, const struct ipc__probe_result *res)
{
    struct probe_outcome *o = ud;
    o->calls++;
    o->res = *res;
    o->res.info = NULL;
    o->has_info = res->info != NULL;
    if (res->info != NULL) {
        o->pid = res->info->pid;
        assert_int_equal(
            ipc_utf16_to_utf8(&res->info->command_line, o->cmdline, sizeof(o->cmdline), NULL), 0);
    }
}

static bool probe_done(void *ud)
{
    return ((struct probe_outcome *)ud)->calls > 0;
}

static void run_probe(struct test_loop *tl, const char *path, int level, bool fallback,
                      struct probe_outcome *o)
{
    memset(o, 0, sizeof(*o));
    assert_int_equal(ipc__probe_start(&tl->loop, IPC_ENDPOINT_PATH(path), level, fallback, 2000,
                                      on_probe, o, NULL),
                     0);
    assert_true(tl_run_until(tl, probe_done, o, 5000));
    tl_run_for(tl, 10);
    assert_int_equal(o->calls, 1);
}

static void test_probe_fallback(void **state)
{
    for (int max_info = 3; max_info >= 1; max_info--) {
        struct fixture fx;
        fixture_start(&fx, *state, max_info, NULL);
        struct probe_outcome o;
        run_probe(fx.tl, fake_runtime_path(fx.fake), 3, true, &o);
        assert_int_equal(o.res.status, 0);
        assert_int_equal(o.res.ok, 1);
        assert_int_equal(o.res.level, max_info);
        assert_int_equal(o.res.parse_status, 0);
        assert_true(o.has_info);
        assert_int_equal(o.pid, 4242);
        assert_string_equal(o.cmdline, "/x/y/TestApp arg");
        /* Each version asked once, newest first, on its own connection. */
        assert_int_equal(fake_runtime_requests(fx.fake, IPC_SET_PROCESS, IPC_PROCESS_INFO3), 1);
        assert_int_equal(fake_runtime_requests(fx.fake, IPC_SET_PROCESS, IPC_PROCESS_INFO2),
                         max_info <= 2 ? 1 : 0);
        assert_int_equal(fake_runtime_requests(fx.fake, IPC_SET_PROCESS, IPC_PROCESS_INFO),
                         max_info == 1 ? 1 : 0);
        assert_int_equal(fake_runtime_connections(fx.fake), 4 - max_info);

        /* Without fallback: the UNKNOWN_COMMAND of the version asked. */
        if (max_info < 3) {
            run_probe(fx.tl, fake_runtime_path(fx.fake), 3, false, &o);
            assert_int_equal(o.res.status, 0);
            assert_int_equal(o.res.ok, 0);
            assert_int_equal(o.res.hresult, IPC_HR_UNKNOWN_COMMAND);
            assert_int_equal(o.res.level, 3);
            assert_false(o.has_info);
        }
        /* Starting lower (a liveness check): one request. */
        run_probe(fx.tl, fake_runtime_path(fx.fake), 1, false, &o);
        assert_int_equal(o.res.level, 1);
        assert_true(o.has_info);
        fixture_done(&fx);
    }
}

static void test_probe_failures(void **state)
{
    struct test_loop *tl = *state;
    struct fixture fx;
    fixture_start(&fx, tl, 3, NULL);
    /* A reply cut short: the exchange's status, no step down. */
    struct fake_fault ff = {
        .kind = FAKE_FAULT_TRUNCATED, .command_set = IPC_SET_PROCESS, .command_id = FAKE_ANY_ID};
    assert_int_equal(fake_runtime_set_fault(fx.fake, 0, &ff), 0);
    struct probe_outcome o;
    run_probe(fx.tl, fake_runtime_path(fx.fake), 3, true, &o);
    assert_int_equal(o.res.status, AGENT_E_CLOSED);
    assert_false(o.has_info);
    assert_int_equal(fake_runtime_requests(fx.fake, IPC_SET_PROCESS, IPC_PROCESS_INFO2), 0);
    assert_int_equal(fake_runtime_set_fault(fx.fake, 0, NULL), 0);

    /* Abort: the callback still comes, once, with UV_ECANCELED. */
    memset(&o, 0, sizeof(o));
    struct ipc__probe *p = NULL;
    assert_int_equal(ipc__probe_start(&tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)), 3,
                                      true, 2000, on_probe, &o, &p),
                     0);
    ipc__probe_abort(p);
    assert_true(tl_run_until(tl, probe_done, &o, 2000));
    tl_run_for(tl, 20);
    assert_int_equal(o.calls, 1);
    assert_int_equal(o.res.status, UV_ECANCELED);
    fixture_done(&fx);

    /* Nobody listens. */
    char path[128];
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    snprintf(path, sizeof(path), "%s/none.sock", dir);
    run_probe(tl, path, 3, true, &o);
    assert_int_equal(o.res.status, UV_ENOENT);
    assert_int_equal(
        ipc__probe_start(&tl->loop, IPC_ENDPOINT_PATH(path), 4, true, 2000, on_probe, &o, NULL),
        AGENT_E_INVAL);

    /* An OK reply whose payload is no ProcessInfo3: status 0, ok, the parser's error. */
    uint8_t reply[24];
    ok_header(reply, 4);
    put32(reply + 20, 7);
    struct raw_server r;
    raw_start(tl, &r, path, reply, sizeof(reply));
    run_probe(tl, path, 3, true, &o);
    assert_int_equal(o.res.status, 0);
    assert_int_equal(o.res.ok, 1);
    assert_int_equal(o.res.level, 3);
    assert_true(o.res.parse_status < 0);
    assert_false(o.has_info);
    raw_stop(tl, &r);
    fake_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_dump_fallback_ok, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_dump_fallback_unsupported, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_dump_error_replies, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_dump_timeout_and_cancel, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_env_normal, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_env_too_big, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_env_malformed, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_env_cancel, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_probe_fallback, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_probe_failures, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
