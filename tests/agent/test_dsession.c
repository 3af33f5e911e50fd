/* SPDX-License-Identifier: MIT */
/*
 * agent/dsession against the scripted fake runtime (tests/support/fake_runtime.c), one private
 * loop per test (tests/ipc/ipc_test_loop.c). The consumer below records every call; it hashes
 * the bytes it is fed, so "same length, same hash" as the fake's own count means the whole
 * stream reached it, in order. Every test ends with no session counted in the admission and the
 * fixture's uv_loop_close() == 0 (no handle leaked).
 */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bufpool.h"
#include "dsession.h"
#include "dsspec.h"
#include "err.h"
#include "fake_runtime.h"
#include "ipc_test_loop.h"
#include "timebound.h"

static struct ipc_session_admission sessions;

/* ---- the consumer ------------------------------------------------------------------------ */

struct rec {
    struct dsession *ds;
    int started;
    int version;
    uint64_t nbytes;
    uint64_t hash;
    int feeds;
    int finished;
    int errors;
    int code;
    uint32_t hresult;
    char reason[400];
    uint64_t t_end;
    uint64_t refuse_at;  /* feed answers AGENT_E_PROTO once nbytes >= this (0: never) */
    uint64_t stop_at;    /* dsession_stop once nbytes >= this (0: never) */
    uint64_t abort_at;   /* dsession_abort once nbytes >= this (0: never) */
    int feeds_after_end; /* calls after the final one (must stay 0) */
    bool take;           /* feed takes each read buffer (dsession_take_buffer) and frees it */
    int taken;           /* buffers taken, each holding the view feed got */
    int taken_twice;     /* a second take in the same feed that did not answer NULL */
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    r->hash = FAKE_FNV_INIT;
}

static int ended(const struct rec *r)
{
    return r->finished + r->errors;
}

static void c_started(void *ctx, uint64_t id, int version)
{
    struct rec *r = ctx;
    assert_true(id != 0);
    r->started++;
    r->version = version;
}

static int c_feed(void *ctx, const uint8_t *p, size_t n)
{
    struct rec *r = ctx;
    if (ended(r) > 0) {
        r->feeds_after_end++;
    }
    r->feeds++;
    r->nbytes += n;
    r->hash = fake_fnv1a(r->hash, p, n);
    if (r->take) {
        uint8_t *base = dsession_take_buffer(r->ds);
        assert_non_null(base);
        assert_true(p >= base && p + n <= base + DSESSION_READ_SIZE);
        r->taken++;
        r->taken_twice += dsession_take_buffer(r->ds) != NULL;
        bufpool_release(
            base); /* the view is the caller's now: the session reads into a new buffer */
    }
    if (r->refuse_at != 0 && r->nbytes >= r->refuse_at) {
        return AGENT_E_PROTO;
    }
    if (r->stop_at != 0 && r->nbytes >= r->stop_at) {
        r->stop_at = 0;
        dsession_stop(r->ds);
        dsession_stop(r->ds); /* idempotent */
    }
    if (r->abort_at != 0 && r->nbytes >= r->abort_at) {
        r->abort_at = 0;
        dsession_abort(r->ds);
        r->ds = NULL;
    }
    return 0;
}

static void c_describe(void *ctx, int rc, char *out, size_t cap)
{
    struct rec *r = ctx;
    snprintf(out, cap, "decoder said no (%d) after %llu bytes", rc, (unsigned long long)r->nbytes);
}

static void c_finish(void *ctx, const char *how)
{
    struct rec *r = ctx;
    r->finished++;
    snprintf(r->reason, sizeof(r->reason), "%s", how);
    r->t_end = tl_ms();
}

static void c_error(void *ctx, int code, uint32_t hresult, const char *reason)
{
    struct rec *r = ctx;
    r->errors++;
    r->code = code;
    r->hresult = hresult;
    snprintf(r->reason, sizeof(r->reason), "%s", reason);
    r->t_end = tl_ms();
}

static const struct dsession_consumer consumer = {.started = c_started,
                                                  .feed = c_feed,
                                                  .describe = c_describe,
                                                  .finish = c_finish,
                                                  .error = c_error};

