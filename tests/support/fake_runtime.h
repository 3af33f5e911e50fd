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
 *
 * EventPipe (docs/ipc.md §4.2, §5): CollectTracing (1) .. CollectTracing5 get OK + a 64-bit
 * session id, written in the same write as a valid nettrace preamble (nettrace.md §2.1-2.2:
 * "Nettrace", int32 20, "!FastSerialization.1", the 70-byte Trace object), then filler EventBlocks
 * with no events (their extra header bytes carry a position-dependent pattern, so they are valid
 * nettrace and any loss or reordering shows). Each stream write is issued only after the previous
 * one completed, like the runtime's blocking writer: a client that stops reading stalls the fake
 * once the socket buffer is full. StopTracing (on another connection) for a streaming id makes the
 * fake write the end tag 0x01, close the stream, and only then answer OK + id (ipc.md §5.3); for
 * any other id it answers OK + id at once. A client that closes the stream ends its session at once
 * (the runtime's next write fails, ipc.md §5.4); with reuse_ids the next session gets the freed id,
 * as the runtime's ids are addresses (ipc.md §5.1).
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

/* How CollectTracing and StopTracing are answered. */
enum fake_trace_fault {
    FAKE_TRACE_OK = 0, /* reply OK + id, stream, end on StopTracing */
    FAKE_TRACE_SILENT, /* read CollectTracing, never reply (the connection stays open) */
    FAKE_TRACE_ERROR,  /* reply Error with error_hresult */
    FAKE_TRACE_DIE,    /* once die_after stream bytes are written, die like fake_runtime_kill */
    FAKE_TRACE_NO_END  /* StopTracing is counted but never acted on: no end, no reply */
};

struct fake_trace_config {
    unsigned unknown_versions; /* bit v (1 << v, v = 1..5): CollectTracing v is UNKNOWN_COMMAND */
    enum fake_trace_fault fault;
    uint32_t error_hresult;  /* FAKE_TRACE_ERROR */
    uint64_t filler_bytes;   /* filler after the preamble (whole blocks); UINT64_MAX: until stop */
    size_t chunk_bytes;      /* size of one filler block = one write (0: 4096, min 64) */
    unsigned interval_ms;    /* pause after each stream write (0: next write when one completes) */
    unsigned reply_delay_ms; /* wait before replying to CollectTracing */
    uint64_t die_after;      /* FAKE_TRACE_DIE: stream bytes (preamble included) before dying */
    bool drip;               /* the reply, preamble and blocks go out in writes of 1..7 bytes */
    unsigned stop_delay_ms;  /* act on StopTracing this much later (a busy server thread) */
    bool reuse_ids;          /* a new session takes the id of the session that ended last */
    /*
     * Instead of filler: the stream's content after the preamble, asked for one piece at a time
     * (when the previous one is written) until StopTracing. gen appends whole nettrace objects
     * (blocks) for session index sess at absolute stream offset off (the first call has the
     * preamble's end) to *out, a malloc'd buffer of *len bytes (the fake frees it); *len 0: idle
     * until StopTracing. gen_ud is passed along.
     */
    void (*gen)(void *gen_ud, unsigned sess, uint64_t off, uint8_t **out, size_t *len);
    void *gen_ud;
    /*
     * When set: the whole stream after the reply (preamble included) is what source writes, in
     * place of the fake's preamble and filler blocks: called whenever the previous bytes are out,
     * with off the stream bytes it gave this session so far (0: a new session), it writes at most
     * cap bytes to buf and returns how many (0: nothing more until StopTracing).
     */
    size_t (*source)(void *ud, uint64_t off, uint8_t *buf, size_t cap);
    void *source_ud;
};

/*
 * How GenerateCoreDump (command set 0x01, docs/ipc.md §4.4; ids 0x01..0x03 = versions 1..3) is
 * answered. The zero value keeps the old behaviour: every version is UNKNOWN_COMMAND.
 */
enum fake_dump_fault {
    FAKE_DUMP_UNSUPPORTED = 0, /* every version: UNKNOWN_COMMAND */
    FAKE_DUMP_OK,     /* create the requested path (O_EXCL, 0600) with file_bytes of a minimal ELF
                         core (ELF64 header, one PT_NOTE segment covering the rest, a
                         position-dependent pattern), then reply OK; a path that cannot be created
                         is answered Error E_FAIL (v3: with a createdump-like message) */
    FAKE_DUMP_SILENT, /* read the request, never reply (the connection stays open) */
    FAKE_DUMP_ERROR,  /* reply Error with error_hresult; v3 appends error_message */
    FAKE_DUMP_FIFO    /* an attacker: put a FIFO (mkfifo, 0666) at the requested path, reply OK;
                         a reader that opens it without O_NONBLOCK blocks until a writer comes */
};

struct fake_dump_config {
    enum fake_dump_fault fault;
    unsigned unknown_versions; /* bit v (1 << v, v = 1..3): GenerateCoreDump v is UNKNOWN_COMMAND */
    uint64_t file_bytes;       /* FAKE_DUMP_OK: file size (at least 120: ELF header + phdr) */
    unsigned reply_delay_ms;   /* FAKE_DUMP_OK: create the file and reply only after this long */
    uint32_t error_hresult;    /* FAKE_DUMP_ERROR */
    const char *error_message; /* FAKE_DUMP_ERROR, v3 only; NULL encodes an absent string */
};

/*
 * Faults injected into the answer to one command (set by fake_runtime_set_fault, so a test can
 * switch them on a runtime that is already listed). A fault matches requests of command_set with
 * command_id (FAKE_ANY_ID: every id of the set); the first `after` matching requests are answered
 * normally, then `times` of them (0: all) get the fault, and the rest are answered normally again.
 * The "normal reply" is what the fake would have sent otherwise: ProcessInfo 1..3,
 * ProcessEnvironment (header + continuation), CollectTracing OK + id (no session is created, no
 * stream follows), GenerateCoreDump OK (no file is written), StopTracing OK + id (the fake first
 * acts on the stop as usual: the stream gets its end tag and closes, then the faulty reply goes
 * out on the StopTracing connection).
 */
enum fake_fault_kind {
    FAKE_FAULT_NONE = 0,
    FAKE_FAULT_BAD_MAGIC,   /* the normal reply with "DOTNET_IPX_V1" as its magic, then close */
    FAKE_FAULT_OVERSIZED,   /* a Server/OK header whose size field says `size` (0: 0xFFFF), the
                               first payload bytes of the normal reply (at most 10), then silence
                               with the connection open */
    FAKE_FAULT_TRUNCATED,   /* the first half of the normal reply, then close */
    FAKE_FAULT_HEADER_ONLY, /* the normal reply's 20-byte header, then silence (connection open) */
    FAKE_FAULT_DRIP,        /* the normal reply one byte every drip_ms (then zero bytes at the
                               same pace) for as long as the client keeps the connection */
    FAKE_FAULT_MID_STREAM,  /* CollectTracing only: OK + preamble + filler as usual, but the
                               stream connection is closed (no end tag) once stream_bytes nettrace
                               bytes have been written; the runtime itself stays up */
    FAKE_FAULT_NO_READ      /* whatever the command: new connections are accepted and never read
                               from or answered (command_set/command_id are not looked at; `after`
                               counts connections); they stay open until the client closes
                               them or the fake is closed */
};

#define FAKE_ANY_ID 0xFF

struct fake_fault {
    enum fake_fault_kind kind;
    uint8_t command_set;   /* 0x01 dump, 0x02 EventPipe, 0x04 process */
    uint8_t command_id;    /* FAKE_ANY_ID: any */
    unsigned after;        /* matching requests (NO_READ: connections) answered normally first */
    uint16_t size;         /* FAKE_FAULT_OVERSIZED: the size field (0: 0xFFFF) */
    unsigned drip_ms;      /* FAKE_FAULT_DRIP: pause between bytes (0: 100) */
    uint64_t stream_bytes; /* FAKE_FAULT_MID_STREAM: nettrace bytes before the cut (0: 65536) */
    unsigned times;        /* requests (NO_READ: connections) faulted after `after`; 0: all */
};

#define FAKE_MAX_FAULTS 4

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
    /* The first early_answers ProcessInfo replies carry early_command_line instead (a runtime
     * early in its start-up knows only its host's path, dotnet/runtime#59439). */
    const char *early_command_line;
    unsigned early_answers;
    struct fake_trace_config trace;
    struct fake_dump_config dump;
    struct fake_fault faults[FAKE_MAX_FAULTS]; /* initial faults (fake_runtime_set_fault) */
};

