/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_PROM_NAME_H
#define AGENT_EV_PROM_NAME_H

/*
 * Prometheus metric names and number text as dotnet-monitor writes them (docs/api.md §7.3): what
 * the metrics store names each series by (ev_store.c) and what the Prometheus writer prints
 * (ev_prom.c), kept apart so that the store does not depend on the writer. Pure: no libuv, no
 * I/O.
 */

#include <stddef.h>

#include "buf.h"

/*
 * dotnet-monitor's metric name (docs/api.md §7.3): provider (lower-cased, invalid characters
 * dropped) "_" counter (invalid characters replaced by "_") ["_" unit'], unit' mapping ""/count to
 * nothing, B/MB to bytes and % to ratio (ASCII case-insensitive), any other unit verbatim. A
 * non-ASCII code point counts as one invalid character (two past U+FFFF, as UTF-16 does).
 * Appends to out: 0 or -ENOMEM / AGENT_E_TOOBIG.
 */
int ev_prom_metric_name(struct buf *out, const char *provider, const char *counter,
                        const char *unit);

/* s[0..len) as a part of a name (a counter, a label key): valid characters kept, each invalid one
 * (UTF-16 unit) "_". Appends to out: 0 or -ENOMEM / AGENT_E_TOOBIG. */
int ev_prom_name_part(struct buf *out, const char *s, size_t len);

/* Room for any ev_prom_format_double text and its NUL ("-1.2345678901234567E-308" is 24). */
#define EV_PROM_DOUBLE_MAX 32

/*
 * v as .NET's double.ToString(CultureInfo.InvariantCulture) writes it (ev_fmt.h: shortest text
 * that reads back as v; "1E+17", "1.5E-05" from 17 digits on or below 1E-04), except +Inf and
 * -Inf in Prometheus' spelling. out holds at least EV_PROM_DOUBLE_MAX bytes; returns the length,
 * or 0 when it does not fit.
 */
size_t ev_prom_format_double(double v, char *out, size_t n);

#endif
