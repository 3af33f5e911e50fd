/* SPDX-License-Identifier: MIT */
/*
 * events/ev_modules: the modules a loader rundown names (Microsoft-Windows-DotNETRuntimeRundown
 * DomainModuleDCEnd 152, ModuleDCEnd 154, DCEndComplete 146). Synthetic V4 streams (ntw.h) for
 * the matching rules and every reason a list is not whole, fed whole and one byte at a time; and
 * two real probes of the test app (tests/fixtures/events/README.md): one with the EventSource
 * logger, one that uses no logging at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ev_modules.h"
#include "fixture.h"
#include "ntw.h"
#include "wbuf.h"

#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define MEL_ES  "Microsoft.Extensions.Logging.EventSource.dll"
#define MEL     "Microsoft.Extensions.Logging.dll"

static const char *const watch[] = {MEL_ES, MEL};

/* Metadata ids of the synthetic streams. */
enum { MD_MODULE = 1, MD_DOMAIN_MODULE = 2, MD_COMPLETE = 3, MD_RUNTIME_MODULE = 4 };

/* A native event's metadata: no name, no field list (docs/nettrace.md §5, deviations.md §2.2). */
static void md_native(struct nt *t, uint32_t id, const char *provider, uint32_t event_id)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, provider);
    wb_u32(&w, event_id);
    wb_wstr(&w, "");
    wb_u64(&w, 0x8);
    wb_u32(&w, 1);
    wb_u32(&w, 4);
    wb_u32(&w, 0);
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

/* ModuleDCEnd (domain false) or DomainModuleDCEnd with this IL path; md overrides the id. */
static void ev_module(struct nt *t, uint32_t md, bool domain, const char *il_path)
{
    struct wb p = {0};
    wb_u64(&p, 0x7f0000001000ull); /* ModuleID */
    wb_u64(&p, 0x7f0000002000ull); /* AssemblyID */
    if (domain) {
        wb_u64(&p, 0x7f0000003000ull); /* AppDomainID */
    }
    wb_u32(&p, 0x8); /* ModuleFlags */
    wb_u32(&p, 0);   /* Reserved1 */
    wb_wstr(&p, il_path);
    wb_wstr(&p, ""); /* ModuleNativePath */
    wb_u16(&p, 0);   /* ClrInstanceID */
    nt_blob(t, md, SYNC_QPC, 0, 0, &p);
    free(p.b);
}

static void ev_complete(struct nt *t)
{
    struct wb p = {0};
    wb_u16(&p, 0);
    nt_blob(t, MD_COMPLETE, SYNC_QPC, 0, 0, &p);
    free(p.b);
}

enum variant {
    V_WHOLE = 0,   /* a whole list */
    V_NO_END,      /* the stream stops before its end tag */
    V_NO_COMPLETE, /* no DCEndComplete */
    V_NO_MODULES,  /* DCEndComplete only */
    V_LOST,        /* a sequence-number gap */
    V_MALFORMED,   /* a module event without its IL path */
    V_CORRUPT      /* a block whose end tag is wrong */
};

static uint8_t *synthetic(enum variant v, size_t *n)
{
    struct nt t;
    nt_begin(&t);
    md_native(&t, MD_MODULE, RUNDOWN, 154);
    md_native(&t, MD_DOMAIN_MODULE, RUNDOWN, 152);
    md_native(&t, MD_COMPLETE, RUNDOWN, 146);
    md_native(&t, MD_RUNTIME_MODULE, RUNTIME, 152); /* ModuleLoad: not a rundown event */
    nt_block(&t, "MetadataBlock", false);
    t.compressed = true; /* the first event block with compressed headers, the second without */
    if (v != V_NO_MODULES) {
        ev_module(&t, MD_MODULE, false,
                  "/usr/share/dotnet/shared/Microsoft.NETCore.App/10.0.12/"
                  "System.Private.CoreLib.dll");
        /* Another provider's event with the watched name: ignored. */
        ev_module(&t, MD_RUNTIME_MODULE, true, "/app/" MEL_ES);
        /* A longer name that ends like a watched one, and one inside a directory named so. */
        ev_module(&t, MD_MODULE, false, "/app/xMicrosoft.Extensions.Logging.dll");
        ev_module(&t, MD_MODULE, false, "/app/" MEL "/Other.dll");
        if (v == V_LOST) {
            t.seq += 3;
        }
        /* Windows separators and another case. */
        ev_module(&t, MD_DOMAIN_MODULE, true, "C:\\app\\MICROSOFT.extensions.LOGGING.dll");
    }
    nt_block(&t, "EventBlock", true);
    t.compressed = false;
    if (v == V_MALFORMED) {
        struct wb p = {0};
        wb_u64(&p, 1);
        wb_u64(&p, 2);
        wb_u32(&p, 0);
        wb_u32(&p, 0);
        wb_u16(&p, 'A'); /* an IL path without its NUL */
        nt_blob(&t, MD_MODULE, SYNC_QPC, 0, 0, &p);
        free(p.b);
    }
    if (v != V_NO_COMPLETE) {
        ev_complete(&t);
    }
    nt_block(&t, "EventBlock", false);
    if (v == V_CORRUPT) {
        t.out.b[t.out.n - 1] = 7; /* the block's end tag */
    }
    if (v != V_NO_END) {
        wb_u8(&t.out, 1);
    }
    free(t.blk.b);
    *n = t.out.n;
    return t.out.b;
}

