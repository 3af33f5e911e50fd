#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /profile?kind=cpu end to end (issue 20, item 3).

The real test app runs `hot <ms>` (~70% of its command thread's time in TestApp.Hot.SpinHotLoop)
for longer than the profiles; GET /profile?pid=..&kind=cpu&durationSeconds=4 answers 200 JSON
whose top exclusive method is SpinHotLoop with 60-80% of the samples (and no hotPaths key);
with paths=3, hotPaths lists at most 3 stacks, most sampled first, the first ending in SpinHotLoop,
each with its percent of the samples; with Accept: text/plain the table lists it first and a
"Hot paths" section follows; format=speedscope is a valid speedscope document (check_speedscope.py's
checks) whose hot thread gives SpinHotLoop a share within 10 points of /profile's; kind=heap (unknown) and pid=abc are 400 problems, and so are paths=101 and paths with kind=alloc; a client that leaves mid-profile, like every
profile that ended, leaves no runtime session (dotmon_runtime_sessions on /metrics); the runtime
killed mid-profile is a 502 problem and leaves none either; stop=true on its operation answers early.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE.
"""

import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_speedscope import HOT, check_doc, exclusive_sampled, hot_thread  # noqa: E402
from dmtest import FAILS, Watched, check, http_request, runtime_sessions as sessions, settle, wait_for  # noqa: E402
from dmtest import http_get as get, no_runtime_session as no_session  # noqa: E402


def main():
    w = Watched("dotmon-profile-")
    try:
        port, pid = w.port, w.app.pid
        w.app.p.stdin.write("hot 60000\n")  # runs on, on the command thread, through the profiles
        w.app.p.stdin.flush()
        time.sleep(0.5)
        base = f"/profile?pid={pid}&kind=cpu&durationSeconds=4"

        t0 = time.monotonic()
        st, ct, body = get(port, base)
        dt = time.monotonic() - t0
        check(st == 200 and ct.startswith("application/json"), f"GET {base}: {st} {ct} in {dt:.1f} s")
        doc = json.loads(body)
        print(f"info {json.dumps({k: doc[k] for k in doc if k not in ('top', 'topInclusive')})}", flush=True)
        for e in doc["top"][:5]:
            print(f"info   {e['exclusivePercent']:6.2f}% excl {e['inclusivePercent']:6.2f}% incl  {e['method']}",
                  flush=True)
        check(doc["pid"] == pid and doc["kind"] == "cpu" and doc["durationSeconds"] == 4, "pid, kind, durationSeconds")
        check(doc["samples"] > 0 and doc["threads"] > 0 and len(doc["top"]) <= 25, "samples, threads, top 25")
        top = doc["top"][0]
        check(top["method"].startswith("TestApp!" + HOT), f"top exclusive: {top['method']}")
        check(60.0 <= top["exclusivePercent"] <= 80.0, f"{HOT}: {top['exclusivePercent']}% exclusive (60-80)")
        check("hotPaths" not in doc, "no paths asked: no hotPaths key")

        st, ct, body = get(port, base + "&paths=3")
        pdoc = json.loads(body) if st == 200 else {}
        paths = pdoc.get("hotPaths", [])
        for i, hp in enumerate(paths):
            print(f"info   path {i + 1}: {hp['samples']} samples {hp['percent']:6.2f}% "
                  f"(+{hp['elidedFrames']} outer) {' > '.join(hp['frames'])}", flush=True)
        check(st == 200 and 1 <= len(paths) <= 3 and list(pdoc)[-1] == "hotPaths"
              and list(pdoc)[-2] == "topInclusive", f"paths=3: {st}, {len(paths)} hot paths after topInclusive")
        if paths:
            first = paths[0]
            check(first["frames"] and first["frames"][-1].startswith("TestApp!" + HOT),
                  f"the first path's leaf is {HOT}: {first['frames'][-1:]}")
            check(all(a["samples"] >= b["samples"] for a, b in zip(paths, paths[1:])), "most sampled first")
            check(all(0 < len(hp["frames"]) <= 16 and hp["elidedFrames"] >= 0 and
                      abs(hp["percent"] - 100.0 * hp["samples"] / pdoc["samples"]) < 0.006 for hp in paths),
                  "each path: 1-16 frames, elidedFrames, percent of the samples")

        st, ct, body = get(port, base + "&top=3&paths=2", {"Accept": "text/plain"})
        text = body.decode()
        print(text, flush=True)
        rows = [ln for ln in text.splitlines() if ln.strip() and ln.split()[0].isdigit()]
        check(st == 200 and ct.startswith("text/plain") and rows and HOT in rows[0],
              f"text/plain: {st} {ct}, {HOT} first")
        hot = text.split("\nHot paths", 1)[1] if "\nHot paths" in text else ""
        check(hot.count(" samples (") in (1, 2) and HOT in hot, f"text/plain paths=2: a Hot paths section with {HOT}")

        st, ct, body = get(port, base + "&format=speedscope")
        check(st == 200, f"format=speedscope: {st}")
        sdoc = json.loads(body)
        check_doc(sdoc)
        ours = hot_thread(sdoc, exclusive_sampled)
        if check(ours is not None, f"speedscope: a profile with {HOT}"):
            print(f"info speedscope: {HOT} has {ours[1]:.1f}% of its thread's weight; /profile said "
                  f"{top['exclusivePercent']}% of the managed samples", flush=True)
            check(abs(ours[1] - top["exclusivePercent"]) <= 10.0, "the two within 10 points")

        for q, what in ((f"/profile?pid={pid}&kind=heap", "supported: cpu, alloc"), ("/profile?pid=abc&kind=cpu", "pid"),
                        (f"/profile?pid={pid}&durationSeconds=0", "durationSeconds"),
                        (f"/profile?pid={pid}&top=1001", "top"), (f"/profile?pid={pid}&paths=101", "paths"),
                        (f"/profile?pid={pid}&paths=x", "paths"), (f"/profile?pid={pid}&kind=alloc&paths=3", "paths")):
            st, ct, body = get(port, q)
            check(st == 400 and ct.startswith("application/problem+json") and what in body.decode(),
                  f"{q}: {st} {body.decode()[:160]}")
        check(no_session(port), f"no runtime session left after the profiles ({sessions(port)})")

        # A client that leaves mid-profile.
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(f"GET /profile?pid={pid}&durationSeconds=30 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        wait_for(lambda: sessions(port, started=True) == 1, 10, 0.2)
        check(sessions(port) == 1, "a session while profiling")
        s.close()
        check(no_session(port), f"the client gone: no session left ({sessions(port)})")

        # DELETE /operations/{id}?stop=true answers early with what was sampled.
        res = {}
        t = threading.Thread(target=lambda: res.update(r=get(port, f"/profile?pid={pid}&durationSeconds=60&tags=stopme")))
        t.start()
        t0 = time.monotonic()
        running = settle(lambda: [o["operationId"] for o in json.loads(get(port, "/operations?tags=stopme")[2])
                                  if o["status"] == "Running"], bool, 10, 0.3)
        time.sleep(1.0)
        dst = http_request(port, f"/operations/{running[0]}?stop=true" if running else "/operations/none", "DELETE",
                           timeout=10)[0].status
        t.join(60)
        st, ct, body = res.get("r", (0, "", b""))
        early = json.loads(body) if st == 200 else {}
        check(dst == 202 and st == 200 and early.get("samples", 0) > 0 and time.monotonic() - t0 < 20,
              f"stop=true: DELETE {dst}, then {st} with {early.get('samples')} samples after "
              f"{time.monotonic() - t0:.1f} s")
        check(no_session(port), f"stopped: no session left ({sessions(port)})")

        # The runtime dies mid-profile: no names without the rundown, so a 502 problem, no session.
        res = {}
        t = threading.Thread(target=lambda: res.update(r=get(port, f"/profile?pid={pid}&durationSeconds=30")))
        t.start()
        wait_for(lambda: sessions(port, started=True) == 1, 10, 0.2)
        w.app.kill()
        t.join(60)
        st, ct, body = res.get("r", (0, "", b""))
        check(st == 502 and ct.startswith("application/problem+json"),
              f"the runtime killed mid-profile: {st} {body.decode()[:200]}")
        check(no_session(port), f"the runtime gone: no session left ({sessions(port)})")
    finally:
        w.close()


if __name__ == "__main__":
    main()
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", flush=True)
        sys.exit(1)
