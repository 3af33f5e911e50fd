/* SPDX-License-Identifier: MIT */
/* Processes, log records and metric samples in OTLP terms; see otel_map.h and docs/otel.md. */
#include "otel_map.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "hex.h"
#include "membudget.h"

/* ---- resource ------------------------------------------------------------------------------ */

static int keep(char **slot, const char *value, size_t len)
{
    char *copy = malloc(len + 1);
    if (copy == NULL) {
        return -ENOMEM;
    }
    memcpy(copy, value, len);
    copy[len] = '\0';
    free(*slot);
    *slot = copy;
    return 0;
}

static bool name_is(const char *name, size_t len, const char *want)
{
    return strlen(want) == len && memcmp(name, want, len) == 0;
}

int otel_env_take(struct otel_env *e, const char *name, size_t name_len, const char *value,
                  size_t value_len)
{
    if (name_is(name, name_len, "OTEL_SERVICE_NAME")) {
        return keep(&e->service_name, value, value_len);
    }
    if (name_is(name, name_len, "OTEL_RESOURCE_ATTRIBUTES")) {
        return keep(&e->resource_attributes, value, value_len);
    }
    return 0;
}

void otel_env_fini(struct otel_env *e)
{
    free(e->service_name);
    free(e->resource_attributes);
    memset(e, 0, sizeof(*e));
}

/* A string r owns from now on (NULL on no memory). */
static const char *own(struct otel_resource *r, const char *s, size_t len)
{
    if (r->nowned == sizeof(r->owned) / sizeof(r->owned[0])) {
        return NULL;
    }
    char *copy = NULL;
    if (keep(&copy, s, len) != 0) {
        return NULL;
    }
    r->owned[r->nowned++] = copy;
    return copy;
}

/* Sets key (a static string or one r owns) to a copy of value; a key already there is replaced. */
static int put(struct otel_resource *r, const char *key, const char *value, size_t len)
{
    if (value == NULL) {
        return 0;
    }
    const char *v = own(r, value, len);
    if (v == NULL) {
        return -ENOMEM;
    }
    for (size_t k = 0; k < r->nattrs; k++) {
        if (strcmp(r->attrs[k].key, key) == 0) {
            r->attrs[k].str = v;
            r->attrs[k].kind = OTLP_STR;
            return 0;
        }
    }
    if (r->nattrs == OTEL_RES_MAX_ATTRS) {
        return 0; /* more pairs than any real resource has: the rest are left out */
    }
    r->attrs[r->nattrs++] = (struct otlp_kv){.key = key, .kind = OTLP_STR, .str = v};
    return 0;
}

static int put_str(struct otel_resource *r, const char *key, const char *value)
{
    return value != NULL ? put(r, key, value, strlen(value)) : 0;
}

/* value unless it is NULL or "" (unknown) */
static int put_known(struct otel_resource *r, const char *key, const char *value)
{
    return value != NULL && value[0] != '\0' ? put_str(r, key, value) : 0;
}

/* Percent-decodes s[0..n) in place (a malformed escape stays as it is), trims spaces around it;
 * returns the new start and *n. */
static char *decode_trim(char *s, size_t *n)
{
    size_t len = *n;
    while (len > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        len--;
    }
    while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t')) {
        len--;
    }
    (void)hex_pct_decode(s, &len, true); /* lenient: never fails */
    *n = len;
    return s;
}

/*
 * OTEL_RESOURCE_ATTRIBUTES: comma-separated key=value pairs, percent-encoded; a pair without
 * '=' or with an empty key is skipped (as the SDKs do). service.name is handed back in *svc (owned
 * by r) instead of being set.
 */
