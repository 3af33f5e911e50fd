/* SPDX-License-Identifier: MIT */
/* GET /stacks' answer from a sampled session; see ev_stacks.h. */
#include "ev_stacks.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ev_json.h"

#define OUT_BATCH         (256u * 1024u) /* handed to the sink in pieces of about this size */
#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"
#define FRAME_NATIVE      0u /* speedscope: shared frame 0 (1 is UnknownClass), as dotnet-monitor */

struct wr {
    struct ev_symbols *s;
    const struct ev_stacks_opts *o;
    struct ev_stacks_counts n;
    ev_symbols_sink_cb sink;
    void *ud;
    struct buf b;    /* the output not yet handed to the sink (about OUT_BATCH at most) */
    struct buf name; /* one frame's "module!type.method" (EV_SYMBOLS_MAX_NAME bounds it) */
    size_t charged;  /* bytes of the tables below, charged to s's share */
    char *names;     /* speedscope: the shared frames' names, NUL-terminated */
    size_t names_len, names_cap;
    uint32_t *offs; /* speedscope: frame index -> offset in names */
    size_t nframes, cap_frames;
    uint32_t *table;  /* speedscope: open addressing over the names, frame index + 1 */
    size_t table_cap; /* a power of two, or 0 */
    uint32_t *stack;  /* speedscope: one thread's frame indices, leaf first */
    size_t cap_stack;
};

static int flush(struct wr *w, bool force)
{
    if (buf_size(&w->b) == 0 || (!force && buf_size(&w->b) < OUT_BATCH)) {
        return 0;
    }
    int rc = w->sink(w->ud, buf_data(&w->b), buf_size(&w->b));
    buf_reset(&w->b);
    return rc;
}

/* Grows *p (elements of elem bytes) to hold need, doubling, charged to the symbols' share
 * first: 0, AGENT_E_BUDGET or -ENOMEM (*p and *cap unchanged). */
static int w_grow(struct wr *w, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t ncap = *cap != 0 ? *cap * 2 : 64;
    while (ncap < need) {
        ncap *= 2;
    }
    size_t more = (ncap - *cap) * elem;
    if (ev_symbols_charge(w->s, more) != 0) {
        return AGENT_E_BUDGET;
    }
    void *np = realloc(*p, ncap * elem);
    if (np == NULL) {
        ev_symbols_release(w->s, more);
        return -ENOMEM;
    }
    w->charged += more;
    *p = np;
    *cap = ncap;
    return 0;
}

/* The thread's header, as dotnet-monitor's "Thread: (0x{id:X})" then " name" when it has one. */
static int thread_header(struct wr *w, struct buf *out, uint64_t thread)
{
    const char *name = w->o->thread_name != NULL ? w->o->thread_name(w->o->name_ud, thread) : NULL;
    int rc = buf_printf(out, "Thread: (0x%llX)", (unsigned long long)thread);
    if (rc == 0 && name != NULL && name[0] != '\0') {
        rc = buf_printf(out, " %s", name);
    }
    return rc;
}

void ev_stacks_frame_shown(const struct ev_symbols_frame *f, struct ev_symbols_frame *out)
{
    *out = *f;
    if (!f->known) {
        *out = (struct ev_symbols_frame){.type = EV_STACKS_NATIVE_FRAME,
                                         .type_len = sizeof(EV_STACKS_NATIVE_FRAME) - 1,
                                         .method = EV_STACKS_NATIVE_FRAME,
                                         .method_len = sizeof(EV_STACKS_NATIVE_FRAME) - 1,
                                         .module = EV_STACKS_NATIVE_FRAME,
                                         .module_ext = ""};
        return;
    }
    if (f->type_len == 0) {
        out->type = EV_STACKS_UNKNOWN_CLASS;
        out->type_len = sizeof(EV_STACKS_UNKNOWN_CLASS) - 1;
    }
    if (f->module == NULL) {
        out->module = EV_STACKS_UNKNOWN_MODULE;
        out->module_ext = "";
    }
}

