/* SPDX-License-Identifier: MIT */
/* The shared UTF-8 / UTF-16LE pieces (common/utf8): golden bytes from the Unicode standard's
 * tables (Table 3-6, 3-7 and the UTF-16 examples of chapter 3.9), not from the code under test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "utf8.h"

struct vec {
    uint32_t cp;
    const char *utf8;
};

static const struct vec vectors[] = {
    {0x0000, ""}, /* length 1: the NUL byte itself (checked apart) */
    {0x0041, "A"},
    {0x007F, "\x7f"},
    {0x0080, "\xc2\x80"},
    {0x00E9, "\xc3\xa9"},
    {0x07FF, "\xdf\xbf"},
    {0x0800, "\xe0\xa0\x80"},
    {0x20AC, "\xe2\x82\xac"},
    {0xD7FF, "\xed\x9f\xbf"},
    {0xE000, "\xee\x80\x80"},
    {0xFFFD, "\xef\xbf\xbd"},
    {0xFFFF, "\xef\xbf\xbf"},
    {0x10000, "\xf0\x90\x80\x80"},
    {0x1F600, "\xf0\x9f\x98\x80"},
    {0x10FFFF, "\xf4\x8f\xbf\xbf"},
};

static void test_utf8_encode_golden(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        uint8_t out[4] = {0xAA, 0xAA, 0xAA, 0xAA};
        size_t want = vectors[i].cp == 0 ? 1 : strlen(vectors[i].utf8);
        assert_int_equal(utf8_encode(out, vectors[i].cp), want);
        assert_int_equal(utf8_width(vectors[i].cp), want);
        assert_memory_equal(out, vectors[i].cp == 0 ? "\0" : vectors[i].utf8, want);
        for (size_t k = want; k < 4; k++) {
            assert_int_equal(out[k], 0xAA); /* nothing written past the sequence */
        }
    }
}

static void test_utf8_decode_golden(void **state)
{
    (void)state;
    for (size_t i = 1; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        const uint8_t *s = (const uint8_t *)vectors[i].utf8;
        uint32_t cp = 0;
        size_t len = 0;
        assert_true(utf8_decode(s, strlen(vectors[i].utf8), &cp, &len));
        assert_int_equal(cp, vectors[i].cp);
        assert_int_equal(len, strlen(vectors[i].utf8));
        /* NUL-terminated use: n = SIZE_MAX */
        assert_true(utf8_decode(s, SIZE_MAX, &cp, &len));
        assert_int_equal(cp, vectors[i].cp);
        /* cut short by n */
        if (len > 1) {
            assert_false(utf8_decode(s, len - 1, &cp, &len));
        }
    }
}

static void test_utf8_decode_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "\x80",             /* continuation byte in lead position */
        "\xbf",             /* likewise */
        "\xc0\x80",         /* overlong U+0000 */
        "\xc1\xbf",         /* overlong U+007F */
        "\xe0\x80\x80",     /* overlong U+0000, three bytes */
        "\xe0\x9f\xbf",     /* overlong U+07FF */
        "\xf0\x8f\xbf\xbf", /* overlong U+FFFF */
        "\xed\xa0\x80",     /* U+D800, a surrogate */
        "\xed\xbf\xbf",     /* U+DFFF */
        "\xf4\x90\x80\x80", /* U+110000 */
        "\xf5\x80\x80\x80", /* lead byte over F4 */
        "\xff",             /* never in UTF-8 */
        "\xc3",             /* cut short by the NUL */
        "\xe2\x82",         /* likewise */
        "\xe2\x28\xac",     /* a byte that is no continuation */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint32_t cp = 7;
        size_t len = 9;
        assert_false(utf8_decode((const uint8_t *)bad[i], SIZE_MAX, &cp, &len));
        assert_int_equal(cp, 7); /* untouched */
        assert_int_equal(len, 9);
    }
}

