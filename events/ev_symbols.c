/* SPDX-License-Identifier: MIT */
/* CPU samples with their stacks named, as speedscope JSON; see ev_symbols.h. */
#include "ev_symbols.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "buf.h"
#include "err.h"
#include "ev_rd.h"
#include "ev_store.h"
#include "membudget.h"
#include "nettrace.h"
#include "utf8.h"

#define RUNTIME_PROVIDER  "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN_PROVIDER  "Microsoft-Windows-DotNETRuntimeRundown"
#define SAMPLER_PROVIDER  "Microsoft-DotNETCore-SampleProfiler"
#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

/* Event ids (docs/events.md §6.1). */
#define EV_RUNTIME_METHOD_LOAD_VERBOSE 143
#define EV_RUNTIME_MODULE_LOAD         152
#define EV_RUNDOWN_METHOD_DCSTART_VERB 143
#define EV_RUNDOWN_METHOD_DCEND_VERB   144
#define EV_RUNDOWN_MODULE_DCSTART      153
#define EV_RUNDOWN_MODULE_DCEND        154

#define DEFAULT_SAMPLING_NS 1000000
#define SAMPLE_EXTERNAL     1u
#define OUT_BATCH           (1024u * 1024u) /* JSON is handed to the sink in ~1 MB pieces */
#define NO_FRAME            UINT32_MAX
#define MAX_NAMES           (1024u * 1024u * 1024u) /* bytes of names kept */

/*
 * Memory: a method range is 32 bytes plus its name once; a sample is 24 bytes; a stack is stored
 * once however many samples share it (a busy loop's thousands of samples share a few stacks), as
 * 4-byte indices into the distinct addresses (a few thousand: the code that ran), which are
 * also what gets resolved to frames. A long profile costs about 24 bytes per sample plus 4 per
 * frame of each distinct stack.
 */
struct method {
    uint64_t start;
    uint64_t module_id;
    uint32_t size;
    uint32_t seq;    /* arrival order: the later of two overlapping ranges wins */
    uint32_t name;   /* "Namespace.Method(args)" in the names arena */
    uint32_t token;  /* MethodToken */
    uint16_t ns_len; /* bytes of Namespace in name (0: none) */
    uint16_t nm_len; /* bytes of Method in name, after "Namespace." */
};

struct module {
    uint64_t id;
    uint32_t seq;
    uint32_t name; /* file name without directory and extension, in the names arena */
    uint8_t ext;   /* the extension taken off: 0 none, 1 ".dll", 2 ".exe" */
};

struct sample {
    uint64_t thread;
    int64_t ts;
    uint32_t stack : 31;   /* stacks are fewer than EV_SYMBOLS_MAX_SAMPLES (2^28) */
    uint32_t external : 1; /* SampleProfiler's External: the thread was not in managed code */
    uint32_t order;
};

struct stack {
    uint32_t at; /* its first address index in ips */
    uint32_t n;
};

struct ev_symbols {
    struct nettrace_checker ck;
    struct buf names; /* NUL-terminated strings, addressed by offset */
    struct method *methods;
    size_t nmethods, cap_methods;
    uint64_t *maxend; /* maxend[i]: the largest range end among sorted methods[0..i] */
    bool sorted;
    struct module *modules;
    size_t nmodules, cap_modules;
    struct sample *samples;
    size_t nsamples, cap_samples;
    struct stack *stacks;
    size_t nstacks, cap_stacks;
    uint32_t *ips; /* the stacks' frames, as indices into addrs */
    size_t nips, cap_ips;
    uint64_t *addrs; /* distinct addresses, in the order first seen */
    size_t naddrs, cap_addrs;
    uint32_t *addr_table; /* open addressing: addrs index + 1, 0 = empty */
    size_t addr_table_cap;
    uint32_t *stack_table; /* open addressing: stack index + 1, 0 = empty */
    size_t table_cap;
    uint64_t *scratch; /* one event's stack as u64 */
    size_t cap_scratch;
    uint32_t *scratch_idx; /* the same as addrs indices */
    size_t cap_scratch_idx;
    /* Frames, built when writing. */
    uint32_t *method_frame; /* per sorted method, its frame or NO_FRAME */
    uint32_t *frames;       /* frame name offsets in the names arena */
    size_t nframes, cap_frames;
    uint32_t *frame_table; /* open addressing: frame index + 1 */
    size_t frame_table_cap;
    ev_symbols_event_cb hook; /* every event, after ours (ev_symbols_set_event_cb) */
    void *hook_ud;
    int32_t sampling_ns;
    int64_t qpc_origin, qpc_freq;
    bool clock_set;
    struct ev_symbols_stats st;
    bool finished;
    int verdict_rc;
    struct mb_share *share; /* borrowed (ev_symbols_set_share); NULL: dotmon's total only */
    uint64_t held;          /* bytes charged now: every table, the names, the write's temporaries */
    size_t cap_index;       /* elements of maxend and method_frame */
    int fail; /* an event the stream callback could not keep for want of memory or room */
    int err;
    char msg[256];
};

/* Charges n bytes to the share before they are allocated: 0 or AGENT_E_BUDGET. */
static int charge(struct ev_symbols *s, size_t n)
{
    if (n == 0) {
        return 0;
    }
    if (mb_charge(s->share, n) != 0) {
        return AGENT_E_BUDGET;
    }
    s->held += n;
    return 0;
}

static void release(struct ev_symbols *s, size_t n)
{
    if (n != 0) {
        mb_release(s->share, n);
        s->held -= n;
    }
}

int ev_symbols_charge(struct ev_symbols *s, size_t n)
{
    return charge(s, n);
}

void ev_symbols_release(struct ev_symbols *s, size_t n)
{
    release(s, n);
}

/*
 * Grows *p (elements of size elem) to hold need elements, doubling, so that appending one at a
 * time stays linear, the growth charged first; 0, AGENT_E_BUDGET or -ENOMEM (*p and *cap
 * unchanged). What it holds is released by ev_symbols_free (s->held), or by the caller that frees
 * *p earlier.
 */
static int grow(struct ev_symbols *s, void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) {
        return 0;
    }
    size_t ncap = *cap != 0 ? *cap : 64;
    while (ncap < need) {
        ncap *= 2;
    }
    if (charge(s, (ncap - *cap) * elem) != 0) {
        return AGENT_E_BUDGET;
    }
    void *np = realloc(*p, ncap * elem);
    if (np == NULL) {
        release(s, (ncap - *cap) * elem);
        return -ENOMEM;
    }
    *p = np;
    *cap = ncap;
    return 0;
}

/* A temporary of the writers: n zeroed bytes charged to the share, its size kept before it. */
union tmp_head {
    size_t n;
    max_align_t align;
};

static int tmp_alloc(struct ev_symbols *s, size_t count, size_t elem, void *out)
{
    if (count > (SIZE_MAX - sizeof(union tmp_head)) / elem) {
        return -ENOMEM;
    }
    size_t n = sizeof(union tmp_head) + count * elem;
    if (charge(s, n) != 0) {
        return AGENT_E_BUDGET;
    }
    union tmp_head *h = calloc(1, n);
    if (h == NULL) {
        release(s, n);
        return -ENOMEM;
    }
    h->n = n;
    void *p = h + 1;
    memcpy(out, &p, sizeof(p)); /* out: the address of any object pointer */
    return 0;
}

static void tmp_free(struct ev_symbols *s, void *p)
{
    if (p != NULL) {
        union tmp_head *h = (union tmp_head *)p - 1;
        release(s, h->n);
        free(h);
    }
}

/* Appends s[0..n) and a NUL to the names arena; the offset in *at. */
static int name_add(struct ev_symbols *s, const char *str, size_t n, uint32_t *at)
{
    /* Every name (method, module, frame) cut at EV_SYMBOLS_MAX_NAME: str[0..n) is long enough. */
    char cut[EV_SYMBOLS_MAX_NAME + sizeof(EV_CUT_MARKER)];
    if (n > EV_SYMBOLS_MAX_NAME) {
        str = ev_name_cut(str, EV_SYMBOLS_MAX_NAME, cut, sizeof(cut));
        n = strlen(str);
    }
    size_t off = buf_size(&s->names);
    if (off + n + 1 > UINT32_MAX) {
        return AGENT_E_TOOBIG;
    }
    /* The arena's growth, as buf_reserve makes it (doubling from 256), charged first. */
    size_t old = s->names.cap, need = off + n + 2;
    if (need > old) {
        size_t ncap = old != 0 ? old : 256;
        while (ncap < need) {
            ncap *= 2;
        }
        if (charge(s, ncap - old) != 0) {
            return AGENT_E_BUDGET;
        }
        int rc = buf_reserve(&s->names, n + 1);
        if (s->names.cap < ncap) { /* at buf's max: less than charged */
            release(s, ncap - s->names.cap);
        } else if (s->names.cap > ncap && charge(s, s->names.cap - ncap) != 0) {
            rc = AGENT_E_BUDGET; /* not buf's policy (never seen): refused after the fact */
        }
        if (rc != 0) {
            return rc;
        }
    }
    int rc = buf_append(&s->names, str, n);
    if (rc == 0) {
        rc = buf_append(&s->names, "", 1);
    }
    if (rc == 0) {
        *at = (uint32_t)off;
    }
    return rc;
}

static const char *name_at(const struct ev_symbols *s, uint32_t at)
{
    return (const char *)buf_data(&s->names) + at;
}

/* Appends the UTF-16LE p[0..units) as UTF-8 (no NUL) to b. */
static int append_utf16(struct buf *b, const uint8_t *p, size_t units)
{
    size_t n = utf16le_utf8_len(p, units);
    int rc = buf_reserve(b, n + 1);
    if (rc != 0) {
        return rc;
    }
    rc = utf16le_to_utf8(p, units, (char *)b->p + b->len, n + 1, NULL);
    if (rc == 0) {
        b->len += n;
    }
    return rc;
}

