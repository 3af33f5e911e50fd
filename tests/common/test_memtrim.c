/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of common/memtrim: the read-only start of a mapped ELF file is dropped from the
 * process's resident pages and reads back unchanged; a mapping this process wrote, a file that is
 * not ELF and a mapping at a non-zero offset are left alone. Real files in a private temporary
 * folder, mapped as the dynamic linker maps a library's first segment (read-only, private).
 */
#define _GNU_SOURCE /* madvise, mkdtemp */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "memtrim.h"
#include "num.h"

#define PAGES 8

struct fx {
    char dir[64];
    char path[96];
    size_t len;
};

/* The file's byte at i: the ELF magic first (when elf), then a pattern that differs per page. */
static unsigned char byte_at(size_t i, bool elf)
{
    static const unsigned char magic[4] = {0x7f, 'E', 'L', 'F'};
    if (elf && i < sizeof(magic)) {
        return magic[i];
    }
    return (unsigned char)((i * 31u) ^ (i >> 12));
}

static void write_file(struct fx *fx, bool elf)
{
    int fd = open(fx->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    unsigned char *b = malloc(fx->len);
    assert_non_null(b);
    for (size_t i = 0; i < fx->len; i++) {
        b[i] = byte_at(i, elf);
    }
    assert_int_equal(write(fd, b, fx->len), (ssize_t)fx->len);
    free(b);
    close(fd);
}

/* Maps the file read-only and private from offset off (as ld.so maps a segment) and reads every
 * page, so all are resident. */
static unsigned char *map_file(struct fx *fx, size_t off, int prot)
{
    int fd = open(fx->path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    void *p = mmap(NULL, fx->len - off, prot, MAP_PRIVATE, fd, (off_t)off);
    close(fd);
    assert_true(p != MAP_FAILED);
    volatile unsigned char sum = 0;
    for (size_t i = 0; i < fx->len - off; i += 4096) {
        sum ^= ((unsigned char *)p)[i];
    }
    (void)sum;
    return p;
}

/* Rss (KiB) of the mapping that starts at p, from /proc/self/smaps; -1 if not found. */
static long rss_kib(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    assert_non_null(f);
    char line[512];
    bool in = false;
    long rss = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        uint64_t start = 0;
        char c = line[0];
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
            in = num_prefix_u64(line, strlen(line), 16, UINT64_MAX, &start) > 0 &&
                 start == (uint64_t)(uintptr_t)p;
        } else if (in && strncmp(line, "Rss:", 4) == 0) {
            const char *v = line + 4;
            while (*v == ' ') {
                v++;
            }
            uint64_t kib = 0;
            assert_true(num_prefix_u64(v, strlen(v), 10, UINT64_MAX, &kib) > 0);
            rss = (long)kib;
            break;
        }
    }
    fclose(f);
    return rss;
}

static void assert_content(const unsigned char *p, size_t off, size_t n, bool elf)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != byte_at(off + i, elf)) {
            fail_msg("byte %zu: %u, the file has %u", off + i, p[i], byte_at(off + i, elf));
        }
    }
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    if (fx == NULL) {
        return -1;
    }
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test_memtrim.XXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof(fx->path), "%s/lib.so", fx->dir);
    fx->len = (size_t)PAGES * (size_t)sysconf(_SC_PAGESIZE);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    unlink(fx->path);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

/* The start of an ELF file, read-only and never written: dropped, and it reads back unchanged. */
static void test_elf_start_dropped_and_reads_back(void **state)
{
    struct fx *fx = *state;
    write_file(fx, true);
    unsigned char *p = map_file(fx, 0, PROT_READ);
    assert_true(rss_kib(p) >= (long)(fx->len / 1024));
    struct memtrim_stats st = {0};
    assert_int_equal(memtrim_loader_pages(&st), 0);
    assert_true(st.mappings >= 1);
    assert_true(st.rss_kib >= fx->len / 1024);
    assert_int_equal(rss_kib(p), 0);
    assert_content(p, 0, fx->len, true); /* faulted back in from the file */
    assert_true(rss_kib(p) > 0);
    /* A second call drops it again (the pages came back clean). */
    assert_int_equal(memtrim_loader_pages(NULL), 0);
    assert_int_equal(rss_kib(p), 0);
    munmap(p, fx->len);
}

/* A private mapping this process wrote (a relocated segment made read-only afterwards): its
 * written page is not the file's any more, so nothing of the mapping is dropped. */
static void test_written_mapping_kept(void **state)
{
    struct fx *fx = *state;
    write_file(fx, true);
    unsigned char *p = map_file(fx, 0, PROT_READ | PROT_WRITE);
    p[fx->len - 1] ^= 0xff;
    assert_int_equal(mprotect(p, fx->len, PROT_READ), 0);
    long before = rss_kib(p);
    assert_int_equal(memtrim_loader_pages(NULL), 0);
    assert_int_equal(rss_kib(p), before);
    assert_int_equal(p[fx->len - 1], (unsigned char)(byte_at(fx->len - 1, true) ^ 0xff));
    assert_content(p, 0, fx->len - 1, true);
    munmap(p, fx->len);
}

/* A data file mapped read-only (no ELF magic) is not the loader's: left resident. */
static void test_non_elf_kept(void **state)
{
    struct fx *fx = *state;
    write_file(fx, false);
    unsigned char *p = map_file(fx, 0, PROT_READ);
    long before = rss_kib(p);
    assert_true(before >= (long)(fx->len / 1024));
    assert_int_equal(memtrim_loader_pages(NULL), 0);
    assert_int_equal(rss_kib(p), before);
    assert_content(p, 0, fx->len, false);
    munmap(p, fx->len);
}

/* A read-only segment further into the file (a library's .rodata) is not the loader's tables. */
static void test_nonzero_offset_kept(void **state)
{
    struct fx *fx = *state;
    write_file(fx, true);
    size_t off = (size_t)sysconf(_SC_PAGESIZE);
    unsigned char *p = map_file(fx, off, PROT_READ);
    long before = rss_kib(p);
    assert_true(before > 0);
    assert_int_equal(memtrim_loader_pages(NULL), 0);
    assert_int_equal(rss_kib(p), before);
    assert_content(p, off, fx->len - off, true);
    munmap(p, fx->len - off);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_elf_start_dropped_and_reads_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_written_mapping_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_elf_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nonzero_offset_kept, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
