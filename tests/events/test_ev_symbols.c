/* SPDX-License-Identifier: MIT */
/*
 * events/ev_symbols: CPU samples' stacks named (docs/events.md §6). Method and module payloads
 * built by hand (wbuf.h) for the range map (bounds, overlaps, re-JIT at the same address, unknown
 * IPs), TraceEvent's names, both versions of rundown 144 (v1 without ReJITID, v2 with it) and short
 * payloads; a synthetic V4 stream (ntw.h) with v1 and v2 metadata for the same event fed whole
 * and one byte at a time; and the speedscope JSON read back by cJSON (escaping, frame sharing,
 * outermost-first samples, thread and time order, weights from the sampling period); and a
 * folded stacks of a flame graph; and a
 * real dotnet-trace CPU trace without rundown (tests/fixtures/nettrace/cpu.nettrace, 8807
 * ThreadSample events): every sample kept, every frame unknown. A hostile runtime against a
 * small share of the memory budget: ever-new methods with 30,000-character names, ever-new
 * stacks, and a stream of such methods, each refused with AGENT_E_BUDGET at the share's cap,
 * names cut at EV_SYMBOLS_MAX_NAME, every byte given back at ev_symbols_free. events/ev_stacks
 * (GET /stacks): each thread's first sample in the three shapes, read back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ev_stacks.h"
#include "ev_store.h"
#include "ev_symbols.h"
#include "fixture.h"
#include "membudget.h"
#include "ntw.h"
#include "utf8.h"
#include "wbuf.h"

#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define CORELIB "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/System.Private.CoreLib.dll"

/* s (UTF-8) as a NUL-terminated UTF-16LE string; wb_wstr takes ASCII only. */
static void wstr(struct wb *w, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = 0;
        assert_true(utf8_decode((const uint8_t *)s + i, n - i, &cp, &len));
        uint8_t u[4];
        size_t k = utf16le_encode(u, cp);
        wb_raw(w, u, k);
        i += len;
    }
    wb_u16(w, 0);
}

/* A MethodLoadVerbose / MethodDC*Verbose payload of this version (docs/events.md §6.2). */
static struct wb method_payload(uint32_t version, uint64_t module, uint64_t start, uint32_t size,
                                const char *ns, const char *name, const char *sig)
{
    struct wb p = {0};
    wb_u64(&p, 0x7f00000a0000ull + start); /* MethodID */
    wb_u64(&p, module);
    wb_u64(&p, start);
    wb_u32(&p, size);
    wb_u32(&p, 0x06000000u | (uint32_t)((start >> 12) & 0xffffu)); /* MethodToken: one per range */
    wb_u32(&p, 0x8 | (4u << 7));
    wstr(&p, ns);
    wstr(&p, name);
    wstr(&p, sig);
    if (version >= 1) {
        wb_u16(&p, 0); /* ClrInstanceID */
    }
    if (version >= 2) {
        wb_u64(&p, 0); /* ReJITID */
    }
    return p;
}

static void add_method(struct ev_symbols *s, uint32_t version, uint64_t module, uint64_t start,
                       uint32_t size, const char *ns, const char *name, const char *sig)
{
    struct wb p = method_payload(version, module, start, size, ns, name, sig);
    assert_int_equal(ev_symbols_add_method(s, p.b, p.n, version), 0);
    free(p.b);
}

/* A ModuleLoad / ModuleDCEnd payload (v2 layout up to ClrInstanceID). */
static struct wb module_payload(uint64_t id, const char *il_path, const char *native_path)
{
    struct wb p = {0};
    wb_u64(&p, id);
    wb_u64(&p, id + 0x100); /* AssemblyID */
    wb_u32(&p, 0x8);
    wb_u32(&p, 0);
    wstr(&p, il_path);
    wstr(&p, native_path);
    wb_u16(&p, 0);
    return p;
}

static void add_module(struct ev_symbols *s, uint64_t id, const char *il_path)
{
    struct wb p = module_payload(id, il_path, "");
    assert_int_equal(ev_symbols_add_module(s, p.b, p.n, 2), 0);
    free(p.b);
}

static void assert_name(struct ev_symbols *s, uint64_t ip, int rc, const char *want)
{
    char out[512];
    assert_int_equal(ev_symbols_resolve(s, ip, out, sizeof(out)), rc);
    assert_string_equal(out, want);
}

static void test_ev_symbols_names(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 0x10, CORELIB);
    add_module(s, 0x20, "C:\\app\\TestApp.EXE");
    add_module(s, 0x30, ""); /* no IL path: the native one (below) */
    struct wb p = module_payload(0x40, "", "/app/Native.so");
    assert_int_equal(ev_symbols_add_module(s, p.b, p.n, 1), 0);
    free(p.b);
    add_method(
        s, 2, 0x10, 0x1000, 0x100, "System.Number", "NumberToString",
        "void  (value class System.Text.ValueStringBuilder&,value class "
        "System.Number/NumberBuffer&,wchar,int32,class System.Globalization.NumberFormatInfo)");
    add_method(s, 1, 0x20, 0x2000, 0x10, "TestApp.Hot", "SpinHotLoop", "float64  (int64,float64)");
    add_method(s, 0, 0x20, 0x3000, 0x10, "", "dynamicClass", "IL_STUB"); /* no '(' */
    add_method(s, 2, 0x99, 0x4000, 0x10, "A.B", "C", "void  ()");        /* unknown module */
    add_method(s, 2, 0x40, 0x5000, 0x10, "N", "M", "void  ()");
    assert_name(
        s, 0x1000, 0,
        "System.Private.CoreLib!System.Number.NumberToString(value class "
        "System.Text.ValueStringBuilder&,value class System.Number/NumberBuffer&,wchar,int32,"
        "class System.Globalization.NumberFormatInfo)");
    assert_name(s, 0x200f, 0, "TestApp!TestApp.Hot.SpinHotLoop(int64,float64)");
    assert_name(s, 0x3000, 0, "TestApp!dynamicClass");
    assert_name(s, 0x4000, 0, "?!A.B.C()");
    assert_name(s, 0x5000, 0, "Native.so!N.M()");
    /* A name longer than the output is cut, NUL-terminated. */
    char small[8];
    assert_int_equal(ev_symbols_resolve(s, 0x2000, small, sizeof(small)), 0);
    assert_string_equal(small, "TestApp");
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    assert_int_equal(st.methods, 5);
    assert_int_equal(st.modules, 4);
    assert_int_equal(st.malformed, 0);
    ev_symbols_free(s);
}

