/* SPDX-License-Identifier: MIT */
#include "bad_http_corpus.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "hex.h"

/* A record may expand (through %repeat) to at most this many bytes. */
#define RECORD_MAX ((size_t)64 * 1024 * 1024)
#define NAMES_MAX  4096

struct loader {
    const char *file;
    int line;
    char *err;
    size_t errlen;
    /* names seen so far, to refuse duplicates */
    char *names[NAMES_MAX];
    size_t nnames;
};

static int fail(struct loader *l, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct loader *l, int code, const char *fmt, ...)
{
    if (l->err != NULL && l->errlen > 0) {
        char msg[256];
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        if (n < 0) {
            msg[0] = '\0';
        }
        n = snprintf(l->err, l->errlen, "%s:%d: %s", l->file ? l->file : "?", l->line, msg);
        if (n < 0) {
            l->err[0] = '\0';
        }
    }
    return code;
}

/* Decodes the escapes of one data fragment (\r \n \t \0 \\ \xHH) and appends it. */
static int append_escaped(struct loader *l, struct buf *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\') {
            if (buf_append(out, &c, 1) != 0) {
                return fail(l, AGENT_E_TOOBIG, "record too large");
            }
            continue;
        }
        if (++i == n) {
            return fail(l, AGENT_E_PROTO, "dangling backslash");
        }
        switch (s[i]) {
        case 'r':
            c = '\r';
            break;
        case 'n':
            c = '\n';
            break;
        case 't':
            c = '\t';
            break;
        case '0':
            c = '\0';
            break;
        case '\\':
            c = '\\';
            break;
        case 'x': {
            int hi = i + 2 < n ? hex_value(s[i + 1]) : -1;
            int lo = i + 2 < n ? hex_value(s[i + 2]) : -1;
            if (hi < 0 || lo < 0) {
                return fail(l, AGENT_E_PROTO, "bad \\x escape");
            }
            c = (char)(hi * 16 + lo);
            i += 2;
            break;
        }
        default:
            return fail(l, AGENT_E_PROTO, "unknown escape \\%c", s[i]);
        }
        if (buf_append(out, &c, 1) != 0) {
            return fail(l, AGENT_E_TOOBIG, "record too large");
        }
    }
    return 0;
}

