/* SPDX-License-Identifier: MIT */
/*
 * The tools on streaming routes, reduced as their bytes come (the chunk callback) so that nothing
 * but the reduction is kept: recent_logs (POST or GET /logs as NDJSON, the last `max` records),
 * metrics_snapshot (GET or POST /livemetrics, a JSON text sequence, the latest value of each
 * instrument) and trace_summary (GET or POST /trace?format=ndjson, events counted by provider and
 * name with the first payload of each kind). docs/routes.md "Logs", "Live metrics", "Any trace as
 * NDJSON".
 */
#include "mcp_tools.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>
#include <uv.h>

#include "ascii.h"
#include "config.h"
#include "err.h"
#include "mcp_tools_internal.h"
#include "utf8.h"

/* ---- recent_logs ---- */

#define LOGS_SECONDS_MAX 30
#define LOGS_SECONDS_DEF 5
#define LOGS_MAX_MAX     200
#define LOGS_MAX_DEF     50
#define LOGS_LINE_MAX    ((size_t)256 * 1024) /* a longer record is counted, not read */
#define LOGS_MESSAGE_MAX 2048                 /* bytes of a message kept */
#define LOGS_EXC_MAX     4096                 /* bytes of an exception kept */
#define LOGS_TEXT_MAX    20                   /* records the text shows */

static const char *const log_levels[] = {"Trace",   "Debug", "Information",
                                         "Warning", "Error", "Critical"};
static const char *const log_short[] = {"trce", "dbug", "info", "warn", "fail", "crit"};
#define LOGS_LEVEL_DEF 2 /* Information */

struct logs_state {
    struct mcp__lines lines;
    cJSON **ring; /* the last max records, reduced; slot seen % max is the next */
    size_t max;
    uint64_t seen;
    uint64_t unreadable;
    int level;
    const char *category;
    int64_t seconds;
    int failed; /* what stopped the stream on our side (out of memory) */
};

static void logs_fini(struct mcp_tool_ctx *c)
{
    struct logs_state *s = c->state;
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; s->ring != NULL && i < s->max; i++) {
        cJSON_Delete(s->ring[i]);
    }
    free(s->ring);
    mcp__lines_fini(&s->lines);
    free(s);
    c->state = NULL;
}

/* One NDJSON record (docs/api.md §6) reduced to what an agent reads. */
static int logs_line(void *ud, const char *line, size_t n)
{
    struct logs_state *s = ud;
    cJSON *j = cJSON_ParseWithLength(line, n);
    if (mcp__jstr(j, "LogLevel") == NULL) {
        cJSON_Delete(j);
        s->unreadable++; /* not JSON, or not a record */
        return 0;
    }
    struct mcp__b b = {0};
    cJSON *r = mcp__obj(&b, NULL, NULL);
    static const char *const from[] = {"Timestamp", "LogLevel", "Category", "Message"};
    static const char *const to[] = {"timestamp", "level", "category", "message"};
    for (size_t i = 0; i < 4; i++) {
        const char *v = mcp__jstr(j, from[i]);
        v = v != NULL ? v : "";
        mcp__strn(&b, r, to[i], v, strlen(v), i == 3 ? LOGS_MESSAGE_MAX : 256);
    }
    const char *exc = mcp__jstr(j, "Exception");
    if (exc != NULL) {
        mcp__strn(&b, r, "exception", exc, strlen(exc), LOGS_EXC_MAX);
    }
    cJSON_Delete(j);
    if (b.oom) {
        cJSON_Delete(r);
        return UV_ENOMEM; /* stops the request; the step says out of memory */
    }
    size_t slot = (size_t)(s->seen % s->max);
    cJSON_Delete(s->ring[slot]);
    s->ring[slot] = r;
    s->seen++;
    return 0;
}

static int logs_chunk(struct mcp_tool_ctx *c, const void *data, size_t len)
{
    struct logs_state *s = c->state;
    int rc = s->failed != 0 ? s->failed : mcp__lines_feed(&s->lines, data, len, logs_line, s);
    s->failed = rc;
    return rc;
}

/* POST /logs with dotnet-monitor's LogsConfiguration: the app's own filters off, `level` and above,
 * of the categories starting with `category` alone when one is given (a filterSpecs entry),
 * else of every category (no entry: the session asks no FilterSpecs, as GET /logs?level= does). */
static int logs_fetch(struct mcp_tool_ctx *c, struct logs_state *s, const struct mcp__sel *sel)
{
    const char *level = log_levels[s->level];
    int rc = mcp__fetch_begin(c, "POST", "/logs");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, sel);
    rc = rc ? rc : mcp__q_int(&c->fetch.target, "durationSeconds", s->seconds);
    if (rc == 0) {
        cJSON *body = cJSON_CreateObject();
        cJSON *specs = cJSON_AddObjectToObject(body, "filterSpecs");
        bool ok = cJSON_AddStringToObject(body, "logLevel", level) != NULL && specs != NULL &&
                  cJSON_AddFalseToObject(body, "useAppFilters") != NULL;
        ok = ok &&
             (s->category == NULL || cJSON_AddStringToObject(specs, s->category, level) != NULL);
        rc = ok ? mcp__fetch_json_body(c, body) : UV_ENOMEM;
        cJSON_Delete(body);
    }
    c->fetch.seconds = (uint32_t)s->seconds;
    return rc ? rc : mcp__set(c->fetch.accept, sizeof(c->fetch.accept), "application/x-ndjson");
}

static enum mcp_step logs_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, "seconds", "level",
                                        "category",     "max",     NULL};
    struct logs_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    mcp__lines_init(&s->lines, LOGS_LINE_MAX);
    struct mcp__sel sel;
    int64_t max;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_int(c, "seconds", 1, LOGS_SECONDS_MAX, LOGS_SECONDS_DEF, &s->seconds) != 0 ||
        mcp__arg_choice(c, "level", log_levels, 6, LOGS_LEVEL_DEF, &s->level) != 0 ||
        mcp__arg_str(c, "category", 256, false, &s->category) != 0 ||
        mcp__arg_int(c, "max", 1, LOGS_MAX_MAX, LOGS_MAX_DEF, &max) != 0) {
        return MCP_STEP_ERROR;
    }
    s->max = (size_t)max;
    s->ring = calloc(s->max, sizeof(cJSON *));
    if (s->ring == NULL || logs_fetch(c, s, &sel) != 0) {
        return mcp__oom(c);
    }
    return MCP_STEP_FETCH;
}

