/* SPDX-License-Identifier: MIT */
/*
 * egress/s3_conf: the S3Storage settings (dotnet-monitor's names, dotmon's ranges), endpoint
 * parsing, virtual-hosted vs path-style addressing, and the pure retry/part-size rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "egress_internal.h"
#include "err.h"
#include "s3.h"

static int set(struct egress_s3_options *o, const char *setting, const char *value, struct buf *e)
{
    char key[128];
    snprintf(key, sizeof(key), "Egress:S3Storage:s3:%s", setting);
    return egress_s3_set(o, key, setting, value, e);
}

static void test_s3_settings(void **state)
{
    (void)state;
    struct egress_s3_options o;
    memset(&o, 0, sizeof(o));
    struct buf e;
    buf_init(&e, 0);
    assert_int_equal(set(&o, "bucketname", "dumps", &e), 0); /* names: any case */
    assert_int_equal(set(&o, "Endpoint", "https://minio.example:9000", &e), 0);
    assert_int_equal(set(&o, "RegionName", "eu-west-1", &e), 0);
    assert_int_equal(set(&o, "AccessKeyId", "AKID", &e), 0);
    assert_int_equal(set(&o, "SecretAccessKey", "very-secret", &e), 0);
    assert_int_equal(set(&o, "SessionToken", "tok", &e), 0);
    assert_int_equal(set(&o, "ForcePathStyle", "True", &e), 0);
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "01:00:00", &e), 0);
    assert_int_equal(o.presign_s, 3600);
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "1.00:00:00", &e), 0);
    assert_int_equal(o.presign_s, 86400);
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "90", &e), 0);
    assert_int_equal(o.presign_s, 90);
    assert_int_equal(set(&o, "CopyBufferSize", "5242880", &e), 0);
    assert_int_equal(o.part_size, 5242880);
    assert_true(o.force_path_style);
    assert_int_equal(egress_s3_check(&o, "s3", &e), 0);
    assert_int_equal(buf_size(&e), 0);
    /* Out of range, malformed, unknown: one line each naming the key, never a secret's value. */
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "00:00:59", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "1.00:00:01", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "PreSignedUrlExpiry", "1h", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "CopyBufferSize", "0", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "CopyBufferSize", "-1", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "CopyBufferSize", "5368709121", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "ForcePathStyle", "yes", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "UseKmsEncryption", "maybe", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "AwsProfileNames", "default", &e), AGENT_E_INVAL);
    assert_int_equal(set(&o, "SecretAccessKey", "two\nlines", &e), AGENT_E_INVAL);
    const char *msg = buf_cstr(&e);
    assert_non_null(strstr(msg, "Egress:S3Storage:s3:PreSignedUrlExpiry: not a duration"));
    assert_non_null(strstr(msg, "Egress:S3Storage:s3:CopyBufferSize: not a part size"));
    assert_non_null(strstr(msg, "Egress:S3Storage:s3:AwsProfileNames: unknown setting"));
    assert_non_null(strstr(msg, "Egress:S3Storage:s3:UseKmsEncryption: not a boolean"));
    assert_non_null(strstr(msg, "Egress:S3Storage:s3:SecretAccessKey: must be one line"));
    assert_null(strstr(msg, "two"));
    assert_null(strstr(msg, "very-secret"));
    egress_s3_options_fini(&o);
    egress_s3_options_fini(&o); /* twice is fine */
    buf_fini(&e);
}

/* dotnet-monitor's documented forms (its egress documentation and schema): a CopyBufferSize below
 * S3's minimum part is raised to 5 MiB, as its MultiPartUploadStream does, never refused; the KMS
 * and profile settings are known. */
