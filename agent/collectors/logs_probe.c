/* SPDX-License-Identifier: MIT */
/*
 * The loader-rundown probe behind /logs; see logs_probe.h.
 *
 * One decoded session (dsession.h) does all the work, its consumer the module list of
 * events/ev_modules: started with keep_rundown (a runtime without CollectTracing4 answers
 * UNKNOWN_COMMAND instead of a session without rundown), stopped at once (the StopTracing goes
 * out as soon as the session id is known, on a connection of its own), with the start timeout
 * and the stop timeout both set to the probe's budget, so its one timer bounds the whole probe. The
 * runtime runs the rundown on its server thread when it handles the StopTracing, writes the module
 * events into the stream and closes it: finish is the end of the list. Every other end (a refusal,
 * a timeout, a reset, an unreadable stream) is "cannot tell". The session's own cleanup makes sure
 * nothing is left in the runtime (ipc_session.h), also after logs_probe_abort; the probe object
 * itself owns no loop handle, so it is freed at once.
 */
#include "logs_probe.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include <uv.h>

#include "agent.h"
#include "dsession.h"
#include "err.h"
#include "ev_modules.h"
#include "log.h"

static const char cat[] = "dotmon.logs";

#define RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define FILE_EVENTSOURCE "Microsoft.Extensions.Logging.EventSource.dll"
#define FILE_LOGGING     "Microsoft.Extensions.Logging.dll"
/* Rundown keywords (docs/profiles.md §3): the modules, and the DCEnd events at stop. */
#define RUNDOWN_LOADER 0x8ull
#define RUNDOWN_END    0x100ull
/* The rundown of a big app is a few MB; a drop would make the probe inconclusive. */
#define PROBE_BUFFER_MB 16

struct logs_probe {
    struct agent *a;
    struct dsession *ds; /* NULL once it ended or was aborted */
    struct ev_modules *modules;
    logs_probe_cb cb;
    void *ud;
    uint64_t started_ms;
    int version;
};

static const char *const watched[] = {FILE_EVENTSOURCE, FILE_LOGGING};

static void probe_free(struct logs_probe *p)
{
    ev_modules_free(p->modules);
    free(p);
}

/* Delivers the result and frees the probe. */
static void probe_done(struct logs_probe *p, enum logs_probe_verdict v, const char *reason)
{
    struct ev_modules_stats st;
    ev_modules_get_stats(p->modules, &st);
    struct logs_probe_result r = {.verdict = v,
                                  .reason = v == LOGS_PROBE_UNKNOWN ? reason : NULL,
                                  .modules = st.modules,
                                  .elapsed_ms = uv_now(p->a->loop) - p->started_ms,
                                  .version = p->version};
    p->cb(p->ud, &r);
    probe_free(p);
}

/* ---- the consumer of the decoded session: ev_modules ---- */

static void probe_started(void *ctx, uint64_t session_id, int version)
{
    struct logs_probe *p = ctx;
    p->version = version;
    log_debug(cat, "logs probe session 0x%" PRIx64 " (CollectTracing%d) started", session_id,
              version);
}

static int probe_feed(void *ctx, const uint8_t *data, size_t n)
{
    struct logs_probe *p = ctx;
    return ev_modules_feed(p->modules, data, n);
}

static void probe_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct logs_probe *p = ctx;
    const char *why = ev_modules_error(p->modules);
    (void)rc;
    snprintf(out, cap, "%s", why != NULL ? why : "");
}

/* The rundown's module list is complete: what it says. */
static void probe_finish(void *ctx, const char *how)
{
    struct logs_probe *p = ctx;
    (void)how;
    p->ds = NULL;
    (void)ev_modules_finish(p->modules);
    const char *why = ev_modules_inconclusive(p->modules);
    if (why != NULL) {
        probe_done(p, LOGS_PROBE_UNKNOWN, why);
    } else if (ev_modules_found(p->modules, 0)) {
        probe_done(p, LOGS_PROBE_EVENTSOURCE, NULL);
    } else {
        probe_done(
            p, ev_modules_found(p->modules, 1) ? LOGS_PROBE_NO_EVENTSOURCE : LOGS_PROBE_NO_LOGGING,
            NULL);
    }
}

/* Any other end: cannot tell, in the probe's own words. */
static void probe_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct logs_probe *p = ctx;
    p->ds = NULL;
    const char *words = agent_strerror(code);
    if (code == AGENT_E_RUNTIME) {
        words = hresult == IPC_HR_UNKNOWN_COMMAND
                    ? "the runtime has no CollectTracing4 (older than .NET 9)"
                    : "the runtime refused the probe session";
    } else if (code == AGENT_E_TIMEOUT) {
        words = "the probe timed out";
    } else if (code == AGENT_E_PROTO) {
        log_debug(cat, "logs probe: %s", reason);
        words = "the probe's event stream cannot be read";
    }
    probe_done(p, LOGS_PROBE_UNKNOWN, words);
}

static const struct dsession_consumer probe_consumer = {.started = probe_started,
                                                        .feed = probe_feed,
                                                        .describe = probe_describe,
                                                        .finish = probe_finish,
                                                        .error = probe_error};

int logs_probe_start(struct agent *a, const struct ipc_endpoint *ep, uint64_t timeout_ms,
                     logs_probe_cb cb, void *ud, struct logs_probe **out)
{
    struct logs_probe *p = calloc(1, sizeof(*p));
    if (p == NULL) {
        return UV_ENOMEM;
    }
    int rc = ev_modules_new(&p->modules, watched, sizeof(watched) / sizeof(watched[0]));
    if (rc != 0) {
        free(p);
        return rc;
    }
    p->a = a;
    p->cb = cb;
    p->ud = ud;
    p->started_ms = uv_now(a->loop);
    uint64_t budget = timeout_ms > 0 ? timeout_ms : agent_timeout(a, TIMEOUT_LOGS_PROBE);
    /* Keywords 0 at Critical: of the runtime's events only keyword-less critical ones, which a
     * healthy runtime does not write (none in the probes of tests/fixtures/events). */
    struct ipc_provider prov = {.name = RUNTIME_PROVIDER, .keywords = 0, .level = 1};
    struct ipc_collect_config collect = {.buffer_mb = PROBE_BUFFER_MB,
                                         .format = 1,
                                         .rundown_keyword = RUNDOWN_LOADER | RUNDOWN_END,
                                         .disable_stackwalk = true,
                                         .providers = &prov,
                                         .provider_count = 1,
                                         .keep_rundown = true};
    struct dsession_config dc = {.collect = &collect,
                                 .admission = &a->sessions,
                                 .start_timeout_ms = budget,
                                 .stop_timeout_ms = budget,
                                 .stop_at_once = true};
    rc = dsession_start(a->loop, ep, &dc, &probe_consumer, p, &p->ds);
    if (rc != 0) {
        probe_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

void logs_probe_abort(struct logs_probe *p)
{
    if (p == NULL) {
        return;
    }
    dsession_abort(p->ds); /* accepts NULL */
    probe_free(p);
}
