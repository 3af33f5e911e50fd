/* SPDX-License-Identifier: MIT */
#include "httpc.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "err.h"

#define HTTPC_HEAD_MAX         ((size_t)64 << 10)
#define HTTPC_LINE_MAX         ((size_t)4096) /* chunk-size and trailer lines */
#define HTTPC_DEFAULT_MAX_BODY ((size_t)512 << 20)
#define HTTPC_READ_CHUNK       ((size_t)64 << 10)

/* Parser results besides 0 (done) and negative errors. */
#define PARSE_NEED_MORE 1

enum body_mode { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };

enum chunk_state { CHUNK_SIZE, CHUNK_DATA, CHUNK_DATA_CRLF, CHUNK_TRAILER };

struct body_state {
    enum body_mode mode;
    enum chunk_state cstate;
    uint64_t remaining; /* BODY_LENGTH: bytes left; BODY_CHUNKED: bytes left in this chunk */
    struct buf body;
    bool done;
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1000.0 + (double)ts.tv_nsec / 1e6;
}

static int remaining_ms(double deadline)
{
    double left = deadline - now_ms();
    return left <= 0 ? 0 : (int)left + 1;
}

static int fail(struct httpc_resp *r, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct httpc_resp *r, int rc, const char *fmt, ...)
{
    if (r && !r->error[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->error, sizeof r->error, fmt, ap);
        va_end(ap);
    }
    return rc;
}

/* ---- response parsing (pure: bytes in, struct httpc_resp out) ------------------------------- */

static bool is_tchar(char ch)
{
    /* RFC 9110 token characters. */
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

static char *dup_range(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, p, n);
        s[n] = '\0';
    }
    return s;
}

static int add_header(struct httpc_resp *r, const char *name, size_t nn, const char *val, size_t vn)
{
    struct httpc_header *h = realloc(r->headers, (r->n_headers + 1) * sizeof *h);
    if (!h) {
        return -ENOMEM;
    }
    r->headers = h;
    h[r->n_headers].name = dup_range(name, nn);
    h[r->n_headers].value = dup_range(val, vn);
    r->n_headers++;
    if (!h[r->n_headers - 1].name || !h[r->n_headers - 1].value) {
        return -ENOMEM;
    }
    return 0;
}

static void clear_head(struct httpc_resp *r)
{
    for (size_t i = 0; i < r->n_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->reason);
    r->headers = NULL;
    r->n_headers = 0;
    r->reason = NULL;
    r->status = 0;
}

/* "HTTP/1.x SSS reason" (RFC 9112 section 4: the space after the code is required). */
static int parse_status_line(const char *l, size_t n, struct httpc_resp *r)
{
    if (n < 13 || memcmp(l, "HTTP/1.", 7) != 0 || (l[7] != '0' && l[7] != '1') || l[8] != ' ' ||
        l[9] < '1' || l[9] > '5' || l[10] < '0' || l[10] > '9' || l[11] < '0' || l[11] > '9' ||
        l[12] != ' ') {
        return fail(r, AGENT_E_PROTO, "bad status line: '%.*s'", (int)(n > 80 ? 80 : n), l);
    }
    r->minor_version = l[7] - '0';
    r->status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
    r->reason = dup_range(l + 13, n - 13);
    return r->reason ? 0 : -ENOMEM;
}

static int parse_header_line(const char *l, size_t n, struct httpc_resp *r)
{
    if (n > 0 && (l[0] == ' ' || l[0] == '\t')) {
        return fail(r, AGENT_E_PROTO, "obsolete header line folding: '%.*s'", (int)n, l);
    }
    size_t nn = 0;
    while (nn < n && is_tchar(l[nn])) {
        nn++;
    }
    if (nn == 0 || nn == n || l[nn] != ':') {
        return fail(r, AGENT_E_PROTO, "bad header line: '%.*s'", (int)(n > 80 ? 80 : n), l);
    }
    const char *v = l + nn + 1;
    size_t vn = n - nn - 1;
    while (vn > 0 && (*v == ' ' || *v == '\t')) {
        v++;
        vn--;
    }
    while (vn > 0 && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) {
        vn--;
    }
    for (size_t i = 0; i < vn; i++) {
        if ((unsigned char)v[i] < 0x20 && v[i] != '\t') {
            return fail(r, AGENT_E_PROTO, "control byte in header '%.*s'", (int)nn, l);
        }
    }
    return add_header(r, l, nn, v, vn);
}

