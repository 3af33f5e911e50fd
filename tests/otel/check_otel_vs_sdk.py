#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 33, "same as in-process": one run of the OTel test app with its in-process OpenTelemetry
SDK exporting to receiver A (a real Aspire Dashboard) while dotmon, outside the process, exports
the same app's telemetry to receiver B (another one, through a FaultProxy for the metric values).
compare_receivers over the traces of a few /work calls: the same trace ids, span ids, parents,
names, kinds, statuses and attributes, durations within 1 ms, the same log records and the same
service.name; the metric values the SDK and dotmon exported agree within one export interval.

dotmon is set as the SDK in the app is (the same ActivitySources, meter and log categories) and
the SDK's log bodies are the templates (OTEL_TEST_LOG_FORMATTED=0), as dotmon's are. With the SDK
in the process, its ASP.NET Core instrumentation renames the server activities and tags them in the
process, so dotmon reads the same names and tags (without the SDK they keep the runtime's
operation name and have no tags: otel_export_e2e). The accepted differences (docs/otel.md §5),
each named in LOG_ATTRS and nowhere silently: logrecord.event.id (dotmon always sends it, the SDK
only when asked) and Kestrel's connection scope value ConnectionId (the SDK's logger has it; a
keep-alive request's start carries no related activity id back to the connection scope on .NET
10.0.12, so dotmon's chain of scopes ends above it: docs/otel.md §5). The dashboard answers every attribute value
as text, so a number sent as a string (ArgumentsJson) compares equal there; the type difference is
documented, not tested here.

Records logged after an await inside a scope come in the runtime's stream before their scope's
start when the continuation runs on another thread (docs/events.md §4.4): /work's WorkFailed
sometimes, the app's /await every time (its record's thread wrote an event before the scope's).
Each must carry its scopes' values in dotmon's view as in the SDK's, in every run.

Then the SDK's own default, IncludeScopes false, against dotmon's OpenTelemetry:IncludeScopes=false:
the same views again, and no record with a scope's pairs."""

import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_otel_export_e2e import own_spans  # noqa: E402
from otelrx import FaultProxy, OtelApp, Receiver, compare_metrics, compare_receivers, metric_points  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, check, free_port, settle, start_dotmon, stop, verdict, wait_for  # noqa: E402

INTERVAL_MS = 1000
# logrecord.event.id: sent by dotmon, by the SDK only when asked; ConnectionId: Kestrel's connection
# scope, which the SDK's logger gets and dotmon only when the request's start links back to it
# (docs/otel.md §5)
LOG_ATTRS = ("logrecord.event.id", "ConnectionId")
# the scopes' values a record of /work and /await has: the app's, ASP.NET Core's
SCOPE_KEYS = ("Tenant", "RequestId", "RequestPath")
AWAIT_KEYS = ("OrderId", "Step", "RequestId", "RequestPath")
AWAIT_IDS = (31, 32, 33, 34, 35)


def end(dm, log, app, what):
    """dotmon stopped (its log's tail shown when something failed), then the app."""
    if dm is not None:
        stop(dm, 15)
        if FAILS:
            with open(log.name, errors="replace") as f:
                sys.stderr.write(f"--- dotmon log{', ' + what if what else ''} (tail) ---\n" + f.read()[-5000:])
        log.close()
    if app is not None:
        app.kill()


def wait_views(rxa, rxb, tids):
    """Each /work trace's 5 spans and 3 records in the SDK's receiver (rxa) and dotmon's (rxb)."""
    for t in tids:
        rxa.wait_spans(5, trace_id=t)
        own_spans(rxb, t)
        rxa.wait_logs(3, trace_id=t)
        rxb.wait_logs(3, trace_id=t)


def without_scopes(tmp, rxa, rxb, env):
    """The SDK's own default, IncludeScopes false, against dotmon's OpenTelemetry:IncludeScopes=false
    (a second app and dotmon, the same receivers): the same spans and records, none with a scope's
    pairs."""
    service = f"otel-vs-sdk-noscopes-{os.getpid()}"
    tmp = os.path.join(tmp, "noscopes")  # a TMPDIR of their own: neither dotmon sees the other's app
    os.makedirs(tmp, mode=0o700)
    app = dm = log = None
    try:
        app = OtelApp(tmp, env=dict(rxa.sdk_env(service, interval_ms=INTERVAL_MS), OTEL_TEST_LOG_FORMATTED="0",
                                    OTEL_TEST_INCLUDE_SCOPES="0"), sdk=True)
        log = open(os.path.join(tmp, "dotmon-noscopes.log"), "w+")
        env = dict(env, OTEL_EXPORTER_OTLP_ENDPOINT=rxb.otlp_url, DotnetMonitor_OpenTelemetry__IncludeScopes="false")
        dm = start_dotmon(tmp, free_port(), log, [app.pid], env=env)
        check(wait_for(lambda: f"process {app.pid}: its logs spans go to OpenTelemetry" in open(log.name).read(), 30),
              "IncludeScopes=false: dotmon's OTel session of the app started")
        tids = [app.work(n)["traceId"] for n in (41, 42)]
        wait_views(rxa, rxb, tids)
        diffs = compare_receivers(rxa, rxb, tids, service=service, ignore_log_attrs=("logrecord.event.id",))
        check(diffs == [], f"IncludeScopes false on both sides: the SDK's and dotmon's views agree: {diffs}")
        recs = [r for t in tids for r in rxb.logs(trace_id=t) if r["scope"].startswith("DotmonTest")]
        scoped = [sorted(k for k in r["attributes"] if k in SCOPE_KEYS) for r in recs]
        check(len(recs) == 3 * len(tids) and not any(scoped),
              f"dotmon's {len(recs)} records (want {3 * len(tids)}) carry no scope's pairs: {scoped}")
    finally:
        end(dm, log, app, "IncludeScopes=false")


