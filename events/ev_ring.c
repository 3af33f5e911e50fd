/* SPDX-License-Identifier: MIT */
#include "ev_ring.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_rd.h"

/*
 * The ring reads the stream through events/nettrace's checker, whose block callback hands over
 * each block object once it is whole and valid (its content, the stack ids and timestamps of its
 * events). Nothing here parses the stream itself: the ring only copies the preamble bytes as they
 * go by and decides, per block, whether to keep, drop or pass it. docs/nettrace.md §9 is the design
 * brief; nettrace.md §3.1 the block layout and its padding rule; nettrace.md §6 the stack regions.
 *
 * Storage: MetadataBlocks in one list (never evicted); the other blocks in a queue of regions, each
 * region a doubly-linked list of its blocks in stream order (a block may leave from the middle:
 * the oldest EventBlock of a region behind its StackBlocks). Each kept block remembers how many
 * MetadataBlocks came before it, so the output interleaves metadata exactly as the input did.
 */

#define TAG_BEGIN_PRIVATE 0x05
#define TAG_NULL          0x01
#define TAG_END_OBJECT    0x06
#define BLOCK_VERSION     2
#define V4_HEADER_LEN     20 /* the int32 after "Nettrace" in a V4/V5 stream; V6 has 0 there */

/* One kept block object. */
struct ring_blk {
    struct ring_blk *next;
    struct ring_blk *prev;
    uint64_t md_before; /* MetadataBlocks fed before this block */
    int64_t min_ts;     /* EventBlock: of its events; SPBlock: its timestamp */
    int64_t max_ts;
    uint32_t events;   /* EventBlock: its events */
    uint32_t stack_lo; /* StackBlock: the ids it defines (0 when none) */
    uint32_t stack_hi;
    uint32_t len;
    uint8_t kind; /* enum nettrace_block_kind */
    uint8_t min_version;
    uint8_t data[]; /* the block's content (blockSize bytes) */
};

/* The kept blocks of one sequence-point region, oldest first. */
struct ring_region {
    struct ring_region *next;
    struct ring_blk *first;
    struct ring_blk *last;
    struct ring_blk *scan; /* no EventBlock of the region before it; NULL: none in the region */
    uint32_t event_blocks; /* EventBlocks kept */
    int64_t max_ts;        /* newest timestamp of any block ever kept in it */
    bool has_ts;
    bool closed; /* its SPBlock (the last block) is kept */
};

/* Where output goes: the caller's callback and the absolute output offset (for the padding). */
struct ring_out {
    ev_ring_write_cb write;
    void *ud;
    uint64_t off;
    bool pause; /* write returned EV_RING_PAUSE: the drain stops after this block */
};

struct ev_ring {
    struct ev_ring_limits lim;
    struct nettrace_checker ck;
    int err;          /* the ring failed: what feed returns */
    int out_err;      /* the trigger's output failed */
    char msg[200];    /* the ring's own failure (a checker failure is read from the checker) */
    bool triggered;   /* pass-through (once draining is over) */
    bool draining;    /* triggered, kept blocks still to write (ev_ring_drain) */
    uint64_t md_done; /* the drain: MetadataBlocks written so far */
    bool finished;    /* the end tag has been written */
    bool pre_written;
    uint8_t pre[NETTRACE_PREAMBLE_SIZE];
    size_t pre_len;
    struct ring_blk *md_head;
    struct ring_blk *md_tail;
    uint64_t md_count;
    struct ring_region *rg_head;
    struct ring_region *rg_tail;
    struct ring_region *open; /* the region still being fed (rg_tail), or NULL */
    /* Stack ids of the current input region whose StackBlock was dropped (their hull). */
    bool dead;
    uint32_t dead_lo;
    uint32_t dead_hi;
    bool have_newest;
    struct ring_out out;
    struct ev_ring_stats st;
};

static const char *const block_names[NETTRACE_BLOCK_KINDS] = {"EventBlock", "MetadataBlock",
                                                              "StackBlock", "SPBlock"};

/* ---- failure and accounting ------------------------------------------------------------------ */

/* The ring fails with err, the checker's message saying why (the first failure stays). */
static int ring_fail_checker(struct ev_ring *r, int err)
{
    if (r->err == 0) {
        r->err = err;
    }
    return r->err;
}

