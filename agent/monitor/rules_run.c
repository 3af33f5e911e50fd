/* SPDX-License-Identifier: MIT */
/* Collection rules run in the agent: processes, sessions, timers and actions; see rules_run.h. */
#include "rules_run.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <uv.h>

#include "agent.h"
#include "artifact.h"
#include "buf.h"
#include "collectors.h"
#include "egress/egress.h"
#include "err.h"
#include "ev_exc.h"
#include "ev_filter.h"
#include "ev_ring.h"
#include "ipc_client.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "log.h"
#include "metrics_session.h"
#include "ring_registry.h"
#include "rules.h"
#include "trace_config.h"
#include "trigger_session.h"

static const char cat[] = "dotmon.rules";

#define ENV_MAX_REPLY ((size_t)4 * 1024 * 1024)

struct rinst;

/* An action in flight: owns itself; ri is NULL once its instance has gone (detached). */
struct raction {
    struct raction *next;
    struct rinst *ri;
    size_t index;
    enum rules_action_type type;
    uv_process_t proc; /* Execute */
    bool spawned;
    bool spawn_failed;
    struct ipc_env *env;     /* GetEnvironmentVariable */
    struct ipc_exchange *xc; /* SetEnvironmentVariable */
    char *env_name;
    char *value; /* the variable's value, once found */
    /* Collect*: an internal artifact (artifact.h) whose operation is op_id */
    struct agent *a;
    bool collecting; /* until on_settled */
    bool starting;   /* inside collect_start: on_settled's report waits for its return */
    bool settled;    /* on_settled came while starting */
    char op_id[37];
    enum op_state op_state;
    char *location; /* resourceLocation */
    char *message;  /* the operation's error */
};

/* One rule applied to one process. */
struct rinst {
    struct rinst *next;
    struct rules_run *r;
    struct rproc *p; /* NULL once removed (its handles closing) */
    struct rules_inst *inst;
    struct metrics_filters f;
    double interval_s;
    struct msession *sess;  /* metric triggers */
    struct tsession *tsess; /* ASP.NET and runtime triggers */
    bool stopping;          /* msession_stop / tsession_stop asked */
    uv_timer_t deadline;    /* rules_inst_deadline */
    uv_timer_t kick;        /* deferred session start/stop, and restart backoff */
    uint64_t backoff_ms;
    struct raction *actions;
    /* Ring mode: the continuous session of the rule's ring CollectTrace (collect_trace_ring_start)
     * while the trigger is active; NULL when none runs. ring_action indexes that action. */
    struct trace_job *ring;
    size_t ring_action;
    bool has_ring;
    struct ring_entry *ring_entry; /* its entry in the agent's ring registry (has_ring) */
    uint64_t ring_backoff_ms;
    int64_t ring_not_before; /* no new ring before this (now_ms) after a failure */
    enum rules_state said;   /* the state last logged */
    int open;                /* handles not yet closed */
};

struct rproc {
    struct rproc *next;
    struct rules_run *r;
    uint64_t pid;
    char uid[37];
    int major;
    struct ipc_endpoint ep;
    struct rinst *insts; /* in rule order */
    bool resumed;        /* ResumeRuntime asked (or not ours to ask) */
    bool adding;         /* proc_add is still applying the rules */
};

struct rules_run {
    struct agent *a;
    struct rules_config *cfg;
    char hostname[256];
    struct rproc *procs;
    size_t closing; /* rinsts whose handles are closing */
    bool closed;
    bool retired; /* replaced by a reload: freed once closing is 0 */
};

static void ri_sync(struct rinst *ri);
static void ri_pump(struct rinst *ri);
static void proc_maybe_resume(struct rproc *pr);

static int64_t now_ms(const struct rules_run *r)
{
    return (int64_t)uv_now(r->a->loop);
}

static const char *rule_name(const struct rinst *ri)
{
    return rules_inst_rule(ri->inst)->name;
}

/* ---- configuration ------------------------------------------------------------------------- */

bool rules_run_is_setting(const char *k)
{
    return config_key_under(k, "CollectionRules") || config_key_under(k, "Templates") ||
           config_key_under(k, "CollectionRuleDefaults");
}

int rules_run_config(const struct config *cfg, const struct egress_set *egress,
                     struct rules_config **out)
{
    *out = NULL;
    const char **names = NULL;
    size_t nnames = 0;
    int rc = egress != NULL ? egress_set_names(egress, &names, &nnames) : 0;
    if (rc != 0) {
        return rc;
    }
    struct rules_kv *kv = calloc(cfg->n + 1, sizeof(*kv));
    size_t n = 0;
    if (kv == NULL) {
        rc = UV_ENOMEM;
    }
    for (size_t i = 0; kv != NULL && i < cfg->n; i++) {
        if (rules_run_is_setting(cfg->v[i].key)) {
            kv[n++] = (struct rules_kv){.key = cfg->v[i].key, .value = cfg->v[i].value};
        }
    }
    if (rc == 0) {
        rc = rules_config_load(kv, n, names, nnames, out);
    }
    free(kv);
    free(names);
    return rc;
}

/*
 * The rule settings as one string, to notice a change on reload: every entry of the rules'
 * sections, then the names of the egress providers in effect, which the rules are checked
 * against (a changed Egress section that names the same providers changes nothing here). NULL on
 * ENOMEM.
 */
static char *rules_settings(const struct config *cfg, const struct egress_set *egress)
{
    struct buf b;
    buf_init(&b, 0);
    int rc = 0;
    for (size_t i = 0; i < cfg->n && rc == 0; i++) {
        if (rules_run_is_setting(cfg->v[i].key)) {
            rc = buf_printf(&b, "%s=%s\n", cfg->v[i].key, cfg->v[i].value);
        }
    }
    for (size_t j = 0; j < egress_set_count(egress) && rc == 0; j++) {
        rc = buf_printf(&b, "Egress %s\n", egress_provider_name(egress_set_at(egress, j)));
    }
    char *s = rc == 0 ? strdup(buf_cstr(&b)) : NULL;
    buf_fini(&b);
    return s;
}

/* The rules of cfg (owned from here on, NULL on ENOMEM). */
static struct rules_run *run_new(struct agent *a, struct rules_config *cfg)
{
    struct rules_run *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        rules_config_free(cfg);
        return NULL;
    }
    r->a = a;
    r->cfg = cfg;
    size_t hl = sizeof(r->hostname);
    if (uv_os_gethostname(r->hostname, &hl) != 0) {
        r->hostname[0] = '\0';
    }
    for (size_t i = 0; i < cfg->nrules; i++) {
        log_info(cat, "collection rule %s: trigger %s, %zu action(s)", cfg->rules[i].name,
                 cfg->rules[i].trigger.type_name, cfg->rules[i].nactions);
    }
    return r;
}

/* Problems that leave their rule valid (an Egress provider not configured): the action will
 * fail when it runs, with that message. */
static void log_rule_warnings(const struct rules_config *cfg)
{
    for (size_t i = 0; i < cfg->nwarnings; i++) {
        log_warn(cat,
                 "%s The action fails when it runs, unless the provider is configured by then.",
                 cfg->warnings[i]);
    }
}

int rules_run_new(struct agent *a, struct rules_run **out)
{
    *out = NULL;
    free(a->rules_settings);
    a->rules_settings = rules_settings(a->cfg, a->egress);
    struct rules_config *cfg = NULL;
    int rc = a->rules_settings != NULL ? rules_run_config(a->cfg, a->egress, &cfg) : UV_ENOMEM;
    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < cfg->nerrors; i++) {
        log_error(cat, "%s", cfg->errors[i]);
    }
    log_rule_warnings(cfg);
    if (cfg->nerrors > 0 || cfg->nrules == 0) {
        rc = cfg->nerrors > 0 ? AGENT_E_INVAL : 0;
        rules_config_free(cfg);
        return rc;
    }
    *out = run_new(a, cfg);
    return *out != NULL ? 0 : UV_ENOMEM;
}

