/* SPDX-License-Identifier: MIT */
/*
 * Action settings (docs/rules.md §5; dotnet-monitor CollectionRules/Options/Actions): a
 * table of settings per action type, the nested lists (trace providers, log filter specs, live
 * metrics sources), the egress provider checks, and the $(Actions.<name>.<output>) references.
 */
#include "rules.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"
#include "hex.h"
#include "rules_internal.h"

#define AOFF(f) offsetof(struct rules_action, f)

static const char *const dump_names[] = {"Mini", "Full", "Triage", "WithHeap"};
static const struct rules_enum dump_enum = {"DumpType", dump_names, 4};
static const char *const level_names[] = {"Trace", "Debug",    "Information", "Warning",
                                          "Error", "Critical", "None"};
static const struct rules_enum level_enum = {"LogLevel", level_names, 7};
static const char *const format_names[] = {"PlainText", "NewlineDelimitedJson", "JsonSequence"};
static const struct rules_enum format_enum = {"LogFormat", format_names, 3};
static const struct rules_enum exc_format_enum = {"ExceptionFormat", format_names, 3};
static const char *const stacks_format_names[] = {"Json", "PlainText", "Speedscope"};
static const struct rules_enum stacks_format_enum = {"CallStackFormat", stacks_format_names, 3};
static const char *const profile_names[] = {"Cpu", "Http", "Logs", "Metrics", "GcCollect"};
static const char *const event_level_names[] = {"LogAlways", "Critical",      "Error",
                                                "Warning",   "Informational", "Verbose"};

static const struct rules_range range_buffer = {
    .min = 1, .max = 1024, .text_min = "1", .text_max = "1024"};
static const struct rules_range range_seconds = {
    .min = 1, .max = 3600, .text_min = "1", .text_max = "3600"};
static const struct rules_range range_post_seconds = {
    .min = 0, .max = 3600, .text_min = "0", .text_max = "3600"};

#define F_EGRESS                                                                                   \
    {                                                                                              \
        "Egress", RULES_F_STR, false, AOFF(egress), RULES_NO_OFF, NULL, NULL, 0                    \
    }
/* The name of the artifact at the egress provider (not substituted, as in dotnet-monitor). */
#define F_ARTIFACT_NAME                                                                            \
    {                                                                                              \
        "ArtifactName", RULES_F_STR, false, AOFF(artifact_name), RULES_NO_OFF, NULL, NULL, 0       \
    }
#define F_DURATION                                                                                 \
    {                                                                                              \
        "Duration", RULES_F_SPAN, false, AOFF(duration_ticks), RULES_NO_OFF,                       \
            &rules__range_duration, NULL, 0                                                        \
    }
#define F_BOOL(name, field)                                                                        \
    {                                                                                              \
        name, RULES_F_BOOL, false, AOFF(field), RULES_NO_OFF, NULL, NULL, 0                        \
    }
#define F_ENUM(name, field, en)                                                                    \
    {                                                                                              \
        name, RULES_F_ENUM, false, AOFF(field), RULES_NO_OFF, NULL, en, 0                          \
    }
#define F_STR(name, field, req)                                                                    \
    {                                                                                              \
        name, RULES_F_STR, req, AOFF(field), RULES_NO_OFF, NULL, NULL, 0                           \
    }

/* CollectionRuleActionOptions itself (an empty Name stays NULL: unnamed). */
static const struct rules_field f_action[] = {F_STR("Name", name, false),
                                              F_BOOL("WaitForCompletion", wait_for_completion)};
static const struct rules_field f_dump[] = {F_ENUM("Type", dump_type, &dump_enum), F_EGRESS,
                                            F_ARTIFACT_NAME};
static const struct rules_field f_gcdump[] = {F_EGRESS, F_ARTIFACT_NAME};
static const struct rules_field f_stacks[] = {F_ENUM("Format", stacks_format, &stacks_format_enum),
                                              F_EGRESS, F_ARTIFACT_NAME};
static const struct rules_field f_exceptions[] = {F_ENUM("Format", exc_format, &exc_format_enum),
                                                  F_EGRESS, F_ARTIFACT_NAME};
