#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `dotmon convert --format ndjson` against `dotnet-trace convert` on the same ~100 MB real trace,
# in one run (issue 16). Nothing is asserted.
#
#   The trace: bench_decode.sh's (the test app's DotMon-TestApp events, EVENTS of them, default
#   460,000 ≈ 100 MB, plus System.Runtime counters and meter), collected by dotmon.
#   Each converter runs ROUNDS times (default 3), alternating; /usr/bin/time gives wall time and
#   peak RSS; the medians are printed with the ratios. dotnet-trace convert's formats
#   (speedscope, chromium) both go through TraceEvent's TraceLog; speedscope is measured.
set -euo pipefail
: "${DOTMON_BIN:?}" "${DOTMON_TESTAPP_DIR:?}"
ROUNDS=${ROUNDS:-3}
DOTNET=${DOTNET_EXE:-$(command -v dotnet)}
export DOTNET_ROOT=${DOTNET_ROOT:-$(dirname "$(readlink -f "$DOTNET")")}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
TOOLS_DIR=${TOOLS_DIR:-$(dirname "$DOTMON_BIN")/tools}
[ -x "$TOOLS_DIR/dotnet-trace" ] || "$DOTNET" tool install --tool-path "$TOOLS_DIR" dotnet-trace >/dev/null
WORK=$(mktemp -d /tmp/dmbcXXXXXX)
trap 'rm -rf "$WORK"' EXIT
here=$(cd "$(dirname "$0")" && pwd)
EVENTS=${EVENTS:-460000} TRACE_OUT="$WORK/t.nettrace" DOTMON_TRACECHECK=unused BENCH_DECODE=unused \
    bash "$here/bench_decode.sh" >/dev/null
SIZE=$(stat -c %s "$WORK/t.nettrace")
echo "== $((SIZE / 1000000)) MB trace, $ROUNDS rounds"
run() { # name, command...: prints "wall_s rss_kib"
    local name=$1; shift
    /usr/bin/time -f "%e %M" -o "$WORK/time" "$@" >/dev/null 2>"$WORK/err" || { cat "$WORK/err" >&2; return 1; }
    echo "$name $(cat "$WORK/time")" >>"$WORK/results"
}
for r in $(seq "$ROUNDS"); do
    run dotmon "$DOTMON_BIN" convert "$WORK/t.nettrace" --format ndjson -o "$WORK/out.ndjson"
    lines=$(wc -l <"$WORK/out.ndjson")
    rm -f "$WORK/out.ndjson"
    run dotnet-trace "$TOOLS_DIR/dotnet-trace" convert "$WORK/t.nettrace" --format speedscope -o "$WORK/out.speedscope.json"
    rm -f "$WORK"/out.speedscope*
done
python3 - "$WORK/results" "$SIZE" "$lines" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
size, lines = int(sys.argv[2]), int(sys.argv[3])
med = {n: (statistics.median(float(r[1]) for r in rows if r[0] == n),
           statistics.median(int(r[2]) for r in rows if r[0] == n)) for n in ("dotmon", "dotnet-trace")}
for n, (w, m) in med.items():
    print(f"{n:13s} wall {w:6.2f} s ({size / 1e6 / w:7.1f} MB/s), peak RSS {m} KiB")
print(f"dotmon convert: {lines} NDJSON lines; ratios dotmon/dotnet-trace: wall {med['dotmon'][0] / med['dotnet-trace'][0]:.3f}x, "
      f"RSS {med['dotmon'][1] / med['dotnet-trace'][1]:.3f}x")
PY
