/* SPDX-License-Identifier: MIT */
#ifndef AGENT_SPOOL_H
#define AGENT_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

/*
 * A byte FIFO between a producer that must not wait (a runtime's trace stream: when dotmon stops
 * reading it, the runtime's buffer fills and drops events) and a consumer that may be slow (an
 * HTTP client on a 1 MiB/s link). Up to a window of bytes stays in memory; beyond it the oldest
 * queued bytes are written to an unnamed file (O_TMPFILE, or a 0600 file unlinked right after it
 * was made) in a folder, and read back, in order, as the consumer asks. The file never has a name
 * anyone can open, and it disappears when the spool is closed, or when dotmon dies.
 *
 * Bounds: at most SPOOL_MEM_CAP bytes in memory (when the disk falls behind, spool_full says so
 * and the producer must pause), at most `limit` bytes queued in all (memory + file; spool_full
 * again). The file is a ring of at most `limit` bytes: its size is bounded by `limit`, not by the
 * bytes that went through, however long the consumer stays behind.
 *
 * Every file operation runs on libuv's thread pool, one write and one read at a time; nothing
 * blocks the loop. All callbacks run on the loop.
 */

#define SPOOL_MEM_WINDOW ((size_t)1024 * 1024)     /* kept in memory before spilling */
#define SPOOL_MEM_CAP    ((size_t)4 * 1024 * 1024) /* memory never exceeds this */
#define SPOOL_READ_SIZE  ((size_t)256 * 1024)      /* bytes per read from the file */

struct spool;

/*
 * Creates an empty spool on loop; the file is made in `dir` (copied) only when first needed.
 * limit: bytes queued at most (0: the memory window only, no file). Returns 0 or UV_ENOMEM.
 */
int spool_new(uv_loop_t *loop, const char *dir, uint64_t limit, struct spool **out);

/*
 * Appends n bytes. base != NULL: data lies inside the malloc'd block base, which the spool owns
 * from this call on, whatever it returns (as http_stream_write_owned); base == NULL: data is
 * copied. Returns 0, UV_ENOMEM, or AGENT_E_TOOBIG when the spool is already full (spool_full:
 * the producer should have paused; the bytes are kept anyway, memory permitting, so nothing is
 * lost).
 */
int spool_push(struct spool *s, void *base, const void *data, size_t n);

/* Bytes queued (in memory and in the file). */
uint64_t spool_size(const struct spool *s);
/* True when the producer must pause: `limit` reached, or memory at its cap (disk behind). */
bool spool_full(const struct spool *s);
/* True when a paused producer may go on: a quarter of the way back from full (no flapping). */
bool spool_has_room(const struct spool *s);
/* True once the queued bytes reached `limit` at least once (for the operation's report). */
bool spool_limit_hit(const struct spool *s);
/* The most bytes ever queued, and bytes that went through the file. */
uint64_t spool_peak(const struct spool *s);
uint64_t spool_spilled(const struct spool *s);
/* The first error of the file (cannot create, write failed), or 0. After one, nothing more is
 * written to the file: what is in it is still read back, new bytes stay in memory. */
int spool_error(const struct spool *s);

/*
 * The next bytes, in order: cb(ud, base, data, n) with an owned block (free(base) when done, or
 * hand it to http_stream_write_owned), or cb(ud, NULL, NULL, 0) with status < 0 when a read
 * failed (the queued bytes are lost; the spool is then empty). Called from the loop, never from
 * inside this call. One pop at a time: AGENT_E_INVAL while one is pending, AGENT_E_NOTFOUND
 * when the spool is empty (nothing will be called).
 */
typedef void (*spool_chunk_cb)(void *ud, int status, void *base, const uint8_t *data, size_t n);
int spool_pop(struct spool *s, spool_chunk_cb cb, void *ud);
/* True while a pop is pending. */
bool spool_popping(const struct spool *s);

/* Drops everything queued and frees the spool once its file operations are done (the file goes
 * with its descriptor). No callback runs after this. Accepts NULL. */
void spool_close(struct spool *s);

#endif
