/* SPDX-License-Identifier: MIT */
#include "ev_logs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "civil.h"
#include "err.h"
#include "ev_fmt.h"
#include "ev_payload.h"
#include "ev_schemas.h"
#include "hex.h"
#include "membudget.h"
#include "nettrace.h"
#include "utf8.h"

#define MEL_PROVIDER "Microsoft-Extensions-Logging"
#define MAX_METADATA 4096u
#define SCOPE_SLOTS  16384u /* power of two, > EV_LOGS_MAX_SCOPES / 0.75 */

/* K_LINK_START/STOP: another provider's Start/Stop event (docs/events.md §4.3): its nested activity
 * id leads back to the scope under its related activity id. */
enum mel_kind {
    K_NONE = 0,
    K_FORMATTED,
    K_JSON,
    K_SCOPE_START,
    K_SCOPE_STOP,
    K_LINK_START,
    K_LINK_STOP
};

#define OPCODE_START 1 /* EventOpcode.Start */
#define OPCODE_STOP  2 /* EventOpcode.Stop */

enum fid {
    F_LEVEL,
    F_LOGGER,
    F_EVENT_ID,
    F_EVENT_NAME,
    F_EXCEPTION,
    F_ARGS,
    F_FORMATTED,
    F_ID,
    F_TRACE_ID,
    F_SPAN_ID,
    F_TRACE_FLAGS,
    F_N
};

static const char *const field_names[F_N] = {
    "Level",
    "LoggerName",
    "EventId",
    "EventName",
    "ExceptionJson",
    "ArgumentsJson",
    "FormattedMessage",
    "ID",
    "ActivityTraceId",
    "ActivitySpanId",
    "ActivityTraceFlags",
};

/* A kept metadata id (its slot in the schema registry): what it is and its fields' nodes. */
struct md_entry {
    enum mel_kind kind;
    const struct ev_schema *schema; /* the registry entry's */
    int16_t f[F_N];
};

/* A scope: reference-counted because children keep their parent alive after its Stop. */
struct scope {
    uint32_t refs;
    struct scope *parent;
    size_t bytes; /* charged: the node, its pairs and their strings */
    size_t npairs;
    struct ev_log_kv *pairs; /* one allocation with the strings */
};

struct scope_slot {
    uint8_t key[16];
    uint8_t state; /* 0 empty, 1 used, 2 deleted */
    bool link;     /* another provider's activity id leading to s (on_link_start) */
    struct scope *s;
};

/*
 * An event held for ordering (docs/events.md §4.4): what on_event needs to act on it later, the
 * payload copied after it. A MessageJson keeps the FormattedMessage text it would have used.
 */
struct held {
    int64_t ts;
    uint64_t seq; /* arrival order: equal timestamps keep the stream's order */
    uint32_t metadata_id;
    bool has_act;
    bool has_rel;
    uint8_t act[16];
    uint8_t rel[16];
    size_t bytes; /* charged: the whole allocation */
    char *formatted;
    size_t payload_len;
    uint8_t payload[];
};

struct ev_logs {
    ev_logs_record_cb cb;
    void *ud;
    struct nettrace_checker ck;
    struct ev_schemas md; /* kept metadata by id, a struct md_entry each */
    struct scope_slot *slots;
    size_t slots_used; /* used + deleted */
    uint64_t scopes_alive;
    char *last_formatted; /* the last FormattedMessage (or its EventName) */
    size_t last_formatted_bytes;
    struct mb_share *share; /* what the session holds is charged here (NULL: the total only) */
    uint64_t held;          /* bytes charged now */
    struct ev_logs_stats st;
    struct nettrace_sticky err;
    struct ev_record rec;
    size_t text_len;
    char text[EV_LOGS_TEXT_MAX];
    struct ev_log_kv kv[EV_LOGS_MAX_PAIRS];
    struct ev_log_scope chain[EV_LOGS_MAX_DEPTH];
    /* Events held for ordering: a min-heap on (ts, seq). */
    struct held *heap[EV_LOGS_MAX_HELD];
    size_t nheld;
    size_t held_bytes;
    uint64_t held_seq;
    uint64_t sp_seen;    /* sequence points seen so far (the checker's count) */
    bool fed_since_tick; /* bytes fed since the last ev_logs_tick */
};

/* ---- text area and UTF-8 ------------------------------------------------------------------ */

/* Room for n bytes + NUL in the text area, or NULL. */
static char *text_alloc(struct ev_logs *l, size_t n)
{
    if (n + 1 > sizeof(l->text) - l->text_len) {
        return NULL;
    }
    char *p = l->text + l->text_len;
    l->text_len += n + 1;
    p[n] = '\0';
    return p;
}

/* A string field as UTF-8 in the text area (cut at EV_LOGS_MAX_STRING); fallback when absent. */
static const char *field_str(struct ev_logs *l, const struct md_entry *md, enum fid f,
                             const char *fallback, bool *ok)
{
    int idx = md->f[f];
    if (idx < 0 || md->schema->fields[idx].code != EV_TYPE_STRING) {
        return fallback;
    }
    char *out = l->text + l->text_len;
    size_t len;
    if (ev_record_str(&l->rec, idx, out, sizeof(l->text) - l->text_len, &len) != 0) {
        *ok = false;
        return "";
    }
    len = utf8_cut(out, len, EV_LOGS_MAX_STRING);
    out[len] = '\0';
    l->text_len += len + 1;
    return out;
}

static int64_t field_int(const struct ev_logs *l, const struct md_entry *md, enum fid f)
{
    int64_t v = 0;
    if (md->f[f] < 0 || ev_record_i64(&l->rec, md->f[f], &v) != 0) {
        return 0;
    }
    return v;
}

/* ---- a small JSON object reader (ArgumentsJson, ExceptionJson) ----------------------------- */

struct jrd {
    const char *p;
    size_t i;
    size_t n;
};

static void j_ws(struct jrd *j)
{
    while (j->i < j->n &&
           (j->p[j->i] == ' ' || j->p[j->i] == '\t' || j->p[j->i] == '\n' || j->p[j->i] == '\r')) {
        j->i++;
    }
}

static int j_hex4(struct jrd *j, uint32_t *out)
{
    if (j->n - j->i < 4) {
        return -1;
    }
    uint32_t v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hex_value(j->p[j->i + (size_t)k]);
        if (h < 0) {
            return -1;
        }
        v = v << 4 | (uint32_t)h;
    }
    j->i += 4;
    *out = v;
    return 0;
}

