/* SPDX-License-Identifier: MIT */
#include "aws_creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ascii.h"
#include "aws_profile.h"
#include "aws_remote.h"
#include "ehttp.h"
#include "err.h"
#include "log.h"
#include "s3.h"

#define LOG_CAT      "Egress"
#define TOKEN_MAX    (64u * 1024) /* a web identity or authorization token file, at most */
#define ANSWER_MAX   (64u * 1024) /* STS's or the container endpoint's answer, at most */
#define DEFAULT_IDLE 30000u

/* One run of the chain: inputs copied on the loop, the files read on the thread pool, the
 * decision taken back on the loop. */
struct aws_creds_req {
    uv_work_t work;
    uv_loop_t *loop;
    aws_creds_cb cb;
    void *ud;
    char *profile;          /* the profile to look up */
    bool named;             /* AwsProfileName: missing is an error */
    char *cred_path;        /* NULL: no credentials file to read */
    char *conf_path;        /* NULL: no config file to read */
    bool cred_path_given;   /* AwsProfilePath: unreadable is an error */
    char *env_id, *env_key; /* AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY */
    char *env_token;        /* AWS_SESSION_TOKEN */
    bool web_identity, container;
    /* web identity: AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME, the STS URL
     */
    char *wi_token_file, *role_arn, *session_name, *sts_url;
    /* container endpoint: its URL, AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE) */
    char *container_url, *auth_token, *auth_token_file;
    char *ca_path; /* AWS_CA_BUNDLE, or NULL: the system's store */
    uint64_t idle_ms;
    /* the thread pool's result */
    struct aws_profile prof;
    int err;
    char why[300];
    char *wi_token;   /* the web identity token file's content (secret) */
    char *file_token; /* the authorization token file's content (secret) */
    int token_err;    /* reading the token file failed: why in token_why */
    char token_why[300];
    unsigned open_mode; /* the credentials file's mode when others may read it, else 0 */
    /* the HTTP exchange */
    struct ehttp_tls *tls;
    struct buf body;
    struct ehttp_conn *conn;
    int source; /* SRC_WEB_IDENTITY or SRC_CONTAINER while asking */
};

enum { SRC_WEB_IDENTITY, SRC_CONTAINER, SRC_COUNT };
static const char *const src_names[] = {"web identity (STS AssumeRoleWithWebIdentity)",
                                        "the container credentials endpoint"};

/*
 * What each remote source handed out last, reused until stale (aws__creds_stale): a process asks
 * STS once per credentials' life, not once per upload. The loop's thread only.
 */
static struct {
    char *what; /* the role (its token file and session name come from dotmon's own environment,
                   the same for every upload), or the URL: another one is another entry */
    struct aws_profile keys;
    time_t obtained, expires;
} cache[SRC_COUNT];

static char *dup_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

static bool env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

static void job_free(struct aws_creds_req *j)
{
    free(j->wi_token_file);
    free(j->role_arn);
    free(j->session_name);
    free(j->sts_url);
    free(j->container_url);
    s3__free_secret(&j->auth_token);
    free(j->auth_token_file);
    free(j->ca_path);
    s3__free_secret(&j->wi_token);
    s3__free_secret(&j->file_token);
    ehttp_tls_free(j->tls);
    if (j->body.p != NULL) { /* the STS body holds the web identity token */
        memset(j->body.p, 0, j->body.cap);
    }
    buf_fini(&j->body);
    free(j->profile);
    free(j->cred_path);
    free(j->conf_path);
    free(j->env_id);
    s3__free_secret(&j->env_key);
    s3__free_secret(&j->env_token);
    aws_profile_fini(&j->prof);
    free(j);
}

void aws_creds_fini(struct aws_creds *c)
{
    free(c->access_key_id);
    s3__free_secret(&c->secret_access_key);
    s3__free_secret(&c->session_token);
    free(c->region);
    memset(c, 0, sizeof(*c));
}

/*
 * Reads path whole (at most AWS_PROFILE_MAX_FILE bytes) into *out (NUL-terminated, wiped and
 * freed by the caller). 0, UV_ENOENT (no such file), or another error with why filled.
 */
