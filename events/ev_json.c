/* SPDX-License-Identifier: MIT */
#include "ev_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/civil.h"
#include "common/err.h"
#include "common/hex.h"
#include "common/membudget.h"
#include "common/utf8.h"
#include "ev_fmt.h"
#include "ev_native.h"
#include "ev_payload.h"
#include "ev_rd.h"
#include "ev_schemas.h"

#define MAX_SAFE_INT     9007199254740992ull /* 2^53 */
#define FILETIME_TO_UNIX 11644473600ll       /* seconds from 1601-01-01 to 1970-01-01 */

/* What the converter derives once per metadata id (its slot in the schema registry). */
struct schema_slot {
    char *head; /* the event's constant members, rendered at its first event */
    size_t head_len;
    const struct ev_native_event *native; /* its native layout (valid once native_known) */
    bool native_known;
};

/* The last second rendered: "yyyy-mm-ddThh:mm:ss (19 characters), reused while it holds. */
struct time_cache {
    int64_t secs;
    bool valid;
    char text[20];
};

struct ev_json {
    struct nettrace_checker ck;
    ev_json_line_cb cb;
    void *ud;
    int err; /* the first callback or rendering error; stops the output */
    uint64_t lines;
    struct buf line;
    struct ev_record rec; /* scratch for one event's decoded fields */
    struct time_cache tc;
    /* The Trace object (zeros until it has been read): it comes once, at the stream's start. */
    struct nettrace_trace_info ti;
    bool have_ti;
    size_t batch;              /* lines are handed over once this many bytes wait (0: each line) */
    struct ev_schemas schemas; /* by metadata id, a schema_slot each */
    struct mb_share *share;    /* schemas, heads and slots are charged here (NULL: the total) */
    uint64_t held;             /* bytes charged now for heads (the registry counts its own) */
    uint64_t dropped;          /* schemas, heads or slots refused by the share */
};

/* Charges n bytes to j's share before they are allocated; false (counted) when refused. */
static bool mem_take(struct ev_json *j, size_t n)
{
    if (mb_charge(j->share, n) != 0) {
        j->dropped++;
        return false;
    }
    j->held += n;
    return true;
}

static void mem_give(struct ev_json *j, size_t n)
{
    mb_release(j->share, n);
    j->held -= n;
}

/* ---- JSON text ------------------------------------------------------------------------------ */

/* Writes the JSON text of one code point to u (room for 6 bytes); returns its length. */
static size_t encode_codepoint(uint8_t *u, uint32_t cp)
{
    size_t n;
    if (cp == '"' || cp == '\\') {
        u[0] = '\\';
        u[1] = (uint8_t)cp;
        n = 2;
    } else if (cp < 0x20) {
        u[0] = '\\';
        u[1] = 'u';
        u[2] = '0';
        u[3] = '0';
        u[4] = (uint8_t)hex_digit(cp >> 4);
        u[5] = (uint8_t)hex_digit(cp);
        n = 6;
    } else {
        n = utf8_encode(u, cp);
    }
    return n;
}

static int put_codepoint(struct buf *out, uint32_t cp)
{
    uint8_t u[6];
    return buf_append(out, u, encode_codepoint(u, cp));
}

/* One UTF-8 sequence at s[0..n): its code point and length, or U+FFFD and 1 when invalid. */
static inline uint32_t utf8_next(const uint8_t *s, size_t n, size_t *used)
{
    uint32_t cp;
    if (!utf8_decode(s, n, &cp, used)) {
        *used = 1;
        return UTF8_REPLACEMENT;
    }
    return cp;
}