/* ---- actions ------------------------------------------------------------------------------- */

static void action_free(struct raction *ac)
{
    free(ac->location);
    free(ac->message);
    free(ac->env_name);
    free(ac->value);
    free(ac);
}

static void action_unlink(struct raction *ac)
{
    if (ac->ri == NULL) {
        return;
    }
    for (struct raction **pp = &ac->ri->actions; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == ac) {
            *pp = ac->next;
            break;
        }
    }
    ac->ri = NULL;
}

/* Reports the action done to its instance (if it still has one) and moves the rule on. */
static void action_report(struct raction *ac, bool ok, const struct rules_kv *out, size_t n,
                          const char *why)
{
    struct rinst *ri = ac->ri;
    action_unlink(ac);
    if (ri == NULL) {
        return;
    }
    const struct rules_action *act = &rules_inst_rule(ri->inst)->actions[ac->index];
    if (ok) {
        log_info(cat, "collection rule %s of process %" PRIu64 ": action %s completed",
                 rule_name(ri), ri->p->pid, act->type_name);
    } else {
        log_warn(cat, "collection rule %s of process %" PRIu64 ": action %s failed: %s",
                 rule_name(ri), ri->p->pid, act->type_name, why != NULL ? why : "cancelled");
    }
    int rc = rules_inst_action_done(ri->inst, ac->index, ok, out, n, now_ms(ri->p->r));
    if (rc != 0 && rc != AGENT_E_INVAL) {
        log_warn(cat, "collection rule %s: %s", rule_name(ri), agent_strerror(rc));
    }
    ri_pump(ri);
}

static void exec_on_closed(uv_handle_t *h)
{
    action_free(h->data);
}

static void exec_on_exit(uv_process_t *proc, int64_t status, int term_signal)
{
    struct raction *ac = proc->data;
    char code[32], why[96];
    int exit_code = term_signal != 0 ? 128 + term_signal : (int)status;
    snprintf(code, sizeof(code), "%d", exit_code);
    struct rules_kv out = {.key = "ExitCode", .value = code};
    bool ignore =
        ac->ri != NULL && rules_inst_rule(ac->ri->inst)->actions[ac->index].ignore_exit_code;
    snprintf(why, sizeof(why), "the process exited with exit code %d", exit_code);
    action_report(ac, exit_code == 0 || ignore, &out, 1, why);
    uv_close((uv_handle_t *)proc, exec_on_closed);
}

/* The child's environment: PATH (dotmon's, or a usual default) and LANG (when dotmon has one),
 * nothing else: dotmon's own settings (DotnetMonitor_*, an egress's SecretAccessKey, the API key)
 * and credentials (AWS_*, OTEL headers) live in its environment. env[] gets pointers into
 * space (both the caller's); env[n] is NULL. */
