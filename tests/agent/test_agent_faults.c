/* SPDX-License-Identifier: MIT */
/*
 * Integration: the real dotmon against a runtime that misbehaves on purpose (the fake runtime of
 * tests/support on a thread of this process, listed as this test's pid) while a real .NET TestApp
 * in the same TMPDIR is the healthy "everything else".
 *
 * Every fault of fake_runtime.h is applied to every command dotmon sends where it makes sense:
 * ProcessInfo (discovery probe and liveness, behind /processes and /process), ProcessEnvironment
 * (/env), CollectTracing (/trace), GenerateCoreDump (/dump) and StopTracing (the end of a trace).
 * For each case the one request that hits the faulty runtime must end within a stated bound:
 *
 *   - a reply that is malformed (wrong magic, a size over dotmon's cap, cut short by a close):
 *     502 Bad Gateway, problem+json, in well under a second;
 *   - a runtime that stays silent (a header and nothing more, a drip that never completes the
 *     reply, a connection never read, a size field far beyond the bytes sent): 504 Gateway
 *     Timeout, problem+json, when dotmon's timeout for that exchange runs out (ProcessEnvironment,
 *     CollectTracing, GenerateCoreDump: T_EXCHANGE_MS here, 3-300 s in production);
 *   - a trace stream that the runtime drops in the middle: the 200 response is cut without its
 *     last chunk (the client sees an incomplete transfer), the operation is Failed/TraceTruncated;
 *   - a bad answer to StopTracing after the stream ended properly: the trace is complete and
 *     Succeeded; a StopTracing never read: the operation can still be cancelled at once.
 *
 * Meanwhile /processes and /env of the healthy runtime keep answering quickly (the maximum
 * latency seen while the fault is in progress is printed and bounded), dotmon's descriptor count
 * returns to what it was (except the GenerateCoreDump exchange dotmon deliberately keeps open
 * after a 504 so that it can delete a late dump file, bounded by Dump:TimeoutSeconds + 600 s), and
 * the runtime's trace sessions end.
 *
 * dotmon runs with short timeouts (Timeouts:<Name>Ms, config/timeouts.h) so that the cases take
 * well under a second each instead of waiting out the production values.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "fake_runtime.h"
#include "fake_thread.h"
#include "nettrace.h"
#include "timebound.h"

#define WATCHDOG_S 900
/*
 * /processes and /env of the healthy runtime while a fault is in progress (scaled). A loop held
 * by a faulty runtime shows as the fault's own timeout (T_EXCHANGE_MS and more); answers take
 * ~1-20 ms. The bound sits between the two with room for a loaded 2-core machine (250 ms failed
 * once in CI).
 */
#define HEALTHY_MAX_MS 1000

/*
 * dotmon's timeouts here. The exchanges whose faults run while the healthy side is timed (IPC
 * exchanges and probes, CollectTracing, GenerateCoreDump, the logs probe) keep a bound above
 * HEALTHY_MAX_MS, so that a healthy request held behind the faulty one still shows; the others
 * (the cleanup after a session's end, the stop timeout, discovery's retry and liveness periods)
 * are a few hundred milliseconds.
 */
#define T_EXCHANGE_MS 1500 /* Timeouts:IpcExchangeMs, TraceStartMs, DumpMs, LogsProbeMs */
#define T_CLEANUP_MS  300  /* Timeouts:SessionCleanupMs */
#define T_STOP_MS     300  /* Timeouts:TraceStopMs (test_faults_stop_never_ends) */
#define T_RESCAN_MS   300  /* Timeouts:DiscoveryRescanMs: also the first retry of a failed probe */
#define T_LIVENESS_MS 250  /* Timeouts:DiscoveryLivenessMs */
#define STR_(x)       #x
#define STR(x)        STR_(x)
#define TIMEOUTS_ENV                                                                               \
    "DotnetMonitor_Timeouts__IpcExchangeMs=" STR(T_EXCHANGE_MS),                                   \
        "DotnetMonitor_Timeouts__TraceStartMs=" STR(T_EXCHANGE_MS),                                \
        "DotnetMonitor_Timeouts__DumpMs=" STR(T_EXCHANGE_MS),                                      \
        "DotnetMonitor_Timeouts__LogsProbeMs=" STR(T_EXCHANGE_MS),                                 \
        "DotnetMonitor_Timeouts__SessionCleanupMs=" STR(T_CLEANUP_MS),                             \
        "DotnetMonitor_Timeouts__DiscoveryRescanMs=" STR(T_RESCAN_MS),                             \
        "DotnetMonitor_Timeouts__DiscoveryLivenessMs=" STR(T_LIVENESS_MS)
/* A timeout's answer: not before it (less 100 ms of timer slack), within it + margin (scaled). */
#define AT_LEAST(t) ((t)-100)
#define AT_MOST(t)  ((t) + 1000)
/* Descriptors back after a session's end: its cleanup bound + margin (scaled). */
#define FD_SETTLE_MS (T_CLEANUP_MS + 2700)

static const char *const no_auth[] = {"--no-auth", NULL};
static const char *const dm_env[] = {TIMEOUTS_ENV, NULL};

/* ---- the fake runtime on its own loop thread ------------------------------------------------ */

static struct fake_thread *running_fakes[4];
/* The trace fault of the next fake_start (then back to FAKE_TRACE_OK). */
static enum fake_trace_fault next_trace_fault = FAKE_TRACE_OK;

/* A fake runtime listed as this test's pid (socket key `key`) in env's dir; unknown_versions as
 * in fake_trace_config (0: every CollectTracing known). */
