#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Metrics of N apps: dotmon against dotnet-counters, in one run (issue 15); /metrics under wrk
and dotmon's CPU per process-minute from 0 to N processes (issue 30). Nothing is asserted.

  bench_metrics.py [--apps 10] [--seconds 60] [--scrapes 1000]
  bench_metrics.py --scrape [--apps 20] [--rounds 5] [--wrk-seconds 10] [--connections 4]
                   [--rate 20 [--rate-seconds 30] [--floor]] [--baseline OTHER_DOTMON]
  bench_metrics.py --scale 0,1,2,5,10,20 [--rounds 3] [--seconds 30] [--baseline OTHER_DOTMON]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH), DOTMON_BASE_BIN (an
older dotmon, --baseline's default); wrk and promtool on PATH for --scrape; dotnet-counters is
installed from NuGet into TOOLS_DIR (default: beside DOTMON_BIN, tools/) on first use.

1. N test apps in a private TMPDIR (each ticking its own meter with --metrics-ms 100).
2. dotmon watching all N (System.Runtime EventCounters and meter, the app's meter), interval 1 s,
   for --seconds: its CPU time (its threads' schedstat, in ns: /proc's utime+stime count 10 ms
   ticks, which at 1-10 processes is most of the figure) per process-minute and its RSS at the end.
3. Then, on the same apps, dotnet-counters the way it is used, one `collect` per process
   (`--counters System.Runtime,TestApp.Meter --refresh-interval 1 --format json`), for the same time:
   the CPU of all N per process-minute and their summed RSS.
4. With dotmon running again: --scrapes sequential GET /metrics on loopback, p50/p99/max.
Prints the figures and the ratios dotmon/dotnet-counters.

--scrape: N apps, one dotmon; waits until the body is complete (every pid the same families and
series, twice in a row, dotmon_process_metrics_up 1 for each, promtool clean), then --rounds runs
of wrk (/usr/bin/wrk, -t1 -c CONNECTIONS) on /metrics: p50/p90/p99/max per run, the mean bytes per
answer, dotmon's CPU per scrape, its renderings per second and their time
(dotmon_metrics_renders_total, _render_seconds_total), and a 2 s wrk run that reads every answer
whole (all the families of the complete body, a final newline); medians and min-max over the
runs. With --baseline the two binaries alternate (A B, B A, ...) on the same apps.
With --rate R, each round then has a rate-limited client instead of wrk's closed loop: one
keep-alive connection, a GET /metrics every 1/R s on a fixed schedule for --rate-seconds, each
answer read whole before the next is due (so no answer waits behind the client's own requests),
latency from the request's send to the answer's last byte, and how long dotmon waited, runnable,
for a core over the run (schedstat); beside it dotmon's own view over the
same run where the binary has it (dotmon_metrics_scrape_seconds: request to last byte queued;
and dotmon_loop_busy_seconds, turns of its loop longer than 1, 2 and 5 ms, from a binary that has
it: a measuring build, see BENCHMARKS.md). --floor adds, per round,
the same client against a static body of the same size from a Python HTTP server (the floor of
what the machine's scheduling allows, the apps running). (Issue 30:
the 2026-11-26 figures, p50 0.88 ms at 10 processes with 494 lines, were measured on a body cut at
the 64 KiB the renderer's buffer then had; the complete body is about 10 KB per process.)

--scale: max(N) apps started once (so the machine's load is the same for every N); for each N a
folder holding hard links to the first N apps' diagnostic sockets is dotmon's TMPDIR, so one
dotmon sees exactly N runtimes. Rounds of every N in a shuffled order (interleaved): once all N
have their series, dotmon's CPU over --seconds without a scrape. Prints CPU per minute and per
process-minute for each N (median, min-max), and the least-squares fit fixed + per-process x N.
"""

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, free_port, prom_by_pid, status_kib, stop, wait_for  # noqa: E402

HZ = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / HZ


def cpu_ns_s(pid):
    """CPU time of every thread of pid in seconds from /proc/PID/task/*/schedstat (nanoseconds,
    where /proc/PID/stat counts 10 ms ticks: a quiet dotmon uses less than one tick a second)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


class DotnetTrace:
    """`dotnet-trace collect -p pid --providers providers -o out` (tool: its path) while the with
    block runs, its output to log: started, given 2 s to take its session; stopped with SIGINT
    (killed after 60 s) on leaving. .pid is its process; .size the file's bytes once stopped (the
    file is removed)."""

    def __init__(self, tool, pid, providers, out, log):
        self.tool, self.target, self.providers, self.out, self.log = tool, pid, providers, out, log
        self.p, self.size = None, 0

    def __enter__(self):
        from dmtest import dotnet_root  # noqa: E402 (tests/support is on the path above)
        self.p = subprocess.Popen([self.tool, "collect", "-p", str(self.target), "--providers", self.providers,
                                   "-o", self.out], stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
                                  env=dict(os.environ, DOTNET_ROOT=dotnet_root()))
        self.pid = self.p.pid
        time.sleep(2)
        return self

    def __exit__(self, *exc):
        self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(60)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        if os.path.exists(self.out):
            self.size = os.path.getsize(self.out)
            os.unlink(self.out)
        return False


def run_delay_ms(pid):
    """Time (ms) pid's threads have waited on a run queue, runnable but not running, and the
    number of times they were scheduled (/proc/PID/task/*/schedstat, fields 2 and 3)."""
    wait, slices = 0, 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                v = f.read().split()
            wait, slices = wait + int(v[1]), slices + int(v[2])
        except OSError:
            pass
    return wait / 1e6, slices


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


def dotmon_env(env):
    """dotmon's settings in every mode: interval 1 s, the app's meter besides the defaults."""
    return dict(env, DotnetMonitor_GlobalCounter__IntervalSeconds="1",
                DotnetMonitor_Metrics__Meters__0__MeterName="TestApp.Meter")


def spawn_dotmon(env, mport):
    """env's DOTMON_BIN (or the environment's) on the metrics URL port mport."""
    return subprocess.Popen([env.get("DOTMON_BIN") or os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls",
                             f"http://127.0.0.1:{free_port()}", "--metricUrls", f"http://127.0.0.1:{mport}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=dotmon_env(env))


def start_apps(tmp, n):
    """n test apps in TMPDIR=tmp, started in parallel, each ticking its meter every 100 ms."""
    with concurrent.futures.ThreadPoolExecutor(min(n, 8) or 1) as ex:
        return list(ex.map(lambda _: App(tmp, "--metrics-ms", "100"), range(n)))


def complete_body(mport, pids, seconds=60):
    """Waits until /metrics holds every pid's series: every pid the same families with the same
    line counts, twice in a row, and dotmon_process_metrics_up 1 for each. Returns the body, or
    raises."""
    seen = {"prev": None, "body": None}
    want = sorted(str(p) for p in pids)

    def whole():
        try:
            body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
        except OSError:
            return False
        by_pid, _, bad = prom_by_pid(body)
        shapes = {tuple(sorted(by_pid.get(p, {}).items())) for p in want}
        up = all(re.search(rf'^dotmon_process_metrics_up{{pid="{p}",[^\n]*}} 1$',
                                                          body, re.M) for p in want)
        now = (sorted(by_pid) == want and len(shapes) == 1 and not bad and up, shapes)
        steady = now[0] and now == seen["prev"] and len(next(iter(shapes))) > 0
        seen["prev"], seen["body"] = now, body
        return steady

    if not wait_for(whole, seconds, 1.0):
        raise RuntimeError(f"/metrics did not show every one of {len(want)} processes' series within {seconds} s")
    return seen["body"]


def answers(mport):
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=5).status == 200
    except OSError:
        return False


def spread(xs, fmt="{:.2f}"):
    xs = sorted(xs)
    return f"{fmt.format(statistics.median(xs))} ({fmt.format(xs[0])}-{fmt.format(xs[-1])})"


WRK_LUA = """
done = function(summary, latency, requests)
  io.write(string.format("RESULT %d %d %d %d %d %d %d %d %d\\n", summary.requests, summary.bytes,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
    summary.errors.status, latency:percentile(50), latency:percentile(90), latency:percentile(99),
    latency.max, summary.duration))
end
"""


def cleanup(dm, apps, tmp):
    """dotmon stopped, the apps killed, their folder removed."""
    stop(dm)
    for x in apps:
        x.kill()
    shutil.rmtree(tmp, ignore_errors=True)


def binaries(a):
    """[(label, dotmon binary)]: DOTMON_BIN, and --baseline's to interleave with it."""
    return [("dotmon", os.environ["DOTMON_BIN"])] + ([("baseline", a.baseline)] if a.baseline else [])


def promtool_errors(body):
    r = subprocess.run(["promtool", "check", "metrics"], input=body, capture_output=True, text=True)
    errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln.lower()]
    return errors if errors or r.returncode not in (0, 3) else []


def wrk_run(a, script, mport):
    """One wrk run on /metrics: (answers, bytes, errors, non-2xx, p50, p90, p99, max in ms, seconds)."""
    out = subprocess.run(["wrk", "-t1", f"-c{a.connections}", f"-d{a.wrk_seconds}s", "-s", script,
                          f"http://127.0.0.1:{mport}/metrics"], capture_output=True, text=True).stdout
    m = re.search(r"^RESULT (.*)$", out, re.M)
    if not m:
        raise RuntimeError(f"wrk gave no result: {out[-400:]}")
    v = [int(x) for x in m.group(1).split()]
    return v[:4] + [x / 1000 for x in v[4:8]] + [v[8] / 1e6]


def render_counters(mport):
    """(dotmon_metrics_renders_total, dotmon_metrics_render_seconds_total), or None (older dotmon)."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
    m = re.search(r"^dotmon_metrics_renders_total (\S+)$", body, re.M)
    t = re.search(r"^dotmon_metrics_render_seconds_total (\S+)$", body, re.M)
    return (float(m.group(1)), float(t.group(1))) if m and t else None


WRK_CHECK_LUA = """
local threads = {}
function setup(thread) table.insert(threads, thread) end
function init(args) checked = 0; short = 0 end
function response(status, headers, body)
  checked = checked + 1
  local _, n = body:gsub("\\n# TYPE ", "")
  if status ~= 200 or n < WANT or body:sub(-1) ~= "\\n" then short = short + 1 end
end
function done(summary, latency, requests)
  local c, s = 0, 0
  for _, t in ipairs(threads) do c = c + t:get("checked"); s = s + t:get("short") end
  io.write(string.format("CHECKED %d %d\\n", c, s))
end
"""


def wrk_check(a, tmp, mport, body):
    """A short wrk run whose every answer is read whole: (answers, answers with fewer families
    than the complete body's, no final newline or not 200)."""
    script = os.path.join(tmp, "check.lua")
    with open(script, "w") as f:
        f.write(WRK_CHECK_LUA.replace("WANT", str(body.count("\n# TYPE "))))
    out = subprocess.run(["wrk", "-t1", f"-c{a.connections}", "-d2s", "-s", script,
                          f"http://127.0.0.1:{mport}/metrics"], capture_output=True, text=True).stdout
    m = re.search(r"^CHECKED (\d+) (\d+)$", out, re.M)
    if not m:
        raise RuntimeError(f"wrk's check gave no result: {out[-400:]}")
    return int(m.group(1)), int(m.group(2))


def read_answer(sock):
    """One HTTP/1.1 answer on sock, read whole (chunked or Content-Length): its byte count."""
    data = b""
    head_end, length, chunked = -1, None, False
    while True:
        piece = sock.recv(1 << 20)
        if not piece:
            raise OSError("connection closed mid-answer")
        data += piece
        if head_end < 0:
            head_end = data.find(b"\r\n\r\n")
            if head_end < 0:
                continue
            head = data[:head_end].decode("latin-1").lower()
            m = re.search(r"^content-length: *(\d+)", head, re.M)
            length = int(m.group(1)) if m else None
            chunked = "transfer-encoding: chunked" in head
        if length is not None and len(data) - head_end - 4 >= length:
            return len(data)
        if chunked and data.endswith(b"\r\n0\r\n\r\n"):
            return len(data)


def rate_run(port, rate, seconds, path="/metrics"):
    """GET path every 1/rate s on one keep-alive connection for seconds, each answer read whole:
    the latencies in ms (send to last byte) and the mean bytes per answer."""
    import socket
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    req = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode()
    lat, nbytes = [], 0
    t0 = time.perf_counter()
    try:
        for i in range(int(rate * seconds)):
            due = t0 + i / rate
            wait = due - time.perf_counter()
            if wait > 0:
                time.sleep(wait)
            t = time.perf_counter()
            sock.sendall(req)
            nbytes += read_answer(sock)
            lat.append((time.perf_counter() - t) * 1000)
    finally:
        sock.close()
    return lat, nbytes / max(len(lat), 1)


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))]


