/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_AWS_CREDS_H
#define DOTMON_AWS_CREDS_H

/*
 * The S3 store's credentials when the provider names no AccessKeyId/SecretAccessKey: AWS's
 * credential chain, in the order of the AWS SDK for .NET that dotnet-monitor uses
 * (docs/egress.md, "S3 credentials"):
 *
 *   1. AwsProfileName (with AwsProfilePath, or AWS_SHARED_CREDENTIALS_FILE, or
 *      ~/.aws/credentials; the config file next to AwsProfilePath, or AWS_CONFIG_FILE, or
 *      ~/.aws/config): that profile, or an error when it is missing (dotnet-monitor's "AWS profile
 *      not found");
 *   2. the profile AWS_PROFILE names, or "default", in the default files, when it has keys;
 *   3. AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY [/ AWS_SESSION_TOKEN];
 *   4. web identity (IRSA on EKS): AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN
 *      [+ AWS_ROLE_SESSION_NAME]: an unsigned STS AssumeRoleWithWebIdentity (POST, form body) to
 *      AWS_ENDPOINT_URL_STS, or https://sts.<AWS_REGION>.amazonaws.com, or the global endpoint
 *      (no region, or AWS_STS_REGIONAL_ENDPOINTS=legacy);
 *   5. the container credentials endpoint: GET AWS_CONTAINER_CREDENTIALS_RELATIVE_URI on
 *      169.254.170.2, or AWS_CONTAINER_CREDENTIALS_FULL_URI (plain http only to loopback,
 *      169.254.170.2, 169.254.170.23), with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE's content (or
 *      AWS_CONTAINER_AUTHORIZATION_TOKEN) as Authorization; a JSON answer;
 *   6. EC2 instance metadata — not implemented by dotmon (the error says so).
 *
 * What 4 and 5 hand out is kept (process-wide, the loop's thread) and reused until 5 minutes
 * before its Expiration (halfway through a shorter life); the uploads ask again then
 * (aws__creds_stale). https uses AWS_CA_BUNDLE or the system's store.
 *
 * The files are read on libuv's thread pool (at most AWS_PROFILE_MAX_FILE bytes each, token files
 * 64 KiB); the requests go through ehttp (egress's one HTTP client); the environment is read on
 * the loop when the chain starts. Never a secret in `why` or a log line.
 */

#include <stdint.h>
#include <time.h>

#include <uv.h>

struct aws_creds {
    char *access_key_id;
    char *secret_access_key; /* secret */
    char *session_token;     /* secret, or NULL */
    char *region;            /* the profile's region, or NULL */
    char source[96];         /* where they came from, for the log ("profile dev") */
    time_t obtained;         /* when they were handed out (web identity, container endpoint) */
    time_t expires;          /* their Expiration, or 0: they do not expire */
};

/* err 0: c holds the credentials, the callee takes them (aws_creds_fini when done). Otherwise
 * why says what failed (no secret in it). Called exactly once, on a later loop turn. */
typedef void (*aws_creds_cb)(void *ud, int err, struct aws_creds *c, const char *why);

struct aws_creds_req;

/*
 * Starts the chain. profile / profile_path: AwsProfileName / AwsProfilePath (NULL: not set).
 * idle_ms bounds each HTTP exchange (0: 30 s). Returns 0 with *out set until cb comes (cb will
 * come unless aws_creds_cancel) or UV_ENOMEM / a uv_queue_work error (cb will not come).
 */
int aws_creds_start(uv_loop_t *loop, const char *profile, const char *profile_path,
                    uint64_t idle_ms, aws_creds_cb cb, void *ud, struct aws_creds_req **out);
/* cb will not be called; a request on the wire is dropped, the files' reading ends on its own.
 * Not from inside cb. */
void aws_creds_cancel(struct aws_creds_req *r);
void aws_creds_fini(struct aws_creds *c);

#endif
