# SPDX-License-Identifier: MIT
# The MCP tools (agent/mcp/mcp_tools*.c) driven step by step with answers captured from the real
# routes (fixtures/README.md); unit, so it runs under valgrind too.
agent_add_test(test_mcp_tools SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_mcp_tools.c LIBS agent_core
  LABELS unit)
target_compile_definitions(test_mcp_tools PRIVATE MCP_FIXTURES="${CMAKE_CURRENT_LIST_DIR}/fixtures")
