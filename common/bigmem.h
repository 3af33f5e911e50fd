/* SPDX-License-Identifier: MIT */
#ifndef AGENT_BIGMEM_H
#define AGENT_BIGMEM_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Big working tables (a heap snapshot's nodes, edges and hash tables: megabytes each, grown by
 * doubling, all freed together at the end of a request) straight from the kernel, so that they
 * never sit in malloc's heap.
 *
 * Why: glibc serves a block of 128 KiB or more with its own mmap, but once such a block is freed
 * it raises that threshold to the block's size (up to 32 MiB). From the second snapshot on, the
 * tables came from the brk heap instead: a table that doubles is copied into a new block while
 * the old one is still held, the heap top climbs past every hole, and the process's peak was 59.7
 * MiB of heap for a graph whose first snapshot needed 13.2 MiB (strace of two consecutive 1
 * M-object /gcdumps). Here a block of at least BIGMEM_MAP_MIN bytes is always its own private
 * anonymous mapping: growth is mremap (the pages move, nothing is copied), and bigmem_free unmaps
 * it, so its memory goes back whole at once, whatever else the heap holds. Smaller blocks come
 * from malloc. Under AddressSanitizer every block comes from malloc, so that ASan still sees
 * every access.
 *
 * Each block carries a 16-byte header (its size and where it came from): only bigmem_free may
 * free it. Blocks are 16-byte aligned. Thread-safe as malloc is; no libuv, no logging.
 */

#define BIGMEM_MAP_MIN ((size_t)128 * 1024)

/* count * size bytes, zeroed; NULL on overflow or when out of memory. */
void *bigmem_calloc(size_t count, size_t size);

/*
 * p (NULL: a new block) resized to n bytes, its first min(old, n) bytes kept; bytes past the old
 * size are not zeroed. NULL when out of memory (p is then unchanged and still owned by the
 * caller). n == 0 is treated as 1.
 */
void *bigmem_realloc(void *p, size_t n);

/* Frees a block of bigmem_calloc or bigmem_realloc (NULL is fine). */
void bigmem_free(void *p);

/* True when p is its own mapping (unmapped whole by bigmem_free). */
bool bigmem_mapped(const void *p);

#endif
