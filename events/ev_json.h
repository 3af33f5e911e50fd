/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_JSON_H
#define AGENT_EV_JSON_H

/*
 * Any nettrace stream (V4/V5 or V6) as NDJSON: one JSON object per event, one line each (issue 16).
 * Pure: no libuv, no I/O, no globals. A converter wraps a nettrace checker (docs/nettrace.md),
 * keeps one parsed schema per metadata id (ev_payload.h) and the current region's stacks (bounded,
 * see NETTRACE_KEEP_STACKS), and hands every line to a callback as its event is read.
 *
 * The schema of a line (stable; keys in this order):
 *   {"timestamp":"2026-11-26T11:00:00.123456789Z",  UTC, from the Trace object's sync time and
 *                                                    QPC frequency; null if out of range
 *    "pid":N, "thread":N,                            thread: the blob's thread id (V6: its index)
 *    "provider":"…", "event":"…",                    the runtime's native events: their manifest
 *                                                    name (ev_native.h), else "EventID(N)"
 *    "id":N, "version":N, "opcode":N, "keywords":"0x…", "level":N,
 *    "activityId":"guid"|null, "relatedActivityId":"guid"|null,   (V6: the label list's)
 *    "stack":["0x7f…",…],                            only when the event has a kept stack
 *    "payload":{"Field":value,…}                     or "payloadHex":"…" (see below)
 *   }
 * Payload values: integers as numbers (64-bit values beyond ±2^53 as decimal strings), Boolean as
 * true/false, Single/Double as numbers ("NaN", "Infinity", "-Infinity" as strings), Char and
 * String as strings (always valid UTF-8; invalid UTF-16 becomes U+FFFD), GUID as
 * "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", DateTime as an ISO-8601 UTC string, nested objects as
 * objects (an unnamed object's fields are merged into its parent), arrays of fixed-size scalars
 * as arrays, arrays of UTF8CodeUnit as strings, other arrays and Decimal as hex strings.
 * Events without a field list: the runtime's native events (Microsoft-Windows-DotNETRuntime,
 * ...Rundown, ...Private; Microsoft-DotNETCore-SampleProfiler's ThreadSample) by the layout of
 * their id and version (ev_native.h): fields by their manifest names in manifest order, pointers as
 * numbers of the trace's pointer size, win:Binary bytes as hex strings, arrays of scalars as
 * arrays, arrays of structs as arrays of objects; a payload longer than its layout is fine, a
 * shorter one goes out as "payloadHex". An empty payload as {}; otherwise "payloadHex" with the
 * payload bytes in lowercase hex, at most EV_JSON_MAX_HEX bytes, then "payloadTruncated":true. A
 * payload that does not decode by its field list also goes out as "payloadHex".
 *
 * Memory: the schemas kept by metadata id (up to 65,536 of them, a few KB each: hundreds of MB
 * from a hostile runtime), their rendered heads and the slot table are charged to a share of
 * dotmon's memory budget (ev_json_set_share; else the total only) before they are allocated.
 * Over the share a schema is not kept (its events go out as "payloadHex") and a head is rendered
 * again for each event; counted (ev_json_budget_dropped). The checker's own bounds (a 16 MiB
 * block, 8 MiB of names, 64 MiB of kept stacks) are fixed and not charged.
 */

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "ev_payload.h"
#include "nettrace.h"

#define EV_JSON_MAX_HEX (64u * 1024u) /* payload bytes rendered as hex at most */

/*
 * Called with each line (JSON object and its '\n'), or several with ev_json_set_batch; the view is
 * valid during the call only. A
 * non-zero return stops the output: no more lines are rendered and ev_json_feed returns it.
 */
typedef int (*ev_json_line_cb)(void *ud, const char *line, size_t len);

struct ev_json;

/* A new converter writing to cb. NULL on -ENOMEM. */
struct ev_json *ev_json_new(ev_json_line_cb cb, void *ud);
void ev_json_free(struct ev_json *j);
/*
 * Charges what j holds to share (NULL: dotmon's total only) from now on; share must outlive j.
 * Call before the first feed: AGENT_E_INVAL once j holds something.
 */
struct mb_share;
int ev_json_set_share(struct ev_json *j, struct mb_share *share);
/* Schemas, heads or table growths not kept for the share; bytes charged now. */
uint64_t ev_json_budget_dropped(const struct ev_json *j);
uint64_t ev_json_held(const struct ev_json *j);

/*
 * Feeds the next n stream bytes; lines go to the callback as events are read. 0, a nettrace_feed
 * error (the stream is bad: see ev_json_checker), -ENOMEM, or the callback's non-zero return.
 */
int ev_json_feed(struct ev_json *j, const uint8_t *p, size_t n);
/*
 * Hands lines over in batches: the callback then gets whole lines, several at once, once `bytes`
 * of them wait (0, the default: each line at once). Call ev_json_flush at the end.
 */
void ev_json_set_batch(struct ev_json *j, size_t bytes);
/* Hands over the lines that wait; 0 or the callback's (or an earlier) error. */
int ev_json_flush(struct ev_json *j);
/* EOF: the checker's verdict. */
enum nettrace_verdict ev_json_finish(struct ev_json *j);
/* The underlying checker, for its verdict, error message and counters. */
const struct nettrace_checker *ev_json_checker(const struct ev_json *j);
/* Lines emitted so far. */
uint64_t ev_json_lines(const struct ev_json *j);

/*
 * Renders one event as a line into out (appended, '\n' included). schema is the event's parsed
 * field list or NULL; ti the Trace object. 0, -ENOMEM or AGENT_E_TOOBIG (out's cap).
 */
int ev_json_render(struct buf *out, const struct nettrace_trace_info *ti,
                   const struct ev_schema *schema, const struct nettrace_event *ev);

/* Appends a JSON string (quotes included) of UTF-8 bytes s[0..n), invalid sequences as U+FFFD. */
int ev_json_str_utf8(struct buf *out, const uint8_t *s, size_t n);

#endif
