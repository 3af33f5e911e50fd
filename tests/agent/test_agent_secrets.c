/* SPDX-License-Identifier: MIT */
/*
 * Integration: secrets and files. A new Authentication:MonitorApiKey in the configuration file
 * takes effect without a restart (file replaced by rename, rewritten in place, or swapped the way
 * Kubernetes updates a mounted Secret), a half-written file keeps the key, an invalid key refuses
 * every request until fixed; no token ever reaches the logs, even at Debug level; the dump file
 * the runtime writes for dotmon is 0600.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"

/* A reload is noticed by inotify at once; the poll (2 s; KEY_POLL_MS in key_rotation) is the
 * fallback. Generous for ASan. */
#define ROTATE_WAIT_MS 8000
/* Timeouts:KeyWatchPollMs in test_agent_secrets_key_rotation, so that "past the poll interval"
 * is not 2 s of waiting. */
#define KEY_POLL_MS 300
#define STR_(x)     #x
#define STR(x)      STR_(x)

static int status_with(struct dotmon *dm, const char *auth_line)
{
    const char *headers[] = {auth_line, NULL};
    struct httpc_resp r;
    int rc =
        httpc_get(dm->port, "/processes", auth_line ? headers : NULL, testenv_timeout(10000), &r);
    assert_int_equal(rc, 0);
    int status = r.status;
    if (status >= 400) {
        agent_test_assert_problem(&r, status);
    }
    httpc_resp_fini(&r);
    return status;
}

/* Polls until auth_line gets status; returns the milliseconds it took, or fails the test. */
static double wait_status(struct dotmon *dm, const char *auth_line, int status)
{
    double t0 = testenv_now_ms();
    int last = 0;
    while (testenv_now_ms() - t0 < testenv_timeout(ROTATE_WAIT_MS)) {
        last = status_with(dm, auth_line);
        if (last == status) {
            return testenv_now_ms() - t0;
        }
        testenv_sleep_ms(20);
    }
    fprintf(stderr, "still %d instead of %d after %d ms\n", last, status, ROTATE_WAIT_MS);
    proc_dump(dm->proc, stderr, 4000);
    fail();
    return 0;
}

static void key_json(const struct agent_test_key *k, char *out, size_t size)
{
    int n = snprintf(out, size,
                     "{\n  \"Authentication\": {\n    \"MonitorApiKey\": {\n"
                     "      \"Subject\": \"%s\",\n      \"PublicKey\": \"%s\"\n    }\n  }\n}\n",
                     k->subject, k->public_key);
    assert_true(n > 0 && (size_t)n < size);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Writes text next to path and renames it over path (what editors and config tools do). */
static void replace_file(const char *path, const char *text)
{
    char tmp[600];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    write_file(tmp, text);
    assert_int_equal(rename(tmp, path), 0);
}

static struct dotmon *start_with_file(struct testenv *env, const char *path,
                                      const char *const *extra_env)
{
    const char *args[] = {"--configuration-file-path", path, NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, extra_env, &dm), 0);
    return dm;
}

static bool log_has(struct dotmon *dm, const char *needle)
{
    char *err = proc_output(dm->proc, PROC_STDERR, NULL);
    bool has = err != NULL && strstr(err, needle) != NULL;
    free(err);
    return has;
}

