/* SPDX-License-Identifier: MIT */
#ifndef COLLECT_OPERATIONS_H
#define COLLECT_OPERATIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

/*
 * dotnet-monitor's operations model (docs/api.md §5): every artifact request (a trace
 * today, dumps later) is an operation with a GUID id, a state, the process it targets and, when
 * finished, an error or a result. Limits are per artifact kind (3 traces at once by default: the
 * next request gets 429) and the history is bounded: when more than max_history operations have
 * finished, the oldest finished ones are forgotten (dotnet-monitor never forgets them).
 * Pure bookkeeping, no libuv: the owner of an operation drives it through op_set_state and
 * provides control hooks for DELETE.
 */

enum op_kind {
    OP_KIND_TRACE = 0,
    OP_KIND_DUMP = 1,
    OP_KIND_LIVEMETRICS = 2,
    OP_KIND_LOGS = 3,
    OP_KIND_GCDUMP = 4,
    OP_KIND_STACKS = 5,
    OP_KIND_EXCEPTIONS = 6,
    OP_KIND_COUNT = 7
};

/* The kind's name ("trace", "dump", "livemetrics", "logs", "gcdump", "stacks", "exceptions"). */
const char *op_kind_name(enum op_kind kind);

/* dotnet-monitor's default concurrency for livemetrics (RequestLimits). */
#define OP_LIVEMETRICS_LIMIT 3
/* and for logs (docs/api.md §4). */
#define OP_LOGS_LIMIT 3
/* and for gcdumps (RequestLimits:GCDump:MaxConcurrency). */
#define OP_GCDUMP_LIMIT 1
/* and for stacks (dotnet-monitor: one at a time, no setting). */
#define OP_STACKS_LIMIT 1
/* and for exceptions (dotnet-monitor: one at a time, no setting). */
#define OP_EXCEPTIONS_LIMIT 1

enum op_state { OP_STARTING = 0, OP_RUNNING, OP_STOPPING, OP_SUCCEEDED, OP_FAILED, OP_CANCELLED };

struct operation;

/* Control hooks, called by DELETE /operations/{id}. Both may be NULL (not stoppable). */
struct op_control {
    void (*stop)(void *ctx);   /* graceful stop (?stop=true): the artifact stays valid */
    void (*cancel)(void *ctx); /* cancel: the artifact may be unusable */
};

struct operation {
    char id[37];
    enum op_kind kind;
    enum op_state state;
    int64_t created_unix_ms;
    bool stoppable;
    uint64_t pid;
    char uid[37];
    char *name;
    char *tags;          /* comma-separated, or NULL */
    char *artifact_name; /* e.g. 20261121_231500_4242.nettrace */
    char *error_code;    /* set on failure */
    char *error_message;
    cJSON *extra;            /* kind-specific result fields shown in the status (owned), or NULL */
    char *egress_provider;   /* egressProvider's name, or NULL (streamed in the response) */
    char *resource_location; /* where the egressed artifact is (file path, URL), or NULL */
    cJSON *egress;           /* the upload's figures for the details (owned), or NULL */
    struct op_control control;
    void *ctx; /* owner's context for the hooks; cleared when the operation ends */
};

struct op_registry {
    struct operation **v; /* creation order */
    size_t n;
    size_t cap;
    size_t max_history;          /* finished operations kept */
    size_t limit[OP_KIND_COUNT]; /* concurrent (not finished) operations per kind */
};

void op_registry_init(struct op_registry *r, size_t max_history, size_t trace_limit,
                      size_t dump_limit);
void op_registry_fini(struct op_registry *r);

/* Operations of this kind that have not finished. */
size_t op_registry_active(const struct op_registry *r, enum op_kind kind);

/*
 * Creates an operation in OP_STARTING, or returns AGENT_E_TOOBIG when the kind's limit is reached
 * (the caller answers 429). Strings are copied. *out stays owned by the registry.
 */
int op_registry_add(struct op_registry *r, enum op_kind kind, uint64_t pid, const char *uid,
                    const char *name, const char *tags, struct operation **out);

struct operation *op_registry_find(const struct op_registry *r, const char *id);

static inline bool op_is_finished(const struct operation *op)
{
    return op->state >= OP_SUCCEEDED;
}

/*
 * Moves an operation to a new state. Entering a finished state clears control/ctx and prunes
 * the history. error_code/message (may be NULL) are copied for OP_FAILED.
 * After a finishing call the operation may already have been pruned: drop the pointer.
 */
void op_set_state(struct op_registry *r, struct operation *op, enum op_state state,
                  const char *error_code, const char *error_message);

/* Replaces the kind-specific result fields (takes extra, which may be NULL). */
void op_set_extra(struct operation *op, cJSON *extra);

const char *op_state_name(enum op_state s);

enum op_json {
    OP_JSON_SUMMARY, /* dotnet-monitor's OperationSummary (GET /operations) */
    OP_JSON_STATUS,  /* its OperationStatus (GET /operations/{id}): nothing else, as its schema */
    OP_JSON_DETAILS  /* the status plus dotmon's extras (GET /operations/{id}/details):
                        artifactName and the trace or dump results */
};

/* dotnet-monitor's artifact time stamp, UTC now as yyyyMMdd_HHmmss_fff (cap >= 20). */
void op_artifact_stamp(char *out, size_t cap);

/* JSON of one operation. Caller deletes. */
cJSON *op_to_json(const struct operation *op, enum op_json what);

/* True when op carries every tag of the comma-separated list (case-sensitive, like dotnet-monitor).
 */
bool op_has_tags(const struct operation *op, const char *tags);

/* A random (version 4) GUID string, lowercase, .NET layout. */
void op_new_guid(char out[37]);

#endif