static struct fake_thread *fake_start(struct testenv *env, uint64_t key,
                                      const struct fake_fault *initial, unsigned unknown_versions)
{
    struct fake_runtime_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.pid = (uint64_t)getpid();
    cfg.key = key;
    char hex[33];
    testenv_random_hex(hex, sizeof(hex));
    memcpy(cfg.cookie, hex, sizeof(cfg.cookie));
    cfg.command_line = "/opt/fake/FaultyApp --faults";
    cfg.os = "Linux";
    cfg.arch = "x64";
    cfg.assembly = "FaultyApp";
    cfg.clr_version = "10.0.0";
    cfg.rid = "linux-x64";
    static const char *const fenv[] = {"FAULTY=1", "PATH=/usr/bin", NULL};
    cfg.env = fenv;
    cfg.trace.filler_bytes = UINT64_MAX;
    cfg.trace.chunk_bytes = 4096;
    cfg.trace.interval_ms = 10;
    cfg.trace.unknown_versions = unknown_versions;
    cfg.trace.fault = next_trace_fault;
    next_trace_fault = FAKE_TRACE_OK;
    if (initial != NULL) {
        cfg.faults[0] = *initial;
    }
    struct fake_thread *ft = NULL;
    int rc = fake_thread_start(env->dir, &cfg, &ft);
    if (rc != 0) {
        fprintf(stderr, "fake runtime: %s\n", uv_strerror(rc));
        fail();
    }
    for (size_t i = 0; i < 4; i++) {
        if (running_fakes[i] == NULL) {
            running_fakes[i] = ft;
            break;
        }
    }
    return ft;
}

static void fake_stop(struct fake_thread *ft)
{
    for (size_t i = 0; i < 4; i++) {
        if (running_fakes[i] == ft) {
            running_fakes[i] = NULL;
        }
    }
    fake_thread_stop(ft);
}

static int faults_teardown(void **state)
{
    for (size_t i = 0; i < 4; i++) {
        if (running_fakes[i] != NULL) {
            fake_stop(running_fakes[i]);
        }
    }
    return agent_test_teardown(state);
}

struct set_fault_arg {
    unsigned slot;
    const struct fake_fault *fault;
};

static void do_set_fault(struct fake_runtime *f, void *arg)
{
    struct set_fault_arg *a = arg;
    (void)fake_runtime_set_fault(f, a->slot, a->fault);
}

static void fake_set_fault(struct fake_thread *ft, const struct fake_fault *fault)
{
    struct set_fault_arg a = {.slot = 0, .fault = fault};
    fake_thread_call(ft, do_set_fault, &a);
}

struct fake_snapshot {
    unsigned faults_applied;
    unsigned collect3; /* CollectTracing3 requests */
    unsigned sessions;
    unsigned streams_open;
    unsigned open_conns;
    struct fake_session_info last;
};

static void do_snapshot(struct fake_runtime *f, void *arg)
{
    struct fake_snapshot *s = arg;
    memset(s, 0, sizeof(*s));
    s->faults_applied = fake_runtime_faults_applied(f);
    s->collect3 = fake_runtime_requests(f, 0x02, 0x04);
    s->sessions = fake_runtime_sessions(f);
    s->open_conns = fake_runtime_open_connections(f);
    for (unsigned i = 0; i < s->sessions; i++) {
        struct fake_session_info si;
        if (fake_runtime_session(f, i, &si) == 0) {
            s->streams_open += si.stream_open;
            s->last = si;
        }
    }
}

static struct fake_snapshot fake_snap(struct fake_thread *ft)
{
    struct fake_snapshot s;
    fake_thread_call(ft, do_snapshot, &s);
    return s;
}

/* ---- requests on a thread, the healthy runtime sampled meanwhile ---------------------------- */

struct req_thread {
    uint16_t port;
    char target[256];
    const char *method;
    struct httpc_resp resp;
    int rc;
    double ms; /* until the response ended (or failed) */
    atomic_int done;
    pthread_t th;
};

static void *req_main(void *arg)
{
    struct req_thread *t = arg;
    double t0 = testenv_now_ms();
    t->rc =
        httpc_fetch(t->port, t->method, t->target, NULL, NULL, 0, testenv_timeout(60000), &t->resp);
    t->ms = testenv_now_ms() - t0;
    atomic_store(&t->done, 1);
    return NULL;
}

static void req_spawn(struct req_thread *t, struct dotmon *dm, const char *method, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));
static void req_spawn(struct req_thread *t, struct dotmon *dm, const char *method, const char *fmt,
                      ...)
{
    memset(t, 0, sizeof(*t));
    t->port = dm->port;
    t->method = method;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->target, sizeof(t->target), fmt, ap);
    va_end(ap);
    assert_int_equal(pthread_create(&t->th, NULL, req_main, t), 0);
}

struct latency {
    unsigned n;
    double max_ms;
};

struct world {
    struct testenv *env;
    struct test_app *app;
    struct dotmon *dm;
    struct fake_thread *ft;
    pid_t dpid;
    pid_t fake_pid;
    struct httpc hc;
    struct latency procs, env_lat;
};

static void lat_add(struct latency *l, double ms)
{
    l->n++;
    l->max_ms = ms > l->max_ms ? ms : l->max_ms;
}

