/* SPDX-License-Identifier: MIT */
/*
 * The dump collector (collectors.h collect_dump; GET /dump is in api_collect.c): the runtime
 * writes a core dump (GenerateCoreDump3 -> 2 -> 1, docs/ipc.md §4.4) into a
 * directory dotmon controls, dotmon streams the file back (or, with egressProvider, into an egress
 * target: artifact.h; read 1 MiB at a time on the thread pool, only as fast as the store takes
 * it) and deletes it.
 *
 * One dump_job per request runs on the collection-job core (collect/job.h), which holds the
 * artifact (the HTTP response, gone when answered or when the client leaves; or the upload), the
 * operation, the deadline timer and the job's state. This file supplies the producer: the IPC
 * exchange (createdump runs while it is open: seconds to minutes) and the file being read (one
 * uv_fs request at a time, on libuv's thread pool so a slow volume never blocks the loop); the core
 * frees the job once the artifact has ended and neither is held.
 *
 * The file never outlives the job: it is unlinked as soon as it is open (the open descriptor
 * keeps the data readable, and nothing is left behind if dotmon dies mid-download), and on every
 * failure path, including an answer that comes after the client left or after the deadline.
 *
 * The dump folder is usually shared with the app (often /tmp), so whoever can write it may have
 * put anything at the dump's path: the file is opened and deleted through common/shdir.h (a
 * descriptor of the folder, O_NOFOLLOW | O_NONBLOCK, a regular file with one link owned by the
 * runtime's user or dotmon's, deletion only of that very inode), in one work item on the thread
 * pool. Every step on the pool (that one, each read) has its own deadline, so a hung volume or a
 * FIFO costs a 504, never a thread forever.
 * While the runtime writes, discovery is told the process is busy so its liveness check (which
 * the runtime's single diagnostic thread cannot answer now) does not drop it.
 *
 * Speed (issue 30): over plain HTTP the response is bound by the client, not by createdump or
 * dotmon. createdump writes faster than a client on the same machine receives and stores it, so
 * after the first piece the sender stays behind the writer and every sendfile piece is full; what
 * dotmon adds is how late the first byte leaves (the file is looked for every DumpPollMs, 10 ms)
 * and the time the client still needs after createdump ends. The file's pages are always in the
 * page cache (just written), so read-ahead hints do nothing, and FADV_DONTNEED on this unlinked,
 * still dirty file would start writing it to disk: its pages go when it is closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api.h"
#include "artifact.h"
#include "buf.h"
#include "collectors.h"
#include "err.h"
#include "ipc_client.h"
#include "log.h"
#include "operations.h"
#include "shdir.h"

static const char cat[] = "dotmon.dump";

#define DUMP_READ_SIZE  ((size_t)1024 * 1024)
#define DUMP_HIGH_WATER ((size_t)4 * 1024 * 1024)
#define DUMP_LOW_WATER  ((size_t)1024 * 1024)
#define DUMP_MAX_REPLY  ((size_t)64 * 1024)
/* Bytes per sendfile piece (one HTTP chunk); the time one may take is Timeouts:DumpPieceMs (a
 * client slower than 14 kB/s, or a dump volume that stops answering, fails the dump then). */
#define DUMP_PIECE_SIZE ((size_t)4 * 1024 * 1024)

enum dump_fs_step { FS_NONE = 0, FS_ACQUIRE, FS_READ, FS_CLOSE };

/* The outcome of opening the dump (acquire_on_pool), read on the loop after it. */
struct dump_acquire {
    int rc;             /* 0, or why the file was refused or not found */
    int fd;             /* rc 0: open, blocking, close-on-exec */
    struct stat st;     /* what was found at the path (also when refused) */
    int unlink_rc;      /* rc 0: deleting it right after opening */
    bool via_proc_root; /* found through /proc/<pid>/root */
    bool removed;       /* rc != 0: whatever was at the path was deleted */
    char why[512];      /* the dump folder failed StrictModes (rc AGENT_E_UNTRUSTED), or "" */
};

struct dump_job {
    struct job core; /* first: operation, artifact (core.art), the deadline (core.timer), state */
    struct agent *a;
    struct ipc_dump *x; /* GenerateCoreDump in flight */
    uv_timer_t step;    /* deadline of the step on the pool (open, a read, a piece) */
    uv_timer_t tail;    /* looks for the file while it is written, then for more bytes */
    bool written;       /* the runtime answered OK: the file is whole */
    bool step_written;  /* `written` when the step in flight began: its EOF is final */
    bool sending;       /* a sendfile piece is in flight */
    uv_fs_t fs;
    uv_work_t work; /* FS_ACQUIRE */
    struct dump_acquire acq;
    enum dump_fs_step fs_step; /* the uv_fs request or work in flight, or FS_NONE */
    bool step_late;            /* that step missed its deadline: the request was answered */
    uv_file fd;                /* -1 when closed */
    bool busy;                 /* counted busy in discovery */
    bool waiting_drain;
    bool file_gone; /* unlinked (or never created) */
    int version;    /* GenerateCoreDump version being tried */
    enum ipc_dump_type type;
    uint64_t pid;
    uint64_t size;
    uint64_t sent;
    uint8_t *rbuf;
    char uid[37];
    struct ipc_endpoint ep; /* the runtime's (an owned copy) */
    char filename[64];
    char type_name[16];
    char name[128];                /* the file's name, in both folders */
    char local_path[PATH_MAX];     /* where dotmon reads the file */
    char target_path[PATH_MAX];    /* the same file as the target process sees it */
    char target_dir[PATH_MAX];     /* its folder as the target sees it: Storage:DumpTargetFolder,
                                      or in node mode the target's TMPDIR (read through
                                      /proc/<pid>/root, pid being the host's) */
    char open_path[PATH_MAX + 32]; /* the path that was opened (local or via /proc/<pid>/root) */
};

