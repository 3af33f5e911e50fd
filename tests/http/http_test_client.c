/* SPDX-License-Identifier: MIT */
#include "http_test_client.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

enum { HS_NONE = 0, HS_FIELD, HS_VALUE };

uint64_t tc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void tc_sleep_ms(unsigned ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

void tc_response_init(struct tc_response *r)
{
    memset(r, 0, sizeof(*r));
    buf_init(&r->headers, 1 << 20);
    buf_init(&r->body, 256u << 20);
}

void tc_response_fini(struct tc_response *r)
{
    buf_fini(&r->headers);
    buf_fini(&r->body);
}

const char *tc_header(const struct tc_response *r, const char *name)
{
    const char *p = (const char *)buf_data(&r->headers);
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *value = p + strlen(p) + 1;
        if (strcasecmp(p, name) == 0) {
            return value;
        }
        p = value + strlen(value) + 1;
    }
    return NULL;
}

const char *tc_body(struct tc_response *r)
{
    return buf_cstr(&r->body);
}

/* ---- llhttp callbacks (response mode) ---- */

static int end_line(struct tc_conn *c)
{
    if (c->hstate == HS_FIELD) {
        buf_append(&c->resp->headers, "", 1);
        c->hstate = HS_VALUE;
    }
    if (c->hstate == HS_VALUE) {
        buf_append(&c->resp->headers, "", 1);
        c->resp->nheaders++;
    }
    c->hstate = HS_NONE;
    return 0;
}

static int on_message_begin(llhttp_t *p)
{
    struct tc_conn *c = p->data;
    size_t interim = c->resp->interim;
    tc_response_fini(c->resp);
    tc_response_init(c->resp);
    c->resp->interim = interim;
    c->hstate = HS_NONE;
    return 0;
}

static int on_header_field(llhttp_t *p, const char *at, size_t n)
{
    struct tc_conn *c = p->data;
    if (c->hstate == HS_VALUE) {
        end_line(c);
    }
    c->hstate = HS_FIELD;
    return buf_append(&c->resp->headers, at, n) ? -1 : 0;
}

static int on_header_value(llhttp_t *p, const char *at, size_t n)
{
    struct tc_conn *c = p->data;
    if (c->hstate == HS_FIELD) {
        buf_append(&c->resp->headers, "", 1);
        c->hstate = HS_VALUE;
    }
    return buf_append(&c->resp->headers, at, n) ? -1 : 0;
}

static int on_headers_complete(llhttp_t *p)
{
    struct tc_conn *c = p->data;
    end_line(c);
    c->resp->status = llhttp_get_status_code(p);
    c->resp->http_major = llhttp_get_http_major(p);
    c->resp->http_minor = llhttp_get_http_minor(p);
    /* 1: no body follows (HEAD), as llhttp's on_headers_complete contract says. */
    return c->head_request && c->resp->status >= 200 ? 1 : 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct tc_conn *c = p->data;
    return buf_append(&c->resp->body, at, n) ? -1 : 0;
}

static int on_chunk_header(llhttp_t *p)
{
    struct tc_conn *c = p->data;
    if (p->content_length > 0) {
        c->resp->nchunks++;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct tc_conn *c = p->data;
    c->resp->keep_alive = llhttp_should_keep_alive(p) != 0;
    if (c->resp->status >= 100 && c->resp->status < 200) {
        c->resp->interim++; /* 100 Continue: keep reading for the final response */
        return 0;
    }
    c->complete = true;
    return HPE_PAUSED;
}

int tc_connect(struct tc_conn *c, int port)
{
    memset(c, 0, sizeof(*c));
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        return -errno;
    }
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        int e = -errno;
        close(c->fd);
        c->fd = -1;
        return e;
    }
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    buf_init(&c->in, 1 << 20);
    llhttp_settings_init(&c->settings);
    c->settings.on_message_begin = on_message_begin;
    c->settings.on_header_field = on_header_field;
    c->settings.on_header_value = on_header_value;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_chunk_header = on_chunk_header;
    c->settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
    c->parser.data = c;
    return 0;
}

void tc_close(struct tc_conn *c)
{
    SSL_free(c->ssl); /* no close_notify: the tests decide what the server sees */
    c->ssl = NULL;
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    buf_fini(&c->in);
}

void tc_reset(struct tc_conn *c)
{
    if (c->fd >= 0) {
        struct linger l = {.l_onoff = 1, .l_linger = 0};
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
    }
    tc_close(c);
}

/* recv(2) or SSL_read: >0 bytes, 0 end of stream, -1 with errno. */
static ssize_t conn_recv(struct tc_conn *c, void *p, size_t n)
{
    if (c->ssl == NULL) {
        return recv(c->fd, p, n, 0);
    }
    ERR_clear_error();
    int r = SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
    if (r > 0) {
        return r;
    }
    int e = SSL_get_error(c->ssl, r);
    ERR_clear_error();
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
        return 0;
    }
    errno = ECONNRESET;
    return -1;
}

