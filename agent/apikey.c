/* SPDX-License-Identifier: MIT */
#include "apikey.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <uv.h>

#include "agent.h"
#include "auth.h"
#include "buf.h"
#include "egress.h"
#include "err.h"
#include "log.h"
#include "outfile.h"
#include "rules_run.h"
#include "settings.h"
#include "shdir.h"

extern char **environ;

static const char cat[] = "dotmon.auth";

#define TEMP_KEY_LIFETIME_S (7 * 86400)
#define KEY_PREFIX          "Authentication:MonitorApiKey:"

/* One watched source: a file (base set) or every file of a folder (key-per-file: base NULL). */
struct watch_point {
    struct apikey_watch *w;
    uv_fs_event_t event; /* the folder */
    uv_fs_poll_t poll;   /* the file or folder itself (filesystems without inotify) */
    char *dir;
    char *base;
};

/* The configuration file, the shared folder (key-per-file and its settings.json), the user
 * settings file. */
#define WATCH_POINTS_MAX 3

struct apikey_watch {
    struct agent *a;
    struct watch_point pts[WATCH_POINTS_MAX];
    size_t npts;
    uv_timer_t debounce;
    int open;       /* handles not yet closed */
    char *reported; /* settings last named as needing a restart, or NULL */
};

/*
 * The key settings in effect, joined into one string to notice a change ("" when none). The
 * string holds the public key and subject only: neither is a secret, but neither is logged.
 */
static char *key_settings(const struct config *cfg)
{
    const char *names[] = {"Subject", "PublicKey", "Issuer"};
    struct buf b;
    buf_init(&b, 0);
    int rc = 0;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && rc == 0; i++) {
        char key[64];
        snprintf(key, sizeof(key), KEY_PREFIX "%s", names[i]);
        const char *v = config_get(cfg, key);
        rc = buf_printf(&b, "%s\n", v != NULL ? v : "");
    }
    char *s = rc == 0 ? strdup(buf_cstr(&b)) : NULL;
    buf_fini(&b);
    return s;
}

/*
 * Verifier for cfg's MonitorApiKey. *out NULL with 0: no key configured (a warning is logged,
 * every request will be 401). AGENT_E_INVAL after logging the reason: invalid configuration.
 */
static int verifier_from_config(const struct config *cfg, struct auth_verifier **out)
{
    *out = NULL;
    const char *subject = config_get(cfg, KEY_PREFIX "Subject");
    const char *key = config_get(cfg, KEY_PREFIX "PublicKey");
    const char *issuer = config_get(cfg, KEY_PREFIX "Issuer");
    bool has_subject = subject != NULL && *subject != '\0';
    bool has_key = key != NULL && *key != '\0';
    if (!has_subject && !has_key) {
        log_warn(cat, "no API key is configured: every request will be answered 401. Configure "
                      "Authentication:MonitorApiKey (see 'dotmon generatekey'), or start with "
                      "--temp-apikey or --no-auth");
        return 0;
    }
    if (!has_subject || !has_key) {
        log_error(cat, "invalid authentication configuration: Authentication:MonitorApiKey needs "
                       "both Subject and PublicKey");
        return AGENT_E_INVAL;
    }
    if (issuer != NULL && *issuer == '\0') {
        issuer = NULL;
    }
    const char *warning = NULL;
    char err[256];
    int rc = auth_verifier_new(key, subject, issuer, out, &warning, err, sizeof(err));
    if (rc != 0) {
        log_error(
            cat, "invalid authentication configuration: Authentication:MonitorApiKey:PublicKey: %s",
            err);
        return rc;
    }
    if (warning != NULL) {
        log_warn(cat, "Authentication:MonitorApiKey:PublicKey: %s", warning);
    }
    return 0;
}

/* The --token-file written at start-up, removed at a normal stop if it is still ours. */
struct apikey_token_file {
    int dirfd; /* its folder, checked (shdir_open_trusted) */
    char name[256];
    char path[4096]; /* absolute, as the user is told it */
    dev_t dev;
    ino_t ino;
};

