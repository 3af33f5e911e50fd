#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Memory that comes back (issue 30 item 2): dotmon's RSS at idle, after each kind of request, and
some seconds later, against idle. Nothing is asserted.

  bench_memory.py [--gcdumps 8] [--objects 1000000] [--later 20] [--trace-bytes 2G] [--skip ...]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT; TRACE_PRODUCER (bench's
trace_producer) for the 2 GB trace row (skipped without it).

One test app (tests/app) holding about --objects objects (`heap-graph N/2 0 0`: a holder and its
empty array each) and, for the trace row, bench's trace_producer (a fake runtime streaming a valid
nettrace of --trace-bytes), both in a private TMPDIR, and dotmon watching them (--no-auth, no
metrics). dotmon's idle RSS is read once it has listed both processes and stopped moving. Then, in
order: --gcdumps consecutive GET /gcdump (RSS after each answer has ended and settled), then one
each of a --trace-bytes /trace from the producer, a Full /dump, /logs and /livemetrics (a few
seconds each), RSS settled after each. After the gcdump sequence and at the end, RSS again
--later seconds on. Printed: a markdown table of RSS (KiB) and its difference from idle, and the
idle process's smaps_rollup (Rss, Private_Dirty, Anonymous) at the start and at the end.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, fetch, free_port, start_dotmon, status_kib, stop  # noqa: E402


def settled(pid, seconds=5.0, every=0.25):
    """RSS (KiB) once it has not fallen for a second (work on the pool may free after the answer
    ended), for up to seconds."""
    deadline = time.time() + seconds
    last, still = status_kib(pid), 0.0
    while time.time() < deadline and still < 1.0:
        time.sleep(every)
        now = status_kib(pid)
        still = still + every if now >= last else 0.0
        last = min(last, now)
    return status_kib(pid)


def rollup(pid):
    """Rss, Private_Dirty and Anonymous (KiB) of /proc/PID/smaps_rollup."""
    out = {}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k, _, rest = line.partition(":")
                if k in ("Rss", "Private_Dirty", "Anonymous"):
                    out[k] = int(rest.split()[0])
    except OSError:
        pass
    return out


def reset_peak(pid):
    """Resets VmHWM to the current RSS (clear_refs 5); False when not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def request(port, path, dest, timeout=600):
    """GET path with the body to the file dest; (status, bytes, seconds)."""
    t0 = time.time()
    st, _, n = fetch(f"http://127.0.0.1:{port}{path}", timeout=timeout, dest=dest)
    if os.path.exists(dest):
        os.unlink(dest)
    return st, n if isinstance(n, int) else len(n), time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gcdumps", type=int, default=8)
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--heap", default="", help="the app's heap-graph N M SIZE instead of --objects")
    ap.add_argument("--later", type=float, default=20.0)
    ap.add_argument("--trace-bytes", default="2G")
    ap.add_argument("--skip", default="", help="comma-separated: trace,dump,logs,livemetrics")
    ap.add_argument("--metrics", action="store_true", help="dotmon with --metrics true (its default)")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    producer_bin = os.environ.get("TRACE_PRODUCER")
    if not producer_bin:
        skip.add("trace")

    tmp = tempfile.mkdtemp(prefix="dmmem")
    os.chmod(tmp, 0o700)
    out = os.path.join(tmp, "body")
    app, dm, prod = None, None, None
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    rows = []
    try:
        app = App(tmp)
        reply = app.command(f"heap-graph {args.heap or f'{args.objects // 2} 0 0'}")
        if not reply.startswith("ok"):
            raise RuntimeError(f"heap-graph: {reply}")
        pids = [app.pid]
        if "trace" not in skip:
            prod = subprocess.Popen([producer_bin, "--dir", tmp, "--bytes", args.trace_bytes],
                                    stdout=subprocess.PIPE, text=True)
            line = prod.stdout.readline()
            pids.append(int(line.split("pid=")[1].split()[0]))
        port = free_port()
        dm = start_dotmon(tmp, port, log, pids, args=("--metrics", "true") if args.metrics else ())
        time.sleep(1.0)
        idle = settled(dm.pid)
        idle_roll = rollup(dm.pid)
        rows.append(("idle", 0, "", idle, idle_roll.get("Anonymous", 0), 0))

        def row(what, path):
            reset = reset_peak(dm.pid)
            st, n, secs = request(port, path, out)
            peak = status_kib(dm.pid, "VmHWM") if reset else 0
            rss = settled(dm.pid)
            rows.append((what, st, f"{n / 1e6:.1f} MB in {secs:.1f} s", rss, rollup(dm.pid).get("Anonymous", 0),
                         peak))
            print(f"{what}: {st} {n} bytes {secs:.1f} s, RSS {rss} KiB", file=sys.stderr, flush=True)

        for i in range(args.gcdumps):
            row(f"gcdump {i + 1}", f"/gcdump?pid={app.pid}")
        time.sleep(args.later)
        rows.append((f"gcdumps, {args.later:.0f} s later", 0, "", status_kib(dm.pid), rollup(dm.pid).get("Anonymous", 0), 0))
        if "trace" not in skip:
            row(f"trace {args.trace_bytes}", f"/trace?pid={pids[1]}&durationSeconds=600")
        if "dump" not in skip:
            row("dump Full", f"/dump?pid={app.pid}&type=Full")
        if "logs" not in skip:
            row("logs 3 s", f"/logs?pid={app.pid}&durationSeconds=3")
        if "livemetrics" not in skip:
            row("livemetrics 3 s", f"/livemetrics?pid={app.pid}&durationSeconds=3")
        time.sleep(args.later)
        rows.append((f"all, {args.later:.0f} s later", 0, "", status_kib(dm.pid), rollup(dm.pid).get("Anonymous", 0), 0))
        end_roll = rollup(dm.pid)
    finally:
        if app is not None:
            app.kill()
        if prod is not None:
            stop(prod, 5)
        stop(dm)
        log.close()
        subprocess.run(["rm", "-rf", tmp], check=False)

    print("| request | status | answer | peak RSS during KiB | RSS after KiB | after vs idle KiB | anonymous KiB |")
    print("|---|---|---|---:|---:|---:|---:|")
    for what, st, ans, rss, anon, peak in rows:
        print(f"| {what} | {st or ''} | {ans} | {f'{peak:,}' if peak else ''} | {rss:,} | {rss - idle:+,} | {anon:,} |")
    print()
    print("smaps_rollup KiB (Rss / Private_Dirty / Anonymous): idle "
          f"{idle_roll.get('Rss')} / {idle_roll.get('Private_Dirty')} / {idle_roll.get('Anonymous')}, end "
          f"{end_roll.get('Rss')} / {end_roll.get('Private_Dirty')} / {end_roll.get('Anonymous')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
