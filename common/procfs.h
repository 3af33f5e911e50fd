/* SPDX-License-Identifier: MIT */
#ifndef AGENT_COMMON_PROCFS_H
#define AGENT_COMMON_PROCFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Pure parsers of /proc text (no I/O): the caller reads the file (bounded) and passes its bytes.
 * Node-mode discovery (docs/ipc.md §6) uses these.
 */

/*
 * /proc/<pid>/status: the last field of its "NSpid:" line, the pid the process sees for itself
 * (its innermost pid namespace). Returns 0, or AGENT_E_NOTFOUND (no NSpid line: a kernel before
 * 4.1, or not a status file) or AGENT_E_PROTO (a malformed line).
 */
int procfs_status_nspid(const char *text, size_t len, uint64_t *out);

/*
 * /proc/<pid>/stat: field 22, the process's start time in clock ticks since boot (fields are
 * counted after the last ')', since the command name in field 2 may hold spaces and parentheses).
 * Returns 0 or AGENT_E_PROTO.
 */
int procfs_stat_starttime(const char *text, size_t len, uint64_t *out);

/*
 * /proc/<pid>/environ (NUL-separated NAME=value): a view of the value of name into *val and
 * *val_len. Returns 0, or AGENT_E_NOTFOUND. An entry cut by the caller's read bound is not
 * matched.
 */
int procfs_environ_find(const char *text, size_t len, const char *name, const char **val,
                        size_t *val_len);

/*
 * /proc/<pid>/net/unix: the inode of the listening stream socket bound to path (exact match;
 * abstract sockets, whose path starts with '@', never match a path starting with '/'). Returns 0,
 * or AGENT_E_NOTFOUND.
 */
int procfs_unix_listener(const char *text, size_t len, const char *path, uint64_t *inode);

/* A /proc/<pid>/fd/<n> link's text "socket:[<inode>]": true and *inode, else false. */
bool procfs_socket_link(const char *link, size_t len, uint64_t *inode);

#endif
