/* SPDX-License-Identifier: MIT */
/*
 * The collection rules of a configuration (docs/rules.md; dotnet-monitor
 * collection-rule-configuration.md, templates.md): CollectionRuleDefaults first, then each rule
 * of CollectionRules:<name> with its Filters, Trigger, Actions and Limits, any of which may be
 * the name of a Templates:CollectionRule{Filters,Triggers,Actions,Limits}:<name> section.
 */
#include "rules.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "num.h"
#include "rules_internal.h"

#define DOFF(f) offsetof(struct rules_defaults, f)

static const struct rules_range range_count = {
    .min = 1, .max = INT32_MAX, .text_min = "1", .text_max = "2147483647"};
static const struct rules_range range_rule_duration = {
    .min = RULES_TICKS_PER_SECOND,
    .max = 365LL * 86400 * RULES_TICKS_PER_SECOND,
    .text_min = "00:00:01",
    .text_max = "365.00:00:00",
};

static const struct rules_field f_default_triggers[] = {
    {"SlidingWindowDuration", RULES_F_SPAN, false, DOFF(window_ticks), DOFF(has_window),
     &rules__range_window, NULL, 0},
    {"RequestCount", RULES_F_INT, false, DOFF(request_count), DOFF(has_request_count), &range_count,
     NULL, 0},
    {"ResponseCount", RULES_F_INT, false, DOFF(response_count), DOFF(has_response_count),
     &range_count, NULL, 0},
};

/* Limits share their rows between CollectionRuleDefaults:Limits and a rule's Limits. */
static const struct rules_field f_limits[] = {
    {"ActionCount", RULES_F_INT, false, DOFF(action_count), DOFF(has_action_count), NULL, NULL, 0},
    {"ActionCountSlidingWindowDuration", RULES_F_SPAN, false, DOFF(action_window_ticks),
     DOFF(has_action_window), &rules__range_window, NULL, 0},
    {"RuleDuration", RULES_F_SPAN, false, DOFF(rule_duration_ticks), DOFF(has_rule_duration),
     &range_rule_duration, NULL, 0},
};

static void parse_defaults(struct rules_ctx *c)
{
    const char *egress = rules__get(c, "CollectionRuleDefaults:Actions:Egress");
    c->def.egress = (egress != NULL && *egress != '\0') ? egress : NULL;
    rules__read_fields(c, "CollectionRuleDefaults:Triggers", RULES_ROWS(f_default_triggers),
                       &c->def);
    rules__read_fields(c, "CollectionRuleDefaults:Limits", RULES_ROWS(f_limits), &c->def);
}

static void parse_limits(struct rules_ctx *c, const char *prefix, struct rules_limits *out)
{
    struct rules_defaults in;
    memset(&in, 0, sizeof(in));
    bool missing;
    const char *section =
        rules__section(c, rules__key(c, prefix, "Limits"), "CollectionRuleLimits", &missing);
    if (section != NULL) {
        rules__read_fields(c, section, RULES_ROWS(f_limits), &in);
    }
    const struct rules_defaults *d = &c->def;
    out->action_count = in.has_action_count   ? in.action_count
                        : d->has_action_count ? d->action_count
                                              : 5;
    out->window_ticks = in.has_action_window   ? in.action_window_ticks
                        : d->has_action_window ? d->action_window_ticks
                                               : 0;
    out->duration_ticks = in.has_rule_duration   ? in.rule_duration_ticks
                          : d->has_rule_duration ? d->rule_duration_ticks
                                                 : 0;
}

/* ---- filters ---- */

static const char *const filter_keys[] = {"ProcessId", "ProcessName", "CommandLine",
                                          "ManagedEntryPointAssemblyName"};

static void add_filter(struct rules_ctx *c, const char *key, struct rules_filter *f,
                       enum rules_filter_key k, const char *value, bool contains)
{
    f->key = k;
    f->value = value;
    f->contains = contains;
    uint64_t pid;
    if (k == RULES_FILTER_PROCESS_ID) {
        if (num_parse_u64_str(value, 10, UINT32_MAX, &pid) != 0) {
            rules__error(c, key, "The value '%s' is not a valid integer.", value);
            pid = 0;
        }
        f->pid = (uint32_t)pid;
    }
}

/* One ProcessFilterDescriptor: Key/Value/MatchType, or the short forms ProcessId, ProcessName,
 * CommandLine (each one a filter with the descriptor's MatchType). Returns the filters added. */
