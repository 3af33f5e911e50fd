/* SPDX-License-Identifier: MIT */
#include "ev_stream.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_exphist.h"
#include "ev_fmt.h"
#include "ev_payload.h"
#include "ev_schemas.h"
#include "nettrace.h"

/*
 * The pipeline: nettrace.c checks the stream and reports every metadata definition (raw payload)
 * and every event; metadata of the events interpreted here (EventCounters from any EventSource,
 * the System.Diagnostics.Metrics events of docs/events.md §3.3) is parsed into a schema with its
 * fields resolved by name once, so an event costs one decode into the fixed record plus the
 * conversions of the fields used. Events are recognised by provider + event name only
 * (docs/events.md §1.1): EventSource ids and versions move between runtimes, and field positions
 * too, so every field is found by name and a missing one is tolerated where older shapes lack it.
 */

#define DEFAULT_MAX_METADATA 4096u
#define TEXT_MAX             (64u * 1024u) /* UTF-8 strings of one event */
#define MAX_INSTRUMENTS      1024u
#define INSTR_TEXT_MAX       4096u /* bytes of one cached instrument's strings */
#define METRICS_PROVIDER     "System.Diagnostics.Metrics"

enum ev_class {
    CLS_NONE = 0,
    CLS_COUNTERS,    /* EventCounters (any provider) */
    CLS_RATE,        /* CounterRateValuePublished */
    CLS_GAUGE,       /* GaugeValuePublished */
    CLS_UPDOWN,      /* UpDownCounterRateValuePublished */
    CLS_HISTOGRAM,   /* HistogramValuePublished */
    CLS_EXPHIST,     /* Base2ExponentialHistogramValuePublished */
    CLS_BEGIN,       /* BeginInstrumentReporting */
    CLS_ERROR,       /* Error */
    CLS_CB_ERROR,    /* ObservableInstrumentCallbackError */
    CLS_TS_LIMIT,    /* TimeSeriesLimitReached */
    CLS_HIST_LIMIT,  /* HistogramLimitReached */
    CLS_MULTI,       /* MultipleSessionsNotSupportedError */
    CLS_MULTI_CONFIG /* MultipleSessionsConfiguredIncorrectlyError */
};

/* Fields looked up by name, per class. */
enum ev_fid {
    /* EventCounters, under "Payload" */
    F_NAME,
    F_DISPLAY_NAME,
    F_MEAN,
    F_INCREMENT,
    F_INTERVAL_SEC,
    F_SERIES,
    F_COUNTER_TYPE,
    F_METADATA,
    F_DISPLAY_UNITS,
    /* System.Diagnostics.Metrics */
    F_SESSION_ID,
    F_METER_NAME,
    F_INSTRUMENT_NAME,
    F_UNIT,
    F_TAGS,
    F_RATE,
    F_VALUE,
    F_LAST_VALUE,
    F_QUANTILES,
    F_COUNT,
    F_SUM,
    F_INSTRUMENT_ID,
    F_SCALE,
    F_ZERO_COUNT,
    F_MINIMUM,
    F_MAXIMUM,
    F_BUCKETS,
    F_METER_TAGS,
    F_INSTRUMENT_TAGS,
    F_INSTRUMENT_TYPE,
    F_ERROR_MESSAGE,
    F_RUNNING_SESSION_ID,
    F_CLIENT_ID,
    F_EXP_HIST,
    F_ACT_HIST,
    F_EXP_TS,
    F_ACT_TS,
    F_EXP_REFRESH,
    F_ACT_REFRESH,
    F_COUNT_ALL
};

