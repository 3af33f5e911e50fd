# SPDX-License-Identifier: MIT
# The two commands of the README: `make run` and `make test`. Both install what is missing first.

DEB_PACKAGES := cmake make gcc pkg-config libuv1-dev node-llhttp libcjson-dev libssl-dev libcmocka-dev
# For the tests only (tests/container reads YAML, unit tests also run under valgrind, the load
# test drives wrk, the HTTPS tests make certificates with openssl and connect with curl); the
# image's build stage does not need them.
TEST_PACKAGES := python3 python3-yaml valgrind openssl curl wrk
# For `make fuzz` only: libFuzzer comes with clang's compiler-rt (tests/fuzz).
FUZZ_PACKAGES := clang-14 libclang-rt-14-dev
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 60
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
URLS ?= http://127.0.0.1:52323

.PHONY: all deps build build-asan run test test-fast bench bench-peers fuzz-deps build-fuzz fuzz fuzz-ci clean

all: build

deps:
	@missing=""; for p in $(DEB_PACKAGES) $(TEST_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	@command -v dotnet >/dev/null || { echo "the .NET SDK (dotnet) is required for the test app" >&2; exit 1; }

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DAGENT_SANITIZE=address,undefined >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# Installs what is missing, builds, and starts dotmon on its defaults (loopback only, a temporary
# API key printed once).
run: build
	./$(BUILD)/dotmon collect --temp-apikey --urls $(URLS)

# Installs what is missing, builds twice (normal and ASan+UBSan) and runs the whole suite in both.
test: build build-asan
	ctest --test-dir $(BUILD) --output-on-failure
	ctest --test-dir $(BUILD_ASAN) --output-on-failure

# The normal build only (quicker while developing).
test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure

# Benchmarks (not part of the tests): figures for BENCHMARKS.md.
bench: build
	@command -v socat >/dev/null || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq socat; }
	ctest --test-dir $(BUILD) -R build_testapp >/dev/null
	DOTMON_BIN=$(CURDIR)/$(BUILD)/dotmon DOTMON_TESTAPP_DIR=$(CURDIR)/$(BUILD)/testapp \
	  ./$(BUILD)/bench/bench_foundation 1000
	DOTMON_BIN=$(CURDIR)/$(BUILD)/dotmon TRACE_PRODUCER=$(CURDIR)/$(BUILD)/bench/trace_producer \
	  ./$(BUILD)/bench/bench_trace 2G

# dotmon against dotnet-trace and dotnet-dump (installed from NuGet into build/tools), one
# interleaved run; DOTMON_BASE_BIN=<an older dotmon> adds its dump CPU for comparison.
bench-peers: build
	ctest --test-dir $(BUILD) -R 'build_testapp|build_tracecheck' >/dev/null
	DOTMON_BIN=$(CURDIR)/$(BUILD)/dotmon DOTMON_TESTAPP_DIR=$(CURDIR)/$(BUILD)/testapp \
	  DOTMON_TRACECHECK=$(CURDIR)/$(BUILD)/tracecheck/tracecheck.dll bench/bench_peers.sh 3

# libFuzzer targets (tests/fuzz, not part of the tests): clang 14 with ASan+UBSan, no .NET needed.
fuzz-deps:
	@missing=""; for p in $(DEB_PACKAGES) $(FUZZ_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

build-fuzz: fuzz-deps
	cmake -S . -B $(BUILD_FUZZ) -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DAGENT_FUZZ=ON -DAGENT_TESTS=OFF >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_targets

# Each target for FUZZ_SECONDS on a copy of its seed corpus; inputs that crash, leak or time out
# are kept in $(BUILD_FUZZ)/fuzz-artifacts/<target>/.
fuzz: build-fuzz
	FUZZ_BUILD=$(abspath $(BUILD_FUZZ)) tests/fuzz/run.sh $(FUZZ_SECONDS)

# The same for CI: 30 s per target.
fuzz-ci: build-fuzz
	FUZZ_BUILD=$(abspath $(BUILD_FUZZ)) tests/fuzz/run.sh 30

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
