/* SPDX-License-Identifier: MIT */
/*
 * events/ev_activity: Microsoft-Diagnostics-DiagnosticSource ActivityStop events to spans
 * (docs/events.md §9) and the FilterAndPayloadSpecs builder. Synthetic V4 streams written byte by
 * byte (metadata in a V2Params tag, as the runtime writes an event with an array field), fed whole,
 * one byte at a time and cut short; the bounds (tags, strings, the memory share); and a real
 * capture of the test app (tests/fixtures/events/README.md, activities.nettrace).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ev_activity.h"
#include "fixture.h"
#include "membudget.h"
#include "ntw.h"
#include "wbuf.h"

#define DSES "Microsoft-Diagnostics-DiagnosticSource"

enum { MD_START = 1, MD_STOP = 2, MD_OTHER = 3, MD_STOP_TE = 4 };

/* One V2 field: u32 size (itself included), name, then the type written by type(). */
static void v2_field(struct wb *w, const char *name, void (*type)(struct wb *))
{
    size_t at = w->n;
    wb_u32(w, 0);
    wb_wstr(w, name);
    type(w);
    uint32_t size = (uint32_t)(w->n - at);
    for (int k = 0; k < 4; k++) {
        w->b[at + (size_t)k] = (uint8_t)(size >> (8 * k));
    }
}

static void t_string(struct wb *w)
{
    wb_u32(w, 18);
}

static void t_kv_array(struct wb *w)
{
    wb_u32(w, 19); /* Array */
    wb_u32(w, 1);  /* of Object */
    wb_u32(w, 2);
    v2_field(w, "Key", t_string);
    v2_field(w, "Value", t_string);
}

/* ActivityStart/ActivityStop's metadata: V1 count 0, then a V2Params tag with the three fields. */
static void md_def(struct nt *t, uint32_t id, const char *provider, const char *name)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, provider);
    wb_u32(&w, id + 40);
    wb_wstr(&w, name);
    wb_le(&w, 0x2, 8);
    wb_u32(&w, 0);
    wb_u32(&w, 5);
    wb_u32(&w, 0); /* V1 field count */
    struct wb tag = {0};
    wb_u32(&tag, 3);
    v2_field(&tag, "SourceName", t_string);
    v2_field(&tag, "ActivityName", t_string);
    v2_field(&tag, "Arguments", t_kv_array);
    wb_u32(&w, (uint32_t)tag.n);
    wb_u8(&w, 2); /* V2Params */
    wb_raw(&w, tag.b, tag.n);
    free(tag.b);
    bool c = t->compressed;
    t->compressed = false;
    nt_blob(t, 0, 0, 0, 0, &w);
    t->compressed = c;
    free(w.b);
}

/* An event: source, activity name and key/value pairs (kv[2k], kv[2k + 1]). */
static void ev_act(struct nt *t, uint32_t md, const char *source, const char *name,
                   const char *const *kv, size_t npairs)
{
    struct wb p = {0};
    wb_wstr(&p, source);
    wb_wstr(&p, name);
    wb_u16(&p, (unsigned)npairs);
    for (size_t k = 0; k < npairs; k++) {
        wb_wstr(&p, kv[2 * k]);
        wb_wstr(&p, kv[2 * k + 1]);
    }
    nt_blob(t, md, SYNC_QPC, 0, 0, &p);
    free(p.b);
}

#define TRACE  "0af7651916cd43dd8448eb211c80319c"
#define PARENT "b7ad6b7169203331"
#define CHILD  "00f067aa0ba902b7"
/* 2025-01-02 03:04:05 UTC in DateTime ticks and Unix ns. */
#define START_TICKS "638713838450000000"
#define START_NS    1735787045000000000ull

