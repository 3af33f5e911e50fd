/* SPDX-License-Identifier: MIT */
#include "membudget.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"

static _Atomic uint64_t budget_total;
static _Atomic uint64_t budget_used;

void membudget_set(uint64_t total)
{
    atomic_store(&budget_total, total);
}

uint64_t membudget_total(void)
{
    return atomic_load(&budget_total);
}

uint64_t membudget_used(void)
{
    return atomic_load(&budget_used);
}

uint64_t membudget_fraction(unsigned pct, uint64_t min_bytes)
{
    uint64_t t = atomic_load(&budget_total);
    if (t == 0) {
        return 0;
    }
    uint64_t f = t / 100 * pct + t % 100 * pct / 100;
    return f < min_bytes ? min_bytes : f;
}

void mb_share_init(struct mb_share *s, const char *what, uint64_t cap)
{
    s->what = what;
    s->cap = cap;
    atomic_store(&s->used, 0);
    atomic_store(&s->peak, 0);
    atomic_store(&s->refused, 0);
}

void mb_share_fini(struct mb_share *s)
{
    uint64_t held = atomic_exchange(&s->used, 0);
    if (held > 0) {
        atomic_fetch_sub(&budget_used, held);
    }
}

/* Adds n to *counter unless the result would pass cap (0: no cap). */
static bool add_capped(_Atomic uint64_t *counter, uint64_t n, uint64_t cap, uint64_t *now)
{
    uint64_t cur = atomic_load(counter);
    for (;;) {
        if (n > UINT64_MAX - cur || (cap != 0 && cur + n > cap)) {
            return false;
        }
        if (atomic_compare_exchange_weak(counter, &cur, cur + n)) {
            *now = cur + n;
            return true;
        }
    }
}

int mb_charge(struct mb_share *s, size_t n)
{
    uint64_t now = 0;
    if (!add_capped(&budget_used, n, atomic_load(&budget_total), &now)) {
        if (s != NULL) {
            atomic_fetch_add(&s->refused, 1);
        }
        return AGENT_E_BUDGET;
    }
    if (s == NULL) {
        return 0;
    }
    if (!add_capped(&s->used, n, s->cap, &now)) {
        atomic_fetch_sub(&budget_used, n);
        atomic_fetch_add(&s->refused, 1);
        return AGENT_E_BUDGET;
    }
    uint64_t peak = atomic_load(&s->peak);
    while (now > peak && !atomic_compare_exchange_weak(&s->peak, &peak, now)) {
    }
    return 0;
}

void mb_release(struct mb_share *s, size_t n)
{
    if (s != NULL) {
        atomic_fetch_sub(&s->used, n);
    }
    atomic_fetch_sub(&budget_used, n);
}

uint64_t membudget_from_limit(uint64_t limit)
{
    if (limit == 0) {
        return 0;
    }
    uint64_t headroom = limit / 4 > MEMBUDGET_MIN_HEADROOM ? limit / 4 : MEMBUDGET_MIN_HEADROOM;
    return limit > headroom + limit / 4 ? limit - headroom : limit / 4;
}

int membudget_parse_mb(const char *s, uint64_t *mb)
{
    if (s == NULL || s[0] < '0' || s[0] > '9') {
        return AGENT_E_INVAL;
    }
    uint64_t v = 0;
    for (const char *p = s; *p != '\0'; p++) {
        if (*p < '0' || *p > '9') {
            return AGENT_E_INVAL;
        }
        v = v * 10 + (uint64_t)(*p - '0');
        if (v > MEMBUDGET_MAX_MB) {
            return AGENT_E_INVAL;
        }
    }
    *mb = v;
    return 0;
}

int membudget_env_mb(uint64_t *mb)
{
    const char *env = getenv("DOTMON_MEMORY_LIMIT_MB");
    if (env == NULL || env[0] == '\0') {
        return -ENOENT;
    }
    return membudget_parse_mb(env, mb);
}

