/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"

/*
 * Golden vectors come from docs/ipc.md §3.5; replies are built here byte by byte (not with the
 * writer under test). Every input handed to a decoder is first copied into a heap block of
 * exactly its length, so AddressSanitizer reports any read past the end.
 */

static const uint8_t magic[14] = {0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f,
                                  0x49, 0x50, 0x43, 0x5f, 0x56, 0x31, 0x00};

/* The cookie whose .NET string form is 3f2504e0-4f89-11d3-9a0c-0305e82c3301. */
static const uint8_t cookie[16] = {0xe0, 0x04, 0x25, 0x3f, 0x89, 0x4f, 0xd3, 0x11,
                                   0x9a, 0x0c, 0x03, 0x05, 0xe8, 0x2c, 0x33, 0x01};

static uint8_t *dup_exact(const uint8_t *p, size_t n)
{
    uint8_t *q = malloc(n > 0 ? n : 1);
    assert_non_null(q);
    if (n > 0) {
        memcpy(q, p, n);
    }
    return q;
}

/* ---- a tiny independent byte builder for fixtures ---------------------------------------- */

struct bb {
    uint8_t p[4096];
    size_t n;
};

static void bb_le(struct bb *b, uint64_t v, size_t bytes)
{
    assert_true(b->n + bytes <= sizeof(b->p));
    for (size_t i = 0; i < bytes; i++) {
        b->p[b->n++] = (uint8_t)(v >> (8 * i));
    }
}

static void bb_raw(struct bb *b, const void *p, size_t n)
{
    assert_true(b->n + n <= sizeof(b->p));
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* ASCII-only wire string; NULL = absent. */
static void bb_str(struct bb *b, const char *s)
{
    if (s == NULL) {
        bb_le(b, 0, 4);
        return;
    }
    size_t n = strlen(s);
    bb_le(b, n + 1, 4);
    for (size_t i = 0; i <= n; i++) {
        bb_le(b, (uint8_t)s[i], 2);
    }
}

static void bb_header(struct bb *b, uint8_t set, uint8_t id)
{
    bb_raw(b, magic, sizeof(magic));
    bb_le(b, 0, 2); /* patched by bb_seal */
    bb_le(b, set, 1);
    bb_le(b, id, 1);
    bb_le(b, 0, 2);
}

static void bb_seal(struct bb *b)
{
    b->p[14] = (uint8_t)b->n;
    b->p[15] = (uint8_t)(b->n >> 8);
}

static void build_info_reply(struct bb *b, int level)
{
    memset(b, 0, sizeof(*b));
    bb_header(b, 0xFF, 0x00);
    if (level == 3) {
        bb_le(b, 1, 4);
    }
    bb_le(b, 4242, 8);
    bb_raw(b, cookie, 16); /* second, after the pid (deviations.md §1.3) */
    bb_str(b, "/x/y/TestApp arg1 arg2");
    bb_str(b, "Linux");
    bb_str(b, "x64");
    if (level >= 2) {
        bb_str(b, "TestApp");
        bb_str(b, "10.0.12");
    }
    if (level == 3) {
        bb_str(b, "linux-x64");
    }
    bb_seal(b);
}

static char *to_utf8(const struct ipc_utf16 *s)
{
    static char out[8][512];
    static int slot;
    char *o = out[slot++ % 8];
    assert_int_equal(ipc_utf16_to_utf8(s, o, 512, NULL), 0);
    return o;
}

/* ---- golden requests --------------------------------------------------------------------- */

static void test_codec_process_requests_golden(void **state)
{
    (void)state;
    static const uint8_t pi[20] = {0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f, 0x49, 0x50, 0x43,
                                   0x5f, 0x56, 0x31, 0x00, 0x14, 0x00, 0x04, 0x00, 0x00, 0x00};
    uint8_t out[64];
    struct ipc_wr w;
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_process_info(&w), 0);
    assert_int_equal(w.len, 20);
    assert_memory_equal(out, pi, 20);

    struct {
        int (*build)(struct ipc_wr *);
        uint8_t id;
    } cases[] = {{ipc_cmd_process_info2, 0x04},
                 {ipc_cmd_process_info3, 0x08},
                 {ipc_cmd_process_env, 0x02},
                 {ipc_cmd_resume_runtime, 0x01}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ipc_wr_init(&w, out, sizeof(out));
        assert_int_equal(cases[i].build(&w), 0);
        assert_int_equal(w.len, 20);
        uint8_t expect[20];
        memcpy(expect, pi, 20);
        expect[17] = cases[i].id;
        assert_memory_equal(out, expect, 20);
    }
}

static void test_codec_stop_tracing_golden(void **state)
{
    (void)state;
    static const uint8_t golden[28] = {0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f, 0x49, 0x50, 0x43,
                                       0x5f, 0x56, 0x31, 0x00, 0x1c, 0x00, 0x02, 0x01, 0x00, 0x00,
                                       0x78, 0x56, 0x34, 0x12, 0x3a, 0x7f, 0x00, 0x00};
    uint8_t out[28];
    struct ipc_wr w;
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_stop_tracing(&w, 0x00007f3a12345678ull), 0);
    assert_int_equal(w.len, 28);
    assert_memory_equal(out, golden, 28);
    /* One byte short: nothing is written. */
    ipc_wr_init(&w, out, 27);
    assert_int_equal(ipc_cmd_stop_tracing(&w, 1), AGENT_E_NOSPACE);
    assert_int_equal(w.len, 0);
}

/* ipc.md §4.3: SetEnvironmentVariable "A"="bé": header (set 0x04, id 0x03), two wire strings. */
static void test_codec_set_env_golden(void **state)
{
    (void)state;
    static const uint8_t golden[38] = {
        0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f, 0x49, 0x50, 0x43,
        0x5f, 0x56, 0x31, 0x00, 0x26, 0x00, 0x04, 0x03, 0x00, 0x00, /* header, size 38 */
        0x02, 0x00, 0x00, 0x00, 0x41, 0x00, 0x00, 0x00,             /* "A": 2 units */
        0x03, 0x00, 0x00, 0x00, 0x62, 0x00, 0xe9, 0x00, 0x00, 0x00  /* "bé": 3 units */
    };
    uint8_t out[64];
    struct ipc_wr w;
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_set_env(&w, "A", "b\xc3\xa9"), 0);
    assert_int_equal(w.len, 38);
    assert_memory_equal(out, golden, 38);

    /* An empty value is a one-unit string (the NUL), as the official client sends it. */
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_set_env(&w, "A", ""), 0);
    assert_int_equal(w.len, 20 + 8 + 6);
    static const uint8_t empty[6] = {0x01, 0x00, 0x00, 0x00, 0x00, 0x00};
    assert_memory_equal(out + 28, empty, 6);

    /* Refused: no name, no value, malformed UTF-8; too small a buffer. Nothing is written. */
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_set_env(&w, "", "v"), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_set_env(&w, NULL, "v"), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_set_env(&w, "A", NULL), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_set_env(&w, "A", "\xc3"), AGENT_E_INVAL);
    assert_int_equal(w.len, 0);
    ipc_wr_init(&w, out, 37);
    assert_int_equal(ipc_cmd_set_env(&w, "A", "b\xc3\xa9"), AGENT_E_NOSPACE);
    assert_int_equal(w.len, 0);
}

