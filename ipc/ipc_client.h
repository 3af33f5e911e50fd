/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_CLIENT_H
#define AGENT_IPC_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/*
 * One-command IPC exchanges with a runtime's diagnostic server (docs/ipc.md §1.3): connect,
 * write the complete request at once, read the 20-byte reply header and payload, and - for
 * commands that have one - the continuation. Every exchange has a timeout covering the whole
 * exchange, and a cap on the reply size checked before any allocation.
 */

struct ipc_exchange;

/*
 * Where a runtime is reached, and who it must be. A runtime's diagnostic socket may sit in a
 * folder other users can write, so the process that accepts the connection is checked
 * (SO_PEERCRED) right after connecting, before the request goes out.
 *
 * An endpoint carries its transport: NULL, a connect to the socket at `path` (connect mode); or,
 * set by ipc/ only (ipc_process_endpoint), a runtime connected to dotmon's own socket in listen
 * mode (ipc_listen.h), reached through a counted reference to its listener and its uid. Such a
 * reference stays safe after the runtime or the listener is gone: connecting then fails with
 * UV_ECONNREFUSED, as a socket nobody listens on.
 *
 * A struct ipc_endpoint is a view: to keep one beyond the life of what it came from (a struct
 * ipc_process, which lives until the loop runs again), make an owned copy with ipc_endpoint_copy
 * and release it with ipc_endpoint_fini. Calls that take an endpoint copy what they need.
 */
struct ipc_transport;  /* the ops table (ipc_internal.h) */
struct ipc_listen_ref; /* a listener, or nothing once it has closed (ipc_listen.c) */
#define IPC_ENDPOINT_UID_SIZE 37
struct ipc_endpoint {
    const char *path; /* connect mode: its listening socket; listen mode: a name for logs only
                         ("reverse:<uid>") */
    int64_t peer_uid; /* path endpoints: the uid the listening process must run as, else the
                         connection fails with AGENT_E_UNTRUSTED; IPC_ANY_PEER: not checked */
    const struct ipc_transport *transport; /* NULL: the socket at path */
    struct ipc_listen_ref *listener;       /* listen mode: counted */
    char uid[IPC_ENDPOINT_UID_SIZE];       /* listen mode: the runtime's cookie (GUID string) */
    /* Node mode (path endpoints, docs/ipc.md §6): path is "/proc/<root_pid>/root" then the
     * socket's path as that process sees it. It is never connected to by that path (a symlink
     * the process's user plants in its own file system would be followed in dotmon's): the
     * socket is opened beneath that root with no symlink followed (shdir_open_beneath_nolinks,
     * O_PATH), must still be the file sock_dev/sock_ino that discovery checked, else the
     * connect fails with AGENT_E_CHANGED, and is connected to as /proc/self/fd/<n> (closed right
     * after; any length of path works); the listener must then be root_pid's own (SO_PEERCRED's
     * pid), else AGENT_E_UNTRUSTED and nothing is sent. 0: path is connected to as it is. */
    uint64_t root_pid;
    uint64_t sock_dev;
    uint64_t sock_ino;
};
#define IPC_ANY_PEER ((int64_t)-1)
/* An endpoint whose listener is not checked, for a path the caller made itself (tests, tools). */
#define IPC_ENDPOINT_PATH(p) (&(const struct ipc_endpoint){.path = (p), .peer_uid = IPC_ANY_PEER})

/*
 * Makes *dst an owned copy of src (its own path string, its own reference to the transport's
 * state). Returns 0, AGENT_E_INVAL (no path) or UV_ENOMEM (*dst is then zeroed). Loop thread only.
 */
int ipc_endpoint_copy(struct ipc_endpoint *dst, const struct ipc_endpoint *src);
/* Releases what ipc_endpoint_copy took; safe on a zeroed endpoint and twice. */
void ipc_endpoint_fini(struct ipc_endpoint *ep);

