/* SPDX-License-Identifier: MIT */
/*
 * The OTLP codec (otlp.h; the messages and field numbers are docs/otlp.md §3, JSON §6).
 *
 * One writer serves both formats: every field is emitted through an f_* call that knows its
 * protobuf field number and its JSON name, so an item encoder states each field once and the
 * presence rules (proto3: defaults are left out, oneof members and `optional` fields are kept)
 * are the same in both formats (docs/otlp.md §3). Nested protobuf messages get a one-byte length
 * placeholder that is widened when the message turns out longer than 127 bytes; requests, whose
 * pieces can be large, compute their lengths first and copy each piece once (§4).
 */
#include "otlp.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "err.h"
#include "hex.h"
#include "num.h"
#include "utf8.h"

/* Responses longer than this are not OTLP responses (docs/otlp.md §5). */
#define OTLP_RESPONSE_MAX (1u << 20)

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

static const uint8_t REPLACEMENT_UTF8[3] = {0xEF, 0xBF, 0xBD};

/* ---- strings: UTF-8 with invalid bytes replaced (one U+FFFD per byte that starts no valid
 * sequence) ---- */

/*
 * Walks s once: with b NULL only counts the repaired bytes into *len; else appends them to b.
 */
static int repair_utf8(const char *s, struct buf *b, size_t *len)
{
    const uint8_t *p = (const uint8_t *)s;
    const uint8_t *run = p; /* start of the valid bytes not yet appended */
    size_t n = 0;
    int rc = 0;
    while (*p && rc == 0) {
        uint32_t cp;
        size_t l;
        if (utf8_decode(p, SIZE_MAX, &cp, &l)) {
            n += l;
            p += l;
            continue;
        }
        n += sizeof(REPLACEMENT_UTF8);
        if (b != NULL) {
            rc = buf_append(b, run, (size_t)(p - run));
            rc = rc != 0 ? rc : buf_append(b, REPLACEMENT_UTF8, sizeof(REPLACEMENT_UTF8));
        }
        p++;
        run = p;
    }
    if (len != NULL) {
        *len = n;
    }
    return rc != 0 || b == NULL ? rc : buf_append(b, run, (size_t)(p - run));
}

static size_t utf8_repaired_len(const char *s)
{
    size_t n = 0;
    (void)repair_utf8(s, NULL, &n);
    return n;
}

static int append_repaired(struct buf *b, const char *s)
{
    return repair_utf8(s, b, NULL);
}

/* s as a JSON string, quotes included, repaired and escaped (RFC 8259 §7). */
static int json_string(struct buf *b, const char *s)
{
    int rc = buf_append(b, "\"", 1);
    const uint8_t *p = (const uint8_t *)s;
    while (rc == 0 && *p) {
        uint32_t cp;
        size_t l;
        if (*p < 0x80) {
            char one[2] = {(char)*p, 0};
            rc = buf_append_json_escaped(b, one);
            p++;
        } else if (utf8_decode(p, SIZE_MAX, &cp, &l)) {
            rc = buf_append(b, p, l);
            p += l;
        } else {
            rc = buf_append(b, REPLACEMENT_UTF8, sizeof(REPLACEMENT_UTF8));
            p++;
        }
    }
    return rc != 0 ? rc : buf_append(b, "\"", 1);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as d (d finite). */
static int json_finite_double(struct buf *b, double d)
{
    char t[40];
    for (int prec = 15; prec <= 17; prec++) {
        int n = snprintf(t, sizeof(t), "%.*g", prec, d);
        if (n <= 0 || (size_t)n >= sizeof(t)) {
            return AGENT_E_INVAL;
        }
        if (prec == 17 || strtod(t, NULL) == d) {
            return buf_append(b, t, (size_t)n);
        }
    }
    return AGENT_E_INVAL;
}

/* A double as proto3's JSON mapping writes it: a number, or "NaN", "Infinity", "-Infinity". */
static int json_double(struct buf *b, double d)
{
    if (isnan(d)) {
        return buf_append_str(b, "\"NaN\"");
    }
    if (isinf(d)) {
        return buf_append_str(b, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    }
    return json_finite_double(b, d);
}

/* ---- protobuf primitives ---- */

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t varint_put(uint8_t *t, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    return n;
}

static int pb_varint(struct buf *b, uint64_t v)
{
    uint8_t t[10];
    return buf_append(b, t, varint_put(t, v));
}

static int pb_tag(struct buf *b, unsigned field, unsigned wt)
{
    return pb_varint(b, (uint64_t)field << 3 | wt);
}

static int pb_le(struct buf *b, uint64_t v, size_t n)
{
    uint8_t t[8];
    for (size_t i = 0; i < n; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    return buf_append(b, t, n);
}

static uint64_t double_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof(u));
    return u;
}

static uint64_t zigzag32(int32_t v)
{
    return (uint32_t)(((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
}

/* The tag of length-delimited field `field` and the length len that follows it. */
static int pb_len_header(struct buf *b, unsigned field, uint64_t len)
{
    uint8_t t[20];
    size_t n = varint_put(t, (uint64_t)field << 3 | WT_LEN);
    n += varint_put(t + n, len);
    return buf_append(b, t, n);
}

/* The bytes of one field tag plus length prefix for a payload of n bytes. */
static size_t pb_len_field_size(unsigned field, size_t n)
{
    return varint_len((uint64_t)field << 3) + varint_len(n) + n;
}

/* ---- the two-format field writer ---- */

struct enc {
    struct buf *b;
    enum otlp_format f;
    bool first; /* JSON: no member written yet in the current object */
};

static int j_key(struct enc *e, const char *name)
{
    int rc = 0;
    if (!e->first) {
        rc = buf_append(e->b, ",", 1);
    }
    e->first = false;
    if (rc == 0) {
        rc = buf_append(e->b, "\"", 1);
    }
    if (rc == 0) {
        rc = buf_append_str(e->b, name);
    }
    return rc != 0 ? rc : buf_append(e->b, "\":", 2);
}

static int f_string(struct enc *e, unsigned field, const char *jname, const char *s)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : json_string(e->b, s);
    }
    int rc = pb_len_header(e->b, field, utf8_repaired_len(s));
    return rc != 0 ? rc : append_repaired(e->b, s);
}

/* A plain string field: left out when NULL or empty (proto3's default). */
static int f_string_opt(struct enc *e, unsigned field, const char *jname, const char *s)
{
    return s != NULL && *s != '\0' ? f_string(e, field, jname, s) : 0;
}

/* bytes (ids): protobuf bytes, JSON lowercase hex (OTLP's exception to proto3's base64). */
static int f_id(struct enc *e, unsigned field, const char *jname, const uint8_t *p, size_t n)
{
    if (e->f == OTLP_JSON) {
        char hex[32];
        int rc = j_key(e, jname);
        hex_encode(p, n, hex);
        if (rc == 0) {
            rc = buf_append(e->b, "\"", 1);
        }
        if (rc == 0) {
            rc = buf_append(e->b, hex, 2 * n);
        }
        return rc != 0 ? rc : buf_append(e->b, "\"", 1);
    }
    int rc = pb_len_header(e->b, field, n);
    return rc != 0 ? rc : buf_append(e->b, p, n);
}

/* fixed64 (times, counts): JSON as a decimal string. */
static int f_fixed64(struct enc *e, unsigned field, const char *jname, uint64_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "\"%" PRIu64 "\"", v);
    }
    int rc = pb_tag(e->b, field, WT_I64);
    return rc != 0 ? rc : pb_le(e->b, v, 8);
}

