/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: collection-rule configuration (rules/rules.h). The input is "key=value"
 * lines (split at '\n', the first '=' splitting), the flat configuration the agent hands over.
 * Every problem must come out as a "<key>: <message>" line; every valid rule is then applied to a
 * process and run once: its trigger's session, an engine fed a few samples and HTTP events made
 * from the input, a firing, the action steps (with outputs, every other action failing), and
 * both /collectionrules documents.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "err.h"
#include "rules.h"

#define MAX_ENTRIES 512

static size_t split(char *text, struct rules_kv *kv)
{
    size_t n = 0;
    for (char *line = text; line != NULL && n < MAX_ENTRIES;) {
        char *nl = strchr(line, '\n');
        if (nl != NULL) {
            *nl = '\0';
        }
        char *eq = strchr(line, '=');
        if (eq != NULL) {
            *eq = '\0';
            kv[n++] = (struct rules_kv){line, eq + 1};
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return n;
}

static void check_json(struct cJSON *j)
{
    CHECK(j != NULL);
    char *s = cJSON_PrintUnformatted(j);
    CHECK(s != NULL);
    free(s);
    cJSON_Delete(j);
}

static void drive_trigger(const struct rules_trigger *t, uint64_t h)
{
    struct rules_session s;
    struct rules_session_options o = {.counter_interval_s = 1 + (double)(h % 10),
                                      .meter_session_id = "SHARED"};
    CHECK(rules_trigger_session(t, &o, &s) ==
          (t->type == RULES_TRIGGER_STARTUP ? AGENT_E_INVAL : 0));
    if (t->type == RULES_TRIGGER_STARTUP) {
        return;
    }
    check_json(rules_session_json(&s));
    struct rules_engine *e = NULL;
    CHECK(rules_engine_new(t, o.counter_interval_s, &e) == 0);
    struct ev_metric_sample m = {.provider = t->provider ? t->provider : "p",
                                 .name = t->name ? t->name : "n",
                                 .is_meter = t->type == RULES_TRIGGER_EVENT_METER,
                                 .interval_sec = 1};
    const char *paths[] = {"/", "/api/x", "/api/a/b.js", ""};
    for (int k = 0; k < 16; k++) {
        m.value = (double)((h >> k) % 300);
        m.timestamp_ms = k * 1000;
        (void)rules_engine_on_metric(e, &m);
        struct rules_request_event ev = {(enum rules_request_kind)((h >> (2 * k)) % 3),
                                         k * 3000,
                                         k % 2 ? "a" : "b",
                                         paths[k % 4],
                                         (int)(100 + (h >> k) % 500),
                                         (int64_t)((h >> k) % 100) * 1000000};
        (void)rules_engine_on_request(e, &ev);
    }
    rules_engine_free(e);
}

static void drive_rule(const struct rules_rule *r, uint64_t h)
{
    static const struct rules_process p = {.pid = 1, .name = "app", .command_line = "app --x"};
    (void)rules_filters_match(r, &p);
    drive_trigger(&r->trigger, h);
    for (size_t k = 0; k < r->nactions; k++) {
        struct cJSON *j = rules_trace_action_json(&r->actions[k]);
        cJSON_Delete(j);
    }
    struct rules_inst *i = NULL;
    CHECK(rules_inst_new(r, &p, 5, 0, &i) == 0);
    (void)rules_inst_fire(i, 10);
    struct rules_step st;
    static const struct rules_kv out[] = {{"EgressPath", "/x"}, {"ExitCode", "0"}, {"Value", "v"}};
    for (int guard = 0; guard < 1000 && rules_inst_next_step(i, &st) == 1; guard++) {
        CHECK(st.index < r->nactions);
        CHECK(rules_inst_action_done(i, st.index, (h >> (st.index % 64)) & 1, out, 3, 20) == 0);
    }
    rules_inst_tick(i, (int64_t)(h % 100000000));
    check_json(rules_describe_detailed(i, 30));
    const struct rules_inst *one = i;
    check_json(rules_describe(&one, 1, 30));
    rules_inst_free(i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    struct rules_kv *kv = malloc(MAX_ENTRIES * sizeof(*kv));
    CHECK(text != NULL && kv != NULL);
    memcpy(text, data, size);
    text[size] = '\0';
    size_t n = split(text, kv);
    static const char *const egress[] = {"artifacts", "TmpDir"};
    struct rules_config *c = NULL;
    CHECK(rules_config_load(kv, n, fuzz_fnv1a(data, size) & 1 ? egress : NULL, 2, &c) == 0);
    /* The same filter reader on a list outside the rules (DefaultProcess:Filters). */
    struct rules_filter_list *l = NULL;
    CHECK(rules_filter_list_load(kv, n, "DefaultProcess:Filters", &l) == 0);
    static const struct rules_process lp = {.pid = 1, .name = "app", .entrypoint_assembly = "app"};
    (void)rules_filter_list_match(l->filters, l->nfilters, &lp);
    for (size_t e = 0; e < l->nerrors; e++) {
        CHECK(strncmp(l->errors[e], "DefaultProcess:Filters", 22) == 0);
    }
    rules_filter_list_free(l);
    free(text); /* the configuration keeps its own copies */
    free(kv);
    for (size_t e = 0; e < c->nerrors; e++) {
        CHECK(strstr(c->errors[e], ": ") != NULL);
    }
    uint64_t h = fuzz_fnv1a(data, size);
    for (size_t r = 0; r < c->nrules; r++) {
        CHECK(rules_config_find(c, c->rules[r].name) != NULL);
        if (c->rules[r].valid) {
            drive_rule(&c->rules[r], h);
        }
    }
    rules_config_free(c);
    return 0;
}
