/* SPDX-License-Identifier: MIT */
/* A nettrace V4 writer for the events tests; see ntw.h. */
#include "ntw.h"

#include <string.h>

static void nt_object_begin(struct wb *w, const char *name, uint32_t version)
{
    wb_u8(w, 5);
    wb_u8(w, 5);
    wb_u8(w, 1);
    wb_u32(w, version);
    wb_u32(w, version);
    wb_u32(w, (uint32_t)strlen(name));
    wb_raw(w, name, strlen(name));
    wb_u8(w, 6);
}

void nt_begin(struct nt *t)
{
    memset(t, 0, sizeof(*t));
    wb_raw(&t->out, "Nettrace", 8);
    wb_u32(&t->out, 20);
    wb_raw(&t->out, "!FastSerialization.1", 20);
    nt_object_begin(&t->out, "Trace", 4);
    static const uint16_t st[8] = {2025, 1, 4, 2, 3, 4, 5, 678};
    for (int k = 0; k < 8; k++) {
        wb_le(&t->out, st[k], 2);
    }
    wb_le(&t->out, SYNC_QPC, 8);
    wb_le(&t->out, QPC_FREQ, 8);
    wb_u32(&t->out, 8);
    wb_u32(&t->out, 42);
    wb_u32(&t->out, 4);
    wb_u32(&t->out, 1000000);
    wb_u8(&t->out, 6);
}

static void guid(uint8_t g[16], unsigned id)
{
    memset(g, 0, 16);
    g[0] = (uint8_t)id;
    g[15] = (uint8_t)(id >> 8);
}

void nt_blob(struct nt *t, uint32_t md_id, int64_t ts, unsigned act, unsigned rel,
             const struct wb *pl)
{
    uint8_t a[16], r[16];
    guid(a, act);
    guid(r, rel);
    uint32_t seq = md_id != 0 ? ++t->seq : 0;
    if (t->compressed) {
        /* metadata id, sequence/capture/proc, thread, activity ids, payload size; the previous
         * header starts at zero in each block. */
        wb_u8(&t->blk, 0x01 | 0x02 | 0x04 | 0x10 | 0x20 | 0x80 | (t->sorted ? 0x40 : 0));
        t->sorted = false;
        wb_varu(&t->blk, md_id);
        wb_varu(&t->blk, seq - t->prev_seq - 1);
        wb_varu(&t->blk, 7);
        wb_varu(&t->blk, 0);
        wb_varu(&t->blk, 7);
        wb_varu(&t->blk, (uint64_t)(ts - t->prev_ts));
        t->prev_seq = seq;
        t->prev_ts = ts;
        wb_raw(&t->blk, a, 16);
        wb_raw(&t->blk, r, 16);
        wb_varu(&t->blk, pl->n);
        wb_raw(&t->blk, pl->b, pl->n);
        return;
    }
    size_t pad = (4 - pl->n % 4) % 4;
    wb_u32(&t->blk, (uint32_t)(76 + pl->n + pad));
    wb_u32(&t->blk, md_id);
    wb_u32(&t->blk, seq);
    wb_le(&t->blk, md_id != 0 ? 7 : 0, 8);
    wb_le(&t->blk, md_id != 0 ? 7 : 0, 8);
    wb_u32(&t->blk, 0);
    wb_u32(&t->blk, 0);
    wb_le(&t->blk, (uint64_t)ts, 8);
    wb_raw(&t->blk, a, 16);
    wb_raw(&t->blk, r, 16);
    wb_u32(&t->blk, (uint32_t)pl->n);
    wb_raw(&t->blk, pl->b, pl->n);
    wb_le(&t->blk, 0, pad);
}

void nt_block(struct nt *t, const char *name, bool compressed)
{
    nt_object_begin(&t->out, name, 2);
    wb_u32(&t->out, (uint32_t)(20 + t->blk.n));
    while (t->out.n % 4 != 0) {
        wb_u8(&t->out, 0);
    }
    wb_le(&t->out, 20, 2);
    wb_le(&t->out, compressed ? 1 : 0, 2);
    wb_le(&t->out, 0, 8);
    wb_le(&t->out, 0, 8);
    wb_raw(&t->out, t->blk.b, t->blk.n);
    wb_u8(&t->out, 6);
    t->blk.n = 0;
    t->prev_seq = 0;
    t->prev_ts = 0;
}

void nt_sp(struct nt *t, int64_t ts)
{
    nt_object_begin(&t->out, "SPBlock", 2);
    wb_u32(&t->out, 12);
    while (t->out.n % 4 != 0) {
        wb_u8(&t->out, 0);
    }
    wb_le(&t->out, (uint64_t)ts, 8);
    wb_u32(&t->out, 0);
    wb_u8(&t->out, 6);
}
