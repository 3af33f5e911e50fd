/* SPDX-License-Identifier: MIT */
/*
 * Integration: listen mode (dotnet-monitor's "reverse server") with the real dotmon binary and
 * real .NET 10 TestApp processes started with DOTNET_DiagnosticPorts=<dotmon's socket>:
 *  - /processes lists the app with its pid, name and uid (the runtime's cookie, checked against
 *    ProcessInfo read independently from the app's own default socket), /info says Listen, the
 *    socket is 0600; /process and /env work; a 5 s gc-verbose trace is complete (dotmon's C
 *    checker and TraceEvent agree, GCStart/GCEnd pairs are there); a Mini dump is an ELF core;
 *    kill -9 drops the app within the grace, a restarted app is listed under a new uid;
 *  - an app whose port suspends at start-up (no `nosuspend`) starts at once, because dotmon
 *    resumes it; restarted, it is resumed again and the old instance is dropped;
 *  - DiagnosticPort:HoldSuspended keeps it suspended (listed, not running) until a trace starts;
 *  - SIGTERM mid-trace: the StopTracing still reaches the runtime, the trace is complete;
 *  - start-up: a stale socket file is replaced, a regular file is refused (exit 1, file intact),
 *    DiagnosticPort:SocketMode applies, a bad SocketMode is refused.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "nettrace.h"

#define GRACE_MS 3000 /* DiagnosticPort:ForgetAfterSeconds default */
/* A short grace (Timeouts:ListenForgetMs) for the tests that only wait for a killed app to go. */
#define SHORT_GRACE    "500"
#define SHORT_GRACE_MS 500
static const char *const short_grace[] = {"DotnetMonitor_Timeouts__ListenForgetMs=" SHORT_GRACE,
                                          NULL};

/* ---- helpers --------------------------------------------------------------------------------- */

static void sock_path(const struct testenv *env, char *out, size_t cap)
{
    snprintf(out, cap, "%s/dotmon.sock", env->dir);
}

/* Polls /readyz until 200: the diagnostic socket is bound (the HTTP URLs come up first). */
static void wait_ready(struct dotmon *dm)
{
    double deadline = testenv_now_ms() + testenv_timeout(10000);
    for (;;) {
        struct httpc_resp r = {0};
        assert_int_equal(testenv_dotmon_get(dm, "/readyz", &r), 0);
        int status = r.status;
        httpc_resp_fini(&r);
        if (status == 200) {
            return;
        }
        assert_int_equal(status, 503);
        assert_true(testenv_now_ms() < deadline);
        testenv_sleep_ms(20);
    }
}

/* dotmon in listen mode on <env>/dotmon.sock, without auth, with extra environment; ready. */
static struct dotmon *start_listen_dotmon(struct testenv *env, const char *const *extra_env)
{
    char path[128];
    sock_path(env, path, sizeof(path));
    const char *args[] = {"--no-auth", "--diagnostic-port", path, NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, extra_env, &dm), 0);
    wait_ready(dm);
    return dm;
}

/* A TestApp that connects to dotmon's socket; suspend = without `nosuspend`. */
static struct test_app *start_listen_app(struct testenv *env, bool suspend)
{
    char path[128], var[192];
    sock_path(env, path, sizeof(path));
    snprintf(var, sizeof(var), "DOTNET_DiagnosticPorts=%s%s", path, suspend ? "" : ",nosuspend");
    const char *envv[] = {var, NULL};
    struct test_app *app = NULL;
    assert_int_equal(testenv_start_app(env, NULL, envv, &app), 0);
    return app;
}

/*
 * The uid of pid in /processes, after waiting (up to timeout_ms) for the list to be exactly
 * {pid}; out gets it.
 */
static void listed_uid(struct dotmon *dm, pid_t pid, int timeout_ms, char out[37])
{
    pid_t pids[] = {pid};
    cJSON *arr = agent_test_wait_processes(dm, pids, 1, timeout_ms);
    cJSON *p = agent_test_find_pid(arr, pid);
    assert_non_null(p);
    assert_string_equal(agent_test_str(p, "name"), "TestApp");
    const char *uid = agent_test_str(p, "uid");
    assert_true(agent_test_is_guid(uid));
    snprintf(out, 37, "%s", uid);
    cJSON_Delete(arr);
}

