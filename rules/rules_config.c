/* SPDX-License-Identifier: MIT */
/*
 * The collection rules of a configuration (docs/rules.md; dotnet-monitor
 * collection-rule-configuration.md, templates.md): CollectionRuleDefaults first, then each rule
 * of CollectionRules:<name> with its Filters, Trigger, Actions and Limits, any of which may be
 * the name of a Templates:CollectionRule{Filters,Triggers,Actions,Limits}:<name> section.
 */
#include "rules.h"

#include <ctype.h>
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

/* By enum rules_filter_key: dotnet-monitor's four, then dotmon's (issue 34). */
static const char *const filter_keys[RULES_FILTER_NKEYS] = {
    "ProcessId", "ProcessName",  "CommandLine", "ManagedEntryPointAssemblyName",
    "PodName",   "PodNamespace", "ContainerId", "ContainerName"};

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

/* True when s is NULL or only blanks (.NET's string.IsNullOrWhiteSpace, ASCII). */
static bool blank(const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        if (!isspace((unsigned char)*s)) {
            return false;
        }
    }
    return true;
}

/*
 * One ProcessFilterDescriptor (docs/api.md §2), one filter, as dotnet-monitor reads it: the first
 * short form given (ProcessId, ProcessName, CommandLine, ManagedEntryPointAssemblyName, then
 * dotmon's PodName, PodNamespace, ContainerId, ContainerName, in that order; blank counts as not
 * given), else Key (default ProcessId) and Value. ProcessId always
 * compares exactly; the others take MatchType (default Exact). False when it gives no filter.
 */
static bool parse_filter(struct rules_ctx *c, const char *section, struct rules_filter *out)
{
    static const char *const match_names[] = {"Exact", "Contains"};
    const char *key = rules__key(c, section, "MatchType");
    const char *mt = rules__get(c, key);
    int match = (mt == NULL || *mt == '\0') ? 0 : rules__enum_index(mt, match_names, 2);
    if (match < 0) {
        rules__bad_value(c, key, mt, "ProcessFilterType");
        match = 0;
    }
    for (int k = RULES_FILTER_PROCESS_ID; k < RULES_FILTER_NKEYS; k++) {
        const char *skey = rules__key(c, section, filter_keys[k]);
        const char *v = rules__get(c, skey);
        if (!blank(v)) {
            add_filter(c, skey, out, (enum rules_filter_key)k, v, match == 1);
            return true;
        }
    }
    key = rules__key(c, section, "Key");
    const char *k = rules__get(c, key);
    int fk = (k == NULL || *k == '\0') ? RULES_FILTER_PROCESS_ID
                                       : rules__enum_index(k, filter_keys, RULES_FILTER_NKEYS);
    if (fk < 0) {
        rules__bad_value(c, key, k, "ProcessFilterKey");
        return false;
    }
    const char *v = rules__get(c, rules__key(c, section, "Value"));
    if (blank(v)) {
        rules__error(c, section, "A value is required for the process filter.");
        return false;
    }
    add_filter(c, rules__key(c, section, "Value"), out, (enum rules_filter_key)fk, v, match == 1);
    return true;
}

/*
 * The list of descriptors below key ("<rule>:Filters", "DefaultProcess:Filters"); with templates,
 * an element may name a Templates:CollectionRuleFilters section instead.
 */
static void parse_filter_list(struct rules_ctx *c, const char *key, bool templates,
                              const struct rules_filter **out, size_t *nout)
{
    const char **idx;
    size_t n, count = 0;
    struct rules_filter *f = rules__child_array(c, key, sizeof(*f), &idx, &n);
    for (size_t i = 0; i < n; i++) {
        bool missing;
        const char *item = rules__key(c, key, idx[i]);
        const char *section = item;
        if (templates) {
            section = rules__section(c, item, "CollectionRuleFilters", &missing);
        } else if (!rules__has_children(c, item)) {
            rules__error(c, item, "A value is required for the process filter.");
            section = NULL;
        }
        if (section != NULL && parse_filter(c, section, f + count)) {
            count++;
        }
    }
    *out = f;
    *nout = count;
}

