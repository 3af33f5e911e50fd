#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Collection rules reload on configuration change (issue 17), end to end: the real .NET test app,
the real dotmon (connect mode, --no-auth) started with --configuration-file-path, the file then
rewritten (renamed over, as editors and Kubernetes do) while the app runs:
  1. rules A (Startup -> Execute writing "A <pid>") and Cpu (a CPUUsage trigger: its EventPipe
     session runs): A fires for the running app; /collectionrules lists A and Cpu;
  2. rule B instead: B fires for the app already running, A does not fire again; /collectionrules
     lists B only (A and Cpu are gone); Cpu's EventPipe session was stopped (StopTracing; dotmon
     logs at Debug here);
  3. B again with another setting changed: that setting is named as taking effect at the next
     start (the rules are not), B is not restarted;
  4. an invalid rule (unknown trigger type): dotmon logs the error naming its key and keeps B
     (/collectionrules still B; B not restarted: its marker is not written again);
  5. no rule at all: /collectionrules is empty;
  6. rule C (from none to some): C fires for the app;
then SIGTERM: dotmon exits 0 (in the ASan build, with no leak).
Listen mode (dotmon started with rule L, no app yet): the rules reloaded to none, a runtime that
connects suspended is resumed (nothing holds it for rules any more); rule M reloaded in fires for
it, and a runtime that connects after that is held until M's action has started, then resumed.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from check_rules_run import SCRIPT, execute, get, lines, stop_dotmon, wait_for  # noqa: E402
from dmtest import FAILS, App, check, free_port, start_dotmon  # noqa: E402


def log_text(log):
    """What dotmon has logged so far."""
    log.flush()
    with open(log.name) as f:
        return f.read()


def write_settings(path, rules, base):
    """The settings file: base's settings with these CollectionRules (None: no rule at all),
    renamed over the file."""
    cfg = dict(base)
    if rules is not None:
        cfg["CollectionRules"] = rules
    tmp = path + ".new"
    with open(tmp, "w") as f:
        json.dump(cfg, f)
    os.replace(tmp, path)


def startup_rule(script, out, tag):
    """Rule tag: Startup -> Execute writing "<tag> <pid>" to out."""
    return {tag: {"Trigger": {"Type": "Startup"}, "Actions": [execute(script, out, f"{tag} $(Process.ProcessId)")]}}


def reload_mode(tmp, script):
    out = os.path.join(tmp, "reload.txt")
    path = os.path.join(tmp, "settings.json")
    rules_a = {**startup_rule(script, out, "A"),
               "Cpu": {"Trigger": {"Type": "CPUUsage", "Settings": {"GreaterThan": 95,
                                                                    "SlidingWindowDuration": "00:00:02"}},
                       "Actions": [execute(script, out, "cpu $(Process.ProcessId)")]}}
    base = {"GlobalCounter": {"IntervalSeconds": 1}, "Logging": {"LogLevel": {"Default": "Debug"}}}
    write_settings(path, rules_a, base)
    app = App(tmp)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    log = open(os.path.join(tmp, "dotmon-reload.log"), "w+")
    dm = None

    def listed():
        st, _, body = get(f"{api}/collectionrules?pid={app.pid}")
        return set(json.loads(body)) if st == 200 else None

    try:
        t0 = time.time()
        dm = start_dotmon(tmp, port, log, [app.pid], args=["--configuration-file-path", path])
        a, b, c = f"A {app.pid}", f"B {app.pid}", f"C {app.pid}"
        check(wait_for(lambda: a in lines(out), 15), f"reload: rule A fired at start: {lines(out)}")
        check(wait_for(lambda: listed() == {"A", "Cpu"}, 10), f"reload: /collectionrules lists A, Cpu: {listed()}")
        check(wait_for(lambda: f"collection rule Cpu of process {app.pid}: trigger session started" in log_text(log),
                       10), "reload: Cpu's trigger session started")
        sess = re.search(r"metrics session (0x[0-9a-f]+) \(CollectTracing\d\) started", log_text(log))

        t = time.time()
        write_settings(path, startup_rule(script, out, "B"), base)
        check(wait_for(lambda: b in lines(out), 10),
              f"reload: rule B fired for the running app {time.time() - t:.2f} s after the change: {lines(out)}")
        check(wait_for(lambda: listed() == {"B"}, 5), f"reload: /collectionrules lists B only: {listed()}")
        check(lines(out).count(a) == 1, f"reload: A did not fire again: {lines(out)}")
        check(sess is not None and wait_for(
            lambda: re.search(f"session {sess.group(1)}: stream ended [^\"]* after StopTracing", log_text(log)), 10),
              f"reload: Cpu's EventPipe session was stopped in the runtime ({sess and sess.group(1)})")

        write_settings(path, startup_rule(script, out, "B"), dict(base, Operations={"MaxHistory": 50}))
        check(wait_for(lambda: 'take effect at the next start: Operations:MaxHistory"' in log_text(log), 10),
              "reload: another setting changed is named as taking effect at the next start, the rules are not")
        check(lines(out).count(b) == 1, f"reload: the same rules again: B not restarted: {lines(out)}")

        write_settings(path, {"Bad": {"Trigger": {"Type": "Nope"}, "Actions": [execute(script, out, "bad")]}}, base)
        check(wait_for(lambda: "collection rules stay as they were" in log_text(log), 10),
              "reload: the invalid rules are refused, the running rules stay")
        check("CollectionRules:Bad:Trigger" in log_text(log), "reload: the error names the invalid rule's key")
        check(listed() == {"B"}, f"reload: /collectionrules still lists B: {listed()}")
        time.sleep(1)
        check(lines(out).count(b) == 1 and "bad" not in lines(out),
              f"reload: B was not restarted, Bad never ran: {lines(out)}")

        write_settings(path, None, base)
        check(wait_for(lambda: listed() == set(), 10), f"reload: no rule left, /collectionrules is empty: {listed()}")

        write_settings(path, startup_rule(script, out, "C"), base)
        check(wait_for(lambda: c in lines(out), 10), f"reload: from no rule to rule C, C fired: {lines(out)}")
        check(wait_for(lambda: listed() == {"C"}, 5), f"reload: /collectionrules lists C: {listed()}")
        check(lines(out).count(b) == 1 and not any(l.startswith("cpu") for l in lines(out)),
              f"reload: only C ran this time: {lines(out)}")
        print(f"reload: {time.time() - t0:.1f} s from dotmon's start to the last check", flush=True)
    finally:
        app.kill()
        if dm is not None:
            stop_dotmon(dm, log, 6000)
        else:
            log.close()
    check(dm is not None and dm.returncode == 0, f"reload: dotmon stopped cleanly ({dm and dm.returncode})")


