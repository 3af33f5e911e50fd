/* SPDX-License-Identifier: MIT */
/*
 * otlp/otlp.c: the OTLP codec. Protobuf bytes are checked against vectors derived by hand from
 * opentelemetry-proto's .proto files (each vector's comment walks through its tags: a tag is
 * field << 3 | wire type, with wire types 0 varint, 1 64-bit, 2 length-delimited, 5 32-bit; see
 * docs/otlp.md §2), JSON by parsing it back with cJSON, and a whole request by Google's own
 * decoder (`protoc --decode_raw`, Debian's protobuf-compiler, installed by `make deps`).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "otlp.h"

static void expect_bytes(const struct buf *b, const uint8_t *want, size_t n)
{
    const uint8_t *got = buf_data(b);
    if (buf_size(b) != n || memcmp(got, want, n) != 0) {
        fprintf(stderr, "got %zu bytes:", buf_size(b));
        for (size_t i = 0; i < buf_size(b); i++) {
            fprintf(stderr, " %02x", got[i]);
        }
        fprintf(stderr, "\nwant %zu bytes:", n);
        for (size_t i = 0; i < n; i++) {
            fprintf(stderr, " %02x", want[i]);
        }
        fprintf(stderr, "\n");
        fail();
    }
}

/* The JSON piece in b, parsed (the caller deletes it). */
static cJSON *parse(struct buf *b)
{
    cJSON *j = cJSON_ParseWithLength((const char *)buf_data(b), buf_size(b));
    if (j == NULL) {
        fprintf(stderr, "not JSON: %.*s\n", (int)buf_size(b), (const char *)buf_data(b));
    }
    assert_non_null(j);
    return j;
}

static const cJSON *get(const cJSON *o, const char *name)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, name);
    if (c == NULL) {
        fprintf(stderr, "no member %s in %s\n", name, cJSON_PrintUnformatted(o));
    }
    assert_non_null(c);
    return c;
}

static void expect_str(const cJSON *o, const char *name, const char *want)
{
    const cJSON *c = get(o, name);
    assert_true(cJSON_IsString(c));
    assert_string_equal(c->valuestring, want);
}

static void expect_num(const cJSON *o, const char *name, double want)
{
    const cJSON *c = get(o, name);
    assert_true(cJSON_IsNumber(c));
    assert_true(c->valuedouble == want);
}

static const uint8_t TRACE[16] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xf0};
static const uint8_t SPAN[8] = {0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8};
static const uint8_t PARENT[8] = {0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8};

