/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TRIGGER_SESSION_H
#define AGENT_TRIGGER_SESSION_H

/*
 * The EventPipe session of a trigger fed by decoded events, the one rules_trigger_session
 * describes, its nettrace stream read with events/nettrace:
 *   - an ASP.NET trigger (docs/rules.md §4): Microsoft-Diagnostics-DiagnosticSource with the HTTP
 *     FilterAndPayloadSpecs, plus the Microsoft.AspNetCore.Hosting counters for
 *     AspNetRequestDuration; metadata → ev_schema, events → ev_record → rules_request_event. Events
 *     of any other provider reach the caller as heartbeats;
 *   - a runtime trigger (GCPause, GCCount, ExceptionCount): Microsoft-Windows-DotNETRuntime with
 *     the GC or Exception keyword; events → events/ev_native → rules_runtime_event, stamped with
 *     their own time in 100 ns ticks. A RULES_RUNTIME_SESSION_START event comes first.
 * Triggers on counters and meters use a metrics session instead (metrics_session.h). The session
 * itself is a decoded session (dsession.h) whose consumer is the nettrace reader here.
 * libuv glue.
 */

#include "ipc_client.h"
#include "rules.h"

struct agent;
struct tsession;

struct tsession_callbacks {
    void (*on_started)(void *ud);
    /* ASP.NET triggers: a request start or stop, or a heartbeat; ev is valid during the call
     * only. */
    void (*on_event)(void *ud, const struct rules_request_event *ev);
    /* Runtime triggers: a runtime event; ev is valid during the call only. */
    void (*on_runtime)(void *ud, const struct rules_runtime_event *ev);
    /* Last call; the session is freed right after. status as ipc_session's on_end, or
     * AGENT_E_PROTO when the stream could not be read; reason says it in words. */
    void (*on_end)(void *ud, int status, const char *reason);
};

/*
 * Starts the session of ASP.NET or runtime trigger t (which must outlive it) on a runtime of
 * .NET major (0 = unknown); counter_interval_s is the Hosting counters' interval
 * (rules_trigger_interval_provider). 0 (callbacks follow) or a negative code (none follow).
 * An ASP.NET trigger's DiagnosticSource session is subject to the one-spec-set rule
 * (collect/dsession.h).
 */
int tsession_start(struct agent *a, const struct ipc_endpoint *ep, int major,
                   const struct rules_trigger *t, double counter_interval_s,
                   const struct tsession_callbacks *cb, void *ud, struct tsession **out);
/* Graceful stop: StopTracing, the rest of the stream, then on_end. Idempotent. */
void tsession_stop(struct tsession *s);
/* No more callbacks; the runtime's session is stopped in the background. */
void tsession_abort(struct tsession *s);

#endif
