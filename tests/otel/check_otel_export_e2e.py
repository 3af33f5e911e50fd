#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 33 end to end: the OTel test app WITHOUT its in-process SDK, dotmon with
OTEL_EXPORTER_OTLP_ENDPOINT alone (plus short intervals) pointing at a FaultProxy in front of the
real receiver (the Aspire Dashboard). After /work?id=7 the dashboard holds the trace's spans with
the ids the app answered (the request span, work.parent, work.child, the HttpClient span and the
/echo server span: parents, kinds, statuses, ActivitySource scopes), its log records (scope
values, the exception, trace and span ids), and a resource whose service.name is the app's own
OTEL_SERVICE_NAME (read from its environment); the metrics that went through the proxy (the
dashboard's API has no metric values) equal the app's /metrics-state within one export interval;
/metrics/dotmon and /info?extras=true count what was exported, per process and signal, and a
clean stop of dotmon drops nothing. Other sessions of the app: an Http-profile /trace holds the
request made during it and spans keep arriving during and after it; a Logs-profile /trace holds
the records made during it, and log records keep arriving after it and after a /logs stream.
Prints the spans' end-to-arrival latencies."""

import http.client
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from otelrx import FaultProxy, OtelApp, Receiver, metric_points  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (FAILS, check, fetch, free_port, get_json, http_get, settle, start_dotmon,  # noqa: E402
                    stop, verdict, wait_for)
import dmtest  # noqa: E402

SERVER, INTERNAL, CLIENT = 2, 1, 3
INTERVAL_MS = 1000


def dotmon_env(endpoint):
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_METRIC_EXPORT_INTERVAL": str(INTERVAL_MS),
            "OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BLRP_SCHEDULE_DELAY": "200",
            "DotnetMonitor_OpenTelemetry__Meters": "DotmonTest.OTel"}


def log_text(log):
    log.flush()
    with open(log.name, errors="replace") as f:
        return f.read()


def counts(port, pid):
    """{(signal, kind): n} of dotmon_otel_<kind>_total{pid,signal} on /metrics/dotmon."""
    _, _, body = http_get(port, "/metrics/dotmon")
    out = {}
    for line in body.decode().splitlines():
        for kind in ("exported", "dropped", "failed"):
            head = f"dotmon_otel_{kind}_total{{pid=\"{pid}\",signal=\""
            if line.startswith(head):
                sig, value = line[len(head):].split("\"} ")
                out[(sig, kind)] = int(float(value))
    return out


def check_trace(rx, ans, service):
    tid = ans["traceId"]
    # every ActivitySource is listened to by default ("*"): the runtime's experimental ones too
    # (System.Net.Http's connection spans), which an SDK adds only when named
    every = rx.wait_spans(lambda v: len([s for s in v if not s["scope"].startswith("Experimental.")]) >= 5,
                          trace_id=tid)
    print("spans:", sorted((s["name"], s["scope"], s["kind"]) for s in every), flush=True)
    spans = [s for s in every if not s["scope"].startswith("Experimental.")]
    by_id = {s["span_id"]: s for s in spans}
    check(len(spans) == 5, f"the trace's five spans reached the receiver ({len(spans)})")
    req, par, chi = by_id.get(ans["requestSpanId"]), by_id.get(ans["parentSpanId"]), by_id.get(ans["childSpanId"])
    cli, echo = by_id.get(ans["echoParentSpanId"]), by_id.get(ans["echoSpanId"])
    check(req is not None and req["parent_span_id"] == "" and req["kind"] == SERVER
          and req["scope"] == "Microsoft.AspNetCore", f"the /work request span: a root, Server ({req})")
    check(par is not None and par["name"] == "work.parent" and par["parent_span_id"] == ans["requestSpanId"]
          and par["kind"] == INTERNAL and par["status"] == 1 and par["scope"] == "DotmonTest.OTel"
          and par["scope_version"] == "1.0.0", f"work.parent: under the request, Internal, Ok ({par})")
    check(par is not None and par["attributes"].get("order.id") == "7" and par["attributes"].get("work.kind") == "test",
          "work.parent's tags")
    check(chi is not None and chi["name"] == "work.child" and chi["parent_span_id"] == ans["parentSpanId"]
          and chi["kind"] == CLIENT and chi["status"] == 2 and chi["status_message"] == "step failed"
          and chi["attributes"].get("step") == "1", f"work.child: Client, Error 'step failed' ({chi})")
    check(cli is not None and cli["parent_span_id"] == ans["childSpanId"] and cli["kind"] == CLIENT
          and cli["scope"] == "System.Net.Http", f"the HttpClient span under work.child ({cli})")
    check(echo is not None and echo["parent_span_id"] == ans["echoParentSpanId"] and echo["kind"] == SERVER,
          f"the /echo server span under the HttpClient span ({echo})")
    check(all(s["duration_ns"] > 0 and s["resource"].get("service.name") == service for s in spans),
          "every span has a duration and the app's service.name")
    return spans