static const char *const field_paths[F_COUNT_ALL] = {
    [F_NAME] = "Payload.Name",
    [F_DISPLAY_NAME] = "Payload.DisplayName",
    [F_MEAN] = "Payload.Mean",
    [F_INCREMENT] = "Payload.Increment",
    [F_INTERVAL_SEC] = "Payload.IntervalSec",
    [F_SERIES] = "Payload.Series",
    [F_COUNTER_TYPE] = "Payload.CounterType",
    [F_METADATA] = "Payload.Metadata",
    [F_DISPLAY_UNITS] = "Payload.DisplayUnits",
    [F_SESSION_ID] = "sessionId",
    [F_METER_NAME] = "meterName",
    [F_INSTRUMENT_NAME] = "instrumentName",
    [F_UNIT] = "unit",
    [F_TAGS] = "tags",
    [F_RATE] = "rate",
    [F_VALUE] = "value",
    [F_LAST_VALUE] = "lastValue",
    [F_QUANTILES] = "quantiles",
    [F_COUNT] = "count",
    [F_SUM] = "sum",
    [F_INSTRUMENT_ID] = "instrumentId",
    [F_SCALE] = "scale",
    [F_ZERO_COUNT] = "zeroCount",
    [F_MINIMUM] = "minimum",
    [F_MAXIMUM] = "maximum",
    [F_BUCKETS] = "buckets",
    [F_METER_TAGS] = "meterTags",
    [F_INSTRUMENT_TAGS] = "instrumentTags",
    [F_INSTRUMENT_TYPE] = "instrumentType",
    [F_ERROR_MESSAGE] = "errorMessage",
    [F_RUNNING_SESSION_ID] = "runningSessionId",
    [F_CLIENT_ID] = "clientId",
    [F_EXP_HIST] = "expectedMaxHistograms",
    [F_ACT_HIST] = "actualMaxHistograms",
    [F_EXP_TS] = "expectedMaxTimeSeries",
    [F_ACT_TS] = "actualMaxTimeSeries",
    [F_EXP_REFRESH] = "expectedRefreshInterval",
    [F_ACT_REFRESH] = "actualRefreshInterval",
};

/* System.Diagnostics.Metrics event names (docs/events.md §3.3) and their classes. */
static const struct {
    const char *name;
    enum ev_class cls;
} meter_events[] = {
    {"CounterRateValuePublished", CLS_RATE},
    {"GaugeValuePublished", CLS_GAUGE},
    {"UpDownCounterRateValuePublished", CLS_UPDOWN},
    {"HistogramValuePublished", CLS_HISTOGRAM},
    {"Base2ExponentialHistogramValuePublished", CLS_EXPHIST},
    {"BeginInstrumentReporting", CLS_BEGIN},
    {"Error", CLS_ERROR},
    {"ObservableInstrumentCallbackError", CLS_CB_ERROR},
    {"TimeSeriesLimitReached", CLS_TS_LIMIT},
    {"HistogramLimitReached", CLS_HIST_LIMIT},
    {"MultipleSessionsNotSupportedError", CLS_MULTI},
    {"MultipleSessionsConfiguredIncorrectlyError", CLS_MULTI_CONFIG},
};

/* An interpreted metadata id: its schema and the node of every field (-1 when absent). The
 * registry's slot holds cls and f; schema points at the registry's entry's. */
struct ev_md {
    enum ev_class cls;
    const struct ev_schema *schema;
    int16_t f[F_COUNT_ALL];
};

/* BeginInstrumentReporting's description of one instrument (docs/events.md §3.5). */
struct ev_instr {
    int64_t id;  /* 0 = no id */
    char *meter; /* one allocation holds the five strings */
    char *name;
    char *unit;
    char *meter_tags;
    char *instrument_tags;
    /* A synchronous Counter<T> (instrumentType "Counter`1"): its running total only grows.
     * Observable counters are not trusted for that: .NET 10.0.12 reports the thread pool's
     * thread count and queue length as ObservableCounters (docs/events.md §3.6). */
    bool monotonic;
};

struct ev_stream {
    struct ev_stream_options opt;
    char *session_id; /* copies of the options' strings */
    char *client_id;
    ev_stream_sample_cb on_sample;
    ev_stream_error_cb on_error;
    void *ud;
    struct nettrace_checker ck;
    struct ev_schemas md; /* interpreted metadata by id, a struct ev_md each */
    struct ev_instr *instr;
    size_t instr_len;
    size_t instr_cap;
    uint64_t samples;
    uint64_t metadata_malformed;
    uint64_t payload_malformed;
    int err;
    char msg[256];
    /* the exponential histogram of the event being decoded (docs/events.md §3.7) */
    struct ev_exphist exphist;
    uint64_t exphist_counts[EV_EXPHIST_MAX_BUCKETS];
    size_t text_len;
    struct ev_record rec;
    char text[TEXT_MAX];
};

/* ---- small helpers ----------------------------------------------------------------------- */

