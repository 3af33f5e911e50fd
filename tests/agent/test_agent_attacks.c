/* SPDX-License-Identifier: MIT */
/*
 * Integration: the attacks of SECURITY.md, run for real against the real dotmon binary. dotmon
 * runs as root (as it often does in a pod) beside folders and a port that a second user can
 * reach: `dotmon-attacker`, made with useradd, its programs started through setpriv. Each test
 * fails against a dotmon without the matching defence.
 *
 *  1. Symlink race in listen mode: with DiagnosticPort:SocketMode=0666 in a folder of mode 0777
 *     (an emptyDir), the attacker swaps the new socket for a symlink to a root-owned 0600 file
 *     the moment it appears (tests/tools/attack_swap, inotify). Over many starts the file keeps
 *     its mode and owner; each start either works or is refused with a clear reason.
 *  2. A FIFO at the dump path: a runtime (the fake runtime, on a thread of this test) plants a FIFO
 *     where the dump should be and answers OK, four times. Each request is answered at
 *     once with 502 naming the FIFO, the FIFOs are gone, a real app's dump still works, discovery
 *     still lists both, and SIGTERM ends dotmon in under 5 s.
 *  3. A planted socket: the attacker serves a diagnostic socket in the shared /tmp (mode 1777)
 *     claiming the real app's pid (tests/tools/attack_runtime, made-up ProcessInfo). It is never
 *     listed, pid= and default-process selection keep answering with the real app, the refusal
 *     is logged once. The same socket made to look root-owned (chown by root) is refused after
 *     connecting (SO_PEERCRED). In listen mode with SocketMode 0666, the attacker connecting and
 *     advertising is refused at accept, said once.
 *  4. A connection flood: 1,100 connections that send one byte and stay, reopened whenever dotmon
 *     closes one, for 30 s (10 s under ASan). Every /healthz probe (a new connection every 250 ms,
 *     as a kubelet does) gets 200 within 1 s, an authenticated user gets 200 too, and dotmon's
 *     descriptors come back to baseline after.
 *
 * Where no second user can be made (not root, no useradd), each test that needs one says so and
 * is skipped, and the program exits 77 (ctest: skipped) unless something failed.
 */
#define _GNU_SOURCE /* getpwnam_r, struct ucred */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "fake_runtime.h"
#include "fake_thread.h"
#include "timebound.h"

#define ATTACKER       "dotmon-attacker"
#define RACE_STARTS    30
#define FLOOD_CONNS    1100
#define PROBE_EVERY_MS 250
#define PROBE_LIMIT_MS 1000
/* The flood measures latency and RSS: ctest runs it (test_agent_flood) in the normal build only
 * (label perf). */
#define FLOOD_SECONDS 30

/* ---- the second user ----------------------------------------------------------------------------
 */

static uid_t attacker_uid;
static gid_t attacker_gid;

/* Makes (once) and finds the attacker user; false with a reason when this machine cannot. */
static bool attacker_ready(char *why, size_t cap)
{
    if (geteuid() != 0) {
        snprintf(why, cap, "not root: cannot create a second user or drop to it");
        return false;
    }
    struct passwd pw, *res = NULL;
    char buf[4096];
    if (getpwnam_r(ATTACKER, &pw, buf, sizeof(buf), &res) != 0 || res == NULL) {
        const char *argv[] = {"useradd", "--system",          "--no-create-home",
                              "--shell", "/usr/sbin/nologin", ATTACKER,
                              NULL};
        struct proc *p = NULL;
        struct proc_opts o = {.argv = argv, .label = "useradd", .stdin_null = true};
        int st = -1;
        if (proc_spawn(&o, &p) == 0) {
            (void)proc_wait(p, 30000, &st);
            proc_free(p);
        }
        if (getpwnam_r(ATTACKER, &pw, buf, sizeof(buf), &res) != 0 || res == NULL) {
            snprintf(why, cap, "useradd %s failed (status %d)", ATTACKER, st);
            return false;
        }
    }
    attacker_uid = pw.pw_uid;
    attacker_gid = pw.pw_gid;
    if (access("/usr/bin/setpriv", X_OK) != 0) {
        snprintf(why, cap, "setpriv (util-linux) is missing");
        return false;
    }
    return true;
}

