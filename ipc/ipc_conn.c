/* SPDX-License-Identifier: MIT */
/*
 * The one place that turns an endpoint into a connected pipe (ipc_internal.h): uv_pipe_connect
 * for a socket path (connect mode), or the hand-over of a reverse runtime's idle connection from
 * ipc_listen.c (listen mode). Exchanges and sessions call this instead of uv_pipe_connect, so
 * every command works the same way in both modes, and every connection to a path is checked
 * against the user its runtime was found to run as before anything is written to it.
 */
#define _GNU_SOURCE /* struct ucred */
#include <string.h>
#include <sys/socket.h>

#include "err.h"
#include "ipc_internal.h"

int64_t ipc__peer_uid(const uv_pipe_t *pipe)
{
    uv_os_fd_t fd;
    int rc = uv_fileno((const uv_handle_t *)pipe, &fd);
    if (rc != 0) {
        return rc;
    }
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof(cred)) {
        return UV_EINVAL;
    }
    return (int64_t)cred.uid;
}

static void conn_on_path_connect(uv_connect_t *req, int status)
{
    struct ipc_conn *c = req->data;
    if (c->state != IPC_CONN_PATH) {
        return; /* closed meanwhile (UV_ECANCELED): the user no longer listens */
    }
    c->state = IPC_CONN_READY;
    if (status == 0) {
        c->peer_uid = ipc__peer_uid(c->pipe);
        if (c->peer_uid < 0) {
            status = (int)c->peer_uid;
            c->peer_uid = -1;
        } else if (c->want_uid != IPC_ANY_PEER && c->peer_uid != c->want_uid) {
            /* Someone else's socket at the runtime's path (swapped in a writable folder). */
            status = AGENT_E_UNTRUSTED;
        }
    }
    c->cb(c, status);
}

int ipc__connect(struct ipc_conn *c, uv_loop_t *loop, uv_pipe_t *pipe,
                 const struct ipc_endpoint *ep, ipc__conn_cb cb, void *data)
{
    memset(c, 0, sizeof(*c));
    c->data = data;
    c->pipe = pipe;
    c->cb = cb;
    c->want_uid = ep->peer_uid;
    c->peer_uid = -1;
    size_t plen = sizeof(IPC_REVERSE_PREFIX) - 1;
    if (strncmp(ep->path, IPC_REVERSE_PREFIX, plen) == 0) {
        c->state = IPC_CONN_WAITING;
        int rc = ipc__listen_enqueue(c, loop, ep->path + plen);
        if (rc != 0) {
            c->state = IPC_CONN_IDLE;
        }
        return rc;
    }
    c->state = IPC_CONN_PATH;
    c->req.data = c;
    /* Errors (refused, no such file) arrive through the callback, on a later loop turn. */
    uv_pipe_connect(&c->req, pipe, ep->path, conn_on_path_connect);
    return 0;
}

void ipc__conn_close(struct ipc_conn *c)
{
    if (c->state == IPC_CONN_WAITING || c->rt != NULL) {
        ipc__listen_conn_close(c);
    }
    c->state = IPC_CONN_IDLE;
}
