/* SPDX-License-Identifier: MIT */
/*
 * Integration: HTTPS on the real dotmon binary, driven with the curl and openssl CLIs against
 * certificates made with `openssl req` at start (RSA-2048 and EC P-256).
 *  - /processes over https with the temporary API key; 401 without it; several requests on one
 *    TLS connection (curl reuses it); a trace of a real TestApp relayed over TLS is a complete
 *    nettrace for dotmon's checker and for TraceEvent;
 *  - TLS 1.1 refused (curl --tls-max 1.1 and openssl s_client -tls1_1); plain HTTP on the TLS port
 *    answered 400 in plain text; garbage, a silent client (closed by the header timeout) and
 *    clients that abort mid-handshake: dotmon keeps serving and its fd count returns to baseline;
 *  - mixed listeners (https + http in one --urls): each speaks its own protocol; a dump streamed
 *    over both is an ELF core (and the two timings are printed);
 *  - start-up refused, naming the setting, without a certificate, with a missing key, a key of
 *    another certificate, or a wrong key password (never printed);
 *  - the clear-text bearer-token warning: once for a non-loopback http URL with auth, never for
 *    loopback only.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_test_util.h"
#include "err.h"
#include "nettrace.h"

static char certdir[64];
static char rsa_cert[128], rsa_key[128], ec_cert[128], ec_key[128], enc_cert[128], enc_key[128];
static const char secret[] = "s3cr3t-pass-phrase";

/* ---- helpers ---- */

static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(cmd));
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    assert_non_null(p);
    size_t got = fread(p, 1, (size_t)n, f);
    fclose(f);
    p[got] = '\0';
    if (len != NULL) {
        *len = got;
    }
    return p;
}

static int group_setup(void **state)
{
    (void)state;
    snprintf(certdir, sizeof(certdir), "/tmp/dmtlsXXXXXX");
    if (mkdtemp(certdir) == NULL) {
        return -1;
    }
    snprintf(rsa_cert, sizeof(rsa_cert), "%s/rsa.crt", certdir);
    snprintf(rsa_key, sizeof(rsa_key), "%s/rsa.key", certdir);
    snprintf(ec_cert, sizeof(ec_cert), "%s/ec.crt", certdir);
    snprintf(ec_key, sizeof(ec_key), "%s/ec.key", certdir);
    snprintf(enc_cert, sizeof(enc_cert), "%s/enc.crt", certdir);
    snprintf(enc_key, sizeof(enc_key), "%s/enc.key", certdir);
    int rc = sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s -out %s -days 30 "
                "-subj /CN=localhost -addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
                rsa_key, rsa_cert);
    rc = rc ? rc
            : sh("openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout %s "
                 "-out %s -days 30 -subj /CN=localhost "
                 "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
                 ec_key, ec_cert);
    rc = rc ? rc
            : sh("openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -aes256 "
                 "-pass pass:%s -out %s 2>/dev/null && openssl req -x509 -key %s -passin "
                 "pass:%s -out %s -days 30 -subj /CN=localhost "
                 "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 2>/dev/null",
                 secret, enc_key, enc_key, secret, enc_cert);
    if (rc != 0) {
        fprintf(stderr, "openssl could not make the test certificates\n");
    }
    return rc == 0 ? 0 : -1;
}

static int group_teardown(void **state)
{
    (void)state;
    return sh("rm -rf %s", certdir) == 0 ? 0 : -1;
}

static void cert_env(char path[256], char key[256], const char *cert, const char *k)
{
    snprintf(path, 256, "DotnetMonitor_Kestrel__Certificates__Default__Path=%s", cert);
    snprintf(key, 256, "DotnetMonitor_Kestrel__Certificates__Default__KeyPath=%s", k);
}

/*
 * curl on url (extra options in `opts`), body to out_path (or /dev/null); returns the HTTP status
 * (0: no response) and stores curl's exit code, connection count and timing.
 */
struct curl_result {
    int status;
    int exit_code;
    int connects;
    double seconds;
    double bytes;
};

