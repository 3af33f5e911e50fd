/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_S3_XML_H
#define DOTMON_S3_XML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/*
 * The few XML documents of S3's multipart upload (S3 API Reference: CreateMultipartUpload,
 * UploadPart, CompleteMultipartUpload, AbortMultipartUpload, "Error responses"). Pure: no libuv,
 * no allocation besides the caller's bufs.
 *
 * Reading is a strict scan of the whole document: one root element, balanced tags (at most 32
 * deep), quoted attributes, the five predefined entities and character references only, CDATA,
 * comments and processing instructions; a DOCTYPE is refused (no entity expansion, ever).
 * Element names are matched on their local part (a "s3:" prefix is ignored). Errors:
 * AGENT_E_PROTO for a malformed document, AGENT_E_NOTFOUND when the element is absent, or a buf
 * error. What is found is appended to the caller's buf, entities decoded.
 */

/* The text of the first element at path (path[0] is the root), appended to out. */
int s3_xml_find(const char *xml, size_t n, const char *const *path, size_t depth, struct buf *out);
/* InitiateMultipartUploadResult/UploadId (non-empty). */
int s3_xml_upload_id(const char *xml, size_t n, struct buf *out);
/*
 * An <Error> document: 0 with Error/Code and Error/Message appended (either may be empty), or
 * AGENT_E_NOTFOUND when the root is not Error, AGENT_E_PROTO when malformed.
 */
int s3_xml_error(const char *xml, size_t n, struct buf *code, struct buf *message);
/*
 * The body of a 200 answer to CompleteMultipartUpload, which may still be an error (S3 sends the
 * status line before it knows): 0 for CompleteMultipartUploadResult (its ETag appended to etag
 * when present), AGENT_E_RUNTIME with Code and Message appended for an <Error> root,
 * AGENT_E_PROTO otherwise.
 */
int s3_xml_complete_result(const char *xml, size_t n, struct buf *etag, struct buf *code,
                           struct buf *message);

/* Text content escaped for XML (&, <, >), appended to out. */
int s3_xml_escape(struct buf *out, const char *s);

/* One uploaded part: its number (1..10000) and the ETag header S3 answered (quotes kept). */
struct s3_part {
    uint32_t number;
    char etag[128];
};
/* The CompleteMultipartUpload request body for parts[0..n), appended to out. */
int s3_xml_complete_body(const struct s3_part *parts, size_t n, struct buf *out);
/* An ETag header value we will echo back: 1..127 printable ASCII bytes, no '<' '>' '&'. */
bool s3_etag_valid(const char *v, size_t n);

#endif
