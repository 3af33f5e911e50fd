/* SPDX-License-Identifier: MIT */
/*
 * events/ev_exc: the first-chance exception history behind /exceptions. ExceptionThrown_V1
 * payloads built by hand (wbuf.h) against an ev_symbols with a few methods and modules, the three
 * shapes read back (NDJSON and JSON sequence parsed by cJSON: ids, .NET "O" timestamps, escaping,
 * frames in order with parameterTypes []; the text compared whole), a live tail (after_id),
 * dotnet-monitor's filter semantics entry by entry (the include/exclude asymmetry without a top
 * frame) and its configuration document, the bounds (instances, bytes, a tiny share refusing
 * with AGENT_E_BUDGET, every byte given back), 30,000-character strings cut, malformed payloads,
 * the groups (kept by stack, written by the thrower as shown and merged, .NET 9+'s
 * System.Runtime.EH frames skipped, the store's filters), and a real runtime's stream
 * (tests/fixtures/nettrace/rundown_ct4.nettrace).
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
#include "ev_exc.h"
#include "ev_profile.h"
#include "ev_stacks.h"
#include "ev_store.h"
#include "ev_symbols.h"
#include "fixture.h"
#include "membudget.h"
#include "nettrace.h"
#include "utf8.h"
#include "wbuf.h"

#define CORELIB "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/System.Private.CoreLib.dll"
#define T0      1796010311805635500ll /* 2026-11-30T03:45:11.8056355Z */
#define T0_TEXT "2026-11-30T03:45:11.8056355Z"

#define IP_THROW       0x1010u /* App.Worker.Throw, TestApp.dll */
#define IP_HELPER      0x2010u /* System.ThrowHelper.ThrowInvalidOperationException, CoreLib */
#define IP_MAIN        0x3010u /* App.Program.Main, TestApp.dll */
#define IP_ORPHAN      0x4010u /* Orphan: no namespace, no module event */
#define IP_NATIVE      0x9990u
#define IP_EH_THROW    0x5010u /* System.Runtime.EH.RhThrowEx, CoreLib (.NET 9+'s dispatch) */
#define IP_EH_DISPATCH 0x6010u /* System.Runtime.EH.DispatchEx, CoreLib */

/* s (UTF-8) as a NUL-terminated UTF-16LE string. */
static void wstr(struct wb *w, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t len = 0;
        assert_true(utf8_decode((const uint8_t *)s + i, n - i, &cp, &len));
        uint8_t u[4];
        wb_raw(w, u, utf16le_encode(u, cp));
        i += len;
    }
    wb_u16(w, 0);
}

/* An ExceptionThrown_V1 payload (8-byte pointers unless ptr is 4). */
static struct wb payload(const char *type, const char *msg, uint64_t eip, size_t ptr)
{
    struct wb p = {0};
    wstr(&p, type);
    wstr(&p, msg);
    wb_le(&p, eip, ptr);
    wb_u32(&p, 0x80131509u);
    wb_u16(&p, 0x10);
    wb_u16(&p, 7);
    return p;
}

static int add_ex(struct ev_exc *x, int64_t ns, uint64_t thread, const char *type, const char *msg,
                  uint64_t eip, const uint64_t *ips, size_t n)
{
    struct wb p = payload(type, msg, eip, 8);
    struct ev_exc_event e = {.unix_ns = ns,
                             .thread = thread,
                             .payload = p.b,
                             .len = p.n,
                             .version = 1,
                             .pointer_size = 8,
                             .ips = ips,
                             .n_ips = n};
    int rc = ev_exc_add(x, &e);
    free(p.b);
    return rc;
}

static void add_module(struct ev_symbols *s, uint64_t id, const char *il_path)
{
    struct wb p = {0};
    wb_u64(&p, id);
    wb_u64(&p, id + 0x100);
    wb_u32(&p, 0x8);
    wb_u32(&p, 0);
    wstr(&p, il_path);
    wstr(&p, "");
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
    wb_u32(&p, 0x06000000u + (uint32_t)(start >> 12));
    wb_u32(&p, 0);
    wstr(&p, ns);
    wstr(&p, name);
    wstr(&p, sig);
    wb_u16(&p, 0);
    wb_u64(&p, 0);
    assert_int_equal(ev_symbols_add_method(s, p.b, p.n, 2), 0);
    free(p.b);
}

static struct ev_symbols *symbols(void)
{
    struct ev_symbols *s = NULL;
    assert_int_equal(ev_symbols_new(&s), 0);
    add_module(s, 1, CORELIB);
    add_module(s, 2, "/app/TestApp.dll");
    add_method(s, 2, 0x1000, "App.Worker", "Throw", "void  (int32)");
    add_method(s, 1, 0x2000, "System.ThrowHelper", "ThrowInvalidOperationException", "void  ()");
    add_method(s, 2, 0x3000, "App.Program", "Main", "void  (string[])");
    add_method(s, 99, 0x4000, "", "Orphan", "void  ()");
    return s;
}

static struct ev_exc *store(size_t max_instances, size_t max_bytes, struct mb_share *share)
{
    struct ev_exc_limits lim = {
        .max_instances = max_instances, .max_bytes = max_bytes, .share = share};
    struct ev_exc *x = NULL;
    assert_int_equal(ev_exc_new(&lim, &x), 0);
    return x;
}

/*
 * The five exceptions most tests read:
 *  1 InvalidOperationException with a message to escape, thrown in App.Worker.Throw, a native
 *    run of two addresses, then App.Program.Main;
 *  2 App.MyError without a message, from CoreLib's ThrowHelper called by App.Worker.Throw;
 *  3 System.Exception without a stack (its EIP in App.Program.Main);
 *  4 App.MyError again from the same site as 2;
 *  5 App.Odd from a method with no namespace and no module event.
 */
static struct ev_exc *five(void)
{
    struct ev_exc *x = store(EV_EXC_DEFAULT_HISTORY, 1u << 20, NULL);
    const uint64_t s1[] = {IP_THROW, IP_NATIVE, IP_NATIVE + 8, IP_MAIN};
    const uint64_t s2[] = {IP_HELPER, IP_THROW};
    const uint64_t s5[] = {IP_ORPHAN};
    assert_int_equal(add_ex(x, T0, 0x68C0, "System.InvalidOperationException",
                            "Bad \"state\"\nline 2\t\\", 0, s1, 4),
                     0);
    assert_int_equal(add_ex(x, T0 + 1000000099ll, 7, "App.MyError", "", 0, s2, 2), 0);
    assert_int_equal(
        add_ex(x, T0 + 2000000000ll, 7, "System.Exception", "no stack", IP_MAIN, NULL, 0), 0);
    assert_int_equal(add_ex(x, T0 + 3000000000ll, 7, "App.MyError", "again", 0, s2, 2), 0);
    assert_int_equal(add_ex(x, T0 + 4000000000ll, 9, "App.Odd", "odd", 0, s5, 1), 0);
    return x;
}

static const char *names_of(void *ud, uint64_t thread)
{
    (void)ud;
    return thread == 0x68C0 ? "worker \"1\"" : NULL;
}

static int to_buf(void *ud, const uint8_t *p, size_t n)
{
    return buf_append(ud, p, n);
}

static int fail_sink(void *ud, const uint8_t *p, size_t n)
{
    (void)ud;
    (void)p;
    (void)n;
    return AGENT_E_CLOSED;
}

struct out {
    const struct ev_exc_filter *include;
    size_t ninclude;
    const struct ev_exc_filter *exclude;
    size_t nexclude;
    uint64_t after;
    uint64_t last;
};

/* ev_exc_write's output as a C string (the caller frees). */
static char *write_out(struct ev_exc *x, struct ev_symbols *sym, enum ev_exc_format fmt,
                       struct out *o)
{
    struct out none = {0};
    o = o != NULL ? o : &none;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_exc_write(x, sym, o->include, o->ninclude, o->exclude, o->nexclude, fmt,
                                  o->after, &o->last, names_of, NULL, to_buf, &b),
                     0);
    size_t len = 0;
    char *s = buf_steal(&b, &len);
    assert_non_null(s);
    return s;
}

