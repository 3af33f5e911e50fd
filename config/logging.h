/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CONFIG_LOGGING_H
#define AGENT_CONFIG_LOGGING_H

#include <stddef.h>

#include "config.h"

/*
 * dotmon's own log from dotnet-monitor's Logging section (Microsoft.Extensions.Logging's names):
 *   Logging:LogLevel:Default, Logging:LogLevel:<Category>           levels by category prefix
 *   Logging:Console:LogLevel:Default, Logging:Console:LogLevel:<Category>   the same, preferred
 *   Logging:Console:FormatterName                                   json (default), simple, systemd
 *   Logging:Console:FormatterOptions:TimestampFormat, :UseUtcTimestamp, :IncludeScopes,
 *     :SingleLine, :ColorBehavior (Default, Enabled, Disabled), :JsonWriterOptions:Indented
 *   Logging:CaptureScopes                                           accepted (dotmon has no scopes)
 * dotmon's categories are "dotmon", "dotmon.dump", "dotmon.ipc.listen", "Dotmon.Http", "Egress"…
 * Applies them (common/log.h) and returns 0, or AGENT_E_INVAL with the key and what is wrong in
 * err (nothing applied then). Call once at start-up, before other threads log.
 */
int logging_configure(const struct config *cfg, char *err, size_t errlen);

#endif