int tc_tls_handshake(struct tc_conn *c, void *ssl_ctx, const unsigned char *alpn, size_t alpn_len,
                     int timeout_ms, char *why, size_t whylen)
{
    struct timeval tv = {.tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ERR_clear_error();
    SSL *ssl = SSL_new(ssl_ctx);
    if (ssl == NULL || SSL_set_fd(ssl, c->fd) != 1 ||
        (alpn != NULL && SSL_set_alpn_protos(ssl, alpn, (unsigned int)alpn_len) != 0) ||
        SSL_connect(ssl) != 1) {
        if (why != NULL && whylen > 0) {
            unsigned long e = ERR_peek_last_error();
            const char *r = e ? ERR_reason_error_string(e) : NULL;
            snprintf(why, whylen, "%s", r ? r : "handshake failed (no reason)");
        }
        ERR_clear_error();
        SSL_free(ssl);
        return -1;
    }
    c->ssl = ssl;
    return 0;
}

int tc_send(struct tc_conn *c, const void *p, size_t n)
{
    const char *s = p;
    while (c->ssl != NULL && n > 0) {
        ERR_clear_error();
        int w = SSL_write(c->ssl, s, n > INT32_MAX ? INT32_MAX : (int)n);
        if (w <= 0) {
            ERR_clear_error();
            return -EPIPE;
        }
        s += w;
        n -= (size_t)w;
    }
    while (n > 0) {
        ssize_t w = send(c->fd, s, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        s += w;
        n -= (size_t)w;
    }
    return 0;
}

int tc_send_str(struct tc_conn *c, const char *s)
{
    return tc_send(c, s, strlen(s));
}

void tc_shutdown_write(struct tc_conn *c)
{
    shutdown(c->fd, SHUT_WR);
}

/* Waits for readability; returns 1 ready, 0 timeout. */
static int wait_readable(int fd, uint64_t deadline)
{
    for (;;) {
        uint64_t now = tc_now_ms();
        if (now >= deadline) {
            return 0;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int n = poll(&pfd, 1, (int)(deadline - now));
        if (n > 0) {
            return 1;
        }
        if (n == 0) {
            return 0;
        }
        if (errno != EINTR) {
            return 1; /* let recv report it */
        }
    }
}

/* Parses what is buffered. Returns 1 on a complete response, 0 need more, TC_ERROR. */
static int parse_buffered(struct tc_conn *c)
{
    const char *data = (const char *)buf_data(&c->in);
    size_t n = buf_size(&c->in);
    if (n == 0) {
        return 0;
    }
    llhttp_errno_t err = llhttp_execute(&c->parser, data, n);
    if (err == HPE_OK) {
        buf_reset(&c->in);
        return 0;
    }
    if (err == HPE_PAUSED && c->complete) {
        buf_consume(&c->in, (size_t)(llhttp_get_error_pos(&c->parser) - data));
        llhttp_resume(&c->parser);
        return 1;
    }
    return TC_ERROR;
}

enum tc_result tc_read_response(struct tc_conn *c, struct tc_response *r, int timeout_ms)
{
    tc_response_fini(r);
    tc_response_init(r);
    c->resp = r;
    c->complete = false;
    uint64_t deadline = tc_now_ms() + (uint64_t)timeout_ms;
    bool got_any = buf_size(&c->in) > 0; /* pipelined bytes already belong to this one */
    int rc = parse_buffered(c);
    if (rc != 0) {
        return rc == 1 ? TC_OK : TC_ERROR;
    }
    for (;;) {
        if ((c->ssl == NULL || SSL_pending(c->ssl) == 0) && !wait_readable(c->fd, deadline)) {
            return TC_TIMEOUT;
        }
        if (c->read_delay_us > 0) {
            struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)c->read_delay_us * 1000L};
            nanosleep(&ts, NULL);
        }
        size_t want = c->read_size ? c->read_size : (size_t)64 * 1024;
        if (buf_reserve(&c->in, want) != 0) {
            return TC_ERROR;
        }
        ssize_t n = conn_recv(c, c->in.p + c->in.len, want);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return got_any ? TC_ERROR : TC_CLOSED; /* reset */
        }
        if (n == 0) {
            if (!got_any && buf_size(&c->in) == 0) {
                return TC_CLOSED;
            }
            /* A body delimited by close ends here (llhttp_finish completes it). */
            llhttp_errno_t fin = llhttp_finish(&c->parser);
            if ((fin == HPE_OK || fin == HPE_PAUSED) && c->complete) {
                return TC_OK;
            }
            return TC_ERROR;
        }
        got_any = true;
        c->bytes_read += (size_t)n;
        c->in.len += (size_t)n;
        rc = parse_buffered(c);
        if (rc == 1) {
            return TC_OK;
        }
        if (rc < 0) {
            return TC_ERROR;
        }
    }
}

enum tc_result tc_wait_closed(struct tc_conn *c, int timeout_ms, size_t *extra)
{
    uint64_t deadline = tc_now_ms() + (uint64_t)timeout_ms;
    size_t total = buf_size(&c->in);
    char tmp[4096];
    for (;;) {
        if ((c->ssl == NULL || SSL_pending(c->ssl) == 0) && !wait_readable(c->fd, deadline)) {
            if (extra != NULL) {
                *extra = total;
            }
            return TC_TIMEOUT;
        }
        ssize_t n = conn_recv(c, tmp, sizeof(tmp));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            if (extra != NULL) {
                *extra = total;
            }
            return TC_OK;
        }
        total += (size_t)n;
    }
}

enum tc_result tc_request(struct tc_conn *c, const char *raw, struct tc_response *r, int timeout_ms)
{
    c->head_request = strncmp(raw, "HEAD ", 5) == 0;
    if (tc_send_str(c, raw) != 0) {
        return TC_CLOSED;
    }
    return tc_read_response(c, r, timeout_ms);
}
