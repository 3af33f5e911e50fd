/* SPDX-License-Identifier: MIT */
/*
 * egress/aws_profile: one profile of AWS's shared credentials and config files, in the forms the
 * AWS SDKs and CLI accept (comments, blanks, "[profile x]" in the config file, sub-properties,
 * repeated sections), and hostile input (huge lines, NUL bytes, no section, junk).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "aws_profile.h"
#include "err.h"

static int parse(const char *text, const char *name, bool config, struct aws_profile *p, char *why)
{
    return aws_profile_parse(text, strlen(text), name, config, p, why, 128);
}

static void test_credentials_file(void **state)
{
    (void)state;
    static const char text[] = "# AWS credentials\r\n"
                               "[default]\r\n"
                               "aws_access_key_id = AKIDDEFAULT\r\n"
                               "aws_secret_access_key = default-secret\r\n"
                               "\n"
                               "  ; a comment, indented\n"
                               "[ monitor ]   # trailing comment\n"
                               "AWS_Access_Key_Id=AKIDMONITOR\n"
                               "aws_secret_access_key\t=  mon/secret+with=equals  \n"
                               "aws_session_token = tok#not-a-comment\n"
                               "s3 =\n"
                               "    addressing_style = path\n"
                               "[Monitor]\n"
                               "aws_access_key_id = OTHER-CASE\n";
    struct aws_profile p;
    char why[128] = "";
    memset(&p, 0, sizeof(p));
    assert_int_equal(parse(text, "monitor", false, &p, why), 0);
    assert_true(p.found);
    assert_string_equal(p.access_key_id, "AKIDMONITOR"); /* names are exact: [Monitor] is other */
    assert_string_equal(p.secret_access_key, "mon/secret+with=equals");
    assert_string_equal(p.session_token, "tok#not-a-comment");
    assert_null(p.region);
    assert_string_equal(p.unsupported, "");
    aws_profile_fini(&p);
    assert_int_equal(parse(text, "default", false, &p, why), 0);
    assert_string_equal(p.access_key_id, "AKIDDEFAULT");
    assert_string_equal(p.secret_access_key, "default-secret");
    assert_null(p.session_token);
    aws_profile_fini(&p);
    assert_int_equal(parse(text, "absent", false, &p, why), 0);
    assert_false(p.found);
    assert_null(p.access_key_id);
    aws_profile_fini(&p);
    /* In the credentials file "[profile monitor]" is a profile named "profile monitor". */
    assert_int_equal(parse("[profile monitor]\naws_access_key_id = X\n", "monitor", false, &p, why),
                     0);
    assert_false(p.found);
    aws_profile_fini(&p);
    aws_profile_fini(&p); /* twice is fine */
}

static void test_config_file(void **state)
{
    (void)state;
    static const char text[] = "[default]\n"
                               "region = eu-west-1\n"
                               "[profile monitor]\n"
                               "region = eu-central-1\n"
                               "[monitor]\n" /* not a profile in the config file */
                               "region = us-west-2\n"
                               "[sso-session corp]\n"
                               "sso_start_url = https://example.awsapps.com/start\n"
                               "[profile   monitor  ]\n"
                               "output = json\n"
                               "[profile tool]\n"
                               "credential_process = /usr/bin/get-creds --json\n"
                               "[profile irsa]\n"
                               "role_arn = arn:aws:iam::111122223333:role/r\n"
                               "web_identity_token_file = /var/run/token\n";
    struct aws_profile p;
    char why[128] = "";
    memset(&p, 0, sizeof(p));
    assert_int_equal(parse(text, "monitor", true, &p, why), 0);
    assert_true(p.found);
    assert_string_equal(p.region, "eu-central-1");
    assert_string_equal(p.unsupported, "");
    aws_profile_fini(&p);
    assert_int_equal(parse(text, "default", true, &p, why), 0);
    assert_string_equal(p.region, "eu-west-1");
    aws_profile_fini(&p);
    assert_int_equal(parse(text, "tool", true, &p, why), 0);
    assert_string_equal(p.unsupported, "credential_process");
    assert_null(p.access_key_id);
    aws_profile_fini(&p);
    assert_int_equal(parse(text, "irsa", true, &p, why), 0);
    assert_string_equal(p.unsupported, "role_arn");
    aws_profile_fini(&p);
    /* A later file overrides an earlier one: config first, then credentials. */
    assert_int_equal(parse(text, "monitor", true, &p, why), 0);
    assert_int_equal(
        parse("[monitor]\nregion = ap-south-1\naws_access_key_id = A\n", "monitor", false, &p, why),
        0);
    assert_string_equal(p.region, "ap-south-1");
    assert_string_equal(p.access_key_id, "A");
    aws_profile_fini(&p);
}

