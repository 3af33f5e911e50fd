/* SPDX-License-Identifier: MIT */
/*
 * The HTTP side of the collection routes: GET/POST /trace, GET /trace/snapshot, GET /dump,
 * GET /gcdump, GET/POST /livemetrics, GET/POST /logs. Each parses its query (and body) and hands
 * the request to its collector (collectors.h: collect_trace.c, collect_dump.c, collect_gcdump.c,
 * collect_livemetrics.c, collect_logs.c), which the collection rules' actions call too; the
 * collector answers the request. /trace/snapshot writes a collection rule's ring (found through
 * the ring registry) as it is now. (/profile, which no rule collects, keeps its route beside its
 * collector in api_profile.c.)
 */
#include "api.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "artifact.h"
#include "buf.h"
#include "collectors.h"
#include "err.h"
#include "ev_gcheap.h"
#include "ev_ring.h"
#include "http_query.h"
#include "log.h"
#include "metrics_session.h"
#include "operations.h"
#include "ring_registry.h"
#include "trace_config.h"

static const char trace_cat[] = "dotmon.trace";

/* ---- GET/POST /trace, GET /trace/snapshot ---------------------------------------------------- */

/* The format query parameter: 0 with *ndjson set, or -1 once answered with a problem. */
static int trace_query_format(struct http_request *req, bool *ndjson)
{
    struct buf format;
    buf_init(&format, 64);
    int has_format = http_query_get(http_request_query(req), "format", &format);
    int rc = -1;
    *ndjson = has_format == 1 && strcasecmp(buf_cstr(&format), "ndjson") == 0;
    if (has_format < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (has_format == 1 && !*ndjson && strcasecmp(buf_cstr(&format), "nettrace") != 0) {
        api_problem(req, 400, "unknown format '%s' (nettrace or ndjson)", buf_cstr(&format));
    } else {
        rc = 0;
    }
    buf_fini(&format);
    return rc;
}

/* The route's start: the format query parameter, then the collector; takes ownership of tc. */
static void start_trace_req(struct agent *a, struct http_request *req, const struct ipc_process *p,
                            struct trace_config *tc, int64_t duration_s)
{
    bool ndjson = false;
    const struct artifact_origin o = {.req = req};
    if (trace_query_format(req, &ndjson) != 0) {
        trace_config_fini(tc);
        return;
    }
    (void)collect_trace(a, &o, p, tc, duration_s, ndjson, NULL);
}

void api_trace_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    int64_t duration = 0;
    if (api_parse_duration(req, &duration) != 0) {
        return;
    }
    struct buf profile, err;
    buf_init(&profile, 4096);
    buf_init(&err, 4096);
    int has = http_query_get(http_request_query(req), "profile", &profile);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (trace_config_from_profiles_with(has == 1 ? buf_cstr(&profile) : NULL,
                                               a->metrics_interval_sec, metrics_trace_interval,
                                               a->cfg, &tc, &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        start_trace_req(a, req, p, &tc, duration);
    }
    buf_fini(&profile);
    buf_fini(&err);
}

void api_trace_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415,
                    "POST /trace takes a JSON body (Content-Type application/json), not %s", ct);
        return;
    }
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    int64_t duration = 0;
    if (api_parse_duration(req, &duration) != 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct buf err;
    buf_init(&err, 4096);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    if (len == 0) {
        api_problem(req, 400, "POST /trace needs a JSON body with Providers");
    } else if (trace_config_from_json((const char *)body, len, &tc, &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        start_trace_req(a, req, p, &tc, duration);
    }
    buf_fini(&err);
}

/* GET /trace/snapshot: the ring is written whole at once; nothing calls back later. */
static void snapshot_on_lost(void *ud)
{
    (void)ud;
}

static const struct artifact_events snapshot_events = {.on_lost = snapshot_on_lost};

static int snapshot_write(void *ud, const uint8_t *p, size_t n)
{
    return artifact_write(ud, p, n) != 0 ? UV_EPIPE : 0;
}

/* An optional query parameter (NULL when absent, its value in v); -1 once answered with a
 * problem. */
static int query_optional(struct http_request *req, const char *key, struct buf *v,
                          const char **out)
{
    int has = http_query_get(http_request_query(req), key, v);
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
        return -1;
    }
    *out = has == 1 ? buf_cstr(v) : NULL;
    return 0;
}

