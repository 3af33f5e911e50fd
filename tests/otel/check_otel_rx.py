# SPDX-License-Identifier: MIT
"""Issue 33's receiver and test app, proved with no dotmon: the OTel test app with its in-process
OpenTelemetry SDK (OTEL_TEST_SDK=1) exports over OTLP/HTTP protobuf to a real Aspire Dashboard;
after one /work?id=7 the dashboard's API must hold the five spans of that trace (the ids, parents,
kinds, statuses and tags the app answered), its three log records (scope key/values, the exception,
trace and span ids), and the resource's service.name; the comparison helpers must find a view
equal to itself and find a changed span, log and metric. A second round goes through FaultProxy
with gzip: the requests leave the SDK compressed, the proxy inflates them (the dashboard reads no
gzip) and the dashboard gets them; what went through, decoded by otlp_pb, equals the dashboard's
view of the spans and logs, and its metrics hold the values the app counted itself (the
dashboard's API has no metrics). A third round: a receiver that wants an API key, over TLS with
a private CA. The proxy's faults (a status with Retry-After, down, slow) on plain requests."""

import copy
import http.client
import json
import os
import shutil
import ssl
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from otelrx import (DASHBOARD_DROPS_LOG_ATTRS, FaultProxy, OtelApp, Receiver, compare_logs, compare_metrics,  # noqa: E402
                    compare_receivers, compare_resources, compare_spans, flat_logs, flat_spans, metric_points,
                    private_ca)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, check, fetch, http_request, settle as _settle, verdict  # noqa: E402

SERVER, INTERNAL, CLIENT = 2, 1, 3


def by_name(spans):
    return {s["name"]: s for s in spans}


