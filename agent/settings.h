/* SPDX-License-Identifier: MIT */
#ifndef AGENT_SETTINGS_H
#define AGENT_SETTINGS_H

#include <stddef.h>

#include "cli.h"
#include "config.h"

/*
 * The merged configuration, built the same way at start-up and on every reload of the
 * configuration file: file < environment (DotnetMonitor_ / DOTNETMONITOR_) < command line, as
 * in dotnet-monitor. Pure (no libuv): reads the file and envp only.
 *
 * cfg must be freshly config_init'ed. Returns 0, or AGENT_E_INVAL / -ENOMEM with a message for
 * the operator in err (which names the file or the failing source).
 */
int settings_load(const struct cli_options *opts, const char *const *envp, struct config *cfg,
                  char *err, size_t errlen);

#endif
