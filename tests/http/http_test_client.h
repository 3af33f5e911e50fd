/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TESTS_HTTP_TEST_CLIENT_H
#define AGENT_TESTS_HTTP_TEST_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <llhttp.h>

#include "buf.h"

/*
 * A blocking HTTP/1.1 test client for a thread other than the server's loop thread. Responses
 * are parsed with llhttp in response mode, so framing errors (bad chunking, a body longer or
 * shorter than Content-Length, truncation) show up as TC_ERROR. Every wait is bounded by a
 * timeout: a client thread never hangs a test. Not thread-safe per connection.
 */

enum tc_result {
    TC_OK = 0,
    TC_CLOSED = -1,  /* the server closed (or reset) before any byte of a response */
    TC_TIMEOUT = -2, /* nothing complete within the timeout */
    TC_ERROR = -3    /* parse error, reset or EOF in the middle of a response */
};

struct tc_response {
    int status;
    uint8_t http_major, http_minor;
    struct buf headers; /* name\0value\0 ..., in order */
    size_t nheaders;
    struct buf body; /* de-chunked */
    size_t nchunks;  /* chunks seen (chunked responses) */
    size_t interim;  /* 1xx responses skipped before this one */
    bool keep_alive; /* llhttp_should_keep_alive */
};

struct tc_conn {
    int fd;
    llhttp_t parser;
    llhttp_settings_t settings;
    struct buf in; /* bytes read but not parsed yet (behind a paused response) */
    struct tc_response *resp;
    bool complete;
    bool head_request; /* the response being read answers a HEAD: no body */
    int hstate;
    size_t read_size;       /* bytes per recv; 0 → 64 KiB */
    unsigned read_delay_us; /* sleep before each recv (slow reader) */
    size_t bytes_read;
    void *ssl; /* SSL * after tc_tls_handshake: every byte then goes through TLS (owned) */
};

void tc_response_init(struct tc_response *r);
void tc_response_fini(struct tc_response *r);
/* First header with this name (case-insensitive) or NULL; valid until fini. */
const char *tc_header(const struct tc_response *r, const char *name);
/* Body as a NUL-terminated string. */
const char *tc_body(struct tc_response *r);

/* Connects to 127.0.0.1:port (TCP_NODELAY). Returns 0 or -errno. */
int tc_connect(struct tc_conn *c, int port);
void tc_close(struct tc_conn *c);
/* Closes with SO_LINGER 0: the server sees a reset. */
void tc_reset(struct tc_conn *c);
/* Sends everything (MSG_NOSIGNAL). Returns 0 or -errno (EPIPE/ECONNRESET once the server has
 * closed). */
int tc_send(struct tc_conn *c, const void *p, size_t n);
int tc_send_str(struct tc_conn *c, const char *s);
/*
 * Turns c into a TLS client: a blocking handshake over c->fd with ssl_ctx (an SSL_CTX *, the
 * caller's), offering ALPN alpn (wire format, may be NULL); afterwards tc_send, tc_read_response
 * and tc_wait_closed speak TLS. Each socket read waits at most timeout_ms. Returns 0, or -1 with
 * OpenSSL's reason in why (may be NULL).
 */
int tc_tls_handshake(struct tc_conn *c, void *ssl_ctx, const unsigned char *alpn, size_t alpn_len,
                     int timeout_ms, char *why, size_t whylen);
/* Half-closes the write side. */
void tc_shutdown_write(struct tc_conn *c);
/* Reads one final (non-1xx) response into r (re-initialised). */
enum tc_result tc_read_response(struct tc_conn *c, struct tc_response *r, int timeout_ms);
/* Waits for EOF or reset, discarding data. TC_OK when closed, TC_TIMEOUT otherwise.
 * *extra (may be NULL) receives the number of bytes discarded. */
enum tc_result tc_wait_closed(struct tc_conn *c, int timeout_ms, size_t *extra);
/* One GET/HEAD round trip helper on a fresh connection-less request string. */
enum tc_result tc_request(struct tc_conn *c, const char *raw, struct tc_response *r,
                          int timeout_ms);

/* Monotonic milliseconds. */
uint64_t tc_now_ms(void);
void tc_sleep_ms(unsigned ms);

#endif
