/* SPDX-License-Identifier: MIT */
/*
 * events/ev_stream: nettrace bytes to metric samples. Two kinds of input:
 *  - synthetic streams written here byte by byte (uncompressed blobs, docs/nettrace.md §2.1-5),
 * with exact expectations: EventCounters Mean/Sum, every meter event kind, session filtering, the
 *    error events, malformed metadata and payloads, timestamps;
 *  - real captures of a .NET 10 app (tests/fixtures/events/README.md), fed whole and one byte at a
 *    time, checked for the counters and instruments the runtime is known to publish.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_stream.h"
#include "fixture.h"
#include "ntw.h"
#include "wbuf.h"

/* ---- a nettrace writer (ntw.h) ----------------------------------------------------------- */

#define SYNC_UNIX 1735787045678ll /* 2025-01-02T03:04:05.678Z, ntw.h's Trace object */

static void nt_event(struct nt *t, uint32_t md_id, int64_t ts, struct wb *pl)
{
    nt_blob(t, md_id, ts, 0, 0, pl);
    pl->n = 0;
}

/* ---- metadata records -------------------------------------------------------------------- */

struct fdesc {
    uint32_t code;
    const char *name;
};

static void md_head(struct wb *w, uint32_t id, const char *provider, const char *name)
{
    wb_u32(w, id);
    wb_wstr(w, provider);
    wb_u32(w, id + 100);
    wb_wstr(w, name);
    wb_le(w, 0xF00000000002ull, 8);
    wb_u32(w, 2);
    wb_u32(w, 4);
}

