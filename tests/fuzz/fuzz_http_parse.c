/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the bytes a client sends on a connection, through the pure request parser
 * and head policy (http/http_parse.c), the way the connection feeds it: every request served at
 * once, the bytes behind it fed next (pipelining). Each input is parsed twice: fed whole, and fed
 * in chunks whose sizes come from a hash of the input (1 byte to the whole rest), so mutations
 * move the read boundaries too. The parser promises the same outcome for any split: the same
 * requests (every field, header and body byte), then the same refusal (status and detail) or
 * the same wait for more bytes. Also checked: every request is within the limits, a refusal
 * has one of the documented statuses and is final. Now and then the limits are tight, so the
 * 413/414/431 paths are reached with small inputs.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "http_parse.h"

struct outcome {
    uint64_t digest; /* FNV-1a over the events and the requests' contents */
    size_t nmsgs;
    int status; /* 0: the input ended waiting for more */
    const char *detail;
};

static uint64_t mix(uint64_t h, uint8_t b)
{
    return (h ^ b) * 0x100000001b3ull;
}

static uint64_t mix_bytes(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h = mix(h, b[i]);
    }
    return mix(h, 0xff); /* a separator: "ab","c" differs from "a","bc" */
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    CHECK(s != NULL);
    return mix_bytes(h, s, strlen(s));
}

static void check_head(const struct http_parse_limits *lim, const struct http_msg *m)
{
    CHECK(m != NULL);
    CHECK(m->http_major == 1 && m->http_minor <= 1);
    CHECK(m->url_len > 0 && m->url_len <= lim->max_url);
    CHECK(strlen(m->target) == m->url_len);
    CHECK(m->path[0] == '/' || m->path[0] == '*');
    CHECK(strlen(m->method) > 0);
    CHECK(m->nheaders <= lim->max_headers);
    CHECK(strcmp(m->method, "CONNECT") != 0);
    size_t bytes = 0;
    for (size_t i = 0; i < m->nheaders; i++) {
        const struct http_field *f = &m->headers[i];
        size_t nl = strlen(f->name);
        size_t vl = strlen(f->value);
        CHECK(nl > 0);
        CHECK(vl == 0 || (f->value[vl - 1] != ' ' && f->value[vl - 1] != '\t'));
        for (size_t k = 0; k < vl; k++) {
            CHECK(f->value[k] != '\r' && f->value[k] != '\n');
        }
        bytes += nl + vl + 4;
    }
    CHECK(bytes <= lim->max_header_bytes);
    size_t hosts = http_msg_header_count(m, "host");
    CHECK(hosts <= 1 && (m->http_minor == 0 || hosts == 1));
    CHECK(buf_size(&m->body) == 0);
}

static uint64_t digest_msg(uint64_t h, const struct http_msg *m)
{
    h = mix_str(h, m->method);
    h = mix_str(h, m->target);
    h = mix_str(h, m->path);
    h = mix_str(h, m->query);
    for (size_t i = 0; i < m->nheaders; i++) {
        h = mix_str(h, m->headers[i].name);
        h = mix_str(h, m->headers[i].value);
    }
    h = mix_bytes(h, buf_data(&m->body), buf_size(&m->body));
    uint8_t flags[5] = {m->http_minor, m->is_head, m->keep_alive, m->expect_continue,
                        (uint8_t)m->nheaders};
    return mix_bytes(h, flags, sizeof(flags));
}

/* Feeds one piece, serving every request at once. Returns false once refused. */
static bool feed(struct http_parse *p, const struct http_parse_limits *lim, const uint8_t *data,
                 size_t n, struct outcome *out)
{
    size_t pos = 0;
    for (;;) {
        size_t used = 0;
        enum http_parse_event ev = http_parse_execute(p, (const char *)data + pos, n - pos, &used);
        switch (ev) {
        case HTTP_PARSE_MORE:
            CHECK(used == n - pos);
            return true;
        case HTTP_PARSE_HEAD: {
            CHECK(used <= n - pos);
            pos += used;
            const struct http_msg *m = http_parse_msg(p);
            check_head(lim, m);
            CHECK(http_parse_take(p) == NULL);
            out->digest = mix(out->digest, 'H');
            continue;
        }
        case HTTP_PARSE_MESSAGE: {
            CHECK(used <= n - pos);
            pos += used;
            struct http_msg *m = http_parse_take(p);
            CHECK(m != NULL);
            CHECK(http_parse_take(p) == NULL);
            CHECK(buf_size(&m->body) <= lim->max_body);
            out->digest = digest_msg(mix(out->digest, 'M'), m);
            out->nmsgs++;
            http_msg_free(m);
            CHECK(!http_parse_started(p));
            continue;
        }
        case HTTP_PARSE_ERROR:
        default:
            break;
        }
        CHECK(ev == HTTP_PARSE_ERROR);
        out->status = http_parse_error(p, &out->detail);
        CHECK(out->detail != NULL);
        int s = out->status;
        CHECK(s == 400 || s == 405 || s == 413 || s == 414 || s == 417 || s == 431 || s == 503 ||
              s == 505);
        /* Final: later bytes change nothing. */
        CHECK(http_parse_execute(p, "GET / HTTP/1.1\r\n", 16, &used) == HTTP_PARSE_ERROR);
        CHECK(http_parse_error(p, NULL) == s);
        CHECK(!http_parse_idle(p));
        return false;
    }
}

static void run(const uint8_t *data, size_t size, const struct http_parse_limits *lim,
                uint64_t chunk_seed, struct outcome *out)
{
    memset(out, 0, sizeof(*out));
    out->digest = 0xcbf29ce484222325ull;
    struct http_parse p;
    http_parse_init(&p, lim);
    CHECK(http_parse_idle(&p));
    if (chunk_seed == 0) {
        (void)feed(&p, lim, data, size, out);
    } else {
        uint64_t rng = chunk_seed;
        size_t off = 0;
        while (off < size) {
            size_t n = fuzz_next_chunk(&rng, size - off);
            if (!feed(&p, lim, data + off, n, out)) {
                break;
            }
            off += n;
        }
    }
    (void)http_parse_is_head(&p);
    http_parse_fini(&p);
    http_parse_fini(&p); /* documented: safe twice */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* FNV-1a of the input picks the chunking and, now and then, tight limits. */
    uint64_t h = fuzz_fnv1a(data, size);
    /* dotmon's defaults (http_server.h, HTTP_MAX_CHUNK_EXT) */
    struct http_parse_limits lim = {.max_url = 8192,
                                    .max_header_bytes = 32768,
                                    .max_headers = 100,
                                    .max_body = 1024 * 1024,
                                    .max_chunk_ext = 4096};
    if ((h >> 8 & 3) == 0) {
        lim = (struct http_parse_limits){.max_url = 1 + (size_t)(h >> 16 & 63),
                                         .max_header_bytes = 1 + (size_t)(h >> 24 & 255),
                                         .max_headers = 1 + (size_t)(h >> 32 & 7),
                                         .max_body = 1 + (size_t)(h >> 40 & 255),
                                         .max_chunk_ext = 1 + (size_t)(h >> 48 & 15)};
    }
    struct outcome whole, split;
    run(data, size, &lim, 0, &whole);
    run(data, size, &lim, h | 1, &split);
    CHECK(whole.nmsgs == split.nmsgs);
    CHECK(whole.digest == split.digest);
    CHECK(whole.status == split.status);
    CHECK(whole.status == 0 || strcmp(whole.detail, split.detail) == 0);
    return 0;
}
