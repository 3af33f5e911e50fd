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

#include <stddef.h>
#include <stdint.h>

#include "ev_symbols.h"

enum ev_stacks_format { EV_STACKS_JSON, EV_STACKS_TEXT, EV_STACKS_SPEEDSCOPE };

#define EV_STACKS_NATIVE_FRAME  "[NativeFrame]"
#define EV_STACKS_UNKNOWN_CLASS "UnknownClass"
#define EV_STACKS_EMPTY_GUID    "00000000-0000-0000-0000-000000000000"

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

#endif
