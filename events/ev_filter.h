/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_FILTER_H
#define AGENT_EV_FILTER_H

/*
 * A trace event filter: dotnet-monitor's TraceEventFilter, which CollectTrace's StoppingEvent is
 * (ProviderName, EventName, PayloadFilter), matched against a nettrace stream while the stream's
 * checker reads it (nettrace.h), so a relay decides on the bytes it forwards without a second
 * pass. Pure: no libuv, no I/O, no globals.
 *
 * The semantics are those of dotnet-monitor's EventMonitor (dotnet/diagnostics
 * src/Microsoft.Diagnostics.Monitoring.EventPipe/EventMonitor.cs) over TraceEvent:
 *  - ProviderName equals the event's provider name (ordinal, case-sensitive).
 *  - EventName equals the name TraceEvent gives the event (TraceEvent.EventName, ordinal): for an
 *    EventSource event, its metadata name as the task name, a "Start"/"Stop" suffix cut off when
 *    the opcode is Start/Stop (with no OpCode tag in the metadata, a name ending in Start or Stop,
 *    any case, implies that opcode), then "/<opcode name>" for any opcode but Info (Start, Stop,
 *    DCStart, DCStop, Extension, Reply, Resume, Suspend, Send, else "Opcode(N)"); so
 *    RequestStart with opcode Start is "Request/Start", Blob is "Blob". An event whose metadata
 *    has no name is "EventID(N)" ("EventWriteString" for id 0): that is what dotnet-monitor
 *    matches the runtime's native events (Microsoft-Windows-DotNETRuntime, ...Rundown, ...Private,
 *    the sample profiler) against, its EventMonitor subscribing TraceEvent's dynamic parser only.
 *    Those events also match their manifest symbol, the name dotmon's NDJSON gives them
 *    (ev_native.h: "GCStart", "ExceptionThrown"; not ClrTraceEventParser's "GC/Start"), and
 *    their PayloadFilter fields are the manifest's (dotnet-monitor sees no fields there, so a
 *    PayloadFilter on them is a mismatch for it).
 *  - PayloadFilter (field name → value): the first event with that provider and name decides
 *    whether every filter name is one of its top-level payload fields (ordinal); if one is
 *    missing, the filter never matches (dotnet-monitor stops watching and logs the mismatch):
 *    state EV_FILTER_MISMATCH. Otherwise an event matches when each field's value, as .NET's
 *    Convert.ToString(value, InvariantCulture) writes TraceEvent's PayloadValue, equals the
 *    filter's value (ordinal): integers in decimal, Boolean "True"/"False", Char and String as
 *    text (UTF-8), GUID as "d" (lowercase), Single/Double as .NET Core's shortest round-trip
 *    form ("0.1", "1E+17", "NaN", "Infinity"), DateTime (a FILETIME, read as UTC) as
 *    "MM/dd/yyyy HH:mm:ss". Decimal, arrays, structs and binary fields never match.
 *  - Only the first match counts: the state then stays EV_FILTER_MATCHED.
 *
 * Memory: the metadata of other providers and events is looked at (names compared) and dropped;
 * the field lists of at most EV_FILTER_MAX_DEFS matching definitions are kept (one per event
 * version, more in a V6 stream that redefines ids) in a schema registry (ev_schemas.h). No
 * allocation per event. Once attached, the per-event cost is a lookup of the event's metadata id
 * while watching, nothing after.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_payload.h"
#include "nettrace.h"

#define EV_FILTER_MAX_DEFS   32  /* matching metadata definitions kept */
#define EV_FILTER_MAX_FIELDS 64  /* PayloadFilter entries */
#define EV_FILTER_NAME_MAX   512 /* bytes of a computed event name, NUL included */

struct ev_filter_field {
    const char *name;
    const char *value;
};

enum ev_filter_state {
    EV_FILTER_WATCHING = 0, /* no match yet */
    EV_FILTER_MATCHED,      /* an event matched (later events are not looked at) */
    EV_FILTER_MISMATCH      /* the event lacks a PayloadFilter field: it can never match */
};

struct ev_filter;

/*
 * A filter for provider and event_name (both non-empty) with n payload filter entries (names
 * non-empty and distinct). Strings are copied. 0 with *out set, AGENT_E_INVAL, or -ENOMEM.
 */
int ev_filter_new(const char *provider, const char *event_name,
                  const struct ev_filter_field *fields, size_t n, struct ev_filter **out);
/* Accepts NULL. Detach it first (or free the checker) if it was attached. */
void ev_filter_free(struct ev_filter *f);

/*
 * Sets ck's metadata and event callbacks (nettrace_set_metadata_cb, nettrace_set_event_cb) to the
 * filter's; call before feeding ck. The filter reads the Trace object's pointer size from ck.
 * ck must outlive the filter's use, or be detached with both callbacks set to NULL.
 */
void ev_filter_attach(struct ev_filter *f, struct nettrace_checker *ck);

/* Called by the attached checker; exposed for callers with their own callbacks and tests. */
void ev_filter_on_metadata(struct ev_filter *f, const struct nettrace_metadata *md,
                           const uint8_t *payload, size_t len);
void ev_filter_on_event(struct ev_filter *f, const struct nettrace_event *ev);

enum ev_filter_state ev_filter_get_state(const struct ev_filter *f);

/*
 * What decided the state, for a log line: MATCHED "event id 1 version 0 at timestamp T",
 * MISMATCH "the event has no payload field 'X'"; "" while watching.
 */
const char *ev_filter_detail(const struct ev_filter *f);

/* Events of the filter's provider and name seen so far (matching the payload or not). */
uint64_t ev_filter_candidates(const struct ev_filter *f);

/*
 * The name TraceEvent's dynamic parser gives the events of a metadata record (see the top), or
 * with native_names, for a native event ev_native knows, its manifest symbol. md_name is the
 * record's event name (UTF-8, "" when none), has_opcode whether it carried an OpCode tag (V5) or
 * OptionalMetadata OpCode (V6). Writes a NUL-terminated name to out; AGENT_E_NOSPACE if cap is
 * too small.
 */
int ev_filter_event_name(const char *provider, const char *md_name, bool has_opcode, uint8_t opcode,
                         uint32_t event_id, uint32_t version, bool native_names, char *out,
                         size_t cap);

#endif
