/* SPDX-License-Identifier: MIT */
#include "nettrace.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "civil.h"
#include "err.h"
#include "ev_rd.h"
#include "num.h"

/*
 * The stream is cut into "units": runs of bytes whose length is known before they start (the
 * 32-byte header, an object's type preamble, its name, a block size field, the padding, a block
 * body...). nettrace_feed gathers one unit at a time, in place when the caller's chunk holds all of
 * it and in a staging buffer otherwise, and hands the complete unit to step(). So every check below
 * sees whole fields and never needs to resume in the middle of one, whatever the chunking, and the
 * only data ever copied is the current unit (at most one block).
 *
 * Sections cited are those of docs/nettrace.md; where it is silent the behaviour follows what
 * TraceEvent (microsoft/perfview src/TraceEvent/EventPipe) accepts or rejects, as noted inline.
 */

#define SMALL_STAGE      80 /* largest non-block unit: a 64-byte type name + end tag */
#define MAX_NAME_LEN     64 /* type names are at most 13 bytes; anything long is garbage */
#define MAX_FIELD_DEPTH  16 /* nesting of Object fields in metadata */
#define ARENA_MAX        (8u * 1024u * 1024u) /* UTF-8 provider + event names */
#define MAX_STACK_RANGES 4096 /* disjoint stack-id ranges per sequence-point region */
#define MAX_THREADS      65536
#define UNCOMPRESSED_HDR 72 /* header bytes between eventSize and payloadSize */

#define TAG_NULL          0x01
#define TAG_BEGIN_PRIVATE 0x05
#define TAG_END_OBJECT    0x06

/* Block versions: the runtime writes 2/2; TraceEvent reads only 2 (MinimumVersionCanRead). */
#define BLOCK_VERSION 2
#define TRACE_VERSION 4

enum state {
    ST_HEADER,     /* 12 bytes: "Nettrace", then int32 20 (V4/V5) or 0 (V6's reserved field) */
    ST_HEADER_FS,  /* 20 bytes: "!FastSerialization.1" */
    ST_V6_VERSION, /* 8 bytes: u32 major (6), u32 minor */
    ST_V6_BLOCK,   /* 4 bytes: a V6 block header, size | kind << 24 */
    ST_OBJ_TAG,    /* 1 byte: begin object, or the end-of-stream NullReference */
    ST_OBJ_TYPE,   /* 14 bytes: 05 01, version, minimum reader version, name length */
    ST_OBJ_NAME,   /* name length + 1 bytes: the type name and the type's end tag */
    ST_TRACE_BODY, /* 49 bytes: the Trace payload and the object's end tag */
    ST_BLOCK_SIZE, /* 4 bytes: blockSize */
    ST_BLOCK_PAD,  /* 0..3 zero bytes up to an absolute multiple of 4 */
    ST_BLOCK_BODY, /* blockSize bytes */
    ST_BLOCK_END,  /* 1 byte: the block object's end tag */
    ST_END,        /* the end tag was seen: any further byte is a violation */
    ST_FAILED      /* a violation or a resource failure: nothing more is checked */
};

struct md_rec {
    uint32_t id;
    uint32_t event_id;
    uint32_t version;
    uint32_t level;
    uint64_t keywords;
    uint64_t events;
    uint32_t provider; /* arena offsets of NUL-terminated UTF-8 */
    uint32_t name;
    uint32_t epoch; /* V6: pr->md_epoch when defined */
    uint8_t opcode;
    bool stale; /* replaced by a later definition of its id (V6, after a metadata flush) */
};

struct id_range {
    uint32_t first;
    uint32_t last; /* inclusive */
    uint32_t base; /* NETTRACE_KEEP_STACKS: index of `first` in stk_index; UINT32_MAX if not kept */
};

/* V6: the activity ids of one label list (only lists that carry one are kept). */
struct label_acts {
    uint32_t id; /* 0 = free slot */
    uint8_t act[16];
    uint8_t rel[16];
};

/* V6 label lists with activity ids kept at most (the rest go without them: memory stays bounded).
 */
#define MAX_LABEL_LISTS 65536u

/* NETTRACE_KEEP_STACKS: where one kept stack's addresses are in stk_bytes. */
struct stack_ref {
    uint32_t off;
    uint32_t len;
};

struct thread_slot {
    uint64_t id;
    uint32_t seq;
    uint8_t used;
    uint8_t live; /* V6: introduced by a Thread block, not removed or flushed since */
};

/* An event blob's decoded header (nettrace.md §4.2); compressed ones inherit the previous one's. */
struct blob {
    uint32_t metadata_id;
    uint32_t sequence;
    uint32_t proc;
    uint32_t stack_id;
    uint32_t payload_size;
    uint32_t label_list; /* V6 */
    uint64_t thread_id;
    uint64_t capture_thread_id;
    uint64_t timestamp;   /* unsigned so that delta arithmetic wraps without UB */
    uint8_t activity[16]; /* V4/V5; all zero when absent */
    uint8_t related[16];
    bool sorted; /* no later event of the stream is older (nettrace.md §4.3) */
};

struct nettrace_private {
    struct nettrace_options opt;
    enum state state;
    size_t need;  /* length of the current unit */
    size_t have;  /* bytes of it gathered in the staging area */
    uint64_t pos; /* absolute offset of the current unit */
    bool trace_seen;
    bool finished;
    bool v6;                       /* the stream is NetTrace V6 (nettrace.md §7) */
    uint8_t v6_kind;               /* of the V6 block being read */
    uint32_t md_epoch;             /* V6: metadata flushes by sequence points so far */
    enum nettrace_block_kind kind; /* of the block object being read */
    int32_t obj_version;
    int32_t obj_min_version;
    uint32_t block_size;
    int err; /* what feed returns once failed */
    uint64_t err_off;
    char msg[200];
    uint8_t small[SMALL_STAGE];
    uint8_t *blk; /* staging for block bodies */
    size_t blk_cap;
    struct nettrace_stats stats;
    struct nettrace_trace_info info;
    nettrace_event_cb cb;
    void *cb_ud;
    nettrace_metadata_def_cb md_cb;
    void *md_cb_ud;
    nettrace_block_cb blk_cb;
    void *blk_cb_ud;
    struct nettrace_block blk_sum; /* the block being read, for blk_cb */
    /* metadata records and an open-addressing index id -> record + 1 */
    struct md_rec *md;
    size_t md_len;
    size_t md_cap;
    uint32_t *md_index;
    size_t md_index_cap; /* power of two, or 0 */
    char *arena;
    size_t arena_len;
    size_t arena_cap;
    /* stack ids defined since the last SPBlock */
    struct id_range *ranges;
    size_t nranges;
    size_t ranges_cap;
    /* NETTRACE_KEEP_STACKS: the stacks of the current region (bounded by NETTRACE_MAX_KEPT_STACKS)
     */
    uint8_t *stk_bytes;
    size_t stk_len;
    size_t stk_cap;
    struct stack_ref *stk_index;
    size_t stk_count;
    size_t stk_index_cap;
    /* V6: label lists with activity ids, open addressing by id */
    struct label_acts *labels;
    size_t labels_len;
    size_t labels_cap; /* power of two, or 0 */
    /* last sequence number per capture thread, for lost-event accounting */
    struct thread_slot *threads;
    size_t threads_len;
    size_t threads_cap;              /* power of two, or 0 */
    struct thread_slot *thread_last; /* slot of the last event's capture thread, or NULL */
    bool threads_full; /* V6: a Thread block went past MAX_THREADS: liveness is not checked */
};

static const char *const block_names[NETTRACE_BLOCK_KINDS] = {"EventBlock", "MetadataBlock",
                                                              "StackBlock", "SPBlock"};

static const uint8_t stream_header[32] = {'N', 'e', 't', 't', 'r', 'a', 'c', 'e', 20,  0,   0,
                                          0,   '!', 'F', 'a', 's', 't', 'S', 'e', 'r', 'i', 'a',
                                          'l', 'i', 'z', 'a', 't', 'i', 'o', 'n', '.', '1'};

/* V6 block kinds (nettrace.md §7). */
enum v6_kind {
    V6_END = 0,
    V6_TRACE = 1,
    V6_EVENT = 2,
    V6_METADATA = 3,
    V6_SEQUENCE_POINT = 4,
    V6_STACK = 5,
    V6_THREAD = 6,
    V6_REMOVE_THREAD = 7,
    V6_LABEL_LIST = 8
};
#define V6_MAJOR 6

/* ---- little helpers -------------------------------------------------------------------------- */

/*
 * Records the first violation. Every check funnels through here so the verdict, the message and
 * the offset are always set together, and the state machine stops.
 */
__attribute__((format(printf, 4, 5))) static int fail(struct nettrace_private *pr, int err,
                                                      uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = vsnprintf(pr->msg, sizeof(pr->msg), fmt, ap);
    va_end(ap);
    if (rc < 0) {
        pr->msg[0] = '\0';
    }
    /* A message longer than msg is cut; the offset, not the text, is the precise part. */
    pr->err = err;
    pr->err_off = off;
    pr->state = ST_FAILED;
    return err;
}

static int fail_nomem(struct nettrace_private *pr, uint64_t off)
{
    return fail(pr, -ENOMEM, off, "checker: out of memory");
}

/*
 * Units are read with events' cursor (ev_rd.h); its base is the absolute stream offset of p[0], so
 * ev_rd_offset() gives the offset a failure is reported at.
 */

enum varint_status { VAR_OK = 0, VAR_TRUNC = 1, VAR_OVERLONG = 2 };

/*
 * LEB128-style varuint (nettrace.md §4). The runtime writes the minimal form, so a value needs at
 * most ceil(bits / 7) bytes and the last byte carries no bits above the type's width; anything else
 * is "over-long". A non-minimal but in-range encoding (0x80 0x00) is accepted, as readers do.
 */
static enum varint_status cur_varint(struct ev_rd *c, unsigned bits, uint64_t *v)
{
    unsigned max_bytes = (bits + 6) / 7;
    uint64_t value = 0;
    for (unsigned k = 0; k < max_bytes; k++) {
        if (ev_rd_left(c) < 1) {
            return VAR_TRUNC;
        }
        uint8_t b = c->p[c->i++];
        unsigned shift = 7 * k;
        if (k == max_bytes - 1) {
            /* Bits of the last byte that would land beyond the type's width. */
            unsigned room = bits - shift;
            if ((b & 0x80) != 0 || (room < 7 && (b >> room) != 0)) {
                return VAR_OVERLONG;
            }
        }
        value |= (uint64_t)(b & 0x7F) << shift;
        if ((b & 0x80) == 0) {
            *v = value;
            return VAR_OK;
        }
    }
    return VAR_OVERLONG; /* not reached: the last byte returns above */
}

/* ---- metadata storage ------------------------------------------------------------------------ */

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

static struct md_rec *md_find(const struct nettrace_private *pr, uint32_t id)
{
    if (pr->md_index_cap == 0) {
        return NULL;
    }
    size_t mask = pr->md_index_cap - 1;
    for (size_t k = num_mix_u32(id) & mask;; k = (k + 1) & mask) {
        uint32_t slot = pr->md_index[k];
        if (slot == 0) {
            return NULL;
        }
        if (pr->md[slot - 1].id == id) {
            return &pr->md[slot - 1];
        }
    }
}

static void md_index_put(uint32_t *index, size_t cap, const struct md_rec *md, uint32_t slot)
{
    size_t mask = cap - 1;
    size_t k = num_mix_u32(md[slot - 1].id) & mask;
    while (index[k] != 0) {
        k = (k + 1) & mask;
    }
    index[k] = slot;
}

/* Room for one more record, growing the array and the index (kept at most half full). */
static int md_reserve(struct nettrace_private *pr)
{
    if (pr->md_len == pr->md_cap) {
        size_t cap = pr->md_cap ? pr->md_cap * 2 : 64;
        struct md_rec *md = realloc(pr->md, cap * sizeof(*md));
        if (md == NULL) {
            return -ENOMEM;
        }
        pr->md = md;
        pr->md_cap = cap;
    }
    if ((pr->md_len + 1) * 2 > pr->md_index_cap) {
        size_t cap = pr->md_index_cap ? pr->md_index_cap * 2 : 128;
        uint32_t *index = calloc(cap, sizeof(*index));
        if (index == NULL) {
            return -ENOMEM;
        }
        for (size_t k = 0; k < pr->md_len; k++) {
            if (!pr->md[k].stale) {
                md_index_put(index, cap, pr->md, (uint32_t)(k + 1));
            }
        }
        free(pr->md_index);
        pr->md_index = index;
        pr->md_index_cap = cap;
    }
    return 0;
}

