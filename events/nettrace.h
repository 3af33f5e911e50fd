/* SPDX-License-Identifier: MIT */
#ifndef AGENT_NETTRACE_H
#define AGENT_NETTRACE_H

/*
 * Streaming checker for the nettrace V4/V5 format the runtime sends after CollectTracing
 * (docs/nettrace.md, checklist §8). Pure: no libuv, no I/O, no globals.
 *
 * Feed the stream in any chunking (one byte at a time works) and call nettrace_finish at EOF.
 * The verdict is COMPLETE (valid, ended with the 0x01 end tag and nothing after it), TRUNCATED
 * (valid so far but the stream stopped early; every prefix of a valid stream is TRUNCATED) or
 * INVALID (with a message and the absolute offset of the first offending byte).
 *
 * Memory is bounded: the checker copies at most one block (capped by max_block, 16 MiB by default;
 * a larger blockSize is a violation) and stores one record per metadata definition (capped by
 * max_metadata, 64K by default) with its provider and event names as UTF-8 in a bounded arena.
 * Allocation happens only when the block buffer must grow and when metadata is defined, never per
 * event. A block that arrives whole inside one nettrace_feed call is checked in place, uncopied.
 *
 * What is checked (nettrace.md §8): magic and FastSerialization header; the Trace object (version
 * 4, minimum reader 4, 48-byte payload, pointer size 4 or 8, QPC frequency > 0); each block object
 * (tags, known type name, version 2 with minimum reader version 0..2, blockSize within the cap,
 * absolute 4-byte padding made of zero bytes, end tag); EventBlock/MetadataBlock headers
 * (headerSize 20..blockSize, no flag bits other than header compression); every event blob,
 * compressed or not, decoded to exactly the block end (varints at most 5/10 bytes and within 32/64
 * bits, payloads inside the block); StackBlock (8 + sum(4 + size) == blockSize, sizes multiple of
 * the pointer size, no id defined twice in one sequence-point region) and SPBlock (12 + 12 * count
 * == blockSize) sizes; every event's metadata id defined by an earlier record; metadata ids defined
 * once; metadata payloads parse (id, provider name, event id, event name, keywords, version, level,
 * V1 field list with known type codes, V5 OpCode/V2Params tags, UTF-16 strings terminated inside
 * the payload). Bytes after the end tag are a violation (TraceEvent stops reading at the tag and
 * would not notice them).
 *
 * Stack references: an event whose non-zero stack id was not defined since the last SPBlock is only
 * counted (stats.missing_stacks) unless NETTRACE_STRICT_STACKS is set, because TraceEvent itself
 * reads such an event without its stack (perfview StackCache.TryGetStack) rather than failing.
 *
 * NetTrace V6 (nettrace.md §7), detected by the header (reserved field 0, major 6; minor ignored,
 * another major refused), is read too: its blocks are walked by their 4-byte headers (size within
 * the cap, unknown kinds skipped), the Trace block must come first (sync time, tick frequency > 0,
 * pointer size 4 or 8, key/values with HardwareThreadCount, ProcessId, ExpectedCPUSamplingRate),
 * Event blocks are checked as above with V6 row headers (label list ids, thread indices), Metadata
 * rows parse up to their OptionalMetadata (field descriptions are only walked by their sizes; UTF-8
 * names without NUL bytes), Stack blocks as StackBlock, SequencePoint blocks (thread list decoded
 * to the block end; they end the stack region, with flag 1 the thread indices and with flag 2 the
 * metadata definitions), Thread blocks (rows of known kinds), RemoveThread and LabelList blocks
 * decoded within their sizes, and an EndOfStream block (size 0) is the end tag. As in TraceEvent,
 * an event's capture thread index, a sequence point's and a RemoveThread's thread index must have
 * been introduced by a Thread block and not removed or flushed since (the event's own thread
 * index is not checked). Stats count V6 Event/Metadata/Stack/SequencePoint blocks under the V4
 * kinds.
 *
 * Errors from nettrace_feed: AGENT_E_PROTO (the stream is invalid), AGENT_E_TOOBIG (a size over a
 * cap, or a checker limit hit: also an INVALID verdict), -ENOMEM (UV_ENOMEM: the checker could not
 * continue; the verdict is INVALID with an "out of memory" message), AGENT_E_INVAL (fed after
 * finish). Once an error is returned, later feeds return it again and check nothing.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* docs/nettrace.md §2.3: the offset of the first block object in a runtime-produced stream. */
