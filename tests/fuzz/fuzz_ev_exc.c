/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the history of first-chance exceptions (events/ev_exc.h) under hostile
 * payloads, stacks, limits and filter documents. An input is a header of HDR bytes (zeros when
 * short) and pieces cut at SEP:
 *  - the header picks the store's limits (max_instances 1..64, max_bytes 1..256 KiB, a share's
 *    cap from 4 bytes to 254 KiB or none), whether frames are named through an ev_symbols, which
 *    filters apply where, the error buffer's length, after_id, thread names and a sink that fails;
 *  - the first piece is an ExceptionsConfiguration document for ev_exc_filters_parse: 0 with the
 *    filters, or AGENT_E_INVAL with a message NUL-terminated within its buffer (not a byte past);
 *  - every other piece is one ExceptionThrown event for ev_exc_add: two control bytes (version
 *    0..3, pointer size 4, 8 or a bad one, the stack's kind and length 0..300, so past
 *    EV_EXC_MAX_FRAMES now and then, the time), then the raw payload; a stack's ips come from the
 *    piece's last bytes, mostly as addresses in and around the methods the ev_symbols knows (one
 *    named by the first event's type and message), the runtime's System.Runtime.EH among them.
 * After every add: the return code is one the header allows for what was passed, kept <=
 * max_instances, kept + evicted = added, and the share holds exactly the store's bytes (within its
 * cap). Then the history is written from after_id in the three formats, with or without the
 * request's filters and with or without the parsed filters as the store's (ev_exc_set_filters):
 * NDJSON lines are JSON objects that cJSON reads, valid UTF-8 without control characters, ids
 * rising within what is held (exactly those ids without filters), at most EV_EXC_MAX_FRAMES
 * frames and none only without a stack; the JSON-seq records are those lines, each after 0x1E
 * (now and then to a sink that fails: then its error); the text is bounded; the last id is the
 * newest looked at. ev_exc_write_groups' lines are JSON with counts that add up to at most the
 * instances added, its working memory given back; ev_exc_unnamed agrees with the stacks passed.
 * Every byte charged to the share (and to dotmon's total) is given back by ev_exc_free. The
 * writers' output is most of the time spent: a few hundred inputs a second. Seeds: gen-*
 * (make_seeds.c).
 */
#include "fuzz.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ev_exc.h"
#include "ev_symbols.h"
#include "membudget.h"
#include "utf8.h"

#define HDR        8u
#define SEP        "\xfe\xfe\xfe\xfe"
#define SEP_LEN    4u
#define MAX_EVENTS 200u
#define MAX_IPS    300u
#define T0         1796010311805635500ll /* 2026-11-30T03:45:11.8056355Z */
#define NAME_UNITS 80u                   /* of the input-named method's namespace and name */

/* The methods the ev_symbols knows: start, size 0x100, in module 1 (CoreLib) or 2 (TestApp). */
#define M_THROW  0x1000u /* App.Worker.Throw */
#define M_HELPER 0x2000u /* System.ThrowHelper.ThrowInvalidOperationException */
#define M_MAIN   0x3000u /* App.Program.Main */
#define M_ORPHAN 0x4000u /* Orphan: no namespace, no module */
#define M_EH     0x5000u /* System.Runtime.EH.RhThrowEx */
#define M_EH2    0x6000u /* System.Runtime.EH.DispatchEx */
#define M_INPUT  0x7000u /* named by the first event's payload */

/* A stack's compact ips: in, at the edges of and around the methods above. */
static const uint64_t ip_table[16] = {
    M_THROW + 0x10,
    M_HELPER + 0x10,
    M_MAIN + 0x10,
    M_ORPHAN + 0x10,
    M_EH + 0x10,
    M_EH2 + 0x10,
    M_INPUT + 0x10,
    0x9990,
    0x9998,
    M_THROW,
    M_THROW + 0xff,
    M_THROW + 0x100,
    0,
    UINT64_MAX,
    M_EH + 0x20,
    M_MAIN + 0x20,
};

/* A payload under construction, little-endian. */
struct wr {
    uint8_t b[1024];
    size_t n;
};

static void wr_le(struct wr *w, uint64_t v, size_t size)
{
    for (size_t i = 0; i < size && w->n < sizeof(w->b); i++) {
        w->b[w->n++] = (uint8_t)(v >> (8 * i));
    }
}

/* An ASCII string as NUL-terminated UTF-16LE. */
static void wr_wstr(struct wr *w, const char *s)
{
    for (; *s != '\0'; s++) {
        wr_le(w, (uint8_t)*s, 2);
    }
    wr_le(w, 0, 2);
}

/* units UTF-16LE units of p (as given, lone surrogates too), then the terminator. */
static void wr_units(struct wr *w, const uint8_t *p, size_t units)
{
    for (size_t i = 0; i < units; i++) {
        wr_le(w, (uint32_t)p[2 * i] | (uint32_t)p[2 * i + 1] << 8, 2);
    }
    wr_le(w, 0, 2);
}

/* The units of the NUL-terminated UTF-16LE string at p[*at..n), *at moved past it: false if
 * unterminated. */
static bool next_wstr(const uint8_t *p, size_t n, size_t *at, const uint8_t **s, size_t *units)
{
    *s = p + *at;
    for (size_t i = *at; i + 1 < n; i += 2) {
        if (p[i] == 0 && p[i + 1] == 0) {
            *units = (i - *at) / 2;
            *at = i + 2;
            return true;
        }
    }
    return false;
}

static void add_module(struct ev_symbols *s, uint64_t id, const char *il_path)
{
    struct wr w = {.n = 0};
    wr_le(&w, id, 8);
    wr_le(&w, id + 0x100, 8);
    wr_le(&w, 0x8, 4);
    wr_le(&w, 0, 4);
    wr_wstr(&w, il_path);
    wr_wstr(&w, "");
    wr_le(&w, 0, 2);
    CHECK(ev_symbols_add_module(s, w.b, w.n, 2) == 0);
}

static void method_head(struct wr *w, uint64_t module, uint64_t start)
{
    wr_le(w, 0x7f0000000000ull + start, 8);
    wr_le(w, module, 8);
    wr_le(w, start, 8);
    wr_le(w, 0x100, 4);
    wr_le(w, 0x06000000u + (uint32_t)(start >> 12), 4);
    wr_le(w, 0, 4);
}

static void add_method(struct ev_symbols *s, uint64_t module, uint64_t start, const char *ns,
                       const char *name)
{
    struct wr w = {.n = 0};
    method_head(&w, module, start);
    wr_wstr(&w, ns);
    wr_wstr(&w, name);
    wr_wstr(&w, "void  ()");
    wr_le(&w, 0, 2);
    wr_le(&w, 0, 8);
    CHECK(ev_symbols_add_method(s, w.b, w.n, 2) == 0);
}

/*
 * The fixed methods, and M_INPUT named by the type and message of payload (an ExceptionThrown_V1
 * one, read the same way; cut at NAME_UNITS units each), when it has them.
 */
static struct ev_symbols *symbols(const uint8_t *payload, size_t len)
{
    struct ev_symbols *s = NULL;
    if (ev_symbols_new(&s) != 0) {
        return NULL;
    }
    add_module(s, 1,
               "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/"
               "System.Private.CoreLib.dll");
    add_module(s, 2, "/app/TestApp.dll");
    add_method(s, 2, M_THROW, "App.Worker", "Throw");
    add_method(s, 1, M_HELPER, "System.ThrowHelper", "ThrowInvalidOperationException");
    add_method(s, 2, M_MAIN, "App.Program", "Main");
    add_method(s, 99, M_ORPHAN, "", "Orphan");
    add_method(s, 1, M_EH, "System.Runtime.EH", "RhThrowEx");
    add_method(s, 1, M_EH2, "System.Runtime.EH", "DispatchEx");
    const uint8_t *ns = NULL, *name = NULL;
    size_t ns_n = 0, name_n = 0, at = 0;
    if (payload != NULL && next_wstr(payload, len, &at, &ns, &ns_n) &&
        next_wstr(payload, len, &at, &name, &name_n)) {
        struct wr w = {.n = 0};
        method_head(&w, 2, M_INPUT);
        wr_units(&w, ns, ns_n < NAME_UNITS ? ns_n : NAME_UNITS);
        wr_units(&w, name, name_n < NAME_UNITS ? name_n : NAME_UNITS);
        wr_wstr(&w, "void  (int32)");
        wr_le(&w, 0, 2);
        wr_le(&w, 0, 8);
        CHECK(ev_symbols_add_method(s, w.b, w.n, 2) == 0);
    }
    return s;
}

/* ---- the sink and what it checks ---- */

struct sink {
    struct buf *b;     /* out, emptied */
    size_t fail_after; /* > 0: AGENT_E_CLOSED once more than this was handed over */
    size_t seen;
};

/*
 * What a write hands over, and the NDJSON write's lines (the JSON-seq write must be the same
 * records), kept from one write (and one input) to the next: megabytes at times.
 */
static struct buf out, ndjson;

static struct sink sink_open(size_t fail_after)
{
    static bool ready;
    if (!ready) {
        buf_init(&out, 0);
        buf_init(&ndjson, 0);
        ready = true;
    }
    buf_reset(&out);
    return (struct sink){.b = &out, .fail_after = fail_after};
}

static int sink_cb(void *ud, const uint8_t *p, size_t n)
{
    struct sink *s = ud;
    CHECK(p != NULL && n > 0);
    s->seen += n;
    if (s->fail_after > 0 && s->seen > s->fail_after) {
        return AGENT_E_CLOSED;
    }
    return buf_append(s->b, p, n);
}

/*
 * JSON text dotmon serves: valid UTF-8, no control characters (JSON escapes them). Megabytes at
 * times, byte by byte: not instrumented for coverage (the target's own code, where a sixth of the
 * time went otherwise).
 */
__attribute__((noinline, no_sanitize("coverage"))) static void check_text_json(const uint8_t *p,
                                                                               size_t n)
{
    for (size_t i = 0; i < n;) {
        if (p[i] >= 0x20 && p[i] < 0x80) {
            i++;
            continue;
        }
        uint32_t cp = 0;
        size_t len = 0;
        CHECK(utf8_decode(p + i, n - i, &cp, &len));
        CHECK(cp >= 0x20);
        i += len;
    }
}

/* One object: its text checked, then parsed. */
static cJSON *parse_object(const uint8_t *p, size_t n)
{
    check_text_json(p, n);
    cJSON *o = cJSON_ParseWithLength((const char *)p, n);
    CHECK(o != NULL && cJSON_IsObject(o));
    return o;
}

static double num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    CHECK(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void str(const cJSON *o, const char *name)
{
    CHECK(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, name)));
}

