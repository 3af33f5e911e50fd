/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* O_TMPFILE */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bufpool.h"
#include "common/ascii.h"
#include "common/err.h"
#include "common/log.h"
#include "common/num.h"
#include "common/shdir.h"
#include "egress_internal.h"

/*
 * The FileSystem store (dotnet-monitor's FileSystemEgressProvider, docs/api.md §10): an
 * artifact is written to a temporary file in the intermediate folder (DirectoryPath when none is
 * configured), fsync'd, then given its name in DirectoryPath in one step, so a reader of
 * DirectoryPath never sees part of a file.
 *
 * The temporary file has no name at all where the file system allows it (O_TMPFILE, then
 * linkat through /proc/self/fd): nothing is visible while it is written, and nothing is left
 * behind if dotmon is killed. Elsewhere it is a hidden ".dotmon-egress-<hex>.tmp", renamed with
 * RENAME_NOREPLACE, and deleted on failure only if it is still the file we made
 * (shdir_unlink_exact: the intermediate folder may be shared). An existing artifact is never
 * replaced: the name gets "-1", "-2"… before its extension. When the intermediate folder is on
 * another file system (EXDEV), the bytes are copied into a new temporary file in DirectoryPath,
 * which is then named there the same way.
 *
 * Both folders are opened with shdir_open_trusted (sshd's StrictModes): every component owned by
 * root or dotmon's uid, no folder writable by others without the sticky bit, a symlink followed
 * only when root or dotmon's uid made it, missing folders made 0700 on the way; otherwise the
 * upload fails with the component and the reason ("refused /x/out: symlink /x/out is owned by
 * uid 4321, …") and nothing is written.
 *
 * Threads: every file system call runs on libuv's thread pool (one uv_work_t or one uv_fs_write
 * at a time per upload, never both); the loop only queues them. While work is queued the pool
 * owns the fields marked "pool" below, and the loop does not touch them.
 *
 * States (one setter, transitions in a table, docs/style.md §12):
 *   OPENING    folders made, temporary file created (work)        -> OPEN, DONE (failed)
 *   OPEN       queued bytes written, one uv_fs_write at a time    -> PUBLISHING, CLEANING
 *   PUBLISHING fsync, link/rename (or copy), fsync of the folder  -> DONE
 *   CLEANING   close, delete the temporary file (work)            -> DONE
 *   DONE       on_done called; the target is freed
 */

#define FS_WINDOW     ((size_t)4 * 1024 * 1024)  /* egress_full at or above this */
#define FS_HARD_CAP   (4 * FS_WINDOW)            /* the upload fails past this */
#define FS_WRITE_MAX  ((size_t)1024 * 1024)      /* bytes per uv_fs_write */
#define FS_WRITE_BUFS 16                         /* chunks per uv_fs_write */
#define FS_COPY_BUF   ((size_t)1024 * 1024)      /* EXDEV copy, unless CopyBufferSize says */
#define FS_COPY_MAX   ((size_t)16 * 1024 * 1024) /* the largest CopyBufferSize used */
#define FS_MAX_SUFFIX 1000u                      /* name-1 … name-1000, then EEXIST */
#define FS_TMP_PREFIX ".dotmon-egress-"

static bool use_tmpfile = true; /* test seam, read on the loop */

void egress__fs_use_tmpfile(bool on)
{
    use_tmpfile = on;
}

/* ---- configuration ----------------------------------------------------------------------- */

/* Replaces *slot with a copy of value (NULL when empty). */
static int set_string(char **slot, const char *value)
{
    char *v = NULL;
    if (value[0] != '\0') {
        v = strdup(value);
        if (v == NULL) {
            return UV_ENOMEM;
        }
    }
    free(*slot);
    *slot = v;
    return 0;
}

