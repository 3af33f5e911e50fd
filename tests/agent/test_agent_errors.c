/* SPDX-License-Identifier: MIT */
/*
 * Integration: error answers of the real dotmon over real HTTP. Bad parameters are 400, so is a
 * process that does not exist (dotnet-monitor's status and message), a route that does not exist is
 * 404, a wrong method is 405 with an Allow header, all as RFC 7807
 * application/problem+json. Malformed HTTP gets a 4xx or a closed connection, never a crash; error
 * answers keep the connection usable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "buf.h"
#include "err.h"
#include "proc.h"

#define HTTP_MS 10000

static const char *const no_auth[] = {"--no-auth", NULL};

static void test_agent_errors_bad_parameters_are_400(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, 5000);
    cJSON_Delete(arr);

    static const char *const bad[] = {
        "/process?pid=abc",
        "/process?pid=-1",
        "/process?pid=12abc",
        "/process?pid=99999999999999999999",
        "/process?pid=",
        "/process?uid=not-a-guid",
        "/process?uid=1d41d0b5-c603-4943-bccd",
        "/env?pid=abc",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        agent_test_expect_problem(dm, "GET", bad[i], 400);
    }
    /* Unknown query parameters are ignored, as ASP.NET model binding does. */
    cJSON *ok = agent_test_get_json(dm, "/processes?foo=bar", 200);
    cJSON_Delete(ok);
    agent_test_stop_dotmon_clean(dm);
}

static void test_agent_errors_missing_processes_are_400(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, 5000);
    cJSON_Delete(arr);

    /* pid_max is far below 999999 on this kind of machine, and dotmon only sees our TMPDIR. */
    /* No such process: 400 with dotnet-monitor's message (scripts compare it). */
    agent_test_expect_problem_detail(dm, "GET", "/process?pid=999999", 400,
                                     AGENT_TEST_DM_NO_PROCESS);
    agent_test_expect_problem_detail(dm, "GET", "/env?pid=999999", 400, AGENT_TEST_DM_NO_PROCESS);
    agent_test_expect_problem_detail(dm, "GET", "/process?uid=00000000-1111-2222-3333-444444444444",
                                     400, AGENT_TEST_DM_NO_PROCESS);
    agent_test_expect_problem_detail(dm, "GET", "/process?name=NoSuchApp", 400,
                                     AGENT_TEST_DM_NO_PROCESS);
    agent_test_expect_problem_detail(dm, "GET", "/dump?pid=999999", 400, AGENT_TEST_DM_NO_PROCESS);
    agent_test_expect_problem_detail(dm, "GET", "/trace?pid=999999", 400, AGENT_TEST_DM_NO_PROCESS);
    /* Routes that do not exist: 404. */
    agent_test_expect_problem(dm, "GET", "/nope", 404);
    agent_test_expect_problem(dm, "GET", "/processes/extra", 404);
    agent_test_expect_problem(dm, "GET", "/info/extra", 404); /* "/" is a route (GET / is 200) */
    agent_test_stop_dotmon_clean(dm);
}

static void expect_405(struct dotmon *dm, const char *method, const char *target)
{
    struct httpc_resp r;
    int rc = testenv_dotmon_request(dm, method, target, NULL, 0, &r);
    assert_int_equal(rc, 0);
    /* RFC 9110 section 15.5.6: a 405 must say what is allowed. */
    const char *allow = httpc_header(&r, "Allow");
    bool ok = allow && strstr(allow, "GET");
    if (!ok) {
        fprintf(stderr, "%s %s: status %d, Allow '%s'\n", method, target, r.status,
                allow ? allow : "(none)");
    }
    agent_test_assert_problem(&r, 405);
    httpc_resp_fini(&r);
    assert_true(ok);
}

static void test_agent_errors_wrong_method_is_405(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    char env_q[64];
    snprintf(env_q, sizeof env_q, "/env?pid=%d", (int)app->pid);
    expect_405(dm, "POST", "/processes");
    expect_405(dm, "DELETE", "/info");
    expect_405(dm, "PUT", env_q);
    expect_405(dm, "POST", "/process");
    agent_test_stop_dotmon_clean(dm);
}