static void test_ev_symbols_ranges(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, "/app/M.dll");
    add_method(s, 2, 1, 0x1000, 0x1000, "T", "Big", "void  ()");
    add_method(s, 2, 1, 0x1800, 0x100, "T", "Inner", "void  ()"); /* reported later, inside */
    add_method(s, 2, 1, 0x3000, 0x100, "T", "Tier0", "void  ()");
    add_method(s, 2, 1, 0x3000, 0x80, "T", "Tier1", "void  ()"); /* the same address, re-JIT */
    add_method(s, 2, 1, 0x5000, 0, "T", "Empty", "void  ()");    /* no code: holds nothing */
    /* Bounds: first byte in, one past the end out. */
    assert_name(s, 0x1000, 0, "M!T.Big()");
    assert_name(s, 0x1fff, 0, "M!T.Big()");
    assert_name(s, 0x2000, AGENT_E_NOTFOUND, EV_SYMBOLS_UNKNOWN);
    assert_name(s, 0xfff, AGENT_E_NOTFOUND, EV_SYMBOLS_UNKNOWN);
    assert_name(s, 0, AGENT_E_NOTFOUND, EV_SYMBOLS_UNKNOWN);
    assert_name(s, UINT64_MAX, AGENT_E_NOTFOUND, EV_SYMBOLS_UNKNOWN);
    /* Overlap: the later range wins where it is, the earlier one around it. */
    assert_name(s, 0x1800, 0, "M!T.Inner()");
    assert_name(s, 0x18ff, 0, "M!T.Inner()");
    assert_name(s, 0x1900, 0, "M!T.Big()");
    assert_name(s, 0x17ff, 0, "M!T.Big()");
    /* Re-JIT at the same start: the later report wins; past its end the older range remains. */
    assert_name(s, 0x3000, 0, "M!T.Tier1()");
    assert_name(s, 0x307f, 0, "M!T.Tier1()");
    assert_name(s, 0x3080, 0, "M!T.Tier0()");
    assert_name(s, 0x5000, AGENT_E_NOTFOUND, EV_SYMBOLS_UNKNOWN);
    /* A range added after a lookup is seen by the next one (the index is rebuilt). */
    add_method(s, 2, 1, 0x1000, 0x10, "T", "Newest", "void  ()");
    assert_name(s, 0x1008, 0, "M!T.Newest()");
    assert_name(s, 0x1010, 0, "M!T.Big()");
    ev_symbols_free(s);
}

/* Version 1 has no ReJITID, version 2 does; payloads longer than the layout are accepted. */
static void test_ev_symbols_versions(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    struct wb v1 = method_payload(1, 1, 0x1000, 0x10, "T", "V1", "void  ()");
    struct wb v2 = method_payload(2, 1, 0x2000, 0x10, "T", "V2", "void  ()");
    /* A v1 payload read as v2 is 8 bytes short. */
    assert_int_equal(ev_symbols_add_method(s, v1.b, v1.n, 2), AGENT_E_PROTO);
    assert_int_equal(ev_symbols_add_method(s, v1.b, v1.n, 1), 0);
    assert_int_equal(ev_symbols_add_method(s, v2.b, v2.n, 2), 0);
    /* A v2 payload read as v1 (or v0): extra bytes at the end are fine. */
    assert_int_equal(ev_symbols_add_method(s, v2.b, v2.n, 1), 0);
    /* Cut inside the strings, and before them. */
    assert_int_equal(ev_symbols_add_method(s, v2.b, 40, 2), AGENT_E_PROTO);
    assert_int_equal(ev_symbols_add_method(s, v2.b, 20, 0), AGENT_E_PROTO);
    struct wb m = module_payload(1, "/app/M.dll", "");
    assert_int_equal(ev_symbols_add_module(s, m.b, 30, 2), AGENT_E_PROTO);
    assert_int_equal(ev_symbols_add_module(s, m.b, m.n, 2), 0);
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    assert_int_equal(st.methods, 3);
    assert_int_equal(st.malformed, 4);
    assert_name(s, 0x1000, 0, "M!T.V1()");
    assert_name(s, 0x2000, 0, "M!T.V2()");
    free(v1.b);
    free(v2.b);
    free(m.b);
    ev_symbols_free(s);
}

/* A native event's metadata of this version: no name, no field list. */
static void md_native(struct nt *t, uint32_t id, const char *provider, uint32_t event_id,
                      uint32_t version)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, provider);
    wb_u32(&w, event_id);
    wb_wstr(&w, "");
    wb_u64(&w, 0x10);
    wb_u32(&w, version);
    wb_u32(&w, 4);
    wb_u32(&w, 0);
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static void blob(struct nt *t, uint32_t md, struct wb p)
{
    nt_blob(t, md, SYNC_QPC, 0, 0, &p);
    free(p.b);
}

/* The rundown's 144 in v1 and v2, DCStart 143, the runtime's MethodLoadVerbose and ModuleLoad. */
static uint8_t *synthetic(size_t *n)
{
    enum { MD_DCEND_V1 = 1, MD_DCEND_V2, MD_DCSTART, MD_LOAD, MD_MODULE, MD_MODULE_LOAD };
    struct nt t;
    nt_begin(&t);
    md_native(&t, MD_DCEND_V1, RUNDOWN, 144, 1);
    md_native(&t, MD_DCEND_V2, RUNDOWN, 144, 2);
    md_native(&t, MD_DCSTART, RUNDOWN, 143, 2);
    md_native(&t, MD_LOAD, RUNTIME, 143, 2);
    md_native(&t, MD_MODULE, RUNDOWN, 154, 2);
    md_native(&t, MD_MODULE_LOAD, RUNTIME, 152, 2);
    nt_block(&t, "MetadataBlock", false);
    blob(&t, MD_LOAD, method_payload(2, 2, 0x500, 0x10, "App", "Jitted", "void  ()"));
    blob(&t, MD_MODULE_LOAD, module_payload(2, "/app/App.dll", ""));
    blob(&t, MD_DCSTART, method_payload(2, 1, 0x100, 0x10, "T", "Start", "void  ()"));
    blob(&t, MD_DCEND_V1, method_payload(1, 1, 0x200, 0x10, "T", "Stub", "void  (int32)"));
    blob(&t, MD_DCEND_V2, method_payload(2, 1, 0x300, 0x10, "T", "End", "void  (int64)"));
    blob(&t, MD_MODULE, module_payload(1, CORELIB, ""));
    nt_block(&t, "EventBlock", false);
    wb_u8(&t.out, 1);
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

static void test_ev_symbols_stream(void **state)
{
    (void)state;
    size_t n = 0;
    uint8_t *p = synthetic(&n);
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        struct ev_symbols *s = NULL;
        assert_int_equal(ev_symbols_new(&s), 0);
        if (chunk == 0) {
            assert_int_equal(ev_symbols_feed(s, p, n), 0);
        } else {
            for (size_t i = 0; i < n; i++) {
                assert_int_equal(ev_symbols_feed(s, p + i, 1), 0);
            }
        }
        assert_int_equal(ev_symbols_finish(s), 0);
        assert_null(ev_symbols_error(s));
        struct ev_symbols_stats st;
        ev_symbols_get_stats(s, &st);
        assert_int_equal(st.methods, 4);
        assert_int_equal(st.modules, 2);
        assert_int_equal(st.malformed, 0);
        assert_int_equal(st.sampling_rate_ns, 1000000);
        assert_name(s, 0x505, 0, "App!App.Jitted()");
        assert_name(s, 0x100, 0, "System.Private.CoreLib!T.Start()");
        assert_name(s, 0x20f, 0, "System.Private.CoreLib!T.Stub(int32)");
        assert_name(s, 0x300, 0, "System.Private.CoreLib!T.End(int64)");
        ev_symbols_free(s);
    }
    /* Cut before the end tag: the stream ends early. */
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_feed(s, p, n - 1), 0);
    assert_int_equal(ev_symbols_finish(s), AGENT_E_TRUNC);
    assert_non_null(ev_symbols_error(s));
    ev_symbols_free(s);
    free(p);
}

