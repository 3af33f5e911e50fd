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

#include "err.h"

#define DS_REASON_MAX 320

struct dsession {
    struct ipc_session *sess; /* NULL once it ended or was aborted */
    const struct dsession_consumer *c;
    void *ctx;
    uint64_t stop_timeout_ms;
    bool stopping; /* dsession_stop asked (or stop_at_once) */
};

/* A session that carries the keeper's lines: told to the keeper when the runtime is done with
 * it (ipc_session_when_freed), which may be after the dsession itself is gone. */
struct ds_joined_note {
    uv_loop_t *loop;
    uint64_t key;
};

static const struct dsession_keeper *keeper; /* dsession_set_keeper */

void dsession_set_keeper(const struct dsession_keeper *k)
{
    keeper = k;
}

/* A session that carried the keeper's lines is over in the runtime (its StopTracing answered,
 * also after an abort, or the cleanup bound passed): the keeper (still the same loop's) is told,
 * with whether the runtime had (or may have had) the session, i.e. whether its set was replaced. */
static void ds_on_freed(void *ud, bool had_session)
{
    struct ds_joined_note *n = ud;
    if (keeper != NULL && keeper->loop == n->loop) {
        keeper->left(keeper->ud, n->key, had_session);
    }
    free(n);
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
    struct ds_joined_note *note = joined ? malloc(sizeof(*note)) : NULL;
    int rc = joined && note == NULL
                 ? UV_ENOMEM
                 : ipc_session_start(loop, cfg->admission, ep, joined ? &j.cfg : cfg->collect,
                                     cfg->start_timeout_ms, &ds_callbacks, ds, &ds->sess);
    free(j.mem[0]);
    free(j.mem[1]);
    if (rc != 0) {
        free(note);
        free(ds);
        if (joined) { /* never sent: the runtime's set is as it was */
            keeper->left(keeper->ud, j.key, false);
        }
        return rc;
    }
    if (note != NULL) {
        *note = (struct ds_joined_note){.loop = loop, .key = j.key};
        ipc_session_when_freed(ds->sess, ds_on_freed, note);
    }
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
