/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_LOGS_H
#define AGENT_EV_LOGS_H

/*
 * A logs session's nettrace byte stream (Microsoft-Extensions-Logging with keywords 0xC plus
 * TplEventSource 0x80 for scopes) turned into log records the way dotnet-monitor's
 * EventLogsPipeline builds them (docs/events.md §4.3), and the records rendered in the three
 * /logs formats of StreamingLogger (api.md §6). Pure: no libuv, no I/O, no globals.
 *
 * Records: FormattedMessage is remembered; MessageJson makes a record (message re-rendered from
 * `{OriginalFormat}` with the argument strings, else the last formatted message, else, in a
 * session without keyword 0x4, MessageJson's own FormattedMessage field; state = the
 * arguments; a non-`{}` ExceptionJson gives the exception text VerboseMessage; an empty
 * ArgumentsJson drops the event); ActivityJsonStart/Stop open and close scopes keyed by the
 * event's ActivityId, parent = the scope under its RelatedActivityId. Events are matched by
 * provider and event name, fields by name (events.md §1.1).
 *
 * Bounds: EV_LOGS_MAX_SCOPES scope nodes alive (a Start beyond is ignored), EV_LOGS_MAX_PAIRS
 * key/values per record or scope (more are dropped), every string cut at EV_LOGS_MAX_STRING bytes
 * (on a UTF-8 boundary), an event whose strings do not fit EV_LOGS_TEXT_MAX together is skipped
 * (stats.skipped). All strings handed out are valid UTF-8.
 *
 * Memory: every scope node with its strings, the last FormattedMessage, each metadata schema and
 * the metadata table are charged to the session's share of dotmon's memory budget
 * (ev_logs_set_share; else to the total only) before they are allocated, and released when freed.
 * A hostile runtime that opens scopes and never closes them hits the share's cap: a scope that
 * does not fit is dropped and counted (stats.scopes_dropped, budget_dropped) and the records
 * inside it are still delivered, with the scopes around them that were kept; a FormattedMessage
 * or a metadata record that does not fit is dropped and counted too. The stream never fails for
 * the budget. The fixed part (ev_logs_footprint: the text area and the scope table) is the
 * caller's to charge.
 *
 * Order (docs/events.md §4.4): the runtime writes each thread's events in order but interleaves
 * threads only loosely, so a record logged after an await can be read before the scope start
 * another thread wrote earlier. Scope starts and stops, other providers' starts and stops and
 * MessageJson records are therefore held and acted on in timestamp order (equal timestamps in
 * stream order), except a record with no activity ids when nothing is held, which goes out at
 * once: up to an event with the sorted flag (nothing older follows it), all of them at a
 * sequence point, at the end tag, after a failure, on ev_logs_flush, and on ev_logs_tick when
 * nothing was fed since the tick before. A FormattedMessage is taken as it arrives and a
 * MessageJson keeps the text it came after. At most EV_LOGS_MAX_HELD events and
 * EV_LOGS_HELD_BYTES bytes are held, charged to the share: past either the oldest go out first,
 * and an event the share has no room for goes out at once after all the held ones (counted in
 * stats.order_forced). Nothing held is ever dropped, except by ev_logs_free.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

#define EV_LOGS_MAX_SCOPES 10000
#define EV_LOGS_MAX_PAIRS  128
#define EV_LOGS_MAX_STRING (64u * 1024u)
#define EV_LOGS_TEXT_MAX   (1024u * 1024u)
#define EV_LOGS_MAX_DEPTH  128  /* scopes reported per record, innermost kept */
#define EV_LOGS_MAX_HELD   4096 /* events held for ordering */
#define EV_LOGS_HELD_BYTES (1024u * 1024u)

/* Microsoft.Extensions.Logging.LogLevel. */
enum ev_log_level {
    EV_LOG_TRACE = 0,
    EV_LOG_DEBUG = 1,
    EV_LOG_INFORMATION = 2,
    EV_LOG_WARNING = 3,
    EV_LOG_ERROR = 4,
    EV_LOG_CRITICAL = 5,
    EV_LOG_NONE = 6
};

enum ev_log_value_kind { EV_LOG_STR = 0, EV_LOG_INT = 1, EV_LOG_BOOL = 2, EV_LOG_NULL = 3 };