/* Octal digits only, at most 0777. */
static int parse_mode(const char *s, unsigned *out)
{
    unsigned v = 0;
    size_t i = 0;
    for (; s[i] != '\0'; i++) {
        if (s[i] < '0' || s[i] > '7' || i >= 6) {
            return AGENT_E_INVAL;
        }
        v = v * 8 + (unsigned)(s[i] - '0');
    }
    if (i == 0 || v > 0777) {
        return AGENT_E_INVAL;
    }
    *out = v;
    return 0;
}

int egress_fs_set(struct egress_fs_options *o, const char *key, const char *setting,
                  const char *value, struct buf *errors)
{
    if (ascii_ieq(setting, "DirectoryPath")) {
        return set_string(&o->directory, value);
    }
    if (ascii_ieq(setting, "IntermediateDirectoryPath")) {
        return set_string(&o->intermediate, value);
    }
    const char *why = NULL;
    if (ascii_ieq(setting, "CopyBufferSize")) {
        /* dotnet-monitor's copy buffer (1 to int.MaxValue bytes): here the buffer of the one
         * copy FileSystem egress makes, from an intermediate folder on another file system. */
        uint64_t n = 0;
        if (value[0] == '\0') {
            o->copy_buffer = 0;
            return 0;
        }
        if (num_parse_u64_str(value, 10, INT32_MAX, &n) != 0 || n == 0) {
            why = "not a whole number of bytes from 1 to 2147483647";
        } else {
            o->copy_buffer = n < FS_COPY_MAX ? (size_t)n : FS_COPY_MAX;
            return 0;
        }
    } else if (ascii_ieq(setting, "FileMode")) {
        unsigned mode = 0;
        if (value[0] == '\0') {
            o->mode = 0;
            return 0;
        }
        if (parse_mode(value, &mode) != 0) {
            why = "not an octal file mode of at most 0777, such as 0600";
        } else if ((mode & 0600) != 0600) {
            why = "the owner must be able to read and write (0600)";
        } else if ((mode & 0002) != 0) {
            why = "other users must not be able to write";
        } else {
            o->mode = mode;
            return 0;
        }
    } else {
        why = "unknown FileSystem setting (DirectoryPath, IntermediateDirectoryPath, FileMode, "
              "CopyBufferSize)";
    }
    return buf_printf(errors, "%s: %s\n", key, why) != 0 ? UV_ENOMEM : AGENT_E_INVAL;
}

int egress_fs_check(const struct egress_fs_options *o, const char *name, struct buf *errors)
{
    if (o->directory != NULL) {
        return 0;
    }
    return buf_printf(errors, "Egress:FileSystem:%s:DirectoryPath: required\n", name) != 0
               ? UV_ENOMEM
               : AGENT_E_INVAL;
}

void egress_fs_options_fini(struct egress_fs_options *o)
{
    free(o->directory);
    free(o->intermediate);
    o->directory = NULL;
    o->intermediate = NULL;
    o->mode = 0;
    o->copy_buffer = 0;
}

/* ---- the target -------------------------------------------------------------------------- */

enum fs_state { FS_OPENING = 0, FS_OPEN, FS_PUBLISHING, FS_CLEANING, FS_DONE, FS_NSTATES };

#define STATE_BIT(s) (1u << (s))
static const unsigned fs_transitions[FS_NSTATES] = {
    [FS_OPENING] = STATE_BIT(FS_OPEN) | STATE_BIT(FS_DONE),
    [FS_OPEN] = STATE_BIT(FS_PUBLISHING) | STATE_BIT(FS_CLEANING),
    [FS_PUBLISHING] = STATE_BIT(FS_DONE),
    [FS_CLEANING] = STATE_BIT(FS_DONE),
    [FS_DONE] = 0,
};

struct chunk {
    struct chunk *next;
    void *base;
    const uint8_t *data;
    size_t n;
};

/* What failed: "<what> <path>: <strerror(rc)>", made into the message on the loop. */
struct fs_fail {
    int rc;
    const char *what; /* static */
    char *path;       /* owned, or NULL */
};

struct fs_target {
    struct egress_target base;
    uv_loop_t *loop;
    enum fs_state state;