/*
 * ProcessInfo over the app's own default diagnostic socket (<dir>/dotnet-diagnostic-<pid>-*),
 * on a blocking connection: an independent reading of the runtime's cookie and pid.
 */
static void runtime_identity(const char *dir, pid_t pid, char uid[37], uint64_t *rt_pid)
{
    char prefix[64], path[300] = "";
    snprintf(prefix, sizeof(prefix), "dotnet-diagnostic-%d-", (int)pid);
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    assert_true(path[0] != '\0');
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct timeval tv = {.tv_sec = 5};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    uint8_t req[IPC_HEADER_SIZE];
    struct ipc_wr w;
    ipc_wr_init(&w, req, sizeof(req));
    assert_int_equal(ipc_cmd_process_info(&w), 0);
    assert_int_equal(write(fd, req, w.len), (ssize_t)w.len);
    static uint8_t buf[65536];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof(buf) && (r = read(fd, buf + n, sizeof(buf) - n)) > 0) {
        n += (size_t)r;
    }
    close(fd);
    struct ipc_frame f;
    size_t used = 0;
    assert_int_equal(ipc_decode(buf, n, sizeof(buf), &f, &used), IPC_FRAME);
    struct ipc_process_info pi;
    assert_int_equal(ipc_process_info_parse(f.payload, f.payload_len, 1, &pi), 0);
    ipc_guid_format(pi.cookie, uid);
    *rt_pid = pi.pid;
}

/* Polls /processes until pid is absent; returns how long that took (ms). */
static double wait_gone(struct dotmon *dm, pid_t pid, int timeout_ms)
{
    double t0 = testenv_now_ms();
    for (;;) {
        cJSON *arr = agent_test_get_json(dm, "/processes", 200);
        bool present = agent_test_find_pid(arr, pid) != NULL;
        cJSON_Delete(arr);
        if (!present) {
            return testenv_now_ms() - t0;
        }
        if (testenv_now_ms() - t0 > testenv_timeout(timeout_ms)) {
            fail_msg("pid %d still listed after %d ms", (int)pid, timeout_ms);
        }
        testenv_sleep_ms(50);
    }
}

#define MAX_GCS 4096

struct gc_scan {
    uint32_t starts[MAX_GCS], ends[MAX_GCS];
    size_t nstarts, nends;
};

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct gc_scan *m = ud;
    if (strcmp(ev->provider, "Microsoft-Windows-DotNETRuntime") == 0 && ev->payload_len >= 4) {
        if (ev->event_id == 1 && m->nstarts < MAX_GCS) {
            m->starts[m->nstarts++] = le32(ev->payload);
        } else if (ev->event_id == 2 && m->nends < MAX_GCS) {
            m->ends[m->nends++] = le32(ev->payload);
        }
    }
}

/* tests/tools/tracecheck (TraceEvent) on path: its GCStart and GCEnd counts. */
static void tracecheck(struct testenv *env, const char *path, long long *gc_start,
                       long long *gc_end)
{
    cJSON *j = agent_test_tracecheck(env, path, NULL);
    *gc_start = agent_test_int(j, "gcStart");
    *gc_end = agent_test_int(j, "gcEnd");
    cJSON_Delete(j);
}

struct fetch {
    uint16_t port;
    char target[256];
    struct httpc_resp resp;
    int rc;
    pthread_t th;
};

static void *fetch_thread(void *arg)
{
    struct fetch *f = arg;
    f->rc = httpc_get(f->port, f->target, NULL, testenv_timeout(180000), &f->resp);
    return NULL;
}

static const char *op_target(const struct httpc_resp *r, char *out, size_t cap)
{
    const char *loc = httpc_header(r, "Location");
    assert_non_null(loc);
    const char *id = strstr(loc, "/operations/");
    assert_non_null(id);
    snprintf(out, cap, "%s/details", id); /* dotmon's view, with the trace results */
    return out;
}