/* ipc.md §4.4: GenerateCoreDump3 of "/t/d" (Full, no flags): header, string, type, flags (42 B). */
static void test_codec_generate_dump_golden(void **state)
{
    (void)state;
    static const uint8_t golden[42] = {0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f, 0x49,
                                       0x50, 0x43, 0x5f, 0x56, 0x31, 0x00, 0x2a, 0x00,
                                       0x01, 0x03, 0x00, 0x00, /* size 42, Dump/3 */
                                       0x05, 0x00, 0x00, 0x00, '/',  0,    't',  0,
                                       '/',  0,    'd',  0,    0,    0, /* 5 units incl. NUL */
                                       0x04, 0x00, 0x00, 0x00,          /* Full */
                                       0x00, 0x00, 0x00, 0x00};         /* flags */
    uint8_t out[64];
    struct ipc_wr w;
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_generate_dump(&w, 3, "/t/d", IPC_DUMP_FULL, 0), 0);
    assert_int_equal(w.len, 42);
    assert_memory_equal(out, golden, 42);
    /* v1 and v2 differ only in the command id; v1 keeps only the diagnostics bit. */
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_generate_dump(&w, 1, "/t/d", IPC_DUMP_FULL, 0x7), 0);
    assert_int_equal(out[17], 0x01);
    assert_int_equal(out[38], 0x01);
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_generate_dump(&w, 2, "/t/d", IPC_DUMP_TRIAGE, 0x5), 0);
    assert_int_equal(out[17], 0x02);
    assert_int_equal(out[34], 0x03);
    assert_int_equal(out[38], 0x05);
    /* Refused: unknown version or type, empty path, no room (nothing written). */
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_generate_dump(&w, 4, "/t/d", IPC_DUMP_FULL, 0), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_generate_dump(&w, 3, "/t/d", 5, 0), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_generate_dump(&w, 3, "/t/d", 0, 0), AGENT_E_INVAL);
    assert_int_equal(ipc_cmd_generate_dump(&w, 3, "", IPC_DUMP_FULL, 0), AGENT_E_INVAL);
    ipc_wr_init(&w, out, 41);
    assert_int_equal(ipc_cmd_generate_dump(&w, 3, "/t/d", IPC_DUMP_FULL, 0), AGENT_E_NOSPACE);
    assert_int_equal(w.len, 0);
}

/* ipc.md §3.5: CollectTracing2, 256 MB, format 1, no rundown, DotNETRuntime 0x1:4 (117 bytes). */
static size_t golden_collect2(uint8_t *g)
{
    /* Laid out like the table in ipc.md §3.5: one line per row of the dump. */
    /* clang-format off */
    static const uint8_t head[] = {
        0x44, 0x4f, 0x54, 0x4e, 0x45, 0x54, 0x5f, 0x49, 0x50, 0x43, 0x5f, 0x56, 0x31, 0x00, 0x75, 0x00,
        0x02, 0x03, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
        0x01, 0x00, 0x00, 0x00,                                                 /* 0x1d providers */
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, /* 0x21 kw, level */
        0x20, 0x00, 0x00, 0x00};                                                /* 0x2d name count */
    /* clang-format on */
    static const char name[] = "Microsoft-Windows-DotNETRuntime";
    size_t n = 0;
    memcpy(g, head, sizeof(head));
    n += sizeof(head);
    for (size_t i = 0; i < sizeof(name); i++) { /* includes the NUL */
        g[n++] = (uint8_t)name[i];
        g[n++] = 0;
    }
    memset(g + n, 0, 4); /* arguments: absent (0x71) */
    n += 4;
    return n;
}

static const struct ipc_provider runtime_provider = {
    .name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x1, .level = 4, .arguments = NULL};

static void test_codec_collect_tracing2_golden(void **state)
{
    (void)state;
    uint8_t golden[128];
    size_t glen = golden_collect2(golden);
    assert_int_equal(glen, 117);

    struct ipc_collect_config cfg = {.buffer_mb = 256,
                                     .format = 1,
                                     .rundown_keyword = 0,
                                     .providers = &runtime_provider,
                                     .provider_count = 1};
    assert_int_equal(ipc_collect_min_version(&cfg), 2);
    uint8_t out[256];
    struct ipc_wr w;
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &cfg), 0);
    assert_int_equal(w.len, 117);
    assert_memory_equal(out, golden, 117);

    /* Every capacity below 117 fails cleanly and leaves the writer where it was. */
    for (size_t cap = 0; cap < 117; cap++) {
        ipc_wr_init(&w, out, cap);
        assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &cfg), AGENT_E_NOSPACE);
        assert_int_equal(w.len, 0);
    }
    /* A builder appends after what the writer already holds, with its own header. */
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_wr_u8(&w, 0xAA), 0);
    assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &cfg), 0);
    assert_int_equal(w.len, 118);
    assert_memory_equal(out + 1, golden, 117);
}

/* Reads a provider as the runtime would, checking the per-version field order. */
static void check_provider(struct ipc_rd *rd, int version, const struct ipc_provider *p)
{
    uint64_t kw;
    uint32_t level;
    struct ipc_utf16 name;
    struct ipc_utf16 args;
    assert_int_equal(ipc_rd_u64(rd, &kw), 0);
    assert_int_equal(ipc_rd_u32(rd, &level), 0);
    assert_int_equal(ipc_rd_string(rd, &name), 0);
    assert_int_equal(ipc_rd_string(rd, &args), 0);
    assert_int_equal(kw, p->keywords);
    assert_int_equal(level, p->level);
    assert_string_equal(to_utf8(&name), p->name);
    if (p->arguments == NULL) {
        assert_false(args.present);
    } else {
        assert_string_equal(to_utf8(&args), p->arguments);
    }
    if (version >= 5) {
        uint8_t enable;
        uint32_t count;
        assert_int_equal(ipc_rd_u8(rd, &enable), 0);
        assert_int_equal(ipc_rd_u32(rd, &count), 0);
        assert_int_equal(enable, p->filter_enable ? 1 : 0);
        assert_int_equal(count, p->event_id_count);
        for (uint32_t i = 0; i < count; i++) {
            uint32_t id;
            assert_int_equal(ipc_rd_u32(rd, &id), 0);
            assert_int_equal(id, p->event_ids[i]);
        }
    }
}