static const struct {
    const char *name;
    enum ipc_dump_type type;
} dump_types[] = {
    {"Mini", IPC_DUMP_TYPE_NORMAL},
    {"Triage", IPC_DUMP_TYPE_TRIAGE},
    {"WithHeap", IPC_DUMP_TYPE_WITH_HEAP},
    {"Full", IPC_DUMP_TYPE_FULL},
};

static const struct job_vtable dump_vt;

static struct dump_job *dump_of(struct job *core)
{
    return (struct dump_job *)core;
}

/* ---- bookkeeping ----------------------------------------------------------------------------- */

static void job_set_busy(struct dump_job *job, bool busy)
{
    if (job->busy == busy) {
        return;
    }
    job->busy = busy;
    if (job->a->disc != NULL) {
        ipc_discovery_busy(job->a->disc, job->uid, busy ? 1 : -1);
    }
}

/*
 * Deletes whatever sits at the dump's name, where no descriptor was opened (failure paths, or an
 * answer that came after the client left): in dotmon's folder and, when the app sees the folder
 * elsewhere, in the app's root too (the fallback may never have run). The GUID in the name keeps
 * a different process with this pid from matching. A fire-and-forget work item on the pool.
 */
struct unlink_req {
    uv_work_t work;
    uint64_t pid;
    int rc;
    bool removed;
    char dir[PATH_MAX];
    char target_dir[PATH_MAX];
    char name[128];
};

/* Deletes the object at dirfd/name, whatever it is (but a folder), if it is still the one seen. */
static int remove_at(int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        return -errno;
    }
    return shdir_unlink_exact(dirfd, name, st.st_dev, st.st_ino);
}

static void unlink_on_pool(uv_work_t *w)
{
    struct unlink_req *u = w->data;
    int dirfd = -1;
    u->rc = shdir_open(u->dir, &dirfd);
    if (u->rc == 0) {
        u->rc = remove_at(dirfd, u->name);
        (void)close(dirfd);
        u->removed = u->rc == 0;
    }
    if (u->target_dir[0] != '\0' && u->pid > 0) {
        char root[64];
        snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)u->pid);
        if (shdir_open_beneath(root, u->target_dir, &dirfd) == 0) {
            int rc = remove_at(dirfd, u->name);
            (void)close(dirfd);
            if (rc == 0) {
                u->removed = true;
                u->rc = 0;
            }
        }
    }
}

static void on_unlinked(uv_work_t *w, int status)
{
    struct unlink_req *u = w->data;
    if (status == 0 && u->removed) {
        log_info(cat, "dump of %llu: deleted %s/%s", (unsigned long long)u->pid, u->dir, u->name);
    } else if (status == 0 && u->rc != UV_ENOENT) {
        log_warn(cat, "dump of %llu: cannot delete %s/%s: %s", (unsigned long long)u->pid, u->dir,
                 u->name, agent_strerror(u->rc));
    }
    free(u);
}

static void job_unlink_now(struct dump_job *job)
{
    if (job->file_gone) {
        return;
    }
    struct unlink_req *u = calloc(1, sizeof(*u));
    if (u == NULL) {
        log_warn(cat, "dump of %llu: cannot delete %s: out of memory", (unsigned long long)job->pid,
                 job->local_path);
        return;
    }
    u->pid = job->pid;
    u->work.data = u;
    snprintf(u->dir, sizeof(u->dir), "%s", job->a->dump_dir);
    if (job->a->node_mode || strcmp(job->a->dump_dir, job->target_dir) != 0) {
        snprintf(u->target_dir, sizeof(u->target_dir), "%s", job->target_dir);
    }
    snprintf(u->name, sizeof(u->name), "%s", job->name);
    if (uv_queue_work(job->a->loop, &u->work, unlink_on_pool, on_unlinked) != 0) {
        free(u);
    }
}

/* The core's fini, once the job's timers are closed. */
static void dump_fini(struct job *core)
{
    struct dump_job *job = dump_of(core);
    /* Whatever happened, the file goes (a no-op when it was unlinked after opening). */
    job_unlink_now(job);
    job->file_gone = true;
    job_set_busy(job, false);
    free(job->rbuf);
    ipc_endpoint_fini(&job->ep);
}

