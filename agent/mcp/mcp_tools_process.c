/* SPDX-License-Identifier: MIT */
/*
 * The tools about processes and what dotmon does with them: list_processes (GET /processes),
 * process_info (GET /process?extras=true, without the environment), collection_rules
 * (GET /collectionrules, then each rule's details) and the opt-in dump (GET /dump to an egress
 * store, then the operation it made, found by a tag of its own).
 */
#include "mcp_tools.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "mcp_tools_internal.h"

/* ---- list_processes ---- */

static enum mcp_step list_processes_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    static const char *const names[] = {NULL};
    if (ans == NULL) {
        if (mcp__args_check(c, names) != 0) {
            return MCP_STEP_ERROR;
        }
        return mcp__fetch_begin(c, "GET", "/processes") ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *list = mcp__answer_json(c, ans, cJSON_Array);
    if (list == NULL) {
        return MCP_STEP_ERROR;
    }
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    cJSON *out = mcp__arr(&b, root, "processes");
    int n = cJSON_GetArraySize(list);
    mcp__say(&b, n == 0 ? "No .NET process found." : "%d .NET process%s:\n", n, n == 1 ? "" : "es");
    const cJSON *p = NULL;
    cJSON_ArrayForEach(p, list)
    {
        const char *uid = mcp__jstr(p, "uid");
        const char *name = mcp__jstr(p, "name");
        double pid = mcp__jnum(p, "pid", 0);
        bool def = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "isDefault"));
        cJSON *o = mcp__obj(&b, out, NULL);
        mcp__num(&b, o, "pid", pid);
        mcp__str(&b, o, "uid", uid != NULL ? uid : "");
        mcp__str(&b, o, "name", name != NULL ? name : "");
        mcp__bool(&b, o, "isDefault", def);
        mcp__say(&b, "  pid %.0f  %s  uid %s%s\n", pid, name != NULL ? name : "",
                 uid != NULL ? uid : "",
                 def ? "  (default: tools act on it without pid/uid/name)" : "");
    }
    cJSON_Delete(list);
    return mcp__finish(&b, root);
}

