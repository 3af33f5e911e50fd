/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "aws_creds.h"
#include "aws_remote.h"
#include "bufpool.h"
#include "egress_internal.h"
#include "ehttp.h"
#include "err.h"
#include "hex.h"
#include "log.h"
#include "s3.h"
#include "s3_xml.h"
#include "sigv4.h"

/*
 * One S3 upload (S3 API Reference: PutObject, CreateMultipartUpload, UploadPart,
 * CompleteMultipartUpload, AbortMultipartUpload), streamed: the producer's bytes fill the
 * current part while the previous one is on the wire, so memory holds about two parts whatever
 * the artifact's size, and nothing touches dotmon's disk.
 *
 *  - An artifact smaller than one part never starts a multipart upload: egress_finish sends it
 *    with one PutObject.
 *  - When the current part is full, CreateMultipartUpload (once), then UploadPart for it; the next
 *    part fills meanwhile. egress_full is true once that one is full too.
 *  - egress_finish sends the last (shorter) part, then CompleteMultipartUpload. S3 may answer the
 *    latter 200 with an <Error> body; that is a failure.
 *  - Every request is retried with exponential backoff on a connection failure, a 5xx or a 429,
 *    at most S3_MAX_ATTEMPTS times; then the upload fails. A failed or aborted upload that had
 *    begun is ended with AbortMultipartUpload (retried the same way), so no part is left behind.
 *
 * One request at a time: the operations are sequential by construction (a part is uploaded after
 * the previous one), which keeps the state small: `op` names the request in flight, `backoff`
 * is armed between attempts and, with 0 ms, to deliver on_done on a fresh loop turn (never from
 * inside egress_write/finish/abort).
 */

#define IDLE_MS     30000u     /* default: no byte moved for this long, the attempt failed */
#define TOTAL_MS    900000u    /* default: one request, all in (a 5 GiB part at ~6 MB/s) */
#define RESP_MAX    (1u << 20) /* XML answers are small */
#define LOG_CAT     "Egress"
#define DEFAULT_REG "us-east-1"

enum s3_op { OP_NONE, OP_INITIATE, OP_PART, OP_COMPLETE, OP_PUT, OP_ABORT };

static const char *const op_names[] = {"",           "CreateMultipartUpload",
                                       "UploadPart", "CompleteMultipartUpload",
                                       "PutObject",  "AbortMultipartUpload"};

struct s3_target {
    struct egress_target base; /* first: egress.c casts */
    uv_loop_t *loop;
    /* configuration, copied */
    struct s3_where where;
    char *path; /* decoded, signed: "/bucket/key" or "/key" */
    char *region, *access_key_id, *secret, *token, *content_type;
    bool kms;
    char *kms_key;                 /* NULL: the bucket's default KMS key */
    char *bucket, *key, *endpoint; /* to address the object again once the region is known */
    bool force_path_style;
    bool region_given;  /* RegionName or AWS_REGION: a profile's region does not replace it */
    bool creds_pending; /* the credential chain is running: no request until it answers */
    struct aws_creds_req *creds_req;      /* while creds_pending */
    char *profile, *profile_path;         /* to run the chain again */
    time_t creds_obtained, creds_expires; /* 0: keys that do not expire */
    uint64_t presign_s, part_base;
    uint64_t idle_ms, total_ms; /* each HTTP request's bounds (egress_request's, or defaults) */
    struct ehttp_tls *tls;
    egress_ready_cb on_ready;
    egress_done_cb on_done;
    void *ud;
    /* data */
    uint64_t bytes;
    struct buf cur; /* the part being filled */
    EVP_MD_CTX *cur_md;
    struct buf sending; /* the part on the wire (until stored) */
    char sending_hash[SIGV4_HEX_SIZE];
    uint32_t sending_no;
    struct s3_part *parts;
    size_t nparts, parts_cap;
    char *upload_id;
    struct buf req_body; /* CompleteMultipartUpload's XML */
    /* progress */
    enum s3_op op;
    struct ehttp_conn *conn;
    unsigned attempt;
    uv_timer_t backoff;
    bool backoff_armed;
    bool finishing; /* egress_finish was called */
    bool canceled;  /* egress_abort was called */
    bool stored;    /* the object exists: PutObject or CompleteMultipartUpload succeeded */
    bool aborted;   /* AbortMultipartUpload was tried (whatever came of it) */
    bool delivering;
    int status; /* first failure (< 0) */
    char message[512];
    char *location;
    bool closing;
};