/*
 * Appends a name to the arena as NUL-terminated UTF-8 and returns its offset: s[0..units) are
 * UTF-16LE units, or when utf8 (V6) UTF-8 bytes copied as they are.
 */
static int arena_add(struct nettrace_private *pr, const uint8_t *s, size_t units, bool utf8,
                     uint32_t *off)
{
    size_t len = utf8 ? units : ev_utf16_utf8_len(s, units);
    if (len + 1 > ARENA_MAX - pr->arena_len) {
        return AGENT_E_TOOBIG;
    }
    if (pr->arena_len + len + 1 > pr->arena_cap) {
        size_t cap = pr->arena_cap ? pr->arena_cap : 4096;
        while (cap < pr->arena_len + len + 1) {
            cap *= 2;
        }
        char *a = realloc(pr->arena, cap);
        if (a == NULL) {
            return -ENOMEM;
        }
        pr->arena = a;
        pr->arena_cap = cap;
    }
    if (utf8) {
        memcpy(pr->arena + pr->arena_len, s, len);
        pr->arena[pr->arena_len + len] = '\0';
    } else if (ev_utf16_to_utf8(s, units, pr->arena + pr->arena_len, len + 1, NULL) != 0) {
        return AGENT_E_INVAL; /* cannot happen: the room was computed above */
    }
    *off = (uint32_t)pr->arena_len;
    pr->arena_len += len + 1;
    return 0;
}

/* The public view of a record; its strings live in the arena. */
static void md_public(const struct nettrace_private *pr, const struct md_rec *md,
                      struct nettrace_metadata *m)
{
    m->metadata_id = md->id;
    m->provider = pr->arena + md->provider;
    m->event_name = pr->arena + md->name;
    m->event_id = md->event_id;
    m->version = md->version;
    m->level = md->level;
    m->opcode = md->opcode;
    m->keywords = md->keywords;
    m->events = md->events;
    m->v6 = pr->v6;
}

/* ---- metadata payloads (nettrace.md §5) ------------------------------------------------------ */

/* Type codes a V1 field list may use: Object and the scalars 3..18 (Array needs V2Params). */
static bool v1_type_known(uint32_t t)
{
    return t == 1 || (t >= 3 && t <= 18);
}

/*
 * Skips a V1 field list. Every type code must be known: V1 entries have no size, so a reader that
 * meets an unknown code loses its place (TraceEvent then misreads the rest of the record).
 */
static int skip_v1_fields(struct nettrace_private *pr, struct ev_rd *c, uint32_t count, int depth)
{
    for (uint32_t k = 0; k < count; k++) {
        uint64_t at = ev_rd_offset(c);
        uint32_t type;
        if (ev_rd_u32(c, &type) != 0) {
            return fail(pr, AGENT_E_PROTO, at, "metadata: field %u runs past the payload", k);
        }
        if (!v1_type_known(type)) {
            return fail(pr, AGENT_E_PROTO, at, "metadata: field %u has type code %u", k, type);
        }
        if (type == 1) {
            uint32_t nested;
            if (depth >= MAX_FIELD_DEPTH) {
                return fail(pr, AGENT_E_PROTO, at, "metadata: Object fields nested too deep");
            }
            if (ev_rd_u32(c, &nested) != 0) {
                return fail(pr, AGENT_E_PROTO, at, "metadata: Object field count past the payload");
            }
            int rc = skip_v1_fields(pr, c, nested, depth + 1);
            if (rc < 0) {
                return rc;
            }
        }
        const uint8_t *s;
        size_t units;
        if (!ev_rd_utf16z(c, &s, &units)) {
            return fail(pr, AGENT_E_PROTO, ev_rd_offset(c), "metadata: field name not terminated");
        }
    }
    return 0;
}

static int skip_v2_fields(struct nettrace_private *pr, struct ev_rd *c, uint32_t count, int depth);

/*
 * One V2 type description inside a size-bounded field window. An unknown type code only ends the
 * walk of this window (returns 1): the size prefix still says where the next field starts, and
 * TraceEvent likewise drops the field list of such an event but reads the trace.
 */
static int skip_v2_type(struct nettrace_private *pr, struct ev_rd *c, int depth)
{
    uint64_t at = ev_rd_offset(c);
    uint32_t type;
    if (depth >= MAX_FIELD_DEPTH) {
        return fail(pr, AGENT_E_PROTO, at, "metadata: V2 fields nested too deep");
    }
    if (ev_rd_u32(c, &type) != 0) {
        return fail(pr, AGENT_E_PROTO, at, "metadata: V2 field type past its size");
    }
    if (type == 19) {
        return skip_v2_type(pr, c, depth + 1); /* the element type */
    }
    if (type == 1) {
        uint32_t nested;
        if (ev_rd_u32(c, &nested) != 0) {
            return fail(pr, AGENT_E_PROTO, at, "metadata: V2 Object field count past its size");
        }
        return skip_v2_fields(pr, c, nested, depth + 1);
    }
    return v1_type_known(type) ? 0 : 1;
}

static int skip_v2_fields(struct nettrace_private *pr, struct ev_rd *c, uint32_t count, int depth)
{
    for (uint32_t k = 0; k < count; k++) {
        uint64_t at = ev_rd_offset(c);
        uint32_t size;
        if (ev_rd_u32(c, &size) != 0 || size < 4 || size - 4 > ev_rd_left(c)) {
            return fail(pr, AGENT_E_PROTO, at, "metadata: V2 field %u size past its container", k);
        }
        struct ev_rd w = {c->p, c->i + (size - 4), c->i, c->base};
        const uint8_t *s;
        size_t units;
        if (!ev_rd_utf16z(&w, &s, &units)) {
            return fail(pr, AGENT_E_PROTO, ev_rd_offset(&w),
                        "metadata: V2 field name not terminated");
        }
        int rc = skip_v2_type(pr, &w, depth);
        if (rc < 0) {
            return rc;
        }
        c->i += size - 4; /* the rest of the window is padding */
    }
    return 0;
}

/*
 * Parses one metadata record and defines its id. TraceEvent
 * (EventPipeMetadata.ReadNetTraceMetadata) reads the event description unconditionally, so a
 * payload that stops before `level` is invalid; one that stops right after it has no fields, which
 * is fine.
 */
static int parse_metadata_tags(struct nettrace_private *pr, struct ev_rd *c, struct md_rec *rec);
static int store_metadata(struct nettrace_private *pr, const struct md_rec *parsed,
                          const uint8_t *prov, size_t prov_units, const uint8_t *name,
                          size_t name_units, const uint8_t *p, size_t n, uint64_t base);

/* The slot of the index that holds id's record, pointed at the record numbered slot instead. */
static void md_index_replace(struct nettrace_private *pr, uint32_t id, uint32_t slot)
{
    size_t mask = pr->md_index_cap - 1;
    for (size_t k = num_mix_u32(id) & mask;; k = (k + 1) & mask) {
        uint32_t cur = pr->md_index[k];
        if (cur != 0 && pr->md[cur - 1].id == id) {
            pr->md_index[k] = slot;
            return;
        }
    }
}

static int parse_metadata(struct nettrace_private *pr, const uint8_t *p, size_t n, uint64_t base)
{
    struct ev_rd c = {p, n, 0, base};
    struct md_rec rec;
    memset(&rec, 0, sizeof(rec));
    const uint8_t *prov;
    const uint8_t *name;
    size_t prov_units;
    size_t name_units;

    if (ev_rd_u32(&c, &rec.id) != 0) {
        return fail(pr, AGENT_E_PROTO, base, "metadata: payload of %zu bytes has no id", n);
    }
    if (rec.id == 0) {
        return fail(pr, AGENT_E_PROTO, base, "metadata: id 0 is reserved");
    }
    if (!ev_rd_utf16z(&c, &prov, &prov_units)) {
        return fail(pr, AGENT_E_PROTO, base + 4, "metadata %u: provider name not terminated",
                    rec.id);
    }
    uint64_t desc = ev_rd_offset(&c);
    uint32_t event_id;
    if (ev_rd_u32(&c, &event_id) != 0) {
        return fail(pr, AGENT_E_PROTO, desc, "metadata %u: no event description", rec.id);
    }
    if (!ev_rd_utf16z(&c, &name, &name_units)) {
        return fail(pr, AGENT_E_PROTO, ev_rd_offset(&c), "metadata %u: event name not terminated",
                    rec.id);
    }
    rec.event_id = event_id;
    uint64_t at = ev_rd_offset(&c);
    if (ev_rd_u64(&c, &rec.keywords) != 0 || ev_rd_u32(&c, &rec.version) != 0 ||
        ev_rd_u32(&c, &rec.level) != 0) {
        return fail(pr, AGENT_E_PROTO, at, "metadata %u: keywords/version/level past the payload",
                    rec.id);
    }
    if (ev_rd_left(&c) > 0) {
        uint32_t count;
        at = ev_rd_offset(&c);
        if (ev_rd_u32(&c, &count) != 0) {
            return fail(pr, AGENT_E_PROTO, at, "metadata %u: field count past the payload", rec.id);
        }
        int rc = skip_v1_fields(pr, &c, count, 0);
        if (rc < 0) {
            return rc;
        }
    }
    int rc = parse_metadata_tags(pr, &c, &rec);
    return rc < 0 ? rc : store_metadata(pr, &rec, prov, prov_units, name, name_units, p, n, base);
}

/* V5 tags (nettrace.md §5.3) to the payload's end: OpCode and V2Params; unknown kinds skipped. */
static int parse_metadata_tags(struct nettrace_private *pr, struct ev_rd *c, struct md_rec *rec)
{
    while (ev_rd_left(c) > 0) {
        uint32_t len;
        uint8_t kind;
        uint64_t at = ev_rd_offset(c);
        if (ev_rd_u32(c, &len) != 0 || ev_rd_u8(c, &kind) != 0 || len > ev_rd_left(c)) {
            return fail(pr, AGENT_E_PROTO, at, "metadata %u: tag runs past the payload", rec->id);
        }
        struct ev_rd t = {c->p, c->i + len, c->i, c->base};
        if (kind == 1) {
            if (ev_rd_u8(&t, &rec->opcode) != 0) {
                return fail(pr, AGENT_E_PROTO, at, "metadata %u: empty OpCode tag", rec->id);
            }
        } else if (kind == 2) {
            uint32_t count;
            if (ev_rd_u32(&t, &count) != 0) {
                return fail(pr, AGENT_E_PROTO, at, "metadata %u: V2Params tag without a count",
                            rec->id);
            }
            int rc = skip_v2_fields(pr, &t, count, 0);
            if (rc < 0) {
                return rc;
            }
        }
        c->i += len;
    }
    return 0;
}

/*
 * Keeps a parsed record (and its names in the arena), refusing a second definition of its id, and
 * hands the record with its raw payload p[0..n) to the metadata callback.
 */
static int store_metadata(struct nettrace_private *pr, const struct md_rec *parsed,
                          const uint8_t *prov, size_t prov_units, const uint8_t *name,
                          size_t name_units, const uint8_t *p, size_t n, uint64_t base)
{
    struct md_rec rec = *parsed;
    /* TraceEvent adds ids to a dictionary with Add, which throws on a second definition. V6
     * sequence points may flush the definitions: an id flushed so may be defined again. */
    const struct md_rec *old = md_find(pr, rec.id);
    if (old != NULL && (!pr->v6 || old->epoch == pr->md_epoch)) {
        return fail(pr, AGENT_E_PROTO, base, "metadata id %u defined twice", rec.id);
    }
    size_t old_slot = old != NULL ? (size_t)(old - pr->md) : SIZE_MAX;
    if (pr->md_len >= pr->opt.max_metadata) {
        return fail(pr, AGENT_E_TOOBIG, base, "checker limit: more than %u metadata records",
                    pr->opt.max_metadata);
    }
    int rc = md_reserve(pr);
    if (rc == 0) {
        rc = arena_add(pr, prov, prov_units, pr->v6, &rec.provider);
    }
    if (rc == 0) {
        rc = arena_add(pr, name, name_units, pr->v6, &rec.name);
    }
    if (rc == -ENOMEM) {
        return fail_nomem(pr, base);
    }
    if (rc < 0) {
        return fail(pr, AGENT_E_TOOBIG, base, "checker limit: metadata names over %u bytes",
                    ARENA_MAX);
    }
    rec.epoch = pr->md_epoch;
    rec.stale = false;
    pr->md[pr->md_len] = rec;
    pr->md_len++;
    if (old_slot != SIZE_MAX) {
        pr->md[old_slot].stale = true;
        md_index_replace(pr, rec.id, (uint32_t)pr->md_len);
    } else {
        md_index_put(pr->md_index, pr->md_index_cap, pr->md, (uint32_t)pr->md_len);
    }
    pr->stats.metadata++;
    if (pr->md_cb != NULL) {
        struct nettrace_metadata m;
        md_public(pr, &pr->md[pr->md_len - 1], &m);
        pr->md_cb(pr->md_cb_ud, &m, p, n);
    }
    return 0;
}

