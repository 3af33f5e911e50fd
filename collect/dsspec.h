/* SPDX-License-Identifier: MIT */
/*
 * The strings of the one-spec-set rule (docs/events.md §9.1):
 * Microsoft-Diagnostics-DiagnosticSource keeps ONE FilterAndPayloadSpecs list per process, replaced
 * by every session that enables it and emptied when any such session ends while others still read
 * it. dsession.c keeps every live session's own lines per runtime and sends their union; these are
 * its pure parts (no libuv).
 */
#ifndef DOTMON_DSSPEC_H
#define DOTMON_DSSPEC_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"

#define DSSPEC_PROVIDER "Microsoft-Diagnostics-DiagnosticSource"
#define DSSPEC_KEY      "FilterAndPayloadSpecs"

/*
 * The value of FilterAndPayloadSpecs in a provider's arguments ("k=v;k2=\"v2\"", NULL for none):
 * true with *val and *len (the text inside the quotes when quoted), false when absent.
 */
bool dsspec_args_value(const char *args, const char **val, size_t *len);

/*
 * Appends to acc (lines each ended by "\r\n", as this function writes them) every line of
 * text[0..len) that acc does not hold yet: lines split at '\n', blanks and '\r' around a line
 * trimmed, empty lines dropped. Returns how many lines it appended, or -ENOMEM.
 */
int dsspec_lines_add(struct buf *acc, const char *text, size_t len);

/*
 * args (NULL for none) with FilterAndPayloadSpecs set to lines (its trailing "\r\n" dropped):
 * the key's old value replaced, or the key appended when absent; the other pairs kept as they
 * were. A new string in *out, the caller's to free. 0 or -ENOMEM.
 */
int dsspec_args_set(const char *args, const char *lines, char **out);

#endif
