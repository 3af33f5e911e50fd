#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CollectTrace's ring mode (PreTriggerSeconds, issue 18) end to end: the real .NET test app, the
real dotmon, TraceEvent (tracecheck) reading the files.

The app runs a GC.Collect every 200 ms (--gc-ms). One rule: GCPause (ThresholdMs 100) with a ring
CollectTrace (Microsoft-Windows-DotNETRuntime, GC keyword 0x1, Verbose; PreTriggerSeconds 4,
PostTriggerSeconds 2, RingBufferSizeMB 16, FileSystem egress) then an Execute recording
$(Actions.t.EgressPath). The ring runs for > PreTriggerSeconds, then `gc-pause 2000000` (a blocking
gen2 GC of most of a second):
  - the rule fires once; the file is a COMPLETE nettrace (the C checker) that TraceEvent reads
    whole; it holds the slow GC's GCStart and GCEnd (the span above the threshold), events from at
    least PreTriggerSeconds - 1 s before that GC, and none older than PreTriggerSeconds + 1 s
    (+ SLACK_S for block granularity: the ring drops whole blocks, so the oldest kept block may
    begin up to a block's span before the age cutoff) before the trigger;
  - the rule runs again and a fresh ring session starts;
  - GET /trace/snapshot (before the trigger) answers the ring as a COMPLETE nettrace spanning about
    PreTriggerSeconds, also to the egress provider; a rule without a ring is a 404 problem; the
    ring's use is in /collectionrules/Ring ("ring") and /metrics/dotmon (dotmon_ring_*);
  - the runtime killed with a full ring: its ring is gone, a new runtime gets its own (dotmon then
    holds exactly its two sessions: no leaked session);
  - the rules reloaded without the rule: no session left; reloaded with it: a new ring; dotmon
    stops cleanly.
Prints the trigger-to-file time and the span of the pre-trigger events.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT, DOTMON_NETTRACE_CHECK,
DOTMON_TRACECHECK (optional: the TraceEvent reader).
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the sibling imported below
from check_rules_run import SCRIPT, execute, get, lines, nettrace_verdict, start, stop_dotmon, wait_for, wait_listed  # noqa: E402
import re  # noqa: E402

from check_rules_gc import log_text  # noqa: E402
from check_rules_reload import write_settings  # noqa: E402
from dmtest import FAILS, App, check, fetch, free_port, runtime_sessions  # noqa: E402  (check_rules_run put support/ on the path)

PRE_S = 4
POST_S = 2
SLACK_S = 1.0
THRESHOLD_MS = 100  # `gc` and the --gc-ms GCs pause about a millisecond
LONG_NODES = 2000000
TICKS = 10_000_000  # .NET ticks per second
RUNTIME = "Microsoft-Windows-DotNETRuntime"


def tracecheck(path):
    dll = os.environ.get("DOTMON_TRACECHECK", "")
    if not dll or not os.path.isfile(dll):
        return None
    p = subprocess.run([os.environ.get("DOTNET_EXE") or "dotnet", dll, path, "--gc-events", "--times"],
                       capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"ok": False, "stderr": p.stderr[-500:]}


    except OSError as e:
        return 0, {}, str(e).encode()


def check_read(te, what):
    check(te.get("ok") is True and te.get("gcStart", 0) > 0 and te.get("gcEnd", 0) > 0,
          f"{what}: TraceEvent reads it whole ({ {k: te.get(k) for k in ('ok', 'events', 'gcStart', 'gcEnd', 'error')} })")


def trigger_gc(te, measured_ms):
    """The GC that fired the rule: the one whose GCStart..GCEnd is closest to the pause dotmon
    logged (gc-pause's building phase may have had a GC above the threshold before the slow one).
    Returns (its [Count, startTicks, endTicks], the slowest GC's)."""
    spans = [s for s in te.get("gcSpans", []) if s[1] > 0]
    if not spans:
        return [0, 0, 0], [0, 0, 0]
    fired = min(spans, key=lambda s: abs((s[2] - s[1]) / 1e4 - measured_ms))
    return fired, max(spans, key=lambda s: s[2] - s[1])


def run(tmp, script):
    out = os.path.join(tmp, "ring.txt")
    files = os.path.join(tmp, "artifacts")
    trace = {"Name": "t", "Type": "CollectTrace", "WaitForCompletion": True,
             "Settings": {"Providers": [{"Name": RUNTIME, "Keywords": "0x1", "EventLevel": "Verbose"}],
                          "PreTriggerSeconds": PRE_S, "PostTriggerSeconds": POST_S, "RingBufferSizeMB": 16,
                          "Egress": "files"}}
    cfg = {
        "Egress": {"FileSystem": {"files": {"DirectoryPath": files}}},
        "CollectionRules": {
            "Ring": {"Filters": [{"Key": "ProcessName", "Value": "TestApp"}],
                     "Trigger": {"Type": "GCPause", "Settings": {"ThresholdMs": THRESHOLD_MS}},
                     "Actions": [trace, execute(script, out, "ring $(Actions.t.EgressPath)")]},
        },
    }
    app = App(tmp, "--gc-ms", "200")
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = start(tmp, cfg, port, log)
    pid = app.pid
    started = f"collection rule Ring of process {pid}: ring session started"
    try:
        check(wait_listed(port, pid), f"dotmon lists the app {pid}")
        check(wait_for(lambda: started in log_text(log), 20), "the ring session started")
        time.sleep(PRE_S + 3)  # the ring fills beyond PreTriggerSeconds

        # GET /trace/snapshot: the ring now, the ring going on.
        t = time.time()
        st, hdr, body = fetch(f"{api}/trace/snapshot?pid={pid}")
        took_snap = time.time() - t
        snap = os.path.join(tmp, "snapshot.nettrace")
        with open(snap, "wb") as f:
            f.write(body)
        check(st == 200 and hdr.get("Content-Type") == "application/octet-stream" and
              "attachment" in (hdr.get("Content-Disposition") or "") and ".nettrace" in hdr.get("Content-Disposition"),
              f"/trace/snapshot: 200 application/octet-stream, attachment: {st} {dict(hdr or {})}")
        v = nettrace_verdict(snap)
        check(v.get("verdict") == "COMPLETE" and v.get("events", 0) > 0,
              f"/trace/snapshot: a COMPLETE nettrace ({ {k: v.get(k) for k in ('verdict', 'events')} })")
        te = tracecheck(snap)
        if te is not None:
            check_read(te, "snapshot")
            span = (te.get("lastTimeUtcTicks", 0) - te.get("firstTimeUtcTicks", 0)) / TICKS
            check(PRE_S - 1 <= span <= PRE_S + 1 + SLACK_S,
                  f"/trace/snapshot: its events span {span:.2f} s (PreTriggerSeconds {PRE_S})")
            print(f"snapshot: {len(body)} bytes, {te.get('events')} events over {span:.2f} s, "
                  f"answered in {took_snap:.2f} s", flush=True)
        st, ctype, body = get(f"{api}/trace/snapshot?pid={pid}&rule=Nope")
        check(st == 404 and ctype.startswith("application/problem+json") and
              "configure PreTriggerSeconds on a CollectTrace action" in body,
              f"/trace/snapshot of a rule without a ring: 404 problem+json: {st} {body}")
        st, _, body = get(f"{api}/collectionrules/Ring?pid={pid}")
        ring = json.loads(body).get("ring", {}) if st == 200 else {}
        check(ring.get("running") is True and 0 < ring.get("bytes", 0) <= ring.get("bytesLimit", 0) == 16 << 20 and
              PRE_S - 1 <= ring.get("spanSeconds", 0) <= PRE_S + 1 + SLACK_S and ring.get("blocksDiscarded", 0) > 0,
              f"/collectionrules/Ring has the ring: {ring}")
        st, _, body = get(f"{api}/metrics/dotmon")
        got = {}
        for line in body.splitlines():
            if line.startswith("dotmon_ring_") and f'pid="{pid}"' in line and 'rule="Ring"' in line:
                got[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
        check(st == 200 and 0 < got.get("dotmon_ring_bytes", 0) <= got.get("dotmon_ring_bytes_limit", 0) == 16 << 20 and
              got.get("dotmon_ring_events", 0) > 0 and got.get("dotmon_ring_blocks_discarded_total", 0) > 0 and
              got.get("dotmon_ring_events_discarded_total", 0) > 0,
              f"/metrics has the ring's dotmon_ring_* lines: {st} {got}")
        print(f"ring: {ring.get('bytes')} bytes of {ring.get('bytesLimit')}, {ring.get('spanSeconds'):.2f} s, "
              f"{ring.get('blocksDiscarded')} blocks discarded", flush=True)

        # gc-pause's GC is 0.15 to 1.6 s depending on the machine; another one if it fell short.
        for attempt in range(3):
            reply = app.command(f"gc-pause {LONG_NODES}")
            fired_at = time.time()
            check(reply.startswith("ok gc-pause"), f"gc-pause: {reply}")
            print(f"gc-pause: {reply}", flush=True)
            if wait_for(lambda: "trigger GCPause fired" in log_text(log), 5):
                break
        wait_for(lambda: any(l.startswith("ring ") for l in lines(out)), 60)
        took = time.time() - fired_at
        got = [l for l in lines(out) if l.startswith("ring ")]
        path = got[0].split(" ", 1)[1] if got else ""
        check(bool(got) and os.path.dirname(path) == files and path.endswith(".nettrace"),
              f"the rule fired and the Execute got the file ({took:.1f} s after the pause): {got}")
        print(f"from the long GC to the file stored: {took:.2f} s (PostTriggerSeconds {POST_S})", flush=True)
        v = nettrace_verdict(path) if os.path.isfile(path) else {}
        check(v.get("verdict") == "COMPLETE" and v.get("events", 0) > 0,
              f"the C checker reads a COMPLETE nettrace ({ {k: v.get(k) for k in ('verdict', 'events')} })")
        te = tracecheck(path) if os.path.isfile(path) else None
        if te is None:
            print("skip TraceEvent's reading (DOTMON_TRACECHECK not built)", flush=True)
        else:
            check_read(te, "trigger file")
            m = re.search(rf"collection rule Ring of process {pid}: trigger GCPause fired "
                          r"\(a GC pause of ([0-9.]+) ms\)", log_text(log))
            measured = float(m.group(1)) if m else 0.0
            fired, slow = trigger_gc(te, measured)
            slow_ms = (slow[2] - slow[1]) / 1e4
            check(slow_ms >= THRESHOLD_MS and slow[2] >= fired[2],
                  f"it holds the slow GC's GCStart and GCEnd ({slow_ms:.0f} ms; gc-pause said {reply})")
            before = (fired[2] - te.get("firstTimeUtcTicks", 0)) / TICKS
            after = (te.get("lastTimeUtcTicks", 0) - fired[2]) / TICKS
            check(PRE_S - 1 <= before <= PRE_S + 1 + SLACK_S,
                  f"its events begin {before:.2f} s before the GC that fired ({measured} ms by dotmon) "
                  f"ended (PreTriggerSeconds {PRE_S}, want {PRE_S - 1}..{PRE_S + 1 + SLACK_S})")
            check(after >= POST_S - 0.5, f"it goes on {after:.2f} s after it (PostTriggerSeconds {POST_S})")
            print(f"trigger file: {te.get('events')} events, {before:.2f} s of them before the GC that fired "
                  f"({measured} ms), {after:.2f} s after; the slowest GC {slow_ms:.0f} ms", flush=True)

        check(wait_for(lambda: log_text(log).count(started) >= 2, 20),
              "after the action a fresh ring session started")
        time.sleep(1)
        check(len([l for l in lines(out) if l.startswith("ring ")]) == 1, f"the rule fired once: {lines(out)}")
        st, _, body = get(f"{api}/collectionrules/Ring?pid={pid}")
        d = json.loads(body) if st == 200 else {}
        check(st == 200 and d.get("lifetimeOccurrences") == 1 and d.get("state") == "Running",
              f"/collectionrules/Ring: one occurrence, Running again: {st} {body}")

        # GET /trace/snapshot to an egress provider: 202 and the file in the provider.
        st, hdr, _ = fetch(f"{api}/trace/snapshot?pid={pid}&egressProvider=files")
        check(st == 202 and "/operations/" in (hdr.get("Location") or ""),
              f"/trace/snapshot?egressProvider=files: 202 with the operation: {st}")
        stored = lambda: [f for f in os.listdir(files) if f.endswith(".nettrace") and f != os.path.basename(path)]
        check(wait_for(lambda: len(stored()) == 1, 10) and
              nettrace_verdict(os.path.join(files, stored()[0])).get("verdict") == "COMPLETE",
              f"the snapshot is a COMPLETE nettrace in the provider: {stored()}")

        # The runtime goes away with a full ring: nothing left; a new runtime gets its own ring.
        app.kill()
        app = App(tmp, "--gc-ms", "200")
        pid2 = app.pid
        check(wait_for(lambda: f"collection rule Ring of process {pid2}: ring session started" in log_text(log), 30),
              f"a new runtime ({pid2}) gets a ring session")

        check(wait_for(lambda: runtime_sessions(port) == 2, 15),
              f"dotmon holds 2 sessions: the new runtime's trigger session and ring ({runtime_sessions(port)})")
        metrics = get(f"{api}/metrics/dotmon")[2]
        check(f'pid="{pid}"' not in metrics and f'dotmon_ring_bytes{{pid="{pid2}"' in metrics,
              "/metrics: the ring of the runtime that went away is gone, the new one's is there")

        # Reloaded without the rule: the ring session is stopped (no session left); back in: a new one.
        base = {k: v for k, v in cfg.items() if k != "CollectionRules"}
        write_settings(os.path.join(tmp, f"settings-{port}.json"), None, base)
        check(wait_for(lambda: "collection rules reloaded: 0 rule(s)" in log_text(log), 15) and
              wait_for(lambda: runtime_sessions(port) == 0, 15),
              f"reloaded without the rule: dotmon holds no session ({runtime_sessions(port)})")
        write_settings(os.path.join(tmp, f"settings-{port}.json"), cfg["CollectionRules"], base)
        check(wait_for(lambda: log_text(log).count(f"collection rule Ring of process {pid2}: ring session started") == 2,
                       20) and wait_for(lambda: runtime_sessions(port) == 2, 15),
              f"reloaded with the rule again: a new ring session ({runtime_sessions(port)} sessions)")
    finally:
        app.kill()
        stop_dotmon(dm, log, 8000)
    check(dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode})")


def main():
    with tempfile.TemporaryDirectory(prefix="dmrulesring") as tmp:
        os.chmod(tmp, 0o700)
        script = os.path.join(tmp, "record.sh")
        with open(script, "w") as f:
            f.write(SCRIPT)
        os.chmod(script, 0o755)
        run(tmp, script)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