/* ---- stacks and threads ---------------------------------------------------------------------- */

/* The range holding stack id `id` in the current region, or NULL. */
static const struct id_range *stack_range(const struct nettrace_private *pr, uint32_t id)
{
    for (size_t k = 0; k < pr->nranges; k++) {
        if (id >= pr->ranges[k].first && id <= pr->ranges[k].last) {
            return &pr->ranges[k];
        }
    }
    return NULL;
}

static bool stack_defined(const struct nettrace_private *pr, uint32_t id)
{
    return stack_range(pr, id) != NULL;
}

/* A sequence point ends the stack region: its ids and kept stacks are forgotten. */
static void region_end(struct nettrace_private *pr)
{
    pr->nranges = 0;
    pr->stk_len = 0;
    pr->stk_count = 0;
}

/* NETTRACE_KEEP_STACKS: the kept addresses of stack id `id`, or NULL (none, or not kept). */
static const uint8_t *stack_kept(const struct nettrace_private *pr, uint32_t id, uint32_t *len)
{
    const struct id_range *r = id != 0 ? stack_range(pr, id) : NULL;
    if (r == NULL || r->base == UINT32_MAX || (size_t)r->base + (id - r->first) >= pr->stk_count) {
        return NULL;
    }
    const struct stack_ref *ref = &pr->stk_index[r->base + (id - r->first)];
    *len = ref->len;
    return ref->len > 0 ? pr->stk_bytes + ref->off : NULL;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t c = *cap ? *cap : 64;
    while (c < need) {
        c *= 2;
    }
    void *n = realloc(*p, c * elem);
    if (n == NULL) {
        return -ENOMEM;
    }
    *p = n;
    *cap = c;
    return 0;
}

/*
 * NETTRACE_KEEP_STACKS: copies a checked StackBlock's stacks (p[0..n)) for the events of the
 * region. The base index for them, or UINT32_MAX when they would pass NETTRACE_MAX_KEPT_STACKS
 * bytes or memory runs out (the events then go without their stacks; memory stays bounded).
 */
static uint32_t keep_stacks(struct nettrace_private *pr, const uint8_t *p, size_t n, uint32_t count)
{
    if ((pr->opt.flags & NETTRACE_KEEP_STACKS) == 0 || pr->stk_len + n > NETTRACE_MAX_KEPT_STACKS ||
        grow((void **)&pr->stk_bytes, &pr->stk_cap, pr->stk_len + n, 1) != 0 ||
        grow((void **)&pr->stk_index, &pr->stk_index_cap, pr->stk_count + count,
             sizeof(struct stack_ref)) != 0) {
        return UINT32_MAX;
    }
    uint32_t base = (uint32_t)pr->stk_count;
    size_t i = 8;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t size = ev_load_u32(p + i); /* sizes were checked by the caller */
        i += 4;
        memcpy(pr->stk_bytes + pr->stk_len, p + i, size);
        pr->stk_index[pr->stk_count].off = (uint32_t)pr->stk_len;
        pr->stk_index[pr->stk_count].len = size;
        pr->stk_count++;
        pr->stk_len += size;
        i += size;
    }
    return base;
}

/*
 * Per-capture-thread sequence tracking for the dropped-event count (docs/nettrace.md §4, §6).
 * Sequence numbers count the events a thread *attempted* in this session, from 1, so every
 * number skipped is a dropped event: `expected` is the number the thread should have reached
 * before this sighting (an event's number minus 1, or a sequence point's number itself), and
 * expected − last is what was dropped since the last sighting. Unlike TraceEvent (which starts
 * counting at a thread's first event), a thread's first sighting counts too: an event numbered 5
 * as the thread's first means 4 dropped before it, and a thread that appears only in a sequence
 * point dropped everything it attempted. A number going backwards (a recycled thread id) counts
 * nothing and starts over.
 */
/* The slot of thread tid, made (sequence 0) when absent; *out NULL past MAX_THREADS. */
static int thread_slot_get(struct nettrace_private *pr, uint64_t tid, struct thread_slot **out)
{
    if (pr->threads_len * 2 >= pr->threads_cap && pr->threads_len < MAX_THREADS) {
        size_t cap = pr->threads_cap ? pr->threads_cap * 2 : 64;
        struct thread_slot *t = calloc(cap, sizeof(*t));
        if (t == NULL) {
            return -ENOMEM;
        }
        for (size_t k = 0; k < pr->threads_cap; k++) {
            if (pr->threads[k].used) {
                size_t j = hash64(pr->threads[k].id) & (cap - 1);
                while (t[j].used) {
                    j = (j + 1) & (cap - 1);
                }
                t[j] = pr->threads[k];
            }
        }
        free(pr->threads);
        pr->threads = t;
        pr->threads_cap = cap;
        pr->thread_last = NULL;
    }
    size_t mask = pr->threads_cap - 1;
    size_t j = hash64(tid) & mask;
    while (pr->threads[j].used && pr->threads[j].id != tid) {
        j = (j + 1) & mask;
    }
    struct thread_slot *s = &pr->threads[j];
    *out = NULL;
    if (!s->used) {
        if (pr->threads_len >= MAX_THREADS) {
            return 0; /* stop tracking new threads; the count is a statistic */
        }
        s->used = 1;
        s->id = tid;
        pr->threads_len++;
        s->seq = 0; /* nothing attempted before the session */
    }
    *out = s;
    return 0;
}

static int thread_seen_lookup(struct nettrace_private *pr, uint64_t tid, uint32_t expected,
                              uint32_t seq)
{
    struct thread_slot *s;
    if (thread_slot_get(pr, tid, &s) != 0) {
        return -ENOMEM;
    }
    if (s == NULL) {
        return 0;
    }
    int32_t gap = (int32_t)(expected - s->seq);
    if (gap > 0) {
        pr->stats.lost += (uint64_t)gap;
    }
    s->seq = seq;
    pr->thread_last = s;
    return 0;
}

/*
 * V6 (nettrace.md §7): a thread index may be referred to (capture thread of an event, sequence
 * point, RemoveThread) only between the Thread block that introduces it and its RemoveThread or a
 * sequence point flushing the thread cache; TraceEvent (ThreadCache.GetThread) refuses others.
 */
static bool thread_live(const struct nettrace_private *pr, uint64_t idx)
{
    if (pr->threads_full) {
        return true;
    }
    if (pr->threads_cap == 0) {
        return false;
    }
    size_t mask = pr->threads_cap - 1;
    for (size_t j = hash64(idx) & mask; pr->threads[j].used; j = (j + 1) & mask) {
        if (pr->threads[j].id == idx) {
            return pr->threads[j].live != 0;
        }
    }
    return false;
}

static inline int thread_seen(struct nettrace_private *pr, uint64_t tid, uint32_t expected,
                              uint32_t seq)
{
    /* Events come in runs from one capture thread: try the slot of the last sighting first. */
    struct thread_slot *last = pr->thread_last;
    if (last == NULL || last->id != tid) {
        return thread_seen_lookup(pr, tid, expected, seq);
    }
    int32_t gap = (int32_t)(expected - last->seq);
    if (gap > 0) {
        pr->stats.lost += (uint64_t)gap;
    }
    last->seq = seq;
    return 0;
}

/*
 * The end of a run of events of capture thread tid (check_event_block): its last sequence number
 * goes to the thread's slot. Every event of the run after its first was one number after the one
 * before (a gap of 0 each), and the run's first event went through thread_seen, which left the
 * slot in thread_last unless the thread is not tracked (past MAX_THREADS: nothing to store).
 */
static inline void thread_run_end(struct nettrace_private *pr, uint64_t tid, uint32_t seq)
{
    if (pr->thread_last != NULL && pr->thread_last->id == tid) {
        pr->thread_last->seq = seq;
    }
}

/* ---- blocks (nettrace.md §3, §4) ------------------------------------------------------------- */

static int varint_fail(struct nettrace_private *pr, enum varint_status st, uint64_t at,
                       const char *what)
{
    if (st == VAR_TRUNC) {
        return fail(pr, AGENT_E_PROTO, at, "event header: %s runs past the block end", what);
    }
    return fail(pr, AGENT_E_PROTO, at, "event header: %s varint over-long", what);
}

static int hdr_varint_long(struct nettrace_private *pr, struct ev_rd *c, unsigned bits,
                           const char *what, uint64_t *v)
{
    uint64_t at = ev_rd_offset(c);
    enum varint_status st = cur_varint(c, bits, v);
    return st == VAR_OK ? 0 : varint_fail(pr, st, at, what);
}

/* Reads a varint field of a compressed header; 0 or the failure code. */
static inline int hdr_varint(struct nettrace_private *pr, struct ev_rd *c, unsigned bits,
                             const char *what, uint64_t *v)
{
    if (c->i < c->n && c->p[c->i] < 0x80) { /* one byte: the common case, always minimal */
        *v = c->p[c->i++];
        return 0;
    }
    return hdr_varint_long(pr, c, bits, what, v);
}

static int read_guid(struct ev_rd *c, uint8_t out[16])
{
    if (ev_rd_left(c) < 16) {
        return -1;
    }
    memcpy(out, c->p + c->i, 16);
    c->i += 16;
    return 0;
}

/* A header-compressed blob header (nettrace.md §4.2); b holds the previous one's on entry. */
static int read_compressed(struct nettrace_private *pr, struct ev_rd *c, struct blob *b)
{
    uint8_t flags;
    uint64_t v = 0;
    int rc = 0;
    if (ev_rd_u8(c, &flags) != 0) {
        return fail(pr, AGENT_E_PROTO, ev_rd_offset(c), "event header: flags past the block end");
    }
    b->sorted = (flags & 0x40) != 0;
    if ((flags & 0x01) != 0 && (rc = hdr_varint(pr, c, 32, "metadata id", &v)) == 0) {
        b->metadata_id = (uint32_t)v;
    }
    if (rc == 0 && (flags & 0x02) != 0) {
        if ((rc = hdr_varint(pr, c, 32, "sequence delta", &v)) == 0) {
            b->sequence = b->sequence + (uint32_t)v + 1;
        }
        if (rc == 0 && (rc = hdr_varint(pr, c, 64, "capture thread", &v)) == 0) {
            b->capture_thread_id = v;
        }
        if (rc == 0 && (rc = hdr_varint(pr, c, 32, "processor", &v)) == 0) {
            b->proc = (uint32_t)v;
        }
    } else if (rc == 0 && b->metadata_id != 0) {
        b->sequence++;
    }
    if (rc == 0 && (flags & 0x04) != 0 && (rc = hdr_varint(pr, c, 64, "thread id", &v)) == 0) {
        b->thread_id = v;
    }
    if (rc == 0 && (flags & 0x08) != 0 && (rc = hdr_varint(pr, c, 32, "stack id", &v)) == 0) {
        b->stack_id = (uint32_t)v;
    }
    if (rc == 0 && (rc = hdr_varint(pr, c, 64, "timestamp delta", &v)) == 0) {
        b->timestamp += v;
    }
    if (rc != 0) {
        return rc;
    }
    if (pr->v6) {
        /* V6: 0x10 is the label list id; the activity ids live in label lists. */
        if ((flags & 0x10) != 0 && (rc = hdr_varint(pr, c, 32, "label list id", &v)) == 0) {
            b->label_list = (uint32_t)v;
        }
        if ((flags & 0x80) != 0 && rc == 0 &&
            (rc = hdr_varint(pr, c, 32, "payload size", &v)) == 0) {
            b->payload_size = (uint32_t)v;
        }
        return rc;
    }
    if (((flags & 0x10) != 0 && read_guid(c, b->activity) != 0) ||
        ((flags & 0x20) != 0 && read_guid(c, b->related) != 0)) {
        return fail(pr, AGENT_E_PROTO, ev_rd_offset(c),
                    "event header: activity ids past the block end");
    }
    if ((flags & 0x80) != 0 && (rc = hdr_varint(pr, c, 32, "payload size", &v)) == 0) {
        b->payload_size = (uint32_t)v;
    }
    return rc;
}

