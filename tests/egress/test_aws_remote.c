/* SPDX-License-Identifier: MIT */
/*
 * egress/aws_remote: the pure halves of STS AssumeRoleWithWebIdentity and the container
 * credentials endpoint: URLs and which hosts plain http may reach, the STS endpoint and form
 * body, the documented answers (and malformed ones), Expiration times and when to fetch again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "aws_remote.h"
#include "err.h"

static void test_urls(void **state)
{
    (void)state;
    struct aws_url u;
    const char *why = NULL;
    assert_int_equal(aws__url_parse("http://169.254.170.2/v2/credentials/abc?x=1", &u, &why), 0);
    assert_string_equal(u.ep.host, "169.254.170.2");
    assert_int_equal(u.ep.port, 80);
    assert_string_equal(u.target, "/v2/credentials/abc?x=1");
    assert_true(aws__container_host_ok(&u));
    assert_int_equal(aws__url_parse("http://169.254.170.23:80/v1/credentials", &u, &why), 0);
    assert_true(aws__container_host_ok(&u));
    assert_int_equal(aws__url_parse("http://[fd00:ec2::23]/v1/credentials", &u, &why), 0);
    assert_true(aws__container_host_ok(&u));
    assert_int_equal(aws__url_parse("http://127.0.0.5:8080", &u, &why), 0);
    assert_string_equal(u.target, "/");
    assert_true(aws__container_host_ok(&u));
    assert_int_equal(aws__url_parse("http://localhost:9/c", &u, &why), 0);
    assert_true(aws__container_host_ok(&u));
    assert_int_equal(aws__url_parse("http://[::1]:9/c", &u, &why), 0);
    assert_true(aws__container_host_ok(&u));
    /* Plain http elsewhere: refused; https anywhere: fine. */
    static const char *const far[] = {"http://10.0.0.1/c", "http://169.254.169.254/latest",
                                      "http://example.com/c", "http://169.254.170.3/c",
                                      "http://[fd00:ec2::24]/c"};
    for (size_t i = 0; i < sizeof(far) / sizeof(far[0]); i++) {
        assert_int_equal(aws__url_parse(far[i], &u, &why), 0);
        assert_false(aws__container_host_ok(&u));
    }
    assert_int_equal(aws__url_parse("https://creds.example.com/c", &u, &why), 0);
    assert_true(aws__container_host_ok(&u));
    static const char *const bad[] = {"169.254.170.2/c", "ftp://h/c",    "http://u@h/c",
                                      "http://h/c#frag", "http://h/a b", "http://:80/"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why = NULL;
        assert_int_equal(aws__url_parse(bad[i], &u, &why), AGENT_E_INVAL);
        assert_non_null(why);
    }
}

static void test_sts_request(void **state)
{
    (void)state;
    struct buf b;
    buf_init(&b, 0);
    assert_int_equal(aws__sts_endpoint(NULL, "eu-west-1", NULL, &b), 0);
    assert_string_equal(buf_cstr(&b), "https://sts.eu-west-1.amazonaws.com");
    buf_reset(&b);
    assert_int_equal(aws__sts_endpoint(NULL, "eu-west-1", "Legacy", &b), 0);
    assert_string_equal(buf_cstr(&b), "https://sts.amazonaws.com");
    buf_reset(&b);
    assert_int_equal(aws__sts_endpoint(NULL, NULL, "regional", &b), 0);
    assert_string_equal(buf_cstr(&b), "https://sts.amazonaws.com");
    buf_reset(&b);
    assert_int_equal(aws__sts_endpoint("http://127.0.0.1:4566", "eu-west-1", NULL, &b), 0);
    assert_string_equal(buf_cstr(&b), "http://127.0.0.1:4566");
    buf_reset(&b);
    assert_int_equal(
        aws__sts_body("arn:aws:iam::111122223333:role/my role", "s/1", "eyJ.a+b/c=.sig", &b), 0);
    assert_string_equal(buf_cstr(&b),
                        "Action=AssumeRoleWithWebIdentity"
                        "&RoleArn=arn%3Aaws%3Aiam%3A%3A111122223333%3Arole%2Fmy%20role"
                        "&RoleSessionName=s%2F1&Version=2011-06-15"
                        "&WebIdentityToken=eyJ.a%2Bb%2Fc%3D.sig");
    buf_fini(&b);
}

