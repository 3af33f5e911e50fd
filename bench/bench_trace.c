/* SPDX-License-Identifier: MIT */
/*
 * Relay benchmark (issue 3): a synthetic runtime (trace_producer) streams a valid nettrace of
 * N bytes as fast as its socket drains. The same stream is read
 *   (a) through a raw Unix-socket-to-TCP copy (socat), the ceiling, and
 *   (b) through dotmon's GET /trace (chunked HTTP, nettrace checker, backpressure),
 * by the same reader, in the same run, alternating: socat, dotmon, socat, dotmon, ... so that other
 * load on the machine hits both. Every pair is one row (no best-of-N: a slow mode would hide
 * behind it): both throughputs, their ratio, dotmon's CPU per GiB for that relay alone and its
 * RSS. Even runs relay through a freshly started dotmon (its first relay: what a user sees), odd
 * runs through one long-lived dotmon (after one uncounted warm-up relay). Then median, min and
 * max of all, fresh and reused runs, and how many runs meet both targets (ratio ≥ 0.90 and
 * ≤ 500 ms of dotmon CPU per GiB, issue 30), the long-lived dotmon's RSS growth over its relays
 * (target < 8 MB for 2 GB) and the operations' verdicts. Markdown on stdout, progress on stderr,
 * with, per relay, the reader's reads and its waits and preemptions (getrusage) per GiB: counts
 * that other load distorts less than throughput does.
 * Usage: bench_trace [--pinned] [bytes [runs]]   (defaults 2G 10)   env: DOTMON_BIN, TRACE_PRODUCER
 * --pinned fixes where each process runs, the same for both relays: the producer on CPU 0, the
 * relay (socat or dotmon, every thread) and this reader on CPU 1. Unpinned, dotmon and socat cost
 * the same CPU per byte, and on 2 cores with three busy processes the scheduler's placement decides
 * each run's throughput (a relay sharing a CPU with the reader runs at 0.6-0.7x one that does not);
 * pinned, the relay always shares CPU 1 with the reader, so its throughput follows its own cost.
 *        bench_trace --mechanisms [bytes [runs]]   (defaults 2G 5)   env: TRACE_PRODUCER
 * The second form measures the ways of moving the bytes without dotmon (see mech_main below).
 */
#define _GNU_SOURCE /* splice, tee, pipe2, F_SETPIPE_SZ, RUSAGE_THREAD */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "httpc.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "nettrace.h"
#include "proc.h"
#include "testenv.h"

#define MAX_RUNS      64
#define TARGET_RATIO  0.90
#define TARGET_CPU_MS 500.0

