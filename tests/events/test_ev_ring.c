/* SPDX-License-Identifier: MIT */
/*
 * events/ev_ring.c: a nettrace kept as a ring of blocks and written out on a trigger.
 *
 * Inputs are the real runtime captures of tests/fixtures (each one sequence-point region, with
 * stacks) and, for several regions, a capture "replayed": its EventBlocks, StackBlocks and SPBlock
 * repeated after the first copy with timestamps shifted (stack ids start over after each SPBlock,
 * metadata is defined once), built here by hand, independent of events/. Every output is read
 * back by the checker with NETTRACE_STRICT_STACKS: COMPLETE, every event's metadata defined, no
 * dangling stack. The byte cap and the counters are checked after every feed call.
 *
 * With EV_RING_SEED=<path> the replayed capture is also saved there (a fuzz_ring seed).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_ring.h"
#include "fixture.h"
#include "nettrace.h"
#include "ntw.h"
#include "wbuf.h"

#define PRE 102

/* ---- output sink --------------------------------------------------------------------------- */

struct sink {
    struct wb w;
    int calls;
    int fail_at; /* the call number that fails (-EPIPE); 0 = never */
};

static int sink_write(void *ud, const uint8_t *p, size_t n)
{
    struct sink *s = ud;
    s->calls++;
    if (s->fail_at != 0 && s->calls >= s->fail_at) {
        return -EPIPE;
    }
    wb_raw(&s->w, p, n);
    return 0;
}

/* ---- reading a trace back ------------------------------------------------------------------ */

struct readback {
    enum nettrace_verdict verdict;
    uint64_t events;
    int64_t min_ts;
    int64_t max_ts;
    uint64_t blocks[NETTRACE_BLOCK_KINDS];
};

static void rb_on_event(void *ud, const struct nettrace_event *ev)
{
    struct readback *rb = ud;
    if (rb->events == 0 || ev->timestamp < rb->min_ts) {
        rb->min_ts = ev->timestamp;
    }
    if (rb->events == 0 || ev->timestamp > rb->max_ts) {
        rb->max_ts = ev->timestamp;
    }
    rb->events++;
}

/* Checks p[0..n) strictly (stacks included) and fails the test unless it is COMPLETE. */
static void read_back(const uint8_t *p, size_t n, struct readback *rb)
{
    memset(rb, 0, sizeof(*rb));
    struct nettrace_checker ck;
    struct nettrace_options opt = {.flags = NETTRACE_STRICT_STACKS};
    assert_int_equal(nettrace_checker_init(&ck, &opt), 0);
    nettrace_set_event_cb(&ck, rb_on_event, rb);
    (void)nettrace_feed(&ck, p, n);
    rb->verdict = nettrace_finish(&ck);
    if (rb->verdict != NETTRACE_COMPLETE) {
        char line[300];
        nettrace_error_line(&ck, 0, line, sizeof(line));
        fail_msg("output of %zu bytes is %s: %s", n, nettrace_verdict_name(rb->verdict), line);
    }
    const struct nettrace_stats *st = nettrace_get_stats(&ck);
    assert_int_equal(st->events, rb->events);
    assert_int_equal(st->missing_stacks, 0);
    memcpy(rb->blocks, st->blocks, sizeof(rb->blocks));
    nettrace_checker_fini(&ck);
}

/* ---- the blocks of a V4 stream, walked by hand --------------------------------------------- */

struct tblk {
    char name[16];
    uint32_t min_version;
    size_t start; /* the object's begin tag */
    size_t end;   /* one past its end tag */
    const uint8_t *c;
    uint32_t len;
};

static uint32_t ld32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld64(const uint8_t *p)
{
    return (uint64_t)ld32(p) | (uint64_t)ld32(p + 4) << 32;
}

static void st64(uint8_t *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) {
        p[k] = (uint8_t)(v >> (8 * k));
    }
}

/* The complete block objects of p[0..n) (a valid V4 stream or a prefix of one); returns count. */
static size_t walk(const uint8_t *p, size_t n, struct tblk *out, size_t cap)
{
    size_t off = PRE;
    size_t count = 0;
    while (off + 15 <= n && p[off] == 5) {
        uint32_t name_len = ld32(p + off + 11);
        size_t at = off + 15 + name_len + 1;
        if (at + 4 > n) {
            break;
        }
        uint32_t len = ld32(p + at);
        at += 4;
        at += (4 - at % 4) % 4;
        if (at + len + 1 > n) {
            break;
        }
        assert_true(count < cap && name_len < 16);
        struct tblk *b = &out[count++];
        memcpy(b->name, p + off + 15, name_len);
        b->name[name_len] = '\0';
        b->min_version = ld32(p + off + 7);
        b->start = off;
        b->c = p + at;
        b->len = len;
        b->end = at + len + 1;
        off = b->end;
    }
    return count;
}

/* Appends a block object to w with the padding of its offset in w. */
static void emit(struct wb *w, const struct tblk *b, const uint8_t *content)
{
    size_t name_len = strlen(b->name);
    wb_u8(w, 5);
    wb_u8(w, 5);
    wb_u8(w, 1);
    wb_u32(w, 2);
    wb_u32(w, b->min_version);
    wb_u32(w, (uint32_t)name_len);
    wb_raw(w, b->name, name_len);
    wb_u8(w, 6);
    wb_u32(w, b->len);
    while (w->n % 4 != 0) {
        wb_u8(w, 0);
    }
    wb_raw(w, content, b->len);
    wb_u8(w, 6);
}

/* A varuint at *at of at most 10 bytes: its value and length. */
static uint64_t varu(const uint8_t *p, size_t *at, size_t *len)
{
    uint64_t v = 0;
    size_t k = 0;
    for (;; k++) {
        assert_true(k < 10);
        v |= (uint64_t)(p[*at + k] & 0x7f) << (7 * k);
        if ((p[*at + k] & 0x80) == 0) {
            break;
        }
    }
    *len = k + 1;
    *at += k + 1;
    return v;
}

/*
 * Shifts the timestamps of a header-compressed EventBlock: the header's min and max, and the first
 * blob's timestamp (absolute: the previous header starts at zero); later blobs hold deltas. The
 * new value is written in the same number of bytes (non-minimal if need be, which readers accept).
 */
