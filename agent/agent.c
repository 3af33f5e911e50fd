/* SPDX-License-Identifier: MIT */
#include "agent.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "agent_tls.h"
#include "api.h"
#include "apikey.h"
#include "artifact.h"
#include "auth.h"
#include "buf.h"
#include "bufpool.h"
#include "dsession.h"
#include "egress.h"
#include "err.h"
#include "ev_gcheap.h"
#include "exceptions.h"
#include "http_server.h"
#include "ipc_discovery.h"
#include "ipc_listen.h"
#include "log.h"
#include "mcp.h"
#include "membudget.h"
#include "metrics.h"
#include "num.h"
#include "otel.h"
#include "otel_proc.h"
#include "rules.h"
#include "rules_run.h"
#include "shdir.h"

#define DEFAULT_METRICS_URL "http://localhost:52325"
/* Descriptors kept free of HTTP connections: runtimes' exchanges, traces, dumps, the loop. */
#define FD_RESERVE 128

static const char cat[] = "dotmon";

/* ---- default process filters (DefaultProcess:Filters) ---- */

/*
 * Reads DefaultProcess:Filters with the collection rules' reader (the same descriptors, both
 * forms: {Key, Value, MatchType} and the short {ProcessName: "x"}, docs/api.md §2). Each
 * problem is logged; any makes start-up fail.
 */
static int load_filters(struct agent *a)
{
    struct rules_kv *kv = calloc(a->cfg->n + 1, sizeof(*kv));
    if (kv == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < a->cfg->n; i++) {
        kv[i] = (struct rules_kv){.key = a->cfg->v[i].key, .value = a->cfg->v[i].value};
    }
    int rc = rules_filter_list_load(kv, a->cfg->n, "DefaultProcess:Filters", &a->filter_list);
    free(kv);
    if (rc != 0) {
        return rc;
    }
    for (size_t i = 0; i < a->filter_list->nerrors; i++) {
        log_error(cat, "%s", a->filter_list->errors[i]);
    }
    if (a->filter_list->nerrors > 0) {
        return AGENT_E_INVAL;
    }
    a->filters = a->filter_list->filters;
    a->nfilters = a->filter_list->nfilters;
    return 0;
}

/* Names every setting dotmon will not use: a typo should not go unnoticed. */
static void report_settings(const struct config *cfg)
{
    for (size_t i = 0; i < cfg->n; i++) {
        const struct config_entry *e = &cfg->v[i];
        enum config_key_kind k = config_key_kind(e->key);
        if (k == CONFIG_KEY_UNKNOWN) {
            log_warn(cat, "unknown setting %s (from %s) is ignored; check its name", e->key,
                     e->source);
        } else if (k == CONFIG_KEY_FOREIGN) {
            log_info(cat,
                     "setting %s (from %s) is a dotnet-monitor feature not implemented by "
                     "dotmon; ignored",
                     e->key, e->source);
        }
    }
}

/* ---- listen mode (DiagnosticPort) ---- */

/* DiagnosticPort:SocketMode: an octal permission string such as "0600" or "660". */
static int parse_socket_mode(const char *s, unsigned *out)
{
    size_t n = strlen(s);
    if (n == 0 || n > 4) {
        return AGENT_E_INVAL;
    }
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '7') {
            return AGENT_E_INVAL;
        }
        v = v * 8 + (unsigned)(s[i] - '0');
    }
    if (v == 0 || v > 0777) {
        return AGENT_E_INVAL;
    }
    *out = v;
    return 0;
}

/*
 * Listen mode, by dotnet-monitor's rules (its DiagnosticPortPostConfigureOptions):
 *  - `--diagnostic-port PATH`, or a plain value for `DiagnosticPort`, is listen mode at PATH;
 *  - `DiagnosticPort:ConnectionMode` Listen binds `DiagnosticPort:EndpointName`, by default
 *    `dotnet-monitor.sock` inside `Storage:DefaultSharedPath`; Connect (the default) ignores the
 *    name;
 *  - a `Storage:DefaultSharedPath` alone is connect mode (dotnet-monitor's test
 *    DefaultDiagnosticPort_NotSupported_ConnectMode): it names the socket's folder only once
 *    ConnectionMode is Listen, and is otherwise the dump folder (without DumpTempFolder).
 * A relative path is taken inside Storage:DefaultSharedPath (and needs it). dotmon's own keys:
 * DiagnosticPort:SocketMode, :HoldSuspended, :ForgetAfterSeconds; dotnet-monitor's
 * DiagnosticPort:MaxConnections.
 */
/*
 * Which socket listen mode binds, from dotnet-monitor's settings (and --diagnostic-port):
 * returns 1 with *path (perhaps relative to Storage:DefaultSharedPath) and *from (the setting
 * that named it, for messages), 0 for connect mode, or AGENT_E_INVAL (logged).
 */
static int listen_path_setting(struct agent *a, const char *shared, const char **path,
                               const char **from)
{
    const struct config *cfg = a->cfg;
    const char *mode = config_get(cfg, "DiagnosticPort:ConnectionMode");
    const char *name = config_get(cfg, "DiagnosticPort:EndpointName");
    const char *simple = config_get(cfg, "DiagnosticPort");
    bool has_name = name != NULL && *name != '\0';
    if (a->opts->diagnostic_port != NULL) {
        *path = a->opts->diagnostic_port;
        *from = "--diagnostic-port";
        return 1;
    }
    if (simple != NULL && *simple != '\0') {
        *path = simple;
        *from = "DiagnosticPort";
        return 1;
    }
    if (mode != NULL && *mode != '\0') {
        if (strcasecmp(mode, "Connect") == 0) {
            if (has_name) {
                log_warn(cat, "DiagnosticPort:EndpointName is ignored in connect mode");
            }
            return 0;
        }
        if (strcasecmp(mode, "Node") == 0) {
            /* dotmon's own (docs/ipc.md §6): every runtime on the node, through /proc. */
            if (has_name) {
                log_warn(cat, "DiagnosticPort:EndpointName is ignored in node mode");
            }
            a->node_mode = true;
            return 0;
        }
        if (strcasecmp(mode, "Listen") != 0) {
            log_error(cat, "DiagnosticPort:ConnectionMode: '%s' is not Connect, Listen or Node",
                      mode);
            return AGENT_E_INVAL;
        }
        if (!has_name && shared == NULL) {
            log_error(cat, "DiagnosticPort:ConnectionMode is Listen, but neither "
                           "DiagnosticPort:EndpointName nor Storage:DefaultSharedPath names the "
                           "socket to bind");
            return AGENT_E_INVAL;
        }
        *path = has_name ? name : "dotnet-monitor.sock";
        *from = has_name ? "DiagnosticPort:EndpointName" : "Storage:DefaultSharedPath";
        return 1;
    }
    if (has_name) {
        log_warn(cat, "DiagnosticPort:EndpointName is ignored without "
                      "DiagnosticPort:ConnectionMode=Listen (connect mode)");
        return 0;
    }
    return 0;
}

