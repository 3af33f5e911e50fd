# SPDX-License-Identifier: MIT
"""Spans from an unmodified app (issue 33 item 5): the real test app's activities traced through
dotmon's POST /trace with the Microsoft-Diagnostics-DiagnosticSource provider and the
FilterAndPayloadSpecs argument ev_activity_filter_specs builds (docs/events.md §9), the nettrace
file decoded by events/ev_activity (tool activity_spans, argv[1]) and checked against what the app
printed: its TestApp.Demo parent and child (ids, parent link, names, kinds, status, tags, times),
and the ASP.NET Core server spans of its HttpClient requests (the client span is the server span's
parent: W3C propagation over real HTTP); then a session with ParentRatioSampler(0.5): exactly the
roots whose trace id the runtime's rule picks are spans, with their children."""

import json
import os
import re
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from dmtest import MULT, Watched, check, fetch, verdict, wait_for  # noqa: E402

TOOL = sys.argv[1]
SOURCES = "TestApp.Demo;Microsoft.AspNetCore;System.Net.Http"
DURATION = 12 * MULT


def spans_of(path):
    out = subprocess.run([TOOL, "read", path], capture_output=True, text=True, timeout=60)
    print(out.stderr.strip(), flush=True)
    check(out.returncode == 0, "activity_spans read the trace")
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def start_trace(w, specs, dest, duration):
    """POST /trace of the app with the DiagnosticSource provider and specs, in a thread writing the
    nettrace file to dest; returns (thread, result dict with "status" or "error")."""
    body = json.dumps({"Providers": [{"Name": "Microsoft-Diagnostics-DiagnosticSource", "Keywords": "0x3",
                                      "EventLevel": "Verbose", "Arguments": {"FilterAndPayloadSpecs": specs}}],
                       "RequestRundown": False, "BufferSizeInMB": 16}).encode()
    result = {}

    def trace():
        try:
            result["status"] = fetch(f"http://127.0.0.1:{w.port}/trace?pid={w.app.pid}&durationSeconds={duration}",
                                     method="POST", headers={"Content-Type": "application/json"}, data=body,
                                     timeout=duration + 60, dest=dest)[0]
        except Exception as e:  # noqa: BLE001 (reported by the caller's check)
            result["error"] = repr(e)

    t = threading.Thread(target=trace)
    t.start()
    return t, result


def wait_listener(w, warm):
    """The session is on once the app's ActivitySource has a listener: activities exist."""
    return wait_for(lambda: warm.append(w.app.command("activity warmup")) or "trace=" in warm[-1], 30 * MULT)


def sampled_by_ratio(trace_id, ratio):
    """The runtime's ParentRatioSampler for a root (docs/events.md §9.2): the trace id's first 8
    bytes, big-endian and signed, in absolute value under ratio * (2^63 - 1)."""
    v = int.from_bytes(bytes.fromhex(trace_id)[:8], "big", signed=True)
    return abs(v) < int(ratio * (2**63 - 1))


def sampling(w):
    """ParentRatioSampler(0.5) through ev_activity_filter_specs: exactly the roots whose trace id the
    rule picks are spans, each with its child (the child follows its parent's decision)."""
    specs = subprocess.run([TOOL, "specs", "TestApp.Demo", "0.5"], capture_output=True, text=True,
                           check=True).stdout
    check("-ParentRatioSampler(0.5):" in specs, "the spec asks for the runtime's ratio sampler")
    dest = os.path.join(w.tmp, "sampled.nettrace")
    t, result = start_trace(w, specs, dest, 8 * MULT)
    warm = []
    check(wait_listener(w, warm), "the sampled session is on")
    printed = []
    for i in range(60):
        m = re.match(r"ok activity trace=([0-9a-f]{32}) parent=([0-9a-f]{16}) child=([0-9a-f]{16}|none)",
                     w.app.command(f"activity s{i}"))
        if m:
            printed.append(m.groups())
    t.join(8 * MULT + 90)
    check(result.get("status") == 200, f"the sampled trace answered 200 ({result})")
    spans = {s["span"]: s for s in spans_of(dest)}
    want = [p for p in printed if sampled_by_ratio(p[0], 0.5)]
    got = [p for p in printed if p[1] in spans]
    check(len(printed) == 60 and 10 <= len(want) <= 50,
          f"the app's 60 roots, about half of them picked by the rule ({len(want)})")
    check(got == want, f"exactly the picked roots are spans ({len(got)} spans of {len(want)} picked)")
    check(all(p[2] in spans and spans[p[2]]["parent"] == p[1] for p in want),
          "each picked root's child is a span too")
    check(all(p[2] == "none" for p in printed if p not in want),
          "a root the rule left out had no recorded child (the child follows its parent)")


