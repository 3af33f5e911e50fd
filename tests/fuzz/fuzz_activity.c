/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a nettrace stream through events/ev_activity.h (ActivityStop events of
 * Microsoft-Diagnostics-DiagnosticSource to spans), fed in chunks whose sizes come from a hash of
 * the input; and the input as the ActivitySource list of ev_activity_filter_specs. Promises
 * checked: no crash or sanitizer report; every span has non-zero ids and the Recorded flag, ends
 * no earlier than it
 * starts, holds at most EV_ACTIVITY_MAX_TAGS tags, and its strings are NUL-terminated within the
 * string cap; a spec built from the input has one "[AS]" line per name and no line break inside
 * a line. Seeds: tests/fixtures/events/activities.nettrace (a real capture of the test app).
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ev_activity.h"

static bool nonzero(const uint8_t *p, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        if (p[k] != 0) {
            return true;
        }
    }
    return false;
}

static void str_ok(const char *s)
{
    CHECK(s == NULL || strlen(s) <= EV_ACTIVITY_MAX_STRING);
}

static void on_span(void *ud, const struct ev_span *s)
{
    (void)ud;
    CHECK(nonzero(s->trace_id, 16) && nonzero(s->span_id, 8));
    CHECK(!s->has_parent || nonzero(s->parent_span_id, 8));
    CHECK(s->end_unix_nano >= s->start_unix_nano);
    CHECK((s->flags & 1u) != 0);
    CHECK(s->ntags <= EV_ACTIVITY_MAX_TAGS);
    CHECK(s->name != NULL && s->source_name != NULL);
    str_ok(s->name);
    str_ok(s->operation_name);
    str_ok(s->source_name);
    str_ok(s->source_version);
    str_ok(s->trace_state);
    str_ok(s->status_description);
    for (size_t k = 0; k < s->ntags; k++) {
        str_ok(s->tags[k].key);
        str_ok(s->tags[k].value);
    }
    CHECK(ev_activity_kind_name(s->kind) != NULL && ev_activity_status_name(s->status) != NULL);
}

/* The input (up to 4 KiB, NULs cut it short) as a source list. */
static void specs(const uint8_t *data, size_t size, uint64_t h)
{
    size_t n = size < 4096 ? size : 4096;
    char *list = malloc(n + 1);
    if (list == NULL) {
        return;
    }
    memcpy(list, data, n);
    list[n] = '\0';
    struct buf out;
    buf_init(&out, 0);
    double ratio = (double)(h % 1001) / 1000.0;
    if (ev_activity_filter_specs(list, ratio, &out) == 0) {
        const char *p = buf_cstr(&out);
        size_t lines = 0;
        for (const char *q = p; (q = strstr(q, "[AS]")) != NULL; q += 4) {
            lines++;
        }
        size_t breaks = 0;
        for (const char *q = p; (q = strstr(q, "\r\n")) != NULL; q += 2) {
            breaks++;
        }
        size_t newlines = 0;
        for (const char *q = p; (q = strchr(q, '\n')) != NULL; q++) {
            newlines++;
        }
        CHECK(lines > 0 && lines == breaks && newlines == breaks);
    }
    buf_fini(&out);
    free(list);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint64_t h = fuzz_fnv1a(data, size);
    specs(data, size, h);
    size_t chunk = 1 + (size_t)(h % 4096);
    struct ev_activity *a = NULL;
    if (ev_activity_new(&a, on_span, NULL) == 0) {
        for (size_t off = 0; off < size; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (ev_activity_feed(a, data + off, n) != 0) {
                break;
            }
        }
        ev_activity_free(a);
    }
    return 0;
}
