/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/shdir: file operations in folders others can write. Real files in a
 * private temporary folder; the "other user" of a check is simulated by leaving our own uid out
 * of the owners allowed (no second user is needed here; tests/agent/test_agent_attacks runs the
 * attacks as one).
 */
#define _GNU_SOURCE /* unshare */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "err.h"
#include "shdir.h"

struct fx {
    char dir[64];
    int dirfd;
};

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    if (fx == NULL) {
        return -1;
    }
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/shdirXXXXXX");
    if (mkdtemp(fx->dir) == NULL || shdir_open(fx->dir, &fx->dirfd) != 0) {
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static void rm_tree(const char *path)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot remove %s\n", path);
    }
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    close(fx->dirfd);
    rm_tree(fx->dir);
    free(fx);
    return 0;
}

static void make_file(const struct fx *fx, const char *name, const char *text)
{
    int fd = openat(fx->dirfd, name, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

static bool exists(const struct fx *fx, const char *name)
{
    struct stat st;
    return fstatat(fx->dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Nothing but the named entries is left in the folder (no private sub-folder). */
static void only(const struct fx *fx, int n)
{
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "test $(ls -A '%s' | wc -l) -eq %d", fx->dir, n);
    assert_int_equal(system(cmd), 0);
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static void test_open_file_regular(void **state)
{
    struct fx *fx = *state;
    make_file(fx, "dump", "core");
    struct shdir_owners ok = {.n = 0};
    assert_true(shdir_owners_add(&ok, geteuid()));
    int fd = -1;
    struct stat st;
    assert_int_equal(shdir_open_file(fx->dirfd, "dump", &ok, &fd, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_size, 4);
    assert_int_equal(fcntl(fd, F_GETFL) & O_NONBLOCK, 0); /* blocking again for the reader */
    assert_true((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    char b[8];
    assert_int_equal(read(fd, b, sizeof(b)), 4);
    assert_memory_equal(b, "core", 4);
    close(fd);
    /* NULL owners: any owner. */
    assert_int_equal(shdir_open_file(fx->dirfd, "dump", NULL, &fd, NULL), 0);
    close(fd);
    assert_int_equal(shdir_open_file(fx->dirfd, "missing", &ok, &fd, NULL), -ENOENT);
}

static void test_open_file_refusals(void **state)
{
    struct fx *fx = *state;
    struct shdir_owners ok = {.n = 0};
    assert_true(shdir_owners_add(&ok, geteuid()));
    int fd = -1;
    struct stat st;

    /* A FIFO nobody writes to: refused at once, never opened for reading (which would block). */
    assert_int_equal(mkfifoat(fx->dirfd, "fifo", 0666), 0);
    double t0 = now_ms();
    assert_int_equal(shdir_open_file(fx->dirfd, "fifo", &ok, &fd, &st), AGENT_E_NOTREG);
    assert_true(S_ISFIFO(st.st_mode));
    assert_true(now_ms() - t0 < 1000);

    /* A symlink, even to a good file. */
    make_file(fx, "real", "x");
    assert_int_equal(symlinkat("real", fx->dirfd, "link"), 0);
    assert_int_equal(shdir_open_file(fx->dirfd, "link", &ok, &fd, &st), -ELOOP);

    /* A second link to a file (a hard link made by whoever could): not a fresh dump. */
    assert_int_equal(linkat(fx->dirfd, "real", fx->dirfd, "hard", 0), 0);
    assert_int_equal(shdir_open_file(fx->dirfd, "hard", &ok, &fd, &st), AGENT_E_NOTREG);
    assert_int_equal(st.st_nlink, 2);

    /* Another owner than the ones allowed. */
    make_file(fx, "theirs", "x");
    struct shdir_owners other = {.n = 0};
    assert_true(shdir_owners_add(&other, geteuid() + 4242));
    assert_int_equal(shdir_open_file(fx->dirfd, "theirs", &other, &fd, &st), AGENT_E_UNTRUSTED);
    assert_int_equal(st.st_uid, geteuid());

    /* A folder. */
    assert_int_equal(mkdirat(fx->dirfd, "sub", 0700), 0);
    assert_int_equal(shdir_open_file(fx->dirfd, "sub", &ok, &fd, &st), AGENT_E_NOTREG);
}

static void test_owners(void **state)
{
    (void)state;
    struct shdir_owners o = {.n = 0};
    for (uid_t u = 0; u < SHDIR_MAX_OWNERS; u++) {
        assert_true(shdir_owners_add(&o, 100 + u));
    }
    assert_true(shdir_owners_add(&o, 100)); /* already there */
    assert_false(shdir_owners_add(&o, 999));
    assert_true(shdir_owners_has(&o, 101));
    assert_false(shdir_owners_has(&o, 999));
}

static void test_unlink_exact(void **state)
{
    struct fx *fx = *state;
    make_file(fx, "a", "one");
    struct stat st;
    assert_int_equal(fstatat(fx->dirfd, "a", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "a", st.st_dev, st.st_ino), 0);
    assert_false(exists(fx, "a"));
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "a", st.st_dev, st.st_ino), -ENOENT);
    only(fx, 0);

    /* The name now holds another file (swapped after we looked): it stays, untouched. */
    make_file(fx, "b", "first");
    assert_int_equal(fstatat(fx->dirfd, "b", &st, AT_SYMLINK_NOFOLLOW), 0);
    make_file(fx, "b2", "second");
    assert_int_equal(renameat(fx->dirfd, "b2", fx->dirfd, "b"), 0);
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "b", st.st_dev, st.st_ino), AGENT_E_CHANGED);
    int fd = openat(fx->dirfd, "b", O_RDONLY);
    assert_true(fd >= 0);
    char buf[16] = "";
    assert_int_equal(read(fd, buf, sizeof(buf)), 6);
    assert_string_equal(buf, "second");
    close(fd);
    only(fx, 1);

    /* A symlink is deleted as itself, never its target. */
    assert_int_equal(symlinkat("b", fx->dirfd, "l"), 0);
    assert_int_equal(fstatat(fx->dirfd, "l", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "l", st.st_dev, st.st_ino), 0);
    assert_false(exists(fx, "l"));
    assert_true(exists(fx, "b"));

    /* A FIFO too. */
    assert_int_equal(mkfifoat(fx->dirfd, "f", 0600), 0);
    assert_int_equal(fstatat(fx->dirfd, "f", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "f", st.st_dev, st.st_ino), 0);
    assert_false(exists(fx, "f"));

    /* Never a folder, even the one seen. */
    assert_int_equal(mkdirat(fx->dirfd, "d", 0700), 0);
    assert_int_equal(fstatat(fx->dirfd, "d", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_int_equal(shdir_unlink_exact(fx->dirfd, "d", st.st_dev, st.st_ino), AGENT_E_CHANGED);
    assert_true(exists(fx, "d"));
    only(fx, 2);
}

static void test_private_and_place(void **state)
{
    struct fx *fx = *state;
    struct shdir_private p;
    assert_int_equal(shdir_private_new(fx->dirfd, &p), 0);
    assert_true(p.fd >= 0);
    assert_int_equal(strncmp(p.name, ".dotmon-", 8), 0);
    struct stat st;
    assert_int_equal(fstat(p.fd, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0700);

    /* Made inside, moved out without replacing anything. */
    int fd = openat(p.fd, "s", O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    make_file(fx, "taken", "x");
    assert_int_equal(shdir_place(p.fd, "s", fx->dirfd, "taken"), -EEXIST);
    assert_int_equal(shdir_place(p.fd, "s", fx->dirfd, "free"), 0);
    assert_true(exists(fx, "free"));
    shdir_private_remove(fx->dirfd, &p);
    assert_int_equal(p.fd, -1);
    shdir_private_remove(fx->dirfd, &p); /* twice is fine */
    only(fx, 2);
}

static void test_open_beneath(void **state)
{
    struct fx *fx = *state;
    /* A "container root": root/a/b holds a marker; root/abs -> /a (absolute, as in the app). */
    assert_int_equal(mkdirat(fx->dirfd, "root", 0700), 0);
    assert_int_equal(mkdirat(fx->dirfd, "root/a", 0700), 0);
    assert_int_equal(mkdirat(fx->dirfd, "root/a/b", 0700), 0);
    make_file(fx, "root/a/b/marker", "in");
    char root[96];
    snprintf(root, sizeof(root), "%s/root", fx->dir);
    int d = -1;
    assert_int_equal(shdir_open_beneath(root, "/a/b", &d), 0);
    struct stat st;
    assert_int_equal(fstatat(d, "marker", &st, 0), 0);
    close(d);
    assert_int_equal(shdir_open_beneath(root, "/", &d), 0);
    close(d);

    /* Absolute symlinks and ".." resolve inside root (openat2) or are refused (older kernels):
     * never to this process's own files. The outside folder has its own marker. */
    assert_int_equal(mkdirat(fx->dirfd, "outside", 0700), 0);
    make_file(fx, "outside/marker", "out");
    char outside[96];
    snprintf(outside, sizeof(outside), "%s/outside", fx->dir);
    assert_int_equal(symlinkat(outside, fx->dirfd, "root/escape"), 0);
    int rc = shdir_open_beneath(root, "/escape", &d);
    assert_true(rc == -ENOENT || rc == -ELOOP);
    rc = shdir_open_beneath(root, "/../outside", &d);
    if (rc == 0) {
        /* ".." at the root stays at the root: root has no "outside". */
        assert_int_not_equal(fstatat(d, "marker", &st, 0), 0);
        close(d);
    } else {
        assert_true(rc == -ENOENT || rc == -EXDEV);
    }
    assert_int_equal(symlinkat("/a", fx->dirfd, "root/abs"), 0);
    rc = shdir_open_beneath(root, "/abs/b", &d);
    if (rc == 0) {
        assert_int_equal(fstatat(d, "marker", &st, 0), 0); /* root/a/b, not /a/b */
        close(d);
    } else {
        assert_int_equal(rc, -ELOOP);
    }
    assert_int_equal(shdir_open_beneath(root, "relative", &d), AGENT_E_INVAL);
}

static void test_open_beneath_nolinks(void **state)
{
    struct fx *fx = *state;
    /* root/t/s (a file standing for a socket); root/link -> /t and root/t/ls -> /t/s (absolute,
     * resolvable in root), root/t/out -> the outside marker: none is followed. */
    assert_int_equal(mkdirat(fx->dirfd, "root", 0700), 0);
    assert_int_equal(mkdirat(fx->dirfd, "root/t", 0700), 0);
    make_file(fx, "root/t/s", "sock");
    make_file(fx, "marker", "out");
    char root[96];
    char outside[96];
    snprintf(root, sizeof(root), "%s/root", fx->dir);
    snprintf(outside, sizeof(outside), "%s/marker", fx->dir);
    assert_int_equal(symlinkat("/t", fx->dirfd, "root/link"), 0);
    assert_int_equal(symlinkat("/t/s", fx->dirfd, "root/t/ls"), 0);
    assert_int_equal(symlinkat(outside, fx->dirfd, "root/t/out"), 0);
    struct stat want;
    assert_int_equal(fstatat(fx->dirfd, "root/t/s", &want, 0), 0);

    int fd = -1;
    struct stat st;
    /* Extra slashes (a TMPDIR ending in '/') are the same path. */
    assert_int_equal(shdir_open_beneath_nolinks(root, "/t//s", O_PATH, &fd), 0);
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(st.st_dev == want.st_dev && st.st_ino == want.st_ino);
    close(fd);
    assert_int_equal(shdir_open_beneath_nolinks(root, "/t/", O_RDONLY | O_DIRECTORY, &fd), 0);
    close(fd);
    /* A symlink above the last component: refused, even one that stays inside root. */
    assert_int_equal(shdir_open_beneath_nolinks(root, "/link/s", O_PATH, &fd), -ELOOP);
    /* The folder itself a symlink (O_DIRECTORY speaks first for openat2: ENOTDIR). */
    int lrc = shdir_open_beneath_nolinks(root, "/link", O_RDONLY | O_DIRECTORY, &fd);
    assert_true(lrc == -ELOOP || lrc == -ENOTDIR);
    /* At the last component: O_PATH gives the link itself, never what it names. */
    const char *links[] = {"/t/ls", "/t/out"};
    for (size_t i = 0; i < 2; i++) {
        int rc = shdir_open_beneath_nolinks(root, links[i], O_PATH, &fd);
        if (rc == 0) {
            assert_int_equal(fstat(fd, &st), 0);
            assert_true(S_ISLNK(st.st_mode));
            close(fd);
        } else {
            assert_int_equal(rc, -ELOOP);
        }
    }
    assert_int_equal(shdir_open_beneath_nolinks(root, "t/s", O_PATH, &fd), AGENT_E_INVAL);
}

static void test_split(void **state)
{
    (void)state;
    char d[32], b[32];
    assert_int_equal(shdir_split("/tmp/dm.sock", d, sizeof(d), b, sizeof(b)), 0);
    assert_string_equal(d, "/tmp");
    assert_string_equal(b, "dm.sock");
    assert_int_equal(shdir_split("/dm.sock", d, sizeof(d), b, sizeof(b)), 0);
    assert_string_equal(d, "/");
    assert_string_equal(b, "dm.sock");
    assert_int_equal(shdir_split("dm.sock", d, sizeof(d), b, sizeof(b)), AGENT_E_INVAL);
    assert_int_equal(shdir_split("/tmp/", d, sizeof(d), b, sizeof(b)), AGENT_E_INVAL);
    assert_int_equal(shdir_split("/a/very/long/folder/name/x", d, 8, b, sizeof(b)), AGENT_E_INVAL);
}

/* ---- shdir_open_trusted (StrictModes) ---------------------------------------------------- */

#define OTHER_UID 4321

static void pathf(char *out, size_t cap, const struct fx *fx, const char *rel)
{
    snprintf(out, cap, "%s/%s", fx->dir, rel);
}

/* Opens fx->dir/rel with flags; returns the code, why in why. */
static int trusted(const struct fx *fx, const char *rel, unsigned flags, char *why, size_t wl)
{
    char p[256];
    pathf(p, sizeof(p), fx, rel);
    int fd = -1;
    int rc = shdir_open_trusted(p, flags, &fd, why, wl);
    if (rc == 0) {
        assert_true(fd >= 0);
        close(fd);
    }
    return rc;
}

static void test_trusted_tree(void **state)
{
    struct fx *fx = *state;
    char why[512];
    assert_int_equal(mkdirat(fx->dirfd, "conf", 0755), 0);
    make_file(fx, "conf/settings.json", "{\"a\":1}");
    /* fx->dir sits in /tmp (root, 1777): a sticky ancestor passes. */
    char p[256];
    pathf(p, sizeof(p), fx, "conf/settings.json");
    int fd = -1;
    assert_int_equal(
        shdir_open_trusted(p, SHDIR_TRUST_FILE | SHDIR_TRUST_STRICT, &fd, why, sizeof(why)), 0);
    char text[16] = {0};
    assert_int_equal(read(fd, text, sizeof(text) - 1), 7);
    assert_string_equal(text, "{\"a\":1}");
    close(fd);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_STRICT, why, sizeof(why)), 0);
    assert_int_equal(
        trusted(fx, "conf/./../conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)), 0);
    /* Kinds and missing components. */
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_FILE, why, sizeof(why)), AGENT_E_NOTREG);
    assert_int_equal(trusted(fx, "conf/settings.json", 0, why, sizeof(why)), -ENOTDIR);
    assert_int_equal(trusted(fx, "conf/none.json", SHDIR_TRUST_FILE, why, sizeof(why)), -ENOENT);
    assert_non_null(strstr(why, "conf/none.json"));
    assert_int_equal(shdir_check_trusted("relative/x", 0, why, sizeof(why)), AGENT_E_INVAL);

    /* Writable by others: refused, the folder named; sticky passes, except as the last
     * component of a setting (STRICT); SHARED lets the last folder be writable. */
    assert_int_equal(chmod(p, 0644), 0);
    pathf(p, sizeof(p), fx, "conf");
    assert_int_equal(chmod(p, 0777), 0);
    assert_int_equal(trusted(fx, "conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "/conf is writable by others (and not sticky)"));
    assert_int_equal(trusted(fx, "conf", 0, why, sizeof(why)), AGENT_E_UNTRUSTED);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_SHARED, why, sizeof(why)), 0);
    assert_int_equal(chmod(p, 01777), 0);
    assert_int_equal(trusted(fx, "conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)), 0);
    assert_int_equal(trusted(fx, "conf", 0, why, sizeof(why)), 0);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_STRICT, why, sizeof(why)), AGENT_E_UNTRUSTED);
    assert_int_equal(chmod(p, 0775), 0);
    assert_int_equal(trusted(fx, "conf", 0, why, sizeof(why)), AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "is writable by its group"));
    /* SHDIR_TRUST_GROUP (egress): a PVC root (2775, the fsGroup's) passes, also on the way to a
     * folder made inside; others-writable without the sticky bit still does not. */
    assert_int_equal(chmod(p, 02775), 0);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_MKDIR | SHDIR_TRUST_GROUP, why, sizeof(why)),
                     0);
    assert_int_equal(
        trusted(fx, "conf/out/a", SHDIR_TRUST_MKDIR | SHDIR_TRUST_GROUP, why, sizeof(why)), 0);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_MKDIR, why, sizeof(why)), AGENT_E_UNTRUSTED);
    assert_int_equal(chmod(p, 0777), 0);
    assert_int_equal(trusted(fx, "conf", SHDIR_TRUST_MKDIR | SHDIR_TRUST_GROUP, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "/conf is writable by others (and not sticky)"));
    assert_int_equal(chmod(p, 0755), 0);
    /* A file with a second name (a hard link could sit in a folder someone else writes). */
    assert_int_equal(linkat(fx->dirfd, "conf/settings.json", fx->dirfd, "conf/other", 0), 0);
    assert_int_equal(trusted(fx, "conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "/conf/settings.json has 2 links"));
    assert_int_equal(unlinkat(fx->dirfd, "conf/other", 0), 0);
    assert_int_equal(trusted(fx, "conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)), 0);
    pathf(p, sizeof(p), fx, "conf/settings.json");
    assert_int_equal(chmod(p, 0666), 0);
    assert_int_equal(trusted(fx, "conf/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "file "));
}

/* Kubernetes' Secret/ConfigMap layout: key -> ..data/key, ..data -> ..2024_…, all root's. */
static void test_trusted_k8s_links(void **state)
{
    struct fx *fx = *state;
    char why[512];
    assert_int_equal(mkdirat(fx->dirfd, "conf", 0755), 0);
    assert_int_equal(mkdirat(fx->dirfd, "conf/..2024_11_29_01_02_03.123", 0755), 0);
    make_file(fx, "conf/..2024_11_29_01_02_03.123/Key", "v");
    assert_int_equal(symlinkat("..2024_11_29_01_02_03.123", fx->dirfd, "conf/..data"), 0);
    assert_int_equal(symlinkat("..data/Key", fx->dirfd, "conf/Key"), 0);
    assert_int_equal(
        trusted(fx, "conf/Key", SHDIR_TRUST_FILE | SHDIR_TRUST_STRICT, why, sizeof(why)), 0);
    /* An absolute link of ours is followed too. */
    char target[256];
    pathf(target, sizeof(target), fx, "conf");
    assert_int_equal(symlinkat(target, fx->dirfd, "abs"), 0);
    assert_int_equal(trusted(fx, "abs/Key", SHDIR_TRUST_FILE, why, sizeof(why)), 0);
    assert_int_equal(symlinkat("loop", fx->dirfd, "loop"), 0);
    assert_int_equal(trusted(fx, "loop/x", 0, why, sizeof(why)), -ELOOP);
}

/* Another uid's folder, file or symlink (made by chown: needs root). */
static void test_trusted_foreign(void **state)
{
    struct fx *fx = *state;
    if (geteuid() != 0) {
        skip();
    }
    char why[512], p[256];
    /* HOME=/tmp-like: a sticky folder where another uid made .config. */
    assert_int_equal(mkdirat(fx->dirfd, "home", 01777), 0);
    pathf(p, sizeof(p), fx, "home");
    assert_int_equal(chmod(p, 01777), 0);
    assert_int_equal(mkdirat(fx->dirfd, "home/.config", 0755), 0);
    make_file(fx, "home/.config/settings.json", "{}");
    pathf(p, sizeof(p), fx, "home/.config");
    assert_int_equal(chown(p, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(trusted(fx, "home/.config/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "/home/.config is owned by uid 4321"));
    assert_int_equal(chown(p, 0, 0), 0);
    pathf(p, sizeof(p), fx, "home/.config/settings.json");
    assert_int_equal(chown(p, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(trusted(fx, "home/.config/settings.json", SHDIR_TRUST_FILE, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "file "));

    /* A symlink another uid planted (in a sticky folder) is not followed, and nothing is made
     * through it; the same link made by root is. */
    assert_int_equal(mkdirat(fx->dirfd, "elsewhere", 0700), 0);
    assert_int_equal(symlinkat("../elsewhere", fx->dirfd, "home/out"), 0);
    pathf(p, sizeof(p), fx, "home/out");
    assert_int_equal(lchown(p, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(trusted(fx, "home/out/a/b", SHDIR_TRUST_MKDIR, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
    assert_non_null(strstr(why, "symlink "));
    assert_non_null(strstr(why, "/home/out is owned by uid 4321"));
    assert_false(exists(fx, "elsewhere/a"));
    assert_int_equal(lchown(p, 0, 0), 0);
    assert_int_equal(trusted(fx, "home/out/a/b", SHDIR_TRUST_MKDIR, why, sizeof(why)), 0);
    struct stat st;
    assert_int_equal(fstatat(fx->dirfd, "elsewhere/a/b", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    /* A folder of another uid at the end. */
    pathf(p, sizeof(p), fx, "elsewhere/a/b");
    assert_int_equal(chown(p, OTHER_UID, OTHER_UID), 0);
    assert_int_equal(trusted(fx, "elsewhere/a/b", SHDIR_TRUST_SHARED, why, sizeof(why)),
                     AGENT_E_UNTRUSTED);
}

/* In a child with its own mount namespace: a tmpfs mounted read-only holding a 0777 folder of
 * root's and one of dotmon's uid (4321 here, the child's effective uid). Exit 0 when the first
 * passes (a Secret/ConfigMap root) and the second is refused; 77 when mounts are not allowed. */
static int ro_mount_case(const char *dir)
{
    char mnt[128], mine[160], roots[160], why[512];
    snprintf(mnt, sizeof(mnt), "%s/ro", dir);
    snprintf(mine, sizeof(mine), "%s/mine", mnt);
    snprintf(roots, sizeof(roots), "%s/roots", mnt);
    if (unshare(CLONE_NEWNS) != 0 || mount("none", "/", "none", MS_REC | MS_PRIVATE, NULL) != 0 ||
        mkdir(mnt, 0755) != 0 || mount("tmpfs", mnt, "tmpfs", 0, "mode=0755") != 0) {
        return 77;
    }
    if (mkdir(mine, 0777) != 0 || chmod(mine, 0777) != 0 || chown(mine, OTHER_UID, 0) != 0 ||
        mkdir(roots, 0777) != 0 || chmod(roots, 0777) != 0 || chmod(dir, 0755) != 0 ||
        mount("none", mnt, "none", MS_REMOUNT | MS_RDONLY, NULL) != 0 || seteuid(OTHER_UID) != 0) {
        return 77;
    }
    int bad = 0;
    if (shdir_check_trusted(roots, 0, why, sizeof(why)) != 0) {
        fprintf(stderr, "root's folder on a read-only mount refused: %s\n", why);
        bad |= 1;
    }
    if (shdir_check_trusted(mine, 0, why, sizeof(why)) != AGENT_E_UNTRUSTED ||
        strstr(why, "/ro/mine is writable by others") == NULL) {
        fprintf(stderr, "dotmon's folder on a read-only mount: %s\n", why);
        bad |= 2;
    }
    return bad;
}

/* The read-only-mount exemption holds for root's folders only (needs root and mounts). */
static void test_trusted_read_only_mount(void **state)
{
    struct fx *fx = *state;
    if (geteuid() != 0) {
        skip();
    }
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        _exit(ro_mount_case(fx->dir));
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        skip();
    }
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_file_regular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_file_refusals, setup, teardown),
        cmocka_unit_test(test_owners),
        cmocka_unit_test_setup_teardown(test_unlink_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_and_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_beneath, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_beneath_nolinks, setup, teardown),
        cmocka_unit_test(test_split),
        cmocka_unit_test_setup_teardown(test_trusted_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trusted_k8s_links, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trusted_foreign, setup, teardown),
        cmocka_unit_test_setup_teardown(test_trusted_read_only_mount, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
