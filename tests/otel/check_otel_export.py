#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The OpenTelemetry exporter (agent/otel/otel.c) against a local OTLP/HTTP receiver.

The driver (OTEL_EMIT, tests/otel/otel_emit.c) builds the exporter from the environment and
OpenTelemetry:* arguments, emits synthetic logs, spans and metrics on a real loop, shuts down with a
deadline and prints its counts. The receiver here is a small HTTP server that decodes what it gets
(JSON by OTLP's JSON mapping, protobuf by walking the fields to count items, gzip undone) and
answers as each case tells it: 429 with Retry-After, 503, 400, a partial success, slowly, down for a
while, over TLS with a private CA. Every backoff and timeout is shortened through the settings.
"""
import email.utils
import gzip
import http.server
import json
import os
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import dmtest  # noqa: E402

EMIT = os.environ.get("OTEL_EMIT", "")
MULT = dmtest.MULT
# Items by signal in OTLP's JSON mapping: resource groups, scope groups, items.
JSON_KEYS = {"/v1/logs": ("resourceLogs", "scopeLogs", "logRecords"),
             "/v1/traces": ("resourceSpans", "scopeSpans", "spans"),
             "/v1/metrics": ("resourceMetrics", "scopeMetrics", "metrics")}
# Fast retries for every case.
FAST = ["OpenTelemetry:RetryInitialBackoffMs=50", "OpenTelemetry:RetryMaxBackoffMs=200"]


def check(cond, what, detail=""):
    """dmtest.check, with detail (the driver's log, the counts) shown only when it fails."""
    return dmtest.check(cond, what if cond or not detail else f"{what}: {detail}")


def pb_fields(b):
    """(field number, wire type, value) of one protobuf message; length-delimited values as bytes."""
    i = 0
    out = []

    def varint():
        nonlocal i
        v = s = 0
        while True:
            c = b[i]
            i += 1
            v |= (c & 0x7F) << s
            s += 7
            if c < 0x80:
                return v

    while i < len(b):
        key = varint()
        f, wt = key >> 3, key & 7
        if wt == 0:
            out.append((f, wt, varint()))
        elif wt == 1:
            out.append((f, wt, b[i:i + 8]))
            i += 8
        elif wt == 2:
            n = varint()
            out.append((f, wt, b[i:i + n]))
            i += n
        elif wt == 5:
            out.append((f, wt, b[i:i + 4]))
            i += 4
        else:
            raise ValueError(f"wire type {wt}")
    return out


def count_items(path, ctype, body):
    """(resource groups, items) of one Export*ServiceRequest. The three requests share a shape:
    field 1 the resource groups, in each field 2 the scope groups, in each field 2 the items."""
    if ctype == "application/json":
        doc = json.loads(body)
        top, mid, leaf = next((k for k in JSON_KEYS.values() if k[0] in doc), JSON_KEYS.get(path))
        groups = doc.get(top, [])
        return len(groups), sum(len(s.get(leaf, [])) for g in groups for s in g.get(mid, []))
    groups = [v for f, wt, v in pb_fields(body) if f == 1 and wt == 2]
    n = 0
    for g in groups:
        for f, wt, sg in pb_fields(g):
            if f == 2 and wt == 2:
                n += sum(1 for f2, wt2, _ in pb_fields(sg) if f2 == 2 and wt2 == 2)
    return len(groups), n


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1:port. script: answers for the first requests, in order,
    each a dict (status, headers, body, delay); then 200 with an empty body."""

    def __init__(self, port=0, script=(), tls=None):
        self.requests = []
        self.script = list(script)
        self.lock = threading.Lock()
        rx = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with rx.lock:
                    answer = rx.script.pop(0) if rx.script else {}
                body = raw
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(raw)
                try:
                    groups, items = count_items(self.path, self.headers.get("Content-Type"), body)
                except Exception as e:  # noqa: BLE001 - a body that does not decode is recorded
                    groups, items = -1, -1
                    print(f"receiver: undecodable body on {self.path}: {e}", flush=True)
                with rx.lock:
                    rx.requests.append({"t": time.monotonic(), "path": self.path,
                                        "headers": dict(self.headers), "raw": raw, "body": body,
                                        "groups": groups, "items": items,
                                        "status": answer.get("status", 200)})
                time.sleep(answer.get("delay", 0))
                out = answer.get("body", b"")
                try:
                    self.send_response(answer.get("status", 200))
                    for k, v in answer.get("headers", {}).items():
                        self.send_header(k, v)
                    self.send_header("Content-Type", self.headers.get("Content-Type", "text/plain"))
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except OSError:
                    pass  # the exporter gave up on a slow answer

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def items(self, path, delivered_only=True):
        return sum(r["items"] for r in self.requests
                   if r["path"] == path and (not delivered_only or r["status"] == 200))


def emit(*args, env=None, timeout=60):
    """Runs the driver; returns (exit status, status JSON, prom lines, stderr, seconds)."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    e.update(env or {})
    t0 = time.monotonic()
    p = subprocess.run([EMIT] + [str(a) for a in args], env=e, capture_output=True, text=True,
                       timeout=timeout * MULT)
    status, prom = None, []
    for line in p.stdout.splitlines():
        if line.startswith("status="):
            status = json.loads(line[7:])
        elif line.startswith("prom="):
            prom.append(line[5:])
    return p.returncode, status, prom, p.stderr, time.monotonic() - t0


def sig(status, name, what):
    return status["signals"][name][what] if status and name in status["signals"] else None


def case_json_headers():
    rx = Receiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
               "OTEL_EXPORTER_OTLP_HEADERS": "api-key=se%20cret%2C1 , x-tenant=a=b",
               # Ten minutes: the spans leave only because the shutdown flushes them.
               "OTEL_BSP_SCHEDULE_DELAY": "600000"}
        rc, st, prom, err, _ = emit("--logs", 30, "--spans", 20, "--metrics", 10, "--pids", 2,
                                    *FAST, env=env)
        check(rc == 0, "json: driver exit 0", f"exit {rc}: {err[-500:]}")
        check(rx.items("/v1/logs") == 30 and rx.items("/v1/traces") == 20
              and rx.items("/v1/metrics") == 10,
              "json: the receiver got 30 logs, 20 spans, 10 metrics "
              f"({rx.items('/v1/logs')}, {rx.items('/v1/traces')}, {rx.items('/v1/metrics')})")
        h = rx.requests[0]["headers"] if rx.requests else {}
        check(h.get("api-key") == "se cret,1" and h.get("x-tenant") == "a=b",
              f"json: OTEL_EXPORTER_OTLP_HEADERS sent URL-decoded ({h})")
        check(h.get("Content-Type") == "application/json", "json: Content-Type application/json")
        check(all(r["groups"] == 2 for r in rx.requests),
              "json: one resource group per process in each request")
        check(sig(st, "logs", "exported") == 30 and sig(st, "traces", "exported") == 20
              and sig(st, "metrics", "exported") == 10, "json: exported counts")
        per = {p["pid"]: p for p in (st or {}).get("processes", [])}
        check(per.get(1000, {}).get("logs", {}).get("exported") == 15
              and per.get(1001, {}).get("logs", {}).get("exported") == 15,
              "json: counts per process")
        check('dotmon_otel_exported_total{pid="1001",signal="traces"} 10' in prom,
              "json: dotmon_otel_exported_total per pid and signal")
        check("cret" not in err, "json: no header value in the exporter's log")
    finally:
        rx.stop()


def case_protobuf_gzip_batches():
    rx = Receiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}/",
               "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "10",
               "OTEL_BSP_SCHEDULE_DELAY": "50"}
        rc, st, _, err, _ = emit("--logs", 25, "--spans", 35, "--metrics", 5, *FAST, env=env)
        check(rc == 0, "protobuf: driver exit 0", err[-500:])
        spans = [r for r in rx.requests if r["path"] == "/v1/traces"]
        check(rx.items("/v1/traces") == 35 and len(spans) == 4
              and max(r["items"] for r in spans) == 10,
              f"protobuf: 35 spans in batches of at most 10 ({[r['items'] for r in spans]})")
        check(rx.items("/v1/logs") == 25 and rx.items("/v1/metrics") == 5,
              "protobuf: every log record and metric counted in the protobuf bodies")
        check(all(r["headers"].get("Content-Encoding") == "gzip"
                  and r["headers"].get("Content-Type") == "application/x-protobuf"
                  and r["raw"][:2] == b"\x1f\x8b" for r in rx.requests),
              "protobuf: gzip bodies, Content-Type application/x-protobuf")
        check(sig(st, "traces", "exported") == 35, "protobuf: exported count")
    finally:
        rx.stop()


