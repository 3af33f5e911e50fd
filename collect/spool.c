/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* O_TMPFILE */
#include "spool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bufpool.h"
#include "err.h"
#include "shdir.h"

/*
 * The queue, oldest first: the file region [file_r, file_w), then the memory chunks. Spilling
 * writes (the front of) the oldest memory chunk, the head, at file_w, so the order holds; the
 * consumer reads the file region first, then takes memory chunks directly (without a disk round
 * trip) when the file has nothing older. The head being written is never handed out: a pop waits
 * for its write.
 *
 * The file is a ring of `limit` bytes: file_r and file_w count bytes ever read and written, the
 * byte at position p lives at offset p % limit, and a write or read never crosses the ring's end
 * (a chunk is written in two parts if it would). The file never holds more than `limit` bytes of
 * backlog (a spill waits for room), so it never grows past `limit`, however long a client stays
 * behind. When the consumer has caught up, the positions go back to 0.
 */

struct chunk {
    struct chunk *next;
    void *base;
    const uint8_t *data;
    size_t n;
};

enum file_state { F_NONE = 0, F_OPENING, F_OPEN, F_FAILED };

struct spool {
    uv_loop_t *loop;
    char *dir;
    uint64_t limit;

    struct chunk *head, *tail;
    size_t mem; /* data bytes in the chunks */

    enum file_state fstate;
    int fd;
    int error;
    uint64_t file_r, file_w;

    uv_work_t open_work;
    int open_fd;
    int open_rc;
    bool open_busy;

    uv_fs_t wreq;
    bool writing;   /* the front of the head chunk is being written */
    size_t wlen;    /* bytes of that write */
    bool file_lost; /* a read failed while writing: what that write puts in the file is lost */

    uv_fs_t rreq;
    bool reading;
    uint8_t *rbuf;

    uv_fs_t creq;
    bool close_busy;

    uv_idle_t defer; /* delivers a pop served from memory on the next loop turn */
    bool defer_open;

    spool_chunk_cb cb;
    void *ud;
    bool pop_pending;

    uint64_t peak;
    uint64_t spilled;
    bool limit_hit;
    bool closing;
};

static void serve(struct spool *s);
static void spill(struct spool *s);
static void maybe_free(struct spool *s);

static void chunk_free(struct chunk *c)
{
    bufpool_release(c->base);
    free(c);
}

uint64_t spool_size(const struct spool *s)
{
    return (s->file_w - s->file_r) + s->mem;
}

bool spool_full(const struct spool *s)
{
    if (s->mem >= SPOOL_MEM_CAP) {
        return true;
    }
    if (s->limit == 0 || s->fstate == F_FAILED) {
        return spool_size(s) >= SPOOL_MEM_WINDOW;
    }
    return spool_size(s) >= s->limit;
}

bool spool_has_room(const struct spool *s)
{
    if (s->mem > SPOOL_MEM_CAP / 2) {
        return false;
    }
    uint64_t max = s->limit == 0 || s->fstate == F_FAILED ? SPOOL_MEM_WINDOW : s->limit;
    return spool_size(s) <= max - max / 4;
}

bool spool_limit_hit(const struct spool *s)
{
    return s->limit_hit;
}

uint64_t spool_peak(const struct spool *s)
{
    return s->peak;
}

uint64_t spool_spilled(const struct spool *s)
{
    return s->spilled;
}

int spool_error(const struct spool *s)
{
    return s->error;
}

bool spool_popping(const struct spool *s)
{
    return s->pop_pending;
}

int spool_new(uv_loop_t *loop, const char *dir, uint64_t limit, struct spool **out)
{
    struct spool *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    s->dir = strdup(dir != NULL ? dir : "/tmp");
    if (s->dir == NULL) {
        free(s);
        return UV_ENOMEM;
    }
    s->loop = loop;
    s->limit = limit;
    s->fd = -1;
    s->open_fd = -1;
    (void)uv_idle_init(loop, &s->defer); /* cannot fail */
    s->defer.data = s;
    s->defer_open = true;
    *out = s;
    return 0;
}