def own_histograms(mport):
    """{family: {le: cumulative count}} of dotmon's own histograms; {} from a dotmon without them."""
    body = urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10).read().decode()
    out = {}
    for m in re.finditer(r'^(dotmon_\w+)_bucket\{le="([^"]+)"\} (\d+)$', body, re.M):
        out.setdefault(m.group(1), {})[m.group(2)] = int(m.group(3))
    return out


def own_view(h0, h1):
    """dotmon's view of a run from two own_histograms snapshots: a line, or "" when not there."""
    def diff(name):
        a, b = h0.get(name, {}), h1.get(name, {})
        return {le: b[le] - a.get(le, 0) for le in b}
    sc, lb = diff("dotmon_metrics_scrape_seconds"), diff("dotmon_loop_busy_seconds")
    if not sc:
        return ""
    n, turns = sc.get("+Inf", 0), lb.get("+Inf", 0)
    loop = (f"; loop turns {turns}, longer than 1 ms {turns - lb.get('0.001', 0)}, "
            f"2 ms {turns - lb.get('0.002', 0)}, 5 ms {turns - lb.get('0.005', 0)}") if lb else ""
    return (f"; dotmon's own: {n} scrapes, {sc.get('0.001', 0) / max(n, 1):.1%} within 1 ms, "
            f"{sc.get('0.005', 0) / max(n, 1):.1%} within 5 ms{loop}")


