/* SPDX-License-Identifier: MIT */
/*
 * events/ev_filter: CollectTrace's StoppingEvent matcher. Event names as TraceEvent gives them
 * (checked against what TraceEvent 4.0.0's dynamic parser said for every fixture trace), payload
 * values as .NET writes them (the real-number strings are what .NET 10 printed), the filter fed
 * by a checker over synthetic V4 streams in several chunkings (state only changes at the blocks
 * that hold the deciding event), the PayloadFilter mismatch rule, native runtime events, and
 * the real fixture captures.
 */
#include <math.h>
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
#include "ev_fmt.h"
#include "ev_payload.h"
#include "fixture.h"
#include "nettrace.h"
#include "ntw.h"
#include "wbuf.h"

#define APP "DotMon-TestApp"
#define RT  "Microsoft-Windows-DotNETRuntime"
#define MEL "Microsoft-Extensions-Logging"

/* ---- names ---------------------------------------------------------------------------------- */

static void name_is(const char *provider, const char *md_name, int tag, uint32_t id,
                    uint32_t version, bool native, const char *want)
{
    char out[EV_FILTER_NAME_MAX];
    assert_int_equal(ev_filter_event_name(provider, md_name, tag >= 0, (uint8_t)(tag < 0 ? 0 : tag),
                                          id, version, native, out, sizeof(out)),
                     0);
    assert_string_equal(out, want);
}

static void test_ev_filter_names(void **state)
{
    (void)state;
    name_is(APP, "Blob", -1, 1, 0, true, "Blob");
    /* No OpCode: the name implies Start/Stop (any case), which is cut off the task name. */
    name_is(APP, "RequestStart", -1, 2, 0, true, "Request/Start");
    name_is(APP, "requeststart", -1, 2, 0, true, "request/Start");
    name_is(APP, "RequestStop", -1, 3, 0, true, "Request/Stop");
    name_is(APP, "Start", -1, 3, 0, true, "/Start");
    /* An OpCode given: Info keeps the name whole; others are appended by TraceEvent's names. */
    name_is(APP, "RequestStart", 0, 2, 0, true, "RequestStart");
    name_is(APP, "Work", 1, 2, 0, true, "Work/Start");
    name_is(APP, "WorkStop", 1, 2, 0, true, "WorkStop/Start");
    name_is(APP, "Load", 3, 2, 0, true, "Load/DCStart");
    name_is(APP, "Load", 4, 2, 0, true, "Load/DCStop");
    name_is(APP, "Ping", 6, 2, 0, true, "Ping/Reply");
    name_is(APP, "Msg", 9, 2, 0, true, "Msg/Send");
    name_is(APP, "Msg", 240, 2, 0, true, "Msg/Opcode(240)");
    /* No name: TraceEvent's dynamic names; the runtime's native events also by their manifest. */
    name_is(RT, "", -1, 1, 2, false, "EventID(1)");
    name_is(RT, "", -1, 1, 2, true, "GCStart");
    name_is(RT, "", -1, 80, 1, true, "ExceptionThrown");
    name_is("Microsoft-DotNETCore-SampleProfiler", "", -1, 0, 0, false, "EventWriteString");
    name_is("Some.Source", "", -1, 7, 0, true, "EventID(7)");
    name_is("Some.Source", "", -1, 0, 0, true, "EventWriteString");
    char small[4];
    assert_int_equal(ev_filter_event_name(APP, "Blob", false, 0, 1, 0, true, small, sizeof(small)),
                     AGENT_E_NOSPACE);
}