static const char *const parent_kv[] = {
    "TraceId",
    TRACE,
    "SpanId",
    PARENT,
    "ParentSpanId",
    "0000000000000000",
    "ActivityTraceFlags",
    "Recorded",
    "TraceStateString",
    "",
    "Kind",
    "Server",
    "DisplayName",
    "GET /a",
    "StartTimeTicks",
    START_TICKS,
    "DurationTicks",
    "15000",
    "Status",
    "Ok",
    "StatusDescription",
    "",
    "Tags",
    "[http.route, /a,b]],[n, 42],[flag, True],[empty, ]",
    "ActivitySourceVersion",
    "1.2.3",
};

static const char *const child_kv[] = {
    "SpanId",
    CHILD,
    "TraceId",
    TRACE,
    "ParentSpanId",
    PARENT,
    "ActivityTraceFlags",
    "1",
    "TraceStateString",
    "k=v",
    "Kind",
    "2",
    "DisplayName",
    "",
    "StartTimeTicks",
    "638713838450000100",
    "DurationTicks",
    "-5",
    "Status",
    "Error",
    "StatusDescription",
    "boom",
    "Tags",
    "",
    "Unknown",
    "ignored",
};

/* Not recorded (the sampler kept its ids only): no span. */
static const char *const unsampled_kv[] = {
    "TraceId", TRACE, "SpanId", CHILD, "ActivityTraceFlags", "None", "StartTimeTicks", START_TICKS,
};

/* An activity in the hierarchical id format: no W3C ids, so no span. */
static const char *const hier_kv[] = {
    "TraceId", "", "SpanId", "", "StartTimeTicks", START_TICKS, "DurationTicks", "1",
};

static uint8_t *synthetic(size_t *n, bool compressed)
{
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_START, DSES, "ActivityStart");
    md_def(&t, MD_STOP, DSES, "ActivityStop");
    md_def(&t, MD_OTHER, "Other", "ActivityStop");
    md_def(&t, MD_STOP_TE, DSES, "Activity/Stop");
    nt_block(&t, "MetadataBlock", false);
    t.compressed = compressed;
    ev_act(&t, MD_START, "Demo", "Parent", parent_kv, 2);
    ev_act(&t, MD_STOP, "Demo", "Child", child_kv, sizeof(child_kv) / sizeof(child_kv[0]) / 2);
    nt_block(&t, "EventBlock", compressed);
    ev_act(&t, MD_OTHER, "Demo", "Parent", parent_kv, sizeof(parent_kv) / sizeof(parent_kv[0]) / 2);
    ev_act(&t, MD_STOP_TE, "Demo", "Parent", parent_kv,
           sizeof(parent_kv) / sizeof(parent_kv[0]) / 2);
    ev_act(&t, MD_STOP, "Demo", "Hier", hier_kv, sizeof(hier_kv) / sizeof(hier_kv[0]) / 2);
    ev_act(&t, MD_STOP, "Demo", "Unsampled", unsampled_kv,
           sizeof(unsampled_kv) / sizeof(unsampled_kv[0]) / 2);
    nt_block(&t, "EventBlock", compressed);
    *n = t.out.n;
    free(t.blk.b);
    return t.out.b;
}

/* What the callback saw, copied (views die with the callback). */
struct seen_tag {
    char key[64];
    char value[64];
};
struct seen {
    size_t n;
    struct {
        struct ev_span s;
        char name[64], op[64], source[32], version[16], state[16], desc[16];
        bool has_state, has_desc, has_version;
        size_t ntags;
        struct seen_tag tags[8];
    } sp[8];
    size_t max_tags;
    size_t longest_name;
};

static void copy_str(char *dst, size_t cap, const char *s)
{
    int len = snprintf(dst, cap, "%s", s != NULL ? s : "");
    assert_true(len >= 0);
}

