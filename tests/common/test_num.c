/* SPDX-License-Identifier: MIT */
/* The shared strict number parser and ASCII case-insensitive comparison (common/num, ascii). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "ascii.h"
#include "err.h"
#include "num.h"

static void test_num_parse(void **state)
{
    (void)state;
    uint64_t v = 7;
    assert_int_equal(num_parse_u64_str("0", 10, UINT64_MAX, &v), 0);
    assert_int_equal(v, 0);
    assert_int_equal(num_parse_u64_str("18446744073709551615", 10, UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(num_parse_u64_str("ffffffffffffffff", 16, UINT64_MAX, &v), 0);
    assert_true(v == UINT64_MAX);
    assert_int_equal(num_parse_u64_str("DeadBeef", 16, UINT64_MAX, &v), 0);
    assert_true(v == 0xdeadbeefu);
    v = 7;
    /* Overflow, over max, and anything that is not a bare digit run: refused, *out untouched. */
    const char *bad[] = {"18446744073709551616",
                         "10000000000000000000000",
                         "",
                         "-1",
                         "+1",
                         " 1",
                         "1 ",
                         "0x10",
                         "1a",
                         "１"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(num_parse_u64_str(bad[i], 10, UINT64_MAX, &v), AGENT_E_INVAL);
    }
    assert_int_equal(num_parse_u64_str("10000000000000000", 16, UINT64_MAX, &v), AGENT_E_INVAL);
    assert_int_equal(num_parse_u64_str("2147483648", 10, 2147483647u, &v), AGENT_E_INVAL);
    assert_int_equal(num_parse_u64_str("12", 8, UINT64_MAX, &v), AGENT_E_INVAL);
    assert_int_equal(v, 7);
    assert_int_equal(num_parse_u64_str("2147483647", 10, 2147483647u, &v), 0);
    assert_int_equal(v, 2147483647u);
    /* n bounds the input: digits past it are not read. */
    assert_int_equal(num_parse_u64("12345", 2, 10, 100, &v), 0);
    assert_int_equal(v, 12);
}

static void test_num_prefix(void **state)
{
    (void)state;
    uint64_t v = 0;
    const char *s = "1000,1001";
    assert_int_equal(num_prefix_u64(s, strlen(s), 10, UINT32_MAX, &v), 4);
    assert_int_equal(v, 1000);
    assert_int_equal(num_prefix_u64("x1", 2, 10, UINT32_MAX, &v), 0);
    assert_int_equal(num_prefix_u64("4294967296,", 11, 10, UINT32_MAX, &v), 0);
    assert_int_equal(num_prefix_u64("4294967295,", 11, 10, UINT32_MAX, &v), 10);
    assert_true(v == UINT32_MAX);
}

static void test_ascii_ieq(void **state)
{
    (void)state;
    assert_true(ascii_ieq("Bearer", "bEARER"));
    assert_false(ascii_ieq("Bearer", "Bearer "));
    assert_false(ascii_ieq("", "x"));
    assert_true(ascii_ieq("", ""));
    assert_true(ascii_ieq_n("gc-VERBOSE,cpu", 10, "GC-verbose"));
    assert_false(ascii_ieq_n("gc", 3, "gcx")); /* the NUL at s[2] never matches */
    assert_false(ascii_ieq_n("gcx", 2, "gcx"));
    /* Only ASCII letters fold: bytes >= 0x80 compare as they are. */
    assert_false(ascii_ieq("\xc3\x89", "\xc3\xa9"));
    assert_int_equal(ascii_lower('Z'), 'z');
    assert_int_equal(ascii_lower('['), '[');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_num_parse),
        cmocka_unit_test(test_num_prefix),
        cmocka_unit_test(test_ascii_ieq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
