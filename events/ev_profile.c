/* SPDX-License-Identifier: MIT */
/* Allocation, exception, contention and GC summaries of one stream; see ev_profile.h. */
#include "ev_profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "ev_rd.h"
#include "membudget.h"
#include "nettrace.h"

#define RUNTIME_PROVIDER    "Microsoft-Windows-DotNETRuntime"
#define NO_ID               UINT32_MAX
#define MAX_NAME_UNITS      1024u /* a type name longer than this is cut */
#define MAX_MESSAGE_UNITS   256u  /* the sample message too */
#define SITE_CAP            2048
#define SUSPEND_FOR_GC      1u
#define SUSPEND_FOR_GC_PREP 6u
#define GC_TYPE_BACKGROUND  1u
#define GC_GENERATIONS      3u
#define GC_HEAPS            5u /* gen0, gen1, gen2, LOH, POH */

const char *const EV_PROFILE_GC_REASON_NAMES[EV_PROFILE_GC_REASONS] = {
    "AllocSmall",        "Induced",
    "LowMemory",         "Empty",
    "AllocLarge",        "OutOfSpaceSOH",
    "OutOfSpaceLOH",     "InducedNotForced",
    "Internal",          "InducedLowMemory",
    "InducedCompacting", "LowMemoryHost",
    "PMFullGC",          "LowMemoryHostBlocking"};

static const char *const kind_names[] = {"alloc", "exceptions", "contention", "gc"};

/*
 * What a profile holds, in bytes: every name, message and table is charged to share (NULL:
 * dotmon's total only) before it is allocated; names and messages are also bounded by
 * EV_PROFILE_MAX_NAME_BYTES.
 */
struct pmem {
    struct mb_share *share;
    uint64_t held;
    uint64_t name_bytes;
};

static int pmem_take(struct pmem *m, size_t n, bool name)
{
    if (name && n > EV_PROFILE_MAX_NAME_BYTES - m->name_bytes) {
        return AGENT_E_TOOBIG;
    }
    if (mb_charge(m->share, n) != 0) {
        return AGENT_E_BUDGET;
    }
    m->held += n;
    m->name_bytes += name ? n : 0;
    return 0;
}

static void pmem_give(struct pmem *m, size_t n)
{
    mb_release(m->share, n);
    m->held -= n;
}

/* Interned names: each once, addressed by index. */
struct strtab {
    struct pmem *mem;
    char **v;
    size_t n, cap;
    uint32_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t nslots;
};

/*
 * The allocation ticks, exceptions or waits of one (key, stack, ip): memory grows with the
 * distinct stacks, not with the events.
 */
struct rec {
    uint32_t key;   /* the type (alloc, exceptions); the site (contention, once named) */
    uint32_t stack; /* NO_ID without one */
    uint32_t site;  /* named when writing */
    uint64_t ip;    /* ExceptionEIP: the site when there is no stack */
    uint64_t value; /* bytes (alloc), exceptions, the wait in ns (contention): summed */
    uint64_t count; /* events */
    uint64_t max;   /* the largest single value */
};

/* A thread between ContentionStart and ContentionStop. */
struct pending {
    uint64_t thread;
    int64_t ts;
    uint32_t stack;
};

struct gc_state {
    uint64_t count;
    uint64_t by_gen[GC_GENERATIONS];
    uint64_t background;
    uint64_t reasons[EV_PROFILE_GC_REASONS + 1]; /* the last: other reasons */
    double *pauses;                              /* ms */
    size_t npauses, cap_pauses;
    bool suspended, suspend_for_gc;
    int64_t suspend_ts;
    bool has_heap;
    uint64_t heap[GC_HEAPS]; /* the last GCHeapStats' sizes */
    uint64_t promoted;
};

struct ev_profile {
    struct pmem mem;
    enum ev_profile_kind kind;
    struct ev_symbols *sym;
    struct strtab keys;
    char **messages; /* exceptions: per key, the first message (or NULL) */
    size_t cap_messages;
    struct rec *recs;
    size_t nrecs, cap_recs;
    uint32_t *cells; /* open addressing over recs by (key, stack, ip): index + 1, 0 = empty */
    size_t ncells;
    bool cells_stale; /* recs were reordered (writing sorts them): rebuilt on the next add */
    struct pending *pend;
    size_t npend, cap_pend;
    struct gc_state gc;
    struct ev_profile_stats st;
    int fail;
};

/*
 * Makes room for need elements of size elem in *p (capacity *cap, doubled), the growth charged to
 * m first; 0, AGENT_E_BUDGET or -ENOMEM.
 */
static int reserve(struct pmem *m, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t ncap = *cap < 32 ? 32 : *cap;
    while (ncap < need) {
        ncap *= 2;
    }
    if (pmem_take(m, (ncap - *cap) * elem, false) != 0) {
        return AGENT_E_BUDGET;
    }
    void *np = realloc(*p, ncap * elem);
    if (np == NULL) {
        pmem_give(m, (ncap - *cap) * elem);
        return -ENOMEM;
    }
    *p = np;
    *cap = ncap;
    return 0;
}

static uint64_t fnv1a(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    }
    return h;
}

/*
 * A new open-addressing table of cap slots (a power of two) in *slots (the old one freed) holding
 * items 0..n-1 by hash(ctx, i): slot = index + 1, 0 = empty. 0 or -ENOMEM.
 */
static int slots_rebuild(struct pmem *m, uint32_t **slots, size_t *nslots, size_t cap, size_t n,
                         uint64_t (*hash)(const void *ctx, size_t i), const void *ctx)
{
    if (pmem_take(m, cap * sizeof(uint32_t), false) != 0) {
        return AGENT_E_BUDGET;
    }
    uint32_t *t = calloc(cap, sizeof(*t));
    if (t == NULL) {
        pmem_give(m, cap * sizeof(uint32_t));
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)hash(ctx, i) & (cap - 1);
        while (t[h] != 0) {
            h = (h + 1) & (cap - 1);
        }
        t[h] = (uint32_t)i + 1;
    }
    free(*slots);
    pmem_give(m, *nslots * sizeof(uint32_t));
    *slots = t;
    *nslots = cap;
    return 0;
}

