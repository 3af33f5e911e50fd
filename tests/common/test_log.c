/* SPDX-License-Identifier: MIT */
/*
 * Issue 32 item 15: dotmon's own log in the shapes of .NET's console formatters (json, simple,
 * systemd, with their FormatterOptions) and Microsoft.Extensions.Logging's level selection by
 * category (Logging:LogLevel:<Category>, Logging:Console:LogLevel:<Category>), from settings in
 * dotnet-monitor's documented form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "err.h"
#include "log.h"
#include "logging.h"

/* 2026-01-02T03:04:05.678901Z */
static const struct timeval when = {.tv_sec = 1767323045, .tv_usec = 678901};

static char *entry(const struct log_options *o, bool color, enum log_level level,
                   const char *category, const char *message)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(log_format_entry(&b, o, color, level, category, message, &when), 0);
    char *s = strdup(buf_cstr(&b));
    buf_fini(&b);
    return s;
}

static void expect(const struct log_options *o, bool color, enum log_level level,
                   const char *category, const char *message, const char *want)
{
    char *s = entry(o, color, level, category, message);
    assert_string_equal(s, want);
    free(s);
}

static void test_log_json(void **state)
{
    (void)state;
    /* dotmon's default: the line without State. */
    struct log_options o = {.format = LOG_FORMAT_JSON};
    expect(&o, false, LOG_ERROR, "dotmon", "e",
           "{\"Timestamp\":\"2026-01-02T03:04:05.678Z\",\"EventId\":0,\"LogLevel\":\"Error\","
           "\"Category\":\"dotmon\",\"Message\":\"e\"}\n");
    /* FormatterName json: .NET's JsonConsoleFormatter, State included. */
    o.state = true;
    expect(&o, false, LOG_INFO, "dotmon.dump", "dump \"1\"",
           "{\"Timestamp\":\"2026-01-02T03:04:05.678Z\",\"EventId\":0,\"LogLevel\":\"Information\","
           "\"Category\":\"dotmon.dump\",\"Message\":\"dump \\\"1\\\"\",\"State\":{\"Message\":"
           "\"dump \\\"1\\\"\",\"{OriginalFormat}\":\"dump \\\"1\\\"\"}}\n");
    /* JsonWriterOptions:Indented, IncludeScopes, a TimestampFormat: one JSON document still. */
    o.indented = true;
    o.include_scopes = true;
    o.utc = true;
    snprintf(o.timestamp_format, sizeof(o.timestamp_format), "HH:mm:ss ");
    char *s = entry(&o, false, LOG_WARN, "Egress", "two\nlines");
    assert_non_null(strstr(s, "\n  \"LogLevel\": \"Warning\""));
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    const char *order[] = {"Timestamp", "EventId", "LogLevel", "Category",
                           "Message",   "State",   "Scopes"};
    size_t k = 0;
    for (cJSON *c = j->child; c != NULL; c = c->next, k++) {
        assert_true(k < 7);
        assert_string_equal(c->string, order[k]);
    }
    assert_int_equal(k, 7);
    assert_string_equal(cJSON_GetObjectItem(j, "Timestamp")->valuestring, "03:04:05 ");
    assert_string_equal(cJSON_GetObjectItem(j, "Message")->valuestring, "two\nlines");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "Scopes")), 0);
    cJSON_Delete(j);
    free(s);
}

static void test_log_simple(void **state)
{
    (void)state;
    /* dotnet-monitor's own appsettings.json: simple, "HH:mm:ss ", IncludeScopes. */
    struct log_options o = {.format = LOG_FORMAT_SIMPLE, .utc = true, .include_scopes = true};
    snprintf(o.timestamp_format, sizeof(o.timestamp_format), "HH:mm:ss ");
    expect(&o, false, LOG_INFO, "dotmon.dump", "first\nsecond",
           "03:04:05 info: dotmon.dump[0]\n      first\n      second\n");
    expect(&o, false, LOG_ERROR, "dotmon", "x", "03:04:05 fail: dotmon[0]\n      x\n");
    /* No TimestampFormat: no timestamp. SingleLine: one line, newlines as spaces. */
    o.timestamp_format[0] = '\0';
    o.single_line = true;
    expect(&o, false, LOG_DEBUG, "dotmon.ipc", "a\r\nb", "dbug: dotmon.ipc[0] a b\n");
    /* ColorBehavior Enabled: the level in .NET's colours, reset after it. */
    expect(&o, true, LOG_WARN, "dotmon", "w",
           "\x1b[40m\x1b[1m\x1b[33mwarn\x1b[39m\x1b[22m\x1b[49m: dotmon[0] w\n");
}

static void test_log_systemd(void **state)
{
    (void)state;
    struct log_options o = {.format = LOG_FORMAT_SYSTEMD};
    expect(&o, false, LOG_INFO, "dotmon.dump", "dump\nwritten", "<6>dotmon.dump[0] dump written\n");
    expect(&o, false, LOG_WARN, "dotmon", "w", "<4>dotmon[0] w\n");
    expect(&o, false, LOG_ERROR, "dotmon", "e", "<3>dotmon[0] e\n");
    expect(&o, false, LOG_DEBUG, "dotmon", "d", "<7>dotmon[0] d\n");
    /* control characters from outside text never reach the journal or a terminal raw */
    expect(&o, false, LOG_INFO, "dotmon", "a\x1b[31mb\x7f\tc", "<6>dotmon[0] a?[31mb?\tc\n");
    o.utc = true;
    snprintf(o.timestamp_format, sizeof(o.timestamp_format), "yyyy-MM-ddTHH:mm:ss.fff ");
    expect(&o, false, LOG_INFO, "x", "m", "<6>2026-01-02T03:04:05.678 x[0] m\n");
}

