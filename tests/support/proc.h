/* SPDX-License-Identifier: MIT */
#ifndef TEST_PROC_H
#define TEST_PROC_H

/*
 * Child processes for integration tests: spawn with argv, extra environment and a working
 * directory; capture stdout and stderr; wait for lines; write lines to stdin; stop and reap.
 *
 * Capture. A reader thread per child drains both pipes into growable buffers as soon as bytes
 * arrive, so a chatty child never blocks on a full pipe while the test is busy elsewhere. Each
 * stream keeps everything it received (up to 64 MiB; past that bytes are counted and dropped) and
 * a scan cursor: proc_wait_line() looks at complete lines from the cursor on and moves the cursor
 * past the line it returns, so successive waits read a stream in order.
 *
 * Hygiene. Every child gets its own process group, PR_SET_PDEATHSIG=SIGKILL (it dies if the test
 * process dies, even by SIGKILL from a ctest timeout), default signal dispositions, and only fds
 * 0-2: every other descriptor is marked close-on-exec before exec, so children never inherit
 * each other's pipes or the test's sockets. Live children are recorded in a fixed table; an
 * atexit handler, SIGINT/SIGTERM/SIGHUP handlers and proc_kill_all() SIGKILL their groups, so no
 * child outlives a failed test. The module also ignores SIGPIPE in the test process (children get
 * the default back).
 *
 * Set DOTMON_TEST_VERBOSE=1 to echo every child line to the test's stderr as "[label:out] ...".
 *
 * Threading: a struct proc is used by one test thread; only the reader thread runs beside it.
 * Errors are 0 / negative errno / AGENT_E_* (common/err.h).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>

enum proc_stream { PROC_STDOUT = 0, PROC_STDERR = 1 };

struct proc_opts {
    /* argv[0] is the program: a path, or a bare name looked up in PATH. NULL-terminated. */
    const char *const *argv;
    /* Extra environment on top of the test's own: "NAME=VALUE" sets or overrides, "NAME" alone
     * removes. NULL-terminated; NULL for none. */
    const char *const *env;
    const char *cwd;   /* NULL: the test's cwd */
    const char *label; /* name in diagnostics ("dotmon", "app2"); NULL: argv[0]'s basename */
    bool stdin_null;   /* stdin is /dev/null rather than a pipe (proc_send_line then fails) */
};

struct proc;

/* Returns true when line (NUL-terminated, without its newline) is the one being waited for. */
typedef bool (*proc_line_match_fn)(const char *line, void *ctx);

/*
 * Starts a child. On success *out owns the child (free with proc_free). Fails with -errno when
 * the pipes cannot be made, the fork fails, or the exec fails (e.g. -ENOENT, -EACCES: the
 * child's exec errno is passed back before this returns).
 */
int proc_spawn(const struct proc_opts *opts, struct proc **out);

pid_t proc_pid(const struct proc *p);
const char *proc_label(const struct proc *p);

/*
 * Waits up to timeout_ms for a complete line starting with prefix (or, for the _match variant,
 * one that fn accepts) at or after the stream's cursor. On success moves the cursor past that line
 * and, if line_out is not NULL, stores a malloc'd copy of it (no newline; caller frees).
 * Returns 0, AGENT_E_TIMEOUT, or AGENT_E_CLOSED when the stream ended without such a line.
 * A final line without a newline counts once the stream has ended.
 */
int proc_wait_line(struct proc *p, enum proc_stream s, const char *prefix, int timeout_ms,
                   char **line_out);
int proc_wait_line_match(struct proc *p, enum proc_stream s, proc_line_match_fn fn, void *ctx,
                         int timeout_ms, char **line_out);

/* Searches every complete line captured so far (ignoring the cursor, not moving it, not waiting).
 * Returns 0 (and *line_out as above) or AGENT_E_NOTFOUND. */
int proc_find_line(struct proc *p, enum proc_stream s, const char *prefix, char **line_out);

/* Moves the stream's cursor back to the first byte ever captured. */
void proc_rewind(struct proc *p, enum proc_stream s);

/* A malloc'd, NUL-terminated copy of everything the stream captured so far (caller frees);
 * *len_out (if not NULL) gets its length. NULL on ENOMEM. */
char *proc_output(struct proc *p, enum proc_stream s, size_t *len_out);

/* Writes line plus '\n' to the child's stdin. Returns 0, AGENT_E_CLOSED if stdin was closed
 * (or is /dev/null), or -errno (-EPIPE when the child is gone). */
int proc_send_line(struct proc *p, const char *line);

/* Closes the child's stdin (it then reads EOF). Idempotent. */
void proc_close_stdin(struct proc *p);

/* Sends sig to the child itself (not its group). Returns 0, or -ESRCH once it has been reaped. */
int proc_signal(struct proc *p, int sig);

/* True while the child has not exited (reaps it, without blocking, if it has). */
bool proc_running(struct proc *p);

/*
 * Waits up to timeout_ms for the child to exit and reaps it. Returns 0 with its wait status in
 * *wstatus (if not NULL), or AGENT_E_TIMEOUT. Once reaped, later calls return 0 at once.
 */
int proc_wait(struct proc *p, int timeout_ms, int *wstatus);

/*
 * Stops the child: SIGTERM to it, up to grace_ms for it to exit, then SIGKILL to its whole process
 * group, then reaps it. Returns 0 and the wait status in *wstatus (if not NULL). grace_ms 0 means
 * SIGKILL at once. Does nothing but report the status if the child already exited.
 */
int proc_kill(struct proc *p, int grace_ms, int *wstatus);

/* SIGKILLs the child's group if it still runs, reaps it, stops the reader, frees everything.
 * Accepts NULL. */
void proc_free(struct proc *p);

/* SIGKILLs the process group of every live child. Async-signal-safe (watchdogs use it). */
void proc_kill_all(void);

/* Formats a wait status as "exit 0" / "signal 9 (Killed)" into buf; returns buf. */
const char *proc_status_str(int wstatus, char *buf, size_t n);

/* Prints the label, pid, state and the last max_bytes of each captured stream to f (failure
 * diagnostics). */
void proc_dump(struct proc *p, FILE *f, size_t max_bytes);

#endif