static char *dup_str(const char *s)
{
    if (s == NULL) {
        return NULL;
    }
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

/* Stops the stream for a reason of ours (out of memory in a callback). */
static void stream_fail(struct ev_stream *s, int err, const char *msg)
{
    if (s->err == 0) {
        s->err = err;
        int n = snprintf(s->msg, sizeof(s->msg), "%s", msg);
        if (n < 0) {
            s->msg[0] = '\0';
        }
    }
}

/* ---- metadata ---------------------------------------------------------------------------- */

static enum ev_class classify(const char *provider, const char *name)
{
    if (strcmp(name, "EventCounters") == 0) {
        return CLS_COUNTERS;
    }
    if (strcmp(provider, METRICS_PROVIDER) != 0) {
        return CLS_NONE;
    }
    for (size_t k = 0; k < sizeof(meter_events) / sizeof(meter_events[0]); k++) {
        if (strcmp(name, meter_events[k].name) == 0) {
            return meter_events[k].cls;
        }
    }
    return CLS_NONE;
}

static void on_metadata(void *ud, const struct nettrace_metadata *m, const uint8_t *p, size_t n)
{
    struct ev_stream *s = ud;
    if (s->err != 0) {
        return;
    }
    /* A V6 id defined again after a metadata flush: the new definition replaces the old one
     * (ev_schemas.h). */
    struct ev_schema_entry *e = NULL;
    int rc = ev_schemas_define(&s->md, m, p, n, &e);
    if (rc == -ENOMEM) {
        stream_fail(s, rc, "out of memory");
        return;
    }
    if (rc == AGENT_E_PROTO || rc == AGENT_E_TOOBIG) {
        s->metadata_malformed++;
        return;
    }
    if (rc != 0) {
        return; /* over the budget: its events are not interpreted */
    }
    enum ev_class cls = classify(m->provider, m->event_name);
    if (cls == CLS_NONE) {
        /* Nothing here reads it: the tree is checked (and counted) but not kept. */
        ev_schemas_forget(&s->md, m->metadata_id);
        return;
    }
    struct ev_md *md = e->slot;
    md->cls = cls;
    md->schema = e->schema;
    for (int k = 0; k < F_COUNT_ALL; k++) {
        bool counters_field = k <= F_DISPLAY_UNITS;
        if (counters_field != (cls == CLS_COUNTERS)) {
            md->f[k] = -1;
            continue;
        }
        int idx = ev_schema_find(e->schema, field_paths[k]);
        md->f[k] = (int16_t)(idx < 0 ? -1 : idx);
    }
}

/* ---- event fields ------------------------------------------------------------------------ */

/*
 * The UTF-8 form of a string field in the per-event text area, or `fallback` when the event has
 * no such field. NULL when the text area is full (the event is then skipped as malformed).
 */
static const char *field_str(struct ev_stream *s, const struct ev_md *md, enum ev_fid f,
                             const char *fallback)
{
    int idx = md->f[f];
    if (idx < 0 || md->schema->fields[idx].code != EV_TYPE_STRING) {
        return fallback;
    }
    size_t len;
    char *out = s->text + s->text_len;
    if (ev_record_str(&s->rec, idx, out, sizeof(s->text) - s->text_len, &len) != 0) {
        return NULL;
    }
    s->text_len += len + 1;
    return out;
}

static bool field_f64(const struct ev_stream *s, const struct ev_md *md, enum ev_fid f, double *out)
{
    return md->f[f] >= 0 && ev_record_f64(&s->rec, md->f[f], out) == 0;
}

/*
 * A number as .NET's double.ToString(InvariantCulture) writes it (docs/events.md §3.4): optional
 * sign, digits with an optional fraction, an optional exponent, or NaN / Infinity / -Infinity. The
 * grammar is checked here; strtod then converts (dotmon never calls setlocale, so its decimal
 * point is '.'). -1 for anything else, "" included.
 */
static int parse_double(const char *p, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, p, n);
    buf[n] = '\0';
    const char *q = buf;
    bool neg = false;
    if (*q == '-' || *q == '+') {
        neg = *q == '-';
        q++;
    }
    if (strcmp(q, "NaN") == 0) {
        *out = (double)NAN;
        return 0;
    }
    if (strcmp(q, "Infinity") == 0 || strcmp(q, "\xE2\x88\x9E") == 0) {
        *out = neg ? -(double)INFINITY : (double)INFINITY;
        return 0;
    }
    size_t digits = 0;
    for (; *q >= '0' && *q <= '9'; q++) {
        digits++;
    }
    if (*q == '.') {
        for (q++; *q >= '0' && *q <= '9'; q++) {
            digits++;
        }
    }
    if (digits == 0) {
        return -1;
    }
    if (*q == 'e' || *q == 'E') {
        q++;
        if (*q == '-' || *q == '+') {
            q++;
        }
        if (!(*q >= '0' && *q <= '9')) {
            return -1;
        }
        while (*q >= '0' && *q <= '9') {
            q++;
        }
    }
    if (*q != '\0') {
        return -1;
    }
    char *end = NULL;
    *out = strtod(buf, &end);
    return end == buf + n ? 0 : -1;
}

