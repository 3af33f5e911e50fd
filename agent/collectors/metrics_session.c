/* SPDX-License-Identifier: MIT */
/* One metrics session with one runtime; see metrics_session.h. */
#include "metrics_session.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cJSON.h>
#include <uv.h>

#include "agent.h"
#include "dsession.h"
#include "err.h"
#include "ev_store.h"
#include "ev_stream.h"
#include "log.h"
#include "num.h"
#include "operations.h"

static const char cat[] = "dotmon.metrics";

#define METER_PROVIDER "System.Diagnostics.Metrics"
#define RUNTIME        "System.Runtime"
#define BUFFER_MB      16
#define ARGS_MAX       4096
/* Base2ExponentialHistogram (docs/events.md §3.7): .NET 10's opt-in bucket histograms, per
 * interval (reportDeltas) like the quantiles they replace; 160 buckets and scale 20 are the
 * runtime's and OTel's defaults. */
#define EXP_HIST_MAJOR 10
#define EXP_HIST_SPEC  "scale=20;maxBuckets=160;reportDeltas=true"

/* dotnet-monitor's default EventCounters providers (MonitoringSourceConfiguration). */
static const char *const default_counter_providers[] = {RUNTIME, "Microsoft.AspNetCore.Hosting",
                                                        "Grpc.AspNetCore.Server"};

/* ---- filters ---- */

static struct metrics_filter *find_filter(struct metrics_filters *f, const char *name, bool meter)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->v[i].meter == meter && strcasecmp(f->v[i].name, name) == 0) {
            return &f->v[i];
        }
    }
    return NULL;
}

/*
 * A provider or meter name goes into the runtime's argument strings: one that the runtime would
 * split or widen (',', ';', '=', quotes, '\\', line breaks, the wildcard '*', spaces around it)
 * is refused rather than enabling more than asked (every meter into the shared aggregation).
 */
static bool valid_name(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 256 || name[0] == ' ' || name[n - 1] == ' ' || name[0] == '\t' ||
        name[n - 1] == '\t') {
        return false;
    }
    return strpbrk(name, "*,;=\"\\\r\n") == NULL;
}

static int add_filter(struct metrics_filters *f, const char *name, bool meter,
                      struct metrics_filter **out)
{
    if (!valid_name(name)) {
        return AGENT_E_INVAL;
    }
    struct metrics_filter *x = find_filter(f, name, meter);
    if (x == NULL) {
        if (f->n >= METRICS_MAX_FILTERS) {
            return AGENT_E_TOOBIG;
        }
        x = &f->v[f->n];
        memset(x, 0, sizeof(*x));
        x->name = strdup(name);
        if (x->name == NULL) {
            return UV_ENOMEM;
        }
        x->meter = meter;
        x->interval_s = f->interval_s;
        f->n++;
    }
    *out = x;
    return 0;
}

static int add_name(struct metrics_filter *x, const char *name)
{
    if (x->nnames >= METRICS_MAX_NAMES) {
        return AGENT_E_TOOBIG;
    }
    char **grown = realloc(x->names, (x->nnames + 1) * sizeof(*grown));
    if (grown == NULL) {
        return UV_ENOMEM;
    }
    x->names = grown;
    x->names[x->nnames] = strdup(name);
    if (x->names[x->nnames] == NULL) {
        return UV_ENOMEM;
    }
    x->nnames++;
    return 0;
}

static int add_defaults(struct metrics_filters *f)
{
    struct metrics_filter *x = NULL;
    int rc = 0;
    for (size_t i = 0;
         rc == 0 && i < sizeof(default_counter_providers) / sizeof(default_counter_providers[0]);
         i++) {
        rc = add_filter(f, default_counter_providers[i], false, &x);
    }
    f->runtime_meter = true;
    return rc;
}

/* Metrics:Providers:<entry> / Metrics:Meters:<entry>, with their name lists: every entry in
 * .NET's order (config_children). */
