/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE, getrandom, O_PATH */
#include "shdir.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "err.h"
#include "hex.h"

#define CAPTURED_NAME "x"

/* -errno of the last call, never 0 (a failing call that left errno 0 is still a failure). */
static int neg_errno(void)
{
    return errno != 0 ? -errno : -EIO;
}

int shdir_open(const char *path, int *dirfd_out)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        return neg_errno();
    }
    *dirfd_out = fd;
    return 0;
}

/* The kernel's RESOLVE_IN_ROOT walk, the last component opened with `flags` (and `resolve`'s
 * extra RESOLVE_* bits); -ENOSYS where openat2 is missing or filtered. */
static int open_in_root(int rootfd, const char *rel, int flags, uint64_t resolve)
{
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned)(flags | O_CLOEXEC);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | resolve;
    long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
    if (fd >= 0) {
        return (int)fd;
    }
    /* seccomp profiles that predate openat2 answer EPERM or ENOSYS. */
    return errno == ENOSYS || errno == EPERM ? -ENOSYS : neg_errno();
#else
    (void)rootfd;
    (void)rel;
    (void)flags;
    (void)resolve;
    return -ENOSYS;
#endif
}

/* One component at a time, none of them a symlink; the last one opened with `flags`. */
static int open_walk(int rootfd, const char *rel, int flags)
{
    int cur = fcntl(rootfd, F_DUPFD_CLOEXEC, 0);
    if (cur < 0) {
        return neg_errno();
    }
    const char *p = rel;
    while (*p != '\0') {
        while (*p == '/') {
            p++;
        }
        size_t n = strcspn(p, "/");
        if (n == 0) {
            break;
        }
        char comp[256];
        if (n >= sizeof(comp) || (n == 2 && p[0] == '.' && p[1] == '.')) {
            (void)close(cur);
            return n >= sizeof(comp) ? -ENAMETOOLONG : -EXDEV;
        }
        memcpy(comp, p, n);
        comp[n] = '\0';
        bool last = p[n + strspn(p + n, "/")] == '\0';
        int next =
            openat(cur, comp, (last ? flags : O_RDONLY | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        int err = next < 0 ? neg_errno() : 0;
        struct stat st;
        if (err == -ENOTDIR && fstatat(cur, comp, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISLNK(st.st_mode)) {
            err = -ELOOP; /* O_DIRECTORY speaks first for a symlink: say what it is */
        }
        (void)close(cur);
        if (next < 0) {
            return err;
        }
        cur = next;
        p += n;
    }
    return cur;
}

static int open_beneath(const char *root, const char *path, int flags, uint64_t resolve,
                        int *fd_out)
{
    if (root == NULL || path == NULL || path[0] != '/') {
        return AGENT_E_INVAL;
    }
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        return neg_errno();
    }
    const char *rel = path;
    while (*rel == '/') {
        rel++;
    }
    int fd;
    if (*rel == '\0') {
        fd = rootfd;
        rootfd = -1;
    } else {
        fd = open_in_root(rootfd, rel, flags, resolve);
        if (fd == -ENOSYS) {
            fd = open_walk(rootfd, rel, flags);
        }
    }
    if (rootfd >= 0) {
        (void)close(rootfd);
    }
    if (fd < 0) {
        return fd;
    }
    *fd_out = fd;
    return 0;
}

int shdir_open_beneath(const char *root, const char *path, int *dirfd_out)
{
    return open_beneath(root, path, O_RDONLY | O_DIRECTORY, 0, dirfd_out);
}

int shdir_open_beneath_nolinks(const char *root, const char *path, int flags, int *fd_out)
{
    return open_beneath(root, path, flags | O_NOFOLLOW, RESOLVE_NO_SYMLINKS, fd_out);
}

bool shdir_owners_add(struct shdir_owners *o, uid_t uid)
{
    if (shdir_owners_has(o, uid)) {
        return true;
    }
    if (o->n >= SHDIR_MAX_OWNERS) {
        return false;
    }
    o->uid[o->n++] = uid;
    return true;
}

bool shdir_owners_has(const struct shdir_owners *o, uid_t uid)
{
    for (size_t i = 0; i < o->n; i++) {
        if (o->uid[i] == uid) {
            return true;
        }
    }
    return false;
}

static int check_file(const struct stat *st, const struct shdir_owners *owners)
{
    if (!S_ISREG(st->st_mode) || st->st_nlink > 1) {
        return AGENT_E_NOTREG;
    }
    if (owners != NULL && !shdir_owners_has(owners, st->st_uid)) {
        return AGENT_E_UNTRUSTED;
    }
    return 0;
}

int shdir_open_file(int dirfd, const char *name, const struct shdir_owners *owners, int *fd_out,
                    struct stat *st_out)
{
    struct stat before;
    if (fstatat(dirfd, name, &before, AT_SYMLINK_NOFOLLOW) != 0) {
        return neg_errno();
    }
    if (st_out != NULL) {
        *st_out = before;
    }
    if (S_ISLNK(before.st_mode)) {
        return -ELOOP;
    }
    int rc = check_file(&before, owners);
    if (rc != 0) {
        return rc;
    }
    /* O_NONBLOCK: a FIFO swapped in since fstatat must not block this thread in open(). */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        return neg_errno();
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        rc = neg_errno();
        goto fail;
    }
    if (st_out != NULL) {
        *st_out = st;
    }
    rc = check_file(&st, owners);
    if (rc != 0) {
        goto fail;
    }
    if (st.st_dev != before.st_dev || st.st_ino != before.st_ino) {
        rc = AGENT_E_CHANGED;
        goto fail;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        rc = neg_errno();
        goto fail;
    }
    *fd_out = fd;
    return 0;

fail:
    (void)close(fd);
    return rc;
}

void shdir_random_hex(char *out, size_t ndigits)
{
    uint8_t bytes[16];
    size_t nb = (ndigits + 1) / 2;
    if (nb > sizeof(bytes)) {
        nb = sizeof(bytes);
    }
    if (getrandom(bytes, nb, 0) != (ssize_t)nb) {
        /* Unpredictability only spares a retry: what gets opened is checked anyway. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t v = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
        for (size_t i = 0; i < nb; i++) {
            bytes[i] = (uint8_t)(v >> (8 * (i % 8)));
        }
    }
    for (size_t i = 0; i < ndigits && i / 2 < nb; i++) {
        out[i] = hex_digit(bytes[i / 2] >> (i % 2 ? 0 : 4));
    }
    out[ndigits] = '\0';
}

int shdir_private_new(int dirfd, struct shdir_private *p)
{
    p->fd = -1;
    p->name[0] = '\0';
    for (int attempt = 0; attempt < 8; attempt++) {
        memcpy(p->name, ".dotmon-", 8);
        shdir_random_hex(p->name + 8, 16);
        if (mkdirat(dirfd, p->name, 0700) == 0) {
            break;
        }
        if (errno != EEXIST) {
            int rc = neg_errno();
            p->name[0] = '\0';
            return rc;
        }
        p->name[0] = '\0';
    }
    if (p->name[0] == '\0') {
        return -EEXIST;
    }
    int fd = openat(dirfd, p->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int rc = fd < 0 ? neg_errno() : 0;
    struct stat st;
    if (rc == 0 && fstat(fd, &st) != 0) {
        rc = neg_errno();
    }
    /* Someone who removed our folder and made their own under the name must not get our files. */
    if (rc == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0)) {
        rc = AGENT_E_CHANGED;
    }
    if (rc != 0) {
        if (fd >= 0) {
            (void)close(fd);
        }
        if (rc != AGENT_E_CHANGED) {
            (void)unlinkat(dirfd, p->name, AT_REMOVEDIR);
        }
        p->name[0] = '\0';
        return rc;
    }
    p->fd = fd;
    return 0;
}

void shdir_private_remove(int dirfd, struct shdir_private *p)
{
    if (p->fd >= 0) {
        (void)close(p->fd);
        p->fd = -1;
    }
    if (p->name[0] != '\0') {
        /* By name, but only an empty folder can go: at worst someone's empty folder. */
        (void)unlinkat(dirfd, p->name, AT_REMOVEDIR);
        p->name[0] = '\0';
    }
}

int shdir_place(int from_dirfd, const char *from, int dirfd, const char *name)
{
    if (renameat2(from_dirfd, from, dirfd, name, RENAME_NOREPLACE) == 0) {
        return 0;
    }
    if (errno != EINVAL && errno != ENOSYS) {
        return neg_errno();
    }
    /* No RENAME_NOREPLACE here: a hard link never replaces either. */
    if (linkat(from_dirfd, from, dirfd, name, 0) != 0) {
        return neg_errno();
    }
    (void)unlinkat(from_dirfd, from, 0);
    return 0;
}

int shdir_unlink_exact(int dirfd, const char *name, dev_t dev, ino_t ino)
{
    struct shdir_private priv;
    int rc = shdir_private_new(dirfd, &priv);
    if (rc != 0) {
        return rc;
    }
    if (renameat(dirfd, name, priv.fd, CAPTURED_NAME) != 0) {
        rc = neg_errno();
        goto out;
    }
    struct stat st;
    bool same = fstatat(priv.fd, CAPTURED_NAME, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                st.st_dev == dev && st.st_ino == ino && !S_ISDIR(st.st_mode);
    if (same) {
        rc = unlinkat(priv.fd, CAPTURED_NAME, 0) == 0 ? 0 : neg_errno();
        goto out;
    }
    rc = AGENT_E_CHANGED;
    if (shdir_place(priv.fd, CAPTURED_NAME, dirfd, name) != 0) {
        /* The name was taken again: both objects came from whoever races us at our name. */
        if (unlinkat(priv.fd, CAPTURED_NAME, 0) != 0) {
            (void)unlinkat(priv.fd, CAPTURED_NAME, AT_REMOVEDIR);
        }
    }
out:
    shdir_private_remove(dirfd, &priv);
    return rc;
}

int shdir_split(const char *path, char *dir, size_t dir_cap, char *base, size_t base_cap)
{
    if (path == NULL || path[0] != '/') {
        return AGENT_E_INVAL;
    }
    size_t len = strlen(path);
    if (path[len - 1] == '/') {
        return AGENT_E_INVAL;
    }
    const char *slash = strrchr(path, '/');
    size_t dl = (size_t)(slash - path);
    size_t bl = len - dl - 1;
    if (dl == 0) {
        dl = 1; /* "/b": the root folder */
    }
    if (dl >= dir_cap || bl >= base_cap || bl == 0) {
        return AGENT_E_INVAL;
    }
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    memcpy(base, slash + 1, bl);
    base[bl] = '\0';
    return 0;
}

/* ---- StrictModes ------------------------------------------------------------------------- */

#define TRUST_MAX_LINKS 40

struct walk {
    const char *path; /* as asked, for messages */
    char *why;
    size_t whylen;
    char shown[PATH_MAX]; /* the physical path walked so far */
};

static int walk_fail(struct walk *w, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int walk_fail(struct walk *w, int rc, const char *fmt, ...)
{
    if (w->why != NULL && w->whylen > 0) {
        int n = snprintf(w->why, w->whylen, "%s: ", w->path);
        if (n >= 0 && (size_t)n < w->whylen) {
            va_list ap;
            va_start(ap, fmt);
            (void)vsnprintf(w->why + n, w->whylen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return rc;
}

static void shown_push(struct walk *w, const char *comp)
{
    size_t len = strlen(w->shown);
    (void)snprintf(w->shown + len, sizeof(w->shown) - len, "%s%s",
                   len > 0 && w->shown[len - 1] == '/' ? "" : "/", comp);
}

static void shown_pop(struct walk *w)
{
    char *slash = strrchr(w->shown, '/');
    if (slash == NULL || slash == w->shown) {
        memcpy(w->shown, "/", 2);
    } else {
        *slash = '\0';
    }
}

static bool trusted_uid(uid_t uid)
{
    return uid == 0 || uid == geteuid();
}

static bool read_only_fs(int fd)
{
    struct statvfs sv;
    return fstatvfs(fd, &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0;
}

/* Owner and mode of one object met on the walk (fd: an O_PATH descriptor of it). */
static int check_object(struct walk *w, int fd, const struct stat *st, bool last, unsigned flags)
{
    const char *kind = S_ISDIR(st->st_mode) ? "folder" : S_ISLNK(st->st_mode) ? "symlink" : "file";
    if (!trusted_uid(st->st_uid)) {
        return walk_fail(w, AGENT_E_UNTRUSTED,
                         "%s %s is owned by uid %u, not root or dotmon's uid %u", kind, w->shown,
                         (unsigned)st->st_uid, (unsigned)geteuid());
    }
    mode_t wbits = st->st_mode & (S_IWGRP | S_IWOTH);
    if (S_ISLNK(st->st_mode) || wbits == 0) {
        return 0;
    }
    bool sticky = S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) != 0;
    if (last && S_ISDIR(st->st_mode) && (flags & SHDIR_TRUST_SHARED) != 0) {
        return 0;
    }
    if (sticky && !(last && (flags & SHDIR_TRUST_STRICT) != 0)) {
        return 0;
    }
    if (wbits == S_IWGRP && S_ISDIR(st->st_mode) && (flags & SHDIR_TRUST_GROUP) != 0) {
        return 0;
    }
    /* Only root's folders: a Secret/ConfigMap root is root's; a volume mounted read-only here may
     * be mounted read-write into the app, and its writable bits then mean what they say. */
    if (st->st_uid == 0 && read_only_fs(fd)) {
        return 0;
    }
    return walk_fail(w, AGENT_E_UNTRUSTED, "%s %s is writable by %s%s", kind, w->shown,
                     (wbits & S_IWOTH) != 0 ? "others" : "its group",
                     S_ISDIR(st->st_mode) && !sticky ? " (and not sticky)" : "");
}

/* The walk's final step: a real descriptor of the checked object. */
static int reopen_last(struct walk *w, int parent, const char *name, int cur, const struct stat *st,
                       unsigned flags, int *fd_out)
{
    int fd;
    if (S_ISDIR(st->st_mode)) {
        if ((flags & SHDIR_TRUST_FILE) != 0) {
            return walk_fail(w, AGENT_E_NOTREG, "%s is a folder, not a file", w->shown);
        }
        fd = openat(cur, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            int rc = neg_errno();
            return walk_fail(w, rc, "cannot open %s: %s", w->shown, strerror(-rc));
        }
        *fd_out = fd;
        return 0;
    }
    if ((flags & SHDIR_TRUST_FILE) == 0) {
        return walk_fail(w, -ENOTDIR, "%s is not a folder", w->shown);
    }
    if (!S_ISREG(st->st_mode) || parent < 0) {
        return walk_fail(w, AGENT_E_NOTREG, "%s is not a regular file", w->shown);
    }
    if (st->st_nlink > 1) {
        /* Another name of it may sit in a folder someone else can write (as shdir_open_file). */
        return walk_fail(w, AGENT_E_UNTRUSTED, "%s has %lu links", w->shown,
                         (unsigned long)st->st_nlink);
    }
    /* O_NONBLOCK: a FIFO swapped in since must not block the caller. */
    fd = openat(parent, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) {
        int rc = neg_errno();
        return walk_fail(w, rc, "cannot open %s: %s", w->shown, strerror(-rc));
    }
    struct stat now;
    int flags_now = fcntl(fd, F_GETFL);
    if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino ||
        flags_now < 0 || fcntl(fd, F_SETFL, flags_now & ~O_NONBLOCK) != 0) {
        (void)close(fd);
        return walk_fail(w, AGENT_E_CHANGED, "%s changed while it was checked", w->shown);
    }
    *fd_out = fd;
    return 0;
}

/* Opens comp in cur (O_PATH, not following a link), making a missing folder when asked. */
static int open_component(struct walk *w, int cur, const char *comp, bool last, unsigned flags)
{
    int next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (next < 0 && errno == ENOENT && (flags & SHDIR_TRUST_MKDIR) != 0 &&
        ((flags & SHDIR_TRUST_FILE) == 0 || !last)) {
        if (mkdirat(cur, comp, 0700) != 0 && errno != EEXIST) {
            int rc = neg_errno();
            return walk_fail(w, rc, "cannot create folder %s: %s", w->shown, strerror(-rc));
        }
        next = openat(cur, comp, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    }
    if (next < 0) {
        int rc = neg_errno();
        return walk_fail(w, rc, "%s: %s", w->shown, strerror(-rc));
    }
    return next;
}

/* The walk's descriptors and what is left to resolve. */
struct cursor {
    int cur;                 /* O_PATH: the object reached (a folder until the last step) */
    int parent;              /* O_PATH: the folder holding cur under name, or -1 */
    char name[NAME_MAX + 1]; /* cur's name in parent */
    char rest[2 * PATH_MAX]; /* the path left to walk, from pos */
    size_t pos;
    int links;
};

/* A symlink (next, already checked: its owner is trusted) replaces itself in what is left. */
static int follow_link(struct walk *w, struct cursor *c, int next)
{
    char target[PATH_MAX];
    ssize_t tl = readlinkat(next, "", target, sizeof(target) - 1);
    (void)close(next);
    size_t restlen = strlen(c->rest + c->pos);
    if (++c->links > TRUST_MAX_LINKS || tl <= 0 || (size_t)tl + 1 + restlen >= sizeof(c->rest)) {
        return walk_fail(w, -ELOOP, "too many or too long symlinks at %s", w->shown);
    }
    memmove(c->rest + tl + 1, c->rest + c->pos, restlen + 1); /* "<target>/<rest>" */
    memcpy(c->rest, target, (size_t)tl);
    c->rest[tl] = '/';
    c->pos = 0;
    shown_pop(w);
    if (target[0] == '/') {
        (void)close(c->cur);
        c->cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (c->cur < 0) {
            return neg_errno();
        }
        memcpy(w->shown, "/", 2);
    }
    return 0;
}

/* One component: opened without following, checked, then followed (a link) or stepped into. */
static int walk_step(struct walk *w, struct cursor *c, const char *comp, bool last, unsigned flags)
{
    bool up = strcmp(comp, "..") == 0;
    if (up) {
        shown_pop(w);
    } else {
        shown_push(w, comp);
    }
    int next = up ? openat(c->cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC)
                  : open_component(w, c->cur, comp, last, flags);
    if (next < 0) {
        return up ? neg_errno() : next;
    }
    struct stat st;
    int rc = fstat(next, &st) == 0 ? 0 : neg_errno();
    rc = rc ? rc : check_object(w, next, &st, last, flags);
    if (rc == 0 && S_ISLNK(st.st_mode)) {
        return follow_link(w, c, next);
    }
    if (rc == 0 && !last && !S_ISDIR(st.st_mode)) {
        rc = walk_fail(w, -ENOTDIR, "%s is not a folder", w->shown);
    }
    if (rc != 0) {
        (void)close(next);
        return rc;
    }
    if (c->parent >= 0) {
        (void)close(c->parent);
    }
    c->parent = up ? -1 : c->cur;
    if (up) {
        (void)close(c->cur);
    }
    snprintf(c->name, sizeof(c->name), "%s", comp);
    c->cur = next;
    return 0;
}

int shdir_open_trusted(const char *path, unsigned flags, int *fd_out, char *why, size_t whylen)
{
    struct walk w = {.path = path != NULL ? path : "(null)", .why = why, .whylen = whylen};
    if (why != NULL && whylen > 0) {
        why[0] = '\0';
    }
    if (path == NULL || path[0] != '/') {
        return walk_fail(&w, AGENT_E_INVAL, "not an absolute path");
    }
    struct cursor *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return -ENOMEM;
    }
    if (strlen(path) >= sizeof(c->rest) / 2) {
        free(c);
        return walk_fail(&w, -ENAMETOOLONG, "too long");
    }
    memcpy(c->rest, path, strlen(path) + 1);
    memcpy(w.shown, "/", 2);
    c->parent = -1;
    c->cur = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (c->cur < 0) {
        int rc = neg_errno();
        free(c);
        return rc;
    }
    struct stat st;
    int rc = fstat(c->cur, &st) == 0 ? 0 : neg_errno();
    rc = rc ? rc : check_object(&w, c->cur, &st, c->rest[strspn(c->rest, "/")] == '\0', flags);
    while (rc == 0) {
        c->pos += strspn(c->rest + c->pos, "/");
        if (c->rest[c->pos] == '\0') {
            break;
        }
        size_t n = strcspn(c->rest + c->pos, "/");
        if (n > NAME_MAX) {
            rc = walk_fail(&w, -ENAMETOOLONG, "a component is too long");
            break;
        }
        char comp[NAME_MAX + 1];
        memcpy(comp, c->rest + c->pos, n);
        comp[n] = '\0';
        c->pos += n;
        bool last = c->rest[c->pos + strspn(c->rest + c->pos, "/")] == '\0';
        if (strcmp(comp, ".") != 0) {
            rc = walk_step(&w, c, comp, last, flags);
        }
    }
    if (rc == 0) {
        rc = fstat(c->cur, &st) == 0 ? 0 : neg_errno();
        rc = rc ? rc : reopen_last(&w, c->parent, c->name, c->cur, &st, flags, fd_out);
    }
    if (c->parent >= 0) {
        (void)close(c->parent);
    }
    if (c->cur >= 0) {
        (void)close(c->cur);
    }
    free(c);
    return rc;
}

int shdir_check_trusted(const char *path, unsigned flags, char *why, size_t whylen)
{
    int fd = -1;
    int rc = shdir_open_trusted(path, flags, &fd, why, whylen);
    if (rc == 0) {
        (void)close(fd);
    }
    return rc;
}
