/* SPDX-License-Identifier: MIT */
#ifndef DOTMON_EGRESS_H
#define DOTMON_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "common/buf.h"

/*
 * Egress: where an artifact (trace, dump, logs, live metrics, gcdump) goes when the request names
 * an egressProvider instead of taking the bytes itself (docs/api.md §10). Configured with
 * dotnet-monitor's keys:
 *
 *   Egress:FileSystem:<name>:DirectoryPath              (required)
 *   Egress:FileSystem:<name>:IntermediateDirectoryPath  (optional; default: DirectoryPath)
 *   Egress:FileSystem:<name>:FileMode                   (dotmon: octal, default 0600; at
 *       most 0777, the owner reads and writes, other users never write)
 *   Egress:S3Storage:<name>:BucketName, Endpoint, RegionName, AccessKeyId, SecretAccessKey,
 *       SessionToken, ForcePathStyle, PreSignedUrlExpiry, CopyBufferSize,
 *       CertificateAuthorityPath (dotmon: a PEM bundle for a private store)
 *   Egress:S3Storage:<name>:SecretAccessKeyName, SessionTokenName
 *       (dotmon: the name of an Egress:Properties key holding the secret, as dotnet-monitor's
 *       AzureBlobStorage accountKeyName / sharedAccessSignatureName; dotnet-monitor documents
 *       *Name settings for AzureBlobStorage only, which dotmon does not implement)
 *   Egress:Properties:<key>                             (secrets referenced by *Name settings)
 *
 * Keys are case-insensitive, provider names too, and a name is unique across types.
 * AzureBlobStorage and any other type are configuration errors.
 *
 * Nothing is ever half-visible: a file is written without a name (O_TMPFILE) or under a hidden
 * temporary name in the intermediate folder, fsync'd, then linked or renamed into DirectoryPath;
 * an S3 object is a multipart upload completed only when every part is stored (aborted
 * otherwise, so no orphaned parts). An existing file is never replaced: dotmon adds "-1", "-2"…
 * before the extension (dotnet-monitor truncates it without IntermediateDirectoryPath, and fails
 * the upload with one). Missing folders are made (0700). An intermediate folder on another file
 * system costs a copy into DirectoryPath. Where the file system has no O_TMPFILE (NFS, some
 * FUSE), a hidden .dotmon-egress-<hex>.tmp is seen in the intermediate folder (DirectoryPath if
 * none is configured) while the bytes are written.
 *
 * One upload is an `egress_target`: the producer writes bytes as they come (a trace from the
 * runtime, a dump file read back, log lines), pauses while egress_full says so and goes on at
 * the ready callback, then calls egress_finish; the done callback reports where the artifact
 * landed (resourceLocation) or the store's error. All callbacks run on the loop, never from
 * inside an egress_* call; nothing blocks the loop (file operations on libuv's thread pool,
 * network I/O non-blocking).
 */

/* A configuration entry as the agent's merged configuration holds it (keys ':'-separated,
 * case-insensitive). The egress module never sees the agent's own structures. */
struct egress_kv {
    const char *key;
    const char *value;
};

enum egress_type { EGRESS_FILESYSTEM = 0, EGRESS_S3 = 1 };

struct egress_provider; /* one configured provider */
struct egress_set;      /* all of them, by name */

/*
 * Reads every Egress:* key of entries[0..n) (other keys are skipped; a key given twice: the later
 * wins). Returns 0 and a set (possibly empty), or AGENT_E_INVAL with one '\n'-terminated line
 * per problem appended to errors ("Egress:S3Storage:s3:BucketName: required"): unknown provider
 * type, a name used by two types, missing required setting, bad number/duration/bool, unknown key
 * of a provider, a *Name without its Egress:Properties key. Never logs, never puts a secret's
 * value in errors. UV_ENOMEM. The set holds copies: entries may go once this returns.
 */
int egress_set_parse(const struct egress_kv *entries, size_t n, struct egress_set **out,
                     struct buf *errors);
void egress_set_free(struct egress_set *s);
/* How many providers s holds (0 for NULL), and the i-th (i < count), in configuration order. */
size_t egress_set_count(const struct egress_set *s);
const struct egress_provider *egress_set_at(const struct egress_set *s, size_t i);
/*
 * The providers' names in configuration order: *names is a malloc'd, NULL-terminated array of *n
 * pointers into s (valid while s lives; the caller frees the array alone). Never NULL on success,
 * also for an empty or NULL set (*n 0). 0 or UV_ENOMEM (*names NULL).
 */
