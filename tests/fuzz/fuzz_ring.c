/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a continuous session's stream kept in a ring of blocks and written out
 * (events/ev_ring.h). The input is the stream; its hash picks the limits (a byte cap from "too
 * small for the metadata" to roomy, a maximum age, the checker's caps), the chunking, and when and
 * how the trace is written: trigger then pass-through, a snapshot then a trigger, or a snapshot at
 * the end, and how often the trigger's writer asks for a pause (its drain then goes on with
 * ev_ring_drain). Whatever the ring writes must be nothing or a COMPLETE trace per
 * events/nettrace.h with exactly the events the ring says it wrote (with every stack defined when
 * the input's stacks were), the cap must hold and the counters add up after every call, and when
 * nothing was dropped the output of a complete input is the input itself, byte for byte. Seeds: the
 * real captures of fuzz_nettrace and a three-region stream (tests/events/test_ev_ring.c,
 * EV_RING_SEED).
 */
#include "fuzz.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_ring.h"
#include "nettrace.h"

struct out {
    uint8_t *b;
    size_t n;
    size_t cap;
    size_t pace;  /* > 0: ask for a pause (EV_RING_PAUSE) every pace bytes, as egress_full does */
    size_t since; /* bytes since the last pause */
};

static int out_write(void *ud, const uint8_t *p, size_t n)
{
    struct out *o = ud;
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        while (cap < o->n + n) {
            cap *= 2;
        }
        uint8_t *b = realloc(o->b, cap);
        if (b == NULL) {
            return -ENOMEM;
        }
        o->b = b;
        o->cap = cap;
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
    o->since += n;
    if (o->pace > 0 && o->since >= o->pace) {
        o->since = 0;
        return EV_RING_PAUSE;
    }
    return 0;
}

/* Nothing, or a COMPLETE trace holding `events` events. */
static void check_out(const struct out *o, bool strict, uint64_t events)
{
    if (o->n == 0) {
        CHECK(events == 0);
        return;
    }
    struct nettrace_checker ck;
    struct nettrace_options opt = {.flags = strict ? NETTRACE_STRICT_STACKS : 0};
    CHECK(nettrace_checker_init(&ck, &opt) == 0);
    (void)nettrace_feed(&ck, o->b, o->n);
    CHECK(nettrace_finish(&ck) == NETTRACE_COMPLETE);
    CHECK(nettrace_get_stats(&ck)->events == events);
    nettrace_checker_fini(&ck);
}

static void check_counters(const struct ev_ring *r, size_t max_bytes)
{
    struct ev_ring_stats st;
    ev_ring_get_stats(r, &st);
    CHECK(st.bytes_used <= max_bytes && st.bytes_peak <= max_bytes);
    CHECK(st.events_fed == st.events_kept + st.events_discarded + st.events_written);
}

/* Feeds data[*off..to) in chunks; stops at the first error (the ring then stays failed). */
static void feed(struct ev_ring *r, const uint8_t *data, size_t *off, size_t to, uint64_t *rng,
                 size_t max_bytes)
{
    while (*off < to) {
        size_t n = fuzz_next_chunk(rng, to - *off);
        int rc = ev_ring_feed(r, data + *off, n);
        check_counters(r, max_bytes);
        *off += n;
        if (rc != 0) {
            CHECK(rc == AGENT_E_PROTO || rc == AGENT_E_TOOBIG || rc == -ENOMEM);
            CHECK(ev_ring_get_state(r) == EV_RING_FAILED);
            CHECK(ev_ring_feed(r, data, 1) == rc);
            return;
        }
    }
}

/* Whether the input's stacks are all defined (then so must the output's be). */
static bool input_stacks_whole(const uint8_t *data, size_t size)
{
    struct nettrace_checker ck;
    CHECK(nettrace_checker_init(&ck, NULL) == 0);
    (void)nettrace_feed(&ck, data, size);
    bool whole = nettrace_get_stats(&ck)->missing_stacks == 0;
    nettrace_checker_fini(&ck);
    return whole;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz_fnv1a(data, size);
    static const size_t caps[8] = {103, 600, 2048, 5000, 12000, 40000, 200000, 64u << 20};
    static const uint64_t ages[8] = {0, 0, 0, 0, 1, 20, 1000, 100000};
    struct ev_ring_limits lim = {
        .max_bytes = caps[h & 7],
        .max_age_ms = ages[h >> 3 & 7],
        .max_block = (h >> 6 & 7) == 0 ? 4096 : 0,
        .max_metadata = (h >> 9 & 7) == 0 ? 4 : 0,
    };
    unsigned mode = (unsigned)(h >> 12 & 3);
    size_t at = size == 0 ? 0 : (size_t)((h >> 16) % (size + 1));
    bool strict = input_stacks_whole(data, size);
    uint64_t rng = h | 1;

    struct ev_ring *r = NULL;
    CHECK(ev_ring_new(&r, &lim) == 0);
    struct out snap = {0};
    struct out trace = {0};
    size_t off = 0;
    feed(r, data, &off, mode == 3 ? size : at, &rng, lim.max_bytes);
    if (mode == 1 || mode == 3) {
        struct ev_ring_stats st;
        ev_ring_get_stats(r, &st);
        int rc = ev_ring_snapshot(r, out_write, &snap);
        CHECK(rc == 0 || snap.n == 0);
        check_out(&snap, strict, rc == 0 ? st.events_kept : 0);
        struct ev_ring_stats again;
        ev_ring_get_stats(r, &again);
        CHECK(memcmp(&st, &again, sizeof(st)) == 0);
        if (rc == 0 && mode == 3 && st.input_complete && st.blocks_discarded == 0) {
            CHECK(snap.n == size && memcmp(snap.b, data, size) == 0);
        }
    }
    if (mode != 3) {
        static const size_t paces[4] = {0, 1, 300, 65536};
        trace.pace = paces[h >> 24 & 3];
        int rc = ev_ring_trigger(r, out_write, &trace);
        while (rc == EV_RING_PAUSED) { /* the writer paced the drain: nothing lost meanwhile */
            CHECK(ev_ring_get_state(r) == EV_RING_DRAINING);
            CHECK(ev_ring_finish(r, true) == AGENT_E_INVAL);
            if (off < size) {
                CHECK(ev_ring_feed(r, data + off, 1) == AGENT_E_INVAL);
            }
            check_counters(r, lim.max_bytes);
            rc = ev_ring_drain(r);
        }
        CHECK(rc == 0 || trace.n == 0);
        feed(r, data, &off, size, &rng, lim.max_bytes);
        int fin = ev_ring_finish(r, false);
        if (fin != 0) {
            fin = ev_ring_finish(r, true);
        }
        struct ev_ring_stats st;
        ev_ring_get_stats(r, &st);
        CHECK(rc != 0 || st.events_kept == 0); /* a trigger frees what it wrote */
        check_out(&trace, strict, trace.n > 0 ? st.events_written : 0);
        CHECK(fin != 0 || trace.n > 0);
        if (fin == 0 && st.input_complete && st.events_discarded == 0 && st.blocks_discarded == 0) {
            CHECK(trace.n == size && memcmp(trace.b, data, size) == 0);
        }
    }
    ev_ring_free(r);
    free(snap.b);
    free(trace.b);
    return 0;
}
