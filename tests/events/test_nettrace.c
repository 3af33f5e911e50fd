/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "fixture.h"
#include "nettrace.h"

/*
 * The synthetic stream is built here byte by byte from docs/nettrace.md (not with any writer under
 * test), and the builder records the offset at which each corruption must be reported. The real
 * traces under tests/fixtures/nettrace were also read by TraceEvent (tests/tools/tracecheck); the
 * expected counts below are the ones TraceEvent reported for the same files.
 */

/* ---- a growable byte builder ----------------------------------------------------------------- */

struct nb {
    uint8_t *p;
    size_t n;
    size_t cap;
};

static void nb_raw(struct nb *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->n + n) {
            cap *= 2;
        }
        b->p = realloc(b->p, cap);
        assert_non_null(b->p);
        b->cap = cap;
    }
    if (n > 0) {
        memcpy(b->p + b->n, p, n);
    }
    b->n += n;
}

static void nb_le(struct nb *b, uint64_t v, size_t bytes)
{
    uint8_t t[8];
    for (size_t i = 0; i < bytes; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    nb_raw(b, t, bytes);
}

static void nb_u8(struct nb *b, unsigned v)
{
    nb_le(b, v, 1);
}

static void nb_var(struct nb *b, uint64_t v)
{
    do {
        uint8_t byte = (uint8_t)(v & 0x7F);
        v >>= 7;
        nb_u8(b, v != 0 ? (unsigned)(byte | 0x80) : byte);
    } while (v != 0);
}

/* ASCII text as UTF-16LE, NUL-terminated unless nul is false. */
static void nb_utf16(struct nb *b, const char *s, bool nul)
{
    for (const char *c = s; *c != '\0'; c++) {
        nb_le(b, (uint8_t)*c, 2);
    }
    if (nul) {
        nb_le(b, 0, 2);
    }
}

static void nb_patch32(struct nb *b, size_t at, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        b->p[at + (size_t)i] = (uint8_t)(v >> (8 * i));
    }
}