static size_t parse_filter(struct rules_ctx *c, const char *section, struct rules_filter *out)
{
    static const char *const match_names[] = {"Exact", "Contains"};
    const char *key = rules__key(c, section, "MatchType");
    const char *mt = rules__get(c, key);
    int match = (mt == NULL || *mt == '\0') ? 0 : rules__enum_index(mt, match_names, 2);
    if (match < 0) {
        rules__bad_value(c, key, mt, "ProcessFilterType");
        match = 0;
    }
    size_t n = 0;
    for (int k = RULES_FILTER_PROCESS_ID; k <= RULES_FILTER_COMMAND_LINE; k++) {
        const char *skey = rules__key(c, section, filter_keys[k]);
        const char *v = rules__get(c, skey);
        if (v != NULL && *v != '\0') {
            add_filter(c, skey, &out[n++], (enum rules_filter_key)k, v, match == 1);
        }
    }
    if (n > 0) {
        return n;
    }
    key = rules__key(c, section, "Key");
    const char *k = rules__get(c, key);
    int fk =
        (k == NULL || *k == '\0') ? RULES_FILTER_PROCESS_ID : rules__enum_index(k, filter_keys, 4);
    if (fk < 0) {
        rules__bad_value(c, key, k, "ProcessFilterKey");
        return 0;
    }
    const char *v = rules__get(c, rules__key(c, section, "Value"));
    if (v == NULL || *v == '\0') {
        rules__error(c, section, "A value is required for the process filter.");
        return 0;
    }
    add_filter(c, rules__key(c, section, "Value"), &out[0], (enum rules_filter_key)fk, v,
               match == 1);
    return 1;
}

static void parse_filters(struct rules_ctx *c, const char *prefix, struct rules_rule *r)
{
    const char *key = rules__key(c, prefix, "Filters");
    const char **idx;
    size_t n, count = 0;
    /* A descriptor gives up to three filters (the short forms). */
    struct rules_filter *f = rules__child_array(c, key, 3 * sizeof(*f), &idx, &n);
    for (size_t i = 0; i < n; i++) {
        bool missing;
        const char *section =
            rules__section(c, rules__key(c, key, idx[i]), "CollectionRuleFilters", &missing);
        if (section != NULL) {
            count += parse_filter(c, section, f + count);
        }
    }
    r->filters = f;
    r->nfilters = count;
}

/* ---- trigger, actions, the rule ---- */

static void parse_actions(struct rules_ctx *c, const char *prefix, struct rules_rule *r)
{
    const char *key = rules__key(c, prefix, "Actions");
    const char **idx;
    size_t n;
    struct rules_action *a = rules__child_array(c, key, sizeof(*a), &idx, &n);
    for (size_t i = 0; i < n; i++) {
        bool missing;
        const char *section =
            rules__section(c, rules__key(c, key, idx[i]), "CollectionRuleActions", &missing);
        if (section != NULL) {
            rules__parse_action(c, section, &a[i]);
        } else {
            a[i].key = rules__key(c, key, idx[i]);
        }
    }
    rules__resolve_references(c, a, n);
    r->actions = a;
    r->nactions = n;
}

static void parse_rule(struct rules_ctx *c, const char *name, struct rules_rule *r)
{
    size_t before = c->nerrors;
    const char *prefix = rules__key(c, "CollectionRules", name);
    r->name = name;
    parse_filters(c, prefix, r);
    bool missing;
    const char *tkey = rules__key(c, prefix, "Trigger");
    const char *section = rules__section(c, tkey, "CollectionRuleTriggers", &missing);
    if (section != NULL) {
        rules__parse_trigger(c, section, &r->trigger);
    } else if (missing) {
        rules__error(c, tkey, "The Trigger field is required.");
    }
    parse_actions(c, prefix, r);
    for (size_t i = 0; r->trigger.type_name != NULL && r->trigger.type == RULES_TRIGGER_STARTUP &&
                       i < r->nactions;
         i++) {
        if (r->actions[i].ring) {
            rules__error(
                c, rules__key(c, r->actions[i].key, "Settings"),
                "A CollectTrace with PreTriggerSeconds or RingBufferSizeMB needs a trigger "
                "other than Startup (the ring keeps the time before the trigger).");
        }
    }
    parse_limits(c, prefix, &r->limits);
    r->valid = c->nerrors == before;
}

void rules_config_free(struct rules_config *c)
{
    if (c == NULL) {
        return;
    }
    rules__arena_free(c->arena);
    free(c);
}

/* A malloc'ed list of n lines as an arena array (NULL when n is 0 or on ENOMEM); frees v. */
static const char *const *keep_lines(struct rules_ctx *c, const char **v, size_t n)
{
    const char **kept = NULL;
    if (!c->oom && n > 0) {
        kept = rules__arena_alloc(c->arena, n * sizeof(*kept));
        if (kept != NULL) {
            memcpy(kept, v, n * sizeof(*kept));
        }
    }
    free(v);
    return kept;
}

