# SPDX-License-Identifier: MIT
# Trace readers for the tests. Included from tests/CMakeLists.txt after agent_add_test and
# AGENT_TEST_ENV are defined and BEFORE the add_subdirectory() calls whose tests use them: it
# appends to AGENT_TEST_ENV
#   DOTMON_TRACECHECK=<tracecheck.dll>   run as "$DOTNET_EXE $DOTMON_TRACECHECK FILE [--find TEXT]..."
#                                        (tests doing so need FIXTURES_REQUIRED tracecheck)
#   DOTMON_NETTRACE_CHECK=<nettrace_check executable>
#
#  - nettrace_check: events/nettrace's streaming checker as a command-line tool (C, built here).
#  - tracecheck: an independent reader, TraceEvent's EventPipeEventSource in a .NET console app
#    (tools/tracecheck), built once per build tree by the build_tracecheck fixture like the test
#    app. Restoring it fetches Microsoft.Diagnostics.Tracing.TraceEvent from NuGet.
#  - crosscheck_nettrace_fixtures: both readers on every tests/fixtures/nettrace file; their
#    counts must agree and the C checker must say COMPLETE under several chunkings.

add_executable(nettrace_check ${CMAKE_CURRENT_LIST_DIR}/nettrace_check.c)
target_link_libraries(nettrace_check PRIVATE agent_events agent_common agent_warnings agent_sanitizers)

set(TRACECHECK_OUT ${CMAKE_BINARY_DIR}/tracecheck)
list(APPEND AGENT_TEST_ENV
  "DOTMON_TRACECHECK=${TRACECHECK_OUT}/tracecheck.dll"
  "DOTMON_NETTRACE_CHECK=$<TARGET_FILE:nettrace_check>")
if(DOTNET_EXE)
  add_test(NAME build_tracecheck
    COMMAND ${DOTNET_EXE} build ${CMAKE_CURRENT_LIST_DIR}/tracecheck/tracecheck.csproj -c Release
            -o ${TRACECHECK_OUT} --nologo -v q
            -p:BaseIntermediateOutputPath=${CMAKE_BINARY_DIR}/tracecheck-obj/
            -p:BaseOutputPath=${CMAKE_BINARY_DIR}/tracecheck-bin/)
  set_tests_properties(build_tracecheck PROPERTIES FIXTURES_SETUP tracecheck TIMEOUT 600 LABELS setup)

  add_test(NAME crosscheck_nettrace_fixtures
    COMMAND ${CMAKE_COMMAND}
            -DDOTNET=${DOTNET_EXE}
            -DTRACECHECK=${TRACECHECK_OUT}/tracecheck.dll
            -DNETTRACE_CHECK=$<TARGET_FILE:nettrace_check>
            -DDIR=${CMAKE_CURRENT_LIST_DIR}/../fixtures/nettrace
            -P ${CMAKE_CURRENT_LIST_DIR}/crosscheck.cmake)
  set_tests_properties(crosscheck_nettrace_fixtures PROPERTIES FIXTURES_REQUIRED tracecheck
    TIMEOUT 300 LABELS tools ENVIRONMENT "${AGENT_TEST_ENV}")
else()
  add_test(NAME crosscheck_nettrace_fixtures COMMAND ${AGENT_NEEDS_DOTNET_SKIP})
  set_tests_properties(crosscheck_nettrace_fixtures PROPERTIES SKIP_RETURN_CODE 77 LABELS tools)
endif()

# Attack helpers of test_agent_attacks, run as a second user (setpriv): a symlink racer and a
# planted diagnostic socket (tests/support's fake runtime under another uid).
add_executable(attack_swap ${CMAKE_CURRENT_LIST_DIR}/attack_swap.c)
target_link_libraries(attack_swap PRIVATE agent_warnings agent_sanitizers)
add_executable(attack_runtime ${CMAKE_CURRENT_LIST_DIR}/attack_runtime.c)
target_include_directories(attack_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../support)
target_link_libraries(attack_runtime PRIVATE test_support agent_warnings agent_sanitizers)
list(APPEND AGENT_TEST_ENV
  "DOTMON_ATTACK_SWAP=$<TARGET_FILE:attack_swap>"
  "DOTMON_ATTACK_RUNTIME=$<TARGET_FILE:attack_runtime>")

# A hostile runtime flooding EventCounters with ever-new 30,000-character names, for the memory
# budget test (tests/metrics/check_memory_budget.py).
add_executable(flood_runtime ${CMAKE_CURRENT_LIST_DIR}/flood_runtime.c
  ${CMAKE_CURRENT_LIST_DIR}/../events/ntw.c ${CMAKE_CURRENT_LIST_DIR}/../events/wbuf.c)
target_include_directories(flood_runtime PRIVATE ${CMAKE_CURRENT_LIST_DIR}/../support
  ${CMAKE_CURRENT_LIST_DIR}/../events)
target_link_libraries(flood_runtime PRIVATE test_support agent_warnings agent_sanitizers)
list(APPEND AGENT_TEST_ENV "DOTMON_FLOOD_RUNTIME=$<TARGET_FILE:flood_runtime>")
