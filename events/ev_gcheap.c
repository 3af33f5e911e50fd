/* SPDX-License-Identifier: MIT */
/*
 * A GC heap snapshot from a heap-dump session's stream, written as a `.gcdump`; see ev_gcheap.h and
 * docs/gcdump.md. The graph follows dotnet-gcdump's DotNetHeapDumpGraphReader and MemoryGraph: node
 * indexes are interned by address in the order that reader assigns them, node records go to a blob
 * in the order it calls SetNode, and types are resolved the way it resolves them once the stream
 * has ended (module names may come last, in the rundown).
 *
 * While the stream is read, a node's record in the blob is ours: cint node index, cint raw type,
 * cint size, cint child count, the children as cint deltas. A raw type is a BulkType TypeID with a
 * size class (or a root pseudo-node's name); it becomes a file type index only at finish, when the
 * names are known. ev_gcheap_write re-encodes each record into the file's form (type index with the
 * explicit-size flag, size when it differs from the type's first size, children unchanged).
 *
 * Memory per object: its address (8), its record offset (4), two hash slots (8 at most half full)
 * and its record (about 4 + 2 per reference). Pending nodes (read, waiting for their edges) and
 * pending edges (read before their node) are queued; the runtime interleaves them closely.
 */
#include "ev_gcheap.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bigmem.h"
#include "buf.h"
#include "err.h"
#include "ev_rd.h"
#include "membudget.h"
#include "nettrace.h"
#include "utf8.h"

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN_PROVIDER "Microsoft-Windows-DotNETRuntimeRundown"

/* Microsoft-Windows-DotNETRuntime event ids. */
#define EV_GC_START          1
#define EV_GC_END            2
#define EV_BULK_TYPE         15
#define EV_BULK_ROOT_EDGE    16
#define EV_BULK_ROOT_CWT     17
#define EV_BULK_NODE         18
#define EV_BULK_EDGE         19
#define EV_BULK_ROOT_CCW     36
#define EV_BULK_RCW          37
#define EV_BULK_ROOT_STATIC  38
#define EV_MODULE_DCSTART_V2 149
#define EV_MODULE_DCEND_V2   150
#define EV_MODULE_LOAD       152
#define EV_MODULE_UNLOAD     153
/* Microsoft-Windows-DotNETRuntimeRundown. */
#define EV_RD_MODULE_DCSTART 153
#define EV_RD_MODULE_DCEND   154
/* ModuleILPath after ModuleID, AssemblyID, ModuleFlags, Reserved1. */
#define MODULE_IL_PATH_AT 24

#define GC_REASON_INDUCED 1
#define GC_TYPE_NONCONC   0

#define ROOT_KIND_STACK     0
#define ROOT_KIND_FINALIZER 1
#define ROOT_KIND_HANDLE    2
#define ROOT_FLAG_PINNING   0x1u
#define ROOT_FLAG_WEAK      0x2u
#define ROOT_FLAG_REFCOUNT  0x8u

#define TYPE_FLAG_RCW   0x4u
#define TYPE_FLAG_ARRAY 0x8u
#define STATIC_FLAG_TLS 0x1u

#define RAW_BULK  0 /* a TypeID with a size class */
#define RAW_FINAL 1 /* made at finish with its file type (aux): CCWs, root pseudo-nodes */

#define NO_OFFSET UINT32_MAX
#define MAX_BLOB  0x7FFFFFF0u /* the file's labels are i32 */
#define CHUNK     65536u
#define CCW_SIZE  200
/* GCBulkRootCCW value: GCRootID, ObjectID, TypeID, IUnknown (u64), RefCount, PeggedRefCount, Flags
 * (u32); GCBulkRCW value: ObjectID, TypeID, IUnknown, VTable (u64), RefCount, Flags (u32). */
#define CCW_VALUE 44
#define RCW_VALUE 40
#define RCW_EXTRA 1000u

/* ---- memory: every store is charged before it is allocated ------------------------------ */

/*
 * What the graph holds, in bytes (capacities, not contents), charged to the request's share of
 * dotmon's memory budget and bounded by the graph's own cap. A refused charge fails the graph
 * with AGENT_E_BUDGET (mem.refused says which bound).
 */
struct gmem {
    struct mb_share *share; /* NULL: dotmon's total only */
    uint64_t cap;           /* the graph's own bound */
    uint64_t held;
    uint64_t asked; /* the refused charge */
    int refused;    /* 0, MEM_OWN_CAP or MEM_SHARE */
};

#define MEM_OWN_CAP 1
#define MEM_SHARE   2

static int mem_take(struct gmem *m, size_t n)
{
    if (m->refused != 0) {
        return AGENT_E_BUDGET;
    }
    if (n > m->cap || m->held > m->cap - n) {
        m->refused = MEM_OWN_CAP;
        m->asked = n;
        return AGENT_E_BUDGET;
    }
    if (mb_charge(m->share, n) != 0) {
        m->refused = MEM_SHARE;
        m->asked = n;
        return AGENT_E_BUDGET;
    }
    m->held += n;
    return 0;
}

static void mem_give(struct gmem *m, size_t n)
{
    if (n > 0) {
        mb_release(m->share, n);
        m->held -= n;
    }
}

/* calloc, charged first; from common/bigmem (a big table is its own mapping, returned whole by
 * mem_free), as every table and array of the graph. */
static void *mem_calloc(struct gmem *m, size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    if (mem_take(m, count * size) != 0) {
        return NULL;
    }
    void *p = bigmem_calloc(count, size);
    if (p == NULL) {
        mem_give(m, count * size);
    }
    return p;
}

static void mem_free(struct gmem *m, void *p, size_t bytes)
{
    if (p != NULL) {
        bigmem_free(p);
        mem_give(m, bytes);
    }
}

/* ---- growable arrays ---------------------------------------------------------------------- */

struct vec {
    void *p;
    size_t n, cap; /* elements */
    size_t bytes;  /* allocated (and charged) */
};

static int vec_reserve(struct gmem *m, struct vec *v, size_t esz, size_t more)
{
    if (v->cap - v->n >= more) {
        return 0;
    }
    size_t want = v->cap < 16 ? 16 : v->cap;
    while (want - v->n < more) {
        if (want > SIZE_MAX / 2 / esz) {
            return -ENOMEM;
        }
        want *= 2;
    }
    if (mem_take(m, want * esz - v->bytes) != 0) {
        return AGENT_E_BUDGET;
    }
    void *np = bigmem_realloc(v->p, want * esz);
    if (np == NULL) {
        mem_give(m, want * esz - v->bytes);
        return -ENOMEM;
    }
    v->p = np;
    v->cap = want;
    v->bytes = want * esz;
    return 0;
}

static int vec_push(struct gmem *m, struct vec *v, size_t esz, const void *e)
{
    int rc = vec_reserve(m, v, esz, 1);
    if (rc == 0) {
        memcpy((uint8_t *)v->p + v->n * esz, e, esz);
        v->n++;
    }
    return rc;
}

static void vec_free(struct gmem *m, struct vec *v)
{
    bigmem_free(v->p);
    mem_give(m, v->bytes);
    v->p = NULL;
    v->n = v->cap = v->bytes = 0;
}

#define VEC_AT(v, T, i) (((T *)(v).p)[i])

/* ---- the records ---------------------------------------------------------------------------- */

struct str16 {
    uint32_t off, len; /* units in the names arena; off UINT32_MAX = null string */
};

struct bulk_type {
    uint64_t type_id, module_id;
    uint32_t name_id, flags;
    struct str16 name;
};

struct module_name {
    uint64_t id;
    struct str16 path;
};

struct raw_type {
    uint8_t kind;
    uint8_t size_class;
    uint32_t aux; /* RAW_FINAL: the file type index */
    uint64_t type_id;
};

struct pending_node {
    uint64_t addr, size, type_id, edges;
};

/* A root pseudo-node (MemoryNodeBuilder): children are node indexes in AddChild order. */
struct pseudo {
    struct str16 name;
    uint32_t parent; /* UINT32_MAX for the root */
    uint32_t node;
    struct vec children; /* uint32_t */
};

struct static_var {
    uint64_t object, type_id;
    uint32_t flags;
    struct str16 field;
};

struct ccw {
    uint64_t iunknown, object, type_id;
};

struct rcw {
    uint64_t object, iunknown;
};

struct final_type {
    struct str16 name, module;
    int32_t size;
    uint32_t base; /* a size class's type ("T (Bytes > 1K)"): T's index; else its own */
};

/* A string-keyed map to u32 values (type interning). Keys live in the names arena. */
struct strmap {
    uint32_t *slots; /* entry + 1, 0 = empty */
    size_t cap;
    struct vec ents; /* struct strmap_ent */
};

struct strmap_ent {
    struct str16 key;
    uint32_t val;
};

/* u64 -> u32 map; see u64map_put. */
struct u64map {
    uint64_t *keys;
    uint32_t *vals; /* value + 1, 0 = empty */
    size_t cap, n;
};

struct ev_gcheap {
    struct nettrace_checker ck;
    uint64_t max_nodes;
    struct gmem mem;
    int err;
    char msg[384];
    bool finished;
    bool built;
    /* The GC window (DotNetHeapDumpGraphReader's m_seenStart, m_ignoreEvents, m_gcID). */
    bool seen_start;
    bool ignore;
    bool complete;
    uint32_t gc_id;
    uint32_t ptr_size;
    bool ptr_known;
    bool is64;
    uint64_t next_node_event, next_edge_event; /* also: how many were read */
    uint64_t gap_lost; /* bulk events missing from their Index sequence (dropped by the runtime) */

    struct vec names; /* uint16_t: every UTF-16 string we keep */
    struct vec bulk_types;
    struct vec modules;
    struct u64map module_at; /* module id -> its entry in modules */
    struct vec raw;          /* struct raw_type */
    uint32_t *raw_slots;     /* raw + 1 by (type_id, size_class) */
    size_t raw_cap;

    /* The nodes. */
    struct vec addr; /* uint64_t per node */
    struct vec off;  /* uint32_t per node: its record in blob, NO_OFFSET = undefined */
    uint32_t *slots; /* node + 1 by address */
    size_t slot_cap;
    size_t interned;
    struct vec blob; /* uint8_t */
    uint64_t records;

    struct vec pnodes; /* struct pending_node, from pnode_head */
    size_t pnode_head;
    struct vec pedges;    /* uint64_t, from pedge_head */
    struct vec edge_ends; /* uint64_t: edges read up to the end of each edge event */
    uint64_t edges_used;
    size_t pedge_head;
    bool head_open;
    uint64_t head_left;
    uint32_t head_index;
    bool head_has_rcw;
    uint64_t head_rcw; /* with head_has_rcw: the IUnknown to add as the last child */

    struct vec pseudos; /* struct pseudo; 0 is "[.NET Roots]" */
    struct vec statics;
    struct vec ccws;
    struct vec rcws;
    struct u64map rcw_of; /* object -> its last RCW record */

    /*
     * dotnet-gcdump's node numbering: the nodes it interns before it reads any node event (the
     * root tree's pseudo-nodes, root and conditional weak table targets as their events come,
     * then CCWs and statics), in order; the object records then number the rest.
     */
    struct vec early;                /* uint32_t node indexes */
    bool log_nodes;                  /* node_index calls go to early */
    size_t seg_obj_end, seg_ccw_end; /* our blob: objects, then CCWs, then the root tree */
    uint32_t *perm;                  /* our node index -> the file's */
    uint32_t *inv;                   /* the file's node index -> ours */

    /* Built at finish. */
    struct vec ftypes; /* struct final_type */
    uint32_t *final_of_raw;
    size_t final_of_raw_n;
    int64_t total_size;
    uint32_t fblob_len;

    struct ev_gcheap_stats st;
};

static int fail(struct ev_gcheap *g, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct ev_gcheap *g, int rc, const char *fmt, ...)
{
    if (g->err == 0) {
        g->err = rc;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g->msg, sizeof(g->msg), fmt, ap);
        va_end(ap);
        /* A walk that lost events fails somewhere: say why, unless the message does. */
        uint64_t lost = nettrace_get_stats(&g->ck)->lost;
        if (lost > 0 && rc != -ENOMEM && rc != AGENT_E_TOOBIG &&
            strstr(g->msg, "dropped") == NULL) {
            size_t n = strlen(g->msg);
            snprintf(g->msg + n, sizeof(g->msg) - n,
                     "; the runtime dropped %" PRIu64
                     " events (its session buffer was full): raise GCDump:BufferSizeMB",
                     lost);
        }
    }
    return g->err;
}