/* What the target knows of the store: every id's number of ips kept. */
struct model {
    uint32_t n_ips[MAX_EVENTS + 1];
    uint64_t added;
    uint64_t kept;
};

/* The first id a write from after_id looks at (past m->added: none). */
static uint64_t first_id(const struct model *m, uint64_t after_id)
{
    uint64_t oldest = m->added - m->kept + 1;
    if (after_id == UINT64_MAX) {
        return UINT64_MAX;
    }
    return after_id + 1 > oldest ? after_id + 1 : oldest;
}

/* One ExceptionInstance (NDJSON line or JSON-seq record); *prev: the id before it. */
static void check_instance(const struct model *m, const uint8_t *p, size_t n, uint64_t lo,
                           uint64_t *prev, bool exact)
{
    cJSON *o = parse_object(p, n);
    double idv = num(o, "id");
    CHECK(idv >= 1 && idv <= (double)m->added);
    uint64_t id = (uint64_t)idv;
    CHECK(id >= lo && id > *prev && (!exact || id == (*prev == 0 ? lo : *prev + 1)));
    *prev = id;
    str(o, "timestamp");
    str(o, "typeName");
    str(o, "message");
    const cJSON *stack = cJSON_GetObjectItemCaseSensitive(o, "stack");
    CHECK(cJSON_IsObject(stack));
    const cJSON *frames = cJSON_GetObjectItemCaseSensitive(stack, "frames");
    CHECK(cJSON_IsArray(frames));
    int nf = cJSON_GetArraySize(frames);
    uint32_t ips = m->n_ips[id];
    CHECK(nf >= 0 && (uint32_t)nf <= ips && (nf > 0) == (ips > 0));
    cJSON_Delete(o);
}

