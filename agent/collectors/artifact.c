/* SPDX-License-Identifier: MIT */
/*
 * The artifact sink of the streamed routes (artifact.h): the HTTP response or an egress target,
 * behind one set of calls, and the operation's end.
 *
 * An HTTP artifact lives as long as the request: it forwards the connection's drain to the
 * route's on_ready and the client's disconnection to on_lost, and settles the operation at once
 * when the route ends it (the one exception: a partial trace, whose response is cut only once
 * the queued bytes are out, the operation already settled).
 *
 * An egress artifact answers 202 at artifact_accept, opens its target at artifact_begin, hashes
 * what goes through (SHA-256, in the operation's details beside the byte count, so the stored
 * object can be checked against it), and settles the operation only on the target's on_done: the
 * route's outcome combined with the store's. From the route's end to on_done the operation's
 * DELETE hooks are the artifact's own (abort the upload), as the route's job may be gone. Egress
 * artifacts are listed in the agent for shutdown, which aborts the uploads still running after a
 * grace period rather than leaving them half-done.
 *
 * The target is never handed more than it takes: a store fails an upload whose producer goes on
 * far past egress_full (egress.h). Bytes written while the target is full (a route that writes a
 * whole body at once: a profile, a ring snapshot) are held here, in order, and handed over in
 * slices of ART_SLICE as the target's on_ready comes; artifact_full stays true while any are held,
 * and a complete or partial end finishes the upload only once they are all in. So no producer can
 * break an upload by writing too fast; the routes that stream (trace, ring, dump, logs, gcdump)
 * also pause at artifact_full so that nothing piles up here.
 */
#include "artifact.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "api.h"
#include "buf.h"
#include "bufpool.h"
#include "egress.h"
#include "err.h"
#include "hex.h"
#include "http_query.h"
#include "log.h"
#include "membudget.h"

static const char cat[] = "dotmon.egress";

/* Held bytes go to the target at most this many at a time (each a copy). */
#define ART_SLICE ((size_t)1024 * 1024)

/* Bytes the target could not take yet (owned: base is freed once the last slice is out). */
struct art_held {
    struct art_held *next;
    void *base;
    const uint8_t *data;
    size_t n;
    size_t charged; /* bytes of base charged to the memory budget (a copy made here) */
};

/* Frees one held entry and gives back its charge (base: NULL once handed to the target). */
static void held_free(struct art_held *h)
{
    bufpool_release(h->base);
    mb_release(NULL, h->charged);
    free(h);
}

/*
 * ADMITTED: the operation exists, the request is held. ACCEPTED: egress answered 202 (the request
 * is done), HTTP watches the client. BEGUN: the response's headers are out, or the target is
 * open. ENDED: the route is done with it (an egress artifact waits for its store's answer). A
 * lost consumer (the client left, the store failed) is a flag beside the state: it can happen in
 * ACCEPTED (an upload that cannot open) and in BEGUN.
 */
enum art_state { ART_ADMITTED = 0, ART_ACCEPTED, ART_BEGUN, ART_ENDED, ART_STATES };

static const bool art_legal[ART_STATES][ART_STATES] = {
    [ART_ADMITTED] = {[ART_ACCEPTED] = true, [ART_ENDED] = true},
    [ART_ACCEPTED] = {[ART_BEGUN] = true, [ART_ENDED] = true},
    [ART_BEGUN] = {[ART_ENDED] = true},
    [ART_ENDED] = {false},
};

struct artifact {
    struct agent *a;
    struct operation *op;     /* NULL once settled */
    struct http_request *req; /* HTTP: until the response ended; egress: until accepted */
    struct artifact_events ev;
    void *ud;
    const char *noun;
    size_t high_water;
    size_t low_water;
    char location[512];
    enum art_state state;
    bool lost; /* the HTTP client left, or the store failed */
    /* egress */
    char *provider;               /* the egressProvider's name; NULL for HTTP */
    char *artifact_name;          /* the name at the provider instead of the route's; or NULL */
    struct egress_target *target; /* open until on_done */
    EVP_MD_CTX *md;               /* SHA-256 of every byte written */
    uint64_t bytes;
    struct art_held *held; /* FIFO of bytes the target was too full to take */
    struct art_held *held_tail;
    bool finish_held;  /* the route ended complete/partial: egress_finish once held is out */
    char *store_error; /* the store's failure (on_done before the end), or the open's */
    bool internal;     /* no request: a collection rule's */
    artifact_settled_cb on_settled; /* internal: told once the operation has ended */
    void *settled_ud;
    struct artifact *next; /* a->artifacts */
    struct artifact **pprev;
    struct outcome {
        enum op_state want; /* the route's outcome, applied once the store answered */
        bool partial;       /* kept although incomplete (a truncated trace) */
        char *code;
        char *message;
        cJSON *extra;
    } end;
};