static uint64_t strtab_hash(const void *ctx, size_t i)
{
    const struct strtab *t = ctx;
    return fnv1a(t->v[i], strlen(t->v[i]));
}

static int strtab_rehash(struct strtab *t)
{
    return slots_rebuild(t->mem, &t->slots, &t->nslots, t->nslots != 0 ? t->nslots * 2 : 256, t->n,
                         strtab_hash, t);
}

/* The index of s[0..n) (no NUL inside), added once. */
static int strtab_intern(struct strtab *t, const char *s, size_t n, uint32_t *out)
{
    int rc = 0;
    if ((t->n + 1) * 2 > t->nslots && (rc = strtab_rehash(t)) != 0) {
        return rc;
    }
    size_t mask = t->nslots - 1;
    size_t h = (size_t)fnv1a(s, n) & mask;
    for (; t->slots[h] != 0; h = (h + 1) & mask) {
        const char *c = t->v[t->slots[h] - 1];
        if (strncmp(c, s, n) == 0 && c[n] == '\0') {
            *out = t->slots[h] - 1;
            return 0;
        }
    }
    if (t->n >= EV_PROFILE_MAX_KEYS) {
        return AGENT_E_TOOBIG;
    }
    if ((rc = reserve(t->mem, (void **)&t->v, &t->cap, t->n + 1, sizeof(*t->v))) != 0 ||
        (rc = pmem_take(t->mem, n + 1, true)) != 0) {
        return rc;
    }
    char *copy = malloc(n + 1);
    if (copy == NULL) {
        pmem_give(t->mem, n + 1);
        return -ENOMEM;
    }
    memcpy(copy, s, n);
    copy[n] = '\0';
    t->v[t->n] = copy;
    t->slots[h] = (uint32_t)t->n + 1;
    *out = (uint32_t)t->n++;
    return 0;
}

/* Frees t (what it held is given back by the profile's end). */
static void strtab_fini(struct strtab *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->v[i]);
    }
    free(t->v);
    free(t->slots);
    memset(t, 0, sizeof(*t));
}

/* The first max units of the UTF-16LE s[0..units) as a UTF-8 C string (malloc), or NULL. */
static char *utf16_dup(const uint8_t *s, size_t units, size_t max)
{
    units = units < max ? units : max;
    size_t n = ev_utf16_utf8_len(s, units);
    char *out = malloc(n + 1);
    if (out != NULL && ev_utf16_to_utf8(s, units, out, n + 1, NULL) != 0) {
        free(out);
        out = NULL;
    }
    return out;
}

/* The key of a UTF-16 name ("?" when empty). */
static int intern_utf16(struct ev_profile *p, const uint8_t *s, size_t units, uint32_t *out)
{
    if (units == 0) {
        return strtab_intern(&p->keys, "?", 1, out);
    }
    char *name = utf16_dup(s, units, MAX_NAME_UNITS);
    if (name == NULL) {
        return -ENOMEM;
    }
    int rc = strtab_intern(&p->keys, name, strlen(name), out);
    free(name);
    return rc;
}

static uint64_t rec_hash(const struct rec *r)
{
    uint64_t h = (((uint64_t)r->key << 32) | r->stack) * 0x9e3779b97f4a7c15ull;
    h ^= r->ip * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

static uint64_t cell_hash(const void *ctx, size_t i)
{
    const struct ev_profile *p = ctx;
    return rec_hash(&p->recs[i]);
}

static int cells_rebuild(struct ev_profile *p, size_t cap)
{
    int rc = slots_rebuild(&p->mem, &p->cells, &p->ncells, cap, p->nrecs, cell_hash, p);
    p->cells_stale = rc != 0;
    return rc;
}

/* One event's value (r->value) added to the record of its (key, stack, ip). */
static int rec_add(struct ev_profile *p, const struct rec *r)
{
    int rc = 0;
    if (p->cells_stale || (p->nrecs + 1) * 2 > p->ncells) {
        size_t cap = p->ncells != 0 ? p->ncells : 1024;
        while ((p->nrecs + 1) * 2 > cap) {
            cap *= 2;
        }
        if ((rc = cells_rebuild(p, cap)) != 0) {
            return rc;
        }
    }
    size_t mask = p->ncells - 1;
    size_t h = (size_t)rec_hash(r) & mask;
    for (; p->cells[h] != 0; h = (h + 1) & mask) {
        struct rec *c = &p->recs[p->cells[h] - 1];
        if (c->key == r->key && c->stack == r->stack && c->ip == r->ip) {
            c->value += r->value;
            c->count++;
            c->max = r->value > c->max ? r->value : c->max;
            return 0;
        }
    }
    if (p->nrecs >= EV_PROFILE_MAX_RECORDS) {
        return AGENT_E_TOOBIG;
    }
    if ((rc = reserve(&p->mem, (void **)&p->recs, &p->cap_recs, p->nrecs + 1, sizeof(*p->recs))) !=
        0) {
        return rc;
    }
    p->recs[p->nrecs] = *r;
    p->recs[p->nrecs].count = 1;
    p->recs[p->nrecs].max = r->value;
    p->cells[h] = (uint32_t)p->nrecs + 1;
    p->nrecs++;
    return 0;
}

static int rd_ptr(struct ev_rd *r, size_t ptr, uint64_t *out)
{
    uint32_t v32 = 0;
    if (ptr == 8) {
        return ev_rd_u64(r, out);
    }
    int rc = ev_rd_u32(r, &v32);
    *out = v32;
    return rc;
}

/* ---- decoding ---- */

static int on_alloc(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->len);
    size_t ptr = ev_symbols_pointer_size(p->sym);
    uint32_t amount = 0, kind = 0;
    uint16_t clr = 0;
    uint64_t amount64 = 0, type_id = 0;
    const uint8_t *name = NULL;
    size_t name_n = 0;
    if (ev_rd_u32(&r, &amount) != 0 || ev_rd_u32(&r, &kind) != 0 ||
        (ev->version >= 1 && ev_rd_u16(&r, &clr) != 0)) {
        return AGENT_E_PROTO;
    }
    if (ev->version >= 2) {
        size_t tail = 4 + (ev->version >= 3 ? ptr : 0) + (ev->version >= 4 ? 8 : 0);
        if (ev_rd_u64(&r, &amount64) != 0 || rd_ptr(&r, ptr, &type_id) != 0 ||
            !ev_rd_utf16z(&r, &name, &name_n) || ev_rd_left(&r) < tail) {
            return AGENT_E_PROTO;
        }
    }
    uint32_t key = 0;
    int rc = intern_utf16(p, name, name_n, &key);
    if (rc != 0) {
        return rc;
    }
    return rec_add(p, &(struct rec){.key = key,
                                    .stack = ev->has_stack ? ev->stack : NO_ID,
                                    .value = ev->version >= 2 ? amount64 : amount});
}