/* sfixed64 (NumberDataPoint.as_int): JSON as a decimal string. */
static int f_sfixed64(struct enc *e, unsigned field, const char *jname, int64_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "\"%" PRId64 "\"", v);
    }
    int rc = pb_tag(e->b, field, WT_I64);
    return rc != 0 ? rc : pb_le(e->b, (uint64_t)v, 8);
}

/* int64 varint (AnyValue.int_value): JSON as a decimal string. */
static int f_int64(struct enc *e, unsigned field, const char *jname, int64_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "\"%" PRId64 "\"", v);
    }
    int rc = pb_tag(e->b, field, WT_VARINT);
    return rc != 0 ? rc : pb_varint(e->b, (uint64_t)v);
}

/* Enums and uint32 varints: JSON as a number. */
static int f_enum(struct enc *e, unsigned field, const char *jname, uint32_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "%" PRIu32, v);
    }
    int rc = pb_tag(e->b, field, WT_VARINT);
    return rc != 0 ? rc : pb_varint(e->b, v);
}

/* sint32 (scale, offset): zigzag varint; JSON as a number. */
static int f_sint32(struct enc *e, unsigned field, const char *jname, int32_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "%" PRId32, v);
    }
    int rc = pb_tag(e->b, field, WT_VARINT);
    return rc != 0 ? rc : pb_varint(e->b, zigzag32(v));
}

/* fixed32 (flags): JSON as a number. */
static int f_fixed32(struct enc *e, unsigned field, const char *jname, uint32_t v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_printf(e->b, "%" PRIu32, v);
    }
    int rc = pb_tag(e->b, field, WT_I32);
    return rc != 0 ? rc : pb_le(e->b, v, 4);
}

static int f_double(struct enc *e, unsigned field, const char *jname, double d)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : json_double(e->b, d);
    }
    int rc = pb_tag(e->b, field, WT_I64);
    return rc != 0 ? rc : pb_le(e->b, double_bits(d), 8);
}

static int f_bool(struct enc *e, unsigned field, const char *jname, bool v)
{
    if (e->f == OTLP_JSON) {
        int rc = j_key(e, jname);
        return rc != 0 ? rc : buf_append_str(e->b, v ? "true" : "false");
    }
    int rc = pb_tag(e->b, field, WT_VARINT);
    return rc != 0 ? rc : pb_varint(e->b, v ? 1 : 0);
}

/* Packed repeated fixed64 (bucket_counts): JSON an array of decimal strings. */
static int f_packed_fixed64(struct enc *e, unsigned field, const char *jname, const uint64_t *v,
                            size_t n)
{
    int rc;
    if (e->f == OTLP_JSON) {
        rc = j_key(e, jname);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = buf_printf(e->b, "%s\"%" PRIu64 "\"", i == 0 ? "[" : ",", v[i]);
        }
        return rc != 0 ? rc : buf_append(e->b, n == 0 ? "[]" : "]", n == 0 ? 2 : 1);
    }
    rc = pb_len_header(e->b, field, 8 * (uint64_t)n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = pb_le(e->b, v[i], 8);
    }
    return rc;
}

/* Packed repeated uint64 varints (exponential buckets): JSON an array of decimal strings. */
static int f_packed_uint64(struct enc *e, unsigned field, const char *jname, const uint64_t *v,
                           size_t n)
{
    if (e->f == OTLP_JSON) {
        return f_packed_fixed64(e, field, jname, v, n);
    }
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        len += varint_len(v[i]);
    }
    int rc = pb_len_header(e->b, field, len);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = pb_varint(e->b, v[i]);
    }
    return rc;
}