/* ---- bookkeeping ------------------------------------------------------------------------ */

/* The one transition function: an illegal transition is a bug in dotmon, fatal even in release
 * builds (docs/style.md §12). */
static void art_set_state(struct artifact *art, enum art_state to)
{
    if (!art_legal[art->state][to]) {
        log_error(cat, "artifact: illegal transition %d -> %d", (int)art->state, (int)to);
        abort();
    }
    art->state = to;
}

/* Moves to ENDED; returns whether the artifact had begun. */
static bool art_end(struct artifact *art)
{
    bool begun = art->state == ART_BEGUN;
    art_set_state(art, ART_ENDED);
    return begun;
}

static void grace_on_closed(uv_handle_t *h)
{
    (void)h;
}

static void outcome_fini(struct outcome *o)
{
    free(o->code);
    free(o->message);
    cJSON_Delete(o->extra);
}

/* Drops whatever is held (the upload is failing or aborted). */
static void held_drop(struct artifact *art)
{
    while (art->held != NULL) {
        struct art_held *h = art->held;
        art->held = h->next;
        held_free(h);
    }
    art->held_tail = NULL;
    art->finish_held = false;
}

static void art_free(struct artifact *art)
{
    struct agent *a = art->a;
    held_drop(art);
    if (art->pprev != NULL) {
        *art->pprev = art->next;
        if (art->next != NULL) {
            art->next->pprev = art->pprev;
        }
    }
    EVP_MD_CTX_free(art->md);
    free(art->provider);
    free(art->artifact_name);
    free(art->store_error);
    outcome_fini(&art->end);
    free(art);
    /* The last upload is done: the shutdown timer has nothing left to abort. */
    if (a->artifacts == NULL && a->egress_grace_state == 1) {
        a->egress_grace_state = 2;
        uv_close((uv_handle_t *)&a->egress_grace, grace_on_closed);
    }
}

/* The upload's figures for the operation's details: provider, bytes, SHA-256. */
static cJSON *egress_details(struct artifact *art)
{
    cJSON *o = cJSON_CreateObject();
    if (o == NULL) {
        return NULL;
    }
    cJSON_AddStringToObject(o, "provider", art->provider);
    cJSON_AddNumberToObject(o, "bytes", (double)art->bytes);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (art->md != NULL && EVP_DigestFinal_ex(art->md, md, &n) == 1) {
        char hex[2 * EVP_MAX_MD_SIZE + 1];
        hex_encode(md, n, hex);
        hex[2 * n] = '\0';
        cJSON_AddStringToObject(o, "sha256", hex);
    }
    EVP_MD_CTX_free(art->md);
    art->md = NULL;
    return o;
}

/* Moves the operation to its final state with the route's results (extra, taken). */
static void settle(struct artifact *art, enum op_state state, const char *code, const char *message,
                   const char *location, cJSON *extra)
{
    struct operation *op = art->op;
    art->op = NULL;
    if (op == NULL) {
        cJSON_Delete(extra);
        return;
    }
    op_set_extra(op, extra);
    if (art->provider != NULL) {
        cJSON_Delete(op->egress);
        op->egress = egress_details(art);
        free(op->resource_location);
        op->resource_location = location != NULL ? strdup(location) : NULL;
    }
    op_set_state(&art->a->ops, op, state, code, message);
    artifact_settled_cb cb = art->on_settled;
    art->on_settled = NULL;
    if (cb != NULL) {
        cb(art->settled_ud, state, location,
           state == OP_FAILED ? (message != NULL ? message : code) : NULL);
    }
}

/* The request, taken to be answered: no abort or drain callback any more. */
static struct http_request *take_request(struct artifact *art)
{
    struct http_request *req = art->req;
    art->req = NULL;
    if (req != NULL) {
        http_request_on_abort(req, NULL, NULL);
        http_stream_on_drain(req, 0, NULL, NULL);
    }
    return req;
}

/* ---- admission -------------------------------------------------------------------------- */

