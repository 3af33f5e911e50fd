/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_CMD_H
#define AGENT_IPC_CMD_H

/*
 * Diagnostic IPC commands (docs/ipc.md §4): pure request builders and reply parsers on top of
 * ipc_codec.h. No libuv, no I/O, no allocation. Parsed strings are ipc_utf16 views into the
 * caller's bytes; convert them with ipc_utf16_to_utf8.
 *
 * Builders write one complete message at w->len (the header's size is filled in) and leave w
 * unchanged on failure: AGENT_E_NOSPACE (w too small), AGENT_E_TOOBIG (message over 64 KiB),
 * AGENT_E_INVAL (an argument the protocol or the chosen command version cannot express).
 * Parsers return 0, AGENT_E_TRUNC (input ends inside a field), AGENT_E_PROTO (malformed) or
 * AGENT_E_TOOBIG (an element count that cannot fit), and write out-params only on success.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_codec.h"

/* Command sets and ids (ipc.md §4.1). */
#define IPC_SET_DUMP      0x01
#define IPC_SET_EVENTPIPE 0x02
#define IPC_SET_PROFILER  0x03
#define IPC_SET_PROCESS   0x04
#define IPC_SET_SERVER    0xFF

#define IPC_EP_STOP_TRACING    0x01
#define IPC_EP_COLLECT_TRACING 0x02 /* + (version - 1) for CollectTracing2..6 */

#define IPC_DUMP_GENERATE 0x01 /* GenerateCoreDump; + (version - 1) for GenerateCoreDump2/3 */

/* Dump types (ipc.md §4.4). */
#define IPC_DUMP_NORMAL    1u
#define IPC_DUMP_WITH_HEAP 2u
#define IPC_DUMP_TRIAGE    3u
#define IPC_DUMP_FULL      4u

#define IPC_PROCESS_INFO           0x00
#define IPC_PROCESS_RESUME_RUNTIME 0x01
#define IPC_PROCESS_ENVIRONMENT    0x02
#define IPC_PROCESS_SET_ENV        0x03
#define IPC_PROCESS_INFO2          0x04
#define IPC_PROCESS_INFO3          0x08

#define IPC_SERVER_OK    0x00
#define IPC_SERVER_ERROR 0xFF

/* HRESULTs (ipc.md §3.4). */
#define IPC_HR_S_OK                    0x00000000u
#define IPC_HR_BAD_ENCODING            0x80131384u
#define IPC_HR_UNKNOWN_COMMAND         0x80131385u
#define IPC_HR_UNKNOWN_MAGIC           0x80131386u
#define IPC_HR_UNKNOWN_ERROR           0x80131387u
#define IPC_HR_NOTSUPPORTED            0x80131515u
#define IPC_HR_FAIL                    0x80004005u
#define IPC_HR_NOT_YET_AVAILABLE       0x8013135Bu
#define IPC_HR_RUNTIME_UNINITIALIZED   0x80131371u
#define IPC_HR_INVALIDARG              0x80070057u
#define IPC_HR_INSUFFICIENT_BUFFER     0x8007007Au
#define IPC_HR_ENVVAR_NOT_FOUND        0x800000CBu
#define IPC_HR_PROFILER_ALREADY_ACTIVE 0x8013136Au

/* The first .NET major with CollectTracing3 (requestStackwalk; added 2023-11, docs/ipc.md §4):
 * sessions that need no stacks ask for none from it on. */
#define IPC_NO_STACKWALK_MAJOR 9

/* The runtime major version from ProcessInfo2's clrProductVersion ("10.0.12" -> 10), 0 if none. */
int ipc_runtime_major(const char *clr_version);
/* Whether a runtime of that version can be asked for no stack walks (IPC_NO_STACKWALK_MAJOR). */
bool ipc_stackwalk_optional(const char *clr_version);

/* The rundown keyword of CollectTracing2/3's requestRundown=true (ipc.md §4.2, profiles.md §3). */
#define IPC_RUNDOWN_DEFAULT 0x80020139ull

/* Static name of a known HRESULT ("DS_IPC_E_UNKNOWN_COMMAND"), or "UNKNOWN". Never NULL. */
const char *ipc_hresult_name(uint32_t hr);

/* Formats a cookie as .NET prints a GUID (ipc.md §2.2): bytes 0-3, 4-5, 6-7 LE, lowercase. */
void ipc_guid_format(const uint8_t cookie[IPC_GUID_SIZE], char out[IPC_GUID_STR_SIZE]);

