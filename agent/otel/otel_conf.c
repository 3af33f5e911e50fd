/* SPDX-License-Identifier: MIT */
/*
 * The exporter's settings (otel_conf.h): OTel's OTEL_* environment variables as the SDKs read
 * them, and dotmon's `OpenTelemetry` section, which wins where both give a value. Pure: no libuv,
 * no I/O but the environment handed in.
 */
#define _GNU_SOURCE
#include "otel_conf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "buf.h"
#include "err.h"
#include "ev_logs.h"
#include "hex.h"
#include "num.h"
#include "url.h"

static const char *const sig_env[3] = {"LOGS", "METRICS", "TRACES"};
static const char *const sig_key[3] = {"Logs", "Metrics", "Traces"};

static void set_why(char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_why(char *why, size_t whylen, const char *fmt, ...)
{
    if (why == NULL || whylen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(why, whylen, fmt, ap);
    va_end(ap);
}

static const char *nonempty(const char *s)
{
    return s != NULL && s[0] != '\0' ? s : NULL;
}

static const char *env_get(const struct otel_conf_src *src, const char *name)
{
    return src->getenv != NULL ? nonempty(src->getenv(src->env_ud, name)) : NULL;
}

static const char *cfg_get(const struct otel_conf_src *src, const char *key)
{
    return src->getcfg != NULL ? nonempty(src->getcfg(src->cfg_ud, key)) : NULL;
}

/*
 * One setting of one signal, in this order: OpenTelemetry:<Sig>:<key>, OpenTelemetry:<key>,
 * OTEL_EXPORTER_OTLP_<SIG>_<env>, OTEL_EXPORTER_OTLP_<env> (the last two only when env is not
 * NULL). *from names where it came from.
 */
static const char *sig_setting(const struct otel_conf_src *src, int sig, const char *key,
                               const char *env, char *from, size_t fromlen)
{
    char names[4][96]; /* the first two are configuration keys, the other two variables */
    const char *e = env != NULL ? env : "";
    (void)snprintf(names[0], sizeof(names[0]), "OpenTelemetry:%s:%s", sig_key[sig], key);
    (void)snprintf(names[1], sizeof(names[1]), "OpenTelemetry:%s", key);
    (void)snprintf(names[2], sizeof(names[2]), "OTEL_EXPORTER_OTLP_%s_%s", sig_env[sig], e);
    (void)snprintf(names[3], sizeof(names[3]), "OTEL_EXPORTER_OTLP_%s", e);
    for (int i = 0; i < (env != NULL ? 4 : 2); i++) {
        const char *v = i < 2 ? cfg_get(src, names[i]) : env_get(src, names[i]);
        if (v != NULL) {
            if (from != NULL) {
                (void)snprintf(from, fromlen, "%.*s", (int)sizeof(names[i]) - 1, names[i]);
            }
            return v;
        }
    }
    return NULL;
}

/* A whole decimal number in [min, max]; absent leaves *out as it is. */
static int read_u64(const char *v, const char *from, uint64_t min, uint64_t max, uint64_t *out,
                    char *why, size_t whylen)
{
    if (v == NULL) {
        return 0;
    }
    uint64_t x;
    if (num_parse_u64_str(v, 10, max, &x) != 0 || x < min) {
        set_why(why, whylen, "%s: \"%s\" is not a whole number from %llu to %llu", from, v,
                (unsigned long long)min, (unsigned long long)max);
        return AGENT_E_INVAL;
    }
    *out = x;
    return 0;
}

/* s[0..n) trimmed of blanks and percent-decoded, as a new string; NULL on ENOMEM or a bad
 * escape (*bad set). */
static char *url_decode(const char *s, size_t n, bool *bad)
{
    while (n > 0 && (s[0] == ' ' || s[0] == '\t')) {
        s++;
        n--;
    }
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    char *out = malloc(n + 1);
    if (out == NULL) {
        return NULL;
    }
    memcpy(out, s, n);
    if (hex_pct_decode(out, &n, false) != 0) {
        free(out);
        *bad = true;
        return NULL;
    }
    out[n] = '\0';
    return out;
}

/* "k=v,k2=v2" (W3C baggage-like, values URL-encoded) into c->headers. */
static int parse_headers(struct otel_sig_conf *c, const char *v, const char *from, char *why,
                         size_t whylen)
{
    const char *p = v;
    while (*p != '\0') {
        const char *end = strchr(p, ',');
        size_t n = end != NULL ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', n);
        bool blank = true;
        for (size_t i = 0; i < n; i++) {
            blank = blank && (p[i] == ' ' || p[i] == '\t');
        }
        if (!blank) {
            if (eq == NULL || eq == p) {
                set_why(why, whylen, "%s: each header is name=value, separated by commas", from);
                return AGENT_E_INVAL;
            }
            if (c->nheaders == OTEL_MAX_HEADERS) {
                set_why(why, whylen, "%s: more than %d headers", from, OTEL_MAX_HEADERS);
                return AGENT_E_INVAL;
            }
            bool bad = false;
            char *k = url_decode(p, (size_t)(eq - p), &bad);
            char *val = k != NULL ? url_decode(eq + 1, n - (size_t)(eq - p) - 1, &bad) : NULL;
            if (k == NULL || val == NULL) {
                free(k);
                free(val);
                if (bad) {
                    set_why(why, whylen, "%s: a bad %%-escape", from);
                    return AGENT_E_INVAL;
                }
                return -ENOMEM;
            }
            bool ok = k[0] != '\0';
            for (const char *q = k; *q != '\0'; q++) {
                ok = ok && *q > ' ' && *q < 127 && *q != ':';
            }
            for (const char *q = val; *q != '\0'; q++) {
                ok = ok && *q != '\r' && *q != '\n';
            }
            if (!ok) {
                set_why(why, whylen, "%s: header names are tokens, values have no line breaks",
                        from);
                free(k);
                free(val);
                return AGENT_E_INVAL;
            }
            c->headers[c->nheaders].name = k;
            c->headers[c->nheaders].value = val;
            c->nheaders++;
        }
        if (end == NULL) {
            break;
        }
        p = end + 1;
    }
    return 0;
}

/* The request target from the URL's path and query p[0..n): the signal's path after a base. */
static int make_target(struct otel_sig_conf *c, int sig, const char *p, size_t n, bool base)
{
    static const char *const paths[3] = {"/v1/logs", "/v1/metrics", "/v1/traces"};
    struct buf t;
    buf_init(&t, 0);
    int rc = 0;
    if (base) { /* no query on a base: the path, less its trailing slashes, then the signal's */
        n = strcspn(p, "?#");
        while (n > 0 && p[n - 1] == '/') {
            n--;
        }
        rc = buf_append(&t, p, n);
        rc = rc != 0 ? rc : buf_append_str(&t, paths[sig]);
    } else {
        rc = n == 0 || p[0] != '/' ? buf_append_str(&t, "/") : 0;
        rc = rc != 0 ? rc : buf_append(&t, p, n);
    }
    if (rc == 0) {
        c->target = buf_steal(&t, NULL);
        rc = c->target == NULL ? -ENOMEM : 0;
    }
    buf_fini(&t);
    return rc;
}

/* The URL for messages: scheme, host, port and path, never the query (it may hold a key). */
static int make_url(struct otel_sig_conf *c)
{
    bool v6 = strchr(c->host, ':') != NULL;
    struct buf u;
    buf_init(&u, 0);
    int rc = buf_printf(&u, "%s://%s%s%s:%u%.*s", c->https ? "https" : "http", v6 ? "[" : "",
                        c->host, v6 ? "]" : "", c->port, (int)strcspn(c->target, "?"), c->target);
    if (rc == 0) {
        c->url = buf_steal(&u, NULL);
        rc = c->url == NULL ? -ENOMEM : 0;
    }
    buf_fini(&u);
    return rc;
}

/* http[s]://host[:port][/path] into c; base: append /v1/<signal> to the path. */
static int parse_endpoint(struct otel_sig_conf *c, int sig, const char *v, bool base,
                          const char *from, char *why, size_t whylen)
{
    struct url_origin o;
    const char *p = NULL;
    const char *bad = "a fragment right after the host";
    int rc = url_origin_parse(v, &o, &p, &bad);
    if (rc != 0 || *p == '#') {
        char shown[160];
        ascii_url_quotable(v, shown, sizeof(shown));
        set_why(why, whylen, "%s: \"%s…\" is not a valid URL (%s)", from, shown, bad);
        return AGENT_E_INVAL;
    }
    c->https = o.https;
    c->port = o.port;
    c->host = strdup(o.host);
    if (c->host == NULL) {
        return -ENOMEM;
    }
    rc = make_target(c, sig, p, strcspn(p, "#"), base);
    return rc == 0 ? make_url(c) : rc;
}

/* Whether the signal is exported, and where to. */
static int read_switch(struct otel_sig_conf *c, int sig, const struct otel_conf_src *src, char *why,
                       size_t whylen)
{
    char name[96];
    int rc = 0;

    /* On or off: an endpoint turns every signal on (OTEL_EXPORTER_OTLP_ENDPOINT alone is enough),
     * OTEL_<SIG>_EXPORTER=none and OpenTelemetry:<Sig>:Enabled=false turn one off, Enabled=true
     * turns it on at OTLP's default endpoint. */
    char per[96];
    (void)snprintf(per, sizeof(per), "OpenTelemetry:%s:Endpoint", sig_key[sig]);
    const char *ep_sig = cfg_get(src, per);
    const char *ep_base = NULL;
    char ep_from[96];
    (void)snprintf(ep_from, sizeof(ep_from), "%s", per);
    if (ep_sig == NULL) {
        (void)snprintf(ep_from, sizeof(ep_from), "OpenTelemetry:Endpoint");
        ep_base = cfg_get(src, ep_from);
    }
    if (ep_sig == NULL && ep_base == NULL) {
        (void)snprintf(ep_from, sizeof(ep_from), "OTEL_EXPORTER_OTLP_%s_ENDPOINT", sig_env[sig]);
        ep_sig = env_get(src, ep_from);
    }
    if (ep_sig == NULL && ep_base == NULL) {
        (void)snprintf(ep_from, sizeof(ep_from), "OTEL_EXPORTER_OTLP_ENDPOINT");
        ep_base = env_get(src, ep_from);
    }
    (void)snprintf(name, sizeof(name), "OpenTelemetry:%s:Enabled", sig_key[sig]);
    const char *en = cfg_get(src, name);
    int enabled = -1;
    if (en != NULL) {
        if (ascii_ieq(en, "true")) {
            enabled = 1;
        } else if (ascii_ieq(en, "false")) {
            enabled = 0;
        } else {
            set_why(why, whylen, "%s: \"%s\" is not true or false", name, en);
            return AGENT_E_INVAL;
        }
    }
    (void)snprintf(name, sizeof(name), "OTEL_%s_EXPORTER", sig_env[sig]);
    const char *exp = env_get(src, name);
    if (exp != NULL && !ascii_ieq(exp, "otlp") && !ascii_ieq(exp, "none")) {
        set_why(why, whylen, "%s: \"%s\" is not supported (otlp or none)", name, exp);
        return AGENT_E_INVAL;
    }
    if (enabled < 0) {
        enabled = (ep_sig != NULL || ep_base != NULL) && (exp == NULL || ascii_ieq(exp, "otlp"));
    }
    c->on = enabled == 1;
    if (!c->on) {
        return 0;
    }
    if (ep_sig != NULL) {
        rc = parse_endpoint(c, sig, ep_sig, false, ep_from, why, whylen);
    } else if (ep_base != NULL) {
        rc = parse_endpoint(c, sig, ep_base, true, ep_from, why, whylen);
    } else {
        rc = parse_endpoint(c, sig, "http://localhost:4318", true, "default endpoint", why, whylen);
    }
    return rc;
}

/* How: protocol, compression, timeout, CA, headers. */
static int read_transport(struct otel_sig_conf *c, int sig, const struct otel_conf_src *src,
                          char *why, size_t whylen)
{
    char from[96];
    int rc = 0;
    const char *v = sig_setting(src, sig, "Protocol", "PROTOCOL", from, sizeof(from));
    c->format = OTLP_PROTOBUF;
    if (v != NULL) {
        if (ascii_ieq(v, "http/json")) {
            c->format = OTLP_JSON;
        } else if (ascii_ieq(v, "grpc")) {
            set_why(why, whylen, "%s: grpc is not supported, use http/protobuf", from);
            return AGENT_E_INVAL;
        } else if (!ascii_ieq(v, "http/protobuf")) {
            set_why(why, whylen, "%s: \"%s\" is not http/protobuf or http/json", from, v);
            return AGENT_E_INVAL;
        }
    }
    v = sig_setting(src, sig, "Compression", "COMPRESSION", from, sizeof(from));
    c->gzip = false;
    if (v != NULL) {
        if (ascii_ieq(v, "gzip")) {
            c->gzip = true;
        } else if (!ascii_ieq(v, "none")) {
            set_why(why, whylen, "%s: \"%s\" is not gzip or none", from, v);
            return AGENT_E_INVAL;
        }
    }
    c->timeout_ms = 10000;
    v = sig_setting(src, sig, "TimeoutMs", "TIMEOUT", from, sizeof(from));
    if ((rc = read_u64(v, from, 1, 3600000, &c->timeout_ms, why, whylen)) != 0) {
        return rc;
    }
    v = sig_setting(src, sig, "Certificate", "CERTIFICATE", from, sizeof(from));
    if (v != NULL && (c->ca = strdup(v)) == NULL) {
        return -ENOMEM;
    }
    v = sig_setting(src, sig, "Headers", "HEADERS", from, sizeof(from));
    if (v != NULL && (rc = parse_headers(c, v, from, why, whylen)) != 0) {
        return rc;
    }

    return 0;
}

/* Batching: OTEL_BSP_* for spans, OTEL_BLRP_* for logs (their defaults differ: 5 s and 1 s
 * schedule delay), the same names read for metrics' queue with the metric export timeout. */
static int read_batching(struct otel_sig_conf *c, int sig, const struct otel_conf_src *src,
                         char *why, size_t whylen)
{
    char name[96];
    const char *v;
    int rc;
    const char *pre = sig == OTLP_LOGS ? "OTEL_BLRP" : "OTEL_BSP";
    c->delay_ms = sig == OTLP_TRACES ? 5000 : 1000;
    c->export_timeout_ms = 30000;
    c->max_queue = 2048;
    c->max_batch = 512;
    static const struct {
        const char *key;
        const char *env;
        uint64_t min;
        uint64_t max;
        size_t off;
    } nums[] = {
        {"ScheduleDelayMs", "SCHEDULE_DELAY", 0, 3600000, offsetof(struct otel_sig_conf, delay_ms)},
        {"ExportTimeoutMs", "EXPORT_TIMEOUT", 1, 3600000,
         offsetof(struct otel_sig_conf, export_timeout_ms)},
        {"MaxQueueSize", "MAX_QUEUE_SIZE", 1, 1000000, offsetof(struct otel_sig_conf, max_queue)},
        {"MaxExportBatchSize", "MAX_EXPORT_BATCH_SIZE", 1, 100000,
         offsetof(struct otel_sig_conf, max_batch)},
    };
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        uint64_t *dst = (uint64_t *)(void *)((char *)c + nums[i].off);
        (void)snprintf(name, sizeof(name), "OpenTelemetry:%s:%s", sig_key[sig], nums[i].key);
        v = cfg_get(src, name);
        if (v == NULL && sig == OTLP_METRICS && strcmp(nums[i].env, "EXPORT_TIMEOUT") == 0) {
            (void)snprintf(name, sizeof(name), "OTEL_METRIC_EXPORT_TIMEOUT");
            v = env_get(src, name);
        } else if (v == NULL) {
            (void)snprintf(name, sizeof(name), "%s_%s", pre, nums[i].env);
            v = env_get(src, name);
        }
        if ((rc = read_u64(v, name, nums[i].min, nums[i].max, dst, why, whylen)) != 0) {
            return rc;
        }
    }
    if (c->max_batch > c->max_queue) { /* as the SDKs do: a batch is never bigger than the queue */
        c->max_batch = c->max_queue;
    }
    return 0;
}

static int read_signal(struct otel_conf *oc, int sig, const struct otel_conf_src *src, char *why,
                       size_t whylen)
{
    struct otel_sig_conf *c = &oc->sig[sig];
    int rc = read_switch(c, sig, src, why, whylen);
    if (rc != 0 || !c->on) {
        return rc;
    }
    rc = read_transport(c, sig, src, why, whylen);
    return rc != 0 ? rc : read_batching(c, sig, src, why, whylen);
}

/* What the producers read (struct otel_settings). */
static int read_producers(struct otel_conf *oc, const struct otel_conf_src *src, char *why,
                          size_t whylen)
{
    const char *v = cfg_get(src, "OpenTelemetry:LogLevel");
    if (v != NULL) {
        int lv = ev_log_level_parse(v);
        if (lv < 0 || lv >= EV_LOG_NONE) {
            set_why(why, whylen, "OpenTelemetry:LogLevel: \"%s\" is not a log level", v);
            return AGENT_E_INVAL;
        }
        oc->log_level = lv;
    }
    v = cfg_get(src, "OpenTelemetry:IncludeScopes");
    if (v != NULL) {
        if (!ascii_ieq(v, "true") && !ascii_ieq(v, "false")) {
            set_why(why, whylen, "OpenTelemetry:IncludeScopes: \"%s\" is neither true nor false",
                    v);
            return AGENT_E_INVAL;
        }
        oc->include_scopes = ascii_ieq(v, "true");
    }
    static const struct {
        const char *key;
        size_t off;
    } strs[] = {{"OpenTelemetry:LogCategories", offsetof(struct otel_conf, log_filter)},
                {"OpenTelemetry:Meters", offsetof(struct otel_conf, meters)},
                {"OpenTelemetry:ActivitySources", offsetof(struct otel_conf, activity_sources)}};
    for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
        v = cfg_get(src, strs[i].key);
        char **dst = (char **)(void *)((char *)oc + strs[i].off);
        if (v != NULL && (*dst = strdup(v)) == NULL) {
            return -ENOMEM;
        }
    }
    if (oc->activity_sources == NULL && (oc->activity_sources = strdup("*")) == NULL) {
        return -ENOMEM;
    }

    /* Sampling: the section's ratio, else OTEL_TRACES_SAMPLER's ratio samplers' argument. */
    char from[96] = "OpenTelemetry:SamplingRatio";
    v = cfg_get(src, from);
    if (v == NULL) {
        const char *sampler = env_get(src, "OTEL_TRACES_SAMPLER");
        if (sampler != NULL && (ascii_ieq(sampler, "traceidratio") ||
                                ascii_ieq(sampler, "parentbased_traceidratio"))) {
            (void)snprintf(from, sizeof(from), "OTEL_TRACES_SAMPLER_ARG");
            v = env_get(src, from);
        }
    }
    if (v != NULL) {
        char *end = NULL;
        errno = 0;
        double r = strtod(v, &end);
        if (errno != 0 || end == v || *end != '\0' || !(r >= 0.0 && r <= 1.0)) {
            set_why(why, whylen, "%s: \"%s\" is not a ratio from 0 to 1", from, v);
            return AGENT_E_INVAL;
        }
        oc->sampling_ratio = r;
    }

    /* OTel's histogram aggregation: explicit buckets are not something the runtime publishes, so
     * that choice keeps the runtime's quantiles (a Summary, docs/otel.md §4). */
    (void)snprintf(from, sizeof(from), "OpenTelemetry:HistogramAggregation");
    v = cfg_get(src, from);
    if (v == NULL) {
        (void)snprintf(from, sizeof(from),
                       "OTEL_EXPORTER_OTLP_METRICS_DEFAULT_HISTOGRAM_AGGREGATION");
        v = env_get(src, from);
    }
    if (v != NULL) {
        bool expo = ascii_ieq(v, "base2_exponential_bucket_histogram");
        if (!expo && !ascii_ieq(v, "explicit_bucket_histogram")) {
            set_why(why, whylen,
                    "%s: \"%s\" is neither base2_exponential_bucket_histogram nor "
                    "explicit_bucket_histogram",
                    from, v);
            return AGENT_E_INVAL;
        }
        oc->exp_histograms = expo;
    }
    return 0;
}

