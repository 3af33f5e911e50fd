/* SPDX-License-Identifier: MIT */
/*
 * events/ev_exphist: the runtime's bucket string (good and hostile), the value-to-bucket mapping
 * at positive, zero and negative scales (powers of two belong to the bucket below), bucket
 * bounds, the offset recovered from the maximum, quantile estimates, and histograms of different
 * scales added up (docs/events.md §3.7).
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_exphist.h"

static void test_parse(void **state)
{
    (void)state;
    uint64_t c[4];
    uint32_t n = 99;
    assert_int_equal(ev_exphist_parse_counts("", c, 4, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(ev_exphist_parse_counts("7", c, 4, &n), 0);
    assert_true(n == 1 && c[0] == 7);
    assert_int_equal(ev_exphist_parse_counts(" 1, 0,2 ,9223372036854775807 ", c, 4, &n), 0);
    assert_true(n == 4 && c[0] == 1 && c[1] == 0 && c[2] == 2 && c[3] == INT64_MAX);
    static const char *const bad[] = {
        ",",
        "1,",
        ",1",
        "1,,2",
        "1 2",
        "-1",
        "+1",
        "1.5",
        "0x10",
        "a",
        "1;2",
        "1\t,2",
        "1, ",
        "\xd9\xa1",
        "1e3",
        " , ",
        "1, 2,",
        "--",
        "9223372036854775808",
        "99999999999999999999999",
    };
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        assert_int_equal(ev_exphist_parse_counts(bad[k], c, 4, &n), AGENT_E_INVAL);
    }
    assert_int_equal(ev_exphist_parse_counts("1, 2, 3, 4, 5", c, 4, &n), AGENT_E_TOOBIG);
    assert_int_equal(n, 4); /* nothing written past the room */
}

static void test_index(void **state)
{
    (void)state;
    /* scale 0: base 2, buckets (2^i, 2^(i+1)] */
    assert_int_equal(ev_exphist_index(1, 0), -1);
    assert_int_equal(ev_exphist_index(1.0000001, 0), 0);
    assert_int_equal(ev_exphist_index(2, 0), 0);
    assert_int_equal(ev_exphist_index(3, 0), 1);
    assert_int_equal(ev_exphist_index(4, 0), 1);
    assert_int_equal(ev_exphist_index(0.25, 0), -3);
    assert_int_equal(ev_exphist_index(0.3, 0), -2);
    /* scale 1: base sqrt 2 */
    assert_int_equal(ev_exphist_index(1.5, 1), 1);
    assert_int_equal(ev_exphist_index(2, 1), 1);
    assert_int_equal(ev_exphist_index(3, 1), 3);
    assert_int_equal(ev_exphist_index(4, 1), 3);
    /* scale -1: base 4 */
    assert_int_equal(ev_exphist_index(4, -1), 0);
    assert_int_equal(ev_exphist_index(5, -1), 1);
    assert_int_equal(ev_exphist_index(0.5, -1), -1);
    assert_int_equal(ev_exphist_index(1, -1), -1);
    /* the extremes the runtime's table gives (scale 20 and -11) */
    assert_int_equal(ev_exphist_index(1.7976931348623157e308, 20), 1073741823);
    assert_int_equal(ev_exphist_index(4.9406564584124654e-324, 20), -1126170625);
    assert_int_equal(ev_exphist_index(1.7976931348623157e308, -11), 0);
    assert_int_equal(ev_exphist_index(4.9406564584124654e-324, -11), -1);
    /* every value lies in the bucket it maps to */
    for (int32_t s = -4; s <= 20; s += 3) {
        for (double v = 1e-6; v < 1e7; v *= 3.7) {
            int64_t i = ev_exphist_index(v, s);
            assert_true(ev_exphist_lower(i, s) < v * (1 + 1e-12));
            assert_true(ev_exphist_lower(i + 1, s) >= v * (1 - 1e-12));
        }
    }
}

static void test_lower(void **state)
{
    (void)state;
    assert_true(ev_exphist_lower(1, 0) == 2);
    assert_true(ev_exphist_lower(-1, 0) == 0.5);
    assert_true(ev_exphist_lower(2, 1) == 2);
    assert_true(ev_exphist_lower(1, -1) == 4);
    assert_true(ev_exphist_lower(-3, -1) == 1.0 / 64);
    assert_true(isinf(ev_exphist_lower(5000, -1)));
    assert_true(ev_exphist_lower(-5000, -1) == 0);
}

