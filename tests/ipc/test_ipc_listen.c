/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "fake_runtime.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_discovery.h"
#include "ipc_internal.h"
#include "ipc_listen.h"
#include "ipc_session.h"
#include "ipc_test_loop.h"
#include "timebound.h"

/* The sessions this test file starts (ipc_session.h): counted until freed. */
static struct ipc_session_admission sessions;

/*
 * Listen mode (ipc/ipc_listen.c) against reverse fake runtimes (tests/support/fake_runtime.c,
 * fake_runtime_start_reverse): each connects to the listener's socket, advertises, answers one
 * command per connection and reconnects, like a runtime with DOTNET_DiagnosticPorts. Raw client
 * sockets play misbehaving peers. One private loop per test; the teardown asserts
 * uv_loop_close() == 0, so every connection the listener held or handed over was closed.
 */

#define MAX_FAKES 8
#define GRACE_MS  300 /* forget_after_ms in these tests */

struct lfx {
    struct test_loop *tl;
    char dir[64];
    char path[128];
    struct ipc_listen *l;
    struct ipc_discovery *d; /* when the test goes through the discovery front */
    bool closed;
    int added;
    int removed;
    uint64_t removed_at;
    char last_removed_uid[40];
    struct fake_runtime *fakes[MAX_FAKES];
    int nfakes;
    int fakes_closed;
};

static void on_change(void *ud, const struct ipc_process *p, bool added)
{
    struct lfx *fx = ud;
    assert_non_null(p->name);
    assert_non_null(p->endpoint);
    assert_int_equal(strlen(p->uid), 36);
    if (added) {
        fx->added++;
    } else {
        fx->removed++;
        fx->removed_at = tl_ms();
        snprintf(fx->last_removed_uid, sizeof(fx->last_removed_uid), "%s", p->uid);
    }
}

static void fx_init(struct lfx *fx, struct test_loop *tl)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    snprintf(fx->path, sizeof(fx->path), "%s/dotmon.sock", fx->dir);
}

static struct ipc_listen_config fx_cfg(void)
{
    struct ipc_listen_config c = {
        .probe_timeout_ms = 2000, .advertise_timeout_ms = 300, .forget_after_ms = GRACE_MS};
    return c;
}

static void fx_start(struct lfx *fx, struct ipc_listen_config *cfg)
{
    cfg->path = fx->path;
    assert_int_equal(ipc_listen_new(&fx->tl->loop, cfg, on_change, fx, &fx->l), 0);
    assert_false(ipc_listen_ready(fx->l));
    assert_int_equal(ipc_listen_start(fx->l), 0);
    assert_true(ipc_listen_ready(fx->l));
    assert_int_equal(ipc_listen_start(fx->l), AGENT_E_INVAL); /* only once */
}

static const uint8_t base_cookie[16] = {0xe0, 0x04, 0x25, 0x3f, 0x89, 0x4f, 0xd3, 0x11,
                                        0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x00};

static struct fake_runtime_config fake_cfg(uint64_t pid, uint8_t tag)
{
    struct fake_runtime_config cfg = {.pid = pid,
                                      .command_line = "/app/bin/TestApp --serve",
                                      .os = "Linux",
                                      .arch = "x64",
                                      .assembly = "TestApp",
                                      .clr_version = "10.0.12",
                                      .rid = "linux-x64"};
    memcpy(cfg.cookie, base_cookie, 16);
    cfg.cookie[15] = tag;
    return cfg;
}

static struct fake_runtime *fx_fake_cfg(struct lfx *fx, const struct fake_runtime_config *cfg)
{
    assert_true(fx->nfakes < MAX_FAKES);
    struct fake_runtime *f = NULL;
    assert_int_equal(fake_runtime_start_reverse(&fx->tl->loop, fx->path, cfg, &f), 0);
    fx->fakes[fx->nfakes++] = f;
    return f;
}

static struct fake_runtime *fx_fake(struct lfx *fx, uint64_t pid, uint8_t tag)
{
    struct fake_runtime_config cfg = fake_cfg(pid, tag);
    return fx_fake_cfg(fx, &cfg);
}

static void uid_of(uint8_t tag, char out[37])
{
    uint8_t c[16];
    memcpy(c, base_cookie, 16);
    c[15] = tag;
    ipc_guid_format(c, out);
}

static void on_closed(void *ud)
{
    ((struct lfx *)ud)->closed = true;
}

static bool is_closed(void *ud)
{
    return ((struct lfx *)ud)->closed;
}

static void on_fake_closed(void *ud)
{
    ((struct lfx *)ud)->fakes_closed++;
}

static bool fakes_closed(void *ud)
{
    struct lfx *fx = ud;
    return fx->fakes_closed == fx->nfakes;
}