static int read_config_list(struct metrics_filters *f, const struct config *cfg, bool meter)
{
    const char *list = meter ? "Metrics:Meters" : "Metrics:Providers";
    struct config_child ent[METRICS_MAX_FILTERS];
    struct config_child names[METRICS_MAX_NAMES];
    size_t n = 0;
    int rc = config_children(cfg, list, ent, METRICS_MAX_FILTERS, &n);
    char key[256];
    for (size_t i = 0; rc == 0 && i < n; i++) {
        snprintf(key, sizeof(key), "%s:%.*s:%s", list, (int)ent[i].len, ent[i].name,
                 meter ? "MeterName" : "ProviderName");
        const char *name = config_get(cfg, key);
        if (name == NULL || *name == '\0') {
            continue;
        }
        struct metrics_filter *x = NULL;
        rc = add_filter(f, name, meter, &x);
        if (rc == AGENT_E_INVAL) {
            log_error(cat,
                      "%s: \"%s\" is empty, has spaces around it, or holds one of "
                      "* , ; = \" \\ or a line break",
                      key, name);
        }
        snprintf(key, sizeof(key), "%s:%.*s:%s", list, (int)ent[i].len, ent[i].name,
                 meter ? "InstrumentNames" : "CounterNames");
        size_t nn = 0;
        rc = rc != 0 ? rc : config_children(cfg, key, names, METRICS_MAX_NAMES, &nn);
        for (size_t j = 0; rc == 0 && j < nn; j++) {
            char nkey[300];
            snprintf(nkey, sizeof(nkey), "%s:%.*s", key, (int)names[j].len, names[j].name);
            const char *v = config_get(cfg, nkey);
            rc = v != NULL ? add_name(x, v) : 0;
        }
    }
    return rc;
}

int metrics_filters_from_config(struct metrics_filters *f, const struct config *cfg,
                                double interval_s)
{
    memset(f, 0, sizeof(*f));
    f->interval_s = interval_s > 0 ? interval_s : 5;
    int include = config_get_bool(cfg, "Metrics:IncludeDefaultProviders", 1);
    uint64_t count = 3;
    if (include < 0 || config_get_uint(cfg, "Metrics:MetricCount", 1, 1000000, &count) != 0) {
        log_error(cat, "Metrics:IncludeDefaultProviders takes true or false, Metrics:MetricCount "
                       "a whole number from 1");
        return AGENT_E_INVAL;
    }
    int rc = include == 1 ? add_defaults(f) : 0;
    rc = rc ? rc : read_config_list(f, cfg, false);
    rc = rc ? rc : read_config_list(f, cfg, true);
    char key[256];
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        if (f->v[i].meter) {
            continue;
        }
        snprintf(key, sizeof(key), "GlobalCounter:Providers:%s:IntervalSeconds", f->v[i].name);
        rc = config_get_float(cfg, key, 1, 86400, &f->v[i].interval_s);
    }
    if (rc == AGENT_E_TOOBIG) {
        log_error(cat, "Metrics: more than %d providers and meters, or %d names in one",
                  METRICS_MAX_FILTERS, METRICS_MAX_NAMES);
        rc = AGENT_E_INVAL;
    }
    if (rc != 0) {
        metrics_filters_fini(f);
    }
    return rc;
}

static const cJSON *member(const cJSON *o, const char *name)
{
    const cJSON *m = NULL;
    cJSON_ArrayForEach(m, o)
    {
        if (m->string != NULL && strcasecmp(m->string, name) == 0) {
            return m;
        }
    }
    return NULL;
}