const struct mcp_tool mcp__tool_list_processes = {
    .name = "list_processes",
    .title = "List .NET processes",
    .description =
        "Lists the .NET processes dotmon can diagnose: pid, uid (the runtime instance cookie), "
        "name, and which one is the default (the one every other tool acts on when given no pid, "
        "uid or name). Costs the apps nothing (dotmon asks each runtime's diagnostic server for "
        "its process info). No side effects.",
    .input_schema = "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":{"
        "\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},\"uid\":{\"type\":"
        "\"string\"},\"name\":{\"type\":\"string\"},\"isDefault\":{\"type\":\"boolean\"}},"
        "\"required\":[\"pid\",\"uid\",\"name\",\"isDefault\"]}}},\"required\":[\"processes\"]}",
    .hints = {.read_only = true, .idempotent = true},
    .step = list_processes_step,
};

/* ---- process_info ---- */

/* What /process?extras=true says of a process that is safe to hand on: its environment (secrets)
 * is another route, never asked. Strings first, then the numbers. */
static const char *const info_strings[] = {
    "uid",
    "name",
    "commandLine",
    "operatingSystem",
    "processArchitecture",
    "managedEntryPointAssemblyName",
    "clrProductVersion",
    "runtimeIdentifier",
    "containerId",
    "containerName",
    "podName",
    "podNamespace",
    "podUid",
};
static const char *const info_numbers[] = {"pid", "nsPid", "hostPid"};
#define INFO_IDENTITY 8 /* info_strings from containerId on: who the process is, when known */

#define INFO_STRING_MAX 4096 /* a command line longer than this is cut */

static enum mcp_step process_info_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    static const char *const names[] = {MCP__SEL_NAMES, NULL};
    struct mcp__sel sel;
    if (ans == NULL) {
        if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0) {
            return MCP_STEP_ERROR;
        }
        int rc = mcp__fetch_begin(c, "GET", "/process");
        rc = rc ? rc : mcp__q_sel(&c->fetch.target, &sel);
        rc = rc ? rc : mcp__q(&c->fetch.target, "extras", "true");
        return rc ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *p = mcp__answer_json(c, ans, cJSON_Object);
    if (p == NULL) {
        return MCP_STEP_ERROR;
    }
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    for (size_t i = 0; i < sizeof(info_numbers) / sizeof(info_numbers[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(p, info_numbers[i]);
        if (cJSON_IsNumber(v)) {
            mcp__num(&b, root, info_numbers[i], v->valuedouble);
        }
    }
    for (size_t i = 0; i < sizeof(info_strings) / sizeof(info_strings[0]); i++) {
        const char *s = mcp__jstr(p, info_strings[i]);
        if (s != NULL) {
            mcp__strn(&b, root, info_strings[i], s, strlen(s), INFO_STRING_MAX);
        }
    }
    const char *name = mcp__jstr(p, "name");
    const char *ver = mcp__jstr(p, "clrProductVersion");
    const char *rid = mcp__jstr(p, "runtimeIdentifier");
    const char *cmd = mcp__jstr(p, "commandLine");
    mcp__say(&b, "pid %.0f, %s, uid %s\n", mcp__jnum(p, "pid", 0), name ? name : "?",
             mcp__jstr(p, "uid") ? mcp__jstr(p, "uid") : "?");
    mcp__say(&b, ".NET %s on %s (%s)\n", ver ? ver : "(version unknown)", rid ? rid : "?",
             mcp__jstr(p, "processArchitecture") ? mcp__jstr(p, "processArchitecture") : "?");
    if (cmd != NULL) {
        mcp__say(&b, "command line: %.*s%s\n", mcp__cut(cmd, 300), cmd,
                 strlen(cmd) > 300 ? "…" : "");
    }
    for (size_t i = INFO_IDENTITY; i < sizeof(info_strings) / sizeof(info_strings[0]); i++) {
        const char *s = mcp__jstr(p, info_strings[i]);
        if (s != NULL) {
            mcp__say(&b, "%s: %.*s\n", info_strings[i], mcp__cut(s, 200), s);
        }
    }
    cJSON_Delete(p);
    return mcp__finish(&b, root);
}

const struct mcp_tool mcp__tool_process_info = {
    .name = "process_info",
    .title = "Process facts",
    .description =
        "What a .NET process is: pid, uid, name, command line, OS and architecture, entry "
        "assembly, the runtime's version and RID, and where dotmon knows it its container and pod "
        "(never its environment variables: they may hold secrets). Costs the app nothing (one "
        "diagnostic-server command). No side effects.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},\"nsPid\":{\"type"
        "\":\"integer\"},\"hostPid\":{\"type\":\"integer\"},\"uid\":{\"type\":\"string\"},\"nam"
        "e\":{\"type\":\"string\"},\"commandLine\":{\"type\":\"string\"},\"operatingSystem\":{"
        "\"type\":\"string\"},\"processArchitecture\":{\"type\":\"string\"},\"managedEntryPoint"
        "AssemblyName\":{\"type\":\"string\"},\"clrProductVersion\":{\"type\":\"string\"},\"run"
        "timeIdentifier\":{\"type\":\"string\"},\"containerId\":{\"type\":\"string\"},\"contain"
        "erName\":{\"type\":\"string\"},\"podName\":{\"type\":\"string\"},\"podNamespace\":{\"t"
        "ype\":\"string\"},\"podUid\":{\"type\":\"string\"}},\"required\":[\"pid\",\"uid\",\"na"
        "me\"]}",
    .hints = {.read_only = true, .idempotent = true},
    .step = process_info_step,
};

/* ---- collection_rules ---- */

#define RULES_MAX 32 /* rules whose details are asked */

struct rules_state {
    struct mcp__sel sel;
    cJSON *summary;    /* GET /collectionrules: name -> {state, stateReason} */
    const cJSON *next; /* the rule whose details were asked last */
    int asked;
    struct mcp__b b;
    cJSON *root;
    cJSON *rules;
};

static void rules_fini(struct mcp_tool_ctx *c)
{
    struct rules_state *s = c->state;
    if (s != NULL) {
        cJSON_Delete(s->summary);
        cJSON_Delete(s->root);
        free(s);
        c->state = NULL;
    }
}

/* GET /collectionrules/{name}?selector for s->next. */
static enum mcp_step rules_ask(struct mcp_tool_ctx *c, struct rules_state *s)
{
    int rc = mcp__fetch_begin(c, "GET", "/collectionrules/");
    rc = rc ? rc : mcp__pct(&c->fetch.target, s->next->string);
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, &s->sel);
    c->fetch.accept_errors = true; /* a rule gone meanwhile keeps its summary */
    s->asked++;
    return rc ? mcp__oom(c) : MCP_STEP_FETCH;
}

/* One rule's entry, from its summary and its details (NULL: none). */
static void rules_add(struct rules_state *s, const cJSON *sum, const cJSON *det)
{
    struct mcp__b *b = &s->b;
    cJSON *o = mcp__obj(b, s->rules, NULL);
    const char *state = mcp__jstr(sum, "state");
    const char *reason = mcp__jstr(sum, "stateReason");
    mcp__str(b, o, "name", sum->string);
    mcp__str(b, o, "state", state ? state : "");
    mcp__str(b, o, "stateReason", reason ? reason : "");
    static const char *const detail[] = {
        "lifetimeOccurrences",
        "slidingWindowOccurrences",
        "actionCountLimit",
        "actionCountSlidingWindowDurationLimit",
        "slidingWindowDurationCountdown",
        "ruleFinishedCountdown",
    };
    for (size_t i = 0; det != NULL && i < sizeof(detail) / sizeof(detail[0]); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(det, detail[i]);
        if (cJSON_IsNumber(v) || cJSON_IsString(v) || cJSON_IsNull(v)) {
            mcp__dup(b, o, detail[i], v);
        }
    }
}

/* The text, from the entries (the last step writes it: c->text is the last step's). */
static void rules_say(struct mcp__b *b, const cJSON *rules, int omitted)
{
    int n = cJSON_GetArraySize(rules);
    mcp__say(b,
             n == 0 ? "No collection rule applies to the process.\n"
                    : "%d collection rule%s for the process:\n",
             n, n == 1 ? "" : "s");
    const cJSON *r = NULL;
    cJSON_ArrayForEach(r, rules)
    {
        const char *window = mcp__jstr(r, "actionCountSlidingWindowDurationLimit");
        mcp__say(b, "  %s: %s", mcp__jstr(r, "name"), mcp__jstr(r, "state"));
        if (cJSON_GetObjectItemCaseSensitive(r, "lifetimeOccurrences") != NULL) {
            mcp__say(
                b, " (fired %.0f times, %.0f in the window; at most %.0f action runs%s%s)",
                mcp__jnum(r, "lifetimeOccurrences", 0), mcp__jnum(r, "slidingWindowOccurrences", 0),
                mcp__jnum(r, "actionCountLimit", 0), window ? " per " : "", window ? window : "");
        }
        mcp__say(b, ": %s\n", mcp__jstr(r, "stateReason"));
    }
    if (omitted > 0) {
        mcp__say(b, "(details of the last %d not asked: at most %d rules are)\n", omitted,
                 RULES_MAX);
    }
}

static enum mcp_step rules_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, NULL};
    struct rules_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    s->b.c = c;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &s->sel) != 0) {
        return MCP_STEP_ERROR;
    }
    int rc = mcp__fetch_begin(c, "GET", "/collectionrules");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, &s->sel);
    return rc ? mcp__oom(c) : MCP_STEP_FETCH;
}

