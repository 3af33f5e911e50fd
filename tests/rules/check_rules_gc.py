#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon's runtime triggers end to end (issue 18): GCPause, GCCount and ExceptionCount against the
real .NET test app, each rule on its own Microsoft-Windows-DotNETRuntime session; actions are
Execute of a small script writing its argv to a file (check_rules_run.py's helpers).

Connect mode, one dotmon, three rules, in this order:
  - GCCount (Count 4 of Reasons [Induced], gen2, 1 min window; ActionCount 1): `collect 3` (three
    induced blocking gen2 GCs) does not fire it, one more does; the rule is then Finished;
  - ExceptionCount (Count 3 of ExceptionTypes [System.ArgumentException]): 5 thrown
    InvalidOperationException and 2 ArgumentException do not fire it, a third ArgumentException does;
  - GCPause (ThresholdMs 200): the GCs above and three `gc` commands (a few ms each) do not fire
    it, `gc-pause` (one blocking compacting GC of a graph of 2M small objects: most of a second)
    fires it once; the pause dotmon measured from GCSuspendEEBegin to GCRestartEEEnd (its log)
    agrees with the runtime's own GC.GetTotalPauseDuration; the trigger's session runs on through
    the action and the rule is Running again on it;
  - /collectionrules shows the three rules in dotnet-monitor's shape.
Prints the pauses measured (normal GCs, the long one) and the time each phase took.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import json
import os
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_rules_run import SCRIPT, execute, get, lines, start, stop_dotmon, wait_for, wait_listed  # noqa: E402
from dmtest import FAILS, App, check, free_port  # noqa: E402  (check_rules_run put support/ on the path)

THRESHOLD_MS = 200
LONG_NODES = 2000000


def log_text(log):
    log.flush()
    log.seek(0)
    text = log.read()
    log.seek(0, os.SEEK_END)
    return text


def fields(reply):
    """The key=value words of a test app reply."""
    return dict(w.split("=", 1) for w in reply.split() if "=" in w)


def run(tmp, script):
    out = os.path.join(tmp, "gc.txt")
    cfg = {
        # The trigger sessions say when they have started at Debug.
        "Logging": {"LogLevel": {"Default": "Debug"}},
        "CollectionRules": {
            "Count": {"Trigger": {"Type": "GCCount",
                                  "Settings": {"Count": 4, "Reasons": ["Induced"],
                                               "SlidingWindowDuration": "00:01:00"}},
                      "Actions": [execute(script, out, "count $(Process.ProcessId)")],
                      "Limits": {"ActionCount": 1}},
            "Exc": {"Trigger": {"Type": "ExceptionCount",
                                "Settings": {"Count": 3, "ExceptionTypes": ["System.ArgumentException"]}},
                    "Actions": [execute(script, out, "exc $(Process.ProcessId)")]},
            "Pause": {"Trigger": {"Type": "GCPause", "Settings": {"ThresholdMs": THRESHOLD_MS}},
                      "Actions": [execute(script, out, "pause $(Process.ProcessId)")]},
        },
    }
    t0 = time.time()
    app = App(tmp)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm = start(tmp, cfg, port, log)
    pid = app.pid
    try:
        check(wait_listed(port, pid), f"dotmon lists the app {pid}")

        def sessions_started():
            text = log_text(log)
            return all(f"collection rule {r} of process {pid}: trigger session started" in text
                       for r in ("Count", "Exc", "Pause"))

        check(wait_for(sessions_started, 20), "the three trigger sessions started")
        st, ctype, body = get(f"{api}/collectionrules?pid={pid}")
        rules = json.loads(body) if st == 200 else {}
        check(st == 200 and ctype.startswith("application/json") and set(rules) == {"Count", "Exc", "Pause"} and
              all(r.get("state") == "Running" and "stateReason" in r for r in rules.values()),
              f"/collectionrules lists the three rules Running: {st} {body}")
        t1 = time.time()
        print(f"setup: {t1 - t0:.1f} s", flush=True)

        # GCCount: 3 induced gen2 GCs of 4.
        reply = app.command("collect 3")
        check(reply.startswith("ok collect n=3"), f"collect 3: {reply}")
        time.sleep(1.5)
        check(lines(out) == [], f"GCCount: 3 induced gen2 GCs of 4 do not fire: {lines(out)}")
        app.command("collect 1")
        check(wait_for(lambda: f"count {pid}" in lines(out), 10),
              f"GCCount: the 4th induced gen2 GC fires: {lines(out)}")
        check(wait_for(lambda: json.loads(get(f"{api}/collectionrules?pid={pid}")[2]).get("Count", {})
                       .get("state") == "Finished", 10), "GCCount: ActionCount 1, the rule is Finished")
        t2 = time.time()
        print(f"GCCount: {t2 - t1:.1f} s", flush=True)

        # ExceptionCount: other types, then 2 of 3, then the third.
        check(app.command("throw 5 InvalidOperationException") == "ok throw count=5", "throw 5 InvalidOperationException")
        check(app.command("throw 2 ArgumentException") == "ok throw count=2", "throw 2 ArgumentException")
        time.sleep(1.5)
        check(not any(l.startswith("exc") for l in lines(out)),
              f"ExceptionCount: 5 of another type and 2 ArgumentException do not fire: {lines(out)}")
        app.command("throw 1 ArgumentException")
        check(wait_for(lambda: f"exc {pid}" in lines(out), 10),
              f"ExceptionCount: the third ArgumentException fires: {lines(out)}")
        t3 = time.time()
        print(f"ExceptionCount: {t3 - t2:.1f} s", flush=True)

        # GCPause: normal GCs (and the 4 above) are far below the threshold; one long GC fires.
        normal = []
        for _ in range(3):
            reply = app.command("gc")
            normal.append(float(fields(reply).get("pause-ms", "nan")))
        time.sleep(1.5)
        check(not any(l.startswith("pause") for l in lines(out)),
              f"GCPause: normal GCs (pauses {normal} ms, two GCs each) do not fire: {lines(out)}")
        reply = app.command(f"gc-pause {LONG_NODES}")
        f = fields(reply)
        long_ms = float(f.get("ms", "nan"))
        check(reply.startswith("ok gc-pause") and long_ms > 2 * THRESHOLD_MS,
              f"gc-pause: a long GC pause ({reply})")
        check(wait_for(lambda: f"pause {pid}" in lines(out), 10),
              f"GCPause: the long GC fires (app: {long_ms} ms): {lines(out)}")
        m = re.search(rf"collection rule Pause of process {pid}: trigger GCPause fired "
                      r"\(a GC pause of ([0-9.]+) ms\)", log_text(log))
        measured = float(m.group(1)) if m else float("nan")
        check(m is not None and measured > THRESHOLD_MS and abs(measured - long_ms) <= max(50, 0.25 * long_ms),
              f"GCPause: dotmon measured {measured} ms from the events, the runtime says {long_ms} ms")
        # A runtime trigger's session runs on through the action (docs/rules.md §1): the trigger is
        # armed again on the same session, which was started once.
        started = f"collection rule Pause of process {pid}: trigger session started"
        check(wait_for(lambda: json.loads(get(f"{api}/collectionrules?pid={pid}")[2]).get("Pause", {})
                       .get("state") == "Running", 10) and
              log_text(log).count(started) == 1,
              f"GCPause: Running again after the action, its session kept ({log_text(log).count(started)} started)")
        time.sleep(1)
        check(lines(out).count(f"pause {pid}") == 1, f"GCPause fired once: {lines(out)}")
        st, _, body = get(f"{api}/collectionrules/Pause?pid={pid}")
        d = json.loads(body) if st == 200 else {}
        check(st == 200 and d.get("lifetimeOccurrences") == 1 and d.get("state") == "Running",
              f"/collectionrules/Pause: one occurrence, Running again: {st} {body}")
        t4 = time.time()
        print(f"GCPause: {t4 - t3:.1f} s; pauses: normal `gc` {normal} ms (two GCs each), "
              f"gc-pause {LONG_NODES} nodes: {long_ms} ms (runtime), {measured} ms (dotmon, events); "
              f"total {t4 - t0:.1f} s", flush=True)
        got = lines(out)
        check(sorted(got) == sorted([f"count {pid}", f"exc {pid}", f"pause {pid}"]),
              f"each rule fired once, nothing else: {got}")
    finally:
        app.kill()
        stop_dotmon(dm, log, 6000)
    check(dm.returncode == 0, f"dotmon stopped cleanly ({dm.returncode})")


def main():
    with tempfile.TemporaryDirectory(prefix="dmrulesgc") as tmp:
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
