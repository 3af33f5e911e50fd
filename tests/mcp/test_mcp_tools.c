/* SPDX-License-Identifier: MIT */
/*
 * The MCP tools (agent/mcp/mcp_tools.h) driven step by step as mcp.c drives them, with answers
 * captured from the real routes (tests/mcp/fixtures/README.md): argument errors, the exact
 * requests made, the reductions, the memo's growth diff and its bounds, the chunk parsers with
 * lines split across chunks; every schema parses, and every structuredContent validates against
 * its tool's output schema (a small JSON Schema checker below: type, properties, required,
 * additionalProperties, items, enum, bounds, anyOf).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "config.h"
#include "mcp_tools.h"
#include "mcp_tools_internal.h"
#include "membudget.h"
#include "utf8.h"

#ifndef MCP_FIXTURES
#error "MCP_FIXTURES: the fixtures folder"
#endif

/* ---- fixtures ---- */

static char *fixture(const char *name, size_t *len)
{
    char path[512];
    int w = snprintf(path, sizeof(path), "%s/%s", MCP_FIXTURES, name);
    assert_true(w > 0 && (size_t)w < sizeof(path));
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fail_msg("fixture %s not found", path);
    }
    assert_int_equal(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    assert_true(n >= 0);
    assert_int_equal(fseek(f, 0, SEEK_SET), 0);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    assert_int_equal(fread(p, 1, (size_t)n, f), (size_t)n);
    p[n] = '\0';
    (void)fclose(f);
    if (len != NULL) {
        *len = (size_t)n;
    }
    return p;
}

/* ---- a small JSON Schema checker (the keywords the tools' schemas use) ---- */

static bool is_type(const cJSON *v, const char *t)
{
    if (strcmp(t, "object") == 0) {
        return cJSON_IsObject(v);
    }
    if (strcmp(t, "array") == 0) {
        return cJSON_IsArray(v);
    }
    if (strcmp(t, "string") == 0) {
        return cJSON_IsString(v);
    }
    if (strcmp(t, "boolean") == 0) {
        return cJSON_IsBool(v);
    }
    if (strcmp(t, "null") == 0) {
        return cJSON_IsNull(v);
    }
    if (strcmp(t, "number") == 0) {
        return cJSON_IsNumber(v);
    }
    if (strcmp(t, "integer") == 0) {
        return cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble);
    }
    fail_msg("unknown type %s in a schema", t);
    return false;
}

static const char *const schema_keywords[] = {
    "type",     "properties", "required",    "additionalProperties",
    "items",    "enum",       "minimum",     "maximum",
    "minItems", "maxItems",   "minLength",   "maxLength",
    "anyOf",    "default",    "description", "pattern",
    "$schema",  "title",
};

/* Every keyword of s is one this checker knows (a schema it would silently pass is a bug). */
static void schema_known(const cJSON *s, const char *path)
{
    assert_true(cJSON_IsObject(s));
    const cJSON *k = NULL;
    cJSON_ArrayForEach(k, s)
    {
        bool known = false;
        for (size_t i = 0; i < sizeof(schema_keywords) / sizeof(schema_keywords[0]); i++) {
            known = known || strcmp(k->string, schema_keywords[i]) == 0;
        }
        if (!known) {
            fail_msg("%s: schema keyword %s unknown to the checker", path, k->string);
        }
    }
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *p = NULL;
    cJSON_ArrayForEach(p, props)
    {
        schema_known(p, p->string);
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    if (items != NULL) {
        schema_known(items, path);
    }
    const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    if (cJSON_IsObject(ap)) {
        schema_known(ap, path);
    }
    const cJSON *any = NULL;
    cJSON_ArrayForEach(any, cJSON_GetObjectItemCaseSensitive(s, "anyOf"))
    {
        schema_known(any, path);
    }
}

/* NULL when v is valid, else a message naming where (static: one check at a time). */
static const char *check(const cJSON *s, const cJSON *v, const char *path)
{
    static char why[512];
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (type != NULL) {
        bool ok = false;
        if (cJSON_IsString(type)) {
            ok = is_type(v, type->valuestring);
        }
        const cJSON *t = NULL;
        cJSON_ArrayForEach(t, (cJSON_IsArray(type) ? type : NULL))
        {
            ok = ok || is_type(v, t->valuestring);
        }
        if (!ok) {
            (void)snprintf(why, sizeof(why), "%s: wrong type", path);
            return why;
        }
    }
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf");
    if (any != NULL) {
        bool ok = false;
        const cJSON *a = NULL;
        cJSON_ArrayForEach(a, any)
        {
            ok = ok || check(a, v, path) == NULL;
        }
        if (!ok) {
            (void)snprintf(why, sizeof(why), "%s: matches none of anyOf", path);
            return why;
        }
    }
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum");
    if (en != NULL) {
        bool ok = false;
        const cJSON *e = NULL;
        cJSON_ArrayForEach(e, en)
        {
            ok = ok || cJSON_Compare(e, v, true);
        }
        if (!ok) {
            (void)snprintf(why, sizeof(why), "%s: not in enum", path);
            return why;
        }
    }
    if (cJSON_IsNumber(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minimum");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maximum");
        if ((mn != NULL && v->valuedouble < mn->valuedouble) ||
            (mx != NULL && v->valuedouble > mx->valuedouble)) {
            (void)snprintf(why, sizeof(why), "%s: out of bounds", path);
            return why;
        }
    }
    if (cJSON_IsString(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minLength");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxLength");
        double n = (double)strlen(v->valuestring); /* bytes: the strings here are ASCII */
        if ((mn != NULL && n < mn->valuedouble) || (mx != NULL && n > mx->valuedouble)) {
            (void)snprintf(why, sizeof(why), "%s: length out of bounds", path);
            return why;
        }
    }
    if (cJSON_IsArray(v)) {
        const cJSON *mn = cJSON_GetObjectItemCaseSensitive(s, "minItems");
        const cJSON *mx = cJSON_GetObjectItemCaseSensitive(s, "maxItems");
        double n = cJSON_GetArraySize(v);
        if ((mn != NULL && n < mn->valuedouble) || (mx != NULL && n > mx->valuedouble)) {
            (void)snprintf(why, sizeof(why), "%s: item count out of bounds", path);
            return why;
        }
        const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
        const cJSON *e = NULL;
        int i = 0;
        cJSON_ArrayForEach(e, (items != NULL ? v : NULL))
        {
            char sub[256];
            (void)snprintf(sub, sizeof(sub), "%s[%d]", path, i++);
            const char *r = check(items, e, sub);
            if (r != NULL) {
                return r;
            }
        }
    }
    if (cJSON_IsObject(v)) {
        const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
        const cJSON *req = NULL;
        cJSON_ArrayForEach(req, cJSON_GetObjectItemCaseSensitive(s, "required"))
        {
            if (cJSON_GetObjectItemCaseSensitive(v, req->valuestring) == NULL) {
                (void)snprintf(why, sizeof(why), "%s: %s missing", path, req->valuestring);
                return why;
            }
        }
        const cJSON *ap = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
        const cJSON *m = NULL;
        cJSON_ArrayForEach(m, v)
        {
            char sub[256];
            (void)snprintf(sub, sizeof(sub), "%s.%s", path, m->string);
            const cJSON *ps = cJSON_GetObjectItemCaseSensitive(props, m->string);
            if (ps == NULL && cJSON_IsFalse(ap)) {
                (void)snprintf(why, sizeof(why), "%s: not allowed", sub);
                return why;
            }
            ps = ps != NULL ? ps : cJSON_IsObject(ap) ? ap : NULL;
            const char *r = ps != NULL ? check(ps, m, sub) : NULL;
            if (r != NULL) {
                return r;
            }
        }
    }
    return NULL;
}

/* ---- running a tool as mcp.c does ---- */

struct call {
    const struct mcp_tool *t;
    struct mcp_tool_ctx c;
    cJSON *args;
};

static void call_init(struct call *k, const char *tool, const char *args, struct mcp_memo *memo,
                      const struct config *cfg)
{
    memset(k, 0, sizeof(*k));
    k->t = mcp_tool_find(tool);
    if (k->t == NULL) {
        fail_msg("no tool %s", tool);
    }
    k->args = cJSON_Parse(args != NULL ? args : "{}");
    assert_non_null(k->args);
    k->c.args = k->args;
    k->c.memo = memo;
    k->c.cfg = cfg;
    buf_init(&k->c.fetch.target, 0);
    buf_init(&k->c.fetch.body, 0);
    buf_init(&k->c.text, 0);
}

static void call_fini(struct call *k)
{
    if (k->t->fini != NULL) {
        k->t->fini(&k->c);
    }
    assert_null(k->c.state);
    cJSON_Delete(k->c.structured);
    cJSON_Delete(k->args);
    buf_fini(&k->c.fetch.target);
    buf_fini(&k->c.fetch.body);
    buf_fini(&k->c.text);
}

/* One step: the fetch reset as mcp.c resets it, then step(ans), then the step counted. */
static enum mcp_step run(struct call *k, const struct mcp_answer *ans)
{
    struct mcp_fetch *f = &k->c.fetch;
    buf_reset(&f->target);
    buf_reset(&f->body);
    f->method[0] = '\0';
    f->content_type[0] = '\0';
    f->accept[0] = '\0';
    f->max_bytes = 0;
    f->seconds = 0;
    f->accept_errors = false;
    buf_reset(&k->c.text);
    if (ans != NULL) {
        k->c.step++; /* 0 for the first step, +1 per answer */
    }
    return k->t->step(&k->c, ans);
}

static const char *target(struct call *k)
{
    return buf_cstr(&k->c.fetch.target);
}

static const char *text(struct call *k)
{
    return buf_cstr(&k->c.text);
}

static struct mcp_answer answer(int status, const char *body)
{
    size_t n = body != NULL ? strlen(body) : 0;
    return (struct mcp_answer){.status = status,
                               .content_type = "application/json",
                               .body = body != NULL ? body : "",
                               .len = n,
                               .total = n,
                               .complete = true};
}

/* The first step fetches; the answer is body (a fixture's name when it ends in .json). */
static enum mcp_step answer_with(struct call *k, int status, const char *body)
{
    char *file = NULL;
    size_t n = strlen(body);
    if (n > 5 && strcmp(body + n - 5, ".json") == 0) {
        file = fixture(body, NULL);
        body = file;
    }
    struct mcp_answer a = answer(status, body);
    enum mcp_step r = run(k, &a);
    free(file);
    return r;
}

/* MCP_TOOLS_DUMP=<folder>: every schema and structuredContent written there as a file, for a full
 * JSON Schema validator to check (tests/mcp/check_schemas.py). */
static void dump(const char *name, int seq, const char *what, const char *json)
{
    const char *dir = getenv("MCP_TOOLS_DUMP");
    if (dir == NULL) {
        return;
    }
    char path[512];
    int w = seq >= 0 ? snprintf(path, sizeof(path), "%s/%s.%s.%d.json", dir, name, what, seq)
                     : snprintf(path, sizeof(path), "%s/%s.%s.json", dir, name, what);
    assert_true(w > 0 && (size_t)w < sizeof(path));
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_true(fputs(json, f) >= 0);
    assert_int_equal(fclose(f), 0);
}

/* The text is valid UTF-8 (cuts for the reader never split a character). */
static void valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = 0;
        if (!utf8_decode((const uint8_t *)s + i, n - i, &cp, &len)) {
            fail_msg("invalid UTF-8 at byte %zu of: %s", i, s);
        }
        i += len;
    }
}