static void test_codec_collect_tracing_versions(void **state)
{
    (void)state;
    static const uint32_t ids[] = {80, 81};
    const struct ipc_provider providers[2] = {
        {.name = "Microsoft-Windows-DotNETRuntime", .keywords = 0x14C14FCCBDull, .level = 5},
        {.name = "System.Runtime",
         .keywords = 0,
         .level = 4,
         .arguments = "EventCounterIntervalSec=1",
         .filter_enable = true,
         .event_ids = ids,
         .event_id_count = 2},
    };
    struct ipc_collect_config cfg = {.buffer_mb = 64,
                                     .format = 1,
                                     .rundown_keyword = 0x1,
                                     .disable_stackwalk = true,
                                     .providers = providers,
                                     .provider_count = 2};
    assert_int_equal(ipc_collect_min_version(&cfg), 5);

    for (int version = 1; version <= 5; version++) {
        /* Pick a config that this version can carry. */
        struct ipc_collect_config c = cfg;
        size_t nprov = version == 5 ? 2 : 1;
        c.provider_count = nprov;
        c.rundown_keyword = version == 1   ? IPC_RUNDOWN_DEFAULT
                            : version >= 4 ? 0x1
                                           : IPC_RUNDOWN_DEFAULT;
        c.disable_stackwalk = version >= 3;

        uint8_t out[1024];
        struct ipc_wr w;
        ipc_wr_init(&w, out, sizeof(out));
        assert_int_equal(ipc_cmd_collect_tracing(&w, version, &c), 0);
        size_t size = 0;
        assert_int_equal(ipc_collect_encoded_size(version, &c, &size), 0);
        assert_int_equal(size, w.len);

        uint8_t *copy = dup_exact(out, w.len);
        struct ipc_frame f;
        size_t consumed;
        assert_int_equal(ipc_decode(copy, w.len, IPC_MESSAGE_MAX, &f, &consumed), IPC_FRAME);
        assert_int_equal(consumed, w.len);
        assert_int_equal(f.hdr.command_set, 0x02);
        assert_int_equal(f.hdr.command_id, 0x02 + version - 1);

        struct ipc_rd rd;
        ipc_rd_init(&rd, f.payload, f.payload_len);
        uint32_t u32;
        uint64_t u64;
        uint8_t u8;
        if (version == 5) {
            assert_int_equal(ipc_rd_u32(&rd, &u32), 0);
            assert_int_equal(u32, 0); /* session type: streaming */
        }
        assert_int_equal(ipc_rd_u32(&rd, &u32), 0);
        assert_int_equal(u32, 64);
        assert_int_equal(ipc_rd_u32(&rd, &u32), 0);
        assert_int_equal(u32, 1);
        if (version == 2 || version == 3) {
            assert_int_equal(ipc_rd_u8(&rd, &u8), 0);
            assert_int_equal(u8, 1);
        }
        if (version >= 4) {
            assert_int_equal(ipc_rd_u64(&rd, &u64), 0);
            assert_int_equal(u64, 0x1);
        }
        if (version >= 3) {
            assert_int_equal(ipc_rd_u8(&rd, &u8), 0);
            assert_int_equal(u8, 0); /* requestStackwalk = false */
        }
        assert_int_equal(ipc_rd_u32(&rd, &u32), 0);
        assert_int_equal(u32, nprov);
        for (size_t i = 0; i < nprov; i++) {
            check_provider(&rd, version, &providers[i]);
        }
        assert_int_equal(ipc_rd_left(&rd), 0);
        free(copy);
    }
}

static void test_codec_collect_tracing_rejects(void **state)
{
    (void)state;
    uint8_t out[512];
    struct ipc_wr w;
    struct ipc_provider p = runtime_provider;
    struct ipc_collect_config ok = {
        .buffer_mb = 1, .format = 1, .providers = &p, .provider_count = 1};
    struct ipc_collect_config c;

#define EXPECT_INVAL(version)                                                                      \
    do {                                                                                           \
        ipc_wr_init(&w, out, sizeof(out));                                                         \
        assert_int_equal(ipc_cmd_collect_tracing(&w, (version), &c), AGENT_E_INVAL);               \
        assert_int_equal(w.len, 0);                                                                \
    } while (0)

    c = ok;
    c.buffer_mb = 0;
    EXPECT_INVAL(2);
    c = ok;
    c.format = 2; /* V6 is never accepted over IPC (deviations.md §2.5) */
    EXPECT_INVAL(2);
    c = ok;
    c.provider_count = 0;
    EXPECT_INVAL(2);
    c = ok;
    c.provider_count = 1001;
    EXPECT_INVAL(2);
    c = ok;
    EXPECT_INVAL(0);
    EXPECT_INVAL(6);
#undef EXPECT_INVAL
}

/* Configurations that the chosen version cannot express, and bad providers. */
static void test_codec_collect_tracing_version_limits(void **state)
{
    (void)state;
    uint8_t out[512];
    struct ipc_wr w;
    struct ipc_provider p = runtime_provider;
    struct ipc_collect_config ok = {
        .buffer_mb = 1, .format = 1, .providers = &p, .provider_count = 1};
    struct ipc_collect_config c;

#define EXPECT_INVAL(version)                                                                      \
    do {                                                                                           \
        ipc_wr_init(&w, out, sizeof(out));                                                         \
        assert_int_equal(ipc_cmd_collect_tracing(&w, (version), &c), AGENT_E_INVAL);               \
        assert_int_equal(w.len, 0);                                                                \
    } while (0)

    /* version 1 always has the default rundown */
    c = ok;
    EXPECT_INVAL(1);
    /* what older versions cannot express */
    c = ok;
    c.rundown_keyword = 0x1;
    assert_int_equal(ipc_collect_min_version(&c), 4);
    EXPECT_INVAL(3);
    c = ok;
    c.disable_stackwalk = true;
    assert_int_equal(ipc_collect_min_version(&c), 3);
    EXPECT_INVAL(2);
    c = ok;
    c.rundown_keyword = IPC_RUNDOWN_DEFAULT;
    assert_int_equal(ipc_collect_min_version(&c), 2);
    p.filter_enable = true;
    EXPECT_INVAL(4);
    p = runtime_provider;
    p.level = 6;
    c = ok;
    EXPECT_INVAL(5);
    p = runtime_provider;
    p.name = "";
    EXPECT_INVAL(5);
    p = runtime_provider;
    p.arguments = "bad\xC0\x80utf8";
    ipc_wr_init(&w, out, sizeof(out));
    assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &c), AGENT_E_INVAL);
    assert_int_equal(w.len, 0);
#undef EXPECT_INVAL
}

static void test_codec_collect_tracing_too_big(void **state)
{
    (void)state;
    /* 40 providers with 1000-character arguments: about 80 KB, over the 64 KiB message cap. */
    static char args[1001];
    memset(args, 'a', 1000);
    struct ipc_provider ps[40];
    for (size_t i = 0; i < 40; i++) {
        ps[i] = runtime_provider;
        ps[i].arguments = args;
    }
    struct ipc_collect_config c = {
        .buffer_mb = 1, .format = 1, .providers = ps, .provider_count = 40};
    size_t cap = 200000;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    struct ipc_wr w;
    ipc_wr_init(&w, out, cap);
    assert_int_equal(ipc_cmd_collect_tracing(&w, 2, &c), AGENT_E_TOOBIG);
    assert_int_equal(w.len, 0);
    free(out);
}