/* An allocation failed: over a memory bound (which one, and what to raise), or out of memory. */
static int oom(struct ev_gcheap *g)
{
    const struct gmem *m = &g->mem;
    if (m->refused == MEM_OWN_CAP) {
        return fail(g, AGENT_E_BUDGET,
                    "heap snapshot: the graph needs more than its bound of %" PRIu64
                    " MiB (%" PRIu64 " nodes so far; the bound follows GCDump:MaxNodes)",
                    m->cap >> 20, (uint64_t)g->addr.n);
    }
    if (m->refused == MEM_SHARE) {
        uint64_t cap = m->share != NULL ? m->share->cap : 0;
        char share[64] = "";
        if (cap != 0) {
            snprintf(share, sizeof(share), "share %" PRIu64 " MiB of ", cap >> 20);
        }
        return fail(g, AGENT_E_BUDGET,
                    "heap snapshot: the graph needs more than its share of dotmon's memory budget "
                    "(%" PRIu64 " MiB held, %" PRIu64 " MiB more asked, %s%" PRIu64 " MiB; %" PRIu64
                    " nodes so far)",
                    m->held >> 20, (m->asked + (1u << 20) - 1) >> 20, share,
                    membudget_total() >> 20, (uint64_t)g->addr.n);
    }
    return fail(g, -ENOMEM, "heap snapshot: out of memory");
}

/* ---- strings ------------------------------------------------------------------------------ */

static const struct str16 STR_NULL = {UINT32_MAX, 0};

static const uint16_t *s16(const struct ev_gcheap *g, struct str16 s)
{
    return (const uint16_t *)g->names.p + s.off;
}

/*
 * Appends UTF-16LE units from the wire to the arena: a type, module or field name, cut to
 * EV_GCHEAP_MAX_NAME units with an ellipsis (U+2026) in the last (never inside a surrogate pair).
 */
static int str_add_le(struct ev_gcheap *g, const uint8_t *p, size_t units, struct str16 *out)
{
    bool cut = units > EV_GCHEAP_MAX_NAME;
    size_t keep = cut ? EV_GCHEAP_MAX_NAME - 1 : units;
    if (cut && (ev_load_u16(p + 2 * (keep - 1)) & 0xFC00) == 0xD800) {
        keep--; /* a high surrogate whose low half is cut */
    }
    size_t n = keep + (cut ? 1 : 0);
    if (g->names.n + n >= UINT32_MAX || vec_reserve(&g->mem, &g->names, 2, n) != 0) {
        return oom(g);
    }
    out->off = (uint32_t)g->names.n;
    out->len = (uint32_t)n;
    uint16_t *d = (uint16_t *)g->names.p + g->names.n;
    for (size_t i = 0; i < keep; i++) {
        d[i] = ev_load_u16(p + 2 * i);
    }
    if (cut) {
        d[keep] = 0x2026;
        g->st.names_cut++;
    }
    g->names.n += n;
    return 0;
}

/* A string built piecewise at the end of the arena: start, append…, end. */
struct sb {
    struct ev_gcheap *g;
    size_t start;
    bool bad;
};

static void sb_start(struct sb *b, struct ev_gcheap *g)
{
    b->g = g;
    b->start = g->names.n;
    b->bad = false;
}

static void sb_units(struct sb *b, const uint16_t *u, size_t n)
{
    if (b->bad) {
        return;
    }
    if (b->g->names.n + n >= UINT32_MAX || vec_reserve(&b->g->mem, &b->g->names, 2, n) != 0) {
        b->bad = true;
        return;
    }
    if (n > 0) {
        memcpy((uint16_t *)b->g->names.p + b->g->names.n, u, n * 2);
    }
    b->g->names.n += n;
}

static void sb_str(struct sb *b, struct str16 s)
{
    if (s.off != UINT32_MAX && s.len > 0) {
        /* s may live in the arena that grows: copy through a position, not a pointer. */
        for (uint32_t i = 0; i < s.len && !b->bad; i++) {
            uint16_t u = s16(b->g, s)[i];
            sb_units(b, &u, 1);
        }
    }
}

static void sb_ascii(struct sb *b, const char *a)
{
    for (; *a != '\0' && !b->bad; a++) {
        uint16_t u = (uint8_t)*a;
        sb_units(b, &u, 1);
    }
}

static void sb_hex(struct sb *b, uint64_t v)
{
    char tmp[24];
    snprintf(tmp, sizeof(tmp), "0x%" PRIx64, v);
    sb_ascii(b, tmp);
}

static int sb_end(struct sb *b, struct str16 *out)
{
    if (b->bad) {
        b->g->names.n = b->start;
        return oom(b->g);
    }
    out->off = (uint32_t)b->start;
    out->len = (uint32_t)(b->g->names.n - b->start);
    return 0;
}

static bool str_eq(const struct ev_gcheap *g, struct str16 a, struct str16 b)
{
    if ((a.off == UINT32_MAX) != (b.off == UINT32_MAX) || a.len != b.len) {
        return false;
    }
    return a.len == 0 || memcmp(s16(g, a), s16(g, b), (size_t)a.len * 2) == 0;
}

static uint64_t str_hash(const struct ev_gcheap *g, struct str16 s, uint64_t h)
{
    const uint16_t *u = s.len > 0 ? s16(g, s) : NULL;
    for (uint32_t i = 0; i < s.len; i++) {
        h = (h ^ u[i]) * 0x100000001B3ull;
    }
    return h;
}

/* ---- hashing -------------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    x ^= x >> 33;
    return x;
}

/* Keys of a string map entry: the key string with a module part (may be null) before it. */
static uint64_t key_hash(const struct ev_gcheap *g, struct str16 key)
{
    return str_hash(g, key, 0xCBF29CE484222325ull);
}

/* The hash of entry e of an open-addressing table whose slots hold entry + 1 (0 = empty). */
typedef uint64_t (*entry_hash_fn)(const struct ev_gcheap *g, const void *ctx, uint32_t e);

/* Doubles such a table (first: its first size, a power of two) and puts its entries back. */
static int rehash(struct ev_gcheap *g, uint32_t **slots, size_t *cap, size_t first,
                  entry_hash_fn hash, const void *ctx)
{
    size_t ncap = *cap == 0 ? first : *cap * 2;
    uint32_t *ns = mem_calloc(&g->mem, ncap, sizeof(*ns));
    if (ns == NULL) {
        return oom(g);
    }
    for (size_t i = 0; i < *cap; i++) {
        uint32_t e = (*slots)[i];
        if (e != 0) {
            size_t j = (size_t)hash(g, ctx, e - 1) & (ncap - 1);
            while (ns[j] != 0) {
                j = (j + 1) & (ncap - 1);
            }
            ns[j] = e;
        }
    }
    mem_free(&g->mem, *slots, *cap * sizeof(**slots));
    *slots = ns;
    *cap = ncap;
    return 0;
}

static uint64_t strmap_entry_hash(const struct ev_gcheap *g, const void *ctx, uint32_t e)
{
    const struct strmap *m = ctx;
    return key_hash(g, VEC_AT(m->ents, struct strmap_ent, e).key);
}

static int strmap_grow(struct ev_gcheap *g, struct strmap *m)
{
    return rehash(g, &m->slots, &m->cap, 64, strmap_entry_hash, m);
}

/* The value for key, or UINT32_MAX. */
static uint32_t strmap_get(const struct ev_gcheap *g, const struct strmap *m, struct str16 key)
{
    if (m->cap == 0) {
        return UINT32_MAX;
    }
    size_t i = (size_t)key_hash(g, key) & (m->cap - 1);
    while (m->slots[i] != 0) {
        const struct strmap_ent *en = &VEC_AT(m->ents, struct strmap_ent, m->slots[i] - 1);
        if (str_eq(g, en->key, key)) {
            return en->val;
        }
        i = (i + 1) & (m->cap - 1);
    }
    return UINT32_MAX;
}

static int strmap_put(struct ev_gcheap *g, struct strmap *m, struct str16 key, uint32_t val)
{
    if ((m->ents.n + 1) * 2 > m->cap && strmap_grow(g, m) != 0) {
        return g->err;
    }
    struct strmap_ent en = {key, val};
    if (vec_push(&g->mem, &m->ents, sizeof(en), &en) != 0) {
        return oom(g);
    }
    size_t i = (size_t)key_hash(g, key) & (m->cap - 1);
    while (m->slots[i] != 0) {
        i = (i + 1) & (m->cap - 1);
    }
    m->slots[i] = (uint32_t)m->ents.n;
    return 0;
}

static void strmap_free(struct ev_gcheap *g, struct strmap *m)
{
    mem_free(&g->mem, m->slots, m->cap * sizeof(*m->slots));
    vec_free(&g->mem, &m->ents);
}

/* ---- cint ------------------------------------------------------------------------------------ */

/* MemoryGraph's compressed int: 7-bit groups, most significant first, the first sign-extended. */
static size_t cint_put(uint8_t out[5], int32_t v)
{
    uint32_t u = (uint32_t)v;
    size_t n;
    if (v >= -64 && v < 64) {
        n = 1;
    } else if (v >= -8192 && v < 8192) {
        n = 2;
    } else if (v >= -1048576 && v < 1048576) {
        n = 3;
    } else if (v >= -134217728 && v < 134217728) {
        n = 4;
    } else {
        n = 5;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned shift = (unsigned)(7 * (n - 1 - i));
        uint8_t b = (uint8_t)((u >> shift) & 0x7F);
        if (i + 1 < n) {
            b |= 0x80;
        }
        if (i == 0 && n == 5) { /* C#'s (byte)((value >> 28) | 0x80): an arithmetic shift */
            b = (uint8_t)(0x80 | (v < 0 ? ~(~u >> 28) : u >> 28));
        }
        out[i] = b;
    }
    return n;
}

/* Reads a cint written by cint_put from p[*i..n): 0, or AGENT_E_TRUNC. */
static int cint_get(const uint8_t *p, size_t n, size_t *i, int32_t *out)
{
    if (*i >= n) {
        return AGENT_E_TRUNC;
    }
    uint8_t b = p[(*i)++];
    uint32_t v = b & 0x7Fu;
    if (v & 0x40u) {
        v |= 0xFFFFFF80u; /* the first group is signed */
    }
    for (int k = 0; k < 4 && (b & 0x80); k++) {
        if (*i >= n) {
            return AGENT_E_TRUNC;
        }
        b = p[(*i)++];
        v = (v << 7) + (k == 3 ? b : (uint32_t)(b & 0x7F));
    }
    *out = (int32_t)v;
    return 0;
}

static int blob_cint(struct ev_gcheap *g, int32_t v)
{
    if (vec_reserve(&g->mem, &g->blob, 1, 5) != 0) {
        return oom(g);
    }
    g->blob.n += cint_put((uint8_t *)g->blob.p + g->blob.n, v);
    if (g->blob.n > MAX_BLOB) {
        return fail(g, AGENT_E_TOOBIG, "heap snapshot: the node records are over 2 GiB");
    }
    return 0;
}

/* u64 -> u32 (a Dictionary<ulong, …>; a later value replaces the earlier): TypeIDs to file types,
 * RCW objects to their IUnknown. */

static void u64map_free(struct ev_gcheap *g, struct u64map *m);

static int u64map_put(struct ev_gcheap *g, struct u64map *m, uint64_t k, uint32_t v)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap == 0 ? 256 : m->cap * 2;
        uint64_t *nk = mem_calloc(&g->mem, cap, sizeof(*nk));
        uint32_t *nv = nk != NULL ? mem_calloc(&g->mem, cap, sizeof(*nv)) : NULL;
        if (nk == NULL || nv == NULL) {
            mem_free(&g->mem, nk, cap * sizeof(*nk));
            return oom(g);
        }
        for (size_t i = 0; i < m->cap; i++) {
            if (m->vals[i] != 0) {
                size_t j = (size_t)mix64(m->keys[i]) & (cap - 1);
                while (nv[j] != 0) {
                    j = (j + 1) & (cap - 1);
                }
                nk[j] = m->keys[i];
                nv[j] = m->vals[i];
            }
        }
        u64map_free(g, m);
        m->keys = nk;
        m->vals = nv;
        m->cap = cap;
    }
    size_t j = (size_t)mix64(k) & (m->cap - 1);
    while (m->vals[j] != 0 && m->keys[j] != k) {
        j = (j + 1) & (m->cap - 1);
    }
    if (m->vals[j] == 0) {
        m->n++;
    }
    m->keys[j] = k;
    m->vals[j] = v + 1;
    return 0;
}

