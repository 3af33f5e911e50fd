#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Collection rules on N apps (issue 17): dotmon's cost with rules against none, in one run, and
the time from a threshold crossing to the action's start. Nothing is asserted.

  bench_rules.py [--apps 10] [--seconds 60] [--reps 5] [--window 5] [--threshold 25]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.

1. N test apps (tests/app, `--metrics-ms 100`: their TestApp.Counters EventCounters move) in a
   private TMPDIR, driven over stdin.
2. (a) dotmon without rules, (b) dotmon with two rules that apply to every app, on the same apps
   one after the other, each with GlobalCounter:IntervalSeconds=1 and /metrics on (so both watch
   the System.Runtime counters of all N):
     Cpu:  CPUUsage GreaterThan --threshold, SlidingWindowDuration --window s, Execute action;
     Work: EventCounter TestApp.Counters/work-time GreaterThan 1000 (its mean is 1-10: never
           fires, evaluated every interval), Execute action.
   That is 2N trigger sessions more in (b). Once every app shows on /metrics and (b)'s rules are
   all Running, plus 5 s, dotmon's CPU time over --seconds (utime+stime from /proc/<pid>/stat in
   10 ms ticks, and its threads' schedstat run time in ns: the figure of the ratio), its VmRSS at
   the end of that time and its VmHWM.