/* ipc_collect_encoded_size is the byte count the builder writes, also past the 64 KiB cap. */
static void test_codec_collect_encoded_size(void **state)
{
    (void)state;
    static char args[1001];
    memset(args, 'a', 1000);
    static const uint32_t ids[] = {1, 2, 3};
    struct ipc_provider ps[40];
    for (size_t i = 0; i < 40; i++) {
        ps[i] = runtime_provider;
        ps[i].arguments = i % 3 == 0 ? NULL : i % 3 == 1 ? "" : "k=\xc3\xa9;x=\xf0\x9f\x98\x80";
    }
    ps[7].event_ids = ids;
    ps[7].event_id_count = 3;
    struct ipc_collect_config c = {.buffer_mb = 1,
                                   .format = 1,
                                   .rundown_keyword = IPC_RUNDOWN_DEFAULT,
                                   .providers = ps,
                                   .provider_count = 40};
    size_t cap = 200000;
    uint8_t *out = malloc(cap);
    assert_non_null(out);
    for (size_t count = 1; count <= 40; count += 13) {
        c.provider_count = count;
        for (int version = 1; version <= 5; version++) {
            struct ipc_wr w;
            ipc_wr_init(&w, out, cap);
            int rc = ipc_cmd_collect_tracing(&w, version, &c);
            size_t size = 0;
            assert_int_equal(ipc_collect_encoded_size(version, &c, &size), rc);
            if (rc == 0) {
                assert_int_equal(size, w.len);
                assert_int_equal(out[14] | out[15] << 8, size);
            }
        }
    }
    /* Over the cap: the builder refuses, the size is still told. */
    for (size_t i = 0; i < 40; i++) {
        ps[i].arguments = args;
    }
    c.provider_count = 40;
    size_t size = 0;
    assert_int_equal(ipc_collect_encoded_size(5, &c, &size), 0);
    assert_true(size > IPC_MESSAGE_MAX);
    c.provider_count = 1;
    size_t one = 0;
    assert_int_equal(ipc_collect_encoded_size(5, &c, &one), 0);
    /* header + session type + buffer + format + rundown + stackwalk + count = 45; each provider
     * adds the same bytes, plus 4 per event id of provider 7. */
    assert_int_equal(size - 45, 40 * (one - 45) + 3 * 4);
    /* A config the builder rejects is rejected here too, and *size is left alone. */
    c.providers = NULL;
    size = 7;
    assert_int_equal(ipc_collect_encoded_size(5, &c, &size), AGENT_E_INVAL);
    assert_int_equal(size, 7);
    free(out);
}

/* ---- incremental decoding ---------------------------------------------------------------- */

/*
 * Feeds msg whole, as every prefix (byte by byte), and as two exact-size chunks split at every
 * offset that are appended to one stream buffer, followed by `tail`. Checks FRAME only once the
 * whole message is there, and that bytes after it (a continuation) are left alone.
 */
static void feed_all_ways(const uint8_t *msg, size_t len, const uint8_t *tail, size_t tail_len)
{
    size_t total = len + tail_len;
    uint8_t *stream = malloc(total);
    assert_non_null(stream);
    memcpy(stream, msg, len);
    if (tail_len > 0) {
        memcpy(stream + len, tail, tail_len);
    }
    for (size_t k = 0; k <= total; k++) {
        uint8_t *prefix = dup_exact(stream, k);
        struct ipc_frame f;
        size_t consumed = 999999;
        int rc = ipc_decode(prefix, k, IPC_MESSAGE_MAX, &f, &consumed);
        if (k < len) {
            assert_int_equal(rc, IPC_NEED_MORE);
            assert_int_equal(consumed, 999999); /* untouched */
        } else {
            assert_int_equal(rc, IPC_FRAME);
            assert_int_equal(consumed, len);
            assert_int_equal(f.hdr.size, len);
            assert_ptr_equal(f.payload, prefix + IPC_HEADER_SIZE);
            assert_int_equal(f.payload_len, len - IPC_HEADER_SIZE);
        }
        free(prefix);
    }
    /* split at every offset: first chunk, then first + second chunk in one growing buffer */
    for (size_t s = 0; s <= len; s++) {
        uint8_t *a = dup_exact(msg, s);
        struct ipc_frame f;
        size_t consumed;
        assert_int_equal(ipc_decode(a, s, IPC_MESSAGE_MAX, &f, &consumed),
                         s < len ? IPC_NEED_MORE : IPC_FRAME);
        uint8_t *ab = malloc(len);
        assert_non_null(ab);
        memcpy(ab, a, s);
        memcpy(ab + s, msg + s, len - s);
        assert_int_equal(ipc_decode(ab, len, IPC_MESSAGE_MAX, &f, &consumed), IPC_FRAME);
        assert_memory_equal(f.payload, msg + IPC_HEADER_SIZE, len - IPC_HEADER_SIZE);
        free(a);
        free(ab);
    }
    free(stream);
}

static void check_info(const struct ipc_process_info *pi, int level)
{
    assert_int_equal(pi->pid, 4242);
    assert_memory_equal(pi->cookie, cookie, 16);
    assert_string_equal(to_utf8(&pi->command_line), "/x/y/TestApp arg1 arg2");
    assert_string_equal(to_utf8(&pi->os), "Linux");
    assert_string_equal(to_utf8(&pi->arch), "x64");
    if (level >= 2) {
        assert_string_equal(to_utf8(&pi->entrypoint_assembly), "TestApp");
        assert_string_equal(to_utf8(&pi->clr_version), "10.0.12");
    } else {
        assert_false(pi->entrypoint_assembly.present);
        assert_false(pi->clr_version.present);
    }
    if (level == 3) {
        assert_int_equal(pi->version, 1);
        assert_string_equal(to_utf8(&pi->runtime_identifier), "linux-x64");
    } else {
        assert_false(pi->runtime_identifier.present);
    }
    char uid[IPC_GUID_STR_SIZE];
    ipc_guid_format(pi->cookie, uid);
    assert_string_equal(uid, "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
}

static void test_codec_process_info_replies(void **state)
{
    (void)state;
    for (int level = 1; level <= 3; level++) {
        struct bb b;
        build_info_reply(&b, level);
        feed_all_ways(b.p, b.n, NULL, 0);

        struct ipc_frame f;
        size_t consumed;
        assert_int_equal(ipc_decode(b.p, b.n, IPC_MESSAGE_MAX, &f, &consumed), IPC_FRAME);
        struct ipc_reply r;
        assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_PAYLOAD, &r), 0);
        assert_true(r.ok);
        assert_int_equal(r.payload_len, f.payload_len);

        uint8_t *payload = dup_exact(f.payload, f.payload_len);
        struct ipc_process_info pi;
        assert_int_equal(ipc_process_info_parse(payload, f.payload_len, level, &pi), 0);
        check_info(&pi, level);

        /* Every truncation fails, without reading past the end and without touching *out. */
        for (size_t k = 0; k < f.payload_len; k++) {
            uint8_t *cut = dup_exact(payload, k);
            struct ipc_process_info untouched;
            memset(&untouched, 0x5A, sizeof(untouched));
            int rc = ipc_process_info_parse(cut, k, level, &untouched);
            assert_true(rc == AGENT_E_TRUNC || rc == AGENT_E_PROTO);
            assert_int_equal(untouched.pid, 0x5A5A5A5A5A5A5A5Aull);
            free(cut);
        }
        /* Parsing with the wrong level fails too (the fields do not line up). */
        if (level != 3) {
            assert_int_not_equal(ipc_process_info_parse(payload, f.payload_len, 3, &pi), 0);
        }
        free(payload);
    }
}

