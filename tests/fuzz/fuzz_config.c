/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: configuration from the outside, the JSON settings file and the environment
 * (config/config.h). The input is loaded as a JSON file (config_load_json) and, split at its NUL
 * bytes, as an environment block (config_load_env) into the same map. Then the getters run on the
 * keys dotmon reads (numbers, booleans, durations), every key is classified, and the URL lists are
 * parsed as listen URLs. Map invariant checked: one entry per key (case-insensitive), each found
 * by config_get.
 */
#include "fuzz.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "err.h"
#include "http_proto.h"
#include "log.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    log_set_level(LOG_NONE); /* config_get_uint logs bad values */
    return 0;
}

/* Whole-string decimal, overflow-checked: what config_get_uint must agree with. */
static int ref_uint(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (*s == '\0') {
        return -1;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9') {
            return -1;
        }
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return -1;
        }
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static void check_uint(const struct config *c, const char *key, uint64_t min, uint64_t max)
{
    uint64_t v = 12345;
    int rc = config_get_uint(c, key, min, max, &v);
    const char *s = config_get(c, key);
    if (s == NULL || *s == '\0') {
        CHECK(rc == 0 && v == 12345);
        return;
    }
    uint64_t want = 0;
    bool ok = ref_uint(s, &want) == 0 && want >= min && want <= max;
    CHECK(ok ? (rc == 0 && v == want) : (rc == AGENT_E_INVAL && v == 12345));
}

/* A duration setting: out is written only on success, and then within the bounds. */
static void check_timespan(const struct config *c, const char *key, uint64_t min_ms,
                           uint64_t max_ms)
{
    uint64_t v = 12345;
    int rc = config_get_timespan_ms(c, key, min_ms, max_ms, &v);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    CHECK(v == 12345 || (rc == 0 && v >= min_ms && v <= max_ms));
}

static void check_urls(const char *list)
{
    if (list == NULL) {
        return;
    }
    size_t n = strlen(list);
    char *copy = malloc(n + 1);
    CHECK(copy != NULL);
    const char *p = list;
    for (;;) {
        const char *semi = strchr(p, ';');
        size_t len = semi != NULL ? (size_t)(semi - p) : strlen(p);
        memcpy(copy, p, len);
        copy[len] = '\0';
        struct http_listen_url u;
        int rc = http__parse_listen_url(copy, &u);
        CHECK(rc == 0 || rc == AGENT_E_INVAL);
        if (semi == NULL) {
            break;
        }
        p = semi + 1;
    }
    free(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct config c;
    config_init(&c);
    char err[256];
    err[0] = '\0';
    int rc = config_load_json(&c, (const char *)data, size, "file", err, sizeof(err));
    CHECK(rc == 0 || rc == AGENT_E_INVAL || rc == AGENT_E_TOOBIG);
    CHECK(rc == 0 || err[0] != '\0');

    /* The bytes as an environment block: NUL-separated "NAME=value" strings. */
    char *block = malloc(size + 1);
    CHECK(block != NULL);
    memcpy(block, data, size);
    block[size] = '\0';
    size_t count = 1;
    for (size_t i = 0; i < size; i++) {
        count += block[i] == '\0';
    }
    const char **envp = calloc(count + 1, sizeof(*envp));
    CHECK(envp != NULL);
    size_t k = 0;
    for (size_t i = 0; i <= size; i += strlen(block + i) + 1) {
        envp[k++] = block + i;
    }
    CHECK(k == count);
    envp[k] = NULL;
    rc = config_load_env(&c, envp);
    CHECK(rc == 0);

    for (size_t i = 0; i < c.n; i++) {
        CHECK(config_get(&c, c.v[i].key) == c.v[i].value);
        enum config_key_kind kind = config_key_kind(c.v[i].key);
        CHECK(kind == CONFIG_KEY_KNOWN || kind == CONFIG_KEY_FOREIGN || kind == CONFIG_KEY_UNKNOWN);
        (void)config_key_is_secret(c.v[i].key);
        (void)config_key_under(c.v[i].key, "DefaultProcess");
    }
    (void)config_get(&c, "Authentication:MonitorApiKey:Subject");
    (void)config_get(&c, "Authentication:MonitorApiKey:PublicKey");
    (void)config_get(&c, "DefaultProcess:Filters:0:Key");
    int b = config_get_bool(&c, "Metrics:Enabled", 7);
    CHECK(b == 0 || b == 1 || b == 7 || b == -1);
    check_uint(&c, "DiagnosticPort:MaxConnections", 1, 65535);
    check_uint(&c, "Operations:MaxHistory", 1, 100000);
    check_uint(&c, "GlobalCounter:IntervalSeconds", 1, 86400);
    check_uint(&c, "Dump:TimeoutSeconds", 0, UINT64_MAX);
    check_timespan(&c, "Kestrel:Limits:KeepAliveTimeout", 1000, 3600000);
    check_timespan(&c, "Dump:TimeoutSeconds", 0, UINT64_MAX);
    check_urls(config_get(&c, "Urls"));
    check_urls(config_get(&c, "Metrics:Endpoints"));

    free(envp);
    free(block);
    config_fini(&c);
    config_fini(&c);
    return 0;
}
