/* SPDX-License-Identifier: MIT */
#include "egress.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/ascii.h"
#include "common/buf.h"
#include "common/err.h"
#include "egress_internal.h"

/*
 * Configuration of the egress providers (dotnet-monitor's Egress section, docs/api.md §10)
 * and the dispatch of an upload to its store. Keys look like
 *
 *   Egress:<Type>:<name>:<Setting>     a provider's setting (Type FileSystem or S3Storage)
 *   Egress:Properties:<key>            a value that a *Name setting refers to (a secret)
 *
 * and are compared without regard to ASCII case, as .NET's configuration does. Parsing makes two
 * passes: the first collects Egress:Properties (so a *Name setting may come before the property
 * it names), the second creates the providers and hands each setting to its store.
 */

#define EGRESS_NAME_MAX 255 /* NAME_MAX of Linux file systems; S3 keys take 1024 */

struct egress_set {
    struct egress_provider *v;
    size_t n;
};

/* The configuration sections of the provider types dotmon implements. */
static const struct {
    const char *section;
    enum egress_type type;
} types[] = {
    {"FileSystem", EGRESS_FILESYSTEM},
    {"S3Storage", EGRESS_S3},
};

/*
 * Settings that name an Egress:Properties key instead of holding the secret. dotnet-monitor
 * documents these for AzureBlobStorage only (accountKeyName, sharedAccessSignatureName,
 * queueSharedAccessSignatureName); dotmon has no AzureBlobStorage and offers the same
 * indirection for S3's two secrets.
 */
static const struct {
    enum egress_type type;
    const char *setting; /* as configured */
    const char *target;  /* what the store receives */
} name_refs[] = {
    {EGRESS_S3, "SecretAccessKeyName", "SecretAccessKey"},
    {EGRESS_S3, "SessionTokenName", "SessionToken"},
};

/* An Egress:Properties entry: views into the caller's entries. */
struct prop {
    const char *key; /* after "Egress:Properties:" */
    const char *value;
};

struct parse {
    const struct egress_kv *e;
    size_t n;
    struct prop *props;
    size_t nprops;
    struct egress_set *set;
    struct buf *errors;
    int rc; /* 0, AGENT_E_INVAL once a problem was reported, or UV_ENOMEM */
};

/* A key split into its sections: Egress:<type>:<name>:<setting>. Lengths exclude the ':'. */
struct key_parts {
    const char *type;
    size_t type_len;
    const char *name; /* NULL when the key stops before it */
    size_t name_len;
    const char *setting; /* the rest after the name, NULL when absent */
};

/* ---- small helpers ----------------------------------------------------------------------- */

/* a[0..an) and b[0..bn) are equal but for ASCII case. */
static bool ieq_n(const char *a, size_t an, const char *b, size_t bn)
{
    if (an != bn) {
        return false;
    }
    for (size_t i = 0; i < an; i++) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) {
            return false;
        }
    }
    return true;
}

/* key is "Egress" or lies under it. */
static bool under_egress(const char *key)
{
    return key != NULL && ascii_ieq_n(key, 6, "Egress") && (key[6] == '\0' || key[6] == ':');
}

/* Splits a key under Egress (checked before) into its sections. */
static void split_key(const char *key, struct key_parts *kp)
{
    memset(kp, 0, sizeof(*kp));
    if (key[6] == '\0') {
        kp->type = key + 6;
        return;
    }
    kp->type = key + 7;
    const char *c = strchr(kp->type, ':');
    kp->type_len = c != NULL ? (size_t)(c - kp->type) : strlen(kp->type);
    if (c == NULL) {
        return;
    }
    kp->name = c + 1;
    c = strchr(kp->name, ':');
    kp->name_len = c != NULL ? (size_t)(c - kp->name) : strlen(kp->name);
    if (c != NULL) {
        kp->setting = c + 1;
    }
}

/* Appends "<key>: <what>\n" and marks the parse failed (keeps an earlier UV_ENOMEM). */
__attribute__((format(printf, 3, 4))) static void problem(struct parse *ps, const char *key,
                                                          const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = buf_printf(ps->errors, "%s: ", key);
    if (rc == 0) {
        rc = buf_vprintf(ps->errors, fmt, ap);
    }
    if (rc == 0) {
        rc = buf_append_str(ps->errors, "\n");
    }
    va_end(ap);
    if (rc != 0) {
        ps->rc = UV_ENOMEM;
    } else if (ps->rc == 0) {
        ps->rc = AGENT_E_INVAL;
    }
}

