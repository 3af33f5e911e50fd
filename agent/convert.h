/* SPDX-License-Identifier: MIT */
#ifndef AGENT_CONVERT_H
#define AGENT_CONVERT_H

#include "cli.h"

/*
 * dotmon convert FILE|- --format ndjson [-o OUT|-]: reads the nettrace stream in 64 KiB chunks
 * (never the whole file) and writes one JSON line per event (events/ev_json.h). Returns the exit
 * code: 0 for a COMPLETE stream, 1 (with a message on stderr) for a TRUNCATED or INVALID one or
 * an I/O error. To stdout the lines written before the problem stay; -o OUT (a regular file) is
 * written under a temporary name and renamed to OUT only on success (common/outfile.h), so OUT is
 * a whole document or left as it was.
 */
int convert_run(const struct cli_options *opts);

#endif