/* Packed repeated double (explicit_bounds): JSON an array of numbers. */
static int f_packed_double(struct enc *e, unsigned field, const char *jname, const double *v,
                           size_t n)
{
    int rc;
    if (e->f == OTLP_JSON) {
        rc = j_key(e, jname);
        if (rc == 0) {
            rc = buf_append(e->b, "[", 1);
        }
        for (size_t i = 0; rc == 0 && i < n; i++) {
            rc = i == 0 ? 0 : buf_append(e->b, ",", 1);
            if (rc == 0) {
                rc = json_double(e->b, v[i]);
            }
        }
        return rc != 0 ? rc : buf_append(e->b, "]", 1);
    }
    rc = pb_len_header(e->b, field, 8 * (uint64_t)n);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = pb_le(e->b, double_bits(v[i]), 8);
    }
    return rc;
}

/*
 * A nested message (or element i of n of a repeated one: JSON writes the array's brackets around
 * the elements; n == 0 for a singular field). child writes the message's fields; f_end closes it.
 * Protobuf: tag and a one-byte length placeholder, at *mark.
 */
static int f_begin(struct enc *e, unsigned field, const char *jname, size_t i, size_t n,
                   struct enc *child, size_t *mark)
{
    int rc;
    *child = (struct enc){.b = e->b, .f = e->f, .first = true};
    if (e->f == OTLP_JSON) {
        rc = i == 0 ? j_key(e, jname) : 0;
        if (rc == 0 && n > 0) {
            rc = buf_append(e->b, i == 0 ? "[" : ",", 1);
        }
        return rc != 0 ? rc : buf_append(e->b, "{", 1);
    }
    rc = pb_tag(e->b, field, WT_LEN);
    *mark = buf_size(e->b);
    return rc != 0 ? rc : buf_append(e->b, "", 1);
}

static int f_end(struct enc *e, size_t i, size_t n, size_t mark)
{
    if (e->f == OTLP_JSON) {
        int rc = buf_append(e->b, "}", 1);
        return rc != 0 || n == 0 || i + 1 < n ? rc : buf_append(e->b, "]", 1);
    }
    size_t len = buf_size(e->b) - mark - 1;
    size_t k = varint_len(len);
    if (k > 1) {
        static const uint8_t zeros[9];
        int rc = buf_append(e->b, zeros, k - 1);
        if (rc != 0) {
            return rc;
        }
    }
    uint8_t *at = e->b->p + e->b->off + mark;
    if (k > 1) {
        memmove(at + k, at + 1, len);
    }
    (void)varint_put(at, len);
    return 0;
}

/* ---- common messages ---- */

/* One KeyValue (common.proto): key 1, value 2 = AnyValue (string 1, bool 2, int 3, double 4). */
static int kv_fields(struct enc *e, const struct otlp_kv *kv)
{
    if (kv->key == NULL || (kv->kind == OTLP_STR && kv->str == NULL)) {
        return AGENT_E_INVAL;
    }
    struct enc v;
    size_t mark = 0;
    int rc = f_string_opt(e, 1, "key", kv->key);
    if (rc == 0) {
        rc = f_begin(e, 2, "value", 0, 0, &v, &mark);
    }
    if (rc != 0) {
        return rc;
    }
    switch (kv->kind) {
    case OTLP_STR:
        rc = f_string(&v, 1, "stringValue", kv->str);
        break;
    case OTLP_BOOL:
        rc = f_bool(&v, 2, "boolValue", kv->b);
        break;
    case OTLP_INT:
        rc = f_int64(&v, 3, "intValue", kv->i);
        break;
    case OTLP_DOUBLE:
        rc = f_double(&v, 4, "doubleValue", kv->d);
        break;
    default:
        return AGENT_E_INVAL;
    }
    return rc != 0 ? rc : f_end(e, 0, 0, mark);
}

