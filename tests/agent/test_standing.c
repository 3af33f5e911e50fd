/* SPDX-License-Identifier: MIT */
/*
 * collect/standing against the scripted fake runtime (tests/support/fake_runtime.c), one private
 * loop per test (tests/ipc/ipc_test_loop.c), as test_dsession does for the session below it. The
 * owner below records every callback per attempt: when prepare() came (uv_now), what ended() said
 * and the state standing_state() showed then, and a hash of what each attempt fed, so "same
 * length, same hash" as the fake's own count means one attempt's whole stream reached it.
 *
 *   - a runtime gone (a stale socket): ended(ECONNREFUSED, restarting) again and again, the waits
 *     between attempts doubling from backoff_min_ms and capped at backoff_max_ms, WAITING with the
 *     end's reason in between; standing_stop while waiting ends it at once and for good;
 *   - a live runtime: one prepare/started, the stream fed; standing_restart stops it and starts
 *     again without the wait; standing_stop ends it with ended(0, restarting false);
 *   - the wait starts over at backoff_min_ms once a session was accepted (a runtime that cuts
 *     each stream);
 *   - prepare() refusing: ended() with its code from a timer, never inside standing_new, then the
 *     next attempt after the wait; a stop, a restart or a free while that end is pending;
 *   - standing_restart from inside ended(): the next attempt at once, not after the wait;
 *   - standing_free while running: no callback ever, the runtime's session stopped anyway;
 *   - a configuration or ops without what standing_new needs: AGENT_E_INVAL, nothing called.
 * Every test ends with no session counted in the admission, no handle left on the loop but the
 * fixture's own, and the fixture's uv_loop_close() == 0.
 */
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
#include "ipc_test_loop.h"
#include "standing.h"
#include "timebound.h"

static struct ipc_session_admission sessions;

/* ---- the owner ----------------------------------------------------------------------------- */

#define MAX_ATTEMPTS 32

struct attempt_rec {
    uint64_t t_prepare; /* uv_now when prepare() came */
    uint64_t t_end;     /* uv_now when ended() came */
    enum standing_state at_prepare, at_started, at_end;
    bool counts_ok;   /* standing_counts agreed with the callbacks at prepare() and ended() */
    bool reason_same; /* standing_state's reason was ended()'s how */
    int code;
    bool restarting;
    bool asked;
    char how[400];
    uint64_t nbytes;
    uint64_t hash;
};

struct owner {
    struct test_loop *tl;
    struct standing *st;
    int prepares, starts, ends, feeds;
    int fail_first;       /* the first fail_first prepare() calls answer fail_code */
    int fail_code;        /* < 0 */
    bool restart_in_end;  /* ended() calls standing_restart on its first call */
    bool in_new;          /* inside standing_new */
    int called_in_new;    /* callbacks but prepare() inside standing_new (must stay 0) */
    int out_of_order;     /* prepare() before the last ended(), or ended() without prepare() */
    int feeds_after_end;  /* feed() after its attempt's ended() (must stay 0) */
    int calls_after_free; /* any callback after standing_free (must stay 0) */
    bool freed;
    struct attempt_rec a[MAX_ATTEMPTS];
};

static const struct ipc_provider provider = {
    .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4};
static const struct ipc_collect_config collect = {
    .buffer_mb = 16, .format = 1, .providers = &provider, .provider_count = 1};

static void owner_init(struct owner *o, struct test_loop *tl)
{
    memset(o, 0, sizeof(*o));
    o->tl = tl;
    for (int i = 0; i < MAX_ATTEMPTS; i++) {
        o->a[i].hash = FAKE_FNV_INIT;
    }
}

/* Callbacks that are not prepare() inside standing_new, or any after standing_free. */
static void check_call(struct owner *o)
{
    o->called_in_new += o->in_new;
    o->calls_after_free += o->freed;
}

static bool counts_agree(const struct owner *o)
{
    uint64_t attempts = 0, ends = 0;
    standing_counts(o->st, &attempts, &ends);
    return attempts == (uint64_t)o->prepares && ends == (uint64_t)o->ends;
}

