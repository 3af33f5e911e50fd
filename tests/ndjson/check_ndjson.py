#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Any trace as NDJSON, end to end (issue 16).

The real test app and the real dotmon in a private TMPDIR. While the app runs `gc` commands, two
sessions of profile gc-verbose run at once:
  - GET /trace?...&format=ndjson: application/x-ndjson, every line a JSON object of the documented
    schema, GCStart lines with Count/Depth/Reason/Type;
  - GET /trace?... (nettrace, unchanged): saved, then `dotmon convert FILE --format ndjson`: exit 0,
    its GCStart count equals the C checker's (nettrace_check) and TraceEvent's (tracecheck), and
    the GCStart payloads (Count, Depth, Reason, Type) equal TraceEvent's decoding event by event
    (tracecheck --gc-events); the native events without a field list (GCAllocationTick,
    GCHeapStats, GCSuspendEEBegin, GCRestartEEEnd, ExceptionThrown, the rundown's
    MethodDCEndVerbose and ModuleDCEnd, ...) are named and decoded by their layouts, every field
    equal to TraceEvent's parsers' (tracecheck --payloads), event by event; stdin input and -o give
    the same lines; a truncated copy exits 1 with the lines before the cut.
Also: format=xml is a 400 problem+json; both operations end Succeeded; an ndjson trace with
durationSeconds=-1 stopped by DELETE /operations/{id}?stop=true ends with the rundown's lines and
Succeeded, and one cancelled (DELETE without stop) ends Cancelled; a client that stops reading
while the app writes ~60 MB of events is not dropped (backpressure instead of an endless queue:
dotmon's RSS stays bounded) and later gets every line whole; over every tests/fixtures/nettrace
file, the events' activityId/relatedActivityId equal TraceEvent's (tracecheck --activities).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_TRACECHECK, DOTMON_NETTRACE_CHECK.
With --fuzz DIR: only `dotmon convert` over every file of DIR (never a signal, exit 0 or 1, every
stdout line valid JSON).
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (FAILS, Watched, check, fetch, get_json, runtime_sessions, settle,  # noqa: E402
                    status_kib, wait_for)

KEYS = ["timestamp", "pid", "thread", "provider", "event", "id", "version", "opcode", "keywords",
        "level", "activityId", "relatedActivityId"]


def parse_lines(data):
    """[objects], [bad lines]: every line must be UTF-8 JSON objects."""
    objs, bad = [], []
    for line in data.split(b"\n"):
        if not line:
            continue
        try:
            o = json.loads(line.decode("utf-8"))
            if not isinstance(o, dict):
                raise ValueError("not an object")
            objs.append(o)
        except (ValueError, UnicodeDecodeError):
            bad.append(line[:200])
    return objs, bad


def gc_payloads(objs):
    return [[o["payload"][k] for k in ("Count", "Depth", "Reason", "Type")]
            for o in objs if o.get("provider") == "Microsoft-Windows-DotNETRuntime" and o.get("id") == 1]


RT = "Microsoft-Windows-DotNETRuntime"
RD = RT + "Rundown"
# provider#id: (the event's name, fields every event must have and equal TraceEvent's, required in
# the test's gc-verbose trace). Every other field both readers name is compared too.
NATIVE = {
    f"{RT}#10": ("GCAllocationTick", ["AllocationAmount", "AllocationKind", "AllocationAmount64", "TypeID",
                                      "TypeName", "HeapIndex", "Address", "ObjectSize"], True),
    f"{RT}#4": ("GCHeapStats", ["GenerationSize0", "TotalPromotedSize0", "GenerationSize1", "GenerationSize2",
                                "GenerationSize3", "GenerationSize4", "FinalizationPromotedCount",
                                "PinnedObjectCount", "GCHandleCount"], True),
    f"{RT}#9": ("GCSuspendEEBegin", ["Reason", "Count", "ClrInstanceID"], True),
    f"{RT}#3": ("GCRestartEEEnd", ["ClrInstanceID"], True),
    f"{RT}#8": ("GCSuspendEEEnd", ["ClrInstanceID"], True),
    f"{RT}#7": ("GCRestartEEBegin", ["ClrInstanceID"], True),
    f"{RT}#80": ("ExceptionThrown", ["ExceptionType", "ExceptionMessage", "ExceptionEIP", "ExceptionHRESULT",
                                     "ExceptionFlags"], True),
    f"{RT}#35": ("GCTriggered", ["Reason"], True),
    f"{RT}#202": ("GCMarkWithType", ["HeapNum", "Type", "Promoted"], True),
    f"{RT}#205": ("GCGlobalHeapHistory", ["FinalYoungestDesired", "NumHeaps", "CondemnedGeneration",
                                          "Reason", "GlobalMechanisms", "PauseMode", "MemoryPressure"], True),
    f"{RT}#204": ("GCPerHeapHistory", ["HeapIndex", "Count", "ExtraGen0Commit"], True),
    f"{RT}#30": ("SetGCHandle", ["HandleID", "ObjectID", "Kind", "Generation"], False),
    f"{RT}#33": ("PinObjectAtGCTime", ["HandleID", "ObjectID", "ObjectSize", "TypeName"], False),
    f"{RT}#143": ("MethodLoadVerbose", ["MethodID", "MethodStartAddress", "MethodSize", "MethodName"], False),
    f"{RD}#144": ("MethodDCEndVerbose", ["MethodID", "ModuleID", "MethodStartAddress", "MethodSize",
                                         "MethodToken", "MethodFlags", "MethodNamespace", "MethodName",
                                         "MethodSignature"], True),
    f"{RD}#154": ("ModuleDCEnd", ["ModuleID", "AssemblyID", "ModuleFlags", "ModuleILPath", "ManagedPdbSignature",
                                  "ManagedPdbAge", "ManagedPdbBuildPath"], True),
    f"{RD}#152": ("DomainModuleDCEnd", ["ModuleID", "AssemblyID", "AppDomainID", "ModuleILPath"], False),
    f"{RD}#156": ("AssemblyDCEnd", ["AssemblyID", "AppDomainID", "FullyQualifiedAssemblyName"], False),
    "Microsoft-DotNETCore-SampleProfiler#0": ("ThreadSample", ["Type"], False),
}


def same_value(ours, theirs):
    """Our JSON value against TraceEvent's: 64-bit integers past 2^53 come as decimal strings,
    HRESULTs are signed there, doubles within rounding."""
    if isinstance(theirs, bool) or isinstance(ours, bool):
        return ours is theirs
    if isinstance(theirs, int):
        if isinstance(ours, str) and ours.lstrip("-").isdigit():
            ours = int(ours)
        return isinstance(ours, int) and (ours - theirs) % (1 << 32) == 0 and abs(ours - theirs) < (1 << 33)
    if isinstance(theirs, float):
        return isinstance(ours, (int, float)) and abs(ours - theirs) <= 1e-9 * max(1.0, abs(theirs))
    return ours == theirs


def as_int(v):
    return int(v) if isinstance(v, str) and v.lstrip("-").isdigit() else v


def te_view(key, p):
    """Our payload p as TraceEvent presents the same event: it splits the optimization tier (bits
    7-9) out of MethodFlags (of version 2 events), names GCMarkWithType's Bytes "Promoted", and shows the per-heap
    history's mechanism bit masks as the index of their bit (not compared)."""
    p = dict(p)
    if "MethodFlags" in p and key.endswith(("#143", "#144")):
        flags = as_int(p["MethodFlags"])
        p["MethodFlags"] = flags & ~0x380
        if "ReJITID" in p:  # TraceEvent reads the tier from version 2 events only
            p["OptimizationTier"] = (flags >> 7) & 7
    if key.endswith("#202") and "Bytes" in p:
        p["Promoted"] = p.pop("Bytes")
    if key.endswith("#204"):
        p.pop("CompactMechanisms", None)
        p.pop("ExpandMechanisms", None)
    return p


def native_payloads(objs, te_payloads, required=True):
    """Every NATIVE event's name and fields against TraceEvent's. TraceEvent orders the events of
    a block by time across threads, we keep the stream's order: the two lists are paired after
    sorting both by the listed fields, then every field both name must be equal."""
    for key, (name, fields, must) in NATIVE.items():
        prov, eid = key.rsplit("#", 1)
        ours = [o for o in objs if o["provider"] == prov and o["id"] == int(eid)]
        theirs = te_payloads.get(key, [])
        if not ours and not theirs and not (must and required):
            continue
        check(len(ours) == len(theirs) and (ours or not must or not required),
              f"{name}: {len(ours)} events, TraceEvent {len(theirs)}")
        named = [o for o in ours if o["event"] == name and isinstance(o.get("payload"), dict)]
        check(len(named) == len(ours), f"{name}: every event named so and decoded ({len(named)} of {len(ours)})")
        mine = [te_view(key, o["payload"]) for o in named]
        missing = [p for p in mine + theirs if any(f not in p for f in fields)]
        check(not missing, f"{name}: both readers give {fields} ({str(missing[:1])[:200]})")
        if missing:
            continue

        def order(p):
            return json.dumps([as_int(p[f]) for f in fields])

        bad, compared = [], 0
        for k, (p, t) in enumerate(zip(sorted(mine, key=order), sorted(theirs, key=order))):
            for f in p:
                if f in t and t[f] is not None:
                    compared += 1
                    if not same_value(p[f], t[f]):
                        bad.append(f"#{k}.{f}: {p[f]!r} vs {t[f]!r}")
        check(not bad and compared > 0,
              f"{name}: {len(ours)} events, {compared} field values equal to TraceEvent's ({bad[:3]})")


def fetch_into(url, out):
    """dmtest.fetch(url) into the dict out: status, type (Content-Type), body; error when the
    connection failed (status 0)."""
    out["status"], headers, out["body"] = fetch(url, timeout=120)
    out["type"] = headers.get("Content-Type", "")
    if out["status"] == 0:
        out["error"] = out["body"].decode(errors="replace")


def convert(args, stdin=None):
    r = subprocess.run([os.environ["DOTMON_BIN"], "convert"] + args, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def check_converted(path, tmp):
    rc, out, err = convert([path, "--format", "ndjson"])
    check(rc == 0, f"dotmon convert exit 0 ({rc}: {err.strip()[:200]})")
    objs, bad = parse_lines(out)
    check(not bad and objs, f"convert: {len(objs)} lines, all JSON objects ({bad[:2]})")
    check(all(list(o)[:len(KEYS)] == KEYS and ("payload" in o or "payloadHex" in o) for o in objs),
          "convert: every line has the schema's keys in order")
    ours = gc_payloads(objs)
    checker = json.loads(subprocess.run([os.environ["DOTMON_NETTRACE_CHECK"], path], stdout=subprocess.PIPE,
                                        timeout=60).stdout)
    te = json.loads(subprocess.run([os.environ["DOTNET_EXE"], os.environ["DOTMON_TRACECHECK"], path, "--gc-events",
                                    "--payloads", ",".join(NATIVE)],
                                   stdout=subprocess.PIPE, timeout=300).stdout)
    check(len(objs) == checker["events"] == te["events"],
          f"events: convert {len(objs)}, C checker {checker['events']}, TraceEvent {te['events']}")
    check(len(ours) == checker["gcStart"] == te["gcStart"] and len(ours) > 0,
          f"GCStart: convert {len(ours)}, C checker {checker['gcStart']}, TraceEvent {te['gcStart']}")
    check(ours == te.get("gcEvents"),
          f"GCStart Count/Depth/Reason/Type equal TraceEvent's event by event ({ours[:3]} vs {te.get('gcEvents', [])[:3]})")
    native_payloads(objs, te.get("payloads", {}))
    undecoded = sorted({(o["provider"], o["id"], o["version"]) for o in objs
                        if o["provider"].startswith(RT) and ("payload" not in o or o["event"].startswith("EventID("))})
    check(not undecoded, f"convert: every event of the runtime's providers named and decoded ({undecoded[:5]})")
    # stdin and -o give the same bytes.
    with open(path, "rb") as f:
        raw = f.read()
    rc2, out2, _ = convert(["-", "--format", "ndjson"], stdin=raw)
    check(rc2 == 0 and out2 == out, "convert - (stdin) gives the same lines")
    opath = os.path.join(tmp, "out.ndjson")
    rc3, out3, _ = convert([path, "--format", "ndjson", "-o", opath])
    with open(opath, "rb") as f:
        check(rc3 == 0 and out3 == b"" and f.read() == out, "convert -o OUT writes the same lines")
    # A truncated copy: exit 1, a message, and the lines before the cut.
    rc4, out4, err4 = convert(["-", "--format", "ndjson"], stdin=raw[: len(raw) * 2 // 3])
    objs4, bad4 = parse_lines(out4)
    check(rc4 == 1 and "TRUNCATED" in err4 and not bad4 and out.startswith(out4),
          f"a truncated copy: exit 1 with a message and {len(objs4)} good lines ({rc4}, {err4.strip()[:120]})")
    return ours


def fuzz(corpus):
    files = sorted(os.listdir(corpus))
    check(bool(files), f"{len(files)} corpus files in {corpus}")
    for name in files:
        rc, out, err = convert([os.path.join(corpus, name), "--format", "ndjson"])
        objs, bad = parse_lines(out)
        check(rc in (0, 1) and not bad, f"convert {name}: exit {rc}, {len(objs)} lines, all JSON ({bad[:1]})")


def operation_status(port, opid, path=""):
    """GET /operations/{opid}{path}: the answer's JSON once it no longer runs (within 30 s), else
    the last one ({} when it did not answer JSON)."""
    return settle(lambda: get_json(port, f"/operations/{opid}{path}", timeout=10)[1] or {},
                  lambda o: o.get("status") not in ("Running", "Stopping"), 30, 0.2)


def stop_case(port, pid, stop):
    """An endless ndjson trace ended by DELETE /operations/{id}[?stop=true]."""
    what = "stopped" if stop else "cancelled"
    api = f"http://127.0.0.1:{port}"
    r = urllib.request.urlopen(f"{api}/trace?pid={pid}&profile=gc-verbose&durationSeconds=-1&format=ndjson",
                               timeout=60)
    loc = r.headers.get("Location", "")
    opid = loc.rsplit("/", 1)[-1]
    time.sleep(1)
    req = urllib.request.Request(f"{api}/operations/{opid}" + ("?stop=true" if stop else ""), method="DELETE")
    with urllib.request.urlopen(req, timeout=10) as d:
        check(d.status in (200, 202, 204), f"{what}: DELETE answered {d.status}")
    try:
        body = r.read()
        cut = False
    except Exception:  # noqa: BLE001 - a cancelled transfer is cut
        body, cut = b"", True
    objs, bad = parse_lines(body)
    if stop:
        check(not cut and objs and not bad and any(o["provider"].endswith("Rundown") for o in objs),
              f"{what}: {len(objs)} JSON lines, the rundown's included")
    status = operation_status(port, opid).get("status")
    check(status == ("Succeeded" if stop else "Cancelled"), f"{what}: the operation is {status}")


def slow_client_case(api, port, app, dm_pid):
    """format=ndjson to a client that stalls: the session pauses, nothing is dropped."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock.connect(("127.0.0.1", port))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    conn.sock = sock
    body = json.dumps({"Providers": [{"Name": "DotMon-TestApp", "EventLevel": "Verbose"}],
                       "RequestRundown": False, "BufferSizeInMB": 16})
    conn.request("POST", f"/trace?pid={app.pid}&durationSeconds=-1&format=ndjson", body=body,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    opid = resp.getheader("Location", "").rsplit("/", 1)[-1]
    check(resp.status == 200, f"slow client: POST /trace format=ndjson answered {resp.status}")
    rss0 = status_kib(dm_pid)
    answer = app.command("events 15000 2000")  # ~60 MB of UTF-16 text, written while nobody reads
    check(answer.startswith("ok events"), f"slow client: the app wrote its events ({answer})")
    time.sleep(1)
    rss1 = status_kib(dm_pid)
    check(rss1 - rss0 < 48 * 1024, f"slow client: dotmon's RSS grew by {(rss1 - rss0) // 1024} MB while stalled")
    req = urllib.request.Request(f"{api}/operations/{opid}?stop=true", method="DELETE")
    urllib.request.urlopen(req, timeout=10).read()
    data = resp.read()
    objs, bad = parse_lines(data)
    blobs = sum(1 for o in objs if o.get("event") == "Blob")
    check(not bad and blobs > 0, f"slow client: {len(objs)} lines ({blobs} Blob), all JSON ({bad[:1]})")
    details = operation_status(port, opid, "/details")
    dropped = details.get("trace", {}).get("droppedEvents", -1)
    check(details.get("status") == "Succeeded" and blobs + dropped == 15000,
          f"slow client: {details.get('status')}, {blobs} Blob lines + {dropped} dropped by the runtime = 15000")
    conn.close()


def fixture_activities():
    d = os.path.join(os.environ["DOTMON_FIXTURES"], "nettrace")
    for name in sorted(os.listdir(d)):
        if not name.endswith(".nettrace"):
            continue
        path = os.path.join(d, name)
        rc, out, _ = convert([path, "--format", "ndjson"])
        objs, _ = parse_lines(out)
        ours = sorted([f"{o['provider']}#{o['id']}", o["activityId"] or "", o["relatedActivityId"] or ""]
                      for o in objs if o["activityId"] or o["relatedActivityId"])
        te = json.loads(subprocess.run([os.environ["DOTNET_EXE"], os.environ["DOTMON_TRACECHECK"], path,
                                        "--activities"], stdout=subprocess.PIPE, timeout=300).stdout)
        theirs = sorted(te.get("activities", []))
        check(rc == 0 and ours == theirs,
              f"{name}: {len(ours)} events with activity ids, equal to TraceEvent's ({len(theirs)})")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--fuzz":
        fuzz(sys.argv[2])
        print("FAILED: " + "; ".join(FAILS) if FAILS else "all ok")
        return 1 if FAILS else 0
    fixture_activities()
    w = Watched("dmndjson", stop_timeout=30)
    try:
        tmp, app, port, dm = w.tmp, w.app, w.port, w.dm
        api = f"http://127.0.0.1:{port}"
        base = f"{api}/trace?pid={app.pid}&profile=gc-verbose&durationSeconds=5"
        bad = {}
        fetch_into(base + "&format=xml", bad)
        check(bad.get("status") == 400 and "problem+json" in bad.get("type", ""),
              f"format=xml: 400 problem+json ({bad.get('status')}, {bad.get('type')})")
        nd, nt = {}, {}
        sessions = runtime_sessions(port, started=True)
        threads = [threading.Thread(target=fetch_into, args=(base + "&format=ndjson", nd)),
                   threading.Thread(target=fetch_into, args=(base, nt))]
        for t in threads:
            t.start()
        # Both sessions run in the runtime (acknowledged, not only asked for) before the app acts.
        check(sessions >= 0 and wait_for(lambda: runtime_sessions(port, started=True) >= sessions + 2, 30),
              "both trace sessions started")
        # Allocations (GCAllocationTick) and first-chance exceptions (ExceptionThrown) for the
        # native layouts' comparison with TraceEvent.
        check(app.command("churn 20").startswith("ok churn"), "churn command")
        check(app.command("throw 3").startswith("ok throw"), "throw command")
        ngc = 0
        end = time.time() + 2.5
        while time.time() < end:
            check(app.command("gc").startswith("ok gc"), "gc command")
            ngc += 1
            time.sleep(0.2)
        for t in threads:
            t.join(120)
        check(nd.get("status") == 200 and nd.get("type", "").startswith("application/x-ndjson"),
              f"format=ndjson: 200 application/x-ndjson ({nd.get('status')}, {nd.get('type')}, {nd.get('error')})")
        objs, badl = parse_lines(nd.get("body", b""))
        check(objs and not badl, f"format=ndjson: {len(objs)} lines, all JSON objects ({badl[:2]})")
        check(all(list(o)[:len(KEYS)] == KEYS for o in objs), "format=ndjson: the schema's keys in order")
        check(all(o["pid"] == app.pid for o in objs), "format=ndjson: pid on every line")
        api_gc = gc_payloads(objs)
        check(len(api_gc) >= 2 * ngc, f"format=ndjson: {len(api_gc)} GCStart lines for {ngc} gc commands (2 GCs each)")
        check(nt.get("status") == 200 and nt.get("type") == "application/octet-stream",
              f"nettrace unchanged: 200 application/octet-stream ({nt.get('status')}, {nt.get('type')})")
        path = os.path.join(tmp, "gc.nettrace")
        with open(path, "wb") as f:
            f.write(nt.get("body", b""))
        file_gc = check_converted(path, tmp)
        counts_api = {g[0] for g in api_gc}
        counts_file = {g[0] for g in file_gc}
        check(len(counts_api & counts_file) >= 2 * ngc,
              f"both sessions saw the induced GCs ({len(counts_api & counts_file)} common GC numbers)")
        ops = get_json(port, "/operations", timeout=10)[1] or []
        check(len(ops) >= 2 and all(o.get("status") == "Succeeded" for o in ops),
              f"both operations Succeeded ({[o.get('status') for o in ops]})")
        stop_case(port, app.pid, True)
        stop_case(port, app.pid, False)
        slow_client_case(api, port, app, dm.pid)
    finally:
        w.close()
    print("FAILED: " + "; ".join(FAILS) if FAILS else "all ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