/* Reads one number (or "max") from a file: 0, or -ENOENT for "max"/unreadable. */
static int read_limit_file(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        return -ENOENT;
    }
    char line[64];
    int rc = -ENOENT;
    if (fgets(line, sizeof(line), f) != NULL && strncmp(line, "max", 3) != 0) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = strtoull(line, &end, 10);
        /* cgroup v1 says "no limit" with a number near 2^63 rounded to the page size. */
        if (errno == 0 && end != line && v > 0 && v < (1ULL << 62)) {
            *out = (uint64_t)v;
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/*
 * The mount point and root of the cgroup hierarchy that has `want` ("" for v2's unified one,
 * else a v1 controller name) from /proc/self/mountinfo.
 */
static int find_mount(const char *want, char *mnt, size_t mnt_cap, char *root, size_t root_cap)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        return -ENOENT;
    }
    char line[4096];
    int rc = -ENOENT;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        /* id parent maj:min root mount-point options [optional…] - fstype source super-options */
        char *fields[5] = {0};
        char *save = NULL;
        char *p = line;
        for (int i = 0; i < 5; i++) {
            fields[i] = strtok_r(p, " ", &save);
            p = NULL;
            if (fields[i] == NULL) {
                break;
            }
        }
        char *dash = strstr(save != NULL ? save : "", " - ");
        if (fields[4] == NULL || dash == NULL) {
            continue;
        }
        char fstype[32] = "";
        char super[1024] = "";
        char *q = dash + 3;
        char *t = strtok_r(q, " ", &save);
        if (t != NULL) {
            snprintf(fstype, sizeof(fstype), "%s", t);
        }
        (void)strtok_r(NULL, " ", &save); /* source */
        t = strtok_r(NULL, " \n", &save);
        if (t != NULL) {
            snprintf(super, sizeof(super), "%s", t);
        }
        bool match = false;
        if (want[0] == '\0') {
            match = strcmp(fstype, "cgroup2") == 0;
        } else if (strcmp(fstype, "cgroup") == 0) {
            char *opt_save = NULL;
            for (char *o = strtok_r(super, ",", &opt_save); o != NULL;
                 o = strtok_r(NULL, ",", &opt_save)) {
                match = match || strcmp(o, want) == 0;
            }
        }
        if (match) {
            snprintf(root, root_cap, "%s", fields[3]);
            snprintf(mnt, mnt_cap, "%s", fields[4]);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* This process's path in the hierarchy: v2's "0::" line, or the v1 line that names want. */
static int own_cgroup(const char *want, char *path, size_t cap)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL) {
        return -ENOENT;
    }
    char line[4096];
    int rc = -ENOENT;
    while (rc != 0 && fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 != NULL ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL) {
            continue;
        }
        *c2 = '\0';
        const char *ctrls = c1 + 1;
        bool match = false;
        if (want[0] == '\0') {
            match = strncmp(line, "0", 1) == 0 && ctrls[0] == '\0';
        } else {
            char tmp[256];
            snprintf(tmp, sizeof(tmp), "%s", ctrls);
            char *save = NULL;
            for (char *o = strtok_r(tmp, ",", &save); o != NULL; o = strtok_r(NULL, ",", &save)) {
                match = match || strcmp(o, want) == 0;
            }
        }
        if (match) {
            snprintf(path, cap, "%s", c2 + 1);
            rc = 0;
        }
    }
    fclose(f);
    return rc;
}

/* The limit file of one hierarchy: the cgroup's own, else the smallest limit above it. */
static int limit_in(const char *want, const char *file, uint64_t *limit)
{
    char mnt[1024], root[1024], cg[2048];
    if (find_mount(want, mnt, sizeof(mnt), root, sizeof(root)) != 0 ||
        own_cgroup(want, cg, sizeof(cg)) != 0) {
        return -ENOENT;
    }
    /* Inside a cgroup namespace the mount's root is the cgroup itself ("/"). */
    const char *rel = cg;
    size_t rl = strlen(root);
    if (strcmp(root, "/") != 0 && strncmp(cg, root, rl) == 0) {
        rel = cg + rl;
    }
    uint64_t best = 0;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s%s", mnt, strcmp(rel, "/") == 0 ? "" : rel);
    size_t mnt_len = strlen(mnt);
    for (;;) {
        char path[4200];
        uint64_t v = 0;
        snprintf(path, sizeof(path), "%s/%s", dir, file);
        if (read_limit_file(path, &v) == 0 && (best == 0 || v < best)) {
            best = v;
        }
        char *slash = strrchr(dir, '/');
        if (slash == NULL || (size_t)(slash - dir) < mnt_len) {
            break;
        }
        *slash = '\0';
    }
    if (best == 0) {
        return -ENOENT;
    }
    *limit = best;
    return 0;
}

int membudget_cgroup_limit(uint64_t *limit)
{
    if (limit_in("", "memory.max", limit) == 0) {
        return 0;
    }
    return limit_in("memory", "memory.limit_in_bytes", limit);
}
