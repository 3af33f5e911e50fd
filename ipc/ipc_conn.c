/* SPDX-License-Identifier: MIT */
/*
 * The one place that turns an endpoint into a connected pipe (ipc_internal.h), through the
 * endpoint's transport: uv_pipe_connect for a socket path (connect mode, the table below), or the
 * hand-over of a reverse runtime's idle connection (listen mode, ipc__transport_reverse in
 * ipc_listen.c). Exchanges and sessions call this instead of uv_pipe_connect, so every command
 * works the same way in both modes, and every connection to a path is checked against the user
 * its runtime was found to run as before anything is written to it.
 */
#define _GNU_SOURCE /* struct ucred, O_PATH */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "err.h"
#include "ipc_internal.h"
#include "shdir.h"

/* The connected peer's credentials (SO_PEERCRED: for a client, the listener's, as of its
 * listen()). 0 or a negative code. */
static int peer_cred(const uv_pipe_t *pipe, struct ucred *cred)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)pipe, &fd);
    if (rc != 0) {
        return rc;
    }
    socklen_t len = sizeof(*cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, cred, &len) != 0 || len != sizeof(*cred)) {
        return UV_EINVAL;
    }
    return 0;
}

int64_t ipc__peer_uid(const uv_pipe_t *pipe)
{
    struct ucred cred;
    int rc = peer_cred(pipe, &cred);
    return rc != 0 ? rc : (int64_t)cred.uid;
}

static void conn_on_path_connect(uv_connect_t *req, int status)
{
    struct ipc_conn *c = req->data;
    if (c->state != IPC_CONN_PATH) {
        return; /* closed meanwhile (UV_ECANCELED): the user no longer listens */
    }
    c->state = IPC_CONN_READY;
    struct ucred cred;
    if (status == 0 && (status = peer_cred(c->pipe, &cred)) == 0) {
        c->peer_uid = (int64_t)cred.uid;
        /* Someone else's socket at the runtime's path (swapped in a writable folder), or (node
         * mode) a socket at the runtime's name that the runtime did not create (its user bound
         * another one there): nothing is sent to it. */
        bool other_uid = c->want_uid != IPC_ANY_PEER && c->peer_uid != c->want_uid;
        bool other_pid = c->want_pid != 0 && (cred.pid <= 0 || (uint64_t)cred.pid != c->want_pid);
        if (other_uid || other_pid) {
            status = AGENT_E_UNTRUSTED;
        }
    }
    c->cb(c, status);
}

/*
 * Node mode: the socket ep->path names, opened beneath its process's root without following any
 * symlink, checked to be the file discovery checked, as a descriptor (O_PATH) into *fd_out.
 * Metadata calls on /proc and the container's local file system, like connect(2) itself.
 */
static int open_node_socket(const struct ipc_endpoint *ep, int *fd_out)
{
    char root[64];
    int n = snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)ep->root_pid);
    size_t rn = (size_t)n;
    if (n < 0 || rn >= sizeof(root) || strncmp(ep->path, root, rn) != 0 || ep->path[rn] != '/') {
        return AGENT_E_INVAL;
    }
    int fd = -1;
    int rc = shdir_open_beneath_nolinks(root, ep->path + rn, O_PATH, &fd);
    if (rc == -ELOOP || rc == -EXDEV || rc == -ENOTDIR) {
        return AGENT_E_CHANGED; /* a symlink on the way: not how the runtime made its path */
    }
    if (rc != 0) {
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode) || (uint64_t)st.st_dev != ep->sock_dev ||
        (uint64_t)st.st_ino != ep->sock_ino) {
        (void)close(fd);
        return AGENT_E_CHANGED;
    }
    *fd_out = fd;
    return 0;
}

static int path_connect(struct ipc_conn *c, uv_loop_t *loop, const struct ipc_endpoint *ep)
{
    (void)loop;
    if (ep->root_pid == 0) {
        c->state = IPC_CONN_PATH;
        c->req.data = c;
        /* Errors (refused, no such file) arrive through the callback, on a later loop turn. */
        uv_pipe_connect(&c->req, c->pipe, ep->path, conn_on_path_connect);
        return 0;
    }
    /* Node mode: the checked socket file by descriptor. connect(2) runs inside uv_pipe_connect
     * (libuv only waits for its completion later), so the descriptor has done its work when the
     * call returns. */
    int fd = -1;
    int rc = open_node_socket(ep, &fd);
    if (rc != 0) {
        return rc;
    }
    char fd_path[40];
    snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
    c->state = IPC_CONN_PATH;
    c->req.data = c;
    uv_pipe_connect(&c->req, c->pipe, fd_path, conn_on_path_connect);
    (void)close(fd);
    return 0;
}

/* Nothing to give back: closing the pipe cancels the connect (conn_on_path_connect ignores it). */
static void path_conn_close(struct ipc_conn *c)
{
    (void)c;
}

const struct ipc_transport ipc__transport_path = {
    .name = "path",
    .connect = path_connect,
    .conn_close = path_conn_close,
    .ref = NULL, /* a path endpoint shares nothing */
    .unref = NULL,
};

static const struct ipc_transport *transport_of(const struct ipc_endpoint *ep)
{
    return ep->transport != NULL ? ep->transport : &ipc__transport_path;
}

int ipc__connect(struct ipc_conn *c, uv_loop_t *loop, uv_pipe_t *pipe,
                 const struct ipc_endpoint *ep, ipc__conn_cb cb, void *data)
{
    memset(c, 0, sizeof(*c));
    c->data = data;
    c->pipe = pipe;
    c->cb = cb;
    c->want_uid = ep->peer_uid;
    c->want_pid = ep->root_pid;
    c->peer_uid = -1;
    c->transport = transport_of(ep);
    int rc = c->transport->connect(c, loop, ep);
    if (rc != 0) {
        c->state = IPC_CONN_IDLE;
    }
    return rc;
}

void ipc__conn_close(struct ipc_conn *c)
{
    if (c->transport != NULL) {
        c->transport->conn_close(c);
    }
    c->state = IPC_CONN_IDLE;
}

int ipc_endpoint_copy(struct ipc_endpoint *dst, const struct ipc_endpoint *src)
{
    memset(dst, 0, sizeof(*dst));
    if (src == NULL || src->path == NULL) {
        return AGENT_E_INVAL;
    }
    char *path = strdup(src->path);
    if (path == NULL) {
        return UV_ENOMEM;
    }
    *dst = *src;
    dst->path = path;
    const struct ipc_transport *t = transport_of(dst);
    if (t->ref != NULL) {
        t->ref(dst);
    }
    return 0;
}

void ipc_endpoint_fini(struct ipc_endpoint *ep)
{
    if (ep == NULL || ep->path == NULL) {
        return; /* zeroed, or released already */
    }
    const struct ipc_transport *t = transport_of(ep);
    if (t->unref != NULL) {
        t->unref(ep);
    }
    free((void *)(uintptr_t)ep->path); /* the copy owns it (ipc_endpoint_copy) */
    memset(ep, 0, sizeof(*ep));
}
