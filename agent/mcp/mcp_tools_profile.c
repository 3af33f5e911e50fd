/* SPDX-License-Identifier: MIT */
/*
 * The tools on GET /profile (docs/routes.md "CPU profile in one call" and "Allocations,
 * exceptions, lock contention and GCs"): cpu_profile, allocations, exceptions, contention and
 * gc_stats, one session of the kind each, its answer cut to the top N; and stacks (GET /stacks,
 * "Call stacks"), every thread's stack grouped by identical stacks.
 */
#include "mcp_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "mcp_tools_internal.h"

/* Bounds of the arguments, as the input schemas state them. */
#define SECONDS_MIN 1
#define SECONDS_MAX 60
#define SECONDS_DEF 5
#define TOP_MIN     1
#define TOP_MAX     50
#define TOP_DEF     10
#define PATHS_MAX   10
#define PATHS_DEF   3
#define SITES_MAX   3 /* sites shown per type */

struct kind_args {
    int64_t seconds;
    int64_t top;
    int64_t paths;
};

/* One /profile kind: its name on the route, which arguments it takes, its reduction. */
struct kind {
    const char *kind;
    bool top;
    bool paths;
    enum mcp_step (*reduce)(struct mcp__b *b, const cJSON *p, const struct kind_args *a);
};

/* The arguments (read at every step: c->args lives as long as the call). */
static int kind_args(struct mcp_tool_ctx *c, const struct kind *k, struct mcp__sel *sel,
                     struct kind_args *a)
{
    static const char *const plain[] = {MCP__SEL_NAMES, "seconds", NULL};
    static const char *const with_top[] = {MCP__SEL_NAMES, "seconds", "top", NULL};
    static const char *const with_paths[] = {MCP__SEL_NAMES, "seconds", "top", "paths", NULL};
    *a = (struct kind_args){0};
    if (mcp__args_check(c, k->paths ? with_paths
                           : k->top ? with_top
                                    : plain) != 0 ||
        mcp__sel_read(c, sel) != 0 ||
        mcp__arg_int(c, "seconds", SECONDS_MIN, SECONDS_MAX, SECONDS_DEF, &a->seconds) != 0) {
        return -1;
    }
    if (k->top && mcp__arg_int(c, "top", TOP_MIN, TOP_MAX, TOP_DEF, &a->top) != 0) {
        return -1;
    }
    if (k->paths && mcp__arg_int(c, "paths", 0, PATHS_MAX, PATHS_DEF, &a->paths) != 0) {
        return -1;
    }
    return 0;
}

