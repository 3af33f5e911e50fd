/* SPDX-License-Identifier: MIT */
#include "ev_filter.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/ascii.h"
#include "common/civil.h"
#include "common/err.h"
#include "common/hex.h"
#include "ev_fmt.h"
#include "ev_native.h"
#include "ev_rd.h"
#include "ev_schemas.h"

/* A rendered payload value: numbers, GUIDs and dates are short; strings are compared in place. */
#define VALUE_MAX 64

/* One matching metadata definition (its slot in the schema registry): its field list, or its
 * native layout. */
struct def {
    const struct ev_schema *schema;       /* EventSource events; NULL for native ones */
    const struct ev_native_event *native; /* the runtime's native events */
    int16_t index[EV_FILTER_MAX_FIELDS];  /* field node (or native field) per filter entry, -1 */
    bool complete;                        /* every filter entry has a field */
};

struct ev_filter {
    char *provider;
    char *event_name;
    char **names;      /* the PayloadFilter's field names (copies) */
    char **values;     /* and values */
    size_t *value_len; /* strlen of each value */
    size_t nfields;
    char *scratch; /* a string field's UTF-8 form, as long as the longest value + 1 */
    size_t scratch_cap;
    struct ev_schemas defs; /* matching definitions by metadata id, a struct def each */
    enum ev_filter_state state;
    bool hydrated; /* the first candidate event has been checked for the filter's field names */
    uint64_t candidates;
    const struct nettrace_checker *ck;
    uint32_t ptr_size;
    char detail[256];
    struct ev_record rec; /* scratch for one candidate's decoded payload */
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d != NULL) {
        memcpy(d, s, n);
    }
    return d;
}

int ev_filter_new(const char *provider, const char *event_name,
                  const struct ev_filter_field *fields, size_t n, struct ev_filter **out)
{
    if (out == NULL || provider == NULL || *provider == '\0' || event_name == NULL ||
        *event_name == '\0' || n > EV_FILTER_MAX_FIELDS || (n > 0 && fields == NULL)) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < n; i++) {
        if (fields[i].name == NULL || *fields[i].name == '\0' || fields[i].value == NULL) {
            return AGENT_E_INVAL;
        }
        for (size_t j = 0; j < i; j++) {
            if (strcmp(fields[i].name, fields[j].name) == 0) {
                return AGENT_E_INVAL;
            }
        }
    }
    struct ev_filter *f = calloc(1, sizeof(*f));
    if (f == NULL) {
        return -ENOMEM;
    }
    f->provider = dup_str(provider);
    f->event_name = dup_str(event_name);
    f->names = calloc(n + 1, sizeof(*f->names));
    f->values = calloc(n + 1, sizeof(*f->values));
    f->value_len = calloc(n + 1, sizeof(*f->value_len));
    bool ok = f->provider != NULL && f->event_name != NULL && f->names != NULL &&
              f->values != NULL && f->value_len != NULL;
    for (size_t i = 0; ok && i < n; i++) {
        f->names[i] = dup_str(fields[i].name);
        f->values[i] = dup_str(fields[i].value);
        f->nfields = i + 1;
        ok = f->names[i] != NULL && f->values[i] != NULL;
        f->value_len[i] = strlen(fields[i].value);
        if (f->value_len[i] + 1 > f->scratch_cap) {
            f->scratch_cap = f->value_len[i] + 1;
        }
    }
    f->scratch_cap = f->scratch_cap < VALUE_MAX ? VALUE_MAX : f->scratch_cap;
    f->scratch = ok ? malloc(f->scratch_cap) : NULL;
    if (f->scratch == NULL) {
        ev_filter_free(f);
        return -ENOMEM;
    }
    f->ptr_size = 8;
    struct ev_schemas_config cfg = {.slot_size = sizeof(struct def), .max_ids = EV_FILTER_MAX_DEFS};
    ev_schemas_init(&f->defs, &cfg);
    *out = f;
    return 0;
}

