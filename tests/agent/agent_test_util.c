/* SPDX-License-Identifier: MIT */
#include "agent_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"

#define WATCHDOG_S 180

int agent_test_setup(void **state)
{
    struct testenv *env = calloc(1, sizeof *env);
    if (!env || testenv_init(env) != 0) {
        free(env);
        return -1;
    }
    testenv_watchdog(WATCHDOG_S);
    *state = env;
    return 0;
}

int agent_test_teardown(void **state)
{
    struct testenv *env = *state;
    testenv_fini(env);
    free(env);
    testenv_watchdog(0);
    return 0;
}

struct test_app *agent_test_start_app(struct testenv *env)
{
    struct test_app *app = NULL;
    assert_int_equal(testenv_start_app(env, NULL, NULL, &app), 0);
    assert_non_null(app);
    return app;
}

struct dotmon *agent_test_start_dotmon(struct testenv *env, const char *const *args)
{
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, NULL, &dm), 0);
    assert_non_null(dm);
    assert_true(dm->port > 0);
    return dm;
}

void agent_test_stop_dotmon_clean(struct dotmon *dm)
{
    int st = -1;
    assert_int_equal(testenv_stop_dotmon(dm, 10000, &st), 0);
    assert_true(st != -1 && WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

static void show(const char *what, const char *target, const struct httpc_resp *r, int rc)
{
    fprintf(stderr, "%s %s: rc %d (%s)%s%s, status %d, content-type '%s', body: %.*s\n", what,
            target, rc, agent_strerror(rc), r->error[0] ? ": " : "", r->error, r->status,
            httpc_header(r, "Content-Type") ? httpc_header(r, "Content-Type") : "(none)",
            (int)(r->body_len > 2000 ? 2000 : r->body_len), r->body ? r->body : "");
}

cJSON *agent_test_get_json(struct dotmon *dm, const char *target, int expect_status)
{
    struct httpc_resp r;
    int rc = testenv_dotmon_get(dm, target, &r);
    bool ok = rc == 0 && r.status == expect_status &&
              (expect_status >= 300 || httpc_content_type_is(&r, "application/json"));
    cJSON *json = ok ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    if (!ok || !json) {
        show(json ? "unexpected answer to GET" : "no JSON in answer to GET", target, &r, rc);
    }
    httpc_resp_fini(&r);
    assert_int_equal(rc, 0);
    assert_true(ok);
    assert_non_null(json);
    return json;
}

/* The checks of agent_test_assert_problem, without asserting (so callers can free first). */
static bool problem_ok(const struct httpc_resp *r, int expect_status)
{
    cJSON *json = cJSON_ParseWithLength(r->body, r->body_len);
    bool ok = r->status == expect_status && httpc_content_type_is(r, "application/problem+json") &&
              cJSON_IsObject(json);
    const cJSON *status = cJSON_GetObjectItemCaseSensitive(json, "status");
    const cJSON *title = cJSON_GetObjectItemCaseSensitive(json, "title");
    const cJSON *detail = cJSON_GetObjectItemCaseSensitive(json, "detail");
    ok = ok && cJSON_IsNumber(status) && (int)status->valuedouble == expect_status &&
         cJSON_IsString(title) && cJSON_IsString(detail);
    if (!ok) {
        fprintf(stderr, "expected a %d application/problem+json with status, title, detail\n",
                expect_status);
        show("got", "", r, 0);
    }
    cJSON_Delete(json);
    return ok;
}

void agent_test_assert_problem(const struct httpc_resp *r, int expect_status)
{
    assert_true(problem_ok(r, expect_status));
}

void agent_test_expect_problem(struct dotmon *dm, const char *method, const char *target,
                               int expect_status)
{
    struct httpc_resp r;
    int rc = testenv_dotmon_request(dm, method, target, NULL, 0, &r);
    if (rc != 0) {
        show(method, target, &r, rc);
    }
    bool ok = rc == 0 && problem_ok(&r, expect_status);
    if (!ok && rc == 0) {
        fprintf(stderr, "... in answer to %s %s\n", method, target);
    }
    httpc_resp_fini(&r);
    assert_true(ok);
}

void agent_test_expect_problem_detail(struct dotmon *dm, const char *method, const char *target,
                                      int expect_status, const char *detail)
{
    struct httpc_resp r;
    int rc = testenv_dotmon_request(dm, method, target, NULL, 0, &r);
    if (rc != 0) {
        show(method, target, &r, rc);
    }
    bool ok = rc == 0 && problem_ok(&r, expect_status);
    cJSON *json = ok ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(json, "detail");
    if (ok && !(cJSON_IsString(d) && strcmp(d->valuestring, detail) == 0)) {
        fprintf(stderr, "%s %s: detail '%s', expected '%s'\n", method, target,
                cJSON_IsString(d) ? d->valuestring : "(none)", detail);
        ok = false;
    }
    cJSON_Delete(json);
    httpc_resp_fini(&r);
    assert_true(ok);
}

cJSON *agent_test_find_pid(cJSON *arr, pid_t pid)
{
    cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "pid");
        if (cJSON_IsNumber(p) && (pid_t)p->valuedouble == pid) {
            return e;
        }
    }
    return NULL;
}