/* GET /profile?selector&kind=&durationSeconds=[&top=][&paths=], then the kind's reduction. */
static enum mcp_step profile_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans,
                                  const struct kind *k)
{
    struct mcp__sel sel;
    struct kind_args a;
    if (kind_args(c, k, &sel, &a) != 0) {
        return MCP_STEP_ERROR;
    }
    if (ans == NULL) {
        int rc = mcp__fetch_begin(c, "GET", "/profile");
        rc = rc ? rc : mcp__q_sel(&c->fetch.target, &sel);
        rc = rc ? rc : mcp__q(&c->fetch.target, "kind", k->kind);
        rc = rc ? rc : mcp__q_int(&c->fetch.target, "durationSeconds", a.seconds);
        if (k->top) {
            rc = rc ? rc : mcp__q_int(&c->fetch.target, "top", a.top);
        }
        if (a.paths > 0) {
            rc = rc ? rc : mcp__q_int(&c->fetch.target, "paths", a.paths);
        }
        c->fetch.seconds = (uint32_t)a.seconds;
        return rc ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *p = mcp__answer_json(c, ans, cJSON_Object);
    if (p == NULL) {
        return MCP_STEP_ERROR;
    }
    struct mcp__b b = {.c = c};
    enum mcp_step r = k->reduce(&b, p, &a);
    cJSON_Delete(p);
    return r;
}

/* pid and seconds, first in every answer. */
static cJSON *head(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = mcp__obj(b, NULL, NULL);
    mcp__num(b, root, "pid", mcp__jnum(p, "pid", 0));
    mcp__num(b, root, "seconds", mcp__jnum(p, "durationSeconds", (double)a->seconds));
    return root;
}

static const char *str_or(const cJSON *o, const char *key, const char *def)
{
    const char *s = mcp__jstr(o, key);
    return s != NULL ? s : def;
}

/* ---- cpu_profile ---- */

/* topExclusive or topInclusive from the route's rows: {method, samples, percent}. */
static void cpu_rank(struct mcp__b *b, cJSON *root, const char *key, const cJSON *rows,
                     const char *count, const char *pct, const char *title, int64_t top)
{
    cJSON *out = mcp__arr(b, root, key);
    const cJSON *r = NULL;
    bool said = false;
    int64_t kept = 0;
    cJSON_ArrayForEach(r, rows)
    {
        double n = mcp__jnum(r, count, 0);
        if (n <= 0 || kept >= top) {
            continue; /* "top" ranks by exclusive: a method never a leaf is not one of them */
        }
        kept++;
        cJSON *o = mcp__obj(b, out, NULL);
        const char *m = str_or(r, "method", "?!?");
        mcp__str(b, o, "method", m);
        mcp__num(b, o, "samples", n);
        mcp__num(b, o, "percent", mcp__jnum(r, pct, 0));
        if (!said) {
            mcp__say(b, "%s:\n", title);
            said = true;
        }
        mcp__say(b, "  %6.2f%%  %7.0f  %s\n", mcp__jnum(r, pct, 0), n, m);
    }
}

/* hotPaths (H4's /profile paths=N): kept as the route gives them, outermost frame first. */
static void cpu_paths(struct mcp__b *b, cJSON *root, const cJSON *paths, int64_t max)
{
    cJSON *out = mcp__arr(b, root, "hotPaths");
    const cJSON *hp = NULL;
    int64_t i = 0;
    cJSON_ArrayForEach(hp, paths)
    {
        if (i >= max) {
            break;
        }
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(hp, "frames");
        cJSON *o = mcp__obj(b, out, NULL);
        mcp__num(b, o, "samples", mcp__jnum(hp, "samples", 0));
        mcp__num(b, o, "percent", mcp__jnum(hp, "percent", 0));
        cJSON *fo = mcp__arr(b, o, "frames");
        const cJSON *f = NULL;
        cJSON_ArrayForEach(f, (cJSON_IsArray(frames) ? frames : NULL))
        {
            if (cJSON_IsString(f)) {
                mcp__str(b, fo, NULL, f->valuestring);
            }
        }
        mcp__num(b, o, "elidedFrames", mcp__jnum(hp, "elidedFrames", 0));
        mcp__say(b, "%s  #%lld %.2f%% (%.0f samples):", i == 0 ? "Hot paths (leaf last):\n" : "",
                 (long long)i + 1, mcp__jnum(hp, "percent", 0), mcp__jnum(hp, "samples", 0));
        int n = cJSON_GetArraySize(frames);
        int from = n > 4 ? n - 4 : 0; /* the text keeps the innermost four */
        if (from > 0 || mcp__jnum(hp, "elidedFrames", 0) > 0) {
            mcp__say(b, " …");
        }
        for (int k = from; k < n; k++) {
            const cJSON *fk = cJSON_GetArrayItem(frames, k);
            mcp__say(b, "%s %s", k == from ? "" : " →", cJSON_IsString(fk) ? fk->valuestring : "?");
        }
        mcp__say(b, "\n");
        i++;
    }
}

static enum mcp_step cpu_reduce(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = head(b, p, a);
    double samples = mcp__jnum(p, "samples", 0);
    double external = mcp__jnum(p, "externalSamples", 0);
    mcp__num(b, root, "samples", samples);
    mcp__num(b, root, "threads", mcp__jnum(p, "threads", 0));
    mcp__num(b, root, "externalSamples", external);
    mcp__say(b, "CPU profile of pid %.0f over %.0f s: %.0f samples in managed code on %.0f threads",
             mcp__jnum(p, "pid", 0), mcp__jnum(p, "durationSeconds", (double)a->seconds), samples,
             mcp__jnum(p, "threads", 0));
    mcp__say(b, " (%.0f more outside managed code, mostly waiting: not counted).\n", external);
    if (samples <= 0) {
        mcp__say(b, "No thread ran managed code while it was sampled: the app was idle or "
                    "blocked (see the stacks tool).\n");
    }
    cpu_rank(b, root, "topExclusive", cJSON_GetObjectItemCaseSensitive(p, "top"), "exclusive",
             "exclusivePercent", "Top by self time (the method itself was running)", a->top);
    cpu_rank(b, root, "topInclusive", cJSON_GetObjectItemCaseSensitive(p, "topInclusive"),
             "inclusive", "inclusivePercent", "Top by total time (the method was on the stack)",
             a->top);
    cpu_paths(b, root, cJSON_GetObjectItemCaseSensitive(p, "hotPaths"), a->paths);
    return mcp__finish(b, root);
}

static const struct kind kind_cpu = {"cpu", true, true, cpu_reduce};

static enum mcp_step cpu_profile_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return profile_step(c, ans, &kind_cpu);
}