/* The exchange, a step on the pool, an open file or a piece being sent keep the job. */
static bool dump_holds(const struct job *core)
{
    const struct dump_job *job = (const struct dump_job *)core;
    return job->x != NULL || job->fs_step != FS_NONE || job->fd >= 0 || job->sending;
}

/* The dump's results for the operation's details. */
static cJSON *dump_results(struct job *core)
{
    const struct dump_job *job = dump_of(core);
    cJSON *extra = cJSON_CreateObject();
    cJSON_AddStringToObject(extra, "dumpType", job->type_name);
    cJSON_AddNumberToObject(extra, "bytes", (double)job->sent);
    if (job->size > 0) {
        cJSON_AddNumberToObject(extra, "size", (double)job->size);
    }
    cJSON_AddNumberToObject(extra, "generateCoreDumpVersion", job->version);
    return extra;
}

/* Fails the operation and answers the request (if not yet answered) with a problem; a started
 * response is cut, an upload aborted: never a short "complete" file. */
static void job_fail(struct dump_job *job, int http_status, const char *code, const char *msg)
{
    log_warn(cat, "dump of %llu failed: %s", (unsigned long long)job->pid, msg);
    job_end(&job->core, JOB_END_FAIL, http_status, code, msg, NULL);
}

/* Closes the descriptor (asynchronously) if open and nothing else is in flight. */
static void job_close_file(struct dump_job *job);
static void job_pump(struct dump_job *job);
static int job_acquire(struct dump_job *job);

/* ---- the file: acquire (open + delete), stream, close (one operation on the pool at a time) ---
 */

/* A step on the pool missed its deadline: answer now; the step's completion only tidies up. */
static void job_on_step_deadline(uv_timer_t *t)
{
    struct dump_job *job = t->data;
    if ((job->fs_step == FS_NONE || job->fs_step == FS_CLOSE) && !job->sending) {
        return;
    }
    job->step_late = true;
    char msg[PATH_MAX + 160];
    if (job->sending) {
        snprintf(msg, sizeof(msg),
                 "sending %zu MiB of the dump took longer than %llu s: the client reads too "
                 "slowly, or the dump folder's volume (%s) does not answer",
                 DUMP_PIECE_SIZE >> 20,
                 (unsigned long long)(agent_timeout(job->a, TIMEOUT_DUMP_PIECE) / 1000),
                 job->a->dump_dir);
    } else {
        snprintf(msg, sizeof(msg),
                 "%s the dump in %s took longer than %llu s; the dump folder's volume does not "
                 "answer",
                 job->fs_step == FS_ACQUIRE ? "opening" : "reading", job->a->dump_dir,
                 (unsigned long long)(agent_timeout(job->a, TIMEOUT_DUMP_STEP) / 1000));
    }
    job_fail(job, 504, "DumpFolderTimeout", msg);
}

/* Each step on the thread pool (opening and deleting, one read) must finish within
 * Timeouts:DumpStepMs; sending one piece, within Timeouts:DumpPieceMs. */
static void job_arm_step(struct dump_job *job)
{
    job->step_written = job->written;
    uv_timer_start(&job->step, job_on_step_deadline,
                   agent_timeout(job->a, job->sending ? TIMEOUT_DUMP_PIECE : TIMEOUT_DUMP_STEP), 0);
}

/* Opens dir/name as a dump of this runtime and deletes it at once, on the thread pool. */
static void acquire_in(int dirfd, const struct dump_job *job, const struct shdir_owners *owners,
                       struct dump_acquire *acq)
{
    acq->rc = shdir_open_file(dirfd, job->name, owners, &acq->fd, &acq->st);
    if (acq->rc == 0) {
        acq->unlink_rc = shdir_unlink_exact(dirfd, job->name, acq->st.st_dev, acq->st.st_ino);
    } else if (acq->rc != UV_ENOENT) {
        /* A FIFO, a symlink, someone else's file at our unguessable name: never read, deleted. */
        acq->removed = remove_at(dirfd, job->name) == 0;
    }
}

static void acquire_on_pool(uv_work_t *w)
{
    struct dump_job *job = w->data;
    struct dump_acquire *acq = &job->acq;
    struct shdir_owners owners = {.n = 0};
    (void)shdir_owners_add(&owners, geteuid());
    if (job->ep.peer_uid >= 0) {
        (void)shdir_owners_add(&owners, (uid_t)job->ep.peer_uid);
    }
    acq->fd = -1;
    int dirfd = -1;
    /* Again, component by component: a folder on the way changed since start-up is refused. */
    acq->rc = shdir_open_trusted(job->a->dump_dir, SHDIR_TRUST_SHARED, &dirfd, acq->why,
                                 sizeof(acq->why));
    if (acq->rc != AGENT_E_UNTRUSTED) {
        acq->why[0] = '\0';
    }
    if (acq->rc == 0) {
        acquire_in(dirfd, job, &owners, acq);
        (void)close(dirfd);
    }
    if (acq->rc == UV_ENOENT && job->pid > 0) {
        /* The target's root may be visible (same pid namespace, or hostPID): read the file the
         * way the target wrote it, resolving its paths inside its root. */
        char root[64];
        snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)job->pid);
        if (shdir_open_beneath(root, job->target_dir, &dirfd) == 0) {
            struct dump_acquire alt = {.fd = -1};
            acquire_in(dirfd, job, &owners, &alt);
            (void)close(dirfd);
            if (alt.rc != UV_ENOENT) {
                *acq = alt;
                acq->via_proc_root = true;
            }
        }
    }
}

