/* SPDX-License-Identifier: MIT */
#include "http_parse.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "http_proto.h"

/*
 * llhttp calls back into this file for every piece of a request; the callbacks only copy bytes
 * and record decisions (a refusal is a status and a static detail), and http_parse_execute turns
 * llhttp's result into one event. on_headers_complete and on_message_complete pause llhttp, so
 * the caller sees the head before the body (to send "100 Continue") and one request at a time.
 */

enum { LINE_NONE = 0, LINE_NAME, LINE_VALUE };

/* Bytes of an incomplete head that no callback sees (leading CRLFs, whitespace) still count:
 * past the URL and header limits plus this slack the head is refused with 431. */
#define PARSE_RAW_SLACK 4096

/* Refuses the request from inside a callback: llhttp stops with an error and
 * http_parse_execute reports this status. */
static int refuse(struct http_parse *p, int status, const char *detail)
{
    p->status = status;
    p->detail = detail;
    return HPE_USER;
}

static struct http_parse *parse_of(llhttp_t *l)
{
    return l->data;
}

static void head_append(struct http_parse *p, const char *at, size_t n, int *rc)
{
    if (*rc == 0 && !p->head_done) {
        *rc = buf_append(&p->msg->head, at, n);
    }
}

/* The URL is the first string in the head buffer; terminate it before the first header. */
static int url_finish(struct http_parse *p)
{
    struct http_msg *m = p->msg;
    if (m->url_done) {
        return 0;
    }
    m->url_done = true;
    return buf_append(&m->head, "", 1);
}

/* Ends the current header line: terminates the name (if the value never started) and the
 * value, dropping trailing whitespace (llhttp keeps it; RFC 9110 §5.5 excludes it). */
static int line_finish(struct http_parse *p)
{
    int rc = 0;
    if (p->line == LINE_NAME) {
        head_append(p, "", 1, &rc);
        p->value_off = p->msg->head.len;
        p->line = LINE_VALUE;
    }
    if (p->line == LINE_VALUE) {
        if (!p->head_done) {
            struct buf *h = &p->msg->head;
            while (h->len > p->value_off && (h->p[h->len - 1] == ' ' || h->p[h->len - 1] == '\t')) {
                h->len--;
            }
        }
        head_append(p, "", 1, &rc);
        p->line = LINE_NONE;
    }
    return rc;
}

/*
 * Whether the bytes llhttp skipped between the end of the current header name and `end` hold an
 * obs-fold: a line break followed by SP or HTAB. (A line break alone is fine: the empty span of
 * an empty value starts after its own CRLF.) The skipped bytes may straddle inputs:
 * http_parse_execute carries the state of earlier inputs in gap_lf / gap_fold, since their bytes
 * are gone by then.
 */
static bool gap_scan(const struct http_parse *p, const char *end, bool *ends_lf)
{
    const char *from = p->gap_from != NULL ? p->gap_from : p->exec_start;
    bool lf = p->gap_lf;
    bool fold = p->gap_fold;
    for (const char *q = from; q != NULL && q < end && !fold; q++) {
        fold = lf && (*q == ' ' || *q == '\t');
        lf = *q == '\n';
    }
    *ends_lf = lf;
    return fold;
}

static struct http_msg *msg_new(const struct http_parse_limits *lim)
{
    struct http_msg *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return NULL;
    }
    m->method = "";
    m->target = m->path = m->query = "";
    /* URL, NULs and header bytes are capped by the callbacks; path and query copies add at most
     * one more URL. */
    buf_init(&m->head, 2 * lim->max_url + lim->max_header_bytes + 2 * lim->max_headers + 64);
    buf_init(&m->body, lim->max_body);
    return m;
}

static int parse_on_message_begin(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    p->status = 0;
    p->detail = NULL;
    p->header_bytes = 0;
    p->chunk_ext_bytes = 0;
    p->nheaders = 0;
    p->line = LINE_NONE;
    p->value_spans = 0;
    p->gap_from = NULL;
    p->gap_lf = false;
    p->gap_fold = false;
    p->head_done = false;
    p->version_len = 0;
    assert(p->msg == NULL);
    p->msg = msg_new(&p->lim);
    if (p->msg == NULL) {
        return refuse(p, 503, "out of memory");
    }
    return 0;
}

