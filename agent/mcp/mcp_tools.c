/* SPDX-License-Identifier: MIT */
/*
 * The MCP tools' table (mcp_tools.h), what every tool shares (mcp_tools_internal.h: arguments,
 * targets, the JSON builder, the line splitter) and the memo. The tools themselves:
 * mcp_tools_process.c (processes, rules, dump), mcp_tools_profile.c (/profile, /stacks),
 * mcp_tools_stream.c (logs, live metrics, traces: reduced as their bytes come), mcp_tools_heap.c
 * (heap summaries and what grew between two).
 */
#include "mcp_tools.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>
#include <uv.h>

#include "ascii.h"
#include "err.h"
#include "mcp_tools_internal.h"
#include "membudget.h"
#include "utf8.h"

/* The order tools/list gives them: what an agent looks at first, first. */
static const struct mcp_tool *const tools[] = {
    &mcp__tool_list_processes,   &mcp__tool_process_info, &mcp__tool_cpu_profile,
    &mcp__tool_allocations,      &mcp__tool_exceptions,   &mcp__tool_contention,
    &mcp__tool_gc_stats,         &mcp__tool_stacks,       &mcp__tool_recent_logs,
    &mcp__tool_metrics_snapshot, &mcp__tool_heap_summary, &mcp__tool_trace_summary,
    &mcp__tool_collection_rules, &mcp__tool_dump,
};

#define NTOOLS (sizeof(tools) / sizeof(tools[0]))

const struct mcp_tool *const *mcp_tools(size_t *n)
{
    *n = NTOOLS;
    return tools;
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < NTOOLS; i++) {
        if (strcmp(tools[i]->name, name) == 0) {
            return tools[i];
        }
    }
    return NULL;
}

/* ---- errors ---- */

enum mcp_step mcp__fail(struct mcp_tool_ctx *c, const char *fmt, ...)
{
    buf_reset(&c->text);
    va_list ap;
    va_start(ap, fmt);
    (void)buf_vprintf(&c->text, fmt, ap); /* on ENOMEM the message is empty: still an error */
    va_end(ap);
    return MCP_STEP_ERROR;
}

enum mcp_step mcp__oom(struct mcp_tool_ctx *c)
{
    return mcp__fail(c, "out of memory");
}

/* ---- arguments ---- */

/* The names as "a, b and c" for a message. */
static void list_names(struct buf *b, const char *const *names)
{
    for (size_t i = 0; names[i] != NULL; i++) {
        const char *sep = i == 0 ? "" : names[i + 1] == NULL ? " and " : ", ";
        (void)buf_printf(b, "%s%s", sep, names[i]);
    }
}

int mcp__args_check(struct mcp_tool_ctx *c, const char *const *names)
{
    if (c->args != NULL && !cJSON_IsObject(c->args)) {
        (void)mcp__fail(c, "the arguments must be an object");
        return -1;
    }
    const cJSON *a = NULL;
    cJSON_ArrayForEach(a, c->args)
    {
        bool known = false;
        for (size_t i = 0; names[i] != NULL && !known; i++) {
            known = a->string != NULL && strcmp(a->string, names[i]) == 0;
        }
        /* cJSON keeps both members of a repeated name and the readers see the first only: the
         * second would be held unread (and unchecked) for the whole call. */
        for (const cJSON *b = c->args->child; known && b != a; b = b->next) {
            if (b->string != NULL && strcmp(b->string, a->string) == 0) {
                (void)mcp__fail(c, "the argument '%.*s' is given twice", mcp__cut(a->string, 64),
                                a->string);
                return -1;
            }
        }
        if (!known) {
            (void)mcp__fail(c, "unknown argument '%.*s'; ", mcp__cut(a->string, 64),
                            a->string ? a->string : "");
            if (names[0] == NULL) {
                (void)buf_append_str(&c->text, "this tool takes none");
            } else {
                (void)buf_append_str(&c->text, "this tool takes ");
                list_names(&c->text, names);
            }
            return -1;
        }
    }
    return 0;
}

static const cJSON *arg(const struct mcp_tool_ctx *c, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->args, name);
    return cJSON_IsNull(v) ? NULL : v; /* null is absent, as an omitted optional argument */
}

