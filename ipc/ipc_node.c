/* SPDX-License-Identifier: MIT */
/*
 * Node mode's reads of /proc (docs/ipc.md §6): blocking, bounded, for the thread pool.
 */
#define _GNU_SOURCE /* O_CLOEXEC, fdopendir, explicit_bzero */
#include "ipc_node.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "err.h"
#include "num.h"
#include "procfs.h"
#include "shdir.h"

#define MAX_DIRS  IPC_NODE_MAX_DIRS
#define MAX_CANDS IPC_NODE_MAX_CANDS

/* Reads up to cap - 1 bytes of path into buf (NUL-terminated): the length, or a negative errno. */
static ssize_t read_bounded(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        return -errno;
    }
    size_t got = 0;
    while (got + 1 < cap) {
        ssize_t n = read(fd, buf + got, cap - 1 - got);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            int e = errno;
            (void)close(fd);
            explicit_bzero(buf, got); /* what was read of an environment does not linger */
            return -e;
        }
        if (n == 0) {
            break;
        }
        got += (size_t)n;
    }
    (void)close(fd);
    buf[got] = '\0';
    return (ssize_t)got;
}

int ipc_node_start_time(uint64_t pid, uint64_t *out)
{
    char path[64];
    char buf[1024];
    snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)pid);
    ssize_t n = read_bounded(path, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return procfs_stat_starttime(buf, (size_t)n, out) ? 0 : AGENT_E_PROTO;
}

int ipc_node_nspid(uint64_t pid, uint64_t *out)
{
    char path[64];
    char buf[4096];
    snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)pid);
    ssize_t n = read_bounded(path, buf, sizeof(buf));
    if (n < 0) {
        return (int)n;
    }
    return procfs_status_nspid_inner(buf, (size_t)n, out) ? 0 : AGENT_E_NOTFOUND;
}

int ipc_node_thread_names(uint64_t pid, struct ipc_thread_name *out, size_t cap, size_t *n)
{
    char path[64];
    char own[sizeof(out->name)]; /* the process's name: what an unnamed thread inherits */
    snprintf(path, sizeof(path), "/proc/%llu/comm", (unsigned long long)pid);
    ssize_t own_len = read_bounded(path, own, sizeof(own));
    own[own_len > 0 ? strcspn(own, "\n") : 0] = '\0';
    snprintf(path, sizeof(path), "/proc/%llu/task", (unsigned long long)pid);
    *n = 0;
    DIR *d = opendir(path);
    if (d == NULL) {
        return -errno;
    }
    struct dirent *e = NULL;
    while (*n < cap && (e = readdir(d)) != NULL) {
        uint64_t tid = 0;
        if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
            num_parse_u64_str(e->d_name, 10, UINT32_MAX, &tid) != 0) {
            continue;
        }
        char file[96];
        char buf[4096];
        snprintf(file, sizeof(file), "%s/%llu/status", path, (unsigned long long)tid);
        ssize_t len = read_bounded(file, buf, sizeof(buf));
        uint64_t inner = 0;
        if (len <= 0 || !procfs_status_nspid_inner(buf, (size_t)len, &inner)) {
            continue; /* gone since the listing */
        }
        snprintf(file, sizeof(file), "%s/%llu/comm", path, (unsigned long long)tid);
        len = read_bounded(file, buf, sizeof(out->name));
        if (len <= 0) {
            continue;
        }
        buf[strcspn(buf, "\n")] = '\0';
        if (strcmp(buf, own) == 0) {
            continue; /* unnamed: it has the process's name (the main thread, or a thread it made)
                       */
        }
        out[*n].tid = inner;
        memcpy(out[*n].name, buf, strlen(buf) + 1);
        (*n)++;
    }
    (void)closedir(d);
    return 0;
}

/* The process's TMPDIR into out, as it has it (trailing '/' kept): its environment's, else /tmp.
 * buf (cap bytes) holds its whole environment meanwhile and is wiped before this returns. */
static void read_tmpdir(uint64_t pid, char *buf, size_t cap, char *out, size_t out_cap)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%llu/environ", (unsigned long long)pid);
    ssize_t n = read_bounded(path, buf, cap);
    const char *v = NULL;
    size_t vl = 0;
    snprintf(out, out_cap, "/tmp");
    if (n > 0 && procfs_environ_get(buf, (size_t)n, "TMPDIR", &v, &vl) &&
        /* Absolute, without "..", short: else the runtime would not use it either (it falls back
         * to /tmp only when TMPDIR is unset; a strange value is simply not followed here). */
        vl > 0 && v[0] == '/' && vl < out_cap && memmem(v, vl, "..", 2) == NULL &&
        memchr(v, '\n', vl) == NULL) {
        memcpy(out, v, vl);
        out[vl] = '\0';
    }
    if (n > 0) {
        explicit_bzero(buf, (size_t)n); /* other processes' secrets do not outlive the read */
    }
}