int ev_stacks_frame_text(struct buf *b, const struct ev_symbols_frame *f)
{
    if (!f->known) {
        return buf_append_str(b, EV_STACKS_NATIVE_FRAME);
    }
    struct ev_symbols_frame s; /* the names the JSON shows: UnknownClass, UnknownModule */
    ev_stacks_frame_shown(f, &s);
    int rc = buf_printf(b, "%s%s!", s.module, s.module_ext);
    rc = rc != 0 ? rc : buf_append(b, s.type, s.type_len);
    rc = rc != 0 ? rc : buf_append(b, ".", 1);
    return rc != 0 ? rc : buf_append(b, s.method, s.method_len);
}

/* dotnet-monitor's CallStackFrame: methodName, methodToken, [parameterTypes,] typeName,
 * moduleName, moduleVersionId, hidden (its property order). */
int ev_stacks_json_frame(struct buf *b, const struct ev_symbols_frame *f, bool first,
                         bool parameter_types)
{
    struct ev_symbols_frame s;
    ev_stacks_frame_shown(f, &s);
    int rc = buf_append_str(b, first ? "{\"methodName\":" : ",{\"methodName\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(b, (const uint8_t *)s.method, s.method_len);
    rc = rc != 0 ? rc : buf_printf(b, ",\"methodToken\":%u", s.token);
    if (rc == 0 && parameter_types) {
        rc = buf_append_str(b, ",\"parameterTypes\":[]");
    }
    rc = rc != 0 ? rc : buf_append_str(b, ",\"typeName\":");
    rc = rc != 0 ? rc : ev_json_str_utf8(b, (const uint8_t *)s.type, s.type_len);
    rc = rc != 0 ? rc : buf_append_str(b, ",\"moduleName\":\"");
    rc = rc != 0 ? rc : buf_append_json_escaped(b, s.module);
    rc = rc != 0 ? rc : buf_append_str(b, s.module_ext);
    return rc != 0 ? rc
                   : buf_append_str(b, "\",\"moduleVersionId\":\"" EV_STACKS_EMPTY_GUID
                                       "\",\"hidden\":false}");
}

/*
 * A run of addresses in no method (native code, stubs: EventPipe walks them as it finds them) is
 * one frame, as dotnet-monitor shows native frames once: the frame before decides.
 */
int ev_stacks_frames(struct ev_symbols *s, const uint64_t *ips, size_t n, ev_stacks_frame_cb cb,
                     void *ud, size_t *nframes)
{
    size_t k = 0;
    bool native = false; /* the frame before was native */
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct ev_symbols_frame f = {.type = "", .method = "", .module_ext = ""};
        rc = s != NULL ? ev_symbols_frame_of(s, ips[i], &f) : AGENT_E_NOTFOUND;
        rc = rc == AGENT_E_NOTFOUND ? 0 : rc;
        if (rc != 0 || (!f.known && native)) {
            continue;
        }
        native = !f.known;
        rc = cb(ud, &f, k++);
    }
    if (nframes != NULL) {
        *nframes = k;
    }
    return rc;
}

static uint64_t hash_str(const char *p)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *p != '\0'; p++) {
        h = (h ^ (uint8_t)*p) * 0x100000001b3ull;
    }
    return h;
}

static const char *shared_name(const struct wr *w, uint32_t frame)
{
    return w->names + w->offs[frame];
}

/* The open-addressing table rebuilt at ncap slots (charged; the old one given back). */
static int shared_rehash(struct wr *w, size_t ncap)
{
    if (ev_symbols_charge(w->s, ncap * sizeof(uint32_t)) != 0) {
        return AGENT_E_BUDGET;
    }
    uint32_t *t = calloc(ncap, sizeof(*t));
    if (t == NULL) {
        ev_symbols_release(w->s, ncap * sizeof(uint32_t));
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < w->nframes; i++) {
        size_t h = (size_t)hash_str(shared_name(w, i)) & (ncap - 1);
        while (t[h] != 0) {
            h = (h + 1) & (ncap - 1);
        }
        t[h] = i + 1;
    }
    free(w->table);
    ev_symbols_release(w->s, w->table_cap * sizeof(uint32_t));
    w->table = t;
    w->table_cap = ncap;
    return 0;
}