static uint32_t u64map_get(const struct u64map *m, uint64_t k)
{
    if (m->cap == 0) {
        return UINT32_MAX;
    }
    size_t j = (size_t)mix64(k) & (m->cap - 1);
    while (m->vals[j] != 0) {
        if (m->keys[j] == k) {
            return m->vals[j] - 1;
        }
        j = (j + 1) & (m->cap - 1);
    }
    return UINT32_MAX;
}

static void u64map_free(struct ev_gcheap *g, struct u64map *m)
{
    mem_free(&g->mem, m->keys, m->cap * sizeof(*m->keys));
    mem_free(&g->mem, m->vals, m->cap * sizeof(*m->vals));
    m->keys = NULL;
    m->vals = NULL;
}

/* ---- nodes ------------------------------------------------------------------------------------
 */

static int node_create(struct ev_gcheap *g, uint64_t addr, uint32_t *out)
{
    if (g->addr.n >= g->max_nodes) {
        return fail(g, AGENT_E_TOOBIG,
                    "heap snapshot: more than %" PRIu64 " nodes (the node limit)", g->max_nodes);
    }
    uint32_t none = NO_OFFSET;
    if (vec_push(&g->mem, &g->addr, 8, &addr) != 0 || vec_push(&g->mem, &g->off, 4, &none) != 0) {
        return oom(g);
    }
    *out = (uint32_t)(g->addr.n - 1);
    return 0;
}

static uint64_t node_entry_hash(const struct ev_gcheap *g, const void *ctx, uint32_t e)
{
    (void)ctx;
    return mix64(VEC_AT(g->addr, uint64_t, e));
}

static int slots_grow(struct ev_gcheap *g)
{
    return rehash(g, &g->slots, &g->slot_cap, 1024, node_entry_hash, NULL);
}

/*
 * MemoryGraph.GetNodeIndex: a new node on the first sight of an address. The table is filled up to
 * 5/8 (the slots are the graph's biggest part; with the lookups prefetched a longer probe within
 * a cache line costs little): 9 million nodes fit 2^24 slots, 64 MiB, where a half would take 128.
 */
static int node_index(struct ev_gcheap *g, uint64_t addr, uint32_t *out)
{
    if ((g->interned + 1) * 8 > g->slot_cap * 5 && slots_grow(g) != 0) {
        return g->err;
    }
    size_t j = (size_t)mix64(addr) & (g->slot_cap - 1);
    uint32_t idx = UINT32_MAX;
    while (g->slots[j] != 0) {
        uint32_t e = g->slots[j] - 1;
        if (VEC_AT(g->addr, uint64_t, e) == addr) {
            idx = e;
            break;
        }
        j = (j + 1) & (g->slot_cap - 1);
    }
    if (idx == UINT32_MAX) {
        if (node_create(g, addr, &idx) != 0) {
            return g->err;
        }
        g->slots[j] = idx + 1;
        g->interned++;
    }
    if (g->log_nodes && vec_push(&g->mem, &g->early, 4, &idx) != 0) {
        return oom(g);
    }
    *out = idx;
    return 0;
}

/*
 * The lookups of a queue of addresses (a bulk event's) overlap their cache misses: PF_FAR ahead
 * the slot is prefetched, PF_NEAR ahead the slot (by then in cache) names the node whose address
 * and record offset are prefetched. Hints only: a grown table or a new node just misses.
 * always_inline: as calls, GCC 12 finds the helpers free of side effects and drops them.
 */
enum { PF_FAR = 16, PF_NEAR = 8 };

#define PF_INLINE static inline __attribute__((always_inline))

PF_INLINE void prefetch_slot(const struct ev_gcheap *g, uint64_t addr)
{
    if (g->slot_cap != 0) {
        __builtin_prefetch(&g->slots[(size_t)mix64(addr) & (g->slot_cap - 1)]);
    }
}

PF_INLINE void prefetch_node(const struct ev_gcheap *g, uint64_t addr, bool off)
{
    if (g->slot_cap == 0) {
        return;
    }
    uint32_t e = g->slots[(size_t)mix64(addr) & (g->slot_cap - 1)];
    if (e != 0 && e - 1 < g->addr.n) {
        __builtin_prefetch(&VEC_AT(g->addr, uint64_t, e - 1));
        if (off) {
            __builtin_prefetch(&VEC_AT(g->off, uint32_t, e - 1), 1);
        }
    }
}

/* ---- raw types --------------------------------------------------------------------------------
 */

static int size_class(int32_t size)
{
    if (size <= 1000) {
        return 0;
    }
    int c = 1;
    for (int64_t lim = 10000; size >= lim && c < 6; lim *= 10) {
        c++;
    }
    return c;
}

static const char *const SIZE_SUFFIX[7] = {"",
                                           " (Bytes > 1K)",
                                           " (Bytes > 10K)",
                                           " (Bytes > 100K)",
                                           " (Bytes > 1M)",
                                           " (Bytes > 10M)",
                                           " (Bytes > 100M)"};

static int raw_add(struct ev_gcheap *g, const struct raw_type *r, uint32_t *out)
{
    if (vec_push(&g->mem, &g->raw, sizeof(*r), r) != 0) {
        return oom(g);
    }
    *out = (uint32_t)(g->raw.n - 1);
    return 0;
}

static uint64_t raw_key(uint64_t type_id, int cls)
{
    return mix64(type_id * 8 + (uint64_t)cls);
}

static uint64_t raw_entry_hash(const struct ev_gcheap *g, const void *ctx, uint32_t e)
{
    (void)ctx;
    const struct raw_type *r = &VEC_AT(g->raw, struct raw_type, e);
    return raw_key(r->type_id, r->size_class);
}

static int raw_grow(struct ev_gcheap *g)
{
    return rehash(g, &g->raw_slots, &g->raw_cap, 256, raw_entry_hash, NULL);
}

/* The raw type of a TypeID at a size class, created on first use (the order types get made). */
static int raw_bulk(struct ev_gcheap *g, uint64_t type_id, int cls, uint32_t *out)
{
    if ((g->raw.n + 1) * 2 > g->raw_cap && raw_grow(g) != 0) {
        return g->err;
    }
    size_t j = (size_t)raw_key(type_id, cls) & (g->raw_cap - 1);
    while (g->raw_slots[j] != 0) {
        const struct raw_type *r = &VEC_AT(g->raw, struct raw_type, g->raw_slots[j] - 1);
        if (r->kind == RAW_BULK && r->type_id == type_id && r->size_class == cls) {
            *out = g->raw_slots[j] - 1;
            return 0;
        }
        j = (j + 1) & (g->raw_cap - 1);
    }
    struct raw_type r = {.kind = RAW_BULK, .size_class = (uint8_t)cls, .type_id = type_id};
    if (raw_add(g, &r, out) != 0) {
        return g->err;
    }
    g->raw_slots[j] = *out + 1;
    return 0;
}

/* ---- pseudo nodes (the root tree) ------------------------------------------------------------ */

static int pseudo_new(struct ev_gcheap *g, uint32_t parent, struct str16 name, uint32_t *out)
{
    struct pseudo ps = {.name = name, .parent = parent};
    if (node_create(g, 0, &ps.node) != 0) {
        return g->err;
    }
    if (vec_push(&g->mem, &g->early, 4, &ps.node) != 0) {
        return oom(g);
    }
    if (vec_push(&g->mem, &g->pseudos, sizeof(ps), &ps) != 0) {
        return oom(g);
    }
    *out = (uint32_t)(g->pseudos.n - 1);
    if (parent != UINT32_MAX) {
        struct pseudo *pp = &VEC_AT(g->pseudos, struct pseudo, parent);
        if (vec_push(&g->mem, &pp->children, 4, &ps.node) != 0) {
            return oom(g);
        }
    }
    return 0;
}

/* MemoryNodeBuilder.FindOrCreateChild. */
static int pseudo_child(struct ev_gcheap *g, uint32_t parent, struct str16 name, uint32_t *out)
{
    for (size_t i = 0; i < g->pseudos.n; i++) {
        const struct pseudo *ps = &VEC_AT(g->pseudos, struct pseudo, i);
        if (ps->parent == parent && str_eq(g, ps->name, name)) {
            *out = (uint32_t)i;
            return 0;
        }
    }
    return pseudo_new(g, parent, name, out);
}

static int pseudo_child_ascii(struct ev_gcheap *g, uint32_t parent, const char *name, uint32_t *out)
{
    /* Look the name up without adding it to the arena when the child exists. */
    size_t len = strlen(name);
    for (size_t i = 0; i < g->pseudos.n; i++) {
        const struct pseudo *ps = &VEC_AT(g->pseudos, struct pseudo, i);
        if (ps->parent != parent || ps->name.len != len) {
            continue;
        }
        const uint16_t *u = s16(g, ps->name);
        size_t k = 0;
        while (k < len && u[k] == (uint8_t)name[k]) {
            k++;
        }
        if (k == len) {
            *out = (uint32_t)i;
            return 0;
        }
    }
    struct sb b;
    struct str16 s = STR_NULL;
    sb_start(&b, g);
    sb_ascii(&b, name);
    if (sb_end(&b, &s) != 0) {
        return g->err;
    }
    return pseudo_new(g, parent, s, out);
}

static int pseudo_add(struct ev_gcheap *g, uint32_t ps, uint32_t node)
{
    struct pseudo *pp = &VEC_AT(g->pseudos, struct pseudo, ps);
    if (vec_push(&g->mem, &pp->children, 4, &node) != 0) {
        return oom(g);
    }
    return 0;
}

/* ---- the heap walk ----------------------------------------------------------------------------
 */

static uint64_t rd_ptr(const uint8_t *p, uint32_t ptr_size)
{
    return ptr_size == 8 ? ev_load_u64(p) : ev_load_u32(p);
}

static bool in_window(const struct ev_gcheap *g)
{
    return !g->ignore && g->err == 0;
}

/* Writes our record header for the next pending node and makes it the open one. */
static int open_head(struct ev_gcheap *g)
{
    const struct pending_node *pn = &VEC_AT(g->pnodes, struct pending_node, g->pnode_head);
    struct pending_node n = *pn;
    if (g->pnode_head + PF_FAR < g->pnodes.n) {
        prefetch_slot(g, pn[PF_FAR].addr);
    }
    if (g->pnode_head + PF_NEAR < g->pnodes.n) {
        prefetch_node(g, pn[PF_NEAR].addr, true);
    }
    g->pnode_head++;
    uint32_t idx;
    if (node_index(g, n.addr, &idx) != 0) {
        return g->err;
    }
    int32_t size = (int32_t)(uint32_t)n.size; /* dotnet-gcdump: (int)node->Size */
    uint32_t raw = 0;
    if (raw_bulk(g, n.type_id, size_class(size), &raw) != 0) {
        return g->err;
    }
    uint32_t rcw = u64map_get(&g->rcw_of, n.addr); /* the last RCW event for it wins */
    g->head_has_rcw = rcw != UINT32_MAX;
    g->head_rcw = g->head_has_rcw ? VEC_AT(g->rcws, struct rcw, rcw).iunknown : 0;
    uint64_t children = n.edges + (g->head_has_rcw ? 1 : 0);
    if (children > INT32_MAX) {
        return fail(g, AGENT_E_PROTO, "heap walk: node %" PRIu64 " has %" PRIu64 " edges",
                    g->st.objects, n.edges);
    }
    if (g->head_has_rcw) { /* C#'s unchecked int addition: it may wrap, then it is capped below */
        size = (int32_t)((uint32_t)size + RCW_EXTRA);
    }
    if (size < 0) {
        size = INT32_MAX; /* Graph.SetNodeTypeAndSize */
    }
    uint32_t at = (uint32_t)g->blob.n;
    if (blob_cint(g, (int32_t)idx) != 0 || blob_cint(g, (int32_t)raw) != 0 ||
        blob_cint(g, size) != 0 || blob_cint(g, (int32_t)children) != 0) {
        return g->err;
    }
    VEC_AT(g->off, uint32_t, idx) = at;
    g->records++;
    g->total_size += size;
    g->st.total_size += (uint64_t)size;
    g->head_open = true;
    g->head_left = n.edges;
    g->head_index = idx;
    return 0;
}

static int add_child(struct ev_gcheap *g, uint64_t target)
{
    uint32_t c;
    if (node_index(g, target, &c) != 0) {
        return g->err;
    }
    return blob_cint(g, (int32_t)(c - g->head_index));
}

