/* SPDX-License-Identifier: MIT */
/* dotmon entry point: parses the command line and runs one command. Only main decides to exit. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <uv.h>

#include "agent.h"
#include "auth.h"
#include "buf.h"
#include "cli.h"
#include "config.h"
#include "convert.h"
#include "egress.h"
#include "err.h"
#include "log.h"
#include "logging.h"
#include "memtrim.h"
#include "rules.h"
#include "rules_run.h"
#include "settings.h"

extern char **environ;

static int load_config(const struct cli_options *opts, struct config *cfg)
{
    char err[640];
    if (settings_load(opts, (const char *const *)environ, cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "dotmon: %s\n", err);
        return AGENT_E_INVAL;
    }
    if (logging_configure(cfg, err, sizeof(err)) != 0) {
        fprintf(stderr, "dotmon: %s\n", err);
        return AGENT_E_INVAL;
    }
    return 0;
}

static int run_generatekey(const struct cli_options *opts)
{
    struct auth_generated g;
    int rc = auth_generate((int64_t)time(NULL), opts->expiration_s, NULL, &g);
    if (rc != 0) {
        fprintf(stderr, "dotmon: cannot generate a key: %s\n", agent_strerror(rc));
        return 1;
    }
    if (opts->key_format == CLI_KEY_MACHINEJSON) {
        printf("{\"AuthorizationHeader\":\"Bearer %s\",\"Subject\":\"%s\",\"PublicKey\":\"%s\"}\n",
               g.token, g.subject, g.public_key_b64);
        auth_generated_fini(&g);
        return 0;
    }
    printf("Generated ApiKey for dotmon; use the following header for authorization:\n\n"
           "Authorization: Bearer %s\n\n",
           g.token);
    switch (opts->key_format) {
    case CLI_KEY_TEXT:
        printf("Settings in Text format:\nSubject: %s\nPublic Key: %s\n", g.subject,
               g.public_key_b64);
        break;
    case CLI_KEY_SHELL:
        printf("Settings in Shell format:\n"
               "export DotnetMonitor_Authentication__MonitorApiKey__Subject=\"%s\"\n"
               "export DotnetMonitor_Authentication__MonitorApiKey__PublicKey=\"%s\"\n",
               g.subject, g.public_key_b64);
        break;
    case CLI_KEY_CMD:
        printf("Settings in Cmd format:\n"
               "set DotnetMonitor_Authentication__MonitorApiKey__Subject=%s\n"
               "set DotnetMonitor_Authentication__MonitorApiKey__PublicKey=%s\n",
               g.subject, g.public_key_b64);
        break;
    case CLI_KEY_POWERSHELL:
        printf("Settings in PowerShell format:\n"
               "$env:DotnetMonitor_Authentication__MonitorApiKey__Subject=\"%s\"\n"
               "$env:DotnetMonitor_Authentication__MonitorApiKey__PublicKey=\"%s\"\n",
               g.subject, g.public_key_b64);
        break;
    case CLI_KEY_JSON:
    case CLI_KEY_MACHINEJSON:
    default:
        printf("Settings in Json format:\n"
               "{\n  \"Authentication\": {\n    \"MonitorApiKey\": {\n"
               "      \"Subject\": \"%s\",\n      \"PublicKey\": \"%s\"\n    }\n  }\n}\n",
               g.subject, g.public_key_b64);
        break;
    }
    auth_generated_fini(&g);
    return 0;
}

/* The egress providers as collect would build them: each problem named on stderr (collect would
 * refuse to start), and status 1. */
static int check_egress(const struct config *cfg)
{
    struct egress_set *set = NULL;
    struct buf errors;
    buf_init(&errors, 0);
    int rc = agent_egress_parse(cfg, &set, NULL, &errors);
    agent_egress_report(&errors, false);
    if (rc != 0 && rc != AGENT_E_INVAL) {
        fprintf(stderr, "dotmon: cannot read the egress configuration: %s\n", agent_strerror(rc));
    }
    egress_set_free(set);
    buf_fini(&errors);
    return rc == 0 ? 0 : 1;
}