/* The socket's absolute path into full (a sun_path fits it), or AGENT_E_INVAL (logged). */
static int listen_full_path(const char *path, const char *from, const char *shared, char *full,
                            size_t cap)
{
    int n;
    if (path[0] == '/') {
        n = snprintf(full, cap, "%s", path);
    } else if (shared != NULL && shared[0] == '/') {
        size_t sl = strlen(shared);
        while (sl > 1 && shared[sl - 1] == '/') {
            sl--;
        }
        n = snprintf(full, cap, "%.*s/%s", (int)sl, shared, path);
    } else {
        log_error(cat,
                  "%s: '%s' must be an absolute path (or relative to an absolute "
                  "Storage:DefaultSharedPath)",
                  from, path);
        return AGENT_E_INVAL;
    }
    struct sockaddr_un sa;
    if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
        log_error(cat, "%s: the socket path '%s' is longer than a Unix socket allows (%zu bytes)",
                  from, n >= 0 && (size_t)n < cap ? full : path, sizeof(sa.sun_path) - 1);
        return AGENT_E_INVAL;
    }
    return 0;
}

/* Listen mode's other settings: socket mode, hold, forget delay, connection cap. */
static int listen_options(struct agent *a, const char *full)
{
    const struct config *cfg = a->cfg;
    a->listen_socket_mode = 0600;
    const char *sm = config_get(cfg, "DiagnosticPort:SocketMode");
    if (sm != NULL && *sm != '\0') {
        if (parse_socket_mode(sm, &a->listen_socket_mode) != 0) {
            log_error(cat,
                      "DiagnosticPort:SocketMode: '%s' is not an octal mode from 0001 to "
                      "0777 (e.g. 0600, 0660)",
                      sm);
            return AGENT_E_INVAL;
        }
        if ((a->listen_socket_mode & 0002) != 0) {
            log_warn(cat,
                     "DiagnosticPort:SocketMode %04o lets any local user connect to %s and "
                     "pose as a .NET runtime",
                     a->listen_socket_mode, full);
        }
    }
    int hold = config_get_bool(cfg, "DiagnosticPort:HoldSuspended", 0);
    if (hold < 0) {
        log_error(cat, "DiagnosticPort:HoldSuspended: '%s' is not true or false",
                  config_get(cfg, "DiagnosticPort:HoldSuspended"));
        return AGENT_E_INVAL;
    }
    /* dotnet-monitor's DeleteEndpointOnStartup deletes whatever sits at the socket's path; dotmon
     * always replaces a stale socket file (one nobody accepts on, ipc_listen.c) and never a live
     * socket or another kind of file, true or false: the setting is checked, nothing more. */
    if (config_get_bool(cfg, "DiagnosticPort:DeleteEndpointOnStartup", 0) < 0) {
        log_error(cat, "DiagnosticPort:DeleteEndpointOnStartup: '%s' is not true or false",
                  config_get(cfg, "DiagnosticPort:DeleteEndpointOnStartup"));
        return AGENT_E_INVAL;
    }
    uint64_t max_conn = 0; /* DiagnosticPort:ForgetAfterSeconds: timeouts.c */
    if (config_get_uint(cfg, "DiagnosticPort:MaxConnections", 1, 65535, &max_conn) != 0) {
        return AGENT_E_INVAL;
    }
    a->listen_hold = hold == 1;
    a->listen_max_connections = (size_t)max_conn;
    return 0;
}

static int setup_listen(struct agent *a)
{
    const char *shared = config_get(a->cfg, "Storage:DefaultSharedPath");
    if (shared != NULL && *shared == '\0') {
        shared = NULL;
    }
    const char *path = NULL;
    const char *from = NULL; /* where the path came from, for messages */
    int rc = listen_path_setting(a, shared, &path, &from);
    if (rc <= 0) {
        return rc;
    }
    char full[4096];
    rc = listen_full_path(path, from, shared, full, sizeof(full));
    rc = rc ? rc : listen_options(a, full);
    if (rc != 0) {
        return rc;
    }
    a->listen_path = strdup(full);
    return a->listen_path != NULL ? 0 : -ENOMEM;
}

/*
 * DiagnosticPort:TrustedUids (dotmon's own): the users besides dotmon's own whose runtimes it
 * talks to, as a list ("1000,1001" or "1000;1001", handy in an environment variable) or a JSON
 * array (DiagnosticPort:TrustedUids:0, :1, ...).
 */
static int add_trusted(struct agent *a, const char *key, const char *list)
{
    const char *p = list;
    while (*p != '\0') {
        while (*p == ' ' || *p == ',' || *p == ';') {
            p++;
        }
        if (*p == '\0') {
            break;
        }
        uint64_t v = 0;
        size_t used = num_prefix_u64(p, strlen(p), 10, UINT32_MAX - 1, &v);
        p += used;
        if (used == 0 || (*p != '\0' && *p != ' ' && *p != ',' && *p != ';')) {
            log_error(cat, "%s: '%s' is not a list of numeric uids (e.g. 1000,1001)", key, list);
            return AGENT_E_INVAL;
        }
        if (a->trust.nuids >= IPC_TRUST_MAX_UIDS) {
            log_error(cat, "%s: at most %d uids", key, IPC_TRUST_MAX_UIDS);
            return AGENT_E_INVAL;
        }
        a->trust.uids[a->trust.nuids++] = (uint32_t)v;
    }
    return 0;
}

static int setup_trust(struct agent *a)
{
    const char *key = "DiagnosticPort:TrustedUids";
    const char *v = config_get(a->cfg, key);
    if (v != NULL && add_trusted(a, key, v) != 0) {
        return AGENT_E_INVAL;
    }
    for (size_t i = 0; i < a->cfg->n; i++) {
        const char *k = a->cfg->v[i].key;
        if (config_key_under(k, key) && k[strlen(key)] == ':' &&
            add_trusted(a, k, a->cfg->v[i].value) != 0) {
            return AGENT_E_INVAL;
        }
    }
    if (a->trust.nuids > 0) {
        char list[IPC_TRUST_MAX_UIDS * 12] = "";
        size_t n = 0;
        for (size_t i = 0; i < a->trust.nuids && n < sizeof(list); i++) {
            int w = snprintf(list + n, sizeof(list) - n, "%s%u", i ? "," : "", a->trust.uids[i]);
            n += w > 0 ? (size_t)w : 0;
        }
        log_info(cat, "runtimes of uid %u (dotmon's) and of uids %s are watched",
                 (unsigned)geteuid(), list);
    }
    return 0;
}

/*
 * Identity:PodNameVariables, Identity:PodNamespaceVariables, Identity:ContainerNameVariables
 * (dotmon's own): which of a process's environment variables name its pod, namespace and container
 * (';'-separated, the first set wins; "" reads none).
 */