/*
 * Process name as dotnet-monitor shows it: the basename of the first whitespace-separated token
 * of a command line ("/x/y/TestApp arg" -> "TestApp"). A view into cmdline; may be empty.
 */
void ipc_cmdline_name(const char *cmdline, const char **name, size_t *len);

/* ---- builders ---------------------------------------------------------------------------- */

/* Any command with an empty payload. */
int ipc_cmd_empty(struct ipc_wr *w, uint8_t command_set, uint8_t command_id);
int ipc_cmd_process_info(struct ipc_wr *w);   /* 20 bytes */
int ipc_cmd_process_info2(struct ipc_wr *w);  /* 20 bytes */
int ipc_cmd_process_info3(struct ipc_wr *w);  /* 20 bytes */
int ipc_cmd_process_env(struct ipc_wr *w);    /* 20 bytes */
int ipc_cmd_resume_runtime(struct ipc_wr *w); /* 20 bytes */
/* SetEnvironmentVariable (ipc.md §4.3): string name, string value ("" is sent as a one-unit
 * string). On an error (AGENT_E_INVAL for an empty or NULL name, a NULL value or malformed UTF-8;
 * AGENT_E_NOSPACE) nothing is written. */
int ipc_cmd_set_env(struct ipc_wr *w, const char *name, const char *value);
/* StopTracing: uint64 session id (28 bytes). Send it on a new connection (deviations.md §1.10). */
int ipc_cmd_stop_tracing(struct ipc_wr *w, uint64_t session_id);
/*
 * GenerateCoreDump (version 1), 2 or 3 (ipc.md §4.4): the runtime runs createdump, which writes
 * `path` (as the target process sees it), and replies when it is done. type is IPC_DUMP_*; flags
 * are the v2/v3 bits (0x1 logging, 0x2 verbose, 0x4 crash report...), for v1 only 0x1 (diagnostics)
 * is meaningful. AGENT_E_INVAL for a bad version/type, an empty path or a message over the limit.
 */
int ipc_cmd_generate_dump(struct ipc_wr *w, int version, const char *path, uint32_t type,
                          uint32_t flags);

/* One EventPipe provider (ipc.md §4.2 provider_config / streaming_provider_config). */
struct ipc_provider {
    const char *name; /* non-empty UTF-8 */
    uint64_t keywords;
    uint32_t level;        /* 0 LogAlways .. 5 Verbose */
    const char *arguments; /* NULL (absent) or "k=v;k2=v2" */
    /*
     * CollectTracing5 event-id filter. The zero value (disable none) means "all events" and is
     * expressible by every version; anything else needs version 5.
     */
    bool filter_enable; /* true: only event_ids; false: all except event_ids */
    const uint32_t *event_ids;
    uint32_t event_id_count;
};

/* A streaming session. The zero value of every optional field is the runtime's default. */
struct ipc_collect_config {
    uint32_t buffer_mb;       /* circularBufferMB, > 0 */
    uint32_t format;          /* 1 = NetTrace (0 = legacy NetPerf) */
    uint64_t rundown_keyword; /* 0 = no rundown; IPC_RUNDOWN_DEFAULT = requestRundown true */
    bool disable_stackwalk;   /* requestStackwalk = false (needs version >= 3) */
    const struct ipc_provider *providers;
    size_t provider_count; /* 1..1000 */
    /*
     * Not encoded; for ipc_session: the rundown keyword is what the session is for, so a runtime
     * that knows no CollectTracing able to express it ends the session (AGENT_E_RUNTIME with
     * UNKNOWN_COMMAND) instead of being retried without the keyword.
     */
    bool keep_rundown;
};

/*
 * The oldest CollectTracing version (1..5) that can express cfg, as the official client picks it:
 * an event filter needs 5, a rundown keyword other than 0/default needs 4, disabling stack walks
 * needs 3, else 2 (version 1 always requests the default rundown). On UNKNOWN_COMMAND a caller may
 * only fall back to a version >= this one.
 */
int ipc_collect_min_version(const struct ipc_collect_config *cfg);

/*
 * CollectTracing (version 1), CollectTracing2..5 (version 2..5; version 5 as session type 0,
 * streaming). AGENT_E_INVAL if cfg is invalid (ipc.md §4.2 limits) or needs a newer version.
 */
int ipc_cmd_collect_tracing(struct ipc_wr *w, int version, const struct ipc_collect_config *cfg);

