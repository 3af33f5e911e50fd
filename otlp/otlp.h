/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTLP_H
#define DOTMON_OTLP_H
/*
 * OTLP (OpenTelemetry protocol) messages, encoded for OTLP/HTTP: protobuf
 * (application/x-protobuf) and OTLP's JSON mapping (application/json). Pure codec: no libuv, no
 * I/O, no globals. Field numbers and the JSON rules are in docs/otlp.md.
 *
 * Items are encoded one at a time as they are produced (otlp_*_encode: one LogRecord, Span,
 * Metric, Resource or InstrumentationScope message, in the chosen format), so the exporter keeps
 * bytes, not deep copies of the decoders' views; a request is assembled from those pieces
 * (otlp_request_encode), grouped by resource, then scope. Protobuf pieces are the message's
 * bytes without tag or length; JSON pieces are one JSON object each.
 *
 * Every view handed in is borrowed for the call only. Strings are UTF-8 (invalid sequences are
 * replaced, never passed on). Encoders append to out; on error out is truncated back to its size
 * at the call (nothing half-written stays). Errors: -ENOMEM, AGENT_E_TOOBIG (out's cap),
 * AGENT_E_INVAL (a NULL where a value is required, an enum out of its range, a severity over 24,
 * a SUM/HISTOGRAM/EXP_HISTOGRAM without a temporality).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum otlp_format { OTLP_PROTOBUF = 0, OTLP_JSON = 1 };
enum otlp_signal { OTLP_LOGS = 0, OTLP_METRICS = 1, OTLP_TRACES = 2 };

/* An attribute value: AnyValue's string, int, double or bool (arrays/maps are not produced). */
enum otlp_value_kind { OTLP_STR = 0, OTLP_INT = 1, OTLP_DOUBLE = 2, OTLP_BOOL = 3 };
struct otlp_kv {
    const char *key;
    enum otlp_value_kind kind;
    const char *str; /* OTLP_STR */
    int64_t i;       /* OTLP_INT */
    double d;        /* OTLP_DOUBLE */
    bool b;          /* OTLP_BOOL */
};

struct otlp_resource {
    const struct otlp_kv *attrs;
    size_t nattrs;
};

struct otlp_scope {
    const char *name;    /* the logger category, meter name or ActivitySource name */
    const char *version; /* NULL or "" when unknown */
    const struct otlp_kv *attrs;
    size_t nattrs;
};

/* LogRecord. */
struct otlp_log {
    uint64_t time_unix_nano;     /* 0: unknown */
    uint64_t observed_unix_nano; /* when dotmon decoded it */
    int severity_number;         /* SeverityNumber 1..24 (0: unspecified) */
    const char *severity_text;   /* NULL: none */
    const char *body;            /* string body; NULL: none */
    const struct otlp_kv *attrs;
    size_t nattrs;
    bool has_trace; /* trace_id/span_id/flags below are meaningful */
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint32_t flags;         /* W3C trace flags in the low byte */
    const char *event_name; /* LogRecord.event_name; NULL: none */
};

enum otlp_span_kind {
    OTLP_SPAN_UNSPECIFIED = 0,
    OTLP_SPAN_INTERNAL = 1,
    OTLP_SPAN_SERVER = 2,
    OTLP_SPAN_CLIENT = 3,
    OTLP_SPAN_PRODUCER = 4,
    OTLP_SPAN_CONSUMER = 5
};
enum otlp_status_code { OTLP_STATUS_UNSET = 0, OTLP_STATUS_OK = 1, OTLP_STATUS_ERROR = 2 };

/* Span (no events or links: the runtime's Activity events carry none dotmon decodes). */
struct otlp_span {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    bool has_parent;
    uint8_t parent_span_id[8];
    const char *trace_state; /* NULL: none */
    uint32_t flags;          /* W3C trace flags in the low byte */
    const char *name;
    enum otlp_span_kind kind;
    uint64_t start_unix_nano;
    uint64_t end_unix_nano;
    const struct otlp_kv *attrs;
    size_t nattrs;
    enum otlp_status_code status;
    const char *status_message; /* NULL: none */
};

