/* SPDX-License-Identifier: MIT */
/*
 * heap_summary: a GC heap snapshot reduced to its top types (GET /gcdump?format=summary, the
 * summary form of docs/routes.md "GC heap snapshots"), and what grew since the previous call for
 * the same process: the memo keeps each process's last summary (by uid: a restarted app is
 * another process), at most MCP__MEMO_PROCS of them with MCP__MEMO_TYPES types each, every byte
 * charged to the memory budget (the memo's share; the least recently used goes first).
 */
#include "mcp_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "mcp_tools_internal.h"
#include "utf8.h"

#define HEAP_TOP_MAX   100
#define HEAP_TOP_DEF   20
#define HEAP_ASK_TYPES 10000                      /* types asked of the route, and remembered */
#define HEAP_BODY_MAX  ((size_t)16 * 1024 * 1024) /* 10000 types of long generic names */

struct heap_state {
    char uid[65];
    double pid;
    int64_t top;
};

static void heap_fini(struct mcp_tool_ctx *c)
{
    free(c->state);
    c->state = NULL;
}

/* A type as the summary names it: its name and its module's file name (a path's last part). */
struct row {
    const char *type;
    const char *module;
    uint64_t count;
    uint64_t bytes;
};

static struct row row_of(const cJSON *t)
{
    const char *type = mcp__jstr(t, "type");
    const char *module = mcp__jstr(t, "module");
    if (module != NULL && strrchr(module, '/') != NULL) {
        module = strrchr(module, '/') + 1;
    }
    double count = mcp__jnum(t, "count", 0);
    double bytes = mcp__jnum(t, "bytes", 0);
    return (struct row){type != NULL ? type : "?", module != NULL ? module : "",
                        count > 0 ? (uint64_t)count : 0, bytes > 0 ? (uint64_t)bytes : 0};
}

/* Names compare on at most MCP__MEMO_NAME_MAX bytes: the memo keeps no more. */
static int name_cmp(const char *a, const char *b)
{
    return strncmp(a, b, MCP__MEMO_NAME_MAX);
}

static int type_cmp(const void *pa, const void *pb)
{
    const struct mcp__snap_type *a = pa;
    const struct mcp__snap_type *b = pb;
    int r = name_cmp(a->type, b->type);
    return r != 0 ? r : name_cmp(a->module, b->module);
}

/* The previous snapshot's entry for r, or NULL. */
static struct mcp__snap_type *prev_find(const struct mcp__snap *prev, const struct row *r)
{
    struct mcp__snap_type key = {.type = (char *)(uintptr_t)r->type,
                                 .module = (char *)(uintptr_t)r->module};
    return bsearch(&key, prev->types, prev->n, sizeof(*prev->types), type_cmp);
}

struct delta {
    const char *type;
    const char *module;
    int64_t count;
    int64_t bytes;
};

/* Keeps d in best[0..*n) (at most max, most grown first: bytes, then count). */
static void best_add(struct delta *best, size_t *n, size_t max, struct delta d)
{
    size_t i = *n;
    while (i > 0 && (best[i - 1].bytes < d.bytes ||
                     (best[i - 1].bytes == d.bytes && best[i - 1].count < d.count))) {
        i--;
    }
    if (i >= max) {
        return;
    }
    size_t move = (*n < max ? *n : max - 1) - i;
    memmove(&best[i + 1], &best[i], move * sizeof(*best));
    best[i] = d;
    if (*n < max) {
        (*n)++;
    }
}

