/* SPDX-License-Identifier: MIT */
#ifndef AGENT_RULES_RUN_H
#define AGENT_RULES_RUN_H

/*
 * Collection rules run in the agent (issue 17, docs/rules.md): rules/ is the pure engine;
 * this file gives it processes, EventPipe sessions, timers and actions. For every process
 * discovery reports (connect and listen mode) and every valid rule whose filters match, one
 * instance (rules_inst): its trigger's session runs while the trigger is active (metric triggers
 * through metrics_session.c's msession, with the counter interval of the rule), RuleDuration has
 * a timer, and the actions the engine asks for are started here: Execute (uv_spawn, no shell),
 * Get/SetEnvironmentVariable (Diagnostic IPC), and the Collect* actions (CollectTrace, its
 * pre-trigger ring included, CollectDump, CollectGCDump, CollectLogs, CollectLiveMetrics), which
 * call the collectors (collectors.h) as the HTTP routes do, with the rule's egress provider as
 * the artifact's destination. Rings are registered in the agent's ring registry
 * (ring_registry.h) for their readers. A process that goes ends its instances; a new runtime (a
 * new uid) gets fresh ones. A changed configuration replaces the rules (rules_run_reload).
 */

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "config.h"
#include "ipc_discovery.h"

struct agent;
struct egress_set;
struct rules_config;
struct rules_run;

/*
 * The rules of the merged configuration (CollectionRules, Templates, CollectionRuleDefaults),
 * checked against the names of the egress providers in egress (NULL: the Egress section has
 * errors of its own, reported by whoever parsed it, and the names are not checked). 0 with *out
 * set (its errors list may be non-empty; free with rules_config_free), or -ENOMEM.
 */
int rules_run_config(const struct config *cfg, const struct egress_set *egress,
                     struct rules_config **out);
/* A key of the rules' sections (CollectionRules, Templates, CollectionRuleDefaults). */
bool rules_run_is_setting(const char *key);

/*
 * Loads the rules of a->cfg (and keeps their settings in a->rules_settings for
 * rules_run_reload). Every configuration problem is logged at Error and makes this return
 * AGENT_E_INVAL (dotmon refuses to start, as for other configuration errors); -ENOMEM. *out is
 * NULL when no rule is configured.
 */
int rules_run_new(struct agent *a, struct rules_run **out);
/*
 * A reloaded configuration (apikey.c's watch): when its rule settings (CollectionRules,
 * Templates, CollectionRuleDefaults, and the names of the egress providers in effect, a->egress,
 * which the caller has reloaded first) differ from those in effect, loads them. Rules with
 * configuration errors are logged at Error, each named, and the running rules stay. Valid ones
 * replace a->rules: every running instance stops (its trigger session stopped, its actions left to
 * run unreported, as at shutdown; the old rules are freed once their handles have closed), and the
 * new rules are applied to every process discovery lists, as to a newly discovered one: filters
 * evaluated, Startup rules fire again, lifetime counts and limits start over. In listen mode
 * (without DiagnosticPort:HoldSuspended) runtimes that connect from then on are held for the rules
 * while there are rules, and those held when the last rule goes are resumed.
 */
void rules_run_reload(struct agent *a, const struct config *cfg);
/* A process appeared (added) or is gone. r may be NULL. */
void rules_run_on_process(struct rules_run *r, const struct ipc_process *p, bool added);
/* A known process's command line changed (ipc_discovery_set_update_cb): the rules whose filters
 * match it now and had not matched before apply to it from now on. */
void rules_run_on_process_updated(struct rules_run *r, const struct ipc_process *p);
/* Stops every session and detaches the running actions (their handles close on the loop). */
void rules_run_close(struct rules_run *r);
/* Frees the rules; after the loop has run out (the closing instances point at them). */
void rules_run_free(struct rules_run *r);

/*
 * /collectionrules for the process uid: name NULL gives the summary of every rule applied to it,
 * else the detailed description of that rule. 0 with *out, AGENT_E_NOTFOUND (no such rule for
 * the process), -ENOMEM. r may be NULL (no rules: {} or AGENT_E_NOTFOUND).
 */
int rules_run_describe(struct rules_run *r, const char *uid, const char *name, cJSON **out);

#endif