/* NDJSON or JSON-seq output of ev_exc_write from after_id (exact: every instance held). */
static void check_json_out(const struct model *m, const struct buf *b, bool seq, uint64_t after_id,
                           bool exact)
{
    const uint8_t *p = buf_data(b);
    size_t n = buf_size(b);
    uint64_t lo = first_id(m, after_id), prev = 0, count = 0;
    CHECK(n == 0 || p[n - 1] == '\n');
    for (size_t at = 0; at < n;) {
        if (seq) {
            CHECK(p[at] == 0x1e);
            at++;
        }
        const uint8_t *nl = memchr(p + at, '\n', n - at);
        CHECK(nl != NULL);
        size_t len = (size_t)(nl - (p + at));
        check_instance(m, p + at, len, lo, &prev, exact);
        count++;
        at += len + 1;
    }
    if (exact) {
        uint64_t want = m->added >= lo ? m->added - lo + 1 : 0;
        CHECK(count == want);
    }
}

/* A JSON-seq output that is the NDJSON write's lines, each after 0x1E. */
static void check_seq_is_ndjson(const struct buf *seq, const struct buf *lines)
{
    const uint8_t *p = buf_data(seq), *l = buf_data(lines);
    size_t n = buf_size(seq), ln = buf_size(lines), at = 0;
    for (size_t k = 0; k < ln;) {
        const uint8_t *nl = memchr(l + k, '\n', ln - k);
        CHECK(nl != NULL);
        size_t len = (size_t)(nl - (l + k)) + 1;
        CHECK(n - at >= len + 1 && p[at] == 0x1e && memcmp(p + at + 1, l + k, len) == 0);
        at += len + 1;
        k += len;
    }
    CHECK(at == n);
}