static int f_attrs(struct enc *e, unsigned field, const struct otlp_kv *kv, size_t n)
{
    if (n > 0 && kv == NULL) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < n; i++) {
        struct enc c;
        size_t mark = 0;
        int rc = f_begin(e, field, "attributes", i, n, &c, &mark);
        if (rc == 0) {
            rc = kv_fields(&c, &kv[i]);
        }
        if (rc == 0) {
            rc = f_end(e, i, n, mark);
        }
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

/* Runs fields(e, arg) as one top-level piece: a JSON object, or a protobuf message's bytes. */
static int encode_piece(enum otlp_format f, struct buf *out, const void *arg,
                        int (*fields)(struct enc *, const void *))
{
    if (arg == NULL || out == NULL || (f != OTLP_PROTOBUF && f != OTLP_JSON)) {
        return AGENT_E_INVAL;
    }
    size_t start = buf_size(out);
    struct enc e = {.b = out, .f = f, .first = true};
    int rc = f == OTLP_JSON ? buf_append(out, "{", 1) : 0;
    if (rc == 0) {
        rc = fields(&e, arg);
    }
    if (rc == 0 && f == OTLP_JSON) {
        rc = buf_append(out, "}", 1);
    }
    if (rc != 0) {
        buf_truncate(out, start);
    }
    return rc;
}

/* Resource (resource.proto): attributes 1. */
static int resource_fields(struct enc *e, const void *arg)
{
    const struct otlp_resource *r = arg;
    return f_attrs(e, 1, r->attrs, r->nattrs);
}

/* InstrumentationScope (common.proto): name 1, version 2, attributes 3. */
static int scope_fields(struct enc *e, const void *arg)
{
    const struct otlp_scope *s = arg;
    int rc = f_string_opt(e, 1, "name", s->name);
    if (rc == 0) {
        rc = f_string_opt(e, 2, "version", s->version);
    }
    return rc != 0 ? rc : f_attrs(e, 3, s->attrs, s->nattrs);
}

/* LogRecord (logs.proto), fields in number order: 1 2 3 5 6 8 9 10 11 12. */
static int log_fields(struct enc *e, const void *arg)
{
    const struct otlp_log *l = arg;
    int rc = 0;
    if (l->severity_number < 0 || l->severity_number > 24) {
        return AGENT_E_INVAL;
    }
    if (l->time_unix_nano != 0) {
        rc = f_fixed64(e, 1, "timeUnixNano", l->time_unix_nano);
    }
    if (rc == 0 && l->severity_number != 0) {
        rc = f_enum(e, 2, "severityNumber", (uint32_t)l->severity_number);
    }
    if (rc == 0) {
        rc = f_string_opt(e, 3, "severityText", l->severity_text);
    }
    if (rc == 0 && l->body != NULL) {
        struct enc v;
        size_t mark = 0;
        rc = f_begin(e, 5, "body", 0, 0, &v, &mark);
        if (rc == 0) {
            rc = f_string(&v, 1, "stringValue", l->body);
        }
        if (rc == 0) {
            rc = f_end(e, 0, 0, mark);
        }
    }
    if (rc == 0) {
        rc = f_attrs(e, 6, l->attrs, l->nattrs);
    }
    if (rc == 0 && l->has_trace && l->flags != 0) {
        rc = f_fixed32(e, 8, "flags", l->flags);
    }
    if (rc == 0 && l->has_trace) {
        rc = f_id(e, 9, "traceId", l->trace_id, sizeof(l->trace_id));
    }
    if (rc == 0 && l->has_trace) {
        rc = f_id(e, 10, "spanId", l->span_id, sizeof(l->span_id));
    }
    if (rc == 0 && l->observed_unix_nano != 0) {
        rc = f_fixed64(e, 11, "observedTimeUnixNano", l->observed_unix_nano);
    }
    return rc != 0 ? rc : f_string_opt(e, 12, "eventName", l->event_name);
}

/* Span (trace.proto), fields in number order: 1 2 3 4 5 6 7 8 9 15 16. */
static int span_fields(struct enc *e, const void *arg)
{
    const struct otlp_span *s = arg;
    if (s->name == NULL || (unsigned)s->kind > OTLP_SPAN_CONSUMER ||
        (unsigned)s->status > OTLP_STATUS_ERROR) {
        return AGENT_E_INVAL;
    }
    int rc = f_id(e, 1, "traceId", s->trace_id, sizeof(s->trace_id));
    if (rc == 0) {
        rc = f_id(e, 2, "spanId", s->span_id, sizeof(s->span_id));
    }
    if (rc == 0) {
        rc = f_string_opt(e, 3, "traceState", s->trace_state);
    }
    if (rc == 0 && s->has_parent) {
        rc = f_id(e, 4, "parentSpanId", s->parent_span_id, sizeof(s->parent_span_id));
    }
    if (rc == 0) {
        rc = f_string_opt(e, 5, "name", s->name);
    }
    if (rc == 0 && s->kind != OTLP_SPAN_UNSPECIFIED) {
        rc = f_enum(e, 6, "kind", (uint32_t)s->kind);
    }
    if (rc == 0 && s->start_unix_nano != 0) {
        rc = f_fixed64(e, 7, "startTimeUnixNano", s->start_unix_nano);
    }
    if (rc == 0 && s->end_unix_nano != 0) {
        rc = f_fixed64(e, 8, "endTimeUnixNano", s->end_unix_nano);
    }
    if (rc == 0) {
        rc = f_attrs(e, 9, s->attrs, s->nattrs);
    }
    bool has_msg = s->status_message != NULL && *s->status_message != '\0';
    if (rc == 0 && (s->status != OTLP_STATUS_UNSET || has_msg)) {
        /* Status: message 2, code 3. */
        struct enc st;
        size_t mark = 0;
        rc = f_begin(e, 15, "status", 0, 0, &st, &mark);
        if (rc == 0) {
            rc = f_string_opt(&st, 2, "message", s->status_message);
        }
        if (rc == 0 && s->status != OTLP_STATUS_UNSET) {
            rc = f_enum(&st, 3, "code", (uint32_t)s->status);
        }
        if (rc == 0) {
            rc = f_end(e, 0, 0, mark);
        }
    }
    if (rc == 0 && s->flags != 0) {
        rc = f_fixed32(e, 16, "flags", s->flags);
    }
    return rc;
}

/* ---- metrics ---- */

/* Start and end times of a point: fields 2 and 3 in every data point message. */
static int point_times(struct enc *e, const struct otlp_point *p)
{
    int rc = 0;
    if (p->start_unix_nano != 0) {
        rc = f_fixed64(e, 2, "startTimeUnixNano", p->start_unix_nano);
    }
    if (rc == 0 && p->time_unix_nano != 0) {
        rc = f_fixed64(e, 3, "timeUnixNano", p->time_unix_nano);
    }
    return rc;
}

/* count 4 and sum 5 of the histogram points; sum is `optional` there (kept when 0). */
static int point_count_sum(struct enc *e, const struct otlp_point *p, bool sum_optional)
{
    int rc = 0;
    if (p->count != 0) {
        rc = f_fixed64(e, 4, "count", p->count);
    }
    if (rc == 0 && p->has_sum && (sum_optional || double_bits(p->sum) != 0)) {
        rc = f_double(e, 5, "sum", p->sum);
    }
    return rc;
}

/* NumberDataPoint: start 2, time 3, as_double 4 | as_int 6 (a oneof: always written), attrs 7. */
static int number_point(struct enc *e, const struct otlp_point *p)
{
    int rc = point_times(e, p);
    if (rc == 0) {
        rc = p->is_int ? f_sfixed64(e, 6, "asInt", p->as_int)
                       : f_double(e, 4, "asDouble", p->as_double);
    }
    return rc != 0 ? rc : f_attrs(e, 7, p->attrs, p->nattrs);
}

/* HistogramDataPoint: start 2, time 3, count 4, sum 5, bucket_counts 6, explicit_bounds 7,
 * attributes 9. */
static int histogram_point(struct enc *e, const struct otlp_point *p)
{
    if ((p->nbounds > 0 && (p->bounds == NULL || p->bucket_counts == NULL))) {
        return AGENT_E_INVAL;
    }
    int rc = point_times(e, p);
    if (rc == 0) {
        rc = point_count_sum(e, p, true);
    }
    if (rc == 0 && p->bucket_counts != NULL) {
        rc = f_packed_fixed64(e, 6, "bucketCounts", p->bucket_counts, p->nbounds + 1);
    }
    if (rc == 0 && p->nbounds > 0) {
        rc = f_packed_double(e, 7, "explicitBounds", p->bounds, p->nbounds);
    }
    return rc != 0 ? rc : f_attrs(e, 9, p->attrs, p->nattrs);
}

/* ExponentialHistogramDataPoint.Buckets: offset 1 (sint32), bucket_counts 2 (packed uint64). */
static int exp_buckets(struct enc *e, unsigned field, const char *jname,
                       const struct otlp_buckets *bk)
{
    if (bk->ncounts > 0 && bk->counts == NULL) {
        return AGENT_E_INVAL;
    }
    if (bk->ncounts == 0 && bk->offset == 0) {
        return 0;
    }
    struct enc c;
    size_t mark = 0;
    int rc = f_begin(e, field, jname, 0, 0, &c, &mark);
    if (rc == 0 && bk->offset != 0) {
        rc = f_sint32(&c, 1, "offset", bk->offset);
    }
    if (rc == 0 && bk->ncounts > 0) {
        rc = f_packed_uint64(&c, 2, "bucketCounts", bk->counts, bk->ncounts);
    }
    return rc != 0 ? rc : f_end(e, 0, 0, mark);
}

/* ExponentialHistogramDataPoint: attributes 1, start 2, time 3, count 4, sum 5, scale 6,
 * zero_count 7, positive 8, negative 9, min 12, max 13 (optional doubles). */
static int exp_histogram_point(struct enc *e, const struct otlp_point *p)
{
    int rc = f_attrs(e, 1, p->attrs, p->nattrs);
    if (rc == 0) {
        rc = point_times(e, p);
    }
    if (rc == 0) {
        rc = point_count_sum(e, p, true);
    }
    if (rc == 0 && p->scale != 0) {
        rc = f_sint32(e, 6, "scale", p->scale);
    }
    if (rc == 0 && p->zero_count != 0) {
        rc = f_fixed64(e, 7, "zeroCount", p->zero_count);
    }
    if (rc == 0) {
        rc = exp_buckets(e, 8, "positive", &p->positive);
    }
    if (rc == 0) {
        rc = exp_buckets(e, 9, "negative", &p->negative);
    }
    if (rc == 0 && p->has_min_max) {
        rc = f_double(e, 12, "min", p->min);
        rc = rc != 0 ? rc : f_double(e, 13, "max", p->max);
    }
    return rc;
}

/* SummaryDataPoint: start 2, time 3, count 4, sum 5 (plain double), quantile_values 6
 * (ValueAtQuantile: quantile 1, value 2), attributes 7. */
static int summary_point(struct enc *e, const struct otlp_point *p)
{
    if (p->nquantiles > 0 && p->quantiles == NULL) {
        return AGENT_E_INVAL;
    }
    int rc = point_times(e, p);
    if (rc == 0) {
        rc = point_count_sum(e, p, false);
    }
    for (size_t i = 0; rc == 0 && i < p->nquantiles; i++) {
        struct enc q;
        size_t mark = 0;
        const struct otlp_quantile *v = &p->quantiles[i];
        rc = f_begin(e, 6, "quantileValues", i, p->nquantiles, &q, &mark);
        if (rc == 0 && double_bits(v->quantile) != 0) {
            rc = f_double(&q, 1, "quantile", v->quantile);
        }
        if (rc == 0 && double_bits(v->value) != 0) {
            rc = f_double(&q, 2, "value", v->value);
        }
        if (rc == 0) {
            rc = f_end(e, i, p->nquantiles, mark);
        }
    }
    return rc != 0 ? rc : f_attrs(e, 7, p->attrs, p->nattrs);
}

/* Metric (metrics.proto): name 1, description 2, unit 3, then one of gauge 5, sum 7,
 * histogram 9, exponential_histogram 10, summary 11, each holding data_points 1 and, but for
 * gauge and summary, aggregation_temporality 2 (sum also is_monotonic 3). */
static int metric_fields(struct enc *e, const void *arg)
{
    static const struct {
        unsigned field;
        const char *jname;
        bool temporal;
        int (*point)(struct enc *, const struct otlp_point *);
    } types[] = {
        [OTLP_GAUGE] = {5, "gauge", false, number_point},
        [OTLP_SUM] = {7, "sum", true, number_point},
        [OTLP_HISTOGRAM] = {9, "histogram", true, histogram_point},
        [OTLP_EXP_HISTOGRAM] = {10, "exponentialHistogram", true, exp_histogram_point},
        [OTLP_SUMMARY] = {11, "summary", false, summary_point},
    };
    const struct otlp_metric *m = arg;
    if (m->name == NULL || (unsigned)m->type > OTLP_SUMMARY ||
        (m->npoints > 0 && m->points == NULL)) {
        return AGENT_E_INVAL;
    }
    bool temporal = types[m->type].temporal;
    if (temporal && m->temporality != OTLP_TEMPORALITY_DELTA &&
        m->temporality != OTLP_TEMPORALITY_CUMULATIVE) {
        return AGENT_E_INVAL;
    }
    struct enc d;
    size_t mark = 0;
    int rc = f_string_opt(e, 1, "name", m->name);
    if (rc == 0) {
        rc = f_string_opt(e, 2, "description", m->description);
    }
    if (rc == 0) {
        rc = f_string_opt(e, 3, "unit", m->unit);
    }
    if (rc == 0) {
        rc = f_begin(e, types[m->type].field, types[m->type].jname, 0, 0, &d, &mark);
    }
    for (size_t i = 0; rc == 0 && i < m->npoints; i++) {
        struct enc p;
        size_t pmark = 0;
        rc = f_begin(&d, 1, "dataPoints", i, m->npoints, &p, &pmark);
        if (rc == 0) {
            rc = types[m->type].point(&p, &m->points[i]);
        }
        if (rc == 0) {
            rc = f_end(&d, i, m->npoints, pmark);
        }
    }
    if (rc == 0 && temporal) {
        rc = f_enum(&d, 2, "aggregationTemporality", (uint32_t)m->temporality);
    }
    if (rc == 0 && m->type == OTLP_SUM && m->monotonic) {
        rc = f_bool(&d, 3, "isMonotonic", true);
    }
    return rc != 0 ? rc : f_end(e, 0, 0, mark);
}

int otlp_resource_encode(const struct otlp_resource *r, enum otlp_format f, struct buf *out)
{
    return encode_piece(f, out, r, resource_fields);
}

int otlp_scope_encode(const struct otlp_scope *s, enum otlp_format f, struct buf *out)
{
    return encode_piece(f, out, s, scope_fields);
}

int otlp_log_encode(const struct otlp_log *l, enum otlp_format f, struct buf *out)
{
    return encode_piece(f, out, l, log_fields);
}

int otlp_span_encode(const struct otlp_span *s, enum otlp_format f, struct buf *out)
{
    return encode_piece(f, out, s, span_fields);
}

int otlp_metric_encode(const struct otlp_metric *m, enum otlp_format f, struct buf *out)
{
    return encode_piece(f, out, m, metric_fields);
}

/* ---- requests ---- */

struct sig_names {
    const char *name;          /* otlp_signal_name */
    const char *path;          /* otlp_signal_path */
    const char *resource_list; /* ResourceLogs list in the request */
    const char *scope_list;    /* ScopeLogs list in ResourceLogs */
    const char *items;         /* the items in ScopeLogs */
    const char *rejected;      /* the partial success count */
};

static const struct sig_names SIG_NAMES[] = {
    [OTLP_LOGS] = {"logs", "/v1/logs", "resourceLogs", "scopeLogs", "logRecords",
                   "rejectedLogRecords"},
    [OTLP_METRICS] = {"metrics", "/v1/metrics", "resourceMetrics", "scopeMetrics", "metrics",
                      "rejectedDataPoints"},
    [OTLP_TRACES] = {"traces", "/v1/traces", "resourceSpans", "scopeSpans", "spans",
                     "rejectedSpans"},
};

static bool piece_ok(const struct otlp_piece *pc)
{
    return pc->n == 0 || pc->p != NULL;
}

/* Bytes of ScopeLogs (scope 1, items 2); SIZE_MAX on a NULL piece. */
static size_t scope_group_size(const struct otlp_scope_group *s)
{
    if (!piece_ok(&s->scope) || (s->nitems > 0 && s->items == NULL)) {
        return SIZE_MAX;
    }
    size_t n = pb_len_field_size(1, s->scope.n);
    for (size_t i = 0; i < s->nitems; i++) {
        if (!piece_ok(&s->items[i])) {
            return SIZE_MAX;
        }
        n += pb_len_field_size(2, s->items[i].n);
    }
    return n;
}

/* Bytes of ResourceLogs (resource 1, scope groups 2, schema_url 3); SIZE_MAX on a NULL piece. */
static size_t resource_group_size(const struct otlp_resource_group *g)
{
    if (!piece_ok(&g->resource) || (g->nscopes > 0 && g->scopes == NULL)) {
        return SIZE_MAX;
    }
    size_t n = pb_len_field_size(1, g->resource.n);
    for (size_t s = 0; s < g->nscopes; s++) {
        size_t sn = scope_group_size(&g->scopes[s]);
        if (sn == SIZE_MAX) {
            return SIZE_MAX;
        }
        n += pb_len_field_size(2, sn);
    }
    if (g->schema_url != NULL && *g->schema_url != '\0') {
        n += pb_len_field_size(3, utf8_repaired_len(g->schema_url));
    }
    return n;
}

static int pb_piece(struct buf *b, unsigned field, const struct otlp_piece *pc)
{
    int rc = pb_len_header(b, field, pc->n);
    return rc != 0 || pc->n == 0 ? rc : buf_append(b, pc->p, pc->n);
}

/* Every message field of the request is length-delimited, and the three signals number theirs
 * alike (request 1, resource 1, scope groups 2, schema_url 3; scope 1, items 2). */
static int request_pb(const struct otlp_resource_group *groups, size_t ngroups, struct buf *out)
{
    size_t total = 0;
    for (size_t g = 0; g < ngroups; g++) {
        size_t gn = resource_group_size(&groups[g]);
        if (gn == SIZE_MAX) {
            return AGENT_E_INVAL;
        }
        total += pb_len_field_size(1, gn);
    }
    int rc = buf_reserve(out, total);
    for (size_t g = 0; rc == 0 && g < ngroups; g++) {
        const struct otlp_resource_group *rg = &groups[g];
        rc = pb_len_header(out, 1, resource_group_size(rg));
        if (rc == 0) {
            rc = pb_piece(out, 1, &rg->resource);
        }
        for (size_t s = 0; rc == 0 && s < rg->nscopes; s++) {
            const struct otlp_scope_group *sg = &rg->scopes[s];
            rc = pb_len_header(out, 2, scope_group_size(sg));
            if (rc == 0) {
                rc = pb_piece(out, 1, &sg->scope);
            }
            for (size_t i = 0; rc == 0 && i < sg->nitems; i++) {
                rc = pb_piece(out, 2, &sg->items[i]);
            }
        }
        if (rc == 0) {
            struct enc e = {.b = out, .f = OTLP_PROTOBUF, .first = true};
            rc = f_string_opt(&e, 3, "schemaUrl", rg->schema_url);
        }
    }
    return rc;
}

/* "name":<piece> in JSON (the piece is one JSON object); left out when empty. */
static int json_piece(struct enc *e, const char *jname, const struct otlp_piece *pc)
{
    if (pc->n == 0) {
        return 0;
    }
    int rc = j_key(e, jname);
    return rc != 0 ? rc : buf_append(e->b, pc->p, pc->n);
}

/* "name":[<pieces>]; left out when there are none. */
static int json_pieces(struct enc *e, const char *jname, const struct otlp_piece *pcs, size_t n)
{
    if (n == 0) {
        return 0;
    }
    int rc = j_key(e, jname);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (!piece_ok(&pcs[i]) || pcs[i].n == 0) {
            return AGENT_E_INVAL;
        }
        rc = buf_append(e->b, i == 0 ? "[" : ",", 1);
        if (rc == 0) {
            rc = buf_append(e->b, pcs[i].p, pcs[i].n);
        }
    }
    return rc != 0 ? rc : buf_append(e->b, "]", 1);
}

