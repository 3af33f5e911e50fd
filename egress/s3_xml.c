/* SPDX-License-Identifier: MIT */
#include "s3_xml.h"

#include <string.h>

#include "err.h"
#include "num.h"
#include "utf8.h"

/*
 * A scanner for the small, flat documents S3 answers with. It walks the whole document even after
 * the wanted element was found, so a truncated or mangled answer is an error rather than a
 * half-read success. The grammar is XML 1.0 minus DTDs: the documents S3 sends never carry one,
 * and refusing them keeps entity expansion out entirely.
 */

#define XML_MAX_DEPTH 32

struct span {
    const char *p;
    size_t n;
};

struct scan {
    const char *p, *end;
    const char *const *path; /* what to capture */
    size_t depth;            /* of path */
    struct buf *out;
    struct span stack[XML_MAX_DEPTH];
    size_t level;      /* open elements */
    size_t matched;    /* stack[0..matched) equal path[0..matched) */
    size_t capture_at; /* level of the captured element, 0: none */
    bool found;        /* the captured element was closed */
    bool root_seen;    /* the root element has been opened */
    bool root_closed;
    int err; /* a buf error while capturing */
};

static bool starts(const struct scan *s, const char *lit)
{
    size_t n = strlen(lit);
    return (size_t)(s->end - s->p) >= n && memcmp(s->p, lit, n) == 0;
}

static bool is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool name_char(unsigned char c, bool first)
{
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' || c == ':' || c >= 0x80) {
        return true;
    }
    return !first && ((c >= '0' && c <= '9') || c == '-' || c == '.');
}

static bool read_name(struct scan *s, struct span *out)
{
    const char *b = s->p;
    while (s->p < s->end && name_char((unsigned char)*s->p, s->p == b)) {
        s->p++;
    }
    out->p = b;
    out->n = (size_t)(s->p - b);
    return out->n > 0;
}

static void skip_space(struct scan *s)
{
    while (s->p < s->end && is_space(*s->p)) {
        s->p++;
    }
}

/* Skips past the first occurrence of lit; false if it never comes. */
static bool skip_past(struct scan *s, const char *lit)
{
    size_t n = strlen(lit);
    while ((size_t)(s->end - s->p) >= n) {
        if (memcmp(s->p, lit, n) == 0) {
            s->p += n;
            return true;
        }
        s->p++;
    }
    return false;
}

static bool capturing(const struct scan *s)
{
    return s->capture_at != 0 && !s->found;
}

static void emit(struct scan *s, const char *p, size_t n)
{
    if (capturing(s) && s->err == 0) {
        s->err = buf_append(s->out, p, n);
    }
}

static void emit_utf8(struct scan *s, uint32_t cp)
{
    uint8_t u[4];
    size_t n = utf8_encode(u, cp);
    emit(s, (const char *)u, n);
}

/* A character reference body ("#65" or "#x41", without & and ;). */
static bool char_ref(struct scan *s, const char *b, size_t n)
{
    bool hex = n > 1 && b[1] == 'x';
    size_t i = hex ? 2 : 1;
    if (i >= n || n - i > 8) {
        return false;
    }
    uint64_t v = 0;
    if (num_parse_u64(b + i, n - i, hex ? 16u : 10u, 0x10FFFF, &v) != 0) {
        return false;
    }
    uint32_t cp = (uint32_t)v;
    if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF)) {
        return false;
    }
    emit_utf8(s, cp);
    return true;
}

/* At '&': one entity or character reference. */
static bool reference(struct scan *s)
{
    static const struct {
        const char *name;
        char c;
    } ents[] = {{"lt", '<'}, {"gt", '>'}, {"amp", '&'}, {"quot", '"'}, {"apos", '\''}};
    const char *b = s->p + 1;
    const char *semi = memchr(b, ';', (size_t)(s->end - b) < 12 ? (size_t)(s->end - b) : 12);
    if (semi == NULL || semi == b) {
        return false;
    }
    size_t n = (size_t)(semi - b);
    s->p = semi + 1;
    if (b[0] == '#') {
        return char_ref(s, b, n);
    }
    for (size_t i = 0; i < sizeof(ents) / sizeof(ents[0]); i++) {
        if (strlen(ents[i].name) == n && memcmp(ents[i].name, b, n) == 0) {
            emit(s, &ents[i].c, 1);
            return true;
        }
    }
    return false;
}

