/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CONFIG_H
#define AGENT_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Configuration as .NET's IConfiguration sees it: a flat map of case-insensitive keys whose
 * sections are joined with ':' ("Authentication:MonitorApiKey:Subject"; array elements use
 * their index, "DefaultProcess:Filters:0:Key"). Sources are applied in order (settings.h has
 * dotnet-monitor's order); a later source overrides an earlier one key by key. Every entry
 * remembers its source for `config show --show-sources`.
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

/* Flattens a JSON document into the map (a top-level "$schema" string, an editor's hint, is not a
 * setting: skipped). Returns 0, or AGENT_E_INVAL with a reason in err. */
int config_load_json(struct config *c, const char *text, size_t len, const char *source, char *err,
                     size_t errlen);
/* Reads and loads a JSON file (at most 1 MiB) as source "file"; a missing file is an error. */
int config_load_file(struct config *c, const char *path, char *err, size_t errlen);
/*
 * The same with a source name; optional: a missing file loads nothing and is no error. Files and
 * folders are read only when shdir_open_trusted (StrictModes) allows them: otherwise
 * AGENT_E_UNTRUSTED, with the path and the reason in err (these two functions).
 */
int config_load_json_file(struct config *c, const char *path, const char *source, bool optional,
                          char *err, size_t errlen);
/*
 * Key-per-file (a Kubernetes Secret or ConfigMap mounted as a folder): every regular file of dir
 * (links followed; dot names and settings.json skipped) is one key, its name with "__" for ':',
 * its content the value less one trailing newline. A missing dir loads nothing. At most 1024
 * files of 1 MiB each. The folder and each file (through its links) must pass StrictModes.
 */
int config_load_key_per_file(struct config *c, const char *dir, const char *source, char *err,
                             size_t errlen);
/* Loads DotnetMonitor_* / DOTNETMONITOR_* variables from a NULL-terminated environment. */
int config_load_env(struct config *c, const char *const *envp);
/* Loads unprefixed variables (Metrics__Enabled, DefaultProcess__Filters__0__Key) whose key is a
 * dotnet-monitor setting (config_key_kind not CONFIG_KEY_UNKNOWN); source "environment
 * (unprefixed)". */
int config_load_env_unprefixed(struct config *c, const char *const *envp);

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
 * A number in [min, max] read as .NET reads a `float` setting (num_parse_float32: "5", "1.5"),
 * single precision; absent or empty leaves *out unchanged. On a bad value logs "<key>: …" and
 * returns AGENT_E_INVAL.
 */
int config_get_float(const struct config *c, const char *key, double min, double max, double *out);

/*
 * A duration in milliseconds in [min_ms, max_ms], given as a .NET TimeSpan ("[d.]hh:mm:ss[.fff]",
 * e.g. Kestrel's "00:00:30") or as whole seconds ("30"); absent or empty leaves *out unchanged.
 * On a bad value logs "<key>: …" and returns AGENT_E_INVAL.
 */
int config_get_timespan_ms(const struct config *c, const char *key, uint64_t min_ms,
                           uint64_t max_ms, uint64_t *out);

/* True when `key` is `prefix` itself or lies under it ("A:B" is under "A"). Case-insensitive. */
bool config_key_under(const char *key, const char *prefix);

/* A child of a section: name[0..len) points into a key of the config (valid while it is unchanged).
 */
struct config_child {
    const char *name;
    size_t len;
};
/*
 * The distinct children of the section key ("key:0:…", "key:first" → "0", "first"), in the order
 * .NET's configuration gives them, which is a list's order when bound: whole numbers first by value
 * (a gap is not the end), then the other names case-insensitively. 0 with *n of them in out;
 * AGENT_E_TOOBIG when there are more than max.
 */
int config_children(const struct config *c, const char *key, struct config_child *out, size_t max,
                    size_t *n);

/*
 * How dotmon treats a key: CONFIG_KEY_KNOWN (read by dotmon), CONFIG_KEY_FOREIGN (a dotnet-monitor
 * setting dotmon does not implement: ignored) or CONFIG_KEY_UNKNOWN (probably a typo).
 */
enum config_key_kind { CONFIG_KEY_KNOWN = 0, CONFIG_KEY_FOREIGN, CONFIG_KEY_UNKNOWN };
enum config_key_kind config_key_kind(const char *key);

/* True for keys whose values are secrets and must be redacted in output. */
bool config_key_is_secret(const char *key);

#endif
