/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_FMT_H
#define AGENT_EV_FMT_H

/*
 * Values as .NET's invariant culture writes them: the few conversions events/ shares
 * (EventCounters and Prometheus text, log timestamps, NDJSON times, StoppingEvent payload values).
 * Pure: no libuv, no I/O, no allocation, no globals.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * v as .NET (Core 3.0+; checked against .NET 10) writes a double, or with single a float, in the
 * invariant culture (ToString(), Convert.ToString): the fewest significant digits that read back
 * as v, in E notation ("1E+17", "1.5E-05", exponent of at least two digits) when the decimal
 * exponent is 17 or more (float: 9) or below -4, else plain ("10000000000000000", "0.0001");
 * "-0", "NaN", "Infinity", "-Infinity". 32 bytes of out are always enough
 * ("-1.2345678901234567E-308" is 24); out is NUL-terminated (cut to fit a smaller cap). Returns the
 * length written.
 */
#define EV_FMT_REAL_MAX 32
size_t ev_fmt_real(double v, bool single, char *out, size_t cap);

#endif
