/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "bad_http_corpus.h"
#include "buf.h"
#include "err.h"
#include "http_server.h"
#include "http_test_client.h"
#include "http_test_fixture.h"
#include "log.h"

/*
 * Replays tests/fixtures/bad_http against the server, each record on a fresh connection: every
 * one must be refused (4xx, or 503/505, or closed without an answer, or the exact status the
 * record names), none may reach the handler, the server must not crash or leak (ASan/LSan,
 * uv_loop_close), and a normal GET must still work afterwards.
 */

#ifndef BAD_HTTP_DIR
#define BAD_HTTP_DIR "tests/fixtures/bad_http"
#endif

#define MIN_RECORDS 300
#define IO_MS       5000

/* The dribbled pass replays records up to this size one byte per send: parser state carried
 * across reads (folds, spans, limits) must give the same verdict. */
#define DRIBBLE_MAX 400

struct replay {
    struct hfx *fx;
    bool dribble;
    unsigned records;
    unsigned failures;
    unsigned closed_silently;
    unsigned by_status[600];
    struct buf report;
    size_t open_at_end;
};

static const char *outcome(enum tc_result rc)
{
    switch (rc) {
    case TC_OK:
        return "response";
    case TC_CLOSED:
        return "closed";
    case TC_TIMEOUT:
        return "timeout";
    case TC_ERROR:
    default:
        return "garbled response";
    }
}

static int replay_one(void *ud, const struct bad_http_record *rec)
{
    struct replay *rp = ud;
    struct tc_conn c;
    struct tc_response r;
    if (rp->dribble && rec->len > DRIBBLE_MAX) {
        return 0;
    }
    rp->records++;
    if (tc_connect(&c, rp->fx->port) != 0) {
        rp->failures++;
        buf_printf(&rp->report, "  %s (%s:%d): connect failed\n", rec->name, rec->file, rec->line);
        return 0;
    }
    tc_response_init(&r);
    /* The server may answer and close before everything is sent: ignore send errors. */
    if (rp->dribble) {
        for (size_t i = 0; i < rec->len; i++) {
            if (tc_send(&c, rec->data + i, 1) != 0) {
                break;
            }
            struct timespec ts = {.tv_sec = 0, .tv_nsec = 100000};
            nanosleep(&ts, NULL);
        }
    } else {
        tc_send(&c, rec->data, rec->len);
    }
    tc_shutdown_write(&c);
    c.head_request = rec->len > 5 && memcmp(rec->data, "HEAD ", 5) == 0;
    enum tc_result rc = tc_read_response(&c, &r, IO_MS);
    int status = rc == TC_OK ? r.status : 0;
    bool ok = (rc == TC_OK || rc == TC_CLOSED) && bad_http_expect_ok(rec, status);
    if (ok && rc == TC_OK && tc_wait_closed(&c, IO_MS, NULL) != TC_OK) {
        ok = false; /* every refusal closes the connection */
        rc = TC_TIMEOUT;
    }
    if (!ok) {
        rp->failures++;
        buf_printf(&rp->report, "  %s (%s:%d): %s, status %d\n", rec->name, rec->file, rec->line,
                   outcome(rc), status);
    } else if (rc == TC_CLOSED) {
        rp->closed_silently++;
    } else if (status > 0 && status < 600) {
        rp->by_status[status]++;
    }
    tc_response_fini(&r);
    tc_close(&c);
    return 0;
}

static void client_replay(struct hfx *fx)
{
    struct replay *rp = fx->user;
    char dirbuf[4096];
    char err[512];
    const char *dir = bad_http_corpus_dir(BAD_HTTP_DIR, dirbuf, sizeof(dirbuf));
    int rc = bad_http_corpus_foreach(dir, replay_one, rp, err, sizeof(err));
    if (rc != 0) {
        hfx_failf(fx, "corpus %s: %s (%d)", dir, err, rc);
        return;
    }
    /* Still serving: a normal request works, and no refused connection is left open. */
    tc_sleep_ms(200);
    struct tc_conn c;
    struct tc_response r;
    tc_response_init(&r);
    HFX_CHECK(fx, tc_connect(&c, fx->port) == 0);
    HFX_CHECK(fx, tc_request(&c, "GET /count HTTP/1.1\r\nHost: t\r\n\r\n", &r, IO_MS) == TC_OK);
    HFX_CHECK(fx, r.status == 200);
    HFX_CHECK(fx, strcmp(tc_body(&r), "1") == 0); /* only this connection is open */
    tc_response_fini(&r);
    tc_close(&c);
}

