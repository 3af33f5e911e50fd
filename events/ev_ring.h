/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_RING_H
#define AGENT_EV_RING_H

/*
 * A continuous session's nettrace V4/V5 stream kept in memory as a ring of whole blocks, written
 * out as a valid nettrace on a trigger (docs/nettrace.md §9). Pure: no libuv, no I/O, no globals;
 * the caller feeds the session's bytes and does the writing through a callback.
 *
 * The stream is checked as it comes (events/nettrace.h: every block is whole and valid before the
 * ring keeps it or passes it on). The ring holds:
 *  - the preamble (magic, FastSerialization header, Trace object: bytes 0..101) verbatim;
 *  - every MetadataBlock, for the whole session: metadata ids are global in V4/V5 and small, and a
 *    kept event whose definition is missing would be unreadable. They count toward the cap; when
 *    the preamble and the metadata alone no longer fit, the ring fails (AGENT_E_TOOBIG) rather than
 *    write a trace with events it cannot describe;
 *  - EventBlocks, StackBlocks and SPBlocks in stream order, grouped by sequence-point region (the
 *    blocks after one SPBlock up to and including the next: stack ids are scoped to a region,
 *    nettrace.md §6).
 *
 * Eviction, oldest first, whenever a block must fit under max_bytes or is older than max_age:
 *  - a closed region (one whose SPBlock has been kept) goes whole, with its SPBlock;
 *  - in the open region (the one still being fed) the oldest EventBlock goes first. Its
 *    StackBlocks stay: a later event may use any stack of its region. When closed regions and
 *    older events do not make room for a new EventBlock or StackBlock, the newcomer is dropped
 *    rather than an older StackBlock (an old stack is the one most likely in use); only a
 *    MetadataBlock or an SPBlock, once the region has no EventBlock left, pushes out its oldest
 *    StackBlocks. Every event of the current input region that uses a stack id of a dropped
 *    StackBlock is then dropped with its EventBlock (also after a trigger, until the next
 *    SPBlock), so no event ever refers to a stack that is not in the output. (Judged on ranges:
 *    an EventBlock goes when the range of its stack ids meets the range the dropped ones span;
 *    exact when the dropped StackBlocks are consecutive, else at worst a block more goes.);
 *  - by age: while the oldest region is closed and older than the cutoff (its newest timestamp, SP
 *    included, below newest seen − max_age) or has no EventBlock left it goes whole, and while the
 *    oldest region's oldest EventBlock has all its events below the cutoff, that block goes;
 *  - a block that cannot fit even in an emptied ring is dropped itself (counted), except a
 *    MetadataBlock (see above).
 * No SPBlock is dropped while a block of its region is kept, and none is moved: regions never
 * merge and output blocks keep their relative order, with each MetadataBlock still before every
 * kept block that followed it.
 *
 * Memory: max_bytes bounds everything held for blocks: the 102-byte preamble, every kept block's
 * content plus its bookkeeping (sizeof a node), the region records. Beyond that the ring's checker
 * holds at most one block in flight (max_block) and its metadata table (max_metadata records).
 * Allocation happens per kept block, never per event; a block's size is checked by the checker
 * (max_block) and against max_bytes before anything is allocated for it.
 *
 * Output: on ev_ring_trigger the preamble, the metadata blocks and the kept blocks are written
 * through the caller's callback, each block object re-serialized with its padding recomputed for
 * its OUTPUT offset (blockSize, content and the object header copied unchanged, end tag 0x06); the
 * ring then frees its blocks and passes every later block of the stream straight through the
 * same way (new metadata, events, stacks, sequence points, the rundown the runtime sends after
 * StopTracing). ev_ring_finish writes the end tag. When nothing was dropped, trigger + pass-through
 * + finish reproduce the input byte for byte. ev_ring_snapshot writes the same trace with its end
 * tag while the ring keeps running (GET /trace/snapshot).
 *
 * The trigger's output is paced by the writer: a write callback that returns EV_RING_PAUSE has
 * taken its bytes but wants no more for now (an egress store behind, egress_full); the ring stops
 * after the block in hand and the trigger returns EV_RING_PAUSED, the ring DRAINING. The caller
 * calls ev_ring_drain when the writer has room again, until it returns 0. Each kept block is freed
 * as soon as it is written, so the drain holds no more than the ring did, and a full ring never
 * reaches the writer faster than it takes it. While draining, ev_ring_feed refuses the stream's
 * new bytes (AGENT_E_INVAL, the ring does not fail): the caller holds them (api_trace: in its
 * bounded spool) and feeds them once the drain is over. Pass-through and finish write at most a
 * fed chunk's blocks per call and ignore EV_RING_PAUSE (the caller paces what it feeds); a snapshot
 * writes the whole ring in one call and ignores it too.
 *
 * Callbacks run inside the call that writes (trigger, drain, snapshot, finish, and feed once
 * triggered); they must not call into the ring. A write callback's bytes are valid during the call
 * only.
 *
 * Timestamps are the runtime's QPC ticks (the Trace object's sync time and frequency convert them,
 * ev_ring_trace_info); an event written out keeps its true timestamp.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nettrace.h"

struct ev_ring;

struct ev_ring_limits {
    /* The hard cap on memory held for blocks (see above): > NETTRACE_PREAMBLE_SIZE. The caller's
     * RingBufferSizeMB. */
    size_t max_bytes;
    /* PreTriggerSeconds in milliseconds: blocks older than this behind the newest timestamp seen
     * are dropped (converted with the Trace object's QPC frequency). 0 = no age limit. */
    uint64_t max_age_ms;
    uint32_t max_block;    /* largest blockSize accepted; 0 = NETTRACE_DEFAULT_MAX_BLOCK */
    uint32_t max_metadata; /* metadata records accepted; 0 = NETTRACE_DEFAULT_MAX_METADATA */
};

