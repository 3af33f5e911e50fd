/* SPDX-License-Identifier: MIT */
#include "ipc_sockname.h"

#include <stdio.h>
#include <string.h>

#include "err.h"

/*
 * Reads a run of decimal digits into *out, stopping at the first non-digit. Fails on an empty run
 * or on overflow, which a hand-rolled loop makes explicit (strtoull would accept signs and
 * leading spaces, and saturate instead of failing).
 */
static int parse_u64(const char **s, uint64_t *out)
{
    const char *p = *s;
    uint64_t v = 0;
    if (*p < '0' || *p > '9') {
        return AGENT_E_INVAL;
    }
    while (*p >= '0' && *p <= '9') {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return AGENT_E_INVAL;
        }
        v = v * 10 + d;
        p++;
    }
    *s = p;
    *out = v;
    return 0;
}

int ipc_sockname_parse(const char *name, uint64_t *pid, uint64_t *key)
{
    static const char prefix[] = IPC_SOCKNAME_PREFIX;
    static const char suffix[] = IPC_SOCKNAME_SUFFIX;
    if (strncmp(name, prefix, sizeof(prefix) - 1) != 0) {
        return AGENT_E_INVAL;
    }
    const char *p = name + sizeof(prefix) - 1;
    uint64_t v_pid;
    uint64_t v_key;
    /* "dsrouter-…" fails here: the pid must start with a digit. */
    if (parse_u64(&p, &v_pid) != 0 || *p != '-') {
        return AGENT_E_INVAL;
    }
    p++;
    if (parse_u64(&p, &v_key) != 0 || strcmp(p, suffix) != 0) {
        return AGENT_E_INVAL;
    }
    if (v_pid == 0) {
        return AGENT_E_INVAL;
    }
    *pid = v_pid;
    *key = v_key;
    return 0;
}

int ipc_sockname_format(char *out, size_t cap, uint64_t pid, uint64_t key)
{
    int n = snprintf(out, cap, IPC_SOCKNAME_PREFIX "%llu-%llu" IPC_SOCKNAME_SUFFIX,
                     (unsigned long long)pid, (unsigned long long)key);
    if (n < 0 || (size_t)n >= cap) {
        return AGENT_E_NOSPACE;
    }
    return 0;
}
