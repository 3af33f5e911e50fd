#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Memory that comes back (issue 30 item 2): dotmon's RSS at idle, during and after each kind of
request, and some seconds later, against idle. Nothing is asserted.

  bench_memory.py [--rounds 1] [--gcdumps 8] [--objects 1000000] [--later 20] [--trace-bytes 2G]
                  [--skip trace,dump,logs,livemetrics] [--metrics]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT; TRACE_PRODUCER (bench's
trace_producer) for the trace row (skipped without it); DOTMON_BASE_BIN (optional): an older
dotmon run through the same sequence, alternating with DOTMON_BIN round by round (A B A B ...),
so that the machine's noise hits both.

One test app (tests/app) holding about --objects objects (`heap-graph N/2 0 0`: a holder and its
empty array each) and, for the trace row, bench's trace_producer (a fake runtime streaming a valid
nettrace of --trace-bytes per session), both in a private TMPDIR for the whole run. Per round and
binary, a fresh dotmon watches them (--no-auth, no metrics unless --metrics). Its idle RSS is read
once it has listed both processes and RSS stopped moving. Then, in order: --gcdumps consecutive
GET /gcdump, RSS --later s on; a --trace-bytes /trace, a Full /dump, a 3 s /logs and a 3 s
/livemetrics; RSS --later s on. For each request: the peak RSS while it ran (VmHWM, reset to the
current RSS just before with clear_refs 5), the RSS once the answer ended and RSS stopped falling,
that against idle, and the anonymous part (smaps_rollup Anonymous: heap and stacks; the rest is
mapped files: code, libraries). Printed: one markdown table, medians over the rounds with min-max
when there are several; with DOTMON_BASE_BIN the baseline's columns follow.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, fetch, free_port, start_dotmon, status_kib, stop  # noqa: E402


def settled(pid, seconds=5.0, every=0.25):
    """RSS (KiB) once it has not fallen for a second (the pool may free after the answer ended),
    for up to seconds."""
    deadline = time.time() + seconds
    last, still = status_kib(pid), 0.0
    while time.time() < deadline and still < 1.0:
        time.sleep(every)
        now = status_kib(pid)
        still = still + every if now >= last else 0.0
        last = min(last, now)
    return status_kib(pid)