/* utime + stime of pid in ms. */
static double cpu_ms(pid_t pid)
{
    char path[64], line[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        if (f) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    char *p = strrchr(line, ')');
    if (p == NULL) {
        return 0;
    }
    /* utime and stime are fields 14 and 15; field 3 (state) follows ") ". */
    int field = 3;
    for (p = p + 2; *p && field < 14; p++) {
        if (*p == ' ') {
            field++;
        }
    }
    unsigned long ut = strtoul(p, &p, 10);
    unsigned long st = strtoul(p, NULL, 10);
    return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static int connect_port(uint16_t port)
{
    int fd = testenv_connect_port(port);
    if (fd < 0) {
        fprintf(stderr, "cannot connect to port %u\n", port);
        exit(1);
    }
    return fd;
}

/* The last read_to_eof's count of reads that returned bytes (how often the reader woke). */
static uint64_t last_reads;

/* Reads fd to EOF into buf (the bytes are dropped); how many there were. */
static uint64_t read_to_eof(int fd, void *buf, size_t cap)
{
    uint64_t total = 0;
    last_reads = 0;
    for (;;) {
        ssize_t n = read(fd, buf, cap);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return total;
        }
        total += (uint64_t)n;
        last_reads++;
    }
}

/* The reader's context switches during the last read_all: voluntary (it waited for bytes) and
 * involuntary (the relay took the CPU from it). */
static long last_vcsw, last_ivcsw;

/* Sends req, reads to EOF; returns bytes read and the elapsed ms from the first byte sent. */
static uint64_t read_all(int fd, const void *req, size_t len, double *ms)
{
    static char buf[256 * 1024];
    struct rusage ru0, ru1;
    getrusage(RUSAGE_THREAD, &ru0);
    double t0 = testenv_now_ms();
    if (write(fd, req, len) != (ssize_t)len) {
        perror("write");
        exit(1);
    }
    uint64_t total = read_to_eof(fd, buf, sizeof(buf));
    *ms = testenv_now_ms() - t0;
    getrusage(RUSAGE_THREAD, &ru1);
    last_vcsw = ru1.ru_nvcsw - ru0.ru_nvcsw;
    last_ivcsw = ru1.ru_nivcsw - ru0.ru_nivcsw;
    close(fd);
    return total;
}

struct rss_sampler {
    _Atomic pid_t pid; /* the dotmon being sampled, 0 for none */
    _Atomic long peak_kb;
    atomic_int stop;
    pthread_t th;
};

static void *sample_rss(void *arg)
{
    struct rss_sampler *s = arg;
    while (!atomic_load(&s->stop)) {
        pid_t pid = atomic_load(&s->pid);
        long kb = pid > 0 ? testenv_rss_kb(pid) : 0;
        if (kb > atomic_load(&s->peak_kb)) {
            atomic_store(&s->peak_kb, kb);
        }
        testenv_sleep_ms(20);
    }
    return NULL;
}

/* One dotmon process: started by this bench (not through testenv, which keeps at most a few). */
struct relay_dm {
    struct proc *proc;
    pid_t pid;
    uint16_t port;
    int relays; /* relays done by this process so far */
};

/* --pinned: the CPU a relay's threads run on (-1: wherever the scheduler puts them). */
static int relay_cpu = -1;
static int reader_cpu = -1;

/* Pins every thread of pid (listed in /proc/<pid>/task) to cpu; exits if the kernel refuses. */
static void pin_all(pid_t pid, int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/task", (long)pid);
    DIR *d = opendir(path);
    if (d == NULL) {
        fprintf(stderr, "cannot list %s\n", path);
        exit(1);
    }
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char *end = NULL;
        long tid = strtol(e->d_name, &end, 10);
        if (tid > 0 && *end == '\0' && sched_setaffinity((pid_t)tid, sizeof(set), &set) != 0 &&
            errno != ESRCH) {
            fprintf(stderr, "cannot pin thread %ld to CPU %d: %s\n", tid, cpu, strerror(errno));
            exit(1);
        }
    }
    closedir(d);
}

/* Starts dotmon on a free port watching dir and waits until /processes lists the producer. */
static void dm_start(const char *bin, const char *dir, struct relay_dm *dm)
{
    dm->port = testenv_free_port();
    dm->relays = 0;
    char url[64], tmpdir[320];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", dm->port);
    snprintf(tmpdir, sizeof(tmpdir), "TMPDIR=%s", dir);
    const char *argv[] = {bin, "collect", "--no-auth", "--metrics", "false", "--urls", url, NULL};
    const char *envv[] = {tmpdir, NULL};
    struct proc_opts o = {.argv = argv, .env = envv, .label = "dotmon", .stdin_null = true};
    if (proc_spawn(&o, &dm->proc) != 0) {
        fprintf(stderr, "cannot start dotmon\n");
        exit(1);
    }
    dm->pid = proc_pid(dm->proc);
    for (int i = 0; i < 400; i++) { /* up to 10 s: listening, then discovery lists the producer */
        struct httpc_resp r;
        int rc = httpc_get(dm->port, "/processes", NULL, 1000, &r);
        bool listed = rc == 0 && r.body && strstr(r.body, "\"pid\"") != NULL;
        httpc_resp_fini(&r);
        if (listed) {
            if (relay_cpu >= 0) {
                pin_all(dm->pid, relay_cpu); /* after start-up: its threads exist by now */
            }
            return;
        }
        testenv_sleep_ms(25);
    }
    fprintf(stderr, "dotmon did not list the producer within 10 s\n");
    exit(1);
}

/* How many of dotmon's operations ended Succeeded. */
static int dm_succeeded(const struct relay_dm *dm)
{
    struct httpc_resp r;
    int n = 0;
    if (httpc_get(dm->port, "/operations", NULL, 5000, &r) == 0 && r.body) {
        for (const char *p = r.body; (p = strstr(p, "\"status\":\"Succeeded\"")) != NULL; p++) {
            n++;
        }
    }
    httpc_resp_fini(&r);
    return n;
}

static void dm_stop(struct relay_dm *dm)
{
    int st;
    proc_kill(dm->proc, 5000, &st);
    proc_free(dm->proc);
    dm->proc = NULL;
}

/* One relay through dotmon's GET /trace. */
struct relay {
    double mbs;
    double cpu_per_gib;
    uint64_t bytes;
    long rss_before, rss_peak;
};

