/* SPDX-License-Identifier: MIT */
/*
 * A collection rule applied to one process (docs/rules.md §1, §6; dotnet-monitor
 * CollectionRulePipeline.cs, CollectionRulePipelineState.cs, ActionListExecutor.cs): the state
 * (Running, ActionExecuting, Throttled, Finished) changed in one checked setter, the action count
 * limits, and the action list as steps for the agent with the tokens substituted.
 */
#include "rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "buf.h"
#include "err.h"
#include "rules_internal.h"

/* dotnet-monitor's state reasons (Microsoft.Diagnostics.Monitoring.WebApi Strings.resx). */
const char rules__reason_running[] =
    "This collection rule is active and waiting for its triggering conditions to be satisfied.";
static const char reason_executing[] = "This collection rule has had its triggering conditions "
                                       "satisfied and is currently executing its action list.";
const char rules__reason_throttled[] =
    "This collection rule is temporarily throttled because the ActionCountLimit has been reached "
    "within the ActionCountSlidingWindowDuration.";
static const char reason_action_count[] =
    "The collection rule will no longer trigger because the ActionCount was reached.";
static const char reason_rule_duration[] =
    "The collection rule will no longer trigger because the RuleDuration limit was reached.";
static const char reason_startup[] =
    "The collection rule will no longer trigger because the Startup trigger only executes once.";

const char *rules_state_name(enum rules_state s)
{
    static const char *const names[] = {"Running", "ActionExecuting", "Throttled", "Finished"};
    return (unsigned)s < 4 ? names[s] : "Finished";
}

/* Every legal transition (docs/style.md §12: one table, abort on anything else). */
static const bool transitions[4][4] = {
    [RULES_STATE_RUNNING] = {[RULES_STATE_ACTION_EXECUTING] = true,
                             [RULES_STATE_THROTTLED] = true,
                             [RULES_STATE_FINISHED] = true},
    [RULES_STATE_ACTION_EXECUTING] = {[RULES_STATE_RUNNING] = true, [RULES_STATE_FINISHED] = true},
    [RULES_STATE_THROTTLED] = {[RULES_STATE_RUNNING] = true,
                               [RULES_STATE_ACTION_EXECUTING] = true,
                               [RULES_STATE_THROTTLED] = true,
                               [RULES_STATE_FINISHED] = true},
};

static void set_state(struct rules_inst *i, enum rules_state s, const char *reason)
{
    if (!transitions[i->state][s]) {
        abort();
    }
    i->state = s;
    i->reason = reason;
}

static int64_t ticks_to_ms(int64_t ticks)
{
    return ticks / RULES_TICKS_PER_MS;
}

static bool is_startup(const struct rules_inst *i)
{
    return i->rule->trigger.type == RULES_TRIGGER_STARTUP;
}

/* ---- the execution queue ---- */

size_t rules__window_count(const struct rules_inst *i, int64_t now_ms, int64_t *oldest)
{
    int64_t window = ticks_to_ms(i->rule->limits.window_ticks);
    size_t k = 0;
    /* DequeueOldTimestamps: drop those strictly before the window's start. */
    while (window > 0 && k < i->len && i->times[i->head + k] < now_ms - window) {
        k++;
    }
    *oldest = k < i->len ? i->times[i->head + k] : INT64_MAX;
    return i->len - k;
}

static void dequeue_old(struct rules_inst *i, int64_t now_ms)
{
    int64_t oldest;
    size_t left = rules__window_count(i, now_ms, &oldest);
    i->head += i->len - left;
    i->len = left;
    if (i->len == 0) {
        i->head = 0;
    }
}

static int enqueue(struct rules_inst *i, int64_t now_ms)
{
    void *v = i->times;
    if (!rules__queue_room(&v, sizeof(*i->times), &i->head, i->len, &i->cap)) {
        return -ENOMEM;
    }
    i->times = v;
    i->times[i->head + i->len++] = now_ms;
    i->lifetime++;
    return 0;
}

/* CheckForThrottling: a window is set and the limit is reached inside it. */
static bool throttled(const struct rules_inst *i)
{
    return i->rule->limits.window_ticks > 0 &&
           (int64_t)i->rule->limits.action_count <= (int64_t)i->len;
}

/* ---- lifetime ---- */

