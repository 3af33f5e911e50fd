/* SPDX-License-Identifier: MIT */
/*
 * egress/egress.c without a loop: Egress:* configuration (good configurations, every problem with
 * its exact message, secrets never in a message) and egress_open's checks of a request.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/err.h"
#include "egress.h"
#include "egress_internal.h"

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* Parses entries, expecting failure with exactly `want` (NULL: success expected). */
static struct egress_set *parse(const struct egress_kv *e, size_t n, const char *want)
{
    struct buf err;
    buf_init(&err, 0);
    struct egress_set *s = (struct egress_set *)(uintptr_t)1; /* must stay untouched on failure */
    int rc = egress_set_parse(e, n, &s, &err);
    if (want == NULL) {
        if (rc != 0) {
            fprintf(stderr, "unexpected errors:\n%s", buf_cstr(&err));
        }
        assert_int_equal(rc, 0);
        assert_int_equal(buf_size(&err), 0);
    } else {
        assert_int_equal(rc, AGENT_E_INVAL);
        assert_string_equal(buf_cstr(&err), want);
        assert_true(s == (struct egress_set *)(uintptr_t)1);
        s = NULL;
    }
    buf_fini(&err);
    return s;
}

/* Parses entries expecting failure; the errors, for the caller to free. */
static char *parse_errors(const struct egress_kv *e, size_t n)
{
    struct buf err;
    buf_init(&err, 0);
    struct egress_set *s = NULL;
    assert_int_equal(egress_set_parse(e, n, &s, &err), AGENT_E_INVAL);
    assert_null(s);
    char *text = buf_steal(&err, NULL);
    assert_non_null(text);
    return text;
}

static void test_egress_parse_filesystem(void **state)
{
    (void)state;
    const struct egress_kv e[] = {
        {"Urls", "http://127.0.0.1:52323"},
        {"Egress", ""},            /* a section header */
        {"Egress:FileSystem", ""}, /* another */
        {"Egress:FileSystem:monitorFile:DirectoryPath", "/artifacts"},
        {"egress:filesystem:MONITORFILE:intermediatedirectorypath", "/intermediate"},
        {"Egress:FileSystem:monitorFile:FileMode", "0640"},
        {"Egress:FILESYSTEM:second:directoryPath", "/first"},
        {"Egress:FileSystem:Second:DirectoryPath", "/second"}, /* the later one wins */
        {"Egress:FileSystem:third:DirectoryPath", "/third"},
        {"Egress:FileSystem:third:FileMode", ""}, /* empty: not set */
        {"Egress:FileSystem:third:IntermediateDirectoryPath", ""},
        {"Egress:Properties:unused", "value"},
    };
    struct egress_set *s = parse(e, N(e), NULL);
    const struct egress_provider *p = egress_find(s, "MonitorFile");
    assert_non_null(p);
    assert_ptr_equal(egress_find(s, "monitorfile"), p);
    assert_int_equal(egress_provider_type(p), EGRESS_FILESYSTEM);
    assert_string_equal(egress_provider_name(p), "monitorFile"); /* as first written */
    assert_string_equal(p->u.fs.directory, "/artifacts");
    assert_string_equal(p->u.fs.intermediate, "/intermediate");
    assert_int_equal(p->u.fs.mode, 0640);
    p = egress_find(s, "second");
    assert_non_null(p);
    assert_string_equal(p->u.fs.directory, "/second");
    assert_null(p->u.fs.intermediate);
    assert_int_equal(p->u.fs.mode, 0); /* default */
    p = egress_find(s, "third");
    assert_non_null(p);
    assert_null(p->u.fs.intermediate);
    assert_int_equal(p->u.fs.mode, 0);
    assert_null(egress_find(s, "fourth"));
    assert_null(egress_find(s, NULL));
    egress_set_free(s);
}

static void test_egress_parse_empty(void **state)
{
    (void)state;
    const struct egress_kv e[] = {{"Metrics:Enabled", "true"}, {"EgressX:Foo:a:b", "c"}};
    struct egress_set *s = parse(e, N(e), NULL);
    assert_non_null(s);
    assert_null(egress_find(s, "a"));
    egress_set_free(s);
    s = parse(NULL, 0, NULL);
    assert_non_null(s);
    egress_set_free(s);
    egress_set_free(NULL);
    assert_null(egress_find(NULL, "a"));
}

/* The set keeps copies: the entries may be freed right after parsing. */
static void test_egress_parse_copies(void **state)
{
    (void)state;
    char *key = strdup("Egress:FileSystem:out:DirectoryPath");
    char *value = strdup("/data");
    assert_non_null(key);
    assert_non_null(value);
    struct egress_kv e[] = {{key, value}};
    struct egress_set *s = parse(e, N(e), NULL);
    memset(key, 'x', strlen(key));
    memset(value, 'x', strlen(value));
    free(key);
    free(value);
    const struct egress_provider *p = egress_find(s, "out");
    assert_non_null(p);
    assert_string_equal(p->u.fs.directory, "/data");
    egress_set_free(s);
}