/* The structuredContent validates against the tool's output schema. */
static void valid_output(struct call *k)
{
    assert_non_null(k->c.structured);
    cJSON *schema = cJSON_Parse(k->t->output_schema);
    assert_non_null(schema);
    const char *why = check(schema, k->c.structured, k->t->name);
    if (why != NULL) {
        char *s = cJSON_PrintUnformatted(k->c.structured);
        print_error("%s\n", s);
        free(s);
        fail_msg("%s", why);
    }
    cJSON_Delete(schema);
    assert_true(buf_size(&k->c.text) > 0);
    valid_utf8(buf_cstr(&k->c.text));
    static int seq;
    char *out = cJSON_PrintUnformatted(k->c.structured);
    dump(k->t->name, seq++, "out", out);
    free(out);
    if (getenv("MCP_TOOLS_SHOW") != NULL) { /* to read what an agent reads */
        char *s = cJSON_Print(k->c.structured);
        print_message("---- %s\n%s\n%s\n", k->t->name, buf_cstr(&k->c.text), s);
        free(s);
    }
}

/* The arguments validate against the input schema (what a client checks before calling). */
static bool valid_input(const struct mcp_tool *t, const char *args)
{
    cJSON *schema = cJSON_Parse(t->input_schema);
    cJSON *a = cJSON_Parse(args);
    assert_non_null(schema);
    assert_non_null(a);
    bool ok = check(schema, a, "args") == NULL;
    cJSON_Delete(schema);
    cJSON_Delete(a);
    return ok;
}

static const cJSON *get(const cJSON *o, const char *path)
{
    /* "a.b.2.c": members and array indices */
    char buf[256];
    (void)snprintf(buf, sizeof(buf), "%s", path);
    const cJSON *v = o;
    for (char *save = NULL, *p = strtok_r(buf, ".", &save); p != NULL && v != NULL;
         p = strtok_r(NULL, ".", &save)) {
        v = cJSON_IsArray(v) ? cJSON_GetArrayItem(v, (int)strtol(p, NULL, 10))
                             : cJSON_GetObjectItemCaseSensitive(v, p);
    }
    if (v == NULL) {
        fail_msg("no %s", path);
    }
    return v;
}