#define NETTRACE_PREAMBLE_SIZE 102

#define NETTRACE_DEFAULT_MAX_BLOCK    (16u * 1024u * 1024u)
#define NETTRACE_DEFAULT_MAX_METADATA 65536u

/* Option flags. */
#define NETTRACE_STRICT_STACKS 0x1u /* an undefined stack id is a violation */
/*
 * Keep the current region's stacks (copied from its StackBlocks, forgotten at each sequence point)
 * so that events carry their stack's addresses (nettrace_event.stack). At most
 * NETTRACE_MAX_KEPT_STACKS bytes per region are kept; events whose stacks did not fit get none.
 */
#define NETTRACE_KEEP_STACKS     0x2u
#define NETTRACE_MAX_KEPT_STACKS (64u * 1024u * 1024u)

enum nettrace_verdict {
    NETTRACE_TRUNCATED = 0, /* valid so far, no end tag (yet) */
    NETTRACE_COMPLETE = 1,  /* valid and ended with the end tag */
    NETTRACE_INVALID = 2    /* a violation; see nettrace_error */
};

enum nettrace_block_kind {
    NETTRACE_BLOCK_EVENT = 0,
    NETTRACE_BLOCK_METADATA = 1,
    NETTRACE_BLOCK_STACK = 2,
    NETTRACE_BLOCK_SP = 3,
    NETTRACE_BLOCK_KINDS = 4
};

struct nettrace_options {
    uint32_t max_block;    /* largest blockSize accepted; 0 = NETTRACE_DEFAULT_MAX_BLOCK */
    uint32_t max_metadata; /* most metadata records; 0 = NETTRACE_DEFAULT_MAX_METADATA */
    uint32_t flags;        /* NETTRACE_STRICT_STACKS */
};

struct nettrace_stats {
    uint64_t bytes;                        /* stream bytes accepted so far */
    uint64_t blocks[NETTRACE_BLOCK_KINDS]; /* complete blocks, by kind */
    uint64_t events;                       /* events in EventBlocks */
    uint64_t metadata;                     /* metadata records defined */
    uint64_t stacks;                       /* stacks defined in StackBlocks */
    uint64_t missing_stacks; /* events whose stack id was not defined in the current region */
    /*
     * Events the runtime dropped, from per-capture-thread sequence-number gaps (events and
     * SPBlocks): gaps between a thread's events, before its first event (numbers start at 1), and
     * up to the number a sequence point gives for it (drops at the tail of a thread's run). Drops
     * after the last sequence point of a thread with no later event are in no stream. TraceEvent
     * counts the same but nothing before a thread's first event, so it may count less.
     */
    uint64_t lost;
};

/* The Trace object's payload (nettrace.md §2.3). */
struct nettrace_trace_info {
    uint16_t sync_time_utc[8]; /* year, month, dayOfWeek, day, hour, minute, second, ms */
    int64_t sync_time_qpc;
    int64_t qpc_frequency;
    int32_t pointer_size;
    int32_t process_id;
    int32_t processors;
    int32_t sampling_rate_ns;
};

/* One decoded event, as given to the event callback. All views are valid during the call only. */
struct nettrace_event {
    /* In a V6 stream thread_id and capture_thread_id are thread indices (Thread blocks). */
    const char *provider;   /* UTF-8, NUL-terminated */
    const char *event_name; /* UTF-8, NUL-terminated; "" for native runtime events */
    uint32_t event_id;
    uint32_t version;
    uint32_t metadata_id;
    uint32_t sequence;
    uint64_t thread_id;
    uint64_t capture_thread_id;
    uint32_t stack_id;
    int64_t timestamp;
    uint32_t label_list_id; /* V6: the event's label list (0 = none); always 0 in V4/V5 */
    /* The header's sorted flag (nettrace.md §4.3): no event after it in the stream is older. */
    bool sorted;
    /* Activity ids (16 bytes, .NET Guid layout) from the V4/V5 blob header or the V6 label list
     * (at most 64K lists with activity ids are kept); NULL when absent or zero. */
    const uint8_t *activity_id;
    const uint8_t *related_activity_id;
    /* With NETTRACE_KEEP_STACKS: the stack's addresses (pointer-size little-endian each), else NULL
     */
    const uint8_t *stack;
    uint32_t stack_len;
    const uint8_t *payload;
    size_t payload_len;
};