/* One "providers" or "meters" array of the body. */
static int json_list(struct metrics_filters *f, const cJSON *arr, bool meter, struct buf *err)
{
    const char *what = meter ? "meters" : "providers";
    const char *key = meter ? "meterName" : "providerName";
    const char *names = meter ? "instrumentNames" : "counterNames";
    if (arr == NULL || cJSON_IsNull(arr)) {
        return 0;
    }
    if (!cJSON_IsArray(arr)) {
        buf_printf(err, "%s must be an array", what);
        return AGENT_E_INVAL;
    }
    size_t i = 0;
    const cJSON *item = NULL;
    cJSON_ArrayForEach(item, arr)
    {
        const cJSON *name = cJSON_IsObject(item) ? member(item, key) : NULL;
        if (!cJSON_IsString(name) || name->valuestring[0] == '\0') {
            buf_printf(err, "%s[%zu].%s: a non-empty string is required", what, i, key);
            return AGENT_E_INVAL;
        }
        struct metrics_filter *x = NULL;
        int rc = add_filter(f, name->valuestring, meter, &x);
        if (rc == AGENT_E_INVAL) {
            buf_printf(err,
                       "%s[%zu].%s: '%s' is not a name the runtime takes as one (no * , ; = "
                       "quotes, backslashes, line breaks or surrounding spaces)",
                       what, i, key, name->valuestring);
            return rc;
        }
        const cJSON *list = member(item, names);
        if (rc == 0 && list != NULL && !cJSON_IsNull(list) && !cJSON_IsArray(list)) {
            buf_printf(err, "%s[%zu].%s must be an array of strings", what, i, names);
            return AGENT_E_INVAL;
        }
        const cJSON *n = NULL;
        cJSON_ArrayForEach(n, list)
        {
            if (rc == 0 && !cJSON_IsString(n)) {
                buf_printf(err, "%s[%zu].%s must be an array of strings", what, i, names);
                return AGENT_E_INVAL;
            }
            rc = rc ? rc : add_name(x, n->valuestring);
        }
        if (rc == AGENT_E_TOOBIG) {
            buf_printf(err, "at most %d providers and meters, %d names each", METRICS_MAX_FILTERS,
                       METRICS_MAX_NAMES);
            return AGENT_E_INVAL;
        }
        if (rc != 0) {
            return rc;
        }
        i++;
    }
    return 0;
}

int metrics_filters_from_json(struct metrics_filters *f, const char *body, size_t len,
                              double interval_s, struct buf *err)
{
    memset(f, 0, sizeof(*f));
    f->interval_s = interval_s > 0 ? interval_s : 5;
    cJSON *root = cJSON_ParseWithLength(body, len);
    int rc = 0;
    if (!cJSON_IsObject(root)) {
        buf_printf(err, "the body must be a JSON object (EventMetricsConfiguration)");
        rc = AGENT_E_INVAL;
        goto out;
    }
    const cJSON *inc = member(root, "includeDefaultProviders");
    if (inc != NULL && !cJSON_IsBool(inc)) {
        buf_printf(err, "includeDefaultProviders must be true or false");
        rc = AGENT_E_INVAL;
        goto out;
    }
    if (inc == NULL || cJSON_IsTrue(inc)) {
        rc = add_defaults(f);
    }
    rc = rc ? rc : json_list(f, member(root, "providers"), false, err);
    rc = rc ? rc : json_list(f, member(root, "meters"), true, err);
    if (rc == 0 && f->n == 0 && !f->runtime_meter) {
        buf_printf(err, "nothing to collect: includeDefaultProviders is false and no provider "
                        "or meter is given");
        rc = AGENT_E_INVAL;
    }
out:
    cJSON_Delete(root);
    if (rc != 0) {
        metrics_filters_fini(f);
    }
    return rc;
}

void metrics_filters_fini(struct metrics_filters *f)
{
    for (size_t i = 0; i < f->n; i++) {
        for (size_t j = 0; j < f->v[i].nnames; j++) {
            free(f->v[i].names[j]);
        }
        free(f->v[i].names);
        free(f->v[i].name);
    }
    f->n = 0;
}

