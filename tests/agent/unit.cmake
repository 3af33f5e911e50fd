# SPDX-License-Identifier: MIT
agent_add_test(test_cli SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cli.c LIBS agent_core LABELS unit)
agent_add_test(test_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_config.c LIBS agent_core LABELS unit)
agent_add_test(test_operations SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_operations.c LIBS agent_core LABELS unit)
agent_add_test(test_trace_config SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_trace_config.c LIBS agent_core LABELS unit)
agent_add_test(test_spool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_spool.c LIBS agent_core LABELS unit)
agent_add_test(test_budget_detail SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_budget_detail.c LIBS agent_core LABELS unit)
# The decoded session against the fake runtime on the test's own loop (tests/ipc's loop fixture).
agent_add_test(test_dsession SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_dsession.c
  ${PROJECT_SOURCE_DIR}/tests/ipc/ipc_test_loop.c LIBS agent_core test_support LABELS unit TIMEOUT 60)
target_include_directories(test_dsession PRIVATE ${PROJECT_SOURCE_DIR}/tests/ipc)
# The standing session (collect/standing.h) on dsession, against the fake runtime on the test's loop.
agent_add_test(test_standing SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_standing.c
  ${PROJECT_SOURCE_DIR}/tests/ipc/ipc_test_loop.c LIBS agent_core test_support LABELS unit TIMEOUT 60)
target_include_directories(test_standing PRIVATE ${PROJECT_SOURCE_DIR}/tests/ipc)
agent_add_test(test_timeouts SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_timeouts.c LIBS agent_core LABELS unit)
agent_add_test(test_ring_registry SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_ring_registry.c LIBS agent_core LABELS unit)
agent_add_test(test_otel_map SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_otel_map.c LIBS agent_core LABELS unit)
# The producers against the fake runtime, with a recording fake of the exporter (otel.h).
agent_add_test(test_otel_proc SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_otel_proc.c
  ${PROJECT_SOURCE_DIR}/tests/ipc/ipc_test_loop.c ${PROJECT_SOURCE_DIR}/tests/events/fixture.c
  LIBS agent_core test_support LABELS unit TIMEOUT 60)
target_include_directories(test_otel_proc PRIVATE ${PROJECT_SOURCE_DIR}/tests/ipc
  ${PROJECT_SOURCE_DIR}/tests/events)
