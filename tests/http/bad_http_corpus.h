/* SPDX-License-Identifier: MIT */
#ifndef AGENT_TESTS_BAD_HTTP_CORPUS_H
#define AGENT_TESTS_BAD_HTTP_CORPUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Loader for tests/fixtures/bad_http/ (format: tests/fixtures/bad_http/README.md): checked-in
 * records of malformed, oversized and truncated HTTP requests. Pure (no sockets, no libuv), so
 * any test can replay the corpus against any server: the http module's own test, or the whole
 * dotmon binary.
 *
 * How to replay one record: open a fresh connection, send rec->data, half-close the write side
 * (shutdown SHUT_WR: truncated records then end at EOF instead of waiting for a timeout), read
 * one response or EOF, and check it with bad_http_expect_ok.
 */

enum bad_http_expect {
    BAD_HTTP_REJECT = 0, /* a 4xx, 503 or 505 response, or closed without a response */
    BAD_HTTP_STATUS,     /* exactly `status` */
    BAD_HTTP_CLOSE       /* closed without a response */
};

struct bad_http_record {
    const char *file; /* base name of the corpus file */
    int line;         /* line of the %record directive */
    const char *name; /* unique across the corpus */
    enum bad_http_expect expect;
    int status;          /* for BAD_HTTP_STATUS */
    const uint8_t *data; /* the bytes to send; valid during the callback only */
    size_t len;
};

/* Return non-zero to stop the iteration (that value is returned by the loader). */
typedef int (*bad_http_record_cb)(void *ud, const struct bad_http_record *rec);

/*
 * Calls cb for every record of every "*.txt" file in dir, files in name order, records in file
 * order. Returns 0; the first non-zero value cb returned; or a negative code (AGENT_E_PROTO for a
 * syntax error, AGENT_E_INVAL for a duplicate name, UV_E*-style -errno for I/O) with a
 * "file:line: message" text in err.
 */
int bad_http_corpus_foreach(const char *dir, bad_http_record_cb cb, void *ud, char *err,
                            size_t errlen);

/* Corpus directory: $DOTMON_FIXTURES/bad_http when set (ctest sets it), else fallback. */
const char *bad_http_corpus_dir(const char *fallback, char *tmp, size_t tmplen);

/* Checks an outcome: status is the response status, or 0 when the connection was closed (or
 * reset) without a response. */
bool bad_http_expect_ok(const struct bad_http_record *rec, int status);

#endif
