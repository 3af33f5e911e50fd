/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "fake_runtime.h"
#include "ipc_cmd.h"
#include "ipc_discovery.h"
#include "ipc_test_loop.h"
#include "log.h"
#include "procfs.h"
#include "timebound.h"

/*
 * Discovery against fake runtimes bound in a private mkdtemp directory, one private loop per
 * test. Each test closes the discovery and its fakes; the teardown asserts uv_loop_close() == 0.
 */

#define MAX_FAKES 48

struct dfx {
    struct test_loop *tl;
    char dir[64];
    struct ipc_discovery *d;
    bool closed;
    int added;
    int removed;
    uint64_t last_removed_pid;
    char trace[512]; /* "+pid/key -pid/key …", for failure messages */
    struct fake_runtime *fakes[MAX_FAKES];
    int nfakes;
    int fakes_closed;
};

static void on_change(void *ud, const struct ipc_process *p, bool added)
{
    struct dfx *fx = ud;
    /* The process is fully formed when reported, and still valid when it leaves. */
    assert_non_null(p->name);
    assert_non_null(p->command_line);
    assert_non_null(p->endpoint);
    assert_int_equal(strlen(p->uid), 36);
    size_t used = strlen(fx->trace);
    (void)snprintf(fx->trace + used, sizeof(fx->trace) - used, "%c%llu/%llu@%llu ",
                   added ? '+' : '-', (unsigned long long)p->pid, (unsigned long long)p->key,
                   (unsigned long long)tl_ms());
    if (added) {
        fx->added++;
    } else {
        fx->removed++;
        fx->last_removed_pid = p->pid;
    }
}

static void fx_init(struct dfx *fx, struct test_loop *tl)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
}

static struct fake_runtime *fx_fake(struct dfx *fx, uint64_t pid, uint64_t key, uint8_t tag,
                                    enum fake_mode mode, int max_info)
{
    assert_true(fx->nfakes < MAX_FAKES);
    struct fake_runtime_config cfg = {.pid = pid,
                                      .key = key,
                                      .command_line = "/x/y/TestApp arg",
                                      .os = "Linux",
                                      .arch = "x64",
                                      .assembly = "TestApp",
                                      .clr_version = "10.0.12",
                                      .rid = "linux-x64",
                                      .max_info = max_info,
                                      .mode = mode};
    static const uint8_t base[16] = {0xe0, 0x04, 0x25, 0x3f, 0x89, 0x4f, 0xd3, 0x11,
                                     0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01};
    memcpy(cfg.cookie, base, 16);
    cfg.cookie[15] = tag;
    struct fake_runtime *f = NULL;
    assert_int_equal(fake_runtime_start(&fx->tl->loop, fx->dir, &cfg, &f), 0);
    fx->fakes[fx->nfakes++] = f;
    return f;
}

static void fx_start_with(struct dfx *fx, uint64_t probe_timeout_ms, uint64_t rescan_ms,
                          const struct ipc_identity_vars *identity)
{
    struct ipc_discovery_config cfg = {.dir = fx->dir,
                                       .probe_timeout_ms = probe_timeout_ms,
                                       .rescan_ms = rescan_ms,
                                       .liveness_ms = 0,
                                       .identity = identity};
    assert_int_equal(ipc_discovery_new(&fx->tl->loop, &cfg, on_change, fx, &fx->d), 0);
    assert_false(ipc_discovery_ready(fx->d));
    assert_int_equal(ipc_discovery_start(fx->d), 0);
    assert_int_equal(ipc_discovery_start(fx->d), AGENT_E_INVAL); /* only once */
}

static void fx_start(struct dfx *fx, uint64_t probe_timeout_ms, uint64_t rescan_ms)
{
    fx_start_with(fx, probe_timeout_ms, rescan_ms, NULL);
}

static void on_closed(void *ud)
{
    ((struct dfx *)ud)->closed = true;
}