struct ev_log_kv {
    const char *key;
    enum ev_log_value_kind kind;
    const char *str; /* EV_LOG_STR */
    int32_t num;     /* EV_LOG_INT; EV_LOG_BOOL: 0/1 */
};

struct ev_log_scope {
    size_t npairs;
    const struct ev_log_kv *pairs;
};

/* One record; every view is valid during the callback only. */
struct ev_log_record {
    int64_t unix_ms; /* event time; time_known false when the trace clock is not known */
    bool time_known;
    int level; /* enum ev_log_level */
    int32_t event_id;
    const char *event_name; /* "" when none */
    const char *category;
    const char *message;
    const char *exception;         /* NULL when none: ExceptionJson's VerboseMessage (ToString()) */
    const char *exception_type;    /* ExceptionJson's TypeName (full name); NULL when none */
    const char *exception_message; /* ExceptionJson's Message; NULL when none */
    /* MessageJson's ActivityTraceId/ActivitySpanId/ActivityTraceFlags when the app logged inside
     * an Activity (events.md §4.2); has_trace false when they are empty or malformed. */
    bool has_trace;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t trace_flags;
    bool has_state;
    size_t nstate; /* the state's pairs, without the leading "Message" */
    const struct ev_log_kv *state;
    size_t nscopes; /* outermost first */
    const struct ev_log_scope *scopes;
};

typedef void (*ev_logs_record_cb)(void *ud, const struct ev_log_record *r);

struct ev_logs_stats {
    uint64_t bytes;
    uint64_t events;
    uint64_t mel_events; /* Microsoft-Extensions-Logging events seen */
    uint64_t mel_metadata;
    uint64_t records;
    uint64_t dropped; /* MessageJson with empty ArgumentsJson */
    uint64_t skipped; /* malformed payloads, strings over the text area, scopes over the cap */
    uint64_t scopes;  /* scope nodes alive */
    uint64_t lost;    /* events the runtime dropped */
    uint64_t scopes_dropped; /* scope starts not kept: the memory share was full */
    uint64_t budget_dropped; /* everything not kept for the share: scopes, metadata, messages */
    uint64_t held;           /* bytes charged to the share now */
    uint64_t ordering;       /* events held for ordering now */
    uint64_t order_forced;   /* events acted on before their turn: a bound or the share */
};

struct ev_logs;

/* 0, -ENOMEM, AGENT_E_INVAL (no out or cb). */
int ev_logs_new(struct ev_logs **out, ev_logs_record_cb cb, void *ud);
/*
 * Charges what l holds to share (NULL: dotmon's total only) from now on; share must outlive l.
 * Call before the first feed: AGENT_E_INVAL once l holds something.
 */
struct mb_share;
int ev_logs_set_share(struct ev_logs *l, struct mb_share *share);
/* The bytes a session holds whatever it is fed (the decoder itself and its scope table). */
size_t ev_logs_footprint(void);
/* 0, or a negative error once the stream is invalid (later feeds return it again). */
int ev_logs_feed(struct ev_logs *l, const uint8_t *p, size_t n);
/*
 * Acts on every held event now (the stream ended, or the caller knows nothing older can come).
 * Records go to the callback from inside this call.
 */
void ev_logs_flush(struct ev_logs *l);
/*
 * Call periodically (Timeouts:LogsOrderMs, some 250 ms): when nothing was fed since the previous
 * tick, the runtime has finished writing out its buffers (it does so every 100 ms or so while
 * events come), so nothing older than what is held can come and the held events go out.
 */
void ev_logs_tick(struct ev_logs *l);
const char *ev_logs_error(const struct ev_logs *l);
void ev_logs_get_stats(const struct ev_logs *l, struct ev_logs_stats *out);
void ev_logs_free(struct ev_logs *l);

enum ev_logs_format {
    EV_LOGS_NDJSON = 0,   /* application/x-ndjson */
    EV_LOGS_JSON_SEQ = 1, /* application/json-seq */
    EV_LOGS_PLAIN = 2     /* text/plain */
};

/* "Trace" … "Critical", "None"; NULL out of range. */
const char *ev_log_level_name(int level);
/* Case-insensitive LogLevel name or 0..6 digit -> level; -1 when unknown. */
int ev_log_level_parse(const char *s);
/* Appends r in format f to out. 0, -ENOMEM or AGENT_E_TOOBIG (out's cap). */
int ev_logs_format_record(const struct ev_log_record *r, enum ev_logs_format f, struct buf *out);

#endif
