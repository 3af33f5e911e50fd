/* SPDX-License-Identifier: MIT */
/*
 * Metrics:Providers and Metrics:Meters from the settings (agent/collectors/metrics_session.c):
 * every list entry, gaps allowed and named entries after the numbered ones, as .NET binds a list.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "err.h"
#include "metrics_session.h"

static void test_lists_in_dotnet_order(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    assert_int_equal(config_set(&c, "Metrics:IncludeDefaultProviders", "false", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Providers:3:ProviderName", "Prov.B", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Providers:0:ProviderName", "Prov.A", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Providers:3:CounterNames:0", "c0", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Providers:3:CounterNames:7", "c7", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Meters:70:MeterName", "Meter.X", "test"), 0);
    assert_int_equal(config_set(&c, "Metrics:Meters:70:InstrumentNames:2", "i2", "test"), 0);
    struct metrics_filters f;
    assert_int_equal(metrics_filters_from_config(&f, &c, 5), 0);
    assert_int_equal(f.n, 3);
    assert_string_equal(f.v[0].name, "Prov.A");
    assert_int_equal(f.v[0].nnames, 0);
    assert_string_equal(f.v[1].name, "Prov.B");
    assert_int_equal(f.v[1].nnames, 2);
    assert_string_equal(f.v[1].names[0], "c0");
    assert_string_equal(f.v[1].names[1], "c7");
    assert_string_equal(f.v[2].name, "Meter.X");
    assert_true(f.v[2].meter);
    assert_int_equal(f.v[2].nnames, 1);
    assert_string_equal(f.v[2].names[0], "i2");
    metrics_filters_fini(&f);
    assert_int_equal(config_set(&c, "Metrics:Meters:two:MeterName", "Meter.Y", "test"), 0);
    assert_int_equal(metrics_filters_from_config(&f, &c, 5), 0);
    assert_int_equal(f.n, 4);
    assert_string_equal(f.v[3].name, "Meter.Y");
    metrics_filters_fini(&f);
    assert_int_equal(config_set(&c, "Metrics:Meters:3:MeterName", "bad;name", "test"), 0);
    assert_int_equal(metrics_filters_from_config(&f, &c, 5), AGENT_E_INVAL);
    config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lists_in_dotnet_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
