/* SPDX-License-Identifier: MIT */
/*
 * NetTrace V6 (docs/nettrace.md §7): files from a small writer here, read through
 * events/nettrace.h (the container), events/ev_payload.h (V6 metadata rows, the new type codes)
 * and events/ev_stream.h (an EventCounters sample out of a V6 file). Every prefix of the file must
 * be TRUNCATED, whole and byte by byte; a few corruptions must be INVALID. A metadata id redefined
 * after a flush reaches ev_json, ev_stream and ev_filter as its new definition.
 *
 * With NETTRACE_V6_SEED=<path> the writer's file is also saved there (the fuzz seeds of
 * tests/fuzz/corpus/fuzz_nettrace and fuzz_events come from it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_filter.h"
#include "ev_json.h"
#include "ev_payload.h"
#include "ev_rd.h"
#include "ev_stream.h"
#include "nettrace.h"
#include "wbuf.h"

/* ---- a growable byte writer -------------------------------------------------------------- */

/* ---- the V6 writer ----------------------------------------------------------------------- */

#define SYNC_TICKS 1000000
#define TICK_FREQ  1000000000

static void v6_header(struct wb *w)
{
    wb_raw(w, "Nettrace", 8);
    wb_u32(w, 0);
    wb_u32(w, 6);
    wb_u32(w, 0);
}

static void v6_block(struct wb *w, unsigned kind, const struct wb *body)
{
    wb_u32(w, (uint32_t)body->n | ((uint32_t)kind << 24));
    wb_raw(w, body->b, body->n);
}

static void v6_trace(struct wb *w)
{
    static const uint16_t st[8] = {2025, 1, 4, 2, 3, 4, 5, 678};
    struct wb b = {0};
    for (int k = 0; k < 8; k++) {
        wb_u16(&b, st[k]);
    }
    wb_u64(&b, SYNC_TICKS);
    wb_u64(&b, TICK_FREQ);
    wb_u32(&b, 8);
    wb_u32(&b, 4);
    wb_str(&b, "HardwareThreadCount");
    wb_str(&b, "8");
    wb_str(&b, "ProcessId");
    wb_str(&b, "4242");
    wb_str(&b, "ExpectedCPUSamplingRate");
    wb_str(&b, "1000000");
    wb_str(&b, "Unknown");
    wb_str(&b, "x");
    v6_block(w, 1, &b);
    free(b.b);
}

/* One field description: u16 size, name, then the Type bytes the caller wrote into `type`. */
static void fd(struct wb *w, const char *name, const struct wb *type)
{
    struct wb f = {0};
    wb_str(&f, name);
    wb_raw(&f, type->b, type->n);
    wb_sized16(w, &f);
    free(f.b);
}

static void fd_scalar(struct wb *w, const char *name, unsigned code)
{
    struct wb t = {0};
    wb_u8(&t, code);
    fd(w, name, &t);
    free(t.b);
}

/* Metadata 1 "AllTypes": every new type code, nested objects, arrays (ids below are field order).
 */
static void md_all_types(struct wb *rows)
{
    struct wb r = {0};
    struct wb t = {0};
    wb_varu(&r, 1);
    wb_str(&r, "Test-Provider");
    wb_varu(&r, 7);
    wb_str(&r, "AllTypes");
    wb_u16(&r, 11);
    fd_scalar(&r, "vi", 20);
    fd_scalar(&r, "vu", 21);
    wb_u8(&t, 22); /* FixedLengthArray of Int32, 3 elements */
    wb_u8(&t, 9);
    wb_u16(&t, 3);
    fd(&r, "fa", &t);
    t.n = 0;
    fd_scalar(&r, "u8", 23);
    wb_u8(&t, 24); /* RelLoc of UTF8CodeUnit */
    wb_u8(&t, 23);
    fd(&r, "rl", &t);
    t.n = 0;
    wb_u8(&t, 25); /* DataLoc of UInt16 */
    wb_u8(&t, 8);
    fd(&r, "dl", &t);
    t.n = 0;
    fd_scalar(&r, "b8", 26);
    /* obj { x: Double, inner { s: String } }, with extra bytes after inner's Type */
    struct wb in = {0};
    wb_u8(&in, 1);
    wb_u16(&in, 1);
    fd_scalar(&in, "s", 18);
    wb_u8(&in, 0xEE); /* ignored tail of the field description */
    wb_u8(&t, 1);
    wb_u16(&t, 2);
    fd_scalar(&t, "x", 14);
    fd(&t, "inner", &in);
    fd(&r, "obj", &t);
    t.n = 0;
    /* arr: Array of { k: VarUInt, t: String } */
    in.n = 0;
    wb_u8(&in, 1);
    wb_u16(&in, 2);
    fd_scalar(&in, "k", 21);
    fd_scalar(&in, "t", 18);
    wb_u8(&t, 19);
    wb_raw(&t, in.b, in.n);
    fd(&r, "arr", &t);
    t.n = 0;
    wb_u8(&t, 22); /* FixedLengthArray of String, 2 elements */
    wb_u8(&t, 18);
    wb_u16(&t, 2);
    fd(&r, "fs", &t);
    t.n = 0;
    fd_scalar(&r, "tail", 11);
    /* OptionalMetadata */
    struct wb o = {0};
    wb_u8(&o, 1);
    wb_u8(&o, 11); /* opcode */
    wb_u8(&o, 3);
    wb_u64(&o, 0xF0000000000Full); /* keywords; the session bits are masked off */
    wb_u8(&o, 5);
    wb_str(&o, "a description");
    wb_u8(&o, 6);
    wb_str(&o, "k");
    wb_str(&o, "v");
    wb_u8(&o, 7);
    wb_raw(&o, "0123456789abcdef", 16);
    wb_u8(&o, 8);
    wb_u8(&o, 4); /* level */
    wb_u8(&o, 9);
    wb_u8(&o, 3); /* version */
    wb_u8(&o, 4);
    wb_str(&o, "template {x}");
    wb_sized16(&r, &o);
    wb_raw(&r, "\x01\x02", 2); /* an undefined tail of the row */
    wb_sized16(rows, &r);
    free(r.b);
    free(t.b);
    free(in.b);
    free(o.b);
}

