/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_MODULES_H
#define AGENT_EV_MODULES_H

/*
 * The modules a loader rundown names, matched against a short list of file names (docs/profiles.md
 * §3, docs/events.md §6.2). A session with rundown keyword Loader 0x8 | EndRundown 0x100 that is
 * stopped at once streams, from Microsoft-Windows-DotNETRuntimeRundown, per loaded module one
 * DomainModuleDCEnd (152: u64 ModuleID, u64 AssemblyID, u64 AppDomainID, u32 ModuleFlags,
 * u32 Reserved1, wstr ModuleILPath, …) and one ModuleDCEnd (154: u64 ModuleID, u64 AssemblyID,
 * u32 ModuleFlags, u32 Reserved1, wstr ModuleILPath, …), then DCEndComplete (146); checked on
 * .NET 10.0.12. The DCStart forms (151, 153; StartRundown 0x40) have the same layouts and count
 * too. A module matches a watched name when the part of its ModuleILPath after the last '/' or
 * '\' equals it, ASCII case-insensitively.
 *
 * Pure: no libuv, no I/O, no globals; memory is the nettrace checker's (nettrace.h), nothing per
 * module. Errors from ev_modules_feed as nettrace_feed's.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EV_MODULES_MAX_WATCH 8

/* Rundown event ids (Microsoft-Windows-DotNETRuntimeRundown). */
#define EV_RUNDOWN_DC_END_COMPLETE       146
#define EV_RUNDOWN_DOMAIN_MODULE_DCSTART 151
#define EV_RUNDOWN_DOMAIN_MODULE_DCEND   152
#define EV_RUNDOWN_MODULE_DCSTART        153
#define EV_RUNDOWN_MODULE_DCEND          154

struct ev_modules_stats {
    uint64_t bytes;
    uint64_t events;
    uint64_t modules;      /* module events read (DomainModule and Module, DCStart and DCEnd) */
    uint64_t malformed;    /* module events whose payload holds no terminated ModuleILPath */
    uint64_t lost;         /* events the runtime dropped (nettrace_stats.lost) */
    bool rundown_complete; /* DCEndComplete seen */
};

struct ev_modules;

/*
 * files: 1..EV_MODULES_MAX_WATCH file names (ASCII, borrowed: they must outlive m). 0,
 * AGENT_E_INVAL (no out, no or too many names, an empty one) or -ENOMEM.
 */
int ev_modules_new(struct ev_modules **out, const char *const *files, size_t nfiles);
/* 0, or a negative error once the stream is invalid (later feeds return it again). */
int ev_modules_feed(struct ev_modules *m, const uint8_t *p, size_t n);
/* EOF: true when the stream was valid and complete (its end tag seen). Idempotent. */
bool ev_modules_finish(struct ev_modules *m);
/* The stream's error ("nettrace at offset N: …"), NULL if none. */
const char *ev_modules_error(const struct ev_modules *m);
/* Whether a module named files[i] was seen. */
bool ev_modules_found(const struct ev_modules *m, size_t i);
/*
 * After ev_modules_finish: NULL when the module list is whole (a valid complete stream, the
 * rundown ran to DCEndComplete, at least one module, no event lost, every module event read), so
 * a name not found is not loaded; else why not, in words (a static string).
 */
const char *ev_modules_inconclusive(const struct ev_modules *m);
void ev_modules_get_stats(const struct ev_modules *m, struct ev_modules_stats *out);
/* Accepts NULL. */
void ev_modules_free(struct ev_modules *m);

#endif