/* Set when a test was skipped for want of a second user (main then exits 77: ctest skipped). */
static bool skipped_no_user;

#define REQUIRE_ATTACKER()                                                                         \
    do {                                                                                           \
        char why_[256];                                                                            \
        if (!attacker_ready(why_, sizeof(why_))) {                                                 \
            fprintf(stderr, "SKIPPED: %s\n", why_);                                                \
            skipped_no_user = true;                                                                \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* Starts prog (with args, NULL-terminated) as the attacker and waits for its "ready" line. */
static struct proc *spawn_attacker(const char *const *prog_args, const char *label, char **ready)
{
    char ruid[32], rgid[32];
    snprintf(ruid, sizeof(ruid), "--reuid=%u", (unsigned)attacker_uid);
    snprintf(rgid, sizeof(rgid), "--regid=%u", (unsigned)attacker_gid);
    const char *argv[16] = {"setpriv", ruid, rgid, "--clear-groups", "--"};
    size_t k = 5;
    for (size_t i = 0; prog_args[i] != NULL && k < 15; i++) {
        argv[k++] = prog_args[i];
    }
    argv[k] = NULL;
    struct proc *p = NULL;
    struct proc_opts o = {.argv = argv, .label = label, .stdin_null = true};
    assert_int_equal(proc_spawn(&o, &p), 0);
    if (proc_wait_line(p, PROC_STDOUT, "ready", testenv_timeout(10000), ready) != 0) {
        proc_dump(p, stderr, 4096);
        proc_free(p);
        fail_msg("%s did not start", label);
    }
    return p;
}

static const char *tool(const char *var)
{
    const char *p = getenv(var);
    if (p == NULL || *p == '\0') {
        fail_msg("%s is not set (tests/tools/tools.cmake)", var);
    }
    return p;
}

/* Lines of what p wrote on stream s that contain every needle given (NULL-terminated). */
static size_t count_lines(struct proc *p, enum proc_stream s, const char *const *needles)
{
    char *text = proc_output(p, s, NULL);
    assert_non_null(text);
    size_t n = 0;
    for (char *line = text; line != NULL && *line != '\0';) {
        char *end = strchr(line, '\n');
        if (end != NULL) {
            *end = '\0';
        }
        bool all = true;
        for (size_t i = 0; needles[i] != NULL && all; i++) {
            all = strstr(line, needles[i]) != NULL;
        }
        n += all;
        line = end != NULL ? end + 1 : NULL;
    }
    free(text);
    return n;
}

/* ---- 1. the symlink race ------------------------------------------------------------------------
 */

static bool is_listening_or_refused(const char *line, void *ctx)
{
    (void)ctx;
    return strstr(line, "Now listening on") != NULL || strstr(line, "\"Error\"") != NULL;
}

static void test_attack_symlink_race(void **state)
{
    struct testenv *env = *state;
    REQUIRE_ATTACKER();
    /* The victim: a root-only file in a root-only folder the attacker cannot even look into. */
    char victim[64];
    snprintf(victim, sizeof(victim), "%s/victim", env->dir);
    int fd = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "secret\n", 7), 7);
    close(fd);
    /* The shared folder: like an emptyDir, mode 0777 without the sticky bit. */
    char shared[64];
    snprintf(shared, sizeof(shared), "/tmp/dmrXXXXXX");
    assert_non_null(mkdtemp(shared));
    assert_int_equal(chmod(shared, 0777), 0);
    char sock[96];
    snprintf(sock, sizeof(sock), "%s/dm.sock", shared);

    const char *racer_args[] = {tool("DOTMON_ATTACK_SWAP"), shared, "dm.sock", victim, NULL};
    struct proc *racer = spawn_attacker(racer_args, "attack_swap", NULL);

    const char *argv[] = {
        env->dotmon_bin, "collect", "--no-auth",         "--urls", "http://127.0.0.1:0",
        "--metrics",     "false",   "--diagnostic-port", sock,     NULL};
    char tmpdir[64];
    snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", env->dir);
    const char *denv[] = {tmpdir, "DotnetMonitor_DiagnosticPort__SocketMode=0666", NULL};
    int started = 0, refused = 0;
    for (int i = 0; i < RACE_STARTS; i++) {
        (void)unlink(sock); /* the attacker's symlink, or the socket a refused start left */
        struct proc *dm = NULL;
        struct proc_opts o = {.argv = argv, .env = denv, .label = "dotmon", .stdin_null = true};
        assert_int_equal(proc_spawn(&o, &dm), 0);
        char *line = NULL;
        int rc = proc_wait_line_match(dm, PROC_STDERR, is_listening_or_refused, NULL,
                                      testenv_timeout(15000), &line);
        if (rc == 0 && strstr(line, "Now listening on") != NULL) {
            started++;
        } else {
            /* Refused: it must say why, and exit 1. */
            int st = 0;
            assert_int_equal(proc_wait(dm, testenv_timeout(10000), &st), 0);
            if (!(WIFEXITED(st) && WEXITSTATUS(st) == 1) ||
                proc_find_line(dm, PROC_STDERR, "", NULL) != 0) {
                proc_dump(dm, stderr, 4096);
                fail_msg("start %d neither listened nor refused with exit 1", i);
            }
            const char *const why[] = {"was replaced right after dotmon bound it", NULL};
            if (count_lines(dm, PROC_STDERR, why) != 1) {
                proc_dump(dm, stderr, 4096);
                fail_msg("start %d was refused without the reason", i);
            }
            refused++;
        }
        free(line);
        int st = 0;
        (void)proc_kill(dm, testenv_timeout(5000), &st);
        proc_free(dm);
        struct stat vs;
        assert_int_equal(stat(victim, &vs), 0);
        if ((vs.st_mode & 07777) != 0600 || vs.st_uid != 0) {
            fail_msg("after start %d the victim is mode %04o owner %u: dotmon changed a file "
                     "through the attacker's symlink",
                     i, (unsigned)(vs.st_mode & 07777), (unsigned)vs.st_uid);
        }
    }
    const char *const swapped[] = {"swapped", NULL};
    size_t swaps = count_lines(racer, PROC_STDOUT, swapped);
    fprintf(stderr,
            "symlink race: %d starts, %d listened, %d refused, %zu swaps by the attacker; "
            "victim still 0600 root\n",
            RACE_STARTS, started, refused, swaps);
    /* The attack really ran: the racer swapped the socket on most starts. */
    assert_true(swaps >= RACE_STARTS / 2);
    proc_free(racer);

    /* Without the racer the socket is exactly what was configured. */
    (void)unlink(sock);
    struct dotmon *dm = NULL;
    const char *args[] = {"--no-auth", "--diagnostic-port", sock, NULL};
    const char *menv[] = {"DotnetMonitor_DiagnosticPort__SocketMode=0666", NULL};
    assert_int_equal(testenv_start_dotmon(env, args, menv, &dm), 0);
    struct stat ss;
    assert_int_equal(lstat(sock, &ss), 0);
    assert_true(S_ISSOCK(ss.st_mode));
    assert_int_equal(ss.st_mode & 07777, 0666);
    agent_test_stop_dotmon_clean(dm);
    /* It removed its own socket, and left no private folder behind. */
    assert_int_equal(lstat(sock, &ss), -1);
    DIR *d = opendir(shared);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        assert_null(strstr(e->d_name, ".dotmon-"));
    }
    closedir(d);
    (void)testenv_rm_rf(shared);
}