/* Keeps msg as key's sample message unless it has one; a message past the name-bytes cap is
 * dropped (counted): the type and its count still go in. */
static int keep_message(struct ev_profile *p, uint32_t key, const uint8_t *msg, size_t units)
{
    size_t old = p->cap_messages;
    int rc =
        reserve(&p->mem, (void **)&p->messages, &p->cap_messages, (size_t)key + 1, sizeof(char *));
    if (rc != 0) {
        return rc;
    }
    memset(p->messages + old, 0, (p->cap_messages - old) * sizeof(char *));
    if (p->messages[key] == NULL) {
        char *m = utf16_dup(msg, units, MAX_MESSAGE_UNITS);
        rc = m == NULL ? -ENOMEM : pmem_take(&p->mem, strlen(m) + 1, true);
        if (rc == 0) {
            p->messages[key] = m;
        } else {
            free(m);
        }
        if (rc == AGENT_E_TOOBIG) {
            p->st.messages_dropped++;
            rc = 0;
        }
    }
    return rc;
}

int ev_exception_thrown_read(const uint8_t *payload, size_t len, uint32_t version,
                             size_t pointer_size, struct ev_exception_thrown *out)
{
    if (pointer_size != 4 && pointer_size != 8) {
        return AGENT_E_INVAL;
    }
    struct ev_exception_thrown e = {.type = payload, .message = payload};
    if (version == 0) {
        *out = e;
        return 0;
    }
    struct ev_rd r;
    ev_rd_init(&r, payload, len);
    if (!ev_rd_utf16z(&r, &e.type, &e.type_units) ||
        !ev_rd_utf16z(&r, &e.message, &e.message_units) || rd_ptr(&r, pointer_size, &e.eip) != 0 ||
        ev_rd_u32(&r, &e.hresult) != 0 || ev_rd_u16(&r, &e.flags) != 0 ||
        ev_rd_u16(&r, &e.clr_instance_id) != 0) {
        return AGENT_E_PROTO;
    }
    *out = e;
    return 0;
}

static int on_exception(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_exception_thrown e;
    /* V0 has no fields: the type is unknown ("?"). */
    int rc = ev_exception_thrown_read(ev->payload, ev->len, ev->version,
                                      ev_symbols_pointer_size(p->sym), &e);
    if (rc != 0) {
        return rc;
    }
    uint32_t key = 0;
    rc = intern_utf16(p, e.type, e.type_units, &key);
    if (rc == 0) {
        rc = keep_message(p, key, e.message, e.message_units);
    }
    if (rc != 0) {
        return rc;
    }
    return rec_add(
        p, &(struct rec){
               .key = key, .stack = ev->has_stack ? ev->stack : NO_ID, .ip = e.eip, .value = 1});
}

/* b - a in ticks without signed overflow (the stream's times are any 64-bit values). */
static int64_t ticks_between(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)b - (uint64_t)a);
}

static struct pending *pending_find(struct ev_profile *p, uint64_t thread)
{
    for (size_t i = 0; i < p->npend; i++) {
        if (p->pend[i].thread == thread) {
            return &p->pend[i];
        }
    }
    return NULL;
}

static int on_contention_start(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct pending *pe = pending_find(p, ev->thread);
    if (pe == NULL) {
        if (p->npend >= EV_PROFILE_MAX_PENDING) {
            return AGENT_E_TOOBIG;
        }
        int rc = reserve(&p->mem, (void **)&p->pend, &p->cap_pend, p->npend + 1, sizeof(*p->pend));
        if (rc != 0) {
            return rc;
        }
        pe = &p->pend[p->npend++];
    }
    *pe = (struct pending){
        .thread = ev->thread, .ts = ev->ts, .stack = ev->has_stack ? ev->stack : NO_ID};
    return 0;
}

static int on_contention_stop(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->len);
    uint8_t flags = 0;
    uint16_t clr = 0;
    uint64_t bits = 0;
    double ns = -1.0;
    if (ev->version >= 1) {
        if (ev_rd_u8(&r, &flags) != 0 || ev_rd_u16(&r, &clr) != 0 || ev_rd_u64(&r, &bits) != 0) {
            return AGENT_E_PROTO;
        }
        memcpy(&ns, &bits, sizeof(ns));
    }
    struct pending *pe = pending_find(p, ev->thread);
    if (!(ns >= 0.0 && ns < 1e18)) { /* also NaN */
        ns = pe != NULL ? ev_symbols_ticks_ms(p->sym, ticks_between(pe->ts, ev->ts)) * 1e6 : 0.0;
        ns = ns > 0.0 ? (ns < 1e18 ? ns : 1e18) : 0.0; /* a wild clock gives a bounded wait */
    }
    uint32_t stack = ev->has_stack ? ev->stack : NO_ID;
    if (pe != NULL) {
        stack = pe->stack != NO_ID ? pe->stack : stack;
        *pe = p->pend[--p->npend];
    }
    return rec_add(p, &(struct rec){.key = NO_ID, .stack = stack, .value = (uint64_t)(ns + 0.5)});
}