static int to_buf(void *ud, const uint8_t *p, size_t n)
{
    return buf_append(ud, p, n);
}

static int fail_sink(void *ud, const uint8_t *p, size_t n)
{
    (void)ud;
    (void)p;
    (void)n;
    return AGENT_E_CLOSED;
}

static cJSON *write_json(struct ev_symbols *s, const char *name)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_symbols_write_speedscope(s, name, to_buf, &b), 0);
    cJSON *doc = cJSON_Parse(buf_cstr(&b));
    assert_non_null(doc);
    buf_fini(&b);
    return doc;
}

static const char *frame_name(cJSON *doc, int i)
{
    cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "shared"), "frames");
    return cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetArrayItem(frames, i), "name"));
}

/* The names of a sample's frames, outermost first, joined by '|'. */
static void sample_names(cJSON *doc, cJSON *sample, char *out, size_t cap)
{
    out[0] = '\0';
    size_t len = 0;
    cJSON *f = NULL;
    cJSON_ArrayForEach(f, sample)
    {
        int w = snprintf(out + len, cap - len, "%s%s", len > 0 ? "|" : "",
                         frame_name(doc, (int)cJSON_GetNumberValue(f)));
        assert_true(w > 0 && (size_t)w < cap - len);
        len += (size_t)w;
    }
}

static void test_ev_symbols_speedscope(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, "/app/M\xc3\xa9.dll");
    /* Names that need escaping in JSON: a quote, a backslash, a control character, non-ASCII. */
    add_method(s, 2, 1, 0x1000, 0x10, "N\"q", "Back\\slash", "void  (\tx)");
    add_method(s, 2, 1, 0x2000, 0x10, "N", "Caf\xc3\xa9", "void  ()");
    add_method(s, 2, 1, 0x3000, 0x10, "N", "Main", "void  ()");
    ev_symbols_set_clock(s, 500000, 1000, 1000000); /* 0.5 ms; QPC in microseconds from 1000 */
    /* Leaf first. Thread 9 is sampled first, later in time order than it is fed. */
    const uint64_t a[] = {0x1004, 0x2004, 0x3004};
    const uint64_t b[] = {0x2008, 0x3008};
    const uint64_t c[] = {0xdead, 0x3000};
    assert_int_equal(ev_symbols_add_sample(s, 9, 5000, a, 3), 0);
    assert_int_equal(ev_symbols_add_sample(s, 7, 2000, b, 2), 0);
    assert_int_equal(ev_symbols_add_sample(s, 9, 3000, c, 2), 0);
    assert_int_equal(ev_symbols_add_sample(s, 9, 4000, a, 3), 0); /* the same stack again */
    assert_int_equal(ev_symbols_add_sample(s, 9, 0, a, 0), AGENT_E_INVAL);
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    assert_int_equal(st.samples, 4);
    assert_int_equal(st.stacks, 3);

    cJSON *doc = write_json(s, "cpu \"1\".nettrace");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "$schema")),
                        "https://www.speedscope.app/file-format-schema.json");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "name")),
                        "cpu \"1\".nettrace");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "exporter")), "dotmon");
    cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "shared"), "frames");
    assert_int_equal(cJSON_GetArraySize(frames), 4); /* three methods and the unknown frame */
    cJSON *profiles = cJSON_GetObjectItem(doc, "profiles");
    assert_int_equal(cJSON_GetArraySize(profiles), 2);
    cJSON *p9 = cJSON_GetArrayItem(profiles, 0);
    cJSON *p7 = cJSON_GetArrayItem(profiles, 1);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p9, "name")), "Thread 9");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p7, "name")), "Thread 7");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p9, "type")), "sampled");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p9, "unit")), "milliseconds");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p9, "startValue")) == 2.0);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p9, "endValue")) == 4.5);
    cJSON *samples = cJSON_GetObjectItem(p9, "samples");
    cJSON *weights = cJSON_GetObjectItem(p9, "weights");
    assert_int_equal(cJSON_GetArraySize(samples), 3);
    assert_int_equal(cJSON_GetArraySize(weights), 3);
    assert_true(cJSON_GetNumberValue(cJSON_GetArrayItem(weights, 2)) == 0.5);
    char names[1024];
    sample_names(doc, cJSON_GetArrayItem(samples, 0), names, sizeof(names));
    assert_string_equal(names, "M\xc3\xa9!N.Main()|" EV_SYMBOLS_UNKNOWN);
    sample_names(doc, cJSON_GetArrayItem(samples, 1), names, sizeof(names));
    assert_string_equal(
        names, "M\xc3\xa9!N.Main()|M\xc3\xa9!N.Caf\xc3\xa9()|M\xc3\xa9!N\"q.Back\\slash(\tx)");
    sample_names(doc, cJSON_GetArrayItem(cJSON_GetObjectItem(p7, "samples"), 0), names,
                 sizeof(names));
    assert_string_equal(names, "M\xc3\xa9!N.Main()|M\xc3\xa9!N.Caf\xc3\xa9()");
    cJSON_Delete(doc);
    /* The sink's error comes back. */
    assert_int_equal(ev_symbols_write_speedscope(s, "x", fail_sink, NULL), AGENT_E_CLOSED);
    ev_symbols_free(s);

    /* No samples: a valid document with no profiles. */
    assert_int_equal(ev_symbols_new(&s), 0);
    doc = write_json(s, NULL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "profiles")), 0);
    cJSON_Delete(doc);
    ev_symbols_free(s);
}

