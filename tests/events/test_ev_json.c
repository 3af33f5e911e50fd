/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ev_json.h"
#include "ev_native.h"
#include "fixture.h"
#include "membudget.h"
#include "ntw.h"
#include "wbuf.h"

/*
 * events/ev_json.c over the real fixtures (every line parses as JSON, is valid UTF-8, and the
 * counts per provider/event equal the checker's) and over hand-built payloads (types, UTF-16
 * repair, times).
 */

/* ---- helpers -------------------------------------------------------------------------------- */

static bool utf8_valid(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len = c < 0x80             ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        if (len == 0 || i + len > n || (len == 2 && c < 0xC2)) {
            return false;
        }
        uint32_t cp = c & (0x7F >> len);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (s[i + k] & 0x3F);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
            (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

#define MAX_KEYS 256

struct tally {
    char key[MAX_KEYS][160]; /* provider '\t' id or provider '\n' name */
    uint64_t count[MAX_KEYS];
    size_t n;
    uint64_t lines;
    uint64_t stack_lines; /* lines with a "stack" array */
    struct buf all;       /* every line, for comparisons between chunkings */
};

static void tally_add(struct tally *t, const char *key)
{
    for (size_t k = 0; k < t->n; k++) {
        if (strcmp(t->key[k], key) == 0) {
            t->count[k]++;
            return;
        }
    }
    assert_true(t->n < MAX_KEYS);
    assert_true(strlen(key) < sizeof(t->key[0]));
    memcpy(t->key[t->n], key, strlen(key) + 1);
    t->count[t->n++] = 1;
}

static int on_line(void *ud, const char *line, size_t len)
{
    struct tally *t = ud;
    assert_true(len >= 3);
    assert_int_equal(line[len - 1], '\n');
    assert_null(memchr(line, '\n', len - 1));
    assert_true(utf8_valid((const uint8_t *)line, len));
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, len - 1, &end, false);
    if (o == NULL) {
        fail_msg("not JSON: %.*s", (int)len, line);
    }
    assert_ptr_equal(end, line + len - 1);
    cJSON *prov = cJSON_GetObjectItemCaseSensitive(o, "provider");
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    assert_true(cJSON_IsString(prov) && cJSON_IsString(ev) && cJSON_IsNumber(id));
    assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "timestamp")));
    assert_true(cJSON_HasObjectItem(o, "payload") || cJSON_HasObjectItem(o, "payloadHex"));
    cJSON *stack = cJSON_GetObjectItemCaseSensitive(o, "stack");
    if (stack != NULL) {
        assert_true(cJSON_IsArray(stack) && cJSON_GetArraySize(stack) > 0);
        const cJSON *addr;
        cJSON_ArrayForEach(addr, stack)
        {
            assert_true(cJSON_IsString(addr) && strncmp(addr->valuestring, "0x", 2) == 0);
        }
        t->stack_lines++;
    }
    /* Every event of the runtime's own providers has a layout: named, its fields by name. */
    if (ev_native_provider_of(prov->valuestring) != EV_NATIVE_NONE) {
        assert_true(cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(o, "payload")));
        assert_true(strncmp(ev->valuestring, "EventID(", 8) != 0);
    }
    char key[200];
    snprintf(key, sizeof(key), "%s\t%d", prov->valuestring, id->valueint);
    tally_add(t, key);
    snprintf(key, sizeof(key), "%s\n%s", prov->valuestring, ev->valuestring);
    tally_add(t, key);
    cJSON_Delete(o);
    t->lines++;
    assert_int_equal(buf_append(&t->all, line, len), 0);
    return 0;
}

/* Converts p[0..n) fed in chunks of `chunk` bytes; returns the verdict. */
static enum nettrace_verdict convert(const uint8_t *p, size_t n, size_t chunk, struct tally *t,
                                     struct ev_json **out)
{
    struct ev_json *j = ev_json_new(on_line, t);
    assert_non_null(j);
    for (size_t at = 0; at < n; at += chunk) {
        size_t len = n - at < chunk ? n - at : chunk;
        if (ev_json_feed(j, p + at, len) != 0) {
            break;
        }
    }
    enum nettrace_verdict v = ev_json_finish(j);
    *out = j;
    return v;
}

/* ---- the fixtures --------------------------------------------------------------------------- */

