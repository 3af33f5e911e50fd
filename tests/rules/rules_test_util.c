/* SPDX-License-Identifier: MIT */
#include "rules_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include <cmocka.h>

static void add(struct kvset *s, const char *key, const char *value)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 32;
        s->kv = realloc(s->kv, s->cap * sizeof(*s->kv));
        assert_non_null(s->kv);
    }
    s->kv[s->n].key = strdup(key);
    s->kv[s->n].value = strdup(value);
    assert_non_null(s->kv[s->n].key);
    assert_non_null(s->kv[s->n].value);
    s->n++;
}

static void flatten(struct kvset *s, const cJSON *node, const char *path)
{
    char key[1024];
    if (cJSON_IsObject(node) || cJSON_IsArray(node)) {
        size_t index = 0;
        const cJSON *child;
        cJSON_ArrayForEach(child, node)
        {
            if (cJSON_IsArray(node)) {
                snprintf(key, sizeof(key), "%s%s%zu", path, *path ? ":" : "", index);
            } else {
                snprintf(key, sizeof(key), "%s%s%s", path, *path ? ":" : "", child->string);
            }
            flatten(s, child, key);
            index++;
        }
        return;
    }
    char num[64];
    const char *v = "";
    if (cJSON_IsString(node)) {
        v = node->valuestring;
    } else if (cJSON_IsBool(node)) {
        v = cJSON_IsTrue(node) ? "true" : "false";
    } else if (cJSON_IsNumber(node)) {
        double d = node->valuedouble;
        if (d == (double)(long long)d) {
            snprintf(num, sizeof(num), "%lld", (long long)d);
        } else {
            snprintf(num, sizeof(num), "%.17g", d);
        }
        v = num;
    }
    add(s, path, v);
}

void kv_json(struct kvset *s, const char *json)
{
    cJSON *root = cJSON_Parse(json);
    if (root == NULL) {
        fail_msg("bad JSON near: %.40s", cJSON_GetErrorPtr());
    }
    flatten(s, root, "");
    cJSON_Delete(root);
}

void kv_lines(struct kvset *s, const char *lines)
{
    const char *p = lines;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[2048];
        assert_true(len < sizeof(line));
        memcpy(line, p, len);
        line[len] = '\0';
        char *eq = strchr(line, '=');
        if (eq != NULL) {
            *eq = '\0';
            char *k = line;
            while (*k == ' ') {
                k++;
            }
            add(s, k, eq + 1);
        }
        p += len + (nl != NULL);
    }
}

void kv_free(struct kvset *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free((void *)(uintptr_t)s->kv[i].key);
        free((void *)(uintptr_t)s->kv[i].value);
    }
    free(s->kv);
    memset(s, 0, sizeof(*s));
}

struct rules_config *load(const struct kvset *s, const char *const *egress, size_t negress)
{
    struct rules_config *c = NULL;
    assert_int_equal(rules_config_load(s->kv, s->n, egress, negress, &c), 0);
    assert_non_null(c);
    return c;
}

struct rules_config *load_json(const char *json)
{
    static const char *const egress[] = {"artifacts", "TmpDir"};
    struct kvset s = {0};
    kv_json(&s, json);
    struct rules_config *c = load(&s, egress, 2);
    kv_free(&s); /* the configuration keeps copies */
    return c;
}

int has_error(const struct rules_config *c, const char *line)
{
    for (size_t i = 0; i < c->nerrors; i++) {
        if (strcmp(c->errors[i], line) == 0) {
            return 1;
        }
    }
    return 0;
}

void dump_errors(const struct rules_config *c)
{
    for (size_t i = 0; i < c->nerrors; i++) {
        fprintf(stderr, "  error: %s\n", c->errors[i]);
    }
}

struct rules_config *test_cfg;

struct rules_config *load_strict(const char *lines)
{
    struct kvset s = {0};
    kv_lines(&s, lines);
    rules_config_free(test_cfg);
    test_cfg = load(&s, NULL, 0);
    kv_free(&s);
    if (test_cfg->nerrors != 0) {
        dump_errors(test_cfg);
        fail();
    }
    return test_cfg;
}

int cfg_teardown(void **state)
{
    (void)state;
    rules_config_free(test_cfg);
    test_cfg = NULL;
    return 0;
}

const struct rules_trigger *trigger(const char *type, const char *settings)
{
    char lines[4096];
    snprintf(lines, sizeof(lines), "CollectionRules:R:Trigger:Type=%s\n", type);
    for (const char *p = settings; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        size_t used = strlen(lines);
        snprintf(lines + used, sizeof(lines) - used, "CollectionRules:R:Trigger:Settings:%.*s\n",
                 (int)len, p);
        p += len + (nl != NULL);
    }
    return &load_strict(lines)->rules[0].trigger;
}

struct rules_engine *engine(const struct rules_trigger *t, double interval_s)
{
    struct rules_engine *e = NULL;
    assert_int_equal(rules_engine_new(t, interval_s, &e), 0);
    return e;
}

size_t put_wstr(uint8_t *p, const char *s)
{
    size_t n = 0;
    for (; *s != '\0'; s++) {
        p[n++] = (uint8_t)*s;
        p[n++] = 0;
    }
    p[n++] = 0;
    p[n++] = 0;
    return n;
}
