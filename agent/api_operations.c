/* SPDX-License-Identifier: MIT */
/* /operations, /operations/{id}: dotnet-monitor's operations API over the registry. */
#include "api.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "http_query.h"
#include "operations.h"

void api_operations_list(struct agent *a, struct http_request *req)
{
    const char *q = http_request_query(req);
    struct buf pid_s, uid_s, name_s, tags;
    buf_init(&pid_s, 64);
    buf_init(&uid_s, 128);
    buf_init(&name_s, 1024);
    buf_init(&tags, 4096);
    int hp = http_query_get(q, "pid", &pid_s);
    int hu = http_query_get(q, "uid", &uid_s);
    int hn = http_query_get(q, "name", &name_s);
    int ht = http_query_get(q, "tags", &tags);
    if (hp < 0 || hu < 0 || hn < 0 || ht < 0) {
        api_problem(req, 400, "malformed query string");
        goto out;
    }
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr != NULL && i < a->ops.n; i++) {
        const struct operation *op = a->ops.v[i];
        char pid[24];
        snprintf(pid, sizeof(pid), "%llu", (unsigned long long)op->pid);
        if ((hp == 1 && strcmp(buf_cstr(&pid_s), pid) != 0) ||
            (hu == 1 && strcasecmp(buf_cstr(&uid_s), op->uid) != 0) ||
            (hn == 1 && (op->name == NULL || strcasecmp(buf_cstr(&name_s), op->name) != 0)) ||
            (ht == 1 && !op_has_tags(op, buf_cstr(&tags)))) {
            continue;
        }
        cJSON *o = op_to_json(op, OP_JSON_SUMMARY);
        if (o != NULL) {
            cJSON_AddItemToArray(arr, o);
        }
    }
    api_json(req, 200, arr);
out:
    buf_fini(&pid_s);
    buf_fini(&uid_s);
    buf_fini(&name_s);
    buf_fini(&tags);
}

/* The operation with this id, or NULL after answering dotnet-monitor's 400. */
static struct operation *find_op(struct agent *a, struct http_request *req, const char *id)
{
    struct operation *op = op_registry_find(&a->ops, id);
    if (op == NULL) {
        api_problem_as_dm(req, 400, API_DM_OPERATION_NOT_FOUND,
                          "no operation '%s' (finished operations are kept for the last %zu)", id,
                          a->ops.max_history);
    }
    return op;
}

/* GET /operations/{id}: dotnet-monitor's OperationStatus, 201 once the operation succeeded (as
 * dotnet-monitor answers), else 200. */
void api_operation_get(struct agent *a, struct http_request *req, const char *id)
{
    const struct operation *op = find_op(a, req, id);
    if (op != NULL) {
        api_json(req, op->state == OP_SUCCEEDED ? 201 : 200, op_to_json(op, OP_JSON_STATUS));
    }
}

/* GET /operations/{id}/details: the status plus dotmon's extras (artifact name, trace or dump
 * results); always 200. */
void api_operation_details(struct agent *a, struct http_request *req, const char *id)
{
    const struct operation *op = find_op(a, req, id);
    if (op != NULL) {
        api_json(req, 200, op_to_json(op, OP_JSON_DETAILS));
    }
}

void api_operation_delete(struct agent *a, struct http_request *req, const char *id)
{
    struct operation *op = find_op(a, req, id);
    bool graceful = false;
    if (op == NULL || api_query_bool(req, "stop", &graceful) != 0) {
        return;
    }
    if (op_is_finished(op)) {
        api_problem_as_dm(req, 400, API_DM_OPERATION_NOT_RUNNING,
                          "operation %s has already finished (%s)", op->id,
                          op_state_name(op->state));
        return;
    }
    if (graceful) {
        if (!op->stoppable || op->control.stop == NULL) {
            api_problem(req, 400, "operation %s cannot be stopped gracefully", op->id);
            return;
        }
        op->control.stop(op->ctx);
        http_respond(req, 202, NULL, NULL, 0, NULL, 0);
        return;
    }
    if (op->control.cancel == NULL) {
        api_problem(req, 400, "operation %s cannot be cancelled", op->id);
        return;
    }
    op->control.cancel(op->ctx); /* may finish (and prune) op: do not touch it afterwards */
    http_respond(req, 200, NULL, NULL, 0, NULL, 0);
}