static void check_fixture(const char *sub, const char *name)
{
    size_t n;
    uint8_t *p = fixture_read(sub, name, &n);
    struct tally *t = calloc(1, sizeof(*t));
    assert_non_null(t);
    buf_init(&t->all, 0);
    struct ev_json *j;
    assert_int_equal(convert(p, n, 65536, t, &j), NETTRACE_COMPLETE);
    const struct nettrace_checker *ck = ev_json_checker(j);
    assert_true(t->lines > 0);
    assert_int_equal(t->lines, nettrace_get_stats(ck)->events);
    assert_int_equal(t->lines, ev_json_lines(j));
    /* Stacks defined in the stream show up on the events that use them. */
    const struct nettrace_stats *st = nettrace_get_stats(ck);
    if (st->stacks > 0 && st->missing_stacks < st->events) {
        assert_true(t->stack_lines > 0);
    }
    for (size_t k = 0; k < t->n; k++) {
        char prov[160];
        memcpy(prov, t->key[k], sizeof(prov));
        char *tab = strchr(prov, '\t');
        char *nl = strchr(prov, '\n');
        if (tab != NULL) {
            *tab = '\0';
            uint64_t want = nettrace_count(ck, prov, (uint32_t)strtoul(tab + 1, NULL, 10));
            assert_int_equal(t->count[k], want);
        } else if (nl != NULL && strncmp(nl + 1, "EventID(", 8) != 0) {
            *nl = '\0';
            /* (the runtime's native events have no names in the stream, their names come from
             * their layouts: counted by id above) */
            if (ev_native_provider_of(prov) == EV_NATIVE_NONE &&
                t->count[k] != nettrace_count_named(ck, prov, nl + 1)) {
                fail_msg("%s %s: %s %llu lines", name, prov, nl + 1,
                         (unsigned long long)t->count[k]);
            }
        }
    }
    /* Another chunking gives the same lines. */
    struct tally *t2 = calloc(1, sizeof(*t2));
    assert_non_null(t2);
    buf_init(&t2->all, 0);
    struct ev_json *j2;
    assert_int_equal(convert(p, n, 4093, t2, &j2), NETTRACE_COMPLETE);
    assert_int_equal(buf_size(&t2->all), buf_size(&t->all));
    assert_memory_equal(buf_data(&t2->all), buf_data(&t->all), buf_size(&t->all));
    ev_json_free(j2);
    buf_fini(&t2->all);
    free(t2);
    /* A prefix: TRUNCATED, and its lines are a prefix of the whole. */
    t2 = calloc(1, sizeof(*t2));
    assert_non_null(t2);
    buf_init(&t2->all, 0);
    assert_int_equal(convert(p, n / 2, 65536, t2, &j2), NETTRACE_TRUNCATED);
    assert_true(buf_size(&t2->all) <= buf_size(&t->all));
    assert_memory_equal(buf_data(&t2->all), buf_data(&t->all), buf_size(&t2->all));
    ev_json_free(j2);
    buf_fini(&t2->all);
    free(t2);
    ev_json_free(j);
    buf_fini(&t->all);
    free(t);
    free(p);
}

static void test_fixtures_nettrace(void **state)
{
    (void)state;
    static const char *const files[] = {"cpu.nettrace", "gc.nettrace", "http_ct5.nettrace",
                                        "logs.nettrace", "rundown_ct4.nettrace"};
    for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
        check_fixture("nettrace", files[k]);
    }
}

static void test_fixtures_events(void **state)
{
    (void)state;
    static const char *const files[] = {"demo.nettrace", "multi.nettrace", "runtime.nettrace"};
    for (size_t k = 0; k < sizeof(files) / sizeof(files[0]); k++) {
        check_fixture("events", files[k]);
    }
}

/* GCStart/GCEnd in gc.nettrace: fixed-layout payloads, Count rising by one per GC. */
static int on_gc_line(void *ud, const char *line, size_t len)
{
    int *last = ud;
    cJSON *o = cJSON_ParseWithLength(line, len);
    assert_non_null(o);
    cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event");
    if (strcmp(ev->valuestring, "GCStart") == 0) {
        cJSON *pl = cJSON_GetObjectItemCaseSensitive(o, "payload");
        assert_non_null(pl);
        cJSON *count = cJSON_GetObjectItemCaseSensitive(pl, "Count");
        assert_true(cJSON_IsNumber(count));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(pl, "Depth")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(pl, "Reason")));
        assert_true(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(pl, "Type")));
        assert_true(count->valueint > *last);
        *last = count->valueint;
    }
    cJSON_Delete(o);
    return 0;
}

static void test_gc_payloads(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "gc.nettrace", &n);
    int last = 0;
    struct ev_json *j = ev_json_new(on_gc_line, &last);
    assert_non_null(j);
    assert_int_equal(ev_json_feed(j, p, n), 0);
    assert_int_equal(ev_json_finish(j), NETTRACE_COMPLETE);
    assert_true(last > 0);
    assert_int_equal((uint64_t)last,
                     nettrace_count(ev_json_checker(j), "Microsoft-Windows-DotNETRuntime", 1));
    ev_json_free(j);
    free(p);
}

/* A callback error stops the output and is returned. */
static int on_line_fail(void *ud, const char *line, size_t len)
{
    (void)line;
    (void)len;
    int *calls = ud;
    (*calls)++;
    return AGENT_E_CLOSED;
}

static void test_callback_error(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "gc.nettrace", &n);
    int calls = 0;
    struct ev_json *j = ev_json_new(on_line_fail, &calls);
    assert_non_null(j);
    assert_int_equal(ev_json_feed(j, p, n), AGENT_E_CLOSED);
    assert_int_equal(calls, 1);
    assert_int_equal(ev_json_lines(j), 0);
    ev_json_free(j);
    free(p);
}

/* Batched output (ev_json_set_batch) is the same bytes as line by line, in whole lines. */
static int on_append(void *ud, const char *line, size_t len)
{
    struct buf *b = ud;
    assert_true(len > 0 && line[len - 1] == '\n');
    return buf_append(b, line, len);
}