/* "a, b" of the configured providers' names, or a hint when there is none. */
static void provider_list(const struct agent *a, struct buf *out)
{
    size_t n = egress_set_count(a->egress);
    if (n == 0) {
        (void)buf_append_str(out, "none is configured (Egress:FileSystem:<name> or "
                                  "Egress:S3Storage:<name>)");
        return;
    }
    (void)buf_append_str(out, "configured: ");
    for (size_t i = 0; i < n; i++) {
        (void)buf_printf(out, "%s%s", i > 0 ? ", " : "",
                         egress_provider_name(egress_set_at(a->egress, i)));
    }
}

void artifact_refuse(const struct artifact_origin *o, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (o->req != NULL) {
        api_problem(o->req, status, "%s", msg);
    } else if (o->why != NULL) {
        buf_reset(o->why);
        (void)buf_append_str(o->why, msg);
    }
}

/* An internal collection's provider (required, configured); 0, or -1 with the reason. */
static int internal_provider(struct agent *a, const struct artifact_origin *o,
                             const char **provider)
{
    const struct egress_provider *p =
        o->provider != NULL ? egress_find(a->egress, o->provider) : NULL;
    if (p == NULL) {
        struct buf names;
        buf_init(&names, 4096);
        provider_list(a, &names);
        artifact_refuse(o, 400, "egress provider '%s' is not configured (%s)",
                        o->provider != NULL ? o->provider : "", buf_cstr(&names));
        buf_fini(&names);
        return -1;
    }
    *provider = egress_provider_name(p);
    return 0;
}

/* tags and egressProvider; 0, or -1 after answering 400. *provider NULL without egress. */
static int parse_query(struct agent *a, struct http_request *req, struct buf *tags,
                       const char **provider)
{
    struct buf egress, names;
    buf_init(&egress, 256);
    buf_init(&names, 4096);
    const char *q = http_request_query(req);
    int has_tags = http_query_get(q, "tags", tags);
    int has_egress = http_query_get(q, "egressProvider", &egress);
    int rc = 0;
    *provider = NULL;
    if (has_tags < 0 || has_egress < 0) {
        api_problem(req, 400, "malformed query string");
        rc = -1;
    } else if (has_egress == 1 && buf_size(&egress) > 0) {
        const struct egress_provider *p = egress_find(a->egress, buf_cstr(&egress));
        if (p == NULL) {
            provider_list(a, &names);
            api_problem(req, 400,
                        "egress provider '%s' is not configured (%s); omit egressProvider to "
                        "receive the artifact in this response",
                        buf_cstr(&egress), buf_cstr(&names));
            rc = -1;
        } else {
            *provider = egress_provider_name(p); /* valid until the configuration reloads */
        }
    }
    if (has_tags != 1) {
        buf_reset(tags);
    }
    buf_fini(&egress);
    buf_fini(&names);
    return rc;
}

static int register_op(struct agent *a, const struct artifact_origin *o,
                       const struct ipc_process *p, const struct artifact_spec *spec,
                       const char *tags, struct operation **op)
{
    if (a->stopping) {
        artifact_refuse(o, 503, "dotmon is shutting down");
        return -1;
    }
    int rc = op_registry_add(&a->ops, spec->kind, p->pid, p->uid, p->name,
                             tags[0] != '\0' ? tags : NULL, op);
    if (rc == AGENT_E_TOOBIG) {
        artifact_refuse(o, 429, "%zu %s operations are running; at most %zu may run at once%s%s%s",
                        op_registry_active(&a->ops, spec->kind), spec->noun,
                        a->ops.limit[spec->kind], spec->limit_setting != NULL ? " (" : "",
                        spec->limit_setting != NULL ? spec->limit_setting : "",
                        spec->limit_setting != NULL ? ")" : "");
        return -1;
    }
    if (rc != 0) {
        artifact_refuse(o, 500, "cannot register the operation: %s", agent_strerror(rc));
        return -1;
    }
    return 0;
}

int artifact_admit(struct agent *a, struct http_request *req, const struct ipc_process *p,
                   const struct artifact_spec *spec, const struct artifact_events *ev, void *ud,
                   struct artifact **out, struct operation **op)
{
    const struct artifact_origin origin = {.req = req};
    return artifact_admit_origin(a, &origin, p, spec, ev, ud, out, op);
}