void api_trace_snapshot(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    struct buf rule_q;
    buf_init(&rule_q, 256);
    const char *rule = NULL;
    if (query_optional(req, "rule", &rule_q, &rule) != 0) {
        buf_fini(&rule_q);
        return;
    }
    struct trace_job *job = NULL;
    const char *name = NULL;
    const struct ring_entry *fin = NULL;
    int n = ring_registry_find(&a->rings, p->uid, rule, &job, &name, &fin);
    if (n == 0) {
        api_problem(req, 404,
                    "no collection rule keeps a ring for process %llu%s%s%s; configure "
                    "PreTriggerSeconds on a CollectTrace action",
                    (unsigned long long)p->pid, rule != NULL ? " (rule '" : "",
                    rule != NULL ? rule : "", rule != NULL ? "')" : "");
    } else if (n > 1 && rule == NULL) {
        api_problem(req, 400,
                    "%d collection rules keep a ring for process %llu; pick one with rule=<name>",
                    n, (unsigned long long)p->pid);
    } else if (fin != NULL) {
        /* Final, not "retry": the ring runs again only if the rule is re-armed (a change to the
         * rules reloads it); a new process gets a new instance. 409 Conflict: the request
         * conflicts with the rule's state, which no retry changes (503 invites a retry; 410 would
         * say the ring can never come back, and a reload brings it back). */
        api_problem(req, 409,
                    "collection rule '%s' has finished%s%s; its ring of process %llu has stopped "
                    "and will not run again (a change to the collection rules' configuration "
                    "re-arms the rule; a new process gets its own)",
                    name, fin->why[0] != '\0' ? ": " : "", fin->why, (unsigned long long)p->pid);
    } else if (job == NULL || ev_ring_get_state(collect_trace_ring_get(job)) != EV_RING_BUFFERING) {
        api_problem(req, 503,
                    "the ring of collection rule '%s' is not running right now (its action is "
                    "writing it out, or its session is starting); retry in a few seconds",
                    name);
    } else {
        struct artifact *out = NULL;
        struct operation *op = NULL;
        if (artifact_admit(a, req, p, &collect_trace_spec, &snapshot_events, NULL, &out, &op) ==
            0) {
            char ts[32], filename[64];
            op_artifact_stamp(ts, sizeof(ts));
            snprintf(filename, sizeof(filename), "%s_%llu.nettrace", ts,
                     (unsigned long long)p->pid);
            op->artifact_name = strdup(filename);
            artifact_accept(out);
            int rc = artifact_begin(out, "application/octet-stream", filename);
            rc = rc != 0 ? rc : collect_trace_ring_snapshot(job, snapshot_write, out);
            struct ev_ring_stats st;
            ev_ring_get_stats(collect_trace_ring_get(job), &st);
            cJSON *extra = cJSON_CreateObject();
            cJSON_AddStringToObject(extra, "rule", name);
            cJSON_AddNumberToObject(extra, "events", (double)st.events_kept);
            cJSON_AddNumberToObject(extra, "ringBytes", (double)st.bytes_used);
            log_info(trace_cat,
                     "trace ring of %llu (rule %s): snapshot of %llu events, %llu bytes: %s",
                     (unsigned long long)p->pid, name, (unsigned long long)st.events_kept,
                     (unsigned long long)st.bytes_used, rc == 0 ? "ok" : agent_strerror(rc));
            if (rc == 0) {
                artifact_end_complete(out, extra);
            } else {
                artifact_end_fail(out, 500, "SnapshotFailed", agent_strerror(rc), NULL, extra);
            }
        }
    }
    buf_fini(&rule_q);
}

/* ---- GET /dump ------------------------------------------------------------------------------- */

/* The type query parameter (case-insensitive; absent: WithHeap, the collector's default). */
void api_dump_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    struct buf type_q;
    buf_init(&type_q, 64);
    const char *type = NULL;
    if (query_optional(req, "type", &type_q, &type) == 0) {
        const struct artifact_origin o = {.req = req};
        (void)collect_dump(a, &o, p, type);
    }
    buf_fini(&type_q);
}

/* ---- GET /gcdump ----------------------------------------------------------------------------- */

#define GCDUMP_SUMMARY_TOP 50 /* format=summary's types by default */

/* format=gcdump (the file, the default) or summary (the types summed up, JSON) and its top. */
void api_gcdump_get(struct agent *a, struct http_request *req)
{
    struct buf fmt;
    buf_init(&fmt, 64);
    int has = http_query_get(http_request_query(req), "format", &fmt);
    bool summary = has == 1 && strcasecmp(buf_cstr(&fmt), "summary") == 0;
    long top = 0;
    if (has < 0) {
        api_problem(req, 400, "malformed query string");
    } else if (has == 1 && !summary && strcasecmp(buf_cstr(&fmt), "gcdump") != 0) {
        api_problem(req, 400, "unknown format '%s' (gcdump or summary)", buf_cstr(&fmt));
    } else if (api_query_int(req, "top", 1, EV_GCHEAP_TOP_MAX, GCDUMP_SUMMARY_TOP, &top) == 0) {
        const struct ipc_process *p = api_select_process(a, req);
        if (p != NULL) {
            const struct artifact_origin o = {.req = req};
            (void)collect_gcdump(a, &o, p, summary ? (size_t)top : 0);
        }
    }
    buf_fini(&fmt);
}

