/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_PARSE_H
#define AGENT_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "buf.h"

/*
 * The request parser and the request-head policy, pure: bytes in, events out (no libuv, no
 * sockets, no TLS, no clock). llhttp does the tokenising; this file adds what llhttp leaves to
 * its user or lets through in its default mode:
 *   - limits: request target (414), header section and header count (431), body (413, checked
 *     against Content-Length before any body byte, and while a chunked body grows), chunk
 *     extensions (400), bytes of an incomplete head that no callback sees (431);
 *   - header fields: names must be tokens ("Name :", ": v", "Na me" → 400), no obs-fold (400),
 *     exactly one Host in HTTP/1.1 and at most one in HTTP/1.0 (400), an empty Content-Length or
 *     Transfer-Encoding that llhttp ignores (400), Transfer-Encoding in HTTP/1.0 (400);
 *   - the request line: HTTP/2 preface and well-formed versions other than 1.0/1.1 (505),
 *     CONNECT (405), a target that is not origin-, absolute- or asterisk-form (400);
 *   - Expect: "100-continue" is noted (http_msg.expect_continue), anything else 417;
 *   - Upgrade is never honoured: what follows the head is parsed as HTTP/1.1.
 * Header values lose their trailing whitespace (RFC 9110 §5.5). Repeated fields are all kept
 * (http_msg_header_count tells how many; agent/ refuses two Authorization headers with 400).
 *
 * One request at a time: after HTTP_PARSE_MESSAGE the bytes behind it are not looked at until
 * the caller feeds them again (pipelining is served in order by the connection). The outcome
 * does not depend on how the input is split across calls (tests/fuzz/fuzz_http_parse.c checks
 * this).
 */

/* One header field of a parsed request; both strings live in the request's head buffer. */
struct http_field {
    const char *name;
    const char *value;
};

/* A parsed request. Every string is NUL-terminated and stays valid until http_msg_free. */
struct http_msg {
    /* url\0 then name\0value\0 pairs, then path\0 query\0; the pointers below are set once the
     * head is complete (the buffer never moves afterwards). */
    struct buf head;
    size_t url_len;
    bool url_done; /* the URL's NUL is in head */
    const char *method;
    const char *target; /* as received */
    const char *path;   /* of target, not decoded; "/" for "http://host" */
    const char *query;  /* after '?', not decoded; "" when absent */
    struct http_field *headers;
    size_t nheaders;
    struct buf body; /* decoded (chunked framing removed) */
    uint8_t http_major;
    uint8_t http_minor;
    bool is_head;         /* HEAD: responses carry no body */
    bool keep_alive;      /* llhttp_should_keep_alive at message end */
    bool expect_continue; /* "Expect: 100-continue" with a body in HTTP/1.1 */
};

struct http_parse_limits {
    size_t max_url;          /* request target bytes → 414 */
    size_t max_header_bytes; /* names + values + 4 per line, trailers too → 431 */
    size_t max_headers;      /* header lines → 431 */
    size_t max_body;         /* → 413 */
    size_t max_chunk_ext;    /* chunk-extension bytes per request (parsed and dropped) → 400 */
};

enum http_parse_event {
    HTTP_PARSE_MORE = 0, /* every byte was consumed: feed more */
    HTTP_PARSE_HEAD,     /* a request head is complete and accepted (http_parse_msg): call again
                            with the bytes after *used, even when there are none */
    HTTP_PARSE_MESSAGE,  /* a request is complete: http_parse_take; the bytes after *used belong
                            to the next request (feed them when ready for it) */
    HTTP_PARSE_ERROR     /* refused: http_parse_error; every later call returns this again */
};