static void test_resource_attrs(void **state)
{
    (void)state;
    const struct otlp_kv kv[] = {
        {.key = "a", .kind = OTLP_STR, .str = "b"},
        {.key = "n", .kind = OTLP_INT, .i = -1},
        {.key = "d", .kind = OTLP_DOUBLE, .d = 1.5},
        {.key = "t", .kind = OTLP_BOOL, .b = true},
    };
    const struct otlp_resource r = {kv, 4};
    /*
     * Resource.attributes is field 1 (tag 0x0a), each a KeyValue: key 1 (0x0a), value 2 (0x12)
     * holding AnyValue: string_value 1 (0x0a), bool_value 2 (0x10, varint), int_value 3 (0x18,
     * varint: -1 is ten bytes, ff x9 01), double_value 4 (0x21, 64-bit little-endian; 1.5 is
     * 0x3ff8000000000000).
     */
    static const uint8_t want[] = {
        0x0a, 0x08, 0x0a, 0x01, 'a',  0x12, 0x03, 0x0a, 0x01, 'b',        /* a = "b" */
        0x0a, 0x10, 0x0a, 0x01, 'n',  0x12, 0x0b, 0x18, 0xff, 0xff, 0xff, /* n = -1 */
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,                         /* */
        0x0a, 0x0e, 0x0a, 0x01, 'd',  0x12, 0x09, 0x21, 0,    0,    0,
        0,    0,    0,    0xf8, 0x3f,                         /* d = 1.5 */
        0x0a, 0x07, 0x0a, 0x01, 't',  0x12, 0x02, 0x10, 0x01, /* t = true */
    };
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(otlp_resource_encode(&r, OTLP_PROTOBUF, &b), 0);
    expect_bytes(&b, want, sizeof(want));

    buf_reset(&b);
    assert_int_equal(otlp_resource_encode(&r, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    const cJSON *attrs = get(j, "attributes");
    assert_true(cJSON_IsArray(attrs));
    assert_int_equal(cJSON_GetArraySize(attrs), 4);
    expect_str(cJSON_GetArrayItem(attrs, 0), "key", "a");
    expect_str(get(cJSON_GetArrayItem(attrs, 0), "value"), "stringValue", "b");
    /* int64 is a decimal string in OTLP's JSON, double a number, bool a boolean */
    expect_str(get(cJSON_GetArrayItem(attrs, 1), "value"), "intValue", "-1");
    expect_num(get(cJSON_GetArrayItem(attrs, 2), "value"), "doubleValue", 1.5);
    assert_true(cJSON_IsTrue(get(get(cJSON_GetArrayItem(attrs, 3), "value"), "boolValue")));
    cJSON_Delete(j);

    /* No attributes: an empty message, and {} */
    const struct otlp_resource empty = {NULL, 0};
    buf_reset(&b);
    assert_int_equal(otlp_resource_encode(&empty, OTLP_PROTOBUF, &b), 0);
    assert_int_equal(buf_size(&b), 0);
    assert_int_equal(otlp_resource_encode(&empty, OTLP_JSON, &b), 0);
    assert_string_equal(buf_cstr(&b), "{}");

    /* A string attribute without its string, an attribute without a key: refused, nothing
     * written */
    const struct otlp_kv bad[] = {{.key = "a", .kind = OTLP_STR, .str = NULL}};
    const struct otlp_kv nokey[] = {{.key = NULL, .kind = OTLP_INT, .i = 1}};
    buf_reset(&b);
    assert_int_equal(otlp_resource_encode(&(struct otlp_resource){bad, 1}, OTLP_PROTOBUF, &b),
                     AGENT_E_INVAL);
    assert_int_equal(otlp_resource_encode(&(struct otlp_resource){nokey, 1}, OTLP_JSON, &b),
                     AGENT_E_INVAL);
    assert_int_equal(otlp_resource_encode(NULL, OTLP_JSON, &b), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
}

static void test_scope(void **state)
{
    (void)state;
    /* InstrumentationScope: name 1 (0x0a), version 2 (0x12); an empty version is left out */
    static const uint8_t want[] = {0x0a, 0x01, 's', 0x12, 0x01, '1'};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(otlp_scope_encode(&(struct otlp_scope){"s", "1", NULL, 0}, OTLP_PROTOBUF, &b),
                     0);
    expect_bytes(&b, want, sizeof(want));
    buf_reset(&b);
    assert_int_equal(otlp_scope_encode(&(struct otlp_scope){"s", "", NULL, 0}, OTLP_PROTOBUF, &b),
                     0);
    expect_bytes(&b, want, 3);
    buf_reset(&b);
    assert_int_equal(otlp_scope_encode(&(struct otlp_scope){"s", NULL, NULL, 0}, OTLP_JSON, &b), 0);
    assert_string_equal(buf_cstr(&b), "{\"name\":\"s\"}");
    buf_fini(&b);
}

static struct otlp_log full_log(void)
{
    static const struct otlp_kv kv[] = {{.key = "t", .kind = OTLP_BOOL, .b = true}};
    struct otlp_log l = {
        .time_unix_nano = 1,
        .observed_unix_nano = 2,
        .severity_number = 9,
        .severity_text = "I",
        .body = "hi",
        .attrs = kv,
        .nattrs = 1,
        .has_trace = true,
        .flags = 1,
        .event_name = "e",
    };
    memcpy(l.trace_id, TRACE, 16);
    memcpy(l.span_id, SPAN, 8);
    return l;
}

static void test_log(void **state)
{
    (void)state;
    const struct otlp_log l = full_log();
    /*
     * LogRecord in field order: time_unix_nano 1 (0x09, fixed64), severity_number 2 (0x10),
     * severity_text 3 (0x1a), body 5 (0x2a, AnyValue with string_value 0x0a), attributes 6
     * (0x32), flags 8 (0x45, fixed32), trace_id 9 (0x4a), span_id 10 (0x52),
     * observed_time_unix_nano 11 (0x59, fixed64), event_name 12 (0x62).
     */
    static const uint8_t want[] = {
        0x09, 1,    0,    0,    0,    0,    0,    0,    0,          /* time 1 */
        0x10, 9,                                                    /* INFO */
        0x1a, 1,    'I',                                            /* "I" */
        0x2a, 4,    0x0a, 2,    'h',  'i',                          /* body "hi" */
        0x32, 7,    0x0a, 1,    't',  0x12, 2,    0x10, 1,          /* t = true */
        0x45, 1,    0,    0,    0,                                  /* flags 1 */
        0x4a, 16,   0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* trace id */
        0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xf0,             /* */
        0x52, 8,    0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, /* span id */
        0x59, 2,    0,    0,    0,    0,    0,    0,    0,          /* observed 2 */
        0x62, 1,    'e',                                            /* event name */
    };
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(otlp_log_encode(&l, OTLP_PROTOBUF, &b), 0);
    expect_bytes(&b, want, sizeof(want));

    /* Without a trace: no flags, no ids; nothing else set: nothing at all */
    struct otlp_log bare = {.has_trace = false, .flags = 1};
    buf_reset(&b);
    assert_int_equal(otlp_log_encode(&bare, OTLP_PROTOBUF, &b), 0);
    assert_int_equal(buf_size(&b), 0);
    bare.severity_number = 25;
    assert_int_equal(otlp_log_encode(&bare, OTLP_PROTOBUF, &b), AGENT_E_INVAL);

    /* A body past 127 bytes: two-byte lengths for the AnyValue (203 = 0xcb 0x01) and the string
     * (200 = 0xc8 0x01) */
    char big[201];
    memset(big, 'x', 200);
    big[200] = '\0';
    struct otlp_log lb = {.body = big};
    buf_reset(&b);
    assert_int_equal(otlp_log_encode(&lb, OTLP_PROTOBUF, &b), 0);
    assert_int_equal(buf_size(&b), 3 + 3 + 200);
    static const uint8_t head[] = {0x2a, 0xcb, 0x01, 0x0a, 0xc8, 0x01, 'x'};
    assert_memory_equal(buf_data(&b), head, sizeof(head));
    assert_int_equal(buf_data(&b)[buf_size(&b) - 1], 'x');

    buf_reset(&b);
    assert_int_equal(otlp_log_encode(&l, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    expect_str(j, "timeUnixNano", "1");
    expect_str(j, "observedTimeUnixNano", "2");
    expect_num(j, "severityNumber", 9);
    expect_str(j, "severityText", "I");
    expect_str(get(j, "body"), "stringValue", "hi");
    expect_num(j, "flags", 1);
    /* ids are lowercase hex in OTLP's JSON, not base64 */
    expect_str(j, "traceId", "0102030405060708090a0b0c0d0e0ff0");
    expect_str(j, "spanId", "a1a2a3a4a5a6a7a8");
    expect_str(j, "eventName", "e");
    assert_int_equal(cJSON_GetArraySize(get(j, "attributes")), 1);
    assert_int_equal(cJSON_GetArraySize(j), 10); /* all ten set fields, no others */
    cJSON_Delete(j);
    buf_fini(&b);
}

static void test_span(void **state)
{
    (void)state;
    struct otlp_span s = {
        .has_parent = true,
        .flags = 0x101,
        .name = "x",
        .kind = OTLP_SPAN_SERVER,
        .start_unix_nano = 3,
        .end_unix_nano = 4,
        .status = OTLP_STATUS_ERROR,
    };
    memcpy(s.trace_id, TRACE, 16);
    memcpy(s.span_id, SPAN, 8);
    memcpy(s.parent_span_id, PARENT, 8);
    /*
     * Span: trace_id 1 (0x0a), span_id 2 (0x12), parent_span_id 4 (0x22), name 5 (0x2a), kind 6
     * (0x30), start 7 (0x39, fixed64), end 8 (0x41, fixed64), status 15 (0x7a; Status.code is
     * field 3, 0x18), flags 16 (16 << 3 | 5 = 133: the two-byte varint 0x85 0x01, then fixed32).
     */
    static const uint8_t want[] = {
        0x0a, 16,   0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, /* trace id */
        0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, 0xf0,             /* */
        0x12, 8,    0xa1, 0xa2, 0xa3, 0xa4, 0xa5, 0xa6, 0xa7, 0xa8, /* span id */
        0x22, 8,    0xb1, 0xb2, 0xb3, 0xb4, 0xb5, 0xb6, 0xb7, 0xb8, /* parent */
        0x2a, 1,    'x',                                            /* name */
        0x30, 2,                                                    /* SERVER */
        0x39, 3,    0,    0,    0,    0,    0,    0,    0,          /* start */
        0x41, 4,    0,    0,    0,    0,    0,    0,    0,          /* end */
        0x7a, 2,    0x18, 2,                                        /* status ERROR */
        0x85, 0x01, 0x01, 0x01, 0,    0,                            /* flags 0x101 */
    };
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(otlp_span_encode(&s, OTLP_PROTOBUF, &b), 0);
    expect_bytes(&b, want, sizeof(want));

    s.status_message = "boom";
    s.trace_state = "k=v";
    buf_reset(&b);
    assert_int_equal(otlp_span_encode(&s, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    expect_str(j, "traceId", "0102030405060708090a0b0c0d0e0ff0");
    expect_str(j, "spanId", "a1a2a3a4a5a6a7a8");
    expect_str(j, "parentSpanId", "b1b2b3b4b5b6b7b8");
    expect_str(j, "traceState", "k=v");
    expect_str(j, "name", "x");
    expect_num(j, "kind", 2); /* enums are integers */
    expect_str(j, "startTimeUnixNano", "3");
    expect_str(j, "endTimeUnixNano", "4");
    expect_num(j, "flags", 0x101);
    expect_num(get(j, "status"), "code", 2);
    expect_str(get(j, "status"), "message", "boom");
    cJSON_Delete(j);

    /* A root span: no parentSpanId; status UNSET without a message: no status */
    s.has_parent = false;
    s.status = OTLP_STATUS_UNSET;
    s.status_message = NULL;
    buf_reset(&b);
    assert_int_equal(otlp_span_encode(&s, OTLP_JSON, &b), 0);
    j = parse(&b);
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "parentSpanId"));
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "status"));
    cJSON_Delete(j);

    s.name = NULL;
    buf_reset(&b);
    assert_int_equal(otlp_span_encode(&s, OTLP_PROTOBUF, &b), AGENT_E_INVAL);
    s.name = "x";
    s.kind = (enum otlp_span_kind)6;
    assert_int_equal(otlp_span_encode(&s, OTLP_PROTOBUF, &b), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
}

static void encode_pb(const struct otlp_metric *m, struct buf *b)
{
    buf_reset(b);
    assert_int_equal(otlp_metric_encode(m, OTLP_PROTOBUF, b), 0);
}

static void test_metric_gauge_sum(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    const struct otlp_point gp = {.time_unix_nano = 5, .is_int = true, .as_int = 7};
    const struct otlp_metric gauge = {.name = "g", .type = OTLP_GAUGE, .points = &gp, .npoints = 1};
    /*
     * Metric name 1 (0x0a), gauge 5 (0x2a) = Gauge { data_points 1 (0x0a) = NumberDataPoint {
     * time_unix_nano 3 (0x19, fixed64), as_int 6 (0x31, sfixed64) } }: the point is 18 bytes,
     * the Gauge 20.
     */
    static const uint8_t want_gauge[] = {
        0x0a, 1, 'g', 0x2a, 20, 0x0a, 18,       /* */
        0x19, 5, 0,   0,    0,  0,    0,  0, 0, /* time 5 */
        0x31, 7, 0,   0,    0,  0,    0,  0, 0, /* as_int 7 */
    };
    encode_pb(&gauge, &b);
    expect_bytes(&b, want_gauge, sizeof(want_gauge));

    const struct otlp_point sp = {.start_unix_nano = 1, .time_unix_nano = 2, .as_double = 2.5};
    const struct otlp_metric sum = {.name = "c",
                                    .unit = "1",
                                    .type = OTLP_SUM,
                                    .temporality = OTLP_TEMPORALITY_CUMULATIVE,
                                    .monotonic = true,
                                    .points = &sp,
                                    .npoints = 1};
    /*
     * name 1, unit 3 (0x1a), sum 7 (0x3a) = Sum { data_points 1 = { start 2 (0x11), time 3
     * (0x19), as_double 4 (0x21; 2.5 = 0x4004000000000000) } (27 bytes),
     * aggregation_temporality 2 (0x10) CUMULATIVE = 2, is_monotonic 3 (0x18) } (33 bytes).
     */
    static const uint8_t want_sum[] = {
        0x0a, 1, 'c',  0x1a, 1, '1', 0x3a, 33, 0x0a, 27, /* */
        0x11, 1, 0,    0,    0, 0,   0,    0,  0,        /* start 1 */
        0x19, 2, 0,    0,    0, 0,   0,    0,  0,        /* time 2 */
        0x21, 0, 0,    0,    0, 0,   0,    4,  0x40,     /* 2.5 */
        0x10, 2, 0x18, 1,                                /* cumulative, monotonic */
    };
    encode_pb(&sum, &b);
    expect_bytes(&b, want_sum, sizeof(want_sum));

    /* an as_int of 0 is still written (a oneof member); temporality must be given for a sum */
    const struct otlp_point zp = {.is_int = true, .as_int = 0};
    const struct otlp_metric zero = {.name = "z", .type = OTLP_GAUGE, .points = &zp, .npoints = 1};
    static const uint8_t want_zero[] = {0x0a, 1, 'z', 0x2a, 11, 0x0a, 9, 0x31,
                                        0,    0, 0,   0,    0,  0,    0, 0};
    encode_pb(&zero, &b);
    expect_bytes(&b, want_zero, sizeof(want_zero));
    struct otlp_metric bad = sum;
    bad.temporality = 0;
    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&bad, OTLP_PROTOBUF, &b), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);

    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&sum, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    expect_str(j, "name", "c");
    expect_str(j, "unit", "1");
    assert_null(cJSON_GetObjectItemCaseSensitive(j, "description"));
    const cJSON *s = get(j, "sum");
    expect_num(s, "aggregationTemporality", 2);
    assert_true(cJSON_IsTrue(get(s, "isMonotonic")));
    const cJSON *p = cJSON_GetArrayItem(get(s, "dataPoints"), 0);
    expect_str(p, "startTimeUnixNano", "1");
    expect_str(p, "timeUnixNano", "2");
    expect_num(p, "asDouble", 2.5);
    cJSON_Delete(j);

    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&gauge, OTLP_JSON, &b), 0);
    j = parse(&b);
    expect_str(cJSON_GetArrayItem(get(get(j, "gauge"), "dataPoints"), 0), "asInt", "7");
    cJSON_Delete(j);
    buf_fini(&b);
}