/* One GET /processes (app listed; the fake too if want_fake) and one /env of the healthy app. */
static void sample_healthy(struct world *w, bool want_fake)
{
    struct httpc_resp r;
    int rc = httpc_request(&w->hc, "GET", "/processes", NULL, NULL, 0, &r);
    cJSON *arr = rc == 0 && r.status == 200 ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    bool ok = arr != NULL && agent_test_find_pid(arr, w->app->pid) != NULL &&
              (!want_fake || agent_test_find_pid(arr, w->fake_pid) != NULL);
    if (!ok) {
        fprintf(stderr, "/processes: rc %d %s status %d body %.*s\n", rc, r.error, r.status,
                r.body ? (int)r.body_len : 0, r.body ? r.body : "");
    }
    lat_add(&w->procs, r.latency_ms);
    cJSON_Delete(arr);
    httpc_resp_fini(&r);
    assert_true(ok);

    char target[64];
    snprintf(target, sizeof(target), "/env?pid=%d", (int)w->app->pid);
    rc = httpc_request(&w->hc, "GET", target, NULL, NULL, 0, &r);
    if (rc != 0 || r.status != 200) {
        fprintf(stderr, "%s: rc %d %s status %d\n", target, rc, r.error, r.status);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    lat_add(&w->env_lat, r.latency_ms);
    httpc_resp_fini(&r);
}

/* Samples the healthy side every 20 ms until t is done, then joins it. */
static void sample_until_done(struct world *w, struct req_thread *t, bool want_fake)
{
    while (!atomic_load(&t->done)) {
        sample_healthy(w, want_fake);
        testenv_sleep_ms(20);
    }
    pthread_join(t->th, NULL);
}

static void sample_for(struct world *w, int ms, bool want_fake)
{
    double end = testenv_now_ms() + ms;
    while (testenv_now_ms() < end) {
        sample_healthy(w, want_fake);
        testenv_sleep_ms(20);
    }
}

static void world_start_with(struct world *w, struct testenv *env, unsigned unknown_versions)
{
    memset(w, 0, sizeof(*w));
    w->env = env;
    testenv_watchdog(WATCHDOG_S);
    w->app = agent_test_start_app(env);
    w->ft = fake_start(env, 4242, NULL, unknown_versions);
    w->fake_pid = getpid();
    assert_int_equal(testenv_start_dotmon(env, no_auth, dm_env, &w->dm), 0);
    w->dpid = proc_pid(w->dm->proc);
    pid_t pids[] = {w->app->pid, w->fake_pid};
    cJSON_Delete(agent_test_wait_processes(w->dm, pids, 2, 10000));
    httpc_init(&w->hc, "127.0.0.1", w->dm->port, testenv_timeout(10000));
    /* Warm up the healthy path (thread pool, allocator) before any fd baseline. */
    sample_for(w, 300, true);
}

static void world_start(struct world *w, struct testenv *env)
{
    world_start_with(w, env, 0);
}

static void world_stop(struct world *w)
{
    httpc_fini(&w->hc);
    agent_test_stop_dotmon_clean(w->dm);
    fake_stop(w->ft);
}

static const char *kind_name(enum fake_fault_kind k)
{
    switch (k) {
    case FAKE_FAULT_BAD_MAGIC:
        return "bad-magic";
    case FAKE_FAULT_OVERSIZED:
        return "oversized";
    case FAKE_FAULT_TRUNCATED:
        return "truncated";
    case FAKE_FAULT_HEADER_ONLY:
        return "header-then-silence";
    case FAKE_FAULT_DRIP:
        return "drip";
    case FAKE_FAULT_MID_STREAM:
        return "mid-stream-close";
    case FAKE_FAULT_NO_READ:
        return "never-read";
    case FAKE_FAULT_NONE:
    default:
        return "none";
    }
}

/* The expected answer to the one request that hits the fault. */
struct expect {
    enum fake_fault_kind kind;
    uint16_t size;    /* OVERSIZED size field (0: 0xFFFF) */
    int status;       /* 502 or 504 */
    int min_ms;       /* answer not before (a timeout must not fire early) */
    int max_ms;       /* answer within (unscaled; scaled by testenv_timeout) */
    int held_fds;     /* descriptors dotmon may keep afterwards by design */
    int fd_settle_ms; /* how long the fd count may take to come back */
};

static void print_case(const char *cmd, const struct expect *e, const struct req_thread *t,
                       const struct world *w, int fds0, int fds1)
{
    fprintf(stderr,
            "FAULT %-10s %-20s -> %d in %6.0f ms | /processes max %5.1f ms (%u), healthy /env max "
            "%5.1f ms (%u) | fds %d -> %d\n",
            cmd, kind_name(e->kind), t->resp.status, t->ms, w->procs.max_ms, w->procs.n,
            w->env_lat.max_ms, w->env_lat.n, fds0, fds1);
}

/* Checks the answer of a non-streamed fault case: status, problem+json, time. */
static void check_answer(const struct expect *e, struct req_thread *t)
{
    if (t->rc != 0 || t->resp.status != e->status) {
        fprintf(stderr, "%s %s: rc %d (%s) status %d body %s\n", t->method, t->target, t->rc,
                t->resp.error, t->resp.status, t->resp.body ? t->resp.body : "");
    }
    assert_int_equal(t->rc, 0);
    agent_test_assert_problem(&t->resp, e->status);
    if (t->ms < e->min_ms || t->ms > testenv_timeout(e->max_ms)) {
        fprintf(stderr, "%s %s: answered after %.0f ms, expected %d..%d ms\n", t->method, t->target,
                t->ms, e->min_ms, testenv_timeout(e->max_ms));
    }
    assert_true(t->ms >= e->min_ms);
    assert_true(t->ms <= testenv_timeout(e->max_ms));
}

static void assert_latencies(const struct world *w)
{
    ASSERT_BELOW_MS(w->procs.max_ms, HEALTHY_MAX_MS);
    ASSERT_BELOW_MS(w->env_lat.max_ms, HEALTHY_MAX_MS);
}

/* The most recent operation (dotmon lists them oldest first). */
static cJSON *last_op(struct dotmon *dm)
{
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    int n = cJSON_GetArraySize(ops);
    assert_true(n > 0);
    char target[128];
    snprintf(target, sizeof(target), "/operations/%s/details",
             agent_test_str(cJSON_GetArrayItem(ops, n - 1), "operationId"));
    cJSON_Delete(ops);
    return agent_test_get_json(dm, target, 200);
}

static const char *op_error_code(const cJSON *op)
{
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");
    const cJSON *code = cJSON_GetObjectItemCaseSensitive(err, "code");
    return cJSON_IsString(code) ? code->valuestring : "";
}

/*
 * One fault case for a simple command: set the fault (on command_set/command_id), run the
 * request on a thread while sampling the healthy side, clear the fault, check the answer and
 * the descriptors.
 */
static int run_simple_case(struct world *w, const char *cmd, uint8_t set, uint8_t id,
                           const struct expect *e, const char *path, const char *suffix)
{
    int fds0 = agent_test_fd_baseline(w->dpid);
    struct fake_snapshot before = fake_snap(w->ft);
    struct fake_fault fault = {
        .kind = e->kind, .command_set = set, .command_id = id, .size = e->size, .drip_ms = 1000};
    fake_set_fault(w->ft, &fault);
    memset(&w->procs, 0, sizeof(w->procs));
    memset(&w->env_lat, 0, sizeof(w->env_lat));
    struct req_thread t;
    req_spawn(&t, w->dm, "GET", "%s%d%s", path, (int)w->fake_pid, suffix);
    sample_until_done(w, &t, true);
    fake_set_fault(w->ft, NULL);
    struct fake_snapshot after = fake_snap(w->ft);
    int fds1 = agent_test_wait_fds(w->dpid, fds0 + e->held_fds, e->fd_settle_ms);
    print_case(cmd, e, &t, w, fds0, fds1);
    check_answer(e, &t);
    assert_true(after.faults_applied > before.faults_applied); /* the fault was really hit */
    assert_latencies(w);
    assert_true(fds1 <= fds0 + e->held_fds);
    httpc_resp_fini(&t.resp);
    return fds0;
}

/* ---- ProcessEnvironment (/env) ----------------------------------------------------------------
 */

static void test_faults_env(void **state)
{
    struct world w;
    world_start(&w, *state);
    static const struct expect cases[] = {
        {FAKE_FAULT_BAD_MAGIC, 0, 502, 0, 1000, 0, 3000},
        {FAKE_FAULT_TRUNCATED, 0, 502, 0, 1000, 0, 3000},
        /* 0xFFFF is within the IPC message limit: dotmon waits for the rest, then times out. */
        {FAKE_FAULT_OVERSIZED, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0, 3000},
        /* A size field below the header size is not a message at all. */
        {FAKE_FAULT_OVERSIZED, 8, 502, 0, 1000, 0, 3000},
        {FAKE_FAULT_HEADER_ONLY, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0, 3000},
        {FAKE_FAULT_DRIP, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0, 3000},
        {FAKE_FAULT_NO_READ, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0, 3000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_simple_case(&w, "env", 0x04, 0x02, &cases[i], "/env?pid=", "");
    }
    /* The faulty runtime answers again once the fault is gone. */
    char target[64];
    snprintf(target, sizeof(target), "/env?pid=%d", (int)w.fake_pid);
    cJSON *o = agent_test_get_json(w.dm, target, 200);
    assert_string_equal(agent_test_str(o, "FAULTY"), "1");
    cJSON_Delete(o);
    world_stop(&w);
}

/* ---- GenerateCoreDump (/dump) ------------------------------------------------------------------
 */

static void test_faults_dump(void **state)
{
    struct world w;
    world_start(&w, *state);
    /* Dump:TimeoutSeconds (Timeouts:DumpMs) T_EXCHANGE_MS. After a 504 dotmon keeps the
     * exchange open (one descriptor) for up to 600 s more, so that it can delete a file the
     * runtime finishes late. */
    static const struct expect cases[] = {
        {FAKE_FAULT_BAD_MAGIC, 0, 502, 0, 1000, 0, 3000},
        {FAKE_FAULT_TRUNCATED, 0, 502, 0, 1000, 0, 3000},
        {FAKE_FAULT_OVERSIZED, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 1, 3000},
        {FAKE_FAULT_HEADER_ONLY, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 1, 3000},
        {FAKE_FAULT_DRIP, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 1, 3000},
        {FAKE_FAULT_NO_READ, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 1, 3000},
    };
    char target[64];
    snprintf(target, sizeof(target), "/dump?pid=%d&type=Mini", (int)w.fake_pid);
    uint64_t key = 4243;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int fds0 =
            run_simple_case(&w, "dump", 0x01, FAKE_ANY_ID, &cases[i], "/dump?pid=", "&type=Mini");
        cJSON *op = last_op(w.dm);
        assert_string_equal(agent_test_str(op, "status"), "Failed");
        assert_string_equal(op_error_code(op),
                            cases[i].status == 504 ? "Timeout" : "RuntimeUnreachable");
        cJSON_Delete(op);
        if (cases[i].status != 504) {
            continue;
        }
        /* The runtime has not answered: a new dump of it is refused at once instead of queueing
         * behind the first one (and holding another connection for minutes). */
        double t0 = testenv_now_ms();
        agent_test_expect_problem(w.dm, "GET", target, 429);
        fprintf(stderr, "  next dump of the same runtime: 429 in %.0f ms\n", testenv_now_ms() - t0);
        /* The runtime goes away: the kept exchange ends with it. */
        fake_stop(w.ft);
        cJSON_Delete(agent_test_wait_processes(w.dm, &w.app->pid, 1, 10000));
        int fds1 = agent_test_wait_fds(w.dpid, fds0, 3000);
        fprintf(stderr, "  runtime gone: fds %d -> %d\n", fds0, fds1);
        assert_true(fds1 <= fds0);
        w.ft = fake_start(w.env, key++, NULL, 0);
        pid_t pids[] = {w.app->pid, w.fake_pid};
        cJSON_Delete(agent_test_wait_processes(w.dm, pids, 2, 10000));
    }
    world_stop(&w);
}

/* ---- CollectTracing (/trace start) --------------------------------------------------------------
 */

static void test_faults_collect(void **state)
{
    struct world w;
    world_start(&w, *state);
    static const struct expect cases[] = {
        {FAKE_FAULT_BAD_MAGIC, 0, 502, 0, 1000, 0, 3000},
        /* Closed before a complete reply: dotmon retries once after 250 ms (a runtime quirk
         * under load), the retry meets the same fault. */
        {FAKE_FAULT_TRUNCATED, 0, 502, 0, 1500, 0, 3000},
        /* A session reply is 28 bytes; dotmon refuses anything announcing over 1 KiB at once. */
        {FAKE_FAULT_OVERSIZED, 0, 502, 0, 1000, 0, 3000},
        /* After the 504 dotmon keeps reading for up to its cleanup bound (10 s in production): a
         * reply that still comes would name a session it must stop. */
        {FAKE_FAULT_OVERSIZED, 100, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0,
         FD_SETTLE_MS},
        {FAKE_FAULT_HEADER_ONLY, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0,
         FD_SETTLE_MS},
        {FAKE_FAULT_DRIP, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0, FD_SETTLE_MS},
        {FAKE_FAULT_NO_READ, 0, 504, AT_LEAST(T_EXCHANGE_MS), AT_MOST(T_EXCHANGE_MS), 0,
         FD_SETTLE_MS},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        run_simple_case(&w, "collect", 0x02, FAKE_ANY_ID, &cases[i],
                        "/trace?pid=", "&durationSeconds=30");
        cJSON *op = last_op(w.dm);
        assert_string_equal(agent_test_str(op, "status"), "Failed");
        assert_string_equal(op_error_code(op),
                            cases[i].status == 504 ? "Timeout" : "RuntimeUnreachable");
        cJSON_Delete(op);
    }
    /* Nothing was created in the runtime, and a normal trace works afterwards. */
    struct fake_snapshot s = fake_snap(w.ft);
    assert_int_equal(s.sessions, 0);
    struct req_thread t;
    req_spawn(&t, w.dm, "GET", "/trace?pid=%d&durationSeconds=1", (int)w.fake_pid);
    sample_until_done(&w, &t, true);
    assert_int_equal(t.rc, 0);
    assert_int_equal(t.resp.status, 200);
    httpc_resp_fini(&t.resp);
    world_stop(&w);
}

/* ---- the trace stream dropped in the middle
 * ------------------------------------------------------ */

static enum nettrace_verdict verdict_of(const struct httpc_resp *r)
{
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_feed(&ck, (const uint8_t *)r->body, r->body_len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    nettrace_checker_fini(&ck);
    return v;
}

static void test_faults_mid_stream(void **state)
{
    struct world w;
    world_start(&w, *state);
    for (int round = 0; round < 3; round++) {
        int fds0 = agent_test_fd_baseline(w.dpid);
        /* 64 KiB, 1 MiB (more than dotmon queues before pausing), 200 KiB. */
        static const uint64_t cut[] = {65536, 1u << 20, 200000};
        struct fake_fault fault = {.kind = FAKE_FAULT_MID_STREAM,
                                   .command_set = 0x02,
                                   .command_id = FAKE_ANY_ID,
                                   .stream_bytes = cut[round]};
        fake_set_fault(w.ft, &fault);
        memset(&w.procs, 0, sizeof(w.procs));
        memset(&w.env_lat, 0, sizeof(w.env_lat));
        struct req_thread t;
        req_spawn(&t, w.dm, "GET", "/trace?pid=%d&durationSeconds=60", (int)w.fake_pid);
        sample_until_done(&w, &t, true);
        fake_set_fault(w.ft, NULL);
        struct fake_snapshot s = fake_snap(w.ft);
        int fds1 = agent_test_wait_fds(w.dpid, fds0, 3000);
        struct expect e = {.kind = FAKE_FAULT_MID_STREAM};
        print_case("trace", &e, &t, &w, fds0, fds1);
        fprintf(stderr, "  cut after %llu stream bytes: client rc %s, %zu body bytes, verdict %s\n",
                (unsigned long long)s.last.stream_bytes, agent_strerror(t.rc), t.resp.body_len,
                nettrace_verdict_name(verdict_of(&t.resp)));
        /* The 200 response is cut without its last chunk: the client sees the transfer is
         * incomplete, and has every byte the runtime sent, which is a truncated nettrace. */
        assert_int_equal(t.resp.status, 200);
        assert_int_equal(t.rc, AGENT_E_CLOSED);
        assert_true(t.resp.chunked);
        assert_int_equal(t.resp.body_len, s.last.stream_bytes);
        assert_int_equal(verdict_of(&t.resp), NETTRACE_TRUNCATED);
        assert_true(t.ms < testenv_timeout(5000));
        cJSON *op = last_op(w.dm);
        assert_string_equal(agent_test_str(op, "status"), "Failed");
        assert_string_equal(op_error_code(op), "TraceTruncated");
        cJSON_Delete(op);
        assert_int_equal(s.streams_open, 0);
        assert_latencies(&w);
        assert_true(fds1 <= fds0);
        httpc_resp_fini(&t.resp);
    }
    world_stop(&w);
}

/* ---- StopTracing
 * ---------------------------------------------------------------------------------- */

static void test_faults_stop(void **state)
{
    struct world w;
    world_start(&w, *state);
    /* The fake acts on the stop (end tag, stream closed) and then answers StopTracing badly:
     * the trace is complete, and the StopTracing exchange is released within dotmon's cleanup
     * bound (T_CLEANUP_MS here, 10 s in production) even when the answer never completes. */
    static const enum fake_fault_kind kinds[] = {FAKE_FAULT_BAD_MAGIC, FAKE_FAULT_TRUNCATED,
                                                 FAKE_FAULT_OVERSIZED, FAKE_FAULT_HEADER_ONLY,
                                                 FAKE_FAULT_DRIP};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        int fds0 = agent_test_fd_baseline(w.dpid);
        struct fake_fault fault = {
            .kind = kinds[i], .command_set = 0x02, .command_id = 0x01, .drip_ms = 1000};
        fake_set_fault(w.ft, &fault);
        memset(&w.procs, 0, sizeof(w.procs));
        memset(&w.env_lat, 0, sizeof(w.env_lat));
        struct req_thread t;
        req_spawn(&t, w.dm, "GET", "/trace?pid=%d&durationSeconds=1", (int)w.fake_pid);
        sample_until_done(&w, &t, true);
        int fds1 = agent_test_wait_fds(w.dpid, fds0, FD_SETTLE_MS);
        fake_set_fault(w.ft, NULL);
        struct fake_snapshot s = fake_snap(w.ft);
        struct expect e = {.kind = kinds[i]};
        print_case("stop", &e, &t, &w, fds0, fds1);
        if (t.rc != 0) {
            fprintf(stderr, "  trace: %s %s\n", agent_strerror(t.rc), t.resp.error);
        }
        assert_int_equal(t.rc, 0);
        assert_int_equal(t.resp.status, 200);
        assert_int_equal(verdict_of(&t.resp), NETTRACE_COMPLETE);
        assert_true(t.ms < testenv_timeout(3000));
        assert_true(s.last.end_tag);
        assert_int_equal(s.streams_open, 0);
        cJSON *op = last_op(w.dm);
        assert_string_equal(agent_test_str(op, "status"), "Succeeded");
        cJSON_Delete(op);
        assert_latencies(&w);
        assert_true(fds1 <= fds0);
        httpc_resp_fini(&t.resp);
    }

    /* A runtime that never reads the StopTracing (its server thread is stuck): the trace waits
     * for the stream's end up to the stop timeout (120 s); cancelling the operation ends it at
     * once, with the response cut, and everything is released within the cleanup bound. */
    int fds0 = agent_test_fd_baseline(w.dpid);
    memset(&w.procs, 0, sizeof(w.procs));
    memset(&w.env_lat, 0, sizeof(w.env_lat));
    struct req_thread t;
    req_spawn(&t, w.dm, "GET", "/trace?pid=%d&durationSeconds=1", (int)w.fake_pid);
    double end = testenv_now_ms() + testenv_timeout(5000);
    while (fake_snap(w.ft).streams_open == 0) {
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(10);
    }
    struct fake_fault never = {.kind = FAKE_FAULT_NO_READ};
    fake_set_fault(w.ft, &never);
    sample_for(&w, 2500, true); /* the duration (1 s) passes; StopTracing is never read */
    assert_int_equal(atomic_load(&t.done), 0);
    cJSON *op = last_op(w.dm);
    assert_string_equal(agent_test_str(op, "status"), "Stopping");
    char target[128];
    snprintf(target, sizeof(target), "/operations/%s", agent_test_str(op, "operationId"));
    cJSON_Delete(op);
    struct httpc_resp r;
    assert_int_equal(testenv_dotmon_request(w.dm, "DELETE", target, NULL, 0, &r), 0);
    assert_true(r.status >= 200 && r.status < 300);
    httpc_resp_fini(&r);
    double t0 = testenv_now_ms();
    sample_until_done(&w, &t, true);
    double cancel_ms = testenv_now_ms() - t0;
    fake_set_fault(w.ft, NULL); /* (liveness checks were not read either) */
    int fds1 = agent_test_wait_fds(w.dpid, fds0, FD_SETTLE_MS);
    struct fake_snapshot s = fake_snap(w.ft);
    struct expect e = {.kind = FAKE_FAULT_NO_READ};
    print_case("stop", &e, &t, &w, fds0, fds1);
    fprintf(stderr, "  cancelled: response ended %.0f ms after DELETE (client rc %s)\n", cancel_ms,
            agent_strerror(t.rc));
    assert_int_equal(t.rc, AGENT_E_CLOSED);
    assert_true(cancel_ms < testenv_timeout(1000));
    op = last_op(w.dm);
    assert_string_equal(agent_test_str(op, "status"), "Cancelled");
    cJSON_Delete(op);
    assert_int_equal(s.streams_open, 0);
    assert_latencies(&w);
    assert_true(fds1 <= fds0);
    httpc_resp_fini(&t.resp);
    world_stop(&w);
}

/* ---- a runtime that never ends its stream after StopTracing --------------------------------
 */

/*
 * The fake counts StopTracing and goes on streaming (FAKE_TRACE_NO_END), never closing. dotmon
 * runs with the stop timeout (Trace:StopTimeoutSeconds, Timeouts:TraceStopMs) T_STOP_MS and
 * RequestLimits:Trace:MaxConcurrency 1. A 1 s trace is stopped at 1 s and, while it waits, holds
 * the one trace slot (another /trace: 429). At the stop timeout (1 s + T_STOP_MS) the response is
 * cut (every byte received kept), the operation ends Failed (TraceTruncated, naming the stop
 * timeout), and the slot is free at once: a new trace of the same runtime starts (200, Running).
 * The runtime's streams are closed by dotmon within its cleanup bound (T_CLEANUP_MS after the
 * timeout).
 */
static void test_faults_stop_never_ends(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_S);
    next_trace_fault = FAKE_TRACE_NO_END;
    struct fake_thread *ft = fake_start(env, 4343, NULL, 0);
    static const char *const envs[] = {
        TIMEOUTS_ENV, "DotnetMonitor_Timeouts__TraceStopMs=" STR(T_STOP_MS),
        "DotnetMonitor_RequestLimits__Trace__MaxConcurrency=1", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_auth, envs, &dm), 0);
    pid_t fake_pid = getpid();
    cJSON_Delete(agent_test_wait_processes(dm, &fake_pid, 1, 10000));

    struct req_thread t;
    req_spawn(&t, dm, "GET", "/trace?pid=%d&durationSeconds=1", (int)fake_pid);
    double t0 = testenv_now_ms();
    double end = t0 + testenv_timeout(5000);
    while (fake_snap(ft).streams_open == 0) {
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(10);
    }
    /* The duration runs out: StopTracing goes out, and is ignored. What follows happens within
     * the stop timeout. */
    end = testenv_now_ms() + testenv_timeout(5000);
    while (fake_snap(ft).last.stops == 0) {
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(5);
    }
    double stop_seen = testenv_now_ms();
    struct fake_snapshot s = fake_snap(ft);
    assert_int_equal(s.last.stops, 1);
    assert_true(s.last.stream_open);
    assert_int_equal(atomic_load(&t.done), 0);
    cJSON *op = last_op(dm);
    assert_string_equal(agent_test_str(op, "status"), "Stopping");
    cJSON_Delete(op);
    struct httpc_resp r;
    char target[128];
    snprintf(target, sizeof(target), "/trace?pid=%d&durationSeconds=1", (int)fake_pid);
    assert_int_equal(testenv_dotmon_request(dm, "GET", target, NULL, 0, &r), 0);
    assert_int_equal(r.status, 429); /* the slot is held while the stop is pending */
    httpc_resp_fini(&r);
    fprintf(stderr, "  stop pending: Stopping and 429 seen %.0f ms after the StopTracing\n",
            testenv_now_ms() - stop_seen);

    while (!atomic_load(&t.done)) {
        assert_true(testenv_now_ms() - t0 < testenv_timeout(10000));
        testenv_sleep_ms(10);
    }
    pthread_join(t.th, NULL);
    double ended_ms = testenv_now_ms() - t0;
    fprintf(stderr, "  stop never answered: response cut after %.0f ms (client rc %s, %zu bytes)\n",
            ended_ms, agent_strerror(t.rc), t.resp.body_len);
    assert_int_equal(t.resp.status, 200);
    assert_int_equal(t.rc, AGENT_E_CLOSED); /* cut: the client sees the transfer incomplete */
    assert_true(t.resp.body_len > 0);
    assert_true(ended_ms >= AT_LEAST(1000 + T_STOP_MS)); /* not before the stop timeout */
    assert_true(ended_ms < testenv_timeout(1000 + T_STOP_MS + 2000));
    op = last_op(dm);
    assert_string_equal(agent_test_str(op, "status"), "Failed");
    assert_string_equal(op_error_code(op), "TraceTruncated");
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");
    const cJSON *msg = cJSON_GetObjectItemCaseSensitive(err, "message");
    assert_true(cJSON_IsString(msg) && strstr(msg->valuestring, "stop timeout") != NULL);
    char first[64];
    snprintf(first, sizeof(first), "%s", agent_test_str(op, "operationId"));
    cJSON_Delete(op);
    httpc_resp_fini(&t.resp);

    /* The slot is free right away: a new trace of the same runtime runs. */
    struct req_thread t2;
    req_spawn(&t2, dm, "GET", "/trace?pid=%d&durationSeconds=60", (int)fake_pid);
    end = testenv_now_ms() + testenv_timeout(5000);
    for (;;) {
        op = last_op(dm);
        bool running = strcmp(agent_test_str(op, "operationId"), first) != 0 &&
                       strcmp(agent_test_str(op, "status"), "Running") == 0;
        if (running) {
            break;
        }
        cJSON_Delete(op);
        assert_false(atomic_load(&t2.done)); /* not a 429 */
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(20);
    }
    snprintf(target, sizeof(target), "/operations/%s", agent_test_str(op, "operationId"));
    cJSON_Delete(op);
    assert_int_equal(testenv_dotmon_request(dm, "DELETE", target, NULL, 0, &r), 0);
    assert_true(r.status >= 200 && r.status < 300);
    httpc_resp_fini(&r);
    pthread_join(t2.th, NULL);
    assert_int_equal(t2.resp.status, 200);
    httpc_resp_fini(&t2.resp);

    /* Nothing of the runtime's streams is kept beyond the cleanup bound. */
    end = testenv_now_ms() + testenv_timeout(FD_SETTLE_MS);
    while (fake_snap(ft).streams_open != 0) {
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(50);
    }
    fprintf(stderr, "  streams closed %.0f ms after the first trace started\n",
            testenv_now_ms() - t0);
    agent_test_stop_dotmon_clean(dm);
    fake_stop(ft);
}