static void test_batches(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "gc.nettrace", &n);
    struct buf one, many;
    buf_init(&one, 0);
    buf_init(&many, 0);
    struct ev_json *j1 = ev_json_new(on_append, &one);
    struct ev_json *j2 = ev_json_new(on_append, &many);
    assert_non_null(j1);
    assert_non_null(j2);
    ev_json_set_batch(j2, 4096);
    for (size_t at = 0; at < n; at += 1000) { /* chunks that cut blocks anywhere */
        size_t k = n - at < 1000 ? n - at : 1000;
        assert_int_equal(ev_json_feed(j1, p + at, k), 0);
        assert_int_equal(ev_json_feed(j2, p + at, k), 0);
    }
    assert_int_equal(ev_json_flush(j2), 0);
    assert_int_equal(ev_json_finish(j2), NETTRACE_COMPLETE);
    assert_true(buf_size(&one) > 4096);
    assert_int_equal(buf_size(&one), buf_size(&many));
    assert_memory_equal(buf_data(&one), buf_data(&many), buf_size(&one));
    assert_int_equal(ev_json_lines(j1), ev_json_lines(j2));
    ev_json_free(j1);
    ev_json_free(j2);
    buf_fini(&one);
    buf_fini(&many);
    free(p);
}

/* ---- hand-built events ---------------------------------------------------------------------- */

struct mb {
    uint8_t p[1024];
    size_t n;
};

static void mb_le(struct mb *b, uint64_t v, size_t bytes)
{
    assert_true(b->n + bytes <= sizeof(b->p));
    for (size_t i = 0; i < bytes; i++) {
        b->p[b->n++] = (uint8_t)(v >> (8 * i));
    }
}

static void mb_utf16(struct mb *b, const char *s)
{
    for (const char *c = s; *c != '\0'; c++) {
        mb_le(b, (uint8_t)*c, 2);
    }
    mb_le(b, 0, 2);
}

static void mb_field(struct mb *b, uint32_t code, const char *name)
{
    mb_le(b, code, 4);
    mb_utf16(b, name);
}

static const struct nettrace_trace_info test_ti = {
    .sync_time_utc = {2026, 11, 4, 26, 11, 0, 0, 123},
    .sync_time_qpc = 1000,
    .qpc_frequency = 1000000000,
    .pointer_size = 8,
    .process_id = 42,
};

static cJSON *render(const struct ev_schema *s, const uint8_t *payload, size_t n, struct buf *out)
{
    struct nettrace_event ev = {
        .provider = "Test-Provider",
        .event_name = s != NULL ? s->event_name : "",
        .event_id = s != NULL ? s->event_id : 7,
        .version = 1,
        .thread_id = 99,
        .timestamp = 1000 + 456789,
        .payload = payload,
        .payload_len = n,
    };
    buf_reset(out);
    assert_int_equal(ev_json_render(out, &test_ti, s, &ev), 0);
    assert_true(utf8_valid(buf_data(out), buf_size(out)));
    cJSON *o = cJSON_ParseWithLength((const char *)buf_data(out), buf_size(out));
    if (o == NULL) {
        fail_msg("not JSON: %s", buf_cstr(out));
    }
    return o;
}

