#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A heap snapshot turned into a .gcdump by dotmon, against Microsoft's dotnet-gcdump (issue 19).

The real test app and the real dotmon in a private TMPDIR. The app runs `heap-graph N M SIZE`
(N TestApp.GcDumpHolder rooted by a static list, each with M byte[SIZE], plus one more held only by
a GCHandle); POST /trace with the heap-snapshot provider (Microsoft-Windows-DotNETRuntime,
keywords 0x1980001, level 5, rundown on) saves the session's nettrace; then:
  - `dotmon convert FILE --format gcdump -o OURS` exits 0;
  - `dotnet-gcdump convert FILE -o THEIRS` makes Microsoft's file from the same nettrace;
  - the two files are the same byte for byte up to CreationTool (then only the trailer's offsets
    differ, by the names' lengths);
  - `dotnet-gcdump report` on both: the same summary (GC Heap bytes, objects) and the same rows,
    compared as sorted lists (ties in the report's order follow type indexes; the type tables come
    out the same, so in practice the reports are identical line for line); the holder type has
    N + 1 objects and `System.Byte[] (Bytes > 10K)` (SIZE 10000..99999; `(Bytes > 1K)` for
    1001..9999, plain `System.Byte[]` up to 1000) at least (N + 1) * M;
  - the file read byte-by-byte and whole by dotmon convert from stdin gives the same bytes.
With --save FILE: also copy the nettrace there (to refresh a fixture); --graph N M SIZE: other
numbers than 1000 4 10000.

Environment: DOTMON_BIN, DOTMON_TESTAPP_DIR, DOTNET_EXE, DOTMON_GCDUMP_TOOL (dotnet-gcdump; the
test skips with 77 when it is missing and cannot be installed).
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, Watched, check, dotnet_root  # noqa: E402

N, M, SIZE = 1000, 4, 10000
PROVIDERS = {"Providers": [{"Name": "Microsoft-Windows-DotNETRuntime", "EventLevel": 5,
                            "Keywords": "0x1980001"}],
             "RequestRundown": True, "BufferSizeInMB": 256}


def size_class(size):
    for lim, name in ((10000, "1K"), (100000, "10K"), (1000000, "100K"), (10000000, "1M"),
                      (100000000, "10M")):
        if size < lim:
            return name
    return "100M"


def capture(w, seconds=8):
    c = http.client.HTTPConnection("127.0.0.1", w.port, timeout=120)
    c.request("POST", f"/trace?pid={w.app.pid}&durationSeconds={seconds}", body=json.dumps(PROVIDERS),
              headers={"Content-Type": "application/json"})
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, body


def tool_env():
    return dict(os.environ, DOTNET_ROOT=dotnet_root(), DOTNET_CLI_TELEMETRY_OPTOUT="1",
                DOTNET_NOLOGO="1")


def report(tool, path):
    r = subprocess.run([tool, "report", path], capture_output=True, text=True, timeout=300,
                       env=tool_env())
    return r.returncode, r.stdout, r.stderr


def parse_report(text):
    """(summary lines, [(bytes, count, type)])."""
    summary, rows = [], []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(GC Heap .*)$", line)
        if m:
            summary.append((m.group(2), int(m.group(1).replace(",", ""))))
            continue
        m = re.match(r"\s*([\d,]+)\s+([\d,]+)\s+(.*)$", line)
        if m:
            rows.append((int(m.group(1).replace(",", "")), int(m.group(2).replace(",", "")),
                         m.group(3).strip()))
    return summary, rows


def main():
    global N, M, SIZE
    save = sys.argv[sys.argv.index("--save") + 1] if "--save" in sys.argv else None
    if "--graph" in sys.argv:
        k = sys.argv.index("--graph")
        N, M, SIZE = (int(x) for x in sys.argv[k + 1:k + 4])
    tool = os.environ.get("DOTMON_GCDUMP_TOOL", "")
    if not tool or not os.path.exists(tool):
        print("skipped: dotnet-gcdump is not installed (DOTMON_GCDUMP_TOOL)")
        return 77
    w = Watched("dm-gcdump-")
    try:
        check(w.app.command(f"heap-graph {N} {M} {SIZE}") == f"ok heap-graph n={N} m={M} size={SIZE}",
              "the test app holds the heap graph")
        status, trace = capture(w)
        check(status == 200 and len(trace) > 1000, f"POST /trace with the heap-snapshot provider: {status}, "
              f"{len(trace)} bytes")
        nettrace = os.path.join(w.tmp, "heap.nettrace")
        with open(nettrace, "wb") as f:
            f.write(trace)
        if save:
            shutil.copyfile(nettrace, save)
        ours = os.path.join(w.tmp, "ours.gcdump")
        theirs = os.path.join(w.tmp, "theirs.gcdump")
        r = subprocess.run([os.environ["DOTMON_BIN"], "convert", nettrace, "--format", "gcdump", "-o", ours],
                           capture_output=True, text=True, timeout=120)
        check(r.returncode == 0, f"dotmon convert --format gcdump exits 0 ({r.stderr.strip()})")
        r2 = subprocess.run([os.environ["DOTMON_BIN"], "convert", "-", "--format", "gcdump"], input=trace,
                            capture_output=True, timeout=120)
        same = os.path.exists(ours) and open(ours, "rb").read() == r2.stdout
        check(r2.returncode == 0 and same, "stdin to stdout gives the same file")
        r = subprocess.run([tool, "convert", nettrace, "-o", theirs], capture_output=True, text=True, timeout=300,
                           env=tool_env())
        check(r.returncode == 0 and os.path.exists(theirs), f"dotnet-gcdump convert exits 0 ({r.stderr.strip()})")
        # Byte for byte but for CreationTool ("dotmon" against "dotnet-gcdump") and the trailer's
        # offsets after it: the tail is 0D <i32 len> <tool>, 06 06, four i32.
        a = open(ours, "rb").read() if os.path.exists(ours) else b""
        b = open(theirs, "rb").read() if os.path.exists(theirs) else b""
        ka, kb = len(a) - 18 - 5 - len("dotmon"), len(b) - 18 - 5 - len("dotnet-gcdump")
        check(ka > 0 and ka == kb and a[:ka] == b[:kb] and a[ka:ka + 11] == b"\x0d\x06\x00\x00\x00dotmon",
              f"the same file as dotnet-gcdump's but for CreationTool ({len(a)} and {len(b)} bytes)")
        rc1, out1, err1 = report(tool, ours)
        rc2, out2, err2 = report(tool, theirs)
        check(rc1 == 0, f"dotnet-gcdump report reads dotmon's file ({err1.strip()[:300]})")
        check(rc2 == 0, f"dotnet-gcdump report reads its own file ({err2.strip()[:300]})")
        s1, rows1 = parse_report(out1)
        s2, rows2 = parse_report(out2)
        print(f"     ours: {s1}, {len(rows1)} rows, {os.path.getsize(ours)} bytes; "
              f"theirs: {s2}, {len(rows2)} rows, {os.path.getsize(theirs)} bytes")
        check(s1 == s2 and len(s1) >= 2, f"the same summary: {s1} against {s2}")
        check(sorted(rows1) == sorted(rows2), "the same rows (sorted)")
        if sorted(rows1) != sorted(rows2):
            a, b = set(rows1), set(rows2)
            for x in sorted(a - b)[:20]:
                print("     only ours:  ", x)
            for x in sorted(b - a)[:20]:
                print("     only theirs:", x)
        holders = [r for r in rows1 if r[2].startswith("TestApp.GcDumpHolder ") or r[2] == "TestApp.GcDumpHolder"]
        check(len(holders) == 1 and holders[0][1] == N + 1, f"TestApp.GcDumpHolder: {holders}")
        big = f"System.Byte[] (Bytes > {size_class(SIZE)})" if SIZE > 1000 else "System.Byte[]"
        arrays = [r for r in rows1 if r[2].split("  [")[0] == big]
        check(len(arrays) == 1 and arrays[0][1] >= (N + 1) * M, f"{big}: {arrays}")
    finally:
        w.close()
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