static void test_metric_histograms(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    static const struct otlp_kv kv[] = {{.key = "t", .kind = OTLP_BOOL, .b = true}};
    static const uint64_t counts[] = {1, 2};
    static const double bounds[] = {5.0};
    const struct otlp_point hp = {.attrs = kv,
                                  .nattrs = 1,
                                  .count = 3,
                                  .has_sum = true,
                                  .sum = 6.0,
                                  .bucket_counts = counts,
                                  .bounds = bounds,
                                  .nbounds = 1};
    const struct otlp_metric hist = {.name = "h",
                                     .type = OTLP_HISTOGRAM,
                                     .temporality = OTLP_TEMPORALITY_DELTA,
                                     .points = &hp,
                                     .npoints = 1};
    /*
     * histogram 9 (0x4a) = Histogram { data_points 1 = HistogramDataPoint { count 4 (0x21,
     * fixed64), sum 5 (0x29, double 6.0 = 0x4018000000000000), bucket_counts 6 (0x32, packed
     * fixed64: 16 bytes), explicit_bounds 7 (0x3a, packed double 5.0 = 0x4014000000000000),
     * attributes 9 (0x4a) } (55 bytes), aggregation_temporality 2 DELTA = 1 } (59 bytes).
     */
    static const uint8_t want_hist[] = {
        0x0a, 1,  'h',  0x4a, 59,  0x0a, 55,                   /* */
        0x21, 3,  0,    0,    0,   0,    0,  0,    0,          /* count 3 */
        0x29, 0,  0,    0,    0,   0,    0,  0x18, 0x40,       /* sum 6.0 */
        0x32, 16, 1,    0,    0,   0,    0,  0,    0,    0,    /* bucket 1 */
        2,    0,  0,    0,    0,   0,    0,  0,                /* bucket 2 */
        0x3a, 8,  0,    0,    0,   0,    0,  0,    0x14, 0x40, /* bound 5.0 */
        0x4a, 7,  0x0a, 1,    't', 0x12, 2,  0x10, 1,          /* t = true */
        0x10, 1,                                               /* delta */
    };
    encode_pb(&hist, &b);
    expect_bytes(&b, want_hist, sizeof(want_hist));

    static const uint64_t pos[] = {1, 300};
    const struct otlp_point ep = {.count = 4,
                                  .scale = -1,
                                  .zero_count = 1,
                                  .positive = {.offset = -2, .counts = pos, .ncounts = 2}};
    const struct otlp_metric exph = {.name = "e",
                                     .type = OTLP_EXP_HISTOGRAM,
                                     .temporality = OTLP_TEMPORALITY_CUMULATIVE,
                                     .points = &ep,
                                     .npoints = 1};
    /*
     * exponential_histogram 10 (0x52) = { data_points 1 = { count 4 (0x21), scale 6 (0x30,
     * sint32: zigzag(-1) = 1), zero_count 7 (0x39, fixed64), positive 8 (0x42) = Buckets {
     * offset 1 (0x08, sint32: zigzag(-2) = 3), bucket_counts 2 (0x12, packed varints: 1, and
     * 300 = 0xac 0x02) } } (29 bytes), aggregation_temporality 2 } (33 bytes). No sum (not
     * has_sum), no negative buckets.
     */
    static const uint8_t want_exp[] = {
        0x0a, 1, 'e',  0x52, 33,   0x0a, 29,             /* */
        0x21, 4, 0,    0,    0,    0,    0,  0,    0,    /* count 4 */
        0x30, 1,                                         /* scale -1 */
        0x39, 1, 0,    0,    0,    0,    0,  0,    0,    /* zero count 1 */
        0x42, 7, 0x08, 3,    0x12, 3,    1,  0xac, 0x02, /* positive */
        0x10, 2,                                         /* cumulative */
    };
    encode_pb(&exph, &b);
    expect_bytes(&b, want_exp, sizeof(want_exp));

    static const struct otlp_quantile qs[] = {{0.5, 1.0}};
    const struct otlp_point qp = {
        .count = 2, .has_sum = true, .sum = 3.0, .quantiles = qs, .nquantiles = 1};
    const struct otlp_metric summ = {
        .name = "q", .type = OTLP_SUMMARY, .points = &qp, .npoints = 1};
    /*
     * summary 11 (0x5a) = { data_points 1 = SummaryDataPoint { count 4, sum 5 (3.0 =
     * 0x4008000000000000), quantile_values 6 (0x32) = { quantile 1 (0x09, 0.5 =
     * 0x3fe0000000000000), value 2 (0x11, 1.0 = 0x3ff0000000000000) } } (38 bytes) } (40 bytes).
     */
    static const uint8_t want_summ[] = {
        0x0a, 1,  'q', 0x5a, 40, 0x0a, 38,             /* */
        0x21, 2,  0,   0,    0,  0,    0,  0,    0,    /* count 2 */
        0x29, 0,  0,   0,    0,  0,    0,  8,    0x40, /* sum 3.0 */
        0x32, 18,                                      /* quantile value */
        0x09, 0,  0,   0,    0,  0,    0,  0xe0, 0x3f, /* 0.5 */
        0x11, 0,  0,   0,    0,  0,    0,  0xf0, 0x3f, /* 1.0 */
    };
    encode_pb(&summ, &b);
    expect_bytes(&b, want_summ, sizeof(want_summ));

    /* JSON shapes: counts as decimal strings, bounds as numbers, buckets' offset a number */
    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&hist, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    const cJSON *h = get(j, "histogram");
    expect_num(h, "aggregationTemporality", 1);
    const cJSON *p = cJSON_GetArrayItem(get(h, "dataPoints"), 0);
    expect_str(p, "count", "3");
    expect_num(p, "sum", 6.0);
    const cJSON *bc = get(p, "bucketCounts");
    assert_int_equal(cJSON_GetArraySize(bc), 2);
    assert_string_equal(cJSON_GetArrayItem(bc, 1)->valuestring, "2");
    assert_true(cJSON_GetArrayItem(get(p, "explicitBounds"), 0)->valuedouble == 5.0);
    cJSON_Delete(j);

    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&exph, OTLP_JSON, &b), 0);
    j = parse(&b);
    p = cJSON_GetArrayItem(get(get(j, "exponentialHistogram"), "dataPoints"), 0);
    expect_num(p, "scale", -1);
    expect_str(p, "zeroCount", "1");
    assert_null(cJSON_GetObjectItemCaseSensitive(p, "sum"));
    assert_null(cJSON_GetObjectItemCaseSensitive(p, "negative"));
    expect_num(get(p, "positive"), "offset", -2);
    assert_string_equal(cJSON_GetArrayItem(get(get(p, "positive"), "bucketCounts"), 1)->valuestring,
                        "300");
    assert_null(cJSON_GetObjectItemCaseSensitive(p, "min"));
    cJSON_Delete(j);

    /* min 12 and max 13, optional doubles: written when known */
    struct otlp_point epm = ep;
    epm.has_min_max = true;
    epm.min = 0.5;
    epm.max = 6;
    struct otlp_metric exphm = exph;
    exphm.points = &epm;
    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&exphm, OTLP_JSON, &b), 0);
    j = parse(&b);
    p = cJSON_GetArrayItem(get(get(j, "exponentialHistogram"), "dataPoints"), 0);
    expect_num(p, "min", 0.5);
    expect_num(p, "max", 6);
    cJSON_Delete(j);
    buf_reset(&b);
    encode_pb(&exphm, &b);
    /* ... 0x61 + 0.5 little-endian, 0x69 + 6.0: the last 18 bytes of the point, before the
     * temporality (0x10 0x02) */
    static const uint8_t min_max[] = {0x61, 0, 0, 0, 0, 0, 0, 0xe0, 0x3f,
                                      0x69, 0, 0, 0, 0, 0, 0, 0x18, 0x40};
    assert_true(buf_size(&b) > sizeof(min_max) + 2);
    assert_memory_equal(buf_data(&b) + buf_size(&b) - 2 - sizeof(min_max), min_max,
                        sizeof(min_max));

    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&summ, OTLP_JSON, &b), 0);
    j = parse(&b);
    p = cJSON_GetArrayItem(get(get(j, "summary"), "dataPoints"), 0);
    const cJSON *q = cJSON_GetArrayItem(get(p, "quantileValues"), 0);
    expect_num(q, "quantile", 0.5);
    expect_num(q, "value", 1.0);
    cJSON_Delete(j);

    /* bounds without counts are refused */
    struct otlp_point nobc = hp;
    nobc.bucket_counts = NULL;
    struct otlp_metric badh = hist;
    badh.points = &nobc;
    buf_reset(&b);
    assert_int_equal(otlp_metric_encode(&badh, OTLP_JSON, &b), AGENT_E_INVAL);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
}

