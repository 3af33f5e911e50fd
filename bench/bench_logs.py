#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""/logs latency and cost (issue 16): a line logged by the app, until it reaches the client.
Nothing is asserted.

  bench_logs.py [--rates 10,1000,10000] [--seconds 20]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.

One test app (tests/app, EventSource logger, no heartbeat) and dotmon (--no-auth, loopback) in a
private TMPDIR. For each rate, a client opens `GET /logs?pid=…&level=Information` with
`Accept: application/x-ndjson` for --seconds + 8 s, and once the stream has started the app runs
`log-rate <rate> <seconds> <run>`: lines "bench <run> <seq> <unix ns>" at that rate, each stamped
with the app's wall clock just before it is logged. The client's reader thread stamps every read
with the same machine's wall clock; a record's latency is the stamp of the read that brought its
last byte minus the app's stamp. Per rate: records received, lost (logged, never received),
p50/p90/p99/max latency, bytes per record, dotmon's RSS after the stream; dotmon's CPU
(utime+stime) from the command until the stream ended, per 10,000 records, against the app's own
CPU over the same period (the only same-run baseline: there is no dotnet-monitor peer for /logs
installed). Last, dotmon's peak RSS (VmHWM).
"""

import argparse
import http.client
import json
import os
import re
import sys
import threading
import time

from bench_metrics import cpu_s

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import Watched, status_kib  # noqa: E402

LINE = re.compile(r"^bench (\S+) (\d+) (\d+)$")


def pct(sorted_v, q):
    return sorted_v[min(len(sorted_v) - 1, int(len(sorted_v) * q))]


def run_rate(port, app, dm_pid, rate, seconds):
    """One stream at one rate; returns the figures as a dict."""
    run = f"r{rate}"
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", f"/logs?pid={app.pid}&durationSeconds={seconds + 8}&level=Information",
              headers={"Accept": "application/x-ndjson"})
    r = c.getresponse()
    if r.status != 200:
        raise RuntimeError(f"/logs answered {r.status}: {r.read()[:300]!r}")
    reads = []  # (wall ns at the read's return, bytes)

    def reader():
        while True:
            b = r.read1(1 << 16)
            if not b:
                break
            reads.append((time.time_ns(), b))

    t = threading.Thread(target=reader)
    t.start()
    time.sleep(1.0)  # the session is running; let the first metadata through
    d0, a0, w0 = cpu_s(dm_pid), cpu_s(app.pid), time.time()
    answer = app.command(f"log-rate {rate} {seconds} {run}")
    logged = int(answer.rsplit("=", 1)[1])
    t.join()
    d1, a1, wall = cpu_s(dm_pid), cpu_s(app.pid), time.time() - w0
    c.close()

    lat, seen, pending = [], set(), b""
    for when, b in reads:
        lines = (pending + b).split(b"\n")
        pending = lines.pop()
        for ln in lines:
            m = LINE.match(json.loads(ln).get("Message", "")) if ln.strip() else None
            if m and m.group(1) == run:
                seen.add(int(m.group(2)))
                lat.append((when - int(m.group(3))) / 1e6)
    lat.sort()
    got = len(lat)
    return {"rate": rate, "logged": logged, "received": got, "lost": logged - len(seen), "dups": got - len(seen),
            "bytes": sum(len(b) for _, b in reads),
            "p50": pct(lat, 0.50) if lat else 0, "p90": pct(lat, 0.90) if lat else 0,
            "p99": pct(lat, 0.99) if lat else 0, "max": lat[-1] if lat else 0,
            "dm_cpu": d1 - d0, "app_cpu": a1 - a0, "wall": wall, "rss": status_kib(dm_pid, "VmRSS")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rates", default="10,1000,10000")
    ap.add_argument("--seconds", type=int, default=20)
    a = ap.parse_args()
    w = Watched("dmbl", ["--heartbeat-ms", "0"])
    try:
        app, dm = w.app, w.dm
        app.command("log-rate 1000 1 warmup")  # JIT the logging path before anything is timed
        rows = [run_rate(w.port, app, dm.pid, int(x), a.seconds) for x in a.rates.split(",")]
        hwm = status_kib(dm.pid, "VmHWM")
        print(f"/logs, {a.seconds} s per rate, level=Information, NDJSON; latency = arrival - the app's stamp")
        print(f"{'lines/s':>8} {'logged':>8} {'received':>8} {'lost':>5} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} "
              f"{'max ms':>8} {'B/record':>8} {'dotmon CPU s':>12} {'app CPU s':>10} {'dotmon ms/10k':>13} "
              f"{'app ms/10k':>10} {'dotmon RSS KiB':>14}")
        for r in rows:
            n = max(r["received"], 1)
            print(f"{r['rate']:>8} {r['logged']:>8} {r['received']:>8} {r['lost']:>5} {r['p50']:>8.1f} "
                  f"{r['p90']:>8.1f} {r['p99']:>8.1f} {r['max']:>8.1f} {r['bytes'] // n:>8} {r['dm_cpu']:>12.2f} "
                  f"{r['app_cpu']:>10.2f} {r['dm_cpu'] * 1e7 / n:>13.1f} {r['app_cpu'] * 1e7 / n:>10.1f} "
                  f"{r['rss']:>14}")
            if r["dups"]:
                print(f"  {r['dups']} duplicate records at {r['rate']} lines/s")
        top = rows[-1]
        if top["app_cpu"] > 0:
            print(f"at {top['rate']} lines/s: dotmon CPU / app CPU {top['dm_cpu'] / top['app_cpu']:.3f}x "
                  f"over {top['wall']:.1f} s")
        print(f"dotmon peak RSS (VmHWM) {hwm} KiB, RSS at the end {status_kib(dm.pid, 'VmRSS')} KiB")
        return 0
    finally:
        w.close()


if __name__ == "__main__":
    sys.exit(main())
