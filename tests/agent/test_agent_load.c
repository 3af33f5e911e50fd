/* SPDX-License-Identifier: MIT */
/*
 * Integration, load and abuse (loopback only, bounded in time) against the real dotmon binary:
 *
 *  1. wrk, 64 connections for 30 s on GET /processes (with the Authorization header) while two
 *     TestApps are listed: no socket error, no non-2xx answer, and RSS flat: the highest VmRSS of
 *     the last 10 s is at most RSS_GROWTH_KB above the highest of the first 10 s.
 *  2. 1000 idle connections (nothing sent, or half a request line) are all closed by the header
 *     timeout (Kestrel:Limits:RequestHeadersTimeout, 3 s here; 2 s for those that came when 3/4
 *     of the connection limit were open) within a bound, while normal requests keep being
 *     answered quickly; dotmon's descriptors come back.
 *  3. Kestrel:Limits:MaxConcurrentConnections=N: with N idle keep-alive connections,
 *     connection N+1 is served and the oldest idle one closed to make room; with N requests in
 *     progress (trace downloads) it gets a 503 problem+json saying the connection limit was
 *     reached, with Retry-After and Connection: close, and is closed; once the others end, new
 *     connections are served again.
 *  4. 200 trace downloads (80 under ASan; profile Cpu) abandoned after a few KB, sequentially and
 *     12 at a time: every operation ends Cancelled, the runtime still accepts a session (a short
 *     trace is complete per the nettrace checker), dotmon's descriptors and RSS are back at
 *     baseline.
 *
 * The figures (requests/s, the RSS series, close times, latencies, fd counts) are printed; they
 * depend on the machine and on whatever else runs on it. Under ASan only the pass/fail
 * properties matter (no request rate is asserted anywhere).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "nettrace.h"

#define WATCHDOG_S       1100
#define RSS_GROWTH_KB    512
#define IDLE_CONNS       1000
#define HEADER_TIMEOUT_S 3
#define PRESSURE_HEAD_S  2   /* the head timeout above 3/4 of the connection limit */
#define EARLY_CONNS      700 /* opened well below 3/4 of the default limit (1024) */
/* Abandoned traces: ABANDON_SEQ one after the other, then rounds of 12 at once (the last 4).
 * The test measures latency and RSS: ctest runs it in the normal build only (label perf). */
#define ABANDON_SEQ    100
#define ABANDON_ROUNDS 9
#define ABANDON_ALL    (ABANDON_SEQ + 12 * (ABANDON_ROUNDS - 1) + 4)

/* ASan's quarantine holds freed memory (256 MiB by default) and would look like growth; a small
 * one keeps RSS meaningful. Other ASAN_OPTIONS of the test environment are kept. */
static char asan_env[1024];

static const char *const *dotmon_env(const char *extra1, const char *extra2)
{
    static const char *env[5];
    const char *cur = getenv("ASAN_OPTIONS");
    snprintf(asan_env, sizeof(asan_env), "ASAN_OPTIONS=%s%squarantine_size_mb=8", cur ? cur : "",
             cur && *cur ? ":" : "");
    size_t n = 0;
    env[n++] = asan_env;
    /* What the jobs held goes back 100 ms after the last one, not 1 s: RSS is read after that. */
    env[n++] = "DotnetMonitor_Timeouts__IdleTrimMs=100";
    if (extra1 != NULL) {
        env[n++] = extra1;
    }
    if (extra2 != NULL) {
        env[n++] = extra2;
    }
    env[n] = NULL;
    return env;
}

static void raise_nofile(void)
{
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < IDLE_CONNS + 200) {
        fprintf(stderr, "RLIMIT_NOFILE %llu is too low for %d connections\n",
                (unsigned long long)rl.rlim_cur, IDLE_CONNS);
        fail();
    }
}

/* Soft RLIMIT_NOFILE of a process, from /proc/<pid>/limits. */
static long nofile_soft(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[256];
    long soft = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "Max open files", 14) == 0) {
            soft = strtol(line + 14, NULL, 10);
        }
    }
    fclose(f);
    return soft;
}

/* ---- 1. wrk on /processes ----------------------------------------------------------------------
 */

/* The number after `key` in text, or -1 when key is absent. */
static double number_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p != NULL ? strtod(p + strlen(key), NULL) : -1;
}

