/* SPDX-License-Identifier: MIT */
/*
 * Integration: GET /dump through the real dotmon binary.
 *
 * Against real .NET TestApp processes (the runtime runs createdump):
 *  - every type (Mini, Triage, WithHeap, Full) is a complete ELF core, streamed chunked with the
 *    documented headers; the operation says Succeeded with the byte count; no file is left;
 *  - a client that hangs up mid-download, or while the runtime is still writing: the operation
 *    says Cancelled, the file goes, dotmon's descriptors return to where they were;
 *  - while a Full dump of a 1.5 GB heap is written: a second dump gets 429, and /processes
 *    answers within 100 ms every time and still lists the app;
 *  - a process killed before the dump: 502 while still listed, 400 once dropped, never a hang;
 *  - a folder the app cannot write to: 400 with the HRESULT and createdump's message;
 *  - folder mapping: a symlinked alias, and the /proc/<pid>/root fallback.
 *
 * Against the fake runtime (tests/support/fake_runtime) on a thread of this test process, which
 * dotmon discovers like any runtime: the GenerateCoreDump3 -> 2 -> 1 fallback, a runtime that
 * never answers (504 with Dump:TimeoutSeconds=1, the process stays listed), one that answers after
 * the deadline (the late file is deleted, also when it is reached through /proc/<pid>/root), and a
 * GenerateCoreDump3 error message.
 *
 * Bodies are read with a raw socket and a chunked decoder that counts them (a Full dump is
 * hundreds of MB to GB): only the first PREFIX_MAX bytes are kept, to check the ELF headers.
 */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
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
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "buf.h"
#include "err.h"
#include "fake_runtime.h"
#include "fake_thread.h"

#define DUMP_HTTP_MS    300000
#define PREFIX_MAX      ((size_t)4 << 20)
#define READ_SIZE       ((size_t)256 << 10)
#define MAX_PROBLEM     ((size_t)1 << 20)
#define WATCHDOG_LONG_S 600

static const char *const no_auth[] = {"--no-auth", NULL};

/* ---- a streaming GET on a raw socket --------------------------------------------------------- */

struct dump_get {
    uint16_t port;
    char target[512];
    uint64_t stop_after; /* > 0: hang up once this many body bytes came */
    int stop_pause_ms;   /* with stop_after: stop reading this long before hanging up */
    bool hash;           /* FNV-1a over the body (fake runtime dumps) */
    int rc;              /* 0: a complete response, or stop_after reached */
    char error[256];
    struct httpc_resp resp; /* status and headers; for anything but a chunked 200 also the body */
    uint64_t body_bytes;
    bool complete;   /* the last chunk came */
    uint8_t *prefix; /* the first PREFIX_MAX bytes of a 200 body */
    size_t prefix_len;
    uint64_t body_hash;
    double head_ms;   /* request start to the end of the response head */
    double end_ms;    /* request start to the end (or the hang-up) */
    atomic_int phase; /* 0 waiting for the head, 1 streaming the body, 2 done */
    pthread_t th;
};

enum ck_state { CK_SIZE, CK_DATA, CK_DATA_END, CK_TRAILER, CK_DONE };

/* An incremental, strict decoder of chunked framing (RFC 9112 §7.1, no extensions, no trailers). */
struct chunked {
    enum ck_state st;
    char line[40];
    size_t line_len;
    uint64_t left;
};

static void body_bytes(struct dump_get *g, const uint8_t *p, size_t n)
{
    if (g->prefix_len < PREFIX_MAX) {
        size_t k = PREFIX_MAX - g->prefix_len < n ? PREFIX_MAX - g->prefix_len : n;
        memcpy(g->prefix + g->prefix_len, p, k);
        g->prefix_len += k;
    }
    if (g->hash) {
        g->body_hash = fake_fnv1a(g->body_hash, p, n);
    }
    g->body_bytes += n;
}

/* Collects one CRLF-terminated line; returns 1 when complete, 0 for more, -1 if malformed. */
static int ck_line(struct chunked *c, uint8_t b)
{
    if (c->line_len + 1 >= sizeof(c->line)) {
        return -1;
    }
    c->line[c->line_len++] = (char)b;
    if (b != '\n') {
        return 0;
    }
    if (c->line_len < 2 || c->line[c->line_len - 2] != '\r') {
        return -1;
    }
    c->line[c->line_len - 2] = '\0';
    c->line_len = 0;
    return 1;
}

/* Feeds n bytes; returns 0, or -1 with g->error set. */
static int ck_feed(struct dump_get *g, struct chunked *c, const uint8_t *p, size_t n)
{
    size_t i = 0;
    while (i < n && c->st != CK_DONE) {
        if (c->st == CK_DATA) {
            size_t k = n - i < c->left ? n - i : (size_t)c->left;
            body_bytes(g, p + i, k);
            i += k;
            c->left -= k;
            if (c->left == 0) {
                c->st = CK_DATA_END;
            }
            continue;
        }
        int r = ck_line(c, p[i++]);
        if (r < 0) {
            snprintf(g->error, sizeof(g->error), "malformed chunk framing after %llu body bytes",
                     (unsigned long long)g->body_bytes);
            return -1;
        }
        if (r == 0) {
            continue;
        }
        if (c->st == CK_SIZE) {
            uint64_t v = 0;
            size_t len = strlen(c->line);
            bool ok = len > 0 && len <= 15;
            for (size_t k = 0; ok && k < len; k++) {
                char ch = c->line[k];
                int d = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                        : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                                 : -1;
                ok = d >= 0;
                v = v * 16 + (uint64_t)(d < 0 ? 0 : d);
            }
            if (!ok) {
                snprintf(g->error, sizeof(g->error), "bad chunk size line '%s'", c->line);
                return -1;
            }
            c->left = v;
            c->st = v == 0 ? CK_TRAILER : CK_DATA;
        } else if (c->st == CK_DATA_END || c->st == CK_TRAILER) {
            if (c->line[0] != '\0') {
                snprintf(g->error, sizeof(g->error), "unexpected '%s' after a chunk", c->line);
                return -1;
            }
            c->st = c->st == CK_DATA_END ? CK_SIZE : CK_DONE;
        }
    }
    return 0;
}

/* Waits (until deadline) for bytes and reads them: 0 and *got (0 at EOF), or an error code. */
static int read_some(int fd, uint8_t *b, size_t cap, double deadline, size_t *got)
{
    for (;;) {
        int left = (int)(deadline - testenv_now_ms());
        if (left <= 0) {
            return AGENT_E_TIMEOUT;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, left);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -errno;
        }
        if (r == 0) {
            return AGENT_E_TIMEOUT;
        }
        ssize_t k = read(fd, b, cap);
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            return errno == ECONNRESET ? AGENT_E_CLOSED : -errno;
        }
        *got = (size_t)k;
        return 0;
    }
}

