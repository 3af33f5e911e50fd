/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "http_cors.h"

/* The CORS policy of CorsConfiguration:AllowedOrigins (pure). */

/* The value of header name in h, or NULL. */
static const char *value_of(const struct http_cors_headers *h, const char *name)
{
    for (size_t i = 0; i < h->n; i++) {
        if (strcmp(h->name[i], name) == 0) {
            return h->value[i];
        }
    }
    return NULL;
}

static void test_http_cors_origin_list(void **state)
{
    (void)state;
    bool any = true;
    const char *list = "https://a.example;http://B.example:8080; https://c.example ;";
    assert_true(http_cors_origin_allowed(list, "https://a.example", &any));
    assert_false(any);
    /* Configured entries are lower-cased; the request's origin is compared as sent. */
    assert_true(http_cors_origin_allowed(list, "http://b.example:8080", &any));
    assert_false(http_cors_origin_allowed(list, "http://B.example:8080", &any));
    /* Blanks around an entry are not part of it. */
    assert_true(http_cors_origin_allowed(list, "https://c.example", &any));
    /* Exact: no prefix, suffix, scheme or port games. */
    assert_false(http_cors_origin_allowed(list, "https://a.example.evil", &any));
    assert_false(http_cors_origin_allowed(list, "https://a.exampl", &any));
    assert_false(http_cors_origin_allowed(list, "http://a.example", &any));
    assert_false(http_cors_origin_allowed(list, "http://b.example", &any));
    assert_false(http_cors_origin_allowed(list, "", &any));
    assert_false(http_cors_origin_allowed(list, "null", &any));
    assert_false(http_cors_origin_allowed(NULL, "https://a.example", &any));
    assert_false(http_cors_origin_allowed("", "https://a.example", &any));
    /* `*` alone allows every origin; among others it is only the literal origin "*". */
    assert_true(http_cors_origin_allowed(" * ", "https://anything.example", &any));
    assert_true(any);
    assert_false(http_cors_origin_allowed("*;https://a.example", "https://z.example", &any));
    assert_false(any);
    assert_true(http_cors_origin_allowed("*;https://a.example", "https://a.example", &any));
}

static void test_http_cors_preflight(void **state)
{
    (void)state;
    struct buf scratch;
    buf_init(&scratch, 4096);
    struct http_cors_headers h;
    const char *list = "https://ui.example;https://other.example";
    /* Allowed origin: the requested method and headers are echoed, with Vary. */
    assert_int_equal(http_cors_evaluate(list, "OPTIONS", "https://ui.example", "POST",
                                        " authorization ,content-type,, X-Custom", &scratch, &h),
                     HTTP_CORS_PREFLIGHT);
    assert_int_equal(h.n, 4);
    assert_string_equal(value_of(&h, "Access-Control-Allow-Origin"), "https://ui.example");
    assert_string_equal(value_of(&h, "Access-Control-Allow-Methods"), "POST");
    assert_string_equal(value_of(&h, "Access-Control-Allow-Headers"),
                        "authorization,content-type,X-Custom");
    assert_string_equal(value_of(&h, "Vary"), "Origin");
    assert_null(value_of(&h, "Access-Control-Allow-Credentials"));
    assert_null(value_of(&h, "Access-Control-Max-Age"));
    /* No requested headers: no Allow-Headers. */
    assert_int_equal(
        http_cors_evaluate(list, "OPTIONS", "https://ui.example", "GET", NULL, &scratch, &h),
        HTTP_CORS_PREFLIGHT);
    assert_null(value_of(&h, "Access-Control-Allow-Headers"));
    assert_string_equal(value_of(&h, "Access-Control-Allow-Methods"), "GET");
    /* Another origin: still a preflight (answered 204), without any header. */
    assert_int_equal(http_cors_evaluate(list, "OPTIONS", "https://evil.example", "GET",
                                        "authorization", &scratch, &h),
                     HTTP_CORS_PREFLIGHT);
    assert_int_equal(h.n, 0);
    /* `*` alone: answered with `*` and no Vary. */
    assert_int_equal(
        http_cors_evaluate("*", "OPTIONS", "https://x.example", "DELETE", NULL, &scratch, &h),
        HTTP_CORS_PREFLIGHT);
    assert_string_equal(value_of(&h, "Access-Control-Allow-Origin"), "*");
    assert_null(value_of(&h, "Vary"));
    /* OPTIONS without Access-Control-Request-Method is not a preflight. */
    assert_int_equal(
        http_cors_evaluate(list, "OPTIONS", "https://ui.example", NULL, NULL, &scratch, &h),
        HTTP_CORS_ACTUAL);
    buf_fini(&scratch);
}

static void test_http_cors_actual_and_off(void **state)
{
    (void)state;
    struct buf scratch;
    buf_init(&scratch, 4096);
    struct http_cors_headers h;
    const char *list = "https://ui.example";
    assert_int_equal(
        http_cors_evaluate(list, "GET", "https://ui.example", NULL, NULL, &scratch, &h),
        HTTP_CORS_ACTUAL);
    assert_int_equal(h.n, 2);
    assert_string_equal(value_of(&h, "Access-Control-Allow-Origin"), "https://ui.example");
    assert_string_equal(value_of(&h, "Vary"), "Origin");
    /* A GET says nothing about methods or headers even when the request names some. */
    assert_int_equal(
        http_cors_evaluate(list, "GET", "https://ui.example", "POST", "x", &scratch, &h),
        HTTP_CORS_ACTUAL);
    assert_int_equal(h.n, 2);
    assert_int_equal(
        http_cors_evaluate(list, "GET", "https://no.example", NULL, NULL, &scratch, &h),
        HTTP_CORS_ACTUAL);
    assert_int_equal(h.n, 0);
    /* No Origin, or no policy (unset, empty, only separators): CORS is not involved at all. */
    assert_int_equal(http_cors_evaluate(list, "OPTIONS", NULL, "GET", NULL, &scratch, &h),
                     HTTP_CORS_PASS);
    assert_int_equal(
        http_cors_evaluate(NULL, "OPTIONS", "https://ui.example", "GET", NULL, &scratch, &h),
        HTTP_CORS_PASS);
    assert_int_equal(http_cors_evaluate("", "GET", "https://ui.example", NULL, NULL, &scratch, &h),
                     HTTP_CORS_PASS);
    assert_int_equal(
        http_cors_evaluate(" ; ;", "OPTIONS", "https://ui.example", "GET", NULL, &scratch, &h),
        HTTP_CORS_PASS);
    assert_int_equal(h.n, 0);
    buf_fini(&scratch);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_http_cors_origin_list),
        cmocka_unit_test(test_http_cors_preflight),
        cmocka_unit_test(test_http_cors_actual_and_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