def main():
    tmp = tempfile.mkdtemp(prefix="otel-vs-sdk-")
    os.chmod(tmp, 0o700)
    rxa = rxb = proxy = app = dm = log = None
    service = f"otel-vs-sdk-{os.getpid()}"
    try:
        for d in ("rxa", "rxb"):
            os.makedirs(os.path.join(tmp, d))
        rxa = Receiver(tmp=os.path.join(tmp, "rxa"))
        rxb = Receiver(tmp=os.path.join(tmp, "rxb"))
        proxy = FaultProxy(rxb.otlp_url)
        app = OtelApp(tmp, env=dict(rxa.sdk_env(service, interval_ms=INTERVAL_MS), OTEL_TEST_LOG_FORMATTED="0"),
                      sdk=True)
        port = free_port()
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": proxy.url, "OTEL_METRIC_EXPORT_INTERVAL": str(INTERVAL_MS),
               "OTEL_BSP_SCHEDULE_DELAY": "200", "OTEL_BLRP_SCHEDULE_DELAY": "200",
               # what the SDK in the app is configured with: its sources, its meter, its log filters
               "DotnetMonitor_OpenTelemetry__ActivitySources": "DotmonTest.OTel;Microsoft.AspNetCore;System.Net.Http",
               "DotnetMonitor_OpenTelemetry__Meters": "DotmonTest.OTel",
               "DotnetMonitor_OpenTelemetry__LogCategories": "DotmonTest:Information;Microsoft:Warning;System:Warning"}
        dm = start_dotmon(tmp, port, log, [app.pid], env=env)
        check(wait_for(lambda: f"process {app.pid}: its logs spans go to OpenTelemetry" in open(log.name).read(), 30),
              "dotmon's OTel session of the app started")
        answers = [app.work(n) for n in (21, 22, 23)]
        tids = [a["traceId"] for a in answers]
        wait_views(rxa, rxb, tids)
        diffs = compare_receivers(rxa, rxb, tids, service=service, ignore_log_attrs=LOG_ATTRS)
        check(diffs == [], f"the SDK's and dotmon's views agree (spans, logs, service.name): {diffs}")
        work = [r for t in tids for r in rxb.logs(trace_id=t) if r["event_name"] in ("WorkStarted", "WorkFailed")]
        check(len(work) == 2 * len(tids) and all(all(k in r["attributes"] for k in SCOPE_KEYS) for r in work),
              "records logged before and after an await carry the scopes' values in dotmon's view")

        # the record after an await whose continuation's thread wrote first (the app's /await)
        waits = [app.get(f"/await?id={n}")["traceId"] for n in AWAIT_IDS]
        after = []
        for t in waits:
            rxa.wait_spans(1, trace_id=t)
            own_spans(rxb, t, n=1)
            rxa.wait_logs(1, trace_id=t)
            after += rxb.wait_logs(1, trace_id=t)
        bad = [(r["attributes"].get("OrderId"), sorted(r["attributes"])) for r in after
               if r["event_name"] != "AfterAwait" or r["attributes"].get("Step") != "await"
               or not all(k in r["attributes"] for k in AWAIT_KEYS)]
        check(len(after) == len(AWAIT_IDS) and bad == [],
              f"every record logged after the await carries its scopes' values in dotmon's view "
              f"({len(after)} of {len(AWAIT_IDS)}; without them: {bad})")
        diffs = compare_receivers(rxa, rxb, waits, service=service, ignore_log_attrs=LOG_ATTRS)
        check(diffs == [], f"the SDK's and dotmon's views of /await agree: {diffs}")
        sa = [s for t in tids for s in rxa.spans(trace_id=t)]
        check(len(sa) == 5 * len(tids), f"the SDK's view has the {5 * len(tids)} spans ({len(sa)})")
        lb = [r for t in tids for r in rxb.logs(trace_id=t) if r["scope"].startswith("DotmonTest")]
        check(len(lb) == 3 * len(tids), f"dotmon's view has the {3 * len(tids)} log records ({len(lb)})")

        # metrics: the SDK's (the dashboard's API has none: the app's own count stands for them,
        # as check_otel_rx proves them equal) against dotmon's, through the proxy
        # the SDK's histogram count and sum (check_otel_rx) against dotmon's ExponentialHistogram's
        want = app.expected_points("exponentialHistogram")
        pts = settle(lambda: metric_points(proxy.received("metrics")),
                     lambda p: all(p.get(k) == v for k, v in want.items()), 10)
        d = compare_metrics({k: pts.get(k) for k in want if k in pts}, want)
        check(d == [], f"dotmon's metric values are the app's (one export interval): {d}")
        without_scopes(tmp, rxa, rxb, env)
    finally:
        end(dm, log, app, "")
        if proxy is not None:
            proxy.close()
        for rx in (rxa, rxb):
            if rx is not None:
                rx.stop(show_log=bool(FAILS))
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("otel_vs_sdk")


if __name__ == "__main__":
    sys.exit(main())
