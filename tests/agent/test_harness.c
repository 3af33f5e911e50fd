/* SPDX-License-Identifier: MIT */
/*
 * Self-tests of the integration harness (tests/support: proc, httpc, testenv helpers), so a
 * failing dotmon test can be trusted to be dotmon's fault. Needs only /bin/sh and coreutils.
 */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "httpc.h"
#include "proc.h"
#include "testenv.h"
#include "timebound.h"

static struct proc *spawn_sh(const char *script, const char *const *env)
{
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    struct proc_opts o = {.argv = argv, .env = env, .label = "sh"};
    struct proc *p = NULL;
    assert_int_equal(proc_spawn(&o, &p), 0);
    assert_non_null(p);
    return p;
}

/* True once pid is gone or a zombie (a reaper may be slow or absent in containers). */
static bool pid_gone(pid_t pid)
{
    if (kill(pid, 0) != 0 && errno == ESRCH) {
        return true;
    }
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        return true;
    }
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp && rp[1] == ' ' && rp[2] == 'Z';
}

/* ---- proc ----------------------------------------------------------------------------------- */

static void test_proc_lines_stdin_and_exit_status(void **state)
{
    (void)state;
    struct proc *p = spawn_sh("echo hello; echo oops >&2; read x; echo \"got $x\"; exit 3", NULL);
    char *line = NULL;
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "hel", 5000, &line), 0);
    assert_string_equal(line, "hello");
    free(line);
    assert_int_equal(proc_wait_line(p, PROC_STDERR, "oops", 5000, NULL), 0);
    assert_int_equal(proc_send_line(p, "abc def"), 0);
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "got ", 5000, &line), 0);
    assert_string_equal(line, "got abc def");
    free(line);
    int st = 0;
    assert_int_equal(proc_wait(p, 5000, &st), 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 3);
    assert_false(proc_running(p));
    /* The stream is over: waiting again reports the end, not a timeout. */
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "never", 5000, NULL), AGENT_E_CLOSED);
    /* Already reaped: nothing to signal. */
    assert_int_equal(proc_signal(p, SIGTERM), -ESRCH);
    proc_free(p);
}

static void test_proc_cursor_find_and_rewind(void **state)
{
    (void)state;
    struct proc *p = spawn_sh("printf 'a 1\\r\\nb 2\\na 3\\nlast'", NULL);
    char *line = NULL;
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "a ", 5000, &line), 0);
    assert_string_equal(line, "a 1"); /* CRLF stripped */
    free(line);
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "a ", 5000, &line), 0);
    assert_string_equal(line, "a 3"); /* the cursor moved past "a 1", skipping "b 2" */
    free(line);
    /* A last line without a newline counts once the stream ends. */
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "last", 5000, NULL), 0);
    assert_int_equal(proc_find_line(p, PROC_STDOUT, "b ", &line), 0);
    assert_string_equal(line, "b 2");
    free(line);
    assert_int_equal(proc_find_line(p, PROC_STDOUT, "zzz", NULL), AGENT_E_NOTFOUND);
    proc_rewind(p, PROC_STDOUT);
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "a ", 5000, &line), 0);
    assert_string_equal(line, "a 1");
    free(line);
    size_t n = 0;
    char *all = proc_output(p, PROC_STDOUT, &n);
    assert_non_null(all);
    assert_int_equal(n, strlen("a 1\r\nb 2\na 3\nlast"));
    free(all);
    proc_free(p);
}

static void test_proc_wait_line_times_out(void **state)
{
    (void)state;
    struct proc *p = spawn_sh("echo started; sleep 30", NULL);
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "started", 5000, NULL), 0);
    double t0 = testenv_now_ms();
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "never", 200, NULL), AGENT_E_TIMEOUT);
    double took = testenv_now_ms() - t0;
    assert_true(took >= 190);
    ASSERT_BELOW_MS(took, 2000);
    assert_true(proc_running(p));
    proc_free(p); /* kills the running child */
}