static size_t utf8_put(char *o, uint32_t cp)
{
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
        cp = UTF8_REPLACEMENT;
    }
    return utf8_encode((uint8_t *)o, cp);
}

/* A \u escape (after the backslash and 'u'), pairing surrogates; the code point. */
static int j_unicode(struct jrd *j, uint32_t *cp)
{
    if (j_hex4(j, cp) != 0) {
        return -1;
    }
    if (*cp >= 0xD800 && *cp <= 0xDBFF && j->n - j->i >= 6 && j->p[j->i] == '\\' &&
        j->p[j->i + 1] == 'u') {
        struct jrd save = *j;
        j->i += 2;
        uint32_t lo;
        if (j_hex4(j, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
            *cp = 0x10000 + ((*cp - 0xD800) << 10) + (lo - 0xDC00);
        } else {
            *j = save;
        }
    }
    return 0;
}

static char j_escape(char c)
{
    switch (c) {
    case '"':
    case '\\':
    case '/':
        return c;
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    default:
        return 0;
    }
}

/*
 * A JSON string at j (on its opening quote), unescaped into the text area (input is valid UTF-8,
 * escapes make valid UTF-8; the output is never longer than the input). NULL when malformed.
 */
static const char *j_string(struct ev_logs *l, struct jrd *j)
{
    if (j->i >= j->n || j->p[j->i] != '"') {
        return NULL;
    }
    j->i++;
    char *out = l->text + l->text_len;
    size_t room = sizeof(l->text) - l->text_len;
    size_t o = 0;
    while (j->i < j->n && j->p[j->i] != '"') {
        if (room - o < 5) {
            return NULL;
        }
        char c = j->p[j->i++];
        if (c != '\\') {
            out[o++] = c;
            continue;
        }
        if (j->i >= j->n) {
            return NULL;
        }
        c = j->p[j->i++];
        if (c == 'u') {
            uint32_t cp;
            if (j_unicode(j, &cp) != 0) {
                return NULL;
            }
            o += utf8_put(out + o, cp);
            continue;
        }
        if ((c = j_escape(c)) == 0) {
            return NULL;
        }
        out[o++] = c;
    }
    if (j->i >= j->n) {
        return NULL;
    }
    j->i++;
    o = utf8_cut(out, o, EV_LOGS_MAX_STRING);
    out[o] = '\0';
    l->text_len += o + 1;
    return out;
}

/* Skips a nested object or array (strings inside respected). -1 when unbalanced. */
static int j_skip_nested(struct jrd *j)
{
    int depth = 0;
    bool in_str = false;
    while (j->i < j->n) {
        char c = j->p[j->i++];
        if (in_str) {
            if (c == '\\') {
                j->i++;
            } else if (c == '"') {
                in_str = false;
            }
        } else if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            return 0;
        }
    }
    return -1;
}

/* A scalar literal (number, true, false, null) into kv; kept = false for other numbers. */
static int j_literal(struct ev_logs *l, struct jrd *j, struct ev_log_kv *kv)
{
    size_t start = j->i;
    while (j->i < j->n && strchr(",}] \t\r\n", j->p[j->i]) == NULL) {
        j->i++;
    }
    const char *s = j->p + start;
    size_t len = j->i - start;
    if (len == 4 && memcmp(s, "true", 4) == 0) {
        kv->kind = EV_LOG_BOOL;
        kv->num = 1;
    } else if (len == 5 && memcmp(s, "false", 5) == 0) {
        kv->kind = EV_LOG_BOOL;
        kv->num = 0;
    } else if (len == 4 && memcmp(s, "null", 4) == 0) {
        kv->kind = EV_LOG_NULL;
    } else {
        /* A number: int32 when it is one, else kept as its text. */
        int64_t v = 0;
        bool neg = len > 0 && s[0] == '-';
        size_t k = neg ? 1 : 0;
        bool is_int = len > k && len - k <= 10;
        for (; is_int && k < len; k++) {
            is_int = s[k] >= '0' && s[k] <= '9';
            v = v * 10 + (s[k] - '0');
        }
        v = neg ? -v : v;
        if (len == 0) {
            return -1;
        }
        if (is_int && v >= INT32_MIN && v <= INT32_MAX) {
            kv->kind = EV_LOG_INT;
            kv->num = (int32_t)v;
        } else {
            char *t = text_alloc(l, len);
            if (t == NULL) {
                return -1;
            }
            memcpy(t, s, len);
            kv->kind = EV_LOG_STR;
            kv->str = t;
        }
    }
    return 0;
}

/*
 * Parses a flat JSON object into kv[0..max): strings, int32 numbers, booleans and null kept,
 * nested objects and arrays dropped. The pair count, or -1 when it is not a JSON object.
 */
static int json_pairs(struct ev_logs *l, const char *s, struct ev_log_kv *kv, size_t max)
{
    struct jrd j = {s, 0, strlen(s)};
    size_t n = 0;
    j_ws(&j);
    if (j.i >= j.n || j.p[j.i] != '{') {
        return -1;
    }
    j.i++;
    j_ws(&j);
    if (j.i < j.n && j.p[j.i] == '}') {
        return 0;
    }
    for (;;) {
        j_ws(&j);
        struct ev_log_kv tmp = {0};
        if ((tmp.key = j_string(l, &j)) == NULL) {
            return -1;
        }
        j_ws(&j);
        if (j.i >= j.n || j.p[j.i] != ':') {
            return -1;
        }
        j.i++;
        j_ws(&j);
        if (j.i >= j.n) {
            return -1;
        }
        bool keep = true;
        char c = j.p[j.i];
        if (c == '"') {
            tmp.kind = EV_LOG_STR;
            if ((tmp.str = j_string(l, &j)) == NULL) {
                return -1;
            }
        } else if (c == '{' || c == '[') {
            keep = false;
            if (j_skip_nested(&j) != 0) {
                return -1;
            }
        } else if (j_literal(l, &j, &tmp) != 0) {
            return -1;
        }
        if (keep && n < max) {
            kv[n++] = tmp;
        }
        j_ws(&j);
        if (j.i < j.n && j.p[j.i] == ',') {
            j.i++;
            continue;
        }
        if (j.i < j.n && j.p[j.i] == '}') {
            return (int)n;
        }
        return -1;
    }
}

/* ---- metadata -------------------------------------------------------------------------------- */