/* ---- 2. a FIFO at the dump path
 * ------------------------------------------------------------------ */

struct dump_req {
    uint16_t port;
    char target[96];
    struct httpc_resp r;
    int rc;
    double ms;
    pthread_t th;
};

static void *dump_req_main(void *arg)
{
    struct dump_req *q = arg;
    double t0 = testenv_now_ms();
    q->rc = httpc_get(q->port, q->target, NULL, testenv_timeout(10000), &q->r);
    q->ms = testenv_now_ms() - t0;
    return NULL;
}

static size_t fifos_in(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        struct stat st;
        /* Only dotmon's names: the runtime's own debugger pipes (clr-debug-pipe-*) are FIFOs. */
        if (strncmp(e->d_name, "dotmon_", 7) == 0 &&
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISFIFO(st.st_mode)) {
            n++;
        }
    }
    closedir(d);
    return n;
}

static struct fake_thread *fifo_fake;

static void count_files(struct fake_runtime *f, void *arg)
{
    struct fake_dump_info info;
    fake_runtime_dump_info(f, &info);
    *(unsigned *)arg = info.files;
}

static void test_attack_dump_fifo(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct fake_runtime_config cfg;
    fake_runtime_config_init(&cfg, (uint64_t)getpid(), 77, 0x5a, "/opt/evil/FifoRuntime",
                             "FifoRuntime");
    cfg.dump.fault = FAKE_DUMP_FIFO;
    assert_int_equal(fake_thread_start(env->dir, &cfg, &fifo_fake), 0);

    const char *args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, NULL, &dm), 0);
    pid_t pids[2] = {app->pid, getpid()};
    cJSON_Delete(agent_test_wait_processes(dm, pids, 2, 15000));

    /* Four times: before the fix each one held a thread-pool thread (libuv has four) in open()
     * forever, and with them every dump, directory scan and the shutdown. One at a time: a
     * second dump of a runtime whose first is unanswered gets 429 anyway. */
    struct dump_req q[4];
    for (int i = 0; i < 4; i++) {
        memset(&q[i], 0, sizeof(q[i]));
        q[i].port = dm->port;
        snprintf(q[i].target, sizeof(q[i].target), "/dump?pid=%d&type=Mini", (int)getpid());
        assert_int_equal(pthread_create(&q[i].th, NULL, dump_req_main, &q[i]), 0);
        pthread_join(q[i].th, NULL);
        fprintf(stderr, "FIFO dump %d: rc %d status %d in %.0f ms: %s\n", i, q[i].rc, q[i].r.status,
                q[i].ms, q[i].r.body ? q[i].r.body : "");
        assert_int_equal(q[i].rc, 0);
        agent_test_assert_problem(&q[i].r, 502);
        assert_non_null(strstr(q[i].r.body, "a FIFO"));
        httpc_resp_fini(&q[i].r);
    }
    unsigned planted = 0;
    fake_thread_call(fifo_fake, count_files, &planted);
    assert_int_equal(planted, 4);            /* the attack happened four times */
    assert_int_equal(fifos_in(env->dir), 0); /* and dotmon deleted every FIFO */

    /* Everything else still works: a real dump, discovery, the process list. */
    char target[64];
    snprintf(target, sizeof(target), "/dump?pid=%d&type=Mini", (int)app->pid);
    struct httpc_resp r;
    assert_int_equal(httpc_get(dm->port, target, NULL, testenv_timeout(120000), &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.body_len > 4 && memcmp(r.body,
                                         "\x7f"
                                         "ELF",
                                         4) == 0);
    httpc_resp_fini(&r);
    cJSON_Delete(agent_test_wait_processes(dm, pids, 2, 5000));

    double t0 = testenv_now_ms();
    int st = 0;
    assert_int_equal(testenv_stop_dotmon(dm, 10000, &st), 0);
    double ms = testenv_now_ms() - t0;
    fprintf(stderr, "SIGTERM after the FIFO attack: exited (status %d) in %.0f ms\n",
            WIFEXITED(st) ? WEXITSTATUS(st) : -1, ms);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    ASSERT_BELOW_MS(ms, 5000);
    fake_thread_stop(fifo_fake);
    fifo_fake = NULL;
}