static void shift_event_block(uint8_t *c, uint32_t len, int64_t shift)
{
    assert_true(len > 20 && (c[2] & 1) != 0);
    st64(c + 4, ld64(c + 4) + (uint64_t)shift);
    st64(c + 12, ld64(c + 12) + (uint64_t)shift);
    size_t at = c[0] | (size_t)c[1] << 8;
    uint8_t flags = c[at++];
    size_t vl;
    if (flags & 0x01) {
        (void)varu(c, &at, &vl);
    }
    if (flags & 0x02) {
        (void)varu(c, &at, &vl);
        (void)varu(c, &at, &vl);
        (void)varu(c, &at, &vl);
    }
    if (flags & 0x04) {
        (void)varu(c, &at, &vl);
    }
    if (flags & 0x08) {
        (void)varu(c, &at, &vl);
    }
    size_t ts_at = at;
    uint64_t ts = varu(c, &at, &vl) + (uint64_t)shift;
    assert_true(vl == 10 || ts >> (7 * vl) == 0);
    for (size_t k = 0; k < vl; k++) {
        c[ts_at + k] = (uint8_t)((ts >> (7 * k)) & 0x7f) | (k + 1 < vl ? 0x80 : 0);
    }
}

/*
 * The capture src followed by copies-1 more copies of its EventBlocks, StackBlocks and SPBlock,
 * the k-th shifted by k * shift ticks, then the end tag: copies sequence-point regions.
 */
static uint8_t *replay(const uint8_t *src, size_t n, int copies, int64_t shift, size_t *out_n)
{
    static struct tblk blocks[512];
    size_t nb = walk(src, n, blocks, 512);
    struct wb w = {0};
    wb_raw(&w, src, PRE);
    for (int k = 0; k < copies; k++) {
        for (size_t i = 0; i < nb; i++) {
            const struct tblk *b = &blocks[i];
            bool md = strcmp(b->name, "MetadataBlock") == 0;
            if (k > 0 && md) {
                continue;
            }
            uint8_t *c = malloc(b->len + 1);
            assert_non_null(c);
            memcpy(c, b->c, b->len);
            if (strcmp(b->name, "EventBlock") == 0) {
                shift_event_block(c, b->len, k * shift);
            } else if (strcmp(b->name, "SPBlock") == 0) {
                st64(c, ld64(c) + (uint64_t)(k * shift));
            }
            emit(&w, b, c);
            free(c);
        }
    }
    wb_u8(&w, 1);
    *out_n = w.n;
    return w.b;
}

/*
 * out is p's whole blocks among its first fed bytes, then the end tag, and reads back COMPLETE; its
 * events are returned.
 */
static uint64_t assert_whole_blocks_ended(const struct wb *out, const uint8_t *p, size_t fed)
{
    static struct tblk blocks[512];
    size_t nb = walk(p, fed, blocks, 512);
    size_t whole = nb > 0 ? blocks[nb - 1].end : PRE;
    assert_int_equal(out->n, whole + 1);
    assert_memory_equal(out->b, p, whole);
    assert_int_equal(out->b[whole], 1);
    struct readback rb;
    read_back(out->b, out->n, &rb);
    return rb.events;
}

/* ---- feeding ------------------------------------------------------------------------------- */

enum chunking { WHOLE = 0, ONE_BYTE = 1, SEVEN = 2, RANDOM = 3 };

static void check_counters(const struct ev_ring *r, const struct ev_ring_limits *lim)
{
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    assert_true(st.bytes_used <= lim->max_bytes);
    assert_true(st.bytes_peak <= lim->max_bytes);
    assert_true(st.bytes_used <= st.bytes_peak);
    assert_int_equal(st.events_fed, st.events_kept + st.events_discarded + st.events_written);
}

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* Feeds p[from..to) in the given chunking; the cap and the counters hold after every call. */
static void feed(struct ev_ring *r, const struct ev_ring_limits *lim, const uint8_t *p, size_t from,
                 size_t to, enum chunking how, uint64_t *rng)
{
    for (size_t off = from; off < to;) {
        size_t k = to - off;
        if (how == ONE_BYTE) {
            k = 1;
        } else if (how == SEVEN) {
            k = k < 7 ? k : 7;
        } else if (how == RANDOM) {
            uint64_t x = xorshift(rng);
            size_t m = (x & 1) ? 1 + (size_t)(x >> 8) % 64 : 1 + (size_t)(x >> 8) % 20000;
            k = k < m ? k : m;
        }
        int rc = ev_ring_feed(r, p + off, k);
        if (rc != 0) {
            char line[300];
            ev_ring_error(r, line, sizeof(line));
            fail_msg("feed at %zu: %d (%s)", off, rc, line);
        }
        check_counters(r, lim);
        off += k;
    }
}

static struct ev_ring *ring_new(const struct ev_ring_limits *lim)
{
    struct ev_ring *r = NULL;
    assert_int_equal(ev_ring_new(&r, lim), 0);
    assert_non_null(r);
    return r;
}

/* Events per EventBlock of a stream, with their timestamps (the checker's block callback). */
struct inblk {
    enum nettrace_block_kind kind;
    uint32_t events;
    int64_t min_ts;
    int64_t max_ts;
};
struct inblocks {
    struct inblk b[2048];
    size_t n;
    uint64_t events;
};

static void on_in_block(void *ud, const struct nettrace_block *b)
{
    struct inblocks *in = ud;
    assert_true(in->n < 2048);
    in->b[in->n++] = (struct inblk){b->kind, b->events, b->min_timestamp, b->max_timestamp};
    if (b->kind == NETTRACE_BLOCK_EVENT) {
        in->events += b->events;
    }
}

static void in_blocks(const uint8_t *p, size_t n, struct inblocks *in)
{
    memset(in, 0, sizeof(*in));
    struct nettrace_checker ck;
    assert_int_equal(nettrace_checker_init(&ck, NULL), 0);
    nettrace_set_block_cb(&ck, on_in_block, in);
    assert_int_equal(nettrace_feed(&ck, p, n), 0);
    assert_int_equal(nettrace_finish(&ck), NETTRACE_COMPLETE);
    nettrace_checker_fini(&ck);
}

static const char *const fixtures[][2] = {
    {"nettrace", "cpu.nettrace"},
    {"nettrace", "gc.nettrace"},
    {"nettrace", "http_ct5.nettrace"},
    {"nettrace", "logs.nettrace"},
    {"nettrace", "rundown_ct4.nettrace"},
    {"events", "demo.nettrace"},
    {"events", "logs.nettrace"},
    {"events", "modules-eventsource.nettrace"},
    {"events", "modules-nologging.nettrace"},
    {"events", "multi.nettrace"},
    {"events", "runtime.nettrace"},
};
#define NFIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

