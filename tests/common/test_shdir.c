/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/shdir: file operations in folders others can write. Real files in a
 * private temporary folder; the "other user" of a check is simulated by leaving our own uid out
 * of the owners allowed (no second user is needed here; tests/agent/test_agent_attacks runs the
 * attacks as one).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_file_regular, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_file_refusals, setup, teardown),
        cmocka_unit_test(test_owners),
        cmocka_unit_test_setup_teardown(test_unlink_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_and_place, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_beneath, setup, teardown),
        cmocka_unit_test(test_split),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