int egress_set_names(const struct egress_set *s, const char ***names, size_t *n);
/* The provider of that name (case-insensitive, as configuration keys), or NULL. */
const struct egress_provider *egress_find(const struct egress_set *s, const char *name);
enum egress_type egress_provider_type(const struct egress_provider *p);
const char *egress_provider_name(const struct egress_provider *p);

struct egress_target;

/* Room again after egress_full was true (the queue drained to half the window). */
typedef void (*egress_ready_cb)(void *ud);
/*
 * The upload ended. status 0: location is the artifact's place (a file path, the object's URL or
 * a pre-signed URL). status < 0: error_message says why in the store's words (S3's Code and
 * Message), location is NULL. Both strings live until it returns. Called exactly once, after
 * egress_finish or egress_abort or on a failure of the store, from the loop (never from inside an
 * egress_* call); the target is freed right after it returns, so on_done must not call egress_*
 * on it.
 */
typedef void (*egress_done_cb)(void *ud, int status, const char *location,
                               const char *error_message);

struct egress_request {
    const char *artifact_name; /* file / object name, e.g. 20261126_141000_4242.nettrace */
    const char *content_type;  /* e.g. application/octet-stream */
    egress_ready_cb on_ready;
    egress_done_cb on_done;
    void *ud;
    /* S3: one HTTP request fails after idle_ms without a byte moving (0 → 30 s) or total_ms in
     * all (0 → 900 s: a 5 GiB part at ~6 MB/s); the file store has none. */
    uint64_t idle_ms;
    uint64_t total_ms;
};

/*
 * Starts an upload; 0 (the target exists until on_done returned) or an error (nothing called):
 * AGENT_E_INVAL (no on_done, an artifact_name that is not a plain file name: empty, ".", "..",
 * with a '/', longer than 255 bytes), UV_ENOMEM. The target copies what it needs of p and rq:
 * both may go once this returns (the set may be freed while uploads run).
 */
int egress_open(uv_loop_t *loop, const struct egress_provider *p, const struct egress_request *rq,
                struct egress_target **out);
/*
 * Queues n bytes. base != NULL: data lies inside the malloc'd block base, owned by the target from
 * this call on, whatever it returns; base == NULL: data is copied. 0, or an error after which
 * the upload is failing (on_done follows): the store's error, UV_ENOMEM, AGENT_E_TOOBIG (the
 * producer went on far past egress_full), AGENT_E_INVAL after egress_finish or egress_abort.
 */
int egress_write(struct egress_target *t, void *base, const uint8_t *data, size_t n);
/* True while the producer should pause (bounded memory: a few parts for S3, a window for files). */
bool egress_full(const struct egress_target *t);
/* No more bytes: complete the upload (rename / CompleteMultipartUpload); on_done follows. A
 * second call does nothing. */
void egress_finish(struct egress_target *t);
/*
 * Give up: remove what was written (unlink / AbortMultipartUpload); on_done(status UV_ECANCELED,
 * or the store's error if it failed first) follows. Also after egress_finish while bytes are
 * still being written; once the store commits (the rename, CompleteMultipartUpload) it is too
 * late and does nothing: on_done reports the commit's result. After on_done: not allowed.
 */
void egress_abort(struct egress_target *t);
/* Bytes accepted so far. */
uint64_t egress_bytes(const struct egress_target *t);

struct buf;
/*
 * A location (on_done's) fit for the log, appended to out: a pre-signed URL is a bearer secret
 * (whoever holds it reads the object until it expires, and X-Amz-Security-Token is the session
 * token itself), so the values of its X-Amz-Signature and X-Amz-Security-Token query parameters
 * (any ASCII case) become "REDACTED"; the rest (X-Amz-Credential's key id, which is no secret,
 * X-Amz-Date, X-Amz-Expires) and any other location are kept as they are. 0, -ENOMEM, or
 * AGENT_E_TOOBIG (out's cap).
 */
int egress_location_for_log(const char *location, struct buf *out);

#endif
