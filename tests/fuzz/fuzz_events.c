/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a metrics session's nettrace stream through events/ev_stream.h (the nettrace
 * reader, the self-describing payload decoder and the EventCounters / meters interpretation).
 * Seeds are the real captures of tests/fixtures/events. Each input is fed whole and in chunks
 * whose sizes come from a hash of the input; the decoder promises the same samples, errors and
 * counters for any chunking. Every string of every sample must be readable. The input is also
 * parsed as one metadata payload and as one NetTrace V6 metadata row and, when that works, decoded
 * as a payload of itself (events/ev_payload.h), to reach the field-list parsers without a valid
 * container around them. A seed (`v6-writer`) is the NetTrace V6 file of
 * tests/events/test_nettrace_v6.c, another (`gen-exphist`) .NET 10's exponential histogram events.
 */
#include "fuzz.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_payload.h"
#include "ev_stream.h"

struct seen {
    uint64_t samples;
    uint64_t errors;
    uint64_t digest;
};

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v;
    return h * 0x100000001b3ull;
}

static uint64_t mix_str(uint64_t h, const char *s)
{
    CHECK(s != NULL);
    for (; *s != '\0'; s++) {
        h = mix(h, (uint8_t)*s);
    }
    return mix(h, 0);
}

static void on_sample(void *ud, const struct ev_metric_sample *m)
{
    struct seen *s = ud;
    uint64_t h = s->digest;
    h = mix_str(h, m->provider);
    h = mix_str(h, m->name);
    h = mix_str(h, m->display_name);
    h = mix_str(h, m->unit);
    h = mix_str(h, m->tags);
    CHECK((m->meter_tags != NULL) == m->is_meter);
    if (m->is_meter) {
        h = mix_str(h, m->meter_tags);
        h = mix_str(h, m->instrument_tags);
    }
    CHECK(m->kind <= EV_METRIC_HISTOGRAM);
    CHECK(m->nquantiles <= EV_METRIC_MAX_QUANTILES);
    for (uint32_t k = 1; k < m->nquantiles; k++) {
        CHECK(m->quantiles[k - 1].quantile <= m->quantiles[k].quantile);
    }
    if (m->exphist != NULL) {
        /* a placed window: counts readable, the total the event's count, ends not empty */
        const struct ev_exphist *e = m->exphist;
        CHECK(m->kind == EV_METRIC_HISTOGRAM && e->ncounts <= EV_EXPHIST_MAX_BUCKETS);
        CHECK(e->ncounts == 0 || (e->counts[0] != 0 && e->counts[e->ncounts - 1] != 0));
        uint64_t total = e->zero_count;
        for (uint32_t k = 0; k < e->ncounts; k++) {
            total += e->counts[k];
            h = mix(h, e->counts[k]);
        }
        CHECK(total == m->hist_count);
        h = mix(mix(h, (uint64_t)(int64_t)e->offset), (uint64_t)(int64_t)e->scale);
    }
    uint64_t bits;
    memcpy(&bits, &m->value, sizeof(bits));
    h = mix(h, isnan(m->value) ? 1 : bits);
    h = mix(h, (uint64_t)m->timestamp_ms);
    h = mix(h, m->kind);
    s->digest = h;
    s->samples++;
}

static void on_error(void *ud, const char *kind, const char *message)
{
    struct seen *s = ud;
    s->digest = mix_str(mix_str(s->digest, kind), message);
    s->errors++;
}

struct run {
    int rc;
    struct seen seen;
    struct ev_stream_stats stats;
};

static void run_one(const uint8_t *data, size_t size, const struct ev_stream_options *opt,
                    uint64_t chunk_seed, struct run *out)
{
    memset(out, 0, sizeof(*out));
    struct ev_stream *s = NULL;
    CHECK(ev_stream_new(&s, opt, on_sample, on_error, &out->seen) == 0);
    if (chunk_seed == 0) {
        out->rc = ev_stream_feed(s, data, size);
    } else {
        uint64_t rng = chunk_seed;
        for (size_t off = 0; off < size && out->rc == 0;) {
            size_t n = fuzz_next_chunk(&rng, size - off);
            out->rc = ev_stream_feed(s, data + off, n);
            off += n;
        }
    }
    CHECK(out->rc == 0 || out->rc == AGENT_E_PROTO || out->rc == AGENT_E_TOOBIG ||
          out->rc == -ENOMEM);
    CHECK((ev_stream_error(s) != NULL) == (out->rc != 0));
    if (out->rc != 0) {
        CHECK(ev_stream_feed(s, data, size > 3 ? 3 : size) == out->rc);
    }
    ev_stream_get_stats(s, &out->stats);
    CHECK(out->stats.bytes <= size);
    CHECK(out->stats.samples == out->seen.samples);
    ev_stream_free(s);
}

/* v6: the input as a NetTrace V6 metadata row (ev_schema_parse_v6), else as a V4/V5 payload. */
static void schema_probe(const uint8_t *data, size_t size, bool v6)
{
    struct ev_schema *sc = NULL;
    int rc = v6 ? ev_schema_parse_v6(data, size, &sc) : ev_schema_parse(data, size, &sc);
    CHECK(rc == 0 || rc == AGENT_E_PROTO || rc == AGENT_E_TOOBIG || rc == -ENOMEM);
    if (rc != 0) {
        return;
    }
    CHECK(sc->nfields >= 1 && sc->nfields <= EV_SCHEMA_MAX_FIELDS);
    static struct ev_record rec;
    if (ev_record_decode(&rec, sc, data, size) == 0) {
        for (int k = 0; k < sc->nfields; k++) {
            char buf[64];
            double d;
            int64_t i;
            (void)ev_record_f64(&rec, k, &d);
            (void)ev_record_i64(&rec, k, &i);
            (void)ev_record_str(&rec, k, buf, sizeof(buf), NULL);
            CHECK(rec.v[k].p == NULL || rec.v[k].len <= size);
            CHECK(ev_record_str_len(&rec, k) <= 3 * (size_t)rec.v[k].len);
        }
        double d;
        (void)ev_record_path_f64(&rec, "Payload.Mean", &d);
    }
    ev_schema_free(sc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz_fnv1a(data, size);
    /* The fixtures' session ids, now and then none (any session) or a tight metadata cap. */
    static const char *const sessions[4] = {"dec1", "dec2", "dec4", NULL};
    struct ev_stream_options opt = {
        .session_id = sessions[h >> 5 & 3],
        .client_id = (h >> 7 & 1) ? "c1" : NULL,
        .refresh_interval_s = 1,
        .counter_interval_s = (h >> 8 & 1) ? 1 : 0,
        .max_metadata = (h >> 9 & 7) == 0 ? 8 : 0,
        .max_block = (h >> 12 & 7) == 0 ? 4096 : 0,
    };
    static struct run whole;
    static struct run chunked;
    run_one(data, size, &opt, 0, &whole);
    run_one(data, size, &opt, h | 1, &chunked);
    CHECK(whole.rc == chunked.rc);
    CHECK(whole.seen.samples == chunked.seen.samples);
    CHECK(whole.seen.errors == chunked.seen.errors);
    CHECK(whole.seen.digest == chunked.seen.digest);
    CHECK(memcmp(&whole.stats, &chunked.stats, sizeof(whole.stats)) == 0);
    schema_probe(data, size, false);
    schema_probe(data, size, true);
    return 0;
}