/*
 * Writes token, bare, to path: every folder on the way owned by root or dotmon's uid and not
 * writable by others (missing ones made 0700), the file made 0600 under a temporary name and
 * renamed over the final one (a link planted there is replaced, never followed). Start-up: it may
 * block, the loop is not running yet.
 */
static int write_token_file(struct agent *a, const char *path, const char *token)
{
    char abs[4096];
    if (path[0] != '/') {
        char cwd[2048];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            log_error(cat, "--token-file %s: cannot resolve a relative path: %s", path,
                      strerror(errno));
            return AGENT_E_INVAL;
        }
        snprintf(abs, sizeof(abs), "%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, path);
    } else {
        snprintf(abs, sizeof(abs), "%s", path);
    }
    struct apikey_token_file *tf = calloc(1, sizeof(*tf));
    char dir[4096];
    char why[512];
    if (tf == NULL) {
        return -ENOMEM;
    }
    tf->dirfd = -1;
    snprintf(tf->path, sizeof(tf->path), "%s", abs);
    int rc = shdir_split(abs, dir, sizeof(dir), tf->name, sizeof(tf->name));
    if (rc != 0) {
        log_error(cat, "--token-file %s: not a file path", path);
        goto fail;
    }
    rc = shdir_open_trusted(dir, SHDIR_TRUST_MKDIR | SHDIR_TRUST_STRICT, &tf->dirfd, why,
                            sizeof(why));
    if (rc != 0) {
        log_error(cat, "--token-file: refused: %s", why);
        goto fail;
    }
    struct outfile of;
    rc = outfile_open_at(tf->dirfd, tf->name, 0600, &of);
    if (rc == 0) {
        size_t n = strlen(token);
        ssize_t w = write(of.fd, token, n);
        if (w != (ssize_t)n) {
            rc = w < 0 ? -errno : -EIO;
            outfile_abort(&of);
        } else {
            rc = outfile_commit(&of, &tf->dev, &tf->ino);
        }
    }
    if (rc != 0) {
        log_error(cat, "--token-file %s: cannot write it: %s", abs, agent_strerror(rc));
        goto fail;
    }
    a->token_file = tf;
    return 0;
fail:
    if (tf->dirfd >= 0) {
        (void)close(tf->dirfd);
    }
    free(tf);
    return rc == AGENT_E_UNTRUSTED || rc < 0 ? rc : AGENT_E_INVAL;
}

/* True when s can be pasted in a POSIX shell unquoted (after a leading "~/"). */
static bool shell_plain(const char *s)
{
    for (; *s != '\0'; s++) {
        char c = *s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '/' || c == '.' || c == '_' || c == '-' || c == '+' || c == ',';
        if (!ok) {
            return false;
        }
    }
    return true;
}

/* path as a shell word: "~/…" under $HOME, single-quoted when it needs to be. */
static void shell_word(const char *path, struct buf *out)
{
    const char *home = getenv("HOME");
    size_t hl = home != NULL ? strlen(home) : 0;
    while (hl > 1 && home[hl - 1] == '/') {
        hl--;
    }
    if (hl > 1 && strncmp(path, home, hl) == 0 && path[hl] == '/' && shell_plain(path + hl)) {
        (void)buf_printf(out, "~%s", path + hl);
        return;
    }
    if (shell_plain(path)) {
        (void)buf_printf(out, "%s", path);
        return;
    }
    (void)buf_printf(out, "'");
    for (const char *p = path; *p != '\0'; p++) {
        (void)buf_printf(out, *p == '\'' ? "'\\''" : "%c", *p);
    }
    (void)buf_printf(out, "'");
}

/*
 * The first artifact URL as a user can open it: a wildcard host (+, *, 0.0.0.0, [::]) becomes
 * the loopback address. Empty when the port is 0 (known only once bound: the log says it).
 */