/*
 * dotmon config show: the merged configuration on stdout; on stderr every problem. The exit
 * status follows one rule: 1 when collect would refuse to start with this configuration (an
 * Egress or CollectionRules error), 0 when it would start, warnings (settings ignored) included.
 */
static int run_config_show(const struct cli_options *opts, const struct config *cfg)
{
    if (opts->show_sources) {
        struct settings_paths paths;
        settings_paths((const char *const *)environ, &paths);
        printf("/* sources, weakest first: command line, DOTNET_URLS, ASPNETCORE_URLS, "
               "environment (unprefixed), user settings "
               "(%s), shared settings (%s), key-per-file (%s), environment (DotnetMonitor_), "
               "file (%s) */\n",
               paths.user_settings[0] ? paths.user_settings : "no HOME", paths.shared_settings,
               paths.shared_dir, opts->config_file != NULL ? opts->config_file : "none");
    }
    printf("{\n");
    for (size_t i = 0; i < cfg->n; i++) {
        const struct config_entry *e = &cfg->v[i];
        bool hide = !opts->config_full && config_key_is_secret(e->key);
        struct buf k, v; /* key-per-file values may hold newlines or quotes (a PEM key) */
        buf_init(&k, 0);
        buf_init(&v, 0);
        if (buf_append_json_escaped(&k, e->key) != 0 ||
            buf_append_json_escaped(&v, hide ? ":REDACTED:" : e->value) != 0) {
            buf_fini(&k);
            buf_fini(&v);
            return 1;
        }
        printf("  \"%s\": \"%s\"%s", buf_cstr(&k), buf_cstr(&v), i + 1 < cfg->n ? "," : "");
        buf_fini(&k);
        buf_fini(&v);
        if (opts->show_sources) {
            printf(" /* %s */", e->source);
        }
        printf("\n");
    }
    printf("}\n");
    /* The provider names the rules may use; the Egress section's own errors come last. */
    struct egress_set *egress = NULL;
    struct buf ignored;
    buf_init(&ignored, 0);
    int erc = agent_egress_parse(cfg, &egress, NULL, &ignored);
    buf_fini(&ignored);
    struct rules_config *rules = NULL;
    int code = 0;
    if (erc == UV_ENOMEM || rules_run_config(cfg, egress, &rules) != 0) {
        fprintf(stderr, "dotmon: cannot check the collection rules: out of memory\n");
        code = 1;
    } else {
        for (size_t i = 0; i < rules->nerrors; i++) {
            fprintf(stderr, "dotmon: collection rules: %s\n", rules->errors[i]);
        }
        for (size_t i = 0; i < rules->nwarnings; i++) {
            fprintf(stderr,
                    "dotmon: collection rules: %s (a warning: collect starts, and the action "
                    "fails when it runs)\n",
                    rules->warnings[i]);
        }
        code = rules->nerrors > 0 ? 1 : 0; /* collect would refuse to start */
        rules_config_free(rules);
    }
    egress_set_free(egress);
    for (size_t i = 0; i < cfg->n; i++) {
        enum config_key_kind k = config_key_kind(cfg->v[i].key);
        if (k != CONFIG_KEY_KNOWN) {
            fprintf(stderr, "dotmon: %s setting %s (from %s) is ignored\n",
                    k == CONFIG_KEY_UNKNOWN ? "unknown" : "unimplemented dotnet-monitor",
                    cfg->v[i].key, cfg->v[i].source);
        }
    }
    int ecode = check_egress(cfg);
    return code != 0 ? code : ecode;
}

static void close_walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        uv_close(h, NULL);
    }
}

/*
 * Every HTTP connection and every runtime exchange is a descriptor: take the soft limit up to
 * the hard one (a container's default soft limit is often 1024, the same as the default
 * Kestrel:Limits:MaxConcurrentConnections, leaving nothing for the runtimes).
 */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= rl.rlim_max) {
        return;
    }
    rlim_t old = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0) {
        log_info("dotmon", "open file limit raised from %llu to %llu", (unsigned long long)old,
                 (unsigned long long)rl.rlim_max);
    }
}