int mcp__arg_int(struct mcp_tool_ctx *c, const char *name, int64_t min, int64_t max, int64_t def,
                 int64_t *out)
{
    const cJSON *v = arg(c, name);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    double d = cJSON_IsNumber(v) ? v->valuedouble : 0;
    if (!cJSON_IsNumber(v) || d != d || d < (double)min || d > (double)max ||
        d != (double)(int64_t)d) {
        char got[48] = "not a number";
        if (cJSON_IsNumber(v)) {
            int w = snprintf(got, sizeof(got), "%.17g", d);
            if (w < 0 || (size_t)w >= sizeof(got)) {
                got[0] = '\0';
            }
        }
        (void)mcp__fail(c, "%s must be an integer from %lld to %lld, not %s", name, (long long)min,
                        (long long)max, got);
        return -1;
    }
    *out = (int64_t)d;
    return 0;
}

int mcp__arg_str(struct mcp_tool_ctx *c, const char *name, size_t max_len, bool required,
                 const char **out)
{
    const cJSON *v = arg(c, name);
    if (v == NULL) {
        if (required) {
            (void)mcp__fail(c, "%s is required", name);
            return -1;
        }
        *out = NULL;
        return 0;
    }
    size_t n = cJSON_IsString(v) ? strlen(v->valuestring) : 0;
    if (!cJSON_IsString(v) || n == 0 || n > max_len) {
        (void)mcp__fail(c, "%s must be a string of 1 to %zu bytes", name, max_len);
        return -1;
    }
    *out = v->valuestring;
    return 0;
}

int mcp__arg_choice(struct mcp_tool_ctx *c, const char *name, const char *const *choices, size_t n,
                    int def, int *out)
{
    const cJSON *v = arg(c, name);
    if (v == NULL) {
        *out = def;
        return 0;
    }
    for (size_t i = 0; cJSON_IsString(v) && i < n; i++) {
        if (ascii_ieq(v->valuestring, choices[i])) {
            *out = (int)i;
            return 0;
        }
    }
    (void)mcp__fail(c, "%s must be one of ", name);
    for (size_t i = 0; i < n; i++) {
        (void)buf_printf(&c->text, "%s%s", i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
    }
    return -1;
}

int mcp__arg_str_array(struct mcp_tool_ctx *c, const char *name, size_t max_items, size_t max_len,
                       const cJSON **out)
{
    const cJSON *v = arg(c, name);
    if (v == NULL) {
        *out = NULL;
        return 0;
    }
    bool ok = cJSON_IsArray(v) && (size_t)cJSON_GetArraySize(v) <= max_items;
    const cJSON *e = NULL;
    cJSON_ArrayForEach(e, (ok ? v : NULL))
    {
        size_t n = cJSON_IsString(e) ? strlen(e->valuestring) : 0;
        ok = ok && n > 0 && n <= max_len;
    }
    if (!ok) {
        (void)mcp__fail(c, "%s must be an array of at most %zu strings of 1 to %zu bytes", name,
                        max_items, max_len);
        return -1;
    }
    *out = v;
    return 0;
}

int mcp__sel_read(struct mcp_tool_ctx *c, struct mcp__sel *s)
{
    *s = (struct mcp__sel){0};
    if (mcp__arg_int(c, "pid", 1, INT32_MAX, 0, &s->pid) != 0 ||
        mcp__arg_str(c, "uid", 64, false, &s->uid) != 0 ||
        mcp__arg_str(c, "name", 256, false, &s->name) != 0) {
        return -1;
    }
    return 0;
}

/* ---- requests ---- */

int mcp__set(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap) {
        return AGENT_E_INVAL;
    }
    memcpy(dst, s, n + 1);
    return 0;
}

int mcp__fetch_begin(struct mcp_tool_ctx *c, const char *method, const char *path)
{
    if (mcp__set(c->fetch.method, sizeof(c->fetch.method), method) != 0) {
        return AGENT_E_INVAL;
    }
    buf_reset(&c->fetch.target);
    buf_reset(&c->fetch.body);
    c->fetch.content_type[0] = '\0';
    c->fetch.accept[0] = '\0';
    return buf_append_str(&c->fetch.target, path);
}