void ev_filter_free(struct ev_filter *f)
{
    if (f == NULL) {
        return;
    }
    ev_schemas_fini(&f->defs);
    for (size_t i = 0; f->names != NULL && f->values != NULL && i < f->nfields; i++) {
        free(f->names[i]);
        free(f->values[i]);
    }
    free(f->names);
    free(f->values);
    free(f->value_len);
    free(f->scratch);
    free(f->provider);
    free(f->event_name);
    free(f);
}

static void on_metadata_cb(void *ud, const struct nettrace_metadata *md, const uint8_t *payload,
                           size_t len)
{
    ev_filter_on_metadata(ud, md, payload, len);
}

static void on_event_cb(void *ud, const struct nettrace_event *ev)
{
    ev_filter_on_event(ud, ev);
}

void ev_filter_attach(struct ev_filter *f, struct nettrace_checker *ck)
{
    f->ck = ck;
    nettrace_set_metadata_cb(ck, on_metadata_cb, f);
    nettrace_set_event_cb(ck, on_event_cb, f);
}

enum ev_filter_state ev_filter_get_state(const struct ev_filter *f)
{
    return f->state;
}

const char *ev_filter_detail(const struct ev_filter *f)
{
    return f->detail;
}

uint64_t ev_filter_candidates(const struct ev_filter *f)
{
    return f->candidates;
}

/* ---- TraceEvent's event names ----------------------------------------------------------- */

/* TraceEvent's names of the standard opcodes (TraceEvent.ToString(TraceEventOpcode)). */
static const char *opcode_name(uint8_t op, char *tmp, size_t cap)
{
    static const char *const names[] = {"Info",      "Start", "Stop",   "DCStart", "DCStop",
                                        "Extension", "Reply", "Resume", "Suspend", "Send"};
    if (op < sizeof(names) / sizeof(names[0])) {
        return names[op];
    }
    snprintf(tmp, cap, "Opcode(%u)", op);
    return tmp;
}

/* s[0..n) ends with the ASCII word w, ignoring case (.NET's OrdinalIgnoreCase on ASCII). */
static bool ends_with_ci(const char *s, size_t n, const char *w)
{
    size_t k = strlen(w);
    return n >= k && ascii_ieq_n(s + n - k, k, w);
}

int ev_filter_event_name(const char *provider, const char *md_name, bool has_opcode, uint8_t opcode,
                         uint32_t event_id, uint32_t version, bool native_names, char *out,
                         size_t cap)
{
    int n;
    if (md_name == NULL || *md_name == '\0') {
        const struct ev_native_event *e =
            native_names ? ev_native_lookup(provider, event_id, version) : NULL;
        if (e != NULL) {
            n = snprintf(out, cap, "%s", e->name);
        } else if (event_id == 0) {
            n = snprintf(out, cap, "EventWriteString");
        } else {
            n = snprintf(out, cap, "EventID(%" PRIu32 ")", event_id);
        }
        return n >= 0 && (size_t)n < cap ? 0 : AGENT_E_NOSPACE;
    }
    size_t len = strlen(md_name);
    /* Without an OpCode, TraceEvent reads one from the name (ExtractImpliedOpcode). */
    if (!has_opcode) {
        opcode = ends_with_ci(md_name, len, "Start")  ? 1
                 : ends_with_ci(md_name, len, "Stop") ? 2
                                                      : 0;
    }
    /* The task name is the event name without the opcode's word (StripStartStopInEventName). */
    if (opcode == 1 && ends_with_ci(md_name, len, "Start")) {
        len -= 5;
    } else if (opcode == 2 && ends_with_ci(md_name, len, "Stop")) {
        len -= 4;
    }
    char tmp[16];
    if (opcode == 0) {
        n = snprintf(out, cap, "%.*s", (int)len, md_name);
    } else {
        n = snprintf(out, cap, "%.*s/%s", (int)len, md_name, opcode_name(opcode, tmp, sizeof(tmp)));
    }
    return n >= 0 && (size_t)n < cap ? 0 : AGENT_E_NOSPACE;
}

/* ---- definitions ---------------------------------------------------------------------------- */

static const struct def *find_def(struct ev_filter *f, uint32_t id)
{
    const struct ev_schema_entry *e = ev_schemas_find(&f->defs, id);
    return e != NULL ? e->slot : NULL;
}

