#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""dotmon with a real .NET app (tests/app's TestApp) and OTEL_EXPORTER_OTLP_ENDPOINT alone,
against check_otel_export.py's local OTLP/HTTP receiver (protobuf, gzip): the app's log records
and metrics arrive under a resource naming its pid, the counts on /metrics/dotmon and
/info?extras=true match what the receiver took, and a clean stop delivers what was queued (nothing
counted as dropped). The comparison with the in-process SDK, against the real receiver, is the
otel tests' on the Aspire Dashboard; this one is the exporter's wiring in dotmon."""
import gzip
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dmtest  # noqa: E402
from check_otel_export import Receiver, check, pb_fields  # noqa: E402


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


def main():
    rx = Receiver()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
           "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_METRIC_EXPORT_INTERVAL": "1000",
           "OTEL_BLRP_SCHEDULE_DELAY": "200"}
    w = dmtest.Watched("otel-dotmon-", app_args=("--metrics-ms", "300", "--heartbeat-ms", "200"),
                       env=env)
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
    finally:
        dmtest.stop(w.dm, 15)
        w.log.flush()
        w.log.seek(0)
        text = w.log.read()
        check(w.dm.returncode == 0 and "not delivered in time" not in text,
              "a clean stop: queued items delivered, none dropped")
        check("Sanitizer" not in text and "runtime error" not in text, "no sanitizer report")
        w.close()
        rx.stop()
    return dmtest.verdict("otel_dotmon")


if __name__ == "__main__":
    sys.exit(main())
