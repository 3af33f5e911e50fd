/* SPDX-License-Identifier: MIT */
/* Command-level calls on top of one-command exchanges: GenerateCoreDump, ProcessEnvironment. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_internal.h"

_Static_assert(IPC_DUMP_TYPE_NORMAL == IPC_DUMP_NORMAL && IPC_DUMP_TYPE_FULL == IPC_DUMP_FULL &&
                   IPC_DUMP_TYPE_WITH_HEAP == IPC_DUMP_WITH_HEAP &&
                   IPC_DUMP_TYPE_TRIAGE == IPC_DUMP_TRIAGE,
               "dump types of ipc_client.h and ipc_cmd.h");

const char *ipc_hresult_text(uint32_t hresult)
{
    return ipc_hresult_name(hresult);
}

/* ---- GenerateCoreDump 3 -> 2 -> 1 ------------------------------------------------------------ */

struct ipc_dump {
    uv_loop_t *loop;
    struct ipc_endpoint ep;        /* owned copy */
    struct ipc_dump_params params; /* params.path is dump_path */
    char *dump_path;
    int version;
    struct ipc_exchange *x;
    ipc_dump_cb cb;
    void *ud;
};

static void dump_free(struct ipc_dump *d)
{
    ipc_endpoint_fini(&d->ep);
    free(d->dump_path);
    free(d);
}

/* Builds GenerateCoreDump<version> into a buffer of its exact size and starts the exchange. */
static void dump_on_reply(void *ud, const struct ipc_result *res);

static int dump_send(struct ipc_dump *d)
{
    const struct ipc_dump_params *pp = &d->params;
    struct ipc_wr w;
    ipc_wr_init(&w, NULL, SIZE_MAX); /* measuring */
    int rc = ipc_cmd_generate_dump(&w, d->version, pp->path, pp->type, pp->flags);
    if (rc != 0) {
        return rc;
    }
    if (w.len > IPC_MESSAGE_MAX) {
        return AGENT_E_TOOBIG;
    }
    uint8_t *msg = malloc(w.len);
    if (msg == NULL) {
        return UV_ENOMEM;
    }
    ipc_wr_init(&w, msg, w.len);
    rc = ipc_cmd_generate_dump(&w, d->version, pp->path, pp->type, pp->flags);
    if (rc == 0) {
        rc = ipc_exchange_start(d->loop, &d->ep, msg, w.len, IPC_EXCHANGE_SIMPLE, pp->timeout_ms,
                                pp->max_reply, dump_on_reply, d, &d->x);
    }
    free(msg);
    return rc;
}

/* The text after the HRESULT of a GenerateCoreDump3 Error reply, on one line; NULL if none. */
static char *dump_message(const struct ipc_result *res)
{
    if (res->payload_len <= 4) {
        return NULL;
    }
    struct ipc_rd rd;
    struct ipc_utf16 s;
    ipc_rd_init(&rd, res->payload + 4, res->payload_len - 4);
    if (ipc_rd_string(&rd, &s) != 0 || !s.present) {
        return NULL;
    }
    char *out = ipc__utf16_dup(&s);
    if (out == NULL) {
        return NULL;
    }
    size_t len = strlen(out);
    /* createdump's lines: kept on one line for a problem detail. */
    for (size_t i = 0; i < len; i++) {
        if (out[i] == '\n' || out[i] == '\r') {
            out[i] = ' ';
        }
    }
    while (len > 0 && out[len - 1] == ' ') {
        out[--len] = '\0';
    }
    return out;
}

static void dump_on_reply(void *ud, const struct ipc_result *res)
{
    struct ipc_dump *d = ud;
    d->x = NULL;
    if (res->status == 0 && !res->ok && res->hresult == IPC_HR_UNKNOWN_COMMAND && d->version > 1 &&
        (d->params.retry == NULL || d->params.retry(d->ud, d->version - 1))) {
        d->version--;
        if (dump_send(d) == 0) {
            return;
        }
        d->version++; /* the reply below is the one of this version */
    }
    char *text = res->status == 0 && !res->ok ? dump_message(res) : NULL;
    struct ipc_dump_result r = {.status = res->status,
                                .ok = res->ok,
                                .hresult = res->hresult,
                                .version = d->version,
                                .message = text != NULL ? text : ""};
    d->cb(d->ud, &r);
    free(text);
    dump_free(d);
}