/* What .NET 10's Convert.ToString(x, CultureInfo.InvariantCulture) printed for these. */
static void test_ev_filter_real(void **state)
{
    (void)state;
    static const struct {
        uint64_t bits;
        const char *text;
    } d[] = {
        {0x3fb999999999999aull, "0.1"},
        {0x430c6bf526340000ull, "1000000000000000"},
        {0x42dc12218377de40ull, "123456789012345"},
        {0x43118b54f22aeb00ull, "1234567890123456"},
        {0x3eef75104d551d69ull, "1.5E-05"},
        {0x3f1a36e2eb1c432dull, "0.0001"},
        {0x3f202e4b6ce5dc68ull, "0.00012345"},
        {0x3fd5555555555555ull, "0.3333333333333333"},
        {0x8000000000000000ull, "-0"},
        {0x0000000000000000ull, "0"},
        {0x7e37e43c8800759cull, "1E+300"},
        {0x0000000000000001ull, "5E-324"},
        {0xfff8000000000000ull, "NaN"},
        {0x7ff0000000000000ull, "Infinity"},
        {0xfff0000000000000ull, "-Infinity"},
        {0x4045000000000000ull, "42"},
        {0xc01d000000000000ull, "-7.25"},
        {0x4059000000000000ull, "100"},
        {0x42d6bcc41e900000ull, "100000000000000"},
        {0x43e56a95319d63e1ull, "1.2345678901234567E+19"},
        {0x3f50624dd2f1a9fcull, "0.001"},
    };
    for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
        double x;
        memcpy(&x, &d[i].bits, sizeof(x));
        char out[32];
        ev_fmt_real(x, false, out, sizeof(out));
        assert_string_equal(out, d[i].text);
    }
    static const struct {
        double x;
        bool single;
        const char *text;
    } m[] = {
        {1e16, false, "10000000000000000"},
        {1e17, false, "1E+17"},
        {1.5e16, false, "15000000000000000"},
        {1.5e17, false, "1.5E+17"},
        {12345678901234567.0, false, "12345678901234568"},
        {123456789012345678.0, false, "1.2345678901234568E+17"},
        {(double)0.1f, true, "0.1"},
        {(double)1e7f, true, "10000000"},
        {(double)1234567.0f, true, "1234567"},
        {(double)12345678.0f, true, "12345678"},
        {(double)1e-5f, true, "1E-05"},
        {(double)0.0001f, true, "0.0001"},
        {(double)3.14159f, true, "3.14159"},
        {(double)16777216.0f, true, "16777216"},
        {(double)(1.0f / 3), true, "0.33333334"},
        {(double)1e8f, true, "100000000"},
        {(double)1e9f, true, "1E+09"},
        {(double)123456789.0f, true, "123456790"},
        {(double)1.5e9f, true, "1.5E+09"},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        char out[32];
        ev_fmt_real(m[i].x, m[i].single, out, sizeof(out));
        assert_string_equal(out, m[i].text);
    }
    /* Integers the type holds exactly print as their digits (the fast path), on both sides of
     * each power of ten and at the limits 2^53 - 1 and 2^24 - 1; just past them, the general path.
     */
    for (int neg = 0; neg < 2; neg++) {
        for (double p10 = 1; p10 < 1e16; p10 *= 10) {
            const double xs[] = {p10 - 1, p10, p10 + 1, 7 * p10, 9007199254740991.0, 16777215.0};
            for (size_t i = 0; i < sizeof(xs) / sizeof(xs[0]); i++) {
                double x = neg ? -xs[i] : xs[i];
                char out[32], want[32];
                if (x == 0) {
                    continue;
                }
                snprintf(want, sizeof(want), "%.0f", x);
                ev_fmt_real(x, false, out, sizeof(out));
                assert_string_equal(out, want);
                if (fabs(x) < 16777216.0) {
                    ev_fmt_real(x, true, out, sizeof(out));
                    assert_string_equal(out, want);
                }
            }
        }
    }
    char out[32];
    ev_fmt_real(9007199254740992.0, false, out, sizeof(out));
    assert_string_equal(out, "9007199254740992");
    ev_fmt_real(16777216.0, true, out, sizeof(out));
    assert_string_equal(out, "16777216");
    ev_fmt_real(12.5, false, out, sizeof(out));
    assert_string_equal(out, "12.5");
}

/* ---- synthetic streams ---------------------------------------------------------------------- */

/* A V4/V5 metadata payload: id, provider, event id, name, keywords, version, level, V1 fields,
 * then an OpCode tag when opcode >= 0. */
static void md_payload(struct wb *w, uint32_t id, const char *provider, uint32_t event_id,
                       const char *name, const uint32_t *codes, const char *const *fields, size_t n,
                       int opcode)
{
    wb_u32(w, id);
    wb_wstr(w, provider);
    wb_u32(w, event_id);
    wb_wstr(w, name);
    wb_u64(w, 0);
    wb_u32(w, 0);
    wb_u32(w, 4);
    if (n > 0 || opcode >= 0) {
        wb_u32(w, (uint32_t)n);
        for (size_t k = 0; k < n; k++) {
            wb_u32(w, codes[k]);
            wb_wstr(w, fields[k]);
        }
    }
    if (opcode >= 0) {
        wb_u32(w, 1);
        wb_u8(w, 1);
        wb_u8(w, (unsigned)opcode);
    }
}

static const uint32_t blob_c[] = {9, 11, 18};
static const char *const blob_f[] = {"Thread", "Index", "Text"};