static const char *str(const cJSON *o, const char *name)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItem(o, name));
    assert_non_null(s);
    return s;
}

static double num(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItem(o, name);
    assert_true(cJSON_IsNumber(v));
    return cJSON_GetNumberValue(v);
}

/* NDJSON lines parsed into an array (each line one object). */
static cJSON *lines(const char *s)
{
    cJSON *all = cJSON_CreateArray();
    while (*s != '\0') {
        const char *nl = strchr(s, '\n');
        assert_non_null(nl);
        cJSON *doc = cJSON_ParseWithLength(s, (size_t)(nl - s));
        assert_non_null(doc);
        cJSON_AddItemToArray(all, doc);
        s = nl + 1;
    }
    return all;
}

static void assert_frame(const cJSON *f, const char *method, const char *type, const char *module)
{
    assert_string_equal(str(f, "methodName"), method);
    assert_string_equal(str(f, "typeName"), type);
    assert_string_equal(str(f, "moduleName"), module);
    assert_string_equal(str(f, "moduleVersionId"), EV_STACKS_EMPTY_GUID);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(f, "hidden")));
    const cJSON *pt = cJSON_GetObjectItem(f, "parameterTypes");
    assert_true(cJSON_IsArray(pt));
    assert_int_equal(cJSON_GetArraySize(pt), 0);
}

static void check_first(const cJSON *e)
{
    assert_true(num(e, "id") == 1);
    assert_string_equal(str(e, "timestamp"), T0_TEXT);
    assert_string_equal(str(e, "typeName"), "System.InvalidOperationException");
    assert_string_equal(str(e, "moduleName"), "");
    assert_string_equal(str(e, "message"), "Bad \"state\"\nline 2\t\\");
    assert_null(cJSON_GetObjectItem(e, "activity"));
    const cJSON *inner = cJSON_GetObjectItem(e, "innerExceptions");
    assert_true(cJSON_IsArray(inner));
    assert_int_equal(cJSON_GetArraySize(inner), 0);
    const cJSON *st = cJSON_GetObjectItem(e, "stack");
    assert_true(num(st, "threadId") == 0x68C0);
    assert_string_equal(str(st, "threadName"), "worker \"1\"");
    const cJSON *frames = cJSON_GetObjectItem(st, "frames");
    assert_int_equal(cJSON_GetArraySize(frames), 3);
    assert_frame(cJSON_GetArrayItem(frames, 0), "Throw", "App.Worker", "TestApp.dll");
    assert_true(num(cJSON_GetArrayItem(frames, 0), "methodToken") == 0x06000001);
    assert_frame(cJSON_GetArrayItem(frames, 1), EV_STACKS_NATIVE_FRAME, EV_STACKS_NATIVE_FRAME,
                 EV_STACKS_NATIVE_FRAME);
    assert_true(num(cJSON_GetArrayItem(frames, 1), "methodToken") == 0);
    assert_frame(cJSON_GetArrayItem(frames, 2), "Main", "App.Program", "TestApp.dll");
}

static void test_ev_exc_ndjson(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    struct out o = {0};
    char *s = write_out(x, sym, EV_EXC_NDJSON, &o);
    assert_true(o.last == 5);
    /* dotnet-monitor's property order, parameterTypes after methodToken. */
    assert_non_null(strstr(s, "{\"id\":1,\"timestamp\":\"" T0_TEXT "\",\"typeName\":"));
    assert_non_null(strstr(s, "\"methodToken\":100663297,\"parameterTypes\":[],\"typeName\":"));
    assert_non_null(strstr(s, "\"innerExceptions\":[],\"stack\":{\"threadId\":26816,"));
    cJSON *all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), 5);
    check_first(cJSON_GetArrayItem(all, 0));
    const cJSON *e2 = cJSON_GetArrayItem(all, 1);
    assert_true(num(e2, "id") == 2);
    /* 99 ns past the tick: .NET's 100 ns resolution drops them. */
    assert_string_equal(str(e2, "timestamp"), "2026-11-30T03:45:12.8056355Z");
    assert_string_equal(str(e2, "message"), "");
    const cJSON *st2 = cJSON_GetObjectItem(e2, "stack");
    assert_string_equal(str(st2, "threadName"), "");
    const cJSON *f2 = cJSON_GetObjectItem(st2, "frames");
    assert_frame(cJSON_GetArrayItem(f2, 0), "ThrowInvalidOperationException", "System.ThrowHelper",
                 "System.Private.CoreLib.dll");
    assert_frame(cJSON_GetArrayItem(f2, 1), "Throw", "App.Worker", "TestApp.dll");
    const cJSON *e3 = cJSON_GetArrayItem(all, 2);
    assert_string_equal(str(e3, "typeName"), "System.Exception");
    assert_int_equal(
        cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(e3, "stack"), "frames")), 0);
    const cJSON *e5 = cJSON_GetArrayItem(all, 4);
    assert_frame(
        cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(e5, "stack"), "frames"), 0),
        "Orphan", EV_STACKS_UNKNOWN_CLASS, EV_STACKS_UNKNOWN_MODULE);
    cJSON_Delete(all);
    free(s);
    /* Without symbols every frame is native: one frame per run. */
    s = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    all = lines(s);
    const cJSON *f1 =
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(all, 0), "stack"), "frames");
    assert_int_equal(cJSON_GetArraySize(f1), 1);
    assert_string_equal(str(cJSON_GetArrayItem(f1, 0), "methodName"), EV_STACKS_NATIVE_FRAME);
    cJSON_Delete(all);
    free(s);
    ev_exc_free(x);
    ev_symbols_free(sym);
    assert_int_equal(membudget_used(), 0);
}