def listen_mode(tmp, script):
    """Listen mode: runtimes are held for the rules while there are rules, whatever was configured
    at start."""
    out = os.path.join(tmp, "listen.txt")
    sock = os.path.join(tmp, "dm.sock")
    path = os.path.join(tmp, "listen.json")
    port_cfg = {"DiagnosticPort": {"ConnectionMode": "Listen", "EndpointName": sock}}
    write_settings(path, startup_rule(script, out, "L"), port_cfg)
    port = free_port()
    log = open(os.path.join(tmp, "dotmon-listen.log"), "w+")
    dm = start_dotmon(tmp, port, log, args=["--configuration-file-path", path])
    apps = []
    os.environ["DOTNET_DiagnosticPorts"] = sock  # suspended until dotmon resumes it
    try:
        write_settings(path, None, port_cfg)
        check(wait_for(lambda: "collection rules reloaded: 0 rule(s)" in log_text(log), 10),
              "listen: the rules were reloaded to none")
        apps.append(App(tmp))  # raises if it stays suspended
        check(True, f"listen: with no rule left, a new runtime is resumed ({apps[0].pid})")
        write_settings(path, startup_rule(script, out, "M"), port_cfg)
        check(wait_for(lambda: f"M {apps[0].pid}" in lines(out), 10),
              f"listen: rule M fired for the runtime already connected: {lines(out)}")
        apps.append(App(tmp))
        check(wait_for(lambda: f"M {apps[1].pid}" in lines(out), 10),
              f"listen: rule M fired for a runtime that connected after the reload: {lines(out)}")
        text = log_text(log)
        held = f"runtime pid {apps[1].pid} (uid"
        check(held in text and "held suspended" in text[text.find(held):text.find(held) + 300],
              "listen: that runtime was held for the rules reloaded in")
        check(not any(l.startswith("L ") for l in lines(out)), f"listen: L never fired: {lines(out)}")
    finally:
        del os.environ["DOTNET_DiagnosticPorts"]
        for a in apps:
            a.kill()
        stop_dotmon(dm, log, 6000)
    check(dm.returncode == 0, f"listen: dotmon stopped cleanly ({dm.returncode})")


def main():
    tmp = tempfile.mkdtemp(prefix="dmreload")
    os.chmod(tmp, 0o700)
    script = os.path.join(tmp, "record.sh")
    with open(script, "w") as f:
        f.write(SCRIPT)
    os.chmod(script, 0o755)
    try:
        reload_mode(tmp, script)
        listen_mode(tmp, script)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
