/* SPDX-License-Identifier: MIT */
/* An endless hostile heap-walk stream; see gcheap_hostile.h. */
#include "gcheap_hostile.h"

#include <stdlib.h>
#include <string.h>

#include "wbuf.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"

enum { MD_START = 1, MD_TYPE, MD_NODE, MD_EDGE, MD_METHOD };

static void md(struct nt *t, uint32_t id, uint32_t event_id, uint32_t version)
{
    struct wb w = {0};
    wb_u32(&w, id);
    wb_wstr(&w, RUNTIME);
    wb_u32(&w, event_id);
    wb_wstr(&w, "");
    wb_u64(&w, 0x1980001);
    wb_u32(&w, version);
    wb_u32(&w, 5);
    wb_u32(&w, 0);
    nt_blob(t, 0, 0, 0, 0, &w);
    free(w.b);
}

static void emit(struct nt *t, uint32_t md_id, struct wb *p)
{
    nt_blob(t, md_id, SYNC_QPC, 0, 0, p);
    free(p->b);
    memset(p, 0, sizeof(*p));
}

void gh_start(struct gh *h, enum gh_kind kind)
{
    memset(h, 0, sizeof(*h));
    h->kind = kind;
    nt_begin(&h->t);
    md(&h->t, MD_START, 1, 2);
    md(&h->t, MD_TYPE, 15, 0);
    md(&h->t, MD_NODE, 18, 0);
    md(&h->t, MD_EDGE, 19, 0);
    if (kind == GH_METHODS) {
        md(&h->t, MD_METHOD, 143, 2); /* MethodLoadVerbose */
    }
    nt_block(&h->t, "MetadataBlock", false);
    struct wb p = {0};
    WB_PUT(&p, {7, 4}, {2, 4}, {1, 4}, {0, 4}, {0, 2}, {0, 8}); /* gen 2, induced, blocking */
    emit(&h->t, MD_START, &p);
    nt_block(&h->t, "EventBlock", false);
}

/* The next block: a few events of the kind. */
static void gh_block(struct gh *h)
{
    struct wb p = {0};
    if (h->kind == GH_EDGES) {
        for (int e = 0; e < 4; e++) {
            WB_PUT(&p, {h->round, 4}, {4000, 4}, {0, 2});
            for (uint32_t i = 0; i < 4000; i++) {
                wb_u64(&p, 0x10000000ull + ((uint64_t)h->round * 4000 + i) * 8);
                wb_u32(&p, 0);
            }
            emit(&h->t, MD_EDGE, &p);
            h->round++;
        }
    } else if (h->kind == GH_NODES) {
        for (int e = 0; e < 4; e++) {
            WB_PUT(&p, {h->round, 4}, {1500, 4}, {0, 2});
            for (uint32_t i = 0; i < 1500; i++) {
                wb_u64(&p, 0x20000000ull + ((uint64_t)h->round * 1500 + i) * 24);
                wb_u64(&p, 24);
                wb_u64(&p, 0x100);
                wb_u64(&p, 0);
            }
            emit(&h->t, MD_NODE, &p);
            h->round++;
        }
    } else if (h->kind == GH_METHODS) {
        static char name[GH_NAME_CHARS + 1];
        if (name[0] == '\0') {
            memset(name, 'M', GH_NAME_CHARS);
        }
        for (int e = 0; e < 2; e++) {
            uint64_t start = 0x7f0000000000ull + (uint64_t)h->round * 0x100;
            /* MethodID, ModuleID, start, size, token, flags */
            WB_PUT(&p, {start, 8}, {0x10, 8}, {start, 8}, {0x100, 4}, {0x06000001, 4}, {0, 4});
            wb_wstr(&p, "Hostile");
            wb_wstr(&p, name);
            wb_wstr(&p, "void  ()");
            wb_u16(&p, 0); /* ClrInstanceID */
            wb_u64(&p, 0); /* ReJITID */
            emit(&h->t, MD_METHOD, &p);
            h->round++;
        }
    } else {
        static char name[GH_NAME_CHARS + 1];
        if (name[0] == '\0') {
            memset(name, 'N', GH_NAME_CHARS);
        }
        for (int e = 0; e < 2; e++) {
            WB_PUT(&p, {1, 4}, {0, 2}, {0x100000ull + h->round, 8}, {0xAA, 8}, {1, 4}, {0, 4},
                   {0x12, 1});
            wb_wstr(&p, name);
            wb_u32(&p, 0);
            emit(&h->t, MD_TYPE, &p);
            h->round++;
        }
    }
    nt_block(&h->t, "EventBlock", false);
}

size_t gh_next(struct gh *h, uint8_t *buf, size_t cap)
{
    if (h->at == h->t.out.n) {
        /* Keep the offset's alignment (nt_block pads to the absolute offset mod 4). */
        h->t.out.n %= 4;
        h->at = h->t.out.n;
        gh_block(h);
    }
    size_t n = h->t.out.n - h->at;
    n = n < cap ? n : cap;
    memcpy(buf, h->t.out.b + h->at, n);
    h->at += n;
    return n;
}

void gh_free(struct gh *h)
{
    free(h->t.out.b);
    free(h->t.blk.b);
    memset(h, 0, sizeof(*h));
}