/* Reads the rest of a response that is not a chunked 200 into g->resp (it is small). */
static void read_whole(struct dump_get *g, int fd, struct buf *all, uint8_t *rb, double deadline)
{
    for (;;) {
        int prc = httpc_parse(buf_data(all), buf_size(all), NULL, &g->resp, NULL);
        if (prc == 0) {
            return;
        }
        httpc_resp_fini(&g->resp);
        if (prc != AGENT_E_CLOSED || buf_size(all) > MAX_PROBLEM) {
            g->rc = prc != AGENT_E_CLOSED ? prc : AGENT_E_TOOBIG;
            snprintf(g->error, sizeof(g->error), "unparseable response (%s)", agent_strerror(prc));
            return;
        }
        size_t got = 0;
        int rc = read_some(fd, rb, READ_SIZE, deadline, &got);
        if (rc != 0 || got == 0) {
            g->rc = rc != 0 ? rc : AGENT_E_CLOSED;
            snprintf(g->error, sizeof(g->error), "incomplete response (%s)", agent_strerror(g->rc));
            return;
        }
        if (buf_append(all, rb, got) != 0) {
            g->rc = -ENOMEM;
            return;
        }
    }
}

/* Streams the body of a chunked 200, starting with the bytes that came with the head. */
static void read_stream(struct dump_get *g, int fd, const uint8_t *first, size_t n_first,
                        uint8_t *rb, double deadline)
{
    struct chunked ck = {.st = CK_SIZE};
    if (ck_feed(g, &ck, first, n_first) != 0) {
        g->rc = AGENT_E_PROTO;
        return;
    }
    while (ck.st != CK_DONE) {
        if (g->stop_after > 0 && g->body_bytes >= g->stop_after) {
            testenv_sleep_ms(g->stop_pause_ms);
            return; /* the caller hangs up */
        }
        size_t got = 0;
        int rc = read_some(fd, rb, READ_SIZE, deadline, &got);
        if (rc != 0 || got == 0) {
            g->rc = rc != 0 ? rc : AGENT_E_CLOSED;
            snprintf(g->error, sizeof(g->error), "the body ended after %llu bytes (%s)",
                     (unsigned long long)g->body_bytes, agent_strerror(g->rc));
            return;
        }
        if (ck_feed(g, &ck, rb, got) != 0) {
            g->rc = AGENT_E_PROTO;
            return;
        }
    }
    g->complete = true;
}

static void dump_get_run(struct dump_get *g)
{
    double t0 = testenv_now_ms();
    double deadline = t0 + testenv_timeout(DUMP_HTTP_MS);
    g->body_hash = FAKE_FNV_INIT;
    g->prefix = malloc(PREFIX_MAX);
    uint8_t *rb = malloc(READ_SIZE);
    struct buf all;
    buf_init(&all, 0);
    int fd = testenv_connect_port(g->port);
    if (g->prefix == NULL || rb == NULL || fd < 0) {
        g->rc = fd < 0 ? fd : -ENOMEM;
        snprintf(g->error, sizeof(g->error), "cannot connect: %s", agent_strerror(g->rc));
        goto out;
    }
    char req[700];
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\n\r\n", g->target,
                     (unsigned)g->port);
    if (n <= 0 || (size_t)n >= sizeof(req) || write(fd, req, (size_t)n) != n) {
        g->rc = AGENT_E_CLOSED;
        snprintf(g->error, sizeof(g->error), "cannot send the request");
        goto out;
    }
    /* The head. */
    const uint8_t *end = NULL;
    while (end == NULL) {
        size_t got = 0;
        int rc = read_some(fd, rb, READ_SIZE, deadline, &got);
        if (rc != 0 || got == 0) {
            g->rc = rc != 0 ? rc : AGENT_E_CLOSED;
            snprintf(g->error, sizeof(g->error), "no response head after %.0f ms (%s)",
                     testenv_now_ms() - t0, agent_strerror(g->rc));
            goto out;
        }
        if (buf_append(&all, rb, got) != 0) {
            g->rc = -ENOMEM;
            goto out;
        }
        const uint8_t *d = buf_data(&all);
        for (size_t i = 3; i < buf_size(&all) && end == NULL; i++) {
            if (memcmp(d + i - 3, "\r\n\r\n", 4) == 0) {
                end = d + i + 1;
            }
        }
    }
    g->head_ms = testenv_now_ms() - t0;
    size_t head_len = (size_t)(end - buf_data(&all));
    /* The head alone, closed by an empty last chunk, tells a chunked 200 (parsed strictly by
     * httpc) from a small answer read whole. */
    struct buf probe;
    buf_init(&probe, 0);
    int prc = buf_append(&probe, buf_data(&all), head_len);
    prc = prc ? prc : buf_append_str(&probe, "0\r\n\r\n");
    prc = prc ? prc : httpc_parse(buf_data(&probe), buf_size(&probe), NULL, &g->resp, NULL);
    buf_fini(&probe);
    if (prc == 0 && g->resp.status == 200 && g->resp.chunked) {
        atomic_store(&g->phase, 1);
        read_stream(g, fd, buf_data(&all) + head_len, buf_size(&all) - head_len, rb, deadline);
    } else {
        httpc_resp_fini(&g->resp);
        read_whole(g, fd, &all, rb, deadline);
    }
out:
    g->end_ms = testenv_now_ms() - t0;
    if (fd >= 0) {
        close(fd);
    }
    buf_fini(&all);
    free(rb);
    atomic_store(&g->phase, 2);
}

