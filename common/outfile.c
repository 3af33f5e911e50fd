/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* O_PATH */
#include "outfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "shdir.h"

static int neg_errno(void)
{
    return errno != 0 ? -errno : -EIO;
}

static int open_in(int dirfd, const char *name, mode_t mode, struct outfile *o)
{
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof(o->name) || strchr(name, '/') != NULL || strcmp(name, ".") == 0 ||
        strcmp(name, "..") == 0) {
        (void)close(dirfd);
        return -EINVAL;
    }
    memcpy(o->name, name, n + 1);
    o->dirfd = dirfd;
    o->fd = -1;
    /* ".<name>.<16 hex>", the name cut to fit NAME_MAX. */
    int keep = (int)(n > 200 ? 200 : n);
    for (int attempt = 0; attempt < 8; attempt++) {
        char sfx[17];
        shdir_random_hex(sfx, 16);
        snprintf(o->tmp, sizeof(o->tmp), ".%.*s.%s", keep, name, sfx);
        int fd = openat(dirfd, o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
        if (fd >= 0) {
            o->fd = fd;
            return 0;
        }
        if (errno != EEXIST) {
            break;
        }
    }
    int rc = neg_errno();
    (void)close(dirfd);
    o->dirfd = -1;
    o->tmp[0] = '\0';
    return rc;
}

int outfile_open(const char *path, mode_t mode, struct outfile *o)
{
    memset(o, 0, sizeof(*o));
    o->dirfd = o->fd = -1;
    const char *slash = strrchr(path, '/');
    const char *name = slash != NULL ? slash + 1 : path;
    char dir[4096];
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
    } else if (slash == path) {
        snprintf(dir, sizeof(dir), "/");
    } else if ((size_t)(slash - path) < sizeof(dir)) {
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    } else {
        return -ENAMETOOLONG;
    }
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) {
        return neg_errno();
    }
    return open_in(dirfd, name, mode, o);
}

int outfile_open_at(int dirfd, const char *name, mode_t mode, struct outfile *o)
{
    memset(o, 0, sizeof(*o));
    o->dirfd = o->fd = -1;
    int own = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
    if (own < 0) {
        return neg_errno();
    }
    return open_in(own, name, mode, o);
}

int outfile_commit(struct outfile *o, dev_t *dev, ino_t *ino)
{
    int rc = 0;
    if (o->fd >= 0) {
        if (fsync(o->fd) != 0 && errno != EINVAL && errno != EROFS) {
            rc = neg_errno();
        }
        if (close(o->fd) != 0 && rc == 0) {
            rc = neg_errno();
        }
        o->fd = -1;
    }
    struct stat st;
    if (rc == 0 && fstatat(o->dirfd, o->tmp, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        rc = neg_errno();
    }
    if (rc == 0 && renameat(o->dirfd, o->tmp, o->dirfd, o->name) != 0) {
        rc = neg_errno();
    }
    if (rc != 0) {
        outfile_abort(o);
        return rc;
    }
    if (dev != NULL) {
        *dev = st.st_dev;
    }
    if (ino != NULL) {
        *ino = st.st_ino;
    }
    (void)close(o->dirfd);
    o->dirfd = -1;
    o->tmp[0] = '\0';
    return 0;
}

void outfile_abort(struct outfile *o)
{
    if (o->fd >= 0) {
        (void)close(o->fd);
        o->fd = -1;
    }
    if (o->dirfd >= 0) {
        if (o->tmp[0] != '\0') {
            (void)unlinkat(o->dirfd, o->tmp, 0);
        }
        (void)close(o->dirfd);
        o->dirfd = -1;
    }
    o->tmp[0] = '\0';
}