/*
 * docs/events.md §6.2. The fields after the signature (ClrInstanceID from v1, ReJITID from v2) are
 * not used, but a payload too short for them is refused: it means the version is not the layout's,
 * and then the strings before may be misread too. Longer payloads are accepted, as TraceEvent
 * does, for layouts later runtimes extend.
 */
int ev_symbols_add_method(struct ev_symbols *s, const uint8_t *payload, size_t len,
                          uint32_t version)
{
    struct ev_rd r;
    ev_rd_init(&r, payload, len);
    uint64_t method_id = 0, module_id = 0, start = 0;
    uint32_t size = 0, token = 0, flags = 0;
    const uint8_t *ns = NULL, *nm = NULL, *sig = NULL;
    size_t ns_n = 0, nm_n = 0, sig_n = 0;
    size_t tail = version >= 2 ? 10 : version >= 1 ? 2 : 0; /* ClrInstanceID, ReJITID */
    if (ev_rd_u64(&r, &method_id) != 0 || ev_rd_u64(&r, &module_id) != 0 ||
        ev_rd_u64(&r, &start) != 0 || ev_rd_u32(&r, &size) != 0 || ev_rd_u32(&r, &token) != 0 ||
        ev_rd_u32(&r, &flags) != 0 || !ev_rd_utf16z(&r, &ns, &ns_n) ||
        !ev_rd_utf16z(&r, &nm, &nm_n) || !ev_rd_utf16z(&r, &sig, &sig_n) || ev_rd_left(&r) < tail) {
        s->st.malformed++;
        return AGENT_E_PROTO;
    }
    if (s->nmethods >= EV_SYMBOLS_MAX_METHODS) {
        return AGENT_E_TOOBIG;
    }
    int rc = grow(s, (void **)&s->methods, &s->cap_methods, s->nmethods + 1, sizeof(*s->methods));
    if (rc != 0) {
        return rc;
    }
    /* TraceEvent: Namespace + "." + Name + the signature from its first '('. */
    struct buf b;
    buf_init(&b, 0);
    rc = append_utf16(&b, ns, ns_n);
    size_t ns_len = buf_size(&b);
    if (rc == 0 && ns_n > 0) {
        rc = buf_append(&b, ".", 1);
    }
    size_t nm_at = buf_size(&b);
    if (rc == 0) {
        rc = append_utf16(&b, nm, nm_n);
    }
    size_t nm_len = buf_size(&b) - nm_at;
    size_t paren = 0;
    while (paren < sig_n && ev_load_u16(sig + 2 * paren) != '(') {
        paren++;
    }
    if (rc == 0 && paren < sig_n) {
        rc = append_utf16(&b, sig + 2 * paren, sig_n - paren);
    }
    uint32_t at = 0;
    if (rc == 0) {
        rc = name_add(s, (const char *)buf_data(&b), buf_size(&b), &at);
    }
    buf_fini(&b);
    if (rc != 0) {
        return rc;
    }
    s->methods[s->nmethods++] = (struct method){
        .start = start,
        .module_id = module_id,
        .size = size,
        .seq = (uint32_t)s->st.methods,
        .name = at,
        .token = token,
        /* parts of a name cut short: within the cut */
        .ns_len = (uint16_t)(ns_len < EV_SYMBOLS_MAX_NAME ? ns_len : EV_SYMBOLS_MAX_NAME),
        .nm_len = (uint16_t)(nm_len < EV_SYMBOLS_MAX_NAME ? nm_len : EV_SYMBOLS_MAX_NAME)};
    s->st.methods++;
    s->sorted = false;
    return 0;
}

/* True when the ASCII s[0..n) ends with the lower-case suffix. */
static bool ends_with_nocase(const char *str, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);
    if (n < k) {
        return false;
    }
    for (size_t i = 0; i < k; i++) {
        if (ascii_lower(str[n - k + i]) != suffix[i]) {
            return false;
        }
    }
    return true;
}

/*
 * ModuleLoad / ModuleDCStart / ModuleDCEnd: the module's name is its IL file's name without the
 * directory (either separator: the trace may come from Windows) and without .dll/.exe, as
 * TraceEvent's TraceModuleFile.Name; a module with no IL path (native images) uses its native path.
 */
int ev_symbols_add_module(struct ev_symbols *s, const uint8_t *payload, size_t len,
                          uint32_t version)
{
    struct ev_rd r;
    ev_rd_init(&r, payload, len);
    uint64_t module_id = 0, assembly_id = 0;
    uint32_t flags = 0, reserved = 0;
    const uint8_t *il = NULL, *native = NULL;
    size_t il_n = 0, native_n = 0;
    (void)version; /* every version starts with the same fields */
    if (ev_rd_u64(&r, &module_id) != 0 || ev_rd_u64(&r, &assembly_id) != 0 ||
        ev_rd_u32(&r, &flags) != 0 || ev_rd_u32(&r, &reserved) != 0 ||
        !ev_rd_utf16z(&r, &il, &il_n) || !ev_rd_utf16z(&r, &native, &native_n)) {
        s->st.malformed++;
        return AGENT_E_PROTO;
    }
    if (il_n == 0) {
        il = native;
        il_n = native_n;
    }
    if (s->nmodules >= EV_SYMBOLS_MAX_METHODS) {
        return AGENT_E_TOOBIG;
    }
    int rc = grow(s, (void **)&s->modules, &s->cap_modules, s->nmodules + 1, sizeof(*s->modules));
    if (rc != 0) {
        return rc;
    }
    struct buf b;
    buf_init(&b, 0);
    size_t base = 0; /* the file name starts after the last separator */
    for (size_t k = 0; k < il_n; k++) {
        uint16_t u = ev_load_u16(il + 2 * k);
        if (u == '/' || u == '\\') {
            base = k + 1;
        }
    }
    rc = append_utf16(&b, il + 2 * base, il_n - base);
    uint32_t at = 0;
    uint8_t ext = 0;
    if (rc == 0) {
        const char *str = (const char *)buf_data(&b);
        size_t n = buf_size(&b);
        ext = ends_with_nocase(str, n, ".dll") ? 1 : ends_with_nocase(str, n, ".exe") ? 2 : 0;
        rc = name_add(s, str, ext != 0 ? n - 4 : n, &at);
    }
    buf_fini(&b);
    if (rc != 0) {
        return rc;
    }
    s->modules[s->nmodules++] =
        (struct module){.id = module_id, .seq = (uint32_t)s->st.modules, .name = at, .ext = ext};
    s->st.modules++;
    s->sorted = false;
    return 0;
}

static uint64_t hash_u64(uint64_t v)
{
    v ^= v >> 33; /* the finalizer of MurmurHash3 */
    v *= 0xff51afd7ed558ccdull;
    v ^= v >> 33;
    v *= 0xc4ceb9fe1a85ec53ull;
    return v ^ (v >> 33);
}

static uint64_t hash_ips(const uint32_t *ips, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a over whole indices, then mixed */
    for (size_t i = 0; i < n; i++) {
        h = (h ^ ips[i]) * 0x100000001b3ull;
    }
    return hash_u64(h);
}

static uint64_t hash_str(const char *str)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *str != '\0'; str++) {
        h = (h ^ (uint8_t)*str) * 0x100000001b3ull;
    }
    return h;
}

/* The hash of stored stack or frame i. */
static uint64_t stack_hash(const struct ev_symbols *s, size_t i)
{
    return hash_ips(s->ips + s->stacks[i].at, s->stacks[i].n);
}

static uint64_t addr_hash(const struct ev_symbols *s, size_t i)
{
    return hash_u64(s->addrs[i]);
}

static uint64_t frame_hash(const struct ev_symbols *s, size_t i)
{
    return hash_str(name_at(s, s->frames[i]));
}

/*
 * Doubles an open-addressing table (slots hold an index + 1, 0 is empty) and re-inserts the n
 * entries by their hash.
 */
static int table_grow(struct ev_symbols *s, uint32_t **table, size_t *cap, size_t n,
                      uint64_t (*hash)(const struct ev_symbols *, size_t))
{
    size_t ncap = *cap != 0 ? *cap * 2 : 1024;
    if (charge(s, ncap * sizeof(uint32_t)) != 0) {
        return AGENT_E_BUDGET;
    }
    uint32_t *t = calloc(ncap, sizeof(*t));
    if (t == NULL) {
        release(s, ncap * sizeof(uint32_t));
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        size_t h = (size_t)hash(s, i) & (ncap - 1);
        while (t[h] != 0) {
            h = (h + 1) & (ncap - 1);
        }
        t[h] = (uint32_t)i + 1;
    }
    free(*table);
    release(s, *cap * sizeof(uint32_t));
    *table = t;
    *cap = ncap;
    return 0;
}

/* The index of address ip in addrs, stored once. */
static int addr_intern(struct ev_symbols *s, uint64_t ip, uint32_t *out)
{
    int rc = 0;
    if ((s->naddrs + 1) * 2 > s->addr_table_cap &&
        (rc = table_grow(s, &s->addr_table, &s->addr_table_cap, s->naddrs, addr_hash)) != 0) {
        return rc;
    }
    size_t mask = s->addr_table_cap - 1;
    size_t h = (size_t)hash_u64(ip) & mask;
    for (; s->addr_table[h] != 0; h = (h + 1) & mask) {
        if (s->addrs[s->addr_table[h] - 1] == ip) {
            *out = s->addr_table[h] - 1;
            return 0;
        }
    }
    if ((rc = grow(s, (void **)&s->addrs, &s->cap_addrs, s->naddrs + 1, sizeof(*s->addrs))) != 0) {
        return rc;
    }
    s->addrs[s->naddrs] = ip;
    s->addr_table[h] = (uint32_t)s->naddrs + 1;
    *out = (uint32_t)s->naddrs++;
    return 0;
}

/*
 * The index of the stack ips[0..n), stored once as addrs indices (a new stack's new addresses
 * join addrs in the stack's order, so addrs keeps the order of first appearance in ips).
 */
