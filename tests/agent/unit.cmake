# SPDX-License-Identifier: MIT
agent_add_test(test_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli.c LIBS agent_core LABELS unit)
agent_add_test(test_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c LIBS agent_core LABELS unit)
agent_add_test(test_operations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_operations.c LIBS agent_core LABELS unit)
agent_add_test(test_trace_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trace_config.c LIBS agent_core LABELS unit)
agent_add_test(test_spool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_spool.c LIBS agent_core LABELS unit)
agent_add_test(test_budget_detail SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_budget_detail.c LIBS agent_core LABELS unit)
agent_add_test(test_ring_registry SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ring_registry.c LIBS agent_core LABELS unit)
