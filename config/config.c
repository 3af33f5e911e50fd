/* SPDX-License-Identifier: MIT */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cJSON.h>

#include "ascii.h"
#include "buf.h"
#include "err.h"
#include "log.h"
#include "num.h"
#include "shdir.h"

#define CONFIG_MAX_FILE      (1024 * 1024)
#define CONFIG_MAX_DEPTH     32
#define CONFIG_MAX_KEY_FILES 1024

void config_init(struct config *c)
{
    memset(c, 0, sizeof(*c));
}

void config_fini(struct config *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->v[i].key);
        free(c->v[i].value);
    }
    free(c->v);
    memset(c, 0, sizeof(*c));
}

static struct config_entry *find(const struct config *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++) {
        if (strcasecmp(c->v[i].key, key) == 0) {
            return &c->v[i];
        }
    }
    return NULL;
}

int config_set(struct config *c, const char *key, const char *value, const char *source)
{
    char *nv = strdup(value);
    if (nv == NULL) {
        return -ENOMEM;
    }
    struct config_entry *e = find(c, key);
    if (e != NULL) {
        free(e->value);
        e->value = nv;
        e->source = source;
        return 0;
    }
    if (c->n == c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 16;
        struct config_entry *nvv = realloc(c->v, ncap * sizeof(*nvv));
        if (nvv == NULL) {
            free(nv);
            return -ENOMEM;
        }
        c->v = nvv;
        c->cap = ncap;
    }
    char *nk = strdup(key);
    if (nk == NULL) {
        free(nv);
        return -ENOMEM;
    }
    c->v[c->n].key = nk;
    c->v[c->n].value = nv;
    c->v[c->n].source = source;
    c->n++;
    return 0;
}

/* Walks a JSON value, appending path segments to `path`, the way .NET's JSON provider does. */
static int flatten(struct config *c, const cJSON *node, struct buf *path, int depth,
                   const char *source)
{
    if (depth > CONFIG_MAX_DEPTH) {
        return AGENT_E_TOOBIG;
    }
    if (cJSON_IsObject(node) || cJSON_IsArray(node)) {
        size_t index = 0;
        const cJSON *child;
        cJSON_ArrayForEach(child, node)
        {
            size_t mark = path->len;
            int rc = buf_size(path) > 0 ? buf_append(path, ":", 1) : 0;
            if (rc == 0) {
                rc = cJSON_IsArray(node) ? buf_printf(path, "%zu", index)
                                         : buf_append_str(path, child->string ? child->string : "");
            }
            rc = rc ? rc : flatten(c, child, path, depth + 1, source);
            path->len = mark;
            if (rc != 0) {
                return rc;
            }
            index++;
        }
        return 0;
    }
    char num[64];
    const char *value;
    if (cJSON_IsString(node)) {
        value = node->valuestring;
    } else if (cJSON_IsBool(node)) {
        value = cJSON_IsTrue(node) ? "true" : "false";
    } else if (cJSON_IsNumber(node)) {
        double d = node->valuedouble;
        /* Range first: converting a double outside int64_t (1e300, NaN) is undefined. */
        if (d > -9e15 && d < 9e15 && d == (double)(int64_t)d) {
            snprintf(num, sizeof(num), "%lld", (long long)(int64_t)d);
        } else {
            snprintf(num, sizeof(num), "%.17g", d);
        }
        value = num;
    } else {
        value = ""; /* null */
    }
    return config_set(c, buf_cstr(path), value, source);
}

int config_load_json(struct config *c, const char *text, size_t len, const char *source, char *err,
                     size_t errlen)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (root == NULL) {
        const char *where = cJSON_GetErrorPtr();
        size_t off = (where && where >= text && where <= text + len) ? (size_t)(where - text) : 0;
        snprintf(err, errlen, "invalid JSON near byte %zu", off);
        return AGENT_E_INVAL;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        snprintf(err, errlen, "the top level must be a JSON object");
        return AGENT_E_INVAL;
    }
    /* A settings file's "$schema" (dotnet-monitor's own examples carry one, for editors) names
     * the file's JSON schema: not a setting. */
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(root, "$schema");
    if (cJSON_IsString(schema)) {
        cJSON_DeleteItemFromObjectCaseSensitive(root, "$schema");
    }
    struct buf path;
    buf_init(&path, 4096);
    int rc = flatten(c, root, &path, 0, source);
    buf_fini(&path);
    cJSON_Delete(root);
    if (rc != 0) {
        snprintf(err, errlen, "cannot load settings: %s", agent_strerror(rc));
    }
    return rc;
}

