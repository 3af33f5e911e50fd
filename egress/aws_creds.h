/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_AWS_CREDS_H
#define DOTMON_AWS_CREDS_H

/*
 * The S3 store's credentials when the provider names no AccessKeyId/SecretAccessKey: AWS's
 * credential chain, in the order of the AWS SDK for .NET that dotnet-monitor uses
 * (docs/egress.md §S3 credentials):
 *
 *   1. AwsProfileName (with AwsProfilePath, or AWS_SHARED_CREDENTIALS_FILE, or
 *      ~/.aws/credentials; the config file next to AwsProfilePath, or AWS_CONFIG_FILE, or
 *      ~/.aws/config): that profile, or an error when it is missing (dotnet-monitor's "AWS profile
 *      not found");
 *   2. the profile AWS_PROFILE names, or "default", in the default files, when it has keys;
 *   3. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY [/ AWS_SESSION_TOKEN];
 *   4. web identity (IRSA on EKS): AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN — not
 *      implemented by dotmon: an error that says so;
 *   5. the container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI or _RELATIVE_URI)
 *      — not implemented by dotmon: an error that says so;
 *   6. EC2 instance metadata — not implemented (not tried).
 *
 * The files are read on libuv's thread pool (at most AWS_PROFILE_MAX_FILE bytes each); the
 * environment is read on the loop when the chain starts. Never a secret in `why` or a log line.
 */

#include <uv.h>

struct aws_creds {
    char *access_key_id;
    char *secret_access_key; /* secret */
    char *session_token;     /* secret, or NULL */
    char *region;            /* the profile's region, or NULL */
    char source[96];         /* where they came from, for the log ("profile dev in /x") */
};

/* err 0: c holds the credentials, the callee takes them (aws_creds_fini when done). Otherwise
 * why says what failed (no secret in it). Called exactly once, on a later loop turn. */
typedef void (*aws_creds_cb)(void *ud, int err, struct aws_creds *c, const char *why);

/*
 * Starts the chain. profile / profile_path: AwsProfileName / AwsProfilePath (NULL: not set).
 * Returns 0 (cb will come) or UV_ENOMEM / a uv_queue_work error (cb will not come).
 */
int aws_creds_start(uv_loop_t *loop, const char *profile, const char *profile_path, aws_creds_cb cb,
                    void *ud);
void aws_creds_fini(struct aws_creds *c);

#endif