static const char *short_level(const char *level)
{
    for (size_t i = 0; i < 6; i++) {
        if (strcmp(level, log_levels[i]) == 0) {
            return log_short[i];
        }
    }
    return level;
}

/* A record's line in the text: time, level, category, message, the exception's first line. */
static void logs_say(struct mcp__b *b, const cJSON *r)
{
    const char *msg = mcp__jstr(r, "message");
    const char *exc = mcp__jstr(r, "exception");
    mcp__say(b, "%s %s %s: %.*s\n", mcp__jstr(r, "timestamp"), short_level(mcp__jstr(r, "level")),
             mcp__jstr(r, "category"), mcp__cut(msg, 300), msg);
    if (exc != NULL) {
        const char *nl = strchr(exc, '\n');
        size_t len = nl != NULL ? (size_t)(nl - exc) : strlen(exc);
        mcp__say(b, "      %.*s\n", (int)utf8_cut(exc, len, 300), exc);
    }
}

static enum mcp_step logs_done(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    struct logs_state *s = c->state;
    if (s->failed != 0 || (ans->complete && mcp__lines_end(&s->lines, logs_line, s) != 0)) {
        return mcp__oom(c);
    }
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    cJSON *records = mcp__arr(&b, root, "records");
    size_t kept = s->seen < s->max ? (size_t)s->seen : s->max;
    size_t first = s->seen < s->max ? 0 : (size_t)(s->seen % s->max);
    mcp__say(&b, "%llu log record%s at %s or above%s%s%s in %lld s", (unsigned long long)s->seen,
             s->seen == 1 ? "" : "s", log_levels[s->level], s->category ? " in categories " : "",
             s->category ? s->category : "", s->category ? "*" : "", (long long)s->seconds);
    mcp__say(&b, kept == 0 ? ".\n" : kept < s->seen ? "; the last %zu:\n" : ":\n", kept);
    for (size_t i = 0; i < kept; i++) {
        cJSON *r = s->ring[(first + i) % s->max];
        s->ring[(first + i) % s->max] = NULL;
        if (i + LOGS_TEXT_MAX >= kept) {
            logs_say(&b, r);
        } else if (i == 0) {
            mcp__say(&b, "(%zu older records in structuredContent only)\n", kept - LOGS_TEXT_MAX);
        }
        if (records == NULL || !cJSON_AddItemToArray(records, r)) {
            cJSON_Delete(r);
            b.oom = true;
        }
    }
    mcp__num(&b, root, "seen", (double)s->seen);
    mcp__num(&b, root, "kept", (double)kept);
    uint64_t unreadable = s->unreadable + s->lines.too_long;
    if (unreadable > 0) {
        mcp__num(&b, root, "unreadable", (double)unreadable);
        mcp__say(&b, "(%llu records could not be read: not JSON, or over 256 KiB)\n",
                 (unsigned long long)unreadable);
    }
    if (!ans->complete) {
        mcp__bool(&b, root, "cut", true);
        mcp__say(&b, "(the stream ended early: the process exited or the session was stopped)\n");
    }
    return mcp__finish(&b, root);
}

static enum mcp_step recent_logs_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return ans == NULL ? logs_first(c) : logs_done(c, ans);
}

const struct mcp_tool mcp__tool_recent_logs = {
    .name = "recent_logs",
    .title = "Recent log records",
    .description =
        "What the app logs through ILogger: listens for `seconds` and answers the last `max` "
        "records at `level` or above (optionally only categories starting with `category`): "
        "time, level, category, message and exception. Records logged before the call are not "
        "seen. Needs the app's EventSource logger provider (default hosts have it); otherwise the "
        "tool error says how to add it. Cost to the app: its logging pipeline also writes the "
        "records to an EventPipe session for that time (the app's own log filters are ignored "
        "then). No side effect; one of dotmon's 3 concurrent log streams.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":30,\"default\":5,"
        "\"description\":\"How long to listen, in seconds (records logged meanwhile; none from "
        "before).\"},\"level\":{\"type\":\"string\",\"enum\":[\"Trace\",\"Debug\",\"Information\","
        "\"Warning\",\"Error\",\"Critical\"],\"default\":\"Information\",\"description\":\"The "
        "lowest level kept (the app's own log filters are ignored).\"},"
        "\"category\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":256,"
        "\"description\":\"Only categories starting with this (e.g. MyApp.Orders).\"},"
        "\"max\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":200,\"default\":50,"
        "\"description\":\"How many of the last records to keep.\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"records\":{\"type\":\"array\","
        "\"items\":{\"type\":\"object\",\"properties\":{\"timestamp\":{\"type\":\"string\"},"
        "\"level\":{\"type\":\"string\"},\"category\":{\"type\":\"string\"},"
        "\"message\":{\"type\":\"string\"},\"exception\":{\"type\":\"string\"}},"
        "\"required\":[\"timestamp\",\"level\",\"category\",\"message\"]}},"
        "\"seen\":{\"type\":\"integer\"},\"kept\":{\"type\":\"integer\"},"
        "\"unreadable\":{\"type\":\"integer\"},\"cut\":{\"type\":\"boolean\"}},"
        "\"required\":[\"records\",\"seen\",\"kept\"]}",
    .hints = {.read_only = true},
    .step = recent_logs_step,
    .chunk = logs_chunk,
    .fini = logs_fini,
};

/* ---- metrics_snapshot ---- */

#define METRICS_SECONDS_MAX 30
#define METRICS_SECONDS_DEF 3
#define METRICS_WINDOW_MAX  60 /* the longest window, whatever the interval says */
#define METRICS_SERIES_MAX  512
#define METRICS_LINE_MAX    ((size_t)64 * 1024)
#define METRICS_TEXT_MAX    40 /* series the text shows */

struct series {
    char *provider;
    char *name;
    char *unit;
    char *tags;
    double value;
    double interval; /* seconds a rate counts over */
    int kind;        /* 0 gauge, 1 rate, 2 percentile */
    uint64_t samples;
};

static const char *const kind_names[] = {"gauge", "rate", "percentile"};

struct metrics_state {
    struct mcp__lines lines;
    struct series *series;
    size_t n;
    uint64_t records;
    uint64_t dropped; /* records of series past METRICS_SERIES_MAX */
    uint64_t unreadable;
    const cJSON *instruments;
    double interval; /* GlobalCounter:IntervalSeconds */
    int64_t window;
    int failed;
};

