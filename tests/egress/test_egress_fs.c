/* SPDX-License-Identifier: MIT */
/*
 * egress/egress_fs.c on a real libuv loop and real folders: artifacts of several MB written in
 * pieces arrive byte for byte under their name (or a free variant of it), with the configured
 * mode and nothing else left in the folders; abort and failures (an unwritable folder, a parent
 * that cannot be made, a write that fails, a producer that never pauses) end in on_done with the
 * reason and leave neither files nor descriptors; an intermediate folder on another file system
 * (/dev/shm) works by copying; and a thread polling DirectoryPath every millisecond while several
 * artifacts are written slowly never sees a file that is not complete.
 */
#define _GNU_SOURCE /* setgroups, nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include <cmocka.h>

#include "common/err.h"
#include "egress.h"
#include "egress_internal.h"
#include "timebound.h"

#define MB          ((size_t)1024 * 1024)
#define MAX_UPLOADS 4
#define WATCHDOG_MS 120000
#define PIECE       ((size_t)64 * 1024)

/* One artifact being produced: pattern bytes from seed, in pieces, on a timer. */
struct upload {
    struct fx *fx;
    struct egress_target *t;
    const char *name;
    uint32_t seed;
    uint64_t size;
    uint64_t sent;
    size_t piece;
    unsigned per_tick; /* pieces per timer tick at most */
    bool saw_full;
    bool waiting; /* paused at egress_full until on_ready, as a producer must */
    bool ready_called;
    int write_rc; /* an egress_write that failed: the upload is failing, on_done follows */
    bool finished;
    bool done;
    int status;
    char *location;
    char *message;
    uv_timer_t timer;
    bool timer_open; /* closed after on_done, before the slot is used again */
};

struct fx {
    uv_loop_t loop;
    uv_timer_t watchdog;
    bool timed_out;
    char base[PATH_MAX];   /* a private folder for the test, removed at teardown */
    char far[2][PATH_MAX]; /* folders outside base (cross_device), removed at teardown */
    bool restore_fsize;    /* test_fs_failure_write lowered RLIMIT_FSIZE */
    struct rlimit fsize;
    struct egress_set *set;
    struct upload up[MAX_UPLOADS];
};

/* ---- helpers ---------------------------------------------------------------------------- */