/* Every scalar value: encode, then decode gives it back with the same length. */
static void test_utf8_round_trip_all(void **state)
{
    (void)state;
    for (uint32_t cp = 0; cp <= 0x10FFFF; cp++) {
        if (cp >= 0xD800 && cp <= 0xDFFF) {
            continue;
        }
        uint8_t b[4];
        size_t n = utf8_encode(b, cp), len = 0;
        uint32_t back = 0;
        if (!utf8_decode(b, n, &back, &len) || back != cp || len != n) {
            fail_msg("U+%04X does not round-trip", (unsigned)cp);
        }
    }
}

static void test_utf16le_next(void **state)
{
    (void)state;
    /* "A", U+00E9, U+10437 (D801 DC37), U+0000, a lone low surrogate, a high one before "B",
     * and a high one at the end. */
    static const uint8_t p[] = {0x41, 0x00, 0xE9, 0x00, 0x01, 0xD8, 0x37, 0xDC, 0x00,
                                0x00, 0x00, 0xDC, 0x3D, 0xD8, 0x42, 0x00, 0x3D, 0xD8};
    const size_t units = sizeof(p) / 2;
    static const uint32_t want[] = {0x41, 0xE9, 0x10437, 0, 0xFFFD, 0xFFFD, 0x42, 0xFFFD};
    static const size_t after[] = {1, 2, 4, 5, 6, 7, 8, 9};
    size_t i = 0;
    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++) {
        assert_int_equal(utf16le_next(p, units, &i), want[k]);
        assert_int_equal(i, after[k]);
    }
    assert_int_equal(i, units);
}

static void test_utf16le_encode(void **state)
{
    (void)state;
    uint8_t o[4];
    assert_int_equal(utf16le_encode(o, 0x41), 2);
    assert_memory_equal(o, "\x41\x00", 2);
    assert_int_equal(utf16le_encode(o, 0xFFFD), 2);
    assert_memory_equal(o, "\xfd\xff", 2);
    assert_int_equal(utf16le_encode(o, 0x10437), 4);
    assert_memory_equal(o, "\x01\xd8\x37\xdc", 4);
    assert_int_equal(utf16le_encode(o, 0x10FFFF), 4);
    assert_memory_equal(o, "\xff\xdb\xff\xdf", 4);
}

static void test_utf16le_to_utf8(void **state)
{
    (void)state;
    /* "h", U+00E9, U+20AC, U+10437, U+0000, a lone high surrogate at the end */
    static const uint8_t p[] = {0x68, 0x00, 0xE9, 0x00, 0xAC, 0x20, 0x01,
                                0xD8, 0x37, 0xDC, 0x00, 0x00, 0x3D, 0xD8};
    static const char want[] = "h\xc3\xa9\xe2\x82\xac\xf0\x90\x90\xb7\xef\xbf\xbd\xef\xbf\xbd";
    const size_t units = sizeof(p) / 2;
    assert_int_equal(utf16le_utf8_len(p, units), strlen(want));
    char out[64];
    size_t len = 0;
    assert_int_equal(utf16le_to_utf8(p, units, out, strlen(want) + 1, &len), 0);
    assert_int_equal(len, strlen(want));
    assert_string_equal(out, want);
    assert_int_equal(utf16le_to_utf8(p, units, out, sizeof(out), NULL), 0);
    /* One byte short (the NUL has no room): refused, nothing written. */
    memset(out, 'x', sizeof(out));
    assert_int_equal(utf16le_to_utf8(p, units, out, strlen(want), &len), AGENT_E_NOSPACE);
    assert_int_equal(out[0], 'x');
    assert_int_equal(utf16le_to_utf8(p, units, out, 0, &len), AGENT_E_NOSPACE);
    /* Empty input: "" fits in one byte. */
    assert_int_equal(utf16le_utf8_len(p, 0), 0);
    assert_int_equal(utf16le_to_utf8(p, 0, out, 1, &len), 0);
    assert_int_equal(len, 0);
    assert_int_equal(out[0], '\0');
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_encode_golden),  cmocka_unit_test(test_utf8_decode_golden),
        cmocka_unit_test(test_utf8_decode_rejects), cmocka_unit_test(test_utf8_round_trip_all),
        cmocka_unit_test(test_utf16le_next),        cmocka_unit_test(test_utf16le_encode),
        cmocka_unit_test(test_utf16le_to_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