static void dm_relay(struct relay_dm *dm, const char *req, size_t req_len, struct rss_sampler *rs,
                     struct relay *out)
{
    out->rss_before = testenv_rss_kb(dm->pid);
    atomic_store(&rs->peak_kb, out->rss_before);
    atomic_store(&rs->pid, dm->pid);
    double cpu0 = cpu_ms(dm->pid);
    double ms = 0;
    out->bytes = read_all(connect_port(dm->port), req, req_len, &ms);
    double cpu = cpu_ms(dm->pid) - cpu0;
    atomic_store(&rs->pid, 0);
    long now = testenv_rss_kb(dm->pid);
    out->rss_peak = atomic_load(&rs->peak_kb) > now ? atomic_load(&rs->peak_kb) : now;
    out->mbs = (double)out->bytes / 1048576.0 / (ms / 1000.0);
    out->cpu_per_gib = out->bytes ? cpu / ((double)out->bytes / 1073741824.0) : 0;
    dm->relays++;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, min and max of the n values at v[0], v[stride], ... (n ≥ 1). */
static void stats(const double *v, size_t n, size_t stride, double *med, double *lo, double *hi)
{
    double s[MAX_RUNS];
    for (size_t i = 0; i < n; i++) {
        s[i] = v[i * stride];
    }
    qsort(s, n, sizeof(s[0]), cmp_double);
    *med = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    *lo = s[0];
    *hi = s[n - 1];
}

/* Per run: dotmon MiB/s, socat MiB/s, ratio, CPU ms/GiB. */
enum { COL_DM, COL_SOCAT, COL_RATIO, COL_CPU, NCOLS };

static bool meets(const double *row)
{
    return row[COL_RATIO] >= TARGET_RATIO && row[COL_CPU] <= TARGET_CPU_MS;
}

/* The summary rows of one group of runs (fresh, reused or all). */
static void print_summary(const char *label, double (*rows)[NCOLS], const bool *fresh, size_t n,
                          int which /* 1 fresh, 0 reused, -1 all */)
{
    double sel[MAX_RUNS][NCOLS];
    size_t k = 0, ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (which < 0 || (int)fresh[i] == which) {
            memcpy(sel[k++], rows[i], sizeof(sel[0]));
            ok += meets(rows[i]);
        }
    }
    if (k == 0) {
        return;
    }
    printf("| %s (%zu) |", label, k);
    for (int c = 0; c < NCOLS; c++) {
        double med, lo, hi;
        stats(&sel[0][c], k, NCOLS, &med, &lo, &hi);
        if (c == COL_RATIO) {
            printf(" %.2f (%.2f-%.2f) |", med, lo, hi);
        } else {
            printf(" %.0f (%.0f-%.0f) |", med, lo, hi);
        }
    }
    printf(" %zu of %zu |\n", ok, k);
}

/* The CollectTracing2 request of every relay (one bench provider, verbose) into msg; its length. */
static size_t collect_msg(uint8_t *msg, size_t cap)
{
    struct ipc_provider prov = {.name = "Dotmon-Bench", .keywords = 1, .level = 5};
    struct ipc_collect_config cfg = {
        .buffer_mb = 256, .format = 1, .providers = &prov, .provider_count = 1};
    struct ipc_wr w;
    ipc_wr_init(&w, msg, cap);
    if (ipc_cmd_collect_tracing(&w, 2, &cfg) != 0) {
        exit(1);
    }
    return w.len;
}

/* Starts trace_producer streaming `bytes` per session in dir; its pid, and its socket's path in
 * sock. Exits when it does not start. *ready is the line it printed (the caller frees it). */
static long producer_start(const char *bin, const char *dir, const char *bytes, struct proc **prod,
                           char **ready, char *sock, size_t sock_cap)
{
    const char *pargv[] = {bin, "--dir", dir, "--bytes", bytes, NULL};
    struct proc_opts po = {.argv = pargv, .label = "producer", .stdin_null = true};
    if (proc_spawn(&po, prod) != 0 ||
        proc_wait_line(*prod, PROC_STDOUT, "ready pid=", 10000, ready) != 0) {
        fprintf(stderr, "producer did not start\n");
        exit(1);
    }
    const char *s = strstr(*ready, "socket=");
    snprintf(sock, sock_cap, "%s", s ? s + 7 : "");
    return strtol(*ready + strlen("ready pid="), NULL, 10);
}

