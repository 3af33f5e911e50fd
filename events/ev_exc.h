/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_EXC_H
#define AGENT_EV_EXC_H

/*
 * The history of first-chance exceptions of one .NET process (GET/POST /exceptions), kept from
 * the runtime's ExceptionThrown_V1 events (ev_exception_thrown_read, ev_profile.h) with their
 * stacks, and written in dotnet-monitor's /exceptions shapes:
 *  - NDJSON (application/x-ndjson): one ExceptionInstance per line, {"id","timestamp","typeName",
 *    "moduleName","message","innerExceptions":[],"stack":{"threadId","threadName","frames":[…]}},
 *    timestamp as System.Text.Json writes a UTC DateTime ("2023-07-13T21:45:11.8056355Z", the
 *    fraction's trailing zeros dropped: "…:11.5Z", "…:11Z"), frames as GET /stacks'
 *    (ev_stacks_json_frame) with "parameterTypes":[];
 *  - JSON sequence (application/json-seq): 0x1E, the same JSON, "\n";
 *  - text: per instance with frames "First chance exception at <timestamp, .NET's round-trip "O":
 *    7 fractional digits>\n<type>: <message>",
 *    each frame "\n   at <type>.<method>", then "\n\n".
 * What an out-of-process reader cannot know is left as dotnet-monitor leaves what it does not
 * know: the type's moduleName "", innerExceptions [] (no inner part in the text), no "activity",
 * parameterTypes [] and no parameter list in the text. Frames are leaf first, at most
 * EV_EXC_MAX_FRAMES (the leaf side), named when written through the process's ev_symbols (filled
 * by a rundown elsewhere); a run of addresses in no known method is one "[NativeFrame]" frame.
 *
 * Instances get ids 1, 2, … in the order they are kept; the history holds the newest: an add
 * that would go over max_instances, max_bytes or the share drops the oldest first (evicted).
 * Identical exceptions are also counted per group: count, first and last id, last time. A group
 * is keyed as the exception is kept, before anything names its frames, by its type and its stack's
 * first EV_EXC_GROUP_IPS ips (the EIP without a stack). It is written by the thrower as shown: its
 * site is the first frame the history's writers would show, and groups of the same type and site
 * are written as one (ev_exc_write_groups). So the exceptions .NET 9+ dispatches in managed code,
 * whose stacks all start at the same runtime frames, are still told apart by the method that threw.
 *
 * Filters are dotnet-monitor's ExceptionsConfiguration (include and exclude lists of
 * {exceptionType, typeName, methodName, moduleName}, ordinal comparison, on the exception's type
 * and on its top frame as the JSON shows it, e.g. moduleName "TestApp.dll"): excluded when an
 * exclude entry matches; then, with include entries, kept only when one matches. The store's own
 * filters (ev_exc_set_filters) apply to the groups too, the group's site taken as its top frame
 * (none without a stack, as for an instance).
 *
 * Memory: every instance (record, stack, strings), the history's slots, the groups (record, type,
 * ips) and their table are charged in bytes to the share (limits.share; NULL: dotmon's total)
 * before they are kept, and given back when dropped or at ev_exc_free. max_bytes bounds the
 * instances' records, stacks and strings; the groups are at most EV_EXC_MAX_GROUPS (the least
 * recently thrown makes room). Type and message are kept as UTF-8, each cut at EV_EXC_MAX_STRING
 * bytes (ev_name_cut, EV_CUT_MARKER). The writers' output buffer (a batch and one instance) is
 * not charged; ev_exc_write_groups' lines are, during the call.
 *
 * Pure: no libuv, no I/O, no globals; output goes to a sink in pieces. Errors: -ENOMEM,
 * AGENT_E_INVAL (bad argument or filter document), AGENT_E_PROTO (a payload that cannot be read),
 * AGENT_E_BUDGET (over the share), and the sink's own.
 */

#include <stddef.h>
#include <stdint.h>

