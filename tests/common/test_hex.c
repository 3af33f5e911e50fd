/* SPDX-License-Identifier: MIT */
/* The hex helper (common/hex.h): digits both ways, bytes, and the two GUID orders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hex.h"

static void test_digits(void **state)
{
    (void)state;
    const char lower[] = "0123456789abcdef";
    const char upper[] = "0123456789ABCDEF";
    for (unsigned v = 0; v < 16; v++) {
        assert_int_equal(hex_digit(v), lower[v]);
        assert_int_equal(hex_digit_upper(v), upper[v]);
        assert_int_equal(hex_value(lower[v]), (int)v);
        assert_int_equal(hex_value(upper[v]), (int)v);
    }
    assert_int_equal(hex_digit(0x1f), 'f'); /* the low four bits only */
    const char *none = "gG/:@`xz -\x80";
    for (const char *c = none; *c != '\0'; c++) {
        assert_int_equal(hex_value(*c), -1);
    }
    assert_int_equal(hex_value('\0'), -1);
}

static void test_encode(void **state)
{
    (void)state;
    const uint8_t b[] = {0x00, 0x01, 0x7f, 0x80, 0xab, 0xff};
    char out[13];
    memset(out, '#', sizeof(out));
    hex_encode(b, sizeof(b), out);
    assert_memory_equal(out, "00017f80abff", 12);
    assert_int_equal(out[12], '#'); /* no NUL, nothing past 2n */
    hex_encode(b, 0, out);
    assert_int_equal(out[0], '0');
}

static void test_guid(void **state)
{
    (void)state;
    const uint8_t b[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                           0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    char s[HEX_GUID_SIZE];
    hex_guid_dotnet(b, s);
    assert_string_equal(s, "33221100-5544-7766-8899-aabbccddeeff");
    hex_guid_bytes(b, s);
    assert_string_equal(s, "00112233-4455-6677-8899-aabbccddeeff");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_guid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