static int setup_identity(struct agent *a)
{
    ipc_identity_vars_default(&a->identity_vars);
    static const char *const keys[] = {"Identity:PodNameVariables",
                                       "Identity:PodNamespaceVariables",
                                       "Identity:ContainerNameVariables"};
    char *fields[] = {a->identity_vars.pod_name, a->identity_vars.pod_namespace,
                      a->identity_vars.container_name};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = config_get(a->cfg, keys[i]);
        if (v == NULL) {
            continue;
        }
        if (strlen(v) >= IPC_IDENTITY_VARS_MAX) {
            log_error(cat, "%s: at most %d bytes", keys[i], IPC_IDENTITY_VARS_MAX - 1);
            return AGENT_E_INVAL;
        }
        snprintf(fields[i], IPC_IDENTITY_VARS_MAX, "%s", v);
    }
    return 0;
}

/* A copy of path without trailing slashes; NULL (logged) unless absolute. */
static char *dir_setting(const char *key, const char *path)
{
    if (path[0] != '/') {
        log_error(cat, "%s must be an absolute path, not '%s'", key, path);
        return NULL;
    }
    char *d = strdup(path);
    if (d == NULL) {
        return NULL;
    }
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') {
        d[--n] = '\0';
    }
    return d;
}

/*
 * Dump folders: Storage:DumpTempFolder, else Storage:DefaultSharedPath (dotnet-monitor's names),
 * else the socket folder ($TMPDIR or /tmp). Storage:DumpTargetFolder (dotmon's own) is the same
 * folder as the apps see it, when it is mounted at another path there.
 */