/* RFC 7464: each record is 0x1E, the JSON, "\n". */
static void test_ev_exc_json_seq(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    char *s = write_out(x, sym, EV_EXC_JSON_SEQ, NULL);
    const char *p = s;
    int n = 0;
    while (*p != '\0') {
        assert_int_equal(*p, 0x1E);
        const char *nl = strchr(p, '\n');
        assert_non_null(nl);
        cJSON *doc = cJSON_ParseWithLength(p + 1, (size_t)(nl - p - 1));
        assert_non_null(doc);
        assert_true(num(doc, "id") == n + 1);
        if (n == 0) {
            check_first(doc);
        }
        cJSON_Delete(doc);
        p = nl + 1;
        n++;
    }
    assert_int_equal(n, 5);
    free(s);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

/* dotnet-monitor's text: the exception without frames (3) is not written. */
static void test_ev_exc_text(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    char *s = write_out(x, sym, EV_EXC_TEXT, NULL);
    assert_string_equal(s, "First chance exception at " T0_TEXT "\n"
                           "System.InvalidOperationException: Bad \"state\"\nline 2\t\\\n"
                           "   at App.Worker.Throw\n"
                           "   at [NativeFrame].[NativeFrame]\n"
                           "   at App.Program.Main\n"
                           "\n"
                           "First chance exception at 2026-11-30T03:45:12.8056355Z\n"
                           "App.MyError\n"
                           "   at System.ThrowHelper.ThrowInvalidOperationException\n"
                           "   at App.Worker.Throw\n"
                           "\n"
                           "First chance exception at 2026-11-30T03:45:14.8056355Z\n"
                           "App.MyError: again\n"
                           "   at System.ThrowHelper.ThrowInvalidOperationException\n"
                           "   at App.Worker.Throw\n"
                           "\n"
                           "First chance exception at 2026-11-30T03:45:15.8056355Z\n"
                           "App.Odd: odd\n"
                           "   at UnknownClass.Orphan\n"
                           "\n");
    free(s);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

/* Times before 1970 and at the edges of a second, in 100 ns ticks rounded down: in JSON as
 * System.Text.Json writes them (trailing zeros of the fraction dropped), in the text as .NET's
 * "O" (always 7 digits). */
static void test_ev_exc_timestamps(void **state)
{
    (void)state;
    static const struct {
        int64_t ns;
        const char *json;
        const char *text;
    } cases[] = {
        {0, "1970-01-01T00:00:00Z", "1970-01-01T00:00:00.0000000Z"},
        {-1, "1969-12-31T23:59:59.9999999Z", "1969-12-31T23:59:59.9999999Z"},
        {-100, "1969-12-31T23:59:59.9999999Z", "1969-12-31T23:59:59.9999999Z"},
        {-101, "1969-12-31T23:59:59.9999998Z", "1969-12-31T23:59:59.9999998Z"},
        {999999999, "1970-01-01T00:00:00.9999999Z", "1970-01-01T00:00:00.9999999Z"},
        {500000000, "1970-01-01T00:00:00.5Z", "1970-01-01T00:00:00.5000000Z"},
        {120000000, "1970-01-01T00:00:00.12Z", "1970-01-01T00:00:00.1200000Z"},
        {951782400000000000ll, "2000-02-29T00:00:00Z", "2000-02-29T00:00:00.0000000Z"},
    };
    const size_t n = sizeof(cases) / sizeof(cases[0]);
    uint64_t ip = 0x1000; /* a frame, so that the text shows every instance */
    struct ev_exc *x = store(10, 1u << 20, NULL);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(add_ex(x, cases[i].ns, 1, "T", "m", 0, &ip, 1), 0);
    }
    char *s = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(str(cJSON_GetArrayItem(all, (int)i), "timestamp"), cases[i].json);
    }
    cJSON_Delete(all);
    free(s);
    s = write_out(x, NULL, EV_EXC_TEXT, NULL);
    const char *p = s;
    for (size_t i = 0; i < n; i++) {
        char want[80];
        snprintf(want, sizeof(want), "First chance exception at %s\n", cases[i].text);
        p = strstr(p, want);
        assert_non_null(p);
        p += strlen(want);
    }
    free(s);
    ev_exc_free(x);
}

/* The ids written, "1,2,…", for a set of filters. */
static char *ids(struct ev_exc *x, struct ev_symbols *sym, const struct ev_exc_filter *inc,
                 size_t ninc, const struct ev_exc_filter *exc, size_t nexc)
{
    struct out o = {.include = inc, .ninclude = ninc, .exclude = exc, .nexclude = nexc};
    char *s = write_out(x, sym, EV_EXC_NDJSON, &o);
    cJSON *all = lines(s);
    struct buf b;
    buf_init(&b, 0);
    for (int i = 0; i < cJSON_GetArraySize(all); i++) {
        assert_int_equal(
            buf_printf(&b, "%s%d", i > 0 ? "," : "", (int)num(cJSON_GetArrayItem(all, i), "id")),
            0);
    }
    cJSON_Delete(all);
    free(s);
    size_t len = 0;
    char *r = buf_steal(&b, &len);
    assert_non_null(r);
    return r;
}

#define ASSERT_IDS(want, inc, ninc, exc, nexc)                                                     \
    do {                                                                                           \
        char *got_ = ids(x, sym, inc, ninc, exc, nexc);                                            \
        assert_string_equal(got_, want);                                                           \
        free(got_);                                                                                \
    } while (0)

/*
 * ExceptionsConfigurationSettings' semantics on five()'s exceptions (top frames: 1 App.Worker.Throw
 * in TestApp.dll, 2 and 4 System.ThrowHelper.ThrowInvalidOperationException in
 * System.Private.CoreLib.dll, 3 none, 5 UnknownClass.Orphan in UnknownModule).
 */