static void test_sts_answer(void **state)
{
    (void)state;
    static const char ok[] =
        "<AssumeRoleWithWebIdentityResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\">\n"
        "  <AssumeRoleWithWebIdentityResult>\n"
        "    "
        "<SubjectFromWebIdentityToken>system:serviceaccount:ns:sa</SubjectFromWebIdentityToken>\n"
        "    <Credentials>\n"
        "      <SessionToken>FQoGZXIvYXdzE&amp;x</SessionToken>\n"
        "      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG</SecretAccessKey>\n"
        "      <Expiration>2026-11-29T16:00:00Z</Expiration>\n"
        "      <AccessKeyId>ASIAEXAMPLE</AccessKeyId>\n"
        "    </Credentials>\n"
        "  </AssumeRoleWithWebIdentityResult>\n"
        "</AssumeRoleWithWebIdentityResponse>\n";
    struct aws_profile k;
    memset(&k, 0, sizeof(k));
    time_t exp = 0, want = 0;
    char why[256] = "";
    assert_int_equal(aws__sts_parse(ok, strlen(ok), &k, &exp, why, sizeof(why)), 0);
    assert_string_equal(k.access_key_id, "ASIAEXAMPLE");
    assert_string_equal(k.secret_access_key, "wJalrXUtnFEMI/K7MDENG");
    assert_string_equal(k.session_token, "FQoGZXIvYXdzE&x");
    assert_int_equal(aws__iso8601("2026-11-29T16:00:00Z", &want), 0);
    assert_int_equal(exp, want);
    aws_profile_fini(&k);
    static const char err[] = "<ErrorResponse><Error><Type>Sender</Type>"
                              "<Code>AccessDenied</Code><Message>Not authorized</Message></Error>"
                              "</ErrorResponse>";
    assert_int_equal(aws__sts_parse(err, strlen(err), &k, &exp, why, sizeof(why)), AGENT_E_RUNTIME);
    assert_string_equal(why, "STS AccessDenied: Not authorized");
    static const char *const bad[] = {
        "<AssumeRoleWithWebIdentityResponse><Unclosed>",
        "<!DOCTYPE x [<!ENTITY e \"boom\">]><x>&e;</x>",
        "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
        "<AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
        "<SessionToken>T</SessionToken></Credentials></AssumeRoleWithWebIdentityResult>"
        "</AssumeRoleWithWebIdentityResponse>", /* no Expiration */
        "<AssumeRoleWithWebIdentityResponse><AssumeRoleWithWebIdentityResult><Credentials>"
        "<AccessKeyId>A</AccessKeyId><SecretAccessKey>S</SecretAccessKey>"
        "<SessionToken>T</SessionToken><Expiration>tomorrow</Expiration></Credentials>"
        "</AssumeRoleWithWebIdentityResult></AssumeRoleWithWebIdentityResponse>",
        "",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(aws__sts_parse(bad[i], strlen(bad[i]), &k, &exp, why, sizeof(why)),
                         AGENT_E_PROTO);
        assert_true(why[0] != '\0');
        assert_null(strstr(why, "S</"));
        aws_profile_fini(&k);
    }
}

static void test_container_answer(void **state)
{
    (void)state;
    static const char ok[] =
        "{\"AccessKeyId\":\"ASIAC\",\"SecretAccessKey\":\"sec\",\"Token\":\"tok\","
        "\"Expiration\":\"2026-11-29T16:00:00.123Z\",\"RoleArn\":\"arn\"}";
    struct aws_profile k;
    memset(&k, 0, sizeof(k));
    time_t exp = 0, want = 0;
    char why[256] = "";
    assert_int_equal(aws__container_parse(ok, strlen(ok), &k, &exp, why, sizeof(why)), 0);
    assert_string_equal(k.access_key_id, "ASIAC");
    assert_string_equal(k.secret_access_key, "sec");
    assert_string_equal(k.session_token, "tok");
    assert_int_equal(aws__iso8601("2026-11-29T16:00:00Z", &want), 0);
    assert_int_equal(exp, want);
    aws_profile_fini(&k);
    static const char notoken[] = "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\"}";
    assert_int_equal(aws__container_parse(notoken, strlen(notoken), &k, &exp, why, sizeof(why)), 0);
    assert_null(k.session_token);
    assert_int_equal(exp, 0);
    aws_profile_fini(&k);
    static const char *const bad[] = {"[1, 2", "[]", "{\"AccessKeyId\":\"A\"}",
                                      "{\"AccessKeyId\":1,\"SecretAccessKey\":\"S\"}",
                                      "{\"AccessKeyId\":\"A\",\"SecretAccessKey\":\"S\","
                                      "\"Expiration\":\"soon\"}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(aws__container_parse(bad[i], strlen(bad[i]), &k, &exp, why, sizeof(why)),
                         AGENT_E_PROTO);
        assert_true(why[0] != '\0');
        aws_profile_fini(&k);
    }
}

static void test_times(void **state)
{
    (void)state;
    time_t t = 0;
    assert_int_equal(aws__iso8601("1970-01-01T00:00:00Z", &t), 0);
    assert_int_equal(t, 0);
    assert_int_equal(aws__iso8601("2000-03-01T00:00:00Z", &t), 0);
    assert_int_equal(t, 951868800);
    assert_int_equal(aws__iso8601("2026-11-29T16:00:00+00:00", &t), 0);
    assert_int_equal(t, 1795968000);
    static const char *const bad[] = {"2026-11-29 16:00:00Z",
                                      "2026-13-01T00:00:00Z",
                                      "2026-11-29T16:00:00",
                                      "2026-11-29T16:00:00+01:00",
                                      "2026-11-29T16:00:00.Z",
                                      "26-11-29T16:00:00Z",
                                      ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(aws__iso8601(bad[i], &t), AGENT_E_INVAL);
    }
    /* An hour's credentials: fresh until 5 minutes before they expire. */
    assert_false(aws__creds_stale(1000, 1000 + 3600, 1000 + 3600 - 301));
    assert_true(aws__creds_stale(1000, 1000 + 3600, 1000 + 3600 - 300));
    assert_true(aws__creds_stale(1000, 1000 + 3600, 1000 + 7200));
    /* Two seconds' credentials: halfway. Keys that do not expire never go stale. */
    assert_false(aws__creds_stale(1000, 1002, 1000));
    assert_true(aws__creds_stale(1000, 1002, 1001));
    assert_false(aws__creds_stale(1000, 0, 1 << 30));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls),       cmocka_unit_test(test_sts_request),
        cmocka_unit_test(test_sts_answer), cmocka_unit_test(test_container_answer),
        cmocka_unit_test(test_times),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