def case_big_gzip():
    """A request body over 256 KiB is compressed on the thread pool: still one valid gzip body."""
    rx = Receiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
               "OTEL_BLRP_MAX_QUEUE_SIZE": "3000", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": "3000"}
        rc, st, _, err, _ = emit("--logs", 3000, *FAST, env=env)
        big = [len(gzip.decompress(r["raw"])) for r in rx.requests]
        check(rc == 0 and rx.items("/v1/logs") == 3000 and len(rx.requests) == 1
              and big[0] > 256 * 1024,
              f"big gzip: 3000 log records in one request of {big} bytes before gzip", err[-500:])
    finally:
        rx.stop()


def case_body_budget():
    """Request bodies are charged to the memory budget: with 2 MiB, 3000 queued log records fit,
    one request of all 3000 (about 0.9 MB of JSON, and its gzip) does not and is dropped, counted
    and told once; requests of 200 fit and deliver every record."""
    for batch, delivered in ((3000, 0), (200, 3000)):
        rx = Receiver()
        try:
            env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
                   "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
                   "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_BLRP_MAX_QUEUE_SIZE": "3000",
                   "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": str(batch)}
            rc, st, prom, err, _ = emit("--logs", 3000, "--budget-mb", 2, *FAST, env=env)
            check(rc == 0 and rx.items("/v1/logs") == delivered
                  and sig(st, "logs", "exported") == delivered
                  and sig(st, "logs", "dropped") == 3000 - delivered
                  and sig(st, "logs", "failed") == 0,
                  f"body budget: batches of {batch}: {delivered} delivered, the rest dropped "
                  f"({rx.items('/v1/logs')}, {sig(st, 'logs', 'exported')}, "
                  f"{sig(st, 'logs', 'dropped')})", err[-500:])
            told = err.count("does not fit in the memory budget")
            check(told == (1 if delivered == 0 else 0),
                  f"body budget: batches of {batch}: {told} warning(s) about the body")
        finally:
            rx.stop()