static void fx_done(struct lfx *fx)
{
    if (fx->l != NULL) {
        ipc_listen_close(fx->l, on_closed, fx);
        assert_false(fx->closed); /* from the loop, not from inside close */
        assert_true(tl_run_until(fx->tl, is_closed, fx, 2000));
        /* The socket file it bound is gone with it. */
        struct stat st;
        assert_int_not_equal(lstat(fx->path, &st), 0);
    }
    if (fx->d != NULL) {
        ipc_discovery_close(fx->d, on_closed, fx);
        assert_true(tl_run_until(fx->tl, is_closed, fx, 2000));
    }
    for (int i = 0; i < fx->nfakes; i++) {
        fake_runtime_close(fx->fakes[i], on_fake_closed, fx);
    }
    assert_true(tl_run_until(fx->tl, fakes_closed, fx, 2000));
    fake_rmdir(fx->dir);
}

static const struct ipc_process *find_uid(const struct ipc_listen *l, const char *uid)
{
    for (size_t i = 0; i < ipc_listen_count(l); i++) {
        const struct ipc_process *p = ipc_listen_at(l, i);
        if (strcmp(p->uid, uid) == 0) {
            return p;
        }
    }
    return NULL;
}

struct want {
    struct lfx *fx;
    char uid[37];
    bool present;
};

static bool want_met(void *ud)
{
    struct want *w = ud;
    return (find_uid(w->fx->l, w->uid) != NULL) == w->present;
}

static bool wait_uid(struct lfx *fx, uint8_t tag, bool present, uint64_t max_ms)
{
    struct want w = {.fx = fx, .present = present};
    uid_of(tag, w.uid);
    return tl_run_until(fx->tl, want_met, &w, max_ms);
}

static struct ipc_listen_stats stats(const struct lfx *fx)
{
    struct ipc_listen_stats s;
    ipc_listen_get_stats(fx->l, &s);
    return s;
}

static bool one_spare(void *ud)
{
    return stats(ud).spares == 1;
}

/* ---- exchanges over reverse endpoints -------------------------------------------------------- */

struct xres {
    bool done;
    int status;
    int ok;
    uint32_t hresult;
    size_t payload_len;
};

static void on_x(void *ud, const struct ipc_result *r)
{
    struct xres *x = ud;
    x->done = true;
    x->status = r->status;
    x->ok = r->ok;
    x->hresult = r->hresult;
    x->payload_len = r->payload_len;
}

static bool x_done(void *ud)
{
    return ((struct xres *)ud)->done;
}

static int start_cmd(struct lfx *fx, const struct ipc_endpoint *ep, const uint8_t *req, size_t len,
                     uint64_t timeout_ms, struct xres *r)
{
    memset(r, 0, sizeof(*r));
    int rc = ipc_exchange_start(&fx->tl->loop, ep, req, len, IPC_EXCHANGE_SIMPLE, timeout_ms, 0,
                                on_x, r, NULL);
    assert_false(r->done); /* never from inside the start call */
    return rc;
}

static int start_info(struct lfx *fx, const struct ipc_endpoint *ep, struct xres *r)
{
    uint8_t req[IPC_HEADER_SIZE];
    struct ipc_wr w;
    ipc_wr_init(&w, req, sizeof(req));
    assert_int_equal(ipc_cmd_process_info(&w), 0);
    return start_cmd(fx, ep, req, w.len, 2000, r);
}

/* ---- raw peers ------------------------------------------------------------------------------- */