static void test_types(void **state)
{
    (void)state;
    struct mb md = {.n = 0};
    mb_le(&md, 5, 4); /* metadata id */
    mb_utf16(&md, "Test-Provider");
    mb_le(&md, 3, 4); /* event id */
    mb_utf16(&md, "Typed");
    mb_le(&md, 0x30, 8); /* keywords */
    mb_le(&md, 1, 4);    /* version */
    mb_le(&md, 4, 4);    /* level */
    mb_le(&md, 8, 4);    /* fields */
    mb_field(&md, 14, "D");
    mb_field(&md, 12, "Big");
    mb_field(&md, 11, "Neg");
    mb_field(&md, 18, "S");
    mb_field(&md, 17, "G");
    mb_field(&md, 16, "When");
    mb_field(&md, 3, "B");
    mb_field(&md, 9, "I");
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse(md.p, md.n, &s), 0);

    struct mb pl = {.n = 0};
    mb_le(&pl, 0x7FF8000000000000ull, 8); /* NaN */
    mb_le(&pl, 18446744073709551615ull, 8);
    mb_le(&pl, (uint64_t)-5, 8);
    mb_le(&pl, 'h', 2);
    mb_le(&pl, 0xD800, 2); /* a lone surrogate */
    mb_le(&pl, '"', 2);
    mb_le(&pl, 0xD83D, 2); /* U+1F600 */
    mb_le(&pl, 0xDE00, 2);
    mb_le(&pl, 0, 2);
    static const uint8_t guid[16] = {0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66,
                                     0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    for (size_t k = 0; k < 16; k++) {
        mb_le(&pl, guid[k], 1);
    }
    mb_le(&pl, 116444736000000000ull + 10000000ull * 86400 + 1234567, 8); /* 1970-01-02 */
    mb_le(&pl, 1, 4);
    mb_le(&pl, (uint32_t)-7, 4);

    struct buf out;
    buf_init(&out, 0);
    cJSON *o = render(s, pl.p, pl.n, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "timestamp")->valuestring,
                        "2026-11-26T11:00:00.123456789Z");
    assert_string_equal(cJSON_GetObjectItem(o, "keywords")->valuestring, "0x30");
    assert_int_equal(cJSON_GetObjectItem(o, "pid")->valueint, 42);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(o, "activityId")));
    assert_false(cJSON_HasObjectItem(o, "stack"));
    cJSON *p = cJSON_GetObjectItem(o, "payload");
    assert_string_equal(cJSON_GetObjectItem(p, "D")->valuestring, "NaN");
    assert_string_equal(cJSON_GetObjectItem(p, "Big")->valuestring, "18446744073709551615");
    assert_int_equal(cJSON_GetObjectItem(p, "Neg")->valueint, -5);
    assert_string_equal(cJSON_GetObjectItem(p, "S")->valuestring,
                        "h\xEF\xBF\xBD\"\xF0\x9F\x98\x80");
    assert_string_equal(cJSON_GetObjectItem(p, "G")->valuestring,
                        "00112233-4455-6677-8899-aabbccddeeff");
    assert_string_equal(cJSON_GetObjectItem(p, "When")->valuestring,
                        "1970-01-02T00:00:00.1234567Z");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(p, "B")));
    assert_int_equal(cJSON_GetObjectItem(p, "I")->valueint, -7);
    cJSON_Delete(o);

    /* A payload too short for the fields: hex instead. */
    o = render(s, pl.p, 10, &out);
    assert_false(cJSON_HasObjectItem(o, "payload"));
    assert_string_equal(cJSON_GetObjectItem(o, "payloadHex")->valuestring, "000000000000f87fffff");
    cJSON_Delete(o);
    ev_schema_free(s);

    /* No schema, a payload: hex; no schema, no payload: {}. */
    o = render(NULL, pl.p, 3, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "EventID(7)");
    assert_string_equal(cJSON_GetObjectItem(o, "payloadHex")->valuestring, "000000");
    cJSON_Delete(o);
    o = render(NULL, NULL, 0, &out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 0);
    cJSON_Delete(o);
    buf_fini(&out);
}

/* ---- native runtime events (ev_native.h layouts) -------------------------------------------- */

static cJSON *render_native(const char *provider, uint32_t id, uint32_t version, uint32_t ptr,
                            const struct wb *pl, struct buf *out)
{
    struct nettrace_trace_info ti = test_ti;
    ti.pointer_size = ptr;
    struct nettrace_event ev = {
        .provider = provider,
        .event_name = "",
        .event_id = id,
        .version = version,
        .thread_id = 99,
        .timestamp = 1000,
        .payload = pl->n > 0 ? pl->b : NULL,
        .payload_len = pl->n,
    };
    buf_reset(out);
    assert_int_equal(ev_json_render(out, &ti, NULL, &ev), 0);
    assert_true(utf8_valid(buf_data(out), buf_size(out)));
    cJSON *o = cJSON_ParseWithLength((const char *)buf_data(out), buf_size(out));
    if (o == NULL) {
        fail_msg("not JSON: %s", buf_cstr(out));
    }
    return o;
}

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

static cJSON *field(cJSON *o, const char *name)
{
    cJSON *f =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(o, "payload"), name);
    if (f == NULL) {
        fail_msg("no payload.%s", name);
    }
    return f;
}

static void test_native_allocation_tick(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    for (uint32_t ptr = 4; ptr <= 8; ptr += 4) {
        struct wb pl = {NULL, 0, 0};
        WB_PUT(&pl, {106600, 4}, {1, 4}, {0, 2}, {106600, 8}, {0x7f4eb2e6dd58ull, ptr});
        wb_wstr(&pl, "System.\"Str\\ing\"");
        WB_PUT(&pl, {2, 4}, {0xFFFF7f42d987ca18ull, ptr}, {104, 8});
        cJSON *o = render_native(RUNTIME, 10, 4, ptr, &pl, &out);
        assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCAllocationTick");
        assert_int_equal(cJSON_GetObjectItem(o, "version")->valueint, 4);
        assert_int_equal(field(o, "AllocationAmount")->valueint, 106600);
        assert_int_equal(field(o, "AllocationKind")->valueint, 1);
        assert_int_equal(field(o, "ClrInstanceID")->valueint, 0);
        assert_int_equal(field(o, "AllocationAmount64")->valuedouble, 106600);
        assert_string_equal(field(o, "TypeName")->valuestring, "System.\"Str\\ing\"");
        assert_int_equal(field(o, "HeapIndex")->valueint, 2);
        assert_int_equal(field(o, "ObjectSize")->valueint, 104);
        if (ptr == 8) {
            assert_true(field(o, "TypeID")->valuedouble == (double)0x7f4eb2e6dd58ull);
            /* past 2^53: a decimal string */
            assert_string_equal(field(o, "Address")->valuestring, "18446602523826965016");
        } else {
            assert_true(field(o, "TypeID")->valuedouble == (double)0xb2e6dd58u);
            assert_true(field(o, "Address")->valuedouble == (double)0xd987ca18u);
        }
        /* The members in the manifest's order. */
        const char *order[] = {"AllocationAmount",   "AllocationKind", "ClrInstanceID",
                               "AllocationAmount64", "TypeID",         "TypeName",
                               "HeapIndex",          "Address",        "ObjectSize"};
        const cJSON *m = cJSON_GetObjectItem(o, "payload")->child;
        for (size_t k = 0; k < 9; k++, m = m->next) {
            assert_string_equal(m->string, order[k]);
        }
        assert_null(m);
        cJSON_Delete(o);

        /* Version 2 of the same bytes: its 7 fields, the rest ignored. */
        o = render_native(RUNTIME, 10, 2, ptr, &pl, &out);
        assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 7);
        cJSON_Delete(o);

        /* Too short (cut inside TypeName): hex, still named. */
        pl.n = 30;
        o = render_native(RUNTIME, 10, 4, ptr, &pl, &out);
        assert_false(cJSON_HasObjectItem(o, "payload"));
        assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCAllocationTick");
        assert_int_equal(strlen(cJSON_GetObjectItem(o, "payloadHex")->valuestring), 60);
        cJSON_Delete(o);
        free(pl.b);
    }
    buf_fini(&out);
}