bool metrics_filters_want(const struct metrics_filters *f, const struct ev_metric_sample *s)
{
    if (s->is_meter && f->runtime_meter && strcmp(s->provider, RUNTIME) == 0) {
        return true;
    }
    for (size_t i = 0; i < f->n; i++) {
        const struct metrics_filter *x = &f->v[i];
        /* Provider names match case-insensitively, counter names exactly (CounterFilter). */
        if (x->meter != s->is_meter || strcasecmp(x->name, s->provider) != 0) {
            continue;
        }
        if (x->nnames == 0) {
            return true;
        }
        for (size_t j = 0; j < x->nnames; j++) {
            if (strcmp(x->names[j], s->name) == 0) {
                return true;
            }
        }
        return false;
    }
    return false;
}

double metrics_provider_interval(const struct config *cfg, const char *provider, double global_s)
{
    char key[512];
    snprintf(key, sizeof(key), "GlobalCounter:Providers:%s:IntervalSeconds", provider);
    const char *v = config_get(cfg, key);
    double d = 0;
    if (v != NULL && num_parse_float32(v, &d) == 0 && d >= 1 && d <= 86400) {
        return d;
    }
    return global_s;
}

double metrics_trace_interval(const void *cfg, const char *provider)
{
    return metrics_provider_interval(cfg, provider, 0);
}

uint64_t metrics_filters_counter_interval_ms(const struct metrics_filters *f)
{
    uint64_t ms = 0;
    for (size_t i = 0; i < f->n; i++) {
        uint64_t v = (uint64_t)(f->v[i].interval_s * 1000 + 0.5);
        if (!f->v[i].meter && (ms == 0 || v < ms)) {
            ms = v;
        }
    }
    return ms;
}

/* ---- the session ---- */

struct msession {
    struct agent *a;
    const struct metrics_filters *f;
    const struct msession_callbacks *cb;
    void *ud;
    struct dsession *ds; /* NULL once it ended or was aborted */
    struct ev_stream *stream;
    char session_id[37];
    char client_id[37];
    uint64_t last_counter_ms;
    bool counters_seen; /* an EventCounters event arrived in this session */
};

/*
 * The largest nettrace block a metrics session reads (the decoder holds one block at a time): the
 * runtime writes blocks of at most 100 KiB (ep-file.c: ep_event_block_alloc (100 * 1024)), so 1 MiB
 * leaves room while a hostile runtime cannot make dotmon hold 16 MiB (the default) per session.
 */
#define MSESSION_MAX_BLOCK (1024u * 1024u)
/*
 * Metadata records a metrics session keeps: a real runtime defines a few dozen (two EventCounters
 * shapes per provider, the Metrics events); 512 bounds what a hostile one can make the decoder
 * hold (each record at most 128 fields and 4 KiB of names) to a few MiB instead of 4096 records.
 */
#define MSESSION_MAX_METADATA 512u

static void ms_free(struct msession *s)
{
    ev_stream_free(s->stream);
    free(s);
}

static void ms_on_sample(void *ud, const struct ev_metric_sample *in)
{
    struct msession *s = ud;
    /* A runtime's long names are cut here for every consumer (store, /livemetrics, rules). */
    struct ev_sample_cut cut;
    const struct ev_metric_sample *x = ev_sample_cut(in, &cut);
    if (!x->is_meter) {
        s->last_counter_ms = uv_now(s->a->loop);
        s->counters_seen = true;
    }
    if (metrics_filters_want(s->f, x)) {
        s->cb->on_sample(s->ud, x);
    }
}

static void ms_on_error(void *ud, const char *kind, const char *message)
{
    struct msession *s = ud;
    if (s->cb->on_warning != NULL) {
        s->cb->on_warning(s->ud, kind, message != NULL ? message : "");
    }
}

/* ---- the consumer of the decoded session: ev_stream ---- */

static void ms_started(void *ctx, uint64_t session_id, int version)
{
    struct msession *s = ctx;
    log_debug(cat, "metrics session 0x%" PRIx64 " (CollectTracing%d) started", session_id, version);
    s->last_counter_ms = uv_now(s->a->loop);
    if (s->cb->on_started != NULL) {
        s->cb->on_started(s->ud);
    }
}