static void logs_fail(struct ev_logs *l, int err, const char *msg)
{
    nettrace_sticky_set(&l->err, err, msg);
}

/* Charges n bytes to the session's share before they are allocated; false when refused. */
static bool mem_take(struct ev_logs *l, size_t n)
{
    if (mb_charge(l->share, n) != 0) {
        return false;
    }
    l->held += n;
    return true;
}

static void mem_give(struct ev_logs *l, size_t n)
{
    mb_release(l->share, n);
    l->held -= n;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s);
    size_t k = strlen(suffix);
    return n > k && strcmp(s + n - k, suffix) == 0;
}

/*
 * Another provider's event that opens or closes an EventSource activity: its metadata's opcode,
 * else (no opcode in the metadata) EventSource's own naming rule, a name ending in Start or Stop.
 */
static enum mel_kind classify_other(const char *name, uint8_t opcode)
{
    if (opcode == OPCODE_START || (opcode == 0 && ends_with(name, "Start"))) {
        return K_LINK_START;
    }
    if (opcode == OPCODE_STOP || (opcode == 0 && ends_with(name, "Stop"))) {
        return K_LINK_STOP;
    }
    return K_NONE;
}

static enum mel_kind classify(const char *provider, const char *name, uint8_t opcode)
{
    if (strcmp(provider, MEL_PROVIDER) != 0) {
        return classify_other(name, opcode);
    }
    if (strcmp(name, "FormattedMessage") == 0) {
        return K_FORMATTED;
    }
    if (strcmp(name, "MessageJson") == 0) {
        return K_JSON;
    }
    if (strcmp(name, "ActivityJsonStart") == 0) {
        return K_SCOPE_START;
    }
    if (strcmp(name, "ActivityJsonStop") == 0) {
        return K_SCOPE_STOP;
    }
    return K_NONE;
}

static const struct md_entry *md_find(struct ev_logs *l, uint32_t id)
{
    const struct ev_schema_entry *e = ev_schemas_find(&l->md, id);
    return e != NULL ? e->slot : NULL;
}

static void sp_check(struct ev_logs *l);

static void on_metadata(void *ud, const struct nettrace_metadata *m, const uint8_t *p, size_t n)
{
    struct ev_logs *l = ud;
    sp_check(l); /* a V6 definition after a sequence point may replace one a held event uses */
    enum mel_kind kind = classify(m->provider, m->event_name, m->opcode);
    if (strcmp(m->provider, MEL_PROVIDER) == 0) {
        l->st.mel_metadata++;
    }
    if (l->err.err != 0 || kind == K_NONE) {
        ev_schemas_forget(&l->md, m->metadata_id); /* a V6 redefinition that is not kept */
        return;
    }
    struct ev_schema_entry *e = NULL;
    int rc = ev_schemas_define(&l->md, m, p, n, &e);
    if (rc == -ENOMEM) {
        logs_fail(l, rc, "out of memory");
        return;
    }
    if (rc == AGENT_E_BUDGET) {
        l->st.budget_dropped++;
    }
    if (rc != 0) {
        l->st.skipped++;
        return;
    }
    struct md_entry *md = e->slot;
    md->kind = kind;
    md->schema = e->schema;
    for (int k = 0; k < F_N; k++) {
        int idx = ev_schema_find(e->schema, field_names[k]);
        md->f[k] = (int16_t)(idx < 0 ? -1 : idx);
    }
}

/* ---- clock ------------------------------------------------------------------------------------
 */

/* An event timestamp (QPC ticks) as Unix milliseconds (docs/nettrace.md §2.3): false while the
 * trace's sync point is unknown or not a valid one. */
static bool event_time(struct ev_logs *l, int64_t ts, int64_t *unix_ms)
{
    return nettrace_event_unix_ms(&l->ck, ts, unix_ms) == 0;
}

/* ---- scopes -----------------------------------------------------------------------------------
 */

static uint32_t guid_hash(const uint8_t *g)
{
    uint32_t h = 2166136261u;
    for (int k = 0; k < 16; k++) {
        h = (h ^ g[k]) * 16777619u;
    }
    return h;
}

/* True for an absent (NULL: nettrace gives none for a zero id) or all-zero activity id. */
static bool guid_zero(const uint8_t *g)
{
    if (g == NULL) {
        return true;
    }
    for (int k = 0; k < 16; k++) {
        if (g[k] != 0) {
            return false;
        }
    }
    return true;
}

static void scope_release(struct ev_logs *l, struct scope *s)
{
    while (s != NULL && --s->refs == 0) {
        struct scope *parent = s->parent;
        mem_give(l, s->bytes);
        free(s->pairs);
        free(s);
        l->scopes_alive--;
        s = parent;
    }
}

static struct scope_slot *slot_find(struct ev_logs *l, const uint8_t *key)
{
    if (guid_zero(key)) {
        return NULL;
    }
    size_t mask = SCOPE_SLOTS - 1;
    for (size_t j = guid_hash(key) & mask, probes = 0; probes < SCOPE_SLOTS;
         j = (j + 1) & mask, probes++) {
        struct scope_slot *sl = &l->slots[j];
        if (sl->state == 0) {
            return NULL;
        }
        if (sl->state == 1 && memcmp(sl->key, key, 16) == 0) {
            return sl;
        }
    }
    return NULL;
}

/* Rebuilds the table without its deleted slots. */
static int slots_compact(struct ev_logs *l)
{
    struct scope_slot *old = l->slots;
    struct scope_slot *fresh = calloc(SCOPE_SLOTS, sizeof(*fresh));
    if (fresh == NULL) {
        return -ENOMEM;
    }
    l->slots = fresh;
    l->slots_used = 0;
    size_t mask = SCOPE_SLOTS - 1;
    for (size_t k = 0; k < SCOPE_SLOTS; k++) {
        if (old[k].state != 1) {
            continue;
        }
        size_t j = guid_hash(old[k].key) & mask;
        while (fresh[j].state != 0) {
            j = (j + 1) & mask;
        }
        fresh[j] = old[k];
        l->slots_used++;
    }
    free(old);
    return 0;
}

static void scope_remove(struct ev_logs *l, const uint8_t *key)
{
    struct scope_slot *sl = slot_find(l, key);
    if (sl != NULL) {
        sl->state = 2;
        scope_release(l, sl->s);
        sl->s = NULL;
    }
}

