/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"

static void test_buf_append_and_consume(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "hello "), 0);
    assert_int_equal(buf_printf(&b, "%s %d", "world", 42), 0);
    assert_string_equal(buf_cstr(&b), "hello world 42");
    buf_consume(&b, 6);
    assert_int_equal(buf_size(&b), 8);
    assert_memory_equal(buf_data(&b), "world 42", 8);
    buf_fini(&b);
    buf_fini(&b); /* twice is fine */
}

static void test_buf_cap_is_enforced(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 16);
    assert_int_equal(buf_append(&b, "0123456789abcdef", 16), 0);
    assert_int_equal(buf_append(&b, "x", 1), AGENT_E_TOOBIG);
    buf_consume(&b, 4); /* room at the front is reused */
    assert_int_equal(buf_append(&b, "wxyz", 4), 0);
    assert_int_equal(buf_size(&b), 16);
    assert_int_equal(buf_reserve(&b, SIZE_MAX), AGENT_E_TOOBIG);
    buf_fini(&b);
}

static void test_buf_json_escape(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_json_escaped(&b, "a\"b\\c\n\x01"), 0);
    assert_string_equal(buf_cstr(&b), "a\\\"b\\\\c\\n\\u0001");
    size_t n = 0;
    char *s = buf_steal(&b, &n);
    assert_non_null(s);
    assert_int_equal(n, strlen(s));
    assert_int_equal(buf_size(&b), 0);
    free(s);
    buf_fini(&b);
}

static void test_buf_append_pct(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    const char in[] = "a-Z._~0/ b+é%\x01";
    assert_int_equal(buf_append_pct(&b, in, sizeof(in) - 1, false), 0);
    assert_string_equal(buf_cstr(&b), "a-Z._~0%2F%20b%2B%C3%A9%25%01");
    buf_reset(&b);
    assert_int_equal(buf_append_pct(&b, "/x y/", 5, true), 0);
    assert_string_equal(buf_cstr(&b), "/x%20y/");
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_append_and_consume),
        cmocka_unit_test(test_buf_cap_is_enforced),
        cmocka_unit_test(test_buf_json_escape),
        cmocka_unit_test(test_buf_append_pct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
