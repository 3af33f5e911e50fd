#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GET /gcdump against `dotnet-gcdump collect` on the same test app with a large heap, in one run
# (issue 19). Nothing is asserted.
#
#   The app holds `heap-graph N M SIZE` (N + 1 holders, each with a byte[][] of M byte[SIZE]):
#   defaults N=3,000,000 M=1 SIZE=250, about 9 M objects and 1 GB of heap. dotmon runs with
#   GCDump:BufferSizeMB BUFFER_MB (default 1024, dotmon's and dotnet-gcdump's default; 256,
#   dotnet-monitor's, is too small for a walk that big, which then fails with 502). Each collector runs
#   ROUNDS times (default 3), alternating, against the same process:
#   - dotmon: wall time of the request (curl, the file to disk), and dotmon's memory: its VmHWM
#     reset before each request (clear_refs 5) and read after, minus its VmRSS before: the growth
#     a snapshot costs the sidecar (dotmon's whole peak is printed too);
#   - dotnet-gcdump collect: wall time and peak RSS of the tool's process (/usr/bin/time).
#   Medians are printed with the ratios, and the files' sizes and object counts (dotnet-gcdump
#   report) for both.
set -euo pipefail
: "${DOTMON_BIN:?}" "${DOTMON_TESTAPP_DIR:?}"
ROUNDS=${ROUNDS:-3}
N=${N:-3000000} M=${M:-1} SIZE=${SIZE:-250}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
TOOLS_DIR=${TOOLS_DIR:-$(dirname "$DOTMON_BIN")/tools}
[ -x "$TOOLS_DIR/dotnet-gcdump" ] ||
    "$DOTNET" tool install --tool-path "$TOOLS_DIR" dotnet-gcdump --version 10.0.750501 >/dev/null
bench_work dmbg
mkdir "$WORK/rt" && chmod 700 "$WORK/rt"
bench_start_app "$WORK/rt"
until grep -q "ready pid=" "$WORK/app.out"; do sleep 0.1; done
APP_PID=$(sed -n 's/.*ready pid=\([0-9]*\).*/\1/p' "$WORK/app.out" | head -1)
cfg="$WORK/dotmon.json"
echo "{\"GCDump\": {\"TimeoutSeconds\": 600, \"MaxNodes\": 100000000, \"BufferSizeMB\": ${BUFFER_MB:-1024}}}" >"$cfg"
PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
TMPDIR=$WORK/rt "$DOTMON_BIN" collect --no-auth --urls "http://127.0.0.1:$PORT" --metrics false \
    --configuration-file-path "$cfg" 2>"$WORK/dm.log" &
DM_PID=$!
until curl -sf "http://127.0.0.1:$PORT/processes" | grep -q "\"pid\":$APP_PID"; do sleep 0.1; done
echo "heap-graph $N $M $SIZE" >&3
until grep -q "ok heap-graph" "$WORK/app.out"; do sleep 0.2; done
heap_kb=$(awk '/VmRSS/ {print $2}' "/proc/$APP_PID/status")

kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$DM_PID/status"; }
for r in $(seq "$ROUNDS"); do
    before=$(kb VmRSS)
    echo 5 >"/proc/$DM_PID/clear_refs"
    read -r code t < <(curl -s -o "$WORK/dotmon.gcdump" -w '%{http_code} %{time_total}\n' \
        "http://127.0.0.1:$PORT/gcdump?pid=$APP_PID")
    if [ "$code" != 200 ]; then
        echo "GET /gcdump: $code $(head -c 400 "$WORK/dotmon.gcdump")" >&2
        tail -5 "$WORK/dm.log" >&2
        exit 1
    fi
    echo "dotmon $t $(($(kb VmHWM) - before)) $(kb VmHWM)" >>"$WORK/results"
    TMPDIR=$WORK/rt /usr/bin/time -f "%e %M" -o "$WORK/time" \
        "$TOOLS_DIR/dotnet-gcdump" collect -p "$APP_PID" -o "$WORK/tool.gcdump" >/dev/null
    echo "dotnet-gcdump $(cat "$WORK/time") $(cut -d' ' -f2 "$WORK/time")" >>"$WORK/results"
done
rep() { TMPDIR=$WORK/rt "$TOOLS_DIR/dotnet-gcdump" report "$1" | awk '/GC Heap objects/ {print $1}'; }
echo "dotmon $(stat -c %s "$WORK/dotmon.gcdump") $(rep "$WORK/dotmon.gcdump")" >"$WORK/files"
echo "dotnet-gcdump $(stat -c %s "$WORK/tool.gcdump") $(rep "$WORK/tool.gcdump")" >>"$WORK/files"
python3 - "$WORK" "$heap_kb" "$N" "$M" "$SIZE" <<'PY'
import statistics, sys
w, heap_kb, n, m, size = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]
rows = [l.split() for l in open(f"{w}/results")]
print(f"== heap-graph {n} {m} {size}: the app's RSS {heap_kb / 1024:.0f} MiB")
for l in open(f"{w}/files"):
    name, b, objs = l.split()
    print(f"  {name:13s} file {int(b) / 1e6:7.1f} MB, {objs} GC heap objects (dotnet-gcdump report)")
med = {}
for name in ("dotmon", "dotnet-gcdump"):
    sel = [r for r in rows if r[0] == name]
    med[name] = tuple(statistics.median(float(r[i]) for r in sel) for i in (1, 2, 3))
    what = "RSS growth" if name == "dotmon" else "peak RSS"
    extra = f" (its whole peak {med[name][2] / 1024:.0f} MiB)" if name == "dotmon" else ""
    print(f"  {name:13s} wall {med[name][0]:6.2f} s, {what} {med[name][1] / 1024:7.1f} MiB{extra}"
          f"   [rounds: {', '.join(r[1] + ' s/' + str(int(r[2]) // 1024) + ' MiB' for r in sel)}]")
d, t = med["dotmon"], med["dotnet-gcdump"]
print(f"  dotmon / dotnet-gcdump: wall {d[0] / t[0]:.2f}x, memory {d[1] / t[1]:.2f}x")
PY