static int request_json(const struct sig_names *nm, const struct otlp_resource_group *groups,
                        size_t ngroups, struct buf *out)
{
    struct enc top = {.b = out, .f = OTLP_JSON, .first = true};
    int rc = buf_append(out, "{", 1);
    for (size_t g = 0; rc == 0 && g < ngroups; g++) {
        const struct otlp_resource_group *rg = &groups[g];
        if (!piece_ok(&rg->resource) || (rg->nscopes > 0 && rg->scopes == NULL)) {
            return AGENT_E_INVAL;
        }
        struct enc re;
        rc = f_begin(&top, 1, nm->resource_list, g, ngroups, &re, &(size_t){0});
        if (rc == 0) {
            rc = json_piece(&re, "resource", &rg->resource);
        }
        for (size_t s = 0; rc == 0 && s < rg->nscopes; s++) {
            const struct otlp_scope_group *sg = &rg->scopes[s];
            if (!piece_ok(&sg->scope) || (sg->nitems > 0 && sg->items == NULL)) {
                return AGENT_E_INVAL;
            }
            struct enc se;
            rc = f_begin(&re, 2, nm->scope_list, s, rg->nscopes, &se, &(size_t){0});
            if (rc == 0) {
                rc = json_piece(&se, "scope", &sg->scope);
            }
            if (rc == 0) {
                rc = json_pieces(&se, nm->items, sg->items, sg->nitems);
            }
            if (rc == 0) {
                rc = f_end(&re, s, rg->nscopes, 0);
            }
        }
        if (rc == 0) {
            rc = f_string_opt(&re, 3, "schemaUrl", rg->schema_url);
        }
        if (rc == 0) {
            rc = f_end(&top, g, ngroups, 0);
        }
    }
    return rc != 0 ? rc : buf_append(out, "}", 1);
}

