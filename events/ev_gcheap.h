/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_GCHEAP_H
#define AGENT_EV_GCHEAP_H

/*
 * A GC heap snapshot from the stream of a heap-dump session, turned into a `.gcdump` file
 * (docs/gcdump.md), or summed up per type (ev_gcheap_type_stats). The session:
 * Microsoft-Windows-DotNETRuntime at Verbose with keywords EV_GCHEAP_KEYWORDS makes the runtime run
 * an induced, blocking gen-2 GC and walk the heap during it (BulkType, GCBulkNode, GCBulkEdge,
 * GCBulkRootEdge, … events). The stream's bytes are fed as they arrive; the graph is built as they
 * are read (no second pass, no stored trace): memory grows with the heap's object and reference
 * counts, never with its bytes.
 *
 * Use: ev_gcheap_new, then ev_gcheap_feed each chunk of the session's stream; once
 * ev_gcheap_complete() is true (the induced GC's GCEnd was read) the caller stops the session
 * and keeps feeding until the stream ends; then ev_gcheap_finish, and ev_gcheap_write to emit
 * the file. ev_gcheap_free releases everything (also at any point before).
 *
 * What dotnet-gcdump writes from the same stream (DotNetHeapDumpGraphReader, MemoryGraph), byte
 * for byte but for CreationTool: the same types in the same order (names cleaned up, size
 * classes, module names from the module load and rundown events, whichever comes first), the
 * same node numbers (it queues the node events and numbers the roots' targets first; here a node
 * is built as soon as its edges are read, and the numbers are mapped to its order at finish),
 * sizes, children, root tree and record order. Checked on real captures of up to 801,908 nodes
 * (tests/gcdump, tests/events/test_ev_gcheap.c). Where dotnet-gcdump stops at 10M nodes and
 * writes a partial graph, max_nodes here is an error; an RCW (GCBulkRCW, Windows COM) only counts
 * for nodes read after it (dotnet-gcdump applies every RCW of the window).
 *
 * Memory, per object: its address (8 bytes), its record's offset (4), 1.6 to 3.2 address-map
 * slots (4 bytes each, the map at most 5/8 full; 2^24 slots for 9 M nodes), its record (about 4
 * bytes plus 2-3 per reference); nodes waiting for their edges (32 bytes each) and edges read
 * before their node (8) are queued until matched; types, names and the root tree's children
 * besides; from finish on, 8 more for the renumbering. Measured (stats.mem_bytes, vector capacities
 * counted) on the test app's `heap-graph 200000 2 100` (801,908 nodes, a 36 MB stream): 40 bytes
 * per node at the end of the stream, 45 after finish; 32 MB RSS for the whole conversion.
 *
 * Pure: no libuv, no I/O, no globals.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* GC | Type | GCHeapDump | GCHeapCollect | GCHeapAndTypeNames, at level 5 (docs/gcdump.md §1). */
#define EV_GCHEAP_KEYWORDS          0x1980001ULL
#define EV_GCHEAP_LEVEL             5
#define EV_GCHEAP_DEFAULT_MAX_NODES 10000000ULL
/*
 * Type, module and static field names are cut to this many UTF-16 units, the last an ellipsis
 * (U+2026). Not 256: real generic type names are longer (374 in tests/fixtures/events'
 * gcdump-heap capture, ASP.NET's DI types), and dotnet-gcdump keeps them whole.
 */
#define EV_GCHEAP_MAX_NAME 1024
/* The graph's own byte bound when max_bytes is 0: BASE + max_nodes * PER_NODE. */
#define EV_GCHEAP_BYTES_BASE     ((uint64_t)64 << 20)
#define EV_GCHEAP_BYTES_PER_NODE 128u

struct mb_share;

/*
 * Every store of the graph (nodes, records, hash tables, pending nodes and edges, types, names,
 * the root tree, finish's tables) is counted in bytes of capacity and charged to share (when not
 * NULL; else to dotmon's total) before it is allocated; over the share's cap, the total, or
 * max_bytes the feed or finish fails AGENT_E_BUDGET (ev_gcheap_error says which bound).
 */