/*
 * The size of the message ipc_cmd_collect_tracing(version, cfg) writes, header included, also when
 * it is over IPC_MESSAGE_MAX (which the builder refuses with AGENT_E_TOOBIG). AGENT_E_INVAL as
 * for the builder (invalid cfg, malformed UTF-8, a version that cannot express cfg).
 */
int ipc_collect_encoded_size(int version, const struct ipc_collect_config *cfg, size_t *size);

/* Whether a NUL-terminated string can be sent as a wire string (well-formed UTF-8). */
bool ipc_string_encodable(const char *utf8);

/* ---- replies ----------------------------------------------------------------------------- */

/* What the caller expects from an OK reply; Error replies look the same for every command. */
enum ipc_reply_expect {
    IPC_EXPECT_HRESULT = 0, /* OK + int32 (most commands, ResumeRuntime): 4-byte payload */
    IPC_EXPECT_SESSION = 1, /* OK + uint64 session id (CollectTracing*, StopTracing) */
    IPC_EXPECT_PAYLOAD = 2  /* OK + structured payload (ProcessInfo*, ProcessEnvironment) */
};

struct ipc_reply {
    bool ok;                  /* Server/OK (true) or Server/Error (false) */
    uint32_t hresult;         /* Error, and OK with IPC_EXPECT_HRESULT */
    uint64_t session_id;      /* OK with IPC_EXPECT_SESSION */
    struct ipc_utf16 message; /* Error from GenerateCoreDump3: its text; else absent */
    const uint8_t *payload;   /* OK with IPC_EXPECT_PAYLOAD: the payload view */
    size_t payload_len;
};

/*
 * Parses any reply frame (ipc.md §3.3). AGENT_E_PROTO if the frame is not Server/OK or
 * Server/Error, or its payload does not have the expected size. An Error payload is an int32
 * HRESULT, optionally followed by one string (GenerateCoreDump3) that must span the rest of the
 * payload. Returns 0 for both OK and Error replies; check out->ok.
 */
int ipc_reply_parse(const struct ipc_frame *f, enum ipc_reply_expect expect, struct ipc_reply *out);

/* ProcessInfo / ProcessInfo2 / ProcessInfo3 OK payloads (ipc.md §4.3; cookie second:
 * deviations.md §1.3). */
struct ipc_process_info {
    uint32_t version; /* ProcessInfo3's version field; 0 for ProcessInfo/ProcessInfo2 */
    uint64_t pid;
    uint8_t cookie[IPC_GUID_SIZE];
    struct ipc_utf16 command_line;
    struct ipc_utf16 os;
    struct ipc_utf16 arch;
    struct ipc_utf16 entrypoint_assembly; /* absent for ProcessInfo */
    struct ipc_utf16 clr_version;         /* absent for ProcessInfo */
    struct ipc_utf16 runtime_identifier;  /* absent unless ProcessInfo3 version >= 1 */
};

/*
 * level is 1, 2 or 3 for the ProcessInfo command that produced the payload. ProcessInfo and
 * ProcessInfo2 payloads must end exactly after their last string; a ProcessInfo3 payload may
 * carry trailing fields from newer versions, which are ignored.
 */
int ipc_process_info_parse(const uint8_t *p, size_t n, int level, struct ipc_process_info *out);

/* ProcessEnvironment OK payload: exactly 6 bytes, uint32 nIncomingBytes + uint16 future. */
int ipc_env_reply_parse(const uint8_t *p, size_t n, uint32_t *incoming);

/*
 * Called per "NAME=value" entry, converted to UTF-8 (NUL-terminated, lengths exclude the NUL).
 * An entry without '=' has value ""; absent (count 0) strings are skipped. Non-zero return stops
 * the walk and is returned.
 */
typedef int (*ipc_env_entry_cb)(void *ud, const char *name, size_t name_len, const char *value,
                                size_t value_len);

/*
 * Walks a ProcessEnvironment continuation (uint32 count, then count strings), exactly n bytes.
 * The whole continuation is validated before the first callback, so cb never sees a prefix of a
 * corrupt list. scratch holds one converted entry: 3 * the longest entry's units + 1 always
 * suffices (AGENT_E_NOSPACE otherwise).
 */
int ipc_env_parse(const uint8_t *p, size_t n, char *scratch, size_t scratch_cap,
                  ipc_env_entry_cb cb, void *ud);

/* The 34-byte reverse-connect advertise message (ipc.md §2.2). */
#define IPC_ADVERTISE_SIZE 34
int ipc_advertise_parse(const uint8_t *p, size_t n, uint8_t cookie[IPC_GUID_SIZE], uint64_t *pid);

#endif
