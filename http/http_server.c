/* SPDX-License-Identifier: MIT */
#include "http_server.h"

#include <malloc.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "err.h"
#include "http_internal.h"
#include "http_proto.h"
#include "log.h"

/*
 * Server lifecycle: listeners, accept, and graceful shutdown. Per-connection work lives in
 * http_conn.c. The server counts its own handles (listeners and the grace timer) and the
 * connections; it frees itself in the close callback of the grace timer, which is closed last,
 * so the caller's close callback always runs from the loop and after every handle is closed.
 */

#define LISTEN_BACKLOG 511

static void server_maybe_finish(struct http_server *s);

static void apply_defaults(struct http_server_config *c)
{
    c->header_timeout_ms = c->header_timeout_ms ? c->header_timeout_ms : 10000;
    c->idle_timeout_ms = c->idle_timeout_ms ? c->idle_timeout_ms : 60000;
    c->write_timeout_ms = c->write_timeout_ms ? c->write_timeout_ms : 60000;
    c->linger_ms = c->linger_ms ? c->linger_ms : HTTP_LINGER_MS_DEFAULT;
    c->pressure_head_ms = c->pressure_head_ms ? c->pressure_head_ms : HTTP_PRESSURE_HEAD_MS_DEFAULT;
    c->max_url = c->max_url ? c->max_url : 8192;
    c->max_header_bytes = c->max_header_bytes ? c->max_header_bytes : 32768;
    c->max_body = c->max_body ? c->max_body : (size_t)1024 * 1024;
    c->max_connections = c->max_connections ? c->max_connections : 1024;
    c->max_headers = c->max_headers ? c->max_headers : 100;
    c->max_stream_pending =
        c->max_stream_pending ? c->max_stream_pending : (size_t)16 * 1024 * 1024;
}

/*
 * libuv writes to TCP sockets with write(2), which raises SIGPIPE when the peer has already
 * gone: one client closing in the middle of a response would kill the whole process. Ignore it,
 * unless the application has installed a handler of its own.
 */
static void ignore_sigpipe(void)
{
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_IGN;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGPIPE, &sa, NULL);
    }
}

int http_server_new(uv_loop_t *loop, const struct http_server_config *cfg, http_handler_cb handler,
                    void *ud, struct http_server **out)
{
    if (loop == NULL || handler == NULL || out == NULL) {
        return AGENT_E_INVAL;
    }
    struct http_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return UV_ENOMEM;
    }
    ignore_sigpipe();
    s->loop = loop;
    if (cfg != NULL) {
        s->cfg = *cfg;
    }
    apply_defaults(&s->cfg);
    s->handler = handler;
    s->ud = ud;
    int rc = uv_timer_init(loop, &s->grace_timer);
    if (rc != 0) {
        free(s);
        return rc;
    }
    s->grace_timer.data = s;
    (void)uv_idle_init(loop, &s->accept_idle); /* cannot fail */
    s->accept_idle.data = s;
    s->open_handles = 2;
    *out = s;
    return 0;
}

/* ---- listeners ---- */

static void listener_on_close(uv_handle_t *h)
{
    struct http_listener *l = h->data;
    struct http_server *s = l->srv;
    free(l);
    s->open_handles--;
    server_maybe_finish(s);
}

/* Unlinks l at once (the list holds live listeners only) and frees it from the loop. */
static void listener_close(struct http_listener *l)
{
    struct http_server *s = l->srv;
    for (struct http_listener **pp = &s->listeners; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == l) {
            *pp = l->next;
            break;
        }
    }
    uv_close((uv_handle_t *)&l->tcp, listener_on_close);
}

/* A loop turn has passed: take the connections left pending by the last burst. */
static void server_on_accept_idle(uv_idle_t *h)
{
    struct http_server *s = h->data;
    (void)uv_idle_stop(h);
    s->accept_burst = 0;
    for (struct http_listener *l = s->listeners; l != NULL && !s->closing; l = l->next) {
        if (l->deferred) {
            l->deferred = false;
            s->accept_burst++;
            if (http__conn_accept(s, l) != 0) { /* uv_accept also restarts libuv's accepting */
                l->deferred = true;             /* out of memory: try again next turn */
                (void)uv_idle_start(&s->accept_idle, server_on_accept_idle);
            }
        }
    }
}

