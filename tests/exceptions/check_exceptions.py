#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET/POST /exceptions and CollectExceptions end to end against the real test app (issue 35,
items 2 to 4), out of process: nothing is loaded into the app.

dotmon runs with InProcessFeatures:Exceptions:Enabled and TopLevelLimit 50, a FileSystem egress
provider "files" and a rule "Exc" (ExceptionCount of three System.TimeoutExceptions, then
CollectExceptions as NDJSON with an include filter on System.FormatException, ArtifactName
exc.ndjson). Then:
  - before anything is thrown the history is empty: 200, no body;
  - the test app's `throw-kinds` (tests/app/Thrower.cs) throws a nested exception (FormatException
    "dm inner" from E.Thrower.Inner, wrapped by E.Thrower.Outer as InvalidOperationException "dm
    outer"), one from async code (TimeoutException "dm async" in the state machine
    E.Thrower+<FailAsync>d__N.MoveNext, and again where it is awaited) and one from an exception
    filter (ArgumentException "dm filter: dm filtered" in E.Thrower.Filter while E.Thrower.Filtered's
    NotSupportedException is dispatched);
  - the default answer is dotnet-monitor's text ("First chance exception at <time>", "Type:
    Message", "   at Type.Method" frames, an empty line): each one there, with its throw method
    as the first frame (not the runtime's System.Runtime.EH dispatch) and its callers below;
  - Accept: application/x-ndjson is one ExceptionInstance per line in dotnet-monitor's member order
    (id, timestamp, typeName, moduleName, message, innerExceptions, stack{threadId, threadName,
    frames[{methodName, methodToken, parameterTypes, typeName, moduleName, moduleVersionId,
    hidden}]}), ids rising, timestamps within the test's own window, the thrower's module
    TestApp.dll and a MethodDef token; application/json-seq the same records after 0x1E;
  - POST /exceptions with an ExceptionsConfiguration (each body checked against dotnet-monitor's
    OpenAPI copy, tests/fixtures/openapi, first): include by exceptionType, exclude by
    methodName, include by typeName and moduleName, as dotnet-monitor filters (exclude first);
    a bad body is a 400 problem naming the member, a text/plain body 415;
  - egressProvider=files: 202, a yyyyMMdd_HHmmss_fff_<pid>.exceptions.txt file (0600) with the
    same text; the rule's CollectExceptions wrote exc.ndjson with the FormatException alone;
  - /info lists the capability "exceptions" enabled, and (extras) the process's history counts;
  - a flood: `throw 200000` as fast as the app throws; the history keeps its 50 newest (the
    rest evicted), dotmon's RSS stays bounded, and the history still answers;
  - groups=true counts every exception by type and thrower as shown (ThrowOne's 200,000 in one
    line, beyond the history's 50); with follow=true it is a 400;
  - when the request and the rule are done only the standing session remains in the runtime;
  - a live tail: GET /exceptions?follow=true&durationSeconds=-1 (NDJSON), started before the
    app throws (it holds the one /exceptions slot until it ends), streams the history so far and then each new instance as it comes, its frames
    named though their methods were compiled after the tail's first rundown (a new rundown names
    them); DELETE /operations/{id}?stop=true ends it: the stream ends whole and the operation
    Succeeded, its details counting the instances and rundowns;
  - InProcessFeatures:Exceptions:CollectionFilters from the settings, bound as .NET binds a list:
    Exclude entries 0, 5 (after a gap) and "first" all apply; an entry naming none of the four
    members (a typo) is left out with a warning instead of matching every exception;
  - with the feature off, GET answers dotnet-monitor's 400 "The 'Exceptions' feature is not
    enabled." and POST 404.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE.
"""

import http.client
import json
import os
import re
import stat
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api"))
import parity  # noqa: E402  (its small OpenAPI validator)
from dmtest import FAILS, Watched, check, get_json, http_get as get, http_request, wait_for  # noqa: E402
from dmtest import runtime_sessions as sessions, sanitized, status_kib  # noqa: E402

LIMIT = 50
JSON_MEMBERS = ["id", "timestamp", "typeName", "moduleName", "message", "innerExceptions", "stack"]
FRAME_MEMBERS = ["methodName", "methodToken", "parameterTypes", "typeName", "moduleName", "moduleVersionId",
                 "hidden"]
# (type, message, first frame, the frame right below it, or None)
KINDS = [
    ("System.FormatException", "dm inner", "E.Thrower.Inner", "E.Thrower.Outer"),
    ("System.InvalidOperationException", "dm outer", "E.Thrower.Outer", "E.Thrower.Run"),
    ("System.NotSupportedException", "dm filtered", "E.Thrower.Filtered", "E.Thrower.Run"),
    ("System.ArgumentException", "dm filter: dm filtered", "E.Thrower.Filter", "E.Thrower.Filtered"),
]


def env_for(tmp):
    e = {"DotnetMonitor_InProcessFeatures__Exceptions__Enabled": "true",
         "DotnetMonitor_InProcessFeatures__Exceptions__TopLevelLimit": str(LIMIT),
         "DotnetMonitor_Egress__FileSystem__files__DirectoryPath": os.path.join(tmp, "egress")}
    rule = "DotnetMonitor_CollectionRules__Exc__"
    e.update({rule + "Trigger__Type": "ExceptionCount",
              rule + "Trigger__Settings__Count": "3",
              rule + "Trigger__Settings__ExceptionTypes__0": "System.TimeoutException",
              rule + "Actions__0__Type": "CollectExceptions",
              rule + "Actions__0__Settings__Format": "NewlineDelimitedJson",
              rule + "Actions__0__Settings__Egress": "files",
              rule + "Actions__0__Settings__ArtifactName": "exc.ndjson",
              rule + "Actions__0__Settings__Filters__Include__0__ExceptionType": "System.FormatException",
              rule + "Limits__ActionCount": "1"})
    return e


def text_entries(text):
    """[(type, message, [frames])] of dotnet-monitor's text layout."""
    out = []
    for block in text.split("\n\n"):
        lines = block.split("\n")
        if not lines or not lines[0].startswith("First chance exception at "):
            continue
        head = lines[1] if len(lines) > 1 else ""
        typ, _, msg = head.partition(": ")
        out.append((typ, msg, [l[len("   at "):] for l in lines[2:] if l.startswith("   at ")]))
    return out


def check_kinds(entries, what):
    for typ, msg, first, below in KINDS:
        hit = [e for e in entries if e[0] == typ and e[1] == msg]
        if check(hit, f"{what}: {typ} {msg!r} is there"):
            frames = hit[0][2]
            check(frames[:2] == [first, below], f"{what}: {typ} thrown in {first}, called from {below}: {frames[:4]}")
    asyncs = [e for e in entries if e[0] == "System.TimeoutException" and e[1] == "dm async"]
    check(any(re.match(r"E\.Thrower\+<FailAsync>d__\d+\.MoveNext$", e[2][0]) for e in asyncs if e[2]),
          f"{what}: the async TimeoutException thrown in its state machine's MoveNext: {[e[2][:2] for e in asyncs]}")
    check(not any(f.startswith("System.Runtime.EH.") for e in entries for f in e[2][:1]),
          f"{what}: no stack starts in the runtime's dispatch (System.Runtime.EH)")


def ndjson(body):
    return [json.loads(l) for l in body.decode().splitlines() if l.strip()]


def check_ndjson(recs, pid, t0, t1):
    check(len(recs) >= 6, f"ndjson: {len(recs)} instances")
    ids = [r.get("id") for r in recs]
    check(ids == sorted(ids) and len(set(ids)) == len(ids), f"ndjson: ids rise: {ids}")
    for r in recs:
        check(list(r) == JSON_MEMBERS, f"ndjson: members in dotnet-monitor's order: {list(r)}")
        ts = r.get("timestamp", "")
        m = re.match(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d{1,7})?Z$", ts)
        if check(m is not None, f"ndjson: timestamp {ts!r} as System.Text.Json writes a UTC DateTime"):
            t = time.mktime(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone + float(m.group(7) or 0)
            check(t0 - 2 <= t <= t1 + 2, f"ndjson: {ts} within the test's window")
        check(r.get("innerExceptions") == [] and r.get("moduleName") == "", f"ndjson: {r.get('typeName')}: no inner part")
        st = r.get("stack", {})
        check(list(st) == ["threadId", "threadName", "frames"], f"ndjson: stack members {list(st)}")
        frames = st.get("frames", [])
        check(frames and all(list(f) == FRAME_MEMBERS for f in frames), f"ndjson: frame members {frames[:1]}")
    inner = [r for r in recs if r["message"] == "dm inner"]
    if check(inner, "ndjson: the FormatException"):
        f = inner[0]["stack"]["frames"][0]
        check(f["methodName"] == "Inner" and f["typeName"] == "E.Thrower" and f["moduleName"] == "TestApp.dll"
              and f["methodToken"] >> 24 == 0x06 and f["parameterTypes"] == [],
              f"ndjson: the first frame is TestApp.dll's E.Thrower.Inner with a MethodDef token: {f}")
        check(inner[0]["stack"]["threadId"] > 0, "ndjson: the throwing thread's id")
    entries = [(r["typeName"], r["message"], [f"{f['typeName']}.{f['methodName']}" for f in r["stack"]["frames"]])
               for r in recs]
    check_kinds(entries, "ndjson")


class Tail:
    """A streaming GET (NDJSON) read line by line on a thread until the server ends it."""

    def __init__(self, port, path):
        self.c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.c.request("GET", path, headers={"Accept": "application/x-ndjson"})
        self.r = self.c.getresponse()
        self.status, self.ctype = self.r.status, self.r.getheader("Content-Type", "")
        self.location = self.r.getheader("Location", "")
        self.lines, self.ended = [], False
        self.t = threading.Thread(target=self.read, daemon=True)
        self.t.start()

    def read(self):
        try:
            for line in self.r:
                self.lines.append(line)
            self.ended = True
        except (OSError, http.client.HTTPException):
            pass

    def records(self):
        return [json.loads(l) for l in list(self.lines) if l.strip()]

    def join(self, seconds):
        self.t.join(seconds)
        self.c.close()


def post(port, body, accept="application/x-ndjson", ctype="application/json"):
    r, data = http_request(port, "/exceptions", "POST", {"Content-Type": ctype, "Accept": accept},
                           body.encode() if isinstance(body, str) else body)
    return r.status, r.getheader("Content-Type", ""), data


def history(port):
    info = get_json(port, "/info?extras=true")[1] or {}
    ex = info.get("exceptions") or [{}]
    return ex[0]


def main():
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "openapi",
                           "dotnet-monitor-openapi.json")) as f:
        parity.SPEC = json.load(f)
    w = Watched("dotmon-exceptions-", env=env_for)
    try:
        port, pid = w.port, w.app.pid
        egress = os.path.join(w.tmp, "egress")
        info = get_json(port, "/info")[1] or {}
        caps = {c.get("name"): c.get("enabled") for c in info.get("capabilities", [])}
        check(caps.get("exceptions") is True and caps.get("parameters") is False,
              f"/info: exceptions enabled, parameters not: {caps}")
        check(wait_for(lambda: history(port).get("state") == "running", 30),
              f"the process's exceptions session runs: {history(port)}")

        st, ct, body = get(port, f"/exceptions?pid={pid}")
        check(st == 200 and ct.startswith("text/plain") and body == b"",
              f"before any throw: 200 text, empty ({st} {ct} {body[:200]!r})")

        tail = Tail(port, f"/exceptions?pid={pid}&follow=true&durationSeconds=-1")
        check(tail.status == 200 and tail.ctype.startswith("application/x-ndjson") and "/operations/" in tail.location,
              f"follow: 200 NDJSON with a Location ({tail.status} {tail.ctype} {tail.location!r})")
        time.sleep(0.5)  # the tail's first rundown is in before the app's new methods are compiled
        t0 = time.time()
        check(w.app.command("throw-kinds") == "ok throw-kinds caught=3", "the app threw and caught its three kinds")
        t1 = time.time()
        check(wait_for(lambda: history(port).get("kept", 0) >= 6, 30), f"six exceptions kept: {history(port)}")

        # the tail (one /exceptions at a time: it holds the slot until stopped)
        check(wait_for(lambda: len(tail.records()) >= 6, 20), f"follow: the tail streamed {len(tail.records())} instances")
        check_ndjson(tail.records(), pid, t0, t1)
        op = tail.location.split("/operations/")[-1]
        r, _ = http_request(port, f"/operations/{op}?stop=true", "DELETE")
        check(r.status == 202, f"follow: DELETE ?stop=true accepted ({r.status})")
        tail.join(20)
        check(tail.ended, "follow: the stream ended after the stop")
        st, details = get_json(port, f"/operations/{op}/details")
        extra = (details or {}).get("exceptions", {})
        check((details or {}).get("status") == "Succeeded" and extra.get("lastId", 0) >= 6 and
              extra.get("rundowns", 0) >= 2,
              f"follow: Succeeded, lastId and rundowns counted: {details}")
        # the rule's third TimeoutException (throw-kinds threw two), once the tail is done, and its
        # artifact before the next request: dotmon counts a rule's actions against the routes'
        # limits (one /exceptions at a time)
        check(w.app.command("throw 1 TimeoutException") == "ok throw count=1", "the app threw a third TimeoutException")
        rule_file = os.path.join(egress, "exc.ndjson")
        check(wait_for(lambda: os.path.isfile(rule_file) and os.path.getsize(rule_file) > 0, 30),
              f"rule: CollectExceptions wrote exc.ndjson: {sorted(os.listdir(egress)) if os.path.isdir(egress) else []}")
        if os.path.isfile(rule_file):
            got = [r["typeName"] for r in ndjson(open(rule_file, "rb").read())]
            check(got == ["System.FormatException"], f"rule: its Filters kept the FormatException alone: {got}")

        t = time.monotonic()
        r, body = http_request(port, f"/exceptions?pid={pid}")
        print(f"info GET /exceptions (text): {time.monotonic() - t:.3f} s, {len(body)} bytes", flush=True)
        check(r.status == 200 and r.getheader("Content-Type", "").startswith("text/plain"),
              f"text: {r.status} {r.getheader('Content-Type')}")
        check("/operations/" in r.getheader("Location", ""), f"text: Location {r.getheader('Location')!r}")
        text = body.decode()
        print(text[:1600], flush=True)
        check(re.match(r"^First chance exception at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z\n", text) is not None,
              "text: dotnet-monitor's header with .NET's round-trip time")
        check_kinds(text_entries(text), "text")

        st, ct, body = get(port, f"/exceptions?pid={pid}", {"Accept": "application/x-ndjson"})
        check(st == 200 and ct.startswith("application/x-ndjson"), f"ndjson: {st} {ct}")
        check_ndjson(ndjson(body), pid, t0, t1)


        st, ct, body = get(port, f"/exceptions?pid={pid}", {"Accept": "application/json-seq"})
        recs = body.split(b"\x1e")
        check(st == 200 and ct.startswith("application/json-seq") and recs[0] == b"" and len(recs) >= 7 and
              all(r.endswith(b"\n") and json.loads(r)["id"] > 0 for r in recs[1:]),
              f"json-seq: {st} {ct}, {len(recs) - 1} records after 0x1E")
        for accept, want in (("*/*", "text/plain"), ("application/*", "application/x-ndjson"),
                             ("application/json-seq, text/plain", "text/plain")):
            st, ct, _ = get(port, f"/exceptions?pid={pid}", {"Accept": accept})
            check(st == 200 and ct.startswith(want), f"Accept {accept}: {ct} (want {want})")

        # POST: dotnet-monitor's ExceptionsConfiguration; the bodies are checked against its
        # OpenAPI copy first (the one it accepts is the one dotmon accepts)
        for doc, ok in (('{"include":[{"exceptionType":"System.FormatException"}]}', True),
                        ('{"include":[{"typeName":"E.Thrower","moduleName":"TestApp.dll"}],'
                         '"exclude":[{"exceptionType":"System.InvalidOperationException"}]}', True),
                        ('{"include":[{"exceptionTyp":"x"}]}', False)):
            errs = parity.validate(json.loads(doc), {"$ref": "#/components/schemas/ExceptionsConfiguration"})
            check((not errs) == ok, f"OpenAPI: {doc} {'conforms' if ok else 'does not conform'} ({errs})")
        st, ct, body = post(port, '{"include":[{"exceptionType":"System.FormatException"}]}')
        got = [r["typeName"] for r in ndjson(body)] if st == 200 else []
        check(got == ["System.FormatException"], f"POST include exceptionType: {st} {got}")
        st, ct, body = post(port, '{"Exclude":[{"methodName":"Filter"}]}')
        got = [r["typeName"] for r in ndjson(body)] if st == 200 else []
        check(len(got) >= 5 and "System.ArgumentException" not in got, f"POST exclude methodName: {got}")
        st, ct, body = post(port, '{"include":[{"typeName":"E.Thrower","moduleName":"TestApp.dll"}],'
                                  '"exclude":[{"exceptionType":"System.InvalidOperationException"}]}', "text/plain")
        got = [e[0] for e in text_entries(body.decode())] if st == 200 else []
        check(sorted(set(got)) == ["System.ArgumentException", "System.FormatException", "System.NotSupportedException"],
              f"POST include typeName+moduleName, exclude first (the async one's top frame is its state machine): {got}")
        st, ct, body = post(port, '{"include":[{"exceptionTyp":"x"}]}')
        check(st == 400 and ct.startswith("application/problem+json") and b"exceptionTyp" in body,
              f"POST an unknown member: {st} {body[:200]}")
        st, ct, body = post(port, "include", ctype="text/plain")
        check(st == 415, f"POST a text body: {st}")

        # egress, and the rule's artifact
        st, ct, body = get(port, f"/exceptions?pid={pid}&egressProvider=files")
        check(st == 202, f"egress: {st} {body[:200]}")
        done = wait_for(lambda: os.path.isdir(egress) and any(f.endswith(".exceptions.txt") for f in os.listdir(egress)), 30)
        if check(done, "egress: a <stamp>_<pid>.exceptions.txt file"):
            name = next(f for f in os.listdir(egress) if f.endswith(".exceptions.txt"))
            path = os.path.join(egress, name)
            check(re.match(rf"^\d{{8}}_\d{{6}}_\d{{3}}_{pid}\.exceptions\.txt$", name) is not None, f"egress: named {name}")
            check(stat.S_IMODE(os.stat(path).st_mode) == 0o600, "egress: the file is 0600")
            wait_for(lambda: len(text_entries(open(path).read())) >= 6, 10)
            check_kinds(text_entries(open(path).read()), "egress")

        # a flood: the history stays at its limit
        before = history(port).get("added", 0)
        t = time.monotonic()
        reply = w.app.command("throw 200000")
        secs = time.monotonic() - t
        print(f"info 200000 exceptions thrown in {secs:.2f} s ({200000 / secs:.0f}/s) with the history on", flush=True)
        check(reply == "ok throw count=200000", f"flood: {reply}")
        # The runtime counts an event it drops for want of buffer room (a slow reader, e.g. dotmon
        # under ASan) in its thread's sequence number, and the gap shows only with that thread's next
        # event or a sequence point. Dropped at the flood's tail, nothing follows: so, until every
        # throw is accounted for, the app's command thread throws one more (the same kind) each 2 s.
        marks = 0
        while not wait_for(lambda: history(port).get("added", 0) - before + history(port).get("lost", 0)
                           >= 200000 + marks, 2) and marks < 15:
            check(w.app.command("throw 1") == "ok throw count=1", "flood: one more throw to show a tail gap")
            marks += 1
        print(f"info flood: {marks} more throws to show the runtime's drops at the tail", flush=True)
        h = history(port)
        print(f"info after the flood: {h}", flush=True)
        check(h.get("kept") == LIMIT and h.get("evicted", 0) >= 200000 - LIMIT - h.get("lost", 0),
              f"flood: {LIMIT} kept, the rest evicted (or lost by the runtime): {h}")
        rss = status_kib(w.dm.pid)
        if sanitized(w.dm.pid):  # a sanitizer's shadow memory and quarantine are not dotmon's
            print(f"info flood: dotmon's RSS {rss} KiB under a sanitizer, not bounded here", flush=True)
        else:
            check(0 < rss < 48 * 1024, f"flood: dotmon's RSS {rss} KiB stays bounded")
        st, ct, body = get(port, f"/exceptions?pid={pid}", {"Accept": "application/x-ndjson"})
        recs = ndjson(body) if st == 200 else []
        check(len(recs) == LIMIT and all(r["typeName"] == "System.InvalidOperationException" for r in recs),
              f"flood: the history answers its {LIMIT} newest: {len(recs)}")
        st, ct, body = get(port, f"/exceptions?pid={pid}&groups=true")
        groups = {(g["typeName"], g["throwSite"]): g for g in ndjson(body)} if st == 200 else {}
        flood = groups.get(("System.InvalidOperationException", "TestApp.dll!TestApp.Program.ThrowOne"), {})
        check(ct.startswith("application/x-ndjson") and flood.get("count", 0) >= 200000 - h.get("lost", 0)
              and groups.get(("System.FormatException", "TestApp.dll!E.Thrower.Inner"), {}).get("count") == 1,
              f"groups=true: every exception counted by type and thrower, beyond the history's {LIMIT}: "
              f"{[(k, v.get('count')) for k, v in groups.items()]}")
        st, _, _ = get(port, f"/exceptions?pid={pid}&groups=true&follow=true")
        check(st == 400, f"groups=true with follow=true: 400 ({st})")
        check(wait_for(lambda: sessions(port) == 1, 20),
              f"only the standing exceptions session is left in the runtime ({sessions(port)})")
    finally:
        w.close()

    # InProcessFeatures:Exceptions:CollectionFilters from the settings, bound as .NET binds a list:
    # entries 0, 5 (after a gap) and "first" all apply; entry 7 names none of the four members (a
    # typo) and is left out with a warning instead of matching every exception.
    flt = "DotnetMonitor_InProcessFeatures__Exceptions__CollectionFilters__Exclude__"
    fw = Watched("dotmon-exceptions-filters-", env={
        "DotnetMonitor_InProcessFeatures__Exceptions__Enabled": "true",
        flt + "0__ExceptionType": "System.FormatException",
        flt + "5__ExceptionType": "System.InvalidOperationException",
        flt + "first__ExceptionType": "System.ArgumentException",
        flt + "7__ExceptionTyp": "System.TimeoutException"})
    try:
        check(wait_for(lambda: history(fw.port).get("state") == "running", 30),
              f"settings filters: the exceptions session runs: {history(fw.port)}")
        kinds = ("FormatException", "InvalidOperationException", "ArgumentException", "TimeoutException")
        for kind in kinds:
            check(fw.app.command(f"throw 2 {kind}") == "ok throw count=2", f"settings filters: throw 2 {kind}")
        check(wait_for(lambda: history(fw.port).get("added", 0) >= 2 * len(kinds), 20),
              f"settings filters: all {2 * len(kinds)} kept: {history(fw.port)}")
        st, _, body = get(fw.port, f"/exceptions?pid={fw.app.pid}", {"Accept": "application/x-ndjson"})
        got = sorted({r["typeName"] for r in ndjson(body)}) if st == 200 else []
        check(got == ["System.TimeoutException"],
              f"settings filters: Exclude entries 0, 5 and first all apply, 7 matches nothing: {st} {got}")
        fw.log.seek(0)
        check("CollectionFilters:Exclude:7 names none of" in fw.log.read(),
              "settings filters: entry 7 left out with a warning")
    finally:
        fw.close()

    off = Watched("dotmon-exceptions-off-")
    try:
        st, ct, body = get(off.port, f"/exceptions?pid={off.app.pid}")
        doc = json.loads(body) if ct.startswith("application/problem+json") else {}
        check(st == 400 and doc.get("detail") == "The 'Exceptions' feature is not enabled.",
              f"off: GET is dotnet-monitor's 400: {st} {body[:200]}")
        st, _, _ = post(off.port, "{}")
        check(st == 404, f"off: POST is dotnet-monitor's 404: {st}")
        caps = {c.get("name"): c.get("enabled") for c in (get_json(off.port, "/info")[1] or {}).get("capabilities", [])}
        check(caps.get("exceptions") is False, f"off: /info exceptions disabled: {caps}")
    finally:
        off.close()
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
