#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# dotmon against Microsoft's own tools, interleaved in one run on one TestApp (issue 12):
#
#  trace  the same provider (DotMon-TestApp, the test app's `events` command: ~31 MB written at
#         ~8 MB/s), the same 16 MB runtime buffer, no rundown:
#           dotmon        GET /trace relayed to curl --limit-rate 1M (a slow client)
#           dotnet-trace  collect to a file (its own reader, as fast as the disk)
#         figures: events received and dropped (counted from the file by TraceEvent, and the
#         events the app wrote), collector CPU (utime+stime) and peak RSS
#  dump   a Full dump of the app holding DUMP_MB MB, ROUNDS+2 times each:
#           dotmon        GET /dump?type=Full to curl -o /dev/null (dotmon's own part), and to
#                         curl -o FILE in the same folder (end to end: a second copy on disk)
#           dotnet-dump   collect --type Full -o FILE
#         figures: wall time from request to the last byte, dotmon CPU per GB; with
#         DOTMON_BASE_BIN (an older dotmon) its wall time and CPU per GB in the same run too
#
# Every timed run starts from the same state: `sync` first, so the writeback of the previous
# run's files (a 1.27 GB dump written twice by the dotmon-file run) does not slow the next one.
# PARTS (default "trace dump") picks the parts to run.
#
# Usage: DOTMON_BIN=… DOTMON_TESTAPP_DIR=… DOTMON_TRACECHECK=… bench_peers.sh [rounds]
# (`make bench-peers` sets them). The tools are installed from NuGet into $TOOLS_DIR (default
# build/tools) on first use. Prints one line per run and a summary; nothing is asserted.
set -euo pipefail

ROUNDS=${1:-3}
DUMP_MB=${DUMP_MB:-1024}
EVENTS=${EVENTS:-150000}
PARTS=${PARTS:-trace dump}
: "${DOTMON_BIN:?}" "${DOTMON_TESTAPP_DIR:?}" "${DOTMON_TRACECHECK:?}"
TOOLS_DIR=${TOOLS_DIR:-$(dirname "$DOTMON_BIN")/tools}
DOTNET=${DOTNET_EXE:-$(command -v dotnet)}
export DOTNET_ROOT=${DOTNET_ROOT:-$(dirname "$(readlink -f "$DOTNET")")}
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

install_tool() {
    [ -x "$TOOLS_DIR/$1" ] || "$DOTNET" tool install --tool-path "$TOOLS_DIR" "$1" >/dev/null
}
install_tool dotnet-trace
install_tool dotnet-dump

WORK=$(mktemp -d /tmp/dmbXXXXXX)
APP_PID=""
DM_PID=""
cleanup() {
    [ -n "$DM_PID" ] && kill "$DM_PID" 2>/dev/null || true
    exec 3>&- 2>/dev/null || true
    [ -n "$APP_PID" ] && kill "$APP_PID" 2>/dev/null || true
    sleep 0.3
    rm -rf "$WORK"
}
trap cleanup EXIT
export TMPDIR=$WORK

cpu_ms() { awk '{print ($14 + $15) * 10}' "/proc/$1/stat"; } # utime+stime, 100 Hz ticks
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
now() { date +%s.%N; }
settle() { sync; sleep 0.5; } # no writeback of an earlier run's files under a timed run

# The app, driven through a FIFO on its stdin.
mkfifo "$WORK/app.in"
"$DOTMON_TESTAPP_DIR/TestApp" --no-stdin-exit --heartbeat-ms 0 <"$WORK/app.in" >"$WORK/app.out" 2>&1 &
APP_PID=$!
exec 3>"$WORK/app.in"
app_cmd() { # app_cmd "verb args" → waits for "ok verb"
    local verb=${1%% *} n
    n=$(grep -c "^ok $verb" "$WORK/app.out" || true)
    echo "$1" >&3
    while [ "$(grep -c "^ok $verb" "$WORK/app.out" || true)" -le "$n" ]; do sleep 0.05; done
}
while ! grep -q "^ready pid=" "$WORK/app.out"; do sleep 0.1; done

"$DOTMON_BIN" collect --no-auth --urls http://127.0.0.1:0 --metrics false >"$WORK/dm.out" 2>&1 &
DM_PID=$!
until PORT=$(grep -o 'Now listening on: http://127.0.0.1:[0-9]*' "$WORK/dm.out" | grep -o '[0-9]*$'); do
    sleep 0.05
done
until curl -sf "http://127.0.0.1:$PORT/processes" | grep -q "\"pid\":$APP_PID"; do sleep 0.1; done

count() { # file → "received lost" from TraceEvent
    "$DOTNET" "$DOTMON_TRACECHECK" "$1" | python3 -c '
import json, sys
j = json.load(sys.stdin)
print(j["providers"].get("DotMon-TestApp", 0), j["lost"])'
}