/* ev_exc_write_groups' lines. */
static void check_groups(const struct model *m, const struct buf *b, uint64_t groups)
{
    const uint8_t *p = buf_data(b);
    size_t n = buf_size(b);
    uint64_t lines = 0;
    double total = 0;
    CHECK(n == 0 || p[n - 1] == '\n');
    for (size_t at = 0; at < n;) {
        const uint8_t *nl = memchr(p + at, '\n', n - at);
        CHECK(nl != NULL);
        size_t len = (size_t)(nl - (p + at));
        cJSON *o = parse_object(p + at, len);
        str(o, "typeName");
        str(o, "throwSite");
        str(o, "lastTimestamp");
        double count = num(o, "count"), first = num(o, "firstId"), last = num(o, "lastId");
        CHECK(count >= 1 && first >= 1 && first <= last && last <= (double)m->added);
        total += count;
        cJSON_Delete(o);
        lines++;
        at += len + 1;
    }
    CHECK(lines <= groups && total <= (double)m->added);
}

/* ---- the run ---- */

struct run {
    struct ev_exc *x;
    struct mb_share *share;
    struct ev_symbols *sym;
    const struct ev_exc_filters *req; /* the request's filters (NULL: none) */
    bool names;                       /* a thread-name callback */
    uint64_t after_id;
    size_t fail_after;
    bool have_ndjson; /* ndjson holds the NDJSON write's output */
    struct model m;
};

static const char *thread_name(void *ud, uint64_t thread)
{
    static const char *const names[4] = {NULL, "", "worker \"1\"\n", "cut \xe2\x82"};
    (void)ud;
    return names[thread & 3];
}

static void check_stats(const struct run *r, size_t max_instances)
{
    struct ev_exc_stats st;
    ev_exc_get_stats(r->x, &st);
    CHECK(st.added == r->m.added && st.kept == r->m.kept);
    CHECK(st.kept <= max_instances && st.kept <= st.added);
    CHECK(st.kept + st.evicted == st.added);
    CHECK(st.groups <= EV_EXC_MAX_GROUPS);
    uint64_t used = atomic_load(&r->share->used);
    CHECK(used == st.bytes);
    CHECK(r->share->cap == 0 || used <= r->share->cap);
}

