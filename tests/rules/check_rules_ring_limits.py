#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CollectTrace's ring mode (issue 18) under load and when things go wrong, against the real .NET
test app:

  1. memory: a busy app (a GC.Collect every 5 ms and `work` loops between) with a ring of
     RingBufferSizeMB 4 and PreTriggerSeconds 3600 (the size decides) for --seconds (45 in
     `make test`; bench/bench_ring.py runs 10 minutes): the ring fills to its cap and stays there
     (blocks discarded, never more than the cap), and dotmon's peak RSS (VmHWM, sampled every 2 s)
     stays under RingBufferSizeMB + 8 MB (not checked under ASan, whose shadow memory is not
     dotmon's: ctest runs this part, --memory-only, in the normal build only, label perf);
  2. an egress that fails after the trigger (its folder cannot be made: a path below a file):
     the rule fires (GCCount: 3 induced gen2 GCs), the action's operation ends Failed naming the
     folder's error, no file is left anywhere, the rule stays Running, a fresh ring session starts
     and dotmon still holds exactly its two sessions (trigger + ring: nothing leaked);
  3. the runtime killed while the ring is full and a trigger's file is being written: dotmon
     keeps running, holds no session for it, and a new runtime gets its ring;
  4. a rule with ActionCount 1 fires and Finishes: /trace/snapshot of its ring answers 409
     problem+json naming the rule and that it finished (every time), not "retry" (issue 31).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT, DOTMON_NETTRACE_CHECK.
"""

import argparse
import json
import os
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree for the siblings imported below
from check_rules_run import get, nettrace_verdict, start, stop_dotmon, wait_for, wait_listed  # noqa: E402
from check_rules_gc import log_text  # noqa: E402
from dmtest import FAILS, App, check, fetch, free_port, runtime_sessions, sanitized, status_kib  # noqa: E402

RUNTIME = "Microsoft-Windows-DotNETRuntime"
RING_MB = 4


def ring_action(egress, ring_mb, pre_s, post_s=1):
    return {"Name": "t", "Type": "CollectTrace",
            "Settings": {"Providers": [{"Name": RUNTIME, "Keywords": "0x1", "EventLevel": "Verbose"}],
                         "PreTriggerSeconds": pre_s, "PostTriggerSeconds": post_s, "RingBufferSizeMB": ring_mb,
                         "Egress": egress}}


def ring_of(api, rule, pid):
    st, _, body = get(f"{api}/collectionrules/{rule}?pid={pid}")
    return json.loads(body).get("ring", {}) if st == 200 else {}


def memory(tmp, seconds):
    """A busy app, a 4 MB ring for `seconds`: the cap holds and so does dotmon's RSS."""
    cfg = {"Egress": {"FileSystem": {"files": {"DirectoryPath": os.path.join(tmp, "mem-files")}}},
           "CollectionRules": {"Ring": {
               "Trigger": {"Type": "GCPause", "Settings": {"ThresholdMs": 3600000}},
               "Actions": [ring_action("files", RING_MB, 3600)]}}}
    app = App(tmp, "--gc-ms", "5")
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon-mem.log"), "w+")
    dm = start(tmp, cfg, port, log)
    stop_work = threading.Event()

    def busy():
        try:
            while not stop_work.is_set():
                app.command("work 2000")
        except (RuntimeError, OSError, ValueError):
            pass  # the app was killed at the end

    worker = threading.Thread(target=busy, daemon=True)
    try:
        check(wait_listed(port, app.pid), f"dotmon lists the app {app.pid}")
        check(wait_for(lambda: "ring session started" in log_text(log), 20), "the ring session started")
        worker.start()
        t0 = time.time()
        peak_ring, samples, full = 0, [], False
        limit = RING_MB << 20
        # A short soak (ASan) goes on until the ring is full and discarding, up to 45 s.
        while time.time() - t0 < seconds or (not full and time.time() - t0 < 45):
            time.sleep(2)
            ring = ring_of(api, "Ring", app.pid)
            full = ring.get("peakBytes", 0) >= limit * 0.9 and ring.get("blocksDiscarded", 0) > 0
            peak_ring = max(peak_ring, ring.get("bytes", 0))
            samples.append((time.time() - t0, status_kib(dm.pid, "VmRSS"), ring.get("bytes", 0)))
        hwm = status_kib(dm.pid, "VmHWM")
        ring = ring_of(api, "Ring", app.pid)
        check(ring.get("bytesLimit") == limit and peak_ring <= limit,
              f"the ring never held more than RingBufferSizeMB ({peak_ring} <= {limit}): {ring}")
        check(ring.get("peakBytes", 0) >= limit * 0.9 and ring.get("bytes", 0) > 0 and
              ring.get("blocksDiscarded", 0) > 0,
              f"the busy app filled the ring to its cap and old blocks went: {ring}")
        print(f"after {time.time() - t0:.0f} s: ring {ring.get('bytes', 0) / 1048576:.2f} MiB of {RING_MB} MiB over "
              f"{ring.get('spanSeconds', 0):.1f} s, {ring.get('blocksDiscarded')} blocks / "
              f"{ring.get('eventsDiscarded')} events discarded; dotmon VmRSS "
              f"{samples[-1][1] / 1024:.1f} MiB, VmHWM {hwm / 1024:.1f} MiB", flush=True)
        for t, rss, used in samples[:: max(1, len(samples) // 6)]:
            print(f"  t={t:5.1f} s VmRSS {rss / 1024:5.1f} MiB ring {used / 1048576:5.2f} MiB", flush=True)
        if sanitized(dm.pid):
            print("skip the RSS bound under ASan", flush=True)
        else:
            check(0 < hwm < (RING_MB + 8) * 1024,
                  f"dotmon's peak RSS {hwm / 1024:.1f} MiB < RingBufferSizeMB + 8 = {RING_MB + 8} MiB")
    finally:
        stop_work.set()
        worker.join(5)
        app.kill()
        worker.join(5)
        stop_dotmon(dm, log, 6000)
    check(dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode})")


def failures(tmp):
    """An egress that fails after the trigger; the runtime killed while a trigger's file is written."""
    blocker = os.path.join(tmp, "not-a-folder")
    with open(blocker, "w") as f:
        f.write("a file where the egress wants a folder\n")
    bad_dir = os.path.join(blocker, "traces")
    good_dir = os.path.join(tmp, "fail-files")
    trigger = {"Type": "GCCount", "Settings": {"Count": 3, "Reasons": ["Induced"],
                                               "SlidingWindowDuration": "00:00:05"}}
    cfg = {"Egress": {"FileSystem": {"bad": {"DirectoryPath": bad_dir},
                                     "good": {"DirectoryPath": good_dir}}},
           "CollectionRules": {
               "Bad": {"Filters": [{"Key": "CommandLine", "Value": "ring-bad", "MatchType": "Contains"}],
                       "Trigger": trigger, "Actions": [ring_action("bad", 8, 3)]},
               "Good": {"Filters": [{"Key": "CommandLine", "Value": "ring-good", "MatchType": "Contains"}],
                        "Trigger": trigger, "Actions": [ring_action("good", 8, 3, post_s=5)]},
               "Once": {"Filters": [{"Key": "CommandLine", "Value": "ring-once", "MatchType": "Contains"}],
                        "Trigger": trigger, "Actions": [ring_action("good", 4, 1)],
                        "Limits": {"ActionCount": 1}}}}
    app = App(tmp, "ring-bad")
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon-fail.log"), "w+")
    dm = start(tmp, cfg, port, log)
    app2 = None
    try:
        pid = app.pid
        started = f"collection rule Bad of process {pid}: ring session started"
        check(wait_listed(port, pid), f"dotmon lists the app {pid}")
        check(wait_for(lambda: started in log_text(log), 20), "the ring session started")
        time.sleep(4)
        check(wait_for(lambda: runtime_sessions(port) == 2, 10), f"dotmon holds the trigger and ring sessions ({runtime_sessions(port)})")
        reply = app.command("collect 3 2")
        check(reply.startswith("ok collect n=3"), f"collect: {reply}")
        check(wait_for(lambda: "collection rule Bad of process" in log_text(log) and
                       "trigger GCCount fired" in log_text(log), 15), "the rule fired")

        def failed_op():
            st, _, body = get(f"{api}/operations")
            ops = json.loads(body) if st == 200 else []
            return [o for o in ops if o.get("status") == "Failed"]

        check(wait_for(lambda: failed_op(), 20), f"the action's operation ended Failed: {get(f'{api}/operations')[2]}")
        ops = failed_op()
        op = ops[0] if ops else {}
        st, _, body = get(f"{api}/operations/{op.get('operationId', 'x')}")
        detail = json.loads(body).get("error", {}) if st == 200 else {}
        text = json.dumps(detail)
        check("Not a directory" in text or "not-a-folder" in text,
              f"the operation names the folder's error: {st} {body}")
        print(f"failed operation: {text}", flush=True)
        check(not os.path.isdir(bad_dir) and os.listdir(tmp).count("not-a-folder") == 1,
              "no folder was made below the file")
        check(wait_for(lambda: log_text(log).count(started) >= 2, 20), "a fresh ring session started after it")
        st, _, body = get(f"{api}/collectionrules/Bad?pid={pid}")
        d = json.loads(body) if st == 200 else {}
        check(d.get("state") == "Running" and d.get("lifetimeOccurrences") == 1,
              f"/collectionrules/Bad: Running, one occurrence: {st} {body}")
        check(wait_for(lambda: runtime_sessions(port) == 2, 10), f"still exactly two sessions ({runtime_sessions(port)})")

        # A second runtime whose trigger's file is being written (PostTriggerSeconds 5) when it dies.
        app2 = App(tmp, "ring-good")
        pid2 = app2.pid
        check(wait_for(lambda: f"collection rule Good of process {pid2}: ring session started" in log_text(log), 20),
              f"the second runtime ({pid2}) gets a ring session")
        check(wait_for(lambda: runtime_sessions(port) == 4, 10), f"four sessions now ({runtime_sessions(port)})")
        time.sleep(2)
        reply = app2.command("collect 3 2")
        check(wait_for(lambda: f"collection rule Good of process {pid2}: trigger GCCount fired" in log_text(log), 15),
              f"the second rule fired ({reply})")
        time.sleep(1.5)  # inside PostTriggerSeconds: the file is being written
        app2.kill()
        app2 = None
        check(wait_for(lambda: runtime_sessions(port) == 2, 15), f"its sessions are gone ({runtime_sessions(port)} left)")
        left = [f for f in os.listdir(good_dir)] if os.path.isdir(good_dir) else []
        # What the ring and the runtime gave before it died is stored as a file that reads to its
        # last whole block (no partial file visible while it is written: egress renames).
        for name in left:
            v = nettrace_verdict(os.path.join(good_dir, name))
            check(not name.startswith(".") and name.endswith(".nettrace") and
                  v.get("verdict") in ("COMPLETE", "TRUNCATED") and v.get("events", 0) > 0,
                  f"the cut trace {name} is stored and reads: {v}")
        st, _, body = get(f"{api}/collectionrules/Bad?pid={pid}")
        check(st == 200, f"dotmon still answers after the runtime died: {st}")
        app3 = App(tmp, "ring-good")
        try:
            check(wait_for(lambda: f"collection rule Good of process {app3.pid}: ring session started" in log_text(log),
                           20), "a new runtime gets its own ring")
        finally:
            app3.kill()
        finished(tmp, api, log)
    finally:
        app.kill()
        if app2 is not None:
            app2.kill()
        stop_dotmon(dm, log, 8000)
    check(dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode})")


def finished(tmp, api, log):
    """A rule with ActionCount 1 (no window) fires once and Finishes: GET /trace/snapshot of its
    ring gives a final answer (409 problem+json naming the rule and that it finished), not the
    "retry in a few seconds" of a ring that is only restarting."""
    app = App(tmp, "ring-once")
    try:
        pid = app.pid
        check(wait_for(lambda: f"collection rule Once of process {pid}: ring session started" in log_text(log), 20),
              "the ActionCount 1 rule's ring session started")
        time.sleep(1.5)
        st = fetch(f"{api}/trace/snapshot?pid={pid}", timeout=30)[0]
        check(st == 200, f"/trace/snapshot of the running ring: 200 ({st})")
        reply = app.command("collect 3 2")
        check(wait_for(lambda: f"collection rule Once of process {pid}: trigger GCCount fired" in log_text(log), 15),
              f"the rule fired ({reply})")

        def state():
            st, _, body = get(f"{api}/collectionrules/Once?pid={pid}")
            return json.loads(body).get("state") if st == 200 else None

        check(wait_for(lambda: state() == "Finished", 30), f"/collectionrules/Once: Finished ({state()})")
        for attempt in range(2):  # the same final answer every time, never a retry
            st, ctype, body = get(f"{api}/trace/snapshot?pid={pid}")
            check(st == 409 and ctype.startswith("application/problem+json") and "'Once' has finished" in body and
                  "ActionCount was reached" in body and "will not run again" in body and "retry" not in body,
                  f"/trace/snapshot of a Finished rule's ring: 409 problem+json, final ({st} {body})")
            time.sleep(1)
    finally:
        app.kill()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=45)
    ap.add_argument("--memory-only", action="store_true")
    ap.add_argument("--failures-only", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="dmrulesringlim") as tmp:
        os.chmod(tmp, 0o700)
        if not args.failures_only:
            memory(tmp, args.seconds)
        if not args.memory_only:
            failures(tmp)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
