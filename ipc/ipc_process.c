/* SPDX-License-Identifier: MIT */
/* struct ipc_process from a ProcessInfo reply, shared by connect-mode and listen-mode discovery. */
#include <stdlib.h>
#include <string.h>

#include "ipc_codec.h"
#include "ipc_internal.h"

static char *dup_str(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static char *dup_utf16(const struct ipc_utf16 *s)
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
                      const char *endpoint, int64_t peer_uid)
{
    p->pid = pi->pid;
    p->peer_uid = peer_uid;
    memcpy(p->cookie, pi->cookie, sizeof(p->cookie));
    ipc_guid_format(pi->cookie, p->uid);
    p->command_line = dup_utf16(&pi->command_line);
    p->os = dup_utf16(&pi->os);
    p->arch = dup_utf16(&pi->arch);
    bool ok = p->command_line != NULL && p->os != NULL && p->arch != NULL;
    if (ok && level >= 2) {
        p->entrypoint_assembly = dup_utf16(&pi->entrypoint_assembly);
        p->clr_version = dup_utf16(&pi->clr_version);
        ok = p->entrypoint_assembly != NULL && p->clr_version != NULL;
    }
    if (ok && level == 3 && pi->version >= 1) {
        p->runtime_identifier = dup_utf16(&pi->runtime_identifier);
        ok = p->runtime_identifier != NULL;
    }
    if (ok) {
        const char *name;
        size_t len;
        ipc_cmdline_name(p->command_line, &name, &len);
        p->name = dup_str(name, len);
        p->endpoint = dup_str(endpoint, strlen(endpoint));
        ok = p->name != NULL && p->endpoint != NULL;
    }
    if (!ok) {
        ipc__process_fini(p);
        return UV_ENOMEM;
    }
    return 0;
}

int ipc__process_update_cmdline(struct ipc_process *p, const struct ipc_utf16 *command_line)
{
    char *cl = dup_utf16(command_line);
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
    char *nm = dup_str(name, len);
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
    free(p->endpoint);
    p->name = p->command_line = p->os = p->arch = NULL;
    p->entrypoint_assembly = p->clr_version = p->runtime_identifier = p->endpoint = NULL;
}