static void browsable_url(const struct agent *a, struct buf *out)
{
    const char *urls = config_get(a->cfg, "Urls");
    if (urls == NULL || *urls == '\0') {
        urls = AGENT_DEFAULT_URL;
    }
    while (*urls == ' ' || *urls == ';') {
        urls++;
    }
    size_t n = strcspn(urls, ";");
    while (n > 0 && (urls[n - 1] == ' ' || urls[n - 1] == '/')) {
        n--;
    }
    const char *host = strstr(urls, "://");
    host = host != NULL && (size_t)(host - urls) < n ? host + 3 : urls;
    size_t scheme = (size_t)(host - urls);
    const char *end = urls + n;
    const char *colon = NULL;
    for (const char *p = host; p < end; p++) {
        colon = *p == ':' ? p : *p == ']' ? NULL : colon;
    }
    if (colon != NULL && end - colon == 2 && colon[1] == '0') {
        return;
    }
    const char *port = colon != NULL ? colon : end;
    size_t hostlen = (size_t)(port - host);
    const char *shown = NULL;
    if ((hostlen == 1 && (*host == '+' || *host == '*')) ||
        (hostlen == 7 && strncmp(host, "0.0.0.0", 7) == 0)) {
        shown = "127.0.0.1";
    } else if (hostlen == 4 && strncmp(host, "[::]", 4) == 0) {
        shown = "[::1]";
    }
    if (shown != NULL) {
        (void)buf_printf(out, "%.*s%s%.*s", (int)scheme, urls, shown, (int)(end - port), port);
    } else {
        (void)buf_printf(out, "%.*s", (int)n, urls);
    }
}

/*
 * What a user needs next, on stdout before any log line: where dotmon answers, its /ui, and with
 * --token-file where the token is and the line that puts it in DOTMON_TOKEN.
 */
static void print_next_steps(const struct agent *a)
{
    struct buf url, word;
    buf_init(&url, 0);
    buf_init(&word, 0);
    browsable_url(a, &url);
    if (buf_size(&url) > 0) {
        printf("dotmon on %s, UI at %s/ui\n", buf_cstr(&url), buf_cstr(&url));
    } else {
        printf(
            "dotmon on the port the log's \"Now listening on\" line names, UI at <that URL>/ui\n");
    }
    if (a->token_file != NULL) {
        shell_word(a->token_file->path, &word);
        printf("API token in %s (mode 0600); in another shell:\n"
               "  export DOTMON_TOKEN=$(cat %s)\n",
               a->token_file->path, buf_cstr(&word));
    }
    buf_fini(&url);
    buf_fini(&word);
}

static int setup_temp_key(struct agent *a)
{
    struct auth_generated g;
    int rc = auth_generate((int64_t)time(NULL), TEMP_KEY_LIFETIME_S, NULL, &g);
    if (rc != 0) {
        log_error(cat, "cannot generate a temporary API key: %s", agent_strerror(rc));
        return rc;
    }
    const char *warning = NULL;
    char err[256];
    rc = auth_verifier_new(g.public_key_b64, g.subject, g.issuer, &a->verifier, &warning, err,
                           sizeof(err));
    if (rc != 0) {
        log_error(cat, "temporary API key rejected: %s", err);
    } else if (a->opts->token_file != NULL) {
        rc = write_token_file(a, a->opts->token_file, g.token);
    }
    if (rc == 0) {
        /* The token goes to stdout once (and to the token file), never into the logs. */
        printf("Generated one-time-use API key for dotmon; use the following header for "
               "authorization:\nAuthorization: Bearer %s\n",
               g.token);
        print_next_steps(a);
        fflush(stdout);
    }
    auth_generated_fini(&g);
    return rc;
}