static int parse_double_str(const char *s, double *out)
{
    return s == NULL ? -1 : parse_double(s, strlen(s), out);
}

/* An event timestamp (QPC ticks) as Unix milliseconds (docs/nettrace.md §2.3), 0 while the
 * trace's sync point is unknown or not a valid one. */
static int64_t event_unix_ms(struct ev_stream *s, int64_t ts)
{
    int64_t ms;
    return nettrace_event_unix_ms(&s->ck, ts, &ms) == 0 ? ms : 0;
}

static void emit(struct ev_stream *s, const struct ev_metric_sample *sample)
{
    s->samples++;
    s->on_sample(s->ud, sample);
}

static void report(struct ev_stream *s, const char *kind, const char *message)
{
    if (s->on_error != NULL) {
        s->on_error(s->ud, kind, message != NULL ? message : "");
    }
}

/* ---- EventCounters (docs/events.md §2.2-2.3) ---------------------------------------------- */

/* The "Interval=<ms>" of Series, or -1. */
static int64_t series_interval_ms(const char *series)
{
    const char *p = series != NULL ? strstr(series, "Interval=") : NULL;
    if (p == NULL) {
        return -1;
    }
    p += strlen("Interval=");
    int64_t v = 0;
    size_t digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 15; p++, digits++) {
        v = v * 10 + (*p - '0');
    }
    return digits > 0 ? v : -1;
}

static void on_counters(struct ev_stream *s, const struct ev_md *md, int64_t ts)
{
    struct ev_metric_sample m;
    memset(&m, 0, sizeof(m));
    const char *type = field_str(s, md, F_COUNTER_TYPE, "");
    m.name = field_str(s, md, F_NAME, NULL);
    m.display_name = field_str(s, md, F_DISPLAY_NAME, "");
    m.unit = field_str(s, md, F_DISPLAY_UNITS, "");
    m.tags = field_str(s, md, F_METADATA, "");
    const char *series = field_str(s, md, F_SERIES, "");
    if (type == NULL || m.name == NULL || m.display_name == NULL || m.unit == NULL ||
        m.tags == NULL || series == NULL) {
        s->payload_malformed++;
        return;
    }
    if (s->opt.counter_interval_s > 0) {
        int64_t want = (int64_t)(s->opt.counter_interval_s * 1000.0 + 0.5);
        if (series_interval_ms(series) != want) {
            return; /* another session's interval (docs/events.md §2.3 step 1) */
        }
    }
    /* CounterType decides; an event without it is told apart by which value field it has. */
    bool sum = strcmp(type, "Sum") == 0 || (type[0] == '\0' && md->f[F_INCREMENT] >= 0);
    if (!field_f64(s, md, sum ? F_INCREMENT : F_MEAN, &m.value)) {
        s->payload_malformed++;
        return;
    }
    m.kind = sum ? EV_METRIC_RATE : EV_METRIC_GAUGE;
    if (sum && m.unit[0] == '\0') {
        m.unit = "count";
    }
    double interval = 0;
    m.interval_sec = field_f64(s, md, F_INTERVAL_SEC, &interval) ? interval : 0;
    m.provider = md->schema->provider;
    m.is_meter = false;
    m.timestamp_ms = event_unix_ms(s, ts);
    emit(s, &m);
}

/* ---- System.Diagnostics.Metrics (docs/events.md §3.3-3.5) --------------------------------- */

/* True when the event's sessionId is ours (any session when the stream was given none). */
static bool session_matches(struct ev_stream *s, const struct ev_md *md, enum ev_fid f)
{
    const char *sid = field_str(s, md, f, NULL);
    if (sid == NULL) {
        return false;
    }
    return s->session_id == NULL || strcmp(sid, s->session_id) == 0;
}