static void metrics_fini(struct mcp_tool_ctx *c)
{
    struct metrics_state *s = c->state;
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        free(s->series[i].provider);
        free(s->series[i].name);
        free(s->series[i].unit);
        free(s->series[i].tags);
    }
    free(s->series);
    mcp__lines_fini(&s->lines);
    free(s);
    c->state = NULL;
}

/* Kept when no instruments were given, or the name starts with one of them (ignoring case). */
static bool wanted(const struct metrics_state *s, const char *name)
{
    if (s->instruments == NULL) {
        return true;
    }
    const cJSON *p = NULL;
    cJSON_ArrayForEach(p, s->instruments)
    {
        size_t n = strlen(p->valuestring);
        if (strlen(name) >= n && ascii_ieq_n(name, n, p->valuestring)) {
            return true;
        }
    }
    return false;
}

/* A meter's rate says its interval in its display name: "name (unit / 5 sec)". */
static double rate_interval(const char *display, double def)
{
    const char *p = display != NULL ? strstr(display, " / ") : NULL;
    if (p == NULL) {
        return def;
    }
    char *end = NULL;
    double v = strtod(p + 3, &end);
    return end != NULL && strncmp(end, " sec)", 5) == 0 && v > 0 ? v : def;
}

static struct series *series_find(struct metrics_state *s, const char *provider, const char *name,
                                  const char *tags)
{
    for (size_t i = 0; i < s->n; i++) {
        struct series *x = &s->series[i];
        if (strcmp(x->name, name) == 0 && strcmp(x->tags, tags) == 0 &&
            strcmp(x->provider, provider) == 0) {
            return x;
        }
    }
    return NULL;
}

/* A copy of an app's name (a provider, instrument, unit or tag list: at most SERIES_NAME_MAX bytes,
 * cut between characters), so that 512 series of 64 KiB lines cannot hold 32 MiB. */
#define SERIES_NAME_MAX 256
static char *dup_str(const char *s)
{
    s = s != NULL ? s : "";
    size_t n = utf8_cut(s, strlen(s), SERIES_NAME_MAX);
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* A new series (copies of its names), or NULL when full (counted) or out of memory (rc). */
static struct series *series_add(struct metrics_state *s, const cJSON *j, int *rc)
{
    if (s->n == METRICS_SERIES_MAX) {
        s->dropped++;
        return NULL;
    }
    struct series *x = &s->series[s->n];
    *x = (struct series){
        .provider = dup_str(mcp__jstr(j, "provider")),
        .name = dup_str(mcp__jstr(j, "name")),
        .unit = dup_str(mcp__jstr(j, "unit")),
        .tags = dup_str(mcp__jstr(j, "tags")),
    };
    if (x->provider == NULL || x->name == NULL || x->unit == NULL || x->tags == NULL) {
        free(x->provider);
        free(x->name);
        free(x->unit);
        free(x->tags);
        *rc = UV_ENOMEM;
        return NULL;
    }
    s->n++;
    return x;
}

/* One /livemetrics record (docs/api.md §7.4): the latest value of its series. */
static int metrics_line(void *ud, const char *line, size_t n)
{
    struct metrics_state *s = ud;
    cJSON *j = cJSON_ParseWithLength(line, n);
    const char *provider = mcp__jstr(j, "provider");
    const char *name = mcp__jstr(j, "name");
    const cJSON *value = cJSON_GetObjectItemCaseSensitive(j, "value");
    int rc = 0;
    if (provider == NULL || name == NULL || !cJSON_IsNumber(value)) {
        s->unreadable++;
    } else if (wanted(s, name)) {
        s->records++;
        const char *tags = mcp__jstr(j, "tags");
        struct series *x = series_find(s, provider, name, tags != NULL ? tags : "");
        x = x != NULL ? x : series_add(s, j, &rc);
        if (x != NULL) {
            const char *type = mcp__jstr(j, "counterType");
            bool rate = type != NULL && strcmp(type, "Rate") == 0;
            bool pct = strncmp(x->tags, "Percentile=", 11) == 0 || strstr(x->tags, ",Percentile=");
            x->kind = rate ? 1 : pct ? 2 : 0;
            x->value = value->valuedouble;
            x->interval = rate_interval(mcp__jstr(j, "displayName"), s->interval);
            x->samples++;
        }
    }
    cJSON_Delete(j);
    return rc;
}

static int metrics_chunk(struct mcp_tool_ctx *c, const void *data, size_t len)
{
    struct metrics_state *s = c->state;
    int rc = s->failed != 0 ? s->failed : mcp__lines_feed(&s->lines, data, len, metrics_line, s);
    s->failed = rc;
    return rc;
}

/* The counters' interval: the runtime reports once per interval, so a window shorter than one
 * (plus a second for the first report to come) would see nothing. */
static double counter_interval(const struct config *cfg)
{
    double v = 5;
    if (cfg != NULL && config_get_float(cfg, "GlobalCounter:IntervalSeconds", 1, 86400, &v) != 0) {
        v = 5;
    }
    return v;
}

static int metrics_fetch(struct mcp_tool_ctx *c, struct metrics_state *s,
                         const struct mcp__sel *sel, const cJSON *meters)
{
    int rc = mcp__fetch_begin(c, meters != NULL ? "POST" : "GET", "/livemetrics");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, sel);
    rc = rc ? rc : mcp__q_int(&c->fetch.target, "durationSeconds", s->window);
    if (rc == 0 && meters != NULL) {
        cJSON *body = cJSON_CreateObject();
        cJSON *list = cJSON_AddArrayToObject(body, "meters");
        bool ok = cJSON_AddTrueToObject(body, "includeDefaultProviders") != NULL && list != NULL;
        const cJSON *m = NULL;
        cJSON_ArrayForEach(m, meters)
        {
            cJSON *o = cJSON_CreateObject();
            ok = ok && o != NULL && cJSON_AddItemToArray(list, o);
            ok = ok && cJSON_AddStringToObject(o, "meterName", m->valuestring) != NULL;
        }
        rc = ok ? mcp__fetch_json_body(c, body) : UV_ENOMEM;
        cJSON_Delete(body);
    }
    c->fetch.seconds = (uint32_t)s->window;
    return rc;
}