/*
 * A 5 s gc-verbose trace of pid while the app makes garbage: complete for dotmon's checker (and
 * the operation), GC pairs present, and TraceEvent counts the same GCStart/GCEnd.
 */
static void check_gc_trace(struct testenv *env, struct dotmon *dm, struct test_app *app,
                           const char *name)
{
    struct fetch f = {.port = dm->port};
    snprintf(f.target, sizeof(f.target), "/trace?pid=%d&profile=gc-verbose&durationSeconds=5",
             (int)app->pid);
    assert_int_equal(pthread_create(&f.th, NULL, fetch_thread, &f), 0);
    double end = testenv_now_ms() + 5500;
    while (testenv_now_ms() < end) {
        assert_int_equal(testenv_app_cmd(app, "churn 8", 20000, NULL), 0);
        assert_int_equal(testenv_app_cmd(app, "gc", 20000, NULL), 0);
        testenv_sleep_ms(100);
    }
    pthread_join(f.th, NULL);
    assert_int_equal(f.rc, 0);
    if (f.resp.status != 200) {
        fprintf(stderr, "trace answered %d: %s\n", f.resp.status, f.resp.body);
    }
    assert_int_equal(f.resp.status, 200);
    assert_true(httpc_content_type_is(&f.resp, "application/octet-stream"));

    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    struct gc_scan *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    nettrace_set_event_cb(&ck, on_event, m);
    nettrace_feed(&ck, (const uint8_t *)f.resp.body, f.resp.body_len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    uint64_t gc_start = nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 1);
    uint64_t gc_end = nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 2);
    size_t pairs = agent_test_gc_pairs(m->starts, m->nstarts, m->ends, m->nends);
    free(m);
    nettrace_checker_fini(&ck);
    fprintf(stderr, "listen-mode trace %s: %zu bytes, verdict %s, gc %llu/%llu (%zu pairs)\n", name,
            f.resp.body_len, nettrace_verdict_name(v), (unsigned long long)gc_start,
            (unsigned long long)gc_end, pairs);
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_true(pairs > 0);

    char path[256];
    snprintf(path, sizeof(path), "%s/%s.nettrace", env->dir, name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(f.resp.body, 1, f.resp.body_len, fp), f.resp.body_len);
    fclose(fp);
    long long te_start = 0, te_end = 0;
    tracecheck(env, path, &te_start, &te_end);
    assert_int_equal((long long)gc_start, te_start);
    assert_int_equal((long long)gc_end, te_end);

    char target[128];
    cJSON *op = agent_test_get_json(dm, op_target(&f.resp, target, sizeof(target)), 200);
    assert_string_equal(agent_test_str(op, "status"), "Succeeded");
    cJSON *tr = cJSON_GetObjectItem(op, "trace");
    assert_string_equal(agent_test_str(tr, "verdict"), "complete");
    cJSON_Delete(op);
    httpc_resp_fini(&f.resp);
}

/* A Mini dump: an ELF core streamed back, the operation succeeded. */
static void check_mini_dump(struct dotmon *dm, pid_t pid)
{
    char target[128];
    snprintf(target, sizeof(target), "/dump?pid=%d&type=Mini", (int)pid);
    struct httpc_resp r = {0};
    assert_int_equal(httpc_get(dm->port, target, NULL, testenv_timeout(180000), &r), 0);
    if (r.status != 200) {
        fprintf(stderr, "dump answered %d: %s\n", r.status, r.body);
    }
    assert_int_equal(r.status, 200);
    assert_true(r.body_len > 4096);
    assert_memory_equal(r.body,
                        "\x7f"
                        "ELF",
                        4);
    cJSON *op = agent_test_get_json(dm, op_target(&r, target, sizeof(target)), 200);
    assert_string_equal(agent_test_str(op, "status"), "Succeeded");
    cJSON_Delete(op);
    fprintf(stderr, "listen-mode Mini dump of %d: %zu bytes\n", (int)pid, r.body_len);
    httpc_resp_fini(&r);
}

/* ---- tests ----------------------------------------------------------------------------------- */