static void dump_vprepare(struct dump_get *g, struct dotmon *dm, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
static void dump_vprepare(struct dump_get *g, struct dotmon *dm, const char *fmt, va_list ap)
{
    memset(g, 0, sizeof(*g));
    g->port = dm->port;
    vsnprintf(g->target, sizeof(g->target), fmt, ap);
    atomic_init(&g->phase, 0);
}

/* Prepares *g for GET target (printf format) on dotmon's port; set options, then run or spawn. */
static void dump_prepare(struct dump_get *g, struct dotmon *dm, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void dump_prepare(struct dump_get *g, struct dotmon *dm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dump_vprepare(g, dm, fmt, ap);
    va_end(ap);
}

/* dump_prepare + dump_get_run. */
static void dump_get(struct dump_get *g, struct dotmon *dm, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void dump_get(struct dump_get *g, struct dotmon *dm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dump_vprepare(g, dm, fmt, ap);
    va_end(ap);
    dump_get_run(g);
}

static void *dump_get_thread(void *arg)
{
    dump_get_run(arg);
    return NULL;
}

/* Runs the prepared request on a thread (the test polls dotmon meanwhile); join with
 * dump_get_join. */
static void dump_get_spawn(struct dump_get *g)
{
    assert_int_equal(pthread_create(&g->th, NULL, dump_get_thread, g), 0);
}

static void dump_get_join(struct dump_get *g)
{
    assert_int_equal(pthread_join(g->th, NULL), 0);
}

static void dump_get_fini(struct dump_get *g)
{
    httpc_resp_fini(&g->resp);
    free(g->prefix);
    g->prefix = NULL;
}

static void show_get(const struct dump_get *g)
{
    fprintf(stderr, "GET %s: rc %d (%s) %s; status %d, %llu body bytes%s; body: %.*s\n", g->target,
            g->rc, agent_strerror(g->rc), g->error, g->resp.status,
            (unsigned long long)g->body_bytes, g->complete ? " (complete)" : "",
            g->resp.body != NULL ? (int)(g->resp.body_len > 1500 ? 1500 : g->resp.body_len) : 0,
            g->resp.body != NULL ? g->resp.body : "");
}

/* ---- checks ---------------------------------------------------------------------------------- */

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

/*
 * The body is an ELF64 little-endian core (e_type ET_CORE), and every segment its program headers
 * describe lies within the bytes received: a cut transfer cannot pass for a complete core.
 */
static void assert_elf_core(const struct dump_get *g)
{
    const uint8_t *h = g->prefix;
    static const uint8_t magic[4] = {0x7f, 'E', 'L', 'F'};
    bool ok = g->prefix_len >= 64 && memcmp(h, magic, sizeof(magic)) == 0;
    if (!ok) {
        fprintf(stderr, "%s: not ELF (%llu bytes, first: %02x %02x %02x %02x)\n", g->target,
                (unsigned long long)g->body_bytes, g->prefix_len > 0 ? h[0] : 0,
                g->prefix_len > 1 ? h[1] : 0, g->prefix_len > 2 ? h[2] : 0,
                g->prefix_len > 3 ? h[3] : 0);
    }
    assert_true(ok);
    assert_int_equal(h[4], 2);         /* ELFCLASS64 */
    assert_int_equal(h[5], 1);         /* ELFDATA2LSB */
    assert_int_equal(le16(h + 16), 4); /* ET_CORE */
    uint64_t phoff = le64(h + 32);
    uint16_t phentsize = le16(h + 54);
    uint16_t phnum = le16(h + 56);
    assert_true(phnum > 0);
    assert_int_equal(phentsize, 56);
    if (phnum == 0xFFFF || phoff + (uint64_t)phnum * 56 > g->prefix_len) {
        fprintf(stderr,
                "%s: %u program headers at %llu, past the first %zu bytes: segments not "
                "checked\n",
                g->target, (unsigned)phnum, (unsigned long long)phoff, g->prefix_len);
        return;
    }
    uint64_t furthest = 0;
    for (uint16_t i = 0; i < phnum; i++) {
        const uint8_t *ph = h + phoff + (uint64_t)i * 56;
        uint64_t seg_end = le64(ph + 8) + le64(ph + 32); /* p_offset + p_filesz */
        furthest = seg_end > furthest ? seg_end : furthest;
    }
    if (furthest > g->body_bytes) {
        fprintf(stderr, "%s: segments reach %llu but only %llu bytes came\n", g->target,
                (unsigned long long)furthest, (unsigned long long)g->body_bytes);
    }
    assert_true(furthest <= g->body_bytes);
}

/* The operation id in Location, which must be http://127.0.0.1:<port>/operations/<guid>. */
static void location_op_id(const struct dump_get *g, char *id, size_t cap)
{
    const char *loc = httpc_header(&g->resp, "Location");
    assert_non_null(loc);
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "http://127.0.0.1:%u/operations/", (unsigned)g->port);
    if (strncmp(loc, prefix, strlen(prefix)) != 0 || !agent_test_is_guid(loc + strlen(prefix))) {
        fprintf(stderr, "Location '%s' is not %s<guid>\n", loc, prefix);
        fail();
    }
    snprintf(id, cap, "%s", loc + strlen(prefix));
}

/* A 200 dump answer: complete chunked application/octet-stream with the attachment name and
 * the operation's Location; id gets the operation id, filename the attachment name. */
static void assert_dump_200(const struct dump_get *g, char *id, size_t id_cap, char *filename,
                            size_t fn_cap)
{
    if (g->rc != 0 || g->resp.status != 200 || !g->complete) {
        show_get(g);
    }
    assert_int_equal(g->rc, 0);
    assert_int_equal(g->resp.status, 200);
    assert_true(g->complete);
    assert_true(g->body_bytes > 0);
    assert_true(httpc_content_type_is(&g->resp, "application/octet-stream"));
    const char *cd = httpc_header(&g->resp, "Content-Disposition");
    assert_non_null(cd);
    /* attachment; filename="core_yyyyMMdd_HHmmss_fff" (dotnet-monitor's name) */
    static const char pre[] = "attachment; filename=\"core_";
    bool ok = strncmp(cd, pre, sizeof(pre) - 1) == 0 && strlen(cd) == sizeof(pre) - 1 + 20;
    for (size_t i = 0; ok && i < 19; i++) {
        char ch = cd[sizeof(pre) - 1 + i];
        ok = (i == 8 || i == 15) ? ch == '_' : (ch >= '0' && ch <= '9');
    }
    ok = ok && cd[sizeof(pre) - 1 + 19] == '"';
    if (!ok) {
        fprintf(stderr,
                "Content-Disposition '%s' is not attachment; filename=\"core_<yyyyMMdd_"
                "HHmmss_fff>\"\n",
                cd);
    }
    assert_true(ok);
    snprintf(filename, fn_cap, "%.24s", cd + strlen("attachment; filename=\""));
    location_op_id(g, id, id_cap);
}

/* The problem detail of a non-200 answer (asserting it is a problem+json with this status). */
static char *problem_detail(const struct dump_get *g, int status)
{
    if (g->rc != 0) {
        show_get(g);
    }
    assert_int_equal(g->rc, 0);
    agent_test_assert_problem(&g->resp, status);
    cJSON *j = cJSON_ParseWithLength(g->resp.body, g->resp.body_len);
    char *detail = strdup(agent_test_str(j, "detail"));
    cJSON_Delete(j);
    assert_non_null(detail);
    return detail;
}

static cJSON *get_op(struct dotmon *dm, const char *id)
{
    char target[128];
    snprintf(target, sizeof(target), "/operations/%s/details", id);
    return agent_test_get_json(dm, target, 200);
}

/* The id of the only operation dotmon lists (error answers carry no Location). */
static void only_op_id(struct dotmon *dm, char *id, size_t cap)
{
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    assert_int_equal(cJSON_GetArraySize(ops), 1);
    snprintf(id, cap, "%s", agent_test_str(cJSON_GetArrayItem(ops, 0), "operationId"));
    cJSON_Delete(ops);
}

/* Polls the operation until its status is want (timeout_ms, scaled); returns it. */
static cJSON *wait_op_status(struct dotmon *dm, const char *id, const char *want, int timeout_ms)
{
    double end = testenv_now_ms() + testenv_timeout(timeout_ms);
    for (;;) {
        cJSON *op = get_op(dm, id);
        const char *s = agent_test_str(op, "status");
        if (strcmp(s, want) == 0) {
            return op;
        }
        if (testenv_now_ms() > end) {
            char *txt = cJSON_PrintUnformatted(op);
            fprintf(stderr, "operation %s never became %s: %s\n", id, want, txt);
            free(txt);
            cJSON_Delete(op);
            fail();
        }
        cJSON_Delete(op);
        testenv_sleep_ms(20);
    }
}

/* How many dotmon_*.dmp files dir holds (printing them). */
static int dump_files(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (strncmp(e->d_name, "dotmon_", 7) == 0 && len > 4 &&
            strcmp(e->d_name + len - 4, ".dmp") == 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* Waits (timeout_ms, scaled) until dir holds no dump file; returns how long that took. */
static double wait_no_dump_files(const char *dir, int timeout_ms)
{
    double t0 = testenv_now_ms();
    double end = t0 + testenv_timeout(timeout_ms);
    while (dump_files(dir) > 0) {
        if (testenv_now_ms() > end) {
            fprintf(stderr, "%s still holds %d dump file(s) after %d ms\n", dir, dump_files(dir),
                    timeout_ms);
            fail();
        }
        testenv_sleep_ms(20);
    }
    return testenv_now_ms() - t0;
}

/* Entries of dir other than . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

/* The operation of a finished download: Succeeded, the dump fields agree with what came. */
static void assert_op_succeeded(struct dotmon *dm, const char *id, const char *type,
                                const char *filename, uint64_t bytes, int version)
{
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Succeeded");
    assert_string_equal(agent_test_str(op, "artifactName"), filename);
    cJSON *d = cJSON_GetObjectItemCaseSensitive(op, "dump");
    assert_non_null(d);
    assert_string_equal(agent_test_str(d, "dumpType"), type);
    assert_int_equal(agent_test_int(d, "bytes"), (long long)bytes);
    assert_int_equal(agent_test_int(d, "size"), (long long)bytes);
    if (version > 0) {
        assert_int_equal(agent_test_int(d, "generateCoreDumpVersion"), version);
    }
    cJSON_Delete(op);
}

/* Starts a TestApp (allocating alloc_mb first if > 0) and a dotmon (extra env) listing it. */
static struct dotmon *start_app_and_dotmon(struct testenv *env, const char *const *dm_env,
                                           int alloc_mb, struct test_app **app)
{
    *app = agent_test_start_app(env);
    if (alloc_mb > 0) {
        char cmd[32];
        snprintf(cmd, sizeof(cmd), "alloc %d", alloc_mb);
        double t0 = testenv_now_ms();
        assert_int_equal(testenv_app_cmd(*app, cmd, 120000, NULL), 0);
        fprintf(stderr, "the app allocated %d MB in %.0f ms (RSS %ld MB)\n", alloc_mb,
                testenv_now_ms() - t0, testenv_rss_kb((*app)->pid) / 1024);
    }
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_auth, dm_env, &dm), 0);
    cJSON_Delete(agent_test_wait_processes(dm, &(*app)->pid, 1, 10000));
    return dm;
}

/* A Mini dump that must succeed (dotmon still serves dumps). */
static void expect_mini_dump(struct dotmon *dm, pid_t pid)
{
    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)pid);
    char id[64], fn[32];
    assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
    assert_elf_core(&g);
    assert_op_succeeded(dm, id, "Mini", fn, g.body_bytes, 0);
    dump_get_fini(&g);
}

