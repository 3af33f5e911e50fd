/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_NATIVE_H
#define AGENT_EV_NATIVE_H

/*
 * Fixed layouts of the runtime's native events (Microsoft-Windows-DotNETRuntime, ...Rundown,
 * ...Private, and the sample profiler's ThreadSample), whose metadata carries no field list
 * (docs/events.md §1.1, §6.1, §6.2, gcdump.md §2; docs/profiles.md).
 * One table, per provider, event id and version, taken from the runtime's manifest
 * (dotnet/runtime src/coreclr/vm/ClrEtwAll.man: field names and types of each template), and a
 * walker that decodes a payload by its layout. Pure: no libuv, no I/O, no allocation, no globals
 * but the constant table.
 *
 * Layouts are flat lists of fields. A field is a scalar, a UTF-16 string, a byte run whose length
 * is an earlier field's value (win:Binary length=...), or an array whose element count is an
 * earlier field's value (manifest struct count=... or data count=...): the `span` fields after
 * an array field describe one element (an unnamed single field: an array of scalars; otherwise
 * an array of structs). Arrays nest (BulkType's TypeParameters inside Values). Where the runtime
 * copies a C struct array as it is (GCFitBucketInfo, GCLOHCompact), its padding is in the layout
 * as an unnamed ALIGN field.
 *
 * Versions differ within one stream (the rundown sends MethodDCEndVerbose in versions 1 and 2):
 * look layouts up per (provider, id, version). A payload longer than its layout is fine (later
 * runtimes append fields); a shorter one does not decode.
 */

#include <stddef.h>
#include <stdint.h>

#define EV_NATIVE_MAX_FIELDS 32 /* fields of one layout, array elements' included */
#define EV_NATIVE_MAX_DEPTH  2  /* arrays inside arrays */
#define EV_NATIVE_KEY_SIZE   40 /* room for a field's JSON key (names are 35 bytes at most) */

enum ev_native_provider {
    EV_NATIVE_NONE = 0,
    EV_NATIVE_RUNTIME, /* Microsoft-Windows-DotNETRuntime */
    EV_NATIVE_RUNDOWN, /* Microsoft-Windows-DotNETRuntimeRundown */
    EV_NATIVE_PRIVATE, /* Microsoft-Windows-DotNETRuntimePrivate */
    EV_NATIVE_SAMPLER  /* Microsoft-DotNETCore-SampleProfiler: no field list either */
};

enum ev_native_type {
    EV_NATIVE_U8 = 1,
    EV_NATIVE_U16,
    EV_NATIVE_U32,
    EV_NATIVE_U64,
    EV_NATIVE_I32,
    EV_NATIVE_I64,
    EV_NATIVE_PTR,    /* win:Pointer: the trace's pointer size (4 or 8) */
    EV_NATIVE_BOOL,   /* win:Boolean: 4 bytes */
    EV_NATIVE_F64,    /* win:Double */
    EV_NATIVE_GUID,   /* 16 bytes, .NET Guid order */
    EV_NATIVE_WSTR,   /* UTF-16LE, NUL-terminated */
    EV_NATIVE_BINARY, /* fields[ref]'s value bytes */
    EV_NATIVE_ARRAY,  /* fields[ref]'s value elements of the next `span` fields */
    EV_NATIVE_ALIGN   /* padding inside an element written as a C struct: to a multiple of ref
                         bytes (0: the pointer size) from the element's start; never reported */
};

struct ev_native_field {
    const char *name; /* the manifest's (ASCII letters and digits); "" for an unnamed element */
    uint8_t type;     /* enum ev_native_type */
    uint8_t ref;      /* BINARY, ARRAY: index of the earlier field holding the length / count */
    uint8_t span;     /* ARRAY: the fields after this one that make one element */
    uint8_t key_len;  /* strlen(key) */
    /* The name as a JSON member key, `,"Name":`, zero-padded: renderers may copy all of it at
     * once (a fixed-size copy) and keep key_len bytes. */
    char key[EV_NATIVE_KEY_SIZE];
};