static void test_agent_listen_every_route(void **state)
{
    struct testenv *env = *state;
    struct dotmon *dm = start_listen_dotmon(env, NULL);
    char path[128];
    sock_path(env, path, sizeof(path));
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0600);
    cJSON *info = agent_test_get_json(dm, "/info", 200);
    assert_string_equal(agent_test_str(info, "diagnosticPortMode"), "Listen");
    assert_string_equal(agent_test_str(info, "diagnosticPortName"), path);
    cJSON_Delete(info);

    struct test_app *app = start_listen_app(env, false);
    char uid[37];
    listed_uid(dm, app->pid, 10000, uid);
    /* The uid is the runtime's cookie, the pid its own: read independently over its default
     * socket (which dotmon does not watch in listen mode, so the app is listed once). */
    char rt_uid[37];
    uint64_t rt_pid = 0;
    runtime_identity(env->dir, app->pid, rt_uid, &rt_pid);
    assert_string_equal(uid, rt_uid);
    assert_int_equal(rt_pid, (uint64_t)app->pid);

    /* The runtime connects before its host has set the command line (dotnet/runtime#59439):
     * dotmon asks again after 1 s and 5 s, and then has it in full. */
    char target[256];
    snprintf(target, sizeof(target), "/process?uid=%s", uid);
    double deadline = testenv_now_ms() + testenv_timeout(8000);
    for (;;) {
        cJSON *p = agent_test_get_json(dm, target, 200);
        assert_int_equal(agent_test_int(p, "pid"), app->pid);
        bool full = strstr(agent_test_str(p, "commandLine"), app->marker) != NULL &&
                    strcmp(agent_test_str(p, "managedEntryPointAssemblyName"), "TestApp") == 0;
        if (!full && testenv_now_ms() > deadline) {
            fprintf(stderr, "commandLine never complete: %s\n", agent_test_str(p, "commandLine"));
            fail();
        }
        cJSON_Delete(p);
        if (full) {
            break;
        }
        testenv_sleep_ms(200);
    }
    snprintf(target, sizeof(target), "/env?pid=%d", (int)app->pid);
    cJSON *e = agent_test_get_json(dm, target, 200);
    assert_string_equal(agent_test_str(e, "DOTMON_TEST_MARKER"), app->marker);
    assert_non_null(strstr(agent_test_str(e, "DOTNET_DiagnosticPorts"), path));
    cJSON_Delete(e);

    check_gc_trace(env, dm, app, "listen-gc");
    check_mini_dump(dm, app->pid);
    assert_int_equal(testenv_app_cmd(app, "ping", 10000, NULL), 0);

    /* kill -9: its idle connection ends; dropped after the grace, not before, not much after. */
    int wst = 0;
    assert_int_equal(testenv_stop_app(app, SIGKILL, &wst), 0);
    double took = wait_gone(dm, app->pid, GRACE_MS + 5000);
    fprintf(stderr, "killed app dropped after %.0f ms (grace %d ms)\n", took, GRACE_MS);
    assert_true(took >= GRACE_MS - 600);
    assert_true(took <= GRACE_MS + testenv_timeout(2000));

    /* Restarted: a new runtime instance, a new uid. */
    struct test_app *app2 = start_listen_app(env, false);
    char uid2[37];
    listed_uid(dm, app2->pid, 10000, uid2);
    assert_string_not_equal(uid, uid2);
    agent_test_stop_dotmon_clean(dm);
    assert_int_not_equal(lstat(path, &st), 0); /* dotmon removed its socket */
}

