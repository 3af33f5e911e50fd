/* SPDX-License-Identifier: MIT */
#ifndef AGENT_LOGS_PROBE_H
#define AGENT_LOGS_PROBE_H

/*
 * Whether a runtime can give /logs anything: a short loader-rundown session run before the logs
 * session. CollectTracing4 or newer (.NET 9+) with rundown keyword Loader 0x8 | EndRundown 0x100
 * (no Jit: no per-method events), stack walks off, one provider that writes ~nothing
 * (Microsoft-Windows-DotNETRuntime, keywords 0, Critical), stopped at once; its stream (the
 * loaded modules, events/ev_modules.h) read to the end. Microsoft.Extensions.Logging.EventSource
 * loaded means the app can have the EventSource logger provider; not loaded means it has none.
 *
 * libuv glue, loop thread only. The session counts in the agent's trace admission (a->sessions)
 * like any other; every way it ends (done, timeout, the runtime gone, logs_probe_abort) leaves
 * no session in the runtime (ipc_session.h).
 */

#include <stdbool.h>
#include <stdint.h>

#include "ipc_client.h"

enum logs_probe_verdict {
    LOGS_PROBE_EVENTSOURCE = 0, /* Microsoft.Extensions.Logging.EventSource.dll is loaded */
    LOGS_PROBE_NO_EVENTSOURCE,  /* Microsoft.Extensions.Logging.dll is, the EventSource one not */
    LOGS_PROBE_NO_LOGGING,      /* neither is loaded */
    LOGS_PROBE_UNKNOWN          /* could not tell (see reason) */
};

struct logs_probe_result {
    enum logs_probe_verdict verdict;
    const char *reason; /* LOGS_PROBE_UNKNOWN: why, in words; else NULL */
    uint64_t modules;   /* module events read */
    uint64_t elapsed_ms;
    int version; /* CollectTracing version the runtime took; 0 if none */
};

/* Called once, from a loop callback; the probe is freed right after it returns. */
typedef void (*logs_probe_cb)(void *ud, const struct logs_probe_result *r);

struct agent;
struct logs_probe;

/*
 * Starts a probe of the runtime at ep (copied). timeout_ms bounds it all: connect,
 * start, StopTracing and the stream to its end (0: Timeouts:LogsProbeMs).
 * 0 and *out (cb follows), or the error of dsession_start (nothing follows).
 */
int logs_probe_start(struct agent *a, const struct ipc_endpoint *ep, uint64_t timeout_ms,
                     logs_probe_cb cb, void *ud, struct logs_probe **out);

/* No callback any more; the runtime's session is stopped in the background. Accepts NULL. Not
 * from inside cb. */
void logs_probe_abort(struct logs_probe *p);

#endif