static char *copy_process(const struct rules_process *p, struct rules_process *out)
{
    const char *src[] = {
        p->name,     p->command_line,  p->runtime_id,   p->entrypoint_assembly, p->hostname,
        p->pod_name, p->pod_namespace, p->container_id, p->container_name};
    enum { NSTR = sizeof(src) / sizeof(src[0]) };
    size_t total = 0;
    for (size_t k = 0; k < NSTR; k++) {
        total += (src[k] != NULL ? strlen(src[k]) : 0) + 1;
    }
    char *s = malloc(total);
    if (s == NULL) {
        return NULL;
    }
    const char **dst[NSTR] = {
        &out->name,          &out->command_line, &out->runtime_id,    &out->entrypoint_assembly,
        &out->hostname,      &out->pod_name,     &out->pod_namespace, &out->container_id,
        &out->container_name};
    char *w = s;
    for (size_t k = 0; k < NSTR; k++) {
        size_t len = src[k] != NULL ? strlen(src[k]) : 0;
        memcpy(w, src[k] != NULL ? src[k] : "", len);
        w[len] = '\0';
        *dst[k] = w;
        w += len + 1;
    }
    out->pid = p->pid;
    return s;
}

int rules_inst_new(const struct rules_rule *rule, const struct rules_process *p,
                   double counter_interval_s, int64_t now_ms, struct rules_inst **out)
{
    *out = NULL;
    if (!rule->valid) {
        return AGENT_E_INVAL;
    }
    struct rules_inst *i = calloc(1, sizeof(*i));
    if (i == NULL || (i->proc_strings = copy_process(p, &i->proc)) == NULL) {
        free(i);
        return -ENOMEM;
    }
    i->rule = rule;
    i->state = RULES_STATE_RUNNING;
    i->reason = rules__reason_running;
    i->start_ms = now_ms;
    if (rule->trigger.type != RULES_TRIGGER_STARTUP) {
        int rc = rules_engine_new(&rule->trigger, counter_interval_s, &i->engine);
        if (rc != 0) {
            rules_inst_free(i);
            return rc;
        }
        i->started = true; /* the pipeline signals start once its trigger runs */
    }
    *out = i;
    if (rule->trigger.type == RULES_TRIGGER_STARTUP && rules_inst_fire(i, now_ms) < 0) {
        rules_inst_free(i);
        *out = NULL;
        return -ENOMEM;
    }
    return 0;
}

static void clear_run(struct rules_inst *i)
{
    for (size_t k = 0; i->acts != NULL && k < i->rule->nactions; k++) {
        struct rules_act_run *r = &i->acts[k];
        char *owned[] = {r->egress, r->path, r->env_name, r->env_value, r->profiler_path};
        for (size_t s = 0; s < sizeof(owned) / sizeof(owned[0]); s++) {
            free(owned[s]);
        }
        rules_free_argv(r->argv);
        for (size_t o = 0; o < r->noutputs; o++) {
            free(r->outputs[o].key);
            free(r->outputs[o].value);
        }
        free(r->outputs);
    }
    free(i->acts);
    i->acts = NULL;
    i->running = i->aborting = false;
    i->cursor = 0;
}

void rules_inst_free(struct rules_inst *i)
{
    if (i == NULL) {
        return;
    }
    clear_run(i);
    rules_engine_free(i->engine);
    free(i->times);
    free(i->proc_strings);
    free(i);
}

const struct rules_rule *rules_inst_rule(const struct rules_inst *i)
{
    return i->rule;
}

enum rules_state rules_inst_state(const struct rules_inst *i)
{
    return i->state;
}

const char *rules_inst_state_reason(const struct rules_inst *i)
{
    return i->reason;
}

bool rules_inst_trigger_active(const struct rules_inst *i)
{
    return i->engine != NULL && !i->running &&
           (i->state == RULES_STATE_RUNNING || i->state == RULES_STATE_THROTTLED);
}

bool rules_inst_started(const struct rules_inst *i)
{
    return i->started;
}

void rules_inst_fail(struct rules_inst *i, const char *message)
{
    if (i->state == RULES_STATE_FINISHED) {
        return;
    }
    (void)snprintf(i->failure, sizeof(i->failure),
                   "The collection rule will no longer trigger because a failure occurred with "
                   "message: %s.",
                   message);
    set_state(i, RULES_STATE_FINISHED, i->failure);
    i->started = true;
    i->aborting |= i->running; /* the running actions are cancelled by steps */
}

/* ---- RuleDuration ---- */

static bool duration_over(const struct rules_inst *i, int64_t now_ms)
{
    int64_t d = ticks_to_ms(i->rule->limits.duration_ticks);
    return i->rule->limits.duration_ticks > 0 && now_ms - i->start_ms >= d;
}