/* ---- tests --------------------------------------------------------------------------------- */

/*
 * The checker's block callback against the blocks walked by hand: same kinds, contents and (for
 * runtime output) the EventBlock header's timestamps, whatever the chunking.
 */
static void test_ev_ring_checker_blocks(void **state)
{
    (void)state;
    for (size_t f = 0; f < NFIXTURES; f++) {
        size_t n;
        uint8_t *p = fixture_read(fixtures[f][0], fixtures[f][1], &n);
        static struct tblk hand[512];
        size_t nb = walk(p, n, hand, 512);
        static struct inblocks in;
        in_blocks(p, n, &in);
        assert_int_equal(in.n, nb);
        for (size_t i = 0; i < nb; i++) {
            static const char *const names[] = {"EventBlock", "MetadataBlock", "StackBlock",
                                                "SPBlock"};
            assert_string_equal(names[in.b[i].kind], hand[i].name);
            if (in.b[i].kind == NETTRACE_BLOCK_EVENT && in.b[i].events > 0) {
                assert_int_equal(in.b[i].min_ts, (int64_t)ld64(hand[i].c + 4));
                assert_int_equal(in.b[i].max_ts, (int64_t)ld64(hand[i].c + 12));
            }
            if (in.b[i].kind == NETTRACE_BLOCK_SP) {
                assert_int_equal(in.b[i].min_ts, (int64_t)ld64(hand[i].c));
            }
        }
        free(p);
    }
}

/*
 * Nothing dropped: trigger (at any point of the stream, in any chunking) + pass-through + finish
 * reproduce the input byte for byte, and so does a snapshot of the whole stream.
 */
static void test_ev_ring_byte_identical(void **state)
{
    (void)state;
    struct ev_ring_limits lim = {.max_bytes = 64u << 20};
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (size_t f = 0; f < NFIXTURES; f++) {
        size_t n;
        uint8_t *p = fixture_read(fixtures[f][0], fixtures[f][1], &n);
        size_t points[] = {0, 50, PRE, n / 3, n / 2, n - 1, n};
        for (size_t t = 0; t < sizeof(points) / sizeof(points[0]); t++) {
            for (int how = WHOLE; how <= RANDOM; how++) {
                if (how == ONE_BYTE && n > 40000 && t % 3 != 0) {
                    continue; /* the big capture byte by byte at a few trigger points only */
                }
                struct ev_ring *r = ring_new(&lim);
                struct sink s = {0};
                feed(r, &lim, p, 0, points[t], (enum chunking)how, &rng);
                assert_int_equal(ev_ring_trigger(r, sink_write, &s), 0);
                assert_int_equal(ev_ring_get_state(r), EV_RING_PASSING);
                feed(r, &lim, p, points[t], n, (enum chunking)how, &rng);
                assert_int_equal(ev_ring_finish(r, false), 0);
                assert_int_equal(ev_ring_get_state(r), EV_RING_FINISHED);
                assert_int_equal(s.w.n, n);
                assert_memory_equal(s.w.b, p, n);
                struct ev_ring_stats st;
                ev_ring_get_stats(r, &st);
                assert_int_equal(st.events_discarded, 0);
                assert_int_equal(st.blocks_discarded, 0);
                assert_int_equal(st.events_written, st.events_fed);
                assert_true(st.input_complete);
                assert_int_equal(ev_ring_feed(r, p, 1), AGENT_E_INVAL);
                ev_ring_free(r);
                free(s.w.b);
            }
        }
        /* A snapshot of the whole stream is the stream. */
        struct ev_ring *r = ring_new(&lim);
        struct sink s = {0};
        feed(r, &lim, p, 0, n, RANDOM, &rng);
        assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
        assert_int_equal(s.w.n, n);
        assert_memory_equal(s.w.b, p, n);
        assert_int_equal(ev_ring_get_state(r), EV_RING_BUFFERING);
        ev_ring_free(r);
        free(s.w.b);
        free(p);
    }
}

/*
 * A snapshot mid-stream is the input's whole blocks so far plus the end tag; the ring keeps
 * running, and a later trigger still gives the whole stream.
 */
static void test_ev_ring_snapshot_keeps_running(void **state)
{
    (void)state;
    struct ev_ring_limits lim = {.max_bytes = 64u << 20};
    size_t n;
    uint8_t *p = fixture_read("nettrace", "cpu.nettrace", &n);
    uint64_t rng = 7;
    struct ev_ring *r = ring_new(&lim);
    struct sink none = {0};
    assert_int_equal(ev_ring_snapshot(r, sink_write, &none), AGENT_E_NOTFOUND);
    feed(r, &lim, p, 0, 60, SEVEN, &rng);
    assert_int_equal(ev_ring_snapshot(r, sink_write, &none), AGENT_E_NOTFOUND);
    assert_int_equal(none.w.n, 0);
    size_t cuts[] = {PRE, 3000, n / 2, n - 300};
    size_t fed = 60;
    for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
        feed(r, &lim, p, fed, cuts[c], RANDOM, &rng);
        fed = cuts[c];
        struct ev_ring_stats before;
        ev_ring_get_stats(r, &before);
        struct sink s = {0};
        assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
        assert_int_equal(assert_whole_blocks_ended(&s.w, p, fed), before.events_kept);
        struct ev_ring_stats after;
        ev_ring_get_stats(r, &after);
        assert_memory_equal(&before, &after, sizeof(before));
        free(s.w.b);
    }
    struct sink s = {0};
    assert_int_equal(ev_ring_trigger(r, sink_write, &s), 0);
    assert_int_equal(ev_ring_snapshot(r, sink_write, &none), AGENT_E_INVAL);
    assert_int_equal(ev_ring_trigger(r, sink_write, &none), AGENT_E_INVAL);
    feed(r, &lim, p, fed, n, RANDOM, &rng);
    assert_int_equal(ev_ring_finish(r, false), 0);
    assert_int_equal(ev_ring_finish(r, false), 0);
    assert_int_equal(s.w.n, n);
    assert_memory_equal(s.w.b, p, n);
    ev_ring_free(r);
    free(s.w.b);
    free(p);
}

