/* SPDX-License-Identifier: MIT */
/*
 * Integration: dotmon as a sidecar of apps that are pid 1 in their own pid and mount namespaces
 * (issue 5), with the real .NET TestApp started under `unshare` (tests/support/nsapp.h) and the
 * real dotmon outside, sharing only directories with the apps.
 *
 * Connect mode (dotmon watches the directory that is the app's /tmp):
 *  - one app: /processes lists pid 1, name TestApp, and the uid the runtime itself reports over
 *    its socket; the host pid is not accepted; /trace?pid=1&profile=gc-verbose&durationSeconds=5
 *    is a complete nettrace (dotmon's C checker says COMPLETE, TraceEvent reads it and agrees on
 *    the GCStart/GCEnd counts, which are not 0; the trace header says process 1); /dump?pid=1
 *    with Storage:DumpTargetFolder=/tmp (the app's view) and Storage:DumpTempFolder=<the dir>
 *    (dotmon's view) is an ELF core and leaves no file, and without that mapping a 400 carrying
 *    createdump's reason;
 *  - two apps, both dotnet-diagnostic-1-<key>-socket in the same directory: both listed as pid 1
 *    with different uids, each selectable by uid (a trace by uid carries that app's log marker and
 *    not the other's), and pid=1 alone is an ambiguous selection: 400.
 * Listen mode (--diagnostic-port, or DiagnosticPort:ConnectionMode=Listen + EndpointName; the
 * socket in a directory bound into each app's namespace, the apps' own /tmp not watched):
 *  - the same as the single connect-mode app (trace and dump included);
 *  - two apps connecting to one port: both listed by uid, each selectable, traced by uid;
 *  - DOTNET_DiagnosticPorts without nosuspend: the app waits until dotmon resumes it, then runs
 *    (answers ping); killed and replaced, the new instance (new uid) is listed and the old one
 *    dropped within a few seconds.
 *
 * Where unshare is not permitted the tests say why and are skipped (cmocka skip(); the program
 * then exits 77, which ctest reports as skipped). Teardown checks that no app process survived,
 * no mount leaked into the test's mount namespace and the temp dir is gone.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "nettrace.h"
#include "nsapp.h"

#define TRACE_HTTP_MS   120000
#define DUMP_HTTP_MS    180000
#define LIST_MS         15000
#define DROP_MS         5000
#define WATCHDOG_S      300
#define SKIP_EXIT       77
#define MAX_APPS        2
#define LISTEN_SOCKNAME "dm.sock"
#define SHARE_NAME      "diag"

static const char *const no_auth[] = {"--no-auth", NULL};

/* Set when a test was skipped because namespaces are not permitted (main then exits 77). */
static bool skipped_no_unshare;
/* Mount table size of the test process before each test; it must be the same after. */
static int mounts_before;

/* ---- setup, teardown, skip ------------------------------------------------------------------- */

static int sidecar_setup(void **state)
{
    mounts_before = nsapp_mount_count();
    int rc = agent_test_setup(state);
    testenv_watchdog(WATCHDOG_S);
    return rc;
}

/*
 * Stops the namespaced apps gracefully (SIGTERM to their pid 1), then everything else, then checks
 * that nothing is left: no app process (each one's host pid), no mount mentioning the temp dir and
 * the same number of mounts as before, and no temp dir.
 */
static int sidecar_teardown(void **state)
{
    struct testenv *env = *state;
    pid_t hosts[TESTENV_MAX_APPS];
    size_t n_hosts = 0;
    for (size_t i = 0; i < env->n_apps; i++) {
        if (nsapp_is_ns(env->apps[i])) {
            pid_t h = nsapp_host_pid(env->apps[i]);
            if (h > 0) {
                hosts[n_hosts++] = h;
            }
        }
    }
    nsapp_stop_all(env);
    char dir[TESTENV_DIR_SIZE];
    snprintf(dir, sizeof(dir), "%s", env->dir);
    agent_test_teardown(state);

    int bad = 0;
    for (size_t i = 0; i < n_hosts; i++) {
        double end = testenv_now_ms() + testenv_timeout(3000);
        while (nsapp_pid_alive(hosts[i]) && testenv_now_ms() < end) {
            testenv_sleep_ms(20);
        }
        if (nsapp_pid_alive(hosts[i])) {
            fprintf(stderr, "teardown: app process %d (pid 1 of its namespace) is still alive\n",
                    (int)hosts[i]);
            bad++;
        }
    }
    int leaked = dir[0] ? nsapp_mounts_mentioning(dir) : 0;
    int mounts_after = nsapp_mount_count();
    if (leaked != 0 || mounts_after != mounts_before) {
        fprintf(stderr,
                "teardown: mounts leaked into the test's namespace: %d mention %s; %d mounts "
                "before the test, %d after\n",
                leaked, dir, mounts_before, mounts_after);
        bad++;
    }
    struct stat st;
    if (dir[0] && lstat(dir, &st) == 0) {
        fprintf(stderr, "teardown: %s was not removed\n", dir);
        bad++;
    }
    return bad ? -1 : 0;
}