static bool same_pid_set(cJSON *arr, const pid_t *pids, size_t n)
{
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!agent_test_find_pid(arr, pids[i])) {
            return false;
        }
    }
    return true;
}

cJSON *agent_test_wait_processes(struct dotmon *dm, const pid_t *pids, size_t n, int timeout_ms)
{
    double deadline = testenv_now_ms() + testenv_timeout(timeout_ms);
    char *last = NULL;
    for (;;) {
        cJSON *arr = agent_test_get_json(dm, "/processes", 200);
        if (same_pid_set(arr, pids, n)) {
            free(last);
            return arr;
        }
        free(last);
        last = cJSON_PrintUnformatted(arr);
        cJSON_Delete(arr);
        if (testenv_now_ms() >= deadline) {
            break;
        }
        testenv_sleep_ms(100);
    }
    fprintf(stderr, "/processes never listed exactly these %zu pids:", n);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %d", (int)pids[i]);
    }
    fprintf(stderr, "\nlast answer: %s\n", last ? last : "(none)");
    free(last);
    fail_msg("process list did not settle within %d ms", timeout_ms);
    return NULL;
}

bool agent_test_is_guid(const char *s)
{
    static const int groups[] = {8, 4, 4, 4, 12};
    for (size_t g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, s++) {
            if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
                  (*s >= 'A' && *s <= 'F'))) {
                return false;
            }
        }
        if (g < 4 && *s++ != '-') {
            return false;
        }
    }
    return *s == '\0';
}

const char *agent_test_str(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsString(v)) {
        char *text = cJSON_PrintUnformatted(obj);
        fprintf(stderr, "no string member '%s' in %s\n", name, text ? text : "(null)");
        free(text);
    }
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

long long agent_test_int(const cJSON *obj, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!cJSON_IsNumber(v)) {
        char *text = cJSON_PrintUnformatted(obj);
        fprintf(stderr, "no number member '%s' in %s\n", name, text ? text : "(null)");
        free(text);
    }
    assert_true(cJSON_IsNumber(v));
    return (long long)v->valuedouble;
}

cJSON *agent_test_tracecheck(struct testenv *env, const char *path, const char *marker)
{
    const char *dll = getenv("DOTMON_TRACECHECK");
    const char *dotnet = getenv("DOTNET_EXE");
    assert_non_null(dll);
    assert_non_null(dotnet);
    const char *argv[] = {dotnet, dll, path, marker ? "--find" : NULL, marker, NULL};
    char root[4200];
    snprintf(root, sizeof(root), "DOTNET_ROOT=%s", env->dotnet_root);
    const char *envv[] = {root, "DOTNET_CLI_TELEMETRY_OPTOUT=1", NULL};
    struct proc_opts o = {.argv = argv, .env = envv, .label = "tracecheck", .stdin_null = true};
    struct proc *p = NULL;
    assert_int_equal(proc_spawn(&o, &p), 0);
    int st = 0;
    assert_int_equal(proc_wait(p, testenv_timeout(120000), &st), 0);
    testenv_sleep_ms(50);
    char *text = proc_output(p, PROC_STDOUT, NULL);
    cJSON *j = cJSON_Parse(text);
    if (j == NULL || !WIFEXITED(st) || WEXITSTATUS(st) != 0 ||
        !cJSON_IsTrue(cJSON_GetObjectItem(j, "ok"))) {
        fprintf(stderr, "tracecheck %s failed (status %d): %s\n", path, st, text);
        proc_dump(p, stderr, 4000);
        fail();
    }
    free(text);
    proc_free(p);
    return j;
}

static bool contains(const uint32_t *v, size_t n, uint32_t x)
{
    for (size_t i = 0; i < n; i++) {
        if (v[i] == x) {
            return true;
        }
    }
    return false;
}

size_t agent_test_gc_pairs(const uint32_t *starts, size_t nstarts, const uint32_t *ends,
                           size_t nends)
{
    size_t pairs = 0;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (size_t i = 0; i < nstarts; i++) {
        if (contains(ends, nends, starts[i])) {
            pairs++;
            lo = starts[i] < lo ? starts[i] : lo;
            hi = starts[i] > hi ? starts[i] : hi;
        }
    }
    for (size_t i = 0; i < nstarts; i++) {
        if (!contains(ends, nends, starts[i]) && starts[i] < hi) {
            fprintf(stderr, "GC %u started inside the trace but never ended\n", starts[i]);
            return 0;
        }
    }
    for (size_t i = 0; i < nends; i++) {
        if (!contains(starts, nstarts, ends[i]) && ends[i] > lo) {
            fprintf(stderr, "GC %u ended inside the trace without a start\n", ends[i]);
            return 0;
        }
    }
    return pairs;
}