    /* Copied at open, read-only afterwards (both threads read them). */
    char *dir;   /* DirectoryPath, without a trailing '/' */
    char *inter; /* IntermediateDirectoryPath, or NULL: the temporary file goes in dir */
    char *name;  /* the artifact's name */
    unsigned mode;
    size_t copy_buffer; /* CopyBufferSize (or FS_COPY_BUF) */
    bool try_tmpfile;
    egress_ready_cb on_ready;
    egress_done_cb on_done;
    void *ud;

    /* pool: written by the work functions, read by the loop in their after-callbacks */
    uv_work_t work;
    int fd;           /* the temporary file, or -1 */
    int dst_dirfd;    /* DirectoryPath, or -1 */
    int inter_dirfd;  /* IntermediateDirectoryPath, or -1 (no intermediate folder) */
    char tmpname[48]; /* the temporary file's hidden name; "" when it has none */
    char *location;   /* the published file's path */
    struct fs_fail pool_fail;

    /* loop */
    struct chunk *head, *tail;
    size_t queued;     /* bytes in the chunks */
    uint64_t accepted; /* bytes taken by egress_write */
    uint64_t written;  /* bytes in the file (its size) */
    uv_fs_t wreq;
    bool writing;
    bool finishing;
    bool aborting;
    bool paused; /* egress_full was true: on_ready once drained to half */
    struct fs_fail fail;
};

static void fs_pump(struct fs_target *t);

static void fs_set_state(struct fs_target *t, enum fs_state next)
{
    /* An illegal transition is a bug in this file; stop loudly even in release builds. */
    if ((fs_transitions[t->state] & STATE_BIT(next)) == 0) {
        log_error("dotmon.egress", "illegal FileSystem upload transition %d -> %d", (int)t->state,
                  (int)next);
        abort();
    }
    t->state = next;
}

static void fs_queue_work(struct fs_target *t, uv_work_cb work, uv_after_work_cb after)
{
    t->work.data = t;
    /* libuv refuses only a NULL work callback: a failure here is a bug. */
    if (uv_queue_work(t->loop, &t->work, work, after) != 0) {
        abort();
    }
}

/* Records the first failure (rc < 0); path is copied (NULL allowed). */
static void fail_set(struct fs_fail *f, int rc, const char *what, const char *path)
{
    if (f->rc != 0) {
        return;
    }
    f->rc = rc;
    f->what = what;
    f->path = path != NULL ? strdup(path) : NULL; /* without memory the message has no path */
}

static const char *tmp_folder(const struct fs_target *t)
{
    return t->inter != NULL ? t->inter : t->dir;
}

static int tmp_dirfd(const struct fs_target *t)
{
    return t->inter_dirfd >= 0 ? t->inter_dirfd : t->dst_dirfd;
}

static bool accepting(const struct fs_target *t)
{
    return (t->state == FS_OPENING || t->state == FS_OPEN) && !t->finishing && !t->aborting &&
           t->fail.rc == 0;
}

/* ---- pool: the file system calls --------------------------------------------------------- */

static int neg_errno(void)
{
    return errno != 0 ? -errno : UV_EIO;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) {
        (void)close(*fd);
        *fd = -1;
    }
}

/* The magic link through which an unnamed file can be given a name. */
static void proc_fd_path(int fd, char *out, size_t cap)
{
    (void)snprintf(out, cap, "/proc/self/fd/%d", fd); /* "/proc/self/fd/" + an int fits in 32 */
}

static uint64_t random_u64(void)
{
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        (void)clock_gettime(CLOCK_MONOTONIC, &ts);
        r = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&r;
    }
    return r;
}

/*
 * A new temporary file (read-write, close-on-exec, exactly `mode` whatever the umask) in dirfd:
 * unnamed if try_tmpfile and the file system can (name[0] = '\0'), else a hidden new name.
 */
