/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_SYMBOLS_H
#define AGENT_EV_SYMBOLS_H

/*
 * CPU samples with their stacks named, written as speedscope JSON (docs/events.md §6), or summed up
 * per method (ev_symbols_aggregate: exclusive and inclusive counts, the top N, and the most
 * sampled stacks, as JSON or text; GET /profile answers with it).
 *
 * Fed a nettrace stream (nettrace.h, kept stacks), it collects:
 *  - method code ranges from Microsoft-Windows-DotNETRuntime 143 MethodLoadVerbose and
 *    Microsoft-Windows-DotNETRuntimeRundown 143 MethodDCStartVerbose / 144 MethodDCEndVerbose,
 *    any version (0, 1 and 2 appear; payloads longer than the known layout are accepted);
 *  - modules from runtime 152 ModuleLoad and rundown 153 ModuleDCStart / 154 ModuleDCEnd;
 *  - samples from Microsoft-DotNETCore-SampleProfiler event 0: the sampled thread, its timestamp
 *    and its stack (leaf first). Stacks arrive before the rundown that names them, so a sample
 *    is kept as (thread, timestamp, stack index) with identical stacks stored once, and names
 *    are resolved when the profile is written.
 *
 * An IP resolves to the method range that holds it; when ranges overlap (code memory reused
 * after an unload) the one reported last wins. The name is built as TraceEvent builds it:
 * "Module!Namespace.Method(args)", where Module is the module's IL file name without its
 * directory and its .dll/.exe extension, and (args) is the signature from its first '('. An IP in
 * no range is the frame "?!?" (TraceEvent's unknown frame; EventPipe names no native module on
 * Linux). A method whose module is unknown gets the module "?".
 *
 * Memory: every table (methods, modules, names, stacks, addresses, samples, their hash tables,
 * the frames and the writers' temporaries) is charged in bytes to a share of dotmon's budget
 * (ev_symbols_set_share; else to the total) before it grows, and given back when it is freed;
 * method and module names are cut at EV_SYMBOLS_MAX_NAME bytes (ev_name_cut, EV_CUT_MARKER).
 *
 * Pure: no libuv, no I/O, no globals. Errors: -ENOMEM (UV_ENOMEM), AGENT_E_INVAL (bad argument),
 * AGENT_E_TOOBIG (more than EV_SYMBOLS_MAX_* of something), AGENT_E_BUDGET (over the share or
 * dotmon's total), and nettrace_feed's errors from ev_symbols_feed.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EV_SYMBOLS_MAX_METHODS (4u * 1024u * 1024u)
#define EV_SYMBOLS_MAX_SAMPLES (256u * 1024u * 1024u)
#define EV_SYMBOLS_MAX_IPS     (256u * 1024u * 1024u) /* distinct stacks' addresses, summed */
#define EV_SYMBOLS_MAX_NAME    1024u /* bytes of a method's or module's name, then EV_CUT_MARKER */
#define EV_SYMBOLS_UNKNOWN     "?!?"
/* The runtime's own library: its frames are not an event's site (ev_symbols_stack_site). */
#define EV_SYMBOLS_RUNTIME_LIB "System.Private.CoreLib"

struct ev_symbols_stats {
    uint64_t bytes;
    uint64_t events;
    uint64_t methods;         /* method ranges read */
    uint64_t modules;         /* module events read */
    uint64_t samples;         /* samples kept */
    uint64_t external;        /* among them, taken outside managed code (SampleProfiler External) */
    uint64_t stacks;          /* distinct stacks kept (samples' and ev_symbols_event_stack's) */
    uint64_t no_stack;        /* samples without a stack (not kept) */
    uint64_t malformed;       /* method or module events that could not be read (skipped) */
    uint64_t lost;            /* events the runtime dropped (nettrace_stats.lost) */
    int32_t sampling_rate_ns; /* the trace header's ExpectedCPUSamplingRate (0 if absent) */
};

struct ev_symbols;
struct nettrace_event;

/*
 * Sink for the JSON text: called with consecutive pieces; returns 0 to go on, or a negative code
 * that ev_symbols_write_speedscope returns at once.
 */
typedef int (*ev_symbols_sink_cb)(void *ud, const uint8_t *p, size_t n);

/* 0 or -ENOMEM. */
int ev_symbols_new(struct ev_symbols **out);
/* Accepts NULL. */
void ev_symbols_free(struct ev_symbols *s);

/*
 * Charges what s will hold to share (borrowed: it must outlive s; NULL: dotmon's total only).
 * Before the first feed: AGENT_E_INVAL once s holds something.
 */
