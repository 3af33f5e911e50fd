/* SPDX-License-Identifier: MIT */
/* The strings of the one-spec-set rule; see dsspec.h. */
#include "dsspec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* One "k=v" pair of s starting at pos: the key's end, the value's bounds (inside quotes when
 * quoted) and where the next pair starts (after the ';'). */
struct pair {
    size_t kend;
    size_t vbeg;
    size_t vend;
    size_t next;
};

static struct pair pair_at(const char *s, size_t pos)
{
    struct pair p;
    p.kend = pos + strcspn(s + pos, "=;");
    size_t v = s[p.kend] == '=' ? p.kend + 1 : p.kend;
    bool quoted = s[v] == '"';
    p.vbeg = quoted ? v + 1 : v;
    p.vend = quoted ? p.vbeg + strcspn(s + p.vbeg, "\"") : v + strcspn(s + v, ";");
    size_t after = quoted && s[p.vend] == '"' ? p.vend + 1 : p.vend;
    p.next = after + (s[after] == ';' ? 1 : 0);
    return p;
}

static bool is_key(const char *s, size_t pos, const struct pair *p)
{
    const size_t klen = sizeof(DSSPEC_KEY) - 1;
    return p->kend - pos == klen && memcmp(s + pos, DSSPEC_KEY, klen) == 0 && s[p->kend] == '=';
}

bool dsspec_args_value(const char *args, const char **val, size_t *len)
{
    const char *s = args != NULL ? args : "";
    for (size_t pos = 0; s[pos] != '\0';) {
        struct pair p = pair_at(s, pos);
        if (is_key(s, pos, &p)) {
            *val = s + p.vbeg;
            *len = p.vend - p.vbeg;
            return true;
        }
        if (p.next <= pos) {
            break;
        }
        pos = p.next;
    }
    return false;
}

static bool trim_char(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Whether acc's lines (each ended by "\r\n") hold line[0..n). */
static bool has_line(const struct buf *acc, const char *line, size_t n)
{
    const char *a = (const char *)buf_data(acc);
    const char *end = a + buf_size(acc);
    while (a < end) {
        const char *eol = memchr(a, '\r', (size_t)(end - a));
        size_t len = eol != NULL ? (size_t)(eol - a) : (size_t)(end - a);
        if (len == n && memcmp(a, line, n) == 0) {
            return true;
        }
        a += len + 2;
    }
    return false;
}

int dsspec_lines_add(struct buf *acc, const char *text, size_t len)
{
    int added = 0;
    size_t pos = 0;
    while (pos < len) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl != NULL ? (size_t)(nl - text) : len;
        size_t b = pos;
        size_t e = end;
        while (b < e && trim_char(text[b])) {
            b++;
        }
        while (e > b && trim_char(text[e - 1])) {
            e--;
        }
        if (e > b && !has_line(acc, text + b, e - b)) {
            if (buf_append(acc, text + b, e - b) != 0 || buf_append(acc, "\r\n", 2) != 0) {
                return -ENOMEM;
            }
            added++;
        }
        pos = end + 1;
    }
    return added;
}

int dsspec_args_set(const char *args, const char *lines, char **out)
{
    const char *s = args != NULL ? args : "";
    struct buf b;
    buf_init(&b, 0);
    int rc = 0;
    for (size_t pos = 0; rc == 0 && s[pos] != '\0';) {
        struct pair p = pair_at(s, pos);
        size_t next = p.next > pos ? p.next : strlen(s);
        if (!is_key(s, pos, &p)) {
            size_t n = next - pos;
            while (n > 0 && s[pos + n - 1] == ';') {
                n--;
            }
            rc = n == 0 ? 0 : buf_size(&b) > 0 ? buf_append(&b, ";", 1) : 0;
            rc = rc != 0 ? rc : buf_append(&b, s + pos, n);
        }
        pos = next;
    }
    size_t n = strlen(lines);
    if (n >= 2 && lines[n - 2] == '\r' && lines[n - 1] == '\n') {
        n -= 2;
    }
    rc = rc != 0 || buf_size(&b) == 0 ? rc : buf_append(&b, ";", 1);
    rc = rc != 0 ? rc : buf_append_str(&b, DSSPEC_KEY "=\"");
    rc = rc != 0 ? rc : buf_append(&b, lines, n);
    rc = rc != 0 ? rc : buf_append(&b, "\"", 1);
    *out = rc == 0 ? buf_steal(&b, NULL) : NULL;
    buf_fini(&b);
    return rc != 0 ? rc : *out == NULL ? -ENOMEM : 0;
}
