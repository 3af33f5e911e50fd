# SPDX-License-Identifier: MIT
# The MCP tools (agent/mcp/mcp_tools*.c) driven step by step with answers captured from the real
# routes (fixtures/README.md); unit, so it runs under valgrind too.
agent_add_test(test_mcp_tools SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mcp_tools.c LIBS agent_core
  LABELS unit)
target_compile_definitions(test_mcp_tools PRIVATE MCP_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
# The same tools' schemas and answers under a full JSON Schema validator (python3-jsonschema,
# Draft 2020-12): the test program writes them (MCP_TOOLS_DUMP), check_schemas.py checks them.
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME test_mcp_tools_schemas
    COMMAND sh -c "d=$(mktemp -d) && MCP_TOOLS_DUMP=$d \"$1\" >/dev/null && \"$2\" \"$3\" $d; rc=$?; rm -rf $d; exit $rc"
            sh $<TARGET_FILE:test_mcp_tools> ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/check_schemas.py)
  set_tests_properties(test_mcp_tools_schemas PROPERTIES LABELS unit TIMEOUT 120 SKIP_RETURN_CODE 77
    ENVIRONMENT "${AGENT_TEST_ENV}")
endif()