static void handler(struct hfx *fx, struct http_request *req)
{
    struct replay *rp = fx->user;
    char body[32];
    rp->open_at_end = fx->srv ? http_server_connection_count(fx->srv) : 0;
    int n = snprintf(body, sizeof(body), "%zu", rp->open_at_end);
    http_respond(req, 200, "text/plain", NULL, 0, body, (size_t)n);
}

static void run_corpus(struct hfx *fx, bool dribble, unsigned min_records)
{
    struct replay rp;
    memset(&rp, 0, sizeof(rp));
    rp.dribble = dribble;
    buf_init(&rp.report, 1 << 20);
    rp.fx = fx;
    fx->user = &rp;
    fx->handler = handler;
    /* Defaults as dotmon runs them (the corpus sizes are chosen against them), except the
     * header timeout, so a record the server waits on cannot stall the run for long. */
    fx->cfg.header_timeout_ms = 3000;
    hfx_run(fx, client_replay, 600000);
    print_message("bad_http%s: %u records, %u closed without a response, %u failures\n",
                  dribble ? " (one byte per send)" : "", rp.records, rp.closed_silently,
                  rp.failures);
    for (int s = 0; s < 600; s++) {
        if (rp.by_status[s] > 0) {
            print_message("  %d: %u\n", s, rp.by_status[s]);
        }
    }
    if (rp.failures > 0) {
        print_error("records not refused as expected:\n%s", buf_cstr(&rp.report));
    }
    buf_fini(&rp.report);
    assert_int_equal(rp.failures, 0);
    assert_true(rp.records >= min_records);
    assert_int_equal(fx->requests, 1); /* no malformed request reached the handler */
}

static void test_http_server_bad_corpus(void **state)
{
    run_corpus(*state, false, MIN_RECORDS);
}

static void test_http_server_bad_corpus_dribbled(void **state)
{
    run_corpus(*state, true, MIN_RECORDS / 2);
}

/* The loader itself: format errors are reported with file and line. */
static int count_cb(void *ud, const struct bad_http_record *rec)
{
    (void)rec;
    (*(unsigned *)ud)++;
    return 0;
}

static void test_bad_http_corpus_loader(void **state)
{
    (void)state;
    char dirbuf[4096];
    char err[512];
    const char *dir = bad_http_corpus_dir(BAD_HTTP_DIR, dirbuf, sizeof(dirbuf));
    unsigned n = 0;
    assert_int_equal(bad_http_corpus_foreach(dir, count_cb, &n, err, sizeof(err)), 0);
    assert_true(n >= MIN_RECORDS);
    assert_int_not_equal(
        bad_http_corpus_foreach("/nonexistent-dir", count_cb, &n, err, sizeof(err)), 0);
    assert_non_null(strstr(err, "/nonexistent-dir"));

    struct bad_http_record rec = {.expect = BAD_HTTP_REJECT};
    assert_true(bad_http_expect_ok(&rec, 0));
    assert_true(bad_http_expect_ok(&rec, 400));
    assert_true(bad_http_expect_ok(&rec, 431));
    assert_true(bad_http_expect_ok(&rec, 505));
    assert_false(bad_http_expect_ok(&rec, 200));
    assert_false(bad_http_expect_ok(&rec, 500));
    rec.expect = BAD_HTTP_STATUS;
    rec.status = 414;
    assert_true(bad_http_expect_ok(&rec, 414));
    assert_false(bad_http_expect_ok(&rec, 400));
    assert_false(bad_http_expect_ok(&rec, 0));
    rec.expect = BAD_HTTP_CLOSE;
    assert_true(bad_http_expect_ok(&rec, 0));
    assert_false(bad_http_expect_ok(&rec, 400));
}

int main(void)
{
    log_set_level(LOG_ERROR); /* one warning per record otherwise */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_http_corpus_loader),
        cmocka_unit_test_setup_teardown(test_http_server_bad_corpus, hfx_setup, hfx_teardown),
        cmocka_unit_test_setup_teardown(test_http_server_bad_corpus_dribbled, hfx_setup,
                                        hfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