/*
 * Opens a settings file or folder only through shdir_open_trusted (sshd's StrictModes): -ENOENT
 * for a missing one (optional sources), AGENT_E_UNTRUSTED with the path and the reason in err,
 * else AGENT_E_INVAL. A relative path is taken from the working folder.
 */
static int open_setting(const char *path, unsigned flags, int *fd, char *err, size_t errlen)
{
    char abs[4096];
    if (path[0] != '/') {
        char cwd[3072];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            snprintf(err, errlen, "cannot resolve %s: %s", path, strerror(errno));
            return AGENT_E_INVAL;
        }
        int n = snprintf(abs, sizeof(abs), "%s/%s", cwd, path);
        if (n < 0 || (size_t)n >= sizeof(abs)) {
            snprintf(err, errlen, "path too long (%d bytes from %s): %s", n, cwd, path);
            return AGENT_E_INVAL;
        }
        path = abs;
    }
    char why[1024];
    int rc = shdir_open_trusted(path, flags | SHDIR_TRUST_STRICT, fd, why, sizeof(why));
    if (rc == 0 || rc == -ENOENT || rc == -ENOTDIR) {
        snprintf(err, errlen, "cannot open %s", why);
        return rc;
    }
    if (rc == AGENT_E_UNTRUSTED) {
        snprintf(err, errlen, "refused %s", why);
        return rc;
    }
    snprintf(err, errlen, "cannot open %s", why);
    return AGENT_E_INVAL;
}

/* Reads a whole file of at most CONFIG_MAX_FILE bytes into text. -ENOENT and AGENT_E_UNTRUSTED
 * are returned as is (for optional sources); other failures are AGENT_E_INVAL with a reason in
 * err. */
static int read_small_file(const char *path, struct buf *text, char *err, size_t errlen)
{
    int fd = -1;
    int rc = open_setting(path, SHDIR_TRUST_FILE, &fd, err, errlen);
    if (rc != 0) {
        return rc == -ENOTDIR ? AGENT_E_INVAL : rc;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s is not a regular file", path);
        rc = AGENT_E_INVAL;
        goto out;
    }
    for (;;) {
        if (buf_reserve(text, 64 * 1024) != 0 || buf_size(text) > CONFIG_MAX_FILE) {
            snprintf(err, errlen, "%s is larger than 1 MiB", path);
            rc = AGENT_E_INVAL;
            goto out;
        }
        size_t room = text->cap - text->len - 1;
        ssize_t n = read(fd, text->p + text->len, room);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
            rc = AGENT_E_INVAL;
            goto out;
        }
        if (n == 0) {
            break;
        }
        text->len += (size_t)n;
    }
out:
    close(fd);
    return rc;
}

int config_load_json_file(struct config *c, const char *path, const char *source, bool optional,
                          char *err, size_t errlen)
{
    struct buf text;
    buf_init(&text, CONFIG_MAX_FILE + 64 * 1024);
    int rc = read_small_file(path, &text, err, errlen);
    if (rc == -ENOENT) {
        buf_fini(&text);
        return optional ? 0 : AGENT_E_INVAL;
    }
    if (rc == AGENT_E_UNTRUSTED) {
        buf_fini(&text);
        return rc;
    }
    if (rc == 0) {
        rc = config_load_json(c, (const char *)buf_data(&text), buf_size(&text), source, err,
                              errlen);
    }
    buf_fini(&text);
    return rc;
}

int config_load_file(struct config *c, const char *path, char *err, size_t errlen)
{
    return config_load_json_file(c, path, "file", false, err, errlen);
}

/* A file name or an environment name as a key: "__" stands for ':'. */
static int key_from_name(struct buf *key, const char *name, size_t len)
{
    int rc = 0;
    for (size_t i = 0; i < len && rc == 0; i++) {
        if (name[i] == '_' && i + 1 < len && name[i + 1] == '_') {
            rc = buf_append(key, ":", 1);
            i++;
        } else {
            rc = buf_append(key, name + i, 1);
        }
    }
    return rc;
}