static int parse_on_url(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    struct http_msg *m = p->msg;
    m->is_head = llhttp_get_method(l) == HTTP_HEAD;
    if (n > p->lim.max_url - m->url_len) {
        return refuse(p, 414, "request target too long");
    }
    m->url_len += n;
    if (buf_append(&m->head, at, n) != 0) {
        return refuse(p, 503, "out of memory");
    }
    return 0;
}

static int parse_on_url_complete(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    return url_finish(p) == 0 ? 0 : refuse(p, 503, "out of memory");
}

static int parse_on_version(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    for (size_t i = 0; i < n && p->version_len < sizeof(p->version) - 1; i++) {
        p->version[p->version_len++] = at[i];
    }
    p->version[p->version_len] = '\0';
    return 0;
}

/* Counts a piece of the header section against max_header_bytes (trailers count too). */
static int count_header_bytes(struct http_parse *p, size_t n)
{
    if (n > p->lim.max_header_bytes - p->header_bytes) {
        return refuse(p, 431, "request header section too large");
    }
    p->header_bytes += n;
    return 0;
}

static int parse_on_header_field(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    int rc = 0;
    if (p->line == LINE_VALUE) {
        rc = line_finish(p); /* llhttp did not report the previous value as complete */
    }
    if (p->line == LINE_NONE) {
        if (++p->nheaders > p->lim.max_headers) {
            return refuse(p, 431, "too many header fields");
        }
        if (count_header_bytes(p, 4) != 0) { /* ": " and CRLF */
            return HPE_USER;
        }
        if (rc == 0 && !p->head_done) {
            rc = url_finish(p);
        }
        p->line = LINE_NAME;
        p->name_len = 0;
        p->name_bad = false;
    }
    if (count_header_bytes(p, n) != 0) {
        return HPE_USER;
    }
    /* llhttp 8 lets "Name :" (and, in trailers, "Na me") through; RFC 9112 §5.1 says 400. The
     * refusal waits for the end of the name: llhttp may refuse the same bytes itself further
     * on, and the answer must not depend on where the input was split. */
    if (n > 0 && !http__is_token(at, n)) {
        p->name_bad = true;
    }
    p->name_len += n;
    p->gap_from = at + n;
    p->gap_lf = false;
    p->gap_fold = false;
    head_append(p, at, n, &rc);
    return rc == 0 ? 0 : refuse(p, 503, "out of memory");
}

static int parse_on_header_field_complete(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    int rc = 0;
    if (p->line == LINE_NAME && p->name_len == 0) {
        return refuse(p, 400, "empty header field name");
    }
    if (p->line == LINE_NAME && p->name_bad) {
        return refuse(p, 400, "invalid header field name");
    }
    if (p->line == LINE_NAME) {
        head_append(p, "", 1, &rc);
        p->value_off = p->msg->head.len;
        p->line = LINE_VALUE;
        p->value_spans = 0;
    }
    return rc == 0 ? 0 : refuse(p, 503, "out of memory");
}

static int parse_on_header_value(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    if (p->line == LINE_NAME && parse_on_header_field_complete(l) != 0) {
        return HPE_USER;
    }
    bool lf;
    if (p->value_spans == 0 &&
        (gap_scan(p, at, &lf) || (n > 0 && (at[0] == ' ' || at[0] == '\t')))) {
        /* llhttp's skip of the whitespace before a value also swallows an obs-fold right after
         * the colon ("X:\r\n b"): look at the skipped bytes themselves. */
        return refuse(p, 400, "obsolete line folding in a header field");
    }
    if (p->value_spans > 0) {
        /*
         * llhttp reports one value in several spans in two cases: the value straddles two inputs,
         * or an obs-fold (CRLF then SP/HTAB) continues it, which llhttp 8 accepts. Spans of a
         * straddling value touch the ends of their inputs; a fold leaves its CRLF between them.
         * RFC 9112 §5.2: reject obs-fold with 400.
         */
        if (!p->last_value_at_end || at != p->exec_start) {
            return refuse(p, 400, "obsolete line folding in a header field");
        }
    }
    p->value_spans++;
    p->last_value_at_end = at + n == p->exec_end;
    if (count_header_bytes(p, n) != 0) {
        return HPE_USER;
    }
    int rc = 0;
    head_append(p, at, n, &rc);
    return rc == 0 ? 0 : refuse(p, 503, "out of memory");
}

