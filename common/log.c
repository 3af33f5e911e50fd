/* SPDX-License-Identifier: MIT */
#define _GNU_SOURCE /* struct tm's tm_gmtoff */
#include "log.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "err.h"

#define LOG_MAX_RULES 64

struct log_rule {
    char category[128]; /* "" for Default */
    bool console;
    enum log_level level;
};

static enum log_level default_level = LOG_INFO;
static struct log_rule rules[LOG_MAX_RULES];
static size_t nrules;
static struct log_options options;
static bool color_on; /* ColorBehavior, decided when the options are set */

static const char *const level_names[] = {"Debug", "Information", "Warning", "Error", "None"};

void log_set_options(const struct log_options *o)
{
    options = *o;
    /* ColorBehavior Default: colour unless stderr is redirected (a file, a pipe). */
    color_on = o->format == LOG_FORMAT_SIMPLE &&
               (o->color == LOG_COLOR_ENABLED ||
                (o->color == LOG_COLOR_DEFAULT && isatty(STDERR_FILENO) == 1));
}

void log_set_level(enum log_level level)
{
    default_level = level;
}

void log_reset(void)
{
    default_level = LOG_INFO;
    nrules = 0;
    memset(&options, 0, sizeof(options));
    color_on = false;
}

int log_add_rule(const char *category, bool console, enum log_level level)
{
    if (nrules == LOG_MAX_RULES) {
        return AGENT_E_NOSPACE;
    }
    struct log_rule *r = &rules[nrules];
    int n = snprintf(r->category, sizeof(r->category), "%s", category != NULL ? category : "");
    if (n < 0 || (size_t)n >= sizeof(r->category)) {
        return AGENT_E_NOSPACE;
    }
    r->console = console;
    r->level = level;
    nrules++;
    return 0;
}

/* Microsoft.Extensions.Logging's match: a prefix, or prefix*suffix around one '*'. */
static bool rule_applies(const struct log_rule *r, const char *category)
{
    const char *star = strchr(r->category, '*');
    size_t cl = strlen(category);
    if (star == NULL) {
        return strncasecmp(category, r->category, strlen(r->category)) == 0;
    }
    size_t pl = (size_t)(star - r->category);
    const char *suffix = star + 1;
    size_t sl = strlen(suffix);
    return cl >= pl + sl && strncasecmp(category, r->category, pl) == 0 &&
           strcasecmp(category + cl - sl, suffix) == 0;
}

/* Whether r is a better choice than cur (NULL: none yet), as LoggerRuleSelector decides. */
static bool better(const struct log_rule *r, const struct log_rule *cur)
{
    if (cur == NULL) {
        return true;
    }
    if (cur->console != r->console) {
        return r->console;
    }
    return strlen(r->category) >= strlen(cur->category);
}

enum log_level log_level_for(const char *category)
{
    const struct log_rule *best = NULL;
    for (size_t i = 0; i < nrules; i++) {
        if (rule_applies(&rules[i], category != NULL ? category : "") && better(&rules[i], best)) {
            best = &rules[i];
        }
    }
    return best != NULL ? best->level : default_level;
}

enum log_level log_get_level(void)
{
    enum log_level low = default_level;
    for (size_t i = 0; i < nrules; i++) {
        low = rules[i].level < low ? rules[i].level : low;
    }
    return low;
}

int log_level_parse(const char *s)
{
    for (int i = 0; i <= LOG_NONE; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            return i;
        }
    }
    static const struct {
        const char *name;
        enum log_level level;
    } more[] = {
        {"Trace", LOG_DEBUG}, {"Critical", LOG_ERROR}, {"info", LOG_INFO}, {"warn", LOG_WARN}};
    for (size_t i = 0; i < sizeof(more) / sizeof(more[0]); i++) {
        if (strcasecmp(s, more[i].name) == 0) {
            return (int)more[i].level;
        }
    }
    return -1;
}

int log_format_parse(const char *s)
{
    static const char *const names[] = {"json", "simple", "systemd"};
    for (int i = 0; i < 3; i++) {
        if (strcasecmp(s, names[i]) == 0) {
            return i;
        }
    }
    return -1;
}

/* ---- timestamps ---------------------------------------------------------------------------- */