int config_load_key_per_file(struct config *c, const char *dir, const char *source, char *err,
                             size_t errlen)
{
    int dfd = -1;
    int orc = open_setting(dir, 0, &dfd, err, errlen);
    if (orc == -ENOENT || orc == -ENOTDIR) {
        return 0; /* optional, as in dotnet-monitor */
    }
    if (orc != 0) {
        return orc;
    }
    DIR *d = fdopendir(dfd);
    if (d == NULL) {
        close(dfd);
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return AGENT_E_INVAL;
    }
    int rc = 0;
    struct buf key, value;
    buf_init(&key, 4096);
    buf_init(&value, CONFIG_MAX_FILE + 64 * 1024);
    size_t files = 0;
    for (struct dirent *de = readdir(d); de != NULL && rc == 0; de = readdir(d)) {
        /* Dot names are Kubernetes' own (..data, ..2024_…) and hidden files; settings.json is the
         * JSON source read before this one. A file name is a key, "__" standing for ':'. */
        if (de->d_name[0] == '.' || strcasecmp(de->d_name, "settings.json") == 0) {
            continue;
        }
        struct stat st;
        if (fstatat(dfd, de->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) {
            continue; /* folders, dangling links */
        }
        if (++files > CONFIG_MAX_KEY_FILES) {
            snprintf(err, errlen, "%s holds more than %d files", dir, CONFIG_MAX_KEY_FILES);
            rc = AGENT_E_INVAL;
            break;
        }
        buf_reset(&key);
        buf_reset(&value);
        /* Through the same walk: a Secret's `Key -> ..data/Key` link, never another user's. */
        char why[1280], file[4096];
        int fn = snprintf(file, sizeof(file), "%s/%s", dir, de->d_name);
        if (fn < 0 || (size_t)fn >= sizeof(file)) {
            snprintf(err, errlen, "path too long (%d bytes): %s/%s", fn, dir, de->d_name);
            rc = AGENT_E_INVAL;
            break;
        }
        rc = read_small_file(file, &value, why, sizeof(why));
        if (rc != 0) {
            snprintf(err, errlen, "%s", why);
            rc = rc == AGENT_E_UNTRUSTED ? rc : AGENT_E_INVAL;
            break;
        }
        /* One trailing newline is not part of the value (`echo x > file`, kubectl's secrets). */
        size_t n = buf_size(&value);
        if (n > 0 && value.p[value.off + n - 1] == '\n') {
            n--;
            if (n > 0 && value.p[value.off + n - 1] == '\r') {
                n--;
            }
        }
        buf_truncate(&value, n);
        if (memchr(buf_data(&value), '\0', n) != NULL) {
            snprintf(err, errlen, "%s/%s holds a NUL byte", dir, de->d_name);
            rc = AGENT_E_INVAL;
            break;
        }
        rc = key_from_name(&key, de->d_name, strlen(de->d_name));
        rc = rc ? rc : config_set(c, buf_cstr(&key), buf_cstr(&value), source);
    }
    closedir(d);
    buf_fini(&key);
    buf_fini(&value);
    return rc;
}

int config_load_env(struct config *c, const char *const *envp)
{
    static const char prefix[] = "DotnetMonitor_";
    const size_t plen = sizeof(prefix) - 1;
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        const char *kv = envp[i];
        if (strncasecmp(kv, prefix, plen) != 0) {
            continue;
        }
        const char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv + plen) {
            continue;
        }
        struct buf key;
        buf_init(&key, 4096);
        int rc = key_from_name(&key, kv + plen, (size_t)(eq - kv - plen));
        rc = rc ? rc : config_set(c, buf_cstr(&key), eq + 1, "environment");
        buf_fini(&key);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

int config_load_env_unprefixed(struct config *c, const char *const *envp)
{
    static const char prefix[] = "DotnetMonitor_";
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++) {
        const char *kv = envp[i];
        const char *eq = strchr(kv, '=');
        if (eq == NULL || eq == kv || strncasecmp(kv, prefix, sizeof(prefix) - 1) == 0) {
            continue;
        }
        struct buf key;
        buf_init(&key, 4096);
        int rc = key_from_name(&key, kv, (size_t)(eq - kv));
        /* Only dotnet-monitor's own sections: PATH, HOME and the rest of a process's environment
         * are not settings (and would each be named as an unknown one). */
        if (rc == 0 && config_key_kind(buf_cstr(&key)) != CONFIG_KEY_UNKNOWN) {
            rc = config_set(c, buf_cstr(&key), eq + 1, "environment (unprefixed)");
        }
        buf_fini(&key);
        if (rc != 0) {
            return rc;
        }
    }
    return 0;
}