static void md_def(struct nt *t, uint32_t id, const char *provider, uint32_t event_id,
                   const char *name, int opcode)
{
    struct wb w = {0};
    md_payload(&w, id, provider, event_id, name, blob_c, blob_f, 3, opcode);
    bool c = t->compressed;
    t->compressed = false;
    nt_blob(t, 0, 0, 0, 0, &w);
    t->compressed = c;
    free(w.b);
}

static void blob(struct nt *t, uint32_t md, int32_t thread, int64_t index, const char *text)
{
    struct wb p = {0};
    wb_u32(&p, (uint32_t)thread);
    wb_u64(&p, (uint64_t)index);
    wb_wstr(&p, text);
    nt_blob(t, md, SYNC_QPC + 10, 0, 0, &p);
    free(p.b);
}

#define NBLOCKS 5

struct stream {
    uint8_t *p;
    size_t n;
    size_t end[NBLOCKS]; /* offset after each block (and after the end tag) */
};

/*
 * Block 0: metadata: 1 = APP Blob, 2 = "Other" Blob, 3 = APP BlobStart (no OpCode: "Blob/Start").
 * Block 1: Blob(0, 0, "xxxx"), Blob(0, 1, "mark"), Other Blob(0, -1, "mark"), BlobStart(0, -1,
 *          "mark"). Block 2: Blob(0, -1, "mark"). Block 3: Blob(1, -1, "mark"). Then the end tag.
 */
static void synthetic(struct stream *s, bool compressed)
{
    struct nt t;
    nt_begin(&t);
    md_def(&t, 1, APP, 1, "Blob", -1);
    md_def(&t, 2, "Other", 1, "Blob", -1);
    md_def(&t, 3, APP, 2, "BlobStart", -1);
    nt_block(&t, "MetadataBlock", false);
    s->end[0] = t.out.n;
    t.compressed = compressed;
    blob(&t, 1, 0, 0, "xxxx");
    blob(&t, 1, 0, 1, "mark");
    blob(&t, 2, 0, -1, "mark");
    blob(&t, 3, 0, -1, "mark");
    nt_block(&t, "EventBlock", compressed);
    s->end[1] = t.out.n;
    blob(&t, 1, 0, -1, "mark");
    nt_block(&t, "EventBlock", compressed);
    s->end[2] = t.out.n;
    blob(&t, 1, 1, -1, "mark");
    nt_block(&t, "EventBlock", compressed);
    s->end[3] = t.out.n;
    wb_u8(&t.out, 1);
    s->end[4] = t.out.n;
    free(t.blk.b);
    s->p = t.out.b;
    s->n = t.out.n;
}

/*
 * Feeds the stream through a checker with f attached, `chunk` bytes at a time (0: each block
 * whole), and records the filter's state after each block.
 */
static void run(struct ev_filter *f, const struct stream *s, size_t chunk,
                enum ev_filter_state got[NBLOCKS])
{
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    ev_filter_attach(f, &ck);
    size_t off = 0;
    for (int b = 0; b < NBLOCKS; b++) {
        while (off < s->end[b]) {
            size_t k = s->end[b] - off;
            if (chunk > 0 && k > chunk) {
                k = chunk;
            }
            assert_int_equal(nettrace_feed(&ck, s->p + off, k), 0);
            off += k;
        }
        got[b] = ev_filter_get_state(f);
    }
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    nettrace_checker_fini(&ck);
}

static struct ev_filter *filter(const char *provider, const char *name,
                                const struct ev_filter_field *fields, size_t n)
{
    struct ev_filter *f = NULL;
    assert_int_equal(ev_filter_new(provider, name, fields, n, &f), 0);
    return f;
}

static void expect(const char *name, const struct ev_filter_field *fields, size_t n,
                   const enum ev_filter_state want[NBLOCKS], uint64_t candidates)
{
    static const size_t chunks[] = {0, 1, 7, 4093};
    for (int compressed = 0; compressed < 2; compressed++) {
        struct stream s;
        synthetic(&s, compressed != 0);
        for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
            struct ev_filter *f = filter(APP, name, fields, n);
            enum ev_filter_state got[NBLOCKS];
            run(f, &s, chunks[c], got);
            for (int b = 0; b < NBLOCKS; b++) {
                assert_int_equal(got[b], want[b]);
            }
            assert_int_equal(ev_filter_candidates(f), candidates);
            ev_filter_free(f);
        }
        free(s.p);
    }
}