int artifact_admit_origin(struct agent *a, const struct artifact_origin *org,
                          const struct ipc_process *p, const struct artifact_spec *spec,
                          const struct artifact_events *ev, void *ud, struct artifact **out,
                          struct operation **op)
{
    struct http_request *req = org->req;
    struct buf tags;
    buf_init(&tags, 4096);
    const char *provider = NULL;
    struct operation *o = NULL;
    int rc = 0;
    if (req != NULL) {
        rc = parse_query(a, req, &tags, &provider);
    } else {
        rc = internal_provider(a, org, &provider);
        (void)buf_append_str(&tags, org->tags != NULL ? org->tags : "");
    }
    rc = rc ? rc : register_op(a, org, p, spec, buf_cstr(&tags), &o);
    buf_fini(&tags);
    if (rc != 0) {
        return -1;
    }
    struct artifact *art = calloc(1, sizeof(*art));
    char *name = provider != NULL ? strdup(provider) : NULL;
    const char *custom = req == NULL ? org->artifact_name : NULL;
    char *custom_copy = custom != NULL ? strdup(custom) : NULL;
    if (art == NULL || (provider != NULL && name == NULL) || (custom != NULL && !custom_copy) ||
        (provider != NULL && (o->egress_provider = strdup(provider)) == NULL)) {
        free(art);
        free(name);
        free(custom_copy);
        op_set_state(&a->ops, o, OP_FAILED, "OutOfMemory", "out of memory");
        artifact_refuse(org, 500, "out of memory");
        return -1;
    }
    art->a = a;
    art->op = o;
    art->req = req;
    art->ev = *ev;
    art->ud = ud;
    art->noun = spec->noun;
    art->high_water = spec->high_water;
    art->low_water = spec->low_water;
    art->provider = name;
    art->artifact_name = custom_copy;
    if (req == NULL) {
        if (org->op_id != NULL) {
            memcpy(org->op_id, o->id, sizeof(o->id));
        }
        art->internal = true;
        art->on_settled = org->on_settled;
        art->settled_ud = org->settled_ud;
    }
    const char *host = req != NULL ? http_request_header(req, "Host") : NULL;
    snprintf(art->location, sizeof(art->location), "%s://%s/operations/%s",
             req != NULL && http_request_is_tls(req) ? "https" : "http",
             host != NULL ? host : "localhost", o->id);
    if (name != NULL) {
        art->next = a->artifacts;
        if (art->next != NULL) {
            art->next->pprev = &art->next;
        }
        a->artifacts = art;
        art->pprev = &a->artifacts;
    }
    *out = art;
    *op = o;
    return 0;
}

static void art_on_abort(void *ud, struct http_request *r);

void artifact_accept(struct artifact *art)
{
    if (art->state != ART_ADMITTED) {
        return;
    }
    if (art->req == NULL) {
        if (art->internal) { /* nobody to answer */
            art_set_state(art, ART_ACCEPTED);
            log_info(cat, "%s operation %s: to egress provider %s", art->noun, art->op->id,
                     art->provider);
        }
        return;
    }
    art_set_state(art, ART_ACCEPTED);
    if (art->provider == NULL) {
        http_request_on_abort(art->req, art_on_abort, art);
        return;
    }
    /* dotnet-monitor's answer to an egress request: 202, Location, no body. */
    struct http_request *req = take_request(art);
    const struct http_header loc[] = {{"Location", art->location}};
    (void)http_respond(req, 202, NULL, loc, 1, NULL, 0);
    log_info(cat, "%s operation %s: to egress provider %s", art->noun, art->op->id, art->provider);
}

bool artifact_is_egress(const struct artifact *art)
{
    return art->provider != NULL;
}

const char *artifact_location(const struct artifact *art)
{
    return art->location;
}

/* ---- HTTP side -------------------------------------------------------------------------- */

static void art_on_drain(void *ud, struct http_request *r)
{
    struct artifact *art = ud;
    (void)r;
    if (art->state != ART_ENDED && art->ev.on_ready != NULL) {
        art->ev.on_ready(art->ud);
    }
}

/* A partial response: cut once the queued bytes are out. */
static void art_on_partial_drain(void *ud, struct http_request *r)
{
    struct artifact *art = ud;
    if (art->req == r && http_stream_pending(r) == 0) {
        http_stream_abort(take_request(art));
        art_free(art);
    }
}

static void art_on_abort(void *ud, struct http_request *r)
{
    struct artifact *art = ud;
    (void)r;
    art->req = NULL;
    art->lost = true;
    if (art->state == ART_ENDED) {
        art_free(art); /* a partial response whose client left before the cut */
        return;
    }
    art->ev.on_lost(art->ud); /* the route ends the artifact */
}

