/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HTTP_INTERNAL_H
#define AGENT_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "buf.h"
#include "http_parse.h"
#include "http_server.h"
#include "http_tls.h"

/*
 * Shared between http_server.c (listeners, accept, shutdown), http_conn.c (one connection's
 * state machine) and http_resp.c (requests, responses, output). Not installed; nothing outside
 * http/ includes it.
 */

#define HTTP_LOG_CAT "Dotmon.Http"

/* Per-connection input buffer. Every read is parsed at once, so the buffer only ever holds one
 * read's worth of bytes plus, while a request is being served, the pipelined bytes behind it. */
#define HTTP_INBUF_SIZE ((size_t)16 * 1024)
/* Its first allocation (it grows to HTTP_INBUF_SIZE when a read fills it). */
#define HTTP_INBUF_FIRST ((size_t)2048)
/* After an error response or Connection: close, keep reading (and dropping) for
 * cfg.linger_ms so the client gets our response instead of a RST (the "lingering close" of
 * Apache and nginx). */
#define HTTP_LINGER_MS_DEFAULT 2000
/* 503 responses being written at once beyond max_connections; past this the socket is just
 * closed, so a connection flood cannot make us allocate without bound. */
#define HTTP_MAX_REJECTING 64
/*
 * Under pressure (at least 3/4 of max_connections open) a new connection must send its whole
 * head within cfg.pressure_head_ms (or the header timeout, if shorter), and at the limit the
 * connection that has waited longest without a complete request head is closed to make room: an
 * unauthenticated flood of idle connections can neither hold every slot nor keep probes and users
 * out.
 */
#define HTTP_PRESSURE_HEAD_MS_DEFAULT 2000
/* Memory is handed back to the system (malloc_trim) when the open connections fall to an eighth
 * of a peak of at least this many. */
#define HTTP_TRIM_AFTER_CONNS 64
/*
 * Accepted connections between two pauses of the accepting: after this many, the next pending
 * one waits one loop turn, so that a flood reconnecting as fast as dotmon closes its connections
 * cannot keep libuv's accept loop going while requests already in (a probe's) wait to be read.
 */
#define HTTP_ACCEPT_BURST 32
/* The warning about evictions is repeated at most this often. */
#define HTTP_EVICT_LOG_MS 60000
/* Ciphertext read per libuv read on a TLS connection; also the cap on ciphertext fed to OpenSSL
 * but not yet decrypted (it only piles up while the plaintext input buffer is full). */
#define HTTP_TLS_RBUF ((size_t)64 * 1024)
/* Chunk-extension bytes per request (they are parsed and dropped). */
#define HTTP_MAX_CHUNK_EXT 4096
/* Bytes of header lines a request may carry for its response (http_request_add_header). */
#define HTTP_ADDED_MAX ((size_t)16 * 1024)

/*
 * Connection states (docs/style.md §5: one transition function, one timer per phase):
 *   HEAD     reading a request head; header timer (armed once, not reset by bytes)
 *   BODY     reading a request body; idle timer, reset on every read
 *   HANDLER  the handler owns the request; reading stopped; write-stall timer while writes
 *            are in flight
 *   FLUSH    the response is complete; waiting for the last write before reading the next
 *            request (or closing); write-stall timer
 *   IDLE     keep-alive between requests; idle timer
 *   LINGER   response sent, write side shut down, dropping input until EOF; linger timer
 *   CLOSING  uv_close called; every event is ignored until the close callbacks
 */
enum conn_state {
    CONN_HEAD = 0,
    CONN_BODY,
    CONN_HANDLER,
    CONN_FLUSH,
    CONN_IDLE,
    CONN_LINGER,
    CONN_CLOSING,
    CONN_NSTATES
};

struct http_conn;
struct http_local;

/* A response being written: stays with the request until finished. */
enum resp_state {
    RESP_NONE = 0,  /* nothing sent yet */
    RESP_STREAMING, /* http_stream_begin done; chunks may follow */
    RESP_DONE       /* complete; the request is about to be freed */
};