struct mb_share;
int ev_symbols_set_share(struct ev_symbols *s, struct mb_share *share);
/* Bytes s holds now, as charged (all given back by ev_symbols_free). */
uint64_t ev_symbols_held(const struct ev_symbols *s);
/* Bytes another writer of s's data (ev_stacks) holds, charged to s's share first: 0 or
 * AGENT_E_BUDGET; ev_symbols_release gives them back, before ev_symbols_free. */
int ev_symbols_charge(struct ev_symbols *s, size_t n);
void ev_symbols_release(struct ev_symbols *s, size_t n);

/*
 * The next n bytes of the stream: 0, or nettrace_feed's error, or AGENT_E_BUDGET once something
 * could not be kept within the share (later feeds return it again).
 */
int ev_symbols_feed(struct ev_symbols *s, const uint8_t *p, size_t n);
/*
 * EOF: 0 when the stream was valid and complete and every sample, method and module in it was
 * kept, else a negative code (AGENT_E_TRUNC when it ended early, AGENT_E_PROTO when it is invalid,
 * -ENOMEM, AGENT_E_TOOBIG or AGENT_E_BUDGET when something could not be kept; see
 * ev_symbols_error). Idempotent.
 */
int ev_symbols_finish(struct ev_symbols *s);
/* The stream's problem as one line ("nettrace at offset N: …"), NULL if none. */
const char *ev_symbols_error(const struct ev_symbols *s);
void ev_symbols_get_stats(const struct ev_symbols *s, struct ev_symbols_stats *out);

/*
 * The pieces ev_symbols_feed uses, for other sources and tests. payload[0..len) is the event's
 * payload and version its metadata version. add_method and add_module: 0, AGENT_E_PROTO (the
 * payload is too short for its version or a string is unterminated; counted as malformed),
 * AGENT_E_TOOBIG or -ENOMEM.
 */
int ev_symbols_add_method(struct ev_symbols *s, const uint8_t *payload, size_t len,
                          uint32_t version);
int ev_symbols_add_module(struct ev_symbols *s, const uint8_t *payload, size_t len,
                          uint32_t version);
/* One sample of thread at timestamp ts (QPC ticks) with ips[0..n), leaf first. 0, AGENT_E_INVAL
 * (n == 0), AGENT_E_TOOBIG or -ENOMEM. */
int ev_symbols_add_sample(struct ev_symbols *s, uint64_t thread, int64_t ts, const uint64_t *ips,
                          size_t n);
/*
 * Sets the sampling period (nanoseconds, default 1 ms or the trace header's), the QPC origin and
 * frequency used for the profile's times (default: the trace header's, else 0 and 1e9).
 */
void ev_symbols_set_clock(struct ev_symbols *s, int32_t sampling_rate_ns, int64_t qpc_origin,
                          int64_t qpc_frequency);

/*
 * The frame name of ip into out[0..cap) (NUL-terminated; cut to fit): 0, or AGENT_E_NOTFOUND
 * when ip is in no method range (out gets EV_SYMBOLS_UNKNOWN). -ENOMEM when the range index
 * cannot be built.
 */
int ev_symbols_resolve(struct ev_symbols *s, uint64_t ip, char *out, size_t cap);

/*
 * The method holding ip, in parts (GET /stacks' frames): its type ("Namespace.Class", as the
 * runtime's MethodNamespace: nested types joined by '+'), its name, its metadata token, and its
 * module's file name without the extension (NULL when no module event named it) and that
 * extension (".dll", ".exe" or ""). The strings point into s (valid until the next feed or add;
 * type and method are not NUL-terminated: use the lengths). 0, AGENT_E_NOTFOUND when ip is in
 * no method range (known false, module NULL, the rest empty), -ENOMEM or AGENT_E_BUDGET when
 * the range index cannot be built.
 */
struct ev_symbols_frame {
    bool known;
    uint32_t token;
    const char *type;
    size_t type_len;
    const char *method;
    size_t method_len;
    const char *module;
    const char *module_ext;
};
int ev_symbols_frame_of(struct ev_symbols *s, uint64_t ip, struct ev_symbols_frame *out);

/*
 * Every sampled thread's first sample, in the order the threads were first sampled: cb gets the
 * thread, whether the sampler found it outside managed code (External: blocked, in native
 * code), and the stack ips[0..n), leaf first (valid during the call). A non-zero return of cb
 * ends the walk and is returned. 0, AGENT_E_BUDGET or -ENOMEM otherwise.
 */
typedef int (*ev_symbols_thread_cb)(void *ud, uint64_t thread, bool external, const uint64_t *ips,
                                    size_t n);