/* Non-finite doubles are the strings proto3's JSON mapping names; protobuf keeps their bits. */
static void test_json_doubles(void **state)
{
    (void)state;
    const struct otlp_kv kv[] = {
        {.key = "nan", .kind = OTLP_DOUBLE, .d = NAN},
        {.key = "inf", .kind = OTLP_DOUBLE, .d = INFINITY},
        {.key = "ninf", .kind = OTLP_DOUBLE, .d = -INFINITY},
        {.key = "tenth", .kind = OTLP_DOUBLE, .d = 0.1},
        {.key = "third", .kind = OTLP_DOUBLE, .d = 1.0 / 3.0},
        {.key = "big", .kind = OTLP_INT, .i = INT64_MIN},
    };
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(otlp_resource_encode(&(struct otlp_resource){kv, 6}, OTLP_JSON, &b), 0);
    cJSON *j = parse(&b);
    const cJSON *a = get(j, "attributes");
    expect_str(get(cJSON_GetArrayItem(a, 0), "value"), "doubleValue", "NaN");
    expect_str(get(cJSON_GetArrayItem(a, 1), "value"), "doubleValue", "Infinity");
    expect_str(get(cJSON_GetArrayItem(a, 2), "value"), "doubleValue", "-Infinity");
    /* finite values read back exactly */
    expect_num(get(cJSON_GetArrayItem(a, 3), "value"), "doubleValue", 0.1);
    expect_num(get(cJSON_GetArrayItem(a, 4), "value"), "doubleValue", 1.0 / 3.0);
    expect_str(get(cJSON_GetArrayItem(a, 5), "value"), "intValue", "-9223372036854775808");
    cJSON_Delete(j);
    assert_non_null(strstr(buf_cstr(&b), "\"doubleValue\":0.1}"));
    buf_fini(&b);
}

