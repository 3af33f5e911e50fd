#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /stacks against Microsoft's dotnet-stack report on the same app, in the same run (issue 35).
Nothing is asserted.

  bench_stacks.py [--threads 200] [--rounds 7]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE (or dotnet on PATH), DOTMON_TOOLS_DIR
(where dotnet-stack is, or is installed; default: the build folder's tools/ beside DOTMON_BIN).

The test app runs `hot-threads <threads> <long>`: that many threads recursing through
TestApp.Deep.A/B/C to depths of 4-27 frames and sleeping 1 ms at the bottom, plus its command
thread in a hot loop, so every stack walk has about threads + 10 managed threads to walk. Then
rounds alternate (dotmon first in odd rounds, dotnet-stack first in even ones):
  - dotmon: the wall time of GET /stacks?pid=<app> (Accept: application/json) from the request to
    the last byte, and the threads in the answer;
  - dotnet-stack: the wall time of `dotnet-stack report -p <app>` (its process start included, as
    a user runs it), and the threads it prints.
A round where either tool failed (dotmon not 200, dotnet-stack not exit 0) is left out and counted.
Prints medians (min-max) and dotmon/dotnet-stack per round, and dotmon's RSS after the rounds.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, dotnet_tool, fetch, free_port, start_dotmon, status_kib, stop, wait_listed  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_metrics import spread  # noqa: E402

DOTNET_STACK_VERSION = "10.0.750501"


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def dotmon_round(port, pid):
    t0 = time.monotonic()
    st, _, body = fetch(f"http://127.0.0.1:{port}/stacks?pid={pid}", headers={"Accept": "application/json"},
                        timeout=120)
    dt = time.monotonic() - t0
    threads = len(json.loads(body).get("stacks", [])) if st == 200 else 0
    return dt, threads, st


def dotnet_stack_round(exe, pid):
    t0 = time.monotonic()
    p = subprocess.run([exe, "report", "-p", str(pid)], capture_output=True, text=True, timeout=300)
    dt = time.monotonic() - t0
    return dt, len(re.findall(r"^Thread \(0x", p.stdout, re.M)), p.returncode


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=7)
    a = ap.parse_args()
    os.environ.setdefault("DOTMON_TOOLS_DIR", os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools"))
    exe = dotnet_tool("dotnet-stack", DOTNET_STACK_VERSION)
    tmp = tempfile.mkdtemp(prefix="bench-stacks-")
    os.chmod(tmp, 0o700)
    app = dm = log = None
    mine, theirs, ratios = [], [], []
    failed = 0
    try:
        app = App(tmp)
        port = free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = start_dotmon(tmp, port, log, [app.pid])
        wait_listed(port, app.pid)
        app.p.stdin.write(f"hot-threads {a.threads} 600000\n")  # answers when done: not waited for
        app.p.stdin.flush()
        time.sleep(3)
        dotmon_round(port, app.pid)  # the first round of each warms up (JIT of the rundown paths)
        if exe:
            dotnet_stack_round(exe, app.pid)
        for r in range(a.rounds):
            pair = {}
            for tool in (("dotmon", "dotnet-stack") if r % 2 == 0 else ("dotnet-stack", "dotmon")):
                if tool == "dotmon":
                    pair[tool] = dotmon_round(port, app.pid)
                elif exe:
                    pair[tool] = dotnet_stack_round(exe, app.pid)
            say(f"round {r + 1}: " + ", ".join(f"{k} {v[0]:.3f} s {v[1]} threads (status {v[2]})"
                                                for k, v in pair.items()))
            ok_mine = pair["dotmon"][2] == 200
            ok_theirs = "dotnet-stack" in pair and pair["dotnet-stack"][2] == 0
            if not ok_mine or ("dotnet-stack" in pair and not ok_theirs):
                failed += 1  # a round where either tool failed is left out, and counted
                continue
            mine.append(pair["dotmon"])
            if ok_theirs:
                theirs.append(pair["dotnet-stack"])
                ratios.append(pair["dotmon"][0] / pair["dotnet-stack"][0])
        rss = status_kib(dm.pid)
    finally:
        if app is not None:
            app.kill()
        stop(dm, 15)
        if log is not None:
            log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"The test app with {a.threads} threads in TestApp.Deep (4-27 frames each) and its hot command thread; "
          f"{a.rounds} rounds, the tools' order alternating; wall time from the request (or the process start) "
          f"to the whole answer. Median (min-max)"
          + (f"; {failed} rounds where a tool failed left out." if failed else "."))
    print()
    print("| tool | wall time s | threads in the answer |")
    print("| --- | --- | --- |")
    print(f"| dotmon GET /stacks (JSON) | {spread([m[0] for m in mine], '{:.3f}')} | "
          f"{spread([m[1] for m in mine], '{:.0f}')} |")
    if theirs:
        print(f"| dotnet-stack report {DOTNET_STACK_VERSION} | {spread([t[0] for t in theirs], '{:.3f}')} | "
              f"{spread([t[1] for t in theirs], '{:.0f}')} |")
        print()
        print(f"dotmon/dotnet-stack, round by round: {spread(ratios, '{:.2f}x')}; dotmon's RSS after the rounds "
              f"{rss / 1024:.1f} MB.")
    else:
        print()
        print(f"dotnet-stack could not be installed: no baseline. dotmon's RSS after the rounds {rss / 1024:.1f} MB.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