const struct mcp_tool mcp__tool_cpu_profile = {
    .name = "cpu_profile",
    .title = "CPU profile",
    .description =
        "Where the process spends its CPU: samples every managed thread's stack once per "
        "millisecond for `seconds` and answers the methods that ran most by self time "
        "(topExclusive) and by total time (topInclusive), and the most sampled call stacks "
        "(hotPaths). Threads blocked outside managed code are counted apart (externalSamples). "
        "Cost to the app: what `dotnet-trace collect --profile cpu-sampling` costs: the runtime "
        "suspends the threads for a stack walk every millisecond for the whole duration, and "
        "writes a rundown of its jitted methods at the end (tens of ms on a big app). No other "
        "side effect; it counts as one of dotmon's concurrent traces (3 at once).",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60,\"default\":5,"
        "\"description\":\"How long to sample, in seconds: the app runs with the sampler for that "
        "long.\"},\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,"
        "\"description\":\"How many methods to list by self time and by total time.\"},"
        "\"paths\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10,\"default\":3,"
        "\"description\":\"How many of the most sampled distinct call stacks to list (0: none).\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"seconds\":{\"type\":\"integer\"},\"samples\":{\"type\":\"integer\"},"
        "\"threads\":{\"type\":\"integer\"},\"externalSamples\":{\"type\":\"integer\"},"
        "\"topExclusive\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"method\":{\"type\":\"string\"},\"samples\":{\"type\":\"integer\"},"
        "\"percent\":{\"type\":\"number\"}},\"required\":[\"method\",\"samples\",\"percent\"]}},"
        "\"topInclusive\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"method\":{\"type\":\"string\"},\"samples\":{\"type\":\"integer\"},"
        "\"percent\":{\"type\":\"number\"}},\"required\":[\"method\",\"samples\",\"percent\"]}},"
        "\"hotPaths\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"samples\":{\"type\":\"integer\"},\"percent\":{\"type\":\"number\"},"
        "\"frames\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
        "\"elidedFrames\":{\"type\":\"integer\"}},\"required\":[\"samples\",\"percent\",\"frames\","
        "\"elidedFrames\"]}}},\"required\":[\"pid\",\"seconds\",\"samples\",\"threads\","
        "\"topExclusive\",\"topInclusive\",\"hotPaths\"]}",
    .hints = {.read_only = true},
    .step = cpu_profile_step,
};

/* ---- allocations ---- */

/* The sites of a type (at most SITES_MAX), by the key the kind counts with. */
static void sites(struct mcp__b *b, cJSON *o, const cJSON *row, const char *count)
{
    cJSON *out = mcp__arr(b, o, "sites");
    const cJSON *s = NULL;
    int i = 0;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(row, "sites"))
    {
        if (i++ >= SITES_MAX) {
            break;
        }
        cJSON *so = mcp__obj(b, out, NULL);
        const char *m = str_or(s, "method", "?!?");
        double n = mcp__jnum(s, count, 0);
        mcp__str(b, so, "method", m);
        mcp__num(b, so, count, n);
        mcp__num(b, so, "percent", mcp__jnum(s, "percent", 0));
        mcp__say(b, "           %6.2f%% at %s\n", mcp__jnum(s, "percent", 0), m);
    }
}

static enum mcp_step alloc_reduce(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = head(b, p, a);
    double ticks = mcp__jnum(p, "allocationTicks", 0);
    double bytes = mcp__jnum(p, "sampledBytes", 0);
    mcp__num(b, root, "allocationTicks", ticks);
    mcp__num(b, root, "sampledBytes", bytes);
    char h[32];
    mcp__say(b,
             "Allocations of pid %.0f over %.0f s: %s sampled in %.0f ticks (one per ~100 KB "
             "allocated; the ranking by bytes holds, the bytes are an estimate).\n",
             mcp__jnum(p, "pid", 0), mcp__jnum(p, "durationSeconds", (double)a->seconds),
             mcp__human(h, bytes), ticks);
    cJSON *out = mcp__arr(b, root, "types");
    const cJSON *t = NULL;
    int64_t i = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(p, "types"))
    {
        if (i++ >= a->top) {
            break;
        }
        cJSON *o = mcp__obj(b, out, NULL);
        const char *type = str_or(t, "type", "?");
        mcp__str(b, o, "type", type);
        mcp__num(b, o, "bytes", mcp__jnum(t, "bytes", 0));
        mcp__num(b, o, "percent", mcp__jnum(t, "percent", 0));
        mcp__num(b, o, "ticks", mcp__jnum(t, "ticks", 0));
        mcp__say(b, "  %6.2f%%  %10s  %s\n", mcp__jnum(t, "percent", 0),
                 mcp__human(h, mcp__jnum(t, "bytes", 0)), type);
        sites(b, o, t, "bytes");
    }
    return mcp__finish(b, root);
}

static const struct kind kind_alloc = {"alloc", true, false, alloc_reduce};

static enum mcp_step allocations_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return profile_step(c, ans, &kind_alloc);
}

