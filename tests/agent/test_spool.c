/* SPDX-License-Identifier: MIT */
/*
 * agent/spool on a real libuv loop and real files: bytes come out in the order they went in,
 * through memory and the file; the file has no name and goes with the spool; the limit and the
 * memory cap say "full"; a folder that cannot take the file falls back to the memory window;
 * closing with reads and writes in flight leaks nothing (valgrind run of this test).
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include <cmocka.h>

#include "bufpool.h"
#include "err.h"
#include "spool.h"

struct fx {
    uv_loop_t loop;
    char dir[64];
    struct spool *s;
    uint64_t out; /* bytes popped so far */
    bool bad;     /* a popped byte was not the expected one */
    int status;   /* of the last pop */
    bool popped;
};

static void nap(void)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
    nanosleep(&ts, NULL);
}

static uint8_t pattern(uint64_t i)
{
    return (uint8_t)((i * 2654435761u) >> 13);
}

static int setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    if (fx == NULL || uv_loop_init(&fx->loop) != 0) {
        free(fx);
        return -1;
    }
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/spoolXXXXXX");
    if (mkdtemp(fx->dir) == NULL) {
        return -1;
    }
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fx *fx = *state;
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_int_equal(uv_loop_close(&fx->loop), 0);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

/* Pushes n pattern bytes from offset `from`, in pieces of `piece`, half of them owned. */
static void push(struct fx *fx, uint64_t from, size_t n, size_t piece)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < piece ? n - done : piece;
        uint8_t *b = malloc(k + 7);
        assert_non_null(b);
        for (size_t i = 0; i < k; i++) {
            b[7 + i] = pattern(from + done + i);
        }
        int rc;
        if ((done / piece) % 2 == 0) {
            rc = spool_push(fx->s, b, b + 7, k); /* owned, inside the block */
        } else {
            rc = spool_push(fx->s, NULL, b + 7, k); /* copied */
            free(b);
        }
        assert_true(rc == 0 || rc == AGENT_E_TOOBIG);
        done += k;
    }
}

static void on_chunk(void *ud, int status, void *base, const uint8_t *data, size_t n)
{
    struct fx *fx = ud;
    fx->status = status;
    fx->popped = true;
    for (size_t i = 0; i < n; i++) {
        if (data[i] != pattern(fx->out + i)) {
            fx->bad = true;
        }
    }
    fx->out += n;
    bufpool_release(base); /* a pool block or a malloc'd one (common/bufpool.h) */
}

/* Pops everything (running the loop), checking the order. */
static void drain(struct fx *fx)
{
    while (spool_size(fx->s) > 0) {
        fx->popped = false;
        assert_int_equal(spool_pop(fx->s, on_chunk, fx), 0);
        assert_int_equal(spool_pop(fx->s, on_chunk, fx), AGENT_E_INVAL); /* one at a time */
        while (!fx->popped) {
            uv_run(&fx->loop, UV_RUN_ONCE);
        }
        assert_int_equal(fx->status, 0);
        assert_false(fx->bad);
    }
    assert_int_equal(spool_pop(fx->s, on_chunk, fx), AGENT_E_NOTFOUND);
}

/* Entries in the folder (the file must never have a name there for long). */
static int entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

static void test_spool_order_through_the_file(void **state)
{
    struct fx *fx = *state;
    assert_int_equal(spool_new(&fx->loop, fx->dir, 64 << 20, &fx->s), 0);
    /* 10 MiB in pieces of 100 KiB: most of it must go through the file. */
    size_t total = (size_t)10 << 20;
    push(fx, 0, total, 100 * 1024);
    for (int i = 0; i < 200 && spool_spilled(fx->s) < (uint64_t)(total / 2); i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        nap();
    }
    assert_int_equal(spool_size(fx->s), total);
    assert_true(spool_spilled(fx->s) > 0);
    assert_int_equal(entries(fx->dir), 0); /* unnamed */
    drain(fx);
    assert_int_equal(fx->out, total);
    /* Caught up: the file is reused from its start, and order still holds. */
    push(fx, total, (size_t)3 << 20, 64 * 1024);
    drain(fx);
    assert_int_equal(fx->out, total + ((size_t)3 << 20));
    assert_false(spool_limit_hit(fx->s));
    assert_true(spool_peak(fx->s) >= total);
    spool_close(fx->s);
}

/* The largest unlinked file this process holds open under dir (the spool's), or -1. */
static long long spool_file_size(const char *dir)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    long long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        char link[300], target[512];
        snprintf(link, sizeof(link), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        if (n <= 0) {
            continue;
        }
        target[n] = '\0';
        struct stat st;
        if (strncmp(target, dir, strlen(dir)) == 0 && strstr(target, "(deleted)") != NULL &&
            stat(link, &st) == 0 && (long long)st.st_size > best) {
            best = (long long)st.st_size;
        }
    }
    closedir(d);
    return best;
}

