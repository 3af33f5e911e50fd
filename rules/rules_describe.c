/* SPDX-License-Identifier: MIT */
/*
 * GET /collectionrules and /collectionrules/{name} (dotnet-monitor-openapi.json
 * CollectionRuleDescription, CollectionRuleDetailedDescription; CollectionRuleService.cs): the
 * state is re-evaluated at the time asked, as dotnet-monitor re-checks throttling on a copy of the
 * pipeline state; countdowns are whole seconds, TimeSpans in the "c" format, absent ones null.
 */
#include "rules.h"

#include <cJSON.h>

#include "rules_internal.h"

/* The state shown: throttling starts or ends with the window (not while actions run). */
static enum rules_state shown_state(const struct rules_inst *i, size_t in_window,
                                    const char **reason)
{
    *reason = i->reason;
    if (i->state != RULES_STATE_RUNNING && i->state != RULES_STATE_THROTTLED) {
        return i->state;
    }
    const struct rules_limits *l = &i->rule->limits;
    bool throttled = l->window_ticks > 0 && (int64_t)l->action_count <= (int64_t)in_window;
    if (throttled == (i->state == RULES_STATE_THROTTLED)) {
        return i->state;
    }
    *reason = throttled ? rules__reason_throttled : rules__reason_running;
    return throttled ? RULES_STATE_THROTTLED : RULES_STATE_RUNNING;
}

static bool add_state(cJSON *o, enum rules_state s, const char *reason)
{
    return cJSON_AddStringToObject(o, "state", rules_state_name(s)) != NULL &&
           cJSON_AddStringToObject(o, "stateReason", reason) != NULL;
}

cJSON *rules_describe(const struct rules_inst *const *insts, size_t n, int64_t now_ms)
{
    cJSON *all = cJSON_CreateObject();
    for (size_t k = 0; all != NULL && k < n; k++) {
        int64_t oldest;
        size_t in_window = rules__window_count(insts[k], now_ms, &oldest);
        const char *reason;
        enum rules_state s = shown_state(insts[k], in_window, &reason);
        cJSON *o = cJSON_AddObjectToObject(all, insts[k]->rule->name);
        if (o == NULL || !add_state(o, s, reason)) {
            cJSON_Delete(all);
            return NULL;
        }
    }
    return all;
}

/* A TimeSpan member: "c" text, or null. Whole seconds when truncate (dotnet-monitor drops the
 * milliseconds of countdowns), and null unless positive. */
static bool add_span(cJSON *o, const char *name, bool present, int64_t ticks)
{
    if (!present) {
        return cJSON_AddNullToObject(o, name) != NULL;
    }
    char text[40];
    rules_timespan_format(ticks, text, sizeof(text));
    return cJSON_AddStringToObject(o, name, text) != NULL;
}

static bool add_countdown(cJSON *o, const char *name, bool present, int64_t ms)
{
    return add_span(o, name, present && ms > 0, ms / 1000 * RULES_TICKS_PER_SECOND);
}

cJSON *rules_describe_detailed(const struct rules_inst *i, int64_t now_ms)
{
    const struct rules_limits *l = &i->rule->limits;
    int64_t oldest;
    size_t in_window = rules__window_count(i, now_ms, &oldest);
    const char *reason;
    enum rules_state s = shown_state(i, in_window, &reason);
    bool live = s != RULES_STATE_FINISHED;
    int64_t window_ms = l->window_ticks / RULES_TICKS_PER_MS;
    bool swd = live && l->window_ticks > 0 && (int64_t)in_window >= (int64_t)l->action_count &&
               oldest != INT64_MAX;
    int64_t rule_left = l->duration_ticks / RULES_TICKS_PER_MS - (now_ms - i->start_ms);
    cJSON *o = cJSON_CreateObject();
    if (o == NULL ||
        cJSON_AddNumberToObject(o, "lifetimeOccurrences", (double)i->lifetime) == NULL ||
        cJSON_AddNumberToObject(o, "slidingWindowOccurrences", (double)in_window) == NULL ||
        cJSON_AddNumberToObject(o, "actionCountLimit", l->action_count) == NULL ||
        !add_span(o, "actionCountSlidingWindowDurationLimit", l->window_ticks > 0,
                  l->window_ticks) ||
        !add_countdown(o, "slidingWindowDurationCountdown", swd,
                       swd ? oldest - (now_ms - window_ms) : 0) ||
        !add_countdown(o, "ruleFinishedCountdown", live && l->duration_ticks > 0, rule_left) ||
        !add_state(o, s, reason)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}
