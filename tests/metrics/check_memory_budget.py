# SPDX-License-Identifier: MIT
"""dotmon's memory budget under a 64 MiB memory cgroup (issue 28 item 2), end to end.

A memory cgroup (v1 here, v2 where the machine has it) limited to 64 MiB, as the shipped
manifests give dotmon; dotmon is started inside it, with 4 hostile runtimes
(tests/tools/flood_runtime: System.Runtime EventCounters with ever-new 30,000-character names, 200
a second each), a fifth sending them 130 to a 15.6 MB nettrace block, and one real .NET test app in
its folder. Checks:
  - start-up logs the budget taken from the cgroup: "memory budget 48 MiB (cgroup limit 64 MiB)"
    (64 MiB less max(16 MiB, 64/4));
  - after 15 s of flood dotmon is alive, its peak RSS (VmHWM) is under the limit (and under
    32 MiB: before the fix one such runtime took it from 6 to 125 MB);
  - every hostile runtime's new series are dropped and counted
    (dotmon_metrics_series_dropped_total{pid} > 0), its kept bytes within its share (/info);
  - /metrics answers 200 with the real app's System.Runtime EventCounters complete (every one of
    docs/events.md §2.4) and parseable (promtool check metrics on the whole text when the writer
    streams it, on the app's lines otherwise: the flood's names sort after the app's, so a capped
    writer cannot hide them behind the flood); /processes answers and lists all 6;
  - the 15.6 MB block is refused (a metrics session reads blocks of 1 MiB at most), not held;
  - with Memory:LimitMB=8 (a 1 MiB share per runtime) the byte bound, not the 1,024 series, is
    what drops series, and the start-up line says the budget comes from the setting.
Needs root and a writable memory cgroup hierarchy: exit 77 otherwise. Environment: DOTMON_BIN,
DOTMON_FLOOD_RUNTIME, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from dmtest import (FAILS, SANITIZED, App, check, close_log, free_port, get_json, http_get, join_cgroup,  # noqa: E402
                    memory_cgroup, remove_cgroup, settle, status_kib, stop, wait_log)
import dmtest  # noqa: E402

MIB = 1024 * 1024
LIMIT = 64 * MIB
FLOODS = 4
FLOOD_SECONDS = 15

# System.Runtime's EventCounters on .NET 10 (docs/events.md §2.4): name, units, Sum?
COUNTERS = [
    ("cpu-usage", "%"), ("working-set", "MB"), ("gc-heap-size", "MB"), ("gen-0-gc-budget", "MB"),
    ("threadpool-thread-count", ""), ("threadpool-queue-length", ""), ("active-timer-count", ""),
    ("gc-fragmentation", "%"), ("gc-committed", "MB"), ("time-in-gc", "%"), ("gen-0-size", "B"),
    ("gen-1-size", "B"), ("gen-2-size", "B"), ("loh-size", "B"), ("poh-size", "B"),
    ("assembly-count", ""), ("il-bytes-jitted", "B"), ("methods-jitted-count", ""),
    ("gen-0-gc-count", ""), ("gen-1-gc-count", ""), ("gen-2-gc-count", ""),
    ("monitor-lock-contention-count", ""), ("threadpool-completed-items-count", ""),
    ("alloc-rate", "B"), ("exception-count", ""), ("total-pause-time-by-gc", "ms"), ("time-in-jit", "ms"),
]
UNIT = {"": "", "%": "_ratio", "MB": "_bytes", "B": "_bytes", "ms": "_ms"}
APP_FAMILIES = ["systemruntime_" + n.replace("-", "_") + UNIT[u] for n, u in COUNTERS]


def start_dotmon(tmp, port, cgroup, log, extra_env):
    """dotmon in the cgroup (it moves itself in before exec), metrics on, every second."""
    env = dict(os.environ, TMPDIR=tmp, DotnetMonitor_GlobalCounter__IntervalSeconds="1", **extra_env)
    # Metrics on (the budget covers the counters), on a free port, not the default 52325: tests
    # run two at a time.
    return subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls",
                             f"http://127.0.0.1:{port}", "--metricUrls", f"http://127.0.0.1:{free_port()}"],
                            stdout=subprocess.DEVNULL, stderr=log, env=env,
                            preexec_fn=lambda: join_cgroup(cgroup))


def samples(text):
    """{(family, pid): value} of the sample lines (labels pid="..." only)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)', line)
        if m:
            pid = re.search(r'\bpid="(\d+)"', m.group(2) or "")
            out[(m.group(1), pid.group(1) if pid else None)] = m.group(3)
    return out