static void on_span(void *ud, const struct ev_span *s)
{
    struct seen *w = ud;
    if (s->ntags > w->max_tags) {
        w->max_tags = s->ntags;
    }
    size_t len = strlen(s->name);
    w->longest_name = len > w->longest_name ? len : w->longest_name;
    if (w->n >= 8) {
        return;
    }
    struct seen *x = w;
    x->sp[w->n].s = *s;
    copy_str(x->sp[w->n].name, 64, s->name);
    copy_str(x->sp[w->n].op, 64, s->operation_name);
    copy_str(x->sp[w->n].source, 32, s->source_name);
    x->sp[w->n].has_version = s->source_version != NULL;
    copy_str(x->sp[w->n].version, 16, s->source_version);
    x->sp[w->n].has_state = s->trace_state != NULL;
    copy_str(x->sp[w->n].state, 16, s->trace_state);
    x->sp[w->n].has_desc = s->status_description != NULL;
    copy_str(x->sp[w->n].desc, 16, s->status_description);
    x->sp[w->n].ntags = s->ntags;
    for (size_t k = 0; k < s->ntags && k < 8; k++) {
        copy_str(x->sp[w->n].tags[k].key, 64, s->tags[k].key);
        copy_str(x->sp[w->n].tags[k].value, 64, s->tags[k].value);
    }
    w->n++;
}

static void check_synthetic(const struct seen *w, const struct ev_activity_stats *st)
{
    assert_int_equal(w->n, 2);
    assert_int_equal(st->starts, 1);
    assert_int_equal(st->stops, 4);
    assert_int_equal(st->spans, 2);
    assert_int_equal(st->skipped, 1);   /* the hierarchical-id activity */
    assert_int_equal(st->unsampled, 1); /* no Recorded flag */
    /* The child: pairs in another order, a number for Kind, an empty DisplayName, a negative
     * duration. */
    const struct ev_span *c = &w->sp[0].s;
    assert_memory_equal(c->trace_id,
                        "\x0a\xf7\x65\x19\x16\xcd\x43\xdd\x84\x48\xeb\x21\x1c\x80\x31\x9c", 16);
    assert_memory_equal(c->span_id, "\x00\xf0\x67\xaa\x0b\xa9\x02\xb7", 8);
    assert_true(c->has_parent);
    assert_memory_equal(c->parent_span_id, "\xb7\xad\x6b\x71\x69\x20\x33\x31", 8);
    assert_int_equal(c->flags, 1);
    assert_string_equal(w->sp[0].name, "Child"); /* an empty DisplayName: the operation name */
    assert_string_equal(w->sp[0].op, "Child");
    assert_string_equal(w->sp[0].source, "Demo");
    assert_false(w->sp[0].has_version);
    assert_true(w->sp[0].has_state);
    assert_string_equal(w->sp[0].state, "k=v");
    assert_int_equal(c->kind, EV_ACTIVITY_CLIENT);
    assert_int_equal(c->status, EV_ACTIVITY_ERROR);
    assert_true(w->sp[0].has_desc);
    assert_string_equal(w->sp[0].desc, "boom");
    assert_int_equal(c->start_unix_nano, START_NS + 10000);
    assert_int_equal(c->end_unix_nano, c->start_unix_nano);
    assert_int_equal(w->sp[0].ntags, 0);
    /* The parent, from TraceEvent's event name. */
    const struct ev_span *p = &w->sp[1].s;
    assert_false(p->has_parent);
    assert_int_equal(p->flags, 1);
    assert_memory_equal(p->span_id, "\xb7\xad\x6b\x71\x69\x20\x33\x31", 8);
    assert_string_equal(w->sp[1].name, "GET /a");
    assert_string_equal(w->sp[1].op, "Parent");
    assert_string_equal(w->sp[1].version, "1.2.3");
    assert_false(w->sp[1].has_state);
    assert_false(w->sp[1].has_desc);
    assert_int_equal(p->kind, EV_ACTIVITY_SERVER);
    assert_int_equal(p->status, EV_ACTIVITY_OK);
    assert_int_equal(p->start_unix_nano, START_NS);
    assert_int_equal(p->end_unix_nano, START_NS + 1500000);
    assert_int_equal(w->sp[1].ntags, 4);
    assert_string_equal(w->sp[1].tags[0].key, "http.route");
    assert_string_equal(w->sp[1].tags[0].value, "/a,b]");
    assert_string_equal(w->sp[1].tags[1].key, "n");
    assert_string_equal(w->sp[1].tags[1].value, "42");
    assert_string_equal(w->sp[1].tags[2].key, "flag");
    assert_string_equal(w->sp[1].tags[2].value, "True");
    assert_string_equal(w->sp[1].tags[3].key, "empty");
    assert_string_equal(w->sp[1].tags[3].value, "");
}