int mcp__pct(struct buf *b, const char *s)
{
    return buf_append_pct(b, s, strlen(s), false);
}

int mcp__q(struct buf *t, const char *name, const char *value)
{
    bool first = memchr(buf_data(t), '?', buf_size(t)) == NULL;
    int rc = buf_printf(t, "%c%s=", first ? '?' : '&', name);
    return rc ? rc : mcp__pct(t, value);
}

int mcp__q_int(struct buf *t, const char *name, int64_t v)
{
    char s[24];
    int w = snprintf(s, sizeof(s), "%lld", (long long)v);
    if (w < 0 || (size_t)w >= sizeof(s)) {
        return AGENT_E_INVAL;
    }
    return mcp__q(t, name, s);
}

int mcp__q_sel(struct buf *t, const struct mcp__sel *s)
{
    int rc = 0;
    if (s->pid > 0) {
        rc = mcp__q_int(t, "pid", s->pid);
    }
    if (rc == 0 && s->uid != NULL) {
        rc = mcp__q(t, "uid", s->uid);
    }
    if (rc == 0 && s->name != NULL) {
        rc = mcp__q(t, "name", s->name);
    }
    return rc;
}

int mcp__fetch_json_body(struct mcp_tool_ctx *c, const cJSON *j)
{
    char *s = cJSON_PrintUnformatted(j);
    if (s == NULL) {
        return UV_ENOMEM;
    }
    buf_reset(&c->fetch.body);
    int rc = buf_append_str(&c->fetch.body, s);
    free(s);
    return rc ? rc
              : mcp__set(c->fetch.content_type, sizeof(c->fetch.content_type), "application/json");
}

cJSON *mcp__answer_json(struct mcp_tool_ctx *c, const struct mcp_answer *a, int type)
{
    if (!a->complete) {
        (void)mcp__fail(c, "the route's answer was cut after %llu bytes (HTTP %d)",
                        (unsigned long long)a->total, a->status);
        return NULL;
    }
    cJSON *j = a->body != NULL ? cJSON_ParseWithLength(a->body, a->len) : NULL;
    if (j == NULL || (j->type & 0xFF) != type) {
        cJSON_Delete(j);
        const char *ct = a->content_type != NULL && a->content_type[0] ? a->content_type : "none";
        (void)mcp__fail(c,
                        "the route answered HTTP %d with %zu bytes (Content-Type %.*s), not the "
                        "JSON %s expected",
                        a->status, a->len, mcp__cut(ct, 64), ct,
                        type == cJSON_Array ? "array" : "object");
        return NULL;
    }
    return j;
}

double mcp__jnum(const cJSON *o, const char *key, double def)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : def;
}

const char *mcp__jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* ---- the builder ---- */

/* Puts item under key in o (key NULL: appends it); on failure item is freed and b remembers. */
static cJSON *put(struct mcp__b *b, cJSON *o, const char *key, cJSON *item)
{
    if (b->oom || item == NULL || o == NULL) {
        cJSON_Delete(item);
        b->oom = true;
        return NULL;
    }
    bool ok = key != NULL ? cJSON_AddItemToObject(o, key, item) : cJSON_AddItemToArray(o, item);
    if (!ok) {
        cJSON_Delete(item);
        b->oom = true;
        return NULL;
    }
    return item;
}

cJSON *mcp__obj(struct mcp__b *b, cJSON *parent, const char *key)
{
    if (parent == NULL && !b->oom) {
        cJSON *o = cJSON_CreateObject();
        b->oom = o == NULL;
        return o;
    }
    return put(b, parent, key, b->oom ? NULL : cJSON_CreateObject());
}

cJSON *mcp__arr(struct mcp__b *b, cJSON *parent, const char *key)
{
    return put(b, parent, key, b->oom ? NULL : cJSON_CreateArray());
}

void mcp__num(struct mcp__b *b, cJSON *o, const char *key, double v)
{
    (void)put(b, o, key, b->oom ? NULL : cJSON_CreateNumber(v));
}

void mcp__str(struct mcp__b *b, cJSON *o, const char *key, const char *s)
{
    (void)put(b, o, key, b->oom ? NULL : s != NULL ? cJSON_CreateString(s) : cJSON_CreateNull());
}