/* Skips the running test, saying why, when this process may not create the namespaces. */
static void require_namespaces(void)
{
    char why[600];
    if (!nsapp_supported(why, sizeof(why))) {
        fprintf(stderr,
                "SKIPPED: this test runs the app as pid 1 in new pid and mount namespaces, which "
                "is not permitted here: %s\n",
                why);
        skipped_no_unshare = true;
        skip();
    }
}

/* ---- apps and their identity ----------------------------------------------------------------- */

/* mkdir <env dir>/<name> into out. */
static void make_dir(struct testenv *env, const char *name, char *out, size_t size)
{
    int n = snprintf(out, size, "%s/%s", env->dir, name);
    assert_true(n > 0 && (size_t)n < size);
    assert_int_equal(mkdir(out, 0700), 0);
}

/*
 * The runtime cookie of the only diagnostic socket in dir, read from the runtime itself
 * (ProcessInfo), which must also say it is pid 1; the socket name must carry pid 1 too.
 */
static void only_socket_uid(const char *dir, char uid[37])
{
    char names[4][128];
    int n = nsapp_list_sockets(dir, names, 4);
    if (n != 1) {
        fprintf(stderr, "%s holds %d diagnostic sockets, expected 1\n", dir, n);
    }
    assert_int_equal(n, 1);
    assert_int_equal(strncmp(names[0], "dotnet-diagnostic-1-", 20), 0);
    char path[PATH_MAX + 128];
    snprintf(path, sizeof(path), "%s/%s", dir, names[0]);
    uint64_t pid = 0;
    int rc = nsapp_process_info(path, &pid, uid);
    if (rc != 0) {
        fprintf(stderr, "ProcessInfo on %s: %s\n", path, agent_strerror(rc));
    }
    assert_int_equal(rc, 0);
    assert_int_equal(pid, 1);
    assert_true(agent_test_is_guid(uid));
    fprintf(stderr, "%s: the runtime says pid %llu, cookie %s\n", path, (unsigned long long)pid,
            uid);
}

/* With two diagnostic sockets in dir, the uid of the one whose runtime is not known_uid (both must
 * say pid 1, as in only_socket_uid). */
static void new_socket_uid(const char *dir, const char *known_uid, char uid[37])
{
    char names[4][128];
    int n = nsapp_list_sockets(dir, names, 4);
    assert_int_equal(n, 2);
    bool found = false;
    for (int i = 0; i < n; i++) {
        assert_int_equal(strncmp(names[i], "dotnet-diagnostic-1-", 20), 0);
        char path[PATH_MAX + 128], u[37];
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        uint64_t pid = 0;
        assert_int_equal(nsapp_process_info(path, &pid, u), 0);
        assert_int_equal(pid, 1);
        if (strcmp(u, known_uid) != 0) {
            assert_false(found);
            found = true;
            memcpy(uid, u, 37);
            fprintf(stderr, "%s: the runtime says pid 1, cookie %s\n", path, uid);
        }
    }
    assert_true(found);
}

static struct test_app *start_ns_app(struct testenv *env, const struct nsapp_opts *o)
{
    struct test_app *app = NULL;
    double t0 = testenv_now_ms();
    int rc = nsapp_start(env, o, &app);
    if (rc != 0) {
        fprintf(stderr, "nsapp_start: %s\n", agent_strerror(rc));
    }
    assert_int_equal(rc, 0);
    fprintf(stderr, "app %s: pid 1 in its namespace, %d outside; %s after %.0f ms\n", app->marker,
            (int)nsapp_host_pid(app), o->no_wait ? "spawned" : "ready", testenv_now_ms() - t0);
    return app;
}

static struct dotmon *start_dotmon(struct testenv *env, const char *const *args,
                                   const char *const *extra_env, const char *what)
{
    struct dotmon *dm = NULL;
    int rc = testenv_start_dotmon(env, args, extra_env, &dm);
    if (rc != 0) {
        fprintf(stderr, "dotmon did not start (%s): %s\n", what, agent_strerror(rc));
    }
    assert_int_equal(rc, 0);
    return dm;
}

/* ---- /processes by uid ----------------------------------------------------------------------- */

static cJSON *find_uid(cJSON *arr, const char *uid)
{
    cJSON *e;
    cJSON_ArrayForEach(e, arr)
    {
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "uid");
        if (cJSON_IsString(u) && strcasecmp(u->valuestring, uid) == 0) {
            return e;
        }
    }
    return NULL;
}