struct ipc_result {
    int status; /* 0 = got a reply (OK or Error); else a negative code (timeout, refused…) */
    int ok;     /* 1 if the reply was Server/OK, 0 if Server/Error */
    uint32_t hresult;       /* Error replies (and int32 OK replies): the HRESULT */
    const uint8_t *payload; /* reply payload (view, valid during the callback only) */
    size_t payload_len;
    const uint8_t *continuation; /* ProcessEnvironment continuation, else NULL */
    size_t continuation_len;
    int64_t peer_uid; /* path endpoints: the uid of the process that accepted the connection
                         (SO_PEERCRED), -1 when unknown (not connected, reverse endpoints) */
};

typedef void (*ipc_exchange_cb)(void *ud, const struct ipc_result *res);

enum ipc_exchange_kind {
    IPC_EXCHANGE_SIMPLE = 0,     /* header + payload */
    IPC_EXCHANGE_ENVIRONMENT = 1 /* header + 6-byte payload + nIncomingBytes continuation */
};

/* Used when ipc_exchange_start gets 0 for timeout_ms / max_reply. */
#define IPC_EXCHANGE_DEFAULT_TIMEOUT_MS 5000
#define IPC_EXCHANGE_DEFAULT_MAX_REPLY  ((size_t)1024 * 1024)

/*
 * Starts an exchange on `loop` with the runtime at `ep` (used during this call only): the path
 * of its listening socket, or a runtime connected to dotmon's own socket in listen mode
 * (ipc_listen.h; its next idle connection is used). `req` (a complete IPC message) is copied. cb is
 * called exactly once, from the loop (never from inside this call), unless ipc_exchange_cancel is
 * called first. *out (may be NULL) lets the caller cancel; the handle becomes invalid when cb runs
 * or after cancel.
 *
 * Details of this implementation:
 * - Returns 0, or AGENT_E_INVAL (bad arguments, req shorter than a header, max_reply < 20),
 *   UV_ENAMETOOLONG (path does not fit sun_path, unless ep->root_pid is set), AGENT_E_CHANGED
 *   (node mode: the socket's file is no longer the one checked, or a symlink is on its path),
 *   UV_ENOENT or another negative errno (node mode: the socket cannot be opened beneath the
 *   process's root), UV_ECONNREFUSED (a listen-mode endpoint whose
 *   runtime is not connected, or whose listener has closed) or UV_ENOMEM; on error cb is never
 *   called.
 * - cb runs after the exchange's handles have closed, so the exchange holds no loop resources
 *   by then; res->payload/continuation stay valid until cb returns.
 * - res->status: 0 (reply received; see ok/hresult), AGENT_E_TIMEOUT, AGENT_E_CLOSED (EOF before
 *   the reply was complete), AGENT_E_PROTO (garbage, wrong magic, not a Server reply, Error
 *   without HRESULT, bad ProcessEnvironment reply), AGENT_E_TOOBIG (reply or continuation over
 *   max_reply; checked before allocating), or a libuv code (UV_ECONNREFUSED and UV_ENOENT mean
 *   nobody listens at path), AGENT_E_UNTRUSTED (the socket's listener runs as another user than
 *   ep->peer_uid; nothing was sent).
 * - res->hresult is the Error HRESULT, or for OK replies with a 4-byte payload that int32.
 * - The request is written with write(2): the process must ignore SIGPIPE.
 */
int ipc_exchange_start(uv_loop_t *loop, const struct ipc_endpoint *ep, const uint8_t *req,
                       size_t req_len, enum ipc_exchange_kind kind, uint64_t timeout_ms,
                       size_t max_reply, ipc_exchange_cb cb, void *ud, struct ipc_exchange **out);
/* Cancels: cb is not called; resources are released asynchronously. */
void ipc_exchange_cancel(struct ipc_exchange *x);

/* ---- command-level calls (ipc_command.c) ------------------------------------------------------
 * The request bytes, version fallbacks and reply parsing stay in ipc/: callers see results. */

/* Static name of a known HRESULT ("DS_IPC_E_UNKNOWN_COMMAND"), or "UNKNOWN"; never NULL. */
const char *ipc_hresult_text(uint32_t hresult);