static void nb_free(struct nb *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

/* ---- the synthetic stream -------------------------------------------------------------------- */

enum mutation {
    MUT_NONE,
    MUT_BAD_MAGIC,
    MUT_BAD_FS_HEADER,
    MUT_TRACE_VERSION,
    MUT_POINTER_SIZE,
    MUT_NO_PADDING,
    MUT_BAD_PAD_BYTE,
    MUT_HUGE_BLOCK,
    MUT_UNKNOWN_TYPE,
    MUT_BLOCK_VERSION,
    MUT_BLOCK_END_TAG,
    MUT_HEADER_SIZE,
    MUT_HEADER_FLAGS,
    MUT_OVERLONG_VARINT,
    MUT_VARINT_OVERFLOW,
    MUT_PAYLOAD_PAST_END,
    MUT_BLOB_PAST_END,
    MUT_UNDEFINED_METADATA,
    MUT_DUPLICATE_METADATA,
    MUT_PROVIDER_UNTERMINATED,
    MUT_METADATA_SHORT,
    MUT_TAG_PAST_PAYLOAD,
    MUT_V1_BAD_TYPE,
    MUT_STACK_SIZE_MISMATCH,
    MUT_STACK_ENTRY_PAST_END,
    MUT_STACK_POINTER_MULTIPLE,
    MUT_STACK_DUPLICATE,
    MUT_SP_SIZE_MISMATCH,
    MUT_UNCOMPRESSED_SIZE,
    MUT_UNDEFINED_STACK,
    MUT_SECOND_TRACE,
    MUT_END_BEFORE_TRACE,
    MUT_TRAILING,
    MUT_COUNT
};

struct stream {
    struct nb b;
    uint64_t bad_off; /* where the mutation's violation must be reported */
};

static const char *const rt = "Microsoft-Windows-DotNETRuntime";
static const char *const mel = "Microsoft-Extensions-Logging";

static void put_header(struct stream *s, enum mutation m)
{
    nb_raw(&s->b, m == MUT_BAD_MAGIC ? "Nettrack" : "Nettrace", 8);
    nb_le(&s->b, 20, 4);
    nb_raw(&s->b, m == MUT_BAD_FS_HEADER ? "!FastSerialization.2" : "!FastSerialization.1", 20);
    if (m == MUT_BAD_MAGIC) {
        s->bad_off = 7;
    } else if (m == MUT_BAD_FS_HEADER) {
        s->bad_off = 31;
    }
}

/* 05 05 01 version min nameLength name 06; returns the offset of the first 05. */
static size_t put_object_begin(struct nb *b, const char *name, uint32_t version, uint32_t min)
{
    size_t at = b->n;
    nb_u8(b, 0x05);
    nb_u8(b, 0x05);
    nb_u8(b, 0x01);
    nb_le(b, version, 4);
    nb_le(b, min, 4);
    nb_le(b, strlen(name), 4);
    nb_raw(b, name, strlen(name));
    nb_u8(b, 0x06);
    return at;
}

static void put_trace(struct stream *s, enum mutation m)
{
    size_t at = put_object_begin(&s->b, "Trace", m == MUT_TRACE_VERSION ? 3 : 4, 4);
    if (m == MUT_TRACE_VERSION) {
        s->bad_off = at + 3;
    }
    static const uint16_t utc[8] = {2026, 8, 3, 12, 10, 20, 30, 400};
    for (int i = 0; i < 8; i++) {
        nb_le(&s->b, utc[i], 2);
    }
    nb_le(&s->b, 1000000, 8);    /* sync QPC */
    nb_le(&s->b, 1000000000, 8); /* QPC frequency */
    if (m == MUT_POINTER_SIZE) {
        s->bad_off = s->b.n;
    }
    nb_le(&s->b, m == MUT_POINTER_SIZE ? 6 : 8, 4);
    nb_le(&s->b, 4242, 4); /* pid */
    nb_le(&s->b, 2, 4);
    nb_le(&s->b, 1000000, 4);
    nb_u8(&s->b, 0x06);
}

/*
 * Block object up to its content; returns the offset of the blockSize field. Padding is computed
 * from the absolute offset, as nettrace.md §3.1 requires.
 */
static size_t put_block_begin(struct stream *s, const char *name, enum mutation m)
{
    /* Header-level corruptions target the (only) MetadataBlock. */
    bool target = strcmp(name, "MetadataBlock") == 0 && m != MUT_NONE;
    const char *type = name;
    if (strcmp(name, "StackBlock") == 0 && m == MUT_UNKNOWN_TYPE) {
        type = "StakBlock";
    }
    size_t obj = put_object_begin(&s->b, type, m == MUT_BLOCK_VERSION && target ? 3 : 2, 2);
    if (type != name) {
        s->bad_off = obj + 15;
    }
    if (m == MUT_BLOCK_VERSION && target) {
        s->bad_off = obj + 3;
    }
    size_t size_at = s->b.n;
    nb_le(&s->b, 0, 4);
    size_t pad = (4 - s->b.n % 4) % 4;
    if (target && m == MUT_BAD_PAD_BYTE) {
        assert_true(pad > 0);
        s->bad_off = s->b.n;
        nb_u8(&s->b, 0xAA);
        pad--;
    }
    if (target && m == MUT_NO_PADDING) {
        assert_true(pad > 0);
        s->bad_off = s->b.n; /* the header's first byte (0x14) is read as padding */
        pad = 0;
    }
    for (size_t i = 0; i < pad; i++) {
        nb_u8(&s->b, 0);
    }
    return size_at;
}

static void put_block_end(struct stream *s, size_t size_at, enum mutation m, bool target)
{
    nb_patch32(&s->b, size_at, (uint32_t)(s->b.n - size_at - 4 - (4 - (size_at + 4) % 4) % 4));
    if (target && m == MUT_NO_PADDING) {
        /* The writer "forgot" the padding: blockSize counts what follows the size field. */
        nb_patch32(&s->b, size_at, (uint32_t)(s->b.n - size_at - 4));
    }
    if (target && m == MUT_HUGE_BLOCK) {
        nb_patch32(&s->b, size_at, 0x7FFFFFF0u);
        s->bad_off = size_at;
    }
    if (target && m == MUT_BLOCK_END_TAG) {
        s->bad_off = s->b.n;
        nb_u8(&s->b, 0x07);
        return;
    }
    nb_u8(&s->b, 0x06);
}

/* Event/Metadata block header: headerSize 20, flags, min/max timestamps. */
static void put_event_header(struct stream *s, uint16_t flags, enum mutation m, bool target)
{
    if (target && m == MUT_HEADER_SIZE) {
        s->bad_off = s->b.n;
    }
    nb_le(&s->b, target && m == MUT_HEADER_SIZE ? 19 : 20, 2);
    if (target && m == MUT_HEADER_FLAGS) {
        s->bad_off = s->b.n;
        flags |= 0x10;
    }
    nb_le(&s->b, flags, 2);
    nb_le(&s->b, 1000100, 8);
    nb_le(&s->b, 1000900, 8);
}

/*
 * A compressed metadata blob the way .NET 10 writes it (flags 0xC6: sequence/capture thread/proc,
 * thread id, sorted, payload size) around the given record payload.
 */
static size_t put_metadata_blob(struct stream *s, const struct nb *payload, bool first)
{
    nb_u8(&s->b, 0xC6);
    nb_var(&s->b, 0xFFFFFFFFu); /* sequence delta: 0 + 0xFFFFFFFF + 1 wraps to 0 */
    nb_var(&s->b, 0);           /* capture thread */
    nb_var(&s->b, 0xFFFFFFFFu); /* processor */
    nb_var(&s->b, 777);         /* thread */
    nb_var(&s->b, first ? 1000100 : 0);
    nb_var(&s->b, payload->n);
    size_t at = s->b.n;
    nb_raw(&s->b, payload->p, payload->n);
    return at; /* the payload's offset */
}

static void md_common(struct nb *r, uint32_t id, const char *provider, uint32_t event_id,
                      const char *name, uint64_t keywords, uint32_t version, uint32_t level)
{
    nb_le(r, id, 4);
    nb_utf16(r, provider, true);
    nb_le(r, event_id, 4);
    nb_utf16(r, name, true);
    nb_le(r, keywords, 8);
    nb_le(r, version, 4);
    nb_le(r, level, 4);
}

static void put_metadata_block(struct stream *s, enum mutation m)
{
    size_t size_at = put_block_begin(s, "MetadataBlock", m);
    put_event_header(s, 1, m, true);
    struct nb r = {0};

    /* 1: a native runtime event (GCStart_V2): no name, fieldCount 0. */
    if (m == MUT_PROVIDER_UNTERMINATED) {
        nb_le(&r, 1, 4);
        nb_utf16(&r, rt, false); /* and nothing after it */
    } else if (m == MUT_METADATA_SHORT) {
        nb_le(&r, 1, 4);
        nb_utf16(&r, rt, true);
        nb_le(&r, 1, 4);
        nb_utf16(&r, "", true);
        nb_le(&r, 1, 8); /* keywords, then nothing: version and level are missing */
    } else {
        md_common(&r, 1, rt, 1, "", 0x1, 2, 4);
        nb_le(&r, 0, 4);
    }
    size_t payload1 = put_metadata_blob(s, &r, true);
    if (m == MUT_PROVIDER_UNTERMINATED) {
        s->bad_off = payload1 + 4; /* the provider name */
    } else if (m == MUT_METADATA_SHORT) {
        s->bad_off = payload1 + r.n - 8; /* keywords, the first of the three fixed fields */
    }
    r.n = 0;

    /* 2: an EventSource event with V1 fields (Int32, String, Object{Int64}), OpCode tag. */
    md_common(&r, 2, mel, 9, "FormattedMessage", 0x4, 0, 4);
    size_t v1_at = r.n;
    nb_le(&r, 3, 4);
    nb_le(&r, m == MUT_V1_BAD_TYPE ? 2 : 9, 4);
    nb_utf16(&r, "Level", true);
    nb_le(&r, 18, 4);
    nb_utf16(&r, "FormattedMessage", true);
    nb_le(&r, 1, 4); /* Object with one Int64 */
    nb_le(&r, 1, 4);
    nb_le(&r, 11, 4);
    nb_utf16(&r, "Inner", true);
    nb_utf16(&r, "Args", true);
    size_t tag_at = r.n;
    nb_le(&r, m == MUT_TAG_PAST_PAYLOAD ? 2 : 1, 4); /* OpCode tag */
    nb_u8(&r, 1);
    nb_u8(&r, 1); /* opcode Start */
    size_t payload2 = put_metadata_blob(s, &r, false);
    if (m == MUT_V1_BAD_TYPE) {
        s->bad_off = payload2 + v1_at + 4;
    }
    if (m == MUT_TAG_PAST_PAYLOAD) {
        s->bad_off = payload2 + tag_at;
    }
    r.n = 0;

    /* 3: V1 fieldCount 0 and a V2Params tag: an array of UTF-16 strings and an Object. */
    md_common(&r, m == MUT_DUPLICATE_METADATA ? 2 : 3, "Test-Provider", 7, "WithArray", 0, 1, 5);
    nb_le(&r, 0, 4);
    struct nb t = {0};
    nb_le(&t, 2, 4);
    size_t f1 = t.n;
    nb_le(&t, 0, 4); /* size, patched */
    nb_utf16(&t, "Items", true);
    nb_le(&t, 19, 4);
    nb_le(&t, 18, 4);
    nb_le(&t, 0, 2); /* padding inside the field */
    nb_patch32(&t, f1, (uint32_t)(t.n - f1));
    size_t f2 = t.n;
    nb_le(&t, 0, 4);
    nb_utf16(&t, "Pair", true);
    nb_le(&t, 1, 4);
    nb_le(&t, 1, 4);
    size_t f3 = t.n;
    nb_le(&t, 0, 4);
    nb_utf16(&t, "Key", true);
    nb_le(&t, 9, 4);
    nb_patch32(&t, f3, (uint32_t)(t.n - f3));
    nb_patch32(&t, f2, (uint32_t)(t.n - f2));
    nb_le(&r, t.n, 4);
    nb_u8(&r, 2);
    nb_raw(&r, t.p, t.n);
    nb_le(&r, 0, 4); /* an unknown tag kind with no bytes: skipped */
    nb_u8(&r, 9);
    size_t payload3 = put_metadata_blob(s, &r, false);
    if (m == MUT_DUPLICATE_METADATA) {
        s->bad_off = payload3;
    }
    nb_free(&t);
    nb_free(&r);
    put_block_end(s, size_at, m,
                  m == MUT_NO_PADDING || m == MUT_HUGE_BLOCK || m == MUT_BLOCK_END_TAG);
}

static void put_stack_block(struct stream *s, enum mutation m)
{
    size_t size_at = put_block_begin(s, "StackBlock", m);
    nb_le(&s->b, 1, 4);
    nb_le(&s->b, 2, 4);
    if (m == MUT_STACK_ENTRY_PAST_END) {
        s->bad_off = s->b.n;
        nb_le(&s->b, 4096, 4);
    } else if (m == MUT_STACK_POINTER_MULTIPLE) {
        s->bad_off = s->b.n;
        nb_le(&s->b, 12, 4);
        nb_le(&s->b, 0x7f00001000ull, 8);
        nb_le(&s->b, 0x1234, 4);
    } else {
        nb_le(&s->b, 16, 4);
        nb_le(&s->b, 0x7f00001000ull, 8);
        nb_le(&s->b, 0x7f00002000ull, 8);
    }
    nb_le(&s->b, 0, 4); /* stack 2: empty */
    if (m == MUT_STACK_SIZE_MISMATCH) {
        s->bad_off = s->b.n;
        nb_le(&s->b, 0xDEADBEEF, 4);
    }
    put_block_end(s, size_at, m, false);
    if (m == MUT_STACK_DUPLICATE) {
        /* A second StackBlock redefining id 2 in the same region. */
        size_t again = put_block_begin(s, "StackBlock", MUT_NONE);
        s->bad_off = s->b.n;
        nb_le(&s->b, 2, 4);
        nb_le(&s->b, 1, 4);
        nb_le(&s->b, 0, 4);
        put_block_end(s, again, MUT_NONE, false);
    }
}

static size_t payload_gc_start(struct nb *p)
{
    nb_le(p, 7, 4); /* Count */
    nb_le(p, 2, 4); /* Depth */
    nb_le(p, 1, 4); /* Reason: Induced */
    nb_le(p, 0, 4); /* Type */
    nb_le(p, 9, 2); /* ClrInstanceID */
    nb_le(p, 5, 8); /* ClientSequenceNumber */
    return p->n;
}

static void put_event_block(struct stream *s, enum mutation m)
{
    size_t size_at = put_block_begin(s, "EventBlock", m);
    put_event_header(s, 1, MUT_NONE, false);
    struct nb p = {0};
    payload_gc_start(&p);

    /* A: GCStart with every header field spelled out. */
    size_t blob_a = s->b.n;
    nb_u8(&s->b, 0x01 | 0x02 | 0x04 | 0x08 | 0x40 | 0x80);
    if (m == MUT_OVERLONG_VARINT) {
        s->bad_off = s->b.n;
        nb_raw(&s->b, "\x81\x80\x80\x80\x80\x00", 6); /* 1 in six bytes */
    } else if (m == MUT_VARINT_OVERFLOW) {
        s->bad_off = s->b.n;
        nb_raw(&s->b, "\x81\x80\x80\x80\x10", 5); /* bit 32 set */
    } else {
        nb_var(&s->b, m == MUT_UNDEFINED_METADATA ? 7 : 1);
        if (m == MUT_UNDEFINED_METADATA) {
            s->bad_off = blob_a;
        }
    }
    nb_var(&s->b, 0);    /* sequence: 0 + 0 + 1 = 1 */
    nb_var(&s->b, 1001); /* capture thread */
    nb_var(&s->b, 3);    /* processor */
    nb_var(&s->b, 1001); /* thread */
    if (m == MUT_UNDEFINED_STACK) {
        s->bad_off = blob_a;
    }
    nb_var(&s->b, m == MUT_UNDEFINED_STACK ? 9 : 1);
    nb_var(&s->b, 1000200); /* timestamp delta from 0 */
    nb_var(&s->b, m == MUT_PAYLOAD_PAST_END ? 100000 : p.n);
    if (m == MUT_PAYLOAD_PAST_END) {
        s->bad_off = blob_a;
    }
    nb_raw(&s->b, p.p, p.n);

    /* B: a log message: new metadata and stack, a UTF-16 payload, an activity id. */
    p.n = 0;
    nb_le(&p, 4, 4);
    nb_utf16(&p, "hello nettrace", true);
    nb_u8(&s->b, 0x01 | 0x08 | 0x10 | 0x80);
    nb_var(&s->b, 2);
    nb_var(&s->b, 2);
    nb_var(&s->b, 50);
    nb_raw(&s->b, "0123456789abcdef", 16);
    nb_var(&s->b, p.n);
    nb_raw(&s->b, p.p, p.n);

    /* C: GCStart again, inheriting everything but the metadata id; payload size inherited too. */
    p.n = 0;
    payload_gc_start(&p);
    nb_u8(&s->b, 0x01 | 0x80);
    nb_var(&s->b, 1);
    nb_var(&s->b, 0xFFFFFFFFFFFFFFFFull); /* timestamp delta -1 (wraps) */
    nb_var(&s->b, p.n);
    nb_raw(&s->b, p.p, p.n);
    if (m == MUT_BLOB_PAST_END) {
        /* A last blob of just a flags byte: its timestamp varint would start past the end. */
        nb_u8(&s->b, 0x80);
        s->bad_off = s->b.n;
    }
    nb_free(&p);
    put_block_end(s, size_at, m, false);
}

/* An EventBlock without header compression: one GCStart (nettrace.md §4.1, uncompressed). */
static void put_uncompressed_block(struct stream *s, enum mutation m)
{
    size_t size_at = put_block_begin(s, "EventBlock", MUT_NONE);
    put_event_header(s, 0, MUT_NONE, false);
    struct nb p = {0};
    payload_gc_start(&p);
    size_t event_size = 76 + ((p.n + 3) & ~(size_t)3); /* header after the size field + payload */
    size_t blob = s->b.n;
    nb_le(&s->b, m == MUT_UNCOMPRESSED_SIZE ? 4000 : event_size, 4);
    if (m == MUT_UNCOMPRESSED_SIZE) {
        s->bad_off = blob;
    }
    nb_le(&s->b, 1, 4);       /* metadata id, sorted */
    nb_le(&s->b, 4, 4);       /* sequence: after A, B, C */
    nb_le(&s->b, 1001, 8);    /* thread */
    nb_le(&s->b, 1001, 8);    /* capture thread */
    nb_le(&s->b, 3, 4);       /* processor */
    nb_le(&s->b, 2, 4);       /* stack id */
    nb_le(&s->b, 1000300, 8); /* timestamp */
    nb_raw(&s->b, "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", 32);
    nb_le(&s->b, p.n, 4);
    nb_raw(&s->b, p.p, p.n);
    while ((s->b.n - blob) % 4 != 0) {
        nb_u8(&s->b, 0);
    }
    nb_free(&p);
    put_block_end(s, size_at, MUT_NONE, false);
}

static void put_sp_block(struct stream *s, enum mutation m)
{
    size_t size_at = put_block_begin(s, "SPBlock", MUT_NONE);
    nb_le(&s->b, 1000950, 8);
    if (m == MUT_SP_SIZE_MISMATCH) {
        s->bad_off = s->b.n;
    }
    nb_le(&s->b, m == MUT_SP_SIZE_MISMATCH ? 2 : 1, 4);
    nb_le(&s->b, 1001, 8);
    nb_le(&s->b, 4, 4); /* the thread's last sequence number: nothing lost */
    put_block_end(s, size_at, MUT_NONE, false);
}

/* preamble, MetadataBlock, StackBlock, EventBlock (compressed), EventBlock (plain), SPBlock, 01 */
static void build(struct stream *s, enum mutation m)
{
    memset(s, 0, sizeof(*s));
    s->bad_off = UINT64_MAX;
    put_header(s, m);
    if (m == MUT_END_BEFORE_TRACE) {
        s->bad_off = s->b.n;
        nb_u8(&s->b, 0x01);
        return;
    }
    put_trace(s, m);
    if (m == MUT_SECOND_TRACE) {
        s->bad_off = s->b.n + 15;
        put_trace(s, MUT_NONE);
    }
    put_metadata_block(s, m);
    put_stack_block(s, m);
    put_event_block(s, m);
    put_uncompressed_block(s, m);
    put_sp_block(s, m);
    nb_u8(&s->b, 0x01);
    if (m == MUT_TRAILING) {
        s->bad_off = s->b.n;
        nb_u8(&s->b, 0x00);
    }
}

/* ---- helpers --------------------------------------------------------------------------------- */

struct seen {
    int events;
    int hello;
    uint64_t last_thread;
    uint32_t ids[8];
};

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct seen *s = ud;
    if (s->events < 8) {
        s->ids[s->events] = ev->event_id;
    }
    s->events++;
    s->last_thread = ev->thread_id;
    if (strcmp(ev->provider, mel) == 0 &&
        nettrace_payload_has_utf16(ev->payload, ev->payload_len, "hello nettrace")) {
        s->hello++;
    }
}