/* ---- 1. every type --------------------------------------------------------------------------- */

static void test_agent_dump_every_type(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, NULL, 0, &app);

    static const char *const types[] = {"Mini", "Triage", "WithHeap", "Full"};
    uint64_t sizes[4] = {0};
    bool refused = false;
    for (size_t i = 0; i < 4; i++) {
        struct dump_get g;
        dump_get(&g, dm, "/dump?pid=%d&type=%s", (int)app->pid, types[i]);
        if (i == 0 && g.rc == 0 && g.resp.status == 400) {
            refused = true;
            char *detail = problem_detail(&g, 400);
            fprintf(stderr,
                    "NOTE: the runtime cannot write dumps on this machine (ptrace denied?): "
                    "%s\n",
                    detail);
            free(detail);
        }
        if (refused) {
            /* Then every type must say why, with the runtime's HRESULT. */
            char *detail = problem_detail(&g, 400);
            assert_non_null(strstr(detail, "the runtime could not write the dump"));
            assert_non_null(strstr(detail, "(0x"));
            free(detail);
            dump_get_fini(&g);
            continue;
        }
        char id[64], fn[32];
        assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
        assert_elf_core(&g);
        assert_op_succeeded(dm, id, types[i], fn, g.body_bytes, 3);
        assert_int_equal(dump_files(env->dir), 0);
        sizes[i] = g.body_bytes;
        fprintf(stderr,
                "dump %-8s %11llu bytes: written by the runtime in %5.0f ms, streamed in "
                "%5.0f ms\n",
                types[i], (unsigned long long)g.body_bytes, g.head_ms, g.end_ms - g.head_ms);
        dump_get_fini(&g);
    }
    if (!refused) {
        assert_true(sizes[0] <= sizes[3]);
    }

    /* The type is case-insensitive and defaults to WithHeap; anything else is a 400 that starts
     * no operation. */
    if (!refused) {
        struct dump_get g;
        dump_get(&g, dm, "/dump?pid=%d&type=mINi", (int)app->pid);
        char id[64], fn[32];
        assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
        assert_op_succeeded(dm, id, "Mini", fn, g.body_bytes, 3);
        dump_get_fini(&g);
        dump_get(&g, dm, "/dump?pid=%d", (int)app->pid);
        assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
        assert_elf_core(&g);
        assert_op_succeeded(dm, id, "WithHeap", fn, g.body_bytes, 3);
        dump_get_fini(&g);
    }
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    int nops = cJSON_GetArraySize(ops);
    cJSON_Delete(ops);
    char target[128];
    snprintf(target, sizeof(target), "/dump?pid=%d&type=Huge", (int)app->pid);
    agent_test_expect_problem(dm, "GET", target, 400);
    ops = agent_test_get_json(dm, "/operations", 200);
    assert_int_equal(cJSON_GetArraySize(ops), nops);
    cJSON_Delete(ops);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 2. the client leaves -------------------------------------------------------------------- */

/*
 * Reads 1 MiB of a Full dump and hangs up, after pause_ms without reading (0: while dotmon is
 * still reading the file; 500: while it waits for the socket to drain, no read in flight).
 */
static void hang_up_mid_download(struct testenv *env, struct dotmon *dm, pid_t pid, int pause_ms)
{
    pid_t dpid = proc_pid(dm->proc);
    int fds0 = agent_test_fd_baseline(dpid);
    struct dump_get g;
    dump_prepare(&g, dm, "/dump?pid=%d&type=Full", (int)pid);
    g.stop_after = (uint64_t)1 << 20;
    g.stop_pause_ms = pause_ms;
    dump_get_run(&g);
    if (g.rc != 0 || g.resp.status != 200 || g.body_bytes < g.stop_after) {
        show_get(&g);
    }
    assert_int_equal(g.rc, 0);
    assert_int_equal(g.resp.status, 200);
    assert_false(g.complete);
    assert_true(g.body_bytes >= g.stop_after);
    char id[64];
    location_op_id(&g, id, sizeof(id));
    double t0 = testenv_now_ms();
    cJSON *op = wait_op_status(dm, id, "Cancelled", 5000);
    double cancelled_ms = testenv_now_ms() - t0;
    cJSON *d = cJSON_GetObjectItemCaseSensitive(op, "dump");
    long long sent = agent_test_int(d, "bytes");
    /* The size is known once the runtime has finished writing; the dump streams while it writes,
     * so a client that leaves early may leave before that. */
    const cJSON *sz = cJSON_GetObjectItemCaseSensitive(d, "size");
    long long size = cJSON_IsNumber(sz) ? (long long)sz->valuedouble : -1;
    cJSON_Delete(op);
    /* dotmon sent at least what was read, and not the whole file. */
    assert_true(sent >= (long long)g.body_bytes);
    assert_true(size < 0 || sent < size);
    double gone_ms = wait_no_dump_files(env->dir, 5000);
    int fds1 = agent_test_wait_fds(dpid, fds0, 5000);
    fprintf(stderr,
            "hung up after %llu of %lld bytes (%d ms pause): Cancelled after %.0f ms "
            "(dotmon read %lld), no file after %.0f ms, fds %d -> %d\n",
            (unsigned long long)g.body_bytes, size, pause_ms, cancelled_ms, sent, gone_ms, fds0,
            fds1);
    assert_int_equal(fds1, fds0);
    dump_get_fini(&g);
}

