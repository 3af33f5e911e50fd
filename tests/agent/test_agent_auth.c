/* SPDX-License-Identifier: MIT */
/*
 * Integration: authentication over real HTTP against the real dotmon binary. The detailed JWT
 * matrix is unit-tested in tests/auth; here: --temp-apikey prints a key that works, requests
 * without it or with a wrong one get 401 + WWW-Authenticate: Bearer on every route, a key from
 * another dotmon is refused, two Authorization headers are a 400, and --no-auth lets everything
 * through. The /ui page's static files are the exception: served without a token, with the CSP.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"

#define HTTP_MS 10000

static const char *const temp_key[] = {"--temp-apikey", NULL};

/* GET target on dm with one Authorization header line (or none); returns the status. */
static int get_status(struct dotmon *dm, const char *target, const char *auth_line,
                      struct httpc_resp *r)
{
    const char *headers[] = {auth_line, NULL};
    int rc = httpc_get(dm->port, target, auth_line ? headers : NULL, testenv_timeout(HTTP_MS), r);
    if (rc != 0) {
        fprintf(stderr, "GET %s: %s %s\n", target, agent_strerror(rc), r->error);
    }
    assert_int_equal(rc, 0);
    return r->status;
}

static void expect_401(struct dotmon *dm, const char *target, const char *auth_line)
{
    struct httpc_resp r;
    int status = get_status(dm, target, auth_line, &r);
    const char *www = httpc_header(&r, "WWW-Authenticate");
    bool ok = status == 401 && www && strncasecmp(www, "Bearer", 6) == 0;
    if (!ok) {
        fprintf(stderr, "GET %s with '%s': status %d, WWW-Authenticate '%s', body %s\n", target,
                auth_line ? auth_line : "(no Authorization)", status, www ? www : "(none)", r.body);
    }
    httpc_resp_fini(&r);
    assert_true(ok);
}

static void expect_200(struct dotmon *dm, const char *target, const char *auth_line)
{
    struct httpc_resp r;
    int status = get_status(dm, target, auth_line, &r);
    if (status != 200) {
        fprintf(stderr, "GET %s with '%s': status %d, body %s\n", target,
                auth_line ? auth_line : "(no Authorization)", status, r.body);
    }
    httpc_resp_fini(&r);
    assert_int_equal(status, 200);
}