/* Feeds p in chunks of `chunk` bytes (0 = whole), each copied to an exact-size heap block. */
static enum nettrace_verdict check(struct nettrace_checker *ck, const uint8_t *p, size_t n,
                                   size_t chunk)
{
    size_t step = chunk ? chunk : (n ? n : 1);
    for (size_t off = 0; off < n; off += step) {
        size_t len = n - off < step ? n - off : step;
        uint8_t *copy = malloc(len);
        assert_non_null(copy);
        memcpy(copy, p + off, len);
        int rc = nettrace_feed(ck, copy, len);
        free(copy);
        if (rc < 0) {
            break;
        }
    }
    return nettrace_finish(ck);
}

/* Whole-stream checks of the synthetic stream's counts. */
static void assert_minimal_counts(struct nettrace_checker *ck)
{
    const struct nettrace_stats *st = nettrace_get_stats(ck);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_METADATA], 1);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_STACK], 1);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_EVENT], 2);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_SP], 1);
    assert_int_equal(st->events, 4);
    assert_int_equal(st->metadata, 3);
    assert_int_equal(st->stacks, 2);
    assert_int_equal(st->missing_stacks, 0);
    assert_int_equal(st->lost, 0);
    assert_int_equal(nettrace_count(ck, rt, 1), 3);
    assert_int_equal(nettrace_count(ck, mel, 9), 1);
    assert_int_equal(nettrace_count(ck, mel, 1), 0);
    assert_int_equal(nettrace_count_named(ck, mel, "FormattedMessage"), 1);
    assert_int_equal(nettrace_count_provider(ck, rt), 3);
    assert_int_equal(nettrace_count_provider(ck, "Test-Provider"), 0);
}

