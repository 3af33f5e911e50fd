/* SPDX-License-Identifier: MIT */
/* The hex helper (common/hex.h): digits both ways, bytes, the two GUID orders, percent-decoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
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

/* Decodes a copy of in with hex_pct_decode; the text, or NULL when the call refused it. */
static const char *pct(const char *in, bool lenient, char *out, size_t outlen)
{
    size_t n = strlen(in);
    assert_true(n < outlen);
    memcpy(out, in, n + 1);
    if (hex_pct_decode(out, &n, lenient) != 0) {
        return NULL;
    }
    assert_true(n <= strlen(in));
    out[n] = '\0';
    return out;
}

static void test_pct_decode(void **state)
{
    (void)state;
    char b[64];
    for (int lenient = 0; lenient < 2; lenient++) {
        assert_string_equal(pct("", lenient, b, sizeof(b)), "");
        assert_string_equal(pct("plain", lenient, b, sizeof(b)), "plain");
        assert_string_equal(pct("a%2Cb%2cc%20%25", lenient, b, sizeof(b)), "a,b,c %");
        assert_string_equal(pct("%41%42", lenient, b, sizeof(b)), "AB");
        assert_string_equal(pct("%2541", lenient, b, sizeof(b)), "%41"); /* decoded once */
        assert_string_equal(pct("+", lenient, b, sizeof(b)), "+");       /* not a space here */
    }
    /* strict: any '%' without two hex digits after it is refused */
    const char *bad[] = {"%", "100%", "%4", "a%4", "%zz", "%4g", "%g4", "ok%2Cthen%"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_null(pct(bad[i], false, b, sizeof(b)));
    }
    /* lenient: such a '%' stays as it is, the escapes around it are still decoded */
    assert_string_equal(pct("100%", true, b, sizeof(b)), "100%");
    assert_string_equal(pct("%", true, b, sizeof(b)), "%");
    assert_string_equal(pct("%4", true, b, sizeof(b)), "%4");
    assert_string_equal(pct("%zz%41", true, b, sizeof(b)), "%zzA");
    assert_string_equal(pct("ok%2Cthen%", true, b, sizeof(b)), "ok,then%");
    assert_string_equal(pct("%%41", true, b, sizeof(b)), "%A");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_digits),
        cmocka_unit_test(test_encode),
        cmocka_unit_test(test_guid),
        cmocka_unit_test(test_pct_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