static int raw_connect(const char *path)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static bool raw_peer_closed(void *ud)
{
    int fd = *(int *)ud;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* 0600 whatever the umask; a configured 0660 survives a umask that would take group write. */
static void test_listen_socket_mode(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    mode_t old = umask(0);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct stat st;
    assert_int_equal(lstat(fx.path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    fx_done(&fx);

    fx_init(&fx, *state);
    (void)umask(022);
    cfg = fx_cfg();
    cfg.socket_mode = 0660;
    fx_start(&fx, &cfg);
    assert_int_equal(lstat(fx.path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
    fx_done(&fx);
    (void)umask(old);
}

/*
 * A socket file nobody accepts on is replaced; a live listener and a regular file are not
 * touched (EADDRINUSE, EEXIST), and the file keeps its content.
 */
static void test_listen_stale_socket_replaced(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    /* A stale socket at the path: bound, then closed. */
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, fx.path, strlen(fx.path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    int c = raw_connect(fx.path); /* it accepts now */
    close(c);

    /* A second listener on the same live path refuses to start and leaves it alone. */
    struct ipc_listen *l2 = NULL;
    assert_int_equal(ipc_listen_new(&fx.tl->loop, &cfg, on_change, &fx, &l2), 0);
    assert_int_equal(ipc_listen_start(l2), UV_EADDRINUSE);
    ipc_listen_close(l2, NULL, NULL);
    tl_run_for(fx.tl, 50);
    c = raw_connect(fx.path); /* still the first listener's socket */
    close(c);
    fx_done(&fx);

    /* A regular file is never deleted. */
    fx_init(&fx, *state);
    FILE *f = fopen(fx.path, "w");
    assert_non_null(f);
    fputs("precious", f);
    fclose(f);
    cfg = fx_cfg();
    cfg.path = fx.path;
    assert_int_equal(ipc_listen_new(&fx.tl->loop, &cfg, on_change, &fx, &fx.l), 0);
    assert_int_equal(ipc_listen_start(fx.l), UV_EEXIST);
    ipc_listen_close(fx.l, on_closed, &fx);
    assert_true(tl_run_until(fx.tl, is_closed, &fx, 2000));
    fx.l = NULL;
    struct stat st;
    assert_int_equal(lstat(fx.path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 8);
    fx_done(&fx);
}

/*
 * A runtime is listed by its cookie with the advertised pid, after ResumeRuntime (first) and
 * ProcessInfo3; its endpoint is "reverse:<uid>". Through the discovery front, as the agent uses it.
 */
static void test_listen_lists_runtime_resumed_first(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config lcfg = fx_cfg();
    lcfg.path = fx.path;
    struct ipc_discovery_config dcfg = {.listen = &lcfg};
    assert_int_equal(ipc_discovery_new(&fx.tl->loop, &dcfg, on_change, &fx, &fx.d), 0);
    assert_true(ipc_discovery_listening(fx.d));
    assert_false(ipc_discovery_ready(fx.d));
    assert_int_equal(ipc_discovery_start(fx.d), 0);
    assert_true(ipc_discovery_ready(fx.d));

    struct fake_runtime *f = fx_fake(&fx, 1, 0x01);
    uint64_t t0 = tl_ms();
    while (ipc_discovery_count(fx.d) == 0 && tl_ms() - t0 < 2000) {
        tl_run_for(fx.tl, 5);
    }
    assert_int_equal(ipc_discovery_count(fx.d), 1);
    const struct ipc_process *p = ipc_discovery_at(fx.d, 0);
    assert_int_equal(p->pid, 1);
    assert_string_equal(p->uid, "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    assert_string_equal(p->name, "TestApp");
    assert_string_equal(p->command_line, "/app/bin/TestApp --serve");
    assert_string_equal(p->entrypoint_assembly, "TestApp");
    assert_string_equal(p->runtime_identifier, "linux-x64");
    assert_string_equal(p->endpoint, "reverse:3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    assert_int_equal(fx.added, 1);
    /* ResumeRuntime at once, before anything else; then ProcessInfo3, and nothing more. */
    assert_int_equal(fake_runtime_request_at(f, 0), 0x0401);
    assert_int_equal(fake_runtime_request_at(f, 1), 0x0408);
    assert_int_equal(fake_runtime_request_at(f, 2), -1);
    /* The resume also goes through the front: a no-op once resumed; busy marks apply. */
    assert_int_equal(ipc_discovery_resume(fx.d, p->uid), 0);
    assert_int_equal(ipc_discovery_busy(fx.d, p->uid, 1), 0);
    assert_int_equal(ipc_discovery_busy(fx.d, p->uid, -1), 0);
    assert_int_equal(ipc_discovery_busy(fx.d, "00000000-0000-0000-0000-000000000000", 1),
                     AGENT_E_NOTFOUND);
    tl_run_for(fx.tl, 100);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x01), 1);
    fx_done(&fx);
}

/* An older runtime: ProcessInfo3 and 2 unknown, listed from ProcessInfo (no assembly). */
static void test_listen_probe_falls_back(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime_config fc = fake_cfg(77, 0x02);
    fc.max_info = 1;
    struct fake_runtime *f = fx_fake_cfg(&fx, &fc);
    assert_true(wait_uid(&fx, 0x02, true, 2000));
    const struct ipc_process *p = ipc_listen_at(fx.l, 0);
    assert_int_equal(p->pid, 77);
    assert_null(p->entrypoint_assembly);
    assert_null(p->runtime_identifier);
    assert_int_equal(fake_runtime_request_at(f, 0), 0x0401);
    assert_int_equal(fake_runtime_request_at(f, 1), 0x0408);
    assert_int_equal(fake_runtime_request_at(f, 2), 0x0404);
    assert_int_equal(fake_runtime_request_at(f, 3), 0x0400);
    fx_done(&fx);
}

/*
 * A runtime probed before its host set the command line (one word) is listed only once it is
 * whole, asked again every 100 ms; one whose command line stays one word is listed after 2 s.
 * Later refreshes (1 s, 5 s) update the listed struct in place.
 */
static void test_listen_waits_for_whole_command_line(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime_config fc = fake_cfg(20, 0x13);
    fc.early_command_line = "/app/bin/TestApp";
    fc.early_answers = 3;
    uint64_t t0 = tl_ms();
    struct fake_runtime *f = fx_fake_cfg(&fx, &fc);
    struct fake_runtime_config one = fake_cfg(21, 0x14);
    one.command_line = "/app/single";
    uint64_t t1 = tl_ms();
    fx_fake_cfg(&fx, &one);
    assert_true(wait_uid(&fx, 0x13, true, 2000));
    uint64_t took = tl_ms() - t0;
    assert_true(took >= 150);
    ASSERT_BELOW_MS(took, 1500);
    const struct ipc_process *p = ipc_listen_at(fx.l, 0);
    assert_string_equal(p->command_line, "/app/bin/TestApp --serve");
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x08), 4);
    assert_int_equal(fx.added, 1); /* never listed half-known */
    assert_true(wait_uid(&fx, 0x14, true, 3000));
    took = tl_ms() - t1;
    assert_true(took >= 1900);
    ASSERT_BELOW_MS(took, 3000);
    /* Meanwhile (about 1.7 s later) the regular refresh asked the first one again. */
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x08), 5);
    assert_int_equal(fx.added, 2);
    assert_int_equal(fx.removed, 0);
    fx_done(&fx);
}

/* Two runtimes that both see themselves as pid 1 (two pods) are both listed, told apart by uid. */
static void test_listen_same_pid_two_cookies(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    fx_fake(&fx, 1, 0x0a);
    fx_fake(&fx, 1, 0x0b);
    assert_true(wait_uid(&fx, 0x0a, true, 2000));
    assert_true(wait_uid(&fx, 0x0b, true, 2000));
    assert_int_equal(ipc_listen_count(fx.l), 2);
    const struct ipc_process *a = ipc_listen_at(fx.l, 0);
    const struct ipc_process *b = ipc_listen_at(fx.l, 1);
    assert_int_equal(a->pid, 1);
    assert_int_equal(b->pid, 1);
    assert_true(strcmp(a->uid, b->uid) < 0); /* sorted by pid, then uid */
    assert_string_not_equal(a->endpoint, b->endpoint);
    fx_done(&fx);
}

/*
 * Garbage, a short advertise left hanging, and one cut short each close only their own
 * connection; a real runtime connecting meanwhile is listed as usual.
 */
static void test_listen_bad_advertise_closes_only_that_connection(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    int garbage = raw_connect(fx.path);
    assert_int_equal(send(garbage, "GET / HTTP/1.1\r\nHost: x\r\n\r\n0123456", 34, 0), 34);
    int hanging = raw_connect(fx.path);
    assert_int_equal(send(hanging, "ADVR_V1", 8, 0), 8);
    int cut = raw_connect(fx.path);
    assert_int_equal(send(cut, "ADVR_V1\0abc", 11, 0), 11);
    fx_fake(&fx, 4242, 0x03);

    assert_true(tl_run_until(fx.tl, raw_peer_closed, &garbage, 1000));
    uint64_t t0 = tl_ms();
    assert_true(tl_run_until(fx.tl, raw_peer_closed, &hanging, 2000));
    ASSERT_BELOW_MS(tl_ms() - t0, 1000); /* the advertise timeout (300 ms), not forever */
    shutdown(cut, SHUT_WR);
    assert_true(tl_run_until(fx.tl, raw_peer_closed, &cut, 1000));
    assert_true(wait_uid(&fx, 0x03, true, 2000));
    struct ipc_listen_stats s = stats(&fx);
    assert_int_equal(s.rejected, 3);
    assert_int_equal(s.runtimes, 1);
    assert_int_equal(s.pending, 0);
    close(garbage);
    close(hanging);
    close(cut);
    /* The runtime still answers over its reverse endpoint. */
    struct xres r;
    assert_int_equal(start_info(&fx, &ipc_listen_at(fx.l, 0)->ep, &r), 0);
    assert_true(tl_run_until(fx.tl, x_done, &r, 2000));
    assert_int_equal(r.status, 0);
    assert_true(r.ok);
    fx_done(&fx);
}

/* A command takes the spare; the runtime's reconnect becomes the next spare. */
static void test_listen_spare_taken_and_replaced(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 5, 0x04);
    assert_true(wait_uid(&fx, 0x04, true, 2000));
    assert_true(tl_run_until(fx.tl, one_spare, &fx, 1000));
    unsigned adv = fake_runtime_advertises(f);
    uint64_t handed = stats(&fx).handed_out;

    struct xres r;
    assert_int_equal(start_info(&fx, &ipc_listen_at(fx.l, 0)->ep, &r), 0);
    assert_true(tl_run_until(fx.tl, x_done, &r, 2000));
    assert_int_equal(r.status, 0);
    assert_true(r.ok);
    assert_true(r.payload_len > 20);
    assert_true(tl_run_until(fx.tl, one_spare, &fx, 1000));
    assert_int_equal(fake_runtime_advertises(f), adv + 1);
    assert_int_equal(stats(&fx).handed_out, handed + 1);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x00), 1);
    /* An unknown uid fails at once, like a socket nobody listens on. */
    struct ipc_endpoint unknown = ipc_listen_at(fx.l, 0)->ep;
    snprintf(unknown.uid, sizeof(unknown.uid), "00000000-0000-0000-0000-000000000000");
    assert_int_equal(start_info(&fx, &unknown, &r), UV_ECONNREFUSED);
    fx_done(&fx);
}

