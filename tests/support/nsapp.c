/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* getline, realpath */
#include "nsapp.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "err.h"

#define NSAPP_READY_MS  30000
#define NSAPP_STOP_MS   5000
#define NSAPP_PROBE_MS  10000
#define NSAPP_DUMP      ((size_t)16 << 10)
#define NSAPP_HOST_DIR  ".host"
#define NSAPP_LABEL     "ns"
#define IPC_HEADER_SIZE 20
#define IPC_MAX_PAYLOAD ((size_t)64 << 10)

/*
 * Runs in the new namespaces as pid 1 (before the exec). $1 is the host dir that becomes /tmp,
 * then pairs "<host dir> <name>" to bind at /tmp/<name>, then "--" and the command. The host's
 * /tmp is kept reachable at /tmp/.host first; the binds go in before /tmp is covered, while the
 * host paths still resolve, and --rbind carries them along. cd / drops the cwd that /tmp covers.
 */
static const char ns_script[] = "set -e\n"
                                "t=$1; shift\n"
                                "mount --rbind /tmp \"$t/" NSAPP_HOST_DIR "\"\n"
                                "while [ \"$1\" != \"--\" ]; do\n"
                                "  mount --bind \"$1\" \"$t/$2\"; shift 2\n"
                                "done\n"
                                "shift\n"
                                "mount --rbind \"$t\" /tmp\n"
                                "cd /\n"
                                "exec \"$@\"\n";

/* ---- small helpers --------------------------------------------------------------------------- */

/*
 * The path under which the app (whose /tmp is covered) reaches the host path host: paths under
 * /tmp go through /tmp/.host. Symlinks are resolved first, so a link into /tmp is caught too.
 */
static int app_view(const char *host, char *out, size_t size)
{
    char real[PATH_MAX];
    const char *p = realpath(host, real) != NULL ? real : host;
    int n;
    if (strncmp(p, "/tmp/", 5) == 0 || strcmp(p, "/tmp") == 0) {
        n = snprintf(out, size, "/tmp/" NSAPP_HOST_DIR "%s", p + 4);
    } else {
        n = snprintf(out, size, "%s", p);
    }
    return n > 0 && (size_t)n < size ? 0 : -ENAMETOOLONG;
}

static int mkdir_ok(const char *dir, const char *name)
{
    char path[PATH_MAX];
    int n = snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (n <= 0 || (size_t)n >= sizeof(path)) {
        return -ENAMETOOLONG;
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
        return -errno;
    }
    return 0;
}

bool nsapp_pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

/* The ppid field of /proc/<pid>/stat, or -1. The comm field may hold anything: skip to the last
 * ')' first. */
static pid_t parent_of(const char *pid_name)
{
    char path[300], line[1024];
    snprintf(path, sizeof(path), "/proc/%s/stat", pid_name);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -1;
    }
    size_t n = fread(line, 1, sizeof(line) - 1, f);
    fclose(f);
    line[n] = '\0';
    const char *rp = strrchr(line, ')');
    if (rp == NULL || rp[1] != ' ' || rp[2] == '\0' || rp[3] != ' ') {
        return -1;
    }
    char *end = NULL;
    long ppid = strtol(rp + 4, &end, 10); /* ") S <ppid> ..." */
    return end != rp + 4 && ppid > 0 ? (pid_t)ppid : -1;
}

/* ---- probe ----------------------------------------------------------------------------------- */

static bool probe_done;
static bool probe_ok;
static char probe_why[512];

/* The last non-empty line of s (in place). */
static const char *last_line(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ')) {
        s[--n] = '\0';
    }
    const char *nl = strrchr(s, '\n');
    return nl != NULL ? nl + 1 : s;
}

