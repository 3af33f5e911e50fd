/* SPDX-License-Identifier: MIT */
/*
 * The OpenTelemetry exporter's settings (agent/otel/otel_conf.c): OTel's OTEL_* variables as the
 * SDKs read them, dotmon's OpenTelemetry section winning over them, and what is refused.
 */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>

#include "err.h"
#include "otel_conf.h"

/* NULL-terminated name, value pairs. */
static const char *lookup(const void *ud, const char *name)
{
    const char *const *kv = ud;
    for (size_t i = 0; kv != NULL && kv[i] != NULL; i += 2) {
        if (strcasecmp(kv[i], name) == 0) {
            return kv[i + 1];
        }
    }
    return NULL;
}

static int read_conf(const char *const *env, const char *const *cfg, struct otel_conf *oc,
                     char *why, size_t whylen)
{
    const struct otel_conf_src src = {
        .getenv = lookup, .env_ud = env, .getcfg = lookup, .cfg_ud = cfg};
    return otel_conf_read(&src, oc, why, whylen);
}

static void test_nothing_set(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_false(oc.any);
    otel_conf_fini(&oc);
}

static void test_base_endpoint_turns_all_on(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT",
                               "https://collector.example:4318/base/",
                               "OTEL_EXPORTER_OTLP_COMPRESSION", "gzip", NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_true(oc.any);
    static const char *const paths[3] = {"/base/v1/logs", "/base/v1/metrics", "/base/v1/traces"};
    for (int s = 0; s < 3; s++) {
        assert_true(oc.sig[s].on);
        assert_true(oc.sig[s].https);
        assert_string_equal(oc.sig[s].host, "collector.example");
        assert_int_equal(oc.sig[s].port, 4318);
        assert_string_equal(oc.sig[s].target, paths[s]);
        assert_true(oc.sig[s].gzip);
        assert_int_equal(oc.sig[s].format, OTLP_PROTOBUF);
        assert_int_equal(oc.sig[s].timeout_ms, 10000);
    }
    assert_int_equal(oc.sig[OTLP_TRACES].delay_ms, 5000);
    assert_int_equal(oc.sig[OTLP_LOGS].delay_ms, 1000);
    assert_int_equal(oc.sig[OTLP_TRACES].max_queue, 2048);
    assert_int_equal(oc.sig[OTLP_TRACES].max_batch, 512);
    otel_conf_fini(&oc);
}

static void test_signal_endpoint_as_is_and_none(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT",
                               "http://[::1]:9000",
                               "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                               "http://t:1/custom?k=v",
                               "OTEL_METRICS_EXPORTER",
                               "none",
                               NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_true(oc.sig[OTLP_LOGS].on);
    assert_string_equal(oc.sig[OTLP_LOGS].host, "::1");
    assert_int_equal(oc.sig[OTLP_LOGS].port, 9000);
    assert_string_equal(oc.sig[OTLP_LOGS].target, "/v1/logs");
    assert_string_equal(oc.sig[OTLP_LOGS].url, "http://[::1]:9000/v1/logs");
    assert_false(oc.sig[OTLP_METRICS].on);
    assert_string_equal(oc.sig[OTLP_TRACES].target, "/custom?k=v");
    assert_string_equal(oc.sig[OTLP_TRACES].url, "http://t:1/custom"); /* no query in messages */
    otel_conf_fini(&oc);
}

static void test_section_wins(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT",
                               "http://env:1",
                               "OTEL_EXPORTER_OTLP_PROTOCOL",
                               "http/protobuf",
                               "OTEL_BSP_MAX_QUEUE_SIZE",
                               "100",
                               NULL};
    const char *const cfg[] = {"OpenTelemetry:Endpoint",
                               "http://cfg:2",
                               "OpenTelemetry:Protocol",
                               "http/json",
                               "OpenTelemetry:Logs:Protocol",
                               "http/protobuf",
                               "OpenTelemetry:Traces:MaxQueueSize",
                               "50",
                               "OpenTelemetry:Metrics:Enabled",
                               "false",
                               "OpenTelemetry:SamplingRatio",
                               "0.25",
                               "OpenTelemetry:LogLevel",
                               "Warning",
                               NULL};
    assert_int_equal(read_conf(env, cfg, &oc, why, sizeof(why)), 0);
    assert_string_equal(oc.sig[OTLP_TRACES].host, "cfg");
    assert_int_equal(oc.sig[OTLP_TRACES].format, OTLP_JSON);
    assert_int_equal(oc.sig[OTLP_LOGS].format, OTLP_PROTOBUF);
    assert_int_equal(oc.sig[OTLP_TRACES].max_queue, 50);
    assert_int_equal(oc.sig[OTLP_TRACES].max_batch, 50); /* never more than the queue */
    assert_false(oc.sig[OTLP_METRICS].on);
    assert_true(oc.sampling_ratio > 0.249 && oc.sampling_ratio < 0.251);
    assert_int_equal(oc.log_level, 3);
    otel_conf_fini(&oc);
}

static void test_headers(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT",
                               "http://h:1",
                               "OTEL_EXPORTER_OTLP_HEADERS",
                               " a=1%2C2 ,, b%2Dc=x=y ",
                               "OTEL_EXPORTER_OTLP_LOGS_HEADERS",
                               "only=logs",
                               NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    const struct otel_sig_conf *t = &oc.sig[OTLP_TRACES];
    assert_int_equal(t->nheaders, 2);
    assert_string_equal(t->headers[0].name, "a");
    assert_string_equal(t->headers[0].value, "1,2");
    assert_string_equal(t->headers[1].name, "b-c");
    assert_string_equal(t->headers[1].value, "x=y");
    assert_int_equal(oc.sig[OTLP_LOGS].nheaders, 1);
    assert_string_equal(oc.sig[OTLP_LOGS].headers[0].value, "logs");
    otel_conf_fini(&oc);
}

