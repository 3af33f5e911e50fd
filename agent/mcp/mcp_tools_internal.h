/* SPDX-License-Identifier: MIT */
#ifndef AGENT_MCP_TOOLS_INTERNAL_H
#define AGENT_MCP_TOOLS_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "buf.h"
#include "mcp_tools.h"
#include "membudget.h"

/*
 * What the tool files share (mcp_tools.c holds it): the table's entries, argument readers that
 * answer a tool error naming the argument and its bounds (as the routes' 400s do), the process
 * query, request targets, a JSON builder that remembers a failed allocation, the NDJSON line
 * splitter of the chunk tools, and the memo's heap snapshots (mcp_tools_heap.c).
 */

/* The tools, one table entry each (mcp_tools.c lists them in this order). */
extern const struct mcp_tool mcp__tool_list_processes;
extern const struct mcp_tool mcp__tool_process_info;
extern const struct mcp_tool mcp__tool_cpu_profile;
extern const struct mcp_tool mcp__tool_allocations;
extern const struct mcp_tool mcp__tool_exceptions;
extern const struct mcp_tool mcp__tool_contention;
extern const struct mcp_tool mcp__tool_gc_stats;
extern const struct mcp_tool mcp__tool_stacks;
extern const struct mcp_tool mcp__tool_recent_logs;
extern const struct mcp_tool mcp__tool_metrics_snapshot;
extern const struct mcp_tool mcp__tool_heap_summary;
extern const struct mcp_tool mcp__tool_trace_summary;
extern const struct mcp_tool mcp__tool_collection_rules;
extern const struct mcp_tool mcp__tool_dump;

/* ---- schema pieces (JSON text, concatenated at compile time) ---- */

/* The process selector's input properties, as the routes' query takes them. */
#define MCP__SEL_PROPS                                                                             \
    "\"pid\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":2147483647,"                          \
    "\"description\":\"The process id (list_processes). With none of pid, uid and name: the "      \
    "default process (the only one, or the one DefaultProcess:Filters picks).\"},"                 \
    "\"uid\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"                               \
    "\"description\":\"The runtime instance cookie (a GUID): the stable choice when several "      \
    "containers' apps are all pid 1.\"},"                                                          \
    "\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":256,"                             \
    "\"description\":\"The process name (several processes may share one: then pid or uid).\"}"

/* The selector's names, for mcp__args_check lists. */
#define MCP__SEL_NAMES "pid", "uid", "name"

/* ---- errors ---- */

