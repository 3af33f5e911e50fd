/* SPDX-License-Identifier: MIT */
#ifndef AGENT_MEMBUDGET_H
#define AGENT_MEMBUDGET_H

/*
 * dotmon's one memory budget. Every byte dotmon holds on behalf of something outside it (a
 * runtime's stream, a decoder's tables, a client's request) is charged here before it is
 * allocated and released when it is freed, so that no runtime or client can grow dotmon past its
 * container's limit.
 *
 * - The total is set once at start-up (membudget_set): from the cgroup's memory limit less
 *   headroom for dotmon's own code and buffers, or from dotmon's setting; 0 means unlimited.
 * - Charges go to a share (struct mb_share): one per runtime for what it streams continuously
 *   (metrics series), one per request for what a request builds (a gcdump graph, a profile).
 *   A share has its own cap (mb_share_init), a fraction of the total, so that one runtime
 *   cannot take the whole budget from the others.
 * - A refused charge is not an error of dotmon: the caller drops what it could not keep (and
 *   counts it) or fails its request with 507, naming membudget's setting.
 *
 * Thread-safe (C11 atomics): the gcdump graph is built on the thread pool. No libuv, no logging.
 */

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct mb_share {
    const char *what;         /* for messages, e.g. "metrics of process 12": static or owner's */
    uint64_t cap;             /* the most this share may hold; 0: only the total bounds it */
    _Atomic uint64_t used;    /* bytes charged now */
    _Atomic uint64_t peak;    /* most ever charged at once */
    _Atomic uint64_t refused; /* charges refused (each one counted once) */
};

/* Sets the total (bytes; 0: unlimited). Call before any charge. */
void membudget_set(uint64_t total);
/* The total (0: unlimited), and what all shares hold now. */
uint64_t membudget_total(void);
uint64_t membudget_used(void);
/* pct percent of the total (at least min_bytes; 0 when the total is unlimited). */
uint64_t membudget_fraction(unsigned pct, uint64_t min_bytes);

/* A share with its cap (0: bounded by the total only). */
void mb_share_init(struct mb_share *s, const char *what, uint64_t cap);
/* Releases whatever s still holds (a share must not be charged after this). Safe twice. */
void mb_share_fini(struct mb_share *s);

/*
 * Charges n bytes to s (NULL: to the total only). Returns 0, or AGENT_E_BUDGET when s's cap or
 * the total would be exceeded (nothing is charged then).
 */
int mb_charge(struct mb_share *s, size_t n);
/* Gives back n bytes charged earlier to s (NULL: the total only). */
void mb_release(struct mb_share *s, size_t n);

/*
 * The memory limit of the cgroup this process is in: cgroup v2 memory.max, else v1
 * memory.limit_in_bytes, found through /proc/self/cgroup and /proc/self/mountinfo (a container's
 * own namespace included). Returns 0 with *limit, or -ENOENT when there is no limit ("max", a
 * huge v1 value, or no memory controller). Blocking file reads: call at start-up.
 */
int membudget_cgroup_limit(uint64_t *limit);

/* Headroom left to dotmon's own code, stacks, libuv and I/O buffers: limit - budget. */
#define MEMBUDGET_MIN_HEADROOM (16ull * 1024 * 1024)
/*
 * The budget for a cgroup limit: limit - max(16 MiB, limit / 4), so 64 MiB -> 48 MiB,
 * 1 GiB -> 768 MiB; a limit of 16 MiB or less gives 1/4 of it (dotmon cannot do much there, but
 * it keeps a budget). 0 (no limit) gives 0 (unlimited).
 */
uint64_t membudget_from_limit(uint64_t limit);

/* The largest budget in MiB a setting may give (16 Ti). */
#define MEMBUDGET_MAX_MB (16ull * 1024 * 1024)
/*
 * A budget in MiB as written in Memory:LimitMB's environment twin DOTMON_MEMORY_LIMIT_MB: the
 * whole string decimal digits, at most MEMBUDGET_MAX_MB (so `<< 20` cannot overflow). Returns 0
 * with *mb, or AGENT_E_INVAL ("12abc", "-1", " 5", "", too big).
 */
int membudget_parse_mb(const char *s, uint64_t *mb);
/* DOTMON_MEMORY_LIMIT_MB: 0 with *mb, -ENOENT when unset or empty, AGENT_E_INVAL when bad. */
int membudget_env_mb(uint64_t *mb);

#endif
