/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_STACKS_H
#define AGENT_EV_STACKS_H

/*
 * GET /stacks' answer (docs/routes.md, call stacks): the managed call stack of every thread, from
 * the first round of a SampleProfiler session (every thread's first sample,
 * ev_symbols_first_stacks) named by the rundown, in dotnet-monitor's three shapes:
 *  - JSON, its CallStackResult: {"stacks":[{"threadId":N,"threadName":"…","frames":[
 *    {"methodName","methodToken","typeName","moduleName","moduleVersionId","hidden"},…]},…]},
 *    frames leaf first;
 *  - text: per thread "Thread: (0x<hex id>)" (then " <name>" when it has one), its frames as
 *    "  <module file>!<type>.<method>", leaf first, and an empty line;
 *  - speedscope (application/speedscope+json): one evented profile per thread, named as the text
 *    header, its frames opened outermost first at 0 and closed at 1 (unit none), the frames'
 *    names in "shared.frames" ("[NativeFrame]" and "UnknownClass" first, as dotnet-monitor).
 * A run of addresses in no method (native code, stubs) is one "[NativeFrame]" frame, as
 * dotnet-monitor shows native frames. What an out-of-process reader cannot know is written as
 * dotnet-monitor writes it when it does not know either: moduleVersionId the empty GUID, hidden
 * false (no attribute is read), no parameterTypes (docs/deviations.md §4.14).
 *
 * Threads are in the order they were first sampled. A thread's name comes from thread_name (NULL
 * or "" for none; made valid UTF-8 in JSON: the kernel's 15 bytes may cut a character). A method
 * without a type is UnknownClass's, as in dotnet-monitor's names.
 *
 * Memory: the writer's own tables (speedscope's shared frames, a thread's frame list) are charged
 * to s's share (ev_symbols_charge) and given back before it returns; the output goes to sink in
 * pieces of about 256 KiB. Pure: no I/O, no libuv.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_symbols.h"

struct buf;

enum ev_stacks_format { EV_STACKS_JSON, EV_STACKS_TEXT, EV_STACKS_SPEEDSCOPE };

#define EV_STACKS_NATIVE_FRAME   "[NativeFrame]"
#define EV_STACKS_UNKNOWN_CLASS  "UnknownClass"
#define EV_STACKS_EMPTY_GUID     "00000000-0000-0000-0000-000000000000"
#define EV_STACKS_UNKNOWN_MODULE "UnknownModule"

struct ev_stacks_opts {
    enum ev_stacks_format format;
    /* The thread's name, or NULL; the string is read during the call only. */
    const char *(*thread_name)(void *ud, uint64_t thread);
    void *name_ud;
};

/* Threads and frames written. */
struct ev_stacks_counts {
    uint64_t threads;
    uint64_t frames;
};

/* The stacks of every thread s sampled, in opts->format (counts: what was written, or NULL):
 * 0, -ENOMEM, AGENT_E_BUDGET or the sink's error. Call it once the stream is finished (the
 * rundown names the methods). */
int ev_stacks_write(struct ev_symbols *s, const struct ev_stacks_opts *opts,
                    struct ev_stacks_counts *counts, ev_symbols_sink_cb sink, void *ud);

/*
 * The pieces of the writer that GET /exceptions' frames share (ev_exc.h), so that both name a
 * frame the same way.
 *
 * ev_stacks_frames: the frames of ips[0..n) (leaf first), each ip named by ev_symbols_frame_of
 * (s NULL: every ip unknown), a run of unknown addresses given once (known false). cb gets each
 * frame (valid during the call) and its index k among those given; a non-zero return ends the walk
 * and is returned. *nframes (may be NULL): the frames given. 0, -ENOMEM or AGENT_E_BUDGET (the
 * range index).
 */
typedef int (*ev_stacks_frame_cb)(void *ud, const struct ev_symbols_frame *f, size_t k);
int ev_stacks_frames(struct ev_symbols *s, const uint64_t *ips, size_t n, ev_stacks_frame_cb cb,
                     void *ud, size_t *nframes);
/*
 * f as the JSON shows it, into *out (its strings are f's or static): a native frame
 * (known false) has type, method and module EV_STACKS_NATIVE_FRAME and token 0; an empty type is
 * EV_STACKS_UNKNOWN_CLASS; an unknown module EV_STACKS_UNKNOWN_MODULE with no extension. The
 * module's name as written is module then module_ext ("TestApp" ".dll").
 */
void ev_stacks_frame_shown(const struct ev_symbols_frame *f, struct ev_symbols_frame *out);
/*
 * Appends f as one JSON frame object to b (after a ',' unless first): methodName, methodToken,
 * with parameter_types "parameterTypes":[] (dotnet-monitor writes it for exceptions; the types
 * are not known out of process), typeName, moduleName, moduleVersionId, hidden. 0 or -ENOMEM.
 */
int ev_stacks_json_frame(struct buf *b, const struct ev_symbols_frame *f, bool first,
                         bool parameter_types);
/* Appends f's text name to b: "Module.dll!Type.Method" (UnknownClass without a type),
 * or EV_STACKS_NATIVE_FRAME. 0 or -ENOMEM. */
int ev_stacks_frame_text(struct buf *b, const struct ev_symbols_frame *f);

#endif
