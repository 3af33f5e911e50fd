/* SPDX-License-Identifier: MIT */
/*
 * Integration: the dotmon binary's command line and configuration. `generatekey` output works as
 * configuration (environment variables with dotnet-monitor's names, or a JSON file), a token for
 * another subject gets 403 and one signed by another key 401, no key configured means 401
 * everywhere, an invalid key refuses to start, bad flags exit 2, DefaultProcess filters pick the
 * default process, and `config show` redacts the key.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"

static int status_with(struct dotmon *dm, const char *target, const char *auth_line)
{
    const char *headers[] = {auth_line, NULL};
    struct httpc_resp r;
    int rc = httpc_get(dm->port, target, auth_line ? headers : NULL, testenv_timeout(10000), &r);
    assert_int_equal(rc, 0);
    int status = r.status;
    if (status == 401) {
        assert_non_null(httpc_header(&r, "WWW-Authenticate"));
    }
    if (status >= 400) {
        agent_test_assert_problem(&r, status);
    }
    httpc_resp_fini(&r);
    return status;
}

static void test_agent_config_generatekey_env_and_subjects(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a, b;
    agent_test_generate_key(env, &a);
    agent_test_generate_key(env, &b);
    assert_string_not_equal(a.subject, b.subject);

    char subj[128], pk[1200];
    snprintf(subj, sizeof(subj), "DotnetMonitor_Authentication__MonitorApiKey__Subject=%s",
             a.subject);
    snprintf(pk, sizeof(pk), "DOTNETMONITOR_Authentication__MonitorApiKey__PublicKey=%s",
             a.public_key);
    const char *envv[] = {subj, pk, NULL};
    const char *no_args[] = {NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_args, envv, &dm), 0);
    assert_int_equal(status_with(dm, "/processes", a.header), 200);
    assert_int_equal(status_with(dm, "/info", a.header), 200);
    assert_int_equal(status_with(dm, "/processes", b.header), 401); /* signed by another key */
    assert_int_equal(status_with(dm, "/processes", NULL), 401);
    agent_test_stop_dotmon_clean(dm);

    /* Key A with B's subject: A's token is valid but for another subject → 403. */
    char subj_b[128];
    snprintf(subj_b, sizeof(subj_b), "DotnetMonitor_Authentication__MonitorApiKey__Subject=%s",
             b.subject);
    const char *envv2[] = {subj_b, pk, NULL};
    assert_int_equal(testenv_start_dotmon(env, no_args, envv2, &dm), 0);
    assert_int_equal(status_with(dm, "/processes", a.header), 403);
    agent_test_stop_dotmon_clean(dm);
}

static void test_agent_config_file_key(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a;
    agent_test_generate_key(env, &a);
    char path[256];
    snprintf(path, sizeof(path), "%s/settings.json", env->dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f, "{\"Authentication\":{\"MonitorApiKey\":{\"Subject\":\"%s\",\"PublicKey\":\"%s\"}}}",
            a.subject, a.public_key);
    fclose(f);
    const char *args[] = {"--configuration-file-path", path, NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, NULL, &dm), 0);
    assert_int_equal(status_with(dm, "/processes", a.header), 200);
    assert_int_equal(status_with(dm, "/processes", NULL), 401);
    agent_test_stop_dotmon_clean(dm);

    /* config show reads the same file and redacts the key unless --level full. */
    const char *show[] = {"config", "show", "--configuration-file-path", path, NULL};
    char *out = NULL;
    assert_int_equal(agent_test_run_dotmon(env, show, NULL, &out, NULL), 0);
    assert_non_null(strstr(out, a.subject));
    assert_null(strstr(out, a.public_key));
    assert_non_null(strstr(out, "REDACTED"));
    free(out);
    const char *show_full[] = {"config", "show", "--level", "full", "--configuration-file-path",
                               path,     NULL};
    assert_int_equal(agent_test_run_dotmon(env, show_full, NULL, &out, NULL), 0);
    assert_non_null(strstr(out, a.public_key));
    free(out);
}

