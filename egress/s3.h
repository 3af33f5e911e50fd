/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_S3_H
#define DOTMON_S3_H

/*
 * Between the S3 store's configuration (s3_conf.c, pure) and its upload (egress_s3.c, loop).
 * Not for use outside egress/ (and its tests).
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "sigv4.h"
#include "url.h"

#define S3_MIN_PART      (5ull * 1024 * 1024)        /* S3's minimum part (all but the last) */
#define S3_MAX_PART      (5ull * 1024 * 1024 * 1024) /* and maximum */
#define S3_DEFAULT_PART  (8ull * 1024 * 1024)        /* CopyBufferSize when not set */
#define S3_MAX_PARTS     10000u
#define S3_PRESIGN_MIN_S 60u    /* PreSignedUrlExpiry: 1 minute … */
#define S3_PRESIGN_MAX_S 86400u /* … to 1 day, as dotnet-monitor */
#define S3_MAX_ATTEMPTS  5u     /* per request: the first try and four retries */

/* An endpoint "http[s]://host[:port][/]" (common/url.h's parser, no path, query or fragment).
 * 0 or AGENT_E_INVAL (why says what is wrong, for the configuration error line). */
int s3__endpoint_parse(const char *url, struct url_origin *out, const char **why);

/*
 * Where an object lives: the host to connect to, the Host header (and signed host), and the
 * decoded path to sign. Virtual-hosted style ("bucket.host/key") unless force_path_style, the
 * endpoint is an address, or the bucket is not a DNS label sequence (then "host/bucket/key").
 */
struct s3_where {
    char host[320];        /* to connect to */
    char host_header[330]; /* host[:port] as sent and signed ([v6]:port for addresses) */
    uint16_t port;
    bool https;
};
int s3__where(const struct url_origin *ep, const char *bucket, bool force_path_style,
              const char *key, struct s3_where *w, struct buf *path);

/*
 * The headers one request signs and sends besides Authorization, into out (room for
 * S3_MAX_HEADERS), in this order: Host, x-amz-content-sha256, x-amz-date, then Content-Type when
 * content_type is not NULL, x-amz-security-token when token is not NULL, and, for a request that
 * creates the object (PutObject, CreateMultipartUpload: `creates`) with kms,
 * x-amz-server-side-encryption: aws:kms and x-amz-server-side-encryption-aws-kms-key-id when
 * kms_key is not NULL (S3 API Reference, "Specifying server-side encryption with AWS KMS").
 * Every one of them is signed. Returns how many.
 */
#define S3_MAX_HEADERS 7
struct s3_head_in {
    const char *host_header, *payload_hash, *amz_date;
    const char *content_type, *token;
    bool creates, kms;
    const char *kms_key;
};
size_t s3__headers(const struct s3_head_in *in, struct sigv4_kv *out);

/* "[d.]hh:mm:ss[.fff]" or whole seconds -> seconds (fractions dropped). 0 or AGENT_E_INVAL. */
int s3__timespan_s(const char *v, uint64_t *out);
/* "true"/"false" in any case. 0 or AGENT_E_INVAL. */
int s3__bool(const char *v, bool *out);

/* Size of part number n (1-based): base, doubled every 1000 parts so that 10000 parts reach
 * far (8 MiB base: about 8 TiB), capped at S3_MAX_PART. */
uint64_t s3__part_size(uint64_t base, uint32_t n);
/* Delay before retry number attempt (1-based): 250 ms doubled each time, at most 8 s. */
uint64_t s3__backoff_ms(unsigned attempt);
/* Wipes a secret string, frees it and NULLs the pointer (NULL is fine). */
void s3__free_secret(char **s);
/* Whether an answer is worth another try: connection-level errors, 5xx, 429. */
bool s3__retryable(int err, int http_status);

#endif