/* True for a byte that stands for itself inside a JSON string. */
static inline bool plain_ascii(uint32_t c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* True when four UTF-16LE units (as loaded on a little-endian host) all stand for themselves:
 * below 0x80, at least 0x20, neither '"' nor '\\'. May say false for some plain ones (the
 * caller then goes unit by unit). */
static inline bool plain_ascii4(uint64_t x)
{
    const uint64_t ones = 0x0001000100010001ull, tops = 0x8000800080008000ull;
    const uint64_t b7 = 0x0080008000800080ull;
    if ((x & 0xFF80FF80FF80FF80ull) != 0 || ((x + 0x0060006000600060ull) & b7) != b7) {
        return false;
    }
    uint64_t q = x ^ 0x0022002200220022ull; /* a zero lane where x has '"' */
    uint64_t b = x ^ 0x005C005C005C005Cull; /* and where it has '\\' */
    return (((q - ones) & ~q) | ((b - ones) & ~b)) & tops ? false : true;
}

int ev_json_str_utf8(struct buf *out, const uint8_t *s, size_t n)
{
    /* Fast path: worst case (6 bytes of output a byte of input) reserved once, written in place. */
    if (n <= ((size_t)1 << 20) && buf_reserve(out, 6 * n + 2) == 0) {
        uint8_t *w = out->p + out->len;
        *w++ = '"';
        for (size_t i = 0; i < n;) {
            if (plain_ascii(s[i])) {
                *w++ = s[i++];
                continue;
            }
            size_t used;
            w += encode_codepoint(w, utf8_next(s + i, n - i, &used));
            i += used;
        }
        *w++ = '"';
        out->len = (size_t)(w - out->p);
        return 0;
    }
    int rc = buf_append(out, "\"", 1);
    size_t i = 0;
    while (rc == 0 && i < n) {
        size_t used;
        uint32_t cp = utf8_next(s + i, n - i, &used);
        rc = put_codepoint(out, cp);
        i += used;
    }
    return rc == 0 ? buf_append(out, "\"", 1) : rc;
}

static int str_cstr(struct buf *out, const char *s)
{
    return ev_json_str_utf8(out, (const uint8_t *)s, strlen(s));
}

/* A JSON string of `units` UTF-16LE code units; lone surrogates become U+FFFD. */
static int str_utf16(struct buf *out, const uint8_t *p, size_t units)
{
    /* Fast path: room for the worst case (6 bytes a unit) reserved once, written in place. */
    if (units <= ((size_t)1 << 20) && buf_reserve(out, 6 * units + 2) == 0) {
        uint8_t *w = out->p + out->len;
        *w++ = '"';
        size_t k = 0;
        const bool le = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
        for (; le && k + 4 <= units; k += 4) { /* four plain ASCII units at a time */
            uint64_t x;
            memcpy(&x, p + 2 * k, 8);
            if (!plain_ascii4(x)) {
                break;
            }
            w[0] = (uint8_t)x;
            w[1] = (uint8_t)(x >> 16);
            w[2] = (uint8_t)(x >> 32);
            w[3] = (uint8_t)(x >> 48);
            w += 4;
        }
        while (k < units) {
            uint32_t c = ev_load_u16(p + 2 * k);
            if (plain_ascii(c)) {
                *w++ = (uint8_t)c;
                k++;
                continue;
            }
            w += encode_codepoint(w, utf16le_next(p, units, &k));
        }
        *w++ = '"';
        out->len = (size_t)(w - out->p);
        return 0;
    }
    int rc = buf_append(out, "\"", 1);
    for (size_t k = 0; rc == 0 && k < units;) {
        rc = put_codepoint(out, utf16le_next(p, units, &k));
    }
    return rc == 0 ? buf_append(out, "\"", 1) : rc;
}

static int hex_str(struct buf *out, const uint8_t *p, size_t n)
{
    int rc = buf_reserve(out, 2 * n + 2);
    if (rc != 0) {
        return rc;
    }
    char *w = (char *)out->p + out->len;
    w[0] = '"';
    hex_encode(p, n, w + 1);
    w[2 * n + 1] = '"';
    out->len += 2 * n + 2;
    return 0;
}

/* .NET Guid text: Data1 (u32 LE), Data2, Data3 (u16 LE), then 8 bytes as they are. */
static int guid_str(struct buf *out, const uint8_t *g)
{
    char t[HEX_GUID_SIZE + 1];
    t[0] = '"';
    hex_guid_dotnet(g, t + 1);
    t[HEX_GUID_SIZE] = '"';
    return buf_append(out, t, sizeof(t));
}

/* Room for n more bytes: buf_append's fast test, buf_reserve only when it fails. */
static inline int room(struct buf *out, size_t n)
{
    return out->cap - out->len > n ? 0 : buf_reserve(out, n);
}

static const char digit_pairs[] = "0001020304050607080910111213141516171819202122232425262728293031"
                                  "3233343536373839404142434445464748495051525354555657585960616263"
                                  "6465666768697071727374757677787980818283848586878889909192939495"
                                  "96979899";

/* Number of decimal digits of v (1..20): log10 from the bit length, then one comparison. */
static size_t dec_len(uint64_t v)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    size_t t = ((size_t)(64 - __builtin_clzll(v | 1)) * 1233) >> 12; /* floor or floor + 1 */
    return t + (t < 20 && (v | 1) >= pow10[t]); /* v | 1: 0 has one digit too */
}

/* The two digits of x (< 100) just before e. */
static inline uint8_t *put_pair(uint8_t *e, uint32_t x)
{
    *--e = (uint8_t)digit_pairs[x * 2 + 1];
    *--e = (uint8_t)digit_pairs[x * 2];
    return e;
}

/* The len decimal digits of v written backwards from w + len: eight at a time in 32-bit
 * arithmetic, then two at a time. */