static const char *const mean_names[] = {"Name",   "DisplayName", "Mean",     "StandardDeviation",
                                         "Count",  "Min",         "Max",      "IntervalSec",
                                         "Series", "CounterType", "Metadata", "DisplayUnits"};
static const uint8_t mean_codes[] = {18, 18, 14, 14, 9, 14, 14, 13, 18, 18, 18, 18};

/* Metadata 2: EventCounters, "" { Payload { Mean shape } } (docs/events.md §2.2). */
static void md_counters(struct wb *rows)
{
    struct wb r = {0};
    struct wb payload = {0};
    struct wb outer = {0};
    wb_varu(&r, 2);
    wb_str(&r, "System.Runtime");
    wb_varu(&r, 1);
    wb_str(&r, "EventCounters");
    wb_u8(&payload, 1);
    wb_u16(&payload, 12);
    for (size_t k = 0; k < 12; k++) {
        fd_scalar(&payload, mean_names[k], mean_codes[k]);
    }
    wb_u8(&outer, 1);
    wb_u16(&outer, 1);
    fd(&outer, "Payload", &payload);
    wb_u16(&r, 1);
    fd(&r, "", &outer);
    wb_u16(&r, 0); /* empty OptionalMetadata */
    wb_sized16(rows, &r);
    free(r.b);
    free(payload.b);
    free(outer.b);
}

static void metadata_block(struct wb *w)
{
    struct wb b = {0};
    wb_u16(&b, 2); /* header size, excluding itself: two undefined bytes */
    wb_u16(&b, 0xABCD);
    md_all_types(&b);
    md_counters(&b);
    v6_block(w, 3, &b);
    free(b.b);
}

/* The AllTypes payload: fixed part, then the data RelLoc and DataLoc point at. */
static void all_types_payload(struct wb *p)
{
    wb_varu(p, 599);        /* vi = -300 zig-zagged */
    wb_varu(p, 1ull << 40); /* vu */
    wb_u32(p, 1);           /* fa */
    wb_u32(p, (uint32_t)-2);
    wb_u32(p, 3);
    wb_u8(p, 'Z');            /* u8 */
    size_t rl_end = p->n + 4; /* rl, patched below */
    wb_u32(p, 0);
    size_t dl_at = p->n;
    wb_u32(p, 0);     /* dl, patched below */
    wb_u8(p, 1);      /* b8 */
    wb_f64(p, 2.5);   /* obj.x */
    wb_wstr(p, "in"); /* obj.inner.s */
    wb_u16(p, 2);     /* arr */
    wb_varu(p, 5);
    wb_wstr(p, "a");
    wb_varu(p, 300);
    wb_wstr(p, "bc");
    wb_wstr(p, "p"); /* fs */
    wb_wstr(p, "q");
    wb_u64(p, (uint64_t)-5); /* tail */
    size_t data = p->n;
    wb_raw(p, "hello", 5);
    wb_u16(p, 7);
    wb_u16(p, 9);
    uint32_t rl = (5u << 16) | (uint32_t)(data - rl_end);
    uint32_t dl = (4u << 16) | (uint32_t)(data + 5);
    for (int k = 0; k < 4; k++) {
        p->b[rl_end - 4 + k] = (uint8_t)(rl >> (8 * k));
        p->b[dl_at + k] = (uint8_t)(dl >> (8 * k));
    }
}

static void counters_payload(struct wb *p)
{
    wb_wstr(p, "cpu-usage");
    wb_wstr(p, "CPU Usage");
    wb_f64(p, 12.5);
    wb_f64(p, 0);
    wb_u32(p, 1);
    wb_f64(p, 12.5);
    wb_f64(p, 12.5);
    wb_f32(p, 1.0f);
    wb_wstr(p, "Interval=1000");
    wb_wstr(p, "Mean");
    wb_wstr(p, "k:v");
    wb_wstr(p, "%");
}

/* An uncompressed V6 row (nettrace.md §7): size, 48 header bytes, payload. */
static void row_uncompressed(struct wb *b, uint32_t md, uint32_t seq, uint64_t thread,
                             uint32_t stack, uint64_t ts, uint32_t labels, const struct wb *pl)
{
    wb_u32(b, 48 + (uint32_t)pl->n);
    wb_u32(b, md | 0x80000000u); /* sorted */
    wb_u32(b, seq);
    wb_u64(b, thread);
    wb_u64(b, thread);
    wb_u32(b, 0);
    wb_u32(b, stack);
    wb_u64(b, ts);
    wb_u32(b, labels);
    wb_u32(b, (uint32_t)pl->n);
    wb_raw(b, pl->b, pl->n);
}

static void event_block_header(struct wb *b, unsigned flags)
{
    wb_u16(b, 24); /* a header larger than 20: 4 reserved bytes */
    wb_u16(b, flags);
    wb_u64(b, SYNC_TICKS);
    wb_u64(b, SYNC_TICKS + 3000000);
    wb_u32(b, 0);
}

static void event_blocks(struct wb *w)
{
    struct wb pl = {0};
    struct wb b = {0};
    /* Uncompressed: AllTypes on thread 1, stack 1, label list 1. */
    all_types_payload(&pl);
    event_block_header(&b, 0);
    row_uncompressed(&b, 1, 1, 1, 1, SYNC_TICKS + 1000000, 1, &pl);
    v6_block(w, 2, &b);
    /* Compressed: AllTypes then EventCounters, both on thread 2. */
    b.n = 0;
    event_block_header(&b, 1);
    wb_u8(&b, 0x01 | 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80);
    wb_varu(&b, 1);                    /* metadata id */
    wb_varu(&b, 4);                    /* sequence 0 + 4 + 1 = 5 (4 dropped) */
    wb_varu(&b, 2);                    /* capture thread */
    wb_varu(&b, 3);                    /* processor */
    wb_varu(&b, 2);                    /* thread */
    wb_varu(&b, 2);                    /* stack */
    wb_varu(&b, SYNC_TICKS + 2000000); /* timestamp delta from 0 */
    wb_varu(&b, 2);                    /* label list */
    wb_varu(&b, pl.n);
    wb_raw(&b, pl.b, pl.n);
    pl.n = 0;
    counters_payload(&pl);
    wb_u8(&b, 0x01 | 0x10 | 0x80);
    wb_varu(&b, 2);      /* sequence 6, same thread and stack */
    wb_varu(&b, 500000); /* + 0.5 s */
    wb_varu(&b, 0);      /* no labels */
    wb_varu(&b, pl.n);
    wb_raw(&b, pl.b, pl.n);
    v6_block(w, 2, &b);
    free(pl.b);
    free(b.b);
}