const char *config_get(const struct config *c, const char *key)
{
    const struct config_entry *e = find(c, key);
    return e ? e->value : NULL;
}

int config_get_bool(const struct config *c, const char *key, int def)
{
    const char *v = config_get(c, key);
    if (v == NULL || *v == '\0') {
        return def;
    }
    if (strcasecmp(v, "true") == 0) {
        return 1;
    }
    if (strcasecmp(v, "false") == 0) {
        return 0;
    }
    return -1;
}

int config_get_uint(const struct config *c, const char *key, uint64_t min, uint64_t max,
                    uint64_t *out)
{
    const char *v = config_get(c, key);
    if (v == NULL || *v == '\0') {
        return 0;
    }
    uint64_t n = 0;
    if (num_parse_u64_str(v, 10, max, &n) != 0 || n < min) {
        log_error("dotmon", "%s: '%s' is not a whole number from %llu to %llu", key, v,
                  (unsigned long long)min, (unsigned long long)max);
        return AGENT_E_INVAL;
    }
    *out = n;
    return 0;
}

int config_get_float(const struct config *c, const char *key, double min, double max, double *out)
{
    const char *v = config_get(c, key);
    if (v == NULL || *v == '\0') {
        return 0;
    }
    double d = 0;
    if (num_parse_float32(v, &d) != 0 || d < min || d > max) {
        log_error("dotmon", "%s: '%s' is not a number from %g to %g", key, v, min, max);
        return AGENT_E_INVAL;
    }
    *out = d;
    return 0;
}

int config_get_timespan_ms(const struct config *c, const char *key, uint64_t min_ms,
                           uint64_t max_ms, uint64_t *out)
{
    const char *v = config_get(c, key);
    if (v == NULL || *v == '\0') {
        return 0;
    }
    /* Up to four numbers: [d.]hh:mm:ss, or seconds alone; then an optional .fraction. */
    uint64_t part[4] = {0};
    size_t n = 0;
    const char *p = v;
    bool days = false;
    for (;;) {
        if (*p < '0' || *p > '9' || n == 4) {
            goto bad;
        }
        uint64_t x = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            x = x * 10 + (uint64_t)(*p - '0');
            if (x > 100000000ULL) {
                goto bad;
            }
        }
        part[n++] = x;
        if (*p == ':') {
            p++;
            continue;
        }
        if (*p == '.' && n == 1 && !days && strchr(p, ':') != NULL) {
            days = true; /* "d.hh:mm:ss" */
            p++;
            continue;
        }
        break;
    }
    uint64_t frac_ms = 0;
    if (*p == '.') {
        uint64_t scale = 100;
        for (p++; *p >= '0' && *p <= '9'; p++) {
            frac_ms += (uint64_t)(*p - '0') * scale;
            scale /= 10;
        }
    }
    size_t clock = n - (days ? 1 : 0); /* numbers after the day count */
    if (*p != '\0' || (clock != 1 && clock != 3) || (days && clock != 3) ||
        (clock == 3 && (part[n - 2] > 59 || part[n - 1] > 59 || (days && part[1] > 23)))) {
        goto bad;
    }
    uint64_t s = clock == 1 ? part[0]
                            : (days ? part[0] * 86400 : 0) + part[n - 3] * 3600 + part[n - 2] * 60 +
                                  part[n - 1];
    uint64_t ms = s * 1000 + frac_ms;
    if (ms < min_ms || ms > max_ms) {
        goto bad;
    }
    *out = ms;
    return 0;
bad:
    log_error("dotmon", "%s: '%s' is not a duration from %llu to %llu s (\"hh:mm:ss\" or seconds)",
              key, v, (unsigned long long)(min_ms / 1000), (unsigned long long)(max_ms / 1000));
    return AGENT_E_INVAL;
}

/*
 * Keys dotmon reads; '*' stands for one section (an array index). Matching is case-insensitive
 * and whole-key.
 */
