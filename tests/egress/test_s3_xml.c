/* SPDX-License-Identifier: MIT */
/*
 * egress/s3_xml: the answers of S3's API reference examples (CreateMultipartUpload,
 * CompleteMultipartUpload, an <Error>), what s3rver sends, and documents that are malformed in
 * every way the scanner checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "buf.h"
#include "err.h"
#include "s3_xml.h"

static const char initiate[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<InitiateMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
    "  <Bucket>example-bucket</Bucket>\n  <Key>example-object</Key>\n"
    "  <UploadId>VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA</UploadId>\n"
    "</InitiateMultipartUploadResult>";

static void test_s3_xml_upload_id(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(s3_xml_upload_id(initiate, strlen(initiate), &b), 0);
    assert_string_equal(buf_cstr(&b), "VXBsb2FkIElEIGZvciA2aWWpbmcncyBteS1tb3ZpZS5tMnRzIHVwbG9hZA");
    buf_reset(&b);
    /* s3rver's shape: no whitespace, a BOM-less declaration; a prefixed name matches too. */
    static const char s3rver[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                                 "<s3:InitiateMultipartUploadResult xmlns:s3=\"x\"><s3:Bucket>b"
                                 "</s3:Bucket><s3:UploadId>a&amp;b&#x41;&#66;</s3:UploadId>"
                                 "</s3:InitiateMultipartUploadResult>";
    assert_int_equal(s3_xml_upload_id(s3rver, strlen(s3rver), &b), 0);
    assert_string_equal(buf_cstr(&b), "a&bAB");
    buf_reset(&b);
    static const char empty_id[] = "<InitiateMultipartUploadResult><UploadId></UploadId>"
                                   "</InitiateMultipartUploadResult>";
    assert_int_equal(s3_xml_upload_id(empty_id, strlen(empty_id), &b), AGENT_E_PROTO);
    static const char none[] = "<InitiateMultipartUploadResult><Key>k</Key>"
                               "</InitiateMultipartUploadResult>";
    assert_int_equal(s3_xml_upload_id(none, strlen(none), &b), AGENT_E_NOTFOUND);
    assert_int_equal(buf_size(&b), 0);
    buf_fini(&b);
}

