/* SPDX-License-Identifier: MIT */
/*
 * The real TestApp (tests/app) on its own: the command protocol the dotmon integration tests rely
 * on, its diagnostic socket in TMPDIR, and how it ends (which decides whether a socket is left
 * stale). Needs DOTMON_TESTAPP_DIR (the build_testapp ctest fixture).
 */
#include <dirent.h>
#include <errno.h>
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
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "httpc.h"
#include "proc.h"
#include "testenv.h"

#define CMD_MS 20000

static int setup(void **state)
{
    struct testenv *env = calloc(1, sizeof *env);
    if (!env || testenv_init(env) != 0) {
        free(env);
        return -1;
    }
    testenv_watchdog(120);
    *state = env;
    return 0;
}

static int teardown(void **state)
{
    struct testenv *env = *state;
    testenv_fini(env);
    free(env);
    testenv_watchdog(0);
    return 0;
}

static struct test_app *start_app(struct testenv *env, const char *const *args,
                                  const char *const *extra_env)
{
    struct test_app *app = NULL;
    assert_int_equal(testenv_start_app(env, args, extra_env, &app), 0);
    assert_non_null(app);
    assert_true(app->pid > 0);
    return app;
}

/* The path of pid's diagnostic socket in dir, or "" when there is none. */
static void find_socket(const char *dir, pid_t pid, char *out, size_t size)
{
    char prefix[64];
    snprintf(prefix, sizeof prefix, "dotnet-diagnostic-%d-", (int)pid);
    out[0] = '\0';
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t n = strlen(e->d_name);
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 && n > 7 &&
            strcmp(e->d_name + n - 7, "-socket") == 0) {
            snprintf(out, size, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
}

static int connect_unix(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int rc = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : -errno;
    close(fd);
    return rc;
}

static void read_file(const char *path, char *out, size_t size)
{
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    size_t n = fread(out, 1, size - 1, f);
    fclose(f);
    out[n] = '\0';
}

static void test_testapp_ready_socket_and_environment(void **state)
{
    struct testenv *env = *state;
    const char *args[] = {"--env-echo", "DOTMON_TEST_MARKER", "--env-echo", "NOT_SET_ANYWHERE",
                          NULL};
    const char *extra[] = {"EXTRA_VAR=hello world", NULL};
    struct test_app *app = start_app(env, args, extra);

    /* --env-echo lines come before "ready". */
    char want[96];
    snprintf(want, sizeof want, "env DOTMON_TEST_MARKER=%s", app->marker);
    char *line = NULL;
    assert_int_equal(proc_find_line(app->proc, PROC_STDOUT, "env DOTMON_TEST_MARKER=", &line), 0);
    assert_string_equal(line, want);
    free(line);
    assert_int_equal(proc_find_line(app->proc, PROC_STDOUT, "env NOT_SET_ANYWHERE", &line), 0);
    assert_string_equal(line, "env NOT_SET_ANYWHERE unset");
    free(line);

    /* The runtime published its socket in our TMPDIR before "ready", and it accepts. */
    char sock[256];
    find_socket(env->dir, app->pid, sock, sizeof sock);
    assert_true(sock[0] != '\0');
    struct stat st;
    assert_int_equal(stat(sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(connect_unix(sock), 0);

    /* The process name dotmon reports comes from the apphost. */
    char path[64], buf[4096];
    snprintf(path, sizeof path, "/proc/%d/comm", (int)app->pid);
    read_file(path, buf, sizeof buf);
    assert_string_equal(buf, "TestApp\n");
    /* The marker is on the command line (NUL-separated in /proc). */
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)app->pid);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    bool found = false;
    for (size_t i = 0; i < n; i += strlen(buf + i) + 1) {
        if (strcmp(buf + i, "--marker") == 0 && i + 9 < n &&
            strcmp(buf + i + 9, app->marker) == 0) {
            found = true;
        }
    }
    assert_true(found);

    assert_int_equal(testenv_app_cmd(app, "env TMPDIR", CMD_MS, &line), 0);
    snprintf(want, sizeof want, "ok env TMPDIR=%s", env->dir);
    assert_string_equal(line, want);
    free(line);
    assert_int_equal(testenv_app_cmd(app, "env EXTRA_VAR", CMD_MS, &line), 0);
    assert_string_equal(line, "ok env EXTRA_VAR=hello world");
    free(line);
    assert_true(testenv_fd_count(app->pid) > 3);
}

static void test_testapp_commands(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = start_app(env, NULL, NULL);
    char *line = NULL;

    assert_int_equal(testenv_app_cmd(app, "ping", CMD_MS, NULL), 0);

    long rss0 = testenv_rss_kb(app->pid);
    assert_true(rss0 > 0);
    assert_int_equal(testenv_app_cmd(app, "alloc 64", CMD_MS, &line), 0);
    assert_string_equal(line, "ok alloc held=64");
    free(line);
    long rss1 = testenv_rss_kb(app->pid);
    assert_true(rss1 - rss0 >= 48 * 1024); /* the pages were touched, so they are resident */
    assert_int_equal(testenv_app_cmd(app, "free", CMD_MS, NULL), 0);
    assert_int_equal(testenv_app_cmd(app, "gc", CMD_MS, &line), 0);
    assert_int_equal(strncmp(line, "ok gc count=", 12), 0);
    free(line);
    assert_int_equal(testenv_app_cmd(app, "churn 16", CMD_MS, NULL), 0);

    assert_int_equal(testenv_app_cmd(app, "throw 50", CMD_MS, &line), 0);
    assert_string_equal(line, "ok throw count=50");
    free(line);

    assert_int_equal(testenv_app_cmd(app, "log Warning something to see", CMD_MS, NULL), 0);
    assert_int_equal(testenv_app_cmd(app, "log critical lower case works", CMD_MS, NULL), 0);
    assert_int_equal(testenv_app_cmd(app, "log Loud nope", CMD_MS, &line), AGENT_E_RUNTIME);
    assert_int_equal(strncmp(line, "error log:", 10), 0);
    free(line);

    double t0 = testenv_now_ms();
    assert_int_equal(testenv_app_cmd(app, "burn 300 2", CMD_MS, NULL), 0);
    assert_true(testenv_now_ms() - t0 >= 290);

    assert_int_equal(testenv_app_cmd(app, "http 0 2", CMD_MS, &line), 0);
    const char *p = strstr(line, "port=");
    assert_non_null(p);
    long port = strtol(p + 5, NULL, 10);
    assert_true(port > 0 && port < 65536);
    assert_non_null(strstr(line, "requests=2"));
    free(line);
    struct httpc_resp r;
    assert_int_equal(httpc_get((uint16_t)port, "/", NULL, testenv_timeout(10000), &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "hello from TestApp\n");
    httpc_resp_fini(&r);
    /* A second http command reuses the server. */
    assert_int_equal(testenv_app_cmd(app, "http 0 1", CMD_MS, &line), 0);
    char same[64];
    snprintf(same, sizeof same, "ok http port=%ld requests=1", port);
    assert_string_equal(line, same);
    free(line);

    assert_int_equal(testenv_app_cmd(app, "no-such-command", CMD_MS, &line), AGENT_E_RUNTIME);
    assert_int_equal(strncmp(line, "error no-such-command:", 22), 0);
    free(line);
    assert_int_equal(testenv_app_cmd(app, "alloc lots", CMD_MS, NULL), AGENT_E_RUNTIME);
    assert_true(proc_running(app->proc));
}

static void test_testapp_heartbeat_logs(void **state)
{
    struct testenv *env = *state;
    const char *args[] = {"--console-log", "--heartbeat-ms", "200", NULL};
    struct test_app *app = start_app(env, args, NULL);
    /* The console provider writes to stderr: category, then the message on the next line. */
    assert_int_equal(proc_wait_line(app->proc, PROC_STDERR, "info: TestApp.Heartbeat",
                                    testenv_timeout(10000), NULL),
                     0);
    assert_int_equal(testenv_app_cmd(app, "log Error from the test", CMD_MS, NULL), 0);
    assert_int_equal(proc_wait_line(app->proc, PROC_STDERR, "fail: TestApp.Commands",
                                    testenv_timeout(10000), NULL),
                     0);
}

static void test_testapp_exit_code_removes_socket(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = start_app(env, NULL, NULL);
    char sock[256];
    find_socket(env->dir, app->pid, sock, sizeof sock);
    assert_true(sock[0] != '\0');
    app->stopped = true; /* ends on purpose */
    assert_int_equal(testenv_app_cmd(app, "exit 7", CMD_MS, NULL), 0);
    int st = 0;
    assert_int_equal(proc_wait(app->proc, testenv_timeout(10000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 7);
    /* A clean runtime shutdown unlinks its socket. */
    struct stat sb;
    assert_int_equal(stat(sock, &sb), -1);
}

static void test_testapp_exits_on_stdin_eof(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = start_app(env, NULL, NULL);
    app->stopped = true;
    proc_close_stdin(app->proc);
    int st = 0;
    assert_int_equal(proc_wait(app->proc, testenv_timeout(10000), &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(proc_find_line(app->proc, PROC_STDOUT, "bye stdin-eof", NULL), 0);
}

static void test_testapp_no_stdin_exit_runs_until_sigterm(void **state)
{
    struct testenv *env = *state;
    const char *args[] = {"--no-stdin-exit", NULL};
    struct test_app *app = start_app(env, args, NULL);
    /* Kestrel too: it must not swallow SIGTERM. */
    assert_int_equal(testenv_app_cmd(app, "http 0 1", CMD_MS, NULL), 0);
    proc_close_stdin(app->proc);
    testenv_sleep_ms(500);
    assert_true(proc_running(app->proc));
    int st = 0;
    assert_int_equal(testenv_stop_app(app, SIGTERM, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(proc_find_line(app->proc, PROC_STDOUT, "bye SIGTERM", NULL), 0);
}

static void test_testapp_sigkill_leaves_a_stale_socket(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = start_app(env, NULL, NULL);
    char sock[256];
    find_socket(env->dir, app->pid, sock, sizeof sock);
    assert_true(sock[0] != '\0');
    int st = 0;
    assert_int_equal(testenv_stop_app(app, SIGKILL, &st), 0);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGKILL);
    /* The file stays, and nobody answers: exactly what dotmon must skip. */
    struct stat sb;
    assert_int_equal(stat(sock, &sb), 0);
    assert_int_equal(connect_unix(sock), -ECONNREFUSED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_testapp_ready_socket_and_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testapp_commands, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testapp_heartbeat_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testapp_exit_code_removes_socket, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testapp_exits_on_stdin_eof, setup, teardown),
        cmocka_unit_test_setup_teardown(test_testapp_no_stdin_exit_runs_until_sigterm, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_testapp_sigkill_leaves_a_stale_socket, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