static void stack_block(struct wb *w)
{
    struct wb b = {0};
    wb_u32(&b, 1);
    wb_u32(&b, 2);
    wb_u32(&b, 16);
    wb_u64(&b, 0x1000);
    wb_u64(&b, 0x2000);
    wb_u32(&b, 0);
    v6_block(w, 5, &b);
    free(b.b);
}

static void thread_block(struct wb *w)
{
    struct wb b = {0};
    struct wb r = {0};
    wb_varu(&r, 1);
    wb_u8(&r, 1);
    wb_str(&r, "main");
    wb_u8(&r, 2);
    wb_varu(&r, 4242);
    wb_u8(&r, 3);
    wb_varu(&r, 4243);
    wb_u8(&r, 4);
    wb_str(&r, "role");
    wb_str(&r, "ui");
    wb_sized16(&b, &r);
    r.n = 0;
    wb_varu(&r, 2);
    wb_u8(&r, 3);
    wb_varu(&r, 70000);
    wb_sized16(&b, &r);
    v6_block(w, 6, &b);
    free(b.b);
    free(r.b);
}

static void label_block(struct wb *w)
{
    struct wb b = {0};
    wb_u32(&b, 1);
    wb_u32(&b, 2);
    /* list 1: ActivityId, RelatedActivityId, TraceId, SpanId, key/string, key/varint, opcode,
     * keywords, level, version (last) */
    wb_u8(&b, 1);
    wb_raw(&b, "AAAAAAAAAAAAAAAA", 16);
    wb_u8(&b, 2);
    wb_raw(&b, "BBBBBBBBBBBBBBBB", 16);
    wb_u8(&b, 3);
    wb_raw(&b, "CCCCCCCCCCCCCCCC", 16);
    wb_u8(&b, 4);
    wb_u64(&b, 77);
    wb_u8(&b, 5);
    wb_str(&b, "key");
    wb_str(&b, "value");
    wb_u8(&b, 6);
    wb_str(&b, "n");
    wb_varu(&b, 12345);
    wb_u8(&b, 7);
    wb_u8(&b, 1);
    wb_u8(&b, 8);
    wb_u64(&b, 0xFF);
    wb_u8(&b, 9);
    wb_u8(&b, 4);
    wb_u8(&b, 10 | 0x80);
    wb_u8(&b, 2);
    /* list 2: one ActivityId */
    wb_u8(&b, 1 | 0x80);
    wb_raw(&b, "DDDDDDDDDDDDDDDD", 16);
    v6_block(w, 8, &b);
    free(b.b);
}

/* A sequence point (flags 1: flush the threads, 2: flush the metadata) with threads 1 and 2. */
static void sequence_point(struct wb *w, uint32_t flags, bool threads)
{
    struct wb b = {0};
    wb_u64(&b, SYNC_TICKS + 3000000);
    wb_u32(&b, flags);
    wb_u32(&b, threads ? 2 : 0);
    if (threads) {
        wb_varu(&b, 1);
        wb_varu(&b, 1);
        wb_varu(&b, 2);
        wb_varu(&b, 6);
    }
    v6_block(w, 4, &b);
    free(b.b);
}

static void remove_threads(struct wb *w)
{
    struct wb b = {0};
    wb_varu(&b, 1);
    wb_varu(&b, 1);
    wb_varu(&b, 2);
    wb_varu(&b, 8); /* 2 more dropped at the end of thread 2 */
    v6_block(w, 7, &b);
    free(b.b);
}

/* The file up to its events: header, trace, an unknown block, threads, metadata, stacks, labels,
 * the three events. */
static void v6_opening(struct wb *w)
{
    struct wb unknown = {0};
    v6_header(w);
    v6_trace(w);
    wb_raw(&unknown, "future", 6);
    v6_block(w, 0x42, &unknown); /* an unknown kind: skipped */
    thread_block(w);
    metadata_block(w);
    stack_block(w);
    label_block(w);
    event_blocks(w);
    free(unknown.b);
}

/* The whole test file. */
static uint8_t *v6_file(size_t *n)
{
    struct wb w = {0};
    struct wb unknown = {0};
    v6_opening(&w);
    sequence_point(&w, 0, true);
    remove_threads(&w);
    unknown.n = 0;
    v6_block(&w, 9, &unknown);    /* unknown and empty */
    sequence_point(&w, 3, false); /* flushes the threads and the metadata */
    unknown.n = 0;
    v6_block(&w, 0, &unknown); /* EndOfStream */
    free(unknown.b);
    *n = w.n;
    return w.b;
}

/* ---- ev_payload: V6 rows and the new type codes ------------------------------------------ */

/* The AllTypes row (after its u16 size) and one payload. */
static void all_types_row(struct wb *row, struct wb *pl)
{
    struct wb rows = {0};
    md_all_types(&rows);
    wb_raw(row, rows.b + 2, rows.n - 2);
    all_types_payload(pl);
    free(rows.b);
}

static void str_at(const struct ev_record *rec, const char *path, const char *want)
{
    char buf[64];
    int idx = ev_schema_find(rec->schema, path);
    assert_true(idx > 0);
    assert_int_equal(ev_record_str(rec, idx, buf, sizeof(buf), NULL), 0);
    assert_string_equal(buf, want);
    assert_int_equal(ev_record_str_len(rec, idx), strlen(want));
}

static const struct ev_value *val_at(const struct ev_record *rec, const char *path)
{
    int idx = ev_schema_find(rec->schema, path);
    assert_true(idx > 0);
    return &rec->v[idx];
}