void mcp__strn(struct mcp__b *b, cJSON *o, const char *key, const char *s, size_t n, size_t max)
{
    size_t keep = utf8_cut(s, n, max);
    char *copy = b->oom ? NULL : malloc(keep + sizeof("…"));
    if (copy == NULL) {
        b->oom = true;
        return;
    }
    memcpy(copy, s, keep);
    copy[keep] = '\0';
    if (keep < n) {
        memcpy(copy + keep, "…", sizeof("…"));
    }
    mcp__str(b, o, key, copy);
    free(copy);
}

void mcp__bool(struct mcp__b *b, cJSON *o, const char *key, bool v)
{
    (void)put(b, o, key, b->oom ? NULL : cJSON_CreateBool(v));
}

void mcp__null(struct mcp__b *b, cJSON *o, const char *key)
{
    (void)put(b, o, key, b->oom ? NULL : cJSON_CreateNull());
}

void mcp__dup(struct mcp__b *b, cJSON *o, const char *key, const cJSON *v)
{
    if (v == NULL) {
        mcp__null(b, o, key);
        return;
    }
    (void)put(b, o, key, b->oom ? NULL : cJSON_Duplicate(v, true));
}

void mcp__say(struct mcp__b *b, const char *fmt, ...)
{
    if (b->oom) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    b->oom = buf_vprintf(&b->c->text, fmt, ap) != 0;
    va_end(ap);
}

enum mcp_step mcp__finish(struct mcp__b *b, cJSON *root)
{
    if (b->oom || root == NULL) {
        cJSON_Delete(root);
        return mcp__oom(b->c);
    }
    b->c->structured = root;
    return MCP_STEP_DONE;
}

/* Bytes for a reader: 512 B, 1.5 KB, 9.10 GB (decimal units, as dotnet-counters shows them). */
int mcp__cut(const char *s, size_t max)
{
    size_t n = s != NULL ? strlen(s) : 0;
    return (int)utf8_cut(s != NULL ? s : "", n, max);
}

const char *mcp__human(char out[32], double v)
{
    static const char *const units[] = {"B", "KB", "MB", "GB", "TB"};
    size_t u = 0;
    double neg = v < 0 ? -1 : 1;
    v *= neg;
    while (v >= 1000 && u + 1 < sizeof(units) / sizeof(units[0])) {
        v /= 1000;
        u++;
    }
    int w = u == 0 ? snprintf(out, 32, "%.0f %s", v * neg, units[u])
                   : snprintf(out, 32, "%.2f %s", v * neg, units[u]);
    if (w < 0 || w >= 32) {
        out[0] = '\0';
    }
    return out;
}

/* ---- lines ---- */

void mcp__lines_init(struct mcp__lines *l, size_t cap)
{
    *l = (struct mcp__lines){.cap = cap};
    buf_init(&l->line, cap + 1);
}

void mcp__lines_fini(struct mcp__lines *l)
{
    buf_fini(&l->line);
}

/* One line, its '\r' and a JSON text sequence's 0x1E taken off; empty lines are not given. */
static int give(const char *s, size_t n, mcp__line_cb on_line, void *ud)
{
    if (n > 0 && s[n - 1] == '\r') {
        n--;
    }
    while (n > 0 && s[0] == '\x1e') {
        s++;
        n--;
    }
    return n > 0 ? on_line(ud, s, n) : 0;
}

int mcp__lines_feed(struct mcp__lines *l, const void *data, size_t len, mcp__line_cb on_line,
                    void *ud)
{
    const char *p = data;
    const char *end = p + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = (size_t)((nl != NULL ? nl : end) - p);
        int rc = 0;
        if (l->skipping) {
            /* the rest of a line over the cap: dropped */
        } else if (buf_size(&l->line) + n > l->cap) {
            l->skipping = true;
            l->too_long++;
            buf_reset(&l->line);
        } else if (nl != NULL && buf_size(&l->line) == 0) {
            rc = give(p, n, on_line, ud); /* a whole line in this piece: no copy */
        } else {
            rc = buf_append(&l->line, p, n);
            if (rc == 0 && nl != NULL) {
                rc = give((const char *)buf_data(&l->line), buf_size(&l->line), on_line, ud);
                buf_reset(&l->line);
            }
        }
        if (rc != 0) {
            return rc;
        }
        if (nl == NULL) {
            break;
        }
        l->skipping = false;
        p = nl + 1;
    }
    return 0;
}