/* One event from piece p[0..n): what ev_exc_add answers must fit what was passed. */
static void add_one(struct run *r, const uint8_t *p, size_t n, size_t max_instances)
{
    uint8_t c0 = n > 0 ? p[0] : 0, c1 = n > 1 ? p[1] : 0;
    const uint8_t *payload = n > 2 ? p + 2 : p;
    size_t len = n > 2 ? n - 2 : 0;
    uint64_t hp = fuzz_fnv1a(p, n);
    size_t ptr = (c0 & 0xfc) == 0xfc ? 5 : (c0 & 4) ? 4 : 8;
    unsigned kind = c0 >> 3 & 3;
    size_t n_ips = kind == 0 ? 0 : c1 < 248 ? (c1 & 15u) : 244u + 8u * (c1 - 248u);
    n_ips = n_ips < MAX_IPS ? n_ips : MAX_IPS;
    static uint64_t ips[MAX_IPS];
    uint64_t s = hp | 1;
    for (size_t k = 0; k < n_ips; k++) {
        uint8_t byte = n > 0 ? p[n - 1 - k % n] : 0;
        ips[k] = kind == 1   ? ip_table[byte & 15]
                 : kind == 2 ? (k % 3 == 0 ? fuzz_xorshift(&s) : ip_table[(byte ^ k) & 15])
                             : ip_table[c1 & 15];
    }
    bool null_ips = n_ips > 0 && (c0 & 0xe0) == 0xe0;
    static const int64_t wild[4] = {INT64_MIN, INT64_MAX, 0, -1};
    int64_t ns = T0 + (int64_t)r->m.added * 1000000099ll;
    switch (c0 >> 6) {
    case 2:
        ns = (int64_t)hp;
        break;
    case 3:
        ns = wild[c1 & 3];
        break;
    default:
        break;
    }
    struct ev_exc_event e = {.unix_ns = ns,
                             .thread = hp >> 8 & 7,
                             .payload = payload,
                             .len = len,
                             .version = c0 & 3,
                             .pointer_size = ptr,
                             .ips = null_ips ? NULL : ips,
                             .n_ips = n_ips};
    struct ev_exc_stats before;
    ev_exc_get_stats(r->x, &before);
    int rc = ev_exc_add(r->x, &e);
    struct ev_exc_stats st;
    ev_exc_get_stats(r->x, &st);
    if (ptr == 5 || null_ips) {
        CHECK(rc == AGENT_E_INVAL);
    } else if (e.version == 0) {
        CHECK(rc == AGENT_E_PROTO);
    } else {
        CHECK(rc == 0 || rc == AGENT_E_PROTO || rc == AGENT_E_BUDGET || rc == -ENOMEM);
    }
    CHECK(st.malformed == before.malformed + (rc == AGENT_E_PROTO));
    CHECK(st.dropped == before.dropped + (rc == AGENT_E_BUDGET));
    if (rc == 0) {
        CHECK(st.added == before.added + 1 && st.kept >= 1);
        r->m.n_ips[st.added] = (uint32_t)(n_ips < EV_EXC_MAX_FRAMES ? n_ips : EV_EXC_MAX_FRAMES);
    } else {
        CHECK(st.added == before.added);
    }
    r->m.added = st.added;
    r->m.kept = st.kept;
    check_stats(r, max_instances);
}

/*
 * A write in fmt, its output checked; filtered: filters may leave instances out; fail_after > 0:
 * to a sink that fails once more than that was handed over (then the sink's error, or all of it).
 */
