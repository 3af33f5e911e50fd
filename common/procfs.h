/* SPDX-License-Identifier: MIT */
#ifndef AGENT_COMMON_PROCFS_H
#define AGENT_COMMON_PROCFS_H
/*
 * Pure parsers of /proc text (issue 34): no I/O, no libuv. The caller reads the file (bounded,
 * off the loop) and hands its bytes in; nothing here needs a terminating NUL.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The value of the variable name in an environ blob (/proc/<pid>/environ: NUL-separated
 * "NAME=VALUE" entries). A last entry without its NUL was cut by the read's bound and is never
 * taken (its value may be cut too). The first entry with that name wins, as getenv does. *value
 * points into blob (not NUL-terminated); false when absent (an entry "NAME" without '=' is not a
 * definition).
 */
bool procfs_environ_get(const char *blob, size_t len, const char *name, const char **value,
                        size_t *value_len);

#define PROCFS_CONTAINER_ID_LEN 64
#define PROCFS_POD_UID_LEN      36

/* What a process's cgroup paths say of it; "" when unknown. */
struct procfs_cgroup_id {
    char container_id[PROCFS_CONTAINER_ID_LEN + 1]; /* 64 lowercase hex digits */
    char pod_uid[PROCFS_POD_UID_LEN + 1];           /* Kubernetes pod uid, dashed GUID form */
};

/*
 * Reads a /proc/<pid>/cgroup text (cgroup v1 "N:ctrl,ctrl:/path" and v2 "0::/path" lines). The
 * container id is the 64-hex-digit id a runtime names the container's cgroup with:
 * "cri-containerd-<id>.scope", "crio-<id>.scope", "docker-<id>.scope", "libpod-<id>.scope",
 * "libpod-payload-<id>" or a path component that is exactly the id ("/docker/<id>",
 * "/kubepods/<qos>/pod<uid>/<id>"); CRI-O's monitor ("crio-conmon-<id>.scope") is not the app
 * and is skipped. The pod uid comes from a "pod<uid>" component or a systemd
 * "kubepods-<qos>-pod<uid_with_underscores>.slice" one (underscores back to dashes). Lines are
 * read in order and the first one that names a container (with the pod uid of the same line, or
 * of any line) wins. false when neither was found (a private cgroup namespace shows "0::/").
 */
bool procfs_cgroup_identity(const char *text, size_t len, struct procfs_cgroup_id *out);

/*
 * The last field of the "NSpid:" line of a /proc/<pid>/status text: the pid the process has in
 * its own (innermost) pid namespace. false when the line is absent (kernels before 4.1) or bad.
 */
bool procfs_status_nspid_inner(const char *text, size_t len, uint64_t *out);

/*
 * Field 22 of a /proc/<pid>/stat text: the process's start time in clock ticks since boot (what a
 * .NET runtime puts in its diagnostic socket's name as the disambiguation key, docs/ipc.md §1.1).
 * The command name (field 2) may hold spaces and parentheses: fields are counted after its last
 * ')'. false when the text is cut or bad.
 */
bool procfs_stat_starttime(const char *text, size_t len, uint64_t *out);

/*
 * /proc/<pid>/net/unix: the inode of a listening stream socket bound to path (exact match;
 * abstract sockets, whose path starts with '@', never match a path starting with '/') whose inode
 * is one of owned[0..nowned) (sorted ascending: the process's own sockets; NULL: any). The table
 * is the network namespace's, shared by every process in it (a pod's containers, all host-network
 * processes): a neighbour may hold a listener bound to the same path string in its own folder, so
 * every matching line is looked at, not only the first. Returns 0, or AGENT_E_NOTFOUND.
 */
int procfs_unix_listener(const char *text, size_t len, const char *path, const uint64_t *owned,
                         size_t nowned, uint64_t *inode);

/* Sorts inodes ascending (for procfs_unix_listener's owned set). */
void procfs_sort_inodes(uint64_t *v, size_t n);

/* A /proc/<pid>/fd/<n> link's text "socket:[<inode>]": true and *inode, else false. */
bool procfs_socket_link(const char *link, size_t len, uint64_t *inode);

#endif