/*
 * Parses a response head at d[0..n). Returns 0 with *head_len (through the blank line),
 * PARSE_NEED_MORE, or an error. Every line must end in CRLF.
 */
static int parse_head(const char *d, size_t n, struct httpc_resp *r, size_t *head_len)
{
    /* Find the end first so a partial head is not parsed twice. */
    size_t pos = 0;
    bool end = false;
    while (pos < n) {
        const char *nl = memchr(d + pos, '\n', n - pos);
        if (!nl) {
            break;
        }
        size_t eol = (size_t)(nl - d);
        if (eol == pos || d[eol - 1] != '\r') {
            return fail(r, AGENT_E_PROTO, "response head line %s without CR before LF",
                        pos == 0 ? "(status line)" : "");
        }
        bool blank = eol == pos + 1;
        pos = eol + 1;
        if (blank && pos > 2) {
            end = true;
            break;
        }
        if (blank) {
            return fail(r, AGENT_E_PROTO, "response starts with an empty line");
        }
    }
    if (!end) {
        return n > HTTPC_HEAD_MAX ? fail(r, AGENT_E_TOOBIG, "response head over 64 KiB")
                                  : PARSE_NEED_MORE;
    }
    *head_len = pos;

    clear_head(r);
    size_t lp = 0;
    bool first = true;
    while (lp < pos) {
        const char *nl = memchr(d + lp, '\n', pos - lp);
        size_t len = (size_t)(nl - (d + lp)) - 1; /* without CRLF */
        if (len == 0) {
            break;
        }
        int rc = first ? parse_status_line(d + lp, len, r) : parse_header_line(d + lp, len, r);
        if (rc != 0) {
            return rc;
        }
        first = false;
        lp = (size_t)(nl - d) + 1;
    }
    return 0;
}

/* True when the comma-separated header value list contains token (case-insensitive). */
static bool list_has_token(const char *list, const char *token)
{
    size_t tn = strlen(token);
    const char *p = list;
    while (p && *p) {
        while (*p == ' ' || *p == '\t' || *p == ',') {
            p++;
        }
        size_t len = strcspn(p, ",");
        size_t trimmed = len;
        while (trimmed > 0 && (p[trimmed - 1] == ' ' || p[trimmed - 1] == '\t')) {
            trimmed--;
        }
        if (trimmed == tn && strncasecmp(p, token, tn) == 0) {
            return true;
        }
        p += len;
    }
    return false;
}

/* Decides how the body is delimited (RFC 9112 section 6.3) and whether the connection stays. */
static int body_framing(struct httpc_resp *r, const char *method, struct body_state *bs)
{
    bs->mode = BODY_CLOSE;
    size_t n_cl = httpc_header_count(r, "Content-Length");
    size_t n_te = httpc_header_count(r, "Transfer-Encoding");
    const char *conn = httpc_header(r, "Connection");
    r->keep_alive = r->minor_version >= 1 ? !(conn && list_has_token(conn, "close"))
                                          : (conn && list_has_token(conn, "keep-alive"));

    if ((method && strcmp(method, "HEAD") == 0) || r->status == 204 || r->status == 304 ||
        (r->status >= 100 && r->status < 200)) {
        bs->mode = BODY_NONE;
        return 0;
    }
    if (n_te > 0 && n_cl > 0) {
        return fail(r, AGENT_E_PROTO, "both Transfer-Encoding and Content-Length");
    }
    if (n_te > 0) {
        if (n_te > 1 || strcasecmp(httpc_header(r, "Transfer-Encoding"), "chunked") != 0) {
            return fail(r, AGENT_E_PROTO, "unexpected Transfer-Encoding '%s'",
                        httpc_header(r, "Transfer-Encoding"));
        }
        bs->mode = BODY_CHUNKED;
        bs->cstate = CHUNK_SIZE;
        r->chunked = true;
        return 0;
    }
    if (n_cl > 0) {
        const char *first = httpc_header(r, "Content-Length");
        for (size_t i = 0; i < r->n_headers; i++) {
            if (strcasecmp(r->headers[i].name, "Content-Length") == 0 &&
                strcmp(r->headers[i].value, first) != 0) {
                return fail(r, AGENT_E_PROTO, "conflicting Content-Length headers");
            }
        }
        uint64_t v = 0;
        if (!*first) {
            return fail(r, AGENT_E_PROTO, "empty Content-Length");
        }
        for (const char *p = first; *p; p++) {
            if (*p < '0' || *p > '9' || v > UINT64_MAX / 10 - 10) {
                return fail(r, AGENT_E_PROTO, "bad Content-Length '%s'", first);
            }
            v = v * 10 + (uint64_t)(*p - '0');
        }
        bs->mode = v ? BODY_LENGTH : BODY_NONE;
        bs->remaining = v;
        return 0;
    }
    r->until_close = true;
    r->keep_alive = false;
    return 0;
}