static struct curl_result curl(struct testenv *env, const char *opts, const char *urls,
                               const char *out_path)
{
    char wpath[128];
    snprintf(wpath, sizeof(wpath), "%s/curl.w", env->dir);
    struct curl_result r = {0};
    r.exit_code = sh("curl -sS --max-time 60 %s -o %s "
                     "-w '%%{http_code} %%{num_connects} %%{time_total} %%{size_download}\\n' "
                     "%s > %s 2>>%s/curl.err",
                     opts, out_path ? out_path : "/dev/null", urls, wpath, env->dir);
    char *w = slurp(wpath, NULL);
    assert_non_null(w);
    /* One line per URL: the last status wins, connections add up. */
    char *save = NULL;
    for (char *line = strtok_r(w, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char *end = NULL;
        r.status = (int)strtol(line, &end, 10);
        r.connects += (int)strtol(end, &end, 10);
        r.seconds += strtod(end, &end);
        r.bytes += strtod(end, &end);
    }
    free(w);
    return r;
}

static void auth_opt(const struct dotmon *dm, char *out, size_t n, const char *ca)
{
    snprintf(out, n, "--cacert %s -H '%s'", ca, dm->auth_header);
}

/* Waits until dotmon's fd count is back at or below baseline (lingering closes take ~2 s). */
static int wait_fds(const struct dotmon *dm, int baseline, int timeout_ms)
{
    int fds = -1;
    double deadline = testenv_now_ms() + testenv_timeout(timeout_ms);
    while (testenv_now_ms() < deadline) {
        fds = testenv_fd_count(proc_pid(dm->proc));
        if (fds <= baseline) {
            break;
        }
        testenv_sleep_ms(100);
    }
    return fds;
}

/* Reads until EOF or reset; true when the peer closed within timeout_ms. */
static bool closed_within(int fd, int timeout_ms)
{
    struct timeval tv = {.tv_sec = 0, .tv_usec = 200 * 1000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    double deadline = testenv_now_ms() + timeout_ms;
    char b[512];
    while (testenv_now_ms() < deadline) {
        ssize_t n = recv(fd, b, sizeof(b), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            return true;
        }
    }
    return false;
}

/* ---- tests ---- */

/* "dotmon … started": the signal handlers are installed (they come after every listener, so the
 * first "Now listening" line alone does not mean SIGTERM is handled yet). */
static bool match_started(const char *line, void *ctx)
{
    char msg[256];
    (void)ctx;
    return testenv_json_top_string(line, "Message", msg, sizeof(msg)) &&
           strncmp(msg, "dotmon ", 7) == 0 && strstr(msg, " started (pid ") != NULL;
}

static void stop_clean(struct dotmon *dm)
{
    proc_rewind(dm->proc, PROC_STDERR);
    assert_int_equal(proc_wait_line_match(dm->proc, PROC_STDERR, match_started, NULL,
                                          testenv_timeout(10000), NULL),
                     0);
    agent_test_stop_dotmon_clean(dm);
}

static unsigned count_in(const char *hay, const char *needle)
{
    unsigned n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle)) {
        n++;
    }
    return n;
}