/* Character data up to the next '<'. Outside the root only blanks are allowed. */
static bool text(struct scan *s)
{
    while (s->p < s->end && *s->p != '<') {
        if (s->level == 0 && !is_space(*s->p)) {
            return false;
        }
        if (*s->p == '&') {
            if (!reference(s)) {
                return false;
            }
            continue;
        }
        const char *b = s->p;
        while (s->p < s->end && *s->p != '<' && *s->p != '&') {
            if (s->level == 0 && !is_space(*s->p)) {
                return false;
            }
            s->p++;
        }
        emit(s, b, (size_t)(s->p - b));
    }
    return true;
}

/* Attribute list up to '>' or "/>". Values are checked, never captured. */
static bool attributes(struct scan *s)
{
    for (;;) {
        bool had_space = s->p < s->end && is_space(*s->p);
        skip_space(s);
        if (s->p >= s->end) {
            return false;
        }
        if (*s->p == '>' || *s->p == '/') {
            return true;
        }
        struct span name;
        if (!had_space || !read_name(s, &name)) {
            return false;
        }
        skip_space(s);
        if (s->p >= s->end || *s->p != '=') {
            return false;
        }
        s->p++;
        skip_space(s);
        if (s->p >= s->end || (*s->p != '"' && *s->p != '\'')) {
            return false;
        }
        char q = *s->p++;
        while (s->p < s->end && *s->p != q) {
            if (*s->p == '<') {
                return false;
            }
            if (*s->p == '&') {
                size_t saved = s->capture_at;
                s->capture_at = 0; /* attribute values are not element text */
                bool ok = reference(s);
                s->capture_at = saved;
                if (!ok) {
                    return false;
                }
                continue;
            }
            s->p++;
        }
        if (s->p >= s->end) {
            return false;
        }
        s->p++;
    }
}

static struct span local_name(struct span n)
{
    const char *colon = memchr(n.p, ':', n.n);
    if (colon != NULL) {
        n.n -= (size_t)(colon + 1 - n.p);
        n.p = colon + 1;
    }
    return n;
}

static bool span_is(struct span n, const char *lit)
{
    return strlen(lit) == n.n && memcmp(n.p, lit, n.n) == 0;
}

static void opened(struct scan *s, struct span name)
{
    size_t lvl = s->level; /* already incremented */
    if (s->matched == lvl - 1 && lvl <= s->depth && span_is(local_name(name), s->path[lvl - 1])) {
        s->matched = lvl;
        if (lvl == s->depth && s->capture_at == 0 && !s->found) {
            s->capture_at = lvl;
        }
    }
}

static void closed(struct scan *s)
{
    size_t lvl = s->level + 1; /* the level that was just closed */
    if (s->capture_at == lvl && !s->found) {
        s->found = true;
    }
    if (s->matched >= lvl) {
        s->matched = lvl - 1;
    }
}

/* At '<' of a start tag. */
static bool start_tag(struct scan *s)
{
    s->p++;
    struct span name;
    if (!read_name(s, &name) || !attributes(s)) {
        return false;
    }
    if (s->level == 0 && s->root_seen) {
        return false; /* a second root */
    }
    if (s->level >= XML_MAX_DEPTH) {
        return false;
    }
    s->root_seen = true;
    s->stack[s->level++] = name;
    opened(s, name);
    if (*s->p == '/') {
        if (s->p + 1 >= s->end || s->p[1] != '>') {
            return false;
        }
        s->p += 2;
        s->level--;
        closed(s);
        s->root_closed = s->level == 0;
        return true;
    }
    s->p++; /* '>' */
    return true;
}

/* At "</". */
static bool end_tag(struct scan *s)
{
    s->p += 2;
    struct span name;
    if (!read_name(s, &name)) {
        return false;
    }
    skip_space(s);
    if (s->p >= s->end || *s->p != '>' || s->level == 0) {
        return false;
    }
    struct span top = s->stack[s->level - 1];
    if (top.n != name.n || memcmp(top.p, name.p, name.n) != 0) {
        return false;
    }
    s->p++;
    s->level--;
    closed(s);
    s->root_closed = s->level == 0;
    return true;
}

/* At '<': markup of any kind. */
static bool markup(struct scan *s)
{
    if (starts(s, "<!--")) {
        s->p += 4;
        return skip_past(s, "-->");
    }
    if (starts(s, "<![CDATA[")) {
        if (s->level == 0) {
            return false;
        }
        s->p += 9;
        const char *b = s->p;
        if (!skip_past(s, "]]>")) {
            return false;
        }
        emit(s, b, (size_t)(s->p - 3 - b));
        return true;
    }
    if (starts(s, "<?")) {
        s->p += 2;
        return skip_past(s, "?>");
    }
    if (starts(s, "<!")) {
        return false; /* DOCTYPE and other declarations */
    }
    if (starts(s, "</")) {
        return end_tag(s);
    }
    if (s->root_closed) {
        return false;
    }
    return start_tag(s);
}