static int make_temp(int dirfd, unsigned mode, bool try_tmpfile, int *fd_out, char *name,
                     size_t name_cap)
{
    int fd = -1;
    name[0] = '\0';
    if (try_tmpfile) {
        /* Not O_EXCL: that would forbid giving it a name later. */
        fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
            return neg_errno();
        }
        char link[32];
        if (fd >= 0) {
            proc_fd_path(fd, link, sizeof(link));
            if (access(link, F_OK) != 0) {
                close_fd(&fd); /* no /proc: it could never get a name */
            }
        }
    }
    for (int tries = 0; fd < 0 && tries < 16; tries++) {
        (void)snprintf(name, name_cap, FS_TMP_PREFIX "%016llx.tmp",
                       (unsigned long long)random_u64());
        fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, (mode_t)mode);
        if (fd < 0 && errno != EEXIST) {
            name[0] = '\0';
            return neg_errno();
        }
    }
    if (fd < 0) {
        name[0] = '\0';
        return -EEXIST;
    }
    if (fchmod(fd, (mode_t)mode) != 0) {
        int rc = neg_errno();
        struct stat st;
        if (name[0] != '\0' && fstat(fd, &st) == 0) {
            (void)shdir_unlink_exact(dirfd, name, st.st_dev, st.st_ino);
        }
        (void)close(fd);
        name[0] = '\0';
        return rc;
    }
    *fd_out = fd;
    return 0;
}

/* Deletes the temporary file dirfd/name that fd is open on, if the name still holds it. */
static void remove_temp(int dirfd, int fd, char *name)
{
    struct stat st;
    if (name[0] != '\0' && fstat(fd, &st) == 0) {
        (void)shdir_unlink_exact(dirfd, name, st.st_dev, st.st_ino);
    }
    name[0] = '\0';
}

/* The i-th candidate name: name itself, then "<stem>-<i><ext>" (the extension from the last
 * '.', none for a name starting with its only '.'). */
static int candidate(const char *name, unsigned i, char *out, size_t cap)
{
    int n;
    if (i == 0) {
        n = snprintf(out, cap, "%s", name);
    } else {
        const char *dot = strrchr(name, '.');
        size_t stem = dot != NULL && dot != name ? (size_t)(dot - name) : strlen(name);
        n = snprintf(out, cap, "%.*s-%u%s", (int)stem, name, i, name + stem);
    }
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/*
 * Gives the finished temporary file (fd; from_dirfd/from, or unnamed when from is "") its name
 * in DirectoryPath, never replacing a file: the first free candidate. On success *final holds
 * the name and from is "" (the name was consumed by the rename).
 */
static int place(struct fs_target *t, int fd, int from_dirfd, char *from, char *final,
                 size_t final_cap)
{
    int rc = -EEXIST;
    for (unsigned i = 0; i <= FS_MAX_SUFFIX && rc == -EEXIST; i++) {
        rc = candidate(t->name, i, final, final_cap);
        if (rc != 0) {
            break;
        }
        if (from[0] != '\0') {
            rc = shdir_place(from_dirfd, from, t->dst_dirfd, final);
        } else {
            char link[32];
            proc_fd_path(fd, link, sizeof(link));
            rc = linkat(AT_FDCWD, link, t->dst_dirfd, final, AT_SYMLINK_FOLLOW) == 0 ? 0
                                                                                     : neg_errno();
        }
    }
    if (rc == 0) {
        from[0] = '\0';
    }
    return rc;
}

/* Copies the first n bytes of from into to (both at offset 0), bufsize bytes at a time. */
static int copy_bytes(int from, int to, uint64_t n, size_t bufsize)
{
    uint8_t *b = malloc(bufsize);
    if (b == NULL) {
        return UV_ENOMEM;
    }
    int rc = 0;
    uint64_t off = 0;
    while (off < n && rc == 0) {
        size_t want = n - off < bufsize ? (size_t)(n - off) : bufsize;
        ssize_t r = pread(from, b, want, (off_t)off);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            rc = r < 0 ? neg_errno() : UV_EIO; /* shorter than what was written */
            break;
        }
        ssize_t w = 0;
        while (w < r && rc == 0) {
            ssize_t k = pwrite(to, b + w, (size_t)(r - w), (off_t)(off + (uint64_t)w));
            if (k > 0) {
                w += k;
            } else if (k == 0 || errno != EINTR) {
                rc = k == 0 ? UV_EIO : neg_errno();
            }
        }
        off += (uint64_t)r;
    }
    free(b);
    return rc;
}

