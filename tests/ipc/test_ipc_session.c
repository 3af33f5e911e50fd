/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "fake_runtime.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "ipc_session.h"
#include "ipc_test_loop.h"
#include "timebound.h"

/* The sessions this test file starts (ipc_session.h): counted until freed. */
static struct ipc_session_admission sessions;

/*
 * ipc_session against the scripted fake runtime (tests/support/fake_runtime.c), one private loop
 * per test. The fake hashes every nettrace byte it writes; the recorder below hashes every byte
 * on_data gets, so "same length, same hash" means all bytes arrived, in order. Every test ends
 * with sessions.live back at 0 and the fixture's uv_loop_close() == 0.
 */

#define MS_EQ_ROUGHLY(took, ms) ((took) + 10 >= (ms) && (took) < (ms) + 1500)
/* The cleanup bound the tests of it set (ipc_session_admission.cleanup_timeout_ms; dotmon's
 * Timeouts:SessionCleanupMs, 10 s by default), so they do not wait out the production value. */
#define CLEANUP_MS 300

/* ---- recorder ---------------------------------------------------------------------------- */

struct rec {
    struct ipc_session *s;
    /* what happened */
    int started;
    uint64_t id;
    int version;
    int data_calls;
    uint64_t nbytes;
    uint64_t hash;
    uint8_t head[16];
    uint8_t last;
    int ended;
    int status;
    uint32_t hresult;
    uint64_t bytes_at_end; /* ipc_session_bytes inside on_end */
    uint64_t t_start;
    uint64_t t_started;
    uint64_t t_end;
    bool aborted;
    int calls_after_abort;
    bool paused;
    /* scripted reactions, from inside the callbacks */
    uint64_t pause_at; /* pause once nbytes >= this (0: never) */
    uint64_t stop_at;  /* stop once nbytes >= this (0: never) */
    uint64_t abort_at; /* abort once nbytes >= this (0: never) */
    bool abort_in_started;
    bool pause_in_started;
    bool stop_in_started;
};

static void rec_init(struct rec *r)
{
    memset(r, 0, sizeof(*r));
    r->hash = FAKE_FNV_INIT;
    r->status = 1; /* not a valid status: on_end sets it */
}

static void rec_abort(struct rec *r)
{
    r->aborted = true;
    ipc_session_abort(r->s);
}

static void on_started(void *ud, uint64_t id, int version)
{
    struct rec *r = ud;
    if (r->aborted) {
        r->calls_after_abort++;
    }
    r->started++;
    r->id = id;
    r->version = version;
    r->t_started = tl_ms();
    assert_int_equal(ipc_session_id(r->s), id);
    if (r->pause_in_started) {
        r->paused = true;
        ipc_session_pause(r->s);
    }
    if (r->stop_in_started) {
        ipc_session_stop(r->s, 3000);
    }
    if (r->abort_in_started) {
        rec_abort(r);
    }
}

static void on_data(void *ud, const uint8_t *p, size_t n)
{
    struct rec *r = ud;
    if (r->aborted) {
        r->calls_after_abort++;
    }
    assert_true(n > 0);
    for (size_t i = 0; i < n && r->nbytes + i < sizeof(r->head); i++) {
        r->head[r->nbytes + i] = p[i];
    }
    r->data_calls++;
    r->nbytes += n;
    r->hash = fake_fnv1a(r->hash, p, n);
    r->last = p[n - 1];
    if (r->pause_at != 0 && r->nbytes >= r->pause_at && !r->paused) {
        r->paused = true;
        r->pause_at = 0;
        ipc_session_pause(r->s);
    }
    if (r->stop_at != 0 && r->nbytes >= r->stop_at) {
        r->stop_at = 0;
        ipc_session_stop(r->s, 3000);
        ipc_session_stop(r->s, 1); /* idempotent: the first timeout stays */
    }
    if (r->abort_at != 0 && r->nbytes >= r->abort_at) {
        r->abort_at = 0;
        rec_abort(r);
        ipc_session_abort(r->s); /* twice is harmless */
    }
}

static void on_end(void *ud, int status, uint32_t hresult)
{
    struct rec *r = ud;
    if (r->aborted) {
        r->calls_after_abort++;
    }
    r->ended++;
    r->status = status;
    r->hresult = hresult;
    r->bytes_at_end = ipc_session_bytes(r->s);
    r->t_end = tl_ms();
}

static const struct ipc_session_callbacks rec_cb = {on_started, on_data, on_end};

static bool rec_started(void *ud)
{
    return ((struct rec *)ud)->started > 0;
}

static bool rec_ended(void *ud)
{
    return ((struct rec *)ud)->ended > 0;
}

static bool no_live_sessions(void *ud)
{
    (void)ud;
    return sessions.live == 0 && sessions.started == 0;
}

struct bytes_wait {
    const struct rec *r;
    uint64_t want;
};

static bool rec_has_bytes(void *ud)
{
    struct bytes_wait *w = ud;
    return w->r->nbytes >= w->want;
}

