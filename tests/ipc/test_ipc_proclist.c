/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ipc_internal.h"
#include "ipc_proclist.h"

/* What on_change saw, in order. */
struct seen {
    char what[16][48]; /* "+<uid>" or "-<uid>" */
    size_t n;
    /* During a removal report the entry must still be whole: its command line is read. */
    char last_removed_cmdline[32];
};

static void on_change(void *ud, const struct ipc_process *p, bool added)
{
    struct seen *s = ud;
    assert_true(s->n < 16);
    snprintf(s->what[s->n++], sizeof(s->what[0]), "%c%s", added ? '+' : '-', p->uid);
    if (!added) {
        snprintf(s->last_removed_cmdline, sizeof(s->last_removed_cmdline), "%s", p->command_line);
    }
}

/* An entry as discovery or the listener makes one; ipc_proclist_entry_free frees its strings. */
static struct ipc_proclist_entry *entry(uint64_t pid, const char *uid, uint64_t key, uint64_t rank,
                                        const char *endpoint)
{
    struct ipc_proclist_entry *e = ipc_proclist_entry_new();
    assert_non_null(e);
    e->pub.pid = pid;
    snprintf(e->pub.uid, sizeof(e->pub.uid), "%s", uid);
    e->pub.key = key;
    e->rank = rank;
    e->pub.ep.path = strdup(endpoint); /* as ipc__process_init's copy */
    e->pub.endpoint = e->pub.ep.path;
    e->pub.command_line = strdup(uid);
    e->pub.name = strdup("app");
    e->pub.os = strdup("Linux");
    e->pub.arch = strdup("X64");
    assert_non_null(e->pub.endpoint);
    return e;
}

static void publish(struct ipc_proclist *pl, struct ipc_proclist_entry **es, size_t n)
{
    ipc_proclist_begin(pl);
    for (size_t i = 0; i < n; i++) {
        ipc_proclist_add(pl, es[i]);
    }
    ipc_proclist_publish(pl);
}

/* Sorted by pid; the same pid sorts by key, then rank (newest), then endpoint. */
static void test_proclist_sorts(void **state)
{
    (void)state;
    struct ipc_proclist pl;
    ipc_proclist_init(&pl, NULL, NULL);
    assert_int_equal(ipc_proclist_reserve(&pl, 5), 0);
    struct ipc_proclist_entry *es[] = {
        entry(30, "c", 0, 0, "/t/c"),  entry(10, "b", 0, 0, "/t/b"),  entry(20, "x", 1, 0, "/t/x1"),
        entry(20, "y", 2, 0, "/t/y2"), entry(20, "z", 1, 9, "/t/z1"),
    };
    publish(&pl, es, 5);
    assert_int_equal(ipc_proclist_count(&pl), 5);
    const char *order[] = {"b", "y", "z", "x", "c"};
    for (size_t i = 0; i < 5; i++) {
        assert_string_equal(ipc_proclist_at(&pl, i)->uid, order[i]);
    }
    assert_null(ipc_proclist_at(&pl, 5));
    assert_ptr_equal(ipc_proclist_find_uid(&pl, "z"), &es[4]->pub);
    assert_null(ipc_proclist_find_uid(&pl, "nope"));
    for (size_t i = 0; i < 5; i++) {
        ipc_proclist_entry_free(es[i]);
    }
    ipc_proclist_fini(&pl);
    ipc_proclist_fini(&pl); /* twice is fine */
}

/* Two sockets of one runtime (same pid and uid): only the winner (highest key) is listed. */
static void test_proclist_one_per_pid_and_uid(void **state)
{
    (void)state;
    struct seen seen = {0};
    struct ipc_proclist pl;
    ipc_proclist_init(&pl, on_change, &seen);
    assert_int_equal(ipc_proclist_reserve(&pl, 3), 0);
    struct ipc_proclist_entry *old = entry(7, "u", 1, 0, "/t/old");
    struct ipc_proclist_entry *newer = entry(7, "u", 2, 0, "/t/new");
    struct ipc_proclist_entry *other_ns = entry(7, "v", 0, 0, "/t/other");
    struct ipc_proclist_entry *es[] = {old, newer, other_ns};
    publish(&pl, es, 3);
    assert_int_equal(ipc_proclist_count(&pl), 2);
    assert_ptr_equal(ipc_proclist_at(&pl, 0), &newer->pub);
    assert_ptr_equal(ipc_proclist_at(&pl, 1), &other_ns->pub);
    assert_int_equal(seen.n, 2);
    assert_string_equal(seen.what[0], "+u");
    assert_string_equal(seen.what[1], "+v");
    for (size_t i = 0; i < 3; i++) {
        ipc_proclist_entry_free(es[i]);
    }
    ipc_proclist_fini(&pl);
}

