#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""`dotmon convert` against a hostile file (issue 28 item 2): before, it grew 1:1 with the file.

gcheap_attack --file writes 160 MiB of a heap walk that never ends (endless pending edges; edgeless
nodes). `dotmon convert --format gcdump` with DOTMON_MEMORY_LIMIT_MB=32 stops with exit 1 and an
error naming the limit and DOTMON_MEMORY_LIMIT_MB, its peak RSS under 48 MB; without the setting
the same file is read whole (the default budget, 2 GiB, is not reached) and fails only for being
unfinished.

The CPU profile's tables (`--format speedscope`, events/ev_symbols.c) are charged exactly: 64 MiB
of ever-new methods named by 30,000 characters (gcheap_attack methods) are read whole under
DOTMON_MEMORY_LIMIT_MB=32 (names cut at 1,024 bytes: ~1 MiB kept; uncut they were 33 MB), peak
RSS under 48 MB; under DOTMON_MEMORY_LIMIT_MB=1 convert stops at the profile's memory share.

Needs DOTMON_BIN and DOTMON_GCHEAP_ATTACK.
"""

import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from dmtest import FAILS, SANITIZED, check  # noqa: E402


def convert(path, env, fmt="gcdump"):
    """convert's exit code, its stderr, and its own peak RSS in KiB (os.wait4: this child's)."""
    p = subprocess.Popen([os.environ["DOTMON_BIN"], "convert", "--format", fmt, path, "-o", path + "." + fmt],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, **env))
    err = p.stderr.read()
    p.stderr.close()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, err.strip(), ru.ru_maxrss


def main():
    tmp = tempfile.mkdtemp(prefix="cvbudget")
    path = os.path.join(tmp, "methods.nettrace")
    subprocess.run([os.environ["DOTMON_GCHEAP_ATTACK"], "--file", path, "methods", "64"], check=True)
    code, err, peak = convert(path, {"DOTMON_MEMORY_LIMIT_MB": "32"}, "speedscope")
    check(code == 1 and "the stream ends early" in err,
          f"speedscope, 32 MiB: names cut, read whole, unfinished ({code}: {err[:300]})")
    if not SANITIZED:
        check(peak is not None and peak < 48 * 1024, f"speedscope: peak RSS {peak} KiB under 48 MiB")
    code, err, _ = convert(path, {"DOTMON_MEMORY_LIMIT_MB": "1"}, "speedscope")
    check(code == 1 and "more than 1 MiB (DOTMON_MEMORY_LIMIT_MB)" in err and "memory share" in err,
          f"speedscope, 1 MiB: stopped at the profile's share ({code}: {err[:300]})")
    os.unlink(path)
    for kind in ("edges", "nodes"):
        path = os.path.join(tmp, f"{kind}.nettrace")
        subprocess.run([os.environ["DOTMON_GCHEAP_ATTACK"], "--file", path, kind, "160"], check=True)
        code, err, peak = convert(path, {"DOTMON_MEMORY_LIMIT_MB": "32"})
        check(code == 1 and "more than 32 MiB (DOTMON_MEMORY_LIMIT_MB)" in err,
              f"{kind}: exit 1 naming the 32 MiB limit ({code}: {err[:300]})")
        if not SANITIZED:
            check(peak is not None and peak < 48 * 1024, f"{kind}: peak RSS {peak} KiB under 48 MiB")
        os.unlink(path)
    path = os.path.join(tmp, "edges-small.nettrace")
    subprocess.run([os.environ["DOTMON_GCHEAP_ATTACK"], "--file", path, "edges", "40"], check=True)
    code, err, _ = convert(path, {"DOTMON_MEMORY_LIMIT_MB": ""})
    check(code == 1 and "ended before the induced GC did" in err,
          f"within the default budget: read whole, unfinished ({code}: {err[:200]})")
    os.unlink(path)
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