static void test_native_numbers(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    /* GCHeapStats V2: eleven U64 fields, then U32s, ClrInstanceID, two more U64. */
    static const uint64_t u[] = {0,
                                 9,
                                 10,
                                 99,
                                 100,
                                 12345678,
                                 123456789,
                                 9007199254740992ull, /* 2^53: still a number */
                                 9007199254740993ull, /* past it: a string */
                                 18446744073709551615ull};
    struct wb pl = {NULL, 0, 0};
    for (size_t k = 0; k < 10; k++) {
        wb_le(&pl, u[k], 8);
    }
    WB_PUT(&pl, {4294967295u, 4}, {1, 4}, {2, 4}, {3, 2}, {10000000000000000000ull, 8},
           {9999999999999999999ull, 8});
    cJSON *o = render_native(RUNTIME, 4, 2, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCHeapStats");
    const char *text = buf_cstr(&out);
    assert_non_null(strstr(text, "\"GenerationSize0\":0,\"TotalPromotedSize0\":9,"
                                 "\"GenerationSize1\":10,\"TotalPromotedSize1\":99,"
                                 "\"GenerationSize2\":100,\"TotalPromotedSize2\":12345678,"
                                 "\"GenerationSize3\":123456789,"
                                 "\"TotalPromotedSize3\":9007199254740992,"
                                 "\"FinalizationPromotedSize\":\"9007199254740993\","
                                 "\"FinalizationPromotedCount\":\"18446744073709551615\","
                                 "\"PinnedObjectCount\":4294967295,\"SinkBlockCount\":1,"
                                 "\"GCHandleCount\":2,\"ClrInstanceID\":3,"
                                 "\"GenerationSize4\":\"10000000000000000000\","
                                 "\"TotalPromotedSize4\":\"9999999999999999999\"}"));
    cJSON_Delete(o);
    /* V1 ends at ClrInstanceID, V0 before it. */
    o = render_native(RUNTIME, 4, 1, 8, &pl, &out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 14);
    cJSON_Delete(o);
    o = render_native(RUNTIME, 4, 0, 8, &pl, &out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 13);
    cJSON_Delete(o);

    /* Signed: GCGlobalHeapHistory's NumHeaps (I32), ExecutionCheckpoint's Timestamp (I64). */
    pl.n = 0;
    wb_le(&pl, 0, 2);
    wb_wstr(&pl, "RuntimeInit");
    wb_le(&pl, 0x8000000000000000ull, 8);
    o = render_native(RUNTIME "Rundown", 300, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "ExecutionCheckpointDCEnd");
    assert_string_equal(field(o, "Timestamp")->valuestring, "-9223372036854775808");
    cJSON_Delete(o);
    pl.n = 0;
    wb_le(&pl, 1, 8);
    wb_le(&pl, (uint32_t)-3, 4);
    for (size_t k = 0; k < 4; k++) {
        wb_le(&pl, k, 4);
    }
    WB_PUT(&pl, {0, 2}, {1, 4}, {2, 4});
    o = render_native(RUNTIME, 205, 2, 8, &pl, &out);
    assert_int_equal(field(o, "NumHeaps")->valueint, -3);
    cJSON_Delete(o);

    /* Double (ContentionStop V1), Boolean (ThreadPoolIOEnqueue), GUID (ModuleLoad V2). */
    pl.n = 0;
    wb_le(&pl, 1, 1);
    wb_le(&pl, 0, 2);
    wb_le(&pl, 0x4016000000000000ull, 8); /* 5.5 */
    o = render_native(RUNTIME, 91, 1, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "ContentionStop");
    assert_true(field(o, "DurationNs")->valuedouble == 5.5);
    cJSON_Delete(o);
    pl.n = 0;
    WB_PUT(&pl, {0x10, 8}, {0x20, 8}, {1, 4}, {0, 2});
    o = render_native(RUNTIME, 63, 0, 8, &pl, &out);
    assert_true(cJSON_IsTrue(field(o, "MultiDequeues")));
    cJSON_Delete(o);
    buf_fini(&out);
    free(pl.b);
}

static void test_native_module_and_method(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    struct wb pl = {NULL, 0, 0};
    WB_PUT(&pl, {0x7f0000001000ull, 8}, {0x5600000000ull, 8}, {8, 4}, {0, 4});
    wb_wstr(&pl, "/app/App.dll");
    wb_wstr(&pl, "");
    wb_le(&pl, 0, 2);
    static const uint8_t guid[16] = {0x81, 0x65, 0xc9, 0xc0, 0xb7, 0x69, 0x38, 0xba,
                                     0x8a, 0x41, 0x86, 0x80, 0xbc, 0x2a, 0x72, 0x20};
    for (size_t k = 0; k < 16; k++) {
        wb_le(&pl, guid[k], 1);
    }
    wb_le(&pl, 1, 4);
    wb_wstr(&pl, "/src/App.pdb");
    for (size_t k = 0; k < 16; k++) {
        wb_le(&pl, 0, 1);
    }
    wb_le(&pl, 0, 4);
    wb_wstr(&pl, "");
    cJSON *o = render_native(RUNTIME "Rundown", 154, 2, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "ModuleDCEnd");
    assert_string_equal(field(o, "ModuleILPath")->valuestring, "/app/App.dll");
    assert_string_equal(field(o, "ModuleNativePath")->valuestring, "");
    assert_string_equal(field(o, "ManagedPdbSignature")->valuestring,
                        "c0c96581-69b7-ba38-8a41-8680bc2a7220");
    assert_string_equal(field(o, "NativePdbSignature")->valuestring,
                        "00000000-0000-0000-0000-000000000000");
    cJSON_Delete(o);
    /* The runtime provider's ModuleLoad has the same layout under its own name. */
    o = render_native(RUNTIME, 152, 2, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "ModuleLoad");
    cJSON_Delete(o);

    /* MethodDCEndVerbose in versions 1 and 2 within one stream. */
    pl.n = 0;
    WB_PUT(&pl, {0x7f01, 8}, {0x7f02, 8}, {0x7f0000a000ull, 8}, {382, 4}, {0x060001ab, 4},
           {0x188, 4});
    wb_wstr(&pl, "System.Number");
    wb_wstr(&pl, "TryParse");
    wb_wstr(&pl, "bool  (int32)");
    wb_le(&pl, 0, 2);
    size_t v1 = pl.n;
    wb_le(&pl, 0, 8);
    o = render_native(RUNTIME "Rundown", 144, 2, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "MethodDCEndVerbose");
    assert_int_equal(field(o, "MethodSize")->valueint, 382);
    assert_int_equal(field(o, "MethodFlags")->valueint, 0x188);
    assert_string_equal(field(o, "MethodSignature")->valuestring, "bool  (int32)");
    assert_int_equal(field(o, "ReJITID")->valueint, 0);
    cJSON_Delete(o);
    pl.n = v1;
    o = render_native(RUNTIME "Rundown", 144, 1, 8, &pl, &out);
    assert_false(cJSON_HasObjectItem(cJSON_GetObjectItem(o, "payload"), "ReJITID"));
    cJSON_Delete(o);
    o = render_native(RUNTIME "Rundown", 144, 2, 8, &pl, &out); /* V2 without its ReJITID */
    assert_true(cJSON_HasObjectItem(o, "payloadHex"));
    cJSON_Delete(o);
    buf_fini(&out);
    free(pl.b);
}

static void test_native_arrays_json(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    /* GCBulkEdge: an array of structs. */
    struct wb pl = {NULL, 0, 0};
    WB_PUT(&pl, {0, 4}, {2, 4}, {0, 2}, {0x1000, 8}, {1, 4}, {0x2000, 8}, {2, 4});
    cJSON *o = render_native(RUNTIME, 19, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCBulkEdge");
    assert_non_null(strstr(buf_cstr(&out),
                           "\"payload\":{\"Index\":0,\"Count\":2,\"ClrInstanceID\":0,"
                           "\"Values\":[{\"Value\":4096,\"ReferencingFieldID\":1},"
                           "{\"Value\":8192,\"ReferencingFieldID\":2}]}"));
    cJSON_Delete(o);
    pl.n -= 1; /* the last element cut */
    o = render_native(RUNTIME, 19, 0, 8, &pl, &out);
    assert_true(cJSON_HasObjectItem(o, "payloadHex"));
    cJSON_Delete(o);

    /* BulkType: scalars in a struct in an array. */
    pl.n = 0;
    WB_PUT(&pl, {1, 4}, {0, 2}, {0xA0, 8}, {0xB0, 8}, {5, 4}, {8, 4}, {0x1D, 1});
    wb_wstr(&pl, "List`1");
    WB_PUT(&pl, {2, 4}, {0xC0, 8}, {0xC1, 8});
    o = render_native(RUNTIME, 15, 0, 8, &pl, &out);
    assert_non_null(strstr(buf_cstr(&out),
                           "\"Values\":[{\"TypeID\":160,\"ModuleID\":176,\"TypeNameID\":5,"
                           "\"Flags\":8,\"CorElementType\":29,\"Name\":\"List`1\","
                           "\"TypeParameterCount\":2,\"TypeParameters\":[192,193]}]}"));
    cJSON_Delete(o);

    /* MethodILToNativeMap: two arrays of scalars; no elements: []. */
    pl.n = 0;
    WB_PUT(&pl, {7, 8}, {0, 8}, {0, 1}, {0, 2}, {0, 2});
    o = render_native(RUNTIME "Rundown", 150, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "MethodDCEndILToNativeMap");
    assert_non_null(strstr(buf_cstr(&out), "\"ILOffsets\":[],\"NativeOffsets\":[],"));
    cJSON_Delete(o);

    /* GCDynamicEvent: its bytes as hex. */
    pl.n = 0;
    wb_wstr(&pl, "HeapCountTuning");
    WB_PUT(&pl, {2, 4}, {0xBEEF, 2}, {0, 2});
    o = render_native(RUNTIME, 39, 0, 8, &pl, &out);
    assert_string_equal(field(o, "Name")->valuestring, "HeapCountTuning");
    assert_string_equal(field(o, "Data")->valuestring, "efbe");
    cJSON_Delete(o);
    buf_fini(&out);
    free(pl.b);
}

static void test_native_empty_and_unknown(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    struct wb pl = {NULL, 0, 0};
    /* A layout without fields (GCRestartEEEnd V0; ExceptionCatchStop): {} whatever follows. */
    cJSON *o = render_native(RUNTIME, 3, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCRestartEEEnd");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 0);
    cJSON_Delete(o);
    wb_le(&pl, 0, 2);
    o = render_native(RUNTIME, 251, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "ExceptionCatchStop");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 0);
    cJSON_Delete(o);
    /* A layout with fields and an empty payload: {} as before; a short one: hex. */
    pl.n = 0;
    o = render_native(RUNTIME, 9, 1, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "GCSuspendEEBegin");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 0);
    cJSON_Delete(o);
    wb_le(&pl, 1, 4);
    wb_le(&pl, 7, 4);
    o = render_native(RUNTIME, 9, 1, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "payloadHex")->valuestring, "0100000007000000");
    cJSON_Delete(o);
    wb_le(&pl, 0, 2);
    o = render_native(RUNTIME, 9, 1, 8, &pl, &out);
    assert_int_equal(field(o, "Reason")->valueint, 1);
    assert_int_equal(field(o, "Count")->valueint, 7);
    cJSON_Delete(o);
    /* GCSuspendEEBegin V0 has a 16-bit Reason. */
    o = render_native(RUNTIME, 9, 0, 8, &pl, &out);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(o, "payload")), 1);
    cJSON_Delete(o);
    /* An id or version without a layout, another provider: as before. */
    o = render_native(RUNTIME, 9999, 0, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "EventID(9999)");
    assert_true(cJSON_HasObjectItem(o, "payloadHex"));
    cJSON_Delete(o);
    o = render_native(RUNTIME, 9, 7, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "EventID(9)");
    cJSON_Delete(o);
    o = render_native("Microsoft-Windows-DotNETRuntimeStress", 9, 1, 8, &pl, &out);
    assert_string_equal(cJSON_GetObjectItem(o, "event")->valuestring, "EventID(9)");
    cJSON_Delete(o);
    buf_fini(&out);
    free(pl.b);
}

