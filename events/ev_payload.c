/* SPDX-License-Identifier: MIT */
#include "ev_payload.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ev_rd.h"

/*
 * Field lists are parsed into a builder on the stack (fixed capacity: the caps of ev_payload.h),
 * then copied into one exact-sized allocation. Nodes are laid out so that the children of a node
 * are contiguous: a field list reserves its `count` slots before parsing any nested list, so the
 * nested ones land after. Sizes in the metadata are never trusted: a count is accepted only when
 * the bytes left could hold that many minimal entries, which also bounds the work per record.
 */

#define V1_FIELD_MIN 6  /* u32 type + an empty name (one NUL unit) */
#define V2_FIELD_MIN 10 /* u32 size + an empty name + u32 type */

struct builder {
    struct ev_field f[EV_SCHEMA_MAX_FIELDS];
    uint32_t name_off[EV_SCHEMA_MAX_FIELDS];
    uint16_t n;
    char names[EV_SCHEMA_MAX_NAMES];
    size_t names_len;
};

static bool scalar_code(uint32_t t)
{
    return t >= EV_TYPE_BOOLEAN && t <= EV_TYPE_STRING;
}

/* V6 scalars: the V5 ones and VarInt, VarUInt, UTF8CodeUnit, Boolean8. */
static bool v6_scalar_code(uint32_t t)
{
    return scalar_code(t) || t == EV_TYPE_VARINT || t == EV_TYPE_VARUINT ||
           t == EV_TYPE_UTF8_UNIT || t == EV_TYPE_BOOLEAN8;
}

/* The codes whose node has one child, the element type. */
static bool array_code(uint8_t t)
{
    return t == EV_TYPE_ARRAY || t == EV_TYPE_FIXED_ARRAY || t == EV_TYPE_RELLOC ||
           t == EV_TYPE_DATALOC;
}

/* Payload bytes of a fixed-size scalar (RelLoc/DataLoc: the u32); -1 for String and varints. */
static int32_t scalar_size(uint8_t code)
{
    static const int8_t sizes[EV_TYPE_BOOLEAN8 + 1] = {
        [EV_TYPE_BOOLEAN] = 4,   [EV_TYPE_CHAR] = 2,     [EV_TYPE_SBYTE] = 1,
        [EV_TYPE_BYTE] = 1,      [EV_TYPE_INT16] = 2,    [EV_TYPE_UINT16] = 2,
        [EV_TYPE_INT32] = 4,     [EV_TYPE_UINT32] = 4,   [EV_TYPE_INT64] = 8,
        [EV_TYPE_UINT64] = 8,    [EV_TYPE_SINGLE] = 4,   [EV_TYPE_DOUBLE] = 8,
        [EV_TYPE_DECIMAL] = 16,  [EV_TYPE_DATETIME] = 8, [EV_TYPE_GUID] = 16,
        [EV_TYPE_STRING] = -1,   [EV_TYPE_VARINT] = -1,  [EV_TYPE_VARUINT] = -1,
        [EV_TYPE_UTF8_UNIT] = 1, [EV_TYPE_RELLOC] = 4,   [EV_TYPE_DATALOC] = 4,
        [EV_TYPE_BOOLEAN8] = 1,
    };
    return code <= EV_TYPE_BOOLEAN8 ? sizes[code] : -1;
}

/* Appends a UTF-16LE name as NUL-terminated UTF-8; its offset goes to *off. */
static int add_name(struct builder *b, const uint8_t *s, size_t units, uint32_t *off)
{
    size_t len = ev_utf16_utf8_len(s, units);
    if (len + 1 > sizeof(b->names) - b->names_len) {
        return AGENT_E_TOOBIG;
    }
    if (ev_utf16_to_utf8(s, units, b->names + b->names_len, len + 1, NULL) != 0) {
        return AGENT_E_TOOBIG; /* not reached: the room was checked above */
    }
    *off = (uint32_t)b->names_len;
    b->names_len += len + 1;
    return 0;
}

static int read_name(struct builder *b, struct ev_rd *c, uint32_t *off)
{
    const uint8_t *s;
    size_t units;
    if (!ev_rd_utf16z(c, &s, &units)) {
        return AGENT_E_PROTO;
    }
    return add_name(b, s, units, off);
}

