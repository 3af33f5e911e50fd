/* SPDX-License-Identifier: MIT */
/*
 * ring_write: a nettrace file through a ring (events/ev_ring.h) and out to another file, for
 * checking the ring's output with an independent reader (ring_tracecheck.cmake runs TraceEvent's
 * tracecheck on it).
 *
 *   ring_write IN OUT --max-bytes N [--max-age-ms M] [--trigger-at BYTES | --snapshot] [--chunk N]
 *
 * --snapshot: the whole input fed, then ev_ring_snapshot. --trigger-at: that many bytes fed, then
 * ev_ring_trigger, the rest fed (pass-through), ev_ring_finish. Prints one JSON line:
 *   {"events":N,"firstQpc":T,"firstTimeUtcTicks":U,"eventsDiscarded":D,"blocksDiscarded":B,
 *    "bytesPeak":P}
 * where events is what the ring says it wrote (kept events for a snapshot, events written for a
 * trigger), firstQpc the oldest of them (the oldest kept event's timestamp when the trace was
 * written; for a trigger, the oldest event of the output) and firstTimeUtcTicks the same as .NET
 * DateTime ticks (100 ns since 0001-01-01 UTC) by the Trace object's sync time and frequency.
 * Exit status 0, 1 on any failure (message on stderr), 2 on bad usage.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "civil.h"
#include "err.h"
#include "ev_ring.h"
#include "nettrace.h"

static int file_write(void *ud, const uint8_t *p, size_t n)
{
    return fwrite(p, 1, n, (FILE *)ud) == n ? 0 : -EIO;
}

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0) {
        return NULL;
    }
    long size = ftell(f);
    uint8_t *p = size > 0 ? malloc((size_t)size) : NULL;
    if (p == NULL || fseek(f, 0, SEEK_SET) != 0 || fread(p, 1, (size_t)size, f) != (size_t)size) {
        free(p);
        fclose(f);
        return NULL;
    }
    fclose(f);
    *n = (size_t)size;
    return p;
}

/* A QPC timestamp as .NET DateTime ticks (UTC), as TraceEvent converts it. */
static int64_t utc_ticks(const struct nettrace_trace_info *ti, int64_t qpc)
{
    const uint16_t *t = ti->sync_time_utc;
    int64_t days = civil_days(t[0], t[1], t[3]) + 719162; /* 0001-01-01 to 1970-01-01 */
    int64_t ticks = days * 864000000000LL + ((int64_t)t[4] * 3600 + t[5] * 60 + t[6]) * 10000000LL +
                    (int64_t)t[7] * 10000LL;
    int64_t delta = qpc - ti->sync_time_qpc;
    int64_t f = ti->qpc_frequency;
    return ticks + delta / f * 10000000LL + delta % f * 10000000LL / f;
}

struct args {
    const char *in;
    const char *out;
    struct ev_ring_limits lim;
    bool snapshot;
    size_t trigger_at;
    size_t chunk;
};

static int parse(int argc, char **argv, struct args *a)
{
    memset(a, 0, sizeof(*a));
    a->chunk = 4093;
    a->trigger_at = SIZE_MAX;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--snapshot") == 0) {
            a->snapshot = true;
        } else if (strcmp(argv[i], "--max-bytes") == 0 && v != NULL) {
            a->lim.max_bytes = (size_t)strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(argv[i], "--max-age-ms") == 0 && v != NULL) {
            a->lim.max_age_ms = strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(argv[i], "--trigger-at") == 0 && v != NULL) {
            a->trigger_at = (size_t)strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(argv[i], "--chunk") == 0 && v != NULL) {
            a->chunk = (size_t)strtoull(v, NULL, 10);
            i++;
        } else if (a->in == NULL) {
            a->in = argv[i];
        } else if (a->out == NULL) {
            a->out = argv[i];
        } else {
            return -1;
        }
    }
    bool one_mode = a->snapshot != (a->trigger_at != SIZE_MAX);
    return a->in != NULL && a->out != NULL && one_mode && a->chunk > 0 ? 0 : -1;
}

