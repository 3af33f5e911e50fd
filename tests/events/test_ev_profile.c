/* SPDX-License-Identifier: MIT */
/*
 * events/ev_profile: GET /profile's alloc, exceptions, contention and gc summaries. Payloads built
 * by hand per ClrEtwAll.man's layouts (GCAllocationTick V2 and V4, ExceptionThrown V1,
 * ContentionStart/Stop V0-V2, GCStart V2, GCSuspendEEBegin V0 and V1, GCRestartEEEnd,
 * GCHeapStats V1 and V2, and payloads cut short), stacks interned in an ev_symbols with methods
 * of System.Private.CoreLib and of an app (sites skip the runtime's library, fall back to it, to
 * the EIP, to "?!?"); the JSON read back by cJSON and the text table checked for its rows; and two
 * real .NET 10 streams (tests/fixtures/nettrace: gc.nettrace, rundown_ct4.nettrace) fed whole.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "ev_profile.h"
#include "ev_symbols.h"
#include "fixture.h"
#include "membudget.h"
#include "wbuf.h"

#define CORELIB_MOD 0x10u
#define APP_MOD     0x20u
#define IP_CORELIB  0x1010u /* System.Threading.Monitor.Enter */
#define IP_ALLOC    0x2010u /* App.Worker.Allocate */
#define IP_THROW    0x3010u /* App.Worker.Throw */
#define IP_WAIT     0x4010u /* App.Worker.Wait */
#define IP_NOWHERE  0x9990u

struct fx {
    struct ev_symbols *sym;
    struct ev_profile *p;
};

static void add_module(struct ev_symbols *s, uint64_t id, const char *path)
{
    struct wb p = {0};
    wb_u64(&p, id);
    wb_u64(&p, id + 0x100);
    wb_u32(&p, 0x8);
    wb_u32(&p, 0);
    wb_wstr(&p, path);
    wb_wstr(&p, "");
    wb_u16(&p, 0);
    assert_int_equal(ev_symbols_add_module(s, p.b, p.n, 2), 0);
    free(p.b);
}

static void add_method(struct ev_symbols *s, uint64_t module, uint64_t start, const char *ns,
                       const char *name, const char *sig)
{
    struct wb p = {0};
    wb_u64(&p, 0x7f0000000000ull + start);
    wb_u64(&p, module);
    wb_u64(&p, start);
    wb_u32(&p, 0x100);
    wb_u32(&p, 0x06000001);
    wb_u32(&p, 0);
    wb_wstr(&p, ns);
    wb_wstr(&p, name);
    wb_wstr(&p, sig);
    wb_u16(&p, 0);
    wb_u64(&p, 0);
    assert_int_equal(ev_symbols_add_method(s, p.b, p.n, 2), 0);
    free(p.b);
}

static void fx_init(struct fx *f, enum ev_profile_kind kind)
{
    assert_int_equal(ev_symbols_new(&f->sym), 0);
    assert_int_equal(ev_profile_new(kind, f->sym, &f->p), 0);
    add_module(f->sym, CORELIB_MOD, "/usr/share/dotnet/System.Private.CoreLib.dll");
    add_module(f->sym, APP_MOD, "/app/App.dll");
    add_method(f->sym, CORELIB_MOD, 0x1000, "System.Threading.Monitor", "Enter", "void  (object)");
    add_method(f->sym, APP_MOD, 0x2000, "App.Worker", "Allocate", "void  ()");
    add_method(f->sym, APP_MOD, 0x3000, "App.Worker", "Throw", "void  ()");
    add_method(f->sym, APP_MOD, 0x4000, "App.Worker", "Wait", "void  ()");
}

static void fx_fini(struct fx *f)
{
    ev_profile_free(f->p);
    ev_symbols_free(f->sym);
}

/* An event with a stack of ips[0..n) (leaf first), or none when n == 0. */
static int add(struct fx *f, uint32_t id, uint32_t version, uint64_t thread, int64_t ts,
               const struct wb *payload, const uint64_t *ips, size_t n)
{
    struct ev_profile_event ev = {.id = id,
                                  .version = version,
                                  .thread = thread,
                                  .ts = ts,
                                  .payload = payload->b,
                                  .len = payload->n};
    if (n > 0) {
        assert_int_equal(ev_symbols_intern_stack(f->sym, ips, n, &ev.stack), 0);
        ev.has_stack = true;
    }
    return ev_profile_add(f->p, &ev);
}