static bool rec_ended(void *ud)
{
    return ended(ud) > 0;
}

static bool rec_started(void *ud)
{
    return ((struct rec *)ud)->started > 0;
}

static bool no_live_sessions(void *ud)
{
    (void)ud;
    return sessions.live == 0;
}

/* ---- fixture ----------------------------------------------------------------------------- */

struct fixture {
    struct test_loop *tl;
    char dir[64];
    struct fake_runtime *fake;
};

static void fixture_fake(struct fixture *fx, struct test_loop *tl,
                         const struct fake_trace_config *trace)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    struct fake_runtime_config cfg = {.pid = 4243, .key = 7};
    cfg.trace = *trace;
    assert_int_equal(fake_runtime_start(&tl->loop, fx->dir, &cfg, &fx->fake), 0);
}

/* Every session gone (freed, its StopTracing answered) before the fake goes. */
static void fixture_done(struct fixture *fx)
{
    assert_true(tl_run_until(fx->tl, no_live_sessions, NULL, 3000));
    tl_close_fake(fx->tl, fx->fake);
    fake_rmdir(fx->dir);
}

static struct fake_session_info fake_session(struct fixture *fx, unsigned idx)
{
    struct fake_session_info si;
    assert_int_equal(fake_runtime_session(fx->fake, idx, &si), 0);
    return si;
}

static const struct ipc_provider provider = {
    .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4};
static const struct ipc_collect_config collect = {
    .buffer_mb = 16, .format = 1, .providers = &provider, .provider_count = 1};

static struct dsession_config config(uint64_t start_ms, uint64_t stop_ms)
{
    struct dsession_config c = {.collect = &collect,
                                .admission = &sessions,
                                .start_timeout_ms = start_ms,
                                .stop_timeout_ms = stop_ms};
    return c;
}

static void start(struct fixture *fx, struct rec *r, const struct dsession_config *cfg)
{
    assert_int_equal(dsession_start(&fx->tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx->fake)),
                                    cfg, &consumer, r, &r->ds),
                     0);
    assert_non_null(r->ds);
    assert_int_equal(r->started + r->feeds + ended(r), 0); /* nothing from inside the call */
}

/* A fake scripted by t, a session with roomy timeouts started on it and run to its end (r is
 * set up by the caller: rec_init and its scripted reactions). */
static void run_to_end(struct fixture *fx, struct test_loop *tl, const struct fake_trace_config *t,
                       struct rec *r)
{
    fixture_fake(fx, tl, t);
    struct dsession_config cfg = config(2000, 3000);
    start(fx, r, &cfg);
    assert_true(tl_run_until(fx->tl, rec_ended, r, 5000));
    assert_int_equal(ended(r), 1);
}

/* A fake that streams filler until stopped. */
static const struct fake_trace_config streaming = {.filler_bytes = UINT64_MAX, .interval_ms = 2};

/* ---- tests ------------------------------------------------------------------------------- */

/* feed gets the whole stream in order; our stop ends it with finish("stopped"). */
static void test_dsession_feed_finish(void **state)
{
    struct fixture fx;
    static struct rec r;
    rec_init(&r);
    r.stop_at = 64 * 1024;
    run_to_end(&fx, *state, &streaming, &r);
    assert_int_equal(r.started, 1);
    assert_int_equal(r.version, 5);
    assert_int_equal(r.finished, 1);
    assert_int_equal(r.errors, 0);
    assert_string_equal(r.reason, "stopped");
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_true(si.end_tag);
    assert_int_equal(r.nbytes, si.stream_bytes);
    assert_true(r.hash == si.hash);
    assert_true(r.nbytes >= 64 * 1024);
    fixture_done(&fx);
    assert_int_equal(r.feeds_after_end, 0);
}

/* The runtime ends the stream by itself (the process goes): finish, in the runtime's words. */
static void test_dsession_runtime_ends(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {
        .fault = FAKE_TRACE_DIE, .filler_bytes = UINT64_MAX, .die_after = 100 * 1024};
    static struct rec r;
    rec_init(&r);
    run_to_end(&fx, *state, &t, &r);
    if (r.finished == 1) {
        assert_string_equal(r.reason, "the runtime ended the session");
    } else { /* a reset when the fake died with bytes unread */
        assert_int_equal(r.code, UV_ECONNRESET);
        assert_non_null(strstr(r.reason, "session failed: "));
    }
    fixture_done(&fx);
}