/* Stores s under key (replacing a scope already there); takes the caller's reference. */
static int scope_put(struct ev_logs *l, const uint8_t *key, struct scope *s)
{
    scope_remove(l, key);
    if (l->slots_used >= SCOPE_SLOTS * 3 / 4 && slots_compact(l) != 0) {
        return -ENOMEM;
    }
    if (l->slots_used >= SCOPE_SLOTS * 3 / 4) {
        return AGENT_E_TOOBIG;
    }
    size_t mask = SCOPE_SLOTS - 1;
    size_t j = guid_hash(key) & mask;
    while (l->slots[j].state == 1) {
        j = (j + 1) & mask;
    }
    if (l->slots[j].state == 0) {
        l->slots_used++;
    }
    memcpy(l->slots[j].key, key, 16);
    l->slots[j].state = 1;
    l->slots[j].link = false;
    l->slots[j].s = s;
    return 0;
}

/* scope_put, or on failure the reference given back and the failure counted. */
static void scope_store(struct ev_logs *l, const uint8_t *key, struct scope *s)
{
    int rc = scope_put(l, key, s);
    if (rc != 0) {
        scope_release(l, s);
        if (rc == -ENOMEM) {
            logs_fail(l, rc, "out of memory");
        } else {
            l->st.skipped++;
        }
    }
}

/* The size of pairs_dup's copy of kv[0..n). */
static size_t pairs_bytes(const struct ev_log_kv *kv, size_t n)
{
    size_t bytes = n * sizeof(*kv);
    for (size_t k = 0; k < n; k++) {
        bytes += strlen(kv[k].key) + 1;
        bytes += kv[k].kind == EV_LOG_STR ? strlen(kv[k].str) + 1 : 0;
    }
    return bytes;
}

/* A copy of kv[0..n) with its strings in one allocation of bytes (pairs_bytes). */
static struct ev_log_kv *pairs_dup(const struct ev_log_kv *kv, size_t n, size_t bytes)
{
    struct ev_log_kv *out = malloc(bytes > 0 ? bytes : 1);
    if (out == NULL) {
        return NULL;
    }
    char *t = (char *)(out + n);
    for (size_t k = 0; k < n; k++) {
        out[k] = kv[k];
        size_t len = strlen(kv[k].key) + 1;
        memcpy(t, kv[k].key, len);
        out[k].key = t;
        t += len;
        if (kv[k].kind == EV_LOG_STR) {
            len = strlen(kv[k].str) + 1;
            memcpy(t, kv[k].str, len);
            out[k].str = t;
            t += len;
        }
    }
    return out;
}

static void on_scope_start(struct ev_logs *l, const struct md_entry *md,
                           const struct nettrace_event *ev)
{
    bool ok = true;
    const char *args = field_str(l, md, F_ARGS, "{}", &ok);
    int n = ok ? json_pairs(l, args, l->kv, EV_LOGS_MAX_PAIRS) : -1;
    if (n < 0 || l->scopes_alive >= EV_LOGS_MAX_SCOPES || guid_zero(ev->activity_id)) {
        l->st.skipped++;
        return;
    }
    /* Over the share: the scope is not kept; records inside it are still delivered (with the
     * scopes around it that were kept). */
    size_t pb = pairs_bytes(l->kv, (size_t)n);
    size_t bytes = sizeof(struct scope) + (pb > 0 ? pb : 1);
    if (!mem_take(l, bytes)) {
        l->st.scopes_dropped++;
        l->st.budget_dropped++;
        scope_remove(l, ev->activity_id); /* a scope reusing the id is not the old one */
        return;
    }
    struct scope *s = calloc(1, sizeof(*s));
    if (s == NULL || (s->pairs = pairs_dup(l->kv, (size_t)n, pb)) == NULL) {
        free(s);
        mem_give(l, bytes);
        logs_fail(l, -ENOMEM, "out of memory");
        return;
    }
    s->bytes = bytes;
    s->refs = 1;
    s->npairs = (size_t)n;
    l->scopes_alive++;
    struct scope_slot *parent = slot_find(l, ev->related_activity_id);
    if (parent != NULL) {
        s->parent = parent->s;
        s->parent->refs++;
    }
    scope_store(l, ev->activity_id, s);
}

/*
 * Another provider's Start (DiagnosticSource's ActivityStart for an Activity, HttpClient's
 * RequestStart...): the runtime's ActivityTracker gives it an activity id nested under the current
 * one, and the records logged inside it carry that id, not the scope's. The id is linked to the
 * scope under its related activity id (a reference: the scope lives while a link to it does) so
 * that records and scopes started under it find their scopes; its Stop removes the link. A Start
 * the tracker did not nest carries the current id itself (a scope's, or no related id): nothing
 * to link, and nothing stored under that id is touched.
 */
static void on_link_start(struct ev_logs *l, const struct nettrace_event *ev)
{
    struct scope_slot *under = slot_find(l, ev->related_activity_id);
    if (under == NULL || guid_zero(ev->activity_id) || slot_find(l, ev->activity_id) != NULL) {
        return;
    }
    struct scope *s = under->s;
    s->refs++;
    scope_store(l, ev->activity_id, s);
    struct scope_slot *sl = slot_find(l, ev->activity_id);
    if (sl != NULL && sl->s == s) {
        sl->link = true;
    }
}

/* Another provider's Stop: removes the link its Start made, never a scope. */
static void on_link_stop(struct ev_logs *l, const struct nettrace_event *ev)
{
    struct scope_slot *sl = slot_find(l, ev->activity_id);
    if (sl != NULL && sl->link) {
        scope_remove(l, ev->activity_id);
    }
}

/* ---- records ----------------------------------------------------------------------------------
 */

/*
 * The message from an {OriginalFormat} template (LogValuesFormatter): "{{" and "}}" are braces,
 * each hole takes the next argument's text (its format and alignment ignored: values are strings).
 */