static int o_prepare(void *ud, struct ipc_collect_config *out)
{
    struct owner *o = ud;
    o->calls_after_free += o->freed;
    if (o->prepares != o->ends || o->prepares >= MAX_ATTEMPTS) {
        o->out_of_order++;
        return AGENT_E_INVAL;
    }
    struct attempt_rec *a = &o->a[o->prepares++];
    a->t_prepare = uv_now(&o->tl->loop);
    if (o->st != NULL) { /* not known yet inside standing_new */
        a->at_prepare = standing_state(o->st, NULL);
        a->counts_ok = counts_agree(o);
    } else {
        a->at_prepare = STANDING_STARTING;
        a->counts_ok = true;
    }
    if (o->prepares <= o->fail_first) {
        return o->fail_code;
    }
    *out = collect;
    return 0;
}

static void o_started(void *ud, uint64_t session_id, int version)
{
    struct owner *o = ud;
    check_call(o);
    assert_true(session_id != 0);
    assert_int_equal(version, 5);
    o->starts++;
    if (o->st != NULL) {
        o->a[o->prepares - 1].at_started = standing_state(o->st, NULL);
    }
}

static int o_feed(void *ud, const uint8_t *p, size_t n)
{
    struct owner *o = ud;
    check_call(o);
    o->feeds++;
    if (o->ends >= o->prepares) {
        o->feeds_after_end++;
        return 0;
    }
    struct attempt_rec *a = &o->a[o->prepares - 1];
    a->nbytes += n;
    a->hash = fake_fnv1a(a->hash, p, n);
    return 0;
}

static void o_ended(void *ud, int code, const char *how, bool restarting, bool asked)
{
    struct owner *o = ud;
    check_call(o);
    if (o->ends >= o->prepares || o->st == NULL) {
        o->out_of_order++;
        return;
    }
    struct attempt_rec *a = &o->a[o->ends++];
    a->t_end = uv_now(&o->tl->loop);
    a->code = code;
    a->restarting = restarting;
    a->asked = asked;
    snprintf(a->how, sizeof(a->how), "%s", how != NULL ? how : "(null)");
    const char *reason = NULL;
    a->at_end = standing_state(o->st, &reason);
    a->reason_same = reason != NULL && how != NULL && strcmp(reason, how) == 0;
    a->counts_ok = a->counts_ok && counts_agree(o);
    if (o->restart_in_end && o->ends == 1) {
        standing_restart(o->st);
    }
}

static const struct standing_ops ops = {
    .prepare = o_prepare, .started = o_started, .feed = o_feed, .ended = o_ended};

/* ---- what the loop waits for ------------------------------------------------------------- */

struct want {
    struct owner *o;
    int prepares, starts, ends;
    uint64_t bytes; /* fed by the last attempt */
    bool waiting;   /* and standing_state says WAITING */
};

static bool reached(void *ud)
{
    const struct want *w = ud;
    const struct owner *o = w->o;
    if (o->prepares < w->prepares || o->starts < w->starts || o->ends < w->ends) {
        return false;
    }
    if (w->bytes > 0 && (o->prepares == 0 || o->a[o->prepares - 1].nbytes < w->bytes)) {
        return false;
    }
    return !w->waiting || standing_state(o->st, NULL) == STANDING_WAITING;
}

static bool no_live_sessions(void *ud)
{
    (void)ud;
    return sessions.live == 0;
}

struct walk {
    const struct test_loop *tl;
    unsigned n;
};

static void count_handle(uv_handle_t *h, void *arg)
{
    struct walk *w = arg;
    if (h != (const uv_handle_t *)&w->tl->tick && h != (const uv_handle_t *)&w->tl->watchdog) {
        w->n++;
    }
}

/* No handle on the loop but the fixture's tick and watchdog (closing ones count too). */
static bool only_fixture_handles(void *ud)
{
    struct test_loop *tl = ud;
    struct walk w = {.tl = tl};
    uv_walk(&tl->loop, count_handle, &w);
    return w.n == 0;
}

/* ---- fixture ----------------------------------------------------------------------------- */

struct fixture {
    struct test_loop *tl;
    char dir[64];
    struct fake_runtime *fake;
};