static void test_agent_tls_routes_and_abuse(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    char pathv[256], keyv[256];
    cert_env(pathv, keyv, rsa_cert, rsa_key);
    const char *envv[] = {pathv, keyv, NULL};
    const char *args[] = {"--temp-apikey", "--urls", "https://127.0.0.1:0", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, envv, &dm), 0);
    char auth[4096], url[256];
    auth_opt(dm, auth, sizeof(auth), rsa_cert);
    snprintf(url, sizeof(url), "https://127.0.0.1:%u", dm->port);

    /* /processes with the token, verified against the self-signed certificate. */
    char body[128];
    snprintf(body, sizeof(body), "%s/processes.json", env->dir);
    char target[512];
    struct curl_result r = {0};
    double deadline = testenv_now_ms() + testenv_timeout(10000);
    char *json = NULL;
    char pidstr[32];
    snprintf(pidstr, sizeof(pidstr), "\"pid\":%d", (int)app->pid);
    while (testenv_now_ms() < deadline) {
        snprintf(target, sizeof(target), "%s/processes", url);
        r = curl(env, auth, target, body);
        assert_int_equal(r.status, 200);
        free(json);
        json = slurp(body, NULL);
        if (json != NULL && strstr(json, pidstr) != NULL) {
            break;
        }
        testenv_sleep_ms(200);
    }
    assert_non_null(json);
    assert_non_null(strstr(json, pidstr));
    free(json);

    /* 401 without a token, over https too. */
    char ca[256];
    snprintf(ca, sizeof(ca), "--cacert %s", rsa_cert);
    r = curl(env, ca, target, NULL);
    assert_int_equal(r.status, 401);

    /* Keep-alive: six requests, one TLS connection. */
    char six[2048];
    snprintf(six, sizeof(six),
             "%s/processes -o /dev/null %s/info -o /dev/null %s/processes -o /dev/null "
             "%s/info -o /dev/null %s/processes -o /dev/null %s/info",
             url, url, url, url, url, url);
    r = curl(env, auth, six, NULL);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.connects, 1);

    /* ALPN and protocol: http/1.1 over TLS 1.2+; TLS 1.1 refused by both tools. */
    assert_int_equal(sh("echo | openssl s_client -connect 127.0.0.1:%u -alpn h2,http/1.1 "
                        "-CAfile %s 2>/dev/null | grep -q 'ALPN protocol: http/1.1'",
                        dm->port, rsa_cert),
                     0);
    r = curl(env, "-k --tlsv1.0 --tls-max 1.1 --ciphers DEFAULT@SECLEVEL=0", target, NULL);
    assert_int_equal(r.status, 0);
    assert_true(r.exit_code != 0);
    assert_true(sh("echo | openssl s_client -connect 127.0.0.1:%u -tls1_1 "
                   "-cipher DEFAULT@SECLEVEL=0 >/dev/null 2>&1",
                   dm->port) != 0);
    /* Refused by dotmon (not by the client's own policy): it says so. The log line may reach
     * the test's reader thread a little after the client has exited. */
    char *log = NULL;
    double log_t0 = testenv_now_ms();
    for (;;) {
        log = proc_output(dm->proc, PROC_STDERR, NULL);
        assert_non_null(log);
        if (count_in(log, "handshake failed: unsupported protocol") >= 2 ||
            testenv_now_ms() - log_t0 > testenv_timeout(5000)) {
            break;
        }
        free(log);
        testenv_sleep_ms(20);
    }
    assert_true(count_in(log, "handshake failed: unsupported protocol") >= 2);
    free(log);

    /* A real trace relayed over TLS (the zero-copy relay path) is complete. */
    char trace[128];
    snprintf(trace, sizeof(trace), "%s/tls.nettrace", env->dir);
    snprintf(target, sizeof(target), "'%s/trace?pid=%d&durationSeconds=3'", url, (int)app->pid);
    r = curl(env, auth, target, trace);
    assert_int_equal(r.status, 200);
    size_t len = 0;
    char *nt = slurp(trace, &len);
    assert_non_null(nt);
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_feed(&ck, (const uint8_t *)nt, len);
    enum nettrace_verdict v = nettrace_finish(&ck);
    uint64_t events = nettrace_get_stats(&ck)->events;
    nettrace_checker_fini(&ck);
    free(nt);
    fprintf(stderr, "trace over https: %zu bytes, %llu events, verdict %s\n", len,
            (unsigned long long)events, nettrace_verdict_name(v));
    assert_int_equal(v, NETTRACE_COMPLETE);
    assert_true(events > 0);
    cJSON *te = agent_test_tracecheck(env, trace, NULL);
    assert_true(agent_test_int(te, "events") > 0);
    cJSON_Delete(te);

    /* Abuse, then the fd count must return to its baseline. */
    int baseline = testenv_fd_count(proc_pid(dm->proc));
    assert_true(baseline > 0);
    int silent = testenv_connect_port(dm->port);
    int partial = testenv_connect_port(dm->port);
    assert_true(silent >= 0 && partial >= 0);
    static const char hello_start[] = "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03";
    assert_int_equal(send(partial, hello_start, sizeof(hello_start) - 1, MSG_NOSIGNAL),
                     (ssize_t)(sizeof(hello_start) - 1));
    for (int i = 0; i < 20; i++) { /* clients that give up mid-handshake, some with a reset */
        int fd = testenv_connect_port(dm->port);
        assert_true(fd >= 0);
        (void)send(fd, hello_start, sizeof(hello_start) - 1, MSG_NOSIGNAL);
        if (i % 2 == 0) {
            struct linger lg = {.l_onoff = 1, .l_linger = 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        close(fd);
    }
    for (int i = 0; i < 5; i++) { /* garbage instead of a ClientHello */
        assert_true(sh("head -c 3000 /dev/urandom | curl -s --max-time 5 -o /dev/null "
                       "telnet://127.0.0.1:%u >/dev/null 2>&1 || true",
                       dm->port) == 0);
    }
    /* Plain HTTP on the TLS port: a plain-text 400 that says what is wrong. */
    char plain[256];
    snprintf(plain, sizeof(plain), "http://127.0.0.1:%u/processes", dm->port);
    snprintf(body, sizeof(body), "%s/plain.json", env->dir);
    r = curl(env, "", plain, body);
    assert_int_equal(r.status, 400);
    json = slurp(body, NULL);
    assert_non_null(strstr(json, "HTTPS"));
    free(json);
    /* A client that connects and never sends a ClientHello: closed by the header timeout (10 s
     * by default); the one stuck after a partial ClientHello too. */
    double t0 = testenv_now_ms();
    assert_true(closed_within(silent, testenv_timeout(15000)));
    double silent_ms = testenv_now_ms() - t0;
    assert_true(closed_within(partial, testenv_timeout(5000)));
    close(silent);
    close(partial);
    /* Still serving. */
    snprintf(target, sizeof(target), "%s/processes", url);
    r = curl(env, auth, target, NULL);
    assert_int_equal(r.status, 200);
    int fds = wait_fds(dm, baseline, 5000);
    fprintf(stderr, "silent TLS client closed after %.0f ms; fds %d -> %d\n", silent_ms, baseline,
            fds);
    assert_true(fds <= baseline);
    stop_clean(dm);
}

/* Port of the listener announced as "Now listening on: <prefix><port>". */
struct listen_find {
    const char *prefix;
    int port;
};

static bool match_listen(const char *line, void *ctx)
{
    struct listen_find *lf = ctx;
    char msg[512];
    char want[128];
    snprintf(want, sizeof(want), "Now listening on: %s", lf->prefix);
    if (!testenv_json_top_string(line, "Message", msg, sizeof(msg)) ||
        strncmp(msg, want, strlen(want)) != 0) {
        return false;
    }
    char *end = NULL;
    long port = strtol(msg + strlen(want), &end, 10);
    lf->port = end != msg + strlen(want) && port > 0 && port < 65536 ? (int)port : 0;
    return lf->port > 0;
}

static void test_agent_tls_mixed_listeners(void **state)
{
    struct testenv *env = *state;
    struct test_app *app = agent_test_start_app(env);
    char pathv[256], keyv[256];
    cert_env(pathv, keyv, ec_cert, ec_key);
    const char *envv[] = {pathv, keyv, NULL};
    const char *args[] = {"--temp-apikey", "--urls", "https://127.0.0.1:0;http://127.0.0.1:0",
                          NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, envv, &dm), 0);
    struct listen_find lf = {.prefix = "http://127.0.0.1:", .port = 0};
    proc_rewind(dm->proc, PROC_STDERR);
    assert_int_equal(proc_wait_line_match(dm->proc, PROC_STDERR, match_listen, &lf, 5000, NULL), 0);
    int tls_port = dm->port, plain_port = lf.port;
    assert_true(tls_port != plain_port);

    char auth[4096], target[256];
    auth_opt(dm, auth, sizeof(auth), ec_cert);
    snprintf(target, sizeof(target), "https://127.0.0.1:%d/processes", tls_port);
    assert_int_equal(curl(env, auth, target, NULL).status, 200);
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/processes", plain_port);
    assert_int_equal(curl(env, auth, target, NULL).status, 200);
    /* Each port speaks only its own protocol. */
    snprintf(target, sizeof(target), "https://127.0.0.1:%d/processes", plain_port);
    struct curl_result r = curl(env, auth, target, NULL);
    assert_true(r.status == 0 && r.exit_code != 0);
    snprintf(target, sizeof(target), "http://127.0.0.1:%d/processes", tls_port);
    assert_int_equal(curl(env, auth, target, NULL).status, 400);

    /* A dump streamed over each (dumps are large: the owned-buffer relay under load). */
    const int ports[2] = {tls_port, plain_port};
    const char *schemes[2] = {"https", "http"};
    for (int i = 0; i < 2; i++) {
        char out[128];
        snprintf(out, sizeof(out), "%s/dump.%s", env->dir, schemes[i]);
        snprintf(target, sizeof(target), "'%s://127.0.0.1:%d/dump?pid=%d&type=WithHeap'",
                 schemes[i], ports[i], (int)app->pid);
        r = curl(env, auth, target, out);
        assert_int_equal(r.status, 200);
        FILE *f = fopen(out, "rb");
        assert_non_null(f);
        unsigned char h[18];
        assert_int_equal(fread(h, 1, sizeof(h), f), sizeof(h));
        fclose(f);
        assert_memory_equal(h,
                            "\x7f"
                            "ELF",
                            4);
        assert_int_equal(h[16], 4); /* ET_CORE */
        assert_true(r.bytes > 1e6);
        fprintf(stderr, "dump over %s: %.1f MB in %.2f s (%.0f MB/s)\n", schemes[i], r.bytes / 1e6,
                r.seconds, r.bytes / 1e6 / r.seconds);
        unlink(out);
    }
    stop_clean(dm);
}