/* What was at the path instead of a dump, for the problem's detail. */
static const char *kind_name(const struct stat *st)
{
    if (S_ISFIFO(st->st_mode)) {
        return "a FIFO";
    }
    if (S_ISSOCK(st->st_mode)) {
        return "a socket";
    }
    if (S_ISLNK(st->st_mode)) {
        return "a symlink";
    }
    if (S_ISDIR(st->st_mode)) {
        return "a folder";
    }
    if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
        return "a device";
    }
    if (S_ISREG(st->st_mode) && st->st_nlink > 1) {
        return "a file with several links";
    }
    return "not a regular file";
}

/* Looks for the file again (while the runtime has not answered), or for its next bytes. */
static void job_on_tail(uv_timer_t *t)
{
    struct dump_job *job = t->data;
    if (job->core.art == NULL) {
        return;
    }
    if (job->fd < 0) {
        if (job->fs_step == FS_NONE && job_acquire(job) != 0) {
            job_fail(job, 500, "DumpReadFailed", "cannot open the dump file");
            job_release(&job->core);
        }
        return;
    }
    job_pump(job);
}

/* The runtime has written nothing more yet: look again shortly, unless it is done. */
static void job_at_eof(struct dump_job *job)
{
    if (!job->step_written) {
        /* That look began before the runtime's answer: bytes may have come since. */
        if (job->written) {
            job_pump(job);
        } else {
            uv_timer_start(&job->tail, job_on_tail, agent_timeout(job->a, TIMEOUT_DUMP_TAIL), 0);
        }
        return;
    }
    job->size = job->sent;
    log_info(cat, "dump of %llu: %llu bytes %s", (unsigned long long)job->pid,
             (unsigned long long)job->sent,
             artifact_is_egress(job->core.art) ? "read, the upload is completing" : "sent");
    job_end(&job->core, JOB_END_COMPLETE, 0, NULL, NULL, NULL);
    job_close_file(job);
    job_release(&job->core);
}

static void on_acquired(uv_work_t *w, int status)
{
    struct dump_job *job = w->data;
    struct dump_acquire *acq = &job->acq;
    job->fs_step = FS_NONE;
    uv_timer_stop(&job->step);
    bool late = job->step_late;
    job->step_late = false;
    if (status != 0) {
        acq->rc = status; /* cancelled: never ran */
    }
    if (acq->rc == 0) {
        job->fd = acq->fd;
        if (acq->unlink_rc == 0 || acq->unlink_rc == UV_ENOENT) {
            job->file_gone = true;
        } else {
            log_warn(cat, "dump of %llu: cannot delete %s: %s", (unsigned long long)job->pid,
                     job->local_path, agent_strerror(acq->unlink_rc));
        }
    } else if (acq->removed) {
        job->file_gone = true;
    }
    if (acq->via_proc_root) {
        snprintf(job->open_path, sizeof(job->open_path), "/proc/%llu/root%s",
                 (unsigned long long)job->pid, job->target_path);
    }
    if (late || job->core.art == NULL) {
        job_close_file(job); /* the request was answered, or the client left meanwhile */
        job_release(&job->core);
        return;
    }
    int rc = acq->rc;
    if (rc == UV_ENOENT && !job->step_written) {
        /* Not there yet: createdump is still starting (the tail timer looks again), unless the
         * runtime answered while this look was on its way: then look once more, at once. */
        if (job->written && job_acquire(job) != 0) {
            job_fail(job, 500, "DumpReadFailed", "cannot open the dump file");
            job_release(&job->core);
        }
        return;
    }
    uv_timer_stop(&job->tail);
    char msg[PATH_MAX + 512];
    if (rc == UV_ENOENT) {
        snprintf(msg, sizeof(msg),
                 "the runtime reported the dump written, but dotmon cannot open %s: %s (the "
                 "app and dotmon must see the dump folder; see Storage:DumpTempFolder and "
                 "Storage:DumpTargetFolder in docs/configuration.md)",
                 job->local_path, agent_strerror(rc));
        job_fail(job, 500, "DumpNotFound", msg);
    } else if (rc == AGENT_E_NOTREG || rc == UV_ELOOP) {
        snprintf(msg, sizeof(msg),
                 "the runtime %s the dump, but %s is %s (owner uid %u), not a dump file; "
                 "refused it%s",
                 job->written ? "reported" : "began", job->open_path,
                 rc == UV_ELOOP ? "a symlink" : kind_name(&acq->st), (unsigned)acq->st.st_uid,
                 acq->removed ? " and deleted it" : "");
        job_fail(job, 502, "DumpNotAFile", msg);
    } else if (rc == AGENT_E_UNTRUSTED && acq->why[0] != '\0') {
        snprintf(msg, sizeof(msg), "the dump folder is not trusted: %s", acq->why);
        job_fail(job, 500, "DumpFolderUntrusted", msg);
    } else if (rc == AGENT_E_UNTRUSTED) {
        snprintf(msg, sizeof(msg),
                 "the runtime %s the dump, but %s belongs to uid %u, neither the runtime's user "
                 "nor dotmon's; refused it%s",
                 job->written ? "reported" : "began", job->open_path, (unsigned)acq->st.st_uid,
                 acq->removed ? " and deleted it" : "");
        job_fail(job, 502, "DumpNotAFile", msg);
    } else if (rc != 0) {
        snprintf(msg, sizeof(msg), "cannot open the dump %s: %s", job->open_path,
                 agent_strerror(rc));
        job_fail(job, rc == AGENT_E_CHANGED ? 502 : 500, "DumpReadFailed", msg);
    } else {
        if ((acq->st.st_mode & 077) != 0) {
            log_warn(
                cat, "dump of %llu: the runtime created %s with mode %03o (readable by others)",
                (unsigned long long)job->pid, job->open_path, (unsigned)(acq->st.st_mode & 0777));
        }
        /*
         * createdump writes the file front to back, never going back, so every byte below its
         * current size is final: the response starts now and follows the file as it grows,
         * instead of waiting for the whole dump. If createdump fails later, the transfer is cut
         * (the client sees it incomplete) and the operation says why.
         */
        if (artifact_begin(job->core.art, "application/octet-stream", job->filename) != 0) {
            /* the client left, or the upload cannot start (said in the op) */
            job_end(&job->core, JOB_END_CANCEL, 400, NULL, NULL, NULL);
        } else {
            log_info(cat, "dump of %llu: streaming %s %s", (unsigned long long)job->pid,
                     job->open_path, job->written ? "(written)" : "while the runtime writes it");
            job_pump(job);
            return;
        }
    }
    job_close_file(job);
    job_release(&job->core);
}