/* Reserves count contiguous child slots under parent. */
static int reserve(struct builder *b, uint16_t parent, uint32_t count, size_t left, size_t min)
{
    if (count > left / min) {
        return AGENT_E_PROTO; /* the payload cannot hold that many entries */
    }
    if (count > (uint32_t)(EV_SCHEMA_MAX_FIELDS - b->n)) {
        return AGENT_E_TOOBIG;
    }
    struct ev_field *pf = &b->f[parent];
    pf->child = b->n;
    pf->nchild = (uint16_t)count;
    for (uint32_t k = 0; k < count; k++) {
        struct ev_field *f = &b->f[b->n];
        memset(f, 0, sizeof(*f));
        f->parent = parent;
        f->depth = (uint8_t)(pf->depth + 1);
        f->in_array = pf->in_array || array_code(pf->code);
        b->name_off[b->n] = 0; /* "" (offset 0 holds an empty string) */
        b->n++;
    }
    return 0;
}

/* V1 list (nettrace.md §5.2): u32 type, [nested list if Object], name AFTER the nested fields. */
static int parse_v1(struct builder *b, struct ev_rd *c, uint16_t parent, uint32_t count)
{
    if (b->f[parent].depth >= EV_SCHEMA_MAX_DEPTH) {
        return AGENT_E_PROTO;
    }
    int rc = reserve(b, parent, count, ev_rd_left(c), V1_FIELD_MIN);
    if (rc < 0) {
        return rc;
    }
    uint16_t first = b->f[parent].child;
    for (uint32_t k = 0; k < count; k++) {
        uint16_t idx = (uint16_t)(first + k);
        uint32_t type;
        if (ev_rd_u32(c, &type) != 0 || (type != EV_TYPE_OBJECT && !scalar_code(type))) {
            return AGENT_E_PROTO;
        }
        b->f[idx].code = (uint8_t)type;
        if (type == EV_TYPE_OBJECT) {
            uint32_t nested;
            if (ev_rd_u32(c, &nested) != 0) {
                return AGENT_E_PROTO;
            }
            rc = parse_v1(b, c, idx, nested);
            if (rc < 0) {
                return rc;
            }
        }
        rc = read_name(b, c, &b->name_off[idx]);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int parse_v2_fields(struct builder *b, struct ev_rd *c, uint16_t parent, uint32_t count);

/* TypeV2 := u32 code, [Object: u32 count, count x FieldV2] | [Array: TypeV2 of the element]. */
static int parse_v2_type(struct builder *b, struct ev_rd *c, uint16_t idx)
{
    uint32_t type;
    if (b->f[idx].depth > EV_SCHEMA_MAX_DEPTH || ev_rd_u32(c, &type) != 0) {
        return AGENT_E_PROTO;
    }
    b->f[idx].code = (uint8_t)(type <= EV_TYPE_ARRAY ? type : 0);
    if (type == EV_TYPE_OBJECT) {
        uint32_t nested;
        if (ev_rd_u32(c, &nested) != 0) {
            return AGENT_E_PROTO;
        }
        return parse_v2_fields(b, c, idx, nested);
    }
    if (type == EV_TYPE_ARRAY) {
        int rc = reserve(b, idx, 1, 1, 1);
        return rc < 0 ? rc : parse_v2_type(b, c, b->f[idx].child);
    }
    return scalar_code(type) ? 0 : AGENT_E_PROTO;
}

/* FieldV2 := u32 size (counting itself), name, TypeV2, padding up to size. */
static int parse_v2_fields(struct builder *b, struct ev_rd *c, uint16_t parent, uint32_t count)
{
    if (b->f[parent].depth >= EV_SCHEMA_MAX_DEPTH) {
        return AGENT_E_PROTO;
    }
    int rc = reserve(b, parent, count, ev_rd_left(c), V2_FIELD_MIN);
    if (rc < 0) {
        return rc;
    }
    uint16_t first = b->f[parent].child;
    for (uint32_t k = 0; k < count; k++) {
        uint16_t idx = (uint16_t)(first + k);
        uint32_t size;
        if (ev_rd_u32(c, &size) != 0 || size < 4 || size - 4 > ev_rd_left(c)) {
            return AGENT_E_PROTO;
        }
        struct ev_rd w = {c->p, c->i + (size - 4), c->i, c->base};
        rc = read_name(b, &w, &b->name_off[idx]);
        if (rc == 0) {
            rc = parse_v2_type(b, &w, idx);
        }
        if (rc < 0) {
            return rc;
        }
        c->i += size - 4;
    }
    return 0;
}

/*
 * Fixed payload size of node idx and below, bottom-up; -1 when it varies. A FixedLengthArray of
 * fixed-size elements is fixed (one of zero elements too, whatever its element); one whose size
 * would pass EV_FIXED_MAX makes the schema invalid (*bad), as no payload could hold it. A node of
 * varying size always takes at least one payload byte, which bounds element-by-element decoding.
 */
#define EV_FIXED_MAX (64 * 1024 * 1024)

static int32_t compute_size(struct builder *b, uint16_t idx, bool *bad)
{
    struct ev_field *f = &b->f[idx];
    int32_t size = 0;
    if (f->code == EV_TYPE_ARRAY) {
        (void)compute_size(b, f->child, bad);
        size = -1;
    } else if (f->code == EV_TYPE_FIXED_ARRAY) {
        int32_t es = compute_size(b, f->child, bad);
        int64_t total = es < 0 ? -1 : (int64_t)es * f->fixed_count;
        if (total > EV_FIXED_MAX) {
            *bad = true;
        }
        size = f->fixed_count == 0 ? 0 : (total < 0 || total > EV_FIXED_MAX ? -1 : (int32_t)total);
    } else if (f->code == EV_TYPE_RELLOC || f->code == EV_TYPE_DATALOC) {
        if (compute_size(b, f->child, bad) <= 0) {
            *bad = true; /* the location's size must split into whole elements */
        }
        size = 4;
    } else if (f->code == EV_TYPE_OBJECT) {
        for (uint16_t k = 0; k < f->nchild; k++) {
            int32_t cs = compute_size(b, (uint16_t)(f->child + k), bad);
            /* At most 128 nodes of at most EV_FIXED_MAX bytes: capped below, no overflow. */
            size = (size < 0 || cs < 0) ? -1 : size + cs;
            if (size > EV_FIXED_MAX) {
                *bad = true;
                size = -1;
            }
        }
    } else {
        size = scalar_size(f->code);
    }
    f->size = size;
    return size;
}

/* The header of the record up to the field list; fills s and the builder's first names. */
struct md_head {
    uint32_t id;
    uint32_t event_id;
    uint64_t keywords;
    uint32_t version;
    uint32_t level;
    uint32_t provider; /* name offsets */
    uint32_t name;
};

static int parse_head(struct builder *b, struct ev_rd *c, struct md_head *h)
{
    if (ev_rd_u32(c, &h->id) != 0) {
        return AGENT_E_PROTO;
    }
    int rc = read_name(b, c, &h->provider);
    if (rc == 0 && ev_rd_u32(c, &h->event_id) != 0) {
        rc = AGENT_E_PROTO;
    }
    if (rc == 0) {
        rc = read_name(b, c, &h->name);
    }
    if (rc == 0 && (ev_rd_u64(c, &h->keywords) != 0 || ev_rd_u32(c, &h->version) != 0 ||
                    ev_rd_u32(c, &h->level) != 0)) {
        rc = AGENT_E_PROTO;
    }
    return rc;
}

/* The root's field list: V1, then the V5 tags (a V2Params tag replaces the V1 fields). */
static int parse_fields(struct builder *b, struct ev_rd *c, int *opcode, bool *v2)
{
    if (ev_rd_left(c) > 0) {
        uint32_t count;
        if (ev_rd_u32(c, &count) != 0) {
            return AGENT_E_PROTO;
        }
        int rc = parse_v1(b, c, 0, count);
        if (rc < 0) {
            return rc;
        }
    }
    size_t names_mark = b->names_len;
    while (ev_rd_left(c) > 0) {
        uint32_t len;
        uint8_t kind;
        if (ev_rd_u32(c, &len) != 0 || ev_rd_u8(c, &kind) != 0 || len > ev_rd_left(c)) {
            return AGENT_E_PROTO;
        }
        struct ev_rd t = {c->p, c->i + len, c->i, c->base};
        uint8_t op;
        if (kind == 1 && ev_rd_u8(&t, &op) != 0) {
            return AGENT_E_PROTO;
        }
        if (kind == 1) {
            *opcode = op;
        }
        if (kind == 2) {
            uint32_t count;
            if (ev_rd_u32(&t, &count) != 0) {
                return AGENT_E_PROTO;
            }
            b->n = 1; /* drop the V1 fields and their names */
            b->names_len = names_mark;
            int rc = parse_v2_fields(b, &t, 0, count);
            if (rc < 0) {
                return rc;
            }
            *v2 = true;
        }
        c->i += len;
    }
    return 0;
}

static struct builder *builder_new(void)
{
    struct builder *b = malloc(sizeof(*b));
    if (b == NULL) {
        return NULL;
    }
    memset(&b->f[0], 0, sizeof(b->f[0]));
    b->f[0].code = EV_TYPE_OBJECT;
    b->n = 1;
    b->names[0] = '\0'; /* offset 0: the empty name */
    b->names_len = 1;
    b->name_off[0] = 0;
    return b;
}

/* Sizes the tree and copies the builder into one exact-sized schema allocation. */
/* opcode: -1 when the metadata carried none. */
static int build_schema(struct builder *b, const struct md_head *h, int opcode, bool v2,
                        struct ev_schema **out)
{
    bool bad = false;
    (void)compute_size(b, 0, &bad);
    if (bad) {
        return AGENT_E_PROTO;
    }
    size_t fields_bytes = (size_t)b->n * sizeof(struct ev_field);
    struct ev_schema *s = malloc(sizeof(*s) + fields_bytes + b->names_len);
    if (s == NULL) {
        return -ENOMEM;
    }
    struct ev_field *fields = (struct ev_field *)(void *)(s + 1);
    char *names = (char *)fields + fields_bytes;
    memcpy(names, b->names, b->names_len);
    for (uint16_t k = 0; k < b->n; k++) {
        fields[k] = b->f[k];
        fields[k].name = names + b->name_off[k];
    }
    s->metadata_id = h->id;
    s->event_id = h->event_id;
    s->version = h->version;
    s->level = h->level;
    s->keywords = h->keywords & EV_KEYWORDS_MASK;
    s->opcode = opcode < 0 ? 0 : (uint8_t)opcode;
    s->has_opcode = opcode >= 0;
    s->v2 = v2;
    s->provider = names + h->provider;
    s->event_name = names + h->name;
    s->nfields = b->n;
    s->fields = fields;
    *out = s;
    return 0;
}

int ev_schema_parse(const uint8_t *p, size_t n, struct ev_schema **out)
{
    struct builder *b = builder_new();
    if (b == NULL) {
        return -ENOMEM;
    }
    struct ev_rd c;
    ev_rd_init(&c, p, n);
    struct md_head h;
    int opcode = -1;
    bool v2 = false;
    int rc = parse_head(b, &c, &h);
    if (rc == 0) {
        rc = parse_fields(b, &c, &opcode, &v2);
    }
    if (rc == 0) {
        rc = build_schema(b, &h, opcode, v2, out);
    }
    free(b);
    return rc;
}

/* ---- NetTrace V6 metadata rows (docs/nettrace.md §7) ------------------------ */

#define V6_FIELD_MIN 4 /* u16 fieldSize + an empty name (one length byte) + a type code */

/* Appends a V6 (UTF-8, length-prefixed) name; a NUL byte inside would cut it, so it is refused. */
static int read_name_v6(struct builder *b, struct ev_rd *c, uint32_t *off)
{
    const uint8_t *s;
    size_t len;
    if (ev_rd_utf8(c, &s, &len) != 0 || memchr(s, 0, len) != NULL) {
        return AGENT_E_PROTO;
    }
    if (len + 1 > sizeof(b->names) - b->names_len) {
        return AGENT_E_TOOBIG;
    }
    memcpy(b->names + b->names_len, s, len);
    b->names[b->names_len + len] = '\0';
    *off = (uint32_t)b->names_len;
    b->names_len += len + 1;
    return 0;
}

static int parse_v6_fields(struct builder *b, struct ev_rd *c, uint16_t parent);

/* Type := u8 code, [element Type if 19/22/24/25], [u16 count if 22], [FieldDescriptions if 1]. */
static int parse_v6_type(struct builder *b, struct ev_rd *c, uint16_t idx)
{
    uint8_t code;
    if (b->f[idx].depth > EV_SCHEMA_MAX_DEPTH || ev_rd_u8(c, &code) != 0) {
        return AGENT_E_PROTO;
    }
    b->f[idx].code = code;
    if (code == EV_TYPE_OBJECT) {
        return parse_v6_fields(b, c, idx);
    }
    if (array_code(code)) {
        int rc = reserve(b, idx, 1, 1, 1);
        if (rc == 0) {
            rc = parse_v6_type(b, c, b->f[idx].child);
        }
        if (rc == 0 && code == EV_TYPE_FIXED_ARRAY && ev_rd_u16(c, &b->f[idx].fixed_count) != 0) {
            rc = AGENT_E_PROTO;
        }
        return rc;
    }
    return v6_scalar_code(code) ? 0 : AGENT_E_PROTO;
}

/* FieldDescriptions := u16 count, count x (u16 fieldSize, name, Type, ignored tail). */
static int parse_v6_fields(struct builder *b, struct ev_rd *c, uint16_t parent)
{
    uint16_t count;
    if (b->f[parent].depth >= EV_SCHEMA_MAX_DEPTH || ev_rd_u16(c, &count) != 0) {
        return AGENT_E_PROTO;
    }
    int rc = reserve(b, parent, count, ev_rd_left(c), V6_FIELD_MIN);
    if (rc < 0) {
        return rc;
    }
    uint16_t first = b->f[parent].child;
    for (uint32_t k = 0; k < count; k++) {
        uint16_t idx = (uint16_t)(first + k);
        uint16_t size;
        if (ev_rd_u16(c, &size) != 0 || size > ev_rd_left(c)) {
            return AGENT_E_PROTO;
        }
        struct ev_rd w = {c->p, c->i + size, c->i, c->base};
        rc = read_name_v6(b, &w, &b->name_off[idx]);
        if (rc == 0) {
            rc = parse_v6_type(b, &w, idx);
        }
        if (rc < 0) {
            return rc;
        }
        c->i += size;
    }
    return 0;
}

/* One OptionalMetadata entry; false when it does not parse inside its window. */
static bool parse_v6_option(struct ev_rd *t, struct md_head *h, int *opcode)
{
    uint8_t kind;
    uint8_t u8 = 0;
    const uint8_t *s;
    size_t len;
    if (ev_rd_u8(t, &kind) != 0) {
        return false;
    }
    switch (kind) {
    case 1: /* OpCode */
        if (ev_rd_u8(t, &u8) != 0) {
            return false;
        }
        *opcode = u8;
        return true;
    case 3: /* Keywords */
        return ev_rd_u64(t, &h->keywords) == 0;
    case 4: /* MessageTemplate */
    case 5: /* Description */
        return ev_rd_utf8(t, &s, &len) == 0;
    case 6: /* KeyValue */
        return ev_rd_utf8(t, &s, &len) == 0 && ev_rd_utf8(t, &s, &len) == 0;
    case 7: /* ProviderGuid */
        return ev_rd_skip(t, 16) == 0;
    case 8: /* Level */
    case 9: /* Version */
        if (ev_rd_u8(t, &u8) != 0) {
            return false;
        }
        *(kind == 8 ? &h->level : &h->version) = u8;
        return true;
    default:
        return false; /* an unknown kind has no length: it ends the walk (caller) */
    }
}

static int parse_v6_optional(struct ev_rd *c, struct md_head *h, int *opcode)
{
    uint16_t size;
    if (ev_rd_left(c) == 0) {
        return 0;
    }
    if (ev_rd_u16(c, &size) != 0 || size > ev_rd_left(c)) {
        return AGENT_E_PROTO;
    }
    struct ev_rd t = {c->p, c->i + size, c->i, c->base};
    while (ev_rd_left(&t) > 0) {
        uint8_t kind = t.p[t.i];
        if (!parse_v6_option(&t, h, opcode)) {
            /* Known kinds must fit; after an unknown one the rest cannot be read. */
            if (kind >= 1 && kind <= 9 && kind != 2) {
                return AGENT_E_PROTO;
            }
            break;
        }
    }
    c->i += size;
    return 0;
}

int ev_schema_parse_v6(const uint8_t *row, size_t n, struct ev_schema **out)
{
    struct builder *b = builder_new();
    if (b == NULL) {
        return -ENOMEM;
    }
    struct ev_rd c;
    ev_rd_init(&c, row, n);
    struct md_head h;
    memset(&h, 0, sizeof(h));
    int opcode = -1;
    uint64_t v = 0;
    int rc = ev_rd_varuint(&c, 32, &v) == 0 ? 0 : AGENT_E_PROTO;
    h.id = (uint32_t)v;
    if (rc == 0) {
        rc = read_name_v6(b, &c, &h.provider);
    }
    if (rc == 0 && ev_rd_varuint(&c, 32, &v) != 0) {
        rc = AGENT_E_PROTO;
    }
    h.event_id = (uint32_t)v;
    if (rc == 0) {
        rc = read_name_v6(b, &c, &h.name);
    }
    if (rc == 0) {
        rc = parse_v6_fields(b, &c, 0);
    }
    if (rc == 0) {
        rc = parse_v6_optional(&c, &h, &opcode);
    }
    if (rc == 0) {
        rc = build_schema(b, &h, opcode, true, out);
    }
    free(b);
    return rc;
}

void ev_schema_free(struct ev_schema *s)
{
    free(s);
}

/* The child of node parent named name[0..len), looking through unnamed Objects. */
static int find_child(const struct ev_schema *s, uint16_t parent, const char *name, size_t len)
{
    const struct ev_field *pf = &s->fields[parent];
    if (pf->code != EV_TYPE_OBJECT) {
        return AGENT_E_NOTFOUND;
    }
    for (uint16_t k = 0; k < pf->nchild; k++) {
        uint16_t idx = (uint16_t)(pf->child + k);
        const struct ev_field *f = &s->fields[idx];
        if (strncmp(f->name, name, len) == 0 && f->name[len] == '\0') {
            return idx;
        }
        if (f->name[0] == '\0' && f->code == EV_TYPE_OBJECT) {
            int r = find_child(s, idx, name, len);
            if (r >= 0) {
                return r;
            }
        }
    }
    return AGENT_E_NOTFOUND;
}

int ev_schema_find(const struct ev_schema *s, const char *path)
{
    int idx = 0;
    const char *p = path;
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot != NULL ? (size_t)(dot - p) : strlen(p);
        if (len == 0) {
            return AGENT_E_NOTFOUND;
        }
        idx = find_child(s, (uint16_t)idx, p, len);
        if (idx < 0 || dot == NULL) {
            return idx;
        }
        p = dot + 1;
    }
}

/* ---- payloads ---------------------------------------------------------------------------- */

/*
 * RelLoc/DataLoc (V6): a u32 at the cursor locating size bytes of whole elements elsewhere in the
 * payload (RelLoc from the byte after the u32, DataLoc from the payload start, which is c->p).
 */
static int decode_loc(const struct ev_schema *s, const struct ev_field *f, struct ev_rd *c,
                      struct ev_value *out)
{
    uint32_t loc;
    if (ev_rd_u32(c, &loc) != 0) {
        return AGENT_E_PROTO;
    }
    size_t size = loc >> 16;
    size_t at = (loc & 0xFFFFu) + (f->code == EV_TYPE_RELLOC ? c->i : 0);
    uint32_t esize = (uint32_t)s->fields[f->child].size; /* > 0: checked by the schema */
    if (at > c->n || size > c->n - at || size % esize != 0) {
        return AGENT_E_PROTO;
    }
    *out = (struct ev_value){c->p + at, (uint32_t)size, (uint32_t)(size / esize)};
    return 0;
}

static int decode_node(struct ev_record *rec, const struct ev_schema *s, uint16_t idx,
                       struct ev_rd *c);

/* The elements of an array node: skipped by arithmetic when of fixed size, else one by one. */
static int decode_elements(const struct ev_schema *s, const struct ev_field *f, uint32_t n,
                           struct ev_rd *c)
{
    const struct ev_field *e = &s->fields[f->child];
    if (e->size >= 0) {
        return ev_rd_skip(c, (size_t)n * (size_t)e->size) != 0 ? AGENT_E_PROTO : 0;
    }
    for (uint32_t k = 0; k < n; k++) {
        int rc = decode_node(NULL, s, f->child, c);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/*
 * Decodes (rec != NULL) or skips (array elements) node idx at the cursor. Recursion is bounded by
 * the schema's depth. Arrays of fixed-size elements are skipped by arithmetic; others element by
 * element, each element consuming at least 1 byte (a NUL, a count, a varint byte), so the work is
 * bounded by the payload size times the depth.
 */
static int decode_node(struct ev_record *rec, const struct ev_schema *s, uint16_t idx,
                       struct ev_rd *c)
{
    const struct ev_field *f = &s->fields[idx];
    size_t start = c->i;
    uint32_t count = 0;
    int rc = 0;
    uint64_t v;
    if (f->code == EV_TYPE_OBJECT) {
        for (uint16_t k = 0; k < f->nchild && rc == 0; k++) {
            rc = decode_node(rec, s, (uint16_t)(f->child + k), c);
        }
    } else if (f->code == EV_TYPE_STRING) {
        const uint8_t *str;
        size_t units;
        if (!ev_rd_utf16z(c, &str, &units)) {
            return AGENT_E_PROTO;
        }
        count = (uint32_t)units;
        if (rec != NULL) {
            rec->v[idx] = (struct ev_value){str, (uint32_t)(units * 2), count};
        }
        return 0;
    } else if (f->code == EV_TYPE_ARRAY) {
        uint16_t n;
        if (ev_rd_u16(c, &n) != 0) {
            return AGENT_E_PROTO;
        }
        count = n;
        start = c->i;
        rc = decode_elements(s, f, n, c);
    } else if (f->code == EV_TYPE_FIXED_ARRAY) {
        count = f->fixed_count;
        rc = decode_elements(s, f, count, c);
    } else if (f->code == EV_TYPE_RELLOC || f->code == EV_TYPE_DATALOC) {
        struct ev_value loc;
        rc = decode_loc(s, f, c, &loc);
        if (rc == 0 && rec != NULL) {
            rec->v[idx] = loc;
        }
        return rc;
    } else if (f->code == EV_TYPE_VARINT || f->code == EV_TYPE_VARUINT) {
        rc = ev_rd_varuint(c, 64, &v) != 0 ? AGENT_E_PROTO : 0;
    } else if (f->size < 0 || ev_rd_skip(c, (size_t)f->size) != 0) {
        return AGENT_E_PROTO;
    }
    if (rc == 0 && rec != NULL) {
        rec->v[idx] = (struct ev_value){c->p + start, (uint32_t)(c->i - start), count};
    }
    return rc;
}

int ev_record_decode(struct ev_record *rec, const struct ev_schema *s, const uint8_t *p, size_t n)
{
    if (n > UINT32_MAX) {
        return AGENT_E_PROTO;
    }
    static const uint8_t empty[1];
    struct ev_rd c;
    ev_rd_init(&c, p != NULL ? p : empty, p != NULL ? n : 0);
    rec->schema = s;
    /* Nodes inside arrays keep p == NULL; everything else is written below. */
    for (uint16_t k = 0; k < s->nfields; k++) {
        rec->v[k].p = NULL;
    }
    return decode_node(rec, s, 0, &c);
}

static const struct ev_value *value_at(const struct ev_record *rec, int idx, uint8_t *code)
{
    if (rec->schema == NULL || idx < 0 || idx >= rec->schema->nfields || rec->v[idx].p == NULL) {
        return NULL;
    }
    *code = rec->schema->fields[idx].code;
    return &rec->v[idx];
}

/* A varint the decoder already checked (at most 10 bytes, in range). */
static uint64_t load_varuint(const struct ev_value *v)
{
    uint64_t value = 0;
    for (uint32_t k = 0; k < v->len && k < 10; k++) {
        value |= (uint64_t)(v->p[k] & 0x7F) << (7 * k);
    }
    return value;
}

/*
 * Integer-like scalars, sign-extended; false for other codes. UInt64 and VarUInt are returned as
 * raw bits.
 */
static bool load_int(const struct ev_value *v, uint8_t code, int64_t *out)
{
    const uint8_t *p = v->p;
    uint64_t u;
    switch (code) {
    case EV_TYPE_VARINT:
        u = load_varuint(v);
        *out = (int64_t)(u >> 1) ^ -(int64_t)(u & 1); /* zig-zag */
        return true;
    case EV_TYPE_VARUINT:
        *out = (int64_t)load_varuint(v);
        return true;
    case EV_TYPE_BOOLEAN:
    case EV_TYPE_INT32:
        *out = (int32_t)ev_load_u32(p);
        return true;
    case EV_TYPE_UINT32:
        *out = ev_load_u32(p);
        return true;
    case EV_TYPE_CHAR:
    case EV_TYPE_UINT16:
        *out = ev_load_u16(p);
        return true;
    case EV_TYPE_INT16:
        *out = (int16_t)ev_load_u16(p);
        return true;
    case EV_TYPE_SBYTE:
        *out = p[0] >= 0x80 ? (int64_t)p[0] - 256 : (int64_t)p[0];
        return true;
    case EV_TYPE_BYTE:
    case EV_TYPE_BOOLEAN8:
    case EV_TYPE_UTF8_UNIT:
        *out = p[0];
        return true;
    case EV_TYPE_INT64:
    case EV_TYPE_UINT64:
    case EV_TYPE_DATETIME:
        *out = (int64_t)ev_load_u64(p);
        return true;
    default:
        return false;
    }
}

int ev_record_f64(const struct ev_record *rec, int idx, double *out)
{
    uint8_t code;
    const struct ev_value *v = value_at(rec, idx, &code);
    if (v == NULL) {
        return AGENT_E_NOTFOUND;
    }
    int64_t i;
    if (code == EV_TYPE_DOUBLE) {
        uint64_t bits = ev_load_u64(v->p);
        memcpy(out, &bits, sizeof(*out));
    } else if (code == EV_TYPE_SINGLE) {
        uint32_t bits = ev_load_u32(v->p);
        float f;
        memcpy(&f, &bits, sizeof(f));
        *out = (double)f;
    } else if (code == EV_TYPE_UINT64) {
        *out = (double)ev_load_u64(v->p);
    } else if (code == EV_TYPE_VARUINT) {
        *out = (double)load_varuint(v);
    } else if (code != EV_TYPE_DATETIME && load_int(v, code, &i)) {
        *out = (double)i;
    } else {
        return AGENT_E_INVAL;
    }
    return 0;
}

int ev_record_i64(const struct ev_record *rec, int idx, int64_t *out)
{
    uint8_t code;
    const struct ev_value *v = value_at(rec, idx, &code);
    int64_t i;
    if (v == NULL) {
        return AGENT_E_NOTFOUND;
    }
    if (!load_int(v, code, &i)) {
        return AGENT_E_INVAL;
    }
    if ((code == EV_TYPE_UINT64 || code == EV_TYPE_VARUINT) && i < 0) {
        return AGENT_E_TOOBIG;
    }
    *out = i;
    return 0;
}

/* An array (any of the four kinds) of UTF8CodeUnit: a V6 UTF-8 string, copied as is. */
static bool utf8_array(const struct ev_record *rec, int idx, uint8_t code)
{
    return array_code(code) &&
           rec->schema->fields[rec->schema->fields[idx].child].code == EV_TYPE_UTF8_UNIT;
}

int ev_record_str(const struct ev_record *rec, int idx, char *out, size_t cap, size_t *out_len)
{
    uint8_t code;
    const struct ev_value *v = value_at(rec, idx, &code);
    if (v == NULL) {
        return AGENT_E_NOTFOUND;
    }
    if (utf8_array(rec, idx, code)) {
        if (cap < (size_t)v->len + 1) {
            return AGENT_E_NOSPACE;
        }
        memcpy(out, v->p, v->len);
        out[v->len] = '\0';
        if (out_len != NULL) {
            *out_len = v->len;
        }
        return 0;
    }
    if (code != EV_TYPE_STRING) {
        return AGENT_E_INVAL;
    }
    return ev_utf16_to_utf8(v->p, v->count, out, cap, out_len);
}

size_t ev_record_str_len(const struct ev_record *rec, int idx)
{
    uint8_t code;
    const struct ev_value *v = value_at(rec, idx, &code);
    if (v != NULL && utf8_array(rec, idx, code)) {
        return v->len;
    }
    return v != NULL && code == EV_TYPE_STRING ? ev_utf16_utf8_len(v->p, v->count) : 0;
}

int ev_record_path_f64(const struct ev_record *rec, const char *path, double *out)
{
    int idx = ev_schema_find(rec->schema, path);
    return idx < 0 ? idx : ev_record_f64(rec, idx, out);
}

int ev_record_path_i64(const struct ev_record *rec, const char *path, int64_t *out)
{
    int idx = ev_schema_find(rec->schema, path);
    return idx < 0 ? idx : ev_record_i64(rec, idx, out);
}

int ev_record_path_str(const struct ev_record *rec, const char *path, char *out, size_t cap)
{
    int idx = ev_schema_find(rec->schema, path);
    return idx < 0 ? idx : ev_record_str(rec, idx, out, cap, NULL);
}