static void test_agent_errors_keep_the_connection_usable(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, 5000);
    cJSON_Delete(arr);

    struct httpc c;
    httpc_init(&c, "127.0.0.1", dm->port, testenv_timeout(HTTP_MS));
    static const struct {
        const char *method, *target;
        int status;
    } seq[] = {
        {"GET", "/processes", 200},          {"GET", "/nope", 404},
        {"GET", "/process?pid=abc", 400},    {"POST", "/processes", 405},
        {"GET", "/process?pid=999999", 400}, {"GET", "/info", 200},
        {"GET", "/processes", 200},
    };
    for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++) {
        struct httpc_resp r;
        int rc = httpc_request(&c, seq[i].method, seq[i].target, NULL, NULL, 0, &r);
        if (rc != 0 || r.status != seq[i].status) {
            fprintf(stderr, "%s %s: rc %d %s, status %d\n", seq[i].method, seq[i].target, rc,
                    r.error, r.status);
        }
        assert_int_equal(rc, 0);
        assert_int_equal(r.status, seq[i].status);
        assert_true(r.keep_alive);
        httpc_resp_fini(&r);
    }
    /* All on one connection: no error answer made dotmon hang up. */
    assert_int_equal(c.requests_on_conn, sizeof seq / sizeof seq[0]);
    httpc_fini(&c);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * Sends raw bytes; dotmon may answer with a 4xx, or 505 for a version it does not speak (either
 * must be a well-formed response), or close the connection; but it must not stay silent forever,
 * answer anything else, or die.
 */
static void expect_rejected(struct dotmon *dm, const void *bytes, size_t n, const char *what)
{
    struct buf out;
    buf_init(&out, 0);
    int rc = httpc_raw(dm->port, bytes, n, false, testenv_timeout(HTTP_MS), &out);
    if (rc != 0) {
        fprintf(stderr, "%s: dotmon neither answered nor closed (%s) after %zu bytes back\n", what,
                agent_strerror(rc), buf_size(&out));
    }
    int prc = 0, status = 0;
    if (rc == 0 && buf_size(&out) > 0) {
        struct httpc_resp r;
        prc = httpc_parse(buf_data(&out), buf_size(&out), NULL, &r, NULL);
        status = r.status;
        if (prc != 0 || !((status >= 400 && status < 500) || status == 505)) {
            fprintf(stderr, "%s: answer %d (%s) '%.*s'\n", what, status, r.error,
                    (int)(buf_size(&out) > 300 ? 300 : buf_size(&out)),
                    (const char *)buf_data(&out));
            prc = prc ? prc : -1;
        }
        httpc_resp_fini(&r);
    }
    buf_fini(&out);
    assert_int_equal(rc, 0);
    assert_int_equal(prc, 0);
    assert_true(proc_running(dm->proc));
}

static void test_agent_errors_malformed_http(void **state)
{
    struct testenv *env = *state;
    struct dotmon *dm = agent_test_start_dotmon(env, no_auth);

    static const char garbage[] = "GARBAGE\r\n\r\n";
    expect_rejected(dm, garbage, sizeof garbage - 1, "garbage request line");
    static const char bad_version[] = "GET /processes HTTP/9.9\r\nHost: x\r\n\r\n";
    expect_rejected(dm, bad_version, sizeof bad_version - 1, "HTTP/9.9");
    static const char bad_header[] = "GET /processes HTTP/1.1\r\nHost x\r\n\r\n";
    expect_rejected(dm, bad_header, sizeof bad_header - 1, "header without colon");
    static const char bad_length[] =
        "POST /processes HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n";
    expect_rejected(dm, bad_length, sizeof bad_length - 1, "bad Content-Length");
    static const char smuggle[] = "POST /processes HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n"
                                  "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n";
    expect_rejected(dm, smuggle, sizeof smuggle - 1, "Content-Length with Transfer-Encoding");
    static const char nul[] = "GET /proc\0esses HTTP/1.1\r\nHost: x\r\n\r\n";
    expect_rejected(dm, nul, sizeof nul - 1, "NUL in the target");

    /* A 256 KiB header: refused (431, 400 or a close), not buffered forever. */
    struct buf big;
    buf_init(&big, 0);
    assert_int_equal(buf_append_str(&big, "GET /processes HTTP/1.1\r\nHost: x\r\nX-Big: "), 0);
    for (int i = 0; i < 256 * 1024; i++) {
        assert_int_equal(buf_append(&big, "a", 1), 0);
    }
    assert_int_equal(buf_append_str(&big, "\r\n\r\n"), 0);
    expect_rejected(dm, buf_data(&big), buf_size(&big), "256 KiB header");
    buf_fini(&big);

    /* Still serving, and still able to stop cleanly. */
    cJSON *arr = agent_test_get_json(dm, "/processes", 200);
    cJSON_Delete(arr);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_errors_bad_parameters_are_400, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_errors_missing_processes_are_400,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_errors_wrong_method_is_405, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_errors_keep_the_connection_usable,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_errors_malformed_http, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