/* A runtime already gone: its socket is there but nobody listens. One error, no finish. */
static void test_dsession_runtime_gone(void **state)
{
    struct test_loop *tl = *state;
    char dir[64], path[256];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    assert_int_equal(fake_stale_socket(dir, 4244, 1, path, sizeof(path)), 0);
    struct dsession_config cfg = config(2000, 3000);
    static struct rec r;
    rec_init(&r);
    struct dsession *ds = NULL;
    int rc = dsession_start(&tl->loop, IPC_ENDPOINT_PATH(path), &cfg, &consumer, &r, &ds);
    if (rc == 0) {
        assert_true(tl_run_until(tl, rec_ended, &r, 3000));
        assert_int_equal(r.errors, 1);
        assert_int_equal(r.finished + r.started + r.feeds, 0);
        assert_int_equal(r.code, UV_ECONNREFUSED);
        assert_non_null(strstr(r.reason, "session failed: "));
    } else {
        assert_int_equal(rc, UV_ECONNREFUSED);
        assert_int_equal(ended(&r), 0);
    }
    assert_true(tl_run_until(tl, no_live_sessions, NULL, 3000));
    fake_rmdir(dir);
}

/* The runtime refuses: error with its HRESULT and one reason that names it. */
static void test_dsession_refused(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_ERROR, .error_hresult = 0x80131384};
    static struct rec r;
    rec_init(&r);
    run_to_end(&fx, *state, &t, &r);
    assert_int_equal(r.errors, 1);
    assert_int_equal(r.finished + r.started, 0);
    assert_int_equal(r.code, AGENT_E_RUNTIME);
    assert_true(r.hresult == 0x80131384u);
    assert_string_equal(r.reason, "the runtime refused the session (HRESULT 0x80131384)");
    fixture_done(&fx);
}

/* The decoder refuses a piece: error(AGENT_E_PROTO) with its words, nothing fed after, and the
 * runtime's session is still stopped (in the background). */
static void test_dsession_feed_error(void **state)
{
    struct fixture fx;
    static struct rec r;
    rec_init(&r);
    r.refuse_at = 20 * 1024;
    run_to_end(&fx, *state, &streaming, &r);
    assert_int_equal(r.errors, 1);
    assert_int_equal(r.finished, 0);
    assert_int_equal(r.code, AGENT_E_PROTO);
    assert_non_null(strstr(r.reason, "the event stream cannot be read: decoder said no ("));
    int feeds = r.feeds;
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(r.feeds, feeds);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    fixture_done(&fx);

    /* Without describe, the code's words. */
    static const struct dsession_consumer plain = {
        .feed = c_feed, .finish = c_finish, .error = c_error};
    fixture_fake(&fx, *state, &streaming);
    rec_init(&r);
    r.refuse_at = 1;
    struct dsession_config cfg = config(2000, 3000);
    assert_int_equal(dsession_start(&fx.tl->loop, IPC_ENDPOINT_PATH(fake_runtime_path(fx.fake)),
                                    &cfg, &plain, &r, &r.ds),
                     0);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    char want[300];
    snprintf(want, sizeof(want), "the event stream cannot be read: %s",
             agent_strerror(AGENT_E_PROTO));
    assert_string_equal(r.reason, want);
    fixture_done(&fx);
}

/* Stopped before the runtime answered: the stop goes out once the id is known; finish. The same
 * with stop_at_once, which a rundown-only session uses. */
static void test_dsession_stop_before_start(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = 8192, .reply_delay_ms = 100};
    for (int once = 0; once <= 1; once++) {
        fixture_fake(&fx, *state, &t);
        struct dsession_config cfg = config(2000, 3000);
        cfg.stop_at_once = once == 1;
        static struct rec r;
        rec_init(&r);
        start(&fx, &r, &cfg);
        if (!once) {
            dsession_stop(r.ds);
        }
        assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
        assert_int_equal(r.started, 1);
        assert_int_equal(r.finished, 1);
        assert_string_equal(r.reason, "stopped");
        struct fake_session_info si = fake_session(&fx, 0);
        assert_int_equal(si.stops, 1);
        assert_true(si.end_tag);
        assert_int_equal(r.nbytes, si.stream_bytes);
        fixture_done(&fx);
    }
}