/* Matches pending nodes with pending edges, in order. */
static int pump(struct ev_gcheap *g)
{
    for (;;) {
        if (!g->head_open) {
            if (g->pnode_head == g->pnodes.n) {
                break;
            }
            if (open_head(g) != 0) {
                return g->err;
            }
        }
        while (g->head_left > 0 && g->pedge_head < g->pedges.n) {
            const uint64_t *pe = &VEC_AT(g->pedges, uint64_t, g->pedge_head);
            if (g->pedge_head + PF_FAR < g->pedges.n) {
                prefetch_slot(g, pe[PF_FAR]);
            }
            if (g->pedge_head + PF_NEAR < g->pedges.n) {
                prefetch_node(g, pe[PF_NEAR], false);
            }
            uint64_t t = pe[0];
            g->pedge_head++;
            g->head_left--;
            g->edges_used++;
            if (add_child(g, t) != 0) {
                return g->err;
            }
        }
        if (g->head_left > 0) {
            break;
        }
        if (g->head_has_rcw && add_child(g, g->head_rcw) != 0) {
            return g->err;
        }
        g->head_open = false;
    }
    /* Reclaim the consumed fronts of the queues once they are empty. */
    if (g->pnode_head == g->pnodes.n) {
        g->pnodes.n = g->pnode_head = 0;
    }
    if (g->pedge_head == g->pedges.n) {
        g->pedges.n = g->pedge_head = 0;
    }
    return 0;
}

/* A bulk event's u32 Index, u32 Count, u16 ClrInstanceID header; count checked against the rest. */
static int bulk_header(struct ev_gcheap *g, const struct nettrace_event *ev, const char *what,
                       size_t value_size, uint32_t *index, uint32_t *count)
{
    if (ev->payload_len < 10) {
        return fail(g, AGENT_E_PROTO, "heap walk: a %s event of %zu bytes", what, ev->payload_len);
    }
    *index = ev_load_u32(ev->payload);
    *count = ev_load_u32(ev->payload + 4);
    if ((uint64_t)*count * value_size > ev->payload_len - 10) {
        return fail(g, AGENT_E_PROTO,
                    "heap walk: a %s event claims %" PRIu32 " values in %zu bytes", what, *count,
                    ev->payload_len);
    }
    return 0;
}

/* A node or edge event: its header, and its Index must be the next of its kind (*next). */
static int next_event(struct ev_gcheap *g, const struct nettrace_event *ev, const char *what,
                      const char *kind, size_t value_size, uint64_t *next, uint32_t *count)
{
    uint32_t index = 0;
    if (bulk_header(g, ev, what, value_size, &index, count) != 0) {
        return g->err;
    }
    if (index > *next) {
        /* The runtime drops events when its session buffer is full (no room until the reader
         * catches up): the Index jumps, and the capture thread's sequence number may too. */
        g->gap_lost += index - *next;
        uint64_t lost = nettrace_get_stats(&g->ck)->lost;
        return fail(g, AGENT_E_PROTO,
                    "heap walk: the runtime dropped %" PRIu64
                    " events (its session buffer was full): raise GCDump:BufferSizeMB (%s event "
                    "%" PRIu32 " where %" PRIu64 " was expected)",
                    lost > g->gap_lost ? lost : g->gap_lost, kind, index, *next);
    }
    if (index != *next) {
        return fail(g, AGENT_E_PROTO,
                    "heap walk: %s event %" PRIu32 " where %" PRIu64 " was expected", kind, index,
                    *next);
    }
    (*next)++;
    return 0;
}

static void on_nodes(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    size_t vs = g->ptr_size + 24;
    uint32_t count = 0;
    if (next_event(g, ev, "GCBulkNode", "node", vs, &g->next_node_event, &count) != 0) {
        return;
    }
    if (vec_reserve(&g->mem, &g->pnodes, sizeof(struct pending_node), count) != 0) {
        oom(g);
        return;
    }
    const uint8_t *p = ev->payload + 10;
    for (uint32_t i = 0; i < count; i++, p += vs) {
        struct pending_node n;
        n.addr = rd_ptr(p, g->ptr_size);
        n.size = ev_load_u64(p + g->ptr_size);
        n.type_id = ev_load_u64(p + g->ptr_size + 8);
        n.edges = ev_load_u64(p + g->ptr_size + 16);
        VEC_AT(g->pnodes, struct pending_node, g->pnodes.n++) = n;
    }
    g->st.objects += count;
    pump(g);
}

static void on_edges(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    size_t vs = g->ptr_size + 4;
    uint32_t count = 0;
    if (next_event(g, ev, "GCBulkEdge", "edge", vs, &g->next_edge_event, &count) != 0) {
        return;
    }
    if (vec_reserve(&g->mem, &g->pedges, 8, count) != 0) {
        oom(g);
        return;
    }
    const uint8_t *p = ev->payload + 10;
    for (uint32_t i = 0; i < count; i++, p += vs) {
        VEC_AT(g->pedges, uint64_t, g->pedges.n++) = rd_ptr(p, g->ptr_size);
    }
    g->st.edges += count;
    if (vec_push(&g->mem, &g->edge_ends, 8, &g->st.edges) != 0) {
        oom(g);
        return;
    }
    pump(g);
}

static const char *root_name(uint8_t kind, uint32_t flags, bool *other)
{
    *other = kind != ROOT_KIND_STACK;
    if (kind == ROOT_KIND_STACK) {
        return "[local vars]";
    }
    if (flags & ROOT_FLAG_REFCOUNT) {
        return "[COM/WinRT Objects]";
    }
    if (kind == ROOT_KIND_FINALIZER) {
        return "[finalizer Handles]";
    }
    if (kind == ROOT_KIND_HANDLE) {
        return flags == ROOT_FLAG_PINNING ? "[pinning Handles]" : "[strong Handles]";
    }
    return "[other Handles]";
}

static void on_roots(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    size_t vs = 2 * (size_t)g->ptr_size + 5;
    uint32_t index, count, unused;
    if (bulk_header(g, ev, "GCBulkRootEdge", vs, &index, &count) != 0 ||
        pseudo_child_ascii(g, 0, "[static vars]", &unused) != 0) {
        return;
    }
    const uint8_t *p = ev->payload + 10;
    for (uint32_t i = 0; i < count; i++, p += vs) {
        uint64_t addr = rd_ptr(p, g->ptr_size);
        uint8_t kind = p[g->ptr_size];
        uint32_t flags = ev_load_u32(p + g->ptr_size + 1);
        if (flags & ROOT_FLAG_WEAK) {
            continue;
        }
        bool other;
        const char *name = root_name(kind, flags, &other);
        uint32_t parent = 0, ps, node;
        if ((other && pseudo_child_ascii(g, 0, "[other roots]", &parent) != 0) ||
            pseudo_child_ascii(g, parent, name, &ps) != 0 || node_index(g, addr, &node) != 0 ||
            pseudo_add(g, ps, node) != 0) {
            return;
        }
        g->st.roots++;
    }
}

static void on_cwt(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    size_t vs = 3 * (size_t)g->ptr_size;
    uint32_t index, count, other, dep;
    if (bulk_header(g, ev, "GCBulkRootConditionalWeakTableElementEdge", vs, &index, &count) != 0 ||
        pseudo_child_ascii(g, 0, "[other roots]", &other) != 0 ||
        pseudo_child_ascii(g, other, "[Dependent Handles]", &dep) != 0) {
        return;
    }
    const uint8_t *p = ev->payload + 10;
    for (uint32_t i = 0; i < count; i++, p += vs) {
        uint32_t node;
        if (rd_ptr(p, g->ptr_size) != 0 &&
            (node_index(g, rd_ptr(p + g->ptr_size, g->ptr_size), &node) != 0 ||
             pseudo_add(g, dep, node) != 0)) {
            return;
        }
    }
}

/* GCBulkRootCCW, GCBulkRCW: u32 Count, u16 ClrInstanceID, then values. */
static int count_header(struct ev_gcheap *g, const struct nettrace_event *ev, const char *what,
                        size_t at, size_t value_size, uint32_t *count)
{
    if (ev->payload_len < at) {
        return fail(g, AGENT_E_PROTO, "heap walk: a %s event of %zu bytes", what, ev->payload_len);
    }
    *count = ev_load_u32(ev->payload);
    if ((uint64_t)*count * value_size > ev->payload_len - at) {
        return fail(g, AGENT_E_PROTO,
                    "heap walk: a %s event claims %" PRIu32 " values in %zu bytes", what, *count,
                    ev->payload_len);
    }
    return 0;
}

static void on_ccws(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    uint32_t count = 0;
    if (count_header(g, ev, "GCBulkRootCCW", 6, CCW_VALUE, &count) != 0) {
        return;
    }
    const uint8_t *p = ev->payload + 6;
    for (uint32_t i = 0; i < count; i++, p += CCW_VALUE) {
        struct ccw c = {ev_load_u64(p + 24), ev_load_u64(p + 8), ev_load_u64(p + 16)};
        if (c.iunknown != 0 && vec_push(&g->mem, &g->ccws, sizeof(c), &c) != 0) {
            oom(g);
            return;
        }
    }
}

static void on_rcws(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    uint32_t count = 0;
    if (count_header(g, ev, "GCBulkRCW", 6, RCW_VALUE, &count) != 0) {
        return;
    }
    const uint8_t *p = ev->payload + 6;
    for (uint32_t i = 0; i < count; i++, p += RCW_VALUE) {
        struct rcw r = {ev_load_u64(p), ev_load_u64(p + 16)};
        if (vec_push(&g->mem, &g->rcws, sizeof(r), &r) != 0) {
            oom(g);
            return;
        }
        if (u64map_put(g, &g->rcw_of, r.object, (uint32_t)(g->rcws.n - 1)) != 0) {
            return;
        }
    }
}

static void on_statics(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    uint32_t count = 0;
    if (count_header(g, ev, "GCBulkRootStaticVar", 14, 30, &count) != 0) {
        return;
    }
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->payload_len);
    (void)ev_rd_skip(&r, 14);
    for (uint32_t i = 0; i < count; i++) {
        struct static_var sv;
        uint64_t root_id;
        const uint8_t *name;
        size_t units;
        if (ev_rd_u64(&r, &root_id) != 0 || ev_rd_u64(&r, &sv.object) != 0 ||
            ev_rd_u64(&r, &sv.type_id) != 0 || ev_rd_u32(&r, &sv.flags) != 0 ||
            !ev_rd_utf16z(&r, &name, &units)) {
            fail(g, AGENT_E_PROTO, "heap walk: a GCBulkRootStaticVar value runs past its event");
            return;
        }
        if (str_add_le(g, name, units, &sv.field) != 0 ||
            vec_push(&g->mem, &g->statics, sizeof(sv), &sv) != 0) {
            oom(g);
            return;
        }
    }
}

static void on_types(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    if (ev->payload_len < 6) {
        fail(g, AGENT_E_PROTO, "heap walk: a BulkType event of %zu bytes", ev->payload_len);
        return;
    }
    uint32_t count = ev_load_u32(ev->payload);
    if ((uint64_t)count * 31 > ev->payload_len - 6) {
        fail(g, AGENT_E_PROTO, "heap walk: a BulkType event claims %" PRIu32 " values in %zu bytes",
             count, ev->payload_len);
        return;
    }
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->payload_len);
    (void)ev_rd_skip(&r, 6);
    for (uint32_t i = 0; i < count; i++) {
        struct bulk_type t;
        uint8_t elem;
        uint32_t params;
        const uint8_t *name;
        size_t units;
        if (ev_rd_u64(&r, &t.type_id) != 0 || ev_rd_u64(&r, &t.module_id) != 0 ||
            ev_rd_u32(&r, &t.name_id) != 0 || ev_rd_u32(&r, &t.flags) != 0 ||
            ev_rd_u8(&r, &elem) != 0 || !ev_rd_utf16z(&r, &name, &units) ||
            ev_rd_u32(&r, &params) != 0 || ev_rd_skip(&r, (size_t)params * 8) != 0) {
            fail(g, AGENT_E_PROTO, "heap walk: a BulkType value runs past its event");
            return;
        }
        if (str_add_le(g, name, units, &t.name) != 0 ||
            vec_push(&g->mem, &g->bulk_types, sizeof(t), &t) != 0) {
            oom(g);
            return;
        }
        g->st.types++;
    }
}