class StaticBody:
    """A Python HTTP/1.1 server answering every GET with one fixed body (Content-Length), on its
    own thread: the floor for the rate-limited client."""

    def __init__(self, body):
        import http.server
        import threading
        payload = body.encode()

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802
                self.send_response(200)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args):
                pass

        self.port = free_port()
        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.t = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.t.start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


def scrape_mode(a):
    """/metrics of --apps processes under wrk, once the body is complete; with --baseline, the
    two binaries alternate round by round on the same apps."""
    tmp = tempfile.mkdtemp(prefix="dmbs")
    os.chmod(tmp, 0o700)
    apps, dm = [], None
    bins = binaries(a)
    res = {label: {k: [] for k in ("p50", "p90", "p99", "max", "rate", "cpu", "bytes")} for label, _ in bins}
    rated = {label: [] for label, _ in bins + [("floor", None)]}
    try:
        apps = start_apps(tmp, a.apps)
        time.sleep(a.settle)  # their start-up (JIT, first GCs) is not what is measured
        script = os.path.join(tmp, "report.lua")
        with open(script, "w") as f:
            f.write(WRK_LUA)
        for i in range(a.rounds):
            for label, exe in (bins if i % 2 == 0 else bins[::-1]):
                mport = free_port()
                dm = spawn_dotmon(dict(os.environ, TMPDIR=tmp, DOTMON_BIN=exe), mport)
                body = complete_body(mport, [x.pid for x in apps])
                by_pid, families, _ = prom_by_pid(body)
                errors = promtool_errors(body)
                if errors:
                    raise RuntimeError(f"promtool check metrics: {errors[:3]}")
                c0, r0 = cpu_ns_s(dm.pid), render_counters(mport)
                n, nbytes, errs, bad_status, l50, l90, l99, lmax, dur = wrk_run(a, script, mport)
                cpu, r1 = cpu_ns_s(dm.pid) - c0, render_counters(mport)
                checked, short = wrk_check(a, tmp, mport, body)
                renders = (f"{(r1[0] - r0[0]) / dur:.0f} renders/s of {(r1[1] - r0[1]) * 1000 / max(r1[0] - r0[0], 1):.2f} ms"
                           if r0 and r1 else "renders not counted")
                per = nbytes / max(n, 1)
                r = res[label]
                for k, v in (("p50", l50), ("p90", l90), ("p99", l99), ("max", lmax), ("rate", n / dur),
                             ("cpu", cpu * 1000 / max(n, 1)), ("bytes", per)):
                    r[k].append(v)
                print(f"round {i + 1} {label}: body {len(body)} bytes complete ({len(by_pid)} pids x "
                      f"{len(next(iter(by_pid.values())))} families, {len(families)} families, promtool clean); "
                      f"{n} answers, p50 {l50:.3f} ms, p90 {l90:.3f}, p99 {l99:.3f}, max {lmax:.2f}; "
                      f"{n / dur:.0f}/s; {per:.0f} bytes per answer; errors {errs}, non-200 {bad_status}; "
                      f"then {checked} answers read whole, {short} short; "
                      f"dotmon CPU {cpu * 1000 / max(n, 1):.3f} ms per scrape; {renders}", flush=True)
                if errs or bad_status or short or per < 0.98 * len(body):
                    print("  !! answers were short or failed: this run does not count as a complete scrape")
                r.setdefault("rss", []).append(status_kib(dm.pid))
                if a.rate:
                    h0, w0 = own_histograms(mport), run_delay_ms(dm.pid)
                    lat, per = rate_run(mport, a.rate, a.rate_seconds)
                    w1 = run_delay_ms(dm.pid)
                    rated[label] += lat
                    print(f"round {i + 1} {label}: {a.rate}/s for {a.rate_seconds} s, {len(lat)} answers of "
                          f"{per:.0f} bytes: p50 {pct(lat, 0.5):.3f} ms, p90 {pct(lat, 0.9):.3f}, "
                          f"p99 {pct(lat, 0.99):.3f}, max {max(lat):.2f}{own_view(h0, own_histograms(mport))}; "
                          f"dotmon runnable but waiting for a core {w1[0] - w0[0]:.1f} ms over "
                          f"{w1[1] - w0[1]} times it ran",
                          flush=True)
                stop(dm)
                dm = None
                if a.rate and a.floor and label == bins[0][0]:
                    srv = StaticBody(body)
                    try:
                        lat, per = rate_run(srv.port, a.rate, a.rate_seconds, "/")
                    finally:
                        srv.close()
                    rated["floor"] += lat
                    print(f"round {i + 1} floor (Python, static {per:.0f} bytes): p50 {pct(lat, 0.5):.3f} ms, "
                          f"p90 {pct(lat, 0.9):.3f}, p99 {pct(lat, 0.99):.3f}, max {max(lat):.2f}", flush=True)
        for label, _ in bins:
            r = res[label]
            print(f"{label}: /metrics, {a.apps} processes, wrk -t1 -c{a.connections} {a.wrk_seconds} s x {a.rounds}: "
                  f"p50 {spread(r['p50'], '{:.3f}')} ms, p90 {spread(r['p90'], '{:.3f}')} ms, "
                  f"p99 {spread(r['p99'], '{:.3f}')} ms, max {spread(r['max'])} ms; "
                  f"{spread(r['rate'], '{:.0f}')} scrapes/s; dotmon CPU {spread(r['cpu'], '{:.3f}')} ms per scrape; "
                  f"{spread(r['bytes'], '{:.0f}')} bytes per answer; RSS {spread(r['rss'], '{:.0f}')} KiB")
        for label, lat in rated.items():
            if lat:
                print(f"{label}: /metrics, {a.apps} processes, {a.rate}/s fixed schedule, {a.rate_seconds} s x "
                      f"{a.rounds}, {len(lat)} answers pooled: p50 {pct(lat, 0.5):.3f} ms, p90 {pct(lat, 0.9):.3f} ms, "
                      f"p99 {pct(lat, 0.99):.3f} ms, max {max(lat):.2f} ms")
        return 0
    finally:
        cleanup(dm, apps, tmp)