static int on_gc_start(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->len);
    uint32_t count = 0, depth = 0, reason = 0, type = 0;
    if (ev_rd_u32(&r, &count) != 0 ||
        (ev->version >= 1 ? ev_rd_u32(&r, &depth) != 0 || ev_rd_u32(&r, &reason) != 0 ||
                                ev_rd_u32(&r, &type) != 0
                          : ev_rd_u32(&r, &reason) != 0)) {
        return AGENT_E_PROTO;
    }
    struct gc_state *g = &p->gc;
    g->count++;
    g->by_gen[depth < GC_GENERATIONS ? depth : GC_GENERATIONS - 1]++;
    g->reasons[reason < EV_PROFILE_GC_REASONS ? reason : EV_PROFILE_GC_REASONS]++;
    g->background += type == GC_TYPE_BACKGROUND;
    return 0;
}

static int on_suspend(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->len);
    uint32_t reason = 0;
    uint16_t reason16 = 0;
    if (ev->version >= 1 ? ev_rd_u32(&r, &reason) != 0 : ev_rd_u16(&r, &reason16) != 0) {
        return AGENT_E_PROTO;
    }
    reason = ev->version >= 1 ? reason : reason16;
    p->gc.suspended = true;
    p->gc.suspend_for_gc = reason == SUSPEND_FOR_GC || reason == SUSPEND_FOR_GC_PREP;
    p->gc.suspend_ts = ev->ts;
    return 0;
}

static int on_restart_end(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct gc_state *g = &p->gc;
    if (!g->suspended || !g->suspend_for_gc) {
        g->suspended = false;
        return 0;
    }
    g->suspended = false;
    int rc =
        reserve(&p->mem, (void **)&g->pauses, &g->cap_pauses, g->npauses + 1, sizeof(*g->pauses));
    if (rc == 0) {
        double ms = ev_symbols_ticks_ms(p->sym, ticks_between(g->suspend_ts, ev->ts));
        g->pauses[g->npauses++] = ms > 0.0 ? (ms < 1e12 ? ms : 1e12) : 0.0;
    }
    return rc;
}

static int on_heap_stats(struct ev_profile *p, const struct ev_profile_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->len);
    uint64_t size[GC_HEAPS] = {0}, promoted[GC_HEAPS] = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < 4; i++) {
        rc = ev_rd_u64(&r, &size[i]) != 0 || ev_rd_u64(&r, &promoted[i]) != 0;
    }
    /* FinalizationPromotedSize and Count, Pinned, SinkBlock and GCHandle counts, ClrInstanceID */
    if (rc != 0 || ev_rd_skip(&r, 16 + 12 + (ev->version >= 1 ? 2 : 0)) != 0) {
        return AGENT_E_PROTO;
    }
    if (ev->version >= 2 && (ev_rd_u64(&r, &size[4]) != 0 || ev_rd_u64(&r, &promoted[4]) != 0)) {
        return AGENT_E_PROTO;
    }
    p->gc.has_heap = true;
    for (size_t i = 0; i < GC_HEAPS; i++) {
        p->gc.heap[i] = size[i];
        p->gc.promoted += promoted[i];
    }
    return 0;
}

static bool wanted(enum ev_profile_kind kind, uint32_t id)
{
    switch (kind) {
    case EV_PROFILE_ALLOC:
        return id == EV_PROFILE_ALLOCATION_TICK;
    case EV_PROFILE_EXCEPTIONS:
        return id == EV_PROFILE_EXCEPTION_THROWN;
    case EV_PROFILE_CONTENTION:
        return id == EV_PROFILE_CONTENTION_START || id == EV_PROFILE_CONTENTION_STOP;
    case EV_PROFILE_GC:
        return id == EV_PROFILE_GC_START || id == EV_PROFILE_GC_RESTART_EE_END ||
               id == EV_PROFILE_GC_HEAP_STATS || id == EV_PROFILE_GC_SUSPEND_EE;
    }
    return false;
}

static int dispatch(struct ev_profile *p, const struct ev_profile_event *ev)
{
    switch (ev->id) {
    case EV_PROFILE_ALLOCATION_TICK:
        return on_alloc(p, ev);
    case EV_PROFILE_EXCEPTION_THROWN:
        return on_exception(p, ev);
    case EV_PROFILE_CONTENTION_START:
        return on_contention_start(p, ev);
    case EV_PROFILE_CONTENTION_STOP:
        return on_contention_stop(p, ev);
    case EV_PROFILE_GC_START:
        return on_gc_start(p, ev);
    case EV_PROFILE_GC_SUSPEND_EE:
        return on_suspend(p, ev);
    case EV_PROFILE_GC_RESTART_EE_END:
        return on_restart_end(p, ev);
    default:
        return on_heap_stats(p, ev);
    }
}

int ev_profile_add(struct ev_profile *p, const struct ev_profile_event *ev)
{
    if (!wanted(p->kind, ev->id)) {
        return 0;
    }
    p->st.events++;
    int rc = dispatch(p, ev);
    p->st.malformed += rc == AGENT_E_PROTO;
    return rc;
}

