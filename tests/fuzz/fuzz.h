/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_FUZZ_H
#define DOTMON_FUZZ_H

/* What every libFuzzer target of tests/fuzz shares. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise of the code under test is a finding, like a crash: abort, in every build. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* FNV-1a of an input: the targets derive their chunking and options from it. */
static inline uint64_t fuzz_fnv1a(const uint8_t *data, size_t size)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < size; i++) {
        h = (h ^ data[i]) * 0x100000001b3ull;
    }
    return h;
}

/* xorshift64: the chunking of the targets that feed an input in pieces comes from it. */
static inline uint64_t fuzz_xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x;
}

/* Next chunk length: mostly small (splitting fields), sometimes large or the whole rest. */
static inline size_t fuzz_next_chunk(uint64_t *rng, size_t left)
{
    uint64_t r = fuzz_xorshift(rng);
    size_t n;
    switch (r & 3) {
    case 0:
        n = 1 + (size_t)((r >> 2) % 8);
        break;
    case 1:
        n = 1 + (size_t)((r >> 2) % 256);
        break;
    case 2:
        n = 1 + (size_t)((r >> 2) % 8192);
        break;
    default:
        n = left;
        break;
    }
    return n < left ? n : left;
}

#endif