/* The ring fails with err for a reason of its own. */
__attribute__((format(printf, 3, 4))) static int ring_fail(struct ev_ring *r, int err,
                                                           const char *fmt, ...)
{
    if (r->err != 0) {
        return r->err;
    }
    r->err = err;
    va_list ap;
    va_start(ap, fmt);
    int rc = vsnprintf(r->msg, sizeof(r->msg), fmt, ap);
    va_end(ap);
    if (rc < 0) {
        r->msg[0] = '\0';
    }
    return err;
}

static size_t blk_bytes(uint32_t len)
{
    return sizeof(struct ring_blk) + len;
}

static void used_add(struct ev_ring *r, size_t n)
{
    r->st.bytes_used += n;
    if (r->st.bytes_used > r->st.bytes_peak) {
        r->st.bytes_peak = r->st.bytes_used;
    }
}

/* True when n more bytes stay within max_bytes (bytes_used never exceeds it). */
static bool fits(const struct ev_ring *r, size_t n)
{
    return n <= r->lim.max_bytes - r->st.bytes_used;
}

/* The hull of the stack ids dropped in the current input region grows by lo..hi. */
static void mark_dead(struct ev_ring *r, uint32_t lo, uint32_t hi)
{
    if (hi == 0) {
        return; /* a StackBlock that defines no stack */
    }
    if (!r->dead) {
        r->dead = true;
        r->dead_lo = lo;
        r->dead_hi = hi;
        return;
    }
    r->dead_lo = lo < r->dead_lo ? lo : r->dead_lo;
    r->dead_hi = hi > r->dead_hi ? hi : r->dead_hi;
}

/*
 * Whether an EventBlock may use a stack of a dropped StackBlock. Judged on the range of its stack
 * ids against the hull of the dropped ones: exact for the runtime, which numbers stacks 1, 2, ...
 * in each region and drops them oldest first here; at worst a block is dropped that need not be.
 */
static bool dangles(const struct ev_ring *r, uint32_t lo, uint32_t hi)
{
    return r->dead && lo != 0 && lo <= r->dead_hi && hi >= r->dead_lo;
}

/* ---- eviction -------------------------------------------------------------------------------- */

/* The oldest EventBlock of a region, or NULL. */
static struct ring_blk *oldest_event(struct ring_region *rg)
{
    struct ring_blk *b = rg->scan;
    while (b != NULL && b->kind != NETTRACE_BLOCK_EVENT) {
        b = b->next;
    }
    rg->scan = b;
    return b;
}

/* Accounts for a kept block that is dropped, and frees it. */
static void blk_discard(struct ev_ring *r, struct ring_blk *b)
{
    r->st.bytes_used -= blk_bytes(b->len);
    r->st.blocks_kept--;
    r->st.blocks_discarded++;
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        r->st.events_kept -= b->events;
        r->st.events_discarded += b->events;
    }
    free(b);
}

/* Drops one block from the middle of a region. */
static void evict_blk(struct ev_ring *r, struct ring_region *rg, struct ring_blk *b)
{
    if (b->prev != NULL) {
        b->prev->next = b->next;
    } else {
        rg->first = b->next;
    }
    if (b->next != NULL) {
        b->next->prev = b->prev;
    } else {
        rg->last = b->prev;
    }
    if (rg->scan == b) {
        rg->scan = b->next;
    }
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        rg->event_blocks--;
    }
    blk_discard(r, b);
}

/* Drops the oldest region whole. */
static void evict_region(struct ev_ring *r)
{
    struct ring_region *rg = r->rg_head;
    r->rg_head = rg->next;
    if (r->rg_head == NULL) {
        r->rg_tail = NULL;
    }
    if (r->open == rg) {
        r->open = NULL;
    }
    for (struct ring_blk *b = rg->first; b != NULL;) {
        struct ring_blk *next = b->next;
        blk_discard(r, b);
        b = next;
    }
    r->st.bytes_used -= sizeof(*rg);
    r->st.regions_discarded += rg->closed;
    free(rg);
}

