/* SPDX-License-Identifier: MIT */
#ifndef TEST_TESTENV_H
#define TEST_TESTENV_H

/*
 * The integration-test world: a private temp dir that doubles as TMPDIR (hence the discovery dir)
 * for the real dotmon binary and real TestApp processes started in it.
 *
 * Typical test (cmocka setup/teardown own the env):
 *
 *     struct testenv env;                       setup:    testenv_init(&env)
 *     struct test_app *app;                               testenv_start_app(&env, NULL, NULL, &app)
 *     struct dotmon *dm;                                  testenv_start_dotmon(&env, args, NULL,
 * &dm) struct httpc_resp r;                                testenv_dotmon_get(dm, "/processes", &r)
 *                                               teardown: testenv_fini(&env)
 *
 * Everything started through an env is owned by it and stopped in testenv_fini (which also
 * removes the dir), so a failed assertion leaves nothing behind. Processes are spawned with
 * tests/support/proc.h and inherit its guarantees (own process group, die with the test).
 *
 * Environment read: DOTMON_BIN (dotmon binary), DOTMON_TESTAPP_DIR (TestApp build output),
 * DOTNET_ROOT or DOTNET_EXE (where the apphost finds the runtime; else `dotnet` in PATH),
 * DOTMON_TEST_TIMEOUT_MULTIPLIER (stretches every timeout, e.g. 5 under valgrind),
 * DOTMON_TEST_KEEP=1 (keep the temp dir), DOTMON_TEST_VERBOSE=1 (echo child output live).
 *
 * Errors: 0 / -errno / AGENT_E_* (common/err.h). Failures print a diagnosis to stderr (what was
 * expected, the child's exit status and the end of its output) before returning.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "httpc.h"
#include "proc.h"

#define TESTENV_MAX_APPS    16
#define TESTENV_MAX_DOTMONS 4
#define TESTENV_DIR_SIZE    32

/* A running TestApp. */
struct test_app {
    struct proc *proc;
    pid_t pid;       /* from its "ready pid=" line (the apphost runs the runtime in-process) */
    char marker[33]; /* random hex, on its command line ("--marker <m>") and in its environment
                        (DOTMON_TEST_MARKER=<m>) */
    bool stopped;    /* the test ended it on purpose (testenv_stop_app) */
};

/* A running dotmon. */
struct dotmon {
    struct proc *proc;
    uint16_t port;     /* the port it printed in "Now listening on: http://127.0.0.1:<port>" */
    char *auth_header; /* "Authorization: Bearer <jwt>" with --temp-apikey, else NULL */
    const char *token; /* the <jwt> inside auth_header, or NULL */
};

struct testenv {
    char dir[TESTENV_DIR_SIZE]; /* /tmp/dmXXXXXX: short, for the 108-byte sun_path limit */
    const char *dotmon_bin;     /* $DOTMON_BIN, or NULL */
    char testapp_bin[4096];     /* $DOTMON_TESTAPP_DIR/TestApp, or "" */
    char dotnet_root[4096];     /* the SDK/runtime root for DOTNET_ROOT, or "" */
    struct test_app *apps[TESTENV_MAX_APPS];
    size_t n_apps;
    struct dotmon *dotmons[TESTENV_MAX_DOTMONS];
    size_t n_dotmons;
};

/* Creates the temp dir and reads the environment. Missing DOTMON_BIN or DOTMON_TESTAPP_DIR is not
 * an error here (harness self-tests need neither); starting the missing program fails later. */
int testenv_init(struct testenv *env);
/* Stops every dotmon (SIGTERM, 5 s grace) and app (SIGTERM, 3 s grace), dumping the output of any
 * that exited abnormally, frees them, and removes the dir. Idempotent. */
void testenv_fini(struct testenv *env);

/*
 * Starts TestApp (the apphost) with TMPDIR=env->dir, DOTNET_ROOT, DOTMON_TEST_MARKER=<marker>,
 * the extra env entries (proc_opts.env syntax), and argv "--marker <marker>" followed by args
 * (NULL-terminated, may be NULL). Waits (30 s) for "ready pid=" and checks the pid.
 */
int testenv_start_app(struct testenv *env, const char *const *args, const char *const *extra_env,
                      struct test_app **out);

