/* SPDX-License-Identifier: MIT */
/* The ring registry (agent/monitor/ring_registry.h): what /trace/snapshot and /metrics read of the
 * rules' rings without knowing the rules. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ring_registry.h"

/* Stand-ins for trace jobs: only their addresses are compared. */
static char job_a, job_b;

static void test_find_prefers_running(void **state)
{
    (void)state;
    struct ring_registry reg = {0};
    struct trace_job *slot1 = NULL, *slot2 = (struct trace_job *)(void *)&job_b;
    struct ring_entry *e1 = NULL, *e2 = NULL, *e3 = NULL;
    assert_int_equal(ring_registry_add(&reg, 7, "uid-1", "Slow", "app", 1024, &slot1, &e1), 0);
    assert_int_equal(ring_registry_add(&reg, 7, "uid-1", "Ring", "app", 2048, &slot2, &e2), 0);
    assert_int_equal(ring_registry_add(&reg, 8, "uid-2", "Ring", NULL, 2048, &slot2, &e3), 0);
    assert_string_equal(e3->name, "");

    struct trace_job *out = NULL;
    const char *name = NULL;
    /* Two rings for uid-1: the running one is picked, with its rule. */
    assert_int_equal(ring_registry_find(&reg, "uid-1", NULL, &out, &name, NULL), 2);
    assert_ptr_equal(out, &job_b);
    assert_string_equal(name, "Ring");
    /* By rule, case-insensitive: the one that is not running right now. */
    assert_int_equal(ring_registry_find(&reg, "uid-1", "slow", &out, &name, NULL), 1);
    assert_null(out);
    assert_string_equal(name, "Slow");
    assert_int_equal(ring_registry_find(&reg, "uid-1", "Nope", &out, &name, NULL), 0);
    assert_null(out);
    assert_int_equal(ring_registry_find(&reg, "uid-3", NULL, &out, &name, NULL), 0);

    /* The slot is read when asked: a ring that starts later is found. */
    slot1 = (struct trace_job *)(void *)&job_a;
    assert_int_equal(ring_registry_find(&reg, "uid-1", "Slow", &out, &name, NULL), 1);
    assert_ptr_equal(out, &job_a);

    ring_registry_remove(&reg, e2);
    assert_int_equal(ring_registry_find(&reg, "uid-1", NULL, &out, &name, NULL), 1);
    assert_string_equal(name, "Slow");
    ring_registry_remove(&reg, NULL);
    ring_registry_fini(&reg);
    assert_null(reg.head);
}

/* A rule that has Finished: its entry stays, and says so (with the rule's reason). */
static void test_find_says_finished(void **state)
{
    (void)state;
    struct ring_registry reg = {0};
    struct trace_job *slot = NULL;
    struct ring_entry *e = NULL;
    assert_int_equal(ring_registry_add(&reg, 7, "uid-1", "Ring", "app", 1024, &slot, &e), 0);
    struct trace_job *out = NULL;
    const char *name = NULL;
    const struct ring_entry *fin = e;
    assert_int_equal(ring_registry_find(&reg, "uid-1", NULL, &out, &name, &fin), 1);
    assert_null(fin); /* not running right now, but not finished */
    ring_registry_set_finished(e, true, "ActionCount 1 reached.");
    assert_int_equal(ring_registry_find(&reg, "uid-1", "ring", &out, &name, &fin), 1);
    assert_ptr_equal(fin, e);
    assert_string_equal(fin->why, "ActionCount 1 reached");
    ring_registry_set_finished(e, false, "ignored");
    assert_int_equal(ring_registry_find(&reg, "uid-1", NULL, &out, &name, &fin), 1);
    assert_null(fin);
    assert_string_equal(e->why, "");
    ring_registry_set_finished(NULL, true, NULL);
    ring_registry_fini(&reg);
}

static int calls;

static void count(void *ud, uint64_t pid, const char *uid, const char *name, const char *rule,
                  const struct ev_ring *ring, uint64_t limit)
{
    (void)ud, (void)pid, (void)uid, (void)name, (void)rule, (void)ring, (void)limit;
    calls++;
}

/* A rule whose ring is not running has no line in /metrics. */
static void test_each_skips_idle(void **state)
{
    (void)state;
    struct ring_registry reg = {0};
    struct trace_job *slot = NULL;
    struct ring_entry *e = NULL;
    assert_int_equal(ring_registry_add(&reg, 7, "uid-1", "Ring", "app", 1024, &slot, &e), 0);
    calls = 0;
    ring_registry_each(&reg, count, NULL);
    assert_int_equal(calls, 0);
    ring_registry_fini(&reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find_prefers_running),
        cmocka_unit_test(test_find_says_finished),
        cmocka_unit_test(test_each_skips_idle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
