/* SPDX-License-Identifier: MIT */
/* A process's identity read from outside; see ipc_identity.h. */
#define _GNU_SOURCE /* explicit_bzero */
#include "ipc_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ipc_node.h"
#include "procfs.h"

/* Bounds of the files read (a longer file is cut: its first part is parsed). */
#define CGROUP_MAX  (64u * 1024u)
#define ENVIRON_MAX (256u * 1024u)

struct ipc_identity_req {
    uv_loop_t *loop;
    uv_work_t work;
    uint64_t pid;
    uint64_t start_key;
    uint64_t host_pid; /* in: as given; after the work: 0 when not this process */
    struct ipc_identity_vars vars;
    struct ipc_endpoint ep;
    uint64_t timeout_ms;
    struct ipc_identity id;
    struct ipc_identity_rank rank;
    bool env_read; /* /proc/<pid>/environ was read */
    bool cancelled;
    struct ipc_env *env;
    ipc_identity_cb cb;
    void *ud;
};

void ipc_identity_vars_default(struct ipc_identity_vars *v)
{
    memset(v, 0, sizeof(*v));
    snprintf(v->pod_name, sizeof(v->pod_name), "%s", IPC_IDENTITY_POD_NAME_DEFAULT);
    snprintf(v->pod_namespace, sizeof(v->pod_namespace), "%s", IPC_IDENTITY_POD_NAMESPACE_DEFAULT);
    snprintf(v->container_name, sizeof(v->container_name), "%s",
             IPC_IDENTITY_CONTAINER_NAME_DEFAULT);
}

/* 1 + the position of name in the ';'-list, or 0 when absent. */
static unsigned list_rank(const char *list, const char *name, size_t name_len)
{
    unsigned pos = 1;
    const char *p = list;
    while (*p != '\0') {
        const char *end = strchr(p, ';');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        if (n == name_len && n > 0 && memcmp(p, name, n) == 0) {
            return pos;
        }
        pos++;
        p += n + (end != NULL ? 1 : 0);
    }
    return 0;
}

void ipc_identity_take(const struct ipc_identity_vars *v, struct ipc_identity_rank *rank,
                       struct ipc_identity *id, const char *name, size_t name_len,
                       const char *value, size_t value_len)
{
    const char *lists[3] = {v->pod_name, v->pod_namespace, v->container_name};
    char *fields[3] = {id->pod_name, id->pod_namespace, id->container_name};
    size_t caps[3] = {sizeof(id->pod_name), sizeof(id->pod_namespace), sizeof(id->container_name)};
    for (size_t f = 0; f < 3; f++) {
        unsigned r = list_rank(lists[f], name, name_len);
        if (r == 0 || value_len == 0 || value_len >= caps[f] ||
            (rank->v[f] != 0 && rank->v[f] <= r)) {
            continue;
        }
        memcpy(fields[f], value, value_len);
        fields[f][value_len] = '\0';
        rank->v[f] = r;
        if (f == 0) {
            rank->pod_from_host = name_len == 8 && memcmp(name, "HOSTNAME", 8) == 0;
        }
    }
    if (name_len == 23 && memcmp(name, "KUBERNETES_SERVICE_HOST", 23) == 0) {
        rank->k8s = true;
    }
}

void ipc_identity_settle(const struct ipc_identity_rank *rank, struct ipc_identity *id)
{
    if (rank->pod_from_host && !rank->k8s && id->container_id[0] == '\0') {
        id->pod_name[0] = '\0';
    }
}

/* Reads at most cap bytes of path into a new buffer (*out, the caller's). -errno or the size. */
static ssize_t read_bounded(const char *path, size_t cap, char **out)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    char *b = malloc(cap);
    ssize_t total = b == NULL ? -ENOMEM : 0;
    while (total >= 0 && (size_t)total < cap) {
        ssize_t n = read(fd, b + total, cap - (size_t)total);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            total = n < 0 ? -errno : total;
            break;
        }
        total += n;
    }
    (void)close(fd);
    if (total < 0) {
        free(b);
        return total;
    }
    *out = b;
    return total;
}

/* field from the first variable of list that blob sets (non-empty, fitting the field); whether
 * that was HOSTNAME. */
static bool take_list(const char *blob, size_t len, const char *list, char *field, size_t cap)
{
    const char *p = list;
    while (*p != '\0') {
        const char *end = strchr(p, ';');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        char name[128];
        const char *value = NULL;
        size_t vlen = 0;
        if (n > 0 && n < sizeof(name)) {
            memcpy(name, p, n);
            name[n] = '\0';
            if (procfs_environ_get(blob, len, name, &value, &vlen) && vlen > 0 && vlen < cap) {
                memcpy(field, value, vlen);
                field[vlen] = '\0';
                return strcmp(name, "HOSTNAME") == 0;
            }
        }
        p += n + (end != NULL ? 1 : 0);
    }
    return false;
}