/* Some entry before i has the same first `len` characters of its key, ending a section there:
 * a problem with that prefix was reported already. */
static bool seen_before(const struct parse *ps, size_t i, size_t len)
{
    const char *key = ps->e[i].key;
    for (size_t j = 0; j < i; j++) {
        const char *k = ps->e[j].key;
        if (k != NULL && strlen(k) >= len && (k[len] == '\0' || k[len] == ':') &&
            ieq_n(k, len, key, len)) {
            return true;
        }
    }
    return false;
}

static const struct prop *find_prop(const struct parse *ps, const char *key)
{
    /* The last one wins, as a later configuration source overrides an earlier one. */
    for (size_t i = ps->nprops; i > 0; i--) {
        if (ascii_ieq(ps->props[i - 1].key, key)) {
            return &ps->props[i - 1];
        }
    }
    return NULL;
}

static struct egress_provider *find_provider(struct egress_set *s, const char *name, size_t len)
{
    for (size_t i = 0; i < s->n; i++) {
        if (ieq_n(s->v[i].name, strlen(s->v[i].name), name, len)) {
            return &s->v[i];
        }
    }
    return NULL;
}

static struct egress_provider *add_provider(struct parse *ps, enum egress_type type,
                                            const char *name, size_t len)
{
    struct egress_set *s = ps->set;
    struct egress_provider *v = realloc(s->v, (s->n + 1) * sizeof(*v));
    if (v == NULL) {
        ps->rc = UV_ENOMEM;
        return NULL;
    }
    s->v = v;
    struct egress_provider *p = &v[s->n];
    memset(p, 0, sizeof(*p));
    p->name = strndup(name, len);
    if (p->name == NULL) {
        ps->rc = UV_ENOMEM;
        return NULL;
    }
    p->type = type;
    s->n++;
    return p;
}

/* ---- the two passes ---------------------------------------------------------------------- */

/* Pass 1: every Egress:Properties:<key> (an empty key with a value is a problem). */
static void collect_props(struct parse *ps)
{
    for (size_t i = 0; i < ps->n && ps->rc != UV_ENOMEM; i++) {
        if (!under_egress(ps->e[i].key)) {
            continue;
        }
        struct key_parts kp;
        split_key(ps->e[i].key, &kp);
        if (!ieq_n(kp.type, kp.type_len, "Properties", 10)) {
            continue;
        }
        const char *value = ps->e[i].value != NULL ? ps->e[i].value : "";
        if (kp.name == NULL || kp.name[0] == '\0') {
            if (value[0] != '\0') {
                problem(ps, ps->e[i].key, "%s", "expected Egress:Properties:<key>");
            }
            continue;
        }
        ps->props[ps->nprops].key = kp.name; /* the whole rest: a property key may hold ':' */
        ps->props[ps->nprops].value = value;
        ps->nprops++;
    }
}

/* The provider entry i belongs to, created on first sight; NULL (reported or skipped) when the
 * key names no implemented type or the name is taken by another type. */
static struct egress_provider *provider_of(struct parse *ps, size_t i, const struct key_parts *kp)
{
    const char *key = ps->e[i].key;
    size_t t = 0;
    while (t < sizeof(types) / sizeof(types[0]) &&
           !ieq_n(kp->type, kp->type_len, types[t].section, strlen(types[t].section))) {
        t++;
    }
    size_t type_end = (size_t)(kp->type - key) + kp->type_len;
    if (t == sizeof(types) / sizeof(types[0])) {
        if (seen_before(ps, i, type_end)) {
            return NULL;
        }
        if (ieq_n(kp->type, kp->type_len, "AzureBlobStorage", 16)) {
            problem(ps, key, "%s",
                    "egress to AzureBlobStorage is not implemented by dotmon (FileSystem and "
                    "S3Storage are)");
        } else {
            problem(ps, key,
                    "unknown egress provider type '%.*s' (dotmon has FileSystem and "
                    "S3Storage)",
                    (int)(kp->type_len > 64 ? 64 : kp->type_len), kp->type);
        }
        return NULL;
    }
    struct egress_provider *p = find_provider(ps->set, kp->name, kp->name_len);
    if (p == NULL) {
        return add_provider(ps, types[t].type, kp->name, kp->name_len);
    }
    if (p->type != types[t].type) {
        if (!seen_before(ps, i, type_end + 1 + kp->name_len)) {
            problem(ps, key, "the name is taken by a %s provider; names are unique across types",
                    p->type == EGRESS_FILESYSTEM ? "FileSystem" : "S3Storage");
        }
        return NULL;
    }
    return p;
}

