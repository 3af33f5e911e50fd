/* SPDX-License-Identifier: MIT */
/*
 * Integration: the whole bad-HTTP corpus (tests/fixtures/bad_http) against the real dotmon binary
 * with authentication on. Every record must be refused (4xx, 503/505, or a close without a
 * response); afterwards dotmon still answers, its descriptor count is back where it started, and
 * it exits cleanly (no crash, no leak report).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "bad_http_corpus.h"
#include "buf.h"
#include "err.h"

struct replay {
    struct dotmon *dm;
    size_t sent;
    size_t failed;
};

static int replay_one(void *ud, const struct bad_http_record *rec)
{
    struct replay *r = ud;
    struct buf out;
    buf_init(&out, 1024 * 1024);
    int rc = httpc_raw(r->dm->port, rec->data, rec->len, true, testenv_timeout(15000), &out);
    int status = 0;
    if (buf_size(&out) > 0) {
        struct httpc_resp resp;
        size_t used = 0;
        if (httpc_parse(buf_data(&out), buf_size(&out), NULL, &resp, &used) == 0) {
            status = resp.status;
        } else {
            status = -1; /* bytes that are not an HTTP response */
        }
        httpc_resp_fini(&resp);
    }
    r->sent++;
    if (rc == AGENT_E_TIMEOUT || status < 0 || !bad_http_expect_ok(rec, status)) {
        r->failed++;
        fprintf(stderr, "%s:%d %s: rc=%d status=%d\n", rec->file, rec->line, rec->name, rc, status);
    }
    buf_fini(&out);
    return 0;
}

static void test_agent_bad_http_corpus(void **state)
{
    struct testenv *env = *state;
    const char *args[] = {"--temp-apikey", NULL};
    struct dotmon *dm = agent_test_start_dotmon(env, args);
    cJSON *first = agent_test_get_json(dm, "/processes", 200);
    cJSON_Delete(first);
    int fds_before = testenv_fd_count(proc_pid(dm->proc));

    char tmp[4096], err[256];
    const char *dir = bad_http_corpus_dir(NULL, tmp, sizeof(tmp));
    assert_non_null(dir);
    struct replay r = {.dm = dm};
    int rc = bad_http_corpus_foreach(dir, replay_one, &r, err, sizeof(err));
    if (rc != 0) {
        fprintf(stderr, "corpus: %s\n", err);
    }
    assert_int_equal(rc, 0);
    assert_true(r.sent >= 300);
    assert_int_equal(r.failed, 0);

    /* Still serving, nothing leaked. */
    cJSON *after = agent_test_get_json(dm, "/processes", 200);
    cJSON_Delete(after);
    int fds_after = -1;
    for (int i = 0; i < 50; i++) { /* lingering closes finish within ~2 s */
        fds_after = testenv_fd_count(proc_pid(dm->proc));
        if (fds_after <= fds_before) {
            break;
        }
        testenv_sleep_ms(100);
    }
    assert_true(fds_after <= fds_before);
    fprintf(stderr, "replayed %zu bad requests; fds %d -> %d\n", r.sent, fds_before, fds_after);
    agent_test_stop_dotmon_clean(dm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_bad_http_corpus, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
