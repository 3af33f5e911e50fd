/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STREAM_H
#define AGENT_EV_STREAM_H

/*
 * A metrics session's nettrace byte stream turned into metric samples (ev_metric.h): the nettrace
 * reader, the self-describing payload decoder (metadata field lists, typed field access by name)
 * and the EventCounters / System.Diagnostics.Metrics interpretation (docs/events.md §1-3),
 * behind one incremental API the agent feeds with the bytes of a session, in any chunking.
 * Pure: no libuv, no I/O, no globals. Memory bounded per stream (see ev_stream_options).
 *
 * Events are matched by provider + event name, never by id (docs/events.md §1.1). Meter events
 * whose sessionId is not opt->session_id are ignored (a shared session shows every client's
 * instruments); MultipleSessionsNotSupportedError / MultipleSessionsConfiguredIncorrectlyError
 * and Error events addressed to this session are reported through on_error.
 *
 * Callbacks run inside ev_stream_feed, in stream order; they must not feed or free the stream.
 * A sample's strings are valid during its callback only (ev_metric.h).
 */

#include <stddef.h>
#include <stdint.h>

#include "ev_metric.h"

struct ev_stream;

typedef void (*ev_stream_sample_cb)(void *ud, const struct ev_metric_sample *s);
/* kind: "MultipleSessionsNotSupported", "MultipleSessionsConfiguredIncorrectly", "Error",
 * "ObservableInstrumentCallbackError", "TimeSeriesLimitReached", "HistogramLimitReached". */
typedef void (*ev_stream_error_cb)(void *ud, const char *kind, const char *message);

struct ev_stream_options {
    const char *session_id;    /* the SessionId argument sent to System.Diagnostics.Metrics */
    const char *client_id;     /* the ClientId argument (shared sessions); NULL if none */
    double refresh_interval_s; /* the RefreshInterval sent (meters' interval_sec) */
    uint32_t max_metadata;     /* metadata records kept; 0 = a default (4096) */
    uint32_t max_block;        /* largest nettrace block; 0 = a default (16 MiB) */
    /*
     * The EventCounterIntervalSec sent. When > 0, EventCounters events whose Series interval
     * ("Interval=<ms>") differs are dropped, as dotnet-monitor's CounterFilter does (another
     * session may have lowered the provider's interval, events.md §2.1, §2.3); 0 keeps them all.
     */
    double counter_interval_s;
    /*
     * Base2ExponentialHistogramValuePublished points hold the values since the runtime's
     * aggregation began (the session asked reportDeltas=false); false: the interval's values, as
     * dotmon asks (docs/events.md §3.7). Copied to ev_exphist.cumulative.
     */
    bool exphist_cumulative;
};

struct ev_stream_stats {
    uint64_t bytes;
    uint64_t events;
    uint64_t samples;
    uint64_t metadata;           /* metadata records defined */
    uint64_t metadata_malformed; /* metadata whose field list could not be parsed: skipped */
    uint64_t payload_malformed;  /* payloads that did not match their field list: skipped */
    uint64_t lost;               /* events the runtime dropped (sequence gaps) */
};

/*
 * Returns 0 or a negative error (-ENOMEM as UV_ENOMEM's value, AGENT_E_INVAL without out or
 * on_sample). opt may be NULL (defaults); a NULL opt->session_id accepts meter events of every
 * session (for reading a saved trace). The options' strings are copied. on_error may be NULL.
 */
int ev_stream_new(struct ev_stream **out, const struct ev_stream_options *opt,
                  ev_stream_sample_cb on_sample, ev_stream_error_cb on_error, void *ud);
/* 0, or a negative error once the stream is invalid (later feeds return it again). */
int ev_stream_feed(struct ev_stream *s, const uint8_t *p, size_t n);
/* The reason the stream stopped, or NULL. */
const char *ev_stream_error(const struct ev_stream *s);
void ev_stream_get_stats(const struct ev_stream *s, struct ev_stream_stats *out);
void ev_stream_free(struct ev_stream *s);

#endif
