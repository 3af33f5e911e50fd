/* SPDX-License-Identifier: MIT */
/*
 * The EventPipe session each trigger needs (docs/rules.md §3, §4, and the runtime provider for
 * dotmon's GC and exception triggers, docs/profiles.md §2; dotnet/diagnostics
 * Configuration/MetricSourceConfiguration.cs, AspNetTriggerSourceConfiguration.cs,
 * HttpRequestSourceConfiguration.cs), and the POST /trace body form of a session or of a
 * CollectTrace action's providers, so the agent builds CollectTracing with its own parser.
 */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "err.h"
#include "ev_request_specs.h"
#include "num.h"
#include "rules_internal.h"

#define DIAGNOSTIC_SOURCE "Microsoft-Diagnostics-DiagnosticSource"
#define ASPNET_HOSTING    "Microsoft.AspNetCore.Hosting"
#define METRICS_SOURCE    "System.Diagnostics.Metrics"
#define DOTNET_RUNTIME    "Microsoft-Windows-DotNETRuntime"
#define KEYWORD_GC        0x1
#define KEYWORD_EXCEPTION 0x8000
#define LEVEL_INFO        4
#define LEVEL_VERBOSE     5

static const char *const level_names[] = {"LogAlways", "Critical",      "Error",
                                          "Warning",   "Informational", "Verbose"};

const char *rules_trigger_interval_provider(const struct rules_trigger *t)
{
    switch (t->type) {
    case RULES_TRIGGER_EVENT_COUNTER:
    case RULES_TRIGGER_CPU_USAGE:
    case RULES_TRIGGER_GC_HEAP_SIZE:
    case RULES_TRIGGER_THREADPOOL_QUEUE_LENGTH:
        return t->provider;
    case RULES_TRIGGER_ASPNET_REQUEST_DURATION:
        return ASPNET_HOSTING;
    default:
        return NULL;
    }
}

/* float.ToString(InvariantCulture): the shortest text that reads back as the same float. */
static struct rules_session_provider *add_provider(struct rules_session *s, const char *name,
                                                   uint64_t keywords, uint32_t level)
{
    struct rules_session_provider *p = &s->providers[s->nproviders++];
    p->name = name;
    p->keywords = keywords;
    p->level = level;
    return p;
}

static void add_arg(struct rules_session_provider *p, const char *key, const char *value)
{
    p->args[p->nargs++] = (struct rules_kv){key, value};
}

/* An EventCounters provider at the requested interval (MetricSourceConfiguration). */
static void add_counters(struct rules_session *s, const char *provider)
{
    struct rules_session_provider *p = add_provider(s, provider, 0, LEVEL_INFO);
    add_arg(p, "EventCounterIntervalSec", s->interval_text);
}

/* System.Diagnostics.Metrics for one meter (MetricSourceConfiguration with a Meter provider). */
static int add_meter(struct rules_session *s, const struct rules_trigger *t,
                     const struct rules_session_options *o)
{
    if (o->meter_session_id == NULL) {
        return AGENT_E_INVAL;
    }
    (void)snprintf(s->max_series_text, sizeof(s->max_series_text), "%u",
                   o->max_time_series ? o->max_time_series : 1000);
    (void)snprintf(s->max_hist_text, sizeof(s->max_hist_text), "%u",
                   o->max_histograms ? o->max_histograms : 20);
    struct rules_session_provider *p = add_provider(s, METRICS_SOURCE, 0x2, LEVEL_INFO);
    add_arg(p, "SessionId", o->meter_session_id);
    add_arg(p, "Metrics", t->provider);
    add_arg(p, "RefreshInterval", s->interval_text);
    add_arg(p, "MaxTimeSeries", s->max_series_text);
    add_arg(p, "MaxHistograms", s->max_hist_text);
    if (o->meter_client_id != NULL) {
        add_arg(p, "ClientId", o->meter_client_id);
    }
    return 0;
}