static void fixture_fake(struct fixture *fx, struct test_loop *tl,
                         const struct fake_runtime_config *in)
{
    memset(fx, 0, sizeof(*fx));
    fx->tl = tl;
    assert_int_equal(fake_tmpdir(fx->dir, sizeof(fx->dir)), 0);
    struct fake_runtime_config cfg = *in;
    cfg.pid = 4245;
    cfg.key = 9;
    assert_int_equal(fake_runtime_start(&tl->loop, fx->dir, &cfg, &fx->fake), 0);
}

/* A fake that streams filler until stopped. */
static void fixture_streaming(struct fixture *fx, struct test_loop *tl)
{
    struct fake_runtime_config cfg = {.trace = {.filler_bytes = UINT64_MAX, .interval_ms = 2}};
    fixture_fake(fx, tl, &cfg);
}

/* Every session gone (freed, its StopTracing answered) before the fake goes; then nothing but
 * the fixture's own handles is left on the loop. */
static void fixture_done(struct fixture *fx)
{
    assert_true(tl_run_until(fx->tl, no_live_sessions, NULL, 3000));
    tl_close_fake(fx->tl, fx->fake);
    fake_rmdir(fx->dir);
    assert_true(tl_run_until(fx->tl, only_fixture_handles, fx->tl, 2000));
}

static struct fake_session_info fake_session(struct fixture *fx, unsigned idx)
{
    struct fake_session_info si;
    assert_int_equal(fake_runtime_session(fx->fake, idx, &si), 0);
    return si;
}

static struct standing_config config(struct test_loop *tl, uint64_t min_ms, uint64_t max_ms)
{
    struct standing_config c = {.loop = &tl->loop,
                                .admission = &sessions,
                                .start_timeout_ms = 2000,
                                .stop_timeout_ms = 3000,
                                .backoff_min_ms = min_ms,
                                .backoff_max_ms = max_ms};
    return c;
}

/* standing_new on path: only the first prepare() runs inside it. */
static void new_standing(struct owner *o, const struct standing_config *cfg, const char *path)
{
    uv_update_time(&o->tl->loop); /* the first prepare()'s uv_now */
    o->in_new = true;
    int rc = standing_new(cfg, IPC_ENDPOINT_PATH(path), &ops, o, &o->st);
    o->in_new = false;
    assert_int_equal(rc, 0);
    assert_non_null(o->st);
    assert_int_equal(o->prepares, 1);
    assert_int_equal(o->starts + o->feeds + o->ends, 0);
    assert_int_equal(o->called_in_new, 0);
}

static void assert_counts(const struct owner *o, uint64_t attempts, uint64_t ends)
{
    uint64_t at = 0, en = 0;
    standing_counts(o->st, &at, &en);
    assert_int_equal(at, attempts);
    assert_int_equal(en, ends);
    assert_int_equal(o->prepares, (int)attempts);
    assert_int_equal(o->ends, (int)ends);
}

static void free_standing(struct owner *o)
{
    standing_free(o->st);
    o->freed = true;
    o->st = NULL;
}

/* What every test checks at its end about the owner. */
static void assert_owner_clean(const struct owner *o)
{
    assert_int_equal(o->called_in_new, 0);
    assert_int_equal(o->out_of_order, 0);
    assert_int_equal(o->feeds_after_end, 0);
    assert_int_equal(o->calls_after_free, 0);
}

/* The end of a test on a stale socket: o freed, no session left, nothing on the loop but the
 * fixture's own handles, the owner's checks, the folder gone. */
static void stale_done(struct test_loop *tl, struct owner *o, const char *dir)
{
    free_standing(o);
    assert_true(tl_run_until(tl, no_live_sessions, NULL, 3000));
    assert_true(tl_run_until(tl, only_fixture_handles, tl, 2000));
    assert_owner_clean(o);
    fake_rmdir(dir);
}

/* Attempt idx of the owner, the fake's session sess: fed whole, stopped once, ended with its end
 * tag. */