/*
 * An uncompressed blob header (nettrace.md §4.1): eventSize, 72 header bytes, payloadSize. The blob
 * spans 4 + eventSize bytes; the payload is the first payloadSize bytes after the header, the rest
 * is padding. *blob_end gets the offset (in c) of the next blob.
 */
static int read_uncompressed(struct nettrace_private *pr, struct ev_rd *c, struct blob *b,
                             size_t *blob_end)
{
    uint64_t at = ev_rd_offset(c);
    if (ev_rd_left(c) < 4 + UNCOMPRESSED_HDR + 4) {
        return fail(pr, AGENT_E_PROTO, at, "event header runs past the block end");
    }
    const uint8_t *h = c->p + c->i;
    uint32_t event_size = ev_load_u32(h);
    if (event_size < UNCOMPRESSED_HDR + 4 || event_size > 0x7FFFFFFF ||
        event_size > ev_rd_left(c) - 4) {
        return fail(pr, AGENT_E_PROTO, at, "event size %u outside the block", event_size);
    }
    b->metadata_id = ev_load_u32(h + 4) & 0x7FFFFFFFu;
    b->sorted = (ev_load_u32(h + 4) & 0x80000000u) == 0; /* bit 31 = not sorted */
    b->sequence = ev_load_u32(h + 8);
    b->thread_id = ev_load_u64(h + 12);
    b->capture_thread_id = ev_load_u64(h + 20);
    b->proc = ev_load_u32(h + 28);
    b->stack_id = ev_load_u32(h + 32);
    b->timestamp = ev_load_u64(h + 36);
    memcpy(b->activity, h + 44, 16);
    memcpy(b->related, h + 60, 16);
    b->payload_size = ev_load_u32(h + 76);
    if (b->payload_size > event_size - UNCOMPRESSED_HDR - 4) {
        return fail(pr, AGENT_E_PROTO, at + 80, "payload size %u larger than event size %u",
                    b->payload_size, event_size);
    }
    *blob_end = c->i + 4 + event_size;
    c->i += 4 + UNCOMPRESSED_HDR + 4;
    return 0;
}

/*
 * A V6 uncompressed row header (nettrace.md §7): u32 size (excluding itself), then 48 header bytes
 * with the label list id, then the payload; bytes after the payload up to the size are skipped.
 */
static int read_uncompressed_v6(struct nettrace_private *pr, struct ev_rd *c, struct blob *b,
                                size_t *blob_end)
{
    uint64_t at = ev_rd_offset(c);
    if (ev_rd_left(c) < 52) {
        return fail(pr, AGENT_E_PROTO, at, "event header runs past the block end");
    }
    const uint8_t *h = c->p + c->i;
    uint32_t event_size = ev_load_u32(h);
    if (event_size < 48 || event_size > ev_rd_left(c) - 4) {
        return fail(pr, AGENT_E_PROTO, at, "event size %u outside the block", event_size);
    }
    b->metadata_id = ev_load_u32(h + 4) & 0x7FFFFFFFu;
    b->sorted = (ev_load_u32(h + 4) & 0x80000000u) == 0; /* bit 31 = not sorted */
    b->sequence = ev_load_u32(h + 8);
    b->thread_id = ev_load_u64(h + 12);
    b->capture_thread_id = ev_load_u64(h + 20);
    b->proc = ev_load_u32(h + 28);
    b->stack_id = ev_load_u32(h + 32);
    b->timestamp = ev_load_u64(h + 36);
    b->label_list = ev_load_u32(h + 44);
    b->payload_size = ev_load_u32(h + 48);
    if (b->payload_size > event_size - 48) {
        return fail(pr, AGENT_E_PROTO, at + 48, "payload size %u larger than event size %u",
                    b->payload_size, event_size);
    }
    *blob_end = c->i + 4 + event_size;
    c->i += 52;
    return 0;
}

static const struct label_acts *label_get(const struct nettrace_private *pr, uint32_t id);

/* Adds one accepted event to the summary of its block (struct nettrace_block). */
static void block_sum_event(struct nettrace_block *s, const struct blob *b)
{
    int64_t ts = (int64_t)b->timestamp;
    if (s->events == 0 || ts < s->min_timestamp) {
        s->min_timestamp = ts;
    }
    if (s->events == 0 || ts > s->max_timestamp) {
        s->max_timestamp = ts;
    }
    if (b->stack_id != 0) {
        if (s->min_stack_id == 0 || b->stack_id < s->min_stack_id) {
            s->min_stack_id = b->stack_id;
        }
        if (b->stack_id > s->max_stack_id) {
            s->max_stack_id = b->stack_id;
        }
    }
    s->events++;
}

static const uint8_t *guid_or_null(const uint8_t g[16])
{
    static const uint8_t zero[16];
    return memcmp(g, zero, 16) != 0 ? g : NULL;
}

/* Hands one accepted event to the callback (set: pr->cb != NULL). */
static void emit_event(struct nettrace_private *pr, const struct md_rec *md, const struct blob *b,
                       const uint8_t *payload)
{
    struct nettrace_event ev = {
        .provider = pr->arena + md->provider,
        .event_name = pr->arena + md->name,
        .event_id = md->event_id,
        .version = md->version,
        .metadata_id = md->id,
        .sequence = b->sequence,
        .thread_id = b->thread_id,
        .capture_thread_id = b->capture_thread_id,
        .stack_id = b->stack_id,
        .timestamp = (int64_t)b->timestamp,
        .label_list_id = b->label_list,
        .sorted = b->sorted,
        .activity_id = guid_or_null(b->activity),
        .related_activity_id = guid_or_null(b->related),
        .payload = payload,
        .payload_len = b->payload_size,
    };
    ev.stack = stack_kept(pr, b->stack_id, &ev.stack_len);
    const struct label_acts *la = pr->v6 ? label_get(pr, b->label_list) : NULL;
    if (la != NULL) {
        ev.activity_id = guid_or_null(la->act);
        ev.related_activity_id = guid_or_null(la->rel);
    }
    pr->cb(pr->cb_ud, &ev);
}

/* Accounts for one event of an EventBlock and hands it to the callback. */
static int on_event(struct nettrace_private *pr, const struct blob *b, const uint8_t *payload,
                    uint64_t at, struct md_rec **last_md)
{
    /* Runs of one event type are common: remember the last record (metadata cannot change
     * inside an EventBlock, so the pointer stays valid for the block). */
    struct md_rec *md = *last_md;
    if (md == NULL || md->id != b->metadata_id) {
        md = md_find(pr, b->metadata_id);
        *last_md = md;
    }
    if (md == NULL) {
        return fail(pr, AGENT_E_PROTO, at, "event uses metadata id %u, not defined before",
                    b->metadata_id);
    }
    if (md->epoch != pr->md_epoch) {
        return fail(pr, AGENT_E_PROTO, at, "event uses metadata id %u, flushed by a sequence point",
                    b->metadata_id);
    }
    if (b->stack_id != 0 && !stack_defined(pr, b->stack_id)) {
        if ((pr->opt.flags & NETTRACE_STRICT_STACKS) != 0) {
            return fail(pr, AGENT_E_PROTO, at,
                        "event uses stack id %u, not defined since the last SPBlock", b->stack_id);
        }
        pr->stats.missing_stacks++;
    }
    if (pr->v6 && !thread_live(pr, b->capture_thread_id)) {
        return fail(pr, AGENT_E_PROTO, at, "event of unknown capture thread index %llu",
                    (unsigned long long)b->capture_thread_id);
    }
    if (thread_seen(pr, b->capture_thread_id, b->sequence - 1, b->sequence) != 0) {
        return fail_nomem(pr, at);
    }
    /* Counted only once accepted, so the counters match the events the callback saw. */
    md->events++;
    pr->stats.events++;
    block_sum_event(&pr->blk_sum, b);
    if (pr->cb != NULL) {
        emit_event(pr, md, b, payload);
    }
    return 0;
}

/*
 * A run of an EventBlock (nettrace.md §4.2): compressed events whose flags set none of 0x01..0x20
 * (no metadata id, sequence/capture thread/processor, thread id, stack id nor activity ids:
 * V6 label list) after an accepted event of the same block. They inherit all of those, and the
 * sequence number goes up by one, so everything on_event checked for the event before holds for
 * them too: the metadata record is the same and still defined (metadata, stack ranges and threads
 * change only between blocks), the stack id is as defined or missing as before, the capture
 * thread is as live as before and its sequence gap is 0. Only the timestamp delta, the payload
 * size and the payload's bounds are left to check. The run's counters are added when it ends
 * (before the next event outside it, at the block end, before a failure is returned) and before
 * each callback, so the statistics always count exactly the events accepted so far.
 */
struct ev_run {
    struct md_rec *md;  /* the metadata record of the events; NULL: no run can start */
    bool missing_stack; /* the stack id is not defined in the current region (counted) */
    uint32_t events;    /* accepted events of the run not yet counted */
    int64_t min_ts;     /* their timestamps' range (valid when events > 0) */
    int64_t max_ts;
};

static void run_flush(struct nettrace_private *pr, struct ev_run *run, const struct blob *b)
{
    if (run->events == 0) {
        return;
    }
    struct nettrace_block *s = &pr->blk_sum;
    if (s->events == 0 || run->min_ts < s->min_timestamp) {
        s->min_timestamp = run->min_ts;
    }
    if (s->events == 0 || run->max_ts > s->max_timestamp) {
        s->max_timestamp = run->max_ts;
    }
    s->events += run->events;
    run->md->events += run->events;
    pr->stats.events += run->events;
    if (run->missing_stack) {
        pr->stats.missing_stacks += run->events;
    }
    thread_run_end(pr, b->capture_thread_id, b->sequence);
    run->events = 0;
    run->min_ts = INT64_MAX;
    run->max_ts = INT64_MIN;
}

/* The varint at c->p[*i] (a compressed header's field); see hdr_varint. */
static inline int run_varint(struct nettrace_private *pr, struct ev_rd *c, size_t *i, unsigned bits,
                             const char *what, uint64_t *v)
{
    if (*i < c->n && c->p[*i] < 0x80) {
        *v = c->p[(*i)++];
        return 0;
    }
    c->i = *i;
    int rc = hdr_varint_long(pr, c, bits, what, v);
    *i = c->i;
    return rc;
}

/*
 * The events of a run from c on, as long as their flags qualify (only the next one when there is
 * an event callback, which it is handed to): decoded into b (which holds the event before on
 * entry), accepted and counted in run. The loop keeps the state in locals, stored back once at
 * its end. 0 or the failure code (the run then counts up to the event before it).
 */
static int run_events(struct nettrace_private *pr, struct ev_rd *c, struct blob *b,
                      struct ev_run *run)
{
    const uint8_t *p = c->p;
    size_t n = c->n;
    size_t i = c->i;
    uint64_t ts = b->timestamp;
    uint32_t size = b->payload_size;
    uint32_t k = 0;
    int64_t lo = run->min_ts;
    int64_t hi = run->max_ts;
    bool has_cb = pr->cb != NULL;
    int rc = 0;
    while (i < n && (p[i] & 0x3F) == 0) {
        uint8_t f = p[i];
        size_t start = i++;
        uint64_t delta = 0;
        uint64_t v = 0;
        if ((rc = run_varint(pr, c, &i, 64, "timestamp delta", &delta)) != 0 ||
            ((f & 0x80) != 0 && (rc = run_varint(pr, c, &i, 32, "payload size", &v)) != 0)) {
            break;
        }
        uint32_t next = (f & 0x80) != 0 ? (uint32_t)v : size;
        if (next > n - i) {
            rc = fail(pr, AGENT_E_PROTO, c->base + start,
                      "payload of %u bytes runs past the block end", next);
            break;
        }
        size = next;
        ts += delta;
        b->sorted = (f & 0x40) != 0;
        int64_t t = (int64_t)ts;
        lo = t < lo ? t : lo;
        hi = t > hi ? t : hi;
        k++;
        i += size;
        if (has_cb) {
            break; /* one event at a time: counted below, then handed to the callback */
        }
    }
    b->timestamp = ts;
    b->sequence += k;
    b->payload_size = size;
    run->events += k;
    run->min_ts = lo;
    run->max_ts = hi;
    c->i = i;
    if (rc != 0) {
        run_flush(pr, run, b);
        return rc;
    }
    if (has_cb && k > 0) {
        run_flush(pr, run, b);
        emit_event(pr, run->md, b, p + i - size);
    }
    return 0;
}

/*
 * EventBlock and MetadataBlock content: a header, then blobs up to exactly the block end. The
 * compressed-header state starts from zero in every block (nettrace.md §9), which is what makes
 * blocks independently checkable.
 */