/* growth: what differs from prev (NULL: null, the first call). */
static void growth(struct mcp__b *b, cJSON *root, const cJSON *sum, const struct mcp__snap *prev,
                   double now, int64_t top)
{
    if (prev == NULL) {
        mcp__null(b, root, "growth");
        mcp__say(b, "First summary of this process: call heap_summary again later to see what "
                    "grew in between.\n");
        return;
    }
    struct delta best[HEAP_TOP_MAX];
    size_t n = 0;
    const cJSON *t = NULL;
    int seen = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(sum, "top"))
    {
        if (seen++ >= HEAP_ASK_TYPES) {
            break;
        }
        struct row r = row_of(t);
        const struct mcp__snap_type *p = prev_find(prev, &r);
        struct delta d = {r.type, r.module, (int64_t)r.count, (int64_t)r.bytes};
        if (p != NULL) {
            d.count -= (int64_t)p->count;
            d.bytes -= (int64_t)p->bytes;
        }
        if (d.bytes > 0 || (d.bytes == 0 && d.count > 0)) {
            best_add(best, &n, (size_t)top, d);
        }
    }
    double since = (double)(int64_t)((now - prev->taken) * 10 + 0.5) / 10;
    int64_t dobj = (int64_t)mcp__jnum(sum, "objects", 0) - (int64_t)prev->objects;
    int64_t dbytes = (int64_t)mcp__jnum(sum, "heapBytes", 0) - (int64_t)prev->heap_bytes;
    cJSON *g = mcp__obj(b, root, "growth");
    mcp__num(b, g, "sinceSeconds", since);
    mcp__num(b, g, "objectsDelta", (double)dobj);
    mcp__num(b, g, "bytesDelta", (double)dbytes);
    cJSON *out = mcp__arr(b, g, "top");
    char h[32];
    mcp__say(b, "Since the previous summary %.1f s ago: %+lld objects, %s%s%s\n", since,
             (long long)dobj, dbytes >= 0 ? "+" : "", mcp__human(h, (double)dbytes),
             n > 0 ? "; grew most:" : "; no type grew.");
    for (size_t i = 0; i < n; i++) {
        cJSON *o = mcp__obj(b, out, NULL);
        mcp__str(b, o, "type", best[i].type);
        if (best[i].module[0] != '\0') {
            mcp__str(b, o, "module", best[i].module);
        }
        mcp__num(b, o, "countDelta", (double)best[i].count);
        mcp__num(b, o, "bytesDelta", (double)best[i].bytes);
        mcp__say(b, "  +%-11s  %+10lld objects  %s\n", mcp__human(h, (double)best[i].bytes),
                 (long long)best[i].count, best[i].type);
    }
}

/* The bytes a snapshot of sum takes (charged before anything is allocated). */
static size_t snap_size(const cJSON *top, size_t *ntypes)
{
    size_t n = 0;
    size_t bytes = sizeof(struct mcp__snap);
    const cJSON *t = NULL;
    cJSON_ArrayForEach(t, top)
    {
        if (n == HEAP_ASK_TYPES) {
            break;
        }
        struct row r = row_of(t);
        bytes += sizeof(struct mcp__snap_type) +
                 utf8_cut(r.type, strlen(r.type), MCP__MEMO_NAME_MAX) +
                 utf8_cut(r.module, strlen(r.module), MCP__MEMO_NAME_MAX) + 2;
        n++;
    }
    *ntypes = n;
    return bytes;
}

