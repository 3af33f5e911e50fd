/* SPDX-License-Identifier: MIT */
#ifndef TEST_TIMEBOUND_H
#define TEST_TIMEBOUND_H

/*
 * Upper bounds on wall-clock time in tests. A loaded 2-core machine makes everything slower, never
 * faster, so only upper bounds are scaled: by DOTMON_TEST_TIMEOUT_MULTIPLIER (a whole number 1-100,
 * default 1; docs/contributing.md "Tests"), the same multiplier testenv_timeout applies to waits. A
 * failed bound prints what was measured and the bound, so a slow run can be told from a hang.
 * (Include after <cmocka.h>.)
 */

#include <stdio.h>
#include <stdlib.h>

static inline long test_bound_ms(long ms)
{
    const char *m = getenv("DOTMON_TEST_TIMEOUT_MULTIPLIER");
    char *end = NULL;
    long mult = m != NULL && *m != '\0' ? strtol(m, &end, 10) : 1;
    if (end != NULL && (*end != '\0' || mult < 1 || mult > 100)) {
        mult = 1;
    }
    return ms * mult;
}

/* Asserts took < bound_ms (scaled). */
#define ASSERT_BELOW_MS(took, bound_ms)                                                            \
    do {                                                                                           \
        double took_ = (double)(took);                                                             \
        long bound_ = test_bound_ms(bound_ms);                                                     \
        if (!(took_ < (double)bound_)) {                                                           \
            fprintf(stderr,                                                                        \
                    "%s:%d: took %.0f ms, bound %ld ms (%s; scale with "                           \
                    "DOTMON_TEST_TIMEOUT_MULTIPLIER)\n",                                           \
                    __FILE__, __LINE__, took_, bound_, #took);                                     \
        }                                                                                          \
        assert_true(took_ < (double)bound_);                                                       \
    } while (0)

#endif