/*
 * EXDEV: the intermediate folder is on another file system. The bytes go into a new temporary
 * file in DirectoryPath, which is then named there; the first temporary file is left to the
 * caller. *pub_fd gets the copy (the caller closes it).
 */
static int copy_and_place(struct fs_target *t, char *final, size_t final_cap, int *pub_fd)
{
    int cfd = -1;
    char cname[sizeof(t->tmpname)];
    int rc = make_temp(t->dst_dirfd, t->mode, t->try_tmpfile, &cfd, cname, sizeof(cname));
    if (rc != 0) {
        fail_set(&t->pool_fail, rc, "cannot create a temporary file in", t->dir);
        return rc;
    }
    rc = copy_bytes(t->fd, cfd, t->written, t->copy_buffer);
    if (rc != 0) {
        fail_set(&t->pool_fail, rc, "cannot copy the artifact into", t->dir);
        goto fail;
    }
    if (fsync(cfd) != 0) {
        rc = neg_errno();
        fail_set(&t->pool_fail, rc, "cannot flush the artifact's copy in", t->dir);
        goto fail;
    }
    rc = place(t, cfd, t->dst_dirfd, cname, final, final_cap);
    if (rc != 0) {
        fail_set(&t->pool_fail, rc, "cannot name the artifact in", t->dir);
        goto fail;
    }
    *pub_fd = cfd;
    return 0;
fail:
    remove_temp(t->dst_dirfd, cfd, cname);
    (void)close(cfd);
    return rc;
}

/* Sets t->location to DirectoryPath/final. */
static int make_location(struct fs_target *t, const char *final)
{
    size_t dl = strlen(t->dir);
    bool root = dl == 1 && t->dir[0] == '/';
    size_t n = dl + 1 + strlen(final) + 1;
    t->location = malloc(n);
    if (t->location == NULL) {
        return UV_ENOMEM;
    }
    (void)snprintf(t->location, n, "%s%s%s", t->dir, root ? "" : "/", final);
    return 0;
}

/* The directory's own fsync, so the new name survives a crash; some file systems (FUSE, a few
 * network ones) have none, which is no failure. */
static int sync_dir(int dirfd)
{
    if (fsync(dirfd) == 0 || errno == EINVAL || errno == EOPNOTSUPP) {
        return 0;
    }
    return neg_errno();
}

/* ---- pool: the three jobs ---------------------------------------------------------------- */

static void close_all(struct fs_target *t)
{
    close_fd(&t->fd);
    close_fd(&t->inter_dirfd);
    close_fd(&t->dst_dirfd);
}

static void open_on_pool(uv_work_t *w)
{
    struct fs_target *t = w->data;
    struct fs_fail *f = &t->pool_fail;
    /* Component by component (StrictModes, common/shdir.h): no folder another uid owns or
     * others can write without the sticky bit (its group may: a PVC with an fsGroup), no link of
     * theirs; missing folders are made 0700. */
    const unsigned trust = SHDIR_TRUST_MKDIR | SHDIR_TRUST_GROUP;
    char why[1024];
    int rc = shdir_open_trusted(t->dir, trust, &t->dst_dirfd, why, sizeof(why));
    if (rc != 0) {
        fail_set(f, rc, rc == AGENT_E_UNTRUSTED ? "refused" : "cannot open",
                 why[0] != '\0' ? why : t->dir);
    }
    if (rc == 0 && t->inter != NULL &&
        (rc = shdir_open_trusted(t->inter, trust, &t->inter_dirfd, why, sizeof(why))) != 0) {
        fail_set(f, rc, rc == AGENT_E_UNTRUSTED ? "refused" : "cannot open",
                 why[0] != '\0' ? why : t->inter);
    }
    if (rc == 0) {
        rc = make_temp(tmp_dirfd(t), t->mode, t->try_tmpfile, &t->fd, t->tmpname,
                       sizeof(t->tmpname));
        if (rc != 0) {
            fail_set(f, rc, "cannot create a temporary file in", tmp_folder(t));
        }
    }
    if (rc != 0) {
        close_all(t);
    }
}