static uint8_t pattern(uint32_t seed, uint64_t i)
{
    uint64_t x = (i + (uint64_t)seed * 7919u) * 2654435761u;
    return (uint8_t)(x >> 13);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void rm_tree(const char *path)
{
    (void)nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Open descriptors of this process. */
static int fd_count(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n - 1; /* the DIR's own */
}

/* Entries in a folder, "." and ".." aside. */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The file at path holds exactly the upload's bytes. */
static bool same_content(const char *path, uint32_t seed, uint64_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return false;
    }
    static _Thread_local uint8_t b[256 * 1024];
    uint64_t off = 0;
    bool same = true;
    for (;;) {
        ssize_t r = read(fd, b, sizeof(b));
        if (r <= 0) {
            same = same && r == 0;
            break;
        }
        for (ssize_t i = 0; i < r && same; i++) {
            same = b[i] == pattern(seed, off + (uint64_t)i);
        }
        off += (uint64_t)r;
    }
    close(fd);
    return same && off == size;
}

static void path_join(char *out, size_t cap, const char *a, const char *b)
{
    int n = snprintf(out, cap, "%s/%s", a, b);
    assert_true(n > 0 && (size_t)n < cap);
}

static void on_watchdog(uv_timer_t *h)
{
    struct fx *fx = h->data;
    fx->timed_out = true;
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    if (fx == NULL || uv_loop_init(&fx->loop) != 0) {
        free(fx);
        return -1;
    }
    snprintf(fx->base, sizeof(fx->base), "/tmp/egfsXXXXXX");
    if (mkdtemp(fx->base) == NULL) {
        return -1;
    }
    uv_timer_init(&fx->loop, &fx->watchdog);
    fx->watchdog.data = fx;
    uv_timer_start(&fx->watchdog, on_watchdog, (uint64_t)test_bound_ms(WATCHDOG_MS), 0);
    egress__fs_use_tmpfile(true);
    *state = fx;
    return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    for (int i = 0; i < MAX_UPLOADS; i++) {
        free(fx->up[i].location);
        free(fx->up[i].message);
    }
    if (fx->restore_fsize) {
        setrlimit(RLIMIT_FSIZE, &fx->fsize);
        signal(SIGXFSZ, SIG_DFL);
    }
    uv_walk(&fx->loop, close_walk, NULL);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    egress_set_free(fx->set);
    rm_tree(fx->base);
    for (int i = 0; i < 2; i++) {
        if (fx->far[i][0] != '\0') {
            rm_tree(fx->far[i]);
        }
    }
    egress__fs_use_tmpfile(true);
    free(fx);
    return 0;
}

/* A set with one FileSystem provider "p<idx>" (inter and mode may be NULL). */
static const struct egress_provider *provider(struct fx *fx, const char *dir, const char *inter,
                                              const char *mode)
{
    egress_set_free(fx->set);
    fx->set = NULL;
    struct egress_kv e[3] = {{"Egress:FileSystem:p:DirectoryPath", dir}};
    size_t n = 1;
    if (inter != NULL) {
        e[n++] = (struct egress_kv){"Egress:FileSystem:p:IntermediateDirectoryPath", inter};
    }
    if (mode != NULL) {
        e[n++] = (struct egress_kv){"Egress:FileSystem:p:FileMode", mode};
    }
    struct buf err;
    buf_init(&err, 0);
    assert_int_equal(egress_set_parse(e, n, &fx->set, &err), 0);
    buf_fini(&err);
    const struct egress_provider *p = egress_find(fx->set, "p");
    assert_non_null(p);
    return p;
}

static void on_timer_closed(uv_handle_t *h)
{
    struct upload *u = h->data;
    u->timer_open = false;
}

static void on_ready(void *ud)
{
    struct upload *u = ud;
    assert_true(u->waiting);
    assert_false(egress_full(u->t));
    u->ready_called = true;
    u->waiting = false;
}

static void on_done(void *ud, int status, const char *location, const char *message)
{
    struct upload *u = ud;
    assert_false(u->done);
    u->done = true;
    u->status = status;
    if (status == 0) {
        assert_non_null(location);
        assert_null(message);
        u->location = strdup(location);
    } else {
        assert_null(location);
        assert_non_null(message);
        u->message = strdup(message);
    }
    u->t = NULL;
    if (!uv_is_closing((uv_handle_t *)&u->timer)) { /* teardown may have closed it */
        uv_close((uv_handle_t *)&u->timer, on_timer_closed);
    }
}

/* Writes up to per_tick pieces (half handed over, half copied) while there is room. */
static void produce(struct upload *u)
{
    for (unsigned k = 0;
         k < u->per_tick && u->sent < u->size && !u->done && !u->waiting && u->write_rc == 0; k++) {
        if (egress_full(u->t)) {
            u->saw_full = true;
            u->waiting = true;
            return;
        }
        size_t n = u->size - u->sent < u->piece ? (size_t)(u->size - u->sent) : u->piece;
        uint8_t *b = malloc(n + 3);
        assert_non_null(b);
        for (size_t i = 0; i < n; i++) {
            b[3 + i] = pattern(u->seed, u->sent + i);
        }
        int rc;
        if ((u->sent / u->piece) % 2 == 0) {
            rc = egress_write(u->t, b, b + 3, n);
        } else {
            rc = egress_write(u->t, NULL, b + 3, n);
            free(b);
        }
        if (rc != 0) {
            u->write_rc = rc;
            return;
        }
        u->sent += n;
    }
    if (u->sent == u->size && !u->finished && !u->done) {
        u->finished = true;
        egress_finish(u->t);
    }
}

static void on_tick(uv_timer_t *h)
{
    produce(h->data);
}

/* Starts upload i: open, then a piece burst every interval_ms (0: every loop turn). */
static struct upload *start(struct fx *fx, int i, const struct egress_provider *p, const char *name,
                            uint64_t size, unsigned per_tick, uint64_t interval_ms)
{
    struct upload *u = &fx->up[i];
    assert_false(u->timer_open);
    free(u->location);
    free(u->message);
    *u = (struct upload){.fx = fx,
                         .name = name,
                         .seed = (uint32_t)(i * 31 + 7),
                         .size = size,
                         .piece = PIECE,
                         .per_tick = per_tick};
    struct egress_request rq = {.artifact_name = name,
                                .content_type = "application/octet-stream",
                                .on_ready = on_ready,
                                .on_done = on_done,
                                .ud = u};
    assert_int_equal(egress_open(&fx->loop, p, &rq, &u->t), 0);
    uv_timer_init(&fx->loop, &u->timer);
    u->timer.data = u;
    u->timer_open = true;
    uv_timer_start(&u->timer, on_tick, interval_ms, interval_ms > 0 ? interval_ms : 1);
    return u;
}

static void run_until_done(struct fx *fx, int n)
{
    for (;;) {
        bool all = true;
        for (int i = 0; i < n; i++) {
            all = all && fx->up[i].done && !fx->up[i].timer_open;
        }
        if (all || fx->timed_out) {
            break;
        }
        uv_run(&fx->loop, UV_RUN_ONCE);
    }
    assert_false(fx->timed_out);
}

/* A fresh sub-folder of the test's base. */
static void subdir(struct fx *fx, const char *name, char *out, size_t cap)
{
    path_join(out, cap, fx->base, name);
    assert_int_equal(mkdir(out, 0700), 0);
}

/* Upload 0 of `size` bytes, one piece a tick, into a new folder "out" (path in dir). */
static struct upload *start_out(struct fx *fx, char *dir, size_t cap, const char *name,
                                uint64_t size)
{
    subdir(fx, "out", dir, cap);
    return start(fx, 0, provider(fx, dir, NULL, NULL), name, size, 1, 0);
}

/* u ended well, at dir/want, with the upload's bytes and mode. */
static void assert_published(const struct upload *u, const char *dir, const char *want,
                             unsigned mode)
{
    if (u->status != 0) {
        fprintf(stderr, "upload %s failed: %s\n", u->name, u->message);
    }
    assert_int_equal(u->status, 0);
    assert_int_equal(u->write_rc, 0);
    char path[PATH_MAX];
    path_join(path, sizeof(path), dir, want);
    assert_string_equal(u->location, path);
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 07777, mode);
    assert_int_equal(st.st_nlink, 1);
    assert_true((uint64_t)st.st_size == u->size);
    assert_true(same_content(path, u->seed, u->size));
}

