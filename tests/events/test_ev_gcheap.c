/* SPDX-License-Identifier: MIT */
/*
 * events/ev_gcheap: a heap snapshot's stream to a `.gcdump` (docs/gcdump.md). The file's primitives
 * (compressed ints at their length boundaries, strings by UTF-16 units); a synthetic V4 stream
 * (ntw.h) with types, roots, nodes and edges, read back from the written file (graph counts, type
 * name clean-up, size classes, the root tree, type sizes and explicit sizes); the ways a heap walk
 * is refused (edges running out, a half-used edge event, an index gap, the node limit, no GC); a
 * stream fed byte by byte against whole; and a real capture of the test app (`heap-graph 50 3
 * 2000`, tests/fixtures/events/README.md): written with CreationTool "dotnet-gcdump" it must be
 * dotnet-gcdump's own conversion of the same stream byte for byte, and its histogram must equal
 * `dotnet-gcdump report` of that file row for row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_gcheap.h"
#include "fixture.h"
#include "gcheap_hostile.h"
#include "membudget.h"
#include "ntw.h"
#include "wbuf.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

/* ---- primitives ------------------------------------------------------------------------------ */

static void cint_case(int32_t v, size_t len, const uint8_t *bytes)
{
    uint8_t b[5];
    size_t n = ev_gcheap_cint_put(b, v);
    assert_int_equal(n, len);
    if (bytes != NULL) {
        assert_memory_equal(b, bytes, len);
    }
    size_t i = 0;
    int32_t back = 0;
    assert_int_equal(ev_gcheap_cint_get(b, n, &i, &back), 0);
    assert_int_equal(i, n);
    assert_int_equal(back, v);
    i = 0;
    assert_int_equal(ev_gcheap_cint_get(b, n - 1, &i, &back), AGENT_E_TRUNC);
}

static void test_cint(void **state)
{
    (void)state;
    cint_case(0, 1, (const uint8_t[]){0x00});
    cint_case(1, 1, (const uint8_t[]){0x01});
    cint_case(63, 1, (const uint8_t[]){0x3F});
    cint_case(-1, 1, (const uint8_t[]){0x7F});
    cint_case(-64, 1, (const uint8_t[]){0x40});
    cint_case(64, 2, (const uint8_t[]){0x80, 0x40});
    cint_case(-65, 2, (const uint8_t[]){0xFF, 0x3F});
    cint_case(8191, 2, (const uint8_t[]){0xBF, 0x7F});
    cint_case(-8192, 2, (const uint8_t[]){0xC0, 0x00});
    cint_case(8192, 3, (const uint8_t[]){0x80, 0xC0, 0x00});
    cint_case(-8193, 3, NULL);
    cint_case(1048575, 3, NULL);
    cint_case(-1048576, 3, NULL);
    cint_case(1048576, 4, NULL);
    cint_case(134217727, 4, NULL);
    cint_case(-134217728, 4, NULL);
    cint_case(134217728, 5, (const uint8_t[]){0x80, 0xC0, 0x80, 0x80, 0x00});
    cint_case(INT32_MAX, 5, (const uint8_t[]){0x87, 0xFF, 0xFF, 0xFF, 0x7F});
    /* C#'s arithmetic shift: the top byte of a negative 5-byte value is 0xF8..0xFF. */
    cint_case(INT32_MIN, 5, (const uint8_t[]){0xF8, 0x80, 0x80, 0x80, 0x00});
    cint_case(-134217729, 5, NULL);
    for (int64_t v = -300000; v <= 300000; v += 7) {
        cint_case((int32_t)v, ev_gcheap_cint_put((uint8_t[5]){0}, (int32_t)v), NULL);
    }
}

static void test_string(void **state)
{
    (void)state;
    const uint16_t u[] = {'A', 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0xD83D, 0xDE00};
    uint8_t out[64];
    size_t n = ev_gcheap_string_put(out, u, 8);
    assert_int_equal(n, ev_gcheap_string_put(NULL, u, 8));
    const uint8_t want[] = {8,    0,    0,    0,    'A',  0x7F, 0xC2, 0x80, 0xDF, 0xBF, 0xE0,
                            0xA0, 0x80, 0xEF, 0xBF, 0xBF, 0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80};
    assert_int_equal(n, sizeof(want));
    assert_memory_equal(out, want, sizeof(want));
    assert_int_equal(ev_gcheap_string_put(out, u, 0), 4);
    assert_memory_equal(out, ((const uint8_t[]){0, 0, 0, 0}), 4);
}

/* ---- a reader of the written file ------------------------------------------------------------ */

struct gtype {
    char *name; /* UTF-8; NULL for a null string */
    int32_t size;
    char *module;
};

struct gfile {
    uint8_t *b;
    size_t n, i;
    int64_t total;
    int32_t root;
    int32_t ntypes;
    struct gtype *types;
    int32_t nnodes;
    int32_t *offs;
    const uint8_t *blob;
    int32_t blob_len;
    int64_t *addrs;
    char tool[64];
};

static int32_t rd_i32(struct gfile *f)
{
    assert_true(f->i + 4 <= f->n);
    uint32_t v = (uint32_t)f->b[f->i] | (uint32_t)f->b[f->i + 1] << 8 |
                 (uint32_t)f->b[f->i + 2] << 16 | (uint32_t)f->b[f->i + 3] << 24;
    f->i += 4;
    return (int32_t)v;
}

static int64_t rd_i64(struct gfile *f)
{
    uint32_t lo = (uint32_t)rd_i32(f);
    uint32_t hi = (uint32_t)rd_i32(f);
    return (int64_t)((uint64_t)hi << 32 | lo);
}

static uint8_t rd_u8(struct gfile *f)
{
    assert_true(f->i < f->n);
    return f->b[f->i++];
}

/* A string as UTF-8 (units decoded one by one; BMP only, enough for these tests). */
static char *rd_str(struct gfile *f)
{
    int32_t n = rd_i32(f);
    if (n < 0) {
        assert_int_equal(n, -1);
        return NULL;
    }
    char *s = malloc((size_t)n * 3 + 1);
    assert_non_null(s);
    size_t w = 0;
    for (int32_t k = 0; k < n; k++) {
        uint8_t c = rd_u8(f);
        size_t more = c < 0x80 ? 0 : c < 0xE0 ? 1 : 2;
        s[w++] = (char)c;
        for (size_t j = 0; j < more; j++) {
            s[w++] = (char)rd_u8(f);
        }
    }
    s[w] = '\0';
    return s;
}

static void rd_type_header(struct gfile *f, int32_t version, int32_t min_reader, const char *name)
{
    assert_int_equal(rd_u8(f), 4);
    assert_int_equal(rd_u8(f), 4);
    assert_int_equal(rd_u8(f), 1);
    assert_int_equal(rd_i32(f), version);
    assert_int_equal(rd_i32(f), min_reader);
    char *s = rd_str(f);
    assert_string_equal(s, name);
    free(s);
    assert_int_equal(rd_u8(f), 6);
}