static int setup_dump_dirs(struct agent *a)
{
    const char *key = "Storage:DumpTempFolder";
    const char *dir = config_get(a->cfg, key);
    if (dir == NULL || *dir == '\0') {
        key = "Storage:DefaultSharedPath";
        dir = config_get(a->cfg, key);
    }
    if (dir == NULL || *dir == '\0') {
        key = "TMPDIR";
        dir = a->diag_dir;
    }
    a->dump_dir = dir_setting(key, dir);
    if (a->dump_dir == NULL) {
        return AGENT_E_INVAL;
    }
    /* Shared with the app on purpose (writable by others is fine), but no folder on the way
     * another uid owns or can write without the sticky bit, and no link of theirs. A configured
     * folder that does not exist yet is made (0700, dotmon's uid: its runtimes share that uid
     * unless DiagnosticPort:TrustedUids says otherwise), as dotnet-monitor's DumpService makes
     * its DumpTempFolder before each dump. */
    char why[1024];
    struct stat st;
    unsigned trust = SHDIR_TRUST_SHARED;
    bool made = false;
    if (strcmp(key, "TMPDIR") != 0 && stat(a->dump_dir, &st) != 0 && errno == ENOENT) {
        trust |= SHDIR_TRUST_MKDIR;
        made = true;
    }
    int trc = shdir_check_trusted(a->dump_dir, trust, why, sizeof(why));
    if (made && trc == 0) {
        log_info(cat, "the dump folder %s (%s) did not exist: created (mode 0700)", a->dump_dir,
                 key);
    }
    if (trc == AGENT_E_UNTRUSTED) {
        log_error(cat, "dumps are refused: the dump folder (%s) is not trusted: %s", key, why);
        a->dump_refused = strdup(why);
        if (a->dump_refused == NULL) {
            return -ENOMEM;
        }
    }
    if (stat(a->dump_dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        log_warn(cat,
                 "the dump folder %s (%s) is not a folder dotmon can use; dumps will fail "
                 "until it is (Storage:DumpTempFolder)",
                 a->dump_dir, key);
    }
    const char *target = config_get(a->cfg, "Storage:DumpTargetFolder");
    a->dump_target_dir = dir_setting("Storage:DumpTargetFolder",
                                     target != NULL && *target != '\0' ? target : a->dump_dir);
    return a->dump_target_dir != NULL ? 0 : AGENT_E_INVAL;
}

int agent_egress_parse(const struct config *cfg, struct egress_set **out, char **settings,
                       struct buf *errors)
{
    struct egress_kv *kv = calloc(cfg->n > 0 ? cfg->n : 1, sizeof(*kv));
    if (kv == NULL) {
        return UV_ENOMEM;
    }
    struct buf all;
    buf_init(&all, 0);
    size_t n = 0;
    int rc = 0;
    for (size_t i = 0; i < cfg->n; i++) {
        if (config_key_under(cfg->v[i].key, "Egress")) {
            kv[n].key = cfg->v[i].key;
            kv[n].value = cfg->v[i].value;
            n++;
            rc = rc ? rc : buf_printf(&all, "%s=%s\n", cfg->v[i].key, cfg->v[i].value);
        }
    }
    rc = rc ? rc : egress_set_parse(kv, n, out, errors);
    if (rc == 0 && settings != NULL) {
        *settings = strdup(buf_cstr(&all));
        if (*settings == NULL) {
            egress_set_free(*out);
            *out = NULL;
            rc = UV_ENOMEM;
        }
    }
    /* The entries may hold secrets: no copy outlives this call but the one handed out. */
    if (all.p != NULL) {
        OPENSSL_cleanse(all.p, all.cap);
    }
    buf_fini(&all);
    free(kv);
    return rc;
}

void agent_egress_report(const struct buf *errors, bool log)
{
    const char *line = buf_size(errors) > 0 ? (const char *)buf_data(errors) : "";
    size_t left = buf_size(errors);
    while (left > 0) {
        const char *nl = memchr(line, '\n', left);
        size_t len = nl != NULL ? (size_t)(nl - line) : left;
        if (log) {
            log_error(cat, "invalid egress configuration: %.*s", (int)len, line);
        } else {
            fprintf(stderr, "dotmon: invalid egress configuration: %.*s\n", (int)len, line);
        }
        len += nl != NULL ? 1 : 0;
        line += len;
        left -= len;
    }
}

/* Egress:* at start-up: every problem named, and dotmon does not start with any. */
static int setup_egress(struct agent *a)
{
    struct buf errors;
    buf_init(&errors, 0);
    int rc = agent_egress_parse(a->cfg, &a->egress, &a->egress_settings, &errors);
    if (rc == AGENT_E_INVAL) {
        agent_egress_report(&errors, true);
    } else if (rc != 0) {
        log_error(cat, "cannot read the egress configuration: %s", agent_strerror(rc));
    } else {
        for (size_t i = 0; i < egress_set_count(a->egress); i++) {
            const struct egress_provider *p = egress_set_at(a->egress, i);
            log_info(cat, "egress provider %s (%s)", egress_provider_name(p),
                     egress_provider_type(p) == EGRESS_FILESYSTEM ? "FileSystem" : "S3Storage");
        }
    }
    buf_fini(&errors);
    return rc;
}

/*
 * dotmon's memory budget (common/membudget.h), set once before anything is charged:
 * Memory:LimitMB when given (0: unlimited), else the cgroup's memory limit less headroom
 * (membudget_from_limit: limit - max(16 MiB, limit / 4)), else unlimited.
 */
static int setup_memory(struct agent *a)
{
    const uint64_t mib = 1024 * 1024;
    uint64_t setting = UINT64_MAX;
    if (config_get_uint(a->cfg, "Memory:LimitMB", 0, MEMBUDGET_MAX_MB, &setting) != 0) {
        return AGENT_E_INVAL;
    }
    uint64_t limit = 0;
    if (membudget_cgroup_limit(&limit) != 0) {
        limit = 0;
    }
    a->mem_cgroup_limit = limit;
    /* DOTMON_MEMORY_LIMIT_MB: what `dotmon convert` reads (convert.c), also taken here when
     * the setting is absent (the tests' way to set a budget without a configuration). */
    const char *from = setting != UINT64_MAX ? ", from Memory:LimitMB" : "";
    uint64_t env_mb = 0;
    int env_rc = setting == UINT64_MAX ? membudget_env_mb(&env_mb) : -ENOENT;
    if (env_rc == 0) {
        setting = env_mb;
        from = ", from DOTMON_MEMORY_LIMIT_MB";
    } else if (env_rc != -ENOENT) {
        log_warn(cat, "DOTMON_MEMORY_LIMIT_MB is not a number of MiB up to %llu: ignored",
                 (unsigned long long)MEMBUDGET_MAX_MB);
    }
    uint64_t total = setting != UINT64_MAX ? setting * mib : membudget_from_limit(limit);
    membudget_set(total);
    char lim[64] = "none";
    if (limit > 0) {
        snprintf(lim, sizeof(lim), "%llu MiB", (unsigned long long)(limit / mib));
    }
    if (total == 0) {
        log_info(cat, "memory budget unlimited (cgroup limit %s; Memory:LimitMB sets one)", lim);
    } else {
        log_info(cat, "memory budget %llu MiB (cgroup limit %s%s)",
                 (unsigned long long)(total / mib), lim, from);
    }
    if (setting != UINT64_MAX && limit > 0 && total > limit - limit / 4) {
        log_warn(cat,
                 "Memory:LimitMB (%llu) leaves less than a quarter of the cgroup limit (%s) to "
                 "dotmon's own code and buffers: the kernel may kill it before the budget is used",
                 (unsigned long long)setting, lim);
    }
    return 0;
}

/*
 * The agent went idle: no collection job has run for Timeouts:IdleTrimMs. What the jobs churned
 * through (a gcdump's graph, a relay's buffers, a dump's reads, their answers' last writes) goes
 * back to the system here, once per quiet spell, off the hot path: the heap's free pages
 * (malloc_trim also releases free pages inside the heap, not only its top). Anything else that
 * caches memory for jobs gives it back from here too.
 */
static void agent_went_idle(struct agent *a)
{
    (void)a;
    size_t blocks = bufpool_trim(); /* the relays' read buffers (common/bufpool.h) */
    malloc_trim(0);
    log_debug(cat, "idle: %zu KiB of relay buffers and the heap's free pages given back",
              blocks / 1024);
}

static void on_idle_trim(uv_timer_t *t)
{
    struct agent *a = t->data;
    if (a->collect.live == 0 && a->collect.closing == 0) {
        agent_went_idle(a);
    }
}

/* collect/job.h on_idle: the last job's memory is freed, but its answer may still hold the last
 * bytes being written (a trace's spool, HTTP writes): agent_went_idle a little later. A new job
 * meanwhile makes that a no-op; the next last job re-arms it. */
static void on_collect_idle(struct collect_ctx *ctx)
{
    struct agent *a = (struct agent *)(void *)((char *)ctx - offsetof(struct agent, collect));
    if (a->idle_trim_on && !a->stopping) {
        uv_timer_start(&a->idle_trim, on_idle_trim, agent_timeout(a, TIMEOUT_IDLE_TRIM), 0);
    }
}

/* The MCP endpoint (mcp.h: its settings and its tools' schemas are checked here, so a bad one
 * stops dotmon before it listens), then the https:// listeners' TLS. */
static int setup_mcp_tls(struct agent *a)
{
    int rc = mcp_new(a, &a->mcp);
    return rc != 0 ? rc : agent_tls_init(a);
}

int agent_init(struct agent *a, uv_loop_t *loop, const struct cli_options *opts,
               const struct config *cfg)
{
    memset(a, 0, sizeof(*a));
    a->loop = loop;
    a->opts = opts;
    a->cfg = cfg;
    char terr[256];
    if (timeouts_load(&a->timeouts, cfg, terr, sizeof(terr)) != 0) {
        log_error(cat, "%s", terr);
        return AGENT_E_INVAL;
    }
    a->sessions.cleanup_timeout_ms = agent_timeout(a, TIMEOUT_SESSION_CLEANUP);
    a->metric_sessions.cleanup_timeout_ms = agent_timeout(a, TIMEOUT_SESSION_CLEANUP);
    dsession_set_spec_admission(&a->metric_sessions); /* DiagnosticSource refreshers */
    /* First: a temporary key's next steps go to stdout before any log line (apikey.h). */
    int rc = apikey_setup(a);
    if (rc != 0) {
        return rc;
    }

    const char *tmp = getenv("TMPDIR");
    if (tmp == NULL || *tmp == '\0') {
        tmp = "/tmp";
    }
    a->diag_dir = strdup(tmp);
    if (a->diag_dir == NULL) {
        return -ENOMEM;
    }
    size_t n = strlen(a->diag_dir);
    while (n > 1 && a->diag_dir[n - 1] == '/') {
        a->diag_dir[--n] = '\0';
    }

    report_settings(cfg);
    rc = setup_memory(a);
    if (rc == 0) {
        rc = load_filters(a);
    }
    if (rc == 0) {
        rc = setup_listen(a);
    }
    if (rc == 0) {
        rc = setup_trust(a);
    }
    if (rc == 0) {
        rc = setup_identity(a);
    }
    if (rc == 0) {
        rc = setup_egress(a);
    }
    if (rc != 0) {
        return rc;
    }
    /* Dump:TimeoutSeconds, GCDump:TimeoutSeconds and Trace:StopTimeoutSeconds: timeouts.c */
    uint64_t max_traces = 3, max_dumps = 1, history = 100;
    double interval = 5;
    uint64_t max_hist = 20, max_series = 1000; /* dotnet-monitor's GlobalCounterOptionsDefaults */
    uint64_t spool_mb = 1024, max_gcdumps = OP_GCDUMP_LIMIT;
    uint64_t gcdump_nodes = EV_GCHEAP_DEFAULT_MAX_NODES, gcdump_buffer = 1024;
    if (config_get_uint(cfg, "RequestLimits:Trace:MaxConcurrency", 1, 64, &max_traces) != 0 ||
        config_get_uint(cfg, "RequestLimits:Dump:MaxConcurrency", 1, 16, &max_dumps) != 0 ||
        config_get_uint(cfg, "Operations:MaxHistory", 1, 100000, &history) != 0 ||
        config_get_float(cfg, "GlobalCounter:IntervalSeconds", 1, 86400, &interval) != 0 ||
        config_get_uint(cfg, "GlobalCounter:MaxHistograms", 1, INT32_MAX, &max_hist) != 0 ||
        config_get_uint(cfg, "GlobalCounter:MaxTimeSeries", 1, INT32_MAX, &max_series) != 0 ||
        config_get_uint(cfg, "Trace:SpoolLimitMB", 0, 1024 * 1024, &spool_mb) != 0 ||
        config_get_uint(cfg, "RequestLimits:GCDump:MaxConcurrency", 1, 16, &max_gcdumps) != 0 ||
        config_get_uint(cfg, "GCDump:MaxNodes", 1000, 1000000000, &gcdump_nodes) != 0 ||
        config_get_uint(cfg, "GCDump:BufferSizeMB", 1, 1024, &gcdump_buffer) != 0) {
        return AGENT_E_INVAL;
    }
    a->trace_spool_limit = spool_mb * 1024 * 1024;
    op_registry_init(&a->ops, (size_t)history, (size_t)max_traces, (size_t)max_dumps);
    a->ops.limit[OP_KIND_GCDUMP] = (size_t)max_gcdumps;
    a->collect.loop = a->loop;
    a->collect.ops = &a->ops;
    a->collect.end_artifact = artifact_end_job;
    a->collect.on_idle = on_collect_idle;
    a->gcdump_max_nodes = gcdump_nodes;
    a->gcdump_buffer_mb = (uint32_t)gcdump_buffer;
    rc = setup_dump_dirs(a);
    if (rc != 0) {
        return rc;
    }
    a->metrics_interval_sec = interval;
    a->metrics_max_histograms = (uint32_t)max_hist;
    a->metrics_max_time_series = (uint32_t)max_series;
    rc = rules_run_new(a, &a->rules);
    if (rc != 0) {
        if (rc == AGENT_E_INVAL) {
            log_error(cat, "the collection rules have configuration errors (above)");
        }
        return rc;
    }
    return setup_mcp_tls(a);
}

/* ---- start / stop ---- */

/* Bounds of dotmon's own duration histogram (dotmon_metrics_scrape_seconds): 100 us to 100 ms. */
static const uint64_t timing_bounds[] = {100000,  250000,   500000,   1000000,  2000000,
                                         5000000, 10000000, 25000000, 50000000, 100000000};
static const char *const timing_bounds_text[] = {"0.0001", "0.00025", "0.0005", "0.001", "0.002",
                                                 "0.005",  "0.01",    "0.025",  "0.05",  "0.1"};

static void timings_init(struct agent *a)
{
    a->scrape_hist.le_ns = timing_bounds;
    a->scrape_hist.le_text = timing_bounds_text;
    a->scrape_hist.n = sizeof(timing_bounds) / sizeof(timing_bounds[0]);
}

static void on_handle_closed(uv_handle_t *h)
{
    struct agent *a = h->data;
    a->open_handles--;
}

static void on_part_closed(void *ud)
{
    struct agent *a = ud;
    a->open_handles--;
}

/* OpenTelemetry export (otel/otel.h): NULL, at no cost, unless a signal is exported. */
static int start_otel(struct agent *a)
{
    char why[256] = "";
    int rc = otel_new(a, &a->otel, why, sizeof(why));
    if (rc != 0) {
        log_error(cat, "OpenTelemetry: %s", why[0] != '\0' ? why : agent_strerror(rc));
    }
    return rc;
}

static bool otel_exports_metrics(const struct agent *a)
{
    return a->otel != NULL && otel_settings(a->otel)->signal[OTLP_METRICS];
}

/*
 * The producers (otel_proc.h): one per watched process, fed by discovery and, for metrics, by the
 * continuous metrics pipeline's samples (with the exporter's own meters added to its sessions).
 */
static int start_otel_procs(struct agent *a)
{
    int rc = otel_procs_new(a, a->otel, &a->otel_procs);
    if (rc != 0 || a->otel_procs == NULL || !otel_exports_metrics(a)) {
        return rc;
    }
    rc = metrics_export_meters(a->metrics, otel_settings(a->otel)->meters);
    if (rc != 0 && rc != AGENT_E_TOOBIG) { /* too many meters: logged, the rest still go */
        return rc;
    }
    metrics_export_exp_histograms(a->metrics, otel_settings(a->otel)->exp_histograms);
    metrics_set_hook(a->metrics, otel_procs_on_sample, a->otel_procs);
    return 0;
}

/* The export queues are flushed (or the shutdown grace period ran out): the exporter goes. */
static void on_otel_flushed(void *ud)
{
    struct agent *a = ud;
    otel_free(a->otel);
    a->otel = NULL;
    a->open_handles--;
}

/* The OTel sessions drained (otel_proc.h): the exporter sends what is queued in what is left of
 * the grace period. */
static void on_otel_procs_closed(void *ud)
{
    struct agent *a = ud;
    if (a->otel == NULL) {
        return;
    }
    uint64_t grace = agent_timeout(a, TIMEOUT_SHUTDOWN_GRACE);
    uint64_t spent = uv_now(a->loop) - a->stop_started_ms;
    a->open_handles++;
    otel_shutdown(a->otel, spent < grace ? grace - spent : 1, on_otel_flushed, a);
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct agent *a = s->data;
    log_info(cat, "received %s, shutting down", signum == SIGINT ? "SIGINT" : "SIGTERM");
    agent_stop(a);
}

/*
 * A process is announced at Info once it has lived Timeouts:AnnounceAfterMs: `dotnet run`,
 * `dotnet build` and the SDK's tools start and end .NET processes by the dozen, and their
 * "discovered"/"is gone" pairs would fill the log. Those stay at Debug.
 */

static void newcomer_remove(struct agent *a, size_t i)
{
    free(a->newcomers[i].name);
    a->newcomers[i] = a->newcomers[--a->nnewcomers];
}

static void on_announce_timer(uv_timer_t *t)
{
    struct agent *a = t->data;
    uint64_t now = uv_now(a->loop);
    uint64_t next = 0;
    for (size_t i = 0; i < a->nnewcomers;) {
        struct agent_newcomer *n = &a->newcomers[i];
        if (now - n->since_ms >= agent_timeout(a, TIMEOUT_ANNOUNCE_AFTER)) {
            log_info(cat, "process %llu (%s, uid %s) discovered", (unsigned long long)n->pid,
                     n->name != NULL ? n->name : "?", n->uid);
            newcomer_remove(a, i);
            continue;
        }
        uint64_t left = agent_timeout(a, TIMEOUT_ANNOUNCE_AFTER) - (now - n->since_ms);
        next = (next == 0 || left < next) ? left : next;
        i++;
    }
    if (next > 0) {
        uv_timer_start(&a->announce_timer, on_announce_timer, next, 0);
    }
}

static void on_process_update(void *ud, const struct ipc_process *p, bool added)
{
    struct agent *a = ud;
    (void)added;
    rules_run_on_process_updated(a->rules, p);
}

static void on_process_change(void *ud, const struct ipc_process *p, bool added)
{
    struct agent *a = ud;
    metrics_on_process(a->metrics, p, added);
    exceptions_on_process(a->exceptions, p, added);
    otel_procs_on_process(a->otel_procs, p, added);
    rules_run_on_process(a->rules, p, added);
    if (added) {
        struct agent_newcomer *grown =
            realloc(a->newcomers, (a->nnewcomers + 1) * sizeof(*a->newcomers));
        if (grown == NULL) { /* announce it now rather than never */
            log_info(cat, "process %llu (%s, uid %s) discovered", (unsigned long long)p->pid,
                     p->name ? p->name : "?", p->uid);
            return;
        }
        a->newcomers = grown;
        struct agent_newcomer *n = &a->newcomers[a->nnewcomers++];
        n->pid = p->pid;
        memcpy(n->uid, p->uid, sizeof(n->uid));
        n->name = p->name != NULL ? strdup(p->name) : NULL;
        n->since_ms = uv_now(a->loop);
        log_debug(cat, "process %llu (%s, uid %s) discovered", (unsigned long long)p->pid,
                  p->name ? p->name : "?", p->uid);
        if (!a->stopping && !uv_is_active((uv_handle_t *)&a->announce_timer)) {
            uv_timer_start(&a->announce_timer, on_announce_timer,
                           agent_timeout(a, TIMEOUT_ANNOUNCE_AFTER), 0);
        }
        return;
    }
    for (size_t i = 0; i < a->nnewcomers; i++) {
        if (strcmp(a->newcomers[i].uid, p->uid) == 0) {
            log_debug(cat, "process %llu (uid %s) is gone after %llu ms",
                      (unsigned long long)p->pid, p->uid,
                      (unsigned long long)(uv_now(a->loop) - a->newcomers[i].since_ms));
            newcomer_remove(a, i);
            return;
        }
    }
    log_info(cat, "process %llu (uid %s) is gone", (unsigned long long)p->pid, p->uid);
}

/* Splits a ';'-separated URL list and binds each; returns how many were bound. */
static size_t bind_urls(struct agent *a, const char *const *urls, size_t nurls, int tag)
{
    size_t bound = 0;
    for (size_t i = 0; i < nurls; i++) {
        char *copy = strdup(urls[i]);
        if (copy == NULL) {
            continue;
        }
        char *save = NULL;
        for (char *u = strtok_r(copy, ";", &save); u != NULL; u = strtok_r(NULL, ";", &save)) {
            while (*u == ' ') {
                u++;
            }
            if (*u == '\0') {
                continue;
            }
            size_t before = 0;
            while (http_server_port(a->http, before) >= 0) {
                before++;
            }
            int rc = http_server_listen(a->http, u, tag);
            if (rc != 0) {
                log_error(cat, "cannot bind %s: %s", u, agent_strerror(rc));
                continue;
            }
            int port = http_server_port(a->http, before);
            /* Print the URL with the real port (it differs when the URL asked for port 0). */
            const char *hostpart = strstr(u, "://");
            hostpart = hostpart ? hostpart + 3 : u;
            const char *colon = strrchr(hostpart, ':');
            const char *bracket = strrchr(hostpart, ']');
            size_t hostlen =
                (colon && (!bracket || colon > bracket)) ? (size_t)(colon - u) : strlen(u);
            log_info(cat, "Now listening on: %.*s:%d", (int)hostlen, u, port);
            bound++;
        }
        free(copy);
    }
    return bound;
}

/*
 * Dumps a previous dotmon abandoned (it stopped while a runtime was still writing one) are
 * deleted at start-up: dotmon's own names only, and only when older than any dump of this
 * configuration can still be in progress. Start-up may block; the loop is not running yet.
 */
static void sweep_stale_dumps(const struct agent *a)
{
    DIR *dir = opendir(a->dump_dir);
    if (dir == NULL) {
        return;
    }
    time_t cutoff = time(NULL) - (time_t)(agent_timeout(a, TIMEOUT_DUMP) / 1000) - 900;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t n = strlen(e->d_name);
        struct stat pst;
        if (strncmp(e->d_name, ".dotmon-", 8) == 0 &&
            fstatat(dirfd(dir), e->d_name, &pst, AT_SYMLINK_NOFOLLOW) == 0 &&
            S_ISDIR(pst.st_mode) && pst.st_uid == geteuid() && pst.st_mtime <= cutoff) {
            /* A private folder (common/shdir.h) of a dotmon killed mid-step: empty ones go. */
            (void)unlinkat(dirfd(dir), e->d_name, AT_REMOVEDIR);
            continue;
        }
        if (strncmp(e->d_name, "dotmon_", 7) != 0 || n < 12 ||
            strcmp(e->d_name + n - 4, ".dmp") != 0) {
            continue;
        }
        struct stat st;
        if (fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_mtime > cutoff) {
            continue;
        }
        /* Only that very file: the folder may be shared, and the name swapped meanwhile. */
        if (shdir_unlink_exact(dirfd(dir), e->d_name, st.st_dev, st.st_ino) == 0) {
            log_warn(cat, "deleted %s/%s, a dump left behind by an earlier run", a->dump_dir,
                     e->d_name);
        }
    }
    closedir(dir);
}