# ---- traces ----
BODY='{"Providers":[{"Name":"DotMon-TestApp","EventLevel":"Informational"}],"RequestRundown":false,"BufferSizeInMB":16}'
trace_dotmon() {
    local out=$WORK/dm.nettrace c0 t0 peak=0 r
    c0=$(cpu_ms "$DM_PID")
    rm -f "$WORK/h"
    curl -s --limit-rate 1M -D "$WORK/h" -H 'Content-Type: application/json' -d "$BODY" \
        "http://127.0.0.1:$PORT/trace?pid=$APP_PID&durationSeconds=-1" -o "$out" &
    local curl=$!
    until grep -qi '^location' "$WORK/h" 2>/dev/null; do sleep 0.05; done
    local op
    op=$(grep -i '^location' "$WORK/h" | tr -d '\r' | awk -F/ '{print $NF}')
    t0=$(now)
    app_cmd "events $EVENTS 100 4 8"
    curl -s -X DELETE "http://127.0.0.1:$PORT/operations/$op?stop=true" >/dev/null
    while kill -0 "$curl" 2>/dev/null; do
        r=$(rss_kb "$DM_PID"); [ "$r" -gt "$peak" ] && peak=$r
        sleep 0.1
    done
    local c1 t1 dropped
    c1=$(cpu_ms "$DM_PID"); t1=$(now)
    # The operation's figures come with its end, which may follow the last byte by a moment.
    dropped=-1
    for _ in $(seq 1 100); do
        dropped=$(curl -s "http://127.0.0.1:$PORT/operations/$op/details" |
            python3 -c 'import json,sys; print(json.load(sys.stdin).get("trace", {}).get("droppedEvents", -1))')
        [ "$dropped" != "-1" ] && break
        sleep 0.1
    done
    read -r got lost < <(count "$out")
    printf 'trace dotmon      : received %6d of %d, TraceEvent lost %6d, dotmon droppedEvents %6d; cpu %5d ms, peak RSS %6d KiB, %.1f s\n' \
        "$got" "$EVENTS" "$lost" "$dropped" "$((c1 - c0))" "$peak" "$(echo "$t1 - $t0" | bc)"
    echo "dotmon $((EVENTS - got)) $((c1 - c0)) $peak" >>"$WORK/trace.sum"
    rm -f "$out"
}
trace_dotnet_trace() {
    local out=$WORK/dt.nettrace peak=0 cpu=0 r c
    "$TOOLS_DIR/dotnet-trace" collect -p "$APP_PID" --providers DotMon-TestApp:0xFFFFFFFFFFFFFFFF:4 \
        --buffersize 16 -o "$out" >"$WORK/dt.log" 2>&1 &
    local dt=$!
    until grep -q "Process" "$WORK/dt.log" 2>/dev/null; do sleep 0.05; done
    sleep 0.5
    local t0 t1
    t0=$(now)
    app_cmd "events $EVENTS 100 4 8" &
    local writer=$!
    while kill -0 "$writer" 2>/dev/null; do
        r=$(rss_kb "$dt"); [ "$r" -gt "$peak" ] && peak=$r
        sleep 0.1
    done
    sleep 0.5
    c=$(cpu_ms "$dt"); cpu=$c # its CPU up to here (it is gone after the stop)
    kill -TERM "$dt" # (background jobs of a script ignore SIGINT)
    while kill -0 "$dt" 2>/dev/null; do sleep 0.05; done
    t1=$(now)
    read -r got lost < <(count "$out")
    printf 'trace dotnet-trace: received %6d of %d, TraceEvent lost %6d; cpu %5d ms, peak RSS %6d KiB, %.1f s\n' \
        "$got" "$EVENTS" "$lost" "$cpu" "$peak" "$(echo "$t1 - $t0" | bc)"
    echo "dotnet-trace $((EVENTS - got)) $cpu $peak" >>"$WORK/trace.sum"
    rm -f "$out"
}

# ---- dumps ----
dump_dotmon() { # pid port name output (a file in the same folder, or /dev/null)
    local bin_pid=$1 port=$2 name=$3 out=$4 c0 t0 t1 c1 size
    settle
    c0=$(cpu_ms "$bin_pid"); t0=$(now)
    size=$(curl -s "http://127.0.0.1:$port/dump?pid=$APP_PID&type=Full" -o "$out" -w '%{size_download}')
    t1=$(now); c1=$(cpu_ms "$bin_pid")
    printf 'dump %-13s: %10d bytes in %6.2f s, dotmon cpu %4d ms (%.0f ms/GB)\n' "$name" "$size" \
        "$(echo "$t1 - $t0" | bc)" "$((c1 - c0))" "$(echo "($c1 - $c0) * 1073741824 / $size" | bc -l)"
    echo "$name $(echo "$t1 - $t0" | bc) $((c1 - c0)) $size $ROUND" >>"$WORK/dump.sum"
    [ "$out" = /dev/null ] || rm -f "$out"
}
dump_dotnet_dump() {
    local out=$WORK/dd.dmp t0 t1 size
    settle
    t0=$(now)
    "$TOOLS_DIR/dotnet-dump" collect -p "$APP_PID" --type Full -o "$out" >/dev/null
    t1=$(now)
    size=$(stat -c %s "$out")
    printf 'dump %-13s: %10d bytes in %6.2f s\n' dotnet-dump "$size" "$(echo "$t1 - $t0" | bc)"
    echo "dotnet-dump $(echo "$t1 - $t0" | bc) 0 $size $ROUND" >>"$WORK/dump.sum"
    rm -f "$out"
}

