#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `dotmon convert` against `dotnet-trace convert` on the same ~100 MB real traces, in one run.
# Nothing is asserted.
#
#   bench_convert.sh [ndjson]  (issue 16) `--format ndjson` on two traces of the test app, both
#                              collected by dotmon:
#   - events: bench_decode.sh's (its EventSource DotMon-TestApp, EVENTS events, default 460,000
#     ≈ 100 MB, plus System.Runtime counters and meter): self-describing events, strings;
#   - gc-verbose: the `gc-verbose` profile while the app allocates (`churn`), GC_SECONDS seconds
#     (default 7 ≈ 100 MB): native runtime events (allocation ticks, GC events) with stacks, the
#     trace people most often convert.
#   dotmon writes its NDJSON to a file and, in a second measurement, to /dev/null (its NDJSON is
#   2-6x the input, so a file measures the disk's write-back as much as the converter).
#   dotnet-trace convert's formats (speedscope, chromium) both go through TraceEvent's TraceLog;
#   speedscope is measured.
#
#   bench_convert.sh speedscope  (issue 20) `--format speedscope` against dotnet-trace's
#                              `--format Speedscope` on one CPU trace: dotmon's
#                              /trace?profile=cpu-sampling of the test app's `hot-threads
#                              CPU_THREADS` (default 64: `hot` on the command thread, 64 threads
#                              sleeping 1 ms at the bottom of stacks that change every round) for
#                              CPU_SECONDS seconds (default 28: 75-110 MB, as fast as the machine
#                              lets the runtime's sampler go). Both outputs go to disk; the last
#                              ones are compared: threads, their time spans and weights, the hot
#                              thread's top exclusive frame and TestApp.Hot.SpinHotLoop's share
#                              (tests/speedscope/check_speedscope.py's reading of both formats).
#                              KEEP_TRACE=FILE keeps a copy of the trace.
#
#   Each converter runs ROUNDS times (default 3), alternating; /usr/bin/time gives wall time and
#   peak RSS; medians are printed with the ratios.
set -euo pipefail
: "${DOTMON_BIN:?}" "${DOTMON_TESTAPP_DIR:?}"
MODE=${1:-ndjson}
CPU_THREADS=${CPU_THREADS:-64}
CPU_SECONDS=${CPU_SECONDS:-28}
ROUNDS=${ROUNDS:-3}
GC_SECONDS=${GC_SECONDS:-7}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
TOOLS_DIR=${TOOLS_DIR:-$(dirname "$DOTMON_BIN")/tools}
[ -x "$TOOLS_DIR/dotnet-trace" ] ||
    "$DOTNET" tool install --tool-path "$TOOLS_DIR" dotnet-trace --version 10.0.750501 >/dev/null
bench_work dmbc

run() { # trace, name, command...: appends "trace name wall_s rss_kib"
    local trace=$1 name=$2; shift 2
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
    echo "$trace $name $(cat "$WORK/time")" >>"$WORK/results"
}

if [ "$MODE" = speedscope ]; then
    mkdir "$WORK/rt" && chmod 700 "$WORK/rt"
    bench_start_app "$WORK/rt"
    bench_start_dotmon "$WORK/rt"
    echo "hot-threads $CPU_THREADS $(((CPU_SECONDS + 3) * 1000))" >&3
    sleep 1
    f="$WORK/cpu.nettrace"
    curl -sf "http://127.0.0.1:$PORT/trace?pid=$APP_PID&profile=cpu-sampling&durationSeconds=$CPU_SECONDS" -o "$f"
    bench_stop
    echo "cpu $(stat -c %s "$f")" >"$WORK/sizes"
    for r in $(seq "$ROUNDS"); do
        run cpu dotmon "$DOTMON_BIN" convert "$f" --format speedscope -o "$WORK/dotmon.speedscope.json"
        run cpu dotnet-trace "$TOOLS_DIR/dotnet-trace" convert "$f" --format Speedscope -o "$WORK/ms.speedscope.json"
    done
    [ -z "${KEEP_TRACE:-}" ] || cp "$f" "$KEEP_TRACE"
    python3 - "$WORK" "$here/../tests/speedscope" <<'PY'
