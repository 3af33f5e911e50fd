/* SPDX-License-Identifier: MIT */
/*
 * The 507 text of a request refused by dotmon's memory budget (agent/api.h, api_budget_detail,
 * which api_send_budget_507 answers with): it says what did not fit, the share's or the total's
 * figures, and names the setting to raise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "api.h"
#include "membudget.h"

static void test_detail(void **state)
{
    (void)state;
    membudget_set(48u * 1024 * 1024);
    struct mb_share s;
    mb_share_init(&s, "gcdump of process 42", 6u * 1024 * 1024);
    assert_int_equal(mb_charge(&s, 3u * 1024 * 1024), 0);
    char msg[512];
    const char *d = api_budget_detail(msg, sizeof(msg), "the heap graph", &s);
    assert_ptr_equal(d, msg);
    assert_string_equal(msg, "the heap graph does not fit in dotmon's memory budget (gcdump of "
                             "process 42: 3.0 MiB of 6.0 MiB held; total 48.0 MiB); raise "
                             "Memory:LimitMB (or the container's memory limit)");
    api_budget_detail(msg, sizeof(msg), "a profile's names", NULL);
    assert_string_equal(msg, "a profile's names does not fit in dotmon's memory budget (3.0 MiB of "
                             "48.0 MiB held); raise Memory:LimitMB (or the container's memory "
                             "limit)");
    /* A short buffer gets a cut, NUL-terminated text. */
    char small[16];
    api_budget_detail(small, sizeof(small), "x", &s);
    assert_int_equal(strlen(small), sizeof(small) - 1);
    mb_share_fini(&s);
    membudget_set(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_detail)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