struct fake_runtime;

/*
 * Zeroes cfg and fills in a plausible .NET 10 runtime on Linux x64 with this pid, key, command
 * line and entry-point assembly (strings borrowed), the cookie bytes all `cookie_byte`.
 */
void fake_runtime_config_init(struct fake_runtime_config *cfg, uint64_t pid, uint64_t key,
                              uint8_t cookie_byte, const char *command_line, const char *assembly);

/* Binds and listens on the loop. Returns 0 or a negative errno/libuv code. */
int fake_runtime_start(uv_loop_t *loop, const char *dir, const struct fake_runtime_config *cfg,
                       struct fake_runtime **out);
const char *fake_runtime_path(const struct fake_runtime *f);
/* Requests received with this command set/id (complete requests only). */
unsigned fake_runtime_requests(const struct fake_runtime *f, uint8_t command_set,
                               uint8_t command_id);
/* Connections accepted so far. */
unsigned fake_runtime_connections(const struct fake_runtime *f);
/* What the fake knows about one session it created (indexes in creation order). */
struct fake_session_info {
    uint64_t id;
    int version;           /* CollectTracing version that created it */
    uint64_t stream_bytes; /* nettrace bytes whose write completed (the IPC reply excluded) */
    uint64_t hash;         /* fake_fnv1a over those bytes, in order */
    unsigned stops;        /* StopTracing requests naming this id */
    bool end_tag;          /* the end tag 0x01 was written (after a StopTracing) */
    bool stream_open;      /* the stream connection is still open */
    bool client_closed;    /* the client closed the stream before the end tag */
    /* The client still held the stream when the first StopTracing naming this id came. */
    bool stream_open_at_stop;
};

