/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* pipe2, close_range, CLOSE_RANGE_CLOEXEC */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"

extern char **environ;

#define PROC_CAPTURE_MAX ((size_t)64 << 20)
#define PROC_TABLE_SIZE  256
#define PROC_READ_CHUNK  65536

struct proc_capture {
    struct buf data; /* everything received; never consumed, so offsets stay valid */
    size_t scan;     /* proc_wait_line's cursor */
    size_t echoed;   /* verbose mode: bytes already echoed */
    size_t dropped;  /* bytes thrown away past PROC_CAPTURE_MAX */
    bool eof;
};

struct proc {
    pid_t pid;
    int in_fd;      /* our end of the child's stdin; -1 once closed */
    int out_fd[2];  /* our ends of stdout and stderr, read by the reader thread */
    int stop_fd[2]; /* self-pipe: a byte here makes the reader give up */
    pthread_t reader;
    bool reader_started;
    pthread_mutex_t mu; /* guards cap[] */
    pthread_cond_t cv;  /* broadcast on every append and at EOF */
    struct proc_capture cap[2];
    bool reaped;
    int wstatus; /* valid once reaped; -1 if someone else reaped the child */
    bool verbose;
    char label[48];
};

/*
 * Live children, for emergency cleanup from atexit and signal handlers. A slot holds a pid (which
 * is also the child's process group id) or 0. Writers hold live_mu; the signal-time reader just
 * reads, which is what makes proc_kill_all async-signal-safe.
 */
static volatile pid_t live_pids[PROC_TABLE_SIZE];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void proc_kill_all(void)
{
    for (size_t i = 0; i < PROC_TABLE_SIZE; i++) {
        pid_t pid = live_pids[i];
        if (pid > 0) {
            kill(-pid, SIGKILL);
        }
    }
}

