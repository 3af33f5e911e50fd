/* SPDX-License-Identifier: MIT */
/*
 * The budget dotmon takes from its cgroup's memory limit (common/membudget.h,
 * membudget_from_limit): limit - max(16 MiB, limit / 4), a quarter of a tiny limit, 0 for none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "err.h"
#include "membudget.h"

#define MIB (1024ull * 1024ull)

static void test_headroom(void **state)
{
    (void)state;
    assert_int_equal(membudget_from_limit(0), 0);               /* no limit: unlimited */
    assert_int_equal(membudget_from_limit(64 * MIB), 48 * MIB); /* the shipped manifests */
    assert_int_equal(membudget_from_limit(32 * MIB), 16 * MIB); /* 16 MiB headroom floor */
    assert_int_equal(membudget_from_limit(128 * MIB), 96 * MIB);
    assert_int_equal(membudget_from_limit(1024 * MIB), 768 * MIB); /* a quarter */
    assert_int_equal(membudget_from_limit(16 * MIB), 4 * MIB);     /* tiny: a quarter */
    assert_int_equal(membudget_from_limit(20 * MIB), 5 * MIB);     /* still a quarter */
    assert_int_equal(membudget_from_limit(24 * MIB), 8 * MIB);     /* limit - 16 MiB again */
    assert_int_equal(membudget_from_limit(4096), 1024);
    /* Never more than the limit less its headroom, for any limit. */
    for (uint64_t l = MIB; l < 4096 * MIB; l = l * 3 / 2 + 4096) {
        uint64_t b = membudget_from_limit(l);
        assert_true(b <= l - l / 4);
        assert_true(b >= l / 4);
        assert_true(l - b >= (l / 4 > 16 * MIB ? l / 4 : (l > 21 * MIB ? 16 * MIB : 0)));
    }
}

/* A share's cap and the total both bound charges; refusals are counted, releases give back. */
static void test_shares(void **state)
{
    (void)state;
    membudget_set(membudget_from_limit(64 * MIB));
    struct mb_share a, b;
    mb_share_init(&a, "metrics of process 1", membudget_fraction(12, 0));
    mb_share_init(&b, "metrics of process 2", 0);
    assert_int_equal(mb_charge(&a, 5 * MIB), 0);
    assert_int_equal(mb_charge(&a, 1 * MIB), AGENT_E_BUDGET); /* 12% of 48 MiB: 5.76 MiB */
    assert_int_equal(mb_charge(&a, MIB / 2), 0);
    assert_int_equal(mb_charge(&a, 2 * MIB), AGENT_E_BUDGET);
    assert_int_equal(atomic_load(&a.refused), 2);
    assert_int_equal(atomic_load(&a.used), 5 * MIB + MIB / 2);
    assert_int_equal(mb_charge(&b, 42 * MIB), 0);
    assert_int_equal(mb_charge(&b, 1 * MIB), AGENT_E_BUDGET); /* the total: 48 MiB */
    mb_release(&b, 2 * MIB);
    assert_int_equal(membudget_used(), 45 * MIB + MIB / 2);
    mb_share_fini(&a);
    assert_int_equal(membudget_used(), 40 * MIB);
    mb_share_fini(&b);
    assert_int_equal(membudget_used(), 0);
    membudget_set(0);
}

/* DOTMON_MEMORY_LIMIT_MB: the whole string a decimal number of MiB, at most 16 Mi. */
static void test_parse_mb(void **state)
{
    (void)state;
    uint64_t mb = 7;
    assert_int_equal(membudget_parse_mb("64", &mb), 0);
    assert_int_equal(mb, 64);
    assert_int_equal(membudget_parse_mb("0", &mb), 0);
    assert_int_equal(mb, 0);
    assert_int_equal(membudget_parse_mb("16777216", &mb), 0);
    assert_int_equal(mb, MEMBUDGET_MAX_MB);
    mb = 7;
    const char *bad[] = {"12abc",
                         "",
                         " 5",
                         "-1",
                         "+5",
                         "16777217",
                         "18446744073709551617",
                         "99999999999999999999999",
                         "5 ",
                         "0x10"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(membudget_parse_mb(bad[i], &mb), AGENT_E_INVAL);
    }
    assert_int_equal(mb, 7); /* untouched on failure */
    assert_int_equal(membudget_parse_mb(NULL, &mb), AGENT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_headroom),
        cmocka_unit_test(test_parse_mb),
        cmocka_unit_test(test_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
