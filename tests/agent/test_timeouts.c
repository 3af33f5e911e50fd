/* SPDX-License-Identifier: MIT */
/*
 * The timeout table (config/timeouts.h): its rows, their defaults and bounds, the Timeouts:<Name>Ms
 * settings and the older settings that map into it, and the refusals a bad value gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "config.h"
#include "err.h"
#include "timeouts.h"

/* Loads cfg's key=value pairs (NULL-terminated, alternating) into t; returns timeouts_load's. */
static int load(struct timeouts *t, const char *const *kv, char *err, size_t errlen)
{
    struct config c;
    config_init(&c);
    for (size_t i = 0; kv[i] != NULL; i += 2) {
        assert_int_equal(config_set(&c, kv[i], kv[i + 1], "test"), 0);
    }
    int rc = timeouts_load(t, &c, err, errlen);
    config_fini(&c);
    return rc;
}

static void assert_all_defaults(const struct timeouts *t)
{
    for (size_t i = 0; i < TIMEOUT_COUNT; i++) {
        assert_int_equal(t->ms[i], timeout_def((enum timeout_id)i)->default_ms);
    }
}

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < TIMEOUT_COUNT; i++) {
        const struct timeout_def *d = timeout_def((enum timeout_id)i);
        assert_non_null(d);
        assert_non_null(d->name);
        assert_non_null(d->what);
        assert_true(d->min_ms <= d->default_ms && d->default_ms <= d->max_ms);
        assert_true(d->max_ms <= (uint64_t)86400 * 1000);
        /* The lower layers take 0 as "their default": a row never hands them 0 ... */
        assert_true(d->min_ms > 0 || i == TIMEOUT_ANNOUNCE_AFTER);
        /* ... and tests need bounds of a few hundred milliseconds. */
        assert_true(d->min_ms <= 200);
        assert_true((d->legacy_key == NULL) == (d->legacy == TIMEOUT_LEGACY_NONE));
        for (size_t j = 0; j < i; j++) {
            assert_true(strcasecmp(timeout_def((enum timeout_id)j)->name, d->name) != 0);
        }
    }
    assert_null(timeout_def(TIMEOUT_COUNT));
    /* Production values, as they were before the table. */
    struct timeouts t;
    timeouts_defaults(&t);
    assert_int_equal(t.ms[TIMEOUT_IPC_EXCHANGE], 3000);
    assert_int_equal(t.ms[TIMEOUT_SESSION_CLEANUP], 10000);
    assert_int_equal(t.ms[TIMEOUT_TRACE_START], 5000);
    assert_int_equal(t.ms[TIMEOUT_TRACE_STOP], 120000);
    assert_int_equal(t.ms[TIMEOUT_DUMP], 300000);
    assert_int_equal(t.ms[TIMEOUT_GCDUMP], 30000);
    assert_int_equal(t.ms[TIMEOUT_LOGS_PROBE], 3000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_FORGET], 3000);
    assert_int_equal(t.ms[TIMEOUT_HTTP_REQUEST_HEADERS], 10000);
    assert_int_equal(t.ms[TIMEOUT_SHUTDOWN_DEADLINE], 5000);
    /* The rows that were fixed #defines in ipc/, http/ and the collectors. */
    assert_int_equal(t.ms[TIMEOUT_DISCOVERY_RETRY_MAX], 60000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_RETRY], 500);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_RETRY_MAX], 30000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_PARK], 10000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_SETTLE], 2000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_SETTLE_STEP], 100);
    assert_int_equal(t.ms[TIMEOUT_TRACE_RETRY], 250);
    assert_int_equal(t.ms[TIMEOUT_DUMP_POLL], 10);
    assert_int_equal(t.ms[TIMEOUT_DUMP_TAIL], 20);
    assert_int_equal(t.ms[TIMEOUT_HTTP_LINGER], 2000);
    assert_int_equal(t.ms[TIMEOUT_HTTP_PRESSURE_HEAD], 2000);
    assert_string_equal(timeout_def(TIMEOUT_HTTP_PRESSURE_HEAD)->name, "HttpPressureHead");
    assert_int_equal(config_key_kind("Timeouts:ListenSettleStepMs"), CONFIG_KEY_KNOWN);
    assert_string_equal(timeout_def(TIMEOUT_IPC_EXCHANGE)->name, "IpcExchange");
    assert_int_equal(config_key_kind("Timeouts:IpcExchangeMs"), CONFIG_KEY_KNOWN);
}