static bool is_closed(void *ud)
{
    return ((struct dfx *)ud)->closed;
}

static void on_fake_closed(void *ud)
{
    ((struct dfx *)ud)->fakes_closed++;
}

static bool fakes_closed(void *ud)
{
    struct dfx *fx = ud;
    return fx->fakes_closed == fx->nfakes;
}

static void fx_done(struct dfx *fx)
{
    if (fx->d != NULL) {
        uint64_t t0 = tl_ms();
        ipc_discovery_close(fx->d, on_closed, fx);
        assert_false(fx->closed); /* from the loop, not from inside close */
        assert_true(tl_run_until(fx->tl, is_closed, fx, 2000));
        ASSERT_BELOW_MS(tl_ms() - t0, 1000); /* in-flight probes are cancelled, not waited for */
    }
    for (int i = 0; i < fx->nfakes; i++) {
        fake_runtime_close(fx->fakes[i], on_fake_closed, fx);
    }
    assert_true(tl_run_until(fx->tl, fakes_closed, fx, 2000));
    fake_rmdir(fx->dir);
}

static const struct ipc_process *find_pid(const struct ipc_discovery *d, uint64_t pid)
{
    for (size_t i = 0; i < ipc_discovery_count(d); i++) {
        const struct ipc_process *p = ipc_discovery_at(d, i);
        if (p->pid == pid) {
            return p;
        }
    }
    return NULL;
}

struct want {
    struct dfx *fx;
    uint64_t pid;
    char uid_tail; /* last hex digit pair of the uid to wait for, 0 = any */
    bool present;
};

static bool want_met(void *ud)
{
    struct want *w = ud;
    const struct ipc_process *p = find_pid(w->fx->d, w->pid);
    if (!w->present) {
        return p == NULL;
    }
    if (p == NULL) {
        return false;
    }
    return w->uid_tail == 0 || p->uid[35] == w->uid_tail;
}

static bool wait_pid(struct dfx *fx, uint64_t pid, bool present, uint64_t max_ms)
{
    struct want w = {.fx = fx, .pid = pid, .present = present};
    return tl_run_until(fx->tl, want_met, &w, max_ms);
}

static bool is_ready(void *ud)
{
    return ipc_discovery_ready(((struct dfx *)ud)->d);
}

/* ---- tests ------------------------------------------------------------------------------- */

/*
 * Connect mode: host_pid is the pid when /proc/<pid> is this runtime: a process of dotmon's pid
 * namespace with that pid (NSpid's last field) whose start time is the socket's key (the identity
 * read, ipc_identity.h). The fake runtime runs in this test's process: with its socket named by
 * our start time, /proc/<our pid> is it; with another key, it is not.
 */
static void test_discovery_host_pid(void **state)
{
    uint64_t self = (uint64_t)getpid();
    char stat[1024];
    FILE *f = fopen("/proc/self/stat", "r");
    assert_non_null(f);
    size_t n = fread(stat, 1, sizeof(stat), f);
    fclose(f);
    uint64_t start = 0;
    assert_true(procfs_stat_starttime(stat, n, &start));
    struct ipc_identity_vars vars;
    ipc_identity_vars_default(&vars);
    for (int right = 1; right >= 0; right--) {
        struct dfx fx;
        fx_init(&fx, *state);
        (void)fx_fake(&fx, self, right ? start : start + 1, 0x01, FAKE_NORMAL, 3);
        fx_start_with(&fx, 2000, 5000, &vars);
        assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
        assert_int_equal(ipc_discovery_count(fx.d), 1);
        const struct ipc_process *p = ipc_discovery_at(fx.d, 0);
        assert_int_equal(p->pid, self);
        assert_int_equal(p->host_pid, right ? self : 0);
        assert_int_equal(p->ns_pid, 0);
        assert_string_equal(p->node_tmpdir, "");
        fx_done(&fx);
    }
}