/* Adds name to the shared frames (once); its index in *out. */
static int shared_add(struct wr *w, const char *name, uint32_t *out)
{
    int rc = (w->nframes + 1) * 2 > w->table_cap
                 ? shared_rehash(w, w->table_cap != 0 ? w->table_cap * 2 : 256)
                 : 0;
    if (rc != 0) {
        return rc;
    }
    size_t mask = w->table_cap - 1;
    size_t h = (size_t)hash_str(name) & mask;
    for (; w->table[h] != 0; h = (h + 1) & mask) {
        if (strcmp(shared_name(w, w->table[h] - 1), name) == 0) {
            *out = w->table[h] - 1;
            return 0;
        }
    }
    size_t len = strlen(name) + 1;
    rc = w_grow(w, (void **)&w->offs, &w->cap_frames, w->nframes + 1, sizeof(*w->offs));
    rc = rc != 0 ? rc : w_grow(w, (void **)&w->names, &w->names_cap, w->names_len + len, 1);
    if (rc != 0) {
        return rc;
    }
    memcpy(w->names + w->names_len, name, len);
    w->offs[w->nframes] = (uint32_t)w->names_len;
    w->names_len += len;
    w->table[h] = (uint32_t)w->nframes + 1;
    *out = (uint32_t)w->nframes++;
    return 0;
}

/* One speedscope profile: w->stack[0..n) (leaf first) opened root first, closed leaf first. */
static int speedscope_profile(struct wr *w, uint64_t thread, size_t n)
{
    int rc = buf_append_str(&w->b, w->n.threads > 0 ? ",{\"type\":\"evented\",\"name\":"
                                                    : "{\"type\":\"evented\",\"name\":");
    struct buf head;
    buf_init(&head, 0);
    rc = rc != 0 ? rc : thread_header(w, &head, thread);
    /* a kernel thread name may be cut inside a UTF-8 sequence: made valid */
    rc = rc != 0 ? rc : ev_json_str_utf8(&w->b, buf_data(&head), buf_size(&head));
    buf_fini(&head);
    rc = rc != 0 ? rc
                 : buf_append_str(&w->b, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":1,"
                                         "\"events\":[");
    for (size_t k = n; rc == 0 && k > 0; k--) {
        rc = buf_printf(&w->b, "%s{\"type\":\"O\",\"frame\":%u,\"at\":0}", k == n ? "" : ",",
                        w->stack[k - 1]);
    }
    for (size_t k = 0; rc == 0 && k < n; k++) {
        rc = buf_printf(&w->b, ",{\"type\":\"C\",\"frame\":%u,\"at\":1}", w->stack[k]);
    }
    return rc != 0 ? rc : buf_append_str(&w->b, "]}");
}

/* A thread's header in the chosen format. */
static int begin_thread(struct wr *w, uint64_t thread)
{
    if (w->o->format == EV_STACKS_TEXT) {
        int rc = thread_header(w, &w->b, thread);
        return rc != 0 ? rc : buf_append(&w->b, "\n", 1);
    }
    if (w->o->format != EV_STACKS_JSON) {
        return 0;
    }
    const char *name = w->o->thread_name != NULL ? w->o->thread_name(w->o->name_ud, thread) : NULL;
    name = name != NULL ? name : "";
    int rc = buf_printf(&w->b, "%s{\"threadId\":%llu,\"threadName\":", w->n.threads > 0 ? "," : "",
                        (unsigned long long)thread);
    /* a kernel thread name may be cut inside a UTF-8 sequence: made valid */
    rc = rc != 0 ? rc : ev_json_str_utf8(&w->b, (const uint8_t *)name, strlen(name));
    return rc != 0 ? rc : buf_append_str(&w->b, ",\"frames\":[");
}