def anon_kib(pid):
    """smaps_rollup's Anonymous (KiB), or 0."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak(pid):
    """Resets VmHWM to the current RSS (clear_refs 5); False when not allowed."""
    try:
        with open(f"/proc/{pid}/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_once(binary, args, tmp, app, producer_pid):
    """One dotmon through the whole sequence: [(row name, status, peak, rss, anon)], idle first."""
    skip = args.skip_set
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    out = os.path.join(tmp, "body")
    port = free_port()
    pids = [app.pid] + ([producer_pid] if producer_pid else [])
    dm = None
    rows = []
    try:
        os.environ["DOTMON_BIN"] = binary  # start_dotmon runs $DOTMON_BIN
        dm = start_dotmon(tmp, port, log, pids, args=("--metrics", "true") if args.metrics else ())
        time.sleep(1.0)
        rows.append(("idle", "", None, settled(dm.pid), anon_kib(dm.pid)))

        def request(what, path):
            reset = reset_peak(dm.pid)
            t0 = time.time()
            st, _, n = fetch(f"http://127.0.0.1:{port}{path}", timeout=600, dest=out)
            secs = time.time() - t0
            if os.path.exists(out):
                os.unlink(out)
            peak = status_kib(dm.pid, "VmHWM") if reset else None
            rss = settled(dm.pid)
            size = n if isinstance(n, int) else len(n)
            rows.append((what, st, peak, rss, anon_kib(dm.pid)))
            print(f"  {what}: {st}, {size / 1e6:.1f} MB in {secs:.1f} s, peak {peak} KiB, after {rss} KiB",
                  file=sys.stderr, flush=True)

        def later(what):
            time.sleep(args.later)
            rows.append((what, "", None, status_kib(dm.pid), anon_kib(dm.pid)))

        for i in range(args.gcdumps):
            request(f"gcdump {i + 1}", f"/gcdump?pid={app.pid}")
        later(f"{args.gcdumps} gcdumps, {args.later:g} s later")
        if producer_pid:
            request(f"trace {args.trace_bytes}", f"/trace?pid={producer_pid}&durationSeconds=600")
        if "dump" not in skip:
            request("dump Full", f"/dump?pid={app.pid}&type=Full")
        if "logs" not in skip:
            request("logs 3 s", f"/logs?pid={app.pid}&durationSeconds=3")
        if "livemetrics" not in skip:
            request("livemetrics 3 s", f"/livemetrics?pid={app.pid}&durationSeconds=3")
        later(f"all, {args.later:g} s later")
    finally:
        stop(dm)
        log.close()
    return rows


def fmt(values, signed=False):
    """Median, with min-max when there are several."""
    values = [v for v in values if v is not None]
    if not values:
        return ""
    f = "{:+,.0f}" if signed else "{:,.0f}"
    med = f.format(statistics.median(values))
    if len(values) == 1 or min(values) == max(values):
        return med
    return f"{med} ({f.format(min(values))} to {f.format(max(values))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--gcdumps", type=int, default=8)
    ap.add_argument("--objects", type=int, default=1000000)
    ap.add_argument("--later", type=float, default=20.0)
    ap.add_argument("--trace-bytes", default="2G")
    ap.add_argument("--skip", default="", help="comma-separated: trace,dump,logs,livemetrics")
    ap.add_argument("--metrics", action="store_true", help="dotmon with --metrics true (its default)")
    args = ap.parse_args()
    args.skip_set = set(filter(None, args.skip.split(",")))
    producer_bin = os.environ.get("TRACE_PRODUCER")
    bins = [("dotmon", os.environ["DOTMON_BIN"])]
    if os.environ.get("DOTMON_BASE_BIN"):
        bins.append(("base", os.environ["DOTMON_BASE_BIN"]))

    tmp = tempfile.mkdtemp(prefix="dmmem")
    os.chmod(tmp, 0o700)
    app, prod, producer_pid = None, None, 0
    results = {name: [] for name, _ in bins}
    try:
        app = App(tmp)
        reply = app.command(f"heap-graph {args.objects // 2} 0 0")
        if not reply.startswith("ok"):
            raise RuntimeError(f"heap-graph: {reply}")
        if producer_bin and "trace" not in args.skip_set:
            prod = subprocess.Popen([producer_bin, "--dir", tmp, "--bytes", args.trace_bytes],
                                    stdout=subprocess.PIPE, text=True)
            producer_pid = int(prod.stdout.readline().split("pid=")[1].split()[0])
        for r in range(args.rounds):
            for name, binary in bins:
                print(f"round {r + 1}, {name} ({binary})", file=sys.stderr, flush=True)
                results[name].append(run_once(binary, args, tmp, app, producer_pid))
    finally:
        if app is not None:
            app.kill()
        if prod is not None:
            stop(prod, 5)
        subprocess.run(["rm", "-rf", tmp], check=False)

    print(f"{args.objects:,}-object heap, {args.rounds} round(s)"
          + (", dotmon and base alternating" if len(bins) > 1 else "") + "; KiB, medians (min to max)")
    print()
    head = "| request | status |"
    line = "|---|---|"
    for name, _ in bins:
        head += f" {name}: peak during | {name}: RSS after | {name}: after - idle | {name}: anonymous |"
        line += "---:|---:|---:|---:|"
    print(head)
    print(line)
    first = results[bins[0][0]][0]
    for i, (what, st, *_rest) in enumerate(first):
        cells = f"| {what} | {st} |"
        for name, _ in bins:
            runs = results[name]
            idle = [run[0][3] for run in runs]
            cells += (f" {fmt([run[i][2] for run in runs])} | {fmt([run[i][3] for run in runs])} |"
                      f" {fmt([run[i][3] - idle[k] for k, run in enumerate(runs)] if i else [], True)} |"
                      f" {fmt([run[i][4] for run in runs])} |")
        print(cells)
    return 0


if __name__ == "__main__":
    sys.exit(main())