static int begin_http(struct artifact *art, const char *content_type, const char *filename)
{
    char disposition[160];
    snprintf(disposition, sizeof(disposition), "attachment; filename=\"%s\"", filename);
    const struct http_header hdrs[] = {{"Content-Disposition", disposition},
                                       {"Location", art->location}};
    int rc = http_stream_begin(art->req, 200, content_type, hdrs, 2);
    if (rc == 0) {
        http_stream_on_drain(art->req, art->low_water, art_on_drain, art);
    }
    return rc;
}

/* ---- egress side ------------------------------------------------------------------------ */

/*
 * Hands held bytes to the target while it takes them, a slice at a time. 0 (held may remain,
 * the target full again) or the target's error (the upload is failing: on_done follows).
 */
static int held_pump(struct artifact *art)
{
    while (art->held != NULL && art->target != NULL && !egress_full(art->target)) {
        struct art_held *h = art->held;
        size_t k = h->n < ART_SLICE ? h->n : ART_SLICE;
        int rc = 0;
        if (k == h->n) {
            art->held = h->next;
            if (art->held == NULL) {
                art->held_tail = NULL;
            }
            rc = egress_write(art->target, h->base, h->data, k); /* the block goes with it */
            h->base = NULL;
            held_free(h);
        } else {
            rc = egress_write(art->target, NULL, h->data, k);
            h->data += k;
            h->n -= k;
        }
        if (rc != 0) {
            held_drop(art);
            return rc;
        }
    }
    if (art->held == NULL && art->finish_held && art->target != NULL) {
        art->finish_held = false;
        egress_finish(art->target);
    }
    return 0;
}

static void art_on_ready(void *ud)
{
    struct artifact *art = ud;
    if (held_pump(art) != 0 || art->held != NULL) {
        return; /* failing (on_done follows), or the target is full again */
    }
    if (art->state != ART_ENDED && art->ev.on_ready != NULL) {
        art->ev.on_ready(art->ud);
    }
}

static void art_on_done(void *ud, int status, const char *location, const char *error_message);

static int begin_egress(struct artifact *art, const char *content_type, const char *filename)
{
    const struct egress_provider *p = egress_find(art->a->egress, art->provider);
    if (art->artifact_name != NULL) {
        filename = art->artifact_name; /* ArtifactName: as given, as dotnet-monitor names it */
    }
    char why[256];
    int rc = 0;
    if (p == NULL) {
        snprintf(why, sizeof(why), "egress provider '%s' is no longer configured", art->provider);
        rc = AGENT_E_NOTFOUND;
    } else if (art->a->egress_grace_state == 2) {
        snprintf(why, sizeof(why), "dotmon is shutting down");
        rc = AGENT_E_CLOSED;
    } else if ((art->md = EVP_MD_CTX_new()) == NULL ||
               EVP_DigestInit_ex(art->md, EVP_sha256(), NULL) != 1) {
        snprintf(why, sizeof(why), "out of memory");
        rc = UV_ENOMEM;
    } else {
        struct egress_request rq = {.artifact_name = filename,
                                    .content_type = content_type,
                                    .on_ready = art_on_ready,
                                    .on_done = art_on_done,
                                    .ud = art,
                                    .idle_ms = agent_timeout(art->a, TIMEOUT_EGRESS_IDLE),
                                    .total_ms = agent_timeout(art->a, TIMEOUT_EGRESS_REQUEST)};
        rc = egress_open(art->a->loop, p, &rq, &art->target);
        snprintf(why, sizeof(why), "cannot start the upload of %s: %s", filename,
                 agent_strerror(rc));
    }
    if (rc != 0) {
        art->target = NULL;
        art->lost = true;
        free(art->store_error);
        art->store_error = strdup(why);
        log_warn(cat, "%s operation %s: %s", art->noun, art->op != NULL ? art->op->id : "?", why);
    }
    return rc;
}

/* The DELETE hooks of an operation whose route is done and whose upload is finishing. */
static void art_op_stop(void *ctx)
{
    (void)ctx; /* it is ending gracefully already */
}

static void art_op_cancel(void *ctx)
{
    struct artifact *art = ctx;
    art->end.want = OP_CANCELLED;
    art->end.partial = false;
    held_drop(art);
    if (art->target != NULL) {
        egress_abort(art->target); /* too late once committed: on_done says which */
    }
}