static int stack_intern(struct ev_symbols *s, const uint64_t *addrs, size_t n, uint32_t *out)
{
    if (n > EV_SYMBOLS_MAX_IPS) {
        return AGENT_E_TOOBIG;
    }
    int rc = grow(s, (void **)&s->scratch_idx, &s->cap_scratch_idx, n, sizeof(*s->scratch_idx));
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = addr_intern(s, addrs[i], &s->scratch_idx[i]);
    }
    if (rc != 0) {
        return rc;
    }
    const uint32_t *ips = s->scratch_idx;
    if ((s->nstacks + 1) * 2 > s->table_cap &&
        (rc = table_grow(s, &s->stack_table, &s->table_cap, s->nstacks, stack_hash)) != 0) {
        return rc;
    }
    size_t mask = s->table_cap - 1;
    size_t h = (size_t)hash_ips(ips, n) & mask;
    for (; s->stack_table[h] != 0; h = (h + 1) & mask) {
        const struct stack *st = &s->stacks[s->stack_table[h] - 1];
        if (st->n == n && memcmp(s->ips + st->at, ips, n * sizeof(*ips)) == 0) {
            *out = s->stack_table[h] - 1;
            return 0;
        }
    }
    if (s->nips + n > EV_SYMBOLS_MAX_IPS) {
        return AGENT_E_TOOBIG;
    }
    if ((rc = grow(s, (void **)&s->ips, &s->cap_ips, s->nips + n, sizeof(*s->ips))) != 0 ||
        (rc = grow(s, (void **)&s->stacks, &s->cap_stacks, s->nstacks + 1, sizeof(*s->stacks))) !=
            0) {
        return rc;
    }
    memcpy(s->ips + s->nips, ips, n * sizeof(*ips));
    s->stacks[s->nstacks] = (struct stack){.at = (uint32_t)s->nips, .n = (uint32_t)n};
    s->nips += n;
    s->stack_table[h] = (uint32_t)s->nstacks + 1;
    *out = (uint32_t)s->nstacks++;
    s->st.stacks++;
    return 0;
}

/*
 * Stack ids of the stream cannot be kept: they are reused after every sequence point. The
 * addresses are interned instead, and the sample keeps the interned index.
 */
static int add_sample(struct ev_symbols *s, uint64_t thread, int64_t ts, const uint64_t *ips,
                      size_t n, bool external)
{
    if (n == 0 || ips == NULL) {
        return AGENT_E_INVAL;
    }
    if (s->nsamples >= EV_SYMBOLS_MAX_SAMPLES) {
        return AGENT_E_TOOBIG;
    }
    int rc = grow(s, (void **)&s->samples, &s->cap_samples, s->nsamples + 1, sizeof(*s->samples));
    uint32_t idx = 0;
    if (rc != 0 || (rc = stack_intern(s, ips, n, &idx)) != 0) {
        return rc;
    }
    s->samples[s->nsamples] = (struct sample){.thread = thread,
                                              .ts = ts,
                                              .stack = idx & 0x7fffffffu,
                                              .external = external,
                                              .order = (uint32_t)s->nsamples};
    s->nsamples++;
    s->st.samples++;
    s->st.external += external;
    return 0;
}

int ev_symbols_add_sample(struct ev_symbols *s, uint64_t thread, int64_t ts, const uint64_t *ips,
                          size_t n)
{
    return add_sample(s, thread, ts, ips, n, false);
}

int ev_symbols_intern_stack(struct ev_symbols *s, const uint64_t *ips, size_t n, uint32_t *out)
{
    if (n == 0 || ips == NULL) {
        return AGENT_E_INVAL;
    }
    return stack_intern(s, ips, n, out);
}

/*
 * The stream callbacks cannot stop the checker: an event that could not be kept for a reason
 * other than its own bytes (memory, a cap) is remembered and fails ev_symbols_finish, so that a
 * partial profile is never written as a whole one.
 */
static void note(struct ev_symbols *s, int rc)
{
    if (rc != 0 && rc != AGENT_E_PROTO && s->fail == 0) {
        s->fail = rc;
    }
}

/*
 * The event's kept stack (pointer-size addresses) as u64 in s->scratch: their count, 0 when it has
 * none (*rc stays 0) or when the scratch cannot grow (*rc = -ENOMEM).
 */
static size_t event_ips(struct ev_symbols *s, const struct nettrace_event *ev, int *rc)
{
    struct nettrace_trace_info ti;
    if (ev->stack == NULL || ev->stack_len == 0 || nettrace_trace_info(&s->ck, &ti) != 0) {
        return 0;
    }
    size_t ptr = ti.pointer_size == 4 ? 4 : 8;
    size_t n = ev->stack_len / ptr;
    if (n == 0 ||
        (*rc = grow(s, (void **)&s->scratch, &s->cap_scratch, n, sizeof(*s->scratch))) != 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        s->scratch[i] = ptr == 4 ? ev_load_u32(ev->stack + 4 * i) : ev_load_u64(ev->stack + 8 * i);
    }
    return n;
}

/* A SampleProfiler event: its thread, time and stack. */
static void on_sample(struct ev_symbols *s, const struct nettrace_event *ev)
{
    int rc = 0;
    size_t n = event_ips(s, ev, &rc);
    if (n == 0) {
        s->st.no_stack += rc == 0;
        note(s, rc);
        return;
    }
    /* The payload's first field: 1 External (outside managed code: mostly blocked), 2 Managed. */
    bool external = ev->payload_len >= 4 && ev_load_u32(ev->payload) == SAMPLE_EXTERNAL;
    note(s, add_sample(s, ev->thread_id, ev->timestamp, s->scratch, n, external));
}

int ev_symbols_event_stack(struct ev_symbols *s, const struct nettrace_event *ev, uint32_t *out)
{
    int rc = 0;
    size_t n = event_ips(s, ev, &rc);
    if (n == 0) {
        note(s, rc == AGENT_E_BUDGET ? rc : 0);
        return rc != 0 ? rc : AGENT_E_NOTFOUND;
    }
    rc = stack_intern(s, s->scratch, n, out);
    note(s, rc == AGENT_E_BUDGET ? rc : 0); /* over the share: the feed stops (ev_profile's too) */
    return rc;
}

void ev_symbols_set_event_cb(struct ev_symbols *s, ev_symbols_event_cb cb, void *ud)
{
    s->hook = cb;
    s->hook_ud = ud;
}

size_t ev_symbols_pointer_size(const struct ev_symbols *s)
{
    struct nettrace_trace_info ti;
    return nettrace_trace_info(&s->ck, &ti) == 0 && ti.pointer_size == 4 ? 4 : 8;
}

/*
 * The event ids overlap between the two runtime providers (143 is MethodLoadVerbose in one and
 * MethodDCStartVerbose in the other, 152 ModuleLoad and DomainModuleDCEnd), so the provider is
 * matched first. DomainModule events are not read: every module also has a Module event.
 */
static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct ev_symbols *s = ud;
    bool runtime = strcmp(ev->provider, RUNTIME_PROVIDER) == 0;
    bool rundown = !runtime && strcmp(ev->provider, RUNDOWN_PROVIDER) == 0;
    if (runtime || rundown) {
        uint32_t id = ev->event_id;
        if ((runtime && id == EV_RUNTIME_METHOD_LOAD_VERBOSE) ||
            (rundown &&
             (id == EV_RUNDOWN_METHOD_DCSTART_VERB || id == EV_RUNDOWN_METHOD_DCEND_VERB))) {
            note(s, ev_symbols_add_method(s, ev->payload, ev->payload_len, ev->version));
        } else if ((runtime && id == EV_RUNTIME_MODULE_LOAD) ||
                   (rundown &&
                    (id == EV_RUNDOWN_MODULE_DCSTART || id == EV_RUNDOWN_MODULE_DCEND))) {
            note(s, ev_symbols_add_module(s, ev->payload, ev->payload_len, ev->version));
        }
    } else if (ev->event_id == 0 && strcmp(ev->provider, SAMPLER_PROVIDER) == 0) {
        on_sample(s, ev);
    }
    if (s->hook != NULL) {
        s->hook(s->hook_ud, ev);
    }
}

int ev_symbols_new(struct ev_symbols **out)
{
    struct ev_symbols *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    struct nettrace_options opt = {.flags = NETTRACE_KEEP_STACKS};
    int rc = nettrace_checker_init(&s->ck, &opt);
    if (rc != 0) {
        free(s);
        return rc;
    }
    nettrace_set_event_cb(&s->ck, on_event, s);
    buf_init(&s->names, MAX_NAMES);
    s->sampling_ns = DEFAULT_SAMPLING_NS;
    s->qpc_freq = 1000000000;
    *out = s;
    return 0;
}

void ev_symbols_free(struct ev_symbols *s)
{
    if (s == NULL) {
        return;
    }
    nettrace_checker_fini(&s->ck);
    buf_fini(&s->names);
    free(s->methods);
    free(s->maxend);
    free(s->modules);
    free(s->samples);
    free(s->stacks);
    free(s->ips);
    free(s->addrs);
    free(s->addr_table);
    free(s->stack_table);
    free(s->scratch);
    free(s->scratch_idx);
    free(s->method_frame);
    free(s->frames);
    free(s->frame_table);
    release(s, s->held);
    free(s);
}

int ev_symbols_feed(struct ev_symbols *s, const uint8_t *p, size_t n)
{
    if (s->err != 0) {
        return s->err;
    }
    int rc = nettrace_feed(&s->ck, p, n);
    if (rc < 0) {
        nettrace_error_line(&s->ck, rc, s->msg, sizeof(s->msg));
        s->err = rc;
    } else if (s->fail == AGENT_E_BUDGET) {
        /* Over the share: the rest of the stream is not read (it would only be refused). */
        (void)snprintf(s->msg, sizeof(s->msg),
                       "the profile is over its memory share (%llu bytes held)",
                       (unsigned long long)s->held);
        s->err = rc = AGENT_E_BUDGET;
    }
    return rc;
}

