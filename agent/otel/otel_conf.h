/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTEL_CONF_H
#define DOTMON_OTEL_CONF_H
/*
 * The OpenTelemetry exporter's settings (docs/opentelemetry.md): OTel's standard environment
 * variables (OTEL_EXPORTER_OTLP_*, OTEL_{LOGS,METRICS,TRACES}_EXPORTER, OTEL_BSP_*, OTEL_BLRP_*,
 * OTEL_METRIC_EXPORT_*, OTEL_TRACES_SAMPLER[_ARG]) and dotmon's `OpenTelemetry` section, which
 * wins where both give a value. Pure: the environment and the configuration are read through the
 * two callbacks. Everything in struct otel_conf is owned by it (otel_conf_fini).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "otlp.h"

#define OTEL_MAX_HEADERS 16

struct otel_conf_header {
    char *name;
    char *value; /* a secret: never logged, wiped at fini */
};

struct otel_sig_conf {
    bool on;
    bool https;
    char *host; /* without brackets */
    uint16_t port;
    char *target; /* path and query */
    char *url;    /* for messages: scheme://host:port/path (no secrets: headers are apart) */
    enum otlp_format format;
    bool gzip;
    uint64_t timeout_ms; /* one request */
    char *ca;            /* CA bundle or directory (NULL: the system's) */
    struct otel_conf_header headers[OTEL_MAX_HEADERS];
    size_t nheaders;
    uint64_t delay_ms;          /* schedule delay */
    uint64_t export_timeout_ms; /* one export, retries included */
    uint64_t max_queue;         /* items */
    uint64_t max_batch;         /* items per request */
};

struct otel_conf {
    bool any; /* some signal is on */
    struct otel_sig_conf sig[3];
    int log_level;
    bool include_scopes; /* the records' scope pairs as attributes (the session flows activity ids)
                          */
    char *log_filter;
    char *meters;
    char *activity_sources;
    double sampling_ratio;
    uint64_t metric_interval_ms;
    bool exp_histograms; /* histograms as base-2 exponential histograms where the runtime can */
    uint64_t retry_initial_ms;
    uint64_t retry_max_ms;
    uint64_t max_queue_mb; /* all queues together, charged to the memory budget */
};

struct otel_conf_src {
    const char *(*getenv)(const void *ud, const char *name); /* NULL: no environment */
    const void *env_ud;
    const char *(*getcfg)(const void *ud, const char *key); /* NULL: no configuration */
    const void *cfg_ud;
};

/*
 * 0, AGENT_E_INVAL (why names the setting and what is wrong; no secret in it) or -ENOMEM.
 * OTEL_SDK_DISABLED=true leaves the environment out; client certificates (OTEL_EXPORTER_OTLP_
 * [<SIGNAL>_]CLIENT_KEY/_CLIENT_CERTIFICATE) are refused: the egress client has none.
 */
int otel_conf_read(const struct otel_conf_src *src, struct otel_conf *oc, char *why, size_t whylen);
void otel_conf_fini(struct otel_conf *oc);

#endif