struct ev_gcheap_limits {
    uint64_t max_nodes; /* 0 = EV_GCHEAP_DEFAULT_MAX_NODES; over it the feed fails AGENT_E_TOOBIG */
    uint64_t max_bytes; /* 0 = EV_GCHEAP_BYTES_BASE + max_nodes * EV_GCHEAP_BYTES_PER_NODE */
    struct mb_share *share; /* borrowed: must outlive the graph (ev_gcheap_free releases it) */
};

struct ev_gcheap_stats {
    uint64_t bytes;      /* stream bytes fed */
    uint64_t events;     /* events read */
    uint64_t nodes;      /* graph nodes (objects, plus referenced-but-undefined and root nodes) */
    uint64_t objects;    /* GCBulkNode entries read */
    uint64_t edges;      /* GCBulkEdge entries read */
    uint64_t roots;      /* root edges read */
    uint64_t types;      /* BulkType entries read */
    uint64_t total_size; /* sum of the objects' sizes */
    uint64_t lost;       /* events the runtime dropped: sequence gaps, or bulk Index gaps */
    uint64_t mem_bytes;  /* memory held by the graph now (what is charged, plus the struct) */
    uint64_t names_cut;  /* names cut to EV_GCHEAP_MAX_NAME */
    /* Type ids on objects that no BulkType described ("UNKNOWN 0x…"), counted by finish: the
     * runtime logs a type once until its Type keyword goes off, so a walk while another session
     * holds that keyword can name few types. */
    uint64_t unnamed_types;
    bool complete; /* the induced gen-2 GC's GCEnd was read */
};

struct ev_gcheap;

/* lim may be NULL (defaults; charges go to dotmon's total). 0, AGENT_E_INVAL or -ENOMEM. */
int ev_gcheap_new(struct ev_gcheap **out, const struct ev_gcheap_limits *lim);
/*
 * The next bytes of the session's nettrace stream. 0, or a negative error once the stream or the
 * heap walk is invalid or over a limit (AGENT_E_TOOBIG: max_nodes; AGENT_E_BUDGET: bytes;
 * -ENOMEM; AGENT_E_PROTO …);
 * later feeds return it again. Bytes after completion are read (rundown, end tag) but change
 * nothing in the graph except module names. After ev_gcheap_finish: AGENT_E_INVAL, and nothing
 * changes.
 */
int ev_gcheap_feed(struct ev_gcheap *g, const uint8_t *p, size_t n);
/* The induced gen-2 GC's GCEnd was read: the snapshot is whole, stop the session. */
bool ev_gcheap_complete(const struct ev_gcheap *g);
/*
 * The stream ended. 0 when the snapshot is whole and ready to write (a valid stream up to here;
 * its end tag is not required once complete), else the error (the feed's, or AGENT_E_TRUNC when
 * the GC never ended). Idempotent.
 */
int ev_gcheap_finish(struct ev_gcheap *g);
/* Why the feed or finish failed, in words ("heap walk: edge stream ran out at node 12"); NULL if
 * none. */
const char *ev_gcheap_error(const struct ev_gcheap *g);

/* A sink for the file's bytes: 0, or a negative error that ends the write and is returned. */
typedef int (*ev_gcheap_write_fn)(void *ud, const uint8_t *p, size_t n);
/*
 * After a successful ev_gcheap_finish: the `.gcdump` (FastSerialization GCHeapDump with its
 * MemoryGraph; docs/gcdump.md §4), CreationTool = creation_tool (UTF-8, e.g. "dotmon"), in chunks
 * of at most 64 KiB. 0, the sink's error, AGENT_E_INVAL (not finished) or -ENOMEM.
 */
int ev_gcheap_write(struct ev_gcheap *g, const char *creation_tool, ev_gcheap_write_fn fn,
                    void *ud);