static struct ev_instr *instr_find(struct ev_stream *s, int64_t id, const char *meter,
                                   const char *name)
{
    if (id != 0) {
        for (size_t k = 0; k < s->instr_len; k++) {
            if (s->instr[k].id == id) {
                return &s->instr[k];
            }
        }
    }
    if (meter == NULL || name == NULL) {
        return NULL;
    }
    for (size_t k = 0; k < s->instr_len; k++) {
        if (strcmp(s->instr[k].meter, meter) == 0 && strcmp(s->instr[k].name, name) == 0) {
            return &s->instr[k];
        }
    }
    return NULL;
}

/* BeginInstrumentReporting: (re)describes an instrument, by id and by meter + name. */
static void on_begin(struct ev_stream *s, const struct ev_md *md)
{
    const char *str[5] = {
        field_str(s, md, F_METER_NAME, NULL),
        field_str(s, md, F_INSTRUMENT_NAME, NULL),
        field_str(s, md, F_UNIT, ""),
        field_str(s, md, F_METER_TAGS, ""),
        field_str(s, md, F_INSTRUMENT_TAGS, ""),
    };
    int64_t id = 0;
    if (md->f[F_INSTRUMENT_ID] >= 0 && ev_record_i64(&s->rec, md->f[F_INSTRUMENT_ID], &id) != 0) {
        id = 0;
    }
    size_t total = 0;
    for (int k = 0; k < 5; k++) {
        if (str[k] == NULL) {
            s->payload_malformed++;
            return;
        }
        total += strlen(str[k]) + 1;
    }
    if (total > INSTR_TEXT_MAX) {
        s->payload_malformed++;
        return;
    }
    struct ev_instr *slot = instr_find(s, id, str[0], str[1]);
    if (slot == NULL) {
        if (s->instr_len == MAX_INSTRUMENTS) {
            return; /* past the cap, instruments go without their tags */
        }
        if (s->instr_len == s->instr_cap) {
            size_t cap = s->instr_cap ? s->instr_cap * 2 : 32;
            struct ev_instr *a = realloc(s->instr, cap * sizeof(*a));
            if (a == NULL) {
                stream_fail(s, -ENOMEM, "out of memory");
                return;
            }
            s->instr = a;
            s->instr_cap = cap;
        }
        slot = &s->instr[s->instr_len++];
        memset(slot, 0, sizeof(*slot));
    }
    char *blob = malloc(total);
    if (blob == NULL) {
        stream_fail(s, -ENOMEM, "out of memory");
        return;
    }
    free(slot->meter);
    char **dst[5] = {&slot->meter, &slot->name, &slot->unit, &slot->meter_tags,
                     &slot->instrument_tags};
    size_t off = 0;
    for (int k = 0; k < 5; k++) {
        size_t len = strlen(str[k]) + 1;
        memcpy(blob + off, str[k], len);
        *dst[k] = blob + off;
        off += len;
    }
    slot->id = id;
    slot->monotonic = strcmp(field_str(s, md, F_INSTRUMENT_TYPE, ""), "Counter`1") == 0;
}

/* "0.5=v;0.95=v;0.99=v" (events.md §3.4): pairs kept ascending by quantile; bad items skipped. */
static void parse_quantiles(const char *q, struct ev_metric_sample *m)
{
    m->nquantiles = 0;
    while (q != NULL && *q != '\0') {
        const char *end = strchr(q, ';');
        size_t len = end != NULL ? (size_t)(end - q) : strlen(q);
        const char *eq = memchr(q, '=', len);
        double qv;
        double v;
        if (eq != NULL && m->nquantiles < EV_METRIC_MAX_QUANTILES &&
            parse_double(q, (size_t)(eq - q), &qv) == 0 &&
            parse_double(eq + 1, len - (size_t)(eq + 1 - q), &v) == 0) {
            uint32_t k = m->nquantiles++;
            while (k > 0 && m->quantiles[k - 1].quantile > qv) {
                m->quantiles[k] = m->quantiles[k - 1];
                k--;
            }
            m->quantiles[k] = (struct ev_quantile){qv, v};
        }
        q = end != NULL ? end + 1 : NULL;
    }
}

/* The median stands for the histogram where one number is wanted. */
static void hist_median(struct ev_metric_sample *m)
{
    m->value = (double)NAN;
    for (uint32_t k = 0; k < m->nquantiles; k++) {
        if (m->quantiles[k].quantile == 0.5) {
            m->value = m->quantiles[k].value;
        }
    }
}