/* A tool error: c->text is the message (replacing what it held). MCP_STEP_ERROR. */
enum mcp_step mcp__fail(struct mcp_tool_ctx *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* MCP_STEP_ERROR "out of memory". */
enum mcp_step mcp__oom(struct mcp_tool_ctx *c);

/* ---- arguments: 0, or -1 with the tool error in c->text ---- */

/* Every argument's name is one of names (NULL-terminated). */
int mcp__args_check(struct mcp_tool_ctx *c, const char *const *names);
/* An integer in [min, max]; def when absent. */
int mcp__arg_int(struct mcp_tool_ctx *c, const char *name, int64_t min, int64_t max, int64_t def,
                 int64_t *out);
/* A string of 1..max_len bytes; *out NULL when absent (an error when required). The string is the
 * argument's own (valid while c->args is). */
int mcp__arg_str(struct mcp_tool_ctx *c, const char *name, size_t max_len, bool required,
                 const char **out);
/* One of choices (compared ignoring case): *out its index, def when absent. */
int mcp__arg_choice(struct mcp_tool_ctx *c, const char *name, const char *const *choices, size_t n,
                    int def, int *out);
/* An array of 0..max_items strings of 1..max_len bytes; *out NULL when absent. */
int mcp__arg_str_array(struct mcp_tool_ctx *c, const char *name, size_t max_items, size_t max_len,
                       const cJSON **out);

/* The process selector of a call. */
struct mcp__sel {
    int64_t pid; /* 0 when not given */
    const char *uid;
    const char *name;
};
int mcp__sel_read(struct mcp_tool_ctx *c, struct mcp__sel *s);

/* ---- requests ---- */

/* Copies s into dst[cap] (a fetch's method, content_type, accept): 0, or AGENT_E_INVAL when it
 * does not fit (dst unchanged). */
int mcp__set(char *dst, size_t cap, const char *s);
/* Starts c->fetch: method ("GET"/"POST") and the path; the query follows with mcp__q*. */
int mcp__fetch_begin(struct mcp_tool_ctx *c, const char *method, const char *path);
/* Appends "?name=value" or "&name=value", value percent-encoded (RFC 3986 unreserved kept). */
int mcp__q(struct buf *t, const char *name, const char *value);
int mcp__q_int(struct buf *t, const char *name, int64_t v);
/* The selector's pid, uid and name, those given. */
int mcp__q_sel(struct buf *t, const struct mcp__sel *s);
/* Percent-encodes s (a path segment or a query value). */
int mcp__pct(struct buf *b, const char *s);
/* The fetch's body: j printed (unformatted), with Content-Type application/json. */
int mcp__fetch_json_body(struct mcp_tool_ctx *c, const cJSON *j);

/* The answer as JSON of the given cJSON type (cJSON_Object, cJSON_Array); NULL with the tool error
 * in c->text when it is cut or is not that. The caller frees it. */
cJSON *mcp__answer_json(struct mcp_tool_ctx *c, const struct mcp_answer *a, int type);

/* Members of a route's answer: a number (def when absent or not a number), a string (NULL). */
double mcp__jnum(const cJSON *o, const char *key, double def);
const char *mcp__jstr(const cJSON *o, const char *key);

/* ---- building structuredContent and the text ---- */

/* A builder: every add after a failed allocation does nothing, and finish says so. */
struct mcp__b {
    struct mcp_tool_ctx *c;
    bool oom;
};
/* A new object or array: in parent under key, appended to parent when key is NULL, a root when
 * parent is NULL. NULL on failure (adds to NULL do nothing). */
cJSON *mcp__obj(struct mcp__b *b, cJSON *parent, const char *key);
cJSON *mcp__arr(struct mcp__b *b, cJSON *parent, const char *key);
/* Members (key NULL: appended to an array). */
void mcp__num(struct mcp__b *b, cJSON *o, const char *key, double v);
/* s NULL: JSON null. */
void mcp__str(struct mcp__b *b, cJSON *o, const char *key, const char *s);
/* s[0..n) cut to max bytes on a UTF-8 boundary, with "…" when cut. */
void mcp__strn(struct mcp__b *b, cJSON *o, const char *key, const char *s, size_t n, size_t max);
void mcp__bool(struct mcp__b *b, cJSON *o, const char *key, bool v);
void mcp__null(struct mcp__b *b, cJSON *o, const char *key);
/* A copy of v (NULL: null). */
void mcp__dup(struct mcp__b *b, cJSON *o, const char *key, const cJSON *v);
/* Appends to the text (c->text). */
void mcp__say(struct mcp__b *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* MCP_STEP_DONE with root as structuredContent, or MCP_STEP_ERROR "out of memory" (root freed). */
enum mcp_step mcp__finish(struct mcp__b *b, cJSON *root);

/* How many bytes of s to print with "%.*s" to show at most max of them without splitting a UTF-8
 * sequence (the text must stay valid UTF-8). */
int mcp__cut(const char *s, size_t max);
/* Bytes for a reader: "512 B", "1.50 KB", "-9.10 GB" (decimal units, as dotnet-counters shows
 * them); out is returned. */
const char *mcp__human(char out[32], double v);

/* ---- NDJSON and JSON text sequences, split into lines as the bytes come ---- */

struct mcp__lines {
    struct buf line;   /* the line so far (at most cap bytes) */
    size_t cap;        /* the longest line given to on_line */
    bool skipping;     /* the current line is over cap: dropped up to its '\n' */
    uint64_t too_long; /* lines dropped for their length */
};
typedef int (*mcp__line_cb)(void *ud, const char *s, size_t n);

void mcp__lines_init(struct mcp__lines *l, size_t cap);
void mcp__lines_fini(struct mcp__lines *l);
/* Calls on_line with every complete line (without its '\n', a '\r' before it, or a leading 0x1E
 * record separator; empty lines skipped). Non-zero from on_line is returned at once; UV_ENOMEM. */
int mcp__lines_feed(struct mcp__lines *l, const void *data, size_t len, mcp__line_cb on_line,
                    void *ud);
/* The stream ended whole: a last line without '\n' is given too. */
int mcp__lines_end(struct mcp__lines *l, mcp__line_cb on_line, void *ud);

/* ---- the memo (mcp_tools.c; heap snapshots in mcp_tools_heap.c) ---- */

#define MCP__MEMO_PROCS    16    /* processes remembered */
#define MCP__MEMO_TYPES    10000 /* types per snapshot */
#define MCP__MEMO_NAME_MAX 1024  /* bytes of a type or module name kept */

struct mcp__snap_type {
    char *type;
    char *module; /* "" when not given */
    uint64_t count;
    uint64_t bytes;
};

struct mcp__snap {
    char uid[65];
    int64_t pid;
    double taken; /* the memo's clock, seconds */
    uint64_t objects;
    uint64_t heap_bytes;
    uint64_t type_count;          /* the route's typeCount (may exceed n: omitted types) */
    struct mcp__snap_type *types; /* sorted by type, then module */
    size_t n;
    size_t charged; /* bytes charged to the memo's share for this snapshot */
    uint64_t used;  /* the memo's tick when last read or written (least recently used goes) */
};

struct mcp_memo {
    struct mb_share share;
    struct mcp__snap *snaps[MCP__MEMO_PROCS];
    size_t nsnaps;
    uint64_t tick;
    uint64_t seq;          /* makes each dump tag unique */
    double (*clock)(void); /* monotonic seconds (tests set their own) */
};

/* The snapshot remembered for uid, or NULL. */
struct mcp__snap *mcp__memo_find(struct mcp_memo *m, const char *uid);
/* Forgets s (its bytes released). */
void mcp__memo_drop(struct mcp_memo *m, struct mcp__snap *s);
/* Charges n bytes, forgetting the least recently used snapshots (never keep) until it fits:
 * 0, or AGENT_E_BUDGET when it does not fit even alone. */
int mcp__memo_charge(struct mcp_memo *m, size_t n, const struct mcp__snap *keep);
/* Adds s (charged already) for its uid, forgetting the least recently used one when full. */
void mcp__memo_add(struct mcp_memo *m, struct mcp__snap *s);
/* Frees s and releases its bytes (it is not in the memo). */
void mcp__snap_free(struct mcp_memo *m, struct mcp__snap *s);

#endif
