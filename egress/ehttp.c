/* SPDX-License-Identifier: MIT */
#include "ehttp.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <llhttp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "ascii.h"
#include "buf.h"
#include "err.h"
#include "tls_bio.h"

/*
 * One connection = one request. States: RESOLVING -> CONNECTING -> [HANDSHAKE] -> EXCHANGE ->
 * DONE. The exchange writes the request while reading: a store may answer (and close) before the
 * body is through, and that answer is what the caller wants to see. A write error is therefore
 * kept and reported only if no complete response follows.
 *
 * Teardown: finish() calls the callback once, then closes the TCP handle and the timer; the
 * connection is freed when the last handle is closed and no getaddrinfo is pending. After
 * uv_close libuv never reads a write buffer again, so the borrowed body is free to go as soon as
 * the callback (or ehttp_cancel) returns.
 */

#define TLS_SLICE      (64u * 1024u) /* plaintext encrypted per write */
#define HEAD_MAX       (64u * 1024u) /* request head */
#define RESP_HDR_MAX   (64u * 1024u) /* response header bytes */
#define RESP_HDR_COUNT 100
#define READ_SIZE      (64u * 1024u)

enum conn_state { ST_RESOLVING, ST_CONNECTING, ST_HANDSHAKE, ST_EXCHANGE, ST_DONE };

struct ehttp_tls {
    SSL_CTX *ctx;
};

struct ehttp_conn {
    uv_loop_t *loop;
    enum conn_state state;
    uv_getaddrinfo_t gai;
    bool gai_pending;
    struct addrinfo *ai_list, *ai_next;
    uv_tcp_t tcp;
    uv_connect_t connect_req;
    uv_timer_t timer;
    int open_handles;
    bool tcp_inited;
    bool canceled;
    bool finished;
    uint64_t started, last_progress, idle_ms, total_ms;
    char *host;
    char port[8];
    /* request */
    struct buf head;
    const uint8_t *body;
    size_t body_len;
    size_t tls_sent; /* plaintext bytes of head+body encrypted so far */
    int writes_pending;
    int write_err;
    int connect_err;
    /* TLS (tls.ssl NULL: plain HTTP) */
    struct tls_bio tls;
    /* response */
    llhttp_t parser;
    llhttp_settings_t settings;
    struct buf hdrs; /* "name\0value\0" … */
    bool in_value;   /* the last header callback was a value */
    size_t nhdr;
    struct buf resp_body;
    bool complete;
    bool over_cap; /* a response part went past its cap */
    char rdbuf[READ_SIZE];
    ehttp_done_cb cb;
    void *ud;
    char why[256];
};

struct wreq {
    uv_write_t req;
    struct ehttp_conn *c;
    size_t len;
    char data[]; /* ciphertext (TLS) or nothing (plain: head and body are the conn's) */
};

/* ---- TLS context ---- */

static void ssl_reason(char *out, size_t outlen)
{
    tls_bio_reason(out, outlen, "unknown error");
}

int ehttp_tls_new(const char *ca_path, struct ehttp_tls **out, char *why, size_t whylen)
{
    snprintf(why, whylen, "%s", "");
    struct ehttp_tls *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return UV_ENOMEM;
    }
    ERR_clear_error();
    t->ctx = SSL_CTX_new(TLS_client_method());
    if (t->ctx == NULL) {
        free(t);
        return UV_ENOMEM;
    }
    SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_options(t->ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    int ok;
    if (ca_path != NULL) {
        struct stat st;
        bool dir = stat(ca_path, &st) == 0 && S_ISDIR(st.st_mode);
        ok = SSL_CTX_load_verify_locations(t->ctx, dir ? NULL : ca_path, dir ? ca_path : NULL);
        if (ok != 1) {
            char r[160];
            ssl_reason(r, sizeof(r));
            snprintf(why, whylen, "cannot load certificates from %s (%s)", ca_path, r);
        }
    } else {
        ok = SSL_CTX_set_default_verify_paths(t->ctx);
        if (ok != 1) {
            char r[160];
            ssl_reason(r, sizeof(r));
            snprintf(why, whylen, "cannot load the system's certificate store (%s)", r);
        }
    }
    if (ok != 1) {
        SSL_CTX_free(t->ctx);
        free(t);
        return AGENT_E_INVAL;
    }
    *out = t;
    return 0;
}

void ehttp_tls_free(struct ehttp_tls *t)
{
    if (t != NULL) {
        SSL_CTX_free(t->ctx);
        free(t);
    }
}