static void test_ev_activity_spans(void **state)
{
    (void)state;
    for (int compressed = 0; compressed < 2; compressed++) {
        size_t n;
        uint8_t *bytes = synthetic(&n, compressed != 0);
        for (int bytewise = 0; bytewise < 2; bytewise++) {
            struct seen *w = calloc(1, sizeof(*w));
            assert_non_null(w);
            struct ev_activity *a = NULL;
            assert_int_equal(ev_activity_new(&a, on_span, w), 0);
            if (bytewise) {
                for (size_t k = 0; k < n; k++) {
                    assert_int_equal(ev_activity_feed(a, bytes + k, 1), 0);
                }
            } else {
                assert_int_equal(ev_activity_feed(a, bytes, n), 0);
            }
            assert_null(ev_activity_error(a));
            int v = -1;
            assert_int_equal(ev_activity_source_version(a, &v, &v, &v), AGENT_E_NOTFOUND);
            assert_int_equal(v, -1);
            struct ev_activity_stats st;
            ev_activity_get_stats(a, &st);
            check_synthetic(w, &st);
            assert_int_equal(st.bytes, n);
            ev_activity_free(a);
            free(w);
        }
        free(bytes);
    }
}

/* Every prefix and every single damaged byte: never a crash, never a span with bad ids. */
static void test_ev_activity_hostile(void **state)
{
    (void)state;
    size_t n;
    uint8_t *bytes = synthetic(&n, true);
    struct seen *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    for (size_t cut = 0; cut < n; cut += 7) {
        struct ev_activity *a = NULL;
        assert_int_equal(ev_activity_new(&a, on_span, w), 0);
        (void)ev_activity_feed(a, bytes, cut);
        ev_activity_free(a);
        w->n = 0;
    }
    uint8_t *copy = malloc(n);
    assert_non_null(copy);
    for (size_t at = 0; at < n; at++) {
        memcpy(copy, bytes, n);
        copy[at] ^= 0x5A;
        struct ev_activity *a = NULL;
        assert_int_equal(ev_activity_new(&a, on_span, w), 0);
        (void)ev_activity_feed(a, copy, n);
        struct ev_activity_stats st;
        ev_activity_get_stats(a, &st);
        assert_true(st.spans <= 3);
        ev_activity_free(a);
        w->n = 0;
    }
    free(copy);
    free(bytes);
    free(w);
}

/* Ends t's last block, decodes the stream whole into a fresh seen (the caller frees it), frees t.
 */
static struct seen *decode_stream(struct nt *t, struct ev_activity_stats *st)
{
    nt_block(t, "EventBlock", false);
    struct seen *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    struct ev_activity *a = NULL;
    assert_int_equal(ev_activity_new(&a, on_span, w), 0);
    assert_int_equal(ev_activity_feed(a, t->out.b, t->out.n), 0);
    ev_activity_get_stats(a, st);
    ev_activity_free(a);
    free(t->out.b);
    free(t->blk.b);
    return w;
}