static void test_schema_v6(void **state)
{
    (void)state;
    struct wb row = {0};
    struct wb pl = {0};
    all_types_row(&row, &pl);
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse_v6(row.b, row.n, &s), 0);
    assert_int_equal(s->metadata_id, 1);
    assert_string_equal(s->provider, "Test-Provider");
    assert_string_equal(s->event_name, "AllTypes");
    assert_int_equal(s->event_id, 7);
    assert_int_equal(s->version, 3);
    assert_int_equal(s->level, 4);
    assert_int_equal(s->opcode, 11);
    assert_int_equal(s->keywords, 0xF);
    assert_int_equal(s->fields[0].nchild, 11);

    struct ev_record rec;
    assert_int_equal(ev_record_decode(&rec, s, pl.b, pl.n), 0);
    int64_t i = 0;
    double d = 0;
    assert_int_equal(ev_record_path_i64(&rec, "vi", &i), 0);
    assert_int_equal(i, -300);
    assert_int_equal(ev_record_path_f64(&rec, "vi", &d), 0);
    assert_true(d == -300.0);
    assert_int_equal(ev_record_path_i64(&rec, "vu", &i), 0);
    assert_int_equal(i, 1ll << 40);
    assert_int_equal(ev_record_path_f64(&rec, "vu", &d), 0);
    assert_true(d == 1099511627776.0);
    const struct ev_value *v = val_at(&rec, "fa");
    assert_int_equal(v->count, 3);
    assert_int_equal(v->len, 12);
    assert_int_equal((int32_t)ev_load_u32(v->p + 4), -2);
    assert_int_equal(ev_record_path_i64(&rec, "u8", &i), 0);
    assert_int_equal(i, 'Z');
    str_at(&rec, "rl", "hello");
    assert_int_equal(val_at(&rec, "rl")->count, 5);
    v = val_at(&rec, "dl");
    assert_int_equal(v->count, 2);
    assert_int_equal(v->len, 4);
    assert_int_equal(ev_load_u16(v->p), 7);
    assert_int_equal(ev_load_u16(v->p + 2), 9);
    assert_int_equal(ev_record_path_i64(&rec, "b8", &i), 0);
    assert_int_equal(i, 1);
    assert_int_equal(ev_record_path_f64(&rec, "obj.x", &d), 0);
    assert_true(d == 2.5);
    str_at(&rec, "obj.inner.s", "in");
    assert_int_equal(val_at(&rec, "arr")->count, 2);
    assert_int_equal(val_at(&rec, "fs")->count, 2);
    assert_int_equal(val_at(&rec, "fs")->len, 8);
    assert_int_equal(ev_record_path_i64(&rec, "tail", &i), 0);
    assert_int_equal(i, -5);
    /* Nodes inside arrays have no value; strings are not numbers. */
    assert_int_equal(ev_record_path_i64(&rec, "arr.k", &i), AGENT_E_NOTFOUND);
    assert_int_equal(ev_record_path_f64(&rec, "obj.inner.s", &d), AGENT_E_INVAL);
    char small[3];
    assert_int_equal(ev_record_path_str(&rec, "rl", small, sizeof(small)), AGENT_E_NOSPACE);

    /* Every shorter payload is refused (the located data sits at the end). */
    for (size_t k = 0; k < pl.n; k++) {
        assert_int_equal(ev_record_decode(&rec, s, pl.b, k), AGENT_E_PROTO);
    }
    ev_schema_free(s);

    /* Every prefix of the row: no crash; refused until the field descriptions are whole. */
    for (size_t k = 0; k < row.n; k++) {
        int rc = ev_schema_parse_v6(row.b, k, &s);
        if (rc == 0) {
            ev_schema_free(s);
        } else {
            assert_int_equal(rc, AGENT_E_PROTO);
        }
    }
    assert_int_equal(ev_schema_parse_v6(row.b, 40, &s), AGENT_E_PROTO);
    free(row.b);
    free(pl.b);
}

/* A one-field row: Test/E with field "f" of the given Type bytes. */
static int parse_one(const uint8_t *type, size_t n, struct ev_schema **s)
{
    struct wb r = {0};
    struct wb t = {0};
    wb_varu(&r, 5);
    wb_str(&r, "Test");
    wb_varu(&r, 1);
    wb_str(&r, "E");
    wb_u16(&r, 1);
    wb_raw(&t, type, n);
    fd(&r, "f", &t);
    int rc = ev_schema_parse_v6(r.b, r.n, s);
    free(r.b);
    free(t.b);
    return rc;
}

