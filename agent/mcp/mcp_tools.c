/* SPDX-License-Identifier: MIT */
/*
 * The MCP endpoint's tools (mcp_tools.h). A first table with one tool, list_processes, so that
 * the transport (mcp.c) runs end to end; the full set (docs/mcp.md, "Tools") replaces this file.
 */
#include "mcp_tools.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct mcp_memo {
    size_t bytes; /* nothing is remembered yet */
};

int mcp_memo_new(struct mcp_memo **out)
{
    struct mcp_memo *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return -ENOMEM;
    }
    *out = m;
    return 0;
}

void mcp_memo_free(struct mcp_memo *m)
{
    free(m);
}

size_t mcp_memo_bytes(const struct mcp_memo *m)
{
    return m != NULL ? m->bytes : 0;
}

/* ---- list_processes: GET /processes ---- */

static const char list_in[] =
    "{\"type\":\"object\",\"properties\":{},\"additionalProperties\":false}";

static const char list_out[] =
    "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":"
    "{\"type\":\"object\",\"properties\":{\"pid\":{\"type\":\"integer\"},\"uid\":{\"type\":"
    "\"string\"},\"name\":{\"type\":\"string\"},\"isDefault\":{\"type\":\"boolean\"}},"
    "\"required\":[\"pid\",\"uid\",\"name\",\"isDefault\"]}}},\"required\":[\"processes\"]}";

static enum mcp_step list_error(struct mcp_tool_ctx *c, const char *text)
{
    buf_reset(&c->text);
    buf_append_str(&c->text, text);
    return MCP_STEP_ERROR;
}

/* The text an agent reads: one line per process, the default one marked. */
static int list_render(struct buf *text, const cJSON *arr)
{
    int n = cJSON_GetArraySize(arr);
    int rc = buf_printf(text, "%d .NET process%s", n, n == 1 ? "" : "es");
    const cJSON *p;
    cJSON_ArrayForEach(p, arr)
    {
        const cJSON *pid = cJSON_GetObjectItemCaseSensitive(p, "pid");
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(p, "name");
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(p, "uid");
        bool def = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(p, "isDefault"));
        rc = rc ? rc
                : buf_printf(text, "\npid %.0f %s (uid %s)%s",
                             cJSON_IsNumber(pid) ? pid->valuedouble : 0.0,
                             cJSON_IsString(name) ? name->valuestring : "?",
                             cJSON_IsString(uid) ? uid->valuestring : "?",
                             def ? ", the default process" : "");
    }
    return rc;
}

static enum mcp_step list_step(struct mcp_tool_ctx *c, const struct mcp_answer *ans)
{
    if (ans == NULL) {
        if (cJSON_GetArraySize(c->args) != 0) {
            return list_error(c, "list_processes takes no arguments");
        }
        snprintf(c->fetch.accept, sizeof(c->fetch.accept), "application/json");
        buf_append_str(&c->fetch.target, "/processes");
        return MCP_STEP_FETCH;
    }
    cJSON *arr = ans->complete ? cJSON_ParseWithLength(ans->body, ans->len) : NULL;
    if (!cJSON_IsArray(arr)) {
        cJSON_Delete(arr);
        return list_error(c, "GET /processes did not answer a JSON array");
    }
    cJSON *o = cJSON_CreateObject();
    if (o == NULL || !cJSON_AddItemToObject(o, "processes", arr)) {
        cJSON_Delete(o);
        cJSON_Delete(arr);
        return list_error(c, "out of memory");
    }
    buf_reset(&c->text);
    if (list_render(&c->text, arr) != 0) {
        cJSON_Delete(o);
        return list_error(c, "out of memory");
    }
    c->structured = o;
    return MCP_STEP_DONE;
}

static const struct mcp_tool tools[] = {
    {
        .name = "list_processes",
        .title = "List .NET processes",
        .description = "The .NET processes dotmon sees (pid, runtime uid, name) and which one is "
                       "the default process that tools use when no pid, uid or name is given. "
                       "Costs nothing: dotmon keeps the list as the processes come and go.",
        .input_schema = list_in,
        .output_schema = list_out,
        .hints = {.read_only = true, .destructive = false, .idempotent = true},
        .opt_in = false,
        .step = list_step,
    },
};

const struct mcp_tool *mcp_tools(size_t *n)
{
    *n = sizeof(tools) / sizeof(tools[0]);
    return tools;
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(tools) / sizeof(tools[0]); i++) {
        if (strcmp(tools[i].name, name) == 0) {
            return &tools[i];
        }
    }
    return NULL;
}