struct http_request {
    struct http_conn *conn;   /* outlives the request: freed only in the connection close cb;
                                 NULL for a local request (http_local_new) */
    struct http_local *local; /* a local request's state (http_local.c); NULL with a conn */
    uint64_t id;
    int tag;
    struct http_msg *msg; /* the parsed request (owned) */
    bool dispatched;      /* handed to the handler, who owns it now */
    bool in_abort;        /* the abort callback is running */
    enum resp_state resp;
    bool chunked;      /* streaming with chunked framing (HTTP/1.1) */
    bool discard_body; /* streaming a HEAD response: chunks are swallowed */
    http_abort_cb abort_cb;
    void *abort_ud;
    http_drain_cb drain_cb;
    void *drain_ud;
    size_t low_water;
    struct buf added; /* header lines of http_request_add_header, sent with the response */
};

struct http_listener {
    uv_tcp_t tcp;
    struct http_server *srv;
    int tag;
    bool tls;      /* an https:// listener */
    bool deferred; /* a connection is pending: accept it on the next turn (HTTP_ACCEPT_BURST) */
    struct http_listener *next;
};

/*
 * A file piece being sent with sendfile(2) on the thread pool (http_stream_sendfile). The worker
 * owns the fields below `cb` while `busy`; the loop reads them only in the after-work callback.
 */
struct http_sendfile {
    uv_work_t work;
    http_sendfile_cb cb;
    void *ud;
    bool queued; /* waiting for the writes before it to go out */
    bool busy;   /* a work item is on the pool: the socket is in blocking mode */
    int sock;
    int file;
    uint64_t offset; /* of the piece in the file */
    size_t max;      /* most bytes for the piece */
    bool chunked;
    bool sized;       /* chunk_len decided (the file's size was looked at) */
    size_t chunk_len; /* bytes of the piece */
    size_t done;      /* of them sent */
    char hdr[24];     /* the chunk's size line */
    size_t hdr_len;
    size_t hdr_sent;
    size_t trl_sent;        /* of the "\r\n" after the chunk */
    int err;                /* 0, or what failed */
    bool progress;          /* the last work item sent something */
    uint64_t last_progress; /* uv_now() */
};

struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_shutdown_t shutdown_req;
    struct http_server *srv;
    struct http_conn *prev, *next; /* server's connection list */
    int tag;
    uint64_t id;
    struct http_tls *tls; /* NULL on plain HTTP; every byte in and out goes through it */
    enum conn_state state;
    int open_handles;
    bool rejecting;   /* accepted over max_connections: 503 then close */
    bool evicted;     /* closed to make room (no longer counted in nconns) */
    bool reading;     /* uv_read_start is active */
    bool close_after; /* close (linger) once the current response is flushed */
    bool saw_eof;     /* the peer half-closed */
    bool hold_input;  /* input buffer full while the handler owns a request: reading paused */
    struct http_parse parse;  /* the request head policy (http_parse.h) */
    struct buf in;            /* capped input buffer, see HTTP_INBUF_SIZE */
    struct http_request *req; /* owned by the handler (NULL until dispatched) */
    unsigned writes_in_flight;
    size_t pending;          /* bytes in writes whose callback has not run */
    struct http_sendfile sf; /* http_stream_sendfile */
};

struct http_server {
    uv_loop_t *loop;
    struct http_server_config cfg; /* with defaults filled in */
    http_handler_cb handler;
    void *ud;
    struct http_listener *listeners;
    int *ports; /* port of each successful listen call */
    size_t nports;
    struct http_conn *conns;      /* newest first */
    struct http_conn *conns_tail; /* oldest */
    uint8_t *tls_rbuf; /* ciphertext read buffer shared by the TLS connections (HTTP_TLS_RBUF):
                          each read is fed to OpenSSL within its read callback */
    size_t nconns;     /* served connections (rejecting and evicted ones not counted) */
    size_t nrejecting;
    uint64_t nevicted;     /* connections closed to make room, since start */
    size_t peak_conns;     /* most connections open at once since memory was last trimmed */
    uint64_t evict_logged; /* uv_now() of the last warning about it (0: never) */
    uint64_t next_conn_id;
    uint64_t next_req_id;
    uv_timer_t grace_timer;
    uv_idle_t accept_idle; /* takes deferred connections on the next loop turn */
    unsigned accept_burst; /* accepts since the last pause */
    int open_handles;      /* listeners + grace timer + accept_idle */
    bool closing;
    bool finishing; /* the grace timer is being closed: last step */
    void (*close_cb)(void *ud);
    void *close_ud;
    time_t date_time;
    char date[30];
};

