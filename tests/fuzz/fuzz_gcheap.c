/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a nettrace stream through events/ev_gcheap.h, the heap-snapshot builder behind
 * /gcdump and `dotmon convert --format gcdump`. Each input is fed whole and again in chunks whose
 * sizes come from a hash of the input (node limit 5000, so that a claimed heap cannot take the
 * memory). Promises checked: no crash or sanitizer report; both feedings end the same way (the
 * same error, or the same file byte for byte); a written file ends with the FastSerialization
 * trailer (its last i32 is the offset T of the trailer, whose i32 is the offset F of the
 * forward-reference table: count 1, then a label inside the file); the summary per type
 * (ev_gcheap_type_stats, GET /gcdump?format=summary) of a whole graph sums to its objects and
 * total_size, its top and omitted to those, and its JSON is one line. Seeds: the synthetic heap
 * walk of tests/events/test_ev_gcheap.c (EV_GCHEAP_SEED=<dir>).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ev_gcheap.h"

static int sink(void *ud, const uint8_t *p, size_t n)
{
    CHECK(n > 0 && n <= 65536);
    return buf_append(ud, p, n);
}

static uint32_t at32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The summary of a whole graph g (stats st): its sums, and its JSON. */
static void check_summary(struct ev_gcheap *g, const struct ev_gcheap_stats *st)
{
    struct ev_gcheap_types t;
    int rc = ev_gcheap_type_stats(g, 3, &t);
    CHECK(rc == 0 || rc == AGENT_E_BUDGET || rc == -ENOMEM); /* its tables are the graph's */
    if (rc != 0) {
        return;
    }
    CHECK(t.objects == st->objects && t.bytes == st->total_size);
    uint64_t count = t.omitted_count, bytes = t.omitted_bytes;
    for (size_t i = 0; i < t.n_top; i++) {
        count += t.top[i].count;
        bytes += t.top[i].bytes;
        CHECK(i == 0 || t.top[i - 1].bytes >= t.top[i].bytes);
    }
    CHECK(count == t.objects && bytes == t.bytes && t.n_top + t.omitted_types == t.types);
    struct buf js;
    buf_init(&js, 0);
    CHECK(ev_gcheap_write_types_json(&t, 1, sink, &js) == 0);
    const char *p = (const char *)buf_data(&js);
    CHECK(buf_size(&js) > 2 && p[0] == '{' &&
          memchr(p, '\n', buf_size(&js)) == p + buf_size(&js) - 1);
    buf_fini(&js);
    ev_gcheap_types_fini(&t);
}

/* 0 and the file in out, or the error. */
static int run(const uint8_t *data, size_t size, uint64_t seed, struct buf *out)
{
    /* A small byte bound too: the fuzzer reaches it with long names and pending edges. */
    struct ev_gcheap_limits lim = {.max_nodes = 5000, .max_bytes = (uint64_t)4 << 20};
    struct ev_gcheap *g = NULL;
    int rc = ev_gcheap_new(&g, &lim);
    CHECK(rc == 0);
    uint64_t s = seed | 1;
    for (size_t at = 0; at < size && rc == 0;) {
        size_t k = seed == 0 ? size - at : 1 + (size_t)(fuzz_xorshift(&s) % 4096);
        if (k > size - at) {
            k = size - at;
        }
        rc = ev_gcheap_feed(g, data + at, k);
        at += k;
    }
    if (rc == 0) {
        rc = ev_gcheap_finish(g);
    }
    struct ev_gcheap_stats st;
    ev_gcheap_get_stats(g, &st);
    CHECK(st.nodes <= 5000);
    CHECK(st.mem_bytes <= ((uint64_t)4 << 20) + 65536); /* the byte bound holds */
    if (rc == 0) {
        CHECK(ev_gcheap_complete(g));
        rc = ev_gcheap_write(g, "fuzz", sink, out);
        CHECK(rc == 0);
        check_summary(g, &st);
    } else {
        CHECK(ev_gcheap_error(g) != NULL);
        CHECK(ev_gcheap_write(g, "fuzz", sink, out) == AGENT_E_INVAL);
    }
    ev_gcheap_free(g);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf whole, chunked;
    buf_init(&whole, 0);
    buf_init(&chunked, 0);
    int rc1 = run(data, size, 0, &whole);
    int rc2 = run(data, size, fuzz_fnv1a(data, size), &chunked);
    CHECK(rc1 == rc2);
    CHECK(buf_size(&whole) == buf_size(&chunked));
    CHECK(buf_size(&whole) == 0 ||
          memcmp(buf_data(&whole), buf_data(&chunked), buf_size(&whole)) == 0);
    size_t n = buf_size(&whole);
    if (rc1 == 0) {
        const uint8_t *f = buf_data(&whole);
        CHECK(n >= 16);
        uint32_t t = at32(f + n - 4);
        CHECK(t == n - 8);
        uint32_t fpos = at32(f + t);
        CHECK(fpos == t - 8 && at32(f + fpos) == 1 && at32(f + fpos + 4) < n);
    }
    buf_fini(&whole);
    buf_fini(&chunked);
    return 0;
}