static void test_discovery_lists_fake_runtime(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct fake_runtime *f = fx_fake(&fx, 4242, 100, 0x01, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 5000);
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    assert_int_equal(ipc_discovery_count(fx.d), 1);
    const struct ipc_process *p = ipc_discovery_at(fx.d, 0);
    assert_null(ipc_discovery_at(fx.d, 1));
    assert_int_equal(p->pid, 4242);
    assert_string_equal(p->uid, "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    assert_string_equal(p->name, "TestApp");
    assert_string_equal(p->command_line, "/x/y/TestApp arg");
    assert_string_equal(p->os, "Linux");
    assert_string_equal(p->arch, "x64");
    assert_string_equal(p->entrypoint_assembly, "TestApp");
    assert_string_equal(p->clr_version, "10.0.12");
    assert_string_equal(p->runtime_identifier, "linux-x64");
    assert_string_equal(p->endpoint, fake_runtime_path(f));
    assert_int_equal(p->key, 100);
    assert_int_equal(p->busy, 0);
    assert_int_equal(fx.added, 1);

    /* Probed once; afterwards only liveness checks (ProcessInfo) reach the runtime. */
    tl_run_for(fx.tl, 2300);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x08), 1);
    assert_true(fake_runtime_requests(f, 0x04, 0x00) >= 1);
    assert_int_equal(ipc_discovery_count(fx.d), 1);
    assert_int_equal(fx.added, 1);
    assert_int_equal(fx.removed, 0);
    fx_done(&fx);
}

static void test_discovery_falls_back_to_older_process_info(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct fake_runtime *f2 = fx_fake(&fx, 1002, 1, 0x02, FAKE_NORMAL, 2);
    struct fake_runtime *f1 = fx_fake(&fx, 1001, 1, 0x03, FAKE_NORMAL, 1);
    fx_start(&fx, 2000, 5000);
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    assert_int_equal(ipc_discovery_count(fx.d), 2);

    const struct ipc_process *p1 = ipc_discovery_at(fx.d, 0); /* sorted by pid */
    const struct ipc_process *p2 = ipc_discovery_at(fx.d, 1);
    assert_int_equal(p1->pid, 1001);
    assert_int_equal(p2->pid, 1002);
    assert_string_equal(p2->clr_version, "10.0.12");
    assert_string_equal(p2->entrypoint_assembly, "TestApp");
    assert_null(p2->runtime_identifier);
    assert_null(p1->clr_version);
    assert_null(p1->entrypoint_assembly);
    assert_null(p1->runtime_identifier);
    assert_string_equal(p1->name, "TestApp");
    assert_string_equal(p1->uid, "3f2504e0-4f89-11d3-9a0c-0305e82c3303");

    assert_int_equal(fake_runtime_requests(f2, 0x04, 0x08), 1);
    assert_int_equal(fake_runtime_requests(f2, 0x04, 0x04), 1);
    assert_int_equal(fake_runtime_requests(f1, 0x04, 0x08), 1);
    assert_int_equal(fake_runtime_requests(f1, 0x04, 0x04), 1);
    assert_true(fake_runtime_requests(f1, 0x04, 0x00) >= 1);
    fx_done(&fx);
}

