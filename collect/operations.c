/* SPDX-License-Identifier: MIT */
#include "operations.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include <uv.h>

#include "err.h"
#include "hex.h"

void op_registry_init(struct op_registry *r, size_t max_history, size_t trace_limit,
                      size_t dump_limit)
{
    memset(r, 0, sizeof(*r));
    r->max_history = max_history;
    r->limit[OP_KIND_TRACE] = trace_limit;
    r->limit[OP_KIND_DUMP] = dump_limit;
    r->limit[OP_KIND_LIVEMETRICS] = OP_LIVEMETRICS_LIMIT;
    r->limit[OP_KIND_LOGS] = OP_LOGS_LIMIT;
    r->limit[OP_KIND_GCDUMP] = OP_GCDUMP_LIMIT;
    r->limit[OP_KIND_STACKS] = OP_STACKS_LIMIT;
    r->limit[OP_KIND_EXCEPTIONS] = OP_EXCEPTIONS_LIMIT;
}

const char *op_kind_name(enum op_kind kind)
{
    static const char *const kinds[OP_KIND_COUNT] = {"trace",  "dump",   "livemetrics", "logs",
                                                     "gcdump", "stacks", "exceptions"};
    return (unsigned)kind < OP_KIND_COUNT ? kinds[kind] : "?";
}

static void op_free(struct operation *op)
{
    free(op->name);
    free(op->tags);
    free(op->artifact_name);
    free(op->error_code);
    free(op->error_message);
    cJSON_Delete(op->extra);
    free(op->egress_provider);
    free(op->resource_location);
    cJSON_Delete(op->egress);
    free(op);
}

void op_registry_fini(struct op_registry *r)
{
    for (size_t i = 0; i < r->n; i++) {
        op_free(r->v[i]);
    }
    free(r->v);
    memset(r, 0, sizeof(*r));
}

size_t op_registry_active(const struct op_registry *r, enum op_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n; i++) {
        if (r->v[i]->kind == kind && !op_is_finished(r->v[i])) {
            n++;
        }
    }
    return n;
}

/* A random (version 4) GUID string. uv_random without a loop is synchronous. */
void op_new_guid(char out[37])
{
    uint8_t b[16];
    if (uv_random(NULL, NULL, b, sizeof(b), 0, NULL) != 0) {
        /* getrandom failing is near impossible; fall back to time-based bits rather than fail. */
        struct timeval tv;
        gettimeofday(&tv, NULL);
        uint64_t t = (uint64_t)tv.tv_sec * 1000000u + (uint64_t)tv.tv_usec;
        for (size_t i = 0; i < sizeof(b); i++) {
            b[i] = (uint8_t)(t >> ((i % 8) * 8)) ^ (uint8_t)(i * 37u);
        }
    }
    b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
    b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
    hex_guid_bytes(b, out);
}

static char *dup_or_null(const char *s)
{
    return (s != NULL && *s != '\0') ? strdup(s) : NULL;
}

int op_registry_add(struct op_registry *r, enum op_kind kind, uint64_t pid, const char *uid,
                    const char *name, const char *tags, struct operation **out)
{
    if (r->limit[kind] > 0 && op_registry_active(r, kind) >= r->limit[kind]) {
        return AGENT_E_TOOBIG;
    }
    if (r->n == r->cap) {
        size_t ncap = r->cap ? r->cap * 2 : 16;
        /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
        struct operation **nv = realloc(r->v, ncap * sizeof(*nv));
        if (nv == NULL) {
            return -ENOMEM;
        }
        r->v = nv;
        r->cap = ncap;
    }
    struct operation *op = calloc(1, sizeof(*op));
    if (op == NULL) {
        return -ENOMEM;
    }
    op_new_guid(op->id);
    op->kind = kind;
    op->state = OP_STARTING;
    struct timeval tv;
    gettimeofday(&tv, NULL);
    op->created_unix_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    op->pid = pid;
    snprintf(op->uid, sizeof(op->uid), "%s", uid ? uid : "");
    op->name = dup_or_null(name);
    op->tags = dup_or_null(tags);
    if ((name && *name && op->name == NULL) || (tags && *tags && op->tags == NULL)) {
        op_free(op);
        return -ENOMEM;
    }
    r->v[r->n++] = op;
    *out = op;
    return 0;
}

struct operation *op_registry_find(const struct op_registry *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++) {
        if (strcasecmp(r->v[i]->id, id) == 0) {
            return r->v[i];
        }
    }
    return NULL;
}

/* Forgets the oldest finished operations beyond max_history. */
static void prune(struct op_registry *r)
{
    size_t finished = 0;
    for (size_t i = 0; i < r->n; i++) {
        finished += op_is_finished(r->v[i]);
    }
    size_t i = 0;
    while (finished > r->max_history && i < r->n) {
        if (op_is_finished(r->v[i])) {
            op_free(r->v[i]);
            /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
            memmove(&r->v[i], &r->v[i + 1], (r->n - i - 1) * sizeof(r->v[0]));
            r->n--;
            finished--;
        } else {
            i++;
        }
    }
}

