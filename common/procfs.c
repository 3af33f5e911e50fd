/* SPDX-License-Identifier: MIT */
/* Parsers of /proc text; see procfs.h. */
#include "procfs.h"

#include <stdlib.h>
#include <string.h>

#include "ascii.h"
#include "err.h"
#include "hex.h"
#include "num.h"

bool procfs_environ_get(const char *blob, size_t len, const char *name, const char **value,
                        size_t *value_len)
{
    size_t nlen = strlen(name);
    size_t k = 0;
    while (k < len) {
        const char *end = memchr(blob + k, '\0', len - k);
        if (end == NULL) {
            return false; /* cut by the read's bound: its value may be cut too */
        }
        size_t elen = (size_t)(end - (blob + k));
        if (nlen > 0 && elen > nlen && blob[k + nlen] == '=' && memcmp(blob + k, name, nlen) == 0) {
            *value = blob + k + nlen + 1;
            *value_len = elen - nlen - 1;
            return true;
        }
        k += elen + 1;
    }
    return false;
}

static bool has_prefix(const char *s, size_t n, const char *prefix, size_t *plen)
{
    size_t l = strlen(prefix);
    if (n < l || memcmp(s, prefix, l) != 0) {
        return false;
    }
    *plen = l;
    return true;
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (hex_value(s[i]) < 0) {
            return false;
        }
    }
    return true;
}

/* The container id a path component names (out: 65 bytes), or false. */
static bool component_container(const char *c, size_t n, char *out)
{
    static const char *const skip[] = {"crio-conmon-", "libpod-conmon-"};
    static const char *const prefixes[] = {"cri-containerd-", "crio-", "docker-", "libpod-payload-",
                                           "libpod-"};
    size_t plen = 0;
    for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++) {
        if (has_prefix(c, n, skip[i], &plen)) {
            return false;
        }
    }
    static const char scope[] = ".scope";
    if (n > sizeof(scope) - 1 &&
        memcmp(c + n - (sizeof(scope) - 1), scope, sizeof(scope) - 1) == 0) {
        n -= sizeof(scope) - 1;
    }
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
        if (has_prefix(c, n, prefixes[i], &plen)) {
            c += plen;
            n -= plen;
            break;
        }
    }
    if (n != PROCFS_CONTAINER_ID_LEN || !all_hex(c, n)) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = c[i];
        out[i] = ascii_lower(ch);
    }
    out[n] = '\0';
    return true;
}

/* The pod uid a path component names ("pod<uid>", "kubepods-<qos>-pod<uid_>.slice"), or false. */
static bool component_pod(const char *c, size_t n, char *out)
{
    static const char slice[] = ".slice";
    size_t at = 0;
    size_t plen = 0;
    if (has_prefix(c, n, "kubepods", &plen)) {
        if (n < sizeof(slice) - 1 ||
            memcmp(c + n - (sizeof(slice) - 1), slice, sizeof(slice) - 1) != 0) {
            return false;
        }
        n -= sizeof(slice) - 1;
        /* the last "-pod" of the slice name */
        bool found = false;
        for (size_t i = n; i >= 4; i--) {
            if (memcmp(c + i - 4, "-pod", 4) == 0) {
                at = i;
                found = true;
                break;
            }
        }
        if (!found) {
            return false;
        }
    } else if (has_prefix(c, n, "pod", &plen)) {
        at = plen;
    } else {
        return false;
    }
    if (n - at != PROCFS_POD_UID_LEN) {
        return false;
    }
    char uid[PROCFS_POD_UID_LEN + 1];
    for (size_t i = 0; i < PROCFS_POD_UID_LEN; i++) {
        char ch = c[at + i];
        bool dash_pos = i == 8 || i == 13 || i == 18 || i == 23;
        if (dash_pos ? ch != '-' && ch != '_' : hex_value(ch) < 0) {
            return false;
        }
        uid[i] = ascii_lower(ch);
        if (dash_pos) {
            uid[i] = '-';
        }
    }
    uid[PROCFS_POD_UID_LEN] = '\0';
    memcpy(out, uid, sizeof(uid));
    return true;
}