static void test_codec_process_info_trailing(void **state)
{
    (void)state;
    for (int level = 1; level <= 3; level++) {
        struct bb b;
        build_info_reply(&b, level);
        bb_le(&b, 0xDEADBEEF, 4); /* a field from a future version */
        size_t n = b.n - IPC_HEADER_SIZE;
        uint8_t *payload = dup_exact(b.p + IPC_HEADER_SIZE, n);
        struct ipc_process_info pi;
        int rc = ipc_process_info_parse(payload, n, level, &pi);
        /* Only the versioned ProcessInfo3 may grow. */
        assert_int_equal(rc, level == 3 ? 0 : AGENT_E_PROTO);
        if (level == 3) {
            check_info(&pi, 3);
        }
        free(payload);
    }
    /* ProcessInfo3 version 0 has no runtime identifier. */
    struct bb b;
    memset(&b, 0, sizeof(b));
    bb_le(&b, 0, 4);
    bb_le(&b, 7, 8);
    bb_raw(&b, cookie, 16);
    bb_str(&b, NULL);
    bb_str(&b, "Linux");
    bb_str(&b, "arm64");
    bb_str(&b, "A");
    bb_str(&b, "8.0.0");
    struct ipc_process_info pi;
    assert_int_equal(ipc_process_info_parse(b.p, b.n, 3, &pi), 0);
    assert_int_equal(pi.version, 0);
    assert_false(pi.command_line.present);
    assert_false(pi.runtime_identifier.present);
    assert_int_equal(ipc_process_info_parse(b.p, b.n, 4, &pi), AGENT_E_INVAL);
}

struct env_seen {
    int calls;
    char names[8][64];
    char values[8][64];
    int stop_at;
};

static int env_collect(void *ud, const char *name, size_t name_len, const char *value,
                       size_t value_len)
{
    struct env_seen *e = ud;
    assert_int_equal(strlen(name), name_len);
    assert_int_equal(strlen(value), value_len);
    assert_true(e->calls < 8);
    memcpy(e->names[e->calls], name, name_len + 1);
    memcpy(e->values[e->calls], value, value_len + 1);
    e->calls++;
    return e->calls == e->stop_at ? -1234 : 0;
}

/* ProcessEnvironment: 26-byte reply, then the continuation on the same stream. */
static void build_env(struct bb *msg, struct bb *cont)
{
    memset(cont, 0, sizeof(*cont));
    bb_le(cont, 4, 4);
    bb_str(cont, "PATH=/usr/bin:/bin");
    bb_str(cont, "EMPTY=");
    bb_str(cont, "NOEQUALS");
    /* "GRÜSSE=€😀": non-ASCII value, written as raw UTF-16 */
    static const uint16_t units[] = {'G', 'R',    0x00DC, 'S',    'S', 'E',
                                     '=', 0x20AC, 0xD83D, 0xDE00, 0};
    bb_le(cont, sizeof(units) / 2, 4);
    for (size_t i = 0; i < sizeof(units) / 2; i++) {
        bb_le(cont, units[i], 2);
    }
    memset(msg, 0, sizeof(*msg));
    bb_header(msg, 0xFF, 0x00);
    bb_le(msg, cont->n, 4);
    bb_le(msg, 0, 2);
    bb_seal(msg);
}

static void test_codec_env_reply_and_continuation(void **state)
{
    (void)state;
    struct bb msg;
    struct bb cont;
    build_env(&msg, &cont);
    assert_int_equal(msg.n, 26);
    feed_all_ways(msg.p, msg.n, cont.p, cont.n);

    struct ipc_frame f;
    size_t consumed;
    assert_int_equal(ipc_decode(msg.p, msg.n, IPC_MESSAGE_MAX, &f, &consumed), IPC_FRAME);
    uint32_t incoming = 0;
    assert_int_equal(ipc_env_reply_parse(f.payload, f.payload_len, &incoming), 0);
    assert_int_equal(incoming, cont.n);
    assert_int_equal(ipc_env_reply_parse(f.payload, 5, &incoming), AGENT_E_TRUNC);
    assert_int_equal(ipc_env_reply_parse(f.payload, 7, &incoming), AGENT_E_PROTO);

    uint8_t *c = dup_exact(cont.p, cont.n);
    char scratch[256];
    struct env_seen seen;
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(ipc_env_parse(c, cont.n, scratch, sizeof(scratch), env_collect, &seen), 0);
    assert_int_equal(seen.calls, 4);
    assert_string_equal(seen.names[0], "PATH");
    assert_string_equal(seen.values[0], "/usr/bin:/bin");
    assert_string_equal(seen.names[1], "EMPTY");
    assert_string_equal(seen.values[1], "");
    assert_string_equal(seen.names[2], "NOEQUALS");
    assert_string_equal(seen.values[2], "");
    assert_string_equal(seen.names[3], "GR\xC3\x9CSSE");
    assert_string_equal(seen.values[3], "\xE2\x82\xAC\xF0\x9F\x98\x80");

    /* The callback's non-zero return stops the walk and comes back. */
    memset(&seen, 0, sizeof(seen));
    seen.stop_at = 2;
    assert_int_equal(ipc_env_parse(c, cont.n, scratch, sizeof(scratch), env_collect, &seen), -1234);
    assert_int_equal(seen.calls, 2);

    /* Scratch too small for an entry. */
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(ipc_env_parse(c, cont.n, scratch, 8, env_collect, &seen), AGENT_E_NOSPACE);

    /* Every truncated continuation is rejected before any callback runs. */
    for (size_t k = 0; k < cont.n; k++) {
        uint8_t *cut = dup_exact(cont.p, k);
        memset(&seen, 0, sizeof(seen));
        int rc = ipc_env_parse(cut, k, scratch, sizeof(scratch), env_collect, &seen);
        assert_true(rc == AGENT_E_TRUNC || rc == AGENT_E_TOOBIG || rc == AGENT_E_PROTO);
        assert_int_equal(seen.calls, 0);
        free(cut);
    }
    /* Trailing junk after the last entry. */
    struct bb longer = cont;
    bb_le(&longer, 0, 2);
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(
        ipc_env_parse(longer.p, longer.n, scratch, sizeof(scratch), env_collect, &seen),
        AGENT_E_PROTO);
    assert_int_equal(seen.calls, 0);
    free(c);

    /* The minimal continuation: count 0. A huge count is rejected up front. */
    static const uint8_t empty[4] = {0, 0, 0, 0};
    memset(&seen, 0, sizeof(seen));
    assert_int_equal(ipc_env_parse(empty, 4, scratch, sizeof(scratch), env_collect, &seen), 0);
    assert_int_equal(seen.calls, 0);
    static const uint8_t huge[8] = {0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0};
    assert_int_equal(ipc_env_parse(huge, 8, scratch, sizeof(scratch), env_collect, &seen),
                     AGENT_E_TOOBIG);
}

/* ---- malformed frames -------------------------------------------------------------------- */