/* How many times c repeats from p (at most max). */
static size_t run_of(const char *p, char c, size_t max)
{
    size_t n = 0;
    while (p[n] == c && n < max) {
        n++;
    }
    return n;
}

/* y, M, d, H, h, m, s repeated n times: the field, two digits from "xx" on (years: n digits). */
static int format_field(struct buf *out, char c, size_t n, const struct tm *tm)
{
    int v;
    switch (c) {
    case 'y':
        if (n > 2) {
            return buf_printf(out, "%0*d", (int)n, tm->tm_year + 1900);
        }
        v = (tm->tm_year + 1900) % 100;
        break;
    case 'M':
        v = tm->tm_mon + 1;
        break;
    case 'd':
        v = tm->tm_mday;
        break;
    case 'H':
        v = tm->tm_hour;
        break;
    case 'h':
        v = tm->tm_hour % 12 ? tm->tm_hour % 12 : 12;
        break;
    case 'm':
        v = tm->tm_min;
        break;
    default:
        v = tm->tm_sec;
        break;
    }
    return buf_printf(out, n == 1 ? "%d" : "%02d", v);
}

/* f…/F… (n digits of the second's fraction; F drops trailing zeros and then a lone '.'). */
static int format_fraction(struct buf *out, char c, size_t n, long usec)
{
    char digits[16];
    long us = usec % 1000000;
    snprintf(digits, sizeof(digits), "%06ld0", us < 0 ? 0 : us);
    size_t keep = n;
    if (c == 'F') {
        while (keep > 0 && digits[keep - 1] == '0') {
            keep--;
        }
        if (keep == 0 && buf_size(out) > 0 && out->p[out->off + out->len - 1] == '.') {
            buf_truncate(out, buf_size(out) - 1);
        }
    }
    return buf_append(out, digits, keep);
}

/* z, zz, zzz and K: the offset from UTC (K: "Z" for a UTC time). */
static int format_offset(struct buf *out, char c, size_t n, bool utc, long gmtoff)
{
    if (c == 'K' && utc) {
        return buf_append(out, "Z", 1);
    }
    long off = utc ? 0 : gmtoff;
    char sign = off < 0 ? '-' : '+';
    off = off < 0 ? -off : off;
    if (c == 'K' || n == 3) {
        return buf_printf(out, "%c%02ld:%02ld", sign, off / 3600, off % 3600 / 60);
    }
    return buf_printf(out, n == 1 ? "%c%ld" : "%c%02ld", sign, off / 3600);
}

/* The standard formats dotmon knows, as custom ones; other strings are custom already. */
static const char *custom_format(const char *fmt, bool utc)
{
    if (strcmp(fmt, "o") == 0 || strcmp(fmt, "O") == 0) {
        return utc ? "yyyy'-'MM'-'dd'T'HH':'mm':'ss'.'fffffffK"
                   : "yyyy'-'MM'-'dd'T'HH':'mm':'ss'.'fffffffzzz";
    }
    if (strcmp(fmt, "s") == 0) {
        return "yyyy'-'MM'-'dd'T'HH':'mm':'ss";
    }
    if (strcmp(fmt, "u") == 0) {
        return "yyyy'-'MM'-'dd HH':'mm':'ss'Z'";
    }
    return fmt;
}

/*
 * A .NET custom date and time format: yyyy yy y, MM M, dd d, HH H, hh h, mm m, ss s, f…fffffff,
 * F…, tt t, zzz zz z, K, 'quoted' and "quoted" text, \c; anything else is copied. Also the
 * standard formats "o"/"O" (round trip) and "s", "u".
 */