3. Latency, in (b): --reps times, app k (a different one each time) runs `burn <(window+3) s> 2`
   (two spinning threads) and the runtime's cpu-usage goes over the threshold. Meanwhile /metrics
   is read every 50 ms: its sample of the app's `systemruntime_cpu_usage_ratio` carries the
   counter event's own timestamp (the runtime's clock, Unix ms, from the same EventCounters
   events the rule's session gets: one counter timer per runtime, written to every session), so
   each interval's (timestamp, value) is known exactly. The Execute action is a script whose first
   command is `date +%s.%N` (same machine clock). dotmon's log names the value that fired the
   trigger, which identifies the satisfying event. Per repetition:
     t0     timestamp of the first counter event above the threshold (the "crossing" seen in the
            runtime's events; the value averages the interval [t0 - I, t0]);
     tw     t0 - I + W: where the window of dotnet-monitor's engine ends (docs/rules.md §3: target
            = timestamp - IntervalSec + SlidingWindowDuration), i.e. crossing + window when the
            crossing is taken as the start of that first interval;
     tf     timestamp of the event that satisfied the trigger (the first at or after tw);
     ta     the action's `date`.
   Printed: ta - t0, ta - tw (the issue's "< 2 intervals") and ta - tf (delivery of that event by
   the runtime's EventPipe flush, decoding, the rule, the spawn), in intervals (I = 1 s), median
   and max.
"""

import argparse
import calendar
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

from bench_logs import status_kib
from bench_metrics import cpu_s

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, free_port, stop  # noqa: E402

INTERVAL = 1.0
STAMP = "#!/bin/sh\nd=$(date +%s.%N)\nprintf '%s %s %s\\n' \"$d\" \"$2\" \"$3\" >> \"$1\"\n"
CPU_SERIES = re.compile(r'^systemruntime_cpu_usage_ratio\{pid="(\d+)"[^}]*\} (\S+) (\d+)$')
FIRED = re.compile(r"collection rule Cpu of process (\d+): trigger CPUUsage fired \(System.Runtime cpu-usage = (\S+)\)")


def run_ns(pid):
    """CPU time of every thread of pid in ns (schedstat: the scheduler's own count, not 10 ms ticks)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return total


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except OSError:
        return 0, ""


def cpu_samples(mport):
    """{pid: (timestamp ms, value)} of the cpu-usage series on /metrics."""
    out = {}
    for line in get(f"http://127.0.0.1:{mport}/metrics")[1].splitlines():
        m = CPU_SERIES.match(line)
        if m:
            out[int(m.group(1))] = (int(m.group(3)), float(m.group(2)))
    return out


def rules_cfg(script, out, a):
    def execute(tag):
        return {"Type": "Execute", "Settings": {"Path": script, "Arguments": f"{out} {tag} $(Process.ProcessId)"}}
    return {
        "Cpu": {"Trigger": {"Type": "CPUUsage",
                            "Settings": {"GreaterThan": a.threshold,
                                         "SlidingWindowDuration": f"00:00:{a.window:02d}"}},
                "Actions": [execute("cpu")], "Limits": {"ActionCount": 1000}},
        "Work": {"Trigger": {"Type": "EventCounter",
                             "Settings": {"ProviderName": "TestApp.Counters", "CounterName": "work-time",
                                          "GreaterThan": 1000, "SlidingWindowDuration": "00:00:05"}},
                 "Actions": [execute("work")], "Limits": {"ActionCount": 1000}},
    }


class Dotmon:
    """dotmon collect with metrics on mport, the given configuration, standard error to log."""

    def __init__(self, tmp, name, cfg, apps):
        self.port, self.mport = free_port(), free_port()
        path = os.path.join(tmp, f"{name}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        self.log_path = os.path.join(tmp, f"{name}.log")
        self.log = open(self.log_path, "w")
        self.p = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth",
                                   "--urls", f"http://127.0.0.1:{self.port}",
                                   "--metricUrls", f"http://127.0.0.1:{self.mport}",
                                   "--configuration-file-path", path],
                                  stdout=subprocess.DEVNULL, stderr=self.log, env=dict(os.environ, TMPDIR=tmp))
        pids = {app.pid for app in apps}
        deadline = time.time() + 60
        while not pids <= set(cpu_samples(self.mport)):
            if time.time() > deadline:
                raise RuntimeError(f"{name}: dotmon did not show every app's cpu-usage within 60 s")
            time.sleep(0.2)
        self.pid = self.p.pid

    def rules_running(self, apps, names):
        for app in apps:
            st, body = get(f"http://127.0.0.1:{self.port}/collectionrules?pid={app.pid}")
            rules = json.loads(body) if st == 200 else {}
            if set(rules) != set(names) or any(r.get("state") != "Running" for r in rules.values()):
                return False
        return True

    def measure(self, seconds):
        c0, n0, t0 = cpu_s(self.pid), run_ns(self.pid), time.time()
        time.sleep(seconds)
        cpu, ns, wall = cpu_s(self.pid) - c0, run_ns(self.pid) - n0, time.time() - t0
        return {"cpu": cpu, "ns": ns, "wall": wall, "rss": status_kib(self.pid, "VmRSS"),
                "hwm": status_kib(self.pid, "VmHWM")}

    def close(self):
        stop(self.p)
        self.log.close()


def actions(out, tag, pid):
    try:
        with open(out) as f:
            return [float(w[0]) for w in (line.split() for line in f) if len(w) == 3 and w[1] == tag and
                    int(w[2]) == pid]
    except FileNotFoundError:
        return []


def one_rep(dm, app, out, a):
    """Burns app over the threshold; returns (t0, tw, tf, ta, fired log time) in seconds."""
    seen, stop_poll = {}, threading.Event()

    def poll():
        while not stop_poll.is_set():
            s = cpu_samples(dm.mport).get(app.pid)
            if s is not None:
                seen[s[0]] = s[1]
            time.sleep(0.05)

    th = threading.Thread(target=poll)
    th.start()
    before = len(actions(out, "cpu", app.pid))
    time.sleep(2.5)  # a few idle samples first
    app.p.stdin.write(f"burn {(a.window + 3) * 1000} 2\n")
    app.p.stdin.flush()
    deadline = time.time() + a.window + 20
    while len(actions(out, "cpu", app.pid)) == before and time.time() < deadline:
        time.sleep(0.05)
    while True:  # the burn's answer ends it
        line = app.p.stdout.readline()
        if not line or line.startswith(("ok burn", "error burn")):
            break
    time.sleep(1.5)
    stop_poll.set()
    th.join()
    got = actions(out, "cpu", app.pid)
    if len(got) == before:
        raise RuntimeError(f"the Cpu rule did not fire for {app.pid}")
    ta = got[before]
    events = sorted(seen.items())
    t0 = next(ts for ts, v in events if v > a.threshold) / 1000
    tw = t0 - INTERVAL + a.window
    fired, fired_at = None, None
    with open(dm.log_path) as f:
        for line in f:
            m = FIRED.search(line)
            if m and int(m.group(1)) == app.pid:
                rec = json.loads(line)
                when = calendar.timegm(time.strptime(rec["Timestamp"][:19], "%Y-%m-%dT%H:%M:%S"))
                when += float("0" + rec["Timestamp"][19:-1])
                if when >= t0:
                    fired, fired_at = float(m.group(2)), when
                    break
    # The satisfying event: its value as the log prints it (%g), at or after t0.
    tf = next((ts / 1000 for ts, v in events if ts / 1000 >= t0 and fired is not None and
               float(f"{v:g}") == fired), None)
    return t0, tw, tf, ta, fired_at


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--apps", type=int, default=10)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--window", type=int, default=5)
    ap.add_argument("--threshold", type=float, default=25)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dmbr")
    os.chmod(tmp, 0o700)
    script, out = os.path.join(tmp, "stamp.sh"), os.path.join(tmp, "actions.txt")
    with open(script, "w") as f:
        f.write(STAMP)
    os.chmod(script, 0o700)
    apps, dm = [], None
    try:
        for _ in range(a.apps):
            apps.append(App(tmp, "--metrics-ms", "100", "--heartbeat-ms", "0"))
        base = {"GlobalCounter": {"IntervalSeconds": 1}}
        dm = Dotmon(tmp, "norules", base, apps)
        time.sleep(5)
        ra = dm.measure(a.seconds)
        dm.close()
        dm = None

        rules = rules_cfg(script, out, a)
        dm = Dotmon(tmp, "rules", dict(base, CollectionRules=rules), apps)
        deadline = time.time() + 60
        while not dm.rules_running(apps, rules):
            if time.time() > deadline:
                raise RuntimeError("the rules are not all Running within 60 s")
            time.sleep(0.5)
        time.sleep(5)
        rb = dm.measure(a.seconds)
        fired_idle = os.path.exists(out) and os.path.getsize(out) > 0

        reps = [one_rep(dm, apps[k % len(apps)], out, a) for k in range(a.reps)]
        hwm_after = status_kib(dm.pid, "VmHWM")

        per_min = lambda r: r["ns"] / 1e9 / (a.apps * r["wall"] / 60)  # noqa: E731
        print(f"apps: {a.apps}, {a.seconds} s each, GlobalCounter interval 1 s, /metrics on in both")
        print(f"{'':22} {'CPU s (ticks)':>13} {'CPU s (ns)':>10} {'% of a core':>11} {'ms/process-min':>14} "
              f"{'VmRSS KiB':>10} {'VmHWM KiB':>10}")
        for name, r in (("(a) no rules", ra), (f"(b) 2 rules x {a.apps} apps", rb)):
            print(f"{name:22} {r['cpu']:>13.2f} {r['ns'] / 1e9:>10.3f} {100 * r['ns'] / 1e9 / r['wall']:>11.3f} "
                  f"{per_min(r) * 1000:>14.2f} {r['rss']:>10} {r['hwm']:>10}")
        print(f"(b)/(a): CPU {rb['ns'] / ra['ns'] if ra['ns'] else float('inf'):.2f}x "
              f"(+{(per_min(rb) - per_min(ra)) * 1000:.2f} ms per process-minute), RSS +{rb['rss'] - ra['rss']} KiB; "
              f"an action during the idle minute: {fired_idle}")
        print(f"latency, CPUUsage > {a.threshold:g} for {a.window} s (I = {INTERVAL:g} s), {a.reps} repetitions, "
              f"in intervals:")
        print(f"{'rep':>3} {'pid':>7} {'ta-t0':>7} {'ta-tw':>7} {'ta-tf':>7} {'tf-tw':>7} {'log-tf':>7}")
        for k, (t0, tw, tf, ta, fl) in enumerate(reps):
            tf_s = f"{ta - tf:>7.3f}" if tf is not None else f"{'?':>7}"
            tw_s = f"{tf - tw:>7.3f}" if tf is not None else f"{'?':>7}"
            fl_s = f"{fl - tf:>7.3f}" if fl is not None and tf is not None else f"{'?':>7}"
            print(f"{k:>3} {apps[k % len(apps)].pid:>7} {ta - t0:>7.3f} {ta - tw:>7.3f} {tf_s} {tw_s} {fl_s}")
        for name, i in (("ta-t0 (from the crossing event)", 0), ("ta-tw (from crossing + window)", 1)):
            v = [r[3] - r[i] for r in reps]
            print(f"{name}: median {statistics.median(v):.3f}, max {max(v):.3f} intervals")
        v = [r[3] - r[2] for r in reps if r[2] is not None]
        if v:
            print(f"ta-tf (from the satisfying event): median {statistics.median(v):.3f}, max {max(v):.3f} intervals")
        print(f"dotmon VmHWM after the repetitions: {hwm_after} KiB")
        return 0
    finally:
        if dm is not None:
            dm.close()
        for p in apps:
            p.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