/* Kestrel's limits (its own names) into hcfg; zero keeps the server's default (1024). Its two
 * timeouts (RequestHeadersTimeout, KeepAliveTimeout) are rows of timeouts.h. */
static int http_limits(struct agent *a, struct http_server_config *hcfg)
{
    uint64_t max_conn = 0;
    if (config_get_uint(a->cfg, "Kestrel:Limits:MaxConcurrentConnections", 1, 1000000, &max_conn) !=
        0) {
        return AGENT_E_INVAL;
    }
    hcfg->header_timeout_ms = agent_timeout(a, TIMEOUT_HTTP_REQUEST_HEADERS);
    hcfg->idle_timeout_ms = agent_timeout(a, TIMEOUT_HTTP_KEEP_ALIVE);
    hcfg->write_timeout_ms = agent_timeout(a, TIMEOUT_HTTP_WRITE);
    hcfg->linger_ms = agent_timeout(a, TIMEOUT_HTTP_LINGER);
    hcfg->pressure_head_ms = agent_timeout(a, TIMEOUT_HTTP_PRESSURE_HEAD);
    hcfg->max_connections = (size_t)max_conn;
    /*
     * Every connection is a descriptor: past the open file limit accept() fails and libuv closes
     * new connections at once, probes included, before the eviction of idle connections could
     * make room. Keep the limit below it, with room for runtimes, traces and dumps.
     */
    struct rlimit rl;
    size_t want = max_conn > 0 ? (size_t)max_conn : 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        (rlim_t)want + FD_RESERVE > rl.rlim_cur) {
        size_t fit = rl.rlim_cur > 2 * FD_RESERVE ? (size_t)(rl.rlim_cur - FD_RESERVE)
                                                  : (size_t)(rl.rlim_cur / 2);
        log_msg(max_conn > 0 ? LOG_WARN : LOG_INFO, cat,
                "Kestrel:Limits:MaxConcurrentConnections lowered from %zu to %zu: the open file "
                "limit is %llu (raise it with ulimit -n or the container's nofile)",
                want, fit, (unsigned long long)rl.rlim_cur);
        hcfg->max_connections = fit > 0 ? fit : 1;
    }
    return 0;
}

