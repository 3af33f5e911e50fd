/* SPDX-License-Identifier: MIT */
#ifndef TEST_NSAPP_H
#define TEST_NSAPP_H

/*
 * The real TestApp as pid 1 in its own pid and mount namespaces, the way a Kubernetes pod runs
 * it next to a dotmon sidecar that shares only a volume with it:
 *
 *     unshare --pid --fork --kill-child --mount-proc --mount \
 *         sh -c 'mount --rbind <tmp_dir> /tmp && exec <TestApp> --marker <m> ...'
 *
 * Inside, the app's /tmp is the host directory tmp_dir (so its diagnostic socket
 * dotnet-diagnostic-1-<key>-socket appears in tmp_dir, where a dotmon outside can watch it), and
 * it says "ready pid=1". An optional share_dir is bound at /tmp/<share_name> in the app's view (a
 * second shared volume, e.g. for a listen-mode socket). The host's own /tmp stays reachable inside
 * as /tmp/.host, which is how the app reaches its binary and the .NET runtime when those live under
 * the host's /tmp (a build tree in /tmp): every host path given to the app is translated.
 *
 * The mounts live only in the private mount namespace (unshare makes its propagation private), so
 * they vanish with the app and nothing appears in the host's mount table.
 *
 * Ownership. The app is registered in env (struct testenv) like testenv_start_app's, with a proc
 * label starting with "ns", so testenv_fini stops and frees it; call nsapp_stop_all(env) first to
 * stop these apps gracefully (a SIGTERM to unshare itself does nothing: it blocks SIGTERM while it
 * waits for its child). Nothing can outlive the test: the unshare process is a proc.h child (own
 * process group, killed with the test), --kill-child kills the app when unshare dies, and the pid
 * namespace dies with its pid 1.
 *
 * Errors: 0 / -errno / AGENT_E_* (common/err.h), with a diagnosis on stderr.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "testenv.h"

struct nsapp_opts {
    const char *tmp_dir;     /* host directory that becomes the app's /tmp (required; must exist) */
    const char *share_dir;   /* host directory bound at /tmp/<share_name> in the app, or NULL */
    const char *share_name;  /* one path component (created in tmp_dir as the mount point) */
    const char *const *args; /* more TestApp arguments, NULL-terminated, may be NULL */
    const char *const *extra_env; /* proc_opts.env syntax, may be NULL (DOTNET_DiagnosticPorts) */
    int ready_ms;                 /* wait for "ready pid=1" this long (scaled); 0: 30 s */
    bool no_wait; /* return once spawned, without waiting for "ready" (see nsapp_wait_ready) */
};

/*
 * Checks once that this process may create pid and mount namespaces and bind-mount over /tmp in
 * them: runs `unshare --pid --fork --kill-child --mount-proc --mount sh -c 'mount --rbind DIR
 * /tmp'` on a scratch directory. Returns true if it worked; otherwise why (may be NULL) gets the
 * reason (unshare's message and exit status, or "unshare not found").
 */
bool nsapp_supported(char *why, size_t why_size);

/*
 * Starts TestApp as pid 1 in new namespaces (see above) with TMPDIR=/tmp, DOTNET_ROOT (translated),
 * DOTMON_TEST_MARKER=<marker> and opts->extra_env, argv "--marker <marker>" + opts->args. Waits
 * for "ready pid=1". *out is owned by env (also on failure after the spawn).
 */
int nsapp_start(struct testenv *env, const struct nsapp_opts *opts, struct test_app **out);

/*
 * Waits (ready_ms, scaled; 0: 30 s) for the app's "ready pid=1" line, for apps started with
 * no_wait (e.g. held at start-up by a suspending diagnostic port). Returns 0, AGENT_E_TIMEOUT,
 * AGENT_E_CLOSED (it exited) or AGENT_E_PROTO (a pid other than 1), with a diagnosis on stderr.
 */
int nsapp_wait_ready(struct test_app *app, int ready_ms);

/* True for apps started by nsapp_start. */
bool nsapp_is_ns(const struct test_app *app);

/* The app's pid in the test's pid namespace (the child of unshare, waited for up to 2 s right
 * after the spawn), or -1 (not running). */
pid_t nsapp_host_pid(struct test_app *app);

/*
 * Sends sig to the app itself (pid 1 of its namespace, addressed by its host pid) and reaps
 * unshare, which exits with the app's status (or dies by the same signal); SIGKILL to the group
 * after 5 s (scaled). Marks the app stopped. *wstatus (may be NULL) as in proc_wait.
 */
int nsapp_stop(struct test_app *app, int sig, int *wstatus);

/* nsapp_stop(SIGTERM) for every running ns app of env (teardown, before testenv_fini). */
void nsapp_stop_all(struct testenv *env);

/* True while pid exists (kill(pid, 0) does not fail with ESRCH). */
bool nsapp_pid_alive(pid_t pid);

/*
 * Asks the runtime behind the diagnostic socket at path for ProcessInfo (docs/ipc.md §4.3) on a
 * blocking connection with a 5 s timeout: *pid gets the pid it sees itself as, uid the runtime
 * cookie as a lowercase .NET-layout GUID string (37 bytes). An independent reading of what dotmon
 * reports, for comparing.
 */
int nsapp_process_info(const char *path, uint64_t *pid, char uid[37]);

/*
 * Names of the diagnostic sockets (dotnet-diagnostic-*-socket) in dir, sorted; returns how many
 * there are (up to max stored in names[i], each size bytes) or -errno.
 */
int nsapp_list_sockets(const char *dir, char (*names)[128], int max);

/* Lines of the test's /proc/self/mountinfo, and how many of them mention text (a path). */
int nsapp_mount_count(void);
int nsapp_mounts_mentioning(const char *text);

#endif