/*
 * Writes p[0..n) to the caller's output; returns 0, EV_RING_PAUSE (taken, but the output is full:
 * see above) or a negative error (e.g. -errno), which stops the writing. p is valid during the
 * call only.
 */
#define EV_RING_PAUSE 1
/* ev_ring_trigger / ev_ring_drain: the writer paused the drain; call ev_ring_drain again later. */
#define EV_RING_PAUSED 1
typedef int (*ev_ring_write_cb)(void *ud, const uint8_t *p, size_t n);

enum ev_ring_state {
    EV_RING_BUFFERING = 0, /* keeping blocks, waiting for a trigger */
    EV_RING_PASSING = 1,   /* triggered: later blocks go straight to the output */
    EV_RING_FINISHED = 2,  /* the end tag has been written */
    EV_RING_FAILED = 3,    /* see ev_ring_error; what was written so far stays a valid prefix */
    EV_RING_DRAINING = 4   /* triggered; kept blocks still to write (ev_ring_drain) */
};

struct ev_ring_stats {
    uint64_t bytes_used;     /* memory held for blocks now (always <= max_bytes) */
    uint64_t bytes_peak;     /* the most bytes_used has been */
    uint64_t metadata_bytes; /* of bytes_used: the MetadataBlocks */
    uint64_t metadata_blocks;
    uint64_t blocks_kept;       /* EventBlocks, StackBlocks and SPBlocks held now */
    uint64_t blocks_discarded;  /* such blocks dropped (evicted, or too big or dangling to keep) */
    uint64_t regions_discarded; /* closed sequence-point regions dropped whole */
    /* events_fed == events_kept + events_discarded + events_written at every step. */
    uint64_t events_fed;       /* events in the EventBlocks fed so far */
    uint64_t events_kept;      /* events in the EventBlocks held now */
    uint64_t events_discarded; /* events in the EventBlocks dropped */
    uint64_t events_written;   /* events written by the trigger and passed through since */
    /* The oldest and newest timestamp of the events held now (QPC ticks); 0 when none. */
    int64_t oldest_kept;
    int64_t newest_kept;
    int64_t newest_seen; /* the newest event or SPBlock timestamp fed so far; 0 when none */
    bool input_complete; /* the input ended with its end tag */
};