static void md_flat(struct nt *t, uint32_t id, const char *provider, const char *name,
                    const struct fdesc *f, size_t n)
{
    struct wb w = {0};
    md_head(&w, id, provider, name);
    wb_u32(&w, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        wb_u32(&w, f[k].code);
        wb_wstr(&w, f[k].name);
    }
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

/* EventCounters: "" { Payload { fields } } (docs/events.md §2.2). */
static void md_counters(struct nt *t, uint32_t id, const struct fdesc *f, size_t n)
{
    struct wb w = {0};
    md_head(&w, id, "System.Runtime", "EventCounters");
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    wb_u32(&w, 1);
    wb_u32(&w, (uint32_t)n);
    for (size_t k = 0; k < n; k++) {
        wb_u32(&w, f[k].code);
        wb_wstr(&w, f[k].name);
    }
    wb_wstr(&w, "Payload");
    wb_wstr(&w, "");
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static const struct fdesc mean_fields[] = {
    {18, "Name"},   {18, "DisplayName"}, {14, "Mean"},     {14, "StandardDeviation"},
    {9, "Count"},   {14, "Min"},         {14, "Max"},      {13, "IntervalSec"},
    {18, "Series"}, {18, "CounterType"}, {18, "Metadata"}, {18, "DisplayUnits"},
};
static const struct fdesc sum_fields[] = {
    {18, "Name"},      {18, "DisplayName"}, {18, "DisplayRateTimeScale"},
    {14, "Increment"}, {13, "IntervalSec"}, {18, "Metadata"},
    {18, "Series"},    {18, "CounterType"}, {18, "DisplayUnits"},
};
static const struct fdesc rate_fields[] = {
    {18, "sessionId"},      {18, "meterName"}, {18, "meterVersion"},
    {18, "instrumentName"}, {18, "unit"},      {18, "tags"},
    {18, "rate"},           {18, "value"},     {9, "instrumentId"},
};
static const struct fdesc gauge_fields[] = {
    {18, "sessionId"}, {18, "meterName"}, {18, "meterVersion"}, {18, "instrumentName"},
    {18, "unit"},      {18, "tags"},      {18, "lastValue"},    {9, "instrumentId"},
};
static const struct fdesc hist_fields[] = {
    {18, "sessionId"}, {18, "meterName"},   {18, "meterVersion"}, {18, "instrumentName"},
    {18, "unit"},      {18, "tags"},        {18, "quantiles"},    {9, "count"},
    {14, "sum"},       {9, "instrumentId"},
};
/* Version 1 order: no instrumentId; field names, not positions, find the rest. */
static const struct fdesc updown_v1_fields[] = {
    {18, "sessionId"}, {18, "meterName"}, {18, "meterVersion"}, {18, "instrumentName"},
    {18, "unit"},      {18, "tags"},      {18, "value"},        {18, "rate"},
};
static const struct fdesc begin_fields[] = {
    {18, "sessionId"},      {18, "meterName"},      {18, "meterVersion"},
    {18, "instrumentName"}, {18, "instrumentType"}, {18, "unit"},
    {18, "description"},    {18, "instrumentTags"}, {18, "meterTags"},
    {18, "meterScopeHash"}, {9, "instrumentId"},    {18, "meterTelemetrySchemaUrl"},
};
static const struct fdesc err_fields[] = {{18, "sessionId"}, {18, "errorMessage"}};
static const struct fdesc multi_fields[] = {{18, "runningSessionId"}};
static const struct fdesc sid_fields[] = {{18, "sessionId"}};
static const struct fdesc cfg_fields[] = {
    {18, "clientId"},
    {18, "expectedMaxHistograms"},
    {18, "actualMaxHistograms"},
    {18, "expectedMaxTimeSeries"},
    {18, "actualMaxTimeSeries"},
    {18, "expectedRefreshInterval"},
    {18, "actualRefreshInterval"},
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

enum {
    MD_MEAN = 1,
    MD_SUM,
    MD_RATE,
    MD_GAUGE,
    MD_HIST,
    MD_UPDOWN,
    MD_BEGIN,
    MD_MULTI,
    MD_ERROR,
    MD_TSLIMIT,
    MD_CFG,
    MD_BAD,
    MD_OTHER
};

/* A V2Params list with a code no V5 writer uses: nettrace reads past it, the decoder refuses. */
static void md_bad(struct nt *t)
{
    struct wb w = {0};
    md_head(&w, MD_BAD, "Bad.Source", "EventCounters");
    wb_u32(&w, 0);
    wb_u32(&w, 14);
    wb_u8(&w, 2);
    wb_u32(&w, 1);
    wb_u32(&w, 10);
    wb_le(&w, 0, 2);
    wb_u32(&w, 20);
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static void put_strs(struct wb *w, const char *const *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        wb_wstr(w, s[k]);
    }
}

static void mean_payload(struct wb *p, const char *name, double mean, const char *series)
{
    wb_wstr(p, name);
    wb_wstr(p, "Display");
    wb_f64(p, mean);
    wb_f64(p, 0);
    wb_u32(p, 1);
    wb_f64(p, mean);
    wb_f64(p, mean);
    wb_f32(p, 1.0f);
    wb_wstr(p, series);
    wb_wstr(p, "Mean");
    wb_wstr(p, "k:v");
    wb_wstr(p, "%");
}

static uint8_t *synthetic(size_t *n)
{
    struct nt t;
    nt_begin(&t);
    md_counters(&t, MD_MEAN, mean_fields, N(mean_fields));
    md_counters(&t, MD_SUM, sum_fields, N(sum_fields));
    const char *mp = "System.Diagnostics.Metrics";
    md_flat(&t, MD_RATE, mp, "CounterRateValuePublished", rate_fields, N(rate_fields));
    md_flat(&t, MD_GAUGE, mp, "GaugeValuePublished", gauge_fields, N(gauge_fields));
    md_flat(&t, MD_HIST, mp, "HistogramValuePublished", hist_fields, N(hist_fields));
    md_flat(&t, MD_UPDOWN, mp, "UpDownCounterRateValuePublished", updown_v1_fields,
            N(updown_v1_fields));
    md_flat(&t, MD_BEGIN, mp, "BeginInstrumentReporting", begin_fields, N(begin_fields));
    md_flat(&t, MD_MULTI, mp, "MultipleSessionsNotSupportedError", multi_fields, N(multi_fields));
    md_flat(&t, MD_ERROR, mp, "Error", err_fields, N(err_fields));
    md_flat(&t, MD_TSLIMIT, mp, "TimeSeriesLimitReached", sid_fields, N(sid_fields));
    md_flat(&t, MD_CFG, mp, "MultipleSessionsConfiguredIncorrectlyError", cfg_fields,
            N(cfg_fields));
    md_bad(&t);
    /* Same name, another provider than System.Diagnostics.Metrics: not a meter event. */
    md_flat(&t, MD_OTHER, "Other.Source", "GaugeValuePublished", gauge_fields, N(gauge_fields));
    nt_block(&t, "MetadataBlock", false);

    struct wb p = {0};
    int64_t ts = SYNC_QPC + 2500000000ll; /* 2.5 s after the sync point */
    mean_payload(&p, "cpu-usage", 12.5, "Interval=1000");
    nt_event(&t, MD_MEAN, ts, &p);
    mean_payload(&p, "working-set", 80, "Interval=500"); /* another session's interval */
    nt_event(&t, MD_MEAN, ts, &p);
    static const char *const sum1[] = {"exception-count", "Exception Count", "00:00:01"};
    put_strs(&p, sum1, 3);
    wb_f64(&p, 6);
    wb_f32(&p, 0.5f);
    static const char *const sum2[] = {"", "Interval=1000", "Sum", ""};
    put_strs(&p, sum2, 4);
    nt_event(&t, MD_SUM, ts, &p);
    wb_wstr(&p, "short"); /* a Mean payload cut short */
    nt_event(&t, MD_MEAN, ts, &p);

    static const char *const begin[] = {"s1",  "M", "1.0", "req",    "Counter`1",
                                        "{r}", "d", "a=b", "team=x", "123"};
    put_strs(&p, begin, N(begin));
    wb_u32(&p, 5);
    wb_wstr(&p, "");
    nt_event(&t, MD_BEGIN, ts, &p);
    static const char *const rate[] = {"s1", "M", "1.0", "req", "{r}", "code=200", "3", "10"};
    put_strs(&p, rate, N(rate));
    wb_u32(&p, 5);
    nt_event(&t, MD_RATE, ts + 1000000, &p);
    static const char *const rate_empty[] = {"s1", "M", "1.0", "req", "{r}", "", "", "10"};
    put_strs(&p, rate_empty, N(rate_empty));
    wb_u32(&p, 5);
    nt_event(&t, MD_RATE, ts, &p);
    static const char *const rate_other[] = {"other", "M", "1.0", "req", "{r}", "", "4", "1"};
    put_strs(&p, rate_other, N(rate_other));
    wb_u32(&p, 5);
    nt_event(&t, MD_RATE, ts, &p);
    static const char *const gauge_empty[] = {"s1", "M", "", "temp", "Cel", "", ""};
    put_strs(&p, gauge_empty, N(gauge_empty));
    wb_u32(&p, 6);
    nt_event(&t, MD_GAUGE, ts, &p);
    static const char *const gauge[] = {"s1", "M", "", "temp", "Cel", "", "42.5"};
    put_strs(&p, gauge, N(gauge));
    wb_u32(&p, 6);
    nt_event(&t, MD_GAUGE, ts, &p);
    static const char *const gauge_o[] = {"s1", "M", "", "temp", "Cel", "", "1"};
    put_strs(&p, gauge_o, N(gauge_o));
    wb_u32(&p, 6);
    nt_event(&t, MD_OTHER, ts, &p);
    static const char *const ud1[] = {"s1", "M", "", "queue", "", "", "", "-2"};
    put_strs(&p, ud1, N(ud1));
    nt_event(&t, MD_UPDOWN, ts, &p);
    static const char *const ud2[] = {"s1", "M", "", "queue", "", "", "7", "1"};
    put_strs(&p, ud2, N(ud2));
    nt_event(&t, MD_UPDOWN, ts, &p);
    static const char *const hist[] = {"s1", "M", "", "lat", "ms", "r=/", "0.99=9;0.5=5;0.95=7.5"};
    put_strs(&p, hist, N(hist));
    wb_u32(&p, 3);
    wb_f64(&p, 21.5);
    wb_u32(&p, 0);
    nt_event(&t, MD_HIST, ts, &p);

    wb_wstr(&p, "zzz");
    nt_event(&t, MD_MULTI, ts, &p);
    wb_wstr(&p, "s1"); /* our own session running: not an error for us */
    nt_event(&t, MD_MULTI, ts, &p);
    wb_wstr(&p, "s1");
    wb_wstr(&p, "boom");
    nt_event(&t, MD_ERROR, ts, &p);
    wb_wstr(&p, "other");
    wb_wstr(&p, "not ours");
    nt_event(&t, MD_ERROR, ts, &p);
    wb_wstr(&p, "s1");
    nt_event(&t, MD_TSLIMIT, ts, &p);
    static const char *const cfg[] = {"c1", "20", "10", "1000", "1000", "1", "2"};
    put_strs(&p, cfg, N(cfg));
    nt_event(&t, MD_CFG, ts, &p);
    static const char *const cfg_other[] = {"c2", "20", "10", "1000", "1000", "1", "2"};
    put_strs(&p, cfg_other, N(cfg_other));
    nt_event(&t, MD_CFG, ts, &p);
    nt_event(&t, MD_BAD, ts, &p);
    nt_block(&t, "EventBlock", false);
    wb_u8(&t.out, 1);
    free(p.b);
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

/* ---- what the callbacks saw -------------------------------------------------------------- */

#define MAX_SEEN 4096

struct sample_copy {
    char provider[96];
    char name[96];
    char display_name[96];
    char unit[32];
    char tags[160];
    char meter_tags[96];
    char instrument_tags[96];
    bool has_meter_tags;
    struct ev_metric_sample s;
    /* the sample's exponential histogram (s.exphist points here when there is one) */
    struct ev_exphist eh;
    uint64_t eh_counts[8];
};

struct seen {
    size_t n;
    struct sample_copy *samples;
    size_t nerr;
    char err_kind[16][48];
    char err_msg[16][256];
};

static void copy_str(char *dst, size_t cap, const char *src)
{
    assert_non_null(src);
    size_t len = strlen(src);
    assert_true(len < cap);
    memcpy(dst, src, len + 1);
}

static void on_sample(void *ud, const struct ev_metric_sample *s)
{
    struct seen *sn = ud;
    assert_true(sn->n < MAX_SEEN);
    struct sample_copy *c = &sn->samples[sn->n++];
    c->s = *s;
    copy_str(c->provider, sizeof(c->provider), s->provider);
    copy_str(c->name, sizeof(c->name), s->name);
    copy_str(c->display_name, sizeof(c->display_name), s->display_name);
    copy_str(c->unit, sizeof(c->unit), s->unit);
    copy_str(c->tags, sizeof(c->tags), s->tags);
    c->has_meter_tags = s->meter_tags != NULL;
    assert_true((s->meter_tags != NULL) == s->is_meter);
    assert_true((s->instrument_tags != NULL) == s->is_meter);
    if (s->is_meter) {
        copy_str(c->meter_tags, sizeof(c->meter_tags), s->meter_tags);
        copy_str(c->instrument_tags, sizeof(c->instrument_tags), s->instrument_tags);
    }
    assert_true(s->nquantiles <= EV_METRIC_MAX_QUANTILES);
    if (s->exphist != NULL) {
        assert_true(s->exphist->ncounts <= N(c->eh_counts));
        c->eh = *s->exphist;
        memcpy(c->eh_counts, s->exphist->counts, s->exphist->ncounts * sizeof(uint64_t));
        c->eh.counts = c->eh_counts;
        c->s.exphist = &c->eh;
    }
}

static void on_error(void *ud, const char *kind, const char *msg)
{
    struct seen *sn = ud;
    assert_true(sn->nerr < 16);
    copy_str(sn->err_kind[sn->nerr], sizeof(sn->err_kind[0]), kind);
    copy_str(sn->err_msg[sn->nerr], sizeof(sn->err_msg[0]), msg);
    sn->nerr++;
}

static void seen_init(struct seen *sn)
{
    memset(sn, 0, sizeof(*sn));
    sn->samples = calloc(MAX_SEEN, sizeof(*sn->samples));
    assert_non_null(sn->samples);
}

/* Feeds p[0..n) in chunks of `chunk` bytes (0 = whole). */
static int run(const struct ev_stream_options *opt, const uint8_t *p, size_t n, size_t chunk,
               struct seen *sn, struct ev_stream_stats *st)
{
    struct ev_stream *s = NULL;
    assert_int_equal(ev_stream_new(&s, opt, on_sample, on_error, sn), 0);
    int rc = 0;
    if (chunk == 0) {
        rc = ev_stream_feed(s, p, n);
    } else {
        for (size_t off = 0; off < n && rc == 0; off += chunk) {
            rc = ev_stream_feed(s, p + off, n - off < chunk ? n - off : chunk);
        }
    }
    if (rc == 0) {
        assert_null(ev_stream_error(s));
    } else {
        assert_non_null(ev_stream_error(s));
    }
    ev_stream_get_stats(s, st);
    ev_stream_free(s);
    return rc;
}

static const struct sample_copy *find(const struct seen *sn, const char *name, size_t nth)
{
    for (size_t k = 0; k < sn->n; k++) {
        if (strcmp(sn->samples[k].name, name) == 0 && nth-- == 0) {
            return &sn->samples[k];
        }
    }
    return NULL;
}

static size_t count_named(const struct seen *sn, const char *name)
{
    size_t c = 0;
    for (size_t k = 0; k < sn->n; k++) {
        c += strcmp(sn->samples[k].name, name) == 0;
    }
    return c;
}

/* ---- synthetic ---------------------------------------------------------------------------- */

static void check_synthetic(const struct seen *sn, const struct ev_stream_stats *st)
{
    assert_int_equal(st->metadata, MD_OTHER);
    assert_int_equal(st->metadata_malformed, 1);
    assert_int_equal(st->payload_malformed, 1);
    assert_int_equal(st->lost, 0);
    assert_int_equal(st->samples, sn->n);

    const struct sample_copy *c = find(sn, "cpu-usage", 0);
    assert_non_null(c);
    assert_int_equal(c->s.kind, EV_METRIC_GAUGE);
    assert_false(c->s.is_meter);
    assert_true(c->s.value == 12.5);
    assert_string_equal(c->provider, "System.Runtime");
    assert_string_equal(c->display_name, "Display");
    assert_string_equal(c->unit, "%");
    assert_string_equal(c->tags, "k:v");
    assert_true(c->s.interval_sec == 1.0);
    assert_int_equal(c->s.timestamp_ms, SYNC_UNIX + 2500);
    assert_null(find(sn, "working-set", 0)); /* Interval=500 is not ours */

    c = find(sn, "exception-count", 0);
    assert_non_null(c);
    assert_int_equal(c->s.kind, EV_METRIC_RATE);
    assert_true(c->s.value == 6);
    assert_string_equal(c->unit, "count");
    assert_true(c->s.interval_sec == 0.5);

    assert_int_equal(count_named(sn, "req"), 1); /* "" rate and the other session dropped */
    c = find(sn, "req", 0);
    assert_int_equal(c->s.kind, EV_METRIC_RATE);
    assert_true(c->s.is_meter);
    assert_true(c->s.value == 3);
    assert_string_equal(c->provider, "M");
    assert_string_equal(c->unit, "{r}");
    assert_string_equal(c->tags, "code=200");
    assert_string_equal(c->meter_tags, "team=x");
    assert_string_equal(c->instrument_tags, "a=b");
    assert_string_equal(c->display_name, "");
    assert_true(c->s.interval_sec == 2.0);
    assert_int_equal(c->s.timestamp_ms, SYNC_UNIX + 2501);

    assert_int_equal(count_named(sn, "temp"), 1); /* "" lastValue, other provider dropped */
    c = find(sn, "temp", 0);
    assert_int_equal(c->s.kind, EV_METRIC_GAUGE);
    assert_true(c->s.value == 42.5);
    assert_string_equal(c->unit, "Cel");
    assert_string_equal(c->meter_tags, ""); /* no BeginInstrumentReporting for it */

    assert_int_equal(count_named(sn, "queue"), 2);
    assert_int_equal(find(sn, "queue", 0)->s.kind, EV_METRIC_UPDOWN);
    assert_true(find(sn, "queue", 0)->s.value == -2); /* value "" falls back to rate */
    assert_true(find(sn, "queue", 1)->s.value == 7);

    c = find(sn, "lat", 0);
    assert_non_null(c);
    assert_int_equal(c->s.kind, EV_METRIC_HISTOGRAM);
    assert_int_equal(c->s.nquantiles, 3);
    assert_true(c->s.quantiles[0].quantile == 0.5 && c->s.quantiles[0].value == 5);
    assert_true(c->s.quantiles[1].quantile == 0.95 && c->s.quantiles[1].value == 7.5);
    assert_true(c->s.quantiles[2].quantile == 0.99 && c->s.quantiles[2].value == 9);
    assert_int_equal(c->s.hist_count, 3);
    assert_true(c->s.hist_sum == 21.5);
    assert_true(c->s.value == 5);
    assert_int_equal(sn->n, 7);

    assert_int_equal(sn->nerr, 4);
    assert_string_equal(sn->err_kind[0], "MultipleSessionsNotSupported");
    assert_non_null(strstr(sn->err_msg[0], "zzz"));
    assert_string_equal(sn->err_kind[1], "Error");
    assert_string_equal(sn->err_msg[1], "boom");
    assert_string_equal(sn->err_kind[2], "TimeSeriesLimitReached");
    assert_string_equal(sn->err_kind[3], "MultipleSessionsConfiguredIncorrectly");
    assert_non_null(strstr(sn->err_msg[3], "MaxHistograms 20 (asked 10)"));
}

static void test_ev_stream_synthetic(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = synthetic(&n);
    struct ev_stream_options opt = {.session_id = "s1",
                                    .client_id = "c1",
                                    .refresh_interval_s = 2.0,
                                    .counter_interval_s = 1.0};
    static const size_t chunks[] = {0, 1, 3, 64};
    for (size_t k = 0; k < N(chunks); k++) {
        struct seen sn;
        seen_init(&sn);
        struct ev_stream_stats st;
        assert_int_equal(run(&opt, p, n, chunks[k], &sn, &st), 0);
        assert_int_equal(st.bytes, n);
        check_synthetic(&sn, &st);
        free(sn.samples);
    }
    free(p);
}

/* Without a session id every session's events count; without a counter interval every Series. */
static void test_ev_stream_any_session(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = synthetic(&n);
    struct seen sn;
    seen_init(&sn);
    struct ev_stream_stats st;
    assert_int_equal(run(NULL, p, n, 0, &sn, &st), 0);
    assert_int_equal(count_named(&sn, "req"), 2);
    assert_non_null(find(&sn, "working-set", 0));
    /* Errors: the two MultipleSessions (no id of ours to compare), both Error events, the limit;
     * no client id, so no MultipleSessionsConfiguredIncorrectly. */
    assert_int_equal(sn.nerr, 5);
    free(sn.samples);
    free(p);
}

/* A broken stream stops with a reason; later feeds fail the same way. */
static void test_ev_stream_invalid(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = synthetic(&n);
    p[40] ^= 0x55; /* inside the Trace object's preamble */
    struct seen sn;
    seen_init(&sn);
    struct ev_stream *s = NULL;
    assert_int_equal(ev_stream_new(&s, NULL, on_sample, NULL, &sn), 0);
    int rc = ev_stream_feed(s, p, n);
    assert_true(rc < 0);
    assert_non_null(ev_stream_error(s));
    assert_non_null(strstr(ev_stream_error(s), "nettrace"));
    assert_int_equal(ev_stream_feed(s, p, 1), rc);
    ev_stream_free(s);
    ev_stream_free(NULL);
    assert_int_equal(ev_stream_new(NULL, NULL, on_sample, NULL, NULL), AGENT_E_INVAL);
    assert_int_equal(ev_stream_new(&s, NULL, NULL, NULL, NULL), AGENT_E_INVAL);
    free(sn.samples);
    free(p);
}

/* ---- Base2ExponentialHistogramValuePublished (docs/events.md §3.7) -------------------------- */

#define MD_EXP 40

static const struct fdesc exp_fields[] = {
    {18, "sessionId"},   {18, "meterName"}, {18, "meterVersion"}, {18, "instrumentName"},
    {9, "instrumentId"}, {18, "unit"},      {18, "tags"},         {9, "scale"},
    {14, "sum"},         {11, "count"},     {11, "zeroCount"},    {14, "minimum"},
    {14, "maximum"},     {18, "buckets"},
};

struct exp_ev {
    const char *session;
    const char *name;
    int32_t scale;
    double sum;
    int64_t count;
    int64_t zeros;
    double min, max;
    const char *buckets;
};

static void exp_event(struct nt *t, struct wb *p, const struct exp_ev *e)
{
    static const char *const head[] = {"M", "", NULL};
    wb_wstr(p, e->session);
    put_strs(p, head, 2);
    wb_wstr(p, e->name);
    wb_u32(p, 0);
    wb_wstr(p, "ms");
    wb_wstr(p, "r=/");
    wb_u32(p, (uint32_t)e->scale);
    wb_f64(p, e->sum);
    wb_le(p, (uint64_t)e->count, 8);
    wb_le(p, (uint64_t)e->zeros, 8);
    wb_f64(p, e->min);
    wb_f64(p, e->max);
    wb_wstr(p, e->buckets);
    nt_event(t, MD_EXP, SYNC_QPC + 1000000000ll, p);
}

static uint8_t *exp_stream(size_t *n, const char *huge)
{
    struct nt t;
    nt_begin(&t);
    md_flat(&t, MD_EXP, "System.Diagnostics.Metrics", "Base2ExponentialHistogramValuePublished",
            exp_fields, N(exp_fields));
    nt_block(&t, "MetadataBlock", false);
    const double dmax = 1.7976931348623157e308;
    const struct exp_ev evs[] = {
        /* 0, 1.5, 1.5, 3 at scale 1: buckets 1 (sqrt 2, 2] and 3 (2^1.5, 4] */
        {"s1", "good", 1, 6, 4, 1, 0, 3, "2, 0, 1"},
        /* after a reset the runtime's window starts at bucket 0: 3 in (2, 4] at index 1 */
        {"s1", "start", 0, 9, 3, 0, 2.5, 3.5, "0,0,3"},
        /* ... or ends at bucket -1 while every value is below it: 0.25 in (1/8, 1/4] at -3 */
        {"s1", "end", 0, 1, 4, 0, 0.25, 0.25, "4, 0, 0"},
        {"s1", "empty", 20, 0, 0, 0, dmax, -dmax, ""},
        {"other", "good", 1, 6, 4, 1, 0, 3, "2, 0, 1"}, /* another session's */
        /* hostile: not the runtime's shapes */
        {"s1", "bad", 1, 6, 4, 1, 0, 3, "2,,1"},
        {"s1", "bad", 1, 6, 4, 1, 0, 3, "2, 0, 1x"},
        {"s1", "bad", 1, 6, 4, 1, 0, 3, "2, 0, -1"},
        {"s1", "bad", 1, 6, 4, 1, 0, 3, "99999999999999999999"},
        {"s1", "bad", 1, 6, 4, 1, 0, 3, "2, 0, 2"},  /* counts do not add up to count */
        {"s1", "bad", 21, 6, 4, 1, 0, 3, "2, 0, 1"}, /* scale out of range */
        {"s1", "bad", 0, 6, 2, 0, 3, 3, "1, 0"},     /* the max's bucket is not in the window */
        {"s1", "bad", 0, 6, 1, 0, 3, (double)NAN, "1"},
        {"s1", "bad", 0, 1, 1100, 0, 1.5, 1.5, huge}, /* more counts than a window holds */
    };
    struct wb p = {0};
    for (size_t k = 0; k < N(evs); k++) {
        exp_event(&t, &p, &evs[k]);
    }
    nt_block(&t, "EventBlock", false);
    wb_u8(&t.out, 1);
    free(p.b);
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

static void test_ev_stream_exphist(void **state)
{
    (void)state;
    char huge[1100 * 3 + 1];
    for (size_t k = 0; k < 1100; k++) {
        memcpy(huge + 3 * k, "1, ", 3);
    }
    huge[1100 * 3 - 2] = '\0';
    size_t n;
    uint8_t *p = exp_stream(&n, huge);
    /* EV_STREAM_EXPHIST_SEED=<path>: the stream is also written there (fuzz_events' gen-exphist
     * seed, tests/fuzz/corpus/README.md) */
    const char *seed = getenv("EV_STREAM_EXPHIST_SEED");
    if (seed != NULL) {
        FILE *f = fopen(seed, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(p, 1, n, f), n);
        assert_int_equal(fclose(f), 0);
    }
    struct ev_stream_options opt = {.session_id = "s1", .refresh_interval_s = 1.0};
    struct seen sn;
    seen_init(&sn);
    struct ev_stream_stats st;
    assert_int_equal(run(&opt, p, n, 7, &sn, &st), 0);
    assert_int_equal(sn.n, 4);
    assert_int_equal(st.payload_malformed, 9);

    const struct sample_copy *c = find(&sn, "good", 0);
    assert_non_null(c);
    assert_int_equal(c->s.kind, EV_METRIC_HISTOGRAM);
    assert_non_null(c->s.exphist);
    assert_int_equal(c->eh.scale, 1);
    assert_int_equal(c->eh.offset, 1);
    assert_int_equal(c->eh.ncounts, 3);
    assert_true(c->eh_counts[0] == 2 && c->eh_counts[1] == 0 && c->eh_counts[2] == 1);
    assert_int_equal(c->eh.zero_count, 1);
    assert_false(c->eh.cumulative);
    assert_int_equal(c->s.hist_count, 4);
    assert_true(c->s.hist_sum == 6);
    /* quantiles from the buckets: rank 2 of 4 is halfway through (sqrt 2, 2]; 0.95 and 0.99 fall
     * in (2^1.5, 4], kept at the maximum 3 */
    assert_int_equal(c->s.nquantiles, 3);
    assert_true(c->s.quantiles[0].quantile == 0.5);
    assert_true(fabs(c->s.quantiles[0].value - (sqrt(2) + 2) / 2) < 1e-12);
    assert_true(c->s.quantiles[1].quantile == 0.95 && c->s.quantiles[1].value == 3);
    assert_true(c->s.quantiles[2].quantile == 0.99 && c->s.quantiles[2].value == 3);
    assert_true(c->s.value == c->s.quantiles[0].value);
    assert_string_equal(c->tags, "r=/");
    assert_string_equal(c->unit, "ms");

    c = find(&sn, "start", 0);
    assert_non_null(c);
    assert_int_equal(c->eh.offset, 1); /* empty buckets in front trimmed */
    assert_int_equal(c->eh.ncounts, 1);
    assert_true(c->eh_counts[0] == 3);
    assert_true(c->s.quantiles[0].value >= 2.5 && c->s.quantiles[0].value <= 3.5);

    c = find(&sn, "end", 0);
    assert_non_null(c);
    assert_int_equal(c->eh.offset, -3);
    assert_int_equal(c->eh.ncounts, 1);
    assert_true(c->s.quantiles[0].value == 0.25 && c->s.quantiles[2].value == 0.25);

    c = find(&sn, "empty", 0);
    assert_non_null(c);
    assert_int_equal(c->s.nquantiles, 0);
    assert_int_equal(c->s.hist_count, 0);
    assert_true(isnan(c->s.value));
    assert_int_equal(c->eh.ncounts, 0);
    free(sn.samples);
    free(p);
}

/* ---- real captures ------------------------------------------------------------------------ */

/* 2024-01-01 .. 2035-01-01: the captures were made in between. */
#define PLAUSIBLE_MS(t) ((t) > 1704067200000ll && (t) < 2051222400000ll)

static void dump(const struct seen *sn)
{
    if (getenv("EV_DUMP") == NULL) {
        return;
    }
    for (size_t k = 0; k < sn->n; k++) {
        const struct sample_copy *c = &sn->samples[k];
        printf("%s/%s kind=%d unit=%s value=%g tags=%s mt=%s it=%s iv=%g ts=%lld q=%u\n",
               c->provider, c->name, (int)c->s.kind, c->unit, c->s.value, c->tags, c->meter_tags,
               c->instrument_tags, c->s.interval_sec, (long long)c->s.timestamp_ms,
               c->s.nquantiles);
    }
}

/* The fixture gives the same samples whole and one byte at a time. */
static void run_both(const char *fixture, const struct ev_stream_options *opt, struct seen *sn,
                     struct ev_stream_stats *st)
{
    size_t n;
    uint8_t *p = fixture_read("events", fixture, &n);
    assert_int_equal(run(opt, p, n, 0, sn, st), 0);
    struct seen bytewise;
    seen_init(&bytewise);
    struct ev_stream_stats st1;
    assert_int_equal(run(opt, p, n, 1, &bytewise, &st1), 0);
    assert_int_equal(bytewise.n, sn->n);
    assert_int_equal(bytewise.nerr, sn->nerr);
    assert_memory_equal(&st1, st, sizeof(st1));
    for (size_t k = 0; k < sn->n; k++) {
        assert_string_equal(bytewise.samples[k].name, sn->samples[k].name);
        assert_string_equal(bytewise.samples[k].tags, sn->samples[k].tags);
        assert_memory_equal(&bytewise.samples[k].s.value, &sn->samples[k].s.value, sizeof(double));
        assert_int_equal(bytewise.samples[k].s.timestamp_ms, sn->samples[k].s.timestamp_ms);
    }
    free(bytewise.samples);
    free(p);
    assert_int_equal(st->bytes, n);
    assert_int_equal(st->metadata_malformed, 0);
    assert_int_equal(st->payload_malformed, 0);
    dump(sn);
}

static const struct sample_copy *expect(const struct seen *sn, const char *name,
                                        enum ev_metric_kind kind, const char *unit, bool meter)
{
    const struct sample_copy *c = find(sn, name, 0);
    if (c == NULL) {
        fail_msg("no sample named %s", name);
    }
    assert_int_equal(c->s.kind, kind);
    assert_string_equal(c->unit, unit);
    assert_int_equal(c->s.is_meter, meter);
    assert_true(PLAUSIBLE_MS(c->s.timestamp_ms));
    assert_false(isnan(c->s.value));
    return c;
}

static void test_ev_stream_real_runtime(void **state)
{
    (void)state;
    struct seen sn;
    seen_init(&sn);
    struct ev_stream_stats st;
    struct ev_stream_options opt = {
        .session_id = "dec1", .refresh_interval_s = 1, .counter_interval_s = 1};
    run_both("runtime.nettrace", &opt, &sn, &st);

    /* EventCounters (docs/events.md §2.4). */
    const struct sample_copy *c = expect(&sn, "cpu-usage", EV_METRIC_GAUGE, "%", false);
    assert_string_equal(c->provider, "System.Runtime");
    assert_string_equal(c->display_name, "CPU Usage");
    assert_true(c->s.value >= 0 && c->s.value <= 100.0 * 64);
    assert_true(c->s.interval_sec > 0.5 && c->s.interval_sec < 2.0);
    c = expect(&sn, "working-set", EV_METRIC_GAUGE, "MB", false);
    assert_true(c->s.value > 1 && c->s.value < 100000);
    c = expect(&sn, "gc-heap-size", EV_METRIC_GAUGE, "MB", false);
    assert_true(c->s.value > 0 && c->s.value < 100000);
    c = expect(&sn, "alloc-rate", EV_METRIC_RATE, "B", false);
    assert_true(c->s.value >= 0);
    c = expect(&sn, "exception-count", EV_METRIC_RATE, "count", false);
    assert_true(c->s.value >= 0);
    c = expect(&sn, "gen-0-gc-count", EV_METRIC_RATE, "count", false);
    assert_true(count_named(&sn, "cpu-usage") >= 3); /* one per second for about 5 s */

    /* The System.Runtime meter (docs/events.md §3.6). */
    c = expect(&sn, "dotnet.process.memory.working_set", EV_METRIC_UPDOWN, "By", true);
    assert_string_equal(c->provider, "System.Runtime");
    assert_true(c->s.value > 1e6 && c->s.value < 1e12);
    assert_true(c->s.interval_sec == 1);
    bool gens[3] = {false, false, false};
    for (size_t k = 0; k < sn.n; k++) {
        const struct sample_copy *g = &sn.samples[k];
        if (strcmp(g->name, "dotnet.gc.collections") == 0) {
            assert_int_equal(g->s.kind, EV_METRIC_RATE);
            assert_string_equal(g->unit, "{collection}");
            assert_true(g->s.value >= 0);
            for (int gen = 0; gen < 3; gen++) {
                char tag[32];
                int len = snprintf(tag, sizeof(tag), "gc.heap.generation=gen%d", gen);
                assert_true(len > 0);
                gens[gen] = gens[gen] || strcmp(g->tags, tag) == 0;
            }
        }
    }
    assert_true(gens[0] && gens[1] && gens[2]);
    c = expect(&sn, "dotnet.gc.last_collection.heap.size", EV_METRIC_UPDOWN, "By", true);
    assert_non_null(strstr(c->tags, "gc.heap.generation="));
    expect(&sn, "dotnet.process.cpu.time", EV_METRIC_RATE, "s", true);
    expect(&sn, "dotnet.thread_pool.thread.count", EV_METRIC_RATE, "{thread}", true);
    assert_int_equal(sn.nerr, 0);
    free(sn.samples);
}

static void test_ev_stream_real_meter(void **state)
{
    (void)state;
    struct seen sn;
    seen_init(&sn);
    struct ev_stream_stats st;
    struct ev_stream_options opt = {.session_id = "dec2", .refresh_interval_s = 1};
    run_both("demo.nettrace", &opt, &sn, &st);

    const struct sample_copy *c = expect(&sn, "demo.requests", EV_METRIC_RATE, "{request}", true);
    assert_string_equal(c->provider, "Demo.Meter");
    assert_string_equal(c->meter_tags, "team=dec");
    bool a = false;
    bool b = false;
    for (size_t k = 0; k < sn.n; k++) {
        const struct sample_copy *r = &sn.samples[k];
        if (strcmp(r->name, "demo.requests") == 0) {
            a = a || (strcmp(r->tags, "code=200,route=/a") == 0 && r->s.value > 0);
            b = b || (strcmp(r->tags, "code=404,route=/b") == 0 && r->s.value > 0);
        }
    }
    assert_true(a && b);
    c = expect(&sn, "demo.latency", EV_METRIC_HISTOGRAM, "ms", true);
    assert_int_equal(c->s.nquantiles, 3);
    assert_true(c->s.quantiles[0].quantile == 0.5 && c->s.quantiles[2].quantile == 0.99);
    assert_true(c->s.quantiles[0].value <= c->s.quantiles[2].value);
    assert_true(c->s.quantiles[2].value >= 0 && c->s.quantiles[2].value <= 100);
    assert_true(c->s.hist_count > 0 && c->s.hist_sum > 0);
    c = expect(&sn, "demo.queue", EV_METRIC_UPDOWN, "{item}", true);
    assert_true(c->s.value > 0);
    c = expect(&sn, "demo.temperature", EV_METRIC_GAUGE, "Cel", true);
    assert_true(c->s.value >= 20 && c->s.value <= 24);
    expect(&sn, "demo.level", EV_METRIC_GAUGE, "1", true);
    assert_int_equal(sn.nerr, 0);
    free(sn.samples);
}

/* A session started while another one (dec4) ran: nothing for dec3 but the error; dec4 (whose
 * events the capture also holds) gets its samples and no error. */
static void test_ev_stream_real_multi(void **state)
{
    (void)state;
    struct seen sn;
    seen_init(&sn);
    struct ev_stream_stats st;
    struct ev_stream_options opt = {.session_id = "dec3", .refresh_interval_s = 1};
    run_both("multi.nettrace", &opt, &sn, &st);
    assert_int_equal(sn.n, 0);
    assert_true(sn.nerr >= 1);
    assert_string_equal(sn.err_kind[0], "MultipleSessionsNotSupported");
    assert_non_null(strstr(sn.err_msg[0], "dec4"));
    free(sn.samples);

    seen_init(&sn);
    opt.session_id = "dec4";
    run_both("multi.nettrace", &opt, &sn, &st);
    assert_true(sn.n > 0);
    assert_int_equal(sn.nerr, 0);
    free(sn.samples);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_stream_synthetic),    cmocka_unit_test(test_ev_stream_any_session),
        cmocka_unit_test(test_ev_stream_invalid),      cmocka_unit_test(test_ev_stream_exphist),
        cmocka_unit_test(test_ev_stream_real_runtime), cmocka_unit_test(test_ev_stream_real_meter),
        cmocka_unit_test(test_ev_stream_real_multi),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
