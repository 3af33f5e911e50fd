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
#include "fixture.h"

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
        } else if (nl != NULL && strncmp(nl + 1, "EventID(", 8) != 0 &&
                   strncmp(prov, "Microsoft-Windows-DotNETRuntime\n", 32) != 0) {
            /* (native runtime events have no names in the stream: counted by id above) */
            *nl = '\0';
            if (t->count[k] != nettrace_count_named(ck, prov, nl + 1)) {
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixtures_nettrace),
        cmocka_unit_test(test_fixtures_events),
        cmocka_unit_test(test_gc_payloads),
        cmocka_unit_test(test_callback_error),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_str_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