static void test_load_wrk_processes(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_S);
    struct test_app *a1 = agent_test_start_app(env);
    struct test_app *a2 = agent_test_start_app(env);
    const char *const args[] = {"--temp-apikey", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, dotmon_env(NULL, NULL), &dm), 0);
    pid_t pids[] = {a1->pid, a2->pid};
    cJSON_Delete(agent_test_wait_processes(dm, pids, 2, 10000));
    pid_t dpid = proc_pid(dm->proc);
    int fds0 = agent_test_fd_baseline(dpid);

    char url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/processes", (unsigned)dm->port);
    const char *wrk_argv[] = {
        "wrk", "-c", "64", "-t", "2", "-d", "30s", "--latency", "-H", dm->auth_header, url, NULL};
    struct proc_opts po = {.argv = wrk_argv, .label = "wrk", .stdin_null = true};
    struct proc *wrk = NULL;
    int rc = proc_spawn(&po, &wrk);
    if (rc != 0) {
        fprintf(stderr, "cannot run wrk (%s): install the Debian package wrk\n",
                agent_strerror(rc));
    }
    assert_int_equal(rc, 0);
    long rss[64];
    size_t n = 0;
    double t0 = testenv_now_ms();
    while (proc_running(wrk) && n < 64) {
        testenv_sleep_ms((int)(t0 + 1000.0 * (double)(n + 1) - testenv_now_ms()));
        if (!proc_running(wrk)) {
            break;
        }
        rss[n++] = testenv_rss_kb(dpid);
    }
    int st = 0;
    assert_int_equal(proc_wait(wrk, testenv_timeout(60000), &st), 0);
    char *out = proc_output(wrk, PROC_STDOUT, NULL);
    assert_non_null(out);
    fprintf(stderr, "%s", out);
    double rps = number_after(out, "Requests/sec:");
    double sock_err = number_after(out, "Socket errors:");
    double non2xx = number_after(out, "Non-2xx or 3xx responses:");
    double total = number_after(out, "requests in");
    (void)total;
    bool errors = strstr(out, "Socket errors") != NULL;
    free(out);
    proc_free(wrk);

    /* RSS: the first 10 samples against the last 10. */
    assert_true(n >= 25);
    long first_max = 0, last_max = 0, lo = rss[0], hi = rss[0];
    for (size_t i = 0; i < n; i++) {
        if (i < 10) {
            first_max = rss[i] > first_max ? rss[i] : first_max;
        }
        if (i >= n - 10) {
            last_max = rss[i] > last_max ? rss[i] : last_max;
        }
        lo = rss[i] < lo ? rss[i] : lo;
        hi = rss[i] > hi ? rss[i] : hi;
    }
    fprintf(stderr, "wrk /processes: %.0f requests/s; RSS KiB per second:", rps);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %ld", rss[i]);
    }
    fprintf(stderr,
            "\nRSS first 10 s max %ld, last 10 s max %ld (min %ld, max %ld); bound +%d KiB\n",
            first_max, last_max, lo, hi, RSS_GROWTH_KB);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    assert_true(rps > 0);
    if (errors) {
        fprintf(stderr, "wrk reported socket errors (connect/read/write/timeout)\n");
    }
    assert_false(errors);
    (void)sock_err;
    assert_true(non2xx < 0); /* wrk prints the line only when there are any */
    assert_true(last_max <= first_max + RSS_GROWTH_KB);

    /* Still serving, descriptors back (wrk's 64 connections are gone). */
    cJSON_Delete(agent_test_get_json(dm, "/processes", 200));
    int fds1 = agent_test_wait_fds(dpid, fds0, 5000);
    fprintf(stderr, "dotmon fds before %d, after %d\n", fds0, fds1);
    assert_true(fds1 <= fds0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 2. 1000 idle connections and the header timeout ------------------------------------------
 */

static int connect_nb(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    int fl = fcntl(fd, F_GETFL);
    (void)fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    return fd;
}

struct lat {
    unsigned n;
    double max_ms, sum_ms;
};

static void timed_get(struct dotmon *dm, struct lat *l)
{
    struct httpc_resp r;
    int rc = httpc_get(dm->port, "/processes", NULL, testenv_timeout(10000), &r);
    if (rc != 0 || r.status != 200) {
        fprintf(stderr, "GET /processes during the flood: rc %s status %d %s\n", agent_strerror(rc),
                r.status, r.error);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    l->n++;
    l->sum_ms += r.latency_ms;
    l->max_ms = r.latency_ms > l->max_ms ? r.latency_ms : l->max_ms;
    httpc_resp_fini(&r);
}

static void test_load_idle_flood(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_S);
    raise_nofile();
    struct test_app *app = agent_test_start_app(env);
    const char *const args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    char hto[80];
    snprintf(hto, sizeof(hto), "DotnetMonitor_Kestrel__Limits__RequestHeadersTimeout=00:00:%02d",
             HEADER_TIMEOUT_S);
    assert_int_equal(testenv_start_dotmon(env, args, dotmon_env(hto, NULL), &dm), 0);
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 10000));
    pid_t dpid = proc_pid(dm->proc);
    long soft = nofile_soft(dpid);
    struct rlimit rl;
    getrlimit(RLIMIT_NOFILE, &rl);
    fprintf(stderr, "dotmon soft RLIMIT_NOFILE %ld (hard limit here %llu)\n", soft,
            (unsigned long long)rl.rlim_max);
    assert_true(rl.rlim_max == RLIM_INFINITY || soft == (long)rl.rlim_max);
    int fds0 = agent_test_fd_baseline(dpid);
    struct lat before = {0}, during = {0}, after = {0};
    for (int i = 0; i < 20; i++) {
        timed_get(dm, &before);
    }

    static int fds[IDLE_CONNS];
    static double opened[IDLE_CONNS], closed_at[IDLE_CONNS];
    double t0 = testenv_now_ms();
    for (int i = 0; i < IDLE_CONNS; i++) {
        fds[i] = connect_nb(dm->port);
        opened[i] = testenv_now_ms();
        closed_at[i] = 0;
        if (i % 2 == 1) {
            static const char half[] = "GET /proc"; /* half a request line, never finished */
            assert_int_equal(write(fds[i], half, sizeof(half) - 1), (ssize_t)(sizeof(half) - 1));
        }
        if (i % 50 == 49) {
            timed_get(dm, &during);
        }
    }
    double open_ms = testenv_now_ms() - t0;
    int fds_peak = testenv_fd_count(dpid);
    /* Wait for every close, answering normal requests meanwhile. */
    int left = IDLE_CONNS;
    static struct pollfd pfd[IDLE_CONNS];
    double deadline = t0 + testenv_timeout((HEADER_TIMEOUT_S + 10) * 1000);
    double next_get = testenv_now_ms();
    while (left > 0 && testenv_now_ms() < deadline) {
        int np = 0;
        for (int i = 0; i < IDLE_CONNS; i++) {
            if (closed_at[i] == 0) {
                pfd[np].fd = fds[i];
                pfd[np].events = POLLIN;
                pfd[np].revents = 0;
                np++;
            }
        }
        int pr = poll(pfd, (nfds_t)np, 20);
        double now = testenv_now_ms();
        for (int k = 0; pr > 0 && k < np; k++) {
            if (pfd[k].revents == 0) {
                continue;
            }
            char buf[4096];
            ssize_t r;
            while ((r = read(pfd[k].fd, buf, sizeof(buf))) > 0) {
            }
            if (r == 0 || (r < 0 && errno != EAGAIN)) {
                for (int i = 0; i < IDLE_CONNS; i++) {
                    if (fds[i] == pfd[k].fd) {
                        closed_at[i] = now;
                        close(fds[i]);
                        left--;
                        break;
                    }
                }
            }
        }
        if (now >= next_get) {
            timed_get(dm, &during);
            next_get = now + 50;
        }
    }
    /* Connections accepted while fewer than 3/4 of the limit (1024) were open get the header
     * timeout; later ones, under pressure, 2 s (Timeouts:HttpPressureHeadMs). */
    double min_s = 1e9, min_early_s = 1e9, max_s = 0, sum_s = 0;
    int pressured = 0;
    for (int i = 0; i < IDLE_CONNS; i++) {
        if (closed_at[i] == 0) {
            close(fds[i]);
            continue;
        }
        double s = (closed_at[i] - opened[i]) / 1000.0;
        if (i < EARLY_CONNS) {
            min_early_s = s < min_early_s ? s : min_early_s;
        }
        pressured += s < HEADER_TIMEOUT_S - 0.5;
        min_s = s < min_s ? s : min_s;
        max_s = s > max_s ? s : max_s;
        sum_s += s;
    }
    for (int i = 0; i < 20; i++) {
        timed_get(dm, &after);
    }
    int fds1 = agent_test_wait_fds(dpid, fds0, 5000);
    fprintf(stderr,
            "%d idle connections opened in %.0f ms; %d closed by the server, after %.2f .. %.2f s "
            "(mean %.2f s; header timeout %d s; %d closed early, under pressure, the first %d "
            "after %.2f s at least)\n",
            IDLE_CONNS, open_ms, IDLE_CONNS - left, min_s, max_s,
            (IDLE_CONNS - left) ? sum_s / (IDLE_CONNS - left) : 0, HEADER_TIMEOUT_S, pressured,
            EARLY_CONNS, min_early_s);
    fprintf(stderr,
            "GET /processes: before max %.1f ms (mean %.2f), during the flood %u requests max %.1f "
            "ms (mean %.2f), after max %.1f ms; dotmon fds %d -> peak %d -> %d\n",
            before.max_ms, before.sum_ms / before.n, during.n, during.max_ms,
            during.n ? during.sum_ms / during.n : 0, after.max_ms, fds0, fds_peak, fds1);
    assert_int_equal(left, 0);
    assert_true(min_early_s >= HEADER_TIMEOUT_S - 0.1);
    assert_true(min_s >= PRESSURE_HEAD_S - 0.1);
    assert_true(pressured >= IDLE_CONNS - 768 - 10); /* those opened past 3/4 of the limit */
    assert_true(max_s <= (HEADER_TIMEOUT_S + testenv_timeout(3000) / 1000.0));
    assert_true(during.n >= 20);
    assert_true(during.max_ms < testenv_timeout(500));
    assert_true(fds_peak >= fds0 + IDLE_CONNS / 2);
    assert_true(fds1 <= fds0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 3. the connection limit -------------------------------------------------------------------
 */

#define LIMIT_N 16
#define BUSY_N  3 /* RequestLimits:Trace:MaxConcurrency's default */

/* True once the server has closed fd (EOF or reset), waiting up to ms. */
static bool closed_by_server(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, ms) <= 0) {
        return false;
    }
    char b;
    return recv(fd, &b, 1, MSG_DONTWAIT) <= 0;
}

