#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon with a real .NET app (tests/app's TestApp) and OTEL_EXPORTER_OTLP_ENDPOINT alone,
against check_otel_export.py's local OTLP/HTTP receiver (protobuf, gzip): the app's log records
and metrics arrive under a resource naming its pid, the counts on /metrics/dotmon and
/info?extras=true match what the receiver took, and a clean stop delivers what was queued (nothing
counted as dropped). The app's histogram (recorded on .NET 10 while exporting, so the shared
metrics session asks for exponential buckets) arrives as a cumulative ExponentialHistogram whose
count, sum and two buckets are what the app recorded, and /metrics still shows it as a summary
whose quantiles, estimated from the buckets, are the recorded values within a bucket's width.
The comparison with the in-process SDK, against the real receiver, is the otel tests' on the
Aspire Dashboard; this one is the exporter's wiring in dotmon."""
import gzip
import math
import os
import re
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dmtest  # noqa: E402
import otlp_pb  # noqa: E402
from check_otel_export import Receiver, check, pb_fields  # noqa: E402

HIST = "testapp.latency"
# hist-record: every 100 ms, 97 values of 5 and 3 of 5000 (p50 and p95 5, p99 5000)
MIX = ((5.0, 97), (5000.0, 3))


def resource_pids(raw):
    """process.pid of each resource of a protobuf Export*ServiceRequest (ints as strings)."""
    pids = set()
    for f, _, group in pb_fields(raw):
        if f != 1:
            continue
        for f2, _, res in pb_fields(group):
            if f2 != 1:  # ResourceX.resource
                continue
            for f3, _, kv in pb_fields(res):
                fields = dict((a, v) for a, _, v in pb_fields(kv)) if f3 == 1 else {}
                if fields.get(1) == b"process.pid":
                    value = dict((a, v) for a, _, v in pb_fields(fields[2]))
                    pids.add(str(value.get(3)))
    return pids


def exp_points(rx, name):
    """(aggregation temporality, data point) of every ExponentialHistogram point of metric name
    the receiver took, in order."""
    out = []
    for r in list(rx.requests):
        if not r["path"].endswith("/v1/metrics"):
            continue
        for rm in otlp_pb.decode(r["path"], r["body"]).get("resourceMetrics", []):
            for sm in rm.get("scopeMetrics", []):
                for m in sm.get("metrics", []):
                    eh = m.get("exponentialHistogram")
                    if m.get("name") == name and eh is not None:
                        out += [(int(eh.get("aggregationTemporality", 0)), p) for p in eh.get("dataPoints", [])]
    return out


def bucket_index(v, scale):
    """OTel's bucket of v (> 0, not a power of two): base^i < v <= base^(i+1), base 2^(2^-scale)."""
    if scale > 0:
        return math.ceil(math.log(v) * math.ldexp(1.4426950408889634, scale)) - 1
    return (math.frexp(v)[1] - 1) >> -scale


def quantiles(mport):
    """/metrics: the app histogram's {quantile: value} (the latest interval's)."""
    _, _, body = dmtest.http_get(mport, "/metrics")
    out = {}
    for line in body.decode(errors="replace").splitlines():
        m = re.match(r'testappmeter_testapp_latency_ms\{.*quantile="([0-9.]+)".*\} (\S+)$', line)
        if m:
            out[m.group(1)] = float(m.group(2))
    return out