/* ---- uploads ---------------------------------------------------------------------------- */

/*
 * 6 MB in 64 KiB pieces, as fast as the producer may: byte-identical, mode 0600, only the
 * artifact left in the folder; egress_full was seen and on_ready followed. tmpfile: the unnamed
 * temporary file, or the hidden named one (as on a file system without O_TMPFILE).
 */
static void upload_chunks(struct fx *fx, bool tmpfile, bool intermediate)
{
    egress__fs_use_tmpfile(tmpfile);
    char dir[PATH_MAX], inter[PATH_MAX];
    subdir(fx, "out", dir, sizeof(dir));
    subdir(fx, "inter", inter, sizeof(inter));
    mode_t old = umask(022);
    const struct egress_provider *p = provider(fx, dir, intermediate ? inter : NULL, NULL);
    int fds = fd_count();
    struct upload *u = start(fx, 0, p, "20261126_141000_4242.nettrace", 6 * MB + 123, 64, 0);
    assert_int_equal(egress_bytes(u->t), 0);
    run_until_done(fx, 1);
    umask(old);
    assert_published(u, dir, "20261126_141000_4242.nettrace", 0600);
    assert_true(u->saw_full);
    assert_true(u->ready_called);
    assert_int_equal(entries(dir), 1);
    assert_int_equal(entries(inter), 0);
    assert_int_equal(fd_count(), fds);
}

static void test_fs_upload_chunks(void **state)
{
    upload_chunks(*state, true, false);
}

static void test_fs_upload_chunks_named(void **state)
{
    upload_chunks(*state, false, false);
}

static void test_fs_upload_chunks_intermediate(void **state)
{
    upload_chunks(*state, true, true);
}

static void test_fs_upload_chunks_intermediate_named(void **state)
{
    upload_chunks(*state, false, true);
}

/* FileMode is applied exactly, whatever the umask; missing folders are made (0700). */
static void test_fs_mode_and_folders(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], inter[PATH_MAX];
    path_join(dir, sizeof(dir), fx->base, "a/b/c/");
    path_join(inter, sizeof(inter), fx->base, "i/j");
    mode_t old = umask(077);
    const struct egress_provider *p = provider(fx, dir, inter, "0640");
    struct upload *u = start(fx, 0, p, "dump.dmp", 100000, 64, 0);
    run_until_done(fx, 1);
    umask(old);
    path_join(dir, sizeof(dir), fx->base, "a/b/c"); /* reported without the trailing '/' */
    assert_published(u, dir, "dump.dmp", 0640);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(stat(inter, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(entries(inter), 0);
}

/* An empty artifact is a file too. */
static void test_fs_empty_artifact(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX];
    struct upload *u = start_out(fx, dir, sizeof(dir), "empty.json", 0);
    run_until_done(fx, 1);
    assert_published(u, dir, "empty.json", 0600);
}

