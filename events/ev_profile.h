/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_PROFILE_H
#define AGENT_EV_PROFILE_H

/*
 * GET /profile's kinds other than cpu, summed up from Microsoft-Windows-DotNETRuntime events of one
 * nettrace stream (docs/events.md; layouts of ClrEtwAll.man), with their sites named from the same
 * stream's method events: an ev_profile reads the events its ev_symbols passes on
 * (ev_symbols_set_event_cb), keeps their stacks there, and names them once the rundown is in.
 *
 *  - alloc: 10 GCAllocationTick V2-V4 (AllocationAmount u32, AllocationKind u32, ClrInstanceID
 *    u16, AllocationAmount64 u64, TypeID pointer, TypeName UTF-16z, HeapIndex u32, then Address
 *    pointer from V3, ObjectSize u64 from V4). The runtime fires one every ~100 KB a heap
 *    allocates, for the type that crossed the mark, with the bytes since the last one: types by
 *    the sum of AllocationAmount64 ("sampled bytes") with their tick count, and per type the sites
 *    of those ticks. V0/V1 (no type) count as "?".
 *  - exceptions: 80 ExceptionThrown V1 (ExceptionType UTF-16z, ExceptionMessage UTF-16z,
 *    ExceptionEIP pointer, ExceptionHRESULT u32, ExceptionFlags u16, ClrInstanceID u16): types by
 *    count, the first message seen, per type the throw sites (the event's stack, else the EIP).
 *  - contention: 81 ContentionStart V1/V2 (ContentionFlags u8, ClrInstanceID u16, then LockID and
 *    AssociatedObjectID pointers and LockOwnerThreadID u64 from V2) and 91 ContentionStop (V1 adds
 *    DurationNs double), paired per thread: the wait is DurationNs when given, else the time
 *    between the two events; per site of the start's stack (else the stop's), count, total and
 *    longest wait. A stop without its start (the session began mid-wait) still counts.
 *  - gc: 1 GCStart V1/V2 (Count u32, Depth u32, Reason u32, Type u32, …): GCs per generation
 *    (Depth), per reason and how many were background (Type 1); 9 GCSuspendEEBegin (V0 Reason u16,
 *    V1 Reason u32, Count u32) to 3 GCRestartEEEnd: a pause when the suspension was for a GC
 *    (Reason 1 SUSPEND_FOR_GC or 6 SUSPEND_FOR_GC_PREP), p50/p99/max by nearest rank; 4
 *    GCHeapStats V1/V2 (GenerationSize0, TotalPromotedSize0 … 3 u64 pairs, FinalizationPromoted*
 *    u64 ×2, PinnedObjectCount, SinkBlockCount, GCHandleCount u32, ClrInstanceID u16, then from V2
 *    GenerationSize4 and TotalPromotedSize4 for the pinned object heap): the last one's sizes and
 *    the promoted bytes of every one summed.
 *
 * Events are summed as they arrive per (type, stack) (contention: per stack), so memory grows with
 * the distinct stacks, not with the events (plus ev_symbols' interned stacks and method map).
 *
 * A site is ev_symbols_stack_site's: the first frame outside System.Private.CoreLib from the leaf
 * (the code that allocated, threw or waited), else the first managed frame, else "?!?".
 *
 * Memory: every name, message and table is counted in bytes and charged before it is allocated
 * to the profile's share of dotmon's memory budget (ev_profile_set_share; else to the total).
 *
 * Pure: no libuv, no I/O. Errors: -ENOMEM, AGENT_E_TOOBIG (more than EV_PROFILE_MAX_* of
 * something, names over EV_PROFILE_MAX_NAME_BYTES), AGENT_E_BUDGET (over the share or dotmon's
 * total), AGENT_E_PROTO (a payload too short for its version: counted as malformed, skipped).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_symbols.h"

#define EV_PROFILE_MAX_RECORDS (4u * 1024u * 1024u) /* distinct (type, stack) kept */
#define EV_PROFILE_MAX_KEYS    (1024u * 1024u)      /* distinct type and site names */
/* Bytes of names and sample messages kept (UTF-8, NULs and pointers counted): 16 MiB. */
#define EV_PROFILE_MAX_NAME_BYTES ((uint64_t)16 << 20)
#define EV_PROFILE_MAX_PENDING    65536u /* threads waiting on a lock at once */
#define EV_PROFILE_SITES          5u     /* sites listed per type */

/* The runtime events read (Microsoft-Windows-DotNETRuntime ids). */
#define EV_PROFILE_GC_START          1
#define EV_PROFILE_GC_RESTART_EE_END 3
#define EV_PROFILE_GC_HEAP_STATS     4
#define EV_PROFILE_GC_SUSPEND_EE     9
#define EV_PROFILE_ALLOCATION_TICK   10
#define EV_PROFILE_EXCEPTION_THROWN  80
#define EV_PROFILE_CONTENTION_START  81
#define EV_PROFILE_CONTENTION_STOP   91

