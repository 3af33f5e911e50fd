/* SPDX-License-Identifier: MIT */
/*
 * A bump allocator for one configuration: the parser makes many small strings and arrays that
 * all live exactly as long as the struct rules_config, so they come from blocks freed together.
 */
#include "rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rules_internal.h"

#define ARENA_BLOCK 8192
#define ARENA_ALIGN 16

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(ARENA_ALIGN) unsigned char data[];
};

struct rules_arena {
    struct arena_block *head;
    bool failed;
};

struct rules_arena *rules__arena_new(void)
{
    return calloc(1, sizeof(struct rules_arena));
}

void rules__arena_free(struct rules_arena *a)
{
    if (a == NULL) {
        return;
    }
    struct arena_block *b = a->head;
    while (b != NULL) {
        struct arena_block *next = b->next;
        free(b);
        b = next;
    }
    free(a);
}

bool rules__arena_failed(const struct rules_arena *a)
{
    return a->failed;
}

void *rules__arena_alloc(struct rules_arena *a, size_t n)
{
    size_t need = (n + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    if (need < n) {
        a->failed = true;
        return NULL;
    }
    struct arena_block *b = a->head;
    if (b == NULL || b->cap - b->used < need) {
        /* A large request gets a block of its own, placed behind the current one so that the
         * current block's free space is not lost. */
        size_t cap = need > ARENA_BLOCK ? need : ARENA_BLOCK;
        struct arena_block *nb = malloc(sizeof(*nb) + cap);
        if (nb == NULL) {
            a->failed = true;
            return NULL;
        }
        nb->used = 0;
        nb->cap = cap;
        if (b != NULL && need > ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, n);
    return p;
}

char *rules__arena_strndup(struct rules_arena *a, const char *s, size_t n)
{
    char *p = rules__arena_alloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

char *rules__arena_strdup(struct rules_arena *a, const char *s)
{
    return rules__arena_strndup(a, s, strlen(s));
}

char *rules__arena_printf(struct rules_arena *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (len < 0) {
        a->failed = true;
        return NULL;
    }
    char *p = rules__arena_alloc(a, (size_t)len + 1);
    if (p != NULL) {
        va_start(ap, fmt);
        (void)vsnprintf(p, (size_t)len + 1, fmt, ap);
        va_end(ap);
    }
    return p;
}

bool rules__queue_room(void **v, size_t size, size_t *head, size_t len, size_t *cap)
{
    if (*head + len < *cap) {
        return true;
    }
    if (*head > 0) {
        memmove(*v, (unsigned char *)*v + *head * size, len * size);
        *head = 0;
        return true;
    }
    size_t ncap = *cap ? *cap * 2 : 8;
    void *nv = realloc(*v, ncap * size);
    if (nv == NULL) {
        return false;
    }
    *v = nv;
    *cap = ncap;
    return true;
}