/* Each is refused, and the reason names the setting (never a header's value). */
static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *env[7];
        const char *named;
    } bad[] = {
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://x", NULL}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:0", NULL}, "is not a valid URL"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://:80", NULL}, "is not a valid URL"},
        /* a refused URL is quoted without its userinfo, path or query */
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://u:secret@h:x/v1", NULL}, "\"https://…\""},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://h:0/p?key=secret", NULL}, "\"http://h:0…\""},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "secret", NULL}, "OTEL_EXPORTER_OTLP_ENDPOINT"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", NULL},
         "grpc is not supported, use http/protobuf"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_COMPRESSION", "zstd",
          NULL},
         "OTEL_EXPORTER_OTLP_COMPRESSION"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_TIMEOUT", "10s", NULL},
         "OTEL_EXPORTER_OTLP_TIMEOUT"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_HEADERS", "k=%zzsecret",
          NULL},
         "OTEL_EXPORTER_OTLP_HEADERS"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_HEADERS", "nokey", NULL},
         "name=value"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_TRACES_EXPORTER", "zipkin", NULL},
         "OTEL_TRACES_EXPORTER"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_BSP_MAX_QUEUE_SIZE", "0", NULL},
         "OTEL_BSP_MAX_QUEUE_SIZE"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_TRACES_SAMPLER", "traceidratio",
          "OTEL_TRACES_SAMPLER_ARG", "1.5", NULL},
         "OTEL_TRACES_SAMPLER_ARG"},
        {{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_EXPORTER_OTLP_CLIENT_KEY", "/k", NULL},
         "mTLS"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct otel_conf oc;
        char why[256] = "";
        assert_int_equal(read_conf(bad[i].env, NULL, &oc, why, sizeof(why)), AGENT_E_INVAL);
        if (strstr(why, bad[i].named) == NULL || strstr(why, "secret") != NULL) {
            fail_msg("case %zu: \"%s\" does not name %s", i, why, bad[i].named);
        }
    }
}

/* OTel's histogram aggregation: exponential by default (what .NET 10 can publish); explicit keeps
 * the runtime's quantiles; the section wins over the variable. */
static void test_histogram_aggregation(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_true(oc.exp_histograms);
    otel_conf_fini(&oc);
    const char *const env2[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x",
                                "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
                                "Explicit_Bucket_Histogram", NULL};
    assert_int_equal(read_conf(env2, NULL, &oc, why, sizeof(why)), 0);
    assert_false(oc.exp_histograms);
    otel_conf_fini(&oc);
    const char *const cfg[] = {"OpenTelemetry:HistogramAggregation",
                               "base2_exponential_bucket_histogram", NULL};
    assert_int_equal(read_conf(env2, cfg, &oc, why, sizeof(why)), 0);
    assert_true(oc.exp_histograms);
    otel_conf_fini(&oc);
    const char *const env3[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x",
                                "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION",
                                "exponential", NULL};
    assert_int_equal(read_conf(env3, NULL, &oc, why, sizeof(why)), AGENT_E_INVAL);
    assert_non_null(strstr(why, "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION"));
}

/* OpenTelemetry:IncludeScopes: on unless set to false; anything but true or false is refused. */
static void test_include_scopes(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_true(oc.include_scopes);
    otel_conf_fini(&oc);
    const char *const off[] = {"OpenTelemetry:IncludeScopes", "False", NULL};
    assert_int_equal(read_conf(env, off, &oc, why, sizeof(why)), 0);
    assert_false(oc.include_scopes);
    otel_conf_fini(&oc);
    const char *const bad[] = {"OpenTelemetry:IncludeScopes", "no", NULL};
    assert_int_equal(read_conf(env, bad, &oc, why, sizeof(why)), AGENT_E_INVAL);
    assert_non_null(strstr(why, "OpenTelemetry:IncludeScopes"));
}

static void test_sdk_disabled(void **state)
{
    (void)state;
    struct otel_conf oc;
    char why[256] = "";
    const char *const env[] = {"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x", "OTEL_SDK_DISABLED",
                               "TRUE", NULL};
    assert_int_equal(read_conf(env, NULL, &oc, why, sizeof(why)), 0);
    assert_false(oc.any);
    otel_conf_fini(&oc);
    const char *const cfg[] = {"OpenTelemetry:Traces:Enabled", "true", NULL};
    assert_int_equal(read_conf(env, cfg, &oc, why, sizeof(why)), 0);
    assert_true(oc.sig[OTLP_TRACES].on); /* the section still counts: OTLP's default endpoint */
    assert_string_equal(oc.sig[OTLP_TRACES].url, "http://localhost:4318/v1/traces");
    assert_false(oc.sig[OTLP_LOGS].on);
    otel_conf_fini(&oc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nothing_set),
        cmocka_unit_test(test_base_endpoint_turns_all_on),
        cmocka_unit_test(test_signal_endpoint_as_is_and_none),
        cmocka_unit_test(test_section_wins),
        cmocka_unit_test(test_headers),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_histogram_aggregation),
        cmocka_unit_test(test_include_scopes),
        cmocka_unit_test(test_sdk_disabled),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
