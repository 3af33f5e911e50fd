/* SPDX-License-Identifier: MIT */
#ifndef AGENT_IPC_CODEC_H
#define AGENT_IPC_CODEC_H

/*
 * Pure codec for the .NET diagnostic IPC framing (docs/ipc.md §3): the 20-byte header, an
 * incremental frame decoder, a bounds-checked cursor reader, a capacity-checked writer and the
 * UTF-16LE <-> UTF-8 conversions the protocol's strings need.
 *
 * No libuv, no I/O, no globals and no allocation: every decoded string is a view into the
 * caller's bytes, converted into a caller buffer on request. Errors are the negative AGENT_E_*
 * codes of common/err.h:
 *   AGENT_E_TRUNC   input ends inside a field (reader) or header (header decoder)
 *   AGENT_E_PROTO   bytes that violate the protocol (magic, reserved, size < 20, string NUL)
 *   AGENT_E_TOOBIG  a size field over the caller's cap
 *   AGENT_E_NOSPACE an output buffer (writer, UTF-8 conversion) is too small
 *   AGENT_E_INVAL   a caller argument that cannot be encoded (bad UTF-8, header size < 20)
 * Out-params are written only on success; readers and writers advance only on success.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define IPC_MAGIC         "DOTNET_IPC_V1" /* plus its NUL: 14 bytes on the wire */
#define IPC_MAGIC_SIZE    14
#define IPC_HEADER_SIZE   20
#define IPC_MESSAGE_MAX   65535u /* the size field is a uint16 */
#define IPC_GUID_SIZE     16
#define IPC_GUID_STR_SIZE 37 /* 36 characters + NUL */

/* Header fields other than the magic and the (always zero) reserved word. */
struct ipc_header {
    uint16_t size; /* total message length, header included */
    uint8_t command_set;
    uint8_t command_id;
};

/* One decoded message. payload is a view into the bytes given to ipc_decode. */
struct ipc_frame {
    struct ipc_header hdr;
    const uint8_t *payload;
    size_t payload_len; /* hdr.size - IPC_HEADER_SIZE */
};

enum ipc_decode_status {
    IPC_NEED_MORE = 0, /* a prefix of a valid message: feed more bytes */
    IPC_FRAME = 1      /* *frame and *consumed are set */
};

/* Writes the 20-byte header (magic, size, set, id, reserved 0). AGENT_E_INVAL if size < 20. */
int ipc_header_encode(uint8_t out[IPC_HEADER_SIZE], const struct ipc_header *h);

/*
 * Validates and decodes a header from the first IPC_HEADER_SIZE bytes of p: magic, reserved == 0,
 * 20 <= size <= cap (cap is clamped to IPC_MESSAGE_MAX). AGENT_E_TRUNC if n < 20.
 */
int ipc_header_decode(const uint8_t *p, size_t n, size_t cap, struct ipc_header *out);

/*
 * Incremental decoder. Looks at p[0..n) and returns:
 *   IPC_NEED_MORE  the bytes are a valid prefix of a message (each field is checked as soon as it
 *                  is complete, so garbage is rejected before 20 bytes have arrived);
 *   IPC_FRAME      a whole message is there: *frame points into p and *consumed = hdr.size
 *                  (bytes after it are left for the caller, e.g. a continuation);
 *   < 0            AGENT_E_PROTO (magic, reserved, size < 20) or AGENT_E_TOOBIG (size > cap),
 *                  AGENT_E_INVAL for cap < 20.
 * cap is the largest total message accepted; it is clamped to IPC_MESSAGE_MAX.
 */
int ipc_decode(const uint8_t *p, size_t n, size_t cap, struct ipc_frame *frame, size_t *consumed);

/* ---- cursor reader ---------------------------------------------------------------------- */

/*
 * A bounds-checked read cursor over p[0..n), shared by the IPC codec and the nettrace reader.
 * base is the absolute offset of p[0] in a longer stream (0 when there is none), for messages.
 */
struct ipc_rd {
    const uint8_t *p;
    size_t n;      /* end of the input */
    size_t i;      /* bytes consumed: the next read is at p + i */
    uint64_t base; /* stream offset of p[0] */
};

/* A wire string as a view: `units` UTF-16LE code units at p (the terminating NUL excluded). */
struct ipc_utf16 {
    const uint8_t *p;
    size_t units;
    bool present; /* false for the count-0 "absent/null" encoding */
};

static inline void ipc_rd_init(struct ipc_rd *r, const uint8_t *p, size_t n)
{
    r->p = p;
    r->n = n;
    r->i = 0;
    r->base = 0;
}

/* Bytes left to read. */
static inline size_t ipc_rd_left(const struct ipc_rd *r)
{
    return r->n - r->i;
}