static bool same_uid_set(cJSON *arr, const char *const *uids, size_t n)
{
    if (!cJSON_IsArray(arr) || (size_t)cJSON_GetArraySize(arr) != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (find_uid(arr, uids[i]) == NULL) {
            return false;
        }
    }
    return true;
}

/*
 * Polls /processes until it lists exactly these uids (timeout_ms, scaled); returns the array
 * (caller cJSON_Delete) and, in *took_ms, how long it took.
 */
static cJSON *wait_uids(struct dotmon *dm, const char *const *uids, size_t n, int timeout_ms,
                        double *took_ms)
{
    double t0 = testenv_now_ms();
    double end = t0 + testenv_timeout(timeout_ms);
    char *last = NULL;
    for (;;) {
        cJSON *arr = agent_test_get_json(dm, "/processes", 200);
        if (same_uid_set(arr, uids, n)) {
            free(last);
            if (took_ms != NULL) {
                *took_ms = testenv_now_ms() - t0;
            }
            return arr;
        }
        free(last);
        last = cJSON_PrintUnformatted(arr);
        cJSON_Delete(arr);
        if (testenv_now_ms() >= end) {
            break;
        }
        testenv_sleep_ms(100);
    }
    fprintf(stderr, "/processes never listed exactly these %zu uids:", n);
    for (size_t i = 0; i < n; i++) {
        fprintf(stderr, " %s", uids[i]);
    }
    fprintf(stderr, "\nlast answer: %s\n", last ? last : "(none)");
    free(last);
    fail_msg("process list did not settle within %d ms", timeout_ms);
    return NULL;
}

/* The entry of a namespaced TestApp: pid 1 (the pid it sees), its name, this uid. */
static void assert_pid1_entry(const cJSON *e, const char *uid)
{
    assert_non_null(e);
    assert_int_equal(agent_test_int(e, "pid"), 1);
    assert_string_equal(agent_test_str(e, "name"), "TestApp");
    assert_true(strcasecmp(agent_test_str(e, "uid"), uid) == 0);
}

/* GET /process?<query> is this app: pid 1, name, uid, and its marker on the command line. */
static void assert_process_query(struct dotmon *dm, const char *query, const char *uid,
                                 const struct test_app *app)
{
    char target[160];
    snprintf(target, sizeof(target), "/process?%s", query);
    cJSON *p = agent_test_get_json(dm, target, 200);
    assert_pid1_entry(p, uid);
    const char *cl = agent_test_str(p, "commandLine");
    if (strstr(cl, app->marker) == NULL) {
        fprintf(stderr, "%s: commandLine '%s' lacks the app's marker %s\n", target, cl,
                app->marker);
    }
    assert_non_null(strstr(cl, app->marker));
    cJSON_Delete(p);
}

/* ---- traces ---------------------------------------------------------------------------------- */

struct trace_req {
    uint16_t port;
    char target[256];
    struct httpc_resp resp;
    int rc;
    pthread_t th;
};

static void *trace_thread(void *arg)
{
    struct trace_req *t = arg;
    t->rc = httpc_fetch(t->port, "GET", t->target, NULL, NULL, 0, testenv_timeout(TRACE_HTTP_MS),
                        &t->resp);
    return NULL;
}

static void trace_begin(struct trace_req *t, struct dotmon *dm, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void trace_begin(struct trace_req *t, struct dotmon *dm, const char *fmt, ...)
{
    memset(t, 0, sizeof(*t));
    t->port = dm->port;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->target, sizeof(t->target), fmt, ap);
    va_end(ap);
    assert_int_equal(pthread_create(&t->th, NULL, trace_thread, t), 0);
}

static void trace_join(struct trace_req *t)
{
    pthread_join(t->th, NULL);
    if (t->rc != 0 || t->resp.status != 200) {
        fprintf(stderr, "GET %s: %s %s, status %d: %.*s\n", t->target, agent_strerror(t->rc),
                t->resp.error, t->resp.status,
                (int)(t->resp.body_len > 1000 ? 1000 : t->resp.body_len),
                t->resp.body ? t->resp.body : "");
    }
    assert_int_equal(t->rc, 0);
    assert_int_equal(t->resp.status, 200);
    assert_true(httpc_content_type_is(&t->resp, "application/octet-stream"));
    assert_true(t->resp.chunked);
    assert_non_null(httpc_header(&t->resp, "Location"));
}

/* Keeps the apps collecting garbage and logging their markers for about ms milliseconds. */
static void drive_apps(struct test_app *const *apps, size_t n, int ms)
{
    double end = testenv_now_ms() + ms;
    int i = 0;
    char cmd[128];
    while (testenv_now_ms() < end) {
        for (size_t k = 0; k < n; k++) {
            assert_int_equal(testenv_app_cmd(apps[k], "churn 8", 20000, NULL), 0);
            assert_int_equal(testenv_app_cmd(apps[k], "gc", 20000, NULL), 0);
            snprintf(cmd, sizeof(cmd), "log Information sidecar-%s-%d", apps[k]->marker, i);
            assert_int_equal(testenv_app_cmd(apps[k], cmd, 20000, NULL), 0);
        }
        i++;
        testenv_sleep_ms(100);
    }
}

