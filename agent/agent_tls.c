/* SPDX-License-Identifier: MIT */
#include "agent_tls.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "err.h"
#include "http_server.h"
#include "http_tls.h"
#include "log.h"

#define KEY_PATH     "Kestrel:Certificates:Default:Path"
#define KEY_KEYPATH  "Kestrel:Certificates:Default:KeyPath"
#define KEY_PASSWORD "Kestrel:Certificates:Default:Password"
/* A certificate this close to its end is worth a warning at every start. */
#define EXPIRY_WARN_DAYS 14

static const char cat[] = "dotmon";

/* The URL lists agent_start binds, from the merged configuration (the defaults are plain http
 * on localhost and need no look). */
struct url_lists {
    const char *lists[2];
    bool metrics[2];
    size_t n;
};

static void collect_lists(const struct agent *a, struct url_lists *l)
{
    l->n = 0;
    const char *urls = config_get(a->cfg, "Urls");
    if (urls != NULL) {
        l->metrics[l->n] = false;
        l->lists[l->n++] = urls;
    }
    const char *murls = config_get(a->cfg, "Metrics:Endpoints");
    if (config_get_bool(a->cfg, "Metrics:Enabled", 1) == 1 && murls != NULL) {
        l->metrics[l->n] = true;
        l->lists[l->n++] = murls;
    }
}

/*
 * Calls fn for each URL of a ';'-separated list (leading blanks skipped, as bind_urls does).
 * URLs that do not parse are skipped: binding reports them.
 */
static void each_url(const char *list, void (*fn)(void *ud, const char *url, bool tls, bool lo),
                     void *ud)
{
    const char *p = list;
    while (p != NULL && *p != '\0') {
        const char *semi = strchr(p, ';');
        size_t n = semi ? (size_t)(semi - p) : strlen(p);
        while (n > 0 && *p == ' ') {
            p++;
            n--;
        }
        char url[512];
        bool tls = false, lo = false;
        if (n > 0 && n < sizeof(url)) {
            memcpy(url, p, n);
            url[n] = '\0';
            if (http_url_info(url, &tls, &lo) == 0) {
                fn(ud, url, tls, lo);
            }
        }
        p = semi ? semi + 1 : NULL;
    }
}

struct scan {
    char tls_url[512]; /* the first https:// URL, for the message */
    bool any_tls;
    struct buf clear; /* artifact URLs in clear text off loopback, ", "-separated */
    bool artifacts;   /* the list being scanned is an artifact list */
};

static void scan_url(void *ud, const char *url, bool tls, bool lo)
{
    struct scan *s = ud;
    if (tls && !s->any_tls) {
        s->any_tls = true;
        snprintf(s->tls_url, sizeof(s->tls_url), "%s", url);
    }
    if (!tls && !lo && s->artifacts) {
        (void)buf_printf(&s->clear, "%s%s", buf_size(&s->clear) ? ", " : "", url);
    }
}