static void kick(struct s3_target *t);
static void start_op(struct s3_target *t, enum s3_op op);
static int take_where(struct s3_target *t);
static void on_creds(void *ud, int err, struct aws_creds *c, const char *why);

/*
 * The one setter of the request in flight (docs/style.md §12: checked transitions). A request
 * starts only when none is in flight, is retried as itself, or ends; and nothing follows a stored
 * object but the report. Anything else is a bug here: abort, even in release builds.
 */
static void set_op(struct s3_target *t, enum s3_op op)
{
    bool legal = op == OP_NONE || t->op == op || (t->op == OP_NONE && !t->stored && !t->closing);
    if (!legal) {
        log_error(LOG_CAT, "S3: illegal transition %d -> %d", (int)t->op, (int)op);
        abort();
    }
    t->op = op;
}

static struct s3_target *of(struct egress_target *t)
{
    return (struct s3_target *)t;
}

static const struct s3_target *of_c(const struct egress_target *t)
{
    return (const struct s3_target *)t;
}

/* ---- teardown ---- */

static void target_free(struct s3_target *t)
{
    free(t->path);
    free(t->region);
    free(t->access_key_id);
    s3__free_secret(&t->secret);
    s3__free_secret(&t->token);
    free(t->content_type);
    free(t->kms_key);
    free(t->profile);
    free(t->profile_path);
    free(t->bucket);
    free(t->key);
    free(t->endpoint);
    ehttp_tls_free(t->tls);
    buf_fini(&t->cur);
    buf_fini(&t->sending);
    buf_fini(&t->req_body);
    EVP_MD_CTX_free(t->cur_md);
    free(t->parts);
    free(t->upload_id);
    free(t->location);
    free(t);
}

static void on_closed(uv_handle_t *h)
{
    target_free(h->data);
}

/* on_done, then the target goes away. */
static void deliver(struct s3_target *t)
{
    if (t->closing) {
        return;
    }
    t->closing = true;
    if (t->status == 0) {
        log_info(LOG_CAT, "S3: stored %s (%llu bytes, %zu parts)", t->path,
                 (unsigned long long)t->bytes, t->nparts);
        t->on_done(t->ud, 0, t->location, NULL);
    } else {
        log_warn(LOG_CAT, "S3: upload of %s failed: %s", t->path, t->message);
        t->on_done(t->ud, t->status, NULL, t->message);
    }
    uv_close((uv_handle_t *)&t->backoff, on_closed);
}

/* The first failure wins; later ones (an AbortMultipartUpload that fails too) are appended. */
static void set_failure(struct s3_target *t, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_failure(struct s3_target *t, int status, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (t->status == 0) {
        t->status = status;
        snprintf(t->message, sizeof(t->message), "%s", msg);
    } else {
        size_t n = strlen(t->message);
        snprintf(t->message + n, sizeof(t->message) - n, "; then %s", msg);
    }
}

/* ---- timer: backoff between attempts, and deferred delivery ---- */

static void on_backoff(uv_timer_t *h)
{
    struct s3_target *t = h->data;
    t->backoff_armed = false;
    if (t->delivering) {
        deliver(t);
        return;
    }
    if (t->op != OP_NONE && t->conn == NULL) {
        start_op(t, t->op); /* the retry */
        return;
    }
    kick(t);
}

static void arm(struct s3_target *t, uint64_t ms)
{
    t->backoff_armed = true;
    uv_timer_start(&t->backoff, on_backoff, ms, 0);
}

/* ---- the parts ---- */

static uint64_t cur_part_size(const struct s3_target *t)
{
    return s3__part_size(t->part_base, (uint32_t)t->nparts + (t->op == OP_PART ? 2 : 1));
}

/* Moves the filled part to `sending`, with its hash; the next part starts empty. */
static int take_part(struct s3_target *t)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    if (EVP_DigestFinal_ex(t->cur_md, md, &len) != 1 || len != 32 ||
        EVP_DigestInit_ex(t->cur_md, EVP_sha256(), NULL) != 1) {
        return UV_ENOMEM;
    }
    hex_encode(md, 32, t->sending_hash);
    t->sending_hash[64] = '\0';
    buf_fini(&t->sending);
    t->sending = t->cur;
    buf_init(&t->cur, t->sending.max);
    return 0;
}