static void gfile_parse(struct gfile *f, uint8_t *b, size_t n)
{
    memset(f, 0, sizeof(*f));
    f->b = b;
    f->n = n;
    char *magic = rd_str(f);
    assert_string_equal(magic, "!FastSerialization.1");
    free(magic);
    rd_type_header(f, 10, 8, "GCHeapDump");
    rd_type_header(f, 1, 0, "Graphs.MemoryGraph");
    f->total = rd_i64(f);
    f->root = rd_i32(f);
    f->ntypes = rd_i32(f);
    assert_true(f->ntypes > 0 && f->ntypes < 1000000);
    f->types = calloc((size_t)f->ntypes, sizeof(*f->types));
    for (int32_t k = 0; k < f->ntypes; k++) {
        f->types[k].name = rd_str(f);
        f->types[k].size = rd_i32(f);
        f->types[k].module = rd_str(f);
    }
    f->nnodes = rd_i32(f);
    assert_true(f->nnodes > 0 && f->nnodes < 100000000);
    f->offs = calloc((size_t)f->nnodes, sizeof(*f->offs));
    for (int32_t k = 0; k < f->nnodes; k++) {
        f->offs[k] = rd_i32(f);
    }
    f->blob_len = rd_i32(f);
    assert_true(f->blob_len >= 2 && f->i + (size_t)f->blob_len <= n);
    f->blob = b + f->i;
    f->i += (size_t)f->blob_len;
    assert_int_equal(rd_i32(f), f->nnodes);
    f->addrs = calloc((size_t)f->nnodes, sizeof(*f->addrs));
    for (int32_t k = 0; k < f->nnodes; k++) {
        f->addrs[k] = rd_i64(f);
    }
    assert_int_equal(rd_u8(f), 8);
    assert_int_equal(rd_u8(f), 1); /* Is64Bit */
    assert_int_equal(rd_u8(f), 6);
    assert_int_equal(rd_u8(f), 1);
    assert_int_equal(rd_i32(f), 0x3F800000);
    assert_int_equal(rd_i32(f), 0x3F800000);
    assert_int_equal(rd_u8(f), 1);
    assert_int_equal(rd_u8(f), 1);
    assert_int_equal(rd_i32(f), -1);
    assert_int_equal(rd_i64(f), 0);
    assert_int_equal(rd_i32(f), -1);
    assert_int_equal(rd_i32(f), -1);
    assert_int_equal(rd_i32(f), 0);
    assert_int_equal(rd_i64(f), 0);
    assert_int_equal(rd_i64(f), 0);
    assert_int_equal(rd_i32(f), 0);
    assert_int_equal(rd_u8(f), 12);
    assert_int_equal(rd_i32(f), 0);
    assert_int_equal(rd_u8(f), 1);
    int32_t fwd = (int32_t)f->i;
    assert_int_equal(rd_u8(f), 13);
    char *tool = rd_str(f);
    assert_non_null(tool);
    snprintf(f->tool, sizeof(f->tool), "%s", tool);
    free(tool);
    assert_int_equal(rd_u8(f), 6);
    assert_int_equal(rd_u8(f), 6);
    int32_t fpos = (int32_t)f->i;
    assert_int_equal(rd_i32(f), 1);
    assert_int_equal(rd_i32(f), fwd);
    int32_t tpos = (int32_t)f->i;
    assert_int_equal(rd_i32(f), fpos);
    assert_int_equal(rd_i32(f), tpos);
    assert_int_equal(f->i, n);
}

static void gfile_free(struct gfile *f)
{
    for (int32_t k = 0; k < f->ntypes; k++) {
        free(f->types[k].name);
        free(f->types[k].module);
    }
    free(f->types);
    free(f->offs);
    free(f->addrs);
    free(f->b);
}

/* One node as the file holds it. */
struct gnode {
    int32_t type, size, nchildren;
    int32_t children[16];
};

static void gnode_get(const struct gfile *f, int32_t k, struct gnode *out)
{
    assert_true(k >= 0 && k < f->nnodes);
    size_t i = (size_t)f->offs[k];
    int32_t ts;
    assert_int_equal(ev_gcheap_cint_get(f->blob, (size_t)f->blob_len, &i, &ts), 0);
    out->type = ts >> 1;
    assert_true(out->type >= 0 && out->type < f->ntypes);
    out->size = f->types[out->type].size;
    if (ts & 1) {
        assert_int_equal(ev_gcheap_cint_get(f->blob, (size_t)f->blob_len, &i, &out->size), 0);
    }
    assert_int_equal(ev_gcheap_cint_get(f->blob, (size_t)f->blob_len, &i, &out->nchildren), 0);
    for (int32_t c = 0; c < out->nchildren; c++) {
        int32_t d;
        assert_int_equal(ev_gcheap_cint_get(f->blob, (size_t)f->blob_len, &i, &d), 0);
        if (c < 16) {
            out->children[c] = k + d;
            assert_true(k + d >= 0 && k + d < f->nnodes);
        }
    }
}

static int32_t type_named(const struct gfile *f, const char *name)
{
    for (int32_t k = 0; k < f->ntypes; k++) {
        if (f->types[k].name != NULL && strcmp(f->types[k].name, name) == 0) {
            return k;
        }
    }
    fail_msg("no type named %s", name);
    return -1;
}

static int32_t node_at(const struct gfile *f, int64_t addr)
{
    for (int32_t k = 0; k < f->nnodes; k++) {
        if (f->addrs[k] == addr && f->offs[k] != 0) {
            return k;
        }
    }
    return -1;
}

/* ---- writing -----------------------------------------------------------------------------------
 */

static int sink(void *ud, const uint8_t *p, size_t n)
{
    struct wb *w = ud;
    assert_true(n > 0 && n <= 65536);
    wb_raw(w, p, n);
    return 0;
}

/* Reads stream[0..n) in chunks of step (0 = whole); 0 and the file, or the error. */
static int convert(const uint8_t *p, size_t n, size_t step, uint64_t max_nodes, struct wb *file,
                   char *msg, size_t msgcap)
{
    struct ev_gcheap *g = NULL;
    struct ev_gcheap_limits lim = {.max_nodes = max_nodes};
    assert_int_equal(ev_gcheap_new(&g, &lim), 0);
    int rc = 0;
    for (size_t at = 0; at < n && rc == 0;) {
        size_t k = step == 0 || n - at < step ? n - at : step;
        rc = ev_gcheap_feed(g, p + at, k);
        at += k;
    }
    if (rc == 0) {
        rc = ev_gcheap_finish(g);
        assert_int_equal(ev_gcheap_finish(g), rc);
    }
    if (rc != 0 && msg != NULL) {
        assert_non_null(ev_gcheap_error(g));
        snprintf(msg, msgcap, "%s", ev_gcheap_error(g));
    }
    if (rc == 0 && file != NULL) {
        assert_true(ev_gcheap_complete(g));
        assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, file), 0);
    } else {
        assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, file), AGENT_E_INVAL);
    }
    ev_gcheap_free(g);
    return rc;
}

/* ---- a synthetic heap walk ------------------------------------------------------------------- */

enum {
    MD_START = 1,
    MD_END,
    MD_TYPE,
    MD_ROOT,
    MD_NODE,
    MD_EDGE,
    MD_MODULE,
    MD_CWT,
    MD_CCW,
    MD_RCW,
    MD_STATIC
};

static void md(struct nt *t, uint32_t id, uint32_t event_id, uint32_t version)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, RUNTIME);
    wb_u32(&w, event_id);
    wb_wstr(&w, "");
    wb_u64(&w, 0x1980001);
    wb_u32(&w, version);
    wb_u32(&w, 5);
    wb_u32(&w, 0);
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static void emit(struct nt *t, uint32_t md_id, struct wb *p)
{
    nt_blob(t, md_id, SYNC_QPC, 0, 0, p);
    free(p->b);
    memset(p, 0, sizeof(*p));
}

static void ev_gc(struct nt *t, uint32_t md_id, uint32_t count, uint32_t depth, uint32_t reason,
                  uint32_t type)
{
    struct wb p = {0};
    wb_u32(&p, count);
    wb_u32(&p, depth);
    if (md_id == MD_START) {
        wb_u32(&p, reason);
        wb_u32(&p, type);
        wb_u16(&p, 0);
        wb_u64(&p, 0);
    } else {
        wb_u16(&p, 0);
    }
    emit(t, md_id, &p);
}

struct stype {
    uint64_t id, module;
    uint32_t name_id, flags;
    const char *name;
};

static void ev_types(struct nt *t, const struct stype *ty, size_t n)
{
    struct wb p = {0};
    wb_u32(&p, (uint32_t)n);
    wb_u16(&p, 0);
    for (size_t i = 0; i < n; i++) {
        wb_u64(&p, ty[i].id);
        wb_u64(&p, ty[i].module);
        wb_u32(&p, ty[i].name_id);
        wb_u32(&p, ty[i].flags);
        wb_u8(&p, 0x12);
        wb_wstr(&p, ty[i].name);
        wb_u32(&p, 1); /* one type parameter */
        wb_u64(&p, 0x4242);
    }
    emit(t, MD_TYPE, &p);
}

