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

void ring_registry_set_finished(struct ring_entry *e, bool finished, const char *why)
{
    if (e != NULL) {
        e->finished = finished;
        snprintf(e->why, sizeof(e->why), "%s", finished && why != NULL ? why : "");
        size_t n = strlen(e->why);
        while (n > 0 && (e->why[n - 1] == '.' || e->why[n - 1] == ' ')) {
            e->why[--n] = '\0'; /* the answer goes on after it */
        }
    }
}

int ring_registry_find(const struct ring_registry *reg, const char *uid, const char *rule,
                       struct trace_job **out, const char **name,
                       const struct ring_entry **finished)
{
    int found = 0;
    *out = NULL;
    if (finished != NULL) {
        *finished = NULL;
    }
    for (const struct ring_entry *e = reg->head; e != NULL; e = e->next) {
        if (strcmp(e->uid, uid) != 0 || (rule != NULL && strcasecmp(e->rule, rule) != 0)) {
            continue;
        }
        found++;
        if (*out == NULL) { /* the first running one, else the first one */
            *out = *e->slot;
            *name = e->rule;
            if (finished != NULL) {
                *finished = e->finished && *e->slot == NULL ? e : NULL;
            }
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
