/* SPDX-License-Identifier: MIT */
/*
 * common/bufpool: blocks handed out once each, reused last-released first, a bounded pool that
 * says NULL when empty, any other pointer freed, pages given back by trim (checked with
 * mincore), misuse (a pointer into a block, a double release) aborting, and under
 * AddressSanitizer a released block poisoned.
 */
#define _GNU_SOURCE /* mincore */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bufpool.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#endif
#ifdef TEST_ASAN
#include <sanitizer/asan_interface.h>
#endif

static struct bufpool_stats stats(void)
{
    struct bufpool_stats st;
    bufpool_stats(&st);
    return st;
}

/* Resident pages of the block at b (mincore). */
static size_t resident_pages(void *b)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t n = BUFPOOL_BLOCK / page;
    unsigned char *vec = malloc(n);
    assert_non_null(vec);
    assert_int_equal(mincore(b, BUFPOOL_BLOCK, vec), 0);
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        r += vec[i] & 1;
    }
    free(vec);
    return r;
}

static void test_blocks_distinct_and_reused(void **state)
{
    (void)state;
    struct bufpool_stats before = stats();
    uint8_t *a = bufpool_get();
    uint8_t *b = bufpool_get();
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    assert_true(bufpool_owns(a) && bufpool_owns(b));
    assert_false(bufpool_owns(a + 1));
    size_t gap = a > b ? (size_t)(a - b) : (size_t)(b - a);
    assert_true(gap >= BUFPOOL_BLOCK); /* no overlap */
    memset(a, 0xA5, BUFPOOL_BLOCK);    /* the whole block is the caller's */
    memset(b, 0x5A, BUFPOOL_BLOCK);
    assert_int_equal(stats().out, before.out + 2);
    bufpool_release(a);
    bufpool_release(b);
    assert_int_equal(stats().out, before.out);
    /* The last released comes back first: a relay keeps touching the same few blocks. */
    uint8_t *c = bufpool_get();
    assert_ptr_equal(c, b);
    bufpool_release(c);
    assert_int_equal(stats().gets, before.gets + 3);
}

static void test_bounded_then_null(void **state)
{
    (void)state;
    void *held[BUFPOOL_BLOCKS];
    size_t n = 0;
    while (n < BUFPOOL_BLOCKS) {
        void *p = bufpool_get();
        if (p == NULL) {
            break;
        }
        held[n++] = p;
    }
    assert_int_equal(n, BUFPOOL_BLOCKS); /* nothing else holds blocks in this test */
    size_t misses = stats().misses;
    assert_null(bufpool_get());
    assert_int_equal(stats().misses, misses + 1);
    assert_int_equal(stats().max_out, BUFPOOL_BLOCKS);
    bufpool_release(held[--n]);
    void *again = bufpool_get();
    assert_non_null(again);
    held[n++] = again;
    while (n > 0) {
        bufpool_release(held[--n]);
    }
    assert_int_equal(stats().out, 0);
}

static void test_other_pointers_freed(void **state)
{
    (void)state;
    void *m = malloc(1000); /* leak checkers (valgrind, LeakSanitizer) see it freed */
    assert_non_null(m);
    assert_false(bufpool_owns(m));
    size_t out = stats().out;
    bufpool_release(m);
    bufpool_release(NULL);
    assert_int_equal(stats().out, out);
}

static void test_trim_gives_pages_back(void **state)
{
    (void)state;
    uint8_t *a = bufpool_get();
    assert_non_null(a);
    memset(a, 1, BUFPOOL_BLOCK);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    assert_int_equal(resident_pages(a), BUFPOOL_BLOCK / page);
    bufpool_release(a);
    assert_true(stats().committed >= 1);
    assert_true(bufpool_trim() >= BUFPOOL_BLOCK);
    assert_int_equal(stats().committed, 0);
    assert_int_equal(bufpool_trim(), 0); /* nothing left to give */
    uint8_t *b = bufpool_get();
    assert_ptr_equal(b, a);
    assert_int_equal(resident_pages(b), 0);
    assert_int_equal(b[0], 0); /* usable again: fresh zero pages */
    b[BUFPOOL_BLOCK - 1] = 7;
    assert_int_equal(b[BUFPOOL_BLOCK - 1], 7);
    /* A block that is out keeps its pages through a trim. */
    memset(b, 2, BUFPOOL_BLOCK);
    (void)bufpool_trim();
    assert_int_equal(resident_pages(b), BUFPOOL_BLOCK / page);
    assert_int_equal(b[12345], 2);
    bufpool_release(b);
}

/* fn(arg) in a child: true when it died of SIGABRT. */
static bool aborts(void (*fn)(void *), void *arg)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        signal(SIGABRT, SIG_DFL);
        fn(arg);
        _exit(0);
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
}

static void release_inside(void *arg)
{
    (void)arg;
    uint8_t *a = bufpool_get();
    bufpool_release(a + 4096);
}

static void release_twice(void *arg)
{
    (void)arg;
    void *a = bufpool_get();
    bufpool_release(a);
    bufpool_release(a);
}

static void test_misuse_aborts(void **state)
{
    (void)state;
    assert_true(aborts(release_inside, NULL));
    assert_true(aborts(release_twice, NULL));
}

static void test_released_block_poisoned(void **state)
{
    (void)state;
#ifdef TEST_ASAN
    uint8_t *a = bufpool_get();
    assert_non_null(a);
    assert_false(__asan_address_is_poisoned(a));
    assert_false(__asan_address_is_poisoned(a + BUFPOOL_BLOCK - 1));
    bufpool_release(a);
    assert_true(__asan_address_is_poisoned(a));
    assert_true(__asan_address_is_poisoned(a + BUFPOOL_BLOCK / 2));
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocks_distinct_and_reused),
        cmocka_unit_test(test_bounded_then_null),
        cmocka_unit_test(test_other_pointers_freed),
        cmocka_unit_test(test_trim_gives_pages_back),
        cmocka_unit_test(test_misuse_aborts),
        cmocka_unit_test(test_released_block_poisoned),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