static void put_digits(uint8_t *w, uint64_t v, size_t len)
{
    uint8_t *e = w + len;
    while (v >= 100000000u) {
        uint32_t lo = (uint32_t)(v % 100000000u);
        v /= 100000000u;
        for (int k = 0; k < 4; k++) {
            e = put_pair(e, lo % 100);
            lo /= 100;
        }
    }
    uint32_t x = (uint32_t)v;
    while (x >= 100) {
        e = put_pair(e, x % 100);
        x /= 100;
    }
    if (x >= 10) {
        (void)put_pair(e, x);
    } else {
        e[-1] = (uint8_t)('0' + x);
    }
}

/* The JSON number of v (magnitude mag, negative when neg) at w, as a string past 2^53 (JSON
 * readers lose digits there); returns its length, at most NUM_MAX. */
#define NUM_MAX 24
static size_t put_num(uint8_t *w, uint64_t mag, bool neg)
{
    if (mag < 10 && !neg) { /* the common case of counts, kinds and ids */
        w[0] = (uint8_t)('0' + mag);
        return 1;
    }
    bool quote = mag > MAX_SAFE_INT;
    size_t n = 0;
    if (quote) {
        w[n++] = '"';
    }
    if (neg) {
        w[n++] = '-';
    }
    size_t len = dec_len(mag);
    put_digits(w + n, mag, len);
    n += len;
    if (quote) {
        w[n++] = '"';
    }
    return n;
}

static int u64_num(struct buf *out, uint64_t v)
{
    int rc = room(out, NUM_MAX);
    if (rc == 0) {
        out->len += put_num(out->p + out->len, v, false);
    }
    return rc;
}

static int i64_num(struct buf *out, int64_t v)
{
    int rc = room(out, NUM_MAX);
    if (rc == 0) {
        uint64_t mag = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
        out->len += put_num(out->p + out->len, mag, v < 0);
    }
    return rc;
}