/* A taken name gets "-1", "-2"… before its extension; the old file stays as it was. */
static void test_fs_name_taken(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], path[PATH_MAX];
    subdir(fx, "out", dir, sizeof(dir));
    path_join(path, sizeof(path), dir, "trace.nettrace");
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    for (int named = 0; named < 2; named++) {
        egress__fs_use_tmpfile(named == 0);
        const struct egress_provider *p = provider(fx, dir, NULL, NULL);
        struct upload *u = start(fx, 0, p, "trace.nettrace", 200000, 64, 0);
        run_until_done(fx, 1);
        assert_published(u, dir, named == 0 ? "trace-1.nettrace" : "trace-2.nettrace", 0600);
        free(u->location);
        u->location = NULL;
        u = start(fx, 0, p, "dump", 1000, 64, 0);
        run_until_done(fx, 1);
        assert_published(u, dir, named == 0 ? "dump" : "dump-1", 0600);
        free(u->location);
        u->location = NULL;
    }
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 3);
    assert_int_equal(entries(dir), 5);
}

/* Ends u's producer: no more ticks. */
static void stop_producing(struct upload *u)
{
    uv_timer_stop(&u->timer);
}

/*
 * egress_abort: right after open (the folders are still being made), with writes in flight,
 * and after egress_finish while bytes are still queued: on_done(UV_ECANCELED), no file, no
 * temporary file, no descriptor left.
 */
static void test_fs_abort(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], inter[PATH_MAX];
    subdir(fx, "out", dir, sizeof(dir));
    subdir(fx, "inter", inter, sizeof(inter));
    for (int variant = 0; variant < 6; variant++) {
        egress__fs_use_tmpfile(variant % 2 == 0);
        const struct egress_provider *p = provider(fx, dir, variant >= 2 ? inter : NULL, NULL);
        int fds = fd_count();
        struct upload *u = start(fx, 0, p, "aborted.dmp", 64 * MB, 16, 0);
        stop_producing(u);
        if (variant >= 2) {
            produce(u);                     /* 1 MB queued */
            uv_run(&fx->loop, UV_RUN_ONCE); /* the open is done, its first write in flight */
            produce(u);
        }
        if (variant >= 4) {
            egress_finish(u->t);
        }
        egress_abort(u->t);
        egress_abort(u->t);    /* twice: nothing more */
        assert_false(u->done); /* never from inside the call */
        assert_int_equal(egress_write(u->t, NULL, (const uint8_t *)"x", 1), AGENT_E_INVAL);
        assert_false(egress_full(u->t));
        run_until_done(fx, 1);
        assert_int_equal(u->status, UV_ECANCELED);
        assert_string_equal(u->message, "the upload was aborted");
        assert_int_equal(entries(dir), 0);
        assert_int_equal(entries(inter), 0);
        assert_int_equal(fd_count(), fds);
        free(u->message);
        u->message = NULL;
    }
}

/* After egress_finish: more bytes are refused, a second finish does nothing. */
static void test_fs_write_after_finish(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX];
    struct upload *u = start_out(fx, dir, sizeof(dir), "a.txt", 10);
    stop_producing(u);
    produce(u);
    assert_true(u->finished);
    assert_int_equal(egress_bytes(u->t), 10);
    uint8_t *b = malloc(4);
    assert_non_null(b);
    assert_int_equal(egress_write(u->t, b, b, 4), AGENT_E_INVAL); /* b is freed */
    egress_finish(u->t);
    run_until_done(fx, 1);
    assert_published(u, dir, "a.txt", 0600);
}

/* Runs one upload to dir (inter) expecting failure; returns on_done's message (caller frees). */
static char *expect_failure(struct fx *fx, const char *dir, const char *inter, int want)
{
    const struct egress_provider *p = provider(fx, dir, inter, NULL);
    int fds = fd_count();
    struct upload *u = start(fx, 0, p, "x.dmp", 3 * MB, 16, 0);
    run_until_done(fx, 1);
    if (u->status != want) {
        fprintf(stderr, "status %d (%s), wanted %d\n", u->status,
                u->message != NULL ? u->message : "-", want);
    }
    assert_int_equal(u->status, want);
    assert_int_equal(fd_count(), fds);
    char *m = u->message;
    u->message = NULL;
    return m;
}

/*
 * A parent that cannot be made (a file stands where a folder should be), for DirectoryPath and
 * for IntermediateDirectoryPath.
 */