int otlp_request_encode(enum otlp_signal sig, enum otlp_format f,
                        const struct otlp_resource_group *groups, size_t ngroups, struct buf *out)
{
    if (out == NULL || (unsigned)sig > OTLP_TRACES || (f != OTLP_PROTOBUF && f != OTLP_JSON) ||
        (ngroups > 0 && groups == NULL)) {
        return AGENT_E_INVAL;
    }
    size_t start = buf_size(out);
    int rc = f == OTLP_PROTOBUF ? request_pb(groups, ngroups, out)
                                : request_json(&SIG_NAMES[sig], groups, ngroups, out);
    if (rc != 0) {
        buf_truncate(out, start);
    }
    return rc;
}

/* ---- responses ---- */

/*
 * Copies the response's error message into msg[0..msglen): invalid UTF-8 becomes U+FFFD, control
 * characters a space (it goes to a log line), cut at a character boundary to msglen - 1 bytes.
 */
static void copy_message(const uint8_t *s, size_t n, char *msg, size_t msglen)
{
    if (msg == NULL || msglen == 0) {
        return;
    }
    size_t o = 0, i = 0;
    while (i < n) {
        uint32_t cp;
        size_t l;
        const uint8_t *src = s + i;
        uint8_t space = ' ';
        if (s[i] != 0 && utf8_decode(s + i, n - i, &cp, &l)) {
            if (cp < 0x20 || cp == 0x7F) {
                src = &space;
            }
        } else {
            src = REPLACEMENT_UTF8;
            l = 1;
        }
        size_t w = src == REPLACEMENT_UTF8 ? sizeof(REPLACEMENT_UTF8) : src == &space ? 1 : l;
        if (o + w > msglen - 1) {
            break;
        }
        memcpy(msg + o, src, w);
        o += w;
        i += l;
    }
    msg[o] = '\0';
}