/* An event lost for want of memory or room fails the profile (ev_profile_status). */
static void note(struct ev_profile *p, int rc)
{
    if (rc != 0 && rc != AGENT_E_PROTO && p->fail == 0) {
        p->fail = rc;
    }
}

static void on_event(void *ud, const struct nettrace_event *nev)
{
    struct ev_profile *p = ud;
    if (p->fail != 0) {
        return; /* the profile is lost already: keep nothing more */
    }
    if (!wanted(p->kind, nev->event_id) || strcmp(nev->provider, RUNTIME_PROVIDER) != 0) {
        return;
    }
    struct ev_profile_event ev = {.id = nev->event_id,
                                  .version = nev->version,
                                  .thread = nev->thread_id,
                                  .ts = nev->timestamp,
                                  .payload = nev->payload,
                                  .len = nev->payload_len};
    if (p->kind != EV_PROFILE_GC) {
        int rc = ev_symbols_event_stack(p->sym, nev, &ev.stack);
        ev.has_stack = rc == 0;
        p->st.no_stack += rc == AGENT_E_NOTFOUND;
        note(p, rc == AGENT_E_NOTFOUND ? 0 : rc);
    }
    note(p, ev_profile_add(p, &ev));
}

const char *ev_profile_kind_name(enum ev_profile_kind kind)
{
    return (size_t)kind < sizeof(kind_names) / sizeof(kind_names[0]) ? kind_names[kind] : "?";
}

int ev_profile_kind_parse(const char *name, enum ev_profile_kind *out)
{
    for (size_t i = 0; i < sizeof(kind_names) / sizeof(kind_names[0]); i++) {
        if (strcasecmp(name, kind_names[i]) == 0) {
            *out = (enum ev_profile_kind)i;
            return 0;
        }
    }
    return AGENT_E_NOTFOUND;
}

int ev_profile_new(enum ev_profile_kind kind, struct ev_symbols *sym, struct ev_profile **out)
{
    struct ev_profile *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    p->kind = kind;
    p->sym = sym;
    p->keys.mem = &p->mem;
    ev_symbols_set_event_cb(sym, on_event, p);
    *out = p;
    return 0;
}

int ev_profile_set_share(struct ev_profile *p, struct mb_share *share)
{
    if (p->mem.held != 0) {
        return AGENT_E_INVAL; /* charged elsewhere already */
    }
    p->mem.share = share;
    return 0;
}

void ev_profile_free(struct ev_profile *p)
{
    if (p == NULL) {
        return;
    }
    ev_symbols_set_event_cb(p->sym, NULL, NULL);
    for (size_t i = 0; p->messages != NULL && i < p->keys.n && i < p->cap_messages; i++) {
        free(p->messages[i]);
    }
    free(p->messages);
    strtab_fini(&p->keys);
    free(p->recs);
    free(p->cells);
    free(p->pend);
    free(p->gc.pauses);
    pmem_give(&p->mem, p->mem.held); /* everything above was charged */
    free(p);
}

void ev_profile_get_stats(const struct ev_profile *p, struct ev_profile_stats *out)
{
    *out = p->st;
}

int ev_profile_status(const struct ev_profile *p)
{
    return p->fail;
}

/* ---- aggregation ---- */

/* One (key, site) pair's events, or one key's. */
struct stat {
    const char *name;
    uint32_t key;
    uint64_t value, count, max;
    size_t first, n; /* a key's sites in the site array */
};

struct summary {
    struct stat *keys, *sites;
    size_t nkeys, nsites;
    uint64_t value, count;
};

static int cmp_rec_stack(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->stack != y->stack) {
        return x->stack < y->stack ? -1 : 1;
    }
    return x->ip < y->ip ? -1 : x->ip > y->ip;
}

static int cmp_rec_key(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->key != y->key) {
        return x->key < y->key ? -1 : 1;
    }
    return x->site < y->site ? -1 : x->site > y->site;
}

/* Most first by value, then count, then by name. */
static int cmp_stat(const void *a, const void *b)
{
    const struct stat *x = a, *y = b;
    if (x->value != y->value) {
        return x->value > y->value ? -1 : 1;
    }
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    return strcmp(x->name, y->name);
}

/* The site name of r: its stack's site, else its EIP's method, else the unknown frame. */
static int site_name(struct ev_profile *p, const struct rec *r, char *out, size_t cap)
{
    int rc = AGENT_E_NOTFOUND;
    if (r->stack != NO_ID) {
        rc = ev_symbols_stack_site(p->sym, r->stack, out, cap);
    }
    if (rc == AGENT_E_NOTFOUND && r->ip != 0) {
        rc = ev_symbols_resolve(p->sym, r->ip, out, cap);
    } else if (rc == AGENT_E_NOTFOUND) {
        (void)snprintf(out, cap, "%s", EV_SYMBOLS_UNKNOWN);
    }
    return rc == AGENT_E_NOTFOUND || rc == AGENT_E_INVAL ? 0 : rc;
}

/* Names every record's site (once per distinct stack and EIP); contention's key is its site. */
static int name_sites(struct ev_profile *p)
{
    char name[SITE_CAP];
    uint32_t site = 0;
    int rc = 0;
    p->cells_stale = true; /* sorted here and by key after */
    if (p->nrecs > 0) {
        qsort(p->recs, p->nrecs, sizeof(*p->recs), cmp_rec_stack);
    }
    for (size_t i = 0; rc == 0 && i < p->nrecs; i++) {
        struct rec *r = &p->recs[i];
        if (i == 0 || r->stack != r[-1].stack || r->ip != r[-1].ip) {
            rc = site_name(p, r, name, sizeof(name));
            rc = rc ? rc : strtab_intern(&p->keys, name, strlen(name), &site);
        }
        r->site = site;
        r->key = p->kind == EV_PROFILE_CONTENTION ? site : r->key;
    }
    return rc;
}

