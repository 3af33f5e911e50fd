/* SPDX-License-Identifier: MIT */
#include "otel_span.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

/* ActivityKind (0 Internal … 4 Consumer) is OTLP's SpanKind minus one. */
static enum otlp_span_kind span_kind(int kind)
{
    return kind >= EV_ACTIVITY_INTERNAL && kind <= EV_ACTIVITY_CONSUMER
               ? (enum otlp_span_kind)(kind + 1)
               : OTLP_SPAN_INTERNAL;
}

static enum otlp_status_code span_status(int status)
{
    switch (status) {
    case EV_ACTIVITY_OK:
        return OTLP_STATUS_OK;
    case EV_ACTIVITY_ERROR:
        return OTLP_STATUS_ERROR;
    default:
        return OTLP_STATUS_UNSET;
    }
}

/* "0", or an optional '-' and digits without a leading zero, that fit int64. */
static bool as_int(const char *s, int64_t *out)
{
    bool neg = s[0] == '-';
    const char *d = s + (neg ? 1 : 0);
    if (d[0] < '0' || d[0] > '9' || (d[0] == '0' && d[1] != '\0') || (neg && d[0] == '0')) {
        return false;
    }
    uint64_t v = 0;
    for (; *d != '\0'; d++) {
        if (*d < '0' || *d > '9' || v > (UINT64_MAX - 9) / 10) {
            return false;
        }
        v = v * 10 + (uint64_t)(*d - '0');
    }
    if (v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
        return false;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return true;
}

/* What double.ToString() ("R" round-trip) writes: digits, one '.', an exponent; finite. */
static bool as_double(const char *s, double *out)
{
    bool point_or_exp = false;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p == '.' || *p == 'E' || *p == 'e') {
            point_or_exp = true;
        } else if (!((*p >= '0' && *p <= '9') || *p == '-' || *p == '+')) {
            return false;
        }
    }
    if (!point_or_exp || s[0] == '\0' || s[0] == '.' || s[0] == 'E' || s[0] == 'e') {
        return false;
    }
    char *end = NULL;
    double d = strtod(s, &end);
    if (end == NULL || *end != '\0' || !isfinite(d)) {
        return false;
    }
    *out = d;
    return true;
}

/*
 * Attributes the semantic conventions define as strings although their values look like numbers
 * ("1.1", "2"): the instrumentations set them as strings, so they stay strings.
 */
static const char *const string_keys[] = {"network.protocol.version"};

static bool string_key(const char *key)
{
    for (size_t k = 0; key != NULL && k < sizeof(string_keys) / sizeof(string_keys[0]); k++) {
        if (strcmp(key, string_keys[k]) == 0) {
            return true;
        }
    }
    return false;
}

void otel_span_typed_value(const char *text, struct otlp_kv *kv)
{
    int64_t i;
    double d;
    bool typed = !string_key(kv->key);
    if (typed && as_int(text, &i)) {
        kv->kind = OTLP_INT;
        kv->i = i;
    } else if (typed && (strcmp(text, "True") == 0 || strcmp(text, "False") == 0)) {
        kv->kind = OTLP_BOOL;
        kv->b = text[0] == 'T';
    } else if (typed && as_double(text, &d)) {
        kv->kind = OTLP_DOUBLE;
        kv->d = d;
    } else {
        kv->kind = OTLP_STR;
        kv->str = text;
    }
}

int otel_span_from_activity(const struct ev_span *s, struct otlp_span *out,
                            struct otlp_scope *scope, struct otlp_kv *attrs, size_t cap)
{
    if (s == NULL || out == NULL || scope == NULL || (attrs == NULL && cap > 0)) {
        return AGENT_E_INVAL;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->trace_id, s->trace_id, sizeof(out->trace_id));
    memcpy(out->span_id, s->span_id, sizeof(out->span_id));
    out->has_parent = s->has_parent;
    if (s->has_parent) {
        memcpy(out->parent_span_id, s->parent_span_id, sizeof(out->parent_span_id));
    }
    out->trace_state = s->trace_state;
    out->flags = s->flags;
    out->name = s->name != NULL ? s->name : "";
    out->kind = span_kind(s->kind);
    out->start_unix_nano = s->start_unix_nano;
    out->end_unix_nano = s->end_unix_nano;
    out->status = span_status(s->status);
    out->status_message = out->status == OTLP_STATUS_ERROR ? s->status_description : NULL;
    size_t n = s->ntags < cap ? s->ntags : cap;
    for (size_t k = 0; k < n; k++) {
        memset(&attrs[k], 0, sizeof(attrs[k]));
        attrs[k].key = s->tags[k].key;
        otel_span_typed_value(s->tags[k].value, &attrs[k]);
    }
    out->attrs = attrs;
    out->nattrs = n;
    memset(scope, 0, sizeof(*scope));
    scope->name = s->source_name != NULL ? s->source_name : "";
    scope->version = s->source_version;
    return 0;
}