static void test_agent_secrets_key_rotation(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a, b;
    agent_test_generate_key(env, &a);
    agent_test_generate_key(env, &b);
    char path[512], text[4096];
    snprintf(path, sizeof(path), "%s/settings.json", env->dir);
    key_json(&a, text, sizeof(text));
    write_file(path, text);
    static const char *const poll_env[] = {
        "DotnetMonitor_Timeouts__KeyWatchPollMs=" STR(KEY_POLL_MS), NULL};
    struct dotmon *dm = start_with_file(env, path, poll_env);
    assert_int_equal(status_with(dm, a.header), 200);
    assert_int_equal(status_with(dm, b.header), 401);

    /*
     * 1. Replaced by rename: B works, A is refused from then on. Meanwhile another file in the
     * same folder changes every 50 ms: it must neither hold the reload back nor trigger one.
     */
    const char *busy_argv[] = {"sh", "-c", "while :; do date > busy.txt; sleep 0.05; done", NULL};
    struct proc_opts busy_opts = {
        .argv = busy_argv, .cwd = env->dir, .label = "busy-writer", .stdin_null = true};
    struct proc *busy = NULL;
    assert_int_equal(proc_spawn(&busy_opts, &busy), 0);
    testenv_sleep_ms(300);
    key_json(&b, text, sizeof(text));
    replace_file(path, text);
    double ms = wait_status(dm, b.header, 200);
    assert_int_equal(status_with(dm, a.header), 401);
    fprintf(stderr, "rotation by rename: new key accepted after %.0f ms\n", ms);
    assert_int_equal(proc_kill(busy, 100, NULL), 0);
    proc_free(busy);

    /* 2. Rewritten in place. */
    key_json(&a, text, sizeof(text));
    write_file(path, text);
    ms = wait_status(dm, a.header, 200);
    assert_int_equal(status_with(dm, b.header), 401);
    fprintf(stderr, "rotation in place: new key accepted after %.0f ms\n", ms);

    /* 3. A file caught mid-write (not JSON): the key stays; past the poll interval too. */
    write_file(path, "{\n  \"Authentication\": {\n    \"MonitorApiKey\": {\n      \"Sub");
    testenv_sleep_ms(2 * KEY_POLL_MS + 600);
    assert_int_equal(status_with(dm, a.header), 200);
    assert_true(log_has(dm, "could not be read"));

    /* 4. A parsed file with an invalid key: every request refused until it is fixed. */
    snprintf(text, sizeof(text),
             "{\"Authentication\":{\"MonitorApiKey\":{\"Subject\":\"%s\",\"PublicKey\":"
             "\"bm90IGEga2V5\"}}}",
             a.subject);
    replace_file(path, text);
    wait_status(dm, a.header, 401);
    assert_int_equal(status_with(dm, b.header), 401);
    assert_true(log_has(dm, "every request is refused (401) until the configuration is fixed"));
    key_json(&b, text, sizeof(text));
    replace_file(path, text);
    wait_status(dm, b.header, 200);
    assert_int_equal(status_with(dm, a.header), 401);

    /* 5. Another setting changed: named as taking effect at the next start, key unchanged. */
    snprintf(text, sizeof(text),
             "{\"Operations\":{\"MaxHistory\":\"7\"},\"Authentication\":{\"MonitorApiKey\":{"
             "\"Subject\":\"%s\",\"PublicKey\":\"%s\"}}}",
             b.subject, b.public_key);
    replace_file(path, text);
    double t0 = testenv_now_ms();
    while (!log_has(dm, "take effect at the next start: Operations:MaxHistory") &&
           testenv_now_ms() - t0 < testenv_timeout(ROTATE_WAIT_MS)) {
        testenv_sleep_ms(20);
    }
    assert_true(log_has(dm, "take effect at the next start: Operations:MaxHistory"));
    assert_int_equal(status_with(dm, b.header), 200);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * A mounted Secret or ConfigMap as the kubelet lays it out: each file is a link into ..data,
 * ..data a link to a ..<timestamp> folder. secret_mount makes mount/ with two such folders
 * (v1 current, v2 ready), calls fill(k, folder) for each, and links the files names[] into
 * ..data; secret_swap renames a new ..data over the old one, pointing at v2, as a rotation does.
 */
struct secret_mount {
    char dir[512];
    char data[600];
};

static void secret_mount(struct secret_mount *m, const char *dir, const struct agent_test_key *k1,
                         const struct agent_test_key *k2,
                         void (*fill)(const struct agent_test_key *k, const char *folder),
                         const char *const *names, size_t nnames)
{
    char v[600], link[700], target[700];
    snprintf(m->dir, sizeof(m->dir), "%.*s", (int)sizeof(m->dir) - 1, dir);
    assert_int_equal(mkdir(m->dir, 0700), 0);
    for (int i = 1; i <= 2; i++) {
        snprintf(v, sizeof(v), "%s/..2026_11_26_v%d", m->dir, i);
        assert_int_equal(mkdir(v, 0700), 0);
        fill(i == 1 ? k1 : k2, v);
    }
    snprintf(m->data, sizeof(m->data), "%s/..data", m->dir);
    assert_int_equal(symlink("..2026_11_26_v1", m->data), 0);
    for (size_t i = 0; i < nnames; i++) {
        snprintf(link, sizeof(link), "%s/%s", m->dir, names[i]);
        snprintf(target, sizeof(target), "..data/%s", names[i]);
        assert_int_equal(symlink(target, link), 0);
    }
}

static void secret_swap(const struct secret_mount *m)
{
    char tmp[700];
    snprintf(tmp, sizeof(tmp), "%s/..data_tmp", m->dir);
    assert_int_equal(symlink("..2026_11_26_v2", tmp), 0);
    assert_int_equal(rename(tmp, m->data), 0);
}

/* settings.json holding the key (a ConfigMap or Secret with one settings.json key). */
static void key_settings_json(const struct agent_test_key *k, const char *folder)
{
    char file[700], text[4096];
    snprintf(file, sizeof(file), "%s/settings.json", folder);
    key_json(k, text, sizeof(text));
    write_file(file, text);
}

/* The key as key-per-file files (one newline each, as kubectl writes them). */
static void key_files(const struct agent_test_key *k, const char *folder)
{
    char path[700], text[1200];
    snprintf(path, sizeof(path), "%s/Authentication__MonitorApiKey__Subject", folder);
    snprintf(text, sizeof(text), "%s\n", k->subject);
    write_file(path, text);
    snprintf(path, sizeof(path), "%s/Authentication__MonitorApiKey__PublicKey", folder);
    snprintf(text, sizeof(text), "%s\n", k->public_key);
    write_file(path, text);
}

/* Rotation by the kubelet's ..data swap: b accepted, a refused from then on. */
static double expect_swap(struct dotmon *dm, const struct secret_mount *m,
                          const struct agent_test_key *a, const struct agent_test_key *b)
{
    assert_int_equal(status_with(dm, a->header), 200);
    assert_int_equal(status_with(dm, b->header), 401);
    secret_swap(m);
    double ms = wait_status(dm, b->header, 200);
    assert_int_equal(status_with(dm, a->header), 401);
    return ms;
}

/* The configuration file is a mounted settings.json (--configuration-file-path). */
static void test_agent_secrets_kubernetes_symlink_swap(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a, b;
    agent_test_generate_key(env, &a);
    agent_test_generate_key(env, &b);
    struct secret_mount m;
    char dir[600], link[700];
    snprintf(dir, sizeof(dir), "%s/secret", env->dir);
    const char *names[] = {"settings.json"};
    secret_mount(&m, dir, &a, &b, key_settings_json, names, 1);
    snprintf(link, sizeof(link), "%s/settings.json", m.dir);
    struct dotmon *dm = start_with_file(env, link, NULL);
    double ms = expect_swap(dm, &m, &a, &b);
    fprintf(stderr, "Kubernetes-style swap: new key accepted after %.0f ms\n", ms);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * The usual Kubernetes Secret mount, as dotnet-monitor documents it: the Secret's keys are files
 * of /etc/dotnet-monitor (key-per-file; DOTMON_SHARED_CONFIG_DIR stands for that folder here).
 * No --configuration-file-path.
 */
static void test_agent_secrets_key_per_file_rotation(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a, b;
    agent_test_generate_key(env, &a);
    agent_test_generate_key(env, &b);
    struct secret_mount m;
    char dir[600];
    snprintf(dir, sizeof(dir), "%s/etc-dotnet-monitor", env->dir);
    const char *names[] = {"Authentication__MonitorApiKey__Subject",
                           "Authentication__MonitorApiKey__PublicKey"};
    secret_mount(&m, dir, &a, &b, key_files, names, 2);
    char shared_env[700];
    snprintf(shared_env, sizeof(shared_env), "DOTMON_SHARED_CONFIG_DIR=%s", m.dir);
    const char *envv[] = {shared_env, NULL};
    const char *no_args[] = {NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_args, envv, &dm), 0);
    double ms = expect_swap(dm, &m, &a, &b);
    fprintf(stderr, "key-per-file Secret swap: new key accepted after %.0f ms\n", ms);
    agent_test_stop_dotmon_clean(dm);
}

/* The three dot-separated parts of the token in an "Authorization: Bearer <jwt>" line. */
static void token_parts(const char *header, char parts[3][2048])
{
    const char *t = strstr(header, "Bearer ");
    assert_non_null(t);
    t += 7;
    for (int i = 0; i < 3; i++) {
        const char *dot = i < 2 ? strchr(t, '.') : t + strlen(t);
        assert_non_null(dot);
        size_t n = (size_t)(dot - t);
        assert_true(n > 8 && n < 2048);
        memcpy(parts[i], t, n);
        parts[i][n] = '\0';
        t = dot + 1;
    }
}

static void assert_no_token(const char *what, const char *text, const char *header)
{
    char parts[3][2048];
    token_parts(header, parts);
    /* The header's claims (part 0) are the same for every generated key; payload and signature
     * are specific to this token. */
    for (int i = 1; i < 3; i++) {
        if (text != NULL && strstr(text, parts[i]) != NULL) {
            fprintf(stderr, "%s contains part %d of a token:\n%s\n", what, i, text);
            fail();
        }
    }
}

static void test_agent_secrets_no_token_in_logs(void **state)
{
    struct testenv *env = *state;
    struct agent_test_key a, b, c;
    agent_test_generate_key(env, &a);
    agent_test_generate_key(env, &b);
    agent_test_generate_key(env, &c);
    char path[512], text[4096];
    snprintf(path, sizeof(path), "%s/settings.json", env->dir);
    key_json(&a, text, sizeof(text));
    write_file(path, text);
    const char *debug[] = {"DotnetMonitor_Logging__LogLevel__Default=Debug", NULL};
    struct dotmon *dm = start_with_file(env, path, debug);

    /* Accepted, refused (other key), malformed, and the wrong scheme; then a rotation. */
    assert_int_equal(status_with(dm, a.header), 200);
    assert_int_equal(status_with(dm, b.header), 401);
    char broken[4200];
    snprintf(broken, sizeof(broken), "%sxx", c.header);
    assert_int_equal(status_with(dm, broken), 401);
    const char *basic = "Authorization: Basic dXNlcjpzM2NyZXRwYXNzd29yZA==";
    assert_int_equal(status_with(dm, basic), 401);
    key_json(&b, text, sizeof(text));
    replace_file(path, text);
    wait_status(dm, b.header, 200);
    assert_int_equal(status_with(dm, a.header), 401);

    char *out = proc_output(dm->proc, PROC_STDOUT, NULL);
    char *err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_non_null(err);
    assert_non_null(strstr(err, "\"LogLevel\":\"Debug\"")); /* Debug really was on */
    const struct agent_test_key *keys[] = {&a, &b, &c};
    for (size_t i = 0; i < 3; i++) {
        assert_no_token("stderr", err, keys[i]->header);
        assert_no_token("stdout", out, keys[i]->header);
    }
    assert_null(strstr(err, "dXNlcjpzM2NyZXRwYXNzd29yZA"));
    assert_null(strstr(err, "Bearer ey"));
    free(out);
    free(err);
    agent_test_stop_dotmon_clean(dm);

    /* --temp-apikey: the token is printed once on stdout, never in the log. */
    const char *temp[] = {"--temp-apikey", NULL};
    assert_int_equal(testenv_start_dotmon(env, temp, debug, &dm), 0);
    assert_int_equal(status_with(dm, dm->auth_header), 200);
    out = proc_output(dm->proc, PROC_STDOUT, NULL);
    err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_non_null(out);
    const char *first = strstr(out, dm->token);
    assert_non_null(first);
    assert_null(strstr(first + 1, dm->token));
    assert_no_token("stderr", err, dm->auth_header);
    free(out);
    free(err);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * The mode of the dump file under dumps, found in the folder, or else among dotmon's open
 * descriptors (dotmon opens and unlinks the file as soon as it appears, which can be before a
 * look at the folder sees it; the descriptor still shows the inode's mode). 1 when found.
 */
static int find_dump_mode(const char *dumps, pid_t dotmon, mode_t *mode)
{
    int seen = 0;
    DIR *d = opendir(dumps);
    assert_non_null(d);
    struct dirent *e;
    while (!seen && (e = readdir(d)) != NULL) {
        struct stat st;
        if (strncmp(e->d_name, "dotmon_", 7) == 0 && fstatat(dirfd(d), e->d_name, &st, 0) == 0) {
            *mode = st.st_mode & 07777;
            seen = 1;
        }
    }
    closedir(d);
    char fds[64];
    snprintf(fds, sizeof(fds), "/proc/%d/fd", (int)dotmon);
    d = seen ? NULL : opendir(fds);
    while (d != NULL && !seen && (e = readdir(d)) != NULL) {
        char link[1024], path[384];
        snprintf(path, sizeof(path), "%s/%s", fds, e->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        struct stat st;
        if (n > 0) {
            link[n] = '\0';
            /* dotmon deletes the file by first moving it into a private folder beside it
             * (common/shdir.h): the link names either place. */
            if (strncmp(link, dumps, strlen(dumps)) == 0 && link[strlen(dumps)] == '/' &&
                stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
                *mode = st.st_mode & 07777;
                seen = 1;
            }
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return seen;
}

/* The runtime writes the dump dotmon asked for; nobody but its owner may read it (0600). */
static void test_agent_secrets_dump_file_is_0600(void **state)
{
    struct testenv *env = *state;
    char dumps[512], e1[600];
    snprintf(dumps, sizeof(dumps), "%s/dumps", env->dir);
    assert_int_equal(mkdir(dumps, 0755), 0);
    snprintf(e1, sizeof(e1), "DotnetMonitor_Storage__DumpTempFolder=%s", dumps);
    const char *dm_env[] = {e1, NULL};
    struct test_app *app = agent_test_start_app(env);
    const char *no_auth[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    /* The umask dotmon and the app inherit must not decide it: make it permissive. */
    mode_t old = umask(0);
    assert_int_equal(testenv_start_dotmon(env, no_auth, dm_env, &dm), 0);
    umask(old);
    pid_t pids[] = {app->pid};
    cJSON_Delete(agent_test_wait_processes(dm, pids, 1, 10000));

    /* A small receive window, and nothing read until the file is seen: dotmon cannot finish
     * sending a dump (7-8 MB) larger than its send buffer (4 MiB at most), so it keeps the file
     * open, and the check does not depend on this process being scheduled in the short while
     * the runtime writes. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int small = 4096;
    assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(dm->port)};
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "GET /dump?pid=%d&type=Mini HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
                     (int)app->pid);
    assert_int_equal(send(fd, req, (size_t)n, 0), n);

    /* Watch the folder while the runtime writes (a Mini dump takes ~300 ms). */
    int seen = 0;
    mode_t mode = 0;
    double t0 = testenv_now_ms();
    while (seen == 0 && testenv_now_ms() - t0 < testenv_timeout(30000)) {
        seen = find_dump_mode(dumps, proc_pid(dm->proc), &mode);
        testenv_sleep_ms(1);
    }
    /* Read the whole answer so the dump completes normally. */
    char buf[65536], head[16] = "";
    size_t total = 0;
    ssize_t r;
    while ((r = recv(fd, buf, sizeof(buf), 0)) > 0) {
        if (total == 0) {
            memcpy(head, buf, (size_t)r < sizeof(head) - 1 ? (size_t)r : sizeof(head) - 1);
        }
        total += (size_t)r;
    }
    close(fd);
    fprintf(stderr, "dump file %s after %.0f ms, mode %04o; %zu bytes streamed (%.12s)\n",
            seen ? "seen" : "NOT seen", testenv_now_ms() - t0, (unsigned)mode, total, head);
    if (!seen) {
        testenv_dump(env);
    }
    assert_true(seen);
    assert_int_equal(mode, 0600);
    assert_true(total > 1000000);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_secrets_key_rotation, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_secrets_kubernetes_symlink_swap,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_secrets_key_per_file_rotation, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_secrets_no_token_in_logs, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_secrets_dump_file_is_0600, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
