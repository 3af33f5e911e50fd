/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_NODE_H
#define AGENT_IPC_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_sockname.h"

/*
 * Node mode's blocking reads of /proc (docs/ipc.md §6), for the libuv thread pool only: never
 * call these on the loop. Every file read is bounded (IPC_NODE_READ_MAX bytes), every walk looks
 * at IPC_NODE_MAX_PIDS processes at most.
 */
#define IPC_NODE_MAX_PIDS   8192
#define IPC_NODE_READ_MAX   (64 * 1024)
#define IPC_NODE_UNIX_MAX   (4 * 1024 * 1024) /* /proc/<pid>/net/unix: the net namespace's table */
#define IPC_NODE_FDS_MAX    65536
#define IPC_NODE_TMPDIR_MAX 256
#define IPC_NODE_MAX_DIRS   256  /* distinct TMPDIR folders listed once per walk */
#define IPC_NODE_MAX_CANDS  4096 /* socket names kept per folder, candidates per walk */

/* A candidate runtime socket, as the walk found it (not yet verified). */
struct ipc_node_cand {
    uint64_t host_pid;   /* in dotmon's /proc */
    uint64_t ns_pid;     /* what the process sees for itself (NSpid's last field) */
    uint64_t start_time; /* /proc/<pid>/stat field 22 when seen */
    uint64_t key;
    char tmpdir[IPC_NODE_TMPDIR_MAX]; /* the process's TMPDIR, as it has it ('/' kept) */
    char name[IPC_SOCKNAME_MAX];
};

struct ipc_node_walk {
    struct ipc_node_cand *cands; /* owned (free) */
    size_t n;
    size_t looked; /* /proc entries looked at */
    size_t denied; /* processes whose root could not be read (EACCES/EPERM) */
    unsigned cut;  /* IPC_NODE_CUT_* bits: which cap cut this walk short (the caller logs it) */
    int rc;        /* 0, or the error opening /proc */
};

#define IPC_NODE_CUT_PIDS  1u /* more than IPC_NODE_MAX_PIDS processes */
#define IPC_NODE_CUT_DIRS  2u /* more distinct TMPDIR folders than the walk lists */
#define IPC_NODE_CUT_NAMES 4u /* a folder held more names of its processes' pids than are kept */
#define IPC_NODE_CUT_CANDS 8u /* more candidates than are kept */

/* Walks /proc (not self_pid). Blocking; fills *w (zeroed first). */
void ipc_node_walk(struct ipc_node_walk *w, uint64_t self_pid);

/*
 * Verifies that the socket c->name in c->tmpdir is a listening socket of process c->host_pid: a
 * line of /proc/<pid>/net/unix lists that path (as the process sees it) listening with an inode
 * that is one of /proc/<pid>/fd's socket links (the process's own sockets are read first: the
 * table is the network namespace's, and a neighbour may listen at the same path string in its own
 * folder); and that the process still has c->start_time. Blocking. Returns 0, AGENT_E_NOTFOUND
 * (not its socket, or another process now), or a negative errno; *unix_cut is true when the socket
 * was not found and net/unix was longer than IPC_NODE_UNIX_MAX (the line may be past the bound).
 */
int ipc_node_verify(const struct ipc_node_cand *c, bool *unix_cut);

/*
 * The socket's path as the runtime makes it: tmpdir, then '/' unless tmpdir ends with one, then
 * name (TMPDIR=/x// gives "/x//dotnet-diagnostic-…", the exact text /proc/<pid>/net/unix lists).
 * 0, or AGENT_E_TOOBIG when it does not fit cap. No I/O.
 */
int ipc_node_sock_path(const char *tmpdir, const char *name, char *out, size_t cap);

/* /proc/<pid>/stat's start time. Blocking. 0 or a negative code. */
int ipc_node_start_time(uint64_t pid, uint64_t *out);

/* /proc/<pid>/status's NSpid (last field). Blocking. 0 or a negative code. */
int ipc_node_nspid(uint64_t pid, uint64_t *out);

/*
 * The names of process pid's threads (/proc/<pid>/task/<tid>/comm: the kernel's 15 bytes, which
 * .NET sets from Thread.Name and to ".NET …" for its own threads), each with its thread id as the
 * process sees it (status' NSpid, last field: the id the runtime's events carry). A thread whose
 * name is the process's own is left out: a thread without a name of its own inherits the name
 * of the thread that made it, so the main thread and the unnamed threads it makes carry the
 * process's name. At most cap into out[0..*n); threads gone meanwhile are left out too.
 * Blocking. 0 or a negative errno.
 */
struct ipc_thread_name {
    uint64_t tid;
    char name[16];
};
int ipc_node_thread_names(uint64_t pid, struct ipc_thread_name *out, size_t cap, size_t *n);

#endif
