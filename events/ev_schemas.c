/* SPDX-License-Identifier: MIT */
/* The schema registry of one stream; see ev_schemas.h. */
#include "ev_schemas.h"

#include <errno.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "common/membudget.h"
#include "common/num.h"

#define FIRST_CAP 64u

static size_t round_up(size_t n, size_t a)
{
    return (n + a - 1) / a * a;
}

/* Where an entry's slot starts inside its cell. */
static size_t slot_offset(void)
{
    return round_up(sizeof(struct ev_schema_entry), alignof(max_align_t));
}

static struct ev_schema_entry *cell(const struct ev_schemas *t, size_t i)
{
    return (struct ev_schema_entry *)(void *)(t->cells + i * t->stride);
}

/* Charges n bytes against max_bytes and the share; false when refused. */
static bool take(struct ev_schemas *t, size_t n)
{
    if (t->cfg.max_bytes != 0 && t->held + n > t->cfg.max_bytes) {
        return false;
    }
    if (mb_charge(t->cfg.share, n) != 0) {
        return false;
    }
    t->held += n;
    return true;
}

static void give(struct ev_schemas *t, size_t n)
{
    mb_release(t->cfg.share, n);
    t->held -= n;
}

void ev_schemas_init(struct ev_schemas *t, const struct ev_schemas_config *cfg)
{
    memset(t, 0, sizeof(*t));
    if (cfg != NULL) {
        t->cfg = *cfg;
    }
    if (t->cfg.max_ids == 0) {
        t->cfg.max_ids = NETTRACE_DEFAULT_MAX_METADATA;
    }
    t->stride = slot_offset() + round_up(t->cfg.slot_size, alignof(max_align_t));
}

int ev_schemas_set_share(struct ev_schemas *t, struct mb_share *share)
{
    if (t->held != 0) {
        return AGENT_E_INVAL;
    }
    t->cfg.share = share;
    return 0;
}

/* The cell index of id, or of the empty cell where it would go (cap > 0). */
static size_t probe(const struct ev_schemas *t, uint32_t id)
{
    size_t mask = t->cap - 1;
    size_t i = num_mix_u32(id) & mask;
    while (cell(t, i)->used && cell(t, i)->id != id) {
        i = (i + 1) & mask;
    }
    return i;
}

struct ev_schema_entry *ev_schemas_find(struct ev_schemas *t, uint32_t id)
{
    if (t->last != NULL && t->last->id == id) {
        return t->last;
    }
    if (t->cap == 0) {
        return NULL;
    }
    struct ev_schema_entry *e = cell(t, probe(t, id));
    if (!e->used) {
        return NULL;
    }
    t->last = e;
    return e;
}

/* Releases e's contents (callback, schema, bytes); the cell stays marked used. */
static void release(struct ev_schemas *t, struct ev_schema_entry *e)
{
    if (t->cfg.on_release != NULL) {
        t->cfg.on_release(t->cfg.ud, e);
    }
    ev_schema_free(e->schema);
    give(t, e->charged);
    e->schema = NULL;
    e->charged = 0;
}

/* Copies the cell at from into the empty cell at to (the slot pointer follows the copy). */
static void move_cell(struct ev_schemas *t, size_t from, size_t to)
{
    memcpy(cell(t, to), cell(t, from), t->stride);
    struct ev_schema_entry *e = cell(t, to);
    e->slot = t->cfg.slot_size != 0 ? (unsigned char *)e + slot_offset() : NULL;
    memset(cell(t, from), 0, t->stride);
}

void ev_schemas_forget(struct ev_schemas *t, uint32_t id)
{
    if (t->cap == 0) {
        return;
    }
    size_t mask = t->cap - 1;
    size_t hole = probe(t, id);
    if (!cell(t, hole)->used) {
        return;
    }
    release(t, cell(t, hole));
    memset(cell(t, hole), 0, t->stride);
    t->count--;
    t->last = NULL;
    /* Backward shift (linear probing without tombstones): an entry after the hole moves into it
     * unless its home lies cyclically in (hole, j]. */
    for (size_t j = (hole + 1) & mask; cell(t, j)->used; j = (j + 1) & mask) {
        size_t home = num_mix_u32(cell(t, j)->id) & mask;
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            move_cell(t, j, hole);
            hole = j;
        }
    }
}

/* Room for one more entry, the table kept at most half full. */
static int reserve(struct ev_schemas *t)
{
    if ((t->count + 1) * 2 <= t->cap) {
        return 0;
    }
    size_t cap = t->cap != 0 ? t->cap * 2 : FIRST_CAP;
    if (!take(t, cap * t->stride)) {
        return AGENT_E_BUDGET;
    }
    unsigned char *cells = calloc(cap, t->stride);
    if (cells == NULL) {
        give(t, cap * t->stride);
        return -ENOMEM;
    }
    struct ev_schemas old = *t;
    t->cells = cells;
    t->cap = cap;
    t->last = NULL;
    for (size_t k = 0; k < old.cap; k++) {
        struct ev_schema_entry *e = cell(&old, k);
        if (e->used) {
            size_t to = probe(t, e->id);
            memcpy(cell(t, to), e, t->stride);
            cell(t, to)->slot =
                t->cfg.slot_size != 0 ? cells + to * t->stride + slot_offset() : NULL;
        }
    }
    free(old.cells);
    give(t, old.cap * old.stride);
    return 0;
}

int ev_schemas_define(struct ev_schemas *t, const struct nettrace_metadata *md, const uint8_t *p,
                      size_t n, struct ev_schema_entry **out)
{
    *out = NULL;
    ev_schemas_forget(t, md->metadata_id);
    struct ev_schema *s = NULL;
    int rc = md->v6 ? ev_schema_parse_v6(p, n, &s) : ev_schema_parse(p, n, &s);
    if (rc != 0) {
        return rc;
    }
    /* About what a schema holds: its nodes, its strings (at most the payload) and headers. */
    size_t bytes = sizeof(*s) + (size_t)s->nfields * sizeof(struct ev_field) + n + 64;
    if (!take(t, bytes)) {
        ev_schema_free(s);
        return AGENT_E_BUDGET;
    }
    rc = t->count >= t->cfg.max_ids ? AGENT_E_TOOBIG : reserve(t);
    if (rc != 0) {
        ev_schema_free(s);
        give(t, bytes);
        return rc;
    }
    size_t i = probe(t, md->metadata_id);
    struct ev_schema_entry *e = cell(t, i);
    memset(e, 0, t->stride);
    e->id = md->metadata_id;
    e->used = true;
    e->schema = s;
    e->charged = bytes;
    e->slot = t->cfg.slot_size != 0 ? (unsigned char *)e + slot_offset() : NULL;
    t->count++;
    t->last = e;
    *out = e;
    return 0;
}

size_t ev_schemas_count(const struct ev_schemas *t)
{
    return t->count;
}

uint64_t ev_schemas_held(const struct ev_schemas *t)
{
    return t->held;
}

void ev_schemas_fini(struct ev_schemas *t)
{
    for (size_t k = 0; k < t->cap; k++) {
        struct ev_schema_entry *e = cell(t, k);
        if (e->used) {
            release(t, e);
        }
    }
    free(t->cells);
    if (t->cap != 0) {
        give(t, t->cap * t->stride);
    }
    t->cells = NULL;
    t->cap = 0;
    t->count = 0;
    t->last = NULL;
}