static void listener_on_connection(uv_stream_t *st, int status)
{
    struct http_listener *l = st->data;
    struct http_server *s = l->srv;
    if (status < 0) {
        log_warn(HTTP_LOG_CAT, "accept error: %s", agent_strerror(status));
        return;
    }
    if (s->closing) {
        return;
    }
    /* Not taking a connection makes libuv stop accepting on l (it waits, accepted, in the handle)
     * until uv_accept is called on the next turn: after a burst, and when out of memory. */
    if (++s->accept_burst > HTTP_ACCEPT_BURST || http__conn_accept(s, l) != 0) {
        l->deferred = true;
        (void)uv_idle_start(&s->accept_idle, server_on_accept_idle);
    }
}

/* Binds and listens on one address; *port receives the bound port. */
static int listen_one(struct http_server *s, const struct sockaddr *addr, int tag, bool tls,
                      int *port)
{
    struct http_listener *l = calloc(1, sizeof(*l));
    if (l == NULL) {
        return UV_ENOMEM;
    }
    int rc = uv_tcp_init(s->loop, &l->tcp);
    if (rc != 0) {
        free(l);
        return rc;
    }
    l->tcp.data = l;
    l->srv = s;
    l->tag = tag;
    l->tls = tls;
    l->next = s->listeners;
    s->listeners = l;
    s->open_handles++;

    /* libuv sets SO_REUSEADDR and CLOEXEC; EADDRINUSE may only show at uv_listen. */
    rc = uv_tcp_bind(&l->tcp, addr, 0);
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&l->tcp, LISTEN_BACKLOG, listener_on_connection);
    }
    struct sockaddr_storage ss;
    int len = (int)sizeof(ss);
    if (rc == 0) {
        rc = uv_tcp_getsockname(&l->tcp, (struct sockaddr *)&ss, &len);
    }
    if (rc != 0) {
        listener_close(l);
        return rc;
    }
    *port = ss.ss_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)&ss)->sin6_port)
                                     : ntohs(((const struct sockaddr_in *)&ss)->sin_port);
    return 0;
}

static int listen_url(struct http_server *s, const struct http_listen_url *u, int tag, int *port)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    int rc;
    switch (u->kind) {
    case HTTP_HOST_LITERAL:
        if (u->ipv6) {
            rc = uv_ip6_addr(u->host, u->port, &a6);
            return rc ? AGENT_E_INVAL
                      : listen_one(s, (const struct sockaddr *)&a6, tag, u->tls, port);
        }
        rc = uv_ip4_addr(u->host, u->port, &a4);
        return rc ? AGENT_E_INVAL : listen_one(s, (const struct sockaddr *)&a4, tag, u->tls, port);
    case HTTP_HOST_LOOPBACK:
        /* Both loopbacks, on one port: IPv4 first (port 0 picks it), then ::1 on the same port
         * when the host has IPv6. A missing ::1 is not an error. */
        uv_ip4_addr("127.0.0.1", u->port, &a4);
        rc = listen_one(s, (const struct sockaddr *)&a4, tag, u->tls, port);
        if (rc == 0) {
            uv_ip6_addr("::1", *port, &a6);
            int port6 = 0;
            int rc6 = listen_one(s, (const struct sockaddr *)&a6, tag, u->tls, &port6);
            if (rc6 != 0) {
                log_debug(HTTP_LOG_CAT, "localhost: not listening on [::1]:%d: %s", *port,
                          agent_strerror(rc6));
            }
        }
        return rc;
    case HTTP_HOST_ANY:
    default:
        /* [::] is dual-stack on Linux (libuv leaves IPV6_V6ONLY off); fall back to 0.0.0.0 on
         * hosts without IPv6. */
        uv_ip6_addr("::", u->port, &a6);
        rc = listen_one(s, (const struct sockaddr *)&a6, tag, u->tls, port);
        if (rc == UV_EAFNOSUPPORT || rc == UV_EADDRNOTAVAIL || rc == UV_EINVAL) {
            uv_ip4_addr("0.0.0.0", u->port, &a4);
            rc = listen_one(s, (const struct sockaddr *)&a4, tag, u->tls, port);
        }
        return rc;
    }
}

int http_server_listen(struct http_server *s, const char *url, int tag)
{
    if (s == NULL || s->closing) {
        return AGENT_E_INVAL;
    }
    struct http_listen_url u;
    int rc = http__parse_listen_url(url, &u);
    if (rc != 0) {
        return rc;
    }
    if (u.tls && s->cfg.tls == NULL) {
        log_warn(HTTP_LOG_CAT, "%s: https needs a certificate", url);
        return AGENT_E_INVAL;
    }
    if (u.tls && s->tls_rbuf == NULL) {
        s->tls_rbuf = malloc(HTTP_TLS_RBUF);
        if (s->tls_rbuf == NULL) {
            return UV_ENOMEM;
        }
    }
    int *ports = realloc(s->ports, (s->nports + 1) * sizeof(*ports));
    if (ports == NULL) {
        return UV_ENOMEM;
    }
    s->ports = ports;
    int port = 0;
    rc = listen_url(s, &u, tag, &port);
    if (rc != 0) {
        return rc;
    }
    s->ports[s->nports++] = port;
    log_debug(HTTP_LOG_CAT, "listening on %s (port %d, tag %d)", url, port, tag);
    return 0;
}

