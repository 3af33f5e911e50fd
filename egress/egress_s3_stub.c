/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "common/err.h"
#include "egress_internal.h"

/*
 * TEMPORARY: stands in for egress_s3.c (issue 17, being written against egress_internal.h) so
 * that egress/ links; that file replaces this one in egress/CMakeLists.txt. Every S3Storage
 * setting is refused, so no S3 provider is ever configured.
 */

int egress_s3_set(struct egress_s3_options *o, const char *key, const char *setting,
                  const char *value, struct buf *errors)
{
    (void)o;
    (void)setting;
    (void)value;
    return buf_printf(errors, "%s: S3Storage egress is not built into this dotmon yet\n", key) != 0
               ? UV_ENOMEM
               : AGENT_E_INVAL;
}

int egress_s3_check(const struct egress_s3_options *o, const char *name, struct buf *errors)
{
    (void)o;
    (void)name;
    (void)errors;
    return 0; /* egress_s3_set has said it */
}

void egress_s3_options_fini(struct egress_s3_options *o)
{
    free(o->bucket);
    free(o->endpoint);
    free(o->region);
    free(o->access_key_id);
    free(o->secret_access_key);
    free(o->session_token);
    free(o->ca_path);
    memset(o, 0, sizeof(*o));
}

int egress_s3_open(uv_loop_t *loop, const struct egress_s3_options *o,
                   const struct egress_request *rq, struct egress_target **out)
{
    (void)loop;
    (void)o;
    (void)rq;
    (void)out;
    return AGENT_E_INVAL; /* S3 not built */
}