/*
 * A consumer that stays behind for a long time: 40 MiB through a 3 MiB spool, the producer
 * pausing when it is full and going on when it has room. Everything comes out in order, and the
 * file never grows past the limit: it is a ring.
 */
static void test_spool_ring(void **state)
{
    struct fx *fx = *state;
    uint64_t limit = (uint64_t)3 << 20;
    assert_int_equal(spool_new(&fx->loop, fx->dir, limit, &fx->s), 0);
    size_t total = (size_t)40 << 20, in = 0, piece = 200 * 1000;
    long long max_file = 0;
    while (fx->out < total) {
        /* Produce while there is room (a paused runtime resumes once there is). */
        while (in < total && !spool_full(fx->s)) {
            size_t k = total - in < piece ? total - in : piece;
            push(fx, in, k, k);
            in += k;
        }
        /* Consume one chunk. */
        fx->popped = false;
        if (spool_pop(fx->s, on_chunk, fx) == 0) {
            while (!fx->popped) {
                uv_run(&fx->loop, UV_RUN_ONCE);
            }
            assert_int_equal(fx->status, 0);
            assert_false(fx->bad);
        }
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        long long sz = spool_file_size(fx->dir);
        max_file = sz > max_file ? sz : max_file;
    }
    assert_int_equal(fx->out, total);
    assert_true(spool_spilled(fx->s) > limit * 2); /* the ring wrapped */
    assert_true(max_file > 0);
    assert_true(max_file <= (long long)limit);
    spool_close(fx->s);
}

static void test_spool_limit_and_room(void **state)
{
    struct fx *fx = *state;
    uint64_t limit = (uint64_t)3 << 20;
    assert_int_equal(spool_new(&fx->loop, fx->dir, limit, &fx->s), 0);
    assert_false(spool_full(fx->s));
    push(fx, 0, (size_t)limit, 256 * 1024);
    assert_true(spool_full(fx->s));
    assert_true(spool_limit_hit(fx->s));
    assert_false(spool_has_room(fx->s));
    /* Pushing when full still keeps the bytes (nothing is lost), and says so. */
    uint8_t *b = malloc(10);
    assert_non_null(b);
    for (int i = 0; i < 10; i++) {
        b[i] = pattern(limit + (uint64_t)i);
    }
    assert_int_equal(spool_push(fx->s, b, b, 10), AGENT_E_TOOBIG);
    drain(fx);
    assert_int_equal(fx->out, limit + 10);
    assert_true(spool_has_room(fx->s));
    assert_false(spool_full(fx->s));
    spool_close(fx->s);
}

static void test_spool_without_a_file(void **state)
{
    struct fx *fx = *state;
    /* A folder that does not exist: the file cannot be made, the window is all there is. */
    assert_int_equal(spool_new(&fx->loop, "/nonexistent/dotmon", 64 << 20, &fx->s), 0);
    push(fx, 0, SPOOL_MEM_WINDOW + 100 * 1024, 50 * 1024);
    for (int i = 0; i < 200 && spool_error(fx->s) == 0; i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        nap();
    }
    assert_int_equal(spool_error(fx->s), UV_ENOENT);
    assert_true(spool_full(fx->s)); /* past the window: the producer must wait */
    drain(fx);
    assert_int_equal(fx->out, SPOOL_MEM_WINDOW + 100 * 1024);
    spool_close(fx->s);

    /* Limit 0: no file at all, the window only. */
    fx->out = 0;
    assert_int_equal(spool_new(&fx->loop, fx->dir, 0, &fx->s), 0);
    push(fx, 0, SPOOL_MEM_WINDOW, 64 * 1024);
    assert_true(spool_full(fx->s));
    uv_run(&fx->loop, UV_RUN_NOWAIT);
    assert_int_equal(spool_spilled(fx->s), 0);
    drain(fx);
    spool_close(fx->s);
}

static void test_spool_close_in_flight(void **state)
{
    struct fx *fx = *state;
    assert_int_equal(spool_new(&fx->loop, fx->dir, 64 << 20, &fx->s), 0);
    push(fx, 0, (size_t)8 << 20, 256 * 1024);
    for (int i = 0; i < 50 && spool_spilled(fx->s) == 0; i++) {
        uv_run(&fx->loop, UV_RUN_NOWAIT);
        nap();
    }
    assert_int_equal(spool_pop(fx->s, on_chunk, fx), 0);
    /* Closed with a pop pending and writes in flight: no callback runs, nothing leaks. */
    fx->popped = false;
    spool_close(fx->s);
    uv_run(&fx->loop, UV_RUN_DEFAULT);
    assert_false(fx->popped);
    assert_int_equal(entries(fx->dir), 0);
    spool_close(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_spool_order_through_the_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_limit_and_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_without_a_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_spool_close_in_flight, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
