/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a nettrace stream through the two readers that turn events into text,
 * events/ev_logs.h (Microsoft-Extensions-Logging records, rendered in the three /logs formats) and
 * events/ev_json.h (one JSON object per event, `dotmon convert` and /trace?format=ndjson). Each
 * input is fed in chunks whose sizes come from a hash of the input. Promises checked: no crash or
 * sanitizer report, every rendered record and every JSON line is valid UTF-8 without a raw
 * newline inside, and a JSON line is one object ('{' … '}'); the records ev_logs holds for their
 * order go out through ticks and the final flush. The input is also one payload of
 * the native layout its first two bytes pick (events/ev_native.h), rendered by ev_json_render with
 * 4- or 8-byte pointers: a JSON object whether it decodes or goes out as hex. Seeds: the real
 * captures of tests/fixtures/events (logs.nettrace among them) and the V6 writer's file.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "buf.h"
#include "ev_json.h"
#include "ev_logs.h"
#include "ev_native.h"

/* Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static bool utf8_ok(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint8_t c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        if (len == 0 || i + len > n) {
            return false;
        }
        uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (s[i + k] & 0x3Fu);
        }
        static const uint32_t min[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
            return false;
        }
        i += len;
    }
    return true;
}

static void on_record(void *ud, const struct ev_log_record *r)
{
    (void)ud;
    for (int f = EV_LOGS_NDJSON; f <= EV_LOGS_PLAIN; f++) {
        struct buf out;
        buf_init(&out, 0);
        if (ev_logs_format_record(r, (enum ev_logs_format)f, &out) == 0) {
            CHECK(utf8_ok(buf_data(&out), buf_size(&out)));
            if (f != EV_LOGS_PLAIN) { /* one record, one line: the newline ends it */
                const uint8_t *nl = memchr(buf_data(&out), '\n', buf_size(&out));
                CHECK(nl != NULL && (size_t)(nl - buf_data(&out)) == buf_size(&out) - 1);
            }
        }
        buf_fini(&out);
    }
}

static int on_line(void *ud, const char *line, size_t len)
{
    (void)ud;
    CHECK(utf8_ok((const uint8_t *)line, len));
    while (len > 0 && line[len - 1] == '\n') {
        len--;
    }
    CHECK(len >= 2 && line[0] == '{' && line[len - 1] == '}');
    CHECK(memchr(line, '\n', len) == NULL);
    return 0;
}

/* The input after its first two bytes as the payload of the layout they pick. */
static void native_payload(const uint8_t *data, size_t size)
{
    static const char *const providers[] = {
        "", "Microsoft-Windows-DotNETRuntime", "Microsoft-Windows-DotNETRuntimeRundown",
        "Microsoft-Windows-DotNETRuntimePrivate", "Microsoft-DotNETCore-SampleProfiler"};
    size_t n = 0;
    const struct ev_native_event *table = ev_native_table(&n);
    if (size < 2 || n == 0) {
        return;
    }
    const struct ev_native_event *e = &table[(data[0] | (data[1] << 8)) % n];
    struct nettrace_trace_info ti;
    memset(&ti, 0, sizeof(ti));
    ti.pointer_size = (data[1] & 0x80) != 0 ? 4 : 8;
    struct nettrace_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.provider = providers[e->provider];
    ev.event_name = "";
    ev.event_id = e->id;
    ev.version = e->version;
    ev.payload = data + 2;
    ev.payload_len = size - 2;
    struct buf out;
    buf_init(&out, 0);
    if (ev_json_render(&out, &ti, NULL, &ev) == 0) {
        (void)on_line(NULL, (const char *)buf_data(&out), buf_size(&out));
    }
    buf_fini(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    native_payload(data, size);
    uint64_t h = fuzz_fnv1a(data, size);
    size_t chunk = 1 + (size_t)(h % 4096);
    struct ev_logs *l = NULL;
    if (ev_logs_new(&l, on_record, NULL) == 0) {
        for (size_t off = 0; off < size; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (ev_logs_feed(l, data + off, n) != 0) {
                break;
            }
            if ((h >> 13) % 3 == 0) { /* now and then a quiet interval (events.md §4.4) */
                ev_logs_tick(l);
                ev_logs_tick(l);
            }
        }
        ev_logs_flush(l); /* the records held for their order, as a session's end gives them */
        ev_logs_free(l);
    }
    struct ev_json *j = ev_json_new(on_line, NULL);
    if (j != NULL) {
        for (size_t off = 0; off < size; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (ev_json_feed(j, data + off, n) != 0) {
                break;
            }
        }
        (void)ev_json_finish(j);
        ev_json_free(j);
    }
    return 0;
}