/* One uncompressed GCStart (metadata id 1, stack 0) by capture thread `thread`, numbered seq. */
static void put_numbered_event(struct stream *s, uint64_t thread, uint32_t seq, int64_t ts)
{
    struct nb p = {0};
    payload_gc_start(&p);
    size_t event_size = 76 + ((p.n + 3) & ~(size_t)3);
    size_t blob = s->b.n;
    nb_le(&s->b, event_size, 4);
    nb_le(&s->b, 1, 4);
    nb_le(&s->b, seq, 4);
    nb_le(&s->b, thread, 8);
    nb_le(&s->b, thread, 8);
    nb_le(&s->b, 0, 4);
    nb_le(&s->b, 0, 4);
    nb_le(&s->b, (uint64_t)ts, 8);
    nb_raw(&s->b, "ABCDEFGHIJKLMNOPQRSTUVWXYZ012345", 32);
    nb_le(&s->b, p.n, 4);
    nb_raw(&s->b, p.p, p.n);
    while ((s->b.n - blob) % 4 != 0) {
        nb_u8(&s->b, 0);
    }
    nb_free(&p);
}

struct numbered {
    uint64_t thread;
    uint32_t seq;
};

static void put_numbered_block(struct stream *s, const struct numbered *ev, size_t n)
{
    size_t size_at = put_block_begin(s, "EventBlock", MUT_NONE);
    put_event_header(s, 0, MUT_NONE, false);
    for (size_t i = 0; i < n; i++) {
        put_numbered_event(s, ev[i].thread, ev[i].seq, 1000000 + (int64_t)i);
    }
    put_block_end(s, size_at, MUT_NONE, false);
}

static void put_numbered_sp(struct stream *s, const struct numbered *t, size_t n)
{
    size_t size_at = put_block_begin(s, "SPBlock", MUT_NONE);
    nb_le(&s->b, 2000000, 8);
    nb_le(&s->b, n, 4);
    for (size_t i = 0; i < n; i++) {
        nb_le(&s->b, t[i].thread, 8);
        nb_le(&s->b, t[i].seq, 4);
    }
    put_block_end(s, size_at, MUT_NONE, false);
}

/* ---- tests ----------------------------------------------------------------------------------- */

/*
 * Dropped events from sequence numbers (docs/nettrace.md §4, §6): a gap between a thread's
 * events, numbers skipped before a thread's first event, the tail up to a sequence point's number,
 * a thread seen only in a sequence point; a number going backwards (a recycled thread id) counts
 * nothing, and after a sequence point the count continues from its number.
 */
static void test_nettrace_dropped_events(void **state)
{
    (void)state;
    struct stream s;
    memset(&s, 0, sizeof(s));
    put_header(&s, MUT_NONE);
    put_trace(&s, MUT_NONE);
    put_metadata_block(&s, MUT_NONE);
    /* 1001: 1, 2, then 5 (3 and 4 dropped). 1002: first seen at 4 (1..3 dropped). */
    static const struct numbered a[] = {{1001, 1}, {1001, 2}, {1002, 4}, {1001, 5}};
    put_numbered_block(&s, a, 4);
    /* 1001 attempted 7 (6 and 7 dropped), 1002 nothing more, 1003 attempted 3, none written. */
    static const struct numbered sp[] = {{1001, 7}, {1002, 4}, {1003, 3}};
    put_numbered_sp(&s, sp, 3);
    /* 1001 goes on at 8 (nothing new); 1002 at 2: a new thread under a recycled id. */
    static const struct numbered b[] = {{1001, 8}, {1002, 2}, {1002, 3}};
    put_numbered_block(&s, b, 3);
    nb_u8(&s.b, 0x01);

    for (size_t chunk = 0; chunk <= 7; chunk += 7) {
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        enum nettrace_verdict v = check(&ck, s.b.p, s.b.n, chunk);
        const char *err = nettrace_error(&ck, NULL);
        if (err != NULL) {
            fail_msg("unexpected violation: %s", err);
        }
        assert_int_equal(v, NETTRACE_COMPLETE);
        const struct nettrace_stats *st = nettrace_get_stats(&ck);
        assert_int_equal(st->events, 7);
        assert_int_equal(st->lost, 2 + 3 + 2 + 3);
        nettrace_checker_fini(&ck);
    }
    nb_free(&s.b);
}

