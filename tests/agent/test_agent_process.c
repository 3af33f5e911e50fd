/* SPDX-License-Identifier: MIT */
/*
 * Integration: the real dotmon binary discovering real TestApp processes in a private TMPDIR,
 * over real HTTP. Covers /processes, /process, /env and /info, several processes, a process
 * killed with SIGKILL (its socket is left behind), and stale sockets nobody listens on.
 * Each test starts its own apps and dotmon in its own temp dir; teardown kills everything.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "proc.h"
#include "timebound.h"

#define LIST_MS 5000 /* how long a new process may take to show up */

static const char *const no_auth[] = {"--no-auth", NULL};

/* Checks one /processes element against app; returns its uid (valid while arr lives). */
static const char *check_entry(cJSON *arr, const struct test_app *app, bool is_default)
{
    cJSON *e = agent_test_find_pid(arr, app->pid);
    assert_non_null(e);
    assert_int_equal(agent_test_int(e, "pid"), app->pid);
    assert_string_equal(agent_test_str(e, "name"), "TestApp");
    const char *uid = agent_test_str(e, "uid");
    assert_true(agent_test_is_guid(uid));
    assert_string_not_equal(uid, "00000000-0000-0000-0000-000000000000");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(e, "isDefault");
    assert_true(cJSON_IsBool(def));
    assert_int_equal(cJSON_IsTrue(def), is_default);
    return uid;
}

/* GET /process?<query> and checks it describes app (and has this uid). */
static void check_process(struct testenv *env, struct dotmon *dm, const char *query,
                          const struct test_app *app, const char *uid)
{
    char target[256];
    snprintf(target, sizeof target, "/process%s%s", query[0] ? "?" : "", query);
    cJSON *p = agent_test_get_json(dm, target, 200);
    assert_int_equal(agent_test_int(p, "pid"), app->pid);
    assert_string_equal(agent_test_str(p, "uid"), uid);
    assert_string_equal(agent_test_str(p, "name"), "TestApp");
    /* The runtime reports the apphost, the dll and the arguments. */
    const char *cmd = agent_test_str(p, "commandLine");
    char marker_arg[64];
    snprintf(marker_arg, sizeof marker_arg, "--marker %s", app->marker);
    if (!strstr(cmd, env->testapp_bin) || !strstr(cmd, marker_arg)) {
        fprintf(stderr, "commandLine '%s' lacks '%s' or '%s'\n", cmd, env->testapp_bin, marker_arg);
    }
    assert_non_null(strstr(cmd, env->testapp_bin));
    assert_non_null(strstr(cmd, marker_arg));
    assert_true(agent_test_str(p, "operatingSystem")[0] != '\0');
    assert_true(agent_test_str(p, "processArchitecture")[0] != '\0');
    assert_string_equal(agent_test_str(p, "managedEntryPointAssemblyName"), "TestApp");
    cJSON_Delete(p);
}

static void check_env(struct testenv *env, struct dotmon *dm, const struct test_app *app)
{
    char target[64];
    snprintf(target, sizeof target, "/env?pid=%d", (int)app->pid);
    cJSON *e = agent_test_get_json(dm, target, 200);
    assert_true(cJSON_IsObject(e));
    assert_string_equal(agent_test_str(e, "DOTMON_TEST_MARKER"), app->marker);
    assert_string_equal(agent_test_str(e, "TMPDIR"), env->dir);
    /* A string -> string map, nothing else. */
    const cJSON *v;
    cJSON_ArrayForEach(v, e)
    {
        assert_true(cJSON_IsString(v));
    }
    cJSON_Delete(e);
}

/* (a) One app: listed, described, its environment and dotmon's /info. */
static void test_agent_process_single_app(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);

    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, LIST_MS);
    char uid[64];
    snprintf(uid, sizeof uid, "%s", check_entry(arr, app, true));
    cJSON_Delete(arr);

    char q[128];
    snprintf(q, sizeof q, "pid=%d", (int)app->pid);
    check_process(env, dm, q, app, uid);
    snprintf(q, sizeof q, "uid=%s", uid);
    check_process(env, dm, q, app, uid);
    check_process(env, dm, "name=TestApp", app, uid);
    check_process(env, dm, "", app, uid); /* the default process: the only one */
    check_env(env, dm, app);

    cJSON *info = agent_test_get_json(dm, "/info", 200);
    assert_true(agent_test_str(info, "version")[0] != '\0');
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(info, "runtimeVersion");
    assert_true(cJSON_IsString(rv) || cJSON_IsNull(rv));
    assert_string_equal(agent_test_str(info, "diagnosticPortMode"), "Connect");
    cJSON_Delete(info);

    agent_test_stop_dotmon_clean(dm);
}

