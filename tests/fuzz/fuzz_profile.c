/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: /profile's summaries of the other kinds (events/ev_profile.h) over the method
 * map of events/ev_symbols.h. Each input is read twice:
 *  - as a session's nettrace stream, fed in chunks (sizes from the input's hash) to an ev_symbols
 *    with a profile of the kind the hash picks; whatever the stream, the JSON summary written after
 *    it must be one JSON object that cJSON reads, the text table must be written too, and the
 *    flame graph of the cpu samples must be JSON as well;
 *  - as a list of runtime events handed straight to ev_profile_add (id picked among the ones the
 *    kinds read, a version, a thread, a time, a payload of the input's bytes, and now and then a
 *    stack interned from the input), to reach every payload layout without a valid container:
 *    every call answers 0, AGENT_E_PROTO for a payload too short for its version (counted as
 *    malformed, never read past) or a cap's AGENT_E_TOOBIG; the JSON summary is still JSON.
 * Seeds: the real captures of fuzz_ring (a cpu, a GC and a rundown stream with three exceptions).
 */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ev_profile.h"
#include "ev_symbols.h"

static int sink(void *ud, const uint8_t *p, size_t n)
{
    return buf_append(ud, p, n);
}

/* The summary is one JSON object (or the writer failed for want of memory). */
static void check_json(int rc, struct buf *b)
{
    CHECK(rc == 0 || rc == -ENOMEM);
    if (rc == 0) {
        cJSON *doc = cJSON_ParseWithLength((const char *)buf_data(b), buf_size(b));
        CHECK(doc != NULL && cJSON_IsObject(doc));
        cJSON_Delete(doc);
    }
    buf_reset(b);
}

static void as_stream(const uint8_t *data, size_t size, uint64_t h)
{
    struct ev_symbols *sym = NULL;
    struct ev_profile *p = NULL;
    if (ev_symbols_new(&sym) != 0) {
        return;
    }
    if (ev_profile_new((enum ev_profile_kind)(h % 4), sym, &p) != 0) {
        ev_symbols_free(sym);
        return;
    }
    uint64_t s = h | 1;
    int rc = 0;
    for (size_t at = 0; rc == 0 && at < size;) {
        size_t n = 1 + (size_t)(fuzz_xorshift(&s) % 4096);
        n = n > size - at ? size - at : n;
        rc = ev_symbols_feed(sym, data + at, n);
        at += n;
    }
    if (rc == 0 && ev_symbols_finish(sym) == 0) {
        struct buf b;
        buf_init(&b, 0);
        check_json(ev_profile_write_json(p, 1, 2, 1 + (size_t)(h % 30), sink, &b), &b);
        int trc = ev_profile_write_text(p, 1, 2, 5, sink, &b);
        CHECK(trc == 0 || trc == -ENOMEM);
        buf_reset(&b);
        check_json(ev_symbols_write_flame(sym, 1, 2, sink, &b), &b);
        buf_fini(&b);
    }
    ev_profile_free(p);
    ev_symbols_free(sym);
}

static const uint32_t ids[] = {EV_PROFILE_ALLOCATION_TICK,
                               EV_PROFILE_EXCEPTION_THROWN,
                               EV_PROFILE_CONTENTION_START,
                               EV_PROFILE_CONTENTION_STOP,
                               EV_PROFILE_GC_START,
                               EV_PROFILE_GC_RESTART_EE_END,
                               EV_PROFILE_GC_HEAP_STATS,
                               EV_PROFILE_GC_SUSPEND_EE,
                               2 /* GCEnd */,
                               7};

/* One event from data at *at: 0, or -1 when the input is used up. */
static int next_event(const uint8_t *data, size_t size, size_t *at, struct ev_profile_event *ev)
{
    if (size - *at < 4) {
        return -1;
    }
    const uint8_t *r = data + *at;
    ev->id = ids[r[0] % (sizeof(ids) / sizeof(ids[0]))];
    ev->version = r[1] % 6;
    ev->thread = r[2] % 4;
    /* Mostly rising times; now and then any 64-bit value (a wild clock). */
    ev->ts = r[3] == 0xff ? (int64_t)fuzz_fnv1a(r, 4) : (int64_t)((uint64_t)ev->ts + r[3]);
    *at += 4;
    size_t n = size - *at < 2 ? 0 : (size_t)data[*at] | (size_t)(data[*at + 1] & 1) << 8;
    *at += size - *at < 2 ? size - *at : 2;
    n = n > size - *at ? size - *at : n;
    ev->payload = data + *at;
    ev->len = n;
    *at += n;
    return 0;
}

static void as_events(const uint8_t *data, size_t size, uint64_t h)
{
    struct ev_symbols *sym = NULL;
    struct ev_profile *p = NULL;
    if (ev_symbols_new(&sym) != 0) {
        return;
    }
    if (ev_profile_new((enum ev_profile_kind)((h >> 8) % 4), sym, &p) != 0) {
        ev_symbols_free(sym);
        return;
    }
    struct ev_profile_event ev = {0};
    size_t at = 0;
    while (next_event(data, size, &at, &ev) == 0) {
        uint64_t ips[4] = {ev.ts, ev.thread, ev.id, ev.len};
        ev.has_stack =
            (ev.ts & 3) == 0 && ev_symbols_intern_stack(sym, ips, 1 + ev.thread, &ev.stack) == 0;
        int rc = ev_profile_add(p, &ev);
        CHECK(rc == 0 || rc == AGENT_E_PROTO || rc == AGENT_E_TOOBIG || rc == -ENOMEM);
    }
    (void)ev_symbols_finish(sym); /* no stream: it says so, and the sites stay unnamed */
    struct buf b;
    buf_init(&b, 0);
    check_json(ev_profile_write_json(p, 1, 2, 25, sink, &b), &b);
    buf_fini(&b);
    ev_profile_free(p);
    ev_symbols_free(sym);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz_fnv1a(data, size);
    as_stream(data, size, h);
    as_events(data, size, h);
    return 0;
}
