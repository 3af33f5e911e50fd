/* SPDX-License-Identifier: MIT */
#include "convert.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "err.h"
#include "ev_gcheap.h"
#include "ev_json.h"
#include "ev_symbols.h"
#include "membudget.h"
#include "outfile.h"

#define CONVERT_CHUNK (64u * 1024u)
#define CONVERT_BATCH (1024u * 1024u) /* output lines are handed over in 1 MB batches */
/* The memory convert may hold without a cgroup limit or DOTMON_MEMORY_LIMIT_MB. */
#define CONVERT_DEFAULT_MB 2048u
/* The heap is looked at every this many chunks (1 MiB of input). */
#define CONVERT_CHECK_EVERY 16u

/*
 * What convert may hold (a hostile file must not grow it 1:1): DOTMON_MEMORY_LIMIT_MB, else the
 * cgroup's memory limit less an eighth, else CONVERT_DEFAULT_MB. It is dotmon's memory budget too
 * (the gcdump graph and the speedscope profile's tables charge it exactly, before they grow); the
 * tables of the other formats are bounded by looking at the heap (mallinfo2) every MiB of input.
 */
static uint64_t budget;
static const char *budget_from = "";

static void budget_init(void)
{
    uint64_t limit = 0;
    uint64_t env_mb = 0;
    int env_rc = membudget_env_mb(&env_mb);
    if (env_rc == AGENT_E_INVAL) {
        fprintf(stderr,
                "dotmon convert: DOTMON_MEMORY_LIMIT_MB is not a number of MiB up to %llu: "
                "ignored\n",
                (unsigned long long)MEMBUDGET_MAX_MB);
    }
    if (env_rc == 0 && env_mb > 0) {
        budget = env_mb << 20;
        budget_from = "DOTMON_MEMORY_LIMIT_MB";
    } else if (membudget_cgroup_limit(&limit) == 0) {
        budget = limit - limit / 8;
        budget_from = "the cgroup's memory limit less an eighth";
    } else {
        budget = (uint64_t)CONVERT_DEFAULT_MB << 20;
        budget_from = "convert's default";
    }
    if (membudget_total() == 0) {
        membudget_set(budget);
    }
}

static bool over_budget(void)
{
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd > budget;
}

static void say_over_budget(const char *in_name, const char *detail)
{
    fprintf(stderr,
            "dotmon convert: %s: converting it needs more than %llu MiB (%s)%s%s; set "
            "DOTMON_MEMORY_LIMIT_MB to allow more\n",
            in_name, (unsigned long long)(budget >> 20), budget_from, detail != NULL ? ": " : "",
            detail != NULL ? detail : "");
}

static int convert_on_line(void *ud, const char *line, size_t len)
{
    FILE *out = ud;
    return fwrite(line, 1, len, out) == len ? 0 : AGENT_E_CLOSED;
}

/*
 * Reads in to its end, handing each chunk to feed(obj, …): 0 at EOF, feed's (negative) error, or
 * 1 after a read error or once the heap is over the budget (said on stderr).
 */
static int feed_all(FILE *in, const char *in_name, int (*feed)(void *, const uint8_t *, size_t),
                    void *obj)
{
    static uint8_t chunk[CONVERT_CHUNK];
    for (unsigned k = 1;; k++) {
        size_t n = fread(chunk, 1, sizeof(chunk), in);
        int rc = n > 0 ? feed(obj, chunk, n) : 0;
        if (rc != 0) {
            return rc;
        }
        if (k % CONVERT_CHECK_EVERY == 0 && over_budget()) {
            say_over_budget(in_name, NULL);
            return 1;
        }
        if (n < sizeof(chunk)) {
            if (ferror(in)) {
                fprintf(stderr, "dotmon convert: reading %s: %s\n", in_name, strerror(errno));
                return 1;
            }
            return 0;
        }
    }
}

static int json_feed(void *obj, const uint8_t *p, size_t n)
{
    return ev_json_feed(obj, p, n);
}

/* Feeds in to the converter until EOF or an error; 0, or the first error. */
static int pump(FILE *in, struct ev_json *j, const char *in_name)
{
    int rc = feed_all(in, in_name, json_feed, j);
    return rc == 1 ? AGENT_E_INVAL : rc;
}

