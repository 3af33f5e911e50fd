# SPDX-License-Identifier: MIT
# The prelude of the shell benchmarks (bench_decode.sh, bench_convert.sh), sourced after
# `set -euo pipefail`: the .NET root, a private work folder, the test app driven over a FIFO and
# dotmon watching it, and their cleanup on exit.
#
#   bench_work PREFIX     WORK = a new folder /tmp/PREFIXxxxxxx (mode 0700), removed on exit
#                         together with the app and dotmon if they still run
#   bench_start_app DIR   the test app (DOTMON_TESTAPP_DIR) with TMPDIR=DIR; its stdin is the FIFO
#                         $WORK/in, written through fd 3 (`echo cmd >&3`); output in $WORK/app.out;
#                         sets APP_PID
#   bench_start_dotmon DIR
#                         dotmon collect --no-auth --metrics false on a free loopback port with
#                         TMPDIR=DIR, standard error in $WORK/dm.log; sets PORT and DM_PID and
#                         returns once /processes lists APP_PID
#   bench_stop            ends dotmon and the app now (SIGTERM) and waits for them

DOTNET=${DOTNET_EXE:-$(command -v dotnet)}
export DOTNET_ROOT=${DOTNET_ROOT:-$(dirname "$(readlink -f "$DOTNET")")}
APP_PID="" DM_PID="" PORT=""

bench_cleanup() {
    [ -n "$DM_PID" ] && kill "$DM_PID" 2>/dev/null || true
    exec 3>&- 2>/dev/null || true
    [ -n "$APP_PID" ] && kill "$APP_PID" 2>/dev/null || true
    rm -rf "$WORK"
}

bench_work() {
    WORK=$(mktemp -d "/tmp/${1}XXXXXX")
    trap bench_cleanup EXIT
    chmod 700 "$WORK"
}

bench_start_app() {
    mkfifo "$WORK/in"
    TMPDIR=$1 "$DOTMON_TESTAPP_DIR/TestApp" --no-stdin-exit <"$WORK/in" >"$WORK/app.out" 2>&1 &
    APP_PID=$!
    exec 3>"$WORK/in"
}

bench_start_dotmon() {
    PORT=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
    TMPDIR=$1 "$DOTMON_BIN" collect --no-auth --urls "http://127.0.0.1:$PORT" --metrics false 2>"$WORK/dm.log" &
    DM_PID=$!
    until curl -sf "http://127.0.0.1:$PORT/processes" | grep -q "\"pid\":$APP_PID"; do sleep 0.1; done
}

bench_stop() {
    kill "$DM_PID" "$APP_PID" 2>/dev/null || true
    wait "$DM_PID" "$APP_PID" 2>/dev/null || true
    DM_PID="" APP_PID=""
}
