/* SPDX-License-Identifier: MIT */
/*
 * Stands in for otel.c while otlp/'s codec is not in the tree (agent/CMakeLists.txt): export is
 * off, and a setting that asks for it says why. Nothing else is ever called (no struct otel).
 */
#define _GNU_SOURCE
#include "otel.h"

#include <stdlib.h>

#include "agent.h"
#include "log.h"

int otel_new(struct agent *a, struct otel **out, char *why, size_t whylen)
{
    (void)a;
    (void)why;
    (void)whylen;
    *out = NULL;
    if (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != NULL) {
        log_warn("dotmon.otel", "this build has no OTLP codec: OpenTelemetry export is off");
    }
    return 0;
}

int otel_render_prom(const struct otel *o, struct buf *out)
{
    (void)o;
    (void)out;
    return 0;
}

struct cJSON *otel_status_json(const struct otel *o)
{
    (void)o;
    return NULL;
}

void otel_shutdown(struct otel *o, uint64_t deadline_ms, void (*done)(void *ud), void *ud)
{
    (void)o;
    (void)deadline_ms;
    (void)done;
    (void)ud;
}

void otel_free(struct otel *o)
{
    (void)o;
}