static void test_ev_exc_filters(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    const struct ev_exc_filter my_error = {.exception_type = "App.MyError"};
    const struct ev_exc_filter throw_m = {.method_name = "Throw"};
    const struct ev_exc_filter app_mod = {.module_name = "TestApp.dll"};
    const struct ev_exc_filter no_ext = {.module_name = "TestApp"};
    const struct ev_exc_filter helper = {.type_name = "System.ThrowHelper",
                                         .method_name = "ThrowInvalidOperationException"};
    const struct ev_exc_filter helper_exc = {.type_name = "System.ThrowHelper",
                                             .exception_type = "System.Exception"};
    const struct ev_exc_filter corelib = {.module_name = "System.Private.CoreLib.dll"};
    const struct ev_exc_filter throw_exc = {.method_name = "Throw",
                                            .exception_type = "System.Exception"};
    const struct ev_exc_filter empty = {0};
    const struct ev_exc_filter blank = {.exception_type = "", .method_name = ""};
    const struct ev_exc_filter lower = {.exception_type = "app.myerror"};
    const struct ev_exc_filter unknown = {.type_name = EV_STACKS_UNKNOWN_CLASS,
                                          .module_name = EV_STACKS_UNKNOWN_MODULE};
    const struct ev_exc_filter two[] = {{.exception_type = "App.Odd"},
                                        {.exception_type = "System.InvalidOperationException"}};

    ASSERT_IDS("1,2,3,4,5", NULL, 0, NULL, 0);
    ASSERT_IDS("2,4", &my_error, 1, NULL, 0);
    ASSERT_IDS("1,3,5", NULL, 0, &my_error, 1);
    /* Without a top frame the frame's members are not compared: an include entry naming only
     * them keeps 3, the same exclude entry does not drop it. */
    ASSERT_IDS("1,3", &throw_m, 1, NULL, 0);
    ASSERT_IDS("2,3,4,5", NULL, 0, &throw_m, 1);
    ASSERT_IDS("1,3", &app_mod, 1, NULL, 0);
    ASSERT_IDS("3", &no_ext, 1, NULL, 0);
    ASSERT_IDS("2,3,4", &helper, 1, NULL, 0);
    /* 3: only its type is compared; 2 and 4: the frame matches, the type does not. */
    ASSERT_IDS("3", &helper_exc, 1, NULL, 0);
    ASSERT_IDS("1,2,4,5", NULL, 0, &throw_exc, 1);
    /* Exclude first, then include. */
    ASSERT_IDS("3", &corelib, 1, &my_error, 1);
    /* Nothing compared: an include entry keeps everything, an exclude entry drops nothing. */
    ASSERT_IDS("1,2,3,4,5", &empty, 1, NULL, 0);
    ASSERT_IDS("1,2,3,4,5", NULL, 0, &empty, 1);
    ASSERT_IDS("1,2,3,4,5", &blank, 1, &blank, 1);
    ASSERT_IDS("", &lower, 1, NULL, 0);
    ASSERT_IDS("3,5", &unknown, 1, NULL, 0);
    ASSERT_IDS("1,5", two, 2, NULL, 0);
    ASSERT_IDS("5", two, 2, &throw_m, 1);

    /* The text applies the same filters. */
    struct out o = {.include = &my_error, .ninclude = 1};
    char *s = write_out(x, sym, EV_EXC_TEXT, &o);
    assert_non_null(strstr(s, "App.MyError: again\n"));
    assert_null(strstr(s, "System.InvalidOperationException"));
    free(s);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

/* The POST /exceptions body, parsed and used. */
static void test_ev_exc_filters_parse(void **state)
{
    (void)state;
    char err[160] = "";
    struct ev_exc_filters *f = NULL;
    const char *doc = "{\"include\":[{\"exceptionType\":\"App.MyError\"},"
                      "{\"TypeName\":\"App.Worker\",\"methodName\":null,\"moduleName\":"
                      "\"TestApp.dll\"}],\"Exclude\":[{\"methodName\":\"ThrowInvalid\\u004F"
                      "perationException\"}]}";
    assert_int_equal(ev_exc_filters_parse(doc, strlen(doc), &f, err, sizeof(err)), 0);
    assert_int_equal(f->ninclude, 2);
    assert_int_equal(f->nexclude, 1);
    assert_string_equal(f->include[0].exception_type, "App.MyError");
    assert_null(f->include[0].type_name);
    assert_string_equal(f->include[1].type_name, "App.Worker");
    assert_null(f->include[1].method_name);
    assert_string_equal(f->include[1].module_name, "TestApp.dll");
    assert_string_equal(f->exclude[0].method_name, "ThrowInvalidOperationException");
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    /* 3 has no top frame: the second include entry compares nothing and keeps it. */
    ASSERT_IDS("1,3", f->include, f->ninclude, f->exclude, f->nexclude);
    ev_exc_free(x);
    ev_symbols_free(sym);
    ev_exc_filters_free(f);

    static const char *const empty[] = {"{}", "{\"include\":null,\"exclude\":[]}",
                                        "{\"include\":[],\"include\":null}"};
    for (size_t i = 0; i < sizeof(empty) / sizeof(empty[0]); i++) {
        f = NULL;
        assert_int_equal(ev_exc_filters_parse(empty[i], strlen(empty[i]), &f, err, sizeof(err)), 0);
        assert_int_equal(f->ninclude + f->nexclude, 0);
        ev_exc_filters_free(f);
    }
    static const struct {
        const char *doc;
        const char *msg;
    } bad[] = {
        {"", "exceptions configuration: not JSON"},
        {"{\"include\":[", "exceptions configuration: not JSON"},
        {"[]", "exceptions configuration: not a JSON object"},
        {"null", "exceptions configuration: not a JSON object"},
        {"{\"includes\":[]}", "exceptions configuration: unknown member \"includes\""},
        {"{\"include\":{}}", "include: not an array"},
        {"{\"exclude\":[{\"exceptionType\":\"A\"},3]}", "exclude[1]: not an object"},
        {"{\"include\":[{\"stackDepth\":1}]}", "include[0]: unknown member \"stackDepth\""},
        {"{\"include\":[{\"methodName\":5}]}", "include[0].methodName: not a string"},
        {"{\"exclude\":[{\"moduleName\":[\"x\"]}]}", "exclude[0].moduleName: not a string"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        f = NULL;
        assert_int_equal(ev_exc_filters_parse(bad[i].doc, strlen(bad[i].doc), &f, err, sizeof(err)),
                         AGENT_E_INVAL);
        assert_null(f);
        assert_string_equal(err, bad[i].msg);
    }
    /* The length bounds the document: what follows is not read. */
    assert_int_equal(ev_exc_filters_parse("{}garbage", 2, &f, err, sizeof(err)), 0);
    ev_exc_filters_free(f);
    ev_exc_filters_free(NULL);
}

/* A live tail: each write starts after the last id the one before looked at. */
static void test_ev_exc_after_id(void **state)
{
    (void)state;
    struct ev_exc *x = store(4, 1u << 20, NULL);
    struct out o = {0};
    char *s = write_out(x, NULL, EV_EXC_NDJSON, &o);
    assert_string_equal(s, "");
    assert_true(o.last == 0);
    free(s);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "T", "m", 0, NULL, 0), 0);
    }
    o.after = 1;
    s = write_out(x, NULL, EV_EXC_NDJSON, &o);
    cJSON *all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), 2);
    assert_true(num(cJSON_GetArrayItem(all, 0), "id") == 2);
    assert_true(o.last == 3);
    cJSON_Delete(all);
    free(s);
    /* Filtered out still counts as looked at. */
    const struct ev_exc_filter none = {.exception_type = "Nothing"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "T", "m", 0, NULL, 0), 0);
    }
    o = (struct out){.after = 3, .include = &none, .ninclude = 1};
    s = write_out(x, NULL, EV_EXC_NDJSON, &o);
    assert_string_equal(s, "");
    assert_true(o.last == 7);
    free(s);
    /* 1..3 were evicted (4 kept): an old after_id gives what is left; a future one nothing. */
    o = (struct out){.after = 2};
    s = write_out(x, NULL, EV_EXC_NDJSON, &o);
    all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), 4);
    assert_true(num(cJSON_GetArrayItem(all, 0), "id") == 4);
    cJSON_Delete(all);
    free(s);
    o = (struct out){.after = UINT64_MAX};
    s = write_out(x, NULL, EV_EXC_NDJSON, &o);
    assert_string_equal(s, "");
    assert_true(o.last == UINT64_MAX);
    free(s);
    ev_exc_free(x);
}

/* max_instances: the oldest go first, ids go on. */
static void test_ev_exc_max_instances(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "exceptions test", 0);
    struct ev_exc *x = store(3, 1u << 20, &share);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "T", "m", 0, NULL, 0), 0);
    }
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.added, 5);
    assert_int_equal(st.kept, 3);
    assert_int_equal(st.evicted, 2);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.bytes, share.used);
    struct ev_symbols *sym = NULL;
    ASSERT_IDS("3,4,5", NULL, 0, NULL, 0);
    ev_exc_free(x);
    assert_int_equal(share.used, 0);
    mb_share_fini(&share);
    struct ev_exc_limits zero = {.max_instances = 0, .max_bytes = 10};
    assert_int_equal(ev_exc_new(&zero, &x), AGENT_E_INVAL);
    zero = (struct ev_exc_limits){.max_instances = 1, .max_bytes = 0};
    assert_int_equal(ev_exc_new(&zero, &x), AGENT_E_INVAL);
}

/* max_bytes: as many of the newest as fit; one larger than the bound alone is dropped. */
static void test_ev_exc_max_bytes(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "exceptions test", 0);
    struct ev_exc *x = store(1000, 1500, &share);
    const uint64_t ips[] = {IP_THROW, IP_MAIN};
    assert_int_equal(add_ex(x, T0, 1, "App.SomeError", "a message", 0, ips, 2), 0);
    struct ev_exc_stats st0;
    ev_exc_get_stats(x, &st0);
    for (int i = 1; i < 100; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "App.SomeError", "a message", 0, ips, 2), 0);
    }
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.added, 100);
    assert_true(st.kept > 5 && st.kept < 100);
    assert_int_equal(st.evicted, 100 - st.kept);
    assert_int_equal(st.bytes, share.used);
    char *s = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), (int)st.kept);
    assert_true(num(cJSON_GetArrayItem(all, 0), "id") == (double)(101 - st.kept));
    assert_true(num(cJSON_GetArrayItem(all, (int)st.kept - 1), "id") == 100);
    cJSON_Delete(all);
    free(s);
    /* Alone larger than max_bytes: refused, the history as it was. */
    char big[2100];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    assert_int_equal(add_ex(x, T0, 1, big, big, 0, ips, 2), AGENT_E_BUDGET);
    struct ev_exc_stats st2;
    ev_exc_get_stats(x, &st2);
    assert_int_equal(st2.dropped, 1);
    assert_int_equal(st2.kept, st.kept);
    assert_int_equal(st2.added, 100);
    assert_int_equal(st2.bytes, st.bytes);
    ev_exc_free(x);
    assert_int_equal(share.used, 0);
    mb_share_fini(&share);
}

/* A share too small: the store refused; a full share makes room by dropping the oldest; an
 * instance the share cannot hold even with the history empty refused; every byte back. */