static int put_env_attrs(struct otel_resource *r, const char *list, const char **svc)
{
    char *copy = NULL;
    if (keep(&copy, list, strlen(list)) != 0) {
        return -ENOMEM;
    }
    int rc = 0;
    char *p = copy;
    while (rc == 0 && *p != '\0') {
        char *end = strchr(p, ',');
        size_t plen = end != NULL ? (size_t)(end - p) : strlen(p);
        char *eq = memchr(p, '=', plen);
        if (eq != NULL) {
            size_t klen = (size_t)(eq - p);
            size_t vlen = plen - klen - 1;
            char *k = decode_trim(p, &klen);
            char *v = decode_trim(eq + 1, &vlen);
            if (klen > 0) {
                const char *key = own(r, k, klen);
                if (key == NULL) {
                    rc = -ENOMEM;
                } else if (strcmp(key, "service.name") == 0) {
                    *svc = own(r, v, vlen);
                    rc = *svc != NULL ? 0 : -ENOMEM;
                } else {
                    rc = put(r, key, v, vlen);
                }
            }
        }
        p += plen + (end != NULL ? 1 : 0);
    }
    free(copy);
    return rc;
}

int otel_resource_build(const struct otel_env *e, const struct otel_proc_info *pi,
                        struct otel_resource *out)
{
    memset(out, 0, sizeof(*out));
    char num[24];
    snprintf(num, sizeof(num), "%llu", (unsigned long long)pi->pid);
    const char *name = pi->name != NULL ? pi->name : "";
    int rc = put_str(out, "service.name", "") || put_str(out, "service.instance.id", pi->uid) ||
                     put_str(out, "process.pid", num) ||
                     put_str(out, "process.executable.name", name) ||
                     put_str(out, "process.runtime.name", ".NET") ||
                     put_str(out, "process.runtime.version", pi->clr_version) ||
                     put_str(out, "host.name", pi->host_name) || put_str(out, "os.type", "linux") ||
                     put_str(out, "telemetry.sdk.name", "dotmon") ||
                     put_str(out, "telemetry.sdk.language", "dotnet") ||
                     put_str(out, "telemetry.sdk.version", pi->sdk_version)
                 ? -ENOMEM
                 : 0;
    /* process.pid is an int in the SDK's process detector */
    for (size_t k = 0; k < out->nattrs; k++) {
        if (strcmp(out->attrs[k].key, "process.pid") == 0) {
            out->attrs[k].kind = OTLP_INT;
            out->attrs[k].i = (int64_t)pi->pid;
        }
    }
    if (rc == 0) {
        rc = put_known(out, "container.id", pi->container_id) ||
                     put_known(out, "k8s.container.name", pi->container_name) ||
                     put_known(out, "k8s.pod.uid", pi->pod_uid) ||
                     put_known(out, "k8s.pod.name", pi->pod_name) ||
                     put_known(out, "k8s.namespace.name", pi->pod_namespace)
                 ? -ENOMEM
                 : 0;
    }
    const char *svc = NULL;
    if (rc == 0 && e->resource_attributes != NULL) {
        rc = put_env_attrs(out, e->resource_attributes, &svc);
    }
    if (rc == 0) {
        if (e->service_name != NULL && e->service_name[0] != '\0') {
            rc = put_str(out, "service.name", e->service_name);
        } else if (svc != NULL && svc[0] != '\0') {
            rc = put_str(out, "service.name", svc);
        } else {
            char dflt[300];
            snprintf(dflt, sizeof(dflt), "unknown_service:%s", name);
            rc = put_str(out, "service.name", dflt);
        }
    }
    if (rc != 0) {
        otel_resource_fini(out);
        return -ENOMEM;
    }
    return 0;
}

void otel_resource_fini(struct otel_resource *r)
{
    for (size_t k = 0; k < r->nowned; k++) {
        free(r->owned[k]);
    }
    memset(r, 0, sizeof(*r));
}

struct otlp_resource otel_resource_view(const struct otel_resource *r)
{
    return (struct otlp_resource){.attrs = r->attrs, .nattrs = r->nattrs};
}

/* ---- logs ---------------------------------------------------------------------------------- */

int otel_log_severity(int level)
{
    static const int numbers[] = {1, 5, 9, 13, 17, 21};
    return level >= EV_LOG_TRACE && level <= EV_LOG_CRITICAL ? numbers[level] : 0;
}

