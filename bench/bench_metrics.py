#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Metrics of N apps: dotmon against dotnet-counters, in one run (issue 15). Nothing is asserted.

  bench_metrics.py [--apps 10] [--seconds 60] [--scrapes 1000]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH); dotnet-counters is
installed from NuGet into TOOLS_DIR (default: beside DOTMON_BIN, tools/) on first use.

1. N test apps in a private TMPDIR (each ticking its own meter with --metrics-ms 100).
2. dotmon watching all N (System.Runtime EventCounters and meter, the app's meter), interval 1 s,
   for --seconds: its CPU time (utime+stime from /proc) per process-minute and its RSS at the end.
3. Then, on the same apps, dotnet-counters the way it is used, one `collect` per process
   (`--counters System.Runtime,TestApp.Meter --refresh-interval 1 --format json`), for the same time:
   the CPU of all N per process-minute and their summed RSS.
4. With dotmon running again: --scrapes sequential GET /metrics on loopback, p50/p99/max.
Prints the figures and the ratios dotmon/dotnet-counters.
"""

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import free_port, status_kib  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / HZ


def tree_pids(pid):
    """pid and its descendants (dotnet-counters is an apphost that may run children)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--scrapes", type=int, default=1000)
    a = ap.parse_args()
    dotnet = os.environ.get("DOTNET_EXE") or shutil.which("dotnet")
    droot = os.environ.get("DOTNET_ROOT") or os.path.dirname(os.path.realpath(dotnet))
    tools = os.environ.get("TOOLS_DIR") or os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools")
    counters = os.path.join(tools, "dotnet-counters")
    if not os.path.exists(counters):
        subprocess.run([dotnet, "tool", "install", "--tool-path", tools, "dotnet-counters"], check=True,
                       stdout=subprocess.DEVNULL)
    tmp = tempfile.mkdtemp(prefix="dmbm")
    os.chmod(tmp, 0o700)
    env = dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=droot, DOTNET_CLI_TELEMETRY_OPTOUT="1")
    apps, dm = [], None
    try:
        for _ in range(a.apps):
            apps.append(subprocess.Popen([os.path.join(os.environ["DOTMON_TESTAPP_DIR"], "TestApp"), "--no-stdin-exit",
                                          "--metrics-ms", "100"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         env=env))
        time.sleep(3)
        mport = free_port()
        denv = dict(env, DotnetMonitor_GlobalCounter__IntervalSeconds="1",
                    DotnetMonitor_Metrics__Meters__0__MeterName="TestApp.Meter")

        def start_dotmon():
            p = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", f"http://127.0.0.1:{free_port()}",
                                  "--metricUrls", f"http://127.0.0.1:{mport}"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=denv)
            deadline = time.time() + 30
            while time.time() < deadline:
                try:
                    text = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=2).read().decode()
                    if text.count("systemruntime_cpu_usage_ratio{") >= a.apps:
                        return p
                except OSError:
                    pass
                time.sleep(0.2)
            raise RuntimeError("dotmon did not show every app's metrics within 30 s")

        dm = start_dotmon()
        c0, t0 = cpu_s(dm.pid), time.time()
        time.sleep(a.seconds)
        dm_cpu = cpu_s(dm.pid) - c0
        dm_wall = time.time() - t0
        dm_rss = status_kib(dm.pid)
        series = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read().decode().count("\n")
        dm.send_signal(signal.SIGTERM)
        dm.wait(15)
        dm = None

        # dotnet-counters, one per process.
        dcs = []
        for p in apps:
            out = os.path.join(tmp, f"counters-{p.pid}.json")
            dcs.append(subprocess.Popen([counters, "collect", "-p", str(p.pid), "--counters", "System.Runtime,TestApp.Meter",
                                         "--refresh-interval", "1", "--format", "json", "-o", out],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        env=env))
        time.sleep(5)   # their start-up (JIT) is not what is measured
        pids = [q for d in dcs for q in tree_pids(d.pid)]
        c0, t0 = sum(cpu_s(q) for q in pids), time.time()
        time.sleep(a.seconds)
        dc_cpu = sum(cpu_s(q) for q in pids) - c0
        dc_wall = time.time() - t0
        dc_rss = sum(status_kib(q) for q in pids)
        for d in dcs:
            d.send_signal(signal.SIGINT)
        for d in dcs:
            try:
                d.wait(15)
            except subprocess.TimeoutExpired:
                d.kill()
        dc_bytes = sum(os.path.getsize(os.path.join(tmp, f"counters-{p.pid}.json"))
                       for p in apps if os.path.exists(os.path.join(tmp, f"counters-{p.pid}.json")))

        # Scrape latency, dotmon watching all N again.
        dm = start_dotmon()
        time.sleep(3)
        lat = []
        for _ in range(a.scrapes):
            t = time.perf_counter()
            urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).read()
            lat.append((time.perf_counter() - t) * 1000)
        lat.sort()
        rss_after = status_kib(dm.pid)

        per_min = lambda cpu, wall: cpu / (a.apps * wall / 60)  # noqa: E731
        dm_pm, dc_pm = per_min(dm_cpu, dm_wall), per_min(dc_cpu, dc_wall)
        print(f"apps: {a.apps}, {a.seconds} s each side, interval 1 s")
        print(f"dotmon:          CPU {dm_cpu:.2f} s = {dm_pm * 1000:.1f} ms per process-minute; RSS {dm_rss} KiB "
              f"(/metrics: {series} lines)")
        print(f"dotnet-counters: CPU {dc_cpu:.2f} s = {dc_pm * 1000:.1f} ms per process-minute; RSS {dc_rss} KiB "
              f"({len(pids)} processes; {dc_bytes} bytes of JSON written)")
        print(f"ratio dotmon/dotnet-counters: CPU {dm_pm / dc_pm:.3f}x, RSS {dm_rss / dc_rss:.3f}x")
        print(f"/metrics with {a.apps} processes, {a.scrapes} scrapes: p50 {lat[len(lat) // 2]:.2f} ms, "
              f"p99 {lat[int(len(lat) * 0.99)]:.2f} ms, max {lat[-1]:.2f} ms; dotmon RSS after {rss_after} KiB")
        return 0
    finally:
        if dm is not None and dm.poll() is None:
            dm.kill()
        for p in apps:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