static int add_part(struct s3_target *t, uint32_t number, const char *etag)
{
    if (t->nparts == t->parts_cap) {
        size_t cap = t->parts_cap ? t->parts_cap * 2 : 16;
        struct s3_part *p = realloc(t->parts, cap * sizeof(*p));
        if (p == NULL) {
            return UV_ENOMEM;
        }
        t->parts = p;
        t->parts_cap = cap;
    }
    t->parts[t->nparts].number = number;
    snprintf(t->parts[t->nparts].etag, sizeof(t->parts[0].etag), "%s", etag);
    t->nparts++;
    return 0;
}

/* ---- requests ---- */

struct req_parts {
    const char *method;
    struct buf query_target; /* encoded, for the request line */
    struct sigv4_kv query[2];
    size_t nquery;
    const uint8_t *body;
    size_t body_len;
    const char *payload_hash;
    char hash_buf[SIGV4_HEX_SIZE];
    bool content_type;
};

/* Adds one query parameter (decoded) to both the signed list and the request target. */
static int add_query(struct req_parts *r, const char *name, const char *value)
{
    r->query[r->nquery].name = name;
    r->query[r->nquery].value = value;
    r->nquery++;
    int rc = buf_append_str(&r->query_target, buf_size(&r->query_target) == 0 ? "?" : "&");
    if (rc == 0) {
        rc = sigv4_uri_encode(&r->query_target, name, strlen(name), false);
    }
    if (rc == 0) {
        rc = buf_append_str(&r->query_target, "=");
    }
    if (rc == 0) {
        rc = sigv4_uri_encode(&r->query_target, value, strlen(value), false);
    }
    return rc;
}

/* What op sends: method, query, body and its hash. */
static int describe(struct s3_target *t, enum s3_op op, struct req_parts *r, char *partno)
{
    int rc = 0;
    switch (op) {
    case OP_INITIATE:
        r->method = "POST";
        r->content_type = true;
        rc = add_query(r, "uploads", "");
        break;
    case OP_PART:
        r->method = "PUT";
        snprintf(partno, 12, "%u", (unsigned)t->sending_no);
        rc = add_query(r, "partNumber", partno);
        if (rc == 0) {
            rc = add_query(r, "uploadId", t->upload_id);
        }
        r->body = buf_data(&t->sending);
        r->body_len = buf_size(&t->sending);
        r->payload_hash = t->sending_hash;
        break;
    case OP_COMPLETE:
        r->method = "POST";
        rc = add_query(r, "uploadId", t->upload_id);
        r->body = buf_data(&t->req_body);
        r->body_len = buf_size(&t->req_body);
        break;
    case OP_PUT:
        r->method = "PUT";
        r->content_type = true;
        r->body = buf_data(&t->sending);
        r->body_len = buf_size(&t->sending);
        r->payload_hash = t->sending_hash;
        break;
    case OP_ABORT:
        r->method = "DELETE";
        rc = add_query(r, "uploadId", t->upload_id);
        break;
    case OP_NONE:
        return AGENT_E_INVAL;
    }
    if (r->payload_hash == NULL) {
        sigv4_sha256_hex(r->body != NULL ? (const void *)r->body : "", r->body_len, r->hash_buf);
        r->payload_hash = r->hash_buf;
    }
    return rc;
}

static void on_response(void *ud, int err, const struct ehttp_response *resp, const char *why);

