/* SPDX-License-Identifier: MIT */
/*
 * The runtime triggers' events as decoded native records (docs/events.md §5, profiles.md §2;
 * layouts in events/ev_native.c, from the runtime's manifest): GCStart, GCSuspendEEBegin,
 * GCRestartEEEnd and ExceptionThrown of Microsoft-Windows-DotNETRuntime, their fields read by name
 * so that every version the table knows is read alike.
 */
#include "rules.h"

#include <string.h>

#include "err.h"
#include "ev_native.h"
#include "ev_rd.h"

#define EVENT_GC_START          1
#define EVENT_GC_RESTART_EE_END 3
#define EVENT_GC_SUSPEND_EE     9
#define EVENT_EXCEPTION_THROWN  80

/* A top-level scalar field's value, or 0 when this version of the event has no such field. */
static uint32_t field_u32(const struct ev_native_record *rec, const char *name)
{
    int idx = ev_native_index(rec->event, name);
    return idx >= 0 && rec->v[idx].p != NULL ? (uint32_t)rec->v[idx].u : 0;
}

int rules_runtime_event_from_native(const struct ev_native_record *rec, int64_t timestamp_ticks,
                                    char *scratch, size_t cap, struct rules_runtime_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->timestamp_ticks = timestamp_ticks;
    const struct ev_native_event *e = rec->event;
    if (e == NULL || e->provider != EV_NATIVE_RUNTIME) {
        return AGENT_E_NOTFOUND;
    }
    switch (e->id) {
    case EVENT_GC_START:
        ev->kind = RULES_RUNTIME_GC_START;
        ev->depth = field_u32(rec, "Depth"); /* GCStart_V0 has none: gen0 */
        ev->reason = field_u32(rec, "Reason");
        return 0;
    case EVENT_GC_SUSPEND_EE:
        ev->kind = RULES_RUNTIME_SUSPEND_BEGIN;
        ev->reason = field_u32(rec, "Reason");
        return 0;
    case EVENT_GC_RESTART_EE_END:
        ev->kind = RULES_RUNTIME_RESTART_END;
        return 0;
    case EVENT_EXCEPTION_THROWN:
        break;
    default:
        return AGENT_E_NOTFOUND;
    }
    ev->kind = RULES_RUNTIME_EXCEPTION;
    ev->exception_type = "";
    int idx = ev_native_index(e, "ExceptionType");
    if (idx < 0 || rec->v[idx].p == NULL) {
        return 0; /* ExceptionThrown_V0: no fields */
    }
    if (cap == 0) {
        return AGENT_E_NOSPACE;
    }
    int rc = ev_utf16_to_utf8(rec->v[idx].p, rec->v[idx].count, scratch, cap, NULL);
    if (rc != 0) {
        return rc;
    }
    ev->exception_type = scratch;
    return 0;
}
