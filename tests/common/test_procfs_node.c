/* SPDX-License-Identifier: MIT */
/*
 * Node mode's /proc parsers (common/procfs.h): NSpid, the start time, an environment value, a
 * listening socket in net/unix and a fd's socket link, on texts laid out as the kernel writes them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "procfs.h"

#define TXT(s) (s), (sizeof(s) - 1)

static const char status_nested[] = "Name:\tTestApp\n"
                                    "Umask:\t0022\n"
                                    "State:\tS (sleeping)\n"
                                    "Tgid:\t8207\n"
                                    "Ngid:\t0\n"
                                    "Pid:\t8207\n"
                                    "PPid:\t8199\n"
                                    "TracerPid:\t0\n"
                                    "NStgid:\t8207\t1\n"
                                    "NSpid:\t8207\t1\n"
                                    "NSpgid:\t8207\t1\n"
                                    "VmPeak:\t  3277888 kB\n";

static void test_nspid(void **state)
{
    (void)state;
    uint64_t v = 0;
    assert_true(procfs_status_nspid_inner(TXT(status_nested), &v));
    assert_int_equal(v, 1);
    assert_true(procfs_status_nspid_inner(TXT("Name:\tsh\nNSpid:\t42\nVmPeak:\t1 kB\n"), &v));
    assert_int_equal(v, 42);
    /* Three levels, and the last line without '\n' (a read cut at the end of it). */
    assert_true(procfs_status_nspid_inner(TXT("NSpid:\t900\t17\t3"), &v));
    assert_int_equal(v, 3);
    assert_false(procfs_status_nspid_inner(TXT("Name:\tx\nPid:\t1\n"), &v));
    assert_false(procfs_status_nspid_inner(TXT("NSpid:\t\n"), &v));
    assert_false(procfs_status_nspid_inner(TXT("NSpid:\t12\tx1\n"), &v));
    /* "NSpgid:" is another line. */
    assert_false(procfs_status_nspid_inner(TXT("NSpgid:\t5\t6\n"), &v));
}

static void test_starttime(void **state)
{
    (void)state;
    uint64_t v = 0;
    static const char stat[] =
        "8207 (TestApp) S 8199 8207 8199 0 -1 4194560 5915 0 0 0 22 6 0 0 20 0 19 0 "
        "33471190 3356557312 8712 18446744073709551615 1 1 0 0 0 0 0 4096 17663 0 0 0 17 1 0 "
        "0 0 0 0 0 0 0 0 0 0 0 0\n";
    assert_true(procfs_stat_starttime(TXT(stat), &v));
    assert_int_equal(v, 33471190);
    /* A command name with spaces and parentheses: fields count from the last ')'. */
    static const char odd[] = "77 (a) b (c) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 "
                              "123456 0 0\n";
    assert_true(procfs_stat_starttime(TXT(odd), &v));
    assert_int_equal(v, 123456);
    assert_false(procfs_stat_starttime(TXT("77 (short) S 1 2 3\n"), &v));
    assert_false(procfs_stat_starttime(TXT("no parenthesis"), &v));
}

static void test_environ(void **state)
{
    (void)state;
    static const char env[] = "PATH=/usr/bin\0TMPDIRX=/no\0TMPDIR=/var/tmp/app\0HOME=/root\0";
    const char *v = NULL;
    size_t n = 0;
    assert_true(procfs_environ_get(env, sizeof(env) - 1, "TMPDIR", &v, &n));
    assert_int_equal(n, strlen("/var/tmp/app"));
    assert_memory_equal(v, "/var/tmp/app", n);
    assert_true(procfs_environ_get(env, sizeof(env) - 1, "HOME", &v, &n));
    assert_memory_equal(v, "/root", n);
    assert_false(procfs_environ_get(env, sizeof(env) - 1, "TMP", &v, &n));
    /* An entry cut by the read bound (no terminating NUL) is not taken. */
    assert_false(procfs_environ_get(env, 30, "TMPDIR", &v, &n));
    assert_false(procfs_environ_get(env, 0, "PATH", &v, &n));
}

