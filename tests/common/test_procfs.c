/* SPDX-License-Identifier: MIT */
/* The /proc text parsers (common/procfs.h): environ lookup and container/pod identity from cgroup
 * files as containerd, CRI-O, Docker, podman and the kubelet lay them out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "procfs.h"

#define ID   "3f1c0a9b7d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2a"
#define ID2  "aa11bb22cc33dd44ee55ff6600778899aabbccddeeff00112233445566778899"
#define POD  "5c0e9a8e-3b1d-4f62-9c7a-2d4e6f8a0b1c"
#define POD_ "5c0e9a8e_3b1d_4f62_9c7a_2d4e6f8a0b1c"

static void env_value(const char *blob, size_t len, const char *name, const char *want)
{
    const char *v = NULL;
    size_t n = 0;
    if (want == NULL) {
        assert_false(procfs_environ_get(blob, len, name, &v, &n));
        return;
    }
    assert_true(procfs_environ_get(blob, len, name, &v, &n));
    assert_int_equal(n, strlen(want));
    assert_memory_equal(v, want, n);
}

static void test_environ(void **state)
{
    (void)state;
    static const char blob[] = "PATH=/usr/bin\0POD_NAME=web-7d4\0POD=x\0EMPTY=\0NOEQ\0"
                               "POD_NAME=second\0HOSTNAME=web-7d4-abc";
    size_t len = sizeof(blob) - 1; /* the last entry without its NUL: a cut read */
    env_value(blob, len, "POD_NAME", "web-7d4");
    env_value(blob, len, "POD", "x");
    env_value(blob, len, "PO", NULL);
    env_value(blob, len, "EMPTY", "");
    env_value(blob, len, "NOEQ", NULL);
    env_value(blob, len, "HOSTNAME", NULL);              /* maybe cut: never taken */
    env_value(blob, len + 1, "HOSTNAME", "web-7d4-abc"); /* with its NUL */
    env_value(blob, len, "PATH", "/usr/bin");
    env_value(blob, len, "", NULL);
    env_value(blob, 0, "PATH", NULL);
    /* cut in the middle of a name */
    env_value(blob, 16, "POD_NAME", NULL);
}

static void cgroup(const char *text, const char *cid, const char *pod)
{
    struct procfs_cgroup_id id;
    bool any = procfs_cgroup_identity(text, strlen(text), &id);
    assert_string_equal(id.container_id, cid);
    assert_string_equal(id.pod_uid, pod);
    assert_int_equal(any, cid[0] != '\0' || pod[0] != '\0');
}

static void test_cgroup_v2(void **state)
{
    (void)state;
    /* containerd, systemd driver */
    cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod" POD_
           ".slice/cri-containerd-" ID ".scope\n",
           ID, POD);
    /* guaranteed QoS: no qos slice */
    cgroup("0::/kubepods.slice/kubepods-pod" POD_ ".slice/cri-containerd-" ID ".scope\n", ID, POD);
    /* CRI-O */
    cgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_
           ".slice/crio-" ID ".scope\n",
           ID, POD);
    /* CRI-O's monitor is not the app */
    cgroup("0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod" POD_
           ".slice/crio-conmon-" ID ".scope\n",
           "", POD);
    /* Docker with systemd */
    cgroup("0::/system.slice/docker-" ID ".scope\n", ID, "");
    /* podman rootless: the app runs in a child cgroup of the scope */
    cgroup("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" ID
           ".scope/container\n",
           ID, "");
    cgroup("0::/machine.slice/libpod-conmon-" ID ".scope\n", "", "");
    /* podman in a pod with cgroupfs */
    cgroup("0::/libpod_parent/libpod-" ID2 "/libpod-payload-" ID "\n", ID, "");
    /* a private cgroup namespace, and the host itself */
    cgroup("0::/\n", "", "");
    cgroup("0::/user.slice/user-1000.slice/session-3.scope\n", "", "");
    /* upper-case digits are not written by any runtime but read as the same id */
    cgroup(
        "0::/system.slice/docker-3F1C0A9B7D2E4F6A8B0C1D2E3F4A5B6C7D8E9F0A1B2C3D4E5F6A7B8C9D0E1F2A"
        ".scope",
        ID, "");
    /* one digit short or long is not an id */
    cgroup("0::/system.slice/docker-" ID "0.scope\n", "", "");
    cgroup("0::/docker/3f1c0a9b7d2e4f6a8b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e1f2\n", "", "");
    cgroup("", "", "");
}