static char *name_dup(const char *s)
{
    size_t n = utf8_cut(s, strlen(s), MCP__MEMO_NAME_MAX);
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Remembers sum for uid in place of the previous one; false when it does not fit the budget. */
static bool remember(struct mcp_memo *m, const struct heap_state *s, const cJSON *sum, double now)
{
    const cJSON *top = cJSON_GetObjectItemCaseSensitive(sum, "top");
    size_t n = 0;
    size_t bytes = snap_size(top, &n);
    struct mcp__snap *prev = mcp__memo_find(m, s->uid);
    if (prev != NULL) {
        mcp__memo_drop(m, prev); /* its diff is made: the new one takes its place */
    }
    if (mcp__memo_charge(m, bytes, NULL) != 0) {
        return false;
    }
    struct mcp__snap *snap = calloc(1, sizeof(*snap));
    struct mcp__snap_type *types = calloc(n > 0 ? n : 1, sizeof(*types));
    if (snap == NULL || types == NULL) {
        free(snap);
        free(types);
        mb_release(&m->share, bytes);
        return false;
    }
    *snap = (struct mcp__snap){.pid = (int64_t)s->pid,
                               .taken = now,
                               .objects = (uint64_t)mcp__jnum(sum, "objects", 0),
                               .heap_bytes = (uint64_t)mcp__jnum(sum, "heapBytes", 0),
                               .type_count = (uint64_t)mcp__jnum(sum, "typeCount", 0),
                               .types = types,
                               .charged = bytes};
    memcpy(snap->uid, s->uid, sizeof(snap->uid));
    const cJSON *t = NULL;
    bool ok = true;
    cJSON_ArrayForEach(t, top)
    {
        if (snap->n == n) {
            break;
        }
        struct row r = row_of(t);
        struct mcp__snap_type *e = &types[snap->n++];
        *e = (struct mcp__snap_type){name_dup(r.type), name_dup(r.module), r.count, r.bytes};
        ok = ok && e->type != NULL && e->module != NULL;
    }
    if (!ok) {
        mcp__snap_free(m, snap);
        return false;
    }
    qsort(types, snap->n, sizeof(*types), type_cmp);
    mcp__memo_add(m, snap);
    return true;
}

static void heap_top(struct mcp__b *b, cJSON *root, const cJSON *sum, int64_t top)
{
    cJSON *out = mcp__arr(b, root, "top");
    const cJSON *t = NULL;
    int64_t i = 0;
    mcp__say(b, "Top types by bytes:\n");
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(sum, "top"))
    {
        if (i++ >= top) {
            break;
        }
        struct row r = row_of(t);
        cJSON *o = mcp__obj(b, out, NULL);
        mcp__str(b, o, "type", r.type);
        if (r.module[0] != '\0') {
            mcp__str(b, o, "module", r.module);
        }
        mcp__num(b, o, "count", (double)r.count);
        mcp__num(b, o, "bytes", (double)r.bytes);
        char h[32];
        mcp__say(b, "  %12s  %10llu objects  %s\n", mcp__human(h, (double)r.bytes),
                 (unsigned long long)r.count, r.type);
    }
}

static enum mcp_step heap_reduce(struct mcp_tool_ctx *c, struct heap_state *s, const cJSON *sum)
{
    struct mcp_memo *m = c->memo;
    double now = m != NULL && m->clock != NULL ? m->clock() : 0;
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    double pid = mcp__jnum(sum, "pid", s->pid);
    double objects = mcp__jnum(sum, "objects", 0);
    double heap = mcp__jnum(sum, "heapBytes", 0);
    double types = mcp__jnum(sum, "typeCount", 0);
    mcp__num(&b, root, "pid", pid);
    mcp__str(&b, root, "uid", s->uid);
    mcp__num(&b, root, "objects", objects);
    mcp__num(&b, root, "heapBytes", heap);
    mcp__num(&b, root, "typeCount", types);
    char h[32];
    mcp__say(&b, "Heap of pid %.0f after a blocking gen-2 GC: %.0f live objects, %s, %.0f types.\n",
             pid, objects, mcp__human(h, heap), types);
    heap_top(&b, root, sum, s->top);
    growth(&b, root, sum, m != NULL ? mcp__memo_find(m, s->uid) : NULL, now, s->top);
    bool kept = m != NULL && !b.oom && remember(m, s, sum, now);
    mcp__bool(&b, root, "remembered", kept);
    if (m != NULL && !kept) {
        mcp__say(&b, "(this summary is not remembered: the memo's share of the memory budget "
                     "is full; Memory:LimitMB raises it)\n");
    }
    if (types > (double)HEAP_ASK_TYPES) {
        mcp__say(&b, "(only the %d biggest types are compared between summaries)\n",
                 HEAP_ASK_TYPES);
    }
    return mcp__finish(&b, root);
}

static enum mcp_step heap_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, "top", NULL};
    struct heap_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    struct mcp__sel sel;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_int(c, "top", 1, HEAP_TOP_MAX, HEAP_TOP_DEF, &s->top) != 0) {
        return MCP_STEP_ERROR;
    }
    /* The process first: its uid keys the memo, and the snapshot asks by uid, so both name the
     * same runtime even if pid or name would pick another by then. */
    int rc = mcp__fetch_begin(c, "GET", "/process");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, &sel);
    return rc ? mcp__oom(c) : MCP_STEP_FETCH;
}

