# SPDX-License-Identifier: MIT
# The two commands of the README: `make run` and `make test`. Both install what is missing first.

SHELL := /bin/bash
DEB_PACKAGES := cmake make gcc pkg-config libuv1-dev node-llhttp libcjson-dev libssl-dev libcmocka-dev zlib1g-dev
# For `make image` (container/image.sh): buildah builds the image, podman saves the archive;
# the build recipe strips the binary (binutils) and copies the CA bundle. The pod tests also run
# the image (runc: Debian's default crun fails on some cgroup v1 hosts) and build the Dockerfile
# itself on a Debian 12 base made with debootstrap.
IMAGE_PACKAGES := podman buildah binutils ca-certificates
# For the tests only (tests/container reads YAML and runs the manifests as pods with podman, unit
# tests also run under valgrind, the load test drives wrk, the HTTPS tests make certificates with
# openssl and connect with curl, the /metrics text is checked with promtool from `prometheus`);
# the image's build stage does not need them. The MCP tools' schemas and answers are checked with
# python3-jsonschema (tests/mcp/check_schemas.py). Installing `prometheus` also enables its service:
# in a container policy-rc.d keeps it from starting; on a host, `systemctl disable --now
# prometheus` if you only want promtool. The S3 egress test runs s3rver (node; npm installs it into
# the build tree at the versions of tests/egress/s3rver/package-lock.json) and reads back with
# Debian's awscli; npm itself is installed only when missing (a nodejs that bundles it is kept).
# The browser tests (tests/ui: the /ui page, speedscope's viewer) run Debian's chromium headless,
# driven by playwright-core from npm (tests/ui/package-lock.json; never its own browser download).
TEST_PACKAGES := python3 python3-yaml python3-jsonschema valgrind protobuf-compiler openssl curl wrk prometheus $(IMAGE_PACKAGES) runc debootstrap \
  awscli nodejs chromium
# For `make fuzz` only: libFuzzer comes with clang's compiler-rt (tests/fuzz).
FUZZ_PACKAGES := clang-14 libclang-rt-14-dev
# For `make style` (.ci/style.sh): formatting and lint.
STYLE_PACKAGES := clang-format clang-tidy
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
BUILD ?= build
BUILD_ASAN ?= build-asan
BUILD_FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 60
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
URLS ?= http://127.0.0.1:52323

.PHONY: all deps deps-build configure build-bin build build-asan image app-image run test test-fast bench bench-trace bench-trace-mechanisms bench-foundation bench-peers bench-container bench-metrics bench-logs bench-rules bench-ring bench-gcdump bench-convert bench-otel bench-stacks bench-exceptions bench-mcp fuzz-deps build-fuzz fuzz fuzz-ci style format clean

all: build

# apt-get install PACKAGES… for the ones that are not installed yet.
define install_missing
	@missing=""; for p in $(1); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
endef

# What the binary needs.
deps-build:
	$(call install_missing,$(DEB_PACKAGES))

# What the tests need too. The .NET SDK is not a Debian package: without it the tests that start
# real .NET processes are skipped (ctest lists them), so say it up front.
deps: deps-build
	$(call install_missing,$(TEST_PACKAGES))
	@command -v npm >/dev/null || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq npm; }
	@command -v dotnet >/dev/null || echo "warning: no .NET SDK (dotnet) on PATH: the tests with real .NET processes will be skipped" >&2

configure:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null

# The binary alone (what `make run` needs; no test targets, no .NET).
build-bin: deps-build configure
	cmake --build $(BUILD) -j $(JOBS) --target dotmon

build: deps configure
	cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DAGENT_SANITIZE=address,undefined >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)

# dotmon's image, built with buildah from scratch (no registry, no Docker engine): the files of
# container/Dockerfile's final stage by the same recipe (container/build-rootfs.sh), then that
# stage itself. Tagged localhost/dotmon:<version> and :latest in the engine's usual storage, and
# saved as an OCI archive (`podman load -i build/dotmon-image.oci.tar` elsewhere).
image: deps-build
	$(call install_missing,$(IMAGE_PACKAGES))
	sh container/image.sh --workdir $(CURDIR)/$(BUILD)/image --archive $(CURDIR)/$(BUILD)/dotmon-image.oci.tar

