# SPDX-License-Identifier: MIT
# agent_warnings: the picky warning set, each flag probed first.
include(CheckCCompilerFlag)
add_library(agent_warnings INTERFACE)
set(_agent_warn_flags
  -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion -Wstrict-prototypes
  -Wmissing-prototypes -Wold-style-definition -Wpointer-arith -Wcast-qual -Wcast-align
  -Wwrite-strings -Wformat=2 -Wundef -Wvla -Wimplicit-fallthrough -Wdouble-promotion
  -Werror=implicit-function-declaration -Werror=incompatible-pointer-types -fno-common)
if(CMAKE_C_COMPILER_ID STREQUAL "GNU")
  list(APPEND _agent_warn_flags -Wduplicated-cond -Wduplicated-branches -Wlogical-op)
elseif(CMAKE_C_COMPILER_ID MATCHES "Clang")
  list(APPEND _agent_warn_flags -Wcomma -Wshorten-64-to-32 -Wassign-enum -Wextra-semi-stmt)
endif()
foreach(_f IN LISTS _agent_warn_flags)
  string(MAKE_C_IDENTIFIER "HAVE${_f}" _var)
  check_c_compiler_flag(${_f} ${_var})
  if(${_var})
    target_compile_options(agent_warnings INTERFACE ${_f})
  endif()
endforeach()