static const struct rules_field f_trace[] = {
    F_BOOL("RequestRundown", request_rundown),
    {"BufferSizeMegabytes", RULES_F_INT, false, AOFF(buffer_mb), RULES_NO_OFF, &range_buffer, NULL,
     0},
    {"Duration", RULES_F_SPAN, false, AOFF(duration_ticks), AOFF(has_duration),
     &rules__range_duration, NULL, 0},
    F_EGRESS,
    {"PreTriggerSeconds", RULES_F_INT, false, AOFF(pre_trigger_s), AOFF(has_pre_trigger),
     &range_seconds, NULL, 0},
    {"RingBufferSizeMB", RULES_F_INT, false, AOFF(ring_mb), AOFF(has_ring_mb), &range_buffer, NULL,
     0},
    {"PostTriggerSeconds", RULES_F_INT, false, AOFF(post_trigger_s), AOFF(has_post_trigger),
     &range_post_seconds, NULL, 0},
    F_ARTIFACT_NAME,
};
static const struct rules_field f_logs[] = {F_ENUM("DefaultLevel", default_level, &level_enum),
                                            F_BOOL("UseAppFilters", use_app_filters),
                                            F_ENUM("Format", format, &format_enum),
                                            F_DURATION,
                                            F_EGRESS,
                                            F_ARTIFACT_NAME};
static const struct rules_field f_live[] = {
    F_BOOL("IncludeDefaultProviders", include_default_providers), F_DURATION, F_EGRESS,
    F_ARTIFACT_NAME};
static const struct rules_field f_execute[] = {F_STR("Path", path, true),
                                               F_STR("Arguments", arguments, false),
                                               F_BOOL("IgnoreExitCode", ignore_exit_code)};
static const struct rules_field f_get_env[] = {F_STR("Name", env_name, true)};
static const struct rules_field f_set_env[] = {F_STR("Name", env_name, true),
                                               F_STR("Value", env_value, false)};
static const struct rules_field f_profiler[] = {F_STR("Path", profiler_path, true),
                                                F_STR("Clsid", clsid, true)};

typedef void (*action_post_fn)(struct rules_ctx *c, const char *settings, struct rules_action *a);

static void post_trace(struct rules_ctx *c, const char *settings, struct rules_action *a);
static void post_logs(struct rules_ctx *c, const char *settings, struct rules_action *a);
static void post_live(struct rules_ctx *c, const char *settings, struct rules_action *a);
static void post_profiler(struct rules_ctx *c, const char *settings, struct rules_action *a);
static void post_exceptions(struct rules_ctx *c, const char *settings, struct rules_action *a);

/* One row: the name, RULES_ACTION_<type>, the settings table, the checks after it, whether it
 * egresses, its output. */
#define ACTION(name, type, fields, post, egress, output)                                           \
    {                                                                                              \
        {(name), RULES_ACTION_##type, RULES_ROWS(fields)}, (post), (egress), (output)              \
    }

static const struct action_desc {
    struct rules_type_row row;
    action_post_fn post;
    bool egress;        /* has an Egress setting (required, with the default) */
    const char *output; /* the result it produces */
} action_types[] = {
    ACTION("CollectDump", COLLECT_DUMP, f_dump, NULL, true, "EgressPath"),
    ACTION("CollectGCDump", COLLECT_GCDUMP, f_gcdump, NULL, true, "EgressPath"),
    ACTION("CollectStacks", COLLECT_STACKS, f_stacks, NULL, true, "EgressPath"),
    ACTION("CollectExceptions", COLLECT_EXCEPTIONS, f_exceptions, post_exceptions, true,
           "EgressPath"),
    ACTION("CollectTrace", COLLECT_TRACE, f_trace, post_trace, true, "EgressPath"),
    ACTION("CollectLogs", COLLECT_LOGS, f_logs, post_logs, true, "EgressPath"),
    ACTION("CollectLiveMetrics", COLLECT_LIVE_METRICS, f_live, post_live, true, "EgressPath"),
    ACTION("Execute", EXECUTE, f_execute, NULL, false, "ExitCode"),
    ACTION("GetEnvironmentVariable", GET_ENVIRONMENT_VARIABLE, f_get_env, NULL, false, "Value"),
    ACTION("SetEnvironmentVariable", SET_ENVIRONMENT_VARIABLE, f_set_env, NULL, false, NULL),
    ACTION("LoadProfiler", LOAD_PROFILER, f_profiler, post_profiler, false, NULL),
};

/* dotnet-monitor actions dotmon does not have (none now: CollectExceptions reads the runtime's
 * own events; kept for the next one). */
static const char *const unsupported_types[] = {NULL};

const char *rules__action_output(enum rules_action_type t)
{
    for (size_t k = 0; k < sizeof(action_types) / sizeof(action_types[0]); k++) {
        if (action_types[k].row.type == (int)t) {
            return action_types[k].output;
        }
    }
    return NULL;
}

/* ---- CollectTrace ---- */

/* TraceProfile is a flags enum: "Cpu, Http" names several; kept as canonical names joined by ','.
 */
static void parse_profile(struct rules_ctx *c, const char *key, const char *v,
                          struct rules_action *a)
{
    char names[64] = "";
    unsigned seen = 0;
    const char *p = v;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
        char item[32];
        int idx = -1;
        if (len < sizeof(item)) {
            memcpy(item, p, len);
            item[len] = '\0';
            idx = rules__enum_index(item, profile_names, 5);
        }
        if (idx < 0) {
            rules__bad_value(c, key, v, "TraceProfile");
            return;
        }
        if (!(seen & (1u << idx))) {
            seen |= 1u << idx;
            size_t used = strlen(names);
            (void)snprintf(names + used, sizeof(names) - used, "%s%s", used ? "," : "",
                           profile_names[idx]);
        }
        if (comma == NULL) {
            break;
        }
        p = comma + 1;
    }
    a->profile = rules__arena_strdup(c->arena, names);
    c->oom |= a->profile == NULL;
}