/* ---- GET/POST /livemetrics ------------------------------------------------------------------- */

void api_livemetrics_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = api_select_process(a, req);
    int64_t duration = 0;
    if (p == NULL || api_parse_duration(req, &duration) != 0) {
        return;
    }
    struct metrics_filters f;
    if (metrics_filters_from_config(&f, a->cfg, a->metrics_interval_sec) != 0) {
        api_problem(req, 500, "the Metrics settings cannot be read (see dotmon's log)");
        return;
    }
    const struct artifact_origin o = {.req = req};
    (void)collect_livemetrics_filters(a, &o, p, &f, duration);
}

void api_livemetrics_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415, "POST /livemetrics takes a JSON body, not %s", ct);
        return;
    }
    const struct ipc_process *p = api_select_process(a, req);
    int64_t duration = 0;
    if (p == NULL || api_parse_duration(req, &duration) != 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    struct buf err;
    buf_init(&err, 4096);
    struct metrics_filters f;
    if (len == 0) {
        api_problem(req, 400, "POST /livemetrics needs a JSON body (EventMetricsConfiguration)");
    } else if (metrics_filters_from_json(&f, (const char *)body, len, a->metrics_interval_sec,
                                         &err) != 0) {
        api_problem(req, 400, "%s", buf_cstr(&err));
    } else {
        const struct artifact_origin o = {.req = req};
        (void)collect_livemetrics_filters(a, &o, p, &f, duration);
    }
    buf_fini(&err);
}

/* ---- GET/POST /logs -------------------------------------------------------------------------- */

/* The media type Accept picks as collect_logs numbers them (0 text/plain, 1
 * application/x-ndjson, 2 application/json-seq), or -1 (api_accept_pick). */
static int pick_format(const char *accept)
{
    static const char *const types[] = {"text/plain", "application/x-ndjson",
                                        "application/json-seq"};
    return api_accept_pick(accept, types, 3);
}

/* The POST body (LogsConfiguration; member names in any case). 0, or AGENT_E_INVAL with err. */

/* Process, duration and format, common to GET and POST; -1 when a problem was answered. */
static int logs_common(struct agent *a, struct http_request *req, const struct ipc_process **p,
                       int64_t *duration)
{
    int format = pick_format(http_request_header(req, "Accept"));
    if (format < 0) {
        api_problem(req, 406,
                    "/logs produces text/plain, application/x-ndjson or application/json-seq");
        return -1;
    }
    *p = api_select_process(a, req);
    if (*p == NULL || api_parse_duration(req, duration) != 0) {
        return -1;
    }
    return format;
}

void api_logs_get(struct agent *a, struct http_request *req)
{
    const struct ipc_process *p = NULL;
    int64_t duration = 0;
    int format = logs_common(a, req, &p, &duration);
    if (format < 0) {
        return;
    }
    struct buf level_q;
    buf_init(&level_q, 64);
    int has = http_query_get(http_request_query(req), "level", &level_q);
    if (has < 0) {
        api_problem(req, 400,
                    "level must be one of Trace, Debug, Information, Warning, Error, "
                    "Critical, None");
    } else {
        const struct artifact_origin o = {.req = req};
        (void)collect_logs_level(a, &o, p, has == 1 ? buf_cstr(&level_q) : NULL, duration, format);
    }
    buf_fini(&level_q);
}

void api_logs_post(struct agent *a, struct http_request *req)
{
    const char *ct = http_request_header(req, "Content-Type");
    if (ct != NULL && strncasecmp(ct, "application/json", 16) != 0 &&
        strncasecmp(ct, "text/json", 9) != 0 && strncasecmp(ct, "application/", 12) != 0) {
        api_problem(req, 415, "POST /logs takes a JSON body, not %s", ct);
        return;
    }
    const struct ipc_process *p = NULL;
    int64_t duration = 0;
    int format = logs_common(a, req, &p, &duration);
    if (format < 0) {
        return;
    }
    size_t len = 0;
    const uint8_t *body = http_request_body(req, &len);
    if (len == 0) {
        api_problem(req, 400, "POST /logs needs a JSON body (LogsConfiguration)");
        return;
    }
    const struct artifact_origin o = {.req = req};
    (void)collect_logs(a, &o, p, (const char *)body, len, duration, format);
}