static void test_fs_failure_parent(void **state)
{
    struct fx *fx = *state;
    char file[PATH_MAX], dir[PATH_MAX], ok[PATH_MAX], want[3 * PATH_MAX];
    path_join(file, sizeof(file), fx->base, "file");
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fclose(f);
    path_join(dir, sizeof(dir), file, "sub");
    subdir(fx, "ok", ok, sizeof(ok));
    char *m = expect_failure(fx, dir, NULL, UV_ENOTDIR);
    snprintf(want, sizeof(want), "cannot open %s: %s is not a folder: %s", dir, file,
             strerror(ENOTDIR));
    assert_string_equal(m, want);
    free(m);
    m = expect_failure(fx, ok, dir, UV_ENOTDIR);
    assert_string_equal(m, want);
    free(m);
    assert_int_equal(entries(ok), 0);
}

/* The upload into a folder this process may not write. */
static int unwritable_case(struct fx *fx, const char *dir)
{
    char *m = expect_failure(fx, dir, NULL, UV_EACCES);
    char want[PATH_MAX + 64];
    snprintf(want, sizeof(want), "cannot create a temporary file in %s: %s", dir, strerror(EACCES));
    int bad = strcmp(m, want) != 0;
    if (bad) {
        fprintf(stderr, "got '%s', wanted '%s'\n", m, want);
    }
    free(m);
    return bad;
}

/* DirectoryPath exists but is not writable (as root, checked in a child that gave root up). */
static void test_fs_failure_unwritable(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX];
    assert_int_equal(chmod(fx->base, 0755), 0);
    subdir(fx, "ro", dir, sizeof(dir));
    assert_int_equal(chmod(dir, 0555), 0);
    if (geteuid() != 0) {
        assert_int_equal(unwritable_case(fx, dir), 0);
        return;
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A fresh loop in the child; the parent's is left alone. */
        struct fx child = {0};
        if (uv_loop_init(&child.loop) != 0) {
            _exit(2);
        }
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0) {
            _exit(77); /* a user namespace without that uid: cannot check as root */
        }
        memcpy(child.base, fx->base, sizeof(child.base));
        uv_timer_init(&child.loop, &child.watchdog);
        child.watchdog.data = &child;
        uv_timer_start(&child.watchdog, on_watchdog, (uint64_t)test_bound_ms(WATCHDOG_MS), 0);
        int bad = unwritable_case(&child, dir);
        _exit(bad);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(entries(dir), 0);
}

/*
 * Issue 28: DirectoryPath through a symlink another uid planted, a folder another uid owns, a
 * folder writable by others without the sticky bit: refused with the component and the reason,
 * nothing written (lchown/chown stand for the other uid: needs root). The same symlink made by
 * root is followed, and a sticky world-writable folder (/tmp-like) is accepted.
 */
static void test_fs_untrusted_folders(void **state)
{
    struct fx *fx = *state;
    if (geteuid() != 0) {
        skip();
    }
    char shared[PATH_MAX], victim[PATH_MAX], link[PATH_MAX], dir[PATH_MAX], want[3 * PATH_MAX];
    subdir(fx, "shared", shared, sizeof(shared));
    assert_int_equal(chmod(shared, 01777), 0);
    subdir(fx, "victim", victim, sizeof(victim));
    /* shared/out -> ../victim, planted by uid 4321 in the sticky folder. */
    path_join(link, sizeof(link), shared, "out");
    assert_int_equal(symlink("../victim", link), 0);
    assert_int_equal(lchown(link, 4321, 4321), 0);
    char *m = expect_failure(fx, link, NULL, AGENT_E_UNTRUSTED);
    snprintf(want, sizeof(want), "refused %s: symlink %s is owned by uid 4321", link, link);
    assert_non_null(strstr(m, want));
    free(m);
    path_join(dir, sizeof(dir), link, "deeper/still");
    m = expect_failure(fx, dir, NULL, AGENT_E_UNTRUSTED);
    free(m);
    m = expect_failure(fx, fx->base, link, AGENT_E_UNTRUSTED); /* as IntermediateDirectoryPath */
    free(m);
    assert_int_equal(entries(victim), 0);

    /* A folder another uid owns (0700: only it and root could write). */
    char theirs[PATH_MAX];
    subdir(fx, "theirs", theirs, sizeof(theirs));
    assert_int_equal(chown(theirs, 4321, 4321), 0);
    m = expect_failure(fx, theirs, NULL, AGENT_E_UNTRUSTED);
    snprintf(want, sizeof(want), "folder %s is owned by uid 4321", theirs);
    assert_non_null(strstr(m, want));
    free(m);
    assert_int_equal(entries(theirs), 0);

    /* Writable by others, no sticky bit (an emptyDir): refused; with the sticky bit: used. */
    char open_dir[PATH_MAX];
    subdir(fx, "open", open_dir, sizeof(open_dir));
    assert_int_equal(chmod(open_dir, 0777), 0);
    m = expect_failure(fx, open_dir, NULL, AGENT_E_UNTRUSTED);
    assert_non_null(strstr(m, "is writable by others (and not sticky)"));
    free(m);
    assert_int_equal(entries(open_dir), 0);
    assert_int_equal(chmod(open_dir, 01777), 0);
    struct upload *u = start(fx, 0, provider(fx, open_dir, NULL, NULL), "ok.dmp", MB, 16, 0);
    run_until_done(fx, 1);
    assert_published(u, open_dir, "ok.dmp", 0600);
    /* A PVC root (2775, writable by the pod's fsGroup, not by others): used, also as the parent
     * of a folder made inside. */
    char pvc[PATH_MAX], pvc_sub[PATH_MAX];
    subdir(fx, "pvc", pvc, sizeof(pvc));
    assert_int_equal(chmod(pvc, 02775), 0);
    path_join(pvc_sub, sizeof(pvc_sub), pvc, "traces");
    u = start(fx, 0, provider(fx, pvc_sub, NULL, NULL), "g.dmp", MB, 16, 0);
    run_until_done(fx, 1);
    assert_published(u, pvc_sub, "g.dmp", 0600);

    /* The same link as root's is followed. */
    assert_int_equal(lchown(link, 0, 0), 0);
    u = start(fx, 0, provider(fx, link, NULL, NULL), "v.dmp", MB, 16, 0);
    run_until_done(fx, 1);
    assert_int_equal(u->status, 0);
    assert_int_equal(entries(victim), 1);
}