static void assert_fed_whole(struct fixture *fx, const struct owner *o, unsigned idx, unsigned sess)
{
    struct fake_session_info si = fake_session(fx, sess);
    assert_int_equal(si.stops, 1);
    assert_true(si.end_tag);
    assert_false(si.stream_open);
    assert_int_equal(o->a[idx].nbytes, si.stream_bytes);
    assert_true(o->a[idx].hash == si.hash);
}

/* test_standing_backoff's 5 waits with backoff 10..40 ms: 10 20 40 40 40. Between two prepare()
 * calls: at least the wait (an attempt's own time comes on top, tens of ms under valgrind); from
 * ended() to the next prepare(): the wait alone (its timer starts in ended()'s turn), growing,
 * then capped. */
static void assert_waits(const struct owner *o)
{
    static const uint64_t expect[] = {10, 20, 40, 40, 40};
    uint64_t between[5], waits[5];
    for (int i = 0; i < 5; i++) {
        between[i] = o->a[i + 1].t_prepare - o->a[i].t_prepare;
        waits[i] = o->a[i + 1].t_prepare - o->a[i].t_end;
        print_message("attempt %d to %d: %llu ms, of which waited %llu (at least %llu)\n", i, i + 1,
                      (unsigned long long)between[i], (unsigned long long)waits[i],
                      (unsigned long long)expect[i]);
        assert_true(between[i] >= expect[i]);
        assert_true(waits[i] >= expect[i]);
        ASSERT_BELOW_MS(between[i], (long)expect[i] + 1000);
        /* growing (10 ms of timer lateness allowed between equal waits) */
        assert_true(i == 0 || waits[i] + 10 >= waits[i - 1]);
    }
    /* from below the cap (a first wait at the maximum would be 40), capped (waits that kept
     * doubling would be 80 and 160) */
    ASSERT_BELOW_MS(waits[0], 40);
    assert_true(waits[3] < 80 || waits[4] < 80);
}

/* ---- tests ------------------------------------------------------------------------------- */

/* A runtime gone: every attempt ends in the transport error and the waits double up to the cap;
 * standing_stop while waiting ends it for good, standing_free leaves nothing on the loop. */
static void test_standing_backoff(void **state)
{
    struct test_loop *tl = *state;
    char dir[64], path[256];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    assert_int_equal(fake_stale_socket(dir, 4246, 1, path, sizeof(path)), 0);
    static struct owner o;
    struct standing_config cfg = config(tl, 10, 40);

    /* A warm-up standing through two ends first: the code an end runs for the first time (tens
     * of ms under valgrind) would otherwise make the first measured wait late. */
    owner_init(&o, tl);
    new_standing(&o, &cfg, path);
    struct want w = {.o = &o, .prepares = 2, .ends = 2};
    assert_true(tl_run_until(tl, reached, &w, 3000));
    free_standing(&o);
    assert_true(tl_run_until(tl, no_live_sessions, NULL, 3000));
    assert_owner_clean(&o);

    owner_init(&o, tl);
    new_standing(&o, &cfg, path);
    const char *reason = NULL;
    assert_int_equal(standing_state(o.st, &reason), STANDING_STARTING);
    assert_string_equal(reason, ""); /* before any end */

    /* 6 attempts: 5 waits, 10 20 40 40 40 */
    w = (struct want){.o = &o, .prepares = 6, .ends = 6, .waiting = true};
    assert_true(tl_run_until(tl, reached, &w, 5000));
    assert_waits(&o);

    for (int i = 0; i < o.ends; i++) {
        const struct attempt_rec *a = &o.a[i];
        assert_int_equal(a->code, UV_ECONNREFUSED);
        assert_true(a->restarting);
        assert_false(a->asked); /* the runtime's ends, not a restart's */
        assert_true(a->how[0] != '\0');
        assert_int_equal(a->at_end, STANDING_WAITING);
        assert_true(a->reason_same);
        assert_true(a->counts_ok);
        assert_int_equal(a->at_prepare, STANDING_STARTING);
    }
    assert_int_equal(o.starts + o.feeds, 0);
    int n = o.prepares;
    assert_int_equal(o.ends, n);
    assert_counts(&o, (uint64_t)n, (uint64_t)n);
    assert_int_equal(standing_state(o.st, &reason), STANDING_WAITING);
    assert_string_equal(reason, o.a[n - 1].how);

    /* stopped while waiting: at once, no ended() (the last attempt had its own), no attempt */
    standing_stop(o.st);
    assert_int_equal(standing_state(o.st, &reason), STANDING_STOPPED);
    assert_string_equal(reason, o.a[n - 1].how);
    standing_stop(o.st);    /* idempotent */
    standing_restart(o.st); /* nothing once stopped */
    standing_stop(NULL);
    tl_run_for(tl, 100);
    assert_int_equal(o.prepares, n);
    assert_int_equal(o.ends, n);
    assert_counts(&o, (uint64_t)n, (uint64_t)n);
    assert_int_equal(standing_state(o.st, NULL), STANDING_STOPPED);

    standing_free(NULL);
    stale_done(tl, &o, dir);
}

