/* SPDX-License-Identifier: MIT */
#ifndef AGENT_MCP_TOOLS_H
#define AGENT_MCP_TOOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "buf.h"

struct config;

/*
 * The MCP endpoint's tools (docs/mcp.md), each a short program over dotmon's own REST routes.
 *
 * mcp.c runs a call: step(ctx, NULL) first; while the step answers MCP_STEP_FETCH, mcp.c makes
 * ctx->fetch as a local request (http_local_new) to the REST handler, then calls step(ctx, &answer)
 * with its answer; MCP_STEP_DONE ends the call with ctx->structured and ctx->text, MCP_STEP_ERROR
 * with ctx->text as a tool error (isError: the agent reads it and may try again). A tool never
 * touches a runtime, a file or the network itself: the routes do, with their own validation,
 * admission (429), limits, problem+json and cancellation. Everything runs on the loop.
 *
 * An answer with status >= 400 never reaches the tool unless its fetch set accept_errors: mcp.c
 * ends the call as a tool error with the problem's status and detail.
 */

/* One REST request a tool wants made (reset by mcp.c before each step). */
struct mcp_fetch {
    char method[8];        /* "GET" (the default when left empty) or "POST" */
    struct buf target;     /* path and ?query, percent-encoded, as on the wire */
    struct buf body;       /* POST's body, or empty */
    char content_type[64]; /* the body's, or "" */
    char accept[64];       /* the Accept header, or "" */
    /* The answer's body is kept up to this many bytes (0: MCP_FETCH_DEFAULT_MAX); past it the
     * request is cancelled and the answer is given as cut (complete false). Ignored with chunk. */
    size_t max_bytes;
    /* How long the route is expected to run, in seconds (its durationSeconds): progress
     * notifications count to it, and the call's deadline is this plus Timeouts:McpCallMs. */
    uint32_t seconds;
    bool accept_errors; /* give answers >= 400 to the tool as well */
};

#define MCP_FETCH_DEFAULT_MAX ((size_t)4 * 1024 * 1024)

/* The answer of one fetch. */
struct mcp_answer {
    int status;               /* the route's HTTP status */
    const char *content_type; /* "" when none */
    const char *body;         /* the kept bytes, NUL-terminated (not kept with a chunk tool) */
    size_t len;               /* bytes at body (the NUL not counted) */
    uint64_t total;           /* every body byte the route sent */
    bool complete;            /* false: cut (the route aborted, or max_bytes was reached) */
};

enum mcp_step { MCP_STEP_FETCH = 0, MCP_STEP_DONE, MCP_STEP_ERROR };

struct mcp_memo;

/* A call's state, owned by mcp.c; the tool fills the out fields. */
struct mcp_tool_ctx {
    /* in */
    const cJSON *args;        /* the call's arguments: an object (empty when none were given) */
    const struct config *cfg; /* dotmon's settings */
    struct mcp_memo *memo;    /* what tools remember between calls (heap_summary's snapshots) */
    unsigned step;            /* 0 for the first step, +1 per answer */
    /* out */
    struct mcp_fetch fetch; /* MCP_STEP_FETCH: the request to make */
    cJSON *structured;      /* MCP_STEP_DONE: structuredContent (mcp.c takes and frees it) */
    struct buf text;        /* MCP_STEP_DONE: the text rendering; MCP_STEP_ERROR: the message */
    void *state;            /* the tool's own, freed by its fini */
};

/* Hints for clients (MCP ToolAnnotations). */
struct mcp_tool_hints {
    bool read_only;   /* readOnlyHint */
    bool destructive; /* destructiveHint */
    bool idempotent;  /* idempotentHint */
};

struct mcp_tool {
    const char *name;          /* "cpu_profile" */
    const char *title;         /* "CPU profile" */
    const char *description;   /* what it answers, what it costs the app, its side effects */
    const char *input_schema;  /* JSON Schema (an object schema), as JSON text */
    const char *output_schema; /* JSON Schema of structuredContent, as JSON text */
    struct mcp_tool_hints hints;
    /* Off unless Mcp:Tools:<name>:Enabled is true (tools that write a file or pause the app
     * longer than a GC); every other tool is on unless that setting is false. */
    bool opt_in;
    /* One step (ans NULL for the first). Checks the arguments at step 0 (a bad one: MCP_STEP_ERROR
     * naming it, as the routes' 400s do). */
    enum mcp_step (*step)(struct mcp_tool_ctx *c, const struct mcp_answer *ans);
    /* Body bytes as they come, instead of keeping them (a stream reduced on the fly: a trace's
     * NDJSON, log records); NULL to keep the body. Non-zero stops the request (cut, the answer's
     * complete false). */
    int (*chunk)(struct mcp_tool_ctx *c, const void *data, size_t len);
    /* Frees c->state (NULL is fine); may be NULL. */
    void (*fini)(struct mcp_tool_ctx *c);
};

/* The tools, in the order tools/list gives them. */
const struct mcp_tool *const *mcp_tools(size_t *n);
const struct mcp_tool *mcp_tool_find(const char *name);

/* What tools remember between calls, bounded in bytes and charged to the memory budget. */
int mcp_memo_new(struct mcp_memo **out);
void mcp_memo_free(struct mcp_memo *m);
/* Bytes held (for /info?extras=true). */
size_t mcp_memo_bytes(const struct mcp_memo *m);

#endif