static void test_nettrace_minimal_complete(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    struct seen seen = {0};
    nettrace_set_event_cb(&ck, on_event, &seen);
    struct nettrace_trace_info ti;
    int64_t ms = 0, ms_ti = 0;
    assert_int_equal(nettrace_trace_info(&ck, &ti), AGENT_E_NOTFOUND);
    assert_int_equal(nettrace_event_unix_ms(&ck, 0, &ms), AGENT_E_NOTFOUND);
    enum nettrace_verdict v = check(&ck, s.b.p, s.b.n, 0);
    uint64_t off = 0;
    const char *err = nettrace_error(&ck, &off);
    if (err != NULL) {
        fail_msg("unexpected violation at %llu: %s", (unsigned long long)off, err);
    }
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_int_equal(nettrace_get_stats(&ck)->bytes, s.b.n);
    assert_minimal_counts(&ck);
    assert_int_equal(seen.events, 4);
    assert_int_equal(seen.hello, 1);
    assert_int_equal(seen.ids[0], 1);
    assert_int_equal(seen.ids[1], 9);
    assert_int_equal(seen.last_thread, 1001);
    assert_int_equal(nettrace_trace_info(&ck, &ti), 0);
    assert_int_equal(ti.process_id, 4242);
    assert_int_equal(ti.pointer_size, 8);
    assert_int_equal(ti.qpc_frequency, 1000000000);
    assert_int_equal(ti.sync_time_utc[0], 2026);
    /* the checker's own clock is the Trace object's */
    assert_int_equal(nettrace_event_unix_ms(&ck, ti.sync_time_qpc + 2500000000ll, &ms), 0);
    assert_int_equal(nettrace_unix_ms(&ti, ti.sync_time_qpc + 2500000000ll, &ms_ti), 0);
    assert_true(ms == ms_ti);
    assert_string_equal(nettrace_verdict_name(v), "COMPLETE");
    /* finish is idempotent and feeding after it is refused */
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    assert_int_equal(nettrace_feed(&ck, (const uint8_t *)"x", 1), AGENT_E_INVAL);
    nettrace_checker_fini(&ck);
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

struct mdlist {
    int n;
    uint32_t ids[4];
    uint32_t event_ids[4];
    uint32_t versions[4];
    uint8_t opcodes[4];
    uint64_t events[4];
    char providers[4][64];
    char names[4][64];
};

static void on_metadata(void *ud, const struct nettrace_metadata *md)
{
    struct mdlist *l = ud;
    assert_true(l->n < 4);
    l->ids[l->n] = md->metadata_id;
    l->event_ids[l->n] = md->event_id;
    l->versions[l->n] = md->version;
    l->opcodes[l->n] = md->opcode;
    l->events[l->n] = md->events;
    snprintf(l->providers[l->n], sizeof(l->providers[0]), "%s", md->provider);
    snprintf(l->names[l->n], sizeof(l->names[0]), "%s", md->event_name);
    l->n++;
}

static void test_nettrace_metadata_records(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    assert_int_equal(check(&ck, s.b.p, s.b.n, 0), NETTRACE_COMPLETE);
    struct mdlist l;
    memset(&l, 0, sizeof(l));
    nettrace_foreach_metadata(&ck, on_metadata, &l);
    assert_int_equal(l.n, 3);
    assert_int_equal(l.ids[0], 1);
    assert_string_equal(l.providers[0], rt);
    assert_string_equal(l.names[0], "");
    assert_int_equal(l.event_ids[0], 1);
    assert_int_equal(l.versions[0], 2);
    assert_int_equal(l.events[0], 3);
    assert_string_equal(l.providers[1], mel);
    assert_string_equal(l.names[1], "FormattedMessage");
    assert_int_equal(l.opcodes[1], 1);
    assert_int_equal(l.events[1], 1);
    assert_string_equal(l.providers[2], "Test-Provider");
    assert_string_equal(l.names[2], "WithArray");
    assert_int_equal(l.event_ids[2], 7);
    assert_int_equal(l.events[2], 0);
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

/* The definition hook: each record once, in order, with its raw payload (docs/nettrace.md §5). */
struct mddefs {
    int n;
    uint32_t ids[4];
    size_t lens[4];
};

static void on_metadata_def(void *ud, const struct nettrace_metadata *md, const uint8_t *p,
                            size_t n)
{
    struct mddefs *d = ud;
    assert_true(d->n < 4);
    assert_true(n >= 4);
    /* The payload starts with the id being defined; the record is already queryable. */
    uint32_t id =
        (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    assert_int_equal(id, md->metadata_id);
    assert_int_equal(md->events, 0);
    d->ids[d->n] = id;
    d->lens[d->n] = n;
    d->n++;
}

static void test_nettrace_metadata_hook(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct mddefs whole;
    struct mddefs bytewise;
    memset(&whole, 0, sizeof(whole));
    memset(&bytewise, 0, sizeof(bytewise));
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_set_metadata_cb(&ck, on_metadata_def, &whole);
    assert_int_equal(check(&ck, s.b.p, s.b.n, 0), NETTRACE_COMPLETE);
    nettrace_checker_fini(&ck);
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_set_metadata_cb(&ck, on_metadata_def, &bytewise);
    assert_int_equal(check(&ck, s.b.p, s.b.n, 1), NETTRACE_COMPLETE);
    nettrace_checker_fini(&ck);
    assert_int_equal(whole.n, 3);
    assert_memory_equal(&whole, &bytewise, sizeof(whole));
    assert_int_equal(whole.ids[0], 1);
    assert_int_equal(whole.ids[2], 3);
    nb_free(&s.b);
}

static void test_nettrace_every_prefix_truncated(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    for (size_t len = 0; len < s.b.n; len++) {
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        enum nettrace_verdict v = check(&ck, s.b.p, len, 0);
        uint64_t off = 0;
        const char *err = nettrace_error(&ck, &off);
        if (v != NETTRACE_TRUNCATED) {
            fail_msg("prefix %zu: %s (%s at %llu)", len, nettrace_verdict_name(v), err ? err : "-",
                     (unsigned long long)off);
        }
        assert_int_equal(nettrace_status(&ck), NETTRACE_TRUNCATED);
        nettrace_checker_fini(&ck);
    }
    nb_free(&s.b);
}

/* Stats and counts after a whole-stream check, for comparing chunkings. */
struct outcome {
    enum nettrace_verdict v;
    struct nettrace_stats st;
    uint64_t gc;
    uint64_t log;
    uint64_t err_off;
    int events_seen;
};

static struct outcome run(const uint8_t *p, size_t n, const size_t *cuts, size_t ncuts)
{
    struct outcome o;
    memset(&o, 0, sizeof(o));
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    struct seen seen = {0};
    nettrace_set_event_cb(&ck, on_event, &seen);
    size_t prev = 0;
    for (size_t k = 0; k <= ncuts; k++) {
        size_t end = k < ncuts ? cuts[k] : n;
        uint8_t *copy = malloc(end - prev + 1);
        assert_non_null(copy);
        memcpy(copy, p + prev, end - prev);
        (void)nettrace_feed(&ck, copy, end - prev);
        free(copy);
        prev = end;
    }
    o.v = nettrace_finish(&ck);
    o.st = *nettrace_get_stats(&ck);
    o.gc = nettrace_count(&ck, rt, 1);
    o.log = nettrace_count_named(&ck, mel, "FormattedMessage");
    (void)nettrace_error(&ck, &o.err_off);
    o.events_seen = seen.events;
    nettrace_checker_fini(&ck);
    return o;
}

static void assert_same(const struct outcome *a, const struct outcome *b, size_t where)
{
    if (a->v != b->v || memcmp(&a->st, &b->st, sizeof(a->st)) != 0 || a->gc != b->gc ||
        a->log != b->log || a->err_off != b->err_off || a->events_seen != b->events_seen) {
        fail_msg("split at %zu differs: %s/%s events %llu/%llu", where, nettrace_verdict_name(a->v),
                 nettrace_verdict_name(b->v), (unsigned long long)a->st.events,
                 (unsigned long long)b->st.events);
    }
}

static void test_nettrace_chunking_identical(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct outcome whole = run(s.b.p, s.b.n, NULL, 0);
    assert_int_equal(whole.v, NETTRACE_COMPLETE);
    assert_int_equal(whole.events_seen, 4);

    size_t *ones = malloc(s.b.n * sizeof(*ones));
    assert_non_null(ones);
    for (size_t k = 0; k < s.b.n; k++) {
        ones[k] = k;
    }
    struct outcome bytewise = run(s.b.p, s.b.n, ones, s.b.n);
    assert_same(&whole, &bytewise, 1);
    free(ones);

    for (size_t cut = 0; cut <= s.b.n; cut++) {
        struct outcome split = run(s.b.p, s.b.n, &cut, 1);
        assert_same(&whole, &split, cut);
    }
    nb_free(&s.b);
}

struct corruption {
    enum mutation m;
    const char *name;
    int err; /* expected feed error */
    const char *msg_part;
};

static const struct corruption corruptions[] = {
    {MUT_BAD_MAGIC, "bad magic", AGENT_E_PROTO, "magic"},
    {MUT_BAD_FS_HEADER, "bad FastSerialization header", AGENT_E_PROTO, "FastSerialization"},
    {MUT_TRACE_VERSION, "Trace version 3", AGENT_E_PROTO, "Trace version"},
    {MUT_POINTER_SIZE, "pointer size 6", AGENT_E_PROTO, "pointer size"},
    {MUT_NO_PADDING, "missing padding", AGENT_E_PROTO, "padding"},
    {MUT_BAD_PAD_BYTE, "non-zero padding byte", AGENT_E_PROTO, "padding byte 0xaa"},
    {MUT_HUGE_BLOCK, "block size over the cap", AGENT_E_TOOBIG, "over the cap"},
    {MUT_UNKNOWN_TYPE, "unknown type name", AGENT_E_PROTO, "unknown object type \"StakBlock\""},
    {MUT_BLOCK_VERSION, "block version 3", AGENT_E_PROTO, "version 3/2"},
    {MUT_BLOCK_END_TAG, "block end tag", AGENT_E_PROTO, "end tag"},
    {MUT_HEADER_SIZE, "header size 19", AGENT_E_PROTO, "header size 19"},
    {MUT_HEADER_FLAGS, "unknown header flag", AGENT_E_PROTO, "flags"},
    {MUT_OVERLONG_VARINT, "over-long varint", AGENT_E_PROTO, "over-long"},
    {MUT_VARINT_OVERFLOW, "varint over 32 bits", AGENT_E_PROTO, "over-long"},
    {MUT_PAYLOAD_PAST_END, "payload past the block", AGENT_E_PROTO, "past the block end"},
    {MUT_BLOB_PAST_END, "blob header past the block", AGENT_E_PROTO, "past the block end"},
    {MUT_UNDEFINED_METADATA, "undefined metadata id", AGENT_E_PROTO, "metadata id 7"},
    {MUT_DUPLICATE_METADATA, "metadata id defined twice", AGENT_E_PROTO, "defined twice"},
    {MUT_PROVIDER_UNTERMINATED, "provider name unterminated", AGENT_E_PROTO, "not terminated"},
    {MUT_METADATA_SHORT, "metadata without version/level", AGENT_E_PROTO, "keywords/version"},
    {MUT_TAG_PAST_PAYLOAD, "metadata tag past the payload", AGENT_E_PROTO, "tag"},
    {MUT_V1_BAD_TYPE, "V1 field type code 2", AGENT_E_PROTO, "type code 2"},
    {MUT_STACK_SIZE_MISMATCH, "stack block size mismatch", AGENT_E_PROTO, "after its 2 stacks"},
    {MUT_STACK_ENTRY_PAST_END, "stack past the block", AGENT_E_PROTO, "past the block end"},
    {MUT_STACK_POINTER_MULTIPLE, "stack not a pointer multiple", AGENT_E_PROTO, "8-byte"},
    {MUT_STACK_DUPLICATE, "stack id defined twice", AGENT_E_PROTO, "defined twice"},
    {MUT_SP_SIZE_MISMATCH, "SP block size mismatch", AGENT_E_PROTO, "2 threads need"},
    {MUT_UNCOMPRESSED_SIZE, "uncompressed event size", AGENT_E_PROTO, "event size 4000"},
    {MUT_SECOND_TRACE, "second Trace object", AGENT_E_PROTO, "second Trace"},
    {MUT_END_BEFORE_TRACE, "end tag before Trace", AGENT_E_PROTO, "expected an object"},
    {MUT_TRAILING, "bytes after the end tag", AGENT_E_PROTO, "after the end tag"},
};

static void test_nettrace_corruptions(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(corruptions) / sizeof(corruptions[0]); k++) {
        const struct corruption *c = &corruptions[k];
        struct stream s;
        build(&s, c->m);
        assert_true(s.bad_off != UINT64_MAX);
        /* Whole, byte by byte and split in the middle: same verdict and offset every time. */
        for (int mode = 0; mode < 3; mode++) {
            struct nettrace_checker ck;
            assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
            int rc = 0;
            if (mode == 0) {
                rc = nettrace_feed(&ck, s.b.p, s.b.n);
            } else if (mode == 1) {
                for (size_t i = 0; i < s.b.n && rc == 0; i++) {
                    rc = nettrace_feed(&ck, s.b.p + i, 1);
                }
            } else {
                rc = nettrace_feed(&ck, s.b.p, s.b.n / 2);
                if (rc == 0) {
                    rc = nettrace_feed(&ck, s.b.p + s.b.n / 2, s.b.n - s.b.n / 2);
                }
            }
            enum nettrace_verdict v = nettrace_finish(&ck);
            uint64_t off = 0;
            const char *err = nettrace_error(&ck, &off);
            if (v != NETTRACE_INVALID || err == NULL || off != s.bad_off || rc != c->err ||
                strstr(err, c->msg_part) == NULL) {
                fail_msg("%s (mode %d): %s rc %d at %llu (want %llu): %s", c->name, mode,
                         nettrace_verdict_name(v), rc, (unsigned long long)off,
                         (unsigned long long)s.bad_off, err ? err : "-");
            }
            /* After a violation the checker stays failed. */
            assert_int_equal(nettrace_feed(&ck, (const uint8_t *)"\x06", 1), AGENT_E_INVAL);
            nettrace_checker_fini(&ck);
        }
        nb_free(&s.b);
    }
}

static void test_nettrace_failed_stays_failed(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_BAD_MAGIC);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    assert_int_equal(nettrace_feed(&ck, s.b.p, 40), AGENT_E_PROTO);
    assert_int_equal(nettrace_status(&ck), NETTRACE_INVALID);
    assert_int_equal(nettrace_feed(&ck, s.b.p + 40, 10), AGENT_E_PROTO);
    assert_int_equal(nettrace_get_stats(&ck)->bytes, 0);
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

static void test_nettrace_block_cap_option(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct nettrace_options opt = {.max_block = 64};
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, &opt), 0);
    assert_int_equal(nettrace_feed(&ck, s.b.p, s.b.n), AGENT_E_TOOBIG);
    uint64_t off = 0;
    assert_non_null(nettrace_error(&ck, &off));
    assert_int_equal(off, 131); /* the first MetadataBlock's size field (nettrace.md §3.1) */
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

static void test_nettrace_metadata_cap_option(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct nettrace_options opt = {.max_metadata = 2};
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, &opt), 0);
    assert_int_equal(nettrace_feed(&ck, s.b.p, s.b.n), AGENT_E_TOOBIG);
    assert_non_null(strstr(nettrace_error(&ck, NULL), "checker limit"));
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