def main():
    tmp = tempfile.mkdtemp(prefix="otelrx-check-")
    os.chmod(tmp, 0o700)
    rx = app = proxy = None
    try:
        os.makedirs(os.path.join(tmp, "rx"))
        rx = Receiver(tmp=os.path.join(tmp, "rx"))
        print(f"dashboard answering after {rx.start_seconds:.2f} s: {rx.command_line()}", flush=True)
        service = f"otelrx-check-{os.getpid()}"
        app = OtelApp(tmp, env=rx.sdk_env(service), sdk=True)
        ans = app.work(7)
        tid = ans["traceId"]
        check(tid and len(tid) == 32, f"the app answered a trace id ({tid})")

        spans = rx.wait_spans(5, trace_id=tid)
        names = by_name(spans)
        check(set(names) == {"GET /work", "work.parent", "work.child", "GET", "GET /echo"},
              f"the trace's five spans reached the dashboard: {sorted(names)}")
        if len(names) == 5:
            req, par, chi, cli, echo = (names[n] for n in ("GET /work", "work.parent", "work.child", "GET", "GET /echo"))
            check(req["span_id"] == ans["requestSpanId"] and req["parent_span_id"] == "" and req["kind"] == SERVER,
                  "GET /work: the request span the app saw, a root, kind Server")
            check(par["span_id"] == ans["parentSpanId"] and par["parent_span_id"] == req["span_id"]
                  and par["kind"] == INTERNAL and par["status"] == 1, "work.parent: under the request, Internal, Ok")
            check(par["attributes"].get("order.id") == "7" and par["attributes"].get("work.kind") == "test",
                  f"work.parent's tags {par['attributes']}")
            check(par["scope"] == "DotmonTest.OTel" and par["scope_version"] == "1.0.0",
                  "work.parent's scope is the ActivitySource DotmonTest.OTel 1.0.0")
            check(chi["span_id"] == ans["childSpanId"] and chi["parent_span_id"] == par["span_id"]
                  and chi["kind"] == CLIENT and chi["status"] == 2 and chi["status_message"] == "step failed"
                  and chi["attributes"].get("step") == "1", "work.child: under work.parent, Client, Error 'step failed'")
            check(cli["parent_span_id"] == chi["span_id"] and cli["span_id"] == ans["echoParentSpanId"]
                  and cli["kind"] == CLIENT and cli["scope"] == "System.Net.Http",
                  "the HttpClient span: under work.child, the parent the /echo request saw")
            check(echo["span_id"] == ans["echoSpanId"] and echo["parent_span_id"] == cli["span_id"]
                  and echo["kind"] == SERVER, "GET /echo: the server span under the HttpClient span")
            check(all(s["duration_ns"] > 0 for s in spans), "every span has a duration")
            check(all(s["resource"].get("service.name") == service for s in spans), "the spans' service.name")

        logs = rx.wait_logs(3, trace_id=tid)
        ev = {r["event_name"]: r for r in logs}
        check(set(ev) == {"WorkStarted", "WorkFailed", "Echo"}, f"the trace's three log records: {sorted(ev)}")
        if "WorkStarted" in ev:
            r = ev["WorkStarted"]
            check(r["scope"] == "DotmonTest.OTel.Work" and r["severity"] == 9 and r["body"] == "Work 7 started for alice",
                  f"WorkStarted: category, Information, formatted body ({r['body']!r})")
            check(r["attributes"].get("OrderId") == "7" and r["attributes"].get("Customer") == "alice"
                  and r["attributes"].get("Tenant") == "contoso", f"WorkStarted: state and scope values {r['attributes']}")
            check(r["trace_id"] == tid and r["span_id"] == ans["parentSpanId"], "WorkStarted: inside work.parent")
        if "WorkFailed" in ev:
            r = ev["WorkFailed"]
            check(r["severity"] == 17 and r["attributes"].get("exception.message") == "work 7 failed on purpose"
                  and "InvalidOperationException" in r["attributes"].get("exception.type", "")
                  and "exception.stacktrace" in r["attributes"], "WorkFailed: Error with the exception's fields")
        if "Echo" in ev:
            check(ev["Echo"]["span_id"] == ans["echoSpanId"], "Echo: inside the /echo server span")

        res = {r["name"]: r for r in rx.resources()}
        check(service in res and res[service]["hasTraces"] and res[service]["hasLogs"],
              f"the resource {service} is listed with traces and logs")
        # Metrics reach the dashboard (hasMetrics), though its API cannot answer their values.
        got = rx.resources() if service in res and res[service].get("hasMetrics") else None
        if not got:
            time.sleep(1.5)
            got = rx.resources()
        check(any(r["name"] == service and r.get("hasMetrics") for r in got), "the dashboard received metrics")

        d = compare_receivers(rx, rx, [tid], service=service)
        check(d == [], f"a receiver's view of the trace compares equal to itself: {d}")
        check(compare_receivers(rx, rx, ["0" * 32]) != [], "a trace in neither view is a difference")

        # The comparison helpers: equal to itself, and each kind of change found.
        check(compare_spans(spans, copy.deepcopy(spans)) == [] and compare_logs(logs, copy.deepcopy(logs)) == [],
              "a view compares equal to itself")
        changed = copy.deepcopy(spans)
        for s in changed:
            if s["name"] == "work.child":
                s["attributes"]["step"] = "2"
                s["end_ns"] += 2_000_000
                s["duration_ns"] += 2_000_000
        d = compare_spans(spans, changed)
        check(len(d) == 2 and any("attributes" in x for x in d) and any("durations" in x for x in d),
              f"a changed tag and a 2 ms longer span are found: {d}")
        check(len(compare_spans(spans, spans[1:])) == 1, "a missing span is found")
        changed_logs = copy.deepcopy(logs)
        changed_logs[0]["attributes"]["Tenant"] = "fabrikam"
        check(len(compare_logs(logs, changed_logs)) == 2, "a changed log attribute is found (one each side)")
        check(compare_resources(spans[0]["resource"], {"service.name": "other"}) != [], "a changed service.name is found")
        st = app.metrics_state()
        pts = {("DotmonTest.OTel", "dotmontest.requests", "sum", frozenset({("route", "/work")})): st["requests"]}
        check(compare_metrics(pts, {k: v + 1 for k, v in pts.items()}) != [] and
              compare_metrics(pts, {k: v + 1 for k, v in pts.items()}, tolerance={"dotmontest.requests": 1}) == [],
              "metric values: a difference is found, and allowed within a tolerance")

        # gzip through the fault proxy: the SDK compresses, the proxy inflates (checks) and forwards.
        proxy = FaultProxy(rx.otlp_url)
        app.stop()
        env = rx.sdk_env(service + "-gz", endpoint=proxy.url)
        env["OTEL_EXPORTER_OTLP_COMPRESSION"] = "gzip"
        app = OtelApp(tmp, env=env, sdk=True)
        tid2 = app.work(8)["traceId"]
        spans2 = rx.wait_spans(5, trace_id=tid2)
        check(len(spans2) == 5, f"through the proxy with gzip: the five spans ({len(spans2)})")
        seen = proxy.seen("/v1/traces")
        check(seen and all(r[2] == "gzip" and r[1] == "application/x-protobuf" and r[4] == 200 for r in seen),
              f"the traces requests were gzip protobuf, answered 200: {seen[:3]}")

        # What went through, decoded by otlp_pb, against the dashboard's view and the app's own
        # count: the decoder, the normalisers and the comparisons agree with a real SDK.
        tapped = [s for s in flat_spans(proxy.received("traces")) if s["trace_id"] == tid2]
        d = compare_spans(tapped, spans2)
        check(len(tapped) == 5 and d == [], f"the proxy's decoded spans are the dashboard's: {d}")
        logs2 = rx.wait_logs(3, trace_id=tid2)
        tapped_logs = [r for r in flat_logs(proxy.received("logs")) if r["trace_id"] == tid2]
        d = compare_logs(tapped_logs, logs2, ignore_attrs=DASHBOARD_DROPS_LOG_ATTRS, time_tolerance_ns=0)
        check(len(tapped_logs) == 3 and d == [], f"the proxy's decoded log records are the dashboard's: {d}")
        raw_par = [sp for rs in proxy.received("traces")["resourceSpans"] for ss in rs["scopeSpans"]
                   for sp in ss["spans"] if sp["name"] == "work.parent" and sp["traceId"] == tid2]
        check(raw_par and {"key": "order.id", "value": {"intValue": "8"}} in raw_par[-1]["attributes"],
              "the decoded work.parent keeps order.id as an intValue")
        check(proxy.partial_successes() == [], f"the dashboard rejected nothing: {proxy.partial_successes()}")
        # ... and it does say so when it rejects: a sum data point without a value.
        bad = {"resourceMetrics": [{"resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "bad"}}]},
                                    "scopeMetrics": [{"scope": {"name": "s"}, "metrics": [
                                        {"name": "m", "sum": {"dataPoints": [{"timeUnixNano": str(time.time_ns())}],
                                                              "aggregationTemporality": 2}}]}]}]}
        fetch(proxy.url + "/v1/metrics", "POST", {"Content-Type": "application/json"}, json.dumps(bad).encode())
        check(proxy.partial_successes() == [("/v1/metrics", 1, "")],
              f"a data point without a value: a partial success, 1 rejected ({proxy.partial_successes()})")
        lat = proxy.span_latencies({tid2})
        check(len(lat) == 5 and all(0 <= x < 30_000 for x in lat), f"the spans' end-to-arrival times (ms): {lat}")
        want = app.expected_points("histogram")
        hist = ("DotmonTest.OTel", "dotmontest.work_size", "histogram", frozenset({("route", "/work")}))
        hist_want = want.pop(hist)

        def points():
            return metric_points(proxy.received("metrics"))

        pts = _settle(points, lambda p: all(p.get(k) == v for k, v in want.items()), 15)
        d = compare_metrics({k: pts.get(k) for k in want if k in pts}, want)
        check(d == [], f"the SDK's exported metrics hold the app's values (counter, up-down, gauge): {d}")
        check(pts.get(hist, (0, 0))[:2] == hist_want,
              f"the histogram's count and sum {pts.get(hist)}")
        check(pts.get(("DotmonTest.OTel", "dotmontest.requests", "sum.meta", frozenset())) == (True, 2)
              and pts.get(("DotmonTest.OTel", "dotmontest.open_orders", "sum.meta", frozenset())) == (False, 2),
              "the counter is a monotonic cumulative sum, the up-down counter a non-monotonic one")

        # The proxy's faults, with a plain POST: a status with Retry-After, refused while down, slow.
        def post():
            t0 = time.monotonic()
            try:
                r, _ = http_request(proxy.port, "/v1/traces", "POST", {"Content-Type": "application/x-protobuf"}, b"", 10)
                return r.status, r.getheader("Retry-After"), time.monotonic() - t0
            except OSError:
                return 0, None, time.monotonic() - t0

        proxy.mode, proxy.status, proxy.retry_after = "status", 429, 3
        a = post()
        proxy.down()
        b = post()
        proxy.up()
        proxy.mode, proxy.delay = "slow", 1.0
        c = post()
        proxy.mode = "pass"
        check(a[:2] == (429, "3") and b[0] == 0 and c[0] == 200 and c[2] >= 1.0,
              f"the proxy answers 429 with Retry-After {a[:2]}, is refused while down {b[0]}, forwards slowly {c[0]} "
              f"after {c[2]:.2f} s")

        # A receiver that wants an API key, over TLS with a private CA: the SDK with the key in
        # OTEL_EXPORTER_OTLP_HEADERS and only that CA trusted (SSL_CERT_FILE) delivers; a request
        # without the key is refused.
        app.stop()
        ca, crt, key = private_ca(os.path.join(tmp, "tls"))
        os.makedirs(os.path.join(tmp, "rx2"))
        rx2 = Receiver(tmp=os.path.join(tmp, "rx2"), api_key="otelrx-key", cert=crt, key=key)
        try:
            check(rx2.otlp_url.startswith("https://"), f"the second receiver's OTLP endpoint is HTTPS ({rx2.otlp_url})")
            env = rx2.sdk_env(service + "-tls")
            env["SSL_CERT_FILE"] = ca
            app = OtelApp(tmp, env=env, sdk=True)
            tid3 = app.work(9)["traceId"]
            check(len(rx2.wait_spans(5, trace_id=tid3)) == 5, "over TLS with the API key: the five spans")
            ctx = ssl.create_default_context(cafile=ca)
            c = http.client.HTTPSConnection("127.0.0.1", int(rx2.otlp_url.rsplit(":", 1)[1]), context=ctx, timeout=10)
            c.request("POST", "/v1/traces", body=b"", headers={"Content-Type": "application/x-protobuf"})
            st = c.getresponse().status
            c.close()
            check(st == 401, f"without the API key: {st}")
        finally:
            rx2.stop(show_log=bool(FAILS))
    finally:
        if app is not None:
            app.kill()
        if proxy is not None:
            proxy.close()
        if rx is not None:
            rx.stop(show_log=bool(FAILS))
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("otel_rx")


if __name__ == "__main__":
    sys.exit(main())
