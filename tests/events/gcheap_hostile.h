/* SPDX-License-Identifier: MIT */
#ifndef TESTS_EVENTS_GCHEAP_HOSTILE_H
#define TESTS_EVENTS_GCHEAP_HOSTILE_H

/*
 * An endless hostile heap-walk stream (issue 28): a valid nettrace preamble and metadata, an
 * induced gen-2 GCStart, then, for ever, one of:
 *   GH_EDGES  GCBulkEdge events of 4,000 edges each and never a node: edges wait for ever;
 *   GH_NODES  GCBulkNode events of 1,500 distinct objects without edges;
 *   GH_NAMES  BulkType events, one type each with a 30,000-character name (distinct type ids);
 *   GH_METHODS MethodLoadVerbose events, each a new method named by 30,000 characters (for the
 *             CPU profile's tables: `dotmon convert --format speedscope`).
 * Used by test_ev_gcheap (fed straight to ev_gcheap) and by tests/tools/gcheap_attack (a fake
 * runtime answering /gcdump's session with it).
 */

#include <stddef.h>
#include <stdint.h>

#include "ntw.h"

enum gh_kind { GH_EDGES, GH_NODES, GH_NAMES, GH_METHODS };

#define GH_NAME_CHARS 30000

struct gh {
    struct nt t;
    enum gh_kind kind;
    uint32_t round; /* events of the kind written */
    size_t at;      /* t.out bytes given out; the rest is pending */
};

/* The preamble, the metadata and the GCStart (into h->t.out). */
void gh_start(struct gh *h, enum gh_kind kind);
/* Up to cap bytes of the stream into buf (a new block is made when none is pending); > 0. */
size_t gh_next(struct gh *h, uint8_t *buf, size_t cap);
void gh_free(struct gh *h);

#endif