static void test_locate(void **state)
{
    (void)state;
    /* 97 values of 5 and 3 of 5000 at scale 3: buckets 18 and 98 */
    uint64_t c[99] = {0};
    c[0] = 97;
    c[80] = 3;
    struct ev_exphist h = {.scale = 3, .min = 5, .max = 5000, .counts = c, .ncounts = 81};
    assert_true(ev_exphist_locate(&h));
    assert_int_equal(h.offset, 18);
    assert_int_equal(h.ncounts, 81);
    /* the same after a reset: the window starts at bucket 0 */
    memset(c, 0, sizeof(c));
    c[18] = 97;
    c[98] = 3;
    h = (struct ev_exphist){.scale = 3, .min = 5, .max = 5000, .counts = c, .ncounts = 99};
    assert_true(ev_exphist_locate(&h));
    assert_int_equal(h.offset, 18);
    assert_int_equal(h.ncounts, 81);
    assert_ptr_equal(h.counts, c + 18);
    /* the max's bucket empty, or outside: refused */
    h = (struct ev_exphist){.scale = 3, .min = 5, .max = 5000, .counts = c + 1, .ncounts = 98};
    c[98] = 0;
    h.ncounts = 97; /* ends at 97: the last count 0 would mean a window ending at -1 */
    assert_false(ev_exphist_locate(&h));
    /* a positive min outside the window: refused */
    c[98] = 3;
    h = (struct ev_exphist){.scale = 3, .min = 1, .max = 5000, .counts = c + 18, .ncounts = 81};
    assert_false(ev_exphist_locate(&h));
    h = (struct ev_exphist){.scale = 3, .min = 0, .max = 5000, .counts = c + 18, .ncounts = 81};
    assert_true(ev_exphist_locate(&h)); /* a zero min says nothing about the buckets */
    h = (struct ev_exphist){.scale = 3, .min = 5, .max = (double)NAN, .counts = c, .ncounts = 99};
    assert_false(ev_exphist_locate(&h));
    h = (struct ev_exphist){.scale = -12, .min = 5, .max = 5000, .counts = c, .ncounts = 99};
    assert_false(ev_exphist_locate(&h));
    h = (struct ev_exphist){.scale = 3, .max = -1.7976931348623157e308};
    assert_true(ev_exphist_locate(&h)); /* no bucket, nothing to place */
    assert_int_equal(h.offset, 0);
}

static void test_quantile(void **state)
{
    (void)state;
    uint64_t c[81] = {0};
    c[0] = 97;
    c[80] = 3;
    struct ev_exphist h = {
        .scale = 3, .offset = 18, .min = 5, .max = 5000, .counts = c, .ncounts = 81};
    double v = 0;
    assert_true(ev_exphist_quantile(&h, 0.5, &v));
    assert_true(v >= 5 && v <= ev_exphist_lower(19, 3));
    assert_true(ev_exphist_quantile(&h, 0.95, &v));
    assert_true(v >= 5 && v <= ev_exphist_lower(19, 3));
    assert_true(ev_exphist_quantile(&h, 0.99, &v));
    assert_true(v == 5000); /* inside 5000's bucket, kept at the max */
    assert_true(ev_exphist_quantile(&h, 0.975, &v));
    assert_true(v > ev_exphist_lower(98, 3) && v <= 5000);
    /* zeros come first */
    h.zero_count = 900;
    h.min = 0;
    assert_true(ev_exphist_quantile(&h, 0.5, &v));
    assert_true(v == 0);
    assert_true(ev_exphist_quantile(&h, 1, &v));
    assert_true(v == 5000);
    assert_false(ev_exphist_quantile(&h, 0, &v));
    assert_false(ev_exphist_quantile(&h, 1.5, &v));
    struct ev_exphist empty = {.scale = 3};
    assert_false(ev_exphist_quantile(&empty, 0.5, &v));
}

/* Every count of h is found in acc's bucket for it. */
static uint64_t total(const struct ev_exphist *h)
{
    uint64_t t = h->zero_count;
    for (uint32_t i = 0; i < h->ncounts; i++) {
        t += h->counts[i];
    }
    return t;
}