static void test_schema_v6_bad(void **state)
{
    (void)state;
    struct ev_schema *s = NULL;
    static const uint8_t unknown[] = {2};
    static const uint8_t relloc_string[] = {24, 18};
    static const uint8_t dataloc_empty[] = {25, 1, 0, 0};
    static const uint8_t huge[] = {22, 22, 14, 0xFF, 0xFF, 0xFF, 0xFF};
    static const uint8_t code27[] = {27};
    assert_int_equal(parse_one(unknown, sizeof(unknown), &s), AGENT_E_PROTO);
    assert_int_equal(parse_one(relloc_string, sizeof(relloc_string), &s), AGENT_E_PROTO);
    assert_int_equal(parse_one(dataloc_empty, sizeof(dataloc_empty), &s), AGENT_E_PROTO);
    assert_int_equal(parse_one(huge, sizeof(huge), &s), AGENT_E_PROTO);
    assert_int_equal(parse_one(code27, sizeof(code27), &s), AGENT_E_PROTO);

    /* A VarUInt over INT64_MAX: f64 yes, i64 TOOBIG; a VarInt over-long: refused. */
    static const uint8_t varuint[] = {21};
    assert_int_equal(parse_one(varuint, sizeof(varuint), &s), 0);
    struct ev_record rec;
    static const uint8_t big[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01};
    assert_int_equal(ev_record_decode(&rec, s, big, sizeof(big)), 0);
    int64_t i;
    double d;
    assert_int_equal(ev_record_path_i64(&rec, "f", &i), AGENT_E_TOOBIG);
    assert_int_equal(ev_record_path_f64(&rec, "f", &d), 0);
    assert_true(d == 18446744073709551615.0);
    static const uint8_t overlong[] = {0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02};
    assert_int_equal(ev_record_decode(&rec, s, overlong, sizeof(overlong)), AGENT_E_PROTO);
    ev_schema_free(s);

    /* DataLoc out of the payload, and a size that is not whole elements. */
    static const uint8_t dataloc[] = {25, 8};
    assert_int_equal(parse_one(dataloc, sizeof(dataloc), &s), 0);
    static const uint8_t out[] = {4, 0, 4, 0, 0xAA, 0xBB, 0xCC};  /* 4 bytes at 4: 3 left */
    static const uint8_t odd[] = {4, 0, 3, 0, 0xAA, 0xBB, 0xCC};  /* 3 bytes of UInt16 */
    static const uint8_t good[] = {4, 0, 2, 0, 0xAA, 0xBB, 0xCC}; /* one UInt16 at 4 */
    assert_int_equal(ev_record_decode(&rec, s, out, sizeof(out)), AGENT_E_PROTO);
    assert_int_equal(ev_record_decode(&rec, s, odd, sizeof(odd)), AGENT_E_PROTO);
    assert_int_equal(ev_record_decode(&rec, s, good, sizeof(good)), 0);
    assert_int_equal(rec.v[1].count, 1);
    assert_int_equal(ev_load_u16(rec.v[1].p), 0xBBAA);
    ev_schema_free(s);

    /* A NUL inside a name. */
    struct wb r = {0};
    wb_varu(&r, 5);
    wb_varu(&r, 3);
    wb_raw(&r, "a\0b", 3);
    wb_varu(&r, 1);
    wb_str(&r, "E");
    wb_u16(&r, 0);
    assert_int_equal(ev_schema_parse_v6(r.b, r.n, &s), AGENT_E_PROTO);
    free(r.b);
}

/* ---- nettrace: the container ------------------------------------------------------------- */

struct ev_copy {
    char provider[32];
    char name[32];
    uint32_t metadata_id;
    uint32_t sequence;
    uint64_t thread_id;
    uint64_t capture_thread_id;
    uint32_t stack_id;
    uint32_t labels;
    char act[17]; /* the label list's ActivityId as text ("" when none) */
    char rel[17];
    int64_t timestamp;
    size_t payload_len;
    uint8_t payload[512];
};

struct seen {
    size_t nev;
    struct ev_copy ev[8];
    size_t nmd;
    bool md_v6[8];
    uint32_t md_id[8];
    struct ev_schema *schema[8];
};

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t len = strlen(src);
    assert_true(len < cap);
    memcpy(dst, src, len + 1);
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct seen *sn = ud;
    assert_true(sn->nev < 8);
    struct ev_copy *c = &sn->ev[sn->nev++];
    copy_str(c->provider, sizeof(c->provider), ev->provider);
    copy_str(c->name, sizeof(c->name), ev->event_name);
    c->metadata_id = ev->metadata_id;
    c->sequence = ev->sequence;
    c->thread_id = ev->thread_id;
    c->capture_thread_id = ev->capture_thread_id;
    c->stack_id = ev->stack_id;
    c->labels = ev->label_list_id;
    if (ev->activity_id != NULL) {
        memcpy(c->act, ev->activity_id, 16);
    }
    if (ev->related_activity_id != NULL) {
        memcpy(c->rel, ev->related_activity_id, 16);
    }
    c->timestamp = ev->timestamp;
    assert_true(ev->payload_len <= sizeof(c->payload));
    c->payload_len = ev->payload_len;
    memcpy(c->payload, ev->payload, ev->payload_len);
}

static void on_md(void *ud, const struct nettrace_metadata *md, const uint8_t *p, size_t n)
{
    struct seen *sn = ud;
    assert_true(sn->nmd < 8);
    sn->md_v6[sn->nmd] = md->v6;
    sn->md_id[sn->nmd] = md->metadata_id;
    assert_int_equal(ev_schema_parse_v6(p, n, &sn->schema[sn->nmd]), 0);
    assert_string_equal(sn->schema[sn->nmd]->provider, md->provider);
    sn->nmd++;
}

static void seen_free(struct seen *sn)
{
    for (size_t k = 0; k < sn->nmd; k++) {
        ev_schema_free(sn->schema[k]);
    }
    memset(sn, 0, sizeof(*sn));
}

/* Feeds p[0..n) in chunks of `chunk` bytes (0 = whole) and finishes. */
static enum nettrace_verdict check(const uint8_t *p, size_t n, size_t chunk, struct seen *sn,
                                   struct nettrace_checker *ck)
{
    assert_int_equal(nettrace_checker_init(ck, NULL), 0);
    if (sn != NULL) {
        nettrace_set_event_cb(ck, on_event, sn);
        nettrace_set_metadata_cb(ck, on_md, sn);
    }
    int rc = 0;
    if (chunk == 0) {
        rc = nettrace_feed(ck, p, n);
    } else {
        for (size_t off = 0; off < n && rc == 0; off += chunk) {
            rc = nettrace_feed(ck, p + off, n - off < chunk ? n - off : chunk);
        }
    }
    enum nettrace_verdict v = nettrace_finish(ck);
    assert_true((rc == 0) == (v != NETTRACE_INVALID));
    return v;
}