/* A live runtime: one attempt fed whole; a restart stops it and starts again without the wait;
 * a stop ends it with ended(0, restarting false) and nothing after. */
static void test_standing_restart_stop(void **state)
{
    struct fixture fx;
    fixture_streaming(&fx, *state);
    static struct owner o;
    owner_init(&o, fx.tl);
    struct standing_config cfg = config(fx.tl, 5000, 10000);
    new_standing(&o, &cfg, fake_runtime_path(fx.fake));

    struct want w = {.o = &o, .prepares = 1, .starts = 1, .bytes = 32 * 1024};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_int_equal(o.prepares, 1);
    assert_int_equal(o.starts, 1);
    assert_int_equal(o.ends, 0);
    assert_int_equal(o.a[0].at_started, STANDING_RUNNING);
    const char *reason = NULL;
    assert_int_equal(standing_state(o.st, &reason), STANDING_RUNNING);
    assert_string_equal(reason, "");
    assert_counts(&o, 1, 0);

    /* restart: the session is stopped, and the next attempt starts at once after its end */
    standing_restart(o.st);
    w = (struct want){.o = &o, .prepares = 2};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_int_equal(o.ends, 1);
    assert_int_equal(o.a[0].code, 0);
    assert_string_equal(o.a[0].how, "stopped");
    assert_true(o.a[0].restarting);
    assert_true(o.a[0].asked); /* standing_restart's own end */
    assert_int_equal(o.a[0].at_end, STANDING_WAITING);
    assert_true(o.a[0].reason_same);
    assert_true(o.a[1].t_prepare - o.a[0].t_end < cfg.backoff_min_ms); /* no wait */
    assert_int_equal(o.a[1].at_prepare, STANDING_STARTING);

    w = (struct want){.o = &o, .prepares = 2, .starts = 2, .bytes = 16 * 1024};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_int_equal(standing_state(o.st, &reason), STANDING_RUNNING);
    assert_string_equal(reason, "stopped"); /* the last end's */
    assert_int_equal(o.a[1].at_started, STANDING_RUNNING);
    assert_int_equal(fake_runtime_sessions(fx.fake), 2);
    assert_fed_whole(&fx, &o, 0, 0);
    assert_counts(&o, 2, 1);

    /* stop: StopTracing, the rest of the stream, ended(0, false), nothing more */
    standing_stop(o.st);
    assert_int_equal(standing_state(o.st, NULL), STANDING_STOPPING);
    standing_stop(o.st);    /* idempotent */
    standing_restart(o.st); /* nothing while stopping */
    w = (struct want){.o = &o, .ends = 2};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_int_equal(o.a[1].code, 0);
    assert_string_equal(o.a[1].how, "stopped");
    assert_false(o.a[1].restarting);
    assert_false(o.a[1].asked);
    assert_int_equal(o.a[1].at_end, STANDING_STOPPED);
    assert_true(o.a[1].reason_same);
    assert_true(o.a[0].counts_ok && o.a[1].counts_ok);
    tl_run_for(fx.tl, 50);
    assert_int_equal(o.prepares, 2);
    assert_int_equal(o.starts, 2);
    assert_counts(&o, 2, 2);
    assert_int_equal(standing_state(o.st, NULL), STANDING_STOPPED);
    assert_int_equal(fake_runtime_sessions(fx.fake), 2);
    assert_fed_whole(&fx, &o, 1, 1);

    free_standing(&o);
    fixture_done(&fx);
    assert_owner_clean(&o);
}