int mcp__lines_end(struct mcp__lines *l, mcp__line_cb on_line, void *ud)
{
    int rc = 0;
    if (!l->skipping && buf_size(&l->line) > 0) {
        rc = give((const char *)buf_data(&l->line), buf_size(&l->line), on_line, ud);
    }
    buf_reset(&l->line);
    l->skipping = false;
    return rc;
}

/* ---- the memo ---- */

static double monotonic_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        return 0;
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The memo's share: 6 % of the budget, at least 4 MiB (enough for a few thousand types of
 * several processes); without a budget, 64 MiB (beside its structural bounds: 16 processes of
 * 10000 types, names cut at 1 KiB). */
#define MEMO_BUDGET_PCT 6
#define MEMO_BUDGET_MIN ((uint64_t)4 << 20)
#define MEMO_UNBUDGETED ((uint64_t)64 << 20)

int mcp_memo_new(struct mcp_memo **out)
{
    struct mcp_memo *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return UV_ENOMEM;
    }
    uint64_t cap = membudget_fraction(MEMO_BUDGET_PCT, MEMO_BUDGET_MIN);
    mb_share_init(&m->share, "MCP heap_summary snapshots", cap != 0 ? cap : MEMO_UNBUDGETED);
    m->clock = monotonic_seconds;
    *out = m;
    return 0;
}

void mcp_memo_free(struct mcp_memo *m)
{
    if (m == NULL) {
        return;
    }
    while (m->nsnaps > 0) {
        mcp__memo_drop(m, m->snaps[m->nsnaps - 1]);
    }
    mb_share_fini(&m->share);
    free(m);
}

size_t mcp_memo_bytes(const struct mcp_memo *m)
{
    return m != NULL ? (size_t)atomic_load(&m->share.used) : 0;
}

struct mcp__snap *mcp__memo_find(struct mcp_memo *m, const char *uid)
{
    for (size_t i = 0; m != NULL && i < m->nsnaps; i++) {
        if (strcmp(m->snaps[i]->uid, uid) == 0) {
            m->snaps[i]->used = ++m->tick;
            return m->snaps[i];
        }
    }
    return NULL;
}

void mcp__snap_free(struct mcp_memo *m, struct mcp__snap *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        free(s->types[i].type);
        free(s->types[i].module);
    }
    free(s->types);
    if (m != NULL && s->charged > 0) {
        mb_release(&m->share, s->charged);
    }
    free(s);
}

void mcp__memo_drop(struct mcp_memo *m, struct mcp__snap *s)
{
    for (size_t i = 0; i < m->nsnaps; i++) {
        if (m->snaps[i] == s) {
            m->snaps[i] = m->snaps[m->nsnaps - 1];
            m->nsnaps--;
            mcp__snap_free(m, s);
            return;
        }
    }
}

/* The least recently used snapshot but keep, or NULL. */
static struct mcp__snap *lru(const struct mcp_memo *m, const struct mcp__snap *keep)
{
    struct mcp__snap *best = NULL;
    for (size_t i = 0; i < m->nsnaps; i++) {
        if (m->snaps[i] != keep && (best == NULL || m->snaps[i]->used < best->used)) {
            best = m->snaps[i];
        }
    }
    return best;
}

int mcp__memo_charge(struct mcp_memo *m, size_t n, const struct mcp__snap *keep)
{
    while (mb_charge(&m->share, n) != 0) {
        struct mcp__snap *old = lru(m, keep);
        if (old == NULL) {
            return AGENT_E_BUDGET;
        }
        mcp__memo_drop(m, old);
    }
    return 0;
}

void mcp__memo_add(struct mcp_memo *m, struct mcp__snap *s)
{
    struct mcp__snap *same = mcp__memo_find(m, s->uid);
    if (same != NULL) {
        mcp__memo_drop(m, same);
    }
    if (m->nsnaps == MCP__MEMO_PROCS) {
        mcp__memo_drop(m, lru(m, NULL));
    }
    s->used = ++m->tick;
    m->snaps[m->nsnaps++] = s;
}