/* ---- http_conn.c ---- */
/* Creates a connection for a pending accept on listener l. Returns 0 once libuv's pending
 * connection was taken (it may have been closed at once: a warning is logged), or an error when
 * it could not even be taken (out of memory): it is still pending then, and accepting on l stays
 * paused until http__conn_accept is called again. */
int http__conn_accept(struct http_server *s, struct http_listener *l);
/* Starts closing c: aborts the request owned by the handler (from the close callback). */
void http__conn_close(struct http_conn *c);
/* True when c has no request in progress (nothing received, or keep-alive idle). */
bool http__conn_is_idle(const struct http_conn *c);
/* The one transition function (docs/style.md §5): aborts on an illegal transition, re-arms the
 * timer and starts or stops reading to match the new state. */
void http__conn_set_state(struct http_conn *c, enum conn_state next);
/* Re-arms the timer for the current state (a write went out or finished). */
void http__conn_arm_timer(struct http_conn *c);
/* Starts or stops reading to match the state (and a sendfile worker holding the socket). */
void http__conn_update_reading(struct http_conn *c);
/* A write of c finished with status (http_resp.c's write callback); may run the drain
 * callback, start a queued sendfile piece, or move on after the response. */
void http__conn_write_done(struct http_conn *c, int status);
/* Closes the socket of a closing connection whose sendfile worker has just returned. */
void http__conn_close_socket(struct http_conn *c);

/* ---- http_resp.c ---- */
/* A request for the handler, taking msg (freed here on failure: NULL then). */
struct http_request *http__request_new(struct http_conn *c, struct http_msg *msg);
/* Frees r and its message; NULL is fine. */
void http__request_free(struct http_request *r);
/* Queues b's bytes (taking its storage), through TLS on an https connection. On failure the
 * connection is closed and the error returned. */
int http__resp_write(struct http_conn *c, struct buf *b);
/* Queues b's bytes for the socket as they are (taking its storage): plaintext on plain HTTP,
 * ciphertext on TLS. On failure the connection is closed. */
int http__resp_write_wire(struct http_conn *c, struct buf *b);
/* Writes an RFC 7807 response with Connection: close (the caller closes after the flush); no
 * body when is_head. On failure the connection is closed. */
int http__resp_problem(struct http_conn *c, int status, const char *detail, bool is_head);
/* Starts the queued sendfile piece of c on the thread pool (the writes before it are out). */
void http__sendfile_start(struct http_conn *c);

/* ---- http_local.c ---- */
/*
 * The response calls of http_server.h for a local request (r->conn == NULL), called by
 * http_resp.c once it has made the checks both kinds share (NULL request, a response not started
 * or not streaming). Same arguments, return values and ownership as the public calls; what a
 * network request would write is queued for the sink instead, and delivered on a later loop turn.
 */
int http__local_respond(struct http_request *r, int status, const char *content_type,
                        const struct http_header *extra, size_t nextra, const void *body,
                        size_t len);
int http__local_stream_begin(struct http_request *r, int status, const char *content_type,
                             const struct http_header *extra, size_t nextra);
/* One chunk: copied when base is NULL, else base is taken (http_stream_write_owned). */
int http__local_stream_write(struct http_request *r, void *base, const void *data, size_t len);
/* 0 when the sink still takes bytes, AGENT_E_CLOSED once it is gone (http_stream_write_now). */
int http__local_stream_write_now(struct http_request *r);
int http__local_stream_end(struct http_request *r);
void http__local_stream_abort(struct http_request *r);

/* ---- http_server.c ---- */
/* The cached Date value for responses. */
const char *http__server_date(struct http_server *s);
/* Called by the connection close callback once c is unlinked and about to be freed. */
void http__server_conn_gone(struct http_server *s, struct http_conn *c);

#endif
