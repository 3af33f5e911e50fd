/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the nettrace stream a runtime sends after CollectTracing (docs/nettrace.md),
 * through the streaming checker of events/nettrace.h. The input is the stream itself (seeds are
 * real captures). Each input is checked twice: fed whole, and fed in chunks whose sizes come from a
 * hash of the input (1 byte to the whole rest), so mutations move the chunk boundaries too. The
 * checker promises the same result for any chunking, so verdict, error, counters, the events and
 * the blocks (the block callback's fields and content) reported must agree. Then the query
 * functions run on the finished checker.
 */
#include "fuzz.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "nettrace.h"

/* What the event callback saw: a count and a digest of every field. */
struct seen {
    uint64_t events;
    uint64_t digest;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v;
    return h * 0x100000001b3ull;
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct seen *s = ud;
    uint64_t h = s->digest;
    h = mix(h, strlen(ev->provider));
    h = mix(h, strlen(ev->event_name));
    h = mix(h, ev->event_id);
    h = mix(h, ev->version);
    h = mix(h, ev->metadata_id);
    h = mix(h, ev->sequence);
    h = mix(h, ev->thread_id);
    h = mix(h, ev->capture_thread_id);
    h = mix(h, ev->stack_id);
    h = mix(h, (uint64_t)ev->timestamp);
    h = mix(h, ev->label_list_id);
    h = mix(h, ev->payload_len);
    for (size_t i = 0; i < ev->payload_len; i++) { /* every payload byte must be readable */
        h = mix(h, ev->payload[i]);
    }
    s->digest = h;
    s->events++;
}

/* What the block callback saw (V4/V5 block objects): a count and a digest of fields and content. */
struct blocks_seen {
    uint64_t blocks;
    uint64_t digest;
    uint64_t end; /* one past the furthest content byte, as a stream offset */
};

static void on_block(void *ud, const struct nettrace_block *b)
{
    struct blocks_seen *s = ud;
    CHECK(b->kind < NETTRACE_BLOCK_KINDS && b->min_version >= 0 && b->min_version <= 2);
    CHECK(b->kind == NETTRACE_BLOCK_EVENT || b->kind == NETTRACE_BLOCK_METADATA ||
          (b->events == 0 && b->min_stack_id <= b->max_stack_id));
    CHECK(b->min_timestamp <= b->max_timestamp);
    uint64_t h = s->digest;
    h = mix(h, b->kind);
    h = mix(h, b->offset);
    h = mix(h, b->events);
    h = mix(h, (uint64_t)b->min_timestamp);
    h = mix(h, (uint64_t)b->max_timestamp);
    h = mix(h, b->min_stack_id);
    h = mix(h, b->max_stack_id);
    h = mix(h, b->len);
    for (uint32_t i = 0; i < b->len; i++) { /* every content byte must be readable */
        h = mix(h, b->content[i]);
    }
    s->digest = h;
    s->blocks++;
    s->end = b->offset + b->len;
}

struct md_walk {
    const struct nettrace_checker *ck;
    uint64_t records;
    uint64_t events;
};

static void on_metadata(void *ud, const struct nettrace_metadata *md)
{
    struct md_walk *w = ud;
    CHECK(md->provider != NULL && md->event_name != NULL);
    (void)strlen(md->provider);
    (void)strlen(md->event_name);
    CHECK(nettrace_count(w->ck, md->provider, md->event_id) >= md->events);
    CHECK(nettrace_count_provider(w->ck, md->provider) >= md->events);
    if (md->event_name[0] != '\0') {
        CHECK(nettrace_count_named(w->ck, md->provider, md->event_name) >= md->events);
    }
    w->records++;
    w->events += md->events;
}

struct run {
    enum nettrace_verdict verdict;
    const char *msg; /* copied below: the checker owns it */
    char msg_copy[256];
    uint64_t err_off;
    struct nettrace_stats stats;
    struct seen seen;
    struct blocks_seen blocks;
};

static void check_one(const uint8_t *data, size_t size, const struct nettrace_options *opt,
                      uint64_t chunk_seed, struct run *out)
{
    struct nettrace_checker ck;
    CHECK(nettrace_checker_init(&ck, opt) == 0);
    memset(out, 0, sizeof(*out));
    nettrace_set_event_cb(&ck, on_event, &out->seen);
    nettrace_set_block_cb(&ck, on_block, &out->blocks);

    int first_err = 0;
    if (chunk_seed == 0) {
        first_err = nettrace_feed(&ck, data, size);
    } else {
        uint64_t rng = chunk_seed;
        size_t off = 0;
        while (off < size) {
            size_t n = fuzz_next_chunk(&rng, size - off);
            int rc = nettrace_feed(&ck, data + off, n);
            if (rc != 0 && first_err == 0) {
                first_err = rc;
            }
            if (rc != 0) {
                /* Once failed, later feeds fail the same way and check nothing. */
                CHECK(nettrace_feed(&ck, data, size - off > 4 ? 4 : size - off) == rc);
                break;
            }
            off += n;
        }
    }
    CHECK(first_err == 0 || first_err == AGENT_E_PROTO || first_err == AGENT_E_TOOBIG ||
          first_err == -ENOMEM);
    enum nettrace_verdict status = nettrace_status(&ck);
    out->verdict = nettrace_finish(&ck);
    CHECK(out->verdict == status);
    CHECK(nettrace_finish(&ck) == out->verdict); /* idempotent */
    CHECK((out->verdict == NETTRACE_INVALID) == (first_err != 0));
    if (size > 0) {
        CHECK(nettrace_feed(&ck, data, 1) == AGENT_E_INVAL); /* fed after finish */
    }
    (void)nettrace_verdict_name(out->verdict);

    out->msg = nettrace_error(&ck, &out->err_off);
    CHECK((out->msg != NULL) == (out->verdict == NETTRACE_INVALID));
    if (out->msg != NULL) {
        size_t len = strlen(out->msg);
        len = len < sizeof(out->msg_copy) - 1 ? len : sizeof(out->msg_copy) - 1;
        memcpy(out->msg_copy, out->msg, len);
        out->msg_copy[len] = '\0';
        CHECK(out->err_off <= size);
    }
    const struct nettrace_stats *st = nettrace_get_stats(&ck);
    CHECK(st != NULL);
    out->stats = *st;
    CHECK(st->bytes <= size);
    CHECK(st->events == out->seen.events);
    CHECK(out->blocks.blocks <= st->blocks[0] + st->blocks[1] + st->blocks[2] + st->blocks[3]);
    CHECK(out->blocks.end <= st->bytes);

    struct nettrace_trace_info ti;
    int trc = nettrace_trace_info(&ck, &ti);
    CHECK(trc == 0 || trc == AGENT_E_NOTFOUND);
    (void)nettrace_count(&ck, "Microsoft-Windows-DotNETRuntime", 1);
    (void)nettrace_count_named(&ck, "Microsoft-Extensions-Logging", "FormattedMessage");
    (void)nettrace_count_provider(&ck, "Microsoft-DotNETCore-SampleProfiler");
    struct md_walk walk = {.ck = &ck};
    nettrace_foreach_metadata(&ck, on_metadata, &walk);
    CHECK(walk.records == st->metadata);
    CHECK(walk.events <= st->events);

    nettrace_checker_fini(&ck);
    nettrace_checker_fini(&ck); /* documented: safe twice */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* FNV-1a of the input picks the chunking and, now and then, tighter checker limits. */
    uint64_t h = fuzz_fnv1a(data, size);
    struct nettrace_options opt = {0};
    if ((h >> 8 & 7) == 0) {
        opt.flags = NETTRACE_STRICT_STACKS;
    }
    if ((h >> 11 & 7) == 0) {
        opt.max_block = 4096;
    }
    if ((h >> 14 & 7) == 0) {
        opt.max_metadata = 4;
    }

    static struct run whole;
    static struct run chunked;
    check_one(data, size, &opt, 0, &whole);
    check_one(data, size, &opt, h | 1, &chunked);

    CHECK(whole.verdict == chunked.verdict);
    CHECK(whole.err_off == chunked.err_off);
    CHECK(strcmp(whole.msg_copy, chunked.msg_copy) == 0);
    CHECK(memcmp(&whole.stats, &chunked.stats, sizeof(whole.stats)) == 0);
    CHECK(whole.seen.events == chunked.seen.events && whole.seen.digest == chunked.seen.digest);
    CHECK(memcmp(&whole.blocks, &chunked.blocks, sizeof(whole.blocks)) == 0);

    (void)nettrace_payload_has_utf16(data, size, "nt-fixture-marker");
    (void)nettrace_payload_has_utf16(data, size, "");
    return 0;
}