static const char *render_template(struct ev_logs *l, const char *fmt, const struct ev_log_kv *kv,
                                   size_t n)
{
    char *out = l->text + l->text_len;
    size_t room = sizeof(l->text) - l->text_len;
    size_t o = 0;
    size_t next = 0;
    if (room == 0) {
        return "";
    }
    size_t cap = room - 1 < EV_LOGS_MAX_STRING ? room - 1 : EV_LOGS_MAX_STRING;
    for (const char *p = fmt; *p != '\0';) {
        const char *piece = p;
        size_t len = 1;
        const char *close = *p == '{' && p[1] != '{' ? strchr(p, '}') : NULL;
        if ((*p == '{' && p[1] == '{') || (*p == '}' && p[1] == '}')) {
            p += 2;
        } else if (close != NULL) {
            while (next < n && strcmp(kv[next].key, "{OriginalFormat}") == 0) {
                next++;
            }
            if (next < n) {
                piece = kv[next].kind == EV_LOG_STR ? kv[next].str : "";
                len = strlen(piece);
                next++;
            } else {
                len = (size_t)(close - p) + 1;
            }
            p = close + 1;
        } else {
            p++;
        }
        if (len > cap - o) {
            len = utf8_cut(piece, len, cap - o);
            memcpy(out + o, piece, len);
            o += len;
            break;
        }
        memcpy(out + o, piece, len);
        o += len;
    }
    out[o] = '\0';
    l->text_len += o + 1;
    return out;
}

/* The scope chain of an event, outermost first, into l->chain. */
static size_t scope_chain(struct ev_logs *l, const struct nettrace_event *ev)
{
    struct scope_slot *sl = slot_find(l, ev->activity_id);
    if (sl == NULL) {
        sl = slot_find(l, ev->related_activity_id);
    }
    size_t n = 0;
    for (struct scope *s = sl != NULL ? sl->s : NULL; s != NULL && n < EV_LOGS_MAX_DEPTH;
         s = s->parent) {
        l->chain[n].npairs = s->npairs;
        l->chain[n].pairs = s->pairs;
        n++;
    }
    for (size_t a = 0, b = n; a + 1 < b; a++, b--) {
        struct ev_log_scope t = l->chain[a];
        l->chain[a] = l->chain[b - 1];
        l->chain[b - 1] = t;
    }
    return n;
}

/* ExceptionJson's VerboseMessage, TypeName and Message into r (NULLs for "{}" / none). */
static void exception_fields(struct ev_logs *l, const char *json, struct ev_log_record *r)
{
    struct ev_log_kv kv[8];
    int n = json_pairs(l, json, kv, 8);
    for (int k = 0; k < n; k++) {
        if (kv[k].kind != EV_LOG_STR) {
            continue;
        }
        if (strcmp(kv[k].key, "VerboseMessage") == 0) {
            r->exception = kv[k].str;
        } else if (strcmp(kv[k].key, "TypeName") == 0) {
            r->exception_type = kv[k].str;
        } else if (strcmp(kv[k].key, "Message") == 0) {
            r->exception_message = kv[k].str;
        }
    }
}

/* n bytes from 2n lowercase or uppercase hex digits; false unless s is exactly that. */
static bool hex_bytes(const char *s, uint8_t *out, size_t n)
{
    if (strlen(s) != 2 * n) {
        return false;
    }
    for (size_t k = 0; k < 2 * n; k++) {
        int v = hex_value(s[k]);
        if (v < 0) {
            return false;
        }
        out[k / 2] = (uint8_t)(k % 2 == 0 ? v << 4 : out[k / 2] | v);
    }
    return true;
}

/* The record's W3C trace context from the activity fields (all-zero ids count as none). */
static void trace_fields(struct ev_logs *l, const struct md_entry *md, struct ev_log_record *r)
{
    bool ok = true;
    const char *tid = field_str(l, md, F_TRACE_ID, "", &ok);
    const char *sid = field_str(l, md, F_SPAN_ID, "", &ok);
    const char *fl = field_str(l, md, F_TRACE_FLAGS, "", &ok);
    if (!ok || !hex_bytes(tid, r->trace_id, sizeof(r->trace_id)) ||
        !hex_bytes(sid, r->span_id, sizeof(r->span_id))) {
        return;
    }
    uint8_t any = 0;
    for (size_t k = 0; k < sizeof(r->trace_id); k++) {
        any |= r->trace_id[k];
    }
    r->has_trace = any != 0;
    r->trace_flags = fl[0] == '1' && fl[1] == '\0' ? 1 : 0;
}

static void on_message_json(struct ev_logs *l, const struct md_entry *md,
                            const struct nettrace_event *ev)
{
    bool ok = true;
    struct ev_log_record r = {0};
    r.level = (int)field_int(l, md, F_LEVEL);
    r.event_id = (int32_t)field_int(l, md, F_EVENT_ID);
    r.category = field_str(l, md, F_LOGGER, "", &ok);
    r.event_name = field_str(l, md, F_EVENT_NAME, "", &ok);
    const char *exc = field_str(l, md, F_EXCEPTION, "{}", &ok);
    const char *args = field_str(l, md, F_ARGS, "", &ok);
    if (!ok) {
        l->st.skipped++;
        return;
    }
    if (r.event_name[0] == '{') { /* the old runtime's swapped fields (events.md §4.3) */
        const char *t = exc;
        exc = r.event_name;
        r.event_name = t[0] == '{' ? "" : t;
    }
    int n = args[0] != '\0' ? json_pairs(l, args, l->kv, EV_LOGS_MAX_PAIRS) : 0;
    if (n <= 0) {
        l->st.dropped++;
        return;
    }
    const char *fmt = NULL;
    for (int k = 0; k < n; k++) {
        if (strcmp(l->kv[k].key, "{OriginalFormat}") == 0 && l->kv[k].kind == EV_LOG_STR) {
            fmt = l->kv[k].str;
        }
    }
    /* Without a template: the last FormattedMessage event's text (dotnet-monitor's rule; with
     * keyword 0x4 it comes right before its MessageJson), else the event's own FormattedMessage
     * field (the runtime fills it whatever the keywords: a session with keyword 0x8 alone has no
     * FormattedMessage event to remember and keeps the text). */
    bool own_ok = fmt == NULL && l->last_formatted == NULL;
    const char *own = own_ok ? field_str(l, md, F_FORMATTED, "", &own_ok) : "";
    r.message = fmt != NULL                 ? render_template(l, fmt, l->kv, (size_t)n)
                : l->last_formatted != NULL ? l->last_formatted
                : own_ok                    ? own
                                            : "";
    exception_fields(l, exc, &r);
    trace_fields(l, md, &r);
    r.has_state = true;
    r.nstate = (size_t)n;
    r.state = l->kv;
    r.nscopes = scope_chain(l, ev);
    r.scopes = l->chain;
    r.time_known = event_time(l, ev->timestamp, &r.unix_ms);
    if (r.level < EV_LOG_TRACE || r.level > EV_LOG_NONE) {
        r.level = EV_LOG_NONE;
    }
    l->st.records++;
    l->cb(l->ud, &r);
}