static int buf_sink(void *ud, const uint8_t *p, size_t n)
{
    return buf_append(ud, p, n);
}

/* Aggregation: recursion counted once inclusive, PollGC leaves given to their caller, a stack of
 * helpers only keeping its leaf, the top cut, ties by name; the JSON and text forms. */
static void test_ev_symbols_aggregate(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, CORELIB);
    add_module(s, 2, "/app/App.dll");
    add_method(s, 2, 1, 0x1000, 0x10, "System.Threading.Thread", "<PollGC>g__PollGCWorker|1_0",
               "void  ()");
    add_method(s, 2, 1, 0x1100, 0x10, "System.Threading.Thread", "PollGC", "void  ()");
    add_method(s, 2, 2, 0x2000, 0x10, "App", "Hot", "void  ()");
    add_method(s, 2, 2, 0x3000, 0x10, "App", "Rec", "void  ()");
    add_method(s, 2, 2, 0x4000, 0x10, "App", "Main", "void  ()");
    const uint64_t hot_poll[] = {0x1000, 0x1100, 0x2000, 0x4000}; /* leaf first */
    const uint64_t rec[] = {0x3000, 0x3004, 0x3008, 0x4000};
    const uint64_t helpers[] = {0x1000, 0x1100};
    for (int i = 0; i < 6; i++) {
        assert_int_equal(ev_symbols_add_sample(s, 1, i, hot_poll, 4), 0);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(ev_symbols_add_sample(s, 2, i, rec, 4), 0);
    }
    assert_int_equal(ev_symbols_add_sample(s, 2, 9, helpers, 2), 0);
    struct ev_symbols_profile prof;
    assert_int_equal(ev_symbols_aggregate(s, 0, 0, &prof), AGENT_E_INVAL);
    assert_int_equal(ev_symbols_aggregate(s, 3, EV_SYMBOLS_PATHS_MAX + 1, &prof), AGENT_E_INVAL);
    assert_int_equal(ev_symbols_aggregate(s, 3, 0, &prof), 0);
    assert_false(prof.has_paths);
    assert_int_equal(prof.samples, 10);
    assert_int_equal(prof.threads, 2);
    assert_int_equal(prof.external, 0);
    assert_int_equal(prof.leaf_skipped, 6);
    assert_int_equal(prof.n_exclusive, 3);
    assert_string_equal(prof.by_exclusive[0].name, "App!App.Hot()");
    assert_int_equal(prof.by_exclusive[0].exclusive, 6);
    assert_string_equal(prof.by_exclusive[1].name, "App!App.Rec()");
    assert_int_equal(prof.by_exclusive[1].exclusive, 3);
    assert_int_equal(prof.by_exclusive[1].inclusive, 3); /* recursion: once per sample */
    assert_string_equal(
        prof.by_exclusive[2].name,
        "System.Private.CoreLib!System.Threading.Thread.<PollGC>g__PollGCWorker|1_0()");
    assert_int_equal(prof.by_exclusive[2].exclusive, 1);
    assert_string_equal(prof.by_inclusive[0].name, "App!App.Main()");
    assert_int_equal(prof.by_inclusive[0].inclusive, 9);
    assert_int_equal(prof.by_inclusive[0].exclusive, 0);

    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_symbols_write_profile_json(&prof, 42, 4, buf_sink, &b), 0);
    cJSON *doc = cJSON_ParseWithLength((const char *)buf_data(&b), buf_size(&b));
    assert_non_null(doc);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "pid")) == 42);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(doc, "kind")), "cpu");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "samples")) == 10);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "exclusiveSkips")), 2);
    cJSON *top0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "top"), 0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(top0, "method")), "App!App.Hot()");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(top0, "exclusivePercent")) == 60.0);
    assert_null(cJSON_GetObjectItem(doc, "hotPaths")); /* not asked: the answer as before */
    cJSON_Delete(doc);
    buf_reset(&b);
    assert_int_equal(ev_symbols_write_profile_text(&prof, 42, 4, buf_sink, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), "         6   60.00          6   60.00  App!App.Hot()\n"));
    assert_int_equal(ev_symbols_write_profile_json(&prof, 42, 4, fail_sink, NULL), AGENT_E_CLOSED);

    /* The folded stacks (format=flame): frames in first-use order (stacks leaf first), each stack
     * its count then frames outermost first, the helpers left in for the reader to fold; then
     * the samples of each thread per stack. */
    buf_reset(&b);
    assert_int_equal(ev_symbols_write_flame(s, 42, 4, buf_sink, &b), 0);
    doc = cJSON_ParseWithLength((const char *)buf_data(&b), buf_size(&b));
    assert_non_null(doc);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "samples")) == 10);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "threads")) == 2);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(doc, "externalSamples")) == 0);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "exclusiveSkips")), 2);
    char *frames = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "frames"));
    assert_string_equal(
        frames, "[\"System.Private.CoreLib!System.Threading.Thread.<PollGC>g__PollGCWorker|1_0()\","
                "\"System.Private.CoreLib!System.Threading.Thread.PollGC()\",\"App!App.Hot()\","
                "\"App!App.Main()\",\"App!App.Rec()\"]");
    free(frames);
    char *stacks = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "stacks"));
    assert_string_equal(stacks, "[[6,3,2,1,0],[3,3,4,4,4],[1,1,0]]");
    free(stacks);
    /* The per-thread split: thread 1 had the first stack only, thread 2 the other two. */
    char *tids = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "threadIds"));
    assert_string_equal(tids, "[1,2]");
    free(tids);
    char *split = cJSON_PrintUnformatted(cJSON_GetObjectItem(doc, "threadStacks"));
    assert_string_equal(split, "[[0,0,6],[1,1,3],[1,2,1]]");
    free(split);
    cJSON_Delete(doc);
    assert_int_equal(ev_symbols_write_flame(s, 42, 4, fail_sink, NULL), AGENT_E_CLOSED);
    buf_fini(&b);
    ev_symbols_profile_fini(&prof);
    ev_symbols_profile_fini(&prof); /* zeroed: twice is fine */
    ev_symbols_free(s);
}