/*
 * GCStart's Reason names by value (ClrEtwAll.man GCReasonMap, as TraceEvent spells them); kind=gc
 * counts other values as "Other".
 */
#define EV_PROFILE_GC_REASONS 14
extern const char *const EV_PROFILE_GC_REASON_NAMES[EV_PROFILE_GC_REASONS];

enum ev_profile_kind {
    EV_PROFILE_ALLOC,
    EV_PROFILE_EXCEPTIONS,
    EV_PROFILE_CONTENTION,
    EV_PROFILE_GC
};

/*
 * ExceptionThrown (runtime event 80, keyword 0x8000) decoded, for kind=exceptions and for the
 * exception history (ev_exc.h). V1: ExceptionType and ExceptionMessage (UTF-16LE, NUL-terminated),
 * ExceptionEIP (pointer-size), ExceptionHRESULT u32, ExceptionFlags u16, ClrInstanceID u16; a
 * longer payload is accepted (later layouts). V0 has no fields: everything empty or 0.
 */
#define EV_EXCEPTION_HAS_INNER       0x01u
#define EV_EXCEPTION_NESTED          0x02u
#define EV_EXCEPTION_RETHROWN        0x04u
#define EV_EXCEPTION_CORRUPTED_STATE 0x08u
#define EV_EXCEPTION_CLS_COMPLIANT   0x10u

struct ev_exception_thrown {
    const uint8_t *type; /* UTF-16LE units in the payload (not NUL-terminated) */
    size_t type_units;
    const uint8_t *message;
    size_t message_units;
    uint64_t eip;
    uint32_t hresult;
    uint16_t flags; /* EV_EXCEPTION_* */
    uint16_t clr_instance_id;
};

/*
 * Decodes payload[0..len) of version into *out (its strings point into payload). pointer_size is
 * the stream's, 4 or 8. 0, AGENT_E_PROTO (too short for V1, a string without its NUL) or
 * AGENT_E_INVAL (pointer_size); *out is written on success only.
 */
int ev_exception_thrown_read(const uint8_t *payload, size_t len, uint32_t version,
                             size_t pointer_size, struct ev_exception_thrown *out);

/* "alloc", "exceptions", "contention", "gc". */
const char *ev_profile_kind_name(enum ev_profile_kind kind);
/* The kind named name (any case): 0, or AGENT_E_NOTFOUND. */
int ev_profile_kind_parse(const char *name, enum ev_profile_kind *out);

struct ev_profile;

/*
 * A profile of kind reading sym's events (it becomes sym's event callback; sym must outlive it and
 * is still fed, finished and freed by the caller). 0 or -ENOMEM.
 */
int ev_profile_new(enum ev_profile_kind kind, struct ev_symbols *sym, struct ev_profile **out);
/*
 * Charges what p will hold to share (borrowed: it must outlive p; NULL: dotmon's total). Before
 * the first event: 0, else AGENT_E_INVAL (nothing changes).
 */
struct mb_share;
int ev_profile_set_share(struct ev_profile *p, struct mb_share *share);
/* Accepts NULL; unhooks itself from its ev_symbols; gives back what it charged. */
void ev_profile_free(struct ev_profile *p);

/* One runtime event, as the stream callback hands it on (also for tests). */
struct ev_profile_event {
    uint32_t id;
    uint32_t version;
    uint64_t thread;
    int64_t ts; /* QPC ticks */
    const uint8_t *payload;
    size_t len;
    bool has_stack;
    uint32_t stack; /* an ev_symbols stack index (ev_symbols_event_stack / _intern_stack) */
};

/* Reads ev if it is one of the kind's: 0 (also for events of other kinds), or an error above. */
int ev_profile_add(struct ev_profile *p, const struct ev_profile_event *ev);

struct ev_profile_stats {
    uint64_t events;           /* events of the kind read */
    uint64_t malformed;        /* among them, payloads that could not be read (skipped) */
    uint64_t no_stack;         /* among them, without a stack */
    uint64_t messages_dropped; /* exception messages not kept: the name bytes were used up */
};
void ev_profile_get_stats(const struct ev_profile *p, struct ev_profile_stats *out);
/* 0, or the first error that lost an event for want of memory or room (the profile is partial). */
int ev_profile_status(const struct ev_profile *p);

/*
 * The summary as JSON (one object and a newline; the formats are in docs/routes.md's /profile
 * section) or as an aligned text table, keeping the top (1..EV_SYMBOLS_TOP_MAX) types or sites.
 * Names the sites: call after the stream is finished. 0, AGENT_E_INVAL (top), -ENOMEM or the sink's
 * error.
 */
int ev_profile_write_json(struct ev_profile *p, uint64_t pid, uint32_t duration_s, size_t top,
                          ev_symbols_sink_cb sink, void *ud);
int ev_profile_write_text(struct ev_profile *p, uint64_t pid, uint32_t duration_s, size_t top,
                          ev_symbols_sink_cb sink, void *ud);

#endif
