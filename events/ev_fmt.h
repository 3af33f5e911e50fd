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

#include "civil.h"

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

/*
 * The calendar arithmetic is common/civil.h's. These two older names stay only for
 * events/ev_logs.c, to be dropped when that file calls civil_days and civil_date itself.
 */
static inline int64_t ev_days_from_civil(int64_t y, int64_t m, int64_t d)
{
    return civil_days(y, m, d);
}

static inline void ev_civil_from_days(int64_t days, int64_t *y, int *m, int *d)
{
    civil_date(days, y, m, d);
}

#endif
