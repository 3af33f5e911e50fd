/* SPDX-License-Identifier: MIT */
#ifndef AGENT_BUFPOOL_H
#define AGENT_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Blocks for the hot paths that read into a buffer and hand the buffer itself on to a writer (a
 * trace relayed to HTTP, a dump streamed from its file): reused instead of allocated per read.
 *
 * Why: a 256 KiB block per read, freed when written, makes glibc's heap grow and trim its top
 * over and over (a brk pair and 64 fresh zero-filled pages per read), and whether it does depends
 * on its adaptive mmap threshold: whole relays ran at a fifth of their speed. The pool's blocks
 * lie in one mapping reserved at first use (address space only; a block's pages are committed
 * when first written) and never go back to malloc, so a relay costs no system call and no page
 * fault per read once its blocks are warm. Free blocks are reused last-returned first, so a relay
 * keeps touching the same few blocks.
 *
 * Ownership: a block from bufpool_get belongs to the caller until it is handed to
 * bufpool_release, the one way to release any "owned" buffer of the write paths (HTTP, spool,
 * egress): a pool block goes back to the pool, any other pointer goes to free(). Releasing a
 * pointer inside a block other than its start aborts (a bug). Under AddressSanitizer a block in
 * the pool is poisoned: a use after release is reported.
 *
 * Memory: committed pages stay with free blocks (that is the reuse) until bufpool_trim gives them
 * back, which the agent does when it goes idle; never on the hot path. The pool is process-wide
 * and used from the event loop's thread only.
 */

#define BUFPOOL_BLOCK  ((size_t)256 * 1024)
#define BUFPOOL_BLOCKS 32 /* 8 MiB of address space */

/* A BUFPOOL_BLOCK-byte block (contents undefined), or NULL when every block is out or the
 * reservation failed: the caller then uses malloc (and still releases with bufpool_release). */
void *bufpool_get(void);

/* Releases an owned buffer: a pool block goes back to the pool, anything else to free(). NULL is
 * a no-op. */
void bufpool_release(void *p);

/* True when p is the start of one of the pool's blocks. */
bool bufpool_owns(const void *p);

/* Gives the pages of every free block back to the system (blocks that are out are untouched);
 * the next use of such a block faults its pages in again. Returns the bytes given back. */
size_t bufpool_trim(void);

struct bufpool_stats {
    size_t out;       /* blocks handed out and not yet released */
    size_t max_out;   /* the most ever out at once */
    size_t committed; /* free blocks whose pages have been touched since the last trim */
    size_t gets;      /* bufpool_get calls that returned a block */
    size_t misses;    /* bufpool_get calls that returned NULL */
};
void bufpool_stats(struct bufpool_stats *st);

#endif
