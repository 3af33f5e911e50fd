/* SPDX-License-Identifier: MIT */
/*
 * Table-driven settings: a struct rules_field row says where a setting goes and how it is
 * checked; rules__read_fields converts every row of a section as the .NET binder would and
 * reports what dotnet-monitor's DataAnnotations would report ("The X field is required.",
 * "The field X must be between A and B.") or the binder's conversion failure.
 */
#include "rules.h"

#include <string.h>

#include "ascii.h"
#include "rules_internal.h"

const struct rules_range rules__range_window = {
    .min = RULES_TICKS_PER_SECOND,
    .max = 86400 * RULES_TICKS_PER_SECOND,
    .text_min = "00:00:01",
    .text_max = "1.00:00:00",
};

const struct rules_range rules__range_duration = {
    .min = RULES_TICKS_PER_SECOND,
    .max = 86400 * RULES_TICKS_PER_SECOND,
    .text_min = "00:00:01",
    .text_max = "1.00:00:00",
};

static const char *const type_names[] = {
    [RULES_F_DOUBLE] = "System.Double",
    [RULES_F_INT] = "System.Int32",
    [RULES_F_BOOL] = "System.Boolean",
    [RULES_F_SPAN] = "System.TimeSpan",
};

/* Converts v for row f into *val (a double, an int64 or a bool); false on a conversion failure. */
static bool convert(const struct rules_field *f, const char *v, double *d, int64_t *i, bool *b)
{
    int32_t i32 = 0;
    switch (f->kind) {
    case RULES_F_DOUBLE:
        return rules__parse_double(v, d) == 0;
    case RULES_F_INT:
        if (rules__parse_int32(v, &i32) != 0) {
            return false;
        }
        *i = i32;
        return true;
    case RULES_F_BOOL:
        return rules__parse_bool(v, b) == 0;
    case RULES_F_SPAN:
        return rules_timespan_parse(v, i) == 0;
    case RULES_F_ENUM:
        *i = rules__enum_index(v, f->en->names, f->en->n);
        return *i >= 0;
    default:
        return false;
    }
}

static bool in_range(const struct rules_field *f, double d, int64_t i)
{
    const struct rules_range *r = f->range;
    if (r == NULL) {
        return true;
    }
    if (f->kind == RULES_F_DOUBLE) {
        return d >= r->dmin && d <= r->dmax;
    }
    return i >= r->min && i <= r->max;
}

static void store(const struct rules_field *f, void *obj, double d, int64_t i, bool b)
{
    unsigned char *base = obj;
    switch (f->kind) {
    case RULES_F_DOUBLE:
        memcpy(base + f->off, &d, sizeof(d));
        break;
    case RULES_F_INT: {
        int32_t v = (int32_t)i;
        memcpy(base + f->off, &v, sizeof(v));
        break;
    }
    case RULES_F_BOOL:
        memcpy(base + f->off, &b, sizeof(b));
        break;
    case RULES_F_SPAN:
        memcpy(base + f->off, &i, sizeof(i));
        break;
    default: {
        int v = (int)i;
        memcpy(base + f->off, &v, sizeof(v));
        break;
    }
    }
    if (f->has_off != RULES_NO_OFF) {
        bool set = true;
        memcpy(base + f->has_off, &set, sizeof(set));
    }
}

/* Strings and string lists: stored as they are (pointers into the configuration). */
static size_t read_text(struct rules_ctx *c, const char *key, const struct rules_field *f,
                        void *obj)
{
    unsigned char *base = obj;
    if (f->kind == RULES_F_LIST) {
        size_t n;
        const char **list = rules__string_list(c, key, &n);
        if (n == 0) {
            if (f->required) {
                rules__error(c, key, "The %s field is required.", f->name);
            }
            return f->required;
        }
        memcpy(base + f->off, &list, sizeof(list));
        memcpy(base + f->list_count_off, &n, sizeof(n));
    } else {
        const char *v = rules__get(c, key);
        if (v == NULL || *v == '\0') {
            if (f->required) {
                rules__error(c, key, "The %s field is required.", f->name);
            }
            return f->required;
        }
        memcpy(base + f->off, &v, sizeof(v));
    }
    if (f->has_off != RULES_NO_OFF) {
        bool set = true;
        memcpy(base + f->has_off, &set, sizeof(set));
    }
    return 0;
}

static size_t read_field(struct rules_ctx *c, const char *section, const struct rules_field *f,
                         void *obj)
{
    const char *key = rules__key(c, section, f->name);
    if (f->kind == RULES_F_STR || f->kind == RULES_F_LIST) {
        return read_text(c, key, f, obj);
    }
    const char *v = rules__get(c, key);
    if (v == NULL || *v == '\0') {
        if (f->required) {
            rules__error(c, key, "The %s field is required.", f->name);
        }
        return f->required;
    }
    double d = 0;
    int64_t i = 0;
    bool b = false;
    if (!convert(f, v, &d, &i, &b)) {
        rules__bad_value(c, key, v,
                         f->kind == RULES_F_ENUM ? f->en->type_name : type_names[f->kind]);
        return 1;
    }
    if (!in_range(f, d, i)) {
        rules__error(c, key, "The field %s must be between %s and %s.", f->name, f->range->text_min,
                     f->range->text_max);
        return 1;
    }
    store(f, obj, d, i, b);
    return 0;
}

void rules__bad_value(struct rules_ctx *c, const char *key, const char *v, const char *type)
{
    rules__error(c, key, "Failed to convert configuration value '%s' to type '%s'.", v, type);
}

void *rules__array(struct rules_ctx *c, size_t n, size_t size)
{
    void *v = rules__arena_alloc(c->arena, n * size);
    c->oom |= v == NULL;
    return v;
}

const char *rules__required(struct rules_ctx *c, const char *section, const char *name)
{
    const char *key = rules__key(c, section, name);
    const char *v = rules__get(c, key);
    if (v == NULL || *v == '\0') {
        rules__error(c, key, "The %s field is required.", name);
        return NULL;
    }
    return v;
}

size_t rules__read_fields(struct rules_ctx *c, const char *section, const struct rules_field *f,
                          size_t n, void *obj)
{
    size_t errors = 0;
    for (size_t k = 0; k < n; k++) {
        errors += read_field(c, section, &f[k], obj);
    }
    return errors;
}

const void *rules__find_row(const void *rows, size_t n, size_t stride, const char *name)
{
    const unsigned char *p = rows;
    for (size_t k = 0; k < n; k++, p += stride) {
        const struct rules_type_row *row = (const void *)p;
        if (ascii_ieq(name, row->name)) {
            return row;
        }
    }
    return NULL;
}
