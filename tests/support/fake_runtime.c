/* SPDX-License-Identifier: MIT */
#include "fake_runtime.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/*
 * The listener is created with plain socket/bind/listen and handed to libuv with uv_pipe_open:
 * a pipe bound through uv_pipe_bind unlinks its file on close, and the tests need the file to
 * stay behind when the "runtime" dies, exactly like a SIGKILLed process leaves it.
 */

#define MAX_REQUEST 65535
#define HEADER_SIZE 20

struct fake_conn {
    uv_pipe_t pipe;
    struct fake_runtime *f;
    struct fake_conn *next;
    uint8_t in[MAX_REQUEST];
    size_t n;
    bool answered;
    bool closing;
    /* Reply bytes still to send when split_writes sends one byte per write. */
    uint8_t *out;
    size_t out_len;
    size_t out_off;
};

struct fake_write {
    uv_write_t req;
    struct fake_conn *c;
    bool close_after;
    size_t len;
    uint8_t data[];
};

struct fake_runtime {
    uv_loop_t *loop;
    struct fake_runtime_config cfg;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    uv_pipe_t listener;
    bool listening;
    struct fake_conn *conns;
    unsigned connections;
    unsigned counts[256][256];
    int open_handles;
    bool closing;
    bool unlink_on_close;
    void (*close_cb)(void *ud);
    void *close_ud;
};

/* ---- an encoder independent of ipc_codec.c ----------------------------------------------- */

struct enc {
    uint8_t *p;
    size_t len;
    size_t cap;
};

static void enc_put(struct enc *e, const void *p, size_t n)
{
    if (e->len + n > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 256;
        while (cap < e->len + n) {
            cap *= 2;
        }
        uint8_t *np = realloc(e->p, cap);
        if (np == NULL) {
            abort(); /* test code: out of memory is fatal */
        }
        e->p = np;
        e->cap = cap;
    }
    memcpy(e->p + e->len, p, n);
    e->len += n;
}

static void enc_le(struct enc *e, uint64_t v, size_t bytes)
{
    uint8_t b[8];
    for (size_t i = 0; i < bytes; i++) {
        b[i] = (uint8_t)(v >> (8 * i));
    }
    enc_put(e, b, bytes);
}

/* UTF-8 to UTF-16LE units without validation (test strings are well-formed). */
static size_t utf16_units(const char *s, uint16_t *out)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0;
    while (*u) {
        uint32_t cp;
        if (*u < 0x80) {
            cp = *u++;
        } else if (*u < 0xE0) {
            cp = ((uint32_t)(u[0] & 0x1F) << 6) | (u[1] & 0x3Fu);
            u += 2;
        } else if (*u < 0xF0) {
            cp = ((uint32_t)(u[0] & 0x0F) << 12) | ((uint32_t)(u[1] & 0x3F) << 6) | (u[2] & 0x3Fu);
            u += 3;
        } else {
            cp = ((uint32_t)(u[0] & 0x07) << 18) | ((uint32_t)(u[1] & 0x3F) << 12) |
                 ((uint32_t)(u[2] & 0x3F) << 6) | (u[3] & 0x3Fu);
            u += 4;
        }
        if (cp >= 0x10000) {
            if (out) {
                out[n] = (uint16_t)(0xD800 + ((cp - 0x10000) >> 10));
                out[n + 1] = (uint16_t)(0xDC00 + ((cp - 0x10000) & 0x3FF));
            }
            n += 2;
        } else {
            if (out) {
                out[n] = (uint16_t)cp;
            }
            n += 1;
        }
    }
    return n;
}

static void enc_string(struct enc *e, const char *s)
{
    if (s == NULL) {
        enc_le(e, 0, 4);
        return;
    }
    size_t n = utf16_units(s, NULL);
    uint16_t *u = calloc(n + 1, sizeof(*u));
    if (u == NULL) {
        abort();
    }
    (void)utf16_units(s, u);
    enc_le(e, n + 1, 4);
    for (size_t i = 0; i <= n; i++) {
        enc_le(e, u[i], 2);
    }
    free(u);
}

