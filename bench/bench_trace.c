/* SPDX-License-Identifier: MIT */
/*
 * Relay benchmark (issue 3): a synthetic runtime (trace_producer) streams a valid nettrace of
 * N bytes as fast as its socket drains. The same stream is read
 *   (a) through a raw Unix-socket-to-TCP copy (socat), the ceiling, and
 *   (b) through dotmon's GET /trace (chunked HTTP, nettrace checker, backpressure),
 * by the same reader, in the same run. Reports throughput of each, their ratio (target ≥ 0.8),
 * and dotmon's RSS growth during the relay (target < 8 MB for 2 GB).
 * Usage: bench_trace [bytes]   env: DOTMON_BIN, TRACE_PRODUCER (see `make bench`)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "proc.h"
#include "testenv.h"

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        perror("free_port");
        exit(1);
    }
    close(fd);
    return ntohs(sa.sin_port);
}

static int connect_port(uint16_t port)
{
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa;
        memset(&sa, 0, sizeof(sa));
        sa.sin_family = AF_INET;
        sa.sin_port = htons(port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            return fd;
        }
        close(fd);
        testenv_sleep_ms(20);
    }
    fprintf(stderr, "cannot connect to port %u\n", port);
    exit(1);
}

/* Sends req, reads to EOF; returns bytes read and the elapsed ms from the first byte sent. */
static uint64_t read_all(int fd, const void *req, size_t len, double *ms)
{
    static char buf[256 * 1024];
    double t0 = testenv_now_ms();
    if (write(fd, req, len) != (ssize_t)len) {
        perror("write");
        exit(1);
    }
    uint64_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        total += (uint64_t)n;
    }
    *ms = testenv_now_ms() - t0;
    close(fd);
    return total;
}

struct rss_sampler {
    pid_t pid;
    volatile int stop;
    long peak_kb;
    pthread_t th;
};

static void *sample_rss(void *arg)
{
    struct rss_sampler *s = arg;
    while (!s->stop) {
        long kb = testenv_rss_kb(s->pid);
        if (kb > s->peak_kb) {
            s->peak_kb = kb;
        }
        testenv_sleep_ms(20);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *bytes_arg = argc > 1 ? argv[1] : "2G";
    const char *producer = getenv("TRACE_PRODUCER");
    struct testenv env;
    if (testenv_init(&env) != 0 || env.dotmon_bin == NULL || producer == NULL) {
        fprintf(stderr, "set DOTMON_BIN and TRACE_PRODUCER (make bench does)\n");
        return 1;
    }
    testenv_watchdog(900);

    const char *pargv[] = {producer, "--dir", env.dir, "--bytes", bytes_arg, NULL};
    struct proc_opts po = {.argv = pargv, .label = "producer", .stdin_null = true};
    struct proc *prod = NULL;
    char *ready = NULL;
    if (proc_spawn(&po, &prod) != 0 || proc_wait_line(prod, PROC_STDOUT, "ready pid=", 10000, &ready) != 0) {
        fprintf(stderr, "producer did not start\n");
        return 1;
    }
    int ppid = atoi(ready + strlen("ready pid="));
    const char *sock = strstr(ready, "socket=");
    char sockpath[256];
    snprintf(sockpath, sizeof(sockpath), "%s", sock ? sock + 7 : "");

    /* (a) socat: TCP → the producer's socket; we speak IPC through it. */
    uint16_t sport = free_port();
    char listen_arg[64], connect_arg[320];
    snprintf(listen_arg, sizeof(listen_arg), "TCP-LISTEN:%u,bind=127.0.0.1,reuseaddr", sport);
    snprintf(connect_arg, sizeof(connect_arg), "UNIX-CONNECT:%s", sockpath);
    const char *sargv[] = {"socat", "-b", "262144", listen_arg, connect_arg, NULL};
    struct proc_opts so = {.argv = sargv, .label = "socat", .stdin_null = true};
    struct proc *socat = NULL;
    if (proc_spawn(&so, &socat) != 0) {
        fprintf(stderr, "socat is missing (apt-get install socat)\n");
        return 1;
    }
    struct ipc_provider prov = {.name = "Dotmon-Bench", .keywords = 1, .level = 5};
    struct ipc_collect_config cfg = {.buffer_mb = 256, .format = 1, .providers = &prov,
                                     .provider_count = 1};
    uint8_t msg[512];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    if (ipc_cmd_collect_tracing(&w, 2, &cfg) != 0) {
        return 1;
    }
    double socat_ms = 0;
    uint64_t socat_bytes = read_all(connect_port(sport), msg, w.len, &socat_ms);
    socat_bytes = socat_bytes > 28 ? socat_bytes - 28 : 0; /* the IPC reply is not trace data */
    int st;
    proc_kill(socat, 1000, &st);
    proc_free(socat);

    /* (b) dotmon. */
    const char *dargs[] = {"--no-auth", NULL};
    struct dotmon *dm = NULL;
    if (testenv_start_dotmon(&env, dargs, NULL, &dm) != 0) {
        return 1;
    }
    for (int i = 0; i < 200; i++) { /* wait until discovery lists the producer */
        struct httpc_resp r;
        int rc = testenv_dotmon_get(dm, "/processes", &r);
        bool listed = rc == 0 && r.body && strstr(r.body, "\"pid\"") != NULL;
        httpc_resp_fini(&r);
        if (listed) {
            break;
        }
        testenv_sleep_ms(25);
    }
    pid_t dpid = proc_pid(dm->proc);
    long rss_before = testenv_rss_kb(dpid);
    struct rss_sampler rs = {.pid = dpid, .peak_kb = rss_before};
    pthread_create(&rs.th, NULL, sample_rss, &rs);
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "GET /trace?pid=%d&durationSeconds=-1&profile=gc-verbose HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
                     ppid);
    double dm_ms = 0;
    uint64_t dm_bytes = read_all(connect_port(dm->port), req, (size_t)n, &dm_ms);
    rs.stop = 1;
    pthread_join(rs.th, NULL);

    struct httpc_resp r;
    char verdict[64] = "?";
    if (testenv_dotmon_get(dm, "/operations", &r) == 0 && r.body) {
        const char *v = strstr(r.body, "\"status\":\"");
        if (v) {
            snprintf(verdict, sizeof(verdict), "%.*s", (int)strcspn(v + 10, "\""), v + 10);
        }
    }
    httpc_resp_fini(&r);

    double socat_mbs = (double)socat_bytes / 1048576.0 / (socat_ms / 1000.0);
    double dm_mbs = (double)dm_bytes / 1048576.0 / (dm_ms / 1000.0);
    printf("| metric | dotmon /trace | socat (ceiling) | ratio | target |\n|---|---|---|---|---|\n");
    printf("| throughput, %s stream (MiB/s) | %.0f | %.0f | %.2f | ≥ 0.80 |\n", bytes_arg, dm_mbs,
           socat_mbs, dm_mbs / socat_mbs);
    printf("| bytes received | %llu (HTTP, chunked) | %llu | | |\n", (unsigned long long)dm_bytes,
           (unsigned long long)socat_bytes);
    printf("| dotmon RSS before → peak during relay (KiB) | %ld → %ld (+%ld) | | | < 8192 KiB growth |\n",
           rss_before, rs.peak_kb, rs.peak_kb - rss_before);
    printf("| operation status | %s | | | Succeeded |\n", verdict);
    testenv_stop_dotmon(dm, 5000, &st);
    proc_kill(prod, 1000, &st);
    proc_free(prod);
    free(ready);
    testenv_fini(&env);
    return 0;
}
