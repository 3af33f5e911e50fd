/* SPDX-License-Identifier: MIT */
#include "ev_activity.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_payload.h"
#include "ev_rd.h"
#include "ev_schemas.h"
#include "hex.h"
#include "membudget.h"
#include "nettrace.h"
#include "utf8.h"

#define MAX_METADATA 4096u
/* DateTime ticks (100 ns since 0001-01-01) of the Unix epoch. */
#define UNIX_EPOCH_TICKS 621355968000000000ll

enum act_kind { K_NONE = 0, K_START, K_STOP, K_VERSION };

/* A kept metadata id: what it is and where its fields are. */
struct md_entry {
    enum act_kind kind;
    const struct ev_schema *schema;
    int16_t source;   /* SourceName */
    int16_t name;     /* ActivityName */
    int16_t args;     /* Arguments: an array of {Key, Value} */
    bool value_first; /* the element's fields come as {Value, Key} */
};

struct ev_activity {
    ev_activity_span_cb cb;
    void *ud;
    struct nettrace_checker ck;
    struct ev_schemas md;
    struct ev_activity_stats st;
    int version[3]; /* the provider's Version event: major, minor, patch; -1 before it */
    struct nettrace_sticky err;
    struct ev_record rec;
    size_t text_len;
    char text[EV_ACTIVITY_TEXT_MAX];
    struct ev_span_tag tags[EV_ACTIVITY_MAX_TAGS];
};

/* ---- text area ------------------------------------------------------------------------------ */

/*
 * A UTF-16 string of the payload as UTF-8 in the text area, cut at EV_ACTIVITY_MAX_STRING bytes.
 * Only the first EV_ACTIVITY_MAX_STRING units are converted (never a surrogate pair split), so a
 * long string costs at most 3 bytes a unit of room before the cut, whatever its length. NULL
 * when even that does not fit.
 */
static const char *text_utf16(struct ev_activity *a, const uint8_t *p, size_t units)
{
    size_t take = units < EV_ACTIVITY_MAX_STRING ? units : EV_ACTIVITY_MAX_STRING;
    if (take < units && take > 0 && p[2 * take - 1] >= 0xD8 && p[2 * take - 1] <= 0xDB) {
        take--; /* the last unit kept would be a high surrogate without its pair */
    }
    char *out = a->text + a->text_len;
    size_t len;
    if (ev_utf16_to_utf8(p, take, out, sizeof(a->text) - a->text_len, &len) != 0) {
        return NULL;
    }
    len = utf8_cut(out, len, EV_ACTIVITY_MAX_STRING);
    out[len] = '\0';
    a->text_len += len + 1;
    return out;
}

/* A copy of s[0..len) in the text area (len is already within the string cap); NULL when full. */
static const char *text_copy(struct ev_activity *a, const char *s, size_t len)
{
    if (len + 1 > sizeof(a->text) - a->text_len) {
        return NULL;
    }
    char *out = a->text + a->text_len;
    memcpy(out, s, len);
    out[len] = '\0';
    a->text_len += len + 1;
    return out;
}

/* ---- values ---------------------------------------------------------------------------------- */