int ev_symbols_first_stacks(struct ev_symbols *s, ev_symbols_thread_cb cb, void *ud);

/*
 * Other events of the same stream (ev_profile.h): cb sees every event after ev_symbols has read it
 * (methods, modules and samples included), during ev_symbols_feed; NULL removes it.
 */
typedef void (*ev_symbols_event_cb)(void *ud, const struct nettrace_event *ev);
void ev_symbols_set_event_cb(struct ev_symbols *s, ev_symbols_event_cb cb, void *ud);
/* The stream's pointer size (4 or 8; 8 before the trace header). */
size_t ev_symbols_pointer_size(const struct ev_symbols *s);
/* QPC ticks as milliseconds, at the trace header's frequency (1e9 without one or set_clock). */
double ev_symbols_ticks_ms(struct ev_symbols *s, int64_t ticks);

/*
 * Stacks of other events, kept (interned: identical stacks once) until the rundown can name them:
 * ev_symbols_event_stack keeps ev's stack (0, AGENT_E_NOTFOUND when it has none, AGENT_E_TOOBIG or
 * -ENOMEM), ev_symbols_intern_stack ips[0..n), leaf first (AGENT_E_INVAL when n == 0); the index
 * in *out either way. They are not samples: the CPU aggregation and speedscope ignore them.
 */
int ev_symbols_event_stack(struct ev_symbols *s, const struct nettrace_event *ev, uint32_t *out);
int ev_symbols_intern_stack(struct ev_symbols *s, const uint64_t *ips, size_t n, uint32_t *out);
/*
 * Where a kept stack's event happened, as "Module!Namespace.Method(args)" into out[0..cap): from
 * the leaf, the first frame in a known method whose module is not EV_SYMBOLS_RUNTIME_LIB (the
 * caller's code, not the allocation helper, lock or throw machinery of the runtime's library);
 * else the first frame in a known method; else EV_SYMBOLS_UNKNOWN and AGENT_E_NOTFOUND. 0,
 * AGENT_E_INVAL (no such stack) or -ENOMEM. Call it once every method is in (after the rundown).
 */
int ev_symbols_stack_site(struct ev_symbols *s, uint32_t stack, char *out, size_t cap);

/*
 * The samples as speedscope JSON (docs/api.md §8): "$schema", "shared.frames" (each distinct
 * name once), one "sampled" profile per thread in the order threads first appear ("Thread N"),
 * samples outermost frame first in time order, weights in milliseconds (the sampling period),
 * "exporter" and "name" (the given name, JSON-escaped). 0, -ENOMEM or the sink's error.
 */
int ev_symbols_write_speedscope(struct ev_symbols *s, const char *name, ev_symbols_sink_cb sink,
                                void *ud);

/*
 * Where the CPU went: per frame name, over every thread's samples taken in managed code (the
 * sampler's External samples, threads outside managed code, are mostly threads blocked in a wait
 * and are left out: counted in external only), the exclusive count (samples
 * where it is the leaf) and the inclusive count (samples where it is anywhere on the stack, once
 * per sample however often it recurses). Runtime helpers at the leaf are not where the time went
 * but where the sampler stops the thread to walk its stack (a busy loop is sampled at its GC
 * poll): the exclusive count of such a sample goes to the first frame below them that is not
 * one; a stack of helpers only keeps its leaf. The helpers are the frames whose method (after
 * "Module!") starts with one of EV_SYMBOLS_LEAF_SKIPPED, a NULL-terminated list:
 * "System.Threading.Thread.PollGC" and "System.Threading.Thread.<PollGC>" (its worker
 * <PollGC>g__PollGCWorker|…). dotnet-trace shows them as leaves too.
 */
extern const char *const EV_SYMBOLS_LEAF_SKIPPED[];

#define EV_SYMBOLS_TOP_MAX 1000u

struct ev_symbols_method_stat {
    char *name;
    uint64_t exclusive;
    uint64_t inclusive;
};

/*
 * Hot paths (GET /profile?paths=N): the most sampled distinct stacks, a stack being the sequence
 * of frame names of a managed sample over every thread (two samples at different addresses of
 * the same methods are one path). Leaf helpers (EV_SYMBOLS_LEAF_SKIPPED) are folded into their
 * caller as the exclusive count folds them: a busy loop's path ends in the loop, not in the GC
 * poll it was stopped at (a stack of helpers only is kept whole). A path keeps its innermost
 * EV_SYMBOLS_PATH_FRAMES frames, outermost first, and counts the outer ones it dropped.
 */