static void enc_header(struct enc *e, uint16_t size, uint8_t set, uint8_t id)
{
    static const char magic[14] = "DOTNET_IPC_V1";
    enc_put(e, magic, sizeof(magic));
    enc_le(e, size, 2);
    enc_le(e, set, 1);
    enc_le(e, id, 1);
    enc_le(e, 0, 2);
}

/* Patches the size field of a message that starts at offset 0. */
static void enc_finish(struct enc *e)
{
    e->p[14] = (uint8_t)e->len;
    e->p[15] = (uint8_t)(e->len >> 8);
}

/* ---- connections ------------------------------------------------------------------------- */

static void runtime_maybe_done(struct fake_runtime *f)
{
    if (!f->closing || f->open_handles > 0) {
        return;
    }
    if (f->unlink_on_close) {
        (void)unlink(f->path);
    }
    void (*cb)(void *) = f->close_cb;
    void *ud = f->close_ud;
    free(f);
    if (cb != NULL) {
        cb(ud);
    }
}

static void conn_on_close(uv_handle_t *h)
{
    struct fake_conn *c = h->data;
    struct fake_runtime *f = c->f;
    for (struct fake_conn **pp = &f->conns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    }
    free(c->out);
    free(c);
    f->open_handles--;
    runtime_maybe_done(f);
}

static void conn_close(struct fake_conn *c)
{
    if (!c->closing) {
        c->closing = true;
        uv_close((uv_handle_t *)&c->pipe, conn_on_close);
    }
}

static void conn_send(struct fake_conn *c, const uint8_t *p, size_t n, bool close_after);

static void conn_on_write(uv_write_t *req, int status)
{
    struct fake_write *w = (struct fake_write *)req;
    struct fake_conn *c = w->c;
    bool close_after = w->close_after;
    free(w);
    if (c->closing) {
        return;
    }
    if (status != 0) {
        conn_close(c);
        return;
    }
    if (c->out != NULL && c->out_off < c->out_len) {
        /* split mode: the next byte goes out only after the previous one was written */
        size_t i = c->out_off++;
        conn_send(c, c->out + i, 1, c->out_off == c->out_len);
        return;
    }
    if (close_after) {
        conn_close(c);
    }
}

static void conn_send(struct fake_conn *c, const uint8_t *p, size_t n, bool close_after)
{
    struct fake_write *w = malloc(sizeof(*w) + n);
    if (w == NULL) {
        abort();
    }
    w->c = c;
    w->close_after = close_after;
    w->len = n;
    memcpy(w->data, p, n);
    uv_buf_t b = uv_buf_init((char *)w->data, (unsigned int)n);
    if (uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, conn_on_write) != 0) {
        free(w);
        conn_close(c);
    }
}

static void conn_reply(struct fake_conn *c, struct enc *e, bool close_after)
{
    if (c->f->cfg.split_writes && e->len > 1) {
        c->out = e->p; /* ownership moves to the connection */
        c->out_len = e->len;
        c->out_off = 1;
        conn_send(c, e->p, 1, false);
        e->p = NULL;
        return;
    }
    conn_send(c, e->p, e->len, close_after);
    free(e->p);
    e->p = NULL;
}

static void reply_hresult(struct fake_conn *c, bool ok, uint32_t hr)
{
    struct enc e = {0};
    enc_header(&e, 24, 0xFF, ok ? 0x00 : 0xFF);
    enc_le(&e, hr, 4);
    conn_reply(c, &e, true);
}

static void reply_process_info(struct fake_conn *c, int level)
{
    const struct fake_runtime_config *cfg = &c->f->cfg;
    struct enc e = {0};
    enc_header(&e, 0, 0xFF, 0x00);
    if (level == 3) {
        enc_le(&e, 1, 4); /* version */
    }
    enc_le(&e, cfg->pid, 8);
    enc_put(&e, cfg->cookie, 16); /* second, right after the pid (PROTOCOL.md §8.3) */
    enc_string(&e, cfg->command_line);
    enc_string(&e, cfg->os);
    enc_string(&e, cfg->arch);
    if (level >= 2) {
        enc_string(&e, cfg->assembly);
        enc_string(&e, cfg->clr_version);
    }
    if (level == 3) {
        enc_string(&e, cfg->rid);
    }
    enc_finish(&e);
    conn_reply(c, &e, true);
}