static void test_s3_documented(void **state)
{
    (void)state;
    struct egress_s3_options o;
    memset(&o, 0, sizeof(o));
    struct buf e;
    buf_init(&e, 0);
    assert_int_equal(set(&o, "BucketName", "dumps", &e), 0);
    assert_int_equal(set(&o, "CopyBufferSize", "1024", &e), 0);
    assert_int_equal(o.part_size, S3_MIN_PART);
    assert_int_equal(o.part_asked, 1024);
    assert_int_equal(set(&o, "CopyBufferSize", "5242879", &e), 0);
    assert_int_equal(o.part_size, S3_MIN_PART);
    assert_int_equal(set(&o, "CopyBufferSize", "6291456", &e), 0);
    assert_int_equal(o.part_size, 6291456);
    assert_int_equal(o.part_asked, 0);
    assert_int_equal(set(&o, "CopyBufferSize", "1024", &e), 0);
    assert_int_equal(set(&o, "useKmsEncryption", "True", &e), 0);
    assert_true(o.kms);
    assert_int_equal(set(&o, "KmsEncryptionKey", "arn:aws:kms:us-east-1:111122223333:key/k1", &e),
                     0);
    assert_string_equal(o.kms_key, "arn:aws:kms:us-east-1:111122223333:key/k1");
    assert_int_equal(set(&o, "AwsProfileName", "monitor", &e), 0);
    assert_int_equal(set(&o, "AwsProfilePath", "/etc/dotmon/aws-credentials", &e), 0);
    assert_string_equal(o.profile, "monitor");
    assert_string_equal(o.profile_path, "/etc/dotmon/aws-credentials");
    assert_int_equal(egress_s3_check(&o, "s3", &e), 0);
    assert_int_equal(buf_size(&e), 0);
    egress_s3_options_fini(&o);
    buf_fini(&e);
}

static const char *signed_headers(const char *auth)
{
    const char *p = strstr(auth, "SignedHeaders=");
    return p != NULL ? p + strlen("SignedHeaders=") : "";
}

/* The request builder's headers: SSE-KMS on the two requests that create the object, signed. */
static void test_s3_headers(void **state)
{
    (void)state;
    struct sigv4_kv h[S3_MAX_HEADERS];
    struct s3_head_in in = {"b.s3.us-east-1.amazonaws.com",
                            SIGV4_EMPTY_SHA256,
                            "20260101T000000Z",
                            "application/octet-stream",
                            NULL,
                            true,
                            true,
                            "arn:aws:kms:us-east-1:111122223333:key/k1"};
    size_t n = s3__headers(&in, h);
    assert_int_equal(n, 6);
    assert_string_equal(h[4].name, "x-amz-server-side-encryption");
    assert_string_equal(h[4].value, "aws:kms");
    assert_string_equal(h[5].name, "x-amz-server-side-encryption-aws-kms-key-id");
    assert_string_equal(h[5].value, "arn:aws:kms:us-east-1:111122223333:key/k1");
    struct sigv4_key key = {"AKID", "secret", "us-east-1", "s3"};
    struct sigv4_req r = {"PUT", "/k", NULL, 0, h, n, SIGV4_EMPTY_SHA256};
    struct buf auth, canon;
    buf_init(&auth, 0);
    buf_init(&canon, 0);
    assert_int_equal(sigv4_authorization(&key, &r, "20260101T000000Z", &auth), 0);
    assert_int_equal(strncmp(signed_headers(buf_cstr(&auth)), "content-type;", 13), 0);
    assert_non_null(strstr(buf_cstr(&auth),
                           "SignedHeaders=content-type;host;x-amz-content-sha256;x-amz-date;"
                           "x-amz-server-side-encryption;"
                           "x-amz-server-side-encryption-aws-kms-key-id, "));
    assert_int_equal(sigv4_canonical_request(&r, &canon), 0);
    assert_non_null(strstr(buf_cstr(&canon), "\nx-amz-server-side-encryption:aws:kms\n"));
    /* Without a key: the bucket's default KMS key, one header. */
    in.kms_key = NULL;
    in.token = "tok";
    n = s3__headers(&in, h);
    assert_int_equal(n, 6);
    assert_string_equal(h[4].name, "x-amz-security-token");
    assert_string_equal(h[5].name, "x-amz-server-side-encryption");
    /* UploadPart, CompleteMultipartUpload, AbortMultipartUpload: none (S3 refuses them there). */
    in.creates = false;
    in.content_type = NULL;
    n = s3__headers(&in, h);
    assert_int_equal(n, 4);
    for (size_t i = 0; i < n; i++) {
        assert_null(strstr(h[i].name, "server-side"));
    }
    /* Without UseKmsEncryption, a PutObject carries none either. */
    in.creates = true;
    in.kms = false;
    in.kms_key = "k";
    assert_int_equal(s3__headers(&in, h), 4);
    buf_fini(&auth);
    buf_fini(&canon);
}