static void execute_env(char space[2][4096], char *env[3])
{
    const char *path = getenv("PATH");
    const char *lang = getenv("LANG");
    size_t n = 0;
    int w = snprintf(space[0], sizeof(space[0]), "PATH=%s",
                     path != NULL && *path != '\0' ? path
                                                   : "/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                                                     "/usr/bin:/sbin:/bin");
    if (w > 0 && (size_t)w < sizeof(space[0])) {
        env[n++] = space[0];
    }
    w = lang != NULL ? snprintf(space[1], sizeof(space[1]), "LANG=%s", lang) : -1;
    if (w > 0 && (size_t)w < sizeof(space[1])) {
        env[n++] = space[1];
    }
    env[n] = NULL;
}

static int execute_start(struct raction *ac, const struct rules_step *st, struct buf *why)
{
    struct stat sb;
    if (st->path == NULL || stat(st->path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        buf_printf(why, "Could not find file '%s'.", st->path != NULL ? st->path : "");
        return AGENT_E_NOTFOUND;
    }
    /* argv[0] is Path; the arguments were split, then substituted, by the rules (each stays
     * one argument whatever its values hold). */
    char **argv = calloc(st->argc + 2, sizeof(*argv));
    char *file = strdup(st->path);
    if (argv == NULL || file == NULL) {
        free(argv);
        free(file);
        return UV_ENOMEM;
    }
    argv[0] = file;
    for (size_t k = 0; k < st->argc; k++) {
        argv[k + 1] = st->argv[k];
    }
    char env_space[2][4096];
    char *env[3];
    execute_env(env_space, env);
    uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
                                     {.flags = UV_INHERIT_FD, .data.fd = 1},
                                     {.flags = UV_INHERIT_FD, .data.fd = 2}};
    uv_process_options_t o = {.exit_cb = exec_on_exit,
                              .file = file,
                              .args = argv,
                              .env = env,
                              .stdio_count = 3,
                              .stdio = stdio};
    ac->proc.data = ac;
    int rc = uv_spawn(ac->ri->p->r->a->loop, &ac->proc, &o);
    if (rc == 0) {
        ac->spawned = true;
    } else {
        buf_printf(why, "cannot start %s: %s", st->path, uv_strerror(rc));
        ac->spawn_failed = true; /* libuv initialised the handle: it must be closed */
    }
    free(file);
    free(argv);
    return rc;
}

static int env_on_var(void *ud, const char *name, size_t name_len, const char *value,
                      size_t value_len)
{
    struct raction *ac = ud;
    if (ac->value == NULL && strlen(ac->env_name) == name_len &&
        memcmp(name, ac->env_name, name_len) == 0) {
        ac->value = strndup(value, value_len);
        return ac->value != NULL ? 0 : UV_ENOMEM;
    }
    return 0;
}

static void env_on_done(void *ud, const struct ipc_env_result *res)
{
    struct raction *ac = ud;
    ac->env = NULL;
    char why[256];
    if (res->status != 0 || !res->ok || res->block_status != 0) {
        snprintf(why, sizeof(why), "ProcessEnvironment failed: %s",
                 res->status != 0 ? agent_strerror(res->status)
                 : !res->ok       ? ipc_hresult_text(res->hresult)
                                  : agent_strerror(res->block_status));
        action_report(ac, false, NULL, 0, why);
    } else if (ac->value == NULL) {
        snprintf(why, sizeof(why), "the environment variable %s was not found", ac->env_name);
        action_report(ac, false, NULL, 0, why);
    } else {
        struct rules_kv out = {.key = "Value", .value = ac->value};
        action_report(ac, true, &out, 1, NULL);
    }
    action_free(ac);
}

static void setenv_on_done(void *ud, const struct ipc_result *res)
{
    struct raction *ac = ud;
    ac->xc = NULL;
    char why[256];
    if (res->status != 0 || !res->ok) {
        snprintf(why, sizeof(why), "SetEnvironmentVariable failed: %s",
                 res->status != 0 ? agent_strerror(res->status) : ipc_hresult_text(res->hresult));
        action_report(ac, false, NULL, 0, why);
    } else {
        action_report(ac, true, NULL, 0, NULL);
    }
    action_free(ac);
}

static int env_start(struct raction *ac, const struct rules_step *st, struct buf *why)
{
    struct rules_run *r = ac->ri->p->r;
    if (st->env_name == NULL || *st->env_name == '\0') {
        buf_printf(why, "no Name");
        return AGENT_E_INVAL;
    }
    ac->env_name = strdup(st->env_name);
    if (ac->env_name == NULL) {
        return UV_ENOMEM;
    }
    int rc;
    if (ac->type == RULES_ACTION_GET_ENVIRONMENT_VARIABLE) {
        rc = ipc_env_request(r->a->loop, &ac->ri->p->ep, agent_timeout(r->a, TIMEOUT_IPC_EXCHANGE),
                             ENV_MAX_REPLY, env_on_var, env_on_done, ac, &ac->env);
    } else {
        uint8_t msg[IPC_MESSAGE_MAX];
        struct ipc_wr w;
        ipc_wr_init(&w, msg, sizeof(msg));
        rc = ipc_cmd_set_env(&w, st->env_name, st->env_value != NULL ? st->env_value : "");
        rc = rc ? rc
                : ipc_exchange_start(r->a->loop, &ac->ri->p->ep, msg, w.len, IPC_EXCHANGE_SIMPLE,
                                     agent_timeout(r->a, TIMEOUT_IPC_EXCHANGE), 0, setenv_on_done,
                                     ac, &ac->xc);
    }
    if (rc != 0) {
        buf_printf(why, "cannot reach the process: %s", agent_strerror(rc));
    }
    return rc;
}

/* ---- Collect* actions: internal artifacts (artifact.h) to the action's Egress ---------------- */

/* The operation's end as the action's: EgressPath = its resourceLocation, or its error. */
static void collect_report(struct raction *ac)
{
    char why[1200];
    if (ac->op_state == OP_SUCCEEDED && ac->location != NULL) {
        struct rules_kv out = {.key = "EgressPath", .value = ac->location};
        action_report(ac, true, &out, 1, NULL);
        return;
    }
    snprintf(why, sizeof(why), "operation %s %s%s%s", ac->op_id, op_state_name(ac->op_state),
             ac->message != NULL ? ": " : "", ac->message != NULL ? ac->message : "");
    action_report(ac, false, NULL, 0, why);
}

static void collect_on_settled(void *ud, enum op_state state, const char *location,
                               const char *message)
{
    struct raction *ac = ud;
    ac->collecting = false;
    ac->op_state = state;
    ac->location = location != NULL ? strdup(location) : NULL;
    ac->message = message != NULL ? strdup(message) : NULL;
    if (ac->starting) {
        ac->settled = true; /* action_start reports it once collect_start has returned */
        return;
    }
    collect_report(ac);
    action_free(ac);
}

static const char *const dump_type_names[] = {
    [RULES_DUMP_MINI] = "Mini",
    [RULES_DUMP_FULL] = "Full",
    [RULES_DUMP_TRIAGE] = "Triage",
    [RULES_DUMP_WITH_HEAP] = "WithHeap",
};

/* The process's discovery entry (the collections take their endpoint and names from it). */
static const struct ipc_process *find_process(const struct rules_run *r, const char *uid)
{
    size_t n = r->a->disc != NULL ? ipc_discovery_count(r->a->disc) : 0;
    for (size_t i = 0; i < n; i++) {
        const struct ipc_process *p = ipc_discovery_at(r->a->disc, i);
        if (strcmp(p->uid, uid) == 0) {
            return p;
        }
    }
    return NULL;
}

/* CollectTrace's configuration: Profile, or Providers through POST /trace's body parser. */
static int trace_action_config(const struct agent *a, const struct rules_action *act,
                               struct trace_config *tc, struct buf *why)
{
    int rc;
    if (act->profile != NULL) {
        rc = trace_config_from_profiles_with(act->profile, a->metrics_interval_sec,
                                             metrics_trace_interval, a->cfg, tc, why);
        tc->collect.buffer_mb = act->buffer_mb;
        return rc;
    }
    cJSON *body = rules_trace_action_json(act);
    char *text = body != NULL ? cJSON_PrintUnformatted(body) : NULL;
    rc = text != NULL ? trace_config_from_json(text, strlen(text), tc, why) : UV_ENOMEM;
    cJSON_free(text);
    cJSON_Delete(body);
    return rc;
}

/*
 * CollectTrace's StoppingEvent as the filter the trace's checker runs (events/ev_filter.h); *out
 * stays NULL without one. The configuration has checked the names (rules_action_cfg.c).
 */
static int stopping_event_filter(const struct rules_action *act, struct ev_filter **out,
                                 struct buf *why)
{
    *out = NULL;
    if (!act->has_stopping_event) {
        return 0;
    }
    struct ev_filter_field fields[EV_FILTER_MAX_FIELDS];
    if (act->nstop_payload > EV_FILTER_MAX_FIELDS) {
        buf_printf(why, "StoppingEvent:PayloadFilter has more than %d fields",
                   EV_FILTER_MAX_FIELDS);
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < act->nstop_payload; i++) {
        fields[i] = (struct ev_filter_field){act->stop_payload[i].key, act->stop_payload[i].value};
    }
    int rc = ev_filter_new(act->stop_provider, act->stop_event != NULL ? act->stop_event : "",
                           fields, act->nstop_payload, out);
    if (rc == AGENT_E_INVAL) {
        buf_printf(why, "StoppingEvent needs a ProviderName and an EventName");
    }
    return rc;
}

/* CollectLogs's settings as POST /logs's body (LogsConfiguration); NULL on ENOMEM. */
static char *logs_action_body(const struct rules_action *act)
{
    static const char *const levels[] = {"Trace", "Debug",    "Information", "Warning",
                                         "Error", "Critical", "None"};
    cJSON *root = cJSON_CreateObject();
    cJSON *specs = cJSON_AddObjectToObject(root, "filterSpecs");
    if ((unsigned)act->default_level <= RULES_LOG_NONE) {
        cJSON_AddStringToObject(root, "logLevel", levels[act->default_level]);
    }
    cJSON_AddBoolToObject(root, "useAppFilters", act->use_app_filters);
    for (size_t i = 0; specs != NULL && i < act->nfilter_specs; i++) {
        int lv = act->filter_specs[i].level;
        cJSON_AddStringToObject(specs, act->filter_specs[i].category,
                                lv >= 0 && lv <= RULES_LOG_NONE ? levels[lv]
                                                                : levels[act->default_level]);
    }
    char *text = specs != NULL ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* CollectExceptions' Filters as POST /exceptions' ExceptionsConfiguration, read by its parser
 * (one reader for both): 0 with *out (NULL when there are none), or a negative code. */
static int exceptions_action_filters(const struct rules_action *act, struct ev_exc_filters **out,
                                     struct buf *why)
{
    *out = NULL;
    if (act->nexc_include == 0 && act->nexc_exclude == 0) {
        return 0;
    }
    cJSON *root = cJSON_CreateObject();
    const struct rules_exc_filter *lists[] = {act->exc_include, act->exc_exclude};
    size_t counts[] = {act->nexc_include, act->nexc_exclude};
    for (size_t l = 0; root != NULL && l < 2; l++) {
        cJSON *arr = cJSON_AddArrayToObject(root, l == 0 ? "include" : "exclude");
        for (size_t i = 0; arr != NULL && i < counts[l]; i++) {
            const struct rules_exc_filter *f = &lists[l][i];
            cJSON *o = cJSON_CreateObject();
            if (o == NULL || !cJSON_AddItemToArray(arr, o)) {
                cJSON_Delete(o);
                break;
            }
            const char *names[] = {"exceptionType", "typeName", "methodName", "moduleName"};
            const char *vals[] = {f->exception_type, f->type_name, f->method_name, f->module_name};
            for (size_t m = 0; m < 4; m++) {
                if (vals[m] != NULL && vals[m][0] != '\0') {
                    cJSON_AddStringToObject(o, names[m], vals[m]);
                }
            }
        }
    }
    char *text = root != NULL ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    if (text == NULL) {
        return UV_ENOMEM;
    }
    char err[256];
    int rc = ev_exc_filters_parse(text, strlen(text), out, err, sizeof(err));
    if (rc == AGENT_E_INVAL) {
        buf_printf(why, "Filters: %s", err);
    }
    cJSON_free(text);
    return rc;
}

/* One Providers or Meters list as POST /livemetrics's "providers" or "meters". */
static void add_sources(cJSON *root, bool meters, const struct rules_metric_source *v, size_t n)
{
    cJSON *arr = cJSON_AddArrayToObject(root, meters ? "meters" : "providers");
    for (size_t i = 0; arr != NULL && i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, meters ? "meterName" : "providerName", v[i].name);
        cJSON *names = cJSON_AddArrayToObject(o, meters ? "instrumentNames" : "counterNames");
        for (size_t j = 0; names != NULL && j < v[i].nnames; j++) {
            cJSON_AddItemToArray(names, cJSON_CreateString(v[i].names[j]));
        }
        cJSON_AddItemToArray(arr, o);
    }
}

/* CollectLiveMetrics's settings as POST /livemetrics's body; NULL on ENOMEM. */
static char *livemetrics_action_body(const struct rules_action *act)
{
    cJSON *root = cJSON_CreateObject();
    cJSON_AddBoolToObject(root, "includeDefaultProviders", act->include_default_providers);
    add_sources(root, false, act->metric_providers, act->nmetric_providers);
    add_sources(root, true, act->meters, act->nmeters);
    char *text = root != NULL ? cJSON_PrintUnformatted(root) : NULL;
    cJSON_Delete(root);
    return text;
}

/* Starts a Collect* action: 0 once its operation exists (collect_on_settled reports its end). */
static int collect_start(struct raction *ac, const struct rules_step *st, struct buf *why)
{
    struct rules_run *r = ac->ri->p->r;
    const struct rules_action *act = st->action;
    const struct ipc_process *p = find_process(r, ac->ri->p->uid);
    if (p == NULL) {
        buf_printf(why, "process %" PRIu64 " is gone", ac->ri->p->pid);
        return AGENT_E_NOTFOUND;
    }
    const struct artifact_origin o = {.provider = st->egress != NULL ? st->egress : act->egress,
                                      .artifact_name = act->artifact_name,
                                      .on_settled = collect_on_settled,
                                      .settled_ud = ac,
                                      .why = why,
                                      .op_id = ac->op_id};
    int64_t duration_s = act->duration_ticks / 10000000;
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    int rc = AGENT_E_INVAL;
    ac->starting = true;
    ac->collecting = true;
    switch (ac->type) {
    case RULES_ACTION_COLLECT_TRACE: {
        struct ev_filter *stop_on = NULL;
        if (act->ring && ac->ri->ring != NULL && ac->ri->ring_action == ac->index) {
            rc = collect_trace_ring_trigger(ac->ri->ring, &o, p, act->post_trigger_s);
            if (rc == 0) {
                ac->ri->ring = NULL; /* the operation has it now */
                break;
            }
            log_warn(cat,
                     "collection rule %s of process %" PRIu64
                     ": the ring cannot be written (%s); tracing the next %d s instead",
                     rule_name(ac->ri), ac->ri->p->pid, buf_cstr(why), act->post_trigger_s);
            buf_reset(why);
        }
        if (act->ring) {
            duration_s = act->post_trigger_s > 0 ? act->post_trigger_s : 1;
        }
        rc = trace_action_config(r->a, act, &tc, why);
        rc = rc != 0 ? rc : stopping_event_filter(act, &stop_on, why);
        rc = rc != 0 ? rc : collect_trace(r->a, &o, p, &tc, duration_s, false, stop_on);
        break;
    }
    case RULES_ACTION_COLLECT_DUMP:
        rc = collect_dump(r->a, &o, p, dump_type_names[act->dump_type]);
        break;
    case RULES_ACTION_COLLECT_LOGS: {
        char *body = logs_action_body(act);
        rc = body != NULL
                 ? collect_logs(r->a, &o, p, body, strlen(body), duration_s, (int)act->format)
                 : UV_ENOMEM;
        cJSON_free(body);
        break;
    }
    case RULES_ACTION_COLLECT_LIVE_METRICS: {
        char *body = livemetrics_action_body(act);
        rc = body != NULL ? collect_livemetrics(r->a, &o, p, body, duration_s) : UV_ENOMEM;
        cJSON_free(body);
        break;
    }
    case RULES_ACTION_COLLECT_GCDUMP:
        rc = collect_gcdump(r->a, &o, p, 0);
        break;
    case RULES_ACTION_COLLECT_STACKS: {
        static const char *const formats[] = {[RULES_STACKS_JSON] = "Json",
                                              [RULES_STACKS_PLAIN_TEXT] = "PlainText",
                                              [RULES_STACKS_SPEEDSCOPE] = "Speedscope"};
        rc = collect_stacks(r->a, &o, p, formats[act->stacks_format]);
        break;
    }
    case RULES_ACTION_COLLECT_EXCEPTIONS: {
        static const char *const formats[] = {[RULES_LOGS_PLAIN_TEXT] = "PlainText",
                                              [RULES_LOGS_NDJSON] = "NewlineDelimitedJson",
                                              [RULES_LOGS_JSON_SEQUENCE] = "JsonSequence"};
        struct ev_exc_filters *filters = NULL;
        if (r->a->exceptions == NULL) {
            /* dotnet-monitor's CollectExceptionsOptions.Validate refuses the same */
            buf_printf(why, "CollectExceptions needs the exceptions history: set "
                            "InProcessFeatures:Exceptions:Enabled to true");
            rc = AGENT_E_INVAL;
        } else {
            rc = exceptions_action_filters(act, &filters, why);
        }
        rc = rc != 0 ? rc : collect_exceptions(r->a, &o, p, formats[act->exc_format], filters);
        break;
    }
    default:
        /* Not reached: LoadProfiler is refused when the rules are read, and action_start routes
         * Execute and the environment actions elsewhere. */
        buf_printf(why, "%s is not supported by dotmon", act->type_name);
        break;
    }
    trace_config_fini(&tc);
    ac->starting = false;
    if (rc != 0) {
        ac->collecting = false;
        return rc < 0 ? rc : AGENT_E_INVAL;
    }
    return 0;
}

/* Starts the action of step st; a failure to start is reported as the action's failure. */
static void action_start(struct rinst *ri, const struct rules_step *st)
{
    struct raction *ac = calloc(1, sizeof(*ac));
    if (ac == NULL) {
        rules_inst_action_done(ri->inst, st->index, false, NULL, 0, now_ms(ri->p->r));
        return;
    }
    ac->ri = ri;
    ac->a = ri->p->r->a;
    ac->index = st->index;
    ac->type = st->action->type;
    ac->next = ri->actions;
    ri->actions = ac;
    log_info(cat, "collection rule %s of process %" PRIu64 ": action %s starts", rule_name(ri),
             ri->p->pid, st->action->type_name);
    struct buf why;
    buf_init(&why, 512);
    int rc;
    switch (ac->type) {
    case RULES_ACTION_EXECUTE:
        rc = execute_start(ac, st, &why);
        break;
    case RULES_ACTION_GET_ENVIRONMENT_VARIABLE:
    case RULES_ACTION_SET_ENVIRONMENT_VARIABLE:
        rc = env_start(ac, st, &why);
        break;
    default:
        rc = collect_start(ac, st, &why);
        if (rc == 0 && ac->settled) { /* it ended before collect_start returned */
            collect_report(ac);
            action_free(ac);
        }
        break;
    }
    if (rc != 0) {
        if (buf_size(&why) == 0) {
            buf_printf(&why, "%s", agent_strerror(rc));
        }
        action_report(ac, false, NULL, 0, buf_cstr(&why));
        if (ac->spawn_failed) {
            uv_close((uv_handle_t *)&ac->proc, exec_on_closed); /* initialised all the same */
        } else {
            action_free(ac);
        }
    }
    buf_fini(&why);
}

/* Detaches a running action from its instance: no report; it frees itself. */
static void action_detach(struct raction *ac, bool kill)
{
    action_unlink(ac);
    if (ac->spawned) {
        if (kill) {
            uv_process_kill(&ac->proc, SIGTERM);
        }
        uv_close((uv_handle_t *)&ac->proc, exec_on_closed);
    } else if (ac->env != NULL) {
        ipc_env_cancel(ac->env);
        action_free(ac);
    } else if (ac->xc != NULL) {
        ipc_exchange_cancel(ac->xc);
        action_free(ac);
    } else if (ac->collecting) {
        /* The operation goes on, or is cancelled; collect_on_settled frees the action. */
        struct operation *op = op_registry_find(&ac->a->ops, ac->op_id);
        if (kill && op != NULL && !op_is_finished(op) && op->control.cancel != NULL) {
            op->control.cancel(op->ctx);
        }
    } else {
        action_free(ac);
    }
}

/* ---- instances ----------------------------------------------------------------------------- */

static void ri_log_state(struct rinst *ri)
{
    enum rules_state s = rules_inst_state(ri->inst);
    if (s == ri->said) {
        return;
    }
    ri->said = s;
    const char *why = rules_inst_state_reason(ri->inst);
    /* /trace/snapshot then answers that the ring will not run again (api_collect.c). */
    ring_registry_set_finished(ri->ring_entry, s == RULES_STATE_FINISHED, why);
    log_info(cat, "collection rule %s of process %" PRIu64 ": %s%s%s", rule_name(ri), ri->p->pid,
             rules_state_name(s), why != NULL && *why != '\0' ? ": " : "", why != NULL ? why : "");
}

static void ri_pump(struct rinst *ri)
{
    struct rules_step st;
    int rc;
    while ((rc = rules_inst_next_step(ri->inst, &st)) == 1) {
        if (st.kind == RULES_STEP_CANCEL) {
            for (struct raction *ac = ri->actions; ac != NULL; ac = ac->next) {
                if (ac->index == st.index) {
                    action_detach(ac, true);
                    break;
                }
            }
            rules_inst_action_done(ri->inst, st.index, false, NULL, 0, now_ms(ri->p->r));
            continue;
        }
        action_start(ri, &st);
    }
    if (rc < 0) {
        log_warn(cat, "collection rule %s: %s", rule_name(ri), agent_strerror(rc));
    }
    ri_log_state(ri);
    ri_sync(ri);
    if (ri->p != NULL) {
        proc_maybe_resume(ri->p);
    }
}

static bool has_session(const struct rinst *ri)
{
    return rules_inst_rule(ri->inst)->trigger.type != RULES_TRIGGER_STARTUP;
}

/* The trigger is fed by decoded events (trigger_session.c), not by metrics. */
static bool is_event_fed(const struct rinst *ri)
{
    enum rules_trigger_source src = rules_trigger_source(&rules_inst_rule(ri->inst)->trigger);
    return src == RULES_SOURCE_HTTP || src == RULES_SOURCE_RUNTIME;
}

/*
 * Whether the trigger's session should run. An event-fed trigger's session also stays while the
 * rule's actions run (what comes meanwhile is not the trigger's: rules_inst takes no input then,
 * and the trigger starts anew after them): a session with Microsoft-Diagnostics-DiagnosticSource
 * that ends empties the runtime's one list of lines for every other session until it is set
 * again (collect/dsession.h), and a request that starts then is not seen by any of them; a
 * runtime trigger would lose the GC it was inside.
 */
static bool session_wanted(const struct rinst *ri)
{
    return has_session(ri) &&
           (rules_inst_trigger_active(ri->inst) ||
            (is_event_fed(ri) && rules_inst_state(ri->inst) == RULES_STATE_ACTION_EXECUTING));
}

/* A trigger session runs (or is stopping). */
static bool sess_live(const struct rinst *ri)
{
    return ri->sess != NULL || ri->tsess != NULL;
}

static void ri_on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct rinst *ri = ud;
    int rc = rules_inst_on_metric(ri->inst, s, now_ms(ri->p->r));
    if (rc == 1) {
        log_info(cat, "collection rule %s of process %" PRIu64 ": trigger %s fired (%s %s = %g)",
                 rule_name(ri), ri->p->pid, rules_inst_rule(ri->inst)->trigger.type_name,
                 s->provider, s->name, s->value);
        ri_pump(ri);
    } else if (rc < 0) {
        log_warn(cat, "collection rule %s: %s", rule_name(ri), agent_strerror(rc));
    }
}

