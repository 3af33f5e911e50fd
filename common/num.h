/* SPDX-License-Identifier: MIT */
#ifndef AGENT_NUM_H
#define AGENT_NUM_H

#include <stddef.h>
#include <stdint.h>

/*
 * The one strict number parser: unsigned digits of base 10 or 16 (either case), nothing else (no
 * sign, no blank, no "0x"), overflow checked, at most max. Pure.
 */

/* All of s[0..n) is the number. Returns 0 with *out set, or AGENT_E_INVAL (empty, a non-digit,
 * over max). */
int num_parse_u64(const char *s, size_t n, unsigned base, uint64_t max, uint64_t *out);

/* The same for a NUL-terminated string. */
int num_parse_u64_str(const char *s, unsigned base, uint64_t max, uint64_t *out);

/* The longest run of digits at the start of s[0..n): returns how many characters it took (0
 * when s does not start with a digit, or the run is over max), with *out set when not 0. */
size_t num_prefix_u64(const char *s, size_t n, unsigned base, uint64_t max, uint64_t *out);

/* A bijective mix of x's bits (a 32-bit finalizer), for hash tables keyed by small integers
 * such as metadata ids. */
uint32_t num_mix_u32(uint32_t x);

#endif