static void test_agent_listen_suspended_app_is_resumed(void **state)
{
    struct testenv *env = *state;
    struct dotmon *dm = start_listen_dotmon(env, short_grace);
    /* No `nosuspend`: the runtime waits for ResumeRuntime before running Main. */
    double t0 = testenv_now_ms();
    struct test_app *app = start_listen_app(env, true);
    double took = testenv_now_ms() - t0;
    assert_int_equal(testenv_app_cmd(app, "ping", 10000, NULL), 0);
    char *waiting = NULL;
    /* The runtime announces the wait after 5 s; resumed at once, it never does. */
    assert_int_equal(
        proc_find_line(app->proc, PROC_STDOUT, "The runtime has been configured", &waiting),
        AGENT_E_NOTFOUND);
    fprintf(stderr, "suspended app ready %.0f ms after its start\n", took);
    char uid[37];
    listed_uid(dm, app->pid, 10000, uid);
    check_gc_trace(env, dm, app, "listen-suspend-gc");

    /* kill -9 and restart: the new instance is resumed too and listed; the old one goes. */
    int wst = 0;
    assert_int_equal(testenv_stop_app(app, SIGKILL, &wst), 0);
    struct test_app *app2 = start_listen_app(env, true);
    assert_int_equal(testenv_app_cmd(app2, "ping", 10000, NULL), 0);
    char uid2[37];
    double t1 = testenv_now_ms();
    /* Exactly {app2}: the old one dropped. */
    listed_uid(dm, app2->pid, SHORT_GRACE_MS + 10000, uid2);
    fprintf(stderr,
            "restarted suspended app listed alone %.0f ms after it answered (grace %d ms)\n",
            testenv_now_ms() - t1, SHORT_GRACE_MS);
    assert_string_not_equal(uid, uid2);
    agent_test_stop_dotmon_clean(dm);
}

/* Spawns TestApp without waiting for "ready" (it may be held), registered in env. */
static struct test_app *spawn_held_app(struct testenv *env, const char *ports)
{
    struct test_app *app = calloc(1, sizeof(*app));
    assert_non_null(app);
    testenv_random_hex(app->marker, sizeof(app->marker));
    char tmpdir[64], root[4200], marker[64], var[192];
    snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", env->dir);
    snprintf(root, sizeof(root), "DOTNET_ROOT=%s", env->dotnet_root);
    snprintf(marker, sizeof(marker), "DOTMON_TEST_MARKER=%s", app->marker);
    snprintf(var, sizeof(var), "DOTNET_DiagnosticPorts=%s", ports);
    const char *argv[] = {env->testapp_bin, "--marker", app->marker, NULL};
    const char *envv[] = {tmpdir, marker, root, var, NULL};
    struct proc_opts o = {.argv = argv, .env = envv, .label = "held-app"};
    assert_int_equal(proc_spawn(&o, &app->proc), 0);
    app->pid = proc_pid(app->proc);
    assert_true(env->n_apps < TESTENV_MAX_APPS);
    env->apps[env->n_apps++] = app; /* testenv_fini stops and frees it */
    return app;
}

static void test_agent_listen_hold_suspended(void **state)
{
    struct testenv *env = *state;
    char path[128];
    sock_path(env, path, sizeof(path));
    char mode[64], name[200];
    snprintf(name, sizeof(name), "DotnetMonitor_DiagnosticPort__EndpointName=%s", path);
    snprintf(mode, sizeof(mode), "DotnetMonitor_DiagnosticPort__ConnectionMode=Listen");
    const char *envv[] = {mode, name, "DotnetMonitor_DiagnosticPort__HoldSuspended=true", NULL};
    const char *args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, envv, &dm), 0);
    wait_ready(dm);
    struct test_app *app = spawn_held_app(env, path);
    char uid[37];
    listed_uid(dm, app->pid, 15000, uid); /* probed while suspended */
    testenv_sleep_ms(1500);
    char *line = NULL;
    assert_int_equal(proc_find_line(app->proc, PROC_STDOUT, "ready pid=", &line), AGENT_E_NOTFOUND);

    /* The first trace starts the session, then resumes: the start-up is in the trace. */
    struct fetch f = {.port = dm->port};
    snprintf(f.target, sizeof(f.target), "/trace?pid=%d&profile=gc-verbose&durationSeconds=4",
             (int)app->pid);
    assert_int_equal(pthread_create(&f.th, NULL, fetch_thread, &f), 0);
    assert_int_equal(
        proc_wait_line(app->proc, PROC_STDOUT, "ready pid=", testenv_timeout(20000), &line), 0);
    free(line);
    assert_int_equal(testenv_app_cmd(app, "gc", 10000, NULL), 0);
    pthread_join(f.th, NULL);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.resp.status, 200);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_feed(&ck, (const uint8_t *)f.resp.body, f.resp.body_len);
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    assert_true(nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 1) > 0);
    nettrace_checker_fini(&ck);
    httpc_resp_fini(&f.resp);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * SIGTERM while a trace runs: dotmon still gets its StopTracing to the runtime over a spare
 * connection (the listener closes only after that), the client gets a complete trace, and dotmon
 * exits 0 well within its grace.
 */