static void take_blob(struct ipc_identity_req *r, const char *blob, size_t len)
{
    const char *v = NULL;
    size_t vlen = 0;
    r->rank.k8s = procfs_environ_get(blob, len, "KUBERNETES_SERVICE_HOST", &v, &vlen);
    r->rank.pod_from_host =
        take_list(blob, len, r->vars.pod_name, r->id.pod_name, sizeof(r->id.pod_name));
    take_list(blob, len, r->vars.pod_namespace, r->id.pod_namespace, sizeof(r->id.pod_namespace));
    take_list(blob, len, r->vars.container_name, r->id.container_name,
              sizeof(r->id.container_name));
}

static void work_read(uv_work_t *w)
{
    struct ipc_identity_req *r = w->data;
    char path[64];
    char *text = NULL;
    uint64_t pid = r->host_pid != 0 ? r->host_pid : r->pid;
    if (r->host_pid == 0) {
        /* connect mode: /proc/<pid> must be the same process (the same pid namespace: its NSpid
         * ends with the pid, and its start time is the socket's key) */
        uint64_t inner = 0;
        uint64_t start = 0;
        if (ipc_node_nspid(pid, &inner) != 0 || inner != r->pid ||
            ipc_node_start_time(pid, &start) != 0 || start != r->start_key) {
            return;
        }
        r->host_pid = pid;
    }
    snprintf(path, sizeof(path), "/proc/%" PRIu64 "/cgroup", pid);
    ssize_t n = read_bounded(path, CGROUP_MAX, &text);
    struct procfs_cgroup_id cg;
    if (n > 0 && procfs_cgroup_identity(text, (size_t)n, &cg)) {
        memcpy(r->id.container_id, cg.container_id, sizeof(cg.container_id));
        memcpy(r->id.pod_uid, cg.pod_uid, sizeof(cg.pod_uid));
    }
    free(text);
    text = NULL;
    snprintf(path, sizeof(path), "/proc/%" PRIu64 "/environ", pid);
    n = read_bounded(path, ENVIRON_MAX, &text);
    if (n >= 0) {
        r->env_read = true;
        take_blob(r, text, (size_t)n);
        ipc_identity_settle(&r->rank, &r->id);
        explicit_bzero(text, (size_t)n); /* the app's secrets do not linger in freed memory */
    }
    free(text);
}

/* Calls back (unless cancelled) and frees r. */
static void finish(struct ipc_identity_req *r)
{
    if (!r->cancelled) {
        struct ipc_identity_result res = {.host_pid = r->host_pid, .id = &r->id};
        r->cb(r->ud, &res);
    }
    ipc_endpoint_fini(&r->ep);
    free(r);
}

static int on_env_var(void *ud, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    struct ipc_identity_req *r = ud;
    ipc_identity_take(&r->vars, &r->rank, &r->id, name, name_len, value, value_len);
    return 0;
}

static void on_env_done(void *ud, const struct ipc_env_result *res)
{
    struct ipc_identity_req *r = ud;
    r->env = NULL;
    (void)res; /* what could not be read stays unknown */
    ipc_identity_settle(&r->rank, &r->id);
    finish(r);
}

static void after_read(uv_work_t *w, int status)
{
    struct ipc_identity_req *r = w->data;
    if (status == UV_ECANCELED) {
        r->cancelled = true;
    }
    if (!r->cancelled && r->host_pid != 0 && !r->env_read && r->ep.path != NULL &&
        ipc_env_request(r->loop, &r->ep, r->timeout_ms, 0, on_env_var, on_env_done, r, &r->env) ==
            0) {
        return;
    }
    finish(r);
}

int ipc_identity_read(uv_loop_t *loop, uint64_t pid, uint64_t start_key, uint64_t host_pid,
                      const struct ipc_identity_vars *vars, const struct ipc_endpoint *ep,
                      uint64_t timeout_ms, ipc_identity_cb cb, void *ud,
                      struct ipc_identity_req **out)
{
    struct ipc_identity_req *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return UV_ENOMEM;
    }
    r->loop = loop;
    r->pid = pid;
    r->start_key = start_key;
    r->host_pid = host_pid;
    r->vars = *vars;
    r->timeout_ms = timeout_ms;
    r->cb = cb;
    r->ud = ud;
    r->work.data = r;
    int rc = ep != NULL ? ipc_endpoint_copy(&r->ep, ep) : 0;
    rc = rc != 0 ? rc : uv_queue_work(loop, &r->work, work_read, after_read);
    if (rc != 0) {
        ipc_endpoint_fini(&r->ep);
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void ipc_identity_cancel(struct ipc_identity_req *r)
{
    if (r == NULL || r->cancelled) {
        return;
    }
    r->cancelled = true;
    if (r->env != NULL) {
        ipc_env_cancel(r->env); /* its callback never comes */
        r->env = NULL;
        ipc_endpoint_fini(&r->ep);
        free(r);
    } else {
        (void)uv_cancel((uv_req_t *)&r->work); /* after_read frees r */
    }
}