static int f64_num(struct buf *out, double d, bool single)
{
    if (isnan(d)) {
        return buf_append_str(out, "\"NaN\"");
    }
    if (isinf(d)) {
        return buf_append_str(out, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
    }
    return buf_printf(out, single ? "%.9g" : "%.17g", d);
}

/* ---- time ----------------------------------------------------------------------------------- */

/* Seconds since the Unix epoch (within years 1..9999) and nanoseconds as an ISO-8601 string. */
static int iso_time(struct buf *out, int64_t secs, uint32_t nanos, bool with_nanos,
                    struct time_cache *tc)
{
    if (secs < -62135596800ll || secs > 253402300799ll) {
        return buf_append_str(out, "null");
    }
    char t[40];
    size_t n = 0;
    if (tc != NULL && tc->valid && tc->secs == secs) {
        memcpy(t, tc->text, 20);
        n = 20;
        goto fraction;
    }
    int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    int64_t sod = secs - days * 86400;
    int64_t y;
    int mi, di;
    civil_date(days, &y, &mi, &di);
    unsigned m = (unsigned)mi;
    unsigned d = (unsigned)di;
    /* "yyyy-mm-ddThh:mm:ss[.fffffffff]Z" without printf (this runs once per event). The year is
     * within 1..9999 (checked above), so four digits always. */
    unsigned parts[6] = {
        (unsigned)y, m, d, (unsigned)(sod / 3600), (unsigned)(sod / 60 % 60), (unsigned)(sod % 60)};
    static const char seps[6] = {'-', '-', 'T', ':', ':', 0};
    t[n++] = '"';
    for (int k = 0; k < 6; k++) {
        unsigned v = parts[k];
        if (k == 0) {
            t[n++] = (char)('0' + v / 1000 % 10);
            t[n++] = (char)('0' + v / 100 % 10);
        }
        t[n++] = (char)('0' + v / 10 % 10);
        t[n++] = (char)('0' + v % 10);
        if (seps[k] != 0) {
            t[n++] = seps[k];
        }
    }
    if (tc != NULL) {
        memcpy(tc->text, t, 20);
        tc->secs = secs;
        tc->valid = true;
    }
fraction:;
    unsigned digits = with_nanos ? 9 : nanos != 0 ? 7 : 0;
    uint32_t frac = with_nanos ? nanos : nanos / 100;
    if (digits > 0) {
        t[n++] = '.';
        for (unsigned k = digits; k > 0; k--) {
            t[n + k - 1] = (char)('0' + frac % 10);
            frac /= 10;
        }
        n += digits;
    }
    t[n++] = 'Z';
    t[n++] = '"';
    return buf_append(out, t, n);
}

/* The event's time: the sync time plus (timestamp - sync QPC) / frequency (nettrace_unix_ns). */
static int event_time(struct buf *out, const struct nettrace_trace_info *ti, int64_t ts,
                      struct time_cache *tc)
{
    int64_t ns = 0;
    if (nettrace_unix_ns(ti, ts, &ns) != 0) {
        return buf_append_str(out, "null");
    }
    int64_t secs = ns / 1000000000;
    int64_t rem = ns % 1000000000;
    if (rem < 0) {
        rem += 1000000000;
        secs--;
    }
    return iso_time(out, secs, (uint32_t)rem, true, tc);
}

/* ---- payload values ------------------------------------------------------------------------- */

/* One scalar of type code at p (size bytes, or a varint of size bytes). */
static int scalar(struct buf *out, uint8_t code, const uint8_t *p, uint32_t size)
{
    struct ev_value v = {p, size, 0};
    uint64_t u = 0;
    switch (code) {
    case EV_TYPE_BOOLEAN:
        return buf_append_str(out, ev_load_u32(p) != 0 ? "true" : "false");
    case EV_TYPE_BOOLEAN8:
        return buf_append_str(out, p[0] != 0 ? "true" : "false");
    case EV_TYPE_CHAR:
        return str_utf16(out, p, 1);
    case EV_TYPE_SBYTE:
        return i64_num(out, (int8_t)p[0]);
    case EV_TYPE_BYTE:
    case EV_TYPE_UTF8_UNIT:
        return u64_num(out, p[0]);
    case EV_TYPE_INT16:
        return i64_num(out, (int16_t)ev_load_u16(p));
    case EV_TYPE_UINT16:
        return u64_num(out, ev_load_u16(p));
    case EV_TYPE_INT32:
        return i64_num(out, (int32_t)ev_load_u32(p));
    case EV_TYPE_UINT32:
        return u64_num(out, ev_load_u32(p));
    case EV_TYPE_INT64:
        return i64_num(out, (int64_t)ev_load_u64(p));
    case EV_TYPE_UINT64:
        return u64_num(out, ev_load_u64(p));
    case EV_TYPE_VARINT:
    case EV_TYPE_VARUINT:
        for (uint32_t k = 0; k < v.len && k < 10; k++) {
            u |= (uint64_t)(p[k] & 0x7F) << (7 * k);
        }
        return code == EV_TYPE_VARUINT ? u64_num(out, u)
                                       : i64_num(out, (int64_t)(u >> 1) ^ -(int64_t)(u & 1));
    case EV_TYPE_SINGLE: {
        uint32_t bits = ev_load_u32(p);
        float f;
        memcpy(&f, &bits, sizeof(f));
        return f64_num(out, (double)f, true);
    }
    case EV_TYPE_DOUBLE: {
        uint64_t bits = ev_load_u64(p);
        double d;
        memcpy(&d, &bits, sizeof(d));
        return f64_num(out, d, false);
    }
    case EV_TYPE_DATETIME: {
        uint64_t ticks = ev_load_u64(p); /* FILETIME: 100 ns since 1601-01-01 UTC */
        int64_t secs = (int64_t)(ticks / 10000000u) - FILETIME_TO_UNIX;
        return ticks > 0x7FFFFFFFFFFFFFFFull
                   ? u64_num(out, ticks)
                   : iso_time(out, secs, (uint32_t)(ticks % 10000000u) * 100u, false, NULL);
    }
    case EV_TYPE_GUID:
        return guid_str(out, p);
    default:
        return hex_str(out, p, size);
    }
}

/* An array element `scalar` renders by stride: a fixed-size scalar (not Decimal, not a varint). */
static bool scalar_element(const struct ev_field *e)
{
    if (e->size <= 0) {
        return false;
    }
    switch (e->code) {
    case EV_TYPE_BOOLEAN:
    case EV_TYPE_BOOLEAN8:
    case EV_TYPE_CHAR:
    case EV_TYPE_SBYTE:
    case EV_TYPE_BYTE:
    case EV_TYPE_INT16:
    case EV_TYPE_UINT16:
    case EV_TYPE_INT32:
    case EV_TYPE_UINT32:
    case EV_TYPE_INT64:
    case EV_TYPE_UINT64:
    case EV_TYPE_SINGLE:
    case EV_TYPE_DOUBLE:
    case EV_TYPE_DATETIME:
    case EV_TYPE_GUID:
        return true;
    default:
        return false;
    }
}

/* An array value (any of the four kinds): elements, a UTF-8 string, or hex. */
static int array_value(struct buf *out, const struct ev_schema *s, const struct ev_field *f,
                       const struct ev_value *v)
{
    const struct ev_field *e = &s->fields[f->child];
    if (e->code == EV_TYPE_UTF8_UNIT) {
        return ev_json_str_utf8(out, v->p, v->len);
    }
    if (!scalar_element(e) || (uint64_t)v->count * (uint32_t)e->size > v->len) {
        return hex_str(out, v->p, v->len);
    }
    int rc = buf_append(out, "[", 1);
    for (uint32_t k = 0; rc == 0 && k < v->count; k++) {
        if (k > 0) {
            rc = buf_append(out, ",", 1);
        }
        if (rc == 0) {
            rc = scalar(out, e->code, v->p + (size_t)k * (uint32_t)e->size, (uint32_t)e->size);
        }
    }
    return rc == 0 ? buf_append(out, "]", 1) : rc;
}

static int object_fields(struct buf *out, const struct ev_record *rec, uint16_t idx, bool *first);

static int field_value(struct buf *out, const struct ev_record *rec, uint16_t idx)
{
    const struct ev_schema *s = rec->schema;
    const struct ev_field *f = &s->fields[idx];
    const struct ev_value *v = &rec->v[idx];
    if (f->code == EV_TYPE_OBJECT) {
        bool first = true;
        int rc = buf_append(out, "{", 1);
        rc = rc == 0 ? object_fields(out, rec, idx, &first) : rc;
        return rc == 0 ? buf_append(out, "}", 1) : rc;
    }
    if (v->p == NULL) {
        return buf_append_str(out, "null");
    }
    switch (f->code) {
    case EV_TYPE_STRING:
        return str_utf16(out, v->p, v->count);
    case EV_TYPE_ARRAY:
    case EV_TYPE_FIXED_ARRAY:
    case EV_TYPE_RELLOC:
    case EV_TYPE_DATALOC:
        return array_value(out, s, f, v);
    default:
        return scalar(out, f->code, v->p, v->len);
    }
}

/* The fields of object node idx as "name":value pairs; unnamed objects are merged in. */
static int object_fields(struct buf *out, const struct ev_record *rec, uint16_t idx, bool *first)
{
    const struct ev_schema *s = rec->schema;
    const struct ev_field *o = &s->fields[idx];
    int rc = 0;
    for (uint16_t k = 0; rc == 0 && k < o->nchild; k++) {
        uint16_t c = (uint16_t)(o->child + k);
        const struct ev_field *f = &s->fields[c];
        if (f->code == EV_TYPE_OBJECT && f->name[0] == '\0') {
            rc = object_fields(out, rec, c, first);
            continue;
        }
        if (!*first) {
            rc = buf_append(out, ",", 1);
        }
        *first = false;
        rc = rc == 0 ? str_cstr(out, f->name) : rc;
        rc = rc == 0 ? buf_append(out, ":", 1) : rc;
        rc = rc == 0 ? field_value(out, rec, c) : rc;
    }
    return rc;
}

/* ---- native runtime events by their layouts (ev_native.h) ---------------------------------- */

/* A member's key, `,"Name":` (no comma before an object's first member), and room for a number
 * after it: the whole padded key copied at once (a fixed size), key_len bytes of it kept. */
static int member_key(struct buf *out, const struct ev_native_field *f, bool *first)
{
    int rc = room(out, EV_NATIVE_KEY_SIZE + NUM_MAX);
    if (rc != 0) {
        return rc;
    }
    size_t skip = *first ? 1 : 0; /* the comma */
    memcpy(out->p + out->len, f->key + skip, EV_NATIVE_KEY_SIZE - 1);
    out->len += f->key_len - skip;
    *first = false;
    return 0;
}

/* One value; room for a number (NUM_MAX) is there already. */
static int native_value(struct buf *out, uint8_t type, const struct ev_native_value *v)
{
    double d;
    uint64_t mag;
    switch (type) {
    case EV_NATIVE_I32:
    case EV_NATIVE_I64:
        mag = (int64_t)v->u < 0 ? (uint64_t)0 - v->u : v->u;
        out->len += put_num(out->p + out->len, mag, (int64_t)v->u < 0);
        return 0;
    case EV_NATIVE_BOOL:
        return buf_append_str(out, v->u != 0 ? "true" : "false");
    case EV_NATIVE_F64:
        memcpy(&d, &v->u, sizeof(d));
        return f64_num(out, d, false);
    case EV_NATIVE_GUID:
        return guid_str(out, v->p);
    case EV_NATIVE_WSTR:
        return str_utf16(out, v->p, v->count);
    case EV_NATIVE_BINARY:
        return hex_str(out, v->p, v->len);
    default: /* unsigned integers and pointers */
        out->len += put_num(out->p + out->len, v->u, false);
        return 0;
    }
}

struct native_json {
    struct buf *out;
    const struct ev_native_event *e;
    bool first[EV_NATIVE_MAX_DEPTH + 1]; /* no member written yet at this depth */
};

/* An array of structs (objects) rather than of one unnamed scalar. */
static bool struct_elements(const struct ev_native_field *f)
{
    return f->span != 1 || f[1].name[0] != '\0';
}

/* ev_native_walk's callback: the payload's members as they are read. */
static int native_json_step(void *ud, enum ev_native_step s, uint16_t idx, unsigned depth,
                            const struct ev_native_value *v)
{
    struct native_json *nj = ud;
    const struct ev_native_field *f = &nj->e->fields[idx];
    int rc = 0;
    switch (s) {
    case EV_NATIVE_FIELD: /* unnamed: an element of an array of scalars */
        rc =
            f->name[0] != '\0' ? member_key(nj->out, f, &nj->first[depth]) : room(nj->out, NUM_MAX);
        return rc == 0 ? native_value(nj->out, f->type, v) : rc;
    case EV_NATIVE_ARRAY_BEGIN:
        rc = member_key(nj->out, f, &nj->first[depth]);
        return rc == 0 ? buf_append(nj->out, "[", 1) : rc;
    case EV_NATIVE_ELEM_BEGIN:
        rc = v->count > 0 ? buf_append(nj->out, ",", 1) : 0;
        if (rc == 0 && struct_elements(f)) {
            nj->first[depth + 1] = true;
            rc = buf_append(nj->out, "{", 1);
        }
        return rc;
    case EV_NATIVE_ELEM_END:
        return struct_elements(f) ? buf_append(nj->out, "}", 1) : 0;
    default:
        return buf_append(nj->out, "]", 1);
    }
}

/* "payload":{...} by a native layout; 1 (nothing written) when the payload does not fit it. */
static int native_payload(struct buf *out, const struct ev_native_event *e,
                          const struct nettrace_event *ev, uint32_t ptr_size)
{
    size_t mark = buf_size(out);
    struct native_json nj = {out, e, {true, true, true}};
    int rc = buf_append_str(out, ",\"payload\":{");
    rc = rc == 0 ? ev_native_walk(e, ev->payload, ev->payload_len, ptr_size, native_json_step, &nj)
                 : rc;
    rc = rc == 0 ? buf_append(out, "}", 1) : rc;
    if (rc == AGENT_E_PROTO) {
        buf_truncate(out, mark);
        return 1;
    }
    return rc;
}

static int payload_hex(struct buf *out, const struct nettrace_event *ev)
{
    size_t n = ev->payload_len < EV_JSON_MAX_HEX ? ev->payload_len : EV_JSON_MAX_HEX;
    int rc = buf_append_str(out, ",\"payloadHex\":");
    rc = rc == 0 ? hex_str(out, ev->payload, n) : rc;
    if (rc == 0 && n < ev->payload_len) {
        rc = buf_append_str(out, ",\"payloadTruncated\":true");
    }
    return rc;
}

/* scratch: room for the decoded fields, or NULL to allocate it here; native: the event's native
 * layout or NULL. */
static int payload(struct buf *out, const struct ev_schema *s, const struct nettrace_event *ev,
                   struct ev_record *scratch, const struct ev_native_event *native,
                   uint32_t ptr_size)
{
    if (s != NULL && s->nfields > 1) {
        struct ev_record *rec = scratch != NULL ? scratch : malloc(sizeof(*rec));
        if (rec == NULL) {
            return -ENOMEM;
        }
        int rc = 1;
        size_t mark = buf_size(out);
        if (ev_record_decode(rec, s, ev->payload, ev->payload_len) == 0) {
            bool first = true;
            rc = buf_append_str(out, ",\"payload\":{");
            rc = rc == 0 ? object_fields(out, rec, 0, &first) : rc;
            rc = rc == 0 ? buf_append(out, "}", 1) : rc;
        }
        if (rec != scratch) {
            free(rec);
        }
        if (rc <= 0) {
            return rc;
        }
        buf_truncate(out, mark);
        return payload_hex(out, ev);
    }
    if (native != NULL) {
        int rc = native_payload(out, native, ev, ptr_size);
        if (rc <= 0) {
            return rc;
        }
    }
    if (ev->payload_len == 0) {
        return buf_append_str(out, ",\"payload\":{}");
    }
    return payload_hex(out, ev);
}

/* ---- one line ------------------------------------------------------------------------------- */

static int event_name(struct buf *out, const struct nettrace_event *ev,
                      const struct ev_native_event *native)
{
    if (ev->event_name[0] != '\0') {
        return str_cstr(out, ev->event_name);
    }
    if (native != NULL) {
        return str_cstr(out, native->name);
    }
    return buf_printf(out, "\"EventID(%" PRIu32 ")\"", ev->event_id);
}

/* ,"id":N,"version":N,"opcode":N,"keywords":"0x…","level":N */
static int event_ids(struct buf *out, const struct ev_schema *schema,
                     const struct nettrace_event *ev)
{
    char t[17];
    size_t nt = hex_u64(schema != NULL ? schema->keywords : 0u, t);
    t[nt++] = '"';
    int rc = buf_append_str(out, ",\"id\":");
    rc = rc == 0 ? u64_num(out, ev->event_id) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"version\":") : rc;
    rc = rc == 0 ? u64_num(out, ev->version) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"opcode\":") : rc;
    rc = rc == 0 ? u64_num(out, schema != NULL ? schema->opcode : 0u) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"keywords\":\"0x") : rc;
    rc = rc == 0 ? buf_append(out, t, nt) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"level\":") : rc;
    return rc == 0 ? u64_num(out, schema != NULL ? schema->level : 0u) : rc;
}

