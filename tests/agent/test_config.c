/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli.h"
#include "config.h"
#include "err.h"
#include "settings.h"

static void write_file(const char *dir, const char *name, const char *text)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void rm_tree(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Key-per-file as Kubernetes mounts a Secret: files that are links into ..data, one newline. */
static void test_config_key_per_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/dmcfgXXXXXX";
    assert_non_null(mkdtemp(dir));
    char data[600], sub[600];
    snprintf(data, sizeof(data), "%s/..2026_11_26_00_00_00.1", dir);
    assert_int_equal(mkdir(data, 0700), 0);
    write_file(data, "Authentication__MonitorApiKey__Subject", "sub-from-secret\n");
    char link_target[700], link_path[700];
    snprintf(link_target, sizeof(link_target), "%s/Authentication__MonitorApiKey__Subject", data);
    snprintf(link_path, sizeof(link_path), "%s/Authentication__MonitorApiKey__Subject", dir);
    assert_int_equal(symlink(link_target, link_path), 0);
    write_file(dir, "Metrics__Enabled", "false\r\n");
    write_file(dir, "Urls", "http://+:1\n\n"); /* only one newline is dropped */
    write_file(dir, "settings.json", "{\"Urls\":\"not-a-key\"}");
    write_file(dir, ".hidden", "x");
    snprintf(sub, sizeof(sub), "%s/folder", dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    snprintf(link_path, sizeof(link_path), "%s/Dangling", dir);
    assert_int_equal(symlink("/nonexistent/x", link_path), 0);

    struct config c;
    config_init(&c);
    char err[256];
    assert_int_equal(config_load_key_per_file(&c, dir, "key-per-file", err, sizeof(err)), 0);
    assert_string_equal(config_get(&c, "Authentication:MonitorApiKey:Subject"), "sub-from-secret");
    assert_int_equal(config_get_bool(&c, "Metrics:Enabled", 1), 0);
    assert_string_equal(config_get(&c, "Urls"), "http://+:1\n");
    assert_int_equal(c.n, 3);
    /* A folder that is not there is no error (the source is optional). */
    assert_int_equal(
        config_load_key_per_file(&c, "/nonexistent/dir", "key-per-file", err, sizeof(err)), 0);
    config_fini(&c);
    rm_tree(dir);
}

static void test_config_unprefixed_env(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    const char *env[] = {"PATH=/bin",
                         "HOME=/root",
                         "Metrics__Enabled=false",
                         "DefaultProcess__Filters__0__Key=ProcessId",
                         "DotnetMonitor_Urls=http://+:2",
                         "Urls=http://+:3",
                         NULL};
    assert_int_equal(config_load_env_unprefixed(&c, env), 0);
    assert_int_equal(config_get_bool(&c, "Metrics:Enabled", 1), 0);
    assert_string_equal(config_get(&c, "DefaultProcess:Filters:0:Key"), "ProcessId");
    assert_string_equal(config_get(&c, "Urls"), "http://+:3");
    assert_null(config_get(&c, "PATH"));
    assert_null(config_get(&c, "HOME"));
    assert_int_equal(c.n, 3);
    config_fini(&c);
}

/*
 * dotnet-monitor's order, weakest first (its configuration-sources.md): command line < unprefixed
 * env < user settings.json <
 * shared settings.json < key-per-file < DotnetMonitor_ env < --configuration-file-path. Each
 * key below is set by a run of sources, and the strongest of them must win.
 */
static void test_config_sources_in_dotnet_monitor_order(void **state)
{
    (void)state;
    char root[] = "/tmp/dmcfgXXXXXX";
    assert_non_null(mkdtemp(root));
    char xdg[600], user[700], shared[600], file[600];
    snprintf(xdg, sizeof(xdg), "%s/xdg", root);
    snprintf(user, sizeof(user), "%s/xdg/dotnet-monitor", root);
    snprintf(shared, sizeof(shared), "%s/etc", root);
    snprintf(file, sizeof(file), "%s/given.json", root);
    assert_int_equal(mkdir(xdg, 0700), 0);
    assert_int_equal(mkdir(user, 0700), 0);
    assert_int_equal(mkdir(shared, 0700), 0);
    /* Keys: A = Logging:LogLevel:Default ... set by sources 1..n, named after the winner. */
    write_file(user, "settings.json",
               "{\"Urls\":\"user\",\"Operations\":{\"MaxHistory\":\"user\"},"
               "\"Dump\":{\"TimeoutSeconds\":\"user\"},\"Trace\":{\"SpoolLimitMB\":\"user\"},"
               "\"GlobalCounter\":{\"IntervalSeconds\":\"user\"}}");
    write_file(shared, "settings.json",
               "{\"Operations\":{\"MaxHistory\":\"shared\"},\"Dump\":{\"TimeoutSeconds\":"
               "\"shared\"},\"Trace\":{\"SpoolLimitMB\":\"shared\"}}");
    write_file(shared, "Dump__TimeoutSeconds", "keyfile\n");
    write_file(shared, "Trace__SpoolLimitMB", "keyfile\n");
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("{\"Kestrel\":{\"Limits\":{\"KeepAliveTimeout\":\"file\"}}}", f);
    fclose(f);

    char xdg_env[700], shared_env[700];
    snprintf(xdg_env, sizeof(xdg_env), "XDG_CONFIG_HOME=%s", xdg);
    snprintf(shared_env, sizeof(shared_env), "DOTMON_SHARED_CONFIG_DIR=%s", shared);
    const char *env[] = {xdg_env,
                         shared_env,
                         "Metrics__Enabled=unprefixed",
                         "Metrics__Endpoints=unprefixed",
                         "Trace__SpoolLimitMB=unprefixed",
                         "DotnetMonitor_Trace__SpoolLimitMB=env",
                         "DotnetMonitor_Kestrel__Limits__KeepAliveTimeout=env",
                         NULL};
    const char *argv[] = {"dotmon",
                          "collect",
                          "--urls",
                          "http://cli",
                          "--metricUrls",
                          "http://cli",
                          "--configuration-file-path",
                          file};
    struct cli_options opts;
    char err[512];
    assert_int_equal(cli_parse(8, argv, &opts, err, sizeof(err)), 0);
    struct config c;
    config_init(&c);
    int rc = settings_load(&opts, env, &c, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "%s\n", err);
    }
    assert_int_equal(rc, 0);
    assert_string_equal(config_get(&c, "Metrics:Enabled"), "unprefixed");
    assert_string_equal(config_get(&c, "Metrics:Endpoints"), "unprefixed");
    assert_string_equal(config_get(&c, "Urls"), "user");
    assert_string_equal(config_get(&c, "GlobalCounter:IntervalSeconds"), "user");
    assert_string_equal(config_get(&c, "Operations:MaxHistory"), "shared");
    assert_string_equal(config_get(&c, "Dump:TimeoutSeconds"), "keyfile");
    assert_string_equal(config_get(&c, "Trace:SpoolLimitMB"), "env");
    assert_string_equal(config_get(&c, "Kestrel:Limits:KeepAliveTimeout"), "file");
    /* settings.json in the shared folder is the JSON source, not a key. */
    assert_null(config_get(&c, "settings.json"));
    config_fini(&c);

    /* A shared settings.json that is not JSON stops start-up, naming the source. */
    write_file(shared, "settings.json", "{");
    config_init(&c);
    assert_int_equal(settings_load(&opts, env, &c, err, sizeof(err)), AGENT_E_INVAL);
    assert_non_null(strstr(err, "shared settings"));
    config_fini(&c);
    rm_tree(root);
}