def own_spans(rx, tid, n=5):
    """The trace's spans of the app's own sources and ASP.NET Core / HttpClient (not the runtime's
    experimental ones), once n arrived (or the wait ran out)."""
    keep = [s for s in rx.wait_spans(lambda v: len([s for s in v if not s["scope"].startswith("Experimental.")]) >= n,
                                     trace_id=tid) if not s["scope"].startswith("Experimental.")]
    return {s["span_id"] for s in keep}


def request_events(path):
    """The DiagnosticSource request events (Activity<N>Start/Stop: HttpRequestIn, HttpRequestOut)
    of a nettrace file, read by `dotmon convert --format ndjson`: a list of (EventName, {argument:
    value}); the Arguments payload is UTF-16LE key, value, key, value... each ended by a NUL."""
    r = subprocess.run([os.environ["DOTMON_BIN"], "convert", path, "--format", "ndjson"], capture_output=True,
                       text=True, timeout=120)
    out = []
    for line in r.stdout.splitlines():
        e = json.loads(line)
        p = e.get("payload") or {}
        if e.get("provider") == "Microsoft-Diagnostics-DiagnosticSource" and e.get("event", "").startswith("Activity") \
                and isinstance(p.get("Arguments"), str) and "EventName" in p:
            parts = bytes.fromhex(p["Arguments"]).decode("utf-16-le").split("\0")
            out.append((p["EventName"], dict(zip(parts[0::2], parts[1::2]))))
    return out


def check_across_trace(rx, app, port, tmp, log):
    """The one-spec-set rule (docs/events.md §9.1): an Http-profile /trace of the same app asks
    DiagnosticSource for other FilterAndPayloadSpecs; dotmon adds OTel's lines to it and restarts
    its own session after it: spans made during the trace and after it both arrive."""
    dest = os.path.join(tmp, "http.nettrace")
    result = {}

    def trace():
        result["st"] = fetch(f"http://127.0.0.1:{port}/trace?pid={app.pid}&profile=Http&durationSeconds=5",
                             timeout=60, dest=dest)[0]

    started = f"trace of {app.pid} started"
    before = log_text(log).count(started)
    t = threading.Thread(target=trace)
    t.start()
    # Not the first bytes of the file: urllib's read(64 KiB) returns once 64 KiB or the end came,
    # and this trace is a few KiB until its rundown, so those bytes mean the trace is over. The
    # runtime's acknowledgement is dotmon's log line.
    check(wait_for(lambda: log_text(log).count(started) > before, 10), "the Http-profile trace session started")
    time.sleep(0.5)  # a margin: the runtime applies the session's specs before it answers (seen)
    during = app.work(8)
    t.join(60)
    check(result.get("st") == 200 and os.path.getsize(dest) > 0, f"the Http-profile /trace of the app ({result})")
    ev = request_events(dest)
    print("Http-profile trace's request events:", sorted({n for n, _ in ev}), len(ev), flush=True)
    # the request made during the trace, by its trace id: /work, its HttpClient call, /echo
    mine = {(n, a.get("Path") or a.get("RequestUri", "").rpartition("/")[2])
            for n, a in ev if a.get("ActivityTraceId") == during["traceId"]}
    check({("Microsoft.AspNetCore.Hosting.HttpRequestIn.Start", "/work"),
           ("Microsoft.AspNetCore.Hosting.HttpRequestIn.Start", "/echo"),
           ("System.Net.Http.HttpRequestOut.Start", "echo?id=8")} <= mine,
          f"the Http-profile trace holds the request made during it: {sorted(mine)}")
    ids = own_spans(rx, during["traceId"])
    check({during["parentSpanId"], during["childSpanId"], during["requestSpanId"]} <= ids,
          f"spans made during another DiagnosticSource session reach the receiver ({len(ids)})")
    after = None
    for n in range(10, 40):  # OTel's session asks again right after the trace: a few tries
        after = app.work(n)
        ids = own_spans(rx, after["traceId"])
        if len(ids) >= 5:
            break
    check(len(ids) == 5 and after["parentSpanId"] in ids,
          f"spans made after it reach the receiver (work {n}: {len(ids)} spans)")