static void test_nettrace_missing_stack(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_UNDEFINED_STACK);
    /* Default: TraceEvent reads such an event without its stack, so it is only counted. */
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    assert_int_equal(check(&ck, s.b.p, s.b.n, 0), NETTRACE_COMPLETE);
    assert_int_equal(nettrace_get_stats(&ck)->missing_stacks, 1);
    nettrace_checker_fini(&ck);
    /* Strict: a violation at the event. */
    struct nettrace_options opt = {.flags = NETTRACE_STRICT_STACKS};
    assert_int_equal(nettrace_checker_init(&ck, &opt), 0);
    struct seen seen = {0};
    nettrace_set_event_cb(&ck, on_event, &seen);
    assert_int_equal(check(&ck, s.b.p, s.b.n, 0), NETTRACE_INVALID);
    uint64_t off = 0;
    assert_non_null(strstr(nettrace_error(&ck, &off), "stack id 9"));
    assert_int_equal(off, s.bad_off);
    /* The refused event is not counted (fuzz_nettrace found it counted but never delivered). */
    assert_int_equal(nettrace_get_stats(&ck)->events, (uint64_t)seen.events);
    nettrace_checker_fini(&ck);
    nb_free(&s.b);
}

/*
 * Runs (events whose compressed header sets none of the flags 0x01..0x20 and so inherit the event
 * before them; the checker takes a shorter way through them): a run of events on capture thread
 * 1001, with a payload size changing in it, a switch to thread 1002 mid-block whose first number
 * skips 2, a run there, a switch back to 1001 with a gap of 2, a run after it with a timestamp
 * delta that wraps below the others, then a sequence point with 1001's tail dropped. Each event's
 * fields as the callback sees them, the counters (without a callback too), the block's timestamp
 * range, and the same for every chunking. With RUN_CUT the last run event's payload runs past the
 * block end: the violation is at that event and the events before it are counted, no more.
 */
enum { RUN_OK, RUN_CUT };

struct run_ev {
    uint8_t flags;
    uint32_t seq_delta; /* with 0x02: the sequence delta; capture thread and processor follow */
    uint64_t thread;
    uint64_t ts_delta;
    uint32_t size; /* with 0x80 */
};

static const struct run_ev run_evs[] = {
    {0x01 | 0x02 | 0x04 | 0x08 | 0x40 | 0x80, 0, 1001, 1000, 6}, /* 1001 #1, stack 9 (missing) */
    {0x40, 0, 0, 10, 0},                                         /* 1001 #2 */
    {0x40, 0, 0, 10, 0},                                         /* 1001 #3 */
    {0x40 | 0x80, 0, 0, 200, 9},                                 /* 1001 #4, 9-byte payload */
    {0x00, 0, 0, 1, 0},                                          /* 1001 #5 */
    {0x02 | 0x40, 4294967293u, 1002, 5, 0}, /* 1002 #3 (5 + delta + 1 wraps to 3: 2 dropped) */
    {0x40, 0, 0, 5, 0},                     /* 1002 #4 */
    {0x02 | 0x40, 3, 1001, 5, 0},           /* 1001 #8 (6 and 7 dropped) */
    {0x40, 0, 0, 0xFFFFFFFFFFFFFF00ull, 0}, /* 1001 #9, the timestamp wraps below the others */
    {0x40 | 0x80, 0, 0, 7, 4},              /* 1001 #10, 4 bytes */
};
#define RUN_EVENTS (sizeof(run_evs) / sizeof(run_evs[0]))

struct run_seen {
    size_t events;
    uint32_t seq[RUN_EVENTS];
    uint64_t thread[RUN_EVENTS];
    int64_t ts[RUN_EVENTS];
    size_t len[RUN_EVENTS];
    int64_t blk_min, blk_max;
    uint32_t blk_events;
    const struct nettrace_checker *ck; /* the counters must include each event as it is seen */
};

static void on_run_event(void *ud, const struct nettrace_event *ev)
{
    struct run_seen *r = ud;
    assert_true(r->events < RUN_EVENTS);
    r->seq[r->events] = ev->sequence;
    r->thread[r->events] = ev->capture_thread_id;
    r->ts[r->events] = ev->timestamp;
    r->len[r->events] = ev->payload_len;
    assert_int_equal(ev->payload[0], 0xA0 + r->events);
    r->events++;
    assert_int_equal(nettrace_get_stats(r->ck)->events, r->events);
    assert_int_equal(nettrace_get_stats(r->ck)->missing_stacks, r->events);
}

static void on_run_block(void *ud, const struct nettrace_block *b)
{
    struct run_seen *r = ud;
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        r->blk_min = b->min_timestamp;
        r->blk_max = b->max_timestamp;
        r->blk_events = b->events;
    }
}

static void build_runs(struct stream *s, int variant)
{
    memset(s, 0, sizeof(*s));
    s->bad_off = UINT64_MAX;
    put_header(s, MUT_NONE);
    put_trace(s, MUT_NONE);
    put_metadata_block(s, MUT_NONE);
    size_t size_at = put_block_begin(s, "EventBlock", MUT_NONE);
    put_event_header(s, 1, MUT_NONE, false);
    uint32_t size = 0;
    for (size_t i = 0; i < RUN_EVENTS; i++) {
        const struct run_ev *e = &run_evs[i];
        if (variant == RUN_CUT && i == RUN_EVENTS - 1) {
            s->bad_off = s->b.n;
        }
        nb_u8(&s->b, e->flags);
        if (e->flags & 0x01) {
            nb_var(&s->b, 1);
        }
        if (e->flags & 0x02) {
            nb_var(&s->b, e->seq_delta);
            nb_var(&s->b, e->thread);
            nb_var(&s->b, 1);
        }
        if (e->flags & 0x04) {
            nb_var(&s->b, e->thread);
        }
        if (e->flags & 0x08) {
            nb_var(&s->b, 9);
        }
        nb_var(&s->b, e->ts_delta);
        if (e->flags & 0x80) {
            size = e->size;
            nb_var(&s->b, variant == RUN_CUT && i == RUN_EVENTS - 1 ? 1000 : size);
        }
        nb_u8(&s->b, (unsigned)(0xA0 + i));
        for (uint32_t k = 1; k < size; k++) {
            nb_u8(&s->b, k);
        }
    }
    put_block_end(s, size_at, MUT_NONE, false);
    static const struct numbered sp[] = {{1001, 12}, {1002, 4}};
    put_numbered_sp(s, sp, 2);
    nb_u8(&s->b, 0x01);
}