struct scan {
    const char *markers[MAX_APPS];
    uint64_t hits[MAX_APPS];
};

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct scan *s = ud;
    for (size_t i = 0; s != NULL && i < MAX_APPS; i++) {
        if (s->markers[i] != NULL &&
            nettrace_payload_has_utf16(ev->payload, ev->payload_len, s->markers[i])) {
            s->hits[i]++;
        }
    }
}

/*
 * A complete nettrace from a pid-1 runtime: dotmon's C checker says COMPLETE, the trace header
 * names process 1, GCStart and GCEnd are there, TraceEvent reads the same GC counts. With
 * markers, hits[i] gets how many events carry markers[i] (app log lines).
 */
static void check_trace(struct testenv *env, const char *name, const struct httpc_resp *r,
                        struct scan *sc)
{
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    if (sc != NULL) {
        nettrace_set_event_cb(&ck, on_event, sc);
    }
    nettrace_feed(&ck, (const uint8_t *)r->body, r->body_len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    uint64_t gc_start = nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 1);
    uint64_t gc_end = nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 2);
    uint64_t events = nettrace_get_stats(&ck)->events;
    struct nettrace_trace_info ti;
    memset(&ti, 0, sizeof(ti));
    int info_rc = nettrace_trace_info(&ck, &ti);
    if (v != NETTRACE_COMPLETE) {
        uint64_t off = 0;
        const char *e = nettrace_error(&ck, &off);
        fprintf(stderr, "%s: %zu bytes, verdict %s %s at %llu\n", name, r->body_len,
                nettrace_verdict_name(v), e ? e : "", (unsigned long long)off);
    }
    nettrace_checker_fini(&ck);
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_int_equal(info_rc, 0);
    assert_int_equal(ti.process_id, 1);
    assert_true(gc_start > 0);
    assert_true(gc_end > 0);

    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s.nettrace", env->dir, name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(r->body, 1, r->body_len, f), r->body_len);
    assert_int_equal(fclose(f), 0);
    cJSON *j = agent_test_tracecheck(env, path, NULL);
    long long te_start = agent_test_int(j, "gcStart");
    long long te_end = agent_test_int(j, "gcEnd");
    long long te_events = agent_test_int(j, "events");
    cJSON_Delete(j);
    unlink(path);
    fprintf(stderr,
            "%s: %zu bytes, %llu events, GCStart %llu, GCEnd %llu, process %d (TraceEvent: %lld "
            "events, GCStart %lld, GCEnd %lld)",
            name, r->body_len, (unsigned long long)events, (unsigned long long)gc_start,
            (unsigned long long)gc_end, (int)ti.process_id, te_events, te_start, te_end);
    for (size_t i = 0; i < MAX_APPS && sc != NULL; i++) {
        if (sc->markers[i] != NULL) {
            fprintf(stderr, ", app%zu's marker in %llu events", i + 1,
                    (unsigned long long)sc->hits[i]);
        }
    }
    fprintf(stderr, "\n");
    assert_int_equal((long long)gc_start, te_start);
    assert_int_equal((long long)gc_end, te_end);
}

/* The operation of a finished trace says complete. */
static void assert_trace_op_complete(struct dotmon *dm, const struct httpc_resp *r)
{
    const char *loc = httpc_header(r, "Location");
    assert_non_null(loc);
    const char *id = strstr(loc, "/operations/");
    assert_non_null(id);
    char target[128];
    snprintf(target, sizeof(target), "%s/details", id);
    cJSON *op = agent_test_get_json(dm, target, 200);
    assert_string_equal(agent_test_str(op, "status"), "Succeeded");
    cJSON *tr = cJSON_GetObjectItemCaseSensitive(op, "trace");
    assert_string_equal(agent_test_str(tr, "verdict"), "complete");
    cJSON_Delete(op);
}

/* A 5 s gc-verbose trace of the app that selector (e.g. "pid=1") picks, driven meanwhile. */
static void trace_gc_verbose(struct testenv *env, struct dotmon *dm, struct test_app *app,
                             const char *selector, const char *name)
{
    struct trace_req t;
    double t0 = testenv_now_ms();
    trace_begin(&t, dm, "/trace?%s&profile=gc-verbose&durationSeconds=5", selector);
    drive_apps(&app, 1, 5500);
    trace_join(&t);
    fprintf(stderr, "GET %s: %.0f ms\n", t.target, testenv_now_ms() - t0);
    check_trace(env, name, &t.resp, NULL);
    assert_trace_op_complete(dm, &t.resp);
    httpc_resp_fini(&t.resp);
}