/* ---- fixture ----------------------------------------------------------------------------- */

struct fixture {
    struct test_loop *tl;
    char dir[64];
    struct fake_runtime *fake;
    int fake_closed;
};

static void on_fake_closed(void *ud)
{
    ((struct fixture *)ud)->fake_closed++;
}

static bool fake_is_closed(void *ud)
{
    return ((struct fixture *)ud)->fake_closed > 0;
}

static void fixture_fake(struct fixture *fx, struct test_loop *tl, enum fake_mode mode,
                         const struct fake_trace_config *trace)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    sessions.cleanup_timeout_ms = 0; /* ipc_session's own default (10 s) unless a test sets one */
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    struct fake_runtime_config cfg = {.pid = 4242, .key = 99, .mode = mode};
    if (trace != NULL) {
        cfg.trace = *trace;
    }
    assert_int_equal(fake_runtime_start(&tl->loop, fx->dir, &cfg, &fx->fake), 0);
}

/* Every session must be gone (freed, StopTracing answered) before the fake goes. */
static void fixture_done(struct fixture *fx)
{
    assert_true(tl_run_until(fx->tl, no_live_sessions, NULL, 3000));
    if (fx->fake != NULL) {
        fake_runtime_close(fx->fake, on_fake_closed, fx);
        assert_true(tl_run_until(fx->tl, fake_is_closed, fx, 2000));
    }
    fake_rmdir(fx->dir);
}

static struct fake_session_info fake_session(struct fixture *fx, unsigned idx)
{
    struct fake_session_info si;
    assert_int_equal(fake_runtime_session(fx->fake, idx, &si), 0);
    return si;
}

static const struct ipc_provider gc_provider = {
    .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4};

static struct ipc_collect_config default_cfg(void)
{
    struct ipc_collect_config c = {
        .buffer_mb = 16, .format = 1, .providers = &gc_provider, .provider_count = 1};
    return c;
}

/* Starts a session on the fake; no callback may come from inside the call. */
static void start(struct fixture *fx, struct rec *r, const struct ipc_collect_config *cfg,
                  uint64_t start_timeout_ms)
{
    rec_init(r);
    r->t_start = tl_ms();
    assert_int_equal(ipc_session_start(&fx->tl->loop, &sessions,
                                       IPC_ENDPOINT_PATH(fake_runtime_path(fx->fake)), cfg,
                                       start_timeout_ms, &rec_cb, r, &r->s),
                     0);
    assert_non_null(r->s);
    assert_int_equal(r->started + r->data_calls + r->ended, 0);
    assert_int_equal(ipc_session_id(r->s), 0);
}

/* Starts a session that the fake must refuse as UNKNOWN_COMMAND (no version it knows fits). */
static void start_refused(struct fixture *fx, struct rec *r, const struct ipc_collect_config *cfg)
{
    start(fx, r, cfg, 2000);
    assert_true(tl_run_until(fx->tl, rec_ended, r, 3000));
    assert_int_equal(r->status, AGENT_E_RUNTIME);
    assert_int_equal(r->hresult, IPC_HR_UNKNOWN_COMMAND);
}

/* The stream as the fake wrote it is exactly what on_data delivered. */
static void check_stream(struct fixture *fx, unsigned idx, const struct rec *r, bool complete)
{
    struct fake_session_info si = fake_session(fx, idx);
    assert_int_equal(r->nbytes, si.stream_bytes);
    assert_true(r->hash == si.hash);
    assert_true(r->nbytes >= 102);
    assert_memory_equal(r->head, "Nettrace\x14\x00\x00\x00", 12);
    if (complete) {
        assert_true(si.end_tag);
        assert_int_equal(r->last, 0x01);
    }
}

/* ---- tests ------------------------------------------------------------------------------- */

static void test_session_normal_stream(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {
        .filler_bytes = 512 * 1024, .chunk_bytes = 4096, .interval_ms = 1};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    static struct rec r;
    struct ipc_collect_config cfg = default_cfg();
    start(&fx, &r, &cfg, 2000);
    assert_int_equal(sessions.live, 1);
    assert_int_equal(sessions.started, 0); /* asked for, not yet acknowledged */
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    assert_int_equal(sessions.started, 1);
    assert_int_equal(r.version, 5);
    struct fake_session_info si = fake_session(&fx, 0);
    assert_true(r.id == si.id);
    assert_true(r.id > 0xFFFFFFFFull); /* a 64-bit id survives intact */
    assert_int_equal(si.version, 5);

    /* all filler (at about 4 KiB per ms) arrives before anyone asks to stop */
    struct bytes_wait w = {&r, 102 + 512 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 5000));
    assert_int_equal(ipc_session_bytes(r.s), r.nbytes);
    assert_true(r.data_calls > 10);
    ipc_session_stop(r.s, 2000);
    ipc_session_stop(r.s, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    assert_int_equal(r.hresult, 0);
    assert_int_equal(r.bytes_at_end, r.nbytes);
    check_stream(&fx, 0, &r, true);
    si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_false(si.client_closed);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x01), 1);
    assert_int_equal(fake_runtime_connections(fx.fake), 2); /* the stream + StopTracing */
    tl_run_for(fx.tl, 30);
    assert_int_equal(r.ended, 1);
    fixture_done(&fx);
}

