/* SPDX-License-Identifier: MIT */
#include "procfs.h"

#include <string.h>

#include "err.h"
#include "num.h"

/* The line of text starting at *pos (without its '\n'); advances *pos past it. */
static bool next_line(const char *text, size_t len, size_t *pos, const char **line, size_t *n)
{
    if (*pos >= len) {
        return false;
    }
    const char *start = text + *pos;
    const char *nl = memchr(start, '\n', len - *pos);
    *line = start;
    *n = nl != NULL ? (size_t)(nl - start) : len - *pos;
    *pos += *n + (nl != NULL ? 1 : 0);
    return true;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

int procfs_status_nspid(const char *text, size_t len, uint64_t *out)
{
    static const char key[] = "NSpid:";
    size_t pos = 0;
    const char *line;
    size_t n;
    while (next_line(text, len, &pos, &line, &n)) {
        if (n < sizeof(key) - 1 || memcmp(line, key, sizeof(key) - 1) != 0) {
            continue;
        }
        /* The last whitespace-separated field. */
        size_t end = n;
        while (end > sizeof(key) - 1 && is_blank(line[end - 1])) {
            end--;
        }
        size_t start = end;
        while (start > sizeof(key) - 1 && !is_blank(line[start - 1])) {
            start--;
        }
        if (start == end || num_parse_u64(line + start, end - start, 10, UINT64_MAX, out) != 0) {
            return AGENT_E_PROTO;
        }
        return 0;
    }
    return AGENT_E_NOTFOUND;
}

int procfs_stat_starttime(const char *text, size_t len, uint64_t *out)
{
    const char *close = NULL;
    for (size_t i = len; i > 0; i--) {
        if (text[i - 1] == ')') {
            close = text + i - 1;
            break;
        }
    }
    if (close == NULL) {
        return AGENT_E_PROTO;
    }
    /* After ')' comes field 3 (state); field 22 is the 20th from there. */
    const char *p = close + 1;
    const char *end = text + len;
    int field = 2;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\n')) {
            p++;
        }
        const char *f = p;
        while (p < end && *p != ' ' && *p != '\n') {
            p++;
        }
        if (f == p) {
            break;
        }
        field++;
        if (field == 22) {
            return num_parse_u64(f, (size_t)(p - f), 10, UINT64_MAX, out) == 0 ? 0 : AGENT_E_PROTO;
        }
    }
    return AGENT_E_PROTO;
}

int procfs_environ_find(const char *text, size_t len, const char *name, const char **val,
                        size_t *val_len)
{
    size_t nl = strlen(name);
    size_t pos = 0;
    while (pos < len) {
        const char *e = text + pos;
        const char *z = memchr(e, '\0', len - pos);
        if (z == NULL) {
            break; /* cut by the read bound */
        }
        size_t n = (size_t)(z - e);
        if (n > nl && memcmp(e, name, nl) == 0 && e[nl] == '=') {
            *val = e + nl + 1;
            *val_len = n - nl - 1;
            return 0;
        }
        pos += n + 1;
    }
    return AGENT_E_NOTFOUND;
}

/* The next blank-separated field of line[0..n) from *pos, or false. */
static bool next_field(const char *line, size_t n, size_t *pos, const char **f, size_t *fn)
{
    while (*pos < n && is_blank(line[*pos])) {
        (*pos)++;
    }
    if (*pos >= n) {
        return false;
    }
    size_t start = *pos;
    while (*pos < n && !is_blank(line[*pos])) {
        (*pos)++;
    }
    *f = line + start;
    *fn = *pos - start;
    return true;
}

int procfs_unix_listener(const char *text, size_t len, const char *path, uint64_t *inode)
{
    /* "Num: RefCount Protocol Flags Type St Inode Path"; a listener has the flag __SO_ACCEPTCON
     * (00010000), type SOCK_STREAM (0001) and state SS_UNCONNECTED (01). */
    size_t pl = strlen(path);
    size_t pos = 0;
    const char *line;
    size_t n;
    bool header = true;
    while (next_line(text, len, &pos, &line, &n)) {
        if (header) {
            header = false;
            continue;
        }
        const char *f[8];
        size_t fn[8];
        size_t lp = 0;
        int k = 0;
        while (k < 7 && next_field(line, n, &lp, &f[k], &fn[k])) {
            k++;
        }
        if (k < 7) {
            continue;
        }
        /* The path is the rest of the line after one blank (it may hold spaces). */
        while (lp < n && is_blank(line[lp])) {
            lp++;
        }
        if (n - lp != pl || memcmp(line + lp, path, pl) != 0) {
            continue;
        }
        uint64_t flags;
        uint64_t type;
        uint64_t st;
        if (num_parse_u64(f[3], fn[3], 16, UINT64_MAX, &flags) != 0 ||
            num_parse_u64(f[4], fn[4], 16, UINT64_MAX, &type) != 0 ||
            num_parse_u64(f[5], fn[5], 16, UINT64_MAX, &st) != 0 || (flags & 0x10000u) == 0 ||
            type != 1 || st != 1) {
            continue;
        }
        if (num_parse_u64(f[6], fn[6], 10, UINT64_MAX, inode) == 0) {
            return 0;
        }
    }
    return AGENT_E_NOTFOUND;
}

bool procfs_socket_link(const char *link, size_t len, uint64_t *inode)
{
    static const char pre[] = "socket:[";
    if (len < sizeof(pre) + 1 || memcmp(link, pre, sizeof(pre) - 1) != 0 || link[len - 1] != ']') {
        return false;
    }
    return num_parse_u64(link + sizeof(pre) - 1, len - sizeof(pre), 10, UINT64_MAX, inode) == 0;
}