static int format_time(struct buf *out, const char *fmt, const struct tm *tm, long usec, bool utc,
                       long gmtoff)
{
    static const char fields[] = "yMdHhms";
    static const size_t longest[] = {5, 2, 2, 2, 2, 2, 2};
    int rc = 0;
    for (const char *p = custom_format(fmt, utc); *p != '\0' && rc == 0;) {
        char c = *p;
        const char *f = strchr(fields, c);
        size_t n = 1;
        if (f != NULL) {
            n = run_of(p, c, longest[f - fields]);
            rc = format_field(out, c, n, tm);
        } else if (c == 'f' || c == 'F') {
            n = run_of(p, c, 7);
            rc = format_fraction(out, c, n, usec);
        } else if (c == 'z' || c == 'K') {
            n = c == 'z' ? run_of(p, c, 3) : 1;
            rc = format_offset(out, c, n, utc, gmtoff);
        } else if (c == 't') {
            n = run_of(p, 't', 2);
            rc = buf_append(out, tm->tm_hour < 12 ? "AM" : "PM", n);
        } else if (c == '\'' || c == '"') {
            const char *close = strchr(p + 1, c);
            size_t len = close != NULL ? (size_t)(close - p - 1) : strlen(p + 1);
            rc = buf_append(out, p + 1, len);
            n = len + 1 + (close != NULL);
        } else if (c == '\\' && p[1] != '\0') {
            n = 2;
            rc = buf_append(out, p + 1, 1);
        } else {
            rc = buf_append(out, p, 1);
        }
        p += n;
    }
    return rc;
}

/* The entry's timestamp into ts (without a trailing separator: the format has its own). */
static int timestamp(struct buf *ts, const struct log_options *o, const struct timeval *when)
{
    struct tm tm;
    time_t secs = when->tv_sec;
    if (o->timestamp_format[0] == '\0') {
        if (o->format != LOG_FORMAT_JSON) {
            return 0; /* .NET writes none without a TimestampFormat */
        }
        gmtime_r(&secs, &tm);
        return buf_printf(ts, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                          tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                          (long)(when->tv_usec / 1000));
    }
    if (o->utc) {
        gmtime_r(&secs, &tm);
    } else {
        localtime_r(&secs, &tm);
    }
    return format_time(ts, o->timestamp_format, &tm, (long)when->tv_usec, o->utc,
                       (long)tm.tm_gmtoff);
}

/* ---- the formatters ------------------------------------------------------------------------ */

/*
 * "text" with each newline replaced by rep, and every other control character (C0 but tab, and
 * DEL) by '?': text from outside (a receiver's or STS's message, a process name) must not drive a
 * terminal or forge journal fields.
 */
static int append_lines(struct buf *out, const char *text, const char *rep)
{
    int rc = 0;
    for (const char *p = text; *p != '\0' && rc == 0;) {
        size_t n = strcspn(p, "\r\n");
        rc = buf_append(out, p, n);
        for (size_t i = rc == 0 ? out->len - n : out->len; i < out->len; i++) {
            if ((out->p[i] < 0x20 && out->p[i] != '\t') || out->p[i] == 0x7f) {
                out->p[i] = '?';
            }
        }
        p += n;
        if (*p == '\0') {
            break;
        }
        p += (p[0] == '\r' && p[1] == '\n') ? 2 : 1;
        rc = rc ? rc : buf_append_str(out, rep);
    }
    return rc;
}

static int format_simple(struct buf *out, const struct log_options *o, bool color,
                         enum log_level level, const char *category, const char *message,
                         const char *ts)
{
    static const char *const abbrev[] = {"dbug", "info", "warn", "fail"};
    /* .NET's console colours for each level, as ANSI codes (background, then foreground). */
    static const char *const colors[] = {"\x1b[40m\x1b[37m", "\x1b[40m\x1b[32m",
                                         "\x1b[40m\x1b[1m\x1b[33m", "\x1b[41m\x1b[30m"};
    int rc = buf_append_str(out, ts);
    if (color) {
        rc =
            rc ? rc : buf_printf(out, "%s%s\x1b[39m\x1b[22m\x1b[49m", colors[level], abbrev[level]);
    } else {
        rc = rc ? rc : buf_append_str(out, abbrev[level]);
    }
    rc = rc ? rc : buf_printf(out, ": %s[0]", category);
    if (o->single_line) {
        rc = rc ? rc : buf_append(out, " ", 1);
        rc = rc ? rc : append_lines(out, message, " ");
    } else {
        rc = rc ? rc : buf_append_str(out, "\n      ");
        rc = rc ? rc : append_lines(out, message, "\n      ");
    }
    return rc ? rc : buf_append(out, "\n", 1);
}