static int sink(void *ud, const uint8_t *p, size_t n)
{
    return buf_append(ud, p, n);
}

static cJSON *json(struct fx *f, size_t top)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_profile_write_json(f->p, 42, 2, top, sink, &b), 0);
    cJSON *doc = cJSON_ParseWithLength((const char *)buf_data(&b), buf_size(&b));
    assert_non_null(doc);
    assert_int_equal(cJSON_GetObjectItem(doc, "pid")->valueint, 42);
    assert_int_equal(cJSON_GetObjectItem(doc, "durationSeconds")->valueint, 2);
    buf_fini(&b);
    return doc;
}

static char *text(struct fx *f)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_profile_write_text(f->p, 42, 2, 25, sink, &b), 0);
    assert_int_equal(buf_append(&b, "", 1), 0);
    char *s = strdup((const char *)buf_data(&b));
    buf_fini(&b);
    return s;
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    assert_non_null(v);
    return v->valuedouble;
}

static const char *str(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItem(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

/* GCAllocationTick: V4 has Address and ObjectSize after HeapIndex, V2 neither. */
static struct wb alloc_tick(uint32_t version, uint64_t bytes, const char *type)
{
    struct wb p = {0};
    wb_u32(&p, (uint32_t)bytes);
    wb_u32(&p, 0); /* small */
    wb_u16(&p, 0);
    wb_u64(&p, bytes);
    wb_u64(&p, 0x7f0000123400ull); /* TypeID */
    wb_wstr(&p, type);
    wb_u32(&p, 0); /* HeapIndex */
    if (version >= 3) {
        wb_u64(&p, 0x7e0000000000ull);
    }
    if (version >= 4) {
        wb_u64(&p, 1024);
    }
    return p;
}

static void test_alloc(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, EV_PROFILE_ALLOC);
    const uint64_t in_app[] = {IP_CORELIB, IP_ALLOC, IP_NOWHERE};
    const uint64_t other[] = {IP_THROW};
    const uint64_t corelib_only[] = {IP_NOWHERE, IP_CORELIB};
    struct wb big = alloc_tick(4, 100000, "App.Big");
    struct wb big2 = alloc_tick(2, 100000, "App.Big");
    struct wb str_tick = alloc_tick(4, 50000, "System.String");
    for (int i = 0; i < 3; i++) {
        assert_int_equal(add(&f, EV_PROFILE_ALLOCATION_TICK, 4, 1, i, &big, in_app, 3), 0);
    }
    assert_int_equal(add(&f, EV_PROFILE_ALLOCATION_TICK, 2, 1, 5, &big2, other, 1), 0);
    assert_int_equal(add(&f, EV_PROFILE_ALLOCATION_TICK, 4, 1, 6, &str_tick, corelib_only, 2), 0);
    /* Cut short (no HeapIndex): skipped and counted. */
    struct wb cut = alloc_tick(2, 100000, "App.Big");
    cut.n -= 2;
    assert_int_equal(add(&f, EV_PROFILE_ALLOCATION_TICK, 2, 1, 7, &cut, NULL, 0), AGENT_E_PROTO);
    /* Another kind's event is ignored. */
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 8, &cut, NULL, 0), 0);
    struct ev_profile_stats st;
    ev_profile_get_stats(f.p, &st);
    assert_int_equal(st.events, 6);
    assert_int_equal(st.malformed, 1);
    assert_int_equal(ev_profile_status(f.p), 0);

    cJSON *doc = json(&f, 25);
    assert_string_equal(str(doc, "kind"), "alloc");
    assert_int_equal((int)num(doc, "allocationTicks"), 5);
    assert_int_equal((int)num(doc, "sampledBytes"), 450000);
    const cJSON *types = cJSON_GetObjectItem(doc, "types");
    assert_int_equal(cJSON_GetArraySize(types), 2);
    const cJSON *t0 = cJSON_GetArrayItem(types, 0);
    assert_string_equal(str(t0, "type"), "App.Big");
    assert_int_equal((int)num(t0, "bytes"), 400000);
    assert_int_equal((int)num(t0, "ticks"), 4);
    assert_true(num(t0, "percent") > 88.88 && num(t0, "percent") < 88.90);
    const cJSON *sites = cJSON_GetObjectItem(t0, "sites");
    assert_int_equal(cJSON_GetArraySize(sites), 2);
    /* The first frame outside System.Private.CoreLib. */
    assert_string_equal(str(cJSON_GetArrayItem(sites, 0), "method"), "App!App.Worker.Allocate()");
    assert_int_equal((int)num(cJSON_GetArrayItem(sites, 0), "bytes"), 300000);
    assert_int_equal((int)num(cJSON_GetArrayItem(sites, 0), "ticks"), 3);
    assert_string_equal(str(cJSON_GetArrayItem(sites, 1), "method"), "App!App.Worker.Throw()");
    /* Only the runtime's library on the stack: its frame. */
    const cJSON *t1 = cJSON_GetArrayItem(types, 1);
    assert_string_equal(str(t1, "type"), "System.String");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(t1, "sites"), 0), "method"),
                        "System.Private.CoreLib!System.Threading.Monitor.Enter(object)");
    cJSON_Delete(doc);
    /* top=1 keeps one type; out of range is refused. */
    doc = json(&f, 1);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "types")), 1);
    cJSON_Delete(doc);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_profile_write_json(f.p, 1, 1, 0, sink, &b), AGENT_E_INVAL);
    assert_int_equal(ev_profile_write_text(f.p, 1, 1, EV_SYMBOLS_TOP_MAX + 1, sink, &b),
                     AGENT_E_INVAL);
    buf_fini(&b);
    char *t = text(&f);
    assert_non_null(strstr(t, "Allocations of pid 42 over 2 s: 5 ticks"));
    assert_non_null(strstr(t, "        400000   88.89        4  App.Big\n"));
    assert_non_null(strstr(t, "    at App!App.Worker.Allocate()\n"));
    free(t);
    free(big.b);
    free(big2.b);
    free(str_tick.b);
    free(cut.b);
    fx_fini(&f);
}