static enum mcp_step collection_rules_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    if (ans == NULL) {
        return rules_first(c);
    }
    struct rules_state *s = c->state;
    if (s->summary == NULL) {
        s->summary = mcp__answer_json(c, ans, cJSON_Object);
        if (s->summary == NULL) {
            return MCP_STEP_ERROR;
        }
        s->root = mcp__obj(&s->b, NULL, NULL);
        s->rules = mcp__arr(&s->b, s->root, "rules");
        s->next = s->summary->child;
    } else {
        cJSON *det = NULL;
        if (ans->status < 400) {
            det = mcp__answer_json(c, ans, cJSON_Object);
            if (det == NULL) {
                return MCP_STEP_ERROR;
            }
        }
        rules_add(s, s->next, det);
        cJSON_Delete(det);
        s->next = s->next->next;
    }
    if (s->next != NULL && s->asked < RULES_MAX) {
        return rules_ask(c, s);
    }
    int omitted = 0;
    for (; s->next != NULL; s->next = s->next->next) {
        rules_add(s, s->next, NULL); /* past RULES_MAX: the summary alone */
        omitted++;
    }
    rules_say(&s->b, s->rules, omitted);
    cJSON *root = s->root;
    s->root = NULL;
    return mcp__finish(&s->b, root);
}