/*
 * Called once per event, in stream order, as its block is checked. A violation later in the same
 * block still makes the verdict INVALID, so act on events only after a good verdict if that
 * matters.
 */
typedef void (*nettrace_event_cb)(void *ud, const struct nettrace_event *ev);

/* Called once per metadata record by nettrace_foreach_metadata. */
struct nettrace_metadata {
    uint32_t metadata_id;
    const char *provider;
    const char *event_name;
    uint32_t event_id;
    uint32_t version;
    uint32_t level;
    uint8_t opcode; /* from the V5 OpCode tag; 0 when absent */
    uint64_t keywords;
    uint64_t events; /* events seen with this metadata id */
    bool v6;         /* from a V6 stream: the definition callback's payload is a V6 row */
};
typedef void (*nettrace_metadata_cb)(void *ud, const struct nettrace_metadata *md);

/*
 * Called once per metadata record as it is defined, in stream order (so before any event that uses
 * it), once the record has parsed. payload[0..len) is the record's raw metadata payload
 * (docs/nettrace.md §5: id, provider, event description, V1 field list, V5 tags; parse it with
 * ev_schema_parse), or when md->v6 the V6 metadata row after its u16 size (nettrace.md §7; parse it
 * with ev_schema_parse_v6), for a consumer that builds its own view of the field list; md and
 * payload are valid during the call only. In V6 an id may be defined again after a sequence point
 * that flushes the metadata cache: the callback then sees the id a second time and the new record
 * replaces the old one.
 */
typedef void (*nettrace_metadata_def_cb)(void *ud, const struct nettrace_metadata *md,
                                         const uint8_t *payload, size_t len);

/*
 * One block object of a V4/V5 stream (nettrace.md §3), as given to the block callback: the object
 * is whole and checked, its end tag included. content[0..len) are the blockSize bytes after the
 * padding, valid during the call only. A re-serializer copies content and len unchanged and
 * recomputes the padding for its own output offset (nettrace.md §9).
 */
struct nettrace_block {
    enum nettrace_block_kind kind;
    int32_t min_version; /* the object's minimum reader version (the runtime writes 2) */
    uint64_t offset;     /* absolute stream offset of the object's begin tag */
    const uint8_t *content;
    uint32_t len;
    uint32_t events; /* EventBlock: its events; MetadataBlock: its records; else 0 */
    /* EventBlock: the smallest and largest timestamp of its events (0 and 0 when it has none);
     * SPBlock: its timestamp, twice; else 0. */
    int64_t min_timestamp;
    int64_t max_timestamp;
    /* EventBlock: the smallest and largest non-zero stack id its events use (0 when none);
     * StackBlock: the first and last id it defines (0 when it defines none); else 0. */
    uint32_t min_stack_id;
    uint32_t max_stack_id;
};

/*
 * Called once per block object of a V4/V5 stream, in stream order, once the object has been checked
 * to its end tag (after the event and metadata callbacks of its content). Not called for NetTrace
 * V6 blocks.
 */
typedef void (*nettrace_block_cb)(void *ud, const struct nettrace_block *b);

/* Opaque contents; declared here so a checker can be embedded. Use the functions only. */
struct nettrace_checker {
    struct nettrace_private *priv;
};

/* Prepares ck. opt may be NULL (defaults). Returns 0 or -ENOMEM. */
int nettrace_checker_init(struct nettrace_checker *ck, const struct nettrace_options *opt);
/* Frees everything; safe on a zeroed or already finished checker, and twice. */
void nettrace_checker_fini(struct nettrace_checker *ck);

/* Sets (or clears, with NULL) the per-event callback. Call before feeding. */
void nettrace_set_event_cb(struct nettrace_checker *ck, nettrace_event_cb cb, void *ud);

/* Sets (or clears, with NULL) the metadata-definition callback. Call before feeding. */
void nettrace_set_metadata_cb(struct nettrace_checker *ck, nettrace_metadata_def_cb cb, void *ud);

/*
 * Sets (or clears, with NULL) the block callback. Call before feeding. With it set, a block whose
 * end tag is not in the same nettrace_feed call as its content is copied (at most one block), so
 * that the callback can hand over the content with the end tag checked.
 */
void nettrace_set_block_cb(struct nettrace_checker *ck, nettrace_block_cb cb, void *ud);

