/* SPDX-License-Identifier: MIT */
/*
 * The Execute action's argument splitter (rules_split_arguments) against the rules of .NET's
 * ProcessStartInfo on Unix (Process.Unix.cs ParseArgumentsIntoList / GetNextArgument).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "rules.h"

#define MAXV 16

/* Splits s and compares with want[0..n) (NULL-terminated list). */
static void expect_split(const char *s, size_t max, const char *const *want)
{
    char out[512];
    char *argv[MAXV];
    size_t len = strlen(s);
    assert_true(2 * len + 1 <= sizeof(out));
    memset(out, 'X', sizeof(out));
    size_t n = rules_split_arguments(s, out, argv, max);
    size_t k = 0;
    while (want[k] != NULL) {
        k++;
    }
    if (n != k) {
        fail_msg("%s: %zu arguments, expected %zu", s, n, k);
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[i], want[i]) != 0) {
            fail_msg("%s: argument %zu is [%s], expected [%s]", s, i, argv[i], want[i]);
        }
    }
}

#define SPLIT(s, ...) expect_split((s), MAXV, (const char *const[]){__VA_ARGS__, NULL})

static void test_args_blanks(void **state)
{
    (void)state;
    SPLIT("a b\tc", "a", "b", "c");
    SPLIT("  lead \t trail  ", "lead", "trail");
    SPLIT("one", "one");
    /* Only space and tab separate. */
    SPLIT("a\nb", "a\nb");
    expect_split("", MAXV, (const char *const[]){NULL});
    expect_split("   \t ", MAXV, (const char *const[]){NULL});
}

static void test_args_quotes(void **state)
{
    (void)state;
    SPLIT("\"a b\" c", "a b", "c");
    SPLIT("a\"b c\"d", "ab cd");
    /* "" inside quotes is a literal quote, quoting goes on. */
    SPLIT("\"a \"\"b\"\" c\"", "a \"b\" c");
    SPLIT("\"\"\"\"", "\"");
    /* An empty quoted argument is kept. */
    SPLIT("\"\"", "");
    SPLIT("a \"\" b", "a", "", "b");
    /* An unterminated quote runs to the end. */
    SPLIT("\"a b", "a b");
    /* Single quotes are ordinary characters. */
    SPLIT("'a b'", "'a", "b'");
}

static void test_args_backslashes(void **state)
{
    (void)state;
    /* Not before a quote: literal. */
    SPLIT("a\\\\b c\\", "a\\\\b", "c\\");
    SPLIT("C:\\dir\\f.txt", "C:\\dir\\f.txt");
    /* One before a quote: a literal quote. */
    SPLIT("\\\"x", "\"x");
    /* Two before a quote: one backslash, and the quote toggles. */
    SPLIT("\\\\\"a b\"", "\\a b");
    /* Three: one backslash and a literal quote. */
    SPLIT("\\\\\\\"", "\\\"");
    /* Four before a closing quote inside quotes: two backslashes, the quote closes. */
    SPLIT("\"x\\\\\\\\\" y", "x\\\\", "y");
}

static void test_args_max(void **state)
{
    (void)state;
    expect_split("a b c", 2, (const char *const[]){"a", "b", NULL});
    expect_split("a b", 0, (const char *const[]){NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_blanks),
        cmocka_unit_test(test_args_quotes),
        cmocka_unit_test(test_args_backslashes),
        cmocka_unit_test(test_args_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