static bool ends_with_ci(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

/* Names the setting at fault for each problem http_tls_ctx_new reports. */
static const char *setting_for(enum http_tls_problem p, bool key_in_cert)
{
    switch (p) {
    case HTTP_TLS_CERT:
        return KEY_PATH;
    case HTTP_TLS_KEY:
    case HTTP_TLS_MISMATCH:
        return key_in_cert ? KEY_PATH : KEY_KEYPATH;
    case HTTP_TLS_KEY_ENCRYPTED:
    case HTTP_TLS_PASSWORD:
        return KEY_PASSWORD;
    case HTTP_TLS_OK:
    case HTTP_TLS_INTERNAL:
    default:
        return "Kestrel:Certificates:Default";
    }
}

static int load_certificate(struct agent *a, const char *url)
{
    const char *cert = config_get(a->cfg, KEY_PATH);
    const char *key = config_get(a->cfg, KEY_KEYPATH);
    const char *password = config_get(a->cfg, KEY_PASSWORD);
    if (cert == NULL || *cert == '\0') {
        log_error(cat, "%s needs a certificate: set %s (PEM certificate) and %s (PEM private key)",
                  url, KEY_PATH, KEY_KEYPATH);
        return AGENT_E_INVAL;
    }
    if (ends_with_ci(cert, ".pfx") || ends_with_ci(cert, ".p12")) {
        log_error(cat,
                  "%s: %s looks like PKCS#12; dotmon reads PEM files: convert it with "
                  "'openssl pkcs12 -in CERT.pfx -nokeys -out cert.pem' and "
                  "'openssl pkcs12 -in CERT.pfx -nocerts -nodes -out key.pem', then set %s "
                  "and %s",
                  KEY_PATH, cert, KEY_PATH, KEY_KEYPATH);
        return AGENT_E_INVAL;
    }
    bool key_in_cert = key == NULL || *key == '\0';
    struct http_tls_info info;
    int rc = http_tls_ctx_new(cert, key, password, &a->tls, &info);
    if (rc != 0) {
        const char *hint = "";
        if (info.problem == HTTP_TLS_KEY && key_in_cert) {
            hint = "; set " KEY_KEYPATH;
        } else if (info.problem == HTTP_TLS_KEY_ENCRYPTED) {
            hint = "; set it";
        }
        log_error(cat, "invalid HTTPS configuration: %s: %s%s",
                  setting_for(info.problem, key_in_cert), info.detail, hint);
        return rc == AGENT_E_INVAL ? rc : AGENT_E_INVAL;
    }
    log_info(cat, "HTTPS certificate %s: subject %s, valid until %s%s", cert,
             info.subject[0] ? info.subject : "(empty)", info.not_after,
             info.chain_certs ? " (with intermediates)" : "");
    if (info.expired) {
        log_warn(cat,
                 "the HTTPS certificate (%s %s) expired on %s: clients that verify "
                 "certificates will refuse to connect; renew it",
                 KEY_PATH, cert, info.not_after);
    } else if (info.not_yet_valid) {
        log_warn(cat,
                 "the HTTPS certificate (%s %s) is not valid before %s: check the clock, or "
                 "clients that verify certificates will refuse to connect",
                 KEY_PATH, cert, info.not_before);
    } else if (info.days_left < EXPIRY_WARN_DAYS) {
        log_warn(cat, "the HTTPS certificate (%s %s) expires in %d day(s), on %s", KEY_PATH, cert,
                 info.days_left, info.not_after);
    }
    return 0;
}

int agent_tls_init(struct agent *a)
{
    struct url_lists l;
    collect_lists(a, &l);
    struct scan s;
    memset(&s, 0, sizeof(s));
    buf_init(&s.clear, 4096);
    for (size_t i = 0; i < l.n; i++) {
        s.artifacts = !l.metrics[i];
        each_url(l.lists[i], scan_url, &s);
    }
    int rc = 0;
    if (s.any_tls) {
        rc = load_certificate(a, s.tls_url);
    } else if (config_get(a->cfg, KEY_PATH) != NULL && *config_get(a->cfg, KEY_PATH) != '\0') {
        log_info(cat, "%s is set but no URL is https://: the certificate is not used", KEY_PATH);
    }
    if (rc == 0 && !a->no_auth && buf_size(&s.clear) > 0) {
        /* Once, naming the URLs only: never a key or a token. */
        log_warn(cat,
                 "authentication is on, but bearer tokens sent to these plain HTTP URLs on "
                 "non-loopback addresses cross the network in clear text: %s. Use https:// "
                 "with %s and %s",
                 buf_cstr(&s.clear), KEY_PATH, KEY_KEYPATH);
    }
    buf_fini(&s.clear);
    return rc;
}

void agent_tls_fini(struct agent *a)
{
    http_tls_ctx_free(a->tls);
    a->tls = NULL;
}
