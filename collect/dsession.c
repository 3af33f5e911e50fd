/* SPDX-License-Identifier: MIT */
/*
 * A decoded session; see dsession.h.
 *
 * The three ways a session ends meet in ds_end: the runtime closed the stream (ipc_session's
 * on_end with status 0: finish), ipc_session gave up (its on_end with a status: error with
 * ipc_session_end_reason's words), or the consumer refused a piece of the stream (the
 * ipc_session is aborted first, so nothing of it calls back any more: error with
 * AGENT_E_PROTO). dsession_abort is the fourth, silent one.
 */
#include "dsession.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dsspec.h"
#include "err.h"
#include "log.h"

struct dsp_hold;

#define DS_REASON_MAX 320

struct dsession {
    struct ipc_session *sess; /* NULL once it ended or was aborted */
    const struct dsession_consumer *c;
    void *ctx;
    uint64_t stop_timeout_ms;
    bool stopping;         /* dsession_stop asked (or stop_at_once) */
    struct dsp_hold *hold; /* its DiagnosticSource lines, held until the runtime is done (NULL) */
};

/* A session the keeper joined or the spec sets hold: told to them when the runtime is done with
 * it (ipc_session_when_freed), which may be after the dsession itself is gone. */
struct ds_joined_note {
    uv_loop_t *loop;
    uint64_t key;
    bool keeper;           /* the keeper joined it: its left follows */
    struct dsp_hold *hold; /* its DiagnosticSource lines (NULL: none) */
};

static const struct dsession_keeper *keeper; /* dsession_set_keeper */

void dsession_set_keeper(const struct dsession_keeper *k)
{
    keeper = k;
}

/* A session that carried the keeper's lines is over in the runtime (its StopTracing answered,
 * also after an abort, or the cleanup bound passed): the keeper (still the same loop's) is told,
 * with whether the runtime had (or may have had) the session, i.e. whether its set was replaced. */
static void dsp_left(struct dsp_hold *h, bool had_session);

static void ds_on_freed(void *ud, bool had_session)
{
    struct ds_joined_note *n = ud;
    if (n->keeper && keeper != NULL && keeper->loop == n->loop) {
        keeper->left(keeper->ud, n->key, had_session);
    }
    dsp_left(n->hold, had_session);
    free(n);
}

/* ---- the one-spec-set rule for DiagnosticSource (dsession.h, docs/events.md §9.1) ---------- */

static const char cat[] = "dotmon.session";

/*
 * The runtime keeps one FilterAndPayloadSpecs list per process, replaced by every Enable of the
 * provider and emptied whenever a session that had it ends while others still read it. Per
 * runtime (endpoint) and loop, dotmon keeps the own lines of every live session with the provider
 * (a hold); a session starts with the union of its lines and everyone else's, and once a session
 * that had the provider is over (its StopTracing answered: the list is empty now) while others
 * still read it, a refresher session puts the union back: the provider with keyword
 * IgnoreShortCutKeywords alone (no event of the provider carries it, so nothing reaches the
 * refresher) and the union as its argument. It lives until the next such end, when it is stopped
 * and, once the runtime is done with it, started again with the union of then; with the last
 * hold it goes.
 */
#define DSP_REFRESH_KEYWORDS 0x800ull /* DiagnosticSource's IgnoreShortCutKeywords */
#define DSP_REFRESH_LEVEL    4u       /* Informational */

struct dsp_proc {
    struct dsp_proc *next;
    uv_loop_t *loop;
    struct ipc_endpoint ep; /* owned copy: the refresher connects to it */
    struct dsp_hold *holds;
    size_t nholds;
    struct ipc_session_admission *adm; /* the last hold's (the agent's: outlives every session) */
    uint64_t start_timeout_ms;
    uint64_t stop_timeout_ms;
    struct ipc_session *rs; /* the refresher, while its handle is valid */
    bool r_live;            /* a refresher is counted: from its start until it is freed */
    bool r_stopping;        /* its stop was asked */
    bool r_redo;            /* start another once it is freed (a session ended meanwhile) */
    unsigned r_self_ends;   /* refreshers the runtime ended since a session's end (not dotmon) */
    uint64_t gen;           /* joins so far: a hold's or the refresher's place among them */
    uint64_t r_gen;         /* the refresher's: the holds it carries joined up to this */
};

struct dsp_hold {
    struct dsp_hold *next;
    struct dsp_proc *p;
    char *lines;  /* the session's own lines, each ended by "\r\n" ("" for none) */
    uint64_t gen; /* p->gen when it joined: it carries the lines of every hold before it */
    bool started; /* the runtime acknowledged its session: its Enable was applied */
};