/* Lower- or upper-case hex of exactly 2 * n digits into out[0..n); false otherwise. */
static bool hex_id(const char *s, uint8_t *out, size_t n)
{
    if (strlen(s) != 2 * n) {
        return false;
    }
    bool nonzero = false;
    for (size_t k = 0; k < n; k++) {
        int hi = hex_value(s[2 * k]);
        int lo = hex_value(s[2 * k + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[k] = (uint8_t)(hi << 4 | lo);
        nonzero = nonzero || out[k] != 0;
    }
    return nonzero; /* W3C: all-zero ids are invalid */
}

/* A decimal int64 (optional '-'); false when s is not exactly one. */
static bool dec_i64(const char *s, int64_t *out)
{
    bool neg = s[0] == '-';
    size_t k = neg ? 1 : 0;
    if (s[k] == '\0') {
        return false;
    }
    uint64_t v = 0;
    for (; s[k] != '\0'; k++) {
        if (s[k] < '0' || s[k] > '9' || v > (UINT64_MAX - 9) / 10) {
            return false;
        }
        v = v * 10 + (uint64_t)(s[k] - '0');
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* An enum as Enum.ToString() renders it (a name), or its number; -1 when neither. */
static int enum_value(const char *s, const char *const *names, int n)
{
    for (int k = 0; k < n; k++) {
        if (strcmp(s, names[k]) == 0) {
            return k;
        }
    }
    int64_t v;
    return dec_i64(s, &v) && v >= 0 && v < n ? (int)v : -1;
}

static const char *const kind_names[] = {"Internal", "Server", "Client", "Producer", "Consumer"};
static const char *const status_names[] = {"Unset", "Ok", "Error"};

const char *ev_activity_kind_name(int kind)
{
    return kind >= 0 && kind <= EV_ACTIVITY_CONSUMER ? kind_names[kind] : NULL;
}

const char *ev_activity_status_name(int status)
{
    return status >= 0 && status <= EV_ACTIVITY_ERROR ? status_names[status] : NULL;
}

/*
 * The Tags argument: TagObjects.*Enumerate is string.Join(",", pairs), each pair rendered by
 * KeyValuePair.ToString() as "[key, value]" (events.md §9.3). A key ends at the first ", "; a
 * value ends at the first ']' followed by ",[" or the end, so commas and brackets inside values
 * survive. Parsing stops at the first piece that does not have that shape.
 */
static bool parse_tags(struct ev_activity *a, const char *s, struct ev_span *sp)
{
    size_t n = 0;
    while (*s == '[') {
        const char *key = s + 1;
        const char *sep = strstr(key, ", ");
        if (sep == NULL) {
            break;
        }
        const char *val = sep + 2;
        const char *end = val;
        for (;;) {
            end = strchr(end, ']');
            if (end == NULL || end[1] == '\0' || (end[1] == ',' && end[2] == '[')) {
                break;
            }
            end++;
        }
        if (end == NULL) {
            break;
        }
        if (n < EV_ACTIVITY_MAX_TAGS) {
            const char *k = text_copy(a, key, (size_t)(sep - key));
            const char *v = text_copy(a, val, (size_t)(end - val));
            if (k == NULL || v == NULL) {
                return false;
            }
            a->tags[n].key = k;
            a->tags[n].value = v;
            n++;
        } else {
            a->st.tags_dropped++;
        }
        s = end[1] == ',' ? end + 2 : end + 1;
    }
    sp->tags = a->tags;
    sp->ntags = n;
    return true;
}

/* Applies one Arguments pair (both already UTF-8) to the span; false when the text area is full. */
static bool take_pair(struct ev_activity *a, const char *key, const char *val, struct ev_span *sp,
                      int64_t *start_ticks, int64_t *dur_ticks, bool *ids)
{
    int64_t v;
    if (strcmp(key, "TraceId") == 0) {
        ids[0] = hex_id(val, sp->trace_id, 16);
    } else if (strcmp(key, "SpanId") == 0) {
        ids[1] = hex_id(val, sp->span_id, 8);
    } else if (strcmp(key, "ParentSpanId") == 0) {
        sp->has_parent = hex_id(val, sp->parent_span_id, 8);
    } else if (strcmp(key, "ActivityTraceFlags") == 0) {
        /* [Flags] enum: "None", "Recorded", or a number when other bits are set. */
        sp->flags = strcmp(val, "Recorded") == 0             ? 1
                    : dec_i64(val, &v) && v >= 0 && v <= 255 ? (uint8_t)v
                                                             : 0;
    } else if (strcmp(key, "TraceStateString") == 0) {
        sp->trace_state = val[0] != '\0' ? val : NULL;
    } else if (strcmp(key, "Kind") == 0) {
        int k = enum_value(val, kind_names, 5);
        sp->kind = k >= 0 ? k : EV_ACTIVITY_INTERNAL;
    } else if (strcmp(key, "DisplayName") == 0) {
        if (val[0] != '\0') {
            sp->name = val;
        }
    } else if (strcmp(key, "StartTimeTicks") == 0) {
        if (!dec_i64(val, start_ticks)) {
            *start_ticks = -1;
        }
    } else if (strcmp(key, "DurationTicks") == 0) {
        if (!dec_i64(val, dur_ticks) || *dur_ticks < 0) {
            *dur_ticks = 0;
        }
    } else if (strcmp(key, "Status") == 0) {
        int k = enum_value(val, status_names, 3);
        sp->status = k >= 0 ? k : EV_ACTIVITY_UNSET;
    } else if (strcmp(key, "StatusDescription") == 0) {
        sp->status_description = val[0] != '\0' ? val : NULL;
    } else if (strcmp(key, "Tags") == 0) {
        return parse_tags(a, val, sp);
    } else if (strcmp(key, "ActivitySourceVersion") == 0) {
        sp->source_version = val[0] != '\0' ? val : NULL;
    }
    return true;
}

/* ---- events ---------------------------------------------------------------------------------- */

static void act_fail(struct ev_activity *a, int err, const char *msg)
{
    nettrace_sticky_set(&a->err, err, msg);
}

static enum act_kind classify(const char *provider, const char *name)
{
    if (strcmp(provider, EV_ACTIVITY_PROVIDER) != 0) {
        return K_NONE;
    }
    if (strcmp(name, "ActivityStop") == 0 || strcmp(name, "Activity/Stop") == 0) {
        return K_STOP;
    }
    if (strcmp(name, "ActivityStart") == 0 || strcmp(name, "Activity/Start") == 0) {
        return K_START;
    }
    return strcmp(name, "Version") == 0 ? K_VERSION : K_NONE;
}

static int16_t field(const struct ev_schema *s, const char *name)
{
    int idx = ev_schema_find(s, name);
    return (int16_t)(idx < 0 ? -1 : idx);
}

static void on_metadata(void *ud, const struct nettrace_metadata *m, const uint8_t *p, size_t n)
{
    struct ev_activity *a = ud;
    enum act_kind kind = classify(m->provider, m->event_name);
    if (a->err.err != 0 || kind == K_NONE) {
        ev_schemas_forget(&a->md, m->metadata_id);
        return;
    }
    struct ev_schema_entry *e = NULL;
    int rc = ev_schemas_define(&a->md, m, p, n, &e);
    if (rc == -ENOMEM) {
        act_fail(a, rc, "out of memory");
        return;
    }
    if (rc == AGENT_E_BUDGET) {
        a->st.budget_dropped++;
    }
    if (rc != 0) {
        a->st.skipped++;
        return;
    }
    struct md_entry *md = e->slot;
    const struct ev_schema *s = e->schema;
    md->kind = kind;
    md->schema = s;
    md->source = field(s, "SourceName");
    md->name = field(s, "ActivityName");
    md->args = field(s, "Arguments");
    /* Arguments must be an array of an object of exactly two strings, Key and Value. */
    if (md->args >= 0) {
        const struct ev_field *arr = &s->fields[md->args];
        const struct ev_field *el = arr->code == EV_TYPE_ARRAY ? &s->fields[arr->child] : NULL;
        if (el == NULL || el->code != EV_TYPE_OBJECT || el->nchild != 2 ||
            s->fields[el->child].code != EV_TYPE_STRING ||
            s->fields[el->child + 1].code != EV_TYPE_STRING) {
            md->args = -1;
        } else {
            md->value_first = strcmp(s->fields[el->child].name, "Value") == 0;
        }
    }
}

/* A string field of the record in the text area; "" when absent, NULL when it does not fit. */
static const char *field_str(struct ev_activity *a, int idx)
{
    if (idx < 0 || a->rec.schema->fields[idx].code != EV_TYPE_STRING) {
        return "";
    }
    char *out = a->text + a->text_len;
    size_t len;
    if (ev_record_str(&a->rec, idx, out, sizeof(a->text) - a->text_len, &len) != 0) {
        return NULL;
    }
    len = utf8_cut(out, len, EV_ACTIVITY_MAX_STRING);
    out[len] = '\0';
    a->text_len += len + 1;
    return out;
}

/*
 * One ActivityStop: SourceName and ActivityName, then the Arguments pairs the spec asked for
 * (events.md §9.3). Times come from the activity itself (StartTimeUtc ticks), not the trace clock.
 */
static void on_stop(struct ev_activity *a, const struct md_entry *md)
{
    struct ev_span sp = {0};
    int64_t start_ticks = -1;
    int64_t dur_ticks = 0;
    bool ids[2] = {false, false};
    sp.source_name = field_str(a, md->source);
    sp.operation_name = field_str(a, md->name);
    if (sp.source_name == NULL || sp.operation_name == NULL || md->args < 0 ||
        a->rec.v[md->args].p == NULL) {
        a->st.skipped++;
        return;
    }
    sp.name = sp.operation_name;
    struct ev_rd r;
    ev_rd_init(&r, a->rec.v[md->args].p, a->rec.v[md->args].len);
    for (uint32_t i = 0; i < a->rec.v[md->args].count; i++) {
        const uint8_t *s1, *s2;
        size_t n1, n2;
        if (!ev_rd_utf16z(&r, &s1, &n1) || !ev_rd_utf16z(&r, &s2, &n2)) {
            a->st.skipped++;
            return;
        }
        const char *k = text_utf16(a, md->value_first ? s2 : s1, md->value_first ? n2 : n1);
        const char *v = text_utf16(a, md->value_first ? s1 : s2, md->value_first ? n1 : n2);
        if (k == NULL || v == NULL || !take_pair(a, k, v, &sp, &start_ticks, &dur_ticks, ids)) {
            a->st.skipped++;
            return;
        }
    }
    /* 100 ns ticks to Unix ns: times before 1970 or past 2554 are not a span we can send. */
    const int64_t max_ticks = (int64_t)(UINT64_MAX / 100 / 2);
    if (!ids[0] || !ids[1] || start_ticks < UNIX_EPOCH_TICKS ||
        start_ticks - UNIX_EPOCH_TICKS > max_ticks) {
        a->st.skipped++;
        return;
    }
    /* Not recorded: a root the sampler let through for its ids only (PropagationData) or an
     * activity under such a parent; the in-process SDK exports only recorded ones (§9.4). */
    if ((sp.flags & 1u) == 0) {
        a->st.unsampled++;
        return;
    }
    if (dur_ticks > max_ticks) {
        dur_ticks = max_ticks;
    }
    sp.start_unix_nano = (uint64_t)(start_ticks - UNIX_EPOCH_TICKS) * 100u;
    sp.end_unix_nano = sp.start_unix_nano + (uint64_t)dur_ticks * 100u;
    a->st.spans++;
    a->cb(a->ud, &sp);
}

/* Version(Major, Minor, Patch): the DiagnosticSource assembly's file version (§9.3). */
static void on_version(struct ev_activity *a)
{
    static const char *const names[3] = {"Major", "Minor", "Patch"};
    int v[3];
    for (int k = 0; k < 3; k++) {
        int64_t x = 0;
        int idx = ev_schema_find(a->rec.schema, names[k]);
        if (idx < 0 || ev_record_i64(&a->rec, idx, &x) != 0 || x < 0 || x > 65535) {
            a->st.skipped++;
            return;
        }
        v[k] = (int)x;
    }
    memcpy(a->version, v, sizeof(v));
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_activity *a = ud;
    const struct ev_schema_entry *e =
        a->err.err == 0 ? ev_schemas_find(&a->md, ev->metadata_id) : NULL;
    const struct md_entry *md = e != NULL ? e->slot : NULL;
    if (md == NULL || md->kind == K_NONE) {
        return;
    }
    if (md->kind == K_START) {
        a->st.starts++;
        return;
    }
    bool stop = md->kind == K_STOP;
    a->st.stops += stop ? 1 : 0;
    if (ev_record_decode(&a->rec, md->schema, ev->payload, ev->payload_len) != 0) {
        a->st.skipped++;
        return;
    }
    a->text_len = 0;
    if (stop) {
        on_stop(a, md);
    } else {
        on_version(a);
    }
}

/* ---- public API ------------------------------------------------------------------------------ */

int ev_activity_new(struct ev_activity **out, ev_activity_span_cb cb, void *ud)
{
    if (out == NULL || cb == NULL) {
        return AGENT_E_INVAL;
    }
    int rc = -ENOMEM;
    struct ev_activity *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return -ENOMEM;
    }
    a->cb = cb;
    a->ud = ud;
    a->version[0] = a->version[1] = a->version[2] = -1;
    struct ev_schemas_config mcfg = {.slot_size = sizeof(struct md_entry), .max_ids = MAX_METADATA};
    ev_schemas_init(&a->md, &mcfg);
    struct nettrace_options nopt = {.max_metadata = MAX_METADATA};
    if ((rc = nettrace_checker_init(&a->ck, &nopt)) < 0) {
        goto fail;
    }
    nettrace_set_event_cb(&a->ck, on_event, a);
    nettrace_set_metadata_cb(&a->ck, on_metadata, a);
    *out = a;
    return 0;
fail:
    ev_activity_free(a);
    return rc;
}

int ev_activity_set_share(struct ev_activity *a, struct mb_share *share)
{
    return ev_schemas_set_share(&a->md, share) != 0 ? AGENT_E_INVAL : 0;
}

size_t ev_activity_footprint(void)
{
    return sizeof(struct ev_activity);
}

int ev_activity_feed(struct ev_activity *a, const uint8_t *p, size_t n)
{
    return nettrace_sticky_feed(&a->ck, &a->err, p, n);
}

const char *ev_activity_error(const struct ev_activity *a)
{
    return a->err.err != 0 ? a->err.msg : NULL;
}

int ev_activity_source_version(const struct ev_activity *a, int *major, int *minor, int *patch)
{
    if (a->version[0] < 0) {
        return AGENT_E_NOTFOUND;
    }
    *major = a->version[0];
    *minor = a->version[1];
    *patch = a->version[2];
    return 0;
}

void ev_activity_get_stats(const struct ev_activity *a, struct ev_activity_stats *out)
{
    const struct nettrace_stats *st = nettrace_get_stats(&a->ck);
    *out = a->st;
    out->bytes = st->bytes;
    out->events = st->events;
    out->lost = st->lost;
    out->held = ev_schemas_held(&a->md);
}

void ev_activity_free(struct ev_activity *a)
{
    if (a == NULL) {
        return;
    }
    nettrace_checker_fini(&a->ck);
    ev_schemas_fini(&a->md);
    free(a);
}

/* ---- FilterAndPayloadSpecs (events.md §9.2) ---------------------------------------------------
 */

/*
 * What a Stop line asks of the Activity: dotnet-monitor's field set, so a span read from dotmon
 * and one read by dotnet-monitor carry the same values. Events and links cannot be asked for.
 */
static const char stop_payload[] =
    ":-TraceId;SpanId;ParentSpanId;ActivityTraceFlags;TraceStateString;Kind;DisplayName"
    ";StartTimeTicks=StartTimeUtc.Ticks;DurationTicks=Duration.Ticks;Status;StatusDescription"
    ";Tags=TagObjects.*Enumerate;ActivitySourceVersion=Source.Version\r\n";

static bool name_ok(const char *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        unsigned char c = (unsigned char)s[k];
        if (c < 0x20 || c == 0x7F || c == '/' || c == ':' || c == '+' || c == '[' || c == ';') {
            return false;
        }
    }
    return n > 0;
}

int ev_activity_filter_specs(const char *sources, double ratio, struct buf *out)
{
    if (sources == NULL || out == NULL || isnan(ratio) || ratio < 0.0 || ratio > 1.0) {
        return AGENT_E_INVAL;
    }
    size_t mark = buf_size(out);
    char sampler[64] = "";
    if (ratio < 1.0) {
        int len = snprintf(sampler, sizeof(sampler), "-ParentRatioSampler(%.15g)", ratio);
        if (len < 0 || (size_t)len >= sizeof(sampler)) {
            return AGENT_E_INVAL;
        }
    }
    int rc = 0;
    size_t lines = 0;
    const char *p = sources;
    while (rc == 0 && *p != '\0') {
        size_t len = strcspn(p, ";");
        const char *name = p;
        size_t n = len;
        while (n > 0 && (*name == ' ' || *name == '\t')) {
            name++;
            n--;
        }
        while (n > 0 && (name[n - 1] == ' ' || name[n - 1] == '\t')) {
            n--;
        }
        p += len + (p[len] == ';' ? 1 : 0);
        if (n == 0) {
            continue;
        }
        if (!name_ok(name, n)) {
            rc = AGENT_E_INVAL;
            break;
        }
        rc = buf_printf(out, "[AS]%.*s/Stop%s", (int)n, name, sampler);
        rc = rc != 0 ? rc : buf_append_str(out, stop_payload);
        lines++;
    }
    if (rc == 0 && lines == 0) {
        rc = AGENT_E_INVAL;
    }
    if (rc != 0) {
        buf_truncate(out, mark);
    }
    return rc;
}