int s3_xml_find(const char *xml, size_t n, const char *const *path, size_t depth, struct buf *out)
{
    if (xml == NULL || path == NULL || depth == 0 || depth > XML_MAX_DEPTH) {
        return AGENT_E_INVAL;
    }
    struct scan s;
    memset(&s, 0, sizeof(s));
    s.p = xml;
    s.end = xml + n;
    s.path = path;
    s.depth = depth;
    s.out = out;
    if (starts(&s, "\xEF\xBB\xBF")) {
        s.p += 3;
    }
    size_t start = buf_size(out);
    bool ok = true;
    while (ok && s.p < s.end) {
        ok = *s.p == '<' ? markup(&s) : text(&s);
    }
    ok = ok && s.root_closed && s.level == 0;
    if (!ok || s.err != 0 || !s.found) {
        buf_truncate(out, start);
    }
    if (!ok) {
        return AGENT_E_PROTO;
    }
    if (s.err != 0) {
        return s.err;
    }
    return s.found ? 0 : AGENT_E_NOTFOUND;
}

int s3_xml_upload_id(const char *xml, size_t n, struct buf *out)
{
    static const char *const path[] = {"InitiateMultipartUploadResult", "UploadId"};
    size_t start = buf_size(out);
    int rc = s3_xml_find(xml, n, path, 2, out);
    if (rc == 0 && buf_size(out) == start) {
        return AGENT_E_PROTO;
    }
    return rc;
}

/* 0 when the document's root is named root (AGENT_E_NOTFOUND if not, AGENT_E_PROTO if bad). */
static int root_is(const char *xml, size_t n, const char *root)
{
    struct buf ignore;
    buf_init(&ignore, 1u << 20);
    const char *const path[] = {root};
    int rc = s3_xml_find(xml, n, path, 1, &ignore);
    buf_fini(&ignore);
    return rc;
}

int s3_xml_error(const char *xml, size_t n, struct buf *code, struct buf *message)
{
    static const char *const code_path[] = {"Error", "Code"};
    static const char *const msg_path[] = {"Error", "Message"};
    int rc = root_is(xml, n, "Error");
    if (rc != 0) {
        return rc;
    }
    rc = s3_xml_find(xml, n, code_path, 2, code);
    if (rc == 0 || rc == AGENT_E_NOTFOUND) {
        rc = s3_xml_find(xml, n, msg_path, 2, message);
    }
    return rc == AGENT_E_NOTFOUND ? 0 : rc;
}

int s3_xml_complete_result(const char *xml, size_t n, struct buf *etag, struct buf *code,
                           struct buf *message)
{
    static const char *const etag_path[] = {"CompleteMultipartUploadResult", "ETag"};
    int rc = root_is(xml, n, "CompleteMultipartUploadResult");
    if (rc == 0) {
        rc = s3_xml_find(xml, n, etag_path, 2, etag);
        return rc == AGENT_E_NOTFOUND ? 0 : rc;
    }
    if (rc != AGENT_E_NOTFOUND) {
        return rc;
    }
    rc = s3_xml_error(xml, n, code, message);
    if (rc == 0) {
        return AGENT_E_RUNTIME;
    }
    return rc == AGENT_E_NOTFOUND ? AGENT_E_PROTO : rc;
}

int s3_xml_escape(struct buf *out, const char *s)
{
    int rc = 0;
    for (const char *c = s; *c != '\0' && rc == 0; c++) {
        switch (*c) {
        case '&':
            rc = buf_append_str(out, "&amp;");
            break;
        case '<':
            rc = buf_append_str(out, "&lt;");
            break;
        case '>':
            rc = buf_append_str(out, "&gt;");
            break;
        default:
            rc = buf_append(out, c, 1);
            break;
        }
    }
    return rc;
}

int s3_xml_complete_body(const struct s3_part *parts, size_t n, struct buf *out)
{
    int rc = buf_append_str(out, "<CompleteMultipartUpload "
                                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
    for (size_t i = 0; i < n && rc == 0; i++) {
        rc = buf_printf(out, "<Part><PartNumber>%u</PartNumber><ETag>", (unsigned)parts[i].number);
        if (rc == 0) {
            rc = s3_xml_escape(out, parts[i].etag);
        }
        if (rc == 0) {
            rc = buf_append_str(out, "</ETag></Part>");
        }
    }
    if (rc == 0) {
        rc = buf_append_str(out, "</CompleteMultipartUpload>");
    }
    return rc;
}

bool s3_etag_valid(const char *v, size_t n)
{
    if (n == 0 || n >= sizeof(((struct s3_part *)0)->etag)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c < 32 || c > 126 || c == '<' || c == '>' || c == '&') {
            return false;
        }
    }
    return true;
}
