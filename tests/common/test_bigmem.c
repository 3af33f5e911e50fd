/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/bigmem: blocks below and above the mapping threshold, zeroed by calloc,
 * contents kept by realloc in every direction (small to small, small to big, big to big, big to
 * small), sizes that overflow refused, and a big block's memory gone from the process once freed
 * (its pages no longer mapped: no use after release is possible, and nothing stays in malloc's
 * heap). Under AddressSanitizer every block comes from malloc, and ASan checks the bounds.
 */
#define _GNU_SOURCE /* mincore */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "bigmem.h"

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        p[i] = (unsigned char)(i * 7u + seed);
    }
}

static void assert_filled(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != (unsigned char)(i * 7u + seed)) {
            fail_msg("byte %zu of %zu: %u", i, n, p[i]);
        }
    }
}

static void assert_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            fail_msg("byte %zu of %zu is %u", i, n, p[i]);
        }
    }
}

/* True while the page holding p is mapped in this process (mincore fails with ENOMEM if not). */
static bool page_mapped(const void *p)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char vec = 0;
    void *base = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
    return mincore(base, page, &vec) == 0 || errno != ENOMEM;
}

static void test_calloc_zeroed_both_sides_of_threshold(void **state)
{
    (void)state;
    const size_t sizes[] = {1,
                            16,
                            4096,
                            BIGMEM_MAP_MIN - 1,
                            BIGMEM_MAP_MIN,
                            BIGMEM_MAP_MIN + 1,
                            (size_t)3 * 1024 * 1024 + 5};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        unsigned char *p = bigmem_calloc(sizes[k], 1);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 16, 0);
        assert_zero(p, sizes[k]);
        fill(p, sizes[k], (unsigned)k); /* the whole block is writable */
        assert_filled(p, sizes[k], (unsigned)k);
        bigmem_free(p);
        /* A block reused after the free is zeroed again. */
        p = bigmem_calloc(sizes[k], 1);
        assert_non_null(p);
        assert_zero(p, sizes[k]);
        bigmem_free(p);
    }
}

static void test_realloc_keeps_contents(void **state)
{
    (void)state;
    /* small -> small -> big -> bigger -> big -> small, as a table that doubles (and then, for the
     * test, shrinks): the bytes held before every step are still there after it. */
    const size_t steps[] = {
        64, 4096, BIGMEM_MAP_MIN * 2, (size_t)8 * 1024 * 1024, BIGMEM_MAP_MIN + 4096, 1000};
    unsigned char *p = NULL;
    size_t have = 0;
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        unsigned char *np = bigmem_realloc(p, steps[k]);
        assert_non_null(np);
        size_t kept = have < steps[k] ? have : steps[k];
        assert_filled(np, kept, 3);
        p = np;
        have = steps[k];
        fill(p, have, 3);
    }
    assert_filled(p, have, 3);
    bigmem_free(p);
}

static void test_big_block_unmapped_on_free(void **state)
{
    (void)state;
    unsigned char *p = bigmem_realloc(NULL, (size_t)4 * 1024 * 1024);
    assert_non_null(p);
    if (!bigmem_mapped(p)) {
        bigmem_free(p);
        skip(); /* AddressSanitizer: every block is malloc's */
    }
    fill(p, (size_t)4 * 1024 * 1024, 9);
    unsigned char *last = p + (size_t)4 * 1024 * 1024 - 1;
    assert_true(page_mapped(p));
    assert_true(page_mapped(last));
    bigmem_free(p);
    assert_false(page_mapped(p));
    assert_false(page_mapped(last));
    /* Below the threshold a block is malloc's. */
    unsigned char *s = bigmem_calloc(BIGMEM_MAP_MIN - 64, 1);
    assert_non_null(s);
    assert_false(bigmem_mapped(s));
    bigmem_free(s);
}

static void test_overflow_refused(void **state)
{
    (void)state;
    assert_null(bigmem_calloc(SIZE_MAX / 2, 3));
    assert_null(bigmem_calloc(SIZE_MAX, 1));
    unsigned char *p = bigmem_calloc(BIGMEM_MAP_MIN, 1);
    assert_non_null(p);
    fill(p, BIGMEM_MAP_MIN, 5);
    assert_null(bigmem_realloc(p, SIZE_MAX - 8));
    assert_filled(p, BIGMEM_MAP_MIN, 5); /* still the caller's, unchanged */
    bigmem_free(p);
    bigmem_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calloc_zeroed_both_sides_of_threshold),
        cmocka_unit_test(test_realloc_keeps_contents),
        cmocka_unit_test(test_big_block_unmapped_on_free),
        cmocka_unit_test(test_overflow_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