/* ---- teardown ---- */

static void conn_free(struct ehttp_conn *c)
{
    if (c->ai_list != NULL) {
        uv_freeaddrinfo(c->ai_list);
    }
    tls_bio_fini(&c->tls);
    buf_fini(&c->head);
    buf_fini(&c->hdrs);
    buf_fini(&c->resp_body);
    free(c->host);
    free(c);
}

static void maybe_free(struct ehttp_conn *c)
{
    if (c->finished && c->open_handles == 0 && !c->gai_pending) {
        conn_free(c);
    }
}

static void on_close(uv_handle_t *h)
{
    struct ehttp_conn *c = h->data;
    c->open_handles--;
    maybe_free(c);
}

/* Closes everything; frees c once the handles are closed. No callback. */
static void teardown(struct ehttp_conn *c)
{
    c->finished = true;
    c->state = ST_DONE;
    if (c->gai_pending) {
        uv_cancel((uv_req_t *)&c->gai); /* if it already runs, its callback frees */
    }
    if (c->tcp_inited && !uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
    if (!uv_is_closing((uv_handle_t *)&c->timer)) {
        uv_close((uv_handle_t *)&c->timer, on_close);
    }
    maybe_free(c);
}

static void fail(struct ehttp_conn *c, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Ends the exchange with err (0: the response is complete) and tears down. */
static void finish(struct ehttp_conn *c, int err)
{
    if (c->finished) {
        return;
    }
    c->finished = true;
    if (!c->canceled) {
        if (err == 0) {
            struct ehttp_header h[RESP_HDR_COUNT];
            const char *p = (const char *)c->hdrs.p + c->hdrs.off;
            for (size_t i = 0; i < c->nhdr && c->hdrs.p != NULL; i++) {
                h[i].name = p;
                p += strlen(p) + 1;
                h[i].value = p;
                p += strlen(p) + 1;
            }
            struct ehttp_response r = {(int)c->parser.status_code, h, c->nhdr,
                                       buf_data(&c->resp_body), buf_size(&c->resp_body)};
            c->cb(c->ud, 0, &r, "");
        } else {
            c->cb(c->ud, err, NULL, c->why);
        }
    }
    teardown(c);
}

static void fail(struct ehttp_conn *c, int err, const char *fmt, ...)
{
    if (c->finished) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof(c->why), fmt, ap);
    va_end(ap);
    finish(c, err);
}

void ehttp_cancel(struct ehttp_conn *c)
{
    if (c == NULL || c->finished) {
        return;
    }
    c->canceled = true;
    finish(c, UV_ECANCELED);
}

/* ---- timer ---- */

static void progress(struct ehttp_conn *c)
{
    c->last_progress = uv_now(c->loop);
}

static void on_timer(uv_timer_t *t)
{
    struct ehttp_conn *c = t->data;
    uint64_t now = uv_now(c->loop);
    uint64_t idle_left =
        c->last_progress + c->idle_ms > now ? c->last_progress + c->idle_ms - now : 0;
    uint64_t total_left = UINT64_MAX;
    if (c->total_ms != 0) {
        total_left = c->started + c->total_ms > now ? c->started + c->total_ms - now : 0;
    }
    if (idle_left == 0 || total_left == 0) {
        static const char *const what[] = {"resolving", "connecting", "in the TLS handshake",
                                           "waiting for the response", ""};
        fail(c, AGENT_E_TIMEOUT, "%s:%s: timed out %s", c->host, c->port, what[c->state]);
        return;
    }
    uv_timer_start(&c->timer, on_timer, idle_left < total_left ? idle_left : total_left, 0);
}

/* ---- writing ---- */

static void on_write(uv_write_t *req, int status);

static int submit(struct ehttp_conn *c, struct wreq *w, const uv_buf_t *bufs, unsigned n)
{
    w->c = c;
    int rc = uv_write(&w->req, (uv_stream_t *)&c->tcp, bufs, n, on_write);
    if (rc != 0) {
        free(w);
        return rc;
    }
    c->writes_pending++;
    return 0;
}

/* Sends whatever ciphertext OpenSSL has produced. */
static int flush_tls(struct ehttp_conn *c)
{
    size_t n = tls_bio_pending(&c->tls);
    if (n == 0) {
        return 0;
    }
    struct wreq *w = malloc(sizeof(*w) + n);
    if (w == NULL) {
        return UV_ENOMEM;
    }
    w->len = n;
    if (tls_bio_take_to(&c->tls, w->data, n) != 0) {
        free(w);
        return AGENT_E_PROTO;
    }
    uv_buf_t b = uv_buf_init(w->data, (unsigned)n);
    return submit(c, w, &b, 1);
}

/* A TLS failure after the handshake: c->why says OpenSSL's reason. */
static int tls_failed(struct ehttp_conn *c)
{
    char r[160];
    ssl_reason(r, sizeof(r));
    snprintf(c->why, sizeof(c->why), "%s:%s: TLS: %s", c->host, c->port, r);
    return AGENT_E_PROTO;
}

/* Encrypts the next slice of head+body while fewer than two writes are queued. */
static int pump_tls(struct ehttp_conn *c)
{
    size_t hlen = buf_size(&c->head);
    size_t total = hlen + c->body_len;
    while (c->writes_pending < 2 && c->tls_sent < total) {
        const void *p;
        size_t n;
        if (c->tls_sent < hlen) {
            p = buf_data(&c->head) + c->tls_sent;
            n = hlen - c->tls_sent;
        } else {
            p = c->body + (c->tls_sent - hlen);
            n = total - c->tls_sent;
        }
        if (n > TLS_SLICE) {
            n = TLS_SLICE;
        }
        size_t done = 0;
        if (tls_bio_write(&c->tls, p, n, &done) != 0) {
            return tls_failed(c);
        }
        if (done == 0) {
            return flush_tls(c); /* (a key update from the peer) */
        }
        c->tls_sent += done;
        int rc = flush_tls(c);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

static void on_write(uv_write_t *req, int status)
{
    struct wreq *w = (struct wreq *)req;
    struct ehttp_conn *c = w->c;
    free(w);
    c->writes_pending--;
    if (c->finished) {
        return;
    }
    if (status != 0) {
        /* The answer may already be on its way (a store refusing the body): keep reading. */
        if (c->write_err == 0) {
            c->write_err = status;
        }
        return;
    }
    progress(c);
    if (c->tls.ssl != NULL && c->write_err == 0 && c->state == ST_EXCHANGE) {
        int rc = pump_tls(c);
        if (rc == AGENT_E_PROTO) {
            finish(c, rc); /* c->why says it */
        } else if (rc != 0) {
            fail(c, rc, "%s:%s: sending: %s", c->host, c->port, agent_strerror(rc));
        }
    }
}

/* Head and body in one write; a body over 4 GiB (uv_buf_t's length is 32 bits) in slices. */
static int send_plain(struct ehttp_conn *c)
{
    struct wreq *w = malloc(sizeof(*w));
    if (w == NULL) {
        return UV_ENOMEM;
    }
    w->len = 0;
    uv_buf_t b[8];
    unsigned n = 0;
    b[n++] = uv_buf_init((char *)(uintptr_t)buf_data(&c->head), (unsigned)buf_size(&c->head));
    for (size_t off = 0; off < c->body_len && n < 8; n++) {
        size_t len = c->body_len - off < (1u << 30) ? c->body_len - off : (1u << 30);
        b[n] = uv_buf_init((char *)(uintptr_t)(c->body + off), (unsigned)len);
        off += len;
    }
    return submit(c, w, b, n);
}

/* ---- response parsing ---- */

static struct ehttp_conn *of_parser(llhttp_t *p)
{
    return p->data;
}

static int hdr_append(struct ehttp_conn *c, const char *at, size_t n)
{
    if (buf_append(&c->hdrs, at, n) != 0) {
        c->over_cap = true;
        return -1;
    }
    return 0;
}

static int on_hdr_field(llhttp_t *p, const char *at, size_t n)
{
    struct ehttp_conn *c = of_parser(p);
    if (c->in_value || c->nhdr == 0) {
        if (c->in_value && buf_append(&c->hdrs, "", 1) != 0) {
            return -1;
        }
        if (c->nhdr == RESP_HDR_COUNT) {
            c->over_cap = true;
            return -1;
        }
        c->nhdr++;
        c->in_value = false;
    }
    return hdr_append(c, at, n);
}

static int on_hdr_value(llhttp_t *p, const char *at, size_t n)
{
    struct ehttp_conn *c = of_parser(p);
    if (!c->in_value) {
        if (buf_append(&c->hdrs, "", 1) != 0) {
            return -1;
        }
        c->in_value = true;
    }
    return hdr_append(c, at, n);
}

static int on_headers_complete(llhttp_t *p)
{
    struct ehttp_conn *c = of_parser(p);
    if (c->nhdr > 0) {
        if (!c->in_value && buf_append(&c->hdrs, "", 1) != 0) {
            return -1; /* a field without value: give it an empty one */
        }
        if (buf_append(&c->hdrs, "", 1) != 0) {
            return -1;
        }
    }
    return 0;
}

static int on_body(llhttp_t *p, const char *at, size_t n)
{
    struct ehttp_conn *c = of_parser(p);
    if (buf_append(&c->resp_body, at, n) != 0) {
        c->over_cap = true;
        return -1;
    }
    return 0;
}

static int on_message_complete(llhttp_t *p)
{
    struct ehttp_conn *c = of_parser(p);
    c->complete = true;
    return HPE_PAUSED;
}

/* Feeds response bytes; finishes the exchange on a complete response or an error. */
static void parse(struct ehttp_conn *c, const char *p, size_t n)
{
    if (c->complete || c->finished) {
        return;
    }
    llhttp_errno_t e = llhttp_execute(&c->parser, p, n);
    if (c->complete) {
        finish(c, 0);
    } else if (e != HPE_OK) {
        bool toobig = c->over_cap;
        fail(c, toobig ? AGENT_E_TOOBIG : AGENT_E_PROTO, "%s:%s: %s: %s", c->host, c->port,
             toobig ? "response over its cap" : "malformed response",
             llhttp_get_error_reason(&c->parser) != NULL ? llhttp_get_error_reason(&c->parser)
                                                         : llhttp_errno_name(e));
    }
}

/* ---- TLS reading ---- */

static int handshake_failed(struct ehttp_conn *c)
{
    long v = SSL_get_verify_result(c->tls.ssl);
    if (v != X509_V_OK) {
        snprintf(c->why, sizeof(c->why), "%s:%s: certificate verification failed: %s", c->host,
                 c->port, X509_verify_cert_error_string(v));
        ERR_clear_error();
        return AGENT_E_UNTRUSTED;
    }
    char r[160];
    ssl_reason(r, sizeof(r));
    snprintf(c->why, sizeof(c->why), "%s:%s: TLS handshake failed: %s", c->host, c->port, r);
    return AGENT_E_PROTO;
}

/* Runs the handshake / decrypts what was fed; returns 0 or an error with c->why set. */
static int tls_advance(struct ehttp_conn *c)
{
    if (c->state == ST_HANDSHAKE) {
        int r = tls_bio_handshake(&c->tls);
        int frc = flush_tls(c);
        if (r == 0) {
            return frc;
        }
        if (r < 0) {
            return handshake_failed(c);
        }
        if (frc != 0) {
            return frc;
        }
        c->state = ST_EXCHANGE;
        int rc = pump_tls(c);
        if (rc != 0) {
            return rc;
        }
    }
    char plain[16384];
    for (;;) {
        size_t got = 0;
        int rc = tls_bio_read(&c->tls, plain, sizeof(plain), &got);
        if (rc == AGENT_E_PROTO) {
            return tls_failed(c);
        }
        if (rc != 0) {
            return rc; /* AGENT_E_CLOSED */
        }
        if (got == 0) {
            return flush_tls(c);
        }
        parse(c, plain, got);
        if (c->finished) {
            return 0;
        }
    }
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    struct ehttp_conn *c = h->data;
    (void)hint;
    *b = uv_buf_init(c->rdbuf, sizeof(c->rdbuf));
}

/* The peer closed: a response delimited by the close is complete now, anything else is not. */
static void on_eof(struct ehttp_conn *c)
{
    if (c->state == ST_EXCHANGE && !c->complete) {
        (void)llhttp_finish(&c->parser); /* completes a body delimited by the close */
    }
    if (c->complete) {
        finish(c, 0);
        return;
    }
    if (c->write_err != 0) {
        fail(c, c->write_err, "%s:%s: sending: %s", c->host, c->port, uv_strerror(c->write_err));
        return;
    }
    fail(c, AGENT_E_CLOSED, "%s:%s: connection closed before a complete response%s", c->host,
         c->port, c->state == ST_HANDSHAKE ? " (in the TLS handshake)" : "");
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    struct ehttp_conn *c = s->data;
    if (c->finished || nread == 0) {
        return;
    }
    if (nread == UV_EOF) {
        on_eof(c);
        return;
    }
    if (nread < 0) {
        int err = c->write_err != 0 ? c->write_err : (int)nread;
        fail(c, err, "%s:%s: %s", c->host, c->port, uv_strerror(err));
        return;
    }
    progress(c);
    if (c->tls.ssl == NULL) {
        parse(c, b->base, (size_t)nread);
        return;
    }
    if (tls_bio_feed(&c->tls, b->base, (size_t)nread) != 0) {
        fail(c, UV_ENOMEM, "%s:%s: out of memory", c->host, c->port);
        return;
    }
    int rc = tls_advance(c);
    if (rc == AGENT_E_CLOSED) {
        on_eof(c);
    } else if (rc != 0) {
        if (c->why[0] == '\0') {
            snprintf(c->why, sizeof(c->why), "%s:%s: %s", c->host, c->port, agent_strerror(rc));
        }
        finish(c, rc);
    }
}

/* ---- connecting ---- */

static bool is_ip(const char *host)
{
    unsigned char a[16];
    return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

static int tls_setup(struct ehttp_conn *c, struct ehttp_tls *t)
{
    if (tls_bio_init(&c->tls, t->ctx, false) != 0) {
        return UV_ENOMEM;
    }
    SSL *ssl = c->tls.ssl;
    int ok;
    if (is_ip(c->host)) {
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), c->host);
    } else {
        ok = SSL_set_tlsext_host_name(ssl, c->host) == 1 && SSL_set1_host(ssl, c->host) == 1;
    }
    ERR_clear_error();
    return ok ? 0 : AGENT_E_INVAL;
}

static void try_connect(struct ehttp_conn *c);

/* The handle of a failed attempt is closed: try the next address (or stop if finished). */
static void on_close_retry(uv_handle_t *h)
{
    struct ehttp_conn *c = h->data;
    c->open_handles--;
    c->tcp_inited = false;
    if (c->finished) {
        maybe_free(c);
        return;
    }
    try_connect(c);
}

static void on_connect(uv_connect_t *req, int status)
{
    struct ehttp_conn *c = req->data;
    if (c->finished) {
        return;
    }
    if (status != 0) {
        c->connect_err = status;
        uv_close((uv_handle_t *)&c->tcp, on_close_retry);
        return;
    }
    progress(c);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc == 0 && c->tls.ssl != NULL) {
        c->state = ST_HANDSHAKE;
        rc = tls_advance(c);
    } else if (rc == 0) {
        c->state = ST_EXCHANGE;
        rc = send_plain(c);
    }
    if (rc != 0 && !c->finished) {
        if (c->why[0] == '\0') {
            snprintf(c->why, sizeof(c->why), "%s:%s: %s", c->host, c->port, agent_strerror(rc));
        }
        finish(c, rc);
    }
}

/* Connects to the next resolved address, or fails with the last error. */
static void try_connect(struct ehttp_conn *c)
{
    while (c->ai_next != NULL) {
        struct addrinfo *ai = c->ai_next;
        c->ai_next = ai->ai_next;
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) {
            continue;
        }
        int rc = uv_tcp_init(c->loop, &c->tcp);
        if (rc != 0) {
            c->connect_err = rc;
            break;
        }
        c->tcp.data = c;
        c->tcp_inited = true;
        c->open_handles++;
        uv_tcp_nodelay(&c->tcp, 1);
        c->connect_req.data = c;
        c->state = ST_CONNECTING;
        rc = uv_tcp_connect(&c->connect_req, &c->tcp, ai->ai_addr, on_connect);
        if (rc != 0) {
            c->connect_err = rc;
            uv_close((uv_handle_t *)&c->tcp, on_close_retry);
        }
        return;
    }
    fail(c, c->connect_err, "%s:%s: cannot connect: %s", c->host, c->port,
         uv_strerror(c->connect_err));
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res)
{
    struct ehttp_conn *c = req->data;
    c->gai_pending = false;
    c->ai_list = res;
    if (c->finished) {
        maybe_free(c);
        return;
    }
    if (status != 0) {
        fail(c, status, "%s: cannot resolve: %s", c->host, uv_strerror(status));
        return;
    }
    progress(c);
    c->ai_next = res;
    c->connect_err = UV_EADDRNOTAVAIL;
    try_connect(c);
}