static void test_acc(void **state)
{
    (void)state;
    struct ev_exphist_acc acc;
    memset(&acc, 0, sizeof(acc));
    const uint64_t a[] = {97};
    const uint64_t b[] = {3};
    const uint64_t z[] = {0};
    struct ev_exphist h1 = {
        .scale = 3, .offset = 18, .min = 5, .max = 5, .counts = a, .ncounts = 1};
    struct ev_exphist h2 = {
        .scale = 2, .offset = 49, .min = 5000, .max = 5000, .counts = b, .ncounts = 1};
    struct ev_exphist none = {.scale = 20, .zero_count = 4, .min = 0, .max = 0, .counts = z};
    assert_int_equal(ev_exphist_acc_add(&acc, &h1, 97, 485, 160), 0);
    assert_int_equal(acc.h.scale, 3);
    assert_int_equal(acc.h.offset, 18);
    assert_int_equal(ev_exphist_acc_add(&acc, &h2, 3, 15000, 160), 0);
    assert_int_equal(ev_exphist_acc_add(&acc, &none, 4, 0, 160), 0);
    /* down to scale 2: 18 -> 9; 9..49 */
    assert_int_equal(acc.h.scale, 2);
    assert_int_equal(acc.h.offset, 9);
    assert_int_equal(acc.h.ncounts, 41);
    assert_true(acc.counts[0] == 97 && acc.counts[40] == 3);
    assert_int_equal(acc.h.zero_count, 4);
    assert_int_equal(acc.count, 104);
    assert_true(acc.sum == 15485);
    assert_true(acc.h.min == 0 && acc.h.max == 5000);
    assert_true(acc.h.cumulative);
    assert_int_equal(total(&acc.h), 104);
    /* a window of 4: the scale goes down until both ends fit */
    assert_int_equal(ev_exphist_acc_add(&acc, &h1, 97, 485, 4), 0);
    assert_true(acc.h.ncounts <= 4);
    assert_int_equal(total(&acc.h), 201);
    assert_true(ev_exphist_lower(acc.h.offset, acc.h.scale) < 5);
    assert_true(ev_exphist_lower(acc.h.offset + acc.h.ncounts, acc.h.scale) >= 5000);
    ev_exphist_acc_fini(&acc);

    /* negative indexes: floor, not truncation, when the scale goes down */
    const uint64_t one[] = {1};
    struct ev_exphist lo = {
        .scale = 0, .offset = -3, .min = 0.2, .max = 0.2, .counts = one, .ncounts = 1};
    struct ev_exphist hi = {
        .scale = 0, .offset = 5, .min = 50, .max = 50, .counts = one, .ncounts = 1};
    assert_int_equal(ev_exphist_acc_add(&acc, &lo, 1, 0.2, 4), 0);
    assert_int_equal(ev_exphist_acc_add(&acc, &hi, 1, 50, 4), 0);
    assert_int_equal(acc.h.scale, -2);
    assert_int_equal(acc.h.offset, -1);
    assert_int_equal(acc.h.ncounts, 3);
    assert_true(acc.counts[0] == 1 && acc.counts[1] == 0 && acc.counts[2] == 1);
    ev_exphist_acc_fini(&acc);
    ev_exphist_acc_fini(&acc); /* twice: harmless */

    /* totals near 2^63 (each point valid alone): refused before anything wraps, acc unchanged */
    const uint64_t big[] = {(uint64_t)1 << 62};
    struct ev_exphist hb = {
        .scale = 0, .offset = 2, .min = 5, .max = 5, .counts = big, .ncounts = 1};
    assert_int_equal(ev_exphist_acc_add(&acc, &hb, big[0], 5.0, 160), 0);
    assert_int_equal(ev_exphist_acc_add(&acc, &hb, big[0], 5.0, 160), -EOVERFLOW);
    assert_true(acc.count == big[0] && acc.h.ncounts == 1 && acc.counts[0] == big[0]);
    struct ev_exphist zb = {.scale = 0, .zero_count = big[0], .counts = one};
    assert_int_equal(ev_exphist_acc_add(&acc, &zb, 1, 0, 160), 0);
    assert_int_equal(ev_exphist_acc_add(&acc, &zb, 1, 0, 160), -EOVERFLOW);
    assert_true(acc.h.zero_count == big[0] && acc.count == big[0] + 1);
    ev_exphist_acc_fini(&acc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),    cmocka_unit_test(test_index),
        cmocka_unit_test(test_lower),    cmocka_unit_test(test_locate),
        cmocka_unit_test(test_quantile), cmocka_unit_test(test_acc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
