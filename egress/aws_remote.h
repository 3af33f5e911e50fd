/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_AWS_REMOTE_H
#define DOTMON_AWS_REMOTE_H

/*
 * The pure halves of the two credential sources that answer over HTTP (aws_creds.c sends the
 * requests on the loop): STS AssumeRoleWithWebIdentity (IRSA on EKS; AWS STS API Reference) and
 * the container credentials endpoint (ECS task roles, EKS Pod Identity). No libuv, no I/O; never
 * a secret in `why`.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "aws_profile.h"
#include "buf.h"
#include "s3.h"

/* A parsed http(s) URL: the endpoint and the origin-form target ("/" when none). */
struct aws_url {
    struct url_origin ep;
    char target[1024];
};
/* 0 or AGENT_E_INVAL (why filled). No user part, no fragment. */
int aws__url_parse(const char *url, struct aws_url *out, const char **why);

/*
 * Whether the container endpoint may be asked over plain http: only loopback (127.0.0.0/8,
 * ::1, "localhost"), ECS's 169.254.170.2 and EKS Pod Identity's 169.254.170.23 / fd00:ec2::23,
 * as the AWS SDKs restrict it (a token sent in clear elsewhere could be read on the way).
 * https is always allowed.
 */
bool aws__container_host_ok(const struct aws_url *u);

/*
 * The STS endpoint: AWS_ENDPOINT_URL_STS (endpoint_url, non-NULL) as given; else the regional
 * https://sts.<region>.amazonaws.com (the SDKs' default), or the global https://sts.amazonaws.com
 * when there is no region or sts_regional is "legacy". Appended to out.
 */
int aws__sts_endpoint(const char *endpoint_url, const char *region, const char *sts_regional,
                      struct buf *out);
/* AssumeRoleWithWebIdentity's form body (Version 2011-06-15), appended to out. */
int aws__sts_body(const char *role_arn, const char *session_name, const char *token,
                  struct buf *out);

/*
 * The answers. 0 with out's access_key_id, secret_access_key, session_token (the container
 * endpoint's Token may be absent) set and *expires the
 * Expiration (0: none given); AGENT_E_PROTO (malformed or incomplete: why says which field),
 * AGENT_E_RUNTIME (an STS <ErrorResponse>: why holds its Code and Message), or -ENOMEM.
 */
int aws__sts_parse(const char *xml, size_t n, struct aws_profile *out, time_t *expires, char *why,
                   size_t whylen);
int aws__container_parse(const char *json, size_t n, struct aws_profile *out, time_t *expires,
                         char *why, size_t whylen);

/* "YYYY-MM-DDTHH:MM:SS[.fraction](Z|+00:00)" -> seconds since the epoch. 0 or AGENT_E_INVAL. */
int aws__iso8601(const char *s, time_t *out);

/*
 * Whether credentials obtained at `obtained` and expiring at `expires` (0: never) should be
 * fetched again at `now`: 5 minutes before they expire, or halfway through a shorter life.
 */
bool aws__creds_stale(time_t obtained, time_t expires, time_t now);

#endif