/* A trace download whose response has begun; the socket is returned open (the handler owns the
 * request until it is closed). */
static int open_trace(uint16_t port, pid_t pid)
{
    int fd = testenv_connect_port(port);
    assert_true(fd >= 0);
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "GET /trace?pid=%d&profile=Cpu&durationSeconds=-1 HTTP/1.1\r\nHost: x\r\n\r\n",
                     (int)pid);
    assert_int_equal(write(fd, req, (size_t)n), n);
    char head[16] = "";
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, testenv_timeout(10000)), 1);
    assert_true(read(fd, head, sizeof(head) - 1) > 12);
    assert_memory_equal(head, "HTTP/1.1 200", 12);
    return fd;
}

static void test_load_connection_limit(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_S);
    const char *const args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    char lim[80];
    snprintf(lim, sizeof(lim), "DotnetMonitor_Kestrel__Limits__MaxConcurrentConnections=%d",
             LIMIT_N);
    assert_int_equal(testenv_start_dotmon(env, args, dotmon_env(lim, NULL), &dm), 0);

    /* (a) Every slot idle (keep-alive after a request): connection N+1 is served, and the one
     * that has waited longest without a request is closed to make room. */
    struct httpc held[LIMIT_N];
    struct httpc_resp r;
    for (int i = 0; i < LIMIT_N; i++) {
        httpc_init(&held[i], "127.0.0.1", dm->port, testenv_timeout(10000));
        assert_int_equal(httpc_request(&held[i], "GET", "/processes", NULL, NULL, 0, &r), 0);
        assert_int_equal(r.status, 200);
        assert_true(r.keep_alive);
        httpc_resp_fini(&r);
        testenv_sleep_ms(5); /* a clear order of age */
    }
    double t0 = testenv_now_ms();
    assert_int_equal(httpc_get(dm->port, "/processes", NULL, testenv_timeout(5000), &r), 0);
    double ms = testenv_now_ms() - t0;
    fprintf(stderr, "connection %d with %d idle ones: %d in %.1f ms\n", LIMIT_N + 1, LIMIT_N,
            r.status, ms);
    assert_int_equal(r.status, 200);
    httpc_resp_fini(&r);
    assert_true(closed_by_server(held[0].fd, testenv_timeout(2000)));
    for (int i = 1; i < LIMIT_N; i++) {
        assert_false(closed_by_server(held[i].fd, 0));
    }
    for (int i = 0; i < LIMIT_N; i++) {
        httpc_fini(&held[i]);
    }
    agent_test_stop_dotmon_clean(dm);

    /* (b) Every slot serving a request (trace downloads): nothing can be evicted, so connection
     * N+1 gets 503 problem+json with Retry-After and is closed. */
    struct test_app *app = agent_test_start_app(env);
    snprintf(lim, sizeof(lim), "DotnetMonitor_Kestrel__Limits__MaxConcurrentConnections=%d",
             BUSY_N);
    assert_int_equal(testenv_start_dotmon(env, args, dotmon_env(lim, NULL), &dm), 0);
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 15000));
    int busy[BUSY_N];
    for (int i = 0; i < BUSY_N; i++) {
        busy[i] = open_trace(dm->port, app->pid);
    }
    static const char req[] = "GET /processes HTTP/1.1\r\nHost: x\r\n\r\n";
    struct buf out;
    buf_init(&out, 0);
    t0 = testenv_now_ms();
    int rc = httpc_raw(dm->port, req, sizeof(req) - 1, false, testenv_timeout(5000), &out);
    ms = testenv_now_ms() - t0;
    assert_int_equal(rc, 0); /* the server closed it */
    assert_int_equal(httpc_parse(buf_data(&out), buf_size(&out), NULL, &r, NULL), 0);
    const char *ra = httpc_header(&r, "Retry-After");
    const char *cn = httpc_header(&r, "Connection");
    fprintf(stderr,
            "connection %d with %d busy ones: %d in %.1f ms, Retry-After %s, Connection "
            "%s: %s\n",
            BUSY_N + 1, BUSY_N, r.status, ms, ra ? ra : "(none)", cn ? cn : "(none)", r.body);
    agent_test_assert_problem(&r, 503);
    assert_non_null(strstr(r.body, "connection limit"));
    assert_non_null(httpc_header(&r, "Retry-After"));
    assert_false(r.keep_alive);
    httpc_resp_fini(&r);
    buf_fini(&out);
    /* The downloads were not disturbed; once they end, new connections are served again. */
    for (int i = 0; i < BUSY_N; i++) {
        assert_false(closed_by_server(busy[i], 0));
        close(busy[i]);
    }
    double end = testenv_now_ms() + testenv_timeout(5000);
    for (;;) {
        rc = httpc_get(dm->port, "/processes", NULL, testenv_timeout(5000), &r);
        int status = r.status;
        httpc_resp_fini(&r);
        if (rc == 0 && status == 200) {
            break;
        }
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(20);
    }
    agent_test_wait_no_running_traces(dm);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 4. 200 aborted trace downloads (80 under ASan) ------------------------------------------ */