static double num(const cJSON *o, const char *path)
{
    const cJSON *v = get(o, path);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *path)
{
    const cJSON *v = get(o, path);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* Fetches once with args and answers the error text of the first step. */
static void arg_error(const char *tool, const char *args, const char *want)
{
    struct call k;
    call_init(&k, tool, args, NULL, NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_ERROR);
    if (want != NULL) {
        assert_string_equal(text(&k), want);
    }
    call_fini(&k);
    /* and a client that checks the input schema refuses them too, where a schema can say it */
}

/* ---- the table and the schemas ---- */

static void test_mcp_tools_table(void **state)
{
    (void)state;
    static const char *const want[] = {
        "list_processes", "process_info",  "cpu_profile",      "allocations", "exceptions",
        "contention",     "gc_stats",      "stacks",           "recent_logs", "metrics_snapshot",
        "heap_summary",   "trace_summary", "collection_rules", "dump",
    };
    size_t n = 0;
    const struct mcp_tool *const *t = mcp_tools(&n);
    assert_int_equal(n, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(t[i]->name, want[i]);
        assert_ptr_equal(mcp_tool_find(want[i]), t[i]);
        assert_non_null(t[i]->title);
        assert_non_null(t[i]->step);
        assert_true(strlen(t[i]->description) > 100);
        assert_true((t[i]->chunk == NULL) || (t[i]->fini != NULL));
        assert_int_equal(t[i]->opt_in, strcmp(t[i]->name, "dump") == 0);
        for (int s = 0; s < 2; s++) {
            const char *text = s == 0 ? t[i]->input_schema : t[i]->output_schema;
            cJSON *j = cJSON_Parse(text);
            if (j == NULL) {
                fail_msg("%s: the %s schema is not JSON near: %.40s", t[i]->name,
                         s == 0 ? "input" : "output", cJSON_GetErrorPtr());
            }
            assert_string_equal(str(j, "type"), "object");
            schema_known(j, t[i]->name);
            dump(t[i]->name, -1, s == 0 ? "input-schema" : "output-schema", text);
            if (s == 0) {
                assert_true(cJSON_IsFalse(get(j, "additionalProperties")));
            }
            cJSON_Delete(j);
        }
    }
    assert_null(mcp_tool_find("nope"));
    assert_null(mcp_tool_find(NULL));
    assert_non_null(strstr(mcp_tool_find("heap_summary")->description, "blocking gen-2"));
    assert_non_null(strstr(mcp_tool_find("dump")->description, "Mcp:Tools:dump:Enabled"));
    assert_true(mcp_tool_find("list_processes")->hints.read_only);
    assert_false(mcp_tool_find("heap_summary")->hints.read_only);
    assert_false(mcp_tool_find("dump")->hints.read_only);
}

/* ---- arguments ---- */

static void test_mcp_tools_arg_errors(void **state)
{
    (void)state;
    arg_error("cpu_profile", "{\"seconds\":0}", "seconds must be an integer from 1 to 60, not 0");
    arg_error("cpu_profile", "{\"seconds\":61}", "seconds must be an integer from 1 to 60, not 61");
    arg_error("cpu_profile", "{\"seconds\":\"5\"}",
              "seconds must be an integer from 1 to 60, not not a number");
    arg_error("cpu_profile", "{\"top\":2.5}", "top must be an integer from 1 to 50, not 2.5");
    arg_error("cpu_profile", "{\"paths\":11}", "paths must be an integer from 0 to 10, not 11");
    arg_error("cpu_profile", "{\"pid\":-1}", "pid must be an integer from 1 to 2147483647, not -1");
    arg_error("cpu_profile", "{\"uid\":\"\"}", "uid must be a string of 1 to 64 bytes");
    arg_error("cpu_profile", "{\"name\":7}", "name must be a string of 1 to 256 bytes");
    arg_error("cpu_profile", "{\"secs\":5}",
              "unknown argument 'secs'; this tool takes pid, uid, name, seconds, top and paths");
    arg_error("allocations", "{\"paths\":1}",
              "unknown argument 'paths'; this tool takes pid, uid, name, seconds and top");
    arg_error("gc_stats", "{\"top\":1}",
              "unknown argument 'top'; this tool takes pid, uid, name and seconds");
    arg_error("list_processes", "{\"pid\":1}", "unknown argument 'pid'; this tool takes none");
    /* a repeated name: the second would be held unread for the whole call */
    arg_error("cpu_profile", "{\"seconds\":5,\"seconds\":[[],[]]}",
              "the argument 'seconds' is given twice");
    arg_error("stacks", "{\"frames\":65}", "frames must be an integer from 1 to 64, not 65");
    arg_error("recent_logs", "{\"level\":\"Loud\"}",
              "level must be one of Trace, Debug, Information, Warning, Error or Critical");
    arg_error("recent_logs", "{\"max\":201}", "max must be an integer from 1 to 200, not 201");
    arg_error("recent_logs", "{\"seconds\":31}", "seconds must be an integer from 1 to 30, not 31");
    arg_error("metrics_snapshot", "{\"instruments\":\"cpu-usage\"}",
              "instruments must be an array of at most 32 strings of 1 to 256 bytes");
    arg_error("metrics_snapshot", "{\"meters\":[\"\"]}",
              "meters must be an array of at most 8 strings of 1 to 256 bytes");
    arg_error("heap_summary", "{\"top\":101}", "top must be an integer from 1 to 100, not 101");
    arg_error("dump", "{}", "egressProvider is required");
    arg_error("dump", "{\"egressProvider\":\"files\",\"type\":\"Huge\"}",
              "type must be one of Mini, Triage, WithHeap or Full");
    arg_error("trace_summary", "{}", "give either providers or profile (one of them)");
    arg_error("trace_summary", "{\"profile\":\"Cpu\",\"providers\":[{\"name\":\"X\"}]}",
              "give either providers or profile (one of them)");
    arg_error("trace_summary", "{\"profile\":\"Cpu,Nope\"}",
              "profile: 'Nope' is not a trace profile (Cpu, Http, Logs, Metrics, GcCollect, "
              "dotnet-common, dotnet-sampled-thread-time, gc-verbose, gc-collect, database, "
              "cpu-sampling)");
    arg_error("trace_summary", "{\"providers\":[]}",
              "providers must be an array of 1 to 16 providers");
    arg_error("trace_summary", "{\"providers\":[{\"name\":\"\"}]}",
              "providers[0].name must be a string of 1 to 256 bytes");
    arg_error("trace_summary",
              "{\"providers\":[{\"name\":\"A\"},{\"name\":\"B\",\"keywords\":\"0xZ\"}]}",
              "providers[1].keywords must be a hex string such as \"0x8000\" (at most 16 digits)");
    arg_error("trace_summary", "{\"providers\":[{\"name\":\"A\",\"level\":6}]}",
              "providers[0].level must be 0 to 5 or one of LogAlways, Critical, Error, Warning, "
              "Informational, Verbose");
    arg_error("trace_summary", "{\"providers\":[{\"name\":\"A\",\"Level\":4}]}",
              "providers[0]: unknown member 'Level' (name, keywords, level, arguments)");
    arg_error("trace_summary", "{\"providers\":[{\"name\":\"A\",\"arguments\":{\"k\":1}}]}",
              "providers[0].arguments must be an object of at most 32 strings");
    arg_error("collection_rules", "{\"pid\":1.5}",
              "pid must be an integer from 1 to 2147483647, not 1.5");

    /* the input schemas say the same to a client that checks them */
    assert_false(valid_input(mcp_tool_find("cpu_profile"), "{\"seconds\":0}"));
    assert_false(valid_input(mcp_tool_find("cpu_profile"), "{\"secs\":5}"));
    assert_false(valid_input(mcp_tool_find("recent_logs"), "{\"level\":\"Loud\"}"));
    assert_false(valid_input(mcp_tool_find("dump"), "{}"));
    assert_true(valid_input(mcp_tool_find("cpu_profile"),
                            "{\"pid\":4242,\"seconds\":60,\"top\":50,\"paths\":0}"));
    assert_true(valid_input(mcp_tool_find("trace_summary"),
                            "{\"providers\":[{\"name\":\"A\",\"keywords\":\"0x8000\",\"level\":"
                            "\"Informational\",\"arguments\":{\"k\":\"v\"}}],\"seconds\":2}"));
    assert_true(valid_input(mcp_tool_find("trace_summary"),
                            "{\"providers\":[{\"name\":\"A\",\"level\":4}]}"));
    assert_true(valid_input(mcp_tool_find("dump"), "{\"egressProvider\":\"files\"}"));
    /* names of levels in any case (the schema's enum says how they are spelled) */
    struct call lc;
    call_init(&lc, "recent_logs", "{\"level\":\"warning\"}", NULL, NULL);
    assert_int_equal(run(&lc, NULL), MCP_STEP_FETCH);
    assert_string_equal(buf_cstr(&lc.c.fetch.body),
                        "{\"filterSpecs\":{},\"logLevel\":\"Warning\",\"useAppFilters\":false}");
    call_fini(&lc);
    /* null is an omitted argument */
    struct call k;
    call_init(&k, "cpu_profile", "{\"seconds\":null,\"uid\":null}", NULL, NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/profile?kind=cpu&durationSeconds=5&top=10&paths=3");
    call_fini(&k);
}

/* ---- the requests ---- */

struct want_fetch {
    const char *tool;
    const char *args;
    const char *method;
    const char *target;
    const char *body; /* NULL: none */
    const char *accept;
    uint32_t seconds;
};

static void test_mcp_tools_targets(void **state)
{
    (void)state;
    static const struct want_fetch w[] = {
        {"list_processes", "{}", "GET", "/processes", NULL, "", 0},
        {"process_info", "{}", "GET", "/process?extras=true", NULL, "", 0},
        {"process_info", "{\"pid\":28133}", "GET", "/process?pid=28133&extras=true", NULL, "", 0},
        {"process_info", "{\"name\":\"my app&x=1\",\"uid\":\"abed86d2-f2a0\"}", "GET",
         "/process?uid=abed86d2-f2a0&name=my%20app%26x%3D1&extras=true", NULL, "", 0},
        {"cpu_profile", "{\"pid\":28133,\"seconds\":3,\"top\":5,\"paths\":2}", "GET",
         "/profile?pid=28133&kind=cpu&durationSeconds=3&top=5&paths=2", NULL, "", 3},
        {"cpu_profile", "{\"paths\":0}", "GET", "/profile?kind=cpu&durationSeconds=5&top=10", NULL,
         "", 5},
        {"allocations", "{\"name\":\"TestApp\"}", "GET",
         "/profile?name=TestApp&kind=alloc&durationSeconds=5&top=10", NULL, "", 5},
        {"exceptions", "{\"seconds\":2,\"top\":3}", "GET",
         "/profile?kind=exceptions&durationSeconds=2&top=3", NULL, "", 2},
        {"contention", "{}", "GET", "/profile?kind=contention&durationSeconds=5&top=10", NULL, "",
         5},
        {"gc_stats", "{\"seconds\":1}", "GET", "/profile?kind=gc&durationSeconds=1", NULL, "", 1},
        {"stacks", "{\"pid\":7}", "GET", "/stacks?pid=7&format=json", NULL, "", 0},
        {"recent_logs", "{\"pid\":7}", "POST", "/logs?pid=7&durationSeconds=5",
         "{\"filterSpecs\":{},\"logLevel\":\"Information\",\"useAppFilters\":false}",
         "application/x-ndjson", 5},
        {"recent_logs", "{\"level\":\"Warning\",\"category\":\"My.Orders\",\"seconds\":2}", "POST",
         "/logs?durationSeconds=2",
         "{\"filterSpecs\":{\"My.Orders\":\"Warning\"},\"logLevel\":\"Warning\","
         "\"useAppFilters\":false}",
         "application/x-ndjson", 2},
        {"metrics_snapshot", "{}", "GET", "/livemetrics?durationSeconds=6", NULL, "", 6},
        {"metrics_snapshot", "{\"seconds\":10,\"meters\":[\"TestApp.Meter\",\"Other\"]}", "POST",
         "/livemetrics?durationSeconds=10",
         "{\"meters\":[{\"meterName\":\"TestApp.Meter\"},{\"meterName\":\"Other\"}],"
         "\"includeDefaultProviders\":true}",
         "", 10},
        {"heap_summary", "{\"name\":\"TestApp\"}", "GET", "/process?name=TestApp", NULL, "", 0},
        {"trace_summary", "{\"profile\":\"gc-collect, Metrics\",\"seconds\":2}", "GET",
         "/trace?durationSeconds=2&format=ndjson&profile=gc-collect%2C%20Metrics", NULL, "", 2},
        {"trace_summary",
         "{\"pid\":9,\"providers\":[{\"name\":\"Microsoft-Windows-DotNETRuntime\",\"keywords\":"
         "\"8001\",\"level\":4},{\"name\":\"My-Source\",\"level\":\"Verbose\",\"arguments\":{"
         "\"EventCounterIntervalSec\":\"1\"}}]}",
         "POST", "/trace?pid=9&durationSeconds=3&format=ndjson",
         "{\"Providers\":[{\"Name\":\"Microsoft-Windows-DotNETRuntime\",\"Keywords\":\"0x8001\","
         "\"EventLevel\":4},{\"Name\":\"My-Source\",\"EventLevel\":\"Verbose\",\"Arguments\":{"
         "\"EventCounterIntervalSec\":\"1\"}}],\"RequestRundown\":false}",
         "", 3},
        {"collection_rules", "{\"uid\":\"u-1\"}", "GET", "/collectionrules?uid=u-1", NULL, "", 0},
    };
    for (size_t i = 0; i < sizeof(w) / sizeof(w[0]); i++) {
        struct call k;
        call_init(&k, w[i].tool, w[i].args, NULL, NULL);
        enum mcp_step r = run(&k, NULL);
        if (r != MCP_STEP_FETCH) {
            fail_msg("%s %s: %s", w[i].tool, w[i].args, text(&k));
        }
        if (!valid_input(k.t, w[i].args)) {
            fail_msg("%s: %s does not pass the input schema", w[i].tool, w[i].args);
        }
        assert_string_equal(k.c.fetch.method, w[i].method);
        assert_string_equal(target(&k), w[i].target);
        if (w[i].body != NULL) {
            /* the body's members in any order: compare as JSON */
            cJSON *got = cJSON_Parse(buf_cstr(&k.c.fetch.body));
            cJSON *want = cJSON_Parse(w[i].body);
            assert_non_null(want);
            if (!cJSON_Compare(got, want, true)) {
                fail_msg("%s body %s", w[i].tool, buf_cstr(&k.c.fetch.body));
            }
            cJSON_Delete(got);
            cJSON_Delete(want);
            assert_string_equal(k.c.fetch.content_type, "application/json");
        } else {
            assert_int_equal(buf_size(&k.c.fetch.body), 0);
        }
        assert_string_equal(k.c.fetch.accept, w[i].accept);
        assert_int_equal(k.c.fetch.seconds, w[i].seconds);
        call_fini(&k);
    }
}

/* ---- processes ---- */

static void test_mcp_tools_processes(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "list_processes", NULL, NULL, NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_int_equal(answer_with(&k, 200, "processes.json"), MCP_STEP_DONE);
    valid_output(&k);
    assert_int_equal(num(k.c.structured, "processes.0.pid"), 28133);
    assert_string_equal(str(k.c.structured, "processes.0.name"), "TestApp");
    assert_true(cJSON_IsTrue(get(k.c.structured, "processes.0.isDefault")));
    assert_non_null(strstr(text(&k), "pid 28133  TestApp"));
    call_fini(&k);

    call_init(&k, "list_processes", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "[]"), MCP_STEP_DONE);
    valid_output(&k);
    assert_string_equal(text(&k), "No .NET process found.");
    call_fini(&k);

    /* not the JSON expected, or cut */
    call_init(&k, "list_processes", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "{}"), MCP_STEP_ERROR);
    assert_string_equal(text(&k), "the route answered HTTP 200 with 2 bytes (Content-Type "
                                  "application/json), not the JSON array expected");
    call_fini(&k);
    call_init(&k, "list_processes", NULL, NULL, NULL);
    (void)run(&k, NULL);
    struct mcp_answer cut = answer(200, "[{\"pid\":1");
    cut.complete = false;
    assert_int_equal(run(&k, &cut), MCP_STEP_ERROR);
    assert_string_equal(text(&k), "the route's answer was cut after 9 bytes (HTTP 200)");
    call_fini(&k);

    call_init(&k, "process_info", "{\"pid\":28133}", NULL, NULL);
    (void)run(&k, NULL);
    /* an environment member (never asked, but never passed on either) */
    char *p = fixture("process_extras.json", NULL);
    cJSON *j = cJSON_Parse(p);
    cJSON_AddStringToObject(j, "environment", "SECRET=1");
    char longcmd[1002]; /* "x" and 500 two-byte characters: the text's 300 bytes end inside one */
    longcmd[0] = 'x';
    for (int i = 0; i < 500; i++) {
        memcpy(longcmd + 1 + 2 * i, "\xC3\xA9", 2);
    }
    longcmd[1001] = '\0';
    cJSON_ReplaceItemInObject(j, "commandLine", cJSON_CreateString(longcmd));
    char *body = cJSON_PrintUnformatted(j);
    assert_int_equal(answer_with(&k, 200, body), MCP_STEP_DONE);
    valid_output(&k);
    assert_string_equal(str(k.c.structured, "clrProductVersion"), "10.0.12");
    assert_string_equal(str(k.c.structured, "containerName"), "rich-string-pxxqdm-fwhsmm");
    assert_int_equal(num(k.c.structured, "hostPid"), 28133);
    assert_null(cJSON_GetObjectItem(k.c.structured, "environment"));
    assert_null(strstr(text(&k), "SECRET"));
    assert_non_null(strstr(text(&k), ".NET 10.0.12 on linux-x64 (x64)"));
    assert_string_equal(str(k.c.structured, "commandLine"), longcmd);
    free(body);
    free(p);
    cJSON_Delete(j);
    call_fini(&k);
}