import glob, json, statistics, sys
w = sys.argv[1]
sys.path.insert(0, sys.argv[2])
from check_speedscope import HOT, exclusive_evented, exclusive_sampled, hot_thread  # noqa: E402
rows = [l.split() for l in open(f"{w}/results")]
size = int(open(f"{w}/sizes").read().split()[1])
ours = json.load(open(f"{w}/dotmon.speedscope.json"))
theirs = json.load(open(sorted(glob.glob(f"{w}/ms.speedscope*.json"))[0]))
samples = sum(len(p["samples"]) for p in ours["profiles"])
print(f"== cpu: {size / 1e6:.1f} MB trace, {samples} samples on {len(ours['profiles'])} threads")
for name, doc, ex in (("dotmon", ours, exclusive_sampled), ("dotnet-trace", theirs, exclusive_evented)):
    # dotmon weighs a sample by the sampling period, dotnet-trace (evented) by the time to the
    # thread's next sample: with a sampler slower than its period the totals differ, the spans not.
    total = sum(ex(doc, p)[1] for p in doc["profiles"])
    span = sum(p["endValue"] - p["startValue"] for p in doc["profiles"])
    top, share, head, hot_total = hot_thread(doc, ex)
    print(f"  {name:13s} output: {len(doc['profiles'])} threads spanning {span / 1000:.1f} s, {total / 1000:.1f} s "
          f"of weight; hot thread {hot_total:.0f} ms, top {top} ({share:.1f}% {HOT.rsplit('.', 1)[1]})")
med = {}
for n in ("dotmon", "dotnet-trace"):
    sel = [r for r in rows if r[1] == n]
    med[n] = (statistics.median(float(r[2]) for r in sel), statistics.median(int(r[3]) for r in sel))
    runs = ", ".join(f"{r[2]} s/{r[3]} KiB" for r in sel)
    print(f"  {n:13s} wall {med[n][0]:6.2f} s ({size / 1e6 / max(med[n][0], 1e-3):7.1f} MB/s in), "
          f"peak RSS {med[n][1]} KiB  [{runs}]")
dm, dt = med["dotmon"], med["dotnet-trace"]
print(f"  dotmon vs dotnet-trace: {dt[0] / max(dm[0], 1e-3):.1f}x faster, RSS {dm[1] / dt[1]:.3f}x")
PY
    exit 0
fi

# 1. the events trace
EVENTS=${EVENTS:-460000} TRACE_OUT="$WORK/events.nettrace" DOTMON_TRACECHECK=unused \
    BENCH_DECODE=unused bash "$here/bench_decode.sh" >/dev/null

# 2. the gc-verbose trace
mkdir "$WORK/rt" && chmod 700 "$WORK/rt"
bench_start_app "$WORK/rt"
bench_start_dotmon "$WORK/rt"
echo "churn 1000000" >&3
sleep 1
curl -sf "http://127.0.0.1:$PORT/trace?pid=$APP_PID&profile=gc-verbose&durationSeconds=$GC_SECONDS" \
    -o "$WORK/gc-verbose.nettrace"
bench_stop

for t in events gc-verbose; do
    f="$WORK/$t.nettrace"
    echo "$t $(stat -c %s "$f")" >>"$WORK/sizes"
    for r in $(seq "$ROUNDS"); do
        run "$t" dotmon-file "$DOTMON_BIN" convert "$f" --format ndjson -o "$WORK/out.ndjson"
        echo "$t $(wc -l <"$WORK/out.ndjson") $(stat -c %s "$WORK/out.ndjson")" >"$WORK/lines.$t"
        rm -f "$WORK/out.ndjson"
        run "$t" dotmon-null "$DOTMON_BIN" convert "$f" --format ndjson -o /dev/null
        run "$t" dotnet-trace "$TOOLS_DIR/dotnet-trace" convert "$f" --format speedscope -o "$WORK/out.speedscope.json"
        rm -f "$WORK"/out.speedscope*
    done
done
python3 - "$WORK" <<'PY'
import statistics, sys
w = sys.argv[1]
rows = [l.split() for l in open(f"{w}/results")]
sizes = dict((a, int(b)) for a, b in (l.split() for l in open(f"{w}/sizes")))
for t, size in sizes.items():
    _, lines, out = open(f"{w}/lines.{t}").read().split()
    print(f"== {t}: {size / 1e6:.1f} MB trace, {lines} NDJSON lines, {int(out) / 1e6:.1f} MB of NDJSON")
    med = {}
    for n in ("dotmon-file", "dotmon-null", "dotnet-trace"):
        sel = [r for r in rows if r[0] == t and r[1] == n]
        med[n] = (statistics.median(float(r[2]) for r in sel), statistics.median(int(r[3]) for r in sel))
        print(f"  {n:13s} wall {med[n][0]:6.2f} s ({size / 1e6 / max(med[n][0], 1e-3):7.1f} MB/s in), peak RSS {med[n][1]} KiB")
    dt = med["dotnet-trace"]
    for n in ("dotmon-file", "dotmon-null"):
        print(f"  {n} vs dotnet-trace: {dt[0] / max(med[n][0], 1e-3):.1f}x faster, RSS {med[n][1] / dt[1]:.3f}x")
PY