void rules_inst_tick(struct rules_inst *i, int64_t now_ms)
{
    if (i->state == RULES_STATE_FINISHED || !duration_over(i, now_ms)) {
        return;
    }
    if (i->running) {
        i->expired = true; /* the running list completes first, as in dotnet-monitor */
        return;
    }
    set_state(i, RULES_STATE_FINISHED, reason_rule_duration);
    i->started = true;
}

int64_t rules_inst_deadline(const struct rules_inst *i)
{
    if (i->state == RULES_STATE_FINISHED || i->rule->limits.duration_ticks <= 0 || i->expired) {
        return INT64_MAX;
    }
    return i->start_ms + ticks_to_ms(i->rule->limits.duration_ticks);
}

/* ---- firing and the end of a list ---- */

/* The list is over: back to Running, or Finished with dotnet-monitor's precedence (RuleDuration
 * over Startup over ActionCount: the later of its state updates wins). */
static void run_end(struct rules_inst *i, int64_t now_ms)
{
    clear_run(i);
    i->started = true;
    if (i->state == RULES_STATE_FINISHED) {
        return; /* rules_inst_fail while the list ran */
    }
    const struct rules_limits *l = &i->rule->limits;
    const char *finished = NULL;
    if (i->expired || duration_over(i, now_ms)) {
        finished = reason_rule_duration;
    } else if (is_startup(i)) {
        finished = reason_startup;
    } else if (l->window_ticks == 0 && (int64_t)l->action_count <= (int64_t)i->len) {
        finished = reason_action_count;
    }
    if (i->state == RULES_STATE_ACTION_EXECUTING) {
        set_state(i, RULES_STATE_RUNNING, rules__reason_running);
    }
    if (finished != NULL) {
        set_state(i, RULES_STATE_FINISHED, finished);
    } else if (i->engine != NULL) {
        rules_engine_reset(i->engine); /* dotnet-monitor starts a new trigger */
    }
}

int rules_inst_fire(struct rules_inst *i, int64_t now_ms)
{
    rules_inst_tick(i, now_ms);
    bool active = is_startup(i) ? i->state == RULES_STATE_RUNNING && i->lifetime == 0 && !i->running
                                : rules_inst_trigger_active(i);
    if (!active) {
        return 0;
    }
    dequeue_old(i, now_ms);
    if (throttled(i)) {
        set_state(i, RULES_STATE_THROTTLED, rules__reason_throttled);
        if (is_startup(i)) {
            set_state(i, RULES_STATE_FINISHED, reason_startup);
            i->started = true;
        } else {
            rules_engine_reset(i->engine);
        }
        return 0;
    }
    size_t n = i->rule->nactions;
    i->acts = calloc(n ? n : 1, sizeof(*i->acts));
    if (i->acts == NULL || enqueue(i, now_ms) != 0) {
        free(i->acts);
        i->acts = NULL;
        return -ENOMEM;
    }
    set_state(i, RULES_STATE_ACTION_EXECUTING, reason_executing);
    i->running = true;
    if (n == 0) {
        run_end(i, now_ms);
    }
    return 1;
}

static int fed(struct rules_inst *i, bool fired, int64_t now_ms)
{
    if (rules__engine_failed(i->engine)) {
        return -ENOMEM;
    }
    if (!fired) {
        return 0;
    }
    int rc = rules_inst_fire(i, now_ms);
    return rc < 0 ? rc : 1;
}

/* Applies RuleDuration, then says whether the trigger takes input. */
static bool takes_input(struct rules_inst *i, int64_t now_ms)
{
    rules_inst_tick(i, now_ms);
    return rules_inst_trigger_active(i);
}

int rules_inst_on_metric(struct rules_inst *i, const struct ev_metric_sample *s, int64_t now_ms)
{
    return takes_input(i, now_ms) ? fed(i, rules_engine_on_metric(i->engine, s), now_ms) : 0;
}

int rules_inst_on_request(struct rules_inst *i, const struct rules_request_event *ev,
                          int64_t now_ms)
{
    return takes_input(i, now_ms) ? fed(i, rules_engine_on_request(i->engine, ev), now_ms) : 0;
}

int rules_inst_on_runtime(struct rules_inst *i, const struct rules_runtime_event *ev,
                          int64_t now_ms)
{
    return takes_input(i, now_ms) ? fed(i, rules_engine_on_runtime(i->engine, ev), now_ms) : 0;
}

int64_t rules_inst_gc_pause_ticks(const struct rules_inst *i)
{
    return i->engine != NULL ? rules__engine_last_pause(i->engine) : 0;
}

