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
#include "ev_native.h"
#include "wbuf.h"

/*
 * events/ev_native.c: the table itself (sorted, well-formed layouts, names fit their keys) and
 * the walker over hand-built payloads of several layouts and versions (pointer sizes, strings,
 * arrays of scalars and of structs, nested arrays, byte runs, C-struct padding, payloads that are
 * too short or longer than their layout).
 */

/* ---- the table ------------------------------------------------------------------------------ */

/* Every array's count field is an earlier scalar of the same element, and its element lies inside
 * the layout; binaries likewise; no layout is over the caps. */
static void check_layout(const struct ev_native_event *e)
{
    assert_true(e->nfields <= EV_NATIVE_MAX_FIELDS);
    assert_true(e->nfields == 0 || e->fields != NULL);
    for (int k = 0; k < e->nfields; k++) {
        const struct ev_native_field *f = &e->fields[k];
        assert_true(f->type >= EV_NATIVE_U8 && f->type <= EV_NATIVE_ALIGN);
        assert_int_equal(f->key_len, f->name[0] != '\0' ? strlen(f->name) + 4 : 4);
        assert_true(f->key_len < EV_NATIVE_KEY_SIZE);
        for (const char *c = f->name; *c != '\0'; c++) {
            assert_true((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                        (*c >= '0' && *c <= '9'));
        }
        if (f->type == EV_NATIVE_ARRAY || f->type == EV_NATIVE_BINARY) {
            assert_true(f->ref < k);
            uint8_t t = e->fields[f->ref].type;
            assert_true(t == EV_NATIVE_U8 || t == EV_NATIVE_U16 || t == EV_NATIVE_U32);
        }
        if (f->type == EV_NATIVE_ARRAY) {
            assert_true(f->span >= 1 && k + f->span < e->nfields);
        }
    }
}

static void test_native_table(void **state)
{
    (void)state;
    size_t n = 0;
    const struct ev_native_event *t = ev_native_table(&n);
    assert_true(n > 200);
    for (size_t k = 0; k < n; k++) {
        if (k > 0) { /* sorted by (provider, id, version), no duplicates */
            const struct ev_native_event *a = &t[k - 1];
            const struct ev_native_event *b = &t[k];
            assert_true(a->provider < b->provider ||
                        (a->provider == b->provider &&
                         (a->id < b->id || (a->id == b->id && a->version < b->version))));
        }
        assert_ptr_equal(ev_native_find(t[k].provider, t[k].id, t[k].version), &t[k]);
        assert_true(t[k].name[0] != '\0' && strstr(t[k].name, "_V") == NULL);
        check_layout(&t[k]);
    }
}

static void test_native_lookup(void **state)
{
    (void)state;
    assert_int_equal(ev_native_provider_of("Microsoft-Windows-DotNETRuntime"), EV_NATIVE_RUNTIME);
    assert_int_equal(ev_native_provider_of("Microsoft-Windows-DotNETRuntimeRundown"),
                     EV_NATIVE_RUNDOWN);
    assert_int_equal(ev_native_provider_of("Microsoft-Windows-DotNETRuntimePrivate"),
                     EV_NATIVE_PRIVATE);
    assert_int_equal(ev_native_provider_of("Microsoft-Windows-DotNETRuntimeStress"),
                     EV_NATIVE_NONE);
    assert_int_equal(ev_native_provider_of("Microsoft-Windows-DotNET"), EV_NATIVE_NONE);
    assert_int_equal(ev_native_provider_of(NULL), EV_NATIVE_NONE);
    assert_int_equal(ev_native_provider_of("Microsoft-DotNETCore-SampleProfiler"),
                     EV_NATIVE_SAMPLER);
    assert_string_equal(ev_native_lookup("Microsoft-DotNETCore-SampleProfiler", 0, 0)->name,
                        "ThreadSample");

    const struct ev_native_event *e = ev_native_lookup("Microsoft-Windows-DotNETRuntime", 10, 4);
    assert_non_null(e);
    assert_string_equal(e->name, "GCAllocationTick");
    assert_int_equal(e->nfields, 9);
    assert_int_equal(ev_native_index(e, "TypeName"), 5);
    assert_int_equal(ev_native_index(e, "Nope"), -1);
    /* Versions of one id differ; unknown ones have no layout. */
    assert_int_equal(ev_native_lookup("Microsoft-Windows-DotNETRuntime", 10, 2)->nfields, 7);
    assert_null(ev_native_lookup("Microsoft-Windows-DotNETRuntime", 10, 5));
    assert_null(ev_native_lookup("Microsoft-Windows-DotNETRuntime", 9999, 0));
    assert_null(ev_native_lookup("Microsoft-Windows-DotNETRuntime", 0x10000 + 10, 4));
    assert_null(ev_native_lookup("Other", 10, 4));
    e = ev_native_lookup("Microsoft-Windows-DotNETRuntimeRundown", 144, 1);
    assert_string_equal(e->name, "MethodDCEndVerbose");
    assert_int_equal(e->nfields, 10);
    assert_int_equal(ev_native_lookup("Microsoft-Windows-DotNETRuntimeRundown", 144, 2)->nfields,
                     11);
    /* The ones the GC-pause trigger, the profiler and the gcdump read. */
    static const struct {
        const char *provider;
        uint32_t id;
        uint32_t version;
        const char *name;
    } used[] = {
        {"Microsoft-Windows-DotNETRuntime", 9, 1, "GCSuspendEEBegin"},
        {"Microsoft-Windows-DotNETRuntime", 3, 1, "GCRestartEEEnd"},
        {"Microsoft-Windows-DotNETRuntime", 143, 2, "MethodLoadVerbose"},
        {"Microsoft-Windows-DotNETRuntime", 152, 2, "ModuleLoad"},
        {"Microsoft-Windows-DotNETRuntimeRundown", 154, 2, "ModuleDCEnd"},
        {"Microsoft-Windows-DotNETRuntime", 15, 0, "BulkType"},
        {"Microsoft-Windows-DotNETRuntime", 18, 0, "GCBulkNode"},
        {"Microsoft-Windows-DotNETRuntime", 19, 0, "GCBulkEdge"},
        {"Microsoft-Windows-DotNETRuntime", 16, 0, "GCBulkRootEdge"},
        {"Microsoft-Windows-DotNETRuntime", 38, 0, "GCBulkRootStaticVar"},
        {"Microsoft-Windows-DotNETRuntimePrivate", 310, 0, "AllocRequest"},
    };
    for (size_t k = 0; k < sizeof(used) / sizeof(used[0]); k++) {
        e = ev_native_lookup(used[k].provider, used[k].id, used[k].version);
        assert_non_null(e);
        assert_string_equal(e->name, used[k].name);
    }
}

/* ---- decoding -------------------------------------------------------------------------------- */

static const struct ev_native_event *rt(uint32_t id, uint32_t version)
{
    const struct ev_native_event *e =
        ev_native_lookup("Microsoft-Windows-DotNETRuntime", id, version);
    assert_non_null(e);
    return e;
}

static void allocation_tick(struct wb *b, unsigned ptr, size_t version)
{
    b->n = 0;
    wb_le(b, 100000, 4);
    wb_le(b, 1, 4);
    if (version >= 1) {
        wb_le(b, 7, 2);
    }
    if (version < 2) {
        return;
    }
    wb_le(b, 0x123456789ull, 8);
    wb_le(b, 0x7f0011223344ull, ptr);
    wb_wstr(b, "System.String");
    wb_le(b, 3, 4);
    if (version >= 3) {
        wb_le(b, 0x7f0055667788ull, ptr);
    }
    if (version >= 4) {
        wb_le(b, 104, 8);
    }
}

static void test_native_decode_versions(void **state)
{
    (void)state;
    struct wb b = {NULL, 0, 0};
    struct ev_native_record rec;
    for (size_t v = 0; v <= 4; v++) {
        const struct ev_native_event *e = rt(10, (uint32_t)v);
        allocation_tick(&b, 8, v);
        assert_int_equal(ev_native_decode(&rec, e, b.b, b.n, 8), 0);
        assert_int_equal(rec.size, b.n);
        assert_int_equal(rec.v[0].u, 100000);
        assert_int_equal(rec.v[1].u, 1);
        if (v >= 2) {
            assert_int_equal(rec.v[3].u, 0x123456789ull);
            assert_int_equal(rec.v[4].u, 0x7f0011223344ull);
            assert_int_equal(rec.v[5].count, 13);
            assert_int_equal(rec.v[5].len, 26);
            assert_int_equal(rec.v[6].u, 3);
        }
        /* Every shorter payload fails, at every cut. */
        for (size_t cut = 0; cut < b.n; cut++) {
            if (e->nfields > 0) {
                assert_int_equal(ev_native_decode(&rec, e, b.b, cut, 8), AGENT_E_PROTO);
            }
        }
    }
    /* 4-byte pointers (a 32-bit process): the same layout, narrower. */
    allocation_tick(&b, 4, 4);
    assert_int_equal(ev_native_decode(&rec, rt(10, 4), b.b, b.n, 4), 0);
    assert_int_equal(rec.size, b.n);
    assert_int_equal(rec.v[4].len, 4);
    assert_int_equal(rec.v[4].u, 0x11223344u);
    assert_int_equal(rec.v[8].u, 104);
    /* Longer than the layout (a later runtime's extra fields): fine, the rest is not read. */
    allocation_tick(&b, 8, 4);
    size_t n = b.n;
    wb_le(&b, 0xFFFF, 4);
    assert_int_equal(ev_native_decode(&rec, rt(10, 4), b.b, b.n, 8), 0);
    assert_int_equal(rec.size, n);
    /* A string without its NUL. */
    b.n = 0;
    WB_PUT(&b, {1, 4}, {2, 4}, {0, 2}, {9, 8}, {0x1000, 8}, {'a', 2}, {'b', 2});
    assert_int_equal(ev_native_decode(&rec, rt(10, 2), b.b, b.n, 8), AGENT_E_PROTO);
    /* Empty layouts take any payload, none included. */
    assert_int_equal(ev_native_decode(&rec, rt(3, 0), NULL, 0, 8), 0);
    assert_int_equal(rec.size, 0);
    /* Signed fields: KnownPathProbed's Result (I32) sign-extended. */
    b.n = 0;
    wb_le(&b, 0, 2);
    wb_wstr(&b, "/app/x.dll");
    wb_le(&b, 4, 2);
    wb_le(&b, (uint32_t)-2, 4);
    assert_int_equal(ev_native_decode(&rec, rt(296, 0), b.b, b.n, 8), 0);
    assert_int_equal((int64_t)rec.v[3].u, -2);
    assert_int_equal(rec.v[2].u, 4);
    free(b.b);
}

/* Counts what the walk reports. */
struct tally {
    int fields, arrays, elems, ends, max_depth;
    uint64_t sum; /* of the scalar fields' values */
    int stop_at;  /* stop with -1 at this field report (0: never) */
};

static int on_step(void *ud, enum ev_native_step s, uint16_t idx, unsigned depth,
                   const struct ev_native_value *v)
{
    struct tally *t = ud;
    (void)idx;
    if ((int)depth > t->max_depth) {
        t->max_depth = (int)depth;
    }
    switch (s) {
    case EV_NATIVE_FIELD:
        t->fields++;
        t->sum += v->u;
        return t->fields == t->stop_at ? -1 : 0;
    case EV_NATIVE_ARRAY_BEGIN:
        t->arrays++;
        return 0;
    case EV_NATIVE_ELEM_BEGIN:
        t->elems++;
        return 0;
    case EV_NATIVE_ELEM_END:
        return 0;
    default:
        t->ends++;
        return 0;
    }
}

static void test_native_arrays(void **state)
{
    (void)state;
    struct wb b = {NULL, 0, 0};
    struct ev_native_record rec;
    /* GCBulkNode: Index, Count, ClrInstanceID, Count x {Address, Size, TypeID, EdgeCount}. */
    WB_PUT(&b, {5, 4}, {2, 4}, {0, 2});
    for (uint64_t k = 1; k <= 2; k++) {
        WB_PUT(&b, {0x1000 * k, 8}, {24, 8}, {0x77, 8}, {k, 8});
    }
    const struct ev_native_event *node = rt(18, 0);
    assert_int_equal(ev_native_decode(&rec, node, b.b, b.n, 8), 0);
    assert_int_equal(rec.v[3].count, 2);
    assert_int_equal(rec.v[3].len, 64);
    assert_ptr_equal(rec.v[3].p, b.b + 10);
    assert_null(rec.v[4].p); /* fields of elements are walked, not kept */
    struct tally t = {0};
    assert_int_equal(ev_native_walk(node, b.b, b.n, 8, on_step, &t), 0);
    assert_int_equal(t.fields, 3 + 2 * 4);
    assert_int_equal(t.arrays, 1);
    assert_int_equal(t.elems, 2);
    assert_int_equal(t.ends, 1);
    assert_int_equal(t.sum, 5 + 2 + 0x1000 + 24 + 0x77 + 1 + 0x2000 + 24 + 0x77 + 2);
    /* A callback's error stops the walk and comes back. */
    t = (struct tally){.stop_at = 5};
    assert_int_equal(ev_native_walk(node, b.b, b.n, 8, on_step, &t), -1);
    assert_int_equal(t.fields, 5);
    /* One element missing, or a count past the payload. */
    assert_int_equal(ev_native_decode(&rec, node, b.b, b.n - 32, 8), AGENT_E_PROTO);
    b.b[4] = 0xFF;
    assert_int_equal(ev_native_decode(&rec, node, b.b, b.n, 8), AGENT_E_PROTO);
    b.b[4] = 0;
    assert_int_equal(ev_native_decode(&rec, node, b.b, b.n, 8), 0); /* no elements */
    assert_int_equal(rec.v[3].count, 0);
    assert_int_equal(rec.size, 10);

    /* BulkType: arrays in an array (TypeParameters inside Values), a string in each element. */
    b.n = 0;
    wb_le(&b, 2, 4);
    wb_le(&b, 0, 2);
    for (uint32_t k = 0; k < 2; k++) {
        WB_PUT(&b, {0xA0 + k, 8}, {0xB0, 8}, {0, 4}, {8, 4}, {0x1D, 1});
        wb_wstr(&b, k == 0 ? "List`1" : "Int32");
        wb_le(&b, k == 0 ? 2 : 0, 4);
        for (uint32_t p = 0; p < (k == 0 ? 2u : 0u); p++) {
            wb_le(&b, 0xC0 + p, 8);
        }
    }
    const struct ev_native_event *bulk = rt(15, 0);
    t = (struct tally){0};
    assert_int_equal(ev_native_walk(bulk, b.b, b.n, 8, on_step, &t), 0);
    assert_int_equal(t.arrays, 3); /* Values, and TypeParameters in each element */
    assert_int_equal(t.elems, 2 + 2);
    assert_int_equal(t.max_depth, 2);
    assert_int_equal(ev_native_decode(&rec, bulk, b.b, b.n, 8), 0);
    assert_int_equal(rec.size, b.n);
    assert_int_equal(ev_native_decode(&rec, bulk, b.b, b.n - 1, 8), AGENT_E_PROTO);

    /* MethodILToNativeMap: two arrays of scalars counted by one field; V1 appends ILVersionID. */
    b.n = 0;
    WB_PUT(&b, {0x5000, 8}, {0, 8}, {0, 1}, {3, 2});
    for (uint32_t k = 0; k < 6; k++) {
        wb_le(&b, k * 4, 4);
    }
    wb_le(&b, 0, 2);
    assert_int_equal(ev_native_decode(&rec, rt(190, 0), b.b, b.n, 8), 0);
    assert_int_equal(rec.v[4].count, 3);
    assert_int_equal(rec.v[6].count, 3);
    assert_ptr_equal(rec.v[6].p, b.b + 19 + 12);
    assert_int_equal(ev_native_decode(&rec, rt(190, 1), b.b, b.n, 8), AGENT_E_PROTO);
    wb_le(&b, 1, 8);
    assert_int_equal(ev_native_decode(&rec, rt(190, 1), b.b, b.n, 8), 0);
    assert_int_equal(rec.v[9].u, 1);
    free(b.b);
}

static void test_native_binary_and_padding(void **state)
{
    (void)state;
    struct wb b = {NULL, 0, 0};
    struct ev_native_record rec;
    /* GCDynamicEvent: Name, DataSize, DataSize bytes, ClrInstanceID. */
    wb_wstr(&b, "SizeAdaptationTuning");
    WB_PUT(&b, {3, 4}, {0xAABBCC, 3}, {0, 2});
    assert_int_equal(ev_native_decode(&rec, rt(39, 0), b.b, b.n, 8), 0);
    assert_int_equal(rec.v[2].len, 3);
    assert_int_equal(rec.v[2].p[0], 0xCC);
    assert_int_equal(rec.size, b.n);
    b.b[42] = 200; /* DataSize past the payload */
    assert_int_equal(ev_native_decode(&rec, rt(39, 0), b.b, b.n, 8), AGENT_E_PROTO);

    /* GCFitBucketInfo copies C structs {u16 Index; u16 pad; u32 Count; size_t Size}. */
    for (unsigned ptr = 4; ptr <= 8; ptr += 4) {
        b.n = 0;
        WB_PUT(&b, {0, 2}, {1, 2}, {256, 8}, {2, 2});
        for (uint32_t k = 0; k < 2; k++) {
            wb_le(&b, k + 1, 2);
            wb_le(&b, 0xEEEE, 2); /* padding */
            wb_le(&b, 7 + k, 4);
            wb_le(&b, 0x100 << k, ptr);
        }
        struct tally t = {0};
        assert_int_equal(ev_native_walk(rt(209, 0), b.b, b.n, ptr, on_step, &t), 0);
        assert_int_equal(t.fields, 4 + 2 * 3); /* the padding is not reported */
        assert_int_equal(t.sum, 0 + 1 + 256 + 2 + (1 + 7 + 0x100) + (2 + 8 + 0x200));
        assert_int_equal(ev_native_decode(&rec, rt(209, 0), b.b, b.n, ptr), 0);
        assert_int_equal(rec.size, b.n);
    }
    /* GCLOHCompact {u32, u32, u32, pad to the pointer size, size_t, size_t}: 32 and 20 bytes. */
    for (unsigned ptr = 4; ptr <= 8; ptr += 4) {
        b.n = 0;
        WB_PUT(&b, {0, 2}, {1, 2}, {10, 4}, {20, 4}, {30, 4});
        if (ptr == 8) {
            wb_le(&b, 0xEEEEEEEE, 4);
        }
        wb_le(&b, 40, ptr);
        wb_le(&b, 50, ptr);
        struct tally t = {0};
        assert_int_equal(ev_native_walk(rt(208, 0), b.b, b.n, ptr, on_step, &t), 0);
        assert_int_equal(t.sum, 1 + 10 + 20 + 30 + 40 + 50);
        assert_int_equal(ev_native_decode(&rec, rt(208, 0), b.b, b.n - 1, ptr), AGENT_E_PROTO);
    }
    free(b.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_native_table),
        cmocka_unit_test(test_native_lookup),
        cmocka_unit_test(test_native_decode_versions),
        cmocka_unit_test(test_native_arrays),
        cmocka_unit_test(test_native_binary_and_padding),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
