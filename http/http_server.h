/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_SERVER_H
#define AGENT_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/*
 * HTTP/1.1 server on libuv + llhttp (one loop, no threads).
 *
 * Keep-alive, many connections at once, pipelined requests served in order (one at a time per
 * connection: while a request is being answered, further bytes are only kept, not parsed; the
 * socket is still read so that a client that goes away - including one that half-closes after
 * its request - is noticed at once and the request aborted). Limits answered with the
 * right status: 414 URI too long, 431 header section too large, 413 body too large, 400 for
 * malformed requests; header timeout (slow or idle-before-first-byte clients are closed), idle
 * keep-alive timeout. At the connection limit the connection that has waited longest without a
 * complete request is closed to make room (lingering, then reading its head, then keep-alive
 * idle, then reading its body; never one the handler owns), and only when none can go does the
 * newcomer get 503 + close: a flood of idle connections cannot lock everyone out.
 *
 * A request is handed to the handler callback once it is complete (headers and body). The
 * handler may answer at once or later (asynchronously) with http_respond or the streaming
 * calls. The request object stays valid until the handler has completed the response
 * (http_respond / http_stream_end) or until the abort callback has run, whichever is first.
 *
 * Threading: everything here runs on the loop's thread, and every callback (handler, drain,
 * abort, close) is called from that loop. None is called from inside an http_* call made by the
 * handler: finishing a response never re-enters the handler synchronously, and the abort
 * callback runs from the connection's close callback only, never from a write callback.
 *
 * Ownership: a handler that keeps a request beyond its handler call (to answer later) must set
 * an abort callback (http_request_on_abort), because the connection may close first (client
 * gone, write stall, shutdown grace over); without one the request is freed silently. A client
 * disconnect is noticed when a write fails (reading is off while the handler owns a request),
 * so a handler that writes nothing learns of it only when it answers (AGENT_E_CLOSED).
 *
 * Process state: http_server_new sets SIGPIPE to SIG_IGN if it is still SIG_DFL (libuv writes
 * with write(2); a client closing mid-response would otherwise kill the process).
 *
 * Wire behaviour worth knowing: every response has Date and Content-Length or chunked framing
 * (204/304 have neither), and "Connection: close" when the server closes after it; HTTP/1.0
 * keep-alive is honoured and answered with "Connection: keep-alive"; HEAD responses carry the
 * headers of the GET but no body; "Expect: 100-continue" gets "100 Continue" before the body
 * is read (any other Expect: 417); Upgrade requests are served as plain HTTP/1.1; CONNECT: 405.
 * Refused requests get an application/problem+json body and the connection is closed after it
 * (with a short lingering close so the client reads the answer). Requests the server refuses by
 * itself never reach the handler.
 */

struct http_server;
struct http_request;
struct http_tls_ctx;

struct http_header {
    const char *name;
    const char *value;
};

/* Timers: the header timeout runs from accept (first request) or from the first byte (later
 * requests) to the end of the head and is not extended by activity; the idle timeout bounds
 * keep-alive idleness and also the gap between two reads of a request body. */
struct http_server_config {
    uint64_t header_timeout_ms; /* whole request head must arrive within this; 0 → 10000 */
    uint64_t idle_timeout_ms;   /* keep-alive idle; 0 → 60000 */
    size_t max_url;             /* 0 → 8192 → 414 */
    size_t max_header_bytes;    /* header section (names + values + 4 per line, trailers too; the
                                   request line is bounded by max_url); 0 → 32768 → 431 */
    size_t max_body;            /* 0 → 1 MiB → 413 */
    size_t max_connections;     /* 0 → 1024; beyond: evict an idle one, else 503 and close */
    /* Added by the http module (zero keeps the default, so memset configs still work): */
    uint64_t write_timeout_ms; /* a write making no progress this long closes; 0 → 60000 */
    size_t max_headers;        /* header lines per request; 0 → 100 → 431 */
    size_t max_stream_pending; /* http_stream_write past this closes the client; 0 → 16 MiB */
    /* TLS context for https:// listeners (http_tls.h), borrowed: it must outlive the server.
     * NULL: https:// URLs are refused. Over TLS the write limits above count ciphertext bytes,
     * and the header timeout also bounds the handshake (from accept to the end of the first
     * request head). */
    struct http_tls_ctx *tls;
    /* After an error response or Connection: close, input is read and dropped this long so the
     * client gets the response instead of a RST (a lingering close); 0 → 2000. */
    uint64_t linger_ms;
    /* Under pressure (3/4 of max_connections open) a new connection's head must arrive within
     * this, or the header timeout if shorter; 0 → 2000. */
    uint64_t pressure_head_ms;
};