static void test_agent_auth_temp_key_matrix(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    struct dotmon *dm = agent_test_start_dotmon(env, temp_key);
    assert_non_null(dm->auth_header);
    /* A JWT: three base64url parts. */
    const char *t = dm->token;
    assert_true(strlen(t) > 20);
    assert_int_equal(strspn(t, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."),
                     strlen(t));
    const char *dot1 = strchr(t, '.');
    assert_non_null(dot1);
    const char *dot2 = strchr(dot1 + 1, '.');
    assert_non_null(dot2);
    assert_null(strchr(dot2 + 1, '.'));

    /* Discovery is asynchronous: wait until the app is known (authorised listing). */
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, 5000);
    cJSON_Delete(arr);

    char pid_q[64], env_q[64];
    snprintf(pid_q, sizeof pid_q, "/process?pid=%d", (int)app->pid);
    snprintf(env_q, sizeof env_q, "/env?pid=%d", (int)app->pid);
    const char *routes[] = {"/processes", pid_q, env_q, "/info", "/metrics/dotmon"};

    /* Wrong credentials of every kind. */
    size_t tn = strlen(t);
    char *flipped = malloc(tn + 64), *unsigned_ = malloc(tn + 64), *no_scheme = malloc(tn + 64);
    assert_non_null(flipped);
    assert_non_null(unsigned_);
    assert_non_null(no_scheme);
    snprintf(flipped, tn + 64, "Authorization: Bearer %s", t);
    char *last = flipped + strlen(flipped) - 1;
    *last = *last == 'A' ? 'B' : 'A'; /* one bit of the signature off */
    snprintf(unsigned_, tn + 64, "Authorization: Bearer %.*s.", (int)(dot2 - t), t);
    snprintf(no_scheme, tn + 64, "Authorization: %s", t);
    const char *bad[] = {
        NULL, /* no Authorization header at all */
        "Authorization: Bearer garbage",
        "Authorization: Bearer a.b.c",
        "Authorization: Bearer ",
        "Authorization: Basic dXNlcjpwYXNzd29yZA==",
        flipped,
        unsigned_,
        no_scheme,
    };
    for (size_t r = 0; r < sizeof routes / sizeof routes[0]; r++) {
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            expect_401(dm, routes[r], bad[b]);
        }
        expect_200(dm, routes[r], dm->auth_header);
    }

    /* GET / (the route list, as dotnet-monitor's OpenAPI document) needs no credentials. */
    struct httpc_resp root;
    assert_int_equal(get_status(dm, "/", NULL, &root), 200);
    assert_true(httpc_content_type_is(&root, "application/json"));
    httpc_resp_fini(&root);

    /* Kubernetes probes need no credentials, and say nothing beyond healthy / not. */
    const char *probes[] = {"/healthz", "/readyz"};
    for (size_t i = 0; i < 2; i++) {
        struct httpc_resp pr;
        assert_int_equal(get_status(dm, probes[i], NULL, &pr), 200);
        assert_string_equal(pr.body, "Healthy");
        assert_true(httpc_content_type_is(&pr, "text/plain"));
        httpc_resp_fini(&pr);
        assert_int_equal(get_status(dm, probes[i], "Authorization: Bearer garbage", &pr), 200);
        httpc_resp_fini(&pr);
    }

    /* The /ui page's static files answer without credentials (a browser navigating to them
     * cannot send the header; their data requests are authorized as above), with the strict CSP;
     * a file that is not part of the page is a 404, and no other path under /ui serves anything. */
    const char *ui[] = {"/ui", "/ui/", "/ui/index.html", "/ui/app.js", "/ui/app.css"};
    for (size_t i = 0; i < sizeof ui / sizeof ui[0]; i++) {
        struct httpc_resp pr;
        assert_int_equal(get_status(dm, ui[i], NULL, &pr), 200);
        const char *csp = httpc_header(&pr, "Content-Security-Policy");
        assert_non_null(csp);
        assert_non_null(strstr(csp, "default-src 'none'; script-src 'self';"));
        assert_string_equal(httpc_header(&pr, "X-Content-Type-Options"), "nosniff");
        assert_string_equal(httpc_header(&pr, "Cache-Control"), "no-store");
        assert_true(pr.body_len > 500);
        httpc_resp_fini(&pr);
    }
    const char *not_ui[] = {"/ui/settings.json", "/ui/..%2Fprocesses", "/ui/app.js/x"};
    for (size_t i = 0; i < sizeof not_ui / sizeof not_ui[0]; i++) {
        struct httpc_resp pr;
        assert_int_equal(get_status(dm, not_ui[i], NULL, &pr), 404);
        httpc_resp_fini(&pr);
    }

    /* The scheme is case-insensitive (RFC 9110 section 11.1), as in ASP.NET's JwtBearer. */
    char *lower = malloc(tn + 64);
    assert_non_null(lower);
    snprintf(lower, tn + 64, "Authorization: bearer %s", t);
    expect_200(dm, "/processes", lower);

    /* Two Authorization headers: which one counts is ambiguous (proxies and servers disagree),
     * so the request is refused whatever they hold, the good token first or second. */
    const char *const pairs[][2] = {{dm->auth_header, "Authorization: Bearer garbage"},
                                    {"Authorization: Bearer garbage", dm->auth_header},
                                    {dm->auth_header, dm->auth_header}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        const char *headers[] = {pairs[i][0], pairs[i][1], NULL};
        struct httpc_resp pr;
        assert_int_equal(httpc_get(dm->port, "/processes", headers, testenv_timeout(HTTP_MS), &pr),
                         0);
        if (pr.status != 400) {
            fprintf(stderr, "two Authorization headers (%zu): %d %s\n", i, pr.status, pr.body);
        }
        agent_test_assert_problem(&pr, 400);
        assert_non_null(strstr(pr.body, "more than one Authorization header"));
        httpc_resp_fini(&pr);
    }

    free(flipped);
    free(unsigned_);
    free(no_scheme);
    free(lower);
    agent_test_stop_dotmon_clean(dm);
}

static void test_agent_auth_key_of_another_instance_is_refused(void **state)
{
    struct testenv *env = *state;
    struct dotmon *a = agent_test_start_dotmon(env, temp_key);
    struct dotmon *b = agent_test_start_dotmon(env, temp_key);
    /* Each instance makes its own key pair. */
    assert_string_not_equal(a->token, b->token);
    expect_401(a, "/processes", b->auth_header);
    expect_401(b, "/processes", a->auth_header);
    expect_200(a, "/processes", a->auth_header);
    expect_200(b, "/processes", b->auth_header);
    agent_test_stop_dotmon_clean(a);
    agent_test_stop_dotmon_clean(b);
}

static void test_agent_auth_no_auth_lets_everything_through(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    const char *args[] = {"--no-auth", NULL};
    struct dotmon *dm = agent_test_start_dotmon(env, args);
    assert_null(dm->auth_header);
    /* Discovery is asynchronous: wait until the app is known before asking for it. */
    cJSON *arr = agent_test_wait_processes(dm, &app->pid, 1, 5000);
    cJSON_Delete(arr);
    char pid_q[64];
    snprintf(pid_q, sizeof pid_q, "/process?pid=%d", (int)app->pid);
    expect_200(dm, pid_q, NULL);
    expect_200(dm, "/info", NULL);
    /* A header is simply ignored. */
    expect_200(dm, "/processes", "Authorization: Bearer garbage");
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_auth_temp_key_matrix, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_auth_key_of_another_instance_is_refused,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_auth_no_auth_lets_everything_through,
                                        agent_test_setup, agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
