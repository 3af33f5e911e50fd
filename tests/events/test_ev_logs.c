/* SPDX-License-Identifier: MIT */
/*
 * events/ev_logs: Microsoft-Extensions-Logging events to log records (docs/events.md §4.3) and the
 * three /logs formats (api.md §6). Synthetic V4 streams written byte by byte, with activity ids in
 * uncompressed and header-compressed blobs, fed whole and in small chunks; and a real capture of
 * the test app (tests/fixtures/events/README.md, logs.nettrace).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ev_logs.h"
#include "fixture.h"
#include "membudget.h"
#include "ntw.h"
#include "wbuf.h"

#define MEL           "Microsoft-Extensions-Logging"
#define NETTRACE_SKIP 102 /* damage only after the preamble (docs/nettrace.md §2.3) */

enum { MD_FMT = 1, MD_JSON = 2, MD_START = 3, MD_STOP = 4, MD_OTHER = 5 };

static void md_def(struct nt *t, uint32_t id, const char *provider, const char *name,
                   const char *const *fields, const uint32_t *codes, size_t n)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, provider);
    wb_u32(&w, id + 100);
    wb_wstr(&w, name);
    wb_le(&w, 0xC, 8);
    wb_u32(&w, 0);
    wb_u32(&w, 0);
    wb_u32(&w, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        wb_u32(&w, codes[k]);
        wb_wstr(&w, fields[k]);
    }
    bool c = t->compressed;
    t->compressed = false;
    nt_blob(t, 0, 0, 0, 0, &w);
    t->compressed = c;
    free(w.b);
}

static const char *const fmt_f[] = {"Level",           "FactoryID",      "LoggerName",
                                    "EventId",         "EventName",      "FormattedMessage",
                                    "ActivityTraceId", "ActivitySpanId", "ActivityTraceFlags"};
static const uint32_t fmt_c[] = {9, 9, 18, 9, 18, 18, 18, 18, 18};
static const char *const json_f[] = {"Level",          "FactoryID",         "LoggerName",
                                     "EventId",        "EventName",         "ExceptionJson",
                                     "ArgumentsJson",  "FormattedMessage",  "ActivityTraceId",
                                     "ActivitySpanId", "ActivityTraceFlags"};
static const uint32_t json_c[] = {9, 9, 18, 9, 18, 18, 18, 18, 18, 18, 18};
static const char *const start_f[] = {"ID", "FactoryID", "LoggerName", "ArgumentsJson"};
static const uint32_t start_c[] = {9, 9, 18, 18};
static const char *const stop_f[] = {"ID", "FactoryID", "LoggerName"};
static const uint32_t stop_c[] = {9, 9, 18};

static void ev_formatted(struct nt *t, int64_t ts, const char *msg)
{
    struct wb p = {0};
    wb_u32(&p, 2);
    wb_u32(&p, 1);
    wb_wstr(&p, "Demo.Category");
    wb_u32(&p, 7);
    wb_wstr(&p, "Ev7");
    wb_wstr(&p, msg);
    wb_wstr(&p, "");
    wb_wstr(&p, "");
    wb_wstr(&p, "");
    nt_blob(t, MD_FMT, ts, 0, 0, &p);
    free(p.b);
}

static void ev_json(struct nt *t, int64_t ts, unsigned act, int level, const char *cat,
                    const char *name, const char *exc, const char *args)
{
    struct wb p = {0};
    wb_u32(&p, (uint32_t)level);
    wb_u32(&p, 1);
    wb_wstr(&p, cat);
    wb_u32(&p, 7);
    wb_wstr(&p, name);
    wb_wstr(&p, exc);
    wb_wstr(&p, args);
    wb_wstr(&p, "ignored");
    wb_wstr(&p, "");
    wb_wstr(&p, "");
    wb_wstr(&p, "");
    nt_blob(t, MD_JSON, ts, act, 0, &p);
    free(p.b);
}

/* A scope's start or stop at timestamp ts. */
static void ev_scope_at(struct nt *t, int64_t ts, bool start, unsigned act, unsigned rel,
                        const char *args)
{
    struct wb p = {0};
    wb_u32(&p, act);
    wb_u32(&p, 1);
    wb_wstr(&p, "Demo.Category");
    if (start) {
        wb_wstr(&p, args);
    }
    nt_blob(t, start ? MD_START : MD_STOP, ts, act, rel, &p);
    free(p.b);
}

static void ev_scope(struct nt *t, bool start, unsigned act, unsigned rel, const char *args)
{
    ev_scope_at(t, SYNC_QPC, start, act, rel, args);
}

#define TS(sec) (SYNC_QPC + (int64_t)(sec)*QPC_FREQ)

