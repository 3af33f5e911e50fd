/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* renameat2, RENAME_NOREPLACE, getrandom, O_PATH */
#include "shdir.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "err.h"

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

/* The kernel's RESOLVE_IN_ROOT walk; -ENOSYS where openat2 is missing or filtered. */
static int open_in_root(int rootfd, const char *rel)
{
#ifdef SYS_openat2
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, rootfd, rel, &how, sizeof(how));
    if (fd >= 0) {
        return (int)fd;
    }
    /* seccomp profiles that predate openat2 answer EPERM or ENOSYS. */
    return errno == ENOSYS || errno == EPERM ? -ENOSYS : neg_errno();
#else
    (void)rootfd;
    (void)rel;
    return -ENOSYS;
#endif
}

/* One component at a time, none of them a symlink. */
static int open_walk(int rootfd, const char *rel)
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
        int next = openat(cur, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
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

int shdir_open_beneath(const char *root, const char *path, int *dirfd_out)
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
        fd = open_in_root(rootfd, rel);
        if (fd == -ENOSYS) {
            fd = open_walk(rootfd, rel);
        }
    }
    if (rootfd >= 0) {
        (void)close(rootfd);
    }
    if (fd < 0) {
        return fd;
    }
    *dirfd_out = fd;
    return 0;
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

static void random_hex(char *out, size_t ndigits)
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
    static const char hex[] = "0123456789abcdef";
    for (size_t i = 0; i < ndigits && i / 2 < nb; i++) {
        out[i] = hex[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 0xf];
    }
    out[ndigits] = '\0';
}

int shdir_private_new(int dirfd, struct shdir_private *p)
{
    p->fd = -1;
    p->name[0] = '\0';
    for (int attempt = 0; attempt < 8; attempt++) {
        memcpy(p->name, ".dotmon-", 8);
        random_hex(p->name + 8, 16);
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
