/* SPDX-License-Identifier: MIT */
#include "ipc_codec.h"

#include <string.h>

#include "err.h"
#include "utf8.h"

/*
 * Framing per docs/ipc.md §3.1 and primitives per ipc.md §3.2. Values are assembled from bytes,
 * never by casting pointers, so unaligned input and any host byte order are fine.
 */

static const uint8_t ipc_magic[IPC_MAGIC_SIZE] = {'D', 'O', 'T', 'N', 'E', 'T', '_',
                                                  'I', 'P', 'C', '_', 'V', '1', '\0'};

_Static_assert(sizeof(IPC_MAGIC) == IPC_MAGIC_SIZE, "magic is 13 characters plus NUL");
_Static_assert(IPC_MAGIC_SIZE + 2 + 1 + 1 + 2 == IPC_HEADER_SIZE, "header layout is 20 bytes");

static void store16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void store32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void store64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static size_t clamp_cap(size_t cap)
{
    return cap > IPC_MESSAGE_MAX ? IPC_MESSAGE_MAX : cap;
}

int ipc_header_encode(uint8_t out[IPC_HEADER_SIZE], const struct ipc_header *h)
{
    if (h->size < IPC_HEADER_SIZE) {
        return AGENT_E_INVAL;
    }
    memcpy(out, ipc_magic, IPC_MAGIC_SIZE);
    store16(out + 14, h->size);
    out[16] = h->command_set;
    out[17] = h->command_id;
    out[18] = 0;
    out[19] = 0;
    return 0;
}

/*
 * Checks whatever complete header fields p[0..n) holds. Shared by the one-shot header decoder and
 * the incremental decoder, so both reject the same inputs, and a byte-at-a-time feed fails at the
 * first byte that makes the prefix impossible.
 */
static int check_header_prefix(const uint8_t *p, size_t n, size_t cap)
{
    size_t m = n < IPC_MAGIC_SIZE ? n : IPC_MAGIC_SIZE;
    if (m > 0 && memcmp(p, ipc_magic, m) != 0) {
        return AGENT_E_PROTO;
    }
    if (n >= 16) {
        uint16_t size = ipc_load_u16(p + 14);
        if (size < IPC_HEADER_SIZE) {
            return AGENT_E_PROTO;
        }
        if (size > cap) {
            return AGENT_E_TOOBIG;
        }
    }
    /* Reserved word: each byte is checked as soon as it is there. */
    if ((n > 18 && p[18] != 0) || (n > 19 && p[19] != 0)) {
        return AGENT_E_PROTO;
    }
    return 0;
}

int ipc_header_decode(const uint8_t *p, size_t n, size_t cap, struct ipc_header *out)
{
    if (cap < IPC_HEADER_SIZE) {
        return AGENT_E_INVAL;
    }
    if (n < IPC_HEADER_SIZE) {
        return AGENT_E_TRUNC;
    }
    int rc = check_header_prefix(p, IPC_HEADER_SIZE, clamp_cap(cap));
    if (rc != 0) {
        return rc;
    }
    out->size = ipc_load_u16(p + 14);
    out->command_set = p[16];
    out->command_id = p[17];
    return 0;
}

int ipc_decode(const uint8_t *p, size_t n, size_t cap, struct ipc_frame *frame, size_t *consumed)
{
    if (cap < IPC_HEADER_SIZE) {
        return AGENT_E_INVAL;
    }
    cap = clamp_cap(cap);
    int rc = check_header_prefix(p, n, cap);
    if (rc != 0) {
        return rc;
    }
    if (n < IPC_HEADER_SIZE) {
        return IPC_NEED_MORE;
    }
    struct ipc_header h;
    rc = ipc_header_decode(p, n, cap, &h);
    if (rc != 0) {
        return rc;
    }
    if (n < h.size) {
        return IPC_NEED_MORE;
    }
    frame->hdr = h;
    frame->payload = p + IPC_HEADER_SIZE;
    frame->payload_len = (size_t)h.size - IPC_HEADER_SIZE;
    *consumed = h.size;
    return IPC_FRAME;
}

/* ---- reader ------------------------------------------------------------------------------ */

static void rd_skip(struct ipc_rd *r, size_t n)
{
    r->i += n;
}