static void test_agent_dump_client_leaves_mid_download(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, NULL, 0, &app);

    /* Warm up (libuv's thread pool, allocator arenas) before the fd baselines. */
    expect_mini_dump(dm, app->pid);
    hang_up_mid_download(env, dm, app->pid, 0);
    hang_up_mid_download(env, dm, app->pid, 500);

    /* Still serving: the list, and another dump (the concurrency slot was given back). */
    cJSON_Delete(agent_test_wait_processes(dm, &app->pid, 1, 1000));
    expect_mini_dump(dm, app->pid);
    agent_test_stop_dotmon_clean(dm);
}

/* Polls /operations until one dump is Running; returns its id in id. */
static void wait_running_dump(struct dotmon *dm, char *id, size_t cap, int timeout_ms)
{
    double end = testenv_now_ms() + testenv_timeout(timeout_ms);
    for (;;) {
        cJSON *ops = agent_test_get_json(dm, "/operations", 200);
        cJSON *o;
        bool found = false;
        cJSON_ArrayForEach(o, ops)
        {
            if (strcmp(agent_test_str(o, "status"), "Running") == 0) {
                snprintf(id, cap, "%s", agent_test_str(o, "operationId"));
                found = true;
            }
        }
        cJSON_Delete(ops);
        if (found) {
            return;
        }
        assert_true(testenv_now_ms() < end);
        testenv_sleep_ms(10);
    }
}

/*
 * The client hangs up while the runtime is still writing: the operation is Cancelled at once,
 * and the file the runtime finishes later is deleted then.
 */
static void test_agent_dump_client_leaves_while_writing(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_LONG_S);
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, NULL, 1024, &app);
    pid_t dpid = proc_pid(dm->proc);
    expect_mini_dump(dm, app->pid);
    int fds0 = agent_test_fd_baseline(dpid);

    int fd = testenv_connect_port(dm->port);
    assert_true(fd >= 0);
    char req[256];
    int n = snprintf(req, sizeof(req), "GET /dump?pid=%d&type=Full HTTP/1.1\r\nHost: x\r\n\r\n",
                     (int)app->pid);
    assert_int_equal(write(fd, req, (size_t)n), n);
    char id[64];
    wait_running_dump(dm, id, sizeof(id), 5000);
    /*
     * Hang up once the response has begun: dotmon streams the file while createdump writes it
     * (for seconds with this heap), having deleted its name as soon as it opened it.
     */
    double t0 = testenv_now_ms();
    char head[16] = "";
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, testenv_timeout(10000)), 1);
    assert_true(read(fd, head, sizeof(head) - 1) >= 12);
    assert_memory_equal(head, "HTTP/1.1 200", 12);
    double appeared_ms = testenv_now_ms() - t0;
    close(fd);
    double t1 = testenv_now_ms();
    cJSON_Delete(wait_op_status(dm, id, "Cancelled", 2000));
    double cancelled_ms = testenv_now_ms() - t1;
    /* The process stays listed while the runtime is busy writing. */
    cJSON *arr = agent_test_get_json(dm, "/processes", 200);
    assert_non_null(agent_test_find_pid(arr, app->pid));
    cJSON_Delete(arr);
    double gone_ms = wait_no_dump_files(env->dir, 120000);
    int fds1 = agent_test_wait_fds(dpid, fds0, 5000);
    fprintf(stderr,
            "response began %.0f ms after the request was Running; hung up: Cancelled "
            "after %.0f ms, file deleted %.0f ms after the hang-up; fds %d -> %d\n",
            appeared_ms, cancelled_ms, gone_ms, fds0, fds1);
    assert_int_equal(fds1, fds0);
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Cancelled");
    cJSON_Delete(op);
    expect_mini_dump(dm, app->pid);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 3. a long Full dump: 429 for the next, /processes stays fast ---------------------------- */

struct latency {
    unsigned n;
    double max_ms, sum_ms;
};

/* GET /processes on a kept-alive connection: times it and checks the app is listed. */
static void sample_processes(struct httpc *c, pid_t pid, struct latency *lat)
{
    struct httpc_resp r;
    int rc = httpc_request(c, "GET", "/processes", NULL, NULL, 0, &r);
    cJSON *arr = rc == 0 && r.status == 200 ? cJSON_ParseWithLength(r.body, r.body_len) : NULL;
    bool listed = arr != NULL && agent_test_find_pid(arr, pid) != NULL;
    if (!listed) {
        fprintf(stderr, "/processes during the dump: rc %d %s status %d body %.*s\n", rc, r.error,
                r.status, r.body != NULL ? (int)r.body_len : 0, r.body != NULL ? r.body : "");
    }
    double ms = r.latency_ms;
    cJSON_Delete(arr);
    httpc_resp_fini(&r);
    assert_true(listed);
    lat->n++;
    lat->sum_ms += ms;
    lat->max_ms = ms > lat->max_ms ? ms : lat->max_ms;
}

static void test_agent_dump_long_full_dump(void **state)
{
    struct testenv *env = *state;
    testenv_watchdog(WATCHDOG_LONG_S);
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, NULL, 1536, &app);

    struct dump_get g;
    dump_prepare(&g, dm, "/dump?pid=%d&type=Full", (int)app->pid);
    dump_get_spawn(&g);
    char id[64];
    wait_running_dump(dm, id, sizeof(id), 5000);

    /* One dump at a time (RequestLimits:Dump:MaxConcurrency 1): the next is refused at once and
     * starts no operation. */
    struct dump_get second;
    dump_get(&second, dm, "/dump?pid=%d&type=Mini", (int)app->pid);
    char *detail = problem_detail(&second, 429);
    fprintf(stderr, "second dump: 429 after %.0f ms: %s\n", second.end_ms, detail);
    free(detail);
    dump_get_fini(&second);
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    assert_int_equal(cJSON_GetArraySize(ops), 1);
    cJSON_Delete(ops);

    /* While the runtime writes, and then while dotmon streams, /processes answers quickly and
     * lists the app (discovery knows it is busy and does not probe it). */
    struct httpc c;
    httpc_init(&c, "127.0.0.1", dm->port, testenv_timeout(10000));
    struct latency writing = {0}, streaming = {0};
    while (atomic_load(&g.phase) == 0) {
        sample_processes(&c, app->pid, &writing);
        testenv_sleep_ms(20);
    }
    while (atomic_load(&g.phase) == 1) {
        sample_processes(&c, app->pid, &streaming);
        testenv_sleep_ms(20);
    }
    httpc_fini(&c);
    dump_get_join(&g);
    char fn[32];
    assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
    assert_elf_core(&g);
    assert_op_succeeded(dm, id, "Full", fn, g.body_bytes, 3);
    fprintf(stderr,
            "Full dump of a 1536 MB heap: %llu bytes, written in %.0f ms, streamed in %.0f "
            "ms (%.0f MB/s)\n",
            (unsigned long long)g.body_bytes, g.head_ms, g.end_ms - g.head_ms,
            (double)g.body_bytes / 1e6 / ((g.end_ms - g.head_ms) / 1000.0));
    fprintf(stderr, "/processes while the runtime wrote: %u requests, max %.1f ms, mean %.1f ms\n",
            writing.n, writing.max_ms, writing.n ? writing.sum_ms / writing.n : 0.0);
    fprintf(stderr, "/processes while dotmon streamed:   %u requests, max %.1f ms, mean %.1f ms\n",
            streaming.n, streaming.max_ms, streaming.n ? streaming.sum_ms / streaming.n : 0.0);
    assert_true(g.body_bytes > (uint64_t)1536 << 20);
    /* The write must have lasted long enough to say something. */
    assert_true(writing.n >= 10);
    /* Not blocked: a loop that waited for the runtime would hold /processes for about the whole
     * write (seconds); under load one answer may take tens of ms (a bound relative to the
     * write, not a timing target: those live in bench/). */
    assert_true(writing.max_ms < g.head_ms / 4);
    dump_get_fini(&g);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 4. a process that is gone --------------------------------------------------------------- */