# An app image for the pod example (docs: Kubernetes) without a registry: the walk-through's `hello`
# (made with `dotnet new console`: a line and a small allocation every second), this machine's .NET
# runtime and the libraries it loads, FROM scratch, uid 1654 (container/app-image.sh), tagged
# $(APP_IMAGE) in the engine's usual storage. Needs the .NET SDK.
APP_IMAGE ?= localhost/dotmon-hello:latest
app-image:
	$(call install_missing,$(IMAGE_PACKAGES))
	sh container/app-image.sh -w $(CURDIR)/$(BUILD)/app-image -t $(APP_IMAGE)

# Installs what is missing, builds the binary, and starts dotmon on its defaults (loopback only, a
# temporary API key printed once on standard output, apart from the log on standard error). The
# key's token also goes to TOKEN_FILE (0600, removed when dotmon stops), and before any log line
# dotmon prints the URL, the /ui URL and the `export DOTMON_TOKEN=$(cat …)` line to paste.
TOKEN_FILE ?= $(HOME)/.local/state/dotmon/token
run: build-bin
	./$(BUILD)/dotmon collect --temp-apikey --token-file '$(TOKEN_FILE)' --urls $(URLS)

# Installs what is missing, builds twice (normal and ASan+UBSan) and runs each check once where it
# means something (labels: tests/CMakeLists.txt), every pass even when an earlier one failed; then
# one summary with each pass's wall time, and a failure if any failed:
#   normal build: the unit tests and their valgrind runs; then what measures RSS or latency (label
#                 perf) and what exists in the normal build only (nosan: the image, its rootfs);
#   ASan+UBSan:   everything else: the unit tests again and every integration test, once.
# Each pass runs $(JOBS) tests at a time; tests that must run alone are RUN_SERIAL, tests sharing
# a host resource hold a RESOURCE_LOCK. Each build's ctest.log has its passes' summaries, and
# $(BUILD)/test-times.txt the passes' wall times (.ci/run prints them).
PURE_LABELS := '^(unit|valgrind)$$'
NORMAL_LABELS := '^(perf|nosan)$$'
test: build build-asan
	@set -o pipefail; rc1=0; rc2=0; : >$(BUILD)/test-times.txt; \
	pass() { local name=$$1 t0=$$(date +%s) rc=0; shift; "$$@" || rc=$$?; \
	  printf '%-24s %5d s\n' "$$name" $$(( $$(date +%s) - t0 )) >>$(BUILD)/test-times.txt; return $$rc; }; \
	pass "test: unit+valgrind" ctest --test-dir $(BUILD) -L $(PURE_LABELS) -j $(JOBS) --output-on-failure \
	  | tee $(BUILD)/ctest.log || rc1=$$?; \
	pass "test: perf+nosan" ctest --test-dir $(BUILD) -L $(NORMAL_LABELS) -j $(JOBS) --output-on-failure \
	  | tee -a $(BUILD)/ctest.log || rc1=$$?; \
	pass "test: asan (all)" ctest --test-dir $(BUILD_ASAN) -LE perf -j $(JOBS) --output-on-failure \
	  | tee $(BUILD_ASAN)/ctest.log || rc2=$$?; \
	echo "== make test: summary =="; \
	for b in $(BUILD) $(BUILD_ASAN); do \
	  printf '%-12s ' "$$b:"; grep -E 'tests passed, [0-9]+ tests failed' $$b/ctest.log || echo "no result"; \
	  sed -n '/The following tests FAILED:/,$$p' $$b/ctest.log | grep -E '^\s+[0-9]+ - ' || true; \
	  sed -n '/The following tests did not run:/,/^$$/p' $$b/ctest.log | grep -E '^\s+[0-9]+ - ' || true; \
	done; \
	cat $(BUILD)/test-times.txt; \
	[ $$rc1 -eq 0 ] && [ $$rc2 -eq 0 ]

