#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""With continuous metrics on, a runtime's command line still completes and its exit is still seen
(issue 30 item 4).

While a process's metrics session runs, discovery stops its liveness ProcessInfo (a connection a
second) once the command line is settled, and leaves the exit to the session's stream. A runtime
found early in its start answers only its host's path at first, and a CommandLine filter must
still match it later: the skip once broke that (385f73a).

The real dotmon, metrics on, runs first in a private TMPDIR, with DefaultProcess:Filters on
CommandLine (Contains) naming an argument of the app; then the real test app starts there, so
dotmon probes it as early as it can. Checked:
  - the default process (GET /process) becomes the app: its command line, with the argument,
    reached the filter; /processes shows it whole;
  - /metrics holds the app's series and dotmon_process_metrics_up 1 for it;
  - discovery says the command line is settled and leaves liveness to the session (its log);
  - the command line is still whole afterwards;
  - the app killed with SIGKILL (its socket file stays behind): it leaves /processes and its
    series leave /metrics within 10 s.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (App, check, close_log, fetch, free_port, get_json, prom_by_pid, start_dotmon,  # noqa: E402
                    stop, verdict, wait_for, wait_log)

MARK = "liveness-mark-7q"


def metrics_of(mport, pid):
    """(the app's families on /metrics, whether dotmon_process_metrics_up is 1 for it)."""
    st, _, body = fetch(f"http://127.0.0.1:{mport}/metrics", timeout=10)
    if st != 200:
        return {}, False
    text = body.decode()
    by_pid, _, _ = prom_by_pid(text)
    up = any(ln.startswith("dotmon_process_metrics_up{") and f'pid="{pid}"' in ln and ln.endswith(" 1")
             for ln in text.splitlines())
    return by_pid.get(str(pid), {}), up


def command_line(port, pid):
    st, info = get_json(port, f"/process?pid={pid}")
    return info.get("commandLine", "") if st == 200 and info else ""


def main():
    tmp = tempfile.mkdtemp(prefix="dmlive")
    os.chmod(tmp, 0o700)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    dm, app = None, None
    try:
        port, mport = free_port(), free_port()
        env = {"DotnetMonitor_GlobalCounter__IntervalSeconds": "1",
               "DotnetMonitor_Logging__LogLevel__Default": "Debug",
               "DotnetMonitor_DefaultProcess__Filters__0__Key": "CommandLine",
               "DotnetMonitor_DefaultProcess__Filters__0__Value": MARK,
               "DotnetMonitor_DefaultProcess__Filters__0__MatchType": "Contains"}
        dm = start_dotmon(tmp, port, log, env=env, metrics_port=mport)
        app = App(tmp, MARK)
        pid = app.pid

        def default_is_app():
            st, info = get_json(port, "/process", timeout=5)
            return st == 200 and info is not None and info.get("pid") == pid

        check(wait_for(default_is_app, 20, 0.2),
              f"the default process (CommandLine contains {MARK}) becomes the app, pid {pid}")
        check(MARK in command_line(port, pid), "/process?pid= shows the whole command line")
        early = wait_log(log, rf"pid {pid}: command line now '[^']*{MARK}", 1)
        print(f"     (found {'early, host path first' if early else 'with its whole command line'})")

        def series():
            fams, up = metrics_of(mport, pid)
            return len(fams) > 0 and up

        check(wait_for(series, 30, 0.5), "/metrics holds the app's series, dotmon_process_metrics_up 1")
        check(wait_log(log, rf"pid {pid}: command line settled", 15) is not None,
              "discovery: the command line settled, liveness left to the metrics session")
        time.sleep(2)  # no liveness check any more: what discovery holds must stay whole
        check(MARK in command_line(port, pid) and default_is_app(),
              "the command line stays whole and the filter still matches")

        app.kill()  # SIGKILL: the socket file stays, only the stream's end (or a refused connect) tells
        t0 = time.time()
        gone = wait_for(lambda: str(pid).encode() not in fetch(f"http://127.0.0.1:{port}/processes",
                                                                   timeout=5)[2], 10, 0.1)
        check(gone, f"the killed app leaves /processes ({time.time() - t0:.1f} s)")
        check(wait_for(lambda: not metrics_of(mport, pid)[0], 10, 0.2), "its series leave /metrics")
        stop(dm)
        check(dm.returncode == 0, f"dotmon stops cleanly (exit {dm.returncode})")
        dm = None
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("metrics_liveness")


if __name__ == "__main__":
    sys.exit(main())