/* The store's answer combined with the route's outcome. */
static void settle_from_store(struct artifact *art, int status, const char *location,
                              const char *error_message)
{
    cJSON *extra = art->end.extra;
    art->end.extra = NULL;
    char msg[1536];
    if (status == 0 && art->end.partial) {
        /* The message is logged (a rule's action failing): a pre-signed URL redacted; it stays
         * whole in resourceLocation. */
        struct buf shown;
        buf_init(&shown, 0);
        snprintf(msg, sizeof(msg), "%s; what was received is stored at %s",
                 art->end.message != NULL ? art->end.message : "",
                 egress_location_for_log(location, &shown) == 0 ? buf_cstr(&shown) : "?");
        buf_fini(&shown);
        settle(art, OP_FAILED, art->end.code, msg, location, extra);
    } else if (status == 0) {
        /* Committed: a cancel that came too late does not unmake the artifact. */
        settle(art, OP_SUCCEEDED, NULL, NULL, location, extra);
    } else if (status == UV_ECANCELED && art->end.want == OP_CANCELLED) {
        settle(art, OP_CANCELLED, NULL, NULL, NULL, extra);
    } else if (status == UV_ECANCELED && art->end.want == OP_FAILED) {
        settle(art, OP_FAILED, art->end.code, art->end.message, NULL, extra);
    } else {
        const char *why = status == UV_ECANCELED && art->store_error != NULL ? art->store_error
                          : error_message != NULL                            ? error_message
                                                  : agent_strerror(status);
        snprintf(msg, sizeof(msg), "egress to %s failed: %s", art->provider, why);
        settle(art, OP_FAILED, "EgressFailed", msg, NULL, extra);
    }
}

static void art_on_done(void *ud, int status, const char *location, const char *error_message)
{
    struct artifact *art = ud;
    art->target = NULL; /* freed by the store right after this returns */
    held_drop(art);
    if (status == 0) {
        struct buf shown; /* a pre-signed URL is a secret: redacted */
        buf_init(&shown, 0);
        log_info(cat, "%s operation %s: %llu bytes stored at %s", art->noun,
                 art->op != NULL ? art->op->id : "?", (unsigned long long)art->bytes,
                 egress_location_for_log(location, &shown) == 0 ? buf_cstr(&shown) : "?");
        buf_fini(&shown);
    } else if (status != UV_ECANCELED) {
        log_warn(cat, "%s operation %s: egress to %s failed: %s", art->noun,
                 art->op != NULL ? art->op->id : "?", art->provider,
                 error_message != NULL ? error_message : agent_strerror(status));
    }
    if (art->state == ART_ENDED) {
        settle_from_store(art, status, location, error_message);
        art_free(art);
        return;
    }
    /* The store failed (or shutdown aborted it) while the route still produces. An abort of
     * dotmon's own (a held block it could not keep) already said why. */
    art->lost = true;
    if (!(status == UV_ECANCELED && art->store_error != NULL)) {
        free(art->store_error);
        art->store_error = strdup(status == UV_ECANCELED  ? "the upload was aborted at shutdown"
                                  : error_message != NULL ? error_message
                                                          : agent_strerror(status));
    }
    art->ev.on_lost(art->ud); /* the route ends the artifact, which then settles */
}

/* The route ended an egress artifact: finish or abort the upload, or settle at once when there
 * is none (the artifact is then freed). */
static void end_egress(struct artifact *art, enum op_state want, bool keep, const char *code,
                       const char *message, cJSON *extra)
{
    art_set_state(art, ART_ENDED);
    if (art->target == NULL) {
        if (art->store_error != NULL) {
            char msg[1536];
            snprintf(msg, sizeof(msg), "egress to %s failed: %s", art->provider, art->store_error);
            settle(art, OP_FAILED, "EgressFailed", msg, NULL, extra);
        } else {
            settle(art, want, code, message, NULL, extra);
        }
        art_free(art);
        return;
    }
    art->end.want = want;
    art->end.partial = keep && want == OP_FAILED;
    art->end.code = code != NULL ? strdup(code) : NULL;
    art->end.message = message != NULL ? strdup(message) : NULL;
    art->end.extra = extra;
    if (art->op != NULL) {
        art->op->control.stop = art_op_stop;
        art->op->control.cancel = art_op_cancel;
        art->op->ctx = art;
    }
    if (keep && art->held != NULL) {
        art->finish_held = true; /* held_pump finishes once the held bytes are in */
    } else if (keep) {
        egress_finish(art->target);
    } else {
        held_drop(art);
        egress_abort(art->target);
    }
}

/* ---- the route's calls ------------------------------------------------------------------ */

int artifact_begin(struct artifact *art, const char *content_type, const char *filename)
{
    if (art->state != ART_ACCEPTED || art->lost) {
        return AGENT_E_INVAL;
    }
    int rc = art->provider != NULL ? begin_egress(art, content_type, filename)
                                   : begin_http(art, content_type, filename);
    if (rc == 0) {
        art_set_state(art, ART_BEGUN);
    }
    return rc;
}