static void publish_on_pool(uv_work_t *w)
{
    struct fs_target *t = w->data;
    struct fs_fail *f = &t->pool_fail;
    char final[256];
    int pub_fd = -1; /* the file that got the name: t->fd, or its copy */
    int rc = 0;
    if (fsync(t->fd) != 0) {
        rc = neg_errno();
        fail_set(f, rc, "cannot flush the temporary file in", tmp_folder(t));
        goto out;
    }
    rc = place(t, t->fd, tmp_dirfd(t), t->tmpname, final, sizeof(final));
    if (rc == -EXDEV) {
        rc = copy_and_place(t, final, sizeof(final), &pub_fd);
        if (rc != 0) {
            goto out;
        }
    } else if (rc != 0) {
        fail_set(f, rc, "cannot name the artifact in", t->dir);
        goto out;
    }
    rc = sync_dir(t->dst_dirfd);
    if (rc != 0) {
        fail_set(f, rc, "cannot flush folder", t->dir);
    } else if ((rc = make_location(t, final)) != 0) {
        fail_set(f, rc, "cannot report the artifact's path in", t->dir);
    }
    struct stat st;
    if (rc != 0 && fstat(pub_fd >= 0 ? pub_fd : t->fd, &st) == 0) {
        /* Reported as failed, so it must not stay. */
        (void)shdir_unlink_exact(t->dst_dirfd, final, st.st_dev, st.st_ino);
    }
out:
    close_fd(&pub_fd);
    remove_temp(tmp_dirfd(t), t->fd, t->tmpname); /* a failure, or the original of a copy */
    close_all(t);
}

static void cleanup_on_pool(uv_work_t *w)
{
    struct fs_target *t = w->data;
    if (t->fd >= 0) {
        remove_temp(tmp_dirfd(t), t->fd, t->tmpname);
    }
    close_all(t);
}

/* ---- loop: the end ----------------------------------------------------------------------- */

static void free_chunks(struct fs_target *t)
{
    while (t->head != NULL) {
        struct chunk *c = t->head;
        t->head = c->next;
        bufpool_release(c->base);
        free(c);
    }
    t->tail = NULL;
    t->queued = 0;
}

/* Calls on_done once and frees the target. */
static void fs_deliver(struct fs_target *t)
{
    fs_set_state(t, FS_DONE);
    if (t->fail.rc == 0 && t->pool_fail.rc != 0) {
        t->fail = t->pool_fail;
        t->pool_fail.path = NULL;
    }
    int status = t->fail.rc != 0 ? t->fail.rc : (t->aborting ? UV_ECANCELED : 0);
    struct buf msg;
    buf_init(&msg, 0);
    if (t->fail.rc != 0) {
        (void)buf_printf(&msg, "%s%s%s: %s", t->fail.what != NULL ? t->fail.what : "failed",
                         t->fail.path != NULL ? " " : "", t->fail.path != NULL ? t->fail.path : "",
                         agent_strerror(t->fail.rc));
    } else if (status != 0) {
        (void)buf_append_str(&msg, "the upload was aborted");
    }
    if (status == 0 && t->location == NULL) {
        status = UV_ENOMEM; /* cannot happen: publish sets it or fails */
    }
    t->on_done(t->ud, status, status == 0 ? t->location : NULL,
               status == 0 ? NULL : (buf_size(&msg) > 0 ? buf_cstr(&msg) : "egress failed"));
    buf_fini(&msg);
    free_chunks(t);
    free(t->fail.path);
    free(t->pool_fail.path);
    free(t->location);
    free(t->dir);
    free(t->inter);
    free(t->name);
    free(t);
}

