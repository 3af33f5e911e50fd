/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "err.h"

static void test_config_json_flattens_like_dotnet(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    char err[256];
    const char *json = "{\"Authentication\":{\"MonitorApiKey\":{\"Subject\":\"abc\",\"PublicKey\":\"k\"}},"
                       "\"DefaultProcess\":{\"Filters\":[{\"Key\":\"ProcessId\",\"Value\":1},"
                       "{\"ProcessName\":\"app\"}]},\"Metrics\":{\"Enabled\":false},\"N\":null}";
    assert_int_equal(config_load_json(&c, json, strlen(json), "file", err, sizeof(err)), 0);
    assert_string_equal(config_get(&c, "authentication:monitorapikey:subject"), "abc");
    assert_string_equal(config_get(&c, "DefaultProcess:Filters:0:Value"), "1");
    assert_string_equal(config_get(&c, "DefaultProcess:Filters:1:ProcessName"), "app");
    assert_int_equal(config_get_bool(&c, "Metrics:Enabled", 1), 0);
    assert_int_equal(config_get_bool(&c, "Metrics:Missing", 1), 1);
    assert_string_equal(config_get(&c, "N"), "");
    assert_null(config_get(&c, "Authentication"));
    config_fini(&c);
}

static void test_config_env_overrides_file(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    char err[256];
    const char *json = "{\"Authentication\":{\"MonitorApiKey\":{\"Subject\":\"from-file\"}}}";
    assert_int_equal(config_load_json(&c, json, strlen(json), "file", err, sizeof(err)), 0);
    const char *env[] = {"PATH=/bin", "DotnetMonitor_Authentication__MonitorApiKey__Subject=from-env",
                   "DOTNETMONITOR_Urls=http://+:1", "dotnetmonitor_Metrics__Enabled=true",
                   "DotnetMonitor_=ignored", "OtherPrefix_X=1", NULL};
    assert_int_equal(config_load_env(&c, env), 0);
    assert_string_equal(config_get(&c, "Authentication:MonitorApiKey:Subject"), "from-env");
    assert_string_equal(config_get(&c, "Urls"), "http://+:1");
    assert_int_equal(config_get_bool(&c, "Metrics:Enabled", 0), 1);
    assert_null(config_get(&c, "X"));
    config_fini(&c);
}

static void test_config_key_kinds(void **state)
{
    (void)state;
    /* Known, in any case, with array indexes. */
    assert_int_equal(config_key_kind("Storage:DumpTempFolder"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("storage:dumptempfolder"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("DefaultProcess:Filters:12:Key"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Authentication:MonitorApiKey:PublicKey"), CONFIG_KEY_KNOWN);
    /* dotnet-monitor features dotmon does not implement. */
    assert_int_equal(config_key_kind("Egress:FileSystem:out:DirectoryPath"), CONFIG_KEY_FOREIGN);
    assert_int_equal(config_key_kind("CollectionRules:HighCpu:Trigger:Type"), CONFIG_KEY_FOREIGN);
    assert_int_equal(config_key_kind("Metrics:Providers:0:ProviderName"), CONFIG_KEY_FOREIGN);
    /* Typos, and near misses of known keys. */
    assert_int_equal(config_key_kind("Storage:DumpTempFoldr"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("Url"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("Urls:0"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("DefaultProcess:Filters::Key"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("DefaultProcess:Filters:0:1:Key"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("MetricsX:Enabled"), CONFIG_KEY_UNKNOWN);
}

static void test_config_rejects_bad_json(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    char err[256];
    assert_int_equal(config_load_json(&c, "{\"a\":", 5, "file", err, sizeof(err)), AGENT_E_INVAL);
    assert_non_null(strstr(err, "invalid JSON"));
    assert_int_equal(config_load_json(&c, "[1]", 3, "file", err, sizeof(err)), AGENT_E_INVAL);
    assert_int_equal(config_load_file(&c, "/nonexistent/x.json", err, sizeof(err)), AGENT_E_INVAL);
    assert_non_null(strstr(err, "/nonexistent/x.json"));
    assert_true(config_key_is_secret("Authentication:MonitorApiKey:PublicKey"));
    assert_false(config_key_is_secret("Authentication:MonitorApiKey:Subject"));
    assert_true(config_key_under("A:B:C", "a:b"));
    assert_false(config_key_under("A:BC", "A:B"));
    config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_json_flattens_like_dotnet),
        cmocka_unit_test(test_config_env_overrides_file),
        cmocka_unit_test(test_config_rejects_bad_json),
        cmocka_unit_test(test_config_key_kinds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