const struct mcp_tool mcp__tool_allocations = {
    .name = "allocations",
    .title = "Allocations by type",
    .description =
        "What the process allocates: for `seconds`, the runtime reports one allocation tick per "
        "~100 KB allocated, and the answer ranks the types by the bytes of their ticks, with the "
        "methods that allocated them (sites). The bytes are a sample (an estimate); the ranking "
        "holds. Cost to the app: a stack walk per tick (on a loop allocating GBs a second, "
        "~100,000 "
        "walks a second), and a rundown of its jitted methods at the end. No other side effect; "
        "one of dotmon's concurrent traces.",
    .input_schema = "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
                    "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60,\"default\":5,"
                    "\"description\":\"How long to watch allocations, in seconds.\"},"
                    "\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,"
                    "\"description\":\"How many allocated types to list, most bytes first.\"}"
                    "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"seconds\":{\"type\":\"integer\"},\"allocationTicks\":{\"type\":\"integer\"},"
        "\"sampledBytes\":{\"type\":\"integer\"},\"types\":{\"type\":\"array\","
        "\"items\":{\"type\":\"object\",\"properties\":{\"type\":{\"type\":\"string\"},"
        "\"bytes\":{\"type\":\"integer\"},\"percent\":{\"type\":\"number\"},"
        "\"ticks\":{\"type\":\"integer\"},\"sites\":{\"type\":\"array\","
        "\"items\":{\"type\":\"object\",\"properties\":{\"method\":{\"type\":\"string\"},"
        "\"bytes\":{\"type\":\"integer\"},\"percent\":{\"type\":\"number\"}},"
        "\"required\":[\"method\",\"bytes\",\"percent\"]}}},\"required\":[\"type\",\"bytes\","
        "\"percent\",\"ticks\",\"sites\"]}}},\"required\":[\"pid\",\"seconds\",\"allocationTicks\","
        "\"sampledBytes\",\"types\"]}",
    .hints = {.read_only = true},
    .step = allocations_step,
};

/* ---- exceptions ---- */

static enum mcp_step exc_reduce(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = head(b, p, a);
    double n = mcp__jnum(p, "exceptions", 0);
    mcp__num(b, root, "exceptions", n);
    mcp__say(b,
             "%.0f exception%s thrown in pid %.0f over %.0f s (first-chance: caught ones too)%s\n",
             n, n == 1 ? "" : "s", mcp__jnum(p, "pid", 0),
             mcp__jnum(p, "durationSeconds", (double)a->seconds), n > 0 ? ":" : ".");
    cJSON *out = mcp__arr(b, root, "types");
    const cJSON *t = NULL;
    int64_t i = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(p, "types"))
    {
        if (i++ >= a->top) {
            break;
        }
        cJSON *o = mcp__obj(b, out, NULL);
        const char *type = str_or(t, "type", "?");
        const char *msg = mcp__jstr(t, "message");
        mcp__str(b, o, "type", type);
        mcp__num(b, o, "count", mcp__jnum(t, "count", 0));
        mcp__num(b, o, "percent", mcp__jnum(t, "percent", 0));
        if (msg != NULL) {
            mcp__strn(b, o, "message", msg, strlen(msg), 1024);
        } else {
            mcp__null(b, o, "message");
        }
        mcp__say(b, "  %7.0f  %6.2f%%  %s%s%.*s%s\n", mcp__jnum(t, "count", 0),
                 mcp__jnum(t, "percent", 0), type, msg ? ": \"" : "", mcp__cut(msg, 200),
                 msg ? msg : "", msg ? "\"" : "");
        sites(b, o, t, "count");
    }
    return mcp__finish(b, root);
}

static const struct kind kind_exceptions = {"exceptions", true, false, exc_reduce};

static enum mcp_step exceptions_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return profile_step(c, ans, &kind_exceptions);
}

const struct mcp_tool mcp__tool_exceptions = {
    .name = "exceptions",
    .title = "Exceptions thrown",
    .description =
        "Which exceptions the process throws: for `seconds`, every first-chance exception (caught "
        "ones too) counted by type, with the first message seen and the methods that threw them. "
        "Cost to the app: a stack walk per throw, and a rundown of its jitted methods at the end. "
        "No other side effect; one of dotmon's concurrent traces.",
    .input_schema = "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
                    "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60,\"default\":5,"
                    "\"description\":\"How long to watch for thrown exceptions, in seconds.\"},"
                    "\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,"
                    "\"description\":\"How many exception types to list, most thrown first.\"}"
                    "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"seconds\":{\"type\":\"integer\"},\"exceptions\":{\"type\":\"integer\"},"
        "\"types\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"type\":{\"type\":\"string\"},\"count\":{\"type\":\"integer\"},"
        "\"percent\":{\"type\":\"number\"},\"message\":{\"type\":[\"string\",\"null\"]},"
        "\"sites\":{\"type\":\"array\",\"items\":{\"type\":\"object\","
        "\"properties\":{\"method\":{\"type\":\"string\"},\"count\":{\"type\":\"integer\"},"
        "\"percent\":{\"type\":\"number\"}},\"required\":[\"method\",\"count\",\"percent\"]}}},"
        "\"required\":[\"type\",\"count\",\"percent\",\"message\",\"sites\"]}}},"
        "\"required\":[\"pid\",\"seconds\",\"exceptions\",\"types\"]}",
    .hints = {.read_only = true},
    .step = exceptions_step,
};