/* ---- the file ------------------------------------------------------------------------------ */

/* An unnamed 0600 file in dir: O_TMPFILE, else a new name deleted right away (that inode only). */
static int open_unnamed(const char *dir, int *fd_out)
{
    int fd = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
        *fd_out = fd;
        return 0;
    }
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) {
        return -errno;
    }
    int dirfd = -1;
    int rc = shdir_open(dir, &dirfd);
    if (rc != 0) {
        return rc;
    }
    char name[48];
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r)) {
        r = (uint64_t)getpid() ^ (uint64_t)(uintptr_t)&r;
    }
    snprintf(name, sizeof(name), ".dotmon-spool-%016llx", (unsigned long long)r);
    fd = openat(dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        rc = -errno;
        (void)close(dirfd);
        return rc;
    }
    struct stat st;
    rc = fstat(fd, &st) == 0 ? shdir_unlink_exact(dirfd, name, st.st_dev, st.st_ino) : -errno;
    (void)close(dirfd);
    if (rc != 0) {
        (void)close(fd); /* never keep a file with a name */
        return rc;
    }
    *fd_out = fd;
    return 0;
}

static void open_on_pool(uv_work_t *w)
{
    struct spool *s = w->data;
    s->open_rc = open_unnamed(s->dir, &s->open_fd);
}

static void on_opened(uv_work_t *w, int status)
{
    struct spool *s = w->data;
    s->open_busy = false;
    int rc = status != 0 ? status : s->open_rc;
    if (rc == 0) {
        s->fd = s->open_fd;
        s->fstate = F_OPEN;
    } else {
        s->fstate = F_FAILED;
        s->error = rc;
    }
    if (s->closing) {
        maybe_free(s);
        return;
    }
    spill(s);
}

static void on_written(uv_fs_t *req)
{
    struct spool *s = req->data;
    ssize_t result = req->result;
    uv_fs_req_cleanup(req);
    s->writing = false;
    struct chunk *c = s->head;
    if (s->file_lost) {
        /* The file region was dropped meanwhile (a failed read): these bytes stay in memory. */
        s->file_lost = false;
        s->file_r = s->file_w = 0;
    } else if (result == (ssize_t)s->wlen) {
        s->file_w += s->wlen;
        s->spilled += s->wlen;
        s->mem -= s->wlen;
        if (s->wlen == c->n) {
            s->head = c->next;
            if (s->head == NULL) {
                s->tail = NULL;
            }
            chunk_free(c);
        } else {
            c->data += s->wlen; /* the rest waits for the ring to wrap (or for room) */
            c->n -= s->wlen;
        }
    } else if (s->error == 0) {
        /* A short write (disk full) or an error: stop using the file; the chunk stays. */
        s->error = result < 0 ? (int)result : UV_ENOSPC;
        s->fstate = F_FAILED;
    }
    if (s->closing) {
        maybe_free(s);
        return;
    }
    spill(s);
    serve(s);
}

/* Writes the oldest memory chunk once more than the window is in memory. */
static void spill(struct spool *s)
{
    if (s->closing || s->writing || s->head == NULL || s->mem <= SPOOL_MEM_WINDOW ||
        s->limit == 0) {
        return;
    }
    if (s->fstate == F_NONE) {
        s->fstate = F_OPENING;
        s->open_busy = true;
        s->open_work.data = s;
        if (uv_queue_work(s->loop, &s->open_work, open_on_pool, on_opened) != 0) {
            s->open_busy = false;
            s->fstate = F_FAILED;
            s->error = UV_ENOMEM;
        }
        return;
    }
    if (s->fstate != F_OPEN) {
        return;
    }
    if (s->file_r == s->file_w && !s->reading) {
        s->file_r = s->file_w = 0; /* caught up: start at the file's beginning again */
    }
    uint64_t backlog = s->file_w - s->file_r;
    if (backlog >= s->limit) {
        return; /* the ring is full: the chunk waits in memory until the consumer reads */
    }
    struct chunk *c = s->head;
    uint64_t at = s->file_w % s->limit;
    uint64_t n = c->n;
    if (n > s->limit - at) {
        n = s->limit - at; /* up to the ring's end; the rest from its start */
    }
    if (n > s->limit - backlog) {
        n = s->limit - backlog;
    }
    s->wlen = (size_t)n;
    uv_buf_t b = uv_buf_init((char *)(uintptr_t)c->data, (unsigned int)n);
    s->wreq.data = s;
    s->writing = true;
    if (uv_fs_write(s->loop, &s->wreq, s->fd, &b, 1, (int64_t)at, on_written) != 0) {
        s->writing = false;
        s->fstate = F_FAILED;
        s->error = UV_EIO;
    }
}