int apikey_setup(struct agent *a)
{
    if (a->opts->no_auth) {
        a->no_auth = true;
        log_warn(cat, "authentication is off (--no-auth): anyone who can reach the URLs can take "
                      "dumps and traces");
        return 0;
    }
    if (a->opts->temp_apikey) {
        return setup_temp_key(a);
    }
    int rc = verifier_from_config(a->cfg, &a->verifier);
    if (rc != 0) {
        return rc;
    }
    a->key_settings = key_settings(a->cfg);
    return a->key_settings != NULL ? 0 : -ENOMEM;
}

/* Names of settings (other than the key) whose value differs from the running configuration. */
static void report_other_changes(struct apikey_watch *w, const struct config *running,
                                 const struct config *now)
{
    struct buf names;
    buf_init(&names, 4096);
    for (int pass = 0; pass < 2; pass++) {
        const struct config *x = pass == 0 ? running : now;
        const struct config *y = pass == 0 ? now : running;
        for (size_t i = 0; i < x->n; i++) {
            const char *k = x->v[i].key;
            /* The key, the egress providers and the collection rules are reloaded; the rest
             * waits for a restart. */
            if (strncasecmp(k, KEY_PREFIX, strlen(KEY_PREFIX)) == 0 ||
                config_key_under(k, "Egress") || rules_run_is_setting(k)) {
                continue;
            }
            const char *other = config_get(y, k);
            bool differs = other == NULL || strcmp(other, x->v[i].value) != 0;
            /* A key present in both is named on the first pass only. */
            if (differs && (pass == 0 || other == NULL)) {
                buf_printf(&names, "%s%s", buf_size(&names) ? ", " : "", k);
            }
        }
    }
    /* Said once per distinct list, not at every reload. */
    const char *list = buf_cstr(&names);
    if (strcmp(list, w->reported != NULL ? w->reported : "") != 0) {
        if (*list != '\0') {
            log_warn(cat,
                     "configuration changed; these settings take effect at the next "
                     "start: %s",
                     list);
        }
        free(w->reported);
        w->reported = strdup(list);
    }
    buf_fini(&names);
}

/*
 * Egress:* from a reloaded configuration: a valid one replaces the providers (uploads running keep
 * what they copied at their start; requests from now on see the new set), an invalid one is named
 * and the providers stay as they were.
 */
static void reload_egress(struct agent *a, const struct config *cfg)
{
    struct egress_set *set = NULL;
    char *settings = NULL;
    struct buf errors;
    buf_init(&errors, 0);
    int rc = agent_egress_parse(cfg, &set, &settings, &errors);
    if (rc != 0) {
        log_error(cat,
                  "configuration changed, but its Egress settings cannot be used (%s); the "
                  "egress providers stay as they were",
                  agent_strerror(rc));
        agent_egress_report(&errors, true);
    } else if (a->egress_settings != NULL && strcmp(settings, a->egress_settings) == 0) {
        egress_set_free(set); /* unchanged */
    } else {
        egress_set_free(a->egress);
        a->egress = set;
        set = NULL;
        if (a->egress_settings != NULL) {
            OPENSSL_cleanse(a->egress_settings, strlen(a->egress_settings));
        }
        free(a->egress_settings);
        a->egress_settings = settings;
        settings = NULL;
        log_info(cat, "Egress reloaded: %zu provider(s)", egress_set_count(a->egress));
    }
    if (settings != NULL) {
        OPENSSL_cleanse(settings, strlen(settings));
        free(settings);
    }
    buf_fini(&errors);
}