int ipc_node_sock_path(const char *tmpdir, const char *name, char *out, size_t cap)
{
    size_t tl = strlen(tmpdir);
    bool slash = tl > 0 && tmpdir[tl - 1] == '/';
    int n = snprintf(out, cap, "%s%s%s", tmpdir, slash ? "" : "/", name);
    return n < 0 || (size_t)n >= cap ? AGENT_E_TOOBIG : 0;
}

/*
 * A folder's diagnostic socket names, listed once per walk: only the names whose pid field is the
 * NSpid of a process that uses the folder (pids, sorted), so that names planted for other pids (any
 * user can bind files in a shared /tmp) do not count against the cap.
 */
struct dir_list {
    dev_t dev;
    ino_t ino;
    uint64_t open_pid;                /* a process through which the folder is opened again */
    char tmpdir[IPC_NODE_TMPDIR_MAX]; /* that process's TMPDIR */
    uint64_t *pids;
    size_t npids;
    size_t cap_pids;
    char (*names)[IPC_SOCKNAME_MAX];
    size_t n;
};

/* A process that uses a folder (the walk's first pass). */
struct walk_proc {
    struct ipc_node_cand c; /* without key and name */
    size_t dir;             /* index in the walk's folders */
};

static int cmp_pid(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void list_dir(int dirfd, struct dir_list *l, unsigned *cut)
{
    int fd = dup(dirfd);
    if (fd < 0) {
        return;
    }
    DIR *dir = fdopendir(fd);
    if (dir == NULL) {
        (void)close(fd);
        return;
    }
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(dir)) != NULL) {
        uint64_t pid;
        uint64_t key;
        if ((de->d_type != DT_SOCK && de->d_type != DT_UNKNOWN) ||
            ipc_sockname_parse(de->d_name, &pid, &key) != 0 ||
            bsearch(&pid, l->pids, l->npids, sizeof(*l->pids), cmp_pid) == NULL) {
            continue;
        }
        size_t nl = strnlen(de->d_name, IPC_SOCKNAME_MAX);
        if (nl >= IPC_SOCKNAME_MAX) {
            continue;
        }
        if (l->n >= MAX_CANDS) {
            *cut |= IPC_NODE_CUT_NAMES;
            break;
        }
        if (l->n == cap) {
            size_t nc = cap == 0 ? 4 : cap * 2;
            void *p = realloc(l->names, nc * sizeof(*l->names));
            if (p == NULL) {
                break;
            }
            l->names = p;
            cap = nc;
        }
        memcpy(l->names[l->n++], de->d_name, nl + 1);
    }
    (void)closedir(dir);
}

/*
 * The folder tmpdir inside the process's root, opened without leaving that root and without
 * following any symlink: as connections reach its sockets (ipc_endpoint.root_pid), so what is
 * listed here is what they can reach. -1 when it cannot be opened so.
 */
static int open_tmpdir(uint64_t pid, const char *tmpdir)
{
    char root[64];
    snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)pid);
    int dirfd = -1;
    if (shdir_open_beneath_nolinks(root, tmpdir, O_RDONLY | O_DIRECTORY, &dirfd) != 0) {
        return -1;
    }
    return dirfd;
}

/* The folder's index among the walk's (added when new, with pid as its opener); -1 when full. */
static ssize_t dir_index(struct dir_list *dirs, size_t *ndirs, int dirfd,
                         const struct ipc_node_cand *c, unsigned *cut)
{
    struct stat st;
    if (fstat(dirfd, &st) != 0) {
        return -1;
    }
    for (size_t i = 0; i < *ndirs; i++) {
        if (dirs[i].dev == st.st_dev && dirs[i].ino == st.st_ino) {
            return (ssize_t)i;
        }
    }
    if (*ndirs >= MAX_DIRS) {
        *cut |= IPC_NODE_CUT_DIRS;
        return -1;
    }
    struct dir_list *l = &dirs[*ndirs];
    memset(l, 0, sizeof(*l));
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    l->open_pid = c->host_pid;
    memcpy(l->tmpdir, c->tmpdir, sizeof(l->tmpdir));
    return (ssize_t)(*ndirs)++;
}

static int add_pid(struct dir_list *l, uint64_t pid)
{
    if (l->npids == l->cap_pids) {
        size_t nc = l->cap_pids == 0 ? 8 : l->cap_pids * 2;
        void *p = realloc(l->pids, nc * sizeof(*l->pids));
        if (p == NULL) {
            return -ENOMEM;
        }
        l->pids = p;
        l->cap_pids = nc;
    }
    l->pids[l->npids++] = pid;
    return 0;
}