/* The timeouts are the caller's: a silent runtime ends the start at start_timeout_ms, a stream
 * that never ends after StopTracing at stop_timeout_ms. */
static void test_dsession_timeouts(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_SILENT};
    fixture_fake(&fx, *state, &t);
    struct dsession_config cfg = config(200, 3000);
    static struct rec r;
    rec_init(&r);
    uint64_t t0 = tl_ms();
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.errors, 1);
    assert_int_equal(r.code, AGENT_E_TIMEOUT);
    assert_non_null(strstr(r.reason, "session failed: "));
    assert_true(r.t_end - t0 + 10 >= 200);
    ASSERT_BELOW_MS(r.t_end - t0, 1500);
    fake_runtime_kill(fx.fake);
    fixture_done(&fx);

    t = (struct fake_trace_config){
        .fault = FAKE_TRACE_NO_END, .filler_bytes = UINT64_MAX, .interval_ms = 5};
    fixture_fake(&fx, *state, &t);
    cfg = config(2000, 300);
    rec_init(&r);
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    t0 = tl_ms();
    dsession_stop(r.ds);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.errors, 1);
    assert_int_equal(r.code, AGENT_E_TIMEOUT);
    assert_true(r.t_end - t0 + 10 >= 300);
    ASSERT_BELOW_MS(r.t_end - t0, 1800);
    fake_runtime_kill(fx.fake); /* the drain in the background ends with the runtime */
    fixture_done(&fx);
}

/* Abort: no callback ever, the runtime's session stopped in the background. */
static void test_dsession_abort(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, &streaming);
    struct dsession_config cfg = config(2000, 3000);
    static struct rec r;
    rec_init(&r);
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    int feeds = r.feeds;
    dsession_abort(r.ds);
    dsession_abort(NULL);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(r.feeds, feeds);
    assert_int_equal(ended(&r), 0);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    fixture_done(&fx);

    /* From inside feed (a consumer whose reader went away while it wrote) */
    fixture_fake(&fx, *state, &streaming);
    rec_init(&r);
    r.abort_at = 16 * 1024;
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_null(r.ds);
    feeds = r.feeds;
    tl_run_for(fx.tl, 50);
    assert_int_equal(r.feeds, feeds);
    assert_int_equal(ended(&r), 0);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    fixture_done(&fx);
}

/* Zero-copy: feed takes each read buffer, the view lies inside it, the session reads on into a
 * new one (the whole stream still arrives, in order; ASan sees a buffer used after its taker
 * freed it); outside feed there is nothing to take. */
static void test_dsession_take_buffer(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, &streaming);
    struct dsession_config cfg = config(2000, 3000);
    static struct rec r;
    rec_init(&r);
    r.take = true;
    r.stop_at = 256 * 1024;
    start(&fx, &r, &cfg);
    assert_null(dsession_take_buffer(r.ds)); /* not inside feed */
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 5000));
    assert_int_equal(r.finished, 1);
    assert_string_equal(r.reason, "stopped");
    assert_int_equal(r.taken, r.feeds);
    assert_true(r.taken > 1);
    assert_int_equal(r.taken_twice, 0);
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(r.nbytes, si.stream_bytes);
    assert_true(r.hash == si.hash);
    fixture_done(&fx);
}

/* ---- the spec-set keeper (dsession.h) ------------------------------------------------------ */

static const struct ipc_provider joined_provider = {.name = "Joined-Provider", .level = 4};

struct keeper_rec {
    struct fixture *fx;
    int joins;
    int lefts;
    uint64_t key;
    bool had_session;       /* what the last left said */
    unsigned stops_at_left; /* StopTracing requests the fake had seen when left came */
    bool open_at_left;      /* the fake's stream was still open then */
};