static struct wb exception(const char *type, const char *msg, uint64_t eip)
{
    struct wb p = {0};
    wb_wstr(&p, type);
    wb_wstr(&p, msg);
    wb_u64(&p, eip);
    wb_u32(&p, 0x80131509u);
    wb_u16(&p, 0x10);
    wb_u16(&p, 0);
    return p;
}

static void test_exceptions(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, EV_PROFILE_EXCEPTIONS);
    const uint64_t stack[] = {IP_CORELIB, IP_THROW, IP_ALLOC};
    struct wb m1 = exception("App.MyError", "first \"one\"", 0);
    struct wb m2 = exception("App.MyError", "second", IP_THROW + 4);
    struct wb other = exception("System.Exception", "x", 0);
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 1, &m1, stack, 3), 0);
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 2, &m2, stack, 3), 0);
    /* No stack: the EIP names the site; neither: "?!?". */
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 3, &m2, NULL, 0), 0);
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 4, &other, NULL, 0), 0);
    struct wb cut = exception("App.MyError", "m", 0);
    cut.n -= 3;
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 5, &cut, NULL, 0), AGENT_E_PROTO);

    cJSON *doc = json(&f, 25);
    assert_string_equal(str(doc, "kind"), "exceptions");
    assert_int_equal((int)num(doc, "exceptions"), 4);
    assert_int_equal((int)num(doc, "malformedEvents"), 1);
    const cJSON *types = cJSON_GetObjectItem(doc, "types");
    const cJSON *t0 = cJSON_GetArrayItem(types, 0);
    assert_string_equal(str(t0, "type"), "App.MyError");
    assert_int_equal((int)num(t0, "count"), 3);
    assert_true(num(t0, "percent") == 75.0);
    assert_string_equal(str(t0, "message"), "first \"one\"");
    const cJSON *sites = cJSON_GetObjectItem(t0, "sites");
    assert_int_equal(cJSON_GetArraySize(sites), 1);
    assert_string_equal(str(cJSON_GetArrayItem(sites, 0), "method"), "App!App.Worker.Throw()");
    assert_int_equal((int)num(cJSON_GetArrayItem(sites, 0), "count"), 3);
    const cJSON *t1 = cJSON_GetArrayItem(types, 1);
    assert_string_equal(str(t1, "type"), "System.Exception");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(t1, "sites"), 0), "method"),
                        EV_SYMBOLS_UNKNOWN);
    cJSON_Delete(doc);
    char *t = text(&f);
    assert_non_null(strstr(t, "Exceptions thrown in pid 42 over 2 s: 4\n"));
    assert_non_null(strstr(t, "       3   75.00  App.MyError\n"));
    assert_non_null(strstr(t, "e.g. \"first \"one\"\"\n"));
    free(t);
    free(m1.b);
    free(m2.b);
    free(other.b);
    free(cut.b);
    fx_fini(&f);
}