/*
 * Discovery first: in listen mode the diagnostic socket then exists before dotmon says it
 * listens, so whoever waits for "Now listening on" can start apps pointed at it.
 */
static int start_discovery(struct agent *a)
{
    struct ipc_discovery_config dcfg;
    memset(&dcfg, 0, sizeof(dcfg));
    dcfg.dir = a->diag_dir;
    dcfg.node = a->node_mode;
    dcfg.probe_timeout_ms = agent_timeout(a, TIMEOUT_IPC_EXCHANGE);
    dcfg.rescan_ms = agent_timeout(a, TIMEOUT_DISCOVERY_RESCAN);
    dcfg.liveness_ms = agent_timeout(a, TIMEOUT_DISCOVERY_LIVENESS);
    dcfg.retry_max_ms = agent_timeout(a, TIMEOUT_DISCOVERY_RETRY_MAX);
    dcfg.trust = a->trust;
    dcfg.identity = &a->identity_vars;
    struct ipc_listen_config lcfg;
    memset(&lcfg, 0, sizeof(lcfg));
    if (a->listen_path != NULL) {
        /* Listen mode: runtimes connect to us; $TMPDIR is not watched (as in dotnet-monitor). */
        lcfg.path = a->listen_path;
        lcfg.socket_mode = a->listen_socket_mode;
        lcfg.probe_timeout_ms = agent_timeout(a, TIMEOUT_IPC_EXCHANGE);
        lcfg.advertise_timeout_ms = agent_timeout(a, TIMEOUT_LISTEN_ADVERTISE);
        lcfg.forget_after_ms = agent_timeout(a, TIMEOUT_LISTEN_FORGET);
        lcfg.retry_first_ms = agent_timeout(a, TIMEOUT_LISTEN_RETRY);
        lcfg.retry_max_ms = agent_timeout(a, TIMEOUT_LISTEN_RETRY_MAX);
        lcfg.park_ms = agent_timeout(a, TIMEOUT_LISTEN_PARK);
        lcfg.settle_ms = agent_timeout(a, TIMEOUT_LISTEN_SETTLE);
        lcfg.settle_step_ms = agent_timeout(a, TIMEOUT_LISTEN_SETTLE_STEP);
        lcfg.max_connections = a->listen_max_connections;
        /* With collection rules a runtime is held until its Startup rules' actions have started
         * (rules_run resumes it), as dotnet-monitor does. */
        lcfg.hold_suspended = a->listen_hold || a->rules != NULL;
        dcfg.listen = &lcfg;
    }
    int rc = ipc_discovery_new(a->loop, &dcfg, on_process_change, a, &a->disc);
    if (rc == 0) {
        ipc_discovery_set_update_cb(a->disc, on_process_update, a);
        a->open_handles++;
        rc = ipc_discovery_start(a->disc);
    }
    if (rc != 0) {
        if (a->listen_path != NULL) {
            log_error(cat, "cannot listen on %s for .NET runtimes: %s", a->listen_path,
                      agent_strerror(rc));
        } else {
            log_error(cat, "cannot watch %s for .NET runtimes: %s", a->diag_dir,
                      agent_strerror(rc));
        }
        return rc;
    }
    if (a->listen_path != NULL) {
        log_info(cat,
                 "listen mode: .NET runtimes started with DOTNET_DiagnosticPorts=%s connect "
                 "to dotmon%s",
                 a->listen_path,
                 a->listen_hold     ? " (held suspended until a trace starts)"
                 : a->rules != NULL ? " (held suspended until their collection rules have started)"
                                    : "");
    } else if (a->node_mode) {
        log_info(cat, "node mode: walking /proc for .NET runtimes in every container");
    } else {
        log_info(cat, "watching %s for .NET runtimes (connect mode)", a->diag_dir);
    }
    return 0;
}