static int check_event_block(struct nettrace_private *pr, const uint8_t *p, size_t n, bool meta)
{
    const char *what = meta ? "MetadataBlock" : "EventBlock";
    if (n < 20) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "%s of %zu bytes has no room for its header", what,
                    n);
    }
    uint16_t header_size = ev_load_u16(p);
    uint16_t flags = ev_load_u16(p + 2);
    if (header_size < 20 || header_size > n) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "%s header size %u outside 20..%zu", what,
                    header_size, n);
    }
    if ((flags & ~1u) != 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 2, "%s has unknown flags 0x%x", what, flags);
    }
    bool compressed = (flags & 1u) != 0;
    struct ev_rd c = {p, n, header_size, pr->pos};
    struct blob b;
    memset(&b, 0, sizeof(b));
    struct md_rec *last_md = NULL;
    struct ev_run run = {NULL, false, 0, INT64_MAX, INT64_MIN};
    while (ev_rd_left(&c) > 0) {
        if (run.md != NULL && (c.p[c.i] & 0x3F) == 0) {
            int rc = run_events(pr, &c, &b, &run);
            if (rc < 0) {
                return rc;
            }
            continue;
        }
        run_flush(pr, &run, &b);
        run.md = NULL;
        uint64_t at = ev_rd_offset(&c);
        size_t blob_end = 0;
        int rc = compressed ? read_compressed(pr, &c, &b)
                 : pr->v6   ? read_uncompressed_v6(pr, &c, &b, &blob_end)
                            : read_uncompressed(pr, &c, &b, &blob_end);
        if (rc < 0) {
            return rc;
        }
        if (b.payload_size > ev_rd_left(&c)) {
            return fail(pr, AGENT_E_PROTO, at, "payload of %u bytes runs past the block end",
                        b.payload_size);
        }
        const uint8_t *payload = c.p + c.i;
        uint64_t payload_at = ev_rd_offset(&c);
        uint64_t missing = pr->stats.missing_stacks;
        c.i += b.payload_size;
        if (!compressed) {
            c.i = blob_end;
        }
        rc = meta ? parse_metadata(pr, payload, b.payload_size, payload_at)
                  : on_event(pr, &b, payload, at, &last_md);
        if (rc < 0) {
            return rc;
        }
        if (meta) {
            pr->blk_sum.events++;
        } else if (compressed && b.metadata_id != 0) {
            /* The event was accepted: the events after it may be a run of it. */
            run.md = last_md;
            run.missing_stack = pr->stats.missing_stacks != missing;
        }
    }
    run_flush(pr, &run, &b);
    return 0;
}

/* StackBlock (nettrace.md §3.3): firstId, count, count sized stacks filling the block exactly. */
static int check_stack_block(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    struct ev_rd c = {p, n, 0, pr->pos};
    uint32_t first;
    uint32_t count;
    if (ev_rd_u32(&c, &first) != 0 || ev_rd_u32(&c, &count) != 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "StackBlock of %zu bytes is shorter than 8", n);
    }
    for (uint32_t k = 0; k < count; k++) {
        uint64_t at = ev_rd_offset(&c);
        uint32_t size;
        if (ev_rd_u32(&c, &size) != 0 || size > ev_rd_left(&c)) {
            return fail(pr, AGENT_E_PROTO, at, "StackBlock: stack %u of %u runs past the block end",
                        k, count);
        }
        if (size % (uint32_t)pr->info.pointer_size != 0) {
            return fail(pr, AGENT_E_PROTO, at,
                        "StackBlock: stack of %u bytes with %d-byte pointers", size,
                        pr->info.pointer_size);
        }
        c.i += size;
    }
    if (ev_rd_left(&c) != 0) {
        return fail(pr, AGENT_E_PROTO, ev_rd_offset(&c),
                    "StackBlock: %zu bytes after its %u stacks", ev_rd_left(&c), count);
    }
    if (count == 0) {
        return 0;
    }
    if (first > UINT32_MAX - (count - 1)) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "StackBlock: ids %u + %u overflow", first, count);
    }
    uint32_t last = first + (count - 1);
    pr->blk_sum.min_stack_id = first;
    pr->blk_sum.max_stack_id = last;
    uint32_t base = keep_stacks(pr, p, n, count);
    /* TraceEvent's StackCache adds ids with Dictionary.Add: a repeat in one region throws. */
    for (size_t k = 0; k < pr->nranges; k++) {
        if (first <= pr->ranges[k].last && last >= pr->ranges[k].first) {
            return fail(pr, AGENT_E_PROTO, pr->pos, "StackBlock: stack ids %u..%u defined twice",
                        first, last);
        }
    }
    const struct id_range *prev = pr->nranges > 0 ? &pr->ranges[pr->nranges - 1] : NULL;
    bool joins = prev != NULL && prev->last + 1 == first &&
                 (base == UINT32_MAX ? prev->base == UINT32_MAX
                                     : prev->base != UINT32_MAX &&
                                           prev->base + (prev->last - prev->first) + 1 == base);
    if (joins) {
        pr->ranges[pr->nranges - 1].last = last; /* the runtime numbers stacks consecutively */
    } else {
        if (pr->nranges == MAX_STACK_RANGES) {
            return fail(pr, AGENT_E_TOOBIG, pr->pos, "checker limit: %d stack id ranges",
                        MAX_STACK_RANGES);
        }
        if (pr->nranges == pr->ranges_cap) {
            size_t cap = pr->ranges_cap ? pr->ranges_cap * 2 : 16;
            struct id_range *r = realloc(pr->ranges, cap * sizeof(*r));
            if (r == NULL) {
                return fail_nomem(pr, pr->pos);
            }
            pr->ranges = r;
            pr->ranges_cap = cap;
        }
        pr->ranges[pr->nranges].first = first;
        pr->ranges[pr->nranges].last = last;
        pr->ranges[pr->nranges].base = base;
        pr->nranges++;
    }
    pr->stats.stacks += count;
    return 0;
}

/* SPBlock (nettrace.md §3.4): timestamp, thread count, 12 bytes per thread; ends a region (§6). */
static int check_sp_block(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    if (n < 12) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "SPBlock of %zu bytes is shorter than 12", n);
    }
    uint32_t count = ev_load_u32(p + 8);
    if ((uint64_t)n != 12 + 12 * (uint64_t)count) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 8, "SPBlock: %u threads need %llu bytes, not %zu",
                    count, (unsigned long long)12 + 12 * (unsigned long long)count, n);
    }
    for (uint32_t k = 0; k < count; k++) {
        const uint8_t *t = p + 12 + 12 * (size_t)k;
        uint32_t seq = ev_load_u32(t + 8);
        if (thread_seen(pr, ev_load_u64(t), seq, seq) != 0) {
            return fail_nomem(pr, pr->pos);
        }
    }
    pr->blk_sum.min_timestamp = (int64_t)ev_load_u64(p);
    pr->blk_sum.max_timestamp = pr->blk_sum.min_timestamp;
    region_end(pr);
    return 0;
}

/* ---- NetTrace V6 blocks (nettrace.md §7) ----------------------------------------------------- */

/* A V6 string inside a block; its failure names `what`. */
static int v6_string(struct nettrace_private *pr, struct ev_rd *c, const char *what,
                     const uint8_t **s, size_t *len)
{
    uint64_t at = ev_rd_offset(c);
    int rc = ev_rd_utf8(c, s, len);
    if (rc == AGENT_E_TRUNC) {
        return fail(pr, AGENT_E_PROTO, at, "%s: string runs past its end", what);
    }
    if (rc != 0) {
        return fail(pr, AGENT_E_PROTO, at, "%s: string length varint over-long", what);
    }
    return 0;
}

static int v6_varint(struct nettrace_private *pr, struct ev_rd *c, unsigned bits, const char *what,
                     uint64_t *v)
{
    uint64_t at = ev_rd_offset(c);
    int rc = ev_rd_varuint(c, bits, v);
    if (rc != 0) {
        return fail(pr, AGENT_E_PROTO, at, "%s: varint %s", what,
                    rc == AGENT_E_TRUNC ? "runs past its end" : "over-long");
    }
    return 0;
}

/* A decimal Trace value ("1234"); false unless it is all digits and fits an int32. */
static bool parse_i32(const uint8_t *s, size_t len, int32_t *out)
{
    int64_t v = 0;
    if (len == 0 || len > 10) {
        return false;
    }
    for (size_t k = 0; k < len; k++) {
        if (s[k] < '0' || s[k] > '9') {
            return false;
        }
        v = v * 10 + (s[k] - '0');
    }
    if (v > INT32_MAX) {
        return false;
    }
    *out = (int32_t)v;
    return true;
}

static bool key_is(const uint8_t *k, size_t len, const char *name)
{
    return strlen(name) == len && memcmp(k, name, len) == 0;
}

/* Trace block: sync time, ticks, tick frequency, pointer size, key/values; extra bytes ignored. */
static int check_v6_trace(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    struct nettrace_trace_info *ti = &pr->info;
    struct ev_rd c = {p, n, 40, pr->pos};
    if (n < 40) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "Trace block of %zu bytes is shorter than 40", n);
    }
    for (int k = 0; k < 8; k++) {
        ti->sync_time_utc[k] = ev_load_u16(p + 2 * k);
    }
    ti->sync_time_qpc = (int64_t)ev_load_u64(p + 16);
    ti->qpc_frequency = (int64_t)ev_load_u64(p + 24);
    ti->pointer_size = (int32_t)ev_load_u32(p + 32);
    uint32_t count = ev_load_u32(p + 36);
    if (ti->pointer_size != 4 && ti->pointer_size != 8) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 32, "Trace pointer size %d", ti->pointer_size);
    }
    if (ti->qpc_frequency <= 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 24, "Trace tick frequency %lld",
                    (long long)ti->qpc_frequency);
    }
    for (uint32_t k = 0; k < count; k++) {
        const uint8_t *key;
        const uint8_t *val;
        size_t klen;
        size_t vlen;
        int rc = v6_string(pr, &c, "Trace key", &key, &klen);
        if (rc == 0) {
            rc = v6_string(pr, &c, "Trace value", &val, &vlen);
        }
        if (rc < 0) {
            return rc;
        }
        /* Values that do not parse are left at 0, like absent keys. */
        if (key_is(key, klen, "ProcessId")) {
            (void)parse_i32(val, vlen, &ti->process_id);
        } else if (key_is(key, klen, "HardwareThreadCount")) {
            (void)parse_i32(val, vlen, &ti->processors);
        } else if (key_is(key, klen, "ExpectedCPUSamplingRate")) {
            (void)parse_i32(val, vlen, &ti->sampling_rate_ns);
        }
    }
    pr->trace_seen = true;
    return 0;
}

/* The OptionalMetadata of a V6 row: the kinds the checker keeps; unknown kinds end the walk. */
static int parse_v6_optional(struct nettrace_private *pr, struct ev_rd *c, struct md_rec *rec)
{
    uint64_t at = ev_rd_offset(c);
    uint16_t size;
    if (ev_rd_left(c) == 0) {
        return 0;
    }
    if (ev_rd_u16(c, &size) != 0 || size > ev_rd_left(c)) {
        return fail(pr, AGENT_E_PROTO, at, "metadata %u: optional metadata past the row", rec->id);
    }
    struct ev_rd t = {c->p, c->i + size, c->i, c->base};
    c->i += size;
    while (ev_rd_left(&t) > 0) {
        uint8_t kind = t.p[t.i++];
        uint8_t u8 = 0;
        const uint8_t *s;
        size_t len;
        bool ok = true;
        if (kind == 1) {
            ok = ev_rd_u8(&t, &rec->opcode) == 0;
        } else if (kind == 3) {
            ok = ev_rd_u64(&t, &rec->keywords) == 0;
        } else if (kind == 4 || kind == 5 || kind == 6) {
            ok = ev_rd_utf8(&t, &s, &len) == 0 && (kind != 6 || ev_rd_utf8(&t, &s, &len) == 0);
        } else if (kind == 7) {
            ok = ev_rd_skip(&t, 16) == 0;
        } else if (kind == 8 || kind == 9) {
            ok = ev_rd_u8(&t, &u8) == 0;
            *(kind == 8 ? &rec->level : &rec->version) = u8;
        } else {
            break; /* no length to skip it by: the rest of the window is not read */
        }
        if (!ok) {
            return fail(pr, AGENT_E_PROTO, ev_rd_offset(&t),
                        "metadata %u: optional metadata kind %u past its size", rec->id, kind);
        }
    }
    return 0;
}

