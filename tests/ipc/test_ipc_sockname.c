/* SPDX-License-Identifier: MIT */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "err.h"
#include "ipc_node.h"
#include "ipc_sockname.h"

static void test_sockname_parses_valid_names(void **state)
{
    (void)state;
    struct {
        const char *name;
        uint64_t pid;
        uint64_t key;
    } ok[] = {
        {"dotnet-diagnostic-1234-5678-socket", 1234, 5678},
        {"dotnet-diagnostic-1-0-socket", 1, 0}, /* key 0: the runtime could not compute one */
        {"dotnet-diagnostic-4194304-18446744073709551615-socket", 4194304, UINT64_MAX},
        {"dotnet-diagnostic-18446744073709551615-1-socket", UINT64_MAX, 1},
        {"dotnet-diagnostic-007-08-socket", 7, 8},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t pid = 0;
        uint64_t key = 0;
        assert_int_equal(ipc_sockname_parse(ok[i].name, &pid, &key), 0);
        assert_int_equal(pid, ok[i].pid);
        assert_int_equal(key, ok[i].key);
    }
}

static void test_sockname_rejects_everything_else(void **state)
{
    (void)state;
    const char *bad[] = {
        "",
        "dotnet-diagnostic-",
        "dotnet-diagnostic--1-socket",
        "dotnet-diagnostic-1--socket",
        "dotnet-diagnostic-1-2",
        "dotnet-diagnostic-1-2-socket ",
        "dotnet-diagnostic-1-2-socketx",
        "dotnet-diagnostic-1-2-3-socket",
        "dotnet-diagnostic-dsrouter-1234-5678-socket",
        "dotnet-diagnostic-dsrouter-1234-socket",
        "dotnet-diagnostic-+1-2-socket",
        "dotnet-diagnostic- 1-2-socket",
        "dotnet-diagnostic-1-+2-socket",
        "dotnet-diagnostic-0x10-2-socket",
        "dotnet-diagnostic-0-2-socket",                    /* pid 0 */
        "dotnet-diagnostic-18446744073709551616-1-socket", /* pid overflows */
        "dotnet-diagnostic-1-18446744073709551616-socket", /* key overflows */
        "dotnet-diagnostic-1-99999999999999999999999-socket",
        "Dotnet-diagnostic-1-2-socket",
        "xdotnet-diagnostic-1-2-socket",
        "dotnet-diagnostic-1-2-socket/",
        "/tmp/dotnet-diagnostic-1-2-socket", /* a path, not a name */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t pid = 77;
        uint64_t key = 88;
        assert_int_equal(ipc_sockname_parse(bad[i], &pid, &key), AGENT_E_INVAL);
        assert_int_equal(pid, 77); /* untouched on failure */
        assert_int_equal(key, 88);
    }
}

static void test_sockname_format_round_trip(void **state)
{
    (void)state;
    char name[IPC_SOCKNAME_MAX];
    assert_int_equal(ipc_sockname_format(name, sizeof(name), UINT64_MAX, UINT64_MAX), 0);
    assert_int_equal(strlen(name) + 1, IPC_SOCKNAME_MAX);
    uint64_t pid;
    uint64_t key;
    assert_int_equal(ipc_sockname_parse(name, &pid, &key), 0);
    assert_int_equal(pid, UINT64_MAX);
    assert_int_equal(key, UINT64_MAX);
    assert_int_equal(ipc_sockname_format(name, sizeof(name), 42, 7), 0);
    assert_string_equal(name, "dotnet-diagnostic-42-7-socket");
    assert_int_equal(ipc_sockname_format(name, strlen("dotnet-diagnostic-42-7-socket"), 42, 7),
                     AGENT_E_NOSPACE);
}

/* Node mode looks for the path the runtime made: TMPDIR, '/' unless it ends with one, the name. */
static void test_node_sock_path(void **state)
{
    (void)state;
    const char *name = "dotnet-diagnostic-1-42-socket";
    struct {
        const char *tmpdir;
        const char *want;
    } cases[] = {
        {"/tmp", "/tmp/dotnet-diagnostic-1-42-socket"},
        {"/tmp/", "/tmp/dotnet-diagnostic-1-42-socket"},
        {"/x//", "/x//dotnet-diagnostic-1-42-socket"},
        {"/", "/dotnet-diagnostic-1-42-socket"},
    };
    char out[128];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(ipc_node_sock_path(cases[i].tmpdir, name, out, sizeof(out)), 0);
        assert_string_equal(out, cases[i].want);
    }
    assert_int_equal(ipc_node_sock_path("/tmp", name, out, 10), AGENT_E_TOOBIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sockname_parses_valid_names),
        cmocka_unit_test(test_sockname_rejects_everything_else),
        cmocka_unit_test(test_sockname_format_round_trip),
        cmocka_unit_test(test_node_sock_path),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