static void test_codec_rejects_bad_headers(void **state)
{
    (void)state;
    struct bb good;
    build_info_reply(&good, 1);
    struct ipc_frame f;
    size_t consumed;

    /* A wrong magic byte is reported as soon as that byte arrives. */
    for (size_t i = 0; i < 14; i++) {
        uint8_t bad[20];
        memcpy(bad, good.p, 20);
        bad[i] ^= 0x20;
        for (size_t k = 0; k <= 20; k++) {
            uint8_t *p = dup_exact(bad, k);
            int rc = ipc_decode(p, k, IPC_MESSAGE_MAX, &f, &consumed);
            assert_int_equal(rc, k <= i ? IPC_NEED_MORE : AGENT_E_PROTO);
            free(p);
        }
        struct ipc_header h;
        assert_int_equal(ipc_header_decode(bad, 20, IPC_MESSAGE_MAX, &h), AGENT_E_PROTO);
    }
    /* size < 20 */
    for (unsigned size = 0; size < 20; size++) {
        uint8_t bad[20];
        memcpy(bad, good.p, 20);
        bad[14] = (uint8_t)size;
        bad[15] = 0;
        uint8_t *p = dup_exact(bad, 16);
        assert_int_equal(ipc_decode(p, 16, IPC_MESSAGE_MAX, &f, &consumed), AGENT_E_PROTO);
        free(p);
    }
    /* size over the cap: rejected from the header alone, before the payload arrives */
    {
        uint8_t bad[20];
        memcpy(bad, good.p, 20);
        bad[14] = 0x01;
        bad[15] = 0x10; /* 4097 */
        uint8_t *p = dup_exact(bad, 20);
        assert_int_equal(ipc_decode(p, 16, 4096, &f, &consumed), AGENT_E_TOOBIG);
        assert_int_equal(ipc_decode(p, 20, 4096, &f, &consumed), AGENT_E_TOOBIG);
        assert_int_equal(ipc_decode(p, 20, 4097, &f, &consumed), IPC_NEED_MORE);
        bad[14] = 0xff;
        bad[15] = 0xff;
        memcpy(p, bad, 20);
        assert_int_equal(ipc_decode(p, 20, SIZE_MAX, &f, &consumed),
                         IPC_NEED_MORE); /* cap clamps to 65535 */
        assert_int_equal(ipc_decode(p, 20, 19, &f, &consumed), AGENT_E_INVAL);
        free(p);
    }
    /* reserved != 0, either byte */
    for (size_t i = 18; i < 20; i++) {
        uint8_t bad[20];
        memcpy(bad, good.p, 20);
        bad[i] = 1;
        uint8_t *p = dup_exact(bad, i + 1);
        assert_int_equal(ipc_decode(p, i + 1, IPC_MESSAGE_MAX, &f, &consumed), AGENT_E_PROTO);
        free(p);
    }
    /* the header decoder alone */
    struct ipc_header h;
    assert_int_equal(ipc_header_decode(good.p, 19, IPC_MESSAGE_MAX, &h), AGENT_E_TRUNC);
    assert_int_equal(ipc_header_decode(good.p, 20, IPC_MESSAGE_MAX, &h), 0);
    assert_int_equal(h.size, good.n);
    assert_int_equal(h.command_set, 0xFF);
    assert_int_equal(h.command_id, 0x00);
    struct ipc_header small = {.size = 19};
    uint8_t hb[20];
    assert_int_equal(ipc_header_encode(hb, &small), AGENT_E_INVAL);
}

static void test_codec_reader_bounds(void **state)
{
    (void)state;
    /* Each primitive on input one byte too short: fails, and the cursor does not move. */
    uint8_t bytes[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    for (size_t n = 0; n < 16; n++) {
        uint8_t *p = dup_exact(bytes, n);
        struct ipc_rd r;
        uint8_t u8;
        uint16_t u16;
        uint32_t u32;
        uint64_t u64;
        uint8_t guid[16];
        const uint8_t *view;
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_u8(&r, &u8), n >= 1 ? 0 : AGENT_E_TRUNC);
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_u16(&r, &u16), n >= 2 ? 0 : AGENT_E_TRUNC);
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_u32(&r, &u32), n >= 4 ? 0 : AGENT_E_TRUNC);
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_u64(&r, &u64), n >= 8 ? 0 : AGENT_E_TRUNC);
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_guid(&r, guid), AGENT_E_TRUNC);
        assert_ptr_equal(r.p, p);
        assert_int_equal(ipc_rd_left(&r), n);
        assert_int_equal(ipc_rd_bytes(&r, n + 1, &view), AGENT_E_TRUNC);
        assert_int_equal(ipc_rd_left(&r), n);
        free(p);
    }
    struct ipc_rd r;
    ipc_rd_init(&r, bytes, 16);
    uint64_t v;
    assert_int_equal(ipc_rd_u64(&r, &v), 0);
    assert_int_equal(v, 0x0807060504030201ull);
    assert_int_equal(ipc_rd_left(&r), 8);
    uint16_t v16;
    assert_int_equal(ipc_rd_u16(&r, &v16), 0);
    assert_int_equal(v16, 0x0a09);
}

static void test_codec_reader_strings(void **state)
{
    (void)state;
    struct ipc_utf16 s;
    struct ipc_rd r;

    /* count 0 = absent */
    static const uint8_t absent[4] = {0, 0, 0, 0};
    ipc_rd_init(&r, absent, 4);
    assert_int_equal(ipc_rd_string(&r, &s), 0);
    assert_false(s.present);
    assert_int_equal(ipc_rd_left(&r), 0);
    char out[16];
    size_t len = 99;
    assert_int_equal(ipc_utf16_to_utf8(&s, out, sizeof(out), &len), 0);
    assert_string_equal(out, "");
    assert_int_equal(len, 0);

    /* count 1 + NUL = empty */
    static const uint8_t empty[6] = {1, 0, 0, 0, 0, 0};
    ipc_rd_init(&r, empty, 6);
    assert_int_equal(ipc_rd_string(&r, &s), 0);
    assert_true(s.present);
    assert_int_equal(s.units, 0);

    /* "ab" */
    static const uint8_t ab[10] = {3, 0, 0, 0, 'a', 0, 'b', 0, 0, 0};
    for (size_t n = 0; n < sizeof(ab); n++) {
        uint8_t *p = dup_exact(ab, n);
        ipc_rd_init(&r, p, n);
        assert_int_equal(ipc_rd_string(&r, &s), AGENT_E_TRUNC);
        assert_int_equal(ipc_rd_left(&r), n);
        free(p);
    }
    ipc_rd_init(&r, ab, sizeof(ab));
    assert_int_equal(ipc_rd_string(&r, &s), 0);
    assert_int_equal(s.units, 2);
    assert_int_equal(ipc_rd_left(&r), 0);

    /* no terminating NUL */
    static const uint8_t no_nul[8] = {2, 0, 0, 0, 'a', 0, 'b', 0};
    uint8_t *p = dup_exact(no_nul, sizeof(no_nul));
    ipc_rd_init(&r, p, sizeof(no_nul));
    assert_int_equal(ipc_rd_string(&r, &s), AGENT_E_PROTO);
    assert_int_equal(ipc_rd_left(&r), sizeof(no_nul));
    free(p);

    /* counts that run past the payload, up to the largest uint32 */
    static const uint32_t counts[] = {4, 0x7fffffffu, 0x80000000u, 0x80000001u, 0xffffffffu};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
        uint8_t b[10] = {0, 0, 0, 0, 'a', 0, 'b', 0, 0, 0};
        for (int k = 0; k < 4; k++) {
            b[k] = (uint8_t)(counts[i] >> (8 * k));
        }
        p = dup_exact(b, sizeof(b));
        ipc_rd_init(&r, p, sizeof(b));
        assert_int_equal(ipc_rd_string(&r, &s), AGENT_E_TRUNC);
        free(p);
    }
}