def check_histogram(w, rx, mport):
    """Records MIX for 4 s while polling /metrics, then compares what arrived with what went in."""
    answer = {}
    rec = threading.Thread(target=lambda: answer.update(
        line=w.app.command("hist-record 4 " + " ".join(f"{v:g}:{n}" for v, n in MIX))))
    rec.start()
    q = dmtest.settle(lambda: quantiles(mport), lambda q: {"0.5", "0.95", "0.99"} <= set(q)
                      and not any(math.isnan(x) for x in q.values()), 15)
    rec.join()
    m = re.match(r"ok hist-record n=(\d+)", answer.get("line", ""))
    check(m is not None, f"the app recorded its histogram ({answer})")
    n = int(m.group(1)) if m else 0
    ticks = n // sum(c for _, c in MIX)
    want_sum = ticks * sum(v * c for v, c in MIX)
    print(f"/metrics quantiles: {q}", flush=True)
    check(abs(q.get("0.5", 0) - 5) <= 0.5 and abs(q.get("0.95", 0) - 5) <= 0.5
          and abs(q.get("0.99", 0) - 5000) <= 500,
          f"/metrics: the histogram's quantiles from the buckets are the recorded values ({q})")

    pts = dmtest.settle(lambda: exp_points(rx, HIST), lambda p: p and int(p[-1][1].get("count", 0)) >= n, 15)
    check(bool(pts), f"{HIST} arrives as an ExponentialHistogram")
    if not pts:
        return
    temporality, p = pts[-1]
    scale = int(p.get("scale", 0))
    pos = p.get("positive", {})
    offset, counts = int(pos.get("offset", 0)), [int(c) for c in pos.get("bucketCounts", [])]
    print(f"{HIST}: count {p.get('count')} sum {p.get('sum')} scale {scale} offset {offset} "
          f"buckets {len(counts)} (nonzero {[(offset + i, c) for i, c in enumerate(counts) if c]})", flush=True)
    check(temporality == 2, f"cumulative temporality ({temporality})")
    check(int(p.get("count", 0)) == n and float(p.get("sum", 0)) == want_sum,
          f"count and sum are the app's ({p.get('count')}, {p.get('sum')}; recorded {n}, {want_sum})")
    check(int(p.get("zeroCount", 0)) + sum(counts) == n, "the buckets hold every value")
    check(p.get("min") == min(v for v, _ in MIX) and p.get("max") == max(v for v, _ in MIX),
          f"min and max are the recorded extremes ({p.get('min')}, {p.get('max')})")
    at = {v: bucket_index(v, scale) - offset for v, _ in MIX}
    check(all(0 <= at[v] < len(counts) and counts[at[v]] == ticks * c for v, c in MIX),
          f"each recorded value is counted in its own bucket (offset recovered): {at}")


def main():
    rx = Receiver()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
           "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_METRIC_EXPORT_INTERVAL": "1000",
           "OTEL_BLRP_SCHEDULE_DELAY": "200", "DotnetMonitor_GlobalCounter__IntervalSeconds": "1",
           "DotnetMonitor_Metrics__Meters__0__MeterName": "TestApp.Meter"}
    mport = dmtest.free_port()
    w = dmtest.Watched("otel-dotmon-", app_args=("--heartbeat-ms", "200"),
                       env=env, metrics_port=mport)
    pid = str(w.app.pid)
    try:
        got = dmtest.wait_for(lambda: rx.items("/v1/logs") > 0 and rx.items("/v1/metrics") > 0, 30)
        check(got, f"log records and metrics of the app arrive ({rx.items('/v1/logs')}, "
                   f"{rx.items('/v1/metrics')})")
        pids = set()
        for r in list(rx.requests):
            pids |= resource_pids(gzip.decompress(r["raw"]))
        check(pids == {pid}, f"under a resource with the app's process.pid ({pids}, {pid})")
        _, _, body = dmtest.http_get(w.port, "/metrics/dotmon")
        line = f'dotmon_otel_exported_total{{pid="{pid}",signal="logs"}} '
        exported = [int(s[len(line):]) for s in body.decode().splitlines() if s.startswith(line)]
        check(exported and exported[0] > 0, f"/metrics/dotmon counts the app's exported logs {exported}")
        st, info = dmtest.get_json(w.port, "/info?extras=true")
        procs = ((info or {}).get("openTelemetry") or {}).get("processes", [])
        check(any(str(p.get("pid")) == pid for p in procs), "/info?extras=true lists the app's counts")
        check_histogram(w, rx, mport)
    finally:
        dmtest.stop(w.dm, 15)
        w.log.flush()
        w.log.seek(0)
        text = w.log.read()
        check(w.dm.returncode == 0 and "not delivered in time" not in text,
              "a clean stop: queued items delivered, none dropped")
        check(dmtest.sanitizer_report(text) is None, "no sanitizer report")
        w.close()
        rx.stop()
    return dmtest.verdict("otel_dotmon")


if __name__ == "__main__":
    sys.exit(main())
