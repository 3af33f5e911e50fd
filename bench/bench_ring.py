#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""CollectTrace's ring mode (issue 18): dotmon's memory with a ring against RingBufferSizeMB, and
its CPU, on a busy app. Nothing is asserted; not part of `make test`.

  bench_ring.py [--seconds 120] [--sizes 8,32] [--gc-ms 5] [--pre 3600]

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.

One test app with `--gc-ms` (a GC.Collect every N ms: a steady stream of GC events). For each
configuration, a fresh dotmon (connect mode, /metrics off) runs --seconds:
  none:      no collection rule;
  ring <MB>: one rule, GCPause ThresholdMs 3600000 (never fires), CollectTrace of
             Microsoft-Windows-DotNETRuntime keyword 0x1 (GC) at Verbose with PreTriggerSeconds
             --pre (large: the ring fills to its size) and RingBufferSizeMB <MB>.
Every 5 s: dotmon's VmRSS and the ring's bytes (/collectionrules/Ring's "ring"). Printed per
configuration: the ring's bytes at the end and its limit, blocks and events discarded, dotmon's
VmRSS at the end and its VmHWM (against RingBufferSizeMB + 8 MB), and its CPU seconds.
"""

import argparse
import json
import os
import sys
import tempfile
import time

from bench_metrics import cpu_s

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "support"))
from dmtest import App, free_port, start_dotmon, status_kib, stop  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "rules"))
sys.dont_write_bytecode = True
from check_rules_run import get  # noqa: E402


def ring_rule(mb, pre):
    trace = {"Name": "t", "Type": "CollectTrace",
             "Settings": {"Providers": [{"Name": "Microsoft-Windows-DotNETRuntime", "Keywords": "0x1",
                                         "EventLevel": "Verbose"}],
                          "PreTriggerSeconds": pre, "RingBufferSizeMB": mb, "Egress": "files"}}
    return {"Ring": {"Trigger": {"Type": "GCPause", "Settings": {"ThresholdMs": 3600000}},
                     "Actions": [trace]}}


def one(tmp, app, label, rules, seconds):
    cfg = {"Egress": {"FileSystem": {"files": {"DirectoryPath": os.path.join(tmp, "files")}}}}
    if rules:
        cfg["CollectionRules"] = rules
    path = os.path.join(tmp, f"settings-{label}.json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    port = free_port()
    api = f"http://127.0.0.1:{port}"
    with open(os.path.join(tmp, f"dotmon-{label}.log"), "w") as log:
        dm = start_dotmon(tmp, port, log, [app.pid], args=("--configuration-file-path", path))
        try:
            time.sleep(3)
            c0 = cpu_s(dm.pid)
            t0 = time.time()
            ring = {}
            while time.time() - t0 < seconds:
                time.sleep(5)
                if rules:
                    st, _, body = get(f"{api}/collectionrules/Ring?pid={app.pid}")
                    ring = json.loads(body).get("ring", {}) if st == 200 else {}
                print(f"  {label} t={time.time() - t0:5.0f} s rss={status_kib(dm.pid, 'VmRSS') / 1024:6.1f} MiB "
                      f"ring={ring.get('bytes', 0) / 1048576:6.2f} MiB span={ring.get('spanSeconds', 0):6.1f} s",
                      flush=True)
            cpu = cpu_s(dm.pid) - c0
            rss, hwm = status_kib(dm.pid, "VmRSS") / 1024, status_kib(dm.pid, "VmHWM") / 1024
        finally:
            stop(dm)
    return {"label": label, "ring_mib": ring.get("bytes", 0) / 1048576,
            "limit_mib": ring.get("bytesLimit", 0) / 1048576, "blocks_discarded": ring.get("blocksDiscarded", 0),
            "events_discarded": ring.get("eventsDiscarded", 0), "rss_mib": rss, "hwm_mib": hwm,
            "cpu_s": cpu, "seconds": seconds}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--sizes", default="8,32")
    ap.add_argument("--gc-ms", type=int, default=5)
    ap.add_argument("--pre", type=int, default=3600)
    args = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory(prefix="dmbenchring") as tmp:
        os.chmod(tmp, 0o700)
        app = App(tmp, "--gc-ms", str(args.gc_ms))
        try:
            results.append(one(tmp, app, "none", None, args.seconds))
            for mb in (int(x) for x in args.sizes.split(",")):
                results.append(one(tmp, app, f"ring{mb}", ring_rule(mb, args.pre), args.seconds))
        finally:
            app.kill()
    print("config   ring MiB / limit   blocks/events discarded   VmRSS MiB  VmHWM MiB  CPU s")
    for r in results:
        print(f"{r['label']:8} {r['ring_mib']:7.2f} / {r['limit_mib']:5.0f}   {r['blocks_discarded']:8} / "
              f"{r['events_discarded']:10}   {r['rss_mib']:9.1f}  {r['hwm_mib']:9.1f}  {r['cpu_s']:5.1f}")
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
