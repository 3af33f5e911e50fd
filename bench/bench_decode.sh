#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Decoder throughput on a large real trace (issue 15), dotmon's decoder against TraceEvent on the
# same file, in one run. Nothing is asserted.
#
#   1. A real trace from the test app: its EventSource DotMon-TestApp (the `events` command:
#      self-describing events with an integer, a string and a blob) plus the runtime's
#      System.Runtime EventCounters and meter at 1 s, EVENTS events (default 2,000,000), collected
#      by dotmon into a file.
#   2. build/bench/bench_decode FILE: the block reader alone, plus every payload decoded by its
#      field list, and the metrics decoder (5 rounds each: every round, the median, min-max).
#   3. tests/tools/tracecheck (TraceEvent's EventPipeEventSource, dispatching every event) on the
#      same file: wall time of the whole tool and of an empty run on a tiny file (its start-up),
#      so its reading rate is (size) / (time - start-up).
# With TRACE_OUT=PATH it only writes the trace there (bench_convert.sh uses it).
set -euo pipefail
EVENTS=${EVENTS:-2000000}
: "${DOTMON_BIN:?}" "${DOTMON_TESTAPP_DIR:?}" "${DOTMON_TRACECHECK:?}" "${BENCH_DECODE:?}"
. "$(dirname "$0")/lib.sh"
bench_work dmbd
bench_start_app "$WORK"
bench_start_dotmon "$WORK"
BODY='{"Providers":[{"Name":"DotMon-TestApp","EventLevel":"Verbose","Keywords":"0xFFFFFFFFFFFFFFFF"},
 {"Name":"System.Runtime","EventLevel":"Informational","Keywords":"0","Arguments":{"EventCounterIntervalSec":"1"}},
 {"Name":"System.Diagnostics.Metrics","EventLevel":"Informational","Keywords":"0x2",
  "Arguments":{"SessionId":"bench","Metrics":"System.Runtime","RefreshInterval":"1"}}],
 "RequestRundown":false,"BufferSizeInMB":256}'
curl -s -D "$WORK/h" -H 'Content-Type: application/json' -d "$BODY" \
    "http://127.0.0.1:$PORT/trace?pid=$APP_PID&durationSeconds=-1" -o "$WORK/big.nettrace" &
CURL=$!
until grep -qi '^location:' "$WORK/h" 2>/dev/null; do sleep 0.1; done
op=$(sed -n 's/^[Ll]ocation: .*\/operations\/\([0-9a-f-]*\).*/\1/p' "$WORK/h" | tr -d '\r')
echo "events $EVENTS 100 2 0" >&3
until grep -q "ok events" "$WORK/app.out"; do sleep 0.2; done
sleep 2
curl -s -X DELETE "http://127.0.0.1:$PORT/operations/$op?stop=true" >/dev/null
wait "$CURL"
SIZE=$(stat -c %s "$WORK/big.nettrace")
if [ -n "${TRACE_OUT:-}" ]; then   # bench_convert.sh keeps the file and stops here
    cp "$WORK/big.nettrace" "$TRACE_OUT"
    exit 0
fi
echo "== a real trace of $((SIZE / 1000000)) MB ($EVENTS DotMon-TestApp events, System.Runtime counters and meter)"
"$BENCH_DECODE" "$WORK/big.nettrace" 5
printf 'x' >"$WORK/tiny.nettrace"
t0=$(date +%s.%N); "$DOTNET" "$DOTMON_TRACECHECK" "$WORK/tiny.nettrace" >/dev/null 2>&1 || true; t1=$(date +%s.%N)
out=$("$DOTNET" "$DOTMON_TRACECHECK" "$WORK/big.nettrace"); t2=$(date +%s.%N)
python3 - "$SIZE" "$t0" "$t1" "$t2" "$out" <<'PY'
import json, sys
size, t0, t1, t2, out = int(sys.argv[1]), *map(float, sys.argv[2:5]), sys.argv[5]
j = json.loads(out.strip().splitlines()[-1])
start, whole = t1 - t0, t2 - t1
print(f"TraceEvent (tracecheck): {whole:.2f} s in all, start-up {start:.2f} s; reading "
      f"{size / 1e6 / max(whole - start, 1e-3):.1f} MB/s ({j.get('events')} events)")
PY