/* 200 tags: 128 kept, the rest counted; a DisplayName over the string cap is cut at the cap. */
static void test_ev_activity_bounds(void **state)
{
    (void)state;
    struct buf tags;
    buf_init(&tags, 0);
    for (int k = 0; k < 200; k++) {
        assert_int_equal(buf_printf(&tags, "%s[t%d, v%d]", k > 0 ? "," : "", k, k), 0);
    }
    char *longname = malloc(10001);
    assert_non_null(longname);
    memset(longname, 'x', 10000);
    longname[10000] = '\0';
    const char *kv[] = {
        "TraceId", TRACE,           "SpanId",      PARENT,   "StartTimeTicks",     START_TICKS,
        "Tags",    buf_cstr(&tags), "DisplayName", longname, "ActivityTraceFlags", "Recorded"};
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_STOP, DSES, "ActivityStop");
    nt_block(&t, "MetadataBlock", false);
    ev_act(&t, MD_STOP, "Demo", "Many", kv, 6);
    struct ev_activity_stats st;
    struct seen *w = decode_stream(&t, &st);
    assert_int_equal(st.spans, 1);
    assert_int_equal(w->max_tags, EV_ACTIVITY_MAX_TAGS);
    assert_int_equal(st.tags_dropped, 200 - EV_ACTIVITY_MAX_TAGS);
    assert_int_equal(w->longest_name, EV_ACTIVITY_MAX_STRING);
    free(w);
    buf_fini(&tags);
    free(longname);
}

/*
 * Long strings are cut, not dropped: a 50000-character Tags argument (its one tag loses its end,
 * so no tag) and a DisplayName whose cut falls inside a surrogate pair (the pair is left out
 * whole, the name stays valid UTF-8).
 */
static void test_ev_activity_long_strings(void **state)
{
    (void)state;
    char *big = malloc(50010);
    assert_non_null(big);
    memcpy(big, "[big, ", 6);
    memset(big + 6, 'v', 50000);
    memcpy(big + 50006, "]", 2);
    const char *kv[] = {
        "TraceId",  TRACE,  "SpanId", PARENT, "StartTimeTicks", START_TICKS, "ActivityTraceFlags",
        "Recorded", "Tags", big};
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_STOP, DSES, "ActivityStop");
    nt_block(&t, "MetadataBlock", false);
    ev_act(&t, MD_STOP, "Demo", "Big", kv, 5);
    /* DisplayName: 8191 'x', U+1F600 as a surrogate pair (units 8191 and 8192), then 'y' */
    struct wb p = {0};
    wb_wstr(&p, "Demo");
    wb_wstr(&p, "Emoji");
    wb_u16(&p, 5);
    for (size_t k = 0; k < 8; k += 2) {
        wb_wstr(&p, kv[k]);
        wb_wstr(&p, kv[k + 1]);
    }
    wb_wstr(&p, "DisplayName");
    for (int k = 0; k < 8191; k++) {
        wb_u16(&p, 'x');
    }
    wb_u16(&p, 0xD83D);
    wb_u16(&p, 0xDE00);
    wb_u16(&p, 'y');
    wb_u16(&p, 0);
    nt_blob(&t, MD_STOP, SYNC_QPC, 0, 0, &p);
    free(p.b);
    struct ev_activity_stats st;
    struct seen *w = decode_stream(&t, &st);
    assert_int_equal(st.spans, 2);
    assert_int_equal(st.skipped, 0);
    assert_int_equal(w->sp[0].ntags, 0);
    assert_int_equal(w->longest_name, 8191); /* the x's alone */
    free(w);
    free(big);
}

/* A share too small for any schema: metadata dropped and counted, no span, nothing held after. */
static void test_ev_activity_share(void **state)
{
    (void)state;
    size_t n;
    uint8_t *bytes = synthetic(&n, false);
    struct mb_share share;
    mb_share_init(&share, "activity test", 64);
    struct seen *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    struct ev_activity *a = NULL;
    assert_int_equal(ev_activity_new(&a, on_span, w), 0);
    assert_int_equal(ev_activity_set_share(a, &share), 0);
    assert_int_equal(ev_activity_feed(a, bytes, n), 0);
    struct ev_activity_stats st;
    ev_activity_get_stats(a, &st);
    assert_int_equal(st.spans, 0);
    assert_true(st.budget_dropped >= 3);
    assert_true(atomic_load(&share.peak) <= share.cap);
    ev_activity_free(a);
    assert_int_equal(atomic_load(&share.used), 0);
    mb_share_fini(&share);
    free(w);
    free(bytes);
}