/* ---- producer ------------------------------------------------------------------------------ */

int spool_push(struct spool *s, void *base, const void *data, size_t n)
{
    if (n == 0) {
        bufpool_release(base);
        return 0;
    }
    bool was_full = spool_full(s);
    struct chunk *c = malloc(sizeof(*c));
    if (c == NULL) {
        bufpool_release(base);
        return UV_ENOMEM;
    }
    if (base == NULL) {
        base = malloc(n);
        if (base == NULL) {
            free(c);
            return UV_ENOMEM;
        }
        memcpy(base, data, n);
        data = base;
    }
    c->next = NULL;
    c->base = base;
    c->data = data;
    c->n = n;
    if (s->tail != NULL) {
        s->tail->next = c;
    } else {
        s->head = c;
    }
    s->tail = c;
    s->mem += n;
    uint64_t size = spool_size(s);
    if (size > s->peak) {
        s->peak = size;
    }
    if (s->limit > 0 && size >= s->limit) {
        s->limit_hit = true;
    }
    spill(s);
    if (s->pop_pending && !s->reading) {
        serve(s); /* a pop waiting for data */
    }
    return was_full ? AGENT_E_TOOBIG : 0;
}

/* ---- consumer ------------------------------------------------------------------------------ */

static void deliver(struct spool *s, int status, void *base, const uint8_t *data, size_t n)
{
    s->pop_pending = false;
    spool_chunk_cb cb = s->cb;
    void *ud = s->ud;
    s->cb = NULL;
    cb(ud, status, base, data, n);
}

static void on_defer(uv_idle_t *h)
{
    struct spool *s = h->data;
    (void)uv_idle_stop(h);
    serve(s);
}

static void on_read(uv_fs_t *req)
{
    struct spool *s = req->data;
    ssize_t result = req->result;
    uv_fs_req_cleanup(req);
    s->reading = false;
    uint8_t *buf = s->rbuf;
    s->rbuf = NULL;
    if (s->closing) {
        bufpool_release(buf);
        maybe_free(s);
        return;
    }
    if (result <= 0) {
        /* The file lost what it held (or cannot be read): drop that region, say so once. */
        bufpool_release(buf);
        int rc = result < 0 ? (int)result : UV_EIO;
        if (s->error == 0) {
            s->error = rc;
        }
        s->fstate = F_FAILED;
        if (s->writing) {
            s->file_lost = true; /* on_written drops the region and keeps its chunk */
        } else {
            s->file_r = s->file_w = 0;
        }
        if (s->pop_pending) {
            deliver(s, rc, NULL, NULL, 0);
        }
        return;
    }
    s->file_r += (uint64_t)result;
    if (s->file_r == s->file_w && !s->writing) {
        s->file_r = s->file_w = 0;
    }
    if (s->pop_pending) {
        deliver(s, 0, buf, buf, (size_t)result);
    } else {
        bufpool_release(buf);
    }
    spill(s);
}