def spans_flow(rx, app, start, what):
    """Spans of a new /work reach the receiver within a few tries (OTel's session may be asking
    again)."""
    ids, n = set(), start
    for n in range(start, start + 6):
        after = app.work(n)
        ids = own_spans(rx, after["traceId"])
        if len(ids) >= 5:
            break
    check(len(ids) == 5, f"spans made {what} reach the receiver (work {n}: {len(ids)} spans)")


def check_abandoned_trace(rx, app, port):
    """A client that leaves an Http-profile /trace mid-stream: the session is aborted, not ended by
    the runtime, and OTel's session must still ask again (the runtime tore the shared listener
    down with it)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", f"/trace?pid={app.pid}&profile=Http&durationSeconds=60")
    resp = conn.getresponse()
    first = resp.read(64)
    check(resp.status == 200 and len(first) > 0, f"the abandoned /trace started ({resp.status})")
    time.sleep(1.5)
    conn.close()  # the client leaves; dotmon aborts the session
    spans_flow(rx, app, 100, "after a client left an Http-profile /trace")


def log_events(path):
    """{EventName: FormattedMessage} of the Microsoft-Extensions-Logging FormattedMessage events of
    a nettrace file (`dotmon convert --format ndjson`)."""
    r = subprocess.run([os.environ["DOTMON_BIN"], "convert", path, "--format", "ndjson"], capture_output=True,
                       text=True, timeout=120)
    out = {}
    for line in r.stdout.splitlines():
        e = json.loads(line)
        if e.get("provider") == "Microsoft-Extensions-Logging" and e.get("event") == "FormattedMessage":
            p = e.get("payload") or {}
            out.setdefault(p.get("EventName"), []).append(p.get("FormattedMessage"))
    return out


def check_logs_trace(rx, app, port, tmp, log):
    """A Logs-profile /trace of the app while dotmon's OTel session also reads its logs: the trace
    holds the records of a request made during it, and after it (and after a /logs stream) OTel's
    records still arrive, following the app's own filters (only its DotmonTest.OTel.Work records,
    not ASP.NET Core's Information ones)."""
    dest = os.path.join(tmp, "logs.nettrace")
    result = {}
    started = f"trace of {app.pid} started"
    before = log_text(log).count(started)

    def trace():
        result["st"] = fetch(f"http://127.0.0.1:{port}/trace?pid={app.pid}&profile=Logs&durationSeconds=3",
                             timeout=60, dest=dest)[0]

    t = threading.Thread(target=trace)
    t.start()
    check(wait_for(lambda: log_text(log).count(started) > before, 10), "the Logs-profile trace session started")
    time.sleep(0.5)
    app.work(60)
    t.join(60)
    ev = log_events(dest) if result.get("st") == 200 else {}
    print("Logs-profile trace's records:", {k: len(v) for k, v in ev.items()}, flush=True)
    check("Work 60 started for alice" in ev.get("WorkStarted", []) and "Echo 60" in ev.get("Echo", [])
          and "Work 60 failed" in ev.get("WorkFailed", []),
          f"the Logs-profile trace holds the records of the request made during it ({result})")
    logs_flow(rx, app, 61, "after the Logs trace")
    # a /logs stream of the app is such a session too
    st, _, n = fetch(f"http://127.0.0.1:{port}/logs?pid={app.pid}&durationSeconds=2", timeout=60,
                     dest=os.path.join(tmp, "logs.ndjson"))
    check(st == 200, f"a /logs stream of the app ({st} {n})")
    logs_flow(rx, app, 70, "after a /logs stream")


