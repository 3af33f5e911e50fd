/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_PROCLIST_H
#define AGENT_IPC_PROCLIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc_discovery.h"

/*
 * The published process list of discovery (connect mode) and of the listener (listen mode),
 * internal to ipc/: what ipc_discovery_at / ipc_listen_at return, the add/remove notifications,
 * and the deferred freeing of processes that left it.
 *
 * Entries are owned by their producer (a socket, a runtime) while they are candidates; the list
 * only holds pointers to them. A producer that drops its entry retires it instead of freeing it:
 * the entry stays valid until the next ipc_proclist_publish has reported its removal, which then
 * frees it. Every call runs on the owner's loop; nothing here blocks or touches libuv.
 */

struct ipc_proclist_entry {
    struct ipc_process pub; /* first: the two pointers convert */
    uint64_t rank;          /* within one pid and key, the higher is listed first (mtime) */
    struct ipc_proclist_entry *retired_next;
};

struct ipc_proclist {
    /* Two arrays of capacity cap: the published list and the one being built. */
    struct ipc_proclist_entry **list;
    struct ipc_proclist_entry **next_list;
    size_t count;
    size_t ncand; /* candidates added since ipc_proclist_begin */
    size_t cap;
    struct ipc_proclist_entry *retired;
    ipc_discovery_change_cb on_change; /* may be NULL */
    void *ud;
    bool muted; /* the owner is closing: no more reports (checked before each one) */
};

void ipc_proclist_init(struct ipc_proclist *pl, ipc_discovery_change_cb on_change, void *ud);
/* Frees the retired entries and the arrays (listed entries belong to their producers). */
void ipc_proclist_fini(struct ipc_proclist *pl);

/* A zeroed entry (calloc), or NULL. */
struct ipc_proclist_entry *ipc_proclist_entry_new(void);
/* ipc__process_fini and free; NULL is fine. */
void ipc_proclist_entry_free(struct ipc_proclist_entry *e);

/*
 * Makes room for n candidates, so that publishing never allocates: call it before a producer
 * that may add an entry exists. 0 or UV_ENOMEM.
 */
int ipc_proclist_reserve(struct ipc_proclist *pl, size_t n);

/* Hands e (may be NULL) over to the list: freed by the next publish, after its removal report. */
void ipc_proclist_retire(struct ipc_proclist *pl, struct ipc_proclist_entry *e);

/* Starts building the next list; then add every entry to list (at most cap of them). */
void ipc_proclist_begin(struct ipc_proclist *pl);
void ipc_proclist_add(struct ipc_proclist *pl, struct ipc_proclist_entry *e);
/*
 * Sorts the candidates (pid ascending; within a pid the highest key, then rank, then endpoint
 * first), keeps the first of each (pid, uid), makes that the published list, and - unless muted
 * - calls on_change for every entry that left (added false) then for every one that joined (true).
 * Finally frees the retired entries (still valid during the removal reports).
 */
void ipc_proclist_publish(struct ipc_proclist *pl);
/* The owner is closing: on_change is not called any more (set muted). */
void ipc_proclist_mute(struct ipc_proclist *pl);

size_t ipc_proclist_count(const struct ipc_proclist *pl);
/* The i-th published process, or NULL. */
struct ipc_process *ipc_proclist_at(const struct ipc_proclist *pl, size_t i);
/* The published process with this uid, or NULL. */
struct ipc_process *ipc_proclist_find_uid(const struct ipc_proclist *pl, const char *uid);

#endif