static void test_cgroup_v1(void **state)
{
    (void)state;
    /* Docker, cgroupfs driver */
    cgroup("12:pids:/docker/" ID "\n11:memory:/docker/" ID "\n1:name=systemd:/docker/" ID "\n", ID,
           "");
    /* kubelet with cgroupfs and containerd */
    cgroup("11:cpu,cpuacct:/kubepods/besteffort/pod" POD "/" ID "\n"
           "1:name=systemd:/kubepods/besteffort/pod" POD "/" ID "\n",
           ID, POD);
    /* guaranteed QoS */
    cgroup("4:memory:/kubepods/pod" POD "/" ID "\n", ID, POD);
    /* the hybrid layout of this kind of host: no container */
    cgroup("9:name=systemd:/\n4:memory:/process_api/1799fb2849c0f4818b267c99a8c989f1\n0::/\n", "",
           "");
    /* the first line naming a container wins, with its own pod */
    cgroup("3:cpuset:/\n2:cpu:/kubepods/burstable/pod" POD "/" ID "\n1:memory:/docker/" ID2 "\n",
           ID, POD);
    /* CRI-O without the scope suffix, and a last line without its newline */
    cgroup("1:name=systemd:/user.slice/crio-" ID "\n", ID, "");
    cgroup("1:cpu:/" ID, ID, "");
    /* a bare id is not a cgroup line */
    cgroup(ID "\n", "", "");
    /* podman kube play with cgroupfs on a cgroup v1 host (this project's pod test, as logged by
     * tests/container/check_pod.py): the pod's own 64-digit id is a bare component above the
     * container's libpod-<id>; the innermost wins */
    cgroup("9:name=systemd:/libpod_parent/" ID2 "/libpod-" ID "\n8:pids:/libpod_parent/" ID2
           "/libpod-" ID "\n0::/libpod_parent/" ID2 "/libpod-" ID "\n",
           ID, "");
    /* a line without the two colons is skipped */
    cgroup("garbage /docker/" ID2 "\n0::/docker/" ID "\n", ID, "");
}

static void test_nspid(void **state)
{
    (void)state;
    static const char status[] = "Name:\tdotnet\nUmask:\t0022\nState:\tS (sleeping)\n"
                                 "Tgid:\t48213\nNgid:\t0\nPid:\t48213\nPPid:\t48190\n"
                                 "NSpid:\t48213\t1\nNSpgid:\t48213\t1\n";
    uint64_t v = 0;
    assert_true(procfs_status_nspid_inner(status, sizeof(status) - 1, &v));
    assert_int_equal(v, 1);
    static const char same[] = "Pid:\t77\nNSpid:\t77\n";
    assert_true(procfs_status_nspid_inner(same, sizeof(same) - 1, &v));
    assert_int_equal(v, 77);
    /* cut after the key, or garbage in the field */
    assert_false(procfs_status_nspid_inner("NSpid:\t", 7, &v));
    assert_false(procfs_status_nspid_inner("NSpid:\t12x\n", 11, &v));
    assert_false(procfs_status_nspid_inner("Pid:\t12\n", 8, &v));
}

static void test_starttime(void **state)
{
    (void)state;
    /* a real line of a dotnet process, and one whose name holds ") (" */
    static const char stat[] =
        "48213 (dotnet) S 48190 48213 48190 34817 48213 4194560 30622 0 3 0 133 21 0 0 20 0 19 0 "
        "5843210 3295555584 13923 18446744073709551615 94391 94432 140729 0 0 0 0 4096 17663 0 0 "
        "0 17 1 0 0 0 0 0\n";
    uint64_t v = 0;
    assert_true(procfs_stat_starttime(stat, sizeof(stat) - 1, &v));
    assert_int_equal(v, 5843210);
    static const char odd[] = "7 (a) b (c) R 1 7 7 0 -1 4194304 9 0 0 0 0 0 0 0 20 0 1 0 99 0 0";
    assert_true(procfs_stat_starttime(odd, sizeof(odd) - 1, &v));
    assert_int_equal(v, 99);
    /* cut before field 22 */
    assert_false(procfs_stat_starttime(stat, 60, &v));
    assert_false(procfs_stat_starttime("48213 dotnet S 1", 16, &v));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_environ),   cmocka_unit_test(test_cgroup_v2),
        cmocka_unit_test(test_cgroup_v1), cmocka_unit_test(test_nspid),
        cmocka_unit_test(test_starttime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
