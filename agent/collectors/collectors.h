/* SPDX-License-Identifier: MIT */
#ifndef AGENT_COLLECTORS_H
#define AGENT_COLLECTORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent.h"

/*
 * The collectors: what starts a collection, for an HTTP route (o->req: the route has parsed the
 * query and hands over the request) and for a collection rule's action (o->req NULL, artifact.h:
 * egress to o->provider, o->on_settled told of the end) alike. Each runs its job on the
 * collection-job core (collect/job.h). 0 once the operation exists (it may have failed already:
 * on_settled says so, possibly before this returns), or -1 when refused: for a request answered
 * with a problem, otherwise with the reason in o->why.
 *
 * The collectors live in collect_trace.c, collect_dump.c, collect_gcdump.c, collect_logs.c and
 * collect_livemetrics.c, their routes in api_collect.c. Callers other than the routes
 * (rules_run.c) include only this header.
 */

struct artifact_origin;
struct artifact_spec;
struct ev_filter;
struct ipc_process;
struct trace_config;

/*
 * tc is taken (the same configuration as POST /trace's body or GET /trace's profile). ndjson:
 * the events as JSON lines (format=ndjson, dotmon's own) instead of the nettrace bytes. stop_on
 * (CollectTrace's StoppingEvent; NULL for none) is taken too, refused or not: the trace is
 * stopped gracefully (as by the duration) once an event matches it (events/ev_filter.h).
 */
int collect_trace(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                  struct trace_config *tc, int64_t duration_s, bool ndjson,
                  struct ev_filter *stop_on);
/* What a trace is to artifact admission (GET /trace/snapshot writes one of the same kind). */
extern const struct artifact_spec collect_trace_spec;
/*
 * Ring mode of CollectTrace (docs/collection-rules.md, "Pre-trigger ring buffer"): a continuous
 * session with tc (taken) whose stream is kept in an events/ev_ring.h ring of lim. 0 with *out, or
 * an error (no session left). on_end(ud, status, reason) says that the session ended before any
 * trigger (the runtime went away, refused it, or the ring failed): the job is then gone. Not called
 * after collect_trace_ring_stop or a successful collect_trace_ring_trigger.
 */
struct trace_job;
struct ev_ring;
struct ev_ring_limits;
typedef void (*collect_trace_ring_end_cb)(void *ud, int status, const char *reason);
int collect_trace_ring_start(struct agent *a, const struct ipc_process *p, struct trace_config *tc,
                             const struct ev_ring_limits *lim, collect_trace_ring_end_cb on_end,
                             void *ud, struct trace_job **out);
/* Stops an untriggered ring (StopTracing in the background) and frees it. NULL is fine. */
void collect_trace_ring_stop(struct trace_job *job);
/*
 * The trigger: an artifact as collect_trace's (o) gets the ring's content, then the live
 * stream for post_s seconds, then StopTracing's rundown and the end tag. 0: the job belongs to
 * the operation from now on (the caller forgets it; o's on_settled reports the end). Otherwise
 * the job is unchanged (AGENT_E_NOTFOUND: its session has not started yet; or refused, said in
 * o->why).
 */
int collect_trace_ring_trigger(struct trace_job *job, const struct artifact_origin *o,
                               const struct ipc_process *p, int64_t post_s);
/* The ring's content now as a whole nettrace (ev_ring_snapshot). */
int collect_trace_ring_snapshot(struct trace_job *job,
                                int (*write)(void *ud, const uint8_t *p, size_t n), void *ud);
/* The ring itself (its stats), or NULL. */
const struct ev_ring *collect_trace_ring_get(const struct trace_job *job);
/* body[0..len): POST /logs's LogsConfiguration; format 0 PlainText, 1 NewlineDelimitedJson,
 * 2 JsonSequence. */
int collect_logs(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                 const char *body, size_t len, int64_t duration_s, int format);
/* GET /logs: level NULL takes the app's own filters (UseAppFilters), else the records at level
 * (Trace … None, case-insensitive; another is refused, 400) and above. */
int collect_logs_level(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p, const char *level, int64_t duration_s,
                       int format);
/* The live metrics that f names (GET /livemetrics: the Metrics settings); f is taken. */
struct metrics_filters;
int collect_livemetrics_filters(struct agent *a, const struct artifact_origin *o,
                                const struct ipc_process *p, struct metrics_filters *f,
                                int64_t duration_s);
/* body: POST /livemetrics's EventMetricsConfiguration. */
int collect_livemetrics(struct agent *a, const struct artifact_origin *o,
                        const struct ipc_process *p, const char *body, int64_t duration_s);
/* type: Mini, Triage, WithHeap or Full, case-insensitive (NULL: WithHeap); another is refused
 * (400). */
int collect_dump(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                 const char *type);
/* A GC heap snapshot (CollectGCDump): the .gcdump file, or with summary_top > 0 (1..
 * EV_GCHEAP_TOP_MAX) the heap summed per type, its summary_top biggest types, as JSON
 * (GET /gcdump?format=summary). 0 once its operation exists, -1 when refused. */
int collect_gcdump(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                   size_t summary_top);
/* Every thread's call stack (GET /stacks, CollectStacks; agent/api_profile.c): format Json (NULL),
 * PlainText or Speedscope, case-insensitive; 0 once its operation exists, -1 when refused. */
int collect_stacks(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                   const char *format);
/* The process's exceptions history (GET/POST /exceptions, CollectExceptions;
 * agent/api_profile.c): format PlainText (NULL), NewlineDelimitedJson or JsonSequence,
 * case-insensitive; filters (taken, NULL: none) apply after the history's own. The caller checks
 * that the history is kept (a->exceptions). 0 once its operation exists, -1 when refused. */
struct ev_exc_filters;
int collect_exceptions(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p, const char *format,
                       struct ev_exc_filters *filters);

#endif