static const char *const known_keys[] = {
    "Authentication:MonitorApiKey:Subject",
    "Authentication:MonitorApiKey:PublicKey",
    "Authentication:MonitorApiKey:Issuer",
    "Kestrel:Limits:MaxConcurrentConnections",
    "Kestrel:Limits:RequestHeadersTimeout",
    "Kestrel:Limits:KeepAliveTimeout",
    "Kestrel:Certificates:Default:Path",
    "Kestrel:Certificates:Default:KeyPath",
    "Kestrel:Certificates:Default:Password",
    "Urls",
    "Metrics:Endpoints",
    "Metrics:Enabled",
    "DefaultProcess:Filters:*:Key",
    "DefaultProcess:Filters:*:Value",
    "DefaultProcess:Filters:*:MatchType",
    "DefaultProcess:Filters:*:ProcessId",
    "DefaultProcess:Filters:*:ProcessName",
    "DefaultProcess:Filters:*:CommandLine",
    "DefaultProcess:Filters:*:ManagedEntryPointAssemblyName",
    "DefaultProcess:Filters:*:PodName",
    "DefaultProcess:Filters:*:PodNamespace",
    "DefaultProcess:Filters:*:ContainerId",
    "DefaultProcess:Filters:*:ContainerName",
    "OpenTelemetry:Filters:*:Key",
    "OpenTelemetry:Filters:*:Value",
    "OpenTelemetry:Filters:*:MatchType",
    "OpenTelemetry:Filters:*:ProcessId",
    "OpenTelemetry:Filters:*:ProcessName",
    "OpenTelemetry:Filters:*:CommandLine",
    "OpenTelemetry:Filters:*:ManagedEntryPointAssemblyName",
    "OpenTelemetry:Filters:*:PodName",
    "OpenTelemetry:Filters:*:PodNamespace",
    "OpenTelemetry:Filters:*:ContainerId",
    "OpenTelemetry:Filters:*:ContainerName",
    "OpenTelemetry:Endpoint",
    "OpenTelemetry:Protocol",
    "OpenTelemetry:Headers",
    "OpenTelemetry:Compression",
    "OpenTelemetry:TimeoutMs",
    "OpenTelemetry:Certificate",
    "OpenTelemetry:LogLevel",
    "OpenTelemetry:IncludeScopes",
    "OpenTelemetry:LogCategories",
    "OpenTelemetry:Meters",
    "OpenTelemetry:ActivitySources",
    "OpenTelemetry:SamplingRatio",
    "OpenTelemetry:HistogramAggregation",
    "OpenTelemetry:MetricExportIntervalMs",
    "OpenTelemetry:RetryInitialBackoffMs",
    "OpenTelemetry:RetryMaxBackoffMs",
    "OpenTelemetry:MaxQueueMB",
    "OpenTelemetry:Logs:Enabled",
    "OpenTelemetry:Logs:Endpoint",
    "OpenTelemetry:Logs:Protocol",
    "OpenTelemetry:Logs:Headers",
    "OpenTelemetry:Logs:Compression",
    "OpenTelemetry:Logs:TimeoutMs",
    "OpenTelemetry:Logs:Certificate",
    "OpenTelemetry:Logs:ScheduleDelayMs",
    "OpenTelemetry:Logs:ExportTimeoutMs",
    "OpenTelemetry:Logs:MaxQueueSize",
    "OpenTelemetry:Logs:MaxExportBatchSize",
    "OpenTelemetry:Metrics:Enabled",
    "OpenTelemetry:Metrics:Endpoint",
    "OpenTelemetry:Metrics:Protocol",
    "OpenTelemetry:Metrics:Headers",
    "OpenTelemetry:Metrics:Compression",
    "OpenTelemetry:Metrics:TimeoutMs",
    "OpenTelemetry:Metrics:Certificate",
    "OpenTelemetry:Metrics:ScheduleDelayMs",
    "OpenTelemetry:Metrics:ExportTimeoutMs",
    "OpenTelemetry:Metrics:MaxQueueSize",
    "OpenTelemetry:Metrics:MaxExportBatchSize",
    "OpenTelemetry:Traces:Enabled",
    "OpenTelemetry:Traces:Endpoint",
    "OpenTelemetry:Traces:Protocol",
    "OpenTelemetry:Traces:Headers",
    "OpenTelemetry:Traces:Compression",
    "OpenTelemetry:Traces:TimeoutMs",
    "OpenTelemetry:Traces:Certificate",
    "OpenTelemetry:Traces:ScheduleDelayMs",
    "OpenTelemetry:Traces:ExportTimeoutMs",
    "OpenTelemetry:Traces:MaxQueueSize",
    "OpenTelemetry:Traces:MaxExportBatchSize",
    "Logging:LogLevel:Default",
    "Logging:LogLevel:*", /* config/logging.h: dotmon's own log */
    "Logging:Console:LogLevel:*",
    "Logging:Console:FormatterName",
    "Logging:Console:FormatterOptions:TimestampFormat",
    "Logging:Console:FormatterOptions:UseUtcTimestamp",
    "Logging:Console:FormatterOptions:IncludeScopes",
    "Logging:Console:FormatterOptions:SingleLine",
    "Logging:Console:FormatterOptions:ColorBehavior",
    "Logging:Console:FormatterOptions:JsonWriterOptions:Indented",
    "Logging:CaptureScopes",
    "GlobalCounter:IntervalSeconds",
    "GlobalCounter:Providers:*:IntervalSeconds",
    "GlobalCounter:MaxHistograms",
    "GlobalCounter:MaxTimeSeries",
    "DiagnosticPort:DeleteEndpointOnStartup",
    "Metrics:IncludeDefaultProviders",
    "Metrics:MetricCount",
    "Metrics:AllProcesses",
    "Metrics:Providers:*:ProviderName",
    "Metrics:Providers:*:CounterNames:*",
    "Metrics:Meters:*:MeterName",
    "Metrics:Meters:*:InstrumentNames:*",
    "RequestLimits:Trace:MaxConcurrency",
    "RequestLimits:Dump:MaxConcurrency",
    "Operations:MaxHistory",
    "Storage:DumpTempFolder",
    "Storage:DefaultSharedPath",
    "Storage:DumpTargetFolder",
    "Dump:TimeoutSeconds",
    "Trace:SpoolLimitMB",
    "Trace:StopTimeoutSeconds",
    "RequestLimits:GCDump:MaxConcurrency",
    "GCDump:TimeoutSeconds",
    "GCDump:MaxNodes",
    "GCDump:BufferSizeMB",
    "Memory:LimitMB",
    "DiagnosticPort",
    "DiagnosticPort:ConnectionMode",
    "DiagnosticPort:EndpointName",
    "DiagnosticPort:SocketMode",
    "DiagnosticPort:HoldSuspended",
    "DiagnosticPort:ForgetAfterSeconds",
    "DiagnosticPort:MaxConnections",
    "DiagnosticPort:TrustedUids",
    "DiagnosticPort:TrustedUids:*",
    "Identity:PodNameVariables",
    "Identity:PodNamespaceVariables",
    "Identity:ContainerNameVariables",
    "Timeouts:*", /* timeouts.c refuses a name that is not in its table */
    "CorsConfiguration:AllowedOrigins",
    "InProcessFeatures:Enabled", /* exceptions.c: dotmon's out-of-process equivalents */
    "InProcessFeatures:Exceptions:Enabled",
    "InProcessFeatures:Exceptions:TopLevelLimit",
    "InProcessFeatures:Exceptions:CollectionFilters:Include:*:ExceptionType",
    "InProcessFeatures:Exceptions:CollectionFilters:Include:*:TypeName",
    "InProcessFeatures:Exceptions:CollectionFilters:Include:*:MethodName",
    "InProcessFeatures:Exceptions:CollectionFilters:Include:*:ModuleName",
    "InProcessFeatures:Exceptions:CollectionFilters:Exclude:*:ExceptionType",
    "InProcessFeatures:Exceptions:CollectionFilters:Exclude:*:TypeName",
    "InProcessFeatures:Exceptions:CollectionFilters:Exclude:*:MethodName",
    "InProcessFeatures:Exceptions:CollectionFilters:Exclude:*:ModuleName",
    "Mcp:Enabled", /* agent/mcp/mcp.c: the MCP endpoint */
    "Mcp:AllowedOrigins",
    "Mcp:MaxSessions",
    "Mcp:MaxCallsPerSession",
    "Mcp:Tools:*:Enabled", /* mcp.c refuses a name that is no tool */
};