/* Signs and sends op (a first attempt or a retry). */
static int send_op(struct s3_target *t, enum s3_op op)
{
    struct req_parts r;
    memset(&r, 0, sizeof(r));
    buf_init(&r.query_target, 4096);
    char partno[12], date[SIGV4_DATE_SIZE];
    struct buf target, auth;
    buf_init(&target, 8192);
    buf_init(&auth, 1024);
    int rc = describe(t, op, &r, partno);
    sigv4_amz_date(time(NULL), date);
    struct sigv4_kv h[S3_MAX_HEADERS];
    /* Content-Type only where S3 records it; the token only when there is one. */
    struct s3_head_in hin = {t->where.host_header,
                             r.payload_hash,
                             date,
                             r.content_type ? t->content_type : NULL,
                             t->token,
                             op == OP_PUT || op == OP_INITIATE,
                             t->kms,
                             t->kms_key};
    size_t nh = s3__headers(&hin, h);
    struct sigv4_key key = {t->access_key_id, t->secret, t->region, "s3"};
    struct sigv4_req sr = {r.method, t->path, r.query, r.nquery, h, nh, r.payload_hash};
    if (rc == 0) {
        rc = sigv4_authorization(&key, &sr, date, &auth);
    }
    if (rc == 0) {
        rc = sigv4_uri_encode(&target, t->path, strlen(t->path), true);
    }
    if (rc == 0) {
        rc = buf_append(&target, buf_data(&r.query_target), buf_size(&r.query_target));
    }
    struct ehttp_header hh[S3_MAX_HEADERS + 1];
    for (size_t i = 0; i < nh; i++) {
        hh[i].name = h[i].name;
        hh[i].value = h[i].value;
    }
    hh[nh].name = "Authorization";
    hh[nh].value = buf_cstr(&auth);
    struct ehttp_request rq = {r.method,
                               t->where.host,
                               t->where.port,
                               t->where.https ? t->tls : NULL,
                               buf_cstr(&target),
                               hh,
                               nh + 1,
                               r.body,
                               r.body_len,
                               t->idle_ms,
                               t->total_ms,
                               RESP_MAX};
    if (rc == 0) {
        rc = ehttp_start(t->loop, &rq, on_response, t, &t->conn);
    }
    buf_fini(&r.query_target);
    buf_fini(&target);
    buf_fini(&auth);
    return rc;
}

static void start_op(struct s3_target *t, enum s3_op op)
{
    if (t->op != op) {
        t->attempt = 0;
    }
    set_op(t, op);
    t->attempt++;
    int rc = send_op(t, op);
    if (rc != 0) {
        set_op(t, OP_NONE);
        t->conn = NULL;
        set_failure(t, rc, "S3 %s: %s", op_names[op], agent_strerror(rc));
        if (op == OP_ABORT) {
            t->aborted = true;
        }
        kick(t);
    }
}

/* ---- answers ---- */

static int http_status_err(int status)
{
    if (status == 403 || status == 401) {
        return AGENT_E_AUTH;
    }
    return status == 404 ? AGENT_E_NOTFOUND : UV_EIO;
}

/* "HTTP 500 InternalError: We encountered…" from an error answer. */
static void describe_error(const struct ehttp_response *resp, char *out, size_t outlen)
{
    struct buf code, msg;
    buf_init(&code, 256);
    buf_init(&msg, 512);
    if (resp->body_len > 0 &&
        s3_xml_error((const char *)resp->body, resp->body_len, &code, &msg) == 0) {
        snprintf(out, outlen, "HTTP %d %s: %s", resp->status, buf_cstr(&code), buf_cstr(&msg));
    } else {
        snprintf(out, outlen, "HTTP %d", resp->status);
    }
    buf_fini(&code);
    buf_fini(&msg);
}

/*
 * A 2xx answer to op: 0, or an error with why filled (and *retry when another attempt may help).
 */
static int accept_answer(struct s3_target *t, enum s3_op op, const struct ehttp_response *resp,
                         bool *retry, char *why, size_t whylen)
{
    const char *body = (const char *)resp->body;
    struct buf a, code, msg;
    buf_init(&a, 4096);
    buf_init(&code, 256);
    buf_init(&msg, 512);
    int rc = 0;
    if (op == OP_INITIATE) {
        rc = s3_xml_upload_id(body, resp->body_len, &a);
        if (rc == 0) {
            t->upload_id = buf_steal(&a, NULL);
            rc = t->upload_id != NULL ? 0 : UV_ENOMEM;
        }
        snprintf(why, whylen, "%s", "no UploadId in the answer");
    } else if (op == OP_PART) {
        const char *etag = ehttp_response_header(resp, "ETag");
        if (etag == NULL || !s3_etag_valid(etag, strlen(etag))) {
            snprintf(why, whylen, "%s", "no usable ETag in the answer");
            rc = AGENT_E_PROTO;
        } else {
            rc = add_part(t, t->sending_no, etag);
            buf_fini(&t->sending);
        }
    } else if (op == OP_COMPLETE) {
        rc = s3_xml_complete_result(body, resp->body_len, &a, &code, &msg);
        if (rc == AGENT_E_RUNTIME) {
            /* 200 with an error inside: InternalError and SlowDown are worth another try. */
            const char *c = buf_cstr(&code);
            *retry = strcmp(c, "InternalError") == 0 || strcmp(c, "SlowDown") == 0;
            snprintf(why, whylen, "%s: %s", c, buf_cstr(&msg));
            rc = UV_EIO;
        } else if (rc != 0) {
            snprintf(why, whylen, "%s", "unreadable answer");
        } else {
            t->stored = true;
        }
    } else if (op == OP_PUT) {
        t->stored = true;
        buf_fini(&t->sending);
    }
    buf_fini(&a);
    buf_fini(&code);
    buf_fini(&msg);
    return rc;
}

