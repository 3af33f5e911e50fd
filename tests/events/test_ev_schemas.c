/* SPDX-License-Identifier: MIT */
/*
 * The schema registry (events/ev_schemas.h): a redefined id replaces the old schema and resets
 * the consumer's slot through the release callback; the entry and byte bounds refuse with their
 * errors and leave the id undefined; thousands of ids (with removals in between) stay findable;
 * every slot is released exactly once and every byte given back.
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
#include "ev_schemas.h"
#include "membudget.h"
#include "wbuf.h"

/* A V5 metadata payload (docs/nettrace.md §5.1): id, provider, event id, name, keywords, version,
 * level, then nfields Int32 fields named F0, F1, … */
static void md_payload(struct wb *w, uint32_t id, const char *name, unsigned nfields)
{
    wb_u32(w, id);
    wb_wstr(w, "Test-Provider");
    wb_u32(w, id);
    wb_wstr(w, name);
    wb_u64(w, 0);
    wb_u32(w, 0);
    wb_u32(w, 4);
    wb_u32(w, nfields);
    for (unsigned f = 0; f < nfields; f++) {
        char fname[16];
        snprintf(fname, sizeof(fname), "F%u", f);
        wb_u32(w, 9); /* Int32 */
        wb_wstr(w, fname);
    }
}

static int define(struct ev_schemas *t, uint32_t id, const char *name, unsigned nfields,
                  struct ev_schema_entry **e)
{
    struct wb w = {0};
    md_payload(&w, id, name, nfields);
    struct nettrace_metadata md;
    memset(&md, 0, sizeof(md));
    md.metadata_id = id;
    md.provider = "Test-Provider";
    md.event_name = name;
    int rc = ev_schemas_define(t, &md, w.b, w.n, e);
    free(w.b);
    return rc;
}

/* The consumer's slot: a heap string (so a slot released twice, or never, shows in ASan) and
 * a mark that must be zero at definition. */
struct slot {
    char *derived;
    uint32_t mark;
};

struct releases {
    unsigned n;
    uint32_t last_id;
    char last_derived[32];
};

static void on_release(void *ud, struct ev_schema_entry *e)
{
    struct releases *r = ud;
    struct slot *s = e->slot;
    assert_non_null(e->schema); /* still valid during the call */
    r->n++;
    r->last_id = e->id;
    snprintf(r->last_derived, sizeof(r->last_derived), "%s", s->derived ? s->derived : "");
    free(s->derived);
    s->derived = NULL;
}

static void fill(struct ev_schema_entry *e, const char *text)
{
    struct slot *s = e->slot;
    assert_null(s->derived);
    assert_int_equal(s->mark, 0);
    size_t n = strlen(text) + 1;
    s->derived = malloc(n);
    assert_non_null(s->derived);
    memcpy(s->derived, text, n);
    s->mark = 0xA5A5A5A5u;
}

/* A table whose slots are struct slot, releases counted in r. */
static void init_with_slots(struct ev_schemas *t, struct releases *r)
{
    struct ev_schemas_config cfg = {
        .slot_size = sizeof(struct slot), .on_release = on_release, .ud = r};
    ev_schemas_init(t, &cfg);
}

static void test_redefinition(void **state)
{
    (void)state;
    struct releases r = {0};
    struct ev_schemas t;
    init_with_slots(&t, &r);
    struct ev_schema_entry *e = NULL;
    assert_int_equal(define(&t, 7, "Old", 2, &e), 0);
    assert_int_equal(e->schema->nfields, 3);
    fill(e, "old slot");
    /* Redefined: the old slot is released first and the new definition starts from zero. */
    assert_int_equal(define(&t, 7, "New", 5, &e), 0);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.last_id, 7);
    assert_string_equal(r.last_derived, "old slot");
    assert_string_equal(e->schema->event_name, "New");
    assert_int_equal(e->schema->nfields, 6);
    fill(e, "new slot");
    assert_int_equal(ev_schemas_count(&t), 1);
    assert_ptr_equal(ev_schemas_find(&t, 7), e);
    /* A redefinition that does not parse leaves the id undefined, not with the old schema. */
    struct nettrace_metadata md;
    memset(&md, 0, sizeof(md));
    md.metadata_id = 7;
    md.provider = "Test-Provider";
    md.event_name = "Bad";
    const uint8_t bad[] = {7, 0, 0, 0, 'x'}; /* the provider name is not terminated */
    assert_int_equal(ev_schemas_define(&t, &md, bad, sizeof(bad), &e), AGENT_E_PROTO);
    assert_null(e);
    assert_int_equal(r.n, 2);
    assert_string_equal(r.last_derived, "new slot");
    assert_null(ev_schemas_find(&t, 7));
    assert_int_equal(ev_schemas_count(&t), 0);
    /* A redefinition the consumer does not keep: forget. */
    assert_int_equal(define(&t, 8, "Kept", 1, &e), 0);
    fill(e, "eight");
    ev_schemas_forget(&t, 8);
    ev_schemas_forget(&t, 8); /* twice: nothing more */
    ev_schemas_forget(&t, 9); /* never defined */
    assert_int_equal(r.n, 3);
    assert_null(ev_schemas_find(&t, 8));
    ev_schemas_fini(&t);
    assert_int_equal(r.n, 3);
}