/*
 * A new ring in *out (written only on success). 0, AGENT_E_INVAL (no out or lim, max_bytes not
 * above NETTRACE_PREAMBLE_SIZE) or -ENOMEM.
 */
int ev_ring_new(struct ev_ring **out, const struct ev_ring_limits *lim);
/* Frees the ring and every block it holds. NULL is fine. */
void ev_ring_free(struct ev_ring *r);

/*
 * The next n bytes of the session's stream, in any chunking. Keeps, evicts or (once triggered)
 * passes blocks as they complete. Returns 0, or (the ring then fails, and returns it again on
 * every later call): AGENT_E_PROTO (the stream is invalid, or NetTrace V6, which a ring does not
 * hold), AGENT_E_TOOBIG (a checker cap, or the preamble and metadata over max_bytes), -ENOMEM, the
 * write callback's error once triggered; AGENT_E_INVAL after ev_ring_finish, and while DRAINING
 * (nothing taken, the ring goes on).
 */
int ev_ring_feed(struct ev_ring *r, const uint8_t *p, size_t n);

/*
 * The trigger: writes the preamble (as soon as it has been fed), every metadata block and the
 * kept blocks, frees them, and switches to pass-through: from now on ev_ring_feed writes each
 * block through write as it completes. Returns 0, EV_RING_PAUSED (write asked for a pause: the ring
 * is DRAINING, see ev_ring_drain), the ring's error (EV_RING_FAILED: nothing is written),
 * AGENT_E_INVAL (already triggered) or write's error (the ring then fails).
 */
int ev_ring_trigger(struct ev_ring *r, ev_ring_write_cb write, void *ud);
/*
 * DRAINING: writes the next kept blocks through the trigger's write, each freed once written.
 * Returns 0 (every kept block is out: pass-through from now on; also when not draining),
 * EV_RING_PAUSED (write asked for a pause again), the ring's error or write's error (the ring
 * then fails; what was written stays a valid prefix).
 */
int ev_ring_drain(struct ev_ring *r);

/*
 * After a trigger: ends the output with the end tag (0x01) when the input ended with its own, or
 * when cut_short (a live stream stopped early, or one that turned out invalid: the blocks written
 * are whole and valid, so the output is still a COMPLETE trace; a block in flight is left out).
 * Returns 0 (also when already finished), AGENT_E_TRUNC (the input has not ended and !cut_short:
 * nothing written; or no valid preamble was ever fed: there is no trace to end), AGENT_E_INVAL
 * (not triggered, or still draining) or the write callback's error (also a previous one).
 */
int ev_ring_finish(struct ev_ring *r, bool cut_short);

/*
 * Without stopping (GET /trace/snapshot): writes the preamble, the metadata blocks, the kept
 * blocks and the end tag through write; the ring keeps everything and goes on buffering. Returns
 * 0, AGENT_E_NOTFOUND (no valid preamble yet: nothing written), the ring's error (nothing written),
 * AGENT_E_INVAL (triggered) or write's error (which leaves the ring as it was).
 */
int ev_ring_snapshot(struct ev_ring *r, ev_ring_write_cb write, void *ud);

enum ev_ring_state ev_ring_get_state(const struct ev_ring *r);
/* Counters now (oldest_kept walks the kept blocks). */
void ev_ring_get_stats(const struct ev_ring *r, struct ev_ring_stats *out);
/* The Trace object once fed: 0, else AGENT_E_NOTFOUND (out untouched). */
int ev_ring_trace_info(const struct ev_ring *r, struct nettrace_trace_info *out);
/*
 * Why the ring failed, as one line ("nettrace at offset N: ..." for an invalid stream), into
 * out[0..cap), NUL-terminated; "" when it has not failed.
 */
void ev_ring_error(const struct ev_ring *r, char *out, size_t cap);

#endif