/* ---- tokens ---- */

/* The recorded output `out` of the earlier action named name[0..len), or NULL. */
static const char *output_of(const struct rules_inst *i, const char *ref, size_t len)
{
    const char *dot = memchr(ref, '.', len);
    if (dot == NULL) {
        return NULL;
    }
    size_t nlen = (size_t)(dot - ref), olen = len - nlen - 1;
    for (size_t k = 0; k < i->cursor; k++) {
        const char *name = i->rule->actions[k].name;
        if (name == NULL || strlen(name) != nlen || memcmp(name, ref, nlen) != 0) {
            continue;
        }
        const struct rules_act_run *r = &i->acts[k];
        for (size_t o = 0; o < r->noutputs; o++) {
            if (strlen(r->outputs[o].key) == olen &&
                memcmp(r->outputs[o].key, dot + 1, olen) == 0) {
                return r->outputs[o].value;
            }
        }
    }
    return NULL;
}

/* What the token finder looks at: the instance, its pid as text, whether Actions count. */
struct tokens {
    const struct rules_inst *i;
    char pid[16];
    bool actions;
    bool path;    /* Execute's Path: a value with a '/' is refused */
    bool refused; /* one was */
};

/* $(Actions.<name>.<output>) (when it counts) → the output, $(Process.*) and $(Monitor.HostName)
 * matched exactly as dotnet-monitor's Replace does; anything else (an unknown reference too)
 * stays as written. */
static const char *token_value(void *ud, const char *s, size_t *len)
{
    struct tokens *t = ud;
    const struct rules_inst *i = t->i;
    size_t plen = strlen(RULES_ACTIONS_PREFIX);
    const char *end = NULL;
    if (t->actions && rules__at_actions_prefix(s) && (end = strchr(s + plen, ')')) != NULL) {
        const char *value = output_of(i, s + plen, (size_t)(end - s - plen));
        if (value != NULL) {
            *len = (size_t)(end + 1 - s);
            return value;
        }
    }
    const char *runtime_id =
        *i->proc.runtime_id ? i->proc.runtime_id : "00000000-0000-0000-0000-000000000000";
    const struct rules_kv tokens[] = {
        {"$(Process.RuntimeId)", runtime_id},      {"$(Process.ProcessId)", t->pid},
        {"$(Process.Name)", i->proc.name},         {"$(Process.CommandLine)", i->proc.command_line},
        {"$(Monitor.HostName)", i->proc.hostname},
    };
    for (size_t k = 0; k < sizeof(tokens) / sizeof(tokens[0]); k++) {
        if (strncmp(s, tokens[k].key, strlen(tokens[k].key)) == 0) {
            *len = strlen(tokens[k].key);
            t->refused |= t->path && strchr(tokens[k].value, '/') != NULL;
            return tokens[k].value;
        }
    }
    return NULL;
}

static void tokens_init(struct tokens *t, const struct rules_inst *i, bool actions)
{
    t->i = i;
    t->actions = actions;
    t->path = t->refused = false;
    (void)snprintf(t->pid, sizeof(t->pid), "%u", i->proc.pid);
}

/*
 * A resolved copy of setting s (NULL stays NULL); *out NULL and -ENOMEM on failure. Execute's
 * Path (path true) whose tokens would bring a '/' (a process names itself "../../tmp/x") stays as
 * configured, tokens unreplaced: no such file, the action fails, nothing runs.
 */
static int resolve(const struct rules_inst *i, const char *s, bool path, char **out)
{
    *out = NULL;
    if (s == NULL) {
        return 0;
    }
    struct tokens t;
    tokens_init(&t, i, false);
    t.path = path;
    struct buf b;
    buf_init(&b, 0);
    int rc = rules_substitute(s, token_value, &t, &b);
    if (rc == 0 && t.refused) {
        buf_reset(&b);
        rc = buf_append_str(&b, s);
    }
    if (rc == 0) {
        *out = buf_steal(&b, NULL);
        rc = *out != NULL ? 0 : -ENOMEM;
    }
    buf_fini(&b);
    return rc;
}

