#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What a pre-trigger ring costs the app (issue 18): the test app's own work rate with a gc-verbose
ring running, against no session and against `dotnet-trace collect` with the same providers
writing to disk, in one run. Nothing is asserted; not part of `make test`.

  bench_ring_app.py [--rounds 5] [--work-ms 5000]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT; TOOLS_DIR (default: beside
DOTMON_BIN, tools/) gets dotnet-trace from NuGet if it is not there.

One test app, its `work <ms>` command (single-threaded rounds of number formatting and parsing into
fresh strings and arrays: about 150 gen0 GCs a second, so GC events and an AllocationTick every
100 KB). gc-verbose = Microsoft-Windows-DotNETRuntime 0x8003 (GC | GCHandle | Exception) at
Verbose, as dotnet-trace's profile. Each round runs the configurations in a rotating order, each
measured after 2 s of its session running:
  none:         no session;
  ring:         dotmon with one rule: GCPause ThresholdMs 3600000 (never fires), CollectTrace of
                gc-verbose with PreTriggerSeconds 30 and RingBufferSizeMB 64 (its ring and the
                trigger's own GC session both run);
  dotmon-trace: dotmon's GET /trace with the same providers, the body to a file (for reference);
  dotnet-trace: `dotnet-trace collect -p PID --providers …` to a .nettrace file, stopped with
                SIGINT.
Printed per configuration, medians over the rounds and relative to none: the work rate in rounds
per wall-clock ms, the rounds per ms of the app's own CPU time (all its threads: what EventPipe
costs it inside the process; steadier than the wall rate on a machine busy with other work), and
the CPU seconds the observer (dotmon or dotnet-trace) used while the app worked.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench_metrics import DotnetTrace, cpu_s

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, free_port, start_dotmon, stop  # noqa: E402

PROVIDERS = "Microsoft-Windows-DotNETRuntime:0x8003:5"


def dotnet_trace():
    tools = os.environ.get("TOOLS_DIR") or os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools")
    exe = os.path.join(tools, "dotnet-trace")
    if not os.access(exe, os.X_OK):
        subprocess.run([os.environ.get("DOTNET_EXE", "dotnet"), "tool", "install", "--tool-path", tools,
                        "dotnet-trace"], check=True, stdout=subprocess.DEVNULL)
    return exe


def work(app, ms):
    """(rounds per wall ms, rounds per ms of the app's CPU time: every thread of it, the runtime's
    EventPipe work included; the second holds better on a machine busy with other work)."""
    c0 = cpu_s(app.pid)
    reply = app.command(f"work {ms}")
    cpu = cpu_s(app.pid) - c0
    f = dict(kv.split("=", 1) for kv in reply.split()[2:])
    return int(f["ops"]) / float(f["ms"]), int(f["ops"]) / (cpu * 1000)


def ring_settings(tmp):
    rule = {"Ring": {"Trigger": {"Type": "GCPause", "Settings": {"ThresholdMs": 3600000}},
                     "Actions": [{"Name": "t", "Type": "CollectTrace",
                                  "Settings": {"Providers": [{"Name": "Microsoft-Windows-DotNETRuntime",
                                                              "Keywords": "0x8003", "EventLevel": "Verbose"}],
                                               "PreTriggerSeconds": 30, "RingBufferSizeMB": 64,
                                               "Egress": "files"}}]}}
    cfg = {"Egress": {"FileSystem": {"files": {"DirectoryPath": os.path.join(tmp, "files")}}},
           "CollectionRules": rule}
    path = os.path.join(tmp, "ring.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return path


def measure(tmp, app, label, ms, tool):
    """(work rate, observer CPU seconds while the app worked, extra) for one configuration."""
    log = open(os.path.join(tmp, f"{label}.log"), "a")
    if label == "none":
        return work(app, ms), 0.0, ""
    if label == "dotnet-trace":
        with DotnetTrace(tool, app.pid, PROVIDERS, os.path.join(tmp, "dt.nettrace"), log) as dt:
            c0 = cpu_s(dt.pid)
            rate = work(app, ms)
            cpu = cpu_s(dt.pid) - c0
        return rate, cpu, f"{dt.size / 1048576:.1f} MiB file"
    port = free_port()
    args = ("--configuration-file-path", ring_settings(tmp)) if label == "ring" else ()
    dm = start_dotmon(tmp, port, log, [app.pid], args=args)
    extra = ""
    try:
        body = None
        if label == "dotmon-trace":
            url = f"http://127.0.0.1:{port}/trace?pid={app.pid}&providers={PROVIDERS}&durationSeconds=3600"
            body = urllib.request.urlopen(url, timeout=30)
            sink = open(os.path.join(tmp, "dm.nettrace"), "wb")
            t = threading.Thread(target=lambda: [sink.write(c) for c in iter(lambda: body.read(65536), b"")],
                                 daemon=True)
            t.start()
        time.sleep(2)
        c0 = cpu_s(dm.pid)
        rate = work(app, ms)
        cpu = cpu_s(dm.pid) - c0
        if label == "ring":
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/collectionrules/Ring?pid={app.pid}") as r:
                ring = json.loads(r.read()).get("ring", {})
            extra = (f"ring {ring.get('bytes', 0) / 1048576:.1f} MiB over {ring.get('spanSeconds', 0):.1f} s, "
                     f"{ring.get('eventsKept', 0) + ring.get('eventsDiscarded', 0)} events")
    finally:
        stop(dm)
    if label == "dotmon-trace":
        t.join(30)
        sink.close()
        extra = f"{os.path.getsize(sink.name) / 1048576:.1f} MiB file"
        os.unlink(sink.name)
    return rate, cpu, extra


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--work-ms", type=int, default=5000)
    args = ap.parse_args()
    tool = dotnet_trace()
    labels = ["none", "ring", "dotmon-trace", "dotnet-trace"]
    got = {k: [] for k in labels}
    with tempfile.TemporaryDirectory(prefix="dmbenchringapp") as tmp:
        os.chmod(tmp, 0o700)
        app = App(tmp)
        try:
            work(app, 10000)  # warm up: JIT tiers, heap size
            for r in range(args.rounds):
                order = labels[r % len(labels):] + labels[:r % len(labels)]
                for label in order:
                    rate, cpu, extra = measure(tmp, app, label, args.work_ms, tool)
                    got[label].append((rate[0], rate[1], cpu))
                    print(f"round {r + 1} {label:13} {rate[0]:8.2f} rounds/ms  {rate[1]:8.2f} rounds/CPU-ms  "
                          f"observer CPU {cpu:5.2f} s  {extra}", flush=True)
        finally:
            app.kill()
    base = statistics.median(x[0] for x in got["none"])
    base_cpu = statistics.median(x[1] for x in got["none"])
    print(f"\nmedians of {args.rounds} rounds: configuration, rounds per wall ms (vs none), rounds per app CPU ms "
          f"(vs none), observer CPU s per {args.work_ms} ms")
    for label in labels:
        rate = statistics.median(x[0] for x in got[label])
        per_cpu = statistics.median(x[1] for x in got[label])
        cpu = statistics.median(x[2] for x in got[label])
        print(f"{label:13}  {rate:8.2f} ({rate / base:5.3f})  {per_cpu:8.2f} ({per_cpu / base_cpu:5.3f})  {cpu:5.2f}")
    print(json.dumps(got))
    return 0


if __name__ == "__main__":
    sys.exit(main())
