/* SPDX-License-Identifier: MIT */
/*
 * events/ev_payload: metadata field lists (V1 with nested Objects, V5 V2Params with arrays) into
 * type trees, payloads decoded by them with every read bounds-checked. The records and payloads
 * are encoded here byte by byte from docs/nettrace.md §5.2-5.4 and §5, not with the code
 * under test.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_payload.h"

struct mb {
    uint8_t b[16384];
    size_t n;
};

static void put(struct mb *m, uint64_t v, size_t bytes)
{
    assert_true(m->n + bytes <= sizeof(m->b));
    for (size_t k = 0; k < bytes; k++) {
        m->b[m->n++] = (uint8_t)(v >> (8 * k));
    }
}

static void put_u16(struct mb *m, uint16_t v)
{
    put(m, v, 2);
}

static void put_u32(struct mb *m, uint32_t v)
{
    put(m, v, 4);
}

static void put_u64(struct mb *m, uint64_t v)
{
    put(m, v, 8);
}

/* ASCII as UTF-16LE with its NUL. */
static void put_wstr(struct mb *m, const char *s)
{
    for (; *s != '\0'; s++) {
        put_u16(m, (uint8_t)*s);
    }
    put_u16(m, 0);
}

static void put_f64(struct mb *m, double d)
{
    uint64_t bits;
    memcpy(&bits, &d, sizeof(bits));
    put_u64(m, bits);
}

static void put_f32(struct mb *m, float f)
{
    uint32_t bits;
    memcpy(&bits, &f, sizeof(bits));
    put_u32(m, bits);
}

static void md_head(struct mb *m, uint32_t id, const char *provider, const char *name,
                    uint64_t keywords)
{
    put_u32(m, id);
    put_wstr(m, provider);
    put_u32(m, 26); /* event id */
    put_wstr(m, name);
    put_u64(m, keywords);
    put_u32(m, 0); /* version */
    put_u32(m, 0); /* level */
}

/* EventCounters' Mean shape, trimmed: "" { Payload { Name, Mean, IntervalSec, Count } }. */
static void md_counters(struct mb *m)
{
    md_head(m, 7, "System.Runtime", "EventCounters", 0xF00000000000ull);
    put_u32(m, 1);
    put_u32(m, 1); /* the unnamed top-level struct */
    put_u32(m, 1);
    put_u32(m, 1); /* Payload */
    put_u32(m, 4);
    put_u32(m, 18);
    put_wstr(m, "Name");
    put_u32(m, 14);
    put_wstr(m, "Mean");
    put_u32(m, 13);
    put_wstr(m, "IntervalSec");
    put_u32(m, 9);
    put_wstr(m, "Count");
    put_wstr(m, "Payload");
    put_wstr(m, "");
}