def main():
    specs = subprocess.run([TOOL, "specs", SOURCES, "1"], capture_output=True, text=True, check=True).stdout
    check(specs.count("[AS]") == 3 and "/Stop:" in specs, "the FilterAndPayloadSpecs has one Stop line per source")
    w = Watched("dm-act-")
    try:
        dest = os.path.join(w.tmp, "act.nettrace")
        t, result = start_trace(w, specs, dest, DURATION)
        warm = []
        check(wait_listener(w, warm), f"the app's activities are sampled once the trace runs ({len(warm)} tries)")
        line = w.app.command("activity demo1")
        m = re.match(r"ok activity trace=([0-9a-f]{32}) parent=([0-9a-f]{16}) child=([0-9a-f]{16})", line)
        check(m is not None, f"the app printed its ids: {line}")
        http = w.app.command("http 0 2")
        check(http.startswith("ok http"), f"the app served and sent HTTP requests: {http}")
        t.join(DURATION + 90)
        check(result.get("status") == 200, f"POST /trace answered 200 ({result})")
        spans = spans_of(dest)
        for s in spans:
            if s["source"] != "TestApp.Demo" or s["name"] != "warmup":
                print("span", json.dumps(s), flush=True)
        if m is None:
            return
        trace_id, parent_id, child_id = m.groups()
        byid = {s["span"]: s for s in spans}
        p, c = byid.get(parent_id), byid.get(child_id)
        check(p is not None and c is not None, "both activities the app printed were decoded as spans")
        if p is None or c is None:
            return
        check(p["trace"] == trace_id and c["trace"] == trace_id, "their trace id is the app's")
        check(c["parent"] == parent_id, "the child's parent is the parent span")
        check(p["name"] == "demo1" and c["name"] == "demo1.child", f"names ({p['name']}, {c['name']})")
        check(p["kind"] == "Server" and p["otlp_kind"] == 2 and c["kind"] == "Client" and c["otlp_kind"] == 3,
              "kinds Server and Client (OTLP 2 and 3)")
        check(p["source"] == "TestApp.Demo" and p["version"] == "1.0.0" and p["scope"] == "TestApp.Demo",
              "the ActivitySource's name and version (the OTLP scope)")
        check(c["status"] == "Error" and c["status_description"] == "child failed" and c["otlp_status"] == 2
              and c["otlp_status_message"] == "child failed", "the child's Error status and its description")
        check(p["status"] == "Unset" and p["otlp_status"] == 0 and p["otlp_status_message"] is None,
              "the parent's status is unset")
        check(p["tags"] == {"demo.name": "demo1", "demo.n": "42"} and p["attrs"] == {"demo.name": "demo1", "demo.n": 42},
              f"the parent's tags ({p['tags']}) and typed attributes ({p['attrs']})")
        check(c["attrs"] == {"demo.flag": True}, f"the child's tag as a bool ({c['attrs']})")
        check(p["flags"] == 1 and c["flags"] == 1, "both are recorded (trace flags 01)")
        check(c["end_ns"] - c["start_ns"] >= 2_000_000 and p["end_ns"] - p["start_ns"] >= 4_000_000,
              f"durations cover the app's sleeps ({c['end_ns'] - c['start_ns']} ns, {p['end_ns'] - p['start_ns']} ns)")
        check(p["start_ns"] <= c["start_ns"] and c["end_ns"] <= p["end_ns"], "the child lies inside the parent")
        sampled = sum(1 for x in warm if "trace=" in x)
        got = sum(1 for s in spans if s["source"] == "TestApp.Demo" and s["name"] == "warmup")
        check(got == sampled, f"every warm-up activity the app saw sampled is a span ({got} of {sampled})")
        # HttpClient -> Kestrel: each server span's parent is a client span of the same trace.
        clients = {s["span"]: s for s in spans if s["source"] == "System.Net.Http" and s["kind"] == "Client"}
        servers = [s for s in spans if s["source"] == "Microsoft.AspNetCore" and s["kind"] == "Server"]
        linked = [s for s in servers if s["parent"] in clients and clients[s["parent"]]["trace"] == s["trace"]]
        check(len(clients) >= 2 and len(servers) >= 2 and len(linked) >= 2,
              f"HttpClient spans are the parents of ASP.NET Core's ({len(clients)} client, {len(servers)} server, "
              f"{len(linked)} linked)")
        for s in linked:
            cl = clients[s["parent"]]
            # The server's Activity stops after its response is sent, so the client can stop
            # first (2.9 ms later once, under ASan on a loaded machine): only the start is ordered.
            check(cl["start_ns"] <= s["start_ns"] <= cl["end_ns"],
                  "a server span starts inside its client span")
            check(cl["attrs"].get("http.request.method") == "GET" and cl["attrs"].get("http.response.status_code") == 200
                  and cl["attrs"].get("network.protocol.version") == "1.1",
                  f"the client span's tags (method, status code as an int, protocol version a string): {cl['attrs']}")
        sampling(w)
    finally:
        w.close()


if __name__ == "__main__":
    main()
    sys.exit(verdict("activity_spans"))