/*
 * One V6 metadata row (the bytes after its u16 size): id, provider, event id, name, field
 * descriptions (walked by their sizes only; ev_schema_parse_v6 reads them), optional metadata.
 */
static int parse_metadata_v6(struct nettrace_private *pr, const uint8_t *p, size_t n, uint64_t base)
{
    struct ev_rd c = {p, n, 0, base};
    struct md_rec rec;
    memset(&rec, 0, sizeof(rec));
    const uint8_t *prov;
    const uint8_t *name;
    size_t prov_len;
    size_t name_len;
    uint64_t v;
    int rc = v6_varint(pr, &c, 32, "metadata id", &v);
    rec.id = (uint32_t)v;
    if (rc == 0 && rec.id == 0) {
        return fail(pr, AGENT_E_PROTO, base, "metadata: id 0 is reserved");
    }
    if (rc == 0) {
        rc = v6_string(pr, &c, "metadata provider", &prov, &prov_len);
    }
    if (rc == 0 && (rc = v6_varint(pr, &c, 32, "metadata event id", &v)) == 0) {
        rec.event_id = (uint32_t)v;
        rc = v6_string(pr, &c, "metadata event name", &name, &name_len);
    }
    if (rc < 0) {
        return rc;
    }
    if (memchr(prov, 0, prov_len) != NULL || memchr(name, 0, name_len) != NULL) {
        return fail(pr, AGENT_E_PROTO, base, "metadata %u: a NUL byte in a name", rec.id);
    }
    uint64_t at = ev_rd_offset(&c);
    uint16_t count;
    if (ev_rd_u16(&c, &count) != 0) {
        return fail(pr, AGENT_E_PROTO, at, "metadata %u: no field count", rec.id);
    }
    for (uint32_t k = 0; k < count; k++) {
        uint16_t size;
        at = ev_rd_offset(&c);
        if (ev_rd_u16(&c, &size) != 0 || ev_rd_skip(&c, size) != 0) {
            return fail(pr, AGENT_E_PROTO, at, "metadata %u: field %u past the row", rec.id, k);
        }
    }
    rc = parse_v6_optional(pr, &c, &rec);
    return rc < 0 ? rc : store_metadata(pr, &rec, prov, prov_len, name, name_len, p, n, base);
}

/* Metadata block: u16 header size (excluding itself), header, rows of u16 size + row. */
static int check_v6_metadata(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    struct ev_rd c = {p, n, 0, pr->pos};
    uint16_t header;
    if (ev_rd_u16(&c, &header) != 0 || ev_rd_skip(&c, header) != 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "Metadata block header past the block end");
    }
    while (ev_rd_left(&c) > 0) {
        uint64_t at = ev_rd_offset(&c);
        uint16_t size;
        if (ev_rd_u16(&c, &size) != 0 || size > ev_rd_left(&c)) {
            return fail(pr, AGENT_E_PROTO, at, "metadata row runs past the block end");
        }
        int rc = parse_metadata_v6(pr, c.p + c.i, size, ev_rd_offset(&c));
        if (rc < 0) {
            return rc;
        }
        c.i += size;
    }
    return 0;
}

/*
 * One (thread index, sequence) pair of a SequencePoint or RemoveThread block: the index must name
 * a live thread, whose sequence then advances to the number given. *index gets the index.
 */
static int v6_thread_seq(struct nettrace_private *pr, struct ev_rd *c, const char *block,
                         uint64_t *index)
{
    uint64_t seq;
    uint64_t at = ev_rd_offset(c);
    int rc = v6_varint(pr, c, 64, "thread index", index);
    if (rc == 0) {
        rc = v6_varint(pr, c, 32, "thread sequence", &seq);
    }
    if (rc < 0) {
        return rc;
    }
    if (!thread_live(pr, *index)) {
        return fail(pr, AGENT_E_PROTO, at, "%s: unknown thread index %llu", block,
                    (unsigned long long)*index);
    }
    if (thread_seen(pr, *index, (uint32_t)seq, (uint32_t)seq) != 0) {
        return fail_nomem(pr, pr->pos);
    }
    return 0;
}

/*
 * SequencePoint block: timestamp, flags, (thread index, sequence) pairs to exactly the block end.
 * It ends the stack region; flag 2 also ends every metadata definition.
 */
static int check_v6_sequence_point(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    if (n < 16) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "SequencePoint block of %zu bytes is too short", n);
    }
    uint32_t flags = ev_load_u32(p + 8);
    uint32_t count = ev_load_u32(p + 12);
    struct ev_rd c = {p, n, 16, pr->pos};
    if (count > ev_rd_left(&c) / 2) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 12, "SequencePoint: %u threads cannot fit", count);
    }
    for (uint32_t k = 0; k < count; k++) {
        uint64_t index;
        int rc = v6_thread_seq(pr, &c, "SequencePoint", &index);
        if (rc < 0) {
            return rc;
        }
    }
    if (ev_rd_left(&c) != 0) {
        return fail(pr, AGENT_E_PROTO, ev_rd_offset(&c),
                    "SequencePoint: %zu bytes after its %u threads", ev_rd_left(&c), count);
    }
    region_end(pr);
    if ((flags & 1u) != 0) {
        for (size_t k = 0; k < pr->threads_cap; k++) {
            pr->threads[k].live = 0; /* after the sequence checks above, as nettrace.md §7 says */
        }
    }
    if ((flags & 2u) != 0) {
        pr->md_epoch++;
    }
    return 0;
}

/* One Thread block row: index, then (kind, value) entries; an unknown kind ends the row early. */
static int check_v6_thread_row(struct nettrace_private *pr, struct ev_rd *w)
{
    uint64_t v;
    int rc = v6_varint(pr, w, 64, "Thread index", &v);
    if (rc == 0) {
        struct thread_slot *s;
        if (thread_slot_get(pr, v, &s) != 0) {
            return fail_nomem(pr, pr->pos);
        }
        if (s != NULL) {
            s->live = 1;
        } else {
            pr->threads_full = true;
        }
    }
    while (rc == 0 && ev_rd_left(w) > 0) {
        uint8_t kind = w->p[w->i++];
        const uint8_t *s;
        size_t len;
        if (kind == 1) {
            rc = v6_string(pr, w, "Thread name", &s, &len);
        } else if (kind == 2 || kind == 3) {
            rc = v6_varint(pr, w, 64, "Thread OS id", &v);
        } else if (kind == 4) {
            rc = v6_string(pr, w, "Thread key", &s, &len);
            if (rc == 0) {
                rc = v6_string(pr, w, "Thread value", &s, &len);
            }
        } else {
            /* TraceEvent refuses unknown kinds (no size to skip them by) */
            return fail(pr, AGENT_E_PROTO, ev_rd_offset(w) - 1, "Thread row: unknown kind %u",
                        kind);
        }
    }
    return rc;
}

static int check_v6_threads(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    struct ev_rd c = {p, n, 0, pr->pos};
    while (ev_rd_left(&c) > 0) {
        uint64_t at = ev_rd_offset(&c);
        uint16_t size;
        if (ev_rd_u16(&c, &size) != 0 || size > ev_rd_left(&c)) {
            return fail(pr, AGENT_E_PROTO, at, "Thread row runs past the block end");
        }
        struct ev_rd w = {c.p, c.i + size, c.i, c.base};
        int rc = check_v6_thread_row(pr, &w);
        if (rc < 0) {
            return rc;
        }
        c.i += size;
    }
    return 0;
}

/* RemoveThread block: (index, final sequence) pairs to exactly the block end. */
static int check_v6_remove_threads(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    struct ev_rd c = {p, n, 0, pr->pos};
    while (ev_rd_left(&c) > 0) {
        uint64_t index;
        int rc = v6_thread_seq(pr, &c, "RemoveThread", &index);
        if (rc < 0) {
            return rc;
        }
        struct thread_slot *s;
        if (thread_slot_get(pr, index, &s) != 0) {
            return fail_nomem(pr, pr->pos);
        }
        if (s != NULL) {
            s->live = 0;
        }
    }
    return 0;
}

/* The kept activity ids of label list id, or NULL. */
/* The slot of label list id, or SIZE_MAX when it is not kept. */
static size_t label_slot(const struct nettrace_private *pr, uint32_t id)
{
    if (pr->labels_cap == 0 || id == 0) {
        return SIZE_MAX;
    }
    for (size_t i = hash64(id) & (pr->labels_cap - 1);; i = (i + 1) & (pr->labels_cap - 1)) {
        if (pr->labels[i].id == id) {
            return i;
        }
        if (pr->labels[i].id == 0) {
            return SIZE_MAX;
        }
    }
}

static const struct label_acts *label_get(const struct nettrace_private *pr, uint32_t id)
{
    size_t i = label_slot(pr, id);
    return i != SIZE_MAX ? &pr->labels[i] : NULL;
}

/*
 * Keeps (or replaces, or forgets) label list id's activity ids. Lists without any are not
 * stored; past MAX_LABEL_LISTS new ones are dropped. 0 or -ENOMEM.
 */
static int label_put(struct nettrace_private *pr, uint32_t id, const struct label_acts *acts)
{
    static const uint8_t zero[16];
    bool any = memcmp(acts->act, zero, 16) != 0 || memcmp(acts->rel, zero, 16) != 0;
    size_t at = label_slot(pr, id);
    struct label_acts *old = at != SIZE_MAX ? &pr->labels[at] : NULL;
    if (old != NULL) {
        memcpy(old->act, acts->act, 16); /* a list without ids keeps an all-zero entry */
        memcpy(old->rel, acts->rel, 16);
        return 0;
    }
    if (!any || pr->labels_len >= MAX_LABEL_LISTS) {
        return 0;
    }
    if ((pr->labels_len + 1) * 2 > pr->labels_cap) {
        size_t cap = pr->labels_cap ? pr->labels_cap * 2 : 64;
        struct label_acts *t = calloc(cap, sizeof(*t));
        if (t == NULL) {
            return -ENOMEM;
        }
        for (size_t k = 0; k < pr->labels_cap; k++) {
            if (pr->labels[k].id != 0) {
                size_t j = hash64(pr->labels[k].id) & (cap - 1);
                while (t[j].id != 0) {
                    j = (j + 1) & (cap - 1);
                }
                t[j] = pr->labels[k];
            }
        }
        free(pr->labels);
        pr->labels = t;
        pr->labels_cap = cap;
    }
    size_t j = hash64(id) & (pr->labels_cap - 1);
    while (pr->labels[j].id != 0) {
        j = (j + 1) & (pr->labels_cap - 1);
    }
    pr->labels[j] = *acts;
    pr->labels[j].id = id;
    pr->labels_len++;
    return 0;
}

/* One label; *last is set by the kind's high bit; ActivityId and RelatedActivityId go to acts. */
static int check_v6_label(struct nettrace_private *pr, struct ev_rd *c, bool *last,
                          struct label_acts *acts)
{
    uint64_t at = ev_rd_offset(c);
    uint8_t kind;
    const uint8_t *s;
    size_t len;
    uint64_t v;
    int rc = 0;
    if (ev_rd_u8(c, &kind) != 0) {
        return fail(pr, AGENT_E_PROTO, at, "LabelList: a list runs past the block end");
    }
    *last = (kind & 0x80) != 0;
    switch (kind & 0x7F) {
    case 1: /* ActivityId, RelatedActivityId, TraceId */
        rc = read_guid(c, acts->act);
        break;
    case 2:
        rc = read_guid(c, acts->rel);
        break;
    case 3:
        rc = ev_rd_skip(c, 16);
        break;
    case 4: /* SpanId, Keywords */
    case 8:
        rc = ev_rd_skip(c, 8);
        break;
    case 5:
    case 6:
        rc = v6_string(pr, c, "LabelList key", &s, &len);
        if (rc == 0) {
            rc = (kind & 0x7F) == 5 ? v6_string(pr, c, "LabelList value", &s, &len)
                                    : v6_varint(pr, c, 64, "LabelList value", &v);
        }
        return rc;
    case 7: /* OpCode, Level, Version */
    case 9:
    case 10:
        rc = ev_rd_skip(c, 1);
        break;
    default:
        return fail(pr, AGENT_E_PROTO, at, "LabelList: unknown label kind %u", kind & 0x7F);
    }
    return rc == 0 ? 0 : fail(pr, AGENT_E_PROTO, at, "LabelList: label past the block end");
}