int ipc_rd_skip(struct ipc_rd *r, size_t len)
{
    if (ipc_rd_left(r) < len) {
        return AGENT_E_TRUNC;
    }
    rd_skip(r, len);
    return 0;
}

int ipc_rd_u8(struct ipc_rd *r, uint8_t *out)
{
    if (ipc_rd_left(r) < 1) {
        return AGENT_E_TRUNC;
    }
    *out = r->p[r->i];
    rd_skip(r, 1);
    return 0;
}

int ipc_rd_u16(struct ipc_rd *r, uint16_t *out)
{
    if (ipc_rd_left(r) < 2) {
        return AGENT_E_TRUNC;
    }
    *out = ipc_load_u16(r->p + r->i);
    rd_skip(r, 2);
    return 0;
}

int ipc_rd_u32(struct ipc_rd *r, uint32_t *out)
{
    if (ipc_rd_left(r) < 4) {
        return AGENT_E_TRUNC;
    }
    *out = ipc_load_u32(r->p + r->i);
    rd_skip(r, 4);
    return 0;
}

int ipc_rd_u64(struct ipc_rd *r, uint64_t *out)
{
    if (ipc_rd_left(r) < 8) {
        return AGENT_E_TRUNC;
    }
    *out = ipc_load_u64(r->p + r->i);
    rd_skip(r, 8);
    return 0;
}

int ipc_rd_guid(struct ipc_rd *r, uint8_t out[IPC_GUID_SIZE])
{
    if (ipc_rd_left(r) < IPC_GUID_SIZE) {
        return AGENT_E_TRUNC;
    }
    memcpy(out, r->p + r->i, IPC_GUID_SIZE);
    rd_skip(r, IPC_GUID_SIZE);
    return 0;
}

int ipc_rd_bytes(struct ipc_rd *r, size_t len, const uint8_t **out)
{
    if (ipc_rd_left(r) < len) {
        return AGENT_E_TRUNC;
    }
    *out = r->p + r->i;
    rd_skip(r, len);
    return 0;
}

int ipc_rd_string(struct ipc_rd *r, struct ipc_utf16 *out)
{
    if (ipc_rd_left(r) < 4) {
        return AGENT_E_TRUNC;
    }
    uint32_t count = ipc_load_u32(r->p + r->i);
    size_t left = ipc_rd_left(r) - 4;
    if (count == 0) {
        out->p = NULL;
        out->units = 0;
        out->present = false;
        rd_skip(r, 4);
        return 0;
    }
    /* Compare in units so a huge count cannot overflow the byte length. */
    if (count > left / 2) {
        return AGENT_E_TRUNC;
    }
    const uint8_t *units = r->p + r->i + 4;
    if (ipc_load_u16(units + 2 * ((size_t)count - 1)) != 0) {
        return AGENT_E_PROTO;
    }
    out->p = units;
    out->units = (size_t)count - 1;
    out->present = true;
    rd_skip(r, 4 + 2 * (size_t)count);
    return 0;
}

/* ---- UTF-16LE -> UTF-8 ------------------------------------------------------------------- */

/* The conversion is common/utf8's; these names are the IPC codec's API. */

size_t ipc_utf16le_utf8_len(const uint8_t *p, size_t units)
{
    return utf16le_utf8_len(p, units);
}

int ipc_utf16le_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len)
{
    return utf16le_to_utf8(p, units, out, cap, out_len);
}

size_t ipc_utf16_utf8_len(const struct ipc_utf16 *s)
{
    return s->present ? ipc_utf16le_utf8_len(s->p, s->units) : 0;
}

int ipc_utf16_to_utf8(const struct ipc_utf16 *s, char *out, size_t cap, size_t *out_len)
{
    if (s->present) {
        return ipc_utf16le_to_utf8(s->p, s->units, out, cap, out_len);
    }
    if (cap == 0) {
        return AGENT_E_NOSPACE;
    }
    out[0] = '\0';
    if (out_len != NULL) {
        *out_len = 0;
    }
    return 0;
}

/* ---- writer ------------------------------------------------------------------------------ */

static int wr_room(const struct ipc_wr *w, size_t n)
{
    return w->cap - w->len >= n ? 0 : AGENT_E_NOSPACE;
}

