/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TRACE_CONFIG_H
#define AGENT_TRACE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "ipc_session.h" /* struct ipc_collect_config */

/*
 * What a trace request asks the runtime for: pure translation of `GET /trace?profile=…` and of
 * the `POST /trace` JSON body into an ipc_collect_config (docs/profiles.md §6, docs/api.md §3).
 * No libuv.
 */

#define TRACE_DEFAULT_BUFFER_MB          256
#define TRACE_MAX_BUFFER_MB              1024
#define TRACE_MAX_PROVIDERS              1000
#define TRACE_DEFAULT_PROFILES           "Cpu,Http,Metrics,GcCollect"
#define TRACE_DEFAULT_METRICS_INTERVAL_S 5

struct trace_config {
    /*
     * buffer_mb, format 1 (NetTrace), rundown_keyword, stack walks on, and the providers. Every
     * provider's arguments is a string, "" when it has none: that is what the official client
     * sends (EventPipeProvider.GetArgumentString), so the wire bytes match dotnet-monitor's.
     */
    struct ipc_collect_config collect; /* providers point into this struct's own storage */
    char profile_names[256]; /* canonical names joined by ',' for logs/operations, or "custom" */
    /* owned storage (do not touch) */
    struct ipc_provider *providers_storage;
    char *strings;   /* names and argument strings, NUL-separated */
    size_t nstrings; /* bytes in strings */
};

/*
 * Builds the config for a comma-separated, case-insensitive profile list (NULL, "" or only
 * whitespace → TRACE_DEFAULT_PROFILES, dotnet-monitor's default). Whitespace around each name is
 * ignored, a repeated name is ignored (as .NET's flags-enum parsing does), an empty item
 * ("Cpu,,Http", "Cpu,") is an error. Accepted: dotnet-monitor's Cpu, Http, Logs, Metrics, GcCollect
 * and dotnet-trace's dotnet-common, dotnet-sampled-thread-time, gc-verbose, gc-collect, database,
 * cpu-sampling (the pre-2025 EventPipe definition). Providers keep the order of first appearance;
 * the same provider from several profiles is merged (keywords OR-ed, the more verbose level wins
 * with LogAlways the most verbose, the arguments of the first profile that has any kept);
 * rundown keyword = OR of the profiles' rundown keywords; buffer TRACE_DEFAULT_BUFFER_MB.
 * metrics_interval_s: EventCounterIntervalSec for the Metrics profile in seconds, written as
 * dotnet-monitor writes its float ("5", "1.5"; 0 → 5).
 * profile_names gets the canonical names in the order given, without repeats.
 *
 * out is zeroed first, so trace_config_fini is safe after a failure too; do not pass a config
 * that still owns storage. Returns 0, AGENT_E_INVAL with a message for a 400 detail appended to
 * err (for an unknown name it lists the valid names; err may be NULL), or -ENOMEM.
 */
int trace_config_from_profiles(const char *profiles, double metrics_interval_s,
                               struct trace_config *out, struct buf *err);

/*
 * A provider's own counter interval for the Metrics profile, as dotnet-monitor's
 * GetProviderSpecificInterval (GlobalCounter:Providers:<name>:IntervalSeconds): seconds, or 0 when
 * the provider has none (metrics_interval_s applies).
 */
typedef double (*trace_provider_interval_fn)(const void *ud, const char *provider);
/* trace_config_from_profiles with each provider's own interval from per_provider(ud, name). */
int trace_config_from_profiles_with(const char *profiles, double metrics_interval_s,
                                    trace_provider_interval_fn per_provider, const void *ud,
                                    struct trace_config *out, struct buf *err);

/*
 * Parses dotnet-monitor's POST /trace body (Models/EventPipeConfiguration.cs,
 * EventPipeProvider.cs):
 *   {"Providers":[{"Name":"…","EventLevel":"Informational"|4,"Keywords":"0x…"|"123"|123,
 *                  "Arguments":{"k":"v",…}}], "RequestRundown":true, "BufferSizeInMB":256}
 * Member names case-insensitive (ASP.NET model binding); unknown members are ignored, a member
 * given twice is an error. EventLevel by name (LogAlways, Critical, Error, Warning, Informational,
 * Verbose; any case) or number 0..5 (JSON number or digit string); Keywords a hex (0x…) or decimal
 * string (a leading '-' gives the two's complement, as .NET's long does) or a JSON integer up to
 * 2^53; defaults for absent members as in the model (EventLevel Verbose, Keywords all bits,
 * RequestRundown true → IPC_RUNDOWN_DEFAULT, false → 0, BufferSizeInMB 256, also accepted as a
 * digit string). Arguments: null or an object of string → string, turned into "k=v;k2=v2" with a
 * key or value that contains ';' or '=' wrapped in double quotes (docs/ipc.md §4.2); empty or
 * repeated keys are errors. Providers are kept as given (not merged). 1..1000 providers;
 * BufferSizeInMB 1..1024; strings must be valid UTF-8 without U+0000; the CollectTracing message
 * must fit in 64 KiB in its largest form (version 5), so every version a caller may fall back to
 * fits. Same out/err contract and return codes as trace_config_from_profiles; every message names
 * the provider index and field ("Providers[2].Keywords: …"). profile_names is "custom".
 */
int trace_config_from_json(const char *body, size_t len, struct trace_config *out, struct buf *err);

/* Frees the owned storage and zeroes c. Accepts NULL; may be called twice. */
void trace_config_fini(struct trace_config *c);

#endif