static enum mcp_step metrics_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, "seconds", "instruments", "meters", NULL};
    struct metrics_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    mcp__lines_init(&s->lines, METRICS_LINE_MAX);
    struct mcp__sel sel;
    int64_t seconds;
    const cJSON *meters;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_int(c, "seconds", 1, METRICS_SECONDS_MAX, METRICS_SECONDS_DEF, &seconds) != 0 ||
        mcp__arg_str_array(c, "instruments", 32, 256, &s->instruments) != 0 ||
        mcp__arg_str_array(c, "meters", 8, 256, &meters) != 0) {
        return MCP_STEP_ERROR;
    }
    s->interval = counter_interval(c->cfg);
    double least = ceil(s->interval) + 1;
    if (least > METRICS_WINDOW_MAX) {
        return mcp__fail(c,
                         "GlobalCounter:IntervalSeconds is %g s: the counters report too seldom "
                         "for a snapshot (the window would be over %d s); read GET /metrics "
                         "instead",
                         s->interval, METRICS_WINDOW_MAX);
    }
    s->window = (double)seconds >= least ? seconds : (int64_t)least;
    s->series = calloc(METRICS_SERIES_MAX, sizeof(*s->series));
    if (s->series == NULL || metrics_fetch(c, s, &sel, meters) != 0) {
        return mcp__oom(c);
    }
    return MCP_STEP_FETCH;
}

static void metrics_say(struct mcp__b *b, const struct series *x, const char *last_provider)
{
    if (last_provider == NULL || strcmp(last_provider, x->provider) != 0) {
        mcp__say(b, "%s:\n", x->provider);
    }
    /* a rate per second (a count's unit said by "/s" alone); a gauge as it is */
    bool count = x->unit[0] == '\0' || strcmp(x->unit, "count") == 0;
    mcp__say(b, "  %s%s%s%s = %.6g%s%s%s\n", x->name, x->tags[0] ? "{" : "", x->tags,
             x->tags[0] ? "}" : "", x->kind == 1 ? x->value / x->interval : x->value,
             x->kind == 1 && count ? "/s" : (x->unit[0] ? " " : ""),
             x->kind == 1 && count ? "" : x->unit, x->kind == 1 && !count ? "/s" : "");
}

static enum mcp_step metrics_done(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    struct metrics_state *s = c->state;
    if (s->failed != 0 || (ans->complete && mcp__lines_end(&s->lines, metrics_line, s) != 0)) {
        return mcp__oom(c);
    }
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    mcp__num(&b, root, "windowSeconds", (double)s->window);
    cJSON *out = mcp__arr(&b, root, "metrics");
    mcp__say(&b, "%zu series, their latest values over %lld s", s->n, (long long)s->window);
    mcp__say(&b,
             s->n == 0 ? ": none came (no counter matched, or none reported in time).\n" : ":\n");
    const char *last = NULL;
    for (size_t i = 0; i < s->n; i++) {
        const struct series *x = &s->series[i];
        cJSON *o = mcp__obj(&b, out, NULL);
        mcp__str(&b, o, "provider", x->provider);
        mcp__str(&b, o, "name", x->name);
        mcp__str(&b, o, "unit", x->unit);
        mcp__num(&b, o, "value", isfinite(x->value) ? x->value : 0);
        mcp__str(&b, o, "kind", kind_names[x->kind]);
        if (x->tags[0] != '\0') {
            mcp__str(&b, o, "tags", x->tags);
        }
        if (x->kind == 1) {
            mcp__num(&b, o, "perSecond", x->value / x->interval);
            mcp__num(&b, o, "intervalSeconds", x->interval);
        }
        mcp__num(&b, o, "samples", (double)x->samples);
        if (i < METRICS_TEXT_MAX) {
            metrics_say(&b, x, last);
            last = x->provider;
        }
    }
    if (s->n > METRICS_TEXT_MAX) {
        mcp__say(&b, "(%zu more in structuredContent; `instruments` narrows them)\n",
                 s->n - METRICS_TEXT_MAX);
    }
    mcp__num(&b, root, "records", (double)s->records);
    if (s->dropped > 0) {
        mcp__num(&b, root, "dropped", (double)s->dropped);
        mcp__say(&b, "(%llu records of series past the first %d not kept: name instruments)\n",
                 (unsigned long long)s->dropped, METRICS_SERIES_MAX);
    }
    if (!ans->complete) {
        mcp__bool(&b, root, "cut", true);
        mcp__say(&b, "(the stream ended early)\n");
    }
    return mcp__finish(&b, root);
}

static enum mcp_step metrics_snapshot_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return ans == NULL ? metrics_first(c) : metrics_done(c, ans);
}

const struct mcp_tool mcp__tool_metrics_snapshot = {
    .name = "metrics_snapshot",
    .title = "Metrics snapshot",
    .description =
        "The app's current counter values: the runtime's (System.Runtime: CPU usage, GC heap "
        "size, GC counts, thread pool, exceptions, lock contentions...) and, with `meters`, the "
        "app's own System.Diagnostics.Metrics instruments; listens for `seconds` (at least one "
        "counter interval plus a second: 6 s with the default 5 s interval) and answers the "
        "latest value of each instrument and tag set, with the rate per second of counters that "
        "are rates. Cost to the app: its counters are polled once per interval for that time. No "
        "side effect; one of dotmon's 3 concurrent live-metrics streams.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":30,\"default\":3,"
        "\"description\":\"How long to listen, in seconds; at least one counter interval plus a "
        "second is used (GlobalCounter:IntervalSeconds, 5 s by default).\"},"
        "\"instruments\":{\"type\":\"array\",\"maxItems\":32,\"items\":{\"type\":\"string\","
        "\"minLength\":1,\"maxLength\":256},\"description\":\"Keep only the instruments whose name "
        "starts with one of these (cpu-usage, gc-heap-size, dotnet.gc.); all when absent.\"},"
        "\"meters\":{\"type\":\"array\",\"maxItems\":8,\"items\":{\"type\":\"string\","
        "\"minLength\":1,\"maxLength\":256},\"description\":\"System.Diagnostics.Metrics meters of "
        "the app to read besides the runtime's counters (e.g. Microsoft.AspNetCore.Hosting, "
        "MyApp.Orders).\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"windowSeconds\":{\"type\":\"integer\"},"
        "\"metrics\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"provider\":{\"type\":\"string\"},\"name\":{\"type\":\"string\"},"
        "\"unit\":{\"type\":\"string\"},\"value\":{\"type\":\"number\"},"
        "\"kind\":{\"type\":\"string\",\"enum\":[\"gauge\",\"rate\",\"percentile\"]},"
        "\"tags\":{\"type\":\"string\"},\"perSecond\":{\"type\":\"number\"},"
        "\"intervalSeconds\":{\"type\":\"number\"},\"samples\":{\"type\":\"integer\"}},"
        "\"required\":[\"provider\",\"name\",\"unit\",\"value\",\"kind\"]}},"
        "\"records\":{\"type\":\"integer\"},\"dropped\":{\"type\":\"integer\"},"
        "\"cut\":{\"type\":\"boolean\"}},\"required\":[\"windowSeconds\",\"metrics\",\"records\"]}",
    .hints = {.read_only = true},
    .step = metrics_snapshot_step,
    .chunk = metrics_chunk,
    .fini = metrics_fini,
};

