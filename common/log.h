/* SPDX-License-Identifier: MIT */
#ifndef AGENT_LOG_H
#define AGENT_LOG_H

/*
 * Structured logs: one JSON object per line on stderr, in the shape of dotnet-monitor's JSON
 * console logger: {"Timestamp":"…Z","LogLevel":"Information","Category":"…","Message":"…"}.
 * Never pass secrets (tokens, keys) to these functions.
 */
enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3, LOG_NONE = 4 };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parses "Debug", "Information", "Warning", "Error", "None" (case-insensitive). -1 if unknown. */
int log_level_parse(const char *s);
void log_msg(enum log_level level, const char *category, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(cat, ...) log_msg(LOG_DEBUG, (cat), __VA_ARGS__)
#define log_info(cat, ...)  log_msg(LOG_INFO, (cat), __VA_ARGS__)
#define log_warn(cat, ...)  log_msg(LOG_WARN, (cat), __VA_ARGS__)
#define log_error(cat, ...) log_msg(LOG_ERROR, (cat), __VA_ARGS__)

#endif