/* ---- /logs: the loader-rundown probe before the stream ----------------------------------------
 */

/*
 * GET /logs of the fake runtime for 1 s on a thread, the healthy side sampled meanwhile: a 200
 * stream that ends cleanly and empty (the fake writes no logging event) within [min_ms, max_ms],
 * and a Succeeded operation.
 */
static void logs_case(struct world *w, const char *what, int min_ms, int max_ms)
{
    memset(&w->procs, 0, sizeof(w->procs));
    memset(&w->env_lat, 0, sizeof(w->env_lat));
    struct req_thread t;
    req_spawn(&t, w->dm, "GET", "/logs?pid=%d&durationSeconds=1", (int)w->fake_pid);
    sample_until_done(w, &t, true);
    fprintf(stderr, "LOGS  %-32s -> %d in %6.0f ms, %zu body bytes | /processes max %5.1f ms\n",
            what, t.resp.status, t.ms, t.resp.body_len, w->procs.max_ms);
    assert_int_equal(t.rc, 0);
    assert_int_equal(t.resp.status, 200);
    assert_int_equal(t.resp.body_len, 0);
    assert_true(t.ms >= min_ms);
    assert_true(t.ms <= testenv_timeout(max_ms));
    cJSON *op = last_op(w->dm);
    assert_string_equal(agent_test_str(op, "status"), "Succeeded");
    cJSON_Delete(op);
    assert_latencies(w);
    httpc_resp_fini(&t.resp);
}