/* UTF-16 strings whose plain stretches and escapes fall at every place of a 4-unit group. */
static void test_string_groups(void **state)
{
    (void)state;
    struct mb md = {.n = 0};
    mb_le(&md, 5, 4);
    mb_utf16(&md, "Test-Provider");
    mb_le(&md, 3, 4);
    mb_utf16(&md, "Str");
    mb_le(&md, 0, 8);
    mb_le(&md, 1, 4);
    mb_le(&md, 4, 4);
    mb_le(&md, 1, 4);
    mb_field(&md, 18, "S");
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse(md.p, md.n, &s), 0);
    static const uint16_t specials[] = {'"', '\\', 0x1F, 0x7F, 0xE9, 0x20AC, ' ', '~', 0x80};
    static const char *const escaped[] = {"\\\"",         "\\\\", "\\u001f", "\x7f",    "\xc3\xa9",
                                          "\xe2\x82\xac", " ",    "~",       "\xc2\x80"};
    struct buf out;
    buf_init(&out, 0);
    for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); k++) {
        for (size_t at = 0; at < 9; at++) {
            struct mb pl = {.n = 0};
            char want[64];
            size_t w = 0;
            want[w++] = '"';
            for (size_t i = 0; i < 10; i++) {
                if (i == at) {
                    mb_le(&pl, specials[k], 2);
                    memcpy(want + w, escaped[k], strlen(escaped[k]));
                    w += strlen(escaped[k]);
                } else {
                    mb_le(&pl, 'a' + i, 2);
                    want[w++] = (char)('a' + i);
                }
            }
            mb_le(&pl, 0, 2);
            want[w++] = '"';
            want[w] = '\0';
            cJSON *o = render(s, pl.p, pl.n, &out);
            cJSON_Delete(o);
            const char *text = buf_cstr(&out);
            const char *at_s = strstr(text, "\"S\":");
            assert_non_null(at_s);
            assert_memory_equal(at_s + 4, want, w);
        }
    }
    buf_fini(&out);
    ev_schema_free(s);
}

