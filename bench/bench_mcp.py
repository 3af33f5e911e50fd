#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The MCP endpoint's tools against the same information fetched the ways an agent can get it today,
on the same app in the same run (issue 36). Nothing is asserted.

  bench_mcp.py [--rounds 3] [--seconds 3]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH), DOTMON_TOOLS_DIR
(where Microsoft's dotnet-trace, dotnet-gcdump, dotnet-counters and dotnet-stack are, or are
installed; default: the build folder's tools/ beside DOTMON_BIN).

For each question, three ways, in rounds whose order rotates:
  - mcp: one `tools/call` on dotmon's /mcp (a session made once before the rounds): wall time from
    the request to the whole answer, and the answer's bytes (the JSON-RPC message an agent reads);
  - rest: the REST route the tool calls, as a client would call it itself (its bytes are what an
    agent would have to read or reduce);
  - peer: Microsoft's tools as an agent with a shell would run them: collect, then the report
    command when there is one (process starts included); bytes are the text the agent reads (the
    report's output, or the collected file when there is no report), the file's size apart.
    cpu_profile's peer is dotnet-trace 10's default profile (dotnet-common and the ~100 Hz
    dotnet-sampled-thread-time; its `cpu-sampling` is now for collect-linux) and `report topN`.
dotmon runs with GlobalCounter:IntervalSeconds 1, dotnet-counters' own refresh interval.
The app does what the question is about while the rounds run: `hot` for cpu_profile, `alloc-mix`
for heap_summary's app, `throw-n` in a loop for exceptions, its heartbeat for metrics and stacks.
A round where a way failed is left out and counted. Prints medians (min-max).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, dotnet_tool, fetch, free_port, start_dotmon, status_kib, stop, wait_listed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import spread  # noqa: E402

TOOLS_VERSION = "10.0.750501"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


class Mcp:
    """A session on dotmon's /mcp (no token: dotmon runs with --no-auth here)."""

    def __init__(self, port):
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.sid = None
        self.next_id = 1
        st, hdr, body = self.post({"method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "bench_mcp", "version": "1"}}})
        if st != 200:
            raise RuntimeError(f"initialize: {st} {body[:200]!r}")
        self.sid = hdr.get("Mcp-Session-Id")
        self.post({"method": "notifications/initialized"}, notify=True)

    def post(self, msg, notify=False, timeout=120):
        msg = dict(msg, jsonrpc="2.0")
        if not notify:
            msg["id"] = self.next_id
            self.next_id += 1
        headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                   "MCP-Protocol-Version": "2025-11-25"}
        if self.sid:
            headers["Mcp-Session-Id"] = self.sid
        return fetch(self.url, "POST", headers, json.dumps(msg).encode(), timeout=timeout)

    def call(self, tool, args):
        """(ok, answer bytes): the result message's bytes whether it came as JSON or as SSE."""
        st, hdr, body = self.post({"method": "tools/call", "params": {"name": tool, "arguments": args}})
        if st != 200:
            return False, len(body)
        text = body.decode("utf-8", "replace")
        if hdr.get("Content-Type", "").startswith("text/event-stream"):
            datas = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            results = [d for d in datas if '"result"' in d or '"error"' in d]
            if not results:
                return False, len(body)
            text = results[-1]
        msg = json.loads(text)
        ok = "result" in msg and not msg["result"].get("isError")
        return ok, len(text.encode())


def run(cmd, timeout=300, env=None):
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, timeout=timeout, env=env)
    return time.monotonic() - t0, p.returncode, p.stdout


def questions(tools, seconds, tmp):
    """name → (tool, arguments, REST path, peer function or None, what the app does)."""
    trace, gcdump, counters, stack = (tools.get(k) for k in ("dotnet-trace", "dotnet-gcdump", "dotnet-counters",
                                                            "dotnet-stack"))
    env = dict(os.environ, TMPDIR=tmp)

    def peer_cpu(pid):
        if not trace:
            return None
        f = os.path.join(tmp, "cpu.nettrace")
        t1, rc1, _ = run([trace, "collect", "-p", str(pid), "--profile", "dotnet-common,dotnet-sampled-thread-time",
                          "--duration",
                          f"00:00:00:{seconds:02d}", "-o", f], env=env)
        t2, rc2, out = run([trace, "report", f, "topN", "-n", "10"], env=env)
        size = os.path.getsize(f) if os.path.exists(f) else 0
        return t1 + t2, rc1 == 0 and rc2 == 0, len(out), size

    def peer_heap(pid):
        if not gcdump:
            return None
        f = os.path.join(tmp, "heap.gcdump")
        t1, rc1, _ = run([gcdump, "collect", "-p", str(pid), "-o", f], env=env)
        t2, rc2, out = run([gcdump, "report", f], env=env)
        size = os.path.getsize(f) if os.path.exists(f) else 0
        return t1 + t2, rc1 == 0 and rc2 == 0, len(out), size

    def peer_metrics(pid):
        if not counters:
            return None
        f = os.path.join(tmp, "counters.json")
        t, rc, _ = run([counters, "collect", "-p", str(pid), "--duration", f"00:00:00:{seconds:02d}",
                        "--format", "json", "-o", f], env=env)
        size = os.path.getsize(f) if os.path.exists(f) else 0
        return t, rc == 0, size, size

    def peer_stacks(pid):
        if not stack:
            return None
        t, rc, out = run([stack, "report", "-p", str(pid)], env=env)
        return t, rc == 0, len(out), len(out)

    return {
        "cpu_profile": ("cpu_profile", {"seconds": seconds, "top": 10},
                        f"/profile?kind=cpu&durationSeconds={seconds}&top=10", peer_cpu, "hot"),
        "exceptions": ("exceptions", {"seconds": seconds, "top": 10},
                       f"/profile?kind=exceptions&durationSeconds={seconds}&top=10", None, "throw"),
        "heap_summary": ("heap_summary", {"top": 20}, "/gcdump?format=summary&top=20", peer_heap, "heap"),
        "metrics_snapshot": ("metrics_snapshot", {"seconds": seconds},
                             f"/livemetrics?durationSeconds={seconds}", peer_metrics, "idle"),
        "stacks": ("stacks", {}, "/stacks", peer_stacks, "idle"),
        "gc_stats": ("gc_stats", {"seconds": seconds}, f"/profile?kind=gc&durationSeconds={seconds}", None,
                     "heap"),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated question names")
    a = ap.parse_args()
    os.environ.setdefault("DOTMON_TOOLS_DIR", os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools"))
    tools = {n: dotnet_tool(n, TOOLS_VERSION) for n in ("dotnet-trace", "dotnet-gcdump", "dotnet-counters",
                                                        "dotnet-stack")}
    tmp = tempfile.mkdtemp(prefix="bench-mcp-")
    os.chmod(tmp, 0o700)
    app = dm = log = None
    results = {}
    stop_load = threading.Event()
    try:
        app = App(tmp)
        port = free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        # A 1 s counter interval, dotnet-counters' own: the REST route and metrics_snapshot then answer
        # within the same seconds (at the default 5 s, the tool listens 6 s).
        dm = start_dotmon(tmp, port, log, [app.pid], env={"DotnetMonitor_Mcp__Enabled": "true",
                                                           "DotnetMonitor_GlobalCounter__IntervalSeconds": "1"})
        wait_listed(port, app.pid)
        mcp = Mcp(port)
        qs = questions(tools, a.seconds, tmp)
        only = [q for q in a.only.split(",") if q]
        app.command("heap-graph 200000 1 64")
        for name, (tool, args, path, peer, load) in qs.items():
            if only and name not in only:
                continue
            stop_load.clear()
            loader = None
            if load in ("hot", "throw"):
                cmd = f"hot {a.seconds * 1000 + 1500}" if load == "hot" else "throw-n 2000"

                def loop(cmd=cmd):
                    while not stop_load.is_set():
                        app.command(cmd)
                loader = threading.Thread(target=loop, daemon=True)
                loader.start()
                time.sleep(0.5)
            ways = ["mcp", "rest"] + (["peer"] if peer else [])
            rows = {w: [] for w in ways}
            failed = {w: 0 for w in ways}
            mcp.call(tool, args)  # warm-up: the first call JITs the runtime's rundown paths
            for r in range(a.rounds):
                order = ways[r % len(ways):] + ways[:r % len(ways)]
                for w in order:
                    if w == "mcp":
                        t0 = time.monotonic()
                        ok, n = mcp.call(tool, args)
                        got = (time.monotonic() - t0, ok, n, n)
                    elif w == "rest":
                        t0 = time.monotonic()
                        st, _, body = fetch(f"http://127.0.0.1:{port}{path}&pid={app.pid}"
                                            if "?" in path else f"http://127.0.0.1:{port}{path}?pid={app.pid}",
                                            headers={"Accept": "application/json"}, timeout=300)
                        got = (time.monotonic() - t0, st == 200, len(body), len(body))
                    else:
                        got = peer(app.pid)
                    if got is None or not got[1]:
                        failed[w] += 1
                        continue
                    rows[w].append(got)
                say(f"{name} round {r + 1}: " + ", ".join(
                    f"{w} {rows[w][-1][0]:.2f} s {rows[w][-1][2]} B" for w in order if rows[w]))
            stop_load.set()
            if loader is not None:
                loader.join(timeout=a.seconds + 30)
            results[name] = (rows, failed)
        rss = status_kib(dm.pid)
    finally:
        stop_load.set()
        if app is not None:
            app.kill()
        stop(dm, 15)
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"The test app, {a.rounds} rounds per question with the ways' order rotating, durations of "
          f"{a.seconds} s; wall time from the request (or the first process start) to the whole answer; "
          "bytes: what the agent reads (the peer's collected file in brackets). Median (min-max).")
    print()
    print("| question | way | wall time s | bytes to read | failed rounds |")
    print("| --- | --- | --- | --- | --- |")
    names = {"mcp": "MCP tools/call", "rest": "REST route", "peer": f"Microsoft's tools {TOOLS_VERSION}"}
    for name, (rows, failed) in results.items():
        for w, xs in rows.items():
            if not xs:
                print(f"| {name} | {names[w]} | - | - | {failed[w]} |")
                continue
            size = spread([x[2] for x in xs], "{:.0f}")
            if w == "peer" and xs[0][3] != xs[0][2]:
                size += f" ({spread([x[3] for x in xs], '{:.0f}')})"
            print(f"| {name} | {names[w]} | {spread([x[0] for x in xs], '{:.2f}')} | {size} | {failed[w]} |")
    print()
    print(f"dotmon's RSS after the rounds: {rss / 1024:.1f} MB.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