def logs_flow(rx, app, start, what):
    """The log records of a new /work reach the receiver within a few tries (the runtime left
    Microsoft-Extensions-Logging filtering every record out when another session with it ended,
    docs/events.md §4.1; OTel's session asks again right after), and follow the app's filters."""
    want = {"WorkStarted", "WorkFailed", "Echo"}
    recs, n, after = [], start, None
    for n in range(start, start + 6):
        after = app.work(n)
        recs = rx.wait_logs(lambda v: want <= {r["event_name"] for r in v}, seconds=3, trace_id=after["traceId"])
        if want <= {r["event_name"] for r in recs}:
            break
    check(want <= {r["event_name"] for r in recs}, f"log records made {what} reach the receiver (work {n})")
    time.sleep(1)  # anything else of that request would have come with them
    recs = rx.logs(trace_id=after["traceId"])
    check(bool(recs) and all(r["scope"] == "DotmonTest.OTel.Work" for r in recs),
          f"and follow the app's filters: {sorted((r['scope'], r['event_name']) for r in recs)}")


def check_logs(rx, ans):
    tid = ans["traceId"]
    want = {"WorkStarted", "WorkFailed", "Echo"}
    logs = rx.wait_logs(lambda v: want <= {r["event_name"] for r in v}, trace_id=tid)
    ev = {r["event_name"]: r for r in logs}
    check(want <= set(ev), f"the trace's three log records: {sorted(ev)}")
    r = ev.get("WorkStarted")
    check(r is not None and r["scope"] == "DotmonTest.OTel.Work" and r["severity"] == 9
          and r["body"] in ("Work 7 started for alice", "Work {OrderId} started for {Customer}")
          and r["span_id"] == ans["parentSpanId"], f"WorkStarted: category, Information, inside work.parent ({r})")
    check(r is not None and r["attributes"].get("OrderId") == "7" and r["attributes"].get("Customer") == "alice"
          and r["attributes"].get("Tenant") == "contoso", "WorkStarted: state and scope values")
    r = ev.get("WorkFailed")
    check(r is not None and r["severity"] == 17
          and r["attributes"].get("exception.message") == "work 7 failed on purpose"
          and "InvalidOperationException" in r["attributes"].get("exception.type", ""),
          f"WorkFailed: Error with the exception's fields ({r})")
    check("Echo" in ev and ev["Echo"]["span_id"] == ans["echoSpanId"], "Echo: inside the /echo server span")


def check_metrics(proxy, app):
    # .NET 10 publishes the histogram's buckets: an ExponentialHistogram with the app's count and sum
    want = app.expected_points("exponentialHistogram")
    # within one export interval (and the runtime's own interval before it): settle, then compare
    pts = settle(lambda: metric_points(proxy.received("metrics")),
                 lambda p: all(p.get(k) == v for k, v in want.items()), 10 * INTERVAL_MS / 1000)
    got = {k: pts.get(k) for k in want}
    print("metrics:", got, flush=True)
    check(got == want, f"the exported metrics hold the app's values: {got} vs {want}")