static int parse_count(const char *s, char **end, unsigned long long max, unsigned long long *out)
{
    errno = 0;
    unsigned long long v = strtoull(s, end, 10);
    if (errno != 0 || *end == s || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

struct record_state {
    bool open;
    struct buf data;
    struct bad_http_record rec;
    char name[128];
    long long cut; /* -1: none */
};

static int directive(struct loader *l, struct record_state *st, const char *line,
                     bad_http_record_cb cb, void *ud)
{
    if (strncmp(line, "%record ", 8) == 0) {
        if (st->open) {
            return fail(l, AGENT_E_PROTO, "%%record inside a record (missing %%end)");
        }
        const char *name = line + 8;
        size_t nl = strlen(name);
        if (nl == 0 || nl >= sizeof(st->name) ||
            strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789_-.") != nl) {
            return fail(l, AGENT_E_PROTO, "bad record name");
        }
        for (size_t i = 0; i < l->nnames; i++) {
            if (strcmp(l->names[i], name) == 0) {
                return fail(l, AGENT_E_INVAL, "duplicate record name %s", name);
            }
        }
        if (l->nnames == NAMES_MAX || (l->names[l->nnames] = strdup(name)) == NULL) {
            return fail(l, AGENT_E_TOOBIG, "too many records");
        }
        l->nnames++;
        memcpy(st->name, name, nl + 1);
        memset(&st->rec, 0, sizeof(st->rec));
        st->rec.file = l->file;
        st->rec.line = l->line;
        st->rec.name = st->name;
        st->rec.expect = BAD_HTTP_REJECT;
        st->cut = -1;
        buf_reset(&st->data);
        st->open = true;
        return 0;
    }
    if (!st->open) {
        return fail(l, AGENT_E_PROTO, "directive outside a record: %s", line);
    }
    if (strncmp(line, "%expect ", 8) == 0) {
        const char *v = line + 8;
        if (strcmp(v, "reject") == 0) {
            st->rec.expect = BAD_HTTP_REJECT;
        } else if (strcmp(v, "close") == 0) {
            st->rec.expect = BAD_HTTP_CLOSE;
        } else {
            char *end;
            unsigned long long code;
            if (parse_count(v, &end, 599, &code) != 0 || *end != '\0' || code < 100) {
                return fail(l, AGENT_E_PROTO, "bad %%expect value");
            }
            st->rec.expect = BAD_HTTP_STATUS;
            st->rec.status = (int)code;
        }
        return 0;
    }
    if (strncmp(line, "%repeat ", 8) == 0) {
        char *end;
        unsigned long long count;
        if (parse_count(line + 8, &end, RECORD_MAX, &count) != 0 || *end != ' ' || end[1] == '\0') {
            return fail(l, AGENT_E_PROTO, "usage: %%repeat COUNT TEXT");
        }
        struct buf unit;
        buf_init(&unit, RECORD_MAX);
        int rc = append_escaped(l, &unit, end + 1, strlen(end + 1));
        if (rc == 0 && buf_size(&unit) * count > RECORD_MAX) {
            rc = fail(l, AGENT_E_TOOBIG, "record too large");
        }
        if (rc == 0 && buf_reserve(&st->data, buf_size(&unit) * count) != 0) {
            rc = fail(l, AGENT_E_TOOBIG, "record too large");
        }
        for (unsigned long long i = 0; rc == 0 && i < count; i++) {
            rc = buf_append(&st->data, buf_data(&unit), buf_size(&unit));
        }
        buf_fini(&unit);
        return rc;
    }
    if (strncmp(line, "%hex ", 5) == 0) {
        const char *p = line + 5;
        while (*p != '\0') {
            if (*p == ' ') {
                p++;
                continue;
            }
            int hi = hex_value(p[0]);
            int lo = hi >= 0 ? hex_value(p[1]) : -1;
            if (hi < 0 || lo < 0) {
                return fail(l, AGENT_E_PROTO, "bad %%hex byte");
            }
            char c = (char)(hi * 16 + lo);
            if (buf_append(&st->data, &c, 1) != 0) {
                return fail(l, AGENT_E_TOOBIG, "record too large");
            }
            p += 2;
        }
        return 0;
    }
    if (strncmp(line, "%cut ", 5) == 0) {
        char *end;
        unsigned long long n;
        if (parse_count(line + 5, &end, RECORD_MAX, &n) != 0 || *end != '\0') {
            return fail(l, AGENT_E_PROTO, "usage: %%cut N");
        }
        st->cut = (long long)n;
        return 0;
    }
    if (strcmp(line, "%end") == 0) {
        st->open = false;
        size_t len = buf_size(&st->data);
        if (st->cut >= 0) {
            if ((size_t)st->cut >= len) {
                return fail(l, AGENT_E_PROTO, "%%cut %lld does not shorten the record (%zu bytes)",
                            st->cut, len);
            }
            len = (size_t)st->cut;
        }
        if (len == 0) {
            return fail(l, AGENT_E_PROTO, "empty record");
        }
        st->rec.data = buf_data(&st->data);
        st->rec.len = len;
        return cb(ud, &st->rec);
    }
    return fail(l, AGENT_E_PROTO, "unknown directive: %s", line);
}

static int load_file(struct loader *l, const char *path, bad_http_record_cb cb, void *ud)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return fail(l, -errno, "cannot open %s", path);
    }
    struct record_state st;
    memset(&st, 0, sizeof(st));
    buf_init(&st.data, RECORD_MAX);
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = 0;
    l->line = 0;
    while (rc == 0 && (n = getline(&line, &cap, f)) >= 0) {
        l->line++;
        size_t len = (size_t)n;
        if (len > 0 && line[len - 1] == '\n') {
            line[--len] = '\0';
        }
        if (len > 0 && line[len - 1] == '\r') {
            rc = fail(l, AGENT_E_PROTO, "CRLF line ending in the corpus file (write \\r instead)");
            break;
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        if (line[len - 1] == ' ' || line[len - 1] == '\t') {
            rc = fail(l, AGENT_E_PROTO, "trailing whitespace (write \\x20 or \\t)");
            break;
        }
        if (line[0] == '%') {
            rc = directive(l, &st, line, cb, ud);
        } else if (!st.open) {
            rc = fail(l, AGENT_E_PROTO, "data outside a record");
        } else {
            rc = append_escaped(l, &st.data, line, len);
        }
    }
    if (rc == 0 && st.open) {
        rc = fail(l, AGENT_E_PROTO, "missing %%end at end of file");
    }
    free(line);
    buf_fini(&st.data);
    (void)fclose(f); /* read-only: nothing to flush */
    return rc;
}

static int txt_filter(const struct dirent *d)
{
    size_t n = strlen(d->d_name);
    return n > 4 && d->d_name[0] != '.' && strcmp(d->d_name + n - 4, ".txt") == 0;
}

int bad_http_corpus_foreach(const char *dir, bad_http_record_cb cb, void *ud, char *err,
                            size_t errlen)
{
    struct loader l;
    memset(&l, 0, sizeof(l));
    l.err = err;
    l.errlen = errlen;
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    struct dirent **list = NULL;
    int n = scandir(dir, &list, txt_filter, alphasort);
    if (n < 0) {
        l.file = dir;
        return fail(&l, -errno, "cannot list the corpus directory");
    }
    int rc = 0;
    for (int i = 0; i < n; i++) {
        if (rc == 0) {
            char path[4096];
            int w = snprintf(path, sizeof(path), "%s/%s", dir, list[i]->d_name);
            l.file = list[i]->d_name;
            rc = w > 0 && (size_t)w < sizeof(path) ? load_file(&l, path, cb, ud)
                                                   : fail(&l, AGENT_E_TOOBIG, "path too long");
        }
        free(list[i]);
    }
    free(list);
    for (size_t i = 0; i < l.nnames; i++) {
        free(l.names[i]);
    }
    return rc;
}

const char *bad_http_corpus_dir(const char *fallback, char *tmp, size_t tmplen)
{
    const char *fx = getenv("DOTMON_FIXTURES");
    if (fx != NULL && fx[0] != '\0') {
        int n = snprintf(tmp, tmplen, "%s/bad_http", fx);
        if (n > 0 && (size_t)n < tmplen) {
            return tmp;
        }
    }
    return fallback;
}

bool bad_http_expect_ok(const struct bad_http_record *rec, int status)
{
    switch (rec->expect) {
    case BAD_HTTP_STATUS:
        return status == rec->status;
    case BAD_HTTP_CLOSE:
        return status == 0;
    case BAD_HTTP_REJECT:
    default:
        return status == 0 || (status >= 400 && status < 500) || status == 503 || status == 505;
    }
}