static void add_cand(struct ipc_node_walk *w, size_t *cap, const struct ipc_node_cand *c)
{
    if (w->n >= MAX_CANDS) {
        w->cut |= IPC_NODE_CUT_CANDS;
        return;
    }
    if (w->n == *cap) {
        size_t nc = *cap == 0 ? 8 : *cap * 2;
        void *p = realloc(w->cands, nc * sizeof(*w->cands));
        if (p == NULL) {
            return;
        }
        w->cands = p;
        *cap = nc;
    }
    w->cands[w->n++] = *c;
}

/* First pass, one process: what it is and which folder it uses, into procs (its NSpid into the
 * folder's set). 0, or -ENOMEM. */
static int walk_pid(struct ipc_node_walk *w, uint64_t pid, char *buf, struct dir_list *dirs,
                    size_t *ndirs, struct walk_proc **procs, size_t *nprocs, size_t *cap_procs)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%llu/root", (unsigned long long)pid);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == EACCES || errno == EPERM) {
            w->denied++;
        }
        return 0; /* gone, or a kernel thread's */
    }
    struct walk_proc p;
    memset(&p, 0, sizeof(p));
    p.c.host_pid = pid;
    int rc = ipc_node_nspid(pid, &p.c.ns_pid);
    if (rc == AGENT_E_NOTFOUND) {
        p.c.ns_pid = pid; /* a kernel before 4.1: one pid namespace as far as we can tell */
    } else if (rc != 0) {
        return 0;
    }
    if (ipc_node_start_time(pid, &p.c.start_time) != 0) {
        return 0;
    }
    read_tmpdir(pid, buf, IPC_NODE_READ_MAX, p.c.tmpdir, sizeof(p.c.tmpdir));
    int dirfd = open_tmpdir(pid, p.c.tmpdir);
    if (dirfd < 0) {
        return 0;
    }
    ssize_t di = dir_index(dirs, ndirs, dirfd, &p.c, &w->cut);
    (void)close(dirfd);
    if (di < 0) {
        return 0;
    }
    p.dir = (size_t)di;
    if (*nprocs == *cap_procs) {
        size_t nc = *cap_procs == 0 ? 64 : *cap_procs * 2;
        void *q = realloc(*procs, nc * sizeof(**procs));
        if (q == NULL) {
            return -ENOMEM;
        }
        *procs = q;
        *cap_procs = nc;
    }
    if (add_pid(&dirs[di], p.c.ns_pid) != 0) {
        return -ENOMEM;
    }
    (*procs)[(*nprocs)++] = p;
    return 0;
}

/* The folder l through pid's root, if it is still the same folder: listed, true. */
static bool list_through(struct dir_list *l, uint64_t pid, const char *tmpdir, unsigned *cut)
{
    int dirfd = open_tmpdir(pid, tmpdir);
    if (dirfd < 0) {
        return false;
    }
    struct stat st;
    bool same = fstat(dirfd, &st) == 0 && st.st_dev == l->dev && st.st_ino == l->ino;
    if (same) {
        list_dir(dirfd, l, cut);
    }
    (void)close(dirfd);
    return same;
}

/* Second pass: each folder listed once, through its opener or, if that process is gone, another
 * process that uses it. */
static void list_dirs(struct dir_list *dirs, size_t ndirs, const struct walk_proc *procs,
                      size_t nprocs, unsigned *cut)
{
    for (size_t i = 0; i < ndirs; i++) {
        struct dir_list *l = &dirs[i];
        qsort(l->pids, l->npids, sizeof(*l->pids), cmp_pid);
        if (list_through(l, l->open_pid, l->tmpdir, cut)) {
            continue;
        }
        for (size_t k = 0; k < nprocs; k++) {
            if (procs[k].dir == i && procs[k].c.host_pid != l->open_pid &&
                list_through(l, procs[k].c.host_pid, procs[k].c.tmpdir, cut)) {
                break;
            }
        }
    }
}