static void test_agent_dump_dead_process(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, NULL, 0, &app);
    pid_t pid = app->pid;
    int st = 0;
    assert_int_equal(testenv_stop_app(app, SIGKILL, &st), 0);

    /* Right away: most likely still listed (its socket file stays after SIGKILL), so dotmon tries
     * and cannot connect: 502. If discovery was quicker, 400 (no such process). Never a hang or an
     * empty 200. */
    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)pid);
    int status = g.resp.status;
    if (status != 502 && status != 400) {
        show_get(&g);
    }
    assert_true(status == 502 || status == 400);
    char *detail = problem_detail(&g, status);
    fprintf(stderr, "dump right after SIGKILL: %d after %.0f ms: %s\n", status, g.end_ms, detail);
    assert_true(g.end_ms < testenv_timeout(10000));
    if (status == 502) {
        char pid_s[32];
        snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
        assert_non_null(strstr(detail, pid_s));
        /* That attempt is a Failed operation saying why. */
        char id[64];
        only_op_id(dm, id, sizeof(id));
        cJSON *op = get_op(dm, id);
        assert_string_equal(agent_test_str(op, "status"), "Failed");
        cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");
        assert_string_equal(agent_test_str(err, "code"), "RuntimeUnreachable");
        cJSON_Delete(op);
    }
    free(detail);
    dump_get_fini(&g);

    /* Once discovery dropped it: 400 (dotnet-monitor's "no target process"), no operation. */
    cJSON_Delete(agent_test_wait_processes(dm, NULL, 0, 10000));
    cJSON *ops = agent_test_get_json(dm, "/operations", 200);
    int nops = cJSON_GetArraySize(ops);
    cJSON_Delete(ops);
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)pid);
    detail = problem_detail(&g, 400);
    fprintf(stderr, "dump once unlisted: 400 after %.0f ms: %s\n", g.end_ms, detail);
    assert_string_equal(detail, AGENT_TEST_DM_NO_PROCESS);
    free(detail);
    dump_get_fini(&g);
    ops = agent_test_get_json(dm, "/operations", 200);
    assert_int_equal(cJSON_GetArraySize(ops), nops);
    cJSON_Delete(ops);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 5. the runtime refuses ------------------------------------------------------------------ */

static void test_agent_dump_runtime_refuses(void **state)
{
    struct testenv *env = *state;
    const char *dm_env[] = {"DotnetMonitor_Storage__DumpTargetFolder=/nonexistent/dir", NULL};
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, dm_env, 0, &app);

    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)app->pid);
    char *detail = problem_detail(&g, 400);
    fprintf(stderr, "dump into /nonexistent/dir: 400 after %.0f ms: %s\n", g.end_ms, detail);
    /* "... NAME (0x8xxxxxxx): <createdump's message>" */
    const char *hx = strstr(detail, "(0x");
    assert_non_null(hx);
    for (int i = 3; i < 11; i++) {
        assert_non_null(strchr("0123456789abcdefABCDEF", hx[i]));
        assert_true(hx[i] != '\0');
    }
    assert_int_equal(hx[11], ')');
    assert_true(strncmp(hx + 12, ": ", 2) == 0 && strlen(hx + 14) > 0);
    assert_non_null(strstr(hx + 14, "/nonexistent/dir"));
    char id[64];
    only_op_id(dm, id, sizeof(id));
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Failed");
    cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");
    assert_string_equal(agent_test_str(err, "code"), "RuntimeError");
    assert_non_null(strstr(agent_test_str(err, "message"), hx));
    cJSON_Delete(op);
    free(detail);
    dump_get_fini(&g);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 6, 7. folder mapping -------------------------------------------------------------------- */

/* The last line of dotmon's stderr (its JSON log) that contains needle, malloc'd, or NULL. */
static char *log_line_with(struct dotmon *dm, const char *needle)
{
    char *all = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_non_null(all);
    char *found = NULL;
    for (char *line = all; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        if (strstr(line, needle) != NULL) {
            free(found);
            found = strdup(line);
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    free(all);
    return found;
}

/* A Mini dump that succeeds; returns dotmon's log line that says where it read the file. */
static char *mapped_dump(struct testenv *env, struct dotmon *dm, pid_t pid)
{
    (void)env;
    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)pid);
    char id[64], fn[32];
    assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
    assert_elf_core(&g);
    assert_op_succeeded(dm, id, "Mini", fn, g.body_bytes, 3);
    fprintf(stderr, "mapped dump: %llu bytes\n", (unsigned long long)g.body_bytes);
    dump_get_fini(&g);
    testenv_sleep_ms(100);
    char *line = log_line_with(dm, "streaming");
    assert_non_null(line);
    return line;
}

static void test_agent_dump_symlinked_alias(void **state)
{
    struct testenv *env = *state;
    char real[64], alias[64], e1[128], e2[128];
    snprintf(real, sizeof(real), "%s/real", env->dir);
    snprintf(alias, sizeof(alias), "%s/alias", env->dir);
    assert_int_equal(mkdir(real, 0700), 0);
    assert_int_equal(symlink(real, alias), 0);
    snprintf(e1, sizeof(e1), "DotnetMonitor_Storage__DumpTempFolder=%s", real);
    snprintf(e2, sizeof(e2), "DotnetMonitor_Storage__DumpTargetFolder=%s", alias);
    const char *dm_env[] = {e1, e2, NULL};
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, dm_env, 0, &app);
    char *line = mapped_dump(env, dm, app->pid);
    /* dotmon read it where it sees the folder, not through /proc/<pid>/root. */
    assert_non_null(strstr(line, real));
    assert_null(strstr(line, "/proc/"));
    free(line);
    assert_int_equal(dir_entries(real), 0);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
}

/*
 * Two distinct folders <dir>/a (dotmon's Storage:DumpTempFolder) and <dir>/b (the app's
 * Storage:DumpTargetFolder), so dotmon can only reach the file through /proc/<pid>/root.
 * a, b: 64 bytes; e1, e2 (the environment entries): 128 bytes.
 */
static void split_dump_dirs(const struct testenv *env, char *a, char *b, char *e1, char *e2)
{
    snprintf(a, 64, "%s/a", env->dir);
    snprintf(b, 64, "%s/b", env->dir);
    assert_int_equal(mkdir(a, 0700), 0);
    assert_int_equal(mkdir(b, 0700), 0);
    snprintf(e1, 128, "DotnetMonitor_Storage__DumpTempFolder=%s", a);
    snprintf(e2, 128, "DotnetMonitor_Storage__DumpTargetFolder=%s", b);
}