static int ms_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct msession *s = ctx;
    return ev_stream_feed(s->stream, p, n);
}

static void ms_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct msession *s = ctx;
    const char *why = ev_stream_error(s->stream);
    (void)rc;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

/* The last call either way: on_end with the status (0 for a stream that ended) and words. */
static void ms_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct msession *s = ctx;
    (void)hresult;
    s->ds = NULL;
    s->cb->on_end(s->ud, code, reason);
    ms_free(s);
}

static void ms_finish(void *ctx, const char *how)
{
    ms_error(ctx, 0, 0, how);
}

static const struct dsession_consumer ms_consumer = {.started = ms_started,
                                                     .feed = ms_feed,
                                                     .describe = ms_describe,
                                                     .finish = ms_finish,
                                                     .error = ms_error};

/* Appends "k=v" after a ';', quoting a value that holds ';' or '=' (docs/ipc.md §4.2). */
static int arg_append(struct buf *b, const char *k, const char *v)
{
    bool quote = strpbrk(v, ";=") != NULL;
    return buf_printf(b, "%s%s=%s%s%s", buf_size(b) > 0 ? ";" : "", k, quote ? "\"" : "", v,
                      quote ? "\"" : "");
}

/* System.Diagnostics.Metrics' arguments (docs/events.md §3.1) into a; its meters list first. */
static int meter_arguments(struct msession *s, int major, struct buf *a)
{
    const struct metrics_filters *f = s->f;
    struct buf meters;
    buf_init(&meters, ARGS_MAX);
    int rc = f->runtime_meter ? buf_append_str(&meters, RUNTIME) : 0;
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        if (f->v[i].meter) {
            rc = buf_printf(&meters, "%s%s", buf_size(&meters) > 0 ? "," : "", f->v[i].name);
        }
    }
    if (rc != 0 || buf_size(&meters) == 0) {
        buf_fini(&meters);
        return rc != 0 ? rc : AGENT_E_NOTFOUND;
    }
    bool shared = major >= 8;
    if (shared) {
        snprintf(s->session_id, sizeof(s->session_id), "SHARED");
        op_new_guid(s->client_id);
    } else {
        op_new_guid(s->session_id);
    }
    char refresh[32], max_series[16], max_hist[16];
    rc = num_format_float32(refresh, sizeof(refresh), f->interval_s);
    snprintf(max_series, sizeof(max_series), "%u", s->a->metrics_max_time_series);
    snprintf(max_hist, sizeof(max_hist), "%u", s->a->metrics_max_histograms);
    rc = rc ? rc : arg_append(a, "SessionId", s->session_id);
    rc = rc ? rc : arg_append(a, "Metrics", buf_cstr(&meters));
    rc = rc ? rc : arg_append(a, "RefreshInterval", refresh);
    /* GlobalCounter:MaxTimeSeries and :MaxHistograms, as dotnet-monitor passes them. */
    rc = rc ? rc : arg_append(a, "MaxTimeSeries", max_series);
    rc = rc ? rc : arg_append(a, "MaxHistograms", max_hist);
    rc = (rc == 0 && shared) ? arg_append(a, "ClientId", s->client_id) : rc;
    if (rc == 0 && f->exp_histograms && major >= EXP_HIST_MAJOR) {
        rc = arg_append(a, "Base2ExponentialHistogram", EXP_HIST_SPEC);
    }
    buf_fini(&meters);
    return rc;
}