static int read_bounded(const char *path, size_t max, char **out, size_t *len, unsigned *mode,
                        char *why, size_t whylen)
{
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        snprintf(why, whylen, "%s: %s", path, strerror(e));
        return e == ENOENT ? UV_ENOENT : AGENT_E_INVAL;
    }
    int rc = 0;
    char *b = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "%s: not a regular file", path);
        rc = AGENT_E_INVAL;
        goto cleanup;
    }
    if (mode != NULL) {
        *mode = (unsigned)(st.st_mode & 07777);
    }
    b = malloc(max + 1);
    if (b == NULL) {
        rc = UV_ENOMEM;
        goto cleanup;
    }
    while (n <= max) {
        ssize_t r = read(fd, b + n, max + 1 - n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            snprintf(why, whylen, "%s: %s", path, strerror(errno));
            rc = AGENT_E_INVAL;
            goto cleanup;
        }
        if (r == 0) {
            break;
        }
        n += (size_t)r;
    }
    if (n > max) {
        snprintf(why, whylen, "%s: larger than %zu bytes", path, max);
        rc = AGENT_E_TOOBIG;
        goto cleanup;
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    b = NULL;
cleanup:
    if (b != NULL) {
        memset(b, 0, n); /* what was read may be a secret (n <= max + 1) */
        free(b);
    }
    close(fd);
    return rc;
}

/* Reads and applies one file; a missing file is fine unless required. */
static int load_file(struct aws_creds_req *j, const char *path, bool config_file, bool required)
{
    char *text = NULL;
    size_t len = 0;
    unsigned mode = 0;
    int rc = read_bounded(path, AWS_PROFILE_MAX_FILE, &text, &len, &mode, j->why, sizeof(j->why));
    if (rc == 0 && !config_file && (mode & 077) != 0) {
        j->open_mode = mode; /* the loop warns (as the AWS CLI does; it does not refuse either) */
    }
    if (rc == UV_ENOENT && !required) {
        j->why[0] = '\0';
        return 0;
    }
    if (rc != 0) {
        return rc;
    }
    char why[128] = "";
    rc = aws_profile_parse(text, len, j->profile, config_file, &j->prof, why, sizeof(why));
    if (rc != 0) {
        snprintf(j->why, sizeof(j->why), "%s: %s", path, why);
    }
    memset(text, 0, len); /* it may hold other profiles' secrets */
    free(text);
    return rc;
}

/* A token file, whole, without the blanks and newlines around it (kubelet writes none; editors
 * do). */
static int read_token(const char *path, char **out, char *why, size_t whylen)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_bounded(path, TOKEN_MAX, &text, &len, NULL, why, whylen);
    if (rc != 0) {
        return rc;
    }
    while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r' || text[len - 1] == ' ')) {
        text[--len] = '\0';
    }
    if (len == 0 || strlen(text) != len) {
        snprintf(why, whylen, "%s: empty, or not text", path);
        s3__free_secret(&text);
        return AGENT_E_INVAL;
    }
    *out = text;
    return 0;
}

static void work(uv_work_t *w)
{
    struct aws_creds_req *j = w->data;
    int rc = 0;
    if (j->wi_token_file != NULL) {
        j->token_err =
            read_token(j->wi_token_file, &j->wi_token, j->token_why, sizeof(j->token_why));
    } else if (j->auth_token_file != NULL) {
        j->token_err =
            read_token(j->auth_token_file, &j->file_token, j->token_why, sizeof(j->token_why));
    }
    if (j->conf_path != NULL) {
        rc = load_file(j, j->conf_path, true, false);
    }
    if (rc == 0 && j->cred_path != NULL) {
        rc = load_file(j, j->cred_path, false, j->cred_path_given);
    }
    j->err = rc;
}

