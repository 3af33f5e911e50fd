/* SPDX-License-Identifier: MIT */
#ifndef AGENT_EV_SCHEMAS_H
#define AGENT_EV_SCHEMAS_H

/*
 * The schema registry of one nettrace stream: metadata id -> the parsed field list (ev_payload.h)
 * and a per-id slot of the consumer's own (what it derives once per id: field indexes, a class, a
 * rendered head). Every consumer of metadata (ev_json, ev_stream, ev_logs, ev_filter, the trigger
 * session) keeps its ids here. Pure: no libuv, no I/O, no globals.
 *
 * The one rule for a redefined id: nettrace.c refuses a second definition of an id in V4/V5 (an id
 * is valid for the whole stream) and accepts one in V6 only after a sequence point flushed the
 * metadata cache. So a definition that reaches this table for an id it holds is a V6 redefinition:
 * the new one replaces the old one. The old entry is released first (the release callback sees its
 * slot, then its schema is freed and its bytes given back), and the new definition starts with a
 * zeroed slot; a new definition that is refused (malformed, past a bound) leaves the id undefined,
 * never with the old schema.
 *
 * Bounds: at most max_ids entries at once (AGENT_E_TOOBIG past it) and at most max_bytes bytes
 * held (the table and the schemas; AGENT_E_BUDGET past it); every byte is also charged to the
 * share (common/membudget.h; NULL: dotmon's total only), a refusal being AGENT_E_BUDGET too.
 *
 * Ownership: the table owns its schemas and slots. An entry pointer (and its slot) is valid until
 * the next ev_schemas_define, ev_schemas_forget or ev_schemas_fini on the same table.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev_payload.h"
#include "nettrace.h"

struct mb_share;

/* One defined id. Consumers read id, schema and slot; the other members are the table's. */
struct ev_schema_entry {
    uint32_t id;
    bool used;
    struct ev_schema *schema; /* never NULL in an entry handed out */
    void *slot;               /* slot_size bytes, zero at definition; NULL when slot_size is 0 */
    size_t charged;           /* bytes charged for schema */
};

/* Called before an entry goes (redefinition, ev_schemas_forget, ev_schemas_fini): free what the
 * slot points to. The entry's schema is still valid during the call. */
typedef void (*ev_schemas_release_cb)(void *ud, struct ev_schema_entry *e);

struct ev_schemas_config {
    size_t slot_size;   /* bytes of the consumer's per-id slot (0: none) */
    uint32_t max_ids;   /* entries at once; 0 = NETTRACE_DEFAULT_MAX_METADATA */
    uint64_t max_bytes; /* bytes held at once; 0 = only the share bounds them */
    struct mb_share *share;
    ev_schemas_release_cb on_release; /* may be NULL */
    void *ud;
};

struct ev_schemas {
    struct ev_schemas_config cfg;
    unsigned char *cells; /* cap cells of stride bytes: an entry, then its slot */
    size_t stride;
    size_t cap; /* a power of two, or 0; kept at least twice count */
    size_t count;
    uint64_t held;                /* bytes charged now: the cells and the schemas */
    struct ev_schema_entry *last; /* the last entry found (NULL after a change) */
};

/* An empty table (allocates nothing). cfg is copied; NULL for the defaults, no slot. */
void ev_schemas_init(struct ev_schemas *t, const struct ev_schemas_config *cfg);
/* Releases every entry (the callback sees each) and frees the table. Accepts an unused table. */
void ev_schemas_fini(struct ev_schemas *t);
/* Charges to share from now on; AGENT_E_INVAL once anything is held (charged elsewhere). */
int ev_schemas_set_share(struct ev_schemas *t, struct mb_share *share);

/*
 * A definition of md->metadata_id: payload p[0..n) as nettrace's metadata callback hands it (a V6
 * row when md->v6) is parsed and kept, replacing any earlier definition of the id (see above).
 * 0 with *out set (its slot zeroed); AGENT_E_PROTO or AGENT_E_TOOBIG (from ev_schema_parse) for a
 * field list that does not parse, AGENT_E_TOOBIG past max_ids, AGENT_E_BUDGET past max_bytes or
 * the share, -ENOMEM: then *out is NULL and the id is not defined.
 */
int ev_schemas_define(struct ev_schemas *t, const struct nettrace_metadata *md, const uint8_t *p,
                      size_t n, struct ev_schema_entry **out);
/* Drops id's entry if any (a definition the consumer does not keep replaces an earlier one). */
void ev_schemas_forget(struct ev_schemas *t, uint32_t id);
/* The entry of id, or NULL. */
struct ev_schema_entry *ev_schemas_find(struct ev_schemas *t, uint32_t id);
/* Entries now, and bytes charged now. */
size_t ev_schemas_count(const struct ev_schemas *t);
uint64_t ev_schemas_held(const struct ev_schemas *t);

#endif