static int k_join(void *ud, const struct ipc_endpoint *ep, const struct ipc_collect_config *in,
                  struct dsession_joined *j)
{
    struct keeper_rec *k = ud;
    (void)ep;
    k->joins++;
    struct ipc_provider *v = calloc(in->provider_count + 1, sizeof(*v));
    assert_non_null(v);
    memcpy(v, in->providers, in->provider_count * sizeof(*v));
    v[in->provider_count] = joined_provider;
    j->cfg = *in;
    j->cfg.providers = v;
    j->cfg.provider_count = in->provider_count + 1;
    j->mem[0] = v;
    j->key = 77;
    return 1;
}

static void k_left(void *ud, uint64_t key, bool had_session)
{
    struct keeper_rec *k = ud;
    k->lefts++;
    k->key = key;
    k->had_session = had_session;
    struct fake_session_info si;
    if (had_session && fake_runtime_session(k->fx->fake, 0, &si) == 0) { /* none when refused */
        k->stops_at_left = si.stops;
        k->open_at_left = si.stream_open;
    }
}

static bool k_left_came(void *ud)
{
    return ((const struct keeper_rec *)ud)->lefts > 0;
}

/* Whether the fake's last CollectTracing request holds text (as UTF-16LE). */
static bool request_has(const struct fixture *fx, const char *text)
{
    uint8_t u16[128];
    size_t n = strlen(text);
    assert_true(2 * n <= sizeof(u16));
    for (size_t i = 0; i < n; i++) {
        u16[2 * i] = (uint8_t)text[i];
        u16[2 * i + 1] = 0;
    }
    for (uint8_t id = 0x02; id <= 0x06; id++) {
        size_t len = 0;
        const uint8_t *req = fake_runtime_last_request(fx->fake, id, &len);
        if (req != NULL && len >= 2 * n && memmem(req, len, u16, 2 * n) != NULL) {
            return true;
        }
    }
    return false;
}

/* Whether the fake's last CollectTracing request names the keeper's provider. */
static bool request_joined(const struct fixture *fx)
{
    return request_has(fx, joined_provider.name);
}

/* Every session is shown to the keeper, whoever starts it (but the keeper's own): it starts with
 * the keeper's configuration, and left(key) follows its end, a stop's or an abort's. */
static void test_dsession_keeper(void **state)
{
    struct fixture fx;
    static struct keeper_rec k;
    memset(&k, 0, sizeof(k));
    k.fx = &fx;
    /* static: the keeper stays registered if an assertion leaves this test early */
    static struct dsession_keeper keeper;
    keeper = (struct dsession_keeper){
        .loop = &((struct test_loop *)*state)->loop, .ud = &k, .join = k_join, .left = k_left};
    dsession_set_keeper(&keeper);
    static struct rec r;

    /* stopped: joined, then left once it ended */
    rec_init(&r);
    r.stop_at = 16 * 1024;
    run_to_end(&fx, *state, &streaming, &r);
    assert_true(r.finished == 1 && k.joins == 1 && request_joined(&fx));
    assert_true(tl_run_until(fx.tl, k_left_came, &k, 3000));
    assert_true(k.lefts == 1 && k.key == 77 && k.had_session);
    fixture_done(&fx);

    /* aborted: left once the runtime's session is stopped (StopTracing in the background) and
     * its stream closed, not at the abort */
    memset(&k, 0, sizeof(k));
    k.fx = &fx;
    fixture_fake(&fx, *state, &streaming);
    struct dsession_config cfg = config(2000, 3000);
    rec_init(&r);
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    dsession_abort(r.ds);
    assert_int_equal(k.lefts, 0);
    assert_true(tl_run_until(fx.tl, k_left_came, &k, 3000));
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_true(k.joins == 1 && k.lefts == 1 && k.key == 77);
    assert_int_equal(k.stops_at_left, 1);
    assert_false(k.open_at_left);
    fixture_done(&fx);

    /* refused: the runtime never had the session (its set was not replaced): left says so */
    memset(&k, 0, sizeof(k));
    k.fx = &fx;
    struct fake_trace_config refuse = {.fault = FAKE_TRACE_ERROR, .error_hresult = 0x80131384};
    rec_init(&r);
    run_to_end(&fx, *state, &refuse, &r);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_true(tl_run_until(fx.tl, k_left_came, &k, 3000));
    assert_true(r.errors == 1 && k.joins == 1 && k.lefts == 1 && k.key == 77);
    assert_false(k.had_session);
    fixture_done(&fx);

    /* the keeper's own session: not shown to it */
    memset(&k, 0, sizeof(k));
    k.fx = &fx;
    fixture_fake(&fx, *state, &streaming);
    cfg.keeper_own = true;
    rec_init(&r);
    r.stop_at = 16 * 1024;
    start(&fx, &r, &cfg);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 5000));
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(k.joins + k.lefts, 0);
    assert_false(request_joined(&fx));
    fixture_done(&fx);
    dsession_set_keeper(NULL);
}