static bool s3_full(const struct egress_target *et);

static void on_response(void *ud, int err, const struct ehttp_response *resp, const char *why)
{
    struct s3_target *t = ud;
    bool was_full = s3_full(&t->base);
    enum s3_op op = t->op;
    t->conn = NULL;
    bool retry = false;
    int fail_status = 0;
    char msg[400] = "";
    if (err != 0) {
        retry = s3__retryable(err, 0);
        fail_status = err;
        snprintf(msg, sizeof(msg), "%s", why);
    } else if (resp->status / 100 != 2 && !(op == OP_ABORT && resp->status == 404)) {
        /* (An AbortMultipartUpload answered NoSuchUpload has nothing left to remove.) */
        retry = s3__retryable(0, resp->status);
        fail_status = http_status_err(resp->status);
        describe_error(resp, msg, sizeof(msg));
    } else if (op == OP_ABORT) {
        t->aborted = true;
    } else {
        fail_status = accept_answer(t, op, resp, &retry, msg, sizeof(msg));
    }
    if (fail_status != 0) {
        bool may_retry = retry && t->attempt < S3_MAX_ATTEMPTS && (!t->canceled || op == OP_ABORT);
        if (may_retry) {
            uint64_t ms = s3__backoff_ms(t->attempt);
            log_warn(LOG_CAT, "S3 %s of %s: %s; attempt %u of %u in %llu ms", op_names[op], t->path,
                     msg, t->attempt + 1, S3_MAX_ATTEMPTS, (unsigned long long)ms);
            arm(t, ms); /* t->op stays: on_backoff sends it again */
            return;
        }
        if (op == OP_ABORT) {
            t->aborted = true;
        }
        char partinfo[24] = "";
        if (op == OP_PART) {
            snprintf(partinfo, sizeof(partinfo), " (part %u)", (unsigned)t->sending_no);
        }
        set_failure(t, fail_status, "S3 %s%s: %s", op_names[op], partinfo, msg);
    }
    set_op(t, OP_NONE);
    kick(t);
    if (was_full && !s3_full(&t->base) && t->on_ready != NULL) {
        t->on_ready(t->ud);
    }
}

/* ---- what comes next ---- */

/* The object's URL, or a pre-signed GET URL for it. */
static int make_location(struct s3_target *t)
{
    struct buf u;
    buf_init(&u, 16384);
    int rc = buf_printf(&u, "%s://%s", t->where.https ? "https" : "http", t->where.host_header);
    if (rc == 0) {
        rc = sigv4_uri_encode(&u, t->path, strlen(t->path), true);
    }
    if (rc == 0 && t->presign_s != 0) {
        char date[SIGV4_DATE_SIZE];
        sigv4_amz_date(time(NULL), date);
        struct sigv4_key key = {t->access_key_id, t->secret, t->region, "s3"};
        rc = buf_append_str(&u, "?");
        if (rc == 0) {
            rc = sigv4_presign_query(&key, t->token, "GET", t->path, t->where.host_header, date,
                                     t->presign_s, &u);
        }
    }
    if (rc == 0) {
        t->location = buf_steal(&u, NULL);
        rc = t->location != NULL ? 0 : UV_ENOMEM;
    }
    buf_fini(&u);
    return rc;
}

static void schedule_delivery(struct s3_target *t)
{
    t->delivering = true;
    arm(t, 0);
}

/* After a failure or egress_abort: abort the multipart upload if there is one, then report. */
static void wind_down(struct s3_target *t)
{
    if (t->status == 0) {
        t->status = UV_ECANCELED;
        snprintf(t->message, sizeof(t->message), "%s", "S3 upload aborted");
    }
    if (t->upload_id != NULL && !t->stored && !t->aborted) {
        start_op(t, OP_ABORT);
        return;
    }
    schedule_delivery(t);
}

