/* SPDX-License-Identifier: MIT */
/*
 * The trigger engines (docs/rules.md; dotnet/diagnostics
 * Triggers/Shared/SharedTriggerImplHelper.cs, Triggers/SlidingWindow.cs, Triggers/AspNet/), and
 * dotmon's runtime triggers (GCPause, GCCount, ExceptionCount), which count runtime events in the
 * ASP.NET triggers' sliding window. Times are kept in 100 ns ticks, as TraceEvent keeps them, so
 * the arithmetic (the 1.5 × interval gap, the one-second merge of window points) is
 * dotnet-monitor's to the tick; inputs arrive in milliseconds (runtime events: already in ticks).
 */
#include "rules.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "rules_internal.h"

/* AspNetRequestDuration looks at still-open requests on at most one heartbeat per 9 s. */
#define HEARTBEAT_TICKS (9 * RULES_TICKS_PER_SECOND)

struct window_point {
    int64_t ts;
    int64_t count;
};

/* SlidingWindow: points at least 1 s apart, each counting the events merged into it. */
struct sliding_window {
    struct window_point *v;
    size_t head, len, cap;
    int64_t count;
};

/* AspNetRequestDuration's open requests: activity id → start time (open addressing). */
struct inflight {
    char *id;
    int64_t ts;
};

struct inflight_map {
    struct inflight *v;
    size_t cap, n;
};

struct rules_engine {
    const struct rules_trigger *t;
    int64_t interval_ticks; /* the requested counter interval */
    /* threshold engine */
    bool has_target;
    int64_t latest, target;
    /* ASP.NET triggers */
    struct sliding_window win;
    struct inflight_map open;
    bool heartbeat_seen;
    int64_t last_heartbeat;
    /* GCPause: the open GC suspension's GCSuspendEEBegin time */
    bool suspended;
    int64_t suspend_ts;
    int64_t last_pause; /* the last pause measured (kept by a reset: it is not state) */
    bool oom;
};

static int64_t ms_to_ticks(int64_t ms)
{
    return ms * RULES_TICKS_PER_MS;
}

/* ---- threshold engine (docs/rules.md §3) ---- */

static bool threshold_filter(const struct rules_trigger *t, double v)
{
    if (t->has_greater_than && t->has_less_than) {
        return v > t->greater_than && v < t->less_than;
    }
    return t->has_greater_than ? v > t->greater_than : v < t->less_than;
}

static bool threshold_feed(struct rules_engine *e, int64_t ts, int64_t interval, bool pass)
{
    if (!pass) {
        e->has_target = false; /* the series is broken */
        return false;
    }
    if (!e->has_target ||
        (double)e->latest + 1.5 * (double)e->interval_ticks < (double)ts /* a gap */) {
        e->has_target = true;
        e->latest = ts;
        e->target = ts - interval + e->t->window_ticks;
    } else {
        e->latest = ts;
    }
    return e->latest >= e->target;
}

/* The sample's value as the trigger tests it; false when the sample says nothing (NaN: a
 * counter that ended, dotnet-monitor skips it). *pass is the filter's verdict. */
static bool sample_value(const struct rules_trigger *t, const struct ev_metric_sample *s,
                         bool *pass)
{
    if (s->kind != EV_METRIC_HISTOGRAM) {
        if (isnan(s->value)) {
            return false;
        }
        *pass = threshold_filter(t, s->value);
        return true;
    }
    *pass = false; /* a histogram needs HistogramPercentile, and that percentile published */
    for (uint32_t k = 0; k < s->nquantiles && k < EV_METRIC_MAX_QUANTILES; k++) {
        if (t->histogram_percentile >= 0 &&
            (int)(100.0 * s->quantiles[k].quantile) == t->histogram_percentile) {
            *pass = threshold_filter(t, s->quantiles[k].value);
            break;
        }
    }
    return true;
}

static bool metric_is_ours(const struct rules_trigger *t, const struct ev_metric_sample *s)
{
    bool meter = t->type == RULES_TRIGGER_EVENT_METER;
    return s->is_meter == meter && s->provider != NULL && s->name != NULL &&
           ascii_ieq(s->provider, t->provider) && strcmp(s->name, t->name) == 0;
}

