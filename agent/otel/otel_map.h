/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTEL_MAP_H
#define DOTMON_OTEL_MAP_H
/*
 * The pure half of the OpenTelemetry producers (issue 33 items 2, 3, 4; docs/otel.md): what a
 * watched process's environment, cgroup, log records and metric samples become in OTLP terms
 * (otlp/otlp.h). No libuv, no I/O, no globals; agent/otel/otel_proc.c feeds it and hands the
 * results to the exporter.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_logs.h"
#include "ev_metric.h"
#include "otlp.h"

/* ---- resource (item 2) ------------------------------------------------------------------ */

/*
 * The few environment variables the resource is built from; every other variable is dropped as
 * it is seen (ipc_env_var_cb's entries go through otel_env_take and nothing else is kept).
 * Strings are owned (otel_env_fini).
 */
struct otel_env {
    char *service_name;        /* OTEL_SERVICE_NAME */
    char *resource_attributes; /* OTEL_RESOURCE_ATTRIBUTES */
};

/* Keeps name=value when it is one of the variables above. 0 or -ENOMEM. */
int otel_env_take(struct otel_env *e, const char *name, size_t name_len, const char *value,
                  size_t value_len);
void otel_env_fini(struct otel_env *e);

/* What dotmon knows of the process besides its environment (views, borrowed for the call). */
struct otel_proc_info {
    uint64_t pid;
    const char *name;        /* process name (basename of the first command-line token) */
    const char *uid;         /* runtime instance cookie, GUID string */
    const char *clr_version; /* NULL: unknown */
    const char *host_name;   /* dotmon's gethostname; NULL: unknown */
    const char *sdk_version; /* dotmon's version */
    /* Who the process is (discovery's identity, ipc_identity.h); NULL or "": unknown. */
    const char *container_id;
    const char *container_name;
    const char *pod_uid;
    const char *pod_name;
    const char *pod_namespace;
};

#define OTEL_RES_MAX_ATTRS 64

/* An owned resource: attrs point into strings this struct owns (otel_resource_fini). */
struct otel_resource {
    struct otlp_kv attrs[OTEL_RES_MAX_ATTRS];
    size_t nattrs;
    char *owned[OTEL_RES_MAX_ATTRS * 2];
    size_t nowned;
};

/*
 * Builds the resource (docs/otel.md §2): service.name from OTEL_SERVICE_NAME, else the
 * `service.name` of OTEL_RESOURCE_ATTRIBUTES, else "unknown_service:<process name>" as the .NET
 * SDK's default resource says; the other OTEL_RESOURCE_ATTRIBUTES pairs (percent-decoded; a later
 * key wins, and they win over what dotmon detects); service.instance.id, process.*, host.name,
 * os.type, telemetry.sdk.*, and from the identity container.id, k8s.container.name, k8s.pod.uid,
 * k8s.pod.name, k8s.namespace.name. 0 or -ENOMEM.
 */
int otel_resource_build(const struct otel_env *e, const struct otel_proc_info *pi,
                        struct otel_resource *out);
void otel_resource_fini(struct otel_resource *r);
/* r as the exporter's view (valid while r is). */
struct otlp_resource otel_resource_view(const struct otel_resource *r);

/* ---- logs (item 3) ---------------------------------------------------------------------- */

#define OTEL_LOG_MAX_ATTRS 256

/* One mapped record: log and scope point into it and into the record (valid while both are). */
struct otel_log_view {
    struct otlp_log log;
    struct otlp_scope scope;
    struct otlp_kv attrs[OTEL_LOG_MAX_ATTRS];
    size_t dropped; /* attributes over OTEL_LOG_MAX_ATTRS */
};

/* OTLP SeverityNumber of a LogLevel (Trace 1, Debug 5, Information 9, Warning 13, Error 17,
 * Critical 21); 0 for None or out of range. */
int otel_log_severity(int level);

/*
 * r as the .NET SDK's OTLP exporter sends an ILogger record (docs/otel.md §3): body = the message
 * template ({OriginalFormat}), else the formatted message; attributes = the state's pairs but
 * {OriginalFormat}, then every scope's pairs (outermost first, {OriginalFormat} and empty keys
 * left out: the SDK's IncludeScopes shape), logrecord.event.id when not 0, exception.type (the
 * type's name without namespace), exception.message, exception.stacktrace; event_name; the trace
 * context when the record has one; scope name = the category.
 */
void otel_log_map(const struct ev_log_record *r, uint64_t observed_unix_nano,
                  struct otel_log_view *v);

/* ---- metrics (item 4) ------------------------------------------------------------------- */

/*
 * The latest state of every series of one process (provider, name, tags), exported every
 * interval (otel_series_flush) rather than at every runtime event: meter counters with a running
 * total are cumulative monotonic Sums, without one delta Sums of the rates added up since the last
 * export; up-down counters cumulative non-monotonic Sums; gauges and EventCounter means Gauges;
 * EventCounter increments delta Sums; histograms Summaries (the runtime's quantiles, count and sum
 * added up). At most max_series series (more are counted in dropped). Memory is owned; what the
 * series hold (each entry, its strings, its histogram's buckets) is charged to share (NULL: to the
 * memory budget's total only; docs/otel.md §4) and released as it is freed. The table itself
 * (a fixed ~2 KiB) is not charged.
 */
/* Buckets of one exported exponential histogram: the runtime's (and OTel SDK's) default. A
 * histogram's series is charged room for this many counts while a point is added in. */
#define OTEL_EXP_HIST_MAX_BUCKETS 160u

struct mb_share;
struct otel_series_table;
int otel_series_new(size_t max_series, struct mb_share *share, struct otel_series_table **out);
/* Frees t and gives back every byte its series hold to the share. Accepts NULL. */
void otel_series_free(struct otel_series_table *t);
/*
 * Takes one sample. 0; AGENT_E_TOOBIG: a new series over the count bound; AGENT_E_BUDGET: the
 * share refused a new series, or the room a histogram's buckets may grow into (the sample is left
 * out, the series keeps its last state); both counted in dropped; -ENOMEM.
 */
int otel_series_add(struct otel_series_table *t, const struct ev_metric_sample *s);
uint64_t otel_series_dropped(const struct otel_series_table *t);
size_t otel_series_count(const struct otel_series_table *t);
/* Bytes charged to the share for t's series now. */
size_t otel_series_bytes(const struct otel_series_table *t);

/* Called once per series due (views valid during the call). */
typedef void (*otel_metric_cb)(void *ud, const struct otlp_scope *scope,
                               const struct otlp_metric *m);
/* Hands every series with something to say to cb; delta series start again from zero. */
void otel_series_flush(struct otel_series_table *t, otel_metric_cb cb, void *ud);

/*
 * Splits a tag string ("k=v,k2=v2" for meters, "k:v,k2:v2" for EventCounters) into attributes
 * in scratch (cut to scratch_len); returns how many (at most max).
 */
size_t otel_tags_parse(const char *tags, char sep, char *scratch, size_t scratch_len,
                       struct otlp_kv *kv, size_t max);

#endif