echo "== traces: $EVENTS events (~$((EVENTS * 216 / 1000000)) MB) at ~8 MB/s, 16 MB buffer; dotmon's client at 1 MiB/s =="
: >"$WORK/trace.sum"
: >"$WORK/dump.sum"
has_part() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
if has_part trace; then
    for i in $(seq 1 "$ROUNDS"); do
        trace_dotmon
        trace_dotnet_trace
    done
fi

BASE_PID=""
BASE_PORT=""
if has_part dump && [ -n "${DOTMON_BASE_BIN:-}" ]; then
    "$DOTMON_BASE_BIN" collect --no-auth --urls http://127.0.0.1:0 --metrics false >"$WORK/base.out" 2>&1 &
    BASE_PID=$!
    until BASE_PORT=$(grep -o 'Now listening on: http://127.0.0.1:[0-9]*' "$WORK/base.out" | grep -o '[0-9]*$'); do
        sleep 0.05
    done
    until curl -sf "http://127.0.0.1:$BASE_PORT/processes" | grep -q "\"pid\":$APP_PID"; do sleep 0.1; done
fi
has_part dump && echo "== dumps: Full, app holding $DUMP_MB MB =="
has_part dump && app_cmd "alloc $DUMP_MB"
ROUND=0 # warm-up (page cache, createdump's first start): left out of the figures
has_part dump && dump_dotnet_dump >/dev/null
for i in $(seq 1 "$((ROUNDS + 2))"); do
    has_part dump || break
    ROUND=$i
    # Which of the two goes first alternates between rounds.
    if [ $((i % 2)) -eq 1 ]; then
        dump_dotmon "$DM_PID" "$PORT" dotmon /dev/null # dotmon's part: the client keeps nothing
        dump_dotnet_dump
    else
        dump_dotnet_dump
        dump_dotmon "$DM_PID" "$PORT" dotmon /dev/null
    fi
    dump_dotmon "$DM_PID" "$PORT" dotmon-file "$WORK/dm.dmp" # end to end: the client writes a file
    if [ -n "$BASE_PID" ]; then
        dump_dotmon "$BASE_PID" "$BASE_PORT" dotmon-base /dev/null
    fi
done
[ -n "$BASE_PID" ] && kill "$BASE_PID"

echo "== summary (medians) =="
python3 - "$WORK/trace.sum" "$WORK/dump.sum" <<'EOF'
import statistics, sys
tr = {}
for line in open(sys.argv[1]):
    n, dropped, cpu, rss = line.split()
    tr.setdefault(n, []).append((int(dropped), int(cpu), int(rss)))
med = lambda v: statistics.median(v)
for n, v in tr.items():
    print(f"trace {n:13s}: events missing {med([x[0] for x in v]):8.0f}, cpu {med([x[1] for x in v]):6.0f} ms, peak RSS {med([x[2] for x in v]):7.0f} KiB")
if "dotmon" in tr and "dotnet-trace" in tr:
    d, t = tr["dotmon"], tr["dotnet-trace"]
    print(f"trace ratios dotmon/dotnet-trace: cpu {med([x[1] for x in d]) / max(1, med([x[1] for x in t])):.2f}, peak RSS {med([x[2] for x in d]) / max(1, med([x[2] for x in t])):.2f}")
du = {}
rounds = {}
for line in open(sys.argv[2]):
    n, wall, cpu, size, rnd = line.split()
    if rnd == "0":
        continue
    du.setdefault(n, []).append((float(wall), int(cpu), int(size)))
    rounds.setdefault(rnd, {})[n] = float(wall)
for n, v in du.items():
    gb = med([x[2] for x in v]) / 2**30
    print(f"dump {n:13s}: wall {med([x[0] for x in v]):6.2f} s, cpu {med([x[1] for x in v]) / gb:6.0f} ms/GB")
for n in ("dotmon", "dotmon-file", "dotmon-base"):
    if n in du and "dotnet-dump" in du:
        print(f"dump wall ratio {n}/dotnet-dump: {med([x[0] for x in du[n]]) / med([x[0] for x in du['dotnet-dump']]):.2f}")
# Each dotmon run against the dotnet-dump run of the same round (the pairs are interleaved, so
# the machine's load of the moment weighs on both): the median and the range of those ratios.
for n in ("dotmon", "dotmon-file", "dotmon-base"):
    q = sorted(r[n] / r["dotnet-dump"] for r in rounds.values() if n in r and "dotnet-dump" in r)
    if q:
        print(f"dump paired ratio {n}/dotnet-dump over {len(q)} rounds: median {med(q):.2f}, range {q[0]:.2f}-{q[-1]:.2f}")
if "dotmon" in du and "dotmon-base" in du:
    c = lambda v: med([x[1] * 2**30 / x[2] for x in v])
    print(f"dump cpu per GB, dotmon/dotmon-base: {c(du['dotmon']) / max(1, c(du['dotmon-base'])):.2f}")
EOF
