/* SPDX-License-Identifier: MIT */
#ifndef AGENT_ARTIFACT_H
#define AGENT_ARTIFACT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cJSON.h>

#include "agent.h"
#include "buf.h"
#include "http_server.h"
#include "job.h"
#include "operations.h"

/*
 * Where an artifact route's bytes go (/trace, /dump, /logs, /livemetrics): the HTTP response,
 * chunked, as the routes always did, or, with egressProvider=<name>, an egress target
 * (egress/egress.h) while the request itself is answered 202 Accepted with the operation's
 * Location and an empty body, as dotnet-monitor does. A route produces through one `struct
 * artifact` either way: it writes while artifact_full is false, pauses until on_ready, and ends
 * the artifact once with the outcome; the artifact answers the request and settles the operation
 * (its final state, resourceLocation, egressProviderName, the error).
 *
 * An HTTP artifact settles the operation when the route ends it. An egress artifact settles it
 * when the store has answered: Succeeded with resourceLocation once the file is renamed or the
 * object completed, Failed with the store's message, Cancelled once whatever was written is
 * removed (no temporary file, no multipart upload left). Until then the operation stays Running or
 * Stopping and counts against its kind's concurrency limit; DELETE aborts the upload. An egress
 * artifact outlives the route's job if need be: it frees itself after the store's answer.
 *
 * Everything runs on the loop. Callbacks never run from inside an artifact_* call.
 */

struct artifact;

struct artifact_events {
    /* Room again after artifact_full was true (HTTP: the queue drained to the low-water mark,
     * level-triggered; egress: the target's on_ready). May be NULL. */
    void (*on_ready)(void *ud);
    /*
     * The consumer is gone before the route ended the artifact: the HTTP client disconnected, or
     * the egress store failed (its message is kept). Writes fail from now on. The route stops
     * producing and ends the artifact with any of the artifact_end_* calls (the operation then
     * ends Cancelled for a client that left, Failed with the store's message for egress), and
     * drops its pointer. Must not be NULL.
     */
    void (*on_lost)(void *ud);
};

/* What admission needs to know of the route. */
struct artifact_spec {
    enum op_kind kind;
    const char *noun;          /* "trace": messages ("the trace operation was cancelled …") */
    const char *limit_setting; /* its concurrency setting for the 429, or NULL */
    size_t high_water;         /* HTTP: artifact_full above this many queued bytes */
    size_t low_water;          /* HTTP: on_ready at or below this many */
};

/*
 * The operation of an internal artifact has ended (settled): state, the resourceLocation (NULL
 * unless stored) and the error message (NULL unless Failed). Called once, after the operation's
 * final state is set, possibly from inside an artifact_end_* call of the route.
 */
typedef void (*artifact_settled_cb)(void *ud, enum op_state state, const char *location,
                                    const char *message);

/*
 * Where an artifact collection comes from: a route's HTTP request, or dotmon itself (a
 * collection rule's action, req NULL: an "internal" artifact). An internal artifact has no client
 * to stream to: it needs an egress provider, sends no response, and tells its end to on_settled.
 * A refusal (shutdown, the kind's limit, an unknown provider, out of memory) is an HTTP problem for
 * a request, and for an internal collection the reason in why.
 */
struct artifact_origin {
    struct http_request *req;
    /* internal only */
    const char *provider; /* the egress provider's name (required) */
    const char *tags;     /* the operation's tags (comma-separated), or NULL */
    /* The file name at the provider instead of the route's (a rule's ArtifactName), or NULL.
     * Copied at admission. */
    const char *artifact_name;
    artifact_settled_cb on_settled;
    void *settled_ud;
    struct buf *why;
    char *op_id; /* receives the operation's id (37 bytes) once admitted, or NULL */
};