static const char net_unix[] =
    "Num       RefCount Protocol Flags    Type St Inode Path\n"
    "00000000c2ee3fd2: 00000002 00000000 00010000 0001 01 42092294 "
    "/tmp/dotnet-diagnostic-1-6825986-socket\n"
    "00000000a1b2c3d4: 00000003 00000000 00000000 0001 03 42092300 "
    "/tmp/dotnet-diagnostic-1-6825986-socket\n"
    "00000000f3e26fc8: 00000002 00000000 00010000 0002 01 42092901 /tmp/dgram\n"
    "0000000011112222: 00000002 00000000 00010000 0001 01 42093000 @/tmp/abstract\n"
    "0000000033334444: 00000002 00000000 00010000 0001 01 42093100 /tmp/with space\n"
    "0000000055556666: 00000003 00000000 00000000 0001 03 42093200\n";

static void test_unix_listener(void **state)
{
    (void)state;
    uint64_t ino = 0;
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "/tmp/dotnet-diagnostic-1-6825986-socket",
                                          NULL, 0, &ino),
                     0);
    assert_int_equal(ino, 42092294); /* the listener, not the connected socket after it */
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "/tmp/with space", NULL, 0, &ino), 0);
    assert_int_equal(ino, 42093100);
    /* A datagram socket, an abstract one, a prefix of a path: not listeners at that path. */
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "/tmp/dgram", NULL, 0, &ino),
                     AGENT_E_NOTFOUND);
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "/tmp/abstract", NULL, 0, &ino),
                     AGENT_E_NOTFOUND);
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "/tmp/dotnet-diagnostic-1", NULL, 0, &ino),
                     AGENT_E_NOTFOUND);
    /* The header line is never a socket. */
    assert_int_equal(procfs_unix_listener(TXT(net_unix), "Path", NULL, 0, &ino), AGENT_E_NOTFOUND);
}

/* Two listeners bound to the same path string, each in its own container's /tmp (net/unix is the
 * network namespace's, shared by a pod's containers): the one the process owns is taken. */
static const char net_unix_two[] = "Num       RefCount Protocol Flags    Type St Inode Path\n"
                                   "00000000c2ee3fd2: 00000002 00000000 00010000 0001 01 500 "
                                   "/tmp/dotnet-diagnostic-1-77-socket\n"
                                   "00000000c2ee3fd3: 00000002 00000000 00010000 0001 01 900 "
                                   "/tmp/dotnet-diagnostic-1-77-socket\n";

static void test_unix_listener_neighbour(void **state)
{
    (void)state;
    const char *p = "/tmp/dotnet-diagnostic-1-77-socket";
    uint64_t ino = 0;
    uint64_t owned[] = {950, 3, 900, 12};
    procfs_sort_inodes(owned, 4);
    assert_int_equal(owned[0], 3);
    assert_int_equal(owned[3], 950);
    assert_int_equal(procfs_unix_listener(TXT(net_unix_two), p, owned, 4, &ino), 0);
    assert_int_equal(ino, 900); /* the second line: the first is the neighbour's */
    uint64_t first[] = {500};
    assert_int_equal(procfs_unix_listener(TXT(net_unix_two), p, first, 1, &ino), 0);
    assert_int_equal(ino, 500);
    uint64_t none[] = {501, 899};
    assert_int_equal(procfs_unix_listener(TXT(net_unix_two), p, none, 2, &ino), AGENT_E_NOTFOUND);
    assert_int_equal(procfs_unix_listener(TXT(net_unix_two), p, none, 0, &ino), AGENT_E_NOTFOUND);
}

static void test_socket_link(void **state)
{
    (void)state;
    uint64_t ino = 0;
    assert_true(procfs_socket_link(TXT("socket:[42092294]"), &ino));
    assert_int_equal(ino, 42092294);
    assert_false(procfs_socket_link(TXT("socket:[]"), &ino));
    assert_false(procfs_socket_link(TXT("socket:[12"), &ino));
    assert_false(procfs_socket_link(TXT("pipe:[42092294]"), &ino));
    assert_false(procfs_socket_link(TXT("/tmp/socket:[1]"), &ino));
    assert_false(procfs_socket_link(TXT("socket:[1x]"), &ino));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nspid),       cmocka_unit_test(test_starttime),
        cmocka_unit_test(test_environ),     cmocka_unit_test(test_unix_listener),
        cmocka_unit_test(test_socket_link), cmocka_unit_test(test_unix_listener_neighbour),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