static int fifo_teardown(void **state)
{
    if (fifo_fake != NULL) {
        fake_thread_stop(fifo_fake);
        fifo_fake = NULL;
    }
    return agent_test_teardown(state);
}

/* ---- 3. a planted socket
 * ------------------------------------------------------------------------- */

/* The listed processes' pids and command lines, as one string for messages and checks. */
static void expect_only_real_app(struct dotmon *dm, const struct test_app *app)
{
    cJSON *arr = agent_test_get_json(dm, "/processes", 200);
    assert_int_equal(cJSON_GetArraySize(arr), 1);
    assert_int_equal(agent_test_int(cJSON_GetArrayItem(arr, 0), "pid"), app->pid);
    cJSON_Delete(arr);
    char target[64];
    snprintf(target, sizeof(target), "/process?pid=%d", (int)app->pid);
    cJSON *p = agent_test_get_json(dm, target, 200);
    assert_non_null(strstr(agent_test_str(p, "commandLine"), app->marker));
    cJSON_Delete(p);
    p = agent_test_get_json(dm, "/process", 200); /* the default process */
    assert_non_null(strstr(agent_test_str(p, "commandLine"), app->marker));
    cJSON_Delete(p);
    snprintf(target, sizeof(target), "/env?pid=%d", (int)app->pid);
    struct httpc_resp r;
    assert_int_equal(testenv_dotmon_get(dm, target, &r), 0);
    assert_int_equal(r.status, 200);
    httpc_resp_fini(&r);
}

