/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: the body an OTLP/HTTP receiver answers an export with (docs/otlp.md §5),
 * decoded as each signal's Export*ServiceResponse in protobuf and in JSON. Checks what otlp.h
 * promises: 0 or AGENT_E_PROTO; on an error nothing reported (count 0, empty message); on success
 * a count that is not negative and a message that fits, is valid UTF-8 without control
 * characters (it goes to a log line), and is a prefix of the same message with more room.
 */
#include "fuzz.h"

#include <stdint.h>
#include <string.h>

#include "err.h"
#include "otlp.h"
#include "utf8.h"

static void check_message(const char *msg, size_t cap)
{
    size_t n = strlen(msg);
    CHECK(n < cap);
    const uint8_t *p = (const uint8_t *)msg;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l;
        CHECK(utf8_decode(p + i, n - i, &cp, &l));
        CHECK(cp >= 0x20 && cp != 0x7F);
        i += l;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a small message buffer sized from the input, and a roomy one */
    size_t small_cap = 1 + (size_t)(fuzz_fnv1a(data, size) % 24);
    for (int sig = OTLP_LOGS; sig <= OTLP_TRACES; sig++) {
        for (int f = OTLP_PROTOBUF; f <= OTLP_JSON; f++) {
            int64_t big_rej = -1, small_rej = -1;
            char big[256], small[24];
            memset(big, 'x', sizeof(big));
            int rc = otlp_response_decode((enum otlp_signal)sig, (enum otlp_format)f, data, size,
                                          &big_rej, big, sizeof(big));
            int rc2 = otlp_response_decode((enum otlp_signal)sig, (enum otlp_format)f, data, size,
                                           &small_rej, small, small_cap);
            CHECK(rc == rc2);
            CHECK(big_rej == small_rej);
            if (rc != 0) {
                CHECK(rc == AGENT_E_PROTO && big_rej == 0 && big[0] == '\0' && small[0] == '\0');
                continue;
            }
            CHECK(big_rej >= 0);
            check_message(big, sizeof(big));
            check_message(small, small_cap);
            CHECK(strncmp(big, small, strlen(small)) == 0);
        }
    }
    return 0;
}
