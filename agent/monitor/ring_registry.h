/* SPDX-License-Identifier: MIT */
#ifndef AGENT_RING_REGISTRY_H
#define AGENT_RING_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Who keeps a trace ring (a collection rule's CollectTrace with PreTriggerSeconds), for those
 * who read rings: GET /trace/snapshot and /metrics. The owner (rules_run.c, one entry per rule
 * instance with a ring) registers the slot where it keeps its ring's trace job (NULL while none
 * runs) and removes the entry before the slot goes. Readers never learn about the rules: the
 * trace route and the rules runtime no longer know each other.
 *
 * Ownership: the registry owns its entries and their copies of uid, rule and process name; the
 * slot is the owner's. Loop thread only.
 */

struct trace_job;
struct ev_ring;

struct ring_entry {
    struct ring_entry *next;
    uint64_t pid;
    char uid[37];
    char *rule;                    /* the rule's name */
    char *name;                    /* the process's name ("" when unknown) */
    uint64_t limit;                /* RingBufferSizeMB in bytes */
    struct trace_job *const *slot; /* the owner's: the running ring's job, or NULL */
    bool finished;                 /* the rule has Finished: its ring will not run again */
    char why[320];                 /* then the rule's reason ("" when it gave none) */
};

struct ring_registry {
    struct ring_entry *head; /* in registration order */
};

/* Registers an entry (strings copied). 0 with *out, or UV_ENOMEM. */
int ring_registry_add(struct ring_registry *reg, uint64_t pid, const char *uid, const char *rule,
                      const char *name, uint64_t limit, struct trace_job *const *slot,
                      struct ring_entry **out);
/*
 * The owner says whether its rule has Finished (rules.h RULES_STATE_FINISHED: ActionCount reached,
 * RuleDuration over...), with the rule's reason (copied, cut to fit; NULL is ""). A finished
 * entry stays registered so that readers can say so instead of "not running right now". e NULL
 * is fine.
 */
void ring_registry_set_finished(struct ring_entry *e, bool finished, const char *why);
/* Removes and frees e (NULL is fine). */
void ring_registry_remove(struct ring_registry *reg, struct ring_entry *e);
/* Frees every entry (agent_fini). */
void ring_registry_fini(struct ring_registry *reg);

/*
 * The ring of process uid's rule named rule (case-insensitive; any rule when NULL): returns how
 * many entries match, with *out the running one (NULL when none runs right now, e.g. while its
 * action writes it out), *name its rule and *finished (may be NULL) its entry when that rule has
 * Finished, else NULL (when one matched).
 */
int ring_registry_find(const struct ring_registry *reg, const char *uid, const char *rule,
                       struct trace_job **out, const char **name,
                       const struct ring_entry **finished);

/* Every running ring, for /metrics. */
typedef void (*ring_registry_cb)(void *ud, uint64_t pid, const char *uid, const char *name,
                                 const char *rule, const struct ev_ring *ring, uint64_t limit);
void ring_registry_each(const struct ring_registry *reg, ring_registry_cb cb, void *ud);

#endif
