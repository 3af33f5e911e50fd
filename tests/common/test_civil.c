/* SPDX-License-Identifier: MIT */
/* Calendar arithmetic (common/civil.h) against known dates and against the C library's timegm. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

#include "civil.h"

static void test_known(void **state)
{
    (void)state;
    assert_int_equal(civil_days(1970, 1, 1), 0);
    assert_int_equal(civil_days(1969, 12, 31), -1);
    assert_int_equal(civil_days(2000, 3, 1), 11017);
    assert_int_equal(civil_days(2000, 2, 29), 11016);                      /* 2000 is a leap year */
    assert_int_equal(civil_days(2100, 3, 1) - civil_days(2100, 2, 28), 1); /* 2100 is not */
    assert_int_equal(civil_days(1, 1, 1), -719162); /* .NET's DateTime epoch */
    int64_t y;
    int m;
    int d;
    civil_date(-719162, &y, &m, &d);
    assert_true(y == 1 && m == 1 && d == 1);
    civil_date(19782, &y, &m, &d);
    assert_true(y == 2024 && m == 2 && d == 29);
}

/* Every day from 1900 to 2200 agrees with timegm, and the two functions undo each other. */
static void test_against_timegm(void **state)
{
    (void)state;
    int64_t prev = civil_days(1899, 12, 31);
    for (int yy = 1900; yy <= 2200; yy++) {
        for (int mm = 1; mm <= 12; mm++) {
            for (int dd = 1; dd <= 31; dd++) {
                struct tm tm = {.tm_year = yy - 1900, .tm_mon = mm - 1, .tm_mday = dd};
                time_t t = timegm(&tm);
                if (tm.tm_mday != dd) {
                    continue; /* no such day (timegm moved it into the next month) */
                }
                int64_t days = civil_days(yy, mm, dd);
                assert_int_equal(days * 86400, (int64_t)t);
                assert_int_equal(days, prev + 1);
                prev = days;
                int64_t y;
                int m;
                int d;
                civil_date(days, &y, &m, &d);
                assert_true(y == yy && m == mm && d == dd);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known),
        cmocka_unit_test(test_against_timegm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