/* Checks the next n bytes of the stream. 0 or a negative code (see the top of this file). */
int nettrace_feed(struct nettrace_checker *ck, const uint8_t *p, size_t n);

/* EOF: returns the final verdict. Later feeds fail with AGENT_E_INVAL. Idempotent. */
enum nettrace_verdict nettrace_finish(struct nettrace_checker *ck);

/*
 * The verdict so far, without ending the stream: INVALID after a violation, COMPLETE once the end
 * tag has been seen (a later byte would still make it INVALID), TRUNCATED otherwise.
 */
enum nettrace_verdict nettrace_status(const struct nettrace_checker *ck);

/* The violation message and its absolute stream offset; NULL (offset untouched) if none. */
const char *nettrace_error(const struct nettrace_checker *ck, uint64_t *offset);

/*
 * The violation as one line for a log or a problem, "nettrace at offset N: <message>" (rc's text
 * when the checker has no message, e.g. for an error of the caller's own), into out[0..cap), cut
 * to fit and NUL-terminated.
 */
void nettrace_error_line(const struct nettrace_checker *ck, int rc, char *out, size_t cap);

/*
 * A decoder's sticky error (the event decoders built on a checker): the first error and its
 * line. nettrace_sticky_set keeps the first one only; nettrace_sticky_feed feeds ck unless an
 * error is already there, records a stream error with its line, and returns the error (the one
 * a callback set during the feed included) or what nettrace_feed returned.
 */
struct nettrace_sticky {
    int err;
    char msg[256];
};
void nettrace_sticky_set(struct nettrace_sticky *s, int err, const char *msg);
int nettrace_sticky_feed(struct nettrace_checker *ck, struct nettrace_sticky *s, const uint8_t *p,
                         size_t n);

/* Static name of a verdict ("COMPLETE", "TRUNCATED", "INVALID"). */
const char *nettrace_verdict_name(enum nettrace_verdict v);

/* Counters so far. Never NULL. */
const struct nettrace_stats *nettrace_get_stats(const struct nettrace_checker *ck);

/* The Trace object, once it has been read: 0, else AGENT_E_NOTFOUND (out untouched). */
int nettrace_trace_info(const struct nettrace_checker *ck, struct nettrace_trace_info *out);
/*
 * An event's timestamp (QPC ticks) as nanoseconds since 1970-01-01 UTC: the sync time plus
 * (ts - sync QPC) / frequency. 0, or AGENT_E_INVAL when the sync time or frequency is not a
 * valid one or the result overflows.
 */
int nettrace_unix_ns(const struct nettrace_trace_info *ti, int64_t ts, int64_t *out);
/* The same in whole milliseconds (rounded down). */
int nettrace_unix_ms(const struct nettrace_trace_info *ti, int64_t ts, int64_t *out);
/* nettrace_unix_ms with the checker's own Trace object: AGENT_E_NOTFOUND before it has been read.
 */
int nettrace_event_unix_ms(const struct nettrace_checker *ck, int64_t ts, int64_t *out);

/*
 * Events seen so far whose metadata names this provider (exact, case-sensitive UTF-8) and event id,
 * over all metadata ids (one per event version). E.g. ("Microsoft-Windows-DotNETRuntime", 1) counts
 * GCStart.
 */
uint64_t nettrace_count(const struct nettrace_checker *ck, const char *provider, uint32_t event_id);

/*
 * The same by event name, for EventSource events whose ids move between versions (on .NET 10
 * Microsoft-Extensions-Logging FormattedMessage is id 9 and MessageJson id 10, not the 1 and 5 of
 * older runtimes). Native runtime events have empty names and never match a non-empty name.
 */
uint64_t nettrace_count_named(const struct nettrace_checker *ck, const char *provider,
                              const char *event_name);

/* Events seen so far from this provider, any event id. */
uint64_t nettrace_count_provider(const struct nettrace_checker *ck, const char *provider);

/* Calls cb for every metadata record, in definition order. */
void nettrace_foreach_metadata(const struct nettrace_checker *ck, nettrace_metadata_cb cb,
                               void *ud);

/*
 * Convenience for payload searches: true if the UTF-16LE encoding of the ASCII/UTF-8 text `needle`
 * occurs anywhere in p[0..n) (at any byte alignment). False for an empty or non-encodable needle.
 */
bool nettrace_payload_has_utf16(const uint8_t *p, size_t n, const char *needle);

#endif
