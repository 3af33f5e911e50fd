/* SPDX-License-Identifier: MIT */
#include "settings.h"

#include <errno.h>
#include <stdio.h>

#include "buf.h"
#include "err.h"

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
 * The command line is the last and strongest source, as in dotnet-monitor (its options map to
 * Urls, Metrics:Endpoints, Metrics:Enabled and DiagnosticPort:*): `config show` then prints
 * what `collect` will use.
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

int settings_load(const struct cli_options *opts, const char *const *envp, struct config *cfg,
                  char *err, size_t errlen)
{
    char why[512];
    if (opts->config_file != NULL && config_load_file(cfg, opts->config_file, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "configuration file: %s", why);
        return AGENT_E_INVAL;
    }
    int rc = config_load_env(cfg, envp);
    if (rc != 0) {
        snprintf(err, errlen, "cannot read the environment");
        return rc;
    }
    rc = apply_cli(opts, cfg);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    return 0;
}