static void test_proc_env_and_cwd(void **state)
{
    (void)state;
    setenv("HARNESS_DROP_ME", "x", 1);
    setenv("HARNESS_KEEP_ME", "kept", 1);
    const char *env[] = {"HARNESS_FOO=bar=baz", "HARNESS_DROP_ME", "HARNESS_KEEP_ME=over", NULL};
    const char *argv[] = {"sh", "-c",
                          "echo \"foo=$HARNESS_FOO drop=${HARNESS_DROP_ME-unset} "
                          "keep=$HARNESS_KEEP_ME cwd=$(pwd)\"",
                          NULL};
    struct proc_opts o = {.argv = argv, .env = env, .cwd = "/"};
    struct proc *p = NULL;
    assert_int_equal(proc_spawn(&o, &p), 0); /* "sh" found through PATH */
    assert_string_equal(proc_label(p), "sh");
    char *line = NULL;
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "foo=", 5000, &line), 0);
    assert_string_equal(line, "foo=bar=baz drop=unset keep=over cwd=/");
    free(line);
    proc_free(p);
    unsetenv("HARNESS_DROP_ME");
    unsetenv("HARNESS_KEEP_ME");
}

static void test_proc_spawn_reports_exec_errors(void **state)
{
    (void)state;
    struct proc *p = NULL;
    const char *missing[] = {"/nonexistent/definitely-not-here", NULL};
    struct proc_opts o = {.argv = missing};
    assert_int_equal(proc_spawn(&o, &p), -ENOENT);
    assert_null(p);
    /* A file without any x bit: EACCES even for root. */
    char tmpl[] = "/tmp/dmnoexecXXXXXX";
    int fd = mkstemp(tmpl);
    assert_true(fd >= 0);
    assert_int_equal(fchmod(fd, 0644), 0);
    close(fd);
    const char *not_exec[] = {tmpl, NULL};
    o.argv = not_exec;
    assert_int_equal(proc_spawn(&o, &p), -EACCES);
    unlink(tmpl);
    const char *sh[] = {"/bin/sh", "-c", "true", NULL};
    o.argv = sh;
    o.cwd = "/nonexistent-dir";
    assert_int_equal(proc_spawn(&o, &p), -ENOENT);
}

static void test_proc_child_inherits_only_stdio(void **state)
{
    (void)state;
    /* An inheritable pipe and socket in the test process must not reach the child. */
    int leak[2];
    assert_int_equal(pipe(leak), 0);
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(sock >= 0);
    /* The shell reports ready once its start-up (loader, libraries) is over and it only waits
     * on stdin: from then on its fd table is final. */
    const char *argv[] = {"/bin/sh", "-c", "echo ready; read x", NULL};
    struct proc_opts o = {.argv = argv};
    struct proc *a = NULL, *b = NULL;
    assert_int_equal(proc_spawn(&o, &a), 0);
    assert_int_equal(proc_spawn(&o, &b), 0); /* nor a's pipes */
    assert_int_equal(proc_wait_line(a, PROC_STDOUT, "ready", 10000, NULL), 0);
    assert_int_equal(proc_wait_line(b, PROC_STDOUT, "ready", 10000, NULL), 0);
    int na = testenv_fd_count(proc_pid(a)), nb = testenv_fd_count(proc_pid(b));
    if (na != 3 || nb != 3) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "ls -l /proc/%d/fd /proc/%d/fd >&2", (int)proc_pid(a),
                 (int)proc_pid(b));
        int sr = system(cmd);
        (void)sr;
    }
    assert_int_equal(na, 3);
    assert_int_equal(nb, 3);
    /* Children start with SIGPIPE at its default even though the test ignores it. */
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)proc_pid(a));
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    unsigned long long ign = ~0ULL;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "SigIgn:", 7) == 0) {
            ign = strtoull(line + 7, NULL, 16);
        }
    }
    fclose(f);
    assert_int_equal(ign & (1ULL << (SIGPIPE - 1)), 0);
    proc_free(a);
    proc_free(b);
    close(leak[0]);
    close(leak[1]);
    close(sock);
}

static void test_proc_kill_escalates_and_takes_the_group(void **state)
{
    (void)state;
    /* The shell and its background sleep ignore SIGTERM: only the SIGKILL to the group works. */
    struct proc *p = spawn_sh("trap '' TERM; sleep 60 & echo child=$!; wait", NULL);
    char *line = NULL;
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "child=", 5000, &line), 0);
    pid_t child = (pid_t)strtol(line + 6, NULL, 10);
    free(line);
    assert_true(child > 0);
    double t0 = testenv_now_ms();
    int st = 0;
    assert_int_equal(proc_kill(p, 300, &st), 0);
    double took = testenv_now_ms() - t0;
    assert_true(took >= 250);
    ASSERT_BELOW_MS(took, 5000);
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGKILL);
    for (int i = 0; i < 200 && !pid_gone(child); i++) {
        testenv_sleep_ms(10);
    }
    assert_true(pid_gone(child));
    char s[64];
    assert_string_equal(proc_status_str(st, s, sizeof s), "signal 9 (Killed)");
    proc_free(p);
}