/* Sections read whole (every key under them is dotmon's): collection rules (rules_run.c). */
static const char *const known_prefixes[] = {
    "CollectionRules",
    "CollectionRuleDefaults",
    "Templates",
};

/*
 * dotnet-monitor settings (whole sections or keys, with everything under them) that dotmon does not
 * implement (yet): accepted and ignored, so existing manifests keep working. Anything else that is
 * not a known key is reported as unknown (a typo, most likely).
 */
static const char *const foreign_prefixes[] = {
    "InProcessFeatures",      "AzureAd", "Kestrel",
    "DotnetMonitorDebug",     "Logging", "Storage:SharedLibraryPath",
    "Authentication:AzureAd",
};

/* Whole-key match of key against a pattern whose '*' sections match any one section. */
static bool key_matches(const char *key, const char *pattern)
{
    while (*pattern != '\0') {
        if (*pattern == '*') {
            if (*key == '\0' || *key == ':') {
                return false;
            }
            while (*key != '\0' && *key != ':') {
                key++;
            }
            pattern++;
            continue;
        }
        if (tolower((unsigned char)*key) != tolower((unsigned char)*pattern)) {
            return false;
        }
        key++;
        pattern++;
    }
    return *key == '\0';
}

enum config_key_kind config_key_kind(const char *key)
{
    /* Egress:* is read whole by egress_set_parse, which names every key it cannot use (an
     * unknown type or setting is an error there, not a warning). */
    if (config_key_under(key, "Egress")) {
        return CONFIG_KEY_KNOWN;
    }
    for (size_t i = 0; i < sizeof(known_keys) / sizeof(known_keys[0]); i++) {
        if (key_matches(key, known_keys[i])) {
            return CONFIG_KEY_KNOWN;
        }
    }
    for (size_t i = 0; i < sizeof(known_prefixes) / sizeof(known_prefixes[0]); i++) {
        if (config_key_under(key, known_prefixes[i])) {
            return CONFIG_KEY_KNOWN;
        }
    }
    for (size_t i = 0; i < sizeof(foreign_prefixes) / sizeof(foreign_prefixes[0]); i++) {
        if (config_key_under(key, foreign_prefixes[i])) {
            return CONFIG_KEY_FOREIGN;
        }
    }
    return CONFIG_KEY_UNKNOWN;
}