/* Stream offset of the next byte (base + i). */
static inline uint64_t ipc_rd_offset(const struct ipc_rd *r)
{
    return r->base + r->i;
}

/* Little-endian loads and stores, byte by byte: unaligned input and any host order are fine. */
static inline uint16_t ipc_load_u16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static inline uint32_t ipc_load_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline uint64_t ipc_load_u64(const uint8_t *p)
{
    return (uint64_t)ipc_load_u32(p) | ((uint64_t)ipc_load_u32(p + 4) << 32);
}

int ipc_rd_u8(struct ipc_rd *r, uint8_t *out);
int ipc_rd_u16(struct ipc_rd *r, uint16_t *out);
int ipc_rd_u32(struct ipc_rd *r, uint32_t *out);
int ipc_rd_u64(struct ipc_rd *r, uint64_t *out);
int ipc_rd_guid(struct ipc_rd *r, uint8_t out[IPC_GUID_SIZE]);
/* A view of the next len bytes. */
int ipc_rd_bytes(struct ipc_rd *r, size_t len, const uint8_t **out);
/* Steps over len bytes. */
int ipc_rd_skip(struct ipc_rd *r, size_t len);
/*
 * string (ipc.md §3.2): uint32 count of UTF-16 units including the NUL, then the units; the last
 * must be 0. Count 0 = absent. AGENT_E_TRUNC if the count runs past the input, AGENT_E_PROTO if the
 * last unit is not NUL.
 */
int ipc_rd_string(struct ipc_rd *r, struct ipc_utf16 *out);

/* ---- UTF-16LE -> UTF-8 ------------------------------------------------------------------- */

/*
 * Bytes the UTF-8 form of `units` UTF-16LE units takes, without the NUL. Surrogate pairs become
 * one 4-byte sequence; lone surrogates and embedded U+0000 become U+FFFD (3 bytes) so the result
 * is always valid UTF-8 and a C string of the advertised length. Never more than 3 * units.
 */
size_t ipc_utf16le_utf8_len(const uint8_t *p, size_t units);
/*
 * Converts into out (NUL-terminated). cap must be at least the length above + 1, else
 * AGENT_E_NOSPACE and nothing is written. *out_len (may be NULL) gets the length without NUL.
 */
int ipc_utf16le_to_utf8(const uint8_t *p, size_t units, char *out, size_t cap, size_t *out_len);
/* The same for a string view; an absent string converts to "". */
size_t ipc_utf16_utf8_len(const struct ipc_utf16 *s);
int ipc_utf16_to_utf8(const struct ipc_utf16 *s, char *out, size_t cap, size_t *out_len);

/* ---- writer ------------------------------------------------------------------------------ */

struct ipc_wr {
    uint8_t *p;
    size_t cap;
    size_t len; /* bytes written so far */
};

/*
 * p == NULL makes a measuring writer: every call checks the capacity and advances len as if it
 * wrote, but nothing is stored, and ipc_wr_message_end does not apply the IPC_MESSAGE_MAX limit,
 * so a builder run on it leaves len at the exact size of the message it would write.
 */
static inline void ipc_wr_init(struct ipc_wr *w, uint8_t *p, size_t cap)
{
    w->p = p;
    w->cap = cap;
    w->len = 0;
}

int ipc_wr_u8(struct ipc_wr *w, uint8_t v);
int ipc_wr_u16(struct ipc_wr *w, uint16_t v);
int ipc_wr_u32(struct ipc_wr *w, uint32_t v);
int ipc_wr_u64(struct ipc_wr *w, uint64_t v);
int ipc_wr_guid(struct ipc_wr *w, const uint8_t guid[IPC_GUID_SIZE]);
int ipc_wr_bytes(struct ipc_wr *w, const void *p, size_t n);
/*
 * Encodes a UTF-8 C string as a wire string (count incl. NUL, UTF-16LE units, NUL). NULL encodes
 * the absent string (count 0); "" encodes count 1 + NUL, as the official client does.
 * AGENT_E_INVAL for malformed UTF-8 (overlong, surrogates, > U+10FFFF, truncated).
 */
int ipc_wr_string(struct ipc_wr *w, const char *utf8);
/* UTF-16 units (without NUL) that ipc_wr_string would write for s; AGENT_E_INVAL if malformed. */
int ipc_utf8_utf16_units(const char *s, size_t *units);

/*
 * Message framing for builders: begin reserves a header at the current position and remembers
 * where (*start); end fills it in with the final size. AGENT_E_TOOBIG if the message is over
 * IPC_MESSAGE_MAX.
 */
int ipc_wr_message_begin(struct ipc_wr *w, uint8_t command_set, uint8_t command_id, size_t *start);
int ipc_wr_message_end(struct ipc_wr *w, size_t start);

#endif
