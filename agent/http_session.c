/* SPDX-License-Identifier: MIT */
/* The EventPipe session of an ASP.NET or runtime trigger; see http_session.h. */
#include "http_session.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "buf.h"
#include "err.h"
#include "ev_native.h"
#include "ev_payload.h"
#include "ipc_session.h"
#include "log.h"
#include "membudget.h"
#include "nettrace.h"
#include "trace_config.h"

static const char cat[] = "dotmon.rules";

#define DIAGNOSTIC_SOURCE "Microsoft-Diagnostics-DiagnosticSource"
#define ASPNET_HOSTING    "Microsoft.AspNetCore.Hosting"
#define MAX_METADATA      65536 /* metadata ids kept (the runtime numbers them from 1) */
/*
 * What a trigger session holds from its runtime (DiagnosticSource schemas, their index by
 * id, the UTF-8 scratch of one payload) is charged to a share of its own with this cap, and to
 * dotmon's budget: a few dozen schemas of a few KB are what a real runtime sends. Over it a schema
 * is not kept and an event too big for the scratch is skipped (both logged once).
 */
#define HS_SHARE_CAP (4ull * 1024 * 1024)

struct hsession {
    struct agent *a;
    const struct hsession_callbacks *cb;
    void *ud;
    struct ipc_session *sess;
    struct nettrace_checker ck;
    struct ev_schema **schemas; /* by metadata id */
    size_t nschemas;
    bool runtime;     /* a runtime trigger's session: native events */
    int64_t qpc_freq; /* 0 until the Trace object is read */
    uint32_t ptr_size;
    struct ev_record rec;
    struct ev_native_record nrec;
    char *scratch;
    size_t scratch_cap;
    struct mb_share share; /* schemas, schemas' index and scratch (HS_SHARE_CAP) */
    size_t *schema_bytes;  /* charged per schema, by metadata id (nschemas entries) */
    bool budget_said;      /* a refusal was logged */
    bool stopping;
    bool failed; /* the stream was unreadable: ending after an abort */
};

static void hs_free(struct hsession *s)
{
    nettrace_checker_fini(&s->ck);
    for (size_t i = 0; i < s->nschemas; i++) {
        ev_schema_free(s->schemas[i]);
    }
    free(s->schemas);
    free(s->schema_bytes);
    free(s->scratch);
    mb_share_fini(&s->share); /* gives back all of the above */
    free(s);
}

/* Charges n bytes to the session's share; false (logged once) when refused. */
static bool hs_take(struct hsession *s, size_t n, const char *what)
{
    if (mb_charge(&s->share, n) == 0) {
        return true;
    }
    if (!s->budget_said) {
        s->budget_said = true;
        log_warn(cat,
                 "a trigger session: the runtime's %s do not fit in the session's %llu "
                 "MiB of dotmon's memory budget; not kept (its events are skipped)",
                 what, (unsigned long long)(s->share.cap >> 20));
    }
    return false;
}

/* A metadata record: its schema kept by id (a record that does not parse is skipped). */
static void hs_on_metadata(void *ud, const struct nettrace_metadata *md, const uint8_t *p, size_t n)
{
    struct hsession *s = ud;
    uint32_t id = md->metadata_id;
    if (id < s->nschemas && s->schemas[id] != NULL) { /* V6: a redefinition */
        ev_schema_free(s->schemas[id]);
        s->schemas[id] = NULL;
        mb_release(&s->share, s->schema_bytes[id]);
        s->schema_bytes[id] = 0;
    }
    /* Only DiagnosticSource's events are decoded by their schema (hs_on_event). */
    if (id >= MAX_METADATA || strcasecmp(md->provider, DIAGNOSTIC_SOURCE) != 0) {
        return;
    }
    if (id >= s->nschemas) {
        size_t cap = s->nschemas > 0 ? s->nschemas : 64;
        while (cap <= id) {
            cap *= 2;
        }
        size_t per = sizeof(void *) + sizeof(size_t);
        if (!hs_take(s, (cap - s->nschemas) * per, "metadata ids")) {
            return;
        }
        /* pointers (sizeof(void *): clang-tidy reads sizeof(*grown) as a mistake) */
        struct ev_schema **grown = realloc(s->schemas, cap * sizeof(void *));
        if (grown != NULL) {
            memset(grown + s->nschemas, 0, (cap - s->nschemas) * sizeof(void *));
            s->schemas = grown;
        }
        size_t *sizes = grown != NULL ? realloc(s->schema_bytes, cap * sizeof(size_t)) : NULL;
        if (sizes == NULL) {
            mb_release(&s->share, (cap - s->nschemas) * per);
            return; /* its events are skipped */
        }
        memset(sizes + s->nschemas, 0, (cap - s->nschemas) * sizeof(size_t));
        s->schema_bytes = sizes;
        s->nschemas = cap;
    }
    struct ev_schema *schema = NULL;
    int rc = md->v6 ? ev_schema_parse_v6(p, n, &schema) : ev_schema_parse(p, n, &schema);
    if (rc != 0) {
        return;
    }
    size_t sb = sizeof(*schema) + (size_t)schema->nfields * sizeof(struct ev_field) + n + 64;
    if (!hs_take(s, sb, "event schemas")) {
        ev_schema_free(schema);
        return;
    }
    s->schemas[id] = schema;
    s->schema_bytes[id] = sb;
}