def case_retries():
    script = [{"status": 503}, {"status": 429, "headers": {"Retry-After": "1"}}, {"status": 502}]
    rx = Receiver(script=script)
    try:
        env = {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"http://127.0.0.1:{rx.port}/custom/logs",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
        rc, st, _, err, _ = emit("--logs", 12, *FAST, env=env)
        check(rc == 0, "retries: driver exit 0", err[-500:])
        paths = {r["path"] for r in rx.requests}
        check(paths == {"/custom/logs"},
              f"retries: a signal's own endpoint is used as is, other signals off ({paths})")
        check(len(rx.requests) == 4 and rx.items("/custom/logs") == 12,
              f"retries: 503, 429, 502 retried, then delivered ({[r['status'] for r in rx.requests]})")
        if len(rx.requests) >= 3:
            gap = rx.requests[2]["t"] - rx.requests[1]["t"]
            check(gap >= 0.9, f"retries: Retry-After 1 honoured ({gap:.2f} s)")
        check(err.count("failed: HTTP 503; retrying") == 1 and err.count("works again") == 1
              and "failed: HTTP 429" not in err,
              "retries: one warning for the three answers, one line when it works again", err[-800:])
        check(sig(st, "logs", "retries") == 3 and sig(st, "logs", "exported") == 12
              and sig(st, "logs", "failed") == 0, "retries: counts")
        check(st is not None and "traces" not in st["signals"],
              "retries: only the signal with an endpoint is on")
    finally:
        rx.stop()


def case_retry_date_and_exit():
    """Retry-After as an HTTP date; an app that goes (its source released) before its items are
    sent: they are still delivered, under its resource."""
    when = email.utils.formatdate(time.time() + 2, usegmt=True)
    rx = Receiver(script=[{"status": 503, "headers": {"Retry-After": when}}])
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BLRP_SCHEDULE_DELAY": "50"}
        rc, st, _, err, _ = emit("--logs", 6, "--pids", 2, "--release-early", "--run-ms", 200,
                                 *FAST, env=env)
        gap = rx.requests[1]["t"] - rx.requests[0]["t"] if len(rx.requests) >= 2 else 0
        check(rc == 0 and gap >= 0.9, f"Retry-After as an HTTP date honoured ({gap:.2f} s)", err[-500:])
        check(rx.items("/v1/logs") == 6 and sig(st, "logs", "exported") == 6,
              "exited apps: their queued items are delivered", err[-500:])
        pids = set()
        for r in rx.requests:
            if r["status"] == 200:
                for g in json.loads(r["body"])["resourceLogs"]:
                    pids |= {a["value"]["intValue"] for a in g["resource"]["attributes"]
                             if a["key"] == "process.pid"}
        check(pids == {"1000", "1001"}, f"exited apps: under their own resource ({pids})")
    finally:
        rx.stop()


def case_shutdown_retries_now():
    """A batch waiting out a long backoff when the shutdown comes is retried at once (the backoff,
    10 to 20 s, ends past the 3 s deadline: without that it would be dropped)."""
    rx = Receiver(script=[{"status": 503}])
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BLRP_SCHEDULE_DELAY": "20"}
        rc, st, _, err, _ = emit("--logs", 20, "--run-ms", 400, "--deadline-ms", 3000,
                                 "OpenTelemetry:RetryInitialBackoffMs=20000", env=env)
        check(rc == 0 and rx.items("/v1/logs") == 20 and sig(st, "logs", "dropped") == 0,
              f"shutdown: a batch in backoff retried at once ({rx.items('/v1/logs')} delivered)",
              err[-500:])
    finally:
        rx.stop()


def case_rejected_and_partial():
    partial = json.dumps({"partialSuccess": {"rejectedLogRecords": "2",
                                             "errorMessage": "two were bad"}}).encode()
    rx = Receiver(script=[{"status": 400}, {"status": 200, "body": partial}])
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_TRACES_EXPORTER": "none",
               "OTEL_METRICS_EXPORTER": "none", "OTEL_BLRP_MAX_EXPORT_BATCH_SIZE": "5"}
        rc, st, _, err, _ = emit("--logs", 10, "--spans", 3, *FAST, env=env)
        check(rc == 0, "400: driver exit 0", err[-500:])
        check(len(rx.requests) == 2, f"400: not retried ({len(rx.requests)} requests)")
        check(sig(st, "logs", "failed") == 5 and sig(st, "logs", "exported") == 5,
              f"400: its batch counted as failed ({st and st['signals'].get('logs')})")
        check("two were bad" in err and sig(st, "logs", "rejectedByReceiver") == 2,
              "partial success: logged with the receiver's message and counted")
        check(st is not None and "traces" not in st["signals"], "OTEL_TRACES_EXPORTER=none")
    finally:
        rx.stop()