#define W EV_FILTER_WATCHING
#define M EV_FILTER_MATCHED
#define X EV_FILTER_MISMATCH

static void test_ev_filter_stream(void **state)
{
    (void)state;
    /* Text and Index must both match: (1, "mark") does not, the other provider and BlobStart do
     * not count; block 2's (-1, "mark") stops it, and nothing after is looked at. */
    const struct ev_filter_field both[] = {{"Index", "-1"}, {"Text", "mark"}};
    expect("Blob", both, 2, (const enum ev_filter_state[]){W, W, M, M, M}, 3);
    /* Values compare ordinally: case and spaces matter. */
    const struct ev_filter_field upper[] = {{"Text", "MARK"}};
    expect("Blob", upper, 1, (const enum ev_filter_state[]){W, W, W, W, W}, 4);
    const struct ev_filter_field idx[] = {{"Index", " -1"}};
    expect("Blob", idx, 1, (const enum ev_filter_state[]){W, W, W, W, W}, 4);
    /* No PayloadFilter: the first Blob. */
    expect("Blob", NULL, 0, (const enum ev_filter_state[]){W, M, M, M, M}, 1);
    /* The implied Start opcode names BlobStart "Blob/Start". */
    const struct ev_filter_field text[] = {{"Text", "mark"}};
    expect("Blob/Start", text, 1, (const enum ev_filter_state[]){W, M, M, M, M}, 1);
    expect("BlobStart", NULL, 0, (const enum ev_filter_state[]){W, W, W, W, W}, 0);
    /* Names are case-sensitive. */
    expect("blob", NULL, 0, (const enum ev_filter_state[]){W, W, W, W, W}, 0);
}

static void test_ev_filter_mismatch(void **state)
{
    (void)state;
    /* A field the event does not have: decided at the first Blob, for good (dotnet-monitor stops
     * watching), although block 2 holds a Blob whose Text is "mark". */
    const struct ev_filter_field nope[] = {{"Text", "mark"}, {"Nope", "x"}};
    expect("Blob", nope, 2, (const enum ev_filter_state[]){W, X, X, X, X}, 1);
    /* Field names compare ordinally too. */
    const struct ev_filter_field lower[] = {{"text", "mark"}};
    expect("Blob", lower, 1, (const enum ev_filter_state[]){W, X, X, X, X}, 1);

    struct stream s;
    synthetic(&s, false);
    struct ev_filter *f = filter(APP, "Blob", nope, 2);
    enum ev_filter_state got[NBLOCKS];
    run(f, &s, 0, got);
    assert_non_null(strstr(ev_filter_detail(f), "'Nope'"));
    ev_filter_free(f);
    free(s.p);
}

/* ---- payload types -------------------------------------------------------------------------- */

static void direct_metadata(struct ev_filter *f, const struct wb *w, uint32_t id,
                            const char *provider)
{
    struct nettrace_metadata md;
    memset(&md, 0, sizeof(md));
    md.metadata_id = id;
    md.provider = provider;
    md.event_name = "";
    ev_filter_on_metadata(f, &md, w->b, w->n);
}

static void direct_event(struct ev_filter *f, uint32_t md_id, uint32_t event_id, const struct wb *p)
{
    struct nettrace_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.metadata_id = md_id;
    ev.event_id = event_id;
    ev.payload = p->b;
    ev.payload_len = p->n;
    ev_filter_on_event(f, &ev);
}

/*
 * A new filter fed one metadata record (id 5) and one event of it (event id 9) directly, without a
 * checker: its state after them (and its candidate count in *candidates, when not NULL).
 */
static enum ev_filter_state one_event(const char *provider, const char *name,
                                      const struct ev_filter_field *fl, size_t n,
                                      const struct wb *md, const struct wb *pl,
                                      uint64_t *candidates)
{
    struct ev_filter *f = filter(provider, name, fl, n);
    direct_metadata(f, md, 5, provider);
    direct_event(f, 5, 9, pl);
    enum ev_filter_state st = ev_filter_get_state(f);
    if (candidates != NULL) {
        *candidates = ev_filter_candidates(f);
    }
    ev_filter_free(f);
    return st;
}

static const uint32_t all_c[] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
static const char *const all_f[] = {"Bool",    "Char",     "SByte", "Byte",   "Int16",  "UInt16",
                                    "Int32",   "UInt32",   "Int64", "UInt64", "Single", "Double",
                                    "Decimal", "DateTime", "Guid",  "String"};