/*
 * Loading is over: the libraries' symbol and relocation tables are not read again
 * (common/memtrim.h). Read /proc/self/smaps and drop them on the pool, so that the first answer
 * does not wait for it.
 */
static struct {
    uv_work_t work;
    struct memtrim_stats st;
    int rc;
} loader_trim;

static void loader_trim_on_pool(uv_work_t *w)
{
    (void)w;
    loader_trim.rc = memtrim_loader_pages(&loader_trim.st);
}

static void loader_trim_done(uv_work_t *w, int status)
{
    (void)w;
    if (status == 0 && loader_trim.rc == 0) {
        log_debug("dotmon", "start-up: dropped %zu KiB of loader tables (%zu mappings)",
                  loader_trim.st.rss_kib, loader_trim.st.mappings);
    }
}

static int run_collect(const struct cli_options *opts, const struct config *cfg)
{
    uv_loop_t loop;
    int rc = uv_loop_init(&loop);
    if (rc != 0) {
        log_error("dotmon", "cannot create the event loop: %s", uv_strerror(rc));
        return 1;
    }
    /* A client that disconnects mid-write must not kill us. */
    signal(SIGPIPE, SIG_IGN);

    struct agent a;
    int code = 0;
    rc = agent_init(&a, &loop, opts, cfg);
    if (rc == 0) {
        raise_fd_limit(); /* after agent_init: a temporary key's next steps come first */
        rc = agent_start(&a);
    }
    if (rc != 0) {
        code = 1;
        agent_stop(&a);
    } else {
        log_info("dotmon", "dotmon %s started (pid %d)", DOTMON_VERSION, (int)uv_os_getpid());
        uv_queue_work(&loop, &loader_trim.work, loader_trim_on_pool, loader_trim_done);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    agent_fini(&a);
    /* Everything should be closed by now; close stragglers so the loop can be freed. */
    if (uv_loop_close(&loop) == UV_EBUSY) {
        uv_walk(&loop, close_walk_cb, NULL);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
    }
    if (code == 0) {
        log_info("dotmon", "stopped");
    }
    return code;
}

int main(int argc, char **argv)
{
    struct cli_options opts;
    char err[256];
    /*
     * One malloc arena for every thread. With one per thread (glibc's default, up to 8 per core),
     * what a thread-pool worker freed (a gcdump graph, a dump's buffers) stayed in its arena: RSS
     * before each of four consecutive 1M-object /gcdumps was 4.3, 13.3, 23.1, 23.9 MB (29.6 after);
     * with 2 arenas 4.3, 5.6, 12.3, 12.3 (12.4); with one 4.3, 4.6, 4.6, 4.7 (4.7). dotmon's
     * threads are the loop and a few workers: contention is small. Before any thread exists.
     */
    (void)mallopt(M_ARENA_MAX, 1);
    if (cli_parse(argc, (const char *const *)argv, &opts, err, sizeof(err)) != 0) {
        fprintf(stderr, "dotmon: %s\n", err);
        return CLI_EXIT_USAGE;
    }
    switch (opts.command) {
    case CLI_HELP:
        fputs(cli_usage(), stdout);
        return 0;
    case CLI_VERSION:
        printf("%s\n", DOTMON_VERSION);
        return 0;
    case CLI_GENERATEKEY:
        return run_generatekey(&opts);
    case CLI_CONVERT_HELP:
        fputs(cli_convert_usage(), stdout);
        return 0;
    case CLI_CONVERT:
        return convert_run(&opts);
    default:
        break;
    }

    struct config cfg;
    config_init(&cfg);
    int code;
    if (load_config(&opts, &cfg) != 0) {
        code = CLI_EXIT_USAGE;
    } else if (opts.command == CLI_CONFIG_SHOW) {
        code = run_config_show(&opts, &cfg);
    } else {
        code = run_collect(&opts, &cfg);
    }
    config_fini(&cfg);
    return code;
}