static void check_whole(const struct seen *sn, const struct nettrace_checker *ck)
{
    struct nettrace_trace_info ti;
    assert_int_equal(nettrace_trace_info(ck, &ti), 0);
    assert_int_equal(ti.sync_time_utc[0], 2025);
    assert_int_equal(ti.sync_time_qpc, SYNC_TICKS);
    assert_int_equal(ti.qpc_frequency, TICK_FREQ);
    assert_int_equal(ti.pointer_size, 8);
    assert_int_equal(ti.process_id, 4242);
    assert_int_equal(ti.processors, 8);
    assert_int_equal(ti.sampling_rate_ns, 1000000);

    const struct nettrace_stats *st = nettrace_get_stats(ck);
    assert_int_equal(st->events, 3);
    assert_int_equal(st->metadata, 2);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_EVENT], 2);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_METADATA], 1);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_STACK], 1);
    assert_int_equal(st->blocks[NETTRACE_BLOCK_SP], 2);
    assert_int_equal(st->stacks, 2);
    assert_int_equal(st->missing_stacks, 0);
    assert_int_equal(st->lost, 4 + 2);
    assert_int_equal(nettrace_count(ck, "Test-Provider", 7), 2);
    assert_int_equal(nettrace_count_named(ck, "System.Runtime", "EventCounters"), 1);

    assert_int_equal(sn->nmd, 2);
    assert_true(sn->md_v6[0] && sn->md_v6[1]);
    assert_int_equal(sn->md_id[1], 2);
    assert_int_equal(sn->nev, 3);
    const struct ev_copy *e = &sn->ev[0];
    assert_string_equal(e->provider, "Test-Provider");
    assert_string_equal(e->name, "AllTypes");
    assert_int_equal(e->metadata_id, 1);
    assert_int_equal(e->sequence, 1);
    assert_int_equal(e->thread_id, 1);
    assert_int_equal(e->stack_id, 1);
    assert_int_equal(e->labels, 1);
    assert_string_equal(e->act, "AAAAAAAAAAAAAAAA"); /* label list 1's activity ids */
    assert_string_equal(e->rel, "BBBBBBBBBBBBBBBB");
    assert_int_equal(e->timestamp, SYNC_TICKS + 1000000);
    e = &sn->ev[1];
    assert_int_equal(e->sequence, 5);
    assert_int_equal(e->thread_id, 2);
    assert_int_equal(e->capture_thread_id, 2);
    assert_int_equal(e->stack_id, 2);
    assert_int_equal(e->labels, 2);
    assert_string_equal(e->act, "DDDDDDDDDDDDDDDD");
    assert_string_equal(e->rel, "");
    assert_int_equal(e->timestamp, SYNC_TICKS + 2000000);
    assert_int_equal(e->payload_len, sn->ev[0].payload_len);
    assert_memory_equal(e->payload, sn->ev[0].payload, e->payload_len);
    e = &sn->ev[2];
    assert_string_equal(e->provider, "System.Runtime");
    assert_string_equal(e->name, "EventCounters");
    assert_int_equal(e->sequence, 6);
    assert_int_equal(e->thread_id, 2);
    assert_int_equal(e->stack_id, 2);
    assert_int_equal(e->labels, 0);
    assert_string_equal(e->act, "");
    assert_int_equal(e->timestamp, SYNC_TICKS + 2500000);

    /* The payloads decode with the schemas the callback built. */
    struct ev_record rec;
    int64_t i;
    double d;
    assert_int_equal(
        ev_record_decode(&rec, sn->schema[0], sn->ev[1].payload, sn->ev[1].payload_len), 0);
    assert_int_equal(ev_record_path_i64(&rec, "tail", &i), 0);
    assert_int_equal(i, -5);
    assert_int_equal(ev_record_decode(&rec, sn->schema[1], e->payload, e->payload_len), 0);
    assert_int_equal(ev_record_path_f64(&rec, "Payload.Mean", &d), 0);
    assert_true(d == 12.5);
}

static void test_container_v6(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f = v6_file(&n);
    static const size_t chunks[] = {0, 1, 7};
    for (size_t k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
        struct seen sn;
        struct nettrace_checker ck;
        memset(&sn, 0, sizeof(sn));
        enum nettrace_verdict v = check(f, n, chunks[k], &sn, &ck);
        if (v != NETTRACE_COMPLETE) {
            fprintf(stderr, "%s\n", nettrace_error(&ck, NULL));
        }
        assert_int_equal(v, NETTRACE_COMPLETE);
        check_whole(&sn, &ck);
        nettrace_checker_fini(&ck);
        seen_free(&sn);
    }
    free(f);
}

/* Every prefix is TRUNCATED, fed whole and byte by byte; one byte more after the end, INVALID. */
static void test_container_v6_truncated(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f = v6_file(&n);
    for (size_t k = 0; k < n; k++) {
        struct nettrace_checker ck;
        enum nettrace_verdict v = check(f, k, 0, NULL, &ck);
        if (v != NETTRACE_TRUNCATED) {
            fprintf(stderr, "prefix %zu: %s\n", k, nettrace_error(&ck, NULL));
        }
        assert_int_equal(v, NETTRACE_TRUNCATED);
        nettrace_checker_fini(&ck);
        assert_int_equal(check(f, k, 1, NULL, &ck), NETTRACE_TRUNCATED);
        nettrace_checker_fini(&ck);
    }
    uint8_t *more = malloc(n + 1);
    assert_non_null(more);
    memcpy(more, f, n);
    more[n] = 0;
    struct nettrace_checker ck;
    assert_int_equal(check(more, n + 1, 0, NULL, &ck), NETTRACE_INVALID);
    nettrace_checker_fini(&ck);
    free(more);
    free(f);
}

/* Offset of the first block of `kind` after the header (block headers walked by their sizes). */
static size_t block_at(const uint8_t *f, size_t n, unsigned kind, unsigned nth)
{
    for (size_t off = 20; off + 4 <= n;) {
        uint32_t h = ev_load_u32(f + off);
        if ((h >> 24) == kind && nth-- == 0) {
            return off;
        }
        off += 4 + (h & 0xFFFFFFu);
    }
    fail_msg("no block of kind %u", kind);
    return 0;
}

static void expect_invalid(const uint8_t *f, size_t n, size_t at, uint8_t byte, const char *what)
{
    uint8_t *g = malloc(n);
    assert_non_null(g);
    memcpy(g, f, n);
    g[at] = byte;
    struct nettrace_checker ck;
    enum nettrace_verdict v = check(g, n, 0, NULL, &ck);
    if (v != NETTRACE_INVALID) {
        fail_msg("%s: verdict %s", what, nettrace_verdict_name(v));
    }
    const char *msg = nettrace_error(&ck, NULL);
    assert_non_null(msg);
    nettrace_checker_fini(&ck);
    free(g);
}