/*
 * Sends one command line to the app and waits (timeout_ms, scaled) for its answer: the next stdout
 * line starting with "ok <verb>" or "error <verb>". Returns 0 for ok, AGENT_E_RUNTIME for an error
 * answer, AGENT_E_TIMEOUT / AGENT_E_CLOSED otherwise. *reply (if not NULL) gets the answer line
 * (malloc'd, caller frees).
 */
int testenv_app_cmd(struct test_app *app, const char *cmd, int timeout_ms, char **reply);

/* Sends sig to the app and reaps it (SIGKILL after 5 s if sig did not end it); *wstatus as in
 * proc_wait. The app stays owned by env. */
int testenv_stop_app(struct test_app *app, int sig, int *wstatus);

/*
 * Starts `DOTMON_BIN collect --urls http://127.0.0.1:0 --metrics false <args>` with
 * TMPDIR=env->dir and the extra env. The default --urls is left out when args has --urls, and
 * "--metrics false" when args has --metrics, -m or --metricUrls (otherwise every dotmon would
 * bind the default metrics port localhost:52325, and parallel tests would collide).
 * Waits (15 s) for a stderr JSON log line whose top-level "Message" starts with
 * "Now listening on: http://127.0.0.1:" (or https://) and takes the port from the first such
 * line; with
 * --temp-apikey also for the stdout line "Authorization: Bearer <jwt>".
 */
int testenv_start_dotmon(struct testenv *env, const char *const *args, const char *const *extra_env,
                         struct dotmon **out);

/* SIGTERM, then waits grace_ms (scaled) for dotmon to exit (SIGKILL after). *wstatus as in
 * proc_wait. A clean shutdown is WIFEXITED with status 0. */
int testenv_stop_dotmon(struct dotmon *dm, int grace_ms, int *wstatus);

/* GET / any request to dotmon on 127.0.0.1:<port> with a 10 s (scaled) timeout, adding its
 * Authorization header when it has a temp key. resp as in httpc_request. */
int testenv_dotmon_get(struct dotmon *dm, const char *target, struct httpc_resp *resp);
int testenv_dotmon_request(struct dotmon *dm, const char *method, const char *target,
                           const void *body, size_t body_len, struct httpc_resp *resp);

/*
 * Makes a stale diagnostic socket: binds a Unix socket at
 * <dir>/dotnet-diagnostic-<pid>-<key>-socket and closes it without unlinking, so the file exists
 * but connecting is refused. path_out (may be NULL) gets the path.
 */
int testenv_make_stale_socket(const char *dir, pid_t pid, unsigned long long key, char *path_out,
                              size_t path_size);

/* A pid that no process has now (kill(pid, 0) fails with ESRCH), searched from the top of
 * pid_max down. */
pid_t testenv_unused_pid(void);

/* A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read back, closed). */
uint16_t testenv_free_port(void);

/* A blocking TCP connection to 127.0.0.1:port (retried for up to 2 s), or -errno. */
int testenv_connect_port(uint16_t port);

/* Number of open fds of pid (entries of /proc/<pid>/fd), or -errno. */
int testenv_fd_count(pid_t pid);
/* VmRSS of pid in KiB (from /proc/<pid>/status), or -errno. */
long testenv_rss_kb(pid_t pid);

/* ms times DOTMON_TEST_TIMEOUT_MULTIPLIER (default 1). */
int testenv_timeout(int ms);
/* Monotonic clock in ms; sleeping. */
double testenv_now_ms(void);
void testenv_sleep_ms(int ms);
/* Fills out with size-1 random lowercase hex digits and a NUL. */
void testenv_random_hex(char *out, size_t size);
/* rm -rf path (does not follow symlinks). Returns 0 or -errno. */
int testenv_rm_rf(const char *path);

/*
 * Finds key at the top level of the JSON object text and, if its value is a string, unescapes it
 * into out (truncated to size-1 bytes, always NUL-terminated). Returns false if text is not an
 * object or has no such string member. For reading dotmon's JSON log lines without a JSON
 * library.
 */
bool testenv_json_top_string(const char *text, const char *key, char *out, size_t size);

/* Dumps every process of env (label, state, end of stdout/stderr) to stderr. */
void testenv_dump(struct testenv *env);

/* Arms (seconds > 0, scaled) or disarms (0) a SIGALRM watchdog that kills every child and exits
 * the test process with status 124 and a message. */
void testenv_watchdog(unsigned seconds);

#endif