static void test_session_step_down(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.unknown_versions = 1u << 5 | 1u << 4 | 1u << 3,
                                  .filler_bytes = 10000};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    /* The config lives on the stack and is scribbled over after start: the session copied it. */
    char name[64] = "Microsoft-Windows-DotNETRuntime";
    char args[32] = "k=v";
    struct ipc_provider prov = {.name = name, .keywords = 0x1, .level = 4, .arguments = args};
    struct ipc_collect_config cfg = {.buffer_mb = 16,
                                     .format = 1,
                                     .rundown_keyword = IPC_RUNDOWN_DEFAULT,
                                     .providers = &prov,
                                     .provider_count = 1};
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    r.stop_at = 1; /* stop from inside the first on_data */
    memset(name, 'X', sizeof(name) - 1);
    memset(args, 'Y', sizeof(args) - 1);
    memset(&prov, 0xA5, sizeof(prov));
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    assert_int_equal(r.started, 1);
    assert_int_equal(r.version, 2);
    for (uint8_t id = 0x03; id <= 0x06; id++) {
        assert_int_equal(fake_runtime_requests(fx.fake, 0x02, id), 1);
    }
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x02), 0);
    assert_int_equal(fake_runtime_connections(fx.fake), 5); /* a connection per try + the stop */
    /* CollectTracing2: bufMB, format, requestRundown = 1, then the provider, intact */
    size_t len = 0;
    const uint8_t *req = fake_runtime_last_request(fx.fake, 0x03, &len);
    assert_non_null(req);
    assert_int_equal(req[28], 1);
    struct ipc_wr w;
    uint8_t expect[512];
    struct ipc_provider orig = {
        .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4, .arguments = "k=v"};
    struct ipc_collect_config ocfg = cfg;
    ocfg.providers = &orig;
    ipc_wr_init(&w, expect, sizeof(expect));
    assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &ocfg), 0);
    assert_int_equal(len, w.len);
    assert_memory_equal(req, expect, len);
    check_stream(&fx, 0, &r, true);
    assert_int_equal(fake_session(&fx, 0).version, 2);
    fixture_done(&fx);
}

static void test_session_min_version(void **state)
{
    /* An event filter needs CollectTracing5: no step-down at all. */
    struct fixture fx;
    struct fake_trace_config t = {.unknown_versions = 1u << 5};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    uint32_t ids[2] = {1, 2};
    struct ipc_provider prov = gc_provider;
    prov.filter_enable = true;
    prov.event_ids = ids;
    prov.event_id_count = 2;
    struct ipc_collect_config cfg = default_cfg();
    cfg.providers = &prov;
    static struct rec r;
    start_refused(&fx, &r, &cfg);
    assert_int_equal(r.started, 0);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x06), 1);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x05), 0);
    assert_int_equal(fake_runtime_connections(fx.fake), 1);
    fixture_done(&fx);

    /* Disabled stack walks need 3: tries 5, 4, 3 and gives up. */
    t.unknown_versions = 1u << 5 | 1u << 4 | 1u << 3;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    cfg = default_cfg();
    cfg.disable_stackwalk = true;
    start_refused(&fx, &r, &cfg);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x04), 1);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x03), 0);
    assert_int_equal(fake_runtime_connections(fx.fake), 3);
    fixture_done(&fx);
}

static void test_session_rundown_downgrade(void **state)
{
    /* gc-collect's rundown keyword 0x1 needs CollectTracing4; without it, drop the keyword. */
    struct fixture fx;
    struct fake_trace_config t = {.unknown_versions = 1u << 5 | 1u << 4};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    cfg.rundown_keyword = 0x1;
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 3000));
    assert_int_equal(r.version, 3);
    size_t len = 0;
    const uint8_t *req = fake_runtime_last_request(fx.fake, 0x05, &len);
    assert_non_null(req); /* CollectTracing4 was tried with the keyword... */
    assert_int_equal(req[28], 0x01);
    req = fake_runtime_last_request(fx.fake, 0x04, &len);
    assert_non_null(req);         /* ...CollectTracing3 without: */
    assert_int_equal(req[28], 0); /* requestRundown false */
    assert_int_equal(req[29], 1); /* requestStackwalk true */
    ipc_session_stop(r.s, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    fixture_done(&fx);

    /* ...and further down to CollectTracing2 if 3 is unknown too */
    t.unknown_versions = 1u << 5 | 1u << 4 | 1u << 3;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 3000));
    assert_int_equal(r.version, 2);
    req = fake_runtime_last_request(fx.fake, 0x03, &len);
    assert_non_null(req);
    assert_int_equal(req[28], 0);
    rec_abort(&r);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    fixture_done(&fx);

    /* An event filter is another reason for the floor: no downgrade then. */
    t.unknown_versions = 1u << 5;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_provider prov = gc_provider;
    prov.filter_enable = true;
    cfg.providers = &prov;
    start_refused(&fx, &r, &cfg);
    assert_int_equal(fake_runtime_connections(fx.fake), 1);
    fixture_done(&fx);

    /* keep_rundown (a loader-rundown probe): the keyword is the point, so a runtime without
     * CollectTracing4 ends the session instead of a retry without it. */
    t.unknown_versions = 1u << 5 | 1u << 4;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    cfg = default_cfg();
    cfg.rundown_keyword = 0x108;
    cfg.keep_rundown = true;
    start_refused(&fx, &r, &cfg);
    assert_int_equal(r.started, 0);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x06), 1);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x05), 1);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x04), 0);
    assert_int_equal(fake_runtime_connections(fx.fake), 2);
    assert_int_equal(fake_runtime_sessions(fx.fake), 0);
    fixture_done(&fx);
}