static enum mcp_step heap_summary_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    if (ans == NULL) {
        return heap_first(c);
    }
    struct heap_state *s = c->state;
    if (c->step == 1) {
        cJSON *p = mcp__answer_json(c, ans, cJSON_Object);
        if (p == NULL) {
            return MCP_STEP_ERROR;
        }
        const char *uid = mcp__jstr(p, "uid");
        size_t n = uid != NULL ? strlen(uid) : 0;
        if (n == 0 || n >= sizeof(s->uid)) {
            cJSON_Delete(p);
            return mcp__fail(c, "GET /process answered no uid for the process");
        }
        memcpy(s->uid, uid, n + 1);
        s->pid = mcp__jnum(p, "pid", 0);
        cJSON_Delete(p);
        int rc = mcp__fetch_begin(c, "GET", "/gcdump");
        rc = rc ? rc : mcp__q(&c->fetch.target, "uid", s->uid);
        rc = rc ? rc : mcp__q(&c->fetch.target, "format", "summary");
        rc = rc ? rc : mcp__q_int(&c->fetch.target, "top", HEAP_ASK_TYPES);
        c->fetch.max_bytes = HEAP_BODY_MAX;
        return rc ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *sum = mcp__answer_json(c, ans, cJSON_Object);
    if (sum == NULL) {
        return MCP_STEP_ERROR;
    }
    enum mcp_step r = heap_reduce(c, s, sum);
    cJSON_Delete(sum);
    return r;
}

const struct mcp_tool mcp__tool_heap_summary = {
    .name = "heap_summary",
    .title = "GC heap summary and growth",
    .description =
        "What fills the managed heap: takes a GC heap snapshot and answers the live objects and "
        "bytes, the top types by bytes (with their counts), and, from the second call on for the "
        "same process, what grew since the previous call (types by bytes gained): call it twice a "
        "while apart to find a leak. Cost to the app: it PAUSES the app for a blocking gen-2 "
        "garbage collection and the heap walk that follows (as dotnet-gcdump does: milliseconds "
        "on a small heap, seconds on millions of objects). Side effects: the induced GC itself; "
        "dotmon remembers the last summary of each process (at most 16) for the next call. One "
        "heap snapshot at a time.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":100,\"default\":20,"
        "\"description\":\"How many types to list by bytes, and of those that grew most.\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"uid\":{\"type\":\"string\"},\"objects\":{\"type\":\"integer\"},"
        "\"heapBytes\":{\"type\":\"integer\"},\"typeCount\":{\"type\":\"integer\"},"
        "\"top\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"type\":{\"type\":\"string\"},\"module\":{\"type\":\"string\"},"
        "\"count\":{\"type\":\"integer\"},\"bytes\":{\"type\":\"integer\"}},\"required\":[\"type\","
        "\"count\",\"bytes\"]}},\"growth\":{\"type\":[\"object\",\"null\"],"
        "\"properties\":{\"sinceSeconds\":{\"type\":\"number\"},"
        "\"objectsDelta\":{\"type\":\"integer\"},\"bytesDelta\":{\"type\":\"integer\"},"
        "\"top\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"type\":{\"type\":\"string\"},\"module\":{\"type\":\"string\"},"
        "\"countDelta\":{\"type\":\"integer\"},\"bytesDelta\":{\"type\":\"integer\"}},"
        "\"required\":[\"type\",\"countDelta\",\"bytesDelta\"]}}},\"required\":[\"sinceSeconds\","
        "\"objectsDelta\",\"bytesDelta\",\"top\"]},\"remembered\":{\"type\":\"boolean\"}},"
        "\"required\":[\"pid\",\"uid\",\"objects\",\"heapBytes\",\"top\",\"growth\","
        "\"remembered\"]}",
    .hints = {.read_only = false, .destructive = false, .idempotent = false},
    .step = heap_summary_step,
    .fini = heap_fini,
};