bool config_key_under(const char *key, const char *prefix)
{
    size_t n = strlen(prefix);
    return strncasecmp(key, prefix, n) == 0 && (key[n] == '\0' || key[n] == ':');
}

int config_children(const struct config *c, const char *key, struct config_child *out, size_t max,
                    size_t *n)
{
    size_t kl = strlen(key);
    *n = 0;
    for (size_t i = 0; i < c->n; i++) {
        const char *k = c->v[i].key;
        if (!config_key_under(k, key) || k[kl] != ':') {
            continue;
        }
        struct config_child ch = {.name = k + kl + 1, .len = strcspn(k + kl + 1, ":")};
        size_t at = 0; /* where ch goes in the ordered list */
        while (at < *n &&
               ascii_config_segment_compare(out[at].name, out[at].len, ch.name, ch.len) < 0) {
            at++;
        }
        bool known = false; /* among those equal in order ("01" and "1" are two children) */
        for (size_t j = at;
             !known && j < *n &&
             ascii_config_segment_compare(out[j].name, out[j].len, ch.name, ch.len) == 0;
             j++) {
            known = out[j].len == ch.len && strncasecmp(out[j].name, ch.name, ch.len) == 0;
        }
        if (known) {
            continue;
        }
        if (*n == max) {
            return AGENT_E_TOOBIG;
        }
        memmove(out + at + 1, out + at, (*n - at) * sizeof(*out));
        out[at] = ch;
        (*n)++;
    }
    return 0;
}

bool config_key_is_secret(const char *key)
{
    static const char *const secret_suffixes[] = {"PublicKey",
                                                  "Password",
                                                  "KeyPath",
                                                  "ConnectionString",
                                                  "AccountKey",
                                                  "ClientSecret",
                                                  "SecretAccessKey",
                                                  "SessionToken",
                                                  "SharedAccessSignature",
                                                  "QueueSharedAccessSignature"};
    /* OTLP headers carry API keys (OpenTelemetry:Headers, OpenTelemetry:<Signal>:Headers). */
    if (config_key_under(key, "OpenTelemetry")) {
        const char *tail = strrchr(key, ':');
        if (tail != NULL && strcasecmp(tail + 1, "Headers") == 0) {
            return true;
        }
    }
    /* Egress:Properties holds the secrets that *Name settings refer to: every value is one. */
    if (config_key_under(key, "Egress:Properties") && strlen(key) > strlen("Egress:Properties")) {
        return true;
    }
    const char *last = strrchr(key, ':');
    last = last ? last + 1 : key;
    for (size_t i = 0; i < sizeof(secret_suffixes) / sizeof(secret_suffixes[0]); i++) {
        if (strcasecmp(last, secret_suffixes[i]) == 0) {
            return true;
        }
    }
    return false;
}