/*
 * Under a byte cap (several caps, several chunkings, real captures and a replayed one of four
 * regions): the cap holds after every feed, the counters add up, and the snapshot and the
 * trigger's output (trigger at half the stream, then pass-through) read back COMPLETE with every
 * metadata and stack defined and as many events as the ring says it kept or wrote.
 */
static void run_capped(const uint8_t *p, size_t n, size_t max_bytes, enum chunking how,
                       uint64_t *rng, uint64_t *discarded)
{
    struct ev_ring_limits lim = {.max_bytes = max_bytes};
    struct ev_ring *r = ring_new(&lim);
    feed(r, &lim, p, 0, n / 2, how, rng);
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    struct sink snap = {0};
    assert_int_equal(ev_ring_snapshot(r, sink_write, &snap), 0);
    struct readback rb;
    read_back(snap.w.b, snap.w.n, &rb);
    assert_int_equal(rb.events, st.events_kept);
    if (st.events_kept > 0) {
        assert_int_equal(rb.min_ts, st.oldest_kept);
        assert_int_equal(rb.max_ts, st.newest_kept);
    }
    struct sink out = {0};
    assert_int_equal(ev_ring_trigger(r, sink_write, &out), 0);
    feed(r, &lim, p, n / 2, n, how, rng);
    assert_int_equal(ev_ring_finish(r, false), 0);
    ev_ring_get_stats(r, &st);
    read_back(out.w.b, out.w.n, &rb);
    assert_int_equal(rb.events, st.events_written);
    assert_int_equal(st.events_kept, 0);
    assert_int_equal(st.events_fed, st.events_written + st.events_discarded);
    *discarded += st.events_discarded;
    ev_ring_free(r);
    free(snap.w.b);
    free(out.w.b);
}

static void test_ev_ring_cap_holds(void **state)
{
    (void)state;
    size_t n;
    uint8_t *cpu = fixture_read("nettrace", "cpu.nettrace", &n);
    size_t rn;
    uint8_t *multi = replay(cpu, n, 4, 2000000000ll, &rn);
    static const size_t caps[] = {8000, 12000, 20000, 40000, 100000, 300000};
    uint64_t rng = 42;
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        uint64_t dropped = 0;
        for (int how = WHOLE; how <= RANDOM; how++) {
            if (how == ONE_BYTE) {
                continue; /* byte by byte below, on the smaller captures */
            }
            run_capped(cpu, n, caps[c], (enum chunking)how, &rng, &dropped);
            run_capped(multi, rn, caps[c], (enum chunking)how, &rng, &dropped);
        }
        if (caps[c] < 100000) {
            assert_true(dropped > 0);
        }
    }
    static const char *const small[][2] = {{"nettrace", "gc.nettrace"},
                                           {"nettrace", "rundown_ct4.nettrace"},
                                           {"nettrace", "http_ct5.nettrace"}};
    for (size_t f = 0; f < 3; f++) {
        size_t sn;
        uint8_t *sp = fixture_read(small[f][0], small[f][1], &sn);
        uint64_t dropped = 0;
        run_capped(sp, sn, 9000, ONE_BYTE, &rng, &dropped);
        run_capped(sp, sn, 14000, RANDOM, &rng, &dropped);
        free(sp);
    }
    free(multi);
    free(cpu);
}

/*
 * Several regions, a cap of about one and a half of them: whole regions go (SPBlock included) and
 * the snapshot starts at a region boundary with every StackBlock of its first region.
 */
static void test_ev_ring_regions_evicted_whole(void **state)
{
    (void)state;
    size_t n;
    uint8_t *cpu = fixture_read("nettrace", "cpu.nettrace", &n);
    size_t rn;
    uint8_t *multi = replay(cpu, n, 5, 2000000000ll, &rn);
    struct ev_ring_limits lim = {.max_bytes = 260000};
    struct ev_ring *r = ring_new(&lim);
    uint64_t rng = 3;
    feed(r, &lim, multi, 0, rn, RANDOM, &rng);
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    assert_true(st.regions_discarded >= 3);
    struct sink s = {0};
    assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
    struct readback rb;
    read_back(s.w.b, s.w.n, &rb);
    assert_int_equal(rb.events, st.events_kept);
    /* 167 KB regions under a 260 KB cap: the last region whole, and its predecessor trimmed
     * away whole too (a closed region is never cut). */
    static struct tblk in[512];
    static struct tblk out[512];
    size_t nin = walk(cpu, n, in, 512);
    size_t nout = walk(s.w.b, s.w.n, out, 512);
    size_t stacks_in = 0;
    size_t stacks_out = 0;
    for (size_t i = 0; i < nin; i++) {
        stacks_in += strcmp(in[i].name, "StackBlock") == 0;
    }
    for (size_t i = 0; i < nout; i++) {
        stacks_out += strcmp(out[i].name, "StackBlock") == 0;
    }
    assert_int_equal(rb.blocks[NETTRACE_BLOCK_SP] * stacks_in, stacks_out);
    assert_int_equal(rb.blocks[NETTRACE_BLOCK_METADATA], 4);
    static struct inblocks ib;
    in_blocks(cpu, n, &ib);
    assert_int_equal(rb.events, rb.blocks[NETTRACE_BLOCK_SP] * ib.events);
    ev_ring_free(r);
    free(s.w.b);
    free(multi);
    free(cpu);
}

/*
 * Age: with max_age, the ring keeps exactly the EventBlocks whose newest event lies within max_age
 * of the newest timestamp fed (in these streams block timestamps only grow), reports the oldest
 * kept event's timestamp, and the output holds those events.
 */