static const char stop_spec[] =
    ":-TraceId;SpanId;ParentSpanId;ActivityTraceFlags;TraceStateString;Kind;DisplayName"
    ";StartTimeTicks=StartTimeUtc.Ticks;DurationTicks=Duration.Ticks;Status;StatusDescription"
    ";Tags=TagObjects.*Enumerate;ActivitySourceVersion=Source.Version\r\n";

static void test_ev_activity_filter_specs(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_activity_filter_specs("*", 1.0, &b), 0);
    char want[1024];
    int len = snprintf(want, sizeof(want), "[AS]*/Stop%s", stop_spec);
    assert_true(len > 0);
    assert_string_equal(buf_cstr(&b), want);
    buf_reset(&b);
    assert_int_equal(ev_activity_filter_specs(" Demo.A ;;My-Source\t; ", 0.25, &b), 0);
    len = snprintf(want, sizeof(want),
                   "[AS]Demo.A/Stop-ParentRatioSampler(0.25)%s"
                   "[AS]My-Source/Stop-ParentRatioSampler(0.25)%s",
                   stop_spec, stop_spec);
    assert_true(len > 0);
    assert_string_equal(buf_cstr(&b), want);
    /* refused: nothing appended */
    buf_reset(&b);
    assert_int_equal(buf_append_str(&b, "keep"), 0);
    const char *bad[] = {"", " ; ", "A/B", "A:B", "A+B", "[AS]A", "A\nB", "ok;bad/x"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_int_equal(ev_activity_filter_specs(bad[k], 1.0, &b), AGENT_E_INVAL);
        assert_string_equal(buf_cstr(&b), "keep");
    }
    assert_int_equal(ev_activity_filter_specs("A", -0.1, &b), AGENT_E_INVAL);
    assert_int_equal(ev_activity_filter_specs("A", 1.5, &b), AGENT_E_INVAL);
    assert_int_equal(ev_activity_filter_specs(NULL, 1.0, &b), AGENT_E_INVAL);
    assert_string_equal(buf_cstr(&b), "keep");
    buf_fini(&b);
    assert_string_equal(ev_activity_kind_name(EV_ACTIVITY_CONSUMER), "Consumer");
    assert_null(ev_activity_kind_name(5));
    assert_string_equal(ev_activity_status_name(EV_ACTIVITY_ERROR), "Error");
    assert_null(ev_activity_status_name(-1));
}