/* Parser state; embed it, do not move it after http_parse_init. Fields are private. */
struct http_parse {
    llhttp_t llhttp;
    struct http_parse_limits lim;
    struct http_msg *msg; /* the request being parsed (owned), NULL between requests */
    int status;           /* of the refusal, once refused */
    const char *detail;   /* static string */
    bool paused_head;     /* llhttp is paused after on_headers_complete */
    bool paused_msg;      /* llhttp is paused after on_message_complete */
    bool in_head;         /* the current request's head is not complete yet */
    size_t raw_head;      /* bytes fed while the head was incomplete */
    size_t header_bytes;  /* against max_header_bytes */
    size_t chunk_ext_bytes;
    size_t nheaders;
    int line;               /* where in a header line we are (enum in http_parse.c) */
    size_t name_len;        /* bytes of the current header name */
    bool name_bad;          /* it holds a byte that is not a tchar */
    const char *gap_from;   /* end of the last name span, in the current input only */
    bool gap_lf;            /* the skipped bytes so far end with LF */
    bool gap_fold;          /* the skipped bytes so far hold an obs-fold */
    size_t value_off;       /* offset of the current value in msg->head */
    unsigned value_spans;   /* llhttp spans seen for the current value */
    bool last_value_at_end; /* the last value span ended at the end of the fed data */
    bool head_done;         /* on_headers_complete ran (later fields are trailers) */
    char version[8];
    size_t version_len;
    const char *exec_start; /* bounds of the bytes given to the running llhttp_execute */
    const char *exec_end;
};

/* Starts a parser for requests. lim is copied; every field must be > 0. */
void http_parse_init(struct http_parse *p, const struct http_parse_limits *lim);
/* Frees the request being parsed, if any. Safe to call twice. */
void http_parse_fini(struct http_parse *p);

/*
 * Parses data[0..n). Stops at the first event; *used tells how many bytes were consumed (all of
 * them for HTTP_PARSE_MORE; for HTTP_PARSE_ERROR the rest is meaningless). The parser keeps no
 * pointer into data after returning. The previous event's request, if never taken, is freed.
 */
enum http_parse_event http_parse_execute(struct http_parse *p, const char *data, size_t n,
                                         size_t *used);

/* After HTTP_PARSE_HEAD: the request, head fields set and body still empty (borrowed). */
const struct http_msg *http_parse_msg(const struct http_parse *p);
/* After HTTP_PARSE_MESSAGE: the complete request, now owned by the caller (http_msg_free).
 * NULL at any other time. */
struct http_msg *http_parse_take(struct http_parse *p);
/* After HTTP_PARSE_ERROR: the status (400, 405, 413, 414, 417, 431, 503 out of memory, 505);
 * *detail (if detail != NULL) gets a static text that never holds request bytes. */
int http_parse_error(const struct http_parse *p, const char **detail);

/* A request has started (its first byte was seen) and was not taken yet. */
bool http_parse_started(const struct http_parse *p);
/* Nothing of a request has been fed since the last one was taken (or since init). */
bool http_parse_idle(const struct http_parse *p);
/* The request being parsed (or refused) is a HEAD request: the answer carries no body. */
bool http_parse_is_head(const struct http_parse *p);

/* Frees m and everything it holds; NULL is fine. */
void http_msg_free(struct http_msg *m);
/*
 * The last step of laying a request out (the parser's, and http_local.c's for a local request):
 * m->head holds target\0 (m->url_len bytes and its NUL), then nheaders name\0value\0 pairs (and
 * whatever the caller appends after them); path\0 and query\0 are appended, copied from the head
 * at the given offsets, and the request's strings point into the head, which does not change
 * any more. Returns 0 or an error.
 */
int http__msg_set_strings(struct http_msg *m, size_t nheaders, size_t path_off, size_t path_len,
                          size_t query_off, size_t query_len);
/* The first value of header `name` (case-insensitive), or NULL. */
const char *http_msg_header(const struct http_msg *m, const char *name);
/* How many times header `name` occurs (case-insensitive). */
size_t http_msg_header_count(const struct http_msg *m, const char *name);

#endif