/* The filter entries' fields among the event's top-level payload fields (PayloadNames). */
static void map_fields(const struct ev_filter *f, struct def *d)
{
    d->complete = true;
    for (size_t i = 0; i < f->nfields; i++) {
        int idx = -1;
        if (d->schema != NULL) {
            const struct ev_field *root = &d->schema->fields[0];
            for (uint16_t c = 0; c < root->nchild && idx < 0; c++) {
                if (strcmp(d->schema->fields[root->child + c].name, f->names[i]) == 0) {
                    idx = root->child + c;
                }
            }
        } else {
            /* A native layout's top-level fields (not those of an array's elements). */
            for (uint8_t k = 0; k < d->native->nfields && idx < 0; k++) {
                const struct ev_native_field *nf = &d->native->fields[k];
                if (strcmp(nf->name, f->names[i]) == 0) {
                    idx = k;
                }
                if (nf->type == EV_NATIVE_ARRAY) {
                    k = (uint8_t)(k + nf->span);
                }
            }
        }
        d->index[i] = (int16_t)idx;
        d->complete &= idx >= 0;
    }
}

void ev_filter_on_metadata(struct ev_filter *f, const struct nettrace_metadata *md,
                           const uint8_t *payload, size_t len)
{
    if (f->state != EV_FILTER_WATCHING) {
        return;
    }
    ev_schemas_forget(&f->defs, md->metadata_id); /* a V6 stream redefined the id */
    if (strcmp(md->provider, f->provider) != 0) {
        return;
    }
    if (f->ck != NULL) {
        struct nettrace_trace_info ti;
        if (nettrace_trace_info(f->ck, &ti) == 0) {
            f->ptr_size = ti.pointer_size == 4 ? 4 : 8;
        }
    }
    /* Kept while it is looked at; a field list we cannot read (or past EV_FILTER_MAX_DEFS
     * definitions): such events cannot be matched by name either. */
    struct ev_schema_entry *e = NULL;
    if (ev_schemas_define(&f->defs, md, payload, len, &e) != 0) {
        return;
    }
    const struct ev_schema *s = e->schema;
    /* Either name of a native event: dotmon's (its manifest's) or TraceEvent's ("EventID(N)"). */
    bool hit = false;
    for (int native = 1; native >= 0 && !hit; native--) {
        char name[EV_FILTER_NAME_MAX];
        hit = ev_filter_event_name(s->provider, s->event_name, s->has_opcode, s->opcode,
                                   s->event_id, s->version, native != 0, name, sizeof(name)) == 0 &&
              strcmp(name, f->event_name) == 0;
    }
    if (!hit) {
        ev_schemas_forget(&f->defs, md->metadata_id);
        return;
    }
    struct def *d = e->slot;
    if (*s->event_name == '\0') {
        d->native = ev_native_lookup(s->provider, s->event_id, s->version);
    }
    if (d->native == NULL) {
        d->schema = s;
    }
    map_fields(f, d);
}

/* ---- payload values as .NET writes them --------------------------------------------------- */

/* A GUID's 16 bytes (.NET layout: u32, u16, u16 little-endian, then 8 bytes) as "d". */
static void format_guid(const uint8_t *p, char *out, size_t cap)
{
    if (cap >= HEX_GUID_SIZE) {
        hex_guid_dotnet(p, out);
    } else if (cap > 0) {
        out[0] = '\0';
    }
}

/* A FILETIME (100 ns since 1601, UTC) as the invariant culture's "G": MM/dd/yyyy HH:mm:ss. */
static bool format_filetime(int64_t ft, char *out, size_t cap)
{
    if (ft < 0) {
        return false;
    }
    int64_t secs = ft / 10000000 - 11644473600ll;
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t rem = secs - days * 86400;
    int64_t y;
    int m, d;
    civil_date(days, &y, &m, &d);
    snprintf(out, cap, "%02d/%02d/%04d %02d:%02d:%02d", m, d, (int)y, (int)(rem / 3600),
             (int)(rem / 60 % 60), (int)(rem % 60));
    return true;
}