static uint8_t *synthetic(size_t *n, bool compressed)
{
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_FMT, MEL, "FormattedMessage", fmt_f, fmt_c, 9);
    md_def(&t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    md_def(&t, MD_START, MEL, "ActivityJsonStart", start_f, start_c, 4);
    md_def(&t, MD_STOP, MEL, "ActivityJsonStop", stop_f, stop_c, 3);
    md_def(&t, MD_OTHER, "Other", "MessageJson", json_f, json_c, 11);
    nt_block(&t, "MetadataBlock", false);
    t.compressed = compressed;
    const char *evb = "EventBlock";
    ev_scope(&t, true, 0x101, 0, "{\"Id\":\"31\",\"{OriginalFormat}\":\"Scope {Id}\"}");
    nt_block(&t, evb, compressed);
    ev_scope(&t, true, 0x102, 0x101,
             "{\"N\":5,\"B\":true,\"Z\":null,\"Nested\":{\"x\":[1,\"}\"]},\"{OriginalFormat}\":"
             "\"Inner\"}");
    nt_block(&t, evb, compressed);
    ev_formatted(&t, TS(1), "Hello world #31");
    nt_block(&t, evb, compressed);
    ev_json(&t, TS(2), 0x102, 2, "Demo.Category", "Ev7", "{}",
            "{\"Name\":\"world\",\"N\":\"31\",\"{OriginalFormat}\":\"Hello {Name} #{N}\"}");
    nt_block(&t, evb, compressed);
    ev_scope_at(&t, TS(2) + 1, false, 0x102, 0, NULL); /* after the record inside it */
    nt_block(&t, evb, compressed);
    ev_scope_at(&t, TS(2) + 2, false, 0x101, 0, NULL);
    nt_block(&t, evb, compressed);
    ev_formatted(&t, TS(3), "no template");
    nt_block(&t, evb, compressed);
    ev_json(&t, TS(3), 0x102, 4, "Other.Cat", "",
            "{\"TypeName\":\"System.InvalidOperationException\",\"Message\":\"boom\","
            "\"HResult\":\"-2146233079\",\"VerboseMessage\":\"System.InvalidOperationException: "
            "boom\\n   at X.Y()\"}",
            "{\"a\":\"b\\\"q\\u00e9\\ud83d\\ude00\"}");
    nt_block(&t, evb, compressed);
    ev_json(&t, TS(4), 0, 1, "Demo.Category", "Ev7", "{}", "");   /* dropped */
    ev_json(&t, TS(4), 0, 1, "Demo.Category", "Ev7", "{}", "{}"); /* dropped */
    nt_block(&t, evb, compressed);
    struct wb p = {0};
    wb_u32(&p, 2);
    nt_blob(&t, MD_OTHER, TS(4), 0, 0, &p); /* another provider: ignored (and malformed) */
    free(p.b);
    nt_block(&t, evb, compressed);
    ev_json(&t, TS(5), 0, 1, "Demo.Category", "", "{}",
            "{\"Text\":\"line1\\r\\nline2\",\"{OriginalFormat}\":\"{{x}} {Text} {Missing}\"}");
    nt_block(&t, evb, compressed);
    wb_u8(&t.out, 1);
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

struct seen {
    struct buf out[3];
    int records;
};

static void on_record(void *ud, const struct ev_log_record *r)
{
    struct seen *s = ud;
    s->records++;
    for (int f = 0; f < 3; f++) {
        assert_int_equal(ev_logs_format_record(r, (enum ev_logs_format)f, &s->out[f]), 0);
    }
}

static const char expected_ndjson[] =
    "{\"Timestamp\":\"2025-01-02 03:04:07Z\",\"LogLevel\":\"Information\",\"EventId\":7,"
    "\"EventName\":\"Ev7\",\"Category\":\"Demo.Category\",\"Message\":\"Hello world #31\","
    "\"State\":{\"Message\":\"Hello world #31\",\"Name\":\"world\",\"N\":\"31\","
    "\"{OriginalFormat}\":\"Hello {Name} #{N}\"},\"Scopes\":[{\"Id\":\"31\",\"{OriginalFormat}\":"
    "\"Scope {Id}\"},{\"N\":5,\"B\":true,\"Z\":null,\"{OriginalFormat}\":\"Inner\"}]}\n"
    "{\"Timestamp\":\"2025-01-02 03:04:08Z\",\"LogLevel\":\"Error\",\"EventId\":7,"
    "\"EventName\":\"\",\"Category\":\"Other.Cat\",\"Message\":\"no template\","
    "\"Exception\":\"System.InvalidOperationException: boom\\n   at X.Y()\","
    "\"State\":{\"Message\":\"no template\",\"a\":\"b\\\"q\xc3\xa9\xf0\x9f\x98\x80\"}}\n"
    "{\"Timestamp\":\"2025-01-02 03:04:10Z\",\"LogLevel\":\"Debug\",\"EventId\":7,"
    "\"EventName\":\"\",\"Category\":\"Demo.Category\",\"Message\":\"{x} line1\\r\\nline2 "
    "{Missing}\",\"State\":{\"Message\":\"{x} line1\\r\\nline2 {Missing}\",\"Text\":"
    "\"line1\\r\\nline2\",\"{OriginalFormat}\":\"{{x}} {Text} {Missing}\"}}\n";

static const char expected_plain[] =
    "2025-01-02 03:04:07Z info: Demo.Category[7][Ev7]\n"
    "      => Id:31, {OriginalFormat}:Scope {Id} => N:5, B:True, Z:, {OriginalFormat}:Inner\n"
    "      Hello world #31\n"
    "2025-01-02 03:04:08Z fail: Other.Cat[7]\n"
    "      no template\n"
    "      System.InvalidOperationException: boom\n"
    "         at X.Y()\n"
    "2025-01-02 03:04:10Z dbug: Demo.Category[7]\n"
    "      {x} line1\n"
    "      line2 {Missing}\n";

static void run_case(bool compressed, size_t chunk)
{
    size_t n;
    uint8_t *p = synthetic(&n, compressed);
    struct seen s;
    memset(&s, 0, sizeof(s));
    for (int f = 0; f < 3; f++) {
        buf_init(&s.out[f], 0);
    }
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
    for (size_t off = 0; off < n;) {
        size_t k = chunk == 0 || n - off < chunk ? n - off : chunk;
        assert_int_equal(ev_logs_feed(l, p + off, k), 0);
        off += k;
    }
    assert_null(ev_logs_error(l));
    struct ev_logs_stats st;
    ev_logs_get_stats(l, &st);
    assert_int_equal(s.records, 3);
    assert_int_equal(st.records, 3);
    assert_int_equal(st.dropped, 2);
    assert_int_equal(st.scopes, 0);
    assert_int_equal(st.mel_metadata, 4);
    assert_string_equal(buf_cstr(&s.out[EV_LOGS_NDJSON]), expected_ndjson);
    assert_string_equal(buf_cstr(&s.out[EV_LOGS_PLAIN]), expected_plain);
    /* json-seq: the NDJSON records, each after a 0x1E */
    struct buf want;
    buf_init(&want, 0);
    for (const char *q = expected_ndjson; *q != '\0';) {
        const char *nl = strchr(q, '\n');
        assert_int_equal(buf_append(&want, "\x1e", 1), 0);
        assert_int_equal(buf_append(&want, q, (size_t)(nl - q) + 1), 0);
        q = nl + 1;
    }
    assert_string_equal(buf_cstr(&s.out[EV_LOGS_JSON_SEQ]), buf_cstr(&want));
    buf_fini(&want);
    ev_logs_free(l);
    for (int f = 0; f < 3; f++) {
        buf_fini(&s.out[f]);
    }
    free(p);
}

static void test_ev_logs_uncompressed(void **state)
{
    (void)state;
    run_case(false, 0);
    run_case(false, 1);
    run_case(false, 7);
}

static void test_ev_logs_compressed(void **state)
{
    (void)state;
    run_case(true, 0);
    run_case(true, 3);
}

/* Scopes over the cap are ignored; stopping them frees everything (ASan checks the rest). */
static void test_ev_logs_scope_cap(void **state)
{
    (void)state;
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_START, MEL, "ActivityJsonStart", start_f, start_c, 4);
    md_def(&t, MD_STOP, MEL, "ActivityJsonStop", stop_f, stop_c, 3);
    nt_block(&t, "MetadataBlock", false);
    for (unsigned k = 1; k <= EV_LOGS_MAX_SCOPES + 50; k++) {
        ev_scope(&t, true, k, k - 1, "{\"k\":\"v\"}");
        if (k % 100 == 0) {
            nt_block(&t, "EventBlock", false);
        }
    }
    nt_block(&t, "EventBlock", false);
    struct seen s;
    memset(&s, 0, sizeof(s));
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
    assert_int_equal(ev_logs_feed(l, t.out.b, t.out.n), 0);
    struct ev_logs_stats st;
    ev_logs_get_stats(l, &st);
    assert_int_equal(st.scopes, EV_LOGS_MAX_SCOPES);
    assert_int_equal(st.skipped, 50);
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

/* A string of n copies of c (the caller frees it). */
static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);
    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/*
 * A hostile runtime opens scopes and never closes them, each with two 30,000-byte values (about
 * 60 KB held per scope, 3.9 MB for 64 of them without a budget): against a 1 MiB share the decoder
 * holds at most the share, drops the scopes that do not fit and counts them, still delivers every
 * record (inside a kept scope with it, inside a dropped one without it), and gives everything
 * back when freed.
 */
