/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "log.h"

/* Joins urls with ';' (the separator of dotnet-monitor's Urls setting). */
static int set_url_list(struct config *cfg, const char *key, const char *const *urls, size_t n)
{
    struct buf b;
    buf_init(&b, 4096);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = buf_printf(&b, "%s%s", i ? ";" : "", urls[i]);
    }
    rc = rc ? rc : config_set(cfg, key, buf_cstr(&b), "command line");
    buf_fini(&b);
    return rc;
}

/*
 * The command line's options map to Urls, Metrics:Endpoints, Metrics:Enabled and
 * DiagnosticPort:*, as in dotnet-monitor, where they are the weakest source: the image's
 * `--urls` yields to DOTNET_URLS, ASPNETCORE_URLS and every later source.
 */
static int apply_cli(const struct cli_options *opts, struct config *cfg)
{
    int rc = 0;
    if (opts->nurls > 0) {
        rc = set_url_list(cfg, "Urls", opts->urls, opts->nurls);
    }
    if (rc == 0 && opts->nmetric_urls > 0) {
        rc = set_url_list(cfg, "Metrics:Endpoints", opts->metric_urls, opts->nmetric_urls);
    }
    if (rc == 0 && opts->metrics >= 0) {
        rc = config_set(cfg, "Metrics:Enabled", opts->metrics ? "true" : "false", "command line");
    }
    if (rc == 0 && opts->diagnostic_port != NULL) {
        rc = config_set(cfg, "DiagnosticPort:ConnectionMode", "Listen", "command line");
        rc = rc ? rc
                : config_set(cfg, "DiagnosticPort:EndpointName", opts->diagnostic_port,
                             "command line");
    }
    return rc;
}

/*
 * ASP.NET Core's host settings: DOTNET_URLS, then ASPNETCORE_URLS (stronger), each its whole
 * `;`-separated list, both above the command line and below every other source, as dotnet-monitor
 * chains its host configuration under its app configuration (its Kestrel tests: DOTNET_Urls
 * overrides --urls, ASPNETCORE_Urls overrides DOTNET_Urls, DOTNETMONITOR_Urls overrides both).
 * The prefix and the name are matched case-insensitively, as .NET's environment provider does.
 */
static int apply_host_urls(const char *const *envp, struct config *cfg)
{
    static const struct {
        const char *name;
        const char *source;
    } hosts[] = {{"DOTNET_URLS", "environment (DOTNET_URLS)"},
                 {"ASPNETCORE_URLS", "environment (ASPNETCORE_URLS)"}};
    for (size_t h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++) {
        size_t n = strlen(hosts[h].name);
        const char *value = NULL;
        for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
            if (strncasecmp(envp[i], hosts[h].name, n) == 0 && envp[i][n] == '=') {
                value = envp[i] + n + 1;
            }
        }
        if (value != NULL && *value != '\0') {
            int rc = config_set(cfg, "Urls", value, hosts[h].source);
            if (rc != 0) {
                return rc;
            }
        }
    }
    return 0;
}

static const char *env_get(const char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        if (strncmp(envp[i], name, n) == 0 && envp[i][n] == '=') {
            return envp[i] + n + 1;
        }
    }
    return NULL;
}

void settings_paths(const char *const *envp, struct settings_paths *out)
{
    /* dotnet-monitor's user settings folder on Linux: $XDG_CONFIG_HOME/dotnet-monitor, else
     * $HOME/.config/dotnet-monitor. */
    const char *xdg = env_get(envp, "XDG_CONFIG_HOME");
    const char *home = env_get(envp, "HOME");
    if (xdg != NULL && xdg[0] == '/') {
        snprintf(out->user_settings, sizeof(out->user_settings), "%s/dotnet-monitor/settings.json",
                 xdg);
    } else if (home != NULL && home[0] == '/') {
        snprintf(out->user_settings, sizeof(out->user_settings),
                 "%s/.config/dotnet-monitor/settings.json", home);
    } else {
        out->user_settings[0] = '\0';
    }
    const char *shared = env_get(envp, "DOTMON_SHARED_CONFIG_DIR");
    snprintf(out->shared_dir, sizeof(out->shared_dir), "%s",
             shared != NULL && shared[0] == '/' ? shared : SETTINGS_SHARED_DIR);
    snprintf(out->shared_settings, sizeof(out->shared_settings), "%s/settings.json",
             out->shared_dir);
}

/* A source that failed: an untrusted one is logged and skipped (0), anything else is fatal. */
static int refused(const char *what, int rc, const char *why, char *err, size_t errlen)
{
    if (rc == AGENT_E_UNTRUSTED) {
        log_error("dotmon.config", "%s not applied: %s", what, why);
        return 0;
    }
    snprintf(err, errlen, "%s: %s", what, why);
    return AGENT_E_INVAL;
}

/* The folder's keys all or none: a file refused half-way leaves nothing of the folder. */
static int load_key_per_file(struct config *cfg, const char *dir, char *why, size_t whylen)
{
    struct config kpf;
    config_init(&kpf);
    int rc = config_load_key_per_file(&kpf, dir, "key-per-file", why, whylen);
    for (size_t i = 0; rc == 0 && i < kpf.n; i++) {
        rc = config_set(cfg, kpf.v[i].key, kpf.v[i].value, kpf.v[i].source);
        if (rc != 0) {
            snprintf(why, whylen, "out of memory");
            rc = AGENT_E_INVAL;
        }
    }
    config_fini(&kpf);
    return rc;
}

int settings_load(const struct cli_options *opts, const char *const *envp, struct config *cfg,
                  char *err, size_t errlen)
{
    char why[1536];
    struct settings_paths paths;
    settings_paths(envp, &paths);
    /* dotnet-monitor's order, weakest first (its configuration-sources document). */
    int rc = apply_cli(opts, cfg);
    rc = rc ? rc : apply_host_urls(envp, cfg);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    rc = config_load_env_unprefixed(cfg, envp);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the environment");
        return rc;
    }
    /* A source another user could have written (StrictModes, common/shdir.h) is skipped with an
     * Error, not fatal: planting a file must not stop dotmon either. */
    if (paths.user_settings[0] != '\0') {
        rc = config_load_json_file(cfg, paths.user_settings, "user settings", true, why,
                                   sizeof(why));
        if (rc != 0 && (rc = refused("user settings", rc, why, err, errlen)) != 0) {
            return rc;
        }
    }
    rc = config_load_json_file(cfg, paths.shared_settings, "shared settings", true, why,
                               sizeof(why));
    if (rc != 0 && (rc = refused("shared settings", rc, why, err, errlen)) != 0) {
        return rc;
    }
    rc = load_key_per_file(cfg, paths.shared_dir, why, sizeof(why));
    if (rc != 0 && (rc = refused("key-per-file settings", rc, why, err, errlen)) != 0) {
        return rc;
    }
    rc = config_load_env(cfg, envp);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the environment");
        return rc;
    }
    if (opts->config_file != NULL &&
        config_load_file(cfg, opts->config_file, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "configuration file: %s", why);
        return AGENT_E_INVAL;
    }
    return 0;
}