static void check_age(const uint8_t *p, size_t n, uint64_t age_ms, size_t max_bytes)
{
    static struct inblocks in;
    in_blocks(p, n, &in);
    int64_t newest = INT64_MIN;
    for (size_t i = 0; i < in.n; i++) {
        bool timed = in.b[i].kind == NETTRACE_BLOCK_SP ||
                     (in.b[i].kind == NETTRACE_BLOCK_EVENT && in.b[i].events > 0);
        if (timed && in.b[i].max_ts > newest) {
            newest = in.b[i].max_ts;
        }
    }
    int64_t cutoff = newest - (int64_t)age_ms * 1000000; /* QPC frequency 1 GHz */
    uint64_t expect = 0;
    int64_t oldest = INT64_MAX;
    for (size_t i = 0; i < in.n; i++) {
        if (in.b[i].kind == NETTRACE_BLOCK_EVENT && in.b[i].events > 0 &&
            in.b[i].max_ts >= cutoff) {
            expect += in.b[i].events;
            oldest = in.b[i].min_ts < oldest ? in.b[i].min_ts : oldest;
        }
    }
    struct ev_ring_limits lim = {.max_bytes = max_bytes, .max_age_ms = age_ms};
    struct ev_ring *r = ring_new(&lim);
    uint64_t rng = age_ms + 1;
    feed(r, &lim, p, 0, n, RANDOM, &rng);
    struct nettrace_trace_info ti;
    assert_int_equal(ev_ring_trace_info(r, &ti), 0);
    assert_int_equal(ti.qpc_frequency, 1000000000);
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    assert_int_equal(st.newest_seen, newest);
    assert_int_equal(st.events_kept, expect);
    assert_int_equal(st.events_discarded, in.events - expect);
    struct sink s = {0};
    assert_int_equal(ev_ring_trigger(r, sink_write, &s), 0);
    assert_int_equal(ev_ring_finish(r, false), 0);
    struct readback rb;
    read_back(s.w.b, s.w.n, &rb);
    assert_int_equal(rb.events, expect);
    if (expect > 0) {
        assert_int_equal(st.oldest_kept, oldest);
        assert_int_equal(rb.min_ts, oldest);
        assert_true(st.newest_kept >= cutoff);
    }
    ev_ring_free(r);
    free(s.w.b);
}

static void test_ev_ring_age(void **state)
{
    (void)state;
    size_t n;
    uint8_t *cpu = fixture_read("nettrace", "cpu.nettrace", &n);
    /* cpu.nettrace spans 3242725540025..3244860201377 ns, about 2.1 s. */
    static const uint64_t ages[] = {1, 250, 700, 1500, 2200, 60000};
    for (size_t a = 0; a < sizeof(ages) / sizeof(ages[0]); a++) {
        check_age(cpu, n, ages[a], 64u << 20);
    }
    size_t rn;
    uint8_t *multi = replay(cpu, n, 4, 2500000000ll, &rn);
    static const uint64_t ages_multi[] = {100, 2000, 3000, 5200, 9000, 20000};
    for (size_t a = 0; a < sizeof(ages_multi) / sizeof(ages_multi[0]); a++) {
        check_age(multi, rn, ages_multi[a], 64u << 20);
    }
    size_t gn;
    uint8_t *gc = fixture_read("nettrace", "gc.nettrace", &gn);
    check_age(gc, gn, 1500, 1u << 20);
    check_age(gc, gn, 500, 1u << 20);
    /* Age and a cap together: the cap still holds (checked at every feed) and so do the counters.
     */
    struct ev_ring_limits lim = {.max_bytes = 30000, .max_age_ms = 3000};
    struct ev_ring *r = ring_new(&lim);
    uint64_t rng = 5;
    feed(r, &lim, multi, 0, rn, RANDOM, &rng);
    struct sink s = {0};
    assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
    struct readback rb;
    read_back(s.w.b, s.w.n, &rb);
    ev_ring_free(r);
    free(s.w.b);
    free(gc);
    free(multi);
    free(cpu);
}

/* ---- a synthetic stream with chosen stacks ------------------------------------------------ */

/*
 * Blocks written by hand (docs/nettrace.md §3-5; uncompressed blobs so that stack ids are
 * explicit): a MetadataBlock defining one event, StackBlocks of one 2,988-byte stack each,
 * EventBlocks of one event using a given stack, SPBlocks.
 */
struct syn {
    struct wb w;
    uint32_t seq;
    int64_t ts;
};

static void syn_block(struct syn *y, const char *name, const struct wb *content)
{
    struct tblk b = {.min_version = 2, .len = (uint32_t)content->n};
    (void)snprintf(b.name, sizeof(b.name), "%s", name);
    emit(&y->w, &b, content->b);
}

static void syn_blob(struct wb *c, uint32_t md_id, uint32_t seq, uint32_t stack, int64_t ts,
                     const struct wb *pl)
{
    size_t pad = (4 - pl->n % 4) % 4;
    wb_u32(c, (uint32_t)(76 + pl->n + pad));
    wb_u32(c, md_id);
    wb_u32(c, seq);
    wb_u64(c, md_id != 0 ? 7 : 0);
    wb_u64(c, md_id != 0 ? 7 : 0);
    wb_u32(c, 0);
    wb_u32(c, stack);
    wb_u64(c, (uint64_t)ts);
    for (int k = 0; k < 32; k++) {
        wb_u8(c, 0);
    }
    wb_u32(c, (uint32_t)pl->n);
    wb_raw(c, pl->b, pl->n);
    wb_le(c, 0, pad);
}

static void syn_header(struct wb *c, int64_t ts)
{
    wb_u16(c, 20);
    wb_u16(c, 0);
    wb_u64(c, (uint64_t)ts);
    wb_u64(c, (uint64_t)ts);
}

/* A MetadataBlock defining md_id for provider "P" + pad_chars characters. */
static void syn_metadata(struct syn *y, uint32_t md_id, size_t pad_chars)
{
    struct wb pl = {0};
    wb_u32(&pl, md_id);
    for (size_t k = 0; k < pad_chars + 1; k++) {
        wb_u16(&pl, 'P');
    }
    wb_u16(&pl, 0);
    wb_u32(&pl, 1); /* event id */
    wb_u16(&pl, 0); /* empty event name */
    wb_u64(&pl, 0);
    wb_u32(&pl, 0);
    wb_u32(&pl, 4);
    wb_u32(&pl, 0); /* no fields */
    struct wb c = {0};
    syn_header(&c, y->ts);
    syn_blob(&c, 0, 0, 0, y->ts, &pl);
    syn_block(y, "MetadataBlock", &c);
    free(pl.b);
    free(c.b);
}

static void syn_stack(struct syn *y, uint32_t id)
{
    struct wb c = {0};
    wb_u32(&c, id);
    wb_u32(&c, 1);
    wb_u32(&c, 2984);
    for (uint32_t k = 0; k < 2984 / 8; k++) {
        wb_u64(&c, 0x7f0000000000ull + id * 0x1000ull + k);
    }
    syn_block(y, "StackBlock", &c);
    free(c.b);
}

static void syn_event(struct syn *y, uint32_t stack)
{
    y->ts += 1000000; /* 1 ms */
    struct wb pl = {0};
    wb_u32(&pl, stack);
    struct wb c = {0};
    syn_header(&c, y->ts);
    syn_blob(&c, 1, ++y->seq, stack, y->ts, &pl);
    syn_block(y, "EventBlock", &c);
    free(pl.b);
    free(c.b);
}

