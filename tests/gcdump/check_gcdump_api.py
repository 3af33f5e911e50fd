#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /gcdump end to end (issue 19): the real .NET test app, the real dotmon, and Microsoft's own
readers of the file.

  - the app holds a known graph (`heap-graph N M SIZE`: N + 1 TestApp.GcDumpHolder objects, each
    with M byte arrays of SIZE bytes): `dotnet-gcdump report` on dotmon's file finds the holder
    type exactly N + 1 times, and names each type's module as the report of the tool's own file
    does (TestApp.dll, System.Private.CoreLib.dll…, never Module(0x…): issue 31)
    and the byte arrays' bytes within 1 %, as in a `dotnet-gcdump collect` of the same app taken
    right after; the tool's GCHeapDump reader (tracecheck --gcdump) opens the file; the name is
    <yyyyMMdd_HHmmss_fff>_<pid>.gcdump (Content-Disposition, dotnet-monitor's name);
  - format=summary: application/json <yyyyMMdd_HHmmss_fff>_<pid>.gcdump.summary.json listing the
    holder type exactly N + 1 times (TestApp.dll) and the byte arrays' count and bytes; the top's
    and omitted's sums are the objects and heapBytes, which are the operation's own details, and
    within 5 % of a /gcdump's taken just before; egressed, the stored file has that name; top and
    format out of range: 400 problems naming them;
  - RequestLimits:GCDump:MaxConcurrency 1: a second /gcdump while one runs is 429;
  - egressProvider to a FileSystem egress: 202 + Location, the operation Succeeded with a
    resourceLocation that is a valid gcdump;
  - GCDump:MaxNodes below the heap: a 507 problem naming the setting; GCDump:TimeoutSeconds 1 on a
    walk of 9 million objects: 504 naming it, and the session stopped;
  - bad input (pid, egress provider): 400 problem+json;
  - not stoppable (isStoppable false, DELETE ?stop=true 400) but DELETE cancels;
  - SIGTERM mid-snapshot: 503, dotmon exits 0, the runtime takes dotnet-gcdump's snapshot next;
  - the client gone mid-snapshot, DELETE mid-snapshot, the runtime killed mid-snapshot: Cancelled
    or Failed operations, no session left (dotmon_runtime_sessions back to its baseline), a later
    /gcdump and /trace work, and dotmon's RSS back near its baseline.

Needs DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_TRACECHECK; installs dotnet-gcdump into
the build tree (DOTMON_TOOLS_DIR, default <build>/tools) when missing; skips (77) without it.
"""

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (FAILS, App, check, dotnet_root, free_port, get_json, http_request,  # noqa: E402
                    runtime_sessions, sanitized, settle, start_dotmon, status_kib, stop, wait_listed)
import dmtest  # noqa: E402

GCDUMP_VERSION = "10.0.750501"
HOLDER = "TestApp.GcDumpHolder"  # the type heap-graph holds N + 1 of
N, M, SIZE = 5000, 2, 1000
BIG = (300000, 1, 16)  # a heap that takes a while to walk (the mid-snapshot cases)
TIMEOUT_HEAP = (3000000, 1, 16)  # one whose walk takes several seconds


def tools_dir():
    d = os.environ.get("DOTMON_TOOLS_DIR") or os.path.join(os.path.dirname(os.environ["DOTMON_BIN"]), "tools")
    exe = os.path.join(d, "dotnet-gcdump")
    if not os.path.exists(exe):
        r = subprocess.run([os.environ.get("DOTNET_EXE") or "dotnet", "tool", "install", "--tool-path", d,
                            "dotnet-gcdump", "--version", GCDUMP_VERSION], capture_output=True, text=True)
        if r.returncode != 0:
            return None, None
    dll = None
    for root, _, files in os.walk(os.path.join(d, ".store")):
        if "dotnet-gcdump.dll" in files:
            dll = os.path.join(root, "dotnet-gcdump.dll")
    return exe, dll


def env(tmp):
    return dict(os.environ, TMPDIR=tmp, DOTNET_ROOT=dotnet_root())


def report(exe, tmp, path, modules=None):
    """dotnet-gcdump report: {type: [count, bytes]} with the size buckets and modules merged (its
    first column is the bytes per object of the row); with modules (a dict), each type's module as
    the report names it ("[System.Private.CoreLib.dll]") is put there."""
    r = subprocess.run([exe, "report", path], capture_output=True, text=True, env=env(tmp), timeout=300)
    types = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*([\d,]+)\s+([\d,]+)\s+(.*\S)\s*$", line)
        if not m:
            continue
        mod = re.search(r"\s*\[([^\]]*)\]$", m.group(3))
        name = m.group(3)[:mod.start()] if mod else m.group(3)
        name = re.sub(r"\s*\(Bytes > [^)]*\)", "", name).strip()
        if modules is not None and mod:
            modules[name] = mod.group(1)
        acc = types.setdefault(name, [0, 0])
        count = int(m.group(2).replace(",", ""))
        acc[0] += count
        acc[1] += int(m.group(1).replace(",", "")) * count
    return types


def merged(by_type):
    """tracecheck's byType with the size buckets ("System.Byte[] (Bytes > 1M)") merged."""
    out = {}
    for k, (count, size) in by_type.items():
        acc = out.setdefault(re.sub(r"\s*\(Bytes > [^)]*\)", "", k), [0, 0])
        acc[0] += count
        acc[1] += size
    return out


def tracecheck(tmp, path, dll):
    p = subprocess.run([os.environ.get("DOTNET_EXE") or "dotnet", os.environ["DOTMON_TRACECHECK"], "--gcdump", path,
                        "--gcdump-dll", dll], capture_output=True, text=True, env=env(tmp), timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "error": p.stderr[-500:]}


def request(port, path, method="GET", timeout=120):
    """(response, body bytes): a /gcdump of a big heap takes longer than http_request's default."""
    return http_request(port, path, method, timeout=timeout)


def wait_op(port, op_id, seconds=120):
    """The operation's status once it has ended (within seconds, scaled), else the last one."""
    return settle(lambda: get_json(port, f"/operations/{op_id}")[1] or {},
                  lambda d: d and d.get("status") not in ("Starting", "Running", "Stopping"), seconds, 0.2)


def last_op(port, pid):
    st, ops = get_json(port, f"/operations?pid={pid}")
    ops = ops or []
    return ops[-1] if ops else {}


def start_with(tmp, port, log, cfg, pid):
    """dotmon with the settings cfg (a JSON file), once it lists pid."""
    path = os.path.join(tmp, f"settings-{port}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    return start_dotmon(tmp, port, log, [pid], args=("--configuration-file-path", path))


def known_graph(port, app, exe, dll, tmp):
    t0 = time.time()
    r, body = request(port, f"/gcdump?pid={app.pid}")
    took = time.time() - t0
    cd = r.getheader("Content-Disposition", "")
    check(r.status == 200 and r.getheader("Content-Type", "").startswith("application/octet-stream"),
          f"GET /gcdump: 200 octet-stream ({r.status}, {len(body)} bytes in {took:.2f} s)")
    check(re.search(rf'filename="?\d{{8}}_\d{{6}}_\d{{3}}_{app.pid}\.gcdump"?', cd) is not None,
          f"Content-Disposition names <yyyyMMdd_HHmmss_fff>_<pid>.gcdump: {cd!r}")
    mine = os.path.join(tmp, "dotmon.gcdump")
    with open(mine, "wb") as f:
        f.write(body)
    theirs = os.path.join(tmp, "tool.gcdump")
    t0 = time.time()
    p = subprocess.run([exe, "collect", "-p", str(app.pid), "-o", theirs], capture_output=True, text=True,
                       env=env(tmp), timeout=300)
    check(p.returncode == 0 and os.path.isfile(theirs),
          f"dotnet-gcdump collect of the same app ({time.time() - t0:.2f} s): {p.stdout[-200:]!r}")
    mods_ours, mods_tool = {}, {}
    ours = report(exe, tmp, mine, mods_ours)
    tool = report(exe, tmp, theirs, mods_tool) if os.path.isfile(theirs) else {}
    # Modules named as in the tool's own file (from the rundown's module events), never Module(0x…).
    both = sorted(set(mods_ours) & set(mods_tool))
    differ = [(t, mods_ours[t], mods_tool[t]) for t in both if mods_ours[t] != mods_tool[t]]
    unnamed = [t for t, mod in mods_ours.items() if mod.startswith("Module(")]
    check(len(both) >= 10 and not differ and not unnamed and
          mods_ours.get(HOLDER) == "TestApp.dll" and mods_ours.get("System.String") == "System.Private.CoreLib.dll",
          f"dotnet-gcdump report names the modules of dotmon's file as in its own: {len(both)} types in both, "
          f"{HOLDER} in {mods_ours.get(HOLDER)!r}, differing {differ[:3]}, unnamed {unnamed[:3]}")
    holder = ours.get(HOLDER, [0, 0])
    check(holder[0] == N + 1, f"dotnet-gcdump report on dotmon's file: {HOLDER} x {holder[0]} (want {N + 1})")
    check(tool.get(HOLDER, [0, 0])[0] == holder[0],
          f"the same count as dotnet-gcdump's own file ({tool.get(HOLDER)})")
    want = (N + 1) * M * SIZE
    t_ours = merged(tracecheck(tmp, mine, dll).get("byType", {})).get("System.Byte[]", [0, 0])
    t_tool = merged(tracecheck(tmp, theirs, dll).get("byType", {})).get("System.Byte[]", [0, 0]) \
        if os.path.isfile(theirs) else [0, 0]
    # The held arrays are the same in both; the runtime's and the app's own small arrays (a few
    # hundred of ~200 bytes) differ between two snapshots taken seconds apart, seen under ASan.
    held = (N + 1) * M
    n_ours, n_tool = ours.get("System.Byte[]", [0])[0], tool.get("System.Byte[]", [0])[0]
    check(t_ours[1] >= want and t_tool[1] >= want and n_ours >= held and n_tool >= held and
          abs(t_ours[1] - t_tool[1]) <= 0.02 * max(t_tool[1], 1) and abs(n_ours - n_tool) <= 0.05 * n_tool,
          f"byte arrays [count, bytes]: {t_ours} in dotmon's, {t_tool} in the tool's (each at least {held} "
          f"arrays and {want} bytes; within 5 % and 2 %)")
    tc = tracecheck(tmp, mine, dll)
    check(tc.get("ok") is True and tc.get("nodes", 0) > N and tc.get("creationTool") == "dotmon",
          f"GCHeapDump reads dotmon's file: {({k: tc.get(k) for k in ('ok', 'nodes', 'types', 'totalSize', 'creationTool', 'error')})}")
    by = merged(tc.get("byType", {}))
    check(by.get(HOLDER, [0])[0] == N + 1 and by.get("System.Byte[]", [0, 0])[1] >= want,
          f"GCHeapDump's graph has the N holders and their arrays ({by.get(HOLDER)}, {by.get('System.Byte[]')})")


def summary(port, app):
    """GET /gcdump?format=summary on the held graph, against a /gcdump's details just before (after
    a first one: the runtime's first session allocates what later ones reuse)."""
    request(port, f"/gcdump?pid={app.pid}")
    r, _ = request(port, f"/gcdump?pid={app.pid}")
    op = last_op(port, app.pid)
    full = (get_json(port, f"/operations/{op.get('operationId')}/details")[1] or {}).get("gcdump", {})
    r, body = request(port, f"/gcdump?pid={app.pid}&format=summary")
    cd = r.getheader("Content-Disposition", "")
    check(r.status == 200 and r.getheader("Content-Type", "").startswith("application/json"),
          f"format=summary: 200 application/json ({r.status}, {len(body)} bytes)")
    check(re.search(rf'filename="?\d{{8}}_\d{{6}}_\d{{3}}_{app.pid}\.gcdump\.summary\.json"?', cd) is not None,
          f"Content-Disposition names <yyyyMMdd_HHmmss_fff>_<pid>.gcdump.summary.json: {cd!r}")
    try:
        doc = json.loads(body)
    except ValueError:
        doc = {}
    print(f"info summary: {json.dumps({k: doc.get(k) for k in ('pid', 'objects', 'heapBytes', 'typeCount', 'omitted')})}")
    for t in doc.get("top", [])[:8]:
        print(f"info   {t['bytes']:>10} {t['count']:>7}  {t['type']}  [{t['module']}]")
    top = doc.get("top", [])
    by = {t["type"]: t for t in top}
    holder, arrays = by.get(HOLDER, {}), by.get("System.Byte[]", {})
    check(doc.get("pid") == app.pid and 0 < len(top) <= 50, f"pid, and the top 50 by default ({len(top)} types)")
    check(holder.get("count") == N + 1 and holder.get("module") == "TestApp.dll",
          f"{HOLDER} x {holder.get('count')} in {holder.get('module')!r} (want {N + 1} in 'TestApp.dll')")
    check(arrays.get("count", 0) >= (N + 1) * M and arrays.get("bytes", 0) >= (N + 1) * M * SIZE and
          arrays.get("module") == "System.Private.CoreLib.dll",
          f"System.Byte[] (its size classes in it): {arrays.get('count')} arrays, {arrays.get('bytes')} bytes "
          f"(at least {(N + 1) * M} and {(N + 1) * M * SIZE})")
    om = doc.get("omitted", {})
    check(all(a["bytes"] >= b["bytes"] for a, b in zip(top, top[1:])) and
          sum(t["count"] for t in top) + om.get("count", -1) == doc.get("objects") and
          sum(t["bytes"] for t in top) + om.get("bytes", -1) == doc.get("heapBytes") and
          len(top) + om.get("types", -1) == doc.get("typeCount"),
          "most bytes first; the top and omitted sum to objects, heapBytes and typeCount")
    op = last_op(port, app.pid)
    mine = (get_json(port, f"/operations/{op.get('operationId')}/details")[1] or {}).get("gcdump", {})
    check(mine.get("objects") == doc.get("objects") and mine.get("heapBytes") == doc.get("heapBytes"),
          f"the summary's sums are its operation's details: {mine.get('objects')} objects, "
          f"{mine.get('heapBytes')} heap bytes")
    check(full.get("objects", 0) > N and abs(doc.get("objects", 0) - full["objects"]) <= 0.05 * full["objects"],
          f"and near a /gcdump's just before: {doc.get('objects')} objects against {full.get('objects')}")
    r, body = request(port, f"/gcdump?pid={app.pid}&format=summary&top=1")
    one = json.loads(body) if r.status == 200 else {}
    check(len(one.get("top", [])) == 1 and one["top"][0]["type"] == "System.Byte[]" and
          one.get("omitted", {}).get("types") == one.get("typeCount", 0) - 1,
          f"top=1: System.Byte[] alone, the rest omitted ({one.get('omitted')})")
    for q, what in (("format=summary&top=0", "top"), ("format=summary&top=100001", "top"), ("top=x", "top"),
                    ("format=xml", "gcdump or summary")):
        r, body = request(port, f"/gcdump?pid={app.pid}&{q}")
        check(r.status == 400 and "problem+json" in r.getheader("Content-Type", "") and what in body.decode(),
              f"/gcdump?{q}: {r.status} {body.decode()[:120]!r}")


def summary_egress(port, app, files):
    """format=summary to the FileSystem egress: the stored file is the summary, so named."""
    r, _ = request(port, f"/gcdump?pid={app.pid}&format=summary&egressProvider=files")
    loc = r.getheader("Location", "")
    d = wait_op(port, loc.rsplit("/", 1)[-1]) if r.status == 202 else {}
    rl = d.get("resourceLocation") or ""
    try:
        with open(rl) as f:
            stored = json.load(f)
    except (OSError, ValueError):
        stored = {}
    check(d.get("status") == "Succeeded" and os.path.dirname(rl) == files and re.search(rf"_{app.pid}\.gcdump\.summary\.json$", rl) is not None and
          stored.get("objects", 0) > N and stored.get("top"),
          f"format=summary egressed: {r.status}, {d.get('status')}, {os.path.basename(rl)!r}, "
          f"{stored.get('objects')} objects")


def type_keyword_held(port, app, log):
    """While a trace holds the runtime's Type keyword, a second walk is sent no BulkType for the
    types the first was sent: dotmon counts them (unnamedTypes) and warns; once the trace ends,
    every type is named again. The trace runs until stopped (tag typehold), so both walks are
    inside it whatever the machine's pace."""
    out = {}
    log.flush()
    log_from = log.seek(0, os.SEEK_END)

    def hold():
        spec = {"providers": [{"name": "Microsoft-Windows-DotNETRuntime", "keywords": "0x80000",
                               "eventLevel": "Informational"}], "requestRundown": False}
        r, _ = http_request(port, f"/trace?pid={app.pid}&durationSeconds=-1&tags=typehold", method="POST",
                            body=json.dumps(spec).encode(), headers={"Content-Type": "application/json"},
                            timeout=120)
        out["status"] = r.status

    def held():
        ops = get_json(port, f"/operations?pid={app.pid}&tags=typehold")[1] or []
        return [o["operationId"] for o in ops if o.get("status") == "Running"]

    def unnamed():
        r, _ = request(port, f"/gcdump?pid={app.pid}&format=summary&top=1&tags=typewalk")
        ops = get_json(port, f"/operations?pid={app.pid}&tags=typewalk")[1] or []
        d = (get_json(port, f"/operations/{ops[-1]['operationId']}/details")[1] or {}).get("gcdump", {}) if ops else {}
        return r.status, d.get("types"), d.get("unnamedTypes")

    th = threading.Thread(target=hold)
    th.start()
    deadline = time.time() + 30
    while not held() and time.time() < deadline:
        time.sleep(0.05)
    trace = held()
    first, second = unnamed(), unnamed()
    for op in trace:
        http_request(port, f"/operations/{op}?stop=true", method="DELETE")
    th.join(60)
    after = unnamed()
    log.flush()
    log.seek(log_from)
    warned = "types were not named by the runtime" in log.read()
    log.seek(0, os.SEEK_END)
    check(trace != [] and first[0] == 200 and first[2] == 0 and second[0] == 200 and second[2] > 0 and
          second[1] < first[1],
          f"Type keyword held by a trace ({trace}): the first walk names its {first[1]} types ({first[2]} "
          f"unnamed), the second is sent {second[1]} and {second[2]} are unnamed")
    check(warned and out.get("status") == 200 and after[0] == 200 and after[2] == 0,
          f"a warning says so ({warned}); the trace stopped ({out.get('status')}), then all named again "
          f"({after[1]} types, {after[2]} unnamed)")


def bad_input(port, app):
    for path, want in [("/gcdump?pid=abc", 400), ("/gcdump?pid=999999999", None),
                       (f"/gcdump?pid={app.pid}&egressProvider=nope", 400)]:
        r, body = request(port, path)
        try:
            problem = json.loads(body)
        except ValueError:
            problem = {}
        ok = (r.status == want if want else 400 <= r.status < 500)
        check(ok and "problem+json" in r.getheader("Content-Type", "") and problem.get("detail"),
              f"{path}: {r.status} problem+json with a detail {problem.get('detail', '')[:100]!r}")


def concurrency_and_egress(port, app, files, dll, tmp):
    app.command(f"heap-graph {BIG[0]} {BIG[1]} {BIG[2]}")
    r, body = request(port, f"/gcdump?pid={app.pid}&egressProvider=files&tags=a,b")
    loc = r.getheader("Location", "")
    check(r.status == 202 and "/operations/" in loc, f"egressProvider=files: 202 with Location ({r.status} {loc})")
    r2, body2 = request(port, f"/gcdump?pid={app.pid}")
    check(r2.status == 429, f"a second /gcdump while one runs: 429 ({r2.status} {body2[:120]!r})")
    op_id = loc.rsplit("/", 1)[-1]
    d = wait_op(port, op_id)
    rl = d.get("resourceLocation") or ""
    check(d.get("status") == "Succeeded" and os.path.isfile(rl) and os.path.dirname(rl) == files,
          f"the egress operation Succeeded, resourceLocation {rl!r} ({d.get('status')}, {d.get('error')})")
    if os.path.isfile(rl):
        tc = tracecheck(tmp, rl, dll)
        check(tc.get("ok") is True and tc.get("nodes", 0) > BIG[0],
              f"the egressed file is a valid gcdump ({tc.get('nodes')} nodes, {tc.get('error')})")
    st, det = get_json(port, f"/operations/{op_id}/details")
    g = (det or {}).get("gcdump", {})
    check(g.get("objects", 0) > BIG[0] and g.get("bytes", 0) > 0, f"the details have the figures: {g}")


def limit_case(app, tmp, key, value, status, what, before=None, extra=None):
    """A second dotmon with GCDump:<key> = value (and the GCDump settings in extra): /gcdump answers
    status with a problem naming the setting, and no session is left. before: an app command first
    (undone afterwards)."""
    port = free_port()
    log = open(os.path.join(tmp, f"dotmon-{key}.log"), "w+")
    dm = start_with(tmp, port, log, {"GCDump": {key: value, **(extra or {})}}, app.pid)
    try:
        base = runtime_sessions(port)
        if before:
            app.command(before)
        r, body = request(port, f"/gcdump?pid={app.pid}")
        try:
            problem = json.loads(body)
        except ValueError:
            problem = {}
        check(r.status == status and f"GCDump:{key}" in problem.get("detail", ""),
              f"{what}: {status} naming GCDump:{key} ({r.status} {problem.get('detail')!r})")
        check(settle(lambda: runtime_sessions(port), base, 60) == base, f"GCDump:{key}: no session left")
    finally:
        if before:
            app.command(f"heap-graph {N} {M} {SIZE}")
        stop(dm)
        log.close()


def client_gone(port, app):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /gcdump?pid={app.pid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    time.sleep(0.15)
    s.close()


def client_gone_downloading(port, app):
    """The client reads the response's head (sent when the file begins) and leaves: the writer
    thread is stopped mid-file."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(f"GET /gcdump?pid={app.pid} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    s.settimeout(60)
    head = s.recv(4096)
    s.close()
    return head


def mid_snapshot(port, tmp, app, dm, base_sessions, base_rss):
    # The client leaves mid-snapshot.
    client_gone(port, app)
    check(settle(lambda: runtime_sessions(port), base_sessions, 60) == base_sessions,
          f"client gone: dotmon_runtime_sessions back to {base_sessions}")
    time.sleep(0.5)
    op = last_op(port, app.pid)
    check(op.get("status") in ("Cancelled", "Succeeded"), f"client gone: the operation ended ({op.get('status')})")
    # The client leaves while the file is being written and sent.
    head = client_gone_downloading(port, app)
    check(head.startswith(b"HTTP/1.1 200"), f"client gone mid-file: the download had begun ({head[:40]!r})")
    check(settle(lambda: last_op(port, app.pid).get("status"), "Cancelled", 30) in ("Cancelled", "Succeeded"),
          f"client gone mid-file: the operation ended ({last_op(port, app.pid).get('status')})")
    # DELETE mid-snapshot.
    r, _ = request(port, f"/gcdump?pid={app.pid}&egressProvider=files")
    op_id = r.getheader("Location", "").rsplit("/", 1)[-1]
    st, d = get_json(port, f"/operations/{op_id}")
    rs, _ = request(port, f"/operations/{op_id}?stop=true", method="DELETE")
    check((d or {}).get("isStoppable") is False and rs.status == 400,
          f"a gcdump is not stoppable (isStoppable {(d or {}).get('isStoppable')}, ?stop=true: {rs.status})")
    rd, _ = request(port, f"/operations/{op_id}", method="DELETE")
    d = wait_op(port, op_id)
    check(rd.status in (200, 204) and d.get("status") in ("Cancelled", "Succeeded"),
          f"DELETE mid-snapshot: {rd.status}, the operation {d.get('status')}")
    check(settle(lambda: runtime_sessions(port), base_sessions, 60) == base_sessions, "DELETE: no session left")
    # The runtime killed mid-snapshot.
    victim = App(tmp)
    try:
        check(wait_listed(port, victim.pid), "a second app is listed")
        # A walk of several seconds, so that the kill lands inside it.
        victim.command(f"heap-graph {TIMEOUT_HEAP[0]} {TIMEOUT_HEAP[1]} {TIMEOUT_HEAP[2]}")
        out = {}

        def run():
            try:
                r, body = request(port, f"/gcdump?pid={victim.pid}")
                out["r"], out["body"] = r, body
            except (OSError, http.client.HTTPException) as e:
                out["err"] = e
        th = threading.Thread(target=run)
        th.start()
        time.sleep(0.5)
        victim.kill()
        th.join(120)
        r = out.get("r")
        check(r is None or r.status >= 400 or "err" in out,
              f"runtime killed: a problem or a cut response ({r.status if r else out.get('err')})")
        op = last_op(port, victim.pid)
        check(op.get("status") in ("Failed", "Cancelled", "Succeeded"), f"runtime killed: the operation {op.get('status')}")
    finally:
        victim.kill()
    check(settle(lambda: runtime_sessions(port), base_sessions, 60) == base_sessions,
          f"runtime killed: dotmon_runtime_sessions back to {base_sessions}")
    # Afterwards everything still works.
    app.command("heap-graph-free")
    app.command(f"heap-graph {N} {M} {SIZE}")
    r, body = request(port, f"/gcdump?pid={app.pid}")
    check(r.status == 200 and len(body) > 0, f"a /gcdump after all that: {r.status}, {len(body)} bytes")
    r, body = request(port, f"/trace?pid={app.pid}&durationSeconds=1&profile=Metrics")
    check(r.status == 200 and body.startswith(b"Nettrace"), f"a /trace after all that: {r.status}")
    check(settle(lambda: runtime_sessions(port), base_sessions) == base_sessions, "no session left at the end")
    time.sleep(1)
    rss = status_kib(dm.pid)
    if sanitized(dm.pid):
        print(f"(sanitizer build: its allocator keeps freed memory; RSS {base_rss} -> {rss} kB not checked)")
    else:
        check(rss <= base_rss + 24 * 1024, f"dotmon's RSS back near its baseline: {base_rss} -> {rss} kB")


def shutdown_mid_snapshot(port, tmp, app, dm, exe):
    """SIGTERM while the runtime walks its heap: 503 at once, dotmon exits 0, and the runtime is
    left able to take the next snapshot (dotnet-gcdump's)."""
    app.command(f"heap-graph {BIG[0]} {BIG[1]} {BIG[2]}")
    out = {}

    def run():
        try:
            r, body = request(port, f"/gcdump?pid={app.pid}")
            out["status"] = r.status
        except (OSError, http.client.HTTPException) as e:
            out["status"] = repr(e)
    th = threading.Thread(target=run)
    th.start()
    time.sleep(0.3)
    t0 = time.time()
    dm.terminate()
    try:
        dm.wait(30)
    except subprocess.TimeoutExpired:
        pass
    th.join(30)
    check(dm.returncode == 0 and out.get("status") in (503, 200),
          f"SIGTERM mid-snapshot: {out.get('status')}, dotmon exits {dm.returncode} in {time.time() - t0:.2f} s")
    p = subprocess.run([exe, "collect", "-p", str(app.pid), "-o", os.path.join(tmp, "after.gcdump")],
                       capture_output=True, text=True, env=env(tmp), timeout=120)
    check(p.returncode == 0, f"the runtime takes dotnet-gcdump's snapshot after that ({p.returncode})")


def main():
    # --memory-only (the normal build, label perf): what happens to one dotmon between its RSS
    # baseline and the check after a snapshot cut short; the GCDump limits (a dotmon each) and the
    # shutdown mid-snapshot run in the sanitizer build.
    memory_only = sys.argv[1:] == ["--memory-only"]
    if not os.environ.get("DOTNET_EXE"):
        print("skipped: no dotnet")
        return 77
    exe, dll = tools_dir()
    if exe is None or dll is None:
        print("skipped: dotnet-gcdump cannot be installed (no NuGet?)")
        return 77
    tmp = tempfile.mkdtemp(prefix="gcdump")
    os.chmod(tmp, 0o700)
    files = os.path.join(tmp, "files")
    app, dm = None, None
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    try:
        app = App(tmp)
        reply = app.command(f"heap-graph {N} {M} {SIZE}")
        check(reply.startswith("ok"), f"the app holds the graph: {reply}")
        port = free_port()
        dm = start_with(tmp, port, log, {"Egress": {"FileSystem": {"files": {"DirectoryPath": files}}},
                                         "RequestLimits": {"GCDump": {"MaxConcurrency": 1}}}, app.pid)
        base_sessions = runtime_sessions(port)
        # The summaries first: a foreign tool's session (dotnet-gcdump's, below) that the runtime
        # has not yet torn down holds the Type keyword, and a walk then names few types
        # (docs/gcdump.md §1; type_keyword_held shows it on purpose).
        summary(port, app)
        summary_egress(port, app, files)
        if not memory_only:
            type_keyword_held(port, app, log)
        known_graph(port, app, exe, dll, tmp)
        time.sleep(1)
        base_rss = status_kib(dm.pid)
        bad_input(port, app)
        concurrency_and_egress(port, app, files, dll, tmp)
        if not memory_only:  # (each with a dotmon of its own: nothing of dm's RSS)
            limit_case(app, tmp, "MaxNodes", 1000, 507, "a heap over GCDump:MaxNodes")
            # A walk of millions of objects takes seconds: past a 1 s deadline the session is
            # stopped. With dotnet-gcdump's 1024 MB buffer: that walk outgrows 256 MB, and the
            # events the runtime then drops would end it (502) before the deadline once dotmon
            # reads fast enough.
            limit_case(app, tmp, "TimeoutSeconds", 1, 504, "a walk longer than GCDump:TimeoutSeconds",
                       before=f"heap-graph {TIMEOUT_HEAP[0]} {TIMEOUT_HEAP[1]} {TIMEOUT_HEAP[2]}",
                       extra={"BufferSizeMB": 1024})
        mid_snapshot(port, tmp, app, dm, base_sessions, base_rss)
        if not memory_only:
            shutdown_mid_snapshot(port, tmp, app, dm, exe)
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        if dm is not None:
            log.flush()
            log.seek(0)
            text = log.read()
            check(dm.returncode == 0 and dmtest.sanitizer_report(text) is None,
                  f"dotmon exits 0, no sanitizer report (no leak under ASan): {dm.returncode}")
        if FAILS:
            log.flush()
            log.seek(0)
            sys.stderr.write(log.read()[-6000:])
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED: " + "; ".join(FAILS) if FAILS else "all ok")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
