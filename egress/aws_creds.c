/* SPDX-License-Identifier: MIT */
#include "aws_creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "aws_profile.h"
#include "err.h"
#include "s3.h"

/* One run of the chain: inputs copied on the loop, the files read on the thread pool, the
 * decision taken back on the loop. */
struct job {
    uv_work_t work;
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
    /* the thread pool's result */
    struct aws_profile prof;
    int err;
    char why[300];
};

static char *dup_or_null(const char *s)
{
    return s != NULL && s[0] != '\0' ? strdup(s) : NULL;
}

static bool env_set(const char *name)
{
    const char *v = getenv(name);
    return v != NULL && v[0] != '\0';
}

static void job_free(struct job *j)
{
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
static int read_bounded(const char *path, char **out, size_t *len, char *why, size_t whylen)
{
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
    b = malloc(AWS_PROFILE_MAX_FILE + 1);
    if (b == NULL) {
        rc = UV_ENOMEM;
        goto cleanup;
    }
    size_t n = 0;
    while (n <= AWS_PROFILE_MAX_FILE) {
        ssize_t r = read(fd, b + n, AWS_PROFILE_MAX_FILE + 1 - n);
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
    if (n > AWS_PROFILE_MAX_FILE) {
        snprintf(why, whylen, "%s: larger than %u bytes", path, AWS_PROFILE_MAX_FILE);
        rc = AGENT_E_TOOBIG;
        goto cleanup;
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    b = NULL;
cleanup:
    if (b != NULL) {
        free(b);
    }
    close(fd);
    return rc;
}

/* Reads and applies one file; a missing file is fine unless required. */
static int load_file(struct job *j, const char *path, bool config_file, bool required)
{
    char *text = NULL;
    size_t len = 0;
    int rc = read_bounded(path, &text, &len, j->why, sizeof(j->why));
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

static void work(uv_work_t *w)
{
    struct job *j = w->data;
    int rc = 0;
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

static void after_work(uv_work_t *w, int status)
{
    struct job *j = w->data;
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
    err = AGENT_E_INVAL;
    if (j->web_identity) {
        why = "AWS_WEB_IDENTITY_TOKEN_FILE is set, but web identity credentials (IRSA, STS "
              "AssumeRoleWithWebIdentity) are not implemented by dotmon: set AccessKeyId and "
              "SecretAccessKey, AwsProfileName, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
    } else if (j->container) {
        why = "AWS_CONTAINER_CREDENTIALS_FULL_URI/_RELATIVE_URI is set, but the container "
              "credentials endpoint is not implemented by dotmon: set AccessKeyId and "
              "SecretAccessKey, AwsProfileName, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY";
    } else {
        why = "no credentials: neither AccessKeyId/SecretAccessKey, nor AwsProfileName, nor a "
              "default AWS profile, nor AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY (EC2 instance "
              "metadata is not implemented by dotmon)";
    }
done:
    if (err == 0 && c.region == NULL && has(j->prof.region)) {
        c.region = j->prof.region; /* the default profile's region with the environment's keys */
        j->prof.region = NULL;
    }
    if (err != 0) {
        aws_creds_fini(&c);
        j->cb(j->ud, err, NULL, why);
    } else {
        j->cb(j->ud, 0, &c, "");
    }
    job_free(j);
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

int aws_creds_start(uv_loop_t *loop, const char *profile, const char *profile_path, aws_creds_cb cb,
                    void *ud)
{
    struct job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        return UV_ENOMEM;
    }
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
    int rc = j->profile != NULL ? 0 : UV_ENOMEM;
    if (rc == 0) {
        rc = uv_queue_work(loop, &j->work, work, after_work);
    }
    if (rc != 0) {
        job_free(j);
    }
    return rc;
}