/* key: the member's text up to its value, for example ,"activityId": */
static int opt_guid(struct buf *out, const char *key, const uint8_t *g)
{
    int rc = buf_append_str(out, key);
    return rc != 0 ? rc : g != NULL ? guid_str(out, g) : buf_append_str(out, "null");
}

static int stack(struct buf *out, const struct nettrace_trace_info *ti,
                 const struct nettrace_event *ev)
{
    uint32_t ps = ti->pointer_size == 4 ? 4 : 8;
    int rc = buf_append_str(out, ",\"stack\":[");
    for (uint32_t at = 0; rc == 0 && at + ps <= ev->stack_len; at += ps) {
        uint64_t a = ps == 4 ? ev_load_u32(ev->stack + at) : ev_load_u64(ev->stack + at);
        char t[24]; /* ,"0x…" */
        size_t i = 0;
        if (at > 0) {
            t[i++] = ',';
        }
        t[i++] = '"';
        t[i++] = '0';
        t[i++] = 'x';
        i += hex_u64(a, t + i);
        t[i++] = '"';
        rc = buf_append(out, t, i);
    }
    return rc == 0 ? buf_append(out, "]", 1) : rc;
}

/* Reusable state of a converter; every member may be NULL (ev_json_render). */
struct render_ctx {
    struct ev_record *scratch;
    struct time_cache *tc;
    struct schema_slot *slot;
    struct ev_json *owner; /* charged for the slot's head; NULL: ev_json_render */
};