/* ---- start ---- */

static bool header_ok(const char *s, bool name)
{
    if (s == NULL || (name && s[0] == '\0')) {
        return false;
    }
    for (const char *p = s; *p != '\0'; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '\r' || ch == '\n' || ch == 0x7f || (name && (ch <= ' ' || ch == ':')) ||
            (!name && ch < ' ' && ch != '\t')) {
            return false;
        }
    }
    return true;
}

static int build_head(struct ehttp_conn *c, const struct ehttp_request *rq)
{
    int rc = buf_printf(&c->head, "%s %s HTTP/1.1\r\n", rq->method, rq->target);
    for (size_t i = 0; i < rq->nheaders && rc == 0; i++) {
        if (!header_ok(rq->headers[i].name, true) || !header_ok(rq->headers[i].value, false)) {
            return AGENT_E_INVAL;
        }
        rc = buf_printf(&c->head, "%s: %s\r\n", rq->headers[i].name, rq->headers[i].value);
    }
    bool with_body =
        rq->body_len > 0 || strcmp(rq->method, "PUT") == 0 || strcmp(rq->method, "POST") == 0;
    if (rc == 0 && with_body) {
        rc = buf_printf(&c->head, "Content-Length: %zu\r\n", rq->body_len);
    }
    if (rc == 0) {
        rc = buf_append_str(&c->head, "Connection: close\r\n\r\n");
    }
    return rc;
}