#define FAKE_MAX_SESSIONS 256 /* more → Error DS_IPC_E_FAIL, like the runtime's 64-session cap */

/* Sessions created so far (CollectTracing answered OK). */
unsigned fake_runtime_sessions(const struct fake_runtime *f);
/* 0 and *out, or -ENOENT for an index not created yet. */
int fake_runtime_session(const struct fake_runtime *f, unsigned idx, struct fake_session_info *out);
/* Stream bytes written so far over all sessions (grows while someone reads). */
uint64_t fake_runtime_stream_bytes(const struct fake_runtime *f);
/*
 * The last complete EventPipe request (command set 0x02) with this command id, header included,
 * or NULL if none came. Valid until the next such request or fake_runtime_close.
 */
const uint8_t *fake_runtime_last_request(const struct fake_runtime *f, uint8_t command_id,
                                         size_t *len);

/* The GenerateCoreDump requests the fake acted on (versions not marked unknown). */
struct fake_dump_info {
    unsigned requests; /* parsed dump requests answered (or left unanswered) per the fault */
    int version;       /* of the last one: 1..3 */
    char path[4096];   /* its dumpName (ASCII) */
    uint32_t type;     /* its dumpType */
    uint32_t flags;    /* its flags */
    unsigned files;    /* files created (FAKE_DUMP_OK) */
    uint64_t hash;     /* fake_fnv1a over the bytes of the last file created */
};

/* Copies what the fake knows about dump requests into *out. */
void fake_runtime_dump_info(const struct fake_runtime *f, struct fake_dump_info *out);

/* FNV-1a 64, the hash of fake_session_info.hash: fake_fnv1a(FAKE_FNV_INIT, p, n), chainable. */
#define FAKE_FNV_INIT 0xcbf29ce484222325ull
uint64_t fake_fnv1a(uint64_t h, const uint8_t *p, size_t n);

/*
 * Reverse mode (docs/ipc.md §2.1-2.2): instead of listening, the fake connects to `path` (a tool's
 * listening socket, DOTNET_DiagnosticPorts), writes the 34-byte ADVR_V1 advertise (cfg->cookie,
 * cfg->pid) and waits for one command on that connection, like a runtime's connect port. It keeps
 * exactly one such idle connection: it reconnects as soon as a command has consumed the current
 * one, except after GenerateCoreDump and StopTracing, which occupy the runtime's single server
 * thread: then only once that command's connection has closed. When the tool closes the idle
 * connection, or a connect fails, it reconnects after 10 ms (x1.25 per failure, at most 500 ms),
 * as the runtime does. fake_runtime_kill makes it vanish (every connection closes, no reconnect).
 */
int fake_runtime_start_reverse(uv_loop_t *loop, const char *path,
                               const struct fake_runtime_config *cfg, struct fake_runtime **out);
/* Reverse mode: advertises written so far (one per successful connect). */
unsigned fake_runtime_advertises(const struct fake_runtime *f);
/*
 * The i-th complete request received (any mode, first FAKE_MAX_ORDER kept), as
 * command_set << 8 | command_id; -1 past the end.
 */
#define FAKE_MAX_ORDER 64
int fake_runtime_request_at(const struct fake_runtime *f, unsigned i);

/*
 * Sets fault slot `slot` (< FAKE_MAX_FAULTS; fault NULL or kind NONE clears it; its `after`
 * counter starts over). Loop thread only. Connections already open keep what they had.
 */
int fake_runtime_set_fault(struct fake_runtime *f, unsigned slot, const struct fake_fault *fault);
/* Requests (NO_READ: connections) a fault was applied to so far, over all slots. */
unsigned fake_runtime_faults_applied(const struct fake_runtime *f);
/* Connections of the fake that are open now (streams, silent and never-read ones included). */
unsigned fake_runtime_open_connections(const struct fake_runtime *f);

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