/* The native layout of an event without a field list, or NULL; resolved once per metadata id. */
static const struct ev_native_event *
native_of(const struct ev_schema *schema, const struct nettrace_event *ev, struct schema_slot *slot)
{
    if (schema != NULL && schema->nfields > 1) {
        return NULL; /* it describes its fields: decoded by them */
    }
    if (slot == NULL) {
        return ev_native_lookup(ev->provider, ev->event_id, ev->version);
    }
    if (!slot->native_known) {
        slot->native = ev_native_lookup(ev->provider, ev->event_id, ev->version);
        slot->native_known = true;
    }
    return slot->native;
}

/* ,"provider":…,"event":…,"id":…,"level":N: the same for every event of a metadata id, so kept
 * in its slot once rendered. */
static int event_head(struct buf *out, const struct ev_schema *schema,
                      const struct nettrace_event *ev, const struct render_ctx *cx,
                      const struct ev_native_event *native)
{
    struct schema_slot *slot = cx->owner != NULL ? cx->slot : NULL;
    if (slot != NULL && slot->head != NULL) {
        return buf_append(out, slot->head, slot->head_len);
    }
    size_t mark = buf_size(out);
    int rc = buf_append_str(out, ",\"provider\":");
    rc = rc == 0 ? str_cstr(out, ev->provider) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"event\":") : rc;
    rc = rc == 0 ? event_name(out, ev, native) : rc;
    rc = rc == 0 ? event_ids(out, schema, ev) : rc;
    if (rc == 0 && slot != NULL) {
        size_t n = buf_size(out) - mark;
        /* without it (no memory, or over the share), the next event renders it again */
        if (mem_take(cx->owner, n)) {
            slot->head = malloc(n);
            if (slot->head != NULL) {
                memcpy(slot->head, buf_data(out) + mark, n);
                slot->head_len = n;
            } else {
                mem_give(cx->owner, n);
            }
        }
    }
    return rc;
}