/* Refuses the collection: api_problem(req, status, …), or the reason into o->why. */
void artifact_refuse(const struct artifact_origin *o, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * artifact_admit for either origin. An internal artifact is registered with o->tags and
 * o->provider (no query); its Location names localhost.
 */
int artifact_admit_origin(struct agent *a, const struct artifact_origin *o,
                          const struct ipc_process *p, const struct artifact_spec *spec,
                          const struct artifact_events *ev, void *ud, struct artifact **out,
                          struct operation **op);

/*
 * The common start of an artifact route: tags and egressProvider from the query, shutdown (503),
 * the operation registered for p (its kind's limit: 429, as dotnet-monitor counts HTTP and egress
 * operations alike), the operation's Location (scheme://Host/operations/{id}). Returns 0 with
 * *out (owning the request from here on) and *op, or -1 after answering the request with a problem
 * (400 for a malformed query or an egress provider that is not configured, naming those that are).
 * ev and ud are the route's callbacks, set before anything can call them.
 */
int artifact_admit(struct agent *a, struct http_request *req, const struct ipc_process *p,
                   const struct artifact_spec *spec, const struct artifact_events *ev, void *ud,
                   struct artifact **out, struct operation **op);

/*
 * The route's job exists: egress answers 202 Accepted with Location now (the request is done);
 * HTTP watches for the client leaving (on_lost). Anything that fails from here on ends the
 * operation (for egress, the client learns it from GET /operations/{id}).
 */
void artifact_accept(struct artifact *art);

/* True for an egress artifact. */
bool artifact_is_egress(const struct artifact *art);
/* The operation's Location URL (for logs). */
const char *artifact_location(const struct artifact *art);

/*
 * The first bytes are about to come: HTTP sends 200 with content_type, Content-Disposition
 * (attachment; filename) and Location; egress opens the target named filename in the provider
 * (the provider is looked up again: a reloaded configuration may have removed it). 0, or an error
 * after which the consumer counts as lost: the route ends the artifact (an HTTP client that is
 * gone: Cancelled; an egress target that cannot be opened: Failed, with the reason).
 */
int artifact_begin(struct artifact *art, const char *content_type, const char *filename);

/* Writes n bytes (copied). 0, or a negative code: the consumer is gone (on_lost follows). */
int artifact_write(struct artifact *art, const void *data, size_t n);
/* The same without a copy: data lies inside the malloc'd block base, owned by the artifact from
 * this call on, whatever it returns. */
int artifact_write_owned(struct artifact *art, void *base, const void *data, size_t n);
/* Writes n bytes to an HTTP client at once when nothing is queued for it (http_stream_write_now):
 * 1 when they are written or queued (the caller keeps its buffer), 0 when the caller is to use
 * artifact_write(_owned) instead (egress, TLS, bytes queued already), or a negative code as for
 * artifact_write. */
int artifact_write_now(struct artifact *art, const void *data, size_t n);
/* True while the route should not write (HTTP: more than high_water queued; egress: egress_full).
 * False once the consumer is gone. */
bool artifact_full(const struct artifact *art);
/* True when a paused route may go on (HTTP: low_water or less queued; egress: not full). */
bool artifact_has_room(const struct artifact *art);
/* HTTP over plain TCP: the route may hand file pieces to http_stream_sendfile (which calls cb
 * with the route's ud, not the artifact); see http_server.h. */
bool artifact_can_sendfile(const struct artifact *art);
int artifact_sendfile(struct artifact *art, int fd, uint64_t offset, size_t max,
                      http_sendfile_cb cb, void *ud);

/*
 * The artifact in *slot (a route job's), taken to be ended: *slot and *op (the job's copy of the
 * operation, which the artifact settles from now on) become NULL. NULL when it has ended already.
 */
struct artifact *artifact_take(struct artifact **slot, struct operation **op);

/*
 * The route is done with the artifact; each call frees it or hands it over (egress: until the
 * store answered), and takes extra (the operation's kind-specific results, may be NULL). The
 * route drops its pointer. A client that left makes every outcome Cancelled; a failed store makes
 * it Failed with the store's message.
 *
 * complete: every byte is there. HTTP ends the response (its last chunk); egress completes the
 * upload: Succeeded with resourceLocation, or Failed with the store's message.
 */
void artifact_end_complete(struct artifact *art, cJSON *extra);
/*
 * partial: the bytes stop short (a trace whose runtime died) but what came is worth keeping; the
 * operation is Failed with code and message. HTTP cuts the transfer once the queued bytes are out
 * (the client sees the download incomplete, and keeps it); egress completes the upload, then
 * fails the operation with resourceLocation set and the location in the message.
 */
void artifact_end_partial(struct artifact *art, const char *code, const char *message,
                          cJSON *extra);
/*
 * fail: the artifact is no good. Failed with code and message. A request not yet answered gets
 * a problem (http_status, detail or else message); a started HTTP response is cut; an egress
 * upload is aborted (nothing left in the store) before the operation fails.
 */
void artifact_end_fail(struct artifact *art, int http_status, const char *code, const char *message,
                       const char *detail, cJSON *extra);
/*
 * cancel: DELETE, a client that left, shutdown. Cancelled. A request not yet answered gets a
 * problem (http_status, detail); a started HTTP response is cut; an egress upload is aborted
 * first.
 */
void artifact_end_cancel(struct artifact *art, int http_status, const char *detail, cJSON *extra);

/* The job core's end_artifact (collect/job.h struct collect_ctx): one of the four ends above. */
void artifact_end_job(struct artifact *art, enum job_end how, int http_status, const char *code,
                      const char *message, const char *detail, cJSON *extra);

/*
 * Shutdown: egress uploads still running SHUTDOWN grace_ms from now are aborted, so that none is
 * left half-done when dotmon exits. Routes stop their collections as before.
 */
void artifact_shutdown(struct agent *a, uint64_t grace_ms);

#endif