static void test_codec_utf16_to_utf8(void **state)
{
    (void)state;
    struct {
        uint16_t units[8];
        size_t n;
        const char *utf8;
    } cases[] = {
        {{'h', 'i'}, 2, "hi"},
        {{0x00E9}, 1, "\xC3\xA9"},                 /* é */
        {{0x20AC}, 1, "\xE2\x82\xAC"},             /* € */
        {{0xD83D, 0xDE00}, 2, "\xF0\x9F\x98\x80"}, /* 😀 as a surrogate pair */
        {{0xD83D}, 1, "\xEF\xBF\xBD"},             /* lone high surrogate at the end */
        {{0xD83D, 'x'},
         2,
         "\xEF\xBF\xBD"
         "x"}, /* high surrogate, then no low one */
        {{0xDE00, 'x'},
         2,
         "\xEF\xBF\xBD"
         "x"}, /* stray low surrogate */
        {{0xD83D, 0xD83D, 0xDE00}, 3, "\xEF\xBF\xBD\xF0\x9F\x98\x80"},
        {{'a', 0, 'b'},
         3,
         "a\xEF\xBF\xBD"
         "b"}, /* embedded NUL */
        {{0xFFFF}, 1, "\xEF\xBF\xBF"},
        {{0}, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t raw[16];
        for (size_t k = 0; k < cases[i].n; k++) {
            raw[2 * k] = (uint8_t)cases[i].units[k];
            raw[2 * k + 1] = (uint8_t)(cases[i].units[k] >> 8);
        }
        uint8_t *p = dup_exact(raw, 2 * cases[i].n);
        size_t want = strlen(cases[i].utf8);
        assert_int_equal(ipc_utf16le_utf8_len(p, cases[i].n), want);
        char out[32];
        size_t len = 0;
        assert_int_equal(ipc_utf16le_to_utf8(p, cases[i].n, out, sizeof(out), &len), 0);
        assert_int_equal(len, want);
        assert_string_equal(out, cases[i].utf8);
        /* exactly enough room, and one byte less */
        char *exact = malloc(want + 1);
        assert_non_null(exact);
        assert_int_equal(ipc_utf16le_to_utf8(p, cases[i].n, exact, want + 1, NULL), 0);
        assert_int_equal(ipc_utf16le_to_utf8(p, cases[i].n, exact, want, NULL), AGENT_E_NOSPACE);
        free(exact);
        free(p);
    }
    char out[1];
    struct ipc_utf16 absent = {.p = NULL, .units = 0, .present = false};
    assert_int_equal(ipc_utf16_to_utf8(&absent, out, 0, NULL), AGENT_E_NOSPACE);
}

static void test_codec_utf8_to_utf16(void **state)
{
    (void)state;
    /* round trip through the writer and the reader */
    const char *good[] = {
        "", "plain", "\xC3\xA9t\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80!", "\xF4\x8F\xBF\xBF"};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint8_t buf[64];
        struct ipc_wr w;
        ipc_wr_init(&w, buf, sizeof(buf));
        assert_int_equal(ipc_wr_string(&w, good[i]), 0);
        struct ipc_rd r;
        ipc_rd_init(&r, buf, w.len);
        struct ipc_utf16 s;
        assert_int_equal(ipc_rd_string(&r, &s), 0);
        assert_int_equal(ipc_rd_left(&r), 0);
        assert_true(s.present);
        char out[64];
        assert_int_equal(ipc_utf16_to_utf8(&s, out, sizeof(out), NULL), 0);
        assert_string_equal(out, good[i]);
    }
    size_t units = 0;
    assert_int_equal(ipc_utf8_utf16_units("\xF0\x9F\x98\x80", &units), 0);
    assert_int_equal(units, 2);
    /* NULL is the absent string */
    uint8_t buf[8];
    struct ipc_wr w;
    ipc_wr_init(&w, buf, sizeof(buf));
    assert_int_equal(ipc_wr_string(&w, NULL), 0);
    assert_int_equal(w.len, 4);
    assert_memory_equal(buf, "\0\0\0\0", 4);
    /* malformed UTF-8 is refused and nothing is written */
    const char *bad[] = {"\x80",
                         "\xC0\x80",
                         "\xC1\xBF",
                         "\xE0\x80\x80",
                         "\xED\xA0\x80",
                         "\xF4\x90\x80\x80",
                         "\xF5\x80\x80\x80",
                         "\xE2\x82",
                         "a\xE2",
                         "\xFF"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint8_t out[64];
        ipc_wr_init(&w, out, sizeof(out));
        assert_int_equal(ipc_wr_string(&w, bad[i]), AGENT_E_INVAL);
        assert_int_equal(w.len, 0);
    }
    /* no room */
    ipc_wr_init(&w, buf, 7);
    assert_int_equal(ipc_wr_string(&w, "a"), AGENT_E_NOSPACE); /* needs 4 + 4 */
    assert_int_equal(w.len, 0);
}

static void test_codec_writer_capacity(void **state)
{
    (void)state;
    uint8_t buf[8];
    struct ipc_wr w;
    ipc_wr_init(&w, buf, 7);
    assert_int_equal(ipc_wr_u64(&w, 1), AGENT_E_NOSPACE);
    assert_int_equal(ipc_wr_u32(&w, 0x04030201), 0);
    assert_int_equal(ipc_wr_u16(&w, 0x0605), 0);
    assert_int_equal(ipc_wr_u16(&w, 1), AGENT_E_NOSPACE);
    assert_int_equal(ipc_wr_u8(&w, 7), 0);
    assert_int_equal(ipc_wr_u8(&w, 8), AGENT_E_NOSPACE);
    assert_int_equal(ipc_wr_bytes(&w, "x", 1), AGENT_E_NOSPACE);
    assert_int_equal(ipc_wr_bytes(&w, NULL, 0), 0);
    assert_int_equal(w.len, 7);
    assert_memory_equal(buf, "\x01\x02\x03\x04\x05\x06\x07", 7);
    uint8_t g[16] = {0};
    ipc_wr_init(&w, buf, 8);
    assert_int_equal(ipc_wr_guid(&w, g), AGENT_E_NOSPACE);
    size_t start;
    assert_int_equal(ipc_wr_message_begin(&w, 1, 2, &start), AGENT_E_NOSPACE);
    assert_int_equal(ipc_wr_message_end(&w, 0), AGENT_E_INVAL);
}

/* ---- replies ----------------------------------------------------------------------------- */

static void decode_one(const struct bb *b, struct ipc_frame *f)
{
    size_t consumed;
    assert_int_equal(ipc_decode(b->p, b->n, IPC_MESSAGE_MAX, f, &consumed), IPC_FRAME);
    assert_int_equal(consumed, b->n);
}