static void on_module(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    struct ev_rd r;
    ev_rd_init(&r, ev->payload, ev->payload_len);
    const uint8_t *path;
    size_t units;
    uint64_t id;
    if (ev_rd_u64(&r, &id) != 0 || ev_rd_skip(&r, MODULE_IL_PATH_AT - 8) != 0 ||
        !ev_rd_utf16z(&r, &path, &units)) {
        return; /* TraceEvent would read an odd module event somehow; the name stays unknown */
    }
    if (u64map_get(&g->module_at, id) != UINT32_MAX) {
        return; /* the first name wins */
    }
    struct module_name m = {.id = id};
    if (str_add_le(g, path, units, &m.path) != 0 ||
        vec_push(&g->mem, &g->modules, sizeof(m), &m) != 0) {
        oom(g);
        return;
    }
    (void)u64map_put(g, &g->module_at, id, (uint32_t)(g->modules.n - 1));
}

static void on_gc_start(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    if (ev->version < 1 || ev->payload_len < 16) {
        return; /* no Depth/Type: not a heap dump's GC */
    }
    uint32_t count = ev_load_u32(ev->payload);
    uint32_t depth = ev_load_u32(ev->payload + 4);
    uint32_t reason = ev_load_u32(ev->payload + 8);
    uint32_t type = ev_load_u32(ev->payload + 12);
    if (depth < 2 || type != GC_TYPE_NONCONC || reason != GC_REASON_INDUCED || g->seen_start) {
        return;
    }
    g->gc_id = count;
    g->ignore = false;
    g->seen_start = true;
}

static void on_gc_end(struct ev_gcheap *g, const struct nettrace_event *ev)
{
    if (g->ignore || ev->payload_len < 4 || ev_load_u32(ev->payload) != g->gc_id) {
        return;
    }
    g->ignore = true;
    if (g->next_node_event == 0 && g->next_edge_event == 0 && g->bulk_types.n == 0) {
        g->seen_start = false; /* an empty window: look for the next induced GC */
        return;
    }
    g->complete = true;
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_gcheap *g = ud;
    if (g->err != 0) {
        return;
    }
    if (!g->ptr_known) {
        struct nettrace_trace_info ti;
        if (nettrace_trace_info(&g->ck, &ti) == 0) {
            g->ptr_size = (uint32_t)ti.pointer_size;
            g->is64 = ti.pointer_size == 8;
        }
        g->ptr_known = true;
    }
    if (strcmp(ev->provider, RUNDOWN_PROVIDER) == 0) {
        if (ev->event_id == EV_RD_MODULE_DCSTART || ev->event_id == EV_RD_MODULE_DCEND) {
            on_module(g, ev);
        }
        return;
    }
    if (strcmp(ev->provider, RUNTIME_PROVIDER) != 0) {
        return;
    }
    switch (ev->event_id) {
    case EV_GC_START:
        on_gc_start(g, ev);
        break;
    case EV_GC_END:
        on_gc_end(g, ev);
        break;
    case EV_BULK_TYPE:
        on_types(g, ev); /* kept at any time */
        break;
    case EV_MODULE_DCSTART_V2:
    case EV_MODULE_DCEND_V2:
    case EV_MODULE_LOAD:
    case EV_MODULE_UNLOAD:
        on_module(g, ev);
        break;
    default:
        break;
    }
    if (!in_window(g)) {
        return;
    }
    switch (ev->event_id) {
    case EV_BULK_NODE:
        on_nodes(g, ev);
        break;
    case EV_BULK_EDGE:
        on_edges(g, ev);
        break;
    case EV_BULK_ROOT_EDGE:
        g->log_nodes = true;
        on_roots(g, ev);
        g->log_nodes = false;
        break;
    case EV_BULK_ROOT_CWT:
        g->log_nodes = true;
        on_cwt(g, ev);
        g->log_nodes = false;
        break;
    case EV_BULK_ROOT_CCW:
        on_ccws(g, ev);
        break;
    case EV_BULK_RCW:
        on_rcws(g, ev);
        break;
    case EV_BULK_ROOT_STATIC:
        on_statics(g, ev);
        break;
    default:
        break;
    }
}

/* ---- public: reading ------------------------------------------------------------------------ */

int ev_gcheap_new(struct ev_gcheap **out, const struct ev_gcheap_limits *lim)
{
    if (out == NULL) {
        return AGENT_E_INVAL;
    }
    struct ev_gcheap *g = calloc(1, sizeof(*g));
    if (g == NULL) {
        return -ENOMEM;
    }
    g->max_nodes =
        lim != NULL && lim->max_nodes != 0 ? lim->max_nodes : EV_GCHEAP_DEFAULT_MAX_NODES;
    if (g->max_nodes > INT32_MAX) {
        g->max_nodes = INT32_MAX;
    }
    g->mem.share = lim != NULL ? lim->share : NULL;
    g->mem.cap = lim != NULL && lim->max_bytes != 0
                     ? lim->max_bytes
                     : EV_GCHEAP_BYTES_BASE + g->max_nodes * EV_GCHEAP_BYTES_PER_NODE;
    g->ignore = true;
    g->ptr_size = 8;
    int rc = nettrace_checker_init(&g->ck, NULL);
    if (rc != 0) {
        free(g);
        return rc;
    }
    nettrace_set_event_cb(&g->ck, on_event, g);
    /* Node 0: the root builder "[.NET Roots]" (created before anything, not interned). */
    uint32_t root;
    if (pseudo_child_ascii(g, UINT32_MAX, "[.NET Roots]", &root) != 0) {
        ev_gcheap_free(g);
        return -ENOMEM;
    }
    *out = g;
    return 0;
}

int ev_gcheap_feed(struct ev_gcheap *g, const uint8_t *p, size_t n)
{
    if (g->err != 0) {
        return g->err;
    }
    if (g->finished) {
        return AGENT_E_INVAL; /* the caller's mistake: the snapshot stays as it was */
    }
    int rc = nettrace_feed(&g->ck, p, n);
    if (rc < 0 && g->err == 0) {
        nettrace_error_line(&g->ck, rc, g->msg, sizeof(g->msg));
        g->err = rc;
    }
    return g->err;
}

bool ev_gcheap_complete(const struct ev_gcheap *g)
{
    return g->complete;
}

const char *ev_gcheap_error(const struct ev_gcheap *g)
{
    return g->err != 0 ? g->msg : NULL;
}

/* ---- finish: the types, the root tree, the file layout ------------------------------------- */

/* What finish needs only while it runs. */
struct build {
    struct u64map by_id;   /* TypeID -> file type */
    struct strmap intern;  /* "module!name" (or "name") -> file type: CreateType's interning */
    struct strmap by_size; /* "name (Bytes > …)" -> file type */
    struct strmap pseudo;  /* root pseudo-node type name -> file type */
};

static int ftype_new(struct ev_gcheap *g, struct str16 name, struct str16 module, uint32_t *out)
{
    struct final_type t = {name, module, -1, (uint32_t)g->ftypes.n};
    if (g->ftypes.n >= (1u << 29) || vec_push(&g->mem, &g->ftypes, sizeof(t), &t) != 0) {
        return oom(g);
    }
    *out = (uint32_t)(g->ftypes.n - 1);
    return 0;
}

/* DotNetHeapDumpGraphReader.CreateType: interned by "module!name". */
static int ftype_intern(struct ev_gcheap *g, struct build *b, struct str16 name,
                        struct str16 module, uint32_t *out)
{
    struct sb k;
    struct str16 key;
    sb_start(&k, g);
    if (module.off != UINT32_MAX) {
        sb_str(&k, module);
        sb_ascii(&k, "!");
    }
    sb_str(&k, name);
    if (sb_end(&k, &key) != 0) {
        return g->err;
    }
    uint32_t v = strmap_get(g, &b->intern, key);
    if (v != UINT32_MAX) {
        g->names.n = key.off; /* drop the key: it was the last thing added */
        *out = v;
        return 0;
    }
    if (ftype_new(g, name, module, out) != 0 || strmap_put(g, &b->intern, key, *out) != 0) {
        return g->err;
    }
    return 0;
}

/* The BulkType name clean-up: `N arity markers out, [ -> <, ] -> >, then <> -> []. */
static int clean_name(struct ev_gcheap *g, const struct bulk_type *t, struct str16 *out)
{
    struct sb b;
    sb_start(&b, g);
    if (t->name.len == 0) {
        char tmp[40];
        snprintf(tmp, sizeof(tmp), "%s(0x%" PRIx32 ")",
                 (t->flags & TYPE_FLAG_ARRAY) ? "ArrayType" : "Type", t->name_id);
        sb_ascii(&b, tmp);
    } else {
        sb_str(&b, t->name);
    }
    if (sb_end(&b, out) != 0) {
        return g->err;
    }
    uint16_t *u = (uint16_t *)g->names.p + out->off;
    size_t w = 0;
    for (size_t r = 0; r < out->len;) {
        if (u[r] == '`' && r + 1 < out->len && u[r + 1] >= '0' && u[r + 1] <= '9') {
            r++;
            while (r < out->len && u[r] >= '0' && u[r] <= '9') {
                r++;
            }
            continue;
        }
        uint16_t c = u[r++];
        u[w++] = c == '[' ? '<' : c == ']' ? '>' : c;
    }
    size_t w2 = 0;
    for (size_t r = 0; r < w; r++) {
        if (u[r] == '<' && r + 1 < w && u[r + 1] == '>') {
            u[w2++] = '[';
            u[w2++] = ']';
            r++;
        } else {
            u[w2++] = u[r];
        }
    }
    out->len = (uint32_t)w2;
    g->names.n = out->off + w2;
    if (t->flags & TYPE_FLAG_RCW) {
        struct str16 inner = *out;
        sb_start(&b, g);
        sb_ascii(&b, "[RCW ");
        sb_str(&b, inner);
        sb_ascii(&b, "]");
        return sb_end(&b, out);
    }
    return 0;
}

static int module_of(struct ev_gcheap *g, uint64_t id, struct str16 *out)
{
    uint32_t at = u64map_get(&g->module_at, id);
    if (at != UINT32_MAX) {
        *out = VEC_AT(g->modules, struct module_name, at).path;
        return 0;
    }
    struct sb b;
    struct module_name m = {.id = id};
    sb_start(&b, g);
    sb_ascii(&b, "Module(");
    sb_hex(&b, id);
    sb_ascii(&b, ")");
    if (sb_end(&b, &m.path) != 0 || vec_push(&g->mem, &g->modules, sizeof(m), &m) != 0 ||
        u64map_put(g, &g->module_at, id, (uint32_t)(g->modules.n - 1)) != 0) {
        return oom(g);
    }
    *out = m.path;
    return 0;
}

static int types_from_bulk(struct ev_gcheap *g, struct build *b)
{
    for (size_t i = 0; i < g->bulk_types.n; i++) {
        struct bulk_type t = VEC_AT(g->bulk_types, struct bulk_type, i);
        struct str16 name, module;
        uint32_t ft;
        if (clean_name(g, &t, &name) != 0 || module_of(g, t.module_id, &module) != 0 ||
            ftype_intern(g, b, name, module, &ft) != 0 || u64map_put(g, &b->by_id, t.type_id, ft)) {
            return g->err;
        }
    }
    return 0;
}

/* GetTypeIndex: the TypeID's type ("UNKNOWN 0x…" when never described), per size class. */
static int type_index(struct ev_gcheap *g, struct build *b, uint64_t type_id, int cls,
                      uint32_t *out)
{
    uint32_t ft = u64map_get(&b->by_id, type_id);
    if (ft == UINT32_MAX) {
        struct sb s;
        struct str16 name = STR_NULL;
        sb_start(&s, g);
        sb_ascii(&s, "UNKNOWN ");
        sb_hex(&s, type_id);
        if (sb_end(&s, &name) != 0 || ftype_intern(g, b, name, STR_NULL, &ft) != 0 ||
            u64map_put(g, &b->by_id, type_id, ft) != 0) {
            return g->err;
        }
        g->st.unnamed_types++;
    }
    if (cls == 0) {
        *out = ft;
        return 0;
    }
    struct final_type base = VEC_AT(g->ftypes, struct final_type, ft);
    struct sb s;
    struct str16 name = STR_NULL;
    sb_start(&s, g);
    sb_str(&s, base.name);
    sb_ascii(&s, SIZE_SUFFIX[cls]);
    if (sb_end(&s, &name) != 0) {
        return g->err;
    }
    uint32_t v = strmap_get(g, &b->by_size, name);
    if (v != UINT32_MAX) {
        *out = v;
        return 0;
    }
    size_t before = g->ftypes.n;
    if (ftype_intern(g, b, name, base.module, out) != 0 ||
        strmap_put(g, &b->by_size, name, *out) != 0) {
        return g->err;
    }
    if (g->ftypes.n > before) { /* new: the summary counts its objects under ft */
        VEC_AT(g->ftypes, struct final_type, *out).base = ft;
    }
    return 0;
}