int ipc_wr_u8(struct ipc_wr *w, uint8_t v)
{
    if (wr_room(w, 1) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (w->p != NULL) {
        w->p[w->len] = v;
    }
    w->len++;
    return 0;
}

int ipc_wr_u16(struct ipc_wr *w, uint16_t v)
{
    if (wr_room(w, 2) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (w->p != NULL) {
        store16(w->p + w->len, v);
    }
    w->len += 2;
    return 0;
}

int ipc_wr_u32(struct ipc_wr *w, uint32_t v)
{
    if (wr_room(w, 4) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (w->p != NULL) {
        store32(w->p + w->len, v);
    }
    w->len += 4;
    return 0;
}

int ipc_wr_u64(struct ipc_wr *w, uint64_t v)
{
    if (wr_room(w, 8) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (w->p != NULL) {
        store64(w->p + w->len, v);
    }
    w->len += 8;
    return 0;
}

int ipc_wr_guid(struct ipc_wr *w, const uint8_t guid[IPC_GUID_SIZE])
{
    return ipc_wr_bytes(w, guid, IPC_GUID_SIZE);
}

int ipc_wr_bytes(struct ipc_wr *w, const void *p, size_t n)
{
    if (wr_room(w, n) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (n > 0 && w->p != NULL) {
        memcpy(w->p + w->len, p, n);
    }
    w->len += n;
    return 0;
}

int ipc_utf8_utf16_units(const char *s, size_t *units)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = 0;
    for (size_t i = 0; u[i] != 0;) {
        uint32_t cp;
        size_t len;
        if (!utf8_decode(u + i, SIZE_MAX, &cp, &len)) {
            return AGENT_E_INVAL;
        }
        i += len;
        n += cp >= 0x10000 ? 2 : 1;
    }
    *units = n;
    return 0;
}

int ipc_wr_string(struct ipc_wr *w, const char *utf8)
{
    if (utf8 == NULL) {
        return ipc_wr_u32(w, 0);
    }
    size_t units;
    if (ipc_utf8_utf16_units(utf8, &units) != 0) {
        return AGENT_E_INVAL;
    }
    /* The count includes the NUL and must fit the uint32 field (and any real message cap). */
    if (units >= UINT32_MAX / 2) {
        return AGENT_E_NOSPACE;
    }
    size_t bytes = 4 + 2 * (units + 1);
    if (wr_room(w, bytes) != 0) {
        return AGENT_E_NOSPACE;
    }
    if (w->p == NULL) {
        w->len += bytes;
        return 0;
    }
    uint8_t *o = w->p + w->len;
    store32(o, (uint32_t)(units + 1));
    o += 4;
    const unsigned char *u = (const unsigned char *)utf8;
    for (size_t i = 0; u[i] != 0;) {
        uint32_t cp = 0;
        size_t len = 1;
        (void)utf8_decode(u + i, SIZE_MAX, &cp, &len); /* validated above */
        i += len;
        o += utf16le_encode(o, cp);
    }
    store16(o, 0);
    w->len += bytes;
    return 0;
}

int ipc_wr_message_begin(struct ipc_wr *w, uint8_t command_set, uint8_t command_id, size_t *start)
{
    if (wr_room(w, IPC_HEADER_SIZE) != 0) {
        return AGENT_E_NOSPACE;
    }
    struct ipc_header h = {
        .size = IPC_HEADER_SIZE, .command_set = command_set, .command_id = command_id};
    if (w->p != NULL) {
        (void)ipc_header_encode(w->p + w->len, &h);
    }
    *start = w->len;
    w->len += IPC_HEADER_SIZE;
    return 0;
}

int ipc_wr_message_end(struct ipc_wr *w, size_t start)
{
    if (start > w->len || w->len - start < IPC_HEADER_SIZE) {
        return AGENT_E_INVAL;
    }
    size_t total = w->len - start;
    if (w->p == NULL) {
        return 0; /* measuring: the caller compares the size with the limit */
    }
    if (total > IPC_MESSAGE_MAX) {
        return AGENT_E_TOOBIG;
    }
    store16(w->p + start + 14, (uint16_t)total);
    return 0;
}