/* The numbers: the metric interval, retry delays, the queues' memory. */
static int read_numbers(struct otel_conf *oc, const struct otel_conf_src *src, char *why,
                        size_t whylen)
{
    int rc;
    const char *v;
    static const struct {
        const char *key;
        const char *env;
        uint64_t min;
        uint64_t max;
        size_t off;
    } nums[] = {
        {"OpenTelemetry:MetricExportIntervalMs", "OTEL_METRIC_EXPORT_INTERVAL", 100, 86400000,
         offsetof(struct otel_conf, metric_interval_ms)},
        {"OpenTelemetry:RetryInitialBackoffMs", NULL, 1, 3600000,
         offsetof(struct otel_conf, retry_initial_ms)},
        {"OpenTelemetry:RetryMaxBackoffMs", NULL, 1, 3600000,
         offsetof(struct otel_conf, retry_max_ms)},
        {"OpenTelemetry:MaxQueueMB", NULL, 1, 65536, offsetof(struct otel_conf, max_queue_mb)},
    };
    for (size_t i = 0; i < sizeof(nums) / sizeof(nums[0]); i++) {
        const char *name = nums[i].key;
        v = cfg_get(src, name);
        if (v == NULL && nums[i].env != NULL) {
            name = nums[i].env;
            v = env_get(src, name);
        }
        uint64_t *dst = (uint64_t *)(void *)((char *)oc + nums[i].off);
        if ((rc = read_u64(v, name, nums[i].min, nums[i].max, dst, why, whylen)) != 0) {
            return rc;
        }
    }
    if (oc->retry_max_ms < oc->retry_initial_ms) {
        oc->retry_max_ms = oc->retry_initial_ms;
    }
    return 0;
}