/* Feeds p whole (chunk 0) or in chunks, finishes, returns the reader (caller frees). */
static struct ev_modules *read_all(const uint8_t *p, size_t n, size_t chunk, int *feed_rc)
{
    struct ev_modules *m = NULL;
    assert_int_equal(ev_modules_new(&m, watch, 2), 0);
    *feed_rc = 0;
    size_t step = chunk == 0 ? n : chunk;
    for (size_t at = 0; at < n && *feed_rc == 0; at += step) {
        *feed_rc = ev_modules_feed(m, p + at, n - at < step ? n - at : step);
    }
    (void)ev_modules_finish(m);
    return m;
}

static void test_ev_modules_whole(void **state)
{
    (void)state;
    size_t n = 0;
    uint8_t *p = synthetic(V_WHOLE, &n);
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        int rc = 0;
        struct ev_modules *m = read_all(p, n, chunk, &rc);
        if (rc != 0) {
            fail_msg("%s", ev_modules_error(m));
        }
        assert_true(ev_modules_finish(m));
        assert_null(ev_modules_error(m));
        assert_null(ev_modules_inconclusive(m));
        assert_false(ev_modules_found(m, 0)); /* only another provider's event names it */
        assert_true(ev_modules_found(m, 1));  /* C:\app\MICROSOFT.extensions.LOGGING.dll */
        assert_false(ev_modules_found(m, 2));
        struct ev_modules_stats st;
        ev_modules_get_stats(m, &st);
        assert_int_equal(st.modules, 4);
        assert_int_equal(st.malformed, 0);
        assert_int_equal(st.lost, 0);
        assert_true(st.rundown_complete);
        assert_int_equal(st.bytes, n);
        ev_modules_free(m);
    }
    free(p);
}

static void test_ev_modules_inconclusive(void **state)
{
    (void)state;
    static const struct {
        enum variant v;
        const char *why;
        bool feed_fails;
    } cases[] = {
        {V_NO_END, "the event stream ended early", false},
        {V_NO_COMPLETE, "the rundown did not complete", false},
        {V_NO_MODULES, "the rundown named no module", false},
        {V_LOST, "the runtime dropped events", false},
        {V_MALFORMED, "a module event could not be read", false},
        {V_CORRUPT, "the event stream is invalid", true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n = 0;
        uint8_t *p = synthetic(cases[i].v, &n);
        for (size_t chunk = 0; chunk <= 1; chunk++) {
            int rc = 0;
            struct ev_modules *m = read_all(p, n, chunk, &rc);
            const char *why = ev_modules_inconclusive(m);
            if (why == NULL || strcmp(why, cases[i].why) != 0) {
                fail_msg("case %zu chunk %zu: %s", i, chunk, why ? why : "(conclusive)");
            }
            assert_int_equal(rc != 0, cases[i].feed_fails);
            assert_int_equal(ev_modules_error(m) != NULL, cases[i].feed_fails);
            if (rc != 0) {
                assert_int_equal(ev_modules_feed(m, p, 1), rc); /* sticky */
            }
            ev_modules_free(m);
        }
        free(p);
    }
}

static void test_ev_modules_args(void **state)
{
    (void)state;
    struct ev_modules *m = NULL;
    static const char *const empty[] = {""};
    static const char *const nine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
    assert_int_equal(ev_modules_new(NULL, watch, 2), AGENT_E_INVAL);
    assert_int_equal(ev_modules_new(&m, watch, 0), AGENT_E_INVAL);
    assert_int_equal(ev_modules_new(&m, empty, 1), AGENT_E_INVAL);
    assert_int_equal(ev_modules_new(&m, nine, 9), AGENT_E_INVAL);
    assert_null(m);
    ev_modules_free(NULL);
    /* Nothing fed: not conclusive, before and after finish. */
    assert_int_equal(ev_modules_new(&m, watch, 2), 0);
    assert_non_null(ev_modules_inconclusive(m));
    assert_false(ev_modules_finish(m));
    assert_false(ev_modules_finish(m));
    assert_string_equal(ev_modules_inconclusive(m), "the event stream ended early");
    ev_modules_free(m);
}

/* ---- real probes (tests/fixtures/events/README.md) ----------------------------------------- */

static void check_real(const char *name, bool es, bool mel, uint64_t modules)
{
    size_t n = 0;
    uint8_t *p = fixture_read("events", name, &n);
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        int rc = 0;
        struct ev_modules *m = read_all(p, n, chunk, &rc);
        assert_int_equal(rc, 0);
        assert_null(ev_modules_inconclusive(m));
        assert_int_equal(ev_modules_found(m, 0), es);
        assert_int_equal(ev_modules_found(m, 1), mel);
        struct ev_modules_stats st;
        ev_modules_get_stats(m, &st);
        /* DomainModuleDCEnd and ModuleDCEnd for each module. */
        assert_int_equal(st.modules, 2 * modules);
        ev_modules_free(m);
    }
    /* Cut anywhere before the end tag: never conclusive. */
    for (size_t cut = 0; cut < n; cut += n / 7 + 1) {
        int rc = 0;
        struct ev_modules *m = read_all(p, cut, 0, &rc);
        assert_non_null(ev_modules_inconclusive(m));
        ev_modules_free(m);
    }
    free(p);
}

static void test_ev_modules_real(void **state)
{
    (void)state;
    check_real("modules-eventsource.nettrace", true, true, 20);
    check_real("modules-nologging.nettrace", false, false, 13);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ev_modules_whole),
        cmocka_unit_test(test_ev_modules_inconclusive),
        cmocka_unit_test(test_ev_modules_args),
        cmocka_unit_test(test_ev_modules_real),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
