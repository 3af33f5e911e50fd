/* SPDX-License-Identifier: MIT */
/*
 * The Execute action's argument splitter (rules_split_arguments) against the rules of .NET's
 * ProcessStartInfo on Unix (Process.Unix.cs ParseArgumentsIntoList / GetNextArgument), and
 * rules_execute_argv: split first, then substitute in each argument, never expand a value again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Values a hostile process (or an action's output) could hold: blanks, quotes, backslashes, tokens.
 */
static const struct rules_kv hostile_tokens[] = {
    {"$(Process.Name)", "my app \"x\" --exec=/bin/sh"},
    {"$(Process.CommandLine)", "dotnet app.dll --output=/etc/passwd \"a b\" $(Process.Name) \\\""},
    {"$(Actions.A.B)", "$(Process.CommandLine) $(Actions.A.B)"},
    {"$(Process.ProcessId)", "42"},
};

static const char *hostile_value(void *ud, const char *s, size_t *len)
{
    (void)ud;
    for (size_t k = 0; k < sizeof(hostile_tokens) / sizeof(hostile_tokens[0]); k++) {
        size_t n = strlen(hostile_tokens[k].key);
        if (strncmp(s, hostile_tokens[k].key, n) == 0) {
            *len = n;
            return hostile_tokens[k].value;
        }
    }
    return NULL;
}

static void expect_argv(const char *arguments, size_t max, const char *const *want)
{
    char **argv = NULL;
    size_t argc = 99;
    assert_int_equal(rules_execute_argv(arguments, max, hostile_value, NULL, &argv, &argc), 0);
    size_t n = 0;
    while (want[n] != NULL) {
        n++;
    }
    if (argc != n) {
        fail_msg("%s: %zu arguments, expected %zu", arguments, argc, n);
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(argv[i], want[i]) != 0) {
            fail_msg("%s: argument %zu is [%s], expected [%s]", arguments, i, argv[i], want[i]);
        }
    }
    assert_null(argv[argc]);
    rules_free_argv(argv);
}

#define ARGV(s, ...) expect_argv((s), MAXV, (const char *const[]){__VA_ARGS__, NULL})

/* A token's value stays inside the one argument that names it, as it is. */
static void test_args_split_then_substitute(void **state)
{
    (void)state;
    ARGV("--name=$(Process.Name) \"cl: $(Process.CommandLine)\" $(Actions.A.B) x\\\"y "
         "\"$(Process.ProcessId) q\"",
         "--name=my app \"x\" --exec=/bin/sh",
         "cl: dotnet app.dll --output=/etc/passwd \"a b\" $(Process.Name) \\\"",
         "$(Process.CommandLine) $(Actions.A.B)", "x\"y", "42 q");
    /* Two tokens in one argument, an unknown one kept as written, an empty argument kept. */
    ARGV("$(Process.ProcessId)$(Process.ProcessId) $(Process.Other) \"\"", "4242",
         "$(Process.Other)", "");
    /* The configured split only: a value never adds or removes an argument. */
    ARGV("$(Process.CommandLine)", hostile_tokens[1].value);
    ARGV("", NULL);
    /* At most max arguments, as the splitter. */
    expect_argv("a $(Process.Name) c", 2,
                (const char *const[]){"a", hostile_tokens[0].value, NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_args_blanks),
        cmocka_unit_test(test_args_quotes),
        cmocka_unit_test(test_args_backslashes),
        cmocka_unit_test(test_args_max),
        cmocka_unit_test(test_args_split_then_substitute),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