/* ---- trace_summary ---- */

#define TRACE_SECONDS_MAX 30
#define TRACE_SECONDS_DEF 3
#define TRACE_TOP_MAX     50
#define TRACE_TOP_DEF     10
#define TRACE_KINDS_MAX   512 /* distinct provider/event pairs counted */
#define TRACE_HASH_SLOTS  1024
#define TRACE_NAME_MAX    256                  /* bytes of a provider or event name kept */
#define TRACE_EXAMPLE_MAX 1024                 /* bytes of an example payload kept */
#define TRACE_LINE_MAX    ((size_t)256 * 1024) /* a longer line is counted as unreadable */

static const char *const trace_profiles[] = {
    "Cpu",
    "Http",
    "Logs",
    "Metrics",
    "GcCollect",
    "dotnet-common",
    "dotnet-sampled-thread-time",
    "gc-verbose",
    "gc-collect",
    "database",
    "cpu-sampling",
};
static const char *const event_levels[] = {"LogAlways", "Critical",      "Error",
                                           "Warning",   "Informational", "Verbose"};

struct ev_kind {
    char *provider;
    char *event;
    uint64_t count;
    char *example; /* the first payload printed (JSON), or cut (then not JSON) */
    bool example_json;
};

struct trace_state {
    struct mcp__lines lines;
    struct ev_kind *kinds;
    size_t n;
    int16_t slots[TRACE_HASH_SLOTS]; /* index + 1 into kinds, 0 empty */
    uint64_t events;
    uint64_t other; /* events of kinds past TRACE_KINDS_MAX */
    uint64_t unreadable;
    int64_t seconds;
    int64_t top;
    int failed;
};

static void trace_fini(struct mcp_tool_ctx *c)
{
    struct trace_state *s = c->state;
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        free(s->kinds[i].provider);
        free(s->kinds[i].event);
        free(s->kinds[i].example);
    }
    free(s->kinds);
    mcp__lines_fini(&s->lines);
    free(s);
    c->state = NULL;
}

/* The index just past the string starting at s[i] (a quote), or n. */
static size_t skip_string(const char *s, size_t i, size_t n)
{
    for (i++; i < n; i++) {
        if (s[i] == '\\') {
            i++;
        } else if (s[i] == '"') {
            return i + 1;
        }
    }
    return n;
}

/* The index just past the JSON value starting at s[i] (no blanks: the lines are compact), or n. */
static size_t skip_value(const char *s, size_t i, size_t n)
{
    int depth = 0;
    while (i < n) {
        char ch = s[i];
        if (ch == '"') {
            i = skip_string(s, i, n);
            if (depth == 0) {
                return i;
            }
            continue;
        }
        if (ch == '{' || ch == '[') {
            depth++;
        } else if (ch == '}' || ch == ']') {
            if (depth <= 1) {
                return depth == 0 ? i : i + 1;
            }
            depth--;
        } else if (ch == ',' && depth == 0) {
            return i;
        }
        i++;
    }
    return n;
}

struct span {
    const char *p;
    size_t n;
};

/*
 * provider and event of one NDJSON line without parsing it all: the converter writes compact
 * lines with the keys in a fixed order, provider and event fourth and fifth (docs/routes.md "Any
 * trace as NDJSON"), so the scan stops early. False when the line is not such an object, or either
 * value has an escape (the caller parses the line then).
 */
static bool scan_event(const char *s, size_t n, struct span *prov, struct span *ev)
{
    bool got_p = false;
    bool got_e = false;
    size_t i = 1;
    if (n == 0 || s[0] != '{') {
        return false;
    }
    while (i < n && s[i] == '"' && !(got_p && got_e)) {
        size_t key = i + 1;
        size_t colon = skip_string(s, i, n);
        if (colon >= n || s[colon] != ':') {
            return false;
        }
        size_t klen = colon - 1 - key;
        size_t v = colon + 1;
        size_t end = skip_value(s, v, n);
        bool is_p = klen == 8 && memcmp(s + key, "provider", 8) == 0;
        bool is_e = klen == 5 && memcmp(s + key, "event", 5) == 0;
        if (is_p || is_e) {
            if (v >= n || s[v] != '"' || end < v + 2 || memchr(s + v, '\\', end - v) != NULL) {
                return false;
            }
            struct span *to = is_p ? prov : ev;
            *to = (struct span){s + v + 1, end - v - 2};
            got_p = got_p || is_p;
            got_e = got_e || is_e;
        }
        if (end >= n || s[end] != ',') {
            break;
        }
        i = end + 1;
    }
    return got_p && got_e;
}

static uint32_t span_hash(struct span a, struct span b)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < a.n; i++) {
        h = (h ^ (unsigned char)a.p[i]) * 16777619u;
    }
    h = (h ^ 0xFFu) * 16777619u;
    for (size_t i = 0; i < b.n; i++) {
        h = (h ^ (unsigned char)b.p[i]) * 16777619u;
    }
    return h;
}

static bool span_is(struct span a, const char *s)
{
    return strlen(s) == a.n && memcmp(s, a.p, a.n) == 0;
}

static char *span_dup(struct span a, size_t max)
{
    size_t n = a.n < max ? a.n : max;
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, a.p, n);
        d[n] = '\0';
    }
    return d;
}

/* The first payload of a kind: its JSON when that fits TRACE_EXAMPLE_MAX, else (and for a
 * payloadHex) the start of its text with an ellipsis. */
static int trace_example(struct ev_kind *k, const cJSON *line)
{
    const cJSON *payload = cJSON_GetObjectItemCaseSensitive(line, "payload");
    if (payload == NULL) {
        payload = cJSON_GetObjectItemCaseSensitive(line, "payloadHex");
    }
    if (payload == NULL) {
        return 0;
    }
    char *text = cJSON_IsString(payload) ? NULL : cJSON_PrintUnformatted(payload);
    const char *from = cJSON_IsString(payload) ? payload->valuestring : text;
    if (from == NULL) {
        return UV_ENOMEM;
    }
    size_t n = strlen(from);
    size_t keep = utf8_cut(from, n, TRACE_EXAMPLE_MAX);
    k->example_json = text != NULL && keep == n;
    k->example = malloc(keep + sizeof("…"));
    if (k->example != NULL) {
        memcpy(k->example, from, keep);
        k->example[keep] = '\0';
        if (keep < n) {
            memcpy(k->example + keep, "…", sizeof("…"));
        }
    }
    free(text);
    return k->example != NULL ? 0 : UV_ENOMEM;
}

