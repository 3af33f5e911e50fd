/* SPDX-License-Identifier: MIT */
/* dotnet-monitor's Prometheus metric names and number text; see ev_prom_name.h. */
#include "ev_prom_name.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ascii.h"
#include "ev_fmt.h"
#include "utf8.h"

/* ---- names ---------------------------------------------------------------------------------- */

static bool is_letter(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* dotnet-monitor's IsValidChar for ASCII (every non-ASCII character is > 'z', so invalid). */
static bool valid_char(char c, bool first)
{
    return c == '_' || is_letter(c) || (!first && is_digit(c));
}

/*
 * Provider mode: valid characters lower-cased, the others dropped; "_" when nothing is left.
 * Counter mode: valid characters kept, each invalid character (UTF-16 unit) becomes "_".
 */
static int normalize_n(struct buf *out, const char *s, size_t len, bool provider)
{
    const unsigned char *p = (const unsigned char *)s;
    const unsigned char *end = p + len;
    bool kept = false;
    bool first = true;
    int rc = 0;
    while (p < end && rc == 0) {
        uint32_t cp;
        size_t n = 0;
        if (!utf8_decode(p, (size_t)(end - p), &cp, &n)) {
            n = 0;
        }
        if (n == 1 && valid_char((char)*p, provider ? !kept : first)) {
            char c = (char)*p;
            if (provider) {
                c = ascii_lower(c);
            }
            rc = buf_append(out, &c, 1);
            kept = true;
        } else if (!provider) {
            rc = buf_append(out, n == 4 ? "__" : "_", n == 4 ? 2 : 1);
        }
        p += n ? n : 1;
        first = false;
    }
    if (rc == 0 && provider && !kept) {
        rc = buf_append(out, "_", 1);
    }
    return rc;
}

static int normalize(struct buf *out, const char *s, bool provider)
{
    return normalize_n(out, s, strlen(s), provider);
}

int ev_prom_name_part(struct buf *out, const char *s, size_t len)
{
    return normalize_n(out, s, len, false);
}

/* The unit's part of the name: "" for none, else the (unnormalized) unit or its mapping. */
static const char *mapped_unit(const char *unit)
{
    if (unit == NULL || unit[0] == '\0' || ascii_ieq(unit, "count")) {
        return "";
    }
    if (ascii_ieq(unit, "B") || ascii_ieq(unit, "MB")) {
        return "bytes";
    }
    if (strcmp(unit, "%") == 0) {
        return "ratio";
    }
    return unit;
}

int ev_prom_metric_name(struct buf *out, const char *provider, const char *counter,
                        const char *unit)
{
    int rc = normalize(out, provider ? provider : "", true);
    if (rc == 0) {
        rc = buf_append(out, "_", 1);
    }
    if (rc == 0) {
        rc = normalize(out, counter ? counter : "", false);
    }
    const char *u = mapped_unit(unit);
    if (rc == 0 && u[0] != '\0') {
        rc = buf_append(out, "_", 1);
        if (rc == 0) {
            rc = normalize(out, u, false);
        }
    }
    return rc;
}

/* ---- numbers -------------------------------------------------------------------------------- */

size_t ev_prom_format_double(double v, char *out, size_t n)
{
    char text[EV_FMT_REAL_MAX];
    size_t t;
    if (isinf(v)) {
        t = (size_t)snprintf(text, sizeof(text), "%s", v > 0 ? "+Inf" : "-Inf");
    } else {
        t = ev_fmt_real(v, false, text, sizeof(text)); /* "NaN" as Prometheus spells it */
    }
    if (t >= n) {
        return 0;
    }
    memcpy(out, text, t + 1);
    return t;
}
