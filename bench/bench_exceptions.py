#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The app's throughput with dotmon's exceptions history on, against it off and against a
dotnet-trace session with the same keyword, while the app throws 10,000 exceptions a second
(issue 35's benchmark). Nothing is asserted.

  bench_exceptions.py [--rate 10000] [--ms 3000] [--rounds 5]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH), DOTMON_TOOLS_DIR
(where dotnet-trace is, or is installed; default: the build folder's tools/ beside DOTMON_BIN).

One test app; each round runs every configuration once, in a rotated order:
  - off: dotmon watching the app with the history off (no session in the app);
  - dotmon: dotmon with InProcessFeatures:Exceptions:Enabled (its standing session: the runtime's
    Exception keyword at level Error, stacks on);
  - dotnet-trace: `dotnet-trace collect --providers Microsoft-Windows-DotNETRuntime:0x8000:2` on
    the app (the same events, written to a file).
In each the app runs `work-throwing <ms> <rate>`: its work loop (tests/app, `work`) on one thread
while another throws and catches <rate> exceptions a second. Reported: the work rate (rounds per
ms) and the exceptions actually thrown, medians (min-max), and each observer's rate over off's in
the same round; dotmon's history counts (kept, added, lost) and RSS after its last round.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, dotnet_tool, free_port, get_json, start_dotmon, status_kib, stop, wait_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import DotnetTrace, spread  # noqa: E402

DOTNET_TRACE_VERSION = "10.0.750501"
PROVIDERS = "Microsoft-Windows-DotNETRuntime:0x8000:2"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def work(app, ms, rate):
    reply = app.command(f"work-throwing {ms} {rate}")
    f = dict(kv.split("=", 1) for kv in reply.split()[2:])
    return int(f["ops"]) / float(f["ms"]), int(f["thrown"]) * 1000 / float(f["ms"])


def measure(tmp, app, label, a, tool, last):
    log = open(os.path.join(tmp, f"{label}.log"), "a")
    if label == "dotnet-trace":
        with DotnetTrace(tool, app.pid, PROVIDERS, os.path.join(tmp, "dt.nettrace"), log):
            rate = work(app, a.ms, a.rate)
        log.close()
        return rate
    port = free_port()
    env = {"DotnetMonitor_InProcessFeatures__Exceptions__Enabled": "true"} if label == "dotmon" else {}
    dm = start_dotmon(tmp, port, log, [app.pid], env=env)
    try:
        if label == "dotmon":
            wait_for(lambda: ((get_json(port, "/info?extras=true")[1] or {}).get("exceptions") or [{}])[0]
                     .get("state") == "running", 30)
        time.sleep(0.5)
        rate = work(app, a.ms, a.rate)
        if label == "dotmon":
            time.sleep(0.5)
            last["history"] = ((get_json(port, "/info?extras=true")[1] or {}).get("exceptions") or [{}])[0]
            last["rss"] = status_kib(dm.pid)
    finally:
        stop(dm, 15)
        log.close()
    return rate


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=10000)
    ap.add_argument("--ms", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    os.environ.setdefault("DOTMON_TOOLS_DIR", os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools"))
    tool = dotnet_tool("dotnet-trace", DOTNET_TRACE_VERSION)
    labels = ["off", "dotmon"] + (["dotnet-trace"] if tool else [])
    tmp = tempfile.mkdtemp(prefix="bench-exceptions-")
    os.chmod(tmp, 0o700)
    app = None
    got = {k: [] for k in labels}
    ratios = {k: [] for k in labels if k != "off"}
    last = {}
    try:
        app = App(tmp)
        work(app, 1000, a.rate)  # warm-up: JIT, tiering
        for r in range(a.rounds):
            order = labels[r % len(labels):] + labels[:r % len(labels)]
            pair = {k: measure(tmp, app, k, a, tool, last) for k in order}
            say(f"round {r + 1}: " + ", ".join(f"{k} {v[0]:.1f} rounds/ms {v[1]:.0f} exc/s" for k, v in pair.items()))
            for k, v in pair.items():
                got[k].append(v)
                if k != "off":
                    ratios[k].append(v[0] / pair["off"][0])
    finally:
        if app is not None:
            app.kill()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"The test app's work loop for {a.ms} ms while another thread throws and catches {a.rate} exceptions/s; "
          f"{a.rounds} rounds, the configurations' order rotating. Median (min-max).")
    print()
    print("| observer | work rounds/ms | exceptions/s thrown | work vs off, same round |")
    print("| --- | --- | --- | --- |")
    names = {"off": "none (dotmon, history off)", "dotmon": "dotmon, exceptions history on",
             "dotnet-trace": f"dotnet-trace {DOTNET_TRACE_VERSION}, {PROVIDERS}"}
    for k in labels:
        print(f"| {names[k]} | {spread([v[0] for v in got[k]], '{:.1f}')} | {spread([v[1] for v in got[k]], '{:.0f}')} | "
              f"{spread(ratios[k], '{:.2f}x') if k in ratios else '1'} |")
    h = last.get("history", {})
    print()
    print(f"dotmon after its last round: {h.get('kept')} kept, {h.get('added')} added in all, {h.get('lost')} lost by the "
          f"runtime, {h.get('bytes')} bytes held; RSS {last.get('rss', 0) / 1024:.1f} MB."
          + ("" if tool else " dotnet-trace could not be installed: no peer baseline."))
    return 0


if __name__ == "__main__":
    sys.exit(main())