/* ---- /profile ---- */

static void test_mcp_tools_cpu_profile(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "cpu_profile", "{\"top\":2}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_cpu.json"), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_int_equal(num(s, "pid"), 28133);
    assert_int_equal(num(s, "seconds"), 3);
    assert_int_equal(num(s, "samples"), 1735);
    assert_int_equal(num(s, "threads"), 8);
    assert_int_equal(num(s, "externalSamples"), 10152);
    /* the route ranked five (top=5 was asked of it); every row the route gave is kept */
    assert_string_equal(str(s, "topExclusive.0.method"),
                        "TestApp!TestApp.Hot.SpinHotLoop(int64,float64)");
    assert_int_equal(num(s, "topExclusive.0.samples"), 1211);
    assert_true(num(s, "topExclusive.0.percent") == 69.80);
    assert_string_equal(str(s, "topInclusive.0.method"), "TestApp!TestApp.Hot.Run(int32)");
    assert_int_equal(num(s, "topInclusive.0.samples"), 1698);
    assert_int_equal(cJSON_GetArraySize(get(s, "hotPaths")), 0);
    assert_non_null(strstr(text(&k), "1735 samples in managed code on 8 threads"));
    call_fini(&k);

    call_init(&k, "cpu_profile", "{\"paths\":2}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_cpu_paths.json"), MCP_STEP_DONE);
    valid_output(&k);
    s = k.c.structured;
    assert_int_equal(cJSON_GetArraySize(get(s, "hotPaths")), 2); /* paths=2 of the 3 given */
    assert_int_equal(num(s, "hotPaths.0.samples"), 1211);
    assert_string_equal(str(s, "hotPaths.0.frames.3"),
                        "TestApp!TestApp.Hot.SpinHotLoop(int64,float64)");
    assert_string_equal(str(s, "hotPaths.1.frames.0"),
                        "TestApp!TestApp.Program.Main(class System.String[])");
    assert_non_null(strstr(text(&k), "#1 69.80% (1211 samples): TestApp!TestApp.Program.Main(class "
                                     "System.String[]) → TestApp!TestApp.Program.Run"));
    call_fini(&k);

    /* an idle app: no sample in managed code */
    call_init(&k, "cpu_profile", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200,
                                 "{\"pid\":1,\"kind\":\"cpu\",\"durationSeconds\":5,\"samples\":0,"
                                 "\"threads\":0,\"externalSamples\":900,\"top\":[],"
                                 "\"topInclusive\":[]}"),
                     MCP_STEP_DONE);
    valid_output(&k);
    assert_non_null(strstr(text(&k), "No thread ran managed code"));
    call_fini(&k);
}