void ev_gcheap_get_stats(const struct ev_gcheap *g, struct ev_gcheap_stats *out);

/*
 * The snapshot summed per type (GET /gcdump?format=summary): for each type, how many objects the
 * heap walk reported (GCBulkNode entries) and the sum of their sizes. A type's size classes
 * ("System.Byte[] (Bytes > 1K)", docs/gcdump.md §3) count as the type; the root tree's pseudo
 * nodes ("[static vars]", "[local vars]"…) and the CCW nodes are no objects and not counted. So
 * objects and bytes are the stats' objects and total_size.
 */
#define EV_GCHEAP_TOP_MAX 100000u

struct ev_gcheap_type_stat {
    const char *type;   /* UTF-8, cleaned as in the file ("System.Collections.Generic.List<T>") */
    const char *module; /* the module's file name ("System.Private.CoreLib.dll"), "Module(0x…)"
                           when no module event named it, "" for an unknown type */
    uint64_t count;
    uint64_t bytes;
};

struct ev_gcheap_types {
    uint64_t objects; /* every object counted */
    uint64_t bytes;   /* their sizes summed */
    uint64_t types;   /* distinct types among them */
    /* The top types: most bytes first, ties by name (UTF-16 code units, ordinal), then module. */
    struct ev_gcheap_type_stat *top;
    size_t n_top;
    uint64_t omitted_types; /* the types after the top, and their objects and bytes summed */
    uint64_t omitted_count;
    uint64_t omitted_bytes;
    /* Where top's memory is charged: the graph's share (its strings are in the same block). */
    struct mb_share *share;
    size_t charged;
};

/*
 * After a successful ev_gcheap_finish: the summary into *out, keeping the top (1..
 * EV_GCHEAP_TOP_MAX) types. Its tables while it runs are the graph's (charged as the graph); the
 * top it keeps (with its strings) is charged to the graph's share and belongs to *out, which
 * outlives g if need be. 0, AGENT_E_INVAL (not finished, top out of range), AGENT_E_BUDGET,
 * -ENOMEM or AGENT_E_PROTO (a record of the graph cannot be read); *out then holds nothing.
 */
int ev_gcheap_type_stats(struct ev_gcheap *g, size_t top, struct ev_gcheap_types *out);
/* Frees what ev_gcheap_type_stats put into t and gives back its charge; zeroes t. Accepts a zeroed
 * t; may be called twice. */
void ev_gcheap_types_fini(struct ev_gcheap_types *t);
/*
 * t as JSON with a newline: {"pid":…,"objects":…,"heapBytes":…,"typeCount":…,"top":[{"type",
 * "module","count","bytes"},…],"omitted":{"types","count","bytes"}}, to fn in chunks of about
 * 64 KiB (one ends with the entry that reaches it). 0, the sink's error or -ENOMEM.
 */
int ev_gcheap_write_types_json(const struct ev_gcheap_types *t, uint64_t pid, ev_gcheap_write_fn fn,
                               void *ud);

/*
 * The file's primitives (docs/gcdump.md §4), exposed for tests. A MemoryGraph compressed int into
 * out: 1..5 bytes, the shortest that holds v; returns the length.
 */
size_t ev_gcheap_cint_put(uint8_t out[5], int32_t v);
/* One compressed int from p[*i..n): 0 with *i moved past it, or AGENT_E_TRUNC. */
int ev_gcheap_cint_get(const uint8_t *p, size_t n, size_t *i, int32_t *out);
/*
 * A FastSerialization string of the UTF-16 units u[0..n): i32 unit count, then each unit as 1, 2 or
 * 3 bytes (surrogates one by one). Writes to out when not NULL; returns the length either way.
 */
size_t ev_gcheap_string_put(uint8_t *out, const uint16_t *u, size_t n);
/* Accepts NULL. */
void ev_gcheap_free(struct ev_gcheap *g);

#endif
