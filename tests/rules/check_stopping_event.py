#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CollectTrace's StoppingEvent, end to end: the real .NET test app, the real dotmon.

A Startup rule collects a trace of the app's EventSource DotMon-TestApp (Duration 60 s) to a
FileSystem egress provider, with StoppingEvent {ProviderName DotMon-TestApp, EventName Blob,
PayloadFilter {Text: "mark", Index: "-1"}}, then an Execute (after the trace: WaitForCompletion
and $(Actions.t.EgressPath)) records the file's path:
  - Blob events whose payload does not match (`events 5 4`: Text "xxxx", Index 0..4) do not stop
    the trace: after them the operation is still Running and the Execute has not run;
  - the matching one (`events-mark`: Index -1, Text "mark") stops it gracefully within a few
    seconds (well before 60 s): the Execute runs, the operation Succeeded with trace.stoppingEvent
    "seen", and the file is a COMPLETE nettrace by the C checker, holding the "mark" event and
    the rundown that StopTracing asks for; TraceEvent (tracecheck) reads it whole and names the
    events "Blob" (the name dotnet-monitor matches) with the mark's payload (Index -1).
A second rule's StoppingEvent names a field Blob does not have (PayloadFilter {Nope: "x"}): as in
dotnet-monitor it never matches, dotmon logs the mismatch, the trace runs its whole Duration (8 s)
despite the mark, and its operation says stoppingEvent "payloadFilterMismatch".
Configuration: a StoppingEvent whose provider is not among the Providers stops dotmon at start
with dotnet-monitor's message.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT, DOTMON_NETTRACE_CHECK,
DOTMON_TRACECHECK (optional: the TraceEvent reader).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the sibling imported below
from check_rules_run import SCRIPT, execute, lines, start, wait_for  # noqa: E402
from dmtest import FAILS, App, check, fetch, free_port, start_dotmon, stop  # noqa: E402

APP = "DotMon-TestApp"


def get(url):
    """(status, the JSON body, or None for an error status or a body that is not JSON)."""
    st, _, body = fetch(url, timeout=10)
    if st != 200:
        return st, None
    try:
        return st, json.loads(body.decode() or "null")
    except ValueError:
        return 0, None


def trace_action(name, payload_filter, duration):
    return {"Name": name, "Type": "CollectTrace", "WaitForCompletion": True,
            "Settings": {"Providers": [{"Name": APP, "EventLevel": "Informational"}],
                         "Duration": duration, "BufferSizeMegabytes": 16, "Egress": "files",
                         "StoppingEvent": {"ProviderName": APP, "EventName": "Blob",
                                           "PayloadFilter": payload_filter}}}


def trace_ops(api, pid):
    """{operationId: details} of the process's operations (the two traces: nothing else runs)."""
    _, ops = get(f"{api}/operations")
    found = {}
    for o in ops or []:
        if o.get("process", {}).get("pid") != pid:
            continue
        s2, d = get(f"{api}/operations/{o.get('operationId')}/details")
        if s2 in (200, 201) and isinstance(d, dict):
            found[o["operationId"]] = d
    return found


def by_path(ops, path):
    for d in ops.values():
        if d.get("resourceLocation") == path:
            return d
    return {}


def nettrace_check(path):
    p = subprocess.run([os.environ["DOTMON_NETTRACE_CHECK"], "--find", "mark", "--find", "xxxx", path],
                       capture_output=True, text=True, timeout=120)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"verdict": "unreadable", "stderr": p.stderr[-500:]}


def tracecheck(path):
    dll = os.environ.get("DOTMON_TRACECHECK", "")
    if not dll or not os.path.isfile(dll):
        return None
    p = subprocess.run([os.environ.get("DOTNET_EXE") or "dotnet", dll, path, "--dynamic-names",
                        "--payloads", f"{APP}#1"], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "stderr": p.stderr[-500:]}