/* ---- contention ---- */

static enum mcp_step cont_reduce(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = head(b, p, a);
    double n = mcp__jnum(p, "contentions", 0);
    double wait = mcp__jnum(p, "waitMilliseconds", 0);
    mcp__num(b, root, "contentions", n);
    mcp__num(b, root, "waitMilliseconds", wait);
    mcp__say(b, "%.0f lock wait%s in pid %.0f over %.0f s, %.3f ms waited in all%s\n", n,
             n == 1 ? "" : "s", mcp__jnum(p, "pid", 0),
             mcp__jnum(p, "durationSeconds", (double)a->seconds), wait, n > 0 ? ":" : ".");
    cJSON *out = mcp__arr(b, root, "methods");
    const cJSON *t = NULL;
    int64_t i = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItemCaseSensitive(p, "methods"))
    {
        if (i++ >= a->top) {
            break;
        }
        cJSON *o = mcp__obj(b, out, NULL);
        const char *m = str_or(t, "method", "?!?");
        mcp__str(b, o, "method", m);
        mcp__num(b, o, "count", mcp__jnum(t, "count", 0));
        mcp__num(b, o, "waitMilliseconds", mcp__jnum(t, "waitMilliseconds", 0));
        mcp__num(b, o, "percent", mcp__jnum(t, "percent", 0));
        mcp__num(b, o, "maxWaitMilliseconds", mcp__jnum(t, "maxWaitMilliseconds", 0));
        mcp__say(b, "  %6.2f%%  %10.3f ms in %.0f waits (longest %.3f ms)  %s\n",
                 mcp__jnum(t, "percent", 0), mcp__jnum(t, "waitMilliseconds", 0),
                 mcp__jnum(t, "count", 0), mcp__jnum(t, "maxWaitMilliseconds", 0), m);
    }
    return mcp__finish(b, root);
}

static const struct kind kind_contention = {"contention", true, false, cont_reduce};

static enum mcp_step contention_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return profile_step(c, ans, &kind_contention);
}

const struct mcp_tool mcp__tool_contention = {
    .name = "contention",
    .title = "Lock contention",
    .description =
        "Where threads wait for locks (Monitor, lock statements): for `seconds`, every contended "
        "acquisition paired with its end, summed by the method that waited: count, total and "
        "longest wait. Cost to the app: a stack walk per contention, and a rundown of its jitted "
        "methods at the end. No other side effect; one of dotmon's concurrent traces.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
        "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60,\"default\":5,"
        "\"description\":\"How long to watch lock waits, in seconds.\"},"
        "\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,"
        "\"description\":\"How many waiting methods to list, longest total wait first.\"}"
        "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"seconds\":{\"type\":\"integer\"},\"contentions\":{\"type\":\"integer\"},"
        "\"waitMilliseconds\":{\"type\":\"number\"},\"methods\":{\"type\":\"array\","
        "\"items\":{\"type\":\"object\",\"properties\":{\"method\":{\"type\":\"string\"},"
        "\"count\":{\"type\":\"integer\"},\"waitMilliseconds\":{\"type\":\"number\"},"
        "\"percent\":{\"type\":\"number\"},\"maxWaitMilliseconds\":{\"type\":\"number\"}},"
        "\"required\":[\"method\",\"count\",\"waitMilliseconds\",\"percent\","
        "\"maxWaitMilliseconds\"]}}},\"required\":[\"pid\",\"seconds\",\"contentions\","
        "\"waitMilliseconds\",\"methods\"]}",
    .hints = {.read_only = true},
    .step = contention_step,
};

/* ---- gc_stats ---- */