static void test_agent_dump_proc_root_fallback(void **state)
{
    struct testenv *env = *state;
    char a[64], b[64], e1[128], e2[128];
    split_dump_dirs(env, a, b, e1, e2);
    const char *dm_env[] = {e1, e2, NULL};
    struct test_app *app = NULL;
    struct dotmon *dm = start_app_and_dotmon(env, dm_env, 0, &app);
    char *line = mapped_dump(env, dm, app->pid);
    char via[128];
    snprintf(via, sizeof(via), "/proc/%d/root%s/dotmon_%d_", (int)app->pid, b, (int)app->pid);
    if (strstr(line, via) == NULL) {
        fprintf(stderr, "expected dotmon to read %s...: %s\n", via, line);
    }
    assert_non_null(strstr(line, via));
    free(line);
    assert_int_equal(dir_entries(a), 0);
    assert_int_equal(dir_entries(b), 0);
    agent_test_stop_dotmon_clean(dm);
}

/* ---- 8. the fake runtime on a thread of this process ----------------------------------------- */

/*
 * The fake runs on its own loop thread (tests/support/fake_thread.h); its socket is
 * <env dir>/dotnet-diagnostic-<our pid>-4242-socket, so dotmon lists this test process like any
 * runtime. dump_fake also keeps what the fake last reported (dump_fake_snapshot).
 */
struct dump_fake {
    struct fake_thread *t;
    struct fake_dump_info info;
    unsigned by_id[4]; /* GenerateCoreDump requests per command id 1..3 */
};

static struct dump_fake *running_fake; /* stopped by fake_teardown, also after a failure */

static void do_snapshot(struct fake_runtime *f, void *arg)
{
    struct dump_fake *ft = arg;
    fake_runtime_dump_info(f, &ft->info);
    for (uint8_t id = 1; id <= 3; id++) {
        ft->by_id[id] = fake_runtime_requests(f, 0x01, id);
    }
}

static void dump_fake_snapshot(struct dump_fake *ft)
{
    fake_thread_call(ft->t, do_snapshot, ft);
}

/* A fake runtime with this pid (our own) answering dumps per dc, listening in env's dir. */
static struct dump_fake *dump_fake_start(struct testenv *env, const struct fake_dump_config *dc)
{
    struct fake_runtime_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.pid = (uint64_t)getpid();
    cfg.key = 4242;
    char hex[33];
    testenv_random_hex(hex, sizeof(hex));
    memcpy(cfg.cookie, hex, sizeof(cfg.cookie));
    cfg.command_line = "/opt/fake/FakeDumpApp --fake-runtime";
    cfg.os = "Linux";
    cfg.arch = "x64";
    cfg.assembly = "FakeDumpApp";
    cfg.clr_version = "10.0.0";
    cfg.rid = "linux-x64";
    cfg.dump = *dc;
    struct dump_fake *ft = calloc(1, sizeof(*ft));
    assert_non_null(ft);
    int rc = fake_thread_start(env->dir, &cfg, &ft->t);
    if (rc != 0) {
        fprintf(stderr, "fake runtime: %s\n", uv_strerror(rc));
        free(ft);
        fail();
    }
    running_fake = ft;
    return ft;
}

static void dump_fake_stop(struct dump_fake *ft)
{
    if (running_fake == ft) {
        running_fake = NULL;
    }
    fake_thread_stop(ft->t);
    free(ft);
}

static int fake_teardown(void **state)
{
    if (running_fake != NULL) {
        dump_fake_stop(running_fake);
    }
    return agent_test_teardown(state);
}

/* Starts a fake runtime (dc) and a dotmon (extra env) that lists it. */
static struct dotmon *start_fake_and_dotmon(struct testenv *env, const struct fake_dump_config *dc,
                                            const char *const *dm_env, struct dump_fake **ft)
{
    *ft = dump_fake_start(env, dc);
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, no_auth, dm_env, &dm), 0);
    pid_t pid = getpid();
    cJSON_Delete(agent_test_wait_processes(dm, &pid, 1, 10000));
    return dm;
}

/* 8a: GenerateCoreDump3 and 2 are UNKNOWN_COMMAND: dotmon falls back to 1, which works. */
static void test_agent_dump_fake_fallback_to_v1(void **state)
{
    struct testenv *env = *state;
    const struct fake_dump_config dc = {.fault = FAKE_DUMP_OK,
                                        .unknown_versions = 1u << 3 | 1u << 2,
                                        .file_bytes = ((uint64_t)3 << 20) + 123};
    struct dump_fake *ft = NULL;
    struct dotmon *dm = start_fake_and_dotmon(env, &dc, NULL, &ft);
    pid_t pid = getpid();

    struct dump_get g;
    dump_prepare(&g, dm, "/dump?pid=%d&type=Full", (int)pid);
    g.hash = true;
    dump_get_run(&g);
    char id[64], fn[32];
    assert_dump_200(&g, id, sizeof(id), fn, sizeof(fn));
    assert_elf_core(&g);
    dump_fake_snapshot(ft);
    fprintf(stderr, "fake: GenerateCoreDump3 x%u, 2 x%u, 1 x%u; v%d wrote %s (type %u, flags %u)\n",
            ft->by_id[3], ft->by_id[2], ft->by_id[1], ft->info.version, ft->info.path,
            ft->info.type, ft->info.flags);
    assert_int_equal(ft->by_id[3], 1);
    assert_int_equal(ft->by_id[2], 1);
    assert_int_equal(ft->by_id[1], 1);
    assert_int_equal(ft->info.requests, 1);
    assert_int_equal(ft->info.version, 1);
    assert_int_equal(ft->info.type, 4); /* Full */
    assert_int_equal(ft->info.flags, 0);
    assert_int_equal(ft->info.files, 1);
    char want[256];
    snprintf(want, sizeof(want), "%s/dotmon_%d_%s.dmp", env->dir, (int)pid, id);
    assert_string_equal(ft->info.path, want);
    /* Exactly the bytes the runtime wrote, in order. */
    assert_int_equal(g.body_bytes, dc.file_bytes);
    assert_true(g.body_hash == ft->info.hash);
    assert_op_succeeded(dm, id, "Full", fn, g.body_bytes, 1);
    dump_get_fini(&g);
    assert_int_equal(dump_files(env->dir), 0);
    agent_test_stop_dotmon_clean(dm);
    dump_fake_stop(ft);
}

