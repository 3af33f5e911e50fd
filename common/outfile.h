/* SPDX-License-Identifier: MIT */
#ifndef AGENT_OUTFILE_H
#define AGENT_OUTFILE_H

/*
 * A file that appears whole or not at all: written under a temporary name in its own folder
 * (O_CREAT | O_EXCL | O_NOFOLLOW, the caller's mode), then renamed over the final name, which
 * replaces what was there (a symlink at the name is replaced, never followed). On failure the
 * temporary file is removed and the final name is left as it was.
 *
 * Blocking calls on a local folder: run them before the loop starts, on the pool, or in a
 * command that has no loop (dotmon convert). No libuv, no logging. Errors are negative errno.
 */

#include <sys/types.h>

struct outfile {
    int dirfd;      /* the folder (owned: closed by commit/abort) */
    int fd;         /* the temporary file, write-only; the caller may hand it to fdopen and
                     * close it itself, setting fd to -1 */
    char tmp[256];  /* its name in dirfd */
    char name[256]; /* the final name in dirfd */
};

/*
 * Starts path (absolute or relative to the working folder; its folder must exist): opens the
 * folder, then a new temporary file ".<name>.<random>" with mode. 0 with o filled, or -errno
 * (-EINVAL: the path ends in '/' or its name is too long).
 */
int outfile_open(const char *path, mode_t mode, struct outfile *o);

/*
 * The same in an open folder (dirfd is duplicated: the caller keeps its own).
 */
int outfile_open_at(int dirfd, const char *name, mode_t mode, struct outfile *o);

/*
 * Flushes the file to disk (fsync), closes it if still open and renames it to the final name.
 * On success, *dev and *ino (may be NULL) get the file's identity. On failure the temporary file
 * is removed. Either way o is closed. 0 or -errno.
 */
int outfile_commit(struct outfile *o, dev_t *dev, ino_t *ino);

/* Removes the temporary file and closes o (safe on a closed one). */
void outfile_abort(struct outfile *o);

#endif