/* One frame of the thread (its k-th written) in the chosen format. */
static int put_frame(void *ud, const struct ev_symbols_frame *f, size_t k)
{
    struct wr *w = ud;
    if (w->o->format == EV_STACKS_JSON) {
        return ev_stacks_json_frame(&w->b, f, k == 0, false);
    }
    buf_reset(&w->name);
    int rc = ev_stacks_frame_text(&w->name, f);
    if (rc != 0) {
        return rc;
    }
    if (w->o->format == EV_STACKS_TEXT) {
        rc = buf_append_str(&w->b, "  ");
        rc = rc != 0 ? rc : buf_append(&w->b, buf_data(&w->name), buf_size(&w->name));
        return rc != 0 ? rc : buf_append(&w->b, "\n", 1);
    }
    uint32_t idx = FRAME_NATIVE;
    rc = f->known ? shared_add(w, buf_cstr(&w->name), &idx) : 0;
    rc = rc != 0 ? rc : w_grow(w, (void **)&w->stack, &w->cap_stack, k + 1, sizeof(*w->stack));
    if (rc == 0) {
        w->stack[k] = idx;
    }
    return rc;
}

static int on_thread(void *ud, uint64_t thread, bool external, const uint64_t *ips, size_t n)
{
    struct wr *w = ud;
    (void)external; /* a blocked thread's stack is as much its stack */
    int rc = begin_thread(w, thread);
    size_t k = 0;
    rc = rc != 0 ? rc : ev_stacks_frames(w->s, ips, n, put_frame, w, &k);
    if (rc == 0 && w->o->format == EV_STACKS_JSON) {
        rc = buf_append_str(&w->b, "]}");
    } else if (rc == 0 && w->o->format == EV_STACKS_TEXT) {
        rc = buf_append(&w->b, "\n", 1);
    } else if (rc == 0) {
        rc = speedscope_profile(w, thread, k);
    }
    w->n.threads++;
    w->n.frames += k;
    return rc != 0 ? rc : flush(w, false);
}

/* speedscope's end: the shared frames, after the profiles that named them. */
static int speedscope_end(struct wr *w)
{
    int rc = buf_append_str(&w->b, "],\"shared\":{\"frames\":[");
    for (uint32_t i = 0; rc == 0 && i < w->nframes; i++) {
        rc = buf_append_str(&w->b, i > 0 ? ",{\"name\":\"" : "{\"name\":\"");
        rc = rc != 0 ? rc : buf_append_json_escaped(&w->b, shared_name(w, i));
        rc = rc != 0 ? rc : buf_append_str(&w->b, "\"}");
        rc = rc != 0 ? rc : flush(w, false);
    }
    return rc != 0 ? rc : buf_append_str(&w->b, "]}}\n");
}

int ev_stacks_write(struct ev_symbols *s, const struct ev_stacks_opts *opts,
                    struct ev_stacks_counts *counts, ev_symbols_sink_cb sink, void *ud)
{
    struct wr w = {.s = s, .o = opts, .sink = sink, .ud = ud};
    buf_init(&w.b, 0);
    buf_init(&w.name, 0);
    uint32_t idx = 0;
    int rc = 0;
    if (opts->format == EV_STACKS_JSON) {
        rc = buf_append_str(&w.b, "{\"stacks\":[");
    } else if (opts->format == EV_STACKS_SPEEDSCOPE) {
        rc = buf_append_str(&w.b, "{\"exporter\":\"dotmon\",\"name\":\"speedscope.json\","
                                  "\"activeProfileIndex\":0,\"$schema\":\"" SPEEDSCOPE_SCHEMA
                                  "\",\"profiles\":[");
        rc = rc != 0 ? rc : shared_add(&w, EV_STACKS_NATIVE_FRAME, &idx);
        rc = rc != 0 ? rc : shared_add(&w, EV_STACKS_UNKNOWN_CLASS, &idx);
    }
    rc = rc != 0 ? rc : ev_symbols_first_stacks(s, on_thread, &w);
    if (rc == 0 && opts->format == EV_STACKS_JSON) {
        rc = buf_append_str(&w.b, "]}\n");
    } else if (rc == 0 && opts->format == EV_STACKS_SPEEDSCOPE) {
        rc = speedscope_end(&w);
    }
    rc = rc != 0 ? rc : flush(&w, true);
    if (counts != NULL) {
        *counts = w.n;
    }
    buf_fini(&w.b);
    buf_fini(&w.name);
    free(w.names);
    free(w.offs);
    free(w.table);
    free(w.stack);
    ev_symbols_release(s, w.charged + w.table_cap * sizeof(uint32_t));
    return rc;
}