/*
 * dotnet-monitor's sources and order: the API key from key-per-file files (a Kubernetes Secret
 * mounted at /etc/dotnet-monitor; DOTMON_SHARED_CONFIG_DIR stands for it here) with a trailing
 * newline, and DotnetMonitor_Urls winning over the command line's --urls (the image's CMD),
 * which names an address this machine does not have: if --urls won, dotmon could not bind.
 */
static void test_agent_config_key_per_file_and_env_over_cli(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a;
    agent_test_generate_key(env, &a);
    char dir[600], path[700];
    snprintf(dir, sizeof(dir), "%s/etc-dotnet-monitor", env->dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    const char *names[] = {"Authentication__MonitorApiKey__Subject",
                           "Authentication__MonitorApiKey__PublicKey"};
    const char *values[] = {a.subject, a.public_key};
    for (size_t i = 0; i < 2; i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "%s\n", values[i]);
        fclose(f);
    }
    char shared_env[700];
    snprintf(shared_env, sizeof(shared_env), "DOTMON_SHARED_CONFIG_DIR=%s", dir);
    const char *envv[] = {shared_env, "DotnetMonitor_Urls=http://127.0.0.1:0", NULL};
    const char *args[] = {"--urls", "http://192.0.2.1:52323", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, envv, &dm), 0);
    assert_int_equal(status_with(dm, "/processes", a.header), 200);
    assert_int_equal(status_with(dm, "/processes", NULL), 401);
    agent_test_stop_dotmon_clean(dm);

    /* config show --show-sources names where each came from. */
    const char *show[] = {"config", "show", "--show-sources", "--urls", "http://192.0.2.1:1", NULL};
    char *out = NULL, *err = NULL;
    assert_int_equal(agent_test_run_dotmon(env, show, envv, &out, &err), 0);
    bool ok = out != NULL && strstr(out, "/* key-per-file */") != NULL &&
              strstr(out, "\"Urls\": \"http://127.0.0.1:0\", /* environment */") != NULL &&
              strstr(out, dir) != NULL && strstr(out, a.public_key) == NULL;
    if (!ok) {
        fprintf(stderr, "config show --show-sources:\n%s\n%s\n", out ? out : "", err ? err : "");
    }
    free(out);
    free(err);
    assert_true(ok);
}

static void test_agent_config_no_key_rejects_everything(void **state)
{
    struct testenv *env = *state;
    const char *no_args[] = {NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_args, NULL, &dm), 0);
    assert_int_equal(status_with(dm, "/processes", NULL), 401);
    assert_int_equal(status_with(dm, "/info", "Authorization: Bearer abc.def.ghi"), 401);
    /* /metrics is anonymous by design: this harness turns metrics off, so it answers
     * dotnet-monitor's 400 (not 401); dotmon's own families need the key. */
    assert_int_equal(status_with(dm, "/metrics", NULL), 400);
    assert_int_equal(status_with(dm, "/metrics/dotmon", NULL), 401);
    char *line = NULL;
    proc_rewind(dm->proc, PROC_STDERR);
    assert_int_equal(proc_find_line(dm->proc, PROC_STDERR, "{", &line), 0);
    free(line);
    char *err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_non_null(strstr(err, "no API key is configured"));
    free(err);
    agent_test_stop_dotmon_clean(dm);
}

static void test_agent_config_invalid_key_refuses_to_start(void **state)
{
    struct testenv *env = *state;
    const char *envv[] = {"DotnetMonitor_Authentication__MonitorApiKey__Subject=someone",
                          "DotnetMonitor_Authentication__MonitorApiKey__PublicKey=bm90LWEta2V5",
                          NULL};
    const char *args[] = {"collect", "--urls", "http://127.0.0.1:0", "--metrics", "false", NULL};
    char *err = NULL;
    int code = agent_test_run_dotmon(env, args, envv, NULL, &err);
    assert_int_equal(code, 1);
    assert_non_null(strstr(err, "PublicKey"));
    free(err);

    const char *only_subject[] = {"DotnetMonitor_Authentication__MonitorApiKey__Subject=someone",
                                  NULL};
    code = agent_test_run_dotmon(env, args, only_subject, NULL, &err);
    assert_int_equal(code, 1);
    assert_non_null(strstr(err, "Subject and PublicKey"));
    free(err);
}