static void all_types_payload(struct wb *p)
{
    static const uint8_t guid[16] = {0x5b, 0xad, 0x8f, 0x0f, 0xcb, 0xd9, 0x9f, 0x46,
                                     0xa1, 0x65, 0x70, 0x86, 0x77, 0x28, 0x95, 0x0e};
    wb_u32(p, 1);          /* Boolean */
    wb_u16(p, 0xE9);       /* Char é */
    wb_u8(p, 0xFB);        /* SByte -5 */
    wb_u8(p, 200);         /* Byte */
    wb_u16(p, 0xFED4);     /* Int16 -300 */
    wb_u16(p, 60000);      /* UInt16 */
    wb_u32(p, 0xFFFEEE90); /* Int32 -70000 */
    wb_u32(p, 4000000000u);
    wb_u64(p, (uint64_t)-5000000000ll);
    wb_u64(p, 18000000000000000000ull);
    wb_f32(p, 0.1f);
    wb_f64(p, 1e17);
    for (int k = 0; k < 16; k++) {
        wb_u8(p, 7); /* Decimal: never matches */
    }
    wb_u64(p, 133802606450000000ull); /* 2025-01-02 03:04:05 UTC */
    wb_raw(p, guid, sizeof(guid));
    wb_wstr(p, "h\xe9llo"); /* U+00E9: wb_wstr writes each byte as a unit */
}

static enum ev_filter_state one_field(const char *name, const char *value)
{
    const struct ev_filter_field fl[] = {{name, value}};
    struct wb md = {0}, pl = {0};
    md_payload(&md, 5, APP, 9, "Types", all_c, all_f, 16, -1);
    all_types_payload(&pl);
    enum ev_filter_state st = one_event(APP, "Types", fl, 1, &md, &pl, NULL);
    free(md.b);
    free(pl.b);
    return st;
}