int ev_symbols_set_share(struct ev_symbols *s, struct mb_share *share)
{
    if (s->held != 0) {
        return AGENT_E_INVAL; /* charged elsewhere already */
    }
    s->share = share;
    return 0;
}

uint64_t ev_symbols_held(const struct ev_symbols *s)
{
    return s->held;
}

int ev_symbols_finish(struct ev_symbols *s)
{
    if (s->finished) {
        return s->verdict_rc;
    }
    s->finished = true;
    enum nettrace_verdict v = nettrace_finish(&s->ck);
    if (s->err != 0) {
        s->verdict_rc = s->err;
    } else if (s->fail != 0) {
        (void)snprintf(s->msg, sizeof(s->msg), "the profile could not be kept whole: %s",
                       agent_strerror(s->fail));
        s->verdict_rc = s->fail;
    } else if (v == NETTRACE_INVALID) {
        nettrace_error_line(&s->ck, AGENT_E_PROTO, s->msg, sizeof(s->msg));
        s->verdict_rc = AGENT_E_PROTO;
    } else if (v == NETTRACE_TRUNCATED) {
        (void)snprintf(s->msg, sizeof(s->msg), "the stream ends early");
        s->verdict_rc = AGENT_E_TRUNC;
    }
    return s->verdict_rc;
}

const char *ev_symbols_error(const struct ev_symbols *s)
{
    return s->msg[0] != '\0' ? s->msg : NULL;
}

void ev_symbols_get_stats(const struct ev_symbols *s, struct ev_symbols_stats *out)
{
    const struct nettrace_stats *ns = nettrace_get_stats(&s->ck);
    struct nettrace_trace_info ti;
    *out = s->st;
    out->bytes = ns->bytes;
    out->events = ns->events;
    out->lost = ns->lost;
    if (nettrace_trace_info(&s->ck, &ti) == 0) {
        out->sampling_rate_ns = ti.sampling_rate_ns;
    }
}

void ev_symbols_set_clock(struct ev_symbols *s, int32_t sampling_rate_ns, int64_t qpc_origin,
                          int64_t qpc_frequency)
{
    s->sampling_ns = sampling_rate_ns > 0 ? sampling_rate_ns : DEFAULT_SAMPLING_NS;
    s->qpc_origin = qpc_origin;
    s->qpc_freq = qpc_frequency > 0 ? qpc_frequency : 1000000000;
    s->clock_set = true;
}

static int cmp_method(const void *a, const void *b)
{
    const struct method *x = a, *y = b;
    if (x->start != y->start) {
        return x->start < y->start ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_module(const void *a, const void *b)
{
    const struct module *x = a, *y = b;
    if (x->id != y->id) {
        return x->id < y->id ? -1 : 1;
    }
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Sorts the ranges by start and computes the running largest end, so that a lookup finds the
 * last range starting at or below ip and walks back only over ranges that may still hold it.
 */
static int build_index(struct ev_symbols *s)
{
    if (s->sorted) {
        return 0;
    }
    if (s->nmethods > 0) {
        qsort(s->methods, s->nmethods, sizeof(*s->methods), cmp_method);
    }
    if (s->nmodules > 0) {
        qsort(s->modules, s->nmodules, sizeof(*s->modules), cmp_module);
    }
    const size_t per = sizeof(*s->maxend) + sizeof(*s->method_frame);
    free(s->maxend);
    free(s->method_frame);
    s->maxend = NULL;
    s->method_frame = NULL;
    release(s, s->cap_index * per);
    s->cap_index = 0;
    if (charge(s, (s->nmethods + 1) * per) != 0) {
        return AGENT_E_BUDGET;
    }
    s->cap_index = s->nmethods + 1;
    s->maxend = malloc((s->nmethods + 1) * sizeof(*s->maxend));
    s->method_frame = malloc((s->nmethods + 1) * sizeof(*s->method_frame));
    if (s->maxend == NULL || s->method_frame == NULL) {
        return -ENOMEM;
    }
    uint64_t m = 0;
    for (size_t i = 0; i < s->nmethods; i++) {
        uint64_t end = s->methods[i].start + s->methods[i].size;
        m = end > m ? end : m;
        s->maxend[i] = m;
        s->method_frame[i] = NO_FRAME;
    }
    s->nframes = 0; /* frames refer to sorted method positions: start over */
    if (s->frame_table != NULL) {
        memset(s->frame_table, 0, s->frame_table_cap * sizeof(*s->frame_table));
    }
    s->sorted = true;
    return 0;
}

/* The sorted index of the method holding ip (the last reported among overlapping), or -1. */
static ptrdiff_t find_method(const struct ev_symbols *s, uint64_t ip)
{
    size_t lo = 0, hi = s->nmethods; /* first start > ip */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->methods[mid].start <= ip) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    ptrdiff_t best = -1;
    for (size_t j = lo; j > 0 && s->maxend[j - 1] > ip; j--) {
        const struct method *m = &s->methods[j - 1];
        if (ip - m->start < m->size && (best < 0 || m->seq > s->methods[best].seq)) {
            best = (ptrdiff_t)(j - 1);
        }
    }
    return best;
}

/* The module id (the last reported), or NULL. */
static const struct module *find_module(const struct ev_symbols *s, uint64_t id)
{
    size_t lo = 0, hi = s->nmodules; /* first id > id */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->modules[mid].id <= id) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo > 0 && s->modules[lo - 1].id == id ? &s->modules[lo - 1] : NULL;
}

/* The module name of id (the last reported), or "?". */
static const char *module_name(const struct ev_symbols *s, uint64_t id)
{
    const struct module *m = find_module(s, id);
    return m != NULL ? name_at(s, m->name) : "?";
}

int ev_symbols_resolve(struct ev_symbols *s, uint64_t ip, char *out, size_t cap)
{
    int rc = build_index(s);
    if (rc != 0) {
        return rc;
    }
    ptrdiff_t m = find_method(s, ip);
    if (m < 0) {
        (void)snprintf(out, cap, "%s", EV_SYMBOLS_UNKNOWN);
        return AGENT_E_NOTFOUND;
    }
    (void)snprintf(out, cap, "%s!%s", module_name(s, s->methods[m].module_id),
                   name_at(s, s->methods[m].name));
    return 0;
}

int ev_symbols_frame_of(struct ev_symbols *s, uint64_t ip, struct ev_symbols_frame *out)
{
    static const char *const exts[] = {"", ".dll", ".exe"};
    memset(out, 0, sizeof(*out));
    out->module_ext = "";
    out->type = "";
    out->method = "";
    int rc = build_index(s);
    if (rc != 0) {
        return rc;
    }
    ptrdiff_t i = find_method(s, ip);
    if (i < 0) {
        return AGENT_E_NOTFOUND;
    }
    const struct method *m = &s->methods[i];
    const char *name = name_at(s, m->name);
    size_t len = strlen(name); /* a cut name holds less than its parts said */
    size_t ns = m->ns_len < len ? m->ns_len : len;
    size_t at = m->ns_len > 0 ? ns + 1 : 0;
    at = at < len ? at : len;
    out->known = true;
    out->token = m->token;
    out->type = name;
    out->type_len = ns;
    out->method = name + at;
    out->method_len = m->nm_len < len - at ? m->nm_len : len - at;
    const struct module *mod = find_module(s, m->module_id);
    if (mod != NULL) {
        out->module = name_at(s, mod->name);
        out->module_ext = exts[mod->ext < 3 ? mod->ext : 0];
    }
    return 0;
}

/* A thread's first sample, for ev_symbols_first_stacks. */
struct first_sample {
    uint64_t thread;
    uint32_t order;
    uint32_t idx;
};

static int cmp_first_thread(const void *a, const void *b)
{
    const struct first_sample *x = a, *y = b;
    if (x->thread != y->thread) {
        return x->thread < y->thread ? -1 : 1;
    }
    return x->order < y->order ? -1 : x->order > y->order;
}

static int cmp_first_order(const void *a, const void *b)
{
    const struct first_sample *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* v[0..n) sorted by thread then arrival: the first of each thread kept, in arrival order. */
static size_t firsts_only(struct first_sample *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_first_thread);
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (k == 0 || v[k - 1].thread != v[i].thread) {
            v[k++] = v[i];
        }
    }
    qsort(v, k, sizeof(*v), cmp_first_order);
    return k;
}

int ev_symbols_first_stacks(struct ev_symbols *s, ev_symbols_thread_cb cb, void *ud)
{
    size_t bytes = s->nsamples * sizeof(struct first_sample);
    if (charge(s, bytes) != 0) {
        return AGENT_E_BUDGET;
    }
    struct first_sample *v = malloc(bytes != 0 ? bytes : 1);
    int rc = v != NULL ? 0 : -ENOMEM;
    for (size_t i = 0; rc == 0 && i < s->nsamples; i++) {
        v[i] = (struct first_sample){
            .thread = s->samples[i].thread, .order = s->samples[i].order, .idx = (uint32_t)i};
    }
    size_t n = rc == 0 ? firsts_only(v, s->nsamples) : 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const struct sample *sm = &s->samples[v[i].idx];
        const struct stack *st = &s->stacks[sm->stack];
        rc = grow(s, (void **)&s->scratch, &s->cap_scratch, st->n, sizeof(*s->scratch));
        for (uint32_t k = 0; rc == 0 && k < st->n; k++) {
            s->scratch[k] = s->addrs[s->ips[st->at + k]];
        }
        rc = rc != 0 ? rc : cb(ud, sm->thread, sm->external != 0, s->scratch, st->n);
    }
    free(v);
    release(s, bytes);
    return rc;
}