/*
 * Base2ExponentialHistogramValuePublished (docs/events.md §3.7): the buckets, their offset
 * recovered from the maximum, and the quantiles event 6 would have carried estimated from them so
 * every consumer still finds them. False (counted malformed) for a bucket string that is not the
 * runtime's, a scale out of range, or counts that do not add up to count.
 */
static bool exphist_value(struct ev_stream *s, const struct ev_md *md, struct ev_metric_sample *m)
{
    static const double qs[] = {0.5, 0.95, 0.99};
    struct ev_exphist *h = &s->exphist;
    memset(h, 0, sizeof(*h));
    int64_t scale = 0;
    int64_t count = 0;
    int64_t zeros = 0;
    double sum = 0;
    const char *buckets = field_str(s, md, F_BUCKETS, NULL);
    bool ok = buckets != NULL && md->f[F_SCALE] >= 0 && md->f[F_COUNT] >= 0 &&
              md->f[F_ZERO_COUNT] >= 0 && ev_record_i64(&s->rec, md->f[F_SCALE], &scale) == 0 &&
              ev_record_i64(&s->rec, md->f[F_COUNT], &count) == 0 &&
              ev_record_i64(&s->rec, md->f[F_ZERO_COUNT], &zeros) == 0 && count >= 0 &&
              zeros >= 0 && scale >= EV_EXPHIST_MIN_SCALE && scale <= EV_EXPHIST_MAX_SCALE &&
              field_f64(s, md, F_SUM, &sum) && field_f64(s, md, F_MINIMUM, &h->min) &&
              field_f64(s, md, F_MAXIMUM, &h->max) &&
              ev_exphist_parse_counts(buckets, s->exphist_counts, EV_EXPHIST_MAX_BUCKETS,
                                      &h->ncounts) == 0;
    uint64_t total = (uint64_t)zeros;
    for (uint32_t i = 0; ok && i < h->ncounts; i++) {
        ok = s->exphist_counts[i] <= UINT64_MAX - total;
        total += ok ? s->exphist_counts[i] : 0;
    }
    h->scale = (int32_t)scale;
    h->counts = s->exphist_counts;
    h->zero_count = (uint64_t)zeros;
    h->cumulative = s->opt.exphist_cumulative;
    if (!ok || total != (uint64_t)count || !ev_exphist_locate(h)) {
        s->payload_malformed++;
        return false;
    }
    if (count == 0) {
        h->min = h->max = (double)NAN; /* the runtime's MaxValue / MinValue placeholders */
    }
    m->kind = EV_METRIC_HISTOGRAM;
    m->hist_count = (uint64_t)count;
    m->hist_sum = sum;
    m->nquantiles = 0;
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        double v;
        if (ev_exphist_quantile(h, qs[k], &v)) {
            m->quantiles[m->nquantiles++] = (struct ev_quantile){qs[k], v};
        }
    }
    hist_median(m);
    m->exphist = h;
    return true;
}

/* The value of a data event as dotnet-monitor takes it; false when there is none to report. */
static bool meter_value(struct ev_stream *s, const struct ev_md *md, struct ev_metric_sample *m)
{
    const char *rate = field_str(s, md, F_RATE, "");
    const char *value = field_str(s, md, F_VALUE, "");
    switch (md->cls) {
    case CLS_RATE:
        m->kind = EV_METRIC_RATE;
        m->has_total = parse_double_str(value, &m->total) == 0; /* absent before v2 */
        return parse_double_str(rate, &m->value) == 0;          /* "" = first observation */
    case CLS_GAUGE:
        m->kind = EV_METRIC_GAUGE;
        return parse_double_str(field_str(s, md, F_LAST_VALUE, ""), &m->value) == 0;
    case CLS_UPDOWN:
        m->kind = EV_METRIC_UPDOWN;
        return parse_double_str(value, &m->value) == 0 || parse_double_str(rate, &m->value) == 0;
    case CLS_HISTOGRAM: {
        m->kind = EV_METRIC_HISTOGRAM;
        parse_quantiles(field_str(s, md, F_QUANTILES, ""), m);
        int64_t count = 0;
        if (md->f[F_COUNT] >= 0 && ev_record_i64(&s->rec, md->f[F_COUNT], &count) == 0 &&
            count > 0) {
            m->hist_count = (uint64_t)count;
        }
        double sum = 0;
        m->hist_sum = field_f64(s, md, F_SUM, &sum) ? sum : 0;
        hist_median(m);
        return true;
    }
    case CLS_EXPHIST:
        return exphist_value(s, md, m);
    default:
        return false;
    }
}