static void next_part(struct s3_target *t)
{
    if (t->nparts >= S3_MAX_PARTS) {
        set_failure(t, AGENT_E_TOOBIG, "S3 UploadPart: more than %u parts", S3_MAX_PARTS);
        wind_down(t);
        return;
    }
    int rc = take_part(t);
    if (rc != 0) {
        set_failure(t, rc, "S3 UploadPart: %s", agent_strerror(rc));
        wind_down(t);
        return;
    }
    t->sending_no = (uint32_t)t->nparts + 1;
    start_op(t, OP_PART);
}

/* Starts whatever the state calls for, unless a request or a backoff is pending. */
static void kick(struct s3_target *t)
{
    if (t->closing || t->delivering || t->conn != NULL || t->backoff_armed || t->creds_pending) {
        return;
    }
    if (t->status != 0 || t->canceled) {
        wind_down(t);
        return;
    }
    if (t->stored) {
        int rc = make_location(t);
        if (rc != 0) {
            set_failure(t, rc, "S3: %s", agent_strerror(rc));
        }
        schedule_delivery(t);
        return;
    }
    if (t->status == 0 && aws__creds_stale(t->creds_obtained, t->creds_expires, time(NULL))) {
        /* Temporary credentials near their Expiration: fetch them again before the next
         * request (the chain's cache answers at once while they are fresh). */
        int rc = aws_creds_start(t->loop, t->profile, t->profile_path, t->idle_ms, on_creds, t,
                                 &t->creds_req);
        if (rc == 0) {
            t->creds_pending = true;
            return;
        }
        set_failure(t, rc, "S3 credentials: %s", agent_strerror(rc));
        wind_down(t);
        return;
    }
    size_t have = buf_size(&t->cur);
    if (t->upload_id == NULL) {
        if (have >= t->part_base) {
            start_op(t, OP_INITIATE);
        } else if (t->finishing) {
            int rc = take_part(t); /* the whole artifact, in one PutObject */
            if (rc != 0) {
                set_failure(t, rc, "S3 PutObject: %s", agent_strerror(rc));
                wind_down(t);
                return;
            }
            start_op(t, OP_PUT);
        }
        return;
    }
    if (have >= cur_part_size(t) || (t->finishing && have > 0)) {
        next_part(t);
        return;
    }
    if (t->finishing) {
        buf_reset(&t->req_body);
        int rc = s3_xml_complete_body(t->parts, t->nparts, &t->req_body);
        if (rc != 0) {
            set_failure(t, rc, "S3 CompleteMultipartUpload: %s", agent_strerror(rc));
            wind_down(t);
            return;
        }
        start_op(t, OP_COMPLETE);
    }
}

/* ---- the target's operations ---- */

static int s3_write(struct egress_target *et, void *base, const uint8_t *data, size_t n)
{
    struct s3_target *t = of(et);
    int rc = 0;
    if (t->finishing || t->canceled || t->closing) {
        rc = AGENT_E_INVAL;
    } else if (t->status != 0) {
        rc = t->status;
    } else if (buf_size(&t->cur) + n > 2 * cur_part_size(t) + (1u << 20)) {
        /* The producer went on past egress_full by more than a part: memory stays bounded. */
        set_failure(t, AGENT_E_TOOBIG, "S3: the producer wrote %zu bytes past a full buffer", n);
        rc = AGENT_E_TOOBIG;
    } else {
        if (t->cur.cap == 0) {
            (void)buf_reserve(&t->cur, (size_t)cur_part_size(t) + 65536);
        }
        rc = buf_append(&t->cur, data, n);
        if (rc == 0 && EVP_DigestUpdate(t->cur_md, data, n) != 1) {
            rc = UV_ENOMEM;
        }
        if (rc == 0) {
            t->bytes += n;
        } else {
            set_failure(t, rc, "S3: %s", agent_strerror(rc));
        }
    }
    bufpool_release(base);
    kick(t);
    return rc;
}

static bool s3_full(const struct egress_target *et)
{
    const struct s3_target *t = of_c(et);
    if (t->status != 0 || t->canceled || t->finishing) {
        return true;
    }
    return buf_size(&t->cur) >= cur_part_size(t);
}

static void s3_finish(struct egress_target *et)
{
    struct s3_target *t = of(et);
    if (t->finishing || t->closing) {
        return;
    }
    t->finishing = true;
    kick(t);
}