# The normal build only (quicker while developing).
test-fast: build
	ctest --test-dir $(BUILD) --output-on-failure

# The screenshots of docs/ui.md, refreshed from a run of the /ui page's test (tests/ui/ui_page.js
# takes them on every run, into the build tree; this copies them into docs/img).
.PHONY: ui-screenshots
ui-screenshots: build-asan
	rm -rf $(BUILD_ASAN)/ui-screenshots
	ctest --test-dir $(BUILD_ASAN) -R '^ui_page$$' --output-on-failure
	mkdir -p docs/img
	cp $(BUILD_ASAN)/ui-screenshots/ui-flame.png $(BUILD_ASAN)/ui-screenshots/ui-flame-zoom.png \
	  $(BUILD_ASAN)/ui-screenshots/ui-metrics.png docs/img/

# Benchmarks (not part of the tests, nor of .ci/run): bench/report.py runs the benches of its table
# and rewrites their generated blocks in BENCHMARKS.md (the commit, date, load average and machine,
# then each bench's tables), leaving the prose around them. `make bench` runs all of them;
# `make bench BENCH="trace foundation"` some (`python3 bench/report.py --list`). A bench that fails
# leaves its block unchanged. The bench-NAME targets below run one bench and print it without
# touching BENCHMARKS.md. Bench arguments: TRACE_ARGS (bench_trace's bytes and runs),
# MECH_ARGS (the same for bench_trace --mechanisms), CONVERT_MODES (bench_convert.sh's modes); DOTMON_BASE_BIN=<an older dotmon> adds its dump CPU to
# bench-peers.
BENCH ?=
TRACE_ARGS ?= 2G 10
MECH_ARGS ?= 2G 5
CONVERT_MODES ?= ndjson speedscope
export TRACE_ARGS MECH_ARGS CONVERT_MODES
BENCH_REPORT = python3 bench/report.py --build $(BUILD)
# bench_trace relays through socat (the ceiling it is measured against).
NEED_SOCAT = command -v socat >/dev/null || { $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq socat; }
bench: build
	@$(NEED_SOCAT)
	$(BENCH_REPORT) $(BENCH)

# The trace relay against socat, every interleaved pair (bench_trace $(TRACE_ARGS)).
bench-trace: build
	@$(NEED_SOCAT)
	$(BENCH_REPORT) --no-write trace

# The relay's copy against splice(2) + tee(2), dotmon not involved (bench_trace --mechanisms
# $(MECH_ARGS)).
bench-trace-mechanisms: build
	$(BENCH_REPORT) --no-write trace-mechanisms

# Idle RSS, start-up and /processes latency against their floors (bench_foundation).
bench-foundation: build
	$(BENCH_REPORT) --no-write foundation

# dotmon against dotnet-trace and dotnet-dump (installed from NuGet into build/tools), one
# interleaved run; DOTMON_BASE_BIN=<an older dotmon> adds its dump CPU for comparison.
bench-peers: build
	$(BENCH_REPORT) --no-write peers dump

# The image under podman: start-to-ready and idle memory of the container against the binary on
# the host (builds the images into the tests' private podman storage first).
bench-container: build
	$(BENCH_REPORT) --no-write container

# Metrics (issue 15): dotmon against dotnet-counters on 10 apps (CPU per process-minute, RSS),
# /metrics scrape latency; the decoder against TraceEvent on a large real trace.
bench-metrics: build
	$(BENCH_REPORT) --no-write metrics

# dotmon convert against dotnet-trace convert (NuGet, into build/tools) on ~100 MB real traces of
# the test app, same run: --format ndjson on an events and a gc-verbose trace (issue 16) and
# --format speedscope on a cpu-sampling trace (issue 20). `make bench-convert CONVERT_MODES=speedscope`
# runs one.
bench-convert: build
	$(BENCH_REPORT) --no-write convert