/*
 * Frees the oldest thing that may go to make room: a closed region whole; else, in the open region,
 * its oldest EventBlock; else, when stacks (for a MetadataBlock or an SPBlock: the region has no
 * event left to need them), its oldest StackBlock, whose ids become dead for the rest of the input
 * region. False when nothing is left to drop.
 */
static bool evict_one(struct ev_ring *r, bool stacks)
{
    struct ring_region *rg = r->rg_head;
    if (rg == NULL) {
        return false;
    }
    if (rg->closed || (stacks && rg->first == NULL)) {
        evict_region(r); /* (an open region without blocks is only its record) */
        return true;
    }
    struct ring_blk *ev = oldest_event(rg);
    if (ev != NULL) {
        evict_blk(r, rg, ev);
        return true;
    }
    struct ring_blk *stack = rg->first; /* open and without events: StackBlocks only */
    if (!stacks) {
        return false;
    }
    mark_dead(r, stack->stack_lo, stack->stack_hi);
    evict_blk(r, rg, stack);
    return true;
}

/* QPC ticks in max_age_ms, saturated; 0 when unknown. */
static int64_t age_ticks(const struct ev_ring *r)
{
    struct nettrace_trace_info ti;
    if (nettrace_trace_info(&r->ck, &ti) != 0 || ti.qpc_frequency <= 0) {
        return 0;
    }
    uint64_t ms = r->lim.max_age_ms;
    uint64_t f = (uint64_t)ti.qpc_frequency;
    uint64_t whole = ms / 1000;
    if (whole != 0 && f > (uint64_t)INT64_MAX / whole) {
        return INT64_MAX;
    }
    uint64_t t = whole * f;
    uint64_t part = (ms % 1000) * (f / 1000) + (ms % 1000) * (f % 1000) / 1000;
    return part > (uint64_t)INT64_MAX - t ? INT64_MAX : (int64_t)(t + part);
}

/* Drops, oldest first, what lies entirely before newest_seen - max_age (see ev_ring.h). */
static void evict_by_age(struct ev_ring *r)
{
    if (r->lim.max_age_ms == 0 || !r->have_newest) {
        return;
    }
    int64_t age = age_ticks(r);
    int64_t newest = r->st.newest_seen;
    int64_t cutoff = newest < INT64_MIN + age ? INT64_MIN : newest - age;
    for (;;) {
        struct ring_region *rg = r->rg_head;
        if (rg == NULL) {
            return;
        }
        if (rg->closed && (rg->event_blocks == 0 || (rg->has_ts && rg->max_ts < cutoff))) {
            evict_region(r);
            continue;
        }
        struct ring_blk *ev = oldest_event(rg);
        /* An EventBlock without events has no age: it goes with the first older one. */
        int64_t ts = ev != NULL && ev->events > 0 ? ev->max_ts : INT64_MIN;
        if (ev == NULL || ts >= cutoff) {
            return;
        }
        evict_blk(r, rg, ev);
    }
}

/* ---- keeping --------------------------------------------------------------------------------- */

/* A data block the ring does not keep (too big, dangling, or no room at all). */
static void drop_incoming(struct ev_ring *r, const struct nettrace_block *b)
{
    r->st.blocks_discarded++;
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        r->st.events_discarded += b->events;
    } else if (b->kind == NETTRACE_BLOCK_STACK) {
        mark_dead(r, b->min_stack_id, b->max_stack_id);
    }
    /* An SPBlock is dropped only once everything was evicted (the ring holds no region): the next
     * region starts on a clean slate, as it would after the SPBlock. */
}

static struct ring_blk *blk_new(const struct ev_ring *r, const struct nettrace_block *b)
{
    struct ring_blk *k = malloc(blk_bytes(b->len));
    if (k == NULL) {
        return NULL;
    }
    memset(k, 0, sizeof(*k));
    k->md_before = r->md_count;
    k->kind = (uint8_t)b->kind;
    k->min_version = (uint8_t)b->min_version; /* 0..2: the checker accepts no other */
    k->events = b->kind == NETTRACE_BLOCK_EVENT ? b->events : 0;
    k->min_ts = b->min_timestamp;
    k->max_ts = b->max_timestamp;
    k->stack_lo = b->kind == NETTRACE_BLOCK_STACK ? b->min_stack_id : 0;
    k->stack_hi = b->kind == NETTRACE_BLOCK_STACK ? b->max_stack_id : 0;
    k->len = b->len;
    memcpy(k->data, b->content, b->len);
    return k;
}

