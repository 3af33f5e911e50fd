#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 33's faults, end to end: the OTel test app (no SDK), dotmon exporting with gzip through a
FaultProxy (it inflates gzip: the Aspire Dashboard reads none) to the real receiver, with backoffs
and timeouts shortened through settings. In turn: the receiver down at start (a warning, retries,
then delivery), 429 with Retry-After honoured (the retry waits for it), a slow receiver, down for
a while mid-run (retries, then delivery, nothing dropped below the queue bound), dotmon stopped
(SIGSTOP) while the app writes fast (the runtime drops events of the session: counted in
dotmon_otel_lost_events_total and logged), an app that exits
with a batch pending (its spans still delivered), a clean stop of dotmon with spans queued (sent
before it exits) right after more work (its records and spans, still in the runtime's buffers
then, delivered too: the stop drains the OTel session). Then a second dotmon to a receiver over TLS with a private CA
(OTEL_EXPORTER_OTLP_CERTIFICATE) that wants an API key (OTEL_EXPORTER_OTLP_HEADERS)."""

import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_otel_export_e2e import counts, log_text, own_spans  # noqa: E402
from otelrx import FaultProxy, OtelApp, Receiver, private_ca  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, check, free_port, http_get, start_dotmon, stop, verdict, wait_for  # noqa: E402
import dmtest  # noqa: E402

RETRY_AFTER_S = 2


def env_for(endpoint, delay_ms=300):
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
            "OTEL_EXPORTER_OTLP_TIMEOUT": "3000", "OTEL_BSP_SCHEDULE_DELAY": str(delay_ms),
            "OTEL_BLRP_SCHEDULE_DELAY": str(delay_ms), "OTEL_METRICS_EXPORTER": "none",
            "DotnetMonitor_OpenTelemetry__RetryInitialBackoffMs": "200",
            "DotnetMonitor_OpenTelemetry__RetryMaxBackoffMs": "1000"}


def session_up(log, pid):
    return wait_for(lambda: f"process {pid}: its logs spans go to OpenTelemetry" in log_text(log), 30)


def delivered(rx, ans):
    ids = own_spans(rx, ans["traceId"])
    return ans["parentSpanId"] in ids and ans["childSpanId"] in ids and len(ids) == 5


def queued_traces(port, signal="traces"):
    _, _, body = http_get(port, "/metrics/dotmon")
    for line in body.decode().splitlines():
        if line.startswith(f'dotmon_otel_queued{{signal="{signal}"}} '):
            return int(float(line.split()[-1]))
    return 0


def faults(tmp, rx, proxy):
    app = OtelApp(tmp)
    port = free_port()
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    proxy.down()
    dm = start_dotmon(tmp, port, log, [app.pid], env=env_for(proxy.url))
    app2 = None
    try:
        check(session_up(log, app.pid), "dotmon's OTel session of the app started")
        # 1. down at start
        a1 = app.work(1)
        check(wait_for(lambda: "traces export to " in log_text(log) and "retrying" in log_text(log), 15),
              "the receiver down at start: a warning, the export retried")
        proxy.up()
        check(wait_for(lambda: delivered(rx, a1), 20), "... then delivered once it is up")
        # 2. 429 with Retry-After
        proxy.mode, proxy.status, proxy.retry_after = "status", 429, RETRY_AFTER_S
        a2 = app.work(2)
        check(wait_for(lambda: any(r[4] == 429 for r in proxy.seen("/v1/traces")), 15), "a 429 was answered")
        t429 = time.time()
        wait_for(lambda: len([r for r in proxy.seen("/v1/traces") if r[4] == 429]) >= 1, 5)
        proxy.mode = "pass"
        check(wait_for(lambda: delivered(rx, a2), 20), "after 429 with Retry-After: delivered")
        proxy.settle()
        with proxy.lock:
            times = [(b[4], b[3]) for b in proxy.bodies if b[0].endswith("/v1/traces")]
        first_429 = min(t for t, st in times if st == 429)
        after = [t for t, st in times if st != 429 and t > first_429]
        gap = (min(after) - first_429) / 1e9 if after else 0
        print(f"429: the next traces request came {gap:.2f} s after it (Retry-After {RETRY_AFTER_S}); "
              f"{time.time() - t429:.2f} s to delivery", flush=True)
        check(gap >= RETRY_AFTER_S - 0.1, f"the retry waited for Retry-After ({gap:.2f} s)")
        # 3. slow receiver (under the request timeout)
        proxy.mode, proxy.delay = "slow", 1.0
        a3 = app.work(3)
        check(wait_for(lambda: delivered(rx, a3), 20), "a slow receiver: delivered")
        proxy.mode = "pass"
        # 4. down mid-run for a while: retries, then delivery, nothing dropped
        proxy.down()
        a4 = app.work(4)
        a5 = app.work(5)
        time.sleep(4)  # down for a while (retries meanwhile, backoff capped at 1 s)
        proxy.up()
        check(wait_for(lambda: delivered(rx, a4) and delivered(rx, a5), 20), "down mid-run: delivered once up")
        c = counts(port, app.pid)
        check(all(c.get((s, "dropped"), 0) == 0 for s in ("traces", "logs")), f"nothing dropped below the bound {c}")
        check(any(r[2] == "gzip" for r in proxy.seen("/v1/traces")), "requests were gzip (inflated by the proxy)")
        # 4b. dotmon not reading (stopped) while the app writes fast: the runtime drops events of
        # the session (its buffer is full); dotmon counts them from the stream's sequence numbers
        os.kill(dm.pid, signal.SIGSTOP)
        try:
            took = app.items(15000)
        finally:
            os.kill(dm.pid, signal.SIGCONT)
        # A gap shows once the stream goes on: the thread's next event or the next sequence point
        # (the runtime writes one after about 10 MB of events), so the app goes on, at a pace.
        app.items(6000, 6000)
        check(wait_for(lambda: lost_events(port, app.pid) > 0, 20),
              f"while dotmon was stopped ({took:.1f} s of items), the runtime's drops counted "
              f"(dotmon_otel_lost_events_total {lost_events(port, app.pid)})")
        check(wait_for(lambda: "the runtime dropped" in log_text(log), 5), "... and told in dotmon's log")
        # what the burst queued (past the queue bound: dropped) is sent before the next step
        wait_for(lambda: queued_traces(port) == 0 and queued_traces(port, "logs") == 0, 30)
        # 5. an app that exits with its batch pending
        a6 = app.work(6)
        app.stop()
        check(wait_for(lambda: delivered(rx, a6), 20), "an app that exits right after its work: its spans delivered")
        # 6. a clean stop of dotmon with spans queued: sent before it exits
        app2 = OtelApp(tmp)
        check(session_up(log, app2.pid), "the second app's OTel session started")
        proxy.down()  # the spans wait in dotmon's queue (retrying) ...
        a7 = app2.work(7)
        check(wait_for(lambda: queued_traces(port) >= 5, 15), f"the second app's spans queued ({queued_traces(port)})")
        # the last work right before the stop: its records and spans are still in the runtime's
        # buffers when dotmon is told to stop; the stop ends the OTel session gracefully
        # (StopTracing, the stream read to its end), so they are exported before it exits
        a8 = app2.work(8)
        proxy.up()  # ... and the stop sends what is queued at once, not after the backoff
        stop(dm, 20)
        text = log_text(log)
        check(dm.returncode == 0 and "not delivered in time" not in text, "a clean stop: nothing left undelivered")
        check("did not end within" not in text, "the OTel session ended within its share of the grace period")
        got = own_spans(rx, a7["traceId"])
        want = {a7[k] for k in ("requestSpanId", "parentSpanId", "childSpanId", "echoParentSpanId", "echoSpanId")}
        check(got == want, f"the queued spans reached the receiver before dotmon exited ({len(got & want)} of 5, "
                           f"{len(got - want)} others)")
        got = own_spans(rx, a8["traceId"])
        want = {a8[k] for k in ("parentSpanId", "childSpanId", "echoParentSpanId", "echoSpanId")}
        print(f"the last work's request span {'arrived' if a8['requestSpanId'] in got else 'did not arrive'} "
              "(it ends after the answer, maybe after the stop)", flush=True)
        check(want <= got, f"the spans made right before the stop reached the receiver ({len(got & want)} of 4)")
        names = {"WorkStarted", "WorkFailed", "Echo"}
        logs = rx.wait_logs(lambda v: names <= {r["event_name"] for r in v}, seconds=5, trace_id=a8["traceId"])
        check(names <= {r["event_name"] for r in logs},
              f"the records logged right before the stop reached the receiver ({sorted(r['event_name'] for r in logs)})")
        check(dmtest.sanitizer_report(text) is None, "no sanitizer report")
    finally:
        stop(dm, 15)
        app.kill()
        if app2 is not None:
            app2.kill()
        if FAILS:
            sys.stderr.write("--- dotmon log (tail) ---\n" + log_text(log)[-6000:])
        log.close()


def lost_events(port, pid):
    """dotmon_otel_lost_events_total{pid} on /metrics/dotmon (0 when absent)."""
    _, _, body = http_get(port, "/metrics/dotmon")
    head = f"dotmon_otel_lost_events_total{{pid=\"{pid}\"}} "
    return next((int(float(line[len(head):])) for line in body.decode().splitlines() if line.startswith(head)), 0)


def tls(tmp):
    ca, crt, key = private_ca(os.path.join(tmp, "tls"))
    os.makedirs(os.path.join(tmp, "rx2"))
    rx2 = Receiver(tmp=os.path.join(tmp, "rx2"), api_key="otel-faults-key", cert=crt, key=key)
    app = OtelApp(tmp)
    port = free_port()
    log = open(os.path.join(tmp, "dotmon-tls.log"), "w+")
    env = env_for(rx2.otlp_url)
    env.update(OTEL_EXPORTER_OTLP_COMPRESSION="none", OTEL_EXPORTER_OTLP_CERTIFICATE=ca,
               OTEL_EXPORTER_OTLP_HEADERS="x-otlp-api-key=otel-faults-key")
    dm = start_dotmon(tmp, port, log, [app.pid], env=env)
    try:
        check(session_up(log, app.pid), "TLS: dotmon's OTel session of the app started")
        a = app.work(11)
        check(wait_for(lambda: delivered(rx2, a), 20),
              "over TLS with a private CA and the API key header: the spans delivered")
        check("otel-faults-key" not in log_text(log), "the header's value is not logged")
    finally:
        stop(dm, 15)
        app.kill()
        if FAILS:
            sys.stderr.write("--- dotmon (TLS) log (tail) ---\n" + log_text(log)[-4000:])
        log.close()
        rx2.stop(show_log=bool(FAILS))


def main():
    base = tempfile.mkdtemp(prefix="otel-faults-")
    os.chmod(base, 0o700)
    rx = proxy = None
    try:
        os.makedirs(os.path.join(base, "rx"))
        os.makedirs(os.path.join(base, "a"), mode=0o700)
        os.makedirs(os.path.join(base, "b"), mode=0o700)
        rx = Receiver(tmp=os.path.join(base, "rx"))
        proxy = FaultProxy(rx.otlp_url)
        faults(os.path.join(base, "a"), rx, proxy)
        tls(os.path.join(base, "b"))  # its own TMPDIR: that dotmon sees only its app
    finally:
        if proxy is not None:
            proxy.close()
        if rx is not None:
            rx.stop(show_log=bool(FAILS))
        shutil.rmtree(base, ignore_errors=True)
    return verdict("otel_faults")


if __name__ == "__main__":
    sys.exit(main())