static void test_malformed(void **state)
{
    (void)state;
    struct aws_profile p;
    char why[128];
    memset(&p, 0, sizeof(p));
    static const char *const bad[] = {
        "aws_access_key_id = X\n",                 /* before any section */
        "[default]\njust words\n",                 /* neither section nor key = value */
        "[default\naws_access_key_id = X\n",       /* unclosed section */
        "[default] junk\n",                        /* junk after the section */
        "[default]\n= value\n",                    /* no key */
        "[a]\nx = 1\n[b]\nsecretless line here\n", /* junk in another section counts too */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        why[0] = '\0';
        assert_int_equal(parse(bad[i], "default", false, &p, why), AGENT_E_INVAL);
        assert_non_null(strstr(why, "line "));
        aws_profile_fini(&p);
    }
    /* A NUL byte inside the text (given by length). */
    static const char nul[] = "[default]\naws_access_key_id = A\0B\n";
    assert_int_equal(
        aws_profile_parse(nul, sizeof(nul) - 1, "default", false, &p, why, sizeof(why)),
        AGENT_E_INVAL);
    assert_non_null(strstr(why, "line 2"));
    aws_profile_fini(&p);
    /* The message never holds a value. */
    assert_int_equal(parse("[default]\naws_secret_access_key = s3cr3t\nnot-a-pair s3cr3t\n",
                           "default", false, &p, why),
                     AGENT_E_INVAL);
    assert_null(strstr(why, "s3cr3t"));
    aws_profile_fini(&p);
    /* Empty input and comments only: nothing found, no error. */
    assert_int_equal(parse("", "default", false, &p, why), 0);
    assert_false(p.found);
    assert_int_equal(parse("# only\n;comments\n\n", "default", false, &p, why), 0);
    assert_false(p.found);
    aws_profile_fini(&p);
}

static void test_huge(void **state)
{
    (void)state;
    /* A 1 MiB value on one line and a last line without newline: read whole, no overrun. */
    size_t big = AWS_PROFILE_MAX_FILE;
    char *text = malloc(big + 64);
    assert_non_null(text);
    int head = snprintf(text, 64, "[default]\naws_session_token = ");
    memset(text + head, 'x', big - (size_t)head);
    struct aws_profile p;
    char why[128];
    memset(&p, 0, sizeof(p));
    assert_int_equal(aws_profile_parse(text, big, "default", false, &p, why, sizeof(why)), 0);
    assert_non_null(p.session_token);
    assert_int_equal(strlen(p.session_token), big - (size_t)head);
    aws_profile_fini(&p);
    /* A huge section name, and thousands of sections. */
    memset(text, 'a', big);
    text[0] = '[';
    text[big - 1] = ']';
    assert_int_equal(aws_profile_parse(text, big, "default", false, &p, why, sizeof(why)), 0);
    assert_false(p.found);
    size_t n = 0;
    while (n + 32 < big) {
        n += (size_t)snprintf(text + n, 32, "[p%zu]\nregion = r\n", n);
    }
    assert_int_equal(aws_profile_parse(text, n, "p0", false, &p, why, sizeof(why)), 0);
    assert_true(p.found);
    assert_string_equal(p.region, "r");
    aws_profile_fini(&p);
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_credentials_file),
        cmocka_unit_test(test_config_file),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_huge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
