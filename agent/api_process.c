/* SPDX-License-Identifier: MIT */
/* Process routes: /processes, /process, /env, /info, /metrics. */
#include "api.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "bufpool.h"
#include "err.h"
#include "ev_prom.h"
#include "exceptions.h"
#include "ipc_client.h"
#include "log.h"
#include "mcp.h"
#include "metrics.h"
#include "otel.h"

static const char cat[] = "dotmon.api";

/* The environment block can be large (containers with many variables); cap it anyway. */
#define ENV_MAX_REPLY (4u * 1024 * 1024)

/* dotmon's extras: where the process is and who it is (issue 34), each member only when known:
 * in node mode the pid the runtime sees for itself (its container's pid namespace), the pid in
 * dotmon's /proc, then its identity. */
static void add_identity(cJSON *o, const struct ipc_process *p)
{
    if (p->ns_pid != 0) {
        cJSON_AddNumberToObject(o, "nsPid", (double)p->ns_pid);
    }
    if (p->host_pid != 0) {
        cJSON_AddNumberToObject(o, "hostPid", (double)p->host_pid);
    }
    const struct ipc_identity *id = &p->identity;
    const struct {
        const char *name;
        const char *value;
    } fields[] = {{"containerId", id->container_id},
                  {"containerName", id->container_name},
                  {"podName", id->pod_name},
                  {"podNamespace", id->pod_namespace},
                  {"podUid", id->pod_uid}};
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (fields[i].value[0] != '\0') {
            cJSON_AddStringToObject(o, fields[i].name, fields[i].value);
        }
    }
}

static cJSON *process_summary(struct agent *a, const struct ipc_process *p, bool extras)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return NULL;
    }
    cJSON_AddNumberToObject(o, "pid", (double)p->pid);
    cJSON_AddStringToObject(o, "uid", p->uid);
    cJSON_AddStringToObject(o, "name", p->name ? p->name : "");
    cJSON_AddBoolToObject(o, "isDefault", api_is_default(a, p));
    if (extras) {
        add_identity(o, p);
    }
    return o;
}

void api_processes(struct agent *a, struct http_request *req)
{
    /* dotnet-monitor's fields; extras=true adds dotmon's: nsPid and hostPid when known, and who
     * each process is (containerId, podName…) */
    bool extras = false;
    if (api_query_bool(req, "extras", &extras) != 0) {
        return;
    }
    cJSON *arr = cJSON_CreateArray();
    size_t n = ipc_discovery_count(a->disc);
    for (size_t i = 0; arr != NULL && i < n; i++) {
        cJSON *o = process_summary(a, ipc_discovery_at(a->disc, i), extras);
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
            add_identity(o, p);
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
    int rc = ipc_env_request(a->loop, &ep, agent_timeout(a, TIMEOUT_IPC_EXCHANGE), ENV_MAX_REPLY,
                             env_add_entry, env_on_result, er, &er->x);
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
        cJSON_AddStringToObject(o, "version", DOTMON_VERSION);
        /* dotnet-monitor says its own .NET runtime's version here and clients parse it as a
         * System.Version; dotmon has no .NET runtime: the newest .NET it speaks to
         * (docs/deviations.md §4.7). */
        cJSON_AddStringToObject(o, "runtimeVersion", API_DOTNET_VERSION);
        if (a->listen_path != NULL) {
            cJSON_AddStringToObject(o, "diagnosticPortMode", "Listen");
            cJSON_AddStringToObject(o, "diagnosticPortName", a->listen_path);
        } else {
            cJSON_AddStringToObject(o, "diagnosticPortMode", "Connect");
            cJSON_AddNullToObject(o, "diagnosticPortName");
        }
        cJSON *caps = cJSON_AddArrayToObject(o, "capabilities");
        /* dotnet-monitor's capability names (its MonitorCapabilityConstants), in its order;
         * dotmon has metrics (when on), returns artifacts over HTTP, serves call stacks from the
         * runtime's own sampler (/stacks) and exceptions from its exception events (when on),
         * not parameter capturing (in-process IL rewriting). */
        const struct {
            const char *name;
            bool enabled;
        } capabilities[] = {{"exceptions", a->exceptions != NULL},
                            {"parameters", false},
                            {"call_stacks", true},
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
            char native[64];
            snprintf(native, sizeof(native), "libuv %s", uv_version_string());
            cJSON_AddStringToObject(o, "native", native);
            cJSON_AddItemToObject(o, "metrics", metrics_status_json(a->metrics));
            cJSON_AddItemToObject(o, "exceptions", exceptions_status_json(a->exceptions));
            cJSON *mj = mcp_status_json(a->mcp); /* NULL when the MCP endpoint is off */
            if (mj != NULL) {
                cJSON_AddItemToObject(o, "mcp", mj);
            }
            if (a->node_mode && a->disc != NULL) {
                /* Node mode: how many processes the last walk of /proc looked at, and how many
                 * of them dotmon may not look into (CAP_SYS_PTRACE missing). */
                size_t looked = 0;
                size_t denied = 0;
                ipc_discovery_node_stats(a->disc, &looked, &denied);
                cJSON *nd = cJSON_AddObjectToObject(o, "node");
                if (nd != NULL) {
                    cJSON_AddNumberToObject(nd, "processesLooked", (double)looked);
                    cJSON_AddNumberToObject(nd, "processesDenied", (double)denied);
                }
            }
            cJSON *ot = otel_status_json(a->otel); /* NULL when export is off */
            if (ot != NULL) {
                cJSON_AddItemToObject(o, "openTelemetry", ot);
            }
        }
    }
    api_json(req, 200, o);
}

