/* SPDX-License-Identifier: MIT */
#include "ring_registry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <uv.h>

#include "collectors.h"

int ring_registry_add(struct ring_registry *reg, uint64_t pid, const char *uid, const char *rule,
                      const char *name, uint64_t limit, struct trace_job *const *slot,
                      struct ring_entry **out)
{
    *out = NULL;
    struct ring_entry *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return UV_ENOMEM;
    }
    e->pid = pid;
    snprintf(e->uid, sizeof(e->uid), "%s", uid);
    e->rule = strdup(rule);
    e->name = strdup(name != NULL ? name : "");
    e->limit = limit;
    e->slot = slot;
    if (e->rule == NULL || e->name == NULL) {
        free(e->rule);
        free(e->name);
        free(e);
        return UV_ENOMEM;
    }
    struct ring_entry **at = &reg->head;
    while (*at != NULL) {
        at = &(*at)->next;
    }
    *at = e;
    *out = e;
    return 0;
}

void ring_registry_remove(struct ring_registry *reg, struct ring_entry *e)
{
    for (struct ring_entry **pp = &reg->head; e != NULL && *pp != NULL; pp = &(*pp)->next) {
        if (*pp == e) {
            *pp = e->next;
            free(e->rule);
            free(e->name);
            free(e);
            return;
        }
    }
}

void ring_registry_fini(struct ring_registry *reg)
{
    while (reg->head != NULL) {
        ring_registry_remove(reg, reg->head);
    }
}

int ring_registry_find(const struct ring_registry *reg, const char *uid, const char *rule,
                       struct trace_job **out, const char **name)
{
    int found = 0;
    *out = NULL;
    for (const struct ring_entry *e = reg->head; e != NULL; e = e->next) {
        if (strcmp(e->uid, uid) != 0 || (rule != NULL && strcasecmp(e->rule, rule) != 0)) {
            continue;
        }
        found++;
        if (*out == NULL) { /* the first running one, else the first one */
            *out = *e->slot;
            *name = e->rule;
        }
    }
    return found;
}

void ring_registry_each(const struct ring_registry *reg, ring_registry_cb cb, void *ud)
{
    for (const struct ring_entry *e = reg->head; e != NULL; e = e->next) {
        const struct ev_ring *ring = collect_trace_ring_get(*e->slot);
        if (ring != NULL) {
            cb(ud, e->pid, e->uid, e->name, e->rule, ring, e->limit);
        }
    }
}