static void on_fatal_signal(int sig)
{
    proc_kill_all();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* One-time process setup: atexit cleanup, fatal-signal cleanup, and SIGPIPE ignored so a write to
 * a dead child's stdin or a closed socket returns EPIPE instead of killing the test. */
static void proc_global_init(void)
{
    atexit(proc_kill_all);
    static const int fatal[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) {
        struct sigaction old;
        if (sigaction(fatal[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_fatal_signal;
            sigemptyset(&sa.sa_mask);
            sigaction(fatal[i], &sa, NULL);
        }
    }
    signal(SIGPIPE, SIG_IGN);
}

static void live_add(pid_t pid)
{
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < PROC_TABLE_SIZE; i++) {
        if (live_pids[i] == 0) {
            live_pids[i] = pid;
            break;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

static void live_remove(pid_t pid)
{
    pthread_mutex_lock(&live_mu);
    for (size_t i = 0; i < PROC_TABLE_SIZE; i++) {
        if (live_pids[i] == pid) {
            live_pids[i] = 0;
        }
    }
    pthread_mutex_unlock(&live_mu);
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
}

/* ---- capture (reader thread side) ---------------------------------------------------------- */

/* Echoes the complete lines not yet echoed (verbose mode). Caller holds p->mu. */
static void echo_lines(struct proc *p, int s, bool flush_partial)
{
    struct proc_capture *c = &p->cap[s];
    const char *d = (const char *)buf_data(&c->data);
    size_t n = buf_size(&c->data);
    while (c->echoed < n) {
        const char *nl = memchr(d + c->echoed, '\n', n - c->echoed);
        size_t end = nl ? (size_t)(nl - d) : n;
        if (!nl && !flush_partial) {
            break;
        }
        fprintf(stderr, "[%s:%s] %.*s\n", p->label, s == PROC_STDOUT ? "out" : "err",
                (int)(end - c->echoed), d + c->echoed);
        c->echoed = nl ? end + 1 : end;
    }
}

static void capture_append(struct proc *p, int s, const char *data, size_t n)
{
    pthread_mutex_lock(&p->mu);
    struct proc_capture *c = &p->cap[s];
    if (buf_size(&c->data) + n > PROC_CAPTURE_MAX || buf_append(&c->data, data, n) != 0) {
        c->dropped += n;
    } else if (p->verbose) {
        echo_lines(p, s, false);
    }
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void capture_eof(struct proc *p, int s)
{
    pthread_mutex_lock(&p->mu);
    if (!p->cap[s].eof && p->verbose) {
        echo_lines(p, s, true);
    }
    p->cap[s].eof = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

/* Drains stdout and stderr until both reach EOF or proc_free writes to the stop pipe. */
static void *reader_main(void *arg)
{
    struct proc *p = arg;
    char *chunk = malloc(PROC_READ_CHUNK);
    bool open_[2] = {true, true};
    while (chunk && (open_[0] || open_[1])) {
        struct pollfd pfd[3] = {
            {.fd = open_[0] ? p->out_fd[0] : -1, .events = POLLIN},
            {.fd = open_[1] ? p->out_fd[1] : -1, .events = POLLIN},
            {.fd = p->stop_fd[0], .events = POLLIN},
        };
        if (poll(pfd, 3, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (pfd[2].revents) {
            break;
        }
        for (int s = 0; s < 2; s++) {
            if (!open_[s] || !(pfd[s].revents & (POLLIN | POLLHUP | POLLERR))) {
                continue;
            }
            ssize_t r = read(p->out_fd[s], chunk, PROC_READ_CHUNK);
            if (r > 0) {
                capture_append(p, s, chunk, (size_t)r);
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                open_[s] = false;
                capture_eof(p, s);
            }
        }
    }
    free(chunk);
    capture_eof(p, PROC_STDOUT);
    capture_eof(p, PROC_STDERR);
    return NULL;
}

/* ---- spawn ---------------------------------------------------------------------------------- */

/* What the forked child needs, all prepared before fork: the child may only make
 * async-signal-safe calls because the test process has other threads (readers). */
struct child_plan {
    const char *path;
    char **argv;
    char **envp;
    const char *cwd;
    int in_fd, out_fd, err_fd; /* child ends */
    int status_fd;             /* CLOEXEC write end: exec errno goes here on failure */
    pid_t parent;
    int max_fd;
};

static void child_fail(const struct child_plan *cp, int err) __attribute__((noreturn));
static void child_fail(const struct child_plan *cp, int err)
{
    ssize_t r = write(cp->status_fd, &err, sizeof err);
    (void)r;
    _exit(127);
}

static int child_dup(int from, int to)
{
    if (from == to) {
        return fcntl(to, F_SETFD, 0); /* dup2 would leave CLOEXEC set */
    }
    return dup2(from, to) < 0 ? -1 : 0;
}

static void child_exec(const struct child_plan *cp) __attribute__((noreturn));
static void child_exec(const struct child_plan *cp)
{
    /* Own process group, so one kill(-pid) takes the child's own children too. */
    setpgid(0, 0);
    /* Die with the test. Checking getppid closes the race with a parent that died before prctl. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        child_fail(cp, errno);
    }
    if (getppid() != cp->parent) {
        _exit(127);
    }
    /* Undo what the test process changed: its blocked signals and its ignored SIGPIPE (ignored
     * dispositions survive exec). Handlers reset by themselves at exec. */
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    static const int reset[] = {SIGPIPE, SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGALRM, SIGCHLD};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++) {
        sigaction(reset[i], &dfl, NULL);
    }
    if (child_dup(cp->in_fd, 0) != 0 || child_dup(cp->out_fd, 1) != 0 ||
        child_dup(cp->err_fd, 2) != 0) {
        child_fail(cp, errno);
    }
    /* Everything else is close-on-exec: no inherited pipes or sockets, but the status pipe stays
     * usable until exec succeeds. */
    if (close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
        for (int fd = 3; fd < cp->max_fd; fd++) {
            fcntl(fd, F_SETFD, FD_CLOEXEC);
        }
    }
    if (cp->cwd && chdir(cp->cwd) != 0) {
        child_fail(cp, errno);
    }
    execve(cp->path, cp->argv, cp->envp);
    child_fail(cp, errno);
}

static void strv_free(char **v)
{
    if (!v) {
        return;
    }
    for (size_t i = 0; v[i]; i++) {
        free(v[i]);
    }
    free(v);
}

static size_t strv_len(const char *const *v)
{
    size_t n = 0;
    while (v && v[n]) {
        n++;
    }
    return n;
}

static char **argv_dup(const char *const *argv)
{
    size_t n = strv_len(argv);
    char **v = calloc(n + 1, sizeof *v);
    if (!v) {
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(v[i] = strdup(argv[i]))) {
            strv_free(v);
            return NULL;
        }
    }
    return v;
}

static bool env_name_eq(const char *a, const char *b)
{
    size_t na = strcspn(a, "=");
    size_t nb = strcspn(b, "=");
    return na == nb && memcmp(a, b, na) == 0;
}

/* The test's environment, minus every name in extra, plus extra's NAME=VALUE entries. */
static char **env_build(const char *const *extra)
{
    size_t n_env = 0;
    while (environ[n_env]) {
        n_env++;
    }
    size_t n_extra = strv_len(extra);
    char **v = calloc(n_env + n_extra + 1, sizeof *v);
    if (!v) {
        return NULL;
    }
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++) {
        bool overridden = false;
        for (size_t j = 0; j < n_extra && !overridden; j++) {
            overridden = env_name_eq(environ[i], extra[j]);
        }
        if (!overridden && !(v[k++] = strdup(environ[i]))) {
            goto fail;
        }
    }
    for (size_t j = 0; j < n_extra; j++) {
        if (strchr(extra[j], '=') && !(v[k++] = strdup(extra[j]))) {
            goto fail;
        }
    }
    return v;
fail:
    strv_free(v);
    return NULL;
}

/* argv[0] as given if it has a slash, else the first executable match in the test's PATH. */
static char *resolve_program(const char *name)
{
    if (strchr(name, '/')) {
        return strdup(name);
    }
    const char *path = getenv("PATH");
    if (!path) {
        path = "/usr/bin:/bin";
    }
    while (*path) {
        size_t len = strcspn(path, ":");
        char cand[PATH_MAX];
        int w = snprintf(cand, sizeof cand, "%.*s/%s", (int)len, path, name);
        if (w > 0 && (size_t)w < sizeof cand && access(cand, X_OK) == 0) {
            return strdup(cand);
        }
        path += len;
        if (*path == ':') {
            path++;
        }
    }
    return NULL;
}

int proc_spawn(const struct proc_opts *opts, struct proc **out)
{
    pthread_once(&init_once, proc_global_init);
    if (!opts || !opts->argv || !opts->argv[0] || !out) {
        return AGENT_E_INVAL;
    }

    int err = 0;
    char *path = NULL;
    char **argv = NULL;
    char **envp = NULL;
    int in_p[2] = {-1, -1}, out_p[2] = {-1, -1}, err_p[2] = {-1, -1}, st_p[2] = {-1, -1};
    int devnull = -1;
    bool cv_ok = false, mu_ok = false;
    struct proc *p = calloc(1, sizeof *p);
    if (!p) {
        return -ENOMEM;
    }
    p->pid = -1;
    p->in_fd = p->out_fd[0] = p->out_fd[1] = p->stop_fd[0] = p->stop_fd[1] = -1;
    buf_init(&p->cap[0].data, 0);
    buf_init(&p->cap[1].data, 0);
    const char *v = getenv("DOTMON_TEST_VERBOSE");
    p->verbose = v && *v && strcmp(v, "0") != 0;
    const char *label = opts->label;
    if (!label) {
        label = strrchr(opts->argv[0], '/') ? strrchr(opts->argv[0], '/') + 1 : opts->argv[0];
    }
    snprintf(p->label, sizeof p->label, "%s", label); /* truncation is fine for a label */

    if (pthread_mutex_init(&p->mu, NULL) != 0) {
        err = -ENOMEM;
        goto fail;
    }
    mu_ok = true;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    cv_ok = pthread_cond_init(&p->cv, &ca) == 0;
    pthread_condattr_destroy(&ca);
    if (!cv_ok) {
        err = -ENOMEM;
        goto fail;
    }

    path = resolve_program(opts->argv[0]);
    if (!path) {
        err = -ENOENT;
        goto fail;
    }
    argv = argv_dup(opts->argv);
    envp = env_build(opts->env);
    if (!argv || !envp) {
        err = -ENOMEM;
        goto fail;
    }
    /* Every pipe end is CLOEXEC: a child spawned later must not hold this child's pipes open. */
    if ((!opts->stdin_null && pipe2(in_p, O_CLOEXEC) != 0) || pipe2(out_p, O_CLOEXEC) != 0 ||
        pipe2(err_p, O_CLOEXEC) != 0 || pipe2(st_p, O_CLOEXEC) != 0 ||
        pipe2(p->stop_fd, O_CLOEXEC) != 0) {
        err = -errno;
        goto fail;
    }
    if (opts->stdin_null && (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        err = -errno;
        goto fail;
    }

    long max_fd = sysconf(_SC_OPEN_MAX);
    struct child_plan cp = {
        .path = path,
        .argv = argv,
        .envp = envp,
        .cwd = opts->cwd,
        .in_fd = opts->stdin_null ? devnull : in_p[0],
        .out_fd = out_p[1],
        .err_fd = err_p[1],
        .status_fd = st_p[1],
        .parent = getpid(),
        .max_fd = max_fd < 0 || max_fd > 65536 ? 65536 : (int)max_fd,
    };
    pid_t pid = fork();
    if (pid < 0) {
        err = -errno;
        goto fail;
    }
    if (pid == 0) {
        child_exec(&cp);
    }
    p->pid = pid;
    close_fd(&in_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[1]);
    close_fd(&st_p[1]);
    close_fd(&devnull);

    /* EOF on the status pipe means exec succeeded (CLOEXEC closed it); an int means it failed. */
    int child_errno = 0;
    ssize_t r;
    while ((r = read(st_p[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
    }
    close_fd(&st_p[0]);
    if (r > 0) {
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        p->pid = -1;
        err = child_errno > 0 ? -child_errno : AGENT_E_INVAL;
        goto fail;
    }
    setpgid(pid, pid); /* also done by the child; whichever runs first wins, errors don't matter */
    live_add(pid);

    p->in_fd = in_p[1];
    in_p[1] = -1;
    p->out_fd[0] = out_p[0];
    p->out_fd[1] = err_p[0];
    out_p[0] = err_p[0] = -1;
    if (pthread_create(&p->reader, NULL, reader_main, p) != 0) {
        /* Without a reader nothing drains the pipes: give up on this child. */
        kill(-pid, SIGKILL);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
        }
        live_remove(pid);
        p->pid = -1;
        err = -EAGAIN;
        goto fail;
    }
    p->reader_started = true;
    free(path);
    strv_free(argv);
    strv_free(envp);
    *out = p;
    return 0;

fail:
    free(path);
    strv_free(argv);
    strv_free(envp);
    close_fd(&in_p[0]);
    close_fd(&in_p[1]);
    close_fd(&out_p[0]);
    close_fd(&out_p[1]);
    close_fd(&err_p[0]);
    close_fd(&err_p[1]);
    close_fd(&st_p[0]);
    close_fd(&st_p[1]);
    close_fd(&devnull);
    close_fd(&p->in_fd);
    close_fd(&p->out_fd[0]);
    close_fd(&p->out_fd[1]);
    close_fd(&p->stop_fd[0]);
    close_fd(&p->stop_fd[1]);
    if (cv_ok) {
        pthread_cond_destroy(&p->cv);
    }
    if (mu_ok) {
        pthread_mutex_destroy(&p->mu);
    }
    buf_fini(&p->cap[0].data);
    buf_fini(&p->cap[1].data);
    free(p);
    return err;
}

pid_t proc_pid(const struct proc *p)
{
    return p->pid;
}

const char *proc_label(const struct proc *p)
{
    return p->label;
}

/* ---- lines ---------------------------------------------------------------------------------- */

/*
 * The next line of c at or after *pos: sets [*start, *start + *len) (without "\n" or "\r\n") and
 * moves *pos past it. A last line without a newline counts only after EOF. Caller holds p->mu.
 */
static bool next_line(const struct proc_capture *c, size_t *pos, size_t *start, size_t *len)
{
    const char *d = (const char *)buf_data(&c->data);
    size_t n = buf_size(&c->data);
    if (*pos >= n) {
        return false;
    }
    const char *nl = memchr(d + *pos, '\n', n - *pos);
    if (!nl && !c->eof) {
        return false;
    }
    size_t end = nl ? (size_t)(nl - d) : n;
    *start = *pos;
    *len = end - *pos;
    if (*len > 0 && d[end - 1] == '\r') {
        (*len)--;
    }
    *pos = nl ? end + 1 : end;
    return true;
}

struct prefix_ctx {
    const char *prefix;
    size_t len;
};

static bool match_prefix(const char *line, void *ctx)
{
    const struct prefix_ctx *pc = ctx;
    return strncmp(line, pc->prefix, pc->len) == 0;
}

/* Scans lines from *pos for one fn accepts. Caller holds p->mu. Returns a malloc'd copy (and
 * sets *matched_end past it) or NULL. *oom is set when a copy could not be made. */
static char *scan_lines(struct proc *p, enum proc_stream s, size_t *pos, proc_line_match_fn fn,
                        void *ctx, size_t *matched_end, bool *oom)
{
    const struct proc_capture *c = &p->cap[s];
    size_t start, len;
    while (next_line(c, pos, &start, &len)) {
        char *line = malloc(len + 1);
        if (!line) {
            *oom = true;
            return NULL;
        }
        memcpy(line, buf_data(&c->data) + start, len);
        line[len] = '\0';
        if (fn(line, ctx)) {
            *matched_end = *pos;
            return line;
        }
        free(line);
    }
    return NULL;
}

int proc_wait_line_match(struct proc *p, enum proc_stream s, proc_line_match_fn fn, void *ctx,
                         int timeout_ms, char **line_out)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec abs;
    abs.tv_sec = (time_t)(deadline / 1000);
    abs.tv_nsec = (long)(deadline % 1000) * 1000000L;
    int rc;

    pthread_mutex_lock(&p->mu);
    size_t pos = p->cap[s].scan; /* lines before pos were already rejected in this call */
    for (;;) {
        bool oom = false;
        size_t end = 0;
        char *line = scan_lines(p, s, &pos, fn, ctx, &end, &oom);
        if (line) {
            p->cap[s].scan = end;
            if (line_out) {
                *line_out = line;
            } else {
                free(line);
            }
            rc = 0;
            break;
        }
        if (oom) {
            rc = -ENOMEM;
            break;
        }
        if (p->cap[s].eof) {
            rc = AGENT_E_CLOSED;
            break;
        }
        if (pthread_cond_timedwait(&p->cv, &p->mu, &abs) == ETIMEDOUT) {
            /* One last look: the line may have landed together with the timeout. */
            line = scan_lines(p, s, &pos, fn, ctx, &end, &oom);
            if (line) {
                p->cap[s].scan = end;
                if (line_out) {
                    *line_out = line;
                } else {
                    free(line);
                }
                rc = 0;
            } else {
                rc = oom ? -ENOMEM : AGENT_E_TIMEOUT;
            }
            break;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int proc_wait_line(struct proc *p, enum proc_stream s, const char *prefix, int timeout_ms,
                   char **line_out)
{
    struct prefix_ctx pc = {.prefix = prefix, .len = strlen(prefix)};
    return proc_wait_line_match(p, s, match_prefix, &pc, timeout_ms, line_out);
}

int proc_find_line(struct proc *p, enum proc_stream s, const char *prefix, char **line_out)
{
    struct prefix_ctx pc = {.prefix = prefix, .len = strlen(prefix)};
    pthread_mutex_lock(&p->mu);
    size_t pos = 0, end = 0;
    bool oom = false;
    char *line = scan_lines(p, s, &pos, match_prefix, &pc, &end, &oom);
    pthread_mutex_unlock(&p->mu);
    if (!line) {
        return oom ? -ENOMEM : AGENT_E_NOTFOUND;
    }
    if (line_out) {
        *line_out = line;
    } else {
        free(line);
    }
    return 0;
}

void proc_rewind(struct proc *p, enum proc_stream s)
{
    pthread_mutex_lock(&p->mu);
    p->cap[s].scan = 0;
    pthread_mutex_unlock(&p->mu);
}

char *proc_output(struct proc *p, enum proc_stream s, size_t *len_out)
{
    pthread_mutex_lock(&p->mu);
    size_t n = buf_size(&p->cap[s].data);
    char *copy = malloc(n + 1);
    if (copy) {
        memcpy(copy, buf_data(&p->cap[s].data), n);
        copy[n] = '\0';
        if (len_out) {
            *len_out = n;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return copy;
}

/* ---- stdin, signals, exit ------------------------------------------------------------------- */

int proc_send_line(struct proc *p, const char *line)
{
    if (p->in_fd < 0) {
        return AGENT_E_CLOSED;
    }
    size_t n = strlen(line);
    char *msg = malloc(n + 1);
    if (!msg) {
        return -ENOMEM;
    }
    memcpy(msg, line, n);
    msg[n] = '\n';
    size_t done = 0;
    int rc = 0;
    while (done < n + 1) {
        ssize_t w = write(p->in_fd, msg + done, n + 1 - done);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            rc = -errno;
            break;
        }
        done += (size_t)w;
    }
    free(msg);
    return rc;
}

void proc_close_stdin(struct proc *p)
{
    close_fd(&p->in_fd);
}

int proc_signal(struct proc *p, int sig)
{
    if (p->reaped || p->pid <= 0) {
        return -ESRCH;
    }
    return kill(p->pid, sig) == 0 ? 0 : -errno;
}

/* Reaps the child if it has exited. Returns true once reaped. */
static bool try_reap(struct proc *p)
{
    if (p->reaped) {
        return true;
    }
    int st = 0;
    pid_t r;
    while ((r = waitpid(p->pid, &st, WNOHANG)) < 0 && errno == EINTR) {
    }
    if (r == 0) {
        return false;
    }
    /* r < 0 (ECHILD): someone else reaped it; the status is lost. */
    p->wstatus = r == p->pid ? st : -1;
    p->reaped = true;
    live_remove(p->pid); /* from now on the pid may be reused: never signal it again */
    return true;
}

bool proc_running(struct proc *p)
{
    return !try_reap(p);
}

int proc_wait(struct proc *p, int timeout_ms, int *wstatus)
{
    int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    while (!try_reap(p)) {
        if (now_ms() >= deadline) {
            return AGENT_E_TIMEOUT;
        }
        sleep_ms(5);
    }
    if (wstatus) {
        *wstatus = p->wstatus;
    }
    return 0;
}

int proc_kill(struct proc *p, int grace_ms, int *wstatus)
{
    if (!try_reap(p) && grace_ms > 0) {
        kill(p->pid, SIGTERM);
        proc_wait(p, grace_ms, NULL);
    }
    if (!try_reap(p)) {
        kill(-p->pid, SIGKILL);
        kill(p->pid, SIGKILL); /* in case it left its group */
        if (proc_wait(p, 10000, NULL) != 0) {
            /* Uninterruptible sleep or worse: block rather than leak a zombie. */
            int st = 0;
            while (waitpid(p->pid, &st, 0) < 0 && errno == EINTR) {
            }
            p->wstatus = st;
            p->reaped = true;
            live_remove(p->pid);
        }
    }
    if (wstatus) {
        *wstatus = p->wstatus;
    }
    return 0;
}

void proc_free(struct proc *p)
{
    if (!p) {
        return;
    }
    if (p->pid > 0) {
        proc_kill(p, 0, NULL);
    }
    if (p->reader_started) {
        /* The child is gone, but a grandchild could still hold the pipes open: tell the reader. */
        ssize_t w = write(p->stop_fd[1], "x", 1);
        (void)w;
        pthread_join(p->reader, NULL);
    }
    close_fd(&p->in_fd);
    close_fd(&p->out_fd[0]);
    close_fd(&p->out_fd[1]);
    close_fd(&p->stop_fd[0]);
    close_fd(&p->stop_fd[1]);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    buf_fini(&p->cap[0].data);
    buf_fini(&p->cap[1].data);
    free(p);
}

const char *proc_status_str(int wstatus, char *buf, size_t n)
{
    if (wstatus == -1) {
        snprintf(buf, n, "unknown (reaped elsewhere)");
    } else if (WIFEXITED(wstatus)) {
        snprintf(buf, n, "exit %d", WEXITSTATUS(wstatus));
    } else if (WIFSIGNALED(wstatus)) {
        snprintf(buf, n, "signal %d (%s)", WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    } else {
        snprintf(buf, n, "status 0x%x", (unsigned)wstatus);
    }
    return buf;
}

void proc_dump(struct proc *p, FILE *f, size_t max_bytes)
{
    char st[64];
    bool running = proc_running(p);
    fprintf(f, "==== %s (pid %d): %s ====\n", p->label, (int)p->pid,
            running ? "running" : proc_status_str(p->wstatus, st, sizeof st));
    pthread_mutex_lock(&p->mu);
    for (int s = 0; s < 2; s++) {
        const struct proc_capture *c = &p->cap[s];
        size_t n = buf_size(&c->data);
        size_t from = n > max_bytes ? n - max_bytes : 0;
        fprintf(f, "---- %s: %zu bytes%s%s ----\n", s == PROC_STDOUT ? "stdout" : "stderr", n,
                from ? ", showing the end" : "", c->dropped ? ", some dropped past the cap" : "");
        fwrite(buf_data(&c->data) + from, 1, n - from, f);
        if (n && buf_data(&c->data)[n - 1] != '\n') {
            fputc('\n', f);
        }
    }
    pthread_mutex_unlock(&p->mu);
    fprintf(f, "==== end of %s ====\n", p->label);
}