static void test_ev_payload_v1_nested(void **state)
{
    (void)state;
    struct mb m = {0};
    md_counters(&m);
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse(m.b, m.n, &s), 0);
    assert_int_equal(s->metadata_id, 7);
    assert_string_equal(s->provider, "System.Runtime");
    assert_string_equal(s->event_name, "EventCounters");
    assert_int_equal(s->keywords, 0); /* session bits masked */
    assert_int_equal(s->nfields, 7);
    assert_false(s->v2);
    int top = s->fields[0].child;
    assert_int_equal(s->fields[top].code, EV_TYPE_OBJECT);
    assert_string_equal(s->fields[top].name, "");
    int pay = ev_schema_find(s, "Payload");
    assert_true(pay > 0);
    assert_string_equal(s->fields[pay].name, "Payload");
    assert_int_equal(s->fields[pay].nchild, 4);
    assert_int_equal(s->fields[pay].size, -1); /* a string inside */
    int mean = ev_schema_find(s, "Payload.Mean");
    assert_int_equal(s->fields[mean].code, EV_TYPE_DOUBLE);
    assert_int_equal(s->fields[mean].size, 8);
    assert_int_equal(s->fields[mean].parent, pay);
    assert_int_equal(ev_schema_find(s, "Mean"), AGENT_E_NOTFOUND);
    assert_int_equal(ev_schema_find(s, "Payload.Nope"), AGENT_E_NOTFOUND);
    assert_int_equal(ev_schema_find(s, "Payload..Mean"), AGENT_E_NOTFOUND);
    assert_int_equal(ev_schema_find(s, ""), AGENT_E_NOTFOUND);

    struct mb p = {0};
    put_wstr(&p, "cpu-usage");
    put_f64(&p, 12.5);
    put_f32(&p, 1.25f);
    put_u32(&p, (uint32_t)-3);
    struct ev_record rec;
    assert_int_equal(ev_record_decode(&rec, s, p.b, p.n), 0);
    char name[32];
    assert_int_equal(ev_record_path_str(&rec, "Payload.Name", name, sizeof(name)), 0);
    assert_string_equal(name, "cpu-usage");
    assert_int_equal(ev_record_str_len(&rec, ev_schema_find(s, "Payload.Name")), 9);
    assert_int_equal(ev_record_path_str(&rec, "Payload.Name", name, 9), AGENT_E_NOSPACE);
    double d = 0;
    assert_int_equal(ev_record_path_f64(&rec, "Payload.Mean", &d), 0);
    assert_true(d == 12.5);
    assert_int_equal(ev_record_path_f64(&rec, "Payload.IntervalSec", &d), 0);
    assert_true(d == 1.25);
    int64_t i = 0;
    assert_int_equal(ev_record_path_i64(&rec, "Payload.Count", &i), 0);
    assert_int_equal(i, -3);
    assert_int_equal(ev_record_path_f64(&rec, "Payload.Count", &d), 0);
    assert_true(d == -3.0);
    assert_int_equal(ev_record_path_i64(&rec, "Payload.Mean", &i), AGENT_E_INVAL);
    assert_int_equal(ev_record_path_f64(&rec, "Payload.Name", &d), AGENT_E_INVAL);
    assert_int_equal(ev_record_path_str(&rec, "Payload.Mean", name, sizeof(name)), AGENT_E_INVAL);
    assert_int_equal(ev_record_f64(&rec, 500, &d), AGENT_E_NOTFOUND);
    assert_int_equal(ev_record_f64(&rec, -1, &d), AGENT_E_NOTFOUND);
    /* Trailing bytes are tolerated; every shorter payload is refused. */
    put_u32(&p, 0xdeadbeef);
    assert_int_equal(ev_record_decode(&rec, s, p.b, p.n), 0);
    for (size_t n = 0; n < p.n - 4; n++) {
        assert_int_equal(ev_record_decode(&rec, s, p.b, n), AGENT_E_PROTO);
    }
    assert_int_equal(ev_record_decode(&rec, s, NULL, 0), AGENT_E_PROTO);
    ev_schema_free(s);
}

/*
 * MEL-like V2Params list: Level Int32, Arguments Array of {Key, Value}, Ints Array of Int32, a
 * nested Object with an array of arrays of strings, and a trailing string that is only found
 * when every array before it was walked correctly. The V1 list is replaced by the V2 one.
 */
static void put_v2_field(struct mb *m, const char *name, void (*type)(struct mb *))
{
    size_t at = m->n;
    put_u32(m, 0);
    put_wstr(m, name);
    type(m);
    put(m, 0, 2); /* padding inside the size */
    uint32_t size = (uint32_t)(m->n - at);
    for (int k = 0; k < 4; k++) {
        m->b[at + (size_t)k] = (uint8_t)(size >> (8 * k));
    }
}

static void t_int32(struct mb *m)
{
    put_u32(m, 9);
}

static void t_string(struct mb *m)
{
    put_u32(m, 18);
}

static void t_kv(struct mb *m)
{
    put_u32(m, 19);
    put_u32(m, 1);
    put_u32(m, 2);
    put_v2_field(m, "Key", t_string);
    put_v2_field(m, "Value", t_string);
}

static void t_int_array(struct mb *m)
{
    put_u32(m, 19);
    put_u32(m, 9);
}

static void t_str_array_array(struct mb *m)
{
    put_u32(m, 19);
    put_u32(m, 19);
    put_u32(m, 18);
}

static void t_nested(struct mb *m)
{
    put_u32(m, 1);
    put_u32(m, 2);
    put_v2_field(m, "Grid", t_str_array_array);
    put_v2_field(m, "Id", t_int32);
}