/* The frames of hot path i of doc's "hotPaths" joined with '|'. */
static void path_frames(cJSON *doc, int i, char *out, size_t cap)
{
    cJSON *frames =
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "hotPaths"), i), "frames");
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < cJSON_GetArraySize(frames); k++) {
        n += (size_t)snprintf(out + n, cap - n, "%s%s", k == 0 ? "" : "|",
                              cJSON_GetStringValue(cJSON_GetArrayItem(frames, k)));
        assert_true(n < cap);
    }
}

/*
 * Hot paths (GET /profile?paths=N): stacks of different addresses in the same methods are one
 * path, summed over threads; leaf helpers folded into their caller (a stack of helpers only kept
 * whole); ranked by samples, ties by the frames' names outermost first (a prefix first); the
 * innermost 16 frames kept with the outer ones counted; the top N; the JSON key after
 * topInclusive and the text section.
 */
static void test_ev_symbols_hot_paths(void **state)
{
    (void)state;
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, CORELIB);
    add_module(s, 2, "/app/App.dll");
    add_method(s, 2, 1, 0x1000, 0x10, "System.Threading.Thread", "<PollGC>g__PollGCWorker|1_0",
               "void  ()");
    add_method(s, 2, 1, 0x1100, 0x10, "System.Threading.Thread", "PollGC", "void  ()");
    add_method(s, 2, 2, 0x2000, 0x10, "App", "Hot", "void  ()");
    add_method(s, 2, 2, 0x3000, 0x10, "App", "Rec", "void  ()");
    add_method(s, 2, 2, 0x4000, 0x10, "App", "Main", "void  ()");
    add_method(s, 2, 2, 0x5000, 0x10, "App", "A", "void  ()");
    add_method(s, 2, 2, 0x6000, 0x10, "App", "B", "void  ()");
    add_method(s, 2, 2, 0x7000, 0x10, "App", "Other", "void  ()");
    /* Leaf first. Hot at its GC poll on thread 1, and at another address on thread 2: one path. */
    const uint64_t hot_poll[] = {0x1100, 0x2000, 0x4000};
    const uint64_t hot_other[] = {0x2008, 0x4004};
    const uint64_t main_only[] = {0x4008};
    const uint64_t via_a[] = {0x5000, 0x4000};
    const uint64_t via_b[] = {0x6000, 0x4000};
    const uint64_t helpers[] = {0x1000, 0x1100};
    uint64_t deep_main[21], deep_other[21], exact16[16];
    for (int k = 0; k < 20; k++) {
        deep_main[k] = deep_other[k] = 0x3000 + (uint64_t)(k % 4);
    }
    deep_main[20] = 0x4000;
    deep_other[20] = 0x7000;
    for (int k = 0; k < 15; k++) {
        exact16[k] = 0x3000;
    }
    exact16[15] = 0x4000;
    int64_t ts = 0;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ev_symbols_add_sample(s, 1, ts++, hot_poll, 3), 0);
    }
    for (int i = 0; i < 3; i++) { /* B before A: the tie is not settled by arrival */
        assert_int_equal(ev_symbols_add_sample(s, 2, ts++, via_b, 2), 0);
        assert_int_equal(ev_symbols_add_sample(s, 1, ts++, via_a, 2), 0);
        assert_int_equal(ev_symbols_add_sample(s, 3, ts++, main_only, 1), 0);
    }
    for (int i = 0; i < 2; i++) {
        assert_int_equal(ev_symbols_add_sample(s, 2, ts++, hot_other, 2), 0);
        assert_int_equal(ev_symbols_add_sample(s, 2, ts++, deep_main, 21), 0);
    }
    assert_int_equal(ev_symbols_add_sample(s, 3, ts++, helpers, 2), 0);
    assert_int_equal(ev_symbols_add_sample(s, 3, ts++, deep_other, 21), 0);
    assert_int_equal(ev_symbols_add_sample(s, 3, ts++, exact16, 16), 0);

    struct ev_symbols_profile prof;
    assert_int_equal(ev_symbols_aggregate(s, 5, EV_SYMBOLS_PATHS_MAX, &prof), 0);
    assert_int_equal(prof.samples, 20);
    assert_true(prof.has_paths);
    assert_int_equal(prof.n_paths, 8);
    static const uint64_t want_samples[] = {6, 3, 3, 3, 2, 1, 1, 1};
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(prof.paths[i].samples, want_samples[i]);
    }
    /* 1: both Hot stacks, the PollGC leaf folded. */
    assert_int_equal(prof.paths[0].n_frames, 2);
    assert_string_equal(prof.paths[0].frames[0], "App!App.Main()");
    assert_string_equal(prof.paths[0].frames[1], "App!App.Hot()");
    assert_int_equal(prof.paths[0].elided, 0);
    /* 2-4: a tie of three, by name outermost first, the prefix first. */
    assert_int_equal(prof.paths[1].n_frames, 1);
    assert_string_equal(prof.paths[1].frames[0], "App!App.Main()");
    assert_string_equal(prof.paths[2].frames[1], "App!App.A()");
    assert_string_equal(prof.paths[3].frames[1], "App!App.B()");
    /* 5: 21 frames, the innermost 16 kept (all Rec), 5 dropped. */
    assert_int_equal(prof.paths[4].n_frames, EV_SYMBOLS_PATH_FRAMES);
    assert_int_equal(prof.paths[4].elided, 5);
    for (uint32_t k = 0; k < EV_SYMBOLS_PATH_FRAMES; k++) {
        assert_string_equal(prof.paths[4].frames[k], "App!App.Rec()");
    }
    /* 6-8: a tie of one sample each: Main < Other < System.Private.CoreLib. Exactly 16 frames
     * drop none; the deep stack under Other is its own path though it shows as 5's. */
    assert_int_equal(prof.paths[5].n_frames, 16);
    assert_int_equal(prof.paths[5].elided, 0);
    assert_string_equal(prof.paths[5].frames[0], "App!App.Main()");
    assert_string_equal(prof.paths[5].frames[15], "App!App.Rec()");
    assert_int_equal(prof.paths[6].elided, 5);
    assert_string_equal(prof.paths[6].frames[0], "App!App.Rec()");
    assert_int_equal(prof.paths[7].n_frames, 2); /* helpers only: kept whole */
    assert_string_equal(prof.paths[7].frames[0],
                        "System.Private.CoreLib!System.Threading.Thread.PollGC()");

    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_symbols_write_profile_json(&prof, 42, 4, buf_sink, &b), 0);
    cJSON *doc = cJSON_ParseWithLength((const char *)buf_data(&b), buf_size(&b));
    assert_non_null(doc);
    cJSON *last = cJSON_GetArrayItem(doc, cJSON_GetArraySize(doc) - 1);
    assert_string_equal(last->string, "hotPaths"); /* after topInclusive */
    assert_string_equal(last->prev->string, "topInclusive");
    assert_int_equal(cJSON_GetArraySize(last), 8);
    cJSON *p0 = cJSON_GetArrayItem(last, 0);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p0, "samples")) == 6);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p0, "percent")) == 30.0);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(p0, "elidedFrames")) == 0);
    char names[2048];
    path_frames(doc, 0, names, sizeof(names));
    assert_string_equal(names, "App!App.Main()|App!App.Hot()");
    assert_true(cJSON_GetNumberValue(
                    cJSON_GetObjectItem(cJSON_GetArrayItem(last, 4), "elidedFrames")) == 5);
    cJSON_Delete(doc);
    buf_reset(&b);
    assert_int_equal(ev_symbols_write_profile_text(&prof, 42, 4, buf_sink, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), "\nHot paths (the most sampled stacks, outermost frame "
                                         "first):\n  1. 6 samples (30.00 %)\n"
                                         "       App!App.Main()\n       App!App.Hot()\n"));
    assert_non_null(strstr(buf_cstr(&b), "  5. 2 samples (10.00 %)\n       ... 5 outer frames\n"));
    ev_symbols_profile_fini(&prof);

    /* The top N only; N = 0 asks for none (no key at all). */
    assert_int_equal(ev_symbols_aggregate(s, 5, 2, &prof), 0);
    assert_int_equal(prof.n_paths, 2);
    assert_string_equal(prof.paths[1].frames[0], "App!App.Main()");
    assert_int_equal(prof.paths[1].n_frames, 1);
    ev_symbols_profile_fini(&prof);
    assert_int_equal(ev_symbols_aggregate(s, 5, 0, &prof), 0);
    assert_false(prof.has_paths);
    assert_null(prof.paths);
    buf_reset(&b);
    assert_int_equal(ev_symbols_write_profile_json(&prof, 42, 4, buf_sink, &b), 0);
    assert_null(strstr(buf_cstr(&b), "hotPaths"));
    ev_symbols_profile_fini(&prof);
    buf_fini(&b);
    ev_symbols_free(s);

    /* No samples: an empty list, still there when asked. */
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_aggregate(s, 5, 3, &prof), 0);
    assert_true(prof.has_paths);
    assert_int_equal(prof.n_paths, 0);
    buf_init(&b, 0);
    assert_int_equal(ev_symbols_write_profile_json(&prof, 42, 4, buf_sink, &b), 0);
    assert_non_null(strstr(buf_cstr(&b), ",\"hotPaths\":[]}"));
    buf_fini(&b);
    ev_symbols_profile_fini(&prof);
    ev_symbols_free(s);
}

