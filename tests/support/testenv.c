/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* nftw, getrandom */
#include "testenv.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "hex.h"

#define APP_READY_MS      30000
#define DOTMON_READY_MS   15000
#define HTTP_TIMEOUT_MS   10000
#define DUMP_BYTES        ((size_t)16 << 10)
#define LISTEN_PREFIX     "Now listening on: http://127.0.0.1:"
#define LISTEN_PREFIX_TLS "Now listening on: https://127.0.0.1:"
#define TOKEN_PREFIX      "Authorization: Bearer "

/* ---- small utilities ------------------------------------------------------------------------ */

double testenv_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

void testenv_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int testenv_timeout(int ms)
{
    const char *m = getenv("DOTMON_TEST_TIMEOUT_MULTIPLIER");
    if (!m || !*m) {
        return ms;
    }
    char *end = NULL;
    long mult = strtol(m, &end, 10);
    if (*end != '\0' || mult < 1 || mult > 100) {
        return ms;
    }
    long scaled = (long)ms * mult;
    return scaled > INT_MAX ? INT_MAX : (int)scaled;
}

void testenv_random_hex(char *out, size_t size)
{
    if (size == 0) {
        return;
    }
    for (size_t i = 0; i + 1 < size; i++) {
        unsigned char b = 0;
        if (getrandom(&b, 1, 0) != 1) {
            /* Unlikely; fall back to something that still differs between runs. */
            b = (unsigned char)(rand() ^ getpid() ^ (int)testenv_now_ms());
        }
        out[i] = hex_digit(b);
    }
    out[size - 1] = '\0';
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

int testenv_rm_rf(const char *path)
{
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
        return errno == ENOENT ? 0 : -errno;
    }
    return 0;
}

int testenv_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) {
        return -errno;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] != '.') {
            n++;
        }
    }
    closedir(d);
    return n;
}

long testenv_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        return -errno;
    }
    char line[256];
    long kb = -ENOENT;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            char *end = NULL;
            kb = strtol(line + 6, &end, 10);
            break;
        }
    }
    fclose(f);
    return kb;
}

pid_t testenv_unused_pid(void)
{
    long pid_max = 32768;
    FILE *f = fopen("/proc/sys/kernel/pid_max", "re");
    if (f) {
        char line[32];
        if (fgets(line, sizeof line, f)) {
            pid_max = strtol(line, NULL, 10);
        }
        fclose(f);
    }
    for (long pid = pid_max - 1; pid > 300; pid--) {
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            return (pid_t)pid;
        }
    }
    return -1;
}

int testenv_make_stale_socket(const char *dir, pid_t pid, unsigned long long key, char *path_out,
                              size_t path_size)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    int w = snprintf(sa.sun_path, sizeof sa.sun_path, "%s/dotnet-diagnostic-%d-%llu-socket", dir,
                     (int)pid, key);
    if (w < 0 || (size_t)w >= sizeof sa.sun_path) {
        return -ENAMETOOLONG;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    int rc = bind(fd, (const struct sockaddr *)&sa, sizeof sa) == 0 ? 0 : -errno;
    close(fd); /* no listen, no unlink: the file stays, connects are refused */
    if (rc == 0 && path_out) {
        snprintf(path_out, path_size, "%s", sa.sun_path);
    }
    return rc;
}

/* ---- JSON (just enough to read one top-level string member of a log line) ------------------- */

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') {
        p++;
    }
    return p;
}

static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        char ch = p[i];
        int d = ch >= '0' && ch <= '9'   ? ch - '0'
                : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                         : -1;
        if (d < 0) {
            return -1;
        }
        v = v * 16 + d;
    }
    return v;
}