/*
 * Issue 32 item 2: ASP.NET Core's URL variables, as dotnet-monitor's KestrelTests set them beside
 * its own `--urls`: DOTNET_Urls overrides the command line, ASPNETCORE_Urls overrides DOTNET_Urls,
 * DOTNETMONITOR_Urls overrides both; a `;`-separated list is kept whole, `+` hosts and all.
 */
static void test_config_host_urls(void **state)
{
    (void)state;
    const char *argv[] = {"dotmon", "collect", "--urls", "http://127.0.0.1:0"};
    struct cli_options opts;
    char err[512];
    assert_int_equal(cli_parse(4, argv, &opts, err, sizeof(err)), 0);
    struct {
        const char *env[5];
        const char *urls;
        const char *source;
    } cases[] = {
        {{NULL}, "http://127.0.0.1:0", "command line"},
        {{"DOTNET_Urls=http://+:0", NULL}, "http://+:0", "environment (DOTNET_URLS)"},
        {{"DOTNET_Urls=dotnet_invalid", "ASPNETCORE_Urls=http://+:0;http://localhost:1", NULL},
         "http://+:0;http://localhost:1",
         "environment (ASPNETCORE_URLS)"},
        {{"DOTNET_URLS=dotnet_invalid", "ASPNETCORE_URLS=aspnetcore_invalid",
          "DOTNETMONITOR_Urls=http://*:0", NULL},
         "http://*:0",
         "environment"},
        /* Empty: not a value (an aspnet base image's `ASPNETCORE_URLS=` unset idiom). */
        {{"ASPNETCORE_URLS=", NULL}, "http://127.0.0.1:0", "command line"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct config c;
        config_init(&c);
        /* No settings file of this machine's may take part. */
        const char *env[8] = {"HOME=/nonexistent", "DOTMON_SHARED_CONFIG_DIR=/nonexistent"};
        for (size_t j = 0; cases[i].env[j] != NULL; j++) {
            env[2 + j] = cases[i].env[j];
        }
        assert_int_equal(settings_load(&opts, env, &c, err, sizeof(err)), 0);
        assert_string_equal(config_get(&c, "Urls"), cases[i].urls);
        for (size_t j = 0; j < c.n; j++) {
            if (strcmp(c.v[j].key, "Urls") == 0) {
                assert_string_equal(c.v[j].source, cases[i].source);
            }
        }
        /* The variables themselves are not settings (nothing to warn about). */
        assert_null(config_get(&c, "ASPNETCORE_URLS"));
        assert_null(config_get(&c, "DOTNET_URLS"));
        config_fini(&c);
    }
}

static void test_config_json_flattens_like_dotnet(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    char err[256];
    /* A top-level "$schema" (an editor's hint in dotnet-monitor's examples) is not a setting; a
     * nested one is kept (it would be some section's own key). */
    const char *json =
        "{\"$schema\":\"https://aka.ms/dotnet-monitor/schema\",\"X\":{\"$schema\":\"y\"},"
        "\"Authentication\":{\"MonitorApiKey\":{\"Subject\":\"abc\",\"PublicKey\":\"k\"}},"
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
    assert_null(config_get(&c, "$schema"));
    assert_string_equal(config_get(&c, "X:$schema"), "y");
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
    const char *env[] = {"PATH=/bin",
                         "DotnetMonitor_Authentication__MonitorApiKey__Subject=from-env",
                         "DOTNETMONITOR_Urls=http://+:1",
                         "dotnetmonitor_Metrics__Enabled=true",
                         "DotnetMonitor_=ignored",
                         "OtherPrefix_X=1",
                         NULL};
    assert_int_equal(config_load_env(&c, env), 0);
    assert_string_equal(config_get(&c, "Authentication:MonitorApiKey:Subject"), "from-env");
    assert_string_equal(config_get(&c, "Urls"), "http://+:1");
    assert_int_equal(config_get_bool(&c, "Metrics:Enabled", 0), 1);
    assert_null(config_get(&c, "X"));
    config_fini(&c);
}

/* GlobalCounter:IntervalSeconds is a float in dotnet-monitor ([Range(1, 86400)]): "1.5" and the
 * JSON number 1.5 are 1.5 s, below 1 or over a day is refused, absent keeps the default. */
static void test_config_get_float(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    char err[256] = "";
    const char *json = "{\"GlobalCounter\":{\"IntervalSeconds\":1.5,\"Providers\":{\"P\":"
                       "{\"IntervalSeconds\":\"2.25\"},\"Q\":{\"IntervalSeconds\":0.5},"
                       "\"R\":{\"IntervalSeconds\":86400.5},\"S\":{\"IntervalSeconds\":\"1,5\"}}}}";
    assert_int_equal(config_load_json(&c, json, strlen(json), "test", err, sizeof(err)), 0);
    double v = 5;
    assert_int_equal(config_get_float(&c, "GlobalCounter:IntervalSeconds", 1, 86400, &v), 0);
    assert_true(v == 1.5);
    assert_int_equal(
        config_get_float(&c, "GlobalCounter:Providers:P:IntervalSeconds", 1, 86400, &v), 0);
    assert_true(v == 2.25);
    v = 5;
    assert_int_equal(
        config_get_float(&c, "GlobalCounter:Providers:Q:IntervalSeconds", 1, 86400, &v),
        AGENT_E_INVAL);
    assert_int_equal(
        config_get_float(&c, "GlobalCounter:Providers:R:IntervalSeconds", 1, 86400, &v),
        AGENT_E_INVAL);
    assert_int_equal(
        config_get_float(&c, "GlobalCounter:Providers:S:IntervalSeconds", 1, 86400, &v),
        AGENT_E_INVAL);
    assert_true(v == 5.0);
    assert_int_equal(config_get_float(&c, "GlobalCounter:Nope", 1, 86400, &v), 0);
    assert_true(v == 5.0);
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
    /* Egress is read whole by egress_set_parse, which names what it cannot use. */
    assert_int_equal(config_key_kind("Egress:FileSystem:out:DirectoryPath"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("egress:s3storage:b:SecretAccessKeyName"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Egress:Properties:key"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("EgressX:FileSystem"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("CollectionRules:HighCpu:Trigger:Type"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Templates:CollectionRuleActions:A:Type"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("CollectionRuleDefaults:Limits:ActionCount"),
                     CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("CollectionRulesX:A"), CONFIG_KEY_UNKNOWN);
    assert_int_equal(config_key_kind("Metrics:Providers:0:ProviderName"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Metrics:Meters:1:InstrumentNames:3"), CONFIG_KEY_KNOWN);
    assert_int_equal(config_key_kind("Metrics:Meters:1:InstrumentName"), CONFIG_KEY_UNKNOWN);
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
    /* A relative path that does not fit 4096 bytes with the working folder: said, not cut. */
    static char longp[4095];
    memset(longp, 'a', sizeof(longp) - 1);
    assert_int_equal(config_load_file(&c, longp, err, sizeof(err)), AGENT_E_INVAL);
    assert_non_null(strstr(err, "path too long ("));
    assert_true(config_key_is_secret("Authentication:MonitorApiKey:PublicKey"));
    assert_false(config_key_is_secret("Authentication:MonitorApiKey:Subject"));
    assert_true(config_key_is_secret("Egress:S3Storage:b:SecretAccessKey"));
    assert_true(config_key_is_secret("egress:s3storage:b:sessiontoken"));
    assert_true(config_key_is_secret("Egress:Properties:anything"));
    assert_true(config_key_is_secret("Egress:Properties:a:b"));
    assert_false(config_key_is_secret("Egress:Properties"));
    assert_false(config_key_is_secret("Egress:S3Storage:b:SecretAccessKeyName"));
    assert_false(config_key_is_secret("Egress:S3Storage:b:AccessKeyId"));
    assert_false(config_key_is_secret("Egress:FileSystem:f:DirectoryPath"));
    assert_true(config_key_under("A:B:C", "a:b"));
    assert_false(config_key_under("A:BC", "A:B"));
    config_fini(&c);
}

/* A section's children in .NET's order: numbers first by value (gaps kept), then names
 * case-insensitively; one child per name whatever its case; "01" and "1" are two. */
static void test_config_children(void **state)
{
    (void)state;
    struct config c;
    config_init(&c);
    const char *keys[] = {"L:10:Name", "l:2:Name", "L:2:Other", "L:beta", "L:0",
                          "L:Alpha:x", "L:BETA:y", "L:01",      "LL:5"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        assert_int_equal(config_set(&c, keys[i], "v", "test"), 0);
    }
    struct config_child ch[8];
    size_t n = 99;
    assert_int_equal(config_children(&c, "L", ch, 8, &n), 0);
    const char *want[] = {"0", "01", "2", "10", "Alpha", "beta"};
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ch[i].len, strlen(want[i]));
        assert_memory_equal(ch[i].name, want[i], ch[i].len);
    }
    assert_int_equal(config_children(&c, "L", ch, 5, &n), AGENT_E_TOOBIG);
    assert_int_equal(config_children(&c, "Absent", ch, 8, &n), 0);
    assert_int_equal(n, 0);
    assert_int_equal(config_children(&c, "L:2", ch, 8, &n), 0);
    assert_int_equal(n, 2); /* Name, Other */
    config_fini(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_json_flattens_like_dotnet),
        cmocka_unit_test(test_config_env_overrides_file),
        cmocka_unit_test(test_config_rejects_bad_json),
        cmocka_unit_test(test_config_key_kinds),
        cmocka_unit_test(test_config_get_float),
        cmocka_unit_test(test_config_key_per_file),
        cmocka_unit_test(test_config_unprefixed_env),
        cmocka_unit_test(test_config_host_urls),
        cmocka_unit_test(test_config_sources_in_dotnet_monitor_order),
        cmocka_unit_test(test_config_children),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
