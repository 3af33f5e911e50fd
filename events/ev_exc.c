/* SPDX-License-Identifier: MIT */
/* The first-chance exceptions of one process, in /exceptions' shapes; see ev_exc.h. */
#include "ev_exc.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "ascii.h"
#include "buf.h"
#include "civil.h"
#include "err.h"
#include "ev_json.h"
#include "ev_profile.h"
#include "ev_rd.h"
#include "ev_stacks.h"
#include "ev_store.h"
#include "membudget.h"

#define OUT_BATCH     (64u * 1024u) /* output handed to the sink in pieces of about this size */
#define RING_MIN      16u           /* the history's first slots */
#define GROUP_BUCKETS (2u * EV_EXC_MAX_GROUPS)
#define CUT_CAP       (EV_EXC_MAX_STRING + sizeof(EV_CUT_MARKER))
/*
 * UTF-16 units converted at most: each unit is at least one UTF-8 byte, so EV_EXC_MAX_STRING + 1
 * units tell that a string is longer than the cut (a surrogate pair split at the last unit lands
 * past the cut). A 30,000-character type costs no more than a short one.
 */
#define MAX_UNITS   (EV_EXC_MAX_STRING + 1u)
#define JSON_SEQ_RS "\x1e" /* RFC 7464's record separator */

/*
 * One kept exception, in one allocation: the record, its stack (leaf first), then its type and
 * message as NUL-terminated UTF-8.
 */
struct inst {
    uint64_t id;
    int64_t unix_ns;
    uint64_t thread;
    size_t bytes; /* charged for it, all of the allocation */
    uint32_t n_ips;
    uint32_t type_len;
    uint32_t msg_len;
    uint64_t ips[];
};

/*
 * Exceptions of one type and the same first ips of their stacks. Every slot below ngroups is in
 * use. key is one allocation: the ips (group_nkey), then the type as NUL-terminated UTF-8.
 */
struct group {
    uint64_t *key;
    uint64_t hash;  /* of the type and the ips (group_hash) */
    uint32_t n_ips; /* the stack's first ips, at most EV_EXC_GROUP_IPS; 0: key[0] is the EIP */
    uint32_t type_len;
    uint64_t count;
    uint64_t first_id;
    uint64_t last_id;
    int64_t last_ns;
    uint32_t next; /* the bucket's next group: index + 1, 0 at the end */
};

struct ev_exc {
    struct ev_exc_limits lim;
    uint64_t held;       /* bytes charged now, the store itself included */
    uint64_t inst_bytes; /* the instances' part of held: what max_bytes bounds */
    /* The history, oldest first: ring[(head + i) % cap] has id ring[head]->id + i. */
    struct inst **ring;
    size_t head, count, cap;
    struct group *groups;
    size_t ngroups, cap_groups;
    uint32_t *buckets; /* GROUP_BUCKETS chain heads (group index + 1), NULL before the first */
    const struct ev_exc_filters *kept; /* ev_exc_set_filters' (borrowed; NULL: none) */
    struct ev_exc_stats st;
};

static const char *inst_type(const struct inst *in)
{
    return (const char *)(in->ips + in->n_ips);
}

static const char *inst_msg(const struct inst *in)
{
    return inst_type(in) + in->type_len + 1;
}

/* Where the strings go, while the instance is filled in. */
static char *inst_strings(struct inst *in)
{
    return (char *)(in->ips + in->n_ips);
}

static struct inst *inst_at(const struct ev_exc *x, size_t i)
{
    return x->ring[(x->head + i) % x->cap];
}

/* n more bytes charged to the share before they are held: 0 or AGENT_E_BUDGET. */
static int take(struct ev_exc *x, size_t n)
{
    if (mb_charge(x->lim.share, n) != 0) {
        return AGENT_E_BUDGET;
    }
    x->held += n;
    return 0;
}

static void give(struct ev_exc *x, size_t n)
{
    mb_release(x->lim.share, n);
    x->held -= n;
}

int ev_exc_new(const struct ev_exc_limits *limits, struct ev_exc **out)
{
    if (limits == NULL || limits->max_instances == 0 || limits->max_bytes == 0) {
        return AGENT_E_INVAL;
    }
    if (mb_charge(limits->share, sizeof(struct ev_exc)) != 0) {
        return AGENT_E_BUDGET;
    }
    struct ev_exc *x = calloc(1, sizeof(*x));
    if (x == NULL) {
        mb_release(limits->share, sizeof(struct ev_exc));
        return -ENOMEM;
    }
    x->lim = *limits;
    x->held = sizeof(*x);
    *out = x;
    return 0;
}

void ev_exc_free(struct ev_exc *x)
{
    if (x == NULL) {
        return;
    }
    for (size_t i = 0; i < x->count; i++) {
        free(inst_at(x, i));
    }
    for (size_t i = 0; i < x->ngroups; i++) {
        free(x->groups[i].key);
    }
    free(x->ring);
    free(x->groups);
    free(x->buckets);
    /* held is every charge still standing: the pieces above and the store itself. */
    mb_release(x->lim.share, x->held);
    free(x);
}

void ev_exc_set_filters(struct ev_exc *x, const struct ev_exc_filters *f)
{
    x->kept = f;
}

void ev_exc_get_stats(const struct ev_exc *x, struct ev_exc_stats *out)
{
    *out = x->st;
    out->kept = x->count;
    out->groups = x->ngroups;
    out->bytes = x->held;
}

static int lead_skip(struct ev_symbols *sym, const uint64_t *ips, size_t n, size_t *skip);