static bool consumer_ok(const struct artifact *art)
{
    return art->state == ART_BEGUN && !art->lost &&
           (art->provider != NULL ? art->target != NULL : art->req != NULL);
}

int artifact_write_owned(struct artifact *art, void *base, const void *data, size_t n)
{
    if (!consumer_ok(art)) {
        bufpool_release(base);
        return AGENT_E_CLOSED;
    }
    if (art->provider == NULL) {
        return http_stream_write_owned(art->req, base, data, n);
    }
    if (art->md != NULL && EVP_DigestUpdate(art->md, data, n) != 1) {
        EVP_MD_CTX_free(art->md); /* no digest rather than a wrong one */
        art->md = NULL;
    }
    art->bytes += n;
    if (art->held == NULL && !egress_full(art->target) && n <= ART_SLICE) {
        return egress_write(art->target, base, data, n);
    }
    /* The target is full, or the block is big: hold it and hand it over at the target's pace. A
     * copy made here is charged to the memory budget first. */
    size_t charged = 0;
    int rc = 0;
    if (base == NULL) {
        rc = mb_charge(NULL, n);
        charged = rc == 0 ? n : 0;
    }
    struct art_held *h = rc == 0 ? malloc(sizeof(*h)) : NULL;
    if (h != NULL && base == NULL) {
        base = malloc(n > 0 ? n : 1);
        if (base != NULL) {
            memcpy(base, data, n);
            data = base;
        }
    }
    if (h == NULL || base == NULL) {
        free(h);
        bufpool_release(base);
        mb_release(NULL, charged);
        rc = rc != 0 ? rc : UV_ENOMEM;
        char msg[512];
        if (rc == AGENT_E_BUDGET) {
            api_budget_detail(msg, sizeof(msg), "the bytes held for the full egress target", NULL);
        } else {
            snprintf(msg, sizeof(msg), "out of memory holding bytes for the egress target");
        }
        log_warn(cat, "%s operation %s: %s", art->noun, art->op != NULL ? art->op->id : "?", msg);
        if (art->store_error == NULL) {
            art->store_error = strdup(msg); /* what on_done reports, rather than "aborted" */
        }
        egress_abort(art->target); /* a hole would make the artifact wrong: on_done follows */
        return rc;
    }
    *h = (struct art_held){.next = NULL, .base = base, .data = data, .n = n, .charged = charged};
    if (art->held_tail != NULL) {
        art->held_tail->next = h;
    } else {
        art->held = h;
    }
    art->held_tail = h;
    return held_pump(art);
}

int artifact_write_now(struct artifact *art, const void *data, size_t n)
{
    if (art->provider != NULL) {
        return 0;
    }
    return consumer_ok(art) ? http_stream_write_now(art->req, data, n) : AGENT_E_CLOSED;
}

int artifact_write(struct artifact *art, const void *data, size_t n)
{
    if (art->provider == NULL) {
        return consumer_ok(art) ? http_stream_write(art->req, data, n) : AGENT_E_CLOSED;
    }
    return artifact_write_owned(art, NULL, data, n);
}

bool artifact_full(const struct artifact *art)
{
    if (!consumer_ok(art)) {
        return false;
    }
    return art->provider != NULL ? art->held != NULL || egress_full(art->target)
                                 : http_stream_pending(art->req) > art->high_water;
}

bool artifact_has_room(const struct artifact *art)
{
    if (!consumer_ok(art)) {
        return true;
    }
    return art->provider != NULL ? art->held == NULL && !egress_full(art->target)
                                 : http_stream_pending(art->req) <= art->low_water;
}

bool artifact_can_sendfile(const struct artifact *art)
{
    return art->provider == NULL && consumer_ok(art) && http_stream_can_sendfile(art->req);
}

int artifact_sendfile(struct artifact *art, int fd, uint64_t offset, size_t max,
                      http_sendfile_cb cb, void *ud)
{
    if (!artifact_can_sendfile(art)) {
        return AGENT_E_INVAL;
    }
    return http_stream_sendfile(art->req, fd, offset, max, cb, ud);
}

struct artifact *artifact_take(struct artifact **slot, struct operation **op)
{
    struct artifact *art = *slot;
    *slot = NULL;
    *op = NULL;
    return art;
}