static void md_v2(struct mb *m)
{
    md_head(m, 9, "Microsoft-Extensions-Logging", "Message", 0xF00000000002ull);
    put_u32(m, 1); /* a V1 list the V2Params tag replaces */
    put_u32(m, 9);
    put_wstr(m, "Ignored");
    put_u32(m, 1); /* OpCode tag */
    m->b[m->n++] = 1;
    m->b[m->n++] = 10;
    size_t at = m->n;
    put_u32(m, 0);
    m->b[m->n++] = 2;
    size_t start = m->n;
    put_u32(m, 5);
    put_v2_field(m, "Level", t_int32);
    put_v2_field(m, "Arguments", t_kv);
    put_v2_field(m, "Ints", t_int_array);
    put_v2_field(m, "Nested", t_nested);
    put_v2_field(m, "Tail", t_string);
    uint32_t len = (uint32_t)(m->n - start);
    for (int k = 0; k < 4; k++) {
        m->b[at + (size_t)k] = (uint8_t)(len >> (8 * k));
    }
    put_u32(m, 3); /* an unknown tag kind, skipped */
    m->b[m->n++] = 77;
    put(m, 0xabcdef, 3);
}

static void payload_v2(struct mb *p)
{
    put_u32(p, 4);
    put_u16(p, 2);
    put_wstr(p, "a");
    put_wstr(p, "1");
    put_wstr(p, "bb");
    put_wstr(p, "22");
    put_u16(p, 3);
    put_u32(p, 10);
    put_u32(p, 20);
    put_u32(p, 30);
    put_u16(p, 2); /* Grid: [["x"], ["y", "z"]] */
    put_u16(p, 1);
    put_wstr(p, "x");
    put_u16(p, 2);
    put_wstr(p, "y");
    put_wstr(p, "z");
    put_u32(p, 77);
    put_wstr(p, "end");
}

static void test_ev_payload_v2_arrays(void **state)
{
    (void)state;
    struct mb m = {0};
    md_v2(&m);
    struct ev_schema *s = NULL;
    assert_int_equal(ev_schema_parse(m.b, m.n, &s), 0);
    assert_true(s->v2);
    assert_int_equal(s->opcode, 10);
    assert_int_equal(s->keywords, 2);
    assert_int_equal(ev_schema_find(s, "Ignored"), AGENT_E_NOTFOUND);
    int args = ev_schema_find(s, "Arguments");
    assert_int_equal(s->fields[args].code, EV_TYPE_ARRAY);
    assert_int_equal(s->fields[args].nchild, 1);
    const struct ev_field *elem = &s->fields[s->fields[args].child];
    assert_int_equal(elem->code, EV_TYPE_OBJECT);
    assert_true(elem->in_array);
    assert_int_equal(elem->nchild, 2);
    assert_string_equal(s->fields[elem->child + 1].name, "Value");
    assert_true(s->fields[elem->child + 1].in_array);
    assert_int_equal(ev_schema_find(s, "Arguments.Key"), AGENT_E_NOTFOUND);
    int ints = ev_schema_find(s, "Ints");
    assert_int_equal(s->fields[s->fields[ints].child].size, 4);
    assert_int_equal(s->fields[ev_schema_find(s, "Nested")].size, -1);

    struct mb p = {0};
    payload_v2(&p);
    struct ev_record rec;
    assert_int_equal(ev_record_decode(&rec, s, p.b, p.n), 0);
    int64_t i = 0;
    assert_int_equal(ev_record_path_i64(&rec, "Level", &i), 0);
    assert_int_equal(i, 4);
    assert_int_equal(rec.v[args].count, 2);
    assert_int_equal(rec.v[ints].count, 3);
    assert_int_equal(rec.v[ints].len, 12);
    assert_int_equal(ev_record_path_i64(&rec, "Nested.Id", &i), 0);
    assert_int_equal(i, 77);
    char tail[8];
    assert_int_equal(ev_record_path_str(&rec, "Tail", tail, sizeof(tail)), 0);
    assert_string_equal(tail, "end");
    double d;
    assert_int_equal(ev_record_f64(&rec, elem->child, &d), AGENT_E_NOTFOUND); /* in an array */
    for (size_t n = 0; n < p.n; n++) {
        assert_int_equal(ev_record_decode(&rec, s, p.b, n), AGENT_E_PROTO);
    }
    /* A huge element count with too few bytes, fixed and variable elements. */
    struct mb q = {0};
    put_u32(&q, 4);
    put_u16(&q, 0xFFFF);
    put_wstr(&q, "a");
    assert_int_equal(ev_record_decode(&rec, s, q.b, q.n), AGENT_E_PROTO);
    q.n = 0;
    put_u32(&q, 4);
    put_u16(&q, 0);
    put_u16(&q, 0xFFFF);
    put_u32(&q, 1);
    assert_int_equal(ev_record_decode(&rec, s, q.b, q.n), AGENT_E_PROTO);
    ev_schema_free(s);
}