const struct mcp_tool mcp__tool_collection_rules = {
    .name = "collection_rules",
    .title = "Collection rules",
    .description =
        "The collection rules configured in dotmon that apply to a process (dotnet-monitor's "
        "CollectionRules: a trigger such as high CPU, a GC pause or an exception count, and "
        "actions such as a dump or a trace): each rule's state (Running, ActionExecuting, "
        "Throttled, Finished) and why, how often it fired (lifetime and in its sliding window) "
        "and its action limits. Costs the app nothing. No side effects.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS "},\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"rules\":{\"type\":\"array\",\"items\":{\"type\":"
        "\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"state\":{\"type\":"
        "\"string\"},\"stateReason\":{\"type\":\"string\"},\"lifetimeOccurrences\":{\"type\":"
        "\"integer\"},\"slidingWindowOccurrences\":{\"type\":\"integer\"},\"actionCountLimit\":{"
        "\"type\":\"integer\"},\"actionCountSlidingWindowDurationLimit\":{\"type\":[\"string\","
        "\"null\"]},\"slidingWindowDurationCountdown\":{\"type\":[\"string\",\"null\"]},"
        "\"ruleFinishedCountdown\":{\"type\":[\"string\",\"null\"]}},\"required\":[\"name\","
        "\"state\",\"stateReason\"]}}},\"required\":[\"rules\"]}",
    .hints = {.read_only = true, .idempotent = true},
    .step = collection_rules_step,
    .fini = rules_fini,
};

/* ---- dump (opt-in) ---- */

static const char *const dump_types[] = {"Mini", "Triage", "WithHeap", "Full"};
#define DUMP_TYPE_DEF 2 /* WithHeap, the route's default */

struct dump_state {
    char tag[48]; /* the operation's tag: how step 2 finds it */
    int type;
    const char *egress;
};

static void dump_fini(struct mcp_tool_ctx *c)
{
    free(c->state);
    c->state = NULL;
}

/* A tag no other operation has: the wall clock in nanoseconds and the memo's counter. */
static void dump_tag(struct mcp_tool_ctx *c, char *out, size_t cap)
{
    struct timespec ts = {0};
    (void)clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t seq = c->memo != NULL ? ++c->memo->seq : 0;
    uint64_t mix = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ (seq << 48);
    int w = snprintf(out, cap, "mcp-dump-%016llx", (unsigned long long)mix);
    if (w < 0 || (size_t)w >= cap) {
        out[0] = '\0';
    }
}

static enum mcp_step dump_first(struct mcp_tool_ctx *c)
{
    static const char *const names[] = {MCP__SEL_NAMES, "type", "egressProvider", NULL};
    struct dump_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return mcp__oom(c);
    }
    c->state = s;
    struct mcp__sel sel;
    if (mcp__args_check(c, names) != 0 || mcp__sel_read(c, &sel) != 0 ||
        mcp__arg_choice(c, "type", dump_types, 4, DUMP_TYPE_DEF, &s->type) != 0 ||
        mcp__arg_str(c, "egressProvider", 256, true, &s->egress) != 0) {
        return MCP_STEP_ERROR;
    }
    dump_tag(c, s->tag, sizeof(s->tag));
    int rc = mcp__fetch_begin(c, "GET", "/dump");
    rc = rc ? rc : mcp__q_sel(&c->fetch.target, &sel);
    rc = rc ? rc : mcp__q(&c->fetch.target, "type", dump_types[s->type]);
    rc = rc ? rc : mcp__q(&c->fetch.target, "egressProvider", s->egress);
    rc = rc ? rc : mcp__q(&c->fetch.target, "tags", s->tag);
    c->fetch.max_bytes = 64 * 1024; /* a 202 has no body; never take a dump's bytes */
    return rc ? mcp__oom(c) : MCP_STEP_FETCH;
}