def main():
    tmp = tempfile.mkdtemp(prefix="otel-e2e-")
    os.chmod(tmp, 0o700)
    rx = app = proxy = dm = log = None
    service = f"otel-e2e-{os.getpid()}"
    try:
        os.makedirs(os.path.join(tmp, "rx"))
        rx = Receiver(tmp=os.path.join(tmp, "rx"))
        proxy = FaultProxy(rx.otlp_url)
        app = OtelApp(tmp, env={"OTEL_SERVICE_NAME": service})
        port = free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = start_dotmon(tmp, port, log, [app.pid], env=dotmon_env(proxy.url))
        check(wait_for(lambda: f"process {app.pid}: its logs spans go to OpenTelemetry" in log_text(log), 30),
              "dotmon's OTel session of the app started (logs and spans)")
        ans = app.work(7)
        check(len(ans.get("traceId", "")) == 32, f"the app answered a trace id ({ans})")
        spans = check_trace(rx, ans, service)
        check_logs(rx, ans)
        check_metrics(proxy, app)
        res = [r for r in rx.resources() if r["name"] == service]
        check(res and res[0]["hasTraces"] and res[0]["hasLogs"] and res[0].get("hasMetrics"),
              f"the resource {service} (the app's OTEL_SERVICE_NAME) has traces, logs and metrics ({res})")
        check(all(s["resource"].get("process.pid") == str(app.pid) for s in spans), "the spans' process.pid")
        lat = sorted(proxy.span_latencies({ans["traceId"]}))
        if lat:
            print(f"span end to receiver: n={len(lat)} p50={lat[len(lat) // 2]:.1f} ms max={lat[-1]:.1f} ms", flush=True)

        c = settle(lambda: counts(port, app.pid), lambda c: c.get(("traces", "exported"), 0) >= 5, 10)
        print("counts:", c, flush=True)
        check(c.get(("traces", "exported"), 0) >= 5 and c.get(("logs", "exported"), 0) >= 3
              and c.get(("metrics", "exported"), 0) >= 3, f"/metrics/dotmon counts the exported items {c}")
        check(all(c.get((s, k), 0) == 0 for s in ("traces", "logs", "metrics") for k in ("dropped", "failed")),
              "nothing dropped or failed")
        _, info = get_json(port, "/info?extras=true")
        procs = ((info or {}).get("openTelemetry") or {}).get("processes", [])
        mine = [p for p in procs if str(p.get("pid")) == str(app.pid)]
        print("info:", mine, flush=True)
        check(bool(mine), "/info?extras=true lists the app's counts")
        check_across_trace(rx, app, port, tmp, log)
        check_abandoned_trace(rx, app, port)
        check_logs_trace(rx, app, port, tmp, log)
        text = log_text(log)
        check("a DiagnosticSource session also carries the FilterAndPayloadSpecs lines of" in text
              and "took the runtime's one FilterAndPayloadSpecs list with it; set again" in text
              and f"process {app.pid}: its OpenTelemetry session starts again" in text,
              "the trace carried OTel's lines and they were set again after it; OTel's session asked "
              "for its log filter again after the logs trace")
    finally:
        if dm is not None:
            stop(dm, 15)
            text = log_text(log)
            check(dm.returncode == 0 and "not delivered in time" not in text, "a clean stop drops nothing")
            check(dmtest.sanitizer_report(text) is None, "no sanitizer report")
            if FAILS:
                sys.stderr.write("--- dotmon log (tail) ---\n" + text[-6000:])
            log.close()
        if app is not None:
            app.kill()
        if proxy is not None:
            proxy.close()
        if rx is not None:
            rx.stop(show_log=bool(FAILS))
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("otel_export_e2e")


if __name__ == "__main__":
    sys.exit(main())