static void test_log_timestamp_formats(void **state)
{
    (void)state;
    struct log_options o = {.format = LOG_FORMAT_SYSTEMD, .utc = true};
    static const struct {
        const char *fmt, *want;
    } cases[] = {
        {"o", "2026-01-02T03:04:05.6789010Z"},
        {"u", "2026-01-02 03:04:05Z"},
        {"s", "2026-01-02T03:04:05"},
        {"yy/M/d h:m:s tt", "26/1/2 3:4:5 AM"},
        {"'at' HH\\h mm", "at 03h 04"},
        {"ss.FFFF", "05.6789"},
        {"ss.ffffff", "05.678901"},
        {"HH:mm zzz", "03:04 +00:00"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(o.timestamp_format, sizeof(o.timestamp_format), "%s", cases[i].fmt);
        char want[128];
        snprintf(want, sizeof(want), "<6>%sc[0] m\n", cases[i].want);
        expect(&o, false, LOG_INFO, "c", "m", want);
    }
}

static void load(struct config *c, const char *json)
{
    config_init(c);
    char err[256];
    assert_int_equal(config_load_json(c, json, strlen(json), "file", err, sizeof(err)), 0);
}

/* Levels by category as Microsoft.Extensions.Logging picks them, from dotnet-monitor's form. */
static void test_log_category_levels(void **state)
{
    (void)state;
    struct config c;
    load(&c, "{\"Logging\":{\"LogLevel\":{\"Default\":\"Warning\",\"dotmon\":\"Error\","
             "\"dotmon.dump\":\"Debug\",\"dotmon.r*s\":\"Trace\",\"dotmon.ipc.listen\":\"Debug\"},"
             "\"Console\":{\"LogLevel\":{\"dotmon.ipc\":\"Information\"},\"FormatterName\":"
             "\"systemd\"},\"CaptureScopes\":true}}");
    char err[256] = "";
    assert_int_equal(logging_configure(&c, err, sizeof(err)), 0);
    config_fini(&c);
    assert_int_equal(log_level_for("dotmon.dump"), LOG_DEBUG);      /* the longest prefix */
    assert_int_equal(log_level_for("dotmon.dumpster"), LOG_DEBUG);  /* a prefix, as .NET's */
    assert_int_equal(log_level_for("dotmon.trace"), LOG_ERROR);     /* "dotmon" */
    assert_int_equal(log_level_for("Dotmon.Http"), LOG_ERROR);      /* case-insensitive */
    assert_int_equal(log_level_for("dotmon.rules"), LOG_DEBUG);     /* one '*': Trace is Debug */
    assert_int_equal(log_level_for("dotmon.ipc.listen"), LOG_INFO); /* the console's rule wins */
    assert_int_equal(log_level_for("Egress"), LOG_WARN);            /* Default */
    assert_int_equal(log_get_level(), LOG_DEBUG);
    log_reset();
    assert_int_equal(log_level_for("dotmon.dump"), LOG_INFO);
}

/* Bad values name their key and change nothing. */
static void test_log_settings_refused(void **state)
{
    (void)state;
    static const struct {
        const char *json, *key;
    } cases[] = {
        {"{\"Logging\":{\"Console\":{\"FormatterName\":\"xml\"}}}",
         "Logging:Console:FormatterName"},
        {"{\"Logging\":{\"LogLevel\":{\"dotmon\":\"Verbose\"}}}", "Logging:LogLevel:dotmon"},
        {"{\"Logging\":{\"Console\":{\"FormatterOptions\":{\"SingleLine\":\"yes\"}}}}",
         "Logging:Console:FormatterOptions:SingleLine"},
        {"{\"Logging\":{\"Console\":{\"FormatterOptions\":{\"ColorBehavior\":\"Always\"}}}}",
         "Logging:Console:FormatterOptions:ColorBehavior"},
        {"{\"Logging\":{\"CaptureScopes\":\"maybe\"}}", "Logging:CaptureScopes"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config c;
        load(&c, "{\"Logging\":{\"LogLevel\":{\"Default\":\"Error\"}}}");
        char err[256] = "";
        assert_int_equal(logging_configure(&c, err, sizeof(err)), 0);
        config_fini(&c);
        load(&c, cases[i].json);
        assert_int_equal(logging_configure(&c, err, sizeof(err)), AGENT_E_INVAL);
        assert_non_null(strstr(err, cases[i].key));
        assert_int_equal(log_level_for("dotmon"), LOG_ERROR); /* the earlier settings stay */
        config_fini(&c);
        log_reset();
    }
    /* Every documented key is a setting dotmon reads. */
    assert_int_equal(config_key_kind("Logging:LogLevel:Microsoft.Hosting.Lifetime"),
                     CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Logging:Console:FormatterOptions:TimestampFormat"),
                     CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Logging:Console:FormatterOptions:JsonWriterOptions:Indented"),
                     CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Logging:CaptureScopes"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Logging:EventLog:LogLevel:Default"), CONFIG_KEY_FOREIGN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_json),
        cmocka_unit_test(test_log_simple),
        cmocka_unit_test(test_log_systemd),
        cmocka_unit_test(test_log_timestamp_formats),
        cmocka_unit_test(test_log_category_levels),
        cmocka_unit_test(test_log_settings_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