static int job_acquire(struct dump_job *job)
{
    snprintf(job->open_path, sizeof(job->open_path), "%s", job->local_path);
    memset(&job->acq, 0, sizeof(job->acq));
    job->acq.fd = -1;
    job->work.data = job;
    job->fs_step = FS_ACQUIRE;
    int rc = uv_queue_work(job->a->loop, &job->work, acquire_on_pool, on_acquired);
    if (rc != 0) {
        job->fs_step = FS_NONE;
        return rc;
    }
    job_arm_step(job);
    return 0;
}

/* A piece sent straight from the file (plain HTTP). */
static void on_sent(void *ud, struct http_request *r, int status, size_t n)
{
    struct dump_job *job = ud;
    (void)r;
    job->sending = false;
    uv_timer_stop(&job->step);
    job->sent += n;
    if (job->step_late || status < 0 || job->core.art == NULL) {
        /* Failed (answered already), or the client is gone (its abort callback follows). */
        job->step_late = false;
        if (job->core.art == NULL) {
            job_close_file(job);
            job_release(&job->core);
        }
        return;
    }
    if (n == 0) {
        job_at_eof(job);
        return;
    }
    job_pump(job);
}

static void on_fs(uv_fs_t *fs)
{
    /* fs is embedded in the job (uv_fs_* calls do not keep req->data). */
    struct dump_job *job = (struct dump_job *)(void *)((char *)fs - offsetof(struct dump_job, fs));
    enum dump_fs_step step = job->fs_step;
    ssize_t result = fs->result;
    uv_fs_req_cleanup(fs);
    job->fs_step = FS_NONE;
    char msg[PATH_MAX + 256];

    uv_timer_stop(&job->step); /* the step's deadline */
    if (job->step_late) {
        job->step_late = false; /* answered already: only tidy up */
        if (step == FS_READ) {
            job_close_file(job);
            job_release(&job->core);
            return;
        }
    }

    switch (step) {
    case FS_READ:
        if (job->core.art == NULL) {
            break; /* the client left while the read was in flight */
        }
        if (result < 0) {
            snprintf(msg, sizeof(msg), "reading the dump failed after %llu bytes: %s",
                     (unsigned long long)job->sent, uv_strerror((int)result));
            job_fail(job, 500, "DumpReadFailed", msg);
            break;
        }
        if (result == 0) {
            job_at_eof(job);
            return;
        }
        job->sent += (uint64_t)result;
        uint8_t *b = job->rbuf;
        job->rbuf = NULL; /* the write queue owns it now */
        if (artifact_write_owned(job->core.art, b, b, (size_t)result) != 0) {
            break; /* the consumer is gone: on_lost follows */
        }
        job_pump(job);
        return;
    case FS_CLOSE:
    case FS_NONE:
    case FS_ACQUIRE:
    default:
        job->fd = -1;
        job_release(&job->core);
        return;
    }
    job_close_file(job);
    job_release(&job->core);
}

