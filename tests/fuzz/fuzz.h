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

#endif
