/* SPDX-License-Identifier: MIT */
#ifndef AGENT_HEX_H
#define AGENT_HEX_H

/*
 * The one hex helper: digits, bytes as lowercase hex, the text form of a GUID, percent-decoding.
 * Pure: no libuv, no allocation, no globals. Number parsing with a base of 16 is num.h's.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HEX_GUID_SIZE 37 /* "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" and its NUL */

/* The hex digit of v & 15: lowercase, or uppercase (percent-encoding, RFC 3986 2.1). */
char hex_digit(unsigned v);
char hex_digit_upper(unsigned v);
/* The value of hex digit c (either case), or -1 when c is none. */
int hex_value(char c);
/*
 * Percent-decodes s[0..*n) in place (RFC 3986 2.1: "%" and two hex digits of either case) and
 * sets *n to the decoded length; 0. A '%' without two hex digits after it is kept as it is when
 * lenient, else the call returns -1 (s is then partly rewritten). No NUL is written.
 */
int hex_pct_decode(char *s, size_t *n, bool lenient);
/* The lowercase digits of v without leading zeros (at least one) written to out; their count. */
size_t hex_u64(uint64_t v, char out[16]);
/* The 2n lowercase digits of p[0..n) written to out (no NUL). */
void hex_encode(const void *p, size_t n, char *out);
/*
 * A GUID's 16 bytes in the "D" form (8-4-4-4-12, lowercase, NUL-terminated) as .NET prints
 * new Guid(bytes): the first three groups are little-endian integers, so their bytes are reversed.
 */
void hex_guid_dotnet(const uint8_t bytes[16], char out[HEX_GUID_SIZE]);
/* The same with the bytes in order (RFC 9562's byte order, a UUID generated as bytes). */
void hex_guid_bytes(const uint8_t bytes[16], char out[HEX_GUID_SIZE]);

#endif
