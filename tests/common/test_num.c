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

/* dotnet-monitor's float settings (GlobalCounter:IntervalSeconds): read in single precision and
 * written back as float.ToString(InvariantCulture) does. */
static void test_num_float32(void **state)
{
    (void)state;
    double v = -1;
    assert_int_equal(num_parse_float32("5", &v), 0);
    assert_true(v == 5.0);
    assert_int_equal(num_parse_float32("1.5", &v), 0);
    assert_true(v == 1.5);
    assert_int_equal(num_parse_float32("0.1", &v), 0);
    assert_true(v == (double)0.1F); /* single precision, as .NET's float */
    assert_int_equal(num_parse_float32(".5", &v), 0);
    assert_true(v == 0.5);
    assert_int_equal(num_parse_float32("2.", &v), 0);
    assert_true(v == 2.0);
    assert_int_equal(num_parse_float32("25e-1", &v), 0);
    assert_true(v == 2.5);
    assert_int_equal(num_parse_float32("1.1000000000000001", &v), 0); /* cJSON's %.17g of 1.1 */
    assert_true(v == (double)1.1F);
    const char *bad[] = {"",    ".",   "-1", "+1",  " 1",    "1 ", "1,5", "0x10",
                         "inf", "nan", "1e", "1e+", "1.2.3", "e5", "1e99"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 7;
        assert_int_equal(num_parse_float32(bad[i], &v), AGENT_E_INVAL);
        assert_true(v == 7.0);
    }
    char out[32];
    const struct {
        double in;
        const char *want;
    } fmt[] = {{5, "5"},
               {1.5, "1.5"},
               {(double)0.1F, "0.1"},
               {(double)1.1F, "1.1"},
               {86400, "86400"},
               {2.25, "2.25"},
               {0.5, "0.5"},
               {1e-9, "0.000000001"},
               {(double)(1.0F / 3.0F), "0.33333334"},
               {123456.7, "123456.7"}};
    for (size_t i = 0; i < sizeof(fmt) / sizeof(fmt[0]); i++) {
        assert_int_equal(num_format_float32(out, sizeof(out), fmt[i].in), 0);
        assert_string_equal(out, fmt[i].want);
    }
    assert_int_equal(num_format_float32(out, sizeof(out), 0), AGENT_E_INVAL);
    assert_int_equal(num_format_float32(out, sizeof(out), 2e9), AGENT_E_INVAL);
    assert_int_equal(num_format_float32(out, 3, 86400), AGENT_E_INVAL); /* does not fit */
}

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
        cmocka_unit_test(test_num_float32),
        cmocka_unit_test(test_num_prefix),
        cmocka_unit_test(test_ascii_ieq),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