/* What rules_inst_on_request or rules_inst_on_runtime returned. */
static void ri_fed(struct rinst *ri, int rc)
{
    if (rc == 1) {
        const struct rules_trigger *t = &rules_inst_rule(ri->inst)->trigger;
        char what[64] = "";
        if (t->type == RULES_TRIGGER_GC_PAUSE) {
            snprintf(what, sizeof(what), " (a GC pause of %.1f ms)",
                     (double)rules_inst_gc_pause_ticks(ri->inst) / (double)RULES_TICKS_PER_MS);
        }
        log_info(cat, "collection rule %s of process %" PRIu64 ": trigger %s fired%s",
                 rule_name(ri), ri->p->pid, t->type_name, what);
        ri_pump(ri);
    } else if (rc < 0) {
        log_warn(cat, "collection rule %s: %s", rule_name(ri), agent_strerror(rc));
    }
}

static void ri_on_request(void *ud, const struct rules_request_event *ev)
{
    struct rinst *ri = ud;
    ri_fed(ri, rules_inst_on_request(ri->inst, ev, now_ms(ri->p->r)));
}

static void ri_on_runtime(void *ud, const struct rules_runtime_event *ev)
{
    struct rinst *ri = ud;
    ri_fed(ri, rules_inst_on_runtime(ri->inst, ev, now_ms(ri->p->r)));
}