def stopping(tmp):
    script = os.path.join(tmp, "record.sh")  # the Execute: appends its arguments to a file
    with open(os.open(script, os.O_WRONLY | os.O_CREAT, 0o755), "w") as f:
        f.write(SCRIPT)
    out = os.path.join(tmp, "actions.txt")
    files = os.path.join(tmp, "artifacts")
    cfg = {
        "Egress": {"FileSystem": {"files": {"DirectoryPath": files}}},
        "CollectionRules": {
            "Stop": {"Filters": [{"Key": "ProcessName", "Value": "TestApp"}], "Trigger": {"Type": "Startup"},
                     "Actions": [trace_action("t", {"Text": "mark", "Index": "-1"}, "00:01:00"),
                                 execute(script, out, "stop $(Actions.t.EgressPath)")]},
            "Mismatch": {"Filters": [{"Key": "ProcessName", "Value": "TestApp"}], "Trigger": {"Type": "Startup"},
                         "Actions": [trace_action("m", {"Nope": "x"}, "00:00:08"),
                                     execute(script, out, "mismatch $(Actions.m.EgressPath)")]},
        },
    }
    path = os.path.join(tmp, "settings.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    app = App(tmp)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = None
    try:
        dm = start_dotmon(tmp, port, log, [app.pid], args=("--configuration-file-path", path))

        def running():
            ops = trace_ops(api, app.pid)
            return len(ops) == 2 and all(d.get("status") == "Running" for d in ops.values())

        check(wait_for(running, 20), "both traces are Running")
        started = time.time()
        time.sleep(1)  # the sessions' first events reach the runtime's buffers
        check(app.command("events 5 4") == "ok events n=5", "the app wrote 5 Blobs that do not match")
        time.sleep(3)
        ops = trace_ops(api, app.pid)
        check(lines(out) == [] and all(d.get("status") == "Running" for d in ops.values()),
              f"non-matching Blobs did not stop the trace ({lines(out)}, "
              f"{[d.get('status') for d in ops.values()]})")

        marked = time.time()
        check(app.command("events-mark").startswith("ok events-mark"), "the app wrote the matching Blob")
        wait_for(lambda: any(l.startswith("stop ") for l in lines(out)), 30)
        took = time.time() - marked
        got = [l for l in lines(out) if l.startswith("stop ")]
        check(bool(got) and took < 10,
              f"the StoppingEvent ended the trace {took:.1f} s after it was written (Duration 60 s): {got}")
        print(f"time from the matching event to the Execute after the trace: {took:.2f} s", flush=True)
        trace = got[0].split(" ", 1)[1] if got else ""
        ops = trace_ops(api, app.pid)
        d = by_path(ops, trace)
        check(d.get("status") == "Succeeded" and d.get("trace", {}).get("stoppingEvent") == "seen" and
              d.get("trace", {}).get("verdict") == "complete",
              f"the operation Succeeded, stoppingEvent seen, complete: "
              f"{ {k: d.get(k) for k in ('status', 'trace')} }")

        v = nettrace_check(trace) if os.path.isfile(trace) else {}
        providers = v.get("providers", {})
        check(v.get("verdict") == "COMPLETE", f"the C checker: the file is a COMPLETE nettrace ({v.get('verdict')})")
        check(v.get("found", {}).get("mark", 0) >= 1 and v.get("found", {}).get("xxxx", 0) >= 5,
              f"it holds the 5 non-matching Blobs and the matching one: {v.get('found')}")
        check(providers.get("Microsoft-Windows-DotNETRuntimeRundown", 0) > 0,
              f"it ends with the rundown a graceful stop asks for: {providers}")
        te = tracecheck(trace) if os.path.isfile(trace) else None
        if te is None:
            print("skip TraceEvent's reading (DOTMON_TRACECHECK not built)", flush=True)
        else:
            blobs = te.get("payloads", {}).get(f"{APP}#1", [])
            check(te.get("ok") is True and te.get("dynamicNames", {}).get(f"{APP}|Blob", 0) >= 6,
                  f"TraceEvent reads it whole and names the events Blob: {te.get('dynamicNames')}")
            check(any(b.get("Index") == -1 and b.get("Text") == "mark" for b in blobs),
                  f"TraceEvent sees the mark (Index -1, Text mark): {blobs[-2:]}")

        wait_for(lambda: any(l.startswith("mismatch ") for l in lines(out)), 30)
        ran, after = time.time() - started, time.time() - marked
        got = [l for l in lines(out) if l.startswith("mismatch ")]
        check(bool(got) and ran >= 6 and after >= 2,
              f"a PayloadFilter field Blob lacks: the mark did not stop that trace, it ran its 8 s "
              f"({ran:.1f} s, {after:.1f} s after the mark): {got}")
        mm = got[0].split(" ", 1)[1] if got else ""
        d = by_path(trace_ops(api, app.pid), mm)
        check(d.get("status") == "Succeeded" and
              d.get("trace", {}).get("stoppingEvent") == "payloadFilterMismatch",
              f"its operation says payloadFilterMismatch: { {k: d.get(k) for k in ('status', 'trace')} }")
        log.flush()
        log.seek(0)
        text = log.read()
        log.seek(0, os.SEEK_END)
        check("StoppingEvent's PayloadFilter cannot match" in text and "'Nope'" in text,
              "dotmon logged the mismatch")
        check("the StoppingEvent was seen" in text, "dotmon logged the stopping event")
    finally:
        app.kill()
        stop(dm)
        if FAILS:
            log.flush()
            log.seek(0)
            sys.stderr.write(log.read()[-6000:])
        log.close()
    check(dm is not None and dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode if dm else None})")


def config_error(tmp):
    cfg = {"Egress": {"FileSystem": {"files": {"DirectoryPath": tmp}}},
           "CollectionRules": {"Bad": {"Trigger": {"Type": "Startup"},
                                       "Actions": [{"Type": "CollectTrace", "Settings": {
                                           "Providers": [{"Name": APP}], "Egress": "files",
                                           "StoppingEvent": {"ProviderName": "Other", "EventName": "E"}}}]}}}
    path = os.path.join(tmp, "dotmon-bad.log")
    with open(path, "w") as log:
        dm = start(tmp, cfg, free_port(), log)
        wait_for(lambda: dm.poll() is not None, 20)
        stop(dm)
    with open(path) as f:
        said = [l for l in f if "StoppingEvent" in l]
    check(dm.returncode not in (None, 0), f"a StoppingEvent provider not in Providers: dotmon refuses to start ({dm.returncode})")
    check(any("CollectionRules:Bad:Actions:0:Settings:StoppingEvent" in l and
              "The StoppingEvent field specified the provider 'Other' but it was not found in the Providers field."
              in l for l in said), f"with dotnet-monitor's message: {said}")


def main():
    tmp = tempfile.mkdtemp(prefix="dmstop")
    try:
        os.chmod(tmp, 0o700)
        config_error(tmp)
        stopping(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