/* A stack none of whose frames is in a known method: the EIP still names the throw site. */
static void test_exception_eip_fallback(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, EV_PROFILE_EXCEPTIONS);
    const uint64_t unknown[] = {0x10, 0x20};
    struct wb m = exception("App.MyError", "m", IP_THROW + 4);
    assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, 1, &m, unknown, 2), 0);
    cJSON *doc = json(&f, 25);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "types"), 0);
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(t0, "sites"), 0), "method"),
                        "App!App.Worker.Throw()");
    cJSON_Delete(doc);
    free(m.b);
    fx_fini(&f);
}

static struct wb contention_stop(uint32_t version, double ns)
{
    struct wb p = {0};
    wb_u8(&p, 0);
    wb_u16(&p, 0);
    if (version >= 1) {
        wb_f64(&p, ns);
    }
    return p;
}

static void test_contention(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, EV_PROFILE_CONTENTION);
    struct wb start = {0}; /* V2: flags, ClrInstanceID, LockID, AssociatedObjectID, owner */
    wb_u8(&start, 0);
    wb_u16(&start, 0);
    wb_u64(&start, 0x1234);
    wb_u64(&start, 0x5678);
    wb_u64(&start, 77);
    const uint64_t waiting[] = {IP_CORELIB, IP_WAIT, IP_ALLOC};
    const uint64_t nowhere[] = {IP_NOWHERE};
    struct wb stop1 = contention_stop(1, 2.5e6);
    struct wb stop0 = contention_stop(0, 0);
    struct wb stop_alone = contention_stop(1, 1e6);
    /* Thread 1: DurationNs given. Thread 2: V0 stop, the time between (QPC at 1 GHz: 3 ms). */
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_START, 2, 1, 1000, &start, waiting, 3), 0);
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_START, 2, 2, 0, &start, waiting + 1, 2), 0);
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_STOP, 1, 1, 9000, &stop1, NULL, 0), 0);
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_STOP, 0, 2, 3000000, &stop0, nowhere, 1), 0);
    /* A stop without its start: counted at its own stack (none here). */
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_STOP, 1, 3, 5, &stop_alone, NULL, 0), 0);
    struct wb cut = contention_stop(1, 1.0);
    cut.n -= 1;
    assert_int_equal(add(&f, EV_PROFILE_CONTENTION_STOP, 1, 4, 5, &cut, NULL, 0), AGENT_E_PROTO);

    cJSON *doc = json(&f, 25);
    assert_string_equal(str(doc, "kind"), "contention");
    assert_int_equal((int)num(doc, "contentions"), 3);
    assert_true(num(doc, "waitMilliseconds") == 6.5);
    const cJSON *methods = cJSON_GetObjectItem(doc, "methods");
    assert_int_equal(cJSON_GetArraySize(methods), 2);
    const cJSON *m0 = cJSON_GetArrayItem(methods, 0);
    assert_string_equal(str(m0, "method"), "App!App.Worker.Wait()");
    assert_int_equal((int)num(m0, "count"), 2);
    assert_true(num(m0, "waitMilliseconds") == 5.5);
    assert_true(num(m0, "maxWaitMilliseconds") == 3.0);
    assert_string_equal(str(cJSON_GetArrayItem(methods, 1), "method"), EV_SYMBOLS_UNKNOWN);
    cJSON_Delete(doc);
    char *t = text(&f);
    assert_non_null(strstr(t, "Lock contention in pid 42 over 2 s: 3 waits, 6.500 ms waited\n"));
    assert_non_null(strstr(t, "       2        5.500   84.62      3.000  App!App.Worker.Wait()\n"));
    free(t);
    free(start.b);
    free(stop1.b);
    free(stop0.b);
    free(stop_alone.b);
    free(cut.b);
    fx_fini(&f);
}

static struct wb gc_start(uint32_t depth, uint32_t reason, uint32_t type)
{
    struct wb p = {0};
    wb_u32(&p, 7);
    wb_u32(&p, depth);
    wb_u32(&p, reason);
    wb_u32(&p, type);
    wb_u16(&p, 0);
    wb_u64(&p, 0); /* V2: ClientSequenceNumber */
    return p;
}