/* Appends the UTF-8 encoding of cp to out[*n], keeping room for the NUL. */
static void put_utf8(char *out, size_t size, size_t *n, unsigned cp)
{
    char tmp[4];
    size_t k;
    if (cp < 0x80) {
        tmp[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        tmp[0] = (char)(0xC0 | (cp >> 6));
        tmp[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        tmp[0] = (char)(0xE0 | (cp >> 12));
        tmp[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else {
        tmp[0] = (char)(0xF0 | (cp >> 18));
        tmp[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        tmp[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        tmp[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    }
    for (size_t i = 0; i < k && *n + 1 < size; i++) {
        out[(*n)++] = tmp[i];
    }
}

/*
 * Reads the JSON string starting at p (which points at the opening quote). Unescapes it into out
 * when out is not NULL. Returns the position after the closing quote, or NULL if malformed.
 */
static const char *read_string(const char *p, char *out, size_t size)
{
    size_t n = 0;
    p++;
    while (*p && *p != '"') {
        unsigned cp;
        if (*p != '\\') {
            cp = (unsigned char)*p++;
            if (out && n + 1 < size) {
                out[n++] = (char)cp;
            }
            continue;
        }
        p++;
        switch (*p) {
        case '"':
        case '\\':
        case '/':
            cp = (unsigned char)*p;
            break;
        case 'b':
            cp = '\b';
            break;
        case 'f':
            cp = '\f';
            break;
        case 'n':
            cp = '\n';
            break;
        case 'r':
            cp = '\r';
            break;
        case 't':
            cp = '\t';
            break;
        case 'u': {
            int v = hex4(p + 1);
            if (v < 0) {
                return NULL;
            }
            p += 4;
            cp = (unsigned)v;
            if (cp >= 0xD800 && cp < 0xDC00 && p[1] == '\\' && p[2] == 'u') {
                int lo = hex4(p + 3);
                if (lo >= 0xDC00 && lo < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned)lo - 0xDC00);
                    p += 6;
                }
            }
            break;
        }
        default:
            return NULL;
        }
        p++;
        if (out) {
            put_utf8(out, size, &n, cp);
        }
    }
    if (*p != '"') {
        return NULL;
    }
    if (out && size) {
        out[n] = '\0';
    }
    return p + 1;
}

bool testenv_json_top_string(const char *text, const char *key, char *out, size_t size)
{
    const char *p = skip_ws(text);
    if (*p != '{' || size == 0) {
        return false;
    }
    p++;
    int depth = 1;
    bool expect_key = true;
    size_t key_len = strlen(key);
    char *name = malloc(key_len + 2); /* room to tell "key" from "keyX" */
    if (!name) {
        return false;
    }
    bool found = false;
    while (*p && depth > 0 && !found) {
        p = skip_ws(p);
        if (*p == '"') {
            bool is_key = depth == 1 && expect_key;
            const char *after = read_string(p, is_key ? name : NULL, key_len + 2);
            if (!after) {
                break;
            }
            if (is_key) {
                expect_key = false;
                const char *q = skip_ws(after);
                if (*q != ':') {
                    break;
                }
                q = skip_ws(q + 1);
                if (strcmp(name, key) == 0 && strlen(name) == key_len) {
                    found = *q == '"' && read_string(q, out, size) != NULL;
                    break;
                }
                p = q;
            } else {
                p = after;
            }
            continue;
        }
        switch (*p) {
        case '{':
        case '[':
            depth++;
            break;
        case '}':
        case ']':
            depth--;
            break;
        case ',':
            if (depth == 1) {
                expect_key = true;
            }
            break;
        default:
            break;
        }
        if (*p) {
            p++;
        }
    }
    free(name);
    return found;
}

/* ---- env lifecycle -------------------------------------------------------------------------- */

/* The directory holding the real dotnet executable named by path (symlinks resolved). */
static bool dotnet_root_from(const char *path, char *out, size_t size)
{
    char real[PATH_MAX];
    if (!path || !realpath(path, real)) {
        return false;
    }
    char *slash = strrchr(real, '/');
    if (!slash || slash == real) {
        return false;
    }
    *slash = '\0';
    snprintf(out, size, "%s", real);
    return true;
}

static void find_dotnet_root(char *out, size_t size)
{
    const char *root = getenv("DOTNET_ROOT");
    if (root && *root) {
        snprintf(out, size, "%s", root);
        return;
    }
    if (dotnet_root_from(getenv("DOTNET_EXE"), out, size)) {
        return;
    }
    const char *path = getenv("PATH");
    while (path && *path) {
        size_t len = strcspn(path, ":");
        char cand[PATH_MAX];
        int w = snprintf(cand, sizeof cand, "%.*s/dotnet", (int)len, path);
        if (w > 0 && (size_t)w < sizeof cand && access(cand, X_OK) == 0 &&
            dotnet_root_from(cand, out, size)) {
            return;
        }
        path += len;
        if (*path == ':') {
            path++;
        }
    }
    out[0] = '\0';
}

int testenv_init(struct testenv *env)
{
    memset(env, 0, sizeof *env);
    snprintf(env->dir, sizeof env->dir, "/tmp/dmXXXXXX");
    if (!mkdtemp(env->dir)) {
        int err = -errno;
        fprintf(stderr, "testenv: mkdtemp: %s\n", strerror(errno));
        env->dir[0] = '\0';
        return err;
    }
    const char *bin = getenv("DOTMON_BIN");
    env->dotmon_bin = bin && *bin ? bin : NULL;
    const char *app_dir = getenv("DOTMON_TESTAPP_DIR");
    if (app_dir && *app_dir) {
        snprintf(env->testapp_bin, sizeof env->testapp_bin, "%s/TestApp", app_dir);
    }
    find_dotnet_root(env->dotnet_root, sizeof env->dotnet_root);
    return 0;
}

static bool status_clean(int wstatus)
{
    return wstatus != -1 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

/* Stops p if it runs (SIGTERM, then SIGKILL after grace_ms) and dumps it when it did not end with
 * exit 0: a crash, an ASan report or a hang is then visible in the test log. */
static void stop_and_report(struct proc *p, int grace_ms, const char *what)
{
    bool was_running = proc_running(p);
    int st = -1;
    proc_kill(p, testenv_timeout(grace_ms), &st);
    if (!status_clean(st)) {
        char s[64];
        fprintf(stderr, "testenv: %s %s %s\n", what,
                was_running ? "did not stop cleanly on SIGTERM:" : "had exited by itself:",
                proc_status_str(st, s, sizeof s));
        proc_dump(p, stderr, DUMP_BYTES);
    }
}

void testenv_fini(struct testenv *env)
{
    for (size_t i = 0; i < env->n_dotmons; i++) {
        struct dotmon *dm = env->dotmons[i];
        if (dm->proc && proc_pid(dm->proc) > 0) {
            stop_and_report(dm->proc, 5000, proc_label(dm->proc));
        }
        proc_free(dm->proc);
        free(dm->auth_header);
        free(dm);
    }
    env->n_dotmons = 0;
    for (size_t i = 0; i < env->n_apps; i++) {
        struct test_app *app = env->apps[i];
        if (!app->stopped) {
            stop_and_report(app->proc, 3000, proc_label(app->proc));
        }
        proc_free(app->proc);
        free(app);
    }
    env->n_apps = 0;
    if (env->dir[0]) {
        const char *keep = getenv("DOTMON_TEST_KEEP");
        if (keep && *keep && strcmp(keep, "0") != 0) {
            fprintf(stderr, "testenv: keeping %s\n", env->dir);
        } else {
            testenv_rm_rf(env->dir);
        }
        env->dir[0] = '\0';
    }
}

void testenv_dump(struct testenv *env)
{
    for (size_t i = 0; i < env->n_dotmons; i++) {
        proc_dump(env->dotmons[i]->proc, stderr, DUMP_BYTES);
    }
    for (size_t i = 0; i < env->n_apps; i++) {
        proc_dump(env->apps[i]->proc, stderr, DUMP_BYTES);
    }
}

/* ---- TestApp -------------------------------------------------------------------------------- */

int testenv_start_app(struct testenv *env, const char *const *args, const char *const *extra_env,
                      struct test_app **out)
{
    if (!env->testapp_bin[0]) {
        fprintf(stderr, "testenv: DOTMON_TESTAPP_DIR is not set\n");
        return AGENT_E_INVAL;
    }
    if (env->n_apps == TESTENV_MAX_APPS) {
        return AGENT_E_TOOBIG;
    }
    struct test_app *app = calloc(1, sizeof *app);
    const char **argv = NULL;
    const char **envv = NULL;
    char *ready = NULL;
    bool registered = false;
    int rc = -ENOMEM;
    if (!app) {
        goto fail;
    }
    testenv_random_hex(app->marker, sizeof app->marker);

    size_t n_args = 0, n_env = 0;
    while (args && args[n_args]) {
        n_args++;
    }
    while (extra_env && extra_env[n_env]) {
        n_env++;
    }
    argv = calloc(n_args + 4, sizeof *argv);
    envv = calloc(n_env + 4, sizeof *envv);
    if (!argv || !envv) {
        goto fail;
    }
    argv[0] = env->testapp_bin;
    argv[1] = "--marker";
    argv[2] = app->marker;
    for (size_t i = 0; i < n_args; i++) {
        argv[3 + i] = args[i];
    }
    char tmpdir[TESTENV_DIR_SIZE + 8], root[sizeof env->dotnet_root + 16], marker[64];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", env->dir);
    snprintf(root, sizeof root, "DOTNET_ROOT=%s", env->dotnet_root);
    snprintf(marker, sizeof marker, "DOTMON_TEST_MARKER=%s", app->marker);
    size_t k = 0;
    envv[k++] = tmpdir;
    envv[k++] = marker;
    if (env->dotnet_root[0]) {
        envv[k++] = root;
    }
    for (size_t i = 0; i < n_env; i++) {
        envv[k++] = extra_env[i]; /* later entries win over earlier ones */
    }

    char label[16];
    snprintf(label, sizeof label, "app%zu", env->n_apps + 1);
    struct proc_opts opts = {.argv = argv, .env = envv, .label = label};
    rc = proc_spawn(&opts, &app->proc);
    if (rc != 0) {
        fprintf(stderr, "testenv: cannot start %s: %s\n", env->testapp_bin, agent_strerror(rc));
        goto fail;
    }
    env->apps[env->n_apps++] = app; /* owned by env from here on, even if the rest fails */
    registered = true;
    app->pid = proc_pid(app->proc);

    rc =
        proc_wait_line(app->proc, PROC_STDOUT, "ready pid=", testenv_timeout(APP_READY_MS), &ready);
    if (rc != 0) {
        fprintf(stderr, "testenv: %s: no 'ready pid=' line: %s\n", label, agent_strerror(rc));
        proc_dump(app->proc, stderr, DUMP_BYTES);
        goto fail;
    }
    char *end = NULL;
    long pid = strtol(ready + strlen("ready pid="), &end, 10);
    if (*end != '\0' || pid != (long)proc_pid(app->proc)) {
        fprintf(stderr, "testenv: %s: says '%s' but its pid is %d\n", label, ready,
                (int)proc_pid(app->proc));
        rc = AGENT_E_PROTO;
        goto fail;
    }
    free(ready);
    free(argv);
    free(envv);
    *out = app;
    return 0;

fail:
    if (!registered) {
        free(app);
    }
    free(ready);
    free(argv);
    free(envv);
    return rc;
}

struct answer_ctx {
    const char *verb;
    size_t len;
};

static bool match_answer(const char *line, void *ctx)
{
    const struct answer_ctx *a = ctx;
    const char *rest = NULL;
    if (strncmp(line, "ok ", 3) == 0) {
        rest = line + 3;
    } else if (strncmp(line, "error ", 6) == 0) {
        rest = line + 6;
    } else {
        return false;
    }
    return strncmp(rest, a->verb, a->len) == 0 &&
           (rest[a->len] == '\0' || rest[a->len] == ' ' || rest[a->len] == ':');
}

int testenv_app_cmd(struct test_app *app, const char *cmd, int timeout_ms, char **reply)
{
    struct answer_ctx a = {.verb = cmd, .len = strcspn(cmd, " ")};
    int rc = proc_send_line(app->proc, cmd);
    if (rc != 0) {
        fprintf(stderr, "testenv: %s: cannot send '%s': %s\n", proc_label(app->proc), cmd,
                agent_strerror(rc));
        return rc;
    }
    char *line = NULL;
    rc = proc_wait_line_match(app->proc, PROC_STDOUT, match_answer, &a, testenv_timeout(timeout_ms),
                              &line);
    if (rc != 0) {
        fprintf(stderr, "testenv: %s: no answer to '%s': %s\n", proc_label(app->proc), cmd,
                agent_strerror(rc));
        proc_dump(app->proc, stderr, DUMP_BYTES);
        return rc;
    }
    rc = strncmp(line, "ok ", 3) == 0 ? 0 : AGENT_E_RUNTIME;
    if (rc != 0) {
        fprintf(stderr, "testenv: %s: '%s' -> '%s'\n", proc_label(app->proc), cmd, line);
    }
    if (reply) {
        *reply = line;
    } else {
        free(line);
    }
    return rc;
}

int testenv_stop_app(struct test_app *app, int sig, int *wstatus)
{
    app->stopped = true;
    if (proc_signal(app->proc, sig) != 0) {
        return proc_wait(app->proc, 0, wstatus);
    }
    if (proc_wait(app->proc, testenv_timeout(5000), wstatus) == 0) {
        return 0;
    }
    return proc_kill(app->proc, 0, wstatus);
}

/* ---- dotmon --------------------------------------------------------------------------------- */

struct listen_ctx {
    long port;
};

/* Accepts a JSON log line whose top-level Message announces the HTTP listener. */
static bool match_listening(const char *line, void *ctx)
{
    struct listen_ctx *lc = ctx;
    char msg[512];
    if (!testenv_json_top_string(line, "Message", msg, sizeof msg)) {
        return false;
    }
    const char *digits = NULL;
    if (strncmp(msg, LISTEN_PREFIX, strlen(LISTEN_PREFIX)) == 0) {
        digits = msg + strlen(LISTEN_PREFIX);
    } else if (strncmp(msg, LISTEN_PREFIX_TLS, strlen(LISTEN_PREFIX_TLS)) == 0) {
        digits = msg + strlen(LISTEN_PREFIX_TLS); /* an https:// first URL */
    } else {
        return false;
    }
    char *end = NULL;
    long port = strtol(digits, &end, 10);
    if (end == digits || port <= 0 || port > 65535 || (*end != '\0' && *end != '/')) {
        return false;
    }
    lc->port = port;
    return true;
}

static bool has_arg(const char *const *args, const char *name)
{
    for (size_t i = 0; args && args[i]; i++) {
        if (strcmp(args[i], name) == 0) {
            return true;
        }
    }
    return false;
}

/* Explains a failed wait for the listening line, since "timed out" alone helps nobody. */
static void explain_no_listen(struct proc *p, int rc)
{
    char st[64];
    int wstatus = 0;
    bool exited = proc_wait(p, 0, &wstatus) == 0;
    fprintf(stderr, "testenv: dotmon never logged a JSON line with Message '%s<port>' (%s)%s%s\n",
            LISTEN_PREFIX, agent_strerror(rc), exited ? "; it exited: " : "",
            exited ? proc_status_str(wstatus, st, sizeof st) : "");
    char *plain = NULL;
    proc_rewind(p, PROC_STDERR);
    if (proc_find_line(p, PROC_STDERR, "Now listening on:", &plain) == 0) {
        fprintf(stderr, "testenv: it printed the line as plain text, not JSON: '%s'\n", plain);
        free(plain);
    }
    proc_dump(p, stderr, DUMP_BYTES);
}

int testenv_start_dotmon(struct testenv *env, const char *const *args, const char *const *extra_env,
                         struct dotmon **out)
{
    if (!env->dotmon_bin) {
        fprintf(stderr, "testenv: DOTMON_BIN is not set\n");
        return AGENT_E_INVAL;
    }
    if (env->n_dotmons == TESTENV_MAX_DOTMONS) {
        return AGENT_E_TOOBIG;
    }
    struct dotmon *dm = calloc(1, sizeof *dm);
    const char **argv = NULL;
    const char **envv = NULL;
    char *token_line = NULL;
    int rc = -ENOMEM;
    size_t n_args = 0, n_env = 0;
    while (args && args[n_args]) {
        n_args++;
    }
    while (extra_env && extra_env[n_env]) {
        n_env++;
    }
    argv = calloc(n_args + 7, sizeof *argv);
    envv = calloc(n_env + 2, sizeof *envv);
    if (!dm || !argv || !envv) {
        free(dm);
        goto out;
    }
    size_t k = 0;
    argv[k++] = env->dotmon_bin;
    argv[k++] = "collect";
    if (!has_arg(args, "--urls")) {
        argv[k++] = "--urls";
        argv[k++] = "http://127.0.0.1:0";
    }
    /* Metrics bind localhost:52325 by default: parallel tests would fight over it. */
    if (!has_arg(args, "--metrics") && !has_arg(args, "-m") && !has_arg(args, "--metricUrls")) {
        argv[k++] = "--metrics";
        argv[k++] = "false";
    }
    for (size_t i = 0; i < n_args; i++) {
        argv[k++] = args[i];
    }
    char tmpdir[TESTENV_DIR_SIZE + 8];
    snprintf(tmpdir, sizeof tmpdir, "TMPDIR=%s", env->dir);
    envv[0] = tmpdir;
    for (size_t i = 0; i < n_env; i++) {
        envv[1 + i] = extra_env[i];
    }

    char label[16];
    snprintf(label, sizeof label, "dotmon%zu", env->n_dotmons + 1);
    struct proc_opts opts = {.argv = argv, .env = envv, .label = label, .stdin_null = true};
    rc = proc_spawn(&opts, &dm->proc);
    if (rc != 0) {
        fprintf(stderr, "testenv: cannot start %s: %s\n", env->dotmon_bin, agent_strerror(rc));
        free(dm);
        goto out;
    }
    env->dotmons[env->n_dotmons++] = dm; /* owned by env from here on */

    double deadline = testenv_now_ms() + testenv_timeout(DOTMON_READY_MS);
    struct listen_ctx lc = {0};
    rc = proc_wait_line_match(dm->proc, PROC_STDERR, match_listening, &lc,
                              testenv_timeout(DOTMON_READY_MS), NULL);
    if (rc != 0) {
        explain_no_listen(dm->proc, rc);
        goto out;
    }
    dm->port = (uint16_t)lc.port;

    if (has_arg(args, "--temp-apikey")) {
        int left = (int)(deadline - testenv_now_ms());
        rc = proc_wait_line(dm->proc, PROC_STDOUT, TOKEN_PREFIX, left > 1000 ? left : 1000,
                            &token_line);
        if (rc != 0) {
            fprintf(stderr,
                    "testenv: dotmon --temp-apikey printed no '%s<jwt>' line on stdout: %s\n",
                    TOKEN_PREFIX, agent_strerror(rc));
            proc_dump(dm->proc, stderr, DUMP_BYTES);
            goto out;
        }
        /* Trailing blanks are not part of the token. */
        size_t n = strlen(token_line);
        while (n > 0 && (token_line[n - 1] == ' ' || token_line[n - 1] == '\t')) {
            token_line[--n] = '\0';
        }
        if (n == strlen(TOKEN_PREFIX)) {
            fprintf(stderr, "testenv: dotmon printed an empty bearer token\n");
            rc = AGENT_E_PROTO;
            goto out;
        }
        dm->auth_header = token_line;
        dm->token = token_line + strlen(TOKEN_PREFIX);
        token_line = NULL;
    }
    *out = dm;
    rc = 0;
out:
    free(token_line);
    free(argv);
    free(envv);
    return rc;
}

int testenv_stop_dotmon(struct dotmon *dm, int grace_ms, int *wstatus)
{
    int st = -1;
    bool was_running = proc_running(dm->proc);
    int rc = proc_kill(dm->proc, testenv_timeout(grace_ms), &st);
    if (!status_clean(st)) {
        char s[64];
        fprintf(stderr, "testenv: %s %s: %s\n", proc_label(dm->proc),
                was_running ? "stopped by SIGTERM" : "had already exited",
                proc_status_str(st, s, sizeof s));
        proc_dump(dm->proc, stderr, DUMP_BYTES);
    }
    if (wstatus) {
        *wstatus = st;
    }
    return rc;
}

int testenv_dotmon_request(struct dotmon *dm, const char *method, const char *target,
                           const void *body, size_t body_len, struct httpc_resp *resp)
{
    const char *headers[] = {dm->auth_header, NULL};
    return httpc_fetch(dm->port, method, target, dm->auth_header ? headers : NULL, body, body_len,
                       testenv_timeout(HTTP_TIMEOUT_MS), resp);
}

int testenv_dotmon_get(struct dotmon *dm, const char *target, struct httpc_resp *resp)
{
    return testenv_dotmon_request(dm, "GET", target, NULL, 0, resp);
}

/* ---- watchdog ------------------------------------------------------------------------------- */

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "testenv: watchdog expired: killing children and exiting\n";
    ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)w;
    proc_kill_all();
    _exit(124);
}

void testenv_watchdog(unsigned seconds)
{
    if (seconds == 0) {
        alarm(0);
        return;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_watchdog;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    int scaled = testenv_timeout((int)(seconds > 100000 ? 100000 : seconds) * 1000) / 1000;
    alarm((unsigned)scaled);
}

uint16_t testenv_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    uint16_t port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &len) == 0) {
        port = ntohs(sa.sin_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return port;
}

int testenv_connect_port(uint16_t port)
{
    int err = -ECONNREFUSED;
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            return -errno;
        }
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            return fd;
        }
        err = -errno;
        close(fd);
        testenv_sleep_ms(20);
    }
    return err;
}
