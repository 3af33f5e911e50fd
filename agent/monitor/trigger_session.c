/* SPDX-License-Identifier: MIT */
/* The EventPipe session of an ASP.NET or runtime trigger; see trigger_session.h. */
#include "trigger_session.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "buf.h"
#include "dsession.h"
#include "err.h"
#include "ev_native.h"
#include "ev_payload.h"
#include "ev_schemas.h"
#include "log.h"
#include "membudget.h"
#include "nettrace.h"
#include "trace_config.h"

static const char cat[] = "dotmon.rules";

#define DIAGNOSTIC_SOURCE "Microsoft-Diagnostics-DiagnosticSource"
#define ASPNET_HOSTING    "Microsoft.AspNetCore.Hosting"
/*
 * What a trigger session holds from its runtime (DiagnosticSource schemas, their index by
 * id, the UTF-8 scratch of one payload) is charged to a share of its own with this cap, and to
 * dotmon's budget: a few dozen schemas of a few KB are what a real runtime sends. Over it a schema
 * is not kept and an event too big for the scratch is skipped (both logged once).
 */
#define HS_SHARE_CAP (4ull * 1024 * 1024)

struct tsession {
    struct agent *a;
    const struct tsession_callbacks *cb;
    void *ud;
    struct dsession *ds; /* NULL once it ended or was aborted */
    struct nettrace_checker ck;
    struct ev_schemas schemas; /* DiagnosticSource's schemas by metadata id */
    bool runtime;              /* a runtime trigger's session: native events */
    int64_t qpc_freq;          /* 0 until the Trace object is read */
    uint32_t ptr_size;
    struct ev_record rec;
    struct ev_native_record nrec;
    char *scratch;
    size_t scratch_cap;
    struct mb_share share; /* schemas, schemas' index and scratch (HS_SHARE_CAP) */
    bool budget_said;      /* a refusal was logged */
};

static void hs_free(struct tsession *s)
{
    nettrace_checker_fini(&s->ck);
    ev_schemas_fini(&s->schemas);
    free(s->scratch);
    mb_share_fini(&s->share); /* gives back all of the above */
    free(s);
}

/* Logs once that what the runtime sent did not fit in the session's share. */
static void hs_refused(struct tsession *s, const char *what)
{
    if (!s->budget_said) {
        s->budget_said = true;
        log_warn(cat,
                 "a trigger session: the runtime's %s do not fit in the session's %llu "
                 "MiB of dotmon's memory budget; not kept (its events are skipped)",
                 what, (unsigned long long)(s->share.cap >> 20));
    }
}

/* Charges n bytes to the session's share; false (logged once) when refused. */
static bool hs_take(struct tsession *s, size_t n, const char *what)
{
    if (mb_charge(&s->share, n) == 0) {
        return true;
    }
    hs_refused(s, what);
    return false;
}

/* A metadata record: its schema kept by id (a record that does not parse is skipped). */
static void hs_on_metadata(void *ud, const struct nettrace_metadata *md, const uint8_t *p, size_t n)
{
    struct tsession *s = ud;
    /* Only DiagnosticSource's events are decoded by their schema (hs_on_event); a V6
     * redefinition replaces the earlier definition (ev_schemas.h). */
    if (strcasecmp(md->provider, DIAGNOSTIC_SOURCE) != 0) {
        ev_schemas_forget(&s->schemas, md->metadata_id);
        return;
    }
    struct ev_schema_entry *e = NULL;
    if (ev_schemas_define(&s->schemas, md, p, n, &e) == AGENT_E_BUDGET) {
        hs_refused(s, "event schemas");
    }
}

/* The Trace object's clock frequency and pointer size, once read (false before). */
static bool trace_known(struct tsession *s)
{
    if (s->qpc_freq == 0) {
        struct nettrace_trace_info ti;
        if (nettrace_trace_info(&s->ck, &ti) != 0 || ti.qpc_frequency <= 0) {
            return false;
        }
        s->qpc_freq = ti.qpc_frequency;
        s->ptr_size = ti.pointer_size == 4 ? 4 : 8;
    }
    return true;
}

/* An event timestamp (QPC ticks) in units per second of the same clock (on Linux
 * CLOCK_MONOTONIC, so the times of successive sessions with one runtime compare). */