static void test_session_error_hresult(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_ERROR, .error_hresult = IPC_HR_FAIL};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, AGENT_E_RUNTIME);
    assert_int_equal(r.hresult, IPC_HR_FAIL);
    assert_int_equal(r.started, 0);
    assert_int_equal(r.data_calls, 0);
    /* not UNKNOWN_COMMAND: no step-down */
    assert_int_equal(fake_runtime_connections(fx.fake), 1);
    tl_run_for(fx.tl, 30);
    assert_int_equal(r.ended, 1);
    fixture_done(&fx);
}

static void test_session_start_timeout(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_SILENT};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 200);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    uint64_t took = r.t_end - r.t_start;
    assert_int_equal(r.status, AGENT_E_TIMEOUT);
    assert_true(MS_EQ_ROUGHLY(took, 200));
    assert_int_equal(r.started, 0);
    /* the complete request went out right after connect (the runtime's thread is not blocked) */
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x06), 1);
    /*
     * The request was written, so a late reply would create a session: the object keeps
     * listening (without callbacks) until the connection ends or its cleanup bound runs out.
     */
    assert_int_equal(sessions.live, 1);
    fake_runtime_kill(fx.fake);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    assert_int_equal(r.ended, 1);
    fixture_done(&fx);
}

static void test_session_start_timeout_late_reply(void **state)
{
    /* The reply comes after the start timeout: its session must still be stopped. */
    struct fixture fx;
    struct fake_trace_config t = {.reply_delay_ms = 400, .filler_bytes = UINT64_MAX};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 150);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, AGENT_E_TIMEOUT);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_false(si.stream_open);
    assert_true(si.stream_open_at_stop);
    assert_false(si.client_closed);
    assert_int_equal(r.started + r.data_calls, 0);
    assert_int_equal(r.ended, 1);
    fixture_done(&fx);
}

static void test_session_pause_resume(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = UINT64_MAX, .chunk_bytes = 4096};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    r.pause_at = 64 * 1024; /* paused from inside on_data */
    struct bytes_wait w = {&r, 64 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    assert_true(r.paused);
    tl_run_for(fx.tl, 300);
    uint64_t got1 = r.nbytes;
    int calls1 = r.data_calls;
    uint64_t wrote1 = fake_runtime_stream_bytes(fx.fake);
    tl_run_for(fx.tl, 300);
    /* nothing delivered while paused, and the fake's writer is blocked, not buffering forever */
    assert_int_equal(r.nbytes, got1);
    assert_int_equal(r.data_calls, calls1);
    assert_int_equal(fake_runtime_stream_bytes(fx.fake), wrote1);
    assert_true(wrote1 > got1); /* the socket buffer holds the backlog */
    assert_true(wrote1 - got1 < 8 * 1024 * 1024);

    /* pause/resume outside callbacks, repeatedly, then for good */
    ipc_session_resume(r.s);
    ipc_session_pause(r.s);
    ipc_session_pause(r.s);
    ipc_session_resume(r.s);
    ipc_session_resume(r.s);
    w.want = wrote1 + 1024 * 1024;
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 5000));
    assert_true(fake_runtime_stream_bytes(fx.fake) >= w.want);

    /* paused while stopping: the end comes once reading resumes */
    ipc_session_pause(r.s);
    ipc_session_stop(r.s, 5000);
    tl_run_for(fx.tl, 200);
    assert_int_equal(r.ended, 0);
    ipc_session_resume(r.s);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 5000));
    assert_int_equal(r.status, 0);
    check_stream(&fx, 0, &r, true);
    fixture_done(&fx);
}