struct abandon_arg {
    uint16_t port;
    char target[128];
    size_t bytes;
    int status;
    size_t got;
    pthread_t th;
};

static void *abandon_main(void *p)
{
    struct abandon_arg *a = p;
    /* No cmocka asserts on this thread: agent_test_abandon_trace asserts only on connect/write,
     * which loopback does not fail. */
    a->got = agent_test_abandon_trace(a->port, NULL, a->target, a->bytes, 3000, &a->status);
    return NULL;
}

static void test_load_aborted_traces(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_S);
    struct test_app *app = agent_test_start_app(env);
    const char *const args[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(
        testenv_start_dotmon(env, args,
                             dotmon_env("DotnetMonitor_RequestLimits__Trace__MaxConcurrency=16",
                                        "DotnetMonitor_Operations__MaxHistory=1000"),
                             &dm),
        0);
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 10000));
    pid_t dpid = proc_pid(dm->proc);
    char target[128];
    snprintf(target, sizeof(target), "/trace?pid=%d&profile=Cpu&durationSeconds=300",
             (int)app->pid);

    /* Warm up (first relay, allocator arenas), then the baselines. */
    (void)agent_test_abandon_trace(dm->port, NULL, target, 8192, 3000, NULL);
    agent_test_wait_no_running_traces(dm);
    testenv_sleep_ms(300);
    int fds0 = agent_test_fd_baseline(dpid);
    long rss0 = testenv_rss_kb(dpid);

    srand(4242);
    unsigned ok = 0, refused = 0, other = 0;
    double t0 = testenv_now_ms();
    for (int i = 0; i < ABANDON_SEQ; i++) { /* sequential: read 2..16 KB, hang up */
        int status = 0;
        size_t bytes = 2048 + (size_t)(rand() % 14336);
        (void)agent_test_abandon_trace(dm->port, NULL, target, bytes, 3000, &status);
        ok += status == 200;
        refused += status == 429;
        other += status != 200 && status != 429;
    }
    double seq_ms = testenv_now_ms() - t0;
    agent_test_wait_no_running_traces(dm);
    t0 = testenv_now_ms();
    static struct abandon_arg batch[12];
    for (int round = 0; round < ABANDON_ROUNDS; round++) { /* 12 (the last round 4) at once */
        int k = round < ABANDON_ROUNDS - 1 ? 12 : 4;
        for (int j = 0; j < k; j++) {
            batch[j].port = dm->port;
            snprintf(batch[j].target, sizeof(batch[j].target), "%s", target);
            batch[j].bytes = 2048 + (size_t)(rand() % 14336);
            batch[j].status = 0;
            assert_int_equal(pthread_create(&batch[j].th, NULL, abandon_main, &batch[j]), 0);
        }
        for (int j = 0; j < k; j++) {
            pthread_join(batch[j].th, NULL);
            ok += batch[j].status == 200;
            refused += batch[j].status == 429;
            other += batch[j].status != 200 && batch[j].status != 429;
        }
    }
    double conc_ms = testenv_now_ms() - t0;
    agent_test_wait_no_running_traces(dm);
    testenv_sleep_ms(500);
    int fds1 = agent_test_wait_fds(dpid, fds0, 15000);
    long rss1 = testenv_rss_kb(dpid);
    fprintf(stderr,
            "%d abandoned traces (%d sequential in %.1f s, %d 12-at-once in %.1f s): %u started "
            "(%d), %u refused (429), %u other; fds %d -> %d, RSS %ld -> %ld KiB\n",
            ABANDON_ALL, ABANDON_SEQ, seq_ms / 1000, ABANDON_ALL - ABANDON_SEQ, conc_ms / 1000, ok,
            ABANDON_ALL, refused, other, fds0, fds1, rss0, rss1);
    assert_int_equal(other, 0);
    assert_true(ok >= ABANDON_ALL * 3 / 4);
    assert_int_equal(fds1, fds0);