static void test_ev_exc_share(void **state)
{
    (void)state;
    struct mb_share tiny;
    mb_share_init(&tiny, "exceptions test", 16);
    struct ev_exc_limits lim = {.max_instances = 10, .max_bytes = 1u << 20, .share = &tiny};
    struct ev_exc *x = NULL;
    assert_int_equal(ev_exc_new(&lim, &x), AGENT_E_BUDGET);
    assert_int_equal(tiny.used, 0);
    mb_share_fini(&tiny);

    /* 4 KiB: instances fit, the groups' table (8 KiB) does not: counted, instances kept. */
    struct mb_share share;
    mb_share_init(&share, "exceptions test", 4096);
    x = store(1000, 1u << 20, &share);
    char msg[1000];
    memset(msg, 'm', sizeof(msg) - 1);
    msg[sizeof(msg) - 1] = '\0';
    /* once the share is full, each add makes room by dropping the oldest: the newest are kept */
    for (int i = 0; i < 50; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "App.E", msg, 0, NULL, 0), 0);
    }
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    int kept = (int)st.kept;
    assert_true(kept >= 2 && kept < 50);
    assert_int_equal(st.added, 50);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.evicted, 50 - kept);
    assert_int_equal(st.groups, 0);
    assert_int_equal(st.groups_dropped, 50);
    assert_int_equal(st.bytes, share.used);
    assert_true(share.used <= 4096);
    char *s = write_out(x, NULL, EV_EXC_TEXT, NULL); /* frameless: no text, but it runs */
    assert_string_equal(s, "");
    free(s);
    s = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), kept);
    cJSON_Delete(all);
    free(s);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_exc_write_groups(x, NULL, to_buf, &b), 0);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
    ev_exc_free(x);
    assert_int_equal(share.used, 0);
    mb_share_fini(&share);

    /* 64 KiB: the groups too; full, the oldest make room; an instance larger than all the
     * share can hold with the history empty is refused. */
    mb_share_init(&share, "exceptions test", 64 * 1024);
    x = store(1000, 1u << 20, &share);
    for (int i = 0; i < 200; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "App.E", msg, 0, NULL, 0), 0);
    }
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.groups, 1);
    assert_int_equal(st.groups_dropped, 0);
    assert_true(st.kept > 2 && st.kept < 200 && st.evicted == 200 - st.kept);
    char *newest = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    assert_non_null(strstr(newest, "\"id\":200,")); /* the newest is there */
    assert_null(strstr(newest, "\"id\":1,"));
    free(newest);
    /* a share that cannot hold one instance even with the history empty: refused, counted */
    share.cap = 1024 + (share.used - st.bytes); /* the store's own tables, and 1 KiB */
    assert_int_equal(add_ex(x, T0, 1, "App.E", msg, 0, NULL, 0), AGENT_E_BUDGET);
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.kept, 0);
    assert_int_equal(st.dropped, 1);
    ev_exc_free(x);
    assert_int_equal(share.used, 0);
    mb_share_fini(&share);
    assert_int_equal(membudget_used(), 0);
}

/* A string of n copies of the UTF-8 character c. */
static char *repeat(const char *c, size_t n)
{
    size_t k = strlen(c);
    char *s = malloc(n * k + 1);
    assert_non_null(s);
    for (size_t i = 0; i < n; i++) {
        memcpy(s + i * k, c, k);
    }
    s[n * k] = '\0';
    return s;
}

/* n copies of c, then EV_CUT_MARKER. */
static char *cut_of(const char *c, size_t n)
{
    char *r = repeat(c, n);
    size_t len = strlen(r);
    char *out = realloc(r, len + sizeof(EV_CUT_MARKER));
    assert_non_null(out);
    memcpy(out + len, EV_CUT_MARKER, sizeof(EV_CUT_MARKER));
    return out;
}

/* 30,000-character type and message: cut at EV_EXC_MAX_STRING bytes on a character boundary. */
static void test_ev_exc_long_strings(void **state)
{
    (void)state;
    struct ev_exc *x = store(10, 1u << 20, NULL);
    char *type = repeat("T", 30000);
    char *euro = repeat("\xe2\x82\xac", 30000);      /* U+20AC, 3 bytes */
    char *pairs = repeat("\xf0\x9f\x98\x80", 30000); /* U+1F600, a surrogate pair */
    assert_int_equal(add_ex(x, T0, 1, type, euro, 0, NULL, 0), 0);
    assert_int_equal(add_ex(x, T0, 1, pairs, "", 0, NULL, 0), 0);
    char *s = write_out(x, NULL, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    char *want = cut_of("T", EV_EXC_MAX_STRING);
    assert_string_equal(str(cJSON_GetArrayItem(all, 0), "typeName"), want);
    free(want);
    want = cut_of("\xe2\x82\xac", EV_EXC_MAX_STRING / 3);
    assert_string_equal(str(cJSON_GetArrayItem(all, 0), "message"), want);
    free(want);
    want = cut_of("\xf0\x9f\x98\x80", EV_EXC_MAX_STRING / 4);
    assert_string_equal(str(cJSON_GetArrayItem(all, 1), "typeName"), want);
    free(want);
    cJSON_Delete(all);
    free(s);
    free(type);
    free(euro);
    free(pairs);
    ev_exc_free(x);
}

/* Frames: at most EV_EXC_MAX_FRAMES, from the leaf. */
static void test_ev_exc_max_frames(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = store(10, 1u << 20, NULL);
    uint64_t ips[300];
    for (size_t i = 0; i < 300; i++) {
        ips[i] = i == 0 ? IP_HELPER : (i % 2 != 0 ? IP_THROW : IP_MAIN);
    }
    assert_int_equal(add_ex(x, T0, 1, "T", "m", 0, ips, 300), 0);
    char *s = write_out(x, sym, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    const cJSON *frames =
        cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(all, 0), "stack"), "frames");
    assert_int_equal(cJSON_GetArraySize(frames), EV_EXC_MAX_FRAMES);
    assert_string_equal(str(cJSON_GetArrayItem(frames, 0), "methodName"),
                        "ThrowInvalidOperationException");
    assert_string_equal(str(cJSON_GetArrayItem(frames, EV_EXC_MAX_FRAMES - 1), "methodName"),
                        "Throw");
    cJSON_Delete(all);
    free(s);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

static int add_raw(struct ev_exc *x, const struct wb *p, uint32_t version, size_t ptr)
{
    struct ev_exc_event e = {.unix_ns = T0,
                             .thread = 1,
                             .payload = p->b,
                             .len = p->n,
                             .version = version,
                             .pointer_size = ptr};
    return ev_exc_add(x, &e);
}

/* Payloads that cannot be read are counted and take no id; longer ones and 4-byte pointers are
 * fine; the decoder's fields. */
static void test_ev_exc_malformed(void **state)
{
    (void)state;
    struct ev_exc *x = store(10, 1u << 20, NULL);
    struct wb ok = payload("App.E", "m", 0x1234, 8);
    struct wb cut = ok;
    cut.n -= 1; /* ClrInstanceID short */
    assert_int_equal(add_raw(x, &cut, 1, 8), AGENT_E_PROTO);
    cut.n = 6; /* inside the type: no NUL */
    assert_int_equal(add_raw(x, &cut, 1, 8), AGENT_E_PROTO);
    struct wb empty = {0};
    assert_int_equal(add_raw(x, &empty, 1, 8), AGENT_E_PROTO);
    struct wb odd = {0}; /* a type of 3 bytes: no NUL unit */
    wb_u8(&odd, 'A');
    wb_u8(&odd, 0);
    wb_u8(&odd, 0);
    assert_int_equal(add_raw(x, &odd, 1, 8), AGENT_E_PROTO);
    /* V0 has no fields: no type to show. */
    assert_int_equal(add_raw(x, &ok, 0, 8), AGENT_E_PROTO);
    /* A 4-byte-pointer payload read with 8 is short. */
    struct wb p4 = payload("App.E", "m", 0x1234, 4);
    assert_int_equal(add_raw(x, &p4, 1, 8), AGENT_E_PROTO);
    assert_int_equal(add_raw(x, &ok, 1, 3), AGENT_E_INVAL);
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.malformed, 6);
    assert_int_equal(st.added, 0);
    assert_int_equal(add_raw(x, &p4, 1, 4), 0);
    wb_u32(&ok, 0xdeadbeef); /* a later layout's extra field */
    assert_int_equal(add_raw(x, &ok, 2, 8), 0);
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.added, 2);
    assert_int_equal(st.kept, 2);

    struct ev_exception_thrown t;
    assert_int_equal(ev_exception_thrown_read(p4.b, p4.n, 1, 4, &t), 0);
    assert_int_equal(t.type_units, 5);
    assert_int_equal(t.message_units, 1);
    assert_int_equal(t.eip, 0x1234);
    assert_int_equal(t.hresult, 0x80131509u);
    assert_int_equal(t.flags, EV_EXCEPTION_CLS_COMPLIANT);
    assert_int_equal(t.clr_instance_id, 7);
    assert_int_equal(ev_exception_thrown_read(NULL, 0, 0, 8, &t), 0);
    assert_int_equal(t.type_units + t.message_units + t.eip, 0);
    assert_int_equal(ev_exception_thrown_read(p4.b, p4.n, 1, 2, &t), AGENT_E_INVAL);
    free(ok.b);
    free(p4.b);
    free(odd.b);
    ev_exc_free(x);
}

