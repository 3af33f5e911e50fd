#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Memory comes back after /gcdump (issue 28 item 2): the real test app holds about a million
objects (`heap-graph 500000 0 0`: holders and their empty arrays), and dotmon answers four consecutive GET /gcdump; dotmon's RSS
before each (measured once the request has ended) stays within RSS_SLACK_KIB of its RSS before the
first, and every answer is a whole .gcdump. Before the fix: 30, 53, 77, 99 MB.

Normal build only (sanitizers keep their own heaps: skip 77). Needs DOTMON_BIN, DOTMON_TESTAPP_DIR,
DOTNET_EXE.
"""

import http.client
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, free_port, sanitized, start_dotmon, status_kib, stop  # noqa: E402

OBJECTS = int(os.environ.get("DOTMON_GCDUMP_OBJECTS", "1000000"))
ROUNDS = int(os.environ.get("DOTMON_GCDUMP_ROUNDS", "4"))
RSS_SLACK_KIB = 6 * 1024


def gcdump(port, pid):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    c.request("GET", f"/gcdump?pid={pid}")
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def settled_rss(pid, seconds=3.0):
    """RSS once it stops falling (the pool frees the graph after the last byte is out)."""
    deadline = time.time() + seconds
    last = status_kib(pid)
    while time.time() < deadline:
        time.sleep(0.3)
        now = status_kib(pid)
        if now >= last:
            return now
        last = now
    return last


def main():
    if not os.environ.get("DOTNET_EXE"):
        print("skipped: no dotnet")
        return 77
    tmp = tempfile.mkdtemp(prefix="gcrss")
    os.chmod(tmp, 0o700)
    log = open(os.path.join(tmp, "dotmon.log"), "w+")
    app, dm = None, None
    try:
        app = App(tmp)
        reply = app.command(f"heap-graph {OBJECTS // 2} 0 0")  # a holder and its empty byte[][] each
        check(reply.startswith("ok"), f"the app holds {OBJECTS} objects: {reply}")
        port = free_port()
        dm = start_dotmon(tmp, port, log, [app.pid])
        if sanitized(dm.pid):
            print("skipped: a sanitizer build keeps freed memory")
            return 77
        time.sleep(0.5)
        rss = []
        for i in range(ROUNDS):
            rss.append(settled_rss(dm.pid))
            t0 = time.time()
            st, body = gcdump(port, app.pid)
            check(st == 200 and body[:22] == b"\x14\x00\x00\x00!FastSerialization",
                  f"gcdump {i + 1}: 200 and a .gcdump ({st}, {len(body)} bytes, {time.time() - t0:.1f} s)")
        rss.append(settled_rss(dm.pid))
        print("dotmon RSS (MB) before each gcdump, then after the last: " +
              ", ".join(f"{r / 1024:.1f}" for r in rss))
        check(max(rss[1:]) - rss[0] <= RSS_SLACK_KIB,
              f"RSS comes back to within {RSS_SLACK_KIB // 1024} MB of {rss[0] / 1024:.1f} MB "
              f"(at most {max(rss[1:]) / 1024:.1f} MB)")
    finally:
        if app is not None:
            app.kill()
        stop(dm)
        if FAILS:
            log.flush()
            log.seek(0)
            print(log.read()[-3000:])
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