static void test_proc_drains_big_output(void **state)
{
    (void)state;
    /* 4 MiB on each stream, far past a pipe's 64 KiB, while the test reads nothing. */
    struct proc *p = spawn_sh("head -c 4194304 /dev/zero | tr '\\0' x; echo; "
                              "head -c 4194304 /dev/zero | tr '\\0' y >&2; echo done",
                              NULL);
    int st = 0;
    assert_int_equal(proc_wait(p, 20000, &st), 0);
    assert_int_equal(proc_wait_line(p, PROC_STDOUT, "done", 5000, NULL), 0);
    size_t n_out = 0, n_err = 0;
    char *out = proc_output(p, PROC_STDOUT, &n_out);
    char *err = proc_output(p, PROC_STDERR, &n_err);
    assert_int_equal(n_out, 4194304 + 1 + 5);
    assert_int_equal(n_err, 4194304);
    free(out);
    free(err);
    proc_free(p);
}

static void test_proc_send_after_exit_fails_cleanly(void **state)
{
    (void)state;
    struct proc *p = spawn_sh("exit 0", NULL);
    assert_int_equal(proc_wait(p, 5000, NULL), 0);
    /* No SIGPIPE death: the write fails with EPIPE. */
    int rc = 0;
    for (int i = 0; i < 3 && rc == 0; i++) {
        rc = proc_send_line(p, "anyone there?");
    }
    assert_int_equal(rc, -EPIPE);
    proc_close_stdin(p);
    assert_int_equal(proc_send_line(p, "x"), AGENT_E_CLOSED);
    proc_free(p);
}

/* ---- httpc against a canned in-process server ---------------------------------------------- */

struct canned_server {
    int lfd;
    uint16_t port;
    pthread_t thread;
    const char *const *replies; /* one per request, in order, across connections */
    size_t n_replies;
    size_t next;
    bool close_after_each; /* close the connection after every reply (without saying so) */
    bool silent;           /* accept and read, never answer */
    int connections;
    char last_request[2048];
};

static void *canned_main(void *arg)
{
    struct canned_server *s = arg;
    for (;;) {
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0) {
            break; /* shutdown() of the listener ends the server */
        }
        s->connections++;
        char req[2048];
        size_t have = 0;
        for (;;) {
            ssize_t r = recv(fd, req + have, sizeof req - 1 - have, 0);
            if (r <= 0) {
                break;
            }
            have += (size_t)r;
            req[have] = '\0';
            char *end = strstr(req, "\r\n\r\n");
            if (!end) {
                if (have == sizeof req - 1) {
                    break;
                }
                continue;
            }
            size_t used = (size_t)(end + 4 - req);
            memcpy(s->last_request, req, used);
            s->last_request[used] = '\0';
            memmove(req, req + used, have - used);
            have -= used;
            if (s->silent || s->next >= s->n_replies) {
                continue;
            }
            const char *reply = s->replies[s->next++];
            ssize_t w = send(fd, reply, strlen(reply), MSG_NOSIGNAL);
            (void)w;
            if (s->close_after_each) {
                break;
            }
        }
        close(fd);
    }
    return NULL;
}

static void canned_start(struct canned_server *s)
{
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(s->lfd, 8), 0);
    socklen_t sl = sizeof sa;
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&sa, &sl), 0);
    s->port = ntohs(sa.sin_port);
    assert_int_equal(pthread_create(&s->thread, NULL, canned_main, s), 0);
}

static void canned_stop(struct canned_server *s)
{
    shutdown(s->lfd, SHUT_RDWR);
    pthread_join(s->thread, NULL);
    close(s->lfd);
}