static void test_str_utf8(void **state)
{
    (void)state;
    struct buf out;
    buf_init(&out, 0);
    static const uint8_t bad[] = {'a',  0xC0, 0x80, 0xED, 0xA0, 0x80, 0xF4,
                                  0x90, 0x80, 0x80, 0x01, '\\', 0xE2, 0x82};
    assert_int_equal(ev_json_str_utf8(&out, bad, sizeof(bad)), 0);
    assert_true(utf8_valid(buf_data(&out), buf_size(&out)));
    cJSON *o = cJSON_ParseWithLength((const char *)buf_data(&out), buf_size(&out));
    assert_non_null(o);
    assert_true(cJSON_IsString(o));
    assert_int_equal(o->valuestring[0], 'a');
    assert_non_null(strstr(o->valuestring, "\x01\\"));
    cJSON_Delete(o);
    buf_fini(&out);
}

/* ---- the memory budget ---------------------------------------------------------------------- */

struct lines {
    struct buf all;
};

static int on_keep(void *ud, const char *line, size_t len)
{
    struct lines *l = ud;
    return buf_append(&l->all, line, len);
}

/*
 * A hostile runtime defines 2,000 metadata ids of 90 Int32 fields with 40-character names (about
 * 10 KB held each, 20 MB without a budget), then one event of the first id and one of the last:
 * against a 1 MiB share the converter holds at most the share, the schemas that did not fit are
 * counted, the first event still decodes by its schema, the last one goes out as payloadHex, and
 * everything is given back when freed.
 */
