#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile heap walk on GET /gcdump under a 64 MiB memory cgroup (issue 28 item 2).

A fake runtime (gcheap_attack) answers each gcdump session with an endless heap walk: pending
edges that never get their node, edgeless nodes, 30,000-character type names (one kind per
session). Before the fix the graph grew to 0.6-1.2 GB. dotmon runs in a memory cgroup v1 of
64 MiB with a 48 MB budget (DOTMON_MEMORY_LIMIT_MB; a snapshot may take half): each /gcdump is
answered 507 problem+json naming Memory:LimitMB, dotmon stays alive and answers /processes between
the attacks, its peak RSS (VmHWM) stays under the limit and the cgroup never killed anything.

In a sanitizer build the cgroup's limit is 1 GiB (ASan's own overhead), the budget still 48 MB.

Needs root and a writable cgroup v1 memory hierarchy (else 77); DOTMON_BIN, DOTMON_GCHEAP_ATTACK.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import (FAILS, SANITIZED, check, close_log, free_port, http_try_get, join_cgroup,  # noqa: E402
                    memory_cgroup, remove_cgroup, start_dotmon, status_kib, stop)

# Under ASan dotmon's heap is several times larger (redzones, a 256 MB quarantine, shadow memory):
# the cgroup is only there to catch a runaway graph, the budget is the same.
LIMIT = (1024 if SANITIZED else 64) << 20
BUDGET_MB = 48
KINDS = ("endless pending edges", "edgeless nodes", "30,000-character type names")


def cg_read(cg, name):
    try:
        with open(os.path.join(cg, name)) as f:
            return f.read()
    except OSError:
        return ""


def main():
    cg = memory_cgroup("dotmon-gcheap", LIMIT, v1_only=True)
    if cg is None:
        print("skipped: needs root and a writable cgroup v1 memory hierarchy")
        return 77
    tmp = tempfile.mkdtemp(prefix="gcheap")
    os.chmod(tmp, 0o700)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    attacker, dm = None, None
    try:
        attacker = subprocess.Popen([os.environ["DOTMON_GCHEAP_ATTACK"], tmp], stdout=subprocess.PIPE, text=True)
        ready = attacker.stdout.readline()
        check(ready.startswith("ready "), f"the hostile runtime listens: {ready.strip()}")
        port = free_port()
        dm = start_dotmon(tmp, port, log, [attacker.pid], env={"DOTMON_MEMORY_LIMIT_MB": str(BUDGET_MB)})
        join_cgroup(cg, dm.pid)
        for kind in KINDS:
            t0 = time.time()
            st, ctype, body = http_try_get(port, f"/gcdump?pid={attacker.pid}")
            took = time.time() - t0
            try:
                problem = json.loads(body)
            except ValueError:
                problem = {}
            detail = problem.get("detail", "")
            check(st == 507 and ctype.startswith("application/problem+json") and "Memory:LimitMB" in detail,
                  f"{kind}: 507 problem naming Memory:LimitMB in {took:.1f} s ({st}: {detail[:300]})")
            time.sleep(0.3)  # a process the cgroup killed is reaped by then
            if not check(dm.poll() is None, f"{kind}: dotmon is alive (exit {dm.poll()})"):
                return 1
            st, _, body = http_try_get(port, "/processes")
            check(st == 200 and str(attacker.pid).encode() in body, f"{kind}: /processes answers ({st})")
        hwm = status_kib(dm.pid, "VmHWM")
        rss = status_kib(dm.pid)
        peak = int(cg_read(cg, "memory.max_usage_in_bytes") or 0)
        oom = cg_read(cg, "memory.oom_control")
        print(f"dotmon: peak RSS {hwm / 1024:.1f} MB, RSS now {rss / 1024:.1f} MB; cgroup peak "
              f"{peak / 1048576:.1f} MB of {LIMIT >> 20}; {oom.split()}")
        check(hwm * 1024 < LIMIT, f"peak RSS {hwm / 1024:.1f} MB under the {LIMIT >> 20} MiB limit")
        check("oom_kill 0" in oom or "oom_kill" not in oom, "the cgroup killed nothing")
        if not SANITIZED:
            check(rss < 16 * 1024, f"RSS back to {rss / 1024:.1f} MB (under 16 MB) after the 507s")
    finally:
        stop(dm)
        if attacker is not None:
            attacker.kill()
            attacker.wait()
        remove_cgroup(cg)
        close_log(log)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
