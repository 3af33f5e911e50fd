#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /stacks end to end against the real test app (issue 35, item 1).

The test app parks two threads (`park`, tests/app/Parked.cs): "dm-waiter" blocked in A.B.Wait
(called from A.B.Run) and "dm-spinner" spinning in C.D.Spin (from C.D.Run); it answers their
kernel thread ids. Then:
  - the default (no Accept, or curl's */*) is text/plain in dotnet-monitor's layout: "Thread: (0x<id>)
    <name>" headers, "  TestApp.dll!A.B.Wait" frames, each thread ended by an empty line; both
    parked threads are there under their ids and names, A.B.Wait above A.B.Run and C.D.Spin above
    C.D.Run;
  - Accept: application/json is dotnet-monitor's CallStackResult ({"stacks":[{threadId,
    threadName, frames:[{methodName, methodToken, typeName, moduleName, moduleVersionId,
    hidden}]}]}): the same frames on the same thread ids, methodToken a MethodDef token
    (0x06……), moduleName TestApp.dll;
  - Accept: application/speedscope+json: an evented profile per thread named as the text header,
    whose frames, opened outermost first, end with C.D.Spin for the spinner;
  - Accept is negotiated as dotnet-monitor does (*/*, application/*, two types at once);
  - the operation: 200 with a Location header, the artifact named
    yyyyMMdd_HHmmss_fff_<pid>.stacks.txt; with
    egressProvider (FileSystem) 202, the file written (0600) holds the same text;
  - Microsoft's dotnet-stack report (NuGet tool dotnet-stack, installed into the build tree's
    tools/) on the same process agrees: the parked threads' frames it prints are ours, in order;
  - format=bogus is a 400 problem; no runtime session is left; the wall time of each answer is
    printed (the benchmark's figures are bench/'s).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_TOOLS_DIR.
"""

import json
import os
import re
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, Watched, check, dotnet_tool, http_get as get, http_request, wait_for  # noqa: E402
from dmtest import no_runtime_session as no_session, runtime_sessions as sessions  # noqa: E402

DOTNET_STACK_VERSION = "10.0.750501"
WAITER = ["TestApp.dll!A.B.Wait", "TestApp.dll!A.B.Run"]
SPINNER = ["TestApp.dll!C.D.Spin", "TestApp.dll!C.D.Run"]


def text_threads(text):
    """{thread id: (name, [frames])} of dotnet-monitor's text layout."""
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^Thread: \(0x([0-9A-F]+)\)(?: (.*))?$", line)
        if m:
            cur = int(m.group(1), 16)
            out[cur] = (m.group(2) or "", [])
        elif line.startswith("  ") and cur is not None:
            out[cur][1].append(line[2:])
    return out


def in_order(frames, want):
    """want[0] directly above want[1] in frames (leaf first)."""
    return any(frames[i:i + len(want)] == want for i in range(len(frames)))


def check_text(text, tids, what):
    threads = text_threads(text)
    check(text.endswith("\n\n") and len(threads) >= 3, f"{what}: {len(threads)} threads, each ended by an empty line")
    for tid, name, want in ((tids[0], "dm-waiter", WAITER), (tids[1], "dm-spinner", SPINNER)):
        got = threads.get(tid)
        if check(got is not None, f"{what}: thread 0x{tid:X} ({name}) is there"):
            check(got[0] == name, f"{what}: thread 0x{tid:X} named {got[0]!r}")
            check(in_order(got[1], want), f"{what}: {want[0]} above {want[1]} on 0x{tid:X}: {got[1][:6]}")
    return threads


def check_json(doc, tids):
    stacks = {s["threadId"]: s for s in doc.get("stacks", [])}
    for tid, name, want in ((tids[0], "dm-waiter", WAITER), (tids[1], "dm-spinner", SPINNER)):
        s = stacks.get(tid)
        if not check(s is not None, f"json: thread {tid} is there"):
            continue
        check(s["threadName"] == name, f"json: thread {tid} named {s['threadName']!r}")
        names = [f"{f['moduleName']}!{f['typeName']}.{f['methodName']}" for f in s["frames"]]
        check(in_order(names, want), f"json: {want[0]} above {want[1]}: {names[:6]}")
        f = next((f for f in s["frames"] if f["typeName"] == want[0].split("!")[1].rsplit(".", 1)[0]), None)
        if check(f is not None, "json: the parked method's frame"):
            check(list(f) == ["methodName", "methodToken", "typeName", "moduleName", "moduleVersionId", "hidden"],
                  f"json: dotnet-monitor's frame fields in its order ({list(f)})")
            check(f["methodToken"] >> 24 == 0x06 and f["moduleName"] == "TestApp.dll" and f["hidden"] is False,
                  f"json: token 0x{f['methodToken']:08x}, module {f['moduleName']}")


def check_speedscope(doc, tids):
    frames = [f["name"] for f in doc["shared"]["frames"]]
    check(frames[:2] == ["[NativeFrame]", "UnknownClass"], f"speedscope: the first shared frames {frames[:2]}")
    prof = next((p for p in doc["profiles"] if p["name"] == f"Thread: (0x{tids[1]:X}) dm-spinner"), None)
    if check(prof is not None, "speedscope: the spinner's profile"):
        opened = [frames[e["frame"]] for e in prof["events"] if e["type"] == "O"]
        closed = [frames[e["frame"]] for e in prof["events"] if e["type"] == "C"]
        check(prof["type"] == "evented" and opened[-2:] == SPINNER[::-1] and closed == opened[::-1],
              f"speedscope: opened outermost first, C.D.Spin last ({opened[-3:]}), closed in reverse")


def bare(frame):
    """A frame as both tools can be compared: "Module!Type.Method", no ".dll", no signature
    (dotnet-stack prints TraceEvent's "TestApp!A.B.Wait(class …)")."""
    return re.sub(r"\(.*$", "", frame).replace(".dll!", "!")


def dotnet_stack_report(pid):
    """dotnet-stack report's threads ({id: [frames]}), or None when the tool is not there."""
    exe = dotnet_tool("dotnet-stack", DOTNET_STACK_VERSION)
    if exe is None:
        return None
    p = subprocess.run([exe, "report", "-p", str(pid)], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, f"dotnet-stack report: exit {p.returncode} {p.stderr[-300:]}")
    out, cur = {}, None
    for line in p.stdout.splitlines():
        m = re.match(r"^Thread \(0x([0-9A-F]+)\):", line)
        if m:
            cur = int(m.group(1), 16)
            out[cur] = []
        elif line.startswith("  ") and cur is not None:
            out[cur].append(line.strip())
    return out


def main():
    egress = None
    w = Watched("dotmon-stacks-", env=lambda tmp: {
        "DotnetMonitor_Egress__FileSystem__files__DirectoryPath": os.path.join(tmp, "egress")})
    try:
        port, pid = w.port, w.app.pid
        egress = os.path.join(w.tmp, "egress")
        m = re.match(r"ok park waiter=(\d+) spinner=(\d+)", w.app.command("park"))
        check(m is not None, "the app parked its two threads")
        tids = (int(m.group(1)), int(m.group(2)))

        t0 = time.monotonic()
        r, body = http_request(port, f"/stacks?pid={pid}")
        st, ct, loc = r.status, r.getheader("Content-Type", ""), r.getheader("Location", "")
        print(f"info GET /stacks (text): {time.monotonic() - t0:.3f} s, {len(body)} bytes", flush=True)
        check(st == 200 and ct.startswith("text/plain"), f"/stacks: {st} {ct}")
        check("/operations/" in loc, f"/stacks: Location {loc!r}")
        text = body.decode()
        print(text[:1500], flush=True)
        check_text(text, tids, "text")

        t0 = time.monotonic()
        st, ct, body = get(port, f"/stacks?pid={pid}", {"Accept": "application/json"})
        print(f"info GET /stacks (json): {time.monotonic() - t0:.3f} s", flush=True)
        check(st == 200 and ct.startswith("application/json"), f"json: {st} {ct}")
        check_json(json.loads(body), tids)

        st, ct, body = get(port, f"/stacks?pid={pid}", {"Accept": "application/speedscope+json"})
        check(st == 200 and ct.startswith("application/speedscope+json"), f"speedscope: {st} {ct}")
        check_speedscope(json.loads(body), tids)

        # dotnet-monitor's negotiation: exact types first (text before JSON), then ranges.
        for accept, want in (("*/*", "text/plain"), ("application/*", "application/json"),
                             ("application/json, text/plain", "text/plain"),
                             ("application/xml, application/speedscope+json", "application/speedscope+json")):
            st, ct, _ = get(port, f"/stacks?pid={pid}", {"Accept": accept})
            check(st == 200 and ct.startswith(want), f"Accept {accept}: {st} {ct} (want {want})")

        st, ct, body = get(port, f"/stacks?pid={pid}&format=bogus")
        check(st == 400 and ct.startswith("application/problem+json"), f"format=bogus: {st} {body[:120]}")

        st, ct, body = get(port, f"/stacks?pid={pid}&egressProvider=files")
        check(st == 202, f"egress: {st} {body[:200]}")
        done = wait_for(lambda: os.path.isdir(egress) and any(f.endswith(".stacks.txt") for f in os.listdir(egress)), 30)
        if check(done, "egress: a <stamp>_<pid>.stacks.txt file"):
            name = next(f for f in os.listdir(egress) if f.endswith(".stacks.txt"))
            path = os.path.join(egress, name)
            check(re.match(rf"^\d{{8}}_\d{{6}}_\d{{3}}_{pid}\.stacks\.txt$", name) is not None, f"egress: named {name}")
            check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, "egress: the file is 0600")
            wait_for(lambda: open(path).read().endswith("\n\n"), 10)
            check_text(open(path).read(), tids, "egress")

        theirs = dotnet_stack_report(pid)
        if theirs is None:
            print("skip dotnet-stack could not be installed: no comparison", flush=True)
        else:
            ours = text_threads(get(port, f"/stacks?pid={pid}")[2].decode())
            for tid, want in ((tids[0], WAITER), (tids[1], SPINNER)):
                t = [bare(f) for f in theirs.get(tid, [])]
                o = [bare(f) for f in ours.get(tid, ("", []))[1]]
                mine = [f for f in o if f.startswith("TestApp!")]
                print(f"info dotnet-stack 0x{tid:X}: {t[:6]}", flush=True)
                check(in_order(t, [bare(x) for x in want]),
                      f"dotnet-stack shows {want[0]} above {want[1]} on 0x{tid:X}")
                check(mine == [f for f in t if f.startswith("TestApp!")],
                      f"the app's frames of 0x{tid:X} are dotnet-stack's: {mine} / {t[:6]}")
        w.app.command("unpark")
        check(no_session(port), f"no runtime session left ({sessions(port)})")
    finally:
        w.close()
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