/* Every prefix of a record parses or is refused as malformed; none is misread. */
static void test_ev_payload_prefixes(void **state)
{
    (void)state;
    struct mb m = {0};
    md_v2(&m);
    size_t ok = 0;
    for (size_t n = 0; n <= m.n; n++) {
        struct ev_schema *s = NULL;
        int rc = ev_schema_parse(m.b, n, &s);
        assert_true(rc == 0 || rc == AGENT_E_PROTO);
        if (rc == 0) {
            ok++;
            ev_schema_free(s);
        }
    }
    /* After level (no fields), after the V1 list, after the OpCode tag, after V2Params, whole. */
    assert_int_equal(ok, 5);
}

struct bad {
    const char *what;
    int rc;
};

static void bad_v1_code(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 1);
    put_u32(m, 2); /* no type 2 */
    put_wstr(m, "x");
}

static void bad_count(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 0xFFFFFFFFu);
    put_u32(m, 9);
    put_wstr(m, "x");
}

static void bad_depth(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 1);
    for (int k = 0; k < 20; k++) {
        put_u32(m, 1);
        put_u32(m, k == 19 ? 0 : 1);
    }
    for (int k = 0; k < 20; k++) {
        put_wstr(m, "o");
    }
}

static void bad_too_many(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 200);
    for (int k = 0; k < 200; k++) {
        put_u32(m, 9);
        put_wstr(m, "f");
    }
}

static void bad_names(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 100);
    for (int k = 0; k < 100; k++) {
        put_u32(m, 9);
        for (int c = 0; c < 60; c++) {
            put_u16(m, 'n');
        }
        put_u16(m, 0);
    }
}

static void bad_unterminated(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 1);
    put_u32(m, 9);
    put_u16(m, 'x');
}

static void bad_v2_size(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 0);
    put_u32(m, 8);
    m->b[m->n++] = 2;
    put_u32(m, 1);
    put_u32(m, 2); /* a field size under 4 */
}

static void bad_v2_code(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 0);
    put_u32(m, 14);
    m->b[m->n++] = 2;
    put_u32(m, 1);
    put_u32(m, 10);
    put_u16(m, 0);
    put_u32(m, 20); /* V6's VarInt: not a V5 code */
}

static void bad_tag_len(struct mb *m)
{
    md_head(m, 1, "P", "E", 0);
    put_u32(m, 0);
    put_u32(m, 100);
    m->b[m->n++] = 1;
    m->b[m->n++] = 1;
}

static void test_ev_payload_malformed(void **state)
{
    (void)state;
    static const struct {
        void (*make)(struct mb *);
        int rc;
    } cases[] = {
        {bad_v1_code, AGENT_E_PROTO}, {bad_count, AGENT_E_PROTO},
        {bad_depth, AGENT_E_PROTO},   {bad_too_many, AGENT_E_TOOBIG},
        {bad_names, AGENT_E_TOOBIG},  {bad_unterminated, AGENT_E_PROTO},
        {bad_v2_size, AGENT_E_PROTO}, {bad_v2_code, AGENT_E_PROTO},
        {bad_tag_len, AGENT_E_PROTO},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct mb m = {0};
        cases[k].make(&m);
        struct ev_schema *s = NULL;
        assert_int_equal(ev_schema_parse(m.b, m.n, &s), cases[k].rc);
        assert_null(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_payload_v1_nested),
        cmocka_unit_test(test_ev_payload_v2_arrays),
        cmocka_unit_test(test_ev_payload_prefixes),
        cmocka_unit_test(test_ev_payload_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
