#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET/POST /logs end to end (issue 16).

The real .NET test app (tests/app: a LoggerFactory with the EventSource logger, minimum level
Trace, no heartbeat) and the real dotmon in a private TMPDIR. Each case opens a /logs stream,
makes the app log lines carrying a unique marker (`log`, `log-cat`, `log-scope`,
`log-exception`), and checks that the stream holds exactly the expected records for that
marker (count, order, fields), in the format Accept asked for:
  - GET without level (app filters, Trace): Debug included; NDJSON fields, scopes, state,
    exception; records logged after an await inside a scope (`log-await`), which the runtime
    writes before their scope's start, each with its scope;
  - GET level=Information as application/json-seq: no Debug record;
  - GET level=Warning as text/plain: the console layout;
  - POST LogsConfiguration {logLevel, filterSpecs, useAppFilters:false}: only listed categories;
  - Accept that matches none: 406; a bad level: 400;
  - a killed runtime ends a durationSeconds=-1 stream cleanly with the records before it;
  - apps that cannot give logs, told apart by dotmon's loader-rundown probe before any header:
    a LoggerFactory without the EventSource logger (`--no-eventsource-logger`) and an app with
    no Microsoft.Extensions.Logging at all (`--no-logging`) get a 400 problem+json within a
    fraction of the probe's 3 s budget, with a detail that says what is missing and how to add
    it, a Failed operation (NoEventSourceLogger), no session left in the runtime (its sockets
    and dotmon's descriptors back to what they were, a trace right after works, no cleanup
    warning in dotmon's log);
  - an app that loaded the EventSource logger's assembly but cleared the provider
    (`--eventsource-logger-cleared`, what the probe cannot see): a 200 stream with no record
    that ends after durationSeconds, and dotmon's warning about it;
  - dotmon exits 0 (under ASan: no leak).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
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
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, MULT, App, check, dotnet_root, free_port, get_json, settle, wait_listed  # noqa: E402



def open_stream(port, method, path, accept=None, body=None):
    """Returns (conn, response) once the headers are in (the session has started)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {}
    if accept is not None:
        headers["Accept"] = accept
    if body is not None:
        headers["Content-Type"] = "application/json"
        body = json.dumps(body)
    c.request(method, path, body=body, headers=headers)
    return c, c.getresponse()


def log_all(app, m):
    """The five lines of one marker, in order."""
    for cmd in (f"log Debug dbg-{m}", f"log Information info-{m}", f"log-cat Other.Cat Warning w-{m}",
                f"log-scope Information 77 sc-{m}", f"log-exception ex-{m}"):
        answer = app.command(cmd)
        check(answer.startswith("ok "), f"{cmd} answered {answer!r}")


def json_records(text, seq):
    recs = []
    if seq:
        check(text == "" or text.startswith("\x1e"), "json-seq starts with RS")
        parts = [p for p in text.split("\x1e") if p]
        check(all(p.endswith("\n") for p in parts), "every json-seq record ends with LF")
    else:
        parts = text.splitlines()
    for p in parts:
        try:
            recs.append(json.loads(p))
        except ValueError:
            check(False, f"record parses as JSON: {p[:200]!r}")
    return recs


def sockets(pid):
    """The process's socket descriptors (a runtime holds one per live session stream)."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass
    return n


def fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def settle_at_most(count, want, seconds=5):
    """Polls count() until it is at most want; returns the last value."""
    return settle(count, lambda v: v <= want, seconds)


def check_no_logs(port, dm_pid, tmp, flag, method, want):
    """An app started with flag cannot give logs: /logs answers 400 at once and leaves nothing."""
    bare = App(tmp, "--heartbeat-ms", "0", flag)
    try:
        check(wait_listed(port, bare.pid), f"{flag}: the app is listed")
        socks0, fds0 = sockets(bare.pid), fds(dm_pid)
        t0 = time.time()
        body = {"logLevel": "Information"} if method == "POST" else None
        c, r = open_stream(port, method, f"/logs?pid={bare.pid}&durationSeconds=30", "application/x-ndjson", body)
        raw = r.read()
        took = time.time() - t0
        c.close()
        check(r.status == 400 and r.getheader("Content-Type", "").startswith("application/problem+json"),
              f"{flag}: {method} /logs answers 400 problem+json ({r.status} {r.getheader('Content-Type')})")
        check(took < 2.5 * MULT, f"{flag}: answered in {took * 1000:.0f} ms, well within the probe's 3 s")
        try:
            problem = json.loads(raw)
        except ValueError:
            problem = {}
        detail = problem.get("detail", "")
        check(problem.get("status") == 400 and all(w in detail for w in want) and
              "AddEventSourceLogger()" in detail and f"Process {bare.pid} " in detail,
              f"{flag}: the detail says what is missing and how to add it: {detail[:160]!r}")
        st, ops = get_json(port, "/operations")
        mine_ops = [o for o in ops or [] if o.get("process", {}).get("pid") == bare.pid]
        check(len(mine_ops) == 1 and mine_ops[0].get("status") == "Failed",
              f"{flag}: one Failed logs operation {mine_ops}")
        if mine_ops:
            st, d = get_json(port, f"/operations/{mine_ops[0]['operationId']}/details")
            code = ((d or {}).get("error") or {}).get("code")
            check(code == "NoEventSourceLogger", f"{flag}: operation error code {code!r}")
        socks1 = settle_at_most(lambda: sockets(bare.pid), socks0)
        check(socks1 == socks0, f"{flag}: no session stream left in the runtime (sockets {socks0} -> {socks1})")
        fds1 = settle_at_most(lambda: fds(dm_pid), fds0)
        check(fds1 <= fds0, f"{flag}: dotmon's descriptors back ({fds0} -> {fds1})")
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        c.request("GET", f"/trace?pid={bare.pid}&durationSeconds=1&profile=Metrics")
        r = c.getresponse()
        trace = r.read()
        c.close()
        check(r.status == 200 and trace.startswith(b"Nettrace") and trace.endswith(b"\x01"),
              f"{flag}: a trace right after is complete ({r.status}, {len(trace)} bytes)")
    finally:
        bare.kill()


def mine(recs, m):
    return [r for r in recs if m in r.get("Message", "")]


def run_case(port, app, method, path, accept, body=None, extra=None):
    """One stream: the marker's lines (log_all), then extra(app) when given."""
    m = uuid.uuid4().hex[:12]
    c, r = open_stream(port, method, path, accept, body)
    status, ctype = r.status, r.getheader("Content-Type", "")
    if status != 200:
        check(False, f"{method} {path}: status {status}: {r.read()[:300]!r}")
        return m, status, ctype, ""
    time.sleep(0.5)
    log_all(app, m)
    if extra is not None:
        extra(app)
    text = r.read().decode("utf-8")
    c.close()
    return m, status, ctype, text


AWAITS = 5  # log-await records of case 1
TS = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$")


def check_full(recs, m, with_debug):
    got = mine(recs, m)
    names = [r["Message"] for r in got]
    want = ([f"dbg-{m}"] if with_debug else []) + [f"info-{m}", f"w-{m}", f"Scoped sc-{m} n=42", f"Failed ex-{m}"]
    check(names == want, f"records for the marker: {names}")
    if names != want:
        return
    for r in got:
        check(list(r)[:6] == ["Timestamp", "LogLevel", "EventId", "EventName", "Category", "Message"],
              f"property order {list(r)}")
        check(TS.match(r["Timestamp"]) is not None, f"Timestamp {r['Timestamp']!r}")
    i = 1 if with_debug else 0
    if with_debug:
        d = got[0]
        check(d["LogLevel"] == "Debug" and d["Category"] == "TestApp.Commands" and d["EventId"] == 1 and
              d["EventName"] == "Command", f"Debug record {d}")
    info, warn, sc, ex = got[i:i + 4]
    check(info["LogLevel"] == "Information" and info["State"] == {"Message": f"info-{m}", "Text": f"info-{m}",
                                                                  "{OriginalFormat}": "{Text}"},
          f"Information record state {info.get('State')}")
    check("Scopes" not in info and "Exception" not in info, "no scopes or exception on a plain record")
    check(warn["Category"] == "Other.Cat" and warn["LogLevel"] == "Warning" and warn["EventId"] == 3 and
          warn["EventName"] == "Categorized", f"categorized record {warn}")
    check(sc.get("Scopes") == [{"ScopeId": "77", "{OriginalFormat}": "Outer {ScopeId}"},
                               {"Depth": "2", "{OriginalFormat}": "Inner {Depth}"}],
          f"scopes outermost first {sc.get('Scopes')}")
    check(sc.get("State", {}).get("N") == "42" and sc["EventName"] == "Scoped", f"scoped state {sc.get('State')}")
    check(ex["LogLevel"] == "Error" and ex.get("Exception", "").startswith(
        f"System.InvalidOperationException: boom ex-{m}") and "\n" in ex["Exception"],
          f"exception text {ex.get('Exception', '')[:120]!r}")


def main():
    tmp = tempfile.mkdtemp(prefix="dmlogs")
    os.chmod(tmp, 0o700)
    app, dm, log = None, None, None
    try:
        app = App(tmp, "--heartbeat-ms", "0")
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        port = free_port()
        env = dict(os.environ, TMPDIR=tmp)
        dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", f"http://127.0.0.1:{port}",
                               "--metrics", "false"], stdout=subprocess.DEVNULL, stderr=log, env=env)
        wait_listed(port, app.pid)
        pid = app.pid

        # 1. GET without level: the app's filters at Trace; NDJSON. Then records logged after an
        # await inside a scope, read before their scope's start (docs/events.md §4.4): each has
        # its scope.
        aw = uuid.uuid4().hex[:12]

        def awaits(a):
            for k in range(AWAITS):
                answer = a.command(f"log-await {aw}-{k}")
                check(answer.startswith("ok "), f"log-await answered {answer!r}")

        m, st, ctype, text = run_case(port, app, "GET", f"/logs?pid={pid}&durationSeconds=4", "application/x-ndjson",
                                      extra=awaits)
        check(ctype.startswith("application/x-ndjson"), f"NDJSON content type {ctype!r}")
        check(text.endswith("\n"), "NDJSON ends with a newline")
        recs = json_records(text, False)
        check_full(recs, m, True)
        after = [(r.get("Message"), r.get("Scopes")) for r in recs if aw in r.get("Message", "")]
        want = [(f"After the await {aw}-{k}", [{"ScopeId": f"{aw}-{k}", "{OriginalFormat}": "Await {ScopeId}"}])
                for k in range(AWAITS)]
        check(after == want, f"records logged after an await carry their scope: {after}")

        # 2. level=Information as json-seq: no Debug.
        m, st, ctype, text = run_case(port, app, "GET", f"/logs?pid={pid}&durationSeconds=4&level=Information",
                                      "application/json-seq")
        check(ctype.startswith("application/json-seq"), f"json-seq content type {ctype!r}")
        check_full(json_records(text, True), m, False)

        # 3. level=Warning as text/plain: the console layout, only Warning and up.
        m, st, ctype, text = run_case(port, app, "GET", f"/logs?pid={pid}&durationSeconds=4&level=Warning",
                                      "text/plain")
        check(ctype.startswith("text/plain"), f"plain content type {ctype!r}")
        lines = [ln for ln in text.split("\n")]
        heads = [i for i, ln in enumerate(lines) if re.match(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ \w{4}: ", ln)]
        body = "\n".join(lines)
        check(f"dbg-{m}" not in body and f"info-{m}" not in body and f"sc-{m}" not in body,
              "no Debug/Information record at level=Warning")
        i = next((k for k in heads if lines[k].endswith("Other.Cat[3][Categorized]")), None)
        check(i is not None and " warn: " in lines[i] and lines[i + 1] == f"      w-{m}",
              f"warn record layout {lines[i:i + 2] if i is not None else text[:300]!r}")
        j = next((k for k in heads if lines[k].endswith("TestApp.Commands[5][Failed]")), None)
        check(j is not None and " fail: " in lines[j] and lines[j + 1] == f"      Failed ex-{m}" and
              lines[j + 2].startswith(f"      System.InvalidOperationException: boom ex-{m}") and
              lines[j + 3].startswith("         at "),
              f"error record layout {lines[j:j + 4] if j is not None else ''!r}")

        # 4. POST: only the listed categories (useAppFilters false), TestApp.Commands at logLevel.
        m, st, ctype, text = run_case(port, app, "POST", f"/logs?pid={pid}&durationSeconds=4", "application/x-ndjson",
                                      {"logLevel": "Error", "useAppFilters": False,
                                       "filterSpecs": {"Other.Cat": "Warning", "TestApp.Commands": None}})
        got = [r["Message"] for r in mine(json_records(text, False), m)]
        check(got == [f"w-{m}", f"Failed ex-{m}"], f"POST filterSpecs records {got}")

        # 5. Errors: Accept that matches nothing, a bad level, a bad body.
        c, r = open_stream(port, "GET", f"/logs?pid={pid}&durationSeconds=1", "application/xml")
        check(r.status == 406, f"Accept application/xml: {r.status}")
        r.read()
        c, r = open_stream(port, "GET", f"/logs?pid={pid}&durationSeconds=1&level=Loud", "text/plain")
        check(r.status == 400 and "problem+json" in r.getheader("Content-Type", ""), f"bad level: {r.status}")
        r.read()
        c, r = open_stream(port, "POST", f"/logs?pid={pid}&durationSeconds=1", "text/plain", {"logLevel": 3.5})
        check(r.status == 400, f"bad logLevel: {r.status}")
        r.read()

        # 6. Default (no Accept): text/plain.
        c, r = open_stream(port, "GET", f"/logs?pid={pid}&durationSeconds=1")
        check(r.status == 200 and r.getheader("Content-Type", "").startswith("text/plain"),
              f"no Accept: {r.status} {r.getheader('Content-Type')}")
        r.read()

        # 7. A killed runtime ends an endless stream cleanly.
        m = uuid.uuid4().hex[:12]
        c, r = open_stream(port, "GET", f"/logs?pid={pid}&durationSeconds=-1", "application/x-ndjson")
        check(r.status == 200, f"endless stream: {r.status}")
        time.sleep(0.5)
        app.command(f"log Warning last-{m}")
        time.sleep(1.0)
        app.kill()
        t0 = time.time()
        try:
            text = r.read().decode()
            clean = True
        except http.client.IncompleteRead as e:
            text, clean = e.partial.decode(errors="replace"), False
        check(clean, "the stream ended with its last chunk")
        check(time.time() - t0 < 15 * MULT, "the stream ended promptly")
        got = [x["Message"] for x in mine(json_records(text, False), m)]
        check(got == [f"last-{m}"], f"records before the kill {got}")

        # 8. Apps that cannot give logs: 400 at once, nothing left behind.
        check_no_logs(port, dm.pid, tmp, "--no-eventsource-logger", "GET",
                      ["has no EventSource logger provider", "Microsoft.Extensions.Logging.dll is loaded"])
        check_no_logs(port, dm.pid, tmp, "--no-logging", "POST",
                      ["does not use Microsoft.Extensions.Logging"])

        # 9. The assembly loaded but the provider cleared (the probe cannot see it): nothing to
        #    stream, a clean end, a warning.
        bare = App(tmp, "--heartbeat-ms", "0", "--eventsource-logger-cleared")
        try:
            check(wait_listed(port, bare.pid), "the cleared app is listed")
            m = uuid.uuid4().hex[:12]
            t0 = time.time()
            c, r = open_stream(port, "GET", f"/logs?pid={bare.pid}&durationSeconds=7", "application/x-ndjson")
            check(r.status == 200, f"app without the EventSource logger: {r.status}")
            bare.command(f"log Warning none-{m}")
            text = r.read().decode()
            check(text == "" and time.time() - t0 >= 6.5, f"no record, ended after durationSeconds: {text[:200]!r}")
            log.flush()
            with open(os.path.join(tmp, "dotmon.log")) as f:
                check("no Microsoft-Extensions-Logging event" in f.read(), "dotmon warned about the silent app")
        finally:
            bare.kill()
        log.flush()
        with open(os.path.join(tmp, "dotmon.log")) as f:
            dmlog = f.read()
        check("did not close the stream" not in dmlog and "probe (CollectTracing5)" in dmlog,
              "dotmon's log: probes logged, no session left to clean up")
    finally:
        if app:
            app.kill()
        if dm:
            dm.terminate()
            try:
                check(dm.wait(timeout=15) == 0, f"dotmon exits 0 (no leak under ASan): {dm.returncode}")
            except subprocess.TimeoutExpired:
                dm.kill()
                check(False, "dotmon exits within 15 s")
        if FAILS:
            try:
                with open(os.path.join(tmp, "dotmon.log")) as f:
                    sys.stderr.write(f.read()[-4000:])
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