static void reply_env(struct fake_conn *c)
{
    struct enc body = {0};
    size_t count = 0;
    for (const char *const *v = c->f->cfg.env; v != NULL && *v != NULL; v++) {
        count++;
    }
    enc_le(&body, count, 4);
    for (size_t i = 0; i < count; i++) {
        enc_string(&body, c->f->cfg.env[i]);
    }
    struct enc e = {0};
    enc_header(&e, 26, 0xFF, 0x00);
    enc_le(&e, body.len, 4);
    enc_le(&e, 0, 2);
    enc_put(&e, body.p, body.len);
    free(body.p);
    conn_reply(c, &e, true);
}

static void conn_dispatch(struct fake_conn *c, uint8_t set, uint8_t id)
{
    struct fake_runtime *f = c->f;
    int max_info = f->cfg.max_info ? f->cfg.max_info : 3;
    struct enc e = {0};
    switch (f->cfg.mode) {
    case FAKE_SILENT:
        return;
    case FAKE_GARBAGE:
        enc_put(&e, "HTTP/1.1 400 Bad Request\r\n\r\nxxx", 32);
        conn_reply(c, &e, true);
        return;
    case FAKE_OVERSIZED:
        enc_header(&e, 0xFFFF, 0xFF, 0x00);
        conn_reply(c, &e, false);
        return;
    case FAKE_TRUNCATED:
        enc_header(&e, 100, 0xFF, 0x00);
        enc_put(&e, "0123456789", 10);
        conn_reply(c, &e, true);
        return;
    case FAKE_HUGE_ENV:
        if (set == 0x04 && id == 0x02) {
            enc_header(&e, 26, 0xFF, 0x00);
            enc_le(&e, 0xFFFFFFF0u, 4);
            enc_le(&e, 0, 2);
            conn_reply(c, &e, false);
            return;
        }
        break;
    case FAKE_NORMAL:
    default:
        break;
    }
    if (set == 0x04 && id == 0x00) {
        reply_process_info(c, 1);
    } else if (set == 0x04 && id == 0x04 && max_info >= 2) {
        reply_process_info(c, 2);
    } else if (set == 0x04 && id == 0x08 && max_info >= 3) {
        reply_process_info(c, 3);
    } else if (set == 0x04 && id == 0x02) {
        reply_env(c);
    } else if (set == 0x04 && id == 0x01) {
        reply_hresult(c, true, 0);
    } else {
        reply_hresult(c, false, 0x80131385u); /* DS_IPC_E_UNKNOWN_COMMAND */
    }
}

static void conn_on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
    struct fake_conn *c = h->data;
    (void)suggested;
    *b = uv_buf_init((char *)c->in + c->n, (unsigned int)(sizeof(c->in) - c->n));
}

static void conn_on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct fake_conn *c = s->data;
    (void)b;
    if (nread < 0) {
        conn_close(c); /* the client went away (or the buffer is full) */
        return;
    }
    c->n += (size_t)nread;
    if (c->answered || c->n < HEADER_SIZE) {
        return;
    }
    size_t size = (size_t)c->in[14] | ((size_t)c->in[15] << 8);
    if (memcmp(c->in, "DOTNET_IPC_V1", 14) != 0 || size < HEADER_SIZE) {
        reply_hresult(c, false, 0x80131386u); /* like the runtime: UNKNOWN_MAGIC, then close */
        c->answered = true;
        return;
    }
    if (c->n < size) {
        return;
    }
    c->answered = true;
    c->f->counts[c->in[16]][c->in[17]]++;
    conn_dispatch(c, c->in[16], c->in[17]);
}

static void listener_on_connection(uv_stream_t *server, int status)
{
    struct fake_runtime *f = server->data;
    if (status != 0 || f->closing) {
        return;
    }
    struct fake_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        abort();
    }
    c->f = f;
    (void)uv_pipe_init(f->loop, &c->pipe, 0);
    c->pipe.data = c;
    c->next = f->conns;
    f->conns = c;
    f->open_handles++;
    if (uv_accept(server, (uv_stream_t *)&c->pipe) != 0) {
        conn_close(c);
        return;
    }
    f->connections++;
    (void)uv_read_start((uv_stream_t *)&c->pipe, conn_on_alloc, conn_on_read);
}