static void test_agent_config_cli_errors_exit_2(void **state)
{
    struct testenv *env = *state;
    char *err = NULL, *out = NULL;
    const char *unknown[] = {"collect", "--bogus", NULL};
    assert_int_equal(agent_test_run_dotmon(env, unknown, NULL, NULL, &err), 2);
    assert_non_null(strstr(err, "--bogus"));
    free(err);
    const char *badval[] = {"generatekey", "--expiration", "forever", NULL};
    assert_int_equal(agent_test_run_dotmon(env, badval, NULL, NULL, &err), 2);
    assert_non_null(strstr(err, "forever"));
    free(err);
    const char *badjson[] = {"collect", "--configuration-file-path", "/nonexistent/dotmon.json",
                             NULL};
    assert_int_equal(agent_test_run_dotmon(env, badjson, NULL, NULL, &err), 2);
    assert_non_null(strstr(err, "/nonexistent/dotmon.json"));
    free(err);
    const char *help[] = {"--help", NULL};
    assert_int_equal(agent_test_run_dotmon(env, help, NULL, &out, NULL), 0);
    assert_non_null(strstr(out, "generatekey"));
    free(out);
    const char *version[] = {"--version", NULL};
    assert_int_equal(agent_test_run_dotmon(env, version, NULL, &out, NULL), 0);
    assert_true(out[0] >= '0' && out[0] <= '9');
    free(out);
}

static void test_agent_config_default_process_filter(void **state)
{
    struct testenv *env = *state;
    struct test_app *a1 = agent_test_start_app(env);
    struct test_app *a2 = agent_test_start_app(env);
    char filt[128];
    snprintf(filt, sizeof(filt), "DotnetMonitor_DefaultProcess__Filters__0__CommandLine=%s",
             a2->marker);
    const char *envv[] = {filt, "DotnetMonitor_DefaultProcess__Filters__0__MatchType=Contains",
                          NULL};
    /* Shorthand form (the child names the key) with MatchType Contains on the command line. */
    const char *args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, envv, &dm), 0);
    pid_t pids[2] = {a1->pid, a2->pid};
    cJSON *arr = agent_test_wait_processes(dm, pids, 2, 10000);
    cJSON *p1 = agent_test_find_pid(arr, a1->pid), *p2 = agent_test_find_pid(arr, a2->pid);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(p1, "isDefault")));
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(p2, "isDefault")));
    cJSON_Delete(arr);
    /* Without a selector, /process acts on the default process. */
    cJSON *proc = agent_test_get_json(dm, "/process", 200);
    assert_int_equal(agent_test_int(proc, "pid"), a2->pid);
    cJSON_Delete(proc);
    agent_test_stop_dotmon_clean(dm);

    /* An invalid filter refuses to start. */
    const char *bad[] = {"DotnetMonitor_DefaultProcess__Filters__0__Key=Color",
                         "DotnetMonitor_DefaultProcess__Filters__0__Value=red", NULL};
    const char *cargs[] = {"collect",   "--no-auth", "--urls", "http://127.0.0.1:0",
                           "--metrics", "false",     NULL};
    char *err = NULL;
    assert_int_equal(agent_test_run_dotmon(env, cargs, bad, NULL, &err), 1);
    assert_non_null(strstr(err, "Color"));
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_config_generatekey_env_and_subjects,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_file_key, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_key_per_file_and_env_over_cli,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_no_key_rejects_everything,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_invalid_key_refuses_to_start,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_cli_errors_exit_2, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_config_default_process_filter, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