/* A runtime that cuts every stream (the process ends each session): each attempt was accepted,
 * so each wait is backoff_min_ms again, not a doubled one. */
static void test_standing_backoff_reset(void **state)
{
    struct fixture fx;
    struct fake_runtime_config fc = {.trace = {.filler_bytes = UINT64_MAX, .interval_ms = 1}};
    fc.faults[0] = (struct fake_fault){.kind = FAKE_FAULT_MID_STREAM,
                                       .command_set = 0x02,
                                       .command_id = FAKE_ANY_ID,
                                       .stream_bytes = 8192};
    fixture_fake(&fx, *state, &fc);
    static struct owner o;
    owner_init(&o, fx.tl);
    struct standing_config cfg = config(fx.tl, 20, 2000);
    new_standing(&o, &cfg, fake_runtime_path(fx.fake));

    struct want w = {.o = &o, .prepares = 5, .ends = 4};
    assert_true(tl_run_until(fx.tl, reached, &w, 5000));
    assert_int_equal(o.starts, o.ends); /* every attempt was accepted before its end */
    uint64_t shortest = UINT64_MAX;
    for (int i = 0; i < 4; i++) {
        const struct attempt_rec *a = &o.a[i];
        assert_true(a->restarting);
        assert_int_equal(a->at_end, STANDING_WAITING);
        assert_true(a->how[0] != '\0');
        uint64_t wait = o.a[i + 1].t_prepare - a->t_end;
        print_message("wait %d: %llu ms\n", i, (unsigned long long)wait);
        assert_true(wait >= cfg.backoff_min_ms);
        shortest = i >= 2 && wait < shortest ? wait : shortest;
    }
    /* doubling would make the third and fourth waits 80 and 160 */
    assert_true(shortest < 80);

    free_standing(&o);
    fixture_done(&fx);
    assert_owner_clean(&o);
}

/* prepare() refusing: its code in ended() from a timer (never inside standing_new), then the next
 * attempt after the wait, on a live runtime. */
static void test_standing_prepare_refused(void **state)
{
    struct fixture fx;
    fixture_streaming(&fx, *state);
    static struct owner o;
    owner_init(&o, fx.tl);
    o.fail_first = 1;
    o.fail_code = UV_ENOMEM;
    struct standing_config cfg = config(fx.tl, 50, 200);
    new_standing(&o, &cfg, fake_runtime_path(fx.fake));
    assert_int_equal(standing_state(o.st, NULL), STANDING_STARTING);
    assert_counts(&o, 1, 0);

    struct want w = {.o = &o, .ends = 1};
    assert_true(tl_run_until(fx.tl, reached, &w, 2000));
    assert_int_equal(o.a[0].code, UV_ENOMEM);
    assert_true(o.a[0].restarting);
    assert_non_null(strstr(o.a[0].how, "the session could not be started: "));
    assert_int_equal(o.a[0].at_end, STANDING_WAITING);
    assert_true(o.a[0].reason_same);
    assert_int_equal(fake_runtime_connections(fx.fake), 0); /* nothing went to the runtime */

    w = (struct want){.o = &o, .prepares = 2, .starts = 1, .bytes = 16 * 1024};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_true(o.a[1].t_prepare - o.a[0].t_end >= cfg.backoff_min_ms);
    assert_int_equal(o.a[1].at_started, STANDING_RUNNING);
    assert_int_equal(standing_state(o.st, NULL), STANDING_RUNNING);
    assert_counts(&o, 2, 1);

    standing_stop(o.st);
    w = (struct want){.o = &o, .ends = 2};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    assert_int_equal(o.a[1].code, 0);
    assert_false(o.a[1].restarting);
    assert_int_equal(o.a[1].at_end, STANDING_STOPPED);
    assert_true(o.a[0].counts_ok && o.a[1].counts_ok);
    assert_int_equal(fake_runtime_sessions(fx.fake), 1);
    assert_fed_whole(&fx, &o, 1, 0);

    free_standing(&o);
    fixture_done(&fx);
    assert_owner_clean(&o);
}