static void test_no_settings(void **state)
{
    (void)state;
    struct timeouts t;
    memset(&t, 0xff, sizeof(t));
    char err[256] = "x";
    static const char *const none[] = {"Urls", "http://127.0.0.1:1", NULL};
    assert_int_equal(load(&t, none, err, sizeof(err)), 0);
    assert_string_equal(err, "");
    assert_all_defaults(&t);
}

static void test_settings(void **state)
{
    (void)state;
    struct timeouts t;
    char err[256];
    static const char *const kv[] = {"Timeouts:IpcExchangeMs",
                                     "250",
                                     "timeouts:tracestartms",
                                     "300", /* keys are case-insensitive */
                                     "Timeouts:SessionCleanupMs",
                                     "50", /* the minimum */
                                     "Timeouts:DumpMs",
                                     "86400000", /* the maximum */
                                     "Timeouts:LogsProbeMs",
                                     "", /* empty: absent */
                                     "Timeouts:DumpTailMs",
                                     "1", /* a minimum under 50 */
                                     "Timeouts:ListenParkMs",
                                     "400",
                                     NULL};
    assert_int_equal(load(&t, kv, err, sizeof(err)), 0);
    assert_int_equal(t.ms[TIMEOUT_IPC_EXCHANGE], 250);
    assert_int_equal(t.ms[TIMEOUT_TRACE_START], 300);
    assert_int_equal(t.ms[TIMEOUT_SESSION_CLEANUP], 50);
    assert_int_equal(t.ms[TIMEOUT_DUMP], 86400000);
    assert_int_equal(t.ms[TIMEOUT_LOGS_PROBE], 3000);
    assert_int_equal(t.ms[TIMEOUT_TRACE_STOP], 120000);
    assert_int_equal(t.ms[TIMEOUT_DUMP_TAIL], 1);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_PARK], 400);
    assert_int_equal(t.ms[TIMEOUT_DUMP_POLL], 10);

    /* The environment maps as for every setting: DotnetMonitor_Timeouts__<Name>Ms. */
    struct config c;
    config_init(&c);
    static const char *const envp[] = {"DotnetMonitor_Timeouts__TraceStopMs=275", NULL};
    assert_int_equal(config_load_env(&c, envp), 0);
    assert_int_equal(timeouts_load(&t, &c, err, sizeof(err)), 0);
    config_fini(&c);
    assert_int_equal(t.ms[TIMEOUT_TRACE_STOP], 275);
    assert_int_equal(t.ms[TIMEOUT_IPC_EXCHANGE], 3000);
}

/* One refused setting: AGENT_E_INVAL, every value back to its default, err has every word. */
static void refused(const char *const *kv, const char *w1, const char *w2)
{
    struct timeouts t;
    char err[256];
    assert_int_equal(load(&t, kv, err, sizeof(err)), AGENT_E_INVAL);
    fprintf(stderr, "  refused: %s\n", err);
    assert_non_null(strstr(err, w1));
    assert_true(w2 == NULL || strstr(err, w2) != NULL);
    assert_all_defaults(&t);
}