static void test_ev_logs_budget(void **state)
{
    (void)state;
    enum { SCOPES = 64, VALUE = 30000 };
    char *big = repeat('x', VALUE);
    size_t alen = 2 * VALUE + 64;
    char *args = malloc(alen);
    assert_non_null(args);
    int len = snprintf(args, alen, "{\"A\":\"%s\",\"B\":\"%s\"}", big, big);
    assert_true(len > 0 && (size_t)len < alen);
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    md_def(&t, MD_START, MEL, "ActivityJsonStart", start_f, start_c, 4);
    md_def(&t, MD_STOP, MEL, "ActivityJsonStop", stop_f, stop_c, 3);
    nt_block(&t, "MetadataBlock", false);
    for (unsigned k = 1; k <= SCOPES; k++) {
        ev_scope(&t, true, k, k - 1, args); /* never stopped */
        nt_block(&t, "EventBlock", false);
        ev_json(&t, TS(1), k, 2, "Demo.Category", "Ev7", "{}",
                "{\"{OriginalFormat}\":\"in a scope\"}");
        nt_block(&t, "EventBlock", false);
    }
    struct mb_share share;
    mb_share_init(&share, "logs test", 1024 * 1024);
    struct seen s;
    memset(&s, 0, sizeof(s));
    for (int f = 0; f < 3; f++) {
        buf_init(&s.out[f], 0);
    }
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
    assert_int_equal(ev_logs_set_share(l, &share), 0);
    assert_int_equal(ev_logs_feed(l, t.out.b, t.out.n), 0);
    assert_null(ev_logs_error(l));
    struct ev_logs_stats st;
    ev_logs_get_stats(l, &st);
    /* every record delivered, the stream never failed */
    assert_int_equal(s.records, SCOPES);
    assert_int_equal(st.records, SCOPES);
    /* the share's cap held; what did not fit was dropped and counted */
    assert_true(atomic_load(&share.peak) <= share.cap);
    assert_true(atomic_load(&share.peak) > share.cap / 2);
    assert_true(st.scopes > 0 && st.scopes < SCOPES);
    assert_int_equal(st.scopes + st.scopes_dropped, SCOPES);
    assert_true(st.budget_dropped >= st.scopes_dropped);
    assert_int_equal(st.held, atomic_load(&share.used));
    assert_true(atomic_load(&share.refused) >= st.scopes_dropped);
    /* the first record is inside its (kept) scope chain, the last one's scope was dropped */
    const char *nd = buf_cstr(&s.out[EV_LOGS_NDJSON]);
    const char *first_nl = strchr(nd, '\n');
    assert_non_null(first_nl);
    assert_non_null(strstr(nd, "\"Scopes\":[{\"A\":\"xxxx"));
    assert_true(strstr(nd, "\"Scopes\"") < first_nl);
    const char *last = nd + strlen(nd) - 2;
    while (last > nd && last[-1] != '\n') {
        last--;
    }
    assert_null(strstr(last, "\"Scopes\""));
    assert_non_null(strstr(last, "\"Message\":\"in a scope\""));
    printf("budget: %llu scopes kept, %llu dropped, peak %llu of %llu bytes\n",
           (unsigned long long)st.scopes, (unsigned long long)st.scopes_dropped,
           (unsigned long long)atomic_load(&share.peak), (unsigned long long)share.cap);
    /* a share cannot be set once something is charged */
    assert_int_equal(ev_logs_set_share(l, NULL), AGENT_E_INVAL);
    ev_logs_free(l);
    assert_int_equal(atomic_load(&share.used), 0);
    mb_share_fini(&share);
    for (int f = 0; f < 3; f++) {
        buf_fini(&s.out[f]);
    }
    free(t.out.b);
    free(t.blk.b);
    free(args);
    free(big);
}

