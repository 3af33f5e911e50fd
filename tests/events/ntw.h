/* SPDX-License-Identifier: MIT */
#ifndef TESTS_EVENTS_NTW_H
#define TESTS_EVENTS_NTW_H

/*
 * A nettrace V4 writer for the events tests (docs/nettrace.md §2.1-4): the preamble with a fixed
 * Trace object, event blobs (uncompressed or header-compressed, with activity ids) collected into
 * blocks, each block written out as an object. Independent of events/: bytes by hand.
 */

#include <stdbool.h>
#include <stdint.h>

#include "wbuf.h"

#define SYNC_QPC 1000000ll
#define QPC_FREQ 1000000000ll /* Trace object: 2025-01-02 03:04:05.678 UTC */

struct nt {
    struct wb out; /* the stream so far */
    struct wb blk; /* the blobs of the block being built */
    uint32_t seq;
    bool compressed;   /* the next blobs get compressed headers */
    bool sorted;       /* the next compressed blob gets the sorted flag (0x40) */
    uint32_t prev_seq; /* the compressed-header state, reset per block */
    int64_t prev_ts;
};

/* Zeroes t and writes the preamble and the Trace object (pointer size 8, pid 42). */
void nt_begin(struct nt *t);
/*
 * One blob into the current block: metadata id md_id (0 for a metadata record, which gets no
 * sequence number), timestamp, activity and related activity ids (guid ids; 0 = zero), payload.
 */
void nt_blob(struct nt *t, uint32_t md_id, int64_t ts, unsigned act, unsigned rel,
             const struct wb *pl);
/* Writes the current blobs as a block named name ("EventBlock", "MetadataBlock"). */
void nt_block(struct nt *t, const char *name, bool compressed);
/* Writes an SPBlock (nettrace.md §3.4) with timestamp ts and no threads. */
void nt_sp(struct nt *t, int64_t ts);

#endif