static struct wb heap_stats(uint32_t version, uint64_t base, uint64_t promoted)
{
    struct wb p = {0};
    for (uint64_t i = 0; i < 4; i++) {
        wb_u64(&p, base * (i + 1));
        wb_u64(&p, promoted * (i + 1));
    }
    wb_u64(&p, 0);
    wb_u64(&p, 0);
    wb_u32(&p, 1);
    wb_u32(&p, 2);
    wb_u32(&p, 3);
    wb_u16(&p, 0);
    if (version >= 2) {
        wb_u64(&p, base * 5);
        wb_u64(&p, promoted * 5);
    }
    return p;
}

static void suspend_restart(struct fx *f, uint32_t version, uint32_t reason, int64_t from,
                            int64_t to)
{
    struct wb s = {0};
    if (version >= 1) {
        wb_u32(&s, reason);
        wb_u32(&s, 7);
    } else {
        wb_u16(&s, reason);
    }
    wb_u16(&s, 0);
    struct wb r = {0};
    wb_u16(&r, 0);
    assert_int_equal(add(f, EV_PROFILE_GC_SUSPEND_EE, version, 1, from, &s, NULL, 0), 0);
    assert_int_equal(add(f, EV_PROFILE_GC_RESTART_EE_END, 1, 1, to, &r, NULL, 0), 0);
    free(s.b);
    free(r.b);
}

static void test_gc(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f, EV_PROFILE_GC);
    const uint32_t starts[][3] = {{0, 0, 0}, {2, 1, 0}, {2, 1, 1}, {1, 99, 0}};
    for (size_t i = 0; i < 4; i++) {
        struct wb p = gc_start(starts[i][0], starts[i][1], starts[i][2]);
        assert_int_equal(add(&f, EV_PROFILE_GC_START, 2, 1, 0, &p, NULL, 0), 0);
        free(p.b);
    }
    /* Pauses of 2, 1 and 4 ms (a V0 suspension among them); one not for a GC is not a pause. */
    suspend_restart(&f, 1, 1, 0, 2000000);
    suspend_restart(&f, 1, 0, 5000000, 9000000);
    suspend_restart(&f, 1, 6, 10000000, 11000000);
    suspend_restart(&f, 0, 1, 20000000, 24000000);
    struct wb h2 = heap_stats(2, 10, 1);
    struct wb h1 = heap_stats(1, 100, 1);
    assert_int_equal(add(&f, EV_PROFILE_GC_HEAP_STATS, 2, 1, 0, &h2, NULL, 0), 0);
    assert_int_equal(add(&f, EV_PROFILE_GC_HEAP_STATS, 1, 1, 0, &h1, NULL, 0), 0);
    h1.n -= 4;
    assert_int_equal(add(&f, EV_PROFILE_GC_HEAP_STATS, 1, 1, 0, &h1, NULL, 0), AGENT_E_PROTO);

    cJSON *doc = json(&f, 25);
    assert_string_equal(str(doc, "kind"), "gc");
    assert_int_equal((int)num(doc, "gcs"), 4);
    const cJSON *g = cJSON_GetObjectItem(doc, "generations");
    assert_int_equal((int)num(g, "gen0"), 1);
    assert_int_equal((int)num(g, "gen1"), 1);
    assert_int_equal((int)num(g, "gen2"), 2);
    assert_int_equal((int)num(doc, "background"), 1);
    const cJSON *r = cJSON_GetObjectItem(doc, "reasons");
    assert_int_equal((int)num(r, "AllocSmall"), 1);
    assert_int_equal((int)num(r, "Induced"), 2);
    assert_int_equal((int)num(r, "Other"), 1);
    const cJSON *p = cJSON_GetObjectItem(doc, "pauses");
    assert_int_equal((int)num(p, "count"), 3);
    assert_true(num(p, "totalMilliseconds") == 7.0);
    assert_true(num(p, "p50Milliseconds") == 2.0);
    assert_true(num(p, "p99Milliseconds") == 4.0);
    assert_true(num(p, "maxMilliseconds") == 4.0);
    /* The last heap stats (V1: no POH); promoted summed over both (15 + 10). */
    const cJSON *h = cJSON_GetObjectItem(doc, "heap");
    assert_int_equal((int)num(h, "gen0Bytes"), 100);
    assert_int_equal((int)num(h, "lohBytes"), 400);
    assert_int_equal((int)num(h, "pohBytes"), 0);
    assert_int_equal((int)num(h, "totalBytes"), 1000);
    assert_int_equal((int)num(doc, "promotedBytes"), 25);
    cJSON_Delete(doc);
    char *t = text(&f);
    assert_non_null(strstr(t, "GCs of pid 42 over 2 s: 4 (gen0 1, gen1 1, gen2 2; 1 background)"));
    assert_non_null(strstr(t, "Reasons: AllocSmall 1 Induced 2 Other 1\n"));
    assert_non_null(strstr(t, "       3        7.000      2.000      4.000      4.000\n"));
    free(t);
    free(h2.b);
    free(h1.b);
    fx_fini(&f);
}