/* Another entry of the same provider sets `setting` directly (case-insensitive). */
static bool provider_has(const struct parse *ps, const struct key_parts *kp, const char *setting)
{
    for (size_t j = 0; j < ps->n; j++) {
        if (!under_egress(ps->e[j].key) || ps->e[j].value == NULL || ps->e[j].value[0] == '\0') {
            continue;
        }
        struct key_parts o;
        split_key(ps->e[j].key, &o);
        if (o.setting != NULL && ieq_n(o.type, o.type_len, kp->type, kp->type_len) &&
            ieq_n(o.name, o.name_len, kp->name, kp->name_len) && ascii_ieq(o.setting, setting)) {
            return true;
        }
    }
    return false;
}

/* Replaces a *Name setting by its target and the property's value; false when reported (or not
 * set: an empty *Name is no reference). */
static bool resolve_ref(struct parse *ps, size_t i, const struct egress_provider *p,
                        const struct key_parts *kp, const char **setting, const char **value)
{
    for (size_t r = 0; r < sizeof(name_refs) / sizeof(name_refs[0]); r++) {
        if (name_refs[r].type != p->type || !ascii_ieq(*setting, name_refs[r].setting)) {
            continue;
        }
        if ((*value)[0] == '\0') {
            return false;
        }
        if (provider_has(ps, kp, name_refs[r].target)) {
            problem(ps, ps->e[i].key, "%s is set too; set one of the two", name_refs[r].target);
            return false;
        }
        const struct prop *prop = find_prop(ps, *value);
        if (prop == NULL) {
            /* The value is a property's name, not a secret. */
            problem(ps, ps->e[i].key, "no Egress:Properties:%.100s", *value);
            return false;
        }
        *setting = name_refs[r].target;
        *value = prop->value;
        return true;
    }
    return true;
}

/* Pass 2: every Egress:<Type>:<name>:<Setting> to its provider's store. */
static void apply_settings(struct parse *ps)
{
    for (size_t i = 0; i < ps->n && ps->rc != UV_ENOMEM; i++) {
        const char *key = ps->e[i].key;
        if (!under_egress(key)) {
            continue;
        }
        struct key_parts kp;
        split_key(key, &kp);
        if (ieq_n(kp.type, kp.type_len, "Properties", 10)) {
            continue;
        }
        const char *value = ps->e[i].value != NULL ? ps->e[i].value : "";
        if (kp.type_len == 0 || kp.name_len == 0 || kp.setting == NULL || kp.setting[0] == '\0') {
            /* A section header (an empty value) is no setting; anything else is misplaced. */
            if (value[0] != '\0') {
                problem(ps, key, "%s", "expected Egress:<Type>:<name>:<Setting>");
            }
            continue;
        }
        struct egress_provider *p = provider_of(ps, i, &kp);
        if (p == NULL) {
            continue;
        }
        const char *setting = kp.setting;
        if (!resolve_ref(ps, i, p, &kp, &setting, &value)) {
            continue;
        }
        int rc = p->type == EGRESS_FILESYSTEM
                     ? egress_fs_set(&p->u.fs, key, setting, value, ps->errors)
                     : egress_s3_set(&p->u.s3, key, setting, value, ps->errors);
        if (rc == UV_ENOMEM || (rc != 0 && ps->rc == 0)) {
            ps->rc = rc;
        }
    }
}

int egress_set_parse(const struct egress_kv *entries, size_t n, struct egress_set **out,
                     struct buf *errors)
{
    struct parse ps = {.e = entries, .n = n, .errors = errors};
    ps.set = calloc(1, sizeof(*ps.set));
    ps.props = calloc(n > 0 ? n : 1, sizeof(*ps.props));
    if (ps.set == NULL || ps.props == NULL) {
        ps.rc = UV_ENOMEM;
        goto out;
    }
    collect_props(&ps);
    apply_settings(&ps);
    for (size_t i = 0; i < ps.set->n && ps.rc != UV_ENOMEM; i++) {
        struct egress_provider *p = &ps.set->v[i];
        int rc = p->type == EGRESS_FILESYSTEM ? egress_fs_check(&p->u.fs, p->name, errors)
                                              : egress_s3_check(&p->u.s3, p->name, errors);
        if (rc == UV_ENOMEM || (rc != 0 && ps.rc == 0)) {
            ps.rc = rc;
        }
    }
out:
    free(ps.props);
    if (ps.rc != 0) {
        egress_set_free(ps.set);
        return ps.rc;
    }
    *out = ps.set;
    return 0;
}