int ev_symbols_stack_site(struct ev_symbols *s, uint32_t stack, char *out, size_t cap)
{
    if (stack >= s->nstacks) {
        return AGENT_E_INVAL;
    }
    int rc = build_index(s);
    if (rc != 0) {
        return rc;
    }
    const struct stack *st = &s->stacks[stack];
    ptrdiff_t first = -1, site = -1;
    for (uint32_t k = 0; k < st->n && site < 0; k++) {
        ptrdiff_t m = find_method(s, s->addrs[s->ips[st->at + k]]);
        if (m >= 0 && first < 0) {
            first = m;
        }
        if (m >= 0 &&
            strcmp(module_name(s, s->methods[m].module_id), EV_SYMBOLS_RUNTIME_LIB) != 0) {
            site = m;
        }
    }
    site = site >= 0 ? site : first;
    if (site < 0) {
        (void)snprintf(out, cap, "%s", EV_SYMBOLS_UNKNOWN);
        return AGENT_E_NOTFOUND;
    }
    (void)snprintf(out, cap, "%s!%s", module_name(s, s->methods[site].module_id),
                   name_at(s, s->methods[site].name));
    return 0;
}

/* The frame named str[0..n) (added once). */
static int frame_intern(struct ev_symbols *s, const char *str, size_t n, uint32_t *out)
{
    int rc = 0;
    if ((s->nframes + 1) * 2 > s->frame_table_cap &&
        (rc = table_grow(s, &s->frame_table, &s->frame_table_cap, s->nframes, frame_hash)) != 0) {
        return rc;
    }
    uint32_t at = 0; /* added first so that the name is NUL-terminated for hashing */
    if ((rc = name_add(s, str, n, &at)) != 0) {
        return rc;
    }
    const char *name = name_at(s, at);
    size_t mask = s->frame_table_cap - 1;
    size_t h = (size_t)hash_str(name) & mask;
    for (; s->frame_table[h] != 0; h = (h + 1) & mask) {
        if (strcmp(name_at(s, s->frames[s->frame_table[h] - 1]), name) == 0) {
            buf_truncate(&s->names, at); /* a known name: drop the copy */
            *out = s->frame_table[h] - 1;
            return 0;
        }
    }
    if ((rc = grow(s, (void **)&s->frames, &s->cap_frames, s->nframes + 1, sizeof(*s->frames))) !=
        0) {
        return rc;
    }
    s->frames[s->nframes] = at;
    s->frame_table[h] = (uint32_t)s->nframes + 1;
    *out = (uint32_t)s->nframes++;
    return 0;
}

/*
 * The frame of ip: its method's (built once per method) or the unknown frame. Frames are shared by
 * name, not by method: the tier-0 and tier-1 code of one method (two ranges) are one frame, as in
 * TraceEvent, so the method's time is not split between two entries.
 */
static int frame_of(struct ev_symbols *s, uint64_t ip, uint32_t *out)
{
    ptrdiff_t m = find_method(s, ip);
    if (m < 0) {
        return frame_intern(s, EV_SYMBOLS_UNKNOWN, strlen(EV_SYMBOLS_UNKNOWN), out);
    }
    if (s->method_frame[m] != NO_FRAME) {
        *out = s->method_frame[m];
        return 0;
    }
    struct buf b;
    buf_init(&b, 0);
    int rc = buf_printf(&b, "%s!%s", module_name(s, s->methods[m].module_id),
                        name_at(s, s->methods[m].name));
    if (rc == 0) {
        rc = frame_intern(s, (const char *)buf_data(&b), buf_size(&b), out);
    }
    buf_fini(&b);
    if (rc == 0) {
        s->method_frame[m] = *out;
    }
    return rc;
}

static int cmp_sample(const void *a, const void *b)
{
    const struct sample *x = a, *y = b;
    if (x->thread != y->thread) {
        return x->thread < y->thread ? -1 : 1;
    }
    if (x->ts != y->ts) {
        return x->ts < y->ts ? -1 : 1;
    }
    return x->order < y->order ? -1 : x->order > y->order;
}

/* One thread's run of sorted samples. */
struct group {
    size_t first, n;
    uint32_t min_order; /* when the thread was first sampled */
};

static int cmp_group(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    return x->min_order < y->min_order ? -1 : x->min_order > y->min_order;
}

/* Hands b to the sink once it holds a batch (or always, with force). */
static int out_flush(struct buf *b, bool force, ev_symbols_sink_cb sink, void *ud)
{
    if (buf_size(b) == 0 || (!force && buf_size(b) < OUT_BATCH)) {
        return 0;
    }
    int rc = sink(ud, buf_data(b), buf_size(b));
    buf_reset(b);
    return rc;
}

#define STACK_FRAMES_PER_APPEND 32 /* frame indices formatted per buf_append */

/* The decimal digits of v at out (up to 10, no NUL); their count. */
static size_t fmt_u32(char *out, uint32_t v)
{
    char tmp[10];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    for (size_t i = 0; i < n; i++) {
        out[i] = tmp[n - 1 - i];
    }
    return n;
}

static double qpc_ms(const struct ev_symbols *s, int64_t ts)
{
    return (double)(ts - s->qpc_origin) * 1000.0 / (double)s->qpc_freq;
}

/*
 * One sampled profile: the thread's samples outermost frame first (the stream's stacks are leaf
 * first), one weight each. The output is flushed to the sink every OUT_BATCH bytes, so memory does
 * not grow with the output.
 */
static int write_profile(struct ev_symbols *s, const struct group *g, const uint32_t *stack_frames,
                         double weight, struct buf *b, ev_symbols_sink_cb sink, void *ud)
{
    const struct sample *first = &s->samples[g->first];
    const struct sample *last = &s->samples[g->first + g->n - 1];
    int rc = buf_printf(b,
                        "{\"type\":\"sampled\",\"name\":\"Thread %llu\",\"unit\":\"milliseconds\","
                        "\"startValue\":%.17g,\"endValue\":%.17g,\"samples\":[",
                        (unsigned long long)first->thread, qpc_ms(s, first->ts),
                        qpc_ms(s, last->ts) + weight);
    /* By hand, not printf: these lists are most of the output (as "%u" and ",%.17g" would). */
    char num[16 + 2 * STACK_FRAMES_PER_APPEND * 11];
    for (size_t i = 0; rc == 0 && i < g->n; i++) {
        const struct stack *st = &s->stacks[s->samples[g->first + i].stack];
        rc = buf_append_str(b, i == 0 ? "[" : ",[");
        for (uint32_t k = st->n; rc == 0 && k > 0;) {
            size_t len = 0;
            for (uint32_t end = k > STACK_FRAMES_PER_APPEND ? k - STACK_FRAMES_PER_APPEND : 0;
                 k > end; k--) {
                if (k != st->n) {
                    num[len++] = ',';
                }
                len += fmt_u32(num + len, stack_frames[s->ips[st->at + k - 1]]);
            }
            rc = buf_append(b, num, len);
        }
        if (rc == 0) {
            rc = buf_append_str(b, "]");
        }
        if (rc == 0) {
            rc = out_flush(b, false, sink, ud);
        }
    }
    if (rc == 0) {
        rc = buf_append_str(b, "],\"weights\":[");
    }
    int wlen = snprintf(num, sizeof(num), ",%.17g", weight);
    if (rc == 0 && (wlen <= 1 || (size_t)wlen >= sizeof(num))) {
        rc = AGENT_E_INVAL;
    }
    for (size_t i = 0; rc == 0 && i < g->n; i++) {
        rc = buf_append(b, i == 0 ? num + 1 : num, (size_t)wlen - (i == 0));
        if (rc == 0) {
            rc = out_flush(b, false, sink, ud);
        }
    }
    if (rc == 0) {
        rc = buf_append_str(b, "]}");
    }
    return rc;
}

/* The frame of every distinct address, by addrs index (frames numbered in that order). */
static int resolve_all(struct ev_symbols *s, uint32_t **out)
{
    uint32_t *fr = NULL;
    int rc = tmp_alloc(s, s->naddrs + 1, sizeof(*fr), &fr);
    for (size_t i = 0; rc == 0 && i < s->naddrs; i++) {
        rc = frame_of(s, s->addrs[i], &fr[i]);
    }
    if (rc != 0) {
        tmp_free(s, fr);
        return rc;
    }
    *out = fr;
    return 0;
}

/*
 * Threads as runs of samples, in the order they were first sampled; *out has *n runs. The stream
 * interleaves threads, and nothing in the format promises one thread's samples in time order
 * (the runtime's all come from its sampler thread, so they are), hence the sort by thread, then
 * time, then arrival.
 */
static int thread_groups(struct ev_symbols *s, struct group **out, size_t *n, size_t *cap_out)
{
    if (s->nsamples > 0) {
        qsort(s->samples, s->nsamples, sizeof(*s->samples), cmp_sample);
    }
    struct group *g = NULL;
    size_t ng = 0, cap = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        if (i == 0 || s->samples[i].thread != s->samples[i - 1].thread) {
            int rc = grow(s, (void **)&g, &cap, ng + 1, sizeof(*g));
            if (rc != 0) {
                free(g);
                release(s, cap * sizeof(*g));
                return rc;
            }
            g[ng++] = (struct group){.first = i, .n = 0, .min_order = UINT32_MAX};
        }
        struct group *cur = &g[ng - 1];
        cur->n++;
        cur->min_order =
            s->samples[i].order < cur->min_order ? s->samples[i].order : cur->min_order;
    }
    if (ng > 0) {
        qsort(g, ng, sizeof(*g), cmp_group);
    }
    *out = g;
    *n = ng;
    *cap_out = cap;
    return 0;
}

static void clock_from_header(struct ev_symbols *s);