/* Parses a chunk-size line "HEX[;ext]" (without CRLF). */
static int parse_chunk_size(const char *l, size_t n, uint64_t *out, struct httpc_resp *r)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; i < n; i++) {
        char ch = l[i];
        unsigned digit;
        if (ch >= '0' && ch <= '9') {
            digit = (unsigned)(ch - '0');
        } else if (ch >= 'a' && ch <= 'f') {
            digit = (unsigned)(ch - 'a' + 10);
        } else if (ch >= 'A' && ch <= 'F') {
            digit = (unsigned)(ch - 'A' + 10);
        } else {
            break;
        }
        if (v >> 60) {
            return fail(r, AGENT_E_PROTO, "chunk size overflows");
        }
        v = v << 4 | digit;
    }
    if (i == 0 || (i < n && l[i] != ';' && l[i] != ' ' && l[i] != '\t')) {
        return fail(r, AGENT_E_PROTO, "bad chunk-size line '%.*s'", (int)(n > 40 ? 40 : n), l);
    }
    *out = v;
    return 0;
}

/*
 * Feeds body bytes d[0..n) to bs; *used gets how many were taken. eof: the connection has closed
 * (no more bytes will come). Returns 0 (check bs->done), or an error.
 */
static int body_feed(struct body_state *bs, const char *d, size_t n, bool eof, size_t *used,
                     struct httpc_resp *r)
{
    size_t pos = 0;
    int rc = 0;
    switch (bs->mode) {
    case BODY_NONE:
        bs->done = true;
        break;
    case BODY_CLOSE:
        rc = buf_append(&bs->body, d, n);
        pos = n;
        bs->done = eof;
        break;
    case BODY_LENGTH: {
        size_t take = n < bs->remaining ? n : (size_t)bs->remaining;
        rc = buf_append(&bs->body, d, take);
        pos = take;
        bs->remaining -= take;
        bs->done = bs->remaining == 0;
        if (!bs->done && eof) {
            rc = fail(r, AGENT_E_CLOSED, "connection closed %llu bytes before Content-Length",
                      (unsigned long long)bs->remaining);
        }
        break;
    }
    case BODY_CHUNKED:
        while (rc == 0 && !bs->done && pos < n) {
            if (bs->cstate == CHUNK_DATA) {
                size_t take = n - pos < bs->remaining ? n - pos : (size_t)bs->remaining;
                rc = buf_append(&bs->body, d + pos, take);
                pos += take;
                bs->remaining -= take;
                if (bs->remaining == 0) {
                    bs->cstate = CHUNK_DATA_CRLF;
                }
                continue;
            }
            /* The other states consume whole CRLF-terminated lines. */
            const char *nl = memchr(d + pos, '\n', n - pos);
            if (!nl) {
                if (n - pos > HTTPC_LINE_MAX) {
                    rc = fail(r, AGENT_E_PROTO, "chunk framing line too long");
                }
                break;
            }
            size_t eol = (size_t)(nl - d);
            if (eol == pos || d[eol - 1] != '\r') {
                rc = fail(r, AGENT_E_PROTO, "chunk framing line without CRLF");
                break;
            }
            const char *line = d + pos;
            size_t len = eol - 1 - pos;
            pos = eol + 1;
            if (bs->cstate == CHUNK_DATA_CRLF) {
                if (len != 0) {
                    rc = fail(r, AGENT_E_PROTO, "chunk data longer than its size");
                }
                bs->cstate = CHUNK_SIZE;
            } else if (bs->cstate == CHUNK_SIZE) {
                uint64_t size = 0;
                rc = parse_chunk_size(line, len, &size, r);
                if (rc == 0) {
                    bs->remaining = size;
                    bs->cstate = size ? CHUNK_DATA : CHUNK_TRAILER;
                }
            } else if (len == 0) { /* CHUNK_TRAILER: a blank line ends the message */
                bs->done = true;
            }
        }
        if (rc == 0 && !bs->done && eof) {
            rc = fail(r, AGENT_E_CLOSED, "connection closed inside a chunked body");
        }
        break;
    }
    if (rc == AGENT_E_TOOBIG) {
        fail(r, rc, "body over the client's cap");
    }
    *used = pos;
    return rc;
}