static void ev_module_load(struct nt *t, uint64_t id, const char *path)
{
    struct wb p = {0};
    wb_u64(&p, id);
    wb_u64(&p, 0x5000);
    wb_u32(&p, 0);
    wb_u32(&p, 0);
    wb_wstr(&p, path);
    wb_wstr(&p, "");
    wb_u16(&p, 0);
    emit(t, MD_MODULE, &p);
}

struct sroot {
    uint64_t addr;
    uint8_t kind;
    uint32_t flags;
};

static void ev_roots(struct nt *t, uint32_t index, const struct sroot *r, size_t n)
{
    struct wb p = {0};
    wb_u32(&p, index);
    wb_u32(&p, (uint32_t)n);
    wb_u16(&p, 0);
    for (size_t i = 0; i < n; i++) {
        wb_u64(&p, r[i].addr);
        wb_u8(&p, r[i].kind);
        wb_u32(&p, r[i].flags);
        wb_u64(&p, 0x77);
    }
    emit(t, MD_ROOT, &p);
}

struct snode {
    uint64_t addr, size, type, edges;
};

static void ev_nodes(struct nt *t, uint32_t index, const struct snode *s, size_t n)
{
    struct wb p = {0};
    wb_u32(&p, index);
    wb_u32(&p, (uint32_t)n);
    wb_u16(&p, 0);
    for (size_t i = 0; i < n; i++) {
        wb_u64(&p, s[i].addr);
        wb_u64(&p, s[i].size);
        wb_u64(&p, s[i].type);
        wb_u64(&p, s[i].edges);
    }
    emit(t, MD_NODE, &p);
}

static void ev_edges(struct nt *t, uint32_t index, const uint64_t *to, size_t n)
{
    struct wb p = {0};
    wb_u32(&p, index);
    wb_u32(&p, (uint32_t)n);
    wb_u16(&p, 0);
    for (size_t i = 0; i < n; i++) {
        wb_u64(&p, to[i]);
        wb_u32(&p, 0);
    }
    emit(t, MD_EDGE, &p);
}

#define RCW_UNK  0xAB00ull
#define CCW_UNK  0xCC00ull
#define CWT_DEAD 0xD000ull

/* GCBulkRCW for B, GCBulkRootCCW for A, two statics (one thread-local of an unknown type), and
 * conditional weak table entries (one with a dead key: skipped). */
static void ev_interop(struct nt *t)
{
    struct wb p = {0};
    WB_PUT(&p, {1, 4}, {0, 2}, {0x2000, 8}, {0x200, 8}, {RCW_UNK, 8}, {0x5555, 8}, {1, 4}, {0, 4});
    emit(t, MD_RCW, &p);
    WB_PUT(&p, {2, 4}, {0, 2}, {0x77, 8}, {0x1000, 8}, {0x100, 8}, {CCW_UNK, 8}, {1, 4}, {0, 4},
           {0, 4}, {0x78, 8}, {0x1000, 8}, {0x100, 8}, {0, 8}, {1, 4}, {0, 4}, {0, 4});
    emit(t, MD_CCW, &p);
    WB_PUT(&p, {2, 4}, {0x1, 8}, {0, 2}, {0x79, 8}, {0x3000, 8}, {0x100, 8}, {0, 4});
    wb_wstr(&p, "s_field");
    WB_PUT(&p, {0x7A, 8}, {0x2000, 8}, {0x777, 8}, {1, 4});
    wb_wstr(&p, "t_x");
    emit(t, MD_STATIC, &p);
    WB_PUT(&p, {0, 4}, {2, 4}, {0, 2}, {0x1000, 8}, {CWT_DEAD, 8}, {0x7B, 8}, {0, 8}, {0x3000, 8},
           {0x7C, 8});
    emit(t, MD_CWT, &p);
}

enum variant {
    V_GOOD = 0,
    V_EDGES_SHORT, /* C's edge never comes */
    V_EDGE_HALF,   /* the last edge event has one edge too many */
    V_NODE_GAP,    /* node events 0, 2 */
    V_NO_GC,       /* the GC is not induced */
    V_NO_END,      /* no GCEnd */
    V_EDGES_FIRST, /* every edge before any node */
    V_INTEROP,     /* also an RCW, a CCW, statics and a conditional weak table entry */
    V_LONG_NAMES   /* type 0x100 and module 0xAA named with 30,000 characters */
};

static char *long_name(char c)
{
    static char names[2][GH_NAME_CHARS + 1];
    char *s = names[c == 'N' ? 0 : 1];
    memset(s, c, GH_NAME_CHARS);
    s[GH_NAME_CHARS] = '\0';
    return s;
}

#define A 0x1000ull
#define B 0x2000ull
#define C 0x3000ull
#define U 0x9990ull /* referenced, never defined */