/* A node record for a node made at finish (CCWs, root pseudo-nodes). */
static int final_record(struct ev_gcheap *g, uint32_t node, uint32_t ftype, int32_t size,
                        const uint32_t *children, size_t nchildren)
{
    struct raw_type r = {.kind = RAW_FINAL, .aux = ftype};
    uint32_t raw = 0;
    if (nchildren > INT32_MAX || raw_add(g, &r, &raw) != 0) {
        return g->err ? g->err : fail(g, AGENT_E_TOOBIG, "heap snapshot: too many children");
    }
    uint32_t at = (uint32_t)g->blob.n;
    if (blob_cint(g, (int32_t)node) != 0 || blob_cint(g, (int32_t)raw) != 0 ||
        blob_cint(g, size) != 0 || blob_cint(g, (int32_t)nchildren) != 0) {
        return g->err;
    }
    for (size_t i = 0; i < nchildren; i++) {
        if (blob_cint(g, (int32_t)(children[i] - node)) != 0) {
            return g->err;
        }
    }
    VEC_AT(g->off, uint32_t, node) = at;
    g->records++;
    g->total_size += size;
    return 0;
}

static int build_ccws(struct ev_gcheap *g, struct build *b)
{
    uint32_t root;
    if (pseudo_child_ascii(g, 0, "[COM/WinRT Objects]", &root) != 0) {
        return g->err;
    }
    for (size_t i = 0; i < g->ccws.n; i++) {
        struct ccw c = VEC_AT(g->ccws, struct ccw, i);
        uint32_t node, child, base, ft;
        struct sb s;
        struct str16 name = STR_NULL;
        if (node_index(g, c.iunknown, &node) != 0 || type_index(g, b, c.type_id, 0, &base) != 0) {
            return g->err;
        }
        sb_start(&s, g);
        sb_ascii(&s, "[CCW ");
        sb_hex(&s, c.iunknown);
        sb_ascii(&s, " for type ");
        sb_str(&s, VEC_AT(g->ftypes, struct final_type, base).name);
        sb_ascii(&s, "]");
        if (sb_end(&s, &name) != 0 || ftype_intern(g, b, name, STR_NULL, &ft) != 0 ||
            node_index(g, c.object, &child) != 0 ||
            final_record(g, node, ft, CCW_SIZE, &child, 1) != 0 || pseudo_add(g, root, node) != 0) {
            return g->err;
        }
    }
    return 0;
}

static int build_statics(struct ev_gcheap *g, struct build *b)
{
    uint32_t vars;
    if (pseudo_child_ascii(g, 0, "[static vars]", &vars) != 0) {
        return g->err;
    }
    for (size_t i = 0; i < g->statics.n; i++) {
        struct static_var sv = VEC_AT(g->statics, struct static_var, i);
        uint32_t parent = vars, ps, node;
        if ((sv.flags & STATIC_FLAG_TLS) &&
            pseudo_child_ascii(g, 0, "[thread static vars]", &parent) != 0) {
            return g->err;
        }
        uint32_t ft = u64map_get(&b->by_id, sv.type_id);
        struct sb s;
        struct str16 name = STR_NULL;
        sb_start(&s, g);
        sb_ascii(&s, "[static var ");
        if (ft != UINT32_MAX) {
            sb_str(&s, VEC_AT(g->ftypes, struct final_type, ft).name);
        } else {
            sb_ascii(&s, "Type(");
            sb_hex(&s, sv.type_id);
            sb_ascii(&s, ")");
        }
        sb_ascii(&s, ".");
        sb_str(&s, sv.field);
        sb_ascii(&s, "]");
        if (sb_end(&s, &name) != 0 || pseudo_child(g, parent, name, &ps) != 0 ||
            node_index(g, sv.object, &node) != 0 || pseudo_add(g, ps, node) != 0) {
            return g->err;
        }
    }
    return 0;
}

/* MemoryNodeBuilder.AllocateTypeIndexes then Build: pre-order, types by name, size 0. */
static int build_pseudo_types(struct ev_gcheap *g, struct build *b, uint32_t p, uint32_t *ptype)
{
    struct str16 name = VEC_AT(g->pseudos, struct pseudo, p).name;
    uint32_t ft = strmap_get(g, &b->pseudo, name);
    if (ft == UINT32_MAX &&
        (ftype_new(g, name, STR_NULL, &ft) != 0 || strmap_put(g, &b->pseudo, name, ft) != 0)) {
        return g->err;
    }
    ptype[p] = ft;
    for (size_t i = 0; i < g->pseudos.n; i++) {
        if (VEC_AT(g->pseudos, struct pseudo, i).parent == p &&
            build_pseudo_types(g, b, (uint32_t)i, ptype) != 0) {
            return g->err;
        }
    }
    return 0;
}

static int build_pseudo_nodes(struct ev_gcheap *g, uint32_t p, const uint32_t *ptype)
{
    const struct pseudo *ps = &VEC_AT(g->pseudos, struct pseudo, p);
    if (final_record(g, ps->node, ptype[p], 0, ps->children.p, ps->children.n) != 0) {
        return g->err;
    }
    for (size_t i = 0; i < g->pseudos.n; i++) {
        if (VEC_AT(g->pseudos, struct pseudo, i).parent == p &&
            build_pseudo_nodes(g, (uint32_t)i, ptype) != 0) {
            return g->err;
        }
    }
    return 0;
}

static size_t cint_len(int32_t v)
{
    uint8_t tmp[5];
    return cint_put(tmp, v);
}

/*
 * One of our records at blob[*i]: its node, file type, size, child count, and where its children
 * start and end.
 */
struct rec {
    int32_t node, raw, size, nchildren;
    size_t children, end;
};

static int rec_read(const struct ev_gcheap *g, size_t *i, struct rec *r)
{
    const uint8_t *p = g->blob.p;
    size_t n = g->blob.n;
    int32_t d;
    if (cint_get(p, n, i, &r->node) != 0 || cint_get(p, n, i, &r->raw) != 0 ||
        cint_get(p, n, i, &r->size) != 0 || cint_get(p, n, i, &r->nchildren) != 0) {
        return AGENT_E_TRUNC;
    }
    r->children = *i;
    for (int32_t k = 0; k < r->nchildren; k++) {
        if (cint_get(p, n, i, &d) != 0) {
            return AGENT_E_TRUNC;
        }
    }
    r->end = *i;
    return 0;
}

/* Our blob's segments in the order dotnet-gcdump writes their records: CCWs, objects, root tree. */
static void segments(const struct ev_gcheap *g, size_t seg[3][2])
{
    seg[0][0] = g->seg_obj_end;
    seg[0][1] = g->seg_ccw_end;
    seg[1][0] = 0;
    seg[1][1] = g->seg_obj_end;
    seg[2][0] = g->seg_ccw_end;
    seg[2][1] = g->blob.n;
}

static int rec_check(struct ev_gcheap *g, size_t *i, struct rec *r)
{
    if (rec_read(g, i, r) != 0 || r->node < 0 || (size_t)r->node >= g->addr.n || r->raw < 0 ||
        (size_t)r->raw >= g->raw.n) {
        return fail(g, AGENT_E_PROTO, "heap snapshot: a node record is bad");
    }
    return 0;
}

static void number(struct ev_gcheap *g, uint32_t node, uint32_t *next)
{
    if (g->perm[node] == UINT32_MAX) {
        g->perm[node] = (*next)++;
    }
}

