/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* mremap, MREMAP_MAYMOVE */
#include "bigmem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define BIGMEM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIGMEM_ASAN 1
#endif
#endif

struct hdr {
    size_t size;   /* bytes the caller asked for */
    size_t mapped; /* bytes of the mapping (header included), 0 for a malloc'd block */
};

_Static_assert(sizeof(struct hdr) == 16, "the header keeps 16-byte alignment");

static struct hdr *hdr_of(const void *p)
{
    return (struct hdr *)((uintptr_t)p - sizeof(struct hdr));
}

static bool want_map(size_t n)
{
#ifdef BIGMEM_ASAN
    (void)n;
    return false;
#else
    return n >= BIGMEM_MAP_MIN;
#endif
}

/* Bytes of a mapping that holds n bytes and the header, or 0 on overflow. */
static size_t map_bytes(size_t n)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    if (n > SIZE_MAX - sizeof(struct hdr) - page) {
        return 0;
    }
    return (n + sizeof(struct hdr) + page - 1) / page * page;
}

/* A new block of n bytes (n > 0); zeroed when zero. */
static void *block_new(size_t n, bool zero)
{
    struct hdr *h = NULL;
    size_t mapped = 0;
    if (want_map(n)) {
        mapped = map_bytes(n);
        if (mapped == 0) {
            return NULL;
        }
        void *m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) {
            return NULL;
        }
        h = m; /* a fresh anonymous mapping is zeroed */
    } else {
        if (n > SIZE_MAX - sizeof(struct hdr)) {
            return NULL;
        }
        h = zero ? calloc(1, sizeof(*h) + n) : malloc(sizeof(*h) + n);
        if (h == NULL) {
            return NULL;
        }
    }
    h->size = n;
    h->mapped = mapped;
    return h + 1;
}

void *bigmem_calloc(size_t count, size_t size)
{
    if (size != 0 && count > SIZE_MAX / size) {
        return NULL;
    }
    size_t n = count * size;
    return block_new(n == 0 ? 1 : n, true);
}

void *bigmem_realloc(void *p, size_t n)
{
    if (n == 0) {
        n = 1;
    }
    if (p == NULL) {
        return block_new(n, false);
    }
    struct hdr *h = hdr_of(p);
    if (h->mapped != 0 && want_map(n)) {
        size_t mapped = map_bytes(n);
        if (mapped == 0) {
            return NULL;
        }
        void *m = mremap(h, h->mapped, mapped, MREMAP_MAYMOVE);
        if (m == MAP_FAILED) {
            return NULL;
        }
        h = m;
        h->size = n;
        h->mapped = mapped;
        return h + 1;
    }
    if (h->mapped == 0 && !want_map(n)) {
        if (n > SIZE_MAX - sizeof(*h)) {
            return NULL;
        }
        struct hdr *nh = realloc(h, sizeof(*h) + n);
        if (nh == NULL) {
            return NULL;
        }
        nh->size = n;
        return nh + 1;
    }
    /* Across the threshold: a new block, the bytes copied. */
    void *np = block_new(n, false);
    if (np == NULL) {
        return NULL;
    }
    memcpy(np, p, h->size < n ? h->size : n);
    bigmem_free(p);
    return np;
}

void bigmem_free(void *p)
{
    if (p == NULL) {
        return;
    }
    struct hdr *h = hdr_of(p);
    if (h->mapped != 0) {
        munmap(h, h->mapped);
    } else {
        free(h);
    }
}

bool bigmem_mapped(const void *p)
{
    return p != NULL && hdr_of(p)->mapped != 0;
}