/* One UTF-16 unit as UTF-8 (a lone surrogate as U+FFFD, as the string conversion does). */
static void format_char(uint16_t u, char *out, size_t cap)
{
    uint8_t units[2] = {(uint8_t)u, (uint8_t)(u >> 8)};
    if (ev_utf16_to_utf8(units, 1, out, cap, NULL) != 0) {
        out[0] = '\0';
    }
}

/* A zig-zag or plain varint64 view. */
static bool read_varint(const struct ev_value *v, bool zigzag, char *out, size_t cap)
{
    struct ev_rd r;
    uint64_t u;
    ev_rd_init(&r, v->p, v->len);
    if (ev_rd_varuint(&r, 64, &u) != 0) {
        return false;
    }
    if (zigzag) {
        int64_t s = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        snprintf(out, cap, "%" PRId64, s);
    } else {
        snprintf(out, cap, "%" PRIu64, u);
    }
    return true;
}

/* An EventSource field's value as text into out (VALUE_MAX); false when it never matches. */
static bool format_scalar(uint8_t code, const struct ev_value *v, char *out, size_t cap)
{
    const uint8_t *p = v->p;
    switch (code) {
    case EV_TYPE_BOOLEAN:
        snprintf(out, cap, "%s", ev_load_u32(p) != 0 ? "True" : "False");
        return true;
    case EV_TYPE_BOOLEAN8:
        snprintf(out, cap, "%s", p[0] != 0 ? "True" : "False");
        return true;
    case EV_TYPE_CHAR:
        format_char(ev_load_u16(p), out, cap);
        return true;
    case EV_TYPE_UTF8_UNIT:
        snprintf(out, cap, "%c", (char)p[0]);
        return p[0] < 0x80;
    case EV_TYPE_SBYTE:
        snprintf(out, cap, "%d", (int)(int8_t)p[0]);
        return true;
    case EV_TYPE_BYTE:
        snprintf(out, cap, "%u", (unsigned)p[0]);
        return true;
    case EV_TYPE_INT16:
        snprintf(out, cap, "%d", (int)(int16_t)ev_load_u16(p));
        return true;
    case EV_TYPE_UINT16:
        snprintf(out, cap, "%u", (unsigned)ev_load_u16(p));
        return true;
    case EV_TYPE_INT32:
        snprintf(out, cap, "%" PRId32, (int32_t)ev_load_u32(p));
        return true;
    case EV_TYPE_UINT32:
        snprintf(out, cap, "%" PRIu32, ev_load_u32(p));
        return true;
    case EV_TYPE_INT64:
        snprintf(out, cap, "%" PRId64, (int64_t)ev_load_u64(p));
        return true;
    case EV_TYPE_UINT64:
        snprintf(out, cap, "%" PRIu64, ev_load_u64(p));
        return true;
    case EV_TYPE_VARINT:
    case EV_TYPE_VARUINT:
        return read_varint(v, code == EV_TYPE_VARINT, out, cap);
    case EV_TYPE_SINGLE: {
        uint32_t bits = ev_load_u32(p);
        float x;
        memcpy(&x, &bits, sizeof(x));
        ev_fmt_real((double)x, true, out, cap);
        return true;
    }
    case EV_TYPE_DOUBLE: {
        uint64_t bits = ev_load_u64(p);
        double x;
        memcpy(&x, &bits, sizeof(x));
        ev_fmt_real(x, false, out, cap);
        return true;
    }
    case EV_TYPE_GUID:
        format_guid(p, out, cap);
        return true;
    case EV_TYPE_DATETIME:
        return format_filetime((int64_t)ev_load_u64(p), out, cap);
    default:
        return false; /* Decimal, arrays, objects */
    }
}

/* Does EventSource field node idx hold filter entry i's value? */
static bool field_matches(struct ev_filter *f, const struct ev_schema *s, int idx, size_t i)
{
    const struct ev_value *v = &f->rec.v[idx];
    uint8_t code = s->fields[idx].code;
    if (v->p == NULL) {
        return false;
    }
    if (code == EV_TYPE_STRING) {
        /* Lengths first: no conversion for a string that cannot be equal. */
        if (ev_utf16_utf8_len(v->p, v->count) != f->value_len[i]) {
            return false;
        }
        return ev_utf16_to_utf8(v->p, v->count, f->scratch, f->scratch_cap, NULL) == 0 &&
               strcmp(f->scratch, f->values[i]) == 0;
    }
    char text[VALUE_MAX];
    return format_scalar(code, v, text, sizeof(text)) && strcmp(text, f->values[i]) == 0;
}

