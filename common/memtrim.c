/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* madvise, MADV_DONTNEED */
#include "memtrim.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "num.h"

/* One mapping of smaps, as its lines go by. */
struct mapping {
    uintptr_t start, end;
    bool candidate;             /* r--p, offset 0, a file */
    uint64_t rss_kib, anon_kib; /* anon: pages this process wrote (copies of the file's) */
};

/* The decimal after "Key:" in a smaps line, or 0. */
static uint64_t kib_after(const char *line, size_t keylen)
{
    const char *p = line + keylen;
    while (*p == ' ' || *p == '\t') {
        p++;
    }
    uint64_t v = 0;
    return num_prefix_u64(p, strlen(p), 10, UINT64_MAX, &v) > 0 ? v : 0;
}

/* A header line "start-end perms offset dev inode [path]": fills m, false when malformed. */
static bool parse_header(const char *line, struct mapping *m)
{
    uint64_t start = 0, end = 0, off = 0;
    size_t n = strlen(line);
    size_t a = num_prefix_u64(line, n, 16, UINTPTR_MAX, &start);
    if (a == 0 || line[a] != '-') {
        return false;
    }
    size_t b = num_prefix_u64(line + a + 1, n - a - 1, 16, UINTPTR_MAX, &end);
    const char *p = line + a + 1 + b;
    if (b == 0 || end <= start || strncmp(p, " r--p ", 6) != 0) {
        *m = (struct mapping){.start = (uintptr_t)start, .end = (uintptr_t)end};
        return true; /* a mapping, just not one to drop */
    }
    p += 6;
    size_t c = num_prefix_u64(p, strlen(p), 16, UINT64_MAX, &off);
    const char *path = strchr(p + c, '/');
    *m = (struct mapping){.start = (uintptr_t)start,
                          .end = (uintptr_t)end,
                          .candidate = c > 0 && off == 0 && path != NULL};
    return true;
}

/* Drops m's pages when it qualifies; counts it in st. */
static void settle(const struct mapping *m, struct memtrim_stats *st)
{
    if (!m->candidate || m->anon_kib != 0 || m->rss_kib == 0) {
        return;
    }
    static const unsigned char elf[4] = {0x7f, 'E', 'L', 'F'};
    if (memcmp((const void *)m->start, elf, sizeof(elf)) != 0) {
        return; /* a data file mapped read-only: not ours to judge */
    }
    if (madvise((void *)m->start, m->end - m->start, MADV_DONTNEED) == 0) {
        st->mappings++;
        st->rss_kib += (size_t)m->rss_kib;
    }
}

int memtrim_loader_pages(struct memtrim_stats *st)
{
    struct memtrim_stats local = {0};
    FILE *f = fopen("/proc/self/smaps", "re");
    if (f == NULL) {
        return -errno;
    }
    char line[512];
    struct mapping m = {0};
    bool have = false, partial = false;
    while (fgets(line, sizeof(line), f) != NULL) {
        bool cont = partial; /* the rest of a line longer than the buffer */
        partial = strchr(line, '\n') == NULL;
        if (cont) {
            continue;
        }
        char c = line[0];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
            if (have) {
                settle(&m, &local);
            }
            have = parse_header(line, &m);
        } else if (!have) {
            continue;
        } else if (strncmp(line, "Rss:", 4) == 0) {
            m.rss_kib = kib_after(line, 4);
        } else if (strncmp(line, "Anonymous:", 10) == 0) {
            m.anon_kib = kib_after(line, 10);
        }
    }
    if (have) {
        settle(&m, &local);
    }
    fclose(f);
    if (st != NULL) {
        *st = local;
    }
    return 0;
}
