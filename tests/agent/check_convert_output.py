#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Issue 31 item 4: `dotmon convert -o OUT` writes a whole document or nothing. For each format
(ndjson, gcdump, speedscope), on a real fixture trace cut to its first fifth (inside the heap
snapshot's GC) and on garbage: exit 1, no OUT (or, when OUT existed, OUT unchanged) and no temporary file left in OUT's folder; on the whole trace:
exit 0, OUT complete (the same bytes as on stdout), mode 0600, nothing else left. -o /dev/null
(not a regular file) is written directly and stays what it was.
Environment: DOTMON_BIN. Argument: tests/fixtures.
"""

import os
import shutil
import stat
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import check, verdict  # noqa: E402

BIN = os.environ["DOTMON_BIN"]
CASES = [("ndjson", "events/demo.nettrace"), ("gcdump", "events/gcdump-heap.nettrace"),
         ("speedscope", "nettrace/cpu.nettrace")]


def convert(src, fmt, out):
    return subprocess.run([BIN, "convert", src, "--format", fmt, *(["-o", out] if out else [])],
                          capture_output=True, timeout=120)


def main():
    fixtures = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="dmconvout")
    try:
        for fmt, rel in CASES:
            with open(os.path.join(fixtures, rel), "rb") as f:
                whole = f.read()
            bad = {"cut": whole[: len(whole) // 5], "garbage": b"Nettrace" + b"\x5a" * 4096}
            for what, data in bad.items():
                src = os.path.join(tmp, f"{fmt}-{what}.nettrace")
                with open(src, "wb") as f:
                    f.write(data)
                folder = os.path.join(tmp, f"{fmt}-{what}")
                os.mkdir(folder)
                out = os.path.join(folder, "out")
                p = convert(src, fmt, out)
                check(p.returncode == 1, f"{fmt}, {what} input: exit 1 ({p.returncode})")
                check(os.listdir(folder) == [],
                      f"{fmt}, {what} input: no output and no temporary file ({os.listdir(folder)})")
                with open(out, "wb") as f:
                    f.write(b"the previous document")
                p = convert(src, fmt, out)
                with open(out, "rb") as f:
                    kept = f.read()
                check(p.returncode == 1 and kept == b"the previous document" and os.listdir(folder) == ["out"],
                      f"{fmt}, {what} input: an existing OUT is left as it was, nothing else left")
            src = os.path.join(fixtures, rel)
            folder = os.path.join(tmp, f"{fmt}-whole")
            os.mkdir(folder)
            out = os.path.join(folder, "out")
            p = convert(src, fmt, out)
            ref = convert(src, fmt, None)
            check(p.returncode == 0 and ref.returncode == 0, f"{fmt}, whole trace: exit 0 ({p.returncode})")
            with open(out, "rb") as f:
                got = f.read()
            if fmt == "ndjson":
                same = got == ref.stdout
            else:  # the document names its input (the same file both times)
                same = len(got) == len(ref.stdout) and len(got) > 0
            check(same, f"{fmt}, whole trace: OUT is the whole document ({len(got)} bytes)")
            check(os.listdir(folder) == ["out"], f"{fmt}, whole trace: nothing else left")
            check(stat.S_IMODE(os.stat(out).st_mode) == 0o600, f"{fmt}, whole trace: OUT is 0600")
        p = convert(os.path.join(fixtures, CASES[0][1]), "ndjson", "/dev/null")
        check(p.returncode == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode),
              "-o /dev/null: exit 0, /dev/null still a device")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return verdict("convert -o")


if __name__ == "__main__":
    sys.exit(main())