/* While a refused prepare's end is still to be told: a stop makes it ended(code, false) and
 * nothing after; a restart makes the next attempt come without the wait; a free tells nothing. */
static void test_standing_refused_pending(void **state)
{
    struct test_loop *tl = *state;
    struct fixture fx;
    fixture_streaming(&fx, tl);
    const char *path = fake_runtime_path(fx.fake);
    static struct owner o;

    /* stop */
    owner_init(&o, tl);
    o.fail_first = 1;
    o.fail_code = UV_ENOMEM;
    struct standing_config cfg = config(tl, 5000, 10000);
    new_standing(&o, &cfg, path);
    standing_stop(o.st);
    assert_int_equal(standing_state(o.st, NULL), STANDING_STOPPING);
    struct want w = {.o = &o, .ends = 1};
    assert_true(tl_run_until(tl, reached, &w, 2000));
    assert_int_equal(o.a[0].code, UV_ENOMEM);
    assert_false(o.a[0].restarting);
    assert_int_equal(o.a[0].at_end, STANDING_STOPPED);
    tl_run_for(tl, 50);
    assert_counts(&o, 1, 1);
    free_standing(&o);
    assert_owner_clean(&o);

    /* restart: the next attempt at once, on the live runtime */
    owner_init(&o, tl);
    o.fail_first = 1;
    o.fail_code = UV_ENOMEM;
    new_standing(&o, &cfg, path);
    standing_restart(o.st);
    w = (struct want){.o = &o, .prepares = 2, .starts = 1};
    assert_true(tl_run_until(tl, reached, &w, 3000));
    assert_int_equal(o.a[0].code, UV_ENOMEM);
    assert_true(o.a[0].restarting);
    assert_true(o.a[1].t_prepare - o.a[0].t_end < cfg.backoff_min_ms); /* no wait */
    assert_int_equal(standing_state(o.st, NULL), STANDING_RUNNING);
    standing_stop(o.st);
    w = (struct want){.o = &o, .ends = 2};
    assert_true(tl_run_until(tl, reached, &w, 3000));
    assert_false(o.a[1].restarting);
    assert_counts(&o, 2, 2);
    free_standing(&o);
    assert_owner_clean(&o);

    /* free: no ended() at all */
    owner_init(&o, tl);
    o.fail_first = 1;
    o.fail_code = UV_ENOMEM;
    new_standing(&o, &cfg, path);
    free_standing(&o);
    tl_run_for(tl, 50);
    assert_int_equal(o.prepares, 1);
    assert_int_equal(o.ends, 0);
    assert_owner_clean(&o);

    assert_int_equal(fake_runtime_sessions(fx.fake), 1);
    fixture_done(&fx);
}

/* standing_restart from inside ended(): it is waiting then, so the next attempt starts at once,
 * not after the wait. */
static void test_standing_restart_in_ended(void **state)
{
    struct test_loop *tl = *state;
    char dir[64], path[256];
    assert_int_equal(fake_tmpdir(dir, sizeof(dir)), 0);
    assert_int_equal(fake_stale_socket(dir, 4247, 1, path, sizeof(path)), 0);
    static struct owner o;
    owner_init(&o, tl);
    o.restart_in_end = true;
    struct standing_config cfg = config(tl, 5000, 10000);
    new_standing(&o, &cfg, path);
    struct want w = {.o = &o, .prepares = 2, .ends = 2, .waiting = true};
    assert_true(tl_run_until(tl, reached, &w, 3000));
    assert_true(o.a[1].t_prepare - o.a[0].t_end < cfg.backoff_min_ms);
    /* the second end (no restart asked) waits again */
    tl_run_for(tl, 100);
    assert_int_equal(o.prepares, 2);
    assert_counts(&o, 2, 2);
    stale_done(tl, &o, dir);
}

/* standing_free while running: no callback, not even ended(); the runtime's session is stopped
 * in the background. */