static void on_formatted(struct ev_logs *l, const struct md_entry *md)
{
    bool ok = true;
    const char *msg = field_str(l, md, F_FORMATTED, "", &ok);
    if (ok && msg[0] == '\0') {
        msg = field_str(l, md, F_EVENT_NAME, "", &ok);
    }
    if (!ok) {
        l->st.skipped++;
        return;
    }
    size_t len = strlen(msg);
    free(l->last_formatted);
    mem_give(l, l->last_formatted_bytes);
    l->last_formatted = NULL;
    l->last_formatted_bytes = 0;
    if (!mem_take(l, len + 1)) {
        l->st.budget_dropped++; /* the next MessageJson without a template gets "" */
        return;
    }
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        mem_give(l, len + 1);
        logs_fail(l, -ENOMEM, "out of memory");
        return;
    }
    memcpy(copy, msg, len + 1);
    l->last_formatted = copy;
    l->last_formatted_bytes = len + 1;
}

/* Acts on one kept event (not a FormattedMessage, which is taken as it arrives). */
static void act_on(struct ev_logs *l, const struct md_entry *md, const struct nettrace_event *ev)
{
    if (md->kind == K_SCOPE_STOP) {
        scope_remove(l, ev->activity_id);
        return;
    }
    if (md->kind == K_LINK_STOP) {
        on_link_stop(l, ev);
        return;
    }
    if (md->kind == K_LINK_START) {
        on_link_start(l, ev);
        return;
    }
    if (ev_record_decode(&l->rec, md->schema, ev->payload, ev->payload_len) != 0) {
        l->st.skipped++;
        return;
    }
    l->text_len = 0;
    if (md->kind == K_JSON) {
        on_message_json(l, md, ev);
    } else {
        on_scope_start(l, md, ev);
    }
}

/* ---- ordering (docs/events.md §4.4) -----------------------------------------------------------
 */

static bool held_before(const struct held *a, const struct held *b)
{
    return a->ts < b->ts || (a->ts == b->ts && a->seq < b->seq);
}

static void heap_push(struct ev_logs *l, struct held *h)
{
    size_t k = l->nheld++;
    while (k > 0 && held_before(h, l->heap[(k - 1) / 2])) {
        l->heap[k] = l->heap[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    l->heap[k] = h;
}

static struct held *heap_pop(struct ev_logs *l)
{
    struct held *top = l->heap[0];
    struct held *last = l->heap[--l->nheld];
    size_t k = 0;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= l->nheld) {
            break;
        }
        if (c + 1 < l->nheld && held_before(l->heap[c + 1], l->heap[c])) {
            c++;
        }
        if (!held_before(l->heap[c], last)) {
            break;
        }
        l->heap[k] = l->heap[c];
        k = c;
    }
    if (l->nheld > 0) {
        l->heap[k] = last;
    }
    return top;
}

/* The oldest held event acted on (with the FormattedMessage it arrived after) and freed. */
static void held_release(struct ev_logs *l)
{
    struct held *h = heap_pop(l);
    const struct md_entry *md = md_find(l, h->metadata_id);
    if (md != NULL && md->kind != K_NONE && md->kind != K_FORMATTED) {
        struct nettrace_event ev = {
            .metadata_id = h->metadata_id,
            .timestamp = h->ts,
            .activity_id = h->has_act ? h->act : NULL,
            .related_activity_id = h->has_rel ? h->rel : NULL,
            .payload = h->payload,
            .payload_len = h->payload_len,
        };
        char *last = l->last_formatted;
        l->last_formatted = h->formatted;
        act_on(l, md, &ev);
        l->last_formatted = last;
    }
    l->held_bytes -= h->bytes;
    mem_give(l, h->bytes);
    free(h);
}

/* Acts on the held events older than or as old as ts, oldest first; all of them with all. */
static void release_upto(struct ev_logs *l, int64_t ts, bool all)
{
    while (l->nheld > 0 && (all || l->heap[0]->ts <= ts)) {
        held_release(l);
    }
}

/* A sequence point read since the last look: every event before it has been read. */
static void sp_check(struct ev_logs *l)
{
    uint64_t sp = nettrace_get_stats(&l->ck)->blocks[NETTRACE_BLOCK_SP];
    if (sp != l->sp_seen) {
        l->sp_seen = sp;
        release_upto(l, 0, true);
    }
}

/*
 * Holds ev until no older event can come. Past the bounds the oldest held go first; an event that
 * cannot be held (the share is full) is acted on at once, after all the held ones.
 */
static void hold(struct ev_logs *l, const struct md_entry *md, const struct nettrace_event *ev)
{
    size_t flen = md->kind == K_JSON && l->last_formatted != NULL ? l->last_formatted_bytes : 0;
    /* Stops and links act on their ids alone: their payloads are not kept. */
    size_t plen = md->kind == K_JSON || md->kind == K_SCOPE_START ? ev->payload_len : 0;
    size_t bytes = sizeof(struct held) + plen + flen;
    while (l->nheld > 0 &&
           (l->nheld >= EV_LOGS_MAX_HELD || l->held_bytes + bytes > EV_LOGS_HELD_BYTES)) {
        l->st.order_forced++;
        held_release(l);
    }
    bool room = bytes <= EV_LOGS_HELD_BYTES && mem_take(l, bytes);
    if (!room && l->nheld > 0) {
        l->st.order_forced += l->nheld;
        release_upto(l, 0, true);
        room = bytes <= EV_LOGS_HELD_BYTES && mem_take(l, bytes);
    }
    if (!room) {
        l->st.order_forced++;
        act_on(l, md, ev);
        return;
    }
    struct held *h = malloc(bytes);
    if (h == NULL) {
        mem_give(l, bytes);
        logs_fail(l, -ENOMEM, "out of memory");
        return;
    }
    *h = (struct held){.ts = ev->timestamp,
                       .seq = l->held_seq++,
                       .metadata_id = ev->metadata_id,
                       .has_act = ev->activity_id != NULL,
                       .has_rel = ev->related_activity_id != NULL,
                       .bytes = bytes,
                       .payload_len = plen};
    if (h->has_act) {
        memcpy(h->act, ev->activity_id, 16);
    }
    if (h->has_rel) {
        memcpy(h->rel, ev->related_activity_id, 16);
    }
    if (plen > 0) {
        memcpy(h->payload, ev->payload, plen);
    }
    if (flen > 0) {
        h->formatted = (char *)h->payload + plen;
        memcpy(h->formatted, l->last_formatted, flen);
    }
    l->held_bytes += bytes;
    heap_push(l, h);
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_logs *l = ud;
    if (strcmp(ev->provider, MEL_PROVIDER) == 0) {
        l->st.mel_events++;
    }
    sp_check(l);
    const struct md_entry *md = l->err.err == 0 ? md_find(l, ev->metadata_id) : NULL;
    if (md != NULL && md->kind == K_FORMATTED) {
        if (ev_record_decode(&l->rec, md->schema, ev->payload, ev->payload_len) != 0) {
            l->st.skipped++;
        } else {
            l->text_len = 0;
            on_formatted(l, md);
        }
    } else if (md != NULL && md->kind == K_JSON && l->nheld == 0 && ev->activity_id == NULL &&
               ev->related_activity_id == NULL) {
        act_on(l, md, ev); /* outside every scope, nothing before it held: no order to keep */
    } else if (md != NULL && md->kind != K_NONE) {
        hold(l, md, ev);
    }
    if (ev->sorted) {
        release_upto(l, ev->timestamp, false);
    }
}