static void on_meter_value(struct ev_stream *s, const struct ev_md *md, int64_t ts)
{
    if (!session_matches(s, md, F_SESSION_ID)) {
        return;
    }
    struct ev_metric_sample m;
    memset(&m, 0, sizeof(m));
    m.provider = field_str(s, md, F_METER_NAME, NULL);
    m.name = field_str(s, md, F_INSTRUMENT_NAME, NULL);
    m.unit = field_str(s, md, F_UNIT, NULL);
    m.tags = field_str(s, md, F_TAGS, "");
    if (m.provider == NULL || m.name == NULL || m.tags == NULL) {
        s->payload_malformed++;
        return;
    }
    if (!meter_value(s, md, &m)) {
        return;
    }
    int64_t id = 0;
    if (md->f[F_INSTRUMENT_ID] >= 0 && ev_record_i64(&s->rec, md->f[F_INSTRUMENT_ID], &id) != 0) {
        id = 0;
    }
    const struct ev_instr *in = instr_find(s, id, m.provider, m.name);
    if (m.unit == NULL) {
        m.unit = in != NULL ? in->unit : ""; /* shapes without a unit field */
    }
    m.has_total = m.has_total && in != NULL && in->monotonic; /* a Prometheus counter */
    m.meter_tags = in != NULL ? in->meter_tags : "";
    m.instrument_tags = in != NULL ? in->instrument_tags : "";
    m.display_name = "";
    m.is_meter = true;
    m.interval_sec = s->opt.refresh_interval_s;
    m.timestamp_ms = event_unix_ms(s, ts);
    emit(s, &m);
}

static void on_meter_error(struct ev_stream *s, const struct ev_md *md)
{
    char msg[512];
    const char *kind = NULL;
    const char *text = "";
    switch (md->cls) {
    case CLS_MULTI: {
        /* Sent to every new session while another one runs: ours is the newcomer unless the
         * running session is ours (docs/events.md §3.2, §3.5). */
        const char *running = field_str(s, md, F_RUNNING_SESSION_ID, "");
        if (running == NULL || (s->session_id != NULL && strcmp(running, s->session_id) == 0)) {
            return;
        }
        kind = "MultipleSessionsNotSupported";
        int n = snprintf(msg, sizeof(msg), "another metrics session is running (sessionId %s)",
                         running);
        text = n > 0 && (size_t)n < sizeof(msg) ? msg : "another metrics session is running";
        break;
    }
    case CLS_MULTI_CONFIG: {
        const char *client = field_str(s, md, F_CLIENT_ID, NULL);
        if (client == NULL || s->client_id == NULL || strcmp(client, s->client_id) != 0) {
            return;
        }
        const char *v[6] = {
            field_str(s, md, F_EXP_HIST, ""),    field_str(s, md, F_ACT_HIST, ""),
            field_str(s, md, F_EXP_TS, ""),      field_str(s, md, F_ACT_TS, ""),
            field_str(s, md, F_EXP_REFRESH, ""), field_str(s, md, F_ACT_REFRESH, "")};
        for (int k = 0; k < 6; k++) {
            v[k] = v[k] != NULL ? v[k] : "";
        }
        kind = "MultipleSessionsConfiguredIncorrectly";
        int n = snprintf(msg, sizeof(msg),
                         "the shared session runs with other settings: MaxHistograms %s (asked "
                         "%s), MaxTimeSeries %s (asked %s), RefreshInterval %s (asked %s)",
                         v[0], v[1], v[2], v[3], v[4], v[5]);
        text =
            n > 0 && (size_t)n < sizeof(msg) ? msg : "the shared session runs with other settings";
        break;
    }
    default:
        if (!session_matches(s, md, F_SESSION_ID)) {
            return;
        }
        if (md->cls == CLS_ERROR || md->cls == CLS_CB_ERROR) {
            kind = md->cls == CLS_ERROR ? "Error" : "ObservableInstrumentCallbackError";
            text = field_str(s, md, F_ERROR_MESSAGE, "");
        } else if (md->cls == CLS_TS_LIMIT) {
            kind = "TimeSeriesLimitReached";
            text = "the time series limit (MaxTimeSeries) was reached: new series are not tracked";
        } else {
            kind = "HistogramLimitReached";
            text =
                "the histogram limit (MaxHistograms) was reached: new histograms are not tracked";
        }
        break;
    }
    report(s, kind, text);
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_stream *s = ud;
    if (s->err != 0) {
        return;
    }
    struct ev_schema_entry *e = ev_schemas_find(&s->md, ev->metadata_id);
    const struct ev_md *md = e != NULL ? e->slot : NULL;
    if (md == NULL || md->cls == CLS_NONE) {
        return; /* not kept, or a kept id redefined as something not read here */
    }
    if (ev_record_decode(&s->rec, md->schema, ev->payload, ev->payload_len) != 0) {
        s->payload_malformed++;
        return;
    }
    s->text_len = 0;
    switch (md->cls) {
    case CLS_COUNTERS:
        on_counters(s, md, ev->timestamp);
        break;
    case CLS_RATE:
    case CLS_GAUGE:
    case CLS_UPDOWN:
    case CLS_HISTOGRAM:
    case CLS_EXPHIST:
        on_meter_value(s, md, ev->timestamp);
        break;
    case CLS_BEGIN:
        if (session_matches(s, md, F_SESSION_ID)) {
            on_begin(s, md);
        }
        break;
    default:
        on_meter_error(s, md);
        break;
    }
}