/* The kind of provider/event, added (with its example from the parsed line) when new. */
static int trace_count(struct trace_state *s, struct span prov, struct span ev, const char *line,
                       size_t n)
{
    /* Kinds are told apart by their names as kept (cut between characters): a name longer than
     * that still counts as one kind. */
    prov.n = utf8_cut(prov.p, prov.n, TRACE_NAME_MAX);
    ev.n = utf8_cut(ev.p, ev.n, TRACE_NAME_MAX);
    uint32_t h = span_hash(prov, ev);
    size_t slot = h % TRACE_HASH_SLOTS;
    for (size_t probe = 0; probe < TRACE_HASH_SLOTS; probe++) {
        int16_t at = s->slots[(slot + probe) % TRACE_HASH_SLOTS];
        if (at == 0) {
            slot = (slot + probe) % TRACE_HASH_SLOTS;
            break;
        }
        struct ev_kind *k = &s->kinds[at - 1];
        if (span_is(prov, k->provider) && span_is(ev, k->event)) {
            k->count++;
            return 0;
        }
    }
    if (s->n == TRACE_KINDS_MAX) {
        s->other++;
        return 0;
    }
    struct ev_kind *k = &s->kinds[s->n];
    *k = (struct ev_kind){.provider = span_dup(prov, TRACE_NAME_MAX),
                          .event = span_dup(ev, TRACE_NAME_MAX),
                          .count = 1};
    cJSON *j = cJSON_ParseWithLength(line, n);
    int rc = k->provider == NULL || k->event == NULL ? UV_ENOMEM : trace_example(k, j);
    cJSON_Delete(j);
    if (rc != 0) {
        free(k->provider);
        free(k->event);
        free(k->example);
        return rc;
    }
    s->slots[slot] = (int16_t)(++s->n);
    return 0;
}

static int trace_line(void *ud, const char *line, size_t n)
{
    struct trace_state *s = ud;
    struct span prov;
    struct span ev;
    s->events++;
    if (scan_event(line, n, &prov, &ev)) {
        return trace_count(s, prov, ev, line, n);
    }
    /* an escape in a name, or not a line of the converter's: the parser decides */
    cJSON *j = cJSON_ParseWithLength(line, n);
    const char *p = mcp__jstr(j, "provider");
    const char *e = mcp__jstr(j, "event");
    int rc = 0;
    if (p == NULL || e == NULL) {
        s->unreadable++;
    } else {
        rc = trace_count(s, (struct span){p, strlen(p)}, (struct span){e, strlen(e)}, line, n);
    }
    cJSON_Delete(j);
    return rc;
}

static int trace_chunk(struct mcp_tool_ctx *c, const void *data, size_t len)
{
    struct trace_state *s = c->state;
    int rc = s->failed != 0 ? s->failed : mcp__lines_feed(&s->lines, data, len, trace_line, s);
    s->failed = rc;
    return rc;
}

/* "0x8000", "8000": at most 16 hex digits; written to out as "0x…". */
static bool keywords_ok(const char *s, char out[20])
{
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
    }
    size_t n = strlen(s);
    if (n == 0 || n > 16 || strspn(s, "0123456789abcdefABCDEF") != n) {
        return false;
    }
    out[0] = '0';
    out[1] = 'x';
    memcpy(out + 2, s, n + 1);
    return true;
}

/* The level as the route takes it: a number 0..5 or a name (as given); NULL when neither. */
static cJSON *level_item(const cJSON *v)
{
    if (cJSON_IsNumber(v) && v->valuedouble >= 0 && v->valuedouble <= 5 &&
        v->valuedouble == (double)(int)v->valuedouble) {
        return cJSON_CreateNumber(v->valuedouble);
    }
    for (size_t i = 0; cJSON_IsString(v) && i < 6; i++) {
        if (ascii_ieq(v->valuestring, event_levels[i])) {
            return cJSON_CreateString(event_levels[i]);
        }
    }
    return NULL;
}

static bool arguments_ok(const cJSON *v)
{
    const cJSON *a = NULL;
    int n = 0;
    cJSON_ArrayForEach(a, (cJSON_IsObject(v) ? v : NULL))
    {
        if (!cJSON_IsString(a) || a->string == NULL || a->string[0] == '\0' ||
            strlen(a->valuestring) > 4096 || ++n > 32) {
            return false;
        }
    }
    return cJSON_IsObject(v);
}

/* providers[i] checked, and added to the route's Providers (dotnet-monitor's EventPipeProvider). */
static int trace_provider(struct mcp_tool_ctx *c, const cJSON *p, int i, cJSON *list)
{
    static const char *const members[] = {"name", "keywords", "level", "arguments"};
    const cJSON *m = NULL;
    cJSON_ArrayForEach(m, (cJSON_IsObject(p) ? p : NULL))
    {
        bool known = false;
        for (size_t k = 0; k < 4; k++) {
            known = known || (m->string != NULL && strcmp(m->string, members[k]) == 0);
        }
        if (!known) {
            (void)mcp__fail(c,
                            "providers[%d]: unknown member '%.*s' (name, keywords, level, "
                            "arguments)",
                            i, mcp__cut(m->string, 64), m->string ? m->string : "");
            return -1;
        }
    }
    const char *name = mcp__jstr(p, "name");
    const cJSON *kw = cJSON_GetObjectItemCaseSensitive(p, "keywords");
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(p, "level");
    const cJSON *args = cJSON_GetObjectItemCaseSensitive(p, "arguments");
    char kws[20];
    if (!cJSON_IsObject(p) || name == NULL || name[0] == '\0' || strlen(name) > TRACE_NAME_MAX) {
        (void)mcp__fail(c, "providers[%d].name must be a string of 1 to %d bytes", i,
                        TRACE_NAME_MAX);
        return -1;
    }
    if (kw != NULL && (!cJSON_IsString(kw) || !keywords_ok(kw->valuestring, kws))) {
        (void)mcp__fail(c,
                        "providers[%d].keywords must be a hex string such as \"0x8000\" (at "
                        "most 16 digits)",
                        i);
        return -1;
    }
    cJSON *level = lv != NULL ? level_item(lv) : NULL;
    if (lv != NULL && level == NULL) {
        (void)mcp__fail(c,
                        "providers[%d].level must be 0 to 5 or one of LogAlways, Critical, "
                        "Error, Warning, Informational, Verbose",
                        i);
        return -1;
    }
    if (args != NULL && !arguments_ok(args)) {
        cJSON_Delete(level);
        (void)mcp__fail(c, "providers[%d].arguments must be an object of at most 32 strings", i);
        return -1;
    }
    cJSON *o = cJSON_CreateObject();
    bool ok = o != NULL && cJSON_AddItemToArray(list, o);
    ok = ok && cJSON_AddStringToObject(o, "Name", name) != NULL;
    ok = ok && (kw == NULL || cJSON_AddStringToObject(o, "Keywords", kws) != NULL);
    if (level != NULL && !(ok && cJSON_AddItemToObject(o, "EventLevel", level))) {
        cJSON_Delete(level);
        ok = false;
    }
    ok = ok && (args == NULL || cJSON_AddItemToObject(o, "Arguments", cJSON_Duplicate(args, true)));
    if (!ok) {
        (void)mcp__oom(c);
        return -1;
    }
    return 0;
}

