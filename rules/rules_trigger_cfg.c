/* SPDX-License-Identifier: MIT */
/*
 * Trigger settings (docs/rules.md §2; dotnet-monitor CollectionRules/Options/Triggers):
 * one table of settings per trigger type, then the checks and defaults that do not fit a row
 * (either threshold, the shortcut thresholds, CollectionRuleDefaults, the status code syntax).
 */
#include "rules.h"

#include <float.h>
#include <stddef.h>
#include <string.h>

#include "ascii.h"
#include "ev_profile.h"
#include "rules_internal.h"

#define TOFF(f) offsetof(struct rules_trigger, f)

static const struct rules_range range_percent = {
    .dmin = 0, .dmax = 100, .text_min = "0", .text_max = "100"};
static const struct rules_range range_positive = {
    .dmin = 0, .dmax = DBL_MAX, .text_min = "0", .text_max = "1.7976931348623157E+308"};
static const struct rules_range range_percentile = {
    .min = 0, .max = 100, .text_min = "0", .text_max = "100"};
static const struct rules_range range_count = {
    .min = 1, .max = INT32_MAX, .text_min = "1", .text_max = "2147483647"};
static const struct rules_range range_request_duration = {
    .min = 0, .max = 3600 * RULES_TICKS_PER_SECOND, .text_min = "00:00:00", .text_max = "01:00:00"};
static const struct rules_range range_threshold_ms = {
    .min = 1, .max = 3600 * 1000, .text_min = "1", .text_max = "3600000"};
static const struct rules_range range_generation = {
    .min = 0, .max = 2, .text_min = "0", .text_max = "2"};

#define F_WINDOW                                                                                   \
    {                                                                                              \
        "SlidingWindowDuration", RULES_F_SPAN, false, TOFF(window_ticks), TOFF(has_window),        \
            &rules__range_window, NULL, 0                                                          \
    }
#define F_THRESHOLD(name, field, has, range)                                                       \
    {                                                                                              \
        name, RULES_F_DOUBLE, false, TOFF(field), TOFF(has), range, NULL, 0                        \
    }
#define F_PATHS(name, field, count)                                                                \
    {                                                                                              \
        name, RULES_F_LIST, false, TOFF(field), RULES_NO_OFF, NULL, NULL, TOFF(count)              \
    }

static const struct rules_field f_event_counter[] = {
    {"ProviderName", RULES_F_STR, true, TOFF(provider), RULES_NO_OFF, NULL, NULL, 0},
    {"CounterName", RULES_F_STR, true, TOFF(name), RULES_NO_OFF, NULL, NULL, 0},
    F_THRESHOLD("GreaterThan", greater_than, has_greater_than, NULL),
    F_THRESHOLD("LessThan", less_than, has_less_than, NULL),
    F_WINDOW,
};

static const struct rules_field f_event_meter[] = {
    {"MeterName", RULES_F_STR, true, TOFF(provider), RULES_NO_OFF, NULL, NULL, 0},
    {"InstrumentName", RULES_F_STR, true, TOFF(name), RULES_NO_OFF, NULL, NULL, 0},
    F_THRESHOLD("GreaterThan", greater_than, has_greater_than, NULL),
    F_THRESHOLD("LessThan", less_than, has_less_than, NULL),
    F_WINDOW,
    {"HistogramPercentile", RULES_F_INT, false, TOFF(histogram_percentile), RULES_NO_OFF,
     &range_percentile, NULL, 0},
};

static const struct rules_field f_cpu[] = {
    F_THRESHOLD("GreaterThan", greater_than, has_greater_than, &range_percent),
    F_THRESHOLD("LessThan", less_than, has_less_than, &range_percent),
    F_WINDOW,
};

static const struct rules_field f_positive[] = {
    F_THRESHOLD("GreaterThan", greater_than, has_greater_than, &range_positive),
    F_THRESHOLD("LessThan", less_than, has_less_than, &range_positive),
    F_WINDOW,
};

static const struct rules_field f_request_count[] = {
    {"RequestCount", RULES_F_INT, false, TOFF(count), TOFF(has_count), &range_count, NULL, 0},
    F_WINDOW,
    F_PATHS("IncludePaths", include_paths, n_include_paths),
    F_PATHS("ExcludePaths", exclude_paths, n_exclude_paths),
};