static void test_s3_check(void **state)
{
    (void)state;
    struct egress_s3_options o;
    memset(&o, 0, sizeof(o));
    struct buf e;
    buf_init(&e, 0);
    assert_int_equal(egress_s3_check(&o, "s3", &e), AGENT_E_INVAL);
    assert_non_null(strstr(buf_cstr(&e), "Egress:S3Storage:s3:BucketName: required"));
    buf_reset(&e);
    assert_int_equal(set(&o, "BucketName", "b", &e), 0);
    assert_int_equal(egress_s3_check(&o, "s3", &e), 0); /* credentials from the environment */
    assert_int_equal(set(&o, "AccessKeyId", "id", &e), 0);
    assert_int_equal(egress_s3_check(&o, "s3", &e), AGENT_E_INVAL);
    assert_non_null(strstr(buf_cstr(&e), "Egress:S3Storage:s3:SecretAccessKey: required"));
    buf_reset(&e);
    assert_int_equal(set(&o, "SecretAccessKey", "s", &e), 0);
    assert_int_equal(set(&o, "Endpoint", "ftp://x", &e), 0);
    assert_int_equal(set(&o, "CertificateAuthorityPath", "/nonexistent.pem", &e), 0);
    assert_int_equal(egress_s3_check(&o, "s3", &e), AGENT_E_INVAL);
    assert_non_null(strstr(buf_cstr(&e), "Egress:S3Storage:s3:Endpoint: not an http"));
    assert_non_null(
        strstr(buf_cstr(&e), "Egress:S3Storage:s3:CertificateAuthorityPath: not readable"));
    egress_s3_options_fini(&o);
    buf_fini(&e);
}

static void test_s3_endpoint(void **state)
{
    (void)state;
    struct url_origin ep;
    const char *why = NULL;
    assert_int_equal(s3__endpoint_parse("https://s3.eu-west-1.amazonaws.com", &ep, &why), 0);
    assert_true(ep.https);
    assert_false(ep.ip);
    assert_int_equal(ep.port, 443);
    assert_string_equal(ep.host, "s3.eu-west-1.amazonaws.com");
    assert_int_equal(s3__endpoint_parse("http://127.0.0.1:9000/", &ep, &why), 0);
    assert_true(ep.ip);
    assert_int_equal(ep.port, 9000);
    assert_int_equal(s3__endpoint_parse("http://[::1]:9000", &ep, &why), 0);
    assert_string_equal(ep.host, "::1");
    assert_true(ep.ip);
    static const char *const bad[] = {"s3.amazonaws.com", "https://",       "https://h:0",
                                      "https://h:65536",  "https://h/path", "https://u@h",
                                      "https://h?x",      "http://[::1",    "http://[nothost]:1",
                                      "http://h:1x",      "http://h ost"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(s3__endpoint_parse(bad[i], &ep, &why), AGENT_E_INVAL);
        assert_non_null(why);
    }
}