/* GenerateCoreDump types (docs/ipc.md §4.4). */
enum ipc_dump_type {
    IPC_DUMP_TYPE_NORMAL = 1, /* dotnet-monitor's Mini */
    IPC_DUMP_TYPE_WITH_HEAP = 2,
    IPC_DUMP_TYPE_TRIAGE = 3,
    IPC_DUMP_TYPE_FULL = 4
};

struct ipc_dump;

struct ipc_dump_result {
    int status;       /* as ipc_result.status */
    int ok;           /* Server/OK: the runtime wrote the dump */
    uint32_t hresult; /* Error replies */
    int version;      /* the GenerateCoreDump version (3, 2 or 1) of the reply */
    /* The text of a GenerateCoreDump3 Error reply, UTF-8, line breaks turned into spaces and
     * trailing spaces trimmed; "" when there is none. Valid during the callback only. */
    const char *message;
};

typedef void (*ipc_dump_cb)(void *ud, const struct ipc_dump_result *res);
/* Asked before each step down after UNKNOWN_COMMAND; false ends with that reply instead. */
typedef bool (*ipc_dump_retry_cb)(void *ud, int next_version);

struct ipc_dump_params {
    const char *path; /* where the runtime writes the dump (as the target sees it); copied */
    enum ipc_dump_type type;
    uint32_t flags;          /* GenerateCoreDump2/3 flags; version 1 keeps only bit 0 */
    uint64_t timeout_ms;     /* each try's exchange (0 -> IPC_EXCHANGE_DEFAULT_TIMEOUT_MS) */
    size_t max_reply;        /* 0 -> IPC_EXCHANGE_DEFAULT_MAX_REPLY */
    ipc_dump_retry_cb retry; /* NULL: always step down */
};

/*
 * Sends GenerateCoreDump3 and, while the runtime answers UNKNOWN_COMMAND (and retry agrees), 2
 * then 1, each on a new connection of ep (copied). The request is sized to the path, on the heap.
 * Returns 0 (cb runs exactly once, from the loop, unless ipc_dump_cancel comes first), or the
 * error of ipc_exchange_start / of the builder (AGENT_E_INVAL for a bad type or path,
 * AGENT_E_TOOBIG) and cb never runs. If a later try cannot be started, cb gets the UNKNOWN_COMMAND
 * reply.
 */
int ipc_dump_request(uv_loop_t *loop, const struct ipc_endpoint *ep,
                     const struct ipc_dump_params *params, ipc_dump_cb cb, void *ud,
                     struct ipc_dump **out);
/* cb is not called; resources are released asynchronously. */
void ipc_dump_cancel(struct ipc_dump *d);

struct ipc_env;

/* As ipc_result: transport status, and the reply's kind and HRESULT. */
struct ipc_env_result {
    int status;
    int ok;
    uint32_t hresult;
    /* status 0 and ok: 0 when every entry was delivered, else why the block was rejected
     * (AGENT_E_TRUNC, AGENT_E_PROTO, AGENT_E_TOOBIG, UV_ENOMEM) or the entry callback's non-zero
     * return. */
    int block_status;
};

/*
 * One "NAME=value" entry of the environment, converted from UTF-16 (NUL-terminated; lengths exclude
 * the NUL). An entry without '=' has value "". Non-zero return stops the walk (block_status).
 */
typedef int (*ipc_env_var_cb)(void *ud, const char *name, size_t name_len, const char *value,
                              size_t value_len);
typedef void (*ipc_env_done_cb)(void *ud, const struct ipc_env_result *res);

/*
 * ProcessEnvironment (docs/ipc.md §4.3): the whole block (at most max_reply bytes, 0 -> the
 * exchange default) is validated before on_var sees its first entry, then on_var runs for each
 * entry in order and on_done once. Same return, callback and cancel contract as ipc_dump_request.
 */
int ipc_env_request(uv_loop_t *loop, const struct ipc_endpoint *ep, uint64_t timeout_ms,
                    size_t max_reply, ipc_env_var_cb on_var, ipc_env_done_cb on_done, void *ud,
                    struct ipc_env **out);
void ipc_env_cancel(struct ipc_env *e);

#endif