/* Four commands at once: each waits for the reconnect the previous one caused. */
static void test_listen_concurrent_commands(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 6, 0x05);
    assert_true(wait_uid(&fx, 0x05, true, 2000));
    struct ipc_endpoint endpoint;
    assert_int_equal(ipc_endpoint_copy(&endpoint, &ipc_listen_at(fx.l, 0)->ep), 0);
    struct xres r[4];
    for (int i = 0; i < 4; i++) {
        assert_int_equal(start_info(&fx, &endpoint, &r[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_true(tl_run_until(fx.tl, x_done, &r[i], 2000));
        assert_int_equal(r[i].status, 0);
        assert_true(r[i].ok);
    }
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x00), 4);
    ipc_endpoint_fini(&endpoint);
    fx_done(&fx);
}

/* A trace session and its StopTracing (on another connection) over the reverse endpoint. */
struct srec {
    bool started;
    bool ended;
    int status;
    uint64_t bytes;
    struct ipc_session *s;
};

static void s_started(void *ud, uint64_t id, int version)
{
    struct srec *r = ud;
    (void)id;
    (void)version;
    r->started = true;
}

static void s_data(void *ud, const uint8_t *p, size_t n)
{
    struct srec *r = ud;
    (void)p;
    r->bytes += n;
}