static void test_s3_where(void **state)
{
    (void)state;
    struct url_origin ep;
    const char *why;
    struct s3_where w;
    struct buf path;
    buf_init(&path, 0);
    assert_int_equal(s3__endpoint_parse("https://s3.us-east-1.amazonaws.com", &ep, &why), 0);
    assert_int_equal(s3__where(&ep, "dumps", false, "a/b c.bin", &w, &path), 0);
    assert_string_equal(w.host, "dumps.s3.us-east-1.amazonaws.com"); /* virtual-hosted */
    assert_string_equal(w.host_header, "dumps.s3.us-east-1.amazonaws.com");
    assert_string_equal(buf_cstr(&path), "/a/b c.bin");
    buf_reset(&path);
    /* Dots would break the wildcard certificate: path style. So would capitals. */
    assert_int_equal(s3__where(&ep, "my.dumps", false, "k", &w, &path), 0);
    assert_string_equal(w.host, "s3.us-east-1.amazonaws.com");
    assert_string_equal(buf_cstr(&path), "/my.dumps/k");
    buf_reset(&path);
    assert_int_equal(s3__where(&ep, "dumps", true, "k", &w, &path), 0);
    assert_string_equal(buf_cstr(&path), "/dumps/k");
    buf_reset(&path);
    assert_int_equal(s3__endpoint_parse("http://[::1]:9000", &ep, &why), 0);
    assert_int_equal(s3__where(&ep, "dumps", false, "k", &w, &path), 0);
    assert_string_equal(w.host, "::1");
    assert_string_equal(w.host_header, "[::1]:9000");
    assert_string_equal(buf_cstr(&path), "/dumps/k");
    buf_fini(&path);
}

static void test_s3_rules(void **state)
{
    (void)state;
    uint64_t s = 0;
    assert_int_equal(s3__timespan_s("00:01:00", &s), 0);
    assert_int_equal(s, 60);
    assert_int_equal(s3__timespan_s("2.03:04:05.5", &s), 0);
    assert_int_equal(s, 2 * 86400 + 3 * 3600 + 4 * 60 + 5);
    assert_int_equal(s3__timespan_s("24:00:00", &s), AGENT_E_INVAL);
    assert_int_equal(s3__timespan_s("00:60:00", &s), AGENT_E_INVAL);
    assert_int_equal(s3__timespan_s(" 60", &s), AGENT_E_INVAL);
    assert_int_equal(s3__timespan_s("", &s), AGENT_E_INVAL);
    assert_int_equal(s3__backoff_ms(1), 250);
    assert_int_equal(s3__backoff_ms(2), 500);
    assert_int_equal(s3__backoff_ms(4), 2000);
    assert_int_equal(s3__backoff_ms(40), 8000);
    assert_int_equal(s3__part_size(S3_MIN_PART, 1), S3_MIN_PART);
    assert_int_equal(s3__part_size(S3_MIN_PART, 1000), S3_MIN_PART);
    assert_int_equal(s3__part_size(S3_MIN_PART, 1001), 2 * S3_MIN_PART);
    assert_int_equal(s3__part_size(S3_MAX_PART, 9999), S3_MAX_PART);
    /* 10000 parts of the default size hold far more than any dump. */
    uint64_t total = 0;
    for (uint32_t n = 1; n <= S3_MAX_PARTS; n++) {
        total += s3__part_size(S3_DEFAULT_PART, n);
    }
    assert_true(total > (1ull << 40));
    assert_true(s3__retryable(0, 500));
    assert_true(s3__retryable(0, 503));
    assert_true(s3__retryable(0, 429));
    assert_false(s3__retryable(0, 403));
    assert_false(s3__retryable(0, 404));
    assert_true(s3__retryable(UV_ECONNRESET, 0));
    assert_true(s3__retryable(AGENT_E_TIMEOUT, 0));
    assert_true(s3__retryable(AGENT_E_CLOSED, 0));
    assert_false(s3__retryable(AGENT_E_UNTRUSTED, 0));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s3_settings), cmocka_unit_test(test_s3_check),
        cmocka_unit_test(test_s3_endpoint), cmocka_unit_test(test_s3_where),
        cmocka_unit_test(test_s3_rules),    cmocka_unit_test(test_s3_documented),
        cmocka_unit_test(test_s3_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
