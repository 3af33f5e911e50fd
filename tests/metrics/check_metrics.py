#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""GET /metrics for every process, end to end (issue 15).

Two real .NET test apps (tests/app: its own Meter "TestApp.Meter" and EventSource counters
"TestApp.Counters" beside the runtime's System.Runtime EventCounters and meter) and the real dotmon,
all in a private TMPDIR, GlobalCounter:IntervalSeconds=1, the test app's meter and counters
configured. Checks, on dotmon's metrics URL:
  - both processes' series, each labelled with its own pid, uid and name, and
    dotmon_process_metrics_up 1 for both;
  - dotnet-monitor's names: systemruntime_cpu_usage_ratio, systemruntime_working_set_bytes (MB x 1e6),
    the System.Runtime meter's systemruntime_dotnet_gc_collections__collection_ with its
    gc_heap_generation label, the app's counter as testappmeter_testapp_requests__request_ with its
    tags, its histogram as a summary with quantiles;
  - exact values: `meter-add 7` in one app makes its request counter's rate 7 in one interval while
    the other app's stays 0; values and timestamps move between scrapes;
  - one sample per series per scrape, HELP/TYPE once per name, and `promtool check metrics` finds
    no error (Debian's prometheus package);
  - a real Prometheus server scraping dotmon every second: its query API answers up == 1 and the
    app's series with several samples (asked every second, 40 s at most);
  - a killed app's series leave /metrics; dotmon stops cleanly.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT. Needs promtool and prometheus
for those parts (skipped with a reason otherwise: exit 77 only if nothing could run).
"""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, dotnet_root, fetch, free_port, settle  # noqa: E402



def get(url, timeout=10):
    """(status, Content-Type, body text); an HTTP error status or a failed connection raises, as
    the checks below expect a 200."""
    st, headers, body = fetch(url, timeout=timeout)
    if st != 200:
        raise OSError(f"GET {url}: {st} {body[:200]!r}")
    return st, headers.get("Content-Type", ""), body.decode()


LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)( (-?\d+))?$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse(text):
    """[(name, {labels}, value, timestamp)], {name: help}, {name: type}"""
    samples, helps, types = [], {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            n, _, h = line[7:].partition(" ")
            helps.setdefault(n, []).append(h)
        elif line.startswith("# TYPE "):
            n, _, t = line[7:].partition(" ")
            types.setdefault(n, []).append(t)
        elif line and not line.startswith("#"):
            m = LINE.match(line)
            if not m:
                samples.append(("<unparsable>", {"line": line}, None, None))
                continue
            labels = dict(LABEL.findall(m.group(3) or ""))
            samples.append((m.group(1), labels, float(m.group(4)), int(m.group(6)) if m.group(6) else None))
    return samples, helps, types


def series(samples, metric, **labels):
    return [s for s in samples if s[0] == metric and all(s[1].get(k) == str(v) for k, v in labels.items())]


def main():
    tmp = tempfile.mkdtemp(prefix="dmmetrics")
    os.chmod(tmp, 0o700)
    apps, dm, prom = [], None, None
    mport = free_port()
    try:
        apps = [App(tmp), App(tmp)]
        env = dict(os.environ, TMPDIR=tmp,
                   DotnetMonitor_GlobalCounter__IntervalSeconds="1",
                   DotnetMonitor_Metrics__Meters__0__MeterName="TestApp.Meter",
                   DotnetMonitor_Metrics__Providers__0__ProviderName="TestApp.Counters")
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        aport = free_port()
        api = f"http://127.0.0.1:{aport}"
        dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", api,
                               "--metricUrls", f"http://127.0.0.1:{mport}"], stdout=subprocess.DEVNULL, stderr=log, env=env)
        url = f"http://127.0.0.1:{mport}/metrics"
        pids = [a.pid for a in apps]

        # Both processes' metrics arrive: the runtime's first, then the app's own counter, which
        # has a series only once it is measured while dotmon's session listens.
        def scrape_until(cond, seconds):
            """(Content-Type, text, samples) of /metrics once cond(samples) holds (seconds, scaled)."""
            def scrape():
                try:
                    _, ctype, text = get(url)
                except OSError:
                    return None
                return ctype, text, parse(text)[0]

            return settle(scrape, lambda out: out is not None and cond(out[2]), seconds, 0.5) or ("", "", [])

        scrape_until(lambda smp: all(series(smp, "systemruntime_cpu_usage_ratio", pid=p) for p in pids), 30)
        for a, n in ((apps[0], 5), (apps[1], 3)):
            answer = a.command(f"meter-add {n}")
            check(answer.startswith("ok meter-add"), f"pid {a.pid}: meter-add {n} answered {answer!r}")
        ctype, text, _ = scrape_until(lambda smp: all(series(smp, "testappmeter_testapp_requests__request_", pid=p)
                                                      for p in pids), 15)
        check(ctype.startswith("text/plain; version=0.0.4"), f"content type {ctype!r}")
        samples, helps, types = parse(text)
        check(not series(samples, "<unparsable>"), f"every line parses: {series(samples, '<unparsable>')[:3]}")
        for a in apps:
            up = series(samples, "dotmon_process_metrics_up", pid=a.pid)
            check(len(up) == 1 and up[0][2] == 1.0, f"pid {a.pid}: dotmon_process_metrics_up 1 ({up})")
            for name in ("systemruntime_cpu_usage_ratio", "systemruntime_working_set_bytes",
                         "systemruntime_gc_heap_size_bytes", "testappmeter_testapp_requests__request_"):
                s = series(samples, name, pid=a.pid, name="TestApp")
                check(bool(s) and all(x[1].get("uid") for x in s), f"pid {a.pid}: {name} with pid, uid, name labels")
            ws = series(samples, "systemruntime_working_set_bytes", pid=a.pid)
            check(bool(ws) and 5e6 < ws[0][2] < 5e9, f"pid {a.pid}: working set in bytes (MB x 1e6): {ws[:1]}")
            gcc = series(samples, "systemruntime_dotnet_gc_collections__collection_", pid=a.pid)
            check({x[1].get("gc_heap_generation") for x in gcc} >= {"gen0", "gen1", "gen2"},
                  f"pid {a.pid}: System.Runtime meter dotnet.gc.collections by generation")
        # /info?extras=true says each process's metrics state.
        info = json.loads(get(f"{api}/info?extras=true")[2])
        states = {m["pid"]: m["state"] for m in info.get("metrics", [])}
        check(all(states.get(p) == "running" for p in pids), f"/info?extras=true: metrics running for both ({states})")
        check("metrics" not in json.loads(get(f"{api}/info")[2]), "/info without extras has only dotnet-monitor's fields")

        # Exposition rules: one HELP/TYPE per name, one sample per series.
        check(all(len(v) == 1 for v in helps.values()) and all(len(v) == 1 for v in types.values()),
              "HELP and TYPE once per metric name")
        keys = [(s[0], tuple(sorted(s[1].items()))) for s in samples]
        check(len(keys) == len(set(keys)), f"one sample per series ({len(keys) - len(set(keys))} duplicates)")
        check(types.get("testappmeter_testapp_latency_ms") == ["summary"] and
              {s[1].get("quantile") for s in series(samples, "testappmeter_testapp_latency_ms")} >= {"0.5", "0.95", "0.99"},
              "the app's histogram is a summary with quantiles 0.5, 0.95, 0.99")
        check(types.get("systemruntime_cpu_usage_ratio") == ["gauge"], "EventCounters are gauges")

        # Exact values: 7 requests in one app, none in the other.
        answer = apps[0].command("meter-add 7")
        check(answer.startswith("ok meter-add"), f"meter-add answered {answer!r}")
        # One interval's rate, summed over its tag series.
        s = settle(lambda: parse(get(url)[2])[0],
                   lambda smp: sum(x[2] for x in series(smp, "testappmeter_testapp_requests__request_",
                                                        pid=apps[0].pid)) == 7.0, 15, 0.5)
        mine = series(s, "testappmeter_testapp_requests__request_", pid=apps[0].pid)
        seen = mine if sum(x[2] for x in mine) == 7.0 else None
        other = series(s, "testappmeter_testapp_requests__request_", pid=apps[1].pid) if seen else None
        check(seen is not None, f"the request counter's rate shows the 7 requests of pid {apps[0].pid}")
        check(bool(other) and all(x[2] == 0.0 for x in other),
              f"the other app's request series are there with rate 0: {other}")

        # Counters as counters: the meter counter's running total, a Prometheus counter beside
        # dotnet-monitor's per-interval rate gauge (5 + 7 requests made while dotmon listened).
        smp, _, types = parse(get(url)[2])
        tot = series(smp, "testappmeter_testapp_requests__request__total", pid=apps[0].pid)
        check(types.get("testappmeter_testapp_requests__request__total") == ["counter"] and
              sum(x[2] for x in tot) == 12.0, f"pid {apps[0].pid}: requests _total counter adds up to 12: {tot}")

        # Values and timestamps move between scrapes.
        s1 = parse(get(url)[2])[0]
        time.sleep(2.5)
        s2 = parse(get(url)[2])[0]
        t1 = {(x[0], tuple(sorted(x[1].items()))): x[3] for x in s1 if x[3] is not None}
        moved = sum(1 for x in s2 if x[3] is not None and t1.get((x[0], tuple(sorted(x[1].items())))) not in (None, x[3]))
        check(moved > 10, f"{moved} series have newer timestamps 2.5 s later")

        # promtool.
        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=get(url)[2], capture_output=True, text=True)
            errors = [l for l in (r.stdout + r.stderr).splitlines() if "error" in l.lower()]
            check(not errors, f"promtool check metrics: no error (exit {r.returncode}; {len(r.stdout.splitlines())} lint lines)")
        else:
            print("skip promtool: not installed (Debian: prometheus)")

        # A real Prometheus server.
        prom_bin = shutil.which("prometheus")
        if prom_bin:
            pport = free_port()
            cfg = os.path.join(tmp, "prometheus.yml")
            with open(cfg, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n"
                        f"  - job_name: dotmon\n    static_configs:\n      - targets: ['127.0.0.1:{mport}']\n")
            plog = open(os.path.join(tmp, "prometheus.log"), "w")
            prom = subprocess.Popen([prom_bin, f"--config.file={cfg}", f"--storage.tsdb.path={tmp}/tsdb",
                                     f"--web.listen-address=127.0.0.1:{pport}"], stdout=plog, stderr=plog)
            papi = f"http://127.0.0.1:{pport}/api/v1/query?query="

            def query(q):
                try:
                    return json.loads(get(papi + urllib.parse.quote(q))[2])["data"]["result"]
                except (OSError, ValueError, KeyError):
                    return []  # not up yet

            # Asked every second until all three hold (20 s at most before, always: CI time).
            q_n = f'count_over_time(systemruntime_cpu_usage_ratio{{pid="{apps[0].pid}"}}[30s])'
            deadline = time.time() + 40
            while True:
                vals = [r["value"][1] for r in query('up{job="dotmon"}')]
                cnt = query(q_n)
                n = int(float(cnt[0]["value"][1])) if cnt else 0
                byp = query('count by (pid) (testappmeter_testapp_requests__request_)')
                seen = {r["metric"].get("pid") for r in byp} >= {str(p) for p in pids}
                if (vals == ["1"] and n >= 5 and seen) or time.time() > deadline:
                    break
                time.sleep(1)
            check(vals == ["1"], f"Prometheus: up == 1 ({vals})")
            check(n >= 5, f"Prometheus holds {n} samples of pid {apps[0].pid}'s cpu usage")
            check(seen, f"Prometheus sees both processes' request series: {[r['metric'] for r in byp]}")
        else:
            print("skip Prometheus server: not installed (Debian: prometheus)")

        # Drop-in mode: the default process only (Metrics:AllProcesses=false), as dotnet-monitor.
        mport2 = free_port()
        env2 = dict(env, DotnetMonitor_Metrics__AllProcesses="false",
                    DotnetMonitor_DefaultProcess__Filters__0__Key="ProcessId",
                    DotnetMonitor_DefaultProcess__Filters__0__Value=str(apps[1].pid))
        dm2 = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", f"http://127.0.0.1:{free_port()}",
                                "--metricUrls", f"http://127.0.0.1:{mport2}"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=env2)
        try:
            url2 = f"http://127.0.0.1:{mport2}/metrics"
            def scraped_pids():
                try:
                    return {x[1].get("pid") for x in parse(get(url2)[2])[0] if x[0] == "systemruntime_cpu_usage_ratio"}
                except OSError:
                    return set()

            pids2 = settle(scraped_pids, bool, 20, 0.3)
            check(pids2 == {str(apps[1].pid)}, f"Metrics:AllProcesses=false: only the default process ({pids2})")
        finally:
            dm2.send_signal(signal.SIGTERM)
            dm2.wait(15)

        # /livemetrics: exact values from a session of its own, beside the continuous one.
        body = json.dumps({"includeDefaultProviders": False,
                           "meters": [{"meterName": "TestApp.Meter", "instrumentNames": ["testapp.requests"]}]})
        result = {}

        def livemetrics():
            req = urllib.request.Request(f"{api}/livemetrics?pid={apps[0].pid}&durationSeconds=6", data=body.encode(),
                                         headers={"Content-Type": "application/json"}, method="POST")
            try:
                with urllib.request.urlopen(req, timeout=30) as r:
                    result["type"] = r.headers.get("Content-Type")
                    result["body"] = r.read().decode()
            except urllib.error.HTTPError as e:
                result["type"] = f"HTTP {e.code}: {e.read().decode()[:300]}"

        t = threading.Thread(target=livemetrics)
        t.start()
        time.sleep(2.5)
        apps[0].command("meter-add 4")
        t.join(30)
        recs = [json.loads(x) for x in result.get("body", "").split("\x1e") if x.strip()]
        check(result.get("type", "").startswith("application/json-seq"), f"/livemetrics content type {result.get('type')}")
        check(bool(recs) and all(r["name"] == "testapp.requests" and r["counterType"] == "Rate" and
                                 r["provider"] == "TestApp.Meter" and r["unit"] == "{request}" for r in recs),
              f"/livemetrics POST gives only testapp.requests, as a Rate ({len(recs)} records)")
        total = sum(r["value"] for r in recs)
        check(total == 4, f"/livemetrics: the rates add up to the 4 requests made while it ran ({total})")
        check(all(r["meterTags"] == "app=testapp" and "route=" in r["tags"] for r in recs[:4]),
              f"/livemetrics records carry meter and value tags: {recs[:1]}")

        # A user's trace with the Metrics profile never fails because of the metrics session, and
        # the EventCounters it turns off when it ends come back (the session restarts).
        path = os.path.join(tmp, "m.nettrace")
        with urllib.request.urlopen(f"{api}/trace?pid={apps[0].pid}&profile=Metrics&durationSeconds=3", timeout=60) as r:
            with open(path, "wb") as f:
                f.write(r.read())
        checker = os.environ.get("DOTMON_NETTRACE_CHECK")
        if checker:
            rc = subprocess.run([checker, path], capture_output=True, text=True).returncode
            check(rc == 0, f"a Metrics-profile trace beside the metrics session is COMPLETE (exit {rc})")
        t_end = time.time() * 1000
        fresh = scrape_until(lambda smp: any(x[3] is not None and x[3] > t_end + 2000 for x in
                                             series(smp, "systemruntime_cpu_usage_ratio", pid=apps[0].pid)), 30)[2]
        newest = max((x[3] for x in series(fresh, "systemruntime_cpu_usage_ratio", pid=apps[0].pid)), default=0)
        check(newest > t_end + 2000, f"EventCounters flow again after the trace ended ({(newest - t_end) / 1000:.1f} s later)")

        # A killed runtime ends a live metrics stream cleanly, and its series leave /metrics.
        gone = apps[1].pid
        result.clear()

        def livemetrics_long():
            try:
                with urllib.request.urlopen(f"{api}/livemetrics?pid={gone}&durationSeconds=60", timeout=60) as r:
                    result["body"] = r.read().decode()
            except Exception as e:  # noqa: BLE001 (the check below reports it)
                result["error"] = repr(e)

        t = threading.Thread(target=livemetrics_long)
        t.start()
        time.sleep(3)
        t0 = time.time()
        apps[1].kill()
        t.join(30)
        recs = [json.loads(x) for x in result.get("body", "").split("\x1e") if x.strip()]
        check("body" in result and time.time() - t0 < 10,
              f"killing the runtime ended /livemetrics cleanly in {time.time() - t0:.1f} s "
              f"({len(recs)} records; {result.get('error', 'no error')})")
        left = settle(lambda: [x for x in parse(get(url)[2])[0] if x[1].get("pid") == str(gone)], [], 20, 0.5)
        check(not left, f"the killed app's series left /metrics ({len(left or [])} remain)")
        check(bool(series(parse(get(url)[2])[0], "systemruntime_cpu_usage_ratio", pid=apps[0].pid)),
              "the other app's series stay")

        dm.send_signal(signal.SIGTERM)
        try:
            rc = dm.wait(timeout=15)
        except subprocess.TimeoutExpired:
            rc = None
        check(rc == 0, f"dotmon exits 0 on SIGTERM ({rc})")
    finally:
        for a in apps:
            a.kill()
        if dm is not None and dm.poll() is None:
            dm.kill()
        if prom is not None:
            prom.terminate()
            prom.wait()
        if FAILS:
            try:
                print("---- dotmon log (tail) ----")
                print("\n".join(open(os.path.join(tmp, "dotmon.log")).read().splitlines()[-30:]))
            except OSError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(FAILS)} failure(s)" if FAILS else "ok: /metrics for every process")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