/* Invalid UTF-8 never passes: each byte that starts no valid sequence becomes U+FFFD. */
static void test_utf8_repair(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    /* "a", a stray 0xff, "b", then a cut three-byte sequence (e2 82) at the end */
    const struct otlp_scope s = {"a\xff"
                                 "b\xe2\x82",
                                 NULL, NULL, 0};
    /* 1 + 3 + 1 + 3 + 3 = 11 bytes */
    static const uint8_t want[] = {0x0a, 11,   'a',  0xef, 0xbf, 0xbd, 'b',
                                   0xef, 0xbf, 0xbd, 0xef, 0xbf, 0xbd};
    assert_int_equal(otlp_scope_encode(&s, OTLP_PROTOBUF, &b), 0);
    expect_bytes(&b, want, sizeof(want));
    /* JSON: the same repair, and escapes for quotes and control characters; valid UTF-8 kept */
    const struct otlp_scope s2 = {"q\"\n\x01\xff\xc3\xa9", NULL, NULL, 0};
    buf_reset(&b);
    assert_int_equal(otlp_scope_encode(&s2, OTLP_JSON, &b), 0);
    assert_string_equal(buf_cstr(&b), "{\"name\":\"q\\\"\\n\\u0001\xef\xbf\xbd\xc3\xa9\"}");
    cJSON *j = parse(&b);
    expect_str(j, "name", "q\"\n\x01\xef\xbf\xbd\xc3\xa9");
    cJSON_Delete(j);
    buf_fini(&b);
}

/* What test_truncate_on_error encodes: a log with a body past 127 bytes (its lengths widen after
 * the fact), a metric with every kind of point field, and a request. */
static int enc_log(enum otlp_format f, struct buf *out)
{
    static char body[160];
    memset(body, 'y', sizeof(body) - 1);
    struct otlp_log l = full_log();
    l.body = body;
    return otlp_log_encode(&l, f, out);
}

static int enc_metric(enum otlp_format f, struct buf *out)
{
    static const struct otlp_kv kv[] = {{.key = "k", .kind = OTLP_STR, .str = "v"}};
    static const uint64_t pos[] = {1, 300, 70000};
    const struct otlp_point p = {.attrs = kv,
                                 .nattrs = 1,
                                 .time_unix_nano = 9,
                                 .count = 5,
                                 .has_sum = true,
                                 .sum = 0.25,
                                 .scale = 2,
                                 .positive = {.offset = 3, .counts = pos, .ncounts = 3},
                                 .negative = {.offset = -1, .counts = pos, .ncounts = 1}};
    const struct otlp_metric m = {.name = "m",
                                  .description = "d",
                                  .unit = "s",
                                  .type = OTLP_EXP_HISTOGRAM,
                                  .temporality = OTLP_TEMPORALITY_DELTA,
                                  .points = &p,
                                  .npoints = 1};
    return otlp_metric_encode(&m, f, out);
}

static int enc_request(enum otlp_format f, struct buf *out)
{
    static const uint8_t item[] = "{\"name\":\"i\"}";
    const struct otlp_piece items[] = {{item, sizeof(item) - 1}, {item, sizeof(item) - 1}};
    const struct otlp_scope_group sg = {{item, sizeof(item) - 1}, items, 2};
    const struct otlp_resource_group rg = {{item, sizeof(item) - 1}, "url", &sg, 1};
    return otlp_request_encode(OTLP_LOGS, f, &rg, 1, out);
}

/*
 * Every cap from nothing to the whole message: the encoder either writes all of it or fails with
 * AGENT_E_TOOBIG and leaves what was in out before the call, byte for byte.
 */