static void listener_on_close(uv_handle_t *h)
{
    struct fake_runtime *f = h->data;
    f->open_handles--;
    runtime_maybe_done(f);
}

/* ---- public ------------------------------------------------------------------------------ */

static int bind_socket(const char *path, bool do_listen, int *fd_out)
{
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -errno;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || (do_listen && listen(fd, 64) != 0)) {
        int err = -errno;
        close(fd);
        return err;
    }
    *fd_out = fd;
    return 0;
}

int fake_runtime_start(uv_loop_t *loop, const char *dir, const struct fake_runtime_config *cfg,
                       struct fake_runtime **out)
{
    struct fake_runtime *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -ENOMEM;
    }
    f->loop = loop;
    f->cfg = *cfg;
    int n = snprintf(f->path, sizeof(f->path), "%s/dotnet-diagnostic-%llu-%llu-socket", dir,
                     (unsigned long long)cfg->pid, (unsigned long long)cfg->key);
    if (n < 0 || (size_t)n >= sizeof(f->path)) {
        free(f);
        return -ENAMETOOLONG;
    }
    int fd = -1;
    int rc = bind_socket(f->path, true, &fd);
    if (rc != 0) {
        free(f);
        return rc;
    }
    (void)uv_pipe_init(loop, &f->listener, 0);
    f->listener.data = f;
    f->open_handles = 1;
    rc = uv_pipe_open(&f->listener, fd);
    rc = rc ? rc : uv_listen((uv_stream_t *)&f->listener, 64, listener_on_connection);
    if (rc != 0) {
        /* The handle must still be closed through the loop. */
        f->closing = true;
        f->unlink_on_close = true;
        uv_close((uv_handle_t *)&f->listener, listener_on_close);
        return rc;
    }
    f->listening = true;
    *out = f;
    return 0;
}

const char *fake_runtime_path(const struct fake_runtime *f)
{
    return f->path;
}

unsigned fake_runtime_requests(const struct fake_runtime *f, uint8_t command_set,
                               uint8_t command_id)
{
    return f->counts[command_set][command_id];
}

unsigned fake_runtime_connections(const struct fake_runtime *f)
{
    return f->connections;
}

void fake_runtime_kill(struct fake_runtime *f)
{
    if (f->listening) {
        f->listening = false;
        uv_close((uv_handle_t *)&f->listener, listener_on_close);
    }
    for (struct fake_conn *c = f->conns; c != NULL; c = c->next) {
        conn_close(c);
    }
}

void fake_runtime_close(struct fake_runtime *f, void (*cb)(void *ud), void *ud)
{
    f->close_cb = cb;
    f->close_ud = ud;
    f->unlink_on_close = true;
    fake_runtime_kill(f);
    f->closing = true;
    runtime_maybe_done(f);
}

int fake_stale_socket(const char *dir, uint64_t pid, uint64_t key, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%s/dotnet-diagnostic-%llu-%llu-socket", dir,
                     (unsigned long long)pid, (unsigned long long)key);
    if (n < 0 || (size_t)n >= cap) {
        return -ENAMETOOLONG;
    }
    int fd = -1;
    int rc = bind_socket(path, false, &fd);
    if (rc == 0) {
        close(fd); /* the file stays: connect() now gets ECONNREFUSED */
    }
    return rc;
}

int fake_tmpdir(char *out, size_t cap)
{
    static const char tmpl[] = "/tmp/dmXXXXXX";
    if (cap < sizeof(tmpl)) {
        return -ENAMETOOLONG;
    }
    memcpy(out, tmpl, sizeof(tmpl));
    return mkdtemp(out) != NULL ? 0 : -errno;
}

void fake_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    if (d != NULL) {
        struct dirent *ent;
        while ((ent = readdir(d)) != NULL) {
            if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0) {
                continue;
            }
            char p[512];
            int n = snprintf(p, sizeof(p), "%s/%s", dir, ent->d_name);
            if (n > 0 && (size_t)n < sizeof(p)) {
                (void)unlink(p);
            }
        }
        closedir(d);
    }
    (void)rmdir(dir);
}
