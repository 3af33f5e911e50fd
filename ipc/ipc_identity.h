/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_IDENTITY_H
#define AGENT_IPC_IDENTITY_H
/*
 * Who a process is (issue 34 item 2): its container id and pod uid from /proc/<pid>/cgroup, its
 * pod name, namespace and container name from its environment (/proc/<pid>/environ when
 * readable, else the runtime's ProcessEnvironment command). Read from outside, without entering
 * any namespace: every file read runs on libuv's thread pool, bounded in bytes; the loop only
 * starts the work and receives the answer.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "ipc_client.h"

/* Every field is "" when unknown. */
struct ipc_identity {
    char container_id[65];  /* 64 lowercase hex digits */
    char pod_uid[37];       /* Kubernetes pod uid, dashed GUID form */
    char pod_name[254];     /* a DNS subdomain: at most 253 bytes */
    char pod_namespace[64]; /* a DNS label: at most 63 */
    char container_name[254];
};

/*
 * Which environment variables name the pod, its namespace and the container: ';'-separated
 * names, the first one that is set (not empty) wins ("" reads none). Settings
 * Identity:PodNameVariables (default "POD_NAME;HOSTNAME"), Identity:PodNamespaceVariables
 * ("POD_NAMESPACE"), Identity:ContainerNameVariables ("CONTAINER_NAME"). HOSTNAME names the pod
 * only in Kubernetes (KUBERNETES_SERVICE_HOST set) or in a container (a container id is known):
 * elsewhere it is the host's name.
 */
#define IPC_IDENTITY_VARS_MAX 256
struct ipc_identity_vars {
    char pod_name[IPC_IDENTITY_VARS_MAX];
    char pod_namespace[IPC_IDENTITY_VARS_MAX];
    char container_name[IPC_IDENTITY_VARS_MAX];
};
#define IPC_IDENTITY_POD_NAME_DEFAULT       "POD_NAME;HOSTNAME"
#define IPC_IDENTITY_POD_NAMESPACE_DEFAULT  "POD_NAMESPACE"
#define IPC_IDENTITY_CONTAINER_NAME_DEFAULT "CONTAINER_NAME"
/* The defaults above. */
void ipc_identity_vars_default(struct ipc_identity_vars *v);

/*
 * Keeps name=value in id when the variable is one of v's and ranks before the one that set the
 * field so far (rank: the caller's, zeroed before the first entry; pure). For an environment read
 * entry by entry (ProcessEnvironment); ipc_identity_settle once every entry was seen. Values too
 * long for their field are not kept.
 */
struct ipc_identity_rank {
    unsigned v[3];
    bool k8s;           /* KUBERNETES_SERVICE_HOST was seen */
    bool pod_from_host; /* pod_name came from HOSTNAME */
};
void ipc_identity_take(const struct ipc_identity_vars *v, struct ipc_identity_rank *rank,
                       struct ipc_identity *id, const char *name, size_t name_len,
                       const char *value, size_t value_len);
/* The HOSTNAME rule above, once the environment and the cgroup were read. */
void ipc_identity_settle(const struct ipc_identity_rank *rank, struct ipc_identity *id);

struct ipc_identity_result {
    uint64_t host_pid; /* the pid in dotmon's /proc; 0: not this process (another pid namespace,
                          or gone) and id is empty */
    const struct ipc_identity *id; /* view for the callback */
};
typedef void (*ipc_identity_cb)(void *ud, const struct ipc_identity_result *res);

struct ipc_identity_req;

/*
 * Reads the identity of the runtime that calls itself pid. host_pid: its pid in dotmon's /proc when
 * known (Node mode), or 0 to use pid when /proc/<pid> is the same process: its status's NSpid
 * ends with pid (the same pid namespace) and its start time (stat field 22) is start_key, the
 * disambiguation key of the runtime's socket name (docs/ipc.md §1.1), so that another pid
 * namespace's process of the same pid (a sidecar's own pid 1) is never taken for it. ep (copied)
 * and timeout_ms serve the ProcessEnvironment fallback, used when /proc/<host_pid>/environ cannot
 * be read. cb runs exactly once, on the loop, never inside this call, unless ipc_identity_cancel
 * comes first. 0 or a negative code (cb never runs).
 */
int ipc_identity_read(uv_loop_t *loop, uint64_t pid, uint64_t start_key, uint64_t host_pid,
                      const struct ipc_identity_vars *vars, const struct ipc_endpoint *ep,
                      uint64_t timeout_ms, ipc_identity_cb cb, void *ud,
                      struct ipc_identity_req **out);
/* cb is not called; resources are released asynchronously. */
void ipc_identity_cancel(struct ipc_identity_req *r);

#endif