static int render(struct buf *out, const struct nettrace_trace_info *ti,
                  const struct ev_schema *schema, const struct nettrace_event *ev,
                  const struct render_ctx *cx)
{
    const struct ev_native_event *native = native_of(schema, ev, cx->slot);
    int rc = buf_append_str(out, "{\"timestamp\":");
    rc = rc == 0 ? event_time(out, ti, ev->timestamp, cx->tc) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"pid\":") : rc;
    rc = rc == 0 ? i64_num(out, ti->process_id) : rc;
    rc = rc == 0 ? buf_append_str(out, ",\"thread\":") : rc;
    rc = rc == 0 ? u64_num(out, ev->thread_id) : rc;
    rc = rc == 0 ? event_head(out, schema, ev, cx, native) : rc;
    rc = rc == 0 ? opt_guid(out, ",\"activityId\":", ev->activity_id) : rc;
    rc = rc == 0 ? opt_guid(out, ",\"relatedActivityId\":", ev->related_activity_id) : rc;
    if (rc == 0 && ev->stack != NULL && ev->stack_len > 0) {
        rc = stack(out, ti, ev);
    }
    rc = rc == 0 ? payload(out, schema, ev, cx->scratch, native, ti->pointer_size) : rc;
    return rc == 0 ? buf_append(out, "}\n", 2) : rc;
}