/*
 * Groups: per type and first ips (the EIP without a stack), written by their first frame; most
 * thrown first. five()'s stacks start with their throwers, so each group is one line.
 */
static void test_ev_exc_groups(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.groups, 4);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_exc_write_groups(x, sym, to_buf, &b), 0);
    cJSON *all = lines(buf_cstr(&b));
    assert_int_equal(cJSON_GetArraySize(all), 4);
    const cJSON *g = cJSON_GetArrayItem(all, 0);
    assert_string_equal(str(g, "typeName"), "App.MyError");
    assert_string_equal(
        str(g, "throwSite"),
        "System.Private.CoreLib.dll!System.ThrowHelper.ThrowInvalidOperationException");
    assert_true(num(g, "count") == 2);
    assert_true(num(g, "firstId") == 2);
    assert_true(num(g, "lastId") == 4);
    assert_string_equal(str(g, "lastTimestamp"), "2026-11-30T03:45:14.8056355Z");
    g = cJSON_GetArrayItem(all, 1);
    assert_string_equal(str(g, "typeName"), "System.InvalidOperationException");
    assert_string_equal(str(g, "throwSite"), "TestApp.dll!App.Worker.Throw");
    assert_true(num(g, "count") == 1);
    g = cJSON_GetArrayItem(all, 2);
    assert_string_equal(str(g, "typeName"), "System.Exception");
    assert_string_equal(str(g, "throwSite"), "TestApp.dll!App.Program.Main"); /* its EIP */
    g = cJSON_GetArrayItem(all, 3);
    assert_string_equal(str(g, "throwSite"), "UnknownModule!UnknownClass.Orphan");
    cJSON_Delete(all);
    /* Same type, another site: another group; the same site again: counted. */
    const uint64_t other[] = {IP_MAIN};
    assert_int_equal(add_ex(x, T0, 1, "App.MyError", "x", 0, other, 1), 0);
    assert_int_equal(add_ex(x, T0, 1, "App.MyError", "x", 0, other, 1), 0);
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.groups, 5);
    buf_reset(&b);
    assert_int_equal(ev_exc_write_groups(x, NULL, to_buf, &b), 0);
    all = lines(buf_cstr(&b));
    assert_string_equal(str(cJSON_GetArrayItem(all, 0), "throwSite"), EV_STACKS_NATIVE_FRAME);
    assert_true(num(cJSON_GetArrayItem(all, 1), "firstId") == 6);
    assert_true(num(cJSON_GetArrayItem(all, 1), "count") == 2);
    cJSON_Delete(all);
    assert_int_equal(ev_exc_write_groups(x, sym, fail_sink, NULL), AGENT_E_CLOSED);
    buf_fini(&b);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

/* More distinct groups than EV_EXC_MAX_GROUPS: the least recently thrown make room. */
static void test_ev_exc_group_bound(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "exceptions test", 0);
    struct ev_exc *x = store(10, 1u << 20, &share);
    char type[32];
    for (unsigned i = 0; i < EV_EXC_MAX_GROUPS + 76; i++) {
        snprintf(type, sizeof(type), "App.E%u", i == 1000 ? 0 : i);
        assert_int_equal(add_ex(x, T0 + i, 1, type, "", 0, NULL, 0), 0);
    }
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.groups, EV_EXC_MAX_GROUPS);
    assert_int_equal(st.groups_evicted, 75);
    assert_int_equal(st.bytes, share.used);
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_exc_write_groups(x, NULL, to_buf, &b), 0);
    cJSON *all = lines(buf_cstr(&b));
    assert_int_equal(cJSON_GetArraySize(all), EV_EXC_MAX_GROUPS);
    /* App.E0 was thrown again at id 1001: kept with its first id; E1..E75 (ids 2..76) gone. */
    const cJSON *g = cJSON_GetArrayItem(all, 0);
    assert_string_equal(str(g, "typeName"), "App.E0");
    assert_true(num(g, "count") == 2);
    assert_true(num(g, "firstId") == 1);
    assert_true(num(g, "lastId") == 1001);
    assert_string_equal(str(cJSON_GetArrayItem(all, 1), "typeName"), "App.E76");
    cJSON_Delete(all);
    /* The write's lines and their sites are charged while it runs: with too little room it is
     * refused (at the lines first, then at the sites as they grow); every byte back either way. */
    uint64_t used = share.used;
    int refused = 0;
    for (uint64_t room = 0;; room += 4096) {
        assert_true(room < (1u << 20));
        share.cap = used + room;
        buf_reset(&b);
        int rc = ev_exc_write_groups(x, NULL, to_buf, &b);
        assert_int_equal(share.used, used);
        if (rc == 0) {
            break;
        }
        assert_int_equal(rc, AGENT_E_BUDGET);
        refused++;
    }
    assert_true(refused > 1);
    assert_true(share.peak > used + EV_EXC_MAX_GROUPS * sizeof(EV_STACKS_NATIVE_FRAME));
    share.cap = 0;
    buf_fini(&b);
    ev_exc_free(x);
    assert_int_equal(share.used, 0);
    mb_share_fini(&share);
}

/* The lines of ev_exc_write_groups, parsed. */
static cJSON *group_lines(struct ev_exc *x, struct ev_symbols *sym)
{
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(ev_exc_write_groups(x, sym, to_buf, &b), 0);
    cJSON *all = lines(buf_cstr(&b));
    buf_fini(&b);
    return all;
}

static void assert_group(const cJSON *g, const char *type, const char *site, double count,
                         double first_id, double last_id)
{
    assert_string_equal(str(g, "typeName"), type);
    assert_string_equal(str(g, "throwSite"), site);
    assert_true(num(g, "count") == count);
    assert_true(num(g, "firstId") == first_id);
    assert_true(num(g, "lastId") == last_id);
}

/*
 * The same thrower called from elsewhere: groups of their own as kept (other ips), one line once
 * names are known (the same shown site), apart without names ("[NativeFrame]" says nothing).
 */