static void ri_on_started(void *ud)
{
    struct rinst *ri = ud;
    ri->backoff_ms = 0;
    log_debug(cat, "collection rule %s of process %" PRIu64 ": trigger session started",
              rule_name(ri), ri->p->pid);
}

static void ri_on_warning(void *ud, const char *kind, const char *message)
{
    struct rinst *ri = ud;
    log_warn(cat, "collection rule %s of process %" PRIu64 ": %s: %s", rule_name(ri), ri->p->pid,
             kind, message);
}

static void ri_on_kick(uv_timer_t *t);

static void ri_on_end(void *ud, int status, const char *reason)
{
    struct rinst *ri = ud;
    ri->sess = NULL;
    ri->tsess = NULL;
    if (ri->stopping) {
        ri->stopping = false;
        ri_sync(ri);
        return;
    }
    ri->backoff_ms = timeouts_backoff_next(&ri->r->a->timeouts, ri->backoff_ms);
    if (status == AGENT_E_PROTO) {
        ri->backoff_ms = agent_timeout(ri->r->a, TIMEOUT_BACKOFF_MAX);
    }
    log_info(cat,
             "collection rule %s of process %" PRIu64 ": trigger session: %s; next try in %" PRIu64
             " ms",
             rule_name(ri), ri->p->pid, reason, ri->backoff_ms);
    uv_timer_stop(&ri->kick);
    uv_timer_start(&ri->kick, ri_on_kick, ri->backoff_ms, 0);
}