static int finish(struct rules_ctx *c, struct rules_config *cfg)
{
    const char *const *errors = keep_lines(c, c->errors, c->nerrors);
    const char *const *warnings = keep_lines(c, c->warnings, c->nwarnings);
    if (c->oom || rules__arena_failed(c->arena) || (c->nerrors > 0 && errors == NULL) ||
        (c->nwarnings > 0 && warnings == NULL)) {
        return -ENOMEM;
    }
    cfg->errors = errors;
    cfg->nerrors = c->nerrors;
    cfg->warnings = warnings;
    cfg->nwarnings = c->nwarnings;
    return 0;
}

/* The entries the rules read, copied: the configuration keeps pointers to values. */
static const struct rules_kv *copy_entries(struct rules_arena *a, const struct rules_kv *kv,
                                           size_t n, size_t *count)
{
    static const char *const roots[] = {"CollectionRules", "CollectionRuleDefaults", "Templates"};
    struct rules_kv *v = rules__arena_alloc(a, (n ? n : 1) * sizeof(*v));
    *count = 0;
    for (size_t i = 0; v != NULL && i < n; i++) {
        const char *k = kv[i].key;
        bool ours = false;
        for (size_t r = 0; k != NULL && r < sizeof(roots) / sizeof(roots[0]); r++) {
            size_t len = strlen(roots[r]);
            ours |= ascii_ieq_n(k, strnlen(k, len), roots[r]) && (k[len] == ':' || k[len] == '\0');
        }
        if (ours) {
            v[*count].key = rules__arena_strdup(a, k);
            v[*count].value = rules__arena_strdup(a, kv[i].value != NULL ? kv[i].value : "");
            (*count)++;
        }
    }
    return v;
}

int rules_config_load(const struct rules_kv *kv, size_t n, const char *const *egress,
                      size_t negress, struct rules_config **out)
{
    *out = NULL;
    struct rules_config *cfg = calloc(1, sizeof(*cfg));
    struct rules_arena *arena = rules__arena_new();
    if (cfg == NULL || arena == NULL) {
        free(cfg);
        rules__arena_free(arena);
        return -ENOMEM;
    }
    cfg->arena = arena;
    struct rules_ctx c = {.arena = arena, .egress = egress, .negress = negress};
    c.kv = copy_entries(arena, kv, n, &c.n);
    c.oom |= c.kv == NULL || rules__arena_failed(arena);
    parse_defaults(&c);
    size_t nrules;
    const char **names = rules__children(&c, "CollectionRules", &nrules);
    struct rules_rule *rules = NULL;
    if (nrules > 0) {
        rules = rules__arena_alloc(arena, nrules * sizeof(*rules));
        c.oom |= rules == NULL;
    }
    for (size_t i = 0; i < nrules && rules != NULL; i++) {
        parse_rule(&c, names[i], &rules[i]);
    }
    cfg->rules = rules;
    cfg->nrules = rules != NULL ? nrules : 0;
    int rc = finish(&c, cfg);
    if (rc != 0) {
        rules_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

const struct rules_rule *rules_config_find(const struct rules_config *c, const char *name)
{
    for (size_t i = 0; i < c->nrules; i++) {
        if (ascii_ieq(c->rules[i].name, name)) {
            return &c->rules[i];
        }
    }
    return NULL;
}

/* ---- matching a process ---- */

/* ASCII case-insensitive substring search. */
static bool contains_ci(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    for (; *hay != '\0'; hay++) {
        if (ascii_ieq_n(hay, strnlen(hay, n), needle)) {
            return true;
        }
    }
    return n == 0;
}

static bool filter_match(const struct rules_filter *f, const struct rules_process *p)
{
    const char *s;
    switch (f->key) {
    case RULES_FILTER_PROCESS_ID:
        return p->pid == f->pid;
    case RULES_FILTER_PROCESS_NAME:
        s = p->name;
        break;
    case RULES_FILTER_COMMAND_LINE:
        s = p->command_line;
        break;
    default:
        s = p->entrypoint_assembly;
        break;
    }
    if (s == NULL) {
        s = "";
    }
    return f->contains ? contains_ci(s, f->value) : ascii_ieq(s, f->value);
}

bool rules_filters_match(const struct rules_rule *r, const struct rules_process *p)
{
    for (size_t i = 0; i < r->nfilters; i++) {
        if (!filter_match(&r->filters[i], p)) {
            return false;
        }
    }
    return true;
}