void op_set_state(struct op_registry *r, struct operation *op, enum op_state state,
                  const char *error_code, const char *error_message)
{
    if (op_is_finished(op)) {
        return; /* final states are final */
    }
    op->state = state;
    if (state == OP_FAILED) {
        free(op->error_code);
        free(op->error_message);
        op->error_code = dup_or_null(error_code);
        op->error_message = dup_or_null(error_message);
    }
    if (op_is_finished(op)) {
        op->control.stop = NULL;
        op->control.cancel = NULL;
        op->ctx = NULL;
        op->stoppable = false;
        prune(r);
    }
}

void op_set_extra(struct operation *op, cJSON *extra)
{
    cJSON_Delete(op->extra);
    op->extra = extra;
}

const char *op_state_name(enum op_state s)
{
    static const char *const names[] = {"Starting",  "Running", "Stopping",
                                        "Succeeded", "Failed",  "Cancelled"};
    return (size_t)s < sizeof(names) / sizeof(names[0]) ? names[s] : "Unknown";
}

bool op_has_tags(const struct operation *op, const char *tags)
{
    const char *p = tags;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0) {
            bool found = false;
            const char *q = op->tags;
            while (q != NULL && *q != '\0' && !found) {
                const char *qend = strchr(q, ',');
                size_t qlen = qend ? (size_t)(qend - q) : strlen(q);
                found = qlen == len && memcmp(q, p, len) == 0;
                q = qend ? qend + 1 : NULL;
            }
            if (!found) {
                return false;
            }
        }
        p = end ? end + 1 : NULL;
    }
    return true;
}

void op_artifact_stamp(char *out, size_t cap)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    time_t secs = now.tv_sec;
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, cap, "%Y%m%d_%H%M%S", &tm);
    snprintf(out + n, cap - n, "_%03ld", now.tv_nsec / 1000000L);
}

cJSON *op_to_json(const struct operation *op, enum op_json what)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return NULL;
    }
    char ts[40];
    time_t secs = (time_t)(op->created_unix_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(op->created_unix_ms % 1000));

    cJSON_AddStringToObject(o, "operationId", op->id);
    cJSON_AddStringToObject(o, "createdDateTime", ts);
    cJSON_AddStringToObject(o, "status", op_state_name(op->state));
    if (op->egress_provider != NULL) {
        cJSON_AddStringToObject(o, "egressProviderName", op->egress_provider);
    } else {
        cJSON_AddNullToObject(o, "egressProviderName");
    }
    cJSON_AddBoolToObject(o, "isStoppable", op->stoppable);
    cJSON *proc = cJSON_AddObjectToObject(o, "process");
    if (proc != NULL) {
        cJSON_AddNumberToObject(proc, "pid", (double)op->pid);
        cJSON_AddStringToObject(proc, "uid", op->uid);
        cJSON_AddStringToObject(proc, "name", op->name ? op->name : "");
    }
    cJSON *tags = cJSON_AddArrayToObject(o, "tags");
    for (const char *p = op->tags; tags != NULL && p != NULL && *p != '\0';) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char *t = strndup(p, len);
        bool seen = false; /* the schema says uniqueItems */
        for (const cJSON *e = tags->child; t != NULL && e != NULL && !seen; e = e->next) {
            seen = strcmp(e->valuestring, t) == 0;
        }
        if (t != NULL && len > 0 && !seen) {
            cJSON_AddItemToArray(tags, cJSON_CreateString(t));
        }
        free(t);
        p = end ? end + 1 : NULL;
    }
    if (what != OP_JSON_SUMMARY) {
        /* HTTP-streamed artifacts have no resource location (nothing was egressed). */
        if (op->resource_location != NULL) {
            cJSON_AddStringToObject(o, "resourceLocation", op->resource_location);
        } else {
            cJSON_AddNullToObject(o, "resourceLocation");
        }
        if (op->state == OP_FAILED) {
            cJSON *err = cJSON_AddObjectToObject(o, "error");
            if (err != NULL) {
                cJSON_AddStringToObject(err, "code", op->error_code ? op->error_code : "Failed");
                cJSON_AddStringToObject(err, "message", op->error_message ? op->error_message : "");
            }
        } else {
            cJSON_AddNullToObject(o, "error");
        }
    }
    if (what == OP_JSON_DETAILS) {
        if (op->artifact_name != NULL) {
            cJSON_AddStringToObject(o, "artifactName", op->artifact_name);
        }
        if (op->extra != NULL) {
            cJSON_AddItemToObject(o, op_kind_name(op->kind), cJSON_Duplicate(op->extra, 1));
        }
        if (op->egress != NULL) {
            cJSON_AddItemToObject(o, "egress", cJSON_Duplicate(op->egress, 1));
        }
    }
    return o;
}
