/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: bytes a runtime sends back on a diagnostic connection (docs/ipc.md §3, §4).
 * The input is what a read would deliver: one reply frame, possibly followed by a
 * ProcessEnvironment continuation. Decodes the header one-shot and incrementally (every short
 * prefix must be "need more"), parses the frame with each reply expectation, the payload as
 * ProcessInfo 1/2/3 and as a ProcessEnvironment reply, the bytes after the frame as the
 * environment continuation, and every string found through the UTF-16 -> UTF-8 conversions,
 * checking the documented guarantees (lengths, valid UTF-8, round trip through the writer).
 */
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"

/*
 * Converts a string view into an exactly sized heap buffer (so ASan sees any overrun) and checks
 * what ipc_codec.h promises: the advertised length, a C string of that length, valid UTF-8 that
 * the writer re-encodes and the reader decodes back to the same text.
 */
static void check_string(const struct ipc_utf16 *s)
{
    size_t len = ipc_utf16_utf8_len(s);
    CHECK(len <= 3 * s->units);
    char *out = malloc(len + 1);
    CHECK(out != NULL);
    size_t got = 0;
    CHECK(ipc_utf16_to_utf8(s, out, len + 1, &got) == 0);
    CHECK(got == len && strlen(out) == len);
    if (len > 0) {
        /* One byte short: refused, nothing written past the buffer. */
        CHECK(ipc_utf16_to_utf8(s, out, len, NULL) == AGENT_E_NOSPACE);
    }
    size_t units = 0;
    CHECK(ipc_utf8_utf16_units(out, &units) == 0);
    CHECK(units == s->units); /* U+FFFD replaces one unit with one unit */

    size_t cap = 4 + 2 * (units + 1);
    uint8_t *wire = malloc(cap);
    CHECK(wire != NULL);
    struct ipc_wr w;
    ipc_wr_init(&w, wire, cap);
    CHECK(ipc_wr_string(&w, out) == 0 && w.len == cap);
    struct ipc_rd r;
    ipc_rd_init(&r, wire, w.len);
    struct ipc_utf16 back;
    CHECK(ipc_rd_string(&r, &back) == 0 && ipc_rd_left(&r) == 0 && back.present &&
          back.units == units);
    char *again = malloc(len + 1);
    CHECK(again != NULL);
    CHECK(ipc_utf16_to_utf8(&back, again, len + 1, &got) == 0 && got == len);
    CHECK(memcmp(out, again, len + 1) == 0);

    if (s->present) {
        const char *name = NULL;
        size_t name_len = 0;
        ipc_cmdline_name(out, &name, &name_len);
        CHECK(name >= out && name + name_len <= out + len);
    }
    free(again);
    free(wire);
    free(out);
}

static void check_process_info(const uint8_t *p, size_t n)
{
    for (int level = 1; level <= 3; level++) {
        struct ipc_process_info pi;
        if (ipc_process_info_parse(p, n, level, &pi) != 0) {
            continue;
        }
        char guid[IPC_GUID_STR_SIZE];
        ipc_guid_format(pi.cookie, guid);
        CHECK(strlen(guid) == IPC_GUID_STR_SIZE - 1);
        check_string(&pi.command_line);
        check_string(&pi.os);
        check_string(&pi.arch);
        check_string(&pi.entrypoint_assembly);
        check_string(&pi.clr_version);
        check_string(&pi.runtime_identifier);
    }
}

struct env_walk {
    size_t entries;
};

static int env_entry(void *ud, const char *name, size_t name_len, const char *value,
                     size_t value_len)
{
    struct env_walk *walk = ud;
    CHECK(strlen(name) == name_len && strlen(value) == value_len);
    CHECK(memchr(name, '=', name_len) == NULL);
    walk->entries++;
    /* Exercise the early stop now and then. */
    return name_len == 13 ? 1 : 0;
}