static void test_httpc_content_length_and_keep_alive(void **state)
{
    (void)state;
    const char *replies[] = {
        "HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\n"
        "Content-Length: 7\r\nX-Dup: 1\r\nx-dup: 2\r\n\r\n[1,2,3]",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n",
    };
    struct canned_server s = {.replies = replies, .n_replies = 2};
    canned_start(&s);
    struct httpc c;
    httpc_init(&c, "127.0.0.1", s.port, 5000);
    struct httpc_resp r;
    const char *hdrs[] = {"Authorization: Bearer abc", NULL};
    assert_int_equal(httpc_request(&c, "GET", "/processes", hdrs, NULL, 0, &r), 0);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.reason, "OK");
    assert_string_equal(r.body, "[1,2,3]");
    assert_int_equal(r.body_len, 7);
    assert_true(r.keep_alive);
    assert_false(r.chunked);
    assert_true(httpc_content_type_is(&r, "application/json"));
    assert_false(httpc_content_type_is(&r, "application/problem+json"));
    assert_string_equal(httpc_header(&r, "content-type"), "application/json; charset=utf-8");
    assert_int_equal(httpc_header_count(&r, "X-DUP"), 2);
    assert_null(httpc_header(&r, "WWW-Authenticate"));
    assert_true(r.latency_ms >= r.ttfb_ms && r.latency_ms > 0);
    assert_non_null(strstr(s.last_request, "GET /processes HTTP/1.1\r\n"));
    assert_non_null(strstr(s.last_request, "Authorization: Bearer abc\r\n"));
    assert_non_null(strstr(s.last_request, "Host: 127.0.0.1:"));
    httpc_resp_fini(&r);
    assert_int_equal(httpc_request(&c, "GET", "/nope", NULL, NULL, 0, &r), 0);
    assert_int_equal(r.status, 404);
    assert_int_equal(r.body_len, 0);
    assert_string_equal(r.body, "");
    assert_int_equal(c.requests_on_conn, 2); /* same connection */
    httpc_resp_fini(&r);
    httpc_fini(&c);
    canned_stop(&s);
    assert_int_equal(s.connections, 1);
}