static enum mcp_step dump_report(struct mcp_tool_ctx *c, struct dump_state *s, const cJSON *op)
{
    struct mcp__b b = {.c = c};
    cJSON *root = mcp__obj(&b, NULL, NULL);
    const char *id = mcp__jstr(op, "operationId");
    const char *status = mcp__jstr(op, "status");
    mcp__str(&b, root, "operationId", id);
    mcp__str(&b, root, "status", status ? status : "Unknown");
    mcp__str(&b, root, "type", dump_types[s->type]);
    mcp__str(&b, root, "egressProvider", s->egress);
    mcp__str(&b, root, "tag", s->tag);
    if (id != NULL) {
        struct buf loc;
        buf_init(&loc, 0);
        b.oom = b.oom || buf_printf(&loc, "/operations/%s", id) != 0;
        mcp__str(&b, root, "operation", buf_cstr(&loc));
        buf_fini(&loc);
    } else {
        mcp__null(&b, root, "operation");
    }
    const cJSON *proc = cJSON_GetObjectItemCaseSensitive(op, "process");
    if (cJSON_IsObject(proc)) {
        mcp__dup(&b, root, "process", proc);
    }
    const cJSON *err = cJSON_GetObjectItemCaseSensitive(op, "error");
    if (cJSON_IsObject(err)) {
        mcp__dup(&b, root, "error", err);
    }
    mcp__say(&b, "A %s dump was accepted for egress provider '%s'", dump_types[s->type], s->egress);
    if (id != NULL) {
        mcp__say(&b,
                 ": operation %s, now %s. Follow it with GET /operations/%s on dotmon's API "
                 "(201 and resourceLocation once the file is stored; GET /operations/%s/details "
                 "gives its size).",
                 id, status ? status : "Unknown", id, id);
    } else {
        mcp__say(&b, ". Its operation was not found yet: GET /operations?tags=%s lists it.",
                 s->tag);
    }
    return mcp__finish(&b, root);
}

static enum mcp_step dump_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    if (ans == NULL) {
        return dump_first(c);
    }
    struct dump_state *s = c->state;
    if (c->step == 1) {
        if (ans->status != 202) {
            return mcp__fail(c,
                             "GET /dump answered HTTP %d, not 202: the dump was not handed to "
                             "egress provider '%s'",
                             ans->status, s->egress);
        }
        int rc = mcp__fetch_begin(c, "GET", "/operations");
        rc = rc ? rc : mcp__q(&c->fetch.target, "tags", s->tag);
        return rc ? mcp__oom(c) : MCP_STEP_FETCH;
    }
    cJSON *ops = mcp__answer_json(c, ans, cJSON_Array);
    if (ops == NULL) {
        return MCP_STEP_ERROR;
    }
    enum mcp_step r = dump_report(c, s, cJSON_GetArrayItem(ops, 0));
    cJSON_Delete(ops);
    return r;
}

const struct mcp_tool mcp__tool_dump = {
    .name = "dump",
    .title = "Core dump to an egress store",
    .description =
        "Writes a core dump of the process (type Mini, Triage, WithHeap (the default) or Full) to "
        "one of dotmon's egress stores (egressProvider: a FileSystem or S3 provider of its Egress "
        "settings) and answers the operation that tracks it, and how to follow it. Side effects: "
        "the runtime's createdump suspends the whole app while it writes (seconds; longer for "
        "WithHeap and Full on a big heap), and it writes a file as large as the process's memory "
        "(Full, WithHeap) to the store. Off unless Mcp:Tools:dump:Enabled is true.",
    .input_schema =
        "{\"type\":\"object\",\"properties\":{" MCP__SEL_PROPS
        ",\"type\":{\"type\":\"string\",\"enum\":[\"Mini\",\"Triage\",\"WithHeap\",\"Full\"],"
        "\"default\":\"WithHeap\",\"description\":\"Mini: stacks and modules; Triage: Mini "
        "without personal data; WithHeap: with the GC heap (what dotnet-dump analyze needs for "
        "objects); Full: all memory.\"},\"egressProvider\":{\"type\":\"string\",\"minLength\":1,"
        "\"maxLength\":256,\"description\":\"The egress provider that stores the file (a name "
        "under dotmon's Egress settings).\"}},\"required\":[\"egressProvider\"],"
        "\"additionalProperties\":false}",
    .output_schema =
        "{\"type\":\"object\",\"properties\":{\"operationId\":{\"type\":[\"string\",\"null\"]},"
        "\"status\":{\"type\":\"string\"},\"type\":{\"type\":\"string\"},\"egressProvider\":{"
        "\"type\":\"string\"},\"tag\":{\"type\":\"string\"},\"operation\":{\"type\":[\"string\","
        "\"null\"]},\"process\":{\"type\":\"object\"},\"error\":{\"type\":\"object\"}},"
        "\"required\":[\"operationId\",\"status\",\"type\",\"egressProvider\",\"operation\"]}",
    .hints = {.read_only = false, .destructive = false, .idempotent = false},
    .opt_in = true,
    .step = dump_step,
    .fini = dump_fini,
};