static enum mcp_step gc_reduce(struct mcp__b *b, const cJSON *p, const struct kind_args *a)
{
    cJSON *root = head(b, p, a);
    static const char *const copied[] = {"gcs",     "generations", "background",
                                         "reasons", "pauses",      "heap"};
    for (size_t i = 0; i < sizeof(copied) / sizeof(copied[0]); i++) {
        mcp__dup(b, root, copied[i], cJSON_GetObjectItemCaseSensitive(p, copied[i]));
    }
    mcp__num(b, root, "promotedBytes", mcp__jnum(p, "promotedBytes", 0));
    const cJSON *gen = cJSON_GetObjectItemCaseSensitive(p, "generations");
    const cJSON *pauses = cJSON_GetObjectItemCaseSensitive(p, "pauses");
    const cJSON *heap = cJSON_GetObjectItemCaseSensitive(p, "heap");
    mcp__say(b,
             "%.0f GCs in pid %.0f over %.0f s: gen0 %.0f, gen1 %.0f, gen2 %.0f (%.0f background)",
             mcp__jnum(p, "gcs", 0), mcp__jnum(p, "pid", 0),
             mcp__jnum(p, "durationSeconds", (double)a->seconds), mcp__jnum(gen, "gen0", 0),
             mcp__jnum(gen, "gen1", 0), mcp__jnum(gen, "gen2", 0), mcp__jnum(p, "background", 0));
    const cJSON *r = NULL;
    bool first = true;
    cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(p, "reasons"))
    {
        mcp__say(b, "%s%s %.0f", first ? "; reasons: " : ", ", r->string ? r->string : "?",
                 cJSON_IsNumber(r) ? r->valuedouble : 0);
        first = false;
    }
    mcp__say(b, ".\n");
    if (mcp__jnum(pauses, "count", 0) > 0) {
        mcp__say(b, "Pauses: %.0f, %.3f ms in all, p50 %.3f ms, p99 %.3f ms, longest %.3f ms.\n",
                 mcp__jnum(pauses, "count", 0), mcp__jnum(pauses, "totalMilliseconds", 0),
                 mcp__jnum(pauses, "p50Milliseconds", 0), mcp__jnum(pauses, "p99Milliseconds", 0),
                 mcp__jnum(pauses, "maxMilliseconds", 0));
    }
    if (cJSON_IsObject(heap)) {
        char h[6][32];
        mcp__say(b, "Heap after the last GC: %s (gen0 %s, gen1 %s, gen2 %s, LOH %s, POH %s).\n",
                 mcp__human(h[0], mcp__jnum(heap, "totalBytes", 0)),
                 mcp__human(h[1], mcp__jnum(heap, "gen0Bytes", 0)),
                 mcp__human(h[2], mcp__jnum(heap, "gen1Bytes", 0)),
                 mcp__human(h[3], mcp__jnum(heap, "gen2Bytes", 0)),
                 mcp__human(h[4], mcp__jnum(heap, "lohBytes", 0)),
                 mcp__human(h[5], mcp__jnum(heap, "pohBytes", 0)));
    }
    return mcp__finish(b, root);
}

static const struct kind kind_gc = {"gc", false, false, gc_reduce};

static enum mcp_step gc_stats_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    return profile_step(c, ans, &kind_gc);
}

const struct mcp_tool mcp__tool_gc_stats = {
    .name = "gc_stats",
    .title = "Garbage collections",
    .description =
        "How the garbage collector behaves: for `seconds`, the GCs by generation and reason, "
        "background GCs, the pauses (count, total, p50, p99, longest), the heap's size by "
        "generation after the last GC, and the bytes promoted. The cheapest of the profiles: the "
        "runtime's GC events only, no stack walks and no rundown. No side effect; one of dotmon's "
        "concurrent traces.",
    .input_schema = "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
                    "\"seconds\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":60,\"default\":5,"
                    "\"description\":\"How long to watch garbage collections, in seconds.\"}"
                    "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},"
        "\"seconds\":{\"type\":\"integer\"},\"gcs\":{\"type\":\"integer\"},"
        "\"generations\":{\"type\":\"object\",\"properties\":{\"gen0\":{\"type\":\"integer\"},"
        "\"gen1\":{\"type\":\"integer\"},\"gen2\":{\"type\":\"integer\"}},\"required\":[\"gen0\","
        "\"gen1\",\"gen2\"]},\"background\":{\"type\":\"integer\"},"
        "\"reasons\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}},"
        "\"pauses\":{\"type\":\"object\",\"properties\":{\"count\":{\"type\":\"integer\"},"
        "\"totalMilliseconds\":{\"type\":\"number\"},\"p50Milliseconds\":{\"type\":\"number\"},"
        "\"p99Milliseconds\":{\"type\":\"number\"},\"maxMilliseconds\":{\"type\":\"number\"}},"
        "\"required\":[\"count\",\"totalMilliseconds\",\"p50Milliseconds\",\"p99Milliseconds\","
        "\"maxMilliseconds\"]},\"heap\":{\"type\":[\"object\",\"null\"],"
        "\"properties\":{\"gen0Bytes\":{\"type\":\"integer\"},\"gen1Bytes\":{\"type\":\"integer\"},"
        "\"gen2Bytes\":{\"type\":\"integer\"},\"lohBytes\":{\"type\":\"integer\"},"
        "\"pohBytes\":{\"type\":\"integer\"},\"totalBytes\":{\"type\":\"integer\"}}},"
        "\"promotedBytes\":{\"type\":\"integer\"}},\"required\":[\"pid\",\"seconds\",\"gcs\","
        "\"generations\",\"background\",\"reasons\",\"pauses\",\"heap\",\"promotedBytes\"]}",
    .hints = {.read_only = true},
    .step = gc_stats_step,
};