static void test_discovery_ignores_stale_silent_and_garbage(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    char stale[128];
    assert_int_equal(fake_stale_socket(fx.dir, 3001, 1, stale, sizeof(stale)), 0);
    (void)fx_fake(&fx, 3002, 1, 0x10, FAKE_SILENT, 3);
    (void)fx_fake(&fx, 3003, 1, 0x11, FAKE_GARBAGE, 3);
    (void)fx_fake(&fx, 3004, 1, 0x12, FAKE_TRUNCATED, 3);
    /* a regular file with a socket's name: never probed */
    char path[160];
    assert_true(snprintf(path, sizeof(path), "%s/dotnet-diagnostic-3005-1-socket", fx.dir) > 0);
    FILE *regular = fopen(path, "w");
    assert_non_null(regular);
    assert_int_equal(fclose(regular), 0);
    (void)fx_fake(&fx, 3000, 1, 0x13, FAKE_NORMAL, 3);

    uint64_t t0 = tl_ms();
    fx_start(&fx, 400, 5000);
    /* The good runtime is not held up by the others. */
    assert_true(wait_pid(&fx, 3000, true, 2000));
    ASSERT_BELOW_MS(tl_ms() - t0, 300);
    /* ready waits for the silent one's probe to time out, not longer */
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    ASSERT_BELOW_MS(tl_ms() - t0, 1000);
    assert_int_equal(ipc_discovery_count(fx.d), 1);

    /* across rescans and liveness rounds nothing else ever shows up */
    tl_run_for(fx.tl, 1500);
    assert_int_equal(ipc_discovery_count(fx.d), 1);
    assert_int_equal(fx.added, 1);
    assert_int_equal(fx.removed, 0);
    fx_done(&fx);
}

/*
 * retry_max_ms caps the doubling wait before a failed probe is tried again (from rescan_ms):
 * with 200 ms, a runtime answering garbage is asked about every 200 ms, where the 60 s default
 * would have doubled to 1.6 s by then.
 */
static unsigned probes_in(struct dfx *fx, uint64_t retry_max_ms, uint8_t tag)
{
    struct fake_runtime *f = fx_fake(fx, 3100 + tag, 1, tag, FAKE_GARBAGE, 3);
    struct ipc_discovery_config cfg = {
        .dir = fx->dir, .probe_timeout_ms = 400, .rescan_ms = 50, .retry_max_ms = retry_max_ms};
    assert_int_equal(ipc_discovery_new(&fx->tl->loop, &cfg, on_change, fx, &fx->d), 0);
    assert_int_equal(ipc_discovery_start(fx->d), 0);
    tl_run_for(fx->tl, 2500);
    unsigned n = fake_runtime_connections(f);
    assert_int_equal(ipc_discovery_count(fx->d), 0);
    return n;
}

static void test_discovery_retry_max(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    unsigned capped = probes_in(&fx, 200, 0x20);
    fx_done(&fx);
    fx_init(&fx, *state);
    unsigned doubling = probes_in(&fx, 0, 0x21);
    fx_done(&fx);
    fprintf(stderr, "  probes in 2.5 s: %u with retry_max_ms 200, %u with the default\n", capped,
            doubling);
    assert_true(capped >= 9);
    assert_true(doubling <= 7);
}

static void test_discovery_removes_unlinked_socket(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct fake_runtime *f = fx_fake(&fx, 5000, 7, 0x20, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 60000); /* no rescan: the fs event must do it */
    assert_true(wait_pid(&fx, 5000, true, 2000));
    uint64_t t0 = tl_ms();
    assert_int_equal(unlink(fake_runtime_path(f)), 0);
    assert_true(wait_pid(&fx, 5000, false, 2000));
    ASSERT_BELOW_MS(tl_ms() - t0, 2000);
    assert_int_equal(fx.removed, 1);
    assert_int_equal(fx.last_removed_pid, 5000);
    fx_done(&fx);
}

static void test_discovery_removes_dead_runtime(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct fake_runtime *f = fx_fake(&fx, 6000, 7, 0x30, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 60000);
    assert_true(wait_pid(&fx, 6000, true, 2000));
    /* SIGKILL: the listener is gone, the socket file stays */
    uint64_t t0 = tl_ms();
    fake_runtime_kill(f);
    assert_true(wait_pid(&fx, 6000, false, 2500));
    ASSERT_BELOW_MS(tl_ms() - t0, 2000);
    assert_int_equal(access(fake_runtime_path(f), F_OK), 0);
    assert_int_equal(fx.removed, 1);
    /* and it does not come back */
    tl_run_for(fx.tl, 1200);
    assert_int_equal(ipc_discovery_count(fx.d), 0);
    assert_int_equal(fx.added, 1);
    fx_done(&fx);
}