static void test_session_pause_in_started(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = 256 * 1024};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    r.pause_in_started = true;
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    tl_run_for(fx.tl, 200);
    /* at most the read that carried the reply was delivered (one read buffer, 256 KiB) */
    assert_true(r.data_calls <= 1);
    assert_true(r.nbytes <= 256 * 1024);
    ipc_session_resume(r.s);
    struct bytes_wait w = {&r, 102 + 256 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    ipc_session_stop(r.s, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    check_stream(&fx, 0, &r, true);
    fixture_done(&fx);
}

static bool collect_requested(void *ud)
{
    struct fixture *fx = ud;
    return fake_runtime_requests(fx->fake, 0x02, 0x06) > 0;
}

static void test_session_abort_before_id(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.reply_delay_ms = 200, .filler_bytes = UINT64_MAX};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;

    /* still connecting: nothing was written, nothing to stop */
    start(&fx, &r, &cfg, 2000);
    rec_abort(&r);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    tl_run_for(fx.tl, 50);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x06), 0);
    assert_int_equal(fake_runtime_sessions(fx.fake), 0);
    assert_int_equal(r.started + r.data_calls + r.ended, 0);

    /* request written, reply pending: the reply is still read and its id stopped */
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, collect_requested, &fx, 2000));
    rec_abort(&r);
    assert_int_equal(sessions.live, 1);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_false(si.stream_open);
    assert_true(si.stream_open_at_stop);
    assert_false(si.client_closed);
    assert_int_equal(r.started + r.data_calls + r.ended, 0);
    assert_int_equal(fake_runtime_requests(fx.fake, 0x02, 0x01), 1);
    fixture_done(&fx);
}

static void test_session_abort_after_id(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = UINT64_MAX, .chunk_bytes = 8192};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r[3];

    /* from inside on_data */
    start(&fx, &r[0], &cfg, 2000);
    r[0].abort_at = 100 * 1024;
    /* from inside on_started */
    start(&fx, &r[1], &cfg, 2000);
    r[1].abort_in_started = true;
    /* from outside, after some data */
    start(&fx, &r[2], &cfg, 2000);
    struct bytes_wait w = {&r[2], 50 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    rec_abort(&r[2]);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    tl_run_for(fx.tl, 50);

    assert_int_equal(fake_runtime_sessions(fx.fake), 3);
    for (unsigned i = 0; i < 3; i++) {
        struct fake_session_info si = fake_session(&fx, i);
        assert_int_equal(si.stops, 1); /* exactly one StopTracing, for the right id */
        assert_false(si.stream_open);
        /* the stop came while dotmon still held the stream, and the fake closed it first */
        assert_true(si.stream_open_at_stop);
        assert_true(si.end_tag);
        assert_false(si.client_closed);
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(r[i].calls_after_abort, 0);
        assert_int_equal(r[i].ended, 0);
        assert_int_equal(r[i].started, 1);
        /* the ids the fake stopped are the ones on_started reported */
        bool found = false;
        for (unsigned j = 0; j < 3; j++) {
            found = found || fake_session(&fx, j).id == r[i].id;
        }
        assert_true(found);
    }
    assert_int_equal(r[1].data_calls, 0);
    assert_true(r[0].nbytes >= 100 * 1024);
    fixture_done(&fx);
}

static void test_session_abort_after_stop(void **state)
{
    /* The StopTracing already out is not sent twice. */
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_NO_END, .filler_bytes = 4096};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    ipc_session_stop(r.s, 5000);
    tl_run_for(fx.tl, 50);
    rec_abort(&r);
    /* the fake never answers that StopTracing: the stop exchange runs out at its timeout */
    fake_runtime_kill(fx.fake);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    assert_int_equal(r.ended + r.calls_after_abort, 0);
    fixture_done(&fx);
}

static void test_session_runtime_dies(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {
        .fault = FAKE_TRACE_DIE, .filler_bytes = UINT64_MAX, .die_after = 200 * 1024};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    /* EOF (or a reset if the fake had unread bytes): never a hang */
    assert_true(r.status == 0 || r.status == UV_ECONNRESET);
    assert_int_equal(r.started, 1);
    assert_true(r.nbytes <= fake_session(&fx, 0).stream_bytes);
    assert_true(r.nbytes >= 200 * 1024 || r.status != 0);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    fixture_done(&fx);

    /* Stopped, and the process dies before the end: EOF ends it, not the stop timeout. */
    t.fault = FAKE_TRACE_NO_END;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    ipc_session_stop(r.s, 10000);
    tl_run_for(fx.tl, 50);
    uint64_t t0 = tl_ms();
    fake_runtime_kill(fx.fake);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_true(r.status == 0 || r.status == UV_ECONNRESET);
    ASSERT_BELOW_MS(r.t_end - t0, 1000);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    fixture_done(&fx);
}