static void test_empty_and_kinds(void **state)
{
    (void)state;
    enum ev_profile_kind k = EV_PROFILE_GC;
    assert_int_equal(ev_profile_kind_parse("Exceptions", &k), 0);
    assert_int_equal(k, EV_PROFILE_EXCEPTIONS);
    assert_int_equal(ev_profile_kind_parse("cpu", &k), AGENT_E_NOTFOUND);
    assert_string_equal(ev_profile_kind_name(EV_PROFILE_CONTENTION), "contention");
    for (int kind = EV_PROFILE_ALLOC; kind <= EV_PROFILE_GC; kind++) {
        struct fx f;
        fx_init(&f, (enum ev_profile_kind)kind);
        cJSON *doc = json(&f, 25);
        assert_int_equal((int)num(doc, "events"), 0);
        cJSON_Delete(doc);
        free(text(&f));
        fx_fini(&f);
    }
    ev_profile_free(NULL);
}

/* A real stream of kind fed whole through its ev_symbols: the summary as JSON. */
static cJSON *fixture_json(enum ev_profile_kind kind, const char *name)
{
    size_t n = 0;
    uint8_t *bytes = fixture_read("nettrace", name, &n);
    struct ev_symbols *sym = NULL;
    struct ev_profile *p = NULL;
    assert_int_equal(ev_symbols_new(&sym), 0);
    assert_int_equal(ev_profile_new(kind, sym, &p), 0);
    assert_int_equal(ev_symbols_feed(sym, bytes, n), 0);
    assert_int_equal(ev_symbols_finish(sym), 0);
    assert_int_equal(ev_profile_status(p), 0);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_profile_write_json(p, 1, 3, 25, sink, &b), 0);
    cJSON *doc = cJSON_ParseWithLength((const char *)buf_data(&b), buf_size(&b));
    assert_non_null(doc);
    char *printed = cJSON_PrintUnformatted(doc);
    print_message("%s: %s\n", name, printed);
    free(printed);
    buf_fini(&b);
    ev_profile_free(p);
    ev_symbols_free(sym);
    free(bytes);
    return doc;
}

/*
 * Real streams of a .NET 10 runtime (tests/fixtures/nettrace/README.md): gc.nettrace (GC keyword,
 * the app's `gc`, `alloc 20`, `gc`, `free`, `gc`: 8 GCStart, as TraceEvent counts them) and
 * rundown_ct4.nettrace (`throw 3`: three InvalidOperationException with their stacks; the rundown
 * has no method events, so no site has a name).
 */