static void s_end(void *ud, int status, uint32_t hresult)
{
    struct srec *r = ud;
    (void)hresult;
    r->ended = true;
    r->status = status;
}

static bool s_is_started(void *ud)
{
    return ((struct srec *)ud)->started;
}

static bool s_is_ended(void *ud)
{
    return ((struct srec *)ud)->ended;
}

static bool no_sessions(void *ud)
{
    (void)ud;
    return sessions.live == 0;
}

static void test_listen_trace_session(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime_config fc = fake_cfg(7, 0x06);
    fc.trace.filler_bytes = UINT64_MAX;
    fc.trace.chunk_bytes = 4096;
    fc.trace.interval_ms = 2;
    struct fake_runtime *f = fx_fake_cfg(&fx, &fc);
    assert_true(wait_uid(&fx, 0x06, true, 2000));
    static const struct ipc_provider prov = {
        .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4};
    struct ipc_collect_config cc = {
        .buffer_mb = 16, .format = 1, .providers = &prov, .provider_count = 1};
    static const struct ipc_session_callbacks cbs = {s_started, s_data, s_end};
    struct srec r = {0};
    assert_int_equal(ipc_session_start(&fx.tl->loop, &sessions, &ipc_listen_at(fx.l, 0)->ep, &cc,
                                       2000, &cbs, &r, &r.s),
                     0);
    assert_true(tl_run_until(fx.tl, s_is_started, &r, 2000));
    tl_run_for(fx.tl, 100);
    ipc_session_stop(r.s, 3000);
    assert_true(tl_run_until(fx.tl, s_is_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    assert_true(r.bytes > 102);
    struct fake_session_info si;
    assert_int_equal(fake_runtime_session(f, 0, &si), 0);
    assert_true(si.end_tag);
    assert_int_equal(si.stops, 1);
    assert_int_equal(r.bytes, si.stream_bytes);
    assert_true(tl_run_until(fx.tl, no_sessions, NULL, 2000));
    assert_true(wait_uid(&fx, 0x06, true, 10)); /* still listed */
    fx_done(&fx);
}

/* A killed runtime (its spare ends, it never reconnects) is forgotten after the grace only. */
static void test_listen_forgets_after_grace(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 8, 0x07);
    assert_true(wait_uid(&fx, 0x07, true, 2000));
    tl_run_for(fx.tl, 3 * GRACE_MS); /* an idle runtime stays: it holds a spare */
    assert_true(wait_uid(&fx, 0x07, true, 10));
    /* A job's copy of the endpoint outlives the runtime's entry. */
    struct ipc_endpoint kept;
    assert_int_equal(ipc_endpoint_copy(&kept, &ipc_listen_at(fx.l, 0)->ep), 0);
    uint64_t t0 = tl_ms();
    fake_runtime_kill(f);
    assert_true(wait_uid(&fx, 0x07, false, 3000));
    uint64_t took = fx.removed_at - t0;
    assert_true(took + 20 >= GRACE_MS);
    assert_true(took < GRACE_MS + 1000);
    assert_int_equal(fx.removed, 1);
    assert_int_equal(stats(&fx).forgotten, 1);
    /* Its endpoint is refused from now on. */
    assert_string_equal(kept.uid, fx.last_removed_uid);
    struct xres r;
    assert_int_equal(start_info(&fx, &kept, &r), UV_ECONNREFUSED);
    ipc_endpoint_fini(&kept);
    ipc_endpoint_fini(&kept); /* twice is fine */
    fx_done(&fx);
}

/*
 * An endpoint copied by a job outlives the listener itself (dotmon stopping): commands through it
 * are refused, exchanges and sessions alike, and releasing it afterwards is safe (ASan, valgrind).
 */
static void test_listen_endpoint_outlives_listener(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    fx_fake(&fx, 12, 0x0c);
    assert_true(wait_uid(&fx, 0x0c, true, 2000));
    struct ipc_endpoint kept;
    assert_int_equal(ipc_endpoint_copy(&kept, &ipc_listen_at(fx.l, 0)->ep), 0);
    assert_string_equal(kept.path, ipc_listen_at(fx.l, 0)->endpoint);
    struct ipc_endpoint second;
    assert_int_equal(ipc_endpoint_copy(&second, &kept), 0);
    ipc_listen_close(fx.l, on_closed, &fx);
    /* Closing: no new command queues. */
    struct xres r;
    assert_int_equal(start_info(&fx, &kept, &r), UV_ECONNREFUSED);
    assert_true(tl_run_until(fx.tl, is_closed, &fx, 2000));
    fx.l = NULL;
    /* Freed: still refused, never a dangling listener. */
    assert_int_equal(start_info(&fx, &kept, &r), UV_ECONNREFUSED);
    static const struct ipc_provider prov = {.name = "Microsoft-DotNETCore-SampleProfiler"};
    struct ipc_collect_config cc = {
        .buffer_mb = 16, .format = 1, .providers = &prov, .provider_count = 1};
    static const struct ipc_session_callbacks cbs = {s_started, s_data, s_end};
    struct srec sr = {0};
    assert_int_equal(
        ipc_session_start(&fx.tl->loop, &sessions, &second, &cc, 500, &cbs, &sr, &sr.s),
        UV_ECONNREFUSED);
    assert_true(tl_run_until(fx.tl, no_sessions, NULL, 2000));
    ipc_endpoint_fini(&kept);
    ipc_endpoint_fini(&second);
    fx_done(&fx);
}

/* Marked busy (a dump in the agent), a runtime without any connection is kept; unmarked, it goes.
 */
static void test_listen_not_forgotten_while_busy(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 9, 0x08);
    assert_true(wait_uid(&fx, 0x08, true, 2000));
    char uid[37];
    uid_of(0x08, uid);
    assert_int_equal(ipc_listen_busy(fx.l, uid, 1), 0);
    fake_runtime_kill(f);
    tl_run_for(fx.tl, 4 * GRACE_MS);
    assert_true(wait_uid(&fx, 0x08, true, 10));
    uint64_t t0 = tl_ms();
    assert_int_equal(ipc_listen_busy(fx.l, uid, -1), 0);
    assert_true(wait_uid(&fx, 0x08, false, 3000));
    assert_true(fx.removed_at - t0 + 20 >= GRACE_MS); /* the grace counts from the unmark */
    fx_done(&fx);
}