#define EV_SYMBOLS_PATHS_MAX   100u
#define EV_SYMBOLS_PATH_FRAMES 16u

struct ev_symbols_path {
    uint64_t samples;
    uint32_t elided;                      /* outer frames dropped */
    uint32_t n_frames;                    /* 1..EV_SYMBOLS_PATH_FRAMES */
    char *frames[EV_SYMBOLS_PATH_FRAMES]; /* outermost first, the leaf last */
};

struct ev_symbols_profile {
    uint64_t samples;  /* samples in managed code (SampleProfiler's Managed): the counts' 100% */
    uint64_t external; /* samples outside managed code (External: mostly waits), not counted */
    uint64_t threads;  /* distinct threads sampled */
    uint64_t leaf_skipped; /* samples whose leaf was a skipped helper */
    double sampling_ms;    /* the sampling period */
    /* The top frames, most first (ties by name): by exclusive, then by inclusive count. */
    struct ev_symbols_method_stat *by_exclusive;
    size_t n_exclusive;
    struct ev_symbols_method_stat *by_inclusive;
    size_t n_inclusive;
    /* The hot paths asked for (paths > 0): most samples first, ties by their frames' names
     * (outermost first, byte order; a path that is a prefix of another first). */
    bool has_paths;
    struct ev_symbols_path *paths;
    size_t n_paths;
};

/*
 * The aggregation of every sample into *out, keeping the top frames (1..EV_SYMBOLS_TOP_MAX) of
 * each order and the paths (0..EV_SYMBOLS_PATHS_MAX; 0: none, has_paths false) most sampled
 * stacks. What it works with is charged to s's share and freed before it returns; the names it
 * copies out (at most 2 × top and paths × EV_SYMBOLS_PATH_FRAMES, each at most
 * EV_SYMBOLS_MAX_NAME bytes) belong to *out. 0, AGENT_E_INVAL (top or paths out of range),
 * AGENT_E_BUDGET or -ENOMEM (*out then holds nothing to free).
 */
int ev_symbols_aggregate(struct ev_symbols *s, size_t top, size_t paths,
                         struct ev_symbols_profile *out);
/* Frees what aggregate put into p and zeroes it. Accepts a zeroed p. */
void ev_symbols_profile_fini(struct ev_symbols_profile *p);

/*
 * p as JSON: {"pid":…,"kind":"cpu","durationSeconds":…,"samples":…,"threads":…,
 * "externalSamples":…,"samplingMilliseconds":…,"exclusiveSkips":["System.Threading.Thread.PollGC",…],
 * "leafSkippedSamples":…,"top":[{"method","exclusive","exclusivePercent","inclusive",
 * "inclusivePercent"},…],"topInclusive":[…same…]} with a newline; percents of samples, two
 * decimals. With has_paths, "hotPaths":[{"samples","percent","frames":[outermost,…,leaf],
 * "elidedFrames"},…] after topInclusive. 0, -ENOMEM or the sink's error.
 */
int ev_symbols_write_profile_json(const struct ev_symbols_profile *p, uint64_t pid,
                                  uint32_t duration_s, ev_symbols_sink_cb sink, void *ud);
/* The same as an aligned text table (a summary line, then exclusive and inclusive counts, then
 * with has_paths a "Hot paths" section: each path's samples and percent, then its frames). */
int ev_symbols_write_profile_text(const struct ev_symbols_profile *p, uint64_t pid,
                                  uint32_t duration_s, ev_symbols_sink_cb sink, void *ud);

/*
 * The managed samples (as ev_symbols_aggregate counts them) as folded stacks, for a flame graph
 * (the /ui page; GET /profile?format=flame): {"pid","kind":"cpu","durationSeconds","samples",
 * "threads","externalSamples","samplingMilliseconds","exclusiveSkips":[…],"frames":[name,…],
 * "stacks":[[count,frame,…],…],"threadIds":[id,…],"threadStacks":[[thread,stack,count],…]} with a
 * newline. Each stack is its sample count, then indices into frames, outermost first; every
 * thread's samples together, identical stacks once. The per-thread split: threadIds are the
 * threads with managed samples (ascending), and each threadStacks entry says how many samples of
 * thread threadIds[thread] had stack stacks[stack] (the entries of a stack sum to its count).
 * Leaf helpers (exclusiveSkips) are left in the stacks: the reader folds them into their caller
 * as the aggregation does. 0, -ENOMEM or the sink's error.
 */
int ev_symbols_write_flame(struct ev_symbols *s, uint64_t pid, uint32_t duration_s,
                           ev_symbols_sink_cb sink, void *ud);

#endif