int ev_symbols_write_speedscope(struct ev_symbols *s, const char *name, ev_symbols_sink_cb sink,
                                void *ud)
{
    clock_from_header(s);
    double weight = (double)s->sampling_ns / 1e6;
    uint32_t *stack_frames = NULL;
    struct group *groups = NULL;
    size_t ngroups = 0, cap_groups = 0;
    struct buf b;
    buf_init(&b, 0);
    int rc = build_index(s);
    if (rc == 0) {
        rc = resolve_all(s, &stack_frames);
    }
    if (rc == 0) {
        rc = thread_groups(s, &groups, &ngroups, &cap_groups);
    }
    if (rc == 0) {
        rc = buf_append_str(&b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"exporter\":\"dotmon\","
                                "\"name\":\"");
    }
    if (rc == 0) {
        rc = buf_append_json_escaped(&b, name != NULL ? name : "");
    }
    if (rc == 0) {
        rc = buf_append_str(&b, "\",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    }
    for (size_t i = 0; rc == 0 && i < s->nframes; i++) {
        rc = buf_append_str(&b, i == 0 ? "{\"name\":\"" : ",{\"name\":\"");
        if (rc == 0) {
            rc = buf_append_json_escaped(&b, name_at(s, s->frames[i]));
        }
        if (rc == 0) {
            rc = buf_append_str(&b, "\"}");
        }
        if (rc == 0) {
            rc = out_flush(&b, false, sink, ud);
        }
    }
    if (rc == 0) {
        rc = buf_append_str(&b, "]},\"profiles\":[");
    }
    for (size_t i = 0; rc == 0 && i < ngroups; i++) {
        if (i > 0) {
            rc = buf_append_str(&b, ",");
        }
        if (rc == 0) {
            rc = write_profile(s, &groups[i], stack_frames, weight, &b, sink, ud);
        }
    }
    if (rc == 0) {
        rc = buf_append_str(&b, "]}\n");
    }
    if (rc == 0) {
        rc = out_flush(&b, true, sink, ud);
    }
    buf_fini(&b);
    free(groups);
    release(s, cap_groups * sizeof(*groups));
    tmp_free(s, stack_frames);
    return rc;
}

/* ---- Aggregation: where the CPU went ---- */

const char *const EV_SYMBOLS_LEAF_SKIPPED[] = {"System.Threading.Thread.PollGC",
                                               "System.Threading.Thread.<PollGC>", NULL};

static bool leaf_skipped(const char *frame)
{
    const char *m = strchr(frame, '!');
    m = m != NULL ? m + 1 : frame;
    for (size_t i = 0; EV_SYMBOLS_LEAF_SKIPPED[i] != NULL; i++) {
        if (strncmp(m, EV_SYMBOLS_LEAF_SKIPPED[i], strlen(EV_SYMBOLS_LEAF_SKIPPED[i])) == 0) {
            return true;
        }
    }
    return false;
}

/* A frame's counts while sorting; the name in the names arena. */
struct frame_stat {
    const char *name;
    uint64_t exclusive;
    uint64_t inclusive;
};

static int cmp_stat_name(const struct frame_stat *x, const struct frame_stat *y)
{
    return strcmp(x->name, y->name);
}

/* Most first by the first count, then the other, then by name. */
static int cmp_counts(const struct frame_stat *x, const struct frame_stat *y, bool inclusive_first)
{
    uint64_t x1 = inclusive_first ? x->inclusive : x->exclusive;
    uint64_t y1 = inclusive_first ? y->inclusive : y->exclusive;
    uint64_t x2 = inclusive_first ? x->exclusive : x->inclusive;
    uint64_t y2 = inclusive_first ? y->exclusive : y->inclusive;
    if (x1 != y1) {
        return x1 > y1 ? -1 : 1;
    }
    if (x2 != y2) {
        return x2 > y2 ? -1 : 1;
    }
    return cmp_stat_name(x, y);
}

static int cmp_by_exclusive(const void *a, const void *b)
{
    return cmp_counts(a, b, false);
}

static int cmp_by_inclusive(const void *a, const void *b)
{
    return cmp_counts(a, b, true);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The first n of v (sorted) with their names copied, into *out. */
static int copy_top(const struct frame_stat *v, size_t n, struct ev_symbols_method_stat **out)
{
    struct ev_symbols_method_stat *t = calloc(n + 1, sizeof(*t));
    if (t == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        t[i].exclusive = v[i].exclusive;
        t[i].inclusive = v[i].inclusive;
        t[i].name = strdup(v[i].name);
        if (t[i].name == NULL) {
            for (size_t k = 0; k < i; k++) {
                free(t[k].name);
            }
            free(t);
            return -ENOMEM;
        }
    }
    *out = t;
    return 0;
}

static uint64_t count_threads(struct ev_symbols *s, int *rc)
{
    uint64_t *t = NULL;
    int trc = tmp_alloc(s, s->nsamples + 1, sizeof(*t), &t);
    if (trc != 0) {
        *rc = *rc != 0 ? *rc : trc;
        return 0;
    }
    for (size_t i = 0; i < s->nsamples; i++) {
        t[i] = s->samples[i].thread;
    }
    qsort(t, s->nsamples, sizeof(*t), cmp_u64);
    uint64_t n = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        n += i == 0 || t[i] != t[i - 1];
    }
    tmp_free(s, t);
    return n;
}

/* Counts per frame: ex[] and in[] (nframes each), and the samples whose leaf was skipped. */
static uint64_t count_frames(const struct ev_symbols *s, const uint32_t *fr, const uint64_t *cnt,
                             const bool *skip, uint64_t *ex, uint64_t *in, uint32_t *mark)
{
    uint64_t skipped = 0;
    for (size_t i = 0; i < s->nstacks; i++) {
        const struct stack *st = &s->stacks[i];
        if (cnt[i] == 0) {
            continue;
        }
        const uint32_t *ips = s->ips + st->at;
        uint32_t exf = fr[ips[0]]; /* a stack of helpers only keeps its leaf */
        for (uint32_t k = 0; k < st->n; k++) {
            if (!skip[fr[ips[k]]]) {
                exf = fr[ips[k]];
                skipped += k > 0 ? cnt[i] : 0;
                break;
            }
        }
        ex[exf] += cnt[i];
        for (uint32_t k = 0; k < st->n; k++) {
            uint32_t f = fr[ips[k]];
            if (mark[f] != (uint32_t)i + 1) { /* once per sample, however deep it recurses */
                mark[f] = (uint32_t)i + 1;
                in[f] += cnt[i];
            }
        }
    }
    return skipped;
}

static void clock_from_header(struct ev_symbols *s)
{
    struct nettrace_trace_info ti;
    if (!s->clock_set && nettrace_trace_info(&s->ck, &ti) == 0) {
        s->sampling_ns = ti.sampling_rate_ns > 0 ? ti.sampling_rate_ns : DEFAULT_SAMPLING_NS;
        s->qpc_origin = ti.sync_time_qpc;
        s->qpc_freq = ti.qpc_frequency > 0 ? ti.qpc_frequency : 1000000000;
    }
}

/* ---- Hot paths ---- */

/* A frame's name and index: sorted by name, they number the frames in name order. */
struct frame_name {
    const char *name;
    uint32_t frame;
};

static int cmp_frame_name(const void *a, const void *b)
{
    return strcmp(((const struct frame_name *)a)->name, ((const struct frame_name *)b)->name);
}

/* A distinct stack while the paths are ranked: its frames as name ranks, leaf first. */
struct path_ref {
    const uint32_t *leaf;
    uint32_t n;
    uint64_t samples;
};

/* Outermost frame first, by name rank (so by name); a prefix of the other first. */
static int cmp_path_frames(const struct path_ref *x, const struct path_ref *y)
{
    uint32_t n = x->n < y->n ? x->n : y->n;
    for (uint32_t i = 1; i <= n; i++) {
        uint32_t a = x->leaf[x->n - i], b = y->leaf[y->n - i];
        if (a != b) {
            return a < b ? -1 : 1;
        }
    }
    return x->n < y->n ? -1 : x->n > y->n;
}

static int cmp_path_by_frames(const void *a, const void *b)
{
    return cmp_path_frames(a, b);
}

static int cmp_path_by_samples(const void *a, const void *b)
{
    const struct path_ref *x = a, *y = b;
    if (x->samples != y->samples) {
        return x->samples > y->samples ? -1 : 1;
    }
    return cmp_path_frames(x, y);
}

/* Frees v, whose first n paths hold copied names. Accepts NULL. */
static void paths_free(struct ev_symbols_path *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        for (uint32_t k = 0; k < v[i].n_frames; k++) {
            free(v[i].frames[k]);
        }
    }
    free(v);
}

/* The first n of refs (ranked) as paths, each its innermost EV_SYMBOLS_PATH_FRAMES frames named
 * by names[rank], outermost first; into *out. */
static int copy_paths(const struct path_ref *refs, size_t n, const struct frame_name *names,
                      struct ev_symbols_path **out)
{
    struct ev_symbols_path *v = calloc(n + 1, sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        const struct path_ref *r = &refs[i];
        uint32_t keep = r->n < EV_SYMBOLS_PATH_FRAMES ? r->n : EV_SYMBOLS_PATH_FRAMES;
        v[i].samples = r->samples;
        v[i].elided = r->n - keep;
        for (uint32_t k = 0; k < keep; k++) {
            v[i].frames[k] = strdup(names[r->leaf[keep - 1 - k]].name);
            if (v[i].frames[k] == NULL) {
                paths_free(v, i + 1);
                return -ENOMEM;
            }
            v[i].n_frames = k + 1;
        }
    }
    *out = v;
    return 0;
}

/*
 * The paths most sampled distinct stacks into out, from the interned stacks the other writers use
 * (cnt: each one's managed samples; fr: each address's frame). Stacks are interned by address, so
 * one path of names can be many stacks (a loop sampled at different addresses, tier-0 and tier-1
 * code): each stack's frames are turned into their rank in name order, which makes names compare
 * as integers (and ties fall in name order), the stacks are sorted to bring each path's together
 * and summed, then the paths are ranked by samples. Everything here is a charged temporary.
 */
static int hot_paths(struct ev_symbols *s, const uint32_t *fr, const uint64_t *cnt,
                     const bool *skip, size_t paths, struct ev_symbols_profile *out)
{
    struct frame_name *names = NULL;
    uint32_t *rank = NULL, *seq = NULL;
    struct path_ref *refs = NULL;
    int rc = tmp_alloc(s, s->nframes + 1, sizeof(*names), &names);
    rc = rc ? rc : tmp_alloc(s, s->nframes + 1, sizeof(*rank), &rank);
    rc = rc ? rc : tmp_alloc(s, s->nips + 1, sizeof(*seq), &seq);
    rc = rc ? rc : tmp_alloc(s, s->nstacks + 1, sizeof(*refs), &refs);
    if (rc != 0) {
        goto out;
    }
    for (size_t f = 0; f < s->nframes; f++) {
        names[f] = (struct frame_name){.name = name_at(s, s->frames[f]), .frame = (uint32_t)f};
    }
    if (s->nframes > 0) {
        qsort(names, s->nframes, sizeof(*names), cmp_frame_name);
    }
    for (size_t r = 0; r < s->nframes; r++) {
        rank[names[r].frame] = (uint32_t)r;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->nstacks; i++) {
        const struct stack *st = &s->stacks[i];
        if (cnt[i] == 0) {
            continue;
        }
        uint32_t *sq = seq + st->at; /* stacks own disjoint runs of ips: so of seq */
        uint32_t k0 = 0;
        for (uint32_t k = 0; k < st->n; k++) {
            sq[k] = rank[fr[s->ips[st->at + k]]];
        }
        while (k0 < st->n && skip[fr[s->ips[st->at + k0]]]) {
            k0++;
        }
        k0 = k0 < st->n ? k0 : 0; /* a stack of helpers only is kept whole */
        refs[n++] = (struct path_ref){.leaf = sq + k0, .n = st->n - k0, .samples = cnt[i]};
    }
    if (n > 0) {
        qsort(refs, n, sizeof(*refs), cmp_path_by_frames);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m > 0 && cmp_path_frames(&refs[m - 1], &refs[i]) == 0) {
            refs[m - 1].samples += refs[i].samples;
        } else {
            refs[m++] = refs[i];
        }
    }
    if (m > 0) {
        qsort(refs, m, sizeof(*refs), cmp_path_by_samples);
    }
    size_t keep = m < paths ? m : paths;
    rc = copy_paths(refs, keep, names, &out->paths);
    out->n_paths = rc == 0 ? keep : 0;
    out->has_paths = rc == 0;
out:
    tmp_free(s, refs);
    tmp_free(s, seq);
    tmp_free(s, rank);
    tmp_free(s, names);
    return rc;
}