static void test_ev_logs_levels(void **state)
{
    (void)state;
    assert_int_equal(ev_log_level_parse("information"), 2);
    assert_int_equal(ev_log_level_parse("TRACE"), 0);
    assert_int_equal(ev_log_level_parse("5"), 5);
    assert_int_equal(ev_log_level_parse("Info"), -1);
    assert_int_equal(ev_log_level_parse(""), -1);
    assert_string_equal(ev_log_level_name(4), "Error");
    assert_null(ev_log_level_name(7));
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(NULL, on_record, NULL), AGENT_E_INVAL);
    assert_int_equal(ev_logs_new(&l, NULL, NULL), AGENT_E_INVAL);
    ev_logs_free(NULL);
}

/* ---- a real capture (tests/fixtures/events/README.md, logs.nettrace) ------------------------ */

static void check_real(const char *nd)
{
    /* The five records of the capture, in order, each on its line. */
    static const char *const want[] = {
        "\"LogLevel\":\"Debug\",\"EventId\":1,\"EventName\":\"Command\",\"Category\":"
        "\"TestApp.Commands\",\"Message\":\"dbg-fx\",\"State\":{\"Message\":\"dbg-fx\",\"Text\":"
        "\"dbg-fx\",\"{OriginalFormat}\":\"{Text}\"}}",
        "\"LogLevel\":\"Information\",\"EventId\":1,\"EventName\":\"Command\"",
        "\"LogLevel\":\"Warning\",\"EventId\":3,\"EventName\":\"Categorized\",\"Category\":"
        "\"Other.Cat\",\"Message\":\"w-fx\"",
        "\"Message\":\"Scoped sc-fx n=42\",\"State\":{\"Message\":\"Scoped sc-fx n=42\",\"Text\":"
        "\"sc-fx\",\"N\":\"42\",\"{OriginalFormat}\":\"Scoped {Text} "
        "n={N}\"},\"Scopes\":[{\"ScopeId\":"
        "\"77\",\"{OriginalFormat}\":\"Outer {ScopeId}\"},{\"Depth\":\"2\",\"{OriginalFormat}\":"
        "\"Inner {Depth}\"}]}",
        "\"LogLevel\":\"Error\",\"EventId\":5,\"EventName\":\"Failed\",\"Category\":"
        "\"TestApp.Commands\",\"Message\":\"Failed ex-fx\",\"Exception\":"
        "\"System.InvalidOperationException: boom ex-fx\\n   at TestApp.Program.",
    };
    const char *line = nd;
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        const char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_memory_equal(line, "{\"Timestamp\":\"20", 16);
        char *copy = strndup(line, (size_t)(nl - line));
        assert_non_null(copy);
        if (strstr(copy, want[k]) == NULL) {
            fail_msg("record %zu: %s\nwants: %s", k, copy, want[k]);
        }
        free(copy);
        line = nl + 1;
    }
    assert_string_equal(line, "");
}

static void test_ev_logs_real(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("events", "logs.nettrace", &n);
    static const size_t chunks[] = {0, 1, 4096};
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        struct seen s;
        memset(&s, 0, sizeof(s));
        for (int f = 0; f < 3; f++) {
            buf_init(&s.out[f], 0);
        }
        struct ev_logs *l = NULL;
        assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
        for (size_t off = 0; off < n;) {
            size_t k = chunks[c] == 0 || n - off < chunks[c] ? n - off : chunks[c];
            assert_int_equal(ev_logs_feed(l, p + off, k), 0);
            off += k;
        }
        struct ev_logs_stats st;
        ev_logs_get_stats(l, &st);
        assert_int_equal(st.records, 5);
        assert_int_equal(st.scopes, 0);
        assert_int_equal(st.skipped, 0);
        check_real(buf_cstr(&s.out[EV_LOGS_NDJSON]));
        const char *plain = buf_cstr(&s.out[EV_LOGS_PLAIN]);
        assert_null(strstr(plain, " crit: "));
        assert_non_null(strstr(plain, "Z info: TestApp.Commands[4][Scoped]\n"
                                      "      => ScopeId:77, {OriginalFormat}:Outer {ScopeId} => "
                                      "Depth:2, {OriginalFormat}:Inner {Depth}\n"
                                      "      Scoped sc-fx n=42\n"));
        ev_logs_free(l);
        for (int f = 0; f < 3; f++) {
            buf_fini(&s.out[f]);
        }
    }
    free(p);
}