bool rules_engine_on_metric(struct rules_engine *e, const struct ev_metric_sample *s)
{
    const struct rules_trigger *t = e->t;
    if (rules_trigger_source(t) != RULES_SOURCE_METRICS || !metric_is_ours(t, s)) {
        return false;
    }
    bool pass;
    if (!sample_value(t, s, &pass)) {
        return false;
    }
    /* Meter payloads carry no measured interval: the window starts at their timestamp. */
    int64_t interval =
        s->is_meter ? 0 : (int64_t)(s->interval_sec * (double)RULES_TICKS_PER_SECOND);
    return threshold_feed(e, ms_to_ticks(s->timestamp_ms), interval, pass);
}

/* ---- sliding window ---- */

static bool window_push(struct sliding_window *w, int64_t ts)
{
    void *v = w->v;
    if (!rules__queue_room(&v, sizeof(*w->v), &w->head, w->len, &w->cap)) {
        return false;
    }
    w->v = v;
    w->v[w->head + w->len++] = (struct window_point){ts, 1};
    w->count++;
    return true;
}

/* SlidingWindow.AddDataPoint: merge into the newest point when within 1 s, else append and drop
 * the points older than the window relative to this one. */
static void window_add(struct rules_engine *e, int64_t ts)
{
    struct sliding_window *w = &e->win;
    if (w->len > 0 && ts - w->v[w->head + w->len - 1].ts < RULES_TICKS_PER_SECOND) {
        w->v[w->head + w->len - 1].count++;
        w->count++;
        return;
    }
    if (!window_push(w, ts)) {
        e->oom = true;
        return;
    }
    while (w->len > 0 && ts - w->v[w->head].ts > e->t->window_ticks) {
        w->count -= w->v[w->head].count;
        w->head++;
        w->len--;
    }
    if (w->len == 0) {
        w->head = 0;
    }
}

/* ---- open requests ---- */

static size_t id_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    }
    return (size_t)h;
}

static struct inflight *slot(struct inflight_map *m, const char *id)
{
    size_t k = id_hash(id) & (m->cap - 1);
    while (m->v[k].id != NULL && strcmp(m->v[k].id, id) != 0) {
        k = (k + 1) & (m->cap - 1);
    }
    return &m->v[k];
}

/* Rebuilds the table at cap, dropping the ids marked NULL-timestamped by the caller. */
static bool map_rehash(struct inflight_map *m, size_t cap)
{
    struct inflight *old = m->v;
    size_t oldcap = m->cap;
    struct inflight *v = calloc(cap, sizeof(*v));
    if (v == NULL) {
        return false;
    }
    m->v = v;
    m->cap = cap;
    for (size_t k = 0; k < oldcap; k++) {
        if (old[k].id != NULL) {
            *slot(m, old[k].id) = old[k];
        }
    }
    free(old);
    return true;
}

static void map_put(struct rules_engine *e, const char *id, int64_t ts)
{
    struct inflight_map *m = &e->open;
    if ((m->n + 1) * 2 > m->cap && !map_rehash(m, m->cap ? m->cap * 2 : 64)) {
        e->oom = true;
        return;
    }
    struct inflight *s = slot(m, id);
    if (s->id == NULL) {
        if (m->n >= RULES_MAX_INFLIGHT || (s->id = strdup(id)) == NULL) {
            e->oom |= m->n < RULES_MAX_INFLIGHT;
            return;
        }
        m->n++;
    }
    s->ts = ts; /* a repeated id restarts its request */
}

/* Removes id; false when it was not there. Backward-shift deletion keeps probing chains whole. */
static bool map_remove(struct inflight_map *m, const char *id)
{
    if (m->n == 0) {
        return false;
    }
    struct inflight *s = slot(m, id);
    if (s->id == NULL) {
        return false;
    }
    free(s->id);
    s->id = NULL;
    m->n--;
    size_t hole = (size_t)(s - m->v);
    for (size_t k = (hole + 1) & (m->cap - 1); m->v[k].id != NULL; k = (k + 1) & (m->cap - 1)) {
        size_t home = id_hash(m->v[k].id) & (m->cap - 1);
        /* Move the entry into the hole unless its home lies cyclically in (hole, k]. */
        bool stays = hole <= k ? (home > hole && home <= k) : (home > hole || home <= k);
        if (!stays) {
            m->v[hole] = m->v[k];
            m->v[k].id = NULL;
            hole = k;
        }
    }
    return true;
}