static void test_refused(void **state)
{
    (void)state;
    static const char *const below[] = {"Timeouts:IpcExchangeMs", "49", NULL};
    refused(below, "Timeouts:IpcExchangeMs: '49'", "from 50 to 600000");
    static const char *const above[] = {"Timeouts:IpcExchangeMs", "600001", NULL};
    refused(above, "'600001'", "from 50 to 600000");
    static const char *const unit[] = {"Timeouts:TraceStartMs", "3s", NULL};
    refused(unit, "Timeouts:TraceStartMs: '3s'", "milliseconds");
    static const char *const neg[] = {"Timeouts:TraceStartMs", "-1", NULL};
    refused(neg, "'-1'", NULL);
    static const char *const huge[] = {"Timeouts:TraceStartMs", "99999999999999999999999", NULL};
    refused(huge, "Timeouts:TraceStartMs", NULL);
    /* A good value does not save a bad one next to it. */
    static const char *const mixed[] = {"Timeouts:DumpMs", "300", "Timeouts:GcdumpMs", "x", NULL};
    refused(mixed, "Timeouts:GcdumpMs: 'x'", NULL);
    /* Names: a typo, the Ms left out, the section alone. */
    static const char *const typo[] = {"Timeouts:IpcExchangMs", "300", NULL};
    refused(typo, "Timeouts:IpcExchangMs", "not a timeout dotmon has");
    static const char *const no_ms[] = {"Timeouts:IpcExchange", "300", NULL};
    refused(no_ms, "Timeouts:IpcExchange:", "not a timeout");
    static const char *const section[] = {"Timeouts", "300", NULL};
    refused(section, "Timeouts:", "not a timeout");
    /* Values that contradict each other. */
    static const char *const backoff[] = {"Timeouts:BackoffMinMs", "5000", "Timeouts:BackoffMaxMs",
                                          "1000", NULL};
    refused(backoff, "Timeouts:BackoffMinMs (5000)", "Timeouts:BackoffMaxMs (1000)");
    static const char *const shutdown[] = {"Timeouts:ShutdownGraceMs", "6000", NULL};
    refused(shutdown, "Timeouts:ShutdownGraceMs (6000)", "Timeouts:ShutdownDeadlineMs (5000)");
    static const char *const listen_retry[] = {"Timeouts:ListenRetryMaxMs", "400", NULL};
    refused(listen_retry, "Timeouts:ListenRetryMs (500)", "Timeouts:ListenRetryMaxMs (400)");
    static const char *const tail0[] = {"Timeouts:DumpTailMs", "0", NULL};
    refused(tail0, "Timeouts:DumpTailMs: '0'", "from 1 to 60000");
    /* The older settings keep their own rules. */
    static const char *const dump0[] = {"Dump:TimeoutSeconds", "0", NULL};
    refused(dump0, "Dump:TimeoutSeconds: '0'", "from 1 to 86400");
    static const char *const forget[] = {"DiagnosticPort:ForgetAfterSeconds", "3601", NULL};
    refused(forget, "DiagnosticPort:ForgetAfterSeconds", "from 1 to 3600");
    static const char *const kestrel[] = {"Kestrel:Limits:KeepAliveTimeout", "00:00:99", NULL};
    refused(kestrel, "Kestrel:Limits:KeepAliveTimeout", NULL);
}

static void test_legacy(void **state)
{
    (void)state;
    struct timeouts t;
    char err[256];
    static const char *const kv[] = {"Dump:TimeoutSeconds",
                                     "2",
                                     "Trace:StopTimeoutSeconds",
                                     "7",
                                     "GCDump:TimeoutSeconds",
                                     "86400",
                                     "DiagnosticPort:ForgetAfterSeconds",
                                     "1",
                                     "Kestrel:Limits:RequestHeadersTimeout",
                                     "00:00:30",
                                     "Kestrel:Limits:KeepAliveTimeout",
                                     "5",
                                     NULL};
    assert_int_equal(load(&t, kv, err, sizeof(err)), 0);
    assert_int_equal(t.ms[TIMEOUT_DUMP], 2000);
    assert_int_equal(t.ms[TIMEOUT_TRACE_STOP], 7000);
    assert_int_equal(t.ms[TIMEOUT_GCDUMP], 86400000);
    assert_int_equal(t.ms[TIMEOUT_LISTEN_FORGET], 1000);
    assert_int_equal(t.ms[TIMEOUT_HTTP_REQUEST_HEADERS], 30000);
    assert_int_equal(t.ms[TIMEOUT_HTTP_KEEP_ALIVE], 5000);
    /* Both given: the Timeouts: one wins, whichever came first. */
    static const char *const both[] = {"Timeouts:TraceStopMs", "250", "Trace:StopTimeoutSeconds",
                                       "7", NULL};
    assert_int_equal(load(&t, both, err, sizeof(err)), 0);
    assert_int_equal(t.ms[TIMEOUT_TRACE_STOP], 250);
}

static void test_backoff(void **state)
{
    (void)state;
    struct timeouts t;
    timeouts_defaults(&t);
    uint64_t w = timeouts_backoff_next(&t, 0);
    assert_int_equal(w, 1000);
    uint64_t seen[8];
    for (size_t i = 0; i < 8; i++) {
        seen[i] = w;
        w = timeouts_backoff_next(&t, w);
    }
    static const uint64_t want[8] = {1000, 2000, 4000, 8000, 16000, 32000, 60000, 60000};
    assert_memory_equal(seen, want, sizeof(want));
    assert_int_equal(timeouts_backoff_next(&t, UINT64_MAX), 60000); /* no overflow */
    t.ms[TIMEOUT_BACKOFF_MIN] = 200;
    t.ms[TIMEOUT_BACKOFF_MAX] = 300;
    assert_int_equal(timeouts_backoff_next(&t, 0), 200);
    assert_int_equal(timeouts_backoff_next(&t, 200), 300);
    assert_int_equal(timeouts_backoff_next(&t, 300), 300);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),     cmocka_unit_test(test_no_settings),
        cmocka_unit_test(test_settings), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_legacy),   cmocka_unit_test(test_backoff),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