/* The file's node numbers: what dotnet-gcdump's GetNodeIndex calls would have given. */
static int renumber(struct ev_gcheap *g)
{
    size_t n = g->addr.n;
    g->perm = mem_calloc(&g->mem, n, sizeof(uint32_t));
    g->inv = g->perm != NULL ? mem_calloc(&g->mem, n, sizeof(uint32_t)) : NULL;
    if (g->perm == NULL || g->inv == NULL) {
        return oom(g);
    }
    memset(g->perm, 0xFF, n * sizeof(uint32_t));
    uint32_t next = 0;
    for (size_t k = 0; k < g->early.n; k++) {
        number(g, VEC_AT(g->early, uint32_t, k), &next);
    }
    size_t seg[3][2];
    segments(g, seg);
    for (int s = 0; s < 3; s++) {
        for (size_t i = seg[s][0]; i < seg[s][1];) {
            struct rec r;
            if (rec_check(g, &i, &r) != 0) {
                return g->err;
            }
            number(g, (uint32_t)r.node, &next);
            size_t c = r.children;
            for (int32_t k = 0; k < r.nchildren; k++) {
                int32_t d = 0;
                (void)cint_get(g->blob.p, r.end, &c, &d);
                uint32_t child = (uint32_t)r.node + (uint32_t)d;
                if (child >= n) {
                    return fail(g, AGENT_E_PROTO, "heap snapshot: a node record is bad");
                }
                number(g, child, &next);
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        number(g, (uint32_t)k, &next);
        g->inv[g->perm[k]] = (uint32_t)k;
    }
    vec_free(&g->mem, &g->early);
    return 0;
}

/* A record in the file's form into b (at most 15 + 5 per child bytes through put): its length. */
static size_t rec_head(const struct ev_gcheap *g, const struct rec *r, uint8_t b[15])
{
    uint32_t ft = g->final_of_raw[r->raw];
    int32_t tsize = VEC_AT(g->ftypes, struct final_type, ft).size;
    bool explicit_size = tsize != r->size;
    size_t k = cint_put(b, (int32_t)(ft << 1 | (explicit_size ? 1u : 0u)));
    if (explicit_size) {
        k += cint_put(b + k, r->size);
    }
    return k + cint_put(b + k, r->nchildren);
}

/* The file's delta for the child at *c of record r, renumbered. */
static int32_t rec_child(const struct ev_gcheap *g, const struct rec *r, size_t *c)
{
    int32_t d = 0;
    (void)cint_get(g->blob.p, r->end, c, &d);
    uint32_t child = (uint32_t)r->node + (uint32_t)d;
    return (int32_t)(g->perm[child] - g->perm[r->node]);
}

/* Type sizes from the first node of each type, and every node's offset in the file's blob. */
static int layout(struct ev_gcheap *g)
{
    uint32_t *off = g->off.p; /* from here on by the file's node numbers */
    for (size_t k = 0; k < g->off.n; k++) {
        off[k] = 0; /* undefined nodes share the record at 0 */
    }
    uint64_t pos = 2;
    size_t seg[3][2];
    segments(g, seg);
    for (int s = 0; s < 3; s++) {
        for (size_t i = seg[s][0]; i < seg[s][1];) {
            struct rec r;
            if (rec_check(g, &i, &r) != 0) {
                return g->err;
            }
            struct final_type *t = &VEC_AT(g->ftypes, struct final_type, g->final_of_raw[r.raw]);
            if (t->size < 0) {
                t->size = r.size;
            }
            uint8_t b[15];
            off[g->perm[r.node]] = (uint32_t)pos;
            pos += rec_head(g, &r, b);
            size_t c = r.children;
            for (int32_t k = 0; k < r.nchildren; k++) {
                pos += cint_len(rec_child(g, &r, &c));
            }
            if (pos > MAX_BLOB) {
                return fail(g, AGENT_E_TOOBIG, "heap snapshot: the node records are over 2 GiB");
            }
        }
    }
    g->fblob_len = (uint32_t)pos;
    return 0;
}

/* Checks the edge stream's end the way DotNetHeapDumpGraphReader does. */
static int check_edges(struct ev_gcheap *g)
{
    if (g->head_open) {
        return fail(g, AGENT_E_PROTO,
                    "heap walk: edge stream ran out at node %" PRIu64 " (%" PRIu64
                    " edges missing)",
                    (uint64_t)g->records - 1, g->head_left);
    }
    if (g->edges_used == 0 || g->edges_used == g->st.edges) {
        return 0;
    }
    for (size_t i = 0; i < g->edge_ends.n; i++) {
        if (VEC_AT(g->edge_ends, uint64_t, i) == g->edges_used) {
            return 0; /* whole edge events left over are ignored, as dotnet-gcdump does */
        }
    }
    return fail(g, AGENT_E_PROTO,
                "heap walk: %" PRIu64 " edges of the last edge event used are left over",
                g->st.edges - g->edges_used);
}

static int build(struct ev_gcheap *g)
{
    struct build b;
    memset(&b, 0, sizeof(b));
    uint32_t *ptype = NULL;
    size_t npt = 0;
    uint32_t ft;
    int rc = 0;
    /* Type 0: UNDEFINED, sized by the shared undefined record. */
    if (ftype_new(g, STR_NULL, STR_NULL, &ft) != 0) {
        goto out;
    }
    {
        struct sb s;
        struct final_type *t;
        sb_start(&s, g);
        sb_ascii(&s, "UNDEFINED");
        struct str16 name = STR_NULL;
        if (sb_end(&s, &name) != 0) {
            goto out;
        }
        t = &VEC_AT(g->ftypes, struct final_type, 0);
        t->name = name;
        t->size = 0;
    }
    g->seg_obj_end = g->blob.n;
    if (types_from_bulk(g, &b) != 0) {
        goto out;
    }
    g->log_nodes = true;
    rc = build_ccws(g, &b);
    g->seg_ccw_end = g->blob.n;
    rc = rc != 0 ? rc : build_statics(g, &b);
    g->log_nodes = false;
    if (rc != 0) {
        goto out;
    }
    /* The objects' types, in the order the nodes first used them. */
    g->final_of_raw = mem_calloc(&g->mem, g->raw.n + g->pseudos.n + 1, sizeof(uint32_t));
    g->final_of_raw_n = g->raw.n + g->pseudos.n + 1;
    npt = g->pseudos.n;
    ptype = g->final_of_raw != NULL ? mem_calloc(&g->mem, npt + 1, sizeof(uint32_t)) : NULL;
    if (g->final_of_raw == NULL || ptype == NULL) {
        oom(g);
        goto out;
    }
    size_t nraw = g->raw.n;
    for (size_t i = 0; i < nraw; i++) {
        const struct raw_type r = VEC_AT(g->raw, struct raw_type, i);
        if (r.kind == RAW_FINAL) {
            g->final_of_raw[i] = r.aux;
        } else if (type_index(g, &b, r.type_id, r.size_class, &g->final_of_raw[i]) != 0) {
            goto out;
        }
    }
    if (build_pseudo_types(g, &b, 0, ptype) != 0 || build_pseudo_nodes(g, 0, ptype) != 0) {
        goto out;
    }
    for (size_t i = nraw; i < g->raw.n; i++) {
        g->final_of_raw[i] = VEC_AT(g->raw, struct raw_type, i).aux;
    }
    if (renumber(g) == 0) {
        layout(g);
    }
out:
    rc = g->err;
    mem_free(&g->mem, ptype, (npt + 1) * sizeof(uint32_t));
    u64map_free(g, &b.by_id);
    strmap_free(g, &b.intern);
    strmap_free(g, &b.by_size);
    strmap_free(g, &b.pseudo);
    return rc;
}

int ev_gcheap_finish(struct ev_gcheap *g)
{
    if (g->finished) {
        return g->err;
    }
    g->finished = true;
    if (g->err != 0) {
        return g->err;
    }
    enum nettrace_verdict v = nettrace_finish(&g->ck);
    if (v == NETTRACE_INVALID) {
        nettrace_error_line(&g->ck, AGENT_E_PROTO, g->msg, sizeof(g->msg));
        return g->err = AGENT_E_PROTO;
    }
    if (!g->complete) {
        return fail(g, AGENT_E_TRUNC,
                    g->seen_start ? "heap snapshot: the stream ended before the induced GC did"
                                  : "heap snapshot: the stream holds no induced gen-2 GC");
    }
    if (check_edges(g) != 0) {
        return g->err;
    }
    /* The queues are done with. */
    vec_free(&g->mem, &g->pnodes);
    vec_free(&g->mem, &g->pedges);
    vec_free(&g->mem, &g->edge_ends);
    if (build(g) != 0) {
        return g->err;
    }
    g->built = true;
    return 0;
}

/* ---- the file ---------------------------------------------------------------------------------
 */

struct out {
    ev_gcheap_write_fn fn;
    void *ud;
    uint8_t *buf;
    size_t n;
    uint64_t pos; /* file offset of buf[n] */
    int rc;
};

static void out_flush(struct out *o)
{
    if (o->rc == 0 && o->n > 0) {
        o->rc = o->fn(o->ud, o->buf, o->n);
    }
    o->n = 0;
}

static void out_bytes(struct out *o, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0 && o->rc == 0) {
        size_t k = CHUNK - o->n < n ? CHUNK - o->n : n;
        memcpy(o->buf + o->n, b, k);
        o->n += k;
        o->pos += k;
        b += k;
        n -= k;
        if (o->n == CHUNK) {
            out_flush(o);
        }
    }
}

static void out_u8(struct out *o, uint8_t v)
{
    out_bytes(o, &v, 1);
}

static void out_i32(struct out *o, int32_t v)
{
    uint32_t u = (uint32_t)v;
    uint8_t b[4] = {(uint8_t)u, (uint8_t)(u >> 8), (uint8_t)(u >> 16), (uint8_t)(u >> 24)};
    out_bytes(o, b, 4);
}

static void out_i64(struct out *o, int64_t v)
{
    uint64_t u = (uint64_t)v;
    out_i32(o, (int32_t)(uint32_t)u);
    out_i32(o, (int32_t)(uint32_t)(u >> 32));
}

/* One UTF-16 unit as FastSerialization writes it (1–3 bytes): UTF-8's form of a code point under
 * U+10000, applied to each unit, surrogates included. */
static size_t unit_put(uint8_t b[4], uint16_t c)
{
    return utf8_encode(b, c);
}

size_t ev_gcheap_string_put(uint8_t *out, const uint16_t *u, size_t n)
{
    size_t len = 4;
    if (out != NULL) {
        uint32_t c = (uint32_t)n;
        out[0] = (uint8_t)c;
        out[1] = (uint8_t)(c >> 8);
        out[2] = (uint8_t)(c >> 16);
        out[3] = (uint8_t)(c >> 24);
    }
    for (size_t i = 0; i < n; i++) {
        uint8_t b[4];
        size_t k = unit_put(b, u[i]);
        if (out != NULL) {
            memcpy(out + len, b, k);
        }
        len += k;
    }
    return len;
}

/* FastSerialization's string: UTF-16 unit count (-1 = null), each unit as 1–3 bytes. */
static void out_units(struct out *o, const uint16_t *u, size_t n)
{
    out_i32(o, (int32_t)n);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[4];
        out_bytes(o, b, unit_put(b, u[i]));
    }
}

static void out_str(struct out *o, const struct ev_gcheap *g, struct str16 s)
{
    if (s.off == UINT32_MAX) {
        out_i32(o, -1);
        return;
    }
    out_units(o, s.len > 0 ? s16(g, s) : NULL, s.len);
}

static void out_ascii(struct out *o, const char *a)
{
    uint16_t u[64];
    size_t n = 0;
    for (; a[n] != '\0' && n < 64; n++) {
        u[n] = (uint8_t)a[n];
    }
    out_units(o, u, n);
}

/* BeginObject, then the type: BeginObject, NullReference, version, minimum reader, name, End. */
static void out_begin(struct out *o, int32_t version, int32_t min_reader, const char *name)
{
    static const uint8_t tags[] = {4, 4, 1};
    out_bytes(o, tags, sizeof(tags));
    out_i32(o, version);
    out_i32(o, min_reader);
    out_ascii(o, name);
    out_u8(o, 6);
}

/* The blob: the shared undefined record, then our records in the file's form and order. */
static void out_blob(struct out *o, const struct ev_gcheap *g)
{
    static const uint8_t undefined[2] = {0, 0};
    out_bytes(o, undefined, 2);
    size_t seg[3][2];
    segments(g, seg);
    for (int s = 0; s < 3; s++) {
        for (size_t i = seg[s][0]; i < seg[s][1] && o->rc == 0;) {
            struct rec r;
            if (rec_read(g, &i, &r) != 0) {
                o->rc = AGENT_E_PROTO;
                return;
            }
            uint8_t b[15];
            out_bytes(o, b, rec_head(g, &r, b));
            size_t c = r.children;
            for (int32_t k = 0; k < r.nchildren; k++) {
                out_bytes(o, b, cint_put(b, rec_child(g, &r, &c)));
            }
        }
    }
}

/* GCHeapDump's fields after the graph, the end tags and the forward-reference trailer. */
/* The creation tool's UTF-16 units (NULL and 0 for none): 0, -ENOMEM or AGENT_E_INVAL. */
static int tool_units(const char *tool, uint16_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (tool == NULL) {
        return 0;
    }
    size_t cap = strlen(tool) * 2 + 2;
    uint8_t *le = malloc(cap);
    uint16_t *u = malloc(cap);
    size_t len = 0;
    int rc = le == NULL || u == NULL ? -ENOMEM : ev_utf8_to_utf16(tool, le, cap, &len);
    if (rc != 0) {
        free(le);
        free(u);
        return rc == -ENOMEM ? rc : AGENT_E_INVAL;
    }
    for (size_t i = 0; i < len / 2; i++) {
        u[i] = ev_load_u16(le + 2 * i);
    }
    free(le);
    *out = u;
    *n = len / 2;
    return 0;
}

static void out_heapdump_tail(struct out *o, bool is64, const uint16_t *tool, size_t ntool)
{
    out_u8(o, is64 ? 1 : 0);
    out_i32(o, 0x3F800000); /* AverageCountMultiplier 1.0f */
    out_i32(o, 0x3F800000); /* AverageSizeMultiplier 1.0f */
    out_u8(o, 1);           /* JSHeapInfo: null */
    out_u8(o, 1);           /* DotNetHeapInfo: null */
    out_i32(o, -1);         /* CollectionLog */
    out_i64(o, 0);          /* TimeCollected.Ticks */
    out_i32(o, -1);         /* MachineName */
    out_i32(o, -1);         /* ProcessName */
    out_i32(o, 0);          /* ProcessID */
    out_i64(o, 0);          /* TotalProcessCommit */
    out_i64(o, 0);          /* TotalProcessWorkingSet */
    out_i32(o, 0);          /* CountMultipliersByType: none */
    out_u8(o, 12);          /* WriteTagged(InteropInfo): SkipRegion, forward reference 0, null */
    out_i32(o, 0);
    out_u8(o, 1);
    int32_t fwd = (int32_t)o->pos; /* forward reference 0: the end of that region */
    out_u8(o, 13);                 /* WriteTagged(string CreationTool) */
    if (tool == NULL) {
        out_i32(o, -1);
    } else {
        out_units(o, tool, ntool);
    }
    out_u8(o, 6); /* end GCHeapDump */
    out_u8(o, 6); /* no more objects */
    int32_t f = (int32_t)o->pos;
    out_i32(o, 1); /* the forward reference table */
    out_i32(o, fwd);
    int32_t t = (int32_t)o->pos;
    out_i32(o, f);
    out_i32(o, t);
}

int ev_gcheap_write(struct ev_gcheap *g, const char *creation_tool, ev_gcheap_write_fn fn, void *ud)
{
    if (g == NULL || fn == NULL || !g->built || g->err != 0) {
        return AGENT_E_INVAL;
    }
    uint16_t *tool;
    size_t ntool;
    int rc = tool_units(creation_tool, &tool, &ntool);
    if (rc != 0) {
        return rc;
    }
    struct out o = {.fn = fn, .ud = ud, .buf = malloc(CHUNK)};
    if (o.buf == NULL) {
        free(tool);
        return -ENOMEM;
    }
    static const char magic[] = "!FastSerialization.1";
    out_i32(&o, (int32_t)(sizeof(magic) - 1));
    out_bytes(&o, magic, sizeof(magic) - 1);
    out_begin(&o, 10, 8, "GCHeapDump");
    out_begin(&o, 1, 0, "Graphs.MemoryGraph");
    out_i64(&o, g->total_size);
    out_i32(&o, 0); /* RootIndex: the root builder */
    out_i32(&o, (int32_t)g->ftypes.n);
    for (size_t i = 0; i < g->ftypes.n; i++) {
        const struct final_type *t = &VEC_AT(g->ftypes, struct final_type, i);
        out_str(&o, g, t->name);
        out_i32(&o, t->size);
        out_str(&o, g, t->module);
    }
    out_i32(&o, (int32_t)g->off.n);
    for (size_t i = 0; i < g->off.n; i++) {
        out_i32(&o, (int32_t)VEC_AT(g->off, uint32_t, i));
    }
    out_i32(&o, (int32_t)g->fblob_len);
    out_blob(&o, g);
    out_i32(&o, (int32_t)g->addr.n);
    for (size_t i = 0; i < g->addr.n; i++) {
        out_i64(&o, (int64_t)VEC_AT(g->addr, uint64_t, g->inv[i]));
    }
    out_u8(&o, 8); /* WriteTagged(bool Is64Bit) */
    out_u8(&o, g->is64 ? 1 : 0);
    out_u8(&o, 6); /* end MemoryGraph */
    out_heapdump_tail(&o, g->is64, tool, ntool);
    out_flush(&o);
    free(o.buf);
    free(tool);
    return o.rc;
}

