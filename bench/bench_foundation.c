/* SPDX-License-Identifier: MIT */
/*
 * Foundation benchmark (issue: idle RSS, start-up, /processes latency). Every figure is printed
 * next to a baseline measured in the same run on the same machine, and as a ratio to it:
 *   - idle RSS of `dotmon collect` vs. `sleep` (the smallest process the system can run);
 *   - exec → first answered /processes vs. exec → exit of `dotmon --version` (pure exec cost);
 *   - /processes latency with 10 live runtimes vs. the same client against a trivial loopback
 *     HTTP responder thread (the loopback + client floor).
 * Usage: DOTMON_BIN=… DOTMON_TESTAPP_DIR=… bench_foundation [requests]   (see `make bench`)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "httpc.h"
#include "proc.h"
#include "testenv.h"

#define NAPPS 10

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(double *v, size_t n, double p)
{
    qsort(v, n, sizeof(*v), cmp_double);
    size_t i = (size_t)(p * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* ---- baseline HTTP responder: reads a request head, writes a fixed keep-alive response ---- */

static int floor_fd = -1;

static void *floor_thread(void *arg)
{
    (void)arg;
    static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                               "Content-Length: 2\r\n\r\n[]";
    for (;;) {
        int c = accept(floor_fd, NULL, NULL);
        if (c < 0) {
            return NULL;
        }
        char buf[8192];
        size_t have = 0;
        for (;;) {
            ssize_t n = read(c, buf + have, sizeof(buf) - 1 - have);
            if (n <= 0) {
                break;
            }
            have += (size_t)n;
            buf[have] = '\0';
            char *end;
            while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
                if (write(c, resp, sizeof(resp) - 1) < 0) {
                    break;
                }
                size_t used = (size_t)(end + 4 - buf);
                memmove(buf, buf + used, have - used);
                have -= used;
                buf[have] = '\0';
            }
        }
        close(c);
    }
}

static void latency_run(uint16_t port, const char *target, int n, double *out)
{
    struct httpc c;
    httpc_init(&c, "127.0.0.1", port, 5000);
    for (int i = 0; i < n; i++) {
        struct httpc_resp r;
        int rc = httpc_request(&c, "GET", target, NULL, NULL, 0, &r);
        if (rc != 0 || r.status != 200) {
            fprintf(stderr, "request %d failed: rc=%d status=%d %s\n", i, rc, r.status, r.error);
            exit(1);
        }
        out[i] = r.latency_ms;
        httpc_resp_fini(&r);
    }
    httpc_fini(&c);
}