static void syn_sp(struct syn *y)
{
    y->ts += 1000000;
    struct wb c = {0};
    wb_u64(&c, (uint64_t)y->ts);
    wb_u32(&c, 0);
    syn_block(y, "SPBlock", &c);
    free(c.b);
}

/*
 * Three regions under an 8,000-byte cap (stack blocks ~3 KB each):
 *  1. A(1) E1(1) B(2) E2(2) C(3) E3(1) E4(3) E5(1) SP: C finds no room once E1 and E2 are gone and
 *     is dropped rather than A or B; E4, which uses it, is dropped; E3 and E5 stay.
 *  2. D(1) E6(1) SP: pushes region 1 out whole; stack 1 is alive again (ids start over).
 *  3. F(1) G(2) MD2 E7(1) E8(2) SP: a big MetadataBlock needs room; region 2 goes whole, then the
 *     open region's oldest StackBlock F (the region has no event); E7 is dropped with it.
 * *after_c gets the offset just after C (a trigger point).
 */
static uint8_t *syn_stream(size_t *n, size_t *after_c)
{
    struct nt t;
    nt_begin(&t);
    struct syn y = {.w = t.out, .ts = SYNC_QPC + 1000};
    syn_metadata(&y, 1, 0);
    syn_stack(&y, 1);
    syn_event(&y, 1);
    syn_stack(&y, 2);
    syn_event(&y, 2);
    syn_stack(&y, 3);
    *after_c = y.w.n;
    syn_event(&y, 1);
    syn_event(&y, 3);
    syn_event(&y, 1);
    syn_sp(&y);
    syn_stack(&y, 1);
    syn_event(&y, 1);
    syn_sp(&y);
    syn_stack(&y, 1);
    syn_stack(&y, 2);
    syn_metadata(&y, 2, 1200);
    syn_event(&y, 1);
    syn_event(&y, 2);
    syn_sp(&y);
    wb_u8(&y.w, 1);
    free(t.blk.b);
    *n = y.w.n;
    return y.w.b;
}

/*
 * StackBlocks under pressure: an event never refers to a stack the output lacks, whether the
 * stack was refused on arrival or pushed out by metadata, before the trigger or after it.
 */
static void test_ev_ring_stack_eviction(void **state)
{
    (void)state;
    size_t n;
    size_t after_c;
    uint8_t *p = syn_stream(&n, &after_c);
    struct readback rb;
    read_back(p, n, &rb);
    assert_int_equal(rb.events, 8);
    struct ev_ring_limits lim = {.max_bytes = 8000};
    for (int how = WHOLE; how <= RANDOM; how++) {
        uint64_t rng = (uint64_t)how + 1;
        /* Snapshots after region 1 and at the end. */
        struct ev_ring *r = ring_new(&lim);
        feed(r, &lim, p, 0, after_c, (enum chunking)how, &rng);
        struct ev_ring_stats st;
        ev_ring_get_stats(r, &st);
        assert_int_equal(st.blocks_discarded, 3); /* E1, E2, C */
        assert_int_equal(st.events_kept, 0);
        feed(r, &lim, p, after_c, n, (enum chunking)how, &rng);
        ev_ring_get_stats(r, &st);
        assert_int_equal(st.events_fed, 8);
        assert_int_equal(st.events_kept, 1);
        assert_int_equal(st.regions_discarded, 2);
        struct sink s = {0};
        assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
        read_back(s.w.b, s.w.n, &rb);
        assert_int_equal(rb.events, 1);
        assert_int_equal(rb.blocks[NETTRACE_BLOCK_METADATA], 2);
        assert_int_equal(rb.blocks[NETTRACE_BLOCK_STACK], 1); /* G */
        assert_int_equal(rb.blocks[NETTRACE_BLOCK_SP], 1);
        ev_ring_free(r);
        free(s.w.b);

        /* Triggered right after C was refused: E4 is still dropped in pass-through; after the
         * sequence point everything passes. */
        r = ring_new(&lim);
        feed(r, &lim, p, 0, after_c, (enum chunking)how, &rng);
        struct sink out = {0};
        assert_int_equal(ev_ring_trigger(r, sink_write, &out), 0);
        feed(r, &lim, p, after_c, n, (enum chunking)how, &rng);
        assert_int_equal(ev_ring_finish(r, false), 0);
        ev_ring_get_stats(r, &st);
        assert_int_equal(st.events_written, 5);   /* E3 E5 E6 E7 E8 */
        assert_int_equal(st.events_discarded, 3); /* E1 E2 E4 */
        read_back(out.w.b, out.w.n, &rb);
        assert_int_equal(rb.events, 5);
        ev_ring_free(r);
        free(out.w.b);
    }
    free(p);
}

/* A cap too small for the preamble and the metadata: the ring fails, and writes nothing. */
static void test_ev_ring_metadata_over_cap(void **state)
{
    (void)state;
    size_t n;
    uint8_t *cpu = fixture_read("nettrace", "cpu.nettrace", &n);
    struct ev_ring_limits lim = {.max_bytes = 2000}; /* cpu's MetadataBlocks: ~1.9 KB of content */
    struct ev_ring *r = ring_new(&lim);
    int rc = 0;
    for (size_t off = 0; off < n && rc == 0; off += 100) {
        rc = ev_ring_feed(r, cpu + off, n - off < 100 ? n - off : 100);
        check_counters(r, &lim);
    }
    assert_int_equal(rc, AGENT_E_TOOBIG);
    assert_int_equal(ev_ring_get_state(r), EV_RING_FAILED);
    assert_int_equal(ev_ring_feed(r, cpu, 1), AGENT_E_TOOBIG);
    char line[300];
    ev_ring_error(r, line, sizeof(line));
    assert_non_null(strstr(line, "metadata"));
    struct sink s = {0};
    assert_int_equal(ev_ring_snapshot(r, sink_write, &s), AGENT_E_TOOBIG);
    assert_int_equal(ev_ring_trigger(r, sink_write, &s), AGENT_E_TOOBIG);
    assert_int_equal(ev_ring_finish(r, true), AGENT_E_INVAL);
    assert_int_equal(s.w.n, 0);
    ev_ring_free(r);

    /* A cap that holds the metadata but no EventBlock: every event is dropped, the trace stays
     * valid (metadata only). */
    lim.max_bytes = 5000;
    r = ring_new(&lim);
    uint64_t rng = 1;
    feed(r, &lim, cpu, 0, n, RANDOM, &rng);
    assert_int_equal(ev_ring_snapshot(r, sink_write, &s), 0);
    struct readback rb;
    read_back(s.w.b, s.w.n, &rb);
    assert_int_equal(rb.blocks[NETTRACE_BLOCK_METADATA], 4);
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    assert_int_equal(rb.events, st.events_kept);
    assert_int_equal(st.events_fed, st.events_kept + st.events_discarded);
    ev_ring_free(r);
    free(s.w.b);
    free(cpu);
}

