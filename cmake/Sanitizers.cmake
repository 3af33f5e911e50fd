# SPDX-License-Identifier: MIT
# agent_sanitizers: carries -fsanitize=... to compile and link when AGENT_SANITIZE is set.
add_library(agent_sanitizers INTERFACE)
if(AGENT_SANITIZE)
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