static void test_agent_listen_shutdown_mid_trace(void **state)
{
    struct testenv *env = *state;
    struct dotmon *dm = start_listen_dotmon(env, NULL);
    struct test_app *app = start_listen_app(env, false);
    char uid[37];
    listed_uid(dm, app->pid, 10000, uid);
    struct fetch f = {.port = dm->port};
    snprintf(f.target, sizeof(f.target), "/trace?pid=%d&profile=gc-verbose&durationSeconds=60",
             (int)app->pid);
    assert_int_equal(pthread_create(&f.th, NULL, fetch_thread, &f), 0);
    double deadline = testenv_now_ms() + testenv_timeout(10000);
    for (bool running = false; !running;) {
        assert_true(testenv_now_ms() < deadline);
        testenv_sleep_ms(100);
        cJSON *ops = agent_test_get_json(dm, "/operations", 200);
        cJSON *o = cJSON_GetArrayItem(ops, 0);
        running = o != NULL && strcmp(agent_test_str(o, "status"), "Running") == 0;
        cJSON_Delete(ops);
    }
    assert_int_equal(testenv_app_cmd(app, "gc", 10000, NULL), 0);
    double t0 = testenv_now_ms();
    agent_test_stop_dotmon_clean(dm);
    double took = testenv_now_ms() - t0;
    pthread_join(f.th, NULL);
    assert_int_equal(f.rc, 0);
    assert_int_equal(f.resp.status, 200);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_feed(&ck, (const uint8_t *)f.resp.body, f.resp.body_len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    nettrace_checker_fini(&ck);
    fprintf(stderr, "shutdown mid-trace: dotmon exited after %.0f ms, trace %zu bytes, %s\n", took,
            f.resp.body_len, nettrace_verdict_name(v));
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_true(took < testenv_timeout(5000));
    httpc_resp_fini(&f.resp);
}

static bool line_turned_away(const char *line, void *ctx)
{
    (void)ctx;
    return strstr(line, "\"Warning\"") != NULL && strstr(line, "turned away") != NULL &&
           strstr(line, "DiagnosticPort:MaxConnections") != NULL;
}

/* Runs dotmon with args/env, expecting it to refuse to start: exit 1 with `expect` on stderr. */
static void expect_refusal(struct testenv *env, const char *const *extra_args,
                           const char *const *extra_env, const char *expect)
{
    const char *argv[16] = {env->dotmon_bin, "collect", "--urls",   "http://127.0.0.1:0",
                            "--metrics",     "false",   "--no-auth"};
    size_t n = 7;
    for (size_t i = 0; extra_args != NULL && extra_args[i] != NULL; i++) {
        argv[n++] = extra_args[i];
    }
    argv[n] = NULL;
    char tmpdir[64];
    snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", env->dir);
    const char *envv[8] = {tmpdir};
    size_t k = 1;
    for (size_t i = 0; extra_env != NULL && extra_env[i] != NULL; i++) {
        envv[k++] = extra_env[i];
    }
    envv[k] = NULL;
    struct proc_opts o = {.argv = argv, .env = envv, .label = "dotmon-refused", .stdin_null = true};
    struct proc *p = NULL;
    assert_int_equal(proc_spawn(&o, &p), 0);
    int st = 0;
    assert_int_equal(proc_wait(p, testenv_timeout(15000), &st), 0);
    testenv_sleep_ms(50);
    char *err = proc_output(p, PROC_STDERR, NULL);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 1 || strstr(err, expect) == NULL) {
        fprintf(stderr, "expected exit 1 and '%s'; got status %d:\n%s\n", expect, st, err);
        fail();
    }
    free(err);
    proc_free(p);
}