static int parse_on_header_value_complete(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    return line_finish(p) == 0 ? 0 : refuse(p, 503, "out of memory");
}

/*
 * Walks url\0 (name\0value\0)* in the head buffer: header names, Host count, framing headers
 * llhttp ignored, and the Expect value. Returns 0 or an HTTP status.
 */
static int check_fields(const struct http_parse *p, const char **expect, const char **detail)
{
    const llhttp_t *l = &p->llhttp;
    const struct http_msg *m = p->msg;
    const char *h = (const char *)buf_data(&m->head);
    size_t len = buf_size(&m->head);
    size_t off = m->url_len + 1;
    size_t hosts = 0;
    for (size_t i = 0; i < p->nheaders; i++) {
        const char *name = h + off;
        size_t nl = strnlen(name, len - off);
        const char *value = name + nl + 1;
        size_t vl = strnlen(value, len - off - nl - 1);
        if (!http__is_token(name, nl)) {
            /* llhttp 8 lets "Name :" and ": value" through; RFC 9112 §5.1 says 400. */
            *detail = "invalid header field name";
            return 400;
        }
        if (strcasecmp(name, "host") == 0) {
            hosts++;
        } else if (strcasecmp(name, "expect") == 0) {
            *expect = value;
        } else if ((strcasecmp(name, "transfer-encoding") == 0 &&
                    !(l->flags & F_TRANSFER_ENCODING)) ||
                   (strcasecmp(name, "content-length") == 0 && !(l->flags & F_CONTENT_LENGTH))) {
            /* llhttp ignores an empty Transfer-Encoding (or Content-Length): framing that a
             * proxy in front of us may read differently. RFC 9112 §6.3: refuse. */
            *detail = "invalid message framing header";
            return 400;
        }
        off += nl + 1 + vl + 1;
    }
    if (hosts > 1 || (hosts == 0 && m->http_minor == 1)) {
        /* RFC 9112 §3.2: exactly one Host in HTTP/1.1, at most one otherwise. */
        *detail = hosts ? "more than one Host header" : "missing Host header";
        return 400;
    }
    return 0;
}

int http__msg_set_strings(struct http_msg *m, size_t nheaders, size_t path_off, size_t path_len,
                          size_t query_off, size_t query_len)
{
    /* Reserve first: appending from the buffer's own bytes must not move them mid-copy. */
    int rc = buf_reserve(&m->head, path_len + query_len + 3);
    const char *h = (const char *)buf_data(&m->head);
    size_t path_at = buf_size(&m->head);
    if (path_len > 0) {
        rc = rc ? rc : buf_append(&m->head, h + path_off, path_len);
    } else {
        rc = rc ? rc : buf_append(&m->head, "/", 1); /* "http://host" means "/" */
    }
    rc = rc ? rc : buf_append(&m->head, "", 1);
    size_t query_at = buf_size(&m->head);
    rc = rc ? rc : buf_append(&m->head, h + query_off, query_len);
    rc = rc ? rc : buf_append(&m->head, "", 1);
    if (rc == 0 && nheaders > 0) {
        m->headers = calloc(nheaders, sizeof(*m->headers));
        rc = m->headers ? 0 : -ENOMEM;
    }
    if (rc != 0) {
        return rc;
    }
    h = (const char *)buf_data(&m->head);
    m->target = h;
    m->path = h + path_at;
    m->query = h + query_at;
    size_t off = m->url_len + 1;
    for (size_t i = 0; i < nheaders; i++) {
        m->headers[i].name = h + off;
        off += strlen(h + off) + 1;
        m->headers[i].value = h + off;
        off += strlen(h + off) + 1;
    }
    m->nheaders = nheaders;
    return 0;
}