int ev_exc_unnamed(const struct ev_exc *x, struct ev_symbols *sym, uint64_t after_id, size_t *out)
{
    *out = 0;
    uint64_t first = x->count > 0 ? inst_at(x, 0)->id : 0;
    uint64_t skip = after_id < first ? 0 : after_id - first + 1;
    for (size_t i = skip < x->count ? (size_t)skip : x->count; i < x->count; i++) {
        const struct inst *in = inst_at(x, i);
        size_t lead = 0; /* the frames the writers leave out are not asked to be named */
        int lrc = lead_skip(sym, in->ips, in->n_ips, &lead);
        if (lrc != 0) {
            return lrc;
        }
        for (size_t k = lead; k < in->n_ips; k++) {
            struct ev_symbols_frame f;
            int rc = sym != NULL ? ev_symbols_frame_of(sym, in->ips[k], &f) : AGENT_E_NOTFOUND;
            if (rc == AGENT_E_NOTFOUND) {
                (*out)++;
                break;
            }
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* ---- groups ---- */

/* The ips a group is keyed by: its stack's first, or the EIP alone. */
static uint32_t group_nkey(uint32_t n_ips)
{
    return n_ips > 0 ? n_ips : 1;
}

static const char *group_type(const struct group *g)
{
    return (const char *)(g->key + group_nkey(g->n_ips));
}

/* Bytes of g's key allocation, charged while it is held. */
static size_t group_bytes(const struct group *g)
{
    return group_nkey(g->n_ips) * sizeof(uint64_t) + g->type_len + 1;
}

/* FNV-1a over the type, then the number of ips and each ip mixed in. */
static uint64_t group_hash(const char *type, size_t len, const uint64_t *key, uint32_t n_ips)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++) {
        h = (h ^ (uint8_t)type[i]) * 0x100000001b3ull;
    }
    h = (h ^ n_ips) * 0x100000001b3ull;
    for (uint32_t i = 0; i < group_nkey(n_ips); i++) {
        h = (h ^ key[i]) * 0x9e3779b97f4a7c15ull;
        h ^= h >> 29;
    }
    return h;
}

static uint32_t group_bucket(uint64_t hash)
{
    return (uint32_t)((hash ^ (hash >> 32)) & (GROUP_BUCKETS - 1));
}

static struct group *group_find(struct ev_exc *x, uint64_t hash, const char *type, size_t len,
                                const uint64_t *key, uint32_t n_ips)
{
    for (uint32_t g = x->buckets[group_bucket(hash)]; g != 0; g = x->groups[g - 1].next) {
        struct group *c = &x->groups[g - 1];
        if (c->hash == hash && c->n_ips == n_ips && c->type_len == len &&
            memcmp(c->key, key, group_nkey(n_ips) * sizeof(uint64_t)) == 0 &&
            memcmp(group_type(c), type, len) == 0) {
            return c;
        }
    }
    return NULL;
}

/* Takes group idx out of its bucket's chain. */
static void group_unlink(struct ev_exc *x, uint32_t idx)
{
    struct group *g = &x->groups[idx];
    uint32_t *link = &x->buckets[group_bucket(g->hash)];
    while (*link != idx + 1) {
        link = &x->groups[*link - 1].next;
    }
    *link = g->next;
}

/*
 * A slot for a new group: a new one while there are fewer than EV_EXC_MAX_GROUPS, else the least
 * recently thrown group's (evicted). 0, AGENT_E_BUDGET or -ENOMEM.
 */
static int group_slot(struct ev_exc *x, uint32_t *out)
{
    if (x->ngroups == EV_EXC_MAX_GROUPS) {
        uint32_t lru = 0;
        for (uint32_t i = 1; i < x->ngroups; i++) {
            lru = x->groups[i].last_id < x->groups[lru].last_id ? i : lru;
        }
        group_unlink(x, lru);
        give(x, group_bytes(&x->groups[lru]));
        free(x->groups[lru].key);
        x->groups[lru].key = NULL;
        x->st.groups_evicted++;
        *out = lru;
        return 0;
    }
    if (x->ngroups == x->cap_groups) {
        size_t ncap = x->cap_groups != 0 ? x->cap_groups * 2 : 16;
        ncap = ncap < EV_EXC_MAX_GROUPS ? ncap : EV_EXC_MAX_GROUPS;
        if (take(x, (ncap - x->cap_groups) * sizeof(struct group)) != 0) {
            return AGENT_E_BUDGET;
        }
        struct group *ng = realloc(x->groups, ncap * sizeof(*ng));
        if (ng == NULL) {
            give(x, (ncap - x->cap_groups) * sizeof(struct group));
            return -ENOMEM;
        }
        x->groups = ng;
        x->cap_groups = ncap;
    }
    *out = (uint32_t)x->ngroups++;
    return 0;
}

/* A new group for in keyed by key[0..n_ips) (the EIP alone when 0): its key copied first
 * (charged), then a slot. */
static int group_new(struct ev_exc *x, const struct inst *in, const uint64_t *key, uint32_t n_ips,
                     uint64_t hash)
{
    struct group g = {.hash = hash, .n_ips = n_ips, .type_len = in->type_len, .first_id = in->id};
    size_t bytes = group_bytes(&g);
    if (take(x, bytes) != 0) {
        return AGENT_E_BUDGET;
    }
    g.key = malloc(bytes);
    uint32_t idx = 0;
    int rc = g.key == NULL ? -ENOMEM : group_slot(x, &idx);
    if (rc != 0) {
        give(x, bytes);
        free(g.key);
        return rc;
    }
    memcpy(g.key, key, group_nkey(n_ips) * sizeof(uint64_t));
    memcpy(g.key + group_nkey(n_ips), inst_type(in), in->type_len + 1);
    /* Chained after the slot is made: an eviction may have changed the bucket's head. */
    g.next = x->buckets[group_bucket(hash)];
    x->groups[idx] = g;
    x->buckets[group_bucket(hash)] = idx + 1;
    return 0;
}

/*
 * Counts in (just kept) in its group: its type and its stack's first EV_EXC_GROUP_IPS ips, or
 * eip without a stack. A group that cannot be kept is only counted.
 */
static void group_note(struct ev_exc *x, const struct inst *in, uint64_t eip)
{
    int rc = 0;
    if (x->buckets == NULL) {
        rc = take(x, GROUP_BUCKETS * sizeof(uint32_t));
        x->buckets = rc == 0 ? calloc(GROUP_BUCKETS, sizeof(uint32_t)) : NULL;
        if (rc == 0 && x->buckets == NULL) {
            give(x, GROUP_BUCKETS * sizeof(uint32_t));
            rc = -ENOMEM;
        }
    }
    uint32_t n_ips = in->n_ips < EV_EXC_GROUP_IPS ? in->n_ips : EV_EXC_GROUP_IPS;
    const uint64_t *key = n_ips > 0 ? in->ips : &eip;
    uint64_t hash = group_hash(inst_type(in), in->type_len, key, n_ips);
    struct group *g = rc == 0 ? group_find(x, hash, inst_type(in), in->type_len, key, n_ips) : NULL;
    if (rc == 0 && g == NULL) {
        rc = group_new(x, in, key, n_ips, hash);
        g = rc == 0 ? &x->groups[x->buckets[group_bucket(hash)] - 1] : NULL;
    }
    if (rc != 0) {
        x->st.groups_dropped++;
        return;
    }
    g->count++;
    g->last_id = in->id;
    g->last_ns = in->unix_ns;
}

/* ---- keeping ---- */

/* The UTF-16LE s[0..units) as UTF-8 cut at EV_EXC_MAX_STRING bytes (ev_name_cut) into out. */
static uint32_t utf8_of(const uint8_t *s, size_t units, char out[CUT_CAP])
{
    char full[3 * MAX_UNITS + 1];
    size_t n = 0;
    units = units < MAX_UNITS ? units : MAX_UNITS;
    if (ev_utf16_to_utf8(s, units, full, sizeof(full), &n) != 0) {
        n = 0; /* not reached: full holds 3 bytes per unit */
        full[0] = '\0';
    }
    const char *cut = ev_name_cut(full, EV_EXC_MAX_STRING, out, CUT_CAP);
    if (cut == full) {
        memcpy(out, full, n + 1);
    }
    return (uint32_t)strlen(out);
}

/* Drops the oldest instance. */
static void evict_oldest(struct ev_exc *x)
{
    struct inst *old = x->ring[x->head];
    x->inst_bytes -= old->bytes;
    give(x, old->bytes);
    free(old);
    x->head = (x->head + 1) % x->cap;
    x->count--;
    x->st.evicted++;
}

/* Room for one more slot in the history (up to max_instances): 0, AGENT_E_BUDGET or -ENOMEM. */
static int ring_room(struct ev_exc *x)
{
    if (x->count < x->cap) {
        return 0;
    }
    size_t ncap = x->cap != 0 ? x->cap * 2 : RING_MIN;
    ncap = ncap < x->lim.max_instances && ncap > x->cap ? ncap : x->lim.max_instances;
    size_t grow = (ncap - x->cap) * sizeof(struct inst *);
    if (take(x, grow) != 0) {
        return AGENT_E_BUDGET;
    }
    struct inst **nr = malloc(ncap * sizeof(struct inst *));
    if (nr == NULL) {
        give(x, grow);
        return -ENOMEM;
    }
    for (size_t i = 0; i < x->count; i++) { /* unwrapped: the oldest at 0 */
        nr[i] = inst_at(x, i);
    }
    free(x->ring);
    x->ring = nr;
    x->head = 0;
    x->cap = ncap;
    return 0;
}

/*
 * Charges need bytes for a new instance, then drops the oldest while the history is over its
 * limits with it, then makes its slot. 0, AGENT_E_BUDGET (nothing charged) or -ENOMEM.
 */
static int make_room(struct ev_exc *x, size_t need)
{
    if (need > x->lim.max_bytes) {
        return AGENT_E_BUDGET;
    }
    /* A full share makes room the same way: the history holds the newest */
    while (take(x, need) != 0) {
        if (x->count == 0) {
            return AGENT_E_BUDGET;
        }
        evict_oldest(x);
    }
    while (x->count > 0 &&
           (x->count >= x->lim.max_instances || x->inst_bytes + need > x->lim.max_bytes)) {
        evict_oldest(x);
    }
    int rc = ring_room(x);
    if (rc != 0) {
        give(x, need);
    }
    return rc;
}

int ev_exc_add(struct ev_exc *x, const struct ev_exc_event *e)
{
    struct ev_exception_thrown t;
    if (e->n_ips > 0 && e->ips == NULL) {
        return AGENT_E_INVAL;
    }
    int rc = ev_exception_thrown_read(e->payload, e->len, e->version, e->pointer_size, &t);
    rc = rc == 0 && e->version == 0 ? AGENT_E_PROTO : rc; /* V0: no type to show */
    if (rc != 0) {
        x->st.malformed += rc == AGENT_E_PROTO;
        return rc;
    }
    char type[CUT_CAP], msg[CUT_CAP];
    uint32_t type_len = utf8_of(t.type, t.type_units, type);
    uint32_t msg_len = utf8_of(t.message, t.message_units, msg);
    size_t n_ips = e->n_ips < EV_EXC_MAX_FRAMES ? e->n_ips : EV_EXC_MAX_FRAMES;
    size_t need = sizeof(struct inst) + n_ips * sizeof(uint64_t) + type_len + msg_len + 2;
    rc = make_room(x, need);
    struct inst *in = rc == 0 ? malloc(need) : NULL;
    if (rc == 0 && in == NULL) {
        give(x, need);
        rc = -ENOMEM;
    }
    if (rc != 0) {
        x->st.dropped += rc == AGENT_E_BUDGET;
        return rc;
    }
    *in = (struct inst){.id = ++x->st.added,
                        .unix_ns = e->unix_ns,
                        .thread = e->thread,
                        .bytes = need,
                        .n_ips = (uint32_t)n_ips,
                        .type_len = type_len,
                        .msg_len = msg_len};
    if (n_ips > 0) {
        memcpy(in->ips, e->ips, n_ips * sizeof(uint64_t));
    }
    memcpy(inst_strings(in), type, type_len + 1);
    memcpy(inst_strings(in) + type_len + 1, msg, msg_len + 1);
    x->ring[(x->head + x->count) % x->cap] = in;
    x->count++;
    x->inst_bytes += need;
    group_note(x, in, t.eip);
    return 0;
}

/* ---- filters (dotnet-monitor's ExceptionsConfigurationSettings) ---- */

static bool is_set(const char *v)
{
    return v != NULL && v[0] != '\0';
}

/* Ordinal comparison of a filter value with s[0..n). */
static bool eq_n(const char *want, const char *s, size_t n)
{
    return strlen(want) == n && memcmp(want, s, n) == 0;
}

/* The module's name as the JSON writes it: module then its extension ("TestApp" ".dll"). */
static bool eq_module(const char *want, const struct ev_symbols_frame *f)
{
    size_t m = strlen(f->module);
    return strncmp(want, f->module, m) == 0 && strcmp(want + m, f->module_ext) == 0;
}

/*
 * One entry against an exception of type exc_type (an instance's, a group's) and its top frame:
 * every member set is compared (the frame's only when there is a top frame) and all must be
 * equal. With nothing compared, the entry matches as dotnet-monitor's evaluation starts: `include
 * = true` for an include entry, `exclude ?? false` for an exclude one. So an include entry naming
 * only frame members keeps every exception without a frame, where the same exclude entry drops
 * none.
 */
static bool entry_matches(const struct ev_exc_filter *c, const char *exc_type,
                          const struct ev_symbols_frame *top, bool if_none)
{
    bool compared = false, eq = true;
    if (top != NULL && is_set(c->method_name)) {
        compared = true;
        eq = eq && eq_n(c->method_name, top->method, top->method_len);
    }
    if (top != NULL && is_set(c->module_name)) {
        compared = true;
        eq = eq && eq_module(c->module_name, top);
    }
    if (top != NULL && is_set(c->type_name)) {
        compared = true;
        eq = eq && eq_n(c->type_name, top->type, top->type_len);
    }
    if (is_set(c->exception_type)) {
        compared = true;
        eq = eq && strcmp(c->exception_type, exc_type) == 0;
    }
    return compared ? eq : if_none;
}

static bool any_matches(const struct ev_exc_filter *list, size_t n, const char *exc_type,
                        const struct ev_symbols_frame *top, bool if_none)
{
    for (size_t i = 0; i < n; i++) {
        if (entry_matches(&list[i], exc_type, top, if_none)) {
            return true;
        }
    }
    return false;
}

/* ---- writing ---- */

struct xw {
    struct ev_symbols *sym;
    const struct ev_exc_filters *kept;
    const struct ev_exc_filter *include;
    size_t ninclude;
    const struct ev_exc_filter *exclude;
    size_t nexclude;
    enum ev_exc_format fmt;
    const char *(*thread_name)(void *ud, uint64_t thread);
    void *name_ud;
    ev_symbols_sink_cb sink;
    void *ud;
    struct buf b; /* output not yet handed to the sink */
    size_t skip;  /* the instance's leading frames not shown (lead_skip) */
};

#define EH_TYPE "System.Runtime.EH" /* .NET 9+'s managed exception dispatch */

/*
 * How many of the leading frames of ips[0..n) (leaf first: an instance's stack, a group's first
 * ips) are the runtime's throw machinery rather than the thrower: the frames of
 * System.Runtime.EH (.NET 9+ dispatches exceptions in managed code, and the event's stack starts
 * there) and addresses in no method before them. dotnet-monitor's stacks start at the method that
 * threw, so these are not shown (nor matched by a filter, nor a group's site). 0 when nothing
 * else would be left, or when nothing names the frames (sym NULL). *skip gets the count.
 */
static int lead_skip(struct ev_symbols *sym, const uint64_t *ips, size_t n, size_t *skip)
{
    *skip = 0;
    if (sym == NULL) {
        return 0;
    }
    bool eh = false;
    for (size_t i = 0; i < n; i++) {
        struct ev_symbols_frame f;
        int rc = ev_symbols_frame_of(sym, ips[i], &f);
        if (rc != 0 && rc != AGENT_E_NOTFOUND) {
            return rc;
        }
        if (rc == 0 && !(f.type_len == sizeof(EH_TYPE) - 1 &&
                         memcmp(f.type, EH_TYPE, sizeof(EH_TYPE) - 1) == 0)) {
            *skip = eh ? i : 0;
            return 0;
        }
        eh = eh || rc == 0;
    }
    return 0;
}

static int flush(struct xw *w, bool force)
{
    if (buf_size(&w->b) == 0 || (!force && buf_size(&w->b) < OUT_BATCH)) {
        return 0;
    }
    int rc = w->sink(w->ud, buf_data(&w->b), buf_size(&w->b));
    buf_reset(&w->b);
    return rc;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q;
}

/*
 * A UTC DateTime as .NET writes it (100 ns ticks): the text's round-trip "O", always 7 fractional
 * digits ("2023-07-13T21:45:11.8056355Z"); with trim as System.Text.Json writes it in JSON, the
 * fraction's trailing zeros dropped and a zero fraction with its dot ("…:11.5Z", "…:11Z").
 */
static int put_time(struct buf *b, int64_t unix_ns, bool trim)
{
    int64_t ticks = floor_div(unix_ns, 100);
    int64_t secs = floor_div(ticks, 10000000);
    int64_t days = floor_div(secs, 86400);
    int64_t sod = secs - days * 86400;
    int64_t y = 0;
    int m = 0, d = 0;
    civil_date(days, &y, &m, &d);
    char frac[9];
    int n = snprintf(frac, sizeof(frac), ".%07lld", (long long)(ticks - secs * 10000000));
    while (trim && n > 1 && frac[n - 1] == '0') {
        frac[--n] = '\0';
    }
    if (trim && n == 1) {
        frac[0] = '\0'; /* a zero fraction goes with its dot */
    }
    return buf_printf(b, "%04lld-%02d-%02dT%02d:%02d:%02d%sZ", (long long)y, m, d,
                      (int)(sod / 3600), (int)(sod / 60 % 60), (int)(sod % 60), frac);
}

static int on_json_frame(void *ud, const struct ev_symbols_frame *f, size_t k)
{
    struct xw *w = ud;
    return ev_stacks_json_frame(&w->b, f, k == 0, true);
}

/* dotnet-monitor's text frame without the parameter list: "\n   at Type.Method". */
static int on_text_frame(void *ud, const struct ev_symbols_frame *f, size_t k)
{
    struct xw *w = ud;
    struct ev_symbols_frame s;
    (void)k;
    ev_stacks_frame_shown(f, &s);
    int rc = buf_append_str(&w->b, "\n   at ");
    rc = rc != 0 ? rc : buf_append(&w->b, s.type, s.type_len);
    rc = rc != 0 ? rc : buf_append(&w->b, ".", 1);
    return rc != 0 ? rc : buf_append(&w->b, s.method, s.method_len);
}

/* One ExceptionInstance, in its model's property order. */
static int put_json(struct xw *w, const struct inst *in)
{
    const char *name = w->thread_name != NULL ? w->thread_name(w->name_ud, in->thread) : NULL;
    int rc = buf_printf(&w->b, "%s{\"id\":%llu,\"timestamp\":\"",
                        w->fmt == EV_EXC_JSON_SEQ ? JSON_SEQ_RS : "", (unsigned long long)in->id);
    rc = rc != 0 ? rc : put_time(&w->b, in->unix_ns, true);
    rc = rc != 0 ? rc : buf_append_str(&w->b, "\",\"typeName\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(&w->b, (const uint8_t *)inst_type(in), in->type_len);
    rc = rc != 0 ? rc : buf_append_str(&w->b, ",\"moduleName\":\"\",\"message\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(&w->b, (const uint8_t *)inst_msg(in), in->msg_len);
    rc = rc != 0 ? rc
                 : buf_printf(&w->b,
                              ",\"innerExceptions\":[],\"stack\":{\"threadId\":%llu,"
                              "\"threadName\":",
                              (unsigned long long)in->thread);
    name = name != NULL ? name : "";
    /* a kernel thread name may be cut inside a UTF-8 sequence: made valid */
    rc = rc != 0 ? rc : ev_json_str_utf8(&w->b, (const uint8_t *)name, strlen(name));
    rc = rc != 0 ? rc : buf_append_str(&w->b, ",\"frames\":[");
    rc = rc != 0 ? rc
                 : ev_stacks_frames(w->sym, in->ips + w->skip, in->n_ips - w->skip, on_json_frame,
                                    w, NULL);
    return rc != 0 ? rc : buf_append_str(&w->b, "]}}\n");
}

/* dotnet-monitor's WriteTextInstance: the time, "Type: Message" (": Message" only when there is
 * one), the frames, an empty line. */
static int put_text(struct xw *w, const struct inst *in)
{
    int rc = buf_append_str(&w->b, "First chance exception at ");
    rc = rc != 0 ? rc : put_time(&w->b, in->unix_ns, false);
    rc = rc != 0 ? rc : buf_append(&w->b, "\n", 1);
    rc = rc != 0 ? rc : buf_append(&w->b, inst_type(in), in->type_len);
    if (rc == 0 && in->msg_len > 0) {
        rc = buf_append_str(&w->b, ": ");
        rc = rc != 0 ? rc : buf_append(&w->b, inst_msg(in), in->msg_len);
    }
    rc = rc != 0 ? rc
                 : ev_stacks_frames(w->sym, in->ips + w->skip, in->n_ips - w->skip, on_text_frame,
                                    w, NULL);
    return rc != 0 ? rc : buf_append_str(&w->b, "\n\n");
}

/* dotnet-monitor's FilterException: excluded when an exclude entry matches; then, when there are
 * include entries, kept only if one matches. */
static bool passes(const struct ev_exc_filter *include, size_t ninclude,
                   const struct ev_exc_filter *exclude, size_t nexclude, const char *exc_type,
                   const struct ev_symbols_frame *t)
{
    if (any_matches(exclude, nexclude, exc_type, t, false)) {
        return false;
    }
    return ninclude == 0 || any_matches(include, ninclude, exc_type, t, true);
}

/* The store's own filters, then the request's: *pass gets the verdict. */
static int filter(struct xw *w, const struct inst *in, bool *pass)
{
    *pass = true;
    const struct ev_exc_filters *k = w->kept;
    bool kept = k != NULL && (k->ninclude > 0 || k->nexclude > 0);
    if (!kept && w->ninclude == 0 && w->nexclude == 0) {
        return 0;
    }
    struct ev_symbols_frame raw = {.type = "", .method = "", .module_ext = ""}, top;
    if (in->n_ips > 0) {
        int rc = w->sym != NULL ? ev_symbols_frame_of(w->sym, in->ips[w->skip], &raw) : 0;
        if (rc != 0 && rc != AGENT_E_NOTFOUND) {
            return rc;
        }
        ev_stacks_frame_shown(&raw, &top);
    }
    const struct ev_symbols_frame *t = in->n_ips > 0 ? &top : NULL;
    const char *type = inst_type(in);
    *pass = (!kept || passes(k->include, k->ninclude, k->exclude, k->nexclude, type, t)) &&
            passes(w->include, w->ninclude, w->exclude, w->nexclude, type, t);
    return 0;
}

static int put_instance(struct xw *w, const struct inst *in)
{
    bool pass = true;
    int rc = lead_skip(w->sym, in->ips, in->n_ips, &w->skip);
    rc = rc != 0 ? rc : filter(w, in, &pass);
    if (rc != 0 || !pass) {
        return rc;
    }
    if (w->fmt == EV_EXC_TEXT) {
        /* As dotnet-monitor: an exception without frames is not written as text. */
        rc = in->n_ips > 0 ? put_text(w, in) : 0;
    } else {
        rc = put_json(w, in);
    }
    return rc != 0 ? rc : flush(w, false);
}

int ev_exc_write(const struct ev_exc *x, struct ev_symbols *sym,
                 const struct ev_exc_filter *include, size_t ninclude,
                 const struct ev_exc_filter *exclude, size_t nexclude, enum ev_exc_format fmt,
                 uint64_t after_id, uint64_t *last_id_out,
                 const char *(*thread_name)(void *ud, uint64_t thread), void *name_ud,
                 ev_symbols_sink_cb sink, void *ud)
{
    if (fmt != EV_EXC_NDJSON && fmt != EV_EXC_JSON_SEQ && fmt != EV_EXC_TEXT) {
        return AGENT_E_INVAL;
    }
    struct xw w = {.sym = sym,
                   .kept = x->kept,
                   .include = include,
                   .ninclude = include != NULL ? ninclude : 0,
                   .exclude = exclude,
                   .nexclude = exclude != NULL ? nexclude : 0,
                   .fmt = fmt,
                   .thread_name = thread_name,
                   .name_ud = name_ud,
                   .sink = sink,
                   .ud = ud};
    buf_init(&w.b, 0);
    /* Ids are consecutive in the history: the first after after_id is found at once. */
    uint64_t first = x->count > 0 ? inst_at(x, 0)->id : 0;
    uint64_t skip = after_id < first ? 0 : after_id - first + 1;
    size_t i = skip < x->count ? (size_t)skip : x->count;
    uint64_t last = after_id;
    int rc = 0;
    for (; rc == 0 && i < x->count; i++) {
        const struct inst *in = inst_at(x, i);
        rc = put_instance(&w, in);
        last = in->id;
    }
    rc = rc != 0 ? rc : flush(&w, true);
    buf_fini(&w.b);
    if (rc == 0 && last_id_out != NULL) {
        *last_id_out = last;
    }
    return rc;
}

/* ---- groups ---- */

/* One line of ev_exc_write_groups: a group, or groups of the same type and shown site merged. */
struct gline {
    const char *type; /* the group's (x is not changed during the write) */
    size_t type_len;
    const char *site; /* its throwSite text, in the call's texts (set once they are all there) */
    size_t site_off;
    size_t site_len;
    uint64_t count;
    uint64_t first_id;
    uint64_t last_id;
    int64_t last_ns;
    bool named; /* the site is a method: merged with lines of the same type and site */
};

/* ev_exc_write_groups' working memory: every byte of it charged to the share while it is held. */
struct gwork {
    struct mb_share *share;
    size_t charged;
    struct gline *lines;
    size_t nlines;
    char *texts; /* the lines' throwSite texts, one after another */
    size_t texts_len, texts_cap;
};

/* Appends s[0..n) to k's texts (the growth charged first), its offset into *off. */
static int texts_add(struct gwork *k, const uint8_t *s, size_t n, size_t *off)
{
    if (n > k->texts_cap - k->texts_len) {
        size_t ncap = k->texts_cap != 0 ? k->texts_cap * 2 : 1024;
        ncap = ncap - k->texts_len >= n ? ncap : k->texts_len + n;
        if (mb_charge(k->share, ncap - k->texts_cap) != 0) {
            return AGENT_E_BUDGET;
        }
        char *nt = realloc(k->texts, ncap);
        if (nt == NULL) {
            mb_release(k->share, ncap - k->texts_cap);
            return -ENOMEM;
        }
        k->charged += ncap - k->texts_cap;
        k->texts = nt;
        k->texts_cap = ncap;
    }
    memcpy(k->texts + k->texts_len, s, n);
    *off = k->texts_len;
    k->texts_len += n;
    return 0;
}

/*
 * g's site as shown, into *site: the frame of its first ip after lead_skip (of the EIP without a
 * stack), named through sym (NULL: unknown). 0, -ENOMEM or AGENT_E_BUDGET (sym's range index).
 */
static int group_site(struct ev_symbols *sym, const struct group *g, struct ev_symbols_frame *site)
{
    size_t skip = 0;
    int rc = lead_skip(sym, g->key, g->n_ips, &skip);
    *site = (struct ev_symbols_frame){.type = "", .method = "", .module_ext = ""};
    rc = rc != 0 || sym == NULL ? rc : ev_symbols_frame_of(sym, g->key[skip], site);
    return rc == AGENT_E_NOTFOUND ? 0 : rc;
}

/*
 * g as a line of k when it passes the store's filters (kept, NULL: none) with its site as the top
 * frame; site is scratch for the text.
 */
static int gline_add(struct gwork *k, struct ev_symbols *sym, const struct ev_exc_filters *kept,
                     const struct group *g, struct buf *site)
{
    struct ev_symbols_frame f, top;
    int rc = group_site(sym, g, &f);
    if (rc != 0) {
        return rc;
    }
    ev_stacks_frame_shown(&f, &top);
    const struct ev_symbols_frame *t = g->n_ips > 0 ? &top : NULL; /* an instance's top frame */
    if (kept != NULL &&
        !passes(kept->include, kept->ninclude, kept->exclude, kept->nexclude, group_type(g), t)) {
        return 0;
    }
    size_t off = 0;
    buf_reset(site);
    rc = ev_stacks_frame_text(site, &f);
    rc = rc != 0 ? rc : texts_add(k, buf_data(site), buf_size(site), &off);
    if (rc == 0) {
        k->lines[k->nlines++] = (struct gline){.type = group_type(g),
                                               .type_len = g->type_len,
                                               .site_off = off,
                                               .site_len = buf_size(site),
                                               .count = g->count,
                                               .first_id = g->first_id,
                                               .last_id = g->last_id,
                                               .last_ns = g->last_ns,
                                               .named = f.known};
    }
    return rc;
}

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn) {
        return an < bn ? -1 : 1;
    }
    return memcmp(a, b, an);
}

/* The named lines first, by type then site: the lines to merge are next to each other. */
static int gline_key_cmp(const void *a, const void *b)
{
    const struct gline *x = a, *y = b;
    if (x->named != y->named) {
        return x->named ? -1 : 1;
    }
    int c = bytes_cmp(x->type, x->type_len, y->type, y->type_len);
    return c != 0 ? c : bytes_cmp(x->site, x->site_len, y->site, y->site_len);
}

/* Most thrown first, then the older first. */
static int gline_order_cmp(const void *a, const void *b)
{
    const struct gline *x = a, *y = b;
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    return x->first_id < y->first_id ? -1 : x->first_id > y->first_id;
}

/* k's named lines of the same type and site merged into one, then k's lines in their order. */
static void glines_merge(struct gwork *k)
{
    struct gline *l = k->lines;
    for (size_t i = 0; i < k->nlines; i++) {
        l[i].site = k->texts + l[i].site_off;
    }
    if (k->nlines > 1) {
        qsort(l, k->nlines, sizeof(*l), gline_key_cmp);
    }
    size_t n = 0;
    for (size_t i = 0; i < k->nlines; i++) {
        struct gline *m = n > 0 ? &l[n - 1] : NULL;
        if (m == NULL || !l[i].named || gline_key_cmp(m, &l[i]) != 0) {
            l[n++] = l[i];
            continue;
        }
        m->count += l[i].count;
        m->first_id = l[i].first_id < m->first_id ? l[i].first_id : m->first_id;
        if (l[i].last_id > m->last_id) {
            m->last_id = l[i].last_id;
            m->last_ns = l[i].last_ns;
        }
    }
    k->nlines = n;
    if (k->nlines > 1) {
        qsort(l, k->nlines, sizeof(*l), gline_order_cmp);
    }
}

static int put_group(struct buf *b, const struct gline *g)
{
    int rc = buf_append_str(b, "{\"typeName\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(b, (const uint8_t *)g->type, g->type_len);
    rc = rc != 0 ? rc : buf_append_str(b, ",\"throwSite\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(b, (const uint8_t *)g->site, g->site_len);
    rc = rc != 0 ? rc
                 : buf_printf(b,
                              ",\"count\":%llu,\"firstId\":%llu,\"lastId\":%llu,"
                              "\"lastTimestamp\":\"",
                              (unsigned long long)g->count, (unsigned long long)g->first_id,
                              (unsigned long long)g->last_id);
    rc = rc != 0 ? rc : put_time(b, g->last_ns, true);
    return rc != 0 ? rc : buf_append_str(b, "\"}\n");
}

int ev_exc_write_groups(const struct ev_exc *x, struct ev_symbols *sym, ev_symbols_sink_cb sink,
                        void *ud)
{
    struct gwork k = {.share = x->lim.share};
    struct xw w = {.sink = sink, .ud = ud};
    struct buf site;
    buf_init(&w.b, 0);
    buf_init(&site, 0);
    int rc = 0;
    size_t bytes = x->ngroups * sizeof(struct gline);
    if (bytes > 0 && mb_charge(k.share, bytes) != 0) {
        rc = AGENT_E_BUDGET;
        goto out;
    }
    k.charged = bytes;
    k.lines = bytes > 0 ? malloc(bytes) : NULL;
    if (bytes > 0 && k.lines == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; rc == 0 && i < x->ngroups; i++) {
        rc = gline_add(&k, sym, x->kept, &x->groups[i], &site);
    }
    if (rc == 0) {
        glines_merge(&k);
    }
    for (size_t i = 0; rc == 0 && i < k.nlines; i++) {
        rc = put_group(&w.b, &k.lines[i]);
        rc = rc != 0 ? rc : flush(&w, false);
    }
    rc = rc != 0 ? rc : flush(&w, true);
out:
    free(k.lines);
    free(k.texts);
    if (k.charged > 0) {
        mb_release(k.share, k.charged);
    }
    buf_fini(&w.b);
    buf_fini(&site);
    return rc;
}

/* ---- the ExceptionsConfiguration document ---- */

/*
 * The parsed filters live in one allocation (the struct, both lists, then the strings), so that
 * ev_exc_filters_free is one free. The document is walked twice: once to check it and measure
 * (to == NULL), once to copy.
 */
struct fill {
    char *to;    /* where the next string goes; NULL while measuring */
    size_t need; /* bytes of strings */
};

static const char *fill_str(struct fill *f, const char *s)
{
    size_t n = strlen(s) + 1;
    f->need += n;
    if (f->to == NULL) {
        return NULL;
    }
    memcpy(f->to, s, n);
    const char *at = f->to;
    f->to += n;
    return at;
}

static const char *const filter_members[] = {"exceptionType", "typeName", "methodName",
                                             "moduleName"};

/* The member of o named name in any case (the last one given), or NULL. */
static const cJSON *member(const cJSON *o, const char *name)
{
    const cJSON *found = NULL;
    for (const cJSON *m = o->child; m != NULL; m = m->next) {
        found = ascii_ieq(m->string, name) ? m : found;
    }
    return found;
}

/* AGENT_E_INVAL naming o's first member that is not one of names[0..n). */
static int unknown_members(const cJSON *o, const char *const *names, size_t n, const char *where,
                           char *err, size_t errlen)
{
    for (const cJSON *m = o->child; m != NULL; m = m->next) {
        size_t k = 0;
        while (k < n && !ascii_ieq(m->string, names[k])) {
            k++;
        }
        if (k == n) {
            snprintf(err, errlen, "%s: unknown member \"%.64s\"", where, m->string);
            return AGENT_E_INVAL;
        }
    }
    return 0;
}

/* One filter entry, list[i]: an object of strings or nulls. */
static int parse_entry(const cJSON *o, const char *list, size_t i, struct ev_exc_filter *out,
                       struct fill *f, char *err, size_t errlen)
{
    char where[48];
    snprintf(where, sizeof(where), "%s[%zu]", list, i);
    if (!cJSON_IsObject(o)) {
        snprintf(err, errlen, "%s: not an object", where);
        return AGENT_E_INVAL;
    }
    int rc = unknown_members(o, filter_members, 4, where, err, errlen);
    const char **fields[4] = {&out->exception_type, &out->type_name, &out->method_name,
                              &out->module_name};
    for (size_t k = 0; rc == 0 && k < 4; k++) {
        const cJSON *v = member(o, filter_members[k]);
        *fields[k] = NULL;
        if (v != NULL && !cJSON_IsNull(v) && !cJSON_IsString(v)) {
            snprintf(err, errlen, "%s.%s: not a string", where, filter_members[k]);
            rc = AGENT_E_INVAL;
        } else if (cJSON_IsString(v)) {
            *fields[k] = fill_str(f, v->valuestring);
        }
    }
    return rc;
}

/* A list ("include" or "exclude"): an array of entries, null or absent. out NULL: measure. */
static int parse_list(const cJSON *doc, const char *name, struct ev_exc_filter *out, size_t *n,
                      struct fill *f, char *err, size_t errlen)
{
    const cJSON *a = member(doc, name);
    *n = 0;
    if (a == NULL || cJSON_IsNull(a)) {
        return 0;
    }
    if (!cJSON_IsArray(a)) {
        snprintf(err, errlen, "%s: not an array", name);
        return AGENT_E_INVAL;
    }
    int rc = 0;
    for (const cJSON *e = a->child; rc == 0 && e != NULL; e = e->next) {
        struct ev_exc_filter scratch;
        rc = parse_entry(e, name, *n, out != NULL ? &out[*n] : &scratch, f, err, errlen);
        *n += rc == 0;
    }
    return rc;
}

/* Both lists of doc, measured (filters NULL) or copied into filters. */
static int parse_doc(const cJSON *doc, struct ev_exc_filters *filters, struct fill *f,
                     size_t *ninclude, size_t *nexclude, char *err, size_t errlen)
{
    static const char *const lists[] = {"include", "exclude"};
    int rc = unknown_members(doc, lists, 2, "exceptions configuration", err, errlen);
    rc = rc != 0 ? rc
                 : parse_list(doc, "include", filters != NULL ? filters->include : NULL, ninclude,
                              f, err, errlen);
    return rc != 0 ? rc
                   : parse_list(doc, "exclude", filters != NULL ? filters->exclude : NULL, nexclude,
                                f, err, errlen);
}

int ev_exc_filters_parse(const char *json, size_t len, struct ev_exc_filters **out, char *err,
                         size_t errlen)
{
    cJSON *doc = cJSON_ParseWithLength(json, len);
    struct ev_exc_filters *filters = NULL;
    size_t ninc = 0, nexc = 0;
    struct fill f = {0};
    int rc = 0;
    if (doc == NULL || !cJSON_IsObject(doc)) {
        snprintf(err, errlen, "exceptions configuration: %s",
                 doc == NULL ? "not JSON" : "not a JSON object");
        rc = AGENT_E_INVAL;
        goto out;
    }
    if ((rc = parse_doc(doc, NULL, &f, &ninc, &nexc, err, errlen)) != 0) {
        goto out;
    }
    size_t lists = (ninc + nexc) * sizeof(struct ev_exc_filter);
    filters = malloc(sizeof(*filters) + lists + f.need);
    if (filters == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    struct ev_exc_filter *entries = (struct ev_exc_filter *)(filters + 1);
    *filters = (struct ev_exc_filters){.include = entries, .exclude = entries + ninc};
    f = (struct fill){.to = (char *)(entries + ninc + nexc)};
    rc = parse_doc(doc, filters, &f, &filters->ninclude, &filters->nexclude, err, errlen);
    if (rc == 0) {
        *out = filters;
        filters = NULL;
    }
out:
    free(filters);
    cJSON_Delete(doc);
    return rc;
}

void ev_exc_filters_free(struct ev_exc_filters *f)
{
    free(f);
}