static void log_attr(struct otel_log_view *v, const struct ev_log_kv *kv)
{
    if (kv->key == NULL || kv->key[0] == '\0' || strcmp(kv->key, "{OriginalFormat}") == 0 ||
        kv->kind == EV_LOG_NULL) {
        return;
    }
    if (v->log.nattrs == OTEL_LOG_MAX_ATTRS) {
        v->dropped++;
        return;
    }
    struct otlp_kv *o = &v->attrs[v->log.nattrs++];
    *o = (struct otlp_kv){.key = kv->key};
    switch (kv->kind) {
    case EV_LOG_INT:
        o->kind = OTLP_INT;
        o->i = kv->num;
        break;
    case EV_LOG_BOOL:
        o->kind = OTLP_BOOL;
        o->b = kv->num != 0;
        break;
    default:
        o->kind = OTLP_STR;
        o->str = kv->str != NULL ? kv->str : "";
        break;
    }
}

static void log_str_attr(struct otel_log_view *v, const char *key, const char *value)
{
    struct ev_log_kv kv = {.key = key, .kind = EV_LOG_STR, .str = value};
    if (value != NULL) {
        log_attr(v, &kv);
    }
}

/* "System.IO.IOException" -> "IOException", "A.Outer+Inner" -> "Inner" (Type.Name). */
static const char *type_name(const char *full)
{
    const char *n = full;
    for (const char *p = full; *p != '\0' && *p != '['; p++) {
        if (*p == '.' || *p == '+') {
            n = p + 1;
        }
    }
    return n;
}

void otel_log_map(const struct ev_log_record *r, uint64_t observed_unix_nano,
                  struct otel_log_view *v)
{
    memset(&v->log, 0, sizeof(v->log));
    v->dropped = 0;
    v->log.attrs = v->attrs;
    v->log.time_unix_nano = r->time_known && r->unix_ms > 0 ? (uint64_t)r->unix_ms * 1000000u : 0;
    v->log.observed_unix_nano = observed_unix_nano;
    v->log.severity_number = otel_log_severity(r->level);
    v->log.severity_text = ev_log_level_name(r->level);
    const char *body = NULL;
    for (size_t k = 0; k < r->nstate; k++) {
        if (strcmp(r->state[k].key, "{OriginalFormat}") == 0 && r->state[k].kind == EV_LOG_STR) {
            body = r->state[k].str;
        }
        log_attr(v, &r->state[k]);
    }
    v->log.body = body != NULL ? body : r->message;
    for (size_t s = 0; s < r->nscopes; s++) {
        for (size_t k = 0; k < r->scopes[s].npairs; k++) {
            log_attr(v, &r->scopes[s].pairs[k]);
        }
    }
    if (r->event_id != 0 && v->log.nattrs < OTEL_LOG_MAX_ATTRS) {
        v->attrs[v->log.nattrs++] =
            (struct otlp_kv){.key = "logrecord.event.id", .kind = OTLP_INT, .i = r->event_id};
    }
    if (r->exception != NULL || r->exception_type != NULL) {
        log_str_attr(v, "exception.type",
                     r->exception_type != NULL ? type_name(r->exception_type) : NULL);
        log_str_attr(v, "exception.message", r->exception_message);
        log_str_attr(v, "exception.stacktrace", r->exception);
    }
    v->log.event_name = r->event_name != NULL && r->event_name[0] != '\0' ? r->event_name : NULL;
    if (r->has_trace) {
        v->log.has_trace = true;
        memcpy(v->log.trace_id, r->trace_id, sizeof(v->log.trace_id));
        memcpy(v->log.span_id, r->span_id, sizeof(v->log.span_id));
        v->log.flags = r->trace_flags;
    }
    v->scope = (struct otlp_scope){.name = r->category != NULL ? r->category : ""};
}

/* ---- metrics ------------------------------------------------------------------------------- */

