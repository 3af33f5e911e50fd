/* SPDX-License-Identifier: MIT */
#include "timeouts.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "err.h"
#include "num.h"

#define TIMEOUTS_SECTION "Timeouts"

static const struct timeout_def defs[TIMEOUT_COUNT] = {
#define TIMEOUT_ROW_(id, name, def, min, max, lkey, lunit, what)                                   \
    [TIMEOUT_##id] = {name, def, min, max, lkey, lunit, what},
    TIMEOUTS_TABLE(TIMEOUT_ROW_)
#undef TIMEOUT_ROW_
};

const struct timeout_def *timeout_def(enum timeout_id id)
{
    return (unsigned)id < TIMEOUT_COUNT ? &defs[id] : NULL;
}

void timeouts_defaults(struct timeouts *t)
{
    for (size_t i = 0; i < TIMEOUT_COUNT; i++) {
        t->ms[i] = defs[i].default_ms;
    }
}

/* The row whose setting is key ("Timeouts:<Name>Ms", case-insensitive), or TIMEOUT_COUNT. */
static size_t row_of_key(const char *key)
{
    size_t sect = strlen(TIMEOUTS_SECTION);
    if (strncasecmp(key, TIMEOUTS_SECTION ":", sect + 1) != 0) {
        return TIMEOUT_COUNT;
    }
    const char *name = key + sect + 1;
    size_t n = strlen(name);
    if (n <= 2 || strcasecmp(name + n - 2, "Ms") != 0) {
        return TIMEOUT_COUNT;
    }
    for (size_t i = 0; i < TIMEOUT_COUNT; i++) {
        if (strlen(defs[i].name) == n - 2 && strncasecmp(defs[i].name, name, n - 2) == 0) {
            return i;
        }
    }
    return TIMEOUT_COUNT;
}

/* A row's older setting into *ms (unchanged when absent). */
static int load_legacy(const struct timeout_def *d, const struct config *cfg, uint64_t *ms,
                       char *err, size_t errlen)
{
    const char *v = config_get(cfg, d->legacy_key);
    if (v == NULL || *v == '\0') {
        return 0;
    }
    if (d->legacy == TIMEOUT_LEGACY_SECONDS) {
        uint64_t s = 0;
        if (num_parse_u64_str(v, 10, d->max_ms / 1000, &s) != 0 || s < 1) {
            snprintf(err, errlen, "%s: '%s' is not a whole number from 1 to %llu", d->legacy_key, v,
                     (unsigned long long)(d->max_ms / 1000));
            return AGENT_E_INVAL;
        }
        *ms = s * 1000;
        return 0;
    }
    /* TimeSpan: config_get_timespan_ms logs the details itself. */
    if (config_get_timespan_ms(cfg, d->legacy_key, 1000, d->max_ms, ms) != 0) {
        snprintf(err, errlen, "%s: '%s' is not a duration from 1 to %llu s", d->legacy_key, v,
                 (unsigned long long)(d->max_ms / 1000));
        return AGENT_E_INVAL;
    }
    return 0;
}

static int check_pair(const struct timeouts *t, enum timeout_id lo, enum timeout_id hi, char *err,
                      size_t errlen)
{
    if (t->ms[lo] <= t->ms[hi]) {
        return 0;
    }
    snprintf(err, errlen, "Timeouts:%sMs (%llu) must not exceed Timeouts:%sMs (%llu)",
             defs[lo].name, (unsigned long long)t->ms[lo], defs[hi].name,
             (unsigned long long)t->ms[hi]);
    return AGENT_E_INVAL;
}

uint64_t timeouts_backoff_next(const struct timeouts *t, uint64_t cur)
{
    uint64_t max = t->ms[TIMEOUT_BACKOFF_MAX];
    uint64_t next = cur == 0 ? t->ms[TIMEOUT_BACKOFF_MIN] : (cur > max / 2 ? max : cur * 2);
    return next > max ? max : next;
}

int timeouts_load(struct timeouts *t, const struct config *cfg, char *err, size_t errlen)
{
    struct timeouts v;
    timeouts_defaults(&v);
    timeouts_defaults(t);
    if (errlen > 0) {
        err[0] = '\0';
    }
    for (size_t i = 0; i < TIMEOUT_COUNT; i++) {
        if (defs[i].legacy != TIMEOUT_LEGACY_NONE) {
            int rc = load_legacy(&defs[i], cfg, &v.ms[i], err, errlen);
            if (rc != 0) {
                return rc;
            }
        }
    }
    for (size_t e = 0; e < cfg->n; e++) {
        const char *key = cfg->v[e].key;
        if (!config_key_under(key, TIMEOUTS_SECTION)) {
            continue;
        }
        size_t i = row_of_key(key);
        if (i == TIMEOUT_COUNT) {
            snprintf(
                err, errlen,
                "%s: not a timeout dotmon has (they are Timeouts:<Name>Ms, docs/configuration.md, "
                "\"Timeouts\")",
                key);
            return AGENT_E_INVAL;
        }
        const char *val = cfg->v[e].value;
        if (val == NULL || *val == '\0') {
            continue; /* empty: absent, as for every other setting */
        }
        uint64_t ms = 0;
        if (num_parse_u64_str(val, 10, defs[i].max_ms, &ms) != 0 || ms < defs[i].min_ms) {
            snprintf(err, errlen,
                     "%s: '%s' is not a whole number of milliseconds from %llu to %llu", key, val,
                     (unsigned long long)defs[i].min_ms, (unsigned long long)defs[i].max_ms);
            return AGENT_E_INVAL;
        }
        v.ms[i] = ms;
    }
    int rc = check_pair(&v, TIMEOUT_BACKOFF_MIN, TIMEOUT_BACKOFF_MAX, err, errlen);
    if (rc == 0) {
        rc = check_pair(&v, TIMEOUT_SHUTDOWN_GRACE, TIMEOUT_SHUTDOWN_DEADLINE, err, errlen);
    }
    if (rc == 0) {
        rc = check_pair(&v, TIMEOUT_LISTEN_RETRY, TIMEOUT_LISTEN_RETRY_MAX, err, errlen);
    }
    if (rc == 0) {
        *t = v;
    }
    return rc;
}