/* ---- public API -------------------------------------------------------------------------------
 */

int ev_logs_new(struct ev_logs **out, ev_logs_record_cb cb, void *ud)
{
    if (out == NULL || cb == NULL) {
        return AGENT_E_INVAL;
    }
    int rc = -ENOMEM;
    struct ev_logs *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return -ENOMEM;
    }
    l->cb = cb;
    l->ud = ud;
    struct ev_schemas_config mcfg = {.slot_size = sizeof(struct md_entry), .max_ids = MAX_METADATA};
    ev_schemas_init(&l->md, &mcfg);
    if ((l->slots = calloc(SCOPE_SLOTS, sizeof(*l->slots))) == NULL) {
        goto fail;
    }
    struct nettrace_options nopt = {.max_metadata = MAX_METADATA};
    if ((rc = nettrace_checker_init(&l->ck, &nopt)) < 0) {
        goto fail;
    }
    nettrace_set_event_cb(&l->ck, on_event, l);
    nettrace_set_metadata_cb(&l->ck, on_metadata, l);
    *out = l;
    return 0;
fail:
    ev_logs_free(l);
    return rc;
}

int ev_logs_set_share(struct ev_logs *l, struct mb_share *share)
{
    if (l->held != 0 || ev_schemas_set_share(&l->md, share) != 0) {
        return AGENT_E_INVAL; /* charged elsewhere already */
    }
    l->share = share;
    return 0;
}

size_t ev_logs_footprint(void)
{
    return sizeof(struct ev_logs) + SCOPE_SLOTS * sizeof(struct scope_slot);
}

int ev_logs_feed(struct ev_logs *l, const uint8_t *p, size_t n)
{
    l->fed_since_tick = true;
    int rc = nettrace_sticky_feed(&l->ck, &l->err, p, n);
    sp_check(l);
    if (rc != 0 || nettrace_status(&l->ck) == NETTRACE_COMPLETE) {
        release_upto(l, 0, true); /* nothing comes after the end, or after a failure */
    }
    return rc;
}

void ev_logs_flush(struct ev_logs *l)
{
    release_upto(l, 0, true);
}

void ev_logs_tick(struct ev_logs *l)
{
    if (!l->fed_since_tick) {
        release_upto(l, 0, true);
    }
    l->fed_since_tick = false;
}

const char *ev_logs_error(const struct ev_logs *l)
{
    return l->err.err != 0 ? l->err.msg : NULL;
}

void ev_logs_get_stats(const struct ev_logs *l, struct ev_logs_stats *out)
{
    const struct nettrace_stats *st = nettrace_get_stats(&l->ck);
    *out = l->st;
    out->bytes = st->bytes;
    out->events = st->events;
    out->lost = st->lost;
    out->scopes = l->scopes_alive;
    out->held = l->held + ev_schemas_held(&l->md);
    out->ordering = l->nheld;
}

void ev_logs_free(struct ev_logs *l)
{
    if (l == NULL) {
        return;
    }
    nettrace_checker_fini(&l->ck);
    for (size_t k = 0; k < l->nheld; k++) {
        mem_give(l, l->heap[k]->bytes);
        free(l->heap[k]);
    }
    for (size_t k = 0; l->slots != NULL && k < SCOPE_SLOTS; k++) {
        if (l->slots[k].state == 1) {
            scope_release(l, l->slots[k].s);
        }
    }
    free(l->slots);
    ev_schemas_fini(&l->md);
    free(l->last_formatted);
    mem_give(l, l->last_formatted_bytes);
    free(l);
}

/* ---- formats (docs/api.md §6) -----------------------------------------------------------------
 */

static const char *const level_names[] = {"Trace", "Debug",    "Information", "Warning",
                                          "Error", "Critical", "None"};
static const char *const level_tokens[] = {"trce", "dbug", "info", "warn", "fail", "crit", "none"};

const char *ev_log_level_name(int level)
{
    return level >= 0 && level <= EV_LOG_NONE ? level_names[level] : NULL;
}

int ev_log_level_parse(const char *s)
{
    if (s == NULL) {
        return -1;
    }
    if (s[0] >= '0' && s[0] <= '6' && s[1] == '\0') {
        return s[0] - '0';
    }
    for (int k = 0; k <= EV_LOG_NONE; k++) {
        const char *a = level_names[k];
        size_t i = 0;
        while (a[i] != '\0' && s[i] != '\0' && (s[i] | 0x20) == (a[i] | 0x20)) {
            i++;
        }
        if (a[i] == '\0' && s[i] == '\0') {
            return k;
        }
    }
    return -1;
}

/* "yyyy-MM-dd HH:mm:ssZ" (.NET "u") of Unix milliseconds, into out[21]. */
static void format_time(int64_t unix_ms, char out[32])
{
    int64_t secs = unix_ms >= 0 ? unix_ms / 1000 : (unix_ms - 999) / 1000;
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t rem = secs - days * 86400;
    int64_t y;
    int m, d;
    civil_date(days, &y, &m, &d);
    int len = snprintf(out, 32, "%04lld-%02lld-%02lld %02lld:%02lld:%02lldZ", (long long)y,
                       (long long)m, (long long)d, (long long)(rem / 3600),
                       (long long)(rem / 60 % 60), (long long)(rem % 60));
    if (len < 0) {
        out[0] = '\0';
    }
}