/* ---- stacks ---- */

#define STACK_IDS_MAX   8 /* thread ids listed per group */
#define STACK_NAMES_MAX 4 /* distinct thread names listed per group */

struct group {
    const cJSON *frames; /* the first thread's frames (innermost first) */
    uint64_t hash;
    int first; /* its thread's index: ties keep the route's order */
    int threads;
    double ids[STACK_IDS_MAX];
    int nids;
    const char *names[STACK_NAMES_MAX];
    int nnames;
};

static uint64_t fnv(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        h = (h ^ *p) * 1099511628211ull;
    }
    return (h ^ 0xFF) * 1099511628211ull; /* a separator no string ends with */
}

static const char *const frame_keys[] = {"moduleName", "typeName", "methodName"};

static uint64_t frames_hash(const cJSON *frames)
{
    uint64_t h = 14695981039346656037ull;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, frames)
    {
        for (size_t k = 0; k < 3; k++) {
            h = fnv(h, mcp__jstr(f, frame_keys[k]));
        }
    }
    return h;
}

static bool frames_equal(const cJSON *a, const cJSON *b)
{
    if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b)) {
        return false;
    }
    const cJSON *fb = b != NULL ? b->child : NULL;
    const cJSON *fa = NULL;
    cJSON_ArrayForEach(fa, a)
    {
        if (fb == NULL) {
            return false;
        }
        for (size_t k = 0; k < 3; k++) {
            const char *x = mcp__jstr(fa, frame_keys[k]);
            const char *y = mcp__jstr(fb, frame_keys[k]);
            if (strcmp(x ? x : "", y ? y : "") != 0) {
                return false;
            }
        }
        fb = fb->next;
    }
    return true;
}

static int group_order(const void *pa, const void *pb)
{
    const struct group *a = pa;
    const struct group *b = pb;
    if (a->threads != b->threads) {
        return a->threads > b->threads ? -1 : 1;
    }
    return a->first < b->first ? -1 : a->first > b->first;
}

/* Threads with identical frames (module, type, method of each) are one group. */
static void group_add(struct group *g, int *ng, const cJSON *t, int index)
{
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(t, "frames");
    uint64_t h = frames_hash(frames);
    struct group *to = NULL;
    for (int i = 0; i < *ng && to == NULL; i++) {
        if (g[i].hash == h && frames_equal(g[i].frames, frames)) {
            to = &g[i];
        }
    }
    if (to == NULL) {
        to = &g[(*ng)++];
        *to = (struct group){.frames = frames, .hash = h, .first = index};
    }
    to->threads++;
    if (to->nids < STACK_IDS_MAX) {
        to->ids[to->nids++] = mcp__jnum(t, "threadId", 0);
    }
    const char *name = mcp__jstr(t, "threadName");
    bool known = name == NULL || name[0] == '\0';
    for (int i = 0; i < to->nnames && !known; i++) {
        known = strcmp(to->names[i], name) == 0;
    }
    if (!known && to->nnames < STACK_NAMES_MAX) {
        to->names[to->nnames++] = name;
    }
}

/* A frame as the text format shows it: module!type.method, or [NativeFrame]. */
static void frame_name(struct mcp__b *b, cJSON *out, const cJSON *f, struct buf *tmp)
{
    const char *method = str_or(f, "methodName", "?");
    buf_reset(tmp);
    int rc = strcmp(method, "[NativeFrame]") == 0
                 ? buf_append_str(tmp, method)
                 : buf_printf(tmp, "%s!%s.%s", str_or(f, "moduleName", "?"),
                              str_or(f, "typeName", "?"), method);
    b->oom = b->oom || rc != 0;
    mcp__str(b, out, NULL, buf_cstr(tmp));
    mcp__say(b, "    %s\n", buf_cstr(tmp));
}

static void group_out(struct mcp__b *b, cJSON *groups, const struct group *g, int64_t frames,
                      struct buf *tmp)
{
    cJSON *o = mcp__obj(b, groups, NULL);
    mcp__num(b, o, "threads", g->threads);
    cJSON *ids = mcp__arr(b, o, "threadIds");
    cJSON *names = mcp__arr(b, o, "threadNames");
    mcp__say(b, "\n%d thread%s", g->threads, g->threads == 1 ? "" : "s");
    for (int i = 0; i < g->nids; i++) {
        mcp__num(b, ids, NULL, g->ids[i]);
        mcp__say(b, "%s%.0f", i == 0 ? " (" : ", ", g->ids[i]);
    }
    mcp__say(b, "%s)", g->threads > g->nids ? ", …" : "");
    for (int i = 0; i < g->nnames; i++) {
        mcp__str(b, names, NULL, g->names[i]);
        mcp__say(b, "%s%s", i == 0 ? " named " : ", ", g->names[i]);
    }
    mcp__say(b, ":\n");
    cJSON *fo = mcp__arr(b, o, "frames");
    int n = cJSON_GetArraySize(g->frames);
    int64_t i = 0;
    const cJSON *f = NULL;
    cJSON_ArrayForEach(f, g->frames)
    {
        if (i++ >= frames) {
            break;
        }
        frame_name(b, fo, f, tmp);
    }
    int64_t elided = n > frames ? n - frames : 0;
    mcp__num(b, o, "elidedFrames", (double)elided);
    if (elided > 0) {
        mcp__say(b, "    … %lld outer frame%s\n", (long long)elided, elided == 1 ? "" : "s");
    }
}