/* ---- the one-spec-set rule for DiagnosticSource (dsession.h) ----------------------------------
 */

struct created {
    const struct fixture *fx;
    unsigned n;
};

static bool sessions_created(void *ud)
{
    const struct created *c = ud;
    return fake_runtime_sessions(c->fx->fake) >= c->n;
}

/* A session with the provider starts with every live one's lines; once one that had it ends, a
 * refresher asks for the others' lines again (and only theirs), and it goes with the last one. */
static void test_dsession_spec_sets(void **state)
{
    struct fixture fx;
    fixture_fake(&fx, *state, &streaming);
    static const struct ipc_provider pa = {.name = DSSPEC_PROVIDER,
                                           .keywords = 0x3,
                                           .level = 5,
                                           .arguments = "FilterAndPayloadSpecs=\"LineA\""};
    static const struct ipc_provider pb[] = {
        {.name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4},
        {.name = "microsoft-diagnostics-diagnosticsource",
         .keywords = 0x3,
         .level = 5,
         .arguments = "k=1;FilterAndPayloadSpecs=\"LineB\r\nLineA\""}};
    struct ipc_collect_config ca = {
        .buffer_mb = 16, .format = 1, .providers = &pa, .provider_count = 1};
    struct ipc_collect_config cb = {
        .buffer_mb = 16, .format = 1, .providers = pb, .provider_count = 2};
    struct dsession_config cfa = config(2000, 3000);
    cfa.collect = &ca;
    struct dsession_config cfb = config(2000, 3000);
    cfb.collect = &cb;
    static struct rec ra;
    static struct rec rb;
    rec_init(&ra);
    rec_init(&rb);
    start(&fx, &rb, &cfb);
    assert_true(tl_run_until(fx.tl, rec_started, &rb, 2000));
    start(&fx, &ra, &cfa);
    assert_true(tl_run_until(fx.tl, rec_started, &ra, 2000));
    assert_true(request_has(&fx, "LineA") && request_has(&fx, "LineB")); /* A carries B's too */

    /* B ends: its own lines (LineB and LineA) leave; A's (LineA) are asked for again */
    dsession_stop(rb.ds);
    struct created c = {.fx = &fx, .n = 3};
    assert_true(tl_run_until(fx.tl, sessions_created, &c, 3000));
    assert_true(tl_run_until(fx.tl, rec_ended, &rb, 3000));
    assert_true(request_has(&fx, "LineA") && !request_has(&fx, "LineB"));
    assert_int_equal(sessions.live, 2); /* A and the refresher */

    /* A ends: the refresher goes too, and nothing starts again */
    dsession_stop(ra.ds);
    assert_true(tl_run_until(fx.tl, rec_ended, &ra, 3000));
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    tl_run_for(fx.tl, 50);
    assert_int_equal(fake_runtime_sessions(fx.fake), 3);
    assert_int_equal(sessions.live, 0);
    fixture_done(&fx);
}

/* ---- the one-spec-set rule's strings (dsspec.h) -------------------------------------------- */