static int json_str(struct buf *b, const char *s)
{
    int rc = buf_append(b, "\"", 1);
    if (rc == 0) {
        rc = buf_append_json_escaped(b, s);
    }
    return rc != 0 ? rc : buf_append(b, "\"", 1);
}

static int json_value(struct buf *b, const struct ev_log_kv *kv)
{
    switch (kv->kind) {
    case EV_LOG_INT:
        return buf_printf(b, "%d", (int)kv->num);
    case EV_LOG_BOOL:
        return buf_append_str(b, kv->num ? "true" : "false");
    case EV_LOG_NULL:
        return buf_append_str(b, "null");
    default:
        return json_str(b, kv->str);
    }
}

/* ,"key":value for each pair (first_comma: a comma before the first one too). */
static int json_pairs_out(struct buf *b, const struct ev_log_kv *kv, size_t n, bool first_comma)
{
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        if (k > 0 || first_comma) {
            rc = buf_append(b, ",", 1);
        }
        if (rc == 0) {
            rc = json_str(b, kv[k].key);
        }
        if (rc == 0) {
            rc = buf_append(b, ":", 1);
        }
        if (rc == 0) {
            rc = json_value(b, &kv[k]);
        }
    }
    return rc;
}

static int format_json(const struct ev_log_record *r, struct buf *b)
{
    char ts[32] = "";
    if (r->time_known) {
        format_time(r->unix_ms, ts);
    }
    const char *lv = ev_log_level_name(r->level);
    int rc = buf_printf(b, "{\"Timestamp\":\"%s\",\"LogLevel\":\"%s\",\"EventId\":%d,", ts,
                        lv != NULL ? lv : "None", (int)r->event_id);
    rc = rc != 0 ? rc : buf_append_str(b, "\"EventName\":");
    rc = rc != 0 ? rc : json_str(b, r->event_name);
    rc = rc != 0 ? rc : buf_append_str(b, ",\"Category\":");
    rc = rc != 0 ? rc : json_str(b, r->category);
    rc = rc != 0 ? rc : buf_append_str(b, ",\"Message\":");
    rc = rc != 0 ? rc : json_str(b, r->message);
    if (rc == 0 && r->exception != NULL) {
        rc = buf_append_str(b, ",\"Exception\":");
        rc = rc != 0 ? rc : json_str(b, r->exception);
    }
    if (rc == 0 && r->has_state) {
        rc = buf_append_str(b, ",\"State\":{\"Message\":");
        rc = rc != 0 ? rc : json_str(b, r->message);
        rc = rc != 0 ? rc : json_pairs_out(b, r->state, r->nstate, true);
        rc = rc != 0 ? rc : buf_append(b, "}", 1);
    }
    if (rc == 0 && r->nscopes > 0) {
        rc = buf_append_str(b, ",\"Scopes\":[");
        for (size_t k = 0; rc == 0 && k < r->nscopes; k++) {
            rc = buf_append_str(b, k > 0 ? ",{" : "{");
            rc = rc != 0 ? rc : json_pairs_out(b, r->scopes[k].pairs, r->scopes[k].npairs, false);
            rc = rc != 0 ? rc : buf_append(b, "}", 1);
        }
        rc = rc != 0 ? rc : buf_append(b, "]", 1);
    }
    return rc != 0 ? rc : buf_append(b, "}\n", 2);
}

/* s with every line after a newline indented by 6 spaces ("\r\n" and "\n" both end lines). */
static int plain_indented(struct buf *b, const char *s)
{
    int rc = buf_append_str(b, "      ");
    while (rc == 0 && *s != '\0') {
        size_t len = strcspn(s, "\r\n");
        rc = buf_append(b, s, len);
        s += len;
        if (*s == '\r' && s[1] == '\n') {
            s++;
        }
        if (*s != '\0') {
            s++;
            rc = rc != 0 ? rc : buf_append_str(b, "\n      ");
        }
    }
    return rc != 0 ? rc : buf_append(b, "\n", 1);
}

static int plain_value(struct buf *b, const struct ev_log_kv *kv)
{
    switch (kv->kind) {
    case EV_LOG_INT:
        return buf_printf(b, "%d", (int)kv->num);
    case EV_LOG_BOOL:
        return buf_append_str(b, kv->num ? "True" : "False");
    case EV_LOG_NULL:
        return 0;
    default:
        return buf_append_str(b, kv->str);
    }
}

static int format_plain(const struct ev_log_record *r, struct buf *b)
{
    char ts[32] = "";
    if (r->time_known) {
        format_time(r->unix_ms, ts);
    }
    int lv = r->level >= 0 && r->level <= EV_LOG_NONE ? r->level : EV_LOG_NONE;
    int rc = buf_printf(b, "%s %s: %s[%d]", ts, level_tokens[lv], r->category, (int)r->event_id);
    if (rc == 0 && r->event_name[0] != '\0') {
        rc = buf_printf(b, "[%s]", r->event_name);
    }
    rc = rc != 0 ? rc : buf_append(b, "\n", 1);
    if (rc == 0 && r->nscopes > 0) {
        rc = buf_append_str(b, "      ");
        for (size_t k = 0; rc == 0 && k < r->nscopes; k++) {
            rc = buf_append_str(b, k > 0 ? " => " : "=> ");
            for (size_t i = 0; rc == 0 && i < r->scopes[k].npairs; i++) {
                const struct ev_log_kv *kv = &r->scopes[k].pairs[i];
                rc = buf_printf(b, "%s%s:", i > 0 ? ", " : "", kv->key);
                rc = rc != 0 ? rc : plain_value(b, kv);
            }
        }
        rc = rc != 0 ? rc : buf_append(b, "\n", 1);
    }
    rc = rc != 0 ? rc : plain_indented(b, r->message);
    if (rc == 0 && r->exception != NULL) {
        rc = plain_indented(b, r->exception);
    }
    return rc;
}

int ev_logs_format_record(const struct ev_log_record *r, enum ev_logs_format f, struct buf *out)
{
    if (f == EV_LOGS_PLAIN) {
        return format_plain(r, out);
    }
    if (f == EV_LOGS_JSON_SEQ) {
        int rc = buf_append(out, "\x1e", 1);
        if (rc != 0) {
            return rc;
        }
    }
    return format_json(r, out);
}