/* LabelList block: first index (>= 1), count, count lists; bytes after them are ignored. */
static int check_v6_label_lists(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    if (n < 8) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "LabelList block of %zu bytes is too short", n);
    }
    uint32_t first = ev_load_u32(p);
    uint32_t count = ev_load_u32(p + 4);
    if (first == 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "LabelList: first index 0");
    }
    struct ev_rd c = {p, n, 8, pr->pos};
    if (count > ev_rd_left(&c)) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 4, "LabelList: %u lists cannot fit", count);
    }
    for (uint32_t k = 0; k < count; k++) {
        bool last = false;
        struct label_acts acts;
        memset(&acts, 0, sizeof(acts));
        while (!last) {
            int rc = check_v6_label(pr, &c, &last, &acts);
            if (rc < 0) {
                return rc;
            }
        }
        if (first + k >= first && label_put(pr, first + k, &acts) != 0) {
            return fail_nomem(pr, pr->pos);
        }
    }
    return 0;
}

static int check_v6_block(struct nettrace_private *pr, const uint8_t *p, size_t n)
{
    switch (pr->v6_kind) {
    case V6_TRACE:
        return check_v6_trace(pr, p, n);
    case V6_EVENT:
        pr->kind = NETTRACE_BLOCK_EVENT;
        return check_event_block(pr, p, n, false);
    case V6_METADATA:
        pr->kind = NETTRACE_BLOCK_METADATA;
        return check_v6_metadata(pr, p, n);
    case V6_SEQUENCE_POINT:
        pr->kind = NETTRACE_BLOCK_SP;
        return check_v6_sequence_point(pr, p, n);
    case V6_STACK:
        pr->kind = NETTRACE_BLOCK_STACK;
        return check_stack_block(pr, p, n);
    case V6_THREAD:
        return check_v6_threads(pr, p, n);
    case V6_REMOVE_THREAD:
        return check_v6_remove_threads(pr, p, n);
    case V6_LABEL_LIST:
        return check_v6_label_lists(pr, p, n);
    default:
        return 0; /* unknown kinds are skipped (nettrace.md §7) */
    }
}

/* ---- the state machine ----------------------------------------------------------------------- */

static void expect(struct nettrace_private *pr, enum state st, size_t need)
{
    pr->state = st;
    pr->need = need;
}

/*
 * The first 12 bytes: the magic, then 20 (the length of V4/V5's FastSerialization signature) or 0
 * (V6's reserved field, nettrace.md §7).
 */
static int step_header(struct nettrace_private *pr, const uint8_t *u)
{
    for (size_t k = 0; k < 8; k++) {
        if (u[k] != stream_header[k]) {
            return fail(pr, AGENT_E_PROTO, pr->pos + k, "bad magic: not \"Nettrace\"");
        }
    }
    if (ev_load_u32(u + 8) == 0) {
        expect(pr, ST_V6_VERSION, 8);
        return 0;
    }
    for (size_t k = 8; k < 12; k++) {
        if (u[k] != stream_header[k]) {
            return fail(pr, AGENT_E_PROTO, pr->pos + k,
                        "bad FastSerialization header (not V4/V5 nettrace)");
        }
    }
    expect(pr, ST_HEADER_FS, sizeof(stream_header) - 12);
    return 0;
}

static int step_header_fs(struct nettrace_private *pr, const uint8_t *u)
{
    for (size_t k = 0; k < sizeof(stream_header) - 12; k++) {
        if (u[k] != stream_header[12 + k]) {
            return fail(pr, AGENT_E_PROTO, pr->pos + k,
                        "bad FastSerialization header (not V4/V5 nettrace)");
        }
    }
    expect(pr, ST_OBJ_TAG, 1);
    return 0;
}

static int step_v6_version(struct nettrace_private *pr, const uint8_t *u)
{
    uint32_t major = ev_load_u32(u);
    if (major != V6_MAJOR) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "NetTrace major version %u, expected 6", major);
    }
    pr->v6 = true;
    expect(pr, ST_V6_BLOCK, 4);
    return 0;
}

/* A V6 block header: low 24 bits the size, high 8 the kind; the Trace block comes first. */
static int step_v6_block(struct nettrace_private *pr, const uint8_t *u)
{
    uint32_t h = ev_load_u32(u);
    uint32_t size = h & 0xFFFFFFu;
    uint8_t kind = (uint8_t)(h >> 24);
    if (!pr->trace_seen && kind != V6_TRACE) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "the first block is of kind %u, not Trace", kind);
    }
    if (pr->trace_seen && kind == V6_TRACE) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "a second Trace block");
    }
    if (kind == V6_END) {
        if (size != 0) {
            return fail(pr, AGENT_E_PROTO, pr->pos, "EndOfStream block of %u bytes", size);
        }
        expect(pr, ST_END, 1);
        return 0;
    }
    if (size > pr->opt.max_block) {
        return fail(pr, AGENT_E_TOOBIG, pr->pos, "block of kind %u: size %u over the cap of %u",
                    kind, size, pr->opt.max_block);
    }
    pr->v6_kind = kind;
    memset(&pr->blk_sum, 0, sizeof(pr->blk_sum));
    expect(pr, ST_BLOCK_BODY, size);
    return 0;
}

static int step_obj_tag(struct nettrace_private *pr, const uint8_t *u)
{
    if (u[0] == TAG_NULL && pr->trace_seen) {
        expect(pr, ST_END, 1);
        return 0;
    }
    if (u[0] != TAG_BEGIN_PRIVATE) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "expected an object (0x05)%s, got 0x%02x",
                    pr->trace_seen ? " or the end tag (0x01)" : "", u[0]);
    }
    memset(&pr->blk_sum, 0, sizeof(pr->blk_sum));
    pr->blk_sum.offset = pr->pos;
    expect(pr, ST_OBJ_TYPE, 14);
    return 0;
}

static int step_obj_type(struct nettrace_private *pr, const uint8_t *u)
{
    if (u[0] != TAG_BEGIN_PRIVATE) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "expected a type object (0x05), got 0x%02x", u[0]);
    }
    if (u[1] != TAG_NULL) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 1,
                    "expected a NullReference type (0x01), got 0x%02x", u[1]);
    }
    pr->obj_version = (int32_t)ev_load_u32(u + 2);
    pr->obj_min_version = (int32_t)ev_load_u32(u + 6);
    int32_t name_len = (int32_t)ev_load_u32(u + 10);
    if (name_len <= 0 || name_len > MAX_NAME_LEN) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 10, "type name length %d", name_len);
    }
    expect(pr, ST_OBJ_NAME, (size_t)name_len + 1);
    return 0;
}

static int step_obj_name(struct nettrace_private *pr, const uint8_t *u, size_t n)
{
    size_t len = n - 1;
    if (u[len] != TAG_END_OBJECT) {
        return fail(pr, AGENT_E_PROTO, pr->pos + len,
                    "expected the type's end tag (0x06), got 0x%02x", u[len]);
    }
    bool is_trace = len == 5 && memcmp(u, "Trace", 5) == 0;
    if (!pr->trace_seen) {
        if (!is_trace) {
            return fail(pr, AGENT_E_PROTO, pr->pos, "the first object is \"%.*s\", not Trace",
                        (int)len, (const char *)u);
        }
        if (pr->obj_version != TRACE_VERSION || pr->obj_min_version != TRACE_VERSION) {
            return fail(pr, AGENT_E_PROTO, pr->pos - 12, "Trace version %d/%d, expected 4/4",
                        pr->obj_version, pr->obj_min_version);
        }
        expect(pr, ST_TRACE_BODY, 49);
        return 0;
    }
    if (is_trace) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "a second Trace object");
    }
    for (int k = 0; k < NETTRACE_BLOCK_KINDS; k++) {
        if (strlen(block_names[k]) == len && memcmp(u, block_names[k], len) == 0) {
            if (pr->obj_version != BLOCK_VERSION || pr->obj_min_version < 0 ||
                pr->obj_min_version > BLOCK_VERSION) {
                return fail(pr, AGENT_E_PROTO, pr->pos - 12, "%s version %d/%d, expected 2/<=2",
                            block_names[k], pr->obj_version, pr->obj_min_version);
            }
            pr->kind = (enum nettrace_block_kind)k;
            expect(pr, ST_BLOCK_SIZE, 4);
            return 0;
        }
    }
    return fail(pr, AGENT_E_PROTO, pr->pos, "unknown object type \"%.*s\"", (int)len,
                (const char *)u);
}

static int step_trace_body(struct nettrace_private *pr, const uint8_t *u)
{
    struct nettrace_trace_info *ti = &pr->info;
    if (u[48] != TAG_END_OBJECT) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 48, "expected Trace's end tag (0x06), got 0x%02x",
                    u[48]);
    }
    for (int k = 0; k < 8; k++) {
        ti->sync_time_utc[k] = ev_load_u16(u + 2 * k);
    }
    ti->sync_time_qpc = (int64_t)ev_load_u64(u + 16);
    ti->qpc_frequency = (int64_t)ev_load_u64(u + 24);
    ti->pointer_size = (int32_t)ev_load_u32(u + 32);
    ti->process_id = (int32_t)ev_load_u32(u + 36);
    ti->processors = (int32_t)ev_load_u32(u + 40);
    ti->sampling_rate_ns = (int32_t)ev_load_u32(u + 44);
    if (ti->pointer_size != 4 && ti->pointer_size != 8) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 32, "Trace pointer size %d", ti->pointer_size);
    }
    if (ti->qpc_frequency <= 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos + 24, "Trace QPC frequency %lld",
                    (long long)ti->qpc_frequency);
    }
    pr->trace_seen = true;
    expect(pr, ST_OBJ_TAG, 1);
    return 0;
}

static int step_block_size(struct nettrace_private *pr, const uint8_t *u)
{
    int32_t size = (int32_t)ev_load_u32(u);
    if (size < 0) {
        return fail(pr, AGENT_E_PROTO, pr->pos, "%s size %d", block_names[pr->kind], size);
    }
    if ((uint32_t)size > pr->opt.max_block) {
        return fail(pr, AGENT_E_TOOBIG, pr->pos, "%s size %d over the cap of %u",
                    block_names[pr->kind], size, pr->opt.max_block);
    }
    pr->block_size = (uint32_t)size;
    /* nettrace.md §3.1: pad to the next ABSOLUTE multiple of 4, counted from the stream's start. */
    uint64_t after = pr->pos + 4;
    expect(pr, ST_BLOCK_PAD, (size_t)((4 - after % 4) % 4));
    return 0;
}

static int step_block_pad(struct nettrace_private *pr, const uint8_t *u, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (u[k] != 0) {
            return fail(pr, AGENT_E_PROTO, pr->pos + k, "padding byte 0x%02x is not zero", u[k]);
        }
    }
    expect(pr, ST_BLOCK_BODY, pr->block_size);
    return 0;
}

static int step_block_body(struct nettrace_private *pr, const uint8_t *u, size_t n)
{
    int rc;
    if (pr->v6) {
        rc = check_v6_block(pr, u, n);
        if (rc == 0) {
            if (pr->v6_kind >= V6_EVENT && pr->v6_kind <= V6_STACK) {
                pr->stats.blocks[pr->kind]++;
            }
            expect(pr, ST_V6_BLOCK, 4);
        }
        return rc;
    }
    switch (pr->kind) {
    case NETTRACE_BLOCK_EVENT:
        rc = check_event_block(pr, u, n, false);
        break;
    case NETTRACE_BLOCK_METADATA:
        rc = check_event_block(pr, u, n, true);
        break;
    case NETTRACE_BLOCK_STACK:
        rc = check_stack_block(pr, u, n);
        break;
    case NETTRACE_BLOCK_SP:
    default:
        rc = check_sp_block(pr, u, n);
        break;
    }
    if (rc == 0) {
        pr->blk_sum.kind = pr->kind;
        pr->blk_sum.min_version = pr->obj_min_version;
        pr->blk_sum.content = u;
        pr->blk_sum.len = (uint32_t)n;
        expect(pr, ST_BLOCK_END, 1);
    }
    return rc;
}