static void expect_refused(struct testenv *env, const char *const *envv, const char *setting,
                           const char *also)
{
    const char *args[] = {"collect", "--temp-apikey",       "--metrics", "false",
                          "--urls",  "https://127.0.0.1:0", NULL};
    char *err = NULL;
    int code = agent_test_run_dotmon(env, args, envv, NULL, &err);
    assert_non_null(err);
    if (code != 1 || strstr(err, setting) == NULL || (also && strstr(err, also) == NULL)) {
        fprintf(stderr, "exit %d, want 1 naming %s: %s\n", code, setting, err);
    }
    assert_int_equal(code, 1);
    assert_non_null(strstr(err, setting));
    if (also != NULL) {
        assert_non_null(strstr(err, also));
    }
    assert_null(strstr(err, secret)); /* the password never reaches the log */
    assert_null(strstr(err, "Now listening"));
    free(err);
}

static void test_agent_tls_startup_refused(void **state)
{
    struct testenv *env = *state;
    char pathv[256], keyv[256], pw[256], missing[128];
    snprintf(missing, sizeof(missing), "%s/none.key", certdir);
    const char *none[] = {NULL};
    expect_refused(env, none, "Kestrel:Certificates:Default:Path", "https://127.0.0.1:0");

    cert_env(pathv, keyv, rsa_cert, missing);
    const char *e1[] = {pathv, keyv, NULL};
    expect_refused(env, e1, "Kestrel:Certificates:Default:KeyPath", "No such file");

    cert_env(pathv, keyv, rsa_cert, ec_key);
    const char *e2[] = {pathv, keyv, NULL};
    expect_refused(env, e2, "Kestrel:Certificates:Default:KeyPath", "does not belong");

    cert_env(pathv, keyv, enc_cert, enc_key);
    const char *e3[] = {pathv, keyv, NULL};
    expect_refused(env, e3, "Kestrel:Certificates:Default:Password", "encrypted");
    snprintf(pw, sizeof(pw), "DotnetMonitor_Kestrel__Certificates__Default__Password=not-%s",
             secret);
    const char *e4[] = {pathv, keyv, pw, NULL};
    expect_refused(env, e4, "Kestrel:Certificates:Default:Password", "does not decrypt");

    /* The right password starts; config show redacts it. */
    snprintf(pw, sizeof(pw), "DotnetMonitor_Kestrel__Certificates__Default__Password=%s", secret);
    const char *e5[] = {pathv, keyv, pw, NULL};
    const char *args[] = {"--temp-apikey", "--urls", "https://127.0.0.1:0", NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, args, e5, &dm), 0);
    char auth[4096], target[256];
    auth_opt(dm, auth, sizeof(auth), enc_cert);
    snprintf(target, sizeof(target), "https://127.0.0.1:%u/processes", dm->port);
    assert_int_equal(curl(env, auth, target, NULL).status, 200);
    stop_clean(dm);
    const char *show[] = {"config", "show", NULL};
    char *out = NULL;
    assert_int_equal(agent_test_run_dotmon(env, show, e5, &out, NULL), 0);
    assert_non_null(strstr(out, "Kestrel:Certificates:Default:Password"));
    assert_null(strstr(out, secret));
    free(out);
}