static void test_codec_generic_replies(void **state)
{
    (void)state;
    struct bb b;
    struct ipc_frame f;
    struct ipc_reply r;

    /* OK + int32 (24 bytes) */
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0x00);
    bb_le(&b, 0, 4);
    bb_seal(&b);
    assert_int_equal(b.n, 24);
    feed_all_ways(b.p, b.n, NULL, 0);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), 0);
    assert_true(r.ok);
    assert_int_equal(r.hresult, 0);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_SESSION, &r), AGENT_E_PROTO);

    /* OK + uint64 session id (28 bytes) */
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0x00);
    bb_le(&b, 0x00007f3a12345678ull, 8);
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_SESSION, &r), 0);
    assert_true(r.ok);
    assert_int_equal(r.session_id, 0x00007f3a12345678ull);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), AGENT_E_PROTO);

    /* Error + HRESULT (24 bytes): same for every expectation */
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0xFF);
    bb_le(&b, 0x80131385u, 4);
    bb_seal(&b);
    decode_one(&b, &f);
    for (int e = IPC_EXPECT_HRESULT; e <= IPC_EXPECT_PAYLOAD; e++) {
        assert_int_equal(ipc_reply_parse(&f, (enum ipc_reply_expect)e, &r), 0);
        assert_false(r.ok);
        assert_int_equal(r.hresult, 0x80131385u);
        assert_false(r.message.present);
    }
    assert_string_equal(ipc_hresult_name(r.hresult), "DS_IPC_E_UNKNOWN_COMMAND");

    /* GenerateCoreDump3: Error + HRESULT + message */
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0xFF);
    bb_le(&b, 0x80004005u, 4);
    bb_str(&b, "createdump failed");
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), 0);
    assert_false(r.ok);
    assert_int_equal(r.hresult, 0x80004005u);
    assert_string_equal(to_utf8(&r.message), "createdump failed");
    /* ...whose string must span the rest of the payload */
    bb_le(&b, 0, 1);
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), AGENT_E_PROTO);

    /* Error without an HRESULT; not a Server reply; unknown response id */
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0xFF);
    bb_le(&b, 0, 2);
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), AGENT_E_PROTO);
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0x04, 0x00);
    bb_le(&b, 0, 4);
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), AGENT_E_PROTO);
    memset(&b, 0, sizeof(b));
    bb_header(&b, 0xFF, 0x01);
    bb_le(&b, 0, 4);
    bb_seal(&b);
    decode_one(&b, &f);
    assert_int_equal(ipc_reply_parse(&f, IPC_EXPECT_HRESULT, &r), AGENT_E_PROTO);
}

static void test_codec_names_and_guid(void **state)
{
    (void)state;
    assert_string_equal(ipc_hresult_name(0x80131384u), "DS_IPC_E_BAD_ENCODING");
    assert_string_equal(ipc_hresult_name(0x80131386u), "DS_IPC_E_UNKNOWN_MAGIC");
    assert_string_equal(ipc_hresult_name(0x80131515u), "DS_IPC_E_NOTSUPPORTED");
    assert_string_equal(ipc_hresult_name(0x80004005u), "DS_IPC_E_FAIL");
    assert_string_equal(ipc_hresult_name(0x8013135Bu), "DS_IPC_E_NOT_YET_AVAILABLE");
    assert_string_equal(ipc_hresult_name(0x80131371u), "DS_IPC_E_RUNTIME_UNINITIALIZED");
    assert_string_equal(ipc_hresult_name(0x80070057u), "DS_IPC_E_INVALIDARG");
    assert_string_equal(ipc_hresult_name(0x8007007Au), "DS_IPC_E_INSUFFICIENT_BUFFER");
    assert_string_equal(ipc_hresult_name(0x800000CBu), "DS_IPC_E_ENVVAR_NOT_FOUND");
    assert_string_equal(ipc_hresult_name(0x8013136Au), "CORPROF_E_PROFILER_ALREADY_ACTIVE");
    assert_string_equal(ipc_hresult_name(0), "DS_IPC_S_OK");
    assert_string_equal(ipc_hresult_name(0x12345678u), "UNKNOWN");

    char uid[IPC_GUID_STR_SIZE];
    ipc_guid_format(cookie, uid);
    assert_string_equal(uid, "3f2504e0-4f89-11d3-9a0c-0305e82c3301");
    static const uint8_t ff[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                   0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xAB};
    ipc_guid_format(ff, uid);
    assert_string_equal(uid, "ffffffff-ffff-ffff-ffff-ffffffffffab");

    struct {
        const char *cmd;
        const char *name;
    } names[] = {
        {"/x/y/TestApp arg", "TestApp"},
        {"/usr/share/dotnet/dotnet app.dll", "dotnet"},
        {"TestApp", "TestApp"},
        {"  /a/b\tc", "b"},
        {"", ""},
        {"/trailing/ x", ""},
        {"rel/path/app", "app"},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *n;
        size_t len;
        ipc_cmdline_name(names[i].cmd, &n, &len);
        assert_int_equal(len, strlen(names[i].name));
        assert_memory_equal(n, names[i].name, len);
    }
}

static void test_codec_advertise(void **state)
{
    (void)state;
    struct bb b;
    memset(&b, 0, sizeof(b));
    bb_raw(&b, "ADVR_V1", 8);
    bb_raw(&b, cookie, 16);
    bb_le(&b, 1234, 8);
    bb_le(&b, 0, 2);
    assert_int_equal(b.n, IPC_ADVERTISE_SIZE);
    uint8_t c[16];
    uint64_t pid = 0;
    assert_int_equal(ipc_advertise_parse(b.p, b.n, c, &pid), 0);
    assert_int_equal(pid, 1234);
    assert_memory_equal(c, cookie, 16);
    for (size_t k = 0; k < b.n; k++) {
        uint8_t *p = dup_exact(b.p, k);
        assert_int_equal(ipc_advertise_parse(p, k, c, &pid), AGENT_E_TRUNC);
        free(p);
    }
    b.p[3] = 'X';
    assert_int_equal(ipc_advertise_parse(b.p, b.n, c, &pid), AGENT_E_PROTO);
}

/* The runtime major from clrProductVersion, and whether stack walks may be left out (.NET 9+). */
static void test_codec_runtime_major(void **state)
{
    (void)state;
    assert_int_equal(ipc_runtime_major("10.0.12"), 10);
    assert_int_equal(ipc_runtime_major("8.0.0-rtm.23523.6"), 8);
    assert_int_equal(ipc_runtime_major(""), 0);
    assert_int_equal(ipc_runtime_major(NULL), 0);
    assert_int_equal(ipc_runtime_major("v9"), 0);
    assert_true(ipc_runtime_major("99999999999999999999") < 10000); /* bounded, no overflow */
    assert_true(ipc_stackwalk_optional("9.0.1"));
    assert_true(ipc_stackwalk_optional("10.0.12"));
    assert_false(ipc_stackwalk_optional("8.0.11"));
    assert_false(ipc_stackwalk_optional(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_process_requests_golden),
        cmocka_unit_test(test_codec_stop_tracing_golden),
        cmocka_unit_test(test_codec_set_env_golden),
        cmocka_unit_test(test_codec_generate_dump_golden),
        cmocka_unit_test(test_codec_collect_tracing2_golden),
        cmocka_unit_test(test_codec_collect_tracing_versions),
        cmocka_unit_test(test_codec_collect_tracing_rejects),
        cmocka_unit_test(test_codec_collect_tracing_version_limits),
        cmocka_unit_test(test_codec_collect_tracing_too_big),
        cmocka_unit_test(test_codec_collect_encoded_size),
        cmocka_unit_test(test_codec_process_info_replies),
        cmocka_unit_test(test_codec_process_info_trailing),
        cmocka_unit_test(test_codec_env_reply_and_continuation),
        cmocka_unit_test(test_codec_rejects_bad_headers),
        cmocka_unit_test(test_codec_reader_bounds),
        cmocka_unit_test(test_codec_reader_strings),
        cmocka_unit_test(test_codec_utf16_to_utf8),
        cmocka_unit_test(test_codec_utf8_to_utf16),
        cmocka_unit_test(test_codec_writer_capacity),
        cmocka_unit_test(test_codec_generic_replies),
        cmocka_unit_test(test_codec_names_and_guid),
        cmocka_unit_test(test_codec_advertise),
        cmocka_unit_test(test_codec_runtime_major),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
