/* SPDX-License-Identifier: MIT */
#ifndef TESTS_RULES_TEST_UTIL_H
#define TESTS_RULES_TEST_UTIL_H

/* Configuration for the rules tests: JSON documents (dotnet-monitor's documentation examples)
 * flattened into key/value entries the way the agent's configuration does it, or entries written
 * as "Key=Value" lines. */

#include <stddef.h>
#include <stdint.h>

#include "rules.h"

struct kvset {
    struct rules_kv *kv;
    size_t n, cap;
};

/* Appends the entries of a JSON object (arrays by index, numbers as .NET configuration holds
 * them, true/false, null as ""). Fails the test on malformed JSON. */
void kv_json(struct kvset *s, const char *json);
/* Appends "Key=Value" lines (the first '=' splits; blank lines ignored). */
void kv_lines(struct kvset *s, const char *lines);
void kv_free(struct kvset *s);

/* Loads s with egress names (NULL: no check) and fails the test unless it parses. */
struct rules_config *load(const struct kvset *s, const char *const *egress, size_t negress);
/* The same from JSON, with the egress providers "artifacts" and "TmpDir". */
struct rules_config *load_json(const char *json);
/* True when some error line equals line exactly. */
int has_error(const struct rules_config *c, const char *line);
/* Prints the error lines (for failing tests). */
void dump_errors(const struct rules_config *c);

/* The configuration of the running test: load_strict replaces it with the one of "Key=Value"
 * lines (no egress check), which must have no errors; cfg_teardown frees it. */
extern struct rules_config *test_cfg;
struct rules_config *load_strict(const char *lines);
int cfg_teardown(void **state);

/* The trigger of rule R (load_strict), configured by "Settings:" lines below its Trigger. */
const struct rules_trigger *trigger(const char *type, const char *settings);
/* A new engine of t (fails the test otherwise). */
struct rules_engine *engine(const struct rules_trigger *t, double interval_s);
/* An ASCII string as NUL-terminated UTF-16LE at p; returns the bytes written. */
size_t put_wstr(uint8_t *p, const char *s);

#endif