#include "ev_symbols.h"

#define EV_EXC_MAX_FRAMES      256u  /* frames kept per instance, from the leaf */
#define EV_EXC_MAX_STRING      1024u /* bytes of a type or message, then EV_CUT_MARKER */
#define EV_EXC_MAX_GROUPS      1024u /* groups counted at once */
#define EV_EXC_GROUP_IPS       8u    /* ips of a stack, from the leaf, that key its group */
#define EV_EXC_DEFAULT_HISTORY 20u   /* dotnet-monitor's ExceptionsOptionsDefaults.TopLevelLimit */

struct mb_share;
struct ev_exc;

struct ev_exc_limits {
    size_t max_instances;   /* > 0 */
    size_t max_bytes;       /* > 0: the instances' bytes */
    struct mb_share *share; /* borrowed, outlives the store; NULL: dotmon's total */
};

/* A store within limits: 0, AGENT_E_INVAL (a zero limit), AGENT_E_BUDGET or -ENOMEM. */
int ev_exc_new(const struct ev_exc_limits *limits, struct ev_exc **out);
/* Frees x and gives back every byte it charged. Accepts NULL. */
void ev_exc_free(struct ev_exc *x);

/* One ExceptionThrown event. */
struct ev_exc_event {
    int64_t unix_ns; /* when it was thrown: nanoseconds since 1970-01-01 UTC */
    uint64_t thread; /* the thread that threw */
    const uint8_t *payload;
    size_t len;
    uint32_t version;    /* the event's metadata version: V1 and later are read */
    size_t pointer_size; /* the stream's: 4 or 8 */
    const uint64_t *ips; /* the event's stack, leaf first (NULL when n_ips is 0) */
    size_t n_ips;
};

/*
 * Keeps e as the newest instance (the next id), dropping the oldest while the history is over its
 * limits. The payload and ips are read during the call only. 0; AGENT_E_PROTO when the payload
 * cannot be read or is V0 (no type: counted as malformed); AGENT_E_BUDGET when the share refuses
 * it with the history empty, or it alone is larger than max_bytes (counted as dropped);
 * AGENT_E_INVAL (pointer_size, or ips NULL with n_ips > 0); -ENOMEM. A group that cannot be kept is
 * counted (groups_dropped), the instance still kept.
 */
int ev_exc_add(struct ev_exc *x, const struct ev_exc_event *e);

struct ev_exc_stats {
    uint64_t added;          /* instances kept: the last id given */
    uint64_t kept;           /* instances held now */
    uint64_t evicted;        /* instances dropped, oldest first, for the limits */
    uint64_t dropped;        /* events not kept: over the share (AGENT_E_BUDGET) */
    uint64_t malformed;      /* events whose payload could not be read */
    uint64_t groups;         /* groups held now */
    uint64_t groups_evicted; /* groups that made room for a newer one */
    uint64_t groups_dropped; /* groups not kept (the share, no memory) */
    uint64_t bytes;          /* charged now */
};
void ev_exc_get_stats(const struct ev_exc *x, struct ev_exc_stats *out);

/* A filter entry; NULL or "" members are not compared. */
struct ev_exc_filter {
    const char *exception_type; /* the exception's type, e.g. "System.InvalidOperationException" */
    const char *type_name;      /* the top frame's type */
    const char *method_name;    /* the top frame's method */
    const char *module_name;    /* the top frame's module file, e.g. "TestApp.dll" */
};

/* A parsed ExceptionsConfiguration; owns its strings. */
struct ev_exc_filters {
    struct ev_exc_filter *include;
    size_t ninclude;
    struct ev_exc_filter *exclude;
    size_t nexclude;
};

