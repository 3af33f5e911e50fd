/* SPDX-License-Identifier: MIT */
#include "logging.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "log.h"

#define FORMATTER "Logging:Console:FormatterOptions:"

/* One boolean formatter option into *out (absent: unchanged). */
static int get_flag(const struct config *cfg, const char *name, bool *out, char *err, size_t errlen)
{
    char key[128];
    snprintf(key, sizeof(key), FORMATTER "%s", name);
    int v = config_get_bool(cfg, key, *out ? 1 : 0);
    if (v < 0) {
        snprintf(err, errlen, "%s: '%s' is not true or false", key, config_get(cfg, key));
        return AGENT_E_INVAL;
    }
    *out = v == 1;
    return 0;
}

static int get_options(const struct config *cfg, struct log_options *o, char *err, size_t errlen)
{
    memset(o, 0, sizeof(*o));
    const char *name = config_get(cfg, "Logging:Console:FormatterName");
    if (name != NULL && *name != '\0') {
        int f = log_format_parse(name);
        if (f < 0) {
            snprintf(err, errlen,
                     "Logging:Console:FormatterName: '%s' is not json, simple or systemd", name);
            return AGENT_E_INVAL;
        }
        o->format = (enum log_format)f;
        o->state = o->format == LOG_FORMAT_JSON;
    }
    const char *ts = config_get(cfg, FORMATTER "TimestampFormat");
    if (ts != NULL) {
        int n = snprintf(o->timestamp_format, sizeof(o->timestamp_format), "%s", ts);
        if (n < 0 || (size_t)n >= sizeof(o->timestamp_format)) {
            snprintf(err, errlen, FORMATTER "TimestampFormat: longer than %zu characters",
                     sizeof(o->timestamp_format) - 1);
            return AGENT_E_INVAL;
        }
    }
    const char *color = config_get(cfg, FORMATTER "ColorBehavior");
    if (color != NULL && *color != '\0') {
        static const char *const names[] = {"Default", "Enabled", "Disabled"};
        size_t i = 0;
        while (i < 3 && strcasecmp(color, names[i]) != 0) {
            i++;
        }
        if (i == 3) {
            snprintf(err, errlen,
                     FORMATTER "ColorBehavior: '%s' is not Default, Enabled or Disabled", color);
            return AGENT_E_INVAL;
        }
        o->color = (enum log_color)i;
    }
    int rc = get_flag(cfg, "UseUtcTimestamp", &o->utc, err, errlen);
    rc = rc ? rc : get_flag(cfg, "SingleLine", &o->single_line, err, errlen);
    rc = rc ? rc : get_flag(cfg, "IncludeScopes", &o->include_scopes, err, errlen);
    rc = rc ? rc : get_flag(cfg, "JsonWriterOptions:Indented", &o->indented, err, errlen);
    if (rc == 0 && config_get_bool(cfg, "Logging:CaptureScopes", 0) < 0) {
        snprintf(err, errlen, "Logging:CaptureScopes: '%s' is not true or false",
                 config_get(cfg, "Logging:CaptureScopes"));
        rc = AGENT_E_INVAL;
    }
    return rc;
}

/* The level rules of one LogLevel section ("Logging:LogLevel" or "Logging:Console:LogLevel"). */
static int add_rules(const struct config *cfg, const char *section, bool console, bool apply,
                     char *err, size_t errlen)
{
    size_t sl = strlen(section);
    for (size_t i = 0; i < cfg->n; i++) {
        const char *key = cfg->v[i].key;
        if (!config_key_under(key, section) || key[sl] != ':') {
            continue;
        }
        const char *category = key + sl + 1;
        int level = log_level_parse(cfg->v[i].value);
        if (level < 0) {
            snprintf(err, errlen,
                     "%s: unknown level '%s' (Trace, Debug, Information, Warning, Error, "
                     "Critical, None)",
                     key, cfg->v[i].value);
            return AGENT_E_INVAL;
        }
        if (!apply) {
            continue;
        }
        bool is_default = strcasecmp(category, "Default") == 0;
        if (is_default && !console) {
            log_set_level((enum log_level)level);
        } else if (log_add_rule(is_default ? NULL : category, console, (enum log_level)level) !=
                   0) {
            snprintf(err, errlen,
                     "%s: too many Logging levels (at most 64), or a category "
                     "name longer than 127 characters",
                     key);
            return AGENT_E_INVAL;
        }
    }
    return 0;
}

int logging_configure(const struct config *cfg, char *err, size_t errlen)
{
    struct log_options o;
    /* Everything is checked before anything is applied. */
    int rc = get_options(cfg, &o, err, errlen);
    rc = rc ? rc : add_rules(cfg, "Logging:LogLevel", false, false, err, errlen);
    rc = rc ? rc : add_rules(cfg, "Logging:Console:LogLevel", true, false, err, errlen);
    if (rc != 0) {
        return rc;
    }
    log_reset();
    log_set_options(&o);
    rc = add_rules(cfg, "Logging:LogLevel", false, true, err, errlen);
    rc = rc ? rc : add_rules(cfg, "Logging:Console:LogLevel", true, true, err, errlen);
    return rc;
}
