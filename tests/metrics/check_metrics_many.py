#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""/metrics is never cut (issue 28 item 3): twelve real .NET test apps, one dotmon.

The body used to be built in a 64 KiB capped buffer: with 8 apps it ended mid-line. Now it is
streamed (chunked) family by family. Twelve apps (tests/app, started in parallel) in a private
TMPDIR, GlobalCounter:IntervalSeconds=1, the app's meter and counters configured; once every app's
series have arrived (each pid the same series count, twice in a row), checks on the metrics URL:
  - 200, Content-Type text/plain; version=0.0.4, Transfer-Encoding: chunked, a body over 64 KiB
    that ends with a newline, every line parses;
  - all 12 pids with dotmon_process_metrics_up 1 and the same number of series each;
  - `promtool check metrics` finds no error (Debian's prometheus package; skipped if absent);
  - HEAD on the metrics URL and on the API URL: 200, the same Content-Type, no body;
  - GET on the API URL: the same families and every pid's series;
  - read as raw chunks: two or more, each one ending at the end of a line.
Prints the figures: body size, series per pid, time to scrape (median of 5).

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE/DOTNET_ROOT.
"""

import concurrent.futures
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, App, check, close_log, free_port, http_request, prom_by_pid, stop, wait_for  # noqa: E402

APPS = 12


def request(port, method="GET", path="/metrics"):
    """(status, headers dict lower-cased, body text, seconds)."""
    t0 = time.monotonic()
    r, body = http_request(port, path, method, timeout=20)
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body.decode(), time.monotonic() - t0


def raw_chunks(port):
    """GET /metrics over a plain socket: the chunk sizes and the de-chunked body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    s.close()
    head, _, rest = data.partition(b"\r\n\r\n")
    sizes, body = [], b""
    while rest:
        line, _, rest = rest.partition(b"\r\n")
        n = int(line.split(b";")[0], 16)
        if n == 0:
            break
        body += rest[:n]
        sizes.append((n, rest[n - 1:n]))
        rest = rest[n + 2:]
    return head.decode(), sizes, body.decode()


def per_pid(text):
    """{pid: sample lines}, the families (HELP names), lines that do not parse."""
    by_pid, families, bad = prom_by_pid(text)
    return {p: sum(f.values()) for p, f in by_pid.items()}, families, bad


def main():
    tmp = tempfile.mkdtemp(prefix="dmmany")
    os.chmod(tmp, 0o700)
    apps, dm, log = [], None, None
    t_start = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(APPS) as ex:
            futures = [ex.submit(App, tmp) for _ in range(APPS)]
            for f in futures:
                try:
                    apps.append(f.result())
                except Exception as e:  # noqa: BLE001 - the others are still killed below
                    check(False, f"a test app started: {e}")
        if FAILS:
            return
        print(f"{APPS} apps ready in {time.monotonic() - t_start:.1f} s", flush=True)
        pids = sorted(str(a.pid) for a in apps)
        aport, mport = free_port(), free_port()
        env = dict(os.environ, TMPDIR=tmp,
                   DotnetMonitor_GlobalCounter__IntervalSeconds="1",
                   DotnetMonitor_Metrics__Meters__0__MeterName="TestApp.Meter",
                   DotnetMonitor_Metrics__Providers__0__ProviderName="TestApp.Counters")
        log = open(os.path.join(tmp, "dotmon.log"), "w+")
        dm = subprocess.Popen([os.environ["DOTMON_BIN"], "collect", "--no-auth",
                               "--urls", f"http://127.0.0.1:{aport}",
                               "--metricUrls", f"http://127.0.0.1:{mport}"],
                              stdout=subprocess.DEVNULL, stderr=log, env=env)

        # Every app's series: the same count for every pid, twice in a row.
        seen = {"prev": None, "last": None}

        def steady():
            try:
                seen["last"] = request(mport)
            except OSError:
                return False
            counts, _, _ = per_pid(seen["last"][2])
            now = tuple(counts.get(p, 0) for p in pids)
            same = len(set(now)) == 1 and now[0] >= 40 and now == seen["prev"]
            seen["prev"] = now
            return same

        wait_for(steady, 30, 1.0)
        last = seen["last"]
        check(last is not None, "/metrics answered")
        if last is None:
            return
        status, headers, text, _ = last
        counts, families, bad = per_pid(text)
        print(f"series per pid: {[counts.get(p, 0) for p in pids]}", flush=True)
        check(status == 200, f"GET /metrics: 200 ({status})")
        check(headers.get("content-type", "").startswith("text/plain; version=0.0.4"),
              f"Content-Type text/plain; version=0.0.4 ({headers.get('content-type')!r})")
        check(headers.get("transfer-encoding") == "chunked", "streamed: Transfer-Encoding: chunked")
        check(len(text.encode()) > 64 * 1024, f"the body is over the old 64 KiB cap ({len(text.encode())} bytes)")
        check(text.endswith("\n"), f"the body ends with a newline (…{text[-60:]!r})")
        check(not bad, f"every line parses ({len(bad)} do not: {bad[:2]})")
        check(sorted(counts) == pids, f"all {APPS} pids have series ({len(counts)} of {APPS})")
        n = {counts.get(p, 0) for p in pids}
        check(len(n) == 1 and min(n) >= 40, f"every pid has all its series: the same count for all ({sorted(n)})")
        for p in pids:
            check(re.search(rf'^dotmon_process_metrics_up\{{pid="{p}",[^\n]*\}} 1$', text, re.M) is not None,
                  f"pid {p}: dotmon_process_metrics_up 1")

        promtool = shutil.which("promtool")
        if promtool:
            r = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            errors = [ln for ln in (r.stdout + r.stderr).splitlines() if "error" in ln.lower()]
            check(r.returncode in (0, 3) and not errors,
                  f"promtool check metrics: no error (exit {r.returncode}; {errors[:2]})")
        else:
            print("skip promtool: not installed (Debian: prometheus)")

        for port, which in ((mport, "metrics URL"), (aport, "API URL")):
            st, hd, body, _ = request(port, "HEAD")
            check(st == 200 and hd.get("content-type", "").startswith("text/plain; version=0.0.4") and body == "",
                  f"HEAD /metrics on the {which}: 200, the same Content-Type, no body ({st}, {len(body)} bytes)")
        st, hd, body, _ = request(aport)
        c2, f2, bad2 = per_pid(body)
        check(st == 200 and body.endswith("\n") and not bad2 and f2 == families and sorted(c2) == pids and
              len(set(c2.values())) == 1,
              f"GET /metrics on the API URL: the same families ({len(f2)}) and every pid whole")

        # The pieces: each chunk is whole lines (the writer never cuts one).
        head, sizes, body = raw_chunks(mport)
        c3, _, bad3 = per_pid(body)
        check(len(sizes) >= 2 and all(last == b"\n" for _, last in sizes) and not bad3 and
              sorted(c3) == pids,
              f"streamed in {len(sizes)} chunks ({[n for n, _ in sizes]} bytes), each ending at a line's end")

        times = sorted(request(mport)[3] for _ in range(5))
        print(f"figures: {APPS} apps, body {len(text.encode())} bytes, {len(families)} families, "
              f"{min(n)} series per pid, scrape {times[2] * 1000:.1f} ms median "
              f"({times[0] * 1000:.1f}-{times[-1] * 1000:.1f})", flush=True)
    finally:
        for a in apps:
            a.kill()
        stop(dm)
        if dm is not None:
            check(dm.returncode == 0, f"dotmon stopped cleanly (exit {dm.returncode})")
        close_log(log)
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"total {time.monotonic() - t_start:.1f} s")


if __name__ == "__main__":
    main()
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        sys.exit(1)
    print("all checks passed")