size_t ev_gcheap_cint_put(uint8_t out[5], int32_t v)
{
    return cint_put(out, v);
}

int ev_gcheap_cint_get(const uint8_t *p, size_t n, size_t *i, int32_t *out)
{
    return cint_get(p, n, i, out);
}

/* ---- the summary per type ------------------------------------------------------------------ */

/* A type with objects, while the types are ranked: its name and module point into the names. */
struct type_row {
    const uint16_t *name, *module;
    uint32_t name_len, module_len;
    uint32_t ftype;
    uint64_t count, bytes;
};

static int cmp_units(const uint16_t *a, uint32_t na, const uint16_t *b, uint32_t nb)
{
    uint32_t n = na < nb ? na : nb;
    for (uint32_t i = 0; i < n; i++) {
        if (a[i] != b[i]) {
            return a[i] < b[i] ? -1 : 1;
        }
    }
    return na < nb ? -1 : na > nb;
}

/* Most bytes first, then by name, then module (two assemblies may define one name), then index. */
static int cmp_type_row(const void *a, const void *b)
{
    const struct type_row *x = a, *y = b;
    if (x->bytes != y->bytes) {
        return x->bytes > y->bytes ? -1 : 1;
    }
    int c = cmp_units(x->name, x->name_len, y->name, y->name_len);
    c = c != 0 ? c : cmp_units(x->module, x->module_len, y->module, y->module_len);
    return c != 0 ? c : (x->ftype < y->ftype ? -1 : x->ftype > y->ftype);
}

/*
 * The UTF-8 form of u[0..n) at out (NULL: its length only); returns its length. Surrogate pairs
 * become one code point; lone surrogates and U+0000 (a C string must not hold it) U+FFFD.
 */
static size_t units_utf8(const uint16_t *u, size_t n, char *out)
{
    size_t len = 0;
    for (size_t i = 0; i < n;) {
        uint32_t c = u[i++];
        if (c >= 0xD800 && c <= 0xDBFF && i < n && u[i] >= 0xDC00 && u[i] <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (u[i++] - 0xDC00u);
        } else if ((c >= 0xD800 && c <= 0xDFFF) || c == 0) {
            c = UTF8_REPLACEMENT;
        }
        uint8_t b[4];
        size_t k = utf8_encode(b, c);
        if (out != NULL) {
            memcpy(out + len, b, k);
        }
        len += k;
    }
    return len;
}

/* A module's IL path without its directory, as dotnet-gcdump's report shows it. */
static void module_file(const struct ev_gcheap *g, struct str16 m, const uint16_t **u, uint32_t *n)
{
    *u = NULL;
    *n = 0;
    if (m.off == UINT32_MAX || m.len == 0) {
        return;
    }
    const uint16_t *p = s16(g, m);
    uint32_t at = m.len;
    while (at > 0 && p[at - 1] != '/' && p[at - 1] != '\\') {
        at--;
    }
    *u = p + at;
    *n = m.len - at;
}

/* Counts and bytes per type (base types: size classes folded) over the object records. */
static int type_sums(struct ev_gcheap *g, uint64_t *count, uint64_t *bytes)
{
    for (size_t i = 0; i < g->seg_obj_end;) {
        struct rec r;
        if (rec_read(g, &i, &r) != 0 || r.raw < 0 || (size_t)r.raw >= g->final_of_raw_n ||
            r.size < 0) {
            return AGENT_E_PROTO;
        }
        uint32_t ft = g->final_of_raw[r.raw];
        if (ft >= g->ftypes.n) {
            return AGENT_E_PROTO;
        }
        ft = VEC_AT(g->ftypes, struct final_type, ft).base;
        count[ft]++;
        bytes[ft] += (uint64_t)r.size;
    }
    return 0;
}

/*
 * The top rows[0..n) copied out into one block (the entries, then their strings), charged to the
 * share before it is allocated.
 */
static int copy_types(const struct type_row *rows, size_t n, struct ev_gcheap_types *out,
                      struct mb_share *share)
{
    size_t need = (n + 1) * sizeof(struct ev_gcheap_type_stat);
    for (size_t i = 0; i < n; i++) {
        need += units_utf8(rows[i].name, rows[i].name_len, NULL) + 1;
        need += units_utf8(rows[i].module, rows[i].module_len, NULL) + 1;
    }
    if (mb_charge(share, need) != 0) {
        return AGENT_E_BUDGET;
    }
    struct ev_gcheap_type_stat *t = malloc(need);
    if (t == NULL) {
        mb_release(share, need);
        return -ENOMEM;
    }
    char *str = (char *)(t + n + 1);
    for (size_t i = 0; i < n; i++) {
        t[i] = (struct ev_gcheap_type_stat){.count = rows[i].count, .bytes = rows[i].bytes};
        t[i].type = str;
        str += units_utf8(rows[i].name, rows[i].name_len, str);
        *str++ = '\0';
        t[i].module = str;
        str += units_utf8(rows[i].module, rows[i].module_len, str);
        *str++ = '\0';
    }
    out->top = t;
    out->n_top = n;
    out->share = share;
    out->charged = need;
    return 0;
}

/*
 * Sums per type from the records as they are in our blob (the object segment holds one record per
 * GCBulkNode entry; the CCW and root-tree segments are not objects), ranks the types with objects,
 * keeps the top and sums the rest. Reads the graph only: the file can still be written after.
 */
int ev_gcheap_type_stats(struct ev_gcheap *g, size_t top, struct ev_gcheap_types *out)
{
    memset(out, 0, sizeof(*out));
    if (g == NULL || !g->built || g->err != 0 || top == 0 || top > EV_GCHEAP_TOP_MAX) {
        return AGENT_E_INVAL;
    }
    size_t nt = g->ftypes.n;
    struct type_row *rows = NULL;
    size_t nrows = 0;
    uint64_t *count = mem_calloc(&g->mem, nt + 1, sizeof(uint64_t));
    uint64_t *bytes = count != NULL ? mem_calloc(&g->mem, nt + 1, sizeof(uint64_t)) : NULL;
    int rc = count == NULL || bytes == NULL ? (g->mem.refused != 0 ? AGENT_E_BUDGET : -ENOMEM) : 0;
    rc = rc != 0 ? rc : type_sums(g, count, bytes);
    if (rc != 0) {
        goto out;
    }
    for (size_t ft = 0; ft < nt; ft++) {
        nrows += count[ft] > 0;
    }
    rows = mem_calloc(&g->mem, nrows + 1, sizeof(*rows));
    if (rows == NULL) {
        rc = g->mem.refused != 0 ? AGENT_E_BUDGET : -ENOMEM;
        goto out;
    }
    size_t n = 0;
    for (size_t ft = 0; ft < nt; ft++) {
        if (count[ft] == 0) {
            continue;
        }
        const struct final_type *t = &VEC_AT(g->ftypes, struct final_type, ft);
        struct type_row *r = &rows[n++];
        *r = (struct type_row){.ftype = (uint32_t)ft, .count = count[ft], .bytes = bytes[ft]};
        if (t->name.off != UINT32_MAX) {
            r->name = s16(g, t->name);
            r->name_len = t->name.len;
        }
        module_file(g, t->module, &r->module, &r->module_len);
        out->objects += count[ft];
        out->bytes += bytes[ft];
    }
    out->types = n;
    if (n > 0) {
        qsort(rows, n, sizeof(*rows), cmp_type_row);
    }
    size_t keep = n < top ? n : top;
    for (size_t i = keep; i < n; i++) {
        out->omitted_types++;
        out->omitted_count += rows[i].count;
        out->omitted_bytes += rows[i].bytes;
    }
    rc = copy_types(rows, keep, out, g->mem.share);
out:
    mem_free(&g->mem, rows, (nrows + 1) * sizeof(*rows));
    mem_free(&g->mem, bytes, (nt + 1) * sizeof(uint64_t));
    mem_free(&g->mem, count, (nt + 1) * sizeof(uint64_t));
    if (rc != 0) {
        memset(out, 0, sizeof(*out));
    }
    return rc;
}

void ev_gcheap_types_fini(struct ev_gcheap_types *t)
{
    if (t->top != NULL) {
        free(t->top);
        mb_release(t->share, t->charged);
    }
    memset(t, 0, sizeof(*t));
}

/* Hands b to fn once it holds a chunk (or always, with force). */
static int json_flush(struct buf *b, bool force, ev_gcheap_write_fn fn, void *ud)
{
    if (buf_size(b) == 0 || (!force && buf_size(b) < CHUNK)) {
        return 0;
    }
    int rc = fn(ud, buf_data(b), buf_size(b));
    buf_reset(b);
    return rc;
}

int ev_gcheap_write_types_json(const struct ev_gcheap_types *t, uint64_t pid, ev_gcheap_write_fn fn,
                               void *ud)
{
    struct buf b;
    buf_init(&b, 0);
    int rc = buf_printf(&b,
                        "{\"pid\":%" PRIu64 ",\"objects\":%" PRIu64 ",\"heapBytes\":%" PRIu64
                        ",\"typeCount\":%" PRIu64 ",\"top\":[",
                        pid, t->objects, t->bytes, t->types);
    for (size_t i = 0; rc == 0 && i < t->n_top; i++) {
        const struct ev_gcheap_type_stat *s = &t->top[i];
        rc = buf_append_str(&b, i == 0 ? "{\"type\":\"" : ",{\"type\":\"");
        rc = rc ? rc : buf_append_json_escaped(&b, s->type);
        rc = rc ? rc : buf_append_str(&b, "\",\"module\":\"");
        rc = rc ? rc : buf_append_json_escaped(&b, s->module);
        rc = rc ? rc
                : buf_printf(&b, "\",\"count\":%" PRIu64 ",\"bytes\":%" PRIu64 "}", s->count,
                             s->bytes);
        rc = rc ? rc : json_flush(&b, false, fn, ud);
    }
    rc = rc ? rc
            : buf_printf(&b,
                         "],\"omitted\":{\"types\":%" PRIu64 ",\"count\":%" PRIu64
                         ",\"bytes\":%" PRIu64 "}}\n",
                         t->omitted_types, t->omitted_count, t->omitted_bytes);
    rc = rc ? rc : json_flush(&b, true, fn, ud);
    buf_fini(&b);
    return rc;
}

/* ---- stats and the end ------------------------------------------------------------------------
 */

static uint64_t mem_of(const struct ev_gcheap *g)
{
    return sizeof(*g) + g->mem.held;
}

void ev_gcheap_get_stats(const struct ev_gcheap *g, struct ev_gcheap_stats *out)
{
    const struct nettrace_stats *ns = nettrace_get_stats(&g->ck);
    *out = g->st;
    out->bytes = ns->bytes;
    out->events = ns->events;
    out->lost = ns->lost > g->gap_lost ? ns->lost : g->gap_lost;
    out->nodes = g->addr.n;
    out->mem_bytes = mem_of(g);
    out->complete = g->complete;
}

void ev_gcheap_free(struct ev_gcheap *g)
{
    if (g == NULL) {
        return;
    }
    nettrace_checker_fini(&g->ck);
    for (size_t i = 0; i < g->pseudos.n; i++) {
        vec_free(&g->mem, &VEC_AT(g->pseudos, struct pseudo, i).children);
    }
    struct vec *vecs[] = {&g->names,   &g->bulk_types, &g->modules, &g->raw,    &g->addr,
                          &g->off,     &g->blob,       &g->pnodes,  &g->pedges, &g->edge_ends,
                          &g->pseudos, &g->statics,    &g->ccws,    &g->rcws,   &g->ftypes};
    for (size_t i = 0; i < sizeof(vecs) / sizeof(vecs[0]); i++) {
        vec_free(&g->mem, vecs[i]);
    }
    u64map_free(g, &g->rcw_of);
    u64map_free(g, &g->module_at);
    vec_free(&g->mem, &g->early);
    bigmem_free(g->perm);
    bigmem_free(g->inv);
    bigmem_free(g->raw_slots);
    bigmem_free(g->slots);
    bigmem_free(g->final_of_raw);
    mem_give(&g->mem, g->mem.held); /* all of it: the stores above were charged */
    free(g);
}