static void test_attack_foreign_socket(void **state)
{
    struct testenv *env = *state;
    REQUIRE_ATTACKER();
    struct test_app *app = agent_test_start_app(env);
    /* The shared /tmp: anyone may create files (sticky). */
    assert_int_equal(chmod(env->dir, 01777), 0);
    char pid_s[24];
    snprintf(pid_s, sizeof(pid_s), "%d", (int)app->pid);
    char *ready = NULL;
    const char *a1[] = {tool("DOTMON_ATTACK_RUNTIME"), env->dir, pid_s, "1", NULL};
    struct proc *planted = spawn_attacker(a1, "attack_runtime", &ready);
    char planted_path[128];
    snprintf(planted_path, sizeof(planted_path), "%s", ready + strlen("ready "));
    free(ready);
    struct stat ps;
    assert_int_equal(lstat(planted_path, &ps), 0);
    assert_int_equal(ps.st_uid, attacker_uid);

    struct dotmon *dm = agent_test_start_dotmon(env, (const char *const[]){"--temp-apikey", NULL});
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 15000));
    /* Across liveness checks and a full rescan (5 s), nothing changes and nothing repeats. */
    for (int i = 0; i < 7; i++) {
        expect_only_real_app(dm, app);
        testenv_sleep_ms(1000);
    }
    char owner[48];
    snprintf(owner, sizeof(owner), "owned by uid %u", (unsigned)attacker_uid);
    const char *const refusal[] = {"\"Warning\"", planted_path, owner, NULL};
    size_t said = count_lines(dm->proc, PROC_STDERR, refusal);
    fprintf(stderr, "planted socket %s: refused, said %zu time(s)\n", planted_path, said);
    assert_int_equal(said, 1);

    /*
     * The same attacker's socket made to look like root's (owner changed by root, as a file
     * swapped in by someone who can): the owner check passes, the listener's credentials do not.
     * A higher key than the app's would win for that pid if it were listed. It is staged in a
     * folder of its own and renamed in whole, so dotmon only ever sees the root-owned file.
     */
    char stage[64];
    snprintf(stage, sizeof(stage), "/tmp/dmsXXXXXX");
    assert_non_null(mkdtemp(stage));
    assert_int_equal(chmod(stage, 0777), 0);
    const char *a2[] = {tool("DOTMON_ATTACK_RUNTIME"), stage, pid_s, "999999", NULL};
    struct proc *posing = spawn_attacker(a2, "attack_runtime2", &ready);
    char staged[128], posed[128];
    snprintf(staged, sizeof(staged), "%s", ready + strlen("ready "));
    free(ready);
    snprintf(posed, sizeof(posed), "%s/dotnet-diagnostic-%s-999999-socket", env->dir, pid_s);
    assert_int_equal(chown(staged, 0, 0), 0);
    assert_int_equal(rename(staged, posed), 0);
    snprintf(owner, sizeof(owner), "its listener runs as uid %u", (unsigned)attacker_uid);
    const char *const refusal2[] = {"\"Warning\"", posed, owner, NULL};
    double end = testenv_now_ms() + testenv_timeout(15000);
    while (count_lines(dm->proc, PROC_STDERR, refusal2) == 0) {
        if (testenv_now_ms() > end) {
            proc_dump(dm->proc, stderr, 8192);
            fail_msg("the root-owned socket served by uid %u was not refused",
                     (unsigned)attacker_uid);
        }
        testenv_sleep_ms(100);
    }
    for (int i = 0; i < 3; i++) {
        expect_only_real_app(dm, app);
        testenv_sleep_ms(1000);
    }
    assert_int_equal(count_lines(dm->proc, PROC_STDERR, refusal2), 1);
    agent_test_stop_dotmon_clean(dm);
    proc_free(posing);
    proc_free(planted);
    (void)testenv_rm_rf(stage);

    /*
     * Listen mode with a socket anyone may connect to (SocketMode 0666): the attacker connects
     * and advertises as a runtime, again and again. Refused at accept (SO_PEERCRED), said once.
     */
    char sock[96];
    snprintf(sock, sizeof(sock), "%s/dm.sock", env->dir);
    const char *largs[] = {"--no-auth", "--diagnostic-port", sock, NULL};
    const char *lenv[] = {"DotnetMonitor_DiagnosticPort__SocketMode=0666", NULL};
    assert_int_equal(testenv_start_dotmon(env, largs, lenv, &dm), 0);
    const char *a3[] = {tool("DOTMON_ATTACK_RUNTIME"), "--reverse", sock, pid_s, NULL};
    struct proc *connecting = spawn_attacker(a3, "attack_runtime3", NULL);
    snprintf(owner, sizeof(owner), "from uid %u", (unsigned)attacker_uid);
    const char *const refusal3[] = {"\"Warning\"", "refused a connection", owner, NULL};
    end = testenv_now_ms() + testenv_timeout(10000);
    while (count_lines(dm->proc, PROC_STDERR, refusal3) == 0) {
        if (testenv_now_ms() > end) {
            proc_dump(dm->proc, stderr, 8192);
            fail_msg("the attacker's connection to the listen socket was not refused");
        }
        testenv_sleep_ms(100);
    }
    testenv_sleep_ms(2000); /* it reconnects every 10-500 ms */
    cJSON *arr = agent_test_get_json(dm, "/processes", 200);
    assert_int_equal(cJSON_GetArraySize(arr), 0);
    cJSON_Delete(arr);
    assert_int_equal(count_lines(dm->proc, PROC_STDERR, refusal3), 1);
    agent_test_stop_dotmon_clean(dm);
    proc_free(connecting);
}

