/* SPDX-License-Identifier: MIT */
/* Process routes: /processes, /process, /env, /info, /metrics. */
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ipc_client.h"
#include "log.h"
#include "metrics.h"

static const char cat[] = "dotmon.api";

/* The environment block can be large (containers with many variables); cap it anyway. */
#define ENV_MAX_REPLY (4u * 1024 * 1024)

static cJSON *process_summary(struct agent *a, const struct ipc_process *p)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return NULL;
    }
    cJSON_AddNumberToObject(o, "pid", (double)p->pid);
    cJSON_AddStringToObject(o, "uid", p->uid);
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    cJSON_AddBoolToObject(o, "isDefault", api_is_default(a, p));
    return o;
}

void api_processes(struct agent *a, struct http_request *req)
{
    cJSON *arr = cJSON_CreateArray();
    size_t n = ipc_discovery_count(a->disc);
    for (size_t i = 0; arr != NULL && i < n; i++) {
        cJSON *o = process_summary(a, ipc_discovery_at(a->disc, i));
        if (o == NULL) {
            cJSON_Delete(arr);
            arr = NULL;
            break;
        }
        cJSON_AddItemToArray(arr, o);
    }
    api_json(req, 200, arr);
}

static void add_string_or_null(cJSON *o, const char *name, const char *value)
{
    if (value != NULL) {
        cJSON_AddStringToObject(o, name, value);
    } else {
        cJSON_AddNullToObject(o, name);
    }
}