static void test_mcp_tools_profile_kinds(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "allocations", "{\"top\":1}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_alloc.json"), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_int_equal(cJSON_GetArraySize(get(s, "types")), 1);
    assert_string_equal(str(s, "types.0.type"), "TestApp.BigAllocType");
    assert_int_equal(num(s, "types.0.bytes"), 9774519608.0);
    assert_string_equal(str(s, "types.0.sites.0.method"),
                        "TestApp!TestApp.ProfileKinds.AllocateBig(int64)");
    assert_int_equal(num(s, "sampledBytes"), 10320545256.0);
    assert_non_null(strstr(text(&k), "94.71%     9.77 GB  TestApp.BigAllocType"));
    call_fini(&k);

    call_init(&k, "exceptions", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_exceptions.json"), MCP_STEP_DONE);
    valid_output(&k);
    s = k.c.structured;
    assert_int_equal(num(s, "exceptions"), 12);
    assert_string_equal(str(s, "types.0.type"), "System.ArgumentException");
    assert_string_equal(str(s, "types.0.message"), "TestApp exception 0");
    assert_string_equal(str(s, "types.1.sites.0.method"),
                        "TestApp!TestApp.ProfileKinds.ThrowKnown(int32)");
    assert_non_null(strstr(text(&k), "System.ArgumentException: \"TestApp exception 0\""));
    call_fini(&k);

    call_init(&k, "contention", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_contention.json"), MCP_STEP_DONE);
    valid_output(&k);
    s = k.c.structured;
    assert_int_equal(num(s, "contentions"), 31);
    assert_true(num(s, "methods.0.maxWaitMilliseconds") == 789.789);
    assert_string_equal(str(s, "methods.0.method"), "TestApp!TestApp.ProfileKinds.HoldLock(int32)");
    call_fini(&k);

    call_init(&k, "gc_stats", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_gc.json"), MCP_STEP_DONE);
    valid_output(&k);
    s = k.c.structured;
    assert_int_equal(num(s, "gcs"), 5);
    assert_int_equal(num(s, "generations.gen2"), 3);
    assert_int_equal(num(s, "reasons.Induced"), 5);
    assert_int_equal(num(s, "heap.totalBytes"), 581536);
    assert_non_null(strstr(text(&k), "5 GCs in pid 28133 over 2 s: gen0 2, gen1 0, gen2 3 (0 "
                                     "background); reasons: Induced 5."));
    call_fini(&k);

    call_init(&k, "gc_stats", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "profile_gc_none.json"), MCP_STEP_DONE);
    valid_output(&k);
    assert_true(cJSON_IsNull(get(k.c.structured, "heap")));
    call_fini(&k);
}

static void test_mcp_tools_stacks(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "stacks", "{\"frames\":2,\"top\":3}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "stacks.json"), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_int_equal(num(s, "threads"), 9);
    /* the two idle thread-pool workers share one stack; every other thread is alone */
    assert_int_equal(num(s, "groupCount"), 8);
    assert_int_equal(cJSON_GetArraySize(get(s, "groups")), 3);
    assert_int_equal(num(s, "groups.0.threads"), 2);
    assert_int_equal(num(s, "groups.0.threadIds.0"), 28194);
    assert_int_equal(num(s, "groups.0.threadIds.1"), 28196);
    assert_string_equal(str(s, "groups.0.threadNames.0"), ".NET TP Worker");
    assert_int_equal(cJSON_GetArraySize(get(s, "groups.0.threadNames")), 1);
    assert_string_equal(
        str(s, "groups.0.frames.0"),
        "System.Private.CoreLib.dll!System.Threading.LowLevelLifoSemaphore.WaitForSignal");
    assert_int_equal(cJSON_GetArraySize(get(s, "groups.0.frames")), 2);
    assert_int_equal(num(s, "groups.0.elidedFrames"), 2);
    /* then by the route's order: the main thread (unnamed) */
    assert_int_equal(num(s, "groups.1.threadIds.0"), 28133);
    assert_int_equal(cJSON_GetArraySize(get(s, "groups.1.threadNames")), 0);
    assert_string_equal(str(s, "groups.1.frames.0"), "System.Console.dll!Interop+Sys.Read");
    assert_non_null(strstr(text(&k), "9 managed threads in 8 distinct stacks"));
    assert_non_null(strstr(text(&k), "2 threads (28194, 28196) named .NET TP Worker:"));
    call_fini(&k);

    /* a native frame, and every thread shown with all frames */
    call_init(&k, "stacks", "{\"top\":50,\"frames\":64}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(
        answer_with(&k, 200,
                    "{\"stacks\":[{\"threadId\":5,\"threadName\":\"w\",\"frames\":[{\"methodName\":"
                    "\"[NativeFrame]\",\"methodToken\":0,\"typeName\":\"[NativeFrame]\","
                    "\"moduleName\":\"[NativeFrame]\"},{\"methodName\":\"Wait\",\"typeName\":"
                    "\"A.B\",\"moduleName\":\"T.dll\"}]}]}"),
        MCP_STEP_DONE);
    valid_output(&k);
    assert_string_equal(str(k.c.structured, "groups.0.frames.0"), "[NativeFrame]");
    assert_string_equal(str(k.c.structured, "groups.0.frames.1"), "T.dll!A.B.Wait");
    assert_int_equal(num(k.c.structured, "groups.0.elidedFrames"), 0);
    call_fini(&k);
}

/* ---- chunk tools ---- */

/* Feeds data to the tool's chunk callback in pieces of `piece` bytes (0: one piece), then the
 * answer's end; returns the last step. */
static enum mcp_step stream(struct call *k, const char *data, size_t n, size_t piece, bool complete)
{
    for (size_t at = 0; at < n;) {
        size_t len = piece == 0 || n - at < piece ? n - at : piece;
        assert_int_equal(k->t->chunk(&k->c, data + at, len), 0);
        at += len;
    }
    struct mcp_answer a = {.status = 200,
                           .content_type = "application/x-ndjson",
                           .body = "",
                           .len = 0,
                           .total = n,
                           .complete = complete};
    return run(k, &a);
}

static void test_mcp_tools_recent_logs(void **state)
{
    (void)state;
    size_t n;
    char *data = fixture("logs.ndjson", &n);
    /* every split of the stream into two chunks, and byte by byte */
    for (size_t cut = 0; cut <= n; cut += cut < 40 ? 1 : 97) {
        struct call k;
        call_init(&k, "recent_logs", "{\"max\":3}", NULL, NULL);
        assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
        assert_int_equal(k.t->chunk(&k.c, data, cut), 0);
        assert_int_equal(stream(&k, data + cut, n - cut, cut % 7 == 0 ? 1 : 0, true),
                         MCP_STEP_DONE);
        valid_output(&k);
        const cJSON *s = k.c.structured;
        assert_int_equal(num(s, "seen"), 9);
        assert_int_equal(num(s, "kept"), 3);
        /* the last three, oldest first */
        assert_string_equal(str(s, "records.0.message"), "debugline");
        assert_string_equal(str(s, "records.0.level"), "Debug");
        assert_string_equal(str(s, "records.1.message"), "Heartbeat 46 heldMB=0");
        assert_string_equal(str(s, "records.2.message"), "Heartbeat 47 heldMB=0");
        assert_string_equal(str(s, "records.2.timestamp"), "2026-11-30 09:29:54Z");
        assert_string_equal(str(s, "records.2.category"), "TestApp.Heartbeat");
        call_fini(&k);
    }
    struct call k;
    call_init(&k, "recent_logs", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(stream(&k, data, n, 100, true), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_int_equal(num(s, "kept"), 9);
    assert_string_equal(str(s, "records.4.exception"),
                        "System.InvalidOperationException: boom kaput\n   at "
                        "TestApp.Program.Run(String cmd, String rest) in "
                        "/work/wt-h3/tests/app/Program.cs:line 531");
    assert_null(cJSON_GetObjectItem(get(s, "records.3"), "exception"));
    assert_non_null(strstr(text(&k), "2026-11-30 09:29:53Z fail TestApp.Commands: Failed kaput\n"
                                     "      System.InvalidOperationException: boom kaput\n"));
    call_fini(&k);

    /* a stream cut mid-record, with a line that is not JSON: what came is kept */
    call_init(&k, "recent_logs", NULL, NULL, NULL);
    (void)run(&k, NULL);
    const char *bad = "not json\n{\"status\":400,\"detail\":\"a problem, not a record\"}\n";
    assert_int_equal(k.t->chunk(&k.c, bad, strlen(bad)), 0);
    assert_int_equal(stream(&k, data, n - 10, 0, false), MCP_STEP_DONE);
    valid_output(&k);
    assert_int_equal(num(k.c.structured, "seen"), 8);
    assert_int_equal(num(k.c.structured, "unreadable"), 2);
    assert_true(cJSON_IsTrue(get(k.c.structured, "cut")));
    call_fini(&k);
    free(data);
}

static const cJSON *find_metric(const cJSON *s, const char *name, const char *tags)
{
    const cJSON *m = NULL;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(s, "metrics"))
    {
        const char *t = cJSON_GetStringValue(cJSON_GetObjectItem(m, "tags"));
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "name")), name) == 0 &&
            strcmp(t != NULL ? t : "", tags) == 0) {
            return m;
        }
    }
    fail_msg("no metric %s{%s}", name, tags);
    return NULL;
}

static void test_mcp_tools_metrics_snapshot(void **state)
{
    (void)state;
    struct config cfg;
    config_init(&cfg);
    assert_int_equal(config_set(&cfg, "GlobalCounter:IntervalSeconds", "1", "test"), 0);
    size_t n;
    char *data = fixture("livemetrics.jsonseq", &n);
    for (size_t piece = 1; piece <= 4097; piece = piece * 4 + 1) {
        struct call k;
        call_init(&k, "metrics_snapshot", NULL, NULL, &cfg);
        assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
        /* a 1 s interval: the 3 s asked suffice */
        assert_string_equal(target(&k), "/livemetrics?durationSeconds=3");
        assert_int_equal(stream(&k, data, n, piece, true), MCP_STEP_DONE);
        valid_output(&k);
        const cJSON *s = k.c.structured;
        assert_int_equal(num(s, "records"), 86);
        const cJSON *cpu = find_metric(s, "cpu-usage", "");
        assert_true(num(cpu, "value") == 49.990983191920776); /* the latest of the two */
        assert_string_equal(str(cpu, "kind"), "gauge");
        assert_string_equal(str(cpu, "unit"), "%");
        assert_int_equal(num(cpu, "samples"), 2);
        const cJSON *alloc = find_metric(s, "alloc-rate", "");
        assert_string_equal(str(alloc, "kind"), "rate");
        assert_true(num(alloc, "perSecond") == num(alloc, "value"));
        assert_true(num(alloc, "intervalSeconds") == 1);
        const cJSON *gen = find_metric(s, "dotnet.gc.collections", "gc.heap.generation=gen2");
        assert_string_equal(str(gen, "provider"), "System.Runtime");
        call_fini(&k);
    }
    free(data);

    /* only some instruments, by prefix; rates of meters say their interval */
    data = fixture("livemetrics_meter.jsonseq", &n);
    struct call k;
    call_init(
        &k, "metrics_snapshot",
        "{\"instruments\":[\"testapp.req\",\"TESTAPP.LATENCY\"],\"meters\":[\"TestApp.Meter\"]}",
        NULL, NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/livemetrics?durationSeconds=6"); /* 5 s interval + 1 */
    assert_int_equal(stream(&k, data, n, 333, true), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_int_equal(cJSON_GetArraySize(get(s, "metrics")), 5); /* 2 routes, 3 percentiles */
    const cJSON *req = find_metric(s, "testapp.requests", "code=200,route=/a");
    assert_string_equal(str(req, "kind"), "rate");
    assert_true(num(req, "intervalSeconds") == 1); /* "(... / 1 sec)" */
    assert_string_equal(str(find_metric(s, "testapp.latency", "Percentile=95"), "kind"),
                        "percentile");
    assert_non_null(strstr(text(&k), "TestApp.Meter:\n  testapp.requests{code=200,route=/a} = "));
    call_fini(&k);
    free(data);

    /* an interval too long for a snapshot */
    assert_int_equal(config_set(&cfg, "GlobalCounter:IntervalSeconds", "60", "test"), 0);
    call_init(&k, "metrics_snapshot", NULL, NULL, &cfg);
    assert_int_equal(run(&k, NULL), MCP_STEP_ERROR);
    assert_non_null(strstr(text(&k), "GlobalCounter:IntervalSeconds is 60 s"));
    call_fini(&k);
    assert_int_equal(config_set(&cfg, "GlobalCounter:IntervalSeconds", "10", "test"), 0);
    call_init(&k, "metrics_snapshot", "{\"seconds\":30}", NULL, &cfg);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/livemetrics?durationSeconds=30");
    call_fini(&k);
    call_init(&k, "metrics_snapshot", NULL, NULL, &cfg);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/livemetrics?durationSeconds=11");
    /* nothing came */
    assert_int_equal(stream(&k, "", 0, 0, true), MCP_STEP_DONE);
    valid_output(&k);
    assert_non_null(strstr(text(&k), "none came"));
    call_fini(&k);
    config_fini(&cfg);
}

static const cJSON *find_event(const cJSON *s, const char *event)
{
    const cJSON *m = NULL;
    cJSON_ArrayForEach(m, cJSON_GetObjectItem(s, "byEvent"))
    {
        if (strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(m, "event")), event) == 0) {
            return m;
        }
    }
    fail_msg("no event %s", event);
    return NULL;
}