void egress_set_free(struct egress_set *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i].type == EGRESS_FILESYSTEM) {
            egress_fs_options_fini(&s->v[i].u.fs);
        } else {
            egress_s3_options_fini(&s->v[i].u.s3);
        }
        free(s->v[i].name);
    }
    free(s->v);
    free(s);
}

size_t egress_set_count(const struct egress_set *s)
{
    return s != NULL ? s->n : 0;
}

const struct egress_provider *egress_set_at(const struct egress_set *s, size_t i)
{
    return s != NULL && i < s->n ? &s->v[i] : NULL;
}

int egress_set_names(const struct egress_set *s, const char ***names, size_t *n)
{
    size_t count = egress_set_count(s);
    const char **v = calloc(count + 1, sizeof(*v));
    *names = v;
    *n = v != NULL ? count : 0;
    if (v == NULL) {
        return UV_ENOMEM;
    }
    for (size_t i = 0; i < count; i++) {
        v[i] = s->v[i].name;
    }
    return 0;
}

const struct egress_provider *egress_find(const struct egress_set *s, const char *name)
{
    if (s == NULL || name == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < s->n; i++) {
        if (ascii_ieq(s->v[i].name, name)) {
            return &s->v[i];
        }
    }
    return NULL;
}

enum egress_type egress_provider_type(const struct egress_provider *p)
{
    return p->type;
}

const char *egress_provider_name(const struct egress_provider *p)
{
    return p->name;
}

/* ---- uploads ----------------------------------------------------------------------------- */

/* A name that stays one file in one folder: not empty, ".", "..", no '/', not too long. */
static bool artifact_name_ok(const char *name)
{
    if (name == NULL || name[0] == '\0' || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return false;
    }
    return strchr(name, '/') == NULL && strlen(name) <= EGRESS_NAME_MAX;
}

int egress_open(uv_loop_t *loop, const struct egress_provider *p, const struct egress_request *rq,
                struct egress_target **out)
{
    if (loop == NULL || p == NULL || rq == NULL || rq->on_done == NULL || out == NULL ||
        !artifact_name_ok(rq->artifact_name)) {
        return AGENT_E_INVAL;
    }
    if (p->type == EGRESS_FILESYSTEM) {
        return egress_fs_open(loop, &p->u.fs, rq, out);
    }
    return egress_s3_open(loop, &p->u.s3, rq, out);
}

int egress_write(struct egress_target *t, void *base, const uint8_t *data, size_t n)
{
    return t->ops->write(t, base, data, n);
}

bool egress_full(const struct egress_target *t)
{
    return t->ops->full(t);
}

void egress_finish(struct egress_target *t)
{
    t->ops->finish(t);
}

void egress_abort(struct egress_target *t)
{
    t->ops->abort(t);
}

uint64_t egress_bytes(const struct egress_target *t)
{
    return t->ops->bytes(t);
}

/* ---- the log's view of a location ---- */

int egress_location_for_log(const char *location, struct buf *out)
{
    static const char *const secret[] = {"X-Amz-Signature", "X-Amz-Security-Token"};
    const char *q = strchr(location, '?');
    if (q == NULL) {
        return buf_append_str(out, location);
    }
    int rc = buf_append(out, location, (size_t)(q - location));
    /* Each parameter: name[=value], up to the next '&' (or '#' / the end). */
    for (const char *p = q; rc == 0 && (*p == '?' || *p == '&');) {
        const char *name = p + 1;
        size_t len = strcspn(name, "&#");
        size_t nlen = strcspn(name, "=&#");
        bool hide = false;
        for (size_t k = 0; k < sizeof(secret) / sizeof(secret[0]); k++) {
            hide |= nlen == strlen(secret[k]) && ascii_ieq_n(name, nlen, secret[k]);
        }
        rc = buf_append(out, p, 1 + (hide && nlen < len ? nlen + 1 : len));
        if (rc == 0 && hide && nlen < len) {
            rc = buf_append_str(out, "REDACTED");
        }
        p = name + len;
        if (rc == 0 && *p == '#') {
            rc = buf_append_str(out, p);
            break;
        }
    }
    return rc;
}