static enum mcp_step stacks_reduce(struct mcp_tool_ctx *c, const cJSON *j, int64_t top,
                                   int64_t frames)
{
    const cJSON *threads = cJSON_GetObjectItemCaseSensitive(j, "stacks");
    int nt = cJSON_GetArraySize(threads);
    struct group *g = calloc(nt > 0 ? (size_t)nt : 1, sizeof(*g));
    if (g == NULL) {
        return mcp__oom(c);
    }
    int ng = 0;
    int index = 0;
    const cJSON *t = NULL;
    cJSON_ArrayForEach(t, threads)
    {
        group_add(g, &ng, t, index++);
    }
    qsort(g, (size_t)ng, sizeof(*g), group_order);
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    mcp__num(&b, root, "threads", nt);
    mcp__num(&b, root, "groupCount", ng);
    cJSON *groups = mcp__arr(&b, root, "groups");
    mcp__say(&b, "%d managed thread%s in %d distinct stack%s (innermost frame first)%s", nt,
             nt == 1 ? "" : "s", ng, ng == 1 ? "" : "s",
             ng > top ? "; the most common ones:" : ":");
    struct buf tmp;
    buf_init(&tmp, 0);
    for (int i = 0; i < ng && i < top; i++) {
        group_out(&b, groups, &g[i], frames, &tmp);
    }
    buf_fini(&tmp);
    free(g);
    return mcp__finish(&b, root);
}

#define FRAMES_MAX 64
#define FRAMES_DEF 20

static enum mcp_step stacks_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    static const char *const names[] = {MCP__SEL_NAMES, "top", "frames", NULL};
    struct mcp__sel sel;
    int64_t top;
    int64_t frames;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_int(c, "top", TOP_MIN, TOP_MAX, TOP_DEF, &top) != 0 ||
        mcp__arg_int(c, "frames", 1, FRAMES_MAX, FRAMES_DEF, &frames) != 0) {
        return MCP_STEP_ERROR;
    }
    if (ans == NULL) {
        int rc = mcp__fetch_begin(c, "GET", "/stacks");
        rc = rc ? rc : mcp__q_sel(&c->fetch.target, &sel);
        rc = rc ? rc : mcp__q(&c->fetch.target, "format", "json");
        return rc ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *j = mcp__answer_json(c, ans, cJSON_Object);
    if (j == NULL) {
        return MCP_STEP_ERROR;
    }
    enum mcp_step r = stacks_reduce(c, j, top, frames);
    cJSON_Delete(j);
    return r;
}

const struct mcp_tool mcp__tool_stacks = {
    .name = "stacks",
    .title = "Call stacks now",
    .description =
        "What every managed thread is doing right now: each thread's call stack, threads with "
        "the same stack grouped (most threads first), the innermost frames of each. Use it for a "
        "hang, a deadlock or thread-pool starvation. Cost to the app: the runtime's sampler walks "
        "every thread's stack for about 10 ms, then a rundown of its jitted methods names the "
        "frames. No side effect; one at a time (dotmon's /stacks limit).",
    .input_schema = "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS ","
                    "\"top\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":50,\"default\":10,"
                    "\"description\":\"How many distinct stacks to list, most threads first.\"},"
                    "\"frames\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":64,\"default\":20,"
                    "\"description\":\"How many innermost frames to keep of each stack.\"}"
                    "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"threads\":{\"type\":\"integer\"},"
        "\"groupCount\":{\"type\":\"integer\"},\"groups\":{\"type\":\"array\","
        "\"items\":{\"type\":\"object\",\"properties\":{\"threads\":{\"type\":\"integer\"},"
        "\"threadIds\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"}},"
        "\"threadNames\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
        "\"frames\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
        "\"elidedFrames\":{\"type\":\"integer\"}},\"required\":[\"threads\",\"threadIds\","
        "\"threadNames\",\"frames\",\"elidedFrames\"]}}},\"required\":[\"threads\",\"groupCount\","
        "\"groups\"]}",
    .hints = {.read_only = true},
    .step = stacks_step,
};