static void test_ev_exc_group_thrower(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = store(10, 1u << 20, NULL);
    const uint64_t from_main[] = {IP_THROW, IP_MAIN};
    const uint64_t from_helper[] = {IP_THROW, IP_HELPER};
    const uint64_t further_in[] = {IP_THROW + 8, IP_MAIN}; /* another ip of the same method */
    assert_int_equal(add_ex(x, T0, 1, "App.MyError", "a", 0, from_main, 2), 0);
    assert_int_equal(add_ex(x, T0 + 1000000000ll, 1, "App.MyError", "b", 0, from_helper, 2), 0);
    assert_int_equal(add_ex(x, T0 + 5000000000ll, 1, "App.MyError", "c", 0, further_in, 2), 0);
    /* The newest id at an earlier time: lastTimestamp goes with lastId. */
    assert_int_equal(add_ex(x, T0 + 2000000000ll, 1, "App.MyError", "d", 0, from_main, 2), 0);
    assert_int_equal(add_ex(x, T0, 1, "App.Other", "e", 0, from_main, 2), 0);
    struct ev_exc_stats st;
    ev_exc_get_stats(x, &st);
    assert_int_equal(st.groups, 4);
    cJSON *all = group_lines(x, sym);
    assert_int_equal(cJSON_GetArraySize(all), 2);
    const cJSON *g = cJSON_GetArrayItem(all, 0);
    assert_group(g, "App.MyError", "TestApp.dll!App.Worker.Throw", 4, 1, 4);
    assert_string_equal(str(g, "lastTimestamp"), "2026-11-30T03:45:13.8056355Z");
    assert_group(cJSON_GetArrayItem(all, 1), "App.Other", "TestApp.dll!App.Worker.Throw", 1, 5, 5);
    cJSON_Delete(all);
    all = group_lines(x, NULL);
    assert_int_equal(cJSON_GetArraySize(all), 4);
    assert_group(cJSON_GetArrayItem(all, 0), "App.MyError", EV_STACKS_NATIVE_FRAME, 2, 1, 4);
    assert_group(cJSON_GetArrayItem(all, 1), "App.MyError", EV_STACKS_NATIVE_FRAME, 1, 2, 2);
    assert_group(cJSON_GetArrayItem(all, 2), "App.MyError", EV_STACKS_NATIVE_FRAME, 1, 3, 3);
    assert_group(cJSON_GetArrayItem(all, 3), "App.Other", EV_STACKS_NATIVE_FRAME, 1, 5, 5);
    cJSON_Delete(all);
    ev_exc_free(x);
    ev_symbols_free(sym);
    assert_int_equal(membudget_used(), 0);
}

/*
 * .NET 9+ stacks start in the runtime's dispatch (System.Runtime.EH), the same frames for every
 * throw: the groups (and the instances' frames) start at the thrower below them, an unnamed
 * address before them skipped too; a stack of nothing else shows its first frame.
 */
static void test_ev_exc_group_eh(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    add_method(sym, 1, 0x5000, "System.Runtime.EH", "RhThrowEx", "void  (object)");
    add_method(sym, 1, 0x6000, "System.Runtime.EH", "DispatchEx", "void  (int32)");
    struct ev_exc *x = store(10, 1u << 20, NULL);
    const uint64_t s1[] = {IP_EH_THROW, IP_EH_DISPATCH, IP_THROW, IP_MAIN};
    const uint64_t s2[] = {IP_NATIVE, IP_EH_THROW, IP_EH_DISPATCH, IP_THROW, IP_HELPER};
    const uint64_t s3[] = {IP_EH_THROW, IP_EH_DISPATCH, IP_MAIN};
    const uint64_t s4[] = {IP_EH_THROW, IP_EH_DISPATCH};
    const char *type = "System.InvalidOperationException";
    assert_int_equal(add_ex(x, T0, 1, type, "1", 0, s1, 4), 0);
    assert_int_equal(add_ex(x, T0, 1, type, "2", 0, s2, 5), 0);
    assert_int_equal(add_ex(x, T0, 1, type, "3", 0, s3, 3), 0);
    assert_int_equal(add_ex(x, T0, 1, type, "4", 0, s4, 2), 0);
    cJSON *all = group_lines(x, sym);
    assert_int_equal(cJSON_GetArraySize(all), 3);
    assert_group(cJSON_GetArrayItem(all, 0), type, "TestApp.dll!App.Worker.Throw", 2, 1, 2);
    assert_group(cJSON_GetArrayItem(all, 1), type, "TestApp.dll!App.Program.Main", 1, 3, 3);
    assert_group(cJSON_GetArrayItem(all, 2), type,
                 "System.Private.CoreLib.dll!System.Runtime.EH.RhThrowEx", 1, 4, 4);
    cJSON_Delete(all);
    /* The history's writers skip the same frames. */
    char *s = write_out(x, sym, EV_EXC_NDJSON, NULL);
    all = lines(s);
    for (int i = 0; i < 2; i++) {
        const cJSON *frames =
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(all, i), "stack"), "frames");
        assert_int_equal(cJSON_GetArraySize(frames), 2);
        assert_frame(cJSON_GetArrayItem(frames, 0), "Throw", "App.Worker", "TestApp.dll");
    }
    cJSON_Delete(all);
    free(s);
    /* The store's filters see the thrower as the top frame. */
    struct ev_exc_filter throw_m = {.method_name = "Throw"};
    const struct ev_exc_filters kept = {.exclude = &throw_m, .nexclude = 1};
    ev_exc_set_filters(x, &kept);
    all = group_lines(x, sym);
    assert_int_equal(cJSON_GetArraySize(all), 2);
    assert_string_equal(str(cJSON_GetArrayItem(all, 0), "throwSite"),
                        "TestApp.dll!App.Program.Main");
    cJSON_Delete(all);
    ev_exc_set_filters(x, NULL);
    /* Nothing names the frames: every stack its own group. */
    all = group_lines(x, NULL);
    assert_int_equal(cJSON_GetArraySize(all), 4);
    cJSON_Delete(all);
    /* A tail's question: s2's unnamed address before the dispatch frames is left out, as the
     * writers leave it out; all four are named past their lead. Without names, all four. */
    size_t unnamed = 99;
    assert_int_equal(ev_exc_unnamed(x, sym, 0, &unnamed), 0);
    assert_int_equal(unnamed, 0);
    assert_int_equal(ev_exc_unnamed(x, NULL, 0, &unnamed), 0);
    assert_int_equal(unnamed, 4);
    assert_int_equal(ev_exc_unnamed(x, NULL, 3, &unnamed), 0); /* after id 3: only id 4 */
    assert_int_equal(unnamed, 1);
    const uint64_t s5[] = {IP_EH_THROW, IP_EH_DISPATCH, IP_THROW, IP_NATIVE};
    assert_int_equal(add_ex(x, T0, 1, type, "5", 0, s5, 4), 0);
    assert_int_equal(ev_exc_unnamed(x, sym, 0, &unnamed), 0); /* a native frame below the thrower */
    assert_int_equal(unnamed, 1);
    ev_exc_free(x);
    ev_symbols_free(sym);
    assert_int_equal(membudget_used(), 0);
}

/* The throw sites of the groups written with the store's filters f, "site,site,…". */
static char *sites(struct ev_exc *x, struct ev_symbols *sym, const struct ev_exc_filters *f)
{
    ev_exc_set_filters(x, f);
    cJSON *all = group_lines(x, sym);
    ev_exc_set_filters(x, NULL);
    struct buf b;
    buf_init(&b, 0);
    for (int i = 0; i < cJSON_GetArraySize(all); i++) {
        assert_int_equal(
            buf_printf(&b, "%s%s", i > 0 ? "," : "", str(cJSON_GetArrayItem(all, i), "throwSite")),
            0);
    }
    cJSON_Delete(all);
    size_t len = 0;
    char *r = buf_steal(&b, &len);
    assert_non_null(r);
    return r;
}

#define ASSERT_SITES(want, ...)                                                                    \
    do {                                                                                           \
        const struct ev_exc_filters f_ = {__VA_ARGS__};                                            \
        char *got_ = sites(x, sym, &f_);                                                           \
        assert_string_equal(got_, want);                                                           \
        free(got_);                                                                                \
    } while (0)

/*
 * The store's filters on five()'s groups (App.MyError at ThrowHelper twice, then
 * InvalidOperationException at Worker.Throw, System.Exception without a stack at its EIP in
 * Program.Main, App.Odd at Orphan), as on the instances: exclude first, then include; no top
 * frame without a stack.
 */