/*
 * GET/HEAD /metrics, on the API and the metrics URLs: Prometheus text 0.0.4, streamed (chunked)
 * piece by piece as the connection drains, so that no number of processes or size of their names
 * cuts it. The first piece holds dotmon's own families (made for each scrape: they count the
 * requests); then the processes' families in name order, about SCRAPE_PIECE bytes at a time,
 * each piece ending at a line's end, the next one queued only once the queued bytes are at
 * SCRAPE_LOW_WATER or less. The processes' families come from metrics' shared text
 * (metrics_text_get: rendered once per change of the stores, copied piece by piece into the
 * connection) or, when there is none to share, are rendered piece by piece
 * (metrics_render_next; events/ev_prom.c writes every line, a big family goes on in the next
 * piece): what a scrape holds of its own is one piece, whatever the body's size. A piece that
 * cannot be made (no memory) ends the answer early, at the end of a line.
 */
#define SCRAPE_PIECE     (64u * 1024)
#define SCRAPE_LOW_WATER (64u * 1024)

struct scrape {
    struct agent *a;
    struct http_request *req;
    struct ev_prom_cursor cursor;
    struct metrics_text *text; /* the shared text being sent from text_off, or NULL */
    size_t text_off;
    bool started; /* dotmon's own families are out */
    uint64_t t0;  /* uv_hrtime() when the request was handed over (agent.scrape_hist) */
};

static void scrape_free(struct scrape *sc)
{
    ev_prom_cursor_fini(&sc->cursor);
    metrics_text_release(sc->text);
    free(sc);
}

/* Bytes of text[0..len) that make the next piece: about `piece`, up to the end of a line (the
 * text is whole lines; a line longer than a piece goes whole). */
static size_t piece_len(const char *text, size_t len, size_t piece)
{
    if (len <= piece) {
        return len;
    }
    for (size_t n = piece; n > 0; n--) {
        if (text[n - 1] == '\n') {
            return n;
        }
    }
    const char *nl = memchr(text + piece, '\n', len - piece);
    return nl != NULL ? (size_t)(nl - text) + 1 : len;
}

/* Queues the next piece of the shared text: 0, or the write's error. *last when it was the
 * text's end. */
static int scrape_text_step(struct scrape *sc, bool *last)
{
    size_t len;
    const char *data = metrics_text_data(sc->text, &len);
    size_t n = piece_len(data + sc->text_off, len - sc->text_off, SCRAPE_PIECE);
    int rc = n > 0 ? http_stream_write(sc->req, data + sc->text_off, n) : 0;
    sc->text_off += n;
    *last = sc->text_off == len;
    return rc;
}

