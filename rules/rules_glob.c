/* SPDX-License-Identifier: MIT */
/*
 * The ASP.NET triggers' request path filters (docs/rules.md §4; dotnet/diagnostics
 * Triggers/AspNet/GlobMatcher.cs). dotnet-monitor turns each glob into an anchored,
 * case-insensitive regular expression: "**" followed by "/" becomes ([^/]*\/)* and "*" becomes
 * [^/]*, everything else is literal. ([^/]*\/)* matches exactly the strings that are empty or end
 * with '/', so no regex engine is needed: the set of path positions a pattern prefix can reach is
 * carried from token to token (linear in pattern length times path length, no backtracking).
 */
#include "rules.h"

#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "rules_internal.h"

/* One token of the pattern at p into next from cur; returns the pattern length consumed. */
static size_t step(const char *p, const char *path, size_t n, const bool *cur, bool *next)
{
    if (p[0] == '*' && p[1] == '*' && p[2] == '/') {
        /* q is reachable if it was, or if path[p'..q) ends with '/' for a reachable p' < q. */
        bool before = false;
        for (size_t q = 0; q <= n; q++) {
            next[q] = cur[q] || (before && path[q - 1] == '/');
            before |= cur[q];
        }
        return 3;
    }
    if (p[0] == '*') {
        /* q is reachable if path[p'..q) holds no '/' for a reachable p' <= q. */
        bool run = false;
        for (size_t q = 0; q <= n; q++) {
            if (q > 0 && path[q - 1] == '/') {
                run = false;
            }
            run |= cur[q];
            next[q] = run;
        }
        return 1;
    }
    next[0] = false;
    for (size_t q = 1; q <= n; q++) {
        next[q] = cur[q - 1] && ascii_lower(path[q - 1]) == ascii_lower(p[0]);
    }
    return 1;
}

bool rules__glob_match(const char *pattern, const char *path)
{
    size_t n = strlen(path);
    bool *cur = calloc(2 * (n + 1), sizeof(bool));
    if (cur == NULL) {
        return false;
    }
    bool *next = cur + n + 1;
    cur[0] = true;
    for (const char *p = pattern; *p != '\0';) {
        p += step(p, path, n, cur, next);
        bool *t = cur;
        cur = next;
        next = t;
    }
    bool match = cur[n];
    free(cur < next ? cur : next);
    return match;
}

static bool any_match(const char *const *globs, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++) {
        if (rules__glob_match(globs[i], path)) {
            return true;
        }
    }
    return false;
}

bool rules__paths_match(const struct rules_trigger *t, const char *path)
{
    if (any_match(t->exclude_paths, t->n_exclude_paths, path)) {
        return false;
    }
    return t->n_include_paths == 0 || any_match(t->include_paths, t->n_include_paths, path);
}