static void test_bounds(void **state)
{
    (void)state;
    struct mb_share share;
    mb_share_init(&share, "schemas test", 0);
    struct ev_schemas t;
    struct ev_schemas_config cfg = {.max_ids = 3, .share = &share};
    ev_schemas_init(&t, &cfg);
    struct ev_schema_entry *e = NULL;
    for (uint32_t id = 1; id <= 3; id++) {
        assert_int_equal(define(&t, id, "Ev", 1, &e), 0);
    }
    /* the fourth id: past max_ids, refused, nothing kept or charged for it */
    uint64_t before = ev_schemas_held(&t);
    assert_int_equal(define(&t, 4, "Ev", 1, &e), AGENT_E_TOOBIG);
    assert_null(e);
    assert_null(ev_schemas_find(&t, 4));
    assert_int_equal(ev_schemas_held(&t), before);
    assert_int_equal(atomic_load(&share.used), before);
    /* a redefinition of a held id is not a new entry: accepted at the bound */
    assert_int_equal(define(&t, 2, "Again", 1, &e), 0);
    assert_int_equal(ev_schemas_count(&t), 3);
    ev_schemas_fini(&t);
    assert_int_equal(atomic_load(&share.used), 0);

    /* Bytes: a bound of its own, then a share's cap. */
    struct ev_schemas_config small = {.max_bytes = 8192};
    ev_schemas_init(&t, &small);
    unsigned kept = 0;
    int rc = 0;
    for (uint32_t id = 1; id <= 100 && rc == 0; id++) {
        rc = define(&t, id, "Ev", 20, &e);
        kept += rc == 0;
    }
    assert_int_equal(rc, AGENT_E_BUDGET);
    assert_true(kept > 0);
    assert_int_equal(ev_schemas_count(&t), kept);
    assert_true(ev_schemas_held(&t) <= 8192);
    ev_schemas_fini(&t);
    assert_int_equal(ev_schemas_held(&t), 0);

    mb_share_init(&share, "schemas test", 4096);
    ev_schemas_init(&t, NULL);
    assert_int_equal(ev_schemas_set_share(&t, &share), 0);
    rc = 0;
    for (uint32_t id = 1; id <= 100 && rc == 0; id++) {
        rc = define(&t, id, "Ev", 20, &e);
    }
    assert_int_equal(rc, AGENT_E_BUDGET);
    assert_true(atomic_load(&share.peak) <= 4096);
    assert_int_equal(atomic_load(&share.used), ev_schemas_held(&t));
    assert_int_equal(ev_schemas_set_share(&t, NULL), AGENT_E_INVAL); /* charged there already */
    ev_schemas_fini(&t);
    assert_int_equal(atomic_load(&share.used), 0);
}

/* 20,000 ids spread over the u32 range, every third one forgotten (backward shifts), every
 * other one redefined: each lookup still finds its own id, with its own slot. */
static void test_many_ids(void **state)
{
    (void)state;
    enum { N = 20000 };
    struct releases r = {0};
    struct ev_schemas t;
    init_with_slots(&t, &r);
    struct ev_schema_entry *e = NULL;
    for (uint32_t k = 1; k <= N; k++) {
        uint32_t id = k * 2654435761u; /* scattered; distinct for k < 2^32 */
        assert_int_equal(define(&t, id, "Ev", k % 4, &e), 0);
        char text[16];
        snprintf(text, sizeof(text), "%u", k);
        fill(e, text);
    }
    assert_int_equal(ev_schemas_count(&t), N);
    unsigned forgotten = 0;
    for (uint32_t k = 3; k <= N; k += 3) {
        ev_schemas_forget(&t, k * 2654435761u);
        forgotten++;
    }
    assert_int_equal(r.n, forgotten);
    for (uint32_t k = 2; k <= N; k += 2) {
        if (k % 3 != 0) {
            assert_int_equal(define(&t, k * 2654435761u, "Ev", 1, &e), 0);
            fill(e, "re");
        }
    }
    for (uint32_t k = 1; k <= N; k++) {
        uint32_t id = k * 2654435761u;
        struct ev_schema_entry *got = ev_schemas_find(&t, id);
        if (k % 3 == 0) {
            assert_null(got);
            continue;
        }
        assert_non_null(got);
        assert_int_equal(got->id, id);
        const struct slot *s = got->slot;
        char text[16];
        snprintf(text, sizeof(text), "%u", k);
        assert_string_equal(s->derived, k % 2 == 0 ? "re" : text);
        assert_int_equal(got->schema->nfields, k % 2 == 0 ? 2 : 1 + k % 4);
    }
    assert_int_equal(ev_schemas_count(&t), N - forgotten);
    unsigned before = r.n;
    ev_schemas_fini(&t);
    assert_int_equal(r.n - before, N - forgotten); /* each remaining slot released once */
}

/* A slot lives from its definition to its release, through the table's growth: what the
 * consumer put in it is there after many more ids were added. */
static void test_slot_lifetime(void **state)
{
    (void)state;
    struct releases r = {0};
    struct ev_schemas t;
    init_with_slots(&t, &r);
    struct ev_schema_entry *e = NULL;
    assert_int_equal(define(&t, 1, "First", 1, &e), 0);
    fill(e, "first");
    for (uint32_t id = 2; id < 1000; id++) {
        assert_int_equal(define(&t, id, "Ev", 0, &e), 0);
    }
    e = ev_schemas_find(&t, 1);
    assert_non_null(e);
    const struct slot *s = e->slot;
    assert_string_equal(s->derived, "first");
    assert_int_equal(s->mark, 0xA5A5A5A5u);
    assert_int_equal(r.n, 0);
    ev_schemas_fini(&t);
    assert_int_equal(r.n, 999);
    /* A table without slots hands out NULL slots. */
    ev_schemas_init(&t, NULL);
    assert_int_equal(define(&t, 5, "Ev", 1, &e), 0);
    assert_null(e->slot);
    ev_schemas_fini(&t);
    ev_schemas_fini(&t); /* twice: harmless */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redefinition),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_many_ids),
        cmocka_unit_test(test_slot_lifetime),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