static void write_one(struct run *r, enum ev_exc_format fmt, const struct ev_exc_filters *req,
                      bool filtered, size_t fail_after)
{
    struct sink k = sink_open(fail_after);
    uint64_t last = 12345;
    int rc = ev_exc_write(r->x, r->sym, req != NULL ? req->include : NULL,
                          req != NULL ? req->ninclude : 0, req != NULL ? req->exclude : NULL,
                          req != NULL ? req->nexclude : 0, fmt, r->after_id, &last,
                          r->names ? thread_name : NULL, NULL, sink_cb, &k);
    CHECK(rc == 0 || rc == -ENOMEM || (fail_after > 0 && rc == AGENT_E_CLOSED));
    CHECK(rc != AGENT_E_CLOSED || k.seen > fail_after);
    CHECK(rc != 0 || fail_after == 0 || k.seen <= fail_after);
    CHECK(rc == 0 || last == 12345);
    if (rc == 0) {
        uint64_t lo = first_id(&r->m, r->after_id);
        CHECK(last == (r->m.kept > 0 && lo <= r->m.added ? r->m.added : r->after_id));
        if (fmt == EV_EXC_TEXT) {
            /* a type and a message cut, frames of names cut at EV_SYMBOLS_MAX_NAME */
            size_t per = 64 + 2 * (EV_EXC_MAX_STRING + 16) +
                         EV_EXC_MAX_FRAMES * (16 + 3 * (EV_SYMBOLS_MAX_NAME + 16));
            CHECK(buf_size(k.b) <= r->m.kept * per);
        } else if (fmt == EV_EXC_JSON_SEQ && r->have_ndjson) {
            check_seq_is_ndjson(k.b, &ndjson);
        } else {
            check_json_out(&r->m, k.b, fmt == EV_EXC_JSON_SEQ, r->after_id, !filtered);
        }
    }
    if (fmt == EV_EXC_NDJSON) {
        /* the same instances, filters and names: the JSON-seq write is checked against them */
        buf_reset(&ndjson);
        r->have_ndjson = rc == 0 && buf_append(&ndjson, buf_data(k.b), buf_size(k.b)) == 0;
    }
}

static void write_groups(struct run *r)
{
    struct sink k = sink_open(0);
    int rc = ev_exc_write_groups(r->x, r->sym, sink_cb, &k);
    CHECK(rc == 0 || rc == -ENOMEM || rc == AGENT_E_BUDGET);
    struct ev_exc_stats st;
    ev_exc_get_stats(r->x, &st);
    if (rc == 0) {
        check_groups(&r->m, k.b, st.groups);
    }
    /* the lines' working memory is given back */
    CHECK(atomic_load(&r->share->used) == st.bytes);
}

/* ev_exc_unnamed through sym NULL: every instance from after_id with a stack. */
static void check_unnamed(struct run *r)
{
    size_t n = 99999, want = 0;
    CHECK(ev_exc_unnamed(r->x, NULL, r->after_id, &n) == 0);
    for (uint64_t id = first_id(&r->m, r->after_id); id <= r->m.added; id++) {
        want += r->m.n_ips[id] > 0;
    }
    CHECK(n == want);
    if (r->sym != NULL) {
        size_t named = 99999;
        int rc = ev_exc_unnamed(r->x, r->sym, r->after_id, &named);
        CHECK(rc == 0 || rc == -ENOMEM || rc == AGENT_E_BUDGET);
        CHECK(rc != 0 || named <= want);
    }
}

/* The next piece of data[*at..size) up to SEP (or the end). */
static bool next_piece(const uint8_t *data, size_t size, size_t *at, const uint8_t **p, size_t *n)
{
    if (*at > size) {
        return false;
    }
    *p = data + *at;
    size_t left = size - *at;
    size_t k = 0;
    while (k + SEP_LEN <= left && memcmp(*p + k, SEP, SEP_LEN) != 0) {
        k++;
    }
    *n = k + SEP_LEN <= left ? k : left;
    *at += *n + SEP_LEN; /* past the end when there is no SEP: the last piece */
    return true;
}