static const struct msession_callbacks ri_callbacks = {.on_started = ri_on_started,
                                                       .on_sample = ri_on_sample,
                                                       .on_warning = ri_on_warning,
                                                       .on_end = ri_on_end};
static const struct tsession_callbacks ri_http_callbacks = {.on_started = ri_on_started,
                                                            .on_event = ri_on_request,
                                                            .on_runtime = ri_on_runtime,
                                                            .on_end = ri_on_end};

static bool ring_wanted(const struct rinst *ri)
{
    return ri->has_ring && has_session(ri) && rules_inst_trigger_active(ri->inst);
}

static void ri_on_ring_end(void *ud, int status, const char *reason)
{
    struct rinst *ri = ud;
    ri->ring = NULL;
    ri->ring_backoff_ms = timeouts_backoff_next(&ri->r->a->timeouts, ri->ring_backoff_ms);
    ri->ring_not_before = now_ms(ri->r) + (int64_t)ri->ring_backoff_ms;
    log_info(cat,
             "collection rule %s of process %" PRIu64 ": ring session ended (%s: %s); next try in "
             "%" PRIu64 " ms",
             rule_name(ri), ri->p != NULL ? ri->p->pid : 0, agent_strerror(status),
             reason != NULL ? reason : "", ri->ring_backoff_ms);
    /* A kick already due (the trigger session's) comes first; it re-arms for the ring. */
    if (ri->p != NULL && !uv_is_active((uv_handle_t *)&ri->kick)) {
        uv_timer_start(&ri->kick, ri_on_kick, ri->ring_backoff_ms, 0);
    }
}

/* Starts or stops the ring session to follow the instance's state. */
static void ri_ring_sync(struct rinst *ri)
{
    bool want = ring_wanted(ri);
    if (!want && ri->ring != NULL) {
        collect_trace_ring_stop(ri->ring);
        ri->ring = NULL;
        return;
    }
    if (!want || ri->ring != NULL) {
        return;
    }
    int64_t wait = ri->ring_not_before - now_ms(ri->r);
    if (wait > 0) {
        if (!uv_is_active((uv_handle_t *)&ri->kick)) {
            uv_timer_start(&ri->kick, ri_on_kick, (uint64_t)wait, 0);
        }
        return;
    }
    struct rules_run *r = ri->r;
    const struct rules_action *act = &rules_inst_rule(ri->inst)->actions[ri->ring_action];
    const struct ipc_process *p = find_process(r, ri->p->uid);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    struct buf why;
    buf_init(&why, 256);
    int rc = p == NULL ? AGENT_E_NOTFOUND : trace_action_config(r->a, act, &tc, &why);
    if (rc == 0) {
        struct ev_ring_limits lim = {.max_bytes = (size_t)act->ring_mb * 1024 * 1024,
                                     .max_age_ms = (uint64_t)act->pre_trigger_s * 1000};
        rc = collect_trace_ring_start(r->a, p, &tc, &lim, ri_on_ring_end, ri, &ri->ring);
    } else {
        trace_config_fini(&tc);
    }
    if (rc != 0) {
        ri->ring = NULL;
        ri_on_ring_end(ri, rc, buf_size(&why) > 0 ? buf_cstr(&why) : "cannot start");
    } else {
        ri->ring_backoff_ms = 0;
        log_info(cat,
                 "collection rule %s of process %" PRIu64 ": ring session started (%d s, %d MB)",
                 rule_name(ri), ri->p->pid, act->pre_trigger_s, act->ring_mb);
    }
    buf_fini(&why);
}

static void ri_on_kick(uv_timer_t *t)
{
    struct rinst *ri = t->data;
    ri_ring_sync(ri);
    bool want = session_wanted(ri);
    if (want && !sess_live(ri)) {
        int rc = is_event_fed(ri)
                     ? tsession_start(ri->p->r->a, &ri->p->ep, ri->p->major,
                                      &rules_inst_rule(ri->inst)->trigger, ri->interval_s,
                                      &ri_http_callbacks, ri, &ri->tsess)
                     : msession_start(ri->p->r->a, &ri->p->ep, ri->p->major, &ri->f, &ri_callbacks,
                                      ri, &ri->sess);
        if (rc != 0) {
            ri->backoff_ms = timeouts_backoff_next(&ri->r->a->timeouts, ri->backoff_ms);
            log_info(cat,
                     "collection rule %s of process %" PRIu64
                     ": cannot start the trigger session: %s; next try in %" PRIu64 " ms",
                     rule_name(ri), ri->p->pid, agent_strerror(rc), ri->backoff_ms);
            uv_timer_start(&ri->kick, ri_on_kick, ri->backoff_ms, 0);
        }
    } else if (!want && sess_live(ri) && !ri->stopping) {
        ri->stopping = true;
        if (ri->sess != NULL) {
            msession_stop(ri->sess);
        } else {
            tsession_stop(ri->tsess);
        }
    }
}

static void ri_on_deadline(uv_timer_t *t)
{
    struct rinst *ri = t->data;
    rules_inst_tick(ri->inst, now_ms(ri->p->r));
    ri_pump(ri);
}

/* Session and deadline follow the instance's state: changes happen on the next loop turn. */
static void ri_sync(struct rinst *ri)
{
    if (ri->p == NULL) {
        return;
    }
    bool want = session_wanted(ri);
    bool change = (want && !sess_live(ri)) || (!want && sess_live(ri) && !ri->stopping) ||
                  (ring_wanted(ri) != (ri->ring != NULL));
    if (change && !uv_is_active((uv_handle_t *)&ri->kick)) {
        uv_timer_start(&ri->kick, ri_on_kick, 0, 0);
    }
    int64_t dl = rules_inst_deadline(ri->inst);
    uv_timer_stop(&ri->deadline);
    if (dl != INT64_MAX && rules_inst_state(ri->inst) != RULES_STATE_FINISHED) {
        int64_t left = dl - now_ms(ri->p->r);
        uv_timer_start(&ri->deadline, ri_on_deadline, left > 0 ? (uint64_t)left : 0, 0);
    }
}

/* The session's filters: the trigger's one counter or instrument. */
static int ri_filters(struct rinst *ri, const struct rules_trigger *t, double global_s)
{
    struct metrics_filter *x = &ri->f.v[0];
    bool meter = t->type == RULES_TRIGGER_EVENT_METER;
    x->name = strdup(t->provider != NULL ? t->provider : "");
    x->names = calloc(1, sizeof(*x->names));
    if (x->name == NULL || x->names == NULL) {
        free(x->name);
        free(x->names);
        x->name = NULL;
        x->names = NULL;
        return UV_ENOMEM;
    }
    ri->f.n = 1;
    x->names[0] = t->name != NULL ? strdup(t->name) : NULL;
    x->nnames = x->names[0] != NULL ? 1 : 0;
    x->meter = meter;
    x->interval_s = ri->interval_s;
    ri->f.interval_s = global_s;
    ri->f.counter_filter_s = meter ? 0 : ri->interval_s;
    return 0;
}

/* The requested counter interval of trigger t (GlobalCounter settings). */
static double trigger_interval(const struct agent *a, const struct rules_trigger *t)
{
    const char *prov = rules_trigger_interval_provider(t);
    return prov != NULL ? metrics_provider_interval(a->cfg, prov, a->metrics_interval_sec)
                        : a->metrics_interval_sec;
}