/*
 * The head is complete: check what llhttp leaves to us (RFC 9112 rules it does not enforce in
 * its default mode), then turn the head buffer into the request's strings.
 * Returns 0 or an HTTP status.
 */
static int finish_head(struct http_parse *p, const char **detail)
{
    llhttp_t *l = &p->llhttp;
    struct http_msg *m = p->msg;
    m->http_major = llhttp_get_http_major(l);
    m->http_minor = llhttp_get_http_minor(l);
    uint8_t method = llhttp_get_method(l);
    m->method = llhttp_method_name((llhttp_method_t)method);
    m->is_head = method == HTTP_HEAD;
    if (m->http_major != 1) {
        *detail = "only HTTP/1.0 and HTTP/1.1 are supported";
        return 505;
    }
    if (method == HTTP_CONNECT) {
        *detail = "CONNECT is not supported";
        return 405;
    }
    if (m->http_minor == 0 && (l->flags & F_TRANSFER_ENCODING)) {
        /* RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding has faulty framing. */
        *detail = "Transfer-Encoding in an HTTP/1.0 request";
        return 400;
    }
    const char *expect = NULL;
    int status = check_fields(p, &expect, detail);
    if (status != 0) {
        return status;
    }
    size_t path_off, path_len, query_off, query_len;
    if (http__split_target((const char *)buf_data(&m->head), m->url_len, method == HTTP_OPTIONS,
                           &path_off, &path_len, &query_off, &query_len) != 0) {
        *detail = "invalid request target";
        return 400;
    }
    if ((l->flags & F_CONTENT_LENGTH) && l->content_length > p->lim.max_body) {
        *detail = "request body too large";
        return 413; /* answered before a single body byte is read */
    }
    if (expect != NULL) {
        if (strcasecmp(expect, "100-continue") != 0) {
            *detail = "unsupported expectation";
            return 417;
        }
        bool has_body = (l->flags & F_CHUNKED) || l->content_length > 0;
        m->expect_continue = has_body && m->http_minor == 1;
    }
    if (http__msg_set_strings(m, p->nheaders, path_off, path_len, query_off, query_len) != 0) {
        *detail = "out of memory";
        return 503;
    }
    return 0;
}

static int parse_on_headers_complete(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    if (line_finish(p) != 0 || url_finish(p) != 0) {
        refuse(p, 503, "out of memory");
        return -1;
    }
    p->head_done = true;
    p->in_head = false;
    p->raw_head = 0;
    const char *detail = NULL;
    int status = finish_head(p, &detail);
    if (status != 0) {
        refuse(p, status, detail);
        return -1;
    }
    /* We never switch protocols: serve "Upgrade: websocket" requests as plain HTTP, and keep
     * parsing what follows as HTTP instead of pausing for an upgrade (CONNECT is refused above). */
    l->upgrade = 0;
    p->paused_head = true;
    return HPE_PAUSED; /* the caller sees the head before the body (100 Continue) */
}

static int parse_on_body(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    int rc = buf_append(&p->msg->body, at, n);
    if (rc == AGENT_E_TOOBIG) {
        return refuse(p, 413, "request body too large"); /* chunked bodies end up here */
    }
    return rc == 0 ? 0 : refuse(p, 503, "out of memory");
}

/* Chunk extensions are dropped, but bounded: otherwise a client could stream them forever
 * inside one chunk-size line. */
static int parse_on_chunk_extension(llhttp_t *l, const char *at, size_t n)
{
    struct http_parse *p = parse_of(l);
    (void)at;
    if (n > p->lim.max_chunk_ext - p->chunk_ext_bytes) {
        return refuse(p, 400, "chunk extensions too large");
    }
    p->chunk_ext_bytes += n;
    return 0;
}