static int64_t event_time(struct tsession *s, int64_t ts, int64_t units)
{
    if (!trace_known(s)) {
        return 0;
    }
    int64_t f = s->qpc_freq;
    return ts / f * units + ts % f * units / f;
}

static int64_t event_ms(struct tsession *s, int64_t ts)
{
    return event_time(s, ts, 1000);
}

/* Room for the UTF-8 of a payload's UTF-16 strings (at most 3/2 as many bytes). */
static bool scratch_for(struct tsession *s, size_t payload_len)
{
    size_t need = payload_len / 2 * 3 + 16;
    if (need > s->scratch_cap) {
        if (!hs_take(s, need - s->scratch_cap, "payloads")) {
            return false;
        }
        char *grown = realloc(s->scratch, need);
        if (grown == NULL) {
            mb_release(&s->share, need - s->scratch_cap);
            return false;
        }
        s->scratch = grown;
        s->scratch_cap = need;
    }
    return true;
}

/* A runtime trigger's event: its layout by (provider, id, version), decoded, then read. */
static void hs_on_native(struct tsession *s, const struct nettrace_event *ev)
{
    const struct ev_native_event *ne = ev_native_lookup(ev->provider, ev->event_id, ev->version);
    if (ne == NULL || !trace_known(s) || !scratch_for(s, ev->payload_len) ||
        ev_native_decode(&s->nrec, ne, ev->payload, ev->payload_len, s->ptr_size) != 0) {
        return;
    }
    struct rules_runtime_event re;
    int rc = rules_runtime_event_from_native(&s->nrec,
                                             event_time(s, ev->timestamp, RULES_TICKS_PER_SECOND),
                                             s->scratch, s->scratch_cap, &re);
    if (rc == 0) {
        s->cb->on_runtime(s->ud, &re);
    } else if (rc != AGENT_E_NOTFOUND) {
        log_debug(cat, "a runtime trigger event was skipped: %s", agent_strerror(rc));
    }
}

static void hs_on_event(void *ud, const struct nettrace_event *ev)
{
    struct tsession *s = ud;
    struct rules_request_event he;
    if (s->runtime) {
        hs_on_native(s, ev);
        return;
    }
    if (strcasecmp(ev->provider, DIAGNOSTIC_SOURCE) != 0) {
        /* The Hosting counters are the heartbeat (docs/rules.md §4); the provider's other events
         * (RequestStart, RequestStop: they pass its keywords 0) are not in dotnet-monitor's
         * provider→event map, so they wake nothing up (rules.md). */
        if (strcasecmp(ev->provider, ASPNET_HOSTING) != 0 ||
            strcmp(ev->event_name, "EventCounters") != 0) {
            return;
        }
        memset(&he, 0, sizeof(he));
        he.kind = RULES_REQUEST_HEARTBEAT;
        he.timestamp_ms = event_ms(s, ev->timestamp);
        s->cb->on_event(s->ud, &he);
        return;
    }
    const struct ev_schema_entry *se = ev_schemas_find(&s->schemas, ev->metadata_id);
    const struct ev_schema *sc = se != NULL ? se->schema : NULL;
    if (sc == NULL || ev_record_decode(&s->rec, sc, ev->payload, ev->payload_len) != 0) {
        return;
    }
    if (!scratch_for(s, ev->payload_len)) {
        return;
    }
    int rc = rules_request_event_from_record(&s->rec, event_ms(s, ev->timestamp), s->scratch,
                                             s->scratch_cap, &he);
    if (rc == 0) {
        s->cb->on_event(s->ud, &he);
    } else if (rc != AGENT_E_NOTFOUND) {
        log_debug(cat, "an ASP.NET trigger event was skipped: %s", agent_strerror(rc));
    }
}

/* ---- the consumer of the decoded session: nettrace ---- */

static void hs_started(void *ctx, uint64_t session_id, int version)
{
    struct tsession *s = ctx;
    log_debug(cat, "%s trigger session 0x%" PRIx64 " (CollectTracing%d) started",
              s->runtime ? "runtime" : "ASP.NET", session_id, version);
    if (s->cb->on_started != NULL) {
        s->cb->on_started(s->ud);
    }
    if (s->runtime) {
        /* A suspension seen by an earlier session of this trigger has no restart to come. */
        struct rules_runtime_event re = {.kind = RULES_RUNTIME_SESSION_START};
        s->cb->on_runtime(s->ud, &re);
    }
}