static void test_standing_free_running(void **state)
{
    struct fixture fx;
    fixture_streaming(&fx, *state);
    static struct owner o;
    owner_init(&o, fx.tl);
    struct standing_config cfg = config(fx.tl, 50, 200);
    new_standing(&o, &cfg, fake_runtime_path(fx.fake));
    struct want w = {.o = &o, .starts = 1, .bytes = 16 * 1024};
    assert_true(tl_run_until(fx.tl, reached, &w, 3000));
    free_standing(&o);
    assert_true(tl_run_until(fx.tl, no_live_sessions, NULL, 3000));
    tl_run_for(fx.tl, 100);
    assert_int_equal(o.prepares, 1);
    assert_int_equal(o.ends, 0);
    assert_int_equal(fake_runtime_sessions(fx.fake), 1);
    assert_int_equal(fake_session(&fx, 0).stops, 1);
    fixture_done(&fx);
    assert_owner_clean(&o);
}

/* What standing_new needs: AGENT_E_INVAL without it, and nothing is called or started. */
static void test_standing_invalid(void **state)
{
    struct test_loop *tl = *state;
    static struct owner o;
    owner_init(&o, tl);
    const struct ipc_endpoint *ep = IPC_ENDPOINT_PATH("/nonexistent/dotnet-diagnostic-1-1-socket");
    struct standing *st = NULL;
    struct standing_config bad[6];
    for (int i = 0; i < 6; i++) {
        bad[i] = config(tl, 10, 40);
    }
    bad[0].start_timeout_ms = 0;
    bad[1].stop_timeout_ms = 0;
    bad[2].backoff_min_ms = 0;
    bad[3].backoff_max_ms = 5; /* below the minimum */
    bad[4].loop = NULL;
    bad[5].backoff_min_ms = 0;
    bad[5].backoff_max_ms = 0;
    for (int i = 0; i < 6; i++) {
        assert_int_equal(standing_new(&bad[i], ep, &ops, &o, &st), AGENT_E_INVAL);
    }
    struct standing_config good = config(tl, 10, 40);
    struct standing_ops no_prepare = ops, no_feed = ops, no_ended = ops;
    no_prepare.prepare = NULL;
    no_feed.feed = NULL;
    no_ended.ended = NULL;
    assert_int_equal(standing_new(&good, ep, &no_prepare, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(&good, ep, &no_feed, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(&good, ep, &no_ended, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(NULL, ep, &ops, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(&good, NULL, &ops, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(&good, ep, NULL, &o, &st), AGENT_E_INVAL);
    assert_int_equal(standing_new(&good, ep, &ops, &o, NULL), AGENT_E_INVAL);
    assert_null(st);
    tl_run_for(tl, 20);
    assert_int_equal(o.prepares + o.starts + o.feeds + o.ends, 0);
    assert_int_equal(sessions.live, 0);
    assert_true(only_fixture_handles(tl));
}

static void test_standing_state_names(void **state)
{
    (void)state;
    assert_string_equal(standing_state_name(STANDING_STARTING), "starting");
    assert_string_equal(standing_state_name(STANDING_RUNNING), "running");
    assert_string_equal(standing_state_name(STANDING_WAITING), "waiting");
    assert_string_equal(standing_state_name(STANDING_STOPPING), "stopping");
    assert_string_equal(standing_state_name(STANDING_STOPPED), "stopped");
    assert_string_equal(standing_state_name((enum standing_state)99), "unknown");
}

int main(void)
{
#define LOOP_TEST(f) cmocka_unit_test_setup_teardown(f, tl_setup, tl_teardown)
    const struct CMUnitTest tests[] = {
        LOOP_TEST(test_standing_backoff),
        LOOP_TEST(test_standing_restart_stop),
        LOOP_TEST(test_standing_backoff_reset),
        LOOP_TEST(test_standing_prepare_refused),
        LOOP_TEST(test_standing_refused_pending),
        LOOP_TEST(test_standing_restart_in_ended),
        LOOP_TEST(test_standing_free_running),
        LOOP_TEST(test_standing_invalid),
        cmocka_unit_test(test_standing_state_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