int ev_json_render(struct buf *out, const struct nettrace_trace_info *ti,
                   const struct ev_schema *schema, const struct nettrace_event *ev)
{
    struct render_ctx cx = {NULL, NULL, NULL, NULL};
    return render(out, ti, schema, ev, &cx);
}

/* ---- the converter -------------------------------------------------------------------------- */

/* A metadata id's definition ends (redefined, or the converter freed): its head goes. */
static void slot_release(void *ud, struct ev_schema_entry *e)
{
    struct ev_json *j = ud;
    struct schema_slot *slot = e->slot;
    free(slot->head);
    mem_give(j, slot->head_len);
}

static void on_metadata(void *ud, const struct nettrace_metadata *md, const uint8_t *p, size_t n)
{
    struct ev_json *j = ud;
    struct ev_schema_entry *e = NULL;
    /* A field list that does not parse, or over the share: its events go out as payloadHex. */
    int rc = ev_schemas_define(&j->schemas, md, p, n, &e);
    if (rc == AGENT_E_BUDGET) {
        j->dropped++;
    } else if (rc == -ENOMEM && j->err == 0) {
        j->err = -ENOMEM;
    }
}

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_json *j = ud;
    if (j->err != 0) {
        return;
    }
    if (!j->have_ti) {
        j->have_ti = nettrace_trace_info(&j->ck, &j->ti) == 0;
    }
    size_t mark = buf_size(&j->line);
    struct ev_schema_entry *e = ev_schemas_find(&j->schemas, ev->metadata_id);
    struct render_ctx cx = {&j->rec, &j->tc, e != NULL ? e->slot : NULL, j};
    int rc = render(&j->line, &j->ti, e != NULL ? e->schema : NULL, ev, &cx);
    if (rc != 0) {
        buf_truncate(&j->line, mark);
        j->err = rc;
        return;
    }
    if (buf_size(&j->line) >= j->batch) {
        rc = ev_json_flush(j);
        if (rc != 0) {
            return;
        }
    }
    j->lines++;
}

int ev_json_flush(struct ev_json *j)
{
    if (j->err == 0 && buf_size(&j->line) > 0) {
        int rc = j->cb(j->ud, (const char *)buf_data(&j->line), buf_size(&j->line));
        if (rc != 0) {
            j->err = rc;
        }
    }
    buf_reset(&j->line);
    return j->err;
}

int ev_json_set_share(struct ev_json *j, struct mb_share *share)
{
    if (j->held != 0 || ev_schemas_set_share(&j->schemas, share) != 0) {
        return AGENT_E_INVAL; /* charged elsewhere already */
    }
    j->share = share;
    return 0;
}

uint64_t ev_json_budget_dropped(const struct ev_json *j)
{
    return j->dropped;
}

uint64_t ev_json_held(const struct ev_json *j)
{
    return j->held + ev_schemas_held(&j->schemas);
}

void ev_json_set_batch(struct ev_json *j, size_t bytes)
{
    j->batch = bytes;
}

struct ev_json *ev_json_new(ev_json_line_cb cb, void *ud)
{
    struct ev_json *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return NULL;
    }
    struct nettrace_options opt = {0, 0, NETTRACE_KEEP_STACKS};
    if (nettrace_checker_init(&j->ck, &opt) != 0) {
        free(j);
        return NULL;
    }
    j->cb = cb;
    j->ud = ud;
    buf_init(&j->line, 0);
    nettrace_set_event_cb(&j->ck, on_event, j);
    nettrace_set_metadata_cb(&j->ck, on_metadata, j);
    struct ev_schemas_config cfg = {
        .slot_size = sizeof(struct schema_slot), .on_release = slot_release, .ud = j};
    ev_schemas_init(&j->schemas, &cfg);
    return j;
}

void ev_json_free(struct ev_json *j)
{
    if (j == NULL) {
        return;
    }
    nettrace_checker_fini(&j->ck);
    ev_schemas_fini(&j->schemas);
    buf_fini(&j->line);
    free(j);
}

int ev_json_feed(struct ev_json *j, const uint8_t *p, size_t n)
{
    if (j->err != 0) {
        return j->err;
    }
    int rc = nettrace_feed(&j->ck, p, n);
    return j->err != 0 ? j->err : rc;
}

enum nettrace_verdict ev_json_finish(struct ev_json *j)
{
    return nettrace_finish(&j->ck);
}

const struct nettrace_checker *ev_json_checker(const struct ev_json *j)
{
    return &j->ck;
}

uint64_t ev_json_lines(const struct ev_json *j)
{
    return j->lines;
}
