/* SPDX-License-Identifier: MIT */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>

#include "buf.h"

static enum log_level min_level = LOG_INFO;

static const char *const level_names[] = {"Debug", "Information", "Warning", "Error", "None"};

void log_set_level(enum log_level level)
{
    min_level = level;
}

enum log_level log_get_level(void)
{
    return min_level;
}

int log_level_parse(const char *s)
{
    for (int i = 0; i <= LOG_NONE; i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            return i;
        }
    }
    if (strcasecmp(s, "info") == 0) {
        return LOG_INFO;
    }
    if (strcasecmp(s, "warn") == 0) {
        return LOG_WARN;
    }
    return -1;
}

void log_msg(enum log_level level, const char *category, const char *fmt, ...)
{
    if (level < min_level || level >= LOG_NONE) {
        return;
    }
    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    time_t secs = tv.tv_sec;
    gmtime_r(&secs, &tm);
    char ts[40];
    if (strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm) == 0) {
        ts[0] = '\0';
    }

    struct buf msg;
    buf_init(&msg, 64 * 1024);
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_vprintf(&msg, fmt, ap);
    va_end(ap);

    struct buf line;
    buf_init(&line, 128 * 1024);
    rc = rc ? rc
            : buf_printf(&line, "{\"Timestamp\":\"%s.%03ldZ\",\"LogLevel\":\"%s\",\"Category\":\"",
                         ts, (long)(tv.tv_usec / 1000), level_names[level]);
    rc = rc ? rc : buf_append_json_escaped(&line, category);
    rc = rc ? rc : buf_append_str(&line, "\",\"Message\":\"");
    rc = rc ? rc : buf_append_json_escaped(&line, buf_cstr(&msg));
    rc = rc ? rc : buf_append_str(&line, "\"}\n");
    if (rc == 0) {
        fwrite(buf_data(&line), 1, buf_size(&line), stderr);
        fflush(stderr);
    }
    buf_fini(&line);
    buf_fini(&msg);
}