static void test_budget(void **state)
{
    (void)state;
    enum { IDS = 2000, FIELDS = 90 };
    struct nt t;
    nt_begin(&t);
    for (uint32_t id = 1; id <= IDS; id++) {
        struct wb w = {0};
        wb_u32(&w, id);
        wb_wstr(&w, "Hostile-Provider");
        wb_u32(&w, id);
        wb_wstr(&w, "Ev");
        wb_le(&w, 0, 8);
        wb_u32(&w, 0);
        wb_u32(&w, 4);
        wb_u32(&w, FIELDS);
        for (unsigned f = 0; f < FIELDS; f++) {
            char name[48];
            snprintf(name, sizeof(name), "Field_%04u_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", f);
            wb_u32(&w, 9); /* Int32 */
            wb_wstr(&w, name);
        }
        nt_blob(&t, 0, 0, 0, 0, &w);
        free(w.b);
        if (id % 100 == 0) {
            nt_block(&t, "MetadataBlock", false);
        }
    }
    struct wb pl = {0};
    for (unsigned f = 0; f < FIELDS; f++) {
        wb_u32(&pl, f);
    }
    nt_blob(&t, 1, SYNC_QPC, 0, 0, &pl);
    nt_blob(&t, IDS, SYNC_QPC, 0, 0, &pl);
    nt_block(&t, "EventBlock", false);
    free(pl.b);
    wb_u8(&t.out, 1); /* NullReference: the end */
    struct mb_share share;
    mb_share_init(&share, "ndjson test", 1024 * 1024);
    struct lines got;
    buf_init(&got.all, 0);
    struct ev_json *j = ev_json_new(on_keep, &got);
    assert_non_null(j);
    assert_int_equal(ev_json_set_share(j, &share), 0);
    assert_int_equal(ev_json_feed(j, t.out.b, t.out.n), 0);
    assert_int_equal(ev_json_finish(j), NETTRACE_COMPLETE);
    assert_int_equal(ev_json_lines(j), 2);
    assert_true(atomic_load(&share.peak) <= share.cap);
    assert_true(atomic_load(&share.peak) > share.cap / 2);
    assert_true(ev_json_budget_dropped(j) > IDS / 2);
    assert_int_equal(ev_json_held(j), atomic_load(&share.used));
    const char *out = buf_cstr(&got.all);
    const char *nl = strchr(out, '\n');
    assert_non_null(nl);
    const char *f99 = strstr(out, "\"Field_0089_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\":89");
    assert_true(f99 != NULL && f99 < nl);
    assert_null(strstr(nl, "\"payload\":"));
    assert_non_null(strstr(nl, "\"payloadHex\":\"00000000010000000200"));
    printf("budget: %llu refused, peak %llu of %llu bytes\n",
           (unsigned long long)ev_json_budget_dropped(j),
           (unsigned long long)atomic_load(&share.peak), (unsigned long long)share.cap);
    assert_int_equal(ev_json_set_share(j, NULL), AGENT_E_INVAL);
    ev_json_free(j);
    assert_int_equal(atomic_load(&share.used), 0);
    mb_share_fini(&share);
    buf_fini(&got.all);
    free(t.out.b);
    free(t.blk.b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_nettrace),
        cmocka_unit_test(test_fixtures_events),
        cmocka_unit_test(test_gc_payloads),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_batches),
        cmocka_unit_test(test_string_groups),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_native_allocation_tick),
        cmocka_unit_test(test_native_numbers),
        cmocka_unit_test(test_native_module_and_method),
        cmocka_unit_test(test_native_arrays_json),
        cmocka_unit_test(test_native_empty_and_unknown),
        cmocka_unit_test(test_str_utf8),
        cmocka_unit_test(test_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