static int gcheap_feed(void *obj, const uint8_t *p, size_t n)
{
    return ev_gcheap_feed(obj, p, n);
}

static int symbols_feed(void *obj, const uint8_t *p, size_t n)
{
    return ev_symbols_feed(obj, p, n);
}

static int file_sink(void *ud, const uint8_t *p, size_t n)
{
    return fwrite(p, 1, n, (FILE *)ud) == n ? 0 : AGENT_E_CLOSED;
}

/* --format gcdump: the whole stream is read before anything is written. */
static int convert_gcdump(FILE *in, const char *in_name, FILE *out)
{
    struct ev_gcheap *g = NULL;
    int rc = ev_gcheap_new(&g, NULL);
    if (rc != 0) {
        fprintf(stderr, "dotmon convert: %s\n", agent_strerror(rc));
        return 1;
    }
    rc = feed_all(in, in_name, gcheap_feed, g);
    if (rc == 1) {
        ev_gcheap_free(g);
        return 1;
    }
    if (rc == 0) {
        rc = ev_gcheap_finish(g);
    }
    if (rc == AGENT_E_BUDGET) {
        say_over_budget(in_name, ev_gcheap_error(g));
        ev_gcheap_free(g);
        return 1;
    }
    if (rc != 0) {
        const char *msg = ev_gcheap_error(g);
        fprintf(stderr, "dotmon convert: %s: %s\n", in_name,
                msg != NULL ? msg : agent_strerror(rc));
        ev_gcheap_free(g);
        return 1;
    }
    rc = ev_gcheap_write(g, "dotmon", file_sink, out);
    ev_gcheap_free(g);
    if (rc != 0) {
        fprintf(stderr, "dotmon convert: writing the output failed\n");
        return 1;
    }
    return 0;
}

/*
 * --format speedscope: samples are kept while the stream is read (their stacks are named by the
 * rundown at its end), then the whole profile is written.
 */
static int convert_speedscope(FILE *in, const char *in_name, FILE *out)
{
    struct ev_symbols *s = NULL;
    struct mb_share share; /* the profile's tables, charged exactly: the whole budget */
    mb_share_init(&share, "speedscope profile", budget);
    int rc = ev_symbols_new(&s);
    if (rc != 0) {
        fprintf(stderr, "dotmon convert: %s\n", agent_strerror(rc));
        return 1;
    }
    (void)ev_symbols_set_share(s, &share);
    if (feed_all(in, in_name, symbols_feed, s) == 1) {
        ev_symbols_free(s);
        return 1;
    }
    rc = ev_symbols_finish(s); /* a feed error is the verdict too */
    if (rc == AGENT_E_BUDGET) {
        say_over_budget(in_name, ev_symbols_error(s));
        ev_symbols_free(s);
        return 1;
    }
    if (rc != 0) {
        const char *msg = ev_symbols_error(s);
        fprintf(stderr, "dotmon convert: %s: %s\n", in_name,
                msg != NULL ? msg : agent_strerror(rc));
        ev_symbols_free(s);
        return 1;
    }
    struct ev_symbols_stats st;
    ev_symbols_get_stats(s, &st);
    if (st.samples == 0) {
        fprintf(stderr,
                "dotmon convert: %s: no CPU sample with a stack (was the trace taken with "
                "profile=cpu-sampling?)\n",
                in_name);
    } else if (st.methods == 0) {
        fprintf(stderr,
                "dotmon convert: %s: no method names (the trace has no rundown): frames "
                "are " EV_SYMBOLS_UNKNOWN "\n",
                in_name);
    }
    rc = ev_symbols_write_speedscope(s, in_name, file_sink, out);
    ev_symbols_free(s);
    if (rc == AGENT_E_BUDGET) {
        say_over_budget(in_name, "naming the frames");
        return 1;
    }
    if (rc != 0) {
        fprintf(stderr, "dotmon convert: writing the output failed\n");
        return 1;
    }
    return 0;
}

/*
 * -o OUT: a regular file (or a new one) is written under a temporary name beside it and renamed
 * over OUT only when the conversion succeeds (a whole document or nothing); anything else at OUT
 * (a FIFO, /dev/null, a terminal) is written directly.
 */