/*
 * Two apps traced at once, each by its uid, with gc-verbose plus Logs: each trace is complete,
 * carries its own app's log marker and not the other's, so the uid picked the right runtime.
 */
static void trace_two_by_uid(struct testenv *env, struct dotmon *dm, struct test_app *const *apps,
                             const char *const *uids)
{
    struct trace_req t[MAX_APPS];
    for (size_t i = 0; i < MAX_APPS; i++) {
        trace_begin(&t[i], dm, "/trace?uid=%s&profile=gc-verbose,Logs&durationSeconds=5", uids[i]);
    }
    drive_apps(apps, MAX_APPS, 5500);
    for (size_t i = 0; i < MAX_APPS; i++) {
        trace_join(&t[i]);
        struct scan sc = {.markers = {apps[0]->marker, apps[1]->marker}};
        char name[32];
        snprintf(name, sizeof(name), "by-uid-%zu", i + 1);
        check_trace(env, name, &t[i].resp, &sc);
        assert_true(sc.hits[i] > 0);
        assert_int_equal(sc.hits[1 - i], 0);
        assert_trace_op_complete(dm, &t[i].resp);
        httpc_resp_fini(&t[i].resp);
    }
}

/* ---- dumps ----------------------------------------------------------------------------------- */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* An ELF64 LE core whose segments all lie within the bytes received. */
static void assert_elf_core(const uint8_t *h, size_t n)
{
    static const uint8_t magic[4] = {0x7f, 'E', 'L', 'F'};
    assert_true(n >= 64);
    assert_memory_equal(h, magic, sizeof(magic));
    assert_int_equal(h[4], 2);         /* ELFCLASS64 */
    assert_int_equal(h[5], 1);         /* ELFDATA2LSB */
    assert_int_equal(le16(h + 16), 4); /* ET_CORE */
    uint64_t phoff = le64(h + 32);
    uint16_t phnum = le16(h + 56);
    assert_int_equal(le16(h + 54), 56);
    assert_true(phnum > 0 && phnum != 0xFFFF);
    assert_true(phoff + (uint64_t)phnum * 56 <= n);
    for (uint16_t i = 0; i < phnum; i++) {
        const uint8_t *ph = h + phoff + (uint64_t)i * 56;
        assert_true(le64(ph + 8) + le64(ph + 32) <= n); /* p_offset + p_filesz */
    }
}

/* dotmon_*.dmp files in dir. */
static int dump_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        n += strncmp(e->d_name, "dotmon_", 7) == 0 && len > 4 &&
             strcmp(e->d_name + len - 4, ".dmp") == 0;
    }
    closedir(d);
    return n;
}

/*
 * GET /dump?<selector>&type=Mini: 200, a chunked ELF core (a Mini dump is small enough for
 * httpc's in-memory body), and no dump file left in folder (dotmon's view of the dump folder).
 */
static void dump_mini(struct dotmon *dm, const char *selector, const char *folder)
{
    char target[160];
    snprintf(target, sizeof(target), "/dump?%s&type=Mini", selector);
    struct httpc_resp r;
    double t0 = testenv_now_ms();
    int rc = httpc_fetch(dm->port, "GET", target, NULL, NULL, 0, testenv_timeout(DUMP_HTTP_MS), &r);
    if (rc != 0 || r.status != 200) {
        fprintf(stderr, "GET %s: %s %s, status %d: %.*s\n", target, agent_strerror(rc), r.error,
                r.status, (int)(r.body_len > 2000 ? 2000 : r.body_len), r.body ? r.body : "");
    }
    assert_int_equal(rc, 0);
    assert_int_equal(r.status, 200);
    assert_true(r.chunked);
    assert_true(httpc_content_type_is(&r, "application/octet-stream"));
    const char *cd = httpc_header(&r, "Content-Disposition");
    assert_non_null(cd);
    assert_non_null(strstr(cd, "core_"));
    assert_elf_core((const uint8_t *)r.body, r.body_len);
    fprintf(stderr, "GET %s: %zu-byte ELF core in %.0f ms\n", target, r.body_len,
            testenv_now_ms() - t0);
    httpc_resp_fini(&r);
    assert_int_equal(dump_files(folder), 0);
}

/* ---- 1. connect mode, one app ---------------------------------------------------------------- */