int ev_symbols_aggregate(struct ev_symbols *s, size_t top, size_t paths,
                         struct ev_symbols_profile *out)
{
    memset(out, 0, sizeof(*out));
    if (top == 0 || top > EV_SYMBOLS_TOP_MAX || paths > EV_SYMBOLS_PATHS_MAX) {
        return AGENT_E_INVAL;
    }
    clock_from_header(s);
    uint32_t *fr = NULL, *mark = NULL;
    uint64_t *cnt = NULL, *ex = NULL, *in = NULL;
    bool *skip = NULL;
    struct frame_stat *v = NULL;
    int rc = build_index(s);
    rc = rc ? rc : resolve_all(s, &fr);
    if (rc != 0) {
        goto out;
    }
    size_t nf = s->nframes + 1;
    rc = tmp_alloc(s, s->nstacks + 1, sizeof(*cnt), &cnt);
    rc = rc ? rc : tmp_alloc(s, nf, sizeof(*ex), &ex);
    rc = rc ? rc : tmp_alloc(s, nf, sizeof(*in), &in);
    rc = rc ? rc : tmp_alloc(s, nf, sizeof(*mark), &mark);
    rc = rc ? rc : tmp_alloc(s, nf, sizeof(*skip), &skip);
    rc = rc ? rc : tmp_alloc(s, nf, sizeof(*v), &v);
    if (rc != 0) {
        goto out;
    }
    for (size_t i = 0; i < s->nsamples; i++) {
        if (!s->samples[i].external) {
            cnt[s->samples[i].stack]++;
            out->samples++;
        }
    }
    for (size_t f = 0; f < s->nframes; f++) {
        skip[f] = leaf_skipped(name_at(s, s->frames[f]));
    }
    out->external = s->nsamples - out->samples;
    out->threads = count_threads(s, &rc);
    out->sampling_ms = (double)s->sampling_ns / 1e6;
    out->leaf_skipped = count_frames(s, fr, cnt, skip, ex, in, mark);
    size_t n = 0;
    for (size_t f = 0; f < s->nframes; f++) {
        if (in[f] > 0) {
            v[n++] = (struct frame_stat){
                .name = name_at(s, s->frames[f]), .exclusive = ex[f], .inclusive = in[f]};
        }
    }
    size_t keep = n < top ? n : top;
    qsort(v, n, sizeof(*v), cmp_by_exclusive);
    rc = rc ? rc : copy_top(v, keep, &out->by_exclusive);
    out->n_exclusive = rc == 0 ? keep : 0;
    qsort(v, n, sizeof(*v), cmp_by_inclusive);
    rc = rc ? rc : copy_top(v, keep, &out->by_inclusive);
    out->n_inclusive = rc == 0 ? keep : 0;
    if (rc == 0 && paths > 0) {
        rc = hot_paths(s, fr, cnt, skip, paths, out);
    }
out:
    if (rc != 0) {
        ev_symbols_profile_fini(out);
    }
    tmp_free(s, v);
    tmp_free(s, skip);
    tmp_free(s, mark);
    tmp_free(s, in);
    tmp_free(s, ex);
    tmp_free(s, cnt);
    tmp_free(s, fr);
    return rc;
}

void ev_symbols_profile_fini(struct ev_symbols_profile *p)
{
    for (size_t i = 0; p->by_exclusive != NULL && i < p->n_exclusive; i++) {
        free(p->by_exclusive[i].name);
    }
    for (size_t i = 0; p->by_inclusive != NULL && i < p->n_inclusive; i++) {
        free(p->by_inclusive[i].name);
    }
    free(p->by_exclusive);
    free(p->by_inclusive);
    paths_free(p->paths, p->n_paths);
    memset(p, 0, sizeof(*p));
}

static double percent(uint64_t n, uint64_t total)
{
    return total > 0 ? 100.0 * (double)n / (double)total : 0.0;
}

static int json_stats(struct buf *b, const struct ev_symbols_method_stat *v, size_t n,
                      uint64_t total)
{
    int rc = buf_append_str(b, "[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = buf_append_str(b, i == 0 ? "{\"method\":\"" : ",{\"method\":\"");
        rc = rc ? rc : buf_append_json_escaped(b, v[i].name);
        rc = rc ? rc
                : buf_printf(b,
                             "\",\"exclusive\":%llu,\"exclusivePercent\":%.2f,\"inclusive\":%llu,"
                             "\"inclusivePercent\":%.2f}",
                             (unsigned long long)v[i].exclusive, percent(v[i].exclusive, total),
                             (unsigned long long)v[i].inclusive, percent(v[i].inclusive, total));
    }
    return rc ? rc : buf_append_str(b, "]");
}

/* ,"hotPaths":[…] (ev_symbols.h). */
static int json_paths(struct buf *b, const struct ev_symbols_profile *p)
{
    int rc = buf_append_str(b, ",\"hotPaths\":[");
    for (size_t i = 0; rc == 0 && i < p->n_paths; i++) {
        const struct ev_symbols_path *h = &p->paths[i];
        rc = buf_printf(b, "%s{\"samples\":%llu,\"percent\":%.2f,\"frames\":[", i == 0 ? "" : ",",
                        (unsigned long long)h->samples, percent(h->samples, p->samples));
        for (uint32_t k = 0; rc == 0 && k < h->n_frames; k++) {
            rc = buf_append_str(b, k == 0 ? "\"" : ",\"");
            rc = rc ? rc : buf_append_json_escaped(b, h->frames[k]);
            rc = rc ? rc : buf_append_str(b, "\"");
        }
        rc = rc ? rc : buf_printf(b, "],\"elidedFrames\":%u}", h->elided);
    }
    return rc ? rc : buf_append_str(b, "]");
}

/* The names of EV_SYMBOLS_LEAF_SKIPPED as JSON strings, comma-separated. */
static int json_skips(struct buf *b)
{
    int rc = 0;
    for (size_t i = 0; rc == 0 && EV_SYMBOLS_LEAF_SKIPPED[i] != NULL; i++) {
        rc = buf_printf(b, "%s\"%s\"", i == 0 ? "" : ",", EV_SYMBOLS_LEAF_SKIPPED[i]);
    }
    return rc;
}

int ev_symbols_write_profile_json(const struct ev_symbols_profile *p, uint64_t pid,
                                  uint32_t duration_s, ev_symbols_sink_cb sink, void *ud)
{
    struct buf b;
    buf_init(&b, 0);
    int rc =
        buf_printf(&b,
                   "{\"pid\":%llu,\"kind\":\"cpu\",\"durationSeconds\":%u,\"samples\":%llu,"
                   "\"threads\":%llu,\"externalSamples\":%llu,\"samplingMilliseconds\":%.17g,"
                   "\"exclusiveSkips\":[",
                   (unsigned long long)pid, duration_s, (unsigned long long)p->samples,
                   (unsigned long long)p->threads, (unsigned long long)p->external, p->sampling_ms);
    rc = rc ? rc : json_skips(&b);
    rc = rc ? rc
            : buf_printf(&b, "],\"leafSkippedSamples\":%llu,\"top\":",
                         (unsigned long long)p->leaf_skipped);
    rc = rc ? rc : json_stats(&b, p->by_exclusive, p->n_exclusive, p->samples);
    rc = rc ? rc : buf_append_str(&b, ",\"topInclusive\":");
    rc = rc ? rc : json_stats(&b, p->by_inclusive, p->n_inclusive, p->samples);
    if (rc == 0 && p->has_paths) {
        rc = json_paths(&b, p);
    }
    rc = rc ? rc : buf_append_str(&b, "}\n");
    rc = rc ? rc : out_flush(&b, true, sink, ud);
    buf_fini(&b);
    return rc;
}

