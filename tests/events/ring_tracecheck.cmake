# SPDX-License-Identifier: MIT
# The ring's output (events/ev_ring.c) read by an independent reader: real captures through a ring
# with eviction (a byte cap, an age, both; snapshot, or trigger then pass-through), written by
# ring_write, then read whole by TraceEvent (tests/tools/tracecheck). TraceEvent must read each
# output without error, count the events the ring says it wrote, and put the earliest of them at
# the same instant (.NET DateTime ticks) as the ring's oldest kept event; every case drops events.
# cmake -DDOTNET=dotnet -DTRACECHECK=tracecheck.dll -DRING_WRITE=ring_write -DTESTS=<repo>/tests
#       -DOUT=dir -P ring_tracecheck.cmake
cmake_minimum_required(VERSION 3.24)

foreach(v DOTNET TRACECHECK RING_WRITE TESTS OUT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ring_tracecheck: -D${v}=... is required")
  endif()
endforeach()
file(MAKE_DIRECTORY ${OUT})

# name | input (below tests/) | ring_write options
set(cases
  "cpu-cap|fixtures/nettrace/cpu.nettrace|--snapshot --max-bytes 40000"
  "cpu-age-trigger|fixtures/nettrace/cpu.nettrace|--trigger-at 80000 --max-age-ms 700 --max-bytes 10000000"
  "cpu-both|fixtures/nettrace/cpu.nettrace|--snapshot --max-age-ms 1500 --max-bytes 60000 --chunk 1"
  "rundown-trigger|fixtures/nettrace/rundown_ct4.nettrace|--trigger-at 20000 --max-bytes 8000"
  "gc-age|fixtures/nettrace/gc.nettrace|--snapshot --max-age-ms 1500 --max-bytes 1000000"
  "http-trigger|fixtures/nettrace/http_ct5.nettrace|--trigger-at 30000 --max-bytes 15000"
  # gc.nettrace replayed as three sequence-point regions (tests/events/test_ev_ring.c): whole
  # regions evicted.
  "regions-cap|fuzz/corpus/fuzz_ring/gen-gc-3regions|--snapshot --max-bytes 20000"
)

include(${CMAKE_CURRENT_LIST_DIR}/../tools/json_get.cmake)

set(failures 0)
foreach(case ${cases})
  string(REPLACE "|" ";" parts "${case}")
  list(GET parts 0 name)
  list(GET parts 1 input)
  list(GET parts 2 opts)
  separate_arguments(opts UNIX_COMMAND "${opts}")
  set(trace ${OUT}/${name}.nettrace)
  execute_process(COMMAND ${RING_WRITE} ${TESTS}/${input} ${trace} ${opts}
                  OUTPUT_VARIABLE rw ERROR_VARIABLE rw_err RESULT_VARIABLE rw_rc)
  if(NOT rw_rc EQUAL 0)
    message(SEND_ERROR "${name}: ring_write failed (${rw_rc}): ${rw}${rw_err}")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  execute_process(COMMAND ${DOTNET} ${TRACECHECK} ${trace} --times
                  OUTPUT_VARIABLE te ERROR_VARIABLE te_err RESULT_VARIABLE te_rc)
  json_get(te_ok "${te}" ok)
  if(NOT te_rc EQUAL 0 OR NOT te_ok STREQUAL "ON")
    message(SEND_ERROR "${name}: TraceEvent failed (${te_rc}): ${te}${te_err}")
    math(EXPR failures "${failures} + 1")
    continue()
  endif()
  json_get(ring_events "${rw}" events)
  json_get(te_events "${te}" events)
  json_get(ring_first "${rw}" firstTimeUtcTicks)
  json_get(te_first "${te}" firstTimeUtcTicks)
  json_get(dropped "${rw}" eventsDiscarded)
  if(NOT ring_events STREQUAL te_events)
    message(SEND_ERROR "${name}: the ring wrote ${ring_events} events, TraceEvent read ${te_events}")
    math(EXPR failures "${failures} + 1")
  endif()
  if(NOT ring_first STREQUAL te_first)
    message(SEND_ERROR "${name}: oldest kept event at ${ring_first} by the ring, ${te_first} by TraceEvent")
    math(EXPR failures "${failures} + 1")
  endif()
  if(ring_events EQUAL 0 OR dropped EQUAL 0)
    message(SEND_ERROR "${name}: the case should keep some events and drop some: ${rw}")
    math(EXPR failures "${failures} + 1")
  endif()
  message(STATUS "${name}: ${te_events} events (${dropped} dropped), first at ${te_first}: TraceEvent agrees")
endforeach()
if(failures GREATER 0)
  message(FATAL_ERROR "ring_tracecheck: ${failures} failure(s)")
endif()