/*
 * A live stream cut short: finish without the input's end tag refuses unless asked; asked, it
 * ends the output after the last whole block (a block in flight is left out).
 */
static void test_ev_ring_finish_cut_short(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "rundown_ct4.nettrace", &n);
    struct ev_ring_limits lim = {.max_bytes = 1u << 20};
    size_t cuts[] = {0, 40, PRE, PRE + 10, n / 2, n - 1};
    for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
        struct ev_ring *r = ring_new(&lim);
        uint64_t rng = c;
        struct sink s = {0};
        assert_int_equal(ev_ring_finish(r, true), AGENT_E_INVAL); /* not triggered */
        feed(r, &lim, p, 0, cuts[c] / 2, RANDOM, &rng);
        assert_int_equal(ev_ring_trigger(r, sink_write, &s), 0);
        feed(r, &lim, p, cuts[c] / 2, cuts[c], RANDOM, &rng);
        assert_int_equal(ev_ring_finish(r, false), AGENT_E_TRUNC);
        if (cuts[c] < PRE) {
            assert_int_equal(ev_ring_finish(r, true), AGENT_E_TRUNC); /* no trace to end */
            assert_int_equal(s.w.n, 0);
        } else {
            assert_int_equal(ev_ring_finish(r, true), 0);
            (void)assert_whole_blocks_ended(&s.w, p, cuts[c]);
        }
        ev_ring_free(r);
        free(s.w.b);
    }
    free(p);
}

/* An invalid stream: the ring fails; after a trigger what was written still ends validly. */
static void test_ev_ring_invalid_input(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "gc.nettrace", &n);
    static struct tblk blocks[512];
    size_t nb = walk(p, n, blocks, 512);
    assert_true(nb > 6);
    size_t bad = blocks[6].end - 1; /* the 7th block's end tag */
    p[bad] = 0x07;
    struct ev_ring_limits lim = {.max_bytes = 1u << 20};

    struct ev_ring *r = ring_new(&lim);
    assert_int_equal(ev_ring_feed(r, p, n), AGENT_E_PROTO);
    assert_int_equal(ev_ring_get_state(r), EV_RING_FAILED);
    char line[300];
    ev_ring_error(r, line, sizeof(line));
    assert_non_null(strstr(line, "end tag"));
    struct sink s = {0};
    assert_int_equal(ev_ring_trigger(r, sink_write, &s), AGENT_E_PROTO);
    assert_int_equal(s.w.n, 0);
    ev_ring_free(r);

    r = ring_new(&lim);
    assert_int_equal(ev_ring_trigger(r, sink_write, &s), 0);
    assert_int_equal(ev_ring_feed(r, p, n), AGENT_E_PROTO);
    assert_int_equal(ev_ring_finish(r, false), AGENT_E_TRUNC);
    assert_int_equal(ev_ring_finish(r, true), 0);
    assert_int_equal(s.w.n, blocks[5].end + 1);
    struct readback rb;
    read_back(s.w.b, s.w.n, &rb);
    ev_ring_free(r);
    free(s.w.b);

    /* NetTrace V6 is refused as soon as its header shows. */
    static const uint8_t v6[20] = {'N', 'e', 't', 't', 'r', 'a', 'c', 'e', 0, 0, 0, 0, 6, 0, 0, 0};
    r = ring_new(&lim);
    assert_int_equal(ev_ring_feed(r, v6, 11), 0);
    assert_int_equal(ev_ring_feed(r, v6 + 11, 9), AGENT_E_PROTO);
    ev_ring_error(r, line, sizeof(line));
    assert_non_null(strstr(line, "V6"));
    ev_ring_free(r);
    free(p);
}

/* The output's write failing: the trigger or pass-through fails the ring; a snapshot does not. */
static void test_ev_ring_write_failure(void **state)
{
    (void)state;
    size_t n;
    uint8_t *p = fixture_read("nettrace", "gc.nettrace", &n);
    struct ev_ring_limits lim = {.max_bytes = 1u << 20};
    for (int at = 1; at <= 12; at++) {
        struct ev_ring *r = ring_new(&lim);
        assert_int_equal(ev_ring_feed(r, p, n / 2), 0);
        struct sink s = {.fail_at = at};
        assert_int_equal(ev_ring_snapshot(r, sink_write, &s), -EPIPE);
        assert_int_equal(ev_ring_get_state(r), EV_RING_BUFFERING);
        s.calls = 0;
        int rc = ev_ring_trigger(r, sink_write, &s);
        if (rc == 0) {
            rc = ev_ring_feed(r, p + n / 2, n - n / 2);
        }
        assert_int_equal(rc, -EPIPE);
        assert_int_equal(ev_ring_get_state(r), EV_RING_FAILED);
        assert_int_equal(ev_ring_finish(r, true), -EPIPE);
        struct ev_ring_stats st;
        ev_ring_get_stats(r, &st);
        assert_int_equal(st.events_fed, st.events_kept + st.events_discarded + st.events_written);
        ev_ring_free(r);
        free(s.w.b);
    }
    free(p);
}

/*
 * A writer that takes pace_bytes and then asks for a pause (as the agent's writer does at
 * egress_full): the trigger and each ev_ring_drain stop after at most one more block, the ring
 * DRAINING meanwhile (feed and finish refused, nothing lost), the memory held falls as blocks go
 * out, and the output is still the input byte for byte.
 */
struct paced {
    struct sink s;
    size_t pace;           /* bytes taken before a pause */
    size_t since;          /* bytes since the last pause */
    int fail_after_pauses; /* > 0: fail (-EPIPE) once this many pauses were asked */
    int pauses;
};

