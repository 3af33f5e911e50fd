/* SPDX-License-Identifier: MIT */
#include "ipc_proclist.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_internal.h"

void ipc_proclist_init(struct ipc_proclist *pl, ipc_discovery_change_cb on_change, void *ud)
{
    memset(pl, 0, sizeof(*pl));
    pl->on_change = on_change;
    pl->ud = ud;
}

struct ipc_proclist_entry *ipc_proclist_entry_new(void)
{
    return calloc(1, sizeof(struct ipc_proclist_entry));
}

void ipc_proclist_entry_free(struct ipc_proclist_entry *e)
{
    if (e != NULL) {
        ipc__process_fini(&e->pub);
        free(e);
    }
}

static void free_retired(struct ipc_proclist *pl)
{
    while (pl->retired != NULL) {
        struct ipc_proclist_entry *e = pl->retired;
        pl->retired = e->retired_next;
        ipc_proclist_entry_free(e);
    }
}

void ipc_proclist_fini(struct ipc_proclist *pl)
{
    free_retired(pl);
    free(pl->list);
    free(pl->next_list);
    pl->list = NULL;
    pl->next_list = NULL;
    pl->count = 0;
    pl->ncand = 0;
    pl->cap = 0;
}

int ipc_proclist_reserve(struct ipc_proclist *pl, size_t n)
{
    if (n <= pl->cap) {
        return 0;
    }
    size_t cap = pl->cap ? pl->cap * 2 : 16;
    while (cap < n) {
        cap *= 2;
    }
    /* Arrays of pointers: the size of a pointer is what is meant (hence the NOLINTs). */
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    struct ipc_proclist_entry **a = realloc(pl->list, cap * sizeof(*a));
    if (a == NULL) {
        return UV_ENOMEM;
    }
    pl->list = a;
    /* NOLINTNEXTLINE(bugprone-sizeof-expression) */
    struct ipc_proclist_entry **b = realloc(pl->next_list, cap * sizeof(*b));
    if (b == NULL) {
        return UV_ENOMEM;
    }
    pl->next_list = b;
    pl->cap = cap;
    return 0;
}

void ipc_proclist_retire(struct ipc_proclist *pl, struct ipc_proclist_entry *e)
{
    if (e != NULL) {
        e->retired_next = pl->retired;
        pl->retired = e;
    }
}

void ipc_proclist_begin(struct ipc_proclist *pl)
{
    pl->ncand = 0;
}

void ipc_proclist_add(struct ipc_proclist *pl, struct ipc_proclist_entry *e)
{
    /* The producers reserve one slot each before they can add (ipc_proclist_reserve). */
    assert(pl->ncand < pl->cap);
    if (pl->ncand < pl->cap) {
        pl->next_list[pl->ncand++] = e;
    }
}

/*
 * pid ascending; within a pid the winner first: highest key, then highest rank (connect mode:
 * the newest socket), then the endpoint's name. Listen mode has key and rank 0, so its runtimes
 * sharing a pid (one per pid namespace) come by uid.
 */
static int entry_cmp(const void *a, const void *b)
{
    const struct ipc_proclist_entry *x = *(struct ipc_proclist_entry *const *)a;
    const struct ipc_proclist_entry *y = *(struct ipc_proclist_entry *const *)b;
    if (x->pub.pid != y->pub.pid) {
        return x->pub.pid < y->pub.pid ? -1 : 1;
    }
    if (x->pub.key != y->pub.key) {
        return x->pub.key > y->pub.key ? -1 : 1;
    }
    if (x->rank != y->rank) {
        return x->rank > y->rank ? -1 : 1;
    }
    return strcmp(x->pub.endpoint, y->pub.endpoint);
}

static bool contains(struct ipc_proclist_entry *const *list, size_t n,
                     const struct ipc_proclist_entry *e)
{
    for (size_t i = 0; i < n; i++) {
        if (list[i] == e) {
            return true;
        }
    }
    return false;
}

void ipc_proclist_publish(struct ipc_proclist *pl)
{
    size_t n = pl->ncand;
    if (n > 1) {
        /* NOLINTNEXTLINE(bugprone-sizeof-expression): an array of pointers */
        qsort(pl->next_list, n, sizeof(pl->next_list[0]), entry_cmp);
    }
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        /* Two sockets of one runtime (same pid and cookie): the newest wins. Two runtimes that
         * both call themselves pid N (one per pid namespace) are both listed; `uid` tells them
         * apart. */
        const struct ipc_process *prev = m > 0 ? &pl->next_list[m - 1]->pub : NULL;
        const struct ipc_process *cur = &pl->next_list[i]->pub;
        if (prev == NULL || prev->pid != cur->pid || strcmp(prev->uid, cur->uid) != 0) {
            pl->next_list[m++] = pl->next_list[i];
        }
    }
    struct ipc_proclist_entry **old = pl->list;
    size_t old_n = pl->count;
    pl->list = pl->next_list;
    pl->count = m;
    pl->next_list = old;
    pl->ncand = 0;
    for (size_t i = 0; i < old_n && pl->on_change != NULL && !pl->muted; i++) {
        if (!contains(pl->list, m, old[i])) {
            pl->on_change(pl->ud, &old[i]->pub, false);
        }
    }
    for (size_t i = 0; i < m && pl->on_change != NULL && !pl->muted; i++) {
        if (!contains(old, old_n, pl->list[i])) {
            pl->on_change(pl->ud, &pl->list[i]->pub, true);
        }
    }
    free_retired(pl);
}

void ipc_proclist_mute(struct ipc_proclist *pl)
{
    pl->muted = true;
}

size_t ipc_proclist_count(const struct ipc_proclist *pl)
{
    return pl->count;
}

struct ipc_process *ipc_proclist_at(const struct ipc_proclist *pl, size_t i)
{
    return i < pl->count ? &pl->list[i]->pub : NULL;
}

struct ipc_process *ipc_proclist_find_uid(const struct ipc_proclist *pl, const char *uid)
{
    for (size_t i = 0; i < pl->count; i++) {
        if (strcmp(pl->list[i]->pub.uid, uid) == 0) {
            return &pl->list[i]->pub;
        }
    }
    return NULL;
}