/* cpu.nettrace: SampleProfiler and the runtime's GC keyword, no rundown (fixtures README). */
static void test_ev_symbols_fixture_no_rundown(void **state)
{
    (void)state;
    size_t n = 0;
    uint8_t *p = fixture_read("nettrace", "cpu.nettrace", &n);
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_feed(s, p, n), 0);
    assert_int_equal(ev_symbols_finish(s), 0);
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    assert_int_equal(st.samples + st.no_stack, 8807);
    assert_int_equal(st.no_stack, 0);
    assert_int_equal(st.methods, 0);
    assert_true(st.stacks > 0 && st.stacks <= st.samples);
    cJSON *doc = write_json(s, "cpu.nettrace");
    cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(doc, "shared"), "frames");
    assert_int_equal(cJSON_GetArraySize(frames), 1);
    assert_string_equal(frame_name(doc, 0), EV_SYMBOLS_UNKNOWN);
    size_t total = 0;
    cJSON *prof = NULL;
    cJSON_ArrayForEach(prof, cJSON_GetObjectItem(doc, "profiles"))
    {
        total += (size_t)cJSON_GetArraySize(cJSON_GetObjectItem(prof, "samples"));
    }
    assert_int_equal(total, 8807);
    cJSON_Delete(doc);
    ev_symbols_free(s);
    free(p);
}

/* A name of n characters, 'x' after the digits of k so that each one is new. */
static char *long_name(size_t n, unsigned k)
{
    char *name = malloc(n + 1);
    assert_non_null(name);
    memset(name, 'x', n);
    name[n] = '\0';
    char num[16];
    int len = snprintf(num, sizeof(num), "%u", k);
    memcpy(name, num, (size_t)len);
    return name;
}

#define HOSTILE_SHARE (1024u * 1024u)
#define HOSTILE_NAME  30000u

/* Ever-new methods named by 30,000 characters: cut, charged, refused at the share's cap. */
static void test_ev_symbols_budget_methods(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "test", HOSTILE_SHARE);
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_set_share(s, &share), 0);
    int rc = 0;
    unsigned n = 0;
    for (; n < 100000 && rc == 0; n++) {
        char *name = long_name(HOSTILE_NAME, n);
        struct wb p = method_payload(2, 0x10, 0x1000 + 0x100ull * n, 0x100, "", name, "void  ()");
        rc = ev_symbols_add_method(s, p.b, p.n, 2);
        free(p.b);
        free(name);
    }
    assert_int_equal(rc, AGENT_E_BUDGET);
    print_message("methods kept in 1 MiB: %u, peak %llu bytes\n", n - 1,
                  (unsigned long long)atomic_load(&share.peak));
    /* A name costs 1,024 bytes + the marker + its NUL, the arena doubles: 500 to 1,000 fit. */
    assert_in_range(n - 1, 400, 1000);
    assert_true(atomic_load(&share.peak) <= HOSTILE_SHARE);
    assert_int_equal(atomic_load(&share.used), ev_symbols_held(s));
    assert_true(atomic_load(&share.refused) >= 1);
    char out[4096];
    assert_int_equal(ev_symbols_resolve(s, 0x1000 + 0x100ull * 7 + 5, out, sizeof(out)), 0);
    size_t len = strlen(out);
    assert_int_equal(len, strlen("?!") + EV_SYMBOLS_MAX_NAME + strlen(EV_CUT_MARKER));
    assert_memory_equal(out, "?!7xxx", 6);
    assert_string_equal(out + len - strlen(EV_CUT_MARKER), EV_CUT_MARKER);
    ev_symbols_free(s);
    assert_int_equal(atomic_load(&share.used), 0);
    assert_int_equal(membudget_used(), 0);
}