/*
 * A command that occupies the runtime's thread (a dump that takes longer than the grace; the
 * runtime does not reconnect meanwhile) keeps it listed through its lease; afterwards the
 * runtime reconnects and stays.
 */
static void test_listen_long_command_keeps_runtime(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime_config fc = fake_cfg(10, 0x09);
    fc.dump.fault = FAKE_DUMP_SILENT;
    struct fake_runtime *f = fx_fake_cfg(&fx, &fc);
    assert_true(wait_uid(&fx, 0x09, true, 2000));
    assert_true(tl_run_until(fx.tl, one_spare, &fx, 1000));
    uint8_t req[512];
    struct ipc_wr w;
    ipc_wr_init(&w, req, sizeof(req));
    assert_int_equal(ipc_cmd_generate_dump(&w, 1, "/tmp/x.dmp", IPC_DUMP_NORMAL, 0), 0);
    struct xres r;
    assert_int_equal(start_cmd(&fx, &ipc_listen_at(fx.l, 0)->ep, req, w.len, 5 * GRACE_MS, &r), 0);
    tl_run_for(fx.tl, 4 * GRACE_MS);
    assert_false(r.done);
    assert_int_equal(stats(&fx).spares, 0); /* the fake does not reconnect during a dump */
    assert_true(wait_uid(&fx, 0x09, true, 10));
    assert_true(tl_run_until(fx.tl, x_done, &r, 3000));
    assert_int_equal(r.status, AGENT_E_TIMEOUT);
    assert_true(tl_run_until(fx.tl, one_spare, &fx, 1000)); /* it reconnected */
    tl_run_for(fx.tl, 2 * GRACE_MS);
    assert_true(wait_uid(&fx, 0x09, true, 10));
    assert_int_equal(fx.removed, 0);
    struct fake_dump_info di;
    fake_runtime_dump_info(f, &di);
    assert_int_equal(di.requests, 1);
    fx_done(&fx);
}

/* A restarted app: a new cookie is listed as new, the old one is dropped after the grace. */
static void test_listen_restart_new_cookie(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *a = fx_fake(&fx, 1, 0x0c);
    assert_true(wait_uid(&fx, 0x0c, true, 2000));
    fake_runtime_kill(a);
    fx_fake(&fx, 1, 0x0d);
    assert_true(wait_uid(&fx, 0x0d, true, 2000));
    assert_true(wait_uid(&fx, 0x0c, false, 3000));
    assert_int_equal(ipc_listen_count(fx.l), 1);
    assert_int_equal(fx.added, 2);
    assert_int_equal(fx.removed, 1);
    fx_done(&fx);
}

/* HoldSuspended: listed without ResumeRuntime; ipc_listen_resume sends it, once. */
static void test_listen_hold_suspended(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    cfg.hold_suspended = true;
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 11, 0x0e);
    assert_true(wait_uid(&fx, 0x0e, true, 2000));
    tl_run_for(fx.tl, 200);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x01), 0);
    assert_int_equal(fake_runtime_request_at(f, 0), 0x0408);
    char uid[37];
    uid_of(0x0e, uid);
    assert_int_equal(ipc_listen_resume(fx.l, uid), 0);
    tl_run_for(fx.tl, 200);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x01), 1);
    assert_int_equal(ipc_listen_resume(fx.l, uid), 0); /* already resumed: nothing sent */
    tl_run_for(fx.tl, 100);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x01), 1);
    assert_int_equal(stats(&fx).resumed, 1);
    assert_int_equal(ipc_listen_resume(fx.l, "00000000-0000-0000-0000-000000000000"),
                     AGENT_E_NOTFOUND);
    fx_done(&fx);
}