/* Appends a data block to the open region (opened when needed; room was made for it). */
static int keep_data(struct ev_ring *r, struct ring_blk *k)
{
    struct ring_region *rg = r->open;
    if (rg == NULL) {
        rg = calloc(1, sizeof(*rg));
        if (rg == NULL) {
            return -ENOMEM;
        }
        if (r->rg_tail != NULL) {
            r->rg_tail->next = rg;
        } else {
            r->rg_head = rg;
        }
        r->rg_tail = rg;
        r->open = rg;
        used_add(r, sizeof(*rg));
    }
    k->prev = rg->last;
    if (rg->last != NULL) {
        rg->last->next = k;
    } else {
        rg->first = k;
    }
    rg->last = k;
    if (rg->scan == NULL) {
        rg->scan = k;
    }
    bool timed = k->kind == NETTRACE_BLOCK_SP || (k->kind == NETTRACE_BLOCK_EVENT && k->events > 0);
    if (timed && (!rg->has_ts || k->max_ts > rg->max_ts)) {
        rg->max_ts = k->max_ts;
        rg->has_ts = true;
    }
    if (k->kind == NETTRACE_BLOCK_EVENT) {
        rg->event_blocks++;
        r->st.events_kept += k->events;
    } else if (k->kind == NETTRACE_BLOCK_SP) {
        rg->closed = true;
        r->open = NULL;
    }
    r->st.blocks_kept++;
    return 0;
}

static int keep(struct ev_ring *r, const struct nettrace_block *b)
{
    struct ring_blk *k = blk_new(r, b);
    if (k == NULL) {
        return -ENOMEM;
    }
    if (b->kind == NETTRACE_BLOCK_METADATA) {
        if (r->md_tail != NULL) {
            r->md_tail->next = k;
        } else {
            r->md_head = k;
        }
        r->md_tail = k;
        r->md_count++;
        r->st.metadata_blocks++;
        r->st.metadata_bytes += blk_bytes(b->len);
    } else if (keep_data(r, k) != 0) {
        free(k);
        return -ENOMEM;
    }
    used_add(r, blk_bytes(b->len));
    return 0;
}

static int metadata_over_cap(struct ev_ring *r, const struct nettrace_block *b)
{
    return ring_fail(r, AGENT_E_TOOBIG,
                     "ring: the preamble and metadata (%llu bytes with the MetadataBlock of %u "
                     "bytes at offset %llu) do not fit in max_bytes (%zu)",
                     (unsigned long long)r->st.bytes_used + blk_bytes(b->len), b->len,
                     (unsigned long long)b->offset, r->lim.max_bytes);
}

/*
 * Keeps one block before the trigger, making room by evicting oldest first (ev_ring.h). An
 * EventBlock or a StackBlock never pushes out a StackBlock of the open region: a dropped stack
 * takes with it every later event of the region that uses it, so the newcomer is dropped instead
 * when closed regions and older events do not make room. An EventBlock that uses a dropped stack is
 * dropped; a MetadataBlock that cannot fit even in an emptied ring fails the ring.
 */
static int admit(struct ev_ring *r, const struct nettrace_block *b)
{
    bool data = b->kind != NETTRACE_BLOCK_METADATA;
    bool event = b->kind == NETTRACE_BLOCK_EVENT;
    if (event && dangles(r, b->min_stack_id, b->max_stack_id)) {
        drop_incoming(r, b);
        return 0;
    }
    size_t need = blk_bytes(b->len);
    /* What stays held when everything that may go has gone: no use evicting for a block larger
     * than the rest of the cap. An SPBlock always takes the long way (its region must go first). */
    size_t floor = NETTRACE_PREAMBLE_SIZE + r->st.metadata_bytes;
    floor += data ? sizeof(struct ring_region) : 0;
    bool never = floor > r->lim.max_bytes || need > r->lim.max_bytes - floor;
    if (b->kind != NETTRACE_BLOCK_SP && never) {
        if (!data) {
            return metadata_over_cap(r, b);
        }
        drop_incoming(r, b);
        return 0;
    }
    for (;;) {
        size_t region = data && r->open == NULL ? sizeof(struct ring_region) : 0;
        if (fits(r, need + region)) {
            return keep(r, b);
        }
        if (!evict_one(r, b->kind == NETTRACE_BLOCK_METADATA || b->kind == NETTRACE_BLOCK_SP)) {
            if (!data) {
                return metadata_over_cap(r, b);
            }
            drop_incoming(r, b);
            return 0;
        }
    }
}

