/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EXCEPTIONS_H
#define AGENT_EXCEPTIONS_H

/*
 * The history of first-chance exceptions of every watched process (issue 35; GET/POST
 * /exceptions, the CollectExceptions action), out of process: one standing session per process
 * (collect/standing.h) with the runtime's Exception keyword alone at level Error, so that the
 * runtime writes one event per throw (ExceptionThrown_V1, with its stack) and nothing else;
 * each event goes into the process's history (events/ev_exc.h). The stacks' addresses are named
 * when the history is written, from a rundown taken then (api_profile.c).
 *
 * Settings, dotnet-monitor's: InProcessFeatures:Exceptions:Enabled (else
 * InProcessFeatures:Enabled; default false), :TopLevelLimit (the instances kept, default 20),
 * :CollectionFilters:Include|Exclude:N:ExceptionType|TypeName|MethodName|ModuleName (applied as
 * the history is written, before the request's own). The bytes a history keeps are bounded by
 * metrics_share_cap() (1/8 of the memory budget, at least 1 MiB), charged to a share of the
 * process's own.
 *
 * libuv glue, loop thread only.
 */

#include <stdbool.h>
#include <stdint.h>

struct agent;
struct cJSON;
struct ev_exc;
struct ipc_process;
struct exceptions;

/* Reads the settings: *out NULL (and 0) when the feature is off; AGENT_E_INVAL (a bad setting,
 * logged) or -ENOMEM. */
int exceptions_new(struct agent *a, struct exceptions **out);
/* A process was discovered (added) or is gone: its session and history start or go. x may be
 * NULL. */
void exceptions_on_process(struct exceptions *x, const struct ipc_process *p, bool added);
/* The history of the process with runtime cookie uid (borrowed: valid until the loop runs
 * again), or NULL when there is none (x NULL, the process not watched). */
struct ev_exc *exceptions_history(struct exceptions *x, const char *uid);
/* dotmon's extra /info member: [{"pid","uid","name","state","reason","kept","added","evicted",
 * "dropped","malformed","lost","bytes"}]; an empty array when x is NULL; NULL on no memory. */
struct cJSON *exceptions_status_json(struct exceptions *x);
/* Ends every session (in the background) and frees everything once their handles closed. */
void exceptions_close(struct exceptions *x);

#endif