def info_metrics(port):
    try:
        st, _, body = http_get(port, "/info?extras=true", timeout=10)
    except OSError:
        return {}
    return {m["pid"]: m for m in json.loads(body).get("metrics", [])} if st == 200 else {}


def flood_phase(tmp, port, cgroup, app, floods, big, log):
    dm = start_dotmon(tmp, port, cgroup, log, {})
    try:
        m = wait_log(log, r"memory budget (\d+) MiB \(cgroup limit (\d+) MiB\)", 10)
        check(m is not None and m.group(1) == "48" and m.group(2) == "64",
              f"start-up: the budget from the cgroup: {m.group(0) if m else 'no such line'}")
        # 15 s of flood, longer (20 s more at most) until every flood has filled its series: a
        # sanitizer build decodes the floods' names 3-4 times slower.
        peak, t0, full = 0, time.time(), False
        while dm.poll() is None and time.time() - t0 < FLOOD_SECONDS + 20:
            peak = max(peak, status_kib(dm.pid))
            time.sleep(0.5)
            if time.time() - t0 >= FLOOD_SECONDS:
                full = full or all(i.get("seriesDropped", 0) > 0 for i in
                                   (info_metrics(port).get(f.pid, {}) for f in floods))
                if full:
                    break
        print(f"flooded for {time.time() - t0:.1f} s")
        hwm = status_kib(dm.pid, "VmHWM")
        check(dm.poll() is None, f"dotmon alive after {time.time() - t0:.0f} s of {FLOODS} floods")
        bound = 64 * 1024 if SANITIZED else 32 * 1024
        check(0 < hwm < bound, f"peak RSS {hwm} KiB (sampled max {peak} KiB) < {bound} KiB (cgroup limit 65536 KiB)")
        if dm.poll() is not None:
            return peak  # killed (the kernel's OOM killer, before the fix): nothing more to ask
        st, _, body = http_get(port, "/processes", timeout=10)
        listed = {p["pid"] for p in json.loads(body)} if st == 200 else set()
        check(st == 200 and {app.pid, big.pid, *[f.pid for f in floods]} <= listed,
              f"/processes answers {st}, lists all 6")
        st, ctype, text = http_get(port, "/metrics", timeout=20)
        text = text.decode("utf-8", "replace")
        check(st == 200, f"/metrics answers {st} ({len(text)} bytes)")
        smp = samples(text)
        missing = [f for f in APP_FAMILIES if (f, str(app.pid)) not in smp]
        check(not missing, f"the real app's {len(APP_FAMILIES)} System.Runtime counters are there (missing: {missing})")
        check(smp.get(("dotmon_process_metrics_up", str(app.pid))) == "1", "the real app's metrics are up")
        for f in floods:
            d = smp.get(("dotmon_metrics_series_dropped_total", str(f.pid)))
            check(d is not None and float(d) > 0, f"flood {f.pid}: dotmon_metrics_series_dropped_total = {d}")
        d = smp.get(("dotmon_metrics_series_dropped_total", str(app.pid)))
        check(d == "0", f"the real app drops nothing ({d})")
        info = info_metrics(port)
        for f in floods:
            i = info.get(f.pid, {})
            check(i.get("seriesDropped", 0) > 0 and 0 < i.get("bytes", 0) <= i.get("bytesCap", 0) == 6 * MIB,
                  f"flood {f.pid} in /info: {i.get('series')} series, {i.get('bytes')} bytes of a "
                  f"{i.get('bytesCap')}-byte share, {i.get('seriesDropped')} dropped")
        reason = info.get(big.pid, {}).get("reason") or ""
        check("EventBlock size" in reason and "over" in reason,
              f"the 15.6 MB block is refused, not held: {reason[:120]!r}")
        promtool = shutil.which("promtool")
        if promtool:
            # The whole text once /metrics streams without a cap (chunked); else the app's lines.
            chunked = "chunked" in subprocess.run(
                ["curl", "-sD-", "-o/dev/null", f"http://127.0.0.1:{port}/metrics"],
                capture_output=True, text=True).stdout.lower()
            if not chunked:
                keep = [ln for ln in text.splitlines()
                        if f'pid="{app.pid}"' in ln or (ln.startswith("# ") and ln.split(" ")[2] in APP_FAMILIES)]
                text = "\n".join(keep) + "\n"
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln.lower()]
            check(not errors, f"promtool check metrics ({'whole text' if chunked else 'the app lines'}): "
                              f"no error {errors[:2]}")
        else:
            print("skip promtool: not installed")
        return hwm
    finally:
        stop(dm)
        log.flush()
        with open(log.name) as f:
            text = f.read()
        check(dmtest.sanitizer_report(text) is None, "no sanitizer report in dotmon's log")