static void test_agent_listen_startup_checks(void **state)
{
    struct testenv *env = *state;
    char path[128];
    sock_path(env, path, sizeof(path));

    /* A stale socket (an earlier dotmon killed) is replaced. */
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    const char *mode_env[] = {"DotnetMonitor_DiagnosticPort__SocketMode=0660", NULL};
    struct dotmon *dm = start_listen_dotmon(env, mode_env);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0660);
    /* A second dotmon on the same path refuses: someone accepts there. */
    const char *args[] = {"--diagnostic-port", path, NULL};
    expect_refusal(env, args, NULL, "another process accepts connections");
    agent_test_stop_dotmon_clean(dm);

    /* A regular file is never deleted. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("keep me", f);
    fclose(f);
    expect_refusal(env, args, NULL, "is not a socket");
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 7);
    unlink(path);

    /* Nor is a symlink followed or replaced (it could point anywhere). */
    char target[160];
    snprintf(target, sizeof(target), "%s/elsewhere", env->dir);
    f = fopen(target, "w");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(chmod(target, 0600), 0);
    assert_int_equal(symlink(target, path), 0);
    expect_refusal(env, args, mode_env, "is not a socket (a symlink)");
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    unlink(path);

    /* Bad settings are named. */
    const char *bad_mode[] = {"DotnetMonitor_DiagnosticPort__SocketMode=0999", NULL};
    expect_refusal(env, args, bad_mode, "DiagnosticPort:SocketMode");
    const char *rel[] = {"DotnetMonitor_DiagnosticPort__ConnectionMode=Listen",
                         "DotnetMonitor_DiagnosticPort__EndpointName=rel.sock", NULL};
    expect_refusal(env, NULL, rel, "must be an absolute path");

    /* dotnet-monitor's default: Listen with only Storage:DefaultSharedPath binds
     * <DefaultSharedPath>/dotnet-monitor.sock. */
    char shared[128];
    snprintf(shared, sizeof(shared), "DotnetMonitor_Storage__DefaultSharedPath=%s", env->dir);
    const char *listen_shared[] = {"DotnetMonitor_DiagnosticPort__ConnectionMode=Listen", shared,
                                   NULL};
    const char *no_args[] = {"--no-auth", NULL};
    struct dotmon *dm2 = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_args, listen_shared, &dm2), 0);
    wait_ready(dm2);
    cJSON *info = agent_test_get_json(dm2, "/info", 200);
    char expect[160];
    snprintf(expect, sizeof(expect), "%s/dotnet-monitor.sock", env->dir);
    assert_string_equal(agent_test_str(info, "diagnosticPortName"), expect);
    cJSON_Delete(info);
    assert_int_equal(lstat(expect, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    agent_test_stop_dotmon_clean(dm2);
}

/*
 * DiagnosticPort:MaxConnections caps the runtimes tracked at once: with 1, a second real app is
 * turned away with a warning naming the setting, and only the first is listed.
 */
static void test_agent_listen_max_connections(void **state)
{
    struct testenv *env = *state;
    const char *cap[] = {"DotnetMonitor_DiagnosticPort__MaxConnections=1", NULL};
    struct dotmon *dm = start_listen_dotmon(env, cap);
    struct test_app *first = start_listen_app(env, false);
    char uid[37];
    listed_uid(dm, first->pid, 15000, uid);
    struct test_app *second = start_listen_app(env, false);
    char *line = NULL;
    assert_int_equal(proc_wait_line_match(dm->proc, PROC_STDERR, line_turned_away, NULL,
                                          testenv_timeout(15000), &line),
                     0);
    fprintf(stderr, "second runtime: %s\n", line);
    free(line);
    testenv_sleep_ms(1000);
    cJSON *arr = agent_test_wait_processes(dm, &first->pid, 1, 5000);
    assert_null(agent_test_find_pid(arr, second->pid));
    cJSON_Delete(arr);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_listen_every_route, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_listen_suspended_app_is_resumed,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_listen_hold_suspended, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_listen_shutdown_mid_trace, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_listen_startup_checks, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_listen_max_connections, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
