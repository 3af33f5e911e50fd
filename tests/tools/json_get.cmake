# SPDX-License-Identifier: MIT
# For the -P scripts that compare JSON lines (crosscheck.cmake, tests/events/ring_tracecheck.cmake):
# json_get(OUT JSON KEY...) sets OUT to the member at KEY... of JSON, or "<missing>".
function(json_get out json)
  string(JSON value ERROR_VARIABLE err GET "${json}" ${ARGN})
  if(err)
    set(value "<missing>")
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()