static void test_ev_exc_group_filters(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = five();
    struct ev_exc_filter my_error = {.exception_type = "App.MyError"};
    struct ev_exc_filter throw_m = {.method_name = "Throw"};
    struct ev_exc_filter main_m = {.method_name = "Main"};
    struct ev_exc_filter app_mod = {.module_name = "TestApp.dll"};
    struct ev_exc_filter corelib = {.module_name = "System.Private.CoreLib.dll"};
    const char *helper =
        "System.Private.CoreLib.dll!System.ThrowHelper.ThrowInvalidOperationException";
    const char *all =
        "System.Private.CoreLib.dll!System.ThrowHelper.ThrowInvalidOperationException,"
        "TestApp.dll!App.Worker.Throw,TestApp.dll!App.Program.Main,"
        "UnknownModule!UnknownClass.Orphan";
    ASSERT_SITES(all, .nexclude = 0);
    ASSERT_SITES("TestApp.dll!App.Worker.Throw,TestApp.dll!App.Program.Main,"
                 "UnknownModule!UnknownClass.Orphan",
                 .exclude = &my_error, .nexclude = 1);
    ASSERT_SITES(helper, .include = &my_error, .ninclude = 1);
    ASSERT_SITES("System.Private.CoreLib.dll!System.ThrowHelper.ThrowInvalidOperationException,"
                 "TestApp.dll!App.Program.Main,UnknownModule!UnknownClass.Orphan",
                 .exclude = &throw_m, .nexclude = 1);
    /* The EIP's frame is shown as the site but is no top frame: an exclude entry naming Main
     * drops no group, an include entry keeps the group without a stack (nothing compared). */
    ASSERT_SITES(all, .exclude = &main_m, .nexclude = 1);
    ASSERT_SITES("TestApp.dll!App.Program.Main", .include = &main_m, .ninclude = 1);
    ASSERT_SITES("TestApp.dll!App.Worker.Throw,TestApp.dll!App.Program.Main", .include = &app_mod,
                 .ninclude = 1);
    ASSERT_SITES("TestApp.dll!App.Program.Main", .include = &corelib, .ninclude = 1,
                 .exclude = &my_error, .nexclude = 1);
    ev_exc_free(x);
    ev_symbols_free(sym);
    assert_int_equal(membudget_used(), 0);
}

struct pieces {
    size_t calls;
    size_t max;
    size_t total;
};

static int count_sink(void *ud, const uint8_t *p, size_t n)
{
    struct pieces *c = ud;
    (void)p;
    c->calls++;
    c->max = n > c->max ? n : c->max;
    c->total += n;
    return 0;
}

/* The output goes out in pieces; a sink's error ends the write and is returned. */
static void test_ev_exc_pieces(void **state)
{
    (void)state;
    struct ev_symbols *sym = symbols();
    struct ev_exc *x = store(100, 16u << 20, NULL);
    uint64_t ips[50];
    for (size_t i = 0; i < 50; i++) {
        ips[i] = i % 2 != 0 ? IP_THROW : IP_MAIN;
    }
    for (int i = 0; i < 100; i++) {
        assert_int_equal(add_ex(x, T0 + i, 1, "App.E", "m", 0, ips, 50), 0);
    }
    struct pieces c = {0};
    uint64_t last = 0;
    assert_int_equal(
        ev_exc_write(x, sym, NULL, 0, NULL, 0, EV_EXC_NDJSON, 0, &last, NULL, NULL, count_sink, &c),
        0);
    assert_true(last == 100);
    assert_true(c.total > 512u * 1024u);
    assert_true(c.calls > 4);
    assert_true(c.max < 128u * 1024u);
    last = 0;
    assert_int_equal(
        ev_exc_write(x, sym, NULL, 0, NULL, 0, EV_EXC_TEXT, 0, &last, NULL, NULL, fail_sink, NULL),
        AGENT_E_CLOSED);
    assert_true(last == 0); /* untouched on error */
    assert_int_equal(ev_exc_write(x, sym, NULL, 0, NULL, 0, (enum ev_exc_format)7, 0, NULL, NULL,
                                  NULL, count_sink, &c),
                     AGENT_E_INVAL);
    ev_exc_free(x);
    ev_symbols_free(sym);
}

/* A real runtime's stream through its ev_symbols: ExceptionThrown events with their stacks. */
struct feed {
    struct ev_symbols *sym;
    struct ev_exc *x;
    int added;
};

static void on_event(void *ud, const struct nettrace_event *ev)
{
    struct feed *f = ud;
    if (ev->event_id != EV_PROFILE_EXCEPTION_THROWN ||
        strcmp(ev->provider, "Microsoft-Windows-DotNETRuntime") != 0) {
        return;
    }
    size_t ptr = ev_symbols_pointer_size(f->sym);
    uint64_t ips[EV_EXC_MAX_FRAMES];
    size_t n = 0;
    for (size_t off = 0; ev->stack != NULL && off + ptr <= ev->stack_len && n < EV_EXC_MAX_FRAMES;
         off += ptr) {
        uint64_t ip = 0;
        for (size_t k = 0; k < ptr; k++) {
            ip |= (uint64_t)ev->stack[off + k] << (8 * k);
        }
        ips[n++] = ip;
    }
    struct ev_exc_event e = {.unix_ns = (int64_t)(ev_symbols_ticks_ms(f->sym, ev->timestamp) * 1e6),
                             .thread = ev->thread_id,
                             .payload = ev->payload,
                             .len = ev->payload_len,
                             .version = ev->version,
                             .pointer_size = ptr,
                             .ips = ips,
                             .n_ips = n};
    assert_int_equal(ev_exc_add(f->x, &e), 0);
    f->added++;
}

static void test_ev_exc_fixture(void **state)
{
    (void)state;
    size_t n = 0;
    uint8_t *bytes = fixture_read("nettrace", "rundown_ct4.nettrace", &n);
    struct feed f = {.x = store(EV_EXC_DEFAULT_HISTORY, 1u << 20, NULL)};
    assert_int_equal(ev_symbols_new(&f.sym), 0);
    ev_symbols_set_event_cb(f.sym, on_event, &f);
    assert_int_equal(ev_symbols_feed(f.sym, bytes, n), 0);
    assert_int_equal(ev_symbols_finish(f.sym), 0);
    assert_int_equal(f.added, 3);
    char *s = write_out(f.x, f.sym, EV_EXC_NDJSON, NULL);
    cJSON *all = lines(s);
    assert_int_equal(cJSON_GetArraySize(all), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *e = cJSON_GetArrayItem(all, i);
        char msg[32];
        snprintf(msg, sizeof(msg), "TestApp exception %d", i);
        assert_string_equal(str(e, "typeName"), "System.InvalidOperationException");
        assert_string_equal(str(e, "message"), msg);
        const cJSON *frames = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "stack"), "frames");
        assert_true(cJSON_GetArraySize(frames) >= 1); /* no method events: native frames */
    }
    cJSON_Delete(all);
    free(s);
    struct ev_exc_stats st;
    ev_exc_get_stats(f.x, &st);
    assert_int_equal(st.malformed, 0);
    ev_exc_free(f.x);
    ev_symbols_free(f.sym);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_exc_ndjson),       cmocka_unit_test(test_ev_exc_json_seq),
        cmocka_unit_test(test_ev_exc_text),         cmocka_unit_test(test_ev_exc_timestamps),
        cmocka_unit_test(test_ev_exc_filters),      cmocka_unit_test(test_ev_exc_filters_parse),
        cmocka_unit_test(test_ev_exc_after_id),     cmocka_unit_test(test_ev_exc_max_instances),
        cmocka_unit_test(test_ev_exc_max_bytes),    cmocka_unit_test(test_ev_exc_share),
        cmocka_unit_test(test_ev_exc_long_strings), cmocka_unit_test(test_ev_exc_max_frames),
        cmocka_unit_test(test_ev_exc_malformed),    cmocka_unit_test(test_ev_exc_groups),
        cmocka_unit_test(test_ev_exc_group_bound),  cmocka_unit_test(test_ev_exc_group_thrower),
        cmocka_unit_test(test_ev_exc_group_eh),     cmocka_unit_test(test_ev_exc_group_filters),
        cmocka_unit_test(test_ev_exc_pieces),       cmocka_unit_test(test_ev_exc_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