/* The Trace object's clock frequency and pointer size, once read (false before). */
static bool trace_known(struct hsession *s)
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
static int64_t event_time(struct hsession *s, int64_t ts, int64_t units)
{
    if (!trace_known(s)) {
        return 0;
    }
    int64_t f = s->qpc_freq;
    return ts / f * units + ts % f * units / f;
}

static int64_t event_ms(struct hsession *s, int64_t ts)
{
    return event_time(s, ts, 1000);
}

/* Room for the UTF-8 of a payload's UTF-16 strings (at most 3/2 as many bytes). */
static bool scratch_for(struct hsession *s, size_t payload_len)
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
static void hs_on_native(struct hsession *s, const struct nettrace_event *ev)
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
    struct hsession *s = ud;
    struct rules_http_event he;
    if (s->failed) {
        return;
    }
    if (s->runtime) {
        hs_on_native(s, ev);
        return;
    }
    if (strcasecmp(ev->provider, DIAGNOSTIC_SOURCE) != 0) {
        /* The Hosting counters are the heartbeat (EVENTS.md §6.2); the provider's other events
         * (RequestStart, RequestStop: they pass its keywords 0) are not in dotnet-monitor's
         * provider→event map, so they wake nothing up (§6). */
        if (strcasecmp(ev->provider, ASPNET_HOSTING) != 0 ||
            strcmp(ev->event_name, "EventCounters") != 0) {
            return;
        }
        memset(&he, 0, sizeof(he));
        he.kind = RULES_HTTP_HEARTBEAT;
        he.timestamp_ms = event_ms(s, ev->timestamp);
        s->cb->on_event(s->ud, &he);
        return;
    }
    const struct ev_schema *sc = ev->metadata_id < s->nschemas ? s->schemas[ev->metadata_id] : NULL;
    if (sc == NULL || ev_record_decode(&s->rec, sc, ev->payload, ev->payload_len) != 0) {
        return;
    }
    if (!scratch_for(s, ev->payload_len)) {
        return;
    }
    int rc = rules_http_event_from_record(&s->rec, event_ms(s, ev->timestamp), s->scratch,
                                          s->scratch_cap, &he);
    if (rc == 0) {
        s->cb->on_event(s->ud, &he);
    } else if (rc != AGENT_E_NOTFOUND) {
        log_debug(cat, "an ASP.NET trigger event was skipped: %s", agent_strerror(rc));
    }
}

static void hs_on_started(void *ud, uint64_t session_id, int version)
{
    struct hsession *s = ud;
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

static void hs_on_data(void *ud, const uint8_t *p, size_t n)
{
    struct hsession *s = ud;
    if (s->failed) {
        return;
    }
    int rc = nettrace_feed(&s->ck, p, n);
    if (rc == 0) {
        return;
    }
    /* An unreadable stream: stop the runtime's session in the background and end now. */
    char line[256], reason[320];
    nettrace_error_line(&s->ck, rc, line, sizeof(line));
    snprintf(reason, sizeof(reason), "the event stream cannot be read: %s", line);
    s->failed = true;
    struct ipc_session *sess = s->sess;
    s->sess = NULL;
    ipc_session_abort(sess);
    s->cb->on_end(s->ud, AGENT_E_PROTO, reason);
    hs_free(s);
}

static void hs_on_end(void *ud, int status, uint32_t hresult)
{
    struct hsession *s = ud;
    char reason[256];
    ipc_session_end_reason(status, hresult, s->stopping, reason, sizeof(reason));
    s->sess = NULL;
    s->cb->on_end(s->ud, status, reason);
    hs_free(s);
}

static const struct ipc_session_callbacks hs_callbacks = {
    .on_started = hs_on_started, .on_data = hs_on_data, .on_end = hs_on_end};

/* The CollectTracing configuration: the trigger's session as a POST /trace body, parsed as one. */
static int build_config(const struct rules_trigger *t, double counter_interval_s,
                        struct trace_config *tc)
{
    struct rules_session rs;
    struct rules_session_options o = {.counter_interval_s = counter_interval_s};
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

int hsession_start(struct agent *a, const struct ipc_endpoint *ep, int major,
                   const struct rules_trigger *t, double counter_interval_s,
                   const struct hsession_callbacks *cb, void *ud, struct hsession **out)
{
    struct hsession *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->a = a;
    s->cb = cb;
    s->ud = ud;
    s->runtime = rules_trigger_source(t) == RULES_SOURCE_RUNTIME;
    mb_share_init(&s->share, "a trigger session", HS_SHARE_CAP);
    struct trace_config tc;
    memset(&tc, 0, sizeof(tc));
    int rc = build_config(t, counter_interval_s, &tc);
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
        rc = ipc_session_start(a->loop, &a->metric_sessions, ep, &tc.collect,
                               agent_timeout(a, TIMEOUT_TRIGGER_START), &hs_callbacks, s, &s->sess);
    }
    trace_config_fini(&tc);
    if (rc != 0) {
        hs_free(s);
        return rc;
    }
    *out = s;
    return 0;
}

void hsession_stop(struct hsession *s)
{
    if (s->stopping || s->sess == NULL) {
        return;
    }
    s->stopping = true;
    ipc_session_stop(s->sess, agent_timeout(s->a, TIMEOUT_TRIGGER_STOP));
}

void hsession_abort(struct hsession *s)
{
    if (s->sess != NULL) {
        ipc_session_abort(s->sess);
        s->sess = NULL;
    }
    hs_free(s);
}