int http_url_info(const char *url, bool *tls, bool *loopback)
{
    struct http_listen_url u;
    int rc = http__parse_listen_url(url, &u);
    if (rc != 0) {
        return rc;
    }
    *tls = u.tls;
    switch (u.kind) {
    case HTTP_HOST_LOOPBACK:
        *loopback = true;
        break;
    case HTTP_HOST_LITERAL:
        *loopback = u.ipv6 ? strcmp(u.host, "::1") == 0 : strncmp(u.host, "127.", 4) == 0;
        break;
    case HTTP_HOST_ANY:
    default:
        *loopback = false;
        break;
    }
    return 0;
}

int http_server_port(const struct http_server *s, size_t n)
{
    return s != NULL && n < s->nports ? s->ports[n] : -1;
}

size_t http_server_connection_count(const struct http_server *s)
{
    return s != NULL ? s->nconns : 0;
}

/* ---- connections ---- */

void http__server_conn_gone(struct http_server *s, struct http_conn *c)
{
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    } else {
        s->conns_tail = c->prev;
    }
    if (c->rejecting) {
        s->nrejecting--;
    } else if (!c->evicted) {
        s->nconns--;
    }
    /* After a burst (a flood, a load test), give the freed connection memory back to the system
     * once it is over, so RSS returns to where it was. */
    size_t open_now = s->nconns + s->nrejecting;
    if (s->peak_conns >= HTTP_TRIM_AFTER_CONNS && open_now * 8 <= s->peak_conns) {
        s->peak_conns = open_now;
        malloc_trim(0);
    }
    server_maybe_finish(s);
}

const char *http__server_date(struct http_server *s)
{
    time_t now = time(NULL);
    if (now != s->date_time || s->date[0] == '\0') {
        if (http__format_date(now, s->date) != 0) {
            memcpy(s->date, "Thu, 01 Jan 1970 00:00:00 GMT", 30);
        }
        s->date_time = now;
    }
    return s->date;
}

/* ---- shutdown ---- */

static void server_on_idle_closed(uv_handle_t *h)
{
    struct http_server *s = h->data;
    s->open_handles--;
    server_maybe_finish(s);
}

static void server_on_final_close(uv_handle_t *h)
{
    struct http_server *s = h->data;
    void (*cb)(void *) = s->close_cb;
    void *ud = s->close_ud;
    free(s->ports);
    free(s->tls_rbuf);
    free(s);
    if (cb != NULL) {
        cb(ud);
    }
}

static void server_maybe_finish(struct http_server *s)
{
    if (!s->closing || s->finishing || s->conns != NULL || s->listeners != NULL ||
        s->open_handles != 1) {
        return;
    }
    s->finishing = true;
    uv_timer_stop(&s->grace_timer);
    uv_close((uv_handle_t *)&s->grace_timer, server_on_final_close);
}

static void close_all_connections(struct http_server *s, bool only_idle)
{
    /* http__conn_close never frees synchronously, so the list stays walkable. */
    for (struct http_conn *c = s->conns; c != NULL; c = c->next) {
        if (!only_idle || http__conn_is_idle(c)) {
            http__conn_close(c);
        } else {
            c->close_after = true; /* its response says Connection: close */
        }
    }
}

static void server_on_grace(uv_timer_t *t)
{
    struct http_server *s = t->data;
    if (s->conns != NULL) {
        log_warn(HTTP_LOG_CAT, "shutdown grace period over: closing %zu connection(s)",
                 s->nconns + s->nrejecting);
    }
    close_all_connections(s, false);
}

void http_server_close(struct http_server *s, uint64_t grace_ms, void (*cb)(void *ud), void *ud)
{
    if (s == NULL || s->closing) {
        return;
    }
    s->closing = true;
    s->close_cb = cb;
    s->close_ud = ud;
    while (s->listeners != NULL) {
        listener_close(s->listeners);
    }
    uv_close((uv_handle_t *)&s->accept_idle, server_on_idle_closed);
    close_all_connections(s, grace_ms > 0);
    if (grace_ms > 0 && s->conns != NULL) {
        uv_timer_start(&s->grace_timer, server_on_grace, grace_ms, 0);
    }
    server_maybe_finish(s);
}

const char *http_status_text(int status)
{
    return http__reason_phrase(status);
}