static bool has(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* Moves id/secret/token into c. */
static int take(struct aws_creds *c, char **id, char **key, char **token)
{
    c->access_key_id = *id;
    c->secret_access_key = *key;
    c->session_token = has(*token) ? *token : NULL;
    if (c->session_token == NULL) {
        s3__free_secret(token);
    }
    *id = NULL;
    *key = NULL;
    *token = NULL;
    return 0;
}

/* Hands c (or the error) to the caller and frees the job. */
static void finish(struct aws_creds_req *j, int err, struct aws_creds *c, const char *why)
{
    if (j->cb == NULL) { /* cancelled while the files were read */
        aws_creds_fini(c);
        job_free(j);
        return;
    }
    if (err == 0 && c->region == NULL && has(j->prof.region)) {
        c->region = j->prof.region; /* the default profile's region with other keys */
        j->prof.region = NULL;
    }
    if (err != 0) {
        aws_creds_fini(c);
        j->cb(j->ud, err, NULL, why);
    } else {
        j->cb(j->ud, 0, c, "");
    }
    job_free(j);
}

/* Copies cache entry `src` into c; false when it is empty or stale. */
static bool from_cache(int src, const char *what, struct aws_creds *c)
{
    time_t now = time(NULL);
    if (cache[src].what == NULL || strcmp(cache[src].what, what) != 0 ||
        aws__creds_stale(cache[src].obtained, cache[src].expires, now)) {
        return false;
    }
    const struct aws_profile *k = &cache[src].keys;
    c->access_key_id = strdup(k->access_key_id);
    c->secret_access_key = strdup(k->secret_access_key);
    c->session_token = k->session_token != NULL ? strdup(k->session_token) : NULL;
    if (c->access_key_id == NULL || c->secret_access_key == NULL ||
        (k->session_token != NULL && c->session_token == NULL)) {
        aws_creds_fini(c);
        return false;
    }
    c->obtained = cache[src].obtained;
    c->expires = cache[src].expires;
    snprintf(c->source, sizeof(c->source), "%s (cached)", src_names[src]);
    return true;
}

static void to_cache(int src, const char *what, struct aws_profile *keys, time_t obtained,
                     time_t expires)
{
    free(cache[src].what);
    aws_profile_fini(&cache[src].keys);
    cache[src].what = strdup(what);
    cache[src].keys.access_key_id = strdup(keys->access_key_id);
    cache[src].keys.secret_access_key = strdup(keys->secret_access_key);
    cache[src].keys.session_token =
        keys->session_token != NULL ? strdup(keys->session_token) : NULL;
    cache[src].obtained = obtained;
    cache[src].expires = expires;
    if (cache[src].what == NULL || cache[src].keys.access_key_id == NULL ||
        cache[src].keys.secret_access_key == NULL) {
        free(cache[src].what);
        cache[src].what = NULL; /* no memory: ask again next time */
    }
}

static const char *cache_key(const struct aws_creds_req *j, int src)
{
    return src == SRC_WEB_IDENTITY ? j->role_arn : j->container_url;
}

static void on_remote(void *ud, int err, const struct ehttp_response *resp, const char *why_http)
{
    struct aws_creds_req *j = ud;
    j->conn = NULL;
    int src = j->source;
    struct aws_creds c;
    memset(&c, 0, sizeof(c));
    char why[400];
    time_t expires = 0, now = time(NULL);
    struct aws_profile keys;
    memset(&keys, 0, sizeof(keys));
    char what[300] = "";
    if (err != 0) {
        snprintf(why, sizeof(why), "%s: %s", src_names[src], why_http);
        goto out;
    }
    if (src == SRC_WEB_IDENTITY) {
        /* STS answers errors with a status and an <ErrorResponse>: parse both kinds alike. */
        err = aws__sts_parse((const char *)resp->body, resp->body_len, &keys, &expires, what,
                             sizeof(what));
    } else if (resp->status / 100 == 2) {
        err = aws__container_parse((const char *)resp->body, resp->body_len, &keys, &expires, what,
                                   sizeof(what));
    } else {
        snprintf(what, sizeof(what), "HTTP %d", resp->status);
        err = resp->status == 401 || resp->status == 403 ? AGENT_E_AUTH : UV_EIO;
    }
    if (err == 0 && resp->status / 100 != 2) {
        snprintf(what, sizeof(what), "HTTP %d", resp->status);
        err = UV_EIO;
    }
    if (err == AGENT_E_RUNTIME) {
        err = resp->status == 403 || resp->status == 401 ? AGENT_E_AUTH : UV_EIO;
    }
    snprintf(why, sizeof(why), "%s: %s", src_names[src], what);
    if (err == 0) {
        to_cache(src, cache_key(j, src), &keys, now, expires);
        c.access_key_id = keys.access_key_id;
        c.secret_access_key = keys.secret_access_key;
        c.session_token = keys.session_token;
        keys.access_key_id = keys.secret_access_key = keys.session_token = NULL;
        c.obtained = now;
        c.expires = expires;
        snprintf(c.source, sizeof(c.source), "%s", src_names[src]);
    }
out:
    aws_profile_fini(&keys);
    finish(j, err, &c, why);
}

/* Sends the request of source src (or answers from the cache). */
static void ask_remote(struct aws_creds_req *j, int src)
{
    struct aws_creds c;
    memset(&c, 0, sizeof(c));
    char why[400] = "";
    j->source = src;
    if (from_cache(src, cache_key(j, src), &c)) {
        finish(j, 0, &c, "");
        return;
    }
    if (j->token_err != 0) {
        snprintf(why, sizeof(why), "%s: %s", src_names[src], j->token_why);
        finish(j, j->token_err, &c, why);
        return;
    }
    const char *url = src == SRC_WEB_IDENTITY ? j->sts_url : j->container_url;
    struct aws_url u;
    const char *bad = "";
    int rc = aws__url_parse(url, &u, &bad);
    if (rc == 0 && src == SRC_CONTAINER && !aws__container_host_ok(&u)) {
        bad = "plain http is allowed to loopback, 169.254.170.2 and 169.254.170.23 only";
        rc = AGENT_E_INVAL;
    }
    if (rc != 0) {
        char shown[160];
        ascii_url_quotable(url, shown, sizeof(shown)); /* never a query, path or userinfo */
        snprintf(why, sizeof(why), "%s: %s…: %s", src_names[src], shown, bad);
        finish(j, rc, &c, why);
        return;
    }
    char host_header[300];
    bool default_port = u.ep.port == (u.ep.https ? 443 : 80);
    bool v6 = strchr(u.ep.host, ':') != NULL;
    snprintf(host_header, sizeof(host_header), v6 ? "[%s]" : "%s", u.ep.host);
    if (!default_port) {
        size_t hn = strlen(host_header);
        snprintf(host_header + hn, sizeof(host_header) - hn, ":%u", (unsigned)u.ep.port);
    }
    struct ehttp_header h[4];
    size_t nh = 0;
    h[nh++] = (struct ehttp_header){"Host", host_header};
    h[nh++] = (struct ehttp_header){"Accept", src == SRC_CONTAINER ? "application/json" : "*/*"};
    buf_init(&j->body, 256 * 1024);
    const char *method = "GET";
    if (src == SRC_WEB_IDENTITY) {
        method = "POST";
        h[nh++] = (struct ehttp_header){"Content-Type",
                                        "application/x-www-form-urlencoded; charset=utf-8"};
        rc = aws__sts_body(j->role_arn, j->session_name, j->wi_token, &j->body);
    } else {
        const char *token = j->file_token != NULL ? j->file_token : j->auth_token;
        if (token != NULL && strpbrk(token, "\r\n") != NULL) {
            snprintf(why, sizeof(why), "%s: the authorization token holds a line break",
                     src_names[src]);
            finish(j, AGENT_E_INVAL, &c, why);
            return;
        }
        if (token != NULL) {
            h[nh++] = (struct ehttp_header){"Authorization", token};
        }
    }
    if (rc == 0 && u.ep.https) {
        char msg[300];
        rc = ehttp_tls_new(j->ca_path, &j->tls, msg, sizeof(msg));
        if (rc != 0) {
            snprintf(why, sizeof(why), "%s: AWS_CA_BUNDLE: %s", src_names[src], msg);
            finish(j, rc, &c, why);
            return;
        }
    }
    struct ehttp_request rq = {
        method,     u.ep.host, u.ep.port,          u.ep.https ? j->tls : NULL, u.target,
        h,          nh,        buf_data(&j->body), buf_size(&j->body),         j->idle_ms,
        j->idle_ms, ANSWER_MAX};
    if (rc == 0) {
        rc = ehttp_start(j->loop, &rq, on_remote, j, &j->conn);
    }
    if (rc != 0) {
        snprintf(why, sizeof(why), "%s: %s", src_names[src], agent_strerror(rc));
        finish(j, rc, &c, why);
    }
}

static void after_work(uv_work_t *w, int status)
{
    struct aws_creds_req *j = w->data;
    if (j->cb == NULL) {
        job_free(j);
        return;
    }
    if (j->open_mode != 0) {
        log_warn(LOG_CAT,
                 "AWS credentials file %s can be read by other users (mode %04o): "
                 "chmod 600 it",
                 j->cred_path, j->open_mode);
    }
    struct aws_creds c;
    memset(&c, 0, sizeof(c));
    int err = status != 0 ? status : j->err;
    const char *why = j->why;
    char msg[400];
    if (err != 0) {
        snprintf(msg, sizeof(msg), "AWS profile %s: %s", j->profile, j->why);
        why = msg;
        goto done;
    }
    const struct aws_profile *p = &j->prof;
    if (p->found && p->unsupported[0] != '\0' &&
        !(has(p->access_key_id) && has(p->secret_access_key))) {
        snprintf(msg, sizeof(msg),
                 "AWS profile %s gets its credentials from %s, which dotmon does not implement "
                 "(static keys only: aws_access_key_id, aws_secret_access_key, aws_session_token)",
                 j->profile, p->unsupported);
        why = msg;
        err = AGENT_E_INVAL;
        goto done;
    }
    if (p->found && has(p->access_key_id) && has(p->secret_access_key)) {
        err = take(&c, &j->prof.access_key_id, &j->prof.secret_access_key, &j->prof.session_token);
        c.region = j->prof.region;
        j->prof.region = NULL;
        snprintf(c.source, sizeof(c.source), "profile %s", j->profile);
        goto done;
    }
    if (j->named) {
        snprintf(msg, sizeof(msg), "AWS profile %s not found (or without keys) in %s%s%s",
                 j->profile, j->cred_path != NULL ? j->cred_path : "(no credentials file)",
                 j->conf_path != NULL ? " or " : "", j->conf_path != NULL ? j->conf_path : "");
        why = msg;
        err = AGENT_E_NOTFOUND;
        goto done;
    }
    if (has(j->env_id) && has(j->env_key)) {
        err = take(&c, &j->env_id, &j->env_key, &j->env_token);
        snprintf(c.source, sizeof(c.source), "%s", "AWS_ACCESS_KEY_ID");
        goto done;
    }
    if (j->web_identity || j->container) {
        ask_remote(j, j->web_identity ? SRC_WEB_IDENTITY : SRC_CONTAINER);
        return;
    }
    err = AGENT_E_INVAL;
    why = "no credentials: neither AccessKeyId/SecretAccessKey, nor AwsProfileName, nor a "
          "default AWS profile, nor AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, nor "
          "AWS_WEB_IDENTITY_TOKEN_FILE, nor AWS_CONTAINER_CREDENTIALS_FULL_URI/_RELATIVE_URI "
          "(EC2 instance metadata is not implemented by dotmon)";
done:
    finish(j, err, &c, why);
}

/* dir(path)/config: the config file next to a given credentials file, as the .NET SDK does. */
static char *sibling_config(const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t dn = slash != NULL ? (size_t)(slash - path) + 1 : 0;
    char *out = malloc(dn + sizeof("config"));
    if (out != NULL) {
        memcpy(out, path, dn);
        memcpy(out + dn, "config", sizeof("config"));
    }
    return out;
}

static char *home_file(const char *name)
{
    const char *home = getenv("HOME");
    if (!has(home)) {
        return NULL;
    }
    size_t n = strlen(home) + strlen(name) + 8;
    char *out = malloc(n);
    if (out != NULL) {
        snprintf(out, n, "%s/.aws/%s", home, name);
    }
    return out;
}

/* The web identity and container endpoint inputs, from the environment (on the loop). */
static int remote_inputs(struct aws_creds_req *j)
{
    j->role_arn = dup_or_null(getenv("AWS_ROLE_ARN"));
    j->web_identity = j->web_identity && j->role_arn != NULL; /* the token file alone is not one */
    if (j->web_identity) {
        const char *region = getenv("AWS_REGION");
        if (!has(region)) {
            region = getenv("AWS_DEFAULT_REGION");
        }
        struct buf url;
        buf_init(&url, 4096);
        int rc = aws__sts_endpoint(getenv("AWS_ENDPOINT_URL_STS"), region,
                                   getenv("AWS_STS_REGIONAL_ENDPOINTS"), &url);
        j->sts_url = rc == 0 ? buf_steal(&url, NULL) : NULL;
        buf_fini(&url);
        char session[64];
        snprintf(session, sizeof(session), "dotmon-%lld", (long long)time(NULL));
        const char *name = getenv("AWS_ROLE_SESSION_NAME");
        j->session_name = strdup(has(name) ? name : session);
        j->wi_token_file = strdup(getenv("AWS_WEB_IDENTITY_TOKEN_FILE"));
        if (j->sts_url == NULL || j->session_name == NULL || j->wi_token_file == NULL) {
            return UV_ENOMEM;
        }
        return 0; /* the container endpoint comes after: not asked */
    }
    if (j->container) {
        const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
        const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
        size_t n = (has(rel) ? strlen(rel) : strlen(full)) + 32;
        j->container_url = malloc(n);
        if (j->container_url == NULL) {
            return UV_ENOMEM;
        }
        /* The relative form wins when both are set, as in the SDKs. */
        if (has(rel)) {
            snprintf(j->container_url, n, "http://169.254.170.2%s%s", rel[0] == '/' ? "" : "/",
                     rel);
        } else {
            snprintf(j->container_url, n, "%s", full);
        }
        j->auth_token = dup_or_null(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
        j->auth_token_file = dup_or_null(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"));
    }
    return 0;
}

void aws_creds_cancel(struct aws_creds_req *j)
{
    j->cb = NULL;
    if (j->conn != NULL) { /* on the wire: on_remote will not come */
        ehttp_cancel(j->conn);
        j->conn = NULL;
        job_free(j);
    }
    /* else on the thread pool: after_work frees it */
}

int aws_creds_start(uv_loop_t *loop, const char *profile, const char *profile_path,
                    uint64_t idle_ms, aws_creds_cb cb, void *ud, struct aws_creds_req **out)
{
    struct aws_creds_req *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return UV_ENOMEM;
    }
    j->loop = loop;
    j->idle_ms = idle_ms > 0 ? idle_ms : DEFAULT_IDLE;
    j->ca_path = dup_or_null(getenv("AWS_CA_BUNDLE"));
    j->cb = cb;
    j->ud = ud;
    j->work.data = j;
    j->named = has(profile);
    const char *env_profile = getenv("AWS_PROFILE");
    j->profile = strdup(j->named ? profile : has(env_profile) ? env_profile : "default");
    if (j->named && has(profile_path)) {
        j->cred_path_given = true;
        j->cred_path = strdup(profile_path);
        j->conf_path = sibling_config(profile_path);
    } else {
        j->cred_path = has(getenv("AWS_SHARED_CREDENTIALS_FILE"))
                           ? strdup(getenv("AWS_SHARED_CREDENTIALS_FILE"))
                           : home_file("credentials");
        j->conf_path = has(getenv("AWS_CONFIG_FILE")) ? strdup(getenv("AWS_CONFIG_FILE"))
                                                      : home_file("config");
    }
    j->env_id = dup_or_null(getenv("AWS_ACCESS_KEY_ID"));
    j->env_key = dup_or_null(getenv("AWS_SECRET_ACCESS_KEY"));
    j->env_token = dup_or_null(getenv("AWS_SESSION_TOKEN"));
    j->web_identity = env_set("AWS_WEB_IDENTITY_TOKEN_FILE");
    j->container = env_set("AWS_CONTAINER_CREDENTIALS_FULL_URI") ||
                   env_set("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
    int rc = j->profile != NULL ? remote_inputs(j) : UV_ENOMEM;
    if (rc == 0) {
        rc = uv_queue_work(loop, &j->work, work, after_work);
    }
    if (rc != 0) {
        job_free(j);
    } else {
        *out = j;
    }
    return rc;
}
