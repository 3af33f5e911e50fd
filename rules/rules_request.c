/* SPDX-License-Identifier: MIT */
/*
 * The ASP.NET triggers' events as decoded records (docs/rules.md §4; dotnet/diagnostics
 * Triggers/AspNet/AspNetTrigger.cs): DiagnosticSourceEventSource's Activity1Start/Activity1Stop
 * carry an Arguments array of {Key, Value} string pairs, shaped by the FilterAndPayloadSpecs the
 * session asked for; Microsoft.AspNetCore.Hosting's EventCounters only wake the trigger up.
 */
#include "rules.h"

#include <string.h>

#include "ascii.h"
#include "err.h"
#include "ev_payload.h"
#include "ev_rd.h"
#include "num.h"
#include "rules_internal.h"

#define DIAGNOSTIC_SOURCE "Microsoft-Diagnostics-DiagnosticSource"
#define ASPNET_HOSTING    "Microsoft.AspNetCore.Hosting"

/* Where the strings go: one cursor over the caller's scratch buffer. */
struct scratch {
    char *p;
    size_t cap, used;
};

static int put_utf16(struct scratch *s, const uint8_t *p, size_t units, const char **out)
{
    size_t len;
    int rc = ev_utf16_to_utf8(p, units, s->p + s->used, s->cap - s->used, &len);
    if (rc != 0) {
        return AGENT_E_NOSPACE;
    }
    *out = s->p + s->used;
    s->used += len + 1;
    return 0;
}

/* A decimal integer value (int.Parse / long.Parse of what the DiagnosticSource wrote). */
static int utf16_number(const uint8_t *p, size_t units, int64_t *out)
{
    char text[24];
    if (units == 0 || units >= sizeof(text) ||
        ev_utf16_to_utf8(p, units, text, sizeof(text), NULL) != 0) {
        return AGENT_E_PROTO;
    }
    bool neg = text[0] == '-';
    uint64_t v;
    if (num_parse_u64_str(text + neg, 10, (uint64_t)INT64_MAX, &v) != 0) {
        return AGENT_E_PROTO;
    }
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

/* One {Key, Value} pair: the four keys the triggers read (case-insensitive). */
static int take_pair(struct scratch *s, const uint8_t *k, size_t kunits, const uint8_t *v,
                     size_t vunits, struct rules_request_event *ev)
{
    char key[32];
    if (kunits >= sizeof(key) || ev_utf16_to_utf8(k, kunits, key, sizeof(key), NULL) != 0) {
        return 0; /* not one of ours */
    }
    int64_t n;
    if (ascii_ieq(key, "ActivityId")) {
        return put_utf16(s, v, vunits, &ev->activity_id);
    }
    if (ascii_ieq(key, "Path")) {
        return put_utf16(s, v, vunits, &ev->path);
    }
    if (ascii_ieq(key, "StatusCode")) {
        int rc = utf16_number(v, vunits, &n);
        ev->status_code = (rc == 0 && n >= 0 && n <= 999) ? (int)n : 0;
        return rc == 0 && n >= 0 && n <= 999 ? 0 : AGENT_E_PROTO;
    }
    if (ascii_ieq(key, "ActivityDuration")) {
        int rc = utf16_number(v, vunits, &ev->duration_ticks);
        return rc;
    }
    return 0;
}

/* The Arguments array: count elements of two UTF-16 strings each (Key, then Value). */
static int read_arguments(const struct ev_record *rec, struct scratch *s,
                          struct rules_request_event *ev)
{
    int idx = ev_schema_find(rec->schema, "Arguments");
    if (idx < 0 || rec->schema->fields[idx].code != EV_TYPE_ARRAY || rec->v[idx].p == NULL) {
        return AGENT_E_PROTO;
    }
    const struct ev_field *elem = &rec->schema->fields[rec->schema->fields[idx].child];
    if (elem->code != EV_TYPE_OBJECT || elem->nchild != 2) {
        return AGENT_E_PROTO;
    }
    bool value_first = strcmp(rec->schema->fields[elem->child].name, "Value") == 0;
    struct ev_rd r;
    ev_rd_init(&r, rec->v[idx].p, rec->v[idx].len);
    for (uint32_t i = 0; i < rec->v[idx].count; i++) {
        const uint8_t *a, *b;
        size_t na, nb;
        if (!ev_rd_utf16z(&r, &a, &na) || !ev_rd_utf16z(&r, &b, &nb)) {
            return AGENT_E_PROTO;
        }
        int rc = value_first ? take_pair(s, b, nb, a, na, ev) : take_pair(s, a, na, b, nb, ev);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int rules_request_event_from_record(const struct ev_record *rec, int64_t timestamp_ms,
                                    char *scratch, size_t cap, struct rules_request_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->timestamp_ms = timestamp_ms;
    const struct ev_schema *sc = rec->schema;
    const char *provider = sc->provider != NULL ? sc->provider : "";
    const char *name = sc->event_name != NULL ? sc->event_name : "";
    if (ascii_ieq(provider, ASPNET_HOSTING) && strcmp(name, "EventCounters") == 0) {
        ev->kind = RULES_REQUEST_HEARTBEAT;
        return 0;
    }
    bool start = strcmp(name, "Activity1Start") == 0 || strcmp(name, "Activity1/Start") == 0;
    bool stop = strcmp(name, "Activity1Stop") == 0 || strcmp(name, "Activity1/Stop") == 0;
    if (!ascii_ieq(provider, DIAGNOSTIC_SOURCE) || !(start || stop)) {
        return AGENT_E_NOTFOUND;
    }
    ev->kind = start ? RULES_REQUEST_START : RULES_REQUEST_STOP;
    ev->activity_id = "";
    ev->path = "";
    struct scratch s = {scratch, cap, 0};
    return read_arguments(rec, &s, ev);
}
