/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/outfile: a file that appears whole or not at all. Real files in a private
 * temporary folder (what `dotmon convert -o` and --token-file rely on).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "outfile.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/outfileXXXXXX");
    return mkdtemp(dir) != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[96];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* How many entries the folder holds (besides . and ..). */
static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e = d != NULL ? readdir(d) : NULL; e != NULL; e = readdir(d)) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* Whether the file at path holds exactly text. */
static bool holds(const char *path, const char *text)
{
    char got[64] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, got, sizeof(got) - 1) : -1;
    if (fd >= 0) {
        close(fd);
    }
    return n == (ssize_t)strlen(text) && memcmp(got, text, (size_t)n) == 0;
}

static void test_commit_replaces_abort_leaves(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/out.json", dir);
    struct outfile o;
    /* A new file: invisible until committed, then whole, with the mode asked. */
    assert_int_equal(outfile_open(path, 0600, &o), 0);
    assert_int_equal(write(o.fd, "first", 5), 5);
    assert_int_equal(access(path, F_OK), -1);
    assert_int_equal(entries(), 1); /* the temporary file */
    dev_t dev = 0;
    ino_t ino = 0;
    assert_int_equal(outfile_commit(&o, &dev, &ino), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_true(st.st_ino == ino && st.st_dev == dev);
    assert_true(holds(path, "first"));
    assert_int_equal(entries(), 1);
    /* Aborted: the previous file stays as it was, nothing else is left. */
    assert_int_equal(outfile_open(path, 0600, &o), 0);
    assert_int_equal(write(o.fd, "half", 4), 4);
    outfile_abort(&o);
    outfile_abort(&o); /* safe twice */
    assert_true(holds(path, "first"));
    assert_int_equal(entries(), 1);
    /* Committed again: replaced. */
    assert_int_equal(outfile_open(path, 0644, &o), 0);
    assert_int_equal(write(o.fd, "second", 6), 6);
    assert_int_equal(outfile_commit(&o, NULL, NULL), 0);
    assert_true(holds(path, "second"));
    assert_int_equal(entries(), 1);
}

/* A symlink at the name is replaced, its target untouched. */
static void test_link_replaced_not_followed(void **state)
{
    (void)state;
    char target[128], link[128];
    snprintf(target, sizeof(target), "%s/target", dir);
    snprintf(link, sizeof(link), "%s/name", dir);
    FILE *f = fopen(target, "w");
    assert_non_null(f);
    fputs("keep", f);
    fclose(f);
    assert_int_equal(symlink(target, link), 0);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dirfd >= 0);
    struct outfile o;
    assert_int_equal(outfile_open_at(dirfd, "name", 0600, &o), 0);
    assert_int_equal(write(o.fd, "new", 3), 3);
    assert_int_equal(outfile_commit(&o, NULL, NULL), 0);
    struct stat st;
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_true(holds(target, "keep"));
    /* The caller's descriptor is still its own. */
    assert_int_equal(fstat(dirfd, &st), 0);
    close(dirfd);
}

static void test_bad_names(void **state)
{
    (void)state;
    char path[128];
    struct outfile o;
    snprintf(path, sizeof(path), "%s/", dir);
    assert_int_equal(outfile_open(path, 0600, &o), -EINVAL);
    snprintf(path, sizeof(path), "%s/missing/out", dir);
    assert_int_equal(outfile_open(path, 0600, &o), -ENOENT);
    int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(outfile_open_at(dirfd, "a/b", 0600, &o), -EINVAL);
    assert_int_equal(outfile_open_at(dirfd, "..", 0600, &o), -EINVAL);
    close(dirfd);
    assert_int_equal(entries(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_commit_replaces_abort_leaves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_link_replaced_not_followed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
