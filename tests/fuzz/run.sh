#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# Runs the libFuzzer targets that are already built (it builds nothing; `make fuzz` builds them).
#
#   tests/fuzz/run.sh SECONDS [target…]      default: every target in corpus/
#
# Each target first replays every input of tests/fuzz/corpus/<target>/ once (-runs=0: no
# mutation; a regression on a known input fails here, whatever the fuzzing finds), then fuzzes for
# SECONDS (-max_total_time) on a COPY of that corpus in a temporary directory, so new inputs never
# land in the repository, with its dictionary when there is one, -rss_limit_mb=2048 and
# -timeout=10. One summary line per target: replayed inputs, executions, exec/s, final corpus
# size, coverage, wall time and status. Exits 1 if any target found a crash, leak, timeout or
# out-of-memory; the input that triggered it is kept under $FUZZ_ARTIFACTS and its path printed,
# with the end of the libFuzzer log.
#
# Environment:
#   FUZZ_BUILD      build tree holding fuzz/<target> (default: <repo>/build-fuzz)
#   FUZZ_ARTIFACTS  where crash/leak/timeout inputs and logs go (default: $FUZZ_BUILD/fuzz-artifacts)
#   FUZZ_ARGS       extra libFuzzer flags, e.g. "-runs=10000000" (then SECONDS is an upper bound)
#   FUZZ_KEEP_CORPUS=1  keep the temporary corpus copies (their paths are printed)
#   FUZZ_JOBS       targets fuzzed at once (default: the number of CPUs)
set -u

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]] || [ "$1" -eq 0 ]; then
    echo "usage: $0 SECONDS [target…]" >&2
    exit 2
fi
seconds=$1
shift

build=${FUZZ_BUILD:-$repo/build-fuzz}
artifacts=${FUZZ_ARTIFACTS:-$build/fuzz-artifacts}
if [ $# -gt 0 ]; then
    targets=("$@")
else
    targets=()
    for d in "$here"/corpus/fuzz_*/; do
        targets+=("$(basename "$d")")
    done
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/dotmon-fuzz.XXXXXX")
# Each target runs in a process group of its own (set -m below): a signal to this script stops
# them all, and only then is their folder removed.
pids=()
stop_targets() {
    local p
    for p in "${pids[@]}"; do
        kill -TERM -- "-$p" 2>/dev/null || true
    done
    wait 2>/dev/null || true
}
cleanup() {
    stop_targets
    if [ "${FUZZ_KEEP_CORPUS:-0}" = 1 ]; then
        echo "corpus copies kept in $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Leaks are findings; UBSan already aborts (-fno-sanitize-recover=undefined), print its stack.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# The last value of "key: N" on libFuzzer status lines ("#123 DONE cov: 45 ft: …").
last_field() {
    grep -E "^#[0-9]+" "$2" | grep -oE "$1: [0-9]+" | tail -1 | grep -oE '[0-9]+$'
}

# One target: replay, then fuzz; its summary lines go to stdout, and it returns 1 on a finding.
run_target() {
    local t=$1 bin=$build/fuzz/$1
    if [ ! -x "$bin" ]; then
        echo "$t: not built ($bin missing; run make fuzz)"
        return 1
    fi
    local corpus=$work/$t
    mkdir -p "$corpus" "$artifacts/$t"
    if [ -d "$here/corpus/$t" ]; then
        cp -R "$here/corpus/$t/." "$corpus/"
    fi
    local dict=()
    if [ -f "$here/$t.dict" ]; then
        dict=("-dict=$here/$t.dict")
    fi
    local log=$artifacts/$t/last-run.log start
    start=$(date +%s)
    # The replay: every corpus input once, as it is.
    local replay_log=$artifacts/$t/last-replay.log replay_status replayed
    "$bin" -runs=0 -rss_limit_mb=2048 -timeout=10 -artifact_prefix="$artifacts/$t/" "$corpus" \
        >"$replay_log" 2>&1
    replay_status=$?
    replayed=$(find "$corpus" -type f | wc -l)
    if [ "$replay_status" -ne 0 ]; then
        printf '%-20s replay of %s inputs FAILED(exit %s)\n' "$t" "$replayed" "$replay_status"
        echo "  log:   $replay_log"
        grep -E 'ERROR: |SUMMARY: |runtime error:|ALARM|out-of-memory|Test unit written' \
            "$replay_log" | head -5 | sed 's/^/  /'
        return 1
    fi
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$t/" "${dict[@]}" ${FUZZ_ARGS:-} "$corpus" >"$log" 2>&1
    local status=$? wall runs eps cov files artifact result
    wall=$(($(date +%s) - start))

    runs=$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | grep -oE '[0-9]+$')
    [ -n "$runs" ] || runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#')
    eps=$(grep -oE 'stat::average_exec_per_sec: [0-9]+' "$log" | grep -oE '[0-9]+$')
    [ -n "$eps" ] || eps=$(last_field exec/s "$log")
    cov=$(last_field cov "$log")
    files=$(find "$corpus" -type f | wc -l)
    artifact=$(grep -oE 'Test unit written to .*' "$log" | tail -1 | sed 's/^Test unit written to //')

    if [ "$status" -eq 0 ] && [ -z "$artifact" ]; then
        result="ok"
    else
        result="FAILED(exit $status)"
    fi
    printf '%-20s replayed=%-5s runs=%-10s exec/s=%-7s corpus=%-6s cov=%-6s time=%ss status=%s\n' \
        "$t" "$replayed" "${runs:-?}" "${eps:-?}" "$files" "${cov:-?}" "$wall" "$result"
    if [ "$result" != ok ]; then
        [ -n "$artifact" ] && echo "  input: $artifact"
        echo "  log:   $log"
        grep -E 'ERROR: |SUMMARY: |runtime error:|ALARM|out-of-memory' "$log" | head -5 | sed 's/^/  /'
        return 1
    fi
}

# FUZZ_JOBS targets at a time (each fuzzes on one thread); their lines are printed in the targets'
# order, as soon as a target and every one before it are done.
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || jobs=1
set -m
failed=0
shown=0
show_done() {
    while [ "$shown" -lt "${#pids[@]}" ] && [ -e "$work/.rc.$shown" ]; do
        cat "$work/.out.$shown" 2>/dev/null
        [ "$(cat "$work/.rc.$shown")" = 0 ] || failed=1
        shown=$((shown + 1))
    done
}
for i in "${!targets[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
        wait -n 2>/dev/null || true
        show_done
    done
    (
        rc=0
        run_target "${targets[$i]}" >"$work/.out.$i" 2>&1 || rc=1
        echo "$rc" >"$work/.rc.$i.part" && mv "$work/.rc.$i.part" "$work/.rc.$i"
    ) &
    pids+=("$!")
done
while [ "$(jobs -rp | wc -l)" -gt 0 ]; do
    wait -n 2>/dev/null || true
    show_done
done
show_done
[ "$shown" -eq "${#targets[@]}" ] || failed=1
exit $failed