void api_process(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    /* dotnet-monitor's ProcessInfo has exactly these fields (its schema forbids others); what
     * dotmon knows beyond them comes with extras=true. */
    bool extras = false;
    if (api_query_bool(req, "extras", &extras) != 0) {
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (o != NULL) {
        cJSON_AddNumberToObject(o, "pid", (double)p->pid);
        cJSON_AddStringToObject(o, "uid", p->uid);
        add_string_or_null(o, "name", p->name);
        add_string_or_null(o, "commandLine", p->command_line);
        add_string_or_null(o, "operatingSystem", p->os);
        add_string_or_null(o, "processArchitecture", p->arch);
        add_string_or_null(o, "managedEntryPointAssemblyName", p->entrypoint_assembly);
        if (extras) {
            add_string_or_null(o, "clrProductVersion", p->clr_version);
            add_string_or_null(o, "runtimeIdentifier", p->runtime_identifier);
        }
    }
    api_json(req, 200, o);
}

/* ---- /env: one ProcessEnvironment exchange, answered asynchronously ---- */

struct env_request {
    struct http_request *req; /* NULL once the client went away */
    struct ipc_env *x;        /* NULL once the request finished */
    cJSON *vars;              /* the answer being built */
    uint64_t pid;
};

static int env_add_entry(void *ud, const char *name, size_t name_len, const char *value,
                         size_t value_len)
{
    cJSON *o = ((struct env_request *)ud)->vars;
    (void)value_len;
    /* A name may repeat in a raw environment block; the first one wins, as getenv does. */
    if (name_len > 0 && cJSON_GetObjectItemCaseSensitive(o, name) == NULL &&
        cJSON_AddStringToObject(o, name, value) == NULL) {
        return -ENOMEM;
    }
    return 0;
}

static void env_on_abort(void *ud, struct http_request *r)
{
    struct env_request *er = ud;
    (void)r;
    er->req = NULL;
    if (er->x != NULL) {
        ipc_env_cancel(er->x);
        er->x = NULL;
    }
    cJSON_Delete(er->vars);
    free(er);
}

static void env_on_result(void *ud, const struct ipc_env_result *res)
{
    struct env_request *er = ud;
    struct http_request *req = er->req;
    cJSON *o = er->vars;
    er->x = NULL;
    http_request_on_abort(req, NULL, NULL);
    free(er);

    if (res->status != 0) {
        cJSON_Delete(o);
        api_problem(req, res->status == AGENT_E_TIMEOUT ? 504 : 502,
                    "the runtime did not answer ProcessEnvironment: %s",
                    agent_strerror(res->status));
        return;
    }
    if (!res->ok) {
        cJSON_Delete(o);
        api_problem(req, 400, "the runtime refused ProcessEnvironment: %s (0x%08x)",
                    ipc_hresult_text(res->hresult), res->hresult);
        return;
    }
    if (res->block_status != 0) {
        cJSON_Delete(o);
        api_problem(req, 502, "the runtime sent a malformed environment block: %s",
                    agent_strerror(res->block_status));
        return;
    }
    api_json(req, 200, o);
}

void api_env(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    struct env_request *er = calloc(1, sizeof(*er));
    cJSON *vars = cJSON_CreateObject();
    if (er == NULL || vars == NULL) {
        free(er);
        cJSON_Delete(vars);
        api_problem(req, 500, "out of memory");
        return;
    }
    er->req = req;
    er->pid = p->pid;
    er->vars = vars;
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    int rc = ipc_env_request(a->loop, &ep, a->ipc_timeout_ms, ENV_MAX_REPLY, env_add_entry,
                             env_on_result, er, &er->x);
    if (rc != 0) {
        cJSON_Delete(vars);
        free(er);
        api_problem(req, 502, "cannot reach process %llu: %s", (unsigned long long)p->pid,
                    agent_strerror(rc));
        return;
    }
    http_request_on_abort(req, env_on_abort, er);
    log_debug(cat, "ProcessEnvironment sent to %llu", (unsigned long long)p->pid);
}

/* ---- /info and /metrics ---- */

/* GET /healthz: the loop answers, nothing else is said. */
void api_healthz(struct agent *a, struct http_request *req)
{
    (void)a;
    http_respond(req, 200, "text/plain", NULL, 0, "Healthy", 7);
}

/*
 * GET /readyz: listening (this answer proves it) and discovery running: connect mode with its first
 * scan done, listen mode with the diagnostic socket bound and accepting.
 */
void api_readyz(struct agent *a, struct http_request *req)
{
    if (a->stopping || a->disc == NULL || !ipc_discovery_ready(a->disc)) {
        http_respond(req, 503, "text/plain", NULL, 0, "Unhealthy", 9);
        return;
    }
    http_respond(req, 200, "text/plain", NULL, 0, "Healthy", 7);
}

void api_info(struct agent *a, struct http_request *req)
{
    /* dotnet-monitor's fields only; extras=true adds dotmon's "metrics" member: each process's
     * metrics session state and why a process has none. */
    bool extras = false;
    if (api_query_bool(req, "extras", &extras) != 0) {
        return;
    }
    cJSON *o = cJSON_CreateObject();
    if (o != NULL) {
        char rt[64];
        snprintf(rt, sizeof(rt), "native (libuv %s)", uv_version_string());
        cJSON_AddStringToObject(o, "version", DOTMON_VERSION);
        cJSON_AddStringToObject(o, "runtimeVersion", rt);
        if (a->listen_path != NULL) {
            cJSON_AddStringToObject(o, "diagnosticPortMode", "Listen");
            cJSON_AddStringToObject(o, "diagnosticPortName", a->listen_path);
        } else {
            cJSON_AddStringToObject(o, "diagnosticPortMode", "Connect");
            cJSON_AddNullToObject(o, "diagnosticPortName");
        }
        cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
        /* dotnet-monitor's capability names (MonitorCapability); dotmon has metrics (when on)
         * and returns artifacts over HTTP, not the in-process features. */
        const struct {
            const char *name;
            bool enabled;
        } capabilities[] = {{"exceptions", false},
                            {"parameters", false},
                            {"callstacks", false},
                            {"metrics", a->metrics_enabled},
                            {"http_egress", true}};
        for (size_t i = 0; caps != NULL && i < sizeof(capabilities) / sizeof(capabilities[0]);
             i++) {
            cJSON *c = cJSON_CreateObject();
            if (c == NULL) {
                break;
            }
            cJSON_AddStringToObject(c, "name", capabilities[i].name);
            cJSON_AddBoolToObject(c, "enabled", capabilities[i].enabled);
            cJSON_AddItemToArray(caps, c);
        }
        if (extras) {
            cJSON_AddItemToObject(o, "metrics", metrics_status_json(a->metrics));
        }
    }
    api_json(req, 200, o);
}

void api_metrics(struct agent *a, struct http_request *req)
{
    struct buf body;
    buf_init(&body, 64 * 1024);
    buf_printf(&body,
               "# HELP dotmon_discovered_processes .NET processes dotmon currently sees\n"
               "# TYPE dotmon_discovered_processes gauge\n"
               "dotmon_discovered_processes %zu\n"
               "# HELP dotmon_http_requests_total HTTP requests dotmon has received\n"
               "# TYPE dotmon_http_requests_total counter\n"
               "dotmon_http_requests_total %llu\n",
               ipc_discovery_count(a->disc), (unsigned long long)a->requests_total);
    const struct agent_trace_stats *ts = &a->trace_stats;
    buf_printf(
        &body,
        "# HELP dotmon_traces_total Traces that have finished\n"
        "# TYPE dotmon_traces_total counter\n"
        "dotmon_traces_total %llu\n"
        "# HELP dotmon_trace_events_total Events in finished traces\n"
        "# TYPE dotmon_trace_events_total counter\n"
        "dotmon_trace_events_total %llu\n"
        "# HELP dotmon_trace_dropped_events_total Events the runtimes dropped from finished "
        "traces (their buffer was full)\n"
        "# TYPE dotmon_trace_dropped_events_total counter\n"
        "dotmon_trace_dropped_events_total %llu\n"
        "# HELP dotmon_trace_bytes_total Bytes of finished traces\n"
        "# TYPE dotmon_trace_bytes_total counter\n"
        "dotmon_trace_bytes_total %llu\n"
        "# HELP dotmon_trace_spooled_bytes_total Trace bytes that waited in a spool file for "
        "a slow client\n"
        "# TYPE dotmon_trace_spooled_bytes_total counter\n"
        "dotmon_trace_spooled_bytes_total %llu\n"
        "# HELP dotmon_trace_spool_limit_reached_total Traces whose client fell behind by "
        "Trace:SpoolLimitMB\n"
        "# TYPE dotmon_trace_spool_limit_reached_total counter\n"
        "dotmon_trace_spool_limit_reached_total %llu\n",
        (unsigned long long)ts->traces, (unsigned long long)ts->events,
        (unsigned long long)ts->dropped, (unsigned long long)ts->bytes,
        (unsigned long long)ts->spilled, (unsigned long long)ts->spool_limited);
    buf_printf(
        &body,
        "# HELP dotmon_runtime_sessions EventPipe sessions dotmon holds in runtimes now "
        "(traces, logs, metrics, live metrics, and stopped ones still closing)\n"
        "# TYPE dotmon_runtime_sessions gauge\n"
        "dotmon_runtime_sessions %zu\n"
        "# HELP dotmon_operations_running Operations that have not finished, by kind\n"
        "# TYPE dotmon_operations_running gauge\n"
        "dotmon_operations_running{kind=\"trace\"} %zu\n"
        "dotmon_operations_running{kind=\"dump\"} %zu\n"
        "dotmon_operations_running{kind=\"livemetrics\"} %zu\n"
        "dotmon_operations_running{kind=\"logs\"} %zu\n"
        "dotmon_operations_running{kind=\"gcdump\"} %zu\n",
        a->sessions.live + a->metric_sessions.live, op_registry_active(&a->ops, OP_KIND_TRACE),
        op_registry_active(&a->ops, OP_KIND_DUMP), op_registry_active(&a->ops, OP_KIND_LIVEMETRICS),
        op_registry_active(&a->ops, OP_KIND_LOGS), op_registry_active(&a->ops, OP_KIND_GCDUMP));
    metrics_render_rings(a, &body);
    /* Every process's own metrics (metrics.c); a partial text is still served, as the scrape
     * would otherwise lose dotmon's health lines too. */
    int rc = metrics_render(a->metrics, &body);
    if (rc != 0) {
        log_warn("dotmon.metrics", "/metrics: %s (the answer is partial)", agent_strerror(rc));
    }
    http_respond(req, 200, "text/plain; version=0.0.4; charset=utf-8", NULL, 0, buf_data(&body),
                 buf_size(&body));
    buf_fini(&body);
}