/* Called once per complete request, in request order per connection (the next request of a
 * connection is not read before this one is answered and written). */
typedef void (*http_handler_cb)(void *ud, struct http_request *req);

/* Creates a server on loop (nothing listens yet). cfg may be NULL (all defaults); it is copied.
 * Returns 0, AGENT_E_INVAL (NULL loop/handler/out) or UV_ENOMEM; *out is set only on success. */
int http_server_new(uv_loop_t *loop, const struct http_server_config *cfg, http_handler_cb handler,
                    void *ud, struct http_server **out);

/*
 * Binds and listens on a URL in dotnet-monitor's --urls syntax: http://host:port or
 * https://host:port where host is an IPv4/IPv6 literal, `localhost` (loopback: 127.0.0.1 and
 * ::1 when available), or `+` / `*` (all interfaces). https:// needs cfg.tls (else
 * AGENT_E_INVAL); each listener serves TLS or plain HTTP, so one server may mix both. `tag` is
 * returned by http_request_tag for requests arriving on this listener (e.g. to tell artifact
 * and metrics URLs apart). Port 0 picks a free port: see http_server_port.
 *
 * Over TLS every response byte (http_respond, the streaming calls, the owned zero-copy writes,
 * the server's own error answers) is encrypted on the loop through OpenSSL memory BIOs; owned
 * buffers are freed as soon as they are encrypted. A plain HTTP request sent to a TLS port gets
 * a plain-text 400 and the connection is closed; any other handshake failure just closes it.
 * Connections over max_connections on a TLS port are closed without the 503.
 */
int http_server_listen(struct http_server *s, const char *url, int tag);
/* Facts about a --urls entry without binding it: *tls for https://, *loopback when it binds
 * only loopback addresses (localhost, 127.0.0.0/8, ::1). Returns 0 or AGENT_E_INVAL. */
int http_url_info(const char *url, bool *tls, bool *loopback);
/* Port of the n-th successful listen call (in order), or -1. */
int http_server_port(const struct http_server *s, size_t n);
size_t http_server_connection_count(const struct http_server *s);

/*
 * Graceful shutdown: stop accepting, close idle connections at once, let requests in progress
 * finish for up to grace_ms then close everything, free s and call cb (may be NULL) from the loop.
 * Responses finished during the grace period say "Connection: close". When the grace period
 * ends, requests still owned by handlers are aborted (abort callbacks run). grace_ms 0 closes
 * everything at once. cb always runs from a later loop iteration, after every handle of the
 * server is closed (so uv_loop_close can succeed right after it). s must not be used after this
 * call; a second call is ignored.
 */
void http_server_close(struct http_server *s, uint64_t grace_ms, void (*cb)(void *ud), void *ud);

/* ---- request accessors (all strings NUL-terminated, owned by the request) ---- */
const char *http_request_method(const struct http_request *r); /* "GET", "POST", … */
const char *http_request_target(const struct http_request *r); /* raw target: path + ?query */
const char *http_request_path(const struct http_request *r);   /* raw path, without ?query */
const char *http_request_query(const struct http_request *r);  /* raw query after '?', "" if none */
/* First header with this name (case-insensitive), or NULL. */
const char *http_request_header(const struct http_request *r, const char *name);
/* How many header lines have this name (case-insensitive). */
size_t http_request_header_count(const struct http_request *r, const char *name);
const uint8_t *http_request_body(const struct http_request *r, size_t *len);
int http_request_tag(const struct http_request *r);
uint64_t http_request_id(const struct http_request *r); /* unique per server, for logs */
/* True when the request came over TLS (an https:// listener): the scheme of URLs pointing back. */
bool http_request_is_tls(const struct http_request *r);