/* Ever-new stacks of 64 new addresses each: refused at the share's cap, all given back. */
static void test_ev_symbols_budget_stacks(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "test", HOSTILE_SHARE);
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_set_share(s, &share), 0);
    uint64_t ips[64];
    int rc = 0;
    unsigned n = 0;
    for (; n < 100000 && rc == 0; n++) {
        for (size_t i = 0; i < 64; i++) {
            ips[i] = 0x10000ull + 64ull * n + i;
        }
        rc = ev_symbols_add_sample(s, n % 7, n, ips, 64);
    }
    assert_int_equal(rc, AGENT_E_BUDGET);
    print_message("stacks of 64 new addresses kept in 1 MiB: %u, peak %llu bytes\n", n - 1,
                  (unsigned long long)atomic_load(&share.peak));
    /* A stack of 64 new addresses: 64 * (8 + 4 + 8 of address table) + its records. */
    assert_in_range(n - 1, 300, 1000);
    assert_true(atomic_load(&share.peak) <= HOSTILE_SHARE);
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    assert_int_equal(st.samples, n - 1);
    ev_symbols_free(s);
    assert_int_equal(atomic_load(&share.used), 0);
    assert_int_equal(membudget_used(), 0);
}

/* The stream: blocks of ever-new methods with 30,000-character names stop the feed. */
static void test_ev_symbols_budget_stream(void **state)
{
    (void)state;
    enum { MD_LOAD = 1, PER_BLOCK = 8 };
    struct mb_share share;
    mb_share_init(&share, "test", 128u * 1024u);
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_set_share(s, &share), 0);
    struct nt t;
    nt_begin(&t);
    md_native(&t, MD_LOAD, RUNTIME, 143, 2);
    nt_block(&t, "MetadataBlock", false);
    size_t fed = 0;
    int rc = 0;
    unsigned k = 0;
    for (unsigned b = 0; b < 200 && rc == 0; b++) {
        for (unsigned i = 0; i < PER_BLOCK; i++, k++) {
            char *name = long_name(HOSTILE_NAME, k);
            blob(&t, MD_LOAD,
                 method_payload(2, 1, 0x1000 + 0x100ull * k, 0x10, "Ns", name, "void  ()"));
            free(name);
        }
        nt_block(&t, "EventBlock", false);
        rc = ev_symbols_feed(s, t.out.b + fed, t.out.n - fed);
        fed = t.out.n;
    }
    assert_int_equal(rc, AGENT_E_BUDGET);
    assert_int_equal(ev_symbols_feed(s, (const uint8_t *)"x", 1), AGENT_E_BUDGET);
    assert_int_equal(ev_symbols_finish(s), AGENT_E_BUDGET);
    assert_non_null(strstr(ev_symbols_error(s), "memory share"));
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    print_message("stream: %llu methods kept in 128 KiB, %zu bytes fed\n",
                  (unsigned long long)st.methods, fed);
    assert_in_range(st.methods, 40, 127); /* 128 KiB / ~1 KiB a method */
    assert_true(atomic_load(&share.peak) <= 128u * 1024u);
    ev_symbols_free(s);
    assert_int_equal(atomic_load(&share.used), 0);
    assert_int_equal(membudget_used(), 0);
    free(t.out.b);
    free(t.blk.b);
}

/* ev_stacks (GET /stacks): each thread's first sample only, in the order threads were first
 * sampled; frames leaf first in parts (method, type, module file with its extension, token); a
 * run of unknown addresses as one [NativeFrame]; thread names where given; the three shapes. */
static struct ev_symbols *stacks_fixture(void)
{
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, CORELIB);
    add_module(s, 2, "/app/TestApp.dll");
    add_method(s, 2, 2, 0x1000, 0x100, "A.B", "Wait", "void  (int32)");
    add_method(s, 2, 1, 0x2000, 0x100, "System.Threading.Monitor", "Wait",
               "bool  (class System.Object)");
    add_method(s, 2, 2, 0x3000, 0x100, "C.D+\"Odd\"", "Spin", "void  ()");
    add_method(s, 2, 2, 0x4000, 0x100, "", "Global", "void  ()"); /* no type: UnknownClass */
    uint64_t first[] = {0x1010, 0x9999, 0x9998, 0x2010};
    uint64_t spin[] = {0x3010, 0x4010};
    uint64_t later[] = {0x2020};
    assert_int_equal(ev_symbols_add_sample(s, 0x68C0, 10, first, 4), 0);
    assert_int_equal(ev_symbols_add_sample(s, 7, 11, spin, 2), 0);
    assert_int_equal(ev_symbols_add_sample(s, 0x68C0, 12, later, 1), 0);
    return s;
}

static const char *names_of(void *ud, uint64_t thread)
{
    (void)ud;
    /* the kernel's 15 bytes may end inside a UTF-8 sequence (0xC3 alone) */
    return thread == 0x68C0 ? "worker \"1\"" : "bad\xC3";
}

static char *stacks_out(struct ev_symbols *s, enum ev_stacks_format format,
                        struct ev_stacks_counts *n)
{
    struct ev_stacks_opts o = {.format = format, .thread_name = names_of};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_stacks_write(s, &o, n, to_buf, &b), 0);
    size_t len = 0;
    char *out = buf_steal(&b, &len);
    assert_non_null(out);
    return out;
}

static void assert_frame(cJSON *f, const char *method, const char *type, const char *module,
                         double token)
{
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "methodName")), method);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "typeName")), type);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "moduleName")), module);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(f, "methodToken")) == token);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(f, "moduleVersionId")),
                        EV_STACKS_EMPTY_GUID);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(f, "hidden")));
}