static void run_probe(void)
{
    char dir[] = "/tmp/dmnsXXXXXX";
    if (mkdtemp(dir) == NULL) {
        snprintf(probe_why, sizeof(probe_why), "cannot make a scratch dir: %s", strerror(errno));
        return;
    }
    /* The same operations nsapp_start needs, on a scratch dir: new pid+mount namespaces, a proc
     * mount, and a bind mount over /tmp. */
    const char *argv[] = {"unshare",
                          "--pid",
                          "--fork",
                          "--kill-child",
                          "--mount-proc",
                          "--mount",
                          "sh",
                          "-c",
                          "mount --rbind \"$1\" /tmp && test -d /proc/1",
                          "nsprobe",
                          dir,
                          NULL};
    struct proc_opts o = {.argv = argv, .label = "unshare-probe", .stdin_null = true};
    struct proc *p = NULL;
    int rc = proc_spawn(&o, &p);
    if (rc != 0) {
        snprintf(probe_why, sizeof(probe_why), "cannot run unshare: %s",
                 rc == -ENOENT ? "unshare not found in PATH (util-linux)" : agent_strerror(rc));
        goto out;
    }
    int st = -1;
    if (proc_wait(p, testenv_timeout(NSAPP_PROBE_MS), &st) != 0) {
        proc_kill(p, 0, &st);
        snprintf(probe_why, sizeof(probe_why), "unshare did not finish within %d ms",
                 NSAPP_PROBE_MS);
        goto out;
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        probe_ok = true;
        goto out;
    }
    testenv_sleep_ms(20); /* let the reader take the last bytes */
    char *err = proc_output(p, PROC_STDERR, NULL);
    char s[64];
    snprintf(probe_why, sizeof(probe_why),
             "`unshare --pid --fork --kill-child --mount-proc --mount sh -c 'mount --rbind DIR "
             "/tmp'` as uid %d: %s: %s",
             (int)getuid(), proc_status_str(st, s, sizeof(s)),
             err != NULL && *last_line(err) ? last_line(err) : "(no message)");
    free(err);
out:
    proc_free(p);
    rmdir(dir);
}

bool nsapp_supported(char *why, size_t why_size)
{
    if (!probe_done) {
        run_probe();
        probe_done = true;
    }
    if (!probe_ok && why != NULL && why_size > 0) {
        snprintf(why, why_size, "%s", probe_why);
    }
    return probe_ok;
}

/* ---- start / stop ---------------------------------------------------------------------------- */

bool nsapp_is_ns(const struct test_app *app)
{
    return app->proc != NULL && strncmp(proc_label(app->proc), NSAPP_LABEL, 2) == 0;
}

/* The first child of parent found in /proc, or -1. */
static pid_t child_of(pid_t parent)
{
    DIR *d = opendir("/proc");
    if (d == NULL) {
        return -1;
    }
    pid_t found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') {
            continue;
        }
        if (parent_of(e->d_name) == parent) {
            found = (pid_t)strtol(e->d_name, NULL, 10);
        }
    }
    closedir(d);
    return found;
}

pid_t nsapp_host_pid(struct test_app *app)
{
    /* Right after the spawn unshare may not have forked yet: give it a moment. */
    double end = testenv_now_ms() + 2000;
    while (app->proc != NULL && proc_running(app->proc)) {
        pid_t pid = child_of(proc_pid(app->proc));
        if (pid > 0 || testenv_now_ms() > end) {
            return pid;
        }
        testenv_sleep_ms(10);
    }
    return -1;
}

/* Everything nsapp_start allocates, freed in one place. */
struct start_bufs {
    const char **argv;
    const char **envv;
};