static void test_httpc_chunked_and_interim(void **state)
{
    (void)state;
    const char *replies[] = {
        "HTTP/1.1 100 Continue\r\n\r\n"
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        "5;ext=1\r\nhello\r\n1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\n",
    };
    struct canned_server s = {.replies = replies, .n_replies = 1};
    canned_start(&s);
    struct httpc_resp r;
    assert_int_equal(httpc_fetch(s.port, "POST", "/trace", NULL, "{}", 2, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_true(r.chunked);
    assert_string_equal(r.body, "hello 0123456789");
    assert_non_null(strstr(s.last_request, "Content-Length: 2\r\n"));
    httpc_resp_fini(&r);
    canned_stop(&s);
}

static void test_httpc_body_until_close_and_head(void **state)
{
    (void)state;
    const char *replies[] = {
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nstreamed until close",
    };
    struct canned_server s = {.replies = replies, .n_replies = 1, .close_after_each = true};
    canned_start(&s);
    struct httpc_resp r;
    assert_int_equal(httpc_get(s.port, "/", NULL, 5000, &r), 0);
    assert_true(r.until_close);
    assert_false(r.keep_alive);
    assert_string_equal(r.body, "streamed until close");
    httpc_resp_fini(&r);
    canned_stop(&s);

    const char *head_replies[] = {"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"};
    struct canned_server h = {.replies = head_replies, .n_replies = 1};
    canned_start(&h);
    assert_int_equal(httpc_fetch(h.port, "HEAD", "/", NULL, NULL, 0, 5000, &r), 0);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.body_len, 0);
    httpc_resp_fini(&r);
    canned_stop(&h);
}

static void test_httpc_retries_a_closed_keep_alive_connection(void **state)
{
    (void)state;
    const char *replies[] = {
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
        "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nagain",
    };
    struct canned_server s = {.replies = replies, .n_replies = 2, .close_after_each = true};
    canned_start(&s);
    struct httpc c;
    httpc_init(&c, "127.0.0.1", s.port, 5000);
    struct httpc_resp r;
    assert_int_equal(httpc_request(&c, "GET", "/", NULL, NULL, 0, &r), 0);
    assert_true(r.keep_alive); /* the server claimed keep-alive, then closed */
    httpc_resp_fini(&r);
    testenv_sleep_ms(50); /* let the FIN arrive */
    assert_int_equal(httpc_request(&c, "GET", "/", NULL, NULL, 0, &r), 0);
    assert_string_equal(r.body, "again");
    httpc_resp_fini(&r);
    httpc_fini(&c);
    canned_stop(&s);
    assert_int_equal(s.connections, 2);
}

static void expect_proto_error(const char *reply)
{
    const char *replies[] = {reply};
    struct canned_server s = {.replies = replies, .n_replies = 1, .close_after_each = true};
    canned_start(&s);
    struct httpc_resp r;
    int rc = httpc_get(s.port, "/", NULL, 5000, &r);
    if (rc != AGENT_E_PROTO) {
        fprintf(stderr, "reply %s -> rc %d (%s), error '%s'\n", reply, rc, agent_strerror(rc),
                r.error);
    }
    assert_int_equal(rc, AGENT_E_PROTO);
    assert_true(r.error[0] != '\0');
    httpc_resp_fini(&r);
    canned_stop(&s);
}

static void test_httpc_rejects_malformed_responses(void **state)
{
    (void)state;
    expect_proto_error("HTTP/1.1 200 OK\nContent-Length: 0\n\n");
    expect_proto_error("HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n");
    expect_proto_error("HTTP/2 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect_proto_error("HTTP/1.1 200 OK\r\nBad Header: x\r\n\r\n");
    expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n"
                       "\r\n0\r\n\r\n");
    expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nabc");
    expect_proto_error("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n");
    expect_proto_error("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
    expect_proto_error(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n0\r\n\r\n");
}

static void test_httpc_truncated_body_is_closed_error(void **state)
{
    (void)state;
    const char *replies[] = {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"};
    struct canned_server s = {.replies = replies, .n_replies = 1, .close_after_each = true};
    canned_start(&s);
    struct httpc_resp r;
    assert_int_equal(httpc_get(s.port, "/", NULL, 5000, &r), AGENT_E_CLOSED);
    httpc_resp_fini(&r);
    canned_stop(&s);
}

static void test_httpc_timeout_and_refused(void **state)
{
    (void)state;
    struct canned_server s = {.silent = true};
    canned_start(&s);
    struct httpc_resp r;
    double t0 = testenv_now_ms();
    assert_int_equal(httpc_get(s.port, "/", NULL, 300, &r), AGENT_E_TIMEOUT);
    double took = testenv_now_ms() - t0;
    assert_true(took >= 290);
    ASSERT_BELOW_MS(took, 3000);
    httpc_resp_fini(&r);
    canned_stop(&s);
    /* The listener is gone now: nothing on that port. */
    assert_int_equal(httpc_get(s.port, "/", NULL, 2000, &r), -ECONNREFUSED);
    assert_non_null(strstr(r.error, "connect"));
    httpc_resp_fini(&r);
}

static void test_httpc_raw_and_parse(void **state)
{
    (void)state;
    const char *replies[] = {"HTTP/1.1 400 Bad Request\r\nContent-Type: application/problem+json"
                             "\r\nContent-Length: 14\r\nConnection: close\r\n\r\n{\"status\":400}"};
    struct canned_server s = {.replies = replies, .n_replies = 1, .close_after_each = true};
    canned_start(&s);
    struct buf out;
    buf_init(&out, 0);
    const char junk[] = "BREW /pot HTCPCP/1.0\r\n\r\n";
    assert_int_equal(httpc_raw(s.port, junk, sizeof junk - 1, false, 5000, &out), 0);
    struct httpc_resp r;
    size_t used = 0;
    assert_int_equal(httpc_parse(buf_data(&out), buf_size(&out), NULL, &r, &used), 0);
    assert_int_equal(used, buf_size(&out));
    assert_int_equal(r.status, 400);
    assert_false(r.keep_alive);
    assert_true(httpc_content_type_is(&r, "application/problem+json"));
    assert_string_equal(r.body, "{\"status\":400}");
    httpc_resp_fini(&r);
    assert_non_null(strstr(s.last_request, "BREW /pot"));
    canned_stop(&s);
    /* Incomplete bytes parse as "closed early". */
    assert_int_equal(httpc_parse("HTTP/1.1 200 OK\r\n", 17, NULL, &r, NULL), AGENT_E_CLOSED);
    httpc_resp_fini(&r);

    /* A silent peer: raw mode returns what it has when the deadline passes. (No half-close:
     * this server hangs up on EOF.) */
    struct canned_server q = {.silent = true};
    canned_start(&q);
    buf_reset(&out);
    assert_int_equal(httpc_raw(q.port, "GET / HTTP/1.1\r\n\r\n", 18, false, 200, &out),
                     AGENT_E_TIMEOUT);
    assert_int_equal(buf_size(&out), 0);
    canned_stop(&q);
    buf_fini(&out);
}

/* ---- testenv helpers ------------------------------------------------------------------------ */

static void test_testenv_json_top_string(void **state)
{
    (void)state;
    char out[128];
    const char *line =
        "{\"Timestamp\":\"t\",\"State\":{\"Message\":\"nested\"},\"Scopes\":[{\"Message\":"
        "\"x\"}],\"Message\":\"Now listening on: http:\\/\\/127.0.0.1:8080\","
        "\"Category\":\"dotmon\"}";
    assert_true(testenv_json_top_string(line, "Message", out, sizeof out));
    assert_string_equal(out, "Now listening on: http://127.0.0.1:8080");
    assert_true(testenv_json_top_string(" { \"k\" : \"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\" } ",
                                        "k", out, sizeof out));
    assert_string_equal(out, "a\"b\\c\n\xc3\xa9\xf0\x9f\x98\x80");
    assert_false(testenv_json_top_string("{\"Messages\":\"x\"}", "Message", out, sizeof out));
    assert_false(testenv_json_top_string("{\"Message\":42}", "Message", out, sizeof out));
    assert_false(testenv_json_top_string("Message: plain text", "Message", out, sizeof out));
    assert_false(
        testenv_json_top_string("{\"a\":\"Message\",\"b\":1}", "Message", out, sizeof out));
    char small[4];
    assert_true(testenv_json_top_string("{\"m\":\"abcdef\"}", "m", small, sizeof small));
    assert_string_equal(small, "abc");
}

static void test_testenv_dir_sockets_and_proc_info(void **state)
{
    (void)state;
    struct testenv env;
    assert_int_equal(testenv_init(&env), 0);
    assert_int_equal(strncmp(env.dir, "/tmp/dm", 7), 0);
    assert_int_equal(strlen(env.dir), 13);
    struct stat st;
    assert_int_equal(stat(env.dir, &st), 0);
    assert_true(S_ISDIR(st.st_mode));

    pid_t dead = testenv_unused_pid();
    assert_true(dead > 0);
    assert_int_equal(kill(dead, 0), -1);
    char path[128];
    assert_int_equal(testenv_make_stale_socket(env.dir, dead, 123456789ULL, path, sizeof path), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    /* Nobody listens: connect is refused at once. */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(path) < sizeof sa.sun_path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), -1);
    assert_int_equal(errno, ECONNREFUSED);
    close(fd);

    /* Nested content goes too. */
    snprintf(path, sizeof path, "%s/sub/deeper", env.dir);
    char sub[64];
    snprintf(sub, sizeof sub, "%s/sub", env.dir);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_int_equal(mkdir(path, 0700), 0);

    assert_true(testenv_fd_count(getpid()) >= 3);
    assert_true(testenv_rss_kb(getpid()) > 0);
    assert_int_equal(testenv_fd_count(dead), -ENOENT);

    char hex[33], hex2[33];
    testenv_random_hex(hex, sizeof hex);
    testenv_random_hex(hex2, sizeof hex2);
    assert_int_equal(strlen(hex), 32);
    assert_int_equal(strspn(hex, "0123456789abcdef"), 32);
    assert_string_not_equal(hex, hex2);

    char dir[TESTENV_DIR_SIZE];
    snprintf(dir, sizeof dir, "%s", env.dir);
    testenv_fini(&env);
    assert_int_equal(stat(dir, &st), -1);
    assert_int_equal(errno, ENOENT);
    testenv_fini(&env); /* twice is fine */
}

int main(void)
{
    testenv_watchdog(120);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proc_lines_stdin_and_exit_status),
        cmocka_unit_test(test_proc_cursor_find_and_rewind),
        cmocka_unit_test(test_proc_wait_line_times_out),
        cmocka_unit_test(test_proc_env_and_cwd),
        cmocka_unit_test(test_proc_spawn_reports_exec_errors),
        cmocka_unit_test(test_proc_child_inherits_only_stdio),
        cmocka_unit_test(test_proc_kill_escalates_and_takes_the_group),
        cmocka_unit_test(test_proc_drains_big_output),
        cmocka_unit_test(test_proc_send_after_exit_fails_cleanly),
        cmocka_unit_test(test_httpc_content_length_and_keep_alive),
        cmocka_unit_test(test_httpc_chunked_and_interim),
        cmocka_unit_test(test_httpc_body_until_close_and_head),
        cmocka_unit_test(test_httpc_retries_a_closed_keep_alive_connection),
        cmocka_unit_test(test_httpc_rejects_malformed_responses),
        cmocka_unit_test(test_httpc_truncated_body_is_closed_error),
        cmocka_unit_test(test_httpc_timeout_and_refused),
        cmocka_unit_test(test_httpc_raw_and_parse),
        cmocka_unit_test(test_testenv_json_top_string),
        cmocka_unit_test(test_testenv_dir_sockets_and_proc_info),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    testenv_watchdog(0);
    return failed;
}
