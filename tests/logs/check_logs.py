#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET/POST /logs end to end (issue 16).

The real .NET test app (tests/app: a LoggerFactory with the EventSource logger, minimum level
Trace, no heartbeat) and the real dotmon in a private TMPDIR. Each case opens a /logs stream,
makes the app log lines carrying a unique marker (`log`, `log-cat`, `log-scope`,
`log-exception`), and checks that the stream holds exactly the expected records for that
marker (count, order, fields), in the format Accept asked for:
  - GET without level (app filters, Trace): Debug included; NDJSON fields, scopes, state,
    exception;
  - GET level=Information as application/json-seq: no Debug record;
  - GET level=Warning as text/plain: the console layout;
  - POST LogsConfiguration {logLevel, filterSpecs, useAppFilters:false}: only listed categories;
  - Accept that matches none: 406; a bad level: 400;
  - a killed runtime ends a durationSeconds=-1 stream cleanly with the records before it;
  - an app whose LoggerFactory has no EventSource logger: a 200 stream with no record that
    ends after durationSeconds, and dotmon's warning about it.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import http.client
import json
import os
import re
import socket
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, Watched, check  # noqa: E402

MULT = int(os.environ.get("DOTMON_TEST_TIMEOUT_MULTIPLIER", "1") or 1)


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


def mine(recs, m):
    return [r for r in recs if m in r.get("Message", "")]


def run_case(port, app, method, path, accept, body=None):
    m = uuid.uuid4().hex[:12]
    c, r = open_stream(port, method, path, accept, body)
    status, ctype = r.status, r.getheader("Content-Type", "")
    if status != 200:
        check(False, f"{method} {path}: status {status}: {r.read()[:300]!r}")
        return m, status, ctype, ""
    time.sleep(0.5)
    log_all(app, m)
    text = r.read().decode("utf-8")
    c.close()
    return m, status, ctype, text


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
    w = Watched("dmlogs", ["--heartbeat-ms", "0"], 30 * MULT)
    try:
        tmp, app, port, log = w.tmp, w.app, w.port, w.log
        pid = app.pid

        # 1. GET without level: the app's filters at Trace; NDJSON.
        m, st, ctype, text = run_case(port, app, "GET", f"/logs?pid={pid}&durationSeconds=4", "application/x-ndjson")
        check(ctype.startswith("application/x-ndjson"), f"NDJSON content type {ctype!r}")
        check(text.endswith("\n"), "NDJSON ends with a newline")
        check_full(json_records(text, False), m, True)

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

        # 8. No EventSource logger in the app: nothing to stream, a clean end, a warning.
        bare = App(tmp, "--heartbeat-ms", "0", "--no-eventsource-logger")
        try:
            deadline = time.time() + 30 * MULT
            while time.time() < deadline:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
                c.request("GET", "/processes")
                if str(bare.pid).encode() in c.getresponse().read():
                    break
                time.sleep(0.2)
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
    finally:
        w.close()
    print(f"{len(FAILS)} failure(s)")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