static void assert_logged(struct world *w, const char *text)
{
    char *err = proc_output(w->dm->proc, PROC_STDERR, NULL);
    assert_non_null(err);
    if (strstr(err, text) == NULL) {
        fprintf(stderr, "dotmon's log has no \"%s\":\n%s\n", text, err);
    }
    assert_non_null(strstr(err, text));
    free(err);
}

static void test_faults_logs_probe(void **state)
{
    struct world w;
    world_start(&w, *state);
    int fds0 = agent_test_fd_baseline(w.dpid);
    /* 1. The fake's probe stream has no rundown (no module, no DCEndComplete): the probe cannot
     *    tell, and the stream starts at once, without waiting for the probe's budget. Two
     *    sessions, both ended. */
    logs_case(&w, "probe without rundown", 1000, 2500);
    assert_logged(&w, "cannot tell: the rundown did not complete");
    struct fake_snapshot s = fake_snap(w.ft);
    assert_int_equal(s.sessions, 2);
    /* 2. The probe's CollectTracing gets a reply header and then silence: the probe gives up
     *    after its budget (T_EXCHANGE_MS here, 3 s in production) and the logs stream starts all
     *    the same. */
    struct fake_fault hang = {
        .kind = FAKE_FAULT_HEADER_ONLY, .command_set = 0x02, .command_id = FAKE_ANY_ID, .times = 1};
    fake_set_fault(w.ft, &hang);
    logs_case(&w, "probe hangs (header only)", AT_LEAST(T_EXCHANGE_MS + 1000),
              T_EXCHANGE_MS + 3500);
    fake_set_fault(w.ft, NULL);
    assert_logged(&w, "cannot tell: the probe timed out");
    struct fake_snapshot s2 = fake_snap(w.ft);
    assert_int_equal(s2.faults_applied, s.faults_applied + 1);
    assert_int_equal(s2.sessions, s.sessions + 1); /* the hung probe created none */
    /* Everything is released within the cleanup bound: the hung probe's connection is read for
     * up to T_CLEANUP_MS (10 s in production) in case a late reply names a session to stop. */
    int fds1 = agent_test_wait_fds(w.dpid, fds0, FD_SETTLE_MS);
    fprintf(stderr, "LOGS  fds %d -> %d\n", fds0, fds1);
    assert_true(fds1 <= fds0);
    assert_int_equal(fake_snap(w.ft).streams_open, 0);
    world_stop(&w);
    assert_int_equal(testenv_stop_app(w.app, SIGTERM, NULL), 0); /* the next world has its own */

    /* 3. A runtime without CollectTracing4 and 5 (.NET 8): the probe is refused, never retried
     *    as a CollectTracing3 with the default rundown; the logs session takes CollectTracing3. */
    world_start_with(&w, *state, 1u << 4 | 1u << 5);
    logs_case(&w, "no CollectTracing4 (.NET 8)", 1000, 2500);
    assert_logged(&w, "cannot tell: the runtime has no CollectTracing4");
    s = fake_snap(w.ft);
    assert_int_equal(s.collect3, 1);
    assert_int_equal(s.sessions, 1);
    assert_int_equal(s.streams_open, 0);
    world_stop(&w);
}