/* The real capture: the ids the app printed, its HttpClient span as the server span's parent. */
static void test_ev_activity_real_capture(void **state)
{
    (void)state;
    size_t n;
    uint8_t *bytes = fixture_read("events", "activities.nettrace", &n);
    struct seen *w = calloc(1, sizeof(*w));
    assert_non_null(w);
    struct ev_activity *a = NULL;
    assert_int_equal(ev_activity_new(&a, on_span, w), 0);
    for (size_t off = 0; off < n; off += 1000) { /* in pieces */
        assert_int_equal(ev_activity_feed(a, bytes + off, n - off < 1000 ? n - off : 1000), 0);
    }
    struct ev_activity_stats st;
    ev_activity_get_stats(a, &st);
    int major = -1, minor = -1, patch = -1;
    assert_int_equal(ev_activity_source_version(a, &major, &minor, &patch), 0);
    assert_int_equal(major, 10); /* the Version event of .NET 10's DiagnosticSource */
    assert_int_equal(minor, 0);
    assert_true(patch > 0);
    assert_int_equal(st.spans, 6);
    assert_int_equal(st.skipped, 0);
    assert_int_equal(w->n, 6);
    static const uint8_t trace[16] = {0x7b, 0x2b, 0x7f, 0xee, 0x9c, 0x4f, 0x57, 0xf8,
                                      0x93, 0x65, 0x7d, 0xa9, 0xd3, 0x5c, 0x34, 0x92};
    static const uint8_t parent[8] = {0x3b, 0xf6, 0x0e, 0x30, 0x1b, 0x4b, 0x7f, 0x5f};
    static const uint8_t child[8] = {0xc9, 0x96, 0x00, 0xa7, 0x28, 0xcb, 0xa9, 0x53};
    int p = -1, c = -1, client = -1, server = -1;
    for (size_t k = 0; k < w->n; k++) {
        const struct ev_span *s = &w->sp[k].s;
        if (memcmp(s->span_id, parent, 8) == 0) {
            p = (int)k;
        } else if (memcmp(s->span_id, child, 8) == 0) {
            c = (int)k;
        } else if (strcmp(w->sp[k].source, "System.Net.Http") == 0) {
            client = (int)k;
        } else if (strcmp(w->sp[k].source, "Microsoft.AspNetCore") == 0) {
            server = (int)k;
        }
    }
    assert_true(p >= 0 && c >= 0 && client >= 0 && server >= 0);
    assert_memory_equal(w->sp[p].s.trace_id, trace, 16);
    assert_memory_equal(w->sp[c].s.trace_id, trace, 16);
    assert_false(w->sp[p].s.has_parent);
    assert_true(w->sp[c].s.has_parent);
    assert_memory_equal(w->sp[c].s.parent_span_id, parent, 8);
    assert_string_equal(w->sp[p].name, "fixture");
    assert_string_equal(w->sp[c].name, "fixture.child");
    assert_string_equal(w->sp[p].version, "1.0.0");
    assert_int_equal(w->sp[p].s.kind, EV_ACTIVITY_SERVER);
    assert_int_equal(w->sp[c].s.kind, EV_ACTIVITY_CLIENT);
    assert_int_equal(w->sp[c].s.status, EV_ACTIVITY_ERROR);
    assert_string_equal(w->sp[c].desc, "child failed");
    assert_int_equal(w->sp[p].ntags, 2);
    assert_string_equal(w->sp[p].tags[0].key, "demo.name");
    assert_string_equal(w->sp[p].tags[0].value, "fixture");
    assert_string_equal(w->sp[p].tags[1].value, "42");
    assert_true(w->sp[c].s.end_unix_nano - w->sp[c].s.start_unix_nano >= 2000000);
    assert_true(w->sp[p].s.start_unix_nano <= w->sp[c].s.start_unix_nano &&
                w->sp[c].s.end_unix_nano <= w->sp[p].s.end_unix_nano);
    /* W3C propagation over HTTP: the server span's parent is the client span */
    assert_true(w->sp[server].s.has_parent);
    assert_memory_equal(w->sp[server].s.parent_span_id, w->sp[client].s.span_id, 8);
    assert_memory_equal(w->sp[server].s.trace_id, w->sp[client].s.trace_id, 16);
    assert_int_equal(w->sp[server].s.kind, EV_ACTIVITY_SERVER);
    assert_string_equal(w->sp[client].name, "GET");
    assert_string_equal(w->sp[client].op, "System.Net.Http.HttpRequestOut");
    ev_activity_free(a);
    free(w);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_activity_spans),
        cmocka_unit_test(test_ev_activity_hostile),
        cmocka_unit_test(test_ev_activity_bounds),
        cmocka_unit_test(test_ev_activity_long_strings),
        cmocka_unit_test(test_ev_activity_share),
        cmocka_unit_test(test_ev_activity_filter_specs),
        cmocka_unit_test(test_ev_activity_real_capture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