static void test_ev_stacks_json(void **state)
{
    (void)state;
    struct ev_symbols *s = stacks_fixture();
    struct ev_stacks_counts n;
    char *out = stacks_out(s, EV_STACKS_JSON, &n);
    assert_int_equal(n.threads, 2);
    assert_int_equal(n.frames, 5);
    cJSON *doc = cJSON_Parse(out);
    assert_non_null(doc);
    cJSON *stacks = cJSON_GetObjectItem(doc, "stacks");
    assert_int_equal(cJSON_GetArraySize(stacks), 2);
    cJSON *t0 = cJSON_GetArrayItem(stacks, 0);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(t0, "threadId")) == 0x68C0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t0, "threadName")),
                        "worker \"1\"");
    cJSON *frames = cJSON_GetObjectItem(t0, "frames");
    assert_int_equal(cJSON_GetArraySize(frames), 3);
    assert_frame(cJSON_GetArrayItem(frames, 0), "Wait", "A.B", "TestApp.dll",
                 0x06000001); /* 0x1000 */
    assert_frame(cJSON_GetArrayItem(frames, 1), EV_STACKS_NATIVE_FRAME, EV_STACKS_NATIVE_FRAME,
                 EV_STACKS_NATIVE_FRAME, 0);
    assert_frame(cJSON_GetArrayItem(frames, 2), "Wait", "System.Threading.Monitor",
                 "System.Private.CoreLib.dll", 0x06000002);
    cJSON *t1 = cJSON_GetArrayItem(stacks, 1);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(t1, "threadId")) == 7);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(t1, "threadName")),
                        "bad\xEF\xBF\xBD"); /* made valid: U+FFFD */
    assert_frame(cJSON_GetArrayItem(cJSON_GetObjectItem(t1, "frames"), 1), "Global",
                 EV_STACKS_UNKNOWN_CLASS, "TestApp.dll", 0x06000004);
    assert_frame(cJSON_GetArrayItem(cJSON_GetObjectItem(t1, "frames"), 0), "Spin", "C.D+\"Odd\"",
                 "TestApp.dll", 0x06000003);
    cJSON_Delete(doc);
    free(out);
    struct buf b;
    buf_init(&b, 0);
    struct ev_stacks_opts o = {.format = EV_STACKS_JSON};
    assert_int_equal(ev_stacks_write(s, &o, NULL, fail_sink, &b), AGENT_E_CLOSED);
    buf_fini(&b);
    ev_symbols_free(s);
}

static void test_ev_stacks_text_speedscope(void **state)
{
    (void)state;
    struct ev_symbols *s = stacks_fixture();
    char *text = stacks_out(s, EV_STACKS_TEXT, NULL);
    assert_string_equal(text, "Thread: (0x68C0) worker \"1\"\n"
                              "  TestApp.dll!A.B.Wait\n"
                              "  [NativeFrame]\n"
                              "  System.Private.CoreLib.dll!System.Threading.Monitor.Wait\n"
                              "\n"
                              "Thread: (0x7) bad\xC3\n"
                              "  TestApp.dll!C.D+\"Odd\".Spin\n"
                              "  TestApp.dll!UnknownClass.Global\n"
                              "\n");
    free(text);
    char *ss = stacks_out(s, EV_STACKS_SPEEDSCOPE, NULL);
    cJSON *doc = cJSON_Parse(ss);
    assert_non_null(doc);
    assert_string_equal(frame_name(doc, 0), EV_STACKS_NATIVE_FRAME);
    assert_string_equal(frame_name(doc, 1), EV_STACKS_UNKNOWN_CLASS);
    cJSON *profiles = cJSON_GetObjectItem(doc, "profiles");
    assert_int_equal(cJSON_GetArraySize(profiles), 2);
    cJSON *p0 = cJSON_GetArrayItem(profiles, 0);
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p0, "name")),
                        "Thread: (0x68C0) worker \"1\"");
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(p0, "type")), "evented");
    cJSON *ev = cJSON_GetObjectItem(p0, "events");
    assert_int_equal(cJSON_GetArraySize(ev), 6);
    /* opened outermost first: Monitor.Wait, the native run, then the leaf A.B.Wait */
    const char *want[] = {"System.Private.CoreLib.dll!System.Threading.Monitor.Wait",
                          EV_STACKS_NATIVE_FRAME, "TestApp.dll!A.B.Wait"};
    for (int i = 0; i < 6; i++) {
        cJSON *e = cJSON_GetArrayItem(ev, i);
        const char *type = cJSON_GetStringValue(cJSON_GetObjectItem(e, "type"));
        int frame = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(e, "frame"));
        assert_string_equal(type, i < 3 ? "O" : "C");
        assert_string_equal(frame_name(doc, frame), want[i < 3 ? i : 5 - i]);
        assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "at")) == (i < 3 ? 0 : 1));
    }
    cJSON_Delete(doc);
    free(ss);
    ev_symbols_free(s);
}

/* ev_stacks' own tables (speedscope's shared frames) are charged to the symbols' share: a share
 * with no room left refuses the write, and every byte comes back. */
static void test_ev_stacks_budget(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "test", 1u << 20);
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    assert_int_equal(ev_symbols_set_share(s, &share), 0);
    add_module(s, 2, "/app/TestApp.dll");
    add_method(s, 2, 2, 0x1000, 0x100, "A.B", "Wait", "void  ()");
    uint64_t ips[] = {0x1010};
    assert_int_equal(ev_symbols_add_sample(s, 1, 1, ips, 1), 0);
    struct ev_stacks_opts text = {.format = EV_STACKS_TEXT};
    struct buf warm;
    buf_init(&warm, 0);
    /* once: the range index and the symbols' scratch stack grow (held by s until freed) */
    assert_int_equal(ev_stacks_write(s, &text, NULL, to_buf, &warm), 0);
    buf_fini(&warm);
    uint64_t before = atomic_load(&share.used);
    share.cap = before + 64; /* less than the first table of shared frames */
    struct ev_stacks_opts o = {.format = EV_STACKS_SPEEDSCOPE};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_stacks_write(s, &o, NULL, to_buf, &b), AGENT_E_BUDGET);
    assert_int_equal(atomic_load(&share.used), before);
    share.cap = 1u << 20;
    buf_reset(&b);
    assert_int_equal(ev_stacks_write(s, &o, NULL, to_buf, &b), 0);
    assert_int_equal(atomic_load(&share.used), before);
    buf_fini(&b);
    ev_symbols_free(s);
    assert_int_equal(atomic_load(&share.used), 0);
    mb_share_fini(&share);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_symbols_names),
        cmocka_unit_test(test_ev_symbols_ranges),
        cmocka_unit_test(test_ev_symbols_versions),
        cmocka_unit_test(test_ev_symbols_stream),
        cmocka_unit_test(test_ev_symbols_speedscope),
        cmocka_unit_test(test_ev_symbols_aggregate),
        cmocka_unit_test(test_ev_symbols_hot_paths),
        cmocka_unit_test(test_ev_symbols_fixture_no_rundown),
        cmocka_unit_test(test_ev_symbols_budget_methods),
        cmocka_unit_test(test_ev_symbols_budget_stacks),
        cmocka_unit_test(test_ev_symbols_budget_stream),
        cmocka_unit_test(test_ev_stacks_json),
        cmocka_unit_test(test_ev_stacks_text_speedscope),
        cmocka_unit_test(test_ev_stacks_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