/* ---- ProcessInfo: the discovery probe, then liveness checks behind /process
 * ---------------------- */

static bool fake_listed(struct world *w, uint64_t key)
{
    (void)key;
    cJSON *arr = agent_test_get_json(w->dm, "/processes", 200);
    bool listed = agent_test_find_pid(arr, w->fake_pid) != NULL;
    cJSON_Delete(arr);
    return listed;
}

static void test_faults_process_info(void **state)
{
    struct testenv *env = *state;
    struct world w;
    memset(&w, 0, sizeof(w));
    w.env = env;
    testenv_watchdog(WATCHDOG_S);
    w.app = agent_test_start_app(env);
    w.fake_pid = getpid();
    assert_int_equal(testenv_start_dotmon(env, no_auth, dm_env, &w.dm), 0);
    w.dpid = proc_pid(w.dm->proc);
    cJSON_Delete(agent_test_wait_processes(w.dm, &w.app->pid, 1, 10000));
    httpc_init(&w.hc, "127.0.0.1", w.dm->port, testenv_timeout(10000));
    sample_for(&w, 300, false);

    static const struct fake_fault faults[] = {
        {FAKE_FAULT_BAD_MAGIC, 0x04, FAKE_ANY_ID, 0, 0, 0, 0, 0},
        {FAKE_FAULT_TRUNCATED, 0x04, FAKE_ANY_ID, 0, 0, 0, 0, 0},
        {FAKE_FAULT_OVERSIZED, 0x04, FAKE_ANY_ID, 0, 0, 0, 0, 0},
        {FAKE_FAULT_HEADER_ONLY, 0x04, FAKE_ANY_ID, 0, 0, 0, 0, 0},
        {FAKE_FAULT_DRIP, 0x04, FAKE_ANY_ID, 0, 0, 1000, 0, 0},
        {FAKE_FAULT_NO_READ, 0x04, FAKE_ANY_ID, 0, 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
        int fds0 = agent_test_fd_baseline(w.dpid);
        memset(&w.procs, 0, sizeof(w.procs));
        memset(&w.env_lat, 0, sizeof(w.env_lat));
        /* 1. Discovery: a runtime whose ProcessInfo is faulty is not listed, and the list of the
         *    others stays quick. */
        uint64_t key = 5000 + i;
        struct fake_thread *ft = fake_start(env, key, &faults[i], 0);
        w.ft = ft;
        double t0 = testenv_now_ms();
        sample_for(&w, T_EXCHANGE_MS + 500, false); /* a probe timeout and then some */
        assert_false(fake_listed(&w, key));
        struct fake_snapshot s = fake_snap(ft);
        assert_true(s.faults_applied >= 1);
        double probe_procs_max = w.procs.max_ms, probe_env_max = w.env_lat.max_ms;
        assert_latencies(&w);
        /* 2. The fault goes away: the failed probe is retried (backoff from T_RESCAN_MS, 5 s in
         *    production) and the runtime shows up. */
        fake_set_fault(ft, NULL);
        double end = testenv_now_ms() + testenv_timeout(20000);
        while (!fake_listed(&w, key)) {
            assert_true(testenv_now_ms() < end);
            testenv_sleep_ms(100);
        }
        double listed_ms = testenv_now_ms() - t0;
        /* 3. Liveness: the listed runtime's ProcessInfo goes bad. A bad or missing answer is not
         *    death (a busy runtime looks the same), so it stays listed, and /process answers
         *    from what discovery knows, at once. */
        memset(&w.procs, 0, sizeof(w.procs));
        memset(&w.env_lat, 0, sizeof(w.env_lat));
        unsigned applied0 = fake_snap(ft).faults_applied;
        fake_set_fault(ft, &faults[i]);
        char target[64];
        snprintf(target, sizeof(target), "/process?pid=%d", (int)w.fake_pid);
        struct latency proc_lat = {0};
        /* a few liveness periods and a probe timeout */
        end = testenv_now_ms() + 4 * T_LIVENESS_MS + T_EXCHANGE_MS + 500;
        while (testenv_now_ms() < end) {
            sample_healthy(&w, true);
            struct httpc_resp r;
            assert_int_equal(httpc_request(&w.hc, "GET", target, NULL, NULL, 0, &r), 0);
            assert_int_equal(r.status, 200);
            lat_add(&proc_lat, r.latency_ms);
            httpc_resp_fini(&r);
            testenv_sleep_ms(50);
        }
        assert_true(fake_snap(ft).faults_applied > applied0);
        assert_latencies(&w);
        ASSERT_BELOW_MS(proc_lat.max_ms, HEALTHY_MAX_MS);
        /* 4. The runtime goes away: unlisted, and every descriptor is back. */
        fake_stop(ft);
        w.ft = NULL;
        cJSON_Delete(agent_test_wait_processes(w.dm, &w.app->pid, 1, 10000));
        int fds1 = agent_test_wait_fds(w.dpid, fds0, 5000);
        fprintf(stderr,
                "FAULT %-10s %-20s -> not listed; /processes max %5.1f ms, /env max %5.1f ms; "
                "listed %.0f ms after start once healed | liveness: /process max %5.1f ms "
                "(%u), /processes max %5.1f ms | fds %d -> %d\n",
                "procinfo", kind_name(faults[i].kind), probe_procs_max, probe_env_max, listed_ms,
                proc_lat.max_ms, proc_lat.n, w.procs.max_ms, fds0, fds1);
        assert_true(fds1 <= fds0);
    }
    httpc_fini(&w.hc);
    agent_test_stop_dotmon_clean(w.dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_faults_env, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_collect, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_logs_probe, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_mid_stream, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_stop, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_stop_never_ends, agent_test_setup,
                                        faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_dump, agent_test_setup, faults_teardown),
        cmocka_unit_test_setup_teardown(test_faults_process_info, agent_test_setup,
                                        faults_teardown),
    };
    if (getenv("TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