/* ---- output ---------------------------------------------------------------------------------- */

static void put_u32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static int out_put(struct ring_out *o, const uint8_t *p, size_t n)
{
    int rc = o->write(o->ud, p, n);
    if (rc < 0) {
        return rc;
    }
    if (rc == EV_RING_PAUSE) {
        o->pause = true;
    }
    o->off += n;
    return 0;
}

/*
 * One block object (nettrace.md §2.2, §3): the object and type headers as the runtime writes them
 * (version 2, the block's own minimum reader version), blockSize, zero padding up to the next
 * multiple of 4 of the OUTPUT offset, the content unchanged, the end tag.
 */
static int out_block(struct ring_out *o, uint8_t kind, uint8_t min_version, const uint8_t *content,
                     uint32_t len)
{
    const char *name = block_names[kind];
    size_t name_len = strlen(name);
    uint8_t h[64];
    size_t k = 0;
    h[k++] = TAG_BEGIN_PRIVATE;
    h[k++] = TAG_BEGIN_PRIVATE;
    h[k++] = TAG_NULL;
    put_u32(h + k, BLOCK_VERSION);
    put_u32(h + k + 4, min_version);
    put_u32(h + k + 8, (uint32_t)name_len);
    k += 12;
    for (size_t i = 0; i < name_len; i++) {
        h[k++] = (uint8_t)name[i];
    }
    h[k++] = TAG_END_OBJECT;
    put_u32(h + k, len);
    k += 4;
    size_t pad = (size_t)((4 - (o->off + k) % 4) % 4);
    memset(h + k, 0, pad);
    k += pad;
    int rc = out_put(o, h, k);
    if (rc == 0) {
        rc = out_put(o, content, len);
    }
    if (rc == 0) {
        static const uint8_t end = TAG_END_OBJECT;
        rc = out_put(o, &end, 1);
    }
    return rc;
}

/* The preamble has been fed whole and checked, and it is V4/V5's. */
static bool preamble_ready(const struct ev_ring *r)
{
    struct nettrace_trace_info ti;
    return r->pre_len == NETTRACE_PREAMBLE_SIZE && ev_load_u32(r->pre + 8) == V4_HEADER_LEN &&
           nettrace_trace_info(&r->ck, &ti) == 0;
}

/* The metadata blocks and kept blocks, in stream order. */
static int out_kept(const struct ev_ring *r, struct ring_out *o)
{
    const struct ring_blk *md = r->md_head;
    uint64_t md_done = 0;
    int rc = 0;
    for (const struct ring_region *rg = r->rg_head; rg != NULL && rc == 0; rg = rg->next) {
        for (const struct ring_blk *b = rg->first; b != NULL && rc == 0; b = b->next) {
            for (; md != NULL && md_done < b->md_before && rc == 0; md = md->next, md_done++) {
                rc = out_block(o, md->kind, md->min_version, md->data, md->len);
            }
            if (rc == 0) {
                rc = out_block(o, b->kind, b->min_version, b->data, b->len);
            }
        }
    }
    for (; md != NULL && rc == 0; md = md->next) {
        rc = out_block(o, md->kind, md->min_version, md->data, md->len);
    }
    return rc;
}

static int out_end(struct ring_out *o)
{
    static const uint8_t end = TAG_NULL;
    return out_put(o, &end, 1);
}

/* The trigger's output: the preamble, once. */
static int out_preamble(struct ev_ring *r)
{
    int rc = out_put(&r->out, r->pre, sizeof(r->pre));
    r->pre_written = rc == 0;
    return rc;
}

