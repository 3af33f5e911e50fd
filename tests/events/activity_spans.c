/* SPDX-License-Identifier: MIT */
/*
 * The span tests' tool (check_activity_spans.py):
 *   activity_spans specs <sources> <ratio>   prints ev_activity_filter_specs' argument
 *   activity_spans read <file.nettrace>      prints each span ev_activity decodes from the file as
 *                                            one JSON line, with the OTLP mapping (otel_span):
 *                                            ids in hex, names, kinds and status (the runtime's
 *                                            and OTLP's numbers), times, tags and typed attributes
 * Exit 0, or 1 with a line on standard error.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "ev_activity.h"
#include "otel_span.h"

static int put_hex(struct buf *b, const uint8_t *p, size_t n)
{
    int rc = 0;
    for (size_t k = 0; rc == 0 && k < n; k++) {
        rc = buf_printf(b, "%02x", p[k]);
    }
    return rc;
}

/* ,"key":"s" (or null); with first, no comma. */
static int put_field(struct buf *b, bool first, const char *key, const char *s)
{
    int rc = buf_append_str(b, first ? "\"" : ",\"");
    rc = rc != 0 ? rc : buf_append_json_escaped(b, key);
    rc = rc != 0 ? rc : buf_append_str(b, "\":");
    if (rc != 0 || s == NULL) {
        return rc != 0 ? rc : buf_append_str(b, "null");
    }
    rc = buf_append(b, "\"", 1);
    rc = rc != 0 ? rc : buf_append_json_escaped(b, s);
    return rc != 0 ? rc : buf_append(b, "\"", 1);
}

static int put_str(struct buf *b, const char *key, const char *s)
{
    return put_field(b, false, key, s);
}

static int put_attr(struct buf *b, const struct otlp_kv *kv)
{
    switch (kv->kind) {
    case OTLP_INT:
        return buf_printf(b, "%lld", (long long)kv->i);
    case OTLP_DOUBLE:
        return buf_printf(b, "%.17g", kv->d);
    case OTLP_BOOL:
        return buf_append_str(b, kv->b ? "true" : "false");
    default: {
        int rc = buf_append(b, "\"", 1);
        rc = rc != 0 ? rc : buf_append_json_escaped(b, kv->str);
        return rc != 0 ? rc : buf_append(b, "\"", 1);
    }
    }
}