/* A write that fails half way (the file size limit: EFBIG): on_done says so, nothing stays. */
static void test_fs_failure_write(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], inter[PATH_MAX], want[PATH_MAX + 64];
    subdir(fx, "out", dir, sizeof(dir));
    subdir(fx, "inter", inter, sizeof(inter));
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &fx->fsize), 0);
    struct rlimit lim = {.rlim_cur = MB, .rlim_max = fx->fsize.rlim_max};
    signal(SIGXFSZ, SIG_IGN);
    fx->restore_fsize = true; /* also when an assertion fails */
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    for (int named = 0; named < 2; named++) {
        egress__fs_use_tmpfile(named == 0);
        char *m = expect_failure(fx, dir, named ? inter : NULL, UV_EFBIG);
        snprintf(want, sizeof(want), "cannot write the temporary file in %s: %s",
                 named ? inter : dir, strerror(EFBIG));
        assert_string_equal(m, want);
        free(m);
        assert_int_equal(entries(dir), 0);
        assert_int_equal(entries(inter), 0);
    }
}

/* A producer that never looks at egress_full: refused past the hard cap, the upload fails. */
static void test_fs_producer_ignores_full(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX];
    struct upload *u = start_out(fx, dir, sizeof(dir), "greedy.bin", 0);
    stop_producing(u);
    uint8_t *piece = calloc(1, MB);
    assert_non_null(piece);
    int rc = 0;
    size_t n = 0;
    for (; n < 64 && rc == 0; n++) {
        rc = egress_write(u->t, NULL, piece, MB);
    }
    free(piece);
    assert_int_equal(rc, AGENT_E_TOOBIG);
    assert_int_equal(n, 17); /* 16 MiB taken, the 17th refused */
    run_until_done(fx, 1);
    assert_int_equal(u->status, AGENT_E_TOOBIG);
    assert_non_null(strstr(u->message, "the producer did not pause at egress_full"));
    assert_int_equal(entries(dir), 0);
}

/* Two folders on different file systems, or false (the test is then skipped). */
static bool cross_device(struct fx *fx, char *dir, size_t dcap, char *inter, size_t icap)
{
    char cwd[PATH_MAX - 32];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(inter, icap, "/dev/shm/egfsXXXXXX");
    if (mkdtemp(inter) == NULL) {
        return false;
    }
    snprintf(dir, dcap, "%s/egfs-outXXXXXX", cwd);
    struct stat a, b;
    if (mkdtemp(dir) == NULL) {
        rmdir(inter);
        return false;
    }
    snprintf(fx->far[0], sizeof(fx->far[0]), "%s", inter);
    snprintf(fx->far[1], sizeof(fx->far[1]), "%s", dir);
    return stat(inter, &a) == 0 && stat(dir, &b) == 0 && a.st_dev != b.st_dev;
}