static int parse_on_message_complete(llhttp_t *l)
{
    struct http_parse *p = parse_of(l);
    p->msg->keep_alive = llhttp_should_keep_alive(l) != 0;
    p->paused_msg = true;
    return HPE_PAUSED; /* one request at a time: the rest of the input waits */
}

static const llhttp_settings_t parse_settings = {
    .on_message_begin = parse_on_message_begin,
    .on_url = parse_on_url,
    .on_url_complete = parse_on_url_complete,
    .on_version = parse_on_version,
    .on_header_field = parse_on_header_field,
    .on_header_field_complete = parse_on_header_field_complete,
    .on_header_value = parse_on_header_value,
    .on_header_value_complete = parse_on_header_value_complete,
    .on_headers_complete = parse_on_headers_complete,
    .on_body = parse_on_body,
    .on_chunk_extension_name = parse_on_chunk_extension,
    .on_chunk_extension_value = parse_on_chunk_extension,
    .on_message_complete = parse_on_message_complete,
};

void http_parse_init(struct http_parse *p, const struct http_parse_limits *lim)
{
    memset(p, 0, sizeof(*p));
    p->lim = *lim;
    p->in_head = true;
    llhttp_init(&p->llhttp, HTTP_REQUEST, &parse_settings);
    p->llhttp.data = p;
}

void http_parse_fini(struct http_parse *p)
{
    http_msg_free(p->msg);
    p->msg = NULL;
}

/* Maps an llhttp failure to a status: 505 for versions we do not speak, 400 for the rest. */
static int status_for_llhttp_error(const struct http_parse *p, llhttp_errno_t err)
{
    if (err == HPE_PAUSED_H2_UPGRADE) {
        return 505; /* the HTTP/2 connection preface, "PRI * HTTP/2.0" */
    }
    if (err == HPE_INVALID_VERSION && p->version_len == 3 && p->version[0] >= '0' &&
        p->version[0] <= '9' && p->version[1] == '.' && p->version[2] >= '0' &&
        p->version[2] <= '9') {
        return 505; /* well-formed, just not one llhttp accepts (HTTP/1.2, HTTP/3.0) */
    }
    return 400;
}

/*
 * llhttp failed inside a span (URL, header name or value, chunk extension): it drops the span's
 * bytes up to the failure without reporting them, where an input split inside the span would
 * have reported the part before the split. Reporting them here makes the limits and rules the
 * callbacks apply see the same bytes however the input was split: a header section over its
 * limit is 431 whether or not llhttp finds a bad byte further on in the same token.
 * (_span_pos0/_span_cb0 are llhttp's own, set by its span nodes; the callback has the shape of
 * the one llhttp calls at the end of an input.)
 */
static void flush_span(struct http_parse *p)
{
    llhttp_t *l = &p->llhttp;
    const char *end = llhttp_get_error_pos(l);
    int (*cb)(llhttp_t *, const char *, const char *);
    _Static_assert(sizeof(cb) == sizeof(l->_span_cb0), "a function pointer fits a void *");
    if (l->_span_pos0 == NULL || l->_span_cb0 == NULL || end == NULL) {
        return;
    }
    const char *start = l->_span_pos0;
    memcpy(&cb, &l->_span_cb0, sizeof(cb));
    l->_span_pos0 = NULL;
    if (start >= p->exec_start && start <= end && end <= p->exec_end) {
        (void)cb(l, start, end);
    }
}

static enum http_parse_event fail(struct http_parse *p, int status, const char *detail)
{
    p->status = status;
    p->detail = detail != NULL ? detail : "malformed request";
    return HTTP_PARSE_ERROR;
}