static void test_s3_xml_error(void **state)
{
    (void)state;
    static const char err[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error>\n"
                              "  <Code>NoSuchKey</Code>\n"
                              "  <Message>The resource you requested does not exist</Message>\n"
                              "  <Resource>/mybucket/myfoto.jpg</Resource>\n"
                              "  <RequestId>4442587FB7D0A2F9</RequestId>\n</Error>";
    struct buf code, msg;
    buf_init(&code, 0);
    buf_init(&msg, 0);
    assert_int_equal(s3_xml_error(err, strlen(err), &code, &msg), 0);
    assert_string_equal(buf_cstr(&code), "NoSuchKey");
    assert_string_equal(buf_cstr(&msg), "The resource you requested does not exist");
    buf_reset(&code);
    buf_reset(&msg);
    assert_int_equal(s3_xml_error(initiate, strlen(initiate), &code, &msg), AGENT_E_NOTFOUND);
    static const char cdata[] = "<Error><Code>X</Code><Message><![CDATA[a <b> & c]]></Message>"
                                "<!-- comment --></Error>";
    assert_int_equal(s3_xml_error(cdata, strlen(cdata), &code, &msg), 0);
    assert_string_equal(buf_cstr(&msg), "a <b> & c");
    buf_fini(&code);
    buf_fini(&msg);
}

static void test_s3_xml_complete(void **state)
{
    (void)state;
    static const char ok[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<CompleteMultipartUploadResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
        "<Location>http://Example-Bucket.s3.region.amazonaws.com/Example-Object</Location>\n"
        "<Bucket>Example-Bucket</Bucket>\n<Key>Example-Object</Key>\n"
        "<ETag>\"3858f62230ac3c915f300c664312c11f-9\"</ETag>\n"
        "</CompleteMultipartUploadResult>";
    static const char err200[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\n<Error>\n"
                                 "<Code>InternalError</Code>\n"
                                 "<Message>We encountered an internal error. Please try again."
                                 "</Message>\n<RequestId>656c76696e6727732072657175657374</Req"
                                 "uestId>\n</Error>";
    struct buf etag, code, msg;
    buf_init(&etag, 0);
    buf_init(&code, 0);
    buf_init(&msg, 0);
    assert_int_equal(s3_xml_complete_result(ok, strlen(ok), &etag, &code, &msg), 0);
    assert_string_equal(buf_cstr(&etag), "\"3858f62230ac3c915f300c664312c11f-9\"");
    assert_int_equal(s3_xml_complete_result(err200, strlen(err200), &etag, &code, &msg),
                     AGENT_E_RUNTIME);
    assert_string_equal(buf_cstr(&code), "InternalError");
    assert_string_equal(buf_cstr(&msg), "We encountered an internal error. Please try again.");
    /* Cut short: the status line said 200, the body never finished. */
    assert_int_equal(s3_xml_complete_result(ok, strlen(ok) - 5, &etag, &code, &msg), AGENT_E_PROTO);
    assert_int_equal(s3_xml_complete_result(initiate, strlen(initiate), &etag, &code, &msg),
                     AGENT_E_PROTO);
    buf_fini(&etag);
    buf_fini(&code);
    buf_fini(&msg);
}

static void test_s3_xml_malformed(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "",
        "   ",
        "<Error>",                                               /* unclosed */
        "<Error><Code>x</Error></Code>",                         /* crossed */
        "<Error></Error><Error></Error>",                        /* two roots */
        "text<Error></Error>",                                   /* text outside the root */
        "<Error></Error>trailing",                               /* and after it */
        "<Error>&unknown;</Error>",                              /* undefined entity */
        "<Error>a & b</Error>",                                  /* bare ampersand */
        "<Error>&#0;</Error>",                                   /* NUL by reference */
        "<Error>&#xD800;</Error>",                               /* a surrogate */
        "<Error>&#x110000;</Error>",                             /* past Unicode */
        "<Error a=b></Error>",                                   /* unquoted attribute */
        "<Error a=\"b></Error>",                                 /* unterminated attribute */
        "<Error a=\"<\"></Error>",                               /* '<' in an attribute */
        "<Errora=\"b\"></Errora>x",                              /* junk after the root */
        "<!DOCTYPE x [<!ENTITY e \"boom\">]><Error>&e;</Error>", /* DTDs are refused */
        "<Error><!-- never closed </Error>",
        "<Error><![CDATA[ never closed </Error>",
        "<Error><?pi never closed </Error>",
        "<1Error></1Error>", /* bad name */
        "<Error/ >",
        "</Error>",
        "<Error></ Error>",
    };
    struct buf code, msg;
    buf_init(&code, 0);
    buf_init(&msg, 0);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = s3_xml_error(bad[i], strlen(bad[i]), &code, &msg);
        if (rc != AGENT_E_PROTO) {
            print_error("case %zu (%s): %d\n", i, bad[i], rc);
        }
        assert_int_equal(rc, AGENT_E_PROTO);
        assert_int_equal(buf_size(&code), 0);
    }
    /* Deeper than 32 levels. */
    struct buf deep;
    buf_init(&deep, 0);
    for (int i = 0; i < 40; i++) {
        buf_append_str(&deep, "<a>");
    }
    for (int i = 0; i < 40; i++) {
        buf_append_str(&deep, "</a>");
    }
    assert_int_equal(s3_xml_error((const char *)buf_data(&deep), buf_size(&deep), &code, &msg),
                     AGENT_E_PROTO);
    buf_fini(&deep);
    /* Every truncation of a good document is an error, never a half-read success. */
    for (size_t n = 0; n + 1 < sizeof(initiate) - 1; n++) {
        struct buf id;
        buf_init(&id, 0);
        int rc = s3_xml_upload_id(initiate, n, &id);
        assert_true(rc == AGENT_E_PROTO);
        buf_fini(&id);
    }
    /* Self-closing root, attributes with entities, single quotes, a BOM: fine. */
    static const char okdoc[] = "\xEF\xBB\xBF<Error a='x&amp;y' b=\"1\"/>";
    assert_int_equal(s3_xml_error(okdoc, strlen(okdoc), &code, &msg), 0);
    buf_fini(&code);
    buf_fini(&msg);
}

static void test_s3_xml_complete_body(void **state)
{
    (void)state;
    struct s3_part parts[2] = {{1, "\"a54357aff0632cce46d942af68356b38\""},
                               {2, "\"0c78aef83f66abc1fa1e8477f296d394\""}};
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(s3_xml_complete_body(parts, 2, &b), 0);
    assert_string_equal(
        buf_cstr(&b), "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                      "<Part><PartNumber>1</PartNumber>"
                      "<ETag>\"a54357aff0632cce46d942af68356b38\"</ETag></Part>"
                      "<Part><PartNumber>2</PartNumber>"
                      "<ETag>\"0c78aef83f66abc1fa1e8477f296d394\"</ETag></Part>"
                      "</CompleteMultipartUpload>");
    /* Our own body reads back with our own scanner. */
    static const char *const path[] = {"CompleteMultipartUpload", "Part", "ETag"};
    struct buf e;
    buf_init(&e, 0);
    assert_int_equal(s3_xml_find((const char *)buf_data(&b), buf_size(&b), path, 3, &e), 0);
    assert_string_equal(buf_cstr(&e), "\"a54357aff0632cce46d942af68356b38\"");
    buf_reset(&b);
    assert_int_equal(s3_xml_escape(&b, "a<b>&c\""), 0);
    assert_string_equal(buf_cstr(&b), "a&lt;b&gt;&amp;c\"");
    assert_true(s3_etag_valid("\"abc\"", 5));
    assert_false(s3_etag_valid("", 0));
    assert_false(s3_etag_valid("a\r\nb", 4));
    assert_false(s3_etag_valid("<x>", 3));
    buf_fini(&e);
    buf_fini(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_s3_xml_upload_id),     cmocka_unit_test(test_s3_xml_error),
        cmocka_unit_test(test_s3_xml_complete),      cmocka_unit_test(test_s3_xml_malformed),
        cmocka_unit_test(test_s3_xml_complete_body),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
