/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_SOCKNAME_H
#define AGENT_IPC_SOCKNAME_H

/*
 * The default diagnostic socket name, `dotnet-diagnostic-<pid>-<key>-socket` (docs/ipc.md §1.1,
 * §1.2). Pure string handling: no I/O.
 */

#include <stddef.h>
#include <stdint.h>

#define IPC_SOCKNAME_PREFIX "dotnet-diagnostic-"
#define IPC_SOCKNAME_SUFFIX "-socket"
/* Longest name: two 20-digit uint64 values plus the fixed parts and the NUL. */
#define IPC_SOCKNAME_MAX                                                                           \
    (sizeof(IPC_SOCKNAME_PREFIX) - 1 + 20 + 1 + 20 + sizeof(IPC_SOCKNAME_SUFFIX))

/*
 * Parses a file name (not a path). pid and key are decimal digits only (no sign, no spaces), must
 * fit a uint64, and pid must be non-zero. Anything else, including the dsrouter proxy's
 * `dotnet-diagnostic-dsrouter-…` names, gives AGENT_E_INVAL. Out-params are set only on success.
 */
int ipc_sockname_parse(const char *name, uint64_t *pid, uint64_t *key);

/* Formats the name into out; AGENT_E_NOSPACE if cap is too small (IPC_SOCKNAME_MAX always fits). */
int ipc_sockname_format(char *out, size_t cap, uint64_t pid, uint64_t key);

#endif