static void test_egress_parse_fs_errors(void **state)
{
    (void)state;
    const struct egress_kv missing[] = {{"Egress:FileSystem:a:FileMode", "0600"}};
    parse(missing, N(missing), "Egress:FileSystem:a:DirectoryPath: required\n");
    const struct egress_kv empty[] = {{"Egress:FileSystem:a:DirectoryPath", ""}};
    parse(empty, N(empty), "Egress:FileSystem:a:DirectoryPath: required\n");
    const struct egress_kv unknown[] = {{"Egress:FileSystem:a:DirectoryPath", "/x"},
                                        {"Egress:FileSystem:a:Directory", "/y"},
                                        {"Egress:FileSystem:a:DirectoryPath:Sub", "/y"}};
    parse(unknown, N(unknown),
          "Egress:FileSystem:a:Directory: unknown FileSystem setting (DirectoryPath, "
          "IntermediateDirectoryPath, FileMode, CopyBufferSize)\n"
          "Egress:FileSystem:a:DirectoryPath:Sub: unknown FileSystem setting (DirectoryPath, "
          "IntermediateDirectoryPath, FileMode, CopyBufferSize)\n");
    static const struct {
        const char *mode;
        const char *why;
    } modes[] = {
        {"abc", "not an octal file mode of at most 0777, such as 0600"},
        {"0800", "not an octal file mode of at most 0777, such as 0600"},
        {"01777", "not an octal file mode of at most 0777, such as 0600"},
        {"-600", "not an octal file mode of at most 0777, such as 0600"},
        {" 0600", "not an octal file mode of at most 0777, such as 0600"},
        {"0000000600", "not an octal file mode of at most 0777, such as 0600"},
        {"0x180", "not an octal file mode of at most 0777, such as 0600"},
        {"0400", "the owner must be able to read and write (0600)"},
        {"0", "the owner must be able to read and write (0600)"},
        {"0666", "other users must not be able to write"},
    };
    for (size_t i = 0; i < N(modes); i++) {
        const struct egress_kv e[] = {{"Egress:FileSystem:a:DirectoryPath", "/x"},
                                      {"Egress:FileSystem:a:FileMode", modes[i].mode}};
        char want[256];
        snprintf(want, sizeof(want), "Egress:FileSystem:a:FileMode: %s\n", modes[i].why);
        parse(e, N(e), want);
    }
    const struct egress_kv good[] = {{"Egress:FileSystem:a:DirectoryPath", "/x"},
                                     {"Egress:FileSystem:a:FileMode", "660"}};
    struct egress_set *s = parse(good, N(good), NULL);
    assert_int_equal(egress_find(s, "a")->u.fs.mode, 0660);
    egress_set_free(s);
}

static void test_egress_parse_layout_errors(void **state)
{
    (void)state;
    const struct egress_kv e[] = {
        {"Egress", "x"},
        {"Egress:FileSystem", "x"},
        {"Egress:FileSystem:a", "/x"},
        {"Egress:FileSystem::DirectoryPath", "/x"},
        {"Egress:FileSystem:b:", "/x"},
        {"Egress:Properties", "x"},
        {"Egress:Properties:", "x"},
        {"Egress:Ftp:x:Host", "h"},
        {"Egress:FTP:y:Host", "h"}, /* the same type: said once */
        {"Egress:AzureBlobStorage:blob:accountUri", "https://a.blob.core.windows.net"},
        {"Egress:AzureBlobStorage:blob:containerName", "c"},
    };
    parse(e, N(e),
          "Egress:Properties: expected Egress:Properties:<key>\n"
          "Egress:Properties:: expected Egress:Properties:<key>\n"
          "Egress: expected Egress:<Type>:<name>:<Setting>\n"
          "Egress:FileSystem: expected Egress:<Type>:<name>:<Setting>\n"
          "Egress:FileSystem:a: expected Egress:<Type>:<name>:<Setting>\n"
          "Egress:FileSystem::DirectoryPath: expected Egress:<Type>:<name>:<Setting>\n"
          "Egress:FileSystem:b:: expected Egress:<Type>:<name>:<Setting>\n"
          "Egress:Ftp:x:Host: unknown egress provider type 'Ftp' (dotmon has FileSystem and "
          "S3Storage)\n"
          "Egress:AzureBlobStorage:blob:accountUri: egress to AzureBlobStorage is not "
          "implemented by dotmon (FileSystem and S3Storage are)\n");
}

static void test_egress_parse_name_clash(void **state)
{
    (void)state;
    const struct egress_kv e[] = {
        {"Egress:FileSystem:shared:DirectoryPath", "/x"},
        {"Egress:S3Storage:SHARED:BucketName", "b"},
        {"Egress:S3Storage:Shared:RegionName", "r"}, /* said once */
        {"Egress:FileSystem:other:DirectoryPath", "/y"},
    };
    parse(e, N(e),
          "Egress:S3Storage:SHARED:BucketName: the name is taken by a FileSystem provider; "
          "names are unique across types\n");
}