/* 8b: the runtime never answers: 504 after Dump:TimeoutSeconds, and the process stays listed. */
static void test_agent_dump_fake_never_answers(void **state)
{
    struct testenv *env = *state;
    const struct fake_dump_config dc = {.fault = FAKE_DUMP_SILENT};
    const char *dm_env[] = {"DotnetMonitor_Dump__TimeoutSeconds=1", NULL};
    struct dump_fake *ft = NULL;
    struct dotmon *dm = start_fake_and_dotmon(env, &dc, dm_env, &ft);
    pid_t pid = getpid();

    struct dump_get g;
    dump_prepare(&g, dm, "/dump?pid=%d&type=WithHeap", (int)pid);
    dump_get_spawn(&g);
    struct httpc c;
    httpc_init(&c, "127.0.0.1", dm->port, testenv_timeout(10000));
    struct latency waiting = {0}, after = {0};
    while (atomic_load(&g.phase) != 2) {
        sample_processes(&c, pid, &waiting);
        testenv_sleep_ms(20);
    }
    dump_get_join(&g);
    char *detail = problem_detail(&g, 504);
    fprintf(stderr, "silent runtime: 504 after %.0f ms: %s\n", g.end_ms, detail);
    free(detail);
    assert_true(g.end_ms >= 900);
    assert_true(g.end_ms < testenv_timeout(5000));
    dump_get_fini(&g);
    char id[64];
    only_op_id(dm, id, sizeof(id));
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Failed");
    assert_string_equal(agent_test_str(cJSON_GetObjectItemCaseSensitive(op, "error"), "code"),
                        "Timeout");
    cJSON_Delete(op);
    /* Past several liveness periods: still listed, still quick. */
    double end = testenv_now_ms() + 2500;
    while (testenv_now_ms() < end) {
        sample_processes(&c, pid, &after);
        testenv_sleep_ms(50);
    }
    httpc_fini(&c);
    fprintf(stderr, "/processes: %u while waiting (max %.1f ms), %u after the 504 (max %.1f ms)\n",
            waiting.n, waiting.max_ms, after.n, after.max_ms);
    assert_true(waiting.max_ms < g.end_ms / 4); /* not blocked for the wait (about 1 s) */
    dump_fake_snapshot(ft);
    assert_int_equal(ft->by_id[3], 1);
    assert_int_equal(ft->info.requests, 1);
    assert_int_equal(ft->info.type, 2); /* WithHeap */
    /* dotmon stops cleanly with the exchange still open. */
    agent_test_stop_dotmon_clean(dm);
    dump_fake_stop(ft);
}

/* Waits (10 s, scaled) until the fake runtime has written its late dump file. */
static void wait_fake_wrote(struct dump_fake *ft, double t0)
{
    for (;;) {
        dump_fake_snapshot(ft);
        if (ft->info.files == 1) {
            return;
        }
        assert_true(testenv_now_ms() - t0 < testenv_timeout(10000));
        testenv_sleep_ms(10);
    }
}

/* 8c: the runtime answers after the deadline: the file it wrote then is deleted. */
static void test_agent_dump_fake_answers_late(void **state)
{
    struct testenv *env = *state;
    const struct fake_dump_config dc = {
        .fault = FAKE_DUMP_OK, .file_bytes = (uint64_t)1 << 20, .reply_delay_ms = 2500};
    const char *dm_env[] = {"DotnetMonitor_Dump__TimeoutSeconds=1", NULL};
    struct dump_fake *ft = NULL;
    struct dotmon *dm = start_fake_and_dotmon(env, &dc, dm_env, &ft);
    pid_t pid = getpid();

    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)pid);
    char *detail = problem_detail(&g, 504);
    free(detail);
    double t504 = g.end_ms;
    dump_get_fini(&g);
    double t0 = testenv_now_ms();
    wait_fake_wrote(ft, t0);
    double written = testenv_now_ms() - t0;
    double gone = wait_no_dump_files(env->dir, 3000);
    fprintf(stderr,
            "late runtime: 504 after %.0f ms, file written %.0f ms later, deleted %.0f ms "
            "after that\n",
            t504, written, gone);
    char id[64];
    only_op_id(dm, id, sizeof(id));
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Failed");
    cJSON_Delete(op);
    agent_test_stop_dotmon_clean(dm);
    dump_fake_stop(ft);
}

/* 8d: GenerateCoreDump3's error message reaches the problem detail, on one line. */
static void test_agent_dump_fake_error_message(void **state)
{
    struct testenv *env = *state;
    const struct fake_dump_config dc = {.fault = FAKE_DUMP_ERROR,
                                        .error_hresult = 0x80004005u,
                                        .error_message =
                                            "[createdump] first line\n[createdump] second line\n"};
    struct dump_fake *ft = NULL;
    struct dotmon *dm = start_fake_and_dotmon(env, &dc, NULL, &ft);
    pid_t pid = getpid();

    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Triage", (int)pid);
    char *detail = problem_detail(&g, 400);
    fprintf(stderr, "runtime error: %s\n", detail);
    assert_non_null(strstr(detail, "E_FAIL (0x80004005): [createdump] first line [createdump] "
                                   "second line"));
    assert_null(strchr(detail, '\n'));
    free(detail);
    dump_get_fini(&g);
    /* An error that is not UNKNOWN_COMMAND is final: no older version is tried. */
    dump_fake_snapshot(ft);
    assert_int_equal(ft->by_id[3], 1);
    assert_int_equal(ft->by_id[2], 0);
    assert_int_equal(ft->by_id[1], 0);
    assert_int_equal(ft->info.type, 3); /* Triage */
    char id[64];
    only_op_id(dm, id, sizeof(id));
    cJSON *op = get_op(dm, id);
    assert_string_equal(agent_test_str(op, "status"), "Failed");
    assert_string_equal(agent_test_str(cJSON_GetObjectItemCaseSensitive(op, "error"), "code"),
                        "RuntimeError");
    cJSON_Delete(op);
    agent_test_stop_dotmon_clean(dm);
    dump_fake_stop(ft);
}

/*
 * 8e: as 8c, but dotmon reads dumps through /proc/<pid>/root (Storage:DumpTempFolder A, the app
 * writes to Storage:DumpTargetFolder B): the late file in B must go too, although dotmon never
 * opened it (the deadline had passed).
 */
static void test_agent_dump_fake_late_file_via_proc_root(void **state)
{
    struct testenv *env = *state;
    char a[64], b[64], e1[128], e2[128];
    split_dump_dirs(env, a, b, e1, e2);
    const char *dm_env[] = {e1, e2, "DotnetMonitor_Dump__TimeoutSeconds=1", NULL};
    const struct fake_dump_config dc = {
        .fault = FAKE_DUMP_OK, .file_bytes = (uint64_t)1 << 20, .reply_delay_ms = 2000};
    struct dump_fake *ft = NULL;
    struct dotmon *dm = start_fake_and_dotmon(env, &dc, dm_env, &ft);

    struct dump_get g;
    dump_get(&g, dm, "/dump?pid=%d&type=Mini", (int)getpid());
    free(problem_detail(&g, 504));
    dump_get_fini(&g);
    double t0 = testenv_now_ms();
    wait_fake_wrote(ft, t0);
    fprintf(stderr, "late runtime wrote %s\n", ft->info.path);
    assert_int_equal(strncmp(ft->info.path, b, strlen(b)), 0);
    wait_no_dump_files(b, 3000);
    assert_int_equal(dir_entries(a), 0);
    agent_test_stop_dotmon_clean(dm);
    dump_fake_stop(ft);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_dump_every_type, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_client_leaves_mid_download,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_client_leaves_while_writing,
                                        agent_test_setup, agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_long_full_dump, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_dead_process, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_runtime_refuses, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_symlinked_alias, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_proc_root_fallback, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_fake_fallback_to_v1, agent_test_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_fake_never_answers, agent_test_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_fake_answers_late, agent_test_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_fake_error_message, agent_test_setup,
                                        fake_teardown),
        cmocka_unit_test_setup_teardown(test_agent_dump_fake_late_file_via_proc_root,
                                        agent_test_setup, fake_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