/*
 * The artifact and metrics URLs. The merged configuration has them (settings.c: the command
 * line's --urls, --metricUrls and --metrics are its weakest source, as in dotnet-monitor),
 * each a ';'-separated list.
 */
static int bind_all_urls(struct agent *a)
{
    const char *cu = config_get(a->cfg, "Urls");
    const char *urls[1] = {(cu != NULL && *cu != '\0') ? cu : AGENT_DEFAULT_URL};
    if (bind_urls(a, urls, 1, AGENT_TAG_ARTIFACTS) == 0) {
        log_error(cat, "no artifact URL could be bound");
        return AGENT_E_INVAL;
    }
    if (a->metrics_enabled) {
        const char *mu = config_get(a->cfg, "Metrics:Endpoints");
        const char *murls[1] = {(mu != NULL && *mu != '\0') ? mu : DEFAULT_METRICS_URL};
        bind_urls(a, murls, 1, AGENT_TAG_METRICS);
    }
    return 0;
}

int agent_start(struct agent *a)
{
    /* Signals first: a SIGTERM right after the first "Now listening" must stop us cleanly. */
    uv_signal_init(a->loop, &a->sig_int);
    uv_signal_init(a->loop, &a->sig_term);
    a->sig_int.data = a->sig_term.data = a;
    a->open_handles += 2;
    uv_signal_start(&a->sig_int, on_signal, SIGINT);
    uv_signal_start(&a->sig_term, on_signal, SIGTERM);
    uv_timer_init(a->loop, &a->announce_timer);
    a->announce_timer.data = a;
    a->open_handles++;
    uv_timer_init(a->loop, &a->idle_trim);
    a->idle_trim.data = a;
    uv_unref((uv_handle_t *)&a->idle_trim);
    a->idle_trim_on = true;
    a->open_handles++;
    timings_init(a);
    sweep_stale_dumps(a);
    struct http_server_config hcfg;
    memset(&hcfg, 0, sizeof(hcfg));
    int rc = http_limits(a, &hcfg);
    if (rc != 0) {
        return rc;
    }
    hcfg.tls = a->tls; /* https:// URLs (agent_tls.c); outlives the server */
    rc = http_server_new(a->loop, &hcfg, api_handle, a, &a->http);
    if (rc != 0) {
        log_error(cat, "cannot create the HTTP server: %s", agent_strerror(rc));
        return rc;
    }
    a->open_handles++;
    /* Metrics sessions follow discovery, so they exist before the first process is found. */
    a->metrics_enabled = config_get_bool(a->cfg, "Metrics:Enabled", 1) == 1;
    rc = start_otel(a);
    rc = rc ? rc : metrics_new(a, otel_exports_metrics(a), &a->metrics);
    rc = rc ? rc : exceptions_new(a, &a->exceptions);
    rc = rc ? rc : start_otel_procs(a);
    rc = rc ? rc : start_discovery(a);
    rc = rc ? rc : bind_all_urls(a);
    return rc ? rc : apikey_watch_start(a);
}