static int step(struct nettrace_private *pr, const uint8_t *u, size_t n)
{
    switch (pr->state) {
    case ST_HEADER:
        return step_header(pr, u);
    case ST_HEADER_FS:
        return step_header_fs(pr, u);
    case ST_V6_VERSION:
        return step_v6_version(pr, u);
    case ST_V6_BLOCK:
        return step_v6_block(pr, u);
    case ST_OBJ_TAG:
        return step_obj_tag(pr, u);
    case ST_OBJ_TYPE:
        return step_obj_type(pr, u);
    case ST_OBJ_NAME:
        return step_obj_name(pr, u, n);
    case ST_TRACE_BODY:
        return step_trace_body(pr, u);
    case ST_BLOCK_SIZE:
        return step_block_size(pr, u);
    case ST_BLOCK_PAD:
        return step_block_pad(pr, u, n);
    case ST_BLOCK_BODY:
        return step_block_body(pr, u, n);
    case ST_BLOCK_END:
        if (u[0] != TAG_END_OBJECT) {
            return fail(pr, AGENT_E_PROTO, pr->pos, "expected %s's end tag (0x06), got 0x%02x",
                        block_names[pr->kind], u[0]);
        }
        pr->stats.blocks[pr->kind]++;
        expect(pr, ST_OBJ_TAG, 1);
        if (pr->blk_cb != NULL) {
            /* content points into this feed's bytes or the staging area (see nettrace_feed). */
            pr->blk_cb(pr->blk_cb_ud, &pr->blk_sum);
        }
        return 0;
    case ST_END:
        return fail(pr, AGENT_E_PROTO, pr->pos, "bytes after the end tag");
    case ST_FAILED:
    default:
        return pr->err;
    }
}

/* The staging area for the current unit, grown (within max_block) for block bodies. */
static uint8_t *stage(struct nettrace_private *pr)
{
    if (pr->state != ST_BLOCK_BODY) {
        return pr->small;
    }
    if (pr->blk_cap < pr->need) {
        size_t cap = pr->blk_cap ? pr->blk_cap : 64 * 1024;
        while (cap < pr->need) {
            cap *= 2;
        }
        uint8_t *b = realloc(pr->blk, cap);
        if (b == NULL) {
            return NULL;
        }
        pr->blk = b;
        pr->blk_cap = cap;
    }
    return pr->blk;
}

/* ---- public API ------------------------------------------------------------------------------ */

int nettrace_checker_init(struct nettrace_checker *ck, const struct nettrace_options *opt)
{
    struct nettrace_private *pr = calloc(1, sizeof(*pr));
    if (pr == NULL) {
        ck->priv = NULL;
        return -ENOMEM;
    }
    if (opt != NULL) {
        pr->opt = *opt;
    }
    if (pr->opt.max_block == 0) {
        pr->opt.max_block = NETTRACE_DEFAULT_MAX_BLOCK;
    }
    if (pr->opt.max_metadata == 0) {
        pr->opt.max_metadata = NETTRACE_DEFAULT_MAX_METADATA;
    }
    expect(pr, ST_HEADER, 12);
    ck->priv = pr;
    return 0;
}

void nettrace_checker_fini(struct nettrace_checker *ck)
{
    if (ck == NULL || ck->priv == NULL) {
        return;
    }
    struct nettrace_private *pr = ck->priv;
    free(pr->blk);
    free(pr->md);
    free(pr->md_index);
    free(pr->arena);
    free(pr->ranges);
    free(pr->stk_bytes);
    free(pr->stk_index);
    free(pr->labels);
    free(pr->threads);
    free(pr);
    ck->priv = NULL;
}

void nettrace_set_metadata_cb(struct nettrace_checker *ck, nettrace_metadata_def_cb cb, void *ud)
{
    if (ck->priv != NULL) {
        ck->priv->md_cb = cb;
        ck->priv->md_cb_ud = ud;
    }
}

void nettrace_set_block_cb(struct nettrace_checker *ck, nettrace_block_cb cb, void *ud)
{
    if (ck->priv != NULL) {
        ck->priv->blk_cb = cb;
        ck->priv->blk_cb_ud = ud;
    }
}

void nettrace_set_event_cb(struct nettrace_checker *ck, nettrace_event_cb cb, void *ud)
{
    if (ck->priv != NULL) {
        ck->priv->cb = cb;
        ck->priv->cb_ud = ud;
    }
}

int nettrace_feed(struct nettrace_checker *ck, const uint8_t *p, size_t n)
{
    struct nettrace_private *pr = ck->priv;
    if (pr == NULL || pr->finished) {
        return AGENT_E_INVAL;
    }
    if (pr->state == ST_FAILED) {
        return pr->err;
    }
    for (;;) {
        const uint8_t *unit;
        /* The block callback hands over a block's content when its end tag has been checked: a
         * body is checked in place only if that tag is in these bytes too, else it is staged. */
        bool keep_body = pr->blk_cb != NULL && pr->state == ST_BLOCK_BODY && !pr->v6;
        if (pr->have == 0 && n >= pr->need && !(keep_body && n == pr->need)) {
            /* The whole unit is in the caller's bytes: check it in place. */
            unit = p;
            p += pr->need;
            n -= pr->need;
        } else if (n == 0) {
            return 0;
        } else {
            uint8_t *st = stage(pr);
            if (st == NULL) {
                return fail_nomem(pr, pr->pos);
            }
            size_t take = pr->need - pr->have < n ? pr->need - pr->have : n;
            memcpy(st + pr->have, p, take);
            pr->have += take;
            p += take;
            n -= take;
            if (pr->have < pr->need) {
                return 0;
            }
            unit = st;
        }
        size_t len = pr->need;
        int rc = step(pr, unit, len);
        if (rc < 0) {
            return rc;
        }
        pr->have = 0;
        pr->pos += len;
        pr->stats.bytes = pr->pos;
    }
}

enum nettrace_verdict nettrace_status(const struct nettrace_checker *ck)
{
    const struct nettrace_private *pr = ck->priv;
    if (pr == NULL || pr->state == ST_FAILED) {
        return NETTRACE_INVALID;
    }
    return pr->state == ST_END ? NETTRACE_COMPLETE : NETTRACE_TRUNCATED;
}

enum nettrace_verdict nettrace_finish(struct nettrace_checker *ck)
{
    if (ck->priv != NULL) {
        ck->priv->finished = true;
    }
    return nettrace_status(ck);
}

const char *nettrace_error(const struct nettrace_checker *ck, uint64_t *offset)
{
    const struct nettrace_private *pr = ck->priv;
    if (pr == NULL) {
        return "checker not initialized";
    }
    if (pr->state != ST_FAILED) {
        return NULL;
    }
    if (offset != NULL) {
        *offset = pr->err_off;
    }
    return pr->msg;
}

void nettrace_error_line(const struct nettrace_checker *ck, int rc, char *out, size_t cap)
{
    uint64_t off = 0;
    const char *why = nettrace_error(ck, &off);
    int len = snprintf(out, cap, "nettrace at offset %llu: %s", (unsigned long long)off,
                       why != NULL ? why : agent_strerror(rc));
    if (len < 0 && cap > 0) {
        out[0] = '\0';
    }
}

void nettrace_sticky_set(struct nettrace_sticky *s, int err, const char *msg)
{
    if (s->err == 0) {
        s->err = err;
        int len = snprintf(s->msg, sizeof(s->msg), "%s", msg);
        if (len < 0) {
            s->msg[0] = '\0';
        }
    }
}

int nettrace_sticky_feed(struct nettrace_checker *ck, struct nettrace_sticky *s, const uint8_t *p,
                         size_t n)
{
    if (s->err != 0) {
        return s->err;
    }
    int rc = nettrace_feed(ck, p, n);
    if (s->err != 0) {
        return s->err;
    }
    if (rc < 0) {
        nettrace_error_line(ck, rc, s->msg, sizeof(s->msg));
        s->err = rc;
    }
    return rc;
}

const char *nettrace_verdict_name(enum nettrace_verdict v)
{
    switch (v) {
    case NETTRACE_COMPLETE:
        return "COMPLETE";
    case NETTRACE_TRUNCATED:
        return "TRUNCATED";
    case NETTRACE_INVALID:
        return "INVALID";
    default:
        return "UNKNOWN";
    }
}

const struct nettrace_stats *nettrace_get_stats(const struct nettrace_checker *ck)
{
    static const struct nettrace_stats none;
    return ck->priv != NULL ? &ck->priv->stats : &none;
}

int nettrace_unix_ns(const struct nettrace_trace_info *ti, int64_t ts, int64_t *out)
{
    const uint16_t *t = ti->sync_time_utc; /* year, month, dayOfWeek, day, h, m, s, ms */
    int64_t freq = ti->qpc_frequency;
    if (freq <= 0 || t[1] < 1 || t[1] > 12 || t[3] < 1 || t[3] > 31 || t[4] > 23 || t[5] > 59 ||
        t[6] > 60 || t[7] > 999) {
        return AGENT_E_INVAL;
    }
    int64_t base = civil_days(t[0], t[1], t[3]) * 86400 + t[4] * 3600ll + t[5] * 60ll + t[6];
    int64_t delta;
    if (__builtin_sub_overflow(ts, ti->sync_time_qpc, &delta)) {
        return AGENT_E_INVAL;
    }
    int64_t dsec = delta / freq;
    int64_t rem = delta % freq; /* |rem| < freq */
    int64_t dns = freq <= 9000000000ll ? rem * 1000000000ll / freq
                                       : (int64_t)((double)rem * 1e9 / (double)freq);
    int64_t secs, ns;
    if (__builtin_add_overflow(base, dsec, &secs) ||
        __builtin_mul_overflow(secs, 1000000000ll, &ns) ||
        __builtin_add_overflow(ns, (int64_t)t[7] * 1000000 + dns, out)) {
        return AGENT_E_INVAL;
    }
    return 0;
}

int nettrace_unix_ms(const struct nettrace_trace_info *ti, int64_t ts, int64_t *out)
{
    int64_t ns;
    int rc = nettrace_unix_ns(ti, ts, &ns);
    if (rc == 0) {
        *out = ns / 1000000 - (ns % 1000000 < 0 ? 1 : 0);
    }
    return rc;
}

int nettrace_event_unix_ms(const struct nettrace_checker *ck, int64_t ts, int64_t *out)
{
    const struct nettrace_private *pr = ck->priv;
    if (pr == NULL || !pr->trace_seen) {
        return AGENT_E_NOTFOUND;
    }
    return nettrace_unix_ms(&pr->info, ts, out);
}

int nettrace_trace_info(const struct nettrace_checker *ck, struct nettrace_trace_info *out)
{
    const struct nettrace_private *pr = ck->priv;
    if (pr == NULL || !pr->trace_seen) {
        return AGENT_E_NOTFOUND;
    }
    *out = pr->info;
    return 0;
}

uint64_t nettrace_count(const struct nettrace_checker *ck, const char *provider, uint32_t event_id)
{
    const struct nettrace_private *pr = ck->priv;
    uint64_t total = 0;
    if (pr == NULL) {
        return 0;
    }
    for (size_t k = 0; k < pr->md_len; k++) {
        const struct md_rec *md = &pr->md[k];
        if (md->event_id == event_id && strcmp(pr->arena + md->provider, provider) == 0) {
            total += md->events;
        }
    }
    return total;
}

uint64_t nettrace_count_named(const struct nettrace_checker *ck, const char *provider,
                              const char *event_name)
{
    const struct nettrace_private *pr = ck->priv;
    uint64_t total = 0;
    if (pr == NULL) {
        return 0;
    }
    for (size_t k = 0; k < pr->md_len; k++) {
        const struct md_rec *md = &pr->md[k];
        if (strcmp(pr->arena + md->name, event_name) == 0 &&
            strcmp(pr->arena + md->provider, provider) == 0) {
            total += md->events;
        }
    }
    return total;
}

uint64_t nettrace_count_provider(const struct nettrace_checker *ck, const char *provider)
{
    const struct nettrace_private *pr = ck->priv;
    uint64_t total = 0;
    if (pr == NULL) {
        return 0;
    }
    for (size_t k = 0; k < pr->md_len; k++) {
        if (strcmp(pr->arena + pr->md[k].provider, provider) == 0) {
            total += pr->md[k].events;
        }
    }
    return total;
}

void nettrace_foreach_metadata(const struct nettrace_checker *ck, nettrace_metadata_cb cb, void *ud)
{
    const struct nettrace_private *pr = ck->priv;
    if (pr == NULL) {
        return;
    }
    for (size_t k = 0; k < pr->md_len; k++) {
        struct nettrace_metadata m;
        md_public(pr, &pr->md[k], &m);
        cb(ud, &m);
    }
}

bool nettrace_payload_has_utf16(const uint8_t *p, size_t n, const char *needle)
{
    uint8_t enc[2 * 256];
    size_t enc_len;
    if (needle == NULL || needle[0] == '\0' ||
        ev_utf8_to_utf16(needle, enc, sizeof(enc), &enc_len) != 0) {
        return false;
    }
    const uint8_t *pat = enc;
    size_t len = enc_len;
    for (size_t k = 0; k + len <= n; k++) {
        if (p[k] == pat[0] && memcmp(p + k, pat, len) == 0) {
            return true;
        }
    }
    return false;
}