/* True when s[0..n) is valid UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool utf8_valid(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        if (len == 0 || n - i < len) {
            return false;
        }
        uint32_t cp = len == 1 ? c : (uint32_t)(c & (0x7F >> len));
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = cp << 6 | (s[i + k] & 0x3F);
        }
        static const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

/* The capture with random bytes changed: never a crash or a leak (ASan), always valid UTF-8. */
/* The trace context and the exception's parts of a MessageJson event (events.md §4.2). */
struct traced {
    int n;
    struct ev_log_record r[3];
    char exc_type[64];
    char exc_msg[64];
};

static void on_traced(void *ud, const struct ev_log_record *r)
{
    struct traced *t = ud;
    assert_true(t->n < 3);
    t->r[t->n] = *r;
    if (r->exception_type != NULL) {
        snprintf(t->exc_type, sizeof(t->exc_type), "%s", r->exception_type);
        snprintf(t->exc_msg, sizeof(t->exc_msg), "%s", r->exception_message);
    }
    t->n++;
}

static void ev_json_full(struct nt *t, const char *exc, const char *args, const char *formatted,
                         const char *tid, const char *sid, const char *flags)
{
    struct wb p = {0};
    wb_u32(&p, 4);
    wb_u32(&p, 1);
    wb_wstr(&p, "Demo.Category");
    wb_u32(&p, 7);
    wb_wstr(&p, "Ev7");
    wb_wstr(&p, exc);
    wb_wstr(&p, args);
    wb_wstr(&p, formatted);
    wb_wstr(&p, tid);
    wb_wstr(&p, sid);
    wb_wstr(&p, flags);
    nt_blob(t, MD_JSON, TS(1), 0, 0, &p);
    free(p.b);
}

/* A stream whose one event kind is MessageJson: its metadata written. */
static void json_only_begin(struct nt *t)
{
    nt_begin(t);
    md_def(t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    nt_block(t, "MetadataBlock", false);
}

/* Its events' block closed, the whole stream fed to a new decoder (the caller frees it). */
static struct ev_logs *json_only_feed(struct nt *t, ev_logs_record_cb cb, void *ud)
{
    nt_block(t, "EventBlock", false);
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, cb, ud), 0);
    assert_int_equal(ev_logs_feed(l, t->out.b, t->out.n), 0);
    return l;
}

static void ev_json_traced(struct nt *t, const char *exc, const char *tid, const char *sid,
                           const char *flags)
{
    ev_json_full(t, exc, "{\"{OriginalFormat}\":\"boom\"}", "boom", tid, sid, flags);
}