static void test_ev_filter_types(void **state)
{
    (void)state;
    static const char *const want[][2] = {
        {"Bool", "True"},
        {"Char", "\xc3\xa9"},
        {"SByte", "-5"},
        {"Byte", "200"},
        {"Int16", "-300"},
        {"UInt16", "60000"},
        {"Int32", "-70000"},
        {"UInt32", "4000000000"},
        {"Int64", "-5000000000"},
        {"UInt64", "18000000000000000000"},
        {"Single", "0.1"},
        {"Double", "1E+17"},
        {"DateTime", "01/02/2025 03:04:05"},
        {"Guid", "0f8fad5b-d9cb-469f-a165-70867728950e"},
        {"String", "h\xc3\xa9llo"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        assert_int_equal(one_field(want[i][0], want[i][1]), EV_FILTER_MATCHED);
    }
    assert_int_equal(one_field("Bool", "true"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("Bool", "1"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("Single", "0.100000001"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("Guid", "0F8FAD5B-D9CB-469F-A165-70867728950E"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("String", "h\xc3\xa9ll"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("String", "h\xc3\xa9llo "), EV_FILTER_WATCHING);
    assert_int_equal(one_field("String", ""), EV_FILTER_WATCHING);
    assert_int_equal(one_field("Decimal", "0"), EV_FILTER_WATCHING);
    assert_int_equal(one_field("Missing", "0"), EV_FILTER_MISMATCH);

    /* A payload shorter than its fields: no match, and no harm. */
    const struct ev_filter_field s1[] = {{"String", "x"}};
    struct wb md = {0}, pl = {0};
    md_payload(&md, 5, APP, 9, "Types", all_c, all_f, 16, -1);
    wb_u32(&pl, 1);
    uint64_t candidates = 0;
    assert_int_equal(one_event(APP, "Types", s1, 1, &md, &pl, &candidates), EV_FILTER_WATCHING);
    assert_int_equal(candidates, 1);
    free(md.b);
    free(pl.b);
}

/* An OpCode tag (V5) decides the name; the same record without one would be "Work". */
static void test_ev_filter_opcode_tag(void **state)
{
    (void)state;
    struct wb md = {0};
    md_payload(&md, 5, APP, 9, "Work", blob_c, blob_f, 3, 1);
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse(md.b, md.n, &s), 0);
    assert_true(s->has_opcode);
    assert_int_equal(s->opcode, 1);
    ev_schema_free(s);
    struct wb pl = {0};
    wb_u32(&pl, 3);
    wb_u64(&pl, 4);
    wb_wstr(&pl, "w");
    assert_int_equal(one_event(APP, "Work/Start", NULL, 0, &md, &pl, NULL), EV_FILTER_MATCHED);
    assert_int_equal(one_event(APP, "Work", NULL, 0, &md, &pl, NULL), EV_FILTER_WATCHING);
    free(md.b);
    /* OpCode Info given: "WorkStart" keeps its name. */
    md = (struct wb){0};
    md_payload(&md, 5, APP, 9, "WorkStart", blob_c, blob_f, 3, 0);
    assert_int_equal(one_event(APP, "WorkStart", NULL, 0, &md, &pl, NULL), EV_FILTER_MATCHED);
    free(md.b);
    free(pl.b);
}

/* The runtime's GCStart (version 2): no name, no fields in its metadata. */
static enum ev_filter_state gc_start(const char *name, const struct ev_filter_field *fl, size_t n)
{
    struct wb md = {0}, pl = {0};
    wb_u32(&md, 5);
    wb_wstr(&md, RT);
    wb_u32(&md, 1);
    wb_wstr(&md, "");
    wb_u64(&md, 1);
    wb_u32(&md, 2);
    wb_u32(&md, 4);
    WB_PUT(&pl, {7, 4}, {2, 4}, {1, 4}, {0, 4}, {0, 2}, {0, 8});
    enum ev_filter_state st = one_event(RT, name, fl, n, &md, &pl, NULL);
    free(md.b);
    free(pl.b);
    return st;
}

static void test_ev_filter_native(void **state)
{
    (void)state;
    const struct ev_filter_field depth2[] = {{"Depth", "2"}, {"Count", "7"}};
    const struct ev_filter_field depth1[] = {{"Depth", "1"}};
    const struct ev_filter_field nope[] = {{"Generation", "2"}};
    assert_int_equal(gc_start("GCStart", depth2, 2), EV_FILTER_MATCHED);
    assert_int_equal(gc_start("GCStart", depth1, 1), EV_FILTER_WATCHING);
    assert_int_equal(gc_start("GCStart", nope, 1), EV_FILTER_MISMATCH);
    assert_int_equal(gc_start("EventID(1)", NULL, 0), EV_FILTER_MATCHED);
    assert_int_equal(gc_start("EventID(1)", depth2, 2), EV_FILTER_MATCHED);
    assert_int_equal(gc_start("GC/Start", NULL, 0), EV_FILTER_WATCHING);
    assert_int_equal(gc_start("EventID(2)", NULL, 0), EV_FILTER_WATCHING);
}

static void test_ev_filter_new_args(void **state)
{
    (void)state;
    struct ev_filter *f = NULL;
    const struct ev_filter_field dup[] = {{"A", "1"}, {"A", "2"}};
    const struct ev_filter_field empty[] = {{"", "1"}};
    const struct ev_filter_field null_value[] = {{"A", NULL}};
    assert_int_equal(ev_filter_new(NULL, "E", NULL, 0, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("", "E", NULL, 0, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("P", "", NULL, 0, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("P", "E", NULL, 1, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("P", "E", dup, 2, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("P", "E", empty, 1, &f), AGENT_E_INVAL);
    assert_int_equal(ev_filter_new("P", "E", null_value, 1, &f), AGENT_E_INVAL);
    assert_null(f);
    const struct ev_filter_field ok[] = {{"A", ""}};
    assert_int_equal(ev_filter_new("P", "E", ok, 1, &f), 0);
    assert_string_equal(ev_filter_detail(f), "");
    ev_filter_free(f);
    ev_filter_free(NULL);
}

/* ---- real captures -------------------------------------------------------------------------- */

/*
 * Every fixture's events by provider and TraceEvent name ("provider|name count"), as TraceEvent
 * 4.0.0's dynamic parser alone named them (tracecheck --dynamic-names): the names dotnet-monitor
 * matches a StoppingEvent's EventName against.
 */
static const char *const dynamic_names[][2] = {
    {"gc.nettrace",
     "Microsoft-DotNETCore-EventPipe|ProcessInfo 1\n" RT "|EventID(1) 8\n" RT "|EventID(11) 1\n" RT
     "|EventID(13) 12\n" RT "|EventID(14) 12\n" RT "|EventID(2) 8\n" RT "|EventID(202) 48\n" RT
     "|EventID(204) 8\n" RT "|EventID(205) 8\n" RT "|EventID(3) 8\n" RT "|EventID(35) 8\n" RT
     "|EventID(39) 16\n" RT "|EventID(4) 8\n" RT "|EventID(5) 3\n" RT "|EventID(7) 8\n" RT
     "|EventID(8) 8\n" RT "|EventID(9) 8\n"},
    {"logs.nettrace", "Microsoft-DotNETCore-EventPipe|ProcessInfo 1\n" MEL
                      "|FormattedMessage 18\n" MEL "|MessageJson 18\n"},
    {"http_ct5.nettrace",
     "Microsoft-Diagnostics-DiagnosticSource|Event 20\n"
     "Microsoft-Diagnostics-DiagnosticSource|Message 1\n"
     "Microsoft-Diagnostics-DiagnosticSource|NewDiagnosticListener 3\n"
     "Microsoft-Diagnostics-DiagnosticSource|Version 1\n"
     "Microsoft-DotNETCore-EventPipe|ProcessInfo 1\n" MEL "|ActivityJson/Start 3\n" MEL
     "|ActivityJson/Stop 3\n" MEL "|FormattedMessage 25\n" MEL "|MessageJson 25\n"},
    {"cpu.nettrace",
     "Microsoft-DotNETCore-EventPipe|ProcessInfo 1\n"
     "Microsoft-DotNETCore-SampleProfiler|EventWriteString 8807\n" RT "|EventID(1) 2\n" RT
     "|EventID(13) 4\n" RT "|EventID(14) 4\n" RT "|EventID(2) 2\n" RT "|EventID(202) 12\n" RT
     "|EventID(204) 2\n" RT "|EventID(205) 2\n" RT "|EventID(3) 1727\n" RT "|EventID(35) 2\n" RT
     "|EventID(39) 4\n" RT "|EventID(4) 2\n" RT "|EventID(5) 1\n" RT "|EventID(7) 1727\n" RT
     "|EventID(8) 1727\n" RT "|EventID(9) 1727\n"},
    {"rundown_ct4.nettrace",
     "Microsoft-DotNETCore-EventPipe|ProcessInfo 1\n" MEL "|FormattedMessage 10\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(146) 1\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(148) 1\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(152) 22\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(154) 22\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(156) 22\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(158) 1\n"
     "Microsoft-Windows-DotNETRuntimeRundown|EventID(187) 1\n" RT "|EventID(1) 2\n" RT
     "|EventID(13) 4\n" RT "|EventID(14) 4\n" RT "|EventID(2) 2\n" RT "|EventID(202) 12\n" RT
     "|EventID(204) 2\n" RT "|EventID(205) 2\n" RT "|EventID(250) 3\n" RT "|EventID(251) 3\n" RT
     "|EventID(256) 3\n" RT "|EventID(3) 2\n" RT "|EventID(35) 2\n" RT "|EventID(39) 4\n" RT
     "|EventID(4) 2\n" RT "|EventID(5) 1\n" RT "|EventID(7) 2\n" RT "|EventID(8) 2\n" RT
     "|EventID(80) 3\n" RT "|EventID(9) 2\n"},
};

#define MAX_NAMES 64

struct names {
    uint32_t id[1024]; /* metadata id → index into key (by position) */
    char key[1024][EV_FILTER_NAME_MAX + 128];
    size_t n;
    char tally[MAX_NAMES][EV_FILTER_NAME_MAX + 128];
    uint64_t count[MAX_NAMES];
    size_t ntally;
};

static void names_on_md(void *ud, const struct nettrace_metadata *md, const uint8_t *payload,
                        size_t len)
{
    struct names *s = ud;
    struct ev_schema *sc = NULL;
    assert_int_equal(ev_schema_parse(payload, len, &sc), 0);
    char name[EV_FILTER_NAME_MAX];
    assert_int_equal(ev_filter_event_name(sc->provider, sc->event_name, sc->has_opcode, sc->opcode,
                                          sc->event_id, sc->version, false, name, sizeof(name)),
                     0);
    assert_true(s->n < 1024);
    s->id[s->n] = md->metadata_id;
    snprintf(s->key[s->n], sizeof(s->key[0]), "%s|%s", sc->provider, name);
    s->n++;
    ev_schema_free(sc);
}

static void names_tally(void *ud, const struct nettrace_metadata *md)
{
    struct names *s = ud;
    const char *key = NULL;
    for (size_t i = 0; i < s->n; i++) {
        if (s->id[i] == md->metadata_id) {
            key = s->key[i];
        }
    }
    assert_non_null(key);
    if (md->events == 0) {
        return;
    }
    for (size_t k = 0; k < s->ntally; k++) {
        if (strcmp(s->tally[k], key) == 0) {
            s->count[k] += md->events;
            return;
        }
    }
    assert_true(s->ntally < MAX_NAMES);
    snprintf(s->tally[s->ntally], sizeof(s->tally[0]), "%s", key);
    s->count[s->ntally++] = md->events;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void test_ev_filter_fixture_names(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(dynamic_names) / sizeof(dynamic_names[0]); i++) {
        size_t n;
        uint8_t *p = fixture_read("nettrace", dynamic_names[i][0], &n);
        struct names *s = calloc(1, sizeof(*s));
        assert_non_null(s);
        struct nettrace_checker ck;
        assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
        nettrace_set_metadata_cb(&ck, names_on_md, s);
        assert_int_equal(nettrace_feed(&ck, p, n), 0);
        assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
        nettrace_foreach_metadata(&ck, names_tally, s);
        /* Sorted "key count" lines, as the table is (ordinal order, like tracecheck's). */
        const char *lines[MAX_NAMES];
        char text[MAX_NAMES][EV_FILTER_NAME_MAX + 160];
        for (size_t k = 0; k < s->ntally; k++) {
            snprintf(text[k], sizeof(text[0]), "%s %llu\n", s->tally[k],
                     (unsigned long long)s->count[k]);
            lines[k] = text[k];
        }
        qsort(lines, s->ntally, sizeof(lines[0]), cmp_str);
        char all[8192] = "";
        for (size_t k = 0; k < s->ntally; k++) {
            strncat(all, lines[k], sizeof(all) - strlen(all) - 1);
        }
        assert_string_equal(all, dynamic_names[i][1]);
        nettrace_checker_fini(&ck);
        free(s);
        free(p);
    }
}

static enum ev_filter_state on_fixture(const char *file, const char *provider, const char *name,
                                       const struct ev_filter_field *fl, size_t n)
{
    size_t len;
    uint8_t *p = fixture_read("nettrace", file, &len);
    struct ev_filter *f = filter(provider, name, fl, n);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    ev_filter_attach(f, &ck);
    for (size_t off = 0; off < len; off += 4093) {
        assert_int_equal(nettrace_feed(&ck, p + off, len - off < 4093 ? len - off : 4093), 0);
    }
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    enum ev_filter_state st = ev_filter_get_state(f);
    nettrace_checker_fini(&ck);
    ev_filter_free(f);
    free(p);
    return st;
}

static void test_ev_filter_fixtures(void **state)
{
    (void)state;
    /* `log Warning nt-fixture-marker-2` (tests/fixtures/nettrace/README.md): Level 3. */
    const struct ev_filter_field warn[] = {{"FormattedMessage", "nt-fixture-marker-2"},
                                           {"Level", "3"},
                                           {"LoggerName", "TestApp.Commands"}};
    const struct ev_filter_field info[] = {{"FormattedMessage", "nt-fixture-marker-2"},
                                           {"Level", "2"}};
    assert_int_equal(on_fixture("logs.nettrace", MEL, "FormattedMessage", warn, 3),
                     EV_FILTER_MATCHED);
    assert_int_equal(on_fixture("logs.nettrace", MEL, "FormattedMessage", info, 2),
                     EV_FILTER_WATCHING);
    assert_int_equal(on_fixture("http_ct5.nettrace", MEL, "ActivityJson/Start", NULL, 0),
                     EV_FILTER_MATCHED);
    assert_int_equal(on_fixture("http_ct5.nettrace", MEL, "ActivityJsonStart", NULL, 0),
                     EV_FILTER_WATCHING);
    /* `gc` collects generation 2. */
    const struct ev_filter_field gen2[] = {{"Depth", "2"}};
    const struct ev_filter_field gen9[] = {{"Depth", "9"}};
    assert_int_equal(on_fixture("gc.nettrace", RT, "GCStart", gen2, 1), EV_FILTER_MATCHED);
    assert_int_equal(on_fixture("gc.nettrace", RT, "GCStart", gen9, 1), EV_FILTER_WATCHING);
    assert_int_equal(on_fixture("rundown_ct4.nettrace", RT, "EventID(80)", NULL, 0),
                     EV_FILTER_MATCHED);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_filter_names),         cmocka_unit_test(test_ev_filter_real),
        cmocka_unit_test(test_ev_filter_stream),        cmocka_unit_test(test_ev_filter_mismatch),
        cmocka_unit_test(test_ev_filter_types),         cmocka_unit_test(test_ev_filter_opcode_tag),
        cmocka_unit_test(test_ev_filter_native),        cmocka_unit_test(test_ev_filter_new_args),
        cmocka_unit_test(test_ev_filter_fixture_names), cmocka_unit_test(test_ev_filter_fixtures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
