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

/* Payload bytes of a fixed-size scalar; -1 for String. */
static int32_t scalar_size(uint8_t code)
{
    static const int8_t sizes[EV_TYPE_STRING + 1] = {
        [EV_TYPE_BOOLEAN] = 4,  [EV_TYPE_CHAR] = 2,     [EV_TYPE_SBYTE] = 1,  [EV_TYPE_BYTE] = 1,
        [EV_TYPE_INT16] = 2,    [EV_TYPE_UINT16] = 2,   [EV_TYPE_INT32] = 4,  [EV_TYPE_UINT32] = 4,
        [EV_TYPE_INT64] = 8,    [EV_TYPE_UINT64] = 8,   [EV_TYPE_SINGLE] = 4, [EV_TYPE_DOUBLE] = 8,
        [EV_TYPE_DECIMAL] = 16, [EV_TYPE_DATETIME] = 8, [EV_TYPE_GUID] = 16,  [EV_TYPE_STRING] = -1,
    };
    return code <= EV_TYPE_STRING ? sizes[code] : -1;
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
        f->in_array = pf->in_array || pf->code == EV_TYPE_ARRAY;
        b->name_off[b->n] = 0; /* "" (offset 0 holds an empty string) */
        b->n++;
    }
    return 0;
}

/* V1 list (EVENTS.md §1.2): u32 type, [nested list if Object], name AFTER the nested fields. */
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

/* Fixed payload size of node idx and below, bottom-up; -1 when it varies. */
static int32_t compute_size(struct builder *b, uint16_t idx)
{
    struct ev_field *f = &b->f[idx];
    int32_t size = 0;
    if (f->code == EV_TYPE_ARRAY) {
        (void)compute_size(b, f->child);
        size = -1;
    } else if (f->code == EV_TYPE_OBJECT) {
        for (uint16_t k = 0; k < f->nchild; k++) {
            int32_t cs = compute_size(b, (uint16_t)(f->child + k));
            /* At most 128 nodes of at most 16 bytes: no overflow. */
            size = (size < 0 || cs < 0) ? -1 : size + cs;
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
static int parse_fields(struct builder *b, struct ev_rd *c, uint8_t *opcode, bool *v2)
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
        if (kind == 1 && ev_rd_u8(&t, opcode) != 0) {
            return AGENT_E_PROTO;
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

int ev_schema_parse(const uint8_t *p, size_t n, struct ev_schema **out)
{
    struct builder *b = malloc(sizeof(*b));
    struct ev_schema *s = NULL;
    int rc = 0;
    if (b == NULL) {
        return -ENOMEM;
    }
    memset(&b->f[0], 0, sizeof(b->f[0]));
    b->f[0].code = EV_TYPE_OBJECT;
    b->n = 1;
    b->names[0] = '\0'; /* offset 0: the empty name */
    b->names_len = 1;
    b->name_off[0] = 0;

    struct ev_rd c;
    ev_rd_init(&c, p, n);
    struct md_head h;
    uint8_t opcode = 0;
    bool v2 = false;
    rc = parse_head(b, &c, &h);
    if (rc == 0) {
        rc = parse_fields(b, &c, &opcode, &v2);
    }
    if (rc < 0) {
        goto out;
    }
    (void)compute_size(b, 0);

    size_t fields_bytes = (size_t)b->n * sizeof(struct ev_field);
    s = malloc(sizeof(*s) + fields_bytes + b->names_len);
    if (s == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    struct ev_field *fields = (struct ev_field *)(void *)(s + 1);
    char *names = (char *)fields + fields_bytes;
    memcpy(names, b->names, b->names_len);
    for (uint16_t k = 0; k < b->n; k++) {
        fields[k] = b->f[k];
        fields[k].name = names + b->name_off[k];
    }
    s->metadata_id = h.id;
    s->event_id = h.event_id;
    s->version = h.version;
    s->level = h.level;
    s->keywords = h.keywords & EV_KEYWORDS_MASK;
    s->opcode = opcode;
    s->v2 = v2;
    s->provider = names + h.provider;
    s->event_name = names + h.name;
    s->nfields = b->n;
    s->fields = fields;
    *out = s;
out:
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
 * Decodes (rec != NULL) or skips (array elements) node idx at the cursor. Recursion is bounded by
 * the schema's depth. Arrays of fixed-size elements are skipped by arithmetic; others element by
 * element, each element consuming at least 2 bytes (a NUL or a count), so the work is bounded by
 * the payload size.
 */
static int decode_node(struct ev_record *rec, const struct ev_schema *s, uint16_t idx,
                       struct ev_rd *c)
{
    const struct ev_field *f = &s->fields[idx];
    size_t start = c->i;
    uint32_t count = 0;
    if (f->code == EV_TYPE_OBJECT) {
        for (uint16_t k = 0; k < f->nchild; k++) {
            int rc = decode_node(rec, s, (uint16_t)(f->child + k), c);
            if (rc < 0) {
                return rc;
            }
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
        const struct ev_field *e = &s->fields[f->child];
        if (e->size >= 0) {
            if (ev_rd_skip(c, (size_t)n * (size_t)e->size) != 0) {
                return AGENT_E_PROTO;
            }
        } else {
            for (uint32_t k = 0; k < n; k++) {
                int rc = decode_node(NULL, s, f->child, c);
                if (rc < 0) {
                    return rc;
                }
            }
        }
    } else if (f->size < 0 || ev_rd_skip(c, (size_t)f->size) != 0) {
        return AGENT_E_PROTO;
    }
    if (rec != NULL) {
        rec->v[idx] = (struct ev_value){c->p + start, (uint32_t)(c->i - start), count};
    }
    return 0;
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

/* Integer-like scalars, sign-extended; false for other codes. uint64 is returned as raw bits. */
static bool load_int(const struct ev_value *v, uint8_t code, int64_t *out)
{
    const uint8_t *p = v->p;
    switch (code) {
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
    if (code == EV_TYPE_UINT64 && i < 0) {
        return AGENT_E_TOOBIG;
    }
    *out = i;
    return 0;
}

int ev_record_str(const struct ev_record *rec, int idx, char *out, size_t cap, size_t *out_len)
{
    uint8_t code;
    const struct ev_value *v = value_at(rec, idx, &code);
    if (v == NULL) {
        return AGENT_E_NOTFOUND;
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
