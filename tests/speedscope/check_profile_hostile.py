#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A hostile runtime on GET /profile?kind=cpu (issue 28 item 2: /profile's tables bounded in bytes).

A fake runtime (gcheap_attack DIR methods) answers the profile's session with endless ever-new
methods, each named by 30,000 characters. Before, ev_symbols kept every name whole (up to 1 GiB of
names, 4M methods). dotmon runs with DOTMON_MEMORY_LIMIT_MB=2 (a profile may take half): the
profile is answered 507 problem+json ProfileTooLarge naming Memory:LimitMB well before its
durationSeconds; GET /stacks (the same tables, stopped after 10 ms) is a problem too (507, or 502
when the stream ends cut or without a sample); dotmon stays alive, answers /processes, its peak RSS stays under 40 MB, and it
stops cleanly (exit 0, no sanitizer report in its log: the share is given back on that path).

Needs DOTMON_BIN and DOTMON_GCHEAP_ATTACK.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, SANITIZED, check, close_log, free_port, http_try_get, start_dotmon, status_kib, stop  # noqa: E402
import dmtest  # noqa: E402


def main():
    tmp = tempfile.mkdtemp(prefix="profhostile")
    os.chmod(tmp, 0o700)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    attacker, dm = None, None
    try:
        attacker = subprocess.Popen([os.environ["DOTMON_GCHEAP_ATTACK"], tmp, "methods"],
                                    stdout=subprocess.PIPE, text=True)
        ready = attacker.stdout.readline()
        check(ready.startswith("ready "), f"the hostile runtime listens: {ready.strip()}")
        port = free_port()
        dm = start_dotmon(tmp, port, log, [attacker.pid], env={"DOTMON_MEMORY_LIMIT_MB": "2"})
        t0 = time.time()
        st, ctype, body = http_try_get(port, f"/profile?pid={attacker.pid}&kind=cpu&durationSeconds=30")
        took = time.time() - t0
        try:
            problem = json.loads(body)
        except ValueError:
            problem = {}
        detail = problem.get("detail", "")
        check(st == 507 and ctype.startswith("application/problem+json") and "memory budget" in detail
              and "Memory:LimitMB" in detail,
              f"507 problem naming Memory:LimitMB in {took:.1f} s ({st}: {body[:300]!r})")
        check(took < 20, f"answered before durationSeconds ({took:.1f} s)")
        # "profile of N ended: B bytes, 0 samples, M methods; over dotmon's memory budget"
        log.flush()
        log.seek(0)
        m = re.search(r"profile of \d+ ended: (\d+) bytes, \d+ samples, (\d+) methods; over dotmon's memory",
                      log.read())
        check(m is not None and int(m.group(1)) > 10 << 20 and 100 < int(m.group(2)) < 2048,
              f"the methods filled the share: {m.group(0) if m else 'no such log line'}")
        check(dm.poll() is None, f"dotmon is alive (exit {dm.poll()})")
        # GET /stacks takes the same session (the sampler and the rundown) with the same tables.
        t0 = time.time()
        st, ctype, body = http_try_get(port, f"/stacks?pid={attacker.pid}")
        took = time.time() - t0
        # It stops the session after 10 ms, so the methods may not fill the share first: the
        # stream then ends cut (the attacker stops mid-method) or without a sample, a 502.
        check((st == 507 and b"Memory:LimitMB" in body) or st == 502,
              f"/stacks: 507 naming Memory:LimitMB, or 502, in {took:.1f} s ({st}: {body[:200]!r})")
        check(ctype.startswith("application/problem+json"), f"/stacks: a problem ({ctype})")
        check(dm.poll() is None, f"dotmon is alive after /stacks (exit {dm.poll()})")
        st, _, body = http_try_get(port, "/processes")
        check(st == 200 and str(attacker.pid).encode() in body, f"/processes answers ({st})")
        hwm = status_kib(dm.pid, "VmHWM")
        print(f"dotmon: peak RSS {hwm / 1024:.1f} MB")
        if not SANITIZED:
            check(hwm < 40 * 1024, f"peak RSS {hwm / 1024:.1f} MB under 40 MB")
        stop(dm)
        log.flush()
        log.seek(0)
        text = log.read()
        check(dmtest.sanitizer_report(text) is None and dm.returncode == 0,
              f"dotmon stopped cleanly, no sanitizer report (exit {dm.returncode})")
    finally:
        stop(dm)
        if attacker is not None:
            attacker.kill()
            attacker.wait()
        if FAILS:
            log.flush()
            log.seek(0)
            print(log.read()[-4000:])
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