static void parser_init(struct ehttp_conn *c)
{
    llhttp_settings_init(&c->settings);
    c->settings.on_header_field = on_hdr_field;
    c->settings.on_header_value = on_hdr_value;
    c->settings.on_headers_complete = on_headers_complete;
    c->settings.on_body = on_body;
    c->settings.on_message_complete = on_message_complete;
    llhttp_init(&c->parser, HTTP_RESPONSE, &c->settings);
    c->parser.data = c;
}

static bool request_ok(const struct ehttp_request *rq)
{
    return rq->method != NULL && rq->host != NULL && rq->host[0] != '\0' && rq->target != NULL &&
           rq->target[0] == '/' && rq->port != 0 && rq->idle_ms != 0 &&
           (rq->body != NULL || rq->body_len == 0) && strpbrk(rq->target, " \r\n") == NULL &&
           strpbrk(rq->method, " \r\n") == NULL;
}

int ehttp_start(uv_loop_t *loop, const struct ehttp_request *rq, ehttp_done_cb cb, void *ud,
                struct ehttp_conn **out)
{
    if (!request_ok(rq) || cb == NULL) {
        return AGENT_E_INVAL;
    }
    struct ehttp_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return UV_ENOMEM;
    }
    c->loop = loop;
    c->cb = cb;
    c->ud = ud;
    c->body = rq->body;
    c->body_len = rq->body_len;
    c->idle_ms = rq->idle_ms;
    c->total_ms = rq->total_ms;
    buf_init(&c->head, HEAD_MAX);
    buf_init(&c->hdrs, RESP_HDR_MAX);
    buf_init(&c->resp_body, rq->max_body + 1);
    snprintf(c->port, sizeof(c->port), "%u", (unsigned)rq->port);
    c->host = strdup(rq->host);
    int rc = c->host != NULL ? build_head(c, rq) : UV_ENOMEM;
    if (rc == 0 && rq->tls != NULL) {
        rc = tls_setup(c, rq->tls);
    }
    if (rc == 0) {
        rc = uv_timer_init(loop, &c->timer);
    }
    if (rc != 0) {
        c->finished = true;
        conn_free(c);
        return rc;
    }
    c->timer.data = c;
    c->open_handles = 1;
    parser_init(c);
    c->started = c->last_progress = uv_now(loop);
    struct addrinfo hints;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = is_ip(c->host) ? AI_NUMERICHOST : AI_ADDRCONFIG;
    c->gai.data = c;
    rc = uv_getaddrinfo(loop, &c->gai, on_resolved, c->host, c->port, &hints);
    if (rc != 0) {
        c->finished = true;
        uv_close((uv_handle_t *)&c->timer, on_close);
        return rc;
    }
    c->gai_pending = true;
    c->state = ST_RESOLVING;
    uv_timer_start(&c->timer, on_timer, c->idle_ms, 0);
    *out = c;
    return 0;
}

const char *ehttp_response_header(const struct ehttp_response *r, const char *name)
{
    for (size_t i = 0; i < r->nheaders; i++) {
        if (ascii_ieq(r->headers[i].name, name)) {
            return r->headers[i].value;
        }
    }
    return NULL;
}