static void test_ev_logs_trace_context(void **state)
{
    (void)state;
    struct nt t;
    json_only_begin(&t);
    ev_json_traced(&t,
                   "{\"TypeName\":\"System.InvalidOperationException\",\"Message\":\"bad\","
                   "\"HResult\":\"-2146233079\",\"VerboseMessage\":\"System.Invalid"
                   "OperationException: bad\"}",
                   "0af7651916cd43dd8448eb211c80319c", "B7AD6B7169203331", "1");
    ev_json_traced(&t, "{}", "", "", "");
    ev_json_traced(&t, "{}", "0af7651916cd43dd8448eb211c80319", "b7ad6b7169203331", "0");
    struct traced seen = {0};
    struct ev_logs *l = json_only_feed(&t, on_traced, &seen);
    assert_int_equal(seen.n, 3);
    const uint8_t tid[16] = {0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd,
                             0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c};
    const uint8_t sid[8] = {0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31};
    assert_true(seen.r[0].has_trace);
    assert_memory_equal(seen.r[0].trace_id, tid, 16);
    assert_memory_equal(seen.r[0].span_id, sid, 8);
    assert_int_equal(seen.r[0].trace_flags, 1);
    assert_string_equal(seen.exc_type, "System.InvalidOperationException");
    assert_string_equal(seen.exc_msg, "bad");
    assert_false(seen.r[1].has_trace); /* empty activity fields: no Activity */
    assert_null(seen.r[1].exception_type);
    assert_false(seen.r[2].has_trace); /* a trace id one digit short */
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

/* ---- scopes through other providers' activities --------------------------------------------- */

enum { MD_AS_START = 6, MD_AS_STOP = 7 };

static const char *const as_f[] = {"SourceName", "ActivityName"};
static const uint32_t as_c[] = {18, 18};

/* DiagnosticSource's ActivityStart/ActivityStop: an EventSource Start/Stop of another provider. */
static void ev_as(struct nt *t, bool start, unsigned act, unsigned rel)
{
    struct wb p = {0};
    wb_wstr(&p, "Demo.Source");
    wb_wstr(&p, "demo.span");
    nt_blob(t, start ? MD_AS_START : MD_AS_STOP, SYNC_QPC, act, rel, &p);
    free(p.b);
}

struct nested {
    int n;
    size_t nscopes[8];
    char first_key[8][32]; /* the outermost scope's first key */
};

static void on_nested(void *ud, const struct ev_log_record *r)
{
    struct nested *s = ud;
    assert_true(s->n < 8);
    s->nscopes[s->n] = r->nscopes;
    if (r->nscopes > 0 && r->scopes[0].npairs > 0) {
        snprintf(s->first_key[s->n], sizeof(s->first_key[0]), "%s", r->scopes[0].pairs[0].key);
    }
    s->n++;
}

/*
 * The id chain of an ASP.NET Core request whose handler logs inside ActivitySource activities, as
 * the runtime's ActivityTracker numbers it when DiagnosticSource's ActivityStart events are on in
 * the session (captured from tests/otel/app): each Start of any provider opens an activity id
 * nested under the current one, so a record logged inside an Activity carries the Activity's
 * EventSource id, whose related id leads back to the logging scopes. (The writer's guids keep 16
 * bits of an id: the ids here are distinct in those.)
 */
static void test_ev_logs_nested_activities(void **state)
{
    (void)state;
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    md_def(&t, MD_START, MEL, "ActivityJsonStart", start_f, start_c, 4);
    md_def(&t, MD_STOP, MEL, "ActivityJsonStop", stop_f, stop_c, 3);
    md_def(&t, MD_AS_START, "Microsoft-Diagnostics-DiagnosticSource", "ActivityStart", as_f, as_c,
           2);
    md_def(&t, MD_AS_STOP, "Microsoft-Diagnostics-DiagnosticSource", "ActivityStop", as_f, as_c, 2);
    nt_block(&t, "MetadataBlock", false);
    const char *rec = "{\"{OriginalFormat}\":\"work\"}";
    ev_scope(&t, true, 0x101, 0, "{\"ConnectionId\":\"c1\"}");  /* Kestrel's connection scope */
    ev_as(&t, true, 0x201, 0x101);                              /* HttpRequestIn */
    ev_scope(&t, true, 0x301, 0x201, "{\"RequestId\":\"r1\"}"); /* the hosting scope */
    ev_scope(&t, true, 0x401, 0x301, "{\"Tenant\":\"contoso\"}");
    ev_as(&t, true, 0x501, 0x401); /* work.parent */
    ev_json(&t, TS(1), 0x501, 2, "Demo.Category", "WorkStarted", "{}", rec);
    ev_as(&t, true, 0x601, 0x501); /* work.child, started and stopped */
    ev_json(&t, TS(1), 0x601, 2, "Demo.Category", "InChild", "{}", rec);
    ev_as(&t, false, 0x601, 0);
    ev_json(&t, TS(2), 0x501, 4, "Demo.Category", "WorkFailed", "{}", rec);
    /* a Start the tracker did not nest carries the scope's own id: its Stop leaves the scope */
    ev_as(&t, true, 0x401, 0);
    ev_as(&t, false, 0x401, 0);
    ev_json(&t, TS(2), 0x401, 2, "Demo.Category", "InScope", "{}", rec);
    ev_as(&t, true, 0x701, 0x7ff); /* under nothing known: no scopes */
    ev_json(&t, TS(2), 0x701, 2, "Demo.Category", "Elsewhere", "{}", rec);
    nt_block(&t, "EventBlock", false);
    ev_as(&t, false, 0x501, 0);
    ev_json(&t, TS(3), 0x501, 2, "Demo.Category", "AfterStop", "{}", rec); /* link gone */
    ev_scope(&t, false, 0x401, 0, NULL);
    ev_scope(&t, false, 0x301, 0, NULL);
    ev_as(&t, false, 0x201, 0);
    ev_scope(&t, false, 0x101, 0, NULL);
    ev_as(&t, false, 0x701, 0);
    nt_block(&t, "EventBlock", false);
    struct nested seen = {0};
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_nested, &seen), 0);
    assert_int_equal(ev_logs_feed(l, t.out.b, t.out.n), 0);
    assert_null(ev_logs_error(l));
    assert_int_equal(seen.n, 6);
    for (int k = 0; k < 4; k++) { /* WorkStarted, InChild, WorkFailed, InScope: all three */
        assert_int_equal(seen.nscopes[k], 3);
        assert_string_equal(seen.first_key[k], "ConnectionId");
    }
    assert_int_equal(seen.nscopes[4], 0); /* Elsewhere */
    assert_int_equal(seen.nscopes[5], 0); /* AfterStop */
    struct ev_logs_stats st;
    ev_logs_get_stats(l, &st);
    assert_int_equal(st.scopes, 0); /* every scope released once its Stop and its links' came */
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

/* A session with keyword 0x8 alone (the OTel session's): no FormattedMessage events. A record
 * without a template keeps its text from MessageJson's own FormattedMessage field; one with a
 * template is rendered from it as always. */
struct texts {
    int n;
    char msg[2][64];
};

static void on_text(void *ud, const struct ev_log_record *r)
{
    struct texts *t = ud;
    assert_true(t->n < 2);
    snprintf(t->msg[t->n], sizeof(t->msg[t->n]), "%s", r->message);
    t->n++;
}

static void test_ev_logs_json_only(void **state)
{
    (void)state;
    struct nt t;
    json_only_begin(&t);
    ev_json_full(&t, "{}", "{\"Order\":\"17\"}", "order 17 placed", "", "", "");
    ev_json_full(&t, "{}", "{\"N\":\"3\",\"{OriginalFormat}\":\"n={N}\"}", "not this", "", "", "");
    struct texts seen = {0};
    struct ev_logs *l = json_only_feed(&t, on_text, &seen);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.msg[0], "order 17 placed");
    assert_string_equal(seen.msg[1], "n=3");
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