enum http_parse_event http_parse_execute(struct http_parse *p, const char *data, size_t n,
                                         size_t *used)
{
    *used = 0;
    if (p->status != 0) {
        return HTTP_PARSE_ERROR; /* refused for good */
    }
    bool after_head = p->paused_head;
    if (p->paused_msg) {
        /* The caller is ready for the next request. */
        http_msg_free(p->msg);
        p->msg = NULL;
        p->paused_msg = false;
        p->in_head = true;
        p->raw_head = 0;
        llhttp_resume(&p->llhttp);
    } else if (p->paused_head) {
        p->paused_head = false;
        llhttp_resume(&p->llhttp);
    }
    /* After a head, llhttp has to run even on no bytes: a request without a body completes. */
    if (n == 0 && !after_head) {
        return HTTP_PARSE_MORE;
    }
    if (data == NULL) {
        data = "";
    }
    /* While the head is incomplete, feed no more than one byte past the raw-head limit: the
     * limit then trips at the same byte however the input is split (a single llhttp_execute
     * over a larger input would reach a later error, or none, first). */
    size_t raw_limit = p->lim.max_url + p->lim.max_header_bytes + PARSE_RAW_SLACK;
    if (p->in_head && n > raw_limit - p->raw_head + 1) {
        n = raw_limit - p->raw_head + 1;
    }
    p->exec_start = data;
    p->exec_end = data + n;
    llhttp_errno_t err = llhttp_execute(&p->llhttp, data, n);
    if (err != HPE_OK && err != HPE_PAUSED && p->status == 0) {
        flush_span(p);
    }
    if (p->line == LINE_VALUE && p->value_spans == 0) {
        /* The input ended between a header name and its value: carry what the skipped bytes
         * held over to the next input (see gap_scan). */
        bool lf = false;
        p->gap_fold = gap_scan(p, p->exec_end, &lf);
        p->gap_lf = lf;
    }
    p->gap_from = NULL; /* points into this input only */
    p->exec_start = p->exec_end = NULL;

    if (err == HPE_OK) {
        *used = n;
        if (p->in_head) {
            /* Bytes llhttp skips without a callback (leading CRLFs, whitespace) would escape
             * max_header_bytes; bound the raw size of an incomplete head as well. */
            p->raw_head += n;
            if (p->raw_head > raw_limit) {
                return fail(p, 431, "request head too large");
            }
        }
        return HTTP_PARSE_MORE;
    }
    if (err == HPE_PAUSED && (p->paused_head || p->paused_msg)) {
        *used = (size_t)(llhttp_get_error_pos(&p->llhttp) - data);
        return p->paused_msg ? HTTP_PARSE_MESSAGE : HTTP_PARSE_HEAD;
    }
    p->paused_head = p->paused_msg = false;
    if (p->status != 0) {
        return fail(p, p->status, p->detail);
    }
    /* static text, never request bytes */
    return fail(p, status_for_llhttp_error(p, err), llhttp_get_error_reason(&p->llhttp));
}

const struct http_msg *http_parse_msg(const struct http_parse *p)
{
    return p->msg;
}

struct http_msg *http_parse_take(struct http_parse *p)
{
    if (!p->paused_msg) {
        return NULL;
    }
    struct http_msg *m = p->msg;
    p->msg = NULL;
    return m;
}

int http_parse_error(const struct http_parse *p, const char **detail)
{
    if (detail != NULL) {
        *detail = p->detail;
    }
    return p->status;
}

bool http_parse_started(const struct http_parse *p)
{
    return p->msg != NULL && !p->paused_msg;
}

bool http_parse_idle(const struct http_parse *p)
{
    return (p->msg == NULL || p->paused_msg) && p->raw_head == 0 && p->status == 0;
}

bool http_parse_is_head(const struct http_parse *p)
{
    return p->msg != NULL && p->msg->is_head;
}

void http_msg_free(struct http_msg *m)
{
    if (m == NULL) {
        return;
    }
    buf_fini(&m->head);
    buf_fini(&m->body);
    free(m->headers);
    free(m);
}

const char *http_msg_header(const struct http_msg *m, const char *name)
{
    for (size_t i = 0; i < m->nheaders; i++) {
        if (strcasecmp(m->headers[i].name, name) == 0) {
            return m->headers[i].value;
        }
    }
    return NULL;
}

size_t http_msg_header_count(const struct http_msg *m, const char *name)
{
    size_t n = 0;
    for (size_t i = 0; i < m->nheaders; i++) {
        if (strcasecmp(m->headers[i].name, name) == 0) {
            n++;
        }
    }
    return n;
}