static void on_worked(uv_work_t *w, int status)
{
    struct fs_target *t = w->data;
    if (status != 0) {
        fail_set(&t->pool_fail, status, "file system work", NULL);
    }
    if (t->state == FS_OPENING && t->pool_fail.rc == 0) {
        fs_set_state(t, FS_OPEN);
        fs_pump(t);
        return;
    }
    fs_deliver(t); /* a failed open (the pool closed what it opened), a publish, a cleanup */
}

/* ---- loop: writing ----------------------------------------------------------------------- */

static void fs_start_cleanup(struct fs_target *t)
{
    fs_set_state(t, FS_CLEANING);
    free_chunks(t);
    fs_queue_work(t, cleanup_on_pool, on_worked);
}

/* Drops n written bytes from the front of the queue. */
static void consume(struct fs_target *t, size_t n)
{
    t->written += n;
    t->queued -= n;
    while (n > 0) {
        struct chunk *c = t->head;
        size_t k = n < c->n ? n : c->n;
        c->data += k;
        c->n -= k;
        n -= k;
        if (c->n == 0) {
            t->head = c->next;
            if (t->head == NULL) {
                t->tail = NULL;
            }
            bufpool_release(c->base);
            free(c);
        }
    }
}

static void on_written(uv_fs_t *req)
{
    struct fs_target *t = req->data;
    ssize_t result = req->result;
    uv_fs_req_cleanup(req);
    t->writing = false;
    if (result <= 0) {
        fail_set(&t->fail, result < 0 ? (int)result : UV_EIO, "cannot write the temporary file in",
                 tmp_folder(t));
    } else {
        consume(t, (size_t)result);
    }
    bool ready = t->paused && accepting(t) && t->queued <= FS_WINDOW / 2;
    if (ready) {
        t->paused = false;
    }
    fs_pump(t);
    if (ready && t->on_ready != NULL) {
        t->on_ready(t->ud); /* last: it may call egress_* on t */
    }
}

static void fs_start_write(struct fs_target *t)
{
    uv_buf_t bufs[FS_WRITE_BUFS];
    unsigned k = 0;
    size_t total = 0;
    for (struct chunk *c = t->head; c != NULL && k < FS_WRITE_BUFS && total < FS_WRITE_MAX;
         c = c->next) {
        size_t n = c->n < FS_WRITE_MAX - total ? c->n : FS_WRITE_MAX - total;
        bufs[k++] = uv_buf_init((char *)(uintptr_t)c->data, (unsigned)n);
        total += n;
    }
    t->wreq.data = t;
    t->writing = true;
    int rc = uv_fs_write(t->loop, &t->wreq, t->fd, bufs, k, (int64_t)t->written, on_written);
    if (rc != 0) {
        t->writing = false;
        fail_set(&t->fail, rc, "cannot write the temporary file in", tmp_folder(t));
        fs_start_cleanup(t);
    }
}

/* The next step of an open upload, whenever nothing is in flight. */
static void fs_pump(struct fs_target *t)
{
    if (t->state != FS_OPEN || t->writing) {
        return;
    }
    if (t->fail.rc != 0 || t->aborting) {
        fs_start_cleanup(t);
    } else if (t->head != NULL) {
        fs_start_write(t);
    } else if (t->finishing) {
        fs_set_state(t, FS_PUBLISHING);
        fs_queue_work(t, publish_on_pool, on_worked);
    }
}

/* ---- the ops ----------------------------------------------------------------------------- */