static void test_fixtures(void **state)
{
    (void)state;
    cJSON *doc = fixture_json(EV_PROFILE_GC, "gc.nettrace");
    assert_int_equal((int)num(doc, "gcs"), 8);
    assert_int_equal((int)num(doc, "malformedEvents"), 0);
    const cJSON *g = cJSON_GetObjectItem(doc, "generations");
    assert_int_equal((int)num(g, "gen2"), 8);
    assert_int_equal((int)num(doc, "background"), 1);
    /* Three `gc` commands collect twice each; `alloc 20` (1 MiB arrays) triggers the other two. */
    const cJSON *r = cJSON_GetObjectItem(doc, "reasons");
    assert_int_equal((int)num(r, "Induced"), 6);
    assert_int_equal((int)num(r, "AllocLarge"), 2);
    const cJSON *p = cJSON_GetObjectItem(doc, "pauses");
    assert_int_equal((int)num(p, "count"), 8);
    assert_true(num(p, "p50Milliseconds") <= num(p, "p99Milliseconds"));
    assert_true(num(p, "p99Milliseconds") <= num(p, "maxMilliseconds"));
    assert_true(num(p, "maxMilliseconds") > 0.0 && num(p, "maxMilliseconds") < 1000.0);
    assert_true(num(cJSON_GetObjectItem(doc, "heap"), "totalBytes") > 0);
    cJSON_Delete(doc);

    doc = fixture_json(EV_PROFILE_EXCEPTIONS, "rundown_ct4.nettrace");
    assert_int_equal((int)num(doc, "exceptions"), 3);
    assert_int_equal((int)num(doc, "eventsWithoutStack"), 0);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(doc, "types"), 0);
    assert_string_equal(str(t0, "type"), "System.InvalidOperationException");
    assert_int_equal((int)num(t0, "count"), 3);
    assert_string_equal(str(t0, "message"), "TestApp exception 0");
    assert_string_equal(str(cJSON_GetArrayItem(cJSON_GetObjectItem(t0, "sites"), 0), "method"),
                        EV_SYMBOLS_UNKNOWN);
    cJSON_Delete(doc);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/*
 * Random payloads of every id read, versions 0-5, lengths 0-95, with and without stacks, for each
 * kind: every event is read or refused as malformed (never anything else), and the summaries are
 * written (the sanitizer builds and valgrind check the reads).
 */
static void test_random_payloads(void **state)
{
    (void)state;
    static const uint32_t ids[] = {EV_PROFILE_ALLOCATION_TICK,   EV_PROFILE_EXCEPTION_THROWN,
                                   EV_PROFILE_CONTENTION_START,  EV_PROFILE_CONTENTION_STOP,
                                   EV_PROFILE_GC_START,          EV_PROFILE_GC_SUSPEND_EE,
                                   EV_PROFILE_GC_RESTART_EE_END, EV_PROFILE_GC_HEAP_STATS};
    const uint64_t stack[] = {IP_CORELIB, IP_ALLOC, IP_NOWHERE};
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int kind = EV_PROFILE_ALLOC; kind <= EV_PROFILE_GC; kind++) {
        struct fx f;
        fx_init(&f, (enum ev_profile_kind)kind);
        for (int i = 0; i < 20000; i++) {
            uint64_t r = xorshift(&seed);
            struct wb p = {0};
            size_t len = (size_t)(r % 96);
            for (size_t k = 0; k < len; k++) {
                /* Mostly small bytes, so that strings end and sizes stay sane now and then. */
                uint64_t b = xorshift(&seed);
                wb_u8(&p, (unsigned)(b % 4 == 0 ? b >> 8 : b % 3));
            }
            struct wb empty = {0};
            int rc = add(&f, ids[(r >> 8) % 8], (uint32_t)((r >> 12) % 6), (r >> 16) % 4,
                         (int64_t)(r >> 20) % 1000000, len > 0 ? &p : &empty, stack,
                         (size_t)((r >> 24) % 4));
            assert_true(rc == 0 || rc == AGENT_E_PROTO);
            free(p.b);
        }
        assert_int_equal(ev_profile_status(f.p), 0);
        cJSON_Delete(json(&f, 3));
        free(text(&f));
        fx_fini(&f);
    }
}

/*
 * Distinct 2,000-character exception types (cut to 1,024) with 2,000-character messages (cut to
 * 256) until the profile refuses one: its error, how many it kept.
 */
static int flood_names(struct fx *f, unsigned *kept)
{
    static char type[2001], msg[2001];
    memset(type, 'T', 2000);
    memset(msg, 'm', 2000);
    int rc = 0;
    for (*kept = 0; rc == 0 && *kept < 100000; (*kept)++) {
        char id[16];
        snprintf(id, sizeof(id), "%08u", *kept);
        memcpy(type, id, 8);
        struct wb e = exception(type, msg, 0);
        rc = add(f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, *kept, &e, NULL, 0);
        free(e.b);
    }
    (*kept)--;
    return rc;
}

/* Names are bounded in bytes (EV_PROFILE_MAX_NAME_BYTES), and everything is charged to the
 * profile's share: over it, AGENT_E_BUDGET; all of it given back at the end. */