/* The trigger's output failed: so does the ring (what was written stays a valid prefix). */
static int out_failed(struct ev_ring *r, int rc)
{
    r->out_err = rc;
    return ring_fail(r, rc, "ring: writing the trace failed: %s", agent_strerror(rc));
}

/* Frees every kept block (after the trigger wrote them). */
static void free_blocks(struct ev_ring *r)
{
    while (r->rg_head != NULL) {
        struct ring_region *rg = r->rg_head;
        r->rg_head = rg->next;
        for (struct ring_blk *b = rg->first; b != NULL;) {
            struct ring_blk *next = b->next;
            free(b);
            b = next;
        }
        free(rg);
    }
    for (struct ring_blk *b = r->md_head; b != NULL;) {
        struct ring_blk *next = b->next;
        free(b);
        b = next;
    }
    r->md_head = r->md_tail = NULL;
    r->rg_tail = r->open = NULL;
    r->st.bytes_used = NETTRACE_PREAMBLE_SIZE;
    r->st.metadata_bytes = 0;
    r->st.blocks_kept = 0;
}

/*
 * The drain's next block, taken off the ring with its memory accounted for: the next MetadataBlock
 * when it came before the next data block (or none is left), else the oldest data block. Empty
 * region records go on the way. NULL when nothing is left. The caller writes and frees it.
 */
static struct ring_blk *drain_next(struct ev_ring *r)
{
    struct ring_region *rg = r->rg_head;
    while (rg != NULL && rg->first == NULL) {
        r->rg_head = rg->next;
        if (r->rg_head == NULL) {
            r->rg_tail = NULL;
        }
        if (r->open == rg) {
            r->open = NULL;
        }
        r->st.bytes_used -= sizeof(*rg);
        free(rg);
        rg = r->rg_head;
    }
    struct ring_blk *b = rg != NULL ? rg->first : NULL;
    if (r->md_head != NULL && (b == NULL || r->md_done < b->md_before)) {
        struct ring_blk *md = r->md_head;
        r->md_head = md->next;
        if (r->md_head == NULL) {
            r->md_tail = NULL;
        }
        r->md_done++;
        r->st.metadata_bytes -= blk_bytes(md->len);
        r->st.bytes_used -= blk_bytes(md->len);
        return md;
    }
    if (b == NULL) {
        return NULL;
    }
    rg->first = b->next;
    if (b->next != NULL) {
        b->next->prev = NULL;
    } else {
        rg->last = NULL;
    }
    if (rg->scan == b) {
        rg->scan = b->next;
    }
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        rg->event_blocks--;
        r->st.events_kept -= b->events;
    }
    r->st.blocks_kept--;
    r->st.bytes_used -= blk_bytes(b->len);
    return b;
}

/*
 * Writes kept blocks, oldest first, each freed once written, until none is left (0: pass-through
 * from now on), or the writer asked for a pause (EV_RING_PAUSED), or it failed (the ring fails;
 * the blocks not written count as discarded).
 */
static int drain(struct ev_ring *r)
{
    r->out.pause = false;
    int rc = 0;
    while (rc == 0 && !r->out.pause) {
        struct ring_blk *b = drain_next(r);
        if (b == NULL) {
            r->draining = false;
            free_blocks(r);
            return 0;
        }
        uint32_t events = b->kind == NETTRACE_BLOCK_EVENT ? b->events : 0;
        rc = out_block(&r->out, b->kind, b->min_version, b->data, b->len);
        free(b);
        if (rc == 0) {
            r->st.events_written += events;
        } else {
            r->st.events_discarded += events;
        }
    }
    if (rc < 0) {
        r->draining = false;
        r->st.events_discarded += r->st.events_kept;
        r->st.events_kept = 0;
        free_blocks(r);
        return out_failed(r, rc);
    }
    return EV_RING_PAUSED;
}

/* After the trigger: a block straight to the output (an EventBlock with a dropped stack aside). */
static int pass_block(struct ev_ring *r, const struct nettrace_block *b)
{
    if (b->kind == NETTRACE_BLOCK_EVENT && dangles(r, b->min_stack_id, b->max_stack_id)) {
        r->st.blocks_discarded++;
        r->st.events_discarded += b->events;
        return 0;
    }
    int rc = r->pre_written ? 0 : out_preamble(r);
    if (rc == 0) {
        rc = out_block(&r->out, (uint8_t)b->kind, (uint8_t)b->min_version, b->content, b->len);
    }
    if (rc < 0) {
        return out_failed(r, rc);
    }
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        r->st.events_written += b->events;
    }
    return 0;
}