static void test_nettrace_header_runs(void **state)
{
    (void)state;
    static const uint32_t seqs[RUN_EVENTS] = {1, 2, 3, 4, 5, 3, 4, 8, 9, 10};
    struct stream s;
    build_runs(&s, RUN_OK);
    for (int with_cb = 0; with_cb < 2; with_cb++) {
        for (size_t chunk = 0; chunk <= 8; chunk++) {
            struct nettrace_checker ck;
            assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
            struct run_seen seen = {.ck = &ck};
            if (with_cb) {
                nettrace_set_event_cb(&ck, on_run_event, &seen);
            }
            nettrace_set_block_cb(&ck, on_run_block, &seen);
            assert_int_equal(check(&ck, s.b.p, s.b.n, chunk), NETTRACE_COMPLETE);
            const struct nettrace_stats *st = nettrace_get_stats(&ck);
            assert_int_equal(st->events, RUN_EVENTS);
            assert_int_equal(st->missing_stacks, RUN_EVENTS);
            assert_int_equal(st->lost, 2 + 2 + 2); /* 1002's first, 1001's gap, 1001's tail */
            assert_int_equal(nettrace_count(&ck, rt, 1), RUN_EVENTS);
            assert_int_equal(seen.blk_events, RUN_EVENTS);
            int64_t ts = 0;
            int64_t lo = INT64_MAX;
            int64_t hi = INT64_MIN;
            uint32_t size = 0;
            for (size_t i = 0; i < RUN_EVENTS; i++) {
                ts = (int64_t)((uint64_t)ts + run_evs[i].ts_delta);
                lo = ts < lo ? ts : lo;
                hi = ts > hi ? ts : hi;
                size = (run_evs[i].flags & 0x80) ? run_evs[i].size : size;
                if (with_cb) {
                    assert_int_equal(seen.seq[i], seqs[i]);
                    assert_int_equal(seen.thread[i], i >= 5 && i < 7 ? 1002 : 1001);
                    assert_int_equal(seen.ts[i], ts);
                    assert_int_equal(seen.len[i], size);
                }
            }
            assert_int_equal(seen.events, with_cb ? RUN_EVENTS : 0);
            assert_int_equal(seen.blk_min, lo);
            assert_int_equal(seen.blk_max, hi);
            assert_true(lo < 1000); /* the wrapped timestamp is the block's smallest */
            nettrace_checker_fini(&ck);
        }
    }
    nb_free(&s.b);

    build_runs(&s, RUN_CUT);
    for (int with_cb = 0; with_cb < 2; with_cb++) {
        for (size_t chunk = 0; chunk <= 8; chunk += 8) {
            struct nettrace_checker ck;
            assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
            struct run_seen seen = {.ck = &ck};
            if (with_cb) {
                nettrace_set_event_cb(&ck, on_run_event, &seen);
            }
            assert_int_equal(check(&ck, s.b.p, s.b.n, chunk), NETTRACE_INVALID);
            uint64_t off = 0;
            assert_non_null(strstr(nettrace_error(&ck, &off), "payload of 1000 bytes"));
            assert_int_equal(off, s.bad_off);
            const struct nettrace_stats *st = nettrace_get_stats(&ck);
            assert_int_equal(st->events, RUN_EVENTS - 1);
            assert_int_equal(st->missing_stacks, RUN_EVENTS - 1);
            assert_int_equal(st->lost, 2 + 2);
            assert_int_equal(seen.events, with_cb ? RUN_EVENTS - 1 : 0);
            nettrace_checker_fini(&ck);
        }
    }
    nb_free(&s.b);
}

static void test_nettrace_status_and_end(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    assert_int_equal(nettrace_feed(&ck, s.b.p, s.b.n - 1), 0);
    assert_int_equal(nettrace_status(&ck), NETTRACE_TRUNCATED);
    assert_null(nettrace_error(&ck, NULL));
    assert_int_equal(nettrace_feed(&ck, s.b.p + s.b.n - 1, 1), 0);
    assert_int_equal(nettrace_status(&ck), NETTRACE_COMPLETE);
    assert_int_equal(nettrace_feed(&ck, (const uint8_t *)"", 0), 0);
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    nettrace_checker_fini(&ck);

    struct nettrace_checker zero;
    memset(&zero, 0, sizeof(zero));
    nettrace_checker_fini(&zero); /* a zeroed checker is fine to fini */
    nb_free(&s.b);
}

static void test_nettrace_payload_search(void **state)
{
    (void)state;
    struct nb b = {0};
    nb_u8(&b, 0x33); /* odd alignment */
    nb_utf16(&b, "say hello nettrace now", true);
    assert_true(nettrace_payload_has_utf16(b.p, b.n, "hello nettrace"));
    assert_true(nettrace_payload_has_utf16(b.p, b.n, "now"));
    assert_false(nettrace_payload_has_utf16(b.p, b.n, "hello  nettrace"));
    assert_false(nettrace_payload_has_utf16(b.p, b.n, ""));
    assert_false(nettrace_payload_has_utf16(b.p, 3, "say"));
    nb_free(&b);
}

/* ---- real traces ----------------------------------------------------------------------------- */

struct real_expect {
    const char *file;
    uint64_t events;
    uint64_t gc_start;
    uint64_t gc_end;
    uint64_t samples;
    uint64_t logs;
    int32_t pid;
    const char *find; /* text expected in some payloads, or NULL */
    int found;
    uint64_t provider_events[4];
};

/* Counts as reported by TraceEvent 4.0.0 (tests/tools/tracecheck) for the same files. */
static const struct real_expect reals[] = {
    {"gc.nettrace", 173, 8, 8, 0, 0, 32556, NULL, 0, {172, 0, 0, 0}},
    {"logs.nettrace", 37, 0, 0, 0, 36, 2954, "nt-fixture-marker-2", 2, {0, 36, 0, 0}},
    {"cpu.nettrace", 15753, 2, 2, 8807, 0, 4482, NULL, 0, {6945, 0, 8807, 0}},
    {"http_ct5.nettrace", 82, 0, 0, 0, 50, 4878, "nt-fixture-marker-http", 2, {0, 56, 0, 0}},
    {"rundown_ct4.nettrace", 138, 2, 2, 0, 10, 4659, NULL, 0, {57, 10, 0, 70}},
};

static const char *const real_providers[4] = {
    "Microsoft-Windows-DotNETRuntime", "Microsoft-Extensions-Logging",
    "Microsoft-DotNETCore-SampleProfiler", "Microsoft-Windows-DotNETRuntimeRundown"};

struct finder {
    const char *text;
    int found;
};

static void on_real_event(void *ud, const struct nettrace_event *ev)
{
    struct finder *f = ud;
    if (f->text != NULL && nettrace_payload_has_utf16(ev->payload, ev->payload_len, f->text)) {
        f->found++;
    }
}