static void test_name_bytes(void **state)
{
    (void)state;
    struct fx f;
    unsigned kept;
    fx_init(&f, EV_PROFILE_EXCEPTIONS);
    assert_int_equal(flood_names(&f, &kept), AGENT_E_TOOBIG);
    assert_int_equal(ev_profile_status(f.p), 0); /* added directly: the caller's rc */
    /* 1,025 + 257 bytes and a pointer per type: 16 MiB hold about 13,000. */
    print_message("names bounded at %u types, %llu bytes charged\n", kept,
                  (unsigned long long)membudget_used());
    assert_true(kept > 12000 && kept < 13200);
    assert_true(membudget_used() < EV_PROFILE_MAX_NAME_BYTES + (4u << 20));
    fx_fini(&f);
    assert_int_equal(membudget_used(), 0);

    struct mb_share sh;
    mb_share_init(&sh, "profile", (uint64_t)1 << 20);
    fx_init(&f, EV_PROFILE_EXCEPTIONS);
    assert_int_equal(ev_profile_set_share(f.p, &sh), 0);
    assert_int_equal(flood_names(&f, &kept), AGENT_E_BUDGET);
    print_message("a 1 MiB share: %u types, peak %llu bytes\n", kept,
                  (unsigned long long)atomic_load(&sh.peak));
    assert_true(kept > 500 && kept < 820);
    assert_true(atomic_load(&sh.peak) <= (uint64_t)1 << 20);
    assert_true(atomic_load(&sh.used) > 0);
    assert_int_equal(ev_profile_set_share(f.p, NULL), AGENT_E_INVAL); /* too late */
    fx_fini(&f);
    assert_int_equal(atomic_load(&sh.used), 0);
    assert_int_equal(membudget_used(), 0);
}

/* At the name-bytes cap a new type still goes in when only its message does not fit: the
 * message is dropped (counted) and the profile goes on, its summary too. */
static void test_message_dropped_at_cap(void **state)
{
    (void)state;
    struct fx f;
    unsigned kept;
    fx_init(&f, EV_PROFILE_EXCEPTIONS);
    assert_int_equal(flood_names(&f, &kept), AGENT_E_TOOBIG); /* less than a long type left */
    struct ev_profile_stats st;
    ev_profile_get_stats(f.p, &st);
    uint64_t dropped_before = st.messages_dropped;
    static char msg[2001];
    memset(msg, 'm', 2000);
    char type[16] = "";
    unsigned added = 0;
    /* 16 MiB = 13,086 x (1,025 + 257) + 964: 3 short types (10 bytes) keep their message (257),
     * the 4th fits without (153 bytes left then, room for its site's name). */
    while (st.messages_dropped == dropped_before && added < 100) {
        snprintf(type, sizeof(type), "S%08u", added++);
        struct wb e = exception(type, msg, 0);
        assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, (int64_t)added, &e, NULL, 0),
                         0);
        free(e.b);
        ev_profile_get_stats(f.p, &st);
    }
    assert_int_equal(st.messages_dropped - dropped_before, 1);
    assert_int_equal(added, 4);
    assert_int_equal(ev_profile_status(f.p), 0);
    for (unsigned i = 0; i < added; i++) { /* thrown twice: the top 4 */
        char again[16];
        snprintf(again, sizeof(again), "S%08u", i);
        struct wb e = exception(again, msg, 0);
        assert_int_equal(add(&f, EV_PROFILE_EXCEPTION_THROWN, 1, 1, (int64_t)i, &e, NULL, 0), 0);
        free(e.b);
    }
    cJSON *doc = json(&f, 4);
    assert_int_equal((int)num(doc, "exceptions"), (int)(kept + 2 * added));
    const cJSON *t = NULL;
    int seen = 0;
    cJSON_ArrayForEach(t, cJSON_GetObjectItem(doc, "types"))
    {
        const char *name = str(t, "type");
        assert_int_equal(strncmp(name, "S0000000", 8), 0);
        bool last = strcmp(name, type) == 0; /* the one whose message was dropped */
        assert_int_equal(strlen(str(t, "message")), last ? 0 : 256); /* "" when not kept */
        seen++;
    }
    assert_int_equal(seen, 4);
    cJSON_Delete(doc);
    fx_fini(&f);
    assert_int_equal(membudget_used(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_message_dropped_at_cap),
        cmocka_unit_test(test_alloc),
        cmocka_unit_test(test_exceptions),
        cmocka_unit_test(test_exception_eip_fallback),
        cmocka_unit_test(test_contention),
        cmocka_unit_test(test_gc),
        cmocka_unit_test(test_empty_and_kinds),
        cmocka_unit_test(test_fixtures),
        cmocka_unit_test(test_random_payloads),
        cmocka_unit_test(test_name_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
