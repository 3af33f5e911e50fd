/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the request target of an HTTP request, as a client sends it
 * ("/trace?pid=4242&durationSeconds=5"). Splits it as the connection does (http__split_target),
 * percent-decodes the path and looks up every query parameter the API reads, and also treats the
 * whole input as a bare query string and a bare path, so mutations reach the decoders directly.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "http_proto.h"
#include "http_query.h"

/* The query parameters dotmon's routes read (agent/api*.c). */
static const char *const api_names[] = {"pid",     "uid",  "name", "durationSeconds",
                                        "profile", "tags", "type", "egressProvider",
                                        "stop",    NULL};

static char *dup_n(const char *p, size_t n)
{
    char *s = malloc(n + 1);
    CHECK(s != NULL);
    memcpy(s, p, n);
    s[n] = '\0';
    return s;
}

static void check_query(const char *query)
{
    struct buf out;
    buf_init(&out, 0);
    for (size_t i = 0; api_names[i] != NULL; i++) {
        int rc = http_query_get(query, api_names[i], &out);
        CHECK(rc == 0 || rc == 1 || rc == AGENT_E_INVAL);
        if (rc == 1) {
            /* A found value is a C string of its full length (encoded NULs are refused). */
            const char *v = buf_cstr(&out);
            CHECK(strlen(v) == buf_size(&out));
            CHECK(buf_size(&out) <= strlen(query));
        }
    }
    struct buf bad;
    buf_init(&bad, 0);
    int rc = http_query_check_names(query, api_names, &bad);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    if (rc == 0) {
        CHECK(buf_size(&bad) == 0);
    }
    rc = http_query_check_names(query, NULL, NULL);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    buf_fini(&bad);
    buf_fini(&out);
}

static void check_path(const char *path)
{
    struct buf out;
    buf_init(&out, 0);
    CHECK(buf_append_str(&out, "unchanged") == 0);
    int rc = http_path_decode(path, &out);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    if (rc == 0) {
        const char *v = buf_cstr(&out);
        CHECK(strlen(v) == buf_size(&out) && buf_size(&out) <= strlen(path));
    } else {
        CHECK(buf_size(&out) == 9 && memcmp(buf_data(&out), "unchanged", 9) == 0);
    }
    buf_fini(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *target = (const char *)data;
    for (int options = 0; options <= 1; options++) {
        size_t path_off = 0;
        size_t path_len = 0;
        size_t query_off = 0;
        size_t query_len = 0;
        if (http__split_target(target, size, options != 0, &path_off, &path_len, &query_off,
                               &query_len) != 0) {
            continue;
        }
        CHECK(path_off <= size && path_len <= size - path_off);
        CHECK(query_off <= size && query_len <= size - query_off);
        CHECK(memchr(target, '\0', size) == NULL);
        if (options) {
            continue; /* the same split, but for "*" */
        }
        char *path = dup_n(target + path_off, path_len);
        char *query = dup_n(target + query_off, query_len);
        check_path(path);
        check_query(query);
        free(query);
        free(path);
    }

    /* The whole input (up to a NUL) as a bare query and a bare path. */
    char *s = dup_n(target, size);
    check_query(s);
    check_path(s);
    free(s);
    return 0;
}