/* A section's children as key/value pairs (Arguments, PayloadFilter). */
static const struct rules_kv *read_map(struct rules_ctx *c, const char *key, size_t *n)
{
    const char **names;
    struct rules_kv *m = rules__child_array(c, key, sizeof(*m), &names, n);
    for (size_t i = 0; i < *n; i++) {
        const char *v = rules__get(c, rules__key(c, key, names[i]));
        m[i] = (struct rules_kv){names[i], v != NULL ? v : ""};
    }
    return m;
}

static void parse_provider(struct rules_ctx *c, const char *section, struct rules_provider *p)
{
    p->name = rules__required(c, section, "Name");
    p->keywords = UINT64_MAX;
    p->level = 5;
    const char *key = rules__key(c, section, "Keywords");
    const char *v = rules__get(c, key);
    if (v != NULL && *v != '\0' && rules__parse_u64_keywords(v, &p->keywords) != 0) {
        rules__bad_value(c, key, v, "System.Int64");
    }
    key = rules__key(c, section, "EventLevel");
    v = rules__get(c, key);
    if (v != NULL && *v != '\0') {
        int idx = rules__enum_index(v, event_level_names, 6);
        int32_t num;
        if (idx < 0 && rules__parse_int32(v, &num) == 0 && num >= 0 && num <= 5) {
            idx = num;
        }
        if (idx < 0) {
            rules__bad_value(c, key, v, "EventLevel");
        }
        p->level = idx < 0 ? 5 : (uint32_t)idx;
    }
    p->args = read_map(c, rules__key(c, section, "Arguments"), &p->nargs);
}

static void parse_providers(struct rules_ctx *c, const char *key, struct rules_action *a)
{
    const char **idx;
    struct rules_provider *p = rules__child_array(c, key, sizeof(*p), &idx, &a->nproviders);
    for (size_t i = 0; i < a->nproviders; i++) {
        parse_provider(c, rules__key(c, key, idx[i]), &p[i]);
    }
    a->providers = p;
}

static void parse_stopping_event(struct rules_ctx *c, const char *key, struct rules_action *a)
{
    a->has_stopping_event = true;
    a->stop_provider = rules__required(c, key, "ProviderName");
    if (a->stop_provider == NULL) {
        a->stop_provider = "";
    }
    a->stop_event = rules__required(c, key, "EventName");
    a->stop_payload = read_map(c, rules__key(c, key, "PayloadFilter"), &a->nstop_payload);
}

static bool has_provider(const struct rules_action *a, const char *name)
{
    for (size_t i = 0; i < a->nproviders; i++) {
        if (a->providers[i].name != NULL && strcmp(a->providers[i].name, name) == 0) {
            return true;
        }
    }
    return false;
}

