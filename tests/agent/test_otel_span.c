/* SPDX-License-Identifier: MIT */
/*
 * agent/otel/otel_span: a decoded Activity as an OTLP span and its scope (kinds, status, the
 * status message only with Error, tags typed from their text, the attribute cap).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "otel_span.h"

static void test_otel_span_typed_values(void **state)
{
    (void)state;
    static const struct {
        const char *key;
        const char *text;
        enum otlp_value_kind kind;
    } cases[] = {
        {"a", "42", OTLP_INT},
        {"a", "-7", OTLP_INT},
        {"a", "0", OTLP_INT},
        {"a", "9223372036854775807", OTLP_INT},
        {"a", "-9223372036854775808", OTLP_INT},
        {"a", "9223372036854775808", OTLP_STR}, /* past int64, no '.': text */
        {"a", "007", OTLP_STR},                 /* a leading zero is not how .NET prints a number */
        {"a", "-0", OTLP_STR},
        {"a", "True", OTLP_BOOL},
        {"a", "False", OTLP_BOOL},
        {"a", "true", OTLP_STR},
        {"a", "3.25", OTLP_DOUBLE},
        {"a", "-1E+20", OTLP_DOUBLE},
        {"a", "1e400", OTLP_STR}, /* not finite */
        {"a", ".5", OTLP_STR},
        {"a", "1.2.3", OTLP_STR},
        {"a", "", OTLP_STR},
        {"a", "GET", OTLP_STR},
        {"network.protocol.version", "1.1", OTLP_STR},
        {"network.protocol.version", "2", OTLP_STR},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct otlp_kv kv = {.key = cases[k].key};
        otel_span_typed_value(cases[k].text, &kv);
        assert_int_equal(kv.kind, cases[k].kind);
        if (kv.kind == OTLP_STR) {
            assert_ptr_equal(kv.str, cases[k].text);
        }
    }
    struct otlp_kv kv = {.key = "n"};
    otel_span_typed_value("-9223372036854775808", &kv);
    assert_true(kv.i == INT64_MIN);
    otel_span_typed_value("True", &kv);
    assert_true(kv.b);
    otel_span_typed_value("3.25", &kv);
    assert_true(kv.d == 3.25);
}

static void test_otel_span_mapping(void **state)
{
    (void)state;
    struct ev_span_tag tags[] = {
        {"http.response.status_code", "200"}, {"url.path", "/a"}, {"flag", "False"}};
    struct ev_span s = {.trace_id = {1, 2, 3},
                        .span_id = {4, 5},
                        .has_parent = true,
                        .parent_span_id = {6},
                        .flags = 1,
                        .trace_state = "k=v",
                        .name = "GET /a",
                        .operation_name = "op",
                        .kind = EV_ACTIVITY_CONSUMER,
                        .start_unix_nano = 100,
                        .end_unix_nano = 250,
                        .status = EV_ACTIVITY_OK,
                        .status_description = "fine",
                        .source_name = "Src",
                        .source_version = "2.0",
                        .ntags = 3,
                        .tags = tags};
    struct otlp_span o;
    struct otlp_scope sc;
    struct otlp_kv attrs[2];
    assert_int_equal(otel_span_from_activity(&s, &o, &sc, attrs, 2), 0);
    assert_memory_equal(o.trace_id, s.trace_id, 16);
    assert_memory_equal(o.span_id, s.span_id, 8);
    assert_true(o.has_parent);
    assert_memory_equal(o.parent_span_id, s.parent_span_id, 8);
    assert_int_equal(o.flags, 1);
    assert_string_equal(o.trace_state, "k=v");
    assert_string_equal(o.name, "GET /a");
    assert_int_equal(o.kind, OTLP_SPAN_CONSUMER);
    assert_int_equal(o.start_unix_nano, 100);
    assert_int_equal(o.end_unix_nano, 250);
    assert_int_equal(o.status, OTLP_STATUS_OK);
    assert_null(o.status_message); /* only an Error carries its description */
    assert_int_equal(o.nattrs, 2); /* the cap */
    assert_ptr_equal(o.attrs, attrs);
    assert_string_equal(attrs[0].key, "http.response.status_code");
    assert_int_equal(attrs[0].kind, OTLP_INT);
    assert_int_equal(attrs[0].i, 200);
    assert_int_equal(attrs[1].kind, OTLP_STR);
    assert_string_equal(attrs[1].str, "/a");
    assert_string_equal(sc.name, "Src");
    assert_string_equal(sc.version, "2.0");
    assert_int_equal(sc.nattrs, 0);
    /* every ActivityKind and status; out-of-range values are safe */
    static const int kinds[][2] = {
        {EV_ACTIVITY_INTERNAL, OTLP_SPAN_INTERNAL}, {EV_ACTIVITY_SERVER, OTLP_SPAN_SERVER},
        {EV_ACTIVITY_CLIENT, OTLP_SPAN_CLIENT},     {EV_ACTIVITY_PRODUCER, OTLP_SPAN_PRODUCER},
        {EV_ACTIVITY_CONSUMER, OTLP_SPAN_CONSUMER}, {9, OTLP_SPAN_INTERNAL}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        s.kind = kinds[k][0];
        assert_int_equal(otel_span_from_activity(&s, &o, &sc, attrs, 2), 0);
        assert_int_equal(o.kind, kinds[k][1]);
    }
    s.status = EV_ACTIVITY_ERROR;
    s.has_parent = false;
    s.source_version = NULL;
    assert_int_equal(otel_span_from_activity(&s, &o, &sc, NULL, 0), 0);
    assert_int_equal(o.status, OTLP_STATUS_ERROR);
    assert_string_equal(o.status_message, "fine");
    assert_false(o.has_parent);
    assert_int_equal(o.nattrs, 0);
    assert_null(sc.version);
    s.status = 7;
    assert_int_equal(otel_span_from_activity(&s, &o, &sc, NULL, 0), 0);
    assert_int_equal(o.status, OTLP_STATUS_UNSET);
    assert_int_equal(otel_span_from_activity(NULL, &o, &sc, NULL, 0), AGENT_E_INVAL);
    assert_int_equal(otel_span_from_activity(&s, &o, &sc, NULL, 3), AGENT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_otel_span_typed_values),
        cmocka_unit_test(test_otel_span_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