void artifact_end_complete(struct artifact *art, cJSON *extra)
{
    if (art->provider != NULL && art->req == NULL) {
        end_egress(art, OP_SUCCEEDED, true, NULL, NULL, extra);
        return;
    }
    bool begun = art_end(art);
    struct http_request *req = take_request(art);
    settle(art, art->lost ? OP_CANCELLED : OP_SUCCEEDED, NULL, NULL, NULL, extra);
    if (req != NULL && begun) {
        (void)http_stream_end(req);
    } else if (req != NULL) {
        api_problem(req, 500, "the %s ended before it started", art->noun);
    }
    art_free(art);
}

void artifact_end_partial(struct artifact *art, const char *code, const char *message, cJSON *extra)
{
    if (art->provider != NULL && art->req == NULL) {
        end_egress(art, OP_FAILED, true, code, message, extra);
        return;
    }
    bool begun = art_end(art);
    settle(art, art->lost ? OP_CANCELLED : OP_FAILED, code, message, NULL, extra);
    if (art->req != NULL && begun && http_stream_pending(art->req) > 0) {
        /* The abort callback stays: a client that leaves before the cut frees the artifact. */
        http_stream_on_drain(art->req, 0, art_on_partial_drain, art);
        return;
    }
    struct http_request *req = take_request(art);
    if (req != NULL && begun) {
        http_stream_abort(req);
    } else if (req != NULL) {
        api_problem(req, 502, "%s", message != NULL ? message : "the artifact is incomplete");
    }
    art_free(art);
}

/* Shared by fail and cancel on an HTTP artifact (or an egress one not yet accepted). */
static void end_http(struct artifact *art, enum op_state state, int http_status, const char *code,
                     const char *message, const char *detail, cJSON *extra)
{
    bool begun = art_end(art);
    struct http_request *req = take_request(art);
    settle(art, art->lost ? OP_CANCELLED : state, code, message, NULL, extra);
    if (req != NULL && begun) {
        http_stream_abort(req); /* the client sees a cut transfer, never a short "complete" file */
    } else if (req != NULL) {
        api_problem(req, http_status, "%s", detail != NULL ? detail : message);
    }
    art_free(art);
}

void artifact_end_fail(struct artifact *art, int http_status, const char *code, const char *message,
                       const char *detail, cJSON *extra)
{
    if (art->provider != NULL && art->req == NULL) {
        end_egress(art, OP_FAILED, false, code, message, extra);
        return;
    }
    end_http(art, OP_FAILED, http_status, code, message != NULL ? message : "failed", detail,
             extra);
}

void artifact_end_cancel(struct artifact *art, int http_status, const char *detail, cJSON *extra)
{
    if (art->provider != NULL && art->req == NULL) {
        end_egress(art, OP_CANCELLED, false, NULL, NULL, extra);
        return;
    }
    char why[160];
    snprintf(why, sizeof(why), "the %s operation was cancelled before it started", art->noun);
    end_http(art, OP_CANCELLED, http_status, NULL, NULL, detail != NULL ? detail : why, extra);
}

void artifact_end_job(struct artifact *art, enum job_end how, int http_status, const char *code,
                      const char *message, const char *detail, cJSON *extra)
{
    switch (how) {
    case JOB_END_COMPLETE:
        artifact_end_complete(art, extra);
        break;
    case JOB_END_PARTIAL:
        artifact_end_partial(art, code, message, extra);
        break;
    case JOB_END_FAIL:
        artifact_end_fail(art, http_status, code, message, detail, extra);
        break;
    case JOB_END_CANCEL:
    default:
        artifact_end_cancel(art, http_status, detail, extra);
        break;
    }
}

/* ---- shutdown --------------------------------------------------------------------------- */

static void grace_on_timer(uv_timer_t *t)
{
    struct agent *a = t->data;
    a->egress_grace_state = 2;
    uv_close((uv_handle_t *)&a->egress_grace, grace_on_closed);
    for (struct artifact *art = a->artifacts; art != NULL; art = art->next) {
        if (art->target != NULL) {
            log_warn(cat, "%s operation %s: upload to %s aborted at shutdown", art->noun,
                     art->op != NULL ? art->op->id : "?", art->provider);
            egress_abort(art->target); /* on_done follows on a later turn */
        }
    }
}

void artifact_shutdown(struct agent *a, uint64_t grace_ms)
{
    if (a->artifacts == NULL || a->egress_grace_state != 0) {
        return;
    }
    uv_timer_init(a->loop, &a->egress_grace);
    a->egress_grace.data = a;
    a->egress_grace_state = 1;
    uv_timer_start(&a->egress_grace, grace_on_timer, grace_ms, 0);
}
