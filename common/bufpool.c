/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* MAP_ANONYMOUS, MAP_NORESERVE, madvise */
#include "bufpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BUFPOOL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define BUFPOOL_ASAN 1
#endif
#ifdef BUFPOOL_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n)   ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static struct {
    uint8_t *base;                  /* the reservation, NULL before the first get */
    bool failed;                    /* the reservation failed: every get misses */
    size_t fresh;                   /* blocks [fresh, BUFPOOL_BLOCKS) were never handed out */
    size_t nfree;                   /* entries of stack */
    uint16_t stack[BUFPOOL_BLOCKS]; /* free blocks, the last released on top */
    bool out[BUFPOOL_BLOCKS];
    bool dirty[BUFPOOL_BLOCKS]; /* touched since the last trim */
    size_t nout, max_out, gets, misses;
} P;

static bool reserve(void)
{
    if (P.base != NULL) {
        return true;
    }
    if (P.failed) {
        return false;
    }
    void *m = mmap(NULL, BUFPOOL_BLOCKS * BUFPOOL_BLOCK, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        P.failed = true;
        return false;
    }
    P.base = m;
    POISON(P.base, BUFPOOL_BLOCKS * BUFPOOL_BLOCK);
    return true;
}

/* The index of the block p starts, or -1 when p is not in the reservation; aborts when p lies
 * inside a block but not at its start. */
static long block_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uintptr_t lo = (uintptr_t)P.base;
    if (P.base == NULL || a < lo || a >= lo + BUFPOOL_BLOCKS * BUFPOOL_BLOCK) {
        return -1;
    }
    if ((a - lo) % BUFPOOL_BLOCK != 0) {
        abort(); /* a pointer into a block: the caller lost the block's start */
    }
    return (long)((a - lo) / BUFPOOL_BLOCK);
}

void *bufpool_get(void)
{
    size_t i;
    if (!reserve()) {
        P.misses++;
        return NULL;
    }
    if (P.nfree > 0) {
        i = P.stack[--P.nfree];
    } else if (P.fresh < BUFPOOL_BLOCKS) {
        i = P.fresh++;
    } else {
        P.misses++;
        return NULL;
    }
    P.out[i] = true;
    P.dirty[i] = true;
    P.nout++;
    P.max_out = P.nout > P.max_out ? P.nout : P.max_out;
    P.gets++;
    uint8_t *b = P.base + i * BUFPOOL_BLOCK;
    UNPOISON(b, BUFPOOL_BLOCK);
    return b;
}

bool bufpool_owns(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    uintptr_t lo = (uintptr_t)P.base;
    return P.base != NULL && a >= lo && a < lo + BUFPOOL_BLOCKS * BUFPOOL_BLOCK &&
           (a - lo) % BUFPOOL_BLOCK == 0;
}

void bufpool_release(void *p)
{
    if (p == NULL) {
        return;
    }
    long i = block_of(p);
    if (i < 0) {
        free(p);
        return;
    }
    if (!P.out[i]) {
        abort(); /* released twice */
    }
    P.out[i] = false;
    P.nout--;
    P.stack[P.nfree++] = (uint16_t)i;
    POISON(p, BUFPOOL_BLOCK);
}

size_t bufpool_trim(void)
{
    size_t given = 0;
    for (size_t k = 0; k < P.nfree; k++) {
        size_t i = P.stack[k];
        if (!P.dirty[i]) {
            continue;
        }
        /* Anonymous private pages after MADV_DONTNEED read as zero and cost nothing until
         * written: the block stays usable. */
        if (madvise(P.base + i * BUFPOOL_BLOCK, BUFPOOL_BLOCK, MADV_DONTNEED) == 0) {
            P.dirty[i] = false;
            given += BUFPOOL_BLOCK;
        }
    }
    return given;
}

void bufpool_stats(struct bufpool_stats *st)
{
    size_t committed = 0;
    for (size_t k = 0; k < P.nfree; k++) {
        committed += P.dirty[P.stack[k]] ? 1 : 0;
    }
    *st = (struct bufpool_stats){.out = P.nout,
                                 .max_out = P.max_out,
                                 .committed = committed,
                                 .gets = P.gets,
                                 .misses = P.misses};
}