/* ---- public API -------------------------------------------------------------------------- */

int ev_stream_new(struct ev_stream **out, const struct ev_stream_options *opt,
                  ev_stream_sample_cb on_sample, ev_stream_error_cb on_error, void *ud)
{
    if (out == NULL || on_sample == NULL) {
        return AGENT_E_INVAL;
    }
    struct ev_stream *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    if (opt != NULL) {
        s->opt = *opt;
    }
    s->opt.session_id = NULL;
    s->opt.client_id = NULL;
    s->on_sample = on_sample;
    s->on_error = on_error;
    s->ud = ud;
    struct ev_schemas_config mcfg = {.slot_size = sizeof(struct ev_md)};
    ev_schemas_init(&s->md, &mcfg);
    int rc = 0;
    if (opt != NULL &&
        ((opt->session_id != NULL && (s->session_id = dup_str(opt->session_id)) == NULL) ||
         (opt->client_id != NULL && (s->client_id = dup_str(opt->client_id)) == NULL))) {
        rc = -ENOMEM;
        goto fail;
    }
    struct nettrace_options nopt = {
        .max_block = s->opt.max_block,
        .max_metadata = s->opt.max_metadata != 0 ? s->opt.max_metadata : DEFAULT_MAX_METADATA,
    };
    rc = nettrace_checker_init(&s->ck, &nopt);
    if (rc < 0) {
        goto fail;
    }
    nettrace_set_event_cb(&s->ck, on_event, s);
    nettrace_set_metadata_cb(&s->ck, on_metadata, s);
    *out = s;
    return 0;
fail:
    ev_stream_free(s);
    return rc;
}

int ev_stream_feed(struct ev_stream *s, const uint8_t *p, size_t n)
{
    if (s->err != 0) {
        return s->err;
    }
    int rc = nettrace_feed(&s->ck, p, n);
    if (s->err != 0) {
        return s->err; /* a failure of ours inside a callback */
    }
    if (rc < 0) {
        nettrace_error_line(&s->ck, rc, s->msg, sizeof(s->msg));
        s->err = rc;
    }
    return rc;
}

const char *ev_stream_error(const struct ev_stream *s)
{
    return s->err != 0 ? s->msg : NULL;
}

void ev_stream_get_stats(const struct ev_stream *s, struct ev_stream_stats *out)
{
    const struct nettrace_stats *st = nettrace_get_stats(&s->ck);
    memset(out, 0, sizeof(*out));
    out->bytes = st->bytes;
    out->events = st->events;
    out->metadata = st->metadata;
    out->lost = st->lost;
    out->samples = s->samples;
    out->metadata_malformed = s->metadata_malformed;
    out->payload_malformed = s->payload_malformed;
}

void ev_stream_free(struct ev_stream *s)
{
    if (s == NULL) {
        return;
    }
    nettrace_checker_fini(&s->ck);
    ev_schemas_fini(&s->md);
    for (size_t k = 0; k < s->instr_len; k++) {
        free(s->instr[k].meter);
    }
    free(s->instr);
    free(s->session_id);
    free(s->client_id);
    free(s);
}