static void stat_add(struct stat *s, const struct rec *r)
{
    s->value += r->value;
    s->count += r->count;
    s->max = r->max > s->max ? r->max : s->max;
}

/* The records summed per key and per (key, site), each key's sites most first, keys most first. */
static int summarize(struct ev_profile *p, struct summary *out)
{
    memset(out, 0, sizeof(*out));
    int rc = name_sites(p);
    if (rc != 0) {
        return rc;
    }
    if (p->nrecs > 0) {
        qsort(p->recs, p->nrecs, sizeof(*p->recs), cmp_rec_key);
    }
    out->keys = calloc(p->nrecs + 1, sizeof(*out->keys));
    out->sites = calloc(p->nrecs + 1, sizeof(*out->sites));
    if (out->keys == NULL || out->sites == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->nrecs; i++) {
        const struct rec *r = &p->recs[i];
        if (i == 0 || r->key != r[-1].key) {
            out->keys[out->nkeys++] =
                (struct stat){.name = p->keys.v[r->key], .key = r->key, .first = out->nsites};
        }
        if (i == 0 || r->key != r[-1].key || r->site != r[-1].site) {
            out->sites[out->nsites++] = (struct stat){.name = p->keys.v[r->site], .key = r->site};
            out->keys[out->nkeys - 1].n++;
        }
        stat_add(&out->keys[out->nkeys - 1], r);
        stat_add(&out->sites[out->nsites - 1], r);
        out->value += r->value;
        out->count += r->count;
    }
    for (size_t k = 0; k < out->nkeys; k++) {
        qsort(out->sites + out->keys[k].first, out->keys[k].n, sizeof(*out->sites), cmp_stat);
    }
    if (out->nkeys > 0) {
        qsort(out->keys, out->nkeys, sizeof(*out->keys), cmp_stat);
    }
    return 0;
}

static void summary_fini(struct summary *s)
{
    free(s->keys);
    free(s->sites);
    memset(s, 0, sizeof(*s));
}

static double percent(uint64_t n, uint64_t total)
{
    return total > 0 ? 100.0 * (double)n / (double)total : 0.0;
}

static double ns_ms(uint64_t ns)
{
    return (double)ns / 1e6;
}

/* ---- JSON ---- */

static int json_head(struct buf *b, const struct ev_profile *p, uint64_t pid, uint32_t duration_s)
{
    return buf_printf(b,
                      "{\"pid\":%llu,\"kind\":\"%s\",\"durationSeconds\":%u,\"events\":%llu,"
                      "\"malformedEvents\":%llu,\"eventsWithoutStack\":%llu,",
                      (unsigned long long)pid, ev_profile_kind_name(p->kind), duration_s,
                      (unsigned long long)p->st.events, (unsigned long long)p->st.malformed,
                      (unsigned long long)p->st.no_stack);
}

static int json_str(struct buf *b, const char *key, const char *v)
{
    int rc = buf_printf(b, "\"%s\":\"", key);
    rc = rc ? rc : buf_append_json_escaped(b, v != NULL ? v : "");
    return rc ? rc : buf_append_str(b, "\"");
}

/* A key's (or a site's) numbers, after its name. */
static int json_numbers(struct buf *b, enum ev_profile_kind kind, const struct stat *s,
                        uint64_t total)
{
    switch (kind) {
    case EV_PROFILE_ALLOC:
        return buf_printf(b, ",\"bytes\":%llu,\"percent\":%.2f,\"ticks\":%llu",
                          (unsigned long long)s->value, percent(s->value, total),
                          (unsigned long long)s->count);
    case EV_PROFILE_EXCEPTIONS:
        return buf_printf(b, ",\"count\":%llu,\"percent\":%.2f", (unsigned long long)s->count,
                          percent(s->count, total));
    default:
        return buf_printf(b,
                          ",\"count\":%llu,\"waitMilliseconds\":%.3f,\"percent\":%.2f,"
                          "\"maxWaitMilliseconds\":%.3f",
                          (unsigned long long)s->count, ns_ms(s->value), percent(s->value, total),
                          ns_ms(s->max));
    }
}

static int json_sites(struct buf *b, const struct ev_profile *p, const struct summary *sm,
                      const struct stat *k)
{
    size_t n = k->n < EV_PROFILE_SITES ? k->n : EV_PROFILE_SITES;
    int rc = buf_append_str(b, ",\"sites\":[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct stat *s = &sm->sites[k->first + i];
        rc = buf_append_str(b, i == 0 ? "{" : ",{");
        rc = rc ? rc : json_str(b, "method", s->name);
        rc = rc ? rc : json_numbers(b, p->kind, s, k->value);
        rc = rc ? rc : buf_append_str(b, "}");
    }
    return rc ? rc : buf_append_str(b, "]");
}

static int json_keys(struct buf *b, const struct ev_profile *p, const struct summary *sm,
                     size_t top)
{
    bool types = p->kind != EV_PROFILE_CONTENTION;
    uint64_t total = p->kind == EV_PROFILE_EXCEPTIONS ? sm->count : sm->value;
    size_t n = sm->nkeys < top ? sm->nkeys : top;
    int rc = buf_printf(b, "\"%s\":[", types ? "types" : "methods");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct stat *k = &sm->keys[i];
        rc = buf_append_str(b, i == 0 ? "{" : ",{");
        rc = rc ? rc : json_str(b, types ? "type" : "method", k->name);
        rc = rc ? rc : json_numbers(b, p->kind, k, total);
        if (rc == 0 && p->kind == EV_PROFILE_EXCEPTIONS) {
            rc = buf_append_str(b, ",");
            rc = rc ? rc
                    : json_str(b, "message", k->key < p->cap_messages ? p->messages[k->key] : NULL);
        }
        if (rc == 0 && types) {
            rc = json_sites(b, p, sm, k);
        }
        rc = rc ? rc : buf_append_str(b, "}");
    }
    return rc ? rc : buf_append_str(b, "]");
}