/* (b) Three apps: all listed, distinct uids, no default, each selectable by pid and by uid. */
static void test_agent_process_three_apps(void **state)
{
    struct testenv *env = *state;
    struct test_app *apps[3];
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        apps[i] = agent_test_start_app(env);
        pids[i] = apps[i]->pid;
    }
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);

    cJSON *arr = agent_test_wait_processes(dm, pids, 3, LIST_MS);
    char uids[3][64];
    for (int i = 0; i < 3; i++) {
        snprintf(uids[i], sizeof uids[i], "%s", check_entry(arr, apps[i], false));
    }
    cJSON_Delete(arr);
    assert_string_not_equal(uids[0], uids[1]);
    assert_string_not_equal(uids[0], uids[2]);
    assert_string_not_equal(uids[1], uids[2]);

    for (int i = 0; i < 3; i++) {
        char q[128];
        snprintf(q, sizeof q, "pid=%d", (int)pids[i]);
        check_process(env, dm, q, apps[i], uids[i]);
        snprintf(q, sizeof q, "uid=%s", uids[i]);
        check_process(env, dm, q, apps[i], uids[i]);
        check_env(env, dm, apps[i]);
    }
    /*
     * Three processes share the name TestApp: a name selects none of them, so dotmon answers 400
     * (dotnet-monitor turns an ambiguous selection into a 400 problem). With no selector there is
     * no default process either: 400 too.
     */
    agent_test_expect_problem(dm, "GET", "/process?name=TestApp", 400);
    agent_test_expect_problem(dm, "GET", "/process", 400);
    agent_test_expect_problem(dm, "GET", "/env", 400);

    agent_test_stop_dotmon_clean(dm);
}

/* (c) SIGKILL one of three apps: it leaves the list within 2 s, the others stay. */
static void test_agent_process_killed_app_disappears(void **state)
{
    struct testenv *env = *state;
    struct test_app *apps[3];
    pid_t pids[3];
    for (int i = 0; i < 3; i++) {
        apps[i] = agent_test_start_app(env);
        pids[i] = apps[i]->pid;
    }
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, pids, 3, LIST_MS);
    cJSON_Delete(arr);

    /* SIGKILL: the runtime cannot remove its socket, so the file stays behind. */
    int st = 0;
    assert_int_equal(testenv_stop_app(apps[1], SIGKILL, &st), 0);
    double t0 = testenv_now_ms();
    bool gone = false;
    double took = 0;
    while (!gone) {
        arr = agent_test_get_json(dm, "/processes", 200);
        took = testenv_now_ms() - t0;
        gone = agent_test_find_pid(arr, pids[1]) == NULL;
        if (gone) {
            assert_int_equal(cJSON_GetArraySize(arr), 2);
            assert_non_null(agent_test_find_pid(arr, pids[0]));
            assert_non_null(agent_test_find_pid(arr, pids[2]));
        }
        cJSON_Delete(arr);
        if (!gone && took > 2000) {
            fail_msg("pid %d still listed %.0f ms after SIGKILL", (int)pids[1], took);
        }
        if (!gone) {
            testenv_sleep_ms(100);
        }
    }
    fprintf(stderr, "killed app left /processes after %.0f ms\n", took);
    /* And it stays gone; the survivors keep answering. */
    pid_t alive[2] = {pids[0], pids[2]};
    arr = agent_test_wait_processes(dm, alive, 2, 0);
    cJSON_Delete(arr);
    char target[64];
    snprintf(target, sizeof target, "/process?pid=%d", (int)pids[1]);
    agent_test_expect_problem_detail(dm, "GET", target, 400, AGENT_TEST_DM_NO_PROCESS);
    snprintf(target, sizeof target, "/process?pid=%d", (int)pids[2]);
    cJSON *p = agent_test_get_json(dm, target, 200);
    cJSON_Delete(p);

    agent_test_stop_dotmon_clean(dm);
}

/*
 * (d) Stale sockets: a correctly named socket file of a pid that does not exist, one of a live
 * process that is no runtime (the test itself), a regular file with a socket's name, and names
 * that do not parse. None may be listed, and they must not slow /processes down: connect() on
 * them is refused at once, so < 1 s is a loose functional bound, not a benchmark.
 */
static void test_agent_process_stale_sockets_are_skipped(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    pid_t dead = testenv_unused_pid();
    assert_true(dead > 0);
    assert_int_equal(testenv_make_stale_socket(env->dir, dead, 4242ULL, NULL, 0), 0);
    assert_int_equal(testenv_make_stale_socket(env->dir, getpid(), 4243ULL, NULL, 0), 0);
    char path[128];
    snprintf(path, sizeof path, "%s/dotnet-diagnostic-%d-4244-socket", env->dir, (int)dead - 1);
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof path, "%s/dotnet-diagnostic-notapid-socket", env->dir);
    fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);

    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, LIST_MS);
    check_entry(arr, app, true); /* the stale entries do not count against the default */
    cJSON_Delete(arr);

    /* A stale socket created while dotmon runs is skipped too. */
    assert_int_equal(testenv_make_stale_socket(env->dir, dead, 4245ULL, NULL, 0), 0);
    double worst = 0;
    for (int i = 0; i < 5; i++) {
        struct httpc_resp r;
        assert_int_equal(testenv_dotmon_get(dm, "/processes", &r), 0);
        assert_int_equal(r.status, 200);
        cJSON *a = cJSON_ParseWithLength(r.body, r.body_len);
        assert_non_null(a);
        assert_int_equal(cJSON_GetArraySize(a), 1);
        assert_non_null(agent_test_find_pid(a, app->pid));
        cJSON_Delete(a);
        if (r.latency_ms > worst) {
            worst = r.latency_ms;
        }
        httpc_resp_fini(&r);
    }
    fprintf(stderr, "/processes with 4 stale entries: worst of 5 took %.1f ms\n", worst);
    ASSERT_BELOW_MS(worst, 1000);

    char target[64];
    snprintf(target, sizeof target, "/process?pid=%d", (int)dead);
    agent_test_expect_problem_detail(dm, "GET", target, 400, AGENT_TEST_DM_NO_PROCESS);
    snprintf(target, sizeof target, "/process?pid=%d", (int)getpid());
    agent_test_expect_problem_detail(dm, "GET", target, 400, AGENT_TEST_DM_NO_PROCESS);

    agent_test_stop_dotmon_clean(dm);
}