static int feed(struct ev_ring *r, const uint8_t *p, size_t from, size_t to, size_t chunk)
{
    for (size_t off = from; off < to; off += chunk) {
        int rc = ev_ring_feed(r, p + off, to - off < chunk ? to - off : chunk);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* The oldest event of a written trace (for a trigger, whose blocks the ring no longer holds). */
static void on_event(void *ud, const struct nettrace_event *ev)
{
    int64_t *oldest = ud;
    if (ev->timestamp < *oldest) {
        *oldest = ev->timestamp;
    }
}

static int64_t oldest_in(const char *path)
{
    size_t n = 0;
    uint8_t *p = read_file(path, &n);
    int64_t oldest = INT64_MAX;
    struct nettrace_checker ck;
    if (p != NULL && nettrace_checker_init(&ck, NULL) == 0) {
        nettrace_set_event_cb(&ck, on_event, &oldest);
        (void)nettrace_feed(&ck, p, n);
        nettrace_checker_fini(&ck);
    }
    free(p);
    return oldest;
}

int main(int argc, char **argv)
{
    struct args a;
    if (parse(argc, argv, &a) != 0) {
        fprintf(stderr, "usage: ring_write IN OUT --max-bytes N [--max-age-ms M] "
                        "(--trigger-at BYTES | --snapshot) [--chunk N]\n");
        return 2;
    }
    size_t n = 0;
    uint8_t *p = read_file(a.in, &n);
    FILE *out = fopen(a.out, "wb");
    struct ev_ring *r = NULL;
    int rc = p == NULL || out == NULL ? -EIO : ev_ring_new(&r, &a.lim);
    struct ev_ring_stats st;
    memset(&st, 0, sizeof(st));
    int64_t first = 0;
    if (rc == 0 && a.snapshot) {
        rc = feed(r, p, 0, n, a.chunk);
        ev_ring_get_stats(r, &st);
        first = st.oldest_kept;
        rc = rc != 0 ? rc : ev_ring_snapshot(r, file_write, out);
    } else if (rc == 0) {
        size_t at = a.trigger_at < n ? a.trigger_at : n;
        rc = feed(r, p, 0, at, a.chunk);
        rc = rc != 0 ? rc : ev_ring_trigger(r, file_write, out);
        rc = rc != 0 ? rc : feed(r, p, at, n, a.chunk);
        rc = rc != 0 ? rc : ev_ring_finish(r, false);
        ev_ring_get_stats(r, &st);
    }
    if (out != NULL && fclose(out) != 0 && rc == 0) {
        rc = -EIO;
    }
    struct nettrace_trace_info ti;
    if (rc == 0 && ev_ring_trace_info(r, &ti) != 0) {
        rc = AGENT_E_NOTFOUND;
    }
    if (rc != 0) {
        char line[300] = "";
        if (r != NULL) {
            ev_ring_error(r, line, sizeof(line));
        }
        fprintf(stderr, "ring_write: %s: %s %s\n", a.in, agent_strerror(rc), line);
        ev_ring_free(r);
        free(p);
        return 1;
    }
    uint64_t events = a.snapshot ? st.events_kept : st.events_written;
    if (!a.snapshot) {
        first = oldest_in(a.out);
    }
    printf("{\"events\":%" PRIu64 ",\"firstQpc\":%" PRId64 ",\"firstTimeUtcTicks\":%" PRId64
           ",\"eventsDiscarded\":%" PRIu64 ",\"blocksDiscarded\":%" PRIu64 ",\"bytesPeak\":%" PRIu64
           "}\n",
           events, first, events > 0 ? utc_ticks(&ti, first) : 0, st.events_discarded,
           st.blocks_discarded, st.bytes_peak);
    ev_ring_free(r);
    free(p);
    return 0;
}