static void test_mcp_tools_trace_summary(void **state)
{
    (void)state;
    size_t n;
    char *data = fixture("trace_post.ndjson", &n);
    for (size_t piece = 1; piece <= n; piece = piece * 3 + 2) {
        struct call k;
        call_init(&k, "trace_summary",
                  "{\"providers\":[{\"name\":\"Microsoft-Windows-DotNETRuntime\",\"keywords\":"
                  "\"0x8001\",\"level\":\"Informational\"}],\"seconds\":2,\"top\":5}",
                  NULL, NULL);
        assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
        assert_int_equal(stream(&k, data, n, piece, true), MCP_STEP_DONE);
        valid_output(&k);
        const cJSON *s = k.c.structured;
        assert_int_equal(num(s, "events"), 34);
        assert_int_equal(num(s, "kinds"), 19);
        assert_int_equal(cJSON_GetArraySize(get(s, "byEvent")), 5);
        /* the GC's mark events first; three exceptions of four events each */
        const cJSON *top = get(s, "byEvent.0");
        assert_int_equal(num(top, "count"), 7);
        assert_string_equal(str(top, "event"), "GCMarkWithType");
        const cJSON *thrown = find_event(s, "ExceptionThrown");
        assert_int_equal(num(thrown, "count"), 3);
        assert_string_equal(str(thrown, "provider"), "Microsoft-Windows-DotNETRuntime");
        assert_string_equal(str(thrown, "examplePayload.ExceptionMessage"), "TestApp exception 0");
        call_fini(&k);
    }
    free(data);

    /* a name with an escape; a line over the cap; a payload over 1 KiB; not JSON */
    struct call k;
    call_init(&k, "trace_summary", "{\"profile\":\"Cpu\",\"top\":50}", NULL, NULL);
    (void)run(&k, NULL);
    const char *lines =
        "{\"timestamp\":\"t\",\"provider\":\"My\\\"Source\",\"event\":\"E\",\"payload\":{}}\n"
        "{\"provider\":\"P\",\"event\":\"Big\",\"payloadHex\":\"";
    assert_int_equal(k.t->chunk(&k.c, lines, strlen(lines)), 0);
    char *hex = malloc(3000);
    memset(hex, 'a', 2999);
    hex[2999] = '\0';
    assert_int_equal(k.t->chunk(&k.c, hex, strlen(hex)), 0);
    assert_int_equal(k.t->chunk(&k.c, "\"}\nnope\n", 8), 0);
    char *huge = malloc(300 * 1024);
    memset(huge, ' ', 300 * 1024);
    huge[300 * 1024 - 1] = '\n';
    assert_int_equal(k.t->chunk(&k.c, huge, 300 * 1024), 0);
    const char *last = "{\"provider\":\"P\",\"event\":\"Big\",\"payload\":{\"a\":1}}";
    assert_int_equal(stream(&k, last, strlen(last), 0, false), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_string_equal(str(s, "byEvent.0.provider"), "My\"Source");
    assert_string_equal(str(s, "byEvent.1.event"), "Big");
    assert_int_equal(num(s, "byEvent.1.count"), 1); /* the cut last line is not counted */
    const char *ex = str(s, "byEvent.1.examplePayload");
    assert_int_equal(strlen(ex), 1024 + strlen("…"));
    assert_int_equal(num(s, "unreadable"), 2);
    assert_int_equal(num(s, "events"), 4);
    assert_true(cJSON_IsTrue(get(s, "cut")));
    free(hex);
    free(huge);
    call_fini(&k);
}

/* The tables of the chunk tools are bounded: 512 event kinds, 512 series; the rest is counted. */
static void test_mcp_tools_stream_bounds(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "trace_summary", "{\"profile\":\"Cpu\",\"top\":1}", NULL, NULL);
    (void)run(&k, NULL);
    for (int i = 0; i < 600; i++) {
        char line[128];
        int n = snprintf(line, sizeof(line),
                         "{\"provider\":\"P\",\"event\":\"E%d\",\"payload\":{\"i\":%d}}\n", i, i);
        for (int twice = 0; twice < (i == 599 ? 2 : 1); twice++) {
            assert_int_equal(k.t->chunk(&k.c, line, (size_t)n), 0);
        }
    }
    assert_int_equal(stream(&k, "", 0, 0, true), MCP_STEP_DONE);
    valid_output(&k);
    assert_int_equal(num(k.c.structured, "events"), 601);
    assert_int_equal(num(k.c.structured, "kinds"), 512);
    assert_int_equal(num(k.c.structured, "otherEvents"), 89);
    assert_string_equal(str(k.c.structured, "byEvent.0.event"), "E0");
    assert_int_equal(num(k.c.structured, "byEvent.0.examplePayload.i"), 0);
    call_fini(&k);

    call_init(&k, "metrics_snapshot", NULL, NULL, NULL);
    (void)run(&k, NULL);
    for (int i = 0; i < 600; i++) {
        char line[256];
        int n = snprintf(line, sizeof(line),
                         "\x1e{\"provider\":\"M\",\"name\":\"c%d\",\"unit\":\"\","
                         "\"counterType\":\"Metric\",\"tags\":\"\",\"value\":%d}\n",
                         i, i);
        assert_int_equal(k.t->chunk(&k.c, line, (size_t)n), 0);
    }
    assert_int_equal(stream(&k, "", 0, 0, true), MCP_STEP_DONE);
    valid_output(&k);
    assert_int_equal(cJSON_GetArraySize(get(k.c.structured, "metrics")), 512);
    assert_int_equal(num(k.c.structured, "dropped"), 88);
    assert_non_null(strstr(text(&k), "(472 more in structuredContent"));
    call_fini(&k);
}

/* ---- heap_summary and the memo ---- */

static double fake_now;

static double fake_clock(void)
{
    return fake_now;
}

/* One heap_summary call answered with the process (pid, uid) and the summary text. */
static void heap_call(struct mcp_memo *m, const char *args, const char *uid, const char *summary,
                      struct call *k)
{
    call_init(k, "heap_summary", args, m, NULL);
    assert_int_equal(run(k, NULL), MCP_STEP_FETCH);
    char proc[160];
    (void)snprintf(proc, sizeof(proc), "{\"pid\":28133,\"uid\":\"%s\",\"name\":\"TestApp\"}", uid);
    assert_int_equal(answer_with(k, 200, proc), MCP_STEP_FETCH);
    char want[160];
    (void)snprintf(want, sizeof(want), "/gcdump?uid=%s&format=summary&top=10000", uid);
    assert_string_equal(target(k), want);
    assert_true(k->c.fetch.max_bytes >= MCP_FETCH_DEFAULT_MAX);
    assert_int_equal(answer_with(k, 200, summary), MCP_STEP_DONE);
    valid_output(k);
}