static void post_trace(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    const char *key = rules__key(c, settings, "Profile");
    const char *v = rules__get(c, key);
    if (v != NULL && *v != '\0') {
        parse_profile(c, key, v, a);
    }
    parse_providers(c, rules__key(c, settings, "Providers"), a);
    const char *stop = rules__key(c, settings, "StoppingEvent");
    if (rules__has_children(c, stop)) {
        parse_stopping_event(c, stop, a);
    }
    bool profile = v != NULL && *v != '\0';
    if (profile && a->has_stopping_event) {
        rules__error(c, settings,
                     "Both the Profile field and the StoppingEvent field cannot be specified.");
    }
    if (profile && a->nproviders > 0) {
        rules__error(c, settings,
                     "Both the Profile field and the Providers field cannot be specified.");
    } else if (!profile && a->nproviders == 0) {
        rules__error(c, settings, "The Profile field or the Providers field is required.");
    }
    a->ring = a->has_pre_trigger || a->has_ring_mb;
    if (a->ring && a->has_duration) {
        rules__error(c, settings,
                     "Both the Duration field and the PreTriggerSeconds or RingBufferSizeMB field "
                     "cannot be specified: a ring trace lasts PostTriggerSeconds after its "
                     "trigger.");
    }
    if (a->ring && a->has_stopping_event) {
        rules__error(c, settings,
                     "Both the StoppingEvent field and the PreTriggerSeconds or RingBufferSizeMB "
                     "field cannot be specified.");
    }
    if (!a->ring && a->has_post_trigger) {
        rules__error(c, rules__key(c, settings, "PostTriggerSeconds"),
                     "The PostTriggerSeconds field needs PreTriggerSeconds or RingBufferSizeMB.");
    }
    if (a->has_stopping_event && !has_provider(a, a->stop_provider)) {
        rules__error(c, stop,
                     "The StoppingEvent field specified the provider '%s' but it was not found in "
                     "the Providers field.",
                     a->stop_provider);
    }
}

/* ---- CollectLogs, CollectLiveMetrics ---- */

static void post_logs(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    const char *key = rules__key(c, settings, "FilterSpecs");
    const char **cats;
    struct rules_log_filter *f = rules__child_array(c, key, sizeof(*f), &cats, &a->nfilter_specs);
    for (size_t i = 0; i < a->nfilter_specs; i++) {
        const char *k = rules__key(c, key, cats[i]);
        const char *v = rules__get(c, k);
        f[i].category = cats[i];
        f[i].level = (v == NULL || *v == '\0') ? -1 : rules__enum_index(v, level_names, 7);
        if (v != NULL && *v != '\0' && f[i].level < 0) {
            rules__bad_value(c, k, v, "LogLevel");
        }
    }
    a->filter_specs = f;
}

/* Providers [{ProviderName, CounterNames}] or Meters [{MeterName, InstrumentNames}]. */
static const struct rules_metric_source *parse_sources(struct rules_ctx *c, const char *key,
                                                       const char *name_field,
                                                       const char *list_field, size_t *count)
{
    const char **idx;
    size_t n;
    struct rules_metric_source *s = rules__child_array(c, key, sizeof(*s), &idx, &n);
    for (size_t i = 0; i < n; i++) {
        const char *section = rules__key(c, key, idx[i]);
        s[i].name = rules__required(c, section, name_field);
        s[i].names = rules__string_list(c, rules__key(c, section, list_field), &s[i].nnames);
    }
    *count = n;
    return s;
}

static void post_live(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    a->metric_providers = parse_sources(c, rules__key(c, settings, "Providers"), "ProviderName",
                                        "CounterNames", &a->nmetric_providers);
    a->meters = parse_sources(c, rules__key(c, settings, "Meters"), "MeterName", "InstrumentNames",
                              &a->nmeters);
}

/* ---- CollectExceptions ---- */

/* Filters:<list>: entries {ExceptionType, TypeName, MethodName, ModuleName}. */
static const struct rules_exc_filter *parse_exc_list(struct rules_ctx *c, const char *key,
                                                     size_t *count)
{
    const char **idx;
    size_t n;
    struct rules_exc_filter *f = rules__child_array(c, key, sizeof(*f), &idx, &n);
    for (size_t i = 0; i < n; i++) {
        const char *section = rules__key(c, key, idx[i]);
        f[i].exception_type = rules__get(c, rules__key(c, section, "ExceptionType"));
        f[i].type_name = rules__get(c, rules__key(c, section, "TypeName"));
        f[i].method_name = rules__get(c, rules__key(c, section, "MethodName"));
        f[i].module_name = rules__get(c, rules__key(c, section, "ModuleName"));
    }
    *count = n;
    return f;
}