static void parse_filters(struct rules_ctx *c, const char *prefix, struct rules_rule *r)
{
    parse_filter_list(c, rules__key(c, prefix, "Filters"), true, &r->filters, &r->nfilters);
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

/*
 * Ends a load: the error lines into the arena (*out, *nout), and the warnings (*wout, *nwout;
 * both NULL where the caller keeps none); 0 or -ENOMEM.
 */
static int finish(struct rules_ctx *c, const char *const **out, size_t *nout,
                  const char *const **wout, size_t *nwout)
{
    const char *const *errors = keep_lines(c, c->errors, c->nerrors);
    const char *const *warnings = keep_lines(c, c->warnings, c->nwarnings);
    if (c->oom || rules__arena_failed(c->arena) || (c->nerrors > 0 && errors == NULL) ||
        (c->nwarnings > 0 && warnings == NULL)) {
        return -ENOMEM;
    }
    *out = errors;
    *nout = c->nerrors;
    if (wout != NULL) {
        *wout = warnings;
        *nwout = c->nwarnings;
    }
    return 0;
}

/* The entries below roots[0..nroots), copied: the configuration keeps pointers to values. */
static const struct rules_kv *copy_entries(struct rules_arena *a, const struct rules_kv *kv,
                                           size_t n, const char *const *roots, size_t nroots,
                                           size_t *count)
{
    struct rules_kv *v = rules__arena_alloc(a, (n ? n : 1) * sizeof(*v));
    *count = 0;
    for (size_t i = 0; v != NULL && i < n; i++) {
        const char *k = kv[i].key;
        bool ours = false;
        for (size_t r = 0; k != NULL && r < nroots; r++) {
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
    static const char *const roots[] = {"CollectionRules", "CollectionRuleDefaults", "Templates"};
    struct rules_ctx c = {.arena = arena, .egress = egress, .negress = negress};
    c.kv = copy_entries(arena, kv, n, roots, sizeof(roots) / sizeof(roots[0]), &c.n);
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
    int rc = finish(&c, &cfg->errors, &cfg->nerrors, &cfg->warnings, &cfg->nwarnings);
    if (rc != 0) {
        rules_config_free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

int rules_filter_list_load(const struct rules_kv *kv, size_t n, const char *key,
                           struct rules_filter_list **out)
{
    *out = NULL;
    struct rules_filter_list *l = calloc(1, sizeof(*l));
    struct rules_arena *arena = rules__arena_new();
    if (l == NULL || arena == NULL) {
        free(l);
        rules__arena_free(arena);
        return -ENOMEM;
    }
    l->arena = arena;
    struct rules_ctx c = {.arena = arena};
    c.kv = copy_entries(arena, kv, n, &key, 1, &c.n);
    c.oom |= c.kv == NULL || rules__arena_failed(arena);
    parse_filter_list(&c, key, false, &l->filters, &l->nfilters);
    int rc = finish(&c, &l->errors, &l->nerrors, NULL, NULL);
    if (rc != 0) {
        rules_filter_list_free(l);
        return rc;
    }
    *out = l;
    return 0;
}

void rules_filter_list_free(struct rules_filter_list *l)
{
    if (l == NULL) {
        return;
    }
    rules__arena_free(l->arena);
    free(l);
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
    case RULES_FILTER_POD_NAME:
        s = p->pod_name;
        break;
    case RULES_FILTER_POD_NAMESPACE:
        s = p->pod_namespace;
        break;
    case RULES_FILTER_CONTAINER_ID:
        s = p->container_id;
        break;
    case RULES_FILTER_CONTAINER_NAME:
        s = p->container_name;
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

bool rules_filter_list_match(const struct rules_filter *f, size_t n, const struct rules_process *p)
{
    for (size_t i = 0; i < n; i++) {
        if (!filter_match(&f[i], p)) {
            return false;
        }
    }
    return true;
}

bool rules_filters_match(const struct rules_rule *r, const struct rules_process *p)
{
    return rules_filter_list_match(r->filters, r->nfilters, p);
}