static void test_session_stop_timeout(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {
        .fault = FAKE_TRACE_NO_END, .filler_bytes = UINT64_MAX, .interval_ms = 5};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 2000));
    uint64_t t0 = tl_ms();
    ipc_session_stop(r.s, 300);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, AGENT_E_TIMEOUT);
    assert_true(MS_EQ_ROUGHLY(r.t_end - t0, 300));
    assert_true(r.data_calls > 1); /* data kept flowing until the end */
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    /*
     * The runtime may still be working on that StopTracing, so dotmon does not close the stream
     * first (see test_session_abort_drains): it keeps draining it, without callbacks, until the
     * runtime closes it or the cleanup bound runs out.
     */
    tl_run_for(fx.tl, 300);
    struct fake_session_info si = fake_session(&fx, 0);
    assert_true(si.stream_open);
    assert_false(si.client_closed);
    assert_int_equal(sessions.live, 1);
    assert_int_equal(r.nbytes, r.bytes_at_end);
    assert_int_equal(r.ended, 1);
    /* the runtime closes it at last (here: dies): the session goes at once */
    fake_runtime_kill(fx.fake);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    fixture_done(&fx);

    /* stop requested before the id, and the reply never comes: the stop timeout still counts */
    t.fault = FAKE_TRACE_SILENT;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    start(&fx, &r, &cfg, 5000);
    t0 = tl_ms();
    ipc_session_stop(r.s, 200);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, AGENT_E_TIMEOUT);
    assert_true(MS_EQ_ROUGHLY(r.t_end - t0, 200));
    assert_int_equal(r.started, 0);
    fake_runtime_kill(fx.fake);
    fixture_done(&fx);
}

static void test_session_abort_bounded(void **state)
{
    /* A runtime that never answers cannot keep an aborted session alive: the cleanup bound at
     * most. */
    struct fixture fx;
    struct fake_trace_config t = {.fault = FAKE_TRACE_SILENT};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    sessions.cleanup_timeout_ms = CLEANUP_MS;
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    assert_true(tl_run_until(fx.tl, collect_requested, &fx, 2000));
    uint64_t t0 = tl_ms();
    rec_abort(&r);
    tl_run_for(fx.tl, CLEANUP_MS / 2);
    assert_int_equal(sessions.live, 1); /* still waiting for the reply */
    assert_int_equal(sessions.started, 0);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    uint64_t took = tl_ms() - t0;
    assert_true(MS_EQ_ROUGHLY(took, CLEANUP_MS));
    assert_int_equal(r.started + r.data_calls + r.ended, 0);
    fixture_done(&fx);
}

/*
 * Abort while streaming: StopTracing goes out while the stream is still open, and the stream is
 * closed by the runtime once it handled that stop, or by dotmon when the cleanup bound runs out;
 * never by dotmon first. (Otherwise the runtime may end the session by itself and give its id to
 * a new session that the late StopTracing then stops: test_session_abort_id_reuse.)
 */
static void test_session_abort_drains(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {
        .filler_bytes = UINT64_MAX, .chunk_bytes = 8192, .stop_delay_ms = 300};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;

    /* paused by backpressure when the client goes: the fake's writer is blocked */
    start(&fx, &r, &cfg, 2000);
    r.pause_at = 64 * 1024;
    struct bytes_wait w = {&r, 64 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    tl_run_for(fx.tl, 200);
    uint64_t wrote = fake_runtime_stream_bytes(fx.fake);
    uint64_t got = r.nbytes;
    rec_abort(&r);
    /* the fake holds the StopTracing for 300 ms, like a busy server thread */
    tl_run_for(fx.tl, 150);
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_true(si.stream_open_at_stop);
    assert_true(si.stream_open);
    assert_false(si.client_closed);
    assert_int_equal(sessions.live, 1);
    /* the stream is read again (the writer runs) but nothing is delivered */
    assert_true(fake_runtime_stream_bytes(fx.fake) > wrote + 64 * 1024);
    assert_int_equal(r.nbytes, got);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    si = fake_session(&fx, 0);
    assert_true(si.end_tag);        /* the fake ended the session after the stop... */
    assert_false(si.client_closed); /* ...and closed the stream before dotmon did */
    assert_false(si.stream_open);
    assert_int_equal(r.ended + r.calls_after_abort, 0);
    assert_int_equal(r.nbytes, got);
    fixture_done(&fx);

    /* a runtime that never closes the stream: the cleanup bound cuts it off */
    t.fault = FAKE_TRACE_NO_END;
    t.stop_delay_ms = 0;
    t.interval_ms = 5;
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    sessions.cleanup_timeout_ms = CLEANUP_MS;
    start(&fx, &r, &cfg, 2000);
    w.want = 32 * 1024;
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    uint64_t t0 = tl_ms();
    rec_abort(&r);
    tl_run_for(fx.tl, CLEANUP_MS / 2);
    si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_true(si.stream_open_at_stop);
    assert_true(si.stream_open);
    assert_false(si.client_closed);
    assert_int_equal(sessions.live, 1);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 2000));
    uint64_t took = tl_ms() - t0;
    assert_true(MS_EQ_ROUGHLY(took, CLEANUP_MS));
    si = fake_session(&fx, 0);
    assert_true(si.client_closed); /* dotmon closed it, at the bound */
    assert_false(si.end_tag);
    assert_int_equal(r.ended + r.calls_after_abort, 0);
    fixture_done(&fx);
}

/*
 * The bug behind test_session_abort_drains, end to end: the fake frees a session when its stream
 * closes and hands its id to the next session (the runtime's ids are addresses), and it is slow
 * to act on StopTracing. The trace started right after an abort must not be stopped by the
 * aborted session's StopTracing.
 */