def case_down_then_up():
    port = dmtest.free_port()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}",
           "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_BLRP_SCHEDULE_DELAY": "100"}
    holder = {}

    def later():
        time.sleep(1.5)
        holder["rx"] = Receiver(port=port)

    t = threading.Thread(target=later)
    t.start()
    rc, st, _, err, _ = emit("--logs", 100, "--run-ms", 3000, *FAST, env=env)
    t.join()
    rx = holder["rx"]
    try:
        check(rc == 0, "down: driver exit 0", err[-500:])
        check(rx.items("/v1/logs") == 100 and sig(st, "logs", "dropped") == 0,
              f"down: everything delivered once the receiver came up ({rx.items('/v1/logs')})")
        check(err.count("failed:") == 1 and "works again" in err,
              "down: one warning when unreachable, one line when it works again")
        check(sig(st, "logs", "retries") >= 2, "down: retried")
    finally:
        rx.stop()


def case_queue_bound_and_deadline():
    rx = Receiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}
        rc, st, prom, err, _ = emit("--logs", 100, "OpenTelemetry:Logs:MaxQueueSize=20", *FAST,
                                    env=env)
        check(rc == 0 and rx.items("/v1/logs") == 20 and sig(st, "logs", "dropped") == 80,
              "bound: 20 queued and delivered, 80 dropped and counted "
              f"({rx.items('/v1/logs')}, {sig(st, 'logs', 'dropped')})")
        check('dotmon_otel_dropped_total{pid="1000",signal="logs"} 80' in prom,
              "bound: dotmon_otel_dropped_total")
        check(err.count("items dropped: its queue is full") == 1,
              "bound: one warning for the 80 drops", err[-800:])
    finally:
        rx.stop()
    port = dmtest.free_port()  # nothing listens there
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{port}"}
    rc, st, _, err, secs = emit("--spans", 40, "--deadline-ms", 500, *FAST, env=env)
    check(rc == 0 and sig(st, "traces", "dropped") == 40 and sig(st, "traces", "exported") == 0,
          "deadline: what the shutdown could not send is counted as dropped", err[-300:])
    check(secs < 5 * MULT, f"deadline: the shutdown kept its deadline ({secs:.1f} s)")