static void post_exceptions(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    const char *filters = rules__key(c, settings, "Filters");
    a->exc_include = parse_exc_list(c, rules__key(c, filters, "Include"), &a->nexc_include);
    a->exc_exclude = parse_exc_list(c, rules__key(c, filters, "Exclude"), &a->nexc_exclude);
}

/* ---- LoadProfiler ---- */

/* Guid.Parse's "D", "B" and "N" forms; *zero tells the empty GUID. */
static bool parse_guid(const char *s, bool *zero)
{
    size_t len = strlen(s);
    if (len == 38 && s[0] == '{' && s[37] == '}') {
        s++;
        len = 36;
    }
    size_t hex = 0;
    *zero = true;
    for (size_t i = 0; i < len; i++) {
        bool dash = len == 36 && (i == 8 || i == 13 || i == 18 || i == 23);
        char ch = ascii_lower(s[i]);
        if (dash ? ch != '-' : hex_value(ch) < 0) {
            return false;
        }
        hex += !dash;
        *zero &= dash || ch == '0';
    }
    return hex == 32 && (len == 32 || len == 36);
}

static void post_profiler(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    bool zero = false;
    if (a->clsid != NULL && !parse_guid(a->clsid, &zero)) {
        rules__bad_value(c, rules__key(c, settings, "Clsid"), a->clsid, "System.Guid");
    } else if (a->clsid != NULL && zero) {
        rules__error(c, rules__key(c, settings, "Clsid"),
                     "The guid Clsid is required to be set and can not be empty.");
    }
    rules__error(c, rules__key(c, a->key, "Type"),
                 "The 'LoadProfiler' action is not supported by dotmon (it needs to load a "
                 "profiler into the target process).");
}

/* ---- the action ---- */

static void action_defaults(struct rules_action *a)
{
    a->dump_type = RULES_DUMP_WITH_HEAP;
    a->request_rundown = true;
    a->buffer_mb = 256;
    a->ring_mb = 64;
    a->post_trigger_s = 5;
    a->duration_ticks = 30 * RULES_TICKS_PER_SECOND;
    a->default_level = RULES_LOG_WARNING;
    a->use_app_filters = true;
    a->format = RULES_LOGS_PLAIN_TEXT;
    a->include_default_providers = true;
}

static void check_egress(struct rules_ctx *c, const char *settings, struct rules_action *a)
{
    const char *key = rules__key(c, settings, "Egress");
    if (a->egress == NULL) {
        a->egress = c->def.egress;
    }
    if (a->egress == NULL) {
        rules__error(c, key,
                     "An egress provider must be specified if there is no default egress "
                     "provider.");
        return;
    }
    if (c->egress == NULL) {
        return;
    }
    for (size_t i = 0; i < c->negress; i++) {
        if (ascii_ieq(c->egress[i], a->egress)) {
            return;
        }
    }
    /* Not a start-up error: dotnet-monitor validates a rule's options only when the rule runs
     * (CollectionRuleContainer), so the action fails then (artifact.c names the provider). */
    rules__warning(c, key, "Egress provider '%s' does not exist.", a->egress);
}

static const struct action_desc *find_type(struct rules_ctx *c, const char *key, const char *type)
{
    const struct action_desc *d =
        rules__find_row(action_types, sizeof(action_types) / sizeof(action_types[0]),
                        sizeof(action_types[0]), type);
    if (d != NULL) {
        return d;
    }
    for (size_t k = 0; k < sizeof(unsupported_types) / sizeof(unsupported_types[0]); k++) {
        if (unsupported_types[k] != NULL && ascii_ieq(type, unsupported_types[k])) {
            rules__error(c, key,
                         "The '%s' action is not supported by dotmon (it needs dotnet-monitor's "
                         "in-process features).",
                         unsupported_types[k]);
            return NULL;
        }
    }
    rules__error(c, key, "'%s' is not a known action type.", type);
    return NULL;
}

void rules__parse_action(struct rules_ctx *c, const char *section, struct rules_action *a)
{
    memset(a, 0, sizeof(*a));
    a->key = section;
    rules__read_fields(c, section, RULES_ROWS(f_action), a);
    const char *key = rules__key(c, section, "Type");
    const char *v = rules__get(c, key);
    if (v == NULL || *v == '\0') {
        rules__error(c, key, "The Type field is required.");
        return;
    }
    const struct action_desc *d = find_type(c, key, v);
    if (d == NULL) {
        return;
    }
    a->type = (enum rules_action_type)d->row.type;
    a->type_name = d->row.name;
    action_defaults(a);
    const char *settings = rules__key(c, section, "Settings");
    rules__read_fields(c, settings, d->row.fields, d->row.nfields, a);
    if (d->post != NULL) {
        d->post(c, settings, a);
    }
    if (d->egress) {
        check_egress(c, settings, a);
    }
}