static int format_systemd(struct buf *out, enum log_level level, const char *category,
                          const char *message, const char *ts)
{
    static const int severity[] = {7, 6, 4, 3}; /* syslog: debug, info, warning, err */
    int rc = buf_printf(out, "<%d>%s%s[0] ", severity[level], ts, category);
    rc = rc ? rc : append_lines(out, message, " ");
    return rc ? rc : buf_append(out, "\n", 1);
}

/* One "name":"escaped value" member; indented: on its own line, with ": ". */
static int json_member(struct buf *out, bool indented, int depth, bool first, const char *name,
                       const char *value, bool raw)
{
    int rc = first ? 0 : buf_append(out, ",", 1);
    if (indented) {
        rc = rc ? rc : buf_printf(out, "\n%*s", depth * 2, "");
    }
    rc = rc ? rc : buf_append(out, "\"", 1);
    rc = rc ? rc : buf_append_json_escaped(out, name);
    rc = rc ? rc : buf_append_str(out, indented ? "\": " : "\":");
    if (raw) {
        return rc ? rc : buf_append_str(out, value);
    }
    rc = rc ? rc : buf_append(out, "\"", 1);
    rc = rc ? rc : buf_append_json_escaped(out, value);
    return rc ? rc : buf_append(out, "\"", 1);
}

static int format_json(struct buf *out, const struct log_options *o, enum log_level level,
                       const char *category, const char *message, const char *ts)
{
    bool ind = o->indented;
    int rc = buf_append(out, "{", 1);
    bool first = true;
    if (ts[0] != '\0') {
        rc = rc ? rc : json_member(out, ind, 1, first, "Timestamp", ts, false);
        first = false;
    }
    rc = rc ? rc : json_member(out, ind, 1, first, "EventId", "0", true);
    rc = rc ? rc : json_member(out, ind, 1, false, "LogLevel", level_names[level], false);
    rc = rc ? rc : json_member(out, ind, 1, false, "Category", category, false);
    rc = rc ? rc : json_member(out, ind, 1, false, "Message", message, false);
    /* State: the message's template and values; dotmon's messages are formatted already. */
    if (o->state) {
        rc = rc ? rc : json_member(out, ind, 1, false, "State", "{", true);
        rc = rc ? rc : json_member(out, ind, 2, true, "Message", message, false);
        rc = rc ? rc : json_member(out, ind, 2, false, "{OriginalFormat}", message, false);
        if (ind) {
            rc = rc ? rc : buf_append_str(out, "\n  ");
        }
        rc = rc ? rc : buf_append(out, "}", 1);
    }
    if (o->include_scopes) {
        rc = rc ? rc : json_member(out, ind, 1, false, "Scopes", "[]", true);
    }
    if (ind) {
        rc = rc ? rc : buf_append(out, "\n", 1);
    }
    return rc ? rc : buf_append_str(out, "}\n");
}

int log_format_entry(struct buf *out, const struct log_options *o, bool color, enum log_level level,
                     const char *category, const char *message, const struct timeval *when)
{
    if (level < LOG_DEBUG || level >= LOG_NONE) {
        return 0;
    }
    struct buf ts;
    buf_init(&ts, 1024);
    int rc = timestamp(&ts, o, when);
    const char *t = rc == 0 ? buf_cstr(&ts) : "";
    if (rc == 0) {
        switch (o->format) {
        case LOG_FORMAT_SIMPLE:
            rc = format_simple(out, o, color, level, category, message, t);
            break;
        case LOG_FORMAT_SYSTEMD:
            rc = format_systemd(out, level, category, message, t);
            break;
        default:
            rc = format_json(out, o, level, category, message, t);
            break;
        }
    }
    buf_fini(&ts);
    return rc;
}

void log_msg(enum log_level level, const char *category, const char *fmt, ...)
{
    if (level >= LOG_NONE || level < log_level_for(category)) {
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct buf msg;
    buf_init(&msg, 64 * 1024);
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(&msg, fmt, ap);
    va_end(ap);

    struct buf line;
    buf_init(&line, 192 * 1024);
    rc =
        rc ? rc : log_format_entry(&line, &options, color_on, level, category, buf_cstr(&msg), &tv);
    if (rc == 0) {
        fwrite(buf_data(&line), 1, buf_size(&line), stderr);
        fflush(stderr);
    }
    buf_fini(&line);
    buf_fini(&msg);
}