struct ev_native_event {
    const char *name; /* the manifest's symbol without its _Vn suffix, e.g. "GCAllocationTick" */
    uint8_t provider; /* enum ev_native_provider */
    uint8_t version;
    uint16_t id;
    uint8_t nfields;
    const struct ev_native_field *fields;
};

/* The provider a name stands for, or EV_NATIVE_NONE. */
enum ev_native_provider ev_native_provider_of(const char *name);

/* The layout of (provider, id, version), or NULL when the table has none. O(log n). */
const struct ev_native_event *ev_native_find(enum ev_native_provider p, uint32_t id,
                                             uint32_t version);

/* The same by provider name (NULL for any other provider). */
const struct ev_native_event *ev_native_lookup(const char *provider, uint32_t id, uint32_t version);

/* Index of the first field named name (elements' fields included), or -1. */
int ev_native_index(const struct ev_native_event *e, const char *name);

/* The table itself, for tests and tools: *n entries sorted by (provider, id, version). */
const struct ev_native_event *ev_native_table(size_t *n);

/*
 * A decoded value, a view into the payload:
 *   scalars: p/len their bytes, u their value (zero-extended; I32/I64 sign-extended to 64 bits
 *            and stored as two's complement; F64 its bits; BOOL 0 or 1 as written);
 *   WSTR:    p/len the UTF-16 units without the NUL, count the units;
 *   BINARY:  p/len the bytes, count = len;
 *   ARRAY:   p/len all its elements' bytes, count the elements.
 */
struct ev_native_value {
    const uint8_t *p;
    uint32_t len;
    uint32_t count;
    uint64_t u;
};

/* What ev_native_walk reports, in payload order. */
enum ev_native_step {
    EV_NATIVE_FIELD,       /* a scalar, string or binary field: v is its value */
    EV_NATIVE_ARRAY_BEGIN, /* v->count elements follow (v->p, v->len not known yet: 0) */
    EV_NATIVE_ELEM_BEGIN,  /* element v->count of the array field idx begins */
    EV_NATIVE_ELEM_END,    /* element v->count ends */
    EV_NATIVE_ARRAY_END    /* the whole array: v->p, v->len, v->count */
};

/*
 * Called for each step; depth is 0 for the layout's top-level fields, 1 inside an array's
 * elements, 2 inside a nested array's. A non-zero return stops the walk and is returned.
 */
typedef int (*ev_native_cb)(void *ud, enum ev_native_step step, uint16_t idx, unsigned depth,
                            const struct ev_native_value *v);

/*
 * Walks payload p[0..n) by layout e; ptr_size is the trace's pointer size (4, else 8). Fields are
 * reported as they are read, so a payload that turns out too short has already reported its first
 * fields: 0 when the whole layout fit, AGENT_E_PROTO when it did not (too short, a string without
 * its NUL, a count past the payload), or the callback's non-zero return. cb may be NULL (check
 * only). Bytes after the layout are ignored.
 */
int ev_native_walk(const struct ev_native_event *e, const uint8_t *p, size_t n, uint32_t ptr_size,
                   ev_native_cb cb, void *ud);

/* One decoded payload: v[k] is top-level field k's value (p == NULL for fields of elements). */
struct ev_native_record {
    const struct ev_native_event *event;
    size_t size; /* payload bytes the layout took (fewer than the payload's when it has more) */
    struct ev_native_value v[EV_NATIVE_MAX_FIELDS];
};

/*
 * Decodes payload p[0..n) by e into rec (every top-level field; arrays as their whole extent:
 * walk them with ev_native_walk for their elements). 0 or AGENT_E_PROTO (rec then unusable).
 * Valid while the payload bytes are.
 */
int ev_native_decode(struct ev_native_record *rec, const struct ev_native_event *e,
                     const uint8_t *p, size_t n, uint32_t ptr_size);

#endif