/* dotmon's own families: gauges and counters of the whole agent, then per process and ring. */
static int scrape_own(struct agent *a, struct buf *out)
{
    const struct agent_trace_stats *ts = &a->trace_stats;
    uint64_t renders, render_ns;
    metrics_text_stats(a->metrics, &renders, &render_ns);
    struct bufpool_stats bp;
    bufpool_stats(&bp);
    const struct ev_prom_single fams[] = {
        {"dotmon_discovered_processes", "gauge", ".NET processes dotmon currently sees",
         ipc_discovery_count(a->disc)},
        {"dotmon_http_requests_total", "counter", "HTTP requests dotmon has received",
         a->requests_total},
        {"dotmon_traces_total", "counter", "Traces that have finished", ts->traces},
        {"dotmon_trace_events_total", "counter", "Events in finished traces", ts->events},
        {"dotmon_trace_dropped_events_total", "counter",
         "Events the runtimes dropped from finished traces (their buffer was full)", ts->dropped},
        {"dotmon_trace_bytes_total", "counter", "Bytes of finished traces", ts->bytes},
        {"dotmon_trace_spooled_bytes_total", "counter",
         "Trace bytes that waited in a spool file for a slow client", ts->spilled},
        {"dotmon_trace_spool_limit_reached_total", "counter",
         "Traces whose client fell behind by Trace:SpoolLimitMB", ts->spool_limited},
        {"dotmon_runtime_sessions", "gauge",
         "EventPipe sessions dotmon holds in runtimes now (traces, logs, metrics, live metrics, "
         "and stopped ones still closing)",
         a->sessions.live + a->metric_sessions.live},
        {"dotmon_buffer_pool_blocks_out", "gauge",
         "Relay buffers (pool blocks) holding bytes on their way to a client now", bp.out},
        {"dotmon_buffer_pool_blocks_max", "gauge", "The most relay buffers out at once so far",
         bp.max_out},
        {"dotmon_buffer_pool_resident_bytes", "gauge",
         "Memory of relay buffers: those out and the free ones not yet given back",
         (uint64_t)(bp.out + bp.committed) * BUFPOOL_BLOCK},
        {"dotmon_runtime_sessions_started", "gauge",
         "Of those, the sessions the runtimes have acknowledged: their events are being collected",
         a->sessions.started + a->metric_sessions.started},
        {"dotmon_metrics_renders_total", "counter",
         "Times the processes' families were rendered for /metrics (once per change of their "
         "metrics, shared by the scrapes until the next)",
         renders},
    };
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < sizeof(fams) / sizeof(fams[0]); i++) {
        rc = ev_prom_single_u64(out, &fams[i]);
    }
    const char *const render_s = "dotmon_metrics_render_seconds_total";
    rc = rc < 0 ? rc : ev_prom_family(out, render_s, "counter", "Time those renderings took");
    rc = rc < 0 ? rc : ev_prom_sample_double(out, render_s, NULL, (double)render_ns / 1e9);
    static const char *const key[] = {"kind"};
    const char *const running = "dotmon_operations_running";
    rc = rc < 0
             ? rc
             : ev_prom_family(out, running, "gauge", "Operations that have not finished, by kind");
    for (int k = 0; rc == 0 && k < OP_KIND_COUNT; k++) {
        const char *v[] = {op_kind_name((enum op_kind)k)};
        struct ev_prom_labels l = {.keys = key, .values = v, .n = 1};
        rc = ev_prom_sample_u64(out, running, &l, op_registry_active(&a->ops, (enum op_kind)k));
    }
    rc = rc < 0 ? rc
                : ev_prom_histogram(out, "dotmon_metrics_scrape_seconds",
                                    "GET /metrics from the request to its last byte queued (the "
                                    "later pieces wait for the client to take the earlier ones)",
                                    &a->scrape_hist);
    rc = rc < 0 ? rc : metrics_render_rings(a, out);
    rc = rc < 0 ? rc : otel_render_prom(a->otel, out);
    return rc < 0 ? rc : metrics_render_own(a->metrics, out);
}