/*
 * Publishing reports what left (first) and what joined, and nothing for what stayed; a retired
 * entry is still whole during its removal report and freed by that publish (ASan/valgrind would
 * catch a leak or a use after free).
 */
static void test_proclist_diff_notify_retire(void **state)
{
    (void)state;
    struct seen seen = {0};
    struct ipc_proclist pl;
    ipc_proclist_init(&pl, on_change, &seen);
    assert_int_equal(ipc_proclist_reserve(&pl, 3), 0);
    struct ipc_proclist_entry *a = entry(1, "a", 0, 0, "/t/a");
    struct ipc_proclist_entry *b = entry(2, "b", 0, 0, "/t/b");
    struct ipc_proclist_entry *es1[] = {a, b};
    publish(&pl, es1, 2);
    assert_int_equal(seen.n, 2);

    /* Nothing changed: no report. */
    publish(&pl, es1, 2);
    assert_int_equal(seen.n, 2);

    /* a leaves (retired by its producer), c joins. */
    struct ipc_proclist_entry *c = entry(3, "c", 0, 0, "/t/c");
    ipc_proclist_retire(&pl, a);
    ipc_proclist_retire(&pl, NULL); /* nothing to retire: fine */
    struct ipc_proclist_entry *es2[] = {c, b};
    publish(&pl, es2, 2);
    assert_int_equal(seen.n, 4);
    assert_string_equal(seen.what[2], "-a");
    assert_string_equal(seen.what[3], "+c");
    assert_string_equal(seen.last_removed_cmdline, "a");
    assert_int_equal(ipc_proclist_count(&pl), 2);
    assert_null(pl.retired);

    /* Muted (the owner closes): the list changes, nobody is told, retired entries still go. */
    ipc_proclist_mute(&pl);
    ipc_proclist_retire(&pl, b);
    struct ipc_proclist_entry *es3[] = {c};
    publish(&pl, es3, 1);
    assert_int_equal(seen.n, 4);
    assert_int_equal(ipc_proclist_count(&pl), 1);
    assert_null(pl.retired);

    /* A retired entry left at close is freed by fini. */
    ipc_proclist_retire(&pl, c);
    ipc_proclist_fini(&pl);
}

/* reserve grows both arrays together and never shrinks them. */
static void test_proclist_reserve(void **state)
{
    (void)state;
    struct ipc_proclist pl;
    ipc_proclist_init(&pl, NULL, NULL);
    assert_int_equal(ipc_proclist_reserve(&pl, 1), 0);
    assert_int_equal(pl.cap, 16);
    assert_int_equal(ipc_proclist_reserve(&pl, 40), 0);
    assert_int_equal(pl.cap, 64);
    assert_int_equal(ipc_proclist_reserve(&pl, 3), 0);
    assert_int_equal(pl.cap, 64);
    struct ipc_proclist_entry *es[40];
    for (size_t i = 0; i < 40; i++) {
        char uid[8];
        snprintf(uid, sizeof(uid), "u%zu", i);
        es[i] = entry(40 - i, uid, 0, 0, uid);
    }
    publish(&pl, es, 40);
    assert_int_equal(ipc_proclist_count(&pl), 40);
    assert_int_equal(ipc_proclist_at(&pl, 0)->pid, 1);
    for (size_t i = 0; i < 40; i++) {
        ipc_proclist_retire(&pl, es[i]);
    }
    ipc_proclist_begin(&pl);
    ipc_proclist_publish(&pl);
    assert_int_equal(ipc_proclist_count(&pl), 0);
    ipc_proclist_fini(&pl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proclist_sorts),
        cmocka_unit_test(test_proclist_one_per_pid_and_uid),
        cmocka_unit_test(test_proclist_diff_notify_retire),
        cmocka_unit_test(test_proclist_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