/*
 * --mechanisms (issue 30 item 1): how much CPU each way of moving the runtime's bytes to a TCP
 * client costs, without dotmon around it. This process connects to trace_producer itself, starts a
 * session and relays the stream, with the HTTP chunk framing, to a reader thread over loopback TCP,
 * blocking, in one of three ways:
 *   copy         read(2) into a 256 KiB buffer, the nettrace checker over it, writev(2) to TCP:
 *                dotmon's relay (two copies in the kernel, as socat makes);
 *   splice+tee   splice(2) socket → pipe A, tee(2) A → pipe B, read(2) of B into a 64 KiB buffer
 *                for the checker, splice A → TCP (SPLICE_F_MORE, chunk headers sent MSG_MORE);
 *   splice only  the same without tee and checker: the floor of splicing, which dotmon cannot use
 *                (the checker must see every byte).
 * Pipes get F_SETPIPE_SZ up to 1 MiB (within /proc/sys/fs/pipe-max-size). The modes rotate within
 * each run; every relay is a row: MiB/s and the relaying thread's own CPU (getrusage
 * RUSAGE_THREAD: user and kernel) per GiB. Exits 1 when a checked relay's verdict is not complete
 * or the reader got other than what was sent.
 */
#define MECH_CHECK_BUF (64u * 1024u)
#define MECH_PIPE_MAX  (1024 * 1024)

enum mech { MECH_COPY, MECH_SPLICE_TEE, MECH_SPLICE_ONLY, NMECH };
static const char *const mech_name[NMECH] = {"copy (read + writev)", "splice + tee",
                                             "splice only, no checker"};

/* The reader: accepts one connection at a time and reads it to EOF. */
struct mech_sink {
    int lfd;
    pthread_t th;
    _Atomic uint64_t bytes; /* of the last connection */
    atomic_int done;        /* connections read to EOF */
};

static void *mech_sink_run(void *arg)
{
    struct mech_sink *s = arg;
    static char buf[256 * 1024];
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            return NULL; /* the listener was shut down */
        }
        uint64_t total = read_to_eof(fd, buf, sizeof(buf));
        close(fd);
        atomic_store(&s->bytes, total);
        atomic_fetch_add(&s->done, 1);
    }
}

