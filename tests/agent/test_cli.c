/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli.h"
#include "err.h"

#define ARGV(...) ((const char *[]){"dotmon", __VA_ARGS__, NULL})

static int parse(int argc, const char **argv, struct cli_options *o, char *err)
{
    return cli_parse(argc, argv, o, err, 256);
}

static void test_cli_collect_options(void **state)
{
    (void)state;
    struct cli_options o;
    char err[256];
    const char **v = ARGV("collect", "--urls", "http://127.0.0.1:1", "-u", "http://[::1]:2",
                          "--metricUrls=http://x:3", "--no-auth", "--diagnostic-port", "/d/s.sock",
                          "--configuration-file-path", "/c.json", "--metrics", "false");
    assert_int_equal(parse(14, v, &o, err), 0);
    assert_int_equal(o.command, CLI_COLLECT);
    assert_int_equal(o.nurls, 2);
    assert_string_equal(o.urls[1], "http://[::1]:2");
    assert_int_equal(o.nmetric_urls, 1);
    assert_string_equal(o.metric_urls[0], "http://x:3");
    assert_true(o.no_auth);
    assert_string_equal(o.diagnostic_port, "/d/s.sock");
    assert_string_equal(o.config_file, "/c.json");
    assert_int_equal(o.metrics, 0);
}

static void test_cli_defaults_and_commands(void **state)
{
    (void)state;
    struct cli_options o;
    char err[256];
    const char *none[] = {"dotmon", NULL};
    assert_int_equal(parse(1, none, &o, err), 0);
    assert_int_equal(o.command, CLI_COLLECT);
    assert_int_equal(o.metrics, -1);
    const char **h = ARGV("--help");
    assert_int_equal(parse(2, h, &o, err), 0);
    assert_int_equal(o.command, CLI_HELP);
    const char **ver = ARGV("--version");
    assert_int_equal(parse(2, ver, &o, err), 0);
    assert_int_equal(o.command, CLI_VERSION);
    const char **g = ARGV("generatekey", "--output", "Shell", "--expiration", "1.02:03:04");
    assert_int_equal(parse(6, g, &o, err), 0);
    assert_int_equal(o.command, CLI_GENERATEKEY);
    assert_int_equal(o.key_format, CLI_KEY_SHELL);
    assert_int_equal(o.expiration_s, 86400 + 2 * 3600 + 3 * 60 + 4);
    const char **cs = ARGV("config", "show", "--level", "Full", "--no-auth");
    assert_int_equal(parse(6, cs, &o, err), 0);
    assert_int_equal(o.command, CLI_CONFIG_SHOW);
    assert_true(o.config_full);
    const char **cj = ARGV("convert", "in.nettrace", "--format", "ndjson");
    assert_int_equal(parse(5, cj, &o, err), 0);
    assert_int_equal(o.command, CLI_CONVERT);
    assert_true(o.convert_format_set);
    assert_false(o.convert_gcdump);
    const char **cg = ARGV("convert", "-", "--format", "GCDump", "-o", "out.gcdump");
    assert_int_equal(parse(7, cg, &o, err), 0);
    assert_true(o.convert_gcdump);
    assert_string_equal(o.convert_input, "-");
    assert_string_equal(o.convert_output, "out.gcdump");
}

static void test_cli_errors_are_explained(void **state)
{
    (void)state;
    struct cli_options o;
    char err[256];
    const char **unknown = ARGV("collect", "--frobnicate");
    assert_int_equal(parse(3, unknown, &o, err), AGENT_E_INVAL);
    assert_non_null(strstr(err, "--frobnicate"));
    const char **missing = ARGV("collect", "--urls");
    assert_int_equal(parse(3, missing, &o, err), AGENT_E_INVAL);
    assert_non_null(strstr(err, "needs a value"));
    const char **badbool = ARGV("collect", "--metrics", "maybe");
    assert_int_equal(parse(4, badbool, &o, err), AGENT_E_INVAL);
    const char **badfmt = ARGV("generatekey", "--output", "yaml");
    assert_int_equal(parse(4, badfmt, &o, err), AGENT_E_INVAL);
    assert_non_null(strstr(err, "yaml"));
    const char **badexp = ARGV("generatekey", "--expiration", "soon");
    assert_int_equal(parse(4, badexp, &o, err), AGENT_E_INVAL);
    const char **both = ARGV("collect", "--no-auth", "--temp-apikey");
    assert_int_equal(parse(4, both, &o, err), AGENT_E_INVAL);
    const char **cmd = ARGV("explode");
    assert_int_equal(parse(2, cmd, &o, err), AGENT_E_INVAL);
    const char **badconv = ARGV("convert", "x.nettrace", "--format", "xml");
    assert_int_equal(parse(5, badconv, &o, err), AGENT_E_INVAL);
    assert_non_null(strstr(err, "expected ndjson, gcdump or speedscope"));
    const char **flagval = ARGV("collect", "--no-auth=yes");
    assert_int_equal(parse(3, flagval, &o, err), AGENT_E_INVAL);
    /* --token-file holds the temporary key's token: alone it is an error, with it a path. */
    const char **lone = ARGV("collect", "--token-file", "/t");
    assert_int_equal(parse(4, lone, &o, err), AGENT_E_INVAL);
    assert_non_null(strstr(err, "--temp-apikey"));
    const char **tf = ARGV("collect", "--temp-apikey", "--token-file", "/run/t");
    assert_int_equal(parse(5, tf, &o, err), 0);
    assert_string_equal(o.token_file, "/run/t");
    const char **tfshow = ARGV("config", "show", "--temp-apikey", "--token-file", "/t");
    assert_int_equal(parse(6, tfshow, &o, err), AGENT_E_INVAL);
}

static void test_cli_durations(void **state)
{
    (void)state;
    int64_t s = 0;
    assert_int_equal(cli_parse_duration("30s", &s), 0);
    assert_int_equal(s, 30);
    assert_int_equal(cli_parse_duration("10m", &s), 0);
    assert_int_equal(s, 600);
    assert_int_equal(cli_parse_duration("7d", &s), 0);
    assert_int_equal(s, 7 * 86400);
    assert_int_equal(cli_parse_duration("01:00:00", &s), 0);
    assert_int_equal(s, 3600);
    assert_int_equal(cli_parse_duration("00:30", &s), 0);
    assert_int_equal(s, 1800);
    assert_int_equal(cli_parse_duration("0s", &s), AGENT_E_INVAL);
    assert_int_equal(cli_parse_duration("-5s", &s), AGENT_E_INVAL);
    assert_int_equal(cli_parse_duration("25:00:00", &s), AGENT_E_INVAL);
    assert_int_equal(cli_parse_duration("1:2:3:4", &s), AGENT_E_INVAL);
    assert_int_equal(cli_parse_duration("99999999999999999999d", &s), AGENT_E_INVAL);
    assert_int_equal(cli_parse_duration("", &s), AGENT_E_INVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_collect_options),
        cmocka_unit_test(test_cli_defaults_and_commands),
        cmocka_unit_test(test_cli_errors_are_explained),
        cmocka_unit_test(test_cli_durations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