static void reload(struct apikey_watch *w)
{
    struct agent *a = w->a;
    struct config cfg;
    config_init(&cfg);
    char err[640];
    if (settings_load(a->opts, (const char *const *)environ, &cfg, err, sizeof(err)) != 0) {
        log_warn(cat,
                 "configuration changed but could not be read (%s); the API key, Egress and "
                 "collection rules stay as they were",
                 err);
        goto out;
    }
    reload_egress(a, &cfg);
    rules_run_reload(a, &cfg); /* after Egress: the rules are checked against its names */
    report_other_changes(w, a->cfg, &cfg);
    if (a->no_auth || a->opts->temp_apikey) {
        goto out; /* no key from configuration to reload */
    }
    char *now = key_settings(&cfg);
    if (now == NULL) {
        log_error(cat, "configuration reload: out of memory; the API key stays as it was");
        goto out;
    }
    if (a->key_settings != NULL && strcmp(now, a->key_settings) == 0) {
        log_debug(cat, "configuration changed; Authentication:MonitorApiKey unchanged");
        free(now);
        goto out;
    }
    struct auth_verifier *v = NULL;
    int rc = verifier_from_config(&cfg, &v);
    auth_verifier_free(a->verifier);
    a->verifier = v;
    free(a->key_settings);
    a->key_settings = now;
    if (rc != 0) {
        log_error(cat, "the reloaded API key is invalid: every request is refused (401) until "
                       "the configuration is fixed");
    } else if (v != NULL) {
        log_info(cat, "Authentication:MonitorApiKey reloaded: tokens of the previous key are no "
                      "longer accepted");
    }
out:
    config_fini(&cfg);
}

static void on_debounce(uv_timer_t *t)
{
    struct apikey_watch *w = t->data;
    if (!w->a->stopping) {
        reload(w);
    }
}

/* The reload runs Timeouts:KeyWatchDebounceMs after the first change of a burst, however long it
 * lasts. */
static void kick(struct apikey_watch *w)
{
    if (!uv_is_active((uv_handle_t *)&w->debounce)) {
        uv_timer_start(&w->debounce, on_debounce, agent_timeout(w->a, TIMEOUT_KEY_WATCH_DEBOUNCE),
                       0);
    }
}

static void on_event(uv_fs_event_t *h, const char *filename, int events, int status)
{
    (void)events;
    struct watch_point *pt = h->data;
    /*
     * The file itself (written, or an editor's rename over it) or Kubernetes' "..data" symlink
     * swap ("..data", "..data_tmp", "..<timestamp>"); other files in a file's folder are not
     * ours. In a key-per-file folder every file is a setting.
     */
    bool ours = filename == NULL || pt->base == NULL || strcmp(filename, pt->base) == 0 ||
                strncmp(filename, "..", 2) == 0;
    if (status == 0 && ours) {
        kick(pt->w);
    }
}

static void on_poll(uv_fs_poll_t *h, int status, const uv_stat_t *prev, const uv_stat_t *curr)
{
    (void)status;
    (void)prev;
    (void)curr;
    struct watch_point *pt = h->data;
    kick(pt->w);
}

static void watch_free(struct apikey_watch *w)
{
    for (size_t i = 0; i < w->npts; i++) {
        free(w->pts[i].dir);
        free(w->pts[i].base);
    }
    free(w->reported);
    free(w);
}

static void on_closed(uv_handle_t *h)
{
    struct apikey_watch *w = h->data;
    if (h->type != UV_TIMER) {
        w = ((struct watch_point *)h->data)->w;
    }
    if (--w->open == 0) {
        w->a->open_handles--;
        watch_free(w);
    }
}