static struct dsp_proc *dsp_procs;
static uv_loop_t *dsp_closed; /* dsession_close_specs: no refresher starts on that loop */
static struct ipc_session_admission *dsp_adm; /* dsession_set_spec_admission (NULL: a hold's) */

void dsession_set_spec_admission(struct ipc_session_admission *adm)
{
    dsp_adm = adm;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

static struct dsp_proc *dsp_find(uv_loop_t *loop, const struct ipc_endpoint *ep)
{
    for (struct dsp_proc *p = dsp_procs; p != NULL; p = p->next) {
        if (p->loop == loop && same_str(p->ep.path, ep->path) && strcmp(p->ep.uid, ep->uid) == 0) {
            return p;
        }
    }
    return NULL;
}

/* Frees p once nothing of it is left: no hold and no refresher. */
static void dsp_maybe_free(struct dsp_proc *p)
{
    if (p->holds != NULL || p->r_live) {
        return;
    }
    for (struct dsp_proc **pp = &dsp_procs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    ipc_endpoint_fini(&p->ep);
    free(p);
}

/* The union of p's holds' lines (each ended by "\r\n") appended to acc: how many lines acc
 * did not have yet, or -ENOMEM. */
static int dsp_union(const struct dsp_proc *p, struct buf *acc)
{
    int added = 0;
    for (const struct dsp_hold *h = p->holds; h != NULL; h = h->next) {
        int n = dsspec_lines_add(acc, h->lines, strlen(h->lines));
        if (n < 0) {
            return n;
        }
        added += n;
    }
    return added;
}

static void dsp_refresh(struct dsp_proc *p);

static bool dsp_newer_started(const struct dsp_proc *p, uint64_t gen);

static void dsp_r_started(void *ud, uint64_t session_id, int version)
{
    struct dsp_proc *p = ud;
    (void)session_id;
    (void)version;
    if (dsp_newer_started(p, p->r_gen)) {
        dsp_refresh(p); /* a session that joined after it was applied before it */
    }
}

static void dsp_r_data(void *ud, const uint8_t *bytes, size_t n)
{
    (void)ud; /* the stream's header and blocks without events: nothing to keep */
    (void)bytes;
    (void)n;
}

static void dsp_r_end(void *ud, int status, uint32_t hresult)
{
    struct dsp_proc *p = ud;
    p->rs = NULL;
    if (!p->r_stopping) {
        /* the runtime ended it (gone, refused it, a start that timed out): dsp_r_freed says
         * whether the runtime had it, and then its end emptied the list too */
        p->r_redo = false;
        p->r_self_ends++;
        log_debug(cat, "%s: the DiagnosticSource refresher session ended (%s, 0x%08x)",
                  p->ep.path != NULL ? p->ep.path : "?", agent_strerror(status), hresult);
    }
}

static const struct ipc_session_callbacks dsp_r_callbacks = {
    .on_started = dsp_r_started, .on_data = dsp_r_data, .on_end = dsp_r_end};

static void dsp_r_freed(void *ud, bool had_session)
{
    struct dsp_proc *p = ud;
    bool self_ended = !p->r_stopping && !p->r_redo;
    p->r_live = false;
    p->r_stopping = false;
    /* One more try after a refresher the runtime ended while it had it (once per session's end:
     * a runtime that ends every one, or is gone, gets no loop of them). */
    if (self_ended && had_session && p->holds != NULL && p->r_self_ends == 1) {
        p->r_redo = true;
    }
    if (p->r_redo) {
        p->r_redo = false;
        dsp_refresh(p);
        return;
    }
    dsp_maybe_free(p);
}

/* A session that had the provider is over (the runtime's list is empty): the union again. */
static void dsp_refresh(struct dsp_proc *p)
{
    if (p->r_live) { /* replaced once the runtime is done with it */
        p->r_redo = true;
        if (p->rs != NULL && !p->r_stopping) {
            p->r_stopping = true;
            ipc_session_stop(p->rs, p->stop_timeout_ms);
        }
        return;
    }
    if (p->holds == NULL || dsp_closed == p->loop) {
        dsp_maybe_free(p);
        return;
    }
    struct buf u;
    buf_init(&u, 0);
    char *args = NULL;
    int rc = dsp_union(p, &u);
    rc = rc < 0 ? rc : dsspec_args_set(NULL, buf_cstr(&u), &args);
    buf_fini(&u);
    struct ipc_provider prov = {.name = DSSPEC_PROVIDER,
                                .keywords = DSP_REFRESH_KEYWORDS,
                                .level = DSP_REFRESH_LEVEL,
                                .arguments = args};
    struct ipc_collect_config cfg = {
        .buffer_mb = 1, .format = 1, .rundown_keyword = 0, .providers = &prov, .provider_count = 1};
    rc = rc != 0 ? rc
                 : ipc_session_start(p->loop, dsp_adm != NULL ? dsp_adm : p->adm, &p->ep, &cfg,
                                     p->start_timeout_ms, &dsp_r_callbacks, p, &p->rs);
    free(args);
    if (rc != 0) {
        p->rs = NULL;
        log_warn(cat,
                 "%s: a DiagnosticSource session ended and took the runtime's one "
                 "FilterAndPayloadSpecs list with it; it could not be set again for the %zu "
                 "session(s) still reading it (%s): they see no DiagnosticSource event until "
                 "the next one starts",
                 p->ep.path != NULL ? p->ep.path : "?", p->nholds, agent_strerror(rc));
        dsp_maybe_free(p);
        return;
    }
    p->r_live = true;
    p->r_stopping = false;
    p->r_redo = false;
    p->r_gen = p->gen;
    ipc_session_when_freed(p->rs, dsp_r_freed, p);
    log_info(cat,
             "%s: a DiagnosticSource session ended and took the runtime's one "
             "FilterAndPayloadSpecs list with it; set again for the %zu session(s) still "
             "reading it",
             p->ep.path != NULL ? p->ep.path : "?", p->nholds);
}

/* p for ep on loop, made (and *created set) when there is none; NULL when out of memory. */
static struct dsp_proc *dsp_get(uv_loop_t *loop, const struct ipc_endpoint *ep, bool *created)
{
    struct dsp_proc *p = dsp_find(loop, ep);
    *created = false;
    if (p != NULL) {
        return p;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL || ipc_endpoint_copy(&p->ep, ep) != 0) {
        free(p);
        return NULL;
    }
    p->loop = loop;
    p->next = dsp_procs;
    dsp_procs = p;
    *created = true;
    return p;
}

/* A hold of the lines in own_args (a provider's arguments); NULL when out of memory. */
static struct dsp_hold *dsp_hold_new(const char *own_args)
{
    const char *val = NULL;
    size_t len = 0;
    struct buf own;
    buf_init(&own, 0);
    struct dsp_hold *h = NULL;
    if (!dsspec_args_value(own_args, &val, &len) || dsspec_lines_add(&own, val, len) >= 0) {
        h = calloc(1, sizeof(*h));
    }
    if (h != NULL && (h->lines = strdup(buf_cstr(&own))) == NULL) {
        free(h);
        h = NULL;
    }
    buf_fini(&own);
    return h;
}

/*
 * The union of in's lines and every hold's of p in *u; how many lines the holds added (0: in's
 * own are all), or -ENOMEM.
 */
static int dsp_union_with(const struct dsp_proc *p, const struct ipc_provider *in, struct buf *u)
{
    const char *val = NULL;
    size_t len = 0;
    if (dsspec_args_value(in->arguments, &val, &len) && dsspec_lines_add(u, val, len) < 0) {
        return -ENOMEM;
    }
    return dsp_union(p, u);
}

/*
 * A session with the provider (its index which in in) starts on p: its own lines are held, and
 * when the other holds have lines it lacks, j->cfg carries the union (j->mem[] freed by the
 * caller). *hold: NULL when nothing could be kept (out of memory: the session goes as given).
 */
static void dsp_join(uv_loop_t *loop, const struct ipc_endpoint *ep,
                     const struct dsession_config *cfg, size_t which, struct dsession_joined *j,
                     struct dsp_hold **hold)
{
    *hold = NULL;
    const struct ipc_provider *in = &j->cfg.providers[which];
    bool created = false;
    struct dsp_proc *p = dsp_get(loop, ep, &created);
    /* its own lines: those of the caller's configuration (not what a keeper joined) */
    struct dsp_hold *h = p != NULL ? dsp_hold_new(cfg->collect->providers[which].arguments) : NULL;
    /* what it sends: the lines it goes with (a keeper's included), then every hold's */
    struct buf u;
    buf_init(&u, 0);
    int others = h != NULL ? dsp_union_with(p, in, &u) : -ENOMEM;
    char *args = NULL;
    struct ipc_provider *v = others > 0 ? calloc(j->cfg.provider_count, sizeof(*v)) : NULL;
    if (others < 0 ||
        (others > 0 && (v == NULL || dsspec_args_set(in->arguments, buf_cstr(&u), &args) != 0))) {
        buf_fini(&u);
        free(v);
        if (h != NULL) {
            free(h->lines);
            free(h);
        }
        log_warn(cat, "%s: a DiagnosticSource session goes without the other sessions' lines (%s)",
                 ep->path != NULL ? ep->path : "?", agent_strerror(UV_ENOMEM));
        if (created) {
            dsp_maybe_free(p);
        }
        return;
    }
    buf_fini(&u);
    if (others > 0) {
        memcpy(v, j->cfg.providers, j->cfg.provider_count * sizeof(*v));
        v[which].arguments = args;
        free(j->mem[0]); /* the keeper's copy, if any: its lines are in args */
        j->mem[0] = v;
        j->cfg.providers = v;
        free(j->mem[1]);
        j->mem[1] = args;
        log_info(cat,
                 "%s: a DiagnosticSource session also carries the FilterAndPayloadSpecs lines of "
                 "the %zu other session(s) reading it (one list per process)",
                 ep->path != NULL ? ep->path : "?", p->nholds);
    }
    h->p = p;
    h->gen = ++p->gen;
    h->next = p->holds;
    p->holds = h;
    p->nholds++;
    p->adm = cfg->admission;
    p->start_timeout_ms = cfg->start_timeout_ms;
    p->stop_timeout_ms = cfg->stop_timeout_ms;
    *hold = h;
}

/* That session is over in the runtime (or never reached it: had_session false). */
static void dsp_left(struct dsp_hold *h, bool had_session)
{
    if (h == NULL) {
        return;
    }
    struct dsp_proc *p = h->p;
    for (struct dsp_hold **hh = &p->holds; *hh != NULL; hh = &(*hh)->next) {
        if (*hh == h) {
            *hh = h->next;
            p->nholds--;
            break;
        }
    }
    free(h->lines);
    free(h);
    if (had_session && (p->holds != NULL || p->r_live)) {
        p->r_self_ends = 0; /* a session's end: the refresher that follows may be retried once */
        dsp_refresh(p);
        return;
    }
    if (p->holds == NULL && p->r_live) { /* the refresher goes with the last hold */
        p->r_redo = false;
        if (p->rs != NULL && !p->r_stopping) {
            p->r_stopping = true;
            ipc_session_stop(p->rs, p->stop_timeout_ms);
        }
        return;
    }
    dsp_maybe_free(p);
}

/* Whether a hold that joined after gen has its session acknowledged already. */
static bool dsp_newer_started(const struct dsp_proc *p, uint64_t gen)
{
    for (const struct dsp_hold *h = p->holds; h != NULL; h = h->next) {
        if (h->gen > gen && h->started) {
            return true;
        }
    }
    return false;
}

/* A held session's start is acknowledged: its Enable set the union of the holds before it. A
 * hold that joined after it but whose session the runtime acknowledged first was replaced by it
 * (the runtime runs the requests of several connections in its own order): set them again. */
static void dsp_started(struct dsp_hold *h)
{
    h->started = true;
    if (dsp_newer_started(h->p, h->gen)) {
        log_info(cat,
                 "%s: DiagnosticSource sessions started out of order: their lines are set again",
                 h->p->ep.path != NULL ? h->p->ep.path : "?");
        dsp_refresh(h->p);
    }
}

void dsession_close_specs(uv_loop_t *loop)
{
    dsp_closed = loop;
    for (struct dsp_proc *p = dsp_procs; p != NULL; p = p->next) {
        if (p->loop == loop && p->rs != NULL && !p->r_stopping) {
            p->r_redo = false;
            p->r_stopping = true;
            ipc_session_stop(p->rs, p->stop_timeout_ms);
        }
    }
}

/* The one end: the final callback, then the dsession is freed. */
static void ds_end(struct dsession *ds, int status, uint32_t hresult, const char *reason)
{
    ds->sess = NULL;
    if (status == 0) {
        ds->c->finish(ds->ctx, reason);
    } else {
        ds->c->error(ds->ctx, status, hresult, reason);
    }
    free(ds);
}

static void ds_on_started(void *ud, uint64_t session_id, int version)
{
    struct dsession *ds = ud;
    if (ds->hold != NULL) {
        dsp_started(ds->hold);
    }
    if (ds->c->started != NULL) {
        ds->c->started(ds->ctx, session_id, version);
    }
}

static void ds_on_data(void *ud, const uint8_t *p, size_t n)
{
    struct dsession *ds = ud;
    int rc = ds->c->feed(ds->ctx, p, n);
    if (rc == 0) {
        return;
    }
    /* An unreadable stream: the runtime's session is stopped in the background, ours ends now. */
    char why[256] = "";
    if (ds->c->describe != NULL) {
        ds->c->describe(ds->ctx, rc, why, sizeof(why));
    }
    char reason[DS_REASON_MAX];
    snprintf(reason, sizeof(reason), "the event stream cannot be read: %s",
             why[0] != '\0' ? why : agent_strerror(rc));
    ipc_session_abort(ds->sess);
    ds_end(ds, AGENT_E_PROTO, 0, reason);
}

static void ds_on_end(void *ud, int status, uint32_t hresult)
{
    struct dsession *ds = ud;
    char reason[DS_REASON_MAX];
    ipc_session_end_reason(status, hresult, ds->stopping, reason, sizeof(reason));
    ds_end(ds, status, hresult, reason);
}

static const struct ipc_session_callbacks ds_callbacks = {
    .on_started = ds_on_started, .on_data = ds_on_data, .on_end = ds_on_end};

int dsession_start(uv_loop_t *loop, const struct ipc_endpoint *ep,
                   const struct dsession_config *cfg, const struct dsession_consumer *consumer,
                   void *ctx, struct dsession **out)
{
    if (cfg == NULL || cfg->collect == NULL || cfg->admission == NULL ||
        cfg->start_timeout_ms == 0 || cfg->stop_timeout_ms == 0 || consumer == NULL ||
        consumer->feed == NULL || consumer->finish == NULL || consumer->error == NULL) {
        return AGENT_E_INVAL;
    }
    struct dsession *ds = calloc(1, sizeof(*ds));
    if (ds == NULL) {
        return UV_ENOMEM;
    }
    ds->c = consumer;
    ds->ctx = ctx;
    ds->stop_timeout_ms = cfg->stop_timeout_ms;
    struct dsession_joined j = {.cfg = *cfg->collect};
    bool joined = !cfg->keeper_own && keeper != NULL && keeper->loop == loop &&
                  keeper->join(keeper->ud, ep, cfg->collect, &j) == 1;
    if (!joined) {
        j.cfg = *cfg->collect; /* whatever a declining keeper left there */
    }
    struct dsp_hold *hold = NULL;
    for (size_t k = 0; k < j.cfg.provider_count; k++) {
        if (strcasecmp(j.cfg.providers[k].name, DSSPEC_PROVIDER) == 0) {
            dsp_join(loop, ep, cfg, k, &j, &hold);
            break;
        }
    }
    struct ds_joined_note *note = joined || hold != NULL ? malloc(sizeof(*note)) : NULL;
    int rc = (joined || hold != NULL) && note == NULL
                 ? UV_ENOMEM
                 : ipc_session_start(loop, cfg->admission, ep, &j.cfg, cfg->start_timeout_ms,
                                     &ds_callbacks, ds, &ds->sess);
    free(j.mem[0]);
    free(j.mem[1]);
    if (rc != 0) {
        free(note);
        free(ds);
        if (joined) { /* never sent: the runtime's set is as it was */
            keeper->left(keeper->ud, j.key, false);
        }
        dsp_left(hold, false);
        return rc;
    }
    if (note != NULL) {
        *note = (struct ds_joined_note){.loop = loop, .key = j.key, .keeper = joined, .hold = hold};
        ipc_session_when_freed(ds->sess, ds_on_freed, note);
    }
    ds->hold = hold; /* valid until ds_on_freed, which comes after every callback of ds */
    if (cfg->stop_at_once) {
        dsession_stop(ds); /* sent as soon as the session id is known */
    }
    *out = ds;
    return 0;
}

void dsession_stop(struct dsession *ds)
{
    if (ds->stopping || ds->sess == NULL) {
        return;
    }
    ds->stopping = true;
    ipc_session_stop(ds->sess, ds->stop_timeout_ms);
}

void dsession_pause(struct dsession *ds)
{
    if (ds->sess != NULL) {
        ipc_session_pause(ds->sess);
    }
}

void dsession_resume(struct dsession *ds)
{
    if (ds->sess != NULL) {
        ipc_session_resume(ds->sess);
    }
}

uint8_t *dsession_take_buffer(struct dsession *ds)
{
    return ds->sess != NULL ? ipc_session_take_buffer(ds->sess) : NULL;
}

void dsession_abort(struct dsession *ds)
{
    if (ds == NULL) {
        return;
    }
    if (ds->sess != NULL) {
        ipc_session_abort(ds->sess);
    }
    free(ds);
}