/* IntermediateDirectoryPath on another file system (EXDEV): copied, then named; both kinds of
 * temporary file; nothing left in either folder. */
static void test_fs_exdev(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], inter[PATH_MAX];
    if (!cross_device(fx, dir, sizeof(dir), inter, sizeof(inter))) {
        skip();
    }
    for (int named = 0; named < 2; named++) {
        egress__fs_use_tmpfile(named == 0);
        const struct egress_provider *p = provider(fx, dir, inter, "0644");
        int fds = fd_count();
        struct upload *u = start(fx, 0, p, "moved.gcdump", 5 * MB + 7, 64, 0);
        run_until_done(fx, 1);
        assert_published(u, dir, named == 0 ? "moved.gcdump" : "moved-1.gcdump", 0644);
        free(u->location);
        u->location = NULL;
        assert_int_equal(entries(inter), 0);
        assert_int_equal(fd_count(), fds);
    }
    assert_int_equal(entries(dir), 2);
}

/*
 * Issue 32 item 9: dotnet-monitor's FileSystem CopyBufferSize (its schema: an integer from 1 to
 * int.MaxValue) is a setting, not a start-up error; it sizes the one copy FileSystem egress makes
 * (the EXDEV case), and an odd small size still copies every byte. 0 and non-numbers are refused
 * with the key named.
 */
static void test_fs_copy_buffer_size(void **state)
{
    struct fx *fx = *state;
    struct buf err;
    buf_init(&err, 0);
    struct egress_kv bad[] = {{"Egress:FileSystem:p:DirectoryPath", "/x"},
                              {"Egress:FileSystem:p:CopyBufferSize", "0"}};
    struct egress_set *set = NULL;
    assert_int_equal(egress_set_parse(bad, 2, &set, &err), AGENT_E_INVAL);
    assert_non_null(strstr(buf_cstr(&err), "Egress:FileSystem:p:CopyBufferSize"));
    egress_set_free(set);
    set = NULL;
    buf_reset(&err);
    bad[1].value = "1k";
    assert_int_equal(egress_set_parse(bad, 2, &set, &err), AGENT_E_INVAL);
    egress_set_free(set);
    buf_fini(&err);

    char dir[PATH_MAX], inter[PATH_MAX];
    if (!cross_device(fx, dir, sizeof(dir), inter, sizeof(inter))) {
        skip();
    }
    egress_set_free(fx->set);
    fx->set = NULL;
    /* The documentation's sample size, and one that does not divide the artifact. */
    const char *sizes[] = {"1024", "4099", "2147483647"};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct egress_kv e[] = {{"Egress:FileSystem:p:DirectoryPath", dir},
                                {"Egress:FileSystem:p:IntermediateDirectoryPath", inter},
                                {"Egress:FileSystem:p:FileMode", "0644"},
                                {"Egress:FileSystem:p:CopyBufferSize", sizes[i]}};
        buf_init(&err, 0);
        egress_set_free(fx->set);
        fx->set = NULL;
        assert_int_equal(egress_set_parse(e, 4, &fx->set, &err), 0);
        buf_fini(&err);
        const struct egress_provider *p = egress_find(fx->set, "p");
        assert_non_null(p);
        char name[32];
        snprintf(name, sizeof(name), "copy%zu.gcdump", i);
        struct upload *u = start(fx, 0, p, name, 1 * MB + 13, 64, 0);
        run_until_done(fx, 1);
        assert_published(u, dir, name, 0644);
        free(u->location);
        u->location = NULL;
        assert_int_equal(entries(inter), 0);
    }
}

/* ---- the watcher ------------------------------------------------------------------------ */

struct watcher {
    const char *dir;
    const struct upload *up;
    int n;
    atomic_bool stop;
    /* results, read after join */
    unsigned long polls;
    unsigned long sightings;
    unsigned long mixed; /* polls that saw some of the artifacts but not all: during the run */
    unsigned long bad;
    char first_bad[PATH_MAX + 128];
    bool seen[MAX_UPLOADS];
    ino_t ino[MAX_UPLOADS];
};

static void watcher_bad(struct watcher *w, const char *what, const char *name)
{
    if (w->bad++ == 0) {
        snprintf(w->first_bad, sizeof(w->first_bad), "%s: %s", what, name);
    }
}