static const struct rules_field f_request_duration[] = {
    {"RequestCount", RULES_F_INT, false, TOFF(count), TOFF(has_count), &range_count, NULL, 0},
    {"RequestDuration", RULES_F_SPAN, false, TOFF(request_duration_ticks),
     TOFF(has_request_duration), &range_request_duration, NULL, 0},
    F_WINDOW,
    F_PATHS("IncludePaths", include_paths, n_include_paths),
    F_PATHS("ExcludePaths", exclude_paths, n_exclude_paths),
};

static const struct rules_field f_response_status[] = {
    {"ResponseCount", RULES_F_INT, false, TOFF(count), TOFF(has_count), &range_count, NULL, 0},
    F_WINDOW,
    F_PATHS("IncludePaths", include_paths, n_include_paths),
    F_PATHS("ExcludePaths", exclude_paths, n_exclude_paths),
};

/* dotmon's runtime triggers: Count is required but for GCPause (default 1). */
#define F_COUNT(required)                                                                          \
    {                                                                                              \
        "Count", RULES_F_INT, (required), TOFF(count), TOFF(has_count), &range_count, NULL, 0      \
    }

static const struct rules_field f_gc_pause[] = {
    {"ThresholdMs", RULES_F_INT, true, TOFF(threshold_ms), RULES_NO_OFF, &range_threshold_ms, NULL,
     0},
    F_COUNT(false),
    F_WINDOW,
};

static const struct rules_field f_gc_count[] = {
    {"Generation", RULES_F_INT, false, TOFF(generation), TOFF(has_generation), &range_generation,
     NULL, 0},
    F_COUNT(true),
    F_WINDOW,
};

static const struct rules_field f_exception_count[] = {
    F_COUNT(true),
    F_WINDOW,
    F_PATHS("ExceptionTypes", exception_types, n_exception_types),
};

typedef void (*trigger_post_fn)(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                                double default_greater_than);

static void post_threshold(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                           double unused);
static void post_shortcut(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                          double default_greater_than);
static void post_aspnet(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                        double unused);
static void post_runtime(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                         double unused);

/* One row: the name, RULES_TRIGGER_<type>, the settings table, the checks after it, and the
 * shortcuts' counter and default GreaterThan. */