static void s3_abort(struct egress_target *et)
{
    struct s3_target *t = of(et);
    if (t->canceled || t->closing || t->delivering) {
        return;
    }
    t->canceled = true;
    if (t->creds_pending) { /* no request was sent with these credentials yet: drop the chain */
        aws_creds_cancel(t->creds_req);
        t->creds_req = NULL;
        t->creds_pending = false;
    }
    /* A CreateMultipartUpload on the wire is let through: its UploadId is what the abort needs.
     * An AbortMultipartUpload already on its way is the goal anyway. Anything else stops now. */
    if (t->conn != NULL && t->op != OP_INITIATE && t->op != OP_ABORT) {
        ehttp_cancel(t->conn);
        t->conn = NULL;
        set_op(t, OP_NONE);
    }
    if (t->backoff_armed && t->op != OP_ABORT) {
        uv_timer_stop(&t->backoff);
        t->backoff_armed = false;
        set_op(t, OP_NONE);
    }
    kick(t);
}

static uint64_t s3_bytes(const struct egress_target *et)
{
    return of_c(et)->bytes;
}

static const struct egress_target_ops s3_ops = {s3_write, s3_full, s3_finish, s3_abort, s3_bytes};

/* ---- opening ---- */

static bool key_ok(const char *k)
{
    size_t n = k != NULL ? strlen(k) : 0;
    if (n == 0 || n > 1024 || k[0] == '/') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)k[i] < 32 || k[i] == 127) {
            return false;
        }
    }
    return true;
}

/* The upload's credentials arrived from the chain (aws_creds.c), or did not. */
static void on_creds(void *ud, int err, struct aws_creds *c, const char *why)
{
    struct s3_target *t = ud;
    t->creds_pending = false;
    t->creds_req = NULL;
    if (err == 0) {
        free(t->access_key_id); /* a refresh replaces the keys that went stale */
        s3__free_secret(&t->secret);
        s3__free_secret(&t->token);
        t->access_key_id = c->access_key_id;
        t->secret = c->secret_access_key;
        t->token = c->session_token;
        t->creds_obtained = c->obtained;
        t->creds_expires = c->expires;
        c->access_key_id = c->secret_access_key = c->session_token = NULL;
        if (!t->region_given && c->region != NULL && c->region[0] != '\0') {
            free(t->region);
            t->region = c->region;
            c->region = NULL;
            err = take_where(t);
        }
        log_info(LOG_CAT, "S3: credentials for %s from %s (region %s)", t->path, c->source,
                 t->region);
        aws_creds_fini(c);
        if (err != 0) {
            set_failure(t, err, "S3: the profile's region %s: %s", t->region, agent_strerror(err));
        }
    } else {
        set_failure(t, err, "S3 credentials: %s", why);
    }
    /* The producer may have filled the buffer while the chain ran: it waits for on_ready. */
    bool was_full = s3_full(&t->base);
    kick(t);
    if (was_full && !s3_full(&t->base) && t->on_ready != NULL) {
        t->on_ready(t->ud);
    }
}

/* The settings' keys, or else AWS's credential chain (on its way when this returns). */
static int take_credentials(struct s3_target *t, const struct egress_s3_options *o)
{
    if (o->access_key_id != NULL && o->secret_access_key != NULL) {
        t->access_key_id = strdup(o->access_key_id);
        t->secret = strdup(o->secret_access_key);
        t->token = o->session_token != NULL ? strdup(o->session_token) : NULL;
        bool token_ok = o->session_token == NULL || t->token != NULL;
        return t->access_key_id != NULL && t->secret != NULL && token_ok ? 0 : UV_ENOMEM;
    }
    t->profile = o->profile != NULL ? strdup(o->profile) : NULL;
    t->profile_path = o->profile_path != NULL ? strdup(o->profile_path) : NULL;
    if ((o->profile != NULL && t->profile == NULL) ||
        (o->profile_path != NULL && t->profile_path == NULL)) {
        return UV_ENOMEM;
    }
    int rc = aws_creds_start(t->loop, t->profile, t->profile_path, t->idle_ms, on_creds, t,
                             &t->creds_req);
    t->creds_pending = rc == 0;
    return rc;
}