static uint8_t *synthetic(enum variant v, size_t *n)
{
    struct nt t;
    nt_begin(&t);
    md(&t, MD_START, 1, 2);
    md(&t, MD_END, 2, 1);
    md(&t, MD_TYPE, 15, 0);
    md(&t, MD_ROOT, 16, 0);
    md(&t, MD_NODE, 18, 0);
    md(&t, MD_EDGE, 19, 0);
    md(&t, MD_MODULE, 152, 2);
    md(&t, MD_CWT, 17, 0);
    md(&t, MD_CCW, 36, 0);
    md(&t, MD_RCW, 37, 0);
    md(&t, MD_STATIC, 38, 0);
    nt_block(&t, "MetadataBlock", false);

    /* Types before the GC (kept), one of them again inside it. */
    struct stype types[] = {
        {0x100, 0xAA, 1, 0,
         "System.Collections.Generic.Dictionary`2[[System.String],[Foo`1[[X]]]]"},
        {0x200, 0xAA, 2, 0x8, "System.Byte[]"},
        {0x300, 0xBB, 0x42, 0x8, ""},
        {0x400, 0xBB, 0x43, 0x4, "Com`1"},
        {0x500, 0xBB, 0x44, 0, ""},
    };
    if (v == V_LONG_NAMES) {
        types[0].name = long_name('N');
    }
    ev_types(&t, types, 5);
    ev_gc(&t, MD_START, 6, 1, 1, 0); /* gen 1: not it */
    ev_gc(&t, MD_END, 6, 1, 0, 0);
    ev_gc(&t, MD_START, 7, 2, v == V_NO_GC ? 0 : 1, 0);
    nt_block(&t, "EventBlock", false);

    const struct sroot roots[] = {
        {A, 0, 0},   /* stack */
        {C, 2, 0x1}, /* pinning handle */
        {B, 2, 0x2}, /* weak: not a root */
        {B, 1, 0},   /* finalizer */
        {A, 2, 0},   /* strong handle */
        {U, 4, 0},   /* sized ref: other handles */
    };
    ev_roots(&t, 0, roots, 6);
    if (v == V_INTEROP) {
        ev_interop(&t);
    }
    const uint64_t edges0[] = {B, C};
    const uint64_t edges1[] = {U, A};
    const struct snode nodes0[] = {{A, 24, 0x100, 2}, {B, 5000, 0x200, 0}};
    const struct snode nodes1[] = {{C, 20000, 0x200, v == V_EDGE_HALF ? 1 : 2}};
    const struct snode nodes2[] = {{0x4000, 32, 0x999, 0}, {0x5000, 24, 0x100, 0}};
    if (v == V_EDGES_FIRST) {
        ev_edges(&t, 0, edges0, 2);
        ev_edges(&t, 1, edges1, 2);
    }
    ev_nodes(&t, 0, nodes0, 2);
    if (v != V_EDGES_FIRST) {
        ev_edges(&t, 0, edges0, 2);
    }
    nt_block(&t, "EventBlock", false);
    ev_nodes(&t, v == V_NODE_GAP ? 2 : 1, nodes1, 1);
    if (v != V_EDGES_FIRST) {
        ev_edges(&t, 1, edges1, v == V_EDGES_SHORT ? 1 : 2);
    }
    ev_nodes(&t, v == V_NODE_GAP ? 3 : 2, nodes2, 2);
    ev_types(&t, &types[1], 1);
    if (v != V_NO_END) {
        ev_gc(&t, MD_END, 7, 2, 0, 0);
    }
    /* After the GC: module names (the first one for an id wins), more nodes (ignored). */
    ev_module_load(&t, 0xAA, v == V_LONG_NAMES ? long_name('M') : "/app/My.dll");
    ev_module_load(&t, 0xAA, "/app/Other.dll");
    ev_nodes(&t, 3, nodes2, 2);
    nt_block(&t, "EventBlock", false);
    wb_u8(&t.out, 1); /* end of stream */
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

static void test_synthetic(void **state)
{
    (void)state;
    size_t n;
    uint8_t *s = synthetic(V_GOOD, &n);
    struct wb file = {0};
    char msg[256] = "";
    assert_int_equal(convert(s, n, 0, 0, &file, msg, sizeof(msg)), 0);
    struct gfile f;
    gfile_parse(&f, file.b, file.n);
    assert_string_equal(f.tool, "dotmon-test");
    assert_int_equal(f.root, 0);
    assert_int_equal(f.total, 24 + 5000 + 20000 + 32 + 24);
    /* Nodes: 10 pseudo nodes ([.NET Roots], [static vars], [local vars], [other roots],
     * [pinning Handles], [finalizer Handles], [strong Handles], [other Handles],
     * [COM/WinRT Objects]) = 9, plus A B C U and the two small objects. */
    assert_int_equal(f.nnodes, 9 + 6);
    /* Types: UNDEFINED, the five BulkType ones (clean-up, empty names, RCW), UNKNOWN 0x999, the two
     * size classes of System.Byte[], then the pseudo nodes' types. */
    assert_string_equal(f.types[0].name, "UNDEFINED");
    assert_int_equal(f.types[0].size, 0);
    assert_null(f.types[0].module);
    int32_t dict =
        type_named(&f, "System.Collections.Generic.Dictionary<<System.String>,<Foo<<X>>>>");
    assert_int_equal(dict, 1);
    assert_string_equal(f.types[1].module, "/app/My.dll");
    assert_int_equal(f.types[1].size, 24);
    assert_int_equal(type_named(&f, "System.Byte[]"), 2);
    assert_int_equal(f.types[2].size, -1); /* no instance under 1000 bytes */
    assert_int_equal(type_named(&f, "ArrayType(0x42)"), 3);
    assert_string_equal(f.types[3].module, "Module(0xbb)");
    assert_int_equal(type_named(&f, "[RCW Com]"), 4);
    assert_int_equal(type_named(&f, "Type(0x44)"), 5);
    int32_t k1 = type_named(&f, "System.Byte[] (Bytes > 1K)");
    int32_t k10 = type_named(&f, "System.Byte[] (Bytes > 10K)");
    int32_t unk = type_named(&f, "UNKNOWN 0x999");
    assert_true(k1 == 6 && k10 == 7 && unk == 8);
    assert_string_equal(f.types[k1].module, "/app/My.dll");
    assert_int_equal(f.types[k1].size, 5000);
    assert_int_equal(f.types[k10].size, 20000);
    assert_null(f.types[unk].module);
    const char *pseudo[] = {"[.NET Roots]",     "[static vars]",     "[local vars]",
                            "[other roots]",    "[pinning Handles]", "[finalizer Handles]",
                            "[strong Handles]", "[other Handles]",   "[COM/WinRT Objects]"};
    assert_int_equal(f.ntypes, 9 + 9);
    for (int32_t k = 0; k < 9; k++) {
        assert_string_equal(f.types[9 + k].name, pseudo[k]);
        assert_int_equal(f.types[9 + k].size, 0);
        assert_null(f.types[9 + k].module);
    }
    /* The objects. */
    struct gnode a, b, c, root, other;
    int32_t ia = node_at(&f, A), ib = node_at(&f, B), ic = node_at(&f, C);
    assert_true(ia > 0 && ib > 0 && ic > 0);
    gnode_get(&f, ia, &a);
    assert_int_equal(a.type, dict);
    assert_int_equal(a.size, 24);
    assert_int_equal(a.nchildren, 2);
    assert_int_equal(a.children[0], ib);
    assert_int_equal(a.children[1], ic);
    gnode_get(&f, ib, &b);
    assert_true(b.type == k1 && b.size == 5000 && b.nchildren == 0);
    gnode_get(&f, ic, &c);
    assert_true(c.type == k10 && c.size == 20000 && c.nchildren == 2);
    assert_int_equal(f.addrs[c.children[0]], (int64_t)U);
    assert_int_equal(f.offs[c.children[0]], 0); /* undefined: the shared record */
    assert_int_equal(c.children[1], ia);
    struct gnode small;
    gnode_get(&f, node_at(&f, 0x5000), &small);
    assert_true(small.type == dict && small.size == 24);
    gnode_get(&f, node_at(&f, 0x4000), &small);
    assert_true(small.type == unk && small.size == 32);
    /* The root tree. */
    gnode_get(&f, 0, &root);
    assert_int_equal(root.type, 9);
    assert_int_equal(root.nchildren, 4); /* static vars, local vars, other roots, COM */
    gnode_get(&f, root.children[1], &other);
    assert_int_equal(other.type, type_named(&f, "[local vars]"));
    assert_int_equal(other.nchildren, 1);
    assert_int_equal(other.children[0], ia);
    gnode_get(&f, root.children[2], &other);
    assert_int_equal(other.type, type_named(&f, "[other roots]"));
    assert_int_equal(other.nchildren, 4); /* pinning, finalizer, strong, other */
    struct gnode h;
    gnode_get(&f, other.children[0], &h);
    assert_true(h.type == type_named(&f, "[pinning Handles]") && h.nchildren == 1 &&
                h.children[0] == ic);
    gnode_get(&f, other.children[1], &h);
    assert_true(h.type == type_named(&f, "[finalizer Handles]") && h.nchildren == 1 &&
                h.children[0] == ib);
    gnode_get(&f, other.children[3], &h);
    assert_true(h.type == type_named(&f, "[other Handles]") && h.nchildren == 1 &&
                f.addrs[h.children[0]] == (int64_t)U);
    gfile_free(&f);
    free(s);
}

static void test_interop(void **state)
{
    (void)state;
    size_t n;
    uint8_t *s = synthetic(V_INTEROP, &n);
    struct wb file = {0};
    assert_int_equal(convert(s, n, 0, 0, &file, NULL, 0), 0);
    struct gfile f;
    gfile_parse(&f, file.b, file.n);
    /* B, an RCW: its IUnknown as a last child and 1000 bytes more, its size class from before. */
    struct gnode b, ccw, root, other, h;
    int32_t ib = node_at(&f, B), ia = node_at(&f, A), ic = node_at(&f, C);
    gnode_get(&f, ib, &b);
    assert_int_equal(b.type, type_named(&f, "System.Byte[] (Bytes > 1K)"));
    assert_int_equal(b.size, 6000);
    assert_int_equal(b.nchildren, 1);
    assert_int_equal(f.addrs[b.children[0]], (int64_t)RCW_UNK);
    assert_int_equal(f.total, 24 + 6000 + 20000 + 32 + 24 + 200);
    /* The CCW: a node at its IUnknown (the one with IUnknown 0 is skipped). */
    int32_t iccw = node_at(&f, CCW_UNK);
    gnode_get(&f, iccw, &ccw);
    assert_int_equal(ccw.type,
                     type_named(&f, "[CCW 0xcc00 for type System.Collections.Generic.Dictionary<<"
                                    "System.String>,<Foo<<X>>>>]"));
    assert_true(ccw.size == 200 && ccw.nchildren == 1 && ccw.children[0] == ia);
    /* The root tree: [COM/WinRT Objects] holds the CCW; statics by type and field. */
    gnode_get(&f, 0, &root);
    assert_int_equal(root.nchildren, 5); /* static vars, local vars, other roots, COM, TLS */
    gnode_get(&f, root.children[3], &h);
    assert_true(h.type == type_named(&f, "[COM/WinRT Objects]") && h.nchildren == 1 &&
                h.children[0] == iccw);
    gnode_get(&f, root.children[0], &h);
    assert_true(h.type == type_named(&f, "[static vars]") && h.nchildren == 1);
    gnode_get(&f, h.children[0], &h);
    assert_int_equal(h.type, type_named(&f, "[static var System.Collections.Generic.Dictionary<<"
                                            "System.String>,<Foo<<X>>>>.s_field]"));
    assert_true(h.nchildren == 1 && h.children[0] == ic);
    gnode_get(&f, root.children[4], &h);
    assert_true(h.type == type_named(&f, "[thread static vars]") && h.nchildren == 1);
    gnode_get(&f, h.children[0], &h);
    assert_int_equal(h.type, type_named(&f, "[static var Type(0x777).t_x]"));
    assert_true(h.nchildren == 1 && h.children[0] == ib);
    /* [other roots] gained [Dependent Handles] with the live key's value only. */
    gnode_get(&f, root.children[2], &other);
    assert_int_equal(other.nchildren, 5);
    gnode_get(&f, other.children[4], &h);
    assert_true(h.type == type_named(&f, "[Dependent Handles]") && h.nchildren == 1 &&
                f.addrs[h.children[0]] == (int64_t)CWT_DEAD);
    gfile_free(&f);
    free(s);
}

/* The same graph whether edges come before or after their nodes, and fed a byte at a time. */
static void test_chunking(void **state)
{
    (void)state;
    size_t n, n2;
    uint8_t *s = synthetic(V_GOOD, &n);
    uint8_t *s2 = synthetic(V_EDGES_FIRST, &n2);
    struct wb whole = {0}, bytes = {0}, odd = {0}, first = {0};
    assert_int_equal(convert(s, n, 0, 0, &whole, NULL, 0), 0);
    assert_int_equal(convert(s, n, 1, 0, &bytes, NULL, 0), 0);
    assert_int_equal(convert(s, n, 7, 0, &odd, NULL, 0), 0);
    assert_int_equal(convert(s2, n2, 0, 0, &first, NULL, 0), 0);
    assert_int_equal(whole.n, bytes.n);
    assert_memory_equal(whole.b, bytes.b, whole.n);
    assert_int_equal(whole.n, odd.n);
    assert_memory_equal(whole.b, odd.b, whole.n);
    assert_int_equal(whole.n, first.n);
    assert_memory_equal(whole.b, first.b, whole.n);
    free(whole.b);
    free(bytes.b);
    free(odd.b);
    free(first.b);
    free(s);
    free(s2);
}

static void refused(enum variant v, uint64_t max_nodes, int want, const char *words)
{
    size_t n;
    uint8_t *s = synthetic(v, &n);
    char msg[384] = "";
    struct wb file = {0};
    assert_int_equal(convert(s, n, 0, max_nodes, &file, msg, sizeof(msg)), want);
    if (strstr(msg, words) == NULL) {
        fail_msg("'%s' does not say '%s'", msg, words);
    }
    assert_int_equal(file.n, 0);
    free(s);
}

static void test_refused(void **state)
{
    (void)state;
    refused(V_EDGES_SHORT, 0, AGENT_E_PROTO, "edge stream ran out");
    refused(V_EDGE_HALF, 0, AGENT_E_PROTO, "left over");
    refused(V_NODE_GAP, 0, AGENT_E_PROTO, "node event 2 where 1 was expected");
    /* An Index gap is the runtime dropping events: the error says so, and what to raise. */
    refused(V_NODE_GAP, 0, AGENT_E_PROTO,
            "the runtime dropped 1 events (its session buffer was full): raise "
            "GCDump:BufferSizeMB");
    {
        size_t gn;
        uint8_t *gs = synthetic(V_NODE_GAP, &gn);
        struct ev_gcheap *g = NULL;
        struct ev_gcheap_stats st;
        assert_int_equal(ev_gcheap_new(&g, NULL), 0);
        assert_int_equal(ev_gcheap_feed(g, gs, gn), AGENT_E_PROTO);
        ev_gcheap_get_stats(g, &st);
        assert_int_equal(st.lost, 1);
        ev_gcheap_free(g);
        free(gs);
    }
    refused(V_NO_GC, 0, AGENT_E_TRUNC, "no induced gen-2 GC");
    refused(V_NO_END, 0, AGENT_E_TRUNC, "before the induced GC did");
    refused(V_GOOD, 5, AGENT_E_TOOBIG, "more than 5 nodes");
    /* Truncated: the stream cut inside the GC. */
    size_t n;
    uint8_t *s = synthetic(V_GOOD, &n);
    char msg[256] = "";
    assert_int_equal(convert(s, n / 2, 0, 0, NULL, msg, sizeof(msg)), AGENT_E_TRUNC);
    /* A node limit that is just enough. */
    struct wb file = {0};
    assert_int_equal(convert(s, n, 0, 15, &file, NULL, 0), 0);
    free(file.b);
    free(s);
}

/* ---- memory: names cut, every store charged, bounded in bytes ------------------------------ */

/* A 30,000-character type and module name: cut to EV_GCHEAP_MAX_NAME units, an ellipsis last. */
static void test_long_names(void **state)
{
    (void)state;
    size_t n;
    uint8_t *s = synthetic(V_LONG_NAMES, &n);
    struct ev_gcheap *g = NULL;
    assert_int_equal(ev_gcheap_new(&g, NULL), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_int_equal(ev_gcheap_finish(g), 0);
    struct ev_gcheap_stats st;
    ev_gcheap_get_stats(g, &st);
    assert_int_equal(st.names_cut, 2);
    assert_true(st.mem_bytes < 64 * 1024); /* not 2 x 60,000 bytes of names */
    struct wb file = {0};
    assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, &file), 0);
    ev_gcheap_free(g);
    struct gfile f;
    gfile_parse(&f, file.b, file.n);
    char want[EV_GCHEAP_MAX_NAME + 3];
    memset(want, 'N', EV_GCHEAP_MAX_NAME - 1);
    memcpy(want + EV_GCHEAP_MAX_NAME - 1, "\xE2\x80\xA6", 4); /* U+2026 and the NUL */
    int32_t k = type_named(&f, want);
    memset(want, 'M', EV_GCHEAP_MAX_NAME - 1);
    assert_string_equal(f.types[k].module, want);
    assert_int_equal(membudget_used(), 0);
    gfile_free(&f); /* and file.b */
    free(s);
}