static int send_all(int fd, const void *p, size_t n, int flags)
{
    const char *c = p;
    while (n > 0) {
        ssize_t w = send(fd, c, n, flags);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A session on the producer: the connected Unix socket, positioned at the stream's first byte. */
static int mech_session(const char *sockpath, const uint8_t *msg, size_t len)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen = strlen(sockpath);
    if (plen >= sizeof(sa.sun_path)) {
        goto fail;
    }
    memcpy(sa.sun_path, sockpath, plen + 1);
    uint8_t reply[IPC_HEADER_SIZE + 8];
    size_t got = 0;
    struct ipc_header h;
    if (fd < 0 || connect(fd, (const struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        send_all(fd, msg, len, 0) != 0) {
        goto fail;
    }
    while (got < sizeof(reply)) {
        ssize_t n = read(fd, reply + got, sizeof(reply) - got);
        if (n <= 0) {
            goto fail;
        }
        got += (size_t)n;
    }
    if (ipc_header_decode(reply, sizeof(reply), IPC_MESSAGE_MAX, &h) != 0 ||
        h.command_set != IPC_SET_SERVER || h.command_id != IPC_SERVER_OK) {
        goto fail;
    }
    return fd;
fail:
    fprintf(stderr, "cannot start a session on %s\n", sockpath);
    exit(1);
}

/* The chunk header of n bytes into h; its length. */
static size_t chunk_head(char *h, size_t cap, size_t n)
{
    int k = snprintf(h, cap, "%zx\r\n", n);
    return k > 0 ? (size_t)k : 0;
}

/* Bytes of the stream relayed, and bytes sent to the reader (the stream and its framing). */
struct mech_count {
    uint64_t stream;
    uint64_t wire;
};

/* copy: dotmon's relay, blocking. */
static int mech_copy(int u, int t, struct nettrace_checker *ck, struct mech_count *c)
{
    static uint8_t buf[256 * 1024];
    static char crlf[] = "\r\n";
    for (;;) {
        ssize_t n = read(u, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return n < 0 ? -1 : 0;
        }
        nettrace_feed(ck, buf, (size_t)n);
        char h[24];
        struct iovec iov[3] = {
            {h, chunk_head(h, sizeof(h), (size_t)n)}, {buf, (size_t)n}, {crlf, 2}};
        size_t want = iov[0].iov_len + (size_t)n + 2;
        if (writev(t, iov, 3) != (ssize_t)want) { /* blocking: all or an error */
            return -1;
        }
        c->stream += (uint64_t)n;
        c->wire += want;
    }
}

/* A pipe pair sized up to MECH_PIPE_MAX (the default when the kernel refuses); its size. */
static int mech_pipe(int p[2])
{
    if (pipe2(p, O_CLOEXEC) != 0) {
        return -1;
    }
    (void)fcntl(p[1], F_SETPIPE_SZ, MECH_PIPE_MAX); /* above pipe-max-size: EPERM, keep 64 KiB */
    return fcntl(p[1], F_GETPIPE_SZ);
}

/* Moves n bytes already in pipe a to t. */
static int mech_splice_out(int a, int t, size_t n)
{
    while (n > 0) {
        ssize_t w = splice(a, NULL, t, NULL, n, SPLICE_F_MOVE | SPLICE_F_MORE);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            return -1;
        }
        n -= (size_t)w;
    }
    return 0;
}

/* splice + tee (ck != NULL) or splice only (ck NULL). */
static int mech_splice(int u, int t, struct nettrace_checker *ck, struct mech_count *c)
{
    static uint8_t buf[MECH_CHECK_BUF];
    int a[2] = {-1, -1}, b[2] = {-1, -1};
    int rc = -1;
    int size = mech_pipe(a);
    if (size <= 0 || (ck != NULL && mech_pipe(b) != size)) {
        goto cleanup; /* pipe B as big as A, so that one tee takes all that A holds */
    }
    for (;;) {
        ssize_t n = splice(u, NULL, a[1], NULL, (size_t)size, SPLICE_F_MOVE);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            rc = n < 0 ? -1 : 0;
            break;
        }
        if (ck != NULL) {
            if (tee(a[0], b[1], (size_t)n, 0) != n) {
                break;
            }
            for (size_t left = (size_t)n; left > 0;) {
                ssize_t r = read(b[0], buf, left < sizeof(buf) ? left : sizeof(buf));
                if (r <= 0) {
                    goto cleanup;
                }
                nettrace_feed(ck, buf, (size_t)r);
                left -= (size_t)r;
            }
        }
        char h[24];
        size_t hl = chunk_head(h, sizeof(h), (size_t)n);
        if (send_all(t, h, hl, MSG_MORE) != 0 || mech_splice_out(a[0], t, (size_t)n) != 0 ||
            send_all(t, "\r\n", 2, 0) != 0) {
            break;
        }
        c->stream += (uint64_t)n;
        c->wire += hl + (uint64_t)n + 2;
    }
cleanup:
    for (int i = 0; i < 2; i++) {
        if (a[i] >= 0) {
            close(a[i]);
        }
        if (b[i] >= 0) {
            close(b[i]);
        }
    }
    return rc;
}

static double tv_ms(const struct timeval *tv)
{
    return (double)tv->tv_sec * 1000.0 + (double)tv->tv_usec / 1000.0;
}

/* Per relay: MiB/s, user, kernel and total CPU ms per GiB. */
enum { MCOL_MBS, MCOL_USER, MCOL_SYS, MCOL_CPU, MNCOLS };

/* One relay by mechanism m; its row. Exits on a failure. */
static void mech_relay(enum mech m, const char *sockpath, const uint8_t *msg, size_t len,
                       struct mech_sink *sink, uint16_t port, double *row)
{
    struct nettrace_checker ck;
    if (nettrace_checker_init(&ck, NULL) != 0) {
        exit(1);
    }
    int u = mech_session(sockpath, msg, len);
    int t = connect_port(port);
    int done = atomic_load(&sink->done);
    struct mech_count c = {0};
    struct rusage r0, r1;
    getrusage(RUSAGE_THREAD, &r0);
    double t0 = testenv_now_ms();
    int rc = m == MECH_COPY ? mech_copy(u, t, &ck, &c)
                            : mech_splice(u, t, m == MECH_SPLICE_TEE ? &ck : NULL, &c);
    rc = rc != 0 ? rc : send_all(t, "0\r\n\r\n", 5, 0); /* the last chunk */
    c.wire += 5;
    double ms = testenv_now_ms() - t0;
    getrusage(RUSAGE_THREAD, &r1);
    close(t);
    close(u);
    while (atomic_load(&sink->done) == done) {
        testenv_sleep_ms(1);
    }
    enum nettrace_verdict v = m == MECH_SPLICE_ONLY ? NETTRACE_COMPLETE : nettrace_finish(&ck);
    nettrace_checker_fini(&ck);
    if (rc != 0 || v != NETTRACE_COMPLETE || atomic_load(&sink->bytes) != c.wire) {
        fprintf(stderr, "%s: relay failed (rc %d, verdict %d, %llu bytes sent, %llu read)\n",
                mech_name[m], rc, (int)v, (unsigned long long)c.wire,
                (unsigned long long)atomic_load(&sink->bytes));
        exit(1);
    }
    double gib = (double)c.stream / 1073741824.0;
    row[MCOL_MBS] = (double)c.stream / 1048576.0 / (ms / 1000.0);
    row[MCOL_USER] = (tv_ms(&r1.ru_utime) - tv_ms(&r0.ru_utime)) / gib;
    row[MCOL_SYS] = (tv_ms(&r1.ru_stime) - tv_ms(&r0.ru_stime)) / gib;
    row[MCOL_CPU] = row[MCOL_USER] + row[MCOL_SYS];
}

static int mech_main(int argc, char **argv)
{
    const char *bytes_arg = argc > 1 ? argv[1] : "2G";
    long runs = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
    const char *producer = getenv("TRACE_PRODUCER");
    struct testenv env;
    if (runs < 1 || runs * NMECH > MAX_RUNS || producer == NULL || testenv_init(&env) != 0) {
        fprintf(stderr, "usage: TRACE_PRODUCER=… bench_trace --mechanisms [bytes] [runs: 1..%d]\n",
                MAX_RUNS / NMECH);
        return 1;
    }
    testenv_watchdog(120 + 60 * (unsigned)runs);
    struct proc *prod = NULL;
    char *ready = NULL;
    char sockpath[256];
    (void)producer_start(producer, env.dir, bytes_arg, &prod, &ready, sockpath, sizeof(sockpath));

    uint8_t msg[512];
    size_t msg_len = collect_msg(msg, sizeof(msg));
    struct mech_sink sink = {.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    if (sink.lfd < 0 || bind(sink.lfd, (const struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(sink.lfd, 4) != 0 || getsockname(sink.lfd, (struct sockaddr *)&sa, &sl) != 0) {
        fprintf(stderr, "cannot set up the reader\n");
        return 1;
    }
    pthread_create(&sink.th, NULL, mech_sink_run, &sink);
    uint16_t port = ntohs(sa.sin_port);

    double rows[MAX_RUNS][MNCOLS];
    printf("| run | mechanism | MiB/s | user CPU per GiB (ms) | kernel CPU per GiB (ms) | CPU per "
           "GiB (ms) |\n|---|---|---|---|---|---|\n");
    for (long i = 0; i < runs; i++) {
        for (int j = 0; j < NMECH; j++) {
            enum mech m = (enum mech)((i + j) % NMECH); /* each mechanism first in turn */
            double *row = rows[(size_t)m * (size_t)runs + (size_t)i];
            mech_relay(m, sockpath, msg, msg_len, &sink, port, row);
            printf("| %ld | %s | %.0f | %.0f | %.0f | %.0f |\n", i + 1, mech_name[m], row[MCOL_MBS],
                   row[MCOL_USER], row[MCOL_SYS], row[MCOL_CPU]);
            fflush(stdout);
        }
    }
    printf("\n| %s stream, %ld runs: median (min-max) | MiB/s | user CPU per GiB (ms) | kernel CPU "
           "per GiB (ms) | CPU per GiB (ms) |\n|---|---|---|---|---|\n",
           bytes_arg, runs);
    for (int m = 0; m < NMECH; m++) {
        printf("| %s |", mech_name[m]);
        for (int c = 0; c < MNCOLS; c++) {
            double med, lo, hi;
            stats(&rows[(size_t)m * (size_t)runs][c], (size_t)runs, MNCOLS, &med, &lo, &hi);
            printf(" %.0f (%.0f-%.0f) |", med, lo, hi);
        }
        printf("\n");
    }
    shutdown(sink.lfd, SHUT_RDWR);
    close(sink.lfd);
    pthread_join(sink.th, NULL);
    int st;
    proc_kill(prod, 1000, &st);
    proc_free(prod);
    free(ready);
    testenv_fini(&env);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--mechanisms") == 0) {
        return mech_main(argc - 1, argv + 1);
    }
    bool pinned = argc > 1 && strcmp(argv[1], "--pinned") == 0;
    if (pinned) {
        argc--;
        argv++;
        if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
            fprintf(stderr, "--pinned needs 2 CPUs\n");
            return 1;
        }
        relay_cpu = 1;
        /* the reader (this thread; threads started later inherit it): CPU 1 unless
         * BENCH_READER_CPU says 0 (then the relay has CPU 1 to itself) */
        const char *rc = getenv("BENCH_READER_CPU");
        reader_cpu = rc != NULL && strcmp(rc, "0") == 0 ? 0 : 1;
        pin_all(getpid(), reader_cpu);
    }
    const char *bytes_arg = argc > 1 ? argv[1] : "2G";
    long runs = argc > 2 ? strtol(argv[2], NULL, 10) : 10;
    const char *producer = getenv("TRACE_PRODUCER");
    struct testenv env;
    if (runs < 2 || runs > MAX_RUNS) {
        fprintf(stderr, "usage: bench_trace [bytes] [runs: 2..%d]\n", MAX_RUNS);
        return 1;
    }
    if (testenv_init(&env) != 0 || env.dotmon_bin == NULL || producer == NULL) {
        fprintf(stderr, "set DOTMON_BIN and TRACE_PRODUCER (make bench does)\n");
        return 1;
    }
    testenv_watchdog(120 + 60 * (unsigned)runs);

    struct proc *prod = NULL;
    char *ready = NULL;
    char sockpath[256];
    long ppid =
        producer_start(producer, env.dir, bytes_arg, &prod, &ready, sockpath, sizeof(sockpath));

    /* (a) socat: TCP → the producer's socket; we speak IPC through it. */
    uint16_t sport = testenv_free_port();
    char listen_arg[64], connect_arg[320];
    snprintf(listen_arg, sizeof(listen_arg), "TCP-LISTEN:%u,bind=127.0.0.1,reuseaddr,fork", sport);
    snprintf(connect_arg, sizeof(connect_arg), "UNIX-CONNECT:%s", sockpath);
    const char *sargv[] = {"socat", "-b", "262144", listen_arg, connect_arg, NULL};
    struct proc_opts so = {.argv = sargv, .label = "socat", .stdin_null = true};
    struct proc *socat = NULL;
    if (proc_spawn(&so, &socat) != 0) {
        fprintf(stderr, "socat is missing (apt-get install socat)\n");
        return 1;
    }
    if (pinned) {
        pin_all((pid_t)ppid, 0);
        pin_all(proc_pid(socat), 1); /* the child it forks per connection inherits it */
    }
    uint8_t msg[512];
    size_t msg_len = collect_msg(msg, sizeof(msg));
    char req[256];
    int n = snprintf(req, sizeof(req),
                     "GET /trace?pid=%ld&durationSeconds=-1&profile=gc-verbose HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
                     ppid);

    /* (b) dotmon: one long-lived process for the reused relays (after one warm-up relay that is
     * not counted), and a new process for each fresh relay, stopped after it. */
    struct rss_sampler rs = {0};
    pthread_create(&rs.th, NULL, sample_rss, &rs);
    struct relay_dm reused = {0};
    dm_start(env.dotmon_bin, env.dir, &reused);
    long reused_rss_before = testenv_rss_kb(reused.pid);
    long reused_rss_peak = reused_rss_before;
    struct relay warm;
    dm_relay(&reused, req, (size_t)n, &rs, &warm);
    reused_rss_peak = warm.rss_peak > reused_rss_peak ? warm.rss_peak : reused_rss_peak;
    fprintf(stderr, "warm-up relay (reused dotmon): %.0f MiB/s, %.0f ms CPU per GiB\n", warm.mbs,
            warm.cpu_per_gib);

    double rows[MAX_RUNS][NCOLS];
    bool fresh[MAX_RUNS];
    int succeeded = 0, fresh_runs = 0, short_relays = 0;
    uint64_t socat_bytes = 0, dm_bytes = 0;
    printf("| run | dotmon process | dotmon (MiB/s) | socat (MiB/s) | ratio | dotmon CPU per GiB "
           "(ms) | dotmon RSS before → peak (KiB) | both targets |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (long i = 0; i < runs; i++) {
        /* Alternate: socat, then dotmon; even runs on a fresh dotmon, odd ones on the reused. */
        double ms = 0;
        uint64_t b = read_all(connect_port(sport), msg, msg_len, &ms);
        b = b > 28 ? b - 28 : 0; /* the IPC reply is not trace data */
        socat_bytes = b;
        rows[i][COL_SOCAT] = (double)b / 1048576.0 / (ms / 1000.0);
        double gib = (double)b / 1073741824.0;
        fprintf(stderr,
                "run %ld socat:  reader %.0f reads/GiB (%.0f KiB each), %.0f waits + %.0f "
                "preemptions/GiB\n",
                i + 1, (double)last_reads / gib, (double)b / 1024.0 / (double)last_reads,
                (double)last_vcsw / gib, (double)last_ivcsw / gib);
        fresh[i] = i % 2 == 0;
        struct relay_dm fdm = {0};
        struct relay_dm *dm = &reused;
        if (fresh[i]) {
            dm_start(env.dotmon_bin, env.dir, &fdm);
            dm = &fdm;
        }
        struct relay r;
        dm_relay(dm, req, (size_t)n, &rs, &r);
        dm_bytes = r.bytes;
        gib = (double)r.bytes / 1073741824.0;
        fprintf(stderr,
                "run %ld dotmon: reader %.0f reads/GiB (%.0f KiB each), %.0f waits + %.0f "
                "preemptions/GiB\n",
                i + 1, (double)last_reads / gib, (double)r.bytes / 1024.0 / (double)last_reads,
                (double)last_vcsw / gib, (double)last_ivcsw / gib);
        short_relays += r.bytes < socat_bytes; /* the HTTP body is the stream plus chunk framing */
        if (fresh[i]) {
            succeeded += dm_succeeded(&fdm);
            fresh_runs++;
            dm_stop(&fdm);
        } else if (r.rss_peak > reused_rss_peak) {
            reused_rss_peak = r.rss_peak;
        }
        rows[i][COL_DM] = r.mbs;
        rows[i][COL_RATIO] = r.mbs / rows[i][COL_SOCAT];
        rows[i][COL_CPU] = r.cpu_per_gib;
        char what[48];
        if (fresh[i]) {
            snprintf(what, sizeof(what), "fresh (its 1st relay)");
        } else {
            snprintf(what, sizeof(what), "reused (its relay %d)", reused.relays);
        }
        printf("| %ld | %s | %.0f | %.0f | %.2f | %.0f | %ld → %ld | %s |\n", i + 1, what,
               rows[i][COL_DM], rows[i][COL_SOCAT], rows[i][COL_RATIO], rows[i][COL_CPU],
               r.rss_before, r.rss_peak, meets(rows[i]) ? "yes" : "**no**");
        fflush(stdout);
    }
    atomic_store(&rs.stop, 1);
    pthread_join(rs.th, NULL);
    succeeded += dm_succeeded(&reused);
    int st;
    proc_kill(socat, 1000, &st);
    proc_free(socat);

    printf("\n| %s stream, %ld interleaved pairs%s: median (min-max) | dotmon (MiB/s) | socat "
           "(MiB/s) | ratio | dotmon CPU per GiB (ms) | both targets (ratio ≥ %.2f, CPU ≤ %.0f "
           "ms/GiB) |\n|---|---|---|---|---|---|\n",
           bytes_arg, runs,
           !pinned           ? ""
           : reader_cpu == 1 ? " (pinned: producer CPU 0, relay and reader CPU 1)"
                             : " (pinned: producer and reader CPU 0, relay CPU 1)",
           TARGET_RATIO, TARGET_CPU_MS);
    print_summary("all runs", rows, fresh, (size_t)runs, -1);
    print_summary("fresh dotmon, its first relay", rows, fresh, (size_t)runs, 1);
    print_summary("reused dotmon", rows, fresh, (size_t)runs, 0);
    printf("\n| metric | value | target |\n|---|---|---|\n");
    printf("| dotmon RSS before → peak, reused process over %d relays (KiB) | %ld → %ld (+%ld) | "
           "< 8192 KiB growth |\n",
           reused.relays, reused_rss_before, reused_rss_peak, reused_rss_peak - reused_rss_before);
    printf("| bytes per relay, last run | %llu (HTTP, chunked) / %llu (socat) | |\n",
           (unsigned long long)dm_bytes, (unsigned long long)socat_bytes);
    printf("| operations Succeeded | %d of %d | all |\n", succeeded, reused.relays + fresh_runs);
    dm_stop(&reused);
    proc_kill(prod, 1000, &st);
    proc_free(prod);
    free(ready);
    testenv_fini(&env);
    /* Figures of a relay that failed are no figures: make bench keeps the previous block. */
    int total = reused.relays + fresh_runs;
    if (succeeded != total || short_relays > 0) {
        fprintf(stderr,
                "bench_trace: %d of %d operations Succeeded, %d relays shorter than socat's\n",
                succeeded, total, short_relays);
        return 1;
    }
    return 0;
}