/* ---- the checker's block callback ------------------------------------------------------------ */

static void ring_on_block(void *ud, const struct nettrace_block *b)
{
    struct ev_ring *r = ud;
    if (r->err != 0) {
        return;
    }
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        r->st.events_fed += b->events;
    }
    bool timed = b->kind == NETTRACE_BLOCK_SP || (b->kind == NETTRACE_BLOCK_EVENT && b->events > 0);
    if (timed && (!r->have_newest || b->max_timestamp > r->st.newest_seen)) {
        r->st.newest_seen = b->max_timestamp;
        r->have_newest = true;
    }
    int rc = r->triggered ? pass_block(r, b) : admit(r, b);
    if (rc < 0) {
        if (rc == -ENOMEM) {
            (void)ring_fail(r, rc, "ring: out of memory");
        }
        (void)ring_fail_checker(r, rc); /* the other failures have set their message */
        return;
    }
    if (b->kind == NETTRACE_BLOCK_SP) {
        r->dead = false; /* stack ids start over in the next region (nettrace.md §6) */
    }
    if (!r->triggered) {
        evict_by_age(r);
    }
}

/* ---- public API ------------------------------------------------------------------------------ */

int ev_ring_new(struct ev_ring **out, const struct ev_ring_limits *lim)
{
    if (out == NULL || lim == NULL || lim->max_bytes <= NETTRACE_PREAMBLE_SIZE) {
        return AGENT_E_INVAL;
    }
    struct ev_ring *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return -ENOMEM;
    }
    r->lim = *lim;
    struct nettrace_options opt = {
        .max_block = lim->max_block,
        .max_metadata = lim->max_metadata,
        .flags = 0,
    };
    int rc = nettrace_checker_init(&r->ck, &opt);
    if (rc != 0) {
        free(r);
        return rc;
    }
    nettrace_set_block_cb(&r->ck, ring_on_block, r);
    r->st.bytes_used = NETTRACE_PREAMBLE_SIZE;
    r->st.bytes_peak = NETTRACE_PREAMBLE_SIZE;
    *out = r;
    return 0;
}

void ev_ring_free(struct ev_ring *r)
{
    if (r == NULL) {
        return;
    }
    free_blocks(r);
    nettrace_checker_fini(&r->ck);
    free(r);
}

int ev_ring_feed(struct ev_ring *r, const uint8_t *p, size_t n)
{
    if (r == NULL || r->finished) {
        return AGENT_E_INVAL;
    }
    if (r->err != 0) {
        return r->err;
    }
    if (r->draining) {
        return AGENT_E_INVAL; /* the caller keeps the bytes until the drain is over */
    }
    if (r->pre_len < sizeof(r->pre) && n > 0) {
        size_t take = sizeof(r->pre) - r->pre_len < n ? sizeof(r->pre) - r->pre_len : n;
        memcpy(r->pre + r->pre_len, p, take);
        r->pre_len += take;
    }
    int rc = nettrace_feed(&r->ck, p, n);
    if (r->err != 0) {
        return r->err; /* the ring failed in a callback */
    }
    if (rc < 0) {
        return ring_fail_checker(r, rc);
    }
    if (r->pre_len >= 12 && ev_load_u32(r->pre + 8) != V4_HEADER_LEN) {
        return ring_fail(r, AGENT_E_PROTO, "ring: a NetTrace V6 stream (a ring holds V4/V5 only)");
    }
    return 0;
}

/* Whether the ring may write a trace now (trigger or snapshot): 0 or the error to return. */
static int may_write(const struct ev_ring *r, ev_ring_write_cb write)
{
    if (r == NULL || write == NULL) {
        return AGENT_E_INVAL;
    }
    if (r->err != 0) {
        return r->err;
    }
    return r->triggered ? AGENT_E_INVAL : 0;
}