static void test_dsspec_strings(void **state)
{
    (void)state;
    const char *v = NULL;
    size_t n = 0;
    assert_false(dsspec_args_value(NULL, &v, &n));
    assert_false(dsspec_args_value("k=\"v;FilterAndPayloadSpecs=no\";z=1", &v, &n));
    assert_true(dsspec_args_value("k=\"a;b\";FilterAndPayloadSpecs=\"A\r\nB\";z=1", &v, &n));
    assert_true(n == 4 && memcmp(v, "A\r\nB", 4) == 0);
    assert_true(dsspec_args_value("FilterAndPayloadSpecs=A;z=1", &v, &n));
    assert_true(n == 1 && v[0] == 'A');

    /* the union: trimmed, no blank line, no line twice */
    struct buf u;
    buf_init(&u, 0);
    assert_int_equal(dsspec_lines_add(&u, " A \r\n\nB\n", strlen(" A \r\n\nB\n")), 2);
    assert_int_equal(dsspec_lines_add(&u, "B\r\nC\nA", strlen("B\r\nC\nA")), 1);
    assert_int_equal(dsspec_lines_add(&u, "AB", 2), 1);
    assert_string_equal(buf_cstr(&u), "A\r\nB\r\nC\r\nAB\r\n");

    static const struct {
        const char *args;
        const char *want;
    } cases[] = {
        {NULL, "FilterAndPayloadSpecs=\"L1\r\nL2\""},
        {"", "FilterAndPayloadSpecs=\"L1\r\nL2\""},
        {"FilterAndPayloadSpecs=\"A/B:-x;y\"", "FilterAndPayloadSpecs=\"L1\r\nL2\""},
        {"FilterAndPayloadSpecs=A;", "FilterAndPayloadSpecs=\"L1\r\nL2\""},
        {"k=\"v;FilterAndPayloadSpecs=no\";FilterAndPayloadSpecs=A;z=1",
         "k=\"v;FilterAndPayloadSpecs=no\";z=1;FilterAndPayloadSpecs=\"L1\r\nL2\""},
        {"k=v", "k=v;FilterAndPayloadSpecs=\"L1\r\nL2\""},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        char *out = NULL;
        assert_int_equal(dsspec_args_set(cases[k].args, "L1\r\nL2\r\n", &out), 0);
        assert_string_equal(out, cases[k].want);
        free(out);
    }
    buf_fini(&u);
}

/* A configuration without its timeouts or a consumer without its calls starts nothing. */
static void test_dsession_invalid(void **state)
{
    struct test_loop *tl = *state;
    static struct rec r;
    rec_init(&r);
    struct dsession *ds = NULL;
    const struct ipc_endpoint *ep = IPC_ENDPOINT_PATH("/nonexistent/dotnet-diagnostic-1-1-socket");
    struct dsession_config cfg = config(0, 3000);
    assert_int_equal(dsession_start(&tl->loop, ep, &cfg, &consumer, &r, &ds), AGENT_E_INVAL);
    cfg = config(2000, 0);
    assert_int_equal(dsession_start(&tl->loop, ep, &cfg, &consumer, &r, &ds), AGENT_E_INVAL);
    cfg = config(2000, 3000);
    cfg.collect = NULL;
    assert_int_equal(dsession_start(&tl->loop, ep, &cfg, &consumer, &r, &ds), AGENT_E_INVAL);
    cfg = config(2000, 3000);
    struct dsession_consumer no_error = consumer;
    no_error.error = NULL;
    assert_int_equal(dsession_start(&tl->loop, ep, &cfg, &no_error, &r, &ds), AGENT_E_INVAL);
    assert_null(ds);
    assert_int_equal(sessions.live, 0);
    tl_run_for(tl, 20);
    assert_int_equal(ended(&r), 0);
}

int main(void)
{
#define LOOP_TEST(f) cmocka_unit_test_setup_teardown(f, tl_setup, tl_teardown)
    const struct CMUnitTest tests[] = {
        LOOP_TEST(test_dsession_feed_finish),  LOOP_TEST(test_dsession_runtime_ends),
        LOOP_TEST(test_dsession_runtime_gone), LOOP_TEST(test_dsession_refused),
        LOOP_TEST(test_dsession_feed_error),   LOOP_TEST(test_dsession_stop_before_start),
        LOOP_TEST(test_dsession_timeouts),     LOOP_TEST(test_dsession_abort),
        LOOP_TEST(test_dsession_invalid),      LOOP_TEST(test_dsession_take_buffer),
        LOOP_TEST(test_dsession_keeper),       cmocka_unit_test(test_dsspec_strings),
        LOOP_TEST(test_dsession_spec_sets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