static int fs_write(struct egress_target *bt, void *base, const uint8_t *data, size_t n)
{
    struct fs_target *t = (struct fs_target *)bt;
    if (!accepting(t)) {
        bufpool_release(base);
        return t->fail.rc != 0 ? t->fail.rc : AGENT_E_INVAL;
    }
    if (n == 0) {
        bufpool_release(base);
        return 0;
    }
    int rc = 0;
    struct chunk *c = NULL;
    if (n > FS_HARD_CAP || t->queued + n > FS_HARD_CAP) {
        rc = AGENT_E_TOOBIG;
        fail_set(&t->fail, rc, "the producer did not pause at egress_full", NULL);
        goto fail;
    }
    c = malloc(sizeof(*c));
    if (c != NULL && base == NULL) {
        base = malloc(n);
        if (base != NULL) {
            memcpy(base, data, n);
            data = base;
        }
    }
    if (c == NULL || base == NULL) {
        rc = UV_ENOMEM;
        fail_set(&t->fail, rc, "cannot queue bytes", NULL);
        goto fail;
    }
    *c = (struct chunk){.base = base, .data = data, .n = n};
    if (t->tail != NULL) {
        t->tail->next = c;
    } else {
        t->head = c;
    }
    t->tail = c;
    t->queued += n;
    t->accepted += n;
    if (t->queued >= FS_WINDOW) {
        t->paused = true;
    }
    fs_pump(t);
    return 0;
fail:
    free(c);
    bufpool_release(base);
    fs_pump(t);
    return rc;
}

static bool fs_full(const struct egress_target *bt)
{
    const struct fs_target *t = (const struct fs_target *)bt;
    return accepting(t) && t->queued >= FS_WINDOW;
}

static void fs_finish(struct egress_target *bt)
{
    struct fs_target *t = (struct fs_target *)bt;
    if (t->finishing || t->state > FS_OPEN) {
        return;
    }
    t->finishing = true;
    fs_pump(t);
}

static void fs_abort(struct egress_target *bt)
{
    struct fs_target *t = (struct fs_target *)bt;
    if (t->aborting || t->state > FS_OPEN) {
        return; /* committing, or ending already */
    }
    t->aborting = true;
    fs_pump(t);
}

static uint64_t fs_bytes(const struct egress_target *bt)
{
    return ((const struct fs_target *)bt)->accepted;
}

static const struct egress_target_ops fs_ops = {
    .write = fs_write,
    .full = fs_full,
    .finish = fs_finish,
    .abort = fs_abort,
    .bytes = fs_bytes,
};

/* A copy of path without trailing '/' (except the root's). */
static char *dup_path(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') {
        n--;
    }
    return strndup(path, n);
}

int egress_fs_open(uv_loop_t *loop, const struct egress_fs_options *o,
                   const struct egress_request *rq, struct egress_target **out)
{
    if (o->directory == NULL) {
        return AGENT_E_INVAL; /* egress_fs_check refuses such a provider */
    }
    struct fs_target *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return UV_ENOMEM;
    }
    t->base.ops = &fs_ops;
    t->loop = loop;
    t->state = FS_OPENING;
    t->fd = t->dst_dirfd = t->inter_dirfd = -1;
    t->mode = o->mode != 0 ? o->mode : EGRESS_FS_DEFAULT_MODE;
    t->copy_buffer = o->copy_buffer != 0 ? o->copy_buffer : FS_COPY_BUF;
    t->try_tmpfile = use_tmpfile;
    t->on_ready = rq->on_ready;
    t->on_done = rq->on_done;
    t->ud = rq->ud;
    t->dir = dup_path(o->directory);
    t->name = strdup(rq->artifact_name);
    t->inter = o->intermediate != NULL ? dup_path(o->intermediate) : NULL;
    if (t->dir == NULL || t->name == NULL || (o->intermediate != NULL && t->inter == NULL)) {
        free(t->dir);
        free(t->inter);
        free(t->name);
        free(t);
        return UV_ENOMEM;
    }
    if (t->inter != NULL && strcmp(t->inter, t->dir) == 0) {
        free(t->inter); /* the same folder: nothing to move */
        t->inter = NULL;
    }
    fs_queue_work(t, open_on_pool, on_worked);
    *out = &t->base;
    return 0;
}
