/* SPDX-License-Identifier: MIT */
#ifndef AGENT_MEMTRIM_H
#define AGENT_MEMTRIM_H

#include <stddef.h>

/*
 * Pages an idle process holds for nothing: the start of every mapped ELF file (its headers, the
 * dynamic symbol and string tables and the relocation tables), which only the dynamic linker
 * reads, while it loads the libraries. Every library here is bound at load (BIND_NOW), so once
 * the agent has started nobody reads them again; for libcrypto alone that is 788 KiB of the idle
 * process's RSS (its symbol tables and relocations, kept resident after start-up).
 *
 * memtrim_loader_pages walks /proc/self/smaps and, for each mapping that is a read-only private
 * map of a file at offset 0, begins with the ELF magic and holds no page this process wrote
 * (smaps Anonymous 0: a write to a private mapping makes a private copy, counted there), drops
 * the process's page-table entries (MADV_DONTNEED): the pages stay in the page cache and a later
 * read faults them back in from the file, the same bytes, so nothing is lost. A mapping any page
 * of which was written (a relocated segment made read-only afterwards) is left alone.
 *
 * A blocking read of a procfs file (about a millisecond): call it before the loop runs or off
 * the hot path. No libuv, no logging, not thread-safe against concurrent mmap/munmap of the same
 * ranges by the caller. Returns 0 with what was dropped in *st (may be NULL), or a negative errno
 * when /proc/self/smaps cannot be read.
 */
struct memtrim_stats {
    size_t mappings; /* mappings advised */
    size_t rss_kib;  /* their resident size before (smaps Rss), KiB */
};

int memtrim_loader_pages(struct memtrim_stats *st);

#endif