static void job_close_file(struct dump_job *job)
{
    if (job->fd < 0 || job->fs_step != FS_NONE || job->sending) {
        return;
    }
    uv_timer_stop(&job->tail);
    job->fs_step = FS_CLOSE;
    if (uv_fs_close(job->a->loop, &job->fs, job->fd, on_fs) != 0) {
        job->fs_step = FS_NONE;
        job->fd = -1; /* not reached in practice: uv_fs_close only fails on bad arguments */
    }
}

/*
 * The next piece of the file to the client: straight from the file with sendfile on plain HTTP
 * (no copy through dotmon), else read into a buffer and queued (TLS encrypts on the loop).
 */
static void job_pump(struct dump_job *job)
{
    struct artifact *out = job->core.art;
    if (out == NULL || job->fd < 0 || job->fs_step != FS_NONE || job->sending) {
        return;
    }
    if (artifact_can_sendfile(out)) {
        /* The HTTP layer closes a client that makes no progress for its write timeout; the
         * piece's own deadline is generous (a slow client is not a fault). */
        job->sending = true;
        int rc = artifact_sendfile(out, job->fd, job->sent, DUMP_PIECE_SIZE, on_sent, job);
        if (rc != 0) {
            job->sending = false;
            job_fail(job, 500, "ResponseFailed", "cannot send the dump");
            job_close_file(job);
            return;
        }
        job_arm_step(job);
        return;
    }
    if (artifact_full(out)) {
        job->waiting_drain = true; /* until on_ready */
        return;
    }
    if (job->rbuf == NULL && (job->rbuf = malloc(DUMP_READ_SIZE)) == NULL) {
        job_fail(job, 500, "OutOfMemory", "out of memory");
        job_close_file(job);
        return;
    }
    uv_buf_t b = uv_buf_init((char *)job->rbuf, (unsigned int)DUMP_READ_SIZE);
    job->fs_step = FS_READ;
    if (uv_fs_read(job->a->loop, &job->fs, job->fd, &b, 1, (int64_t)job->sent, on_fs) != 0) {
        job->fs_step = FS_NONE;
        job_fail(job, 500, "DumpReadFailed", "cannot read the dump file");
        job_close_file(job);
        return;
    }
    job_arm_step(job);
}

static void job_on_ready(void *ud)
{
    struct dump_job *job = ud;
    if (job->waiting_drain) {
        job->waiting_drain = false;
        job_pump(job);
    }
}

/* ---- the client ------------------------------------------------------------------------------ */

/*
 * The core's abort: the client disconnected, the egress store failed, or DELETE (the same as a
 * client leaving: an upload is aborted). The file is closed; a runtime still writing keeps the
 * exchange (and the job) until it is done, then the file goes.
 */
static void dump_abort(struct job *core, enum job_why why)
{
    struct dump_job *job = dump_of(core);
    if (why == JOB_WHY_LOST) {
        log_info(cat, "dump of %llu: %s after %llu bytes%s", (unsigned long long)job->pid,
                 artifact_is_egress(core->art) ? "the egress upload failed" : "client disconnected",
                 (unsigned long long)job->sent,
                 job->x != NULL ? " (the runtime is still writing; the file goes when it is done)"
                                : "");
    }
    job_close_file(job);
}

/* ---- the runtime ----------------------------------------------------------------------------- */

/* The core's timeout: Dump:TimeoutSeconds passed before the runtime's answer. */
static void dump_on_deadline(struct job *core)
{
    struct dump_job *job = dump_of(core);
    if (job->x == NULL) {
        return;
    }
    char msg[256];
    snprintf(msg, sizeof(msg),
             "the runtime did not finish the dump within %llu s (Dump:TimeoutSeconds); the file is "
             "deleted when it finishes",
             (unsigned long long)(agent_timeout(job->a, TIMEOUT_DUMP) / 1000));
    job_fail(job, 504, "Timeout", msg);
    job_close_file(job);
    job_unlink_now(job); /* what exists so far; again when the runtime answers */
}

/* GenerateCoreDump<next + 1> was unknown: step down while the client waits and no file is seen. */
static bool job_on_retry_dump(void *ud, int next_version)
{
    struct dump_job *job = ud;
    if (job->core.art == NULL || job->fd >= 0) {
        return false;
    }
    job->version = next_version;
    log_debug(cat, "GenerateCoreDump%d unknown: trying version %d", next_version + 1, next_version);
    return true;
}