static void map_clear(struct inflight_map *m)
{
    for (size_t k = 0; k < m->cap; k++) {
        free(m->v[k].id);
    }
    free(m->v);
    memset(m, 0, sizeof(*m));
}

/* ---- ASP.NET triggers (docs/rules.md §4) ---- */

/* AspNetRequestDuration's heartbeat: every request open for RequestDuration or longer counts
 * once and is forgotten (it may still finish, it will not count again). */
static bool heartbeat(struct rules_engine *e, int64_t ts)
{
    if (e->heartbeat_seen && ts - e->last_heartbeat <= HEARTBEAT_TICKS) {
        return false;
    }
    e->heartbeat_seen = true;
    e->last_heartbeat = ts;
    struct inflight_map *m = &e->open;
    bool removed = false;
    for (size_t k = 0; k < m->cap; k++) {
        if (m->v[k].id != NULL && ts - m->v[k].ts >= e->t->request_duration_ticks) {
            window_add(e, ts);
            free(m->v[k].id);
            m->v[k].id = NULL;
            m->n--;
            removed = true;
        }
    }
    if (removed && m->cap > 0 && !map_rehash(m, m->cap)) {
        e->oom = true;
    }
    return e->win.count >= e->t->count;
}

static bool status_matches(const struct rules_trigger *t, int code)
{
    for (size_t i = 0; i < t->n_status_codes; i++) {
        if (code >= t->status_codes[i].min && code <= t->status_codes[i].max) {
            return true;
        }
    }
    return false;
}

static bool on_stop(struct rules_engine *e, const struct rules_request_event *ev, int64_t ts)
{
    const struct rules_trigger *t = e->t;
    if (t->type == RULES_TRIGGER_ASPNET_RESPONSE_STATUS) {
        if (status_matches(t, ev->status_code)) {
            window_add(e, ts);
        }
        return e->win.count >= t->count;
    }
    if (t->type != RULES_TRIGGER_ASPNET_REQUEST_DURATION ||
        !map_remove(&e->open, ev->activity_id != NULL ? ev->activity_id : "")) {
        return false; /* not tracked, or already counted by a heartbeat */
    }
    if (ev->duration_ticks >= t->request_duration_ticks) {
        window_add(e, ts);
    }
    return e->win.count >= t->count;
}

bool rules_engine_on_request(struct rules_engine *e, const struct rules_request_event *ev)
{
    const struct rules_trigger *t = e->t;
    if (rules_trigger_source(t) != RULES_SOURCE_HTTP) {
        return false;
    }
    int64_t ts = ms_to_ticks(ev->timestamp_ms);
    if (ev->kind == RULES_REQUEST_HEARTBEAT) {
        return t->type == RULES_TRIGGER_ASPNET_REQUEST_DURATION && heartbeat(e, ts);
    }
    if (!rules__paths_match(t, ev->path != NULL ? ev->path : "")) {
        return false;
    }
    if (ev->kind == RULES_REQUEST_STOP) {
        return on_stop(e, ev, ts);
    }
    if (t->type == RULES_TRIGGER_ASPNET_REQUEST_COUNT) {
        window_add(e, ts);
        return e->win.count >= t->count;
    }
    if (t->type == RULES_TRIGGER_ASPNET_REQUEST_DURATION) {
        map_put(e, ev->activity_id != NULL ? ev->activity_id : "", ts);
    }
    return false;
}

/* ---- runtime triggers ---- */

/* GCPause: pairs a GC's GCSuspendEEBegin with the next GCRestartEEEnd (TraceEvent's pause:
 * RestartEEStop - SuspendEEStart). True when this restart ended a pause longer than ThresholdMs. */