/* The providers (their argument strings NUL-separated in args, prov[i].arguments into it). */
static int build_config(struct msession *s, int major, struct ipc_provider *prov, size_t *nprov,
                        struct buf *args)
{
    const struct metrics_filters *f = s->f;
    size_t off[METRICS_MAX_FILTERS + 1];
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < f->n; i++) {
        if (!f->v[i].meter) {
            prov[n] = (struct ipc_provider){.name = f->v[i].name, .keywords = 0, .level = 4};
            off[n++] = buf_size(args);
            char sec[32];
            rc = num_format_float32(sec, sizeof(sec), f->v[i].interval_s);
            rc = rc ? rc : buf_printf(args, "EventCounterIntervalSec=%s", sec);
            rc = rc ? rc : buf_append(args, "", 1);
        }
    }
    /* Meters need System.Diagnostics.Metrics' EventSource, .NET 6+ (a runtime without
     * ProcessInfo2, major 0, is older than that). */
    if (rc == 0 && major >= 6) {
        struct buf a;
        buf_init(&a, ARGS_MAX);
        rc = meter_arguments(s, major, &a);
        if (rc == 0) {
            prov[n] = (struct ipc_provider){.name = METER_PROVIDER, .keywords = 0x2, .level = 4};
            off[n++] = buf_size(args);
            rc = buf_append(args, buf_data(&a), buf_size(&a));
            rc = rc ? rc : buf_append(args, "", 1);
        } else if (rc == AGENT_E_NOTFOUND) {
            rc = 0; /* no meter wanted */
        }
        buf_fini(&a);
    }
    if (rc == 0 && n == 0) {
        rc = AGENT_E_INVAL;
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        prov[i].arguments = (const char *)buf_data(args) + off[i];
    }
    if (rc == 0) {
        *nprov = n;
    }
    return rc;
}

int msession_start(struct agent *a, const struct ipc_endpoint *ep, int major,
                   const struct metrics_filters *f, const struct msession_callbacks *cb, void *ud,
                   struct msession **out)
{
    struct msession *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->a = a;
    s->f = f;
    s->cb = cb;
    s->ud = ud;
    struct ipc_provider prov[METRICS_MAX_FILTERS + 1];
    size_t nprov = 0;
    struct buf args;
    buf_init(&args, (METRICS_MAX_FILTERS + 1) * ARGS_MAX);
    int rc = build_config(s, major, prov, &nprov, &args);
    if (rc == 0) {
        struct ev_stream_options so = {.session_id = s->session_id,
                                       .client_id = s->client_id[0] ? s->client_id : NULL,
                                       .refresh_interval_s = f->interval_s,
                                       .counter_interval_s = f->counter_filter_s,
                                       .max_block = MSESSION_MAX_BLOCK,
                                       .max_metadata = MSESSION_MAX_METADATA};
        rc = ev_stream_new(&s->stream, &so, ms_on_sample, ms_on_error, s);
    }
    if (rc == 0) {
        /* Counters and meters need no stacks: none walked where the runtime can be asked. */
        struct ipc_collect_config cfg = {.buffer_mb = BUFFER_MB,
                                         .format = 1,
                                         .rundown_keyword = 0,
                                         .disable_stackwalk = major >= IPC_NO_STACKWALK_MAJOR,
                                         .providers = prov,
                                         .provider_count = nprov};
        struct dsession_config dc = {.collect = &cfg,
                                     .admission = &a->metric_sessions,
                                     .start_timeout_ms = agent_timeout(a, TIMEOUT_METRICS_START),
                                     .stop_timeout_ms = agent_timeout(a, TIMEOUT_METRICS_STOP)};
        rc = dsession_start(a->loop, ep, &dc, &ms_consumer, s, &s->ds);
    }
    buf_fini(&args);
    if (rc != 0) {
        ms_free(s);
        return rc;
    }
    s->last_counter_ms = uv_now(a->loop);
    *out = s;
    return 0;
}

void msession_stop(struct msession *s)
{
    if (s->ds != NULL) {
        dsession_stop(s->ds); /* idempotent */
    }
}

void msession_abort(struct msession *s)
{
    dsession_abort(s->ds); /* accepts NULL */
    ms_free(s);
}

uint64_t msession_last_counter_ms(const struct msession *s)
{
    return s->last_counter_ms;
}

bool msession_counters_seen(const struct msession *s)
{
    return s->counters_seen;
}