static int finish_body(struct body_state *bs, struct httpc_resp *r)
{
    size_t len = 0;
    r->body = buf_steal(&bs->body, &len);
    if (!r->body) {
        return -ENOMEM;
    }
    r->body_len = len;
    return 0;
}

int httpc_parse(const void *data, size_t n, const char *head_only_method, struct httpc_resp *resp,
                size_t *consumed)
{
    const char *d = data;
    memset(resp, 0, sizeof *resp);
    size_t off = 0;
    for (;;) {
        size_t hl = 0;
        int rc = parse_head(d + off, n - off, resp, &hl);
        if (rc == PARSE_NEED_MORE) {
            return fail(resp, AGENT_E_CLOSED, "incomplete response head (%zu bytes)", n - off);
        }
        if (rc != 0) {
            return rc;
        }
        off += hl;
        if (resp->status >= 200 || resp->status == 101) {
            break;
        }
    }
    struct body_state bs;
    memset(&bs, 0, sizeof bs);
    buf_init(&bs.body, HTTPC_DEFAULT_MAX_BODY);
    size_t used = 0;
    int rc = body_framing(resp, head_only_method, &bs);
    if (rc == 0) {
        rc = body_feed(&bs, d + off, n - off, true, &used, resp);
    }
    if (rc == 0) {
        rc = finish_body(&bs, resp);
    }
    buf_fini(&bs.body);
    if (consumed) {
        *consumed = off + used;
    }
    return rc;
}

/* ---- sockets -------------------------------------------------------------------------------- */

static int connect_to(const char *host, uint16_t port, double deadline, int *fd_out)
{
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    char port_s[8];
    snprintf(port_s, sizeof port_s, "%u", (unsigned)port);
    if (getaddrinfo(host, port_s, &hints, &ai) != 0 || !ai) {
        return -EINVAL;
    }
    int rc = 0;
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            rc = -errno;
            goto out;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr;
        while ((pr = poll(&pfd, 1, remaining_ms(deadline))) < 0 && errno == EINTR) {
        }
        if (pr == 0) {
            rc = AGENT_E_TIMEOUT;
            goto out;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (pr < 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) {
            rc = -errno;
            goto out;
        }
        if (soerr != 0) {
            rc = -soerr;
            goto out;
        }
    }
    *fd_out = fd;
    fd = -1;
out:
    if (fd >= 0) {
        close(fd);
    }
    freeaddrinfo(ai);
    return rc;
}

static int send_all(int fd, const void *data, size_t n, double deadline)
{
    const char *p = data;
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0 && errno != EAGAIN) { /* == EWOULDBLOCK on Linux */
            return -errno;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int pr = poll(&pfd, 1, remaining_ms(deadline));
        if (pr == 0) {
            return AGENT_E_TIMEOUT;
        }
        if (pr < 0 && errno != EINTR) {
            return -errno;
        }
    }
    return 0;
}

/* Reads what is available into in, waiting until the deadline. Returns bytes read (>0), 0 on
 * EOF, AGENT_E_TIMEOUT, or -errno (a reset is reported as -ECONNRESET). */
static ssize_t recv_some(int fd, struct buf *in, double deadline)
{
    for (;;) {
        int rc = buf_reserve(in, HTTPC_READ_CHUNK);
        if (rc != 0) {
            return rc;
        }
        ssize_t r = recv(fd, in->p + in->len, HTTPC_READ_CHUNK, 0);
        if (r >= 0) {
            in->len += (size_t)r;
            return r;
        }
        if (errno == EINTR) {
            continue;
        }
        if (errno != EAGAIN) {
            return -errno;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, remaining_ms(deadline));
        if (pr == 0) {
            return AGENT_E_TIMEOUT;
        }
        if (pr < 0 && errno != EINTR) {
            return -errno;
        }
    }
}

/* ---- client --------------------------------------------------------------------------------- */

