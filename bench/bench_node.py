#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Node mode at scale (issue 34): one dotmon watching N .NET runtimes, against connect mode on the
same runtimes in the same run. Nothing is asserted.

  bench_node.py [--apps 100] [--rounds 2] [--seconds 30] [--newcomers 3]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH). Needs root and
unshare (util-linux) for the apps' mount namespaces.

1. N test apps, each in a mount namespace of its own (unshare --mount --propagation private),
   nice 19, all with one TMPDIR folder of the host: node mode reaches each through
   /proc/<pid>/root of a process in another mount namespace, and the same sockets are in connect
   mode's TMPDIR, so the baseline watches exactly the same runtimes.
2. Rounds of each mode in turn (node, connect; then connect, node; ...), one dotmon each:
   - to complete: from dotmon's start until /metrics holds every app's System.Runtime series
     (and dotmon_process_metrics_up 1 for every pid);
   - CPU over --seconds of continuous metrics (interval 1 s, System.Runtime and the app's meter,
     no scrape meanwhile; its threads' schedstat) per process-minute, and RSS at the end;
   - /processes and /metrics: 20 sequential GETs each, p50 and max;
   - newcomers: --newcomers times, one more app (its own mount namespace) is started and the time
     from its spawn to its first series in /metrics is taken (polling every 50 ms), then it is
     killed.
3. Prints each mode's medians (min-max over the rounds) and node/connect ratios.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import dotnet_root, fetch, free_port, status_kib, stop, wait_for  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import cpu_ns_s, spread  # noqa: E402

NS = ["unshare", "--mount", "--propagation", "private", "--"]


def spawn_app(tmp):
    """One test app in its own mount namespace, nice 19, ticking its meter every 100 ms."""
    env = dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=dotnet_root())
    return subprocess.Popen(["nice", "-n", "19", *NS, os.path.join(os.environ["DOTMON_TESTAPP_DIR"], "TestApp"),
                             "--no-stdin-exit", "--metrics-ms", "100"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def app_pid(p):
    """The TestApp's pid: nice and unshare exec it, so it is the spawned process itself."""
    return p.pid


def socket_of(tmp, pid):
    return any(f.startswith(f"dotnet-diagnostic-{pid}-") for f in os.listdir(tmp))


def spawn_dotmon(mode, tmp, api_port, mport):
    env = dict(os.environ, TMPDIR=tmp, DotnetMonitor_GlobalCounter__IntervalSeconds="1",
               DotnetMonitor_Metrics__Meters__0__MeterName="TestApp.Meter",
               DotnetMonitor_DiagnosticPort__ConnectionMode=mode)
    return subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls",
                             f"http://127.0.0.1:{api_port}", "--metricUrls", f"http://127.0.0.1:{mport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def get(url, timeout=10):
    """(status, body bytes) of a GET (dmtest.fetch: status 0 when the connection fails)."""
    st, _, body = fetch(url, timeout=timeout)
    return st, body


def up_pids(mport):
    """The pids whose dotmon_process_metrics_up is 1 in /metrics."""
    st, body = get(f"http://127.0.0.1:{mport}/metrics")
    if st != 200:
        return set()
    return {int(m) for m in re.findall(rb'^dotmon_process_metrics_up\{pid="(\d+)",[^\n]*\} 1$', body, re.M)}


def series_pids(mport):
    """The pids that have System.Runtime series in /metrics."""
    st, body = get(f"http://127.0.0.1:{mport}/metrics")
    return {int(m) for m in re.findall(rb'^systemruntime_[a-z_]+\{pid="(\d+)",', body, re.M)} if st == 200 else set()


def has_series(mport, pid):
    return pid in series_pids(mport)


def latency_ms(url, n=20):
    xs = []
    for _ in range(n):
        t0 = time.perf_counter()
        st, _ = get(url)
        if st == 200:
            xs.append((time.perf_counter() - t0) * 1000)
    return statistics.median(xs) if xs else float("nan"), max(xs) if xs else float("nan")


def one_round(mode, tmp, pids, a):
    api, mport = free_port(), free_port()
    t0 = time.monotonic()
    dm = spawn_dotmon(mode, tmp, api, mport)
    try:
        want = set(pids)
        if not wait_for(lambda: want <= up_pids(mport) and want <= series_pids(mport), 180, 0.2):
            raise RuntimeError(f"{mode}: /metrics did not hold all {len(want)} apps within 180 s "
                               f"({len(want & series_pids(mport))} there)")
        complete = time.monotonic() - t0
        time.sleep(2)
        c0, w0 = cpu_ns_s(dm.pid), time.monotonic()
        time.sleep(a.seconds)
        cpu, wall = cpu_ns_s(dm.pid) - c0, time.monotonic() - w0
        rss = status_kib(dm.pid)
        procs = latency_ms(f"http://127.0.0.1:{api}/processes")
        metrics = latency_ms(f"http://127.0.0.1:{mport}/metrics")
        news = []
        for _ in range(a.newcomers):
            t1 = time.monotonic()
            p = spawn_app(tmp)
            try:
                if wait_for(lambda: has_series(mport, app_pid(p)), 60, 0.05):
                    news.append(time.monotonic() - t1)
            finally:
                p.kill()
                p.wait()
        r = {"complete": complete, "cpu_ppm": cpu * 1000 * 60 / wall / len(pids), "rss_mb": rss / 1024,
             "procs_ms": procs[0], "metrics_ms": metrics[0],
             "newcomer_s": statistics.median(news) if news else float("nan")}
        print(f"  {mode}: complete in {complete:.1f} s, {r['cpu_ppm']:.2f} ms CPU per process-minute, "
              f"RSS {r['rss_mb']:.1f} MB, /processes p50 {procs[0]:.2f} ms (max {procs[1]:.1f}), "
              f"/metrics p50 {metrics[0]:.1f} ms (max {metrics[1]:.1f}), a new runtime's first series "
              f"after {', '.join(f'{x:.2f}' for x in news)} s", file=sys.stderr, flush=True)
        return r
    finally:
        stop(dm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--newcomers", type=int, default=3)
    a = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        print("needs root and unshare (the apps' mount namespaces)", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="dmbn")
    os.chmod(tmp, 0o755)
    apps = []
    try:
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(8) as ex:
            apps = list(ex.map(lambda _: spawn_app(tmp), range(a.apps)))
        pids = [app_pid(p) for p in apps]
        if not wait_for(lambda: all(socket_of(tmp, pid) for pid in pids), 300, 0.5):
            raise RuntimeError("not every app made its diagnostic socket within 300 s")
        print(f"{a.apps} apps (own mount namespaces, nice 19) up in {time.monotonic() - t0:.1f} s",
              file=sys.stderr, flush=True)
        time.sleep(5)
        res = {"Node": [], "Connect": []}
        for r in range(a.rounds):
            order = ["Node", "Connect"] if r % 2 == 0 else ["Connect", "Node"]
            print(f"round {r + 1}:", file=sys.stderr, flush=True)
            for mode in order:
                res[mode].append(one_round(mode, tmp, pids, a))
        print(f"{a.apps} runtimes in mount namespaces of their own, {a.rounds} rounds (median, min-max), "
              f"metrics interval 1 s, {a.seconds} s of CPU per round, {a.newcomers} newcomers per round:")
        rows = [("complete", "to every series (s)", "{:.1f}"), ("cpu_ppm", "CPU, ms per process-minute", "{:.2f}"),
                ("rss_mb", "RSS (MB)", "{:.1f}"), ("procs_ms", "/processes p50 (ms)", "{:.2f}"),
                ("metrics_ms", "/metrics p50 (ms)", "{:.1f}"), ("newcomer_s", "a new runtime's first series (s)", "{:.2f}")]
        print(f"  {'':34s} {'node':>18s} {'connect':>18s} {'node/connect':>12s}")
        for key, label, fmt in rows:
            n = [x[key] for x in res["Node"]]
            c = [x[key] for x in res["Connect"]]
            ratio = statistics.median(n) / statistics.median(c) if statistics.median(c) else float("nan")
            print(f"  {label:34s} {spread(n, fmt):>18s} {spread(c, fmt):>18s} {ratio:>11.2f}x")
        return 0
    finally:
        for p in apps:
            p.kill()
        for p in apps:
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
