/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_ACTIVITY_H
#define AGENT_EV_ACTIVITY_H

/*
 * Spans from unmodified apps: a Microsoft-Diagnostics-DiagnosticSource session asked for
 * ActivitySource activities ([AS] lines of FilterAndPayloadSpecs, docs/events.md §9) turned into
 * span records, and the FilterAndPayloadSpecs argument that asks for them. Pure: no libuv, no
 * I/O, no globals.
 *
 * A span is made at the ActivityStop event only: the spec asks for Stop events alone, and Stop
 * carries everything (start time and duration included), so nothing is kept between events.
 * ActivityStart events (another client's spec may ask for them) are counted and ignored. Events
 * are matched by provider and event name ("ActivityStop", or TraceEvent's "Activity/Stop"),
 * fields by name (events.md §1.1); Arguments keys as the spec below names them (events.md §9.3).
 *
 * Bounds: every string cut at EV_ACTIVITY_MAX_STRING bytes on a UTF-8 boundary (the Tags
 * argument before it is split: tags past the cut are lost), at most EV_ACTIVITY_MAX_TAGS tags per
 * span (more are dropped and counted), an event whose strings do not fit EV_ACTIVITY_TEXT_MAX
 * together (only a hostile one: 13 arguments of 8 KiB at most) is skipped. A span without a valid
 * W3C trace id and span id (an activity in the hierarchical id format) is skipped. An activity
 * without the Recorded trace flag (the sampler kept only its ids: ParentRatioSampler writes those
 * too) is not a span: it is counted (stats.unsampled) and dropped, as the in-process SDK drops it.
 * All strings handed out are valid UTF-8.
 *
 * Memory: only the metadata schemas grow with the input; they are charged to the session's share
 * of dotmon's memory budget (ev_activity_set_share; else the total only) and a schema that does
 * not fit is dropped and counted (its events are then not decoded). The fixed part
 * (ev_activity_footprint) is the caller's to charge.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define EV_ACTIVITY_PROVIDER   "Microsoft-Diagnostics-DiagnosticSource"
#define EV_ACTIVITY_KEYWORDS   0x3ull /* Messages | Events */
#define EV_ACTIVITY_LEVEL      5      /* Verbose */
#define EV_ACTIVITY_MAX_TAGS   128
#define EV_ACTIVITY_MAX_STRING (8u * 1024u)
#define EV_ACTIVITY_TEXT_MAX   (64u * 1024u)

/* System.Diagnostics.ActivityKind. */
enum ev_activity_kind {
    EV_ACTIVITY_INTERNAL = 0,
    EV_ACTIVITY_SERVER = 1,
    EV_ACTIVITY_CLIENT = 2,
    EV_ACTIVITY_PRODUCER = 3,
    EV_ACTIVITY_CONSUMER = 4
};

/* System.Diagnostics.ActivityStatusCode. */
enum ev_activity_status { EV_ACTIVITY_UNSET = 0, EV_ACTIVITY_OK = 1, EV_ACTIVITY_ERROR = 2 };

/* One tag: the value as the runtime rendered it (object.ToString(): numbers as text). */
struct ev_span_tag {
    const char *key;
    const char *value;
};

/* One finished span; every view is valid during the callback only. */
struct ev_span {
    uint8_t trace_id[16];
    uint8_t span_id[8];
    bool has_parent;
    uint8_t parent_span_id[8];
    uint8_t flags;           /* ActivityTraceFlags: 1 = Recorded (always set: see the top) */
    const char *trace_state; /* NULL when none */
    const char *name;        /* DisplayName, else the operation name */
    const char *operation_name;
    int kind;                       /* enum ev_activity_kind */
    uint64_t start_unix_nano;       /* StartTimeUtc */
    uint64_t end_unix_nano;         /* start + Duration (never before start) */
    int status;                     /* enum ev_activity_status */
    const char *status_description; /* NULL when none */
    const char *source_name;        /* the ActivitySource's name ("" when none) */
    const char *source_version;     /* NULL when none */
    size_t ntags;
    const struct ev_span_tag *tags;
};

typedef void (*ev_activity_span_cb)(void *ud, const struct ev_span *s);

struct ev_activity_stats {
    uint64_t bytes;
    uint64_t events;
    uint64_t starts;         /* ActivityStart events seen (ignored) */
    uint64_t stops;          /* ActivityStop events seen */
    uint64_t spans;          /* spans delivered */
    uint64_t skipped;        /* malformed payloads, no W3C ids, strings over the text area */
    uint64_t unsampled;      /* activities without the Recorded flag (not spans) */
    uint64_t tags_dropped;   /* tags past EV_ACTIVITY_MAX_TAGS */
    uint64_t budget_dropped; /* metadata not kept for the share */
    uint64_t lost;           /* events the runtime dropped */
    uint64_t held;           /* bytes charged to the share now */
};

struct ev_activity;

/* 0, -ENOMEM, AGENT_E_INVAL (no out or cb). cb runs inside ev_activity_feed. */
int ev_activity_new(struct ev_activity **out, ev_activity_span_cb cb, void *ud);
/* As ev_logs_set_share: before the first feed; AGENT_E_INVAL once something is held. */
struct mb_share;
int ev_activity_set_share(struct ev_activity *a, struct mb_share *share);
size_t ev_activity_footprint(void);
/* 0, or a negative error once the stream is invalid (later feeds return it again). */
int ev_activity_feed(struct ev_activity *a, const uint8_t *p, size_t n);
const char *ev_activity_error(const struct ev_activity *a);
/*
 * The provider's Version event (written when a session enables it, keyword Messages): the
 * System.Diagnostics.DiagnosticSource version of the app. A spec with ParentRatioSampler needs 9
 * or later (older runtimes drop such a line: ask again without the sampler). 0, or
 * AGENT_E_NOTFOUND before the event (the out-parameters are then left alone).
 */
int ev_activity_source_version(const struct ev_activity *a, int *major, int *minor, int *patch);
void ev_activity_get_stats(const struct ev_activity *a, struct ev_activity_stats *out);
void ev_activity_free(struct ev_activity *a);

/*
 * Appends the FilterAndPayloadSpecs argument (events.md §9.2) asking for the Stop events of the
 * ActivitySources named in sources (';'-separated, blanks around names ignored; "*" for every
 * source), with ParentRatioSampler(ratio) when ratio < 1 (.NET 9+ runtimes; older ones ignore
 * such a line). AGENT_E_INVAL: no name, a name with a character the spec syntax reserves
 * ('/', ':', '+', '[', control characters), or a ratio outside [0, 1]; -ENOMEM, AGENT_E_TOOBIG.
 * Nothing is appended on error.
 */
int ev_activity_filter_specs(const char *sources, double ratio, struct buf *out);

/* "Internal" … "Consumer" / "Unset", "Ok", "Error"; NULL out of range. */
const char *ev_activity_kind_name(int kind);
const char *ev_activity_status_name(int status);

#endif
