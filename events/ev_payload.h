/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_PAYLOAD_H
#define AGENT_EV_PAYLOAD_H

/*
 * Self-describing EventSource payloads (docs/events.md §1, docs/nettrace.md §5): a metadata
 * record's field list (V1 list with nested Objects, or the V5 V2Params tag with arrays) parsed
 * into a type tree (a schema), and event payloads decoded by that tree into a flat record of
 * views, with typed access to the fields by name or dotted path ("Payload.Mean").
 *
 * Pure: no libuv, no I/O, no globals. A schema is one allocation made when the metadata is
 * defined, bounded by EV_SCHEMA_MAX_FIELDS nodes and EV_SCHEMA_MAX_NAMES bytes of names; decoding
 * allocates nothing (the record has a fixed capacity and holds views into the payload). Every read
 * is bounds-checked: a field list or payload that does not parse is refused, never guessed at.
 *
 * Errors: AGENT_E_PROTO (bytes that do not parse), AGENT_E_TOOBIG (a schema over its caps),
 * -ENOMEM, AGENT_E_NOTFOUND (no such field, or a field inside an array), AGENT_E_INVAL (a field
 * of another type than asked), AGENT_E_NOSPACE (an output buffer too small).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EV_SCHEMA_MAX_FIELDS 128  /* type-tree nodes per event, the root included */
#define EV_SCHEMA_MAX_NAMES  4096 /* UTF-8 bytes of field names per event (NULs included) */
#define EV_SCHEMA_MAX_DEPTH  8    /* nesting of Objects and Arrays */

/* EventSource session bits ride in the top keyword bits (docs/events.md §1.1): mask them off. */
#define EV_KEYWORDS_MASK 0x00000FFFFFFFFFFFull

/* Payload type codes (docs/nettrace.md §5.4). */
enum ev_type {
    EV_TYPE_OBJECT = 1,
    EV_TYPE_BOOLEAN = 3, /* 4 bytes */
    EV_TYPE_CHAR = 4,
    EV_TYPE_SBYTE = 5,
    EV_TYPE_BYTE = 6,
    EV_TYPE_INT16 = 7,
    EV_TYPE_UINT16 = 8,
    EV_TYPE_INT32 = 9,
    EV_TYPE_UINT32 = 10,
    EV_TYPE_INT64 = 11,
    EV_TYPE_UINT64 = 12,
    EV_TYPE_SINGLE = 13,
    EV_TYPE_DOUBLE = 14,
    EV_TYPE_DECIMAL = 15,  /* 16 bytes, as TraceEvent reads it; no event of ours has one */
    EV_TYPE_DATETIME = 16, /* FILETIME ticks */
    EV_TYPE_GUID = 17,
    EV_TYPE_STRING = 18, /* UTF-16LE, NUL-terminated */
    EV_TYPE_ARRAY = 19,  /* u16 count, then the elements (V2Params and V6 only) */
    /* NetTrace V6 only (docs/nettrace.md §7): */
    EV_TYPE_VARINT = 20,      /* zig-zag varint64 */
    EV_TYPE_VARUINT = 21,     /* varuint64 */
    EV_TYPE_FIXED_ARRAY = 22, /* fixed_count elements, no count in the payload */
    EV_TYPE_UTF8_UNIT = 23,   /* 1 byte */
    EV_TYPE_RELLOC = 24,      /* u32: size << 16 | offset from the byte after the field */
    EV_TYPE_DATALOC = 25,     /* u32: size << 16 | offset from the payload start */
    EV_TYPE_BOOLEAN8 = 26     /* 1 byte */
};

/* One node of a type tree. Node 0 is the root: an unnamed Object holding the event's fields. */
struct ev_field {
    const char *name;     /* UTF-8; "" for the root, array elements and TraceLogging's top struct */
    uint8_t code;         /* enum ev_type */
    uint8_t depth;        /* 0 for the root */
    uint16_t nchild;      /* Object: its fields; Array: 1 (the element type); else 0 */
    uint16_t child;       /* index of the first child; children are contiguous */
    uint16_t parent;      /* index of the parent (0 for the root itself) */
    bool in_array;        /* inside an array's element type: the record holds no value for it */
    uint16_t fixed_count; /* FixedLengthArray: its element count (from the metadata) */
    int32_t size; /* payload bytes when fixed, -1 when strings, arrays or varints make it vary */
};

struct ev_schema {
    uint32_t metadata_id;
    uint32_t event_id;
    uint32_t version;
    uint32_t level;
    uint64_t keywords; /* masked with EV_KEYWORDS_MASK */
    uint8_t opcode;    /* from the OpCode tag; 0 when absent */
    bool has_opcode;   /* the metadata carried an OpCode (TraceEvent infers one only without) */
    bool v2;           /* the fields came from a V2Params tag (or a V6 FieldDescriptions) */
    const char *provider;
    const char *event_name;
    uint16_t nfields; /* nodes, the root included (>= 1) */
    const struct ev_field *fields;
};

