/* SPDX-License-Identifier: MIT */
/*
 * The one place that turns an endpoint into a connected pipe (ipc_internal.h): uv_pipe_connect
 * for a socket path (connect mode), or the hand-over of a reverse runtime's idle connection from
 * ipc_listen.c (listen mode). Exchanges and sessions call this instead of uv_pipe_connect, so
 * every command works the same way in both modes.
 */
#include <string.h>

#include "ipc_internal.h"

static void conn_on_path_connect(uv_connect_t *req, int status)
{
    struct ipc_conn *c = req->data;
    if (c->state != IPC_CONN_PATH) {
        return; /* closed meanwhile (UV_ECANCELED): the user no longer listens */
    }
    c->state = IPC_CONN_READY;
    c->cb(c, status);
}

int ipc__connect(struct ipc_conn *c, uv_loop_t *loop, uv_pipe_t *pipe, const char *endpoint,
                 ipc__conn_cb cb, void *data)
{
    memset(c, 0, sizeof(*c));
    c->data = data;
    c->pipe = pipe;
    c->cb = cb;
    size_t plen = sizeof(IPC_REVERSE_PREFIX) - 1;
    if (strncmp(endpoint, IPC_REVERSE_PREFIX, plen) == 0) {
        c->state = IPC_CONN_WAITING;
        int rc = ipc__listen_enqueue(c, loop, endpoint + plen);
        if (rc != 0) {
            c->state = IPC_CONN_IDLE;
        }
        return rc;
    }
    c->state = IPC_CONN_PATH;
    c->req.data = c;
    /* Errors (refused, no such file) arrive through the callback, on a later loop turn. */
    uv_pipe_connect(&c->req, pipe, endpoint, conn_on_path_connect);
    return 0;
}

void ipc__conn_close(struct ipc_conn *c)
{
    if (c->state == IPC_CONN_WAITING || c->rt != NULL) {
        ipc__listen_conn_close(c);
    }
    c->state = IPC_CONN_IDLE;
}