static void test_sidecar_connect_pid1(void **state)
{
    require_namespaces();
    struct testenv *env = *state;
    const struct nsapp_opts o = {.tmp_dir = env->dir};
    struct test_app *app = start_ns_app(env, &o);
    pid_t host = nsapp_host_pid(app);
    assert_true(host > 1);
    char uid[37];
    only_socket_uid(env->dir, uid);

    /* dotmon watches env->dir (its TMPDIR); the app writes dumps to its /tmp, which is that. */
    char temp_folder[128];
    snprintf(temp_folder, sizeof(temp_folder), "DotnetMonitor_Storage__DumpTempFolder=%s",
             env->dir);
    const char *dm_env[] = {temp_folder, "DotnetMonitor_Storage__DumpTargetFolder=/tmp", NULL};
    struct dotmon *dm = start_dotmon(env, no_auth, dm_env, "connect mode");
    const char *uids[] = {uid};
    double took = 0;
    cJSON *list = wait_uids(dm, uids, 1, LIST_MS, &took);
    fprintf(stderr, "listed after %.0f ms\n", took);
    assert_pid1_entry(cJSON_GetArrayItem(list, 0), uid);
    cJSON_Delete(list);

    assert_process_query(dm, "pid=1", uid, app);
    char q[64];
    snprintf(q, sizeof(q), "uid=%s", uid);
    assert_process_query(dm, q, uid, app);
    /* The pid is the one the app sees; its pid in dotmon's namespace selects nothing. */
    char target[64];
    snprintf(target, sizeof(target), "/process?pid=%d", (int)host);
    agent_test_expect_problem_detail(dm, "GET", target, 400, AGENT_TEST_DM_NO_PROCESS);

    trace_gc_verbose(env, dm, app, "pid=1", "connect-pid1");
    dump_mini(dm, "pid=1", env->dir);
    agent_test_stop_dotmon_clean(dm);

    /* Without the mapping dotmon names its own path (<dir>/dotmon_1_<id>.dmp), which does not
     * exist in the app's namespace: a 400 carrying createdump's reason, no file anywhere. */
    dm = start_dotmon(env, no_auth, NULL, "connect mode, no dump folder mapping");
    cJSON_Delete(wait_uids(dm, uids, 1, LIST_MS, NULL));
    struct httpc_resp r;
    assert_int_equal(httpc_fetch(dm->port, "GET", "/dump?pid=1&type=Mini", NULL, NULL, 0,
                                 testenv_timeout(DUMP_HTTP_MS), &r),
                     0);
    fprintf(stderr, "dump without Storage:DumpTargetFolder: %d %.*s\n", r.status,
            (int)(r.body_len > 1000 ? 1000 : r.body_len), r.body);
    agent_test_assert_problem(&r, 400);
    assert_non_null(strstr(r.body, "the runtime could not write the dump"));
    httpc_resp_fini(&r);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 2. connect mode, two pid-1 apps in one directory ---------------------------------------- */

/* Both listed as pid 1 with their uids, each selectable by uid, pid=1 alone ambiguous (400), and
 * each traced by uid. */
static void check_two_apps(struct testenv *env, struct dotmon *dm, struct test_app *const *apps,
                           const char *const *uids)
{
    double took = 0;
    cJSON *list = wait_uids(dm, uids, MAX_APPS, LIST_MS, &took);
    fprintf(stderr, "both listed after %.0f ms\n", took);
    for (size_t i = 0; i < MAX_APPS; i++) {
        assert_pid1_entry(find_uid(list, uids[i]), uids[i]);
    }
    cJSON_Delete(list);
    for (size_t i = 0; i < MAX_APPS; i++) {
        char q[64];
        snprintf(q, sizeof(q), "uid=%s", uids[i]);
        assert_process_query(dm, q, uids[i], apps[i]);
    }
    /* Two processes are pid 1: pid alone selects neither, for every route, and starts nothing. */
    struct httpc_resp r;
    assert_int_equal(testenv_dotmon_get(dm, "/process?pid=1", &r), 0);
    if (r.status != 400) {
        fprintf(stderr, "GET /process?pid=1 with two pid-1 processes: %d %.*s\n", r.status,
                (int)(r.body_len > 1000 ? 1000 : r.body_len), r.body);
    } else {
        fprintf(stderr, "GET /process?pid=1 with two pid-1 processes: 400 %s\n", r.body);
    }
    agent_test_assert_problem(&r, 400);
    httpc_resp_fini(&r);
    agent_test_expect_problem(dm, "GET", "/trace?pid=1&profile=gc-verbose&durationSeconds=1", 400);
    agent_test_expect_problem(dm, "GET", "/dump?pid=1&type=Mini", 400);
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    assert_int_equal(cJSON_GetArraySize(ops), 0);
    cJSON_Delete(ops);
    trace_two_by_uid(env, dm, apps, uids);
}

static void test_sidecar_connect_two_pid1(void **state)
{
    require_namespaces();
    struct testenv *env = *state;
    const struct nsapp_opts o = {.tmp_dir = env->dir};
    struct test_app *apps[MAX_APPS];
    char uid[MAX_APPS][37];
    apps[0] = start_ns_app(env, &o);
    only_socket_uid(env->dir, uid[0]);
    apps[1] = start_ns_app(env, &o);
    new_socket_uid(env->dir, uid[0], uid[1]);
    assert_string_not_equal(uid[0], uid[1]);

    struct dotmon *dm = start_dotmon(env, no_auth, NULL, "connect mode");
    const char *uids[] = {uid[0], uid[1]};
    check_two_apps(env, dm, apps, uids);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 3. listen mode -------------------------------------------------------------------------- */

/*
 * The shared directory for listen mode: <env dir>/diag holds dotmon's socket; each app sees it as
 * /tmp/diag. share gets the host dir, sock the socket path as dotmon binds it, and app_env the
 * app's DOTNET_DiagnosticPorts entry (its own view of the path, with ",nosuspend" unless
 * suspend).
 */
struct listen_setup {
    char share[64];
    char sock[96];
    char port_env[128];
};

static void listen_prepare(struct testenv *env, struct listen_setup *ls, bool suspend)
{
    make_dir(env, SHARE_NAME, ls->share, sizeof(ls->share));
    snprintf(ls->sock, sizeof(ls->sock), "%s/" LISTEN_SOCKNAME, ls->share);
    snprintf(ls->port_env, sizeof(ls->port_env),
             "DOTNET_DiagnosticPorts=/tmp/" SHARE_NAME "/" LISTEN_SOCKNAME "%s",
             suspend ? "" : ",nosuspend");
}

/*
 * A listen-mode app: its /tmp is <env dir>/<name> (not watched by dotmon), the share bound in.
 * With wait false it returns once spawned (the caller checks that the app is held at start-up).
 */
static struct test_app *start_listen_app(struct testenv *env, const struct listen_setup *ls,
                                         const char *name, char *tmp, size_t tmp_size, bool wait)
{
    make_dir(env, name, tmp, tmp_size);
    const char *app_env[] = {ls->port_env, NULL};
    const struct nsapp_opts o = {.tmp_dir = tmp,
                                 .share_dir = ls->share,
                                 .share_name = SHARE_NAME,
                                 .extra_env = app_env,
                                 .no_wait = !wait};
    return start_ns_app(env, &o);
}

static void test_sidecar_listen_pid1(void **state)
{
    require_namespaces();
    struct testenv *env = *state;
    struct listen_setup ls;
    listen_prepare(env, &ls, false);
    char e1[256], e2[128];
    snprintf(e1, sizeof(e1), "DotnetMonitor_Storage__DumpTempFolder=%s", ls.share);
    snprintf(e2, sizeof(e2), "DotnetMonitor_Storage__DumpTargetFolder=/tmp/" SHARE_NAME);
    const char *dm_env[] = {e1, e2, NULL};
    const char *args[] = {"--no-auth", "--diagnostic-port", ls.sock, NULL};
    struct dotmon *dm = start_dotmon(env, args, dm_env, "listen mode, --diagnostic-port");
    /* dotmon bound the port (at the latest just after it started serving HTTP). */
    struct stat st;
    double end = testenv_now_ms() + testenv_timeout(2000);
    while (lstat(ls.sock, &st) != 0 && testenv_now_ms() < end) {
        testenv_sleep_ms(20);
    }
    assert_int_equal(lstat(ls.sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));

    char tmp[64];
    struct test_app *app = start_listen_app(env, &ls, "a1", tmp, sizeof(tmp), true);
    char uid[37];
    only_socket_uid(tmp, uid); /* the app's default port, in a dir dotmon does not watch */
    assert_int_equal(nsapp_list_sockets(env->dir, NULL, 0), 0);
    const char *uids[] = {uid};
    double took = 0;
    cJSON *list = wait_uids(dm, uids, 1, LIST_MS, &took);
    fprintf(stderr, "listed after %.0f ms\n", took);
    assert_pid1_entry(cJSON_GetArrayItem(list, 0), uid);
    cJSON_Delete(list);
    assert_process_query(dm, "pid=1", uid, app);
    char q[64];
    snprintf(q, sizeof(q), "uid=%s", uid);
    assert_process_query(dm, q, uid, app);

    trace_gc_verbose(env, dm, app, "pid=1", "listen-pid1");
    dump_mini(dm, "pid=1", ls.share);
    agent_test_stop_dotmon_clean(dm);
}

static void test_sidecar_listen_two_pid1(void **state)
{
    require_namespaces();
    struct testenv *env = *state;
    struct listen_setup ls;
    listen_prepare(env, &ls, false);
    /* The configuration form this time (dotnet-monitor's names). */
    char ep[256];
    snprintf(ep, sizeof(ep), "DotnetMonitor_DiagnosticPort__EndpointName=%s", ls.sock);
    const char *dm_env[] = {"DotnetMonitor_DiagnosticPort__ConnectionMode=Listen", ep, NULL};
    struct dotmon *dm =
        start_dotmon(env, no_auth, dm_env, "listen mode, DiagnosticPort:ConnectionMode=Listen");

    struct test_app *apps[MAX_APPS];
    char uid[MAX_APPS][37], tmp[MAX_APPS][64];
    for (size_t i = 0; i < MAX_APPS; i++) {
        char name[8];
        snprintf(name, sizeof(name), "a%zu", i + 1);
        apps[i] = start_listen_app(env, &ls, name, tmp[i], sizeof(tmp[i]), true);
        only_socket_uid(tmp[i], uid[i]);
    }
    assert_string_not_equal(uid[0], uid[1]);
    const char *uids[] = {uid[0], uid[1]};
    check_two_apps(env, dm, apps, uids);
    agent_test_stop_dotmon_clean(dm);
}

static void test_sidecar_listen_suspend_restart(void **state)
{
    require_namespaces();
    struct testenv *env = *state;
    struct listen_setup ls;
    listen_prepare(env, &ls, true);

    /* Without dotmon, an app whose port says suspend waits before Main: no "ready" line. */
    char tmp1[64], tmp2[64];
    struct test_app *app1 = start_listen_app(env, &ls, "a1", tmp1, sizeof(tmp1), false);
    testenv_sleep_ms(2000);
    assert_true(proc_running(app1->proc));
    assert_int_equal(proc_find_line(app1->proc, PROC_STDOUT, "ready pid=", NULL), AGENT_E_NOTFOUND);
    fprintf(stderr, "the app is held at start-up while nothing listens on its port\n");

    const char *args[] = {"--no-auth", "--diagnostic-port", ls.sock, NULL};
    double t0 = testenv_now_ms();
    struct dotmon *dm = start_dotmon(env, args, NULL, "listen mode, --diagnostic-port");
    /* dotmon resumes it: Main runs and the app answers. */
    int rc = nsapp_wait_ready(app1, 20000);
    if (rc != 0) {
        fprintf(stderr, "the suspended app never started after dotmon came up: %s\n",
                agent_strerror(rc));
        testenv_dump(env);
    }
    assert_int_equal(rc, 0);
    fprintf(stderr, "resumed %.0f ms after dotmon was started\n", testenv_now_ms() - t0);
    assert_int_equal(testenv_app_cmd(app1, "ping", 10000, NULL), 0);
    char uid1[37];
    only_socket_uid(tmp1, uid1);
    const char *uids1[] = {uid1};
    cJSON_Delete(wait_uids(dm, uids1, 1, LIST_MS, NULL));

    /* Killed and replaced at once, as a restarted container would be: within a few seconds the
     * new instance is listed and the old one is gone. */
    int st = 0;
    pid_t host1 = nsapp_host_pid(app1);
    assert_true(host1 > 1);
    assert_int_equal(nsapp_stop(app1, SIGKILL, &st), 0);
    double killed = testenv_now_ms();
    assert_false(nsapp_pid_alive(host1));
    struct test_app *app2 = start_listen_app(env, &ls, "a2", tmp2, sizeof(tmp2), true);
    assert_int_equal(testenv_app_cmd(app2, "ping", 10000, NULL), 0);
    char uid2[37];
    only_socket_uid(tmp2, uid2);
    assert_string_not_equal(uid1, uid2);
    const char *uids2[] = {uid2};
    double left = DROP_MS - (testenv_now_ms() - killed);
    cJSON *list = wait_uids(dm, uids2, 1, left > 500 ? (int)left : 500, NULL);
    fprintf(stderr, "%.0f ms after the kill only the new instance is listed\n",
            testenv_now_ms() - killed);
    assert_pid1_entry(cJSON_GetArrayItem(list, 0), uid2);
    cJSON_Delete(list);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sidecar_connect_pid1, sidecar_setup, sidecar_teardown),
        cmocka_unit_test_setup_teardown(test_sidecar_connect_two_pid1, sidecar_setup,
                                        sidecar_teardown),
        cmocka_unit_test_setup_teardown(test_sidecar_listen_pid1, sidecar_setup, sidecar_teardown),
        cmocka_unit_test_setup_teardown(test_sidecar_listen_two_pid1, sidecar_setup,
                                        sidecar_teardown),
        cmocka_unit_test_setup_teardown(test_sidecar_listen_suspend_restart, sidecar_setup,
                                        sidecar_teardown),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    if (failed == 0 && skipped_no_unshare) {
        fprintf(stderr, "every namespace test was skipped: exiting %d (ctest: skipped)\n",
                SKIP_EXIT);
        return SKIP_EXIT;
    }
    return failed;
}
