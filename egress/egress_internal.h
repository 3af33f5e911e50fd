/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_EGRESS_INTERNAL_H
#define DOTMON_EGRESS_INTERNAL_H

/*
 * Between egress.c (configuration, dispatch) and the stores (egress_fs.c, egress_s3.c). Not for
 * use outside egress/.
 */

#include "egress.h"

/* Every store's target starts with this; egress.c calls through ops. */
struct egress_target_ops {
    int (*write)(struct egress_target *t, void *base, const uint8_t *data, size_t n);
    bool (*full)(const struct egress_target *t);
    void (*finish)(struct egress_target *t);
    void (*abort)(struct egress_target *t);
    uint64_t (*bytes)(const struct egress_target *t);
};

struct egress_target {
    const struct egress_target_ops *ops;
};

#define EGRESS_FS_DEFAULT_MODE 0600u

struct egress_fs_options {
    char *directory;    /* DirectoryPath */
    char *intermediate; /* IntermediateDirectoryPath, or NULL: DirectoryPath */
    unsigned mode;      /* FileMode, 0: unset (EGRESS_FS_DEFAULT_MODE) */
    size_t copy_buffer; /* CopyBufferSize, 0: unset (1 MiB); at most 16 MiB is used */
};

struct egress_s3_options {
    char *bucket;            /* BucketName */
    char *endpoint;          /* Endpoint (scheme://host[:port]), or NULL: AWS's for the region */
    char *region;            /* RegionName, default us-east-1 */
    char *access_key_id;     /* AccessKeyId */
    char *secret_access_key; /* SecretAccessKey (secret) */
    char *session_token;     /* SessionToken (secret), or NULL */
    char *ca_path;           /* CertificateAuthorityPath, or NULL: the system's bundle */
    bool force_path_style;   /* ForcePathStyle */
    uint64_t presign_s;      /* PreSignedUrlExpiry in seconds, 0: the object URL */
    uint64_t part_size;      /* CopyBufferSize, at least 5 MiB (S3's minimum part) */
    uint64_t part_asked;     /* CopyBufferSize as given when it was raised to 5 MiB, else 0 */
    bool kms;                /* UseKmsEncryption: SSE-KMS on PutObject/CreateMultipartUpload */
    char *kms_key;           /* KmsEncryptionKey (key id or ARN), or NULL: the bucket's default */
    char *profile;           /* AwsProfileName, or NULL */
    char *profile_path;      /* AwsProfilePath (a shared credentials file), or NULL */
};

struct egress_provider {
    char *name;
    enum egress_type type;
    union {
        struct egress_fs_options fs;
        struct egress_s3_options s3;
    } u;
};

/*
 * One setting of a provider (the part of the key after Egress:<Type>:<name>:, in the user's
 * case: compare case-insensitively), applied to its options; a setting given again replaces the
 * earlier value. 0, or AGENT_E_INVAL with a '\n'-terminated line in errors naming the full key
 * (never the value of a secret), or UV_ENOMEM. Unknown settings are errors. An empty value
 * counts as not set (as dotnet-monitor's string.IsNullOrEmpty). egress.c resolves the *Name
 * settings itself: a store sees SecretAccessKey with the referenced property's value, never
 * SecretAccessKeyName.
 */
int egress_fs_set(struct egress_fs_options *o, const char *key, const char *setting,
                  const char *value, struct buf *errors);
int egress_s3_set(struct egress_s3_options *o, const char *key, const char *setting,
                  const char *value, struct buf *errors);
/* After every setting (also when one failed): required ones present, values consistent; 0 or
 * AGENT_E_INVAL with a line per problem, naming Egress:<Type>:<name>:<Setting>. */
int egress_fs_check(const struct egress_fs_options *o, const char *name, struct buf *errors);
int egress_s3_check(const struct egress_s3_options *o, const char *name, struct buf *errors);
/* Frees every field (secrets wiped first); safe on a zeroed or finished struct. */
void egress_fs_options_fini(struct egress_fs_options *o);
void egress_s3_options_fini(struct egress_s3_options *o);

/*
 * The stores' open: egress_open checked rq (on_done set, artifact_name a plain file name) before.
 * Same contract as egress_open; *out is the store's struct, which starts with struct
 * egress_target and is freed by the store right after on_done returns.
 */
int egress_fs_open(uv_loop_t *loop, const struct egress_fs_options *o,
                   const struct egress_request *rq, struct egress_target **out);
int egress_s3_open(uv_loop_t *loop, const struct egress_s3_options *o,
                   const struct egress_request *rq, struct egress_target **out);

/*
 * Test seam: false makes the FileSystem store behave as on a file system without O_TMPFILE
 * (hidden named temporary files). Process-wide; tests only.
 */
void egress__fs_use_tmpfile(bool on);

#endif