static void test_ev_logs_damage(void **state)
{
    (void)state;
    size_t n;
    uint8_t *orig = fixture_read("events", "logs.nettrace", &n);
    uint8_t *p = malloc(n);
    assert_non_null(p);
    uint32_t rng = 12345;
    for (int round = 0; round < 3000; round++) {
        memcpy(p, orig, n);
        int flips = 1 + round % 8;
        for (int k = 0; k < flips; k++) {
            rng = rng * 1103515245u + 12345u;
            size_t at = NETTRACE_SKIP + (rng >> 8) % (n - NETTRACE_SKIP);
            rng = rng * 1103515245u + 12345u;
            p[at] = (uint8_t)(rng >> 16);
        }
        struct seen s;
        memset(&s, 0, sizeof(s));
        for (int f = 0; f < 3; f++) {
            buf_init(&s.out[f], 0);
        }
        struct ev_logs *l = NULL;
        assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
        (void)ev_logs_feed(l, p, n);
        for (int f = 0; f < 3; f++) {
            assert_true(utf8_valid(buf_data(&s.out[f]), buf_size(&s.out[f])));
            buf_fini(&s.out[f]);
        }
        ev_logs_free(l);
    }
    free(p);
    free(orig);
}

/*
 * The after-await case (events.md §4.4): thread A starts a scope and awaits; the continuation on
 * thread B logs inside it and stops it. The runtime writes B's run first (the record, the stop),
 * then A's (the start, older). Compressed headers without the sorted flag, as the runtime writes
 * all but the first event of a thread's run; where the stream stops decides what is known.
 */
static size_t after_await(struct nt *t, bool sp)
{
    nt_begin(t);
    md_def(t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    md_def(t, MD_START, MEL, "ActivityJsonStart", start_f, start_c, 4);
    md_def(t, MD_STOP, MEL, "ActivityJsonStop", stop_f, stop_c, 3);
    nt_block(t, "MetadataBlock", false);
    t->compressed = true;
    ev_json(t, TS(2), 0x101, 2, "Demo.Category", "AfterAwait", "{}",
            "{\"{OriginalFormat}\":\"after the await\"}");
    ev_scope_at(t, TS(3), false, 0x101, 0, NULL);
    nt_block(t, "EventBlock", true);
    ev_scope_at(t, TS(1), true, 0x101, 0, "{\"Order\":\"42\"}");
    nt_block(t, "EventBlock", true);
    size_t before_sp = t->out.n;
    if (sp) {
        nt_sp(t, TS(4));
    }
    return before_sp;
}

static void test_ev_logs_order_sequence_point(void **state)
{
    (void)state;
    struct nt t;
    size_t cut = after_await(&t, true);
    struct nested seen = {0};
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_nested, &seen), 0);
    assert_int_equal(ev_logs_feed(l, t.out.b, cut), 0);
    struct ev_logs_stats st;
    ev_logs_get_stats(l, &st);
    assert_int_equal(seen.n, 0); /* held: an older event may still come */
    assert_int_equal(st.ordering, 3);
    assert_int_equal(ev_logs_feed(l, t.out.b + cut, t.out.n - cut), 0); /* the sequence point */
    assert_null(ev_logs_error(l));
    assert_int_equal(seen.n, 1);
    assert_int_equal(seen.nscopes[0], 1);
    assert_string_equal(seen.first_key[0], "Order");
    ev_logs_get_stats(l, &st);
    assert_int_equal(st.ordering, 0);
    assert_int_equal(st.scopes, 0); /* the stop came after the start: nothing left behind */
    assert_int_equal(st.order_forced, 0);
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

/*
 * The sorted flag as the two header encodings carry it (nettrace.md §4.2): an uncompressed header
 * without bit 31 of its metadata id is sorted, so each event goes out as it comes; compressed
 * headers without 0x40 are not, so the records wait for the end tag.
 */
static void test_ev_logs_sorted_flag(void **state)
{
    (void)state;
    for (int compressed = 0; compressed < 2; compressed++) {
        size_t n;
        uint8_t *p = synthetic(&n, compressed != 0);
        struct seen s;
        memset(&s, 0, sizeof(s));
        for (int f = 0; f < 3; f++) {
            buf_init(&s.out[f], 0);
        }
        struct ev_logs *l = NULL;
        assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
        assert_int_equal(ev_logs_feed(l, p, n - 1), 0); /* all but the end tag */
        assert_int_equal(s.records, compressed ? 0 : 3);
        assert_int_equal(ev_logs_feed(l, p + n - 1, 1), 0);
        assert_int_equal(s.records, 3);
        ev_logs_free(l);
        for (int f = 0; f < 3; f++) {
            buf_fini(&s.out[f]);
        }
        free(p);
    }
}

/*
 * A record outside every scope (no activity ids) goes out as it comes while nothing is held; after
 * a held one it waits its turn, so one thread's records keep their order.
 */
static void test_ev_logs_order_no_scope(void **state)
{
    (void)state;
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    nt_block(&t, "MetadataBlock", false);
    t.compressed = true;
    ev_json(&t, TS(1), 0, 2, "Demo.Category", "Plain", "{}", "{\"{OriginalFormat}\":\"plain\"}");
    nt_block(&t, "EventBlock", true);
    size_t first = t.out.n;
    ev_json(&t, TS(2), 0x101, 2, "Demo.Category", "InScope", "{}", "{\"{OriginalFormat}\":\"in\"}");
    ev_json(&t, TS(3), 0, 2, "Demo.Category", "After", "{}", "{\"{OriginalFormat}\":\"after\"}");
    nt_block(&t, "EventBlock", true);
    struct nested seen = {0};
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_nested, &seen), 0);
    assert_int_equal(ev_logs_feed(l, t.out.b, first), 0);
    assert_int_equal(seen.n, 1); /* at once */
    assert_int_equal(ev_logs_feed(l, t.out.b + first, t.out.n - first), 0);
    assert_int_equal(seen.n, 1); /* both wait: the second may not pass the first */
    ev_logs_flush(l);
    assert_int_equal(seen.n, 3);
    ev_logs_free(l);
    free(t.out.b);
    free(t.blk.b);
}