/* What dotmon cannot do that an OTel setting asks for: refused, not silently ignored. */
static int refuse_unsupported(const struct otel_conf_src *src, char *why, size_t whylen)
{
    static const char *const mtls[] = {"CLIENT_KEY", "CLIENT_CERTIFICATE"};
    for (int sig = -1; sig < 3; sig++) {
        for (size_t i = 0; i < 2; i++) {
            char name[96];
            (void)snprintf(name, sizeof(name), "OTEL_EXPORTER_OTLP_%s%s%s",
                           sig < 0 ? "" : sig_env[sig], sig < 0 ? "" : "_", mtls[i]);
            if (env_get(src, name) != NULL) {
                set_why(why, whylen, "%s: client certificates (mTLS) are not supported", name);
                return AGENT_E_INVAL;
            }
        }
    }
    return 0;
}

int otel_conf_read(const struct otel_conf_src *src_in, struct otel_conf *oc, char *why,
                   size_t whylen)
{
    /* OTEL_SDK_DISABLED=true: the OTEL_* variables are not read (the section still is). */
    struct otel_conf_src src_own = *src_in;
    const char *off = env_get(src_in, "OTEL_SDK_DISABLED");
    if (off != NULL && ascii_ieq(off, "true")) {
        src_own.getenv = NULL;
    }
    const struct otel_conf_src *src = &src_own;
    memset(oc, 0, sizeof(*oc));
    int rc0 = refuse_unsupported(src, why, whylen);
    if (rc0 != 0) {
        return rc0;
    }
    oc->log_level = EV_LOG_INFORMATION;
    oc->include_scopes = true;
    oc->sampling_ratio = 1.0;
    oc->metric_interval_ms = 60000;
    oc->exp_histograms = true;
    oc->retry_initial_ms = 1000;
    oc->retry_max_ms = 30000;
    oc->max_queue_mb = 16;
    int rc = 0;
    for (int s = 0; s < 3 && rc == 0; s++) {
        rc = read_signal(oc, s, src, why, whylen);
    }
    if (rc != 0) {
        goto fail;
    }
    oc->any = oc->sig[0].on || oc->sig[1].on || oc->sig[2].on;
    rc = read_producers(oc, src, why, whylen);
    rc = rc != 0 ? rc : read_numbers(oc, src, why, whylen);
    if (rc != 0) {
        goto fail;
    }
    return 0;
fail:
    otel_conf_fini(oc);
    return rc;
}

void otel_conf_fini(struct otel_conf *oc)
{
    for (int s = 0; s < 3; s++) {
        struct otel_sig_conf *c = &oc->sig[s];
        free(c->host);
        free(c->target);
        free(c->url);
        free(c->ca);
        for (size_t i = 0; i < c->nheaders; i++) {
            free(c->headers[i].name);
            if (c->headers[i].value != NULL) { /* secrets: not left in freed memory */
                explicit_bzero(c->headers[i].value, strlen(c->headers[i].value));
            }
            free(c->headers[i].value);
        }
    }
    free(oc->log_filter);
    free(oc->meters);
    free(oc->activity_sources);
    memset(oc, 0, sizeof(*oc));
}