static void test_truncate_on_error(void **state)
{
    (void)state;
    int (*const encoders[])(enum otlp_format, struct buf *) = {enc_log, enc_metric, enc_request};
    for (size_t e = 0; e < sizeof(encoders) / sizeof(encoders[0]); e++) {
        for (int f = OTLP_PROTOBUF; f <= OTLP_JSON; f++) {
            struct buf full;
            buf_init(&full, 0);
            assert_int_equal(buf_append(&full, "XY", 2), 0);
            assert_int_equal(encoders[e]((enum otlp_format)f, &full), 0);
            size_t need = buf_size(&full);
            size_t fails = 0;
            for (size_t cap = 3; cap <= need + 2; cap++) {
                struct buf b;
                buf_init(&b, cap);
                assert_int_equal(buf_append(&b, "XY", 2), 0);
                int rc = encoders[e]((enum otlp_format)f, &b);
                if (rc == 0) {
                    expect_bytes(&b, buf_data(&full), need);
                } else {
                    assert_int_equal(rc, AGENT_E_TOOBIG);
                    expect_bytes(&b, (const uint8_t *)"XY", 2);
                    fails++;
                }
                buf_fini(&b);
            }
            assert_true(fails > need / 2); /* the small caps did fail */
            buf_fini(&full);
        }
    }
}

static const uint8_t PR[] = {'R'}, PS[] = {'S'}, PA[] = {'A'}, PB[] = {'B', 'B'};

static void test_request_protobuf(void **state)
{
    (void)state;
    const struct otlp_piece items[] = {{PA, 1}, {PB, 2}};
    const struct otlp_scope_group sg = {{PS, 1}, items, 2};
    const struct otlp_resource_group rg = {{PR, 1}, "url", &sg, 1};
    /*
     * Export*ServiceRequest { resource_* 1 (0x0a) = { resource 1 (0x0a) "R", scope_* 2 (0x12) =
     * { scope 1 (0x0a) "S", items 2 (0x12) "A", "BB" } (10 bytes), schema_url 3 (0x1a) "url" }
     * (20 bytes) }: the pieces copied as they are. The three signals number their fields alike.
     */
    static const uint8_t want[] = {0x0a, 20,  0x0a, 1, 'R', 0x12, 10,   0x0a, 1,   'S', 0x12,
                                   1,    'A', 0x12, 2, 'B', 'B',  0x1a, 3,    'u', 'r', 'l'};
    struct buf b;
    buf_init(&b, 0);
    for (int sig = OTLP_LOGS; sig <= OTLP_TRACES; sig++) {
        buf_reset(&b);
        assert_int_equal(otlp_request_encode((enum otlp_signal)sig, OTLP_PROTOBUF, &rg, 1, &b), 0);
        expect_bytes(&b, want, sizeof(want));
    }
    /* Nothing to send: an empty request */
    buf_reset(&b);
    assert_int_equal(otlp_request_encode(OTLP_LOGS, OTLP_PROTOBUF, NULL, 0, &b), 0);
    assert_int_equal(buf_size(&b), 0);
    /* A piece past 127 bytes: every enclosing length grows to two bytes */
    uint8_t big[300];
    memset(big, 'z', sizeof(big));
    const struct otlp_piece bigitem = {big, sizeof(big)};
    const struct otlp_scope_group bsg = {{PS, 1}, &bigitem, 1};
    const struct otlp_resource_group brg = {{NULL, 0}, NULL, &bsg, 1};
    /* item: 0x12 0xac 0x02 + 300 = 303; scope group: 3 + 303 = 306 (0xb2 0x02); resource
     * group: 2 (empty resource) + 3 + 306 = 311 (0xb7 0x02); request 3 + 311 = 314 */
    static const uint8_t head[] = {0x0a, 0xb7, 0x02, 0x0a, 0x00, 0x12, 0xb2, 0x02,
                                   0x0a, 1,    'S',  0x12, 0xac, 0x02, 'z'};
    buf_reset(&b);
    assert_int_equal(otlp_request_encode(OTLP_METRICS, OTLP_PROTOBUF, &brg, 1, &b), 0);
    assert_int_equal(buf_size(&b), 314);
    assert_memory_equal(buf_data(&b), head, sizeof(head));
    /* NULL pieces are refused, out untouched */
    const struct otlp_piece nullitem = {NULL, 3};
    const struct otlp_scope_group nsg = {{PS, 1}, &nullitem, 1};
    const struct otlp_resource_group nrg = {{PR, 1}, NULL, &nsg, 1};
    buf_reset(&b);
    assert_int_equal(buf_append(&b, "XY", 2), 0);
    assert_int_equal(otlp_request_encode(OTLP_LOGS, OTLP_PROTOBUF, &nrg, 1, &b), AGENT_E_INVAL);
    assert_int_equal(otlp_request_encode(OTLP_LOGS, OTLP_JSON, &nrg, 1, &b), AGENT_E_INVAL);
    expect_bytes(&b, (const uint8_t *)"XY", 2);
    buf_fini(&b);
}

/* A JSON request made of JSON pieces encoded by the item encoders, parsed back. */
static void test_request_json(void **state)
{
    (void)state;
    struct buf res, scope, span1, span2, req;
    buf_init(&res, 0);
    buf_init(&scope, 0);
    buf_init(&span1, 0);
    buf_init(&span2, 0);
    buf_init(&req, 0);
    const struct otlp_kv rkv[] = {{.key = "service.name", .kind = OTLP_STR, .str = "app"}};
    assert_int_equal(otlp_resource_encode(&(struct otlp_resource){rkv, 1}, OTLP_JSON, &res), 0);
    assert_int_equal(
        otlp_scope_encode(&(struct otlp_scope){"src", "1.0", NULL, 0}, OTLP_JSON, &scope), 0);
    struct otlp_span s = {.name = "one", .kind = OTLP_SPAN_INTERNAL};
    memcpy(s.trace_id, TRACE, 16);
    memcpy(s.span_id, SPAN, 8);
    assert_int_equal(otlp_span_encode(&s, OTLP_JSON, &span1), 0);
    s.name = "two";
    assert_int_equal(otlp_span_encode(&s, OTLP_JSON, &span2), 0);
    const struct otlp_piece items[] = {{buf_data(&span1), buf_size(&span1)},
                                       {buf_data(&span2), buf_size(&span2)}};
    const struct otlp_scope_group sgs[] = {
        {{buf_data(&scope), buf_size(&scope)}, items, 2},
        {{buf_data(&scope), buf_size(&scope)}, items, 1},
    };
    const struct otlp_resource_group rgs[] = {
        {{buf_data(&res), buf_size(&res)}, "https://opentelemetry.io/schemas/1.26.0", sgs, 2},
        {{buf_data(&res), buf_size(&res)}, NULL, sgs + 1, 1},
    };
    assert_int_equal(otlp_request_encode(OTLP_TRACES, OTLP_JSON, rgs, 2, &req), 0);
    cJSON *j = parse(&req);
    const cJSON *rs = get(j, "resourceSpans");
    assert_int_equal(cJSON_GetArraySize(rs), 2);
    const cJSON *r0 = cJSON_GetArrayItem(rs, 0);
    expect_str(r0, "schemaUrl", "https://opentelemetry.io/schemas/1.26.0");
    const cJSON *attr = cJSON_GetArrayItem(get(get(r0, "resource"), "attributes"), 0);
    expect_str(attr, "key", "service.name");
    const cJSON *ss = get(r0, "scopeSpans");
    assert_int_equal(cJSON_GetArraySize(ss), 2);
    expect_str(get(cJSON_GetArrayItem(ss, 0), "scope"), "version", "1.0");
    const cJSON *spans = get(cJSON_GetArrayItem(ss, 0), "spans");
    assert_int_equal(cJSON_GetArraySize(spans), 2);
    expect_str(cJSON_GetArrayItem(spans, 1), "name", "two");
    assert_int_equal(cJSON_GetArraySize(get(cJSON_GetArrayItem(ss, 1), "spans")), 1);
    assert_null(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(rs, 1), "schemaUrl"));
    cJSON_Delete(j);

    /* The signal names the lists */
    buf_reset(&req);
    assert_int_equal(otlp_request_encode(OTLP_LOGS, OTLP_JSON, rgs, 1, &req), 0);
    j = parse(&req);
    assert_non_null(
        cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(j, "resourceLogs"), 0), "scopeLogs"), 0));
    assert_non_null(
        get(cJSON_GetArrayItem(get(cJSON_GetArrayItem(get(j, "resourceLogs"), 0), "scopeLogs"), 0),
            "logRecords"));
    cJSON_Delete(j);
    buf_reset(&req);
    assert_int_equal(otlp_request_encode(OTLP_METRICS, OTLP_JSON, NULL, 0, &req), 0);
    assert_string_equal(buf_cstr(&req), "{}");
    buf_fini(&res);
    buf_fini(&scope);
    buf_fini(&span1);
    buf_fini(&span2);
    buf_fini(&req);
}