static void test_mcp_tools_heap_summary(void **state)
{
    (void)state;
    struct mcp_memo *m = NULL;
    assert_int_equal(mcp_memo_new(&m), 0);
    m->clock = fake_clock;
    fake_now = 100;
    assert_int_equal(mcp_memo_bytes(m), 0);
    struct call k;
    heap_call(m, "{\"top\":2}", "u-1", "gcdump_summary_1.json", &k);
    const cJSON *s = k.c.structured;
    assert_true(cJSON_IsNull(get(s, "growth")));
    assert_true(cJSON_IsTrue(get(s, "remembered")));
    assert_int_equal(num(s, "objects"), 12345);
    assert_string_equal(str(s, "uid"), "u-1");
    assert_int_equal(cJSON_GetArraySize(get(s, "top")), 2);
    assert_string_equal(str(s, "top.0.type"), "System.String");
    assert_string_equal(str(s, "top.0.module"), "System.Private.CoreLib.dll");
    assert_non_null(strstr(text(&k), "First summary of this process"));
    call_fini(&k);
    size_t held = mcp_memo_bytes(m);
    assert_true(held > 5 * sizeof(struct mcp__snap_type));

    fake_now = 142.34;
    heap_call(m, "{\"top\":3}", "u-1", "gcdump_summary_2.json", &k);
    s = k.c.structured;
    assert_true(num(s, "growth.sinceSeconds") == 42.3);
    assert_int_equal(num(s, "growth.objectsDelta"), 14329 - 12345);
    assert_int_equal(num(s, "growth.bytesDelta"), 11298599 - 1234567);
    assert_int_equal(cJSON_GetArraySize(get(s, "growth.top")), 3);
    assert_string_equal(str(s, "growth.top.0.type"), "System.Byte[]");
    assert_int_equal(num(s, "growth.top.0.bytesDelta"), 10000000);
    assert_int_equal(num(s, "growth.top.0.countDelta"), 20);
    assert_string_equal(str(s, "growth.top.1.type"), "TestApp.GcDumpHolder+Node");
    assert_int_equal(num(s, "growth.top.1.countDelta"), 2000);
    assert_string_equal(str(s, "growth.top.2.type"),
                        "System.Collections.Generic.List<System.Byte[]>");
    assert_non_null(strstr(text(&k), "Since the previous summary 42.3 s ago: +1984 objects"));
    call_fini(&k);
    assert_int_equal(m->nsnaps, 1);

    /* another process: a memo entry of its own; the first one's diff is unchanged by it */
    heap_call(m, NULL, "u-2", "gcdump_summary_2.json", &k);
    assert_true(cJSON_IsNull(get(k.c.structured, "growth")));
    call_fini(&k);
    heap_call(m, NULL, "u-1", "gcdump_summary_2.json", &k);
    assert_int_equal(num(k.c.structured, "growth.bytesDelta"), 0);
    assert_int_equal(cJSON_GetArraySize(get(k.c.structured, "growth.top")), 0);
    assert_non_null(strstr(text(&k), "no type grew"));
    call_fini(&k);
    assert_int_equal(m->nsnaps, 2);

    /* at most 16 processes: the least recently used goes */
    for (int i = 0; i < 20; i++) {
        char uid[16];
        (void)snprintf(uid, sizeof(uid), "p-%d", i);
        heap_call(m, NULL, uid, "gcdump_summary_1.json", &k);
        call_fini(&k);
    }
    assert_int_equal(m->nsnaps, MCP__MEMO_PROCS);
    assert_null(mcp__memo_find(m, "u-1"));
    assert_null(mcp__memo_find(m, "p-3"));
    assert_non_null(mcp__memo_find(m, "p-4"));
    assert_int_equal(mcp_memo_bytes(m), 16 * held);
    mcp_memo_free(m);
}

/* A summary of ntypes types named "T<i>" with a long name. */
static char *big_summary(int ntypes, size_t name_len)
{
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "pid", 1);
    cJSON_AddNumberToObject(j, "objects", ntypes);
    cJSON_AddNumberToObject(j, "heapBytes", ntypes * 100.0);
    cJSON_AddNumberToObject(j, "typeCount", ntypes);
    cJSON *top = cJSON_AddArrayToObject(j, "top");
    char *name = malloc(name_len + 16);
    memset(name, 'x', name_len);
    for (int i = 0; i < ntypes; i++) {
        (void)snprintf(name + name_len, 16, "%d", i);
        cJSON *t = cJSON_CreateObject();
        cJSON_AddStringToObject(t, "type", name);
        cJSON_AddStringToObject(t, "module", "/usr/share/dotnet/shared/M.dll");
        cJSON_AddNumberToObject(t, "count", 1);
        cJSON_AddNumberToObject(t, "bytes", 100);
        cJSON_AddItemToArray(top, t);
    }
    free(name);
    char *s = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return s;
}

static void test_mcp_tools_memo_bounds(void **state)
{
    (void)state;
    struct mcp_memo *m = NULL;
    assert_int_equal(mcp_memo_new(&m), 0);
    m->clock = fake_clock;
    /* 10001 types: 10000 remembered, named by the file name of their module */
    char *sum = big_summary(10001, 10);
    struct call k;
    heap_call(m, "{\"top\":1}", "u-big", sum, &k);
    assert_string_equal(str(k.c.structured, "top.0.module"), "M.dll");
    assert_non_null(strstr(text(&k), "only the 10000 biggest types are compared"));
    call_fini(&k);
    struct mcp__snap *snap = mcp__memo_find(m, "u-big");
    assert_non_null(snap);
    assert_int_equal(snap->n, 10000);
    assert_string_equal(snap->types[0].module, "M.dll");
    free(sum);
    mcp_memo_free(m);

    /* a budget of 5 MiB: the memo's share is its minimum, 4 MiB; 2 summaries of ~2.3 MB do not
     * both fit, so the older goes; one of ~5 MB fits in none and is not remembered */
    membudget_set((uint64_t)5 << 20);
    assert_int_equal(mcp_memo_new(&m), 0);
    m->clock = fake_clock;
    sum = big_summary(10000, 180);
    heap_call(m, NULL, "a", sum, &k);
    assert_true(cJSON_IsTrue(get(k.c.structured, "remembered")));
    call_fini(&k);
    heap_call(m, NULL, "b", sum, &k);
    assert_true(cJSON_IsTrue(get(k.c.structured, "remembered")));
    call_fini(&k);
    assert_null(mcp__memo_find(m, "a"));
    assert_non_null(mcp__memo_find(m, "b"));
    assert_true(mcp_memo_bytes(m) <= ((size_t)4 << 20));
    free(sum);
    sum = big_summary(10000, 500);
    heap_call(m, NULL, "c", sum, &k);
    assert_false(cJSON_IsTrue(get(k.c.structured, "remembered")));
    assert_non_null(strstr(text(&k), "not remembered"));
    call_fini(&k);
    /* the others went to make room, in vain */
    assert_int_equal(m->nsnaps, 0);
    assert_int_equal(mcp_memo_bytes(m), 0);
    free(sum);
    mcp_memo_free(m);
    assert_int_equal(membudget_used(), 0);
    membudget_set(0);

    /* without a memo (none given): no growth, nothing remembered */
    heap_call(NULL, NULL, "u", "gcdump_summary_1.json", &k);
    assert_false(cJSON_IsTrue(get(k.c.structured, "remembered")));
    call_fini(&k);
    mcp_memo_free(NULL);
    assert_int_equal(mcp_memo_bytes(NULL), 0);
}

/* ---- collection_rules and dump ---- */