static void run_free(struct rules_run *r);

static void ri_on_closed(uv_handle_t *h)
{
    struct rinst *ri = h->data;
    if (--ri->open > 0) {
        return;
    }
    struct rules_run *r = ri->r;
    rules_inst_free(ri->inst);
    metrics_filters_fini(&ri->f);
    free(ri);
    if (--r->closing == 0 && r->retired) {
        run_free(r);
    }
}

static struct rinst *ri_new(struct rproc *pr, const struct rules_rule *rule,
                            const struct rules_process *proc)
{
    struct rules_run *r = pr->r;
    struct rinst *ri = calloc(1, sizeof(*ri));
    if (ri == NULL) {
        return NULL;
    }
    ri->r = r;
    ri->p = pr;
    ri->interval_s = trigger_interval(r->a, &rule->trigger);
    int rc = rules_inst_new(rule, proc, ri->interval_s, now_ms(r), &ri->inst);
    if (rc == 0 && rules_trigger_source(&rule->trigger) == RULES_SOURCE_METRICS) {
        rc = ri_filters(ri, &rule->trigger, r->a->metrics_interval_sec);
    }
    for (size_t k = 0; rc == 0 && k < rule->nactions; k++) {
        if (rule->actions[k].type == RULES_ACTION_COLLECT_TRACE && rule->actions[k].ring) {
            ri->has_ring = true; /* the first ring CollectTrace keeps the ring */
            ri->ring_action = k;
            /* Readers (/trace/snapshot, /metrics) find it through the registry. */
            rc = ring_registry_add(&r->a->rings, pr->pid, pr->uid, rule->name, proc->name,
                                   (uint64_t)rule->actions[k].ring_mb * 1024 * 1024, &ri->ring,
                                   &ri->ring_entry);
            break;
        }
    }
    if (rc != 0) {
        rules_inst_free(ri->inst);
        metrics_filters_fini(&ri->f);
        free(ri);
        return NULL;
    }
    uv_timer_init(r->a->loop, &ri->deadline);
    uv_timer_init(r->a->loop, &ri->kick);
    ri->deadline.data = ri->kick.data = ri;
    uv_unref((uv_handle_t *)&ri->deadline);
    uv_unref((uv_handle_t *)&ri->kick);
    ri->open = 2;
    ri->said = RULES_STATE_RUNNING;
    return ri;
}

/* Ends an instance: its session, its actions (left to run, no longer reported), its timers. */
static void ri_remove(struct rinst *ri)
{
    if (ri->sess != NULL) {
        msession_abort(ri->sess);
        ri->sess = NULL;
    }
    if (ri->tsess != NULL) {
        tsession_abort(ri->tsess);
        ri->tsess = NULL;
    }
    collect_trace_ring_stop(ri->ring);
    ri->ring = NULL;
    ring_registry_remove(&ri->r->a->rings, ri->ring_entry);
    ri->ring_entry = NULL;
    while (ri->actions != NULL) {
        action_detach(ri->actions, false);
    }
    ri->p = NULL;
    ri->r->closing++;
    uv_close((uv_handle_t *)&ri->deadline, ri_on_closed);
    uv_close((uv_handle_t *)&ri->kick, ri_on_closed);
}

/* ---- processes ----------------------------------------------------------------------------- */

/*
 * Listen mode holds a runtime suspended while rules apply (agent.c); once every rule of the
 * process has started (the actions of its Startup rules started, or the one they await), the
 * runtime is resumed, as dotnet-monitor does. Not when DiagnosticPort:HoldSuspended asks to hold
 * it until a trace starts; in connect mode ipc_discovery_resume does nothing.
 */
static void proc_maybe_resume(struct rproc *pr)
{
    if (pr->resumed || pr->adding) {
        return;
    }
    for (struct rinst *ri = pr->insts; ri != NULL; ri = ri->next) {
        if (!rules_inst_started(ri->inst)) {
            return;
        }
    }
    pr->resumed = true;
    struct agent *a = pr->r->a;
    if (a->listen_path == NULL || a->listen_hold) {
        return;
    }
    int rc = ipc_discovery_resume(a->disc, pr->uid);
    if (rc != 0) {
        log_warn(cat, "cannot resume process %" PRIu64 ": %s", pr->pid, agent_strerror(rc));
    } else {
        log_info(cat, "process %" PRIu64 ": collection rules started, runtime resumed", pr->pid);
    }
}

static void proc_remove(struct rules_run *r, struct rproc *pr)
{
    for (struct rproc **pp = &r->procs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == pr) {
            *pp = pr->next;
            break;
        }
    }
    while (pr->insts != NULL) {
        struct rinst *ri = pr->insts;
        pr->insts = ri->next;
        ri_remove(ri);
    }
    ipc_endpoint_fini(&pr->ep);
    free(pr);
}

/*
 * Applies to pr every valid rule whose filters match p and that has no instance on it yet, each
 * inserted in rule order and started. later: the process was added before (its command line
 * changed since).
 */
static void proc_apply(struct rules_run *r, struct rproc *pr, const struct ipc_process *p,
                       bool later)
{
    struct rules_process proc = agent_rules_process(p);
    proc.hostname = r->hostname;
    pr->adding = true;
    for (size_t i = 0; i < r->cfg->nrules; i++) {
        const struct rules_rule *rule = &r->cfg->rules[i];
        if (!rule->valid || !rules_filters_match(rule, &proc)) {
            continue;
        }
        struct rinst **at = &pr->insts;
        while (*at != NULL && rules_inst_rule((*at)->inst) < rule) {
            at = &(*at)->next;
        }
        if (*at != NULL && rules_inst_rule((*at)->inst) == rule) {
            continue; /* applied already */
        }
        struct rinst *ri = ri_new(pr, rule, &proc);
        if (ri == NULL) {
            log_warn(cat, "no memory for collection rule %s of process %" PRIu64, rule->name,
                     p->pid);
            continue;
        }
        ri->next = *at;
        *at = ri;
        log_info(cat, "collection rule %s applies to process %" PRIu64 " (uid %s)%s", rule->name,
                 p->pid, p->uid, later ? ", its command line now complete" : "");
        ri_pump(ri);
    }
    pr->adding = false;
    proc_maybe_resume(pr);
}

static void proc_add(struct rules_run *r, const struct ipc_process *p)
{
    struct rproc *pr = calloc(1, sizeof(*pr));
    if (pr == NULL || ipc_endpoint_copy(&pr->ep, &p->ep) != 0) {
        free(pr);
        log_warn(cat, "no memory for the collection rules of process %" PRIu64, p->pid);
        return;
    }
    pr->r = r;
    pr->pid = p->pid;
    memcpy(pr->uid, p->uid, sizeof(pr->uid));
    pr->major = ipc_runtime_major(p->clr_version);
    pr->next = r->procs;
    r->procs = pr;
    proc_apply(r, pr, p, false);
}

void rules_run_on_process(struct rules_run *r, const struct ipc_process *p, bool added)
{
    if (r == NULL || r->closed) {
        return;
    }
    for (struct rproc *pr = r->procs; pr != NULL; pr = pr->next) {
        if (strcmp(pr->uid, p->uid) == 0) {
            if (!added) {
                proc_remove(r, pr);
            }
            return;
        }
    }
    if (added) {
        proc_add(r, p);
    }
}

void rules_run_on_process_updated(struct rules_run *r, const struct ipc_process *p)
{
    if (r == NULL || r->closed) {
        return;
    }
    for (struct rproc *pr = r->procs; pr != NULL; pr = pr->next) {
        if (strcmp(pr->uid, p->uid) == 0) {
            proc_apply(r, pr, p, true);
            return;
        }
    }
}