def setting_phase(tmp, port, cgroup, floods, log):
    """Memory:LimitMB=8: 1 MiB per runtime, the byte bound drops series before the 1,024th."""
    # A flood still busy with the first dotmon's dead session can miss this one's first probe:
    # failed probes are retried every 500 ms (not 5 s doubling), and every flood is listed before
    # the checks.
    dm = start_dotmon(tmp, port, cgroup, log, {"DotnetMonitor_Memory__LimitMB": "8",
                                               "DotnetMonitor_Timeouts__DiscoveryRescanMs": "500",
                                               "DotnetMonitor_Timeouts__DiscoveryRetryMaxMs": "1000"})
    try:
        m = wait_log(log, r"memory budget 8 MiB \(cgroup limit 64 MiB, from Memory:LimitMB\)", 10)
        check(m is not None, "start-up: the budget from Memory:LimitMB")
        want = {fl.pid for fl in floods}
        seen = settle(lambda: want & {p.get("pid") for p in (get_json(port, "/processes")[1] or [])},
                      want, 30, 0.2)
        check(seen == want, f"every flood listed ({sorted(seen)} of {sorted(want)})")
        m = wait_log(log, r"fill its share of dotmon's memory budget \(1024 KiB\)", 30)
        check(m is not None, "a flood's share (1 MiB) fills before its 1,024 series, logged once")
        byte_bound = settle(lambda: [i for i in info_metrics(port).values()
                                     if i.get("bytesCap") == MIB and i.get("seriesDropped", 0) > 0
                                     and i.get("series", 0) < 1024 and i.get("bytes", 0) <= MIB],
                            lambda v: len(v) >= FLOODS, 8, 0.5)
        check(len(byte_bound) == FLOODS, f"{len(byte_bound)} floods cut by bytes (series, bytes): "
                                         f"{[(i['series'], i['bytes']) for i in byte_bound]}")
        check(dm.poll() is None, "dotmon alive")
        log.flush()
        with open(log.name) as f:
            said = [f"metrics of {fl.pid}: " in ln and "fill its share" in ln for ln in f for fl in floods]
        check(sum(said) == FLOODS, f"the full share logged once per flood ({sum(said)} lines for {FLOODS})")
    finally:
        stop(dm)


class Flood:
    def __init__(self, tmp, *args):
        self.p = subprocess.Popen([os.environ["DOTMON_FLOOD_RUNTIME"], tmp, *args], stdout=subprocess.PIPE,
                                  text=True)
        line = self.p.stdout.readline()
        if not line.startswith("ready "):
            raise RuntimeError(f"flood_runtime did not start: {line!r}")
        self.pid = self.p.pid

    def kill(self):
        self.p.kill()
        self.p.wait()


def main():
    # --memory-only (the normal build, label perf): the flood and its 32 MiB peak-RSS bound; the
    # Memory:LimitMB phase, which measures no memory, runs in the sanitizer build.
    memory_only = sys.argv[1:] == ["--memory-only"]
    cgroup = memory_cgroup("dmtest", LIMIT)
    if cgroup is None:
        print("SKIP: needs root and a writable memory cgroup")
        return 77
    tmp = tempfile.mkdtemp(prefix="dmbudget")
    os.chmod(tmp, 0o700)
    app, floods_all, log = None, [], None
    try:
        app = App(tmp)
        floods = [Flood(tmp) for _ in range(FLOODS)]
        # One more: 130 such events in one 15.6 MB nettrace block (a real runtime's are 100 KiB).
        big = Flood(tmp, "30000", "130")
        floods_all = floods + [big]
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        hwm = flood_phase(tmp, free_port(), cgroup, app, floods, big, log)
        print(f"figure: dotmon peak RSS {hwm} KiB with {FLOODS} floods and one app under a 64 MiB cgroup")
        if not memory_only:
            log.truncate(0)
            log.seek(0)
            setting_phase(tmp, free_port(), cgroup, floods, log)
    finally:
        for f in floods_all:
            f.kill()
        if app is not None:
            app.kill()
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
        remove_cgroup(cgroup)
    print("FAILED: " + "; ".join(FAILS) if FAILS else "all checks passed")
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