/*
 * Normally everything has closed long before. If not, something outside dotmon's control still
 * holds the loop open (a thread-pool call stuck in a hung volume): exit without waiting for it.
 * The timer is unreferenced, so it never keeps the loop alive by itself.
 */
static void on_shutdown_deadline(uv_timer_t *t)
{
    struct agent *a = t->data;
    log_error(cat, "shutdown did not finish within %llu ms (%d part(s) still closing); exiting now",
              (unsigned long long)agent_timeout(a, TIMEOUT_SHUTDOWN_DEADLINE), a->open_handles);
    fflush(stderr);
    fflush(stdout);
    _exit(3);
}

/*
 * Timeouts:ShutdownGraceMs is long enough for running traces to finish their rundown after
 * StopTracing, and dotmon is gone Timeouts:ShutdownDeadlineMs after SIGTERM whatever the runtimes,
 * clients and volumes do (a kubelet's grace period is 30 s by default).
 */
void agent_stop(struct agent *a)
{
    if (a->stopping) {
        return;
    }
    a->stopping = true;
    a->stop_started_ms = uv_now(a->loop);
    uv_timer_init(a->loop, &a->shutdown_deadline);
    a->shutdown_deadline.data = a;
    uv_timer_start(&a->shutdown_deadline, on_shutdown_deadline,
                   agent_timeout(a, TIMEOUT_SHUTDOWN_DEADLINE), 0);
    uv_unref((uv_handle_t *)&a->shutdown_deadline);
    /* Traces, logs, live metrics and profiles stop gracefully (clients get whole files, runtimes
     * keep no session; the HTTP server's grace period lets the rundowns finish); dumps being
     * written and heap snapshots are abandoned (collect/job.h, each collector's vtable). */
    collect_shutdown(&a->collect);
    /* Uploads of the artifacts that end now get until the HTTP server's grace period is over;
     * then they are aborted (nothing half-done left in the stores). */
    artifact_shutdown(a, agent_timeout(a, TIMEOUT_SHUTDOWN_GRACE));
    /* The producers hand their last metric values over, then the exporter flushes them. */
    metrics_set_hook(a->metrics, NULL, NULL);
    metrics_close(a->metrics); /* sessions stop in the background, bounded by their timeouts */
    a->metrics = NULL;
    exceptions_close(a->exceptions); /* the same */
    a->exceptions = NULL;
    /* MCP calls in flight are answered and their REST requests cancelled before the server's
     * grace period starts; the object stays for the cancellations to land (agent_fini frees it). */
    mcp_shutdown(a->mcp);
    /* The OTel sessions stop gracefully (what the runtimes still buffer is read and exported) in
     * half the grace period at most; then what is queued is sent within the rest of it, and what
     * is still unsent then is counted. */
    struct otel_procs *procs = a->otel_procs;
    a->otel_procs = NULL;
    otel_procs_close(procs, agent_timeout(a, TIMEOUT_SHUTDOWN_GRACE) / 2, on_otel_procs_closed, a);
    rules_run_close(a->rules);     /* freed by agent_fini: closing instances point at the rules */
    dsession_close_specs(a->loop); /* the DiagnosticSource refreshers go too */
    apikey_watch_stop(a);
    if (a->http != NULL) {
        http_server_close(a->http, agent_timeout(a, TIMEOUT_SHUTDOWN_GRACE), on_part_closed, a);
        a->http = NULL;
    }
    if (a->disc != NULL) {
        ipc_discovery_close(a->disc, on_part_closed, a);
        a->disc = NULL;
    }
    if (a->sig_int.loop != NULL && !uv_is_closing((uv_handle_t *)&a->sig_int)) {
        uv_close((uv_handle_t *)&a->sig_int, on_handle_closed);
    }
    if (a->sig_term.loop != NULL && !uv_is_closing((uv_handle_t *)&a->sig_term)) {
        uv_close((uv_handle_t *)&a->sig_term, on_handle_closed);
    }
    if (a->announce_timer.loop != NULL && !uv_is_closing((uv_handle_t *)&a->announce_timer)) {
        uv_close((uv_handle_t *)&a->announce_timer, on_handle_closed);
    }
    if (a->idle_trim_on) {
        a->idle_trim_on = false;
        uv_close((uv_handle_t *)&a->idle_trim, on_handle_closed);
    }
}

void agent_fini(struct agent *a)
{
    rules_filter_list_free(a->filter_list);
    a->filter_list = NULL;
    a->filters = NULL;
    a->nfilters = 0;
    apikey_fini(a);
    free(a->diag_dir);
    a->diag_dir = NULL;
    free(a->listen_path);
    a->listen_path = NULL;
    free(a->dump_dir);
    a->dump_dir = NULL;
    free(a->dump_refused);
    a->dump_refused = NULL;
    free(a->dump_target_dir);
    a->dump_target_dir = NULL;
    op_registry_fini(&a->ops);
    mcp_free(a->mcp);
    a->mcp = NULL;
    rules_run_free(a->rules);
    ring_registry_fini(&a->rings);
    a->rules = NULL;
    free(a->rules_settings);
    a->rules_settings = NULL;
    free(a->rules_refused);
    a->rules_refused = NULL;
    egress_set_free(a->egress);
    a->egress = NULL;
    if (a->egress_settings != NULL) {
        OPENSSL_cleanse(a->egress_settings, strlen(a->egress_settings));
        free(a->egress_settings);
        a->egress_settings = NULL;
    }
    agent_tls_fini(a);
    while (a->nnewcomers > 0) {
        newcomer_remove(a, a->nnewcomers - 1);
    }
    free(a->newcomers);
    a->newcomers = NULL;
}

struct rules_process agent_rules_process(const struct ipc_process *p)
{
    const struct ipc_identity *id = &p->identity;
    return (struct rules_process){.pid = (uint32_t)p->pid,
                                  .name = p->name,
                                  .command_line = p->command_line,
                                  .runtime_id = p->uid,
                                  .entrypoint_assembly = p->entrypoint_assembly,
                                  .pod_name = id->pod_name,
                                  .pod_namespace = id->pod_namespace,
                                  .container_id = id->container_id,
                                  .container_name = id->container_name};
}