static int text_table(struct buf *b, const char *title, const struct ev_symbols_method_stat *v,
                      size_t n, uint64_t total)
{
    int rc = buf_printf(b, "\n%s\n%10s %7s %10s %7s  %s\n", title, "EXCLUSIVE", "%", "INCLUSIVE",
                        "%", "METHOD");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        rc = buf_printf(b, "%10llu %7.2f %10llu %7.2f  %s\n", (unsigned long long)v[i].exclusive,
                        percent(v[i].exclusive, total), (unsigned long long)v[i].inclusive,
                        percent(v[i].inclusive, total), v[i].name);
    }
    return rc;
}

/* The hot paths: each one's rank, samples and percent, then its frames, outermost first. */
static int text_paths(struct buf *b, const struct ev_symbols_profile *p)
{
    int rc = buf_append_str(b, "\nHot paths (the most sampled stacks, outermost frame first):\n");
    for (size_t i = 0; rc == 0 && i < p->n_paths; i++) {
        const struct ev_symbols_path *h = &p->paths[i];
        rc = buf_printf(b, "%3zu. %llu samples (%.2f %%)\n", i + 1, (unsigned long long)h->samples,
                        percent(h->samples, p->samples));
        if (rc == 0 && h->elided > 0) {
            rc = buf_printf(b, "       ... %u outer frame%s\n", h->elided,
                            h->elided == 1 ? "" : "s");
        }
        for (uint32_t k = 0; rc == 0 && k < h->n_frames; k++) {
            rc = buf_printf(b, "       %s\n", h->frames[k]);
        }
    }
    return rc;
}

int ev_symbols_write_profile_text(const struct ev_symbols_profile *p, uint64_t pid,
                                  uint32_t duration_s, ev_symbols_sink_cb sink, void *ud)
{
    struct buf b;
    buf_init(&b, 0);
    int rc =
        buf_printf(&b,
                   "CPU profile of pid %llu over %u s: %llu samples in managed code (every "
                   "%.3g ms) on %llu threads; %llu samples outside it (waiting) not counted\n"
                   "Exclusive: a leaf in ",
                   (unsigned long long)pid, duration_s, (unsigned long long)p->samples,
                   p->sampling_ms, (unsigned long long)p->threads, (unsigned long long)p->external);
    for (size_t i = 0; rc == 0 && EV_SYMBOLS_LEAF_SKIPPED[i] != NULL; i++) {
        rc = buf_printf(&b, "%s%s*", i == 0 ? "" : " or ", EV_SYMBOLS_LEAF_SKIPPED[i]);
    }
    rc = rc ? rc
            : buf_printf(&b, " counts for the frame below it (%llu samples)\n",
                         (unsigned long long)p->leaf_skipped);
    rc = rc ? rc : text_table(&b, "Top by exclusive:", p->by_exclusive, p->n_exclusive, p->samples);
    rc = rc ? rc : text_table(&b, "Top by inclusive:", p->by_inclusive, p->n_inclusive, p->samples);
    if (rc == 0 && p->has_paths) {
        rc = text_paths(&b, p);
    }
    rc = rc ? rc : out_flush(&b, true, sink, ud);
    buf_fini(&b);
    return rc;
}

/* ---- Folded stacks for a flame graph ---- */

/*
 * The frames of the managed stacks in the order they are first used, each once, as a JSON array
 * of names; map[f] gets the new index of frame f (NO_FRAME for frames no managed sample uses).
 */
static int flame_frames(struct ev_symbols *s, const uint32_t *fr, const uint64_t *cnt,
                        uint32_t *map, struct buf *b, ev_symbols_sink_cb sink, void *ud)
{
    uint32_t used = 0;
    int rc = buf_append_str(b, "\"frames\":[");
    for (size_t i = 0; rc == 0 && i < s->nstacks; i++) {
        const struct stack *st = &s->stacks[i];
        for (uint32_t k = 0; rc == 0 && cnt[i] > 0 && k < st->n; k++) {
            uint32_t f = fr[s->ips[st->at + k]];
            if (map[f] != NO_FRAME) {
                continue;
            }
            map[f] = used;
            rc = buf_append_str(b, used++ == 0 ? "\"" : ",\"");
            rc = rc ? rc : buf_append_json_escaped(b, name_at(s, s->frames[f]));
            rc = rc ? rc : buf_append_str(b, "\"");
            rc = rc ? rc : out_flush(b, false, sink, ud);
        }
    }
    return rc ? rc : buf_append_str(b, "]");
}

/* A managed sample's thread and stack, sorted by both for the per-thread split. */
struct thread_stack {
    uint64_t thread;
    uint32_t stack;
};

static int cmp_thread_stack(const void *a, const void *b)
{
    const struct thread_stack *x = a, *y = b;
    if (x->thread != y->thread) {
        return x->thread < y->thread ? -1 : 1;
    }
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

/*
 * The per-thread split of the folded stacks: ,"threadIds":[id,…] (ascending, threads with managed
 * samples only) and ,"threadStacks":[[thread,stack,count],…] (indices into threadIds and stacks;
 * pos[i] is stack i's index in "stacks").
 */
static int flame_threads(struct ev_symbols *s, const uint32_t *pos, size_t managed, struct buf *b,
                         ev_symbols_sink_cb sink, void *ud)
{
    struct thread_stack *v = NULL;
    int rc = tmp_alloc(s, managed + 1, sizeof(*v), &v);
    if (rc != 0) {
        return rc;
    }
    size_t n = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        if (!s->samples[i].external) {
            v[n++] =
                (struct thread_stack){.thread = s->samples[i].thread, .stack = s->samples[i].stack};
        }
    }
    if (n > 0) {
        qsort(v, n, sizeof(*v), cmp_thread_stack);
    }
    rc = buf_append_str(b, ",\"threadIds\":[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i == 0 || v[i].thread != v[i - 1].thread) {
            rc = buf_printf(b, "%s%llu", i == 0 ? "" : ",", (unsigned long long)v[i].thread);
        }
    }
    rc = rc ? rc : buf_append_str(b, "],\"threadStacks\":[");
    uint32_t t = 0;
    for (size_t i = 0, run = 0; rc == 0 && i < n; i++) {
        run++;
        if (i + 1 < n && v[i + 1].thread == v[i].thread && v[i + 1].stack == v[i].stack) {
            continue;
        }
        rc = buf_printf(b, "%s[%u,%u,%llu]", i + 1 == run ? "" : ",", t, pos[v[i].stack],
                        (unsigned long long)run);
        rc = rc ? rc : out_flush(b, false, sink, ud);
        t += i + 1 < n && v[i + 1].thread != v[i].thread;
        run = 0;
    }
    tmp_free(s, v);
    return rc ? rc : buf_append_str(b, "]");
}

int ev_symbols_write_flame(struct ev_symbols *s, uint64_t pid, uint32_t duration_s,
                           ev_symbols_sink_cb sink, void *ud)
{
    clock_from_header(s);
    uint32_t *fr = NULL, *map = NULL, *pos = NULL;
    uint64_t *cnt = NULL;
    struct buf b;
    buf_init(&b, 0);
    int rc = build_index(s);
    rc = rc ? rc : resolve_all(s, &fr);
    if (rc != 0) {
        goto out;
    }
    rc = tmp_alloc(s, s->nstacks + 1, sizeof(*cnt), &cnt);
    rc = rc ? rc : tmp_alloc(s, s->nframes + 1, sizeof(*map), &map);
    rc = rc ? rc : tmp_alloc(s, s->nstacks + 1, sizeof(*pos), &pos);
    if (rc != 0) {
        goto out;
    }
    uint64_t managed = 0;
    for (size_t i = 0; i < s->nsamples; i++) {
        if (!s->samples[i].external) {
            cnt[s->samples[i].stack]++;
            managed++;
        }
    }
    for (size_t f = 0; f <= s->nframes; f++) {
        map[f] = NO_FRAME;
    }
    uint64_t threads = count_threads(s, &rc);
    rc = rc ? rc
            : buf_printf(&b,
                         "{\"pid\":%llu,\"kind\":\"cpu\",\"durationSeconds\":%u,\"samples\":%llu,"
                         "\"threads\":%llu,\"externalSamples\":%llu,\"samplingMilliseconds\":%.17g,"
                         "\"exclusiveSkips\":[",
                         (unsigned long long)pid, duration_s, (unsigned long long)managed,
                         (unsigned long long)threads, (unsigned long long)(s->nsamples - managed),
                         (double)s->sampling_ns / 1e6);
    rc = rc ? rc : json_skips(&b);
    rc = rc ? rc : buf_append_str(&b, "],");
    rc = rc ? rc : flame_frames(s, fr, cnt, map, &b, sink, ud);
    rc = rc ? rc : buf_append_str(&b, ",\"stacks\":[");
    uint32_t emitted = 0;
    for (size_t i = 0; rc == 0 && i < s->nstacks; i++) {
        const struct stack *st = &s->stacks[i];
        if (cnt[i] == 0) {
            continue;
        }
        rc = buf_printf(&b, "%s[%llu", emitted == 0 ? "" : ",", (unsigned long long)cnt[i]);
        pos[i] = emitted++;
        for (uint32_t k = st->n; rc == 0 && k > 0; k--) {
            rc = buf_printf(&b, ",%u", map[fr[s->ips[st->at + k - 1]]]);
        }
        rc = rc ? rc : buf_append_str(&b, "]");
        rc = rc ? rc : out_flush(&b, false, sink, ud);
    }
    rc = rc ? rc : buf_append_str(&b, "]");
    rc = rc ? rc : flame_threads(s, pos, (size_t)managed, &b, sink, ud);
    rc = rc ? rc : buf_append_str(&b, "}\n");
    rc = rc ? rc : out_flush(&b, true, sink, ud);
out:
    buf_fini(&b);
    tmp_free(s, pos);
    tmp_free(s, map);
    tmp_free(s, cnt);
    tmp_free(s, fr);
    return rc;
}

double ev_symbols_ticks_ms(struct ev_symbols *s, int64_t ticks)
{
    clock_from_header(s);
    return (double)ticks * 1000.0 / (double)s->qpc_freq;
}