def scale_mode(a):
    """dotmon's CPU per process-minute at each N of --scale, rounds interleaved."""
    ns = sorted({int(x) for x in a.scale.split(",")})
    tmp = tempfile.mkdtemp(prefix="dmbc")
    os.chmod(tmp, 0o700)
    appdir = os.path.join(tmp, "apps")
    os.mkdir(appdir, 0o700)
    apps, dm = [], None
    try:
        apps = start_apps(appdir, max(ns))
        socks = {}
        for x in apps:  # the runtime makes its socket at start-up: wait for each
            wait_for(lambda: any(f.startswith(f"dotnet-diagnostic-{x.pid}-") for f in os.listdir(appdir)), 30)
            socks[x.pid] = [f for f in os.listdir(appdir) if f.startswith(f"dotnet-diagnostic-{x.pid}-")][0]
        dirs = {}
        for n in ns:
            d = os.path.join(tmp, f"n{n}")
            os.mkdir(d, 0o700)
            for x in apps[:n]:
                os.link(os.path.join(appdir, socks[x.pid]), os.path.join(d, socks[x.pid]))
            dirs[n] = d
        bins = binaries(a)
        per_min = {(label, n): [] for label, _ in bins for n in ns}
        rng = random.Random(a.seed)
        for r in range(a.rounds):
            order = [(b, n) for b in bins for n in ns]
            rng.shuffle(order)
            for (label, exe), n in order:
                mport = free_port()
                dm = spawn_dotmon(dict(os.environ, TMPDIR=dirs[n], DOTMON_BIN=exe), mport)
                if n > 0:
                    complete_body(mport, [x.pid for x in apps[:n]])
                elif not wait_for(lambda: answers(mport), 30, 0.5):
                    raise RuntimeError("dotmon did not answer /metrics within 30 s")
                time.sleep(2)  # the first scrapes and session starts are not what is measured
                c0, t0 = cpu_ns_s(dm.pid), time.time()
                time.sleep(a.seconds)
                cpu, wall = cpu_ns_s(dm.pid) - c0, time.time() - t0
                stop(dm)
                dm = None
                per_min[(label, n)].append(cpu * 1000 * 60 / wall)
                print(f"round {r + 1}, {label}, {n} processes: {cpu * 1000:.1f} ms CPU in {wall:.1f} s = "
                      f"{cpu * 1000 * 60 / wall:.1f} ms/min", flush=True)
        for label, _ in bins:
            # Least squares on every measurement: ms/min = fixed + per_process * N.
            pts = [(n, v) for n in ns for v in per_min[(label, n)]]
            mx_ = statistics.mean(n for n, _ in pts)
            my_ = statistics.mean(v for _, v in pts)
            sxx = sum((n - mx_) ** 2 for n, _ in pts)
            slope = sum((n - mx_) * (v - my_) for n, v in pts) / sxx if sxx else 0.0
            base = statistics.median(per_min[(label, 0)]) if 0 in ns else my_ - slope * mx_
            print(f"{label}: CPU, {a.seconds} s per measurement, {a.rounds} rounds interleaved, interval 1 s:")
            for n in ns:
                v = per_min[(label, n)]
                line = f"  {n:3d} processes: {spread(v, '{:.1f}')} ms per minute"
                if n > 0:
                    line += (f", {spread([x / n for x in v], '{:.1f}')} ms per process-minute, "
                             f"{spread([(x - base) / n for x in v], '{:.1f}')} ms per process-minute "
                             f"above the 0-process median")
                print(line)
            print(f"  fit: {my_ - slope * mx_:.1f} ms/min fixed + {slope:.1f} ms per process-minute")
        return 0
    finally:
        cleanup(dm, apps, tmp)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=None, help="processes (10; 20 with --scrape)")
    ap.add_argument("--seconds", type=int, default=None, help="measured time (60; 30 with --scale)")
    ap.add_argument("--scrapes", type=int, default=1000)
    ap.add_argument("--scrape", action="store_true", help="/metrics under wrk once the body is complete")
    ap.add_argument("--rounds", type=int, default=None, help="wrk runs (5) or rounds of --scale (3)")
    ap.add_argument("--wrk-seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--rate", type=float, default=0,
                    help="--scrape: also a rate-limited client, this many scrapes/s on a fixed schedule")
    ap.add_argument("--rate-seconds", type=int, default=30)
    ap.add_argument("--floor", action="store_true",
                    help="--rate: the same client against a static body of the same size (Python server)")
    ap.add_argument("--settle", type=int, default=10, help="seconds the apps run before the first round")
    ap.add_argument("--scale", default=None, help="process counts, e.g. 0,1,2,5,10,20")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", default=os.environ.get("DOTMON_BASE_BIN") or None,
                    help="another dotmon binary, interleaved (--scrape, --scale); default DOTMON_BASE_BIN")
    a = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the apps are killed on the way out
    if a.scrape:
        a.apps, a.rounds = a.apps or 20, a.rounds or 5
        return scrape_mode(a)
    if a.scale:
        a.seconds, a.rounds = a.seconds or 30, a.rounds or 3
        return scale_mode(a)
    a.apps, a.seconds = a.apps or 10, a.seconds or 60
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
        c0, t0 = cpu_ns_s(dm.pid), time.time()
        time.sleep(a.seconds)
        dm_cpu = cpu_ns_s(dm.pid) - c0
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