/*
 * Parses a metadata payload (docs/nettrace.md §5, the bytes nettrace_set_metadata_cb hands over)
 * into a new schema. 0 with *out set (free it with ev_schema_free); AGENT_E_PROTO for a malformed
 * record (unterminated strings, counts past the payload, unknown type codes, nesting deeper than
 * EV_SCHEMA_MAX_DEPTH), AGENT_E_TOOBIG over the caps above, -ENOMEM. A record that ends right
 * after `level` has no fields (valid). Unknown tag kinds are skipped; a V2Params tag replaces the
 * V1 list.
 */
int ev_schema_parse(const uint8_t *p, size_t n, struct ev_schema **out);

/*
 * The same for one NetTrace V6 metadata row (docs/nettrace.md §7): row[0..n) are the
 * bytes after the row's u16 size (what nettrace_set_metadata_cb hands over when md->v6):
 * varuint32 id, provider, varuint32 event id, event name (UTF-8 strings), FieldDescriptions
 * (nested Objects, Array, FixedLengthArray, RelLoc, DataLoc, the V6 scalar codes) and
 * OptionalMetadata (opcode, keywords, level, version; the other kinds are skipped). Bytes after
 * the OptionalMetadata are ignored, as are bytes after a field's Type inside its fieldSize. A row
 * that ends after its FieldDescriptions has no optional metadata. RelLoc/DataLoc elements must
 * be of a fixed non-zero size. Names with a NUL byte are refused. Same errors as above.
 */
int ev_schema_parse_v6(const uint8_t *row, size_t n, struct ev_schema **out);
void ev_schema_free(struct ev_schema *s);

/*
 * The node a dotted path names, or AGENT_E_NOTFOUND. Components match field names exactly
 * (case-sensitive); unnamed Objects are transparent, so "Payload.Mean" finds EventCounters' Mean
 * under its unnamed top-level struct. Paths never lead into an array's element type.
 */
int ev_schema_find(const struct ev_schema *s, const char *path);

/*
 * A decoded value: a view of its payload bytes. p == NULL for nodes inside arrays. For RelLoc and
 * DataLoc the view is the data the location points at (not the u32 itself); for VarInt/VarUInt it
 * is the varint's bytes.
 */
struct ev_value {
    const uint8_t *p;
    uint32_t len;   /* bytes; for strings without the NUL */
    uint32_t count; /* strings: UTF-16 units; arrays (all four kinds): elements */
};

/* One decoded payload: v[k] is the value of schema node k. Valid while the payload bytes are. */
struct ev_record {
    const struct ev_schema *schema;
    struct ev_value v[EV_SCHEMA_MAX_FIELDS];
};

/*
 * Decodes payload p[0..n) by schema s into rec. 0, or AGENT_E_PROTO when the payload is shorter
 * than its fields need (or a string lacks its NUL, a varint is over-long, a RelLoc/DataLoc points
 * outside the payload or at a size that is not whole elements); rec is then unusable. Bytes after
 * the last field are allowed (TraceEvent ignores them too). Allocates nothing.
 */
int ev_record_decode(struct ev_record *rec, const struct ev_schema *s, const uint8_t *p, size_t n);

/*
 * Typed access to node idx of a decoded record. AGENT_E_NOTFOUND for an index out of range or a
 * node without a value (inside an array), AGENT_E_INVAL for a type that does not convert:
 *   f64: every integer type (VarInt and VarUInt included), Boolean, Boolean8, Char,
 *        UTF8CodeUnit, Single, Double;
 *   i64: the same but Single/Double, plus DateTime (ticks); AGENT_E_TOOBIG for a UInt64 or
 *        VarUInt over INT64_MAX;
 *   str: String, converted to UTF-8 into out (NUL-terminated; AGENT_E_NOSPACE if cap is short),
 *        or an array of any kind of UTF8CodeUnit elements, copied as is.
 */
int ev_record_f64(const struct ev_record *rec, int idx, double *out);
int ev_record_i64(const struct ev_record *rec, int idx, int64_t *out);
int ev_record_str(const struct ev_record *rec, int idx, char *out, size_t cap, size_t *out_len);
/* UTF-8 bytes ev_record_str needs for node idx, without the NUL; 0 for a non-string. */
size_t ev_record_str_len(const struct ev_record *rec, int idx);

/* The same by dotted path (ev_schema_find, then the getter). */
int ev_record_path_f64(const struct ev_record *rec, const char *path, double *out);
int ev_record_path_i64(const struct ev_record *rec, const char *path, int64_t *out);
int ev_record_path_str(const struct ev_record *rec, const char *path, char *out, size_t cap);

#endif