int ipc_dump_request(uv_loop_t *loop, const struct ipc_endpoint *ep,
                     const struct ipc_dump_params *params, ipc_dump_cb cb, void *ud,
                     struct ipc_dump **out)
{
    if (loop == NULL || ep == NULL || ep->path == NULL || params == NULL || params->path == NULL ||
        cb == NULL) {
        return AGENT_E_INVAL;
    }
    struct ipc_dump *d = calloc(1, sizeof(*d));
    if (d == NULL) {
        return UV_ENOMEM;
    }
    d->loop = loop;
    d->params = *params;
    int copied = ipc_endpoint_copy(&d->ep, ep);
    d->params.path = d->dump_path = strdup(params->path);
    d->version = 3;
    d->cb = cb;
    d->ud = ud;
    int rc = copied == 0 && d->params.path != NULL ? dump_send(d) : UV_ENOMEM;
    if (rc != 0) {
        dump_free(d);
        return rc;
    }
    if (out != NULL) {
        *out = d;
    }
    return 0;
}

void ipc_dump_cancel(struct ipc_dump *d)
{
    if (d == NULL) {
        return;
    }
    ipc_exchange_cancel(d->x);
    dump_free(d);
}

/* ---- ProcessEnvironment ---------------------------------------------------------------------- */

struct ipc_env {
    struct ipc_exchange *x;
    ipc_env_var_cb on_var;
    ipc_env_done_cb on_done;
    void *ud;
};

static void env_on_reply(void *ud, const struct ipc_result *res)
{
    struct ipc_env *e = ud;
    struct ipc_env_result r = {.status = res->status, .ok = res->ok, .hresult = res->hresult};
    if (res->status == 0 && res->ok) {
        /* One converted entry needs at most 3 UTF-8 bytes per UTF-16 unit. */
        size_t cap = res->continuation_len / 2 * 3 + 1;
        char *scratch = malloc(cap);
        r.block_status = scratch != NULL ? ipc_env_parse(res->continuation, res->continuation_len,
                                                         scratch, cap, e->on_var, e->ud)
                                         : UV_ENOMEM;
        free(scratch);
    }
    ipc_env_done_cb on_done = e->on_done;
    void *cb_ud = e->ud;
    free(e);
    on_done(cb_ud, &r);
}

int ipc_env_request(uv_loop_t *loop, const struct ipc_endpoint *ep, uint64_t timeout_ms,
                    size_t max_reply, ipc_env_var_cb on_var, ipc_env_done_cb on_done, void *ud,
                    struct ipc_env **out)
{
    if (on_var == NULL || on_done == NULL) {
        return AGENT_E_INVAL;
    }
    uint8_t msg[IPC_HEADER_SIZE];
    struct ipc_wr w;
    ipc_wr_init(&w, msg, sizeof(msg));
    int rc = ipc_cmd_process_env(&w);
    if (rc != 0) {
        return rc;
    }
    struct ipc_env *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return UV_ENOMEM;
    }
    e->on_var = on_var;
    e->on_done = on_done;
    e->ud = ud;
    rc = ipc_exchange_start(loop, ep, msg, w.len, IPC_EXCHANGE_ENVIRONMENT, timeout_ms, max_reply,
                            env_on_reply, e, &e->x);
    if (rc != 0) {
        free(e);
        return rc;
    }
    if (out != NULL) {
        *out = e;
    }
    return 0;
}

void ipc_env_cancel(struct ipc_env *e)
{
    if (e == NULL) {
        return;
    }
    ipc_exchange_cancel(e->x);
    free(e);
}
