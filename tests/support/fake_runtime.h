/* SPDX-License-Identifier: MIT */
#ifndef TEST_FAKE_RUNTIME_H
#define TEST_FAKE_RUNTIME_H

/*
 * A scripted stand-in for a .NET runtime's diagnostic server, for loop tests. It listens on a
 * correctly named Unix socket (`<dir>/dotnet-diagnostic-<pid>-<key>-socket`) on the test's loop,
 * reads one request per connection and answers according to its mode, then closes the
 * connection as the runtime does.
 *
 * Replies are encoded here by hand, independently of ipc/ipc_codec.c, so a bug in the codec
 * cannot be mirrored by the fake. Strings in the config are ASCII/UTF-8.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

enum fake_mode {
    FAKE_NORMAL =
        0, /* ProcessInfo 1..max_info, ProcessEnvironment, ResumeRuntime; else UNKNOWN_COMMAND */
    FAKE_GARBAGE,   /* 32 bytes that are not an IPC message, then close */
    FAKE_OVERSIZED, /* a header announcing a 65535-byte reply, then silence */
    FAKE_TRUNCATED, /* a header announcing 100 bytes, 10 payload bytes, then close */
    FAKE_SILENT,    /* reads the request, never answers, keeps the connection open */
    FAKE_HUGE_ENV   /* ProcessEnvironment OK reply announcing a 0xFFFFFFF0-byte continuation */
};

struct fake_runtime_config {
    uint64_t pid; /* used in the socket name and in ProcessInfo */
    uint64_t key;
    uint8_t cookie[16];
    const char *command_line; /* NULL encodes an absent string */
    const char *os;
    const char *arch;
    const char *assembly;
    const char *clr_version;
    const char *rid;
    int max_info; /* newest ProcessInfo supported: 1, 2 or 3 (0 means 3) */
    enum fake_mode mode;
    bool split_writes;      /* send each reply one byte per write */
    const char *const *env; /* NULL-terminated "NAME=value" list for ProcessEnvironment */
};

struct fake_runtime;

/* Binds and listens on the loop. Returns 0 or a negative errno/libuv code. */
int fake_runtime_start(uv_loop_t *loop, const char *dir, const struct fake_runtime_config *cfg,
                       struct fake_runtime **out);
const char *fake_runtime_path(const struct fake_runtime *f);
/* Requests received with this command set/id (complete requests only). */
unsigned fake_runtime_requests(const struct fake_runtime *f, uint8_t command_set,
                               uint8_t command_id);
/* Connections accepted so far. */
unsigned fake_runtime_connections(const struct fake_runtime *f);
/* Like SIGKILL: the listener and every connection close, the socket file stays behind. */
void fake_runtime_kill(struct fake_runtime *f);
/* Closes everything, unlinks the socket file, frees f; cb (may be NULL) runs once all is closed. */
void fake_runtime_close(struct fake_runtime *f, void (*cb)(void *ud), void *ud);

/* A socket file that nobody listens on (bound, then closed). path gets its full path. */
int fake_stale_socket(const char *dir, uint64_t pid, uint64_t key, char *path, size_t cap);
/* mkdtemp under /tmp with a short name (sun_path is only 108 bytes). */
int fake_tmpdir(char *out, size_t cap);
/* Removes every entry of dir (not recursively) and dir itself. */
void fake_rmdir(const char *dir);

#endif