#if !defined(__SANITIZE_ADDRESS__)
    assert_true(rss1 <= rss0 + 2048);
#endif

    /* Every started trace ended Cancelled. */
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    unsigned cancelled = 0, listed = (unsigned)cJSON_GetArraySize(ops);
    cJSON *o;
    cJSON_ArrayForEach(o, ops)
    {
        const char *s = agent_test_str(o, "status");
        if (strcmp(s, "Cancelled") != 0) {
            fprintf(stderr, "operation %s: %s\n", agent_test_str(o, "operationId"), s);
        }
        cancelled += strcmp(s, "Cancelled") == 0;
    }
    cJSON_Delete(ops);
    fprintf(stderr, "operations: %u listed, %u Cancelled\n", listed, cancelled);
    assert_int_equal(cancelled, listed);
    assert_true(listed >= ok);

    /* The runtime still accepts a session: a short trace is complete. */
    struct httpc_resp r;
    char short_t[128];
    snprintf(short_t, sizeof(short_t), "/trace?pid=%d&profile=Cpu&durationSeconds=2",
             (int)app->pid);
    int rc = httpc_get(dm->port, short_t, NULL, testenv_timeout(60000), &r);
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_feed(&ck, (const uint8_t *)r.body, r.body_len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    uint64_t samples = nettrace_count(&ck, "Microsoft-DotNETCore-SampleProfiler", 0);
    fprintf(stderr, "final trace: %zu bytes, verdict %s, %llu sample events\n", r.body_len,
            nettrace_verdict_name(v), (unsigned long long)samples);
    nettrace_checker_fini(&ck);
    httpc_resp_fini(&r);
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_true(samples > 0);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    /* ctest runs the aborted traces (RSS and descriptors, no latency bound) apart from the rest,
     * which runs alone (tests/agent/CMakeLists.txt): TEST_FILTER runs the cases whose names match
     * it, TEST_SKIP the others. */
    if (getenv("TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    }
    if (getenv("TEST_SKIP") != NULL) {
        cmocka_set_skip_filter(getenv("TEST_SKIP"));
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_connection_limit, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_idle_flood, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_aborted_traces, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_load_wrk_processes, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
