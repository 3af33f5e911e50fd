/* SPDX-License-Identifier: MIT */
/*
 * The flat configuration as IConfiguration sections: keys are ':'-separated and compared
 * case-insensitively; a section's children are the distinct next segments of the keys below it,
 * in ConfigurationKeyComparer order (that order is the order of arrays and of the rules).
 */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "rules_internal.h"

/* key equals prefix[0..plen) (case-insensitive) and then ends or goes on with ':'; returns the
 * part after the ':' (NULL when key is not below prefix; "" never, a trailing ':' counts). */
static const char *below(const char *key, const char *prefix, size_t plen)
{
    for (size_t i = 0; i < plen; i++) {
        if (key[i] == '\0' || ascii_lower(key[i]) != ascii_lower(prefix[i])) {
            return NULL;
        }
    }
    return key[plen] == ':' ? key + plen + 1 : NULL;
}

const char *rules__get(const struct rules_ctx *c, const char *key)
{
    const char *v = NULL;
    for (size_t i = 0; i < c->n; i++) {
        if (c->kv[i].key != NULL && ascii_ieq(c->kv[i].key, key)) {
            v = c->kv[i].value != NULL ? c->kv[i].value : "";
        }
    }
    return v;
}

bool rules__has_children(const struct rules_ctx *c, const char *key)
{
    size_t plen = strlen(key);
    for (size_t i = 0; i < c->n; i++) {
        if (c->kv[i].key != NULL && below(c->kv[i].key, key, plen) != NULL) {
            return true;
        }
    }
    return false;
}

bool rules__present(const struct rules_ctx *c, const char *key)
{
    const char *v = rules__get(c, key);
    return (v != NULL && *v != '\0') || rules__has_children(c, key);
}

/* Appends "<key>: <message>" to the errors, or to the warnings. */
static void add_line(struct rules_ctx *c, bool warning, const char *key, const char *fmt,
                     va_list ap) __attribute__((format(printf, 4, 0)));
static void add_line(struct rules_ctx *c, bool warning, const char *key, const char *fmt,
                     va_list ap)
{
    char msg[1024];
    (void)vsnprintf(msg, sizeof(msg), fmt, ap);
    const char ***lines = warning ? &c->warnings : &c->errors;
    size_t *n = warning ? &c->nwarnings : &c->nerrors;
    size_t *cap = warning ? &c->capwarnings : &c->caperrors;
    if (*n == *cap) {
        size_t ncap = *cap ? *cap * 2 : 16;
        const char **v = realloc(*lines, ncap * sizeof(*v));
        if (v == NULL) {
            c->oom = true;
            return;
        }
        *lines = v;
        *cap = ncap;
    }
    const char *line = rules__arena_printf(c->arena, "%s: %s", key, msg);
    if (line == NULL) {
        c->oom = true;
        return;
    }
    (*lines)[(*n)++] = line;
}

void rules__error(struct rules_ctx *c, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(c, false, key, fmt, ap);
    va_end(ap);
}

void rules__warning(struct rules_ctx *c, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    add_line(c, true, key, fmt, ap);
    va_end(ap);
}

const char *rules__key(struct rules_ctx *c, const char *prefix, const char *name)
{
    const char *k = rules__arena_printf(c->arena, "%s:%s", prefix, name);
    if (k == NULL) {
        c->oom = true;
        return "";
    }
    return k;
}

static int key_compare(const void *pa, const void *pb)
{
    const char *a = *(const char *const *)pa, *b = *(const char *const *)pb;
    return ascii_config_segment_compare(a, strlen(a), b, strlen(b));
}

static bool seen(const char **names, size_t n, const char *s, size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (ascii_ieq_n(s, len, names[i])) {
            return true;
        }
    }
    return false;
}

const char **rules__children(struct rules_ctx *c, const char *key, size_t *count)
{
    *count = 0;
    size_t plen = strlen(key), max = 0;
    for (size_t i = 0; i < c->n; i++) {
        max += c->kv[i].key != NULL && below(c->kv[i].key, key, plen) != NULL;
    }
    if (max == 0) {
        return NULL;
    }
    const char **names = rules__arena_alloc(c->arena, max * sizeof(*names));
    if (names == NULL) {
        c->oom = true;
        return NULL;
    }
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const char *rest = c->kv[i].key != NULL ? below(c->kv[i].key, key, plen) : NULL;
        if (rest == NULL) {
            continue;
        }
        const char *colon = strchr(rest, ':');
        size_t len = colon != NULL ? (size_t)(colon - rest) : strlen(rest);
        if (seen(names, n, rest, len)) {
            continue;
        }
        names[n] = rules__arena_strndup(c->arena, rest, len);
        if (names[n] == NULL) {
            c->oom = true;
            return NULL;
        }
        n++;
    }
    qsort(names, n, sizeof(*names), key_compare);
    *count = n;
    return names;
}

void *rules__child_array(struct rules_ctx *c, const char *key, size_t size, const char ***names,
                         size_t *n)
{
    *names = rules__children(c, key, n);
    if (*n == 0) {
        return NULL;
    }
    void *v = rules__array(c, *n, size);
    if (v == NULL) {
        *n = 0;
    }
    return v;
}

const char **rules__string_list(struct rules_ctx *c, const char *key, size_t *count)
{
    size_t nchild;
    const char **child = rules__children(c, key, &nchild);
    *count = 0;
    if (nchild == 0) {
        const char *v = rules__get(c, key);
        if (v == NULL || *v == '\0') {
            return NULL;
        }
        const char **one = rules__arena_alloc(c->arena, sizeof(*one));
        if (one == NULL) {
            c->oom = true;
            return NULL;
        }
        one[0] = v;
        *count = 1;
        return one;
    }
    size_t n = 0;
    for (size_t i = 0; i < nchild; i++) {
        const char *v = rules__get(c, rules__key(c, key, child[i]));
        if (v != NULL) {
            child[n++] = v; /* reuse the array: values replace names in place */
        }
    }
    *count = n;
    return n > 0 ? child : NULL;
}

const char *rules__section(struct rules_ctx *c, const char *key, const char *kind, bool *missing)
{
    *missing = false;
    if (rules__has_children(c, key)) {
        return key;
    }
    const char *v = rules__get(c, key);
    if (v == NULL || *v == '\0') {
        *missing = true;
        return NULL;
    }
    const char *tkey = rules__arena_printf(c->arena, "Templates:%s:%s", kind, v);
    if (tkey == NULL) {
        c->oom = true;
        return NULL;
    }
    if (rules__has_children(c, tkey)) {
        return tkey;
    }
    rules__error(c, key, "Could not find a template with the name: %s", v);
    return NULL;
}