static void test_mcp_tools_collection_rules(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "collection_rules", "{\"pid\":28133}", NULL, NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    assert_int_equal(answer_with(&k, 200, "collectionrules.json"), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/collectionrules/HighCpu?pid=28133");
    assert_true(k.c.fetch.accept_errors);
    assert_int_equal(answer_with(&k, 200, "collectionrule_highcpu.json"), MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/collectionrules/StartupRule?pid=28133");
    assert_int_equal(answer_with(&k, 200, "collectionrule_startup.json"), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_string_equal(str(s, "rules.0.name"), "HighCpu");
    assert_string_equal(str(s, "rules.0.state"), "Running");
    assert_string_equal(str(s, "rules.0.actionCountSlidingWindowDurationLimit"), "00:10:00");
    assert_true(cJSON_IsNull(get(s, "rules.0.ruleFinishedCountdown")));
    assert_string_equal(str(s, "rules.1.name"), "StartupRule");
    assert_int_equal(num(s, "rules.1.lifetimeOccurrences"), 1);
    /* the text is the last step's own (mcp.c may clear it between steps) */
    assert_non_null(strstr(text(&k), "2 collection rules for the process:\n  HighCpu: Running "
                                     "(fired 0 times, 0 in the window; at most 1 action runs per "
                                     "00:10:00): This collection rule is active"));
    assert_non_null(strstr(text(&k), "StartupRule: Finished (fired 1 times"));
    call_fini(&k);

    /* none */
    call_init(&k, "collection_rules", NULL, NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(answer_with(&k, 200, "{}"), MCP_STEP_DONE);
    valid_output(&k);
    assert_int_equal(cJSON_GetArraySize(get(k.c.structured, "rules")), 0);
    call_fini(&k);

    /* a name to encode; a rule gone before its details were asked */
    call_init(&k, "collection_rules", "{\"name\":\"app\"}", NULL, NULL);
    (void)run(&k, NULL);
    assert_int_equal(
        answer_with(&k, 200, "{\"Rule A/1\":{\"state\":\"Throttled\",\"stateReason\":\"r\"}}"),
        MCP_STEP_FETCH);
    assert_string_equal(target(&k), "/collectionrules/Rule%20A%2F1?name=app");
    assert_int_equal(answer_with(&k, 400, "{\"status\":400,\"detail\":\"gone\"}"), MCP_STEP_DONE);
    valid_output(&k);
    assert_string_equal(str(k.c.structured, "rules.0.state"), "Throttled");
    assert_null(cJSON_GetObjectItem(get(k.c.structured, "rules.0"), "lifetimeOccurrences"));
    call_fini(&k);

    /* 40 rules: 32 asked, 8 from the summary alone */
    cJSON *many = cJSON_CreateObject();
    for (int i = 0; i < 40; i++) {
        char name[16];
        (void)snprintf(name, sizeof(name), "r%02d", i);
        cJSON *r = cJSON_AddObjectToObject(many, name);
        cJSON_AddStringToObject(r, "state", "Running");
        cJSON_AddStringToObject(r, "stateReason", "x");
    }
    char *body = cJSON_PrintUnformatted(many);
    call_init(&k, "collection_rules", NULL, NULL, NULL);
    (void)run(&k, NULL);
    int asked = 0;
    enum mcp_step r = answer_with(&k, 200, body);
    while (r == MCP_STEP_FETCH) {
        asked++;
        r = answer_with(&k, 200, "collectionrule_highcpu.json");
    }
    assert_int_equal(r, MCP_STEP_DONE);
    assert_int_equal(asked, 32);
    valid_output(&k);
    assert_int_equal(cJSON_GetArraySize(get(k.c.structured, "rules")), 40);
    assert_non_null(strstr(text(&k), "(details of the last 8 not asked"));
    call_fini(&k);
    free(body);
    cJSON_Delete(many);
}

static void test_mcp_tools_dump(void **state)
{
    (void)state;
    struct mcp_memo *m = NULL;
    assert_int_equal(mcp_memo_new(&m), 0);
    struct call k;
    call_init(&k, "dump", "{\"pid\":28133,\"type\":\"mini\",\"egressProvider\":\"files\"}", m,
              NULL);
    assert_int_equal(run(&k, NULL), MCP_STEP_FETCH);
    const char *t = target(&k);
    const char *prefix = "/dump?pid=28133&type=Mini&egressProvider=files&tags=mcp-dump-";
    assert_memory_equal(t, prefix, strlen(prefix));
    assert_int_equal(strlen(t), strlen(prefix) + 16);
    char tag[64];
    (void)snprintf(tag, sizeof(tag), "%s", strstr(t, "mcp-dump-"));
    assert_true(k.c.fetch.max_bytes > 0 && k.c.fetch.max_bytes <= 64 * 1024);
    struct mcp_answer accepted = answer(202, NULL);
    assert_int_equal(run(&k, &accepted), MCP_STEP_FETCH);
    char want[96];
    (void)snprintf(want, sizeof(want), "/operations?tags=%s", tag);
    assert_string_equal(target(&k), want);
    assert_int_equal(answer_with(&k, 200, "operations_tagged.json"), MCP_STEP_DONE);
    valid_output(&k);
    const cJSON *s = k.c.structured;
    assert_string_equal(str(s, "operationId"), "77bf11e7-2b93-4731-9872-82b8784ef101");
    assert_string_equal(str(s, "operation"), "/operations/77bf11e7-2b93-4731-9872-82b8784ef101");
    assert_string_equal(str(s, "status"), "Succeeded");
    assert_string_equal(str(s, "type"), "Mini");
    assert_int_equal(num(s, "process.pid"), 28133);
    assert_non_null(strstr(text(&k), "GET /operations/77bf11e7-2b93-4731-9872-82b8784ef101"));
    call_fini(&k);

    /* each call its own tag */
    call_init(&k, "dump", "{\"egressProvider\":\"files\"}", m, NULL);
    (void)run(&k, NULL);
    assert_null(strstr(target(&k), tag));
    assert_non_null(strstr(target(&k), "type=WithHeap"));
    /* anything but 202 (the dump's bytes in the answer) is an error */
    assert_int_equal(answer_with(&k, 200, "MDMP"), MCP_STEP_ERROR);
    assert_string_equal(text(&k), "GET /dump answered HTTP 200, not 202: the dump was not handed "
                                  "to egress provider 'files'");
    call_fini(&k);

    /* the operation not listed (yet) */
    call_init(&k, "dump", "{\"egressProvider\":\"files\"}", m, NULL);
    (void)run(&k, NULL);
    assert_int_equal(run(&k, &accepted), MCP_STEP_FETCH);
    assert_int_equal(answer_with(&k, 200, "[]"), MCP_STEP_DONE);
    valid_output(&k);
    assert_true(cJSON_IsNull(get(k.c.structured, "operationId")));
    assert_non_null(strstr(text(&k), "GET /operations?tags=mcp-dump-"));
    call_fini(&k);
    mcp_memo_free(m);
}

/* ---- shared parts ---- */

struct got_lines {
    char all[4096];
    size_t n;
    int lines;
};

static int collect(void *ud, const char *s, size_t n)
{
    struct got_lines *g = ud;
    assert_true(g->n + n + 1 < sizeof(g->all));
    memcpy(g->all + g->n, s, n);
    g->n += n;
    g->all[g->n++] = '|';
    g->all[g->n] = '\0';
    g->lines++;
    return 0;
}

static int refuse(void *ud, const char *s, size_t n)
{
    (void)ud;
    (void)s;
    (void)n;
    return -42;
}

static void test_mcp_tools_lines(void **state)
{
    (void)state;
    const char *in = "a\r\n\x1e{\"b\":1}\n\n0123456789ABCDEF-too-long\nc\nd";
    size_t n = strlen(in);
    for (size_t cut1 = 0; cut1 <= n; cut1++) {
        for (size_t cut2 = cut1; cut2 <= n; cut2++) {
            struct mcp__lines l;
            mcp__lines_init(&l, 10);
            struct got_lines g = {.n = 0};
            assert_int_equal(mcp__lines_feed(&l, in, cut1, collect, &g), 0);
            assert_int_equal(mcp__lines_feed(&l, in + cut1, cut2 - cut1, collect, &g), 0);
            assert_int_equal(mcp__lines_feed(&l, in + cut2, n - cut2, collect, &g), 0);
            assert_int_equal(mcp__lines_end(&l, collect, &g), 0);
            assert_string_equal(g.all, "a|{\"b\":1}|c|d|");
            assert_int_equal(l.too_long, 1);
            mcp__lines_fini(&l);
        }
    }
    struct mcp__lines l;
    mcp__lines_init(&l, 10);
    assert_int_equal(mcp__lines_feed(&l, "x\ny\n", 4, refuse, NULL), -42);
    mcp__lines_fini(&l);

    /* percent-encoding and the query */
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(buf_append_str(&b, "/p"), 0);
    assert_int_equal(mcp__q(&b, "name", "a b&c=d/é~._-"), 0);
    assert_int_equal(mcp__q_int(&b, "pid", 42), 0);
    assert_string_equal(buf_cstr(&b), "/p?name=a%20b%26c%3Dd%2F%C3%A9~._-&pid=42");
    buf_fini(&b);
}

/* Every tool answers "out of memory" rather than crash when its builder fails (the builder's
 * flag is what every add checks: set it first). */
static void test_mcp_tools_builder(void **state)
{
    (void)state;
    struct call k;
    call_init(&k, "list_processes", NULL, NULL, NULL);
    struct mcp__b b = {.c = &k.c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    cJSON *arr = mcp__arr(&b, root, "a");
    mcp__num(&b, arr, NULL, 1);
    mcp__strn(&b, root, "s", "héllo", 6, 2); /* cut inside é: the whole é goes */
    assert_string_equal(str(root, "s"), "h…");
    b.oom = true;
    mcp__num(&b, root, "n", 2);
    assert_null(cJSON_GetObjectItem(root, "n"));
    assert_null(mcp__obj(&b, root, "o"));
    assert_int_equal(mcp__finish(&b, root), MCP_STEP_ERROR);
    assert_string_equal(text(&k), "out of memory");
    assert_null(k.c.structured);
    call_fini(&k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mcp_tools_table),
        cmocka_unit_test(test_mcp_tools_arg_errors),
        cmocka_unit_test(test_mcp_tools_targets),
        cmocka_unit_test(test_mcp_tools_processes),
        cmocka_unit_test(test_mcp_tools_cpu_profile),
        cmocka_unit_test(test_mcp_tools_profile_kinds),
        cmocka_unit_test(test_mcp_tools_stacks),
        cmocka_unit_test(test_mcp_tools_recent_logs),
        cmocka_unit_test(test_mcp_tools_metrics_snapshot),
        cmocka_unit_test(test_mcp_tools_trace_summary),
        cmocka_unit_test(test_mcp_tools_stream_bounds),
        cmocka_unit_test(test_mcp_tools_heap_summary),
        cmocka_unit_test(test_mcp_tools_memo_bounds),
        cmocka_unit_test(test_mcp_tools_collection_rules),
        cmocka_unit_test(test_mcp_tools_dump),
        cmocka_unit_test(test_mcp_tools_lines),
        cmocka_unit_test(test_mcp_tools_builder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