def case_slow():
    rx = Receiver(script=[{"delay": 1.5}])
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json", "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}
        rc, st, _, err, _ = emit("--metrics", 8, *FAST, env=env)
        check(rc == 0 and sig(st, "metrics", "exported") == 8 and sig(st, "metrics", "retries") >= 1,
              "slow: a receiver slower than the timeout is retried", err[-300:])
    finally:
        rx.stop()


def case_tls(work):
    def run(*a):
        subprocess.run(a, cwd=work, check=True, capture_output=True)

    run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=otel test CA")
    run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
        "-keyout", "srv.key", "-out", "srv.csr", "-subj", "/CN=127.0.0.1")
    with open(os.path.join(work, "ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "2", "-extfile", "ext")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.path.join(work, "srv.pem"), os.path.join(work, "srv.key"))
    rx = Receiver(tls=ctx)
    try:
        url = f"https://127.0.0.1:{rx.port}"
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": url, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json",
               "OTEL_EXPORTER_OTLP_CERTIFICATE": os.path.join(work, "ca.pem")}
        rc, st, _, err, _ = emit("--logs", 7, *FAST, env=env)
        check(rc == 0 and rx.items("/v1/logs") == 7,
              "tls: delivered over TLS with the private CA", err[-300:])
        env.pop("OTEL_EXPORTER_OTLP_CERTIFICATE")
        rc, st, _, err, _ = emit("--logs", 7, "--deadline-ms", 400, *FAST, env=env)
        check(rc == 0 and sig(st, "logs", "exported") == 0 and sig(st, "logs", "dropped") == 7,
              "tls: without the CA the receiver is not trusted (nothing sent)")
    finally:
        rx.stop()


def case_settings():
    rc, _, _, err, _ = emit("--logs", 1, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                              "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"})
    check(rc == 3 and "grpc is not supported, use http/protobuf" in err,
          f"settings: grpc refused with a clear reason ({err.strip()})")
    rc, _, _, err, _ = emit("--logs", 1, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://x"})
    check(rc == 3 and "OTEL_EXPORTER_OTLP_ENDPOINT" in err, "settings: a bad endpoint named")
    rc, _, _, err, _ = emit("--logs", 1, env={})
    check(rc == 3 and "no signal" in err, "settings: nothing set, nothing exported")
    rc, _, _, err, _ = emit("--logs", 1, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                              "OTEL_SDK_DISABLED": "true"})
    check(rc == 3 and "no signal" in err, "settings: OTEL_SDK_DISABLED=true", err[-300:])
    rc, _, _, err, _ = emit("--logs", 1, env={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                              "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": "/k.pem"})
    check(rc == 3 and "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY: client certificates (mTLS) are not "
          "supported" in err, "settings: mTLS refused, not ignored", err[-300:])
    rx = Receiver()
    try:
        env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
               "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
        rc, st, _, err, _ = emit("--logs", 3, f"OpenTelemetry:Endpoint=http://127.0.0.1:{rx.port}",
                                 "OpenTelemetry:Protocol=http/json", *FAST, env=env)
        check(rc == 0 and rx.items("/v1/logs") == 3
              and rx.requests[0]["headers"].get("Content-Type") == "application/json",
              "settings: the OpenTelemetry section wins over the environment")
    finally:
        rx.stop()


