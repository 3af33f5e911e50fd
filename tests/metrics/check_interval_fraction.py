# SPDX-License-Identifier: MIT
"""GlobalCounter:IntervalSeconds as a fraction, as dotnet-monitor takes it (a float with
[Range(1, 86400)], sent to the runtime as float.ToString: EventCounterIntervalSec=1.5,
RefreshInterval=1.5). The real test app and dotmon with DotnetMonitor_GlobalCounter__IntervalSeconds
=1.5: /livemetrics gets System.Runtime's EventCounters every 1.5 s (the runtime's own timestamps:
a rounded 1 or 2 would show), and the meter's rate is named per 1.5 s. 0.5 (under dotnet-monitor's
minimum) and "1,5" stop start-up naming the key.
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import Watched, check, fetch, verdict  # noqa: E402

INTERVAL = "1.5"


def when(ts):
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def main():
    w = Watched("dotmon-interval-", env={"DotnetMonitor_GlobalCounter__IntervalSeconds": INTERVAL})
    try:
        body = json.dumps({"includeDefaultProviders": False,
                           "providers": [{"providerName": "System.Runtime", "counterNames": ["cpu-usage"]}],
                           "meters": [{"meterName": "TestApp.Meter", "instrumentNames": ["testapp.requests"]}]})
        res = {}

        def livemetrics():
            res["r"] = fetch(f"http://127.0.0.1:{w.port}/livemetrics?pid={w.app.pid}&durationSeconds=9",
                             method="POST", data=body.encode(), headers={"Content-Type": "application/json"},
                             timeout=60)

        t = threading.Thread(target=livemetrics)
        t.start()
        # Measurements while the session runs, so the meter has a rate to publish.
        for _ in range(6):
            w.app.command("meter-add 2")
            t.join(1)
        t.join(60)
        st, _, out = res.get("r", (0, None, b"no answer"))
        check(st == 200, f"/livemetrics answers 200 ({st}: {out[:200]!r})")
        recs = [json.loads(x) for x in out.decode().split("\x1e") if x.strip()]
        cpu = sorted(when(r["timestamp"]) for r in recs if r.get("name") == "cpu-usage")
        gaps = [b - a for a, b in zip(cpu, cpu[1:])]
        check(len(gaps) >= 3, f"cpu-usage came at least 4 times in 9 s ({len(cpu)})")
        if gaps:
            med = statistics.median(gaps)
            check(1.3 <= med <= 1.7, f"cpu-usage every 1.5 s, not a rounded 1 or 2 (median gap {med:.3f} s, "
                                     f"gaps {[round(g, 3) for g in gaps]})")
        rate = [r for r in recs if r.get("name") == "testapp.requests"]
        check(bool(rate) and all("/ 1.5 sec)" in r.get("displayName", "") for r in rate),
              f"the meter's rate is per 1.5 s ({rate[:1]})")
        # The runtime's RefreshInterval is 1.5 too: the rate's publications are 1.5 s apart (or a
        # multiple, when an interval had nothing to say).
        # One publication writes each series' event in turn: under load two of them came 2 ms
        # apart, so events within 0.2 s of each other are one publication.
        times = []
        for ts in sorted({when(r["timestamp"]) for r in rate}):
            if not times or ts - times[-1][-1] > 0.2:
                times.append([ts])
            else:
                times[-1].append(ts)
        times = [g[0] for g in times]
        mgaps = [b - a for a, b in zip(times, times[1:])]
        check(bool(mgaps) and all(abs(g / 1.5 - round(g / 1.5)) < 0.1 and round(g / 1.5) >= 1 for g in mgaps),
              f"the meter publishes every 1.5 s (gaps {[round(g, 3) for g in mgaps]})")
    finally:
        w.close()

    # Under dotnet-monitor's minimum, or not a number as .NET reads one: start-up stops, naming it.
    for bad in ("0.5", "1,5"):
        with tempfile.TemporaryDirectory(prefix="dotmon-interval-bad-") as tmp:
            env = dict(os.environ, TMPDIR=tmp, DotnetMonitor_GlobalCounter__IntervalSeconds=bad)
            p = subprocess.run([os.environ["DOTMON_BIN"], "collect", "--no-auth", "--urls", "http://127.0.0.1:0",
                                "--metrics", "false"], env=env, capture_output=True, text=True, timeout=60)
            check(p.returncode != 0 and "GlobalCounter:IntervalSeconds" in p.stderr,
                  f"IntervalSeconds={bad}: start-up stops naming the key (exit {p.returncode})")
    return verdict("interval_fraction")


if __name__ == "__main__":
    sys.exit(main())
