/* SPDX-License-Identifier: MIT */
/* GET /collectionrules and /collectionrules/{name} (dotnet-monitor's shapes, rules_describe*). */
#include "api.h"

#include <cJSON.h>

#include "agent.h"
#include "err.h"
#include "rules_run.h"

static void answer(struct agent *a, struct http_request *req, const char *name)
{
    const struct ipc_process *p = api_select_process(a, req);
    if (p == NULL) {
        return;
    }
    cJSON *o = NULL;
    int rc = rules_run_describe(a->rules, p->uid, name, &o);
    if (rc == AGENT_E_NOTFOUND) {
        api_problem(req, 400, "The collection rule '%s' is not applied to process %llu.",
                    name != NULL ? name : "", (unsigned long long)p->pid);
    } else if (rc != 0) {
        api_problem(req, 500, "%s", agent_strerror(rc));
    } else {
        api_json(req, 200, o);
    }
}

void api_collectionrules(struct agent *a, struct http_request *req)
{
    answer(a, req, NULL);
}

void api_collectionrule(struct agent *a, struct http_request *req, const char *name)
{
    answer(a, req, name);
}
