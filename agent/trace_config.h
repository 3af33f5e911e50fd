/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TRACE_CONFIG_H
#define AGENT_TRACE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ipc_cmd.h"

/*
 * What a trace request asks the runtime for: pure translation of `GET /trace?profile=…` and of
 * the `POST /trace` JSON body into an ipc_collect_config (PROTOCOL.md §7, DOTNET-MONITOR.md §1.3).
 * No libuv.
 */

#define TRACE_DEFAULT_BUFFER_MB 256
#define TRACE_MAX_PROVIDERS 1000

struct trace_config {
    struct ipc_collect_config collect; /* providers point into this struct's own storage */
    char profile_names[256];           /* canonical names joined by ',' for logs/operations, or "custom" */
    /* owned storage (do not touch) */
    struct ipc_provider *providers_storage;
    char *strings;                     /* names and argument strings */
    size_t nstrings;
};

/*
 * Builds the config for a comma-separated, case-insensitive profile list (NULL or "" → the
 * dotnet-monitor default "Cpu,Http,Metrics,GcCollect"). Accepted: dotnet-monitor's Cpu, Http,
 * Logs, Metrics, GcCollect and dotnet-trace's dotnet-common, dotnet-sampled-thread-time,
 * gc-verbose, gc-collect, database, cpu-sampling. Providers of several profiles are merged the
 * way dotnet-trace merges them (same provider: keywords OR-ed, the more verbose level wins,
 * arguments of the first kept); rundown keyword = OR of the profiles' rundown keywords.
 * metrics_interval_s: EventCounterIntervalSec for the Metrics profile (0 → 5).
 * On error returns AGENT_E_INVAL and writes a message for a 400 detail into err (for an unknown
 * name it lists the valid names).
 */
int trace_config_from_profiles(const char *profiles, uint32_t metrics_interval_s,
                               struct trace_config *out, struct buf *err);

/*
 * Parses dotnet-monitor's POST /trace body:
 *   {"Providers":[{"Name":"…","EventLevel":"Informational"|4,"Keywords":"0x…"|"123"|123,
 *                  "Arguments":{"k":"v",…}}], "RequestRundown":true, "BufferSizeInMB":256}
 * Member names case-insensitive (ASP.NET model binding); EventLevel by name (LogAlways, Critical,
 * Error, Warning, Informational, Verbose) or number 0..5; Keywords hex (0x…) or decimal string,
 * or a JSON number; defaults for absent members as in dotnet-monitor's EventPipeProvider model
 * (EventLevel Verbose, Keywords all bits); 1..1000 providers; BufferSizeInMB 1..1024; the encoded IPC message
 * must fit in 64 KiB. Every error → AGENT_E_INVAL with a precise message in err (which provider,
 * which field, why).
 */
int trace_config_from_json(const char *body, size_t len, struct trace_config *out, struct buf *err);

void trace_config_fini(struct trace_config *c);

#endif
