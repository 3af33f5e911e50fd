# SPDX-License-Identifier: MIT
# agent_sanitizers: carries -fsanitize=... to compile and link when AGENT_SANITIZE or AGENT_FUZZ is set.
#
# AGENT_FUZZ (libFuzzer, clang only) is a mode of its own: every library is compiled with
# -fsanitize=fuzzer-no-link,address,undefined (coverage instrumentation, no main) and links
# address,undefined; the fuzz targets add agent_fuzz_main, which links libFuzzer's main
# (-fsanitize=fuzzer). UBSan findings abort (-fno-sanitize-recover=undefined) so libFuzzer
# saves the input.
add_library(agent_sanitizers INTERFACE)
add_library(agent_fuzz_main INTERFACE)
if(AGENT_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "AGENT_FUZZ needs clang (e.g. -DCMAKE_C_COMPILER=clang-14)")
  endif()
  if(AGENT_SANITIZE)
    message(FATAL_ERROR "AGENT_FUZZ sets its own sanitizers; leave AGENT_SANITIZE empty")
  endif()
  target_compile_options(agent_sanitizers INTERFACE
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
  target_link_options(agent_sanitizers INTERFACE -fsanitize=address,undefined)
  target_link_options(agent_fuzz_main INTERFACE -fsanitize=fuzzer,address,undefined)
elseif(AGENT_SANITIZE)
  if(AGENT_SANITIZE MATCHES "memory" AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(SEND_ERROR "MemorySanitizer needs clang")
  endif()
  if(AGENT_SANITIZE MATCHES "thread" AND AGENT_SANITIZE MATCHES "address")
    message(SEND_ERROR "thread and address sanitizers are mutually exclusive")
  endif()
  set(_san -fsanitize=${AGENT_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_compile_options(agent_sanitizers INTERFACE ${_san})
  target_link_options(agent_sanitizers INTERFACE ${_san})
endif()
