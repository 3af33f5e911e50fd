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

/*
 * A decimal number read as .NET reads a `float` setting (single precision): digits with an
 * optional fraction and exponent ("5", "0.5", "1.25", "2e1"), nothing else (no sign, blank,
 * "inf", "nan", hex). Returns 0 with *out set to the single-precision value, or AGENT_E_INVAL.
 */
int num_parse_float32(const char *s, double *out);

/*
 * v rounded to single precision, written as .NET's float.ToString(InvariantCulture) writes it
 * for values from 1e-9 to 1e9: the fewest decimals that read back as the same float ("5", "1.5",
 * "0.1"), no exponent. Returns 0, or AGENT_E_INVAL when it does not fit in cap or v is out of
 * that range.
 */
int num_format_float32(char *out, size_t cap, double v);

/* A bijective mix of x's bits (a 32-bit finalizer), for hash tables keyed by small integers
 * such as metadata ids. */
uint32_t num_mix_u32(uint32_t x);

#endif