static void test_container_v6_invalid(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f = v6_file(&n);
    expect_invalid(f, n, 12, 7, "major 7");
    expect_invalid(f, n, 8, 1, "reserved 1");
    expect_invalid(f, n, 23, 2, "first block not Trace");
    expect_invalid(f, n, 20 + 4 + 32, 3, "pointer size 3");
    size_t md = block_at(f, n, 3, 0);
    expect_invalid(f, n, md + 4 + 4 + 1, 0xFF, "metadata row size past the block");
    expect_invalid(f, n, md + 4 + 4 + 2, 0, "metadata id 0");
    size_t ev = block_at(f, n, 2, 0);
    expect_invalid(f, n, ev + 4 + 24 + 4, 9, "undefined metadata id");
    expect_invalid(f, n, ev + 4 + 24, 0xFF, "event size past the block");
    expect_invalid(f, n, ev + 4 + 24 + 24, 9, "unknown capture thread index");
    size_t tb = block_at(f, n, 6, 0);
    expect_invalid(f, n, tb + 4 + 2 + 1, 99, "unknown thread info kind");
    expect_invalid(f, n, tb + 4 + 2, 7, "event on a thread never introduced");
    size_t rt = block_at(f, n, 7, 0);
    expect_invalid(f, n, rt + 4, 5, "RemoveThread of an unknown thread");
    size_t lb = block_at(f, n, 8, 0);
    expect_invalid(f, n, lb + 4, 0, "label list first index 0");
    expect_invalid(f, n, lb + 4 + 8, 0x33, "unknown label kind");
    size_t sp = block_at(f, n, 4, 0);
    expect_invalid(f, n, sp + 4 + 12, 3, "sequence point count");
    size_t end = block_at(f, n, 0, 0);
    expect_invalid(f, n, end, 1, "EndOfStream with a size");
    free(f);
}

/* After a metadata-flushing sequence point the ids are gone until defined again. */
static void test_container_v6_flush(void **state)
{
    (void)state;
    struct wb w = {0};
    struct wb pl = {0};
    struct wb b = {0};
    v6_header(&w);
    v6_trace(&w);
    thread_block(&w);
    metadata_block(&w);
    sequence_point(&w, 2, true);
    metadata_block(&w); /* ids 1 and 2 again: allowed after the flush */
    counters_payload(&pl);
    event_block_header(&b, 0);
    row_uncompressed(&b, 2, 7, 2, 0, SYNC_TICKS, 0, &pl);
    v6_block(&w, 2, &b);
    sequence_point(&w, 2, false);
    v6_block(&w, 2, &b); /* id 2 flushed: invalid */
    struct seen sn;
    memset(&sn, 0, sizeof(sn));
    struct nettrace_checker ck;
    assert_int_equal(check(w.b, w.n, 0, &sn, &ck), NETTRACE_INVALID);
    assert_non_null(strstr(nettrace_error(&ck, NULL), "flushed"));
    assert_int_equal(nettrace_get_stats(&ck)->metadata, 4);
    assert_int_equal(nettrace_get_stats(&ck)->events, 1);
    assert_int_equal(nettrace_count_named(&ck, "System.Runtime", "EventCounters"), 1);
    nettrace_checker_fini(&ck);
    seen_free(&sn);

    /* Without a flush, a second definition is invalid. */
    w.n = 0;
    v6_header(&w);
    v6_trace(&w);
    metadata_block(&w);
    sequence_point(&w, 1, false);
    metadata_block(&w);
    assert_int_equal(check(w.b, w.n, 0, NULL, &ck), NETTRACE_INVALID);
    assert_non_null(strstr(nettrace_error(&ck, NULL), "defined twice"));
    nettrace_checker_fini(&ck);

    /* Threads flushed by a sequence point cannot be referred to any more. */
    w.n = 0;
    v6_header(&w);
    v6_trace(&w);
    thread_block(&w);
    metadata_block(&w);
    v6_block(&w, 2, &b);
    sequence_point(&w, 1, true);
    assert_int_equal(check(w.b, w.n, 0, NULL, &ck), NETTRACE_TRUNCATED);
    nettrace_checker_fini(&ck);
    v6_block(&w, 2, &b);
    assert_int_equal(check(w.b, w.n, 0, NULL, &ck), NETTRACE_INVALID);
    assert_non_null(strstr(nettrace_error(&ck, NULL), "unknown capture thread"));
    nettrace_checker_fini(&ck);
    free(w.b);
    free(pl.b);
    free(b.b);
}

/* ---- ev_stream: an EventCounters sample out of a V6 file ---------------------------------- */

struct samples {
    size_t n;
    char name[4][32];
    double value[4];
    char unit[4][8];
    int64_t ts_ms[4];
};

static void on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct samples *sm = ud;
    assert_true(sm->n < 4);
    copy_str(sm->name[sm->n], sizeof(sm->name[0]), s->name);
    copy_str(sm->unit[sm->n], sizeof(sm->unit[0]), s->unit);
    sm->value[sm->n] = s->value;
    sm->ts_ms[sm->n] = s->timestamp_ms;
    sm->n++;
}

static void test_stream_v6(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f = v6_file(&n);
    static const size_t chunks[] = {0, 1};
    for (size_t k = 0; k < 2; k++) {
        struct samples sm;
        memset(&sm, 0, sizeof(sm));
        struct ev_stream *s = NULL;
        assert_int_equal(ev_stream_new(&s, NULL, on_sample, NULL, &sm), 0);
        if (chunks[k] == 0) {
            assert_int_equal(ev_stream_feed(s, f, n), 0);
        } else {
            for (size_t off = 0; off < n; off++) {
                assert_int_equal(ev_stream_feed(s, f + off, 1), 0);
            }
        }
        assert_null(ev_stream_error(s));
        struct ev_stream_stats st;
        ev_stream_get_stats(s, &st);
        assert_int_equal(st.metadata, 2);
        assert_int_equal(st.metadata_malformed, 0);
        assert_int_equal(st.payload_malformed, 0);
        assert_int_equal(st.events, 3);
        assert_int_equal(st.samples, 1);
        assert_int_equal(sm.n, 1);
        assert_string_equal(sm.name[0], "cpu-usage");
        assert_true(sm.value[0] == 12.5);
        assert_string_equal(sm.unit[0], "%");
        ev_stream_free(s);
    }
    free(f);
}