static void test_agent_tls_cleartext_warning(void **state)
{
    struct testenv *env = *state;
    /* Non-loopback http with auth: one warning, naming the URLs, with no token in the log. */
    const char *a1[] = {"--temp-apikey", "--urls", "http://127.0.0.1:0;http://0.0.0.0:0;http://+:0",
                        NULL};
    struct dotmon *dm = NULL;
    assert_int_equal(testenv_start_dotmon(env, a1, NULL, &dm), 0);
    stop_clean(dm);
    char *err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_non_null(err);
    assert_int_equal(count_in(err, "clear text"), 1);
    assert_non_null(strstr(err, "http://0.0.0.0:0"));
    assert_null(strstr(err, dm->token));
    free(err);

    /* Loopback only: no warning; nor with https (covered above) or without auth. */
    const char *a2[] = {"--temp-apikey", "--urls", "http://127.0.0.1:0;http://localhost:0", NULL};
    assert_int_equal(testenv_start_dotmon(env, a2, NULL, &dm), 0);
    stop_clean(dm);
    err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_int_equal(count_in(err, "clear text"), 0);
    free(err);
    const char *a3[] = {"--no-auth", "--urls", "http://127.0.0.1:0;http://0.0.0.0:0", NULL};
    assert_int_equal(testenv_start_dotmon(env, a3, NULL, &dm), 0);
    stop_clean(dm);
    err = proc_output(dm->proc, PROC_STDERR, NULL);
    assert_int_equal(count_in(err, "clear text"), 0);
    free(err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_agent_tls_startup_refused, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_tls_cleartext_warning, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_tls_routes_and_abuse, agent_test_setup,
                                        agent_test_teardown),
        cmocka_unit_test_setup_teardown(test_agent_tls_mixed_listeners, agent_test_setup,
                                        agent_test_teardown),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