/* profile: a comma list of the route's profile names (checked here to name the bad one). */
static int trace_profile_ok(struct mcp_tool_ctx *c, const char *profile)
{
    const char *p = profile;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        const char *w = p;
        size_t wn = n;
        while (wn > 0 && *w == ' ') {
            w++;
            wn--;
        }
        while (wn > 0 && w[wn - 1] == ' ') {
            wn--;
        }
        bool known = false;
        for (size_t i = 0; i < sizeof(trace_profiles) / sizeof(trace_profiles[0]); i++) {
            known =
                known || (strlen(trace_profiles[i]) == wn && ascii_ieq_n(w, wn, trace_profiles[i]));
        }
        if (!known) {
            (void)mcp__fail(c,
                            "profile: '%.*s' is not a trace profile (Cpu, Http, Logs, Metrics, "
                            "GcCollect, dotnet-common, dotnet-sampled-thread-time, gc-verbose, "
                            "gc-collect, database, cpu-sampling)",
                            (int)utf8_cut(w, wn, 64), w);
            return -1;
        }
        p += n + (p[n] == ',');
    }
    return 0;
}

/* POST /trace with the providers (no rundown: its method events would drown the counts), or
 * GET /trace?profile=; both as NDJSON. */
static int trace_fetch(struct mcp_tool_ctx *c, const struct trace_state *s,
                       const struct mcp__sel *sel, const cJSON *providers, const char *profile)
{
    int rc = mcp__fetch_begin(c, providers != NULL ? "POST" : "GET", "/trace");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, sel);
    rc = rc ? rc : mcp__q_int(&c->fetch.target, "durationSeconds", s->seconds);
    rc = rc ? rc : mcp__q(&c->fetch.target, "format", "ndjson");
    if (rc != 0) {
        return UV_ENOMEM;
    }
    c->fetch.seconds = (uint32_t)s->seconds;
    if (providers == NULL) {
        return mcp__q(&c->fetch.target, "profile", profile) ? UV_ENOMEM : 0;
    }
    cJSON *body = cJSON_CreateObject();
    cJSON *list = cJSON_AddArrayToObject(body, "Providers");
    if (list == NULL || cJSON_AddFalseToObject(body, "RequestRundown") == NULL) {
        cJSON_Delete(body);
        return UV_ENOMEM;
    }
    int i = 0;
    const cJSON *p = NULL;
    cJSON_ArrayForEach(p, providers)
    {
        if (trace_provider(c, p, i++, list) != 0) {
            cJSON_Delete(body);
            return AGENT_E_INVAL; /* c->text says why */
        }
    }
    rc = mcp__fetch_json_body(c, body);
    cJSON_Delete(body);
    return rc;
}

static enum mcp_step trace_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, "seconds", "providers",
                                        "profile",      "top",     NULL};
    struct trace_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    mcp__lines_init(&s->lines, TRACE_LINE_MAX);
    struct mcp__sel sel;
    const char *profile;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_int(c, "seconds", 1, TRACE_SECONDS_MAX, TRACE_SECONDS_DEF, &s->seconds) != 0 ||
        mcp__arg_int(c, "top", 1, TRACE_TOP_MAX, TRACE_TOP_DEF, &s->top) != 0 ||
        mcp__arg_str(c, "profile", 256, false, &profile) != 0) {
        return MCP_STEP_ERROR;
    }
    const cJSON *providers = cJSON_GetObjectItemCaseSensitive(c->args, "providers");
    providers = cJSON_IsNull(providers) ? NULL : providers;
    if ((providers == NULL) == (profile == NULL)) {
        return mcp__fail(c, "give either providers or profile (one of them)");
    }
    int np = cJSON_GetArraySize(providers);
    if (providers != NULL && (!cJSON_IsArray(providers) || np < 1 || np > 16)) {
        return mcp__fail(c, "providers must be an array of 1 to 16 providers");
    }
    if (profile != NULL && trace_profile_ok(c, profile) != 0) {
        return MCP_STEP_ERROR;
    }
    s->kinds = calloc(TRACE_KINDS_MAX, sizeof(*s->kinds));
    if (s->kinds == NULL) {
        return mcp__oom(c);
    }
    int rc = trace_fetch(c, s, &sel, providers, profile);
    if (rc == AGENT_E_INVAL) {
        return MCP_STEP_ERROR;
    }
    return rc ? mcp__oom(c) : MCP_STEP_FETCH;
}

static int kind_order(const void *pa, const void *pb)
{
    const struct ev_kind *a = *(const struct ev_kind *const *)pa;
    const struct ev_kind *b = *(const struct ev_kind *const *)pb;
    if (a->count != b->count) {
        return a->count > b->count ? -1 : 1;
    }
    int r = strcmp(a->provider, b->provider);
    return r != 0 ? r : strcmp(a->event, b->event);
}