/* set_hold (collection rules reloaded): true holds the runtimes that connect from then on;
 * false resumes those held and lets the next ones run at once. */
static void test_listen_set_hold(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *a = fx_fake(&fx, 12, 0x1a);
    assert_true(wait_uid(&fx, 0x1a, true, 2000));
    assert_int_equal(fake_runtime_requests(a, 0x04, 0x01), 1); /* not held: resumed at once */
    ipc_listen_set_hold(fx.l, true);
    struct fake_runtime *b = fx_fake(&fx, 13, 0x1b);
    assert_true(wait_uid(&fx, 0x1b, true, 2000));
    tl_run_for(fx.tl, 200);
    assert_int_equal(fake_runtime_requests(b, 0x04, 0x01), 0);
    ipc_listen_set_hold(fx.l, false);
    tl_run_for(fx.tl, 200);
    assert_int_equal(fake_runtime_requests(b, 0x04, 0x01), 1);
    assert_int_equal(fake_runtime_requests(a, 0x04, 0x01), 1); /* once */
    struct fake_runtime *c = fx_fake(&fx, 14, 0x1c);
    assert_true(wait_uid(&fx, 0x1c, true, 2000));
    tl_run_for(fx.tl, 100);
    assert_int_equal(fake_runtime_requests(c, 0x04, 0x01), 1);
    assert_int_equal(stats(&fx).resumed, 3);
    fx_done(&fx);
}

/* MaxConnections = 1: a second runtime is turned away, the first keeps working. */
static void test_listen_max_connections(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    cfg.max_connections = 1;
    fx_start(&fx, &cfg);
    fx_fake(&fx, 12, 0x10);
    assert_true(wait_uid(&fx, 0x10, true, 2000));
    struct fake_runtime *f2 = fx_fake(&fx, 13, 0x11);
    tl_run_for(fx.tl, 300);
    assert_int_equal(ipc_listen_count(fx.l), 1);
    assert_int_equal(stats(&fx).rejected, 1);
    /* Turned away, but its connection is parked: no reconnect storm. */
    assert_int_equal(fake_runtime_advertises(f2), 1);
    struct xres r;
    assert_int_equal(start_info(&fx, &ipc_listen_at(fx.l, 0)->ep, &r), 0);
    assert_true(tl_run_until(fx.tl, x_done, &r, 2000));
    assert_int_equal(r.status, 0);
    fx_done(&fx);
}

/*
 * park_ms: the turned-away runtime's parked connection is closed after it, and the runtime
 * reconnects then: about one advertise per park_ms, neither one in all (the 10 s default) nor a
 * storm.
 */
static void test_listen_park_ms(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    cfg.max_connections = 1;
    cfg.park_ms = 200;
    fx_start(&fx, &cfg);
    fx_fake(&fx, 16, 0x16);
    assert_true(wait_uid(&fx, 0x16, true, 2000));
    struct fake_runtime *f2 = fx_fake(&fx, 17, 0x17);
    tl_run_for(fx.tl, 1000);
    unsigned adv = fake_runtime_advertises(f2);
    fprintf(stderr, "  %u advertises in 1 s with park_ms 200\n", adv);
    assert_true(adv >= 2 && adv <= 6);
    assert_int_equal(stats(&fx).rejected, adv);
    assert_int_equal(ipc_listen_count(fx.l), 1);
    fx_done(&fx);
}

/*
 * settle_ms and settle_step_ms: a runtime whose command line stays one word is listed after
 * settle_ms (not the 2 s default), asked again every settle_step_ms meanwhile.
 */
static void test_listen_settle_ms(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    cfg.settle_ms = 400;
    cfg.settle_step_ms = 20;
    fx_start(&fx, &cfg);
    struct fake_runtime_config one = fake_cfg(22, 0x18);
    one.command_line = "/app/single";
    uint64_t t0 = tl_ms();
    struct fake_runtime *f = fx_fake_cfg(&fx, &one);
    assert_true(wait_uid(&fx, 0x18, true, 2000));
    uint64_t took = tl_ms() - t0;
    unsigned asked = fake_runtime_requests(f, 0x04, 0x08);
    fprintf(stderr, "  listed after %llu ms, ProcessInfo asked %u times\n",
            (unsigned long long)took, asked);
    assert_true(took >= 350);
    ASSERT_BELOW_MS(took, 1500);
    assert_true(asked >= 8); /* every 100 ms (the default) would be 5 at most */
    fx_done(&fx);
}