static void job_on_reply(void *ud, const struct ipc_dump_result *res)
{
    struct dump_job *job = ud;
    job->x = NULL;
    job->version = res->version;
    job_set_busy(job, false);
    char msg[2048];

    uv_timer_stop(&job->core.timer);

    if (res->status != 0) {
        int http_status = res->status == AGENT_E_TIMEOUT ? 504 : 502;
        snprintf(msg, sizeof(msg),
                 "the runtime of process %llu did not answer the dump request: %s",
                 (unsigned long long)job->pid, agent_strerror(res->status));
        job_fail(job, http_status, http_status == 504 ? "Timeout" : "RuntimeUnreachable", msg);
    } else if (!res->ok) {
        /* A message too long for the detail is left out rather than cut. */
        const char *text = strlen(res->message) < 1536 ? res->message : "";
        snprintf(msg, sizeof(msg), "the runtime could not write the dump: %s (0x%08x)%s%s",
                 ipc_hresult_text(res->hresult), res->hresult, text[0] ? ": " : "", text);
        job_fail(job, 400, "RuntimeError", msg);
    } else if (job->core.art != NULL) {
        log_info(cat, "dump of %llu written by the runtime (GenerateCoreDump%d)",
                 (unsigned long long)job->pid, job->version);
        job->written = true;
        if (job->fd < 0) {
            /* Not seen yet (or in an acquire now: it sees `written`). */
            uv_timer_stop(&job->tail);
            if (job->fs_step == FS_NONE && job_acquire(job) != 0) {
                job_fail(job, 500, "DumpReadFailed", "cannot open the dump file");
            }
        } else if (job->fs_step == FS_NONE && !job->sending) {
            uv_timer_stop(&job->tail); /* waiting for more bytes: there are no more to come */
            job_pump(job);
        }
    }
    if (job->core.art == NULL) {
        job_close_file(job);
    }
    job_release(&job->core);
}

static int job_send(struct dump_job *job)
{
    /* After the deadline (Dump:TimeoutSeconds) the exchange stays open Timeouts:DumpLateGraceMs
     * longer, only to learn when createdump is done so that the file it wrote can be deleted. */
    struct ipc_dump_params params = {.path = job->target_path,
                                     .type = job->type,
                                     .flags = 0,
                                     .timeout_ms = agent_timeout(job->a, TIMEOUT_DUMP) +
                                                   agent_timeout(job->a, TIMEOUT_DUMP_LATE_GRACE),
                                     .max_reply = DUMP_MAX_REPLY,
                                     .retry = job_on_retry_dump};
    int rc = ipc_dump_request(job->a->loop, &job->ep, &params, job_on_reply, job, &job->x);
    if (rc == 0) {
        job_set_busy(job, true);
    }
    return rc;
}

/* ---- the route ------------------------------------------------------------------------------- */

/* True while an earlier dump of this runtime has not been answered (see api_dump_get). */
static bool runtime_still_dumping(const struct agent *a, const struct ipc_process *p)
{
    for (const struct job *core = a->collect.jobs; core != NULL; core = core->next) {
        const struct dump_job *j = (const struct dump_job *)core;
        if (core->vt == &dump_vt && j->x != NULL && strcmp(j->uid, p->uid) == 0) {
            return true;
        }
    }
    return false;
}

/*
 * Makes the admitted job live: its operation (DELETE cancels through the core), and its own copy
 * of the runtime's endpoint (released with the job: the process entry may be gone long before the
 * job ends). Returns 0 or the copy's error (UV_ENOMEM).
 */
static int job_attach(struct dump_job *job, struct operation *op, const struct ipc_process *p)
{
    job_admitted(&job->core, op);
    job->pid = p->pid;
    snprintf(job->uid, sizeof(job->uid), "%s", p->uid);
    struct ipc_endpoint ep = ipc_process_endpoint(p);
    return ipc_endpoint_copy(&job->ep, &ep);
}

/* The dump file's names: where the runtime writes it and where dotmon reads it, and the
 * artifact's (dotnet-monitor's core_<time stamp>). 0, or -1 when a path does not fit. */
static int job_name_files(struct dump_job *job, const struct ipc_process *p)
{
    /* Unique and unguessable: the operation id is a random GUID. */
    snprintf(job->name, sizeof(job->name), "dotmon_%llu_%s.dmp", (unsigned long long)p->pid,
             job->core.op->id);
    job->file_gone = false; /* from here on, the file is deleted when the job goes */
    int n1 =
        snprintf(job->local_path, sizeof(job->local_path), "%s/%s", job->a->dump_dir, job->name);
    snprintf(job->target_dir, sizeof(job->target_dir), "%s",
             p->node_tmpdir[0] != '\0' ? p->node_tmpdir : job->a->dump_target_dir);
    int n2 =
        snprintf(job->target_path, sizeof(job->target_path), "%s/%s", job->target_dir, job->name);
    char ts[32];
    op_artifact_stamp(ts, sizeof(ts));
    snprintf(job->filename, sizeof(job->filename), "core_%s", ts);
    job->core.op->artifact_name = strdup(job->filename);
    return n1 < 0 || (size_t)n1 >= sizeof(job->local_path) || n2 < 0 ||
                   (size_t)n2 >= sizeof(job->target_path)
               ? -1
               : 0;
}

static const struct artifact_spec dump_spec = {.kind = OP_KIND_DUMP,
                                               .noun = "dump",
                                               .limit_setting = "RequestLimits:Dump:MaxConcurrency",
                                               .high_water = DUMP_HIGH_WATER,
                                               .low_water = DUMP_LOW_WATER};
static const struct artifact_events dump_events = {.on_ready = job_on_ready, .on_lost = job_lost};

/* A new job with its defaults (no file named yet), or NULL (ENOMEM). Freed by job_release. */
static struct dump_job *dump_job_new(struct agent *a)
{
    struct dump_job *job = (struct dump_job *)job_new(&a->collect, &dump_vt, sizeof(*job));
    if (job != NULL) {
        job->a = a;
        job->fd = -1;
        job->version = 3;
        job->file_gone = true;
        job_add_timer(&job->core, &job->step);
        job_add_timer(&job->core, &job->tail);
    }
    return job;
}