/* ---- a V6 redefinition through the metadata consumers (events/ev_schemas.h) ------------------ */

/* A metadata block defining id as provider's `name`, event id 9, no fields. */
static void md_block_plain(struct wb *w, uint32_t id, const char *provider, const char *name)
{
    struct wb b = {0};
    struct wb r = {0};
    wb_u16(&b, 0);
    wb_varu(&r, id);
    wb_str(&r, provider);
    wb_varu(&r, 9);
    wb_str(&r, name);
    wb_u16(&r, 0); /* no fields */
    wb_u16(&r, 0); /* empty OptionalMetadata */
    wb_sized16(&b, &r);
    v6_block(w, 3, &b);
    free(b.b);
    free(r.b);
}

/* An event block with one empty event of metadata id md on thread 1. */
static void plain_event(struct wb *w, uint32_t md, uint32_t seq)
{
    struct wb b = {0};
    struct wb pl = {0};
    event_block_header(&b, 0);
    row_uncompressed(&b, md, seq, 1, 0, SYNC_TICKS + 2500000, 0, &pl);
    v6_block(w, 2, &b);
    free(b.b);
    free(pl.b);
}

/* The test file's opening, then: metadata flushed, id 1 redefined as "Second" and id 2 (the
 * counters) as "Quiet", an event of each; flushed again, id 1 redefined as "Third", one event. */
static uint8_t *v6_redefined_file(size_t *n)
{
    struct wb w = {0};
    struct wb empty = {0};
    v6_opening(&w);
    sequence_point(&w, 2, false);
    md_block_plain(&w, 1, "Test-Provider", "Second");
    md_block_plain(&w, 2, "System.Runtime", "Quiet");
    plain_event(&w, 1, 2);
    plain_event(&w, 2, 3);
    sequence_point(&w, 2, false);
    md_block_plain(&w, 1, "Test-Provider", "Third");
    plain_event(&w, 1, 4);
    v6_block(&w, 0, &empty); /* EndOfStream */
    *n = w.n;
    return w.b;
}

static int on_json(void *ud, const char *line, size_t len)
{
    struct buf *out = ud;
    return buf_append(out, line, len);
}

/* The n-th line (from 0) of text holds needle. */
static void line_has(const char *text, int n, const char *needle)
{
    const char *l = text;
    for (int k = 0; k < n && l != NULL; k++) {
        l = strchr(l, '\n');
        l = l != NULL ? l + 1 : NULL;
    }
    assert_non_null(l);
    const char *end = strchr(l, '\n');
    assert_non_null(end);
    const char *hit = strstr(l, needle);
    assert_true(hit != NULL && hit < end);
}

/*
 * Each consumer keeps the latest definition of a redefined id: ev_json renders the new event
 * name (not the head it cached for the old one, which is freed: ASan would see a leak), the
 * counters id redefined as another event no longer yields samples, and a filter matches by the
 * new name.
 */
static void test_redefined_v6(void **state)
{
    (void)state;
    size_t n;
    uint8_t *f = v6_redefined_file(&n);

    struct buf text;
    buf_init(&text, 0);
    struct ev_json *j = ev_json_new(on_json, &text);
    assert_non_null(j);
    assert_int_equal(ev_json_feed(j, f, n), 0);
    assert_int_equal(ev_json_finish(j), NETTRACE_COMPLETE);
    ev_json_free(j);
    assert_int_equal(buf_append(&text, "", 1), 0);
    const char *t = (const char *)buf_data(&text);
    line_has(t, 0, "\"event\":\"AllTypes\"");
    line_has(t, 1, "\"event\":\"AllTypes\"");
    line_has(t, 2, "\"event\":\"EventCounters\"");
    line_has(t, 3, "\"event\":\"Second\"");
    line_has(t, 4, "\"event\":\"Quiet\"");
    line_has(t, 5, "\"event\":\"Third\"");
    buf_fini(&text);

    struct samples sm;
    memset(&sm, 0, sizeof(sm));
    struct ev_stream *s = NULL;
    assert_int_equal(ev_stream_new(&s, NULL, on_sample, NULL, &sm), 0);
    assert_int_equal(ev_stream_feed(s, f, n), 0);
    struct ev_stream_stats st;
    ev_stream_get_stats(s, &st);
    assert_int_equal(st.events, 6);
    assert_int_equal(st.metadata_malformed, 0);
    assert_int_equal(sm.n, 1); /* the EventCounters event before the redefinition only */
    ev_stream_free(s);

    /* Id 1 is AllTypes, then "Second" for one event, then "Third" for one: a filter that kept an
     * earlier definition of the id would not see the later name's event. */
    static const char *const names[] = {"Second", "Third"};
    for (size_t k = 0; k < 2; k++) {
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        struct ev_filter *fl = NULL;
        assert_int_equal(ev_filter_new("Test-Provider", names[k], NULL, 0, &fl), 0);
        ev_filter_attach(fl, &ck);
        assert_int_equal(nettrace_feed(&ck, f, n), 0);
        assert_int_equal(ev_filter_candidates(fl), 1);
        assert_int_equal(ev_filter_get_state(fl), EV_FILTER_MATCHED);
        ev_filter_free(fl);
        nettrace_checker_fini(&ck);
    }
    free(f);
}

static void write_seed(void)
{
    const char *path = getenv("NETTRACE_V6_SEED");
    if (path == NULL || path[0] == '\0') {
        return;
    }
    size_t n;
    uint8_t *f = v6_file(&n);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(f, 1, n, fp), n);
    assert_int_equal(fclose(fp), 0);
    free(f);
}

int main(void)
{
    write_seed();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schema_v6),
        cmocka_unit_test(test_schema_v6_bad),
        cmocka_unit_test(test_container_v6),
        cmocka_unit_test(test_container_v6_truncated),
        cmocka_unit_test(test_container_v6_invalid),
        cmocka_unit_test(test_container_v6_flush),
        cmocka_unit_test(test_stream_v6),
        cmocka_unit_test(test_redefined_v6),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