#define TRIGGER(name, type, fields, post, counter, gt)                                             \
    {                                                                                              \
        {(name), RULES_TRIGGER_##type, RULES_ROWS(fields)}, (post), (counter), (gt)                \
    }

static const struct trigger_desc {
    struct rules_type_row row;
    trigger_post_fn post;
    const char *counter; /* the shortcuts' System.Runtime counter */
    double default_greater_than;
} triggers[] = {
    {{"Startup", RULES_TRIGGER_STARTUP, NULL, 0}, NULL, NULL, 0},
    TRIGGER("EventCounter", EVENT_COUNTER, f_event_counter, post_threshold, NULL, 0),
    TRIGGER("EventMeter", EVENT_METER, f_event_meter, post_threshold, NULL, 0),
    TRIGGER("CPUUsage", CPU_USAGE, f_cpu, post_shortcut, "cpu-usage", 50),
    TRIGGER("GCHeapSize", GC_HEAP_SIZE, f_positive, post_shortcut, "gc-heap-size", 10),
    TRIGGER("ThreadpoolQueueLength", THREADPOOL_QUEUE_LENGTH, f_positive, post_shortcut,
            "threadpool-queue-length", 200),
    TRIGGER("AspNetRequestCount", ASPNET_REQUEST_COUNT, f_request_count, post_aspnet, NULL, 0),
    TRIGGER("AspNetRequestDuration", ASPNET_REQUEST_DURATION, f_request_duration, post_aspnet, NULL,
            0),
    TRIGGER("AspNetResponseStatus", ASPNET_RESPONSE_STATUS, f_response_status, post_aspnet, NULL,
            0),
    TRIGGER("GCPause", GC_PAUSE, f_gc_pause, post_runtime, NULL, 0),
    TRIGGER("GCCount", GC_COUNT, f_gc_count, post_runtime, NULL, 0),
    TRIGGER("ExceptionCount", EXCEPTION_COUNT, f_exception_count, post_runtime, NULL, 0),
};

/* TraceEvent's GCReason names, by value: events/ev_profile.h's, which GET /profile?kind=gc shows.
 */
_Static_assert(RULES_GC_REASONS == EV_PROFILE_GC_REASONS, "one list of GC reasons");

static void default_window(struct rules_ctx *c, struct rules_trigger *t)
{
    if (!t->has_window) {
        t->window_ticks = c->def.has_window ? c->def.window_ticks : 60 * RULES_TICKS_PER_SECOND;
    }
}

/* GreaterThan must be below LessThan when both are given (equal is allowed, as in
 * dotnet-monitor; such a trigger never fires). */
static void check_order(struct rules_ctx *c, const char *settings, const struct rules_trigger *t)
{
    if (t->has_greater_than && t->has_less_than && t->less_than < t->greater_than) {
        rules__error(c, settings,
                     "The value of field GreaterThan must be less than the value of field "
                     "LessThan.");
    }
}

static void post_threshold(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                           double unused)
{
    (void)unused;
    /* A threshold given but not convertible is reported already, not as missing. */
    if (!rules__present(c, rules__key(c, settings, "GreaterThan")) &&
        !rules__present(c, rules__key(c, settings, "LessThan"))) {
        rules__error(c, settings, "The GreaterThan field or the LessThan field is required.");
    }
    check_order(c, settings, t);
    default_window(c, t);
}

/* The shortcuts (triggershortcuts.md): System.Runtime's counter, and the default GreaterThan
 * only when neither threshold is given (docs/rules.md §3). */
static void post_shortcut(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                          double default_greater_than)
{
    if (!t->has_greater_than && !t->has_less_than) {
        t->has_greater_than = true;
        t->greater_than = default_greater_than;
    }
    check_order(c, settings, t);
    default_window(c, t);
    t->provider = "System.Runtime";
}

static void check_globs(struct rules_ctx *c, const char *key, const char *const *paths, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (strstr(paths[i], "***") != NULL) {
            rules__error(c, key, "Only * or **/ wildcard characters are allowed.");
            return;
        }
    }
}

/* "[1-5][0-9]{2}" and optionally "-" and another one, the whole item (AspNetResponseStatus). */
static bool parse_code(const char *s, int *out)
{
    if (s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9') {
        return false;
    }
    *out = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
    return true;
}

static void parse_status_codes(struct rules_ctx *c, const char *settings, struct rules_trigger *t)
{
    const char *key = rules__key(c, settings, "StatusCodes");
    size_t n;
    const char **items = rules__string_list(c, key, &n);
    if (n == 0) {
        rules__error(c, key, "The StatusCodes field is required.");
        return;
    }
    struct rules_status_range *r = rules__array(c, n, sizeof(*r));
    if (r == NULL) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const char *s = items[i];
        bool ok = strlen(s) >= 3 && parse_code(s, &r[i].min);
        r[i].max = r[i].min;
        if (ok && s[3] != '\0') {
            ok = s[3] == '-' && strlen(s) == 7 && parse_code(s + 4, &r[i].max);
        }
        if (!ok || r[i].max < r[i].min) {
            rules__error(c, key,
                         "The field StatusCodes must be a status code or status code range "
                         "between 1xx and 5xx. E.g. 200, 400-500. ('%s')",
                         s);
        }
    }
    t->status_codes = r;
    t->n_status_codes = n;
}

static void post_aspnet(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                        double unused)
{
    (void)unused;
    default_window(c, t);
    bool status = t->type == RULES_TRIGGER_ASPNET_RESPONSE_STATUS;
    const char *count_key = rules__key(c, settings, status ? "ResponseCount" : "RequestCount");
    if (!t->has_count && !rules__present(c, count_key)) {
        bool has = status ? c->def.has_response_count : c->def.has_request_count;
        t->count = status ? c->def.response_count : c->def.request_count;
        if (!has) {
            rules__error(c, count_key,
                         status ? "A response count must be specified if there is no default "
                                  "response count."
                                : "A request count must be specified if there is no default "
                                  "request count.");
        }
    }
    if (t->type == RULES_TRIGGER_ASPNET_REQUEST_DURATION && !t->has_request_duration) {
        t->request_duration_ticks = 5 * RULES_TICKS_PER_SECOND;
    }
    check_globs(c, rules__key(c, settings, "IncludePaths"), t->include_paths, t->n_include_paths);
    check_globs(c, rules__key(c, settings, "ExcludePaths"), t->exclude_paths, t->n_exclude_paths);
    if (status) {
        parse_status_codes(c, settings, t);
    }
}