int nsapp_start(struct testenv *env, const struct nsapp_opts *opts, struct test_app **out)
{
    if (!env->testapp_bin[0]) {
        fprintf(stderr, "nsapp: DOTMON_TESTAPP_DIR is not set\n");
        return AGENT_E_INVAL;
    }
    if (opts == NULL || opts->tmp_dir == NULL ||
        (opts->share_dir != NULL &&
         (opts->share_name == NULL || strchr(opts->share_name, '/') != NULL))) {
        return AGENT_E_INVAL;
    }
    if (env->n_apps == TESTENV_MAX_APPS) {
        return AGENT_E_TOOBIG;
    }
    struct start_bufs b = {0};
    char bin[PATH_MAX], root[PATH_MAX + 16], marker_env[64], label[16];
    struct test_app *app = calloc(1, sizeof(*app));
    bool registered = false;
    int rc = -ENOMEM;
    if (app == NULL) {
        goto fail;
    }
    testenv_random_hex(app->marker, sizeof(app->marker));
    if ((rc = mkdir_ok(opts->tmp_dir, NSAPP_HOST_DIR)) != 0 ||
        (opts->share_dir != NULL && (rc = mkdir_ok(opts->tmp_dir, opts->share_name)) != 0)) {
        fprintf(stderr, "nsapp: cannot make mount points in %s: %s\n", opts->tmp_dir,
                agent_strerror(rc));
        goto fail;
    }
    if ((rc = app_view(env->testapp_bin, bin, sizeof(bin))) != 0) {
        goto fail;
    }
    char root_view[PATH_MAX];
    root[0] = '\0';
    if (env->dotnet_root[0]) {
        if ((rc = app_view(env->dotnet_root, root_view, sizeof(root_view))) != 0) {
            goto fail;
        }
        snprintf(root, sizeof(root), "DOTNET_ROOT=%s", root_view);
    }
    snprintf(marker_env, sizeof(marker_env), "DOTMON_TEST_MARKER=%s", app->marker);

    size_t n_args = 0, n_env = 0;
    while (opts->args != NULL && opts->args[n_args] != NULL) {
        n_args++;
    }
    while (opts->extra_env != NULL && opts->extra_env[n_env] != NULL) {
        n_env++;
    }
    rc = -ENOMEM;
    b.argv = calloc(n_args + 24, sizeof(*b.argv));
    b.envv = calloc(n_env + 4, sizeof(*b.envv));
    if (b.argv == NULL || b.envv == NULL) {
        goto fail;
    }
    size_t k = 0;
    static const char *const head[] = {"unshare",      "--pid",   "--fork", "--kill-child",
                                       "--mount-proc", "--mount", "sh",     "-c"};
    for (size_t i = 0; i < sizeof(head) / sizeof(head[0]); i++) {
        b.argv[k++] = head[i];
    }
    b.argv[k++] = ns_script;
    b.argv[k++] = "nsapp"; /* $0 */
    b.argv[k++] = opts->tmp_dir;
    if (opts->share_dir != NULL) {
        b.argv[k++] = opts->share_dir;
        b.argv[k++] = opts->share_name;
    }
    b.argv[k++] = "--";
    b.argv[k++] = bin;
    b.argv[k++] = "--marker";
    b.argv[k++] = app->marker;
    for (size_t i = 0; i < n_args; i++) {
        b.argv[k++] = opts->args[i];
    }
    k = 0;
    b.envv[k++] = "TMPDIR=/tmp";
    b.envv[k++] = marker_env;
    if (root[0]) {
        b.envv[k++] = root;
    }
    for (size_t i = 0; i < n_env; i++) {
        b.envv[k++] = opts->extra_env[i];
    }

    snprintf(label, sizeof(label), NSAPP_LABEL "app%zu", env->n_apps + 1);
    struct proc_opts po = {.argv = b.argv, .env = b.envv, .label = label};
    rc = proc_spawn(&po, &app->proc);
    if (rc != 0) {
        fprintf(stderr, "nsapp: cannot start unshare: %s\n", agent_strerror(rc));
        goto fail;
    }
    env->apps[env->n_apps++] = app; /* owned by env from here on */
    registered = true;

    if (!opts->no_wait && (rc = nsapp_wait_ready(app, opts->ready_ms)) != 0) {
        goto fail;
    }
    app->pid = 1; /* what the app sees itself as, and says once ready */
    *out = app;
    rc = 0;
    goto out;
fail:
    if (!registered) {
        free(app);
    }
out:
    free(b.argv);
    free(b.envv);
    return rc;
}

int nsapp_wait_ready(struct test_app *app, int ready_ms)
{
    char *ready = NULL;
    int ms = ready_ms > 0 ? ready_ms : NSAPP_READY_MS;
    int rc = proc_wait_line(app->proc, PROC_STDOUT, "ready pid=", testenv_timeout(ms), &ready);
    if (rc != 0) {
        fprintf(stderr, "nsapp: %s: no 'ready pid=' line within %d ms: %s\n", proc_label(app->proc),
                ms, agent_strerror(rc));
        proc_dump(app->proc, stderr, NSAPP_DUMP);
        return rc;
    }
    char *end = NULL;
    long pid = strtol(ready + strlen("ready pid="), &end, 10);
    if (*end != '\0' || pid != 1) {
        fprintf(stderr, "nsapp: %s says '%s', not pid 1 of its namespace\n", proc_label(app->proc),
                ready);
        rc = AGENT_E_PROTO;
    }
    free(ready);
    return rc;
}

int nsapp_stop(struct test_app *app, int sig, int *wstatus)
{
    app->stopped = true;
    pid_t host = nsapp_host_pid(app);
    if (host > 0) {
        kill(host, sig);
    }
    if (proc_wait(app->proc, testenv_timeout(NSAPP_STOP_MS), wstatus) == 0) {
        return 0;
    }
    fprintf(stderr, "nsapp: %s did not end on signal %d within %d ms: killing its group\n",
            proc_label(app->proc), sig, NSAPP_STOP_MS);
    return proc_kill(app->proc, 0, wstatus);
}