/* One look at the folder: every entry must be one of the artifacts, complete. */
static void watcher_poll(struct watcher *w)
{
    DIR *d = opendir(w->dir);
    if (d == NULL) {
        watcher_bad(w, "cannot list", w->dir);
        return;
    }
    int found = 0;
    for (struct dirent *e = readdir(d); e != NULL; e = readdir(d)) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        found++;
        int i = 0;
        while (i < w->n && strcmp(w->up[i].name, e->d_name) != 0) {
            i++;
        }
        struct stat st;
        if (i == w->n) {
            watcher_bad(w, "an entry that is no artifact", e->d_name);
            continue;
        }
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            continue; /* cannot happen: nothing is ever removed */
        }
        w->sightings++;
        if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != w->up[i].size) {
            watcher_bad(w, "a partial file", e->d_name);
            continue;
        }
        if (!w->seen[i] || w->ino[i] != st.st_ino) {
            /* First sight of this file: all of its bytes, now. */
            char path[PATH_MAX];
            snprintf(path, sizeof(path), "%s/%s", w->dir, e->d_name);
            if (!same_content(path, w->up[i].seed, w->up[i].size)) {
                watcher_bad(w, "a file with other bytes", e->d_name);
            }
            w->seen[i] = true;
            w->ino[i] = st.st_ino;
        }
    }
    closedir(d);
    w->polls++;
    w->mixed += found > 0 && found < w->n;
}

static void *watcher_main(void *arg)
{
    struct watcher *w = arg;
    while (!atomic_load(&w->stop)) {
        watcher_poll(w);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&ts, NULL);
    }
    watcher_poll(w); /* everything is there now */
    return NULL;
}

/*
 * The test: "FileSystem egress: a watcher polling the folder every few ms never sees a
 * partial file". Four artifacts of 2-5 MB are written slowly (64 KiB every 2 ms) into one
 * DirectoryPath, each through another kind of temporary file: unnamed in DirectoryPath, unnamed
 * and named in an intermediate folder, and unnamed in an intermediate folder on another file
 * system (copied). A thread lists the folder every millisecond and checks every file it sees.
 */
static void test_fs_watcher_never_sees_partial(void **state)
{
    struct fx *fx = *state;
    char dir[PATH_MAX], inter[PATH_MAX], far[PATH_MAX], far_dir[PATH_MAX];
    bool cross = cross_device(fx, far_dir, sizeof(far_dir), far, sizeof(far));
    subdir(fx, "out", dir, sizeof(dir));
    subdir(fx, "inter", inter, sizeof(inter));
    static const char *names[MAX_UPLOADS] = {"a.nettrace", "b.dmp", "c.gcdump", "d.json"};
    struct watcher w = {.dir = dir, .up = fx->up, .n = MAX_UPLOADS};
    atomic_init(&w.stop, false);
    for (int i = 0; i < MAX_UPLOADS; i++) {
        const char *via = i == 0 ? NULL : (i == 3 && cross ? far : inter);
        egress__fs_use_tmpfile(i != 2);
        /* A provider per upload: the set is replaced, the running targets keep their copies. */
        const struct egress_provider *p = provider(fx, dir, via, NULL);
        start(fx, i, p, names[i], (uint64_t)(2 + i) * MB + (uint64_t)i * 4099, 1, 2);
    }
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, watcher_main, &w), 0);
    run_until_done(fx, MAX_UPLOADS);
    atomic_store(&w.stop, true);
    assert_int_equal(pthread_join(th, NULL), 0);
    for (int i = 0; i < MAX_UPLOADS; i++) {
        assert_published(&fx->up[i], dir, names[i], 0600);
        assert_true(w.seen[i]);
    }
    if (w.bad != 0) {
        fprintf(stderr, "watcher: %lu bad sightings, first: %s\n", w.bad, w.first_bad);
    }
    assert_int_equal(w.bad, 0);
    fprintf(stderr,
            "watcher: %lu polls (%lu while some artifacts were still being written), %lu "
            "sightings of complete files%s\n",
            w.polls, w.mixed, w.sightings,
            cross ? "" : " (no second file system for the copy case)");
    assert_true(w.polls > 10);
    assert_true(w.mixed > 0); /* it did watch while the artifacts came */
    assert_int_equal(entries(inter), 0);
    if (cross) {
        assert_int_equal(entries(far), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fs_upload_chunks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_upload_chunks_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_upload_chunks_intermediate, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_upload_chunks_intermediate_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_mode_and_folders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_empty_artifact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_name_taken, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_abort, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_write_after_finish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_failure_parent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_failure_unwritable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_untrusted_folders, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_failure_write, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_producer_ignores_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_exdev, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_copy_buffer_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fs_watcher_never_sees_partial, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