size_t otel_tags_parse(const char *tags, char sep, char *scratch, size_t scratch_len,
                       struct otlp_kv *kv, size_t max)
{
    if (tags == NULL || scratch_len == 0) {
        return 0;
    }
    snprintf(scratch, scratch_len, "%s", tags);
    size_t n = 0;
    char *p = scratch;
    while (*p != '\0' && n < max) {
        char *end = strchr(p, ',');
        if (end != NULL) {
            *end = '\0';
        }
        char *s = strchr(p, sep);
        if (s != NULL && s != p) {
            *s = '\0';
            kv[n++] = (struct otlp_kv){.key = p, .kind = OTLP_STR, .str = s + 1};
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return n;
}

#define SERIES_BUCKETS 256u

struct series {
    struct series *next; /* bucket chain */
    struct series *all;  /* every series, oldest first reversed */
    char *provider, *name, *unit, *description, *tags;
    enum otlp_metric_type type;
    enum otlp_temporality temporality;
    bool monotonic;
    bool is_meter;
    bool pending; /* something to export since the last flush */
    uint64_t start_ns;
    uint64_t time_ns;
    double value;
    /* summaries */
    uint64_t count;
    double sum;
    uint32_t nquantiles;
    struct otlp_quantile quantiles[EV_METRIC_MAX_QUANTILES];
    /* exponential histograms: the points added up since start_ns (docs/otel.md §4) */
    struct ev_exphist_acc acc;
    size_t entry_bytes;  /* charged for the entry and its strings */
    size_t bucket_bytes; /* charged for acc.counts: its size now */
};

struct otel_series_table {
    size_t max, n;
    uint64_t dropped;
    struct mb_share *share; /* the caller's; NULL: the budget's total */
    size_t bytes;           /* charged to share for the series now */
    struct series *all;
    struct series *buckets[SERIES_BUCKETS];
};

int otel_series_new(size_t max_series, struct mb_share *share, struct otel_series_table **out)
{
    *out = calloc(1, sizeof(**out));
    if (*out == NULL) {
        return -ENOMEM;
    }
    (*out)->max = max_series;
    (*out)->share = share;
    return 0;
}

static void uncharge(struct otel_series_table *t, size_t n)
{
    mb_release(t->share, n);
    t->bytes -= n;
}

/* Frees the histogram's buckets of s and gives their bytes back. */
static void series_drop_buckets(struct otel_series_table *t, struct series *s)
{
    ev_exphist_acc_fini(&s->acc);
    uncharge(t, s->bucket_bytes);
    s->bucket_bytes = 0;
}

static void series_free(struct otel_series_table *t, struct series *s)
{
    free(s->provider);
    free(s->name);
    free(s->unit);
    free(s->description);
    free(s->tags);
    series_drop_buckets(t, s);
    uncharge(t, s->entry_bytes);
    free(s);
}

void otel_series_free(struct otel_series_table *t)
{
    if (t == NULL) {
        return;
    }
    for (struct series *s = t->all, *next; s != NULL; s = next) {
        next = s->all;
        series_free(t, s);
    }
    free(t);
}

size_t otel_series_bytes(const struct otel_series_table *t)
{
    return t->bytes;
}

uint64_t otel_series_dropped(const struct otel_series_table *t)
{
    return t->dropped;
}

size_t otel_series_count(const struct otel_series_table *t)
{
    return t->n;
}

static uint32_t hash_str(uint32_t h, const char *s)
{
    for (; s != NULL && *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * 16777619u;
    }
    return (h ^ 0xffu) * 16777619u;
}

static const char *nn(const char *s)
{
    return s != NULL ? s : "";
}

static char *dup_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

/* What strdup(s) holds (0 for a string dup_or_null leaves out when may_skip). */
static size_t str_bytes(const char *s, bool may_skip)
{
    return s != NULL && s[0] != '\0' ? strlen(s) + 1 : may_skip ? 0 : 1;
}

/* Adds the bucket array's latest points to s's; the array's growth is charged first: the most it
 * may hold (ev_exphist.h: at most max_buckets counts), then given back down to its size. */
static int series_add_exphist(struct otel_series_table *t, struct series *s,
                              const struct ev_metric_sample *m)
{
    size_t room = OTEL_EXP_HIST_MAX_BUCKETS * sizeof(uint64_t);
    if (mb_charge(t->share, room) != 0) {
        t->dropped++;
        return AGENT_E_BUDGET;
    }
    t->bytes += room;
    if (m->exphist->cumulative) {
        series_drop_buckets(t, s); /* the runtime's point is the whole story already */
    }
    int rc = ev_exphist_acc_add(&s->acc, m->exphist, m->hist_count, m->hist_sum,
                                OTEL_EXP_HIST_MAX_BUCKETS);
    if (rc == -EOVERFLOW) { /* totals near 2^63 (a runtime that lies): the series starts over */
        series_drop_buckets(t, s);
        rc = ev_exphist_acc_add(&s->acc, m->exphist, m->hist_count, m->hist_sum,
                                OTEL_EXP_HIST_MAX_BUCKETS);
    }
    size_t now = s->acc.counts != NULL ? (size_t)s->acc.h.ncounts * sizeof(uint64_t) : 0;
    uncharge(t, s->bucket_bytes + room - now);
    s->bucket_bytes = now;
    return rc;
}

/* How a sample's series is exported (otel_map.h, docs/otel.md §4). */
static void series_shape(struct series *s, const struct ev_metric_sample *m)
{
    switch (m->kind) {
    case EV_METRIC_RATE:
        s->type = OTLP_SUM;
        s->monotonic = true;
        s->temporality =
            m->is_meter && m->has_total ? OTLP_TEMPORALITY_CUMULATIVE : OTLP_TEMPORALITY_DELTA;
        break;
    case EV_METRIC_UPDOWN:
        s->type = OTLP_SUM;
        s->monotonic = false;
        s->temporality = OTLP_TEMPORALITY_CUMULATIVE;
        break;
    case EV_METRIC_HISTOGRAM:
        /* Buckets (.NET 10's exponential histograms): one cumulative point, as the SDK's. */
        s->type = m->exphist != NULL ? OTLP_EXP_HISTOGRAM : OTLP_SUMMARY;
        s->temporality = OTLP_TEMPORALITY_CUMULATIVE;
        break;
    default:
        s->type = OTLP_GAUGE;
        break;
    }
}

int otel_series_add(struct otel_series_table *t, const struct ev_metric_sample *m)
{
    uint32_t h = hash_str(hash_str(hash_str(2166136261u, m->provider), m->name), m->tags);
    struct series **slot = &t->buckets[h % SERIES_BUCKETS];
    struct series *s = *slot;
    while (s != NULL && (strcmp(s->provider, nn(m->provider)) != 0 ||
                         strcmp(s->name, nn(m->name)) != 0 || strcmp(s->tags, nn(m->tags)) != 0)) {
        s = s->next;
    }
    uint64_t now = m->timestamp_ms > 0 ? (uint64_t)m->timestamp_ms * 1000000u : 0;
    uint64_t interval =
        m->interval_sec > 0 && isfinite(m->interval_sec) ? (uint64_t)(m->interval_sec * 1e9) : 0;
    if (s == NULL) {
        if (t->n >= t->max) {
            t->dropped++;
            return AGENT_E_TOOBIG;
        }
        size_t bytes = sizeof(*s) + str_bytes(m->provider, false) + str_bytes(m->name, false) +
                       str_bytes(m->tags, false) + str_bytes(m->unit, true) +
                       str_bytes(m->display_name, true);
        if (mb_charge(t->share, bytes) != 0) {
            t->dropped++;
            return AGENT_E_BUDGET;
        }
        t->bytes += bytes;
        s = calloc(1, sizeof(*s));
        if (s == NULL) {
            uncharge(t, bytes);
            return -ENOMEM;
        }
        s->entry_bytes = bytes;
        s->provider = strdup(nn(m->provider));
        s->name = strdup(nn(m->name));
        s->tags = strdup(nn(m->tags));
        s->unit = dup_or_null(m->unit);
        s->description = dup_or_null(m->display_name);
        if (s->provider == NULL || s->name == NULL || s->tags == NULL) {
            series_free(t, s);
            return -ENOMEM;
        }
        s->is_meter = m->is_meter;
        series_shape(s, m);
        s->start_ns = now > interval ? now - interval : now;
        s->next = *slot;
        *slot = s;
        s->all = t->all;
        t->all = s;
        t->n++;
    }
    if (m->kind == EV_METRIC_HISTOGRAM && (m->exphist != NULL) != (s->type == OTLP_EXP_HISTOGRAM)) {
        /* The runtime changed how it aggregates this instrument: start the series again. */
        series_drop_buckets(t, s);
        s->count = 0;
        s->sum = 0;
        s->pending = false; /* nothing to say until this sample is in */
        series_shape(s, m);
        s->start_ns = now > interval ? now - interval : now;
    }
    bool delta = s->type == OTLP_SUM && s->temporality == OTLP_TEMPORALITY_DELTA;
    if (delta && !s->pending) {
        s->value = 0;
        s->start_ns = now > interval ? now - interval : now;
    }
    if (s->type == OTLP_EXP_HISTOGRAM) {
        int rc = series_add_exphist(t, s, m);
        if (rc != 0) {
            return rc;
        }
    } else if (s->type == OTLP_SUMMARY) {
        s->count += m->hist_count;
        s->sum += isfinite(m->hist_sum) ? m->hist_sum : 0;
        s->nquantiles = m->nquantiles <= EV_METRIC_MAX_QUANTILES ? m->nquantiles : 0;
        for (uint32_t k = 0; k < s->nquantiles; k++) {
            s->quantiles[k] = (struct otlp_quantile){.quantile = m->quantiles[k].quantile,
                                                     .value = m->quantiles[k].value};
        }
    } else {
        double v =
            s->type == OTLP_SUM && s->temporality == OTLP_TEMPORALITY_CUMULATIVE && s->monotonic
                ? m->total
                : m->value;
        if (isfinite(v)) {
            s->value = delta ? s->value + v : v;
        }
    }
    s->time_ns = now;
    s->pending = true;
    return 0;
}

void otel_series_flush(struct otel_series_table *t, otel_metric_cb cb, void *ud)
{
    for (struct series *s = t->all; s != NULL; s = s->all) {
        bool delta = s->type == OTLP_SUM && s->temporality == OTLP_TEMPORALITY_DELTA;
        if (!s->pending) {
            continue; /* nothing since the last export: a series that never came has no point */
        }
        char scratch[1024];
        struct otlp_kv attrs[32];
        struct otlp_point pt = {0};
        pt.attrs = attrs;
        pt.nattrs = otel_tags_parse(s->tags, s->is_meter ? '=' : ':', scratch, sizeof(scratch),
                                    attrs, sizeof(attrs) / sizeof(attrs[0]));
        pt.time_unix_nano = s->time_ns;
        pt.start_unix_nano = s->type == OTLP_GAUGE ? 0 : s->start_ns;
        pt.as_double = s->value;
        pt.count = s->count;
        pt.has_sum = s->type == OTLP_SUMMARY;
        pt.sum = s->sum;
        pt.quantiles = s->quantiles;
        pt.nquantiles = s->nquantiles;
        if (s->type == OTLP_EXP_HISTOGRAM) {
            pt.count = s->acc.count;
            pt.has_sum = true;
            pt.sum = s->acc.sum;
            pt.scale = s->acc.h.scale;
            pt.zero_count = s->acc.h.zero_count;
            pt.positive = (struct otlp_buckets){
                .offset = s->acc.h.offset, .counts = s->acc.counts, .ncounts = s->acc.h.ncounts};
            pt.has_min_max = s->acc.any && isfinite(s->acc.h.min) && isfinite(s->acc.h.max);
            pt.min = s->acc.h.min;
            pt.max = s->acc.h.max;
        }
        struct otlp_metric m = {.name = s->name,
                                .description = s->description,
                                .unit = s->unit,
                                .type = s->type,
                                .temporality = s->temporality,
                                .monotonic = s->monotonic,
                                .points = &pt,
                                .npoints = 1};
        struct otlp_scope scope = {.name = s->provider};
        cb(ud, &scope, &m);
        /* cumulative series and gauges are said again at every export, deltas only when new */
        s->pending = !delta;
    }
}