static bool pause_feed(struct rules_engine *e, const struct rules_runtime_event *ev)
{
    switch (ev->kind) {
    case RULES_RUNTIME_SUSPEND_BEGIN:
        /* Only a GC's suspension is a GC pause; another one (a debugger, a rejit) closes any
         * open GC suspension too, since the restart that follows is its own. A second begin
         * replaces the first: the first's restart was lost, and pairing it with a later restart
         * would measure a pause that never was. */
        e->suspended =
            ev->reason == RULES_SUSPEND_FOR_GC || ev->reason == RULES_SUSPEND_FOR_GC_PREP;
        e->suspend_ts = ev->timestamp_ticks;
        return false;
    case RULES_RUNTIME_RESTART_END: {
        if (!e->suspended) {
            return false; /* a restart without its begin */
        }
        e->suspended = false;
        int64_t pause = ev->timestamp_ticks - e->suspend_ts;
        if (pause < 0) {
            return false;
        }
        e->last_pause = pause;
        return pause > (int64_t)e->t->threshold_ms * RULES_TICKS_PER_MS;
    }
    case RULES_RUNTIME_SESSION_START:
        e->suspended = false;
        return false;
    default:
        return false;
    }
}

static bool gc_counts(const struct rules_trigger *t, const struct rules_runtime_event *ev)
{
    if (ev->kind != RULES_RUNTIME_GC_START || ev->depth < (uint32_t)t->generation) {
        return false;
    }
    return t->reason_mask == 0 || (ev->reason < 32 && (t->reason_mask & (1u << ev->reason)) != 0);
}

static bool exception_counts(const struct rules_trigger *t, const struct rules_runtime_event *ev)
{
    if (ev->kind != RULES_RUNTIME_EXCEPTION) {
        return false;
    }
    if (t->n_exception_types == 0) {
        return true;
    }
    const char *type = ev->exception_type != NULL ? ev->exception_type : "";
    for (size_t i = 0; i < t->n_exception_types; i++) {
        if (strcmp(type, t->exception_types[i]) == 0) {
            return true;
        }
    }
    return false;
}

bool rules_engine_on_runtime(struct rules_engine *e, const struct rules_runtime_event *ev)
{
    const struct rules_trigger *t = e->t;
    bool counts;
    switch (t->type) {
    case RULES_TRIGGER_GC_PAUSE:
        counts = pause_feed(e, ev);
        break;
    case RULES_TRIGGER_GC_COUNT:
        counts = gc_counts(t, ev);
        break;
    case RULES_TRIGGER_EXCEPTION_COUNT:
        counts = exception_counts(t, ev);
        break;
    default:
        return false;
    }
    if (!counts) {
        return false;
    }
    window_add(e, ev->timestamp_ticks);
    return e->win.count >= t->count;
}

/* ---- lifetime ---- */

int rules_engine_new(const struct rules_trigger *t, double counter_interval_s,
                     struct rules_engine **out)
{
    *out = NULL;
    if (t->type == RULES_TRIGGER_STARTUP) {
        return AGENT_E_INVAL;
    }
    struct rules_engine *e = calloc(1, sizeof(*e));
    if (e == NULL) {
        return -ENOMEM;
    }
    e->t = t;
    e->interval_ticks =
        (int64_t)((double)(float)counter_interval_s * (double)RULES_TICKS_PER_SECOND);
    *out = e;
    return 0;
}

void rules_engine_reset(struct rules_engine *e)
{
    e->has_target = false;
    e->latest = e->target = 0;
    free(e->win.v);
    memset(&e->win, 0, sizeof(e->win));
    map_clear(&e->open);
    e->heartbeat_seen = false;
    e->last_heartbeat = 0;
    e->suspended = false;
    e->suspend_ts = 0;
}

void rules_engine_free(struct rules_engine *e)
{
    if (e == NULL) {
        return;
    }
    rules_engine_reset(e);
    free(e);
}

int64_t rules__engine_last_pause(const struct rules_engine *e)
{
    return e->last_pause;
}

bool rules__engine_failed(const struct rules_engine *e)
{
    return e->oom;
}