void nsapp_stop_all(struct testenv *env)
{
    for (size_t i = 0; i < env->n_apps; i++) {
        struct test_app *app = env->apps[i];
        if (nsapp_is_ns(app) && !app->stopped && proc_running(app->proc)) {
            int st = -1;
            nsapp_stop(app, SIGTERM, &st);
            /* A ready TestApp exits 0 on SIGTERM; one still held at start-up (a suspending
             * diagnostic port) has no handler yet and dies by it, which is fine too. */
            bool clean = st != -1 && ((WIFEXITED(st) && WEXITSTATUS(st) == 0) ||
                                      (WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM));
            if (!clean) {
                char s[64];
                fprintf(stderr, "nsapp: %s did not exit cleanly on SIGTERM: %s\n",
                        proc_label(app->proc), proc_status_str(st, s, sizeof(s)));
                proc_dump(app->proc, stderr, NSAPP_DUMP);
            }
        }
    }
}

/* ---- ProcessInfo over the runtime's socket --------------------------------------------------- */

static int read_full(int fd, uint8_t *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, p + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return errno == EAGAIN ? AGENT_E_TIMEOUT : -errno; /* SO_RCVTIMEO expired */
        }
        if (r == 0) {
            return AGENT_E_CLOSED;
        }
        got += (size_t)r;
    }
    return 0;
}

int nsapp_process_info(const char *path, uint64_t *pid, char uid[37])
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    int n = snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    if (n <= 0 || (size_t)n >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    uint8_t *payload = NULL;
    int rc;
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) != 0) {
        rc = -errno;
        goto out;
    }
    /* "DOTNET_IPC_V1\0", size 20, command set 0x04 (Process), id 0x00 (ProcessInfo), reserved. */
    static const uint8_t magic[14] = "DOTNET_IPC_V1";
    uint8_t req[IPC_HEADER_SIZE] = {0};
    memcpy(req, magic, sizeof(magic));
    req[14] = IPC_HEADER_SIZE;
    req[16] = 0x04;
    if (write(fd, req, sizeof(req)) != (ssize_t)sizeof(req)) {
        rc = AGENT_E_CLOSED;
        goto out;
    }
    uint8_t h[IPC_HEADER_SIZE];
    if ((rc = read_full(fd, h, sizeof(h))) != 0) {
        goto out;
    }
    size_t size = (size_t)h[14] | (size_t)h[15] << 8;
    if (memcmp(h, magic, sizeof(magic)) != 0 || h[16] != 0xFF || h[17] != 0x00 ||
        size < IPC_HEADER_SIZE + 24 || size - IPC_HEADER_SIZE > IPC_MAX_PAYLOAD) {
        fprintf(stderr, "nsapp: %s: not an OK ProcessInfo reply (set %02x id %02x size %zu)\n",
                path, h[16], h[17], size);
        rc = AGENT_E_PROTO;
        goto out;
    }
    payload = malloc(size - IPC_HEADER_SIZE);
    if (payload == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = read_full(fd, payload, size - IPC_HEADER_SIZE)) != 0) {
        goto out;
    }
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | payload[i];
    }
    *pid = v;
    /* The cookie follows the pid, in .NET's GUID layout: LE uint32, 2 LE uint16, 8 bytes. */
    const uint8_t *g = payload + 8;
    snprintf(uid, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", g[3],
             g[2], g[1], g[0], g[5], g[4], g[7], g[6], g[8], g[9], g[10], g[11], g[12], g[13],
             g[14], g[15]);
    rc = 0;
out:
    free(payload);
    close(fd);
    return rc;
}

/* ---- directory and mount table --------------------------------------------------------------- */

static int cmp_names(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

int nsapp_list_sockets(const char *dir, char (*names)[128], int max)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        return -errno;
    }
    static const char pre[] = "dotnet-diagnostic-", suf[] = "-socket";
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < sizeof(pre) + sizeof(suf) - 2 || len >= 128 ||
            strncmp(e->d_name, pre, sizeof(pre) - 1) != 0 ||
            strcmp(e->d_name + len - (sizeof(suf) - 1), suf) != 0) {
            continue;
        }
        if (n < max) {
            memcpy(names[n], e->d_name, len + 1);
        }
        n++;
    }
    closedir(d);
    if (n > 1 && max > 1) {
        qsort(names, (size_t)(n < max ? n : max), sizeof(names[0]), cmp_names);
    }
    return n;
}

/* Counts mountinfo lines (text NULL) or the lines containing text. */
static int count_mounts(const char *text)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return -errno;
    }
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0) {
        n += text == NULL || strstr(line, text) != NULL;
    }
    free(line);
    fclose(f);
    return n;
}

int nsapp_mount_count(void)
{
    return count_mounts(NULL);
}

int nsapp_mounts_mentioning(const char *text)
{
    return count_mounts(text);
}
