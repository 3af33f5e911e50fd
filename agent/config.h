/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CONFIG_H
#define AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Configuration as .NET's IConfiguration sees it: a flat map of case-insensitive keys whose
 * sections are joined with ':' ("Authentication:MonitorApiKey:Subject"; array elements use
 * their index, "DefaultProcess:Filters:0:Key"). Sources are applied in order; a later source
 * overrides an earlier one key by key:
 *   1. the JSON file given with --configuration-file-path
 *   2. environment variables with the prefix DotnetMonitor_ or DOTNETMONITOR_ (case-insensitive),
 *      "__" standing for ':'
 * Every entry remembers its source for `config show`.
 */

struct config_entry {
    char *key;
    char *value;
    const char *source; /* static string: "file", "environment", … */
};

struct config {
    struct config_entry *v;
    size_t n;
    size_t cap;
};

void config_init(struct config *c);
void config_fini(struct config *c);

/* Sets key=value (copies both), replacing an existing key (case-insensitive). */
int config_set(struct config *c, const char *key, const char *value, const char *source);

/* Flattens a JSON document into the map. Returns 0, or AGENT_E_INVAL with a reason in err. */
int config_load_json(struct config *c, const char *text, size_t len, const char *source, char *err,
                     size_t errlen);
/* Reads and loads a JSON file (at most 1 MiB). */
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);
/* Loads DotnetMonitor_* / DOTNETMONITOR_* variables from a NULL-terminated environment. */
int config_load_env(struct config *c, const char *const *envp);

/* Value of key (case-insensitive), or NULL. */
const char *config_get(const struct config *c, const char *key);
/*
 * Boolean value: "true"/"false" (case-insensitive) → 1/0; absent → def; anything else → -1.
 */
int config_get_bool(const struct config *c, const char *key, int def);

/*
 * Unsigned integer value in [min, max]; absent or empty leaves *out unchanged. On a bad value
 * logs "<key>: …" and returns AGENT_E_INVAL.
 */
int config_get_uint(const struct config *c, const char *key, uint64_t min, uint64_t max,
                    uint64_t *out);

/*
 * A duration in milliseconds in [min_ms, max_ms], given as a .NET TimeSpan ("[d.]hh:mm:ss[.fff]",
 * e.g. Kestrel's "00:00:30") or as whole seconds ("30"); absent or empty leaves *out unchanged.
 * On a bad value logs "<key>: …" and returns AGENT_E_INVAL.
 */
int config_get_timespan_ms(const struct config *c, const char *key, uint64_t min_ms,
                           uint64_t max_ms, uint64_t *out);

/* True when `key` is `prefix` itself or lies under it ("A:B" is under "A"). Case-insensitive. */
bool config_key_under(const char *key, const char *prefix);

/*
 * How dotmon treats a key: CONFIG_KEY_KNOWN (read by dotmon), CONFIG_KEY_FOREIGN (a dotnet-monitor
 * setting dotmon does not implement: ignored) or CONFIG_KEY_UNKNOWN (probably a typo).
 */
enum config_key_kind { CONFIG_KEY_KNOWN = 0, CONFIG_KEY_FOREIGN, CONFIG_KEY_UNKNOWN };
enum config_key_kind config_key_kind(const char *key);

/* True for keys whose values are secrets and must be redacted in output. */
bool config_key_is_secret(const char *key);

#endif