void rules_run_close(struct rules_run *r)
{
    if (r == NULL || r->closed) {
        return;
    }
    r->closed = true;
    while (r->procs != NULL) {
        proc_remove(r, r->procs);
    }
    /* The instances point at the rules: the configuration lives until the loop has run out
     * (the handles of removed instances close on the next turn). */
}

static void run_free(struct rules_run *r)
{
    rules_config_free(r->cfg);
    free(r);
}

void rules_run_free(struct rules_run *r)
{
    if (r == NULL) {
        return;
    }
    rules_run_close(r);
    run_free(r);
}

/* Closes r; it frees itself once the handles of its instances have closed. */
static void run_retire(struct rules_run *r)
{
    if (r == NULL) {
        return;
    }
    rules_run_close(r);
    r->retired = true;
    if (r->closing == 0) {
        run_free(r);
    }
}

/* Reloaded rules with configuration errors: named (once per refused settings; the file's poll
 * sees the change inotify saw), the running rules stay. Takes now. */
static void reload_refuse(struct agent *a, const struct rules_config *rcfg, char *now)
{
    if (a->rules_refused == NULL || strcmp(now, a->rules_refused) != 0) {
        for (size_t i = 0; i < rcfg->nerrors; i++) {
            log_error(cat, "%s", rcfg->errors[i]);
        }
        log_error(cat,
                  "configuration changed, but its collection rules have %zu configuration "
                  "error(s) (above); the collection rules stay as they were",
                  rcfg->nerrors);
    }
    free(a->rules_refused);
    a->rules_refused = now;
}

void rules_run_reload(struct agent *a, const struct config *cfg)
{
    char *now = rules_settings(cfg, a->egress);
    struct rules_config *rcfg = NULL;
    int rc = now != NULL ? 0 : UV_ENOMEM;
    if (rc == 0 && a->rules_settings != NULL && strcmp(now, a->rules_settings) == 0) {
        free(now); /* unchanged */
        return;
    }
    rc = rc != 0 ? rc : rules_run_config(cfg, a->egress, &rcfg);
    if (rc != 0) {
        log_error(cat,
                  "configuration changed, but its collection rules cannot be loaded (%s); the "
                  "collection rules stay as they were",
                  agent_strerror(rc));
        free(now);
        return;
    }
    if (rcfg->nerrors > 0) {
        reload_refuse(a, rcfg, now);
        rules_config_free(rcfg);
        return;
    }
    free(a->rules_refused);
    a->rules_refused = NULL;
    free(a->rules_settings);
    a->rules_settings = now;
    log_rule_warnings(rcfg);
    /* Every instance stops (sessions stopped, actions left to run unreported, as at shutdown);
     * the new rules start over for every process, as for a newly discovered one. */
    run_retire(a->rules);
    a->rules = NULL;
    size_t nrules = rcfg->nrules;
    if (nrules > 0) {
        a->rules = run_new(a, rcfg); /* takes rcfg */
    } else {
        rules_config_free(rcfg);
    }
    if (nrules > 0 && a->rules == NULL) {
        log_error(cat, "configuration reload: out of memory; no collection rule runs");
    }
    log_info(cat, "collection rules reloaded: %zu rule(s)", a->rules != NULL ? nrules : 0);
    if (a->disc == NULL) {
        return;
    }
    /* Listen mode holds new runtimes for the rules while there are rules (agent.c). */
    if (a->listen_path != NULL && !a->listen_hold) {
        ipc_discovery_set_hold(a->disc, a->rules != NULL);
    }
    size_t n = ipc_discovery_count(a->disc);
    for (size_t i = 0; a->rules != NULL && i < n; i++) {
        rules_run_on_process(a->rules, ipc_discovery_at(a->disc, i), true);
    }
}

/* The "ring" object of /collectionrules/{name} (dotmon's addition): the ring's limits and use. */
static void ring_describe(const struct rinst *ri, cJSON *out)
{
    const struct rules_action *act = &rules_inst_rule(ri->inst)->actions[ri->ring_action];
    cJSON *o = cJSON_AddObjectToObject(out, "ring");
    if (o == NULL) {
        return;
    }
    const struct ev_ring *ring = collect_trace_ring_get(ri->ring);
    cJSON_AddBoolToObject(o, "running", ring != NULL);
    cJSON_AddNumberToObject(o, "preTriggerSeconds", act->pre_trigger_s);
    cJSON_AddNumberToObject(o, "postTriggerSeconds", act->post_trigger_s);
    cJSON_AddNumberToObject(o, "bytesLimit", (double)act->ring_mb * 1024 * 1024);
    struct ev_ring_stats st;
    memset(&st, 0, sizeof(st));
    if (ring != NULL) {
        ev_ring_get_stats(ring, &st);
    }
    cJSON_AddNumberToObject(o, "bytes", (double)st.bytes_used);
    cJSON_AddNumberToObject(o, "peakBytes", (double)st.bytes_peak);
    cJSON_AddNumberToObject(o, "metadataBytes", (double)st.metadata_bytes);
    cJSON_AddNumberToObject(o, "blocksKept", (double)st.blocks_kept);
    cJSON_AddNumberToObject(o, "blocksDiscarded", (double)st.blocks_discarded);
    cJSON_AddNumberToObject(o, "eventsKept", (double)st.events_kept);
    cJSON_AddNumberToObject(o, "eventsDiscarded", (double)st.events_discarded);
    struct nettrace_trace_info ti;
    double span = 0;
    if (ring != NULL && st.oldest_kept > 0 && ev_ring_trace_info(ring, &ti) == 0 &&
        ti.qpc_frequency > 0) {
        span = (double)(st.newest_kept - st.oldest_kept) / (double)ti.qpc_frequency;
    }
    cJSON_AddNumberToObject(o, "spanSeconds", span);
}

int rules_run_describe(struct rules_run *r, const char *uid, const char *name, cJSON **out)
{
    *out = NULL;
    struct rproc *pr = NULL;
    for (pr = r != NULL ? r->procs : NULL; pr != NULL; pr = pr->next) {
        if (strcmp(pr->uid, uid) == 0) {
            break;
        }
    }
    size_t n = 0;
    for (struct rinst *ri = pr != NULL ? pr->insts : NULL; ri != NULL; ri = ri->next) {
        n++;
    }
    /* pointers to instances (sizeof(void *): clang-tidy reads sizeof(*v) as a mistake) */
    const struct rules_inst **v = calloc(n + 1, sizeof(void *));
    if (v == NULL) {
        return UV_ENOMEM;
    }
    n = 0;
    for (struct rinst *ri = pr != NULL ? pr->insts : NULL; ri != NULL; ri = ri->next) {
        v[n++] = ri->inst;
    }
    int64_t now = r != NULL ? now_ms(r) : 0;
    int rc = 0;
    if (name == NULL) {
        *out = rules_describe(v, n, now);
        rc = *out != NULL ? 0 : UV_ENOMEM;
    } else {
        rc = AGENT_E_NOTFOUND;
        for (size_t i = 0; i < n; i++) {
            if (strcasecmp(rules_inst_rule(v[i])->name, name) == 0) {
                *out = rules_describe_detailed(v[i], now);
                rc = *out != NULL ? 0 : UV_ENOMEM;
                break;
            }
        }
        for (struct rinst *ri = pr != NULL ? pr->insts : NULL; rc == 0 && ri != NULL;
             ri = ri->next) {
            if (ri->has_ring && strcasecmp(rule_name(ri), name) == 0) {
                ring_describe(ri, *out);
            }
        }
    }
    free(v);
    return rc;
}