/* Called once if the client goes away while the handler still owns the request (or the server
 * closes the connection: write stall, shutdown). Runs from the loop (the connection's close
 * callback). After it returns the request is freed: the handler must drop every pointer to it.
 * Inside it, response calls return AGENT_E_CLOSED and do nothing. cb NULL clears it. */
typedef void (*http_abort_cb)(void *ud, struct http_request *r);
void http_request_on_abort(struct http_request *r, http_abort_cb cb, void *ud);

/* ---- responses ---- */
/*
 * Adds a header (copied) to the response r will get, whichever call sends it (http_respond or
 * http_stream_begin, after their own extra headers): for headers that belong to the request rather
 * than to the handler answering it (CORS). Returns 0, AGENT_E_INVAL (an invalid or managed name or
 * value, as for http_respond, or a response already started) or a negative errno (no memory).
 */
int http_request_add_header(struct http_request *r, const char *name, const char *value);
/*
 * Sends a complete response with Content-Length, and finishes the request. `extra` headers are
 * copied, and so is the body (content_type and body may be NULL). Returns 0 or a negative code
 * (the request is finished either way): AGENT_E_CLOSED if the client is gone; AGENT_E_INVAL for
 * a status outside 200..599, or a header with an invalid name/value (CR/LF: injection) or one
 * the server manages (Content-Length, Transfer-Encoding, Connection, Date, Keep-Alive, Upgrade,
 * Content-Type): then the client gets a 500 instead. 204/304 are sent without body.
 */
int http_respond(struct http_request *r, int status, const char *content_type,
                 const struct http_header *extra, size_t nextra, const void *body, size_t len);

/* Starts a chunked response (Transfer-Encoding: chunked; for an HTTP/1.0 client the body is
 * sent raw and ends with the connection). Returns 0, AGENT_E_CLOSED, or AGENT_E_INVAL (bad
 * status or header, 204/304, already started): on error the handler still owns the request and
 * must finish it (http_respond or http_stream_abort). For HEAD, chunks are accepted and dropped. */
int http_stream_begin(struct http_request *r, int status, const char *content_type,
                      const struct http_header *extra, size_t nextra);
/* Queues one chunk (copied; len 0 is a no-op). Returns 0, or a negative code if the client is
 * gone (AGENT_E_CLOSED; the abort callback follows from the loop). If the queue would exceed
 * max_stream_pending the client is dropped and AGENT_E_TOOBIG returned: respect drain. */
int http_stream_write(struct http_request *r, const void *data, size_t len);
/* The same without a copy: len bytes at data, which lie inside the malloc'd block base. The
 * server owns base from this call on, whatever it returns (free() once written, or at once on
 * failure); the bytes must not change until then. For relays that read into fresh buffers. */
int http_stream_write_owned(struct http_request *r, void *base, const void *data, size_t len);
/*
 * Writes one chunk straight to the socket when nothing is queued ahead of it (plain HTTP only): the
 * caller keeps its buffer and may read into it again at once, as a copy loop does (a relay that
 * hands each read buffer to the queue instead reads into a new block every time, and the bytes it
 * then writes are not in the CPU's cache). The part the socket does not take is queued (copied).
 * Returns 1 when the chunk is written or queued, 0 when nothing was done (TLS, bytes queued
 * already, the socket full, len 0 or a HEAD): the caller then uses http_stream_write(_owned).
 * A negative code as for http_stream_write.
 */
int http_stream_write_now(struct http_request *r, const void *data, size_t len);
/* Bytes queued to the client whose write has not completed yet (all of this connection's). */
size_t http_stream_pending(const struct http_request *r);
/* Called (from the loop, after each completed write) whenever the queued bytes are at or
 * below low_water: level-triggered, so it may run several times in a row. The callback may
 * write, end or abort the stream. */