/* Adds a watch point for path: a file (its folder must exist) or, with whole_dir, a folder. */
static int add_point(struct apikey_watch *w, const char *path, bool whole_dir)
{
    struct watch_point *pt = &w->pts[w->npts];
    if (whole_dir) {
        pt->dir = strdup(path);
    } else {
        const char *slash = strrchr(path, '/');
        pt->dir = slash == NULL   ? strdup(".")
                  : slash == path ? strdup("/")
                                  : strndup(path, (size_t)(slash - path));
        pt->base = strdup(slash == NULL ? path : slash + 1);
        if (pt->base == NULL) {
            free(pt->dir);
            pt->dir = NULL;
            return -ENOMEM;
        }
    }
    if (pt->dir == NULL) {
        free(pt->base);
        pt->base = NULL;
        return -ENOMEM;
    }
    pt->w = w;
    w->npts++;
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Starts one point's handles (they are counted in w->open whether or not they start). */
static void start_point(struct agent *a, struct watch_point *pt)
{
    uv_fs_event_init(a->loop, &pt->event);
    uv_fs_poll_init(a->loop, &pt->poll);
    pt->event.data = pt->poll.data = pt;
    pt->w->open += 2;
    int rc = uv_fs_event_start(&pt->event, on_event, pt->dir, 0);
    if (rc != 0) {
        log_warn(cat, "cannot watch %s for changes (%s); polling it every %llu ms instead", pt->dir,
                 uv_strerror(rc), (unsigned long long)agent_timeout(a, TIMEOUT_KEY_WATCH_POLL));
    }
    char path[4096];
    snprintf(path, sizeof(path), "%s%s%s", pt->dir, pt->base != NULL ? "/" : "",
             pt->base != NULL ? pt->base : "");
    rc = uv_fs_poll_start(&pt->poll, on_poll, path,
                          (unsigned)agent_timeout(a, TIMEOUT_KEY_WATCH_POLL));
    if (rc != 0) {
        log_warn(cat, "cannot poll %s: %s", path, uv_strerror(rc));
    }
    log_info(cat,
             "watching %s: a new Authentication:MonitorApiKey, Egress or CollectionRules takes "
             "effect without a restart",
             path);
}

/*
 * The sources a key can come from and that can change on disk: the file given with
 * --configuration-file-path, the shared folder (key-per-file, e.g. a mounted Secret, and its
 * settings.json) and the user settings file, those whose folder exists at start-up.
 */
int apikey_watch_start(struct agent *a)
{
    struct settings_paths paths;
    settings_paths((const char *const *)environ, &paths);
    struct apikey_watch *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    w->a = a;
    int rc = 0;
    if (a->opts->config_file != NULL) {
        rc = add_point(w, a->opts->config_file, false);
    }
    if (rc == 0 && is_dir(paths.shared_dir)) {
        rc = add_point(w, paths.shared_dir, true);
    }
    if (rc == 0 && paths.user_settings[0] != '\0') {
        char *dir = strdup(paths.user_settings);
        char *slash = dir != NULL ? strrchr(dir, '/') : NULL;
        if (slash != NULL) {
            *slash = '\0';
        }
        rc = dir == NULL ? -ENOMEM : is_dir(dir) ? add_point(w, paths.user_settings, false) : 0;
        free(dir);
    }
    if (rc != 0 || w->npts == 0) {
        watch_free(w);
        return rc;
    }
    uv_timer_init(a->loop, &w->debounce);
    w->debounce.data = w;
    w->open = 1;
    a->open_handles++;
    a->keywatch = w;
    for (size_t i = 0; i < w->npts; i++) {
        start_point(a, &w->pts[i]);
    }
    return 0;
}

void apikey_watch_stop(struct agent *a)
{
    struct apikey_watch *w = a->keywatch;
    if (w == NULL) {
        return;
    }
    a->keywatch = NULL;
    uv_close((uv_handle_t *)&w->debounce, on_closed);
    for (size_t i = 0; i < w->npts; i++) {
        uv_close((uv_handle_t *)&w->pts[i].event, on_closed);
        uv_close((uv_handle_t *)&w->pts[i].poll, on_closed);
    }
}

void apikey_fini(struct agent *a)
{
    struct apikey_token_file *tf = a->token_file;
    if (tf != NULL) {
        /* Only the file written at start-up: if something else sits at its name now, it stays. */
        int rc = shdir_unlink_exact(tf->dirfd, tf->name, tf->dev, tf->ino);
        if (rc != 0 && rc != -ENOENT) {
            log_warn(cat, "--token-file: the token file was not removed: %s", agent_strerror(rc));
        }
        (void)close(tf->dirfd);
        free(tf);
        a->token_file = NULL;
    }
    auth_verifier_free(a->verifier);
    a->verifier = NULL;
    free(a->key_settings);
    a->key_settings = NULL;
}