/* ---- 4. a connection flood
 * ----------------------------------------------------------------------- */

struct flood {
    uint16_t port;
    atomic_bool stop;
    atomic_ulong opened;
    atomic_ulong closed_by_server;
    atomic_int open_now;
    pthread_t th;
};

static int flood_connect(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Keeps FLOOD_CONNS connections open, each having sent one byte; reopens whatever closes. */
static void *flood_main(void *arg)
{
    struct flood *f = arg;
    struct pollfd *p = calloc(FLOOD_CONNS, sizeof(*p));
    bool *sent = calloc(FLOOD_CONNS, sizeof(*sent));
    assert_non_null(p);
    assert_non_null(sent);
    for (int i = 0; i < FLOOD_CONNS; i++) {
        p[i].fd = -1;
    }
    while (!atomic_load(&f->stop)) {
        int open_now = 0;
        for (int i = 0; i < FLOOD_CONNS; i++) {
            if (p[i].fd < 0) {
                p[i].fd = flood_connect(f->port);
                sent[i] = false;
                if (p[i].fd >= 0) {
                    atomic_fetch_add(&f->opened, 1);
                }
            }
            if (p[i].fd >= 0) {
                open_now++;
            }
            p[i].events = (short)(POLLIN | (sent[i] ? 0 : POLLOUT));
        }
        atomic_store(&f->open_now, open_now);
        if (poll(p, FLOOD_CONNS, 50) <= 0) {
            continue;
        }
        for (int i = 0; i < FLOOD_CONNS; i++) {
            if (p[i].fd < 0 || p[i].revents == 0) {
                continue;
            }
            if ((p[i].revents & POLLOUT) != 0 && !sent[i]) {
                sent[i] = send(p[i].fd, "G", 1, MSG_NOSIGNAL) == 1;
            }
            if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
                char b[512];
                ssize_t n = recv(p[i].fd, b, sizeof(b), MSG_DONTWAIT);
                if (n == 0 || (n < 0 && errno != EAGAIN)) {
                    close(p[i].fd);
                    p[i].fd = -1;
                    atomic_fetch_add(&f->closed_by_server, 1);
                }
            }
        }
    }
    for (int i = 0; i < FLOOD_CONNS; i++) {
        if (p[i].fd >= 0) {
            close(p[i].fd);
        }
    }
    free(p);
    free(sent);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void test_flood_healthz(void **state)
{
    struct testenv *env = *state;
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < FLOOD_CONNS + 256) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
        if (rl.rlim_cur < FLOOD_CONNS + 256) {
            fprintf(stderr, "SKIPPED: the open file limit (%llu) is too low for the flood\n",
                    (unsigned long long)rl.rlim_cur);
            skip();
        }
    }
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, (const char *const[]){"--temp-apikey", NULL});
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 15000));
    pid_t dpid = proc_pid(dm->proc);
    int fd_base = agent_test_fd_baseline(dpid);
    long rss_base = testenv_rss_kb(dpid);

    struct flood f = {.port = dm->port};
    assert_int_equal(pthread_create(&f.th, NULL, flood_main, &f), 0);
    double start = testenv_now_ms();
    while (atomic_load(&f.open_now) < FLOOD_CONNS && testenv_now_ms() - start < 5000) {
        testenv_sleep_ms(50);
    }
    size_t cap = (FLOOD_SECONDS * 1000) / PROBE_EVERY_MS + 8;
    double *lat = calloc(cap, sizeof(*lat));
    assert_non_null(lat);
    size_t n = 0, bad = 0, users = 0, users_bad = 0;
    double user_max = 0;
    long rss_max = 0;
    int fds_max = 0;
    double t_end = testenv_now_ms() + FLOOD_SECONDS * 1000.0;
    while (testenv_now_ms() < t_end && n < cap) {
        struct httpc_resp r;
        double t0 = testenv_now_ms();
        int rc = httpc_get(dm->port, "/healthz", NULL, PROBE_LIMIT_MS, &r);
        double ms = testenv_now_ms() - t0;
        if (rc != 0 || r.status != 200 || ms >= PROBE_LIMIT_MS) {
            fprintf(stderr, "probe %zu: rc %d status %d in %.0f ms (%s)\n", n, rc, r.status, ms,
                    r.error);
            bad++;
        }
        httpc_resp_fini(&r);
        lat[n++] = ms;
        if (n % 4 == 0) {
            /* An authenticated user, on a new connection too. */
            const char *h[] = {dm->auth_header, NULL};
            t0 = testenv_now_ms();
            rc = httpc_get(dm->port, "/processes", h, PROBE_LIMIT_MS, &r);
            ms = testenv_now_ms() - t0;
            users++;
            user_max = ms > user_max ? ms : user_max;
            if (rc != 0 || r.status != 200) {
                fprintf(stderr, "user request: rc %d status %d in %.0f ms\n", rc, r.status, ms);
                users_bad++;
            }
            httpc_resp_fini(&r);
            long rss = testenv_rss_kb(dpid);
            int fds = testenv_fd_count(dpid);
            rss_max = rss > rss_max ? rss : rss_max;
            fds_max = fds > fds_max ? fds : fds_max;
        }
        double wait = PROBE_EVERY_MS - (testenv_now_ms() - t0);
        if (wait > 0) {
            testenv_sleep_ms((int)wait);
        }
    }
    atomic_store(&f.stop, true);
    pthread_join(f.th, NULL);
    qsort(lat, n, sizeof(*lat), cmp_double);
    int fds_after = agent_test_wait_fds(dpid, fd_base, 15000);
    long rss_after = testenv_rss_kb(dpid);
    fprintf(stderr,
            "flood: %d connections kept for %d s: %lu opened, %lu closed by dotmon; /healthz: "
            "%zu probes, %zu failed, p50 %.1f ms, p99 %.1f ms, max %.1f ms; /processes with a "
            "token: %zu, %zu failed, max %.1f ms; dotmon fds %d -> max %d -> %d, RSS %ld -> max "
            "%ld -> %ld KiB\n",
            FLOOD_CONNS, FLOOD_SECONDS, atomic_load(&f.opened), atomic_load(&f.closed_by_server), n,
            bad, lat[n / 2], lat[n * 99 / 100], lat[n - 1], users, users_bad, user_max, fd_base,
            fds_max, fds_after, rss_base, rss_max, rss_after);
    free(lat);
    assert_int_equal(bad, 0);
    assert_int_equal(users_bad, 0);
    assert_true(n >= (size_t)(FLOOD_SECONDS * 1000 / PROBE_EVERY_MS) / 2);
    /* The flood really filled the server: dotmon had to close connections to keep serving. */
    assert_true(atomic_load(&f.closed_by_server) > 0);
    assert_true(fds_after <= fd_base);
#if !defined(__SANITIZE_ADDRESS__)
    /* Memory is bounded during the flood and handed back after it (ASan's quarantine keeps
     * freed memory, so only the normal build can tell). */
    assert_true(rss_max - rss_base < 64 * 1024);
    assert_true(rss_after - rss_base < 4 * 1024);
#endif
    agent_test_stop_dotmon_clean(dm);
}

/*
 * An optional argument selects tests by name (cmocka's pattern: "test_attack_*" for the attacks
 * that need a second user, "test_flood_*" for the flood); ctest runs the two groups as
 * test_agent_attacks and test_agent_flood.
 */
int main(int argc, char **argv)
{
    if (argc > 1) {
        cmocka_set_test_filter(argv[1]);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_attack_symlink_race, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_attack_dump_fifo, agent_test_setup, fifo_teardown),
        cmocka_unit_test_setup_teardown(test_attack_foreign_socket, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_flood_healthz, agent_test_setup, agent_test_teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed == 0 && skipped_no_user) {
        fprintf(stderr, "attacks that need a second user were skipped: exiting 77 (ctest: "
                        "skipped)\n");
        return 77;
    }
    return failed;
}