static void test_session_abort_id_reuse(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = UINT64_MAX,
                                  .chunk_bytes = 4096,
                                  .interval_ms = 2,
                                  .stop_delay_ms = 200,
                                  .reuse_ids = true};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r[3];
    start(&fx, &r[0], &cfg, 2000);
    struct bytes_wait w = {&r[0], 16 * 1024};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    rec_abort(&r[0]);
    start(&fx, &r[1], &cfg, 2000); /* the next trace, at once */
    assert_true(tl_run_until(fx.tl, rec_started, &r[1], 2000));
    tl_run_for(fx.tl, 500); /* well past the fake's StopTracing delay */
    assert_int_equal(r[1].ended, 0);
    assert_true(r[1].id != r[0].id);
    struct fake_session_info si = fake_session(&fx, 0);
    assert_int_equal(si.stops, 1);
    assert_true(si.end_tag);
    assert_false(si.stream_open);
    si = fake_session(&fx, 1);
    assert_int_equal(si.stops, 0);
    assert_true(si.stream_open);
    assert_int_equal(sessions.live, 1);

    /* the second trace streams on and ends when asked, complete */
    w.r = &r[1];
    w.want = r[1].nbytes + 16 * 1024;
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 3000));
    ipc_session_stop(r[1].s, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r[1], 3000));
    assert_int_equal(r[1].status, 0);
    check_stream(&fx, 1, &r[1], true);
    assert_int_equal(fake_session(&fx, 1).stops, 1);

    /* the fake does hand freed ids out again (else this test would prove nothing) */
    start(&fx, &r[2], &cfg, 2000);
    assert_true(tl_run_until(fx.tl, rec_started, &r[2], 2000));
    assert_true(r[2].id == r[1].id);
    rec_abort(&r[2]);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    assert_int_equal(r[0].ended + r[0].calls_after_abort + r[2].ended + r[2].calls_after_abort, 0);
    fixture_done(&fx);
}

static void test_session_stop_before_id(void **state)
{
    struct fixture fx;
    struct fake_trace_config t = {.reply_delay_ms = 100, .filler_bytes = 20000};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 2000);
    ipc_session_stop(r.s, 3000);
    assert_int_equal(r.ended, 0);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.started, 1);
    assert_int_equal(r.status, 0);
    assert_true(r.t_end >= r.t_started);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    check_stream(&fx, 0, &r, true);
    fixture_done(&fx);

    /* stop from inside on_started */
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    start(&fx, &r, &cfg, 2000);
    r.stop_in_started = true;
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    check_stream(&fx, 0, &r, true);
    fixture_done(&fx);
}

static void test_session_drip(void **state)
{
    /* the reply itself arrives in pieces of 1..7 bytes */
    struct fixture fx;
    struct fake_trace_config t = {
        .drip = true, .filler_bytes = 1500, .chunk_bytes = 100, .interval_ms = 1};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;
    start(&fx, &r, &cfg, 3000);
    assert_true(tl_run_until(fx.tl, rec_started, &r, 3000));
    struct bytes_wait w = {&r, 102 + 1500};
    assert_true(tl_run_until(fx.tl, rec_has_bytes, &w, 5000));
    assert_true(r.data_calls > 50); /* many small reads */
    ipc_session_stop(r.s, 2000);
    assert_true(tl_run_until(fx.tl, rec_ended, &r, 3000));
    assert_int_equal(r.status, 0);
    check_stream(&fx, 0, &r, true);
    fixture_done(&fx);
}

static void test_session_many(void **state)
{
    enum { N = 20 };
    struct fixture fx;
    struct fake_trace_config t = {.filler_bytes = 64 * 1024, .chunk_bytes = 2048};
    fixture_fake(&fx, *state, FAKE_NORMAL, &t);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r[N];
    for (int i = 0; i < N; i++) {
        start(&fx, &r[i], &cfg, 3000);
        r[i].stop_at = 102 + 64 * 1024;
    }
    assert_int_equal(sessions.live, N);
    for (int i = 0; i < N; i++) {
        assert_true(tl_run_until(fx.tl, rec_ended, &r[i], 5000));
        assert_int_equal(r[i].status, 0);
    }
    assert_int_equal(fake_runtime_sessions(fx.fake), N);
    for (unsigned j = 0; j < N; j++) {
        struct fake_session_info si = fake_session(&fx, j);
        bool matched = false;
        for (int i = 0; i < N; i++) {
            if (r[i].id == si.id) {
                check_stream(&fx, j, &r[i], true);
                matched = true;
            }
        }
        assert_true(matched);
    }
    fixture_done(&fx);
}