void httpc_init(struct httpc *c, const char *host, uint16_t port, int timeout_ms)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    snprintf(c->host, sizeof c->host, "%s", host);
    c->port = port;
    c->timeout_ms = timeout_ms;
    c->max_body = HTTPC_DEFAULT_MAX_BODY;
    buf_init(&c->in, 0);
}

void httpc_disconnect(struct httpc *c)
{
    if (c->fd >= 0) {
        close(c->fd);
        c->fd = -1;
    }
    buf_reset(&c->in);
    c->requests_on_conn = 0;
}

void httpc_fini(struct httpc *c)
{
    httpc_disconnect(c);
    buf_fini(&c->in);
}

static bool has_header(const char *const *headers, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; headers && headers[i]; i++) {
        if (strncasecmp(headers[i], name, n) == 0 && headers[i][n] == ':') {
            return true;
        }
    }
    return false;
}

static int build_request(struct buf *req, const struct httpc *c, const char *method,
                         const char *target, const char *const *headers, const void *body,
                         size_t body_len)
{
    int rc = buf_printf(req, "%s %s HTTP/1.1\r\n", method, target);
    if (rc == 0 && !has_header(headers, "Host")) {
        bool v6 = strchr(c->host, ':') != NULL;
        rc = buf_printf(req, "Host: %s%s%s:%u\r\n", v6 ? "[" : "", c->host, v6 ? "]" : "",
                        (unsigned)c->port);
    }
    for (size_t i = 0; rc == 0 && headers && headers[i]; i++) {
        rc = buf_printf(req, "%s\r\n", headers[i]);
    }
    bool wants_length = body || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                        strcmp(method, "PATCH") == 0;
    if (rc == 0 && wants_length && !has_header(headers, "Content-Length") &&
        !has_header(headers, "Transfer-Encoding")) {
        rc = buf_printf(req, "Content-Length: %zu\r\n", body ? body_len : 0);
    }
    if (rc == 0) {
        rc = buf_append_str(req, "\r\n");
    }
    if (rc == 0 && body && body_len) {
        rc = buf_append(req, body, body_len);
    }
    return rc;
}

/* One attempt: returns 0, an error, or AGENT_E_CLOSED with *nothing_received set when a reused
 * connection was found closed (the caller may retry). */
static int request_once(struct httpc *c, const char *method, const struct buf *req,
                        struct httpc_resp *resp, bool *stale)
{
    double t0 = now_ms();
    double deadline = t0 + (c->timeout_ms > 0 ? c->timeout_ms : 0);
    struct body_state bs;
    memset(&bs, 0, sizeof bs);
    buf_init(&bs.body, c->max_body);
    bool reused = c->fd >= 0;
    size_t in_before = buf_size(&c->in);
    int rc = 0;
    bool head_done = false;
    *stale = false;

    if (c->fd < 0) {
        buf_reset(&c->in);
        c->requests_on_conn = 0;
        rc = connect_to(c->host, c->port, deadline, &c->fd);
        if (rc != 0) {
            fail(resp, rc, "connect to %s:%u: %s", c->host, (unsigned)c->port, agent_strerror(rc));
            goto out;
        }
    }
    c->requests_on_conn++;
    rc = send_all(c->fd, buf_data(req), buf_size(req), deadline);
    if (rc != 0) {
        *stale = reused && (rc == -EPIPE || rc == -ECONNRESET);
        fail(resp, rc, "send: %s", agent_strerror(rc));
        goto out;
    }