/*
 * dotnet-monitor's ExceptionsConfiguration body, json[0..len): {"include":[filter…],
 * "exclude":[filter…]}, a filter {"exceptionType","typeName","methodName","moduleName"} of
 * strings or null; a list may be null or absent. Member names match in any case (ASP.NET Core's
 * web defaults); other members are refused (its OpenAPI: additionalProperties false); a member
 * given twice: the last counts. 0 with *out (free with ev_exc_filters_free), AGENT_E_INVAL with a
 * message in err[0..errlen), or -ENOMEM.
 */
int ev_exc_filters_parse(const char *json, size_t len, struct ev_exc_filters **out, char *err,
                         size_t errlen);
/* Accepts NULL. */
void ev_exc_filters_free(struct ev_exc_filters *f);

/*
 * The store's own filters (the history's collection filters: InProcessFeatures:Exceptions:
 * CollectionFilters), applied by every write before the request's, and to the groups by
 * ev_exc_write_groups; f is borrowed and outlives x (NULL: none). The frames they name are only
 * known once a rundown named the methods, so they are applied as the history is written, not as
 * it is kept.
 */
void ev_exc_set_filters(struct ev_exc *x, const struct ev_exc_filters *f);

enum ev_exc_format { EV_EXC_NDJSON, EV_EXC_JSON_SEQ, EV_EXC_TEXT };

/*
 * The instances with ids after after_id (0: all), oldest first, that pass the filters, in fmt,
 * to sink in pieces. Frames are named through sym (NULL: every frame native); thread_name gives
 * a thread's name (NULL or "" for none; may be NULL itself). *last_id_out (may be NULL): the
 * newest id looked at (after_id when there is none), to pass as after_id next time for a live
 * tail. sink and thread_name must not change x. 0, AGENT_E_INVAL (fmt), -ENOMEM, AGENT_E_BUDGET
 * or the sink's error.
 */
int ev_exc_write(const struct ev_exc *x, struct ev_symbols *sym,
                 const struct ev_exc_filter *include, size_t ninclude,
                 const struct ev_exc_filter *exclude, size_t nexclude, enum ev_exc_format fmt,
                 uint64_t after_id, uint64_t *last_id_out,
                 const char *(*thread_name)(void *ud, uint64_t thread), void *name_ud,
                 ev_symbols_sink_cb sink, void *ud);

/*
 * How many instances with ids after after_id have a frame sym does not name, past the leading
 * frames the writers leave out (sym NULL: every instance with a frame), into *out: those a new
 * rundown might name, for a live tail. 0, -ENOMEM
 * or AGENT_E_BUDGET (sym's range index).
 */
int ev_exc_unnamed(const struct ev_exc *x, struct ev_symbols *sym, uint64_t after_id, size_t *out);

/*
 * The groups as NDJSON, one line per (type, throw site as shown), most thrown first (then by
 * first id): {"typeName","throwSite","count","firstId","lastId","lastTimestamp"}.
 *  - A group's throw site is the first frame of its ips that the history's writers would show,
 *    named through sym (NULL: every frame native): the runtime's System.Runtime.EH frames and the
 *    unnamed addresses before them are skipped (not when nothing else is left in its ips), the
 *    EIP's frame without a stack. It is written as ev_stacks_frame_text does:
 *    "Module.dll!Type.Method", "[NativeFrame]" when unknown.
 *  - Groups with the same typeName and a named throwSite of the same text are one line: counts
 *    summed, the smallest firstId, the largest lastId and that group's lastTimestamp. Groups whose
 *    site is not named are not merged: "[NativeFrame]" does not tell where they were thrown.
 *  - The store's own filters (ev_exc_set_filters) apply before the merge, as to the instances
 *    (exclude first, then include): on the group's type and its throw site as the top frame (a
 *    group of exceptions without a stack has no top frame).
 * The lines' working memory is charged to the share during the call and given back. 0, -ENOMEM,
 * AGENT_E_BUDGET or the sink's error.
 */
int ev_exc_write_groups(const struct ev_exc *x, struct ev_symbols *sym, ev_symbols_sink_cb sink,
                        void *ud);

#endif
