/* SPDX-License-Identifier: MIT */
#ifndef AGENT_API_H
#define AGENT_API_H

#include <stdbool.h>

#include <cJSON.h>

#include "agent.h"
#include "http_server.h"
#include "ipc_discovery.h"

/*
 * REST handlers (dotnet-monitor's routes and JSON shapes, docs/api.md). api.c holds the
 * dispatcher, authentication and shared helpers; api_<area>.c hold the routes.
 */

/* The http_handler_cb given to the server; ud is the struct agent. */
void api_handle(void *ud, struct http_request *req);

/* Answers an RFC 7807 problem; detail is printf-style. */
void api_problem(struct http_request *req, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Answers an RFC 7807 problem whose detail is dotnet-monitor's own message for the case (scripts
 * compare it), with dotmon's specifics in the extension member "reason" (printf-style).
 */
void api_problem_as_dm(struct http_request *req, int status, const char *dm_detail, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

struct mb_share;
/*
 * The detail of a request refused by dotmon's memory budget (common/membudget.h): "<what> does
 * not fit in dotmon's memory budget (<share cap or total> MiB ...); raise Memory:LimitMB (or the
 * container's memory limit)". share may be NULL (the total only). Writes at most cap bytes to
 * msg, NUL-terminated; returns msg. For answers that go through an artifact (artifact_end_fail
 * with 507 and code API_BUDGET_CODE).
 */
const char *api_budget_detail(char *msg, size_t cap, const char *what,
                              const struct mb_share *share);
#define API_BUDGET_CODE    "MemoryBudgetExceeded"
#define API_BUDGET_SETTING "Memory:LimitMB"
/* Answers 507 problem+json with api_budget_detail's text and "setting":"Memory:LimitMB". */
void api_send_budget_507(struct http_request *req, const char *what, const struct mb_share *share);

/* dotnet-monitor's messages (its WebApi Strings), kept word for word. */
#define API_DM_NO_PROCESS "Unable to discover a target process."
#define API_DM_MANY_PROCESSES                                                                      \
    "Unable to select a single target process because multiple target processes have been "        \
    "discovered."
#define API_DM_OPERATION_NOT_FOUND   "Operation not found."
#define API_DM_OPERATION_NOT_RUNNING "Operation is not running."
#define API_DM_METRICS_DISABLED      "Metrics was not enabled."
#define API_DM_PARAMETERS_DISABLED   "The 'Parameter Capturing' feature is not enabled."
#define API_DM_EXCEPTIONS_DISABLED   "The 'Exceptions' feature is not enabled."
/* /info's runtimeVersion: the newest .NET runtime dotmon is tested against (docs/deviations.md
 * §4.6). */
#define API_DOTNET_VERSION "10.0.0"

/*
 * A true/false query parameter (any case): *out is set when present, left alone when absent.
 * Anything else is answered with a 400 and AGENT_E_INVAL returned.
 */
int api_query_bool(struct http_request *req, const char *name, bool *out);
/*
 * An integer query parameter in [lo, hi] into *out (def when absent: a def outside the range
 * tells an absent parameter from a given one). Anything else is answered with a 400 naming the
 * parameter and its range, and AGENT_E_INVAL returned.
 */
int api_query_int(struct http_request *req, const char *name, long lo, long hi, long def,
                  long *out);
/*
 * durationSeconds (default 30; -1 = until stopped; up to 2147483647), as dotnet-monitor's
 * artifact routes take it. On a bad value answers 400 and returns AGENT_E_INVAL.
 */
int api_parse_duration(struct http_request *req, int64_t *out);

/* Answers 200 with the JSON value (which this call deletes). */
void api_json(struct http_request *req, int status, cJSON *json);

/*
 * Process selection shared by every process route: pid, uid or name, and dotmon's pod, namespace
 * and container (name, or id: whole or 12+ leading digits), from the query (all given ones must
 * match the same process), else the default process. On failure answers the request
 * (400, as dotnet-monitor: malformed, ambiguous or none) and returns NULL. The result is a cache
 * view: copy what you need before going asynchronous.
 */
const struct ipc_process *api_select_process(struct agent *a, struct http_request *req);

/* True if p is the default process (configured filters, or the only process). */
bool api_is_default(struct agent *a, const struct ipc_process *p);

/* Routes. */
void api_processes(struct agent *a, struct http_request *req);
void api_process(struct agent *a, struct http_request *req);
void api_env(struct agent *a, struct http_request *req);
void api_info(struct agent *a, struct http_request *req);
void api_healthz(struct agent *a, struct http_request *req);
void api_readyz(struct agent *a, struct http_request *req);
void api_metrics(struct agent *a, struct http_request *req);
/* GET /metrics/dotmon: dotmon's own families only (authenticated; whether or not Metrics:Enabled).
 */
void api_metrics_dotmon(struct agent *a, struct http_request *req);
void api_trace_get(struct agent *a, struct http_request *req);
void api_trace_post(struct agent *a, struct http_request *req);
/* GET /trace/snapshot?pid=|uid=|name=[&rule=]: a collection rule's ring now, as a nettrace. */
void api_trace_snapshot(struct agent *a, struct http_request *req);
/* GET /profile?pid=|uid=|name=&kind=cpu|alloc|exceptions|contention|gc&durationSeconds=&top=
 * &format= (api_profile.c): a session of the kind, answered with its summary (JSON or text/plain;
 * for cpu also speedscope): where the time went, what was allocated, thrown, waited on, collected.
 */
void api_profile_get(struct agent *a, struct http_request *req);
/*
 * The media type an Accept header picks among types[0..n) ("type/subtype"), in dotnet-monitor's
 * order: the types named exactly first (in types' order), then the ranges that cover them (any
 * type, or any subtype of the type's own); parameters are not compared. Its index, 0 for a
 * missing or empty Accept, -1 for none.
 */
int api_accept_pick(const char *accept, const char *const *types, size_t n);
/* GET /stacks?pid|uid|name&egressProvider&tags[&format=text|json|speedscope]: every managed
 * thread's call stack now (api_profile.c: one round of SampleProfiler samples, named by the
 * rundown; docs/routes.md, call stacks). */
void api_stacks_get(struct agent *a, struct http_request *req);
/* GET /exceptions and POST /exceptions (an ExceptionsConfiguration body of filters): the
 * process's first-chance exceptions history (api_profile.c; agent/monitor/exceptions.h). */
void api_exceptions_get(struct agent *a, struct http_request *req);
void api_exceptions_post(struct agent *a, struct http_request *req);
/* GET /ui and /ui/{file} (api_ui.c): the browser page, served without authentication (its data
 * requests carry the token; see api_ui.c for why). */
void api_ui_get(struct agent *a, struct http_request *req);
void api_ui_file(struct agent *a, struct http_request *req, const char *name);
void api_operations_list(struct agent *a, struct http_request *req);
void api_operation_get(struct agent *a, struct http_request *req, const char *id);
void api_operation_details(struct agent *a, struct http_request *req, const char *id);
void api_operation_delete(struct agent *a, struct http_request *req, const char *id);

void api_dump_get(struct agent *a, struct http_request *req);
/*
 * Why a session ended before it started (ipc_session's on_end status, hresult), for the answer:
 * the words into msg[0..cap) ("the runtime refused the <noun> session: …"), the operation's error
 * code, and the HTTP status (400 refused, 504 no answer in time, 502 unreachable).
 */
int api_session_refused(int status, uint32_t hresult, const char *noun, char *msg, size_t cap,
                        const char **code);
/* GET /gcdump?pid=|uid=|name=&egressProvider=&tags= (api_collect.c). */
void api_gcdump_get(struct agent *a, struct http_request *req);

/* GET /collectionrules?pid=|uid=|name= and /collectionrules/{name} (api_rules.c). */
void api_collectionrules(struct agent *a, struct http_request *req);
void api_collectionrule(struct agent *a, struct http_request *req, const char *name);

/* /livemetrics (api_collect.c). */
void api_livemetrics_get(struct agent *a, struct http_request *req);
void api_livemetrics_post(struct agent *a, struct http_request *req);
/* /logs (api_collect.c). */
void api_logs_get(struct agent *a, struct http_request *req);
void api_logs_post(struct agent *a, struct http_request *req);

#endif