/* The same for a native layout's top-level field k. */
static bool native_matches(struct ev_filter *f, const struct ev_native_record *r, int k, size_t i)
{
    const struct ev_native_value *v = &r->v[k];
    char text[VALUE_MAX];
    switch (r->event->fields[k].type) {
    case EV_NATIVE_U8:
    case EV_NATIVE_U16:
    case EV_NATIVE_U32:
    case EV_NATIVE_U64:
    case EV_NATIVE_PTR:
        snprintf(text, sizeof(text), "%" PRIu64, v->u);
        break;
    case EV_NATIVE_I32:
    case EV_NATIVE_I64:
        snprintf(text, sizeof(text), "%" PRId64, (int64_t)v->u);
        break;
    case EV_NATIVE_BOOL:
        snprintf(text, sizeof(text), "%s", v->u != 0 ? "True" : "False");
        break;
    case EV_NATIVE_F64: {
        double x;
        memcpy(&x, &v->u, sizeof(x));
        ev_fmt_real(x, false, text, sizeof(text));
        break;
    }
    case EV_NATIVE_GUID:
        format_guid(v->p, text, sizeof(text));
        break;
    case EV_NATIVE_WSTR:
        if (ev_utf16_utf8_len(v->p, v->count) != f->value_len[i]) {
            return false;
        }
        return ev_utf16_to_utf8(v->p, v->count, f->scratch, f->scratch_cap, NULL) == 0 &&
               strcmp(f->scratch, f->values[i]) == 0;
    default:
        return false; /* binary, arrays */
    }
    return strcmp(text, f->values[i]) == 0;
}

static bool payload_matches(struct ev_filter *f, const struct def *d,
                            const struct nettrace_event *ev)
{
    if (f->nfields == 0) {
        return true;
    }
    if (d->native != NULL) {
        struct ev_native_record r;
        if (ev_native_decode(&r, d->native, ev->payload, ev->payload_len, f->ptr_size) != 0) {
            return false;
        }
        for (size_t i = 0; i < f->nfields; i++) {
            if (d->index[i] < 0 || !native_matches(f, &r, d->index[i], i)) {
                return false;
            }
        }
        return true;
    }
    if (ev_record_decode(&f->rec, d->schema, ev->payload, ev->payload_len) != 0) {
        return false;
    }
    for (size_t i = 0; i < f->nfields; i++) {
        if (d->index[i] < 0 || !field_matches(f, d->schema, d->index[i], i)) {
            return false;
        }
    }
    return true;
}

void ev_filter_on_event(struct ev_filter *f, const struct nettrace_event *ev)
{
    if (f->state != EV_FILTER_WATCHING || ev_schemas_count(&f->defs) == 0) {
        return;
    }
    const struct def *d = find_def(f, ev->metadata_id);
    if (d == NULL) {
        return;
    }
    f->candidates++;
    /* dotnet-monitor checks the filter's names against the first such event only; when one is
     * missing it stops watching for good (EventMonitor.HydratePayloadFilterCache). */
    if (!f->hydrated) {
        f->hydrated = true;
        for (size_t i = 0; !d->complete && i < f->nfields; i++) {
            if (d->index[i] < 0) {
                f->state = EV_FILTER_MISMATCH;
                snprintf(f->detail, sizeof(f->detail),
                         "the event (id %" PRIu32 ", version %" PRIu32
                         ") has no payload field '%.120s'",
                         ev->event_id, ev->version, f->names[i]);
                return;
            }
        }
    }
    if (payload_matches(f, d, ev)) {
        f->state = EV_FILTER_MATCHED;
        snprintf(f->detail, sizeof(f->detail),
                 "event id %" PRIu32 " version %" PRIu32 ", thread %" PRIu64 ", timestamp %" PRId64,
                 ev->event_id, ev->version, ev->thread_id, ev->timestamp);
    }
}
