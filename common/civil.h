/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CIVIL_H
#define AGENT_CIVIL_H

/*
 * Calendar arithmetic of the proleptic Gregorian calendar (H. Hinnant's civil-days algorithms),
 * shared by the event decoders (log and NDJSON times) and egress (credential expiry). Pure: no
 * libuv, no I/O, no allocation, no globals.
 */

#include <stdint.h>

/* Days from 1970-01-01 to y-m-d (m 1..12, d 1..31; negative before 1970). */
int64_t civil_days(int64_t y, int64_t m, int64_t d);

/* The reverse: the date of a day number (days since 1970-01-01, negative before). */
void civil_date(int64_t days, int64_t *y, int *m, int *d);

#endif