static int dump_start(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                      struct dump_job *job);

int collect_dump(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                 const char *type)
{
    struct dump_job *job = dump_job_new(a);
    if (job == NULL) {
        artifact_refuse(o, 500, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < sizeof(dump_types) / sizeof(dump_types[0]); i++) {
        if (strcasecmp(type != NULL ? type : "WithHeap", dump_types[i].name) == 0) {
            job->type = dump_types[i].type;
            snprintf(job->type_name, sizeof(job->type_name), "%s", dump_types[i].name);
        }
    }
    if (job->type_name[0] == '\0') {
        artifact_refuse(o, 400, "unknown dump type '%s': use Mini, Triage, WithHeap or Full", type);
        job_release(&job->core);
        return -1;
    }
    return dump_start(a, o, p, job);
}

/* The dump of an admitted request or rule (job has its type; taken): 0, or -1 when refused. */
static int dump_start(struct agent *a, const struct artifact_origin *o, const struct ipc_process *p,
                      struct dump_job *job)
{
    struct operation *op = NULL;
    /*
     * A runtime that has not answered an earlier GenerateCoreDump (timed out, its exchange kept
     * open to delete a late file) still has its single diagnostic thread on it: a new request
     * would only queue behind it and time out too, each one holding a connection for up to
     * Dump:TimeoutSeconds + Timeouts:DumpLateGraceMs.
     */
    if (runtime_still_dumping(a, p)) {
        artifact_refuse(o, 429,
                        "the runtime of process %llu has not answered the previous "
                        "dump request yet; retry later",
                        (unsigned long long)p->pid);
        job_release(&job->core);
        return -1;
    }
    /* The dump folder is not looked at here (a stat on a hung volume would freeze the loop): it
     * was checked at start-up, and every access to it runs on the thread pool with a deadline. */
    if (artifact_admit_origin(a, o, p, &dump_spec, &dump_events, job, &job->core.art, &op) != 0) {
        job_release(&job->core);
        return -1;
    }
    int rc = job_attach(job, op, p);
    artifact_accept(job->core.art); /* egress: 202 now; the operation tells the rest */
    if (job_name_files(job, p) != 0) {
        job->file_gone = true;
        job_fail(job, 500, "PathTooLong", "the dump folder path is too long");
        job_release(&job->core);
        return 0;
    }
    if (a->dump_refused != NULL) {
        /* The runtime would write the dump through a folder another uid controls. */
        char msg[1280];
        snprintf(msg, sizeof(msg), "the dump folder is not trusted: %s", a->dump_refused);
        job->file_gone = true;
        job_fail(job, 500, "DumpFolderUntrusted", msg);
        job_release(&job->core);
        return 0;
    }
    rc = rc != 0 ? rc : job_send(job);
    if (rc != 0) {
        job->file_gone = true;
        char msg[256];
        snprintf(msg, sizeof(msg), "cannot send the dump request to process %llu: %s",
                 (unsigned long long)p->pid, agent_strerror(rc));
        job_fail(job, 502, "RuntimeUnreachable", msg);
        job_release(&job->core);
        return 0;
    }
    log_info(cat, "dump of %llu (%s) requested: %s", (unsigned long long)job->pid, job->type_name,
             job->target_path);
    job_arm_timeout(&job->core, agent_timeout(a, TIMEOUT_DUMP));
    /* Look for the file while the runtime writes it: it is streamed as it grows. */
    uint64_t poll = agent_timeout(a, TIMEOUT_DUMP_POLL);
    uv_timer_start(&job->tail, job_on_tail, poll, poll);
    job_running(&job->core);
    return 0;
}

/*
 * The core's shutdown. A dump being written cannot be interrupted (createdump runs in the target),
 * and waiting for it could take minutes: stop waiting, delete what exists, and say which file may
 * still appear. Dumps already streaming finish within the server's grace period.
 */
static void dump_shutdown(struct job *core)
{
    struct dump_job *job = dump_of(core);
    if (job->x == NULL) {
        return;
    }
    ipc_dump_cancel(job->x);
    job->x = NULL;
    job_set_busy(job, false);
    log_warn(cat, "dump of %llu abandoned at shutdown; the runtime may still write %s",
             (unsigned long long)job->pid, job->local_path);
    job_fail(job, 503, "ShuttingDown", "dotmon is shutting down");
    /* A dump streamed while it is written has its file open (and the tail timer polling it):
     * close it, or the job would keep the loop running past the shutdown deadline. */
    job_close_file(job);
    job_release(&job->core);
}

static const struct job_vtable dump_vt = {.kind = OP_KIND_DUMP,
                                          .noun = "dump",
                                          .abort = dump_abort,
                                          .on_timeout = dump_on_deadline,
                                          .shutdown = dump_shutdown,
                                          .results = dump_results,
                                          .holds = dump_holds,
                                          .fini = dump_fini};