int rules_trigger_session(const struct rules_trigger *t, const struct rules_session_options *o,
                          struct rules_session *out)
{
    memset(out, 0, sizeof(*out));
    out->buffer_mb = 256;
    if (num_format_float32(out->interval_text, sizeof(out->interval_text), o->counter_interval_s) !=
        0) {
        (void)snprintf(out->interval_text, sizeof(out->interval_text), "5");
    }
    switch (t->type) {
    case RULES_TRIGGER_EVENT_COUNTER:
    case RULES_TRIGGER_CPU_USAGE:
    case RULES_TRIGGER_GC_HEAP_SIZE:
    case RULES_TRIGGER_THREADPOOL_QUEUE_LENGTH:
        add_counters(out, t->provider);
        return 0;
    case RULES_TRIGGER_EVENT_METER:
        return add_meter(out, t, o);
    case RULES_TRIGGER_ASPNET_REQUEST_COUNT:
    case RULES_TRIGGER_ASPNET_REQUEST_DURATION:
    case RULES_TRIGGER_ASPNET_RESPONSE_STATUS:
        add_arg(add_provider(out, DIAGNOSTIC_SOURCE, 0x3, LEVEL_VERBOSE), "FilterAndPayloadSpecs",
                ev_request_filter_specs);
        if (t->type == RULES_TRIGGER_ASPNET_REQUEST_DURATION) {
            add_counters(out, ASPNET_HOSTING); /* the heartbeat for requests that hang */
        }
        return 0;
    case RULES_TRIGGER_GC_PAUSE:
    case RULES_TRIGGER_GC_COUNT:
        add_provider(out, DOTNET_RUNTIME, KEYWORD_GC, LEVEL_INFO);
        return 0;
    case RULES_TRIGGER_EXCEPTION_COUNT:
        add_provider(out, DOTNET_RUNTIME, KEYWORD_EXCEPTION, LEVEL_INFO);
        return 0;
    default:
        return AGENT_E_INVAL;
    }
}

/* {"Name","Keywords":"0x…","EventLevel","Arguments":{…}} */
static cJSON *provider_json(const char *name, uint64_t keywords, uint32_t level,
                            const struct rules_kv *args, size_t nargs)
{
    char kw[24];
    (void)snprintf(kw, sizeof(kw), "0x%llX", (unsigned long long)keywords);
    cJSON *o = cJSON_CreateObject();
    cJSON *a = NULL;
    if (o == NULL || cJSON_AddStringToObject(o, "Name", name) == NULL ||
        cJSON_AddStringToObject(o, "Keywords", kw) == NULL ||
        cJSON_AddStringToObject(o, "EventLevel", level_names[level % 6]) == NULL ||
        (a = cJSON_AddObjectToObject(o, "Arguments")) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < nargs; i++) {
        if (cJSON_AddStringToObject(a, args[i].key, args[i].value) == NULL) {
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

/* {"Providers":[…],"RequestRundown":…,"BufferSizeInMB":…} */
static cJSON *trace_body(bool rundown, uint32_t buffer_mb, const struct rules_provider *p, size_t n)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *providers = NULL;
    if (o == NULL || (providers = cJSON_AddArrayToObject(o, "Providers")) == NULL ||
        cJSON_AddBoolToObject(o, "RequestRundown", rundown) == NULL ||
        cJSON_AddNumberToObject(o, "BufferSizeInMB", buffer_mb) == NULL) {
        cJSON_Delete(o);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *j = provider_json(p[i].name, p[i].keywords, p[i].level, p[i].args, p[i].nargs);
        if (j == NULL || !cJSON_AddItemToArray(providers, j)) {
            cJSON_Delete(j);
            cJSON_Delete(o);
            return NULL;
        }
    }
    return o;
}

cJSON *rules_session_json(const struct rules_session *s)
{
    struct rules_provider p[RULES_SESSION_MAX_PROVIDERS];
    size_t n =
        s->nproviders < RULES_SESSION_MAX_PROVIDERS ? s->nproviders : RULES_SESSION_MAX_PROVIDERS;
    for (size_t i = 0; i < n; i++) {
        const struct rules_session_provider *sp = &s->providers[i];
        p[i] = (struct rules_provider){sp->name, sp->keywords, sp->level, sp->args, sp->nargs};
    }
    return trace_body(s->request_rundown, s->buffer_mb, p, n);
}

cJSON *rules_trace_action_json(const struct rules_action *a)
{
    if (a->type != RULES_ACTION_COLLECT_TRACE || a->nproviders == 0) {
        return NULL;
    }
    return trace_body(a->request_rundown, a->buffer_mb, a->providers, a->nproviders);
}