/* GCCount's Reasons: each element a GCReason name or value, as the binder converts an enum. */
static void parse_reasons(struct rules_ctx *c, const char *settings, struct rules_trigger *t)
{
    const char *key = rules__key(c, settings, "Reasons");
    size_t n;
    const char **names = rules__children(c, key, &n);
    /* A list's elements, or one value given as the setting itself. */
    size_t m = n > 0 ? n : 1;
    for (size_t i = 0; i < m; i++) {
        const char *k = n > 0 ? rules__key(c, key, names[i]) : key;
        const char *v = rules__get(c, k);
        if (v == NULL || *v == '\0') {
            continue;
        }
        int r = rules__enum_index(v, EV_PROFILE_GC_REASON_NAMES, RULES_GC_REASONS);
        int32_t num;
        if (r < 0 && rules__parse_int32(v, &num) == 0 && num >= 0 && num < RULES_GC_REASONS) {
            r = num;
        }
        if (r < 0) {
            rules__bad_value(c, k, v, "GCReason");
            continue;
        }
        t->reason_mask |= 1u << r;
    }
}

/* GCPause, GCCount, ExceptionCount: the window from CollectionRuleDefaults, GCPause's Count 1,
 * GCCount's Generation 2 and its Reasons. */
static void post_runtime(struct rules_ctx *c, const char *settings, struct rules_trigger *t,
                         double unused)
{
    (void)unused;
    default_window(c, t);
    if (t->type == RULES_TRIGGER_GC_PAUSE && !t->has_count) {
        t->count = 1;
    }
    if (t->type == RULES_TRIGGER_GC_COUNT) {
        if (!t->has_generation) {
            t->generation = 2;
        }
        parse_reasons(c, settings, t);
    }
}

enum rules_trigger_source rules_trigger_source(const struct rules_trigger *t)
{
    switch (t->type) {
    case RULES_TRIGGER_STARTUP:
        return RULES_SOURCE_NONE;
    case RULES_TRIGGER_ASPNET_REQUEST_COUNT:
    case RULES_TRIGGER_ASPNET_REQUEST_DURATION:
    case RULES_TRIGGER_ASPNET_RESPONSE_STATUS:
        return RULES_SOURCE_HTTP;
    case RULES_TRIGGER_GC_PAUSE:
    case RULES_TRIGGER_GC_COUNT:
    case RULES_TRIGGER_EXCEPTION_COUNT:
        return RULES_SOURCE_RUNTIME;
    default:
        return RULES_SOURCE_METRICS;
    }
}

void rules__parse_trigger(struct rules_ctx *c, const char *section, struct rules_trigger *t)
{
    memset(t, 0, sizeof(*t));
    t->histogram_percentile = -1;
    const char *type_key = rules__key(c, section, "Type");
    const char *type = rules__get(c, type_key);
    if (type == NULL || *type == '\0') {
        rules__error(c, type_key, "The Type field is required.");
        return;
    }
    const struct trigger_desc *d = rules__find_row(triggers, sizeof(triggers) / sizeof(triggers[0]),
                                                   sizeof(triggers[0]), type);
    if (d == NULL) {
        rules__error(c, type_key, "'%s' is not a known trigger type.", type);
        return;
    }
    t->type = (enum rules_trigger_type)d->row.type;
    t->type_name = d->row.name;
    t->name = d->counter;
    const char *settings = rules__key(c, section, "Settings");
    rules__read_fields(c, settings, d->row.fields, d->row.nfields, t);
    if (d->post != NULL) {
        d->post(c, settings, t, d->default_greater_than);
    }
}
