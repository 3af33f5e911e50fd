/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_OTEL_SPAN_H
#define DOTMON_OTEL_SPAN_H
/*
 * A decoded Activity (events/ev_activity.h) as an OTLP span (otlp/otlp.h): the mapping the
 * per-process producer (otel_proc.c) applies to each span before otel_emit_span. Pure: no libuv,
 * no I/O, no allocation.
 *
 * - ids, parent, trace flags and trace state as they are; name = DisplayName (else the operation
 *   name); start and end in Unix ns;
 * - kind: ActivityKind Internal/Server/Client/Producer/Consumer -> SPAN_KIND_INTERNAL ... CONSUMER;
 * - status: Unset/Ok/Error -> STATUS_CODE_UNSET/OK/ERROR; the description becomes the status
 *   message only with Error (OTel's rule: a message is only meaningful for errors);
 * - tags -> attributes. The runtime hands tag values over as text (object.ToString()), so their
 *   type is recovered from the text: a decimal integer that fits int64 becomes an int, "True" /
 *   "False" a bool, a finite decimal with '.' or an exponent a double, anything else a string
 *   (docs/deviations.md: a string tag that looks like a number is sent as a number), except keys
 *   the semantic conventions define as strings (network.protocol.version);
 * - the instrumentation scope is the ActivitySource: its name and version.
 */
#include <stddef.h>

#include "ev_activity.h"
#include "otlp.h"

/*
 * Fills *out and *scope from s; attributes go to attrs[0..cap) (tags past cap are left out:
 * out->nattrs says how many were kept). Every string of out, scope and attrs is a view into s
 * (valid as long as s is, i.e. during the ev_activity callback). 0, or AGENT_E_INVAL for a NULL.
 */
int otel_span_from_activity(const struct ev_span *s, struct otlp_span *out,
                            struct otlp_scope *scope, struct otlp_kv *attrs, size_t cap);

/* One tag value typed as above into kv (kv->key, set by the caller, is read, not changed). */
void otel_span_typed_value(const char *text, struct otlp_kv *kv);

#endif