static int decode(enum otlp_signal sig, enum otlp_format f, const void *p, size_t n,
                  int64_t *rejected, char *msg, size_t msglen)
{
    /* an exactly sized copy, so a read past the end is a sanitizer/valgrind error */
    uint8_t *copy = malloc(n > 0 ? n : 1);
    assert_non_null(copy);
    memcpy(copy, p, n);
    int rc = otlp_response_decode(sig, f, copy, n, rejected, msg, msglen);
    free(copy);
    return rc;
}

static void test_response_protobuf(void **state)
{
    (void)state;
    int64_t rej = -1;
    char msg[64];
    /* an unknown field 2 (0x10, varint 5) first, then partial_success 1 (0x0a, 5 bytes) = {
     * rejected 1 (0x08) 3, error_message 2 (0x12) "x" } */
    static const uint8_t ok[] = {0x10, 5, 0x0a, 5, 0x08, 3, 0x12, 1, 'x'};
    assert_int_equal(decode(OTLP_LOGS, OTLP_PROTOBUF, ok, sizeof(ok), &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 3);
    assert_string_equal(msg, "x");
    /* empty: full success */
    assert_int_equal(decode(OTLP_TRACES, OTLP_PROTOBUF, "", 0, &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 0);
    assert_string_equal(msg, "");
    /* every proper prefix past the unknown field ends inside a field */
    for (size_t n = 1; n < sizeof(ok); n++) {
        if (n == 2) {
            continue; /* the whole unknown field alone is a valid response */
        }
        rej = -1;
        assert_int_equal(decode(OTLP_LOGS, OTLP_PROTOBUF, ok, n, &rej, msg, sizeof(msg)),
                         AGENT_E_PROTO);
        assert_int_equal(rej, 0);
        assert_string_equal(msg, "");
    }
    /* garbage */
    static const uint8_t group[] = {0x0b, 0x0c};  /* wire type 3 (a group) */
    static const uint8_t field0[] = {0x02, 0x00}; /* field number 0 */
    static const uint8_t wt[] = {0x08, 0x01};     /* partial_success as a varint */
    static const uint8_t negative[] = {0x0a, 11,   0x08, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0x01}; /* rejected -1 */
    static const uint8_t longvar[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                      0xff, 0xff, 0xff, 0xff, 0xff, 0x01}; /* 11-byte varint */
    static const uint8_t overlen[] = {0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x08};
    const struct {
        const uint8_t *p;
        size_t n;
    } bad[] = {{group, 2},
               {field0, 2},
               {wt, 2},
               {negative, sizeof(negative)},
               {longvar, sizeof(longvar)},
               {overlen, sizeof(overlen)}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(
            decode(OTLP_METRICS, OTLP_PROTOBUF, bad[i].p, bad[i].n, &rej, msg, sizeof(msg)),
            AGENT_E_PROTO);
    }
    /* The message: cut at a character boundary, control characters and bad bytes replaced */
    static const uint8_t text[] = {0x0a, 10, 0x12, 8, 'h', 0xc3, 0xa9, 'l', '\n', 0xff, 'o', 'o'};
    char small[4];
    assert_int_equal(
        decode(OTLP_LOGS, OTLP_PROTOBUF, text, sizeof(text), &rej, small, sizeof(small)), 0);
    assert_string_equal(small, "h\xc3\xa9"); /* "hé" + "l" would be 4 bytes */
    assert_int_equal(decode(OTLP_LOGS, OTLP_PROTOBUF, text, sizeof(text), NULL, msg, sizeof(msg)),
                     0);
    assert_string_equal(msg, "h\xc3\xa9l \xef\xbf\xbdoo");
}

static void test_response_json(void **state)
{
    (void)state;
    int64_t rej = -1;
    char msg[64];
    const char *s = "{\"partialSuccess\":{\"rejectedSpans\":\"2\",\"errorMessage\":\"bad\"}}";
    assert_int_equal(decode(OTLP_TRACES, OTLP_JSON, s, strlen(s), &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 2);
    assert_string_equal(msg, "bad");
    /* another signal's count is not this one's */
    assert_int_equal(decode(OTLP_LOGS, OTLP_JSON, s, strlen(s), &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 0);
    s = "{\"partialSuccess\":{\"rejectedDataPoints\":7}}";
    assert_int_equal(decode(OTLP_METRICS, OTLP_JSON, s, strlen(s), &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 7);
    s = "{\"partialSuccess\":{\"rejectedLogRecords\":\"9223372036854775807\"}}";
    assert_int_equal(decode(OTLP_LOGS, OTLP_JSON, s, strlen(s), &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, INT64_MAX);
    assert_int_equal(decode(OTLP_LOGS, OTLP_JSON, "{}", 2, &rej, msg, sizeof(msg)), 0);
    assert_int_equal(rej, 0);
    static const char *const bad[] = {
        "{",
        "[]",
        "null",
        "\"x\"",
        "{\"partialSuccess\":5}",
        "{\"partialSuccess\":{\"rejectedLogRecords\":-1}}",
        "{\"partialSuccess\":{\"rejectedLogRecords\":1.5}}",
        "{\"partialSuccess\":{\"rejectedLogRecords\":\"9223372036854775808\"}}",
        "{\"partialSuccess\":{\"rejectedLogRecords\":\"12x\"}}",
        "{\"partialSuccess\":{\"rejectedLogRecords\":true}}",
        "{\"partialSuccess\":{\"errorMessage\":3}}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rej = -1;
        assert_int_equal(
            decode(OTLP_LOGS, OTLP_JSON, bad[i], strlen(bad[i]), &rej, msg, sizeof(msg)),
            AGENT_E_PROTO);
        assert_int_equal(rej, 0);
    }
    /* truncated: every proper prefix of a response is refused */
    s = "{\"partialSuccess\":{\"rejectedSpans\":\"2\"}}";
    for (size_t n = 1; n < strlen(s); n++) {
        assert_int_equal(decode(OTLP_TRACES, OTLP_JSON, s, n, &rej, msg, sizeof(msg)),
                         AGENT_E_PROTO);
    }
}

/*
 * Google's decoder reads a whole request: protoc --decode_raw prints the fields it finds by
 * number, nested messages in braces. The request holds a log with a 200-byte body so the
 * two-byte lengths are read by someone else too.
 */
static void expect_in(const char *out, const char *needle)
{
    if (strstr(out, needle) == NULL) {
        fprintf(stderr, "not found:\n%s\nin protoc's output:\n%s\n", needle, out);
        fail();
    }
}

static void test_protoc_decodes_request(void **state)
{
    (void)state;
    const char *protoc = getenv("DOTMON_PROTOC");
    if (protoc == NULL || *protoc == '\0') {
        fail_msg("protoc not found when the build was configured: `make deps` installs Debian's "
                 "protobuf-compiler");
    }
    struct buf res, scope, item, req;
    buf_init(&res, 0);
    buf_init(&scope, 0);
    buf_init(&item, 0);
    buf_init(&req, 0);
    const struct otlp_kv rkv[] = {{.key = "service.name", .kind = OTLP_STR, .str = "app"}};
    assert_int_equal(otlp_resource_encode(&(struct otlp_resource){rkv, 1}, OTLP_PROTOBUF, &res), 0);
    assert_int_equal(
        otlp_scope_encode(&(struct otlp_scope){"cat", NULL, NULL, 0}, OTLP_PROTOBUF, &scope), 0);
    char body[201];
    memset(body, 'b', 200);
    body[0] = '.'; /* 0x2e: wire type 6 does not exist, so decode_raw prints a string */
    body[200] = '\0';
    struct otlp_log l = full_log();
    l.body = body;
    assert_int_equal(otlp_log_encode(&l, OTLP_PROTOBUF, &item), 0);
    const struct otlp_piece it = {buf_data(&item), buf_size(&item)};
    const struct otlp_scope_group sg = {{buf_data(&scope), buf_size(&scope)}, &it, 1};
    const struct otlp_resource_group rg = {{buf_data(&res), buf_size(&res)}, NULL, &sg, 1};
    assert_int_equal(otlp_request_encode(OTLP_LOGS, OTLP_PROTOBUF, &rg, 1, &req), 0);

    const char *tmp = getenv("TMPDIR");
    char path[256];
    assert_true(snprintf(path, sizeof(path), "%s/otlp_req_%d.bin", tmp ? tmp : "/tmp",
                         (int)getpid()) < (int)sizeof(path));
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf_data(&req), 1, buf_size(&req), fp), buf_size(&req));
    assert_int_equal(fclose(fp), 0);
    char cmd[600];
    assert_true(snprintf(cmd, sizeof(cmd), "'%s' --decode_raw < '%s'", protoc, path) <
                (int)sizeof(cmd));
    FILE *pp = popen(cmd, "r");
    assert_non_null(pp);
    struct buf text;
    buf_init(&text, 0);
    char chunk[512];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), pp)) > 0) {
        assert_int_equal(buf_append(&text, chunk, got), 0);
    }
    int status = pclose(pp);
    unlink(path);
    const char *out = buf_cstr(&text);
    if (status != 0) {
        fprintf(stderr, "protoc failed (%d): %s\n", status, out);
        fail();
    }
    /* request.resource_logs(1).resource(1).attributes(1).key(1) */
    expect_in(out, "1 {\n  1 {\n    1 {\n      1: \"service.name\"\n");
    /* ...value(2).string_value(1) */
    expect_in(out, "      2 {\n        1: \"app\"\n      }\n");
    /* resource_logs.scope_logs(2).scope(1).name(1) */
    expect_in(out, "  2 {\n    1 {\n      1: \"cat\"\n    }\n");
    /* the log record (scope_logs.log_records 2): severity 9, body of 200 bytes, ids, times
     * (decode_raw prints fixed64 as hex) and the event name */
    expect_in(out, "    2 {\n      1: 0x0000000000000001\n      2: 9\n");
    char want_body[260];
    assert_true(snprintf(want_body, sizeof(want_body), "      5 {\n        1: \"%s\"\n", body) <
                (int)sizeof(want_body));
    expect_in(out, want_body);
    expect_in(out, "      8: 0x00000001\n");
    expect_in(out, "      11: 0x0000000000000002\n");
    expect_in(out, "      12: \"e\"\n");
    buf_fini(&text);
    buf_fini(&res);
    buf_fini(&scope);
    buf_fini(&item);
    buf_fini(&req);
}