/* Answers the pending pop if the next bytes are at hand: from the file, else from memory. */
static void serve(struct spool *s)
{
    if (!s->pop_pending || s->reading || s->closing) {
        return;
    }
    if (s->file_r < s->file_w && !s->file_lost) {
        uint64_t want = s->file_w - s->file_r;
        uint64_t at = s->file_r % s->limit;
        if (want > s->limit - at) {
            want = s->limit - at; /* up to the ring's end */
        }
        size_t n = want < SPOOL_READ_SIZE ? (size_t)want : SPOOL_READ_SIZE;
        s->rbuf = bufpool_get(); /* n <= SPOOL_READ_SIZE <= BUFPOOL_BLOCK */
        if (s->rbuf == NULL) {
            s->rbuf = malloc(n);
        }
        if (s->rbuf == NULL) {
            deliver(s, UV_ENOMEM, NULL, NULL, 0);
            return;
        }
        uv_buf_t b = uv_buf_init((char *)s->rbuf, (unsigned int)n);
        s->rreq.data = s;
        s->reading = true;
        if (uv_fs_read(s->loop, &s->rreq, s->fd, &b, 1, (int64_t)at, on_read) != 0) {
            s->reading = false;
            bufpool_release(s->rbuf);
            s->rbuf = NULL;
            deliver(s, UV_EIO, NULL, NULL, 0);
        }
        return;
    }
    struct chunk *c = s->head;
    if (c == NULL || s->writing) {
        return; /* empty (cannot happen: pop checked), or the head is on its way to the file */
    }
    s->head = c->next;
    if (s->head == NULL) {
        s->tail = NULL;
    }
    s->mem -= c->n;
    void *base = c->base;
    const uint8_t *data = c->data;
    size_t n = c->n;
    free(c);
    deliver(s, 0, base, data, n);
}

int spool_pop(struct spool *s, spool_chunk_cb cb, void *ud)
{
    if (s == NULL || cb == NULL || s->pop_pending || s->closing) {
        return AGENT_E_INVAL;
    }
    if (spool_size(s) == 0) {
        return AGENT_E_NOTFOUND;
    }
    s->cb = cb;
    s->ud = ud;
    s->pop_pending = true;
    /* Never from inside this call: the next loop turn serves it. */
    (void)uv_idle_start(&s->defer, on_defer);
    return 0;
}

/* ---- closing ------------------------------------------------------------------------------- */

static void on_defer_closed(uv_handle_t *h)
{
    struct spool *s = h->data;
    s->defer_open = false;
    maybe_free(s);
}

static void on_file_closed(uv_fs_t *req)
{
    struct spool *s = req->data;
    uv_fs_req_cleanup(req);
    s->close_busy = false;
    s->fd = -1;
    maybe_free(s);
}

static void maybe_free(struct spool *s)
{
    if (!s->closing || s->writing || s->reading || s->open_busy || s->close_busy) {
        return;
    }
    if (s->open_fd >= 0 && s->fd < 0 && s->fstate != F_OPEN) {
        s->fd = s->open_fd; /* opened after close was called */
    }
    s->open_fd = -1;
    if (s->fd >= 0) {
        s->close_busy = true;
        s->creq.data = s;
        if (uv_fs_close(s->loop, &s->creq, s->fd, on_file_closed) == 0) {
            return;
        }
        s->close_busy = false;
        (void)close(s->fd);
        s->fd = -1;
    }
    if (s->defer_open) {
        if (!uv_is_closing((uv_handle_t *)&s->defer)) {
            uv_close((uv_handle_t *)&s->defer, on_defer_closed);
        }
        return;
    }
    while (s->head != NULL) {
        struct chunk *c = s->head;
        s->head = c->next;
        chunk_free(c);
    }
    bufpool_release(s->rbuf);
    free(s->dir);
    free(s);
}

void spool_close(struct spool *s)
{
    if (s == NULL || s->closing) {
        return;
    }
    s->closing = true;
    s->pop_pending = false;
    s->cb = NULL;
    (void)uv_idle_stop(&s->defer);
    maybe_free(s);
}
