/* SPDX-License-Identifier: MIT */
/*
 * struct ipc_process from a ProcessInfo reply, and the ProcessInfo3 -> 2 -> 1 probe, shared by
 * connect-mode and listen-mode discovery.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ipc_codec.h"
#include "ipc_internal.h"

char *ipc__utf16_dup(const struct ipc_utf16 *s)
{
    size_t n = ipc_utf16_utf8_len(s);
    char *p = malloc(n + 1);
    if (p != NULL && ipc_utf16_to_utf8(s, p, n + 1, NULL) != 0) {
        free(p);
        p = NULL;
    }
    return p;
}

int ipc__process_init(struct ipc_process *p, const struct ipc_process_info *pi, int level,
                      const struct ipc_endpoint *ep, int64_t peer_uid)
{
    p->pid = pi->pid;
    p->peer_uid = peer_uid;
    memcpy(p->cookie, pi->cookie, sizeof(p->cookie));
    ipc_guid_format(pi->cookie, p->uid);
    p->command_line = ipc__utf16_dup(&pi->command_line);
    p->os = ipc__utf16_dup(&pi->os);
    p->arch = ipc__utf16_dup(&pi->arch);
    bool ok = p->command_line != NULL && p->os != NULL && p->arch != NULL;
    if (ok && level >= 2) {
        p->entrypoint_assembly = ipc__utf16_dup(&pi->entrypoint_assembly);
        p->clr_version = ipc__utf16_dup(&pi->clr_version);
        ok = p->entrypoint_assembly != NULL && p->clr_version != NULL;
    }
    if (ok && level == 3 && pi->version >= 1) {
        p->runtime_identifier = ipc__utf16_dup(&pi->runtime_identifier);
        ok = p->runtime_identifier != NULL;
    }
    if (ok) {
        const char *name;
        size_t len;
        ipc_cmdline_name(p->command_line, &name, &len);
        p->name = strndup(name, len);
        ok = p->name != NULL && ipc_endpoint_copy(&p->ep, ep) == 0;
        p->ep.peer_uid = peer_uid >= 0 ? peer_uid : IPC_ANY_PEER;
        p->endpoint = p->ep.path;
    }
    if (!ok) {
        ipc__process_fini(p);
        return UV_ENOMEM;
    }
    return 0;
}

int ipc__process_update_cmdline(struct ipc_process *p, const struct ipc_utf16 *command_line)
{
    /* Called on every liveness check: the usual answer, "unchanged", allocates nothing. */
    char same[1024];
    size_t len8 = 0;
    if (p->command_line != NULL &&
        ipc_utf16_to_utf8(command_line, same, sizeof(same), &len8) == 0 &&
        strcmp(same, p->command_line) == 0) {
        return 0;
    }
    char *cl = ipc__utf16_dup(command_line);
    if (cl == NULL) {
        return UV_ENOMEM;
    }
    if (p->command_line != NULL && strcmp(cl, p->command_line) == 0) {
        free(cl);
        return 0;
    }
    const char *name;
    size_t len;
    ipc_cmdline_name(cl, &name, &len);
    char *nm = strndup(name, len);
    if (nm == NULL) {
        free(cl);
        return UV_ENOMEM;
    }
    free(p->command_line);
    free(p->name);
    p->command_line = cl;
    p->name = nm;
    return 1;
}

void ipc__process_fini(struct ipc_process *p)
{
    free(p->name);
    free(p->command_line);
    free(p->os);
    free(p->arch);
    free(p->entrypoint_assembly);
    free(p->clr_version);
    free(p->runtime_identifier);
    ipc_endpoint_fini(&p->ep);
    p->endpoint = NULL;
    p->name = p->command_line = p->os = p->arch = NULL;
    p->entrypoint_assembly = p->clr_version = p->runtime_identifier = NULL;
}

/* ---- ProcessInfo probes ---------------------------------------------------------------------- */

struct ipc__probe {
    uv_loop_t *loop;
    struct ipc_endpoint ep; /* owned copy */
    int level;
    bool fallback;
    bool aborted;
    uint64_t timeout_ms;
    struct ipc_exchange *x;
    ipc__probe_cb cb;
    void *ud;
};

static void probe_on_reply(void *ud, const struct ipc_result *res);

static int probe_send(struct ipc__probe *p)
{
    uint8_t req[IPC_HEADER_SIZE];
    struct ipc_wr w;
    ipc_wr_init(&w, req, sizeof(req));
    int rc = p->level == 1   ? ipc_cmd_process_info(&w)
             : p->level == 2 ? ipc_cmd_process_info2(&w)
                             : ipc_cmd_process_info3(&w);
    if (rc != 0) {
        return rc;
    }
    return ipc_exchange_start(p->loop, &p->ep, req, w.len, IPC_EXCHANGE_SIMPLE, p->timeout_ms,
                              IPC_MESSAGE_MAX, probe_on_reply, p, &p->x);
}

static void probe_on_reply(void *ud, const struct ipc_result *res)
{
    struct ipc__probe *p = ud;
    p->x = NULL;
    if (res->status == 0 && !res->ok && res->hresult == IPC_HR_UNKNOWN_COMMAND && p->fallback &&
        !p->aborted && p->level > 1) {
        p->level--; /* an older runtime: the previous ProcessInfo */
        if (probe_send(p) == 0) {
            return;
        }
        p->level++;
    }
    struct ipc_process_info pi;
    struct ipc__probe_result r = {.status = res->status,
                                  .ok = res->ok,
                                  .hresult = res->hresult,
                                  .peer_uid = res->peer_uid,
                                  .level = p->level};
    if (res->status == 0 && res->ok) {
        r.parse_status = ipc_process_info_parse(res->payload, res->payload_len, p->level, &pi);
        r.info = r.parse_status == 0 ? &pi : NULL;
    }
    p->cb(p->ud, &r);
    ipc_endpoint_fini(&p->ep);
    free(p);
}

int ipc__probe_start(uv_loop_t *loop, const struct ipc_endpoint *ep, int level, bool fallback,
                     uint64_t timeout_ms, ipc__probe_cb cb, void *ud, struct ipc__probe **out)
{
    if (ep == NULL || ep->path == NULL || level < 1 || level > 3 || cb == NULL) {
        return AGENT_E_INVAL;
    }
    struct ipc__probe *p = calloc(1, sizeof(*p));
    if (p == NULL || ipc_endpoint_copy(&p->ep, ep) != 0) {
        free(p);
        return UV_ENOMEM;
    }
    p->loop = loop;
    p->level = level;
    p->fallback = fallback;
    p->timeout_ms = timeout_ms;
    p->cb = cb;
    p->ud = ud;
    int rc = probe_send(p);
    if (rc != 0) {
        ipc_endpoint_fini(&p->ep);
        free(p);
        return rc;
    }
    if (out != NULL) {
        *out = p;
    }
    return 0;
}

void ipc__probe_abort(struct ipc__probe *p)
{
    p->aborted = true;
    if (p->x != NULL) {
        ipc__exchange_abort(p->x);
    }
}