struct pb_rd {
    const uint8_t *p;
    size_t n;
};

static int rd_varint(struct pb_rd *r, uint64_t *v)
{
    uint64_t x = 0;
    for (size_t i = 0; i < 10; i++) {
        if (i >= r->n) {
            return AGENT_E_PROTO;
        }
        uint8_t c = r->p[i];
        if (i == 9 && c > 1) {
            return AGENT_E_PROTO; /* over 64 bits */
        }
        x |= (uint64_t)(c & 0x7F) << (7 * i);
        if ((c & 0x80) == 0) {
            r->p += i + 1;
            r->n -= i + 1;
            *v = x;
            return 0;
        }
    }
    return AGENT_E_PROTO;
}

/* Reads one field's tag and, for length-delimited ones, its bytes into *sub; skips other
 * values. */
static int rd_field(struct pb_rd *r, unsigned *field, unsigned *wt, uint64_t *v, struct pb_rd *sub)
{
    uint64_t tag;
    if (rd_varint(r, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1FFFFFFF) {
        return AGENT_E_PROTO;
    }
    *field = (unsigned)(tag >> 3);
    *wt = (unsigned)(tag & 7);
    size_t skip;
    switch (*wt) {
    case WT_VARINT:
        return rd_varint(r, v);
    case WT_I64:
        skip = 8;
        break;
    case WT_I32:
        skip = 4;
        break;
    case WT_LEN:
        if (rd_varint(r, v) != 0 || *v > r->n) {
            return AGENT_E_PROTO;
        }
        skip = (size_t)*v;
        *sub = (struct pb_rd){.p = r->p, .n = skip};
        break;
    default:
        return AGENT_E_PROTO; /* groups and wire types 6, 7 */
    }
    if (skip > r->n) {
        return AGENT_E_PROTO;
    }
    r->p += skip;
    r->n -= skip;
    return 0;
}

/* Export*ServiceResponse: partial_success 1 = { rejected 1 (int64), error_message 2 }. */
static int response_pb(const uint8_t *p, size_t n, int64_t *rejected, char *msg, size_t msglen)
{
    struct pb_rd r = {.p = p, .n = n};
    while (r.n > 0) {
        unsigned field, wt;
        uint64_t v = 0;
        struct pb_rd ps = {0};
        if (rd_field(&r, &field, &wt, &v, &ps) != 0) {
            return AGENT_E_PROTO;
        }
        if (field != 1) {
            continue;
        }
        if (wt != WT_LEN) {
            return AGENT_E_PROTO;
        }
        while (ps.n > 0) {
            struct pb_rd s = {0};
            if (rd_field(&ps, &field, &wt, &v, &s) != 0) {
                return AGENT_E_PROTO;
            }
            if (field == 1 && wt == WT_VARINT) {
                if ((int64_t)v < 0) {
                    return AGENT_E_PROTO;
                }
                *rejected = (int64_t)v;
            } else if (field == 2 && wt == WT_LEN) {
                copy_message(s.p, s.n, msg, msglen);
            } else if (field == 1 || field == 2) {
                return AGENT_E_PROTO;
            }
        }
    }
    return 0;
}

/* The rejected count in JSON: a decimal string (proto3's int64) or an integral number. */
static int json_count(const cJSON *c, int64_t *out)
{
    if (cJSON_IsString(c)) {
        uint64_t v;
        const char *s = c->valuestring;
        if (num_parse_u64(s, strlen(s), 10, INT64_MAX, &v) != 0) {
            return AGENT_E_PROTO;
        }
        *out = (int64_t)v;
        return 0;
    }
    if (cJSON_IsNumber(c)) {
        double d = c->valuedouble;
        if (!(d >= 0 && d <= 9007199254740992.0) || d != floor(d)) {
            return AGENT_E_PROTO;
        }
        *out = (int64_t)d;
        return 0;
    }
    return AGENT_E_PROTO;
}

static int response_json(const struct sig_names *nm, const uint8_t *p, size_t n, int64_t *rejected,
                         char *msg, size_t msglen)
{
    int rc = AGENT_E_PROTO;
    cJSON *root = cJSON_ParseWithLength((const char *)p, n);
    if (!cJSON_IsObject(root)) {
        goto cleanup;
    }
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(root, "partialSuccess");
    if (ps != NULL && !cJSON_IsNull(ps)) {
        if (!cJSON_IsObject(ps)) {
            goto cleanup;
        }
        const cJSON *rej = cJSON_GetObjectItemCaseSensitive(ps, nm->rejected);
        if (rej != NULL && json_count(rej, rejected) != 0) {
            goto cleanup;
        }
        const cJSON *em = cJSON_GetObjectItemCaseSensitive(ps, "errorMessage");
        if (em != NULL && !cJSON_IsString(em)) {
            goto cleanup;
        }
        if (em != NULL) {
            copy_message((const uint8_t *)em->valuestring, strlen(em->valuestring), msg, msglen);
        }
    }
    rc = 0;
cleanup:
    cJSON_Delete(root);
    return rc;
}

int otlp_response_decode(enum otlp_signal sig, enum otlp_format f, const uint8_t *p, size_t n,
                         int64_t *rejected, char *msg, size_t msglen)
{
    int64_t rej = 0;
    if (msg != NULL && msglen > 0) {
        msg[0] = '\0';
    }
    if ((unsigned)sig > OTLP_TRACES || (f != OTLP_PROTOBUF && f != OTLP_JSON) ||
        (n > 0 && p == NULL) || n > OTLP_RESPONSE_MAX) {
        return AGENT_E_PROTO;
    }
    int rc = 0;
    if (n > 0) {
        rc = f == OTLP_PROTOBUF ? response_pb(p, n, &rej, msg, msglen)
                                : response_json(&SIG_NAMES[sig], p, n, &rej, msg, msglen);
    }
    if (rc != 0) {
        rej = 0;
        if (msg != NULL && msglen > 0) {
            msg[0] = '\0';
        }
    }
    if (rejected != NULL) {
        *rejected = rej;
    }
    return rc;
}

const char *otlp_signal_name(enum otlp_signal sig)
{
    return (unsigned)sig <= OTLP_TRACES ? SIG_NAMES[sig].name : "unknown";
}

const char *otlp_signal_path(enum otlp_signal sig)
{
    return (unsigned)sig <= OTLP_TRACES ? SIG_NAMES[sig].path : "/v1/unknown";
}