/* Host, Host header and signed path from the endpoint (or AWS's for the region), bucket, key. */
static int take_where(struct s3_target *t)
{
    struct url_origin ep;
    const char *why = "";
    char aws[300];
    const char *url = t->endpoint;
    if (url == NULL) {
        snprintf(aws, sizeof(aws), "https://s3.%s.amazonaws.com", t->region);
        url = aws;
    }
    int rc = s3__endpoint_parse(url, &ep, &why);
    if (rc != 0) {
        log_error(LOG_CAT, "S3: endpoint %s: %s", url, why);
        return rc;
    }
    struct buf path;
    buf_init(&path, 4096);
    free(t->path);
    t->path = NULL;
    rc = s3__where(&ep, t->bucket, t->force_path_style, t->key, &t->where, &path);
    if (rc == 0) {
        t->path = buf_steal(&path, NULL);
        rc = t->path != NULL ? 0 : UV_ENOMEM;
    }
    buf_fini(&path);
    return rc;
}

/* Endpoint, addressing and TLS of a new target. */
static int take_place(struct s3_target *t, const struct egress_s3_options *o, const char *key)
{
    t->force_path_style = o->force_path_style;
    t->bucket = strdup(o->bucket);
    t->key = strdup(key);
    t->endpoint = o->endpoint != NULL ? strdup(o->endpoint) : NULL;
    if (t->bucket == NULL || t->key == NULL || (o->endpoint != NULL && t->endpoint == NULL)) {
        return UV_ENOMEM;
    }
    int rc = take_where(t);
    /* Without Endpoint the store is AWS's, over HTTPS whatever the region turns out to be. */
    if (rc == 0 && (t->where.https || o->endpoint == NULL)) {
        char msg[400];
        rc = ehttp_tls_new(o->ca_path, &t->tls, msg, sizeof(msg));
        if (rc != 0) {
            log_error(LOG_CAT, "S3: CertificateAuthorityPath: %s", msg);
        }
    }
    return rc;
}

int egress_s3_open(uv_loop_t *loop, const struct egress_s3_options *o,
                   const struct egress_request *rq, struct egress_target **out)
{
    if (o->bucket == NULL || rq->on_done == NULL || !key_ok(rq->artifact_name)) {
        return AGENT_E_INVAL;
    }
    struct s3_target *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        return UV_ENOMEM;
    }
    t->base.ops = &s3_ops;
    t->loop = loop;
    t->on_ready = rq->on_ready;
    t->on_done = rq->on_done;
    t->ud = rq->ud;
    t->presign_s = o->presign_s;
    t->kms = o->kms;
    t->idle_ms = rq->idle_ms > 0 ? rq->idle_ms : IDLE_MS;
    t->total_ms = rq->total_ms > 0 ? rq->total_ms : TOTAL_MS;
    t->part_base = o->part_size != 0 ? o->part_size : S3_DEFAULT_PART;
    buf_init(&t->cur, 0);
    buf_init(&t->sending, 0);
    buf_init(&t->req_body, 0);
    /* RegionName, else AWS_REGION, else the profile's (on_creds), else us-east-1. */
    const char *env_region = getenv("AWS_REGION");
    bool env_region_ok =
        env_region != NULL && env_region[0] != '\0' && strpbrk(env_region, "/ \t") == NULL;
    t->region_given = o->region != NULL || env_region_ok;
    t->region = strdup(o->region != NULL ? o->region : env_region_ok ? env_region : DEFAULT_REG);
    t->content_type =
        strdup(rq->content_type != NULL ? rq->content_type : "application/octet-stream");
    t->cur_md = EVP_MD_CTX_new();
    int rc = t->region != NULL && t->content_type != NULL && t->cur_md != NULL &&
                     EVP_DigestInit_ex(t->cur_md, EVP_sha256(), NULL) == 1
                 ? 0
                 : UV_ENOMEM;
    if (rc == 0 && o->kms && o->kms_key != NULL) {
        t->kms_key = strdup(o->kms_key);
        rc = t->kms_key != NULL ? 0 : UV_ENOMEM;
    }
    if (rc == 0) {
        rc = take_place(t, o, rq->artifact_name);
    }
    if (rc == 0) {
        rc = uv_timer_init(loop, &t->backoff);
    }
    if (rc != 0) {
        target_free(t);
        return rc;
    }
    t->backoff.data = t;
    rc = take_credentials(t, o);
    if (rc != 0) { /* reported through on_done, like any later failure */
        set_failure(t, rc, "S3 credentials: %s", agent_strerror(rc));
    }
    log_info(LOG_CAT, "S3: uploading %s to %s://%s (parts of %llu bytes%s)", t->path,
             t->where.https ? "https" : "http", t->where.host_header,
             (unsigned long long)t->part_base, t->kms ? ", SSE-KMS" : "");
    *out = &t->base;
    return 0;
}