/* Feeds the hostile stream of kind (at most 1 GiB of it) until the feed fails; its error. */
static int feed_hostile(struct ev_gcheap *g, enum gh_kind kind, uint64_t *fed)
{
    struct gh h;
    gh_start(&h, kind);
    uint8_t *buf = malloc(65536);
    assert_non_null(buf);
    int rc = 0;
    *fed = 0;
    while (rc == 0 && *fed < ((uint64_t)1 << 30)) {
        size_t n = gh_next(&h, buf, 65536);
        rc = ev_gcheap_feed(g, buf, n);
        *fed += n;
    }
    free(buf);
    gh_free(&h);
    return rc;
}

/*
 * Endless pending edges, edgeless nodes, 30,000-character type names: each stops at the bound
 * that applies (a 4 MiB share; the total; the graph's own max_bytes), with AGENT_E_BUDGET and
 * words naming what to raise; the share never held more than its cap, and everything charged is
 * given back by ev_gcheap_free.
 */
static void test_budget(void **state)
{
    (void)state;
    const uint64_t cap = (uint64_t)4 << 20;
    const enum gh_kind kinds[] = {GH_EDGES, GH_NODES, GH_NAMES};
    for (size_t k = 0; k < 3; k++) {
        struct mb_share sh;
        mb_share_init(&sh, "test", cap);
        struct ev_gcheap_limits lim = {.share = &sh};
        struct ev_gcheap *g = NULL;
        assert_int_equal(ev_gcheap_new(&g, &lim), 0);
        uint64_t fed;
        assert_int_equal(feed_hostile(g, kinds[k], &fed), AGENT_E_BUDGET);
        struct ev_gcheap_stats st;
        ev_gcheap_get_stats(g, &st);
        print_message("hostile stream %zu: refused after %llu bytes, %llu edges, %llu objects, "
                      "%llu types (%llu names cut); graph %llu bytes, share peak %llu\n",
                      k, (unsigned long long)fed, (unsigned long long)st.edges,
                      (unsigned long long)st.objects, (unsigned long long)st.types,
                      (unsigned long long)st.names_cut, (unsigned long long)st.mem_bytes,
                      (unsigned long long)atomic_load(&sh.peak));
        assert_non_null(strstr(ev_gcheap_error(g), "share of dotmon's memory budget"));
        assert_true(atomic_load(&sh.peak) <= cap);
        assert_true(atomic_load(&sh.peak) > cap / 4);
        assert_true(st.mem_bytes <= cap + 4096);
        assert_int_equal(atomic_load(&sh.refused), 1);
        if (kinds[k] == GH_NAMES) {
            assert_true(st.types > 500);
            assert_int_equal(st.names_cut, st.types);
        }
        /* Refused once, refused for good. */
        uint8_t again[1] = {0};
        assert_int_equal(ev_gcheap_feed(g, again, 1), AGENT_E_BUDGET);
        assert_int_equal(ev_gcheap_finish(g), AGENT_E_BUDGET);
        ev_gcheap_free(g);
        assert_int_equal(atomic_load(&sh.used), 0);
        assert_int_equal(membudget_used(), 0);
        mb_share_fini(&sh);
    }
    /* dotmon's total refuses (the share has no cap of its own). */
    membudget_set((uint64_t)3 << 20);
    struct mb_share sh;
    mb_share_init(&sh, "test", 0);
    struct ev_gcheap_limits lim = {.share = &sh};
    struct ev_gcheap *g = NULL;
    uint64_t fed;
    assert_int_equal(ev_gcheap_new(&g, &lim), 0);
    assert_int_equal(feed_hostile(g, GH_EDGES, &fed), AGENT_E_BUDGET);
    assert_true(membudget_used() <= (uint64_t)3 << 20);
    assert_non_null(strstr(ev_gcheap_error(g), "more asked, 3 MiB;"));
    ev_gcheap_free(g);
    assert_int_equal(membudget_used(), 0);
    membudget_set(0);
    /* The graph's own bound (no share: the total only, here unlimited). */
    struct ev_gcheap_limits own = {.max_bytes = (uint64_t)2 << 20};
    assert_int_equal(ev_gcheap_new(&g, &own), 0);
    assert_int_equal(feed_hostile(g, GH_NODES, &fed), AGENT_E_BUDGET);
    struct ev_gcheap_stats st;
    ev_gcheap_get_stats(g, &st);
    assert_true(st.mem_bytes <= ((uint64_t)2 << 20) + 4096);
    assert_non_null(strstr(ev_gcheap_error(g), "GCDump:MaxNodes"));
    ev_gcheap_free(g);
    assert_int_equal(membudget_used(), 0);
    /* A real walk under a share just big enough, and one under a share too small. */
    size_t n;
    uint8_t *s = fixture_read("events", "gcdump-heap.nettrace", &n);
    mb_share_init(&sh, "test", (uint64_t)1 << 20);
    assert_int_equal(ev_gcheap_new(&g, &lim), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_int_equal(ev_gcheap_finish(g), 0);
    print_message("the capture's graph: share peak %llu bytes\n",
                  (unsigned long long)atomic_load(&sh.peak));
    ev_gcheap_free(g);
    assert_int_equal(atomic_load(&sh.used), 0);
    mb_share_init(&sh, "test", (uint64_t)64 << 10);
    assert_int_equal(ev_gcheap_new(&g, &lim), 0);
    int rc = ev_gcheap_feed(g, s, n);
    rc = rc != 0 ? rc : ev_gcheap_finish(g);
    assert_int_equal(rc, AGENT_E_BUDGET);
    ev_gcheap_free(g);
    assert_int_equal(membudget_used(), 0);
    free(s);
}

/* ---- the real capture against dotnet-gcdump's report ------------------------------------------
 */

/* "size count name" rows of our file the way `dotnet-gcdump report` lists them. */
static char **our_rows(const struct gfile *f, size_t *nrows)
{
    int32_t *count = calloc((size_t)f->ntypes, sizeof(*count));
    assert_non_null(count);
    for (int32_t k = 0; k < f->nnodes; k++) {
        size_t i = (size_t)f->offs[k];
        int32_t ts;
        assert_int_equal(ev_gcheap_cint_get(f->blob, (size_t)f->blob_len, &i, &ts), 0);
        count[ts >> 1]++;
    }
    char **rows = calloc((size_t)f->ntypes, sizeof(*rows));
    size_t r = 0;
    for (int32_t k = 0; k < f->ntypes; k++) {
        const struct gtype *t = &f->types[k];
        if (t->name == NULL || t->name[0] == '\0' || t->size == 0 || count[k] == 0) {
            continue;
        }
        const char *dll = "";
        if (t->module != NULL) {
            const char *slash = strrchr(t->module, '/');
            dll = slash != NULL ? slash + 1 : t->module;
        }
        size_t len = strlen(t->name) + strlen(dll) + 64;
        rows[r] = malloc(len);
        snprintf(rows[r], len, dll[0] != '\0' ? "%d %d %s  [%s]" : "%d %d %s%s", t->size, count[k],
                 t->name, dll);
        r++;
    }
    free(count);
    *nrows = r;
    return rows;
}

/* The report's rows in the same form (thousands separators dropped). */
static char **report_rows(char *text, size_t *nrows, int64_t *bytes, int64_t *objects)
{
    char **rows = NULL;
    size_t r = 0;
    for (char *line = strtok(text, "\n"); line != NULL; line = strtok(NULL, "\n")) {
        char num[2][32];
        int used = 0;
        const char *p = line;
        for (int k = 0; k < 2; k++) {
            while (*p == ' ') {
                p++;
            }
            size_t w = 0;
            while ((*p >= '0' && *p <= '9') || *p == ',') {
                if (*p != ',' && w < 31) {
                    num[k][w++] = *p;
                }
                p++;
            }
            num[k][w] = '\0';
            if (w == 0) {
                break;
            }
            used++;
        }
        if (used == 1 && strstr(line, "GC Heap bytes") != NULL) {
            *bytes = strtoll(num[0], NULL, 10);
        } else if (used == 1 && strstr(line, "GC Heap objects") != NULL) {
            *objects = strtoll(num[0], NULL, 10);
        } else if (used == 2) {
            while (*p == ' ') {
                p++;
            }
            rows = realloc(rows, (r + 1) * sizeof(*rows));
            size_t len = strlen(p) + 64;
            rows[r] = malloc(len);
            snprintf(rows[r], len, "%s %s %s", num[0], num[1], p);
            r++;
        }
    }
    *nrows = r;
    return rows;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void test_capture(void **state)
{
    (void)state;
    size_t n, rn;
    uint8_t *s = fixture_read("events", "gcdump-heap.nettrace", &n);
    char *report = (char *)fixture_read("events", "gcdump-heap.report.txt", &rn);
    report = realloc(report, rn + 1);
    report[rn] = '\0';
    struct wb whole = {0}, bytes = {0};
    char msg[256] = "";
    struct ev_gcheap *g = NULL;
    assert_int_equal(ev_gcheap_new(&g, NULL), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_true(ev_gcheap_complete(g));
    assert_int_equal(ev_gcheap_finish(g), 0);
    struct ev_gcheap_stats st;
    ev_gcheap_get_stats(g, &st);
    assert_true(st.complete);
    assert_int_equal(st.bytes, n);
    assert_int_equal(st.lost, 0);
    assert_int_equal(st.nodes, 2225);
    print_message("capture: %llu objects, %llu edges, %llu roots, %llu types, %llu nodes, "
                  "%llu bytes of graph (%.1f per node)\n",
                  (unsigned long long)st.objects, (unsigned long long)st.edges,
                  (unsigned long long)st.roots, (unsigned long long)st.types,
                  (unsigned long long)st.nodes, (unsigned long long)st.mem_bytes,
                  (double)st.mem_bytes / (double)st.nodes);
    assert_int_equal(ev_gcheap_feed(g, s, 1), AGENT_E_INVAL); /* after finish: refused, no harm */
    assert_null(ev_gcheap_error(g));
    assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, &whole), 0);
    ev_gcheap_free(g);
    assert_int_equal(convert(s, n, 1, 0, &bytes, msg, sizeof(msg)), 0);
    assert_int_equal(whole.n, bytes.n);
    assert_memory_equal(whole.b, bytes.b, whole.n);
    free(bytes.b);

    /* Written as dotnet-gcdump: byte for byte its own conversion of the same stream. */
    size_t tn;
    uint8_t *theirs_file = fixture_read("events", "gcdump-heap.gcdump", &tn);
    struct wb same = {0};
    assert_int_equal(ev_gcheap_new(&g, NULL), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_int_equal(ev_gcheap_finish(g), 0);
    assert_int_equal(ev_gcheap_write(g, "dotnet-gcdump", sink, &same), 0);
    ev_gcheap_free(g);
    assert_int_equal(same.n, tn);
    assert_memory_equal(same.b, theirs_file, tn);
    free(same.b);
    free(theirs_file);

    struct gfile f;
    gfile_parse(&f, whole.b, whole.n);
    size_t nours, ntheirs;
    int64_t rbytes = -1, robjects = -1;
    char **ours = our_rows(&f, &nours);
    char **theirs = report_rows(report, &ntheirs, &rbytes, &robjects);
    assert_int_equal(f.total, rbytes);
    assert_int_equal(f.nnodes, robjects);
    qsort(ours, nours, sizeof(*ours), cmp_str);
    qsort(theirs, ntheirs, sizeof(*theirs), cmp_str);
    for (size_t k = 0; k < nours && k < ntheirs; k++) {
        if (strcmp(ours[k], theirs[k]) != 0) {
            fail_msg("row %zu: ours '%s', dotnet-gcdump's '%s'", k, ours[k], theirs[k]);
        }
    }
    assert_int_equal(nours, ntheirs);
    bool holder = false;
    for (size_t k = 0; k < nours; k++) {
        holder |= strcmp(ours[k], "24 51 TestApp.GcDumpHolder  [TestApp.dll]") == 0;
        free(ours[k]);
    }
    for (size_t k = 0; k < ntheirs; k++) {
        free(theirs[k]);
    }
    assert_true(holder);
    free(ours);
    free(theirs);
    gfile_free(&f);
    free(report);
    free(s);
}

/* ---- the summary per type (GET /gcdump?format=summary) ----------------------------------------
 */

/* A finished graph of stream[0..n), under share (may be NULL). */
static struct ev_gcheap *graph_of(const uint8_t *s, size_t n, struct mb_share *share)
{
    struct ev_gcheap *g = NULL;
    struct ev_gcheap_limits lim = {.share = share};
    assert_int_equal(ev_gcheap_new(&g, &lim), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_int_equal(ev_gcheap_finish(g), 0);
    return g;
}

/* A root tree or CCW node's type ("[local vars]", "[CCW 0x… for type T]"); the compiler's closure
 * classes "<>c" read "[]c" once cleaned up, and are objects. */
static bool pseudo_type(const char *name)
{
    return name[0] == '[' && name[1] != ']';
}

/* The top's and omitted's sums are the totals. */
static void assert_sums(const struct ev_gcheap_types *t)
{
    uint64_t count = t->omitted_count, bytes = t->omitted_bytes;
    for (size_t i = 0; i < t->n_top; i++) {
        count += t->top[i].count;
        bytes += t->top[i].bytes;
        if (i > 0) { /* most bytes first */
            assert_true(t->top[i - 1].bytes >= t->top[i].bytes);
        }
    }
    assert_int_equal(count, t->objects);
    assert_int_equal(bytes, t->bytes);
    assert_int_equal(t->n_top + t->omitted_types, t->types);
}

/* Four types, three of them at 32 bytes each (a tie the names settle), and roots (pseudo nodes). */
static uint8_t *tie_stream(size_t *n)
{
    struct nt t;
    nt_begin(&t);
    md(&t, MD_START, 1, 2);
    md(&t, MD_END, 2, 1);
    md(&t, MD_TYPE, 15, 0);
    md(&t, MD_ROOT, 16, 0);
    md(&t, MD_NODE, 18, 0);
    md(&t, MD_EDGE, 19, 0);
    md(&t, MD_MODULE, 152, 2);
    nt_block(&t, "MetadataBlock", false);
    const struct stype types[] = {{0x100, 0xAA, 1, 0, "Zeta"},
                                  {0x200, 0xAA, 2, 0, "Alpha"},
                                  {0x300, 0xBB, 3, 0, "Mid"},
                                  {0x400, 0xBB, 4, 0, "Big"}};
    ev_types(&t, types, 4);
    ev_module_load(&t, 0xAA, "/app/Z.dll");
    ev_module_load(&t, 0xBB, "C:\\app\\M.dll");
    ev_gc(&t, MD_START, 3, 2, 1, 0);
    const struct sroot roots[] = {{0xA000, 0, 0}, {0xB000, 2, 0x1}};
    ev_roots(&t, 0, roots, 2);
    /* Mid first, then Zeta, then Alpha: the tie is not settled by order of arrival. */
    const struct snode nodes[] = {{0xB000, 8, 0x300, 0},  {0xB010, 8, 0x300, 0},
                                  {0xB020, 8, 0x300, 0},  {0xB030, 8, 0x300, 0},
                                  {0xA000, 16, 0x100, 0}, {0xA010, 16, 0x100, 0},
                                  {0xC000, 32, 0x200, 0}, {0xD000, 100, 0x400, 0}};
    ev_nodes(&t, 0, nodes, 8);
    ev_gc(&t, MD_END, 3, 2, 0, 0);
    nt_block(&t, "EventBlock", false);
    wb_u8(&t.out, 1);
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

static int json_sink(void *ud, const uint8_t *p, size_t n)
{
    struct wb *w = ud;
    assert_true(n > 0);
    wb_raw(w, p, n);
    return 0;
}

static int closed_sink(void *ud, const uint8_t *p, size_t n)
{
    (void)ud;
    (void)p;
    (void)n;
    return AGENT_E_CLOSED;
}

/*
 * Type statistics: count and summed size per type, size classes folded into their type, ranked by
 * bytes with ties by name, the top kept and the rest summed; the root tree's pseudo nodes and CCW
 * nodes not counted (the sums are the stats' objects and total_size); the JSON; the charge given
 * back; and on the real capture, the test app's 51 holders.
 */
static void test_type_stats(void **state)
{
    (void)state;
    size_t n;
    uint8_t *s = tie_stream(&n);
    struct mb_share sh;
    mb_share_init(&sh, "test", 0);
    struct ev_gcheap *g = graph_of(s, n, &sh);
    struct ev_gcheap_types t;
    assert_int_equal(ev_gcheap_type_stats(g, 0, &t), AGENT_E_INVAL);
    assert_int_equal(ev_gcheap_type_stats(g, EV_GCHEAP_TOP_MAX + 1, &t), AGENT_E_INVAL);
    assert_int_equal(ev_gcheap_type_stats(g, 10, &t), 0);
    assert_int_equal(t.objects, 8);
    assert_int_equal(t.bytes, 4 * 8 + 2 * 16 + 32 + 100);
    assert_int_equal(t.types, 4);
    assert_int_equal(t.n_top, 4);
    assert_sums(&t);
    static const char *const order[] = {"Big", "Alpha", "Mid", "Zeta"};
    static const uint64_t counts[] = {1, 1, 4, 2};
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(t.top[i].type, order[i]);
        assert_int_equal(t.top[i].count, counts[i]);
    }
    assert_string_equal(t.top[0].module, "M.dll"); /* a Windows path too: the file name */
    assert_string_equal(t.top[1].module, "Z.dll");
    assert_int_equal(t.top[2].bytes, 32);
    assert_true(atomic_load(&sh.used) > 0);
    ev_gcheap_types_fini(&t);
    /* The top 2: the other two summed. */
    assert_int_equal(ev_gcheap_type_stats(g, 2, &t), 0);
    assert_int_equal(t.n_top, 2);
    assert_int_equal(t.omitted_types, 2);
    assert_int_equal(t.omitted_count, 6);
    assert_int_equal(t.omitted_bytes, 64);
    assert_sums(&t);
    struct wb js = {0};
    assert_int_equal(ev_gcheap_write_types_json(&t, 42, json_sink, &js), 0);
    wb_u8(&js, 0);
    assert_string_equal((const char *)js.b,
                        "{\"pid\":42,\"objects\":8,\"heapBytes\":196,\"typeCount\":4,\"top\":["
                        "{\"type\":\"Big\",\"module\":\"M.dll\",\"count\":1,\"bytes\":100},"
                        "{\"type\":\"Alpha\",\"module\":\"Z.dll\",\"count\":1,\"bytes\":32}],"
                        "\"omitted\":{\"types\":2,\"count\":6,\"bytes\":64}}\n");
    free(js.b);
    assert_int_equal(ev_gcheap_write_types_json(&t, 42, closed_sink, NULL), AGENT_E_CLOSED);
    /* The summary outlives the graph; its charge goes back at fini. */
    ev_gcheap_free(g);
    assert_true(atomic_load(&sh.used) > 0);
    ev_gcheap_types_fini(&t);
    ev_gcheap_types_fini(&t); /* zeroed: twice is fine */
    assert_int_equal(atomic_load(&sh.used), 0);
    free(s);

    /* Not finished: refused. */
    s = synthetic(V_GOOD, &n);
    assert_int_equal(ev_gcheap_new(&g, NULL), 0);
    assert_int_equal(ev_gcheap_feed(g, s, n), 0);
    assert_int_equal(ev_gcheap_type_stats(g, 5, &t), AGENT_E_INVAL);
    assert_null(t.top);
    ev_gcheap_free(g);

    /* Size classes folded: System.Byte[]'s 1K and 10K objects are System.Byte[]'s; an unknown
     * type has no module. */
    g = graph_of(s, n, NULL);
    struct ev_gcheap_stats st;
    ev_gcheap_get_stats(g, &st);
    assert_int_equal(ev_gcheap_type_stats(g, 100, &t), 0);
    assert_int_equal(t.objects, st.objects);
    assert_int_equal(t.bytes, st.total_size);
    assert_int_equal(t.types, 3);
    assert_sums(&t);
    assert_string_equal(t.top[0].type, "System.Byte[]");
    assert_string_equal(t.top[0].module, "My.dll");
    assert_int_equal(t.top[0].count, 2);
    assert_int_equal(t.top[0].bytes, 25000);
    assert_string_equal(t.top[1].type,
                        "System.Collections.Generic.Dictionary<<System.String>,<Foo<<X>>>>");
    assert_int_equal(t.top[1].count, 2);
    assert_string_equal(t.top[2].type, "UNKNOWN 0x999");
    assert_string_equal(t.top[2].module, "");
    ev_gcheap_get_stats(g, &st);
    assert_int_equal(st.unnamed_types, 1); /* 0x999: one type id no BulkType named */
    ev_gcheap_types_fini(&t);
    /* The file can still be written after. */
    struct wb file = {0};
    assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, &file), 0);
    free(file.b);
    ev_gcheap_free(g);
    free(s);

    /* Interop: the CCW node (200 bytes in the file) and the statics' pseudo nodes are not counted;
     * the RCW object (B) is, with its 1000 bytes more, as the file has it. */
    s = synthetic(V_INTEROP, &n);
    g = graph_of(s, n, NULL);
    ev_gcheap_get_stats(g, &st);
    assert_int_equal(ev_gcheap_type_stats(g, 100, &t), 0);
    assert_int_equal(t.objects, 5);
    assert_int_equal(t.bytes, 24 + 6000 + 20000 + 32 + 24);
    assert_int_equal(t.bytes, st.total_size);
    for (size_t i = 0; i < t.n_top; i++) {
        assert_false(pseudo_type(t.top[i].type));
    }
    ev_gcheap_types_fini(&t);
    ev_gcheap_free(g);
    free(s);

    /* The real capture (`heap-graph 50 3 2000`): 51 holders in TestApp.dll, their 153 arrays of
     * 2000 bytes among System.Byte[]'s; the sums are the file's total (no CCW in it). */
    s = fixture_read("events", "gcdump-heap.nettrace", &n);
    g = graph_of(s, n, NULL);
    ev_gcheap_get_stats(g, &st);
    assert_int_equal(ev_gcheap_type_stats(g, EV_GCHEAP_TOP_MAX, &t), 0);
    assert_int_equal(t.objects, st.objects);
    assert_int_equal(t.bytes, st.total_size);
    assert_int_equal(t.omitted_types, 0);
    assert_sums(&t);
    bool holder = false, arrays = false;
    for (size_t i = 0; i < t.n_top; i++) {
        assert_false(pseudo_type(t.top[i].type));
        if (strcmp(t.top[i].type, "TestApp.GcDumpHolder") == 0) {
            holder = t.top[i].count == 51 && strcmp(t.top[i].module, "TestApp.dll") == 0;
        }
        if (strcmp(t.top[i].type, "System.Byte[]") == 0) {
            arrays = t.top[i].count >= 153 && t.top[i].bytes >= 153 * 2000 &&
                     strcmp(t.top[i].module, "System.Private.CoreLib.dll") == 0;
        }
    }
    assert_true(holder && arrays);
    print_message("capture summary: %llu objects, %llu bytes, %llu types; first %s x %llu\n",
                  (unsigned long long)t.objects, (unsigned long long)t.bytes,
                  (unsigned long long)t.types, t.top[0].type, (unsigned long long)t.top[0].count);
    ev_gcheap_types_fini(&t);
    struct wb whole = {0};
    assert_int_equal(ev_gcheap_write(g, "dotmon-test", sink, &whole), 0);
    ev_gcheap_free(g);
    struct gfile f;
    gfile_parse(&f, whole.b, whole.n);
    assert_int_equal(f.total, (int64_t)st.total_size);
    gfile_free(&f);
    free(s);
    mb_share_fini(&sh);
}

/* EV_GCHEAP_SEED=<dir>: writes the synthetic streams there as fuzz_gcheap seeds. */
static void write_seeds(const char *dir)
{
    const struct {
        enum variant v;
        const char *name;
    } seeds[] = {{V_GOOD, "gen-walk"},
                 {V_EDGES_FIRST, "gen-walk-edges-first"},
                 {V_INTEROP, "gen-walk-interop"}};
    for (size_t k = 0; k < sizeof(seeds) / sizeof(seeds[0]); k++) {
        size_t n;
        uint8_t *s = synthetic(seeds[k].v, &n);
        char path[1024];
        snprintf(path, sizeof(path), "%s/%s", dir, seeds[k].name);
        FILE *f = fopen(path, "wb");
        if (f == NULL || fwrite(s, 1, n, f) != n || fclose(f) != 0) {
            fprintf(stderr, "cannot write %s\n", path);
            exit(1);
        }
        free(s);
    }
}

int main(void)
{
    if (getenv("EV_GCHEAP_SEED") != NULL) {
        write_seeds(getenv("EV_GCHEAP_SEED"));
        return 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cint),      cmocka_unit_test(test_string),
        cmocka_unit_test(test_synthetic), cmocka_unit_test(test_chunking),
        cmocka_unit_test(test_refused),   cmocka_unit_test(test_interop),
        cmocka_unit_test(test_capture),   cmocka_unit_test(test_long_names),
        cmocka_unit_test(test_budget),    cmocka_unit_test(test_type_stats),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