    bool eof = false;
    for (;;) {
        if (!head_done) {
            size_t hl = 0;
            rc = parse_head((const char *)buf_data(&c->in), buf_size(&c->in), resp, &hl);
            if (rc == 0) {
                buf_consume(&c->in, hl);
                if (resp->status < 200 && resp->status != 101) {
                    continue; /* an interim 1xx response: the real one follows */
                }
                resp->ttfb_ms = now_ms() - t0;
                head_done = true;
                rc = body_framing(resp, method, &bs);
                if (rc != 0) {
                    goto out;
                }
            } else if (rc != PARSE_NEED_MORE) {
                goto out;
            } else if (eof) {
                *stale = reused && buf_size(&c->in) == 0 && in_before == 0;
                rc = fail(resp, AGENT_E_CLOSED, "connection closed after %zu bytes of the head",
                          buf_size(&c->in));
                goto out;
            }
        }
        if (head_done) {
            size_t used = 0;
            rc = body_feed(&bs, (const char *)buf_data(&c->in), buf_size(&c->in), eof, &used, resp);
            buf_consume(&c->in, used);
            if (rc != 0 || bs.done) {
                break;
            }
        }
        ssize_t r = recv_some(c->fd, &c->in, deadline);
        if (r == 0 || r == -ECONNRESET) {
            eof = true;
        } else if (r < 0) {
            rc = fail(resp, (int)r, "receive: %s (status %d, %zu body bytes so far)",
                      agent_strerror((int)r), resp->status, buf_size(&bs.body));
            goto out;
        }
    }
    if (rc == 0) {
        rc = finish_body(&bs, resp);
        resp->latency_ms = now_ms() - t0;
        if (eof || !resp->keep_alive) {
            httpc_disconnect(c);
        }
    }
out:
    if (rc != 0) {
        httpc_disconnect(c);
    }
    if (rc == AGENT_E_CLOSED && head_done && resp->body == NULL) {
        (void)finish_body(&bs, resp); /* a cut transfer: keep what arrived for the caller */
    }
    buf_fini(&bs.body);
    return rc;
}

int httpc_request(struct httpc *c, const char *method, const char *target,
                  const char *const *headers, const void *body, size_t body_len,
                  struct httpc_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    struct buf req;
    buf_init(&req, 0);
    int rc = build_request(&req, c, method, target, headers, body, body_len);
    if (rc != 0) {
        fail(resp, rc, "building the request: %s", agent_strerror(rc));
        goto out;
    }
    bool stale = false;
    rc = request_once(c, method, &req, resp, &stale);
    if (rc != 0 && stale) {
        /* The server had closed the idle keep-alive connection: one retry, fresh socket. */
        httpc_resp_fini(resp);
        rc = request_once(c, method, &req, resp, &stale);
    }
out:
    buf_fini(&req);
    return rc;
}

int httpc_fetch(uint16_t port, const char *method, const char *target, const char *const *headers,
                const void *body, size_t body_len, int timeout_ms, struct httpc_resp *resp)
{
    struct httpc c;
    httpc_init(&c, "127.0.0.1", port, timeout_ms);
    int rc = httpc_request(&c, method, target, headers, body, body_len, resp);
    httpc_fini(&c);
    return rc;
}

int httpc_get(uint16_t port, const char *target, const char *const *headers, int timeout_ms,
              struct httpc_resp *resp)
{
    return httpc_fetch(port, "GET", target, headers, NULL, 0, timeout_ms, resp);
}

const char *httpc_header(const struct httpc_resp *r, const char *name)
{
    for (size_t i = 0; i < r->n_headers; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0) {
            return r->headers[i].value;
        }
    }
    return NULL;
}

size_t httpc_header_count(const struct httpc_resp *r, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < r->n_headers; i++) {
        if (strcasecmp(r->headers[i].name, name) == 0) {
            n++;
        }
    }
    return n;
}

bool httpc_content_type_is(const struct httpc_resp *r, const char *type)
{
    const char *ct = httpc_header(r, "Content-Type");
    if (!ct) {
        return false;
    }
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t')) {
        n--;
    }
    return n == strlen(type) && strncasecmp(ct, type, n) == 0;
}

void httpc_resp_fini(struct httpc_resp *r)
{
    clear_head(r);
    free(r->body);
    memset(r, 0, sizeof *r);
}

int httpc_raw(uint16_t port, const void *data, size_t n, bool half_close, int timeout_ms,
              struct buf *out)
{
    double deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    int fd = -1;
    int rc = connect_to("127.0.0.1", port, deadline, &fd);
    if (rc != 0) {
        return rc;
    }
    rc = send_all(fd, data, n, deadline);
    if (rc == -EPIPE || rc == -ECONNRESET) {
        rc = 0; /* the server gave up on us mid-request: read what it said */
    } else if (rc != 0) {
        goto out;
    }
    if (half_close) {
        shutdown(fd, SHUT_WR);
    }
    for (;;) {
        ssize_t r = recv_some(fd, out, deadline);
        if (r == 0 || r == -ECONNRESET) {
            rc = 0;
            break;
        }
        if (r < 0) {
            rc = (int)r;
            break;
        }
    }
out:
    close(fd);
    return rc;
}