static int hs_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct tsession *s = ctx;
    return nettrace_feed(&s->ck, p, n);
}

static void hs_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct tsession *s = ctx;
    nettrace_error_line(&s->ck, rc, out, cap);
}

/* The last call either way: on_end with the status (0 for a stream that ended) and words. */
static void hs_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct tsession *s = ctx;
    (void)hresult;
    s->ds = NULL;
    s->cb->on_end(s->ud, code, reason);
    hs_free(s);
}

static void hs_finish(void *ctx, const char *how)
{
    hs_error(ctx, 0, 0, how);
}

static const struct dsession_consumer hs_consumer = {.started = hs_started,
                                                     .feed = hs_feed,
                                                     .describe = hs_describe,
                                                     .finish = hs_finish,
                                                     .error = hs_error};

/* The CollectTracing configuration: the trigger's session as a POST /trace body, parsed as one. */
static int build_config(const struct agent *a, const struct rules_trigger *t,
                        double counter_interval_s, struct trace_config *tc)
{
    struct rules_session rs;
    struct rules_session_options o = {.counter_interval_s = counter_interval_s,
                                      .max_time_series = a->metrics_max_time_series,
                                      .max_histograms = a->metrics_max_histograms};
    int rc = rules_trigger_session(t, &o, &rs);
    if (rc != 0) {
        return rc;
    }
    cJSON *j = rules_session_json(&rs);
    char *body = j != NULL ? cJSON_PrintUnformatted(j) : NULL;
    cJSON_Delete(j);
    if (body == NULL) {
        return UV_ENOMEM;
    }
    struct buf err;
    buf_init(&err, 0);
    rc = trace_config_from_json(body, strlen(body), tc, &err);
    if (rc == AGENT_E_INVAL) {
        log_warn(cat, "the %s trigger session: %s", t->type_name, buf_cstr(&err));
    }
    buf_fini(&err);
    cJSON_free(body);
    return rc;
}

int tsession_start(struct agent *a, const struct ipc_endpoint *ep, int major,
                   const struct rules_trigger *t, double counter_interval_s,
                   const struct tsession_callbacks *cb, void *ud, struct tsession **out)
{
    struct tsession *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->a = a;
    s->cb = cb;
    s->ud = ud;
    s->runtime = rules_trigger_source(t) == RULES_SOURCE_RUNTIME;
    mb_share_init(&s->share, "a trigger session", HS_SHARE_CAP);
    struct ev_schemas_config scfg = {.share = &s->share};
    ev_schemas_init(&s->schemas, &scfg);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    int rc = build_config(a, t, counter_interval_s, &tc);
    /* A trigger reads payloads only: no stack walk per event where the runtime can be asked. */
    tc.collect.disable_stackwalk = major >= IPC_NO_STACKWALK_MAJOR;
    if (rc == 0) {
        rc = nettrace_checker_init(&s->ck, NULL);
    }
    if (rc == 0) {
        if (!s->runtime) {
            nettrace_set_metadata_cb(&s->ck, hs_on_metadata, s); /* native events need none */
        }
        nettrace_set_event_cb(&s->ck, hs_on_event, s);
        struct dsession_config dc = {.collect = &tc.collect,
                                     .admission = &a->metric_sessions,
                                     .start_timeout_ms = agent_timeout(a, TIMEOUT_TRIGGER_START),
                                     .stop_timeout_ms = agent_timeout(a, TIMEOUT_TRIGGER_STOP)};
        rc = dsession_start(a->loop, ep, &dc, &hs_consumer, s, &s->ds);
    }
    trace_config_fini(&tc);
    if (rc != 0) {
        hs_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void tsession_stop(struct tsession *s)
{
    if (s->ds != NULL) {
        dsession_stop(s->ds); /* idempotent */
    }
}

void tsession_abort(struct tsession *s)
{
    dsession_abort(s->ds); /* accepts NULL */
    hs_free(s);
}