/* The same stream released by a later event with the sorted flag, by the end tag, by ticks. */
static void test_ev_logs_order_release(void **state)
{
    (void)state;
    for (int how = 0; how < 3; how++) {
        struct nt t;
        (void)after_await(&t, false);
        if (how == 0) { /* the first event of the next run: nothing older follows it */
            t.sorted = true;
            ev_scope_at(&t, TS(5), false, 0x999, 0, NULL);
            nt_block(&t, "EventBlock", true);
        } else if (how == 1) {
            wb_u8(&t.out, 1);
        }
        struct nested seen = {0};
        struct ev_logs *l = NULL;
        assert_int_equal(ev_logs_new(&l, on_nested, &seen), 0);
        assert_int_equal(ev_logs_feed(l, t.out.b, t.out.n), 0);
        if (how == 2) {
            assert_int_equal(seen.n, 0);
            ev_logs_tick(l); /* bytes came since the last tick: more may follow */
            assert_int_equal(seen.n, 0);
            ev_logs_tick(l); /* a quiet interval: the runtime's flush is all here */
        }
        assert_int_equal(seen.n, 1);
        assert_int_equal(seen.nscopes[0], 1);
        struct ev_logs_stats st;
        ev_logs_get_stats(l, &st);
        assert_int_equal(st.scopes, 0);
        ev_logs_free(l);
        free(t.out.b);
        free(t.blk.b);
    }
}

/*
 * Hostile: endless records under ids no scope has, never a sorted flag nor a sequence point. The
 * held events stay within their count and the share's cap; every record is delivered, oldest
 * first, and the ones pushed out early are counted.
 */
static void test_ev_logs_order_bounded(void **state)
{
    (void)state;
    enum { RECORDS = 3 * EV_LOGS_MAX_HELD };
    struct nt t;
    nt_begin(&t);
    md_def(&t, MD_JSON, MEL, "MessageJson", json_f, json_c, 11);
    nt_block(&t, "MetadataBlock", false);
    t.compressed = true;
    for (unsigned k = 0; k < RECORDS; k++) {
        /* timestamps going back and forth within each block */
        ev_json(&t, TS(10) + (int64_t)(k % 64 == 0 ? k + 32 : k), 0x1000 + k, 2, "Demo.Category",
                "Ev", "{}", "{\"{OriginalFormat}\":\"r\"}");
        if (k % 64 == 63) {
            nt_block(&t, "EventBlock", true);
        }
    }
    struct mb_share share;
    mb_share_init(&share, "order test", 256 * 1024);
    struct seen s;
    memset(&s, 0, sizeof(s));
    for (int f = 0; f < 3; f++) {
        buf_init(&s.out[f], 0);
    }
    struct ev_logs *l = NULL;
    assert_int_equal(ev_logs_new(&l, on_record, &s), 0);
    assert_int_equal(ev_logs_set_share(l, &share), 0);
    struct ev_logs_stats st;
    for (size_t off = 0; off < t.out.n; off += 4096) {
        size_t k = t.out.n - off < 4096 ? t.out.n - off : 4096;
        assert_int_equal(ev_logs_feed(l, t.out.b + off, k), 0);
        ev_logs_get_stats(l, &st);
        assert_true(st.ordering <= EV_LOGS_MAX_HELD);
        assert_true(atomic_load(&share.peak) <= share.cap);
    }
    ev_logs_get_stats(l, &st);
    assert_true(st.order_forced > 0);
    assert_true(st.ordering > 0);
    ev_logs_flush(l);
    ev_logs_get_stats(l, &st);
    assert_int_equal(st.ordering, 0);
    assert_int_equal(s.records, RECORDS);
    assert_int_equal(st.held, atomic_load(&share.used));
    assert_null(ev_logs_error(l));
    ev_logs_free(l);
    assert_int_equal(atomic_load(&share.used), 0);
    for (int f = 0; f < 3; f++) {
        buf_fini(&s.out[f]);
    }
    free(t.out.b);
    free(t.blk.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_logs_uncompressed),
        cmocka_unit_test(test_ev_logs_compressed),
        cmocka_unit_test(test_ev_logs_scope_cap),
        cmocka_unit_test(test_ev_logs_levels),
        cmocka_unit_test(test_ev_logs_real),
        cmocka_unit_test(test_ev_logs_damage),
        cmocka_unit_test(test_ev_logs_budget),
        cmocka_unit_test(test_ev_logs_trace_context),
        cmocka_unit_test(test_ev_logs_nested_activities),
        cmocka_unit_test(test_ev_logs_json_only),
        cmocka_unit_test(test_ev_logs_sorted_flag),
        cmocka_unit_test(test_ev_logs_order_sequence_point),
        cmocka_unit_test(test_ev_logs_order_no_scope),
        cmocka_unit_test(test_ev_logs_order_release),
        cmocka_unit_test(test_ev_logs_order_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