int agent_test_run_dotmon(struct testenv *env, const char *const *args,
                          const char *const *extra_env, char **out, char **err)
{
    const char *argv[32];
    size_t n = 0;
    argv[n++] = env->dotmon_bin;
    for (size_t i = 0; args[i] != NULL && n < 30; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    struct proc_opts o = {
        .argv = argv, .env = extra_env, .label = "dotmon-cli", .stdin_null = true};
    struct proc *p = NULL;
    assert_int_equal(proc_spawn(&o, &p), 0);
    int st = 0;
    int rc = proc_wait(p, testenv_timeout(15000), &st);
    if (rc != 0) {
        proc_dump(p, stderr, 4000);
    }
    assert_int_equal(rc, 0);
    /* Give the reader thread a moment to drain the pipes after the exit. */
    testenv_sleep_ms(50);
    if (out != NULL) {
        *out = proc_output(p, PROC_STDOUT, NULL);
    }
    if (err != NULL) {
        *err = proc_output(p, PROC_STDERR, NULL);
    }
    proc_free(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void agent_test_generate_key(struct testenv *env, struct agent_test_key *k)
{
    const char *args[] = {"generatekey", "--output", "machinejson", NULL};
    char *out = NULL;
    assert_int_equal(agent_test_run_dotmon(env, args, NULL, &out, NULL), 0);
    cJSON *j = cJSON_Parse(out);
    if (j == NULL) {
        fprintf(stderr, "generatekey printed: %s\n", out);
    }
    assert_non_null(j);
    const char *auth = agent_test_str(j, "AuthorizationHeader");
    assert_true(strncmp(auth, "Bearer ", 7) == 0);
    snprintf(k->header, sizeof(k->header), "Authorization: %s", auth);
    snprintf(k->subject, sizeof(k->subject), "%s", agent_test_str(j, "Subject"));
    snprintf(k->public_key, sizeof(k->public_key), "%s", agent_test_str(j, "PublicKey"));
    cJSON_Delete(j);
    free(out);
}

size_t agent_test_abandon_trace(uint16_t port, const char *auth_header, const char *target,
                                size_t bytes, int ms, int *status)
{
    int fd = testenv_connect_port(port);
    assert_true(fd >= 0);
    char req[1024];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s%s\r\n", target,
                     auth_header ? auth_header : "", auth_header ? "\r\n" : "");
    assert_true(n > 0 && (size_t)n < sizeof(req));
    assert_int_equal(write(fd, req, (size_t)n), n);
    struct timeval tv = {.tv_sec = 2, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    size_t got = 0;
    char buf[16384];
    char head[16] = "";
    double end = testenv_now_ms() + ms;
    while (got < bytes && testenv_now_ms() < end) {
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r <= 0) {
            break;
        }
        if (got < sizeof(head) - 1) {
            size_t k = sizeof(head) - 1 - got < (size_t)r ? sizeof(head) - 1 - got : (size_t)r;
            memcpy(head + got, buf, k);
            head[got + k] = '\0';
        }
        got += (size_t)r;
    }
    close(fd);
    if (status != NULL) {
        *status = strncmp(head, "HTTP/1.", 7) == 0 && strlen(head) >= 12 ? atoi(head + 9) : 0;
    }
    return got;
}

size_t agent_test_running_traces(struct dotmon *dm)
{
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    size_t running = 0;
    cJSON *o;
    cJSON_ArrayForEach(o, ops)
    {
        const char *s = agent_test_str(o, "status");
        running +=
            strcmp(s, "Starting") == 0 || strcmp(s, "Running") == 0 || strcmp(s, "Stopping") == 0;
    }
    cJSON_Delete(ops);
    return running;
}

void agent_test_wait_no_running_traces(struct dotmon *dm)
{
    double end = testenv_now_ms() + testenv_timeout(30000);
    while (agent_test_running_traces(dm) > 0) {
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(50);
    }
}

int agent_test_fd_baseline(pid_t pid)
{
    int lowest = testenv_fd_count(pid);
    for (int i = 0; i < 6; i++) {
        testenv_sleep_ms(50);
        int n = testenv_fd_count(pid);
        lowest = n < lowest ? n : lowest;
    }
    assert_true(lowest > 0);
    return lowest;
}

int agent_test_wait_fds(pid_t pid, int base, int timeout_ms)
{
    double end = testenv_now_ms() + testenv_timeout(timeout_ms);
    int n = testenv_fd_count(pid);
    while (n > base && testenv_now_ms() < end) {
        testenv_sleep_ms(50);
        n = testenv_fd_count(pid);
    }
    return n;
}