static void test_signal_names(void **state)
{
    (void)state;
    assert_string_equal(otlp_signal_name(OTLP_LOGS), "logs");
    assert_string_equal(otlp_signal_name(OTLP_METRICS), "metrics");
    assert_string_equal(otlp_signal_name(OTLP_TRACES), "traces");
    assert_string_equal(otlp_signal_path(OTLP_LOGS), "/v1/logs");
    assert_string_equal(otlp_signal_path(OTLP_METRICS), "/v1/metrics");
    assert_string_equal(otlp_signal_path(OTLP_TRACES), "/v1/traces");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_attrs),
        cmocka_unit_test(test_scope),
        cmocka_unit_test(test_log),
        cmocka_unit_test(test_span),
        cmocka_unit_test(test_metric_gauge_sum),
        cmocka_unit_test(test_metric_histograms),
        cmocka_unit_test(test_json_doubles),
        cmocka_unit_test(test_utf8_repair),
        cmocka_unit_test(test_truncate_on_error),
        cmocka_unit_test(test_request_protobuf),
        cmocka_unit_test(test_request_json),
        cmocka_unit_test(test_response_protobuf),
        cmocka_unit_test(test_response_json),
        cmocka_unit_test(test_protoc_decodes_request),
        cmocka_unit_test(test_signal_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
