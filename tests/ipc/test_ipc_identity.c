/* SPDX-License-Identifier: MIT */
/*
 * ipc/ipc_identity: the variables that name a pod, its namespace and the container, taken entry by
 * entry as ProcessEnvironment delivers them (the first variable of each list that is set wins,
 * whatever the order of the entries), the HOSTNAME rule, and a real read of this test's own
 * process on the thread pool (the same pid namespace: /proc/self is it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include <cmocka.h>

#include "ipc_identity.h"
#include "procfs.h"

static void take(const struct ipc_identity_vars *v, struct ipc_identity_rank *rank,
                 struct ipc_identity *id, const char *entry)
{
    const char *eq = strchr(entry, '=');
    ipc_identity_take(v, rank, id, entry, (size_t)(eq - entry), eq + 1, strlen(eq + 1));
}

static void test_take(void **state)
{
    (void)state;
    struct ipc_identity_vars v;
    ipc_identity_vars_default(&v);
    struct ipc_identity id = {0};
    struct ipc_identity_rank rank = {0};
    take(&v, &rank, &id, "HOSTNAME=web-host");
    take(&v, &rank, &id, "PATH=/usr/bin");
    take(&v, &rank, &id, "POD_NAME=web-7d4"); /* ranks before HOSTNAME, though it comes later */
    take(&v, &rank, &id, "POD_NAMESPACE=");   /* empty: not set */
    take(&v, &rank, &id, "CONTAINER_NAME=api");
    take(&v, &rank, &id, "HOSTNAME=again");
    ipc_identity_settle(&rank, &id);
    assert_string_equal(id.pod_name, "web-7d4");
    assert_string_equal(id.pod_namespace, "");
    assert_string_equal(id.container_name, "api");

    /* HOSTNAME alone: the host's name outside Kubernetes and containers */
    memset(&id, 0, sizeof(id));
    memset(&rank, 0, sizeof(rank));
    take(&v, &rank, &id, "HOSTNAME=laptop");
    ipc_identity_settle(&rank, &id);
    assert_string_equal(id.pod_name, "");
    /* in Kubernetes it is the pod's */
    memset(&rank, 0, sizeof(rank));
    take(&v, &rank, &id, "HOSTNAME=orders-5c7b-x2");
    take(&v, &rank, &id, "KUBERNETES_SERVICE_HOST=10.0.0.1");
    ipc_identity_settle(&rank, &id);
    assert_string_equal(id.pod_name, "orders-5c7b-x2");
    /* and in a container */
    memset(&id, 0, sizeof(id));
    memset(&rank, 0, sizeof(rank));
    snprintf(id.container_id, sizeof(id.container_id), "%064d", 7);
    take(&v, &rank, &id, "HOSTNAME=c0ffee");
    ipc_identity_settle(&rank, &id);
    assert_string_equal(id.pod_name, "c0ffee");

    /* configured lists: the order of the list decides, "" reads none, a too long value is not
     * kept */
    snprintf(v.pod_name, sizeof(v.pod_name), "MY_POD;POD_NAME");
    snprintf(v.container_name, sizeof(v.container_name), "%s", "");
    memset(&id, 0, sizeof(id));
    memset(&rank, 0, sizeof(rank));
    take(&v, &rank, &id, "POD_NAME=second");
    take(&v, &rank, &id, "MY_POD=first");
    take(&v, &rank, &id, "CONTAINER_NAME=api");
    char big[300];
    memset(big, 'n', sizeof(big));
    memcpy(big, "POD_NAMESPACE=", 14);
    big[sizeof(big) - 1] = '\0';
    take(&v, &rank, &id, big);
    ipc_identity_settle(&rank, &id);
    assert_string_equal(id.pod_name, "first");
    assert_string_equal(id.container_name, "");
    assert_string_equal(id.pod_namespace, "");
}

struct got {
    bool called;
    uint64_t host_pid;
    struct ipc_identity id;
};

static void on_identity(void *ud, const struct ipc_identity_result *res)
{
    struct got *g = ud;
    g->called = true;
    g->host_pid = res->host_pid;
    g->id = *res->id;
}

static uint64_t own_start(void)
{
    FILE *f = fopen("/proc/self/stat", "r");
    assert_non_null(f);
    char text[1024];
    size_t n = fread(text, 1, sizeof(text), f);
    fclose(f);
    uint64_t start = 0;
    assert_true(procfs_stat_starttime(text, n, &start));
    return start;
}

static void test_read_self(void **state)
{
    (void)state;
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    struct ipc_identity_vars v;
    ipc_identity_vars_default(&v);
    snprintf(v.pod_name, sizeof(v.pod_name), "PATH"); /* a variable this process surely has */
    uint64_t pid = (uint64_t)getpid();
    uint64_t start = own_start();

    /* the right start time: this process, its PATH read from /proc/<pid>/environ */
    struct got g = {0};
    struct ipc_identity_req *r = NULL;
    assert_int_equal(ipc_identity_read(&loop, pid, start, 0, &v, NULL, 1000, on_identity, &g, &r),
                     0);
    assert_false(g.called); /* never inside the call */
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(g.called);
    assert_int_equal(g.host_pid, pid);
    const char *path = getenv("PATH");
    if (path != NULL && path[0] != '\0' && strlen(path) < sizeof(g.id.pod_name)) {
        assert_string_equal(g.id.pod_name, path);
    }

    /* another start time: another process of that pid, nothing is read */
    memset(&g, 0, sizeof(g));
    assert_int_equal(
        ipc_identity_read(&loop, pid, start + 1, 0, &v, NULL, 1000, on_identity, &g, &r), 0);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_true(g.called);
    assert_int_equal(g.host_pid, 0);
    assert_string_equal(g.id.pod_name, "");

    /* cancelled: no callback */
    memset(&g, 0, sizeof(g));
    assert_int_equal(ipc_identity_read(&loop, pid, start, 0, &v, NULL, 1000, on_identity, &g, &r),
                     0);
    ipc_identity_cancel(r);
    assert_int_equal(uv_run(&loop, UV_RUN_DEFAULT), 0);
    assert_false(g.called);
    assert_int_equal(uv_loop_close(&loop), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_take),
        cmocka_unit_test(test_read_self),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