/*
 * *Name settings: resolved from Egress:Properties (case-insensitive, in any order), refused when
 * the property is missing or the secret is also set directly; no secret in any message. (The
 * S3 store's own lines are not compared: only that they never hold a secret.)
 */
static void test_egress_parse_name_refs(void **state)
{
    (void)state;
    const char *secrets[] = {"SECRET-direct-1", "SECRET-prop-2", "SECRET-token-3",
                             "SECRET-unused-4"};
    const struct egress_kv e[] = {
        {"Egress:S3Storage:a:SecretAccessKeyName", "KeyA"}, /* before the property */
        {"Egress:Properties:keya", "SECRET-prop-2"},
        {"Egress:S3Storage:a:SessionTokenName", "Missing"},
        {"Egress:S3Storage:b:SecretAccessKey", "SECRET-direct-1"},
        {"Egress:S3Storage:b:secretaccesskeyname", "KeyA"},
        {"Egress:S3Storage:c:SessionTokenName", "tok"},
        {"Egress:Properties:TOK", "SECRET-token-3"},
        {"Egress:Properties:other", "SECRET-unused-4"},
        {"Egress:S3Storage:d:SessionTokenName", ""}, /* empty: no reference */
    };
    char *errs = parse_errors(e, N(e));
    assert_non_null(strstr(errs, "Egress:S3Storage:a:SessionTokenName: no "
                                 "Egress:Properties:Missing\n"));
    assert_non_null(strstr(errs, "Egress:S3Storage:b:secretaccesskeyname: SecretAccessKey is "
                                 "set too; set one of the two\n"));
    assert_null(strstr(errs, "Egress:S3Storage:a:SecretAccessKeyName: no"));
    assert_null(strstr(errs, "Egress:S3Storage:c:SessionTokenName: no"));
    assert_null(strstr(errs, "Egress:S3Storage:d:SessionTokenName: no"));
    for (size_t i = 0; i < N(secrets); i++) {
        assert_null(strstr(errs, secrets[i]));
    }
    free(errs);
}

/* A secret given directly never shows in a message either, whatever goes wrong around it. */
static void test_egress_parse_secrets_hidden(void **state)
{
    (void)state;
    const struct egress_kv e[] = {
        {"Egress:S3Storage:s3:SecretAccessKey", "SECRET-A"},
        {"Egress:S3Storage:s3:SessionToken", "SECRET-B"},
        {"Egress:S3Storage:s3:Bogus", "SECRET-C"},
        {"Egress:Properties:p", "SECRET-D"},
        {"Egress:Unknown:s3:Key", "SECRET-E"},
        {"Egress:AzureBlobStorage:z:accountKey", "SECRET-F"},
    };
    char *errs = parse_errors(e, N(e));
    assert_null(strstr(errs, "SECRET-"));
    free(errs);
}

static void on_done_unused(void *ud, int status, const char *location, const char *msg)
{
    (void)ud;
    (void)status;
    (void)location;
    (void)msg;
    fail();
}

static void test_egress_open_checks(void **state)
{
    (void)state;
    const struct egress_kv e[] = {{"Egress:FileSystem:out:DirectoryPath", "/nonexistent/x"}};
    struct egress_set *s = parse(e, N(e), NULL);
    const struct egress_provider *p = egress_find(s, "out");
    uv_loop_t loop;
    assert_int_equal(uv_loop_init(&loop), 0);
    char long_name[300];
    memset(long_name, 'a', sizeof(long_name) - 1);
    long_name[sizeof(long_name) - 1] = '\0';
    const char *bad[] = {NULL, "", ".", "..", "a/b", "/abs", "dir/", long_name};
    struct egress_target *t = NULL;
    for (size_t i = 0; i < N(bad); i++) {
        struct egress_request rq = {.artifact_name = bad[i], .on_done = on_done_unused};
        assert_int_equal(egress_open(&loop, p, &rq, &t), AGENT_E_INVAL);
        assert_null(t);
    }
    struct egress_request rq = {.artifact_name = "ok.dmp", .on_done = NULL};
    assert_int_equal(egress_open(&loop, p, &rq, &t), AGENT_E_INVAL);
    rq.on_done = on_done_unused;
    assert_int_equal(egress_open(&loop, NULL, &rq, &t), AGENT_E_INVAL);
    assert_int_equal(egress_open(&loop, p, NULL, &t), AGENT_E_INVAL);
    assert_null(t);
    assert_int_equal(uv_run(&loop, UV_RUN_NOWAIT), 0); /* nothing was started */
    assert_int_equal(uv_loop_close(&loop), 0);
    egress_set_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_egress_parse_filesystem),
        cmocka_unit_test(test_egress_parse_empty),
        cmocka_unit_test(test_egress_parse_copies),
        cmocka_unit_test(test_egress_parse_fs_errors),
        cmocka_unit_test(test_egress_parse_layout_errors),
        cmocka_unit_test(test_egress_parse_name_clash),
        cmocka_unit_test(test_egress_parse_name_refs),
        cmocka_unit_test(test_egress_parse_secrets_hidden),
        cmocka_unit_test(test_egress_open_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