/* Several sockets of ONE runtime (same pid, same cookie): the newest wins (ipc.md §1.2). */
static void test_discovery_newest_socket_wins(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    (void)fx_fake(&fx, 7000, 100, 0xa2, FAKE_NORMAL, 3);
    struct fake_runtime *newer = fx_fake(&fx, 7000, 200, 0xa2, FAKE_NORMAL, 3);
    (void)fx_fake(&fx, 7000, 150, 0xa2, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 5000);
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    if (ipc_discovery_count(fx.d) != 1 || fx.added != 1) {
        fail_msg("count %zu, changes: %s", ipc_discovery_count(fx.d), fx.trace);
    }
    const struct ipc_process *p = ipc_discovery_at(fx.d, 0);
    assert_int_equal(p->key, 200);
    assert_string_equal(p->uid, "3f2504e0-4f89-11d3-9a0c-0305e82c33a2");
    assert_string_equal(p->endpoint, fake_runtime_path(newer));
    assert_int_equal(fx.added, 1);

    /* when the newest dies, the next newest takes over */
    fake_runtime_kill(newer);
    uint64_t t0 = tl_ms();
    while (tl_ms() - t0 < 2500 &&
           (ipc_discovery_count(fx.d) != 1 || ipc_discovery_at(fx.d, 0)->key != 150)) {
        tl_run_for(fx.tl, 20);
    }
    assert_int_equal(ipc_discovery_count(fx.d), 1);
    assert_int_equal(ipc_discovery_at(fx.d, 0)->key, 150);
    assert_int_equal(fx.removed, 1);
    assert_int_equal(fx.added, 2);
    fx_done(&fx);
}

/* Runtimes in different pid namespaces that share the socket folder may all be "pid 7000": they
 * are different runtimes (different cookies) and all are listed. */
static void test_discovery_same_pid_other_cookies(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    (void)fx_fake(&fx, 7000, 100, 0xa1, FAKE_NORMAL, 3);
    (void)fx_fake(&fx, 7000, 200, 0xa2, FAKE_NORMAL, 3);
    (void)fx_fake(&fx, 7000, 150, 0xa3, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 5000);
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    if (ipc_discovery_count(fx.d) != 3 || fx.added != 3) {
        fail_msg("count %zu, changes: %s", ipc_discovery_count(fx.d), fx.trace);
    }
    char tails[4] = {0};
    for (size_t i = 0; i < 3; i++) {
        const struct ipc_process *p = ipc_discovery_at(fx.d, i);
        assert_int_equal(p->pid, 7000);
        tails[i] = p->uid[35];
    }
    assert_non_null(strchr(tails, '1'));
    assert_non_null(strchr(tails, '2'));
    assert_non_null(strchr(tails, '3'));
    fx_done(&fx);
}

static void test_discovery_sees_new_runtime_at_once(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    fx_start(&fx, 2000, 60000); /* no rescan: the fs event must do it */
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 2000));
    assert_int_equal(ipc_discovery_count(fx.d), 0);
    uint64_t t0 = tl_ms();
    (void)fx_fake(&fx, 8000, 1, 0x40, FAKE_NORMAL, 3);
    assert_true(wait_pid(&fx, 8000, true, 2000));
    ASSERT_BELOW_MS(tl_ms() - t0, 1000);
    fx_done(&fx);
}

