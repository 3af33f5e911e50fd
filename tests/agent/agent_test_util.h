/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TEST_UTIL_H
#define AGENT_TEST_UTIL_H

/*
 * Shared pieces of the dotmon integration tests (test_agent_*.c): cmocka setup/teardown around a
 * struct testenv, starters that assert, and JSON checks of dotmon's responses. Every helper fails
 * the running test (cmocka assert) instead of returning an error, and prints the response it
 * did not like first.
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <cJSON.h>

#include "httpc.h"
#include "testenv.h"

/* cmocka setup/teardown: *state becomes a heap struct testenv (temp dir) plus a 180 s watchdog. */
int agent_test_setup(void **state);
int agent_test_teardown(void **state);

/* Starts a TestApp / a dotmon (extra args, NULL-terminated), asserting success. */
struct test_app *agent_test_start_app(struct testenv *env);
struct dotmon *agent_test_start_dotmon(struct testenv *env, const char *const *args);

/* Stops dotmon with SIGTERM and asserts it exited with status 0 within 10 s: a crash, a hang or
 * a LeakSanitizer report at exit fails the test. */
void agent_test_stop_dotmon_clean(struct dotmon *dm);

/* GETs target (with dotmon's token if it has one), asserts the status and, for 2xx, that the body
 * is application/json; returns the parsed body (caller cJSON_Delete). */
cJSON *agent_test_get_json(struct dotmon *dm, const char *target, int expect_status);

/* Asserts resp is an RFC 7807 problem: status code, application/problem+json, and a JSON object
 * whose "status" equals it and whose "title" and "detail" are strings. */
void agent_test_assert_problem(const struct httpc_resp *resp, int expect_status);
/* GET target, then agent_test_assert_problem. */
void agent_test_expect_problem(struct dotmon *dm, const char *method, const char *target,
                               int expect_status);
/* dotnet-monitor's answer for a selector that matches no process: 400, its detail word for word. */
#define AGENT_TEST_DM_NO_PROCESS "Unable to discover a target process."
/* agent_test_expect_problem, and the problem's "detail" is exactly `detail`. */
void agent_test_expect_problem_detail(struct dotmon *dm, const char *method, const char *target,
                                      int expect_status, const char *detail);

/*
 * Polls GET /processes every 100 ms until the listed pids are exactly pids[0..n) (any order), for
 * up to timeout_ms (scaled); returns that array (caller cJSON_Delete) or fails the test showing
 * the last body.
 */
cJSON *agent_test_wait_processes(struct dotmon *dm, const pid_t *pids, size_t n, int timeout_ms);

/* The element of a /processes array with this pid, or NULL. */
cJSON *agent_test_find_pid(cJSON *arr, pid_t pid);
/*
 * Runs tests/tools/tracecheck (TraceEvent; $DOTMON_TRACECHECK with $DOTNET_EXE) on the trace at
 * path, with `--find marker` when marker is not NULL; fails the test unless it reads the file
 * whole. Returns its JSON answer (caller cJSON_Delete).
 */
cJSON *agent_test_tracecheck(struct testenv *env, const char *path, const char *marker);

/*
 * GCStart/GCEnd come in pairs with the same GC number; only a GC already running when the
 * session began (an end without its start, numbered below every pair) or still running when it
 * stopped (a start without its end, numbered above every pair) may be unmatched. Returns the
 * number of pairs, or 0 (saying why on stderr) when the pairing is broken.
 */
size_t agent_test_gc_pairs(const uint32_t *starts, size_t nstarts, const uint32_t *ends,
                           size_t nends);

/* dotmon's descriptor count: the lowest of a few samples 50 ms apart (discovery's liveness
 * checks open a socket now and then). */
int agent_test_fd_baseline(pid_t pid);
/* Waits (timeout_ms, scaled) until pid's descriptor count is at most base; returns the last
 * count. */
int agent_test_wait_fds(pid_t pid, int base, int timeout_ms);

/* A key pair from `dotmon generatekey --output machinejson`. */
struct agent_test_key {
    char header[4096]; /* "Authorization: Bearer …" */
    char subject[64];
    char public_key[1024];
};
/* Runs the dotmon binary with args (and extra env); returns its exit status (128+signal when
 * killed) and its captured stdout/stderr (malloc'd; either pointer may be NULL). */
int agent_test_run_dotmon(struct testenv *env, const char *const *args,
                          const char *const *extra_env, char **out, char **err);
/* A new key pair, asserting generatekey worked. */
void agent_test_generate_key(struct testenv *env, struct agent_test_key *k);

/*
 * A trace download abandoned by its client: connects to 127.0.0.1:port, sends GET target (with
 * auth_header, "Authorization: Bearer …", unless NULL), reads until `bytes` bytes of response
 * arrived or `ms` passed (or the server closed), and closes the socket. Returns the bytes read;
 * *status (if not NULL) gets the response's status code (0 if no status line arrived).
 */
size_t agent_test_abandon_trace(uint16_t port, const char *auth_header, const char *target,
                                size_t bytes, int ms, int *status);
/* Operations that are Starting, Running or Stopping (traces and dumps alike). */
size_t agent_test_running_traces(struct dotmon *dm);
/* Waits (30 s, scaled) until agent_test_running_traces is 0, failing the test otherwise. */
void agent_test_wait_no_running_traces(struct dotmon *dm);

/* True when s is a GUID in 8-4-4-4-12 hex form. */
bool agent_test_is_guid(const char *s);
/* The string member name of obj, failing the test if it is missing or not a string. */
const char *agent_test_str(const cJSON *obj, const char *name);
/* The integer member name of obj, failing the test if it is missing or not a number. */
long long agent_test_int(const cJSON *obj, const char *name);

#endif