enum otlp_metric_type {
    OTLP_GAUGE = 0,
    OTLP_SUM = 1,
    OTLP_HISTOGRAM = 2,
    OTLP_EXP_HISTOGRAM = 3,
    OTLP_SUMMARY = 4
};
enum otlp_temporality { OTLP_TEMPORALITY_DELTA = 1, OTLP_TEMPORALITY_CUMULATIVE = 2 };

struct otlp_quantile {
    double quantile;
    double value;
};
struct otlp_buckets { /* ExponentialHistogramDataPoint.Buckets */
    int32_t offset;
    const uint64_t *counts;
    size_t ncounts;
};

/* One data point; which fields count depends on the metric's type. */
struct otlp_point {
    const struct otlp_kv *attrs;
    size_t nattrs;
    uint64_t start_unix_nano; /* 0: unknown (gauges) */
    uint64_t time_unix_nano;
    /* GAUGE, SUM: */
    bool is_int;
    int64_t as_int;
    double as_double;
    /* HISTOGRAM, EXP_HISTOGRAM, SUMMARY: */
    uint64_t count;
    bool has_sum;
    double sum;
    /* HISTOGRAM: bucket_counts has nbounds + 1 entries */
    const uint64_t *bucket_counts;
    const double *bounds;
    size_t nbounds;
    /* EXP_HISTOGRAM: */
    int32_t scale;
    uint64_t zero_count;
    struct otlp_buckets positive;
    struct otlp_buckets negative;
    bool has_min_max; /* EXP_HISTOGRAM: min and max of the values (optional fields) */
    double min, max;
    /* SUMMARY: */
    const struct otlp_quantile *quantiles;
    size_t nquantiles;
};

struct otlp_metric {
    const char *name;
    const char *description; /* NULL: none */
    const char *unit;        /* NULL: none */
    enum otlp_metric_type type;
    enum otlp_temporality temporality; /* SUM, HISTOGRAM, EXP_HISTOGRAM */
    bool monotonic;                    /* SUM */
    const struct otlp_point *points;
    size_t npoints;
};

/* One item as a piece (see the top). */
int otlp_resource_encode(const struct otlp_resource *r, enum otlp_format f, struct buf *out);
int otlp_scope_encode(const struct otlp_scope *s, enum otlp_format f, struct buf *out);
int otlp_log_encode(const struct otlp_log *l, enum otlp_format f, struct buf *out);
int otlp_span_encode(const struct otlp_span *s, enum otlp_format f, struct buf *out);
int otlp_metric_encode(const struct otlp_metric *m, enum otlp_format f, struct buf *out);

/* Pre-encoded pieces of one request, in the same format. */
struct otlp_piece {
    const uint8_t *p;
    size_t n;
};
struct otlp_scope_group {
    struct otlp_piece scope;
    const struct otlp_piece *items; /* LogRecords, Spans or Metrics */
    size_t nitems;
};
struct otlp_resource_group {
    struct otlp_piece resource;
    const char *schema_url; /* NULL: none */
    const struct otlp_scope_group *scopes;
    size_t nscopes;
};

/*
 * ExportLogsServiceRequest / ExportMetricsServiceRequest / ExportTraceServiceRequest of the groups
 * (resource_logs → scope_logs → log_records, and the metrics and traces equivalents).
 */
int otlp_request_encode(enum otlp_signal sig, enum otlp_format f,
                        const struct otlp_resource_group *groups, size_t ngroups, struct buf *out);

/*
 * An Export*ServiceResponse body: its partial_success (rejected log records, data points or
 * spans, and the error message, cut at a character boundary to msglen - 1 bytes, invalid UTF-8
 * replaced and control characters made spaces: it is meant for a log line). An empty body is a
 * full success. rejected and msg may be NULL. 0 or AGENT_E_PROTO (not a response of that signal
 * in that format, or over 1 MiB; then *rejected is 0 and msg empty).
 */
int otlp_response_decode(enum otlp_signal sig, enum otlp_format f, const uint8_t *p, size_t n,
                         int64_t *rejected, char *msg, size_t msglen);

/* "logs", "metrics", "traces"; the URL path OTLP/HTTP uses: "/v1/logs" … */
const char *otlp_signal_name(enum otlp_signal sig);
const char *otlp_signal_path(enum otlp_signal sig);

#endif
