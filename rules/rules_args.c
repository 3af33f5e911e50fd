/* SPDX-License-Identifier: MIT */
/* The Execute action's argument string split into argv, then its tokens substituted; see
 * rules.h. */
#include "rules.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"

/* Copies one argument from *ps into *po: up to an unquoted blank or the end. */
static void next_argument(const char **ps, char **po)
{
    const char *s = *ps;
    char *out = *po;
    bool quoted = false;
    while (*s != '\0') {
        size_t bs = 0;
        while (*s == '\\') {
            s++;
            bs++;
        }
        if (bs > 0) {
            /* Before a quote: half of them, and an odd one makes the quote literal. */
            size_t lit = *s == '"' ? bs / 2 : bs;
            memset(out, '\\', lit);
            out += lit;
            if (*s == '"' && bs % 2 != 0) {
                *out++ = '"';
                s++;
            }
            continue;
        }
        if (*s == '"') {
            if (quoted && s[1] == '"') {
                *out++ = '"'; /* "" inside quotes: a quote, still quoted */
                s++;
            } else {
                quoted = !quoted;
            }
            s++;
            continue;
        }
        if ((*s == ' ' || *s == '\t') && !quoted) {
            break;
        }
        *out++ = *s++;
    }
    *out++ = '\0';
    *ps = s;
    *po = out;
}

size_t rules_split_arguments(const char *s, char *out, char **argv, size_t max)
{
    size_t n = 0;
    while (*s != '\0' && n < max) {
        while (*s == ' ' || *s == '\t') {
            s++;
        }
        if (*s == '\0') {
            break;
        }
        argv[n++] = out;
        next_argument(&s, &out);
    }
    return n;
}

int rules_substitute(const char *s, rules_token_fn *fn, void *ud, struct buf *b)
{
    while (*s != '\0') {
        size_t len = 0;
        const char *value = *s == '$' ? fn(ud, s, &len) : NULL;
        int rc = value != NULL ? buf_append_str(b, value) : buf_append(b, s, 1);
        if (rc != 0) {
            return rc;
        }
        s += value != NULL && len > 0 ? len : 1;
    }
    return 0;
}

void rules_free_argv(char **argv)
{
    for (size_t k = 0; argv != NULL && argv[k] != NULL; k++) {
        free(argv[k]);
    }
    free(argv);
}

int rules_execute_argv(const char *arguments, size_t max, rules_token_fn *fn, void *ud,
                       char ***argv_out, size_t *argc_out)
{
    *argv_out = NULL;
    *argc_out = 0;
    size_t len = strlen(arguments);
    char *space = malloc(2 * len + 1);
    char **raw = calloc(max + 1, sizeof(*raw));
    char **argv = calloc(max + 1, sizeof(*argv));
    int rc = space == NULL || raw == NULL || argv == NULL ? -ENOMEM : 0;
    size_t n = rc == 0 ? rules_split_arguments(arguments, space, raw, max) : 0;
    struct buf b;
    buf_init(&b, 0);
    for (size_t k = 0; rc == 0 && k < n; k++) {
        rc = rules_substitute(raw[k], fn, ud, &b);
        if (rc == 0 && (argv[k] = buf_steal(&b, NULL)) == NULL) {
            rc = -ENOMEM;
        }
    }
    buf_fini(&b);
    free(space);
    free(raw);
    if (rc != 0) {
        rules_free_argv(argv);
        return rc;
    }
    *argv_out = argv;
    *argc_out = n;
    return 0;
}