/* Makes and queues the next piece; ends the answer after the last. */
static void scrape_step(struct scrape *sc)
{
    struct http_request *req = sc->req;
    struct buf piece;
    buf_init(&piece, 0);
    int rc = 0;
    if (!sc->started) {
        sc->started = true;
        rc = scrape_own(sc->a, &piece);
        sc->text = rc == 0 ? metrics_text_get(sc->a->metrics) : NULL;
    }
    size_t own = buf_size(&piece);
    while (rc == 0 && sc->text == NULL && !sc->a->stopping && !sc->cursor.done &&
           buf_size(&piece) == own) {
        rc = metrics_render_next(sc->a->metrics, &sc->cursor, SCRAPE_PIECE, &piece);
    }
    bool last = rc != 0 || sc->a->stopping || (sc->text == NULL && sc->cursor.done);
    if (rc != 0) { /* whole lines only: what is there is valid text; the rest is left out */
        log_warn("dotmon.metrics", "/metrics: %s (the answer leaves families out)",
                 agent_strerror(rc));
    }
    size_t len = 0;
    char *data = buf_size(&piece) > 0 ? buf_steal(&piece, &len) : NULL;
    buf_fini(&piece);
    int wrc = data != NULL ? http_stream_write_owned(req, data, data, len) : 0;
    if (wrc == 0 && !last && sc->text != NULL) {
        wrc = scrape_text_step(sc, &last);
    }
    if (wrc == 0 && !last) {
        return; /* the next piece at the drain */
    }
    /* Done, or the write failed (client gone, too slow, no memory): whatever the error, the
     * request is finished here and sc freed, not left to an abort callback that may not come. */
    http_request_on_abort(req, NULL, NULL);
    http_stream_on_drain(req, 0, NULL, NULL);
    if (wrc == 0) {
        ev_prom_hist_add(&sc->a->scrape_hist, uv_hrtime() - sc->t0);
    }
    scrape_free(sc);
    if (wrc != 0) {
        http_stream_abort(req); /* a truncated transfer; frees req, closes (again) the connection */
    } else {
        (void)http_stream_end(req);
    }
}

static void scrape_on_drain(void *ud, struct http_request *r)
{
    (void)r;
    scrape_step(ud);
}

static void scrape_on_abort(void *ud, struct http_request *r)
{
    (void)r;
    scrape_free(ud);
}

static const char prom_ctype[] = "text/plain; version=0.0.4; charset=utf-8";

void api_metrics_dotmon(struct agent *a, struct http_request *req)
{
    struct buf out;
    buf_init(&out, 0);
    int rc = scrape_own(a, &out);
    if (rc != 0) {
        api_problem(req, 500, "/metrics/dotmon: %s", agent_strerror(rc));
    } else {
        http_respond(req, 200, prom_ctype, NULL, 0, buf_data(&out), buf_size(&out));
    }
    buf_fini(&out);
}

void api_metrics(struct agent *a, struct http_request *req)
{
    if (!a->metrics_enabled) {
        /* Metrics:Enabled=false (or --metrics false): dotnet-monitor answers this 400 on every
         * URL that still routes /metrics (the metrics URL is not bound at all then). */
        api_problem(req, 400, "%s", API_DM_METRICS_DISABLED);
        return;
    }
    struct scrape *sc = calloc(1, sizeof(*sc));
    if (sc == NULL) {
        api_problem(req, 500, "out of memory");
        return;
    }
    sc->a = a;
    sc->req = req;
    sc->t0 = uv_hrtime();
    ev_prom_cursor_init(&sc->cursor);
    int rc = http_stream_begin(req, 200, prom_ctype, NULL, 0);
    if (rc != 0) {
        scrape_free(sc);
        if (rc == AGENT_E_CLOSED) {
            http_stream_abort(req);
        } else {
            api_problem(req, 500, "/metrics: %s", agent_strerror(rc));
        }
        return;
    }
    if (strcmp(http_request_method(req), "HEAD") == 0) { /* the GET's headers, no body */
        http_stream_end(req);
        scrape_free(sc);
        return;
    }
    http_request_on_abort(req, scrape_on_abort, sc);
    http_stream_on_drain(req, SCRAPE_LOW_WATER, scrape_on_drain, sc);
    scrape_step(sc);
}