/* The filter document: parsed filters or NULL; a refusal's message within errlen. */
static struct ev_exc_filters *parse_filters(const uint8_t *p, size_t n, size_t errlen)
{
    char err[160];
    memset(err, 0x7f, sizeof(err));
    struct ev_exc_filters *f = NULL;
    int rc = ev_exc_filters_parse((const char *)p, n, &f, err, errlen);
    CHECK(rc == 0 || rc == AGENT_E_INVAL || rc == -ENOMEM);
    for (size_t i = errlen; i < sizeof(err); i++) {
        CHECK(err[i] == 0x7f);
    }
    if (rc == AGENT_E_INVAL) {
        CHECK(memchr(err, '\0', errlen) != NULL);
        CHECK(errlen == 1 || err[0] != '\0');
    }
    if (rc != 0) {
        return NULL;
    }
    CHECK(f != NULL);
    CHECK(f->ninclude == 0 || f->include != NULL);
    CHECK(f->nexclude == 0 || f->exclude != NULL);
    for (size_t i = 0; i < f->ninclude + f->nexclude; i++) {
        const struct ev_exc_filter *e =
            i < f->ninclude ? &f->include[i] : &f->exclude[i - f->ninclude];
        const char *v[4] = {e->exception_type, e->type_name, e->method_name, e->module_name};
        for (size_t k = 0; k < 4; k++) {
            CHECK(v[k] == NULL || strlen(v[k]) <= n);
        }
    }
    return f;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t h[HDR] = {0};
    memcpy(h, data, size < HDR ? size : HDR);
    size_t at = size < HDR ? size : HDR;
    size_t max_instances = 1 + h[0] % 64u;
    /* 1 KiB … 256 KiB, as many small as large: the writers' work grows with it */
    size_t max_bytes = (1024 + (size_t)h[2] * 4) << (h[1] % 9);
    max_bytes = max_bytes < 256 * 1024 ? max_bytes : 256 * 1024;
    uint64_t cap = h[3] == 0 ? 0 : (uint64_t)h[3] * h[3] * 4;
    bool use_sym = h[4] & 1, store_filters = h[4] & 2, req_filters = h[4] & 4;
    bool failing = h[4] & 8;
    size_t errlen = 1 + (size_t)(h[4] >> 4) * 9; /* 1 … 136 */
    uint64_t after_id = h[5] < 128 ? 0 : h[5] == 255 ? UINT64_MAX : h[5] - 128u;
    uint64_t total_before = membudget_used();

    const uint8_t *p = NULL;
    size_t n = 0;
    struct ev_exc_filters *filters = NULL;
    if (next_piece(data, size, &at, &p, &n)) {
        filters = parse_filters(p, n, errlen);
    }
    size_t events_at = at;

    struct mb_share share;
    mb_share_init(&share, "fuzz_ev_exc", cap);
    static struct run r;
    memset(&r, 0, sizeof(r));
    r.share = &share;
    r.names = h[6] & 1;
    r.after_id = after_id;
    r.fail_after = 1 + (size_t)h[7] * 64;
    struct ev_exc_limits lim = {
        .max_instances = max_instances, .max_bytes = max_bytes, .share = &share};
    int rc = ev_exc_new(&lim, &r.x);
    CHECK(rc == 0 || rc == AGENT_E_BUDGET || rc == -ENOMEM);
    CHECK(rc != AGENT_E_BUDGET || cap > 0);
    if (rc != 0) {
        CHECK(atomic_load(&share.used) == 0);
        goto out;
    }
    check_stats(&r, max_instances);
    if (use_sym) {
        const uint8_t *first = NULL;
        size_t first_n = 0, a = events_at;
        bool any = next_piece(data, size, &a, &first, &first_n) && first_n > 2;
        r.sym = symbols(any ? first + 2 : NULL, any ? first_n - 2 : 0);
    }
    for (size_t i = 0; i < MAX_EVENTS && next_piece(data, size, &at, &p, &n); i++) {
        add_one(&r, p, n, max_instances);
    }

    /* The store's filters (header) apply to every write and to the groups. */
    const struct ev_exc_filters *req = req_filters ? filters : NULL;
    bool kept = store_filters && filters != NULL;
    if (kept) {
        ev_exc_set_filters(r.x, filters);
    }
    bool filtered = req != NULL || kept;
    write_one(&r, EV_EXC_NDJSON, req, filtered, 0);
    write_one(&r, EV_EXC_JSON_SEQ, req, filtered, failing ? r.fail_after : 0);
    write_one(&r, EV_EXC_TEXT, req, filtered, 0);
    CHECK(ev_exc_write(r.x, NULL, NULL, 0, NULL, 0, (enum ev_exc_format)3, 0, NULL, NULL, NULL,
                       sink_cb, NULL) == AGENT_E_INVAL);
    write_groups(&r);
    check_unnamed(&r);
    check_stats(&r, max_instances);
    ev_exc_free(r.x);
    CHECK(atomic_load(&share.used) == 0);
out:
    mb_share_fini(&share);
    ev_symbols_free(r.sym);
    ev_exc_filters_free(filters);
    CHECK(membudget_used() == total_before);
    return 0;
}