/* ---- $(Actions.<name>.<output>) in Execute.Arguments ---- */

bool rules__at_actions_prefix(const char *s)
{
    size_t plen = strlen(RULES_ACTIONS_PREFIX);
    return ascii_ieq_n(s, strnlen(s, plen), RULES_ACTIONS_PREFIX);
}

/* strstr ignoring ASCII case for the prefix. */
static const char *find_prefix(const char *s)
{
    for (; *s != '\0'; s++) {
        if (rules__at_actions_prefix(s)) {
            return s;
        }
    }
    return NULL;
}

static bool add_dep(struct rules_ctx *c, struct rules_action *a, size_t dep)
{
    for (size_t i = 0; i < a->ndeps; i++) {
        if (a->deps[i] == dep) {
            return true;
        }
    }
    size_t *d = rules__arena_alloc(c->arena, (a->ndeps + 1) * sizeof(*d));
    if (d == NULL) {
        c->oom = true;
        return false;
    }
    if (a->ndeps > 0) {
        memcpy(d, a->deps, a->ndeps * sizeof(*d));
    }
    d[a->ndeps++] = dep;
    a->deps = d;
    return true;
}

/* One reference "<name>.<output>" (ref[0..len)) of action `index`. */
static void check_reference(struct rules_ctx *c, const char *key, struct rules_action *actions,
                            size_t index, const char *ref, size_t len)
{
    const char *dot = memchr(ref, '.', len);
    const char *dot2 = dot != NULL ? memchr(dot + 1, '.', len - (size_t)(dot + 1 - ref)) : NULL;
    if (dot == NULL || dot2 != NULL || dot == ref || dot + 1 == ref + len) {
        rules__error(c, key, "Invalid action reference '%.*s'.", (int)len, ref);
        return;
    }
    size_t nlen = (size_t)(dot - ref);
    for (size_t k = 0; k < index; k++) {
        const struct rules_action *dep = &actions[k];
        if (dep->name == NULL || strlen(dep->name) != nlen || memcmp(dep->name, ref, nlen) != 0) {
            continue;
        }
        if (dep->type_name == NULL) {
            return; /* its type is already reported as unknown */
        }
        const char *out = rules__action_output(dep->type);
        size_t olen = len - nlen - 1;
        if (out == NULL || strlen(out) != olen || memcmp(out, dot + 1, olen) != 0) {
            rules__error(c, key,
                         "Invalid result reference '$(Actions.%.*s)': a %s action has %s%s%s.",
                         (int)len, ref, dep->type_name, out ? "only the output '" : "no outputs",
                         out ? out : "", out ? "'" : "");
            return;
        }
        (void)add_dep(c, &actions[index], k);
        return;
    }
    rules__error(c, key, "Invalid action reference '%.*s': no earlier action is named '%.*s'.",
                 (int)len, ref, (int)nlen, ref);
}

static void scan_arguments(struct rules_ctx *c, struct rules_action *actions, size_t index)
{
    struct rules_action *a = &actions[index];
    const char *key = rules__key(c, a->key, "Settings:Arguments");
    const char *p = a->arguments;
    while ((p = find_prefix(p)) != NULL) {
        const char *ref = p + strlen(RULES_ACTIONS_PREFIX);
        const char *end = strchr(ref, ')');
        if (end == NULL) {
            rules__error(c, key, "Action '%s' with setting 'Arguments' has invalid tokens.",
                         a->name != NULL ? a->name : a->key);
            return;
        }
        check_reference(c, key, actions, index, ref, (size_t)(end - ref));
        p = end;
    }
}

void rules__resolve_references(struct rules_ctx *c, struct rules_action *a, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < j && a[j].name != NULL; i++) {
            if (a[i].name != NULL && strcmp(a[i].name, a[j].name) == 0) {
                rules__error(c, rules__key(c, a[j].key, "Name"), "Duplicate action name '%s'.",
                             a[j].name);
                break;
            }
        }
        if (a[j].type_name != NULL && a[j].type == RULES_ACTION_EXECUTE && a[j].arguments != NULL) {
            scan_arguments(c, a, j);
        }
    }
}