void ipc_node_walk(struct ipc_node_walk *w, uint64_t self_pid)
{
    memset(w, 0, sizeof(*w));
    DIR *proc = opendir("/proc");
    if (proc == NULL) {
        w->rc = -errno;
        return;
    }
    char *buf = malloc(IPC_NODE_READ_MAX);
    struct dir_list *dirs = calloc(MAX_DIRS, sizeof(*dirs));
    struct walk_proc *procs = NULL;
    size_t nprocs = 0;
    size_t cap_procs = 0;
    size_t ndirs = 0;
    size_t cap = 0;
    struct dirent *de;
    int rc = buf == NULL || dirs == NULL ? -ENOMEM : 0;
    while (rc == 0 && (de = readdir(proc)) != NULL) {
        uint64_t pid;
        if (de->d_name[0] < '1' || de->d_name[0] > '9' ||
            num_parse_u64_str(de->d_name, 10, UINT32_MAX, &pid) != 0) {
            continue;
        }
        if (w->looked >= IPC_NODE_MAX_PIDS) {
            w->cut |= IPC_NODE_CUT_PIDS;
            break;
        }
        w->looked++;
        if (pid != self_pid) {
            rc = walk_pid(w, pid, buf, dirs, &ndirs, &procs, &nprocs, &cap_procs);
        }
    }
    if (rc == 0) {
        list_dirs(dirs, ndirs, procs, nprocs, &w->cut);
    }
    for (size_t i = 0; rc == 0 && i < nprocs; i++) {
        struct ipc_node_cand c = procs[i].c;
        const struct dir_list *l = &dirs[procs[i].dir];
        for (size_t k = 0; k < l->n; k++) {
            uint64_t npid;
            if (ipc_sockname_parse(l->names[k], &npid, &c.key) == 0 && npid == c.ns_pid) {
                snprintf(c.name, sizeof(c.name), "%s", l->names[k]);
                add_cand(w, &cap, &c);
            }
        }
    }
    w->rc = rc;
    for (size_t i = 0; dirs != NULL && i < ndirs; i++) {
        free(dirs[i].names);
        free(dirs[i].pids);
    }
    free(procs);
    free(dirs);
    free(buf);
    (void)closedir(proc);
}

/* The inodes of the process's sockets (its fd links "socket:[N]"), sorted; *n of them. */
static int owned_sockets(uint64_t pid, uint64_t **out, size_t *n)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%llu/fd", (unsigned long long)pid);
    DIR *fds = opendir(path);
    if (fds == NULL) {
        return -errno;
    }
    uint64_t *v = NULL;
    size_t cap = 0;
    size_t seen = 0;
    int rc = 0;
    *n = 0;
    struct dirent *de;
    while ((de = readdir(fds)) != NULL && seen < IPC_NODE_FDS_MAX) {
        if (de->d_name[0] == '.') {
            continue;
        }
        seen++;
        char link[64];
        ssize_t ln = readlinkat(dirfd(fds), de->d_name, link, sizeof(link) - 1);
        uint64_t ino;
        if (ln <= 0 || !procfs_socket_link(link, (size_t)ln, &ino)) {
            continue;
        }
        if (*n == cap) {
            size_t nc = cap == 0 ? 16 : cap * 2;
            void *p = realloc(v, nc * sizeof(*v));
            if (p == NULL) {
                rc = -ENOMEM;
                break;
            }
            v = p;
            cap = nc;
        }
        v[(*n)++] = ino;
    }
    (void)closedir(fds);
    if (rc != 0) {
        free(v);
        *n = 0;
        return rc;
    }
    procfs_sort_inodes(v, *n);
    *out = v;
    return 0;
}

int ipc_node_verify(const struct ipc_node_cand *c, bool *unix_cut)
{
    *unix_cut = false;
    uint64_t *owned = NULL;
    size_t nowned = 0;
    int rc = owned_sockets(c->host_pid, &owned, &nowned);
    if (rc != 0) {
        return rc;
    }
    if (nowned == 0) {
        free(owned);
        return AGENT_E_NOTFOUND;
    }
    char path[64];
    char full[IPC_NODE_TMPDIR_MAX + IPC_SOCKNAME_MAX + 1];
    if (ipc_node_sock_path(c->tmpdir, c->name, full, sizeof(full)) != 0) {
        free(owned);
        return AGENT_E_NOTFOUND;
    }
    snprintf(path, sizeof(path), "/proc/%llu/net/unix", (unsigned long long)c->host_pid);
    char *buf = malloc(IPC_NODE_UNIX_MAX);
    if (buf == NULL) {
        free(owned);
        return -ENOMEM;
    }
    ssize_t n = read_bounded(path, buf, IPC_NODE_UNIX_MAX);
    uint64_t inode = 0;
    rc = n < 0 ? (int)n : procfs_unix_listener(buf, (size_t)n, full, owned, nowned, &inode);
    if (rc == AGENT_E_NOTFOUND && n == IPC_NODE_UNIX_MAX - 1) {
        *unix_cut = true; /* the table is larger than the read's bound: the line may be past it */
    }
    free(buf);
    free(owned);
    if (rc != 0) {
        return rc;
    }
    uint64_t st = 0;
    if (ipc_node_start_time(c->host_pid, &st) != 0 || st != c->start_time) {
        rc = AGENT_E_NOTFOUND; /* another process has the pid now */
    }
    return rc;
}