static int resolve_action(struct rules_inst *i, size_t k)
{
    const struct rules_action *a = &i->rule->actions[k];
    struct rules_act_run *r = &i->acts[k];
    const char *src[] = {a->egress, a->path, a->env_name, a->env_value, a->profiler_path};
    char **dst[] = {&r->egress, &r->path, &r->env_name, &r->env_value, &r->profiler_path};
    for (size_t s = 0; s < sizeof(src) / sizeof(src[0]); s++) {
        free(*dst[s]);
        bool path = dst[s] == &r->path && a->type == RULES_ACTION_EXECUTE;
        if (resolve(i, src[s], path, dst[s]) != 0) {
            return -ENOMEM;
        }
    }
    rules_free_argv(r->argv);
    r->argv = NULL;
    r->argc = 0;
    if (a->type == RULES_ACTION_EXECUTE) {
        struct tokens t;
        tokens_init(&t, i, true);
        return rules_execute_argv(a->arguments != NULL ? a->arguments : "", RULES_EXECUTE_MAX_ARGS,
                                  token_value, &t, &r->argv, &r->argc);
    }
    return 0;
}

/* ---- steps ---- */

static int cancel_step(struct rules_inst *i, struct rules_step *out)
{
    for (size_t k = 0; k < i->cursor; k++) {
        struct rules_act_run *r = &i->acts[k];
        if (r->status == RULES__ACT_RUNNING && !r->cancel_sent) {
            r->cancel_sent = true;
            memset(out, 0, sizeof(*out));
            out->kind = RULES_STEP_CANCEL;
            out->index = k;
            out->action = &i->rule->actions[k];
            return 1;
        }
    }
    return 0;
}

/* Whether action k must wait: for an earlier action whose output it uses, or for the one before
 * it when that one is awaited (WaitForCompletion). */
static bool must_wait(const struct rules_inst *i, size_t k)
{
    const struct rules_action *a = &i->rule->actions[k];
    for (size_t d = 0; d < a->ndeps; d++) {
        if (i->acts[a->deps[d]].status == RULES__ACT_RUNNING) {
            return true;
        }
    }
    return k > 0 && i->rule->actions[k - 1].wait_for_completion &&
           i->acts[k - 1].status == RULES__ACT_RUNNING;
}

int rules_inst_next_step(struct rules_inst *i, struct rules_step *out)
{
    if (!i->running) {
        return 0;
    }
    if (i->aborting) {
        return cancel_step(i, out);
    }
    size_t k = i->cursor;
    if (k == i->rule->nactions || must_wait(i, k)) {
        i->started = true; /* every action started, or one is awaited: the runtime may resume */
        return 0;
    }
    if (resolve_action(i, k) != 0) {
        return -ENOMEM;
    }
    const struct rules_act_run *r = &i->acts[k];
    i->acts[k].status = RULES__ACT_RUNNING;
    i->cursor++;
    *out = (struct rules_step){.kind = RULES_STEP_START,
                               .index = k,
                               .action = &i->rule->actions[k],
                               .egress = r->egress,
                               .path = r->path,
                               .argv = r->argv,
                               .argc = r->argc,
                               .env_name = r->env_name,
                               .env_value = r->env_value,
                               .profiler_path = r->profiler_path};
    if (i->cursor == i->rule->nactions) {
        i->started = true;
    }
    return 1;
}

static int keep_outputs(struct rules_act_run *r, const struct rules_kv *outputs, size_t n)
{
    if (n == 0) {
        return 0;
    }
    r->outputs = calloc(n, sizeof(*r->outputs));
    if (r->outputs == NULL) {
        return -ENOMEM;
    }
    for (size_t o = 0; o < n; o++) {
        char *k = strdup(outputs[o].key != NULL ? outputs[o].key : "");
        char *v = strdup(outputs[o].value != NULL ? outputs[o].value : "");
        r->outputs[r->noutputs++] = (struct rules__output){k, v};
        if (k == NULL || v == NULL) {
            return -ENOMEM;
        }
    }
    return 0;
}

int rules_inst_action_done(struct rules_inst *i, size_t index, bool ok,
                           const struct rules_kv *outputs, size_t n, int64_t now_ms)
{
    if (!i->running || index >= i->cursor || i->acts[index].status != RULES__ACT_RUNNING) {
        return AGENT_E_INVAL;
    }
    struct rules_act_run *r = &i->acts[index];
    r->status = ok ? RULES__ACT_DONE : RULES__ACT_FAILED;
    int rc = 0;
    if (ok && i->rule->actions[index].name != NULL) {
        rc = keep_outputs(r, outputs, n);
    }
    i->aborting |= !ok;
    rules_inst_tick(i, now_ms);
    for (size_t k = 0; k < i->cursor; k++) {
        if (i->acts[k].status == RULES__ACT_RUNNING) {
            return rc;
        }
    }
    if (i->aborting || i->cursor == i->rule->nactions) {
        run_end(i, now_ms);
    }
    return rc;
}
