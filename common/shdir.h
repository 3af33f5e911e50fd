/* SPDX-License-Identifier: MIT */
#ifndef AGENT_SHDIR_H
#define AGENT_SHDIR_H

/*
 * Files in folders that other users can write: a pod's shared /tmp, an emptyDir (mode 0777, no
 * sticky bit), a dump folder the app writes to. Anyone who can write such a folder can swap a
 * name for a symlink, a FIFO or another file between two system calls, so here:
 *  - every call works relative to a descriptor of the folder, never follows a symlink at the
 *    last component, and never opens anything that could block (O_NONBLOCK, checked with fstat);
 *  - nothing is changed or deleted through a second lookup of a name: a file to delete is first
 *    captured by renaming it into a private 0700 sub-folder, checked there (device and inode),
 *    and only then unlinked; a file to publish is made in a private sub-folder and renamed into
 *    place without replacing anything.
 * The folder itself (its path) is configuration and trusted: symlinks above the last component
 * are followed, except in shdir_open_beneath.
 *
 * These are blocking metadata calls on local folders: run them on the thread pool, or before the
 * loop starts. No libuv, no logging, thread-safe. Errors are negative errno values (UV_E* on
 * Unix) or the AGENT_E_* codes named below.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/* Opens the folder at path (O_DIRECTORY, close-on-exec). */
int shdir_open(const char *path, int *dirfd_out);

/*
 * Opens the folder `path` (absolute) as seen from inside `root` (for example "/proc/<pid>/root",
 * another container's file system): absolute symlinks and ".." resolve inside root, never to
 * dotmon's own files (openat2 RESOLVE_IN_ROOT; on kernels without it, every component is opened
 * with O_NOFOLLOW and a symlink anywhere in path is refused with -ELOOP).
 */
int shdir_open_beneath(const char *root, const char *path, int *dirfd_out);

/*
 * As shdir_open_beneath, but no symlink is followed anywhere in path (RESOLVE_NO_SYMLINKS; the
 * component walk refuses them too): -ELOOP, or -ENOTDIR where a folder is wanted), and the last
 * component is opened with flags | O_NOFOLLOW | O_CLOEXEC: O_RDONLY | O_DIRECTORY for a folder,
 * O_PATH for a socket. With O_PATH a symlink at the last component gives a descriptor of the link
 * itself: check what fstat says before using it. When root is the root of a process that the
 * process's user can change
 * (/proc/<pid>/root/<its TMPDIR>), this is how a name found there is reached again safely.
 */
int shdir_open_beneath_nolinks(const char *root, const char *path, int flags, int *fd_out);

/* Who may own a file or socket: up to SHDIR_MAX_OWNERS uids. */
#define SHDIR_MAX_OWNERS 4
struct shdir_owners {
    uid_t uid[SHDIR_MAX_OWNERS];
    size_t n;
};
/* Adds uid (once); false when full. */
bool shdir_owners_add(struct shdir_owners *o, uid_t uid);
bool shdir_owners_has(const struct shdir_owners *o, uid_t uid);

/*
 * Opens dirfd/name read-only, only if it is a regular file with at most one link, owned by one
 * of `owners` (NULL: any owner): checked before opening (fstatat, not following a symlink) and
 * again on the descriptor (fstat: the same device and inode), and opened with
 * O_NOFOLLOW | O_NONBLOCK so that a FIFO or device swapped in meanwhile cannot block the
 * caller. *st_out (may be NULL) gets what was found, also on AGENT_E_NOTREG and
 * AGENT_E_UNTRUSTED. Returns 0 with *fd_out (close-on-exec, blocking mode restored),
 * -ENOENT, -ELOOP (a symlink), AGENT_E_NOTREG (a FIFO, socket, device, directory, or a file with
 * several links), AGENT_E_UNTRUSTED (another owner), AGENT_E_CHANGED (swapped between the two
 * checks), or another -errno.
 */
int shdir_open_file(int dirfd, const char *name, const struct shdir_owners *owners, int *fd_out,
                    struct stat *st_out);

/*
 * Deletes dirfd/name only if it is still the object (dev, ino), whatever its type except a
 * folder: it is captured by a rename into a private sub-folder, compared there, then unlinked;
 * anything else found at the name is put back (or, if the name was taken again meanwhile,
 * deleted: it sat at a name the caller owns) and AGENT_E_CHANGED returned. Returns 0, -ENOENT
 * (nothing at the name), AGENT_E_CHANGED, or another -errno (-EPERM: a sticky folder and
 * another user's file, -EACCES, -EROFS: nothing could have been deleted either).
 */