/* Closing the listener fails a command still waiting for a connection, from the loop. */
static void test_listen_close_fails_waiting_command(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    cfg.forget_after_ms = 10000;
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 14, 0x12);
    assert_true(wait_uid(&fx, 0x12, true, 2000));
    fake_runtime_kill(f); /* no spare will come */
    tl_run_for(fx.tl, 50);
    struct xres r;
    assert_int_equal(start_info(&fx, &ipc_listen_at(fx.l, 0)->ep, &r), 0);
    tl_run_for(fx.tl, 50);
    assert_false(r.done);
    ipc_listen_close(fx.l, on_closed, &fx);
    assert_false(r.done);
    assert_true(tl_run_until(fx.tl, x_done, &r, 2000));
    assert_int_equal(r.status, UV_ECANCELED);
    assert_true(tl_run_until(fx.tl, is_closed, &fx, 2000));
    fx.l = NULL;
    fx_done(&fx);
}

/*
 * A command queued just before close (a trace's StopTracing at shutdown) still gets the spare that
 * is there, and completes after the listener has gone.
 */
static void test_listen_close_serves_queued_command(void **state)
{
    struct lfx fx;
    fx_init(&fx, *state);
    struct ipc_listen_config cfg = fx_cfg();
    fx_start(&fx, &cfg);
    struct fake_runtime *f = fx_fake(&fx, 15, 0x15);
    assert_true(wait_uid(&fx, 0x15, true, 2000));
    assert_true(tl_run_until(fx.tl, one_spare, &fx, 1000));
    struct xres r;
    assert_int_equal(start_info(&fx, &ipc_listen_at(fx.l, 0)->ep, &r), 0);
    ipc_listen_close(fx.l, on_closed, &fx);
    assert_true(tl_run_until(fx.tl, x_done, &r, 2000));
    assert_int_equal(r.status, 0);
    assert_true(r.ok);
    assert_true(tl_run_until(fx.tl, is_closed, &fx, 2000));
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x00), 1);
    fx.l = NULL;
    fx_done(&fx);
}

/*
 * The runtime state graph (ipc_internal.h): every listed transition is allowed, everything else
 * is refused (rt_set_state then asserts in debug builds, logs in release builds).
 */
static void test_listen_state_transitions(void **state)
{
    (void)state;
    enum {
        H = IPC_RT_HELD,
        HL = IPC_RT_HELD_LISTED,
        R = IPC_RT_RESUMING,
        RS = IPC_RT_RESUMING_SETTLING,
        RL = IPC_RT_RESUMING_LISTED,
        P = IPC_RT_PROBING,
        S = IPC_RT_SETTLING,
        L = IPC_RT_LISTED,
        G = IPC_RT_GONE,
        N = IPC_RT_NSTATES
    };
    static const int allowed[][2] = {
        {H, HL}, {H, R},   {HL, RL}, {R, P}, {R, RS}, {R, RL},
        {RS, S}, {RS, RL}, {RL, L},  {P, S}, {P, L},  {S, L},
    };
    for (int from = 0; from < N; from++) {
        for (int to = 0; to < N; to++) {
            bool want = to == G && from != G;
            for (size_t i = 0; i < sizeof(allowed) / sizeof(allowed[0]); i++) {
                want |= allowed[i][0] == from && allowed[i][1] == to;
            }
            assert_int_equal(
                ipc__rt_transition_ok((enum ipc__rt_state)from, (enum ipc__rt_state)to), want);
        }
    }
    /* Some refusals spelled out: no way back, no skipping the resume, GONE is final. */
    assert_false(ipc__rt_transition_ok(IPC_RT_LISTED, IPC_RT_SETTLING));
    assert_false(ipc__rt_transition_ok(IPC_RT_HELD, IPC_RT_PROBING));
    assert_false(ipc__rt_transition_ok(IPC_RT_HELD_LISTED, IPC_RT_LISTED));
    assert_false(ipc__rt_transition_ok(IPC_RT_RESUMING_LISTED, IPC_RT_HELD_LISTED));
    assert_false(ipc__rt_transition_ok(IPC_RT_GONE, IPC_RT_LISTED));
    assert_false(ipc__rt_transition_ok(IPC_RT_GONE, IPC_RT_GONE));
    assert_false(ipc__rt_transition_ok(IPC_RT_LISTED, IPC_RT_LISTED));
    assert_false(ipc__rt_transition_ok(IPC_RT_NSTATES, IPC_RT_GONE));
    assert_string_equal(ipc__rt_state_name(IPC_RT_RESUMING_SETTLING), "RESUMING_SETTLING");
    assert_string_equal(ipc__rt_state_name(IPC_RT_NSTATES), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_listen_state_transitions),
        cmocka_unit_test_setup_teardown(test_listen_socket_mode, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_stale_socket_replaced, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_lists_runtime_resumed_first, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_probe_falls_back, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_waits_for_whole_command_line, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_same_pid_two_cookies, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_bad_advertise_closes_only_that_connection,
                                        tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_spare_taken_and_replaced, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_concurrent_commands, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_trace_session, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_forgets_after_grace, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_endpoint_outlives_listener, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_not_forgotten_while_busy, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_long_command_keeps_runtime, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_restart_new_cookie, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_hold_suspended, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_set_hold, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_max_connections, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_park_ms, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_settle_ms, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_close_fails_waiting_command, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_listen_close_serves_queued_command, tl_setup,
                                        tl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
