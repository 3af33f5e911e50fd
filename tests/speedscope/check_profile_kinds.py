#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /profile?kind=alloc|exceptions|contention|gc end to end (issue 20, item 3).

For each kind a short profile (durationSeconds=2) of the real test app (no heartbeat, so that it
allocates and collects nothing of its own) is asked for; once its runtime session is up (its
operation Running: the runtime has answered CollectTracing) the app is told to do the kind's work:
  alloc       `alloc-mix`: TestApp.BigAllocType (~95% of the bytes) is the first type, allocated
              in TestApp.ProfileKinds.AllocateBig;
  exceptions  `throw-n 40`: exactly 40 TestApp.ProfileKindsException thrown in
              TestApp.ProfileKinds.ThrowKnown, with a sample message;
  contention  `contend`: TestApp.ProfileKinds.HoldLock is the first waiting method, wait > 0;
  gc          `collect 3`: 3 gen2 GCs, all Induced, none of gen0/gen1; pauses 0 <= p50 <= p99 <=
              max;
and after each no runtime session is left, nor after a client that leaves mid-profile. Also: the text/plain table of exceptions, egressProvider (the answer stored in a
FileSystem egress), and 400
problems for format=speedscope with kind=alloc and for an unknown kind.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE.
"""

import http.client
import json
import os
import socket
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, Watched, check, settle, wait_for  # noqa: E402
from dmtest import http_get as get, no_runtime_session as no_session  # noqa: E402
from dmtest import runtime_sessions as sessions  # noqa: E402

DURATION = 2


def running(port, tag):
    ops = json.loads(get(port, f"/operations?tags={tag}")[2])
    return any(o["status"] == "Running" for o in ops)


def profile(w, kind, command, headers=None, duration=DURATION):
    """GET /profile of kind; once its operation is Running (the runtime has answered
    CollectTracing: its providers are on), the app runs command. Returns (status, content type,
    body, the app's answer)."""
    res = {}
    tag = f"kinds{time.monotonic_ns()}"
    q = f"/profile?pid={w.app.pid}&kind={kind}&durationSeconds={duration}&tags={tag}"
    t0 = time.monotonic()
    t = threading.Thread(target=lambda: res.update(r=get(w.port, q, headers)))
    t.start()
    wait_for(lambda: running(w.port, tag), 10, 0.05)
    answer = w.app.command(command)
    t.join(60)
    st, ct, body = res.get("r", (0, "", b""))
    print(f"info {q} ({command}: {answer}): {st} in {time.monotonic() - t0:.1f} s", flush=True)
    return st, ct, body, answer


def json_of(st, ct, body, what):
    if not check(st == 200 and ct.startswith("application/json"), f"{what}: {st} {ct} {body[:200]!r}"):
        return None
    doc = json.loads(body)
    print("info " + json.dumps(doc)[:1500], flush=True)
    return doc


def check_alloc(w):
    doc = json_of(*profile(w, "alloc", "alloc-mix 1200")[:3], "kind=alloc")
    if doc is None:
        return
    types = doc["types"]
    check(doc["kind"] == "alloc" and doc["allocationTicks"] > 0 and doc["sampledBytes"] > 0,
          f"alloc: {doc['allocationTicks']} ticks, {doc['sampledBytes']} sampled bytes")
    top = types[0] if types else {}
    check(top.get("type") == "TestApp.BigAllocType",
          f"alloc: first type {top.get('type')} ({top.get('percent')}% of the sampled bytes)")
    sites = top.get("sites", [])
    check(bool(sites) and "TestApp.ProfileKinds.AllocateBig" in sites[0]["method"],
          f"alloc: its first site {sites[0]['method'] if sites else None}")
    check(no_session(w.port), "alloc: no runtime session left")


def check_exceptions(w):
    n = 40
    doc = json_of(*profile(w, "exceptions", f"throw-n {n}")[:3], "kind=exceptions")
    if doc is None:
        return
    ours = [t for t in doc["types"] if t["type"] == "TestApp.ProfileKindsException"]
    e = ours[0] if ours else {}
    check(e.get("count") == n, f"exceptions: TestApp.ProfileKindsException thrown {e.get('count')} times ({n})")
    check(doc["types"][0]["type"] == "TestApp.ProfileKindsException", "exceptions: it is the first type")
    sites = e.get("sites", [])
    check(bool(sites) and "TestApp.ProfileKinds.ThrowKnown" in sites[0]["method"] and sites[0]["count"] == n,
          f"exceptions: thrown in {sites[0]['method'] if sites else None}")
    check(e.get("message", "").startswith("known exception "), f"exceptions: a message: {e.get('message')!r}")
    check(no_session(w.port), "exceptions: no runtime session left")

    st, ct, body, _ = profile(w, "exceptions", "throw-n 5", {"Accept": "text/plain"}, duration=1)
    text = body.decode()
    print(text, flush=True)
    rows = [ln for ln in text.splitlines() if ln.strip() and ln.split()[0].isdigit()]
    check(st == 200 and ct.startswith("text/plain") and bool(rows) and rows[0].split()[0] == "5" and
          "TestApp.ProfileKindsException" in rows[0], f"exceptions as text/plain: {st} {ct}, 5 first")
    check(no_session(w.port), "exceptions text: no runtime session left")


def check_contention(w):
    doc = json_of(*profile(w, "contention", "contend 1200")[:3], "kind=contention")
    if doc is None:
        return
    m = doc["methods"][0] if doc["methods"] else {}
    check("TestApp.ProfileKinds.HoldLock" in m.get("method", ""),
          f"contention: first method {m.get('method')} ({m.get('count')} waits)")
    check(m.get("waitMilliseconds", 0) > 0 and m.get("maxWaitMilliseconds", 0) > 0 and
          m.get("maxWaitMilliseconds", 0) <= m.get("waitMilliseconds", 0),
          f"contention: waited {m.get('waitMilliseconds')} ms, at most {m.get('maxWaitMilliseconds')} ms")
    check(no_session(w.port), "contention: no runtime session left")


def check_gc(w):
    n = 3
    doc = json_of(*profile(w, "gc", f"collect {n}")[:3], "kind=gc")
    if doc is None:
        return
    g = doc["generations"]
    check(doc["gcs"] == n and g == {"gen0": 0, "gen1": 0, "gen2": n}, f"gc: {doc['gcs']} GCs {g} ({n} gen2)")
    check(doc["reasons"].get("Induced") == n, f"gc: reasons {doc['reasons']}")
    p = doc["pauses"]
    check(p["count"] >= n and 0 <= p["p50Milliseconds"] <= p["p99Milliseconds"] <= p["maxMilliseconds"],
          f"gc: pauses {p}")
    check(doc["heap"] is not None and doc["heap"]["totalBytes"] > 0, f"gc: heap {doc['heap']}")
    check(no_session(w.port), "gc: no runtime session left")


def check_egress(w):
    """egressProvider stores the answer in the FileSystem egress: 202 + Location, the operation
    Succeeded, its resourceLocation the JSON answer with the exceptions thrown."""
    tag = f"egress{time.monotonic_ns()}"
    q = f"/profile?pid={w.app.pid}&kind=exceptions&durationSeconds={DURATION}&egressProvider=files&tags={tag}"
    c = http.client.HTTPConnection("127.0.0.1", w.port, timeout=30)
    c.request("GET", q)
    r = c.getresponse()
    r.read()
    loc = r.getheader("Location", "")
    c.close()
    if not check(r.status == 202 and "/operations/" in loc, f"egressProvider=files: 202 + Location ({r.status} {loc})"):
        return
    wait_for(lambda: running(w.port, tag), 10, 0.05)
    w.app.command("throw-n 7")
    op = settle(lambda: json.loads(get(w.port, loc[loc.index("/operations/"):])[2]),
                lambda o: o.get("status") not in ("Starting", "Running", "Stopping"), 60, 0.2)
    rl = op.get("resourceLocation") or ""
    ok = check(op.get("status") == "Succeeded" and os.path.isfile(rl) and
               os.path.dirname(rl) == os.path.join(w.tmp, "files") and rl.endswith(".exceptions.profile.json"),
               f"egress: the operation Succeeded with {rl!r} ({op.get('status')}, {op.get('error')})")
    if ok:
        with open(rl) as f:
            doc = json.load(f)
        types = {t.get("type"): t.get("count") for t in doc.get("types", [])}
        check(doc.get("kind") == "exceptions" and types.get("TestApp.ProfileKindsException") == 7,
              f"egress: the stored answer counts 7 TestApp.ProfileKindsException ({types})")
    check(no_session(w.port), "egress: no runtime session left")


def main():
    w = Watched("dotmon-profile-kinds-", app_args=("--heartbeat-ms", "0"),
                env=lambda tmp: {"DotnetMonitor_Egress__FileSystem__files__DirectoryPath": os.path.join(tmp, "files")})
    try:
        pid = w.app.pid
        for q, what in ((f"/profile?pid={pid}&kind=alloc&format=speedscope", "kind=cpu"),
                        (f"/profile?pid={pid}&kind=heap", "supported: cpu, alloc, exceptions, contention, gc")):
            st, ct, body = get(w.port, q)
            check(st == 400 and ct.startswith("application/problem+json") and what in body.decode(),
                  f"{q}: {st} {body.decode()[:200]}")
        check_gc(w)
        # A client that leaves mid-profile ends the runtime's session (as for kind=cpu).
        tag = f"leave{time.monotonic_ns()}"
        s = socket.create_connection(("127.0.0.1", w.port))
        s.sendall(f"GET /profile?pid={pid}&kind=alloc&durationSeconds=30&tags={tag} HTTP/1.1\r\nHost: x\r\n\r\n"
                  .encode())
        wait_for(lambda: running(w.port, tag), 10, 0.05)
        check(sessions(w.port) == 1, "kind=alloc: a session while profiling")
        s.close()
        check(no_session(w.port), f"kind=alloc, the client gone: no session left ({sessions(w.port)})")
        check_exceptions(w)
        check_contention(w)
        check_alloc(w)
        check_egress(w)
    finally:
        w.close()


if __name__ == "__main__":
    main()
    if FAILS:
        print(f"{len(FAILS)} check(s) failed", flush=True)
        sys.exit(1)
