#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""OpenTelemetry export (issue 33): what the app pays with no telemetry, with the in-process
OpenTelemetry .NET SDK exporting its three signals, and with dotmon forwarding them from outside,
in the same run; dotmon's CPU per 10,000 items and its RSS; the latency from an item's end to the
receiver. Nothing is asserted.

  bench_otel.py [--rounds 3] [--seconds 15] [--connections 8] [--rate 0] [--modes none,sdk,dotmon]
                [--warmup 3] [--delay-ms 200] [--interval-ms 1000] [--drain 20] [--no-receiver]
                [--no-scopes]
                [--log-categories SPECS] [--dotmon-env NAME=VALUE ...] [--items N --item-rate R]

Environment: DOTMON_BIN, DOTMON_OTELAPP_DIR (tests/otel/app, ctest fixture build_otelapp),
DOTMON_ASPIRE_DASHBOARD (ctest fixture otel_dashboard), DOTNET_ROOT or dotnet on PATH; wrk on PATH.

One Aspire Dashboard (the real OTLP receiver, tests/otel/otelrx.py's Receiver) for the whole run.
Rounds interleave the modes (none, sdk, dotmon, none, ...); each round of a mode starts a fresh
OtelApp (tests/otel/app) in a private TMPDIR and, for the exporting modes, a FaultProxy in "pass"
mode in front of the receiver (it stamps each request's arrival and decodes what went through):
  none    the app alone: no exporter in it, nothing reading it;
  sdk     OTEL_TEST_SDK=1: the app's own OpenTelemetry SDK exports logs, metrics and traces over
          OTLP/HTTP protobuf to the proxy;
  dotmon  the app as in none, and dotmon (`collect`, loopback, no auth, no /metrics listener)
          watching it with OTEL_EXPORTER_OTLP_ENDPOINT set to the proxy: it exports whatever it
          reads out of the process (logs and metrics; spans once the DiagnosticSource session is
          wired): the block says which signals arrived.
Both exporters get the same standard settings: OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf,
OTEL_BSP_SCHEDULE_DELAY and OTEL_BLRP_SCHEDULE_DELAY = --delay-ms, OTEL_METRIC_EXPORT_INTERVAL =
--interval-ms, OTEL_EXPORTER_OTLP_COMPRESSION = --compression (none by default; the block says
what share of each exporter's requests came gzipped). --no-receiver: the proxy answers 200 itself and forwards nothing
(the dashboard's own CPU out of the machine's budget; the exporters cannot tell).

In a round: wrk (-t1, --connections; a closed loop, or with --rate R each connection waiting
connections/R s between an answer and its next request: about R requests/s, the same load
whatever the mode, below what the exporters and the receiver can take) on GET /work?id=1 for --warmup s (JIT, dotmon's
sessions started), a pause until the warm-up's items have arrived, then wrk for --seconds: the
measured window. Per round: requests/s and the client's p99; the app's CPU (utime+stime of
/proc/<pid>/stat) per request over the window, and its peak RSS; then, after the window, a drain
(until no log or span request has arrived for max(1.5 s, 3 x delay), at most --drain s). Items are
the spans and log records the proxy passed whose end time (a span's end, a record's timestamp)
falls in the window, so the warm-up's and other rounds' do not count; per request they show
whether an exporter lost some (one /work is 5 spans and 3 log records where both observers see
them all). dotmon's CPU from the window's start to the drain's end per 10,000 items (spans + log
records; its threads' schedstat, in ns, where /proc's stat counts 10 ms ticks), its peak (VmHWM)
and end RSS, and what its /metrics/dotmon counted as dropped or failed;
for the SDK, the app's extra CPU over the none round before it, per 10,000 items, is the
comparable figure. Latency: arrival at the proxy (this machine's clock) minus the span's end or
the record's timestamp (the app's clock, the same one), p50 and p99 per round. The receiving side
shares the machine: the CPU of the dashboard and of this process (the proxy's threads) over the
window is shown beside the app's, since on a small machine it takes from the app's throughput in
the exporting modes and not in none.
Medians and min-max over the rounds; ratios are each round's mode over that round's none.

--items N: instead of wrk, each round asks the app for GET /items?n=N&rate=R (tests/otel/app:
N items at about R per second on one thread, each a scope with two spans and a log record in it,
a counter and a histogram measurement; no HTTP, no exception), after min(N, 2000) items of
warm-up. The app's CPU is taken from the first item until the last one has reached the proxy, per
item: what each exporter costs the app per item, with little else in the app's CPU (a /work
request costs the app 0.5-0.8 ms by itself and varies by more than the exporters' difference).
"""

import argparse
import http.client
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from bench_metrics import WRK_LUA, cpu_ns_s, cpu_s, pct, spread

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "otel"))
from dmtest import free_port, start_dotmon, status_kib, stop  # noqa: E402
from otelrx import FaultProxy, OtelApp, Receiver, flat_logs, flat_spans  # noqa: E402
import otlp_pb  # noqa: E402

SIGNALS = ("traces", "logs", "metrics")
# The app's own logging filter (tests/otel/app/Program.cs: Microsoft and System at Warning) as
# filter specs: the session's specs override the app's filter for the EventSource logger, so
# without them dotmon would forward ASP.NET Core's and HttpClient's Information records, which
# the in-process SDK never sees.
APP_LOG_FILTER = "Microsoft:Warning;System:Warning;DotmonTest:Information"
# What the app's SDK is given (tests/otel/app: AddSource(Name), the ASP.NET Core and HttpClient
# instrumentations' sources, AddMeter(Name)), as dotmon's settings: the same telemetry from both.
SDK_SET = {"DotnetMonitor_OpenTelemetry__ActivitySources": "DotmonTest.OTel;Microsoft.AspNetCore;System.Net.Http",
           "DotnetMonitor_OpenTelemetry__Meters": "DotmonTest.OTel",
           "DotnetMonitor_Metrics__IncludeDefaultProviders": "false"}


def say(msg):
    print(msg, file=sys.stderr, flush=True)


def wrk(url, seconds, connections, script):
    """wrk -t1 closed loop on url: (requests, errors + non-2xx, p99 ms, seconds)."""
    out = subprocess.run(["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "-s", script, url],
                         capture_output=True, text=True).stdout
    m = re.search(r"^RESULT (.*)$", out, re.M)
    if not m:
        raise RuntimeError(f"wrk gave no result: {out[-400:]}")
    v = [int(x) for x in m.group(1).split()]
    return v[0], v[2] + v[3], v[6] / 1000, v[8] / 1e6


def decoded(proxy, signal):
    """[(arrival ns, OTLP JSON data)] of every accepted request of signal the proxy passed."""
    with proxy.lock:
        bodies = [b for b in proxy.bodies if b[0].endswith("/v1/" + signal) and 200 <= b[3] < 300]
    return [(arrived, json.loads(body) if "json" in ctype else otlp_pb.decode(path, body))
            for path, ctype, body, _, arrived in bodies]


def metric_points(data):
    n = 0
    for rm in data.get("resourceMetrics", []):
        for sm in rm.get("scopeMetrics", []):
            for m in sm.get("metrics", []):
                for kind in ("sum", "gauge", "histogram", "exponentialHistogram", "summary"):
                    n += len((m.get(kind) or {}).get("dataPoints", []))
    return n


def last_item_request(proxy):
    """Arrival (time.time_ns()) of the last log or span request the proxy took, or None."""
    with proxy.lock:
        return next((b[4] for b in reversed(proxy.bodies) if not b[0].endswith("/v1/metrics")), None)


def drain(proxy, quiet, most):
    """Waits until no log or span request has arrived for quiet s (at most `most` s)."""
    end = time.time() + most
    while time.time() < end:
        last = last_item_request(proxy)
        if last is None or time.time_ns() - last >= quiet * 1e9:
            return
        time.sleep(0.1)


def dotmon_losses(port, pid):
    """{signal: dropped + failed} from dotmon's /metrics/dotmon for pid."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.request("GET", "/metrics/dotmon")
        body = c.getresponse().read().decode()
    finally:
        c.close()
    out = {}
    for m in re.finditer(rf'^dotmon_otel_(dropped|failed)_total\{{pid="{pid}",signal="(\w+)"\}} (\d+)$',
                         body, re.M):
        out[m.group(2)] = out.get(m.group(2), 0) + int(m.group(3))
    return out


def otel_env(a, endpoint):
    return {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_METRIC_EXPORT_INTERVAL": str(a.interval_ms), "OTEL_BSP_SCHEDULE_DELAY": str(a.delay_ms),
            "OTEL_BLRP_SCHEDULE_DELAY": str(a.delay_ms), "OTEL_EXPORTER_OTLP_COMPRESSION": a.compression}


def sink_cpu(rx_pid):
    """CPU seconds of the receiving side on this machine: this process (the proxy's threads) and
    the dashboard (rx_pid, when there is one)."""
    t = os.times()
    return t.user + t.system + (cpu_s(rx_pid) if rx_pid else 0.0)


def gc_state(url):
    """The app's /gc-state: bytes allocated, GC pause ms and collections so far."""
    with urllib.request.urlopen(f"{url}/gc-state", timeout=10) as r:
        return json.loads(r.read())


def ctx_switches(pid):
    """{thread id: (name, voluntary, involuntary)} context switches of pid's threads."""
    out = {}
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{t}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{t}/status") as f:
                v = [0, 0]
                for line in f:
                    if line.startswith("voluntary_ctxt_switches:"):
                        v[0] = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches:"):
                        v[1] = int(line.split()[1])
        except OSError:
            continue  # a thread that ended between the listing and the read
        out[t] = (name, v[0], v[1])
    return out


def ctx_delta(before, after):
    """{thread name: (voluntary, involuntary)} switched between two ctx_switches: per thread (one
    that started in between counts whole; one that ended in between is not seen), then summed by
    name."""
    out = {}
    for t, (name, vol, inv) in after.items():
        _, vol0, inv0 = before.get(t, (name, 0, 0))
        acc = out.setdefault(name, [0, 0])
        acc[0] += vol - vol0
        acc[1] += inv - inv0
    return {k: tuple(v) for k, v in out.items()}


def run_round(a, target, mode, script, rx_pid):
    """One mode once: a dict of its figures."""
    tmp = tempfile.mkdtemp(prefix=f"bench-otel-{mode}-")
    os.chmod(tmp, 0o700)
    app = dm = proxy = log = None
    r = {"mode": mode}
    try:
        if mode != "none":
            proxy = FaultProxy(target)
            if a.no_receiver:
                proxy.mode, proxy.status = "status", 200
        env = {}
        if mode == "sdk":
            env = dict(otel_env(a, proxy.url), OTEL_SERVICE_NAME="bench-otel-sdk")
            if a.no_scopes:
                env["OTEL_TEST_INCLUDE_SCOPES"] = "0"
        app = OtelApp(tmp, env=env, sdk=mode == "sdk")
        if mode == "dotmon":
            port = free_port()
            log = open(os.path.join(tmp, "dotmon.log"), "w+")
            env = otel_env(a, proxy.url)
            if a.log_categories:
                env["DotnetMonitor_OpenTelemetry__LogCategories"] = a.log_categories
            if a.same_set:
                env.update(SDK_SET)
            if a.no_scopes:
                env["DotnetMonitor_OpenTelemetry__IncludeScopes"] = "false"
            env.update(kv.split("=", 1) for kv in a.dotmon_env)
            dm = start_dotmon(tmp, port, log, [app.pid], env=env)
        url = f"{app.url}/work?id=1"
        quiet = max(1.5, 3 * a.delay_ms / 1000)
        if a.items:
            app.items(min(a.items, 2000), a.item_rate, a.item_kind)
            time.sleep(quiet)  # idle exporters, whatever mode: the same pause in every round
        else:
            wrk(url, a.warmup, a.connections, script)
        if proxy is not None:
            drain(proxy, quiet, a.drain)
        t0 = time.time_ns()
        s0 = sink_cpu(rx_pid)
        a0 = cpu_s(app.pid)
        d0 = cpu_ns_s(dm.pid) if dm else 0.0
        g0, c0 = gc_state(app.url), ctx_switches(app.pid)
        dc0 = ctx_switches(dm.pid) if dm else {}
        if a.items:
            # The app's CPU until its exporter (or the runtime's session) has sent the last item.
            reqs, errors, p99, secs = a.items, 0, 0.0, app.items(a.items, a.item_rate, a.item_kind)
            if proxy is not None:
                drain(proxy, quiet, a.drain)
            else:
                time.sleep(quiet)
        else:
            reqs, errors, p99, secs = wrk(url, a.seconds, a.connections, script)
        t1 = time.time_ns()
        a1 = cpu_s(app.pid)
        g1, cd = gc_state(app.url), ctx_delta(c0, ctx_switches(app.pid))
        n = max(reqs, 1)
        r.update(alloc_kb=(g1["allocatedBytes"] - g0["allocatedBytes"]) / 1024 / n,
                 gc_pause_us=(g1["pauseMs"] - g0["pauseMs"]) * 1000 / n,
                 gen0_per_1k=(g1["gen0"] - g0["gen0"]) * 1000 / n,
                 vcsw=sum(v[0] for v in cd.values()) / n, ivcsw=sum(v[1] for v in cd.values()) / n)
        if dm:
            dd = ctx_delta(dc0, ctx_switches(dm.pid))
            r["dm_csw"] = sum(v[0] + v[1] for v in dd.values()) / n
        top = sorted(cd.items(), key=lambda kv: -(kv[1][0] + kv[1][1]))[:6]
        say(f"{mode}: the app's threads by context switches per request (voluntary/involuntary): "
            + ", ".join(f"{k} {v[0] / n:.2f}/{v[1] / n:.2f}" for k, v in top))
        r["sink_cores"] = (sink_cpu(rx_pid) - s0) / ((t1 - t0) / 1e9)
        r.update(requests=reqs, errors=errors, rps=reqs / secs, req_p99=p99, app_cpu=a1 - a0,
                 app_ms=(a1 - a0) * 1000 / max(reqs, 1), app_cores=(a1 - a0) / ((t1 - t0) / 1e9),
                 app_hwm=status_kib(app.pid, "VmHWM"))
        if proxy is None:
            return r
        drain(proxy, quiet, a.drain)
        with proxy.lock:
            encodings = [q[2].lower() for q in proxy.requests]
        r["gzip_share"] = encodings.count("gzip") / max(len(encodings), 1)
        if dm:
            r["dm_cpu"] = cpu_ns_s(dm.pid) - d0
            r["dm_hwm"], r["dm_rss"] = status_kib(dm.pid, "VmHWM"), status_kib(dm.pid, "VmRSS")
            r["losses"] = dotmon_losses(port, app.pid)
        lat = {"traces": [], "logs": []}
        count = {s: 0 for s in SIGNALS}
        for sig, flat, key in (("traces", flat_spans, "end_ns"), ("logs", flat_logs, "time_ns")):
            for arrived, data in decoded(proxy, sig):
                for x in flat(data):
                    if t0 <= x[key] <= t1:
                        count[sig] += 1
                        lat[sig].append((arrived - x[key]) / 1e6)
        count["metrics"] = sum(metric_points(d) for _, d in decoded(proxy, "metrics"))
        r["count"] = count
        r["items"] = count["traces"] + count["logs"]
        for sig in ("traces", "logs"):
            r[f"{sig}_lat"] = (pct(lat[sig], 0.5), pct(lat[sig], 0.99)) if lat[sig] else None
        return r
    finally:
        if dm is not None:
            stop(dm, 15)
            r["dm_exit"] = dm.returncode
        if log is not None:
            log.seek(0)
            text = log.read()
            log.close()
            if dm is not None and dm.returncode != 0:
                say(f"dotmon exited {dm.returncode}; its log's tail:\n{text[-2000:]}")
        if app is not None:
            app.stop()
        if proxy is not None:
            proxy.close()
        shutil.rmtree(tmp, ignore_errors=True)


def med(rows, key, fmt="{:.2f}"):
    xs = [key(x) for x in rows]
    xs = [x for x in xs if x is not None]
    return spread(xs, fmt) if xs else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=15, help="measured load per round")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--connections", type=int, default=8)
    ap.add_argument("--rate", type=int, default=0,
                    help="about this many requests/s (each connection waits connections/rate s between "
                         "requests); 0: closed loop, as fast as the app answers")
    ap.add_argument("--modes", default="none,sdk,dotmon")
    ap.add_argument("--delay-ms", type=int, default=200, help="OTEL_BSP_/OTEL_BLRP_SCHEDULE_DELAY")
    ap.add_argument("--interval-ms", type=int, default=1000, help="OTEL_METRIC_EXPORT_INTERVAL")
    ap.add_argument("--log-categories", default=APP_LOG_FILTER,
                    help="dotmon's OpenTelemetry:LogCategories ('' for its default, every category)")
    ap.add_argument("--dotmon-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable for dotmon (repeatable), e.g. OTEL_LOGS_EXPORTER=none to see what "
                         "one signal costs the app")
    ap.add_argument("--all-sources", dest="same_set", action="store_false",
                    help="dotmon on its defaults (every ActivitySource, /metrics' providers and meters) "
                         "instead of the SDK's set of sources and meters")
    ap.add_argument("--items", type=int, default=0,
                    help="instead of wrk: GET /items for this many items per round (CPU per item)")
    ap.add_argument("--item-rate", type=int, default=2000, help="items per second with --items")
    ap.add_argument("--item-kind", default="plain", choices=("plain", "async", "exception", "http"),
                    help="with --items: what each item adds (two awaits, a logged exception, an HTTP "
                         "call to the app itself), to see that part's cost alone")
    ap.add_argument("--drain", type=float, default=20, help="most seconds to wait for the last items")
    ap.add_argument("--no-scopes", action="store_true",
                    help="records without their scopes on both sides: the SDK's default IncludeScopes "
                         "(false) and dotmon's OpenTelemetry:IncludeScopes=false")
    ap.add_argument("--no-receiver", action="store_true", help="the proxy answers 200 and forwards nothing")
    ap.add_argument("--compression", choices=("none", "gzip"), default="none",
                    help="OTEL_EXPORTER_OTLP_COMPRESSION on both sides (the proxy inflates gzip bodies)")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if "none" not in modes:
        ap.error("--modes needs none (the baseline of the ratios)")
    rx = None if a.no_receiver else Receiver()
    tmp = tempfile.mkdtemp(prefix="bench-otel-")
    script = os.path.join(tmp, "wrk.lua")
    with open(script, "w") as f:
        f.write(WRK_LUA)
        if a.rate:
            f.write(f"function delay() return {a.connections * 1000 // a.rate} end\n")
    rows = {m: [] for m in modes}
    try:
        # With --no-receiver the proxy forwards nothing: its target is never connected to.
        target = f"http://127.0.0.1:{free_port()}" if rx is None else rx.otlp_url
        for n in range(a.rounds):
            base = None
            for m in modes:
                say(f"round {n + 1}/{a.rounds}: {m}")
                r = run_round(a, target, m, script, rx.p.pid if rx else None)
                if m == "none":
                    base = r
                r["base"] = base
                rows[m].append(r)
                say((f"  {r['app_ms'] * 1000:.1f} µs app CPU/item" if a.items else
                     f"  {r['rps']:.0f} requests/s, app {r['app_ms']:.3f} ms CPU/request")
                    + (f", {r['count']}" if "count" in r else "")
                    + (f", dotmon {r['dm_cpu']:.2f} s CPU, {r['dm_hwm']} KiB peak" if "dm_cpu" in r else ""))
    finally:
        if rx is not None:
            rx.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    report(a, modes, rows)
    return 0


def ratio(r, key):
    b = r.get("base")
    return key(r) / key(b) if b and key(b) else None


def losses(rs):
    """dotmon's dropped + failed items per signal: median (min-max) over the rounds."""
    sigs = sorted({s for r in rs for s in r["losses"]})
    return ", ".join(f"{s} {med(rs, lambda r: r['losses'].get(s, 0), '{:.0f}')}" for s in sigs) or "-"


def report_items(a, modes, rows):
    sink = "the proxy alone (--no-receiver)" if a.no_receiver else "the Aspire Dashboard behind the proxy"
    adds = {"plain": "no HTTP and no exception per item",
            "async": "two awaits (Task.Yield) inside the child span",
            "exception": "a caught exception logged as an Error record in the scope",
            "http": "an HttpClient GET of the app's /health inside the child span"}[a.item_kind]
    print(f"OtelApp GET /items?kind={a.item_kind}: {a.items} items per round at about {a.item_rate}/s (each a "
          f"scope, the spans items.parent and items.child, one log record in the scope; {adds}), "
          f"after {min(a.items, 2000)} items of warm-up; {a.rounds} rounds interleaved ({', '.join(modes)}); "
          f"the app's CPU from the first item until the last one was delivered; OTLP/HTTP protobuf, "
          f"compression {a.compression}, batch delay {a.delay_ms} ms, to {sink}"
          + ("; records without their scopes on both sides (--no-scopes)" if a.no_scopes else "")
          + ("; dotmon given the SDK's sources and meters" if a.same_set else "; dotmon on its defaults")
          + f"{''.join('; dotmon ' + kv for kv in a.dotmon_env)}. Median (min-max) over the rounds.")
    print()
    print("| mode | app CPU µs/item | vs none | app CPU above none µs/item | dotmon CPU µs/item | "
          "spans/item | log records/item |")
    print("| --- | --- | --- | --- | --- | --- | --- |")

    def us(r):
        return r["app_cpu"] * 1e6 / max(r["requests"], 1)

    def above(r):
        b = r.get("base")
        return us(r) - us(b) if b else None

    for m in modes:
        rs = rows[m]
        exp = m != "none"
        print(f"| {m} | {med(rs, us, '{:.1f}')} | {med(rs, lambda r: ratio(r, us), '{:.2f}x') if exp else '-'} | "
              f"{med(rs, above, '{:.1f}') if exp else '-'} | "
              f"{med(rs, lambda r: r['dm_cpu'] * 1e6 / max(r['requests'], 1), '{:.1f}') if 'dm_cpu' in rs[0] else '-'} | "
              f"{med(rs, lambda r: r['count']['traces'] / max(r['requests'], 1)) if exp else '-'} | "
              f"{med(rs, lambda r: r['count']['logs'] / max(r['requests'], 1)) if exp else '-'} |")
    if "sdk" in modes and "dotmon" in modes:
        pairs = [(above(d) / above(s), us(d) / us(s)) for s, d in zip(rows["sdk"], rows["dotmon"])
                 if above(s) and above(s) > 0]
        if pairs:
            print()
            print(f"The goal, dotmon against sdk in each round: what the items cost the app above none "
                  f"{spread([p[0] for p in pairs], '{:.2f}x')}, the app's whole CPU per item "
                  f"{spread([p[1] for p in pairs], '{:.2f}x')} (below 1.00x: the app pays less with dotmon).")


def report(a, modes, rows):
    if a.items:
        report_items(a, modes, rows)
        return
    sink = "the proxy alone (--no-receiver)" if a.no_receiver else "the Aspire Dashboard behind the proxy"
    load = (f"about {a.rate} requests/s (wrk -t1 -c{a.connections}, {a.connections * 1000 // a.rate} ms between "
            f"a connection's answer and its next request)" if a.rate else
            f"wrk -t1 -c{a.connections} (closed loop)")
    print(f"OtelApp GET /work?id=1 at {load}, {a.seconds} s per round after a {a.warmup} s "
          f"warm-up, {a.rounds} rounds interleaved ({', '.join(modes)}); OTLP/HTTP protobuf, batch delay "
          f"{a.delay_ms} ms, metric interval {a.interval_ms} ms, compression {a.compression}, to {sink}"
          + ("; records without their scopes on both sides (--no-scopes)" if a.no_scopes else "")
          + f"; dotmon's LogCategories "
          f"{a.log_categories or '(all)'}"
          + (f"; dotmon's ActivitySources and Meters the SDK's (the app's source and meter, ASP.NET Core, "
             f"HttpClient; Metrics:IncludeDefaultProviders false)" if a.same_set else
             "; dotmon on its default sources and meters")
          + f"{''.join('; dotmon ' + kv for kv in a.dotmon_env)}. "
          f"Median (min-max) over the rounds; ratios per round against that round's none.")
    for m in modes:
        if m == "none":
            continue
        got = [s for s in SIGNALS if any(r["count"][s] for r in rows[m])]
        gz = min(r["gzip_share"] for r in rows[m])
        print(f"{m} exported: {', '.join(got) or 'nothing'}; gzip bodies: at least {gz:.0%} of its requests"
              + ("" if "traces" in got else " (no spans: not read out of process by this build)"
                 if m == "dotmon" else ""))
    print()
    print("| mode | requests/s | vs none | client p99 ms | app CPU ms/request | vs none | app CPU (cores) | "
          "app peak RSS MiB | app + dotmon CPU ms/request | receiver + proxy CPU (cores) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in modes:
        rs = rows[m]
        both = "-" if m != "dotmon" else med(rs, lambda r: (r["app_cpu"] + r["dm_cpu"]) * 1000 / max(r["requests"], 1),
                                             "{:.3f}")
        print(f"| {m} | {med(rs, lambda r: r['rps'], '{:.0f}')} | "
              f"{'-' if m == 'none' else med(rs, lambda r: ratio(r, lambda x: x['rps']), '{:.2f}x')} | "
              f"{med(rs, lambda r: r['req_p99'], '{:.1f}')} | {med(rs, lambda r: r['app_ms'], '{:.3f}')} | "
              f"{'-' if m == 'none' else med(rs, lambda r: ratio(r, lambda x: x['app_ms']), '{:.2f}x')} | "
              f"{med(rs, lambda r: r['app_cores'], '{:.2f}')} | {med(rs, lambda r: r['app_hwm'] / 1024, '{:.0f}')} | "
              f"{both} | {med(rs, lambda r: r['sink_cores'], '{:.2f}')} |")
    print()
    print("| mode | app allocated KiB/request | app GC pause µs/request | gen0 GCs per 1k requests | "
          "app context switches/request, voluntary | involuntary | dotmon context switches/request |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for m in modes:
        rs = rows[m]
        print(f"| {m} | {med(rs, lambda r: r['alloc_kb'], '{:.2f}')} | {med(rs, lambda r: r['gc_pause_us'], '{:.1f}')} | "
              f"{med(rs, lambda r: r['gen0_per_1k'], '{:.2f}')} | {med(rs, lambda r: r['vcsw'], '{:.2f}')} | "
              f"{med(rs, lambda r: r['ivcsw'], '{:.2f}')} | "
              f"{med(rs, lambda r: r['dm_csw'], '{:.2f}') if m == 'dotmon' else '-'} |")
    if "sdk" in modes and "dotmon" in modes:
        pairs = [(d["app_ms"] / s["app_ms"], d["rps"] / s["rps"]) for s, d in zip(rows["sdk"], rows["dotmon"])
                 if s["app_ms"] and s["rps"]]
        if pairs:
            print()
            print(f"The goal, dotmon against sdk in each round: the app's CPU per request "
                  f"{spread([p[0] for p in pairs], '{:.2f}x')}, its requests/s "
                  f"{spread([p[1] for p in pairs], '{:.2f}x')} (below 1.00x and above 1.00x: the app pays "
                  f"less with dotmon).")
    exporting = [m for m in modes if m != "none"]
    if not exporting:
        return
    print()
    print("| mode | spans/request | log records/request | metric points | exporter CPU ms per 10k items | "
          "dotmon peak RSS KiB | dotmon RSS at end KiB | dotmon dropped+failed | span latency p50/p99 ms | "
          "log latency p50/p99 ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for m in exporting:
        rs = rows[m]

        def per10k(r):
            if m == "dotmon":
                return r["dm_cpu"] * 1e7 / r["items"] if r["items"] else None
            b = r.get("base")
            if not b or not r["items"]:
                return None
            return (r["app_ms"] - b["app_ms"]) * r["requests"] * 1e4 / r["items"]

        def lat(sig, i):
            return lambda r: r[f"{sig}_lat"][i] if r[f"{sig}_lat"] else None

        dm = m == "dotmon"
        print(f"| {m} | {med(rs, lambda r: r['count']['traces'] / max(r['requests'], 1))} | "
              f"{med(rs, lambda r: r['count']['logs'] / max(r['requests'], 1))} | "
              f"{med(rs, lambda r: r['count']['metrics'], '{:.0f}')} | {med(rs, per10k, '{:.1f}')} | "
              f"{med(rs, lambda r: r['dm_hwm'], '{:.0f}') if dm else '-'} | "
              f"{med(rs, lambda r: r['dm_rss'], '{:.0f}') if dm else '-'} | "
              f"{losses(rs) if dm else '-'} | "
              f"{med(rs, lat('traces', 0), '{:.0f}')} / {med(rs, lat('traces', 1), '{:.0f}')} | "
              f"{med(rs, lat('logs', 0), '{:.0f}')} / {med(rs, lat('logs', 1), '{:.0f}')} |")
    print()
    print("Exporter CPU per 10k items: dotmon's own CPU (window and drain) per 10,000 spans + log records it "
          "delivered; for sdk, the app's CPU per request above the same round's none, per 10,000 items.")


if __name__ == "__main__":
    sys.exit(main())