int shdir_unlink_exact(int dirfd, const char *name, dev_t dev, ino_t ino);

/* A private sub-folder (mode 0700, owned by this process's effective uid, random name). */
struct shdir_private {
    char name[32]; /* ".dotmon-<16 hex digits>" */
    int fd;        /* the sub-folder; -1 when not open */
};

/* Creates one in dirfd and checks what was opened is it (a folder, ours, 0700). */
/*
 * ndigits (at most 32) random lowercase hex digits and a NUL into out, for names that only need to
 * be unlikely to be taken (what gets opened is checked anyway); falls back to the clock.
 */
void shdir_random_hex(char *out, size_t ndigits);

int shdir_private_new(int dirfd, struct shdir_private *p);
/* Removes it (it must be empty by now) and closes its descriptor. Safe on a closed one. */
void shdir_private_remove(int dirfd, struct shdir_private *p);

/*
 * Moves from_dirfd/from to dirfd/name without replacing anything there (renameat2
 * RENAME_NOREPLACE; on file systems without it, link then unlink). -EEXIST if the name is taken.
 */
int shdir_place(int from_dirfd, const char *from, int dirfd, const char *name);

/*
 * sshd's StrictModes for a path dotmon reads settings from or makes files in. The path
 * (absolute) is walked one component at a time from "/", each opened with O_NOFOLLOW; every
 * object met must be owned by root or by dotmon's effective uid, and every folder must not be
 * writable by group or others unless it has the sticky bit (/tmp: nobody can rename or replace
 * another user's entries there, and an entry another user makes there fails the owner check).
 * A symlink is followed only when it is owned by root or dotmon's uid (the folder holding it was
 * checked before), so Kubernetes' `..data -> ..2024_…` links work and a link planted by another
 * user does not; ".." is the physical parent. Writable bits do not count on a root-owned folder of
 * a read-only mount (a Secret or ConfigMap volume is a read-only tmpfs with mode 1777; a folder
 * owned by dotmon's uid may be mounted read-write elsewhere, so its bits still count).
 *  - SHDIR_TRUST_GROUP: folders may be writable by their group (not others), on the whole path:
 *    an egress folder on a PVC (2775, group = the pod's fsGroup);
 * The last component:
 *  - SHDIR_TRUST_FILE: must be a regular file with one link, else a folder;
 *  - SHDIR_TRUST_STRICT: must not be writable by group or others, sticky or not (a setting);
 *  - SHDIR_TRUST_SHARED: a folder dotmon shares with the app on purpose (the listen socket's,
 *    the dump folder) may be writable by others; its owner is still checked, and what dotmon
 *    does inside goes through the calls above;
 *  - SHDIR_TRUST_MKDIR: missing folders are made (0700) on the way, never through a link.
 * Returns 0 with *fd_out (close-on-exec; a folder O_RDONLY | O_DIRECTORY, a file O_RDONLY,
 * opened through the checked descriptors, never by name again), -ENOENT (a component is
 * missing), AGENT_E_UNTRUSTED (also a file with several links), -ENOTDIR, AGENT_E_NOTREG,
 * -ELOOP (over 40 links), AGENT_E_INVAL (not absolute), or another -errno; on failure why holds
 * "<path>: <reason>" (the component and what is wrong with it: owner uid, writable by whom).
 */
#define SHDIR_TRUST_FILE   0x1u
#define SHDIR_TRUST_STRICT 0x2u
#define SHDIR_TRUST_SHARED 0x4u
#define SHDIR_TRUST_MKDIR  0x8u
#define SHDIR_TRUST_GROUP  0x10u
int shdir_open_trusted(const char *path, unsigned flags, int *fd_out, char *why, size_t whylen);

/* The same check without keeping a descriptor. */
int shdir_check_trusted(const char *path, unsigned flags, char *why, size_t whylen);

/* dirname/basename of an absolute path into caller buffers ("/a/b" -> "/a", "b"; "/b" -> "/",
 * "b"). AGENT_E_INVAL for a relative path, one ending in '/', or one that does not fit. */
int shdir_split(const char *path, char *dir, size_t dir_cap, char *base, size_t base_cap);

#endif