int ev_ring_trigger(struct ev_ring *r, ev_ring_write_cb write, void *ud)
{
    int rc = may_write(r, write);
    if (rc != 0) {
        return rc;
    }
    r->triggered = true;
    r->out.write = write;
    r->out.ud = ud;
    r->out.off = 0;
    if (!preamble_ready(r)) {
        /* Nothing whole was fed: nothing kept either; the preamble goes out when it is. */
        r->st.events_discarded += r->st.events_kept;
        r->st.events_kept = 0;
        free_blocks(r);
        return 0;
    }
    rc = out_preamble(r);
    if (rc < 0) {
        r->st.events_discarded += r->st.events_kept;
        r->st.events_kept = 0;
        free_blocks(r);
        return out_failed(r, rc);
    }
    r->draining = true;
    r->md_done = 0;
    return drain(r);
}

int ev_ring_drain(struct ev_ring *r)
{
    if (r == NULL) {
        return AGENT_E_INVAL;
    }
    if (r->err != 0) {
        return r->err;
    }
    return r->draining ? drain(r) : 0;
}

int ev_ring_finish(struct ev_ring *r, bool cut_short)
{
    if (r == NULL) {
        return AGENT_E_INVAL;
    }
    if (r->finished) {
        return 0;
    }
    if (!r->triggered || r->draining) {
        return AGENT_E_INVAL;
    }
    if (r->out_err != 0) {
        return r->out_err;
    }
    bool complete = r->err == 0 && nettrace_status(&r->ck) == NETTRACE_COMPLETE;
    if (!complete && !cut_short) {
        return AGENT_E_TRUNC;
    }
    if (!r->pre_written && !preamble_ready(r)) {
        return AGENT_E_TRUNC;
    }
    int rc = r->pre_written ? 0 : out_preamble(r);
    if (rc == 0) {
        rc = out_end(&r->out);
    }
    if (rc < 0) {
        return out_failed(r, rc);
    }
    r->finished = true;
    return 0;
}

int ev_ring_snapshot(struct ev_ring *r, ev_ring_write_cb write, void *ud)
{
    int rc = may_write(r, write);
    if (rc != 0) {
        return rc;
    }
    if (!preamble_ready(r)) {
        return AGENT_E_NOTFOUND;
    }
    struct ring_out o = {write, ud, 0, false};
    rc = out_put(&o, r->pre, sizeof(r->pre));
    if (rc == 0) {
        rc = out_kept(r, &o);
    }
    if (rc == 0) {
        rc = out_end(&o);
    }
    return rc;
}

enum ev_ring_state ev_ring_get_state(const struct ev_ring *r)
{
    if (r->finished) {
        return EV_RING_FINISHED;
    }
    if (r->err != 0) {
        return EV_RING_FAILED;
    }
    if (r->draining) {
        return EV_RING_DRAINING;
    }
    return r->triggered ? EV_RING_PASSING : EV_RING_BUFFERING;
}

void ev_ring_get_stats(const struct ev_ring *r, struct ev_ring_stats *out)
{
    *out = r->st;
    out->oldest_kept = 0;
    out->newest_kept = 0;
    bool any = false;
    for (const struct ring_region *rg = r->rg_head; rg != NULL; rg = rg->next) {
        for (const struct ring_blk *b = rg->first; b != NULL; b = b->next) {
            if (b->kind != NETTRACE_BLOCK_EVENT || b->events == 0) {
                continue;
            }
            if (!any || b->min_ts < out->oldest_kept) {
                out->oldest_kept = b->min_ts;
            }
            if (!any || b->max_ts > out->newest_kept) {
                out->newest_kept = b->max_ts;
            }
            any = true;
        }
    }
    out->input_complete = nettrace_status(&r->ck) == NETTRACE_COMPLETE;
}

int ev_ring_trace_info(const struct ev_ring *r, struct nettrace_trace_info *out)
{
    return nettrace_trace_info(&r->ck, out);
}

void ev_ring_error(const struct ev_ring *r, char *out, size_t cap)
{
    if (cap == 0) {
        return;
    }
    out[0] = '\0';
    if (r->err == 0) {
        return;
    }
    if (r->msg[0] != '\0') {
        (void)snprintf(out, cap, "%s", r->msg);
        return;
    }
    nettrace_error_line(&r->ck, r->err, out, cap);
}