static void check_real(const struct real_expect *e, const uint8_t *p, size_t n, size_t chunk)
{
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    struct finder f = {e->find, 0};
    nettrace_set_event_cb(&ck, on_real_event, &f);
    enum nettrace_verdict v = check(&ck, p, n, chunk);
    uint64_t off = 0;
    const char *err = nettrace_error(&ck, &off);
    if (v != NETTRACE_COMPLETE) {
        fail_msg("%s (chunk %zu): %s %s at %llu", e->file, chunk, nettrace_verdict_name(v),
                 err ? err : "-", (unsigned long long)off);
    }
    const struct nettrace_stats *st = nettrace_get_stats(&ck);
    assert_int_equal(st->bytes, n);
    assert_int_equal(st->events, e->events);
    assert_int_equal(st->lost, 0);
    assert_int_equal(st->missing_stacks, 0);
    assert_true(st->blocks[NETTRACE_BLOCK_METADATA] >= 1);
    assert_true(st->blocks[NETTRACE_BLOCK_EVENT] >= 1);
    assert_true(st->blocks[NETTRACE_BLOCK_SP] >= 1);
    assert_int_equal(nettrace_count(&ck, rt, 1), e->gc_start);
    assert_int_equal(nettrace_count(&ck, rt, 2), e->gc_end);
    assert_int_equal(nettrace_count(&ck, "Microsoft-DotNETCore-SampleProfiler", 0), e->samples);
    assert_int_equal(nettrace_count_named(&ck, mel, "FormattedMessage") +
                         nettrace_count_named(&ck, mel, "MessageJson") +
                         nettrace_count_named(&ck, mel, "Message"),
                     e->logs);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(nettrace_count_provider(&ck, real_providers[k]), e->provider_events[k]);
    }
    /* Every session ends with the EventPipe provider's ProcessInfo event (events.md §8). */
    assert_int_equal(nettrace_count_named(&ck, "Microsoft-DotNETCore-EventPipe", "ProcessInfo"), 1);
    assert_int_equal(f.found, e->found);
    struct nettrace_trace_info ti;
    assert_int_equal(nettrace_trace_info(&ck, &ti), 0);
    assert_int_equal(ti.process_id, e->pid);
    assert_int_equal(ti.pointer_size, 8);
    assert_true(ti.qpc_frequency > 0);
    nettrace_checker_fini(&ck);
}

static void test_nettrace_real_traces(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(reals) / sizeof(reals[0]); k++) {
        size_t n;
        uint8_t *p = fixture_read("nettrace", reals[k].file, &n);
        assert_true(n < 300 * 1024);
        check_real(&reals[k], p, n, 0);
        check_real(&reals[k], p, n, 4096);
        check_real(&reals[k], p, n, 1);
        check_real(&reals[k], p, n, 7919);
        free(p);
    }
}

static void test_nettrace_real_traces_cut(void **state)
{
    (void)state;
    for (size_t k = 0; k < sizeof(reals) / sizeof(reals[0]); k++) {
        size_t n;
        uint8_t *p = fixture_read("nettrace", reals[k].file, &n);
        /* Any cut is a truncated trace, never an invalid one; so is a stream without its end tag.
         */
        size_t stride = n / 97 + 1;
        for (size_t len = 0; len < n; len += stride) {
            struct nettrace_checker ck;
            assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
            enum nettrace_verdict v = check(&ck, p, len, 1024);
            if (v != NETTRACE_TRUNCATED) {
                fail_msg("%s cut at %zu: %s", reals[k].file, len, nettrace_verdict_name(v));
            }
            nettrace_checker_fini(&ck);
        }
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        assert_int_equal(check(&ck, p, n - 1, 0), NETTRACE_TRUNCATED);
        nettrace_checker_fini(&ck);
        /* And a flipped byte inside the first block header is caught. */
        p[NETTRACE_PREAMBLE_SIZE + 3] ^= 0x40;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        assert_int_equal(check(&ck, p, n, 0), NETTRACE_INVALID);
        nettrace_checker_fini(&ck);
        free(p);
    }
}

/* A tiny deterministic generator, so a failure reproduces. */
static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state >> 8;
}

/*
 * Robustness: thousands of randomly damaged copies (1-4 changed bytes, random chunkings) of a real
 * trace and of the synthetic one. AddressSanitizer turns any read outside a unit into a failure;
 * the verdict must be one of the three, a violation's offset inside the input, and a COMPLETE
 * verdict must account for every byte.
 */
static void test_nettrace_random_damage(void **state)
{
    (void)state;
    struct stream s;
    build(&s, MUT_NONE);
    size_t real_n;
    uint8_t *real = fixture_read("nettrace", "gc.nettrace", &real_n);
    uint32_t seed = 12345;
    for (int round = 0; round < 3000; round++) {
        const uint8_t *src = round % 2 ? real : s.b.p;
        size_t n = round % 2 ? real_n : s.b.n;
        uint8_t *p = malloc(n);
        assert_non_null(p);
        memcpy(p, src, n);
        int changes = 1 + (int)(lcg(&seed) % 4);
        for (int k = 0; k < changes; k++) {
            p[lcg(&seed) % n] = (uint8_t)lcg(&seed);
        }
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        for (size_t off = 0; off < n;) {
            size_t len = 1 + lcg(&seed) % 3000;
            len = len > n - off ? n - off : len;
            uint8_t *chunk = malloc(len);
            assert_non_null(chunk);
            memcpy(chunk, p + off, len);
            int rc = nettrace_feed(&ck, chunk, len);
            free(chunk);
            off += len;
            if (rc < 0) {
                break;
            }
        }
        enum nettrace_verdict v = nettrace_finish(&ck);
        uint64_t bad = 0;
        if (v == NETTRACE_INVALID) {
            assert_non_null(nettrace_error(&ck, &bad));
            assert_true(bad < n);
        } else if (v == NETTRACE_COMPLETE) {
            assert_int_equal(nettrace_get_stats(&ck)->bytes, n);
        } else {
            assert_int_equal(v, NETTRACE_TRUNCATED);
        }
        nettrace_checker_fini(&ck);
        free(p);
    }
    free(real);
    nb_free(&s.b);
}

/* The trace's clock (docs/nettrace.md §2.3): sync UTC + (ts - sync QPC) / frequency, in ns and in
 * ms rounded down (before the sync point too), and refused for a sync time that is not a date. */
static void test_nettrace_clock(void **state)
{
    (void)state;
    struct nettrace_trace_info ti = {.sync_time_utc = {2026, 11, 1, 30, 15, 0, 0, 250},
                                     .sync_time_qpc = 5000,
                                     .qpc_frequency = 10000000}; /* 100 ns ticks */
    const int64_t sync_ms = 1796050800000ll + 250;               /* 2026-11-30T15:00:00.250Z */
    int64_t ns = 0, ms = 0;
    assert_int_equal(nettrace_unix_ns(&ti, 5000, &ns), 0);
    assert_true(ns == sync_ms * 1000000);
    assert_int_equal(nettrace_unix_ns(&ti, 5000 + 15, &ns), 0);
    assert_true(ns == sync_ms * 1000000 + 1500);
    assert_int_equal(nettrace_unix_ms(&ti, 5000 + 9999, &ms), 0); /* 0.9999 ms after */
    assert_true(ms == sync_ms);
    assert_int_equal(nettrace_unix_ms(&ti, 5000 + 10000, &ms), 0);
    assert_true(ms == sync_ms + 1);
    assert_int_equal(nettrace_unix_ms(&ti, 5000 - 1, &ms), 0); /* 100 ns before */
    assert_true(ms == sync_ms - 1);
    assert_int_equal(nettrace_unix_ms(&ti, 5000 + 36000000000ll, &ms), 0); /* an hour */
    assert_true(ms == sync_ms + 3600000);
    struct nettrace_trace_info bad = ti;
    bad.sync_time_utc[1] = 13;
    assert_int_equal(nettrace_unix_ms(&bad, 5000, &ms), AGENT_E_INVAL);
    bad = ti;
    bad.qpc_frequency = 0;
    assert_int_equal(nettrace_unix_ns(&bad, 5000, &ns), AGENT_E_INVAL);
    bad = ti;
    assert_int_equal(nettrace_unix_ns(&bad, INT64_MIN, &ns), AGENT_E_INVAL); /* overflows */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nettrace_minimal_complete),
        cmocka_unit_test(test_nettrace_dropped_events),
        cmocka_unit_test(test_nettrace_metadata_records),
        cmocka_unit_test(test_nettrace_metadata_hook),
        cmocka_unit_test(test_nettrace_every_prefix_truncated),
        cmocka_unit_test(test_nettrace_chunking_identical),
        cmocka_unit_test(test_nettrace_corruptions),
        cmocka_unit_test(test_nettrace_failed_stays_failed),
        cmocka_unit_test(test_nettrace_block_cap_option),
        cmocka_unit_test(test_nettrace_metadata_cap_option),
        cmocka_unit_test(test_nettrace_missing_stack),
        cmocka_unit_test(test_nettrace_header_runs),
        cmocka_unit_test(test_nettrace_status_and_end),
        cmocka_unit_test(test_nettrace_payload_search),
        cmocka_unit_test(test_nettrace_real_traces),
        cmocka_unit_test(test_nettrace_real_traces_cut),
        cmocka_unit_test(test_nettrace_random_damage),
        cmocka_unit_test(test_nettrace_clock),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