static void test_session_transport_errors(void **state)
{
    struct test_loop *tl = *state;
    char dir[64];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    char stale[128];
    assert_int_equal(fake_stale_socket(dir, 77, 1, stale, sizeof(stale)), 0);
    struct ipc_collect_config cfg = default_cfg();
    static struct rec r;

    rec_init(&r);
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH(stale), &cfg, 1000,
                                       &rec_cb, &r, &r.s),
                     0);
    assert_int_equal(r.ended, 0);
    assert_true(tl_run_until(tl, rec_ended, &r, 2000));
    assert_int_equal(r.status, UV_ECONNREFUSED);

    char missing[160];
    assert_true(snprintf(missing, sizeof(missing), "%s/dotnet-diagnostic-1-1-socket", dir) > 0);
    rec_init(&r);
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH(missing), &cfg, 1000,
                                       &rec_cb, &r, &r.s),
                     0);
    assert_true(tl_run_until(tl, rec_ended, &r, 2000));
    assert_int_equal(r.status, UV_ENOENT);
    assert_true(tl_run_until(tl, no_live_sessions, NULL, 2000));

    /* a peer that is not a runtime */
    struct fixture fx;
    fixture_fake(&fx, tl, FAKE_GARBAGE, NULL);
    start(&fx, &r, &cfg, 1000);
    assert_true(tl_run_until(tl, rec_ended, &r, 2000));
    assert_int_equal(r.status, AGENT_E_PROTO);
    fixture_done(&fx);

    /* a reply cut short */
    fixture_fake(&fx, tl, FAKE_TRUNCATED, NULL);
    start(&fx, &r, &cfg, 1000);
    assert_true(tl_run_until(tl, rec_ended, &r, 2000));
    assert_true(r.status == AGENT_E_CLOSED || r.status == AGENT_E_PROTO ||
                r.status == AGENT_E_TOOBIG);
    fixture_done(&fx);
    fake_rmdir(dir);
}

static void test_session_bad_arguments(void **state)
{
    struct test_loop *tl = *state;
    struct ipc_collect_config cfg = default_cfg();
    struct ipc_session *s = NULL;
    static struct rec r;
    rec_init(&r);
    char long_path[200];
    memset(long_path, 'a', sizeof(long_path) - 1);
    long_path[0] = '/';
    long_path[sizeof(long_path) - 1] = '\0';
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH(long_path), &cfg, 0,
                                       &rec_cb, &r, &s),
                     UV_ENAMETOOLONG);
    assert_int_equal(
        ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH("/tmp/x"), &cfg, 0, NULL, &r, &s),
        AGENT_E_INVAL);
    struct ipc_session_callbacks no_end = {on_started, on_data, NULL};
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH("/tmp/x"), &cfg, 0,
                                       &no_end, &r, &s),
                     AGENT_E_INVAL);
    struct ipc_collect_config bad = cfg;
    bad.buffer_mb = 0;
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH("/tmp/x"), &bad, 0,
                                       &rec_cb, &r, &s),
                     AGENT_E_INVAL);
    bad = cfg;
    bad.provider_count = 0;
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH("/tmp/x"), &bad, 0,
                                       &rec_cb, &r, &s),
                     AGENT_E_INVAL);
    bad = cfg;
    bad.format = 2; /* V6 over IPC is rejected by the runtime (deviations.md §2.5) */
    assert_int_equal(ipc_session_start(&tl->loop, &sessions, IPC_ENDPOINT_PATH("/tmp/x"), &bad, 0,
                                       &rec_cb, &r, &s),
                     AGENT_E_INVAL);
    /* Admission is the caller's: none without one, and none beyond its limit. */
    assert_int_equal(
        ipc_session_start(&tl->loop, NULL, IPC_ENDPOINT_PATH("/tmp/x"), &cfg, 0, &rec_cb, &r, &s),
        AGENT_E_INVAL);
    struct ipc_session_admission full = {.live = 3, .max = 3};
    assert_int_equal(
        ipc_session_start(&tl->loop, &full, IPC_ENDPOINT_PATH("/tmp/x"), &cfg, 0, &rec_cb, &r, &s),
        AGENT_E_TOOBIG);
    assert_int_equal(full.live, 3);
    assert_null(s);
    tl_run_for(tl, 20);
    assert_int_equal(r.started + r.data_calls + r.ended, 0);
    assert_int_equal(sessions.live, 0);
    /* NULL-tolerant accessors */
    assert_int_equal(ipc_session_id(NULL), 0);
    assert_int_equal(ipc_session_bytes(NULL), 0);
    ipc_session_pause(NULL);
    ipc_session_resume(NULL);
    ipc_session_stop(NULL, 0);
    ipc_session_abort(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_session_normal_stream, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_step_down, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_min_version, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_rundown_downgrade, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_error_hresult, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_start_timeout, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_start_timeout_late_reply, tl_setup,
                                        tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_pause_resume, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_pause_in_started, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_before_id, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_after_id, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_after_stop, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_runtime_dies, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_stop_timeout, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_bounded, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_drains, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_abort_id_reuse, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_stop_before_id, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_drip, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_many, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_transport_errors, tl_setup, tl_teardown),
        cmocka_unit_test_setup_teardown(test_session_bad_arguments, tl_setup, tl_teardown),
    };
    if (getenv("TEST_FILTER") != NULL) {
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
