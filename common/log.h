/* SPDX-License-Identifier: MIT */
#ifndef AGENT_LOG_H
#define AGENT_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

struct buf;

/*
 * dotmon's own log on stderr, one entry per call, in the shapes of .NET's console formatters
 * (Microsoft.Extensions.Logging.Console), chosen with Logging:Console:FormatterName:
 *  - json: {"Timestamp":"…","EventId":0,"LogLevel":"Information","Category":"…",
 *    "Message":"…","State":{"Message":"…","{OriginalFormat}":"…"}} on one line, or indented
 *    (JsonWriterOptions:Indented); "Scopes":[] with IncludeScopes. dotmon's default (no
 *    FormatterName) is the same line without State, which would only repeat the message twice;
 *  - simple: "info: category[0]" then the message on the next line, indented by six spaces (or
 *    one line with SingleLine), the level in colour when ColorBehavior says so;
 *  - systemd: "<6>category[0] message", the syslog severity first, one line.
 * The timestamp is the TimestampFormat given (a .NET custom date format, local time unless
 * UseUtcTimestamp), else for json dotmon's default ISO 8601 UTC with milliseconds, else none (as
 * .NET writes none without a format). dotmon has no log scopes: IncludeScopes changes nothing but
 * json's empty "Scopes" array. Never pass secrets (tokens, keys) to these functions.
 */
enum log_level { LOG_DEBUG = 0, LOG_INFO = 1, LOG_WARN = 2, LOG_ERROR = 3, LOG_NONE = 4 };

enum log_format { LOG_FORMAT_JSON = 0, LOG_FORMAT_SIMPLE, LOG_FORMAT_SYSTEMD };
enum log_color { LOG_COLOR_DEFAULT = 0, LOG_COLOR_ENABLED, LOG_COLOR_DISABLED };

struct log_options {
    enum log_format format;
    char timestamp_format[64]; /* .NET custom format ("HH:mm:ss ", "yyyy-MM-ddTHH:mm:ss.fffZ"); ""
                                  for the default */
    bool utc;                  /* UseUtcTimestamp */
    bool single_line;          /* simple: SingleLine */
    bool include_scopes;       /* IncludeScopes */
    enum log_color color;      /* simple: ColorBehavior (Default: colour when stderr is a tty) */
    bool indented;             /* json: JsonWriterOptions:Indented */
    bool state;                /* json: the State object (FormatterName json given) */
};

/* Sets how entries look (the default: json, dotmon's ISO UTC timestamp). Before any thread logs. */
void log_set_options(const struct log_options *o);

/* The level of every category no rule names (Logging:LogLevel:Default). */
void log_set_level(enum log_level level);
/*
 * A per-category level, as Microsoft.Extensions.Logging selects them: a rule applies to the
 * categories its name starts with (case-insensitive; one '*' matches anything between a prefix
 * and a suffix); of the rules that apply, a console one (Logging:Console:LogLevel:<Category>)
 * beats a general one (Logging:LogLevel:<Category>), then the longest name wins; NULL category
 * is that section's Default. At most 64 rules: AGENT_E_NOSPACE beyond. Before any thread logs.
 */
int log_add_rule(const char *category, bool console, enum log_level level);
/* Forgets every rule (and the level goes back to Information) and the options. */
void log_reset(void);
/* The level a category logs at. */
enum log_level log_level_for(const char *category);
/* The lowest level any category logs at (a quick "could anything at level be logged?"). */
enum log_level log_get_level(void);
/* Parses "Trace" (Debug: dotmon's finest), "Debug", "Information", "Warning", "Error",
 * "Critical" (Error: dotmon's gravest), "None" (case-insensitive). -1 if unknown. */
int log_level_parse(const char *s);
/* Parses a FormatterName: "json", "simple", "systemd" (case-insensitive). -1 if unknown. */
int log_format_parse(const char *s);

/* One entry as the options say, into out (appended; for tests and log_msg). 0 or -ENOMEM. */
int log_format_entry(struct buf *out, const struct log_options *o, bool color, enum log_level level,
                     const char *category, const char *message, const struct timeval *when);

void log_msg(enum log_level level, const char *category, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(cat, ...) log_msg(LOG_DEBUG, (cat), __VA_ARGS__)
#define log_info(cat, ...)  log_msg(LOG_INFO, (cat), __VA_ARGS__)
#define log_warn(cat, ...)  log_msg(LOG_WARN, (cat), __VA_ARGS__)
#define log_error(cat, ...) log_msg(LOG_ERROR, (cat), __VA_ARGS__)

#endif