static FILE *open_output(const char *path, struct outfile *of)
{
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        return fopen(path, "wb");
    }
    int rc = outfile_open(path, 0600, of);
    if (rc != 0) {
        errno = -rc;
        return NULL;
    }
    FILE *f = fdopen(of->fd, "wb");
    if (f == NULL) {
        int e = errno;
        outfile_abort(of);
        errno = e;
        return NULL;
    }
    of->fd = -1; /* the FILE owns it */
    return f;
}

int convert_run(const struct cli_options *opts)
{
    bool in_std = strcmp(opts->convert_input, "-") == 0;
    bool out_std = opts->convert_output == NULL || strcmp(opts->convert_output, "-") == 0;
    FILE *in = in_std ? stdin : fopen(opts->convert_input, "rb");
    FILE *out = NULL;
    struct outfile of = {.dirfd = -1, .fd = -1};
    struct ev_json *j = NULL;
    int code = 1;
    budget_init();
    if (in == NULL) {
        fprintf(stderr, "dotmon convert: %s: %s\n", opts->convert_input, strerror(errno));
        goto cleanup;
    }
    out = out_std ? stdout : open_output(opts->convert_output, &of);
    if (out == NULL) {
        fprintf(stderr, "dotmon convert: %s: %s\n", opts->convert_output, strerror(errno));
        goto cleanup;
    }
    if (opts->convert_gcdump || opts->convert_speedscope) {
        code = opts->convert_gcdump ? convert_gcdump(in, opts->convert_input, out)
                                    : convert_speedscope(in, opts->convert_input, out);
        if (code == 0 && fflush(out) != 0) {
            fprintf(stderr, "dotmon convert: writing the output failed\n");
            code = 1;
        }
        goto cleanup;
    }
    (void)setvbuf(out, NULL, _IONBF, 0); /* the batches are written as they are */
    j = ev_json_new(convert_on_line, out);
    if (j == NULL) {
        fprintf(stderr, "dotmon convert: out of memory\n");
        goto cleanup;
    }
    ev_json_set_batch(j, CONVERT_BATCH);
    int rc = pump(in, j, opts->convert_input);
    int frc = ev_json_flush(j);
    rc = rc != 0 ? rc : frc;
    enum nettrace_verdict v = ev_json_finish(j);
    uint64_t off = 0;
    const char *msg = nettrace_error(ev_json_checker(j), &off);
    if (rc == AGENT_E_CLOSED || fflush(out) != 0) {
        fprintf(stderr, "dotmon convert: writing the output failed\n");
    } else if (v == NETTRACE_COMPLETE && rc == 0) {
        code = 0;
    } else if (v == NETTRACE_INVALID && msg != NULL) {
        fprintf(stderr, "dotmon convert: %s: INVALID at offset %llu: %s (%llu events written)\n",
                opts->convert_input, (unsigned long long)off, msg,
                (unsigned long long)ev_json_lines(j));
    } else if (rc != 0 && rc != AGENT_E_INVAL) {
        fprintf(stderr, "dotmon convert: %s: %s\n", opts->convert_input, agent_strerror(rc));
    } else if (rc == 0) {
        fprintf(stderr, "dotmon convert: %s: %s: the stream ends early (%llu events written)\n",
                opts->convert_input, nettrace_verdict_name(v),
                (unsigned long long)ev_json_lines(j));
    }
cleanup:
    ev_json_free(j);
    if (out != NULL && !out_std && fclose(out) != 0 && code == 0) {
        fprintf(stderr, "dotmon convert: %s: %s\n", opts->convert_output, strerror(errno));
        code = 1;
    }
    if (of.dirfd >= 0) {
        int crc = code == 0 ? outfile_commit(&of, NULL, NULL) : 0;
        if (crc != 0) {
            fprintf(stderr, "dotmon convert: %s: %s\n", opts->convert_output, strerror(-crc));
            code = 1;
        }
        outfile_abort(&of); /* a failed conversion: the temporary file goes, OUT stays as it was */
    }
    if (in != NULL && !in_std) {
        fclose(in);
    }
    return code;
}