static int paced_write(void *ud, const uint8_t *p, size_t n)
{
    struct paced *w = ud;
    if (w->fail_after_pauses > 0 && w->pauses >= w->fail_after_pauses) {
        return -EPIPE;
    }
    wb_raw(&w->s.w, p, n);
    w->since += n;
    if (w->since >= w->pace) {
        w->since = 0;
        w->pauses++;
        return EV_RING_PAUSE;
    }
    return 0;
}

static void test_ev_ring_paced_drain(void **state)
{
    (void)state;
    struct ev_ring_limits lim = {.max_bytes = 64u << 20};
    uint64_t rng = 0x2545f4914f6cdd1dull;
    for (size_t f = 0; f < NFIXTURES; f++) {
        size_t n;
        uint8_t *p = fixture_read(fixtures[f][0], fixtures[f][1], &n);
        size_t points[] = {PRE, n / 2, n};
        for (size_t t = 0; t < sizeof(points) / sizeof(points[0]); t++) {
            struct ev_ring *r = ring_new(&lim);
            feed(r, &lim, p, 0, points[t], RANDOM, &rng);
            struct ev_ring_stats st;
            ev_ring_get_stats(r, &st);
            uint64_t held = st.bytes_used;
            uint64_t at_trigger = held;
            struct paced w = {.pace = 4096};
            int rc = ev_ring_trigger(r, paced_write, &w);
            int calls = 1;
            size_t before = 0;
            while (rc == EV_RING_PAUSED) {
                assert_int_equal(ev_ring_get_state(r), EV_RING_DRAINING);
                /* The writer stopped the drain: the block in hand ends it (the fixtures' blocks
                 * are under 128 KiB). */
                assert_true(w.s.w.n - before <= w.pace + 128 * 1024);
                before = w.s.w.n;
                assert_int_equal(ev_ring_feed(r, p + points[t], points[t] < n ? 1 : 0),
                                 AGENT_E_INVAL);
                assert_int_equal(ev_ring_finish(r, true), AGENT_E_INVAL);
                ev_ring_get_stats(r, &st);
                assert_true(st.bytes_used <= held);
                held = st.bytes_used;
                assert_int_equal(st.events_fed,
                                 st.events_kept + st.events_discarded + st.events_written);
                rc = ev_ring_drain(r);
                calls++;
            }
            assert_int_equal(rc, 0);
            assert_int_equal(ev_ring_get_state(r), EV_RING_PASSING);
            assert_int_equal(ev_ring_drain(r), 0);
            if (at_trigger > 2 * w.pace) {
                assert_true(calls >= 2); /* a ring over the pace went out in more than one call */
            }
            feed(r, &lim, p, points[t], n, RANDOM, &rng);
            assert_int_equal(ev_ring_finish(r, false), 0);
            assert_int_equal(w.s.w.n, n);
            assert_memory_equal(w.s.w.b, p, n);
            ev_ring_get_stats(r, &st);
            assert_int_equal(st.events_written, st.events_fed);
            assert_int_equal(st.bytes_used, PRE);
            ev_ring_free(r);
            free(w.s.w.b);
        }
        /* The writer fails mid-drain: the ring fails, the counters still add up. */
        struct ev_ring *r = ring_new(&lim);
        feed(r, &lim, p, 0, n, WHOLE, &rng);
        struct paced w = {.pace = 256, .fail_after_pauses = 1};
        int rc = ev_ring_trigger(r, paced_write, &w);
        while (rc == EV_RING_PAUSED) {
            rc = ev_ring_drain(r);
        }
        assert_int_equal(rc, -EPIPE);
        assert_int_equal(ev_ring_get_state(r), EV_RING_FAILED);
        assert_int_equal(ev_ring_drain(r), -EPIPE);
        struct ev_ring_stats st;
        ev_ring_get_stats(r, &st);
        assert_int_equal(st.events_fed, st.events_kept + st.events_discarded + st.events_written);
        assert_int_equal(st.events_kept, 0);
        ev_ring_free(r);
        free(w.s.w.b);
        free(p);
    }
}

static void test_ev_ring_new_args(void **state)
{
    (void)state;
    struct ev_ring *r = NULL;
    struct ev_ring_limits lim = {.max_bytes = PRE};
    assert_int_equal(ev_ring_new(&r, &lim), AGENT_E_INVAL);
    assert_int_equal(ev_ring_new(&r, NULL), AGENT_E_INVAL);
    assert_int_equal(ev_ring_new(NULL, &lim), AGENT_E_INVAL);
    assert_null(r);
    lim.max_bytes = PRE + 1;
    assert_int_equal(ev_ring_new(&r, &lim), 0);
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    assert_int_equal(st.bytes_used, PRE);
    assert_int_equal(ev_ring_get_state(r), EV_RING_BUFFERING);
    char line[8];
    ev_ring_error(r, line, sizeof(line));
    assert_string_equal(line, "");
    struct nettrace_trace_info ti;
    assert_int_equal(ev_ring_trace_info(r, &ti), AGENT_E_NOTFOUND);
    ev_ring_free(r);
    ev_ring_free(NULL);
}

/* EV_RING_SEED=<path>: saves the replayed capture (three regions) as a fuzz seed. */
static void test_ev_ring_seed(void **state)
{
    (void)state;
    const char *path = getenv("EV_RING_SEED");
    if (path == NULL || path[0] == '\0') {
        return;
    }
    size_t n;
    uint8_t *gc = fixture_read("nettrace", "gc.nettrace", &n);
    size_t rn;
    uint8_t *multi = replay(gc, n, 3, 3000000000ll, &rn);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(multi, 1, rn, fp), rn);
    assert_int_equal(fclose(fp), 0);
    free(multi);
    free(gc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_ring_checker_blocks),
        cmocka_unit_test(test_ev_ring_byte_identical),
        cmocka_unit_test(test_ev_ring_snapshot_keeps_running),
        cmocka_unit_test(test_ev_ring_cap_holds),
        cmocka_unit_test(test_ev_ring_regions_evicted_whole),
        cmocka_unit_test(test_ev_ring_age),
        cmocka_unit_test(test_ev_ring_stack_eviction),
        cmocka_unit_test(test_ev_ring_metadata_over_cap),
        cmocka_unit_test(test_ev_ring_finish_cut_short),
        cmocka_unit_test(test_ev_ring_invalid_input),
        cmocka_unit_test(test_ev_ring_write_failure),
        cmocka_unit_test(test_ev_ring_paced_drain),
        cmocka_unit_test(test_ev_ring_new_args),
        cmocka_unit_test(test_ev_ring_seed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