static void trace_kind_out(struct mcp__b *b, cJSON *out, const struct ev_kind *k)
{
    cJSON *o = mcp__obj(b, out, NULL);
    mcp__str(b, o, "provider", k->provider);
    mcp__str(b, o, "event", k->event);
    mcp__num(b, o, "count", (double)k->count);
    cJSON *ex = k->example != NULL && k->example_json ? cJSON_Parse(k->example) : NULL;
    if (ex != NULL) {
        if (!cJSON_AddItemToObject(o, "examplePayload", ex)) {
            cJSON_Delete(ex);
            b->oom = true;
        }
    } else if (k->example != NULL) {
        mcp__str(b, o, "examplePayload", k->example);
    } else {
        mcp__null(b, o, "examplePayload");
    }
    const char *e = k->example != NULL ? k->example : "";
    size_t en = strlen(e);
    mcp__say(b, "  %9llu  %s/%s%s%.*s%s\n", (unsigned long long)k->count, k->provider, k->event,
             en > 0 ? "  e.g. " : "", (int)utf8_cut(e, en, 160), e, en > 160 ? "…" : "");
}

static enum mcp_step trace_done(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    struct trace_state *s = c->state;
    if (s->failed != 0 || (ans->complete && mcp__lines_end(&s->lines, trace_line, s) != 0)) {
        return mcp__oom(c);
    }
    const struct ev_kind **order = calloc(s->n > 0 ? s->n : 1, sizeof(struct ev_kind *));
    if (order == NULL) {
        return mcp__oom(c);
    }
    for (size_t i = 0; i < s->n; i++) {
        order[i] = &s->kinds[i];
    }
    qsort(order, s->n, sizeof(struct ev_kind *), kind_order);
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    uint64_t unreadable = s->unreadable + s->lines.too_long;
    uint64_t events = s->events + s->lines.too_long;
    mcp__num(&b, root, "seconds", (double)s->seconds);
    mcp__num(&b, root, "events", (double)events);
    mcp__num(&b, root, "kinds", (double)s->n);
    cJSON *out = mcp__arr(&b, root, "byEvent");
    mcp__say(&b, "%llu events of %zu kinds in %lld s%s\n", (unsigned long long)events, s->n,
             (long long)s->seconds,
             s->n == 0                ? "."
             : (int64_t)s->n > s->top ? "; the most frequent:"
                                      : ":");
    for (size_t i = 0; i < s->n && (int64_t)i < s->top; i++) {
        trace_kind_out(&b, out, order[i]);
    }
    free(order);
    if (s->other > 0) {
        mcp__num(&b, root, "otherEvents", (double)s->other);
        mcp__say(&b, "(%llu events of kinds past the first %d not told apart)\n",
                 (unsigned long long)s->other, TRACE_KINDS_MAX);
    }
    if (unreadable > 0) {
        mcp__num(&b, root, "unreadable", (double)unreadable);
        mcp__say(&b, "(%llu lines could not be read)\n", (unsigned long long)unreadable);
    }
    if (!ans->complete) {
        mcp__bool(&b, root, "cut", true);
        mcp__say(&b, "(the trace was cut: the process exited, or the session ended early)\n");
    }
    return mcp__finish(&b, root);
}

static enum mcp_step trace_summary_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return ans == NULL ? trace_first(c) : trace_done(c, ans);
}

const struct mcp_tool mcp__tool_trace_summary = {
    .name = "trace_summary",
    .title = "Trace summary",
    .description =
        "What happens inside the app, by event: traces the chosen EventPipe `providers` (name, "
        "keywords, level, arguments) or a trace `profile` for `seconds`, and answers the events "
        "counted by provider and event name, the most frequent first, with the first payload of "
        "each (the stream itself is not kept). Cost to the app: what the providers' events cost "
        "(a verbose runtime provider on a busy app can be a lot; keep keywords narrow), plus, "
        "with a profile that asks it (Cpu), a rundown of its methods at the end. Some keywords "
        "make the runtime act, not only report: the GC heap-dump keywords (0x1980001, "
        "Microsoft-Windows-DotNETRuntime) induce a blocking GC and walk the heap (use "
        "heap_summary for that). One of dotmon's 3 concurrent traces.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":30,\"default\":3,"
        "\"description\":\"How long to trace, in seconds.\"},\"providers\":{\"type\":\"array\","
        "\"minItems\":1,\"maxItems\":16,\"description\":\"The EventPipe providers to enable "
        "(instead of profile).\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":256,"
        "\"description\":\"The provider (Microsoft-Windows-DotNETRuntime, an EventSource's "
        "name).\"},\"keywords\":{\"type\":\"string\",\"pattern\":\"^(0[xX])?[0-9a-fA-F]{1,16}$\","
        "\"description\":\"The keyword mask in hex, e.g. 0x8000 (default: all).\"},"
        "\"level\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":0,\"maximum\":5},"
        "{\"type\":\"string\",\"enum\":[\"LogAlways\",\"Critical\",\"Error\",\"Warning\","
        "\"Informational\",\"Verbose\"]}],\"description\":\"The EventPipe level: 0 LogAlways .. 5 "
        "Verbose, or its name (default Verbose).\"},\"arguments\":{\"type\":\"object\","
        "\"additionalProperties\":{\"type\":\"string\"},\"description\":\"The provider's filter "
        "arguments (key/value strings).\"}},\"required\":[\"name\"],"
        "\"additionalProperties\":false}},\"profile\":{\"type\":\"string\",\"minLength\":1,"
        "\"maxLength\":256,\"description\":\"Instead of providers, a comma list of dotmon's trace "
        "profiles: Cpu, Http, Logs, Metrics, GcCollect, dotnet-common, dotnet-sampled-thread-time, "
        "gc-verbose, gc-collect, database, cpu-sampling.\"},\"top\":{\"type\":\"integer\","
        "\"minimum\":1,\"maximum\":50,\"default\":10,\"description\":\"How many event kinds to "
        "list, most frequent first.\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"seconds\":{\"type\":\"integer\"},"
        "\"events\":{\"type\":\"integer\"},\"kinds\":{\"type\":\"integer\"},"
        "\"byEvent\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"provider\":{\"type\":\"string\"},\"event\":{\"type\":\"string\"},"
        "\"count\":{\"type\":\"integer\"},\"examplePayload\":{\"type\":[\"object\",\"string\","
        "\"null\"]}},\"required\":[\"provider\",\"event\",\"count\",\"examplePayload\"]}},"
        "\"otherEvents\":{\"type\":\"integer\"},\"unreadable\":{\"type\":\"integer\"},"
        "\"cut\":{\"type\":\"boolean\"}},\"required\":[\"seconds\",\"events\",\"byEvent\"]}",
    .hints = {.read_only = true},
    .step = trace_summary_step,
    .chunk = trace_chunk,
    .fini = trace_fini,
};