static double exec_version_ms(const char *bin)
{
    double t0 = testenv_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execl(bin, bin, "--version", (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return testenv_now_ms() - t0;
}

static double startup_ms(struct testenv *env, const char *bin)
{
    uint16_t port = testenv_free_port();
    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    char tmpdir[64];
    snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", env->dir);
    const char *argv[] = {bin, "collect", "--no-auth", "--metrics", "false", "--urls", url, NULL};
    const char *envv[] = {tmpdir, NULL};
    struct proc_opts o = {.argv = argv, .env = envv, .label = "dotmon-start", .stdin_null = true};
    struct proc *p = NULL;
    double t0 = testenv_now_ms();
    if (proc_spawn(&o, &p) != 0) {
        fprintf(stderr, "cannot start dotmon\n");
        exit(1);
    }
    double t = -1;
    while (testenv_now_ms() - t0 < 5000) {
        struct httpc_resp r;
        int rc = httpc_get(port, "/processes", NULL, 1000, &r);
        int status = r.status;
        httpc_resp_fini(&r);
        if (rc == 0 && status == 200) {
            t = testenv_now_ms() - t0;
            break;
        }
    }
    int st;
    proc_kill(p, 2000, &st);
    proc_free(p);
    return t;
}

int main(int argc, char **argv)
{
    int nreq = argc > 1 ? atoi(argv[1]) : 1000;
    if (nreq < 10) {
        nreq = 10;
    }
    struct testenv env;
    if (testenv_init(&env) != 0 || env.dotmon_bin == NULL || env.testapp_bin[0] == '\0') {
        fprintf(stderr, "set DOTMON_BIN and DOTMON_TESTAPP_DIR (make bench does)\n");
        return 1;
    }
    testenv_watchdog(600);

    /* 1. Idle RSS: dotmon with nothing to watch vs. sleep. */
    const char *dm_args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    if (testenv_start_dotmon(&env, dm_args, NULL, &dm) != 0) {
        return 1;
    }
    testenv_sleep_ms(1000);
    long rss_dotmon = testenv_rss_kb(proc_pid(dm->proc));
    const char *sleep_argv[] = {"sleep", "30", NULL};
    struct proc_opts so = {.argv = sleep_argv, .label = "sleep", .stdin_null = true};
    struct proc *sp = NULL;
    proc_spawn(&so, &sp);
    testenv_sleep_ms(300);
    long rss_sleep = testenv_rss_kb(proc_pid(sp));
    int st;
    proc_kill(sp, 100, &st);
    proc_free(sp);
    testenv_stop_dotmon(dm, 3000, &st);

    /* 2. Start-up: exec → first 200 on /processes, vs. exec → exit of `dotmon --version`. */
    enum { NSTART = 15 };
    double start[NSTART], ver[NSTART];
    for (int i = 0; i < NSTART; i++) {
        ver[i] = exec_version_ms(env.dotmon_bin);
        start[i] = startup_ms(&env, env.dotmon_bin);
        if (start[i] < 0) {
            fprintf(stderr, "dotmon did not answer within 5 s\n");
            return 1;
        }
    }
    double start_med = percentile(start, NSTART, 0.5), ver_med = percentile(ver, NSTART, 0.5);

    /* 3. /processes with 10 live runtimes vs. the loopback floor. */
    for (int i = 0; i < NAPPS; i++) {
        struct test_app *app;
        if (testenv_start_app(&env, NULL, NULL, &app) != 0) {
            return 1;
        }
    }
    if (testenv_start_dotmon(&env, dm_args, NULL, &dm) != 0) {
        return 1;
    }
    double t0 = testenv_now_ms();
    for (;;) {
        struct httpc_resp r;
        int rc = testenv_dotmon_get(dm, "/processes", &r);
        size_t seen = 0;
        for (const char *q = r.body ? r.body : ""; (q = strstr(q, "\"pid\"")) != NULL; q++) {
            seen++;
        }
        httpc_resp_fini(&r);
        if (rc == 0 && seen == NAPPS) {
            break;
        }
        if (testenv_now_ms() - t0 > 20000) {
            fprintf(stderr, "dotmon lists %zu of %d runtimes after 20 s\n", seen, NAPPS);
            return 1;
        }
        testenv_sleep_ms(50);
    }
    long rss_10 = testenv_rss_kb(proc_pid(dm->proc));
    /* Room for the warm-up's 50 as well (nreq may be fewer). */
    size_t cap = nreq > 50 ? (size_t)nreq : 50;
    double *lat = calloc(cap, sizeof(double));
    double *base = calloc(cap, sizeof(double));
    latency_run(dm->port, "/processes", 50, lat); /* warm-up */
    latency_run(dm->port, "/processes", nreq, lat);

    floor_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    bind(floor_fd, (struct sockaddr *)&sa, sizeof(sa));
    listen(floor_fd, 16);
    getsockname(floor_fd, (struct sockaddr *)&sa, &len);
    pthread_t th;
    pthread_create(&th, NULL, floor_thread, NULL);
    latency_run(ntohs(sa.sin_port), "/processes", 50, base);
    latency_run(ntohs(sa.sin_port), "/processes", nreq, base);

    double med = percentile(lat, (size_t)nreq, 0.5), p99 = percentile(lat, (size_t)nreq, 0.99);
    double bmed = percentile(base, (size_t)nreq, 0.5), bp99 = percentile(base, (size_t)nreq, 0.99);

    printf("| metric | dotmon | baseline | ratio | target |\n|---|---|---|---|---|\n");
    printf("| idle RSS (KiB) | %ld | %ld (`sleep`) | %.2f | < 4096 KiB |\n", rss_dotmon, rss_sleep,
           (double)rss_dotmon / (double)rss_sleep);
    printf("| RSS with %d runtimes (KiB) | %ld | %ld (idle dotmon) | %.2f | |\n", NAPPS, rss_10,
           rss_dotmon, (double)rss_10 / (double)rss_dotmon);
    printf("| exec → first /processes answer (ms, median of %d) | %.2f | %.2f (`dotmon --version` "
           "exec→exit) | %.2f | < 20 ms |\n",
           NSTART, start_med, ver_med, start_med / ver_med);
    printf("| /processes latency, %d runtimes, median (ms, %d req) | %.3f | %.3f (loopback floor) "
           "| %.2f | < 1 ms |\n",
           NAPPS, nreq, med, bmed, med / bmed);
    printf(
        "| /processes latency, %d runtimes, p99 (ms) | %.3f | %.3f (loopback floor) | %.2f | |\n",
        NAPPS, p99, bp99, p99 / bp99);
    free(lat);
    free(base);
    testenv_fini(&env);
    return 0;
}