static void check_env(const uint8_t *p, size_t n)
{
    /* Enough for any entry: 3 bytes of UTF-8 per UTF-16 unit, plus the NUL (ipc_cmd.h). */
    size_t full_cap = 3 * (n / 2) + 1;
    char *scratch = malloc(full_cap);
    CHECK(scratch != NULL);
    struct env_walk walk = {0};
    int rc = ipc_env_parse(p, n, scratch, full_cap, env_entry, &walk);
    CHECK(rc != AGENT_E_NOSPACE);
    free(scratch);

    /* A small scratch buffer, sized from the input, must fail cleanly with NOSPACE. */
    size_t small_cap = n > 0 ? 1 + p[n - 1] % 64 : 1;
    scratch = malloc(small_cap);
    CHECK(scratch != NULL);
    struct env_walk walk2 = {0};
    int rc2 = ipc_env_parse(p, n, scratch, small_cap, env_entry, &walk2);
    CHECK(rc2 == rc || rc2 == AGENT_E_NOSPACE);
    free(scratch);
}

/* Every string that can be read back to back from p, as a reply's payload is laid out. */
static void check_strings(const uint8_t *p, size_t n)
{
    struct ipc_rd r;
    ipc_rd_init(&r, p, n);
    for (;;) {
        struct ipc_utf16 s;
        size_t before = ipc_rd_left(&r);
        if (ipc_rd_string(&r, &s) != 0) {
            CHECK(ipc_rd_left(&r) == before); /* readers advance only on success */
            break;
        }
        CHECK(ipc_rd_left(&r) < before);
        check_string(&s);
    }
}

static void check_frame(const struct ipc_frame *f)
{
    static const enum ipc_reply_expect expects[] = {IPC_EXPECT_HRESULT, IPC_EXPECT_SESSION,
                                                    IPC_EXPECT_PAYLOAD};
    for (size_t i = 0; i < sizeof(expects) / sizeof(expects[0]); i++) {
        struct ipc_reply r;
        if (ipc_reply_parse(f, expects[i], &r) != 0) {
            continue;
        }
        (void)ipc_hresult_name(r.hresult);
        check_string(&r.message);
        if (r.ok && expects[i] == IPC_EXPECT_PAYLOAD) {
            CHECK(r.payload == f->payload && r.payload_len == f->payload_len);
        }
    }
    check_process_info(f->payload, f->payload_len);
    uint32_t incoming = 0;
    (void)ipc_env_reply_parse(f->payload, f->payload_len, &incoming);
    check_strings(f->payload, f->payload_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t caps[] = {IPC_MESSAGE_MAX, 64, IPC_HEADER_SIZE};
    for (size_t c = 0; c < sizeof(caps) / sizeof(caps[0]); c++) {
        struct ipc_header h;
        int hrc = ipc_header_decode(data, size, caps[c], &h);
        struct ipc_frame f;
        size_t consumed = 0;
        int rc = ipc_decode(data, size, caps[c], &f, &consumed);
        if (rc == IPC_FRAME) {
            CHECK(hrc == 0 && h.size == f.hdr.size && consumed == h.size && consumed <= size);
            CHECK(consumed <= caps[c]);
            /* Every proper prefix of a whole message is a valid prefix. */
            for (size_t k = 0; k < consumed; k = k < 24 ? k + 1 : consumed - 1) {
                struct ipc_frame pf;
                size_t pc = 0;
                CHECK(ipc_decode(data, k, caps[c], &pf, &pc) == IPC_NEED_MORE);
                if (k == consumed - 1) {
                    break;
                }
            }
        } else if (rc == IPC_NEED_MORE) {
            CHECK(hrc == 0 || hrc == AGENT_E_TRUNC);
        } else {
            CHECK(rc < 0);
        }
        if (c > 0 || rc != IPC_FRAME) {
            continue;
        }
        check_frame(&f);
        /* What follows the frame: the ProcessEnvironment continuation. */
        check_env(data + consumed, size - consumed);
    }
    /* Unframed, so the payload parsers get mutated directly too. */
    check_process_info(data, size);
    check_env(data, size);
    if (size % 2 == 0) {
        struct ipc_utf16 raw = {.p = data, .units = size / 2, .present = true};
        check_string(&raw);
    }
    return 0;
}
