# SPDX-License-Identifier: MIT
# The synthetic runtime for the /trace relay benchmark (included from bench/CMakeLists.txt).
# trace_producer answers discovery and CollectTracing like a runtime and streams valid nettrace as
# fast as its socket drains (see the top of trace_producer.c for its options).
add_executable(trace_producer ${CMAKE_CURRENT_LIST_DIR}/trace_producer.c)
target_link_libraries(trace_producer PRIVATE agent_ipc agent_common agent_warnings agent_sanitizers)

# Not a benchmark run: a format check of what the producer writes, through the C checker
# (tests/tools/tools.cmake defines nettrace_check). 48 MiB covers several SPBlocks.
if(TARGET nettrace_check)
  add_test(NAME trace_producer_stream_valid
    COMMAND sh -c "\"$1\" --stdout --bytes 48M --block 60K | \"$2\" --chunk 4093 -"
            trace_producer_stream_valid $<TARGET_FILE:trace_producer> $<TARGET_FILE:nettrace_check>)
  set_tests_properties(trace_producer_stream_valid PROPERTIES TIMEOUT 120 LABELS unit
    PASS_REGULAR_EXPRESSION "\"verdict\":\"COMPLETE\"")
endif()