bool procfs_cgroup_identity(const char *text, size_t len, struct procfs_cgroup_id *out)
{
    memset(out, 0, sizeof(*out));
    size_t k = 0;
    while (k < len && out->container_id[0] == '\0') {
        const char *nl = memchr(text + k, '\n', len - k);
        size_t eol = nl != NULL ? (size_t)(nl - text) : len;
        /* the path: after the second ':' */
        size_t p = k;
        int colons = 0;
        while (p < eol && colons < 2) {
            colons += text[p++] == ':';
        }
        char cid[PROCFS_CONTAINER_ID_LEN + 1] = "";
        char pod[PROCFS_POD_UID_LEN + 1] = "";
        while (colons == 2 && p < eol) {
            const char *slash = memchr(text + p, '/', eol - p);
            size_t cend = slash != NULL ? (size_t)(slash - text) : eol;
            /* the innermost component that names one wins (podman:
             * ".../libpod-<id>.scope/container") */
            (void)component_container(text + p, cend - p, cid);
            (void)component_pod(text + p, cend - p, pod);
            p = cend + 1;
        }
        if (cid[0] != '\0') {
            memcpy(out->container_id, cid, sizeof(cid));
        }
        if (pod[0] != '\0' && (out->pod_uid[0] == '\0' || cid[0] != '\0')) {
            memcpy(out->pod_uid, pod, sizeof(pod));
        }
        k = eol + 1;
    }
    return out->container_id[0] != '\0' || out->pod_uid[0] != '\0';
}

bool procfs_status_nspid_inner(const char *text, size_t len, uint64_t *out)
{
    static const char key[] = "NSpid:";
    size_t k = 0;
    while (k < len) {
        const char *nl = memchr(text + k, '\n', len - k);
        size_t eol = nl != NULL ? (size_t)(nl - text) : len;
        if (eol - k >= sizeof(key) - 1 && memcmp(text + k, key, sizeof(key) - 1) == 0) {
            uint64_t last = 0;
            bool any = false;
            size_t p = k + sizeof(key) - 1;
            while (p < eol) {
                while (p < eol && (text[p] == ' ' || text[p] == '\t')) {
                    p++;
                }
                if (p == eol) {
                    break;
                }
                uint64_t v = 0;
                size_t digits = 0;
                while (p < eol && text[p] >= '0' && text[p] <= '9' && digits < 19) {
                    v = v * 10 + (uint64_t)(text[p] - '0');
                    p++;
                    digits++;
                }
                if (digits == 0 || (p < eol && text[p] != ' ' && text[p] != '\t')) {
                    return false;
                }
                last = v;
                any = true;
            }
            if (any) {
                *out = last;
            }
            return any;
        }
        k = eol + 1;
    }
    return false;
}

bool procfs_stat_starttime(const char *text, size_t len, uint64_t *out)
{
    size_t close = len;
    for (size_t i = len; i > 0; i--) {
        if (text[i - 1] == ')') {
            close = i - 1;
            break;
        }
    }
    if (close == len) {
        return false;
    }
    /* after ") ": field 3 (state) is the first token; field 22 the twentieth */
    size_t p = close + 1;
    for (int field = 3; field <= 22; field++) {
        if (p >= len || text[p] != ' ') {
            return false;
        }
        p++;
        size_t start = p;
        while (p < len && text[p] != ' ' && text[p] != '\n') {
            p++;
        }
        if (field == 22) {
            uint64_t v = 0;
            if (p == start || p - start > 19) {
                return false;
            }
            for (size_t i = start; i < p; i++) {
                if (text[i] < '0' || text[i] > '9') {
                    return false;
                }
                v = v * 10 + (uint64_t)(text[i] - '0');
            }
            *out = v;
            return true;
        }
    }
    return false;
}

/* ---- node-mode discovery (docs/ipc.md §6) ---- */

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

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a;
    uint64_t y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void procfs_sort_inodes(uint64_t *v, size_t n)
{
    if (n > 1) {
        qsort(v, n, sizeof(*v), cmp_u64);
    }
}

int procfs_unix_listener(const char *text, size_t len, const char *path, const uint64_t *owned,
                         size_t nowned, uint64_t *inode)
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
        uint64_t ino;
        if (num_parse_u64(f[6], fn[6], 10, UINT64_MAX, &ino) != 0) {
            continue;
        }
        if (owned == NULL || bsearch(&ino, owned, nowned, sizeof(*owned), cmp_u64) != NULL) {
            *inode = ino;
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