static void test_discovery_busy_process_is_not_checked(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct fake_runtime *f = fx_fake(&fx, 9000, 1, 0x50, FAKE_NORMAL, 3);
    fx_start(&fx, 2000, 60000);
    assert_true(wait_pid(&fx, 9000, true, 2000));
    const struct ipc_process *p = find_pid(fx.d, 9000);
    if (p == NULL) {
        fail_msg("pid 9000 vanished");
        return;
    }
    char uid[IPC_GUID_STR_SIZE];
    memcpy(uid, p->uid, sizeof(uid));
    assert_int_equal(ipc_discovery_busy(fx.d, uid, +1), 0);
    assert_int_equal(find_pid(fx.d, 9000)->busy, 1);
    assert_int_equal(ipc_discovery_busy(fx.d, "00000000-0000-0000-0000-000000000000", 1),
                     AGENT_E_NOTFOUND);

    unsigned before = fake_runtime_requests(f, 0x04, 0x00);
    tl_run_for(fx.tl, 1500);
    assert_int_equal(fake_runtime_requests(f, 0x04, 0x00), before); /* no liveness checks */
    fake_runtime_kill(f);
    tl_run_for(fx.tl, 2200);
    assert_non_null(find_pid(fx.d, 9000)); /* busy: kept */

    assert_int_equal(ipc_discovery_busy(fx.d, uid, -1), 0);
    assert_int_equal(ipc_discovery_busy(fx.d, uid, -5), 0);
    assert_int_equal(find_pid(fx.d, 9000)->busy, 0); /* clamped */
    assert_true(wait_pid(&fx, 9000, false, 2500));
    fx_done(&fx);
}

static void test_discovery_close_with_probes_in_flight(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    for (int i = 0; i < 4; i++) {
        (void)fx_fake(&fx, 10000 + (uint64_t)i, 1, (uint8_t)i, FAKE_SILENT, 3);
    }
    fx_start(&fx, 10000, 5000);
    tl_run_for(fx.tl, 150);
    assert_false(ipc_discovery_ready(fx.d));
    fx_done(&fx); /* asserts the close completes well before the 10 s probe timeout */
}

static void test_discovery_close_before_start(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    struct ipc_discovery_config cfg = {.dir = fx.dir};
    assert_int_equal(ipc_discovery_new(&fx.tl->loop, &cfg, NULL, NULL, &fx.d), 0);
    fx_done(&fx);

    struct ipc_discovery *d = NULL;
    struct ipc_discovery_config bad = {.dir = NULL};
    assert_int_equal(ipc_discovery_new(&fx.tl->loop, &bad, NULL, NULL, &d), AGENT_E_INVAL);
    assert_null(d);
}

static void test_discovery_many_runtimes(void **state)
{
    struct dfx fx;
    fx_init(&fx, *state);
    /* More than the 16 probes allowed in flight at once, some of them slow. */
    for (int i = 0; i < 40; i++) {
        (void)fx_fake(&fx, 20000 + (uint64_t)i, 1, (uint8_t)i, FAKE_NORMAL, 1 + i % 3);
    }
    for (int i = 0; i < 4; i++) {
        (void)fx_fake(&fx, 21000 + (uint64_t)i, 1, (uint8_t)i, FAKE_SILENT, 3);
    }
    fx_start(&fx, 500, 5000);
    assert_true(tl_run_until(fx.tl, is_ready, &fx, 5000));
    assert_int_equal(ipc_discovery_count(fx.d), 40);
    for (size_t i = 1; i < 40; i++) {
        assert_true(ipc_discovery_at(fx.d, i - 1)->pid < ipc_discovery_at(fx.d, i)->pid);
    }
    fx_done(&fx);
}

int main(void)
{
    if (getenv("IPC_TEST_DEBUG") != NULL) {
        log_set_level(LOG_DEBUG);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_discovery_lists_fake_runtime, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_host_pid, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_falls_back_to_older_process_info, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_ignores_stale_silent_and_garbage, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_retry_max, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_removes_unlinked_socket, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_removes_dead_runtime, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_newest_socket_wins, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_same_pid_other_cookies, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_sees_new_runtime_at_once, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_busy_process_is_not_checked, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_close_with_probes_in_flight, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_close_before_start, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_discovery_many_runtimes, tl_setup, tl_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