static void on_span(void *ud, const struct ev_span *s)
{
    int *failed = ud;
    struct otlp_span o;
    struct otlp_scope scope;
    struct otlp_kv attrs[EV_ACTIVITY_MAX_TAGS];
    struct buf b;
    buf_init(&b, 0);
    int rc = otel_span_from_activity(s, &o, &scope, attrs, EV_ACTIVITY_MAX_TAGS);
    rc = rc != 0 ? rc : buf_append_str(&b, "{\"trace\":\"");
    rc = rc != 0 ? rc : put_hex(&b, s->trace_id, 16);
    rc = rc != 0 ? rc : buf_append_str(&b, "\",\"span\":\"");
    rc = rc != 0 ? rc : put_hex(&b, s->span_id, 8);
    rc = rc != 0 ? rc : buf_append_str(&b, "\",\"parent\":");
    if (rc == 0 && s->has_parent) {
        rc = buf_append(&b, "\"", 1);
        rc = rc != 0 ? rc : put_hex(&b, s->parent_span_id, 8);
        rc = rc != 0 ? rc : buf_append(&b, "\"", 1);
    } else if (rc == 0) {
        rc = buf_append_str(&b, "null");
    }
    rc = rc != 0 ? rc : put_str(&b, "name", s->name);
    rc = rc != 0 ? rc : put_str(&b, "operation", s->operation_name);
    rc = rc != 0 ? rc : put_str(&b, "source", s->source_name);
    rc = rc != 0 ? rc : put_str(&b, "version", s->source_version);
    rc = rc != 0 ? rc : put_str(&b, "kind", ev_activity_kind_name(s->kind));
    rc = rc != 0 ? rc : put_str(&b, "status", ev_activity_status_name(s->status));
    rc = rc != 0 ? rc : put_str(&b, "status_description", s->status_description);
    rc = rc != 0 ? rc : put_str(&b, "trace_state", s->trace_state);
    rc = rc != 0 ? rc : put_str(&b, "scope", scope.name);
    rc = rc != 0 ? rc
                 : buf_printf(&b,
                              ",\"flags\":%u,\"start_ns\":%llu,\"end_ns\":%llu,\"otlp_kind\":%d,"
                              "\"otlp_status\":%d",
                              (unsigned)s->flags, (unsigned long long)s->start_unix_nano,
                              (unsigned long long)s->end_unix_nano, (int)o.kind, (int)o.status);
    rc = rc != 0 ? rc : put_str(&b, "otlp_status_message", o.status_message);
    rc = rc != 0 ? rc : buf_append_str(&b, ",\"tags\":{");
    for (size_t k = 0; rc == 0 && k < s->ntags; k++) {
        rc = put_field(&b, k == 0, s->tags[k].key, s->tags[k].value);
    }
    rc = rc != 0 ? rc : buf_append_str(&b, "},\"attrs\":{");
    for (size_t k = 0; rc == 0 && k < o.nattrs; k++) {
        rc = buf_append_str(&b, k > 0 ? ",\"" : "\"");
        rc = rc != 0 ? rc : buf_append_json_escaped(&b, attrs[k].key);
        rc = rc != 0 ? rc : buf_append_str(&b, "\":");
        rc = rc != 0 ? rc : put_attr(&b, &attrs[k]);
    }
    rc = rc != 0 ? rc : buf_append_str(&b, "}}\n");
    if (rc != 0) {
        *failed = 1;
    } else {
        fwrite(buf_data(&b), 1, buf_size(&b), stdout);
    }
    buf_fini(&b);
}

static int read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "activity_spans: cannot open %s\n", path);
        return 1;
    }
    int failed = 0;
    struct ev_activity *a = NULL;
    if (ev_activity_new(&a, on_span, &failed) != 0) {
        fclose(f);
        return 1;
    }
    uint8_t chunk[65536];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        rc = ev_activity_feed(a, chunk, n);
    }
    fclose(f);
    struct ev_activity_stats st;
    ev_activity_get_stats(a, &st);
    fprintf(stderr, "activity_spans: events=%llu starts=%llu stops=%llu spans=%llu skipped=%llu\n",
            (unsigned long long)st.events, (unsigned long long)st.starts,
            (unsigned long long)st.stops, (unsigned long long)st.spans,
            (unsigned long long)st.skipped);
    int major = -1, minor = -1, patch = -1;
    if (ev_activity_source_version(a, &major, &minor, &patch) == 0) {
        fprintf(stderr, "activity_spans: DiagnosticSource %d.%d.%d\n", major, minor, patch);
    }
    if (rc != 0) {
        fprintf(stderr, "activity_spans: %s\n", ev_activity_error(a));
    }
    ev_activity_free(a);
    return rc != 0 || failed ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "specs") == 0) {
        struct buf b;
        buf_init(&b, 0);
        char *end = NULL;
        double ratio = strtod(argv[3], &end);
        int rc = end != NULL && *end == '\0' ? ev_activity_filter_specs(argv[2], ratio, &b) : -1;
        if (rc == 0) {
            fwrite(buf_data(&b), 1, buf_size(&b), stdout);
        }
        buf_fini(&b);
        return rc == 0 ? 0 : 1;
    }
    if (argc == 3 && strcmp(argv[1], "read") == 0) {
        return read_file(argv[2]);
    }
    fprintf(stderr, "usage: activity_spans specs <sources> <ratio> | read <file.nettrace>\n");
    return 1;
}