def case_dotmon(work):
    """The exporter in dotmon: on with the endpoint alone, its counts on /metrics/dotmon and
    /info?extras=true, a clean stop; a refused setting stops start-up with the reason."""
    rx = Receiver()
    port = dmtest.free_port()
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{rx.port}",
           "DotnetMonitor_OpenTelemetry__Headers": "api-key=hush"}
    with open(os.path.join(work, "dotmon.log"), "w+") as log:
        dm = dmtest.start_dotmon(work, port, log, env=env)
        try:
            st, ctype, body = dmtest.http_get(port, "/metrics/dotmon")
            text = body.decode()
            check(st == 200 and all(f'dotmon_otel_queued{{signal="{s}"}} 0' in text
                                    for s in ("logs", "metrics", "traces")),
                  "dotmon: /metrics/dotmon has the exporter's series", text[-800:])
            st, info = dmtest.get_json(port, "/info?extras=true")
            sigs = ((info or {}).get("openTelemetry") or {}).get("signals", {})
            check(sorted(sigs) == ["logs", "metrics", "traces"]
                  and sigs["traces"]["endpoint"] == f"http://127.0.0.1:{rx.port}/v1/traces",
                  "dotmon: /info?extras=true has the three signals and their endpoints", str(info))
            st, plain = dmtest.get_json(port, "/info")
            check("openTelemetry" not in (plain or {}), "dotmon: /info without extras is unchanged")
        finally:
            t0 = time.monotonic()
            dmtest.stop(dm)
            secs = time.monotonic() - t0
        log.seek(0)
        text = log.read()
    check(dm.returncode == 0 and secs < 5 * MULT, f"dotmon: a clean stop ({dm.returncode}, {secs:.1f} s)")
    check("hush" not in text and "traces exported to" in text,
          "dotmon: the exporter announced, its header value never logged", text[-800:])
    rx.stop()
    env = dict(os.environ, TMPDIR=work, OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
               OTEL_EXPORTER_OTLP_TRACES_PROTOCOL="grpc")
    p = subprocess.run([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls",
                        f"http://127.0.0.1:{dmtest.free_port()}", "--metrics", "false"],
                       env=env, capture_output=True, text=True, timeout=30 * MULT)
    check(p.returncode != 0 and "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: grpc is not supported" in p.stderr,
          "dotmon: grpc refused at start-up with the setting's name", p.stderr[-500:])


def main():
    with tempfile.TemporaryDirectory(prefix="otel-") as work:
        os.environ["TMPDIR"] = work
        for case in (case_json_headers, case_protobuf_gzip_batches, case_big_gzip,
                     case_body_budget, case_retries,
                     case_retry_date_and_exit, case_shutdown_retries_now,
                     case_rejected_and_partial, case_down_then_up, case_queue_bound_and_deadline,
                     case_slow, case_settings):
            print(f"--- {case.__name__}", flush=True)
            case()
        print("--- case_tls", flush=True)
        case_tls(work)
        print("--- case_dotmon", flush=True)
        case_dotmon(work)
    return dmtest.verdict("otel_export")


if __name__ == "__main__":
    sys.exit(main())