typedef void (*http_drain_cb)(void *ud, struct http_request *r);
void http_stream_on_drain(struct http_request *r, size_t low_water, http_drain_cb cb, void *ud);
/*
 * Sends the next bytes of the response straight from a regular file, without copying them
 * through dotmon: up to max bytes of fd from offset, but no further than the file's size at that
 * moment (a file still being written is sent as far as it goes), as one chunk when chunked. The
 * copy runs as sendfile(2) on libuv's thread pool, the socket in blocking mode with a 1 s send
 * timeout per call (reading the client paused meanwhile), repeated until the piece is out. It
 * starts once the writes queued before it have gone out. Plain HTTP only: over TLS (or for
 * HEAD) it returns AGENT_E_INVAL and the caller reads and writes instead
 * (http_stream_can_sendfile). cb(ud, r, 0, n) when the piece is out (n 0: the file has no byte at
 * offset yet), or with a negative status when the client went away, made no progress for the write
 * timeout, or the connection was closed meanwhile (r may then be NULL, and the abort callback
 * follows). cb runs exactly once per accepted call, and only once the file is no longer used: fd
 * must stay open until then. One piece at a time; no other stream call until cb. Returns 0 (cb will
 * run), AGENT_E_INVAL or AGENT_E_CLOSED (cb will not run).
 */
typedef void (*http_sendfile_cb)(void *ud, struct http_request *r, int status, size_t sent);
int http_stream_sendfile(struct http_request *r, int fd, uint64_t offset, size_t max,
                         http_sendfile_cb cb, void *ud);
bool http_stream_can_sendfile(const struct http_request *r);

/* Writes the last chunk and finishes the request. */
int http_stream_end(struct http_request *r);
/* Ends a streamed response abnormally: the connection is closed without the last chunk so the
 * client sees a truncated transfer. Finishes the request. */
void http_stream_abort(struct http_request *r);

/* ---- local requests ---- */
/*
 * A request made inside dotmon (the MCP endpoint calling a REST route on a client's behalf): the
 * same handler serves it as a network request, with the same accessors and response calls, but
 * no socket: the response goes to a sink. Nothing outside dotmon can make one.
 *
 * The sink's callbacks all run from the loop, never from inside an http_* call made by the
 * handler (they are delivered on a later loop turn, in order), so a sink may start further local
 * requests or free its own state from them:
 *   on_head  once, before any body: the status, the Content-Type (NULL if none) and the extra
 *            headers of http_respond/http_stream_begin (and http_request_add_header's);
 *   on_body  the body's bytes in order (the sink copies what it keeps). Returning non-zero
 *            refuses more: the request is then treated as a client that left (the handler's
 *            abort callback runs, later writes fail with AGENT_E_CLOSED);
 *   on_end   exactly once, last: complete true when the response finished (http_respond,
 *            http_stream_end), false when it was cut (http_stream_abort, a refused on_body,
 *            http_local_cancel). The request is freed after on_end returns. A handler that
 *            never answers keeps the request until the caller cancels it (its own deadline).
 * The handler sees an ordinary request: no TLS, no sendfile (http_stream_can_sendfile false,
 * http_stream_write_now 0), http_stream_pending always 0 (the sink takes every byte at once, so
 * a route never pauses for it; the sink bounds what it keeps and refuses past that).
 */
struct http_local_sink {
    void (*on_head)(void *ud, int status, const char *content_type, const struct http_header *h,
                    size_t n);
    int (*on_body)(void *ud, const void *data, size_t len);
    void (*on_end)(void *ud, bool complete);
};

/*
 * Makes a local request: method ("GET"), target (path and ?query, as on the wire: percent-encoded),
 * headers (copied; Host and Authorization as the caller wants the route to see them), body (copied,
 * may be NULL), tag (as http_request_tag answers it). Returns 0 with *out, or UV_ENOMEM /
 * AGENT_E_INVAL. The caller then hands *out to the handler itself (handler(ud, *out)); from then on
 * the handler owns it as any request, and the caller keeps *out only to cancel it, until on_end.
 */
int http_local_new(uv_loop_t *loop, const char *method, const char *target,
                   const struct http_header *headers, size_t nheaders, const void *body, size_t len,
                   int tag, const struct http_local_sink *sink, void *ud,
                   struct http_request **out);
/* True for a request made by http_local_new (dotmon itself: already authorized by its caller). */
bool http_request_is_local(const struct http_request *r);
/* The caller gives up a local request (its client left, or cancelled): as a client that left, the
 * handler's abort callback runs on a later loop turn, then on_end(false). After on_end has run the
 * pointer must not be used; calling this again before then does nothing. */
void http_local_cancel(struct http_request *r);

/* Status reason phrase, e.g. 404 → "Not Found". */
const char *http_status_text(int status);

#endif
