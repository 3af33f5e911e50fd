/* SPDX-License-Identifier: MIT */
/* The http(s) URL parser (common/url.h): scheme, host, port, and where the rest begins. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "url.h"

static void test_good(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        bool https, ip;
        const char *host;
        unsigned port;
        const char *rest;
    } good[] = {
        {"https://s3.eu-west-1.amazonaws.com", true, false, "s3.eu-west-1.amazonaws.com", 443, ""},
        {"http://127.0.0.1:9000/", false, true, "127.0.0.1", 9000, "/"},
        {"http://[::1]:4318/v1/traces?k=v#f", false, true, "::1", 4318, "/v1/traces?k=v#f"},
        {"HTTPS://[fd00:ec2::23]", true, true, "fd00:ec2::23", 443, ""},
        {"Http://my_host-1.local?x", false, false, "my_host-1.local", 80, "?x"},
        {"http://h:65535#frag", false, false, "h", 65535, "#frag"},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        struct url_origin o;
        const char *rest = NULL;
        const char *why = NULL;
        assert_int_equal(url_origin_parse(good[i].url, &o, &rest, &why), 0);
        assert_int_equal(o.https, good[i].https);
        assert_int_equal(o.ip, good[i].ip);
        assert_string_equal(o.host, good[i].host);
        assert_int_equal(o.port, good[i].port);
        assert_string_equal(rest, good[i].rest);
        assert_null(why);
    }
}

static void test_bad(void **state)
{
    (void)state;
    static const struct {
        const char *url, *why;
    } bad[] = {
        {"s3.amazonaws.com", "http://"}, {"ftp://h", "http://"},
        {"https://", "no host"},         {"http://:80", "no host"},
        {"https://h:0", "port"},         {"https://h:65536", "port"},
        {"http://h:1x", "port"},         {"http://h:", "port"},
        {"https://u:secret@h/", "user"}, {"http://[::1", "unclosed"},
        {"http://[::1]x", "junk"},       {"http://[nothost]:1", "IPv6"},
        {"http://h ost", "letters"},     {"http://h%41", "letters"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct url_origin o;
        const char *rest = NULL;
        const char *why = NULL;
        assert_int_equal(url_origin_parse(bad[i].url, &o, &rest, &why), AGENT_E_INVAL);
        assert_non_null(why);
        if (strstr(why, bad[i].why) == NULL || strstr(why, "secret") != NULL) {
            fail_msg("%s: \"%s\" does not say %s", bad[i].url, why, bad[i].why);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good),
        cmocka_unit_test(test_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
