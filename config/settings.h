/* SPDX-License-Identifier: MIT */
#ifndef AGENT_SETTINGS_H
#define AGENT_SETTINGS_H

#include <stddef.h>

#include "cli.h"
#include "config.h"

/*
 * The merged configuration, built the same way at start-up and on every reload, from
 * dotnet-monitor's sources in dotnet-monitor's order, weakest first; a later source overrides an
 * earlier one key by key:
 *   1. the command line (--urls, --metricUrls, --metrics, --diagnostic-port)
 *   2. DOTNET_URLS, then ASPNETCORE_URLS (ASP.NET Core's host settings: Urls only)
 *   3. unprefixed environment variables that name a dotnet-monitor setting (Metrics__Enabled)
 *   4. user settings: $XDG_CONFIG_HOME/dotnet-monitor/settings.json (else ~/.config/…)
 *   5. shared settings: /etc/dotnet-monitor/settings.json
 *   6. key-per-file: every file of /etc/dotnet-monitor (a mounted Secret or ConfigMap)
 *   7. DotnetMonitor_ / DOTNETMONITOR_ environment variables
 *   8. the JSON file given with --configuration-file-path
 * DOTMON_SHARED_CONFIG_DIR (an absolute path) stands for /etc/dotnet-monitor. Pure (no libuv):
 * reads files and envp only. Sources 4-6 and 8 are read only when they pass StrictModes
 * (shdir_open_trusted: no component another uid owns or can write); an untrusted 4, 5 or 6 is
 * skipped (all its keys) with an Error log naming the path and the reason, an untrusted 8 fails.
 *
 * cfg must be freshly config_init'ed. Returns 0, or AGENT_E_INVAL / -ENOMEM with a message for
 * the operator in err (which names the file or the failing source).
 */
int settings_load(const struct cli_options *opts, const char *const *envp, struct config *cfg,
                  char *err, size_t errlen);

#define SETTINGS_SHARED_DIR "/etc/dotnet-monitor"

/* Where the file sources are, for this environment (for config show --show-sources). */
struct settings_paths {
    char user_settings[1024]; /* "" when neither XDG_CONFIG_HOME nor HOME is set */
    char shared_dir[1024];
    char shared_settings[1040];
};
void settings_paths(const char *const *envp, struct settings_paths *out);

#endif
