/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: a client's trace request. The input is a POST /trace body, parsed with
 * trace_config_from_json, and the same bytes as the `profile=` list of GET /trace, parsed with
 * trace_config_from_profiles. A config that parses must be encodable as CollectTracing in every
 * version from its minimum to 5 (trace_config.h promises the largest form fits in 64 KiB), and
 * the encoded message must decode as one whole IPC frame.
 */
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "err.h"
#include "ipc_cmd.h"
#include "ipc_codec.h"
#include "trace_config.h"

static uint8_t wire[IPC_MESSAGE_MAX + 1];

static void check_config(const struct trace_config *tc)
{
    CHECK(memchr(tc->profile_names, '\0', sizeof(tc->profile_names)) != NULL);
    const struct ipc_collect_config *c = &tc->collect;
    CHECK(c->provider_count >= 1 && c->provider_count <= TRACE_MAX_PROVIDERS);
    CHECK(c->buffer_mb >= 1 && c->buffer_mb <= TRACE_MAX_BUFFER_MB);
    for (size_t i = 0; i < c->provider_count; i++) {
        CHECK(c->providers[i].name != NULL && c->providers[i].name[0] != '\0');
        CHECK(c->providers[i].arguments != NULL);
        CHECK(c->providers[i].level <= 5);
    }
    int min = ipc_collect_min_version(c);
    CHECK(min >= 2 && min <= 5);
    for (int v = min; v <= 5; v++) {
        struct ipc_wr w;
        ipc_wr_init(&w, wire, sizeof(wire));
        CHECK(ipc_cmd_collect_tracing(&w, v, c) == 0);
        struct ipc_frame f;
        size_t consumed = 0;
        CHECK(ipc_decode(wire, w.len, IPC_MESSAGE_MAX, &f, &consumed) == IPC_FRAME);
        CHECK(consumed == w.len && f.hdr.command_set == IPC_SET_EVENTPIPE);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct buf err;
    buf_init(&err, 0);
    struct trace_config tc;
    int rc = trace_config_from_json((const char *)data, size, &tc, &err);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    if (rc == 0) {
        CHECK(strcmp(tc.profile_names, "custom") == 0);
        check_config(&tc);
    } else {
        CHECK(buf_size(&err) > 0); /* every refusal says why */
    }
    trace_config_fini(&tc);
    trace_config_fini(&tc);

    char *list = malloc(size + 1);
    CHECK(list != NULL);
    memcpy(list, data, size);
    list[size] = '\0';
    buf_reset(&err);
    rc = trace_config_from_profiles(list, (uint32_t)(size % 7), &tc, &err);
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    if (rc == 0) {
        check_config(&tc);
    } else {
        CHECK(buf_size(&err) > 0);
    }
    trace_config_fini(&tc);
    rc = trace_config_from_profiles(list, 0, &tc, NULL); /* err may be NULL */
    CHECK(rc == 0 || rc == AGENT_E_INVAL);
    trace_config_fini(&tc);
    free(list);
    buf_fini(&err);
    return 0;
}