/* A process started after dotmon shows up, and one that exits cleanly leaves. */
static void test_agent_process_appears_and_leaves(void **state)
{
    struct testenv *env = *state;
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, NULL, 0, LIST_MS);
    cJSON_Delete(arr);
    /* No process, no default: 400 with dotnet-monitor's message. */
    agent_test_expect_problem_detail(dm, "GET", "/process", 400, AGENT_TEST_DM_NO_PROCESS);

    struct test_app *app = agent_test_start_app(env);
    arr = agent_test_wait_processes(dm, &app->pid, 1, LIST_MS);
    cJSON_Delete(arr);
    /*
     * dotmon saw the socket appear, so its first ProcessInfo came while the host was starting,
     * perhaps before the runtime knew the whole command line (just the host's path). The
     * command line is refreshed from the liveness checks: it must be complete within seconds.
     */
    char marker_arg[64];
    snprintf(marker_arg, sizeof marker_arg, "--marker %s", app->marker);
    double t0 = testenv_now_ms();
    for (;;) {
        cJSON *p = agent_test_get_json(dm, "/process", 200);
        bool full = strstr(agent_test_str(p, "commandLine"), marker_arg) != NULL;
        if (!full && testenv_now_ms() - t0 > testenv_timeout(5000)) {
            fprintf(stderr, "commandLine still '%s'\n", agent_test_str(p, "commandLine"));
        }
        cJSON_Delete(p);
        if (full) {
            break;
        }
        assert_true(testenv_now_ms() - t0 <= testenv_timeout(5000));
        testenv_sleep_ms(100);
    }
    fprintf(stderr, "complete commandLine after %.0f ms\n", testenv_now_ms() - t0);
    int st = 0;
    assert_int_equal(testenv_stop_app(app, SIGTERM, &st), 0);
    arr = agent_test_wait_processes(dm, NULL, 0, 2000);
    cJSON_Delete(arr);

    agent_test_stop_dotmon_clean(dm);
}

/*
 * Hundreds of requests, good and bad, each of which opens a TCP connection to dotmon and (for
 * /process and /env) an IPC connection from dotmon to the runtime: afterwards dotmon holds no
 * more fds than before. A leaked socket per request would show as hundreds.
 */
static void test_agent_process_requests_leak_no_fds(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, LIST_MS);
    cJSON_Delete(arr);
    pid_t dm_pid = proc_pid(dm->proc);

    char pid_q[64], env_q[64];
    snprintf(pid_q, sizeof pid_q, "/process?pid=%d", (int)app->pid);
    snprintf(env_q, sizeof env_q, "/env?pid=%d", (int)app->pid);
    const char *targets[] = {"/processes",       pid_q,  env_q, "/info", "/process?pid=999999",
                             "/process?pid=abc", "/nope"};
    const int statuses[] = {200, 200, 200, 200, 400, 400, 404};
    /* One warm-up round, so lazily opened fds (if any) exist before the baseline. */
    for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
        struct httpc_resp r;
        assert_int_equal(testenv_dotmon_get(dm, targets[t], &r), 0);
        httpc_resp_fini(&r);
    }
    int base = testenv_fd_count(dm_pid);
    int app_base = testenv_fd_count(app->pid);
    assert_true(base > 0);
    for (int round = 0; round < 40; round++) {
        for (size_t t = 0; t < sizeof targets / sizeof targets[0]; t++) {
            struct httpc_resp r;
            int rc = testenv_dotmon_get(dm, targets[t], &r);
            int status = r.status;
            httpc_resp_fini(&r);
            assert_int_equal(rc, 0);
            assert_int_equal(status, statuses[t]);
        }
    }
    /* Closes may lag a little behind the last response. */
    int now = testenv_fd_count(dm_pid);
    for (int i = 0; i < 50 && now > base; i++) {
        testenv_sleep_ms(20);
        now = testenv_fd_count(dm_pid);
    }
    fprintf(stderr, "dotmon fds: %d before, %d after 280 requests; TestApp fds: %d, %d\n", base,
            now, app_base, testenv_fd_count(app->pid));
    assert_true(now <= base);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_process_single_app, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_process_three_apps, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_process_killed_app_disappears, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_process_stale_sockets_are_skipped,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_process_appears_and_leaves, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_process_requests_leak_no_fds, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
