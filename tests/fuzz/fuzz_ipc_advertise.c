/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target: what a runtime presents before any command. The reverse-connect advertise
 * message (docs/ipc.md §2.2) it sends first on a listen-mode connection, and the name of the
 * socket it creates in $TMPDIR (ipc.md §1.1), which discovery parses.
 */
#include "fuzz.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ipc_cmd.h"
#include "ipc_sockname.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t cookie[IPC_GUID_SIZE];
    uint64_t pid = 0;
    if (ipc_advertise_parse(data, size, cookie, &pid) == 0) {
        CHECK(size >= IPC_ADVERTISE_SIZE);
        CHECK(memcmp(cookie, data + 8, IPC_GUID_SIZE) == 0);
        uint64_t want = 0;
        for (int i = 7; i >= 0; i--) {
            want = want << 8 | data[8 + IPC_GUID_SIZE + i];
        }
        CHECK(pid == want);
        char guid[IPC_GUID_STR_SIZE];
        ipc_guid_format(cookie, guid);
        CHECK(strlen(guid) == IPC_GUID_STR_SIZE - 1);
    }

    /* The same bytes as a file name (up to the first NUL, as readdir would give it). */
    char *name = malloc(size + 1);
    CHECK(name != NULL);
    memcpy(name, data, size);
    name[size] = '\0';
    uint64_t spid = 0;
    uint64_t key = 0;
    if (ipc_sockname_parse(name, &spid, &key) == 0) {
        /* Parse and format agree: formatting the result gives back a name that parses the same. */
        char again[IPC_SOCKNAME_MAX];
        CHECK(ipc_sockname_format(again, sizeof(again), spid, key) == 0);
        uint64_t p2 = 0;
        uint64_t k2 = 0;
        CHECK(ipc_sockname_parse(again, &p2, &k2) == 0 && p2 == spid && k2 == key);
    }
    free(name);
    return 0;
}