static int json_totals(struct buf *b, const struct ev_profile *p, const struct summary *sm)
{
    switch (p->kind) {
    case EV_PROFILE_ALLOC:
        return buf_printf(b, "\"allocationTicks\":%llu,\"sampledBytes\":%llu,",
                          (unsigned long long)sm->count, (unsigned long long)sm->value);
    case EV_PROFILE_EXCEPTIONS:
        return buf_printf(b, "\"exceptions\":%llu,", (unsigned long long)sm->count);
    default:
        return buf_printf(b, "\"contentions\":%llu,\"waitMilliseconds\":%.3f,",
                          (unsigned long long)sm->count, ns_ms(sm->value));
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest rank: the smallest value with at least q of the sorted v[0..n) at or below it. */
static double rank(const double *v, size_t n, double q)
{
    if (n == 0) {
        return 0.0;
    }
    double x = q * (double)n;
    size_t i = (size_t)x;
    i += (double)i < x; /* the ceiling, without libm */
    return v[i > 0 ? (i <= n ? i - 1 : n - 1) : 0];
}

struct gc_pauses {
    double total, p50, p99, max;
};

static void gc_pauses(struct gc_state *g, struct gc_pauses *out)
{
    memset(out, 0, sizeof(*out));
    if (g->npauses > 0) {
        qsort(g->pauses, g->npauses, sizeof(*g->pauses), cmp_double);
    }
    for (size_t i = 0; i < g->npauses; i++) {
        out->total += g->pauses[i];
    }
    out->p50 = rank(g->pauses, g->npauses, 0.50);
    out->p99 = rank(g->pauses, g->npauses, 0.99);
    out->max = g->npauses > 0 ? g->pauses[g->npauses - 1] : 0.0;
}

static int json_gc(struct buf *b, struct ev_profile *p)
{
    struct gc_state *g = &p->gc;
    struct gc_pauses ps;
    gc_pauses(g, &ps);
    int rc = buf_printf(b,
                        "\"gcs\":%llu,\"generations\":{\"gen0\":%llu,\"gen1\":%llu,\"gen2\":%llu},"
                        "\"background\":%llu,\"reasons\":{",
                        (unsigned long long)g->count, (unsigned long long)g->by_gen[0],
                        (unsigned long long)g->by_gen[1], (unsigned long long)g->by_gen[2],
                        (unsigned long long)g->background);
    bool first = true;
    for (size_t i = 0; rc == 0 && i <= EV_PROFILE_GC_REASONS; i++) {
        if (g->reasons[i] > 0) {
            rc = buf_printf(b, "%s\"%s\":%llu", first ? "" : ",",
                            i < EV_PROFILE_GC_REASONS ? EV_PROFILE_GC_REASON_NAMES[i] : "Other",
                            (unsigned long long)g->reasons[i]);
            first = false;
        }
    }
    rc = rc ? rc
            : buf_printf(b,
                         "},\"pauses\":{\"count\":%zu,\"totalMilliseconds\":%.3f,"
                         "\"p50Milliseconds\":%.3f,\"p99Milliseconds\":%.3f,"
                         "\"maxMilliseconds\":%.3f},\"heap\":",
                         g->npauses, ps.total, ps.p50, ps.p99, ps.max);
    if (rc == 0 && !g->has_heap) {
        rc = buf_append_str(b, "null");
    } else if (rc == 0) {
        uint64_t total = 0;
        for (size_t i = 0; i < GC_HEAPS; i++) {
            total += g->heap[i];
        }
        rc = buf_printf(b,
                        "{\"gen0Bytes\":%llu,\"gen1Bytes\":%llu,\"gen2Bytes\":%llu,"
                        "\"lohBytes\":%llu,\"pohBytes\":%llu,\"totalBytes\":%llu}",
                        (unsigned long long)g->heap[0], (unsigned long long)g->heap[1],
                        (unsigned long long)g->heap[2], (unsigned long long)g->heap[3],
                        (unsigned long long)g->heap[4], (unsigned long long)total);
    }
    return rc ? rc : buf_printf(b, ",\"promotedBytes\":%llu", (unsigned long long)g->promoted);
}

static int flush(struct buf *b, ev_symbols_sink_cb sink, void *ud)
{
    return buf_size(b) > 0 ? sink(ud, buf_data(b), buf_size(b)) : 0;
}

int ev_profile_write_json(struct ev_profile *p, uint64_t pid, uint32_t duration_s, size_t top,
                          ev_symbols_sink_cb sink, void *ud)
{
    if (top == 0 || top > EV_SYMBOLS_TOP_MAX) {
        return AGENT_E_INVAL;
    }
    struct summary sm;
    memset(&sm, 0, sizeof(sm));
    struct buf b;
    buf_init(&b, 0);
    int rc = json_head(&b, p, pid, duration_s);
    if (rc == 0 && p->kind == EV_PROFILE_GC) {
        rc = json_gc(&b, p);
    } else if (rc == 0) {
        rc = summarize(p, &sm);
        rc = rc ? rc : json_totals(&b, p, &sm);
        rc = rc ? rc : json_keys(&b, p, &sm, top);
    }
    rc = rc ? rc : buf_append_str(&b, "}\n");
    rc = rc ? rc : flush(&b, sink, ud);
    summary_fini(&sm);
    buf_fini(&b);
    return rc;
}

/* ---- text ---- */

static int text_title(struct buf *b, const struct ev_profile *p, const struct summary *sm,
                      uint64_t pid, uint32_t duration_s)
{
    unsigned long long n = sm->count;
    switch (p->kind) {
    case EV_PROFILE_ALLOC:
        return buf_printf(b,
                          "Allocations of pid %llu over %u s: %llu ticks (one per ~100 KB "
                          "allocated), %llu sampled bytes\n\n%14s %7s %8s  %s\n",
                          (unsigned long long)pid, duration_s, n, (unsigned long long)sm->value,
                          "BYTES", "%", "TICKS", "TYPE (and where it was allocated)");
    case EV_PROFILE_EXCEPTIONS:
        return buf_printf(b, "Exceptions thrown in pid %llu over %u s: %llu\n\n%8s %7s  %s\n",
                          (unsigned long long)pid, duration_s, n, "COUNT", "%",
                          "TYPE (and where it was thrown)");
    default:
        return buf_printf(b,
                          "Lock contention in pid %llu over %u s: %llu waits, %.3f ms "
                          "waited\n\n%8s %12s %7s %10s  %s\n",
                          (unsigned long long)pid, duration_s, n, ns_ms(sm->value), "COUNT",
                          "WAIT MS", "%", "MAX MS", "METHOD");
    }
}

static int text_row(struct buf *b, enum ev_profile_kind kind, const struct stat *s, uint64_t total,
                    const char *indent)
{
    switch (kind) {
    case EV_PROFILE_ALLOC:
        return buf_printf(b, "%14llu %7.2f %8llu  %s%s\n", (unsigned long long)s->value,
                          percent(s->value, total), (unsigned long long)s->count, indent, s->name);
    case EV_PROFILE_EXCEPTIONS:
        return buf_printf(b, "%8llu %7.2f  %s%s\n", (unsigned long long)s->count,
                          percent(s->count, total), indent, s->name);
    default:
        return buf_printf(b, "%8llu %12.3f %7.2f %10.3f  %s%s\n", (unsigned long long)s->count,
                          ns_ms(s->value), percent(s->value, total), ns_ms(s->max), indent,
                          s->name);
    }
}

static int text_keys(struct buf *b, const struct ev_profile *p, const struct summary *sm,
                     size_t top)
{
    uint64_t total = p->kind == EV_PROFILE_EXCEPTIONS ? sm->count : sm->value;
    int rc = 0;
    size_t n = sm->nkeys < top ? sm->nkeys : top;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct stat *k = &sm->keys[i];
        rc = text_row(b, p->kind, k, total, "");
        size_t ns = p->kind == EV_PROFILE_CONTENTION ? 0
                    : k->n < EV_PROFILE_SITES        ? k->n
                                                     : EV_PROFILE_SITES;
        for (size_t s = 0; rc == 0 && s < ns; s++) {
            rc = text_row(b, p->kind, &sm->sites[k->first + s], k->value, "    at ");
        }
        if (rc == 0 && p->kind == EV_PROFILE_EXCEPTIONS && k->key < p->cap_messages &&
            p->messages[k->key] != NULL) {
            rc = buf_printf(b, "%18s\"%s\"\n", "e.g. ", p->messages[k->key]);
        }
    }
    return rc;
}

static int text_gc(struct buf *b, struct ev_profile *p, uint64_t pid, uint32_t duration_s)
{
    struct gc_state *g = &p->gc;
    struct gc_pauses ps;
    gc_pauses(g, &ps);
    int rc = buf_printf(b,
                        "GCs of pid %llu over %u s: %llu (gen0 %llu, gen1 %llu, gen2 %llu; %llu "
                        "background)\nReasons:",
                        (unsigned long long)pid, duration_s, (unsigned long long)g->count,
                        (unsigned long long)g->by_gen[0], (unsigned long long)g->by_gen[1],
                        (unsigned long long)g->by_gen[2], (unsigned long long)g->background);
    for (size_t i = 0; rc == 0 && i <= EV_PROFILE_GC_REASONS; i++) {
        if (g->reasons[i] > 0) {
            rc = buf_printf(b, " %s %llu",
                            i < EV_PROFILE_GC_REASONS ? EV_PROFILE_GC_REASON_NAMES[i] : "Other",
                            (unsigned long long)g->reasons[i]);
        }
    }
    rc = rc ? rc
            : buf_printf(b, "\n\n%8s %12s %10s %10s %10s\n%8zu %12.3f %10.3f %10.3f %10.3f\n",
                         "PAUSES", "TOTAL MS", "P50 MS", "P99 MS", "MAX MS", g->npauses, ps.total,
                         ps.p50, ps.p99, ps.max);
    if (rc == 0 && g->has_heap) {
        rc = buf_printf(b, "\n%14s %14s %14s %14s %14s\n%14llu %14llu %14llu %14llu %14llu\n",
                        "GEN0 BYTES", "GEN1 BYTES", "GEN2 BYTES", "LOH BYTES", "POH BYTES",
                        (unsigned long long)g->heap[0], (unsigned long long)g->heap[1],
                        (unsigned long long)g->heap[2], (unsigned long long)g->heap[3],
                        (unsigned long long)g->heap[4]);
    }
    return rc ? rc : buf_printf(b, "Promoted: %llu bytes\n", (unsigned long long)g->promoted);
}

int ev_profile_write_text(struct ev_profile *p, uint64_t pid, uint32_t duration_s, size_t top,
                          ev_symbols_sink_cb sink, void *ud)
{
    if (top == 0 || top > EV_SYMBOLS_TOP_MAX) {
        return AGENT_E_INVAL;
    }
    struct summary sm;
    memset(&sm, 0, sizeof(sm));
    struct buf b;
    buf_init(&b, 0);
    int rc = 0;
    if (p->kind == EV_PROFILE_GC) {
        rc = text_gc(&b, p, pid, duration_s);
    } else {
        rc = summarize(p, &sm);
        rc = rc ? rc : text_title(&b, p, &sm, pid, duration_s);
        rc = rc ? rc : text_keys(&b, p, &sm, top);
    }
    rc = rc ? rc : flush(&b, sink, ud);
    summary_fini(&sm);
    buf_fini(&b);
    return rc;
}