# Logs (issue 16): latency from the app's ILogger call to the /logs client at 10, 1,000 and
# 10,000 lines/s, lines lost, dotmon's CPU per 10,000 lines against the app's own, peak RSS.
bench-logs: build
	$(BENCH_REPORT) --no-write logs

# Collection rules (issue 17): dotmon's CPU and RSS with a CPUUsage and an EventCounter rule on 10
# apps against no rules, same run; the time from the threshold crossing to the action's start.
bench-rules: build
	$(BENCH_REPORT) --no-write rules

# Pre-trigger ring (issue 18): dotmon's memory against RingBufferSizeMB (90 s per size, then 10
# minutes of a busy app with a 4 MB ring), and what the ring costs the app against no session and
# against dotnet-trace (installed from NuGet into build/tools), same run.
bench-ring: build
	$(BENCH_REPORT) --no-write ring

# Heap snapshots (issue 19): GET /gcdump against dotnet-gcdump collect on a ~1 GB heap of 9 million
# objects (wall time, memory); the runtime's buffer raised to 1024 MB for a walk that big.
bench-gcdump: build
	$(BENCH_REPORT) --no-write gcdump

# OpenTelemetry export (issue 33): the OTel test app with no telemetry, with its in-process
# OpenTelemetry SDK, and with dotmon forwarding its signals, interleaved rounds against the Aspire
# Dashboard: the app's throughput and CPU, dotmon's CPU per 10,000 items and RSS, latency to the
# receiver (a closed loop, then about 300 requests/s).
bench-otel: build
	$(BENCH_REPORT) --no-write otel

# GET /stacks against dotnet-stack report on a 200-thread app (bench_stacks.py).
bench-stacks: build
	$(BENCH_REPORT) --no-write stacks

# The exceptions history's cost to an app throwing 10,000 exceptions/s (bench_exceptions.py).
bench-exceptions: build
	$(BENCH_REPORT) --no-write exceptions

# The MCP tools against the REST routes and Microsoft's tools with their reports (bench_mcp.py).
bench-mcp: build
	$(BENCH_REPORT) --no-write mcp

# libFuzzer targets (tests/fuzz, not part of the tests): clang 14 with ASan+UBSan, no .NET needed.
fuzz-deps:
	$(call install_missing,$(DEB_PACKAGES) $(FUZZ_PACKAGES))

build-fuzz: fuzz-deps
	cmake -S . -B $(BUILD_FUZZ) -DCMAKE_C_COMPILER=clang-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DAGENT_FUZZ=ON -DAGENT_TESTS=OFF >/dev/null
	cmake --build $(BUILD_FUZZ) -j $(JOBS) --target fuzz_targets

# Each target for FUZZ_SECONDS on a copy of its seed corpus; inputs that crash, leak or time out
# are kept in $(BUILD_FUZZ)/fuzz-artifacts/<target>/.
fuzz: build-fuzz
	FUZZ_BUILD=$(abspath $(BUILD_FUZZ)) tests/fuzz/run.sh $(FUZZ_SECONDS)

# The same for CI, on every commit: each target's whole seed corpus replayed, then FUZZ_CI_SECONDS
# of fuzzing per target (`make fuzz` is the long run).
FUZZ_CI_SECONDS ?= 5
fuzz-ci: build-fuzz
	FUZZ_BUILD=$(abspath $(BUILD_FUZZ)) tests/fuzz/run.sh $(FUZZ_CI_SECONDS)

# House style (CI runs it): clang-format clean, clang-tidy's bug-prone and function-size checks on
# dotmon's sources, a hardened release build. `make format` applies clang-format to the tree.
style:
	$(call install_missing,$(DEB_PACKAGES) $(STYLE_PACKAGES))
	bash .ci/style.sh

format:
	$(call install_missing,$(STYLE_PACKAGES))
	git ls-files '*.c' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_FUZZ)
